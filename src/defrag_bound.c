/* SPDX-License-Identifier: MIT */
/*
 * Bounds on the number of jobs a plan must move, for the searches of defrag_search.c and
 * defrag_targets.c: a candidate that cannot be made to fit within max_moves is passed by without
 * a search, and a branch of a depth-first search that cannot is cut. Last, the space bound
 * (defrag_space_over): a candidate whose jobs that cannot leave it leave the request no room.
 *
 * The units bound. A request of groups needs `need` whole units (free runs of `size` usable
 * devices) in the sub-domains of a level (a layer of the scan). A domain e of the layer that
 * has f free devices holds f / size units; to hold t more, the movable jobs on it that leave
 * must free at least (f / size + t) * size - f of its devices, so at least k_e(t) of them leave,
 * k_e(t) being the fewest whose devices on e reach that (the largest first). A job on s domains
 * of the layer is counted 1/s on each (in units of 1/BOUND_SCALE, rounded down), so the counts
 * of a set of jobs summed over the domains are at most the set's size; on domain e the k_e(t)
 * jobs that leave weigh at least the k_e(t) lightest of its jobs. The least total weight over
 * every way to share the missing units among the domains (a knapsack over the domains, made
 * exactly by dynamic programming) is then a lower bound on the moves. The domains only one job
 * holds (the folded runs of defrag_scan.c) are one item of that job's units.
 */
#include "defrag_internal.h"

#include <stdlib.h>
#include <string.h>

/* The weight of one move: divisible by every span up to 16. */
#define BOUND_SCALE UINT64_C(720720)

/* Layers too large for the knapsack (its work is about domains x missing units) get no bound. */
#define BOUND_MAX_WORK (UINT64_C(1) << 20)

/* ---- the devices bound --------------------------------------------------------------------- */

void defrag_top_build(const struct planner *P, const uint32_t *ord, uint32_t n, uint32_t *top)
{
	memset(top + (size_t)n * DEFRAG_TOPK, 0, DEFRAG_TOPK * sizeof *top);
	for (uint32_t i = n; i-- > 0;) {
		const uint32_t *next = top + (size_t)(i + 1) * DEFRAG_TOPK;
		uint32_t *row = top + (size_t)i * DEFRAG_TOPK, a = P->scan.jobs[ord[i]].a, x = 0;
		for (; x < DEFRAG_TOPK && next[x] >= a; x++) /* the larger ones of the rest */
			row[x] = next[x];
		if (x < DEFRAG_TOPK)
			row[x++] = a;
		for (; x < DEFRAG_TOPK; x++) /* then the rest, shifted by one */
			row[x] = next[x - 1];
	}
}

uint32_t defrag_moves_lb(const uint32_t *top, uint32_t nrest, uint64_t left)
{
	uint32_t k = 0;
	for (; k < DEFRAG_TOPK && k < nrest && left; k++) {
		if (!top[k])
			return UINT32_MAX;
		left -= top[k] < left ? top[k] : left;
	}
	if (!left)
		return k;
	if (k < DEFRAG_TOPK || !top[DEFRAG_TOPK - 1] || nrest == k)
		return UINT32_MAX; /* the whole suffix is listed, or the rest frees nothing */
	/* every job after the DEFRAG_TOPK largest frees at most as much as the last of them */
	uint64_t per = top[DEFRAG_TOPK - 1], more = (left + per - 1) / per;
	return more > nrest - k ? UINT32_MAX : k + (uint32_t)more;
}

/* ---- the units bound ----------------------------------------------------------------------- */

static int cmp_u32_desc(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a < b) - (a > b);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* One item of the knapsack: t more units for cost[t - 1], t = 1 .. nt (a domain), or gain1 > 0
 * units for cost[0] (a folded run, nt 1). best[d]: the least weight that gives d of the D
 * missing units (best[D]: at least D); nxt is scratch of the same size. */
