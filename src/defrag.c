/* SPDX-License-Identifier: MIT */
/*
 * Defragmentation plans: which running jobs to migrate or preempt, and in which order, so that a
 * request fits (tp_defrag_plan) or so that whole domains of a level become free
 * (tp_defrag_compact). docs/defrag.md explains the search with an example; in short:
 *
 * Candidates. A request with a required level (or a colocate level) must land inside one domain
 * of that level, so the candidates are those domains; any other request may use free devices
 * anywhere, so its one candidate is the whole cluster. Domains above the node level are walked
 * best-first by a lower bound on the cost of freeing what they lack: first the bound from the
 * cluster's checkpoint histogram (cluster_impl.h ckhist: the cheapest held devices of the
 * domain at their bucket's floor; no device read), then, once a domain is read (one rack: 72
 * devices), the exact fractional bound over its movable jobs (jobs by cost per device they
 * would free). The smallest bound, read or not, is expanded next; the walk stops when it cannot
 * beat the best plan, so most domains are never read. (At the node level: decreasing free
 * devices from the Judy1 index, with the bound missing devices x the cheapest rate.)
 *
 * Inside a candidate. Few movable jobs (TP_DEFRAG_EXACT_MAX): every subset, cheapest first,
 * filtered by necessary conditions (enough usable devices, enough whole groups and slices in the
 * candidate's sub-domains). Many: a greedy fill (jobs by cost per device, or, for requests made
 * of whole-node groups, the node that gains a group at the least cost), then reverse deletion,
 * then a bounded branch and bound over the jobs by cost per device (bnb_search: 20000 branches,
 * 64 simulations at most) that keeps whatever beats the greedy plan. Each set is verified under
 * a savepoint: release the jobs, ask tp_place for the request inside the candidate, hold those
 * devices, find new homes for the migrated jobs (find_home), preempt a job that has no home
 * when the policy allows, order the steps, and ask tp_place for the final placement; then roll
 * back.
 *
 * Locality. Unless the policy sets allow_less_local, a migrated job's new devices span, at
 * every level, at most as many domains as its old ones (span(L) = the number of domains of level
 * L holding at least one of its devices; node level included). So the smallest domain holding
 * the job is no higher, and it touches no more racks or nodes than before. find_home asks
 * tp_place for the job's own request (or one of its size) required inside one domain of the
 * deepest level holding it now, then of each deeper level while the answer is less local, and
 * last (a job without a shape) restricted to a hand-packed node set within the old spans; a job with no such home is
 * preempted when allowed, else the set fails (message: "... no free devices keep it as local as
 * it sits (domains it spans: ...)").
 *
 * Order of plans: cost (checkpoint seconds x devices, in integer microseconds so that equal
 * costs tie exactly), then moved jobs, then the most usable free devices in the target domain
 * before the plan (a plan carried out halfway keeps draining its domain), then the least
 * fragmentation at the target level (the largest gain in the sum of squared free counts of its
 * domains), then the lowest domain id.
 *
 * Job structs stay valid for the whole call: a released job is owned by the undo log until the
 * rollback puts it back, so the planner refers to jobs by their struct and never by slot.
 */
#include "defrag_internal.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the planner's state ------------------------------------------------------------------- */

int defrag_grow_u32(const tp_allocator *a, uint32_t **p, size_t *cap, size_t need)
{
	return tp_grow(a, (void **)p, cap, need ? need : 1, sizeof **p);
}

static void scan_free(struct planner *P)
{
	struct cscan *s = &P->scan;
	tp_free(P->a, s->jobs);
	tp_free(P->a, s->jdev);
	tp_free(P->a, s->jdom);
	tp_free(P->a, s->jrun);
	tp_free(P->a, s->runcnt);
	for (unsigned i = 0; i < TP_MAX_LEVELS; i++) {
		tp_free(P->a, s->ly[i].f0);
		tp_free(P->a, s->ly[i].f);
	}
}

void defrag_planner_fini(struct planner *P)
{
	scan_free(P);
	tp_free(P->a, P->rnames);
	tp_free(P->a, P->slot_local);
	tp_free(P->a, P->u32a);
	tp_free(P->a, P->u32b);
	tp_free(P->a, P->u32c);
	tp_free(P->a, P->tobuf);
	tp_free(P->a, P->holdbuf);
	tp_free(P->a, P->spanbuf);
	tp_free(P->a, P->roombuf);
	tp_free(P->a, P->roomvals);
	tp_free(P->a, P->nodecount);
	tp_free(P->a, P->jointbuf);
	tp_free(P->a, P->jointsize);
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		tp_free(P->a, P->jstat[l].v);
		tp_free(P->a, P->jstat[l].d);
		tp_free(P->a, P->jstat[l].sum);
	}
	tp_free(P->a, P->tbuf);
	tp_free(P->a, P->tprefbuf);
	defrag_draft_clear(P->a, &P->best);
	if (P->have_q)
		tp_rq_release(P->a, &P->q);
}

