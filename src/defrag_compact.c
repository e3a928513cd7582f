/* SPDX-License-Identifier: MIT */
/*
 * Compaction (tp_defrag_compact): plans that free whole domains of a level, round by round
 * over the cheapest domains to empty, or exactly over small sets of them.
 */
#include "defrag_internal.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tp_defrag_policy default_policy = TP_DEFRAG_POLICY_INIT;

/* ---- compaction ---------------------------------------------------------------------------- */

/* Per domain of the level: the cost of emptying it (every job on it moves). */
struct ccand {
	int64_t cost;
	uint32_t moves, free, dom;
};

static int ccand_cmp(const void *x, const void *y)
{
	const struct ccand *a = x, *b = y;
	if (a->cost != b->cost)
		return a->cost < b->cost ? -1 : 1;
	if (a->moves != b->moves)
		return a->moves < b->moves ? -1 : 1;
	if (a->free != b->free)
		return a->free > b->free ? -1 : 1;
	return (a->dom > b->dom) - (a->dom < b->dom);
}

/* Replay a round's steps on the simulated cluster (under the caller's savepoint). */
static int replay_steps(struct planner *P, const struct draft *d)
{
	struct tp_cluster *c = P->c;
	for (size_t i = 0; i < d->n; i++) {
		const struct pstep *s = &d->steps[i];
		int rc;
		if (s->action == TP_STEP_PREEMPT)
			rc = tp_cluster_release(c, s->job);
		else
			rc = tp_cluster_rebind_impl(c, tp_cluster_job_slot(c, s->job), s->to,
			                            s->nto);
		if (rc)
			return rc;
	}
	return 0;
}

static int draft_append(const tp_allocator *a, struct draft *all, const struct draft *d)
{
	for (size_t i = 0; i < d->n; i++) {
		const struct pstep *s = &d->steps[i];
		int rc = defrag_draft_push(a, all, s->action, s->job, s->from, s->nfrom, s->to, s->nto);
		if (rc)
			return rc;
	}
	all->cost = defrag_cost_add(all->cost, d->cost);
	all->cost_s += d->cost_s;
	all->moves += d->moves;
	all->moved_devices += d->moved_devices;
	return 0;
}

/* Whether a job already moved in an earlier round (it moves at most once). */
static bool moved_before(const struct draft *all, const char *id)
{
	for (size_t i = 0; i < all->n; i++)
		if (!strcmp(all->steps[i].job, id))
			return true;
	return false;
}

/* One round: the cheapest domain that can be emptied within what is left of the budget. */
static int compact_round(struct planner *P, const struct draft *all, struct draft *d, bool *found)
{
	const struct tp_topology *t = P->t;
	unsigned level = (unsigned)P->level;
	uint32_t nd = t->lv[level].ndom;
	struct ccand *cc = tp_mallocn(P->a, nd ? nd : 1, sizeof *cc);
	if (!cc)
		return TP_ENOMEM;
	size_t n = 0;
	int rc = 0;
	*found = false;
	for (uint32_t dom = 0; dom < nd && !rc; dom++) {
		if ((rc = defrag_scan_candidate(P, (int)level, dom)))
			break;
		const struct cscan *s = &P->scan;
		if (s->unusable || !s->njobs)
			continue;
		bool movable = true;
		int64_t cost = 0;
		for (uint32_t k = 0; k < s->njobs && movable; k++) {
			const struct cjob *cj = &s->jobs[k];
			if (!cj->can || moved_before(all, cj->j->id) ||
			    !strncmp(cj->j->id, "\x01", 1)) {
				movable = false;
				if (!cj->can || moved_before(all, cj->j->id))
					defrag_note_blocked(P, cj->a);
			}
			cost = defrag_cost_add(cost, cj->w);
		}
		if (movable)
			cc[n++] = (struct ccand){cost, s->njobs, s->free, dom};
	}
	qsort(cc, n, sizeof *cc, ccand_cmp);
	for (size_t i = 0; i < n && !rc && !*found; i++) {
		if (defrag_cost_add(all->cost, cc[i].cost) > P->max_cost) {
			P->diag.cost = true;
			break;
		}
		if (all->moves + cc[i].moves > P->max_moves) {
			defrag_note_moves(P, all->moves + cc[i].moves);
			continue;
		}
		if ((rc = defrag_scan_candidate(P, (int)level, cc[i].dom)))
			break;
		uint32_t *S = P->u32c;
		if ((rc = defrag_grow_u32(P->a, &P->u32c, &P->cap_c, P->scan.njobs)))
			break;
		S = P->u32c;
		for (uint32_t k = 0; k < P->scan.njobs; k++)
			S[k] = k;
		int out;
		const struct tp_job_impl *nh;
		if ((rc = defrag_try_subset(P, S, P->scan.njobs, d, &out, &nh)))
			break;
		if (out == OUT_OK)
			*found = true;
		else if (out == OUT_NOHOME)
			defrag_note_nohome(P, nh);
	}
	tp_free(P->a, cc);
	return rc;
}

