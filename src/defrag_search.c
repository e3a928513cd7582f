/* SPDX-License-Identifier: MIT */
/*
 * Searching one candidate domain for the cheapest set of jobs to move: the exact subset search,
 * the greedy fill with reverse deletion, and the bounded branch and bound that follows it; and
 * keeping the best plan and the reasons candidates failed. defrag.c describes the whole search.
 */
#include "defrag_internal.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- keeping the best plan and the reasons ----------------------------------------------------
 */

/* The bound a set must not exceed to matter: the limit, and the best plan's cost. */
int64_t defrag_cost_bound(const struct planner *P)
{
	int64_t b = P->max_cost;
	if (P->have_best && P->best.cost < b)
		b = P->best.cost;
	return b;
}

void defrag_offer(struct planner *P, struct draft *d)
{
	if (!P->have_best || defrag_draft_cmp(d, &P->best) < 0) {
		defrag_draft_clear(P->a, &P->best);
		P->best = *d;
		P->have_best = true;
		*d = (struct draft){0};
	} else {
		defrag_draft_clear(P->a, d);
	}
}

void defrag_note_nohome(struct planner *P, const struct tp_job_impl *j)
{
	if (P->diag.nohome)
		return;
	P->diag.nohome = true;
	P->diag.nohome_level = P->scan.level;
	P->diag.nohome_dom = P->scan.dom;
	P->diag.nohome_job = j;
	P->diag.nohome_less_local = P->nohome_less_local;
	memcpy(P->diag.nohome_span, P->nohome_span, sizeof P->diag.nohome_span);
}

void defrag_note_moves(struct planner *P, uint32_t moves)
{
	if (!P->diag.moves || moves < P->diag.moves_needed) {
		P->diag.moves = true;
		P->diag.moves_needed = moves;
	}
}

/* The candidate cannot hold the request even with every movable job gone: remember the one
 * short of the fewest devices, and its biggest immovable job. */
void defrag_note_blocked(struct planner *P, uint64_t shortfall)
{
	const struct cscan *s = &P->scan;
	if (P->diag.block && shortfall >= P->diag.block_short)
		return;
	const struct tp_job_impl *big = NULL;
	uint32_t bigs = 0;
	for (uint32_t k = 0; k < s->njobs; k++)
		if (!s->jobs[k].can && s->jobs[k].j->id[0] != '\x01' &&
		    (!big || s->jobs[k].a > bigs)) {
			big = s->jobs[k].j;
			bigs = s->jobs[k].a;
		}
	P->diag.block = true;
	P->diag.block_short = shortfall;
	P->diag.block_level = s->level;
	P->diag.block_dom = s->dom;
	P->diag.block_job = big;
}

/* Whether the candidate can hold the request once every movable job left (counting only). */
bool defrag_candidate_possible(struct planner *P, uint64_t *shortfall)
{
	struct cscan *s = &P->scan;
	defrag_tally_reset(P);
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can)
			defrag_tally_job(P, k, +1);
	bool ok = defrag_tally_enough(P);
	*shortfall = s->tally < P->count ? P->count - s->tally : 1;
	return ok;
}

/* ---- searching one candidate ------------------------------------------------------------- */

struct sub {
	int64_t cost;
	uint32_t moves, devices, mask;
};

static int sub_cmp(const void *x, const void *y)
{
	const struct sub *a = x, *b = y;
	if (a->cost != b->cost)
		return a->cost < b->cost ? -1 : 1;
	if (a->moves != b->moves)
		return a->moves < b->moves ? -1 : 1;
	if (a->devices != b->devices)
		return a->devices < b->devices ? -1 : 1;
	return (a->mask > b->mask) - (a->mask < b->mask);
}

static uint32_t popcount32(uint32_t x)
{
	uint32_t n = 0;
	for (; x; x &= x - 1)
		n++;
	return n;
}

