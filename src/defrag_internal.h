/* SPDX-License-Identifier: MIT */
/*
 * The defragmentation planner's internals, shared by its files: defrag.c (the entry points and
 * the walk over candidate domains), defrag_scan.c (scanning a candidate, tallies, lower bounds),
 * defrag_migrate.c (simulating a set of jobs: homes, locality, steps), defrag_search.c (the
 * exact, greedy and branch-and-bound searches), defrag_plan.c (the tp_plan object and carrying
 * it out), defrag_homes.c (a bound on a migrant's home, from counts) and defrag_compact.c
 * (compaction). Private: tests reach it through tp_internal_dep.
 */
#ifndef TP_DEFRAG_INTERNAL_H
#define TP_DEFRAG_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster_impl.h"
#include "request.h"

/* Default of tp_defrag_knobs.exact_max: a candidate domain with at most this many movable jobs
 * is searched exactly (every subset, cheapest first); above it, greedily. */
#define TP_DEFRAG_EXACT_MAX 12u

/* Most domains a plan names as its targets (the target-set search works on at most this many
 * sub-domains of a candidate). */
#define TP_DEFRAG_MAX_TARGETS 64u

/* Knobs of the planner for the tests; the public calls use the defaults. */
struct tp_defrag_knobs {
	unsigned exact_max; /* exact subset search up to this many movable jobs (0: greedy only) */
	bool no_room_bound; /* no defrag_home_room (the tests compare plans with and without) */
	bool no_joint_bound; /* no defrag_homes_joint (the same) */
	bool no_moves_bound; /* no defrag_moves_over (the same) */
	bool no_space_bound; /* no defrag_space_over (the same) */
	bool no_shape_bound; /* no shape bound in the target search (defrag_targets.c; the same) */
	uint64_t *branches;  /* when set: the depth-first searches' branches (their work) */
};

/* tp_defrag_plan with knobs (NULL: the defaults) and optional figures (as tp_plan_stats). */
int tp_defrag_plan_ex(tp_cluster *c, const tp_request *r, const tp_defrag_policy *policy,
                      const struct tp_defrag_knobs *knobs, struct tp_defrag_stats *stats,
                      tp_plan **out);


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

/* Returned (as a positive rc, never to a caller) once the work budget stops the search: it
 * unwinds like an error, through every rollback, up to the entry point. */
#define DEFRAG_STOP 1

#define CAN_MIGRATE 0x1u

#define CAN_PREEMPT 0x2u

enum outcome { OUT_OK, OUT_NOFIT, OUT_NOHOME, OUT_CYCLE };

static inline int64_t defrag_cost_of(double checkpoint_s, uint32_t ndev)
{
	double v = checkpoint_s * (double)ndev * 1e6;
	if (!(v < (double)COST_CAP))
		return COST_CAP;
	return (int64_t)(v + 0.5); /* v >= 0: rounds to nearest, without a libm call */
}

static inline int64_t defrag_cost_add(int64_t a, int64_t b)
{
	return a > COST_CAP - b ? COST_CAP : a + b;
}

/* The free counts of one level's domains that lie outside the candidate (neither in it nor
 * holding it), largest first, and their running sums: the part of the joint bound that is
 * the same for every set of one candidate in one cluster state (defrag_homes.c). */
struct joint_static {
	bool ok;
	uint64_t generation; /* the cluster's, when made */
	int level;           /* the candidate's */
	uint32_t dom;
	uint32_t n;
	uint32_t *v;   /* [n] */
	uint32_t *d;   /* [n] the domain of each */
	uint64_t *sum; /* [n + 1]: sum[i] the first i of v added up */
	size_t cap_v, cap_d, cap_sum;
};

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
	/* the domains the plan drains (tp_plan_targets): the target set of the target-set
	 * search, else the candidate domain (none for the whole cluster) */
	int tlevel;
	uint32_t ntgt;
	uint32_t tgt[TP_DEFRAG_MAX_TARGETS];
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
	uint64_t cluster_lineage; /* tp_cluster_lineage() of the cluster it was made on: it is
	                           * applied there and on that cluster's copies only */
	uint64_t key;    /* the steps' fingerprint: which plan a cluster's cursor follows */
	tp_defrag_stats stats; /* the work the call did */
	int64_t lb;            /* lower bound on the cost of any plan, microseconds */
	int64_t cost_key;      /* the plan's cost in microseconds */
	int tlevel;            /* the domains the plan drains: level, ids */
	uint32_t ntgt;
	uint32_t tgt[TP_DEFRAG_MAX_TARGETS];
};