static uint32_t fully_free_count(const struct planner *P, unsigned level)
{
	uint32_t n = 0;
	for (uint32_t d = 0; d < P->t->lv[level].ndom; d++)
		n += P->c->free[level][d] == tp_dom_ndev(P->t, level, d);
	return n;
}

/* Hold every fully free domain of the level so that no migrant lands there. */
static int hold_free_domains(struct planner *P, unsigned level)
{
	const struct tp_topology *t = P->t;
	char id[48];
	for (uint32_t d = 0; d < t->lv[level].ndom; d++) {
		if (P->c->free[level][d] != tp_dom_ndev(t, level, d))
			continue;
		uint32_t f, n;
		tp_dom_nodes(t, level, d, &f, &n);
		uint32_t d0 = t->dev_first[f], d1 = t->dev_first[f + n];
		if (defrag_grow_u32(P->a, &P->holdbuf, &P->cap_hold, d1 - d0))
			return TP_ENOMEM;
		for (uint32_t x = d0; x < d1; x++)
			P->holdbuf[x - d0] = x;
		snprintf(id, sizeof id, HOLD_FMT, P->nholds++);
		int rc = tp_cluster_assign_impl(P->c, id, P->holdbuf, d1 - d0, NULL);
		if (rc)
			return rc;
	}
	return 0;
}

/* Why the next domain could not be freed. Composed before the rollback: the reasons may name
 * jobs of the simulated cluster. */
static void compact_why(const struct planner *P, char *why, size_t len)
{
	const struct diag *d = &P->diag;
	if (d->cost && !d->nohome)
		snprintf(why, len, "the next domain would take the cost over max_cost_s %g",
		         P->pol.max_cost_s);
	else if (d->moves && !d->nohome && !d->block)
		snprintf(why, len, "the next domain would need %u moves, max_moves is %u",
		         d->moves_needed, P->max_moves);
	else if (d->nohome || (d->block && d->block_job))
		defrag_explain(P, why, NULL);
	else
		snprintf(why, len,
		         "every other %s domain has down or cordoned devices, or none "
		         "can be emptied",
		         P->t->lv[P->level].name);
}

static int compact_rounds(struct planner *P, uint32_t want, struct draft *all, uint32_t *got,
                          char *why)
{
	struct tp_cluster *c = P->c;
	unsigned level = (unsigned)P->level;
	size_t sp;
	int rc = tp_cluster_savepoint(c, &sp);
	if (rc)
		return rc;
	*got = 0;
	rc = hold_free_domains(P, level);
	while (!rc && *got < want) {
		struct draft d = {0};
		bool found;
		if ((rc = compact_round(P, all, &d, &found)) || !found) {
			defrag_draft_clear(P->a, &d);
			break;
		}
		if ((rc = draft_append(P->a, all, &d)) || (rc = replay_steps(P, &d)) ||
		    (rc = hold_free_domains(P, level))) {
			defrag_draft_clear(P->a, &d);
			break;
		}
		defrag_draft_clear(P->a, &d);
		(*got)++;
	}
	if (!rc && *got < want)
		compact_why(P, why, TP_ERRMSG_LEN);
	tp_cluster_rollback(c, sp);
	return rc;
}

/*
 * The cheapest set of domains to free. Candidates are the domains with no down or cordoned
 * device, not fully free, whose every job may move (priorities compared with 0). Freeing a set
 * costs every job on any of its domains once (a job on two of them is paid once). When the
 * candidates and the number of domains wanted are few (COMPACT_SETS sets at most), every set is
 * priced, and the sets are simulated cheapest first (cost, moves, then the most free devices,
 * then the lowest domains): release the jobs, hold every device of the set and of the domains
 * already free, find the migrants homes; the first that works (within COMPACT_TRIES
 * simulations) is the plan. Otherwise, or when none works, the greedy rounds below decide.
 */
#define COMPACT_SETS 4096u