/* ---- policy ------------------------------------------------------------------------------- */

int defrag_policy_check(const tp_defrag_policy *p, const struct tp_topology *t, char *msg)
{
	if (p->version < 1 || p->version > TP_DEFRAG_POLICY_VERSION)
		return tp_seterr(msg, TP_EINVAL, "policy.version %u is not 1 to %d", p->version,
		                 TP_DEFRAG_POLICY_VERSION);
	if (isnan(p->max_cost_s))
		return tp_seterr(msg, TP_EINVAL, "policy.max_cost_s is not a number");
	if (p->min_priority_gap < 0)
		return tp_seterr(msg, TP_EINVAL, "policy.min_priority_gap %d is negative",
		                 p->min_priority_gap);
	if (p->version < 4 || !p->nprefer_targets)
		return 0;
	/* checked here, before any search, so that every call refuses them alike: a plan whose
	 * request fits at once, and tp_defrag_compact(), which does not read them */
	if (!p->prefer_targets)
		return tp_seterr(msg, TP_EINVAL,
		                 "policy.prefer_targets is NULL but policy.nprefer_targets is %zu",
		                 p->nprefer_targets);
	if (p->prefer_level >= t->nlevels)
		return tp_seterr(msg, TP_EINVAL,
		                 "policy.prefer_level %u is not a level (the topology has %u)",
		                 p->prefer_level, (unsigned)t->nlevels);
	uint32_t nd = t->lv[p->prefer_level].ndom;
	for (size_t i = 0; i < p->nprefer_targets; i++)
		if (p->prefer_targets[i] >= nd)
			return tp_seterr(msg, TP_EINVAL,
			                 "policy.prefer_targets[%zu] %u is not a domain of level %s "
			                 "(%u domains)",
			                 i, p->prefer_targets[i], t->lv[p->prefer_level].name, nd);
	return 0;
}

/* The size of a policy struct of a version (0 for one the library does not know): a version 1
 * struct ends before allow_less_local, a version 2 one before the work budget, a version 3 one
 * before the preferred targets. Reading or writing past it would overrun the caller's object. */
static size_t policy_size(unsigned version)
{
	switch (version) {
	case 1:
		return offsetof(tp_defrag_policy, allow_less_local);
	case 2:
		return offsetof(tp_defrag_policy, max_candidates);
	case 3:
		return offsetof(tp_defrag_policy, prefer_level);
	case TP_DEFRAG_POLICY_VERSION:
		return sizeof(tp_defrag_policy);
	default:
		return 0;
	}
}

/* The caller's (checked) policy as the current version; what an older version lacks takes
 * its default, except allow_less_local, which version 1 did not have and meant 0. */
static tp_defrag_policy policy_copy(const tp_defrag_policy *p)
{
	tp_defrag_policy v = TP_DEFRAG_POLICY_INIT;
	memcpy(&v, p, policy_size(p->version));
	if (p->version == 1)
		v.allow_less_local = 0;
	v.version = TP_DEFRAG_POLICY_VERSION;
	return v;
}

int tp_defrag_policy_init(tp_defrag_policy *p, unsigned version)
{
	static const tp_defrag_policy init = TP_DEFRAG_POLICY_INIT;
	return tp_options_init(p, policy_size(version), &init, version);
}

static void policy_limits(struct planner *P)
{
	double mc = P->pol.max_cost_s;
	P->max_cost = mc < 0 || isinf(mc) ? COST_NONE : defrag_cost_of(mc, 1);
	P->max_moves = P->pol.max_moves;
	P->max_cands = P->pol.max_candidates ? P->pol.max_candidates : TP_DEFRAG_MAX_CANDIDATES;
	P->max_sims = P->pol.max_simulations ? P->pol.max_simulations : TP_DEFRAG_MAX_SIMULATIONS;
	P->max_trials = P->max_sims == UINT32_MAX
	                    ? UINT64_MAX
	                    : (uint64_t)P->max_sims * TP_DEFRAG_TRIALS_PER_SIMULATION;
	P->deadline_ns = tp_deadline_ns(P->pol.max_time_us);
}

/* ---- the work budget ---------------------------------------------------------------------- */

/* DEFRAG_STOP once the search may not start one more unit of `what` (a candidate search or a
 * simulation), or the deadline has passed; P->stop says which. UINT32_MAX is no limit. */