/* A job on a candidate. */
struct cjob {
	struct tp_job_impl *j;
	uint32_t slot; /* valid while scanning only */
	uint32_t a;    /* its devices in the candidate that the request could use once it left */
	uint32_t d0;   /* those devices: scan.jdev[d0 .. d0 + a) */
	uint32_t r0, nr; /* their runs of one domain per layer: scan.jrun[r0 .. r0 + nr) */
	int64_t w;     /* cost of moving it */
	double rate;   /* w / a (infinite when a is 0) */
	uint8_t can;   /* CAN_MIGRATE | CAN_PREEMPT, 0: it stays */
	bool outside;  /* not on the candidate: moving it only makes room for migrants */
	bool force_preempt; /* a room maker: preempted, not migrated */
	bool placed;   /* deep and span are known (the home bounds, defrag_migrate.c) */
	int8_t deep;   /* the deepest level one domain of which holds it, -1: none */
	uint32_t span[TP_MAX_LEVELS]; /* the domains of each level it spans */
};

/* Units the request needs in the candidate's sub-domains of one level: `need` runs of `size`
 * devices, each inside one domain (its groups, or one layer of slices). */
struct scan_layer {
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
	/* each job's devices as runs of one domain of a layer, so that a tally adds a run at a
	 * time (defrag_tally_job): a job's devices sit in few domains */
	struct jrun {
		uint32_t layer, e, n; /* e TP_NONE: the units of domains only this job holds */
	} *jrun;
	size_t cap_jrun;
	uint32_t *runcnt;  /* scratch of build_runs: jobs with a run in each layer's domain */
	size_t cap_runcnt;
	unsigned nlayers;
	struct scan_layer ly[TP_MAX_LEVELS];
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
	bool room_bound; /* sets ruled out by defrag_home_room */
	bool joint_bound; /* sets ruled out by defrag_homes_joint */
	bool moves_bound; /* candidates passed by on defrag_moves_over */
	bool shape_bound; /* the target search bounds the units still missing (unit_rest) */
	bool space_bound; /* candidates passed by on defrag_space_over */
	uint64_t branches; /* of the depth-first searches (tp_defrag_knobs.branches) */
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
	uint32_t *roombuf, *roomvals; /* defrag_home_room: a set's nodes, a domain's room */
	size_t cap_room, cap_roomvals;
	uint32_t *nodecount; /* defrag_sort_nodes: devices per node of a range */
	size_t cap_nodecount;
	uint32_t *jointbuf, *jointsize; /* defrag_homes_joint: domains' room, migrants' sizes */
	size_t cap_joint, cap_jointsize;
	struct joint_static jstat[TP_MAX_LEVELS]; /* defrag_homes_joint: per level, see there */
	uint32_t room_widest[TP_MAX_LEVELS + 1]; /* [level + 1]: its widest domain below, 0: not
	                                          * yet counted */
	/* the last migrant place_migrants found no home for: whether a home existed but was less
	 * local, and how many domains it spans per level */
	bool nohome_less_local;
	uint32_t nohome_span[TP_MAX_LEVELS];
	/* results */
	struct draft best;
	bool have_best;
	struct diag diag;
	struct tp_defrag_stats stats;
	uint64_t ruled_out; /* job sets ruled out by counts, without a simulation */
	/* the work budget (policy version 3) */
	uint32_t max_cands, max_sims;
	uint64_t trials, max_trials; /* placement trials (defrag_trial) so far, at most */
	bool trials_out;             /* the trials, not the simulations, stopped the search */
	uint64_t deadline_ns; /* CLOCK_MONOTONIC, 0: none */
	tp_defrag_budget stop; /* what stopped the search, TP_BUDGET_NONE: nothing */
	unsigned nholds; /* compaction: domains held so far */
	/* compaction of a set of domains: the device ranges held for them (else the scan's) */
	const uint32_t *cr; /* [2 * ncr]: first device, end */
	uint32_t ncr;
	/* the target-set search (defrag_targets.c): tnode[node] 1 when the node is in the set
	 * searched (NULL: no restriction); tpref the nodes of the caller's preferred targets
	 * (policy version 4) while they are searched alone */
	const uint8_t *tnode;
	uint8_t *tbuf;
	const uint8_t *tpref;
	uint8_t *tprefbuf;
	bool in_targets; /* a target set is being searched */
	uint32_t cold_sims; /* simulations of the candidate's target sets while no plan exists */
	/* the smallest lower bound of a candidate or target set not searched exactly (COST_NONE:
	 * every one was, or was pruned by the best plan); with the best plan's cost it bounds
	 * every plan (tp_plan_lower_bound_s) */
	int64_t lb_open;
};

