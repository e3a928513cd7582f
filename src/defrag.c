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
#include "defrag_impl.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request.h"

/* Ids of the planner's own temporary jobs. Job ids may not hold control characters, so these
 * never clash with a caller's. */
/* clang-format off */
#define HOLD_REQUEST "\x01" "defrag-request"
#define HOLD_FMT "\x01" "defrag-hold-%u"
#define BLOCK_FMT "\x01" "defrag-block-%u"
/* clang-format on */

/* Costs in integer microseconds, saturating: equal costs compare equal whatever the order of
 * the sums. */
#define COST_CAP INT64_C(4000000000000000000)
#define COST_NONE INT64_MAX

#define CAN_MIGRATE 0x1u
#define CAN_PREEMPT 0x2u

enum outcome { OUT_OK, OUT_NOFIT, OUT_NOHOME, OUT_CYCLE };

static int64_t cost_of(double checkpoint_s, uint32_t ndev)
{
	double v = checkpoint_s * (double)ndev * 1e6;
	if (!(v < (double)COST_CAP))
		return COST_CAP;
	return (int64_t)(v + 0.5); /* v >= 0: rounds to nearest, without a libm call */
}

static int64_t cost_add(int64_t a, int64_t b)
{
	return a > COST_CAP - b ? COST_CAP : a + b;
}

/* ---- plans and drafts ------------------------------------------------------------------------ */

struct pstep {
	tp_step_action action;
	char *job;
	uint32_t *from, *to;
	uint32_t nfrom, nto;
};

/* A plan under construction, and the key that orders plans. */
struct draft {
	struct pstep *steps;
	size_t n, cap;
	int64_t cost; /* microseconds */
	double cost_s;
	uint32_t moves, moved_devices;
	uint32_t cand_free; /* usable free devices of the target domain before the plan */
	int64_t frag;       /* gain in the sum of squared free counts at the fragmentation level */
	int level;          /* the target domain's level, -1: the whole cluster */
	uint32_t dom;
	tp_placement *final; /* the request's placement on the cluster the plan leaves */
};

struct tp_plan {
	tp_allocator alloc;
	const struct tp_topology *t;
	int status;
	char errmsg[TP_ERRMSG_LEN];
	struct pstep *steps;
	size_t nsteps;
	uint32_t moved_jobs, moved_devices;
	double cost_s;
	tp_placement *placement;
	tp_request *req; /* the request, for the place step */
	uint64_t topology_id; /* tp_topology_identity(t): what tp_plan_apply_step compares */
	size_t next;     /* the step tp_plan_apply_step accepts next */
};

static void steps_free(const tp_allocator *a, struct pstep *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		tp_free(a, s[i].job);
		tp_free(a, s[i].from);
		tp_free(a, s[i].to);
	}
	tp_free(a, s);
}

static void draft_clear(const tp_allocator *a, struct draft *d)
{
	steps_free(a, d->steps, d->n);
	tp_placement_destroy(d->final);
	*d = (struct draft){0};
}

static uint32_t *dup_devs(const tp_allocator *a, const uint32_t *devs, size_t n)
{
	uint32_t *p = tp_mallocn(a, n ? n : 1, sizeof *p);
	if (p && n)
		memcpy(p, devs, n * sizeof *p);
	return p;
}

static int draft_push(const tp_allocator *a, struct draft *d, tp_step_action action,
                      const char *job, const uint32_t *from, size_t nfrom, const uint32_t *to,
                      size_t nto)
{
	if (tp_grow(a, (void **)&d->steps, &d->cap, d->n + 1, sizeof *d->steps))
		return TP_ENOMEM;
	struct pstep s = {.action = action, .nfrom = (uint32_t)nfrom, .nto = (uint32_t)nto};
	s.job = tp_strdup(a, job);
	s.from = nfrom ? dup_devs(a, from, nfrom) : NULL;
	s.to = nto ? dup_devs(a, to, nto) : NULL;
	if (!s.job || (nfrom && !s.from) || (nto && !s.to)) {
		tp_free(a, s.job);
		tp_free(a, s.from);
		tp_free(a, s.to);
		return TP_ENOMEM;
	}
	d->steps[d->n++] = s;
	return 0;
}

/* Plans ordered as the file comment says; < 0 when x is better. */
static int draft_cmp(const struct draft *x, const struct draft *y)
{
	if (x->cost != y->cost)
		return x->cost < y->cost ? -1 : 1;
	if (x->moves != y->moves)
		return x->moves < y->moves ? -1 : 1;
	if (x->moved_devices != y->moved_devices)
		return x->moved_devices < y->moved_devices ? -1 : 1;
	if (x->cand_free != y->cand_free)
		return x->cand_free > y->cand_free ? -1 : 1;
	if (x->frag != y->frag)
		return x->frag > y->frag ? -1 : 1;
	if (x->level != y->level)
		return x->level > y->level ? -1 : 1;
	if (x->dom != y->dom)
		return x->dom < y->dom ? -1 : 1;
	return 0;
}

/* ---- the planner's state ------------------------------------------------------------------- */

/* A job on a candidate. */
struct cjob {
	struct tp_job_impl *j;
	uint32_t slot; /* valid while scanning only */
	uint32_t a;    /* its devices in the candidate that the request could use once it left */
	uint32_t d0;   /* those devices: scan.jdev[d0 .. d0 + a) */
	int64_t w;     /* cost of moving it */
	double rate;   /* w / a (infinite when a is 0) */
	uint8_t can;   /* CAN_MIGRATE | CAN_PREEMPT, 0: it stays */
	bool outside;  /* not on the candidate: moving it only makes room for migrants */
	bool force_preempt; /* a room maker: preempted, not migrated */
};

/* Units the request needs in the candidate's sub-domains of one level: `need` runs of `size`
 * devices, each inside one domain (its groups, or one layer of slices). */
struct layer {
	unsigned level;
	uint32_t size, need;
	uint32_t e0, ne;  /* the candidate's domains of this level */
	uint32_t *f0, *f; /* [ne] usable free devices: before any job leaves, and as tallied */
	uint64_t units;   /* sum of f / size */
	size_t cap;
};

/* What the devices of one candidate domain hold. */
struct cscan {
	int level;
	uint32_t dom;
	uint32_t node0, nnodes;
	uint32_t dev0, dev1;
	uint32_t free;     /* usable free devices */
	uint32_t unusable; /* devices down or cordoned (compaction: the domain cannot be freed) */
	uint64_t tally;    /* free + usable devices of the jobs tallied */
	struct cjob *jobs;
	uint32_t njobs;
	size_t cap_jobs;
	uint32_t *jdev; /* usable devices of each job in the candidate */
	size_t cap_jdev;
	uint32_t *jdom; /* [jdev index * nlayers + layer] the device's domain - e0 */
	size_t cap_jdom;
	unsigned nlayers;
	struct layer ly[TP_MAX_LEVELS];
	uint32_t nmov;     /* movable jobs (on the candidate, then outside ones once added) */
	uint64_t movcap;   /* their usable devices */
	uint32_t ninside;  /* jobs[0 .. ninside) are on the candidate */
	bool with_outside; /* the movable jobs elsewhere have been appended */
	int64_t lb;        /* lower bound of the cost of fitting the request here */
	uint32_t lb_moves;
};

/* Why candidates failed, for the message of a failed plan. */
struct diag {
	bool block; /* a candidate short of devices because jobs may not move */
	uint64_t block_short;
	int block_level;
	uint32_t block_dom;
	const struct tp_job_impl *block_job;
	bool nohome; /* a candidate whose jobs had nowhere to go */
	int nohome_level;
	uint32_t nohome_dom;
	const struct tp_job_impl *nohome_job;
	bool nohome_less_local; /* it had homes, but none as local as where it sits */
	uint32_t nohome_span[TP_MAX_LEVELS];
	bool moves; /* a candidate that needed more moves than allowed */
	uint32_t moves_needed;
	bool cost; /* a candidate that cost more than allowed */
	int64_t cost_needed;
};

struct planner {
	struct tp_cluster *c;
	const struct tp_topology *t;
	const tp_allocator *a;
	/* what is planned for */
	const tp_request *r; /* NULL when compacting */
	bool compact;
	struct tp_rq q;
	bool have_q;
	uint32_t count;
	bool select; /* the request selects devices (model, perf, memory, nodes) */
	int prio;
	const struct tp_job_impl *coloc;
	tp_defrag_policy pol;
	int64_t max_cost; /* COST_NONE: no limit */
	uint32_t max_moves;
	unsigned exact_max;
	int level;       /* candidate level, -1: the whole cluster */
	unsigned flevel; /* level of the fragmentation score */
	/* the candidate being searched */
	struct cscan scan;
	tp_request rreq_store;
	const tp_request *rreq; /* the request kept inside the candidate */
	const char **rnames;
	size_t cap_rnames;
	/* scratch */
	uint32_t *slot_local;
	size_t cap_slot;
	uint32_t *u32a, *u32b, *u32c;
	size_t cap_a, cap_b, cap_c;
	uint32_t *tobuf;
	size_t cap_to;
	uint32_t *holdbuf;
	size_t cap_hold;
	uint32_t *spanbuf;
	size_t cap_span;
	/* the last migrant place_migrants found no home for: whether a home existed but was less
	 * local, and how many domains it spans per level */
	bool nohome_less_local;
	uint32_t nohome_span[TP_MAX_LEVELS];
	/* results */
	struct draft best;
	bool have_best;
	struct diag diag;
	struct tp_defrag_stats stats;
	unsigned nholds; /* compaction: domains held so far */
	/* compaction of a set of domains: the device ranges held for them (else the scan's) */
	const uint32_t *cr; /* [2 * ncr]: first device, end */
	uint32_t ncr;
};

static int grow_u32(const tp_allocator *a, uint32_t **p, size_t *cap, size_t need)
{
	return tp_grow(a, (void **)p, cap, need ? need : 1, sizeof **p);
}

static void scan_free(struct planner *P)
{
	struct cscan *s = &P->scan;
	tp_free(P->a, s->jobs);
	tp_free(P->a, s->jdev);
	tp_free(P->a, s->jdom);
	for (unsigned i = 0; i < TP_MAX_LEVELS; i++) {
		tp_free(P->a, s->ly[i].f0);
		tp_free(P->a, s->ly[i].f);
	}
}

static void planner_fini(struct planner *P)
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
	draft_clear(P->a, &P->best);
	if (P->have_q)
		tp_rq_release(P->a, &P->q);
}

/* ---- policy ------------------------------------------------------------------------------- */

static int policy_check(const tp_defrag_policy *p, char *msg)
{
	if (p->version < 1 || p->version > TP_DEFRAG_POLICY_VERSION)
		return tp_seterr(msg, TP_EINVAL, "policy.version %u is not 1 to %d", p->version,
		                 TP_DEFRAG_POLICY_VERSION);
	if (isnan(p->max_cost_s))
		return tp_seterr(msg, TP_EINVAL, "policy.max_cost_s is not a number");
	if (p->min_priority_gap < 0)
		return tp_seterr(msg, TP_EINVAL, "policy.min_priority_gap %d is negative",
		                 p->min_priority_gap);
	return 0;
}

/* The caller's policy as the current version: a version 1 struct ends before
 * allow_less_local (reading past it would overrun the caller's object). */
static tp_defrag_policy policy_copy(const tp_defrag_policy *p)
{
	tp_defrag_policy v = TP_DEFRAG_POLICY_INIT;
	if (p->version >= 2)
		return *p;
	memcpy(&v, p, offsetof(tp_defrag_policy, allow_less_local));
	v.allow_less_local = 0;
	return v;
}

static void policy_limits(struct planner *P)
{
	double mc = P->pol.max_cost_s;
	P->max_cost = mc < 0 || isinf(mc) ? COST_NONE : cost_of(mc, 1);
	P->max_moves = P->pol.max_moves;
}