int defrag_budget_check(struct planner *P, tp_defrag_budget what)
{
	if (P->stop != TP_BUDGET_NONE)
		return DEFRAG_STOP;
	if (what == TP_BUDGET_CANDIDATES && P->max_cands != UINT32_MAX &&
	    P->stats.evaluated >= P->max_cands)
		P->stop = TP_BUDGET_CANDIDATES;
	else if (what == TP_BUDGET_SIMULATIONS && P->max_sims != UINT32_MAX &&
	         P->stats.simulated >= P->max_sims)
		P->stop = TP_BUDGET_SIMULATIONS;
	else if (P->deadline_ns && tp_monotonic_ns() >= P->deadline_ns)
		P->stop = TP_BUDGET_TIME;
	return P->stop != TP_BUDGET_NONE ? DEFRAG_STOP : 0;
}

/* DEFRAG_STOP once the search may not make one more placement trial (a fit check, or a try
 * at a migrant's home: a tp_place() call of its own): max_simulations x
 * TP_DEFRAG_TRIALS_PER_SIMULATION of them per call. */
int defrag_trial(struct planner *P)
{
	if (P->stop != TP_BUDGET_NONE)
		return DEFRAG_STOP;
	if (P->trials >= P->max_trials) {
		P->stop = TP_BUDGET_SIMULATIONS;
		P->trials_out = true;
		return DEFRAG_STOP;
	}
	P->trials++;
	return 0;
}

/* The message of a search the budget stopped before it found a plan: which limit, and the
 * field that raises it. Returns TP_ENOPLAN. */
int defrag_budget_message(const struct planner *P, char *msg)
{
	const char *what = P->compact ? "a compaction" : "a plan";
	switch (P->stop) {
	case TP_BUDGET_CANDIDATES:
		return tp_seterr(msg, TP_ENOPLAN,
		                 "the work budget ran out before %s was found: policy.max_candidates "
		                 "%u (candidate domains searched) is spent; raise it (UINT32_MAX: no "
		                 "limit)",
		                 what, P->max_cands);
	case TP_BUDGET_SIMULATIONS:
		if (P->trials_out)
			return tp_seterr(msg, TP_ENOPLAN,
			                 "the work budget ran out before %s was found: the %llu "
			                 "placement trials (fit checks and migrants' homes) that "
			                 "policy.max_simulations %u allows are spent; raise it "
			                 "(UINT32_MAX: no limit)",
			                 what, (unsigned long long)P->max_trials, P->max_sims);
		return tp_seterr(msg, TP_ENOPLAN,
		                 "the work budget ran out before %s was found: policy.max_simulations "
		                 "%u (job sets simulated) is spent; raise it (UINT32_MAX: no limit)",
		                 what, P->max_sims);
	default:
		return tp_seterr(msg, TP_ENOPLAN,
		                 "the time limit ran out before %s was found (policy.max_time_us "
		                 "%llu); raise it (0: no limit)",
		                 what, (unsigned long long)P->pol.max_time_us);
	}
}

/* What the policy lets the plan do with job j. */
unsigned defrag_job_can(const struct planner *P, const struct tp_job_impl *j)
{
	if (j == P->coloc)
		return 0;
	if (j->job_class == TP_CLASS_INTERACTIVE && !P->pol.allow_interactive)
		return 0;
	unsigned can = 0;
	if (P->pol.migrate && j->migratable && j->priority <= P->prio)
		can |= CAN_MIGRATE;
	if (P->pol.preempt && j->preemptible &&
	    (int64_t)j->priority <= (int64_t)P->prio - P->pol.min_priority_gap)
		can |= CAN_PREEMPT;
	return can;
}

/* Why job j may not move, as "interactive job j17" or "job j3 (not migratable; ...)". */
void defrag_job_blocker(const struct planner *P, const struct tp_job_impl *j, char *buf, size_t len)
{
	if (j == P->coloc) {
		snprintf(buf, len, "job %s (the request's colocate target)", j->id);
		return;
	}
	if (j->job_class == TP_CLASS_INTERACTIVE && !P->pol.allow_interactive) {
		snprintf(buf, len, "interactive job %s", j->id);
		return;
	}
	char m[96], p[128];
	if (!P->pol.migrate)
		snprintf(m, sizeof m, "migration is off");
	else if (!j->migratable)
		snprintf(m, sizeof m, "not migratable");
	else
		snprintf(m, sizeof m, "priority %d above %d", j->priority, P->prio);
	if (!P->pol.preempt)
		snprintf(p, sizeof p, "preemption is off");
	else if (!j->preemptible)
		snprintf(p, sizeof p, "not preemptible");
	else
		snprintf(p, sizeof p, "priority %d not %d below %d", j->priority,
		         P->pol.min_priority_gap, P->prio);
	snprintf(buf, len, "job %s (%s; %s)", j->id, m, p);
}

/* ---- walking candidate domains ---------------------------------------------------------- */