#define COMPACT_TRIES 64u

#define COMPACT_CANDS 64u

struct cset {
	int64_t cost;
	uint32_t moves, free;
	uint32_t at; /* its candidates: comb[at .. at + want) */
};

/* Cost, moves, the most free devices, then the lowest domains: sets are enumerated in
 * lexicographic order of their candidates, so `at` orders them the same way. */
static int cset_cmp(const void *x, const void *y)
{
	const struct cset *a = x, *b = y;
	if (a->cost != b->cost)
		return a->cost < b->cost ? -1 : 1;
	if (a->moves != b->moves)
		return a->moves < b->moves ? -1 : 1;
	if (a->free != b->free)
		return a->free > b->free ? -1 : 1;
	return (a->at > b->at) - (a->at < b->at);
}

static int uptr_cmp(const void *x, const void *y)
{
	uintptr_t a = (uintptr_t) * (const void *const *)x, b = (uintptr_t) * (const void *const *)y;
	return (a > b) - (a < b);
}

/* C(n, k), saturating at `cap` + 1. */
static uint64_t choose_cap(uint32_t n, uint32_t k, uint64_t cap)
{
	if (k > n)
		return 0;
	uint64_t r = 1;
	for (uint32_t i = 1; i <= k; i++) {
		r = r * (n - k + i) / i;
		if (r > cap)
			return cap + 1;
	}
	return r;
}

struct ccand_set {
	uint32_t dom, free, j0, nj; /* its jobs: jp[j0 .. j0 + nj) */
};

/* Price one set of candidates (their jobs, each once) into *cs, using jbuf as scratch. */
static void price_set(const struct ccand_set *cc, const struct tp_job_impl **jp,
                      const uint32_t *idx, uint32_t want, const struct tp_job_impl **jbuf,
                      struct cset *cs)
{
	uint32_t n = 0, fr = 0;
	for (uint32_t i = 0; i < want; i++) {
		const struct ccand_set *x = &cc[idx[i]];
		fr += x->free;
		for (uint32_t k = 0; k < x->nj; k++)
			jbuf[n++] = jp[x->j0 + k];
	}
	qsort(jbuf, n, sizeof *jbuf, uptr_cmp);
	int64_t cost = 0;
	uint32_t moves = 0;
	for (uint32_t k = 0; k < n; k++) {
		if (k && jbuf[k] == jbuf[k - 1])
			continue;
		cost = defrag_cost_add(cost, defrag_cost_of(jbuf[k]->checkpoint_s, jbuf[k]->ndev));
		moves++;
	}
	cs->cost = cost;
	cs->moves = moves;
	cs->free = fr;
}

/* Simulate freeing the set comb[at .. at + want): *found and the steps in *d. */
static int compact_try_set(struct planner *P, const struct ccand_set *cc,
                           const struct tp_job_impl **jp, const uint32_t *idx, uint32_t want,
                           struct draft *d, bool *found)
{
	struct cscan *s = &P->scan;
	const struct tp_topology *t = P->t;
	unsigned level = (unsigned)P->level;
	uint32_t *cr = tp_mallocn(P->a, 2 * (size_t)want, sizeof *cr);
	uint32_t *S = NULL;
	int rc = 0;
	*found = false;
	if (!cr)
		return TP_ENOMEM;
	s->njobs = 0;
	s->level = (int)level;
	s->dom = cc[idx[0]].dom;
	s->free = 0;
	for (uint32_t i = 0; i < want; i++) {
		const struct ccand_set *x = &cc[idx[i]];
		uint32_t f, n;
		tp_dom_nodes(t, level, x->dom, &f, &n);
		cr[2 * i] = t->dev_first[f];
		cr[2 * i + 1] = t->dev_first[f + n];
		s->free += x->free;
		for (uint32_t k = 0; k < x->nj; k++) {
			const struct tp_job_impl *j = jp[x->j0 + k];
			bool dup = false;
			for (uint32_t y = 0; y < s->njobs && !dup; y++)
				dup = s->jobs[y].j == j;
			if (dup)
				continue;
			if (tp_grow(P->a, (void **)&s->jobs, &s->cap_jobs, s->njobs + 1,
			            sizeof *s->jobs)) {
				rc = TP_ENOMEM;
				goto out;
			}
			s->jobs[s->njobs++] = (struct cjob){.j = (struct tp_job_impl *)j,
			                                    .w = defrag_cost_of(j->checkpoint_s, j->ndev),
			                                    .rate = INFINITY,
			                                    .can = (uint8_t)defrag_job_can(P, j)};
		}
	}
	s->ninside = s->njobs;
	s->with_outside = true;
	S = tp_mallocn(P->a, s->njobs ? s->njobs : 1, sizeof *S);
	if (!S) {
		rc = TP_ENOMEM;
		goto out;
	}
	for (uint32_t k = 0; k < s->njobs; k++)
		S[k] = k;
	P->cr = cr;
	P->ncr = want;
	int res;
	const struct tp_job_impl *nh;
	rc = defrag_try_subset(P, S, s->njobs, d, &res, &nh);
	P->cr = NULL;
	P->ncr = 0;
	if (!rc && res == OUT_OK)
		*found = true;
	else if (!rc && res == OUT_NOHOME)
		defrag_note_nohome(P, nh);
out:
	tp_free(P->a, cr);
	tp_free(P->a, S);
	return rc;
}

