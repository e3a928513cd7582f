/* SPDX-License-Identifier: MIT */
/*
 * A bound on a migrant's home, from counts alone (no simulation). The planner keeps a migrant
 * as local as it is: inside one domain of the deepest level that holds it now, and on no more
 * domains of each level below than it spans now. With the jobs of a set gone, a domain can
 * give at most its free devices plus theirs. So in some domain D of that deepest level, for
 * every level below, the most generous sub-domains of D, as many as the migrant spans at that
 * level, must add up to its size, less the devices the request takes inside the candidate;
 * if no D passes, no simulation of the set can find the migrant a home. The bound ignores
 * where in the candidate the request lands and every other migrant (both only take room), so
 * it never rules out a set that could work. Each level is checked on its own (necessary, not
 * sufficient).
 */
#include "defrag_internal.h"

#include <stdlib.h>
#include <string.h>

static int cmp_desc_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a < b) - (a > b);
}

/* The nodes the devices of the jobs S sit on, sorted, one entry per device. */
static int set_nodes(struct planner *P, const uint32_t *S, uint32_t n, size_t *k)
{
	const struct tp_topology *t = P->t;
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += P->scan.jobs[S[i]].j->ndev;
	if (defrag_grow_u32(P->a, &P->roombuf, &P->cap_room, total + 1))
		return TP_ENOMEM;
	*k = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct tp_job_impl *j = P->scan.jobs[S[i]].j;
		for (uint32_t x = 0; x < j->ndev; x++)
			P->roombuf[(*k)++] = t->dev_node[j->devs[x]];
	}
	qsort(P->roombuf, *k, sizeof *P->roombuf, defrag_cmp_u32);
	return 0;
}