/* Domains of level L in decreasing order of free devices: the cluster's Judy1 index first
 * (keys free << 32 | domain), then the domains with nothing free; a sorted copy when the level
 * is not indexed. */
struct dom_iter {
	unsigned level;
	int phase; /* 0: index, 1: zero-free domains, 2: sorted array, 3: done */
	Word_t key;
	uint32_t next;
	uint32_t *sorted;
	uint32_t n;
};

struct fd_pair {
	uint32_t free, dom;
};

static int fd_pair_cmp(const void *x, const void *y)
{
	const struct fd_pair *a = x, *b = y;
	if (a->free != b->free)
		return a->free > b->free ? -1 : 1;
	return (a->dom > b->dom) - (a->dom < b->dom);
}

static int iter_init(struct planner *P, struct dom_iter *it, unsigned level)
{
	*it = (struct dom_iter){.level = level};
	if (P->c->indexed[level]) {
		it->phase = 0;
		it->key = ~(Word_t)0;
		return 0;
	}
	uint32_t nd = P->t->lv[level].ndom;
	struct fd_pair *fp = tp_mallocn(P->a, nd ? nd : 1, sizeof *fp);
	it->sorted = tp_mallocn(P->a, nd ? nd : 1, sizeof *it->sorted);
	if (!fp || !it->sorted) {
		tp_free(P->a, fp);
		tp_free(P->a, it->sorted);
		it->sorted = NULL;
		return TP_ENOMEM;
	}
	for (uint32_t d = 0; d < nd; d++)
		fp[d] = (struct fd_pair){P->c->free[level][d], d};
	qsort(fp, nd, sizeof *fp, fd_pair_cmp);
	for (uint32_t d = 0; d < nd; d++)
		it->sorted[d] = fp[d].dom;
	tp_free(P->a, fp);
	it->n = nd;
	it->phase = 2;
	return 0;
}

/* The next domain, or false when none is left. */
static bool iter_peek(struct planner *P, struct dom_iter *it, uint32_t *dom)
{
	const struct tp_cluster *c = P->c;
	JError_t err;
	for (;;) {
		switch (it->phase) {
		case 0: {
			Word_t k = it->key;
			int found = it->key == ~(Word_t)0
			                    ? Judy1Last(c->index[it->level], &k, &err)
			                    : Judy1Prev(c->index[it->level], &k, &err);
			if (found == 1) {
				*dom = (uint32_t)(k & UINT32_MAX);
				return true;
			}
			it->phase = 1;
			it->next = 0;
			break;
		}
		case 1:
			while (it->next < P->t->lv[it->level].ndom && c->free[it->level][it->next])
				it->next++;
			if (it->next < P->t->lv[it->level].ndom) {
				*dom = it->next;
				return true;
			}
			it->phase = 3;
			break;
		case 2:
			if (it->next < it->n) {
				*dom = it->sorted[it->next];
				return true;
			}
			it->phase = 3;
			break;
		default:
			return false;
		}
	}
}

static void iter_advance(struct planner *P, struct dom_iter *it)
{
	if (it->phase == 0) {
		JError_t err;
		Word_t k = it->key;
		int found = it->key == ~(Word_t)0 ? Judy1Last(P->c->index[it->level], &k, &err)
		                                  : Judy1Prev(P->c->index[it->level], &k, &err);
		if (found == 1)
			it->key = k;
		else
			it->phase = 1;
	} else {
		it->next++;
	}
}

/* Candidates scanned and waiting, best lower bound first. */
struct pending {
	int64_t lb;
	uint32_t lb_moves, free, dom;
};

static bool pending_less(const struct pending *a, const struct pending *b)
{
	if (a->lb != b->lb)
		return a->lb < b->lb;
	if (a->free != b->free)
		return a->free > b->free;
	return a->dom < b->dom;
}

struct heap {
	struct pending *v;
	size_t n, cap;
};