/* What the policy lets the plan do with job j. */
static unsigned job_can(const struct planner *P, const struct tp_job_impl *j)
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
static void job_blocker(const struct planner *P, const struct tp_job_impl *j, char *buf, size_t len)
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

/* ---- devices the request can use ----------------------------------------------------------- */

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* The request's `select`, as a necessary condition (a device it accepts may still be refused
 * by tp_place for other reasons; the planner only uses this to count). */
static bool dev_matches(const struct planner *P, uint32_t dev)
{
	if (!P->have_q)
		return true;
	const struct tp_rq *q = &P->q;
	const struct tp_topology *t = P->t;
	uint32_t node = t->dev_node[dev];
	if (q->has_model && (q->model < 0 || t->node_model[node] != (uint16_t)q->model))
		return false;
	if (q->min_mem > 0 && !(t->node_mem_gb[node] >= q->min_mem))
		return false;
	if (q->min_perf > 0 && !(t->dev_perf[dev] >= q->min_perf))
		return false;
	if (q->has_nodes && !bsearch(&node, q->nodes, q->nnodes, sizeof *q->nodes, cmp_u32))
		return false;
	return true;
}

/* Free for the request once its holder (if any) has left. */
static bool dev_usable(const struct planner *P, uint32_t dev)
{
	return P->c->dstate[dev] == 0 && (!P->select || dev_matches(P, dev));
}

/* ---- scanning a candidate ---------------------------------------------------------------- */

/* The domains of level u inside domain `dom` of level l (l < u; l = -1: the cluster). */
static void desc_range(const struct tp_topology *t, int l, uint32_t dom, unsigned u, uint32_t *e0,
                       uint32_t *ne)
{
	if (l < 0) {
		*e0 = 0;
		*ne = t->lv[u].ndom;
		return;
	}
	uint32_t lo = dom, hi = dom + 1;
	for (unsigned k = (unsigned)l; k < u; k++) {
		lo = t->lv[k].child_first[lo];
		hi = t->lv[k].child_first[hi];
	}
	*e0 = lo;
	*ne = hi - lo;
}

static int add_layer(struct planner *P, unsigned level, uint32_t size)
{
	struct cscan *s = &P->scan;
	if ((int)level <= s->level || size <= 1)
		return 0;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (s->ly[i].level == level) {
			if (size > s->ly[i].size) {
				s->ly[i].size = size;
				s->ly[i].need = P->count / size;
			}
			return 0;
		}
	struct layer *ly = &s->ly[s->nlayers];
	desc_range(P->t, s->level, s->dom, level, &ly->e0, &ly->ne);
	size_t cap = ly->cap;
	if (tp_grow(P->a, (void **)&ly->f0, &cap, ly->ne ? ly->ne : 1, sizeof *ly->f0))
		return TP_ENOMEM;
	cap = ly->cap;
	if (tp_grow(P->a, (void **)&ly->f, &cap, ly->ne ? ly->ne : 1, sizeof *ly->f))
		return TP_ENOMEM;
	ly->cap = cap;
	memset(ly->f0, 0, (size_t)ly->ne * sizeof *ly->f0);
	ly->level = level;
	ly->size = size;
	ly->need = P->count / size;
	s->nlayers++;
	return 0;
}

/* The layers of the request below the candidate's level: its groups and each slice layer. */
static int setup_layers(struct planner *P)
{
	struct cscan *s = &P->scan;
	s->nlayers = 0;
	if (!P->have_q)
		return 0;
	int rc = add_layer(P, P->q.glevel, P->q.gsize);
	for (unsigned i = 0; !rc && i < P->q.nslices; i++)
		rc = add_layer(P, P->q.slevel[i], P->q.ssize[i]);
	return rc;
}

static uint32_t layer_dom(const struct planner *P, const struct layer *ly, uint32_t dev)
{
	uint32_t node = P->t->dev_node[dev];
	return tp_node_ancestor(P->t, node, ly->level) - ly->e0;
}

static int cjob_cmp_id(const void *x, const void *y)
{
	const struct cjob *a = x, *b = y;
	return strcmp(a->j->id, b->j->id);
}

/* Read the candidate's devices: its usable free devices, and every job on it with the devices
 * the request could use once the job left. Jobs are listed in the order of their first device
 * on the candidate (deterministic, and independent of the history of job slots). */
static int scan_jobs(struct planner *P, int level, uint32_t dom, bool full);

static int scan_candidate(struct planner *P, int level, uint32_t dom)
{
	return scan_jobs(P, level, dom, true);
}

/* With !full, only what bounding needs: the jobs, their usable devices on the candidate, their
 * costs and what the policy allows (no layers, no device lists; one pass). */
static int scan_jobs(struct planner *P, int level, uint32_t dom, bool full)
{
	struct cscan *s = &P->scan;
	struct tp_cluster *c = P->c;
	const struct tp_topology *t = P->t;
	int rc = 0;
	P->stats.scanned++;
	s->level = level;
	s->dom = dom;
	if (level < 0) {
		s->node0 = 0;
		s->nnodes = t->nnodes;
	} else {
		tp_dom_nodes(t, (unsigned)level, dom, &s->node0, &s->nnodes);
	}
	s->dev0 = t->dev_first[s->node0];
	s->dev1 = t->dev_first[s->node0 + s->nnodes];
	s->nlayers = 0;
	if (full && (rc = setup_layers(P)))
		return rc;
	size_t old = P->cap_slot;
	if (c->njobs > old) {
		if (tp_grow(P->a, (void **)&P->slot_local, &P->cap_slot, c->njobs,
		            sizeof *P->slot_local))
			return TP_ENOMEM;
		for (size_t i = old; i < P->cap_slot; i++)
			P->slot_local[i] = TP_NONE;
	}
	s->njobs = 0;
	s->free = 0;
	s->unusable = 0;
	uint32_t prev_slot = TP_NO_JOB, prev_k = 0;
	for (uint32_t dev = s->dev0; dev < s->dev1; dev++) {
		uint32_t slot = c->dev_job[dev];
		bool usable = dev_usable(P, dev);
		s->unusable += c->dstate[dev] != 0;
		if (slot == TP_NO_JOB) {
			if (usable) {
				s->free++;
				for (unsigned i = 0; i < s->nlayers; i++)
					s->ly[i].f0[layer_dom(P, &s->ly[i], dev)]++;
			}
			continue;
		}
		if (slot == prev_slot) { /* a job's devices are mostly adjacent */
			s->jobs[prev_k].a += usable;
			continue;
		}
		uint32_t k = P->slot_local[slot];
		if (k == TP_NONE) {
			if (tp_grow(P->a, (void **)&s->jobs, &s->cap_jobs, s->njobs + 1,
			            sizeof *s->jobs)) {
				rc = TP_ENOMEM;
				break;
			}
			k = s->njobs++;
			P->slot_local[slot] = k;
			s->jobs[k] = (struct cjob){.j = c->jobs[slot], .slot = slot};
		}
		s->jobs[k].a += usable;
		prev_slot = slot;
		prev_k = k;
	}
	if (rc || !full) {
		s->ninside = s->njobs;
		s->with_outside = false;
		for (uint32_t k = 0; k < s->njobs; k++) {
			struct cjob *cj = &s->jobs[k];
			P->slot_local[cj->slot] = TP_NONE;
			cj->w = cost_of(cj->j->checkpoint_s, cj->j->ndev);
			cj->rate = cj->a ? (double)cj->w / cj->a : INFINITY;
			cj->can = (uint8_t)job_can(P, cj->j);
		}
		return rc;
	}
	size_t off = 0;
	for (uint32_t k = 0; k < s->njobs; k++) {
		P->slot_local[s->jobs[k].slot] = k;
		s->jobs[k].d0 = (uint32_t)off;
		off += s->jobs[k].a;
		s->jobs[k].a = 0;
	}
	if (grow_u32(P->a, &s->jdev, &s->cap_jdev, off) ||
	    grow_u32(P->a, &s->jdom, &s->cap_jdom, off * (s->nlayers ? s->nlayers : 1))) {
		for (uint32_t k = 0; k < s->njobs; k++)
			P->slot_local[s->jobs[k].slot] = TP_NONE;
		return TP_ENOMEM;
	}
	for (uint32_t dev = s->dev0; dev < s->dev1; dev++) {
		uint32_t slot = c->dev_job[dev];
		if (slot == TP_NO_JOB || !dev_usable(P, dev))
			continue;
		struct cjob *cj = &s->jobs[P->slot_local[slot]];
		uint32_t at = cj->d0 + cj->a++;
		s->jdev[at] = dev;
		for (unsigned i = 0; i < s->nlayers; i++)
			s->jdom[(size_t)at * s->nlayers + i] = layer_dom(P, &s->ly[i], dev);
	}
	s->nmov = 0;
	s->movcap = 0;
	s->ninside = s->njobs;
	s->with_outside = false;
	for (uint32_t k = 0; k < s->njobs; k++) {
		struct cjob *cj = &s->jobs[k];
		P->slot_local[cj->slot] = TP_NONE;
		cj->w = cost_of(cj->j->checkpoint_s, cj->j->ndev);
		cj->rate = cj->a ? (double)cj->w / cj->a : INFINITY;
		cj->can = (uint8_t)job_can(P, cj->j);
		if (cj->can) {
			s->nmov++;
			s->movcap += cj->a;
		}
	}
	return 0;
}

/* Append the movable jobs that are not on the candidate (a = 0: they free nothing there, but
 * stopping one makes room for a job that has to leave the candidate). O(jobs). */
static int append_outside(struct planner *P)
{
	struct cscan *s = &P->scan;
	struct tp_cluster *c = P->c;
	if (s->with_outside)
		return 0;
	s->with_outside = true;
	if (c->njobs > P->cap_slot) {
		size_t old = P->cap_slot;
		if (tp_grow(P->a, (void **)&P->slot_local, &P->cap_slot, c->njobs,
		            sizeof *P->slot_local))
			return TP_ENOMEM;
		for (size_t i = old; i < P->cap_slot; i++)
			P->slot_local[i] = TP_NONE;
	}
	for (uint32_t k = 0; k < s->ninside; k++)
		P->slot_local[s->jobs[k].slot] = k;
	int rc = 0;
	for (size_t slot = 0; slot < c->njobs && !rc; slot++) {
		struct tp_job_impl *j = c->jobs[slot];
		unsigned can;
		if (P->slot_local[slot] != TP_NONE || j->id[0] == '\x01' || !(can = job_can(P, j)))
			continue;
		if (tp_grow(P->a, (void **)&s->jobs, &s->cap_jobs, s->njobs + 1, sizeof *s->jobs)) {
			rc = TP_ENOMEM;
			break;
		}
		s->jobs[s->njobs++] = (struct cjob){.j = j,
		                                    .slot = (uint32_t)slot,
		                                    .w = cost_of(j->checkpoint_s, j->ndev),
		                                    .rate = INFINITY,
		                                    .can = (uint8_t)can,
		                                    .outside = true};
		s->nmov++;
	}
	/* slots depend on history: list them by id */
	if (s->njobs - s->ninside > 1)
		qsort(s->jobs + s->ninside, s->njobs - s->ninside, sizeof *s->jobs, cjob_cmp_id);
	for (uint32_t k = 0; k < s->ninside; k++)
		P->slot_local[s->jobs[k].slot] = TP_NONE;
	return rc;
}

/* ---- tallies: what fits once a set of jobs has left ------------------------------------------ */

static void tally_reset(struct planner *P)
{
	struct cscan *s = &P->scan;
	s->tally = s->free;
	for (unsigned i = 0; i < s->nlayers; i++) {
		struct layer *ly = &s->ly[i];
		memcpy(ly->f, ly->f0, (size_t)ly->ne * sizeof *ly->f);
		uint64_t u = 0;
		for (uint32_t e = 0; e < ly->ne; e++)
			u += ly->f[e] / ly->size;
		ly->units = u;
	}
}