/* The exact search described above; *found false when it does not apply or finds nothing. */
static int compact_exact(struct planner *P, uint32_t want, struct draft *all, bool *found)
{
	const struct tp_topology *t = P->t;
	unsigned level = (unsigned)P->level;
	uint32_t nd = t->lv[level].ndom;
	struct ccand_set *cc = NULL;
	const struct tp_job_impl **jp = NULL, **jbuf = NULL;
	uint32_t *comb = NULL, idx[COMPACT_CANDS];
	struct cset *sets = NULL;
	size_t ncc = 0, njp = 0, cap_jp = 0, cap_cc = 0;
	int rc = 0;
	*found = false;
	for (uint32_t dom = 0; dom < nd; dom++) {
		if (P->c->free[level][dom] == tp_dom_ndev(t, level, dom))
			continue; /* fully free: counted already */
		if ((rc = defrag_scan_candidate(P, (int)level, dom)))
			goto out;
		const struct cscan *s = &P->scan;
		bool ok = !s->unusable;
		for (uint32_t k = 0; k < s->njobs && ok; k++)
			ok = s->jobs[k].can && s->jobs[k].j->id[0] != '\x01';
		if (!ok)
			continue;
		if (ncc == COMPACT_CANDS)
			goto out; /* too many candidates: the greedy rounds decide */
		if (tp_grow(P->a, (void **)&cc, &cap_cc, ncc + 1, sizeof *cc) ||
		    tp_grow(P->a, (void **)&jp, &cap_jp, njp + s->njobs + 1, sizeof *jp)) {
			rc = TP_ENOMEM;
			goto out;
		}
		cc[ncc++] = (struct ccand_set){dom, s->free, (uint32_t)njp, s->njobs};
		for (uint32_t k = 0; k < s->njobs; k++)
			jp[njp++] = s->jobs[k].j;
	}
	uint64_t nsets = choose_cap((uint32_t)ncc, want, COMPACT_SETS);
	if (nsets == 0 || nsets > COMPACT_SETS)
		goto out;
	sets = tp_mallocn(P->a, (size_t)nsets, sizeof *sets);
	comb = tp_mallocn(P->a, (size_t)nsets * want, sizeof *comb);
	jbuf = tp_mallocn(P->a, njp ? njp : 1, sizeof *jbuf);
	if (!sets || !comb || !jbuf) {
		rc = TP_ENOMEM;
		goto out;
	}
	/* every combination of `want` candidates, in lexicographic order */
	for (uint32_t i = 0; i < want; i++)
		idx[i] = i;
	size_t ns = 0;
	for (;;) {
		struct cset cs;
		price_set(cc, jp, idx, want, jbuf, &cs);
		if (cs.cost <= P->max_cost && cs.moves <= P->max_moves) {
			cs.at = (uint32_t)(ns * want);
			memcpy(comb + cs.at, idx, want * sizeof *idx);
			sets[ns++] = cs;
		} else if (cs.moves > P->max_moves) {
			defrag_note_moves(P, cs.moves);
		} else {
			P->diag.cost = true;
		}
		int i = (int)want - 1;
		while (i >= 0 && idx[i] == ncc - want + (uint32_t)i)
			i--;
		if (i < 0)
			break;
		idx[i]++;
		for (uint32_t k = (uint32_t)i + 1; k < want; k++)
			idx[k] = idx[k - 1] + 1;
	}
	qsort(sets, ns, sizeof *sets, cset_cmp);
	size_t sp;
	if ((rc = tp_cluster_savepoint(P->c, &sp)))
		goto out;
	rc = hold_free_domains(P, level);
	for (size_t x = 0; x < ns && x < COMPACT_TRIES && !rc && !*found; x++) {
		struct draft d = {0};
		rc = compact_try_set(P, cc, jp, comb + sets[x].at, want, &d, found);
		if (!rc && *found)
			rc = draft_append(P->a, all, &d);
		defrag_draft_clear(P->a, &d);
	}
	tp_cluster_rollback(P->c, sp);
out:
	tp_free(P->a, cc);
	tp_free(P->a, jp);
	tp_free(P->a, jbuf);
	tp_free(P->a, comb);
	tp_free(P->a, sets);
	return rc;
}