static int heap_push(const tp_allocator *a, struct heap *h, struct pending x)
{
	if (tp_grow(a, (void **)&h->v, &h->cap, h->n + 1, sizeof *h->v))
		return TP_ENOMEM;
	size_t i = h->n++;
	while (i && pending_less(&x, &h->v[(i - 1) / 2])) {
		h->v[i] = h->v[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	h->v[i] = x;
	return 0;
}

static struct pending heap_pop(struct heap *h)
{
	struct pending top = h->v[0], x = h->v[--h->n];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		const struct pending *best = &x;
		if (l < h->n && pending_less(&h->v[l], best)) {
			m = l;
			best = &h->v[l];
		}
		if (r < h->n && pending_less(&h->v[r], best))
			m = r;
		if (m == i)
			break;
		h->v[i] = h->v[m];
		i = m;
	}
	if (h->n)
		h->v[i] = x;
	return top;
}

/* Whether a candidate with these bounds cannot beat the best plan (or the limits). */
static bool pending_pruned(const struct planner *P, const struct pending *e)
{
	if (e->lb > P->max_cost || e->lb_moves > P->max_moves)
		return true;
	if (!P->have_best)
		return false;
	/* a plan here moves at least the missing devices; the keys are compared in order */
	const struct draft *b = &P->best;
	uint64_t lb_devs = P->count > e->free ? P->count - e->free : 0;
	if (e->lb != b->cost)
		return e->lb > b->cost;
	if (e->lb_moves != b->moves)
		return e->lb_moves > b->moves;
	if (lb_devs != b->moved_devices)
		return lb_devs > b->moved_devices;
	return e->free < b->cand_free;
}

/* Bound a domain from a light scan: false (after noting why) when it cannot hold the request
 * whatever moves, counting devices only (the full check runs before the search). */
static int scan_and_bound(struct planner *P, uint32_t dom, bool *usable)
{
	int rc = defrag_scan_jobs(P, P->level, dom, false);
	if (rc)
		return rc;
	struct cscan *s = &P->scan;
	uint64_t cap = s->free;
	s->nmov = 0;
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can) {
			cap += s->jobs[k].a;
			s->nmov++;
		}
	*usable = cap >= P->count;
	if (!*usable) {
		defrag_note_blocked(P, P->count - cap);
		return 0;
	}
	return defrag_lower_bounds(P);
}

/* The full scan of a domain about to be searched, with the shape check (groups, slices). */
static int scan_for_search(struct planner *P, uint32_t dom, bool *usable)
{
	int rc = defrag_scan_candidate(P, P->level, dom);
	if (rc)
		return rc;
	uint64_t shortfall;
	*usable = defrag_candidate_possible(P, &shortfall);
	if (!*usable)
		defrag_note_blocked(P, shortfall);
	return 0;
}

/* The cheapest movable job's cost per device: the rate no candidate can beat. */
static int64_t cheapest_rate(const struct planner *P)
{
	int64_t best = COST_NONE;
	for (size_t i = 0; i < P->c->njobs; i++) {
		const struct tp_job_impl *j = P->c->jobs[i];
		if (!defrag_job_can(P, j))
			continue;
		double v = floor(j->checkpoint_s * 1e6);
		int64_t r = v >= (double)COST_CAP ? COST_CAP : (int64_t)v;
		if (r < best)
			best = r;
	}
	return best;
}

static int64_t mul_sat(uint64_t n, int64_t r)
{
	if (r == COST_NONE || (r && n > (uint64_t)(COST_CAP / r)))
		return COST_CAP;
	return (int64_t)n * r;
}

/* A lower bound on the cost of freeing `need` devices of domain `dom` of level l, from the
 * cluster's checkpoint histogram (no device is read): the `need` held devices of the lowest
 * checkpoint buckets, each at its bucket's floor. Moving a job of checkpoint c costs c for
 * every one of its devices, and frees at most that many devices of the domain, so no set of
 * jobs that frees `need` devices costs less. Not every job may move, and not every freed
 * device is usable: both only raise the true cost. */
static int64_t ck_bound(const struct planner *P, unsigned l, uint32_t dom, uint64_t need)
{
	const uint32_t *h = P->c->ckhist[l] + (size_t)dom * TP_CK_BUCKETS;
	double sum = 0;
	uint64_t k = 0;
	for (unsigned b = 0; b < TP_CK_BUCKETS && k < need; b++) {
		uint64_t take = h[b] < need - k ? h[b] : need - k;
		sum += (double)take * tp_ck_floor(b);
		k += take;
	}
	/* cost_of rounds each job's cost to the nearest microsecond: allow for it */
	double v = sum * 1e6 * (1 - 1e-12) - (double)need;
	if (!(v > 0))
		return 0;
	return v < (double)COST_CAP ? (int64_t)v : COST_CAP;
}

/* Best-first branch and bound over the domains of a level above the node: every domain first
 * gets the histogram bound (ck_bound, O(buckets), no device read); the smallest bound, read or
 * not, is expanded next: an unread domain is read (its exact fractional bound replaces the
 * histogram one), a read one is searched. The walk ends when the smallest bound cannot beat the
 * best plan. Domains whose bound exceeds the best plan are never read. */