/* Orders of job indices of the scan. The sorts take the planner as context (qsort has none,
 * and the library keeps no global state). */
typedef int (*job_order)(const struct planner *P, uint32_t a, uint32_t b);

/* defrag.c */
int defrag_grow_u32(const tp_allocator *a, uint32_t **p, size_t *cap, size_t need);
void defrag_planner_fini(struct planner *P);
int defrag_policy_check(const tp_defrag_policy *p, const struct tp_topology *t, char *msg);
unsigned defrag_job_can(const struct planner *P, const struct tp_job_impl *j);
void defrag_job_blocker(const struct planner *P, const struct tp_job_impl *j, char *buf,
                        size_t len);
int defrag_search(struct planner *P);
int defrag_budget_check(struct planner *P, tp_defrag_budget what);
int defrag_trial(struct planner *P);
int defrag_budget_message(const struct planner *P, char *msg);
void defrag_planner_init(struct planner *P, struct tp_cluster *c, const tp_defrag_policy *pol,
                         const struct tp_defrag_knobs *k);

/* defrag_scan.c */
int defrag_cmp_u32(const void *x, const void *y);
void defrag_desc_range(const struct tp_topology *t, int l, uint32_t dom, unsigned u, uint32_t *e0,
                       uint32_t *ne);
int defrag_scan_candidate(struct planner *P, int level, uint32_t dom);
int defrag_scan_jobs(struct planner *P, int level, uint32_t dom, bool full);
int defrag_append_outside(struct planner *P);
void defrag_tally_reset(struct planner *P);
void defrag_tally_job(struct planner *P, uint32_t k, int sign);
bool defrag_tally_enough(const struct planner *P);

/* Moves lower bounds for the depth-first searches: the DEFRAG_TOPK largest usable-device counts
 * (cjob.a) of the jobs ord[i .. n), descending and 0-padded, at top[i * DEFRAG_TOPK] for every
 * i <= n; top holds (n + 1) * DEFRAG_TOPK entries. */
#define DEFRAG_TOPK 8u
void defrag_top_build(const struct planner *P, const uint32_t *ord, uint32_t n, uint32_t *top);
/* The fewest jobs of a suffix (its row of defrag_top_build) whose devices reach `left`:
 * UINT32_MAX when all of them do not. */
uint32_t defrag_moves_lb(const uint32_t *top, uint32_t nrest, uint64_t left);
/* Whether the candidate as scanned needs more than max_moves jobs moved whatever the plan
 * (*at_least: a lower bound on the moves; UINT32_MAX when no set of its movable jobs makes
 * room). */
