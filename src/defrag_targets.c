/* SPDX-License-Identifier: MIT */
/*
 * The target-set search (issue #15): exact plans for requests cut into units of a level below
 * the candidate's (slices, or groups), and the caller's preferred targets (policy version 4).
 *
 * A plan lands the request's units of its outermost layer in some set R of that layer's
 * domains inside the candidate (at most `need` of them: each holds at least one unit). Moving
 * a job that has no device in R frees nothing the request uses; it only pays when it makes
 * room for a migrant. So the planner searches every set T of at most `need` domains that could
 * hold the units once every movable job on T left, on its own: the devices outside T are not
 * the request's (the request restricted to T's nodes, the jobs' usable devices counted on T
 * only), the cheapest sets of jobs on T that the tallies accept are listed by a depth-first
 * search bounded by the best plan and the fractional bounds of the devices and of the whole
 * units (slices, groups) still missing, and they are simulated cheapest first (cost, moves,
 * devices); the first that works is T's plan. The search lists no more sets than the
 * simulations the budget has left can try.
 * On small clusters (as the exact subset search does) up to TARGET_ROOM_DEPTH movable jobs
 * elsewhere join a set as room makers for the migrants. The sets T are taken in order of their
 * fractional lower bound, and a set whose bound cannot beat the best plan is skipped.
 *
 * When every T was searched to its end (no budget hit, no simulation that failed for a reason
 * a larger set of jobs could fix), the candidate's best plan is optimal for the spec's order
 * and the general search is skipped; else the general search runs as well (its plans are
 * valid, and the better one is kept), and the smallest bound of the sets not searched to their
 * end is folded into the plan's lower bound.
 */
#include "defrag_internal.h"

#include <assert.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Most target sets per candidate (sum over k <= need of C(ne, k)). */
#define TARGET_SETS 256u

/* Most movable jobs on one target set for the exact search. */
#define TARGET_JOBS 32u

/* Branches of the depth-first search per target set, and sets simulated per target set. */
#define TARGET_NODES 200000ul

/* ... and while no plan exists at all: such searches mostly end in sets that fail for want of
 * homes (the cold limits below), so they list fewer. */
#define TARGET_NODES_COLD 20000ul

#define TARGET_TRIES 64u

/* Sets per target set that the counts rule out without a simulation and that count as no
 * try, at most (each costs counts, not a simulation). */
#define TARGET_RULED 1024u

/* Simulations per target set while no plan exists at all (the simulator's calls mostly fail). */
#define TARGET_TRIES_COLD 32u

/* ... and over all the target sets of a candidate. */
#define TARGET_CAND_COLD 64u

/* Room makers (movable jobs off the target set) in one set, at most, and only when the jobs on
 * the set and the room makers together are at most TARGET_ROOM_JOBS. */
#define TARGET_ROOM_DEPTH 3u

#define TARGET_ROOM_JOBS 20u

/* Sets with room makers listed per target set, at most. */
#define TARGET_RECORDS 8192u

void defrag_lb_fold(struct planner *P, int64_t lb)
{
	if (lb < P->lb_open)
		P->lb_open = lb;
}

/* ---- which layer, and which sets ------------------------------------------------------------ */

static uint64_t sets_upto(uint32_t ne, uint32_t k)
{
	uint64_t total = 0, c = 1; /* c = C(ne, i) */
	for (uint32_t i = 1; i <= k && i <= ne; i++) {
		c = c * (ne - i + 1) / i;
		total += c;
		if (total > TARGET_SETS)
			return UINT64_MAX;
	}
	return total;
}

/* The outermost layer below the candidate with at least two domains, or -1 when there is none
 * or its sets are too many. */
static int pick_layer(const struct planner *P)
{
	const struct cscan *s = &P->scan;
	int best = -1;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (best < 0 || s->ly[i].level < s->ly[best].level)
			best = (int)i;
	if (best < 0)
		return -1;
	const struct scan_layer *ly = &s->ly[best];
	if (ly->ne < 2 || ly->ne > TP_DEFRAG_MAX_TARGETS || !ly->need)
		return -1;
	return sets_upto(ly->ne, ly->need) == UINT64_MAX ? -1 : best;
}

struct tset {
	uint64_t mask; /* domains of the layer, bit e: domain ly->e0 + e */
	int64_t lb;    /* fractional bound of the cost of fitting the request on it */
};