static int search_domains_ck(struct planner *P)
{
	const unsigned L = (unsigned)P->level;
	const uint32_t nd = P->t->lv[L].ndom;
	struct heap unread = {0}, h = {0};
	int rc = 0;
	int64_t rate = -1;
	if (tp_grow(P->a, (void **)&unread.v, &unread.cap, nd ? nd : 1, sizeof *unread.v))
		return TP_ENOMEM;
	for (uint32_t d = 0; d < nd; d++) {
		uint32_t f = P->c->free[L][d];
		uint64_t need = P->count > f ? P->count - f : 0;
		struct pending e = {need ? ck_bound(P, L, d, need) : 0, 0, f, d};
		if ((rc = heap_push(P->a, &unread, e)))
			goto out;
	}
	for (;;) {
		bool take_read = h.n && (!unread.n || !pending_less(&unread.v[0], &h.v[0]));
		if (take_read) {
			struct pending e = heap_pop(&h);
			if (pending_pruned(P, &e))
				continue;
			bool usable;
			if ((rc = scan_for_search(P, e.dom, &usable)) ||
			    (usable && (rc = defrag_evaluate_candidate(P)))) {
				if (rc == DEFRAG_STOP)
					defrag_lb_fold(P, e.lb); /* the domain searched when it stopped */
				break;
			}
			continue;
		}
		if (!unread.n)
			break;
		struct pending e = heap_pop(&unread);
		if (P->have_best && e.lb > P->best.cost)
			break; /* every domain left has a bound at least this high */
		if (P->max_cost != COST_NONE) {
			/* the walk's old limit test, so that what is read (and the reasons a
			 * failed plan gives) does not depend on the histogram */
			uint64_t need = P->count > e.free ? P->count - e.free : 0;
			if (need && rate < 0)
				rate = cheapest_rate(P);
			if (need && mul_sat(need, rate) > P->max_cost)
				continue;
		}
		bool usable;
		if ((rc = scan_and_bound(P, e.dom, &usable)))
			break;
		if (!usable)
			continue;
		struct pending x = {P->scan.lb, P->scan.lb_moves, P->scan.free, e.dom};
		if (x.lb < e.lb)
			x.lb = e.lb; /* both are bounds: keep the larger */
		if (pending_pruned(P, &x))
			continue;
		if ((rc = heap_push(P->a, &h, x)))
			break;
	}
out:
	if (rc == DEFRAG_STOP) {
		/* the domains left unsearched: their bounds */
		if (h.n)
			defrag_lb_fold(P, h.v[0].lb);
		if (unread.n)
			defrag_lb_fold(P, unread.v[0].lb);
	}
	tp_free(P->a, h.v);
	tp_free(P->a, unread.v);
	return rc;
}

/* Best-first branch and bound over the domains of the candidate level. */
static int search_domains(struct planner *P)
{
	if ((unsigned)P->level < tp_node_level(P->t))
		return search_domains_ck(P);
	struct dom_iter it;
	struct heap h = {0};
	int rc = iter_init(P, &it, (unsigned)P->level);
	if (rc)
		return rc;
	int64_t rate = -1;
	for (;;) {
		uint32_t dom;
		bool more = iter_peek(P, &it, &dom);
		int64_t cheap = 0;
		if (more) {
			uint32_t f = P->c->free[P->level][dom];
			uint64_t need = P->count > f ? P->count - f : 0;
			if (need) {
				if (rate < 0)
					rate = cheapest_rate(P);
				cheap = mul_sat(need, rate);
			}
			if (cheap > defrag_cost_bound(P))
				more = false;
		}
		if (h.n && (!more || h.v[0].lb <= cheap)) {
			struct pending e = heap_pop(&h);
			if (pending_pruned(P, &e))
				continue;
			bool usable;
			if ((rc = scan_for_search(P, e.dom, &usable)) ||
			    (usable && (rc = defrag_evaluate_candidate(P))))
				break;
			continue;
		}
		if (!more)
			break;
		iter_advance(P, &it);
		bool usable;
		if ((rc = scan_and_bound(P, dom, &usable)))
			break;
		if (!usable)
			continue;
		struct pending e = {P->scan.lb, P->scan.lb_moves, P->scan.free, dom};
		if (pending_pruned(P, &e))
			continue;
		if ((rc = heap_push(P->a, &h, e)))
			break;
	}
	if (rc == DEFRAG_STOP)
		defrag_lb_fold(P, 0); /* the nodes left unread: no bound is kept for them */
	tp_free(P->a, h.v);
	tp_free(P->a, it.sorted);
	return rc;
}

/* The domains of the colocate level (or below it, the candidate level) that can hold the
 * request next to its colocate target. */