/* Every subset of the movable jobs, cheapest first; the first that works is the candidate's. */
static int exact_search(struct planner *P)
{
	struct cscan *s = &P->scan;
	uint32_t mv[32], m = 0;
	int rc = 0;
	/* on a small cluster, jobs elsewhere too: stopping one may be the cheapest room for a
	 * migrant (every set stays enumerable) */
	if (s->level >= 0 && P->c->njobs <= 2 * (size_t)P->exact_max) {
		uint32_t before = s->njobs, nmov = s->nmov;
		if ((rc = defrag_append_outside(P)))
			return rc;
		if (s->nmov > P->exact_max || s->nmov > 20) {
			s->njobs = before;
			s->nmov = nmov;
		}
	}
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can)
			mv[m++] = k;
	size_t nsub = (size_t)1 << m, ns = 0;
	struct sub *subs = tp_mallocn(P->a, nsub, sizeof *subs);
	if (!subs)
		return TP_ENOMEM;
	int64_t bound = defrag_cost_bound(P);
	bool over_moves = false, over_cost = false;
	uint32_t min_moves_over = UINT32_MAX;
	/* The subsets in Gray-code order: each differs from the one before by one job, so the
	 * tally follows by one job's counts rather than being made anew. */
	defrag_tally_reset(P);
	for (uint32_t i = 1, mask = 0; i < nsub; i++) {
		uint32_t b = (uint32_t)__builtin_ctz(i);
		mask ^= 1u << b;
		defrag_tally_job(P, mv[b], mask >> b & 1 ? +1 : -1);
		if (!defrag_tally_enough(P))
			continue;
		uint32_t moves = popcount32(mask);
		if (moves > P->max_moves) {
			over_moves = true;
			if (moves < min_moves_over)
				min_moves_over = moves;
			continue;
		}
		int64_t cost = 0;
		uint32_t devices = 0;
		for (uint32_t x = 0; x < m; x++)
			if (mask >> x & 1) {
				cost = defrag_cost_add(cost, s->jobs[mv[x]].w);
				devices += s->jobs[mv[x]].j->ndev;
			}
		if (cost > bound) {
			over_cost |= cost > P->max_cost;
			continue;
		}
		subs[ns++] = (struct sub){cost, moves, devices, mask};
	}
	if (ns > 1)
		qsort(subs, ns, sizeof *subs, sub_cmp);
	/* Jobs the counts leave no home even when all m jobs left: every set holding one is ruled
	 * out (defrag_try_subset would say so after its counts), so such sets are passed by. Made
	 * again once a simulation first lets the counts rule sets out. */
	uint32_t homeless = 0;
	bool counted = P->diag.nohome;
	if (counted && (rc = defrag_homeless_mask(P, mv, m, &homeless))) {
		tp_free(P->a, subs);
		return rc;
	}
	bool found = false;
	uint32_t S[32];
	for (size_t x = 0; x < ns && !found; x++) {
		if (subs[x].cost > defrag_cost_bound(P))
			break;
		if (!counted && P->diag.nohome) {
			counted = true;
			if ((rc = defrag_homeless_mask(P, mv, m, &homeless)))
				break;
		}
		if (subs[x].mask & homeless)
			continue;
		uint32_t n = 0;
		for (uint32_t i = 0; i < m; i++)
			if (subs[x].mask >> i & 1)
				S[n++] = mv[i];
		struct draft d = {0};
		int out;
		const struct tp_job_impl *nh;
		if ((rc = defrag_try_subset(P, S, n, &d, &out, &nh)))
			break;
		if (out == OUT_OK) {
			defrag_offer(P, &d);
			found = true;
		} else if (out == OUT_NOHOME) {
			defrag_note_nohome(P, nh);
		}
	}
	if (!found && over_moves)
		defrag_note_moves(P, min_moves_over);
	if (!found && over_cost)
		P->diag.cost = true;
	tp_free(P->a, subs);
	return rc;
}

/* Movable jobs per domain of a layer (CSR): job k is listed under domain e when one of its
 * usable devices is there. */
struct by_dom {
	uint32_t *off; /* [ne + 1] */
	uint32_t *k;
};