int defrag_moves_over(const struct planner *P, bool *over, uint32_t *at_least);
/* Whether the jobs that cannot leave the candidate leave the request no room, whatever set
 * moves (*over). */
int defrag_space_over(struct planner *P, bool *over);
void defrag_sort_jobs(const struct planner *P, uint32_t *v, size_t n, job_order cmp);
int defrag_by_rate(const struct planner *P, uint32_t x, uint32_t y);
int defrag_by_size(const struct planner *P, uint32_t x, uint32_t y);
int defrag_by_index(const struct planner *P, uint32_t x, uint32_t y);
int defrag_lower_bounds(struct planner *P);
int defrag_restrict_request(struct planner *P, bool *empty);

/* defrag_migrate.c */
int defrag_try_subset(struct planner *P, const uint32_t *S, uint32_t n, struct draft *d, int *out,
                      const struct tp_job_impl **nohome);
uint32_t defrag_max_free(const struct planner *P, unsigned l);
int defrag_homeless_mask(struct planner *P, const uint32_t *S, uint32_t n, uint32_t *mask);
/* Whether the count bounds on migrants' homes apply (the locality rule, once a simulation has
 * given the failed plan's message). */
bool defrag_counts_rule_out(const struct planner *P);
/* Fill cj's deepest level and spans (cj->deep, cj->span) once. */
int defrag_job_reach(struct planner *P, struct cjob *cj);
int defrag_fit_check(struct planner *P, const uint32_t *S, uint32_t n, bool *fits);

/* defrag_homes.c */
/* Sort node indices ascending (a count per node of their range; TP_ENOMEM with v as it was). */
int defrag_sort_nodes(struct planner *P, uint32_t *v, size_t n);
/* The min(k, n) largest of v[0 .. n) first, largest first; the rest in no order. */
void defrag_top_first(uint32_t *v, uint32_t n, uint32_t k);
int defrag_set_nodes(struct planner *P, const uint32_t *S, uint32_t n, size_t *nset);
int defrag_most_free_after(struct planner *P, size_t nset, unsigned l, uint32_t *most);
int defrag_home_outside(struct planner *P, size_t nset, const struct tp_job_impl *j,
                        const uint32_t *old, unsigned level, bool *yes);
int defrag_home_room(struct planner *P, size_t nset, const struct tp_job_impl *j,
                     const uint32_t *old, int level, bool *room);
int defrag_homes_joint(struct planner *P, size_t nset, const uint32_t *size, const int *level,
                       uint32_t m, bool *room);
int defrag_home_counts(struct planner *P, const struct tp_job_impl *j, const uint32_t *old,
                       int deep, bool *pass);

/* defrag_search.c */
void defrag_offer(struct planner *P, struct draft *d);
int64_t defrag_cost_bound(const struct planner *P);
void defrag_note_nohome(struct planner *P, const struct tp_job_impl *j);
void defrag_note_moves(struct planner *P, uint32_t moves);
void defrag_note_blocked(struct planner *P, uint64_t shortfall);
bool defrag_candidate_possible(struct planner *P, uint64_t *shortfall);
int defrag_evaluate_candidate(struct planner *P);

/* defrag_targets.c */
int defrag_target_search(struct planner *P, bool *done);
int defrag_prefer_setup(struct planner *P);
void defrag_lb_fold(struct planner *P, int64_t lb);

/* defrag_plan.c */
void defrag_draft_clear(const tp_allocator *a, struct draft *d);
int defrag_draft_push(const tp_allocator *a, struct draft *d, tp_step_action action,
                      const char *job, const uint32_t *from, size_t nfrom, const uint32_t *to,
                      size_t nto);
int defrag_draft_cmp(const struct draft *x, const struct draft *y);
void defrag_explain(const struct planner *P, char *msg, const struct draft *unlimited);
tp_plan *defrag_plan_new(const struct tp_cluster *c);
void defrag_plan_take(tp_plan *p, struct draft *d);

#endif