static void tally_job(struct planner *P, uint32_t k, int sign)
{
	struct cscan *s = &P->scan;
	const struct cjob *cj = &s->jobs[k];
	s->tally = sign > 0 ? s->tally + cj->a : s->tally - cj->a;
	for (unsigned i = 0; i < s->nlayers; i++) {
		struct layer *ly = &s->ly[i];
		for (uint32_t x = 0; x < cj->a; x++) {
			uint32_t e = s->jdom[(size_t)(cj->d0 + x) * s->nlayers + i];
			ly->units -= ly->f[e] / ly->size;
			ly->f[e] = sign > 0 ? ly->f[e] + 1 : ly->f[e] - 1;
			ly->units += ly->f[e] / ly->size;
		}
	}
}

/* Necessary for the request to fit: enough usable devices and enough whole units per layer. */
static bool tally_enough(const struct planner *P)
{
	const struct cscan *s = &P->scan;
	if (s->tally < P->count)
		return false;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (s->ly[i].units < s->ly[i].need)
			return false;
	return true;
}

/* ---- lower bounds ------------------------------------------------------------------------- */

/* Orders of job indices of the scan. The sorts take the planner as context (qsort has none,
 * and the library keeps no global state). */
typedef int (*job_order)(const struct planner *P, uint32_t a, uint32_t b);

static void sift_down(const struct planner *P, uint32_t *v, size_t i, size_t n, job_order cmp)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && cmp(P, v[l], v[m]) > 0)
			m = l;
		if (l + 1 < n && cmp(P, v[l + 1], v[m]) > 0)
			m = l + 1;
		if (m == i)
			return;
		uint32_t x = v[i];
		v[i] = v[m];
		v[m] = x;
		i = m;
	}
}

/* Heapsort: no allocation, and every order below is total, so stability does not matter. */
static void sort_jobs(const struct planner *P, uint32_t *v, size_t n, job_order cmp)
{
	if (n < 2)
		return;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(P, v, i, n, cmp);
	for (size_t end = n - 1; end > 0; end--) {
		uint32_t x = v[0];
		v[0] = v[end];
		v[end] = x;
		sift_down(P, v, 0, end, cmp);
	}
}

/* Cost per usable device ascending (jobs that free nothing last); then more usable devices
 * first (fewer jobs), fewer devices in all, then the scan's order. */
static int by_rate(const struct planner *P, uint32_t x, uint32_t y)
{
	const struct cjob *a = &P->scan.jobs[x], *b = &P->scan.jobs[y];
	/* equal ratios divide to the same correctly rounded double, so exact ties stay ties */
	if (a->rate != b->rate)
		return a->rate < b->rate ? -1 : 1;
	if (a->a != b->a)
		return a->a > b->a ? -1 : 1;
	if (a->j->ndev != b->j->ndev) /* fewer devices moved in all */
		return a->j->ndev < b->j->ndev ? -1 : 1;
	return (x > y) - (x < y);
}

/* More usable devices first (the fewest jobs), then by rate. */
static int by_size(const struct planner *P, uint32_t x, uint32_t y)
{
	uint32_t a = P->scan.jobs[x].a, b = P->scan.jobs[y].a;
	if (a != b)
		return a > b ? -1 : 1;
	return by_rate(P, x, y);
}

static int by_index(const struct planner *P, uint32_t x, uint32_t y)
{
	(void)P;
	return (x > y) - (x < y);
}

/* A movable job as the bounds see it. */
struct bitem {
	double rate;
	int64_t w;
	uint32_t a;
};

/* Ascending rate (insertion sort: a rack holds a few dozen jobs; larger lists use the heap). */
static void bitems_sort(struct bitem *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct bitem x = v[i];
		size_t k = i;
		for (; k > 0 &&
		       (v[k - 1].rate > x.rate || (v[k - 1].rate == x.rate && v[k - 1].a < x.a));
		     k--)
			v[k] = v[k - 1];
		v[k] = x;
	}
}

/* The fractional knapsack bound on the cost of freeing the missing devices (jobs by cost per
 * device, the last one in part), and the fewest jobs that could free them. */

/* Heap sort's sift-down over v[0..end): the item at x sinks below larger rates. */
static void bitems_sift(struct bitem *v, size_t x, size_t end)
{
	for (;;) {
		size_t l = 2 * x + 1, mx = x;
		if (l < end && v[l].rate > v[mx].rate)
			mx = l;
		if (l + 1 < end && v[l + 1].rate > v[mx].rate)
			mx = l + 1;
		if (mx == x)
			return;
		struct bitem t = v[x];
		v[x] = v[mx];
		v[mx] = t;
		x = mx;
	}
}
static int lower_bounds(struct planner *P)
{
	struct cscan *s = &P->scan;
	s->lb = 0;
	s->lb_moves = 0;
	uint64_t need = P->count > s->free ? P->count - s->free : 0;
	if (!need)
		return 0;
	size_t m = 0;
	struct bitem small[64], *v = small;
	for (uint32_t k = 0; k < s->njobs; k++)
		m += s->jobs[k].can && s->jobs[k].a;
	if (m > 64 && !(v = tp_mallocn(P->a, m, sizeof *v)))
		return TP_ENOMEM;
	m = 0;
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can && s->jobs[k].a)
			v[m++] = (struct bitem){s->jobs[k].rate, s->jobs[k].w, s->jobs[k].a};
	if (m <= 64) {
		bitems_sort(v, m);
	} else { /* heap sort of indices would need the scan; sort the items by rate */
		for (size_t i = m / 2; i-- > 0;)
			bitems_sift(v, i, m);
		for (size_t end = m - 1; end > 0; end--) {
			struct bitem t = v[0];
			v[0] = v[end];
			v[end] = t;
			bitems_sift(v, 0, end);
		}
	}
	uint64_t left = need;
	int64_t lb = 0;
	for (size_t i = 0; i < m && left; i++) {
		if (v[i].a <= left) {
			lb = cost_add(lb, v[i].w);
			left -= v[i].a;
		} else {
			lb = cost_add(lb, (int64_t)((long double)v[i].w * left / v[i].a));
			left = 0;
		}
	}
	/* fewest jobs: the largest first; a count of jobs per size avoids a second sort */
	uint32_t moves = 0, amax = 0;
	for (size_t i = 0; i < m; i++)
		amax = v[i].a > amax ? v[i].a : amax;
	left = need;
	if (amax <= 64) {
		for (uint32_t a = amax; a > 0 && left; a--)
			for (size_t i = 0; i < m && left; i++)
				if (v[i].a == a) {
					left -= a < left ? a : left;
					moves++;
				}
	} else { /* large jobs: their sizes sorted, largest first */
		for (size_t i = 0; i < m; i++)
			v[i].rate = -(double)v[i].a;
		bitems_sort(v, m);
		for (size_t i = 0; i < m && left; i++, moves++)
			left -= v[i].a < left ? v[i].a : left;
	}
	if (v != small)
		tp_free(P->a, v);
	s->lb = lb;
	s->lb_moves = moves;
	return 0;
}

/* ---- the request kept inside the candidate -------------------------------------------------- */

static bool node_allowed(const struct planner *P, uint32_t node)
{
	return !P->have_q || !P->q.has_nodes ||
	       bsearch(&node, P->q.nodes, P->q.nnodes, sizeof *P->q.nodes, cmp_u32);
}

/* The request with an allow-list of the candidate's nodes (the whole cluster: the request). */
static int restrict_request(struct planner *P, bool *empty)
{
	const struct cscan *s = &P->scan;
	*empty = false;
	if (P->compact) {
		P->rreq = NULL;
		return 0;
	}
	if (s->level < 0) {
		P->rreq = P->r;
		return 0;
	}
	if (tp_grow(P->a, (void **)&P->rnames, &P->cap_rnames, s->nnodes, sizeof *P->rnames))
		return TP_ENOMEM;
	size_t n = 0;
	unsigned nl = tp_node_level(P->t);
	for (uint32_t node = s->node0; node < s->node0 + s->nnodes; node++)
		if (node_allowed(P, node))
			P->rnames[n++] = P->t->lv[nl].dname[node];
	tp_request_read(P->r, &P->rreq_store); /* by its version: no byte past its end */
	P->rreq_store.select_nodes = P->rnames;
	P->rreq_store.nselect_nodes = n;
	P->rreq = &P->rreq_store;
	*empty = n == 0;
	return 0;
}

/* ---- simulating one set of jobs ---------------------------------------------------------- */

/* ---- locality of a migrated job -------------------------------------------------------------
 *
 * A placement is at least as local as another when, at every level, it spans at most as many
 * domains. Then the smallest domain holding all of it is no higher either (span 1 stays 1).
 * Unless the policy opts out (allow_less_local), a migrant's new home must be at least as
 * local as the devices it leaves.
 */

/* How many domains of each level (0 .. the node level) the devices span. Domains are ranges
 * of device ids (the tree is numbered depth first), so on the sorted list every domain is one
 * run. */
static int dev_spans(struct planner *P, const uint32_t *devs, uint32_t n, uint32_t *span)
{
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	if (grow_u32(P->a, &P->spanbuf, &P->cap_span, n))
		return TP_ENOMEM;
	uint32_t *v = P->spanbuf;
	memcpy(v, devs, (size_t)n * sizeof *v);
	bool sorted = true;
	for (uint32_t i = 1; i < n && sorted; i++)
		sorted = v[i - 1] <= v[i];
	if (!sorted)
		qsort(v, n, sizeof *v, cmp_u32);
	for (unsigned l = 0; l <= nl; l++) {
		uint32_t k = 0, prev = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t d = tp_node_ancestor(t, t->dev_node[v[i]], l);
			k += d != prev;
			prev = d;
		}
		span[l] = k;
	}
	return 0;
}

/* Whether a placement (devs) is at least as local as the spans `old`. */
static int as_local(struct planner *P, const uint32_t *devs, uint32_t n, const uint32_t *old,
                    bool *ok)
{
	uint32_t span[TP_MAX_LEVELS];
	int rc = dev_spans(P, devs, n, span);
	*ok = false;
	if (rc)
		return rc;
	for (unsigned l = 0; l <= tp_node_level(P->t); l++)
		if (span[l] > old[l])
			return 0;
	*ok = true;
	return 0;
}

/* The request a migrated job is re-placed with: its own, or one of its size that prefers the
 * smallest domain it sat in. */
static void migrant_request(const struct planner *P, const struct tp_job_impl *j, tp_request *r)
{
	if (j->shape) {
		*r = *j->shape;
		r->id = j->id;
		r->tenant = j->tenant;
		r->count = j->ndev;
		return;
	}
	*r = (tp_request)TP_REQUEST_INIT;
	r->id = j->id;
	r->job_class = j->job_class;
	r->priority = j->priority;
	r->tenant = j->tenant;
	r->count = j->ndev;
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	for (int l = (int)nl; l >= 0; l--) {
		uint32_t d0 = tp_node_ancestor(t, t->dev_node[j->devs[0]], (unsigned)l);
		bool same = true;
		for (uint32_t i = 1; i < j->ndev && same; i++)
			same = tp_node_ancestor(t, t->dev_node[j->devs[i]], (unsigned)l) == d0;
		if (same) {
			r->preferred = t->lv[l].name;
			return;
		}
	}
}

/* The most free devices of any domain of level l: one Judy1 look-up where the level is
 * indexed; elsewhere (the node level) a bound that never stops a search (the largest node). */
static uint32_t max_free(const struct planner *P, unsigned l)
{
	const struct tp_cluster *c = P->c;
	if (!c->indexed[l])
		return UINT32_MAX;
	Word_t k = ~(Word_t)0;
	JError_t err;
	if (Judy1Last(c->index[l], &k, &err) != 1)
		return 0;
	return (uint32_t)(k >> 32);
}

/* A node and the free devices of its ancestors, for the packing below. */
struct nodekey {
	uint32_t node;
	uint32_t key[TP_MAX_LEVELS]; /* free devices from the level below the domain down */
};