static int by_dom_build(struct planner *P, unsigned li, struct by_dom *b)
{
	const struct cscan *s = &P->scan;
	const struct scan_layer *ly = &s->ly[li];
	b->off = tp_calloc(P->a, (size_t)ly->ne + 1, sizeof *b->off);
	size_t total = 0;
	for (uint32_t k = 0; k < s->njobs; k++)
		total += s->jobs[k].a;
	b->k = tp_mallocn(P->a, total ? total : 1, sizeof *b->k);
	if (!b->off || !b->k)
		return TP_ENOMEM;
	/* a job's devices are in device order, so its devices on one domain are consecutive */
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t k = 0; k < s->njobs; k++) {
			const struct cjob *cj = &s->jobs[k];
			if (!cj->can)
				continue;
			uint32_t prev = UINT32_MAX;
			for (uint32_t x = 0; x < cj->a; x++) {
				uint32_t e = s->jdom[(size_t)(cj->d0 + x) * s->nlayers + li];
				if (e == prev)
					continue;
				prev = e;
				if (pass == 0)
					b->off[e + 1]++;
				else
					b->k[b->off[e]++] = k;
			}
		}
		if (pass == 0)
			for (uint32_t e = 0; e < ly->ne; e++)
				b->off[e + 1] += b->off[e];
		else
			for (uint32_t e = ly->ne; e > 0; e--)
				b->off[e] = b->off[e - 1];
		if (pass == 1)
			b->off[0] = 0;
	}
	return 0;
}

static void by_dom_free(struct planner *P, struct by_dom *b)
{
	tp_free(P->a, b->off);
	tp_free(P->a, b->k);
}

/* The jobs of domain e still out of S, cheapest per device first, into tmp. */
static uint32_t dom_jobs(const struct planner *P, const struct by_dom *b, uint32_t e,
                         const bool *inS, const bool *banned, uint32_t *tmp)
{
	uint32_t cnt = 0;
	for (uint32_t x = b->off[e]; x < b->off[e + 1]; x++)
		if (!inS[b->k[x]] && !banned[b->k[x]])
			tmp[cnt++] = b->k[x];
	defrag_sort_jobs(P, tmp, cnt, defrag_by_rate);
	return cnt;
}

/* The domain of layer li (a node for whole-node groups, a rack for rack slices) that gains a
 * unit at the least cost per unit gained (counting only units still missing), and the jobs to
 * move for it (appended to S). False when no domain can. */
static bool pick_unit(struct planner *P, unsigned li, const struct by_dom *b, const bool *inS,
                      const bool *banned, uint32_t *S, uint32_t *nS)
{
	struct cscan *s = &P->scan;
	const struct scan_layer *ly = &s->ly[li];
	uint32_t bestn = UINT32_MAX, bestcnt = 0;
	int64_t bestw = 0;
	uint64_t bestg = 0;
	uint32_t *tmp = P->u32b;
	for (uint32_t e = 0; e < ly->ne; e++) {
		uint32_t cnt = dom_jobs(P, b, e, inS, banned, tmp);
		if (!cnt)
			continue;
		uint64_t u0 = ly->units;
		int64_t w = 0;
		uint32_t used = 0;
		while (used < cnt && ly->units == u0) {
			defrag_tally_job(P, tmp[used], +1);
			w = defrag_cost_add(w, s->jobs[tmp[used]].w);
			used++;
		}
		uint64_t g = ly->units - u0;
		for (uint32_t x = used; x-- > 0;)
			defrag_tally_job(P, tmp[x], -1);
		if (!g)
			continue;
		if (ly->need > u0 && g > ly->need - u0)
			g = ly->need - u0; /* groups beyond the missing ones are worth nothing */
		long double l = (long double)w * bestg, r = (long double)bestw * g;
		if (bestn == UINT32_MAX || l < r || (l == r && g > bestg)) {
			bestn = e;
			bestw = w;
			bestg = g;
			bestcnt = used;
		}
	}
	if (bestn == UINT32_MAX)
		return false;
	dom_jobs(P, b, bestn, inS, banned, tmp);
	for (uint32_t x = 0; x < bestcnt; x++)
		S[(*nS)++] = tmp[x];
	return true;
}

/* The next job of the greedy fill. While devices are missing, the cost per *useful* device,
 * w / min(a, missing), the classic greedy for covering at least a number at the least cost:
 * when one device is missing, the cheapest job that frees one beats a bigger job with a lower
 * rate. Past that point (the devices are there, the shape is not), ord[pos], the lowest rate. */
