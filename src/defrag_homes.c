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

static int cmp_desc_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a < b) - (a > b);
}

/* Node indices v[0 .. n) sorted ascending. A set's nodes lie in a few racks, so the count of
 * each node of their range is kept and the nodes written back in order (linear in n and the
 * range); a range much wider than n is sorted by comparisons. */
int defrag_sort_nodes(struct planner *P, uint32_t *v, size_t n)
{
	if (n < 2)
		return 0;
	uint32_t lo = v[0], hi = v[0];
	for (size_t i = 1; i < n; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
	}
	size_t range = (size_t)(hi - lo) + 1;
	if (range > 4 * n + 64) {
		qsort(v, n, sizeof *v, defrag_cmp_u32);
		return 0;
	}
	if (defrag_grow_u32(P->a, &P->nodecount, &P->cap_nodecount, range))
		return TP_ENOMEM;
	uint32_t *cnt = P->nodecount;
	memset(cnt, 0, range * sizeof *cnt);
	for (size_t i = 0; i < n; i++)
		cnt[v[i] - lo]++;
	size_t k = 0;
	for (size_t r = 0; r < range; r++)
		for (uint32_t c = cnt[r]; c; c--)
			v[k++] = lo + (uint32_t)r;
	return 0;
}

/* The nodes the devices of the jobs S sit on, sorted, one entry per device, into P->roombuf
 * (*k of them): what the bounds below read as "the set". */
int defrag_set_nodes(struct planner *P, const uint32_t *S, uint32_t n, size_t *k)
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
	return defrag_sort_nodes(P, P->roombuf, *k);
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

/* The k largest of v[0 .. n) first, largest first (the order of the rest is left open):
 * level_room reads no further. An insertion into the first k, as k is a job's span at one
 * level or a set's size and small; a wide one is sorted whole. */
void defrag_top_first(uint32_t *v, uint32_t n, uint32_t k)
{
	if (k > n)
		k = n;
	if (k > 32) {
		qsort(v, n, sizeof *v, cmp_desc_u32);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t x = v[i], p;
		if (i < k) {
			p = i;
		} else if (k && x > v[k - 1]) {
			v[i] = v[k - 1]; /* the k-th largest so far joins the rest */
			p = k - 1;
		} else {
			continue;
		}
		while (p > 0 && v[p - 1] < x) {
			v[p] = v[p - 1];
			p--;
		}
		v[p] = x;
	}
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
	/* the sub-domains' nodes are consecutive ranges in order: the set's entries below each
	 * are counted by one walk of the sorted set */
	size_t a = 0;
	if (ne) {
		uint32_t f0, cnt0;
		tp_dom_nodes(t, u, e0, &f0, &cnt0);
		a = set_below(P, nset, f0);
	}
	for (uint32_t x = 0; x < ne; x++) {
		uint32_t f, cnt;
		tp_dom_nodes(t, u, e0 + x, &f, &cnt);
		size_t b = a;
		while (b < nset && P->roombuf[b] < f + cnt)
			b++;
		uint32_t v = P->c->free[u][e0 + x] + (uint32_t)(b - a);
		a = b;
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
	defrag_top_first(out, nout, want);
	defrag_top_first(in, nin, want);
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

/* Whether domain d of level `level` (-1: the cluster) could be j's home once the set left. */
static bool home_in(struct planner *P, int level, uint32_t d, const struct tp_job_impl *j,
                    const uint32_t *old, size_t nset, uint64_t cand)
{
	if (level >= 0 && domain_gives(P, (unsigned)level, d, nset, cand) < j->ndev)
		return false;
	bool ok = true;
	for (unsigned u = (unsigned)(level + 1); u <= tp_node_level(P->t) && ok; u++)
		ok = level_room(P, level, d, u, old[u], j->ndev, nset, cand);
	return ok;
}

static int joint_static(struct planner *P, unsigned l, const struct joint_static **out);
static void cand_range(const struct planner *P, unsigned l, uint32_t *x0, uint32_t *nx);

/* Whether job j (its current spans `old`, one per level, and `level` the deepest level one of
 * whose domains holds it, -1: none) may have a home once the set (its nodes in P->roombuf,
 * defrag_set_nodes) left: *room false when the counts say it cannot. The domains looked at:
 * those outside the candidate with j's size free before the set left (largest first, from
 * joint_static), those the set's jobs touch, and those of the candidate's range; no other
 * domain can give j's size. */
int defrag_home_room(struct planner *P, size_t nset, const struct tp_job_impl *j,
                     const uint32_t *old, int level, bool *room)
{
	const struct tp_topology *t = P->t;
	*room = true;
	if (defrag_grow_u32(P->a, &P->roomvals, &P->cap_roomvals, 2 * (size_t)widest(P, level)))
		return TP_ENOMEM;
	uint64_t cand = cand_after(P, nset);
	if (level < 0) {
		*room = home_in(P, level, 0, j, old, nset, cand);
		return 0;
	}
	unsigned l = (unsigned)level;
	const struct joint_static *js;
	int rc = joint_static(P, l, &js);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < js->n && js->v[i] >= j->ndev; i++)
		if (home_in(P, level, js->d[i], j, old, nset, cand))
			return 0;
	for (size_t a = 0; a < nset;) { /* the set's nodes are sorted, so are their domains */
		uint32_t d = tp_node_ancestor(t, P->roombuf[a], l);
		if (home_in(P, level, d, j, old, nset, cand))
			return 0;
		while (a < nset && tp_node_ancestor(t, P->roombuf[a], l) == d)
			a++;
	}
	uint32_t x0, nx;
	cand_range(P, l, &x0, &nx);
	for (uint32_t d = x0; d < x0 + nx; d++)
		if (home_in(P, level, d, j, old, nset, cand))
			return 0;
	*room = false;
	return 0;
}

/* Whether some domain of `level`, at or below the candidate's level, that lies outside the
 * candidate could be j's home once the jobs whose nodes are in P->roombuf (nset of them,
 * sorted) left: *yes false when the counts say none can. Looked at: the domains with j's size
 * free before (largest first, joint_static), then those the set touches. */
int defrag_home_outside(struct planner *P, size_t nset, const struct tp_job_impl *j,
                        const uint32_t *old, unsigned level, bool *yes)
{
	const struct tp_topology *t = P->t;
	*yes = true;
	if (defrag_grow_u32(P->a, &P->roomvals, &P->cap_roomvals, 2 * (size_t)widest(P, (int)level)))
		return TP_ENOMEM;
	uint64_t cand = cand_after(P, nset);
	const struct joint_static *js;
	int rc = joint_static(P, level, &js);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < js->n && js->v[i] >= j->ndev; i++)
		if (home_in(P, (int)level, js->d[i], j, old, nset, cand))
			return 0;
	uint32_t x0, nx;
	cand_range(P, level, &x0, &nx);
	for (size_t a = 0; a < nset;) {
		uint32_t d = tp_node_ancestor(t, P->roombuf[a], level);
		if ((d < x0 || d >= x0 + nx) && home_in(P, (int)level, d, j, old, nset, cand))
			return 0;
		while (a < nset && tp_node_ancestor(t, P->roombuf[a], level) == d)
			a++;
	}
	*yes = false;
	return 0;
}