static void knap_add(uint64_t *best, uint64_t *nxt, uint32_t D, const uint64_t *cost, uint32_t nt,
                     uint32_t gain1)
{
	memcpy(nxt, best, ((size_t)D + 1) * sizeof *nxt);
	for (uint32_t d = 0; d < D; d++) {
		if (best[d] == UINT64_MAX)
			continue;
		for (uint32_t t = 1; t <= nt; t++) {
			uint32_t g = gain1 ? gain1 : t;
			uint32_t nd = g >= D - d ? D : d + g;
			if (best[d] + cost[t - 1] < nxt[nd])
				nxt[nd] = best[d] + cost[t - 1];
		}
	}
	memcpy(best, nxt, ((size_t)D + 1) * sizeof *best);
}

struct ubuf {
	uint32_t *off, *cur; /* [ne + 2] domain e's items at off[e] .. off[e + 1]; fill cursors */
	uint32_t *span;      /* [njobs] domains of the layer each job is on */
	uint32_t *n;         /* per item: the job's devices on the domain (a folded run: units) */
	uint64_t *w;         /* per item: the job's weight there, BOUND_SCALE / span */
	uint64_t *best, *nxt, *cost; /* the knapsack's [D + 1], [D + 1], [D] */
};

/* One pass over the movable jobs' runs on layer li (folded runs: domain ne): without u->cur,
 * count the items of every domain and the span of every job; with it, fill the items. */
static void layer_items(const struct planner *P, unsigned li, struct ubuf *u)
{
	const struct cscan *s = &P->scan;
	uint32_t ne = s->ly[li].ne;
	for (uint32_t k = 0; k < s->njobs; k++) {
		const struct cjob *cj = &s->jobs[k];
		if (!cj->can || !cj->a)
			continue;
		for (uint32_t r = cj->r0; r < cj->r0 + cj->nr; r++) {
			if (s->jrun[r].layer != li)
				continue;
			uint32_t e = s->jrun[r].e == TP_NONE ? ne : s->jrun[r].e;
			if (!u->cur) {
				u->off[e + 1]++;
				u->span[k]++;
			} else {
				u->n[u->cur[e]] = s->jrun[r].n;
				u->w[u->cur[e]++] = BOUND_SCALE / u->span[k];
			}
		}
	}
}

static void ubuf_free(const struct planner *P, struct ubuf *u)
{
	tp_free(P->a, u->off);
	tp_free(P->a, u->cur);
	tp_free(P->a, u->span);
	tp_free(P->a, u->n);
	tp_free(P->a, u->w);
	tp_free(P->a, u->best);
	tp_free(P->a, u->nxt);
	tp_free(P->a, u->cost);
}

/* The units bound of one layer, in 1/BOUND_SCALE moves (UINT64_MAX: no set of the movable
 * jobs gives the units; 0: none missing, or the layer too large to bound). */