static uint32_t pick_covering(const struct planner *P, const uint32_t *ord, uint32_t pos,
                              uint32_t nord, const bool *inS, uint32_t amax)
{
	const struct cscan *s = &P->scan;
	if (s->tally >= P->count || P->count - s->tally >= amax)
		return ord[pos]; /* no job frees more than is missing: the plain rate decides */
	uint64_t missing = P->count - s->tally;
	uint32_t best = ord[pos];
	long double bw = 0;
	bool have = false;
	for (uint32_t x = pos; x < nord; x++) {
		const struct cjob *cj = &s->jobs[ord[x]];
		if (inS[ord[x]] || !cj->a)
			continue;
		uint64_t useful = cj->a < missing ? cj->a : missing;
		long double r = (long double)cj->w / (long double)useful;
		if (!have || r < bw) {
			bw = r;
			best = ord[x];
			have = true;
		}
	}
	return best;
}

/* A migrant had no home: preempt the cheapest jobs elsewhere that free as many devices (one job
 * big enough if it is cheapest, else the lowest cost per device first). Appended to S. */
static int add_room_makers(struct planner *P, const struct tp_job_impl *nh, uint32_t *S,
                           uint32_t *m)
{
	struct cscan *s = &P->scan;
	int rc = defrag_append_outside(P);
	if (rc)
		return rc;
	uint32_t n0 = s->ninside, nout = s->njobs - n0, cnt = 0;
	if (defrag_grow_u32(P->a, &P->u32b, &P->cap_b, nout))
		return TP_ENOMEM;
	uint32_t *cand = P->u32b;
	for (uint32_t k = n0; k < s->njobs; k++) {
		bool in = false;
		for (uint32_t x = 0; x < *m && !in; x++)
			in = S[x] == k;
		if (!in && (s->jobs[k].can & CAN_PREEMPT))
			cand[cnt++] = k;
	}
	/* the shortfall: its own devices outside the candidate and the free devices there count */
	const struct tp_topology *t = P->t;
	uint32_t own_out = 0;
	for (uint32_t x = 0; x < nh->ndev; x++) {
		uint32_t node = t->dev_node[nh->devs[x]];
		own_out += (node < s->node0 || node >= s->node0 + s->nnodes) &&
		           P->c->dstate[nh->devs[x]] == 0;
	}
	uint64_t have = (uint64_t)own_out + (P->c->nfree - (s->level < 0 ? P->c->nfree : s->free));
	uint32_t need = have >= nh->ndev ? 1 : nh->ndev - (uint32_t)have;
	uint32_t single = UINT32_MAX;
	for (uint32_t x = 0; x < cnt; x++) {
		const struct cjob *cj = &s->jobs[cand[x]];
		if (cj->j->ndev >= need && (single == UINT32_MAX || cj->w < s->jobs[single].w))
			single = cand[x];
	}
	/* cheapest per device first (their a is 0: order by w / ndev) */
	for (uint32_t i = 1; i < cnt; i++)
		for (uint32_t x = i; x > 0; x--) {
			const struct cjob *a = &s->jobs[cand[x - 1]], *b = &s->jobs[cand[x]];
			if ((long double)a->w * b->j->ndev <= (long double)b->w * a->j->ndev)
				break;
			uint32_t tmp = cand[x - 1];
			cand[x - 1] = cand[x];
			cand[x] = tmp;
		}
	int64_t acc = 0;
	uint32_t got = 0, take = 0;
	while (take < cnt && got < need) {
		acc = defrag_cost_add(acc, s->jobs[cand[take]].w);
		got += s->jobs[cand[take++]].j->ndev;
	}
	if (single != UINT32_MAX && (got < need || s->jobs[single].w <= acc)) {
		s->jobs[single].force_preempt = true;
		S[(*m)++] = single;
		return 0;
	}
	if (got < need)
		return 0;
	for (uint32_t x = 0; x < take; x++) {
		s->jobs[cand[x]].force_preempt = true;
		S[(*m)++] = cand[x];
	}
	return 0;
}

/* The greedy search's state: the set S being built and which jobs are in it or banned (a job
 * with no home stays in place on the next attempt). */
struct greedy {
	bool *inS, *banned;
	uint32_t *S;
	struct by_dom bd[TP_MAX_LEVELS]; /* per layer of the scan */
	bool fewest; /* fill by usable devices (fewest jobs) instead of cost per device */
	uint32_t n;  /* jobs on the candidate when the search began (room makers come later) */
};