static int nodekey_cmp(const void *x, const void *y)
{
	const struct nodekey *a = x, *b = y;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		if (a->key[l] != b->key[l])
			return a->key[l] > b->key[l] ? -1 : 1;
	return (a->node > b->node) - (a->node < b->node);
}

/* The last resort for a migrant whose placements were all less local: pack it into nodes of
 * domain `dom` of level `lvl` (-1: the cluster), the sub-domain with the most free devices
 * first at every level, then ask tp_place for it restricted to those nodes (a placement inside
 * them spans no more domains than they do). */
static int pack_home(struct planner *P, const tp_request *base, const struct tp_job_impl *j,
                     const uint32_t *old, int lvl, uint32_t dom, tp_placement **out)
{
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	uint32_t n0 = 0, nn = t->nnodes;
	if (lvl >= 0)
		tp_dom_nodes(t, (unsigned)lvl, dom, &n0, &nn);
	struct nodekey *v = tp_mallocn(P->a, nn ? nn : 1, sizeof *v);
	const char **names = tp_mallocn(P->a, nn ? nn : 1, sizeof *names);
	uint32_t *picked = tp_mallocn(P->a, nn ? nn : 1, sizeof *picked);
	int rc = 0;
	if (!v || !names || !picked) {
		rc = TP_ENOMEM;
		goto out;
	}
	uint32_t nv = 0;
	for (uint32_t node = n0; node < n0 + nn; node++) {
		uint32_t f = P->c->free[nl][node];
		if (!f)
			continue;
		struct nodekey k = {.node = node};
		for (unsigned l = (unsigned)(lvl + 1), x = 0; l <= nl; l++, x++)
			k.key[x] = P->c->free[l][tp_node_ancestor(t, node, l)];
		v[nv++] = k;
	}
	qsort(v, nv, sizeof *v, nodekey_cmp);
	uint32_t need = j->ndev, np = 0;
	for (uint32_t i = 0; i < nv && need; i++) {
		uint32_t f = P->c->free[nl][v[i].node];
		need -= f < need ? f : need;
		picked[np++] = v[i].node;
	}
	if (need)
		goto out;
	qsort(picked, np, sizeof *picked, cmp_u32);
	for (unsigned l = 0; l <= nl; l++) {
		uint32_t k = 0, prev = UINT32_MAX;
		for (uint32_t i = 0; i < np; i++) {
			uint32_t d = tp_node_ancestor(t, picked[i], l);
			k += d != prev;
			prev = d;
		}
		if (k > old[l])
			goto out; /* the greedy packing is not local enough either */
	}
	for (uint32_t i = 0; i < np; i++)
		names[i] = t->lv[nl].dname[picked[i]];
	tp_request r = *base;
	r.select_nodes = names;
	r.nselect_nodes = np;
	rc = tp_place(P->c, &r, out);
	if (rc) {
		tp_placement_destroy(*out);
		*out = NULL;
		rc = rc == TP_ENOMEM ? rc : 0;
	}
out:
	tp_free(P->a, v);
	tp_free(P->a, names);
	tp_free(P->a, picked);
	return rc;
}

/* A home tp_place found for a migrant whose old devices span `old`: when it is as local, it
 * becomes *out (*ok); an error destroys it; otherwise the caller still owns it. */
static int take_if_local(struct planner *P, tp_placement *pl, const uint32_t *old,
                         tp_placement **out, bool *ok)
{
	size_t n;
	const uint32_t *devs = tp_placement_devices(pl, &n);
	int rc = as_local(P, devs, (uint32_t)n, old, ok);
	if (rc) {
		*ok = false;
		tp_placement_destroy(pl);
		return rc;
	}
	if (*ok)
		*out = pl;
	return 0;
}

/* A home for a migrant, or *out NULL. With the locality rule, the job is placed with its own
 * request (without a shape: one of its size) required inside one domain of the deepest level
 * it sits in now, then, while the answer is less local than now, inside one domain of each
 * deeper level in turn (a deeper domain can only lower the spans above it); the first answer
 * at least as local is its home. *less_local: answers were found but none was local enough.
 * Without the rule, the request as migrant_request says, then any free devices. */
static int find_home(struct planner *P, const struct tp_job_impl *j, tp_placement **out,
                     bool *less_local)
{
	const struct tp_topology *t = P->t;
	tp_request mr;
	int rc;
	*out = NULL;
	*less_local = false;
	migrant_request(P, j, &mr);
	if (P->pol.allow_less_local) {
		rc = tp_place(P->c, &mr, out);
		if (rc && rc != TP_ENOMEM && !j->shape && mr.preferred) {
			/* the preferred level is a courtesy: any free devices will do */
			tp_placement_destroy(*out);
			*out = NULL;
			mr.preferred = NULL;
			rc = tp_place(P->c, &mr, out);
		}
		if (rc) {
			tp_placement_destroy(*out);
			*out = NULL;
		}
		return rc == TP_ENOMEM ? rc : 0;
	}
	uint32_t old[TP_MAX_LEVELS];
	if ((rc = dev_spans(P, j->devs, j->ndev, old)))
		return rc;
	memcpy(P->nohome_span, old, sizeof old);
	unsigned nl = tp_node_level(t);
	int deep = -1; /* the deepest level whose one domain holds the whole job */
	for (unsigned l = 0; l <= nl; l++)
		if (old[l] == 1)
			deep = (int)l;
	int have = j->shape ? tp_topology_level_index(t, mr.required) : -1;
	if (!j->shape) {
		mr.preferred = NULL;
		if (deep < 0)
			mr.preferred = t->lv[0].name; /* it spans top-level domains: as few as can be */
	}
	int start = deep > have ? deep : have;
	uint32_t hint = 0; /* the domain of level `start` tp_place chose */
	bool hinted = false;
	for (int l = start; l <= (int)nl; l++) {
		if (l >= 0 && max_free(P, (unsigned)l) < j->ndev)
			break; /* no domain of this level (or deeper) has room: skip the calls */
		tp_request r = mr;
		if (l >= 0 && l > have) {
			r.required = t->lv[l].name;
			if (tp_topology_level_index(t, r.preferred) <= l)
				r.preferred = NULL; /* one domain of level l is as few as can be */
		}
		tp_placement *pl = NULL;
		rc = tp_place(P->c, &r, &pl);
		if (rc) {
			tp_placement_destroy(pl);
			if (rc == TP_ENOMEM)
				return rc;
			break; /* no room in any domain of this level: none deeper has room */
		}
		bool ok;
		if ((rc = take_if_local(P, pl, old, out, &ok)))
			return rc;
		if (ok) {
			*less_local = false;
			return 0;
		}
		if (l == start && start >= 0) {
			size_t n;
			const uint32_t *devs = tp_placement_devices(pl, &n);
			hint = tp_node_ancestor(t, t->dev_node[devs[0]], (unsigned)start);
			hinted = true;
		}
		tp_placement_destroy(pl);
		*less_local = true;
	}
	if (!*less_local || j->shape)
		return 0;
	/* tp_place's answers were all less local: pack it by hand */
	tp_request r = mr;
	r.preferred = NULL;
	if (start >= 0)
		r.required = t->lv[start].name;
	tp_placement *pl = NULL;
	if ((rc = pack_home(P, &r, j, old, hinted ? start : -1, hint, &pl)))
		return rc;
	if (pl) {
		bool ok;
		if ((rc = take_if_local(P, pl, old, out, &ok)))
			return rc;
		if (ok) {
			*less_local = false;
			return 0;
		}
		tp_placement_destroy(pl);
	}
	return 0;
}

/* For the message of a job with no home: whether it would have one without the locality
 * rule. */
static int less_local_home(struct planner *P, const struct tp_job_impl *j, bool *yes)
{
	bool allow = P->pol.allow_less_local, unused;
	tp_placement *pl = NULL;
	P->pol.allow_less_local = 1;
	int rc = find_home(P, j, &pl, &unused);
	P->pol.allow_less_local = allow;
	*yes = pl != NULL;
	tp_placement_destroy(pl);
	return rc;
}

static tp_job_options job_options(const struct tp_job_impl *j)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = j->job_class;
	o.priority = j->priority;
	o.tenant = j->tenant;
	o.preemptible = j->preemptible;
	o.migratable = j->migratable;
	o.checkpoint_s = j->checkpoint_s;
	o.shape = j->shape;
	return o;
}

/* The order migrants are re-placed in: those that cannot fall back to preemption first, then
 * larger jobs, then by id. */
static int by_migrant_order(const struct planner *P, uint32_t x, uint32_t y)
{
	const struct cjob *a = &P->scan.jobs[x], *b = &P->scan.jobs[y];
	bool pa = a->can & CAN_PREEMPT, pb = b->can & CAN_PREEMPT;
	if (pa != pb)
		return pa ? 1 : -1;
	if (a->j->ndev != b->j->ndev)
		return a->j->ndev > b->j->ndev ? -1 : 1;
	return (x > y) - (x < y);
}

/* Whether a moved job restarts elsewhere (else it is preempted). */
static bool migrates(const struct cjob *cj)
{
	return (cj->can & CAN_MIGRATE) && !cj->force_preempt;
}

/* Migrant results of one simulation: new devices tobuf[off[i] .. off[i+1]), or preempted. */
struct migs {
	uint32_t n;
	uint32_t *k;   /* job index in the scan */
	uint32_t *off; /* [n + 1] */
	bool *preempt;
};

/* Re-place the migrants, one after the other. With `blockers` (a second attempt, after the
 * first one's migrations formed a cycle), the devices a later migrant still occupies stay held
 * until its turn, so that no migrant lands where a later one sits (the steps can then always
 * be ordered); migrants the first attempt preempted stay preempted. *bad: the migrant with no
 * home, or UINT32_MAX. */
static int place_migrants(struct planner *P, struct migs *m, bool blockers, uint32_t *bad)
{
	struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	char id[48];
	int rc = 0;
	*bad = UINT32_MAX;
	if (blockers) {
		for (uint32_t i = 0; i < m->n; i++) {
			if (m->preempt[i])
				continue; /* preempted in the first attempt: it stays stopped */
			const struct tp_job_impl *j = s->jobs[m->k[i]].j;
			if (grow_u32(P->a, &P->holdbuf, &P->cap_hold, j->ndev))
				return TP_ENOMEM;
			uint32_t nb = 0;
			for (uint32_t x = 0; x < j->ndev; x++)
				if (tp_dev_free(c, j->devs[x]))
					P->holdbuf[nb++] = j->devs[x];
			snprintf(id, sizeof id, BLOCK_FMT, i);
			if (nb && (rc = tp_cluster_assign_impl(c, id, P->holdbuf, nb, NULL)))
				return rc;
		}
	}
	size_t used = 0;
	m->off[0] = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		const struct cjob *cj = &s->jobs[m->k[i]];
		if (blockers && m->preempt[i]) {
			m->off[i + 1] = (uint32_t)used;
			continue;
		}
		if (blockers) {
			snprintf(id, sizeof id, BLOCK_FMT, i);
			if (tp_cluster_job_slot(c, id) != TP_NO_JOB &&
			    (rc = tp_cluster_release(c, id)))
				return rc;
		}
		tp_placement *pl = NULL;
		bool less_local;
		if ((rc = find_home(P, cj->j, &pl, &less_local)))
			return rc;
		m->preempt[i] = false;
		if (pl) {
			size_t n;
			const uint32_t *devs = tp_placement_devices(pl, &n);
			if (grow_u32(P->a, &P->tobuf, &P->cap_to, used + n)) {
				tp_placement_destroy(pl);
				return TP_ENOMEM;
			}
			memcpy(P->tobuf + used, devs, n * sizeof *devs);
			tp_job_options o = job_options(cj->j);
			rc = tp_cluster_assign_impl(c, cj->j->id, devs, n, &o);
			tp_placement_destroy(pl);
			if (rc)
				return rc;
			used += n;
		} else {
			tp_placement_destroy(pl);
			rc = 0;
			if (!(cj->can & CAN_PREEMPT)) {
				*bad = i;
				/* only the first such job makes the message: probe for it alone */
				if (!less_local && !P->pol.allow_less_local && !P->diag.nohome &&
				    (rc = less_local_home(P, cj->j, &less_local)))
					return rc;
				P->nohome_less_local = less_local;
				return 0;
			}
			m->preempt[i] = true;
		}
		m->off[i + 1] = (uint32_t)used;
	}
	return 0;
}