static int tset_cmp(const void *x, const void *y)
{
	const struct tset *a = x, *b = y;
	if (a->lb != b->lb)
		return a->lb < b->lb ? -1 : 1;
	return (a->mask > b->mask) - (a->mask < b->mask);
}

/* Usable devices per layer domain of job k (from the full scan): into cnt[ne]. */
static void job_per_dom(const struct cscan *s, unsigned li, uint32_t k, uint32_t *cnt)
{
	const struct cjob *cj = &s->jobs[k];
	for (uint32_t x = 0; x < cj->a; x++)
		cnt[s->jdom[(size_t)(cj->d0 + x) * s->nlayers + li]]++;
}

struct bit {
	int64_t w;
	uint32_t a;
};

static int bit_cmp(const void *x, const void *y)
{
	const struct bit *a = x, *b = y;
	/* ascending w / a, without division */
	long double l = (long double)a->w * b->a, r = (long double)b->w * a->a;
	if (l != r)
		return l < r ? -1 : 1;
	return (a->a < b->a) - (a->a > b->a);
}

/* The fractional bound of freeing `need` devices from items (sorted here); COST_NONE when they
 * cannot. */
static int64_t frac_bound(struct bit *v, uint32_t n, uint64_t need)
{
	qsort(v, n, sizeof *v, bit_cmp);
	int64_t lb = 0;
	for (uint32_t i = 0; i < n && need; i++) {
		if (v[i].a <= need) {
			lb = defrag_cost_add(lb, v[i].w);
			need -= v[i].a;
		} else {
			lb = defrag_cost_add(lb, (int64_t)((long double)v[i].w * need / v[i].a));
			need = 0;
		}
	}
	return need ? COST_NONE : lb;
}

/* Every set of at most `need` domains of the layer, each able to hold a unit once its movable
 * jobs left, together able to hold all of them, with its fractional bound; sorted by bound. */
static int list_sets(struct planner *P, unsigned li, struct tset **out, uint32_t *nout)
{
	const struct cscan *s = &P->scan;
	const struct scan_layer *ly = &s->ly[li];
	uint32_t ne = ly->ne, nmv = 0;
	uint32_t *cnt = tp_calloc(P->a, (size_t)s->njobs * ne + ne + 1, sizeof *cnt);
	struct tset *v = tp_mallocn(P->a, TARGET_SETS, sizeof *v);
	struct bit *items = tp_mallocn(P->a, s->njobs ? s->njobs : 1, sizeof *items);
	int rc = 0;
	*out = NULL;
	*nout = 0;
	if (!cnt || !v || !items) {
		rc = TP_ENOMEM;
		goto fail;
	}
	uint32_t *units = cnt + (size_t)s->njobs * ne; /* [ne] cap units per domain */
	for (uint32_t e = 0; e < ne; e++)
		units[e] = ly->f0[e];
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can && s->jobs[k].a) {
			job_per_dom(s, li, k, cnt + (size_t)k * ne);
			for (uint32_t e = 0; e < ne; e++)
				units[e] += cnt[(size_t)k * ne + e];
			nmv++;
		}
	for (uint32_t e = 0; e < ne; e++)
		units[e] /= ly->size;
	/* combinations in lexicographic order of their domains */
	uint32_t k = ly->need < ne ? ly->need : ne, n = 0;
	for (uint32_t size = 1; size <= k; size++) {
		uint32_t idx[TP_DEFRAG_MAX_TARGETS];
		for (uint32_t i = 0; i < size; i++)
			idx[i] = i;
		for (;;) {
			uint64_t mask = 0, u = 0, free = 0;
			bool each = true;
			for (uint32_t i = 0; i < size; i++) {
				mask |= UINT64_C(1) << idx[i];
				u += units[idx[i]];
				each &= units[idx[i]] > 0;
				free += ly->f0[idx[i]];
			}
			if (each && u >= ly->need && n < TARGET_SETS) {
				uint32_t ni = 0;
				for (uint32_t j = 0; j < s->njobs; j++) {
					if (!s->jobs[j].can || !s->jobs[j].a)
						continue;
					uint32_t a = 0;
					for (uint32_t i = 0; i < size; i++)
						a += cnt[(size_t)j * ne + idx[i]];
					if (a)
						items[ni++] = (struct bit){s->jobs[j].w, a};
				}
				uint64_t need = P->count > free ? P->count - free : 0;
				v[n++] = (struct tset){mask, frac_bound(items, ni, need)};
			}
			int32_t i = (int32_t)size - 1;
			while (i >= 0 && idx[i] == ne - size + (uint32_t)i)
				i--;
			if (i < 0)
				break;
			idx[i]++;
			for (uint32_t j = (uint32_t)i + 1; j < size; j++)
				idx[j] = idx[j - 1] + 1;
		}
	}
	(void)nmv;
	qsort(v, n, sizeof *v, tset_cmp);
	tp_free(P->a, cnt);
	tp_free(P->a, items);
	*out = v;
	*nout = n;
	return 0;