/* The layer whose units the fill gains next: the outermost one still short of units (a slice
 * layer of racks before the node groups inside them), or -1 when every layer has its units. */
static int short_layer(const struct planner *P)
{
	const struct cscan *s = &P->scan;
	int best = -1;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (s->ly[i].units < s->ly[i].need &&
		    (best < 0 || s->ly[i].level < s->ly[(unsigned)best].level))
			best = (int)i;
	return best;
}

/* Fill S until the tallies say the request could fit and fit_check agrees: while a layer of
 * the request is short of units (whole groups or slices in its domains), the domain of the
 * outermost such layer that gains a unit cheapest (pick_unit), so that the set stays the
 * size of the request's units rather than of the candidate; then the next job by cost per
 * device (or by size: fewest). *fits false: every movable job taken and still no fit. */
static int greedy_fill(struct planner *P, struct greedy *g, uint32_t *nS, bool *fits)
{
	struct cscan *s = &P->scan;
	uint32_t n = g->n;
	uint32_t *ord = P->u32a, nord = 0, pos = 0;
	*nS = 0;
	for (uint32_t k = 0; k < n; k++) {
		g->inS[k] = false;
		if (s->jobs[k].can && !g->banned[k])
			ord[nord++] = k;
	}
	defrag_sort_jobs(P, ord, nord, g->fewest ? defrag_by_size : defrag_by_rate);
	uint32_t amax = 0;
	for (uint32_t x = 0; x < nord; x++)
		if (s->jobs[ord[x]].a > amax)
			amax = s->jobs[ord[x]].a;
	defrag_tally_reset(P);
	*fits = false;
	for (;;) {
		if (defrag_tally_enough(P)) {
			int rc = defrag_fit_check(P, g->S, *nS, fits);
			if (rc)
				return rc;
			if (*fits)
				return 0;
		}
		uint32_t before = *nS;
		int li = g->fewest ? -1 : short_layer(P);
		if (li >= 0)
			pick_unit(P, (unsigned)li, &g->bd[li], g->inS, g->banned, g->S, nS);
		if (*nS == before) {
			while (pos < nord && g->inS[ord[pos]])
				pos++;
			if (pos == nord)
				return 0;
			uint32_t k = g->fewest ? ord[pos] : pick_covering(P, ord, pos, nord, g->inS, amax);
			g->S[(*nS)++] = k;
			if (k == ord[pos])
				pos++;
		}
		for (uint32_t x = before; x < *nS; x++) {
			g->inS[g->S[x]] = true;
			defrag_tally_job(P, g->S[x], +1);
		}
	}
}

/* Reverse deletion over S[0 .. nS), the most expensive job first: drop every job the request
 * fits without. S keeps the rest (*m of them, in fill order) and *cost their cost. */
static int greedy_prune(struct planner *P, struct greedy *g, uint32_t nS, uint32_t *m,
                        int64_t *cost)
{
	struct cscan *s = &P->scan;
	uint32_t *S = g->S, *rev = P->u32b;
	memcpy(rev, S, nS * sizeof *S);
	for (uint32_t i = 1; i < nS; i++) /* insertion sort by cost descending, then id */
		for (uint32_t x = i; x > 0; x--) {
			const struct cjob *a = &s->jobs[rev[x - 1]], *b = &s->jobs[rev[x]];
			if (a->w > b->w || (a->w == b->w && rev[x - 1] > rev[x]))
				break;
			uint32_t tmpk = rev[x - 1];
			rev[x - 1] = rev[x];
			rev[x] = tmpk;
		}
	for (uint32_t i = 0; i < nS; i++) {
		uint32_t k = rev[i];
		defrag_tally_job(P, k, -1);
		g->inS[k] = false;
		bool still = false;
		if (defrag_tally_enough(P)) {
			uint32_t left = 0;
			for (uint32_t x = 0; x < nS; x++)
				if (g->inS[S[x]])
					P->u32c[left++] = S[x];
			int rc = defrag_fit_check(P, P->u32c, left, &still);
			if (rc)
				return rc;
		}
		if (!still) {
			defrag_tally_job(P, k, +1);
			g->inS[k] = true;
		}
	}
	*m = 0;
	*cost = 0;
	for (uint32_t x = 0; x < nS; x++)
		if (g->inS[S[x]]) {
			S[(*m)++] = S[x];
			*cost = defrag_cost_add(*cost, s->jobs[S[x]].w);
		}
	return 0;
}