struct owner {
	uint32_t dev, i;
};

static int owner_cmp(const void *x, const void *y)
{
	const struct owner *a = x, *b = y;
	return (a->dev > b->dev) - (a->dev < b->dev);
}

/* Order the migrations so that each one's targets are free when its turn comes: a migrant that
 * lands on devices another migrant leaves goes after it. Writes the order to ord[]; returns
 * false on a cycle. Ties keep the placement order. */
static int order_migrants(struct planner *P, const struct migs *m, uint32_t *ord, bool *ok)
{
	const struct cscan *s = &P->scan;
	size_t nown = 0;
	for (uint32_t i = 0; i < m->n; i++)
		if (!m->preempt[i])
			nown += s->jobs[m->k[i]].j->ndev;
	struct owner *own = tp_mallocn(P->a, nown ? nown : 1, sizeof *own);
	uint32_t *indeg = tp_calloc(P->a, m->n ? m->n : 1, sizeof *indeg);
	bool *done = tp_calloc(P->a, m->n ? m->n : 1, sizeof *done);
	/* edges: after[e] must follow before[e] */
	size_t cap_eb = 0, cap_ea = 0, ne = 0;
	uint32_t *eb = NULL, *ea = NULL;
	int rc = 0;
	if (!own || !indeg || !done) {
		rc = TP_ENOMEM;
		goto out;
	}
	nown = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		if (m->preempt[i])
			continue;
		const struct tp_job_impl *j = s->jobs[m->k[i]].j;
		for (uint32_t x = 0; x < j->ndev; x++)
			own[nown++] = (struct owner){j->devs[x], i};
	}
	qsort(own, nown, sizeof *own, owner_cmp);
	for (uint32_t i = 0; i < m->n; i++) {
		for (uint32_t x = m->off[i]; x < m->off[i + 1]; x++) {
			struct owner key = {P->tobuf[x], 0};
			struct owner *o = bsearch(&key, own, nown, sizeof *own, owner_cmp);
			if (!o || o->i == i)
				continue;
			if (tp_grow(P->a, (void **)&eb, &cap_eb, ne + 1, sizeof *eb) ||
			    tp_grow(P->a, (void **)&ea, &cap_ea, ne + 1, sizeof *ea)) {
				rc = TP_ENOMEM;
				goto out;
			}
			eb[ne] = o->i;
			ea[ne++] = i;
			indeg[i]++;
		}
	}
	uint32_t nord = 0;
	for (;;) {
		uint32_t next = UINT32_MAX;
		for (uint32_t i = 0; i < m->n && next == UINT32_MAX; i++)
			if (!done[i] && !indeg[i])
				next = i;
		if (next == UINT32_MAX)
			break;
		done[next] = true;
		ord[nord++] = next;
		for (size_t e = 0; e < ne; e++)
			if (eb[e] == next)
				indeg[ea[e]]--;
	}
	*ok = nord == m->n;
out:
	tp_free(P->a, own);
	tp_free(P->a, indeg);
	tp_free(P->a, done);
	tp_free(P->a, eb);
	tp_free(P->a, ea);
	return rc;
}

struct touched {
	uint32_t dom;
	int64_t after;
};

static int touched_cmp(const void *x, const void *y)
{
	const struct touched *a = x, *b = y;
	return (a->dom > b->dom) - (a->dom < b->dom);
}

/* Domains of the fragmentation level a list of devices touches, appended to *t. */
static int touch_devs(struct planner *P, struct touched **t, size_t *n, size_t *cap,
                      const uint32_t *devs, size_t nd)
{
	for (size_t i = 0; i < nd; i++) {
		if (tp_grow(P->a, (void **)t, cap, *n + 1, sizeof **t))
			return TP_ENOMEM;
		uint32_t node = P->t->dev_node[devs[i]];
		(*t)[(*n)++] = (struct touched){tp_node_ancestor(P->t, node, P->flevel), 0};
	}
	return 0;
}

/* The gain in the sum of squared free counts of the touched domains: larger means the free
 * devices left are gathered in fewer domains. `after` is read on the simulated cluster (minus
 * the request's own devices), `before` after the rollback. */
static void frag_after(struct planner *P, struct touched *t, size_t *n, const uint32_t *req,
                       size_t nreq)
{
	if (*n > 1)
		qsort(t, *n, sizeof *t, touched_cmp);
	size_t u = 0;
	for (size_t i = 0; i < *n; i++)
		if (!u || t[u - 1].dom != t[i].dom)
			t[u++] = t[i];
	*n = u;
	for (size_t i = 0; i < u; i++)
		t[i].after = P->c->free[P->flevel][t[i].dom];
	for (size_t i = 0; i < nreq; i++) {
		struct touched key = {tp_node_ancestor(P->t, P->t->dev_node[req[i]], P->flevel), 0};
		struct touched *x = bsearch(&key, t, u, sizeof *t, touched_cmp);
		if (x)
			x->after--;
	}
}

static int64_t frag_gain(const struct planner *P, const struct touched *t, size_t n)
{
	int64_t g = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t b = P->c->free[P->flevel][t[i].dom];
		g += t[i].after * t[i].after - b * b;
	}
	return g;
}

/* The steps of a simulated set: preemptions (in the scan's order), migrations (in `ord`), the
 * place step. */
static int build_steps(struct planner *P, const uint32_t *S, uint32_t n, const struct migs *m,
                       const uint32_t *ord, const tp_placement *final, struct draft *d)
{
	const struct cscan *s = &P->scan;
	int rc;
	if (grow_u32(P->a, &P->u32c, &P->cap_c, n))
		return TP_ENOMEM;
	uint32_t np = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!migrates(&s->jobs[S[i]]))
			P->u32c[np++] = S[i];
	for (uint32_t i = 0; i < m->n; i++)
		if (m->preempt[i])
			P->u32c[np++] = m->k[i];
	sort_jobs(P, P->u32c, np, by_index);
	for (uint32_t i = 0; i < np; i++) {
		const struct tp_job_impl *j = s->jobs[P->u32c[i]].j;
		if ((rc = draft_push(P->a, d, TP_STEP_PREEMPT, j->id, j->devs, j->ndev, NULL, 0)))
			return rc;
	}
	for (uint32_t x = 0; x < m->n; x++) {
		uint32_t i = ord[x];
		if (m->preempt[i])
			continue;
		const struct tp_job_impl *j = s->jobs[m->k[i]].j;
		if ((rc = draft_push(P->a, d, TP_STEP_MIGRATE, j->id, j->devs, j->ndev,
		                     P->tobuf + m->off[i], m->off[i + 1] - m->off[i])))
			return rc;
	}
	if (final) {
		size_t nf;
		const uint32_t *f = tp_placement_devices(final, &nf);
		if ((rc = draft_push(P->a, d, TP_STEP_PLACE, tp_placement_job(final), NULL, 0, f,
		                     nf)))
			return rc;
	}
	d->cost = 0;
	d->cost_s = 0;
	d->moves = n;
	d->moved_devices = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct cjob *cj = &s->jobs[S[i]];
		d->cost = cost_add(d->cost, cj->w);
		d->cost_s += cj->j->checkpoint_s * cj->j->ndev;
		d->moved_devices += cj->j->ndev;
	}
	d->cand_free = s->free;
	d->level = s->level;
	d->dom = s->dom;
	return 0;
}

/* Everything a simulation allocates for its migrants. */
static int migs_new(struct planner *P, struct migs *m, uint32_t n)
{
	m->n = n;
	m->k = tp_mallocn(P->a, n ? n : 1, sizeof *m->k);
	m->off = tp_mallocn(P->a, n + 1, sizeof *m->off);
	m->preempt = tp_calloc(P->a, n ? n : 1, sizeof *m->preempt);
	return m->k && m->off && m->preempt ? 0 : TP_ENOMEM;
}

static void migs_free(struct planner *P, struct migs *m)
{
	tp_free(P->a, m->k);
	tp_free(P->a, m->off);
	tp_free(P->a, m->preempt);
}

/* Hold the devices the request (or the freed domain) takes, as the request's tenant. */
static int hold_devices(struct planner *P, const char *id, const uint32_t *devs, size_t n)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.preemptible = 0;
	if (P->r) {
		o.job_class = P->r->job_class;
		o.priority = P->r->priority;
		o.tenant = P->r->tenant;
		o.shape = P->r;
	}
	return tp_cluster_assign_impl(P->c, id, devs, n, &o);
}

/*
 * Try one set of jobs S (indices into the scan) on the candidate: release them, place the
 * request inside the candidate (compaction: take the whole domain), find the migrants new homes,
 * order the steps, and place the request on the cluster the plan leaves. Everything is rolled
 * back. *out: OUT_OK with the plan in *d, or why not; *nohome: the job that had no home.
 */