fail:
	tp_free(P->a, cnt);
	tp_free(P->a, v);
	tp_free(P->a, items);
	return rc;
}

/* ---- one target set: the cheapest sets of jobs, depth first ---------------------------------- */

struct tsub {
	int64_t cost;
	uint32_t moves, devices;
	uint64_t mask;  /* bits over dfs.mv */
	uint8_t depth;  /* room makers added to a set the tallies accepted */
	bool nohome;    /* simulated: a migrant had no home */
};

static int tsub_cmp(const void *x, const void *y)
{
	const struct tsub *a = x, *b = y;
	if (a->cost != b->cost)
		return a->cost < b->cost ? -1 : 1;
	if (a->moves != b->moves)
		return a->moves < b->moves ? -1 : 1;
	if (a->devices != b->devices)
		return a->devices < b->devices ? -1 : 1;
	return (a->mask > b->mask) - (a->mask < b->mask);
}

struct tdfs {
	uint32_t mv[64];
	uint32_t mt, m; /* mv[0 .. mt): jobs on the set, by rate; mv[mt .. m): room makers */
	uint64_t mask;
	uint32_t nS, devices;
	int64_t cost, bound;
	struct tsub *v; /* the sets the tallies accept */
	size_t n, cap;
	struct tsub *x; /* those with room makers added */
	size_t nx, capx;
	unsigned long nodes, max_nodes;
	bool stopped, over_moves, over_cost;
	uint32_t min_moves_over;
	/* the costs of the k cheapest sets recorded, ascending: simulate_list looks at no more
	 * than k sets (the tries it allows, and one more for the bound), so a branch that costs
	 * more than the k-th cannot matter */
	int64_t kc[TARGET_TRIES + 1];
	uint32_t nk, k;
	uint32_t top[65 * DEFRAG_TOPK]; /* defrag_top_build over mv[0 .. mt) */
	struct ustate *us; /* the shape bound's state per layer domain (unit_rest) */
	size_t ubase[TP_MAX_LEVELS];
	uint64_t ustamp;
};

/* The sets simulate_list can look at, at most: TARGET_TRIES simulated and one for the bound;
 * while no plan exists, the cold limits' tries and that one. */
static uint32_t looked_at(const struct planner *P)
{
	if (P->have_best)
		return TARGET_TRIES + 1;
	uint32_t left = P->cold_sims >= TARGET_CAND_COLD ? 0 : TARGET_CAND_COLD - P->cold_sims;
	return (left < TARGET_TRIES_COLD ? left : TARGET_TRIES_COLD) + 1;
}

static void kc_insert(struct tdfs *d, int64_t cost)
{
	if (d->nk == d->k && cost >= d->kc[d->k - 1])
		return;
	uint32_t x = d->nk < d->k ? d->nk++ : d->k - 1;
	while (x > 0 && d->kc[x - 1] > cost) {
		d->kc[x] = d->kc[x - 1];
		x--;
	}
	d->kc[x] = cost;
}

/* Whether a branch that costs at least `cost` cannot be among the k cheapest sets. */
static bool beyond_k(const struct tdfs *d, int64_t cost)
{
	return d->nk == d->k && cost > d->kc[d->k - 1];
}

static int dfs_record(struct planner *P, struct tdfs *d)
{
	if (d->nS > P->max_moves) {
		d->over_moves = true;
		if (d->nS < d->min_moves_over)
			d->min_moves_over = d->nS;
		return 0;
	}
	if (tp_grow(P->a, (void **)&d->v, &d->cap, d->n + 1, sizeof *d->v))
		return TP_ENOMEM;
	d->v[d->n++] = (struct tsub){d->cost, d->nS, d->devices, d->mask, 0, false};
	kc_insert(d, d->cost);
	return 0;
}