/* Simulate S[0 .. m); when a migrant has no home, add room makers for it (a few times) while
 * that stays in bounds. *done: a plan was offered, or nothing more can help; else *nh is the
 * job with no home, to keep in place on the next attempt. */
static int greedy_verify(struct planner *P, struct greedy *g, uint32_t m, bool *done,
                         const struct tp_job_impl **nh)
{
	struct cscan *s = &P->scan;
	int rc;
	*done = true;
	*nh = NULL;
	for (int fix = 0; fix < 4; fix++) {
		struct draft d = {0};
		int res;
		if ((rc = defrag_try_subset(P, g->S, m, &d, &res, nh)))
			return rc;
		if (res == OUT_OK) {
			defrag_offer(P, &d);
			return 0;
		}
		if (res != OUT_NOHOME)
			return 0;
		/* make room elsewhere for the job with no home, if that stays in bounds */
		uint32_t before = m;
		if ((rc = add_room_makers(P, *nh, g->S, &m)))
			return rc;
		int64_t cost = 0;
		for (uint32_t x = 0; x < m; x++)
			cost = defrag_cost_add(cost, s->jobs[g->S[x]].w);
		if (m == before || m > P->max_moves || cost > defrag_cost_bound(P))
			break;
	}
	*done = false;
	return 0;
}

/* Greedy fill, then reverse deletion, then the simulation; a job with no home is kept in place
 * and the fill starts again (a few times). */
static int greedy_search(struct planner *P)
{
	struct cscan *s = &P->scan;
	uint32_t n = s->njobs;
	size_t all = n + P->c->njobs + 1; /* room for the jobs elsewhere, once appended */
	struct greedy g = {.n = n};
	g.inS = tp_calloc(P->a, all, sizeof *g.inS);
	g.banned = tp_calloc(P->a, all, sizeof *g.banned);
	g.S = tp_mallocn(P->a, all, sizeof *g.S);
	int rc = 0;
	if (!g.inS || !g.banned || !g.S || defrag_grow_u32(P->a, &P->u32a, &P->cap_a, n) ||
	    defrag_grow_u32(P->a, &P->u32b, &P->cap_b, n)) {
		rc = TP_ENOMEM;
		goto out;
	}
	for (unsigned i = 0; i < s->nlayers && !rc; i++)
		rc = by_dom_build(P, i, &g.bd[i]);
	if (rc)
		goto out;
	for (int attempt = 0; attempt < 5; attempt++) {
		uint32_t nS, m;
		int64_t cost;
		bool fits, done;
		if ((rc = greedy_fill(P, &g, &nS, &fits)) || !fits)
			goto out;
		if ((rc = greedy_prune(P, &g, nS, &m, &cost)))
			goto out;
		if (m > P->max_moves) {
			defrag_note_moves(P, m);
			if (g.fewest)
				goto out;
			g.fewest = true; /* once more, taking the biggest jobs first */
			continue;
		}
		if (cost > defrag_cost_bound(P)) {
			if (cost > P->max_cost)
				P->diag.cost = true;
			goto out;
		}
		const struct tp_job_impl *nh;
		if ((rc = greedy_verify(P, &g, m, &done, &nh)) || done)
			goto out;
		defrag_note_nohome(P, nh);
		for (uint32_t k = 0; k < s->njobs; k++) {
			s->jobs[k].force_preempt = false;
			if (s->jobs[k].j == nh)
				g.banned[k] = true;
		}
	}
out:
	for (unsigned i = 0; i < s->nlayers; i++)
		by_dom_free(P, &g.bd[i]);
	tp_free(P->a, g.inS);
	tp_free(P->a, g.banned);
	tp_free(P->a, g.S);
	return rc;
}