static int try_subset(struct planner *P, const uint32_t *S, uint32_t n, struct draft *d, int *out,
                      const struct tp_job_impl **nohome)
{
	struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	struct migs m = {0};
	tp_placement *pl = NULL, *final = NULL;
	struct touched *tch = NULL;
	size_t ntch = 0, cap_tch = 0;
	uint32_t *ord = NULL;
	size_t sp;
	int rc;
	*out = OUT_NOFIT;
	*nohome = NULL;
	P->stats.tried++;
	if ((rc = tp_cluster_savepoint(c, &sp)))
		return rc;
	for (uint32_t i = 0; i < n; i++)
		if ((rc = tp_cluster_release(c, s->jobs[S[i]].j->id)))
			goto out;
	const uint32_t *X;
	size_t nX;
	if (P->compact) {
		uint32_t one[2] = {s->dev0, s->dev1};
		const uint32_t *cr = P->ncr ? P->cr : one;
		uint32_t ncr = P->ncr ? P->ncr : 1;
		nX = 0;
		for (uint32_t r = 0; r < ncr; r++)
			nX += cr[2 * r + 1] - cr[2 * r];
		if ((rc = grow_u32(P->a, &P->holdbuf, &P->cap_hold, nX)))
			goto out;
		nX = 0;
		for (uint32_t r = 0; r < ncr; r++)
			for (uint32_t dev = cr[2 * r]; dev < cr[2 * r + 1]; dev++)
				P->holdbuf[nX++] = dev;
		X = P->holdbuf;
		for (size_t i = 0; i < nX; i++)
			if (!tp_dev_free(c, X[i]))
				goto out; /* cannot happen: the scan saw every holder */
	} else {
		rc = tp_place(c, P->rreq, &pl);
		if (rc == TP_ENOMEM)
			goto out;
		if (rc) {
			rc = 0;
			goto out;
		}
		X = tp_placement_devices(pl, &nX);
	}
	if ((rc = hold_devices(P, HOLD_REQUEST, X, nX)))
		goto out;
	uint32_t nm = 0;
	for (uint32_t i = 0; i < n; i++)
		nm += migrates(&s->jobs[S[i]]);
	if ((rc = migs_new(P, &m, nm)))
		goto out;
	ord = tp_mallocn(P->a, nm ? nm : 1, sizeof *ord);
	if (!ord) {
		rc = TP_ENOMEM;
		goto out;
	}
	nm = 0;
	for (uint32_t i = 0; i < n; i++)
		if (migrates(&s->jobs[S[i]]))
			m.k[nm++] = S[i];
	sort_jobs(P, m.k, nm, by_migrant_order);
	size_t sp2;
	if ((rc = tp_cluster_savepoint(c, &sp2)))
		goto out;
	/* attempt 0: every migrant in turn; 1 (their new homes formed a cycle): again, each one
	 * kept off the devices later migrants still hold; 2 (that left one with no home, or a
	 * cycle): the migrants that may be preempted are, at the same cost, and the others
	 * placed as in 1 */
	bool ordered = false;
	uint32_t bad = UINT32_MAX;
	for (int attempt = 0; attempt < 3 && !ordered; attempt++) {
		if (attempt == 2) {
			bool any = false;
			for (uint32_t i = 0; i < m.n; i++)
				if (!m.preempt[i] && (s->jobs[m.k[i]].can & CAN_PREEMPT))
					any = m.preempt[i] = true;
			if (!any)
				break;
		}
		if (attempt && (rc = tp_cluster_rollback(c, sp2)) == 0)
			rc = tp_cluster_savepoint(c, &sp2);
		if (rc || (rc = place_migrants(P, &m, attempt >= 1, &bad)))
			goto out;
		if (bad != UINT32_MAX) {
			if (attempt == 1)
				continue;
			break;
		}
		if ((rc = order_migrants(P, &m, ord, &ordered)))
			goto out;
	}
	if (!ordered) {
		*out = bad != UINT32_MAX ? OUT_NOHOME : OUT_CYCLE;
		if (bad != UINT32_MAX)
			*nohome = s->jobs[m.k[bad]].j;
		goto out;
	}
	if ((rc = tp_cluster_release(c, HOLD_REQUEST)))
		goto out;
	if (!P->compact) {
		rc = tp_place(c, P->r, &final);
		if (rc == TP_ENOMEM)
			goto out;
		if (rc) {
			rc = 0;
			goto out; /* cannot happen: the held devices were a placement */
		}
	}
	/* fragmentation: the domains every step touches */
	for (uint32_t i = 0; i < n && !rc; i++) {
		const struct tp_job_impl *j = s->jobs[S[i]].j;
		rc = touch_devs(P, &tch, &ntch, &cap_tch, j->devs, j->ndev);
	}
	if (!rc)
		rc = touch_devs(P, &tch, &ntch, &cap_tch, P->tobuf, m.off[m.n]);
	size_t nfin = 0;
	const uint32_t *fin = final ? tp_placement_devices(final, &nfin) : NULL;
	if (!rc)
		rc = touch_devs(P, &tch, &ntch, &cap_tch, fin, nfin);
	if (rc)
		goto out;
	frag_after(P, tch, &ntch, fin, nfin);
	if ((rc = build_steps(P, S, n, &m, ord, final, d)))
		goto out;
	*out = OUT_OK;
out:
	tp_cluster_rollback(c, sp);
	if (*out == OUT_OK) {
		d->frag = frag_gain(P, tch, ntch);
		d->final = final;
		final = NULL;
	} else {
		draft_clear(P->a, d);
	}
	if (rc)
		draft_clear(P->a, d);
	tp_placement_destroy(pl);
	tp_placement_destroy(final);
	tp_free(P->a, tch);
	tp_free(P->a, ord);
	migs_free(P, &m);
	return rc;
}

/* Whether the request fits inside the candidate once the jobs S have left. */
static int fit_check(struct planner *P, const uint32_t *S, uint32_t n, bool *fits)
{
	struct tp_cluster *c = P->c;
	size_t sp;
	int rc;
	*fits = false;
	if ((rc = tp_cluster_savepoint(c, &sp)))
		return rc;
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = tp_cluster_release(c, P->scan.jobs[S[i]].j->id);
	if (!rc) {
		tp_placement *pl = NULL;
		rc = tp_place(c, P->rreq, &pl);
		*fits = rc == 0;
		if (rc != TP_ENOMEM)
			rc = 0;
		tp_placement_destroy(pl);
	}
	tp_cluster_rollback(c, sp);
	return rc;
}

/* ---- keeping the best plan and the reasons ----------------------------------------------------
 */

/* The bound a set must not exceed to matter: the limit, and the best plan's cost. */
static int64_t cost_bound(const struct planner *P)
{
	int64_t b = P->max_cost;
	if (P->have_best && P->best.cost < b)
		b = P->best.cost;
	return b;
}

static void offer(struct planner *P, struct draft *d)
{
	if (!P->have_best || draft_cmp(d, &P->best) < 0) {
		draft_clear(P->a, &P->best);
		P->best = *d;
		P->have_best = true;
		*d = (struct draft){0};
	} else {
		draft_clear(P->a, d);
	}
}

static void note_nohome(struct planner *P, const struct tp_job_impl *j)
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

static void note_moves(struct planner *P, uint32_t moves)
{
	if (!P->diag.moves || moves < P->diag.moves_needed) {
		P->diag.moves = true;
		P->diag.moves_needed = moves;
	}
}

/* The candidate cannot hold the request even with every movable job gone: remember the one
 * short of the fewest devices, and its biggest immovable job. */
static void note_blocked(struct planner *P, uint64_t shortfall)
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
static bool candidate_possible(struct planner *P, uint64_t *shortfall)
{
	struct cscan *s = &P->scan;
	tally_reset(P);
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can)
			tally_job(P, k, +1);
	bool ok = tally_enough(P);
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
		if ((rc = append_outside(P)))
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
	int64_t bound = cost_bound(P);
	bool over_moves = false, over_cost = false;
	uint32_t min_moves_over = UINT32_MAX;
	for (uint32_t mask = 1; mask < nsub; mask++) {
		int64_t cost = 0;
		uint32_t devices = 0;
		for (uint32_t i = 0; i < m; i++)
			if (mask >> i & 1) {
				cost = cost_add(cost, s->jobs[mv[i]].w);
				devices += s->jobs[mv[i]].j->ndev;
			}
		uint32_t moves = popcount32(mask);
		tally_reset(P);
		for (uint32_t i = 0; i < m; i++)
			if (mask >> i & 1)
				tally_job(P, mv[i], +1);
		if (!tally_enough(P))
			continue;
		if (moves > P->max_moves) {
			over_moves = true;
			if (moves < min_moves_over)
				min_moves_over = moves;
			continue;
		}
		if (cost > bound) {
			over_cost |= cost > P->max_cost;
			continue;
		}
		subs[ns++] = (struct sub){cost, moves, devices, mask};
	}
	if (ns > 1)
		qsort(subs, ns, sizeof *subs, sub_cmp);
	bool found = false;
	uint32_t S[32];
	for (size_t x = 0; x < ns && !found; x++) {
		if (subs[x].cost > cost_bound(P))
			break;
		uint32_t n = 0;
		for (uint32_t i = 0; i < m; i++)
			if (subs[x].mask >> i & 1)
				S[n++] = mv[i];
		struct draft d = {0};
		int out;
		const struct tp_job_impl *nh;
		if ((rc = try_subset(P, S, n, &d, &out, &nh)))
			break;
		if (out == OUT_OK) {
			offer(P, &d);
			found = true;
		} else if (out == OUT_NOHOME) {
			note_nohome(P, nh);
		}
	}
	if (!found && over_moves)
		note_moves(P, min_moves_over);
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
	const struct layer *ly = &s->ly[li];
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
	sort_jobs(P, tmp, cnt, by_rate);
	return cnt;
}

/* For requests made of groups inside one node: the node that gains a group at the least cost
 * per group gained (counting only groups still missing), and the jobs to move for it
 * (appended to S). False when no node can. */
static bool pick_node(struct planner *P, unsigned li, const struct by_dom *b, const bool *inS,
                      const bool *banned, uint32_t *S, uint32_t *nS)
{
	struct cscan *s = &P->scan;
	const struct layer *ly = &s->ly[li];
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
			tally_job(P, tmp[used], +1);
			w = cost_add(w, s->jobs[tmp[used]].w);
			used++;
		}
		uint64_t g = ly->units - u0;
		for (uint32_t x = used; x-- > 0;)
			tally_job(P, tmp[x], -1);
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
	int rc = append_outside(P);
	if (rc)
		return rc;
	uint32_t n0 = s->ninside, nout = s->njobs - n0, cnt = 0;
	if (grow_u32(P->a, &P->u32b, &P->cap_b, nout))
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
		acc = cost_add(acc, s->jobs[cand[take]].w);
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

/* Greedy fill, then reverse deletion, then the simulation; a job with no home is kept in place
 * and the fill starts again (a few times). */
static int greedy_search(struct planner *P)
{
	struct cscan *s = &P->scan;
	uint32_t n = s->njobs;
	size_t all = n + P->c->njobs + 1; /* room for the jobs elsewhere, once appended */
	bool *inS = tp_calloc(P->a, all, sizeof *inS);
	bool *banned = tp_calloc(P->a, all, sizeof *banned);
	struct by_dom bd = {0};
	uint32_t *S = tp_mallocn(P->a, all, sizeof *S);
	int rc = 0;
	if (!inS || !banned || !S || grow_u32(P->a, &P->u32a, &P->cap_a, n) ||
	    grow_u32(P->a, &P->u32b, &P->cap_b, n)) {
		rc = TP_ENOMEM;
		goto out;
	}
	const struct layer *nodely = NULL;
	unsigned nodeli = 0;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (s->ly[i].level == tp_node_level(P->t)) {
			nodely = &s->ly[i];
			nodeli = i;
		}
	if (nodely && (rc = by_dom_build(P, nodeli, &bd)))
		goto out;
	bool fewest = false; /* fill by usable devices (fewest jobs) instead of cost per device */
	for (int attempt = 0; attempt < 5; attempt++) {
		uint32_t *ord = P->u32a, nord = 0, pos = 0, nS = 0;
		for (uint32_t k = 0; k < n; k++) {
			inS[k] = false;
			if (s->jobs[k].can && !banned[k])
				ord[nord++] = k;
		}
		sort_jobs(P, ord, nord, fewest ? by_size : by_rate);
		uint32_t amax = 0;
		for (uint32_t x = 0; x < nord; x++)
			if (s->jobs[ord[x]].a > amax)
				amax = s->jobs[ord[x]].a;
		tally_reset(P);
		bool fits = false;
		for (;;) {
			if (tally_enough(P)) {
				if ((rc = fit_check(P, S, nS, &fits)))
					goto out;
				if (fits)
					break;
			}
			uint32_t before = nS;
			if (nodely && nodely->units < nodely->need && !fewest)
				pick_node(P, nodeli, &bd, inS, banned, S, &nS);
			if (nS == before) {
				while (pos < nord && inS[ord[pos]])
					pos++;
				if (pos == nord)
					break;
				uint32_t k = fewest ? ord[pos]
				                    : pick_covering(P, ord, pos, nord, inS, amax);
				S[nS++] = k;
				if (k == ord[pos])
					pos++;
			}
			for (uint32_t x = before; x < nS; x++) {
				inS[S[x]] = true;
				tally_job(P, S[x], +1);
			}
		}
		if (!fits)
			goto out;
		/* reverse deletion: the most expensive first */
		uint32_t *rev = P->u32b;
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
			tally_job(P, k, -1);
			inS[k] = false;
			bool still = false;
			if (tally_enough(P)) {
				uint32_t m = 0;
				for (uint32_t x = 0; x < nS; x++)
					if (inS[S[x]])
						P->u32c[m++] = S[x];
				if ((rc = fit_check(P, P->u32c, m, &still)))
					goto out;
			}
			if (!still) {
				tally_job(P, k, +1);
				inS[k] = true;
			}
		}
		uint32_t m = 0;
		int64_t cost = 0;
		for (uint32_t x = 0; x < nS; x++)
			if (inS[S[x]]) {
				S[m++] = S[x];
				cost = cost_add(cost, s->jobs[S[x]].w);
			}
		if (m > P->max_moves) {
			note_moves(P, m);
			if (fewest)
				goto out;
			fewest = true; /* once more, taking the biggest jobs first */
			continue;
		}
		if (cost > cost_bound(P)) {
			if (cost > P->max_cost)
				P->diag.cost = true;
			goto out;
		}
		const struct tp_job_impl *nh = NULL;
		for (int fix = 0; fix < 4; fix++) {
			struct draft d = {0};
			int res;
			if ((rc = try_subset(P, S, m, &d, &res, &nh)))
				goto out;
			if (res == OUT_OK) {
				offer(P, &d);
				goto out;
			}
			if (res != OUT_NOHOME)
				goto out;
			/* make room elsewhere for the job with no home, if that stays in bounds */
			uint32_t before = m;
			if ((rc = add_room_makers(P, nh, S, &m)))
				goto out;
			cost = 0;
			for (uint32_t x = 0; x < m; x++)
				cost = cost_add(cost, s->jobs[S[x]].w);
			if (m == before || m > P->max_moves || cost > cost_bound(P))
				break;
		}
		note_nohome(P, nh);
		for (uint32_t k = 0; k < s->njobs; k++) {
			s->jobs[k].force_preempt = false;
			if (s->jobs[k].j == nh)
				banned[k] = true;
		}
	}