static int layer_bound(const struct planner *P, unsigned li, uint64_t *lb)
{
	const struct cscan *s = &P->scan;
	const struct scan_layer *ly = &s->ly[li];
	*lb = 0;
	uint64_t units = 0;
	for (uint32_t e = 0; e < ly->ne; e++)
		units += ly->f0[e] / ly->size;
	if (units >= ly->need)
		return 0;
	uint32_t D = (uint32_t)(ly->need - units);
	struct ubuf u = {0};
	u.off = tp_calloc(P->a, (size_t)ly->ne + 2, sizeof *u.off);
	u.span = tp_calloc(P->a, s->njobs ? s->njobs : 1, sizeof *u.span);
	if (!u.off || !u.span)
		goto nomem;
	layer_items(P, li, &u);
	for (uint32_t e = 0; e <= ly->ne; e++)
		u.off[e + 1] += u.off[e];
	size_t items = u.off[ly->ne + 1], folded = items - u.off[ly->ne];
	if (((uint64_t)ly->ne + folded) * D > BOUND_MAX_WORK) {
		ubuf_free(P, &u);
		return 0;
	}
	u.cur = tp_mallocn(P->a, (size_t)ly->ne + 1, sizeof *u.cur);
	u.n = tp_mallocn(P->a, items ? items : 1, sizeof *u.n);
	u.w = tp_mallocn(P->a, items ? items : 1, sizeof *u.w);
	u.best = tp_mallocn(P->a, (size_t)D + 1, sizeof *u.best);
	u.nxt = tp_mallocn(P->a, (size_t)D + 1, sizeof *u.nxt);
	u.cost = tp_mallocn(P->a, (size_t)D, sizeof *u.cost);
	if (!u.cur || !u.n || !u.w || !u.best || !u.nxt || !u.cost)
		goto nomem;
	memcpy(u.cur, u.off, ((size_t)ly->ne + 1) * sizeof *u.cur);
	layer_items(P, li, &u);
	for (uint32_t d = 0; d <= D; d++)
		u.best[d] = UINT64_MAX;
	u.best[0] = 0;
	for (uint32_t e = 0; e < ly->ne; e++) {
		uint32_t i0 = u.off[e], m = u.off[e + 1] - i0;
		if (!m)
			continue;
		uint32_t f = ly->f0[e], u0 = f / ly->size;
		uint64_t total = f;
		for (uint32_t i = 0; i < m; i++)
			total += u.n[i0 + i];
		uint64_t T = total / ly->size - u0;
		if (T > D)
			T = D;
		if (!T)
			continue;
		qsort(u.n + i0, m, sizeof *u.n, cmp_u32_desc);
		qsort(u.w + i0, m, sizeof *u.w, cmp_u64);
		uint64_t freed = 0, wsum = 0;
		uint32_t k = 0;
		for (uint32_t t = 1; t <= T; t++) {
			uint64_t want = (uint64_t)(u0 + t) * ly->size - f;
			while (freed < want) { /* T keeps it within the m jobs */
				freed += u.n[i0 + k];
				wsum += u.w[i0 + k];
				k++;
			}
			u.cost[t - 1] = wsum;
		}
		knap_add(u.best, u.nxt, D, u.cost, (uint32_t)T, 0);
	}
	for (uint32_t i = u.off[ly->ne]; i < u.off[ly->ne + 1]; i++)
		if (u.n[i])
			knap_add(u.best, u.nxt, D, &u.w[i], 1, u.n[i]);
	*lb = u.best[D];
	ubuf_free(P, &u);
	return 0;
nomem:
	ubuf_free(P, &u);
	return TP_ENOMEM;
}

/* ---- the candidate ------------------------------------------------------------------------- */

int defrag_moves_over(const struct planner *P, bool *over, uint32_t *at_least)
{
	const struct cscan *s = &P->scan;
	*over = false;
	*at_least = 0;
	if (P->max_moves >= s->nmov)
		return 0; /* every movable job may move: no bound can say more */
	uint64_t lb = 0;
	/* the devices: the fewest jobs, the largest first, that free what is missing */
	if (s->free < P->count) {
		uint32_t *a = tp_mallocn(P->a, s->njobs ? s->njobs : 1, sizeof *a), n = 0;
		if (!a)
			return TP_ENOMEM;
		for (uint32_t k = 0; k < s->njobs; k++)
			if (s->jobs[k].can && s->jobs[k].a)
				a[n++] = s->jobs[k].a;
		qsort(a, n, sizeof *a, cmp_u32_desc);
		uint64_t left = P->count - s->free, k = 0;
		for (; k < n && left; k++)
			left -= a[k] < left ? a[k] : left;
		tp_free(P->a, a);
		lb = left ? UINT64_MAX : k * BOUND_SCALE;
	}
	for (unsigned li = 0; li < s->nlayers && lb != UINT64_MAX; li++) {
		uint64_t l;
		int rc = layer_bound(P, li, &l);
		if (rc)
			return rc;
		if (l > lb)
			lb = l;
	}
	if (lb <= (uint64_t)P->max_moves * BOUND_SCALE)
		return 0;
	*over = true;
	uint64_t moves = lb == UINT64_MAX ? UINT32_MAX : (lb + BOUND_SCALE - 1) / BOUND_SCALE;
	*at_least = moves > UINT32_MAX ? UINT32_MAX : (uint32_t)moves;
	return 0;
}