/* ---- bounded branch and bound (after the greedy fill) --------------------------------------
 *
 * Depth first over the candidate's movable jobs in order of cost per usable device (at most
 * BNB_JOBS of them), each taken or not, the taken branch first. A branch ends when its cost
 * plus the fractional bound of the devices still missing (the next jobs in order, the last one
 * in part) cannot beat the best plan so far (the greedy one to start with), when it would need
 * more moves than allowed, or once the tallies say the request could fit: that set is then
 * simulated (try_subset) if it is better than the best plan in cost, then moves, then devices;
 * when the request does not fit after all (shape, exclusivity), the branch goes on adding jobs.
 * Budgets (BNB_NODES branches, BNB_TRIES simulations) bound the worst case; within them the
 * search is exact over those jobs, and its order is fixed, so the answer is deterministic.
 */

#define BNB_JOBS 64u

#define BNB_NODES 20000ul

#define BNB_TRIES 64ul

#define BNB_TRIES_COLD 2ul

struct bnb {
	uint32_t *ord, n; /* jobs by rate */
	uint32_t *S, nS;
	int64_t cost;
	uint32_t devices;
	unsigned long nodes, tries, cold;
	bool stop;
	uint32_t top[(BNB_JOBS + 1) * DEFRAG_TOPK]; /* defrag_top_build over ord */
};

/* The fractional lower bound on the cost of the devices still missing, from ord[i..]. */
static int64_t bnb_rest(const struct planner *P, const struct bnb *b, uint32_t i)
{
	const struct cscan *s = &P->scan;
	if (s->tally >= P->count)
		return 0;
	uint64_t left = P->count - s->tally;
	int64_t lb = 0;
	for (; i < b->n && left; i++) {
		const struct cjob *cj = &s->jobs[b->ord[i]];
		if (!cj->a)
			continue; /* a job elsewhere: it frees nothing here */
		if (cj->a <= left) {
			lb = defrag_cost_add(lb, cj->w);
			left -= cj->a;
		} else {
			lb = defrag_cost_add(lb, (int64_t)((long double)cj->w * left / cj->a));
			left = 0;
		}
	}
	return left ? COST_NONE : lb;
}

/* Whether a set of this cost, size and devices would beat the best plan (and the limits). */
static bool bnb_better(const struct planner *P, int64_t cost, uint32_t moves, uint32_t devices)
{
	if (cost > P->max_cost || moves > P->max_moves)
		return false;
	if (!P->have_best)
		return true;
	const struct draft *x = &P->best;
	if (cost != x->cost)
		return cost < x->cost;
	if (moves != x->moves)
		return moves < x->moves;
	return devices < x->moved_devices;
}

static int bnb_dfs(struct planner *P, struct bnb *b, uint32_t i)
{
	if (b->stop)
		return 0;
	if (++b->nodes > BNB_NODES) {
		b->stop = true;
		return 0;
	}
	int rc;
	if (defrag_tally_enough(P)) {
		if (!bnb_better(P, b->cost, b->nS, b->devices))
			return 0; /* every superset costs as much and moves more */
		/* without any plan yet, the sets the tallies accept mostly fail for want of
		 * homes, and each failure costs a simulation: few of those */
		if (++b->tries > BNB_TRIES || (!P->have_best && ++b->cold > BNB_TRIES_COLD)) {
			b->stop = true;
			return 0;
		}
		struct draft d = {0};
		int out;
		const struct tp_job_impl *nh;
		if ((rc = defrag_try_subset(P, b->S, b->nS, &d, &out, &nh)))
			return rc;
		if (out == OUT_OK) {
			defrag_offer(P, &d);
			return 0;
		}
		if (out == OUT_NOHOME)
			defrag_note_nohome(P, nh);
		if (out == OUT_CYCLE)
			return 0;
		/* no fit after all, or a migrant with no home: more jobs may help */
	}
	if (i == b->n || b->nS + 1 > P->max_moves)
		return 0;
	if (P->moves_bound && P->scan.tally < P->count) { /* too few jobs left for the devices */
		uint32_t more = defrag_moves_lb(b->top + (size_t)i * DEFRAG_TOPK, b->n - i,
		                                P->count - P->scan.tally);
		if (more == UINT32_MAX || b->nS + more > P->max_moves)
			return 0;
	}
	int64_t rest = bnb_rest(P, b, i);
	if (rest == COST_NONE || defrag_cost_add(b->cost, rest) > defrag_cost_bound(P))
		return 0;
	uint32_t k = b->ord[i];
	const struct cjob *cj = &P->scan.jobs[k];
	int64_t c0 = b->cost;
	defrag_tally_job(P, k, +1);
	b->S[b->nS++] = k;
	b->cost = defrag_cost_add(c0, cj->w);
	b->devices += cj->j->ndev;
	rc = bnb_dfs(P, b, i + 1);
	b->devices -= cj->j->ndev;
	b->cost = c0;
	b->nS--;
	defrag_tally_job(P, k, -1);
	if (rc)
		return rc;
	return bnb_dfs(P, b, i + 1);
}