out:
	by_dom_free(P, &bd);
	tp_free(P->a, inS);
	tp_free(P->a, banned);
	tp_free(P->a, S);
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
			lb = cost_add(lb, cj->w);
			left -= cj->a;
		} else {
			lb = cost_add(lb, (int64_t)((long double)cj->w * left / cj->a));
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
	if (tally_enough(P)) {
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
		if ((rc = try_subset(P, b->S, b->nS, &d, &out, &nh)))
			return rc;
		if (out == OUT_OK) {
			offer(P, &d);
			return 0;
		}
		if (out == OUT_NOHOME)
			note_nohome(P, nh);
		if (out == OUT_CYCLE)
			return 0;
		/* no fit after all, or a migrant with no home: more jobs may help */
	}
	if (i == b->n || b->nS + 1 > P->max_moves)
		return 0;
	int64_t rest = bnb_rest(P, b, i);
	if (rest == COST_NONE || cost_add(b->cost, rest) > cost_bound(P))
		return 0;
	uint32_t k = b->ord[i];
	const struct cjob *cj = &P->scan.jobs[k];
	int64_t c0 = b->cost;
	tally_job(P, k, +1);
	b->S[b->nS++] = k;
	b->cost = cost_add(c0, cj->w);
	b->devices += cj->j->ndev;
	rc = bnb_dfs(P, b, i + 1);
	b->devices -= cj->j->ndev;
	b->cost = c0;
	b->nS--;
	tally_job(P, k, -1);
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
	sort_jobs(P, b.ord, b.n, by_rate);
	if (b.n > BNB_JOBS)
		b.n = BNB_JOBS;
	/* on a small cluster, the movable jobs elsewhere last: stopping one can make room for a
	 * migrant (as in the exact search) */
	if (s->level >= 0 && P->c->njobs <= 2 * (size_t)TP_DEFRAG_EXACT_MAX) {
		if ((rc = append_outside(P)))
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
		sort_jobs(P, b.ord + n0, b.n - n0, by_index);
	}
	tally_reset(P);
	rc = bnb_dfs(P, &b, 0);
out:
	tp_free(P->a, b.ord);
	tp_free(P->a, b.S);
	return rc;
}

/* Search the scanned candidate for its cheapest plan, offering it to P->best. */
static int evaluate_candidate(struct planner *P)
{
	struct cscan *s = &P->scan;
	P->stats.evaluated++;
	bool empty;
	int rc = restrict_request(P, &empty);
	if (rc || empty)
		return rc;
	if (grow_u32(P->a, &P->u32c, &P->cap_c, s->njobs))
		return TP_ENOMEM;
	if (s->nmov <= P->exact_max && s->nmov <= 20)
		return exact_search(P);
	if ((rc = greedy_search(P)))
		return rc;
	return bnb_search(P);
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
	int rc = scan_jobs(P, P->level, dom, false);
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
		note_blocked(P, P->count - cap);
		return 0;
	}
	return lower_bounds(P);
}

/* The full scan of a domain about to be searched, with the shape check (groups, slices). */
static int scan_for_search(struct planner *P, uint32_t dom, bool *usable)
{
	int rc = scan_candidate(P, P->level, dom);
	if (rc)
		return rc;
	uint64_t shortfall;
	*usable = candidate_possible(P, &shortfall);
	if (!*usable)
		note_blocked(P, shortfall);
	return 0;
}

/* The cheapest movable job's cost per device: the rate no candidate can beat. */
static int64_t cheapest_rate(const struct planner *P)
{
	int64_t best = COST_NONE;
	for (size_t i = 0; i < P->c->njobs; i++) {
		const struct tp_job_impl *j = P->c->jobs[i];
		if (!job_can(P, j))
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
			    (usable && (rc = evaluate_candidate(P))))
				break;
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
			if (cheap > cost_bound(P))
				more = false;
		}
		if (h.n && (!more || h.v[0].lb <= cheap)) {
			struct pending e = heap_pop(&h);
			if (pending_pruned(P, &e))
				continue;
			bool usable;
			if ((rc = scan_for_search(P, e.dom, &usable)) ||
			    (usable && (rc = evaluate_candidate(P))))
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
	qsort(doms, j->ndev, sizeof *doms, cmp_u32);
	int rc = 0;
	for (uint32_t i = 0; i < j->ndev && !rc; i++) {
		if (i && doms[i] == doms[i - 1])
			continue;
		/* the candidate-level domains inside this colocate domain */
		uint32_t e0 = doms[i], ne = 1;
		if ((unsigned)P->level > cl)
			desc_range(t, (int)cl, doms[i], (unsigned)P->level, &e0, &ne);
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
				rc = evaluate_candidate(P);
		}
	}
	tp_free(P->a, doms);
	return rc;
}

static int search(struct planner *P)
{
	if (P->level < 0) {
		bool usable;
		int rc = scan_for_search(P, 0, &usable);
		if (rc || !usable)
			return rc;
		return evaluate_candidate(P);
	}
	if (P->coloc)
		return search_colocated(P);
	return search_domains(P);
}

/* ---- messages ------------------------------------------------------------------------------ */

/* "rack b0/r3" or "the cluster". */
static void dom_phrase(const struct planner *P, int level, uint32_t dom, char *buf, size_t len)
{
	if (level < 0) {
		snprintf(buf, len, "the cluster");
		return;
	}
	char path[256];
	tp_topology_domain_path(P->t, (unsigned)level, dom, path, sizeof path);
	snprintf(buf, len, "%s %s", P->t->lv[level].name, path);
}

/* Why no plan was found, from what the candidates ran into (limits first). */
static void explain(const struct planner *P, char *msg, const struct draft *unlimited)
{
	char where[300], who[300];
	if (unlimited) {
		if (P->max_cost != COST_NONE && unlimited->cost > P->max_cost) {
			tp_seterr(msg, TP_ENOPLAN,
			          "the cheapest plan costs %g s, over max_cost_s %g",
			          unlimited->cost_s, P->pol.max_cost_s);
			return;
		}
		tp_seterr(msg, TP_ENOPLAN, "the cheapest plan needs %u moves, max_moves is %u",
		          unlimited->moves, P->max_moves);
		return;
	}
	const struct diag *d = &P->diag;
	if (d->nohome && d->nohome_less_local) {
		dom_phrase(P, d->nohome_level, d->nohome_dom, where, sizeof where);
		char spans[200];
		size_t at = 0;
		for (unsigned l = 0; l <= tp_node_level(P->t) && at < sizeof spans; l++)
			at += (size_t)snprintf(spans + at, sizeof spans - at, "%s%s %u", l ? ", " : "",
			                       P->t->lv[l].name, d->nohome_span[l]);
		tp_seterr(msg, TP_ENOPLAN,
		          "%s would need job %s moved, but no free devices keep it as local as it "
		          "sits (domains it spans: %s) and it may not be preempted",
		          where, d->nohome_job->id, spans);
		return;
	}
	if (d->nohome) {
		dom_phrase(P, d->nohome_level, d->nohome_dom, where, sizeof where);
		tp_seterr(
		        msg, TP_ENOPLAN,
		        "%s would need job %s moved, but it has nowhere else to go and may not be "
		        "preempted",
		        where, d->nohome_job->id);
		return;
	}
	if (d->block && d->block_job) {
		dom_phrase(P, d->block_level, d->block_dom, where, sizeof where);
		job_blocker(P, d->block_job, who, sizeof who);
		tp_seterr(msg, TP_ENOPLAN, "%s would need %s moved", where, who);
		return;
	}
	if (P->level >= 0)
		tp_seterr(msg, TP_ENOPLAN,
		          "no %s can hold the request even with every movable job moved",
		          P->t->lv[P->level].name);
	else
		tp_seterr(msg, TP_ENOPLAN,
		          "the cluster cannot hold the request even with every movable job moved");
}

/* ---- the plan object ----------------------------------------------------------------------- */

static tp_plan *plan_new(const struct tp_cluster *c)
{
	tp_plan *p = tp_calloc(&c->alloc, 1, sizeof *p);
	if (!p)
		return NULL;
	p->alloc = c->alloc;
	p->t = c->t;
	p->topology_id = tp_topology_identity(c->t);
	return p;
}

void tp_plan_destroy(tp_plan *p)
{
	if (!p)
		return;
	tp_allocator a = p->alloc;
	steps_free(&a, p->steps, p->nsteps);
	tp_placement_destroy(p->placement);
	tp_request_free(&a, p->req);
	tp_free(&a, p);
}