/* Validate and search: on return *pp is the plan object (NULL only on TP_ENOMEM), holding the
 * message on failure; on success the steps are left in *all for the caller to take. */
static int compact_search(tp_cluster *c, const char *level, uint32_t ndomains,
                          const tp_defrag_policy *policy, tp_plan **pp, struct draft *all)
{
	*pp = NULL;
	if (!policy)
		policy = &default_policy;
	tp_plan *p = defrag_plan_new(c);
	if (!p)
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory creating a plan");
	int li = tp_topology_level_index(c->t, level);
	int rc = defrag_policy_check(policy, c->t, p->errmsg);
	if (!rc && ndomains < 1)
		rc = tp_seterr(p->errmsg, TP_EINVAL, "ndomains 0: at least one domain to free");
	if (!rc && li < 0)
		rc = tp_seterr(p->errmsg, TP_ENOTFOUND, "level '%s' is not a level of the topology",
		               level);
	if (!rc && ndomains > c->t->lv[li].ndom)
		rc = tp_seterr(p->errmsg, TP_EINVAL,
		               "ndomains %u is not between 1 and the %u domains of level %s",
		               ndomains, c->t->lv[li].ndom, level);
	if (rc) {
		p->status = rc;
		*pp = p;
		return tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	}
	struct planner P;
	defrag_planner_init(&P, c, policy, NULL);
	P.compact = true;
	P.level = li;
	P.flevel = (unsigned)li;
	uint32_t have = fully_free_count(&P, (unsigned)li);
	uint32_t got = 0;
	char why[TP_ERRMSG_LEN] = "";
	rc = 0;
	bool exact = false;
	if (have < ndomains)
		rc = compact_exact(&P, ndomains - have, all, &exact);
	if (exact) {
		got = ndomains - have;
	} else if (!rc && have < ndomains) {
		defrag_draft_clear(&c->alloc, all);
		P.diag = (struct diag){0};
		rc = compact_rounds(&P, ndomains - have, all, &got, why);
	}
	if (rc == DEFRAG_STOP)
		rc = defrag_budget_message(&P, p->errmsg);
	if (!rc && have + got < ndomains)
		rc = tp_seterr(p->errmsg, TP_ENOPLAN, "only %u of %u %s domains can be freed: %s",
		               have + got, ndomains, level, why);
	P.stats.budget = P.stop;
	p->stats = P.stats;
	defrag_planner_fini(&P);
	if (rc == TP_ENOMEM) {
		defrag_draft_clear(&c->alloc, all);
		tp_plan_destroy(p);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
	}
	if (rc) {
		defrag_draft_clear(&c->alloc, all);
		p->status = rc;
		tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	}
	*pp = p;
	return rc;
}

static int compact_unguarded(tp_cluster *c, const char *level, uint32_t ndomains,
                             const tp_defrag_policy *policy, tp_plan **out)
{
	if (!out)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "out is NULL") : TP_EINVAL;
	*out = NULL;
	if (!c || !level)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "level is NULL") : TP_EINVAL;
	struct draft all = {0};
	int rc = compact_search(c, level, ndomains, policy, out, &all);
	if (!rc)
		defrag_plan_take(*out, &all);
	defrag_draft_clear(&c->alloc, &all);
	return rc;
}

/* ---- compaction for a request (tp_defrag_compact_for) -------------------------------------- */

/* The fully free domains of level li that request r needs beyond those free now: for each of
 * its slice layers at li, one per slice, less the domains that can hold a slice already; else
 * one. */