static int bnb_search(struct planner *P)
{
	struct cscan *s = &P->scan;
	struct bnb b = {0};
	int rc = 0;
	b.ord = tp_mallocn(P->a, s->njobs ? s->njobs : 1, sizeof *b.ord);
	b.S = tp_mallocn(P->a, BNB_JOBS, sizeof *b.S);
	if (!b.ord || !b.S) {
		rc = TP_ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < s->njobs; k++) {
		s->jobs[k].force_preempt = false;
		if (k < s->ninside && s->jobs[k].can && s->jobs[k].a)
			b.ord[b.n++] = k;
	}
	defrag_sort_jobs(P, b.ord, b.n, defrag_by_rate);
	if (b.n > BNB_JOBS)
		b.n = BNB_JOBS;
	/* on a small cluster, the movable jobs elsewhere last: stopping one can make room for a
	 * migrant (as in the exact search) */
	if (s->level >= 0 && P->c->njobs <= 2 * (size_t)TP_DEFRAG_EXACT_MAX) {
		if ((rc = defrag_append_outside(P)))
			goto out;
		uint32_t *o = tp_reallocn(P->a, b.ord, (size_t)s->njobs + 1, sizeof *b.ord);
		if (!o) {
			rc = TP_ENOMEM;
			goto out;
		}
		b.ord = o;
		uint32_t n0 = b.n;
		for (uint32_t k = s->ninside; k < s->njobs && b.n < BNB_JOBS; k++)
			if (s->jobs[k].can)
				b.ord[b.n++] = k;
		defrag_sort_jobs(P, b.ord + n0, b.n - n0, defrag_by_index);
	}
	defrag_top_build(P, b.ord, b.n, b.top);
	defrag_tally_reset(P);
	rc = bnb_dfs(P, &b, 0);
	P->branches += b.nodes;
out:
	tp_free(P->a, b.ord);
	tp_free(P->a, b.S);
	return rc;
}

/* Search the scanned candidate for its cheapest plan, offering it to P->best. */
int defrag_evaluate_candidate(struct planner *P)
{
	struct cscan *s = &P->scan;
	int rc = defrag_budget_check(P, TP_BUDGET_CANDIDATES);
	if (rc)
		return rc;
	P->stats.evaluated++;
	bool empty;
	rc = defrag_restrict_request(P, &empty);
	if (rc || empty)
		return rc;
	/* more moves than allowed whatever the plan: no search (defrag_bound.c) */
	bool over = false;
	uint32_t at_least;
	if (P->moves_bound && (rc = defrag_moves_over(P, &over, &at_least)))
		return rc;
	if (over) {
		if (at_least != UINT32_MAX)
			defrag_note_moves(P, at_least);
		return 0;
	}
	/* no room beside the jobs that cannot leave the candidate, whatever set moves */
	if (P->space_bound && (rc = defrag_space_over(P, &over)))
		return rc;
	if (over) {
		P->ruled_out++;
		return 0;
	}
	if (defrag_grow_u32(P->a, &P->u32c, &P->cap_c, s->njobs))
		return TP_ENOMEM;
	/* the candidate's bound, for the plan's lower bound when its search is not exact */
	if ((rc = defrag_lower_bounds(P)))
		return rc;
	int64_t lb = s->lb;
	bool done;
	if ((rc = defrag_target_search(P, &done)) || done)
		return rc;
	if (defrag_grow_u32(P->a, &P->u32c, &P->cap_c, s->njobs))
		return TP_ENOMEM;
	if (s->nmov <= P->exact_max && s->nmov <= 20)
		return exact_search(P); /* every subset: exact */
	defrag_lb_fold(P, lb);
	if ((rc = greedy_search(P)))
		return rc;
	return bnb_search(P);
}