static void dfs_take(struct planner *P, struct tdfs *d, uint32_t i, int sign)
{
	const struct cjob *cj = &P->scan.jobs[d->mv[i]];
	if (sign > 0) {
		d->mask |= UINT64_C(1) << i;
		d->nS++;
		d->cost = defrag_cost_add(d->cost, cj->w);
		d->devices += cj->j->ndev;
	} else {
		d->mask &= ~(UINT64_C(1) << i);
		d->nS--;
		d->cost -= cj->w; /* exact: the sums stay far below COST_CAP here */
		d->devices -= cj->j->ndev;
	}
	if (cj->a)
		defrag_tally_job(P, d->mv[i], sign);
}

/* The fractional bound of the devices still missing, from mv[i .. mt). */
static int64_t dfs_rest(const struct planner *P, const struct tdfs *d, uint32_t i)
{
	const struct cscan *s = &P->scan;
	if (s->tally >= P->count)
		return 0;
	uint64_t left = P->count - s->tally;
	int64_t lb = 0;
	for (; i < d->mt && left; i++) {
		const struct cjob *cj = &s->jobs[d->mv[i]];
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

/* Units a layer may miss for unit_rest to bound it. */
#define UNIT_MAX 64u

/* One layer domain in unit_rest: the devices its next unit still needs, the units bounded so
 * far, the cost of the next one so far. */
struct ustate {
	uint64_t stamp; /* tdfs.ustamp when last set: else not yet touched by this bound */
	uint32_t rem, k;
	double c;
};

static void top_push(double *top, uint32_t *nt, uint32_t miss, double v)
{
	if (*nt == miss && v >= top[miss - 1])
		return;
	uint32_t x = *nt < miss ? (*nt)++ : miss - 1;
	while (x > 0 && top[x - 1] > v) {
		top[x] = top[x - 1];
		x--;
	}
	top[x] = v;
}

/* The fractional bound of the units still missing, from mv[i .. mt): the shape, where
 * dfs_rest bounds the device count. Each job's cost is shared among its usable devices (its
 * rate); a domain's next units need the devices it still lacks, taken cheapest first, so a
 * domain's k-th unit costs at least as much as its (k-1)-th and the cheapest completion of the
 * units a layer misses costs at least the sum of the cheapest such marginal costs. A job that
 * alone holds some domains frees their units together, at its cost share of their devices.
 * Double sums, less a billionth and one microsecond per unit: never above the exact bound.
 * COST_NONE: the jobs left cannot complete the units. */
static int64_t unit_rest(const struct planner *P, struct tdfs *d, uint32_t i)
{
	const struct cscan *s = &P->scan;
	int64_t best = 0;
	for (unsigned L = 0; L < s->nlayers; L++) {
		const struct scan_layer *ly = &s->ly[L];
		if (ly->units >= ly->need || ly->size < 2 || ly->need - ly->units > UNIT_MAX)
			continue;
		const uint32_t miss = (uint32_t)(ly->need - ly->units);
		double top[UNIT_MAX];
		uint32_t nt = 0;
		struct ustate *us = d->us + d->ubase[L];
		const uint64_t stamp = ++d->ustamp;
		for (uint32_t x = i; x < d->mt; x++) {
			const struct cjob *cj = &s->jobs[d->mv[x]];
			uint32_t left = cj->a, fold = 0;
			for (uint32_t r = cj->r0; r < cj->r0 + cj->nr; r++) {
				const struct jrun *run = &s->jrun[r];
				if (run->layer != L)
					continue;
				if (run->e == TP_NONE) {
					fold = run->n;
					continue;
				}
				left -= run->n;
				struct ustate *u = &us[run->e];
				if (u->stamp != stamp) {
					u->stamp = stamp;
					u->rem = ly->size - ly->f[run->e] % ly->size;
					u->k = 0;
					u->c = 0;
				}
				for (uint32_t n = run->n; n && u->k < miss;) {
					uint32_t take = n < u->rem ? n : u->rem;
					u->c += cj->rate * take;
					u->rem -= take;
					n -= take;
					if (!u->rem) {
						top_push(top, &nt, miss, u->c);
						u->c = 0;
						u->rem = ly->size;
						u->k++;
					}
				}
			}
			if (fold) {
				double per = cj->rate * left / fold;
				for (uint32_t q = 0; q < fold && q < miss; q++)
					top_push(top, &nt, miss, per);
			}
		}
		if (nt < miss)
			return COST_NONE;
		double sum = 0;
		for (uint32_t q = 0; q < miss; q++)
			sum += top[q];
		sum *= 1.0 - 1e-9; /* far beyond the rounding of these sums */
		int64_t lb = sum >= (double)COST_CAP ? COST_CAP : (int64_t)sum - (int64_t)miss - 1;
		if (lb > best)
			best = lb;
	}
	return best;
}

/* Include or exclude mv[i] for every job on the set; a set the tallies accept is recorded and
 * not grown here: a larger one costs more, and helps only as room for migrants (the room
 * makers of extend_sets) or when the shape did not fit (then the search says it is not
 * exact). `above`: the cost that every set below costs at least (the shape bound of an
 * ancestor, COST_NONE: none); an include child inherits it, an exclude child (fewer jobs
 * left) bounds its own. */
static int dfs(struct planner *P, struct tdfs *d, uint32_t i, int64_t above)
{
	if (d->stopped)
		return 0;
	if (++d->nodes > d->max_nodes) {
		d->stopped = true;
		return 0;
	}
	if (d->cost > d->bound) {
		d->over_cost |= d->bound == P->max_cost;
		return 0;
	}
	if (beyond_k(d, d->cost))
		return 0;
	if (defrag_tally_enough(P))
		return dfs_record(P, d);
	if (i >= d->mt)
		return 0;
	int64_t rest = dfs_rest(P, d, i);
	if (rest == COST_NONE)
		return 0;
	if (above == COST_NONE && P->shape_bound) { /* else the parent's bound: it holds below */
		int64_t urest = unit_rest(P, d, i);
		if (urest == COST_NONE)
			return 0;
		above = defrag_cost_add(d->cost, urest);
	}
	if (above != COST_NONE && above - d->cost > rest)
		rest = above - d->cost;
	if (defrag_cost_add(d->cost, rest) > d->bound) {
		d->over_cost |= d->bound == P->max_cost;
		return 0;
	}
	if (beyond_k(d, defrag_cost_add(d->cost, rest)))
		return 0;
	/* too few jobs left to free the devices missing within max_moves: only sets over it are
	 * below, and they could not lower min_moves_over */
	uint32_t more = P->scan.tally >= P->count ? 0
	                : defrag_moves_lb(d->top + (size_t)i * DEFRAG_TOPK, d->mt - i,
	                                  P->count - P->scan.tally);
	if (more == 0)
		more = 1; /* not enough yet: at least one more job */
	/* with a plan in hand no set over max_moves matters (it only names the moves a failure
	 * needed) */
	if (P->moves_bound && P->have_best && more != UINT32_MAX && d->nS + more > P->max_moves)
		return 0;
	if (P->moves_bound && more != UINT32_MAX && d->nS + more > P->max_moves && d->over_moves &&
	    d->min_moves_over <= d->nS + more)
		return 0;
	dfs_take(P, d, i, +1);
	int rc = dfs(P, d, i + 1, above);
	dfs_take(P, d, i, -1);
	if (rc)
		return rc;
	return dfs(P, d, i + 1, COST_NONE);
}

/* Sets with up to TARGET_ROOM_DEPTH more jobs (of the set or elsewhere) added to `cur`, each
 * within `cut`; *full: the list or the depth ran out. */
static int extend(struct planner *P, struct tdfs *d, struct tsub cur, uint32_t from, int64_t cut,
                  bool *full)
{
	if (cur.depth == TARGET_ROOM_DEPTH) {
		*full = true;
		return 0;
	}
	const struct cscan *s = &P->scan;
	for (uint32_t x = from; x < d->m; x++) {
		if (cur.mask >> x & 1)
			continue;
		const struct cjob *cj = &s->jobs[d->mv[x]];
		struct tsub nx = cur;
		nx.cost = defrag_cost_add(cur.cost, cj->w);
		nx.moves++;
		nx.devices += cj->j->ndev;
		nx.mask |= UINT64_C(1) << x;
		nx.depth++;
		if (nx.cost > cut || nx.moves > P->max_moves)
			continue;
		if (d->nx == TARGET_RECORDS) {
			*full = true;
			return 0;
		}
		if (tp_grow(P->a, (void **)&d->x, &d->capx, d->nx + 1, sizeof *d->x))
			return TP_ENOMEM;
		d->x[d->nx++] = nx;
		int rc = extend(P, d, nx, x + 1, cut, full);
		if (rc)
			return rc;
	}
	return 0;
}

/* The outcome of one target set. */
struct tresult {
	bool exact;  /* searched to its end: no plan on it beats the best one */
	int64_t lb;  /* else: a lower bound of the plans on it */
};

static void not_exact(struct tresult *res, int64_t lb)
{
	if (res->exact || lb < res->lb)
		res->lb = lb;
	res->exact = false;
}

/* Simulate v[0 .. n) (sorted) cheapest first, until one works (offered) or none can beat the
 * best plan. *tries counts simulations. */
static int simulate_list(struct planner *P, struct tdfs *d, struct tsub *v, size_t n,
                         const struct scan_layer *ly, uint64_t tmask, bool room, unsigned *tries,
                         unsigned *ruled, struct tresult *res)
{
	for (size_t x = 0; x < n; x++) {
		if (v[x].cost > defrag_cost_bound(P))
			return 0; /* sorted: nothing left can beat the best plan */
		bool cold = !P->have_best && (*tries >= TARGET_TRIES_COLD ||
		                              P->cold_sims >= TARGET_CAND_COLD);
		if ((*tries)++ == TARGET_TRIES || cold) {
			/* while no plan exists, the sets mostly fail for want of homes, each a full
			 * simulation: few of those, then the general search decides */
			not_exact(res, v[x].cost);
			return 0;
		}
		uint32_t S[64], ns = 0;
		for (uint32_t i = 0; i < d->m; i++)
			if (v[x].mask >> i & 1)
				S[ns++] = d->mv[i];
		struct draft dr = {0};
		int out;
		const struct tp_job_impl *nh;
		P->cold_sims += !P->have_best;
		uint64_t sims = P->stats.simulated;
		int rc = defrag_try_subset(P, S, ns, &dr, &out, &nh);
		if (rc)
			return rc;
		if (P->stats.simulated == sims && *ruled < TARGET_RULED) {
			/* ruled out by the counts, without a simulation: not a try */
			(*tries)--;
			P->cold_sims -= !P->have_best;
			(*ruled)++;
		}
		if (out == OUT_OK) {
			if (ly) { /* else the candidate, as the simulation set it */
				dr.tlevel = (int)ly->level;
				dr.ntgt = 0;
				for (uint32_t e = 0; e < ly->ne; e++)
					if (tmask >> e & 1)
						dr.tgt[dr.ntgt++] = ly->e0 + e;
			}
			defrag_offer(P, &dr);
			return 0; /* the cheapest set here that works */
		}
		if (out == OUT_NOHOME) {
			defrag_note_nohome(P, nh);
			v[x].nohome = true;
			if (!room)
				not_exact(res, v[x].cost); /* room elsewhere was not tried */
		} else {
			/* more jobs might fit the shape or break the cycle: not tried */
			not_exact(res, v[x].cost);
		}
	}
	return 0;
}

/* The sets the tallies accept, cheapest first; then, for those whose migrants had no home, the
 * same with room makers (more jobs stopped to make room) that could still beat the best. */
static int simulate_sets(struct planner *P, struct tdfs *d, const struct scan_layer *ly,
                         uint64_t tmask, bool room, struct tresult *res)
{
	unsigned tries = 0, ruled = 0;
	if (d->n > 1)
		qsort(d->v, d->n, sizeof *d->v, tsub_cmp);
	int rc = simulate_list(P, d, d->v, d->n, ly, tmask, room, &tries, &ruled, res);
	if (rc)
		return rc;
	bool full = false;
	for (size_t x = 0; x < d->n && !rc; x++)
		if (d->v[x].nohome)
			rc = extend(P, d, d->v[x], 0, defrag_cost_bound(P), &full);
	if (rc || !d->nx)
		return rc;
	if (full)
		not_exact(res, d->v[0].cost);
	qsort(d->x, d->nx, sizeof *d->x, tsub_cmp);
	return simulate_list(P, d, d->x, d->nx, ly, tmask, room, &tries, &ruled, res);
}

/* The nodes of the set's domains (and of the preferred targets, if any) into P->tnode. */
static void set_nodes(struct planner *P, unsigned li, uint64_t mask)
{
	const struct scan_layer *ly = &P->scan.ly[li];
	const struct tp_topology *t = P->t;
	memset(P->tbuf, 0, t->nnodes);
	for (uint32_t e = 0; e < ly->ne; e++) {
		if (!(mask >> e & 1))
			continue;
		uint32_t n0, nn;
		tp_dom_nodes(t, ly->level, ly->e0 + e, &n0, &nn);
		for (uint32_t n = n0; n < n0 + nn; n++)
			P->tbuf[n] = !P->tpref || P->tpref[n];
	}
	P->tnode = P->tbuf;
}

/* The movable jobs of the rescanned candidate: on T (by rate), then room makers. */
static int list_jobs(struct planner *P, struct tdfs *d, bool *room, bool *fits_list)
{
	struct cscan *s = &P->scan;
	d->mt = 0;
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can && s->jobs[k].a) {
			if (d->mt == TARGET_JOBS) {
				*fits_list = false;
				return 0;
			}
			d->mv[d->mt++] = k;
		}
	*fits_list = true;
	defrag_sort_jobs(P, d->mv, d->mt, defrag_by_rate);
	d->m = d->mt;
	*room = false;
	/* on a small cluster, the movable jobs elsewhere too (room makers for migrants) */
	if (P->c->njobs <= 2 * (size_t)TP_DEFRAG_EXACT_MAX) {
		/* a candidate below the cluster: its scan has none of the jobs outside it yet */
		int rc = s->level >= 0 ? defrag_append_outside(P) : 0;
		if (rc)
			return rc;
		uint32_t m = d->mt;
		for (uint32_t k = 0; k < s->njobs; k++)
			if (s->jobs[k].can && !s->jobs[k].a && m < 64)
				d->mv[m++] = k;
		if (m <= TARGET_ROOM_JOBS) {
			d->m = m;
			*room = true;
		}
	}
	return 0;
}

/* The exact search on the scan as it stands (a target set's, or the whole candidate's when ly
 * is NULL): list the cheapest sets of jobs, simulate them. */
static int search_scan(struct planner *P, const struct scan_layer *ly, uint64_t tmask,
                       struct tresult *res)
{
	struct cscan *s = &P->scan;
	res->exact = true;
	res->lb = COST_NONE;
	struct tdfs *d = tp_calloc(P->a, 1, sizeof *d);
	if (!d)
		return TP_ENOMEM;
	bool room, listed;
	int rc = list_jobs(P, d, &room, &listed);
	if (rc)
		goto out;
	if (!listed) {
		res->exact = false;
		if ((rc = defrag_lower_bounds(P)) == 0)
			res->lb = s->lb;
		goto out;
	}
	d->bound = defrag_cost_bound(P);
	d->min_moves_over = UINT32_MAX;
	d->k = looked_at(P);
	/* the simulations the budget has left, and one that stops the search: no set past them is
	 * ever simulated, as long as every set looked at is simulated; where the counts may rule
	 * sets out without a simulation (defrag_counts_rule_out, without allow_less_local) a set
	 * past them may still be tried */
	if (P->max_sims != UINT32_MAX && P->pol.allow_less_local) {
		uint64_t left = P->stats.simulated >= P->max_sims ? 0 : P->max_sims - P->stats.simulated;
		if (left + 1 < d->k)
			d->k = (uint32_t)left + 1;
	}
	d->max_nodes = P->have_best ? TARGET_NODES : TARGET_NODES_COLD;
	defrag_top_build(P, d->mv, d->mt, d->top);
	size_t nu = 0;
	for (unsigned L = 0; L < s->nlayers; L++) {
		d->ubase[L] = nu;
		nu += s->ly[L].ne;
	}
	if (!(d->us = tp_calloc(P->a, nu ? nu : 1, sizeof *d->us))) {
		rc = TP_ENOMEM;
		goto out;
	}
	defrag_tally_reset(P);
	rc = dfs(P, d, 0, COST_NONE);
	P->branches += d->nodes;
	if (rc)
		goto out;
	if (d->stopped) {
		res->exact = false;
		if ((rc = defrag_lower_bounds(P)))
			goto out;
		res->lb = s->lb;
	}
	rc = simulate_sets(P, d, ly, tmask, room, res);
	if (!rc && d->over_moves)
		defrag_note_moves(P, d->min_moves_over);
	if (d->over_cost)
		P->diag.cost = true;
out:
	tp_free(P->a, d->v);
	tp_free(P->a, d->x);
	tp_free(P->a, d->us);
	tp_free(P->a, d);
	return rc;
}

/* Search one target set T (mask over the layer's domains): rescan the candidate restricted
 * to T, then the exact search. */
static int search_set(struct planner *P, unsigned li, uint64_t tmask, struct tresult *res)
{
	struct cscan *s = &P->scan;
	const int level = s->level;
	const uint32_t dom = s->dom;
	struct scan_layer ly = s->ly[li]; /* level, e0, ne: the same after the rescan */
	set_nodes(P, li, tmask);
	int rc = defrag_scan_candidate(P, level, dom);
	bool empty;
	if (!rc)
		rc = defrag_restrict_request(P, &empty);
	res->exact = true;
	res->lb = COST_NONE;
	if (rc || empty)
		return rc;
	return search_scan(P, &ly, tmask, res);
}

/* Search the scanned candidate by target sets. *done: every set was searched to its end (or
 * pruned by the best plan), so the candidate's best plan is optimal; the general search may
 * be skipped. Else the candidate is scanned again as it was. */
int defrag_target_search(struct planner *P, bool *done)
{
	struct cscan *s = &P->scan;
	*done = false;
	if (P->compact)
		return 0;
	int li = pick_layer(P);
	if (li < 0) {
		/* no target sets: the exact search on the whole candidate */
		struct tresult res;
		int rc = search_scan(P, NULL, 0, &res);
		if (rc)
			return rc;
		*done = res.exact;
		if (!res.exact)
			defrag_lb_fold(P, res.lb);
		return 0;
	}
	if (!P->tbuf && !(P->tbuf = tp_calloc(P->a, P->t->nnodes ? P->t->nnodes : 1, 1)))
		return TP_ENOMEM;
	struct tset *sets;
	uint32_t nsets;
	int rc = list_sets(P, (unsigned)li, &sets, &nsets);
	if (rc)
		return rc;
	const int level = s->level;
	const uint32_t dom = s->dom;
	const uint8_t *saved = P->tnode;
	bool all = true;
	P->cold_sims = 0;
	int64_t open = COST_NONE;
	P->in_targets = true;
	for (uint32_t x = 0; x < nsets && !rc; x++) {
		if (sets[x].lb == COST_NONE)
			continue;
		if (P->have_best ? sets[x].lb > P->best.cost : sets[x].lb > P->max_cost)
			break; /* sorted by bound: no set left can beat the best plan */
		struct tresult res;
		rc = search_set(P, (unsigned)li, sets[x].mask, &res);
		if (!rc && !res.exact) {
			all = false;
			if (res.lb < open)
				open = res.lb;
		}
	}
	P->in_targets = false;
	P->tnode = saved;
	tp_free(P->a, sets);
	if (rc)
		return rc;
	if (all) {
		*done = true;
		return 0;
	}
	defrag_lb_fold(P, open);
	/* the general search runs on the candidate as it was */
	bool empty;
	if ((rc = defrag_scan_candidate(P, level, dom)) == 0)
		rc = defrag_restrict_request(P, &empty);
	return rc;
}

/* ---- preferred targets (policy version 4) ---------------------------------------------------- */

/* Mark the nodes of the policy's preferred targets (P->tpref; defrag_policy_check() has
 * checked them); none: P->tpref stays NULL. */
int defrag_prefer_setup(struct planner *P)
{
	const tp_defrag_policy *pol = &P->pol;
	const struct tp_topology *t = P->t;
	if (!pol->nprefer_targets)
		return 0;
	if (!(P->tprefbuf = tp_calloc(P->a, t->nnodes ? t->nnodes : 1, 1)))
		return TP_ENOMEM;
	for (size_t i = 0; i < pol->nprefer_targets; i++) {
		uint32_t n0, nn;
		tp_dom_nodes(t, pol->prefer_level, pol->prefer_targets[i], &n0, &nn);
		memset(P->tprefbuf + n0, 1, nn);
	}
	P->tpref = P->tprefbuf;
	return 0;
}