/* The most free devices a domain of level l has once the set (P->roombuf) left (the
 * request's share not subtracted: an over-estimate), UINT32_MAX when the level keeps no
 * index of free counts. */
int defrag_most_free_after(struct planner *P, size_t nset, unsigned l, uint32_t *most)
{
	const struct tp_cluster *c = P->c;
	const struct tp_topology *t = P->t;
	*most = defrag_max_free(P, l);
	if (*most == UINT32_MAX)
		return 0;
	for (size_t a = 0; a < nset;) {
		uint32_t d = tp_node_ancestor(t, P->roombuf[a], l);
		size_t b = a + 1;
		while (b < nset && tp_node_ancestor(t, P->roombuf[b], l) == d)
			b++;
		uint32_t f = c->free[l][d] + (uint32_t)(b - a);
		if (f > *most)
			*most = f;
		a = b;
	}
	return 0;
}

/* The domains of level l that lie in the candidate or hold it: [*x0, *x0 + *nx). */
static void cand_range(const struct planner *P, unsigned l, uint32_t *x0, uint32_t *nx)
{
	const struct cscan *s = &P->scan;
	if ((int)l >= s->level) {
		defrag_desc_range(P->t, s->level, s->dom, l, x0, nx);
	} else {
		*x0 = tp_node_ancestor(P->t, s->node0, l);
		*nx = 1;
	}
}

static bool joint_static_fresh(const struct planner *P, const struct joint_static *js)
{
	return js->ok && js->generation == P->c->generation && js->level == P->scan.level &&
	       js->dom == P->scan.dom;
}

/* The free counts of level l's domains outside the candidate, largest first, with their
 * running sums: made once per candidate and cluster state (every set of a candidate is
 * counted on the same state, the simulations roll back), so a set costs only the domains its
 * jobs and the candidate touch, not a walk of the level. */
static int joint_static(struct planner *P, unsigned l, const struct joint_static **out)
{
	struct joint_static *js = &P->jstat[l];
	*out = js;
	if (joint_static_fresh(P, js))
		return 0;
	js->ok = false;
	uint32_t nd = P->t->lv[l].ndom, x0, nx;
	cand_range(P, l, &x0, &nx);
	if (tp_grow(P->a, (void **)&js->v, &js->cap_v, nd ? nd : 1, sizeof *js->v) ||
	    tp_grow(P->a, (void **)&js->d, &js->cap_d, nd ? nd : 1, sizeof *js->d) ||
	    tp_grow(P->a, (void **)&js->sum, &js->cap_sum, (size_t)nd + 1, sizeof *js->sum))
		return TP_ENOMEM;
	/* sorted by a key in js->sum first: most free first, then the lower domain */
	uint32_t n = 0;
	for (uint32_t d = 0; d < nd; d++)
		if (d < x0 || d >= x0 + nx)
			js->sum[n++] = (uint64_t)P->c->free[l][d] << 32 | (uint32_t)~d;
	qsort(js->sum, n, sizeof *js->sum, cmp_desc_u64);
	for (uint32_t i = 0; i < n; i++) {
		js->v[i] = (uint32_t)(js->sum[i] >> 32);
		js->d[i] = ~(uint32_t)js->sum[i];
	}
	js->sum[0] = 0;
	for (uint32_t i = 0; i < n; i++)
		js->sum[i + 1] = js->sum[i] + js->v[i];
	js->n = n;
	js->generation = P->c->generation;
	js->level = P->scan.level;
	js->dom = P->scan.dom;
	js->ok = true;
	return 0;
}