/* ---- the space bound ------------------------------------------------------------------- */

/* The nodes of the devices of every movable job of the candidate (on a small cluster, where
 * the searches add the jobs elsewhere, defrag_append_outside: of every movable job), sorted,
 * into P->roombuf (*nset): the most room any set could make. A job on the candidate may have
 * devices outside it too, and those are free once it left (a migrant may move into them). */
static int movable_nodes(struct planner *P, bool everywhere, size_t *nset)
{
	const struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	const struct tp_topology *t = P->t;
	size_t n = everywhere ? c->njobs : s->ninside;
	*nset = 0;
	for (size_t i = 0; i < n; i++) {
		const struct tp_job_impl *j = everywhere ? c->jobs[i] : s->jobs[i].j;
		if (everywhere ? j->id[0] == '\x01' || !defrag_job_can(P, j) : !s->jobs[i].can)
			continue;
		if (defrag_grow_u32(P->a, &P->roombuf, &P->cap_room, *nset + j->ndev + 1))
			return TP_ENOMEM;
		for (uint32_t x = 0; x < j->ndev; x++)
			P->roombuf[(*nset)++] = t->dev_node[j->devs[x]];
	}
	return defrag_sort_nodes(P, P->roombuf, *nset);
}

/*
 * The space bound: whether no set of the candidate's jobs can make room for the request,
 * because of the jobs that cannot leave it (*over). A job held wholly inside the candidate
 * whose deepest level (one domain of which holds it) is the candidate's or deeper either
 * stays (it may not move), or, migrating as local as it sits with no preemption to fall back
 * on, lands inside one domain of that level; when the counts give it no home in any such
 * domain outside the candidate (defrag_home_outside), it lands inside. Either way it holds
 * its size of the candidate's devices, apart from the request's. So when the request's
 * devices and those jobs' sizes add up to more than the candidate has, every set fails, and
 * the candidate is passed by without listing or simulating a set.
 *
 * The room outside grows as the candidate's movable jobs leave (their devices outside it are
 * freed too: a migrant may move into those), so every one of them is counted gone; on a
 * small cluster the searches move the jobs elsewhere too, so every movable job is. With
 * preemption on, any job elsewhere may be a room maker, so the bound is off. Only once a
 * simulation has given the failed plan's message, as the other count bounds
 * (defrag_counts_rule_out).
 */
int defrag_space_over(struct planner *P, bool *over)
{
	struct cscan *s = &P->scan;
	const struct tp_topology *t = P->t;
	*over = false;
	if (!defrag_counts_rule_out(P) || P->pol.preempt || s->level < 0)
		return 0;
	size_t nset = 0;
	uint32_t small = P->exact_max > TP_DEFRAG_EXACT_MAX ? P->exact_max : TP_DEFRAG_EXACT_MAX;
	int rc;
	if ((rc = movable_nodes(P, P->c->njobs <= 2 * (size_t)small, &nset)))
		return rc;
	uint64_t held = P->count, room = s->dev1 - s->dev0;
	for (uint32_t k = 0; k < s->ninside && held <= room; k++) {
		struct cjob *cj = &s->jobs[k];
		const struct tp_job_impl *j = cj->j;
		if (cj->can & CAN_PREEMPT)
			continue;
		bool inside = true;
		for (uint32_t x = 0; x < j->ndev && inside; x++) {
			uint32_t node = t->dev_node[j->devs[x]];
			inside = node >= s->node0 && node < s->node0 + s->nnodes;
		}
		if (!inside)
			continue;
		if (cj->can) {
			if ((rc = defrag_job_reach(P, cj)))
				return rc;
			if (cj->deep < s->level)
				continue;
			bool yes;
			if ((rc = defrag_home_outside(P, nset, j, cj->span, (unsigned)cj->deep, &yes)))
				return rc;
			if (yes)
				continue;
		}
		held += j->ndev;
	}
	*over = held > room;
	return 0;
}