static int search_colocated(struct planner *P)
{
	const struct tp_job_impl *j = P->coloc;
	const struct tp_topology *t = P->t;
	unsigned cl = (unsigned)P->q.colocate_level;
	uint32_t *doms = tp_mallocn(P->a, j->ndev, sizeof *doms);
	if (!doms)
		return TP_ENOMEM;
	for (uint32_t i = 0; i < j->ndev; i++)
		doms[i] = tp_node_ancestor(t, t->dev_node[j->devs[i]], cl);
	qsort(doms, j->ndev, sizeof *doms, defrag_cmp_u32);
	int rc = 0;
	for (uint32_t i = 0; i < j->ndev && !rc; i++) {
		if (i && doms[i] == doms[i - 1])
			continue;
		/* the candidate-level domains inside this colocate domain */
		uint32_t e0 = doms[i], ne = 1;
		if ((unsigned)P->level > cl)
			defrag_desc_range(t, (int)cl, doms[i], (unsigned)P->level, &e0, &ne);
		for (uint32_t e = e0; e < e0 + ne && !rc; e++) {
			bool usable;
			rc = scan_and_bound(P, e, &usable);
			if (rc || !usable)
				continue;
			struct pending pe = {P->scan.lb, P->scan.lb_moves, P->scan.free, e};
			if (pending_pruned(P, &pe))
				continue;
			rc = scan_for_search(P, e, &usable);
			if (!rc && usable)
				rc = defrag_evaluate_candidate(P);
		}
	}
	tp_free(P->a, doms);
	return rc;
}

static int search_walk(struct planner *P)
{
	if (P->level < 0) {
		bool usable;
		int rc = scan_for_search(P, 0, &usable);
		if (rc || !usable)
			return rc;
		return defrag_evaluate_candidate(P);
	}
	if (P->coloc)
		return search_colocated(P);
	return search_domains(P);
}

int defrag_search(struct planner *P)
{
	int rc = search_walk(P);
	if (rc == DEFRAG_STOP && (P->level < 0 || P->coloc))
		defrag_lb_fold(P, 0); /* stopped: no bound is kept for what was left */
	return rc;
}

/* The planner's view of the request: its resolved form, priority, colocate target, and the
 * level of its candidates. */
static int planner_request(struct planner *P, char *msg)
{
	int rc = tp_request_resolve(P->t, P->c, P->r, 0, P->a, &P->q, msg);
	if (rc)
		return rc;
	P->have_q = true;
	P->count = P->q.count;
	P->select = P->q.has_model || P->q.min_mem > 0 || P->q.min_perf > 0 || P->q.has_nodes;
	P->prio = P->r->priority;
	if (P->q.colocate_slot != TP_NO_JOB_SLOT)
		P->coloc = P->c->jobs[P->q.colocate_slot];
	int level = P->q.required;
	if (P->coloc && P->q.colocate_level > level)
		level = P->q.colocate_level;
	P->level = level;
	unsigned nl = tp_node_level(P->t);
	P->flevel = level >= 0 ? (unsigned)level : (nl ? nl - 1 : 0);
	return 0;
}

void defrag_planner_init(struct planner *P, struct tp_cluster *c, const tp_defrag_policy *pol,
                         const struct tp_defrag_knobs *k)
{
	*P = (struct planner){0};
	P->c = c;
	P->t = c->t;
	P->a = &c->alloc;
	P->pol = policy_copy(pol);
	P->exact_max = k ? k->exact_max : TP_DEFRAG_EXACT_MAX;
	P->room_bound = !k || !k->no_room_bound;
	P->moves_bound = !k || !k->no_moves_bound;
	P->shape_bound = !k || !k->no_shape_bound;
	P->space_bound = !k || !k->no_space_bound;
	P->joint_bound = !k || !k->no_joint_bound;
	P->lb_open = COST_NONE;
	policy_limits(P);
}

/* Preferred targets (policy version 4): the search restricted to their nodes first; a plan
 * there is the answer. Else the reasons and bounds it gathered are dropped and the search
 * runs everywhere. */
static int prefer_pass(struct planner *P, tp_plan *p, bool *taken)
{
	*taken = false;
	if (!P->tpref)
		return 0;
	P->tnode = P->tprefbuf;
	int rc = defrag_search(P);
	P->tnode = NULL;
	P->tpref = NULL;
	if (rc && rc != DEFRAG_STOP)
		return rc;
	if (P->have_best) {
		defrag_plan_take(p, &P->best);
		P->have_best = false;
		if (P->lb_open < p->lb)
			p->lb = P->lb_open;
		*taken = true;
		return 0;
	}
	if (P->stop != TP_BUDGET_NONE)
		return 0; /* the budget is spent: the caller reports it */
	P->diag = (struct diag){0};
	P->lb_open = COST_NONE;
	return 0;
}