/* The free counts of js's domains of at least x, added up (the domains are largest first). */
static uint64_t static_at_least(const struct joint_static *js, uint32_t x)
{
	uint32_t lo = 0, hi = js->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (js->v[mid] >= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return js->sum[lo];
}

/* What domains of level l give once the set left, split as level_joint counts them: the
 * domains the set's jobs touch outside the candidate (their free count before and after), the
 * domains holding the candidate, and those inside it. */
struct joint_dyn {
	uint32_t *before, *after, nt; /* touched outside */
	bool held;                    /* a domain holds the candidate: it gives `hold` */
	uint32_t hold;
	uint32_t *in, ni;             /* inside */
};

static int joint_dynamic(struct planner *P, unsigned l, size_t nset, uint64_t cand,
                         struct joint_dyn *dy)
{
	const struct tp_topology *t = P->t;
	const struct cscan *s = &P->scan;
	uint32_t x0, nx;
	cand_range(P, l, &x0, &nx);
	if (defrag_grow_u32(P->a, &P->jointbuf, &P->cap_joint, 2 * nset + nx + 1))
		return TP_ENOMEM;
	dy->before = P->jointbuf;
	dy->after = P->jointbuf + nset;
	dy->in = P->jointbuf + 2 * nset;
	dy->nt = dy->ni = 0;
	for (size_t a = 0; a < nset;) { /* the set's nodes are sorted, so are their domains */
		uint32_t d = tp_node_ancestor(t, P->roombuf[a], l);
		size_t b = a + 1;
		while (b < nset && tp_node_ancestor(t, P->roombuf[b], l) == d)
			b++;
		if (d < x0 || d >= x0 + nx) {
			dy->before[dy->nt] = P->c->free[l][d];
			dy->after[dy->nt++] = P->c->free[l][d] + (uint32_t)(b - a);
		}
		a = b;
	}
	/* the domains the candidate's range holds: inside it, or (one, above its level) holding
	 * it; a holding domain is counted with the outside ones, as domain_gives takes it */
	dy->held = false;
	dy->hold = 0;
	for (uint32_t d = x0; d < x0 + nx; d++) {
		uint64_t g = domain_gives(P, l, d, nset, cand);
		uint32_t gv = g > UINT32_MAX ? UINT32_MAX : (uint32_t)g, f, cnt;
		tp_dom_nodes(t, l, d, &f, &cnt);
		if (f >= s->node0 && f + cnt <= s->node0 + s->nnodes)
			dy->in[dy->ni++] = gv;
		else
			dy->held = true, dy->hold = gv;
	}
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
 *
 * level_joint counts it at one level for the migrants of sizes size[0 .. m), largest first;
 * the domains outside the candidate come from joint_static, the rest from joint_dynamic.
 */
static int level_joint(struct planner *P, unsigned l, const uint32_t *size, uint32_t m,
                       size_t nset, uint64_t cand, bool *room)
{
	const struct joint_static *js;
	struct joint_dyn dy;
	int rc;
	if ((rc = joint_static(P, l, &js)) || (rc = joint_dynamic(P, l, nset, cand, &dy)))
		return rc;
	uint64_t left = cand > P->count ? cand - P->count : 0, need = 0;
	for (uint32_t k = 0; k < m; k++) {
		uint32_t x = size[k];
		need += x;
		uint64_t out = static_at_least(js, x), in = 0;
		for (uint32_t i = 0; i < dy.nt; i++) {
			out -= dy.before[i] >= x ? dy.before[i] : 0;
			out += dy.after[i] >= x ? dy.after[i] : 0;
		}
		if (dy.held && dy.hold >= x)
			out += dy.hold;
		for (uint32_t i = 0; i < dy.ni; i++)
			in += dy.in[i] >= x ? dy.in[i] : 0;
		if (need > out + (in < left ? in : left)) {
			*room = false;
			return 0;
		}
	}
	return 0;
}

int defrag_homes_joint(struct planner *P, size_t nset, const uint32_t *size, const int *level,
                       uint32_t m, bool *room)
{
	*room = true;
	if (m < 2)
		return 0;
	int rc;
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
		defrag_top_first(P->jointsize, k, k);
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