/* Move a draft's steps and placement into the plan. */
static void plan_take(tp_plan *p, struct draft *d)
{
	p->steps = d->steps;
	p->nsteps = d->n;
	p->moved_jobs = d->moves;
	p->moved_devices = d->moved_devices;
	p->cost_s = d->cost_s;
	p->placement = d->final;
	*d = (struct draft){0};
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

static void planner_init(struct planner *P, struct tp_cluster *c, const tp_defrag_policy *pol,
                         const struct tp_defrag_knobs *k)
{
	*P = (struct planner){0};
	P->c = c;
	P->t = c->t;
	P->a = &c->alloc;
	P->pol = policy_copy(pol);
	P->exact_max = k ? k->exact_max : TP_DEFRAG_EXACT_MAX;
	policy_limits(P);
}

/* Run the search; without a plan, run it again without the limits to say which one blocked. */
static int plan_or_explain(struct planner *P, tp_plan *p)
{
	int rc = search(P);
	if (rc)
		return rc;
	if (P->have_best) {
		plan_take(p, &P->best);
		P->have_best = false;
		return 0;
	}
	if (P->max_cost != COST_NONE || P->max_moves != UINT32_MAX) {
		struct diag keep = P->diag;
		int64_t mc = P->max_cost;
		uint32_t mm = P->max_moves;
		P->max_cost = COST_NONE;
		P->max_moves = UINT32_MAX;
		rc = search(P);
		P->max_cost = mc;
		P->max_moves = mm;
		if (rc)
			return rc;
		if (P->have_best) {
			explain(P, p->errmsg, &P->best);
			p->status = TP_ENOPLAN;
			return TP_ENOPLAN;
		}
		P->diag = keep;
	}
	explain(P, p->errmsg, NULL);
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
	tp_plan *p = plan_new(c);
	if (!p)
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory creating a plan");
	int rc = policy_check(policy, p->errmsg);
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
		if (draft_push(&c->alloc, &d, TP_STEP_PLACE, tp_placement_job(pl), NULL, 0, devs,
		               n)) {
			draft_clear(&c->alloc, &d); /* the step array may have grown before the failure */
			tp_placement_destroy(pl);
			tp_plan_destroy(p);
			return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
		}
		d.final = pl;
		plan_take(p, &d);
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
	planner_init(&P, c, policy, knobs);
	P.r = r;
	rc = planner_request(&P, p->errmsg);
	if (!rc)
		rc = plan_or_explain(&P, p);
	if (stats)
		*stats = P.stats;
	planner_fini(&P);
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
		int rc = draft_push(a, all, s->action, s->job, s->from, s->nfrom, s->to, s->nto);
		if (rc)
			return rc;
	}
	all->cost = cost_add(all->cost, d->cost);
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
		if ((rc = scan_candidate(P, (int)level, dom)))
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
					note_blocked(P, cj->a);
			}
			cost = cost_add(cost, cj->w);
		}
		if (movable)
			cc[n++] = (struct ccand){cost, s->njobs, s->free, dom};
	}
	qsort(cc, n, sizeof *cc, ccand_cmp);
	for (size_t i = 0; i < n && !rc && !*found; i++) {
		if (cost_add(all->cost, cc[i].cost) > P->max_cost) {
			P->diag.cost = true;
			break;
		}
		if (all->moves + cc[i].moves > P->max_moves) {
			note_moves(P, all->moves + cc[i].moves);
			continue;
		}
		if ((rc = scan_candidate(P, (int)level, cc[i].dom)))
			break;
		uint32_t *S = P->u32c;
		if ((rc = grow_u32(P->a, &P->u32c, &P->cap_c, P->scan.njobs)))
			break;
		S = P->u32c;
		for (uint32_t k = 0; k < P->scan.njobs; k++)
			S[k] = k;
		int out;
		const struct tp_job_impl *nh;
		if ((rc = try_subset(P, S, P->scan.njobs, d, &out, &nh)))
			break;
		if (out == OUT_OK)
			*found = true;
		else if (out == OUT_NOHOME)
			note_nohome(P, nh);
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
		if (grow_u32(P->a, &P->holdbuf, &P->cap_hold, d1 - d0))
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
		explain(P, why, NULL);
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
			draft_clear(P->a, &d);
			break;
		}
		if ((rc = draft_append(P->a, all, &d)) || (rc = replay_steps(P, &d)) ||
		    (rc = hold_free_domains(P, level))) {
			draft_clear(P->a, &d);
			break;
		}
		draft_clear(P->a, &d);
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
		cost = cost_add(cost, cost_of(jbuf[k]->checkpoint_s, jbuf[k]->ndev));
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
			                                    .w = cost_of(j->checkpoint_s, j->ndev),
			                                    .rate = INFINITY,
			                                    .can = (uint8_t)job_can(P, j)};
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
	rc = try_subset(P, S, s->njobs, d, &res, &nh);
	P->cr = NULL;
	P->ncr = 0;
	if (!rc && res == OUT_OK)
		*found = true;
	else if (!rc && res == OUT_NOHOME)
		note_nohome(P, nh);
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
		if ((rc = scan_candidate(P, (int)level, dom)))
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
			note_moves(P, cs.moves);
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
		draft_clear(P->a, &d);
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

static int compact_unguarded(tp_cluster *c, const char *level, uint32_t ndomains,
                             const tp_defrag_policy *policy, tp_plan **out);

int tp_defrag_compact(tp_cluster *c, const char *level, uint32_t ndomains,
                      const tp_defrag_policy *policy, tp_plan **out)
{
	if (out)
		*out = NULL;
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, compact_unguarded(c, level, ndomains, policy, out));
}

static int compact_unguarded(tp_cluster *c, const char *level, uint32_t ndomains,
                             const tp_defrag_policy *policy, tp_plan **out)
{
	if (!out)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "out is NULL") : TP_EINVAL;
	*out = NULL;
	if (!c || !level)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "level is NULL") : TP_EINVAL;
	if (!policy)
		policy = &default_policy;
	tp_plan *p = plan_new(c);
	if (!p)
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory creating a plan");
	int li = tp_topology_level_index(c->t, level);
	int rc = policy_check(policy, p->errmsg);
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
		*out = p;
		return tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	}
	struct planner P;
	planner_init(&P, c, policy, NULL);
	P.compact = true;
	P.level = li;
	P.flevel = (unsigned)li;
	uint32_t have = fully_free_count(&P, (unsigned)li);
	struct draft all = {0};
	uint32_t got = 0;
	char why[TP_ERRMSG_LEN] = "";
	rc = 0;
	bool exact = false;
	if (have < ndomains)
		rc = compact_exact(&P, ndomains - have, &all, &exact);
	if (exact) {
		got = ndomains - have;
	} else if (!rc && have < ndomains) {
		draft_clear(&c->alloc, &all);
		P.diag = (struct diag){0};
		rc = compact_rounds(&P, ndomains - have, &all, &got, why);
	}
	if (!rc && have + got < ndomains)
		rc = tp_seterr(p->errmsg, TP_ENOPLAN, "only %u of %u %s domains can be freed: %s",
		               have + got, ndomains, level, why);
	planner_fini(&P);
	if (rc == TP_ENOMEM) {
		draft_clear(&c->alloc, &all);
		tp_plan_destroy(p);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory planning");
	}
	if (!rc)
		plan_take(p, &all);
	draft_clear(&c->alloc, &all);
	p->status = rc;
	*out = p;
	if (rc)
		tp_seterr(c->errmsg, rc, "%s", p->errmsg);
	return rc;
}

/* ---- accessors ------------------------------------------------------------------------------ */

int tp_plan_status(const tp_plan *p)
{
	return p ? p->status : TP_EINVAL;
}

const char *tp_plan_errmsg(const tp_plan *p)
{
	return p ? p->errmsg : "";
}

size_t tp_plan_step_count(const tp_plan *p)
{
	return p && p->status == 0 ? p->nsteps : 0;
}

int tp_plan_step(const tp_plan *p, size_t i, tp_step_action *action, const char **job,
                 const uint32_t **from, size_t *nfrom, const uint32_t **to, size_t *nto)
{
	if (!p || p->status != 0 || i >= p->nsteps)
		return TP_EINVAL;
	const struct pstep *s = &p->steps[i];
	if (action)
		*action = s->action;
	if (job)
		*job = s->job;
	if (from)
		*from = s->from;
	if (nfrom)
		*nfrom = s->nfrom;
	if (to)
		*to = s->to;
	if (nto)
		*nto = s->nto;
	return 0;
}

uint32_t tp_plan_moved_jobs(const tp_plan *p)
{
	return p && p->status == 0 ? p->moved_jobs : 0;
}

uint32_t tp_plan_moved_devices(const tp_plan *p)
{
	return p && p->status == 0 ? p->moved_devices : 0;
}

double tp_plan_cost_s(const tp_plan *p)
{
	return p && p->status == 0 ? p->cost_s : 0.0;
}

const tp_placement *tp_plan_placement(const tp_plan *p)
{
	return p && p->status == 0 ? p->placement : NULL;
}

/* ---- carrying a plan out --------------------------------------------------------------------- */

static void dev_label(const struct tp_topology *t, uint32_t dev, char *buf, size_t len)
{
	uint32_t node = t->dev_node[dev];
	snprintf(buf, len, "%s/%u", t->lv[tp_node_level(t)].dname[node],
	         (unsigned)(dev - t->dev_first[node]));
}

/* The job still holds exactly `from`, in that order. */
static int check_holds(struct tp_cluster *c, const struct pstep *s, size_t i, uint32_t *slot)
{
	*slot = tp_cluster_job_slot(c, s->job);
	if (*slot == TP_NO_JOB)
		return tp_seterr(c->errmsg, TP_EINVAL, "step %zu: job %s is no longer running", i,
		                 s->job);
	const struct tp_job_impl *j = c->jobs[*slot];
	if (j->ndev != s->nfrom || memcmp(j->devs, s->from, s->nfrom * sizeof *s->from))
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "step %zu: job %s no longer holds the %u devices the plan moves",
		                 i, s->job, s->nfrom);
	return 0;
}

/* Each target is free, or the job's own healthy device (a migrated job may restart on its own
 * devices, even cordoned ones). */
static int check_targets(struct tp_cluster *c, const struct pstep *s, size_t i, uint32_t slot)
{
	char name[TP_MAX_NAME + 16];
	for (uint32_t x = 0; x < s->nto; x++) {
		uint32_t dev = s->to[x];
		if (dev >= c->t->ndevices)
			return tp_seterr(c->errmsg, TP_EINVAL,
			                 "step %zu: device %u is out of range", i, dev);
		bool own = slot != TP_NO_JOB && c->dev_job[dev] == slot &&
		           !(c->dstate[dev] & TP_DS_DOWN);
		if (own || tp_dev_free(c, dev))
			continue;
		dev_label(c->t, dev, name, sizeof name);
		const char *why = c->dev_job[dev] != TP_NO_JOB  ? "is held by job"
		                  : c->dstate[dev] & TP_DS_DOWN ? "is down"
		                                                : "is cordoned";
		return tp_seterr(c->errmsg, TP_EINVAL, "step %zu: target %s %s%s%s", i, name, why,
		                 c->dev_job[dev] != TP_NO_JOB ? " " : "",
		                 c->dev_job[dev] != TP_NO_JOB ? c->jobs[c->dev_job[dev]]->id : "");
	}
	return 0;
}

static int apply_place(tp_cluster *c, const tp_plan *p, const struct pstep *s, size_t i,
                       const tp_job_options *opts)
{
	int rc = check_targets(c, s, i, TP_NO_JOB);
	if (rc)
		return rc;
	tp_placement *pl = NULL;
	rc = tp_place(c, p->req, &pl);
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		return tp_seterr(c->errmsg, rc, "out of memory placing %s", s->job);
	}
	size_t n = 0;
	const uint32_t *devs = rc == 0 ? tp_placement_devices(pl, &n) : NULL;
	if (rc || n != s->nto || memcmp(devs, s->to, n * sizeof *devs)) {
		tp_placement_destroy(pl);
		return tp_seterr(
		        c->errmsg, TP_EINVAL,
		        "step %zu: the cluster no longer matches the plan: %s would not be "
		        "placed on the planned devices",
		        i, s->job);
	}
	rc = tp_commit(c, pl, opts);
	tp_placement_destroy(pl);
	return rc;
}

static int apply_step_unguarded(tp_cluster *c, const tp_plan *p, size_t i,
                                const tp_job_options *opts);

int tp_plan_apply_step(tp_cluster *c, const tp_plan *p, size_t i, const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, apply_step_unguarded(c, p, i, opts));
}

static int apply_step_unguarded(tp_cluster *c, const tp_plan *p, size_t i,
                                const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
	if (!p)
		return tp_seterr(c->errmsg, TP_EINVAL, "plan is NULL");
	if (p->status != 0)
		return tp_seterr(c->errmsg, TP_EINVAL, "the plan failed (%s): it has no steps",
		                 tp_err_name(p->status));
	if (p->topology_id != tp_topology_identity(c->t))
		return tp_seterr(c->errmsg, TP_EINVAL, "the plan was made for another topology");
	if (i >= p->nsteps)
		return tp_seterr(c->errmsg, TP_EINVAL, "step %zu: the plan has %zu steps", i,
		                 p->nsteps);
	if (i != p->next && i != 0) /* step 0 starts over (a replay on a rolled-back cluster) */
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "step %zu applied out of order: step %zu is next", i, p->next);
	const struct pstep *s = &p->steps[i];
	uint32_t slot = TP_NO_JOB;
	int rc;
	switch (s->action) {
	case TP_STEP_MIGRATE:
		if ((rc = check_holds(c, s, i, &slot)) || (rc = check_targets(c, s, i, slot)))
			return rc;
		rc = tp_cluster_rebind_impl(c, slot, s->to, s->nto);
		break;
	case TP_STEP_PREEMPT:
		if ((rc = check_holds(c, s, i, &slot)))
			return rc;
		rc = tp_cluster_release(c, s->job);
		break;
	default:
		rc = apply_place(c, p, s, i, opts);
		break;
	}
	if (rc == 0)
		((tp_plan *)p)->next = i + 1; /* the plan's cursor: not part of its meaning */
	return rc;
}