static uint32_t compact_need(const tp_cluster *c, int li, const tp_request *r)
{
	const struct tp_topology *t = c->t;
	uint32_t need = 1;
	for (size_t k = 0; k < r->nslices; k++) {
		const tp_slice *sl = &r->slices[k];
		if (!sl->level || !sl->size || tp_topology_level_index(t, sl->level) != li)
			continue;
		uint32_t slices = r->count / sl->size, can = 0;
		for (uint32_t d = 0; d < t->lv[li].ndom; d++)
			can += c->free[li][d] >= sl->size;
		if (slices > can && slices - can > need)
			need = slices - can;
	}
	return need;
}

/* Carry out the compaction's steps on c (under the caller's savepoint). */
static int compact_replay(tp_cluster *c, const struct draft *d)
{
	for (size_t i = 0; i < d->n; i++) {
		const struct pstep *s = &d->steps[i];
		int rc = tp_cluster_rebind_impl(c, tp_cluster_job_slot(c, s->job), s->to, s->nto);
		if (rc)
			return rc;
	}
	return 0;
}

static int compact_for_unguarded(tp_cluster *c, const char *level, const tp_request *r,
                                 const tp_defrag_policy *policy, tp_plan **out)
{
	if (!out)
		return tp_seterr(c->errmsg, TP_EINVAL, "out is NULL");
	*out = NULL;
	if (!level)
		return tp_seterr(c->errmsg, TP_EINVAL, "level is NULL");
	if (!r)
		return tp_seterr(c->errmsg, TP_EINVAL, "request is NULL");
	int li = tp_topology_level_index(c->t, level);
	if (li < 0) /* the message compact_search gives */
		return compact_unguarded(c, level, 1, policy, out);
	/* tp_place validates the request, and a request that fits needs no move */
	tp_placement *pl = NULL;
	int rc = tp_place(c, r, &pl);
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
	}
	struct draft all = {0};
	tp_plan *p = NULL;
	if (rc == TP_EFRAGMENTED) {
		tp_placement_destroy(pl);
		pl = NULL;
		uint32_t have = 0, nd = c->t->lv[li].ndom;
		for (uint32_t d = 0; d < nd; d++)
			have += c->free[li][d] == tp_dom_ndev(c->t, (unsigned)li, d);
		uint32_t want = have + compact_need(c, li, r);
		rc = compact_search(c, level, want < nd ? want : nd, policy, &p, &all);
		if (rc) {
			*out = p;
			return rc;
		}
		size_t sp;
		if (!(rc = tp_cluster_savepoint(c, &sp))) {
			rc = compact_replay(c, &all);
			if (!rc)
				rc = tp_place(c, r, &pl);
			tp_cluster_rollback(c, sp);
		}
		if (rc && rc != TP_ENOMEM) {
			tp_seterr(p->errmsg, TP_ENOPLAN,
			          "with %u %s domains freed the request still does not fit: %s",
			          want < nd ? want : nd, level, pl ? tp_placement_errmsg(pl) : "");
			rc = TP_ENOPLAN;
		}
	} else {
		if (!(p = defrag_plan_new(c))) {
			tp_placement_destroy(pl);
			return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory creating a plan");
		}
		if (rc != 0) /* busy, invalid, unknown names, infeasible: freeing domains cannot help */
			tp_seterr(p->errmsg, rc, "%s", tp_placement_errmsg(pl));
	}
	if (!rc && !(p->req = tp_request_dup(&c->alloc, r)))
		rc = TP_ENOMEM;
	if (!rc) {
		size_t n;
		const uint32_t *devs = tp_placement_devices(pl, &n);
		rc = defrag_draft_push(&c->alloc, &all, TP_STEP_PLACE, tp_placement_job(pl), NULL, 0,
		                       devs, n);
	}
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		defrag_draft_clear(&c->alloc, &all);
		tp_plan_destroy(p);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
	}
	if (!rc) {
		all.final = pl;
		defrag_plan_take(p, &all);
	} else {
		tp_placement_destroy(pl);
		defrag_draft_clear(&c->alloc, &all);
		p->status = rc;
		tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	}
	*out = p;
	return rc;
}

int tp_defrag_compact_for(tp_cluster *c, const char *level, const tp_request *r,
                          const tp_defrag_policy *policy, tp_plan **out)
{
	if (out)
		*out = NULL;
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, compact_for_unguarded(c, level, r, policy, out));
}

int tp_defrag_compact(tp_cluster *c, const char *level, uint32_t ndomains,
                      const tp_defrag_policy *policy, tp_plan **out)
{
	if (out)
		*out = NULL;
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, compact_unguarded(c, level, ndomains, policy, out));
}