/* Run the search; without a plan, run it again without the limits to say which one blocked. */
static int plan_or_explain(struct planner *P, tp_plan *p)
{
	bool taken;
	int rc = prefer_pass(P, p, &taken);
	if (rc || taken)
		return rc;
	if (P->stop == TP_BUDGET_NONE)
		rc = defrag_search(P);
	if (rc && rc != DEFRAG_STOP)
		return rc;
	if (P->have_best) {
		defrag_plan_take(p, &P->best);
		P->have_best = false;
		if (P->lb_open < p->lb)
			p->lb = P->lb_open;
		return 0; /* the best plan found (within the budget, if it stopped the search) */
	}
	if (P->stop != TP_BUDGET_NONE) {
		p->status = defrag_budget_message(P, p->errmsg);
		return p->status;
	}
	if (P->max_cost != COST_NONE || P->max_moves != UINT32_MAX) {
		struct diag keep = P->diag;
		int64_t mc = P->max_cost;
		uint32_t mm = P->max_moves;
		P->max_cost = COST_NONE;
		P->max_moves = UINT32_MAX;
		rc = defrag_search(P);
		P->max_cost = mc;
		P->max_moves = mm;
		if (rc && rc != DEFRAG_STOP)
			return rc; /* a budget that stops the explanation leaves what it found */
		if (P->have_best) {
			defrag_explain(P, p->errmsg, &P->best);
			p->status = TP_ENOPLAN;
			return TP_ENOPLAN;
		}
		P->diag = keep;
	}
	defrag_explain(P, p->errmsg, NULL);
	p->status = TP_ENOPLAN;
	return TP_ENOPLAN;
}

static const tp_defrag_policy default_policy = TP_DEFRAG_POLICY_INIT;

static int plan_unguarded(tp_cluster *c, const tp_request *r, const tp_defrag_policy *policy,
                          const struct tp_defrag_knobs *knobs, struct tp_defrag_stats *stats,
                          tp_plan **out)
{
	if (!out)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "out is NULL") : TP_EINVAL;
	*out = NULL;
	if (!c || !r)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "request is NULL") : TP_EINVAL;
	if (!policy)
		policy = &default_policy;
	tp_plan *p = defrag_plan_new(c);
	if (!p)
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory creating a plan");
	int rc = defrag_policy_check(policy, c->t, p->errmsg);
	if (rc) {
		p->status = rc;
		*out = p;
		return tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	}
	/* tp_place validates the request; copy it only once it is known to be well formed. */
	tp_placement *pl = NULL;
	rc = tp_place(c, r, &pl);
	if (rc == 0 || rc == TP_EBUSY || rc == TP_EFRAGMENTED) {
		p->req = tp_request_dup(&c->alloc, r);
		if (!p->req)
			rc = TP_ENOMEM;
	}
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		tp_plan_destroy(p);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
	}
	if (rc == 0) {
		size_t n;
		const uint32_t *devs = tp_placement_devices(pl, &n);
		struct draft d = {0};
		if (defrag_draft_push(&c->alloc, &d, TP_STEP_PLACE, tp_placement_job(pl), NULL, 0, devs,
		                      n)) {
			/* the step array may have grown before the failure */
			defrag_draft_clear(&c->alloc, &d);
			tp_placement_destroy(pl);
			tp_plan_destroy(p);
			return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
		}
		d.final = pl;
		defrag_plan_take(p, &d);
		*out = p;
		return 0;
	}
	if (rc != TP_EBUSY && rc != TP_EFRAGMENTED) {
		/* invalid, unknown names, or infeasible: no plan can help */
		tp_seterr(p->errmsg, rc, "%s", tp_placement_errmsg(pl));
		tp_placement_destroy(pl);
		p->status = rc;
		*out = p;
		return tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	}
	tp_placement_destroy(pl);
	struct planner P;
	defrag_planner_init(&P, c, policy, knobs);
	P.r = r;
	rc = planner_request(&P, p->errmsg);
	if (!rc)
		rc = defrag_prefer_setup(&P);
	if (!rc)
		rc = plan_or_explain(&P, p);
	P.stats.budget = P.stop;
	p->stats = P.stats;
	if (stats)
		*stats = P.stats;
	if (knobs && knobs->branches)
		*knobs->branches = P.branches;
	defrag_planner_fini(&P);
	if (rc == TP_ENOMEM) {
		tp_plan_destroy(p);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
	}
	p->status = rc;
	*out = p;
	if (rc)
		tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	return rc;
}

int tp_defrag_plan_ex(tp_cluster *c, const tp_request *r, const tp_defrag_policy *policy,
                      const struct tp_defrag_knobs *knobs, struct tp_defrag_stats *stats,
                      tp_plan **out)
{
	if (out)
		*out = NULL;
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, plan_unguarded(c, r, policy, knobs, stats, out));
}

int tp_defrag_plan(tp_cluster *c, const tp_request *r, const tp_defrag_policy *policy,
                   tp_plan **out)
{
	return tp_defrag_plan_ex(c, r, policy, NULL, NULL, out);
}