/* Entries of the sorted set below `node`. */
static size_t set_below(const struct planner *P, size_t nset, uint32_t node)
{
	size_t lo = 0, hi = nset;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (P->roombuf[mid] < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether the `want` most generous domains of level u below domain d of level l (-1: the
 * whole cluster) can give `size` devices once the set left. The request takes P->count
 * devices of the candidate, which has `cand` devices free once the set left: a domain that
 * holds the candidate gives that many less, and the domains inside it together give at most
 * cand - P->count. */
static bool level_room(struct planner *P, int l, uint32_t d, unsigned u, uint32_t want,
                       uint32_t size, size_t nset, uint64_t cand)
{
	const struct tp_topology *t = P->t;
	const struct cscan *s = &P->scan;
	uint32_t e0, ne;
	defrag_desc_range(t, l, d, u, &e0, &ne);
	uint32_t *out = P->roomvals, *in = P->roomvals + ne, nout = 0, nin = 0;
	uint64_t insum = 0;
	for (uint32_t x = 0; x < ne; x++) {
		uint32_t f, cnt;
		tp_dom_nodes(t, u, e0 + x, &f, &cnt);
		size_t inset = set_below(P, nset, f + cnt) - set_below(P, nset, f);
		uint32_t v = P->c->free[u][e0 + x] + (uint32_t)inset;
		if (f >= s->node0 && f + cnt <= s->node0 + s->nnodes) {
			in[nin++] = v;
			insum += v;
		} else if (f <= s->node0 && f + cnt >= s->node0 + s->nnodes) {
			out[nout++] = v > P->count ? v - P->count : 0;
		} else {
			out[nout++] = v;
		}
	}
	uint64_t left = cand > P->count ? cand - P->count : 0;
	uint64_t incap = insum < left ? insum : left;
	qsort(out, nout, sizeof *out, cmp_desc_u32);
	qsort(in, nin, sizeof *in, cmp_desc_u32);
	/* i of the domains chosen inside the candidate, want - i outside */
	uint64_t osum = 0, isum = 0;
	uint32_t no = want < nout ? want : nout;
	for (uint32_t x = 0; x < no; x++)
		osum += out[x];
	for (uint32_t i = 0;; i++) {
		uint64_t got = osum + (isum < incap ? isum : incap);
		if (got >= size)
			return true;
		if (i >= nin || i >= want)
			return false;
		isum += in[i];
		if (want - i - 1 < no) { /* one fewer outside */
			no--;
			osum -= out[no];
		}
	}
}

/* The most domains of any level below `l` inside one domain of `l`, counted once per call. */
static uint32_t widest(struct planner *P, int l)
{
	const struct tp_topology *t = P->t;
	uint32_t *w = &P->room_widest[l + 1];
	if (*w)
		return *w;
	uint32_t most = 1;
	uint32_t nd = l < 0 ? 1 : t->lv[l].ndom;
	for (unsigned u = (unsigned)(l + 1); u <= tp_node_level(t); u++)
		for (uint32_t d = 0; d < nd; d++) {
			uint32_t e0, ne;
			defrag_desc_range(t, l, d, u, &e0, &ne);
			if (ne > most)
				most = ne;
		}
	return *w = most;
}

/* What domain d of level l can give a migrant once the set left, with the request's devices
 * taken out as level_room says. */
static uint64_t domain_gives(struct planner *P, unsigned l, uint32_t d, size_t nset,
                             uint64_t cand)
{
	const struct cscan *s = &P->scan;
	uint32_t f, cnt;
	tp_dom_nodes(P->t, l, d, &f, &cnt);
	uint64_t v = P->c->free[l][d] + (set_below(P, nset, f + cnt) - set_below(P, nset, f));
	uint64_t left = cand > P->count ? cand - P->count : 0;
	if (f >= s->node0 && f + cnt <= s->node0 + s->nnodes)
		return v < left ? v : left;
	if (f <= s->node0 && f + cnt >= s->node0 + s->nnodes)
		return v > P->count ? v - P->count : 0;
	return v;
}

/* The free devices of the candidate once the jobs S left (their nodes in P->roombuf, nset of
 * them). */
static uint64_t cand_after(const struct planner *P, size_t nset)
{
	const struct tp_topology *t = P->t;
	const struct cscan *s = &P->scan;
	uint64_t cand = set_below(P, nset, s->node0 + s->nnodes) - set_below(P, nset, s->node0);
	if (s->level >= 0)
		cand += P->c->free[s->level][s->dom];
	else
		for (uint32_t e = 0; e < t->lv[0].ndom; e++)
			cand += P->c->free[0][e];
	return cand;
}

/* Whether job j (its current spans `old`, one per level, and `level` the deepest level one of
 * whose domains holds it, -1: none) may have a home once the jobs S left: *room false when
 * the counts say it cannot. */
int defrag_home_room(struct planner *P, const uint32_t *S, uint32_t n,
                     const struct tp_job_impl *j, const uint32_t *old, int level, bool *room)
{
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	*room = true;
	size_t nset;
	int rc = set_nodes(P, S, n, &nset);
	if (rc)
		return rc;
	if (defrag_grow_u32(P->a, &P->roomvals, &P->cap_roomvals, 2 * (size_t)widest(P, level)))
		return TP_ENOMEM;
	uint64_t cand = cand_after(P, nset);
	uint32_t ndom = level < 0 ? 1 : t->lv[level].ndom;
	for (uint32_t d = 0; d < ndom; d++) {
		if (level >= 0 && domain_gives(P, (unsigned)level, d, nset, cand) < j->ndev)
			continue;
		bool ok = true;
		for (unsigned u = (unsigned)(level + 1); u <= nl && ok; u++)
			ok = level_room(P, level, d, u, old[u], j->ndev, nset, cand);
		if (ok)
			return 0;
	}
	*room = false;
	return 0;
}

/*
 * The joint bound: several migrants compete for the same room. A migrant kept inside one
 * domain of level l (its deepest level is l or deeper) lands in one domain of l that can give
 * at least its size (domain_gives). So, migrants sorted by size, largest first, the k largest
 * all land in domains of l that can give at least the k-th size, and those domains together
 * must give their sizes added up (the domains inside the candidate together at most what the
 * request leaves of it). A level with fewer than two such migrants is left to
 * defrag_home_room. Like it, the bound ignores where the request lands and how the domains'
 * devices sit below l, so it never rules out a set that could work.
 */
static int level_joint(struct planner *P, unsigned l, const uint32_t *size, uint32_t m,
                       size_t nset, uint64_t cand, bool *room)
{
	const struct tp_topology *t = P->t;
	const struct cscan *s = &P->scan;
	uint32_t nd = t->lv[l].ndom, smallest = size[m - 1];
	if (defrag_grow_u32(P->a, &P->jointbuf, &P->cap_joint, nd))
		return TP_ENOMEM;
	/* the domains that could hold the smallest migrant: outside the candidate from the
	 * front of jointbuf, inside it from the back */
	uint32_t *v = P->jointbuf, nout = 0, nin = 0;
	for (uint32_t d = 0; d < nd; d++) {
		uint64_t g = domain_gives(P, l, d, nset, cand);
		if (g < smallest)
			continue;
		uint32_t f, cnt;
		tp_dom_nodes(t, l, d, &f, &cnt);
		bool inside = f >= s->node0 && f + cnt <= s->node0 + s->nnodes;
		uint32_t gv = g > UINT32_MAX ? UINT32_MAX : (uint32_t)g;
		if (inside)
			v[nd - 1 - nin++] = gv;
		else
			v[nout++] = gv;
	}
	uint32_t *in = v + nd - nin;
	qsort(v, nout, sizeof *v, cmp_desc_u32);
	qsort(in, nin, sizeof *in, cmp_desc_u32);
	uint64_t left = cand > P->count ? cand - P->count : 0;
	uint64_t need = 0, osum = 0, isum = 0;
	uint32_t xo = 0, xi = 0;
	for (uint32_t k = 0; k < m; k++) {
		need += size[k];
		while (xo < nout && v[xo] >= size[k])
			osum += v[xo++];
		while (xi < nin && in[xi] >= size[k])
			isum += in[xi++];
		if (need > osum + (isum < left ? isum : left)) {
			*room = false;
			return 0;
		}
	}
	return 0;
}

int defrag_homes_joint(struct planner *P, const uint32_t *S, uint32_t n, const uint32_t *size,
                       const int *level, uint32_t m, bool *room)
{
	*room = true;
	if (m < 2)
		return 0;
	size_t nset;
	int rc = set_nodes(P, S, n, &nset);
	if (rc)
		return rc;
	uint64_t cand = cand_after(P, nset);
	if (defrag_grow_u32(P->a, &P->jointsize, &P->cap_jointsize, m))
		return TP_ENOMEM;
	for (unsigned l = 0; l <= tp_node_level(P->t) && *room; l++) {
		uint32_t k = 0;
		for (uint32_t i = 0; i < m; i++)
			if (level[i] >= (int)l)
				P->jointsize[k++] = size[i];
		if (k < 2)
			break; /* deeper levels hold no more of them */
		qsort(P->jointsize, k, sizeof *P->jointsize, cmp_desc_u32);
		if ((rc = level_joint(P, l, P->jointsize, k, nset, cand, room)))
			return rc;
	}
	return 0;
}

/* ---- counting before placing a migrant -----------------------------------------------------
 *
 * A home as local as the old devices spans at most old[u] domains of every level u, so the
 * old[u] domains of u with the most free devices hold all of it; and when the job sits in one
 * domain of level `deep` now, all of those lie in one domain of that level. When no domain of
 * `deep` (or, for deep -1, the cluster) passes at every level below, no tp_place call can find
 * the migrant a home: find_home answers at once. The counts read the cluster's free counts, its
 * index of free counts by level and its per-domain histograms of free devices per node, never
 * a device; they are necessary, not sufficient (the calls decide the rest).
 */

/* v[0 .. n) sorted largest first; the first k added up. */
static uint64_t top_sum(uint32_t *v, uint32_t n, uint32_t k)
{
	qsort(v, n, sizeof *v, cmp_desc_u32);
	uint64_t s = 0;
	for (uint32_t i = 0; i < n && i < k; i++)
		s += v[i];
	return s;
}

/* The k nodes below domain d of level l with the most free devices, added up (from the
 * domain's histogram of nodes by free devices). */
static uint64_t top_nodes(const struct planner *P, unsigned l, uint32_t d, uint32_t k)
{
	const struct tp_cluster *c = P->c;
	const uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
	uint64_t s = 0;
	for (uint32_t f = c->hstride; f-- > 1 && k;) {
		uint32_t take = h[f] < k ? h[f] : k;
		s += (uint64_t)take * f;
		k -= take;
	}
	return s;
}

/* The k domains of level u with the most free devices, over the whole cluster, added up: from
 * the index where the level keeps one, the top-level histograms for the node level, else a
 * walk of the level's free counts. */
static int top_level_sum(struct planner *P, unsigned u, uint32_t k, uint64_t *sum)
{
	const struct tp_cluster *c = P->c;
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	*sum = 0;
	if (c->indexed[u]) {
		Word_t key = ~(Word_t)0;
		JError_t err;
		for (int r = Judy1Last(c->index[u], &key, &err); r == 1 && k;
		     r = Judy1Prev(c->index[u], &key, &err), k--)
			*sum += key >> 32;
		return 0;
	}
	if (u == nl && nl > 0) {
		/* the whole level's nodes by free devices: every top-level domain's histogram */
		uint32_t hs = c->hstride;
		for (uint32_t f = hs; f-- > 1 && k;) {
			uint64_t n = 0;
			for (uint32_t d = 0; d < t->lv[0].ndom; d++)
				n += c->hist[0][(size_t)d * hs + f];
			uint64_t take = n < k ? n : k;
			*sum += take * f;
			k -= (uint32_t)take;
		}
		return 0;
	}
	uint32_t nd = t->lv[u].ndom;
	if (defrag_grow_u32(P->a, &P->roomvals, &P->cap_roomvals, nd))
		return TP_ENOMEM;
	memcpy(P->roomvals, c->free[u], (size_t)nd * sizeof *P->roomvals);
	*sum = top_sum(P->roomvals, nd, k);
	return 0;
}

/* Whether domain d of level l could hold n devices spanning at most old[u] domains of every
 * level u below it. */
static int domain_counts(struct planner *P, unsigned l, uint32_t d, uint32_t n,
                         const uint32_t *old, bool *pass)
{
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	*pass = true;
	for (unsigned u = l + 1; u <= nl && *pass; u++) {
		uint64_t s;
		if (u == nl) {
			s = top_nodes(P, l, d, old[u]);
		} else {
			uint32_t e0, ne;
			defrag_desc_range(t, (int)l, d, u, &e0, &ne);
			if (ne <= old[u])
				continue; /* every sub-domain may be used: the domain's count decided */
			if (defrag_grow_u32(P->a, &P->roomvals, &P->cap_roomvals, ne))
				return TP_ENOMEM;
			memcpy(P->roomvals, P->c->free[u] + e0, (size_t)ne * sizeof *P->roomvals);
			s = top_sum(P->roomvals, ne, old[u]);
		}
		*pass = s >= n;
	}
	return 0;
}

/* Whether the counts above leave j (spans `old`, in one domain of level `deep`, -1: none) a
 * home as local as it sits. */
int defrag_home_counts(struct planner *P, const struct tp_job_impl *j, const uint32_t *old,
                       int deep, bool *pass)
{
	const struct tp_cluster *c = P->c;
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	uint32_t n = j->ndev;
	int rc = 0;
	*pass = true;
	if (deep < 0) {
		for (unsigned u = 0; u <= nl && *pass && !rc; u++) {
			uint64_t s;
			if (old[u] >= t->lv[u].ndom)
				continue;
			rc = top_level_sum(P, u, old[u], &s);
			*pass = s >= n;
		}
		return rc;
	}
	if ((unsigned)deep >= nl)
		return 0; /* one node: max_free and the calls decide */
	*pass = false;
	if (c->indexed[deep]) {
		Word_t key = tp_cl_idx_key(n, 0);
		JError_t err;
		for (int r = Judy1First(c->index[deep], &key, &err); r == 1 && !*pass && !rc;
		     r = Judy1Next(c->index[deep], &key, &err))
			rc = domain_counts(P, (unsigned)deep, (uint32_t)(key & UINT32_MAX), n, old, pass);
		return rc;
	}
	for (uint32_t d = 0; d < t->lv[deep].ndom && !*pass && !rc; d++)
		if (c->free[deep][d] >= n)
			rc = domain_counts(P, (unsigned)deep, d, n, old, pass);
	return rc;
}
