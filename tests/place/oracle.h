/* SPDX-License-Identifier: MIT */
/*
 * An independent oracle for tp_place(), written from spec/scenario-v1.md only (never from
 * src/place.c), for the property tests in test_place_oracle.c.
 *
 * A case is a small random cluster (a tree of 1-3 levels, up to 64 nodes of 1-8 devices, jobs,
 * down and cordoned devices, an optional failure-domain kind "power") and one random valid
 * request. The oracle answers with the spec's words: placeable or not (infeasible / busy /
 * fragmented), the fit figures, and for placeable requests the optimum of rule 1 (domains used
 * per level, top first, lexicographically smallest) and rule 2 (with balanced: the smallest
 * per-domain share at every level above the node, lexicographically largest).
 *
 * Why counting per node is enough: devices of one node are interchangeable once health, cordon,
 * occupancy and select have been applied, and because the devices of every domain must form one
 * contiguous run of ranks, "every group (slice) of s consecutive ranks lies in one domain of level
 * l" holds exactly when every domain of l holds a multiple of s devices (the runs then start at
 * multiples of s). The only order-dependent rule left is a cap on groups per domain of a level
 * finer than the group level; the brute-force engine searches the orders for it.
 *
 * Two engines: a tree dynamic programme over per-domain counts (any size; tree levels only) and
 * a brute-force enumeration of per-node count vectors (tiny clusters; everything, failure
 * domains and order-dependent group caps included). On tiny cases both run and must agree.
 */
#ifndef TP_ORACLE_H
#define TP_ORACLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "topoplace.h"

#define OR_MAXL 3          /* levels, node included */
#define OR_MAXN 64         /* nodes */
#define OR_MAXG 8          /* devices per node */
#define OR_MAXD 64         /* domains per level */
#define OR_MAXJ 12         /* running jobs */
#define OR_MAXJD 32        /* devices per running job */
#define OR_MAXC 128        /* request count */
#define OR_FD 100          /* level code of the failure-domain kind "power" */
#define OR_NTENANTS 3      /* 0 "default", 1 "t1", 2 "t2" */

/* Case sizes: tiny cases run both engines; larger ones only the dynamic programme. */
enum or_kind { OR_TINY = 0, OR_MEDIUM = 1, OR_LARGE = 2 };

struct or_job {
	int tenant;              /* 0..OR_NTENANTS-1 */
	bool tenant_explicit;    /* pass "default" rather than NULL for tenant 0 */
	int excl;                /* the job's own request is exclusive at this level, or -1 */
	unsigned n;              /* devices, in rank order: */
	uint8_t node[OR_MAXJD];
	uint8_t idx[OR_MAXJD];
};

struct or_req {
	unsigned count;
	unsigned g;              /* group size (1: no group given) */
	int gl;                  /* group level */
	bool group_given;        /* pass group_size/group_level explicitly */
	int required, preferred; /* levels or -1 */
	unsigned nslices;
	int sl[2];               /* slice levels, outermost first */
	unsigned ss[2];          /* slice sizes */
	bool balanced;
	unsigned ncaps;
	int cl[2];               /* cap level (tree level or OR_FD) */
	unsigned cdev[2], cgrp[2];
	int spread_l;            /* tree level, OR_FD or -1 */
	unsigned spread_m;
	int coloc_job, coloc_l;  /* job index and level, or -1 */
	int excl;                /* level or -1 */
	int tenant;
	bool tenant_explicit;
	int sel_model;           /* -1 none, 0 "A", 1 "B" */
	double min_perf, min_mem;
	unsigned nsel_nodes;
	uint8_t sel_nodes[OR_MAXN];
};

struct or_case {
	uint64_t seed;
	enum or_kind kind;
	unsigned L;                         /* levels; level L-1 is the node */
	unsigned nnodes;
	unsigned ndom[OR_MAXL];             /* domains per level (nnodes at the node level) */
	uint8_t dom[OR_MAXN][OR_MAXL];      /* a node's domain at every level */
	double top_gbps[OR_MAXD];           /* a top-level domain's own fabric (x_domain_fabric),
	                                       when above the node and > 0; or_generate sets none */
	uint8_t dparent[OR_MAXL][OR_MAXD];  /* parent of a domain (level >= 1) */
	uint8_t dsib[OR_MAXL][OR_MAXD];     /* index among siblings, for names */
	unsigned gpus[OR_MAXN];
	double perf[OR_MAXN][OR_MAXG];
	bool perf_list[OR_MAXN];            /* per-device perf given (else perf[n][0] for all) */
	int model[OR_MAXN];                 /* -1 none, 0 "A", 1 "B" */
	double mem[OR_MAXN];                /* 0: unknown */
	bool has_fd;
	int fd[OR_MAXN];                    /* -1: own domain, else 0 "pdu-a" / 1 "pdu-b" */
	unsigned njobs;
	struct or_job job[OR_MAXJ];
	int8_t held[OR_MAXN][OR_MAXG];      /* job index or -1 */
	bool down[OR_MAXN][OR_MAXG], cord[OR_MAXN][OR_MAXG];
	struct or_req req;
};

/* What the spec says tp_place() must answer. */
struct or_answer {
	int status;                 /* 0, TP_EINFEASIBLE, TP_EBUSY or TP_EFRAGMENTED */
	bool rule1, rule2;          /* whether rules 1 / 2 of the objective apply */
	int v[OR_MAXL];             /* rule 1 optimum: domains used per level */
	int s[OR_MAXL];             /* rule 2 optimum: smallest share per level above the node */
	tp_fit fit;                 /* for failures */
	bool best_strict;           /* fit.best must equal fit.best (else only bounded by it) */
	unsigned free_total;
};

/* Which engine answered. */
enum or_engine { OR_ENGINE_DP = 1, OR_ENGINE_BRUTE = 2 };

/* Generate the case of a seed (every choice comes from the seed). */
void or_generate(struct or_case *k, uint64_t seed);

/* Whether the dynamic programme can answer the case (no failure-domain rules, no
 * order-dependent group caps), and whether brute force can (small enough to enumerate). */
bool or_dp_supported(const struct or_case *k);
bool or_brute_supported(const struct or_case *k);

/* Answer with one engine. Returns false when the engine does not support the case. */
bool or_solve(const struct or_case *k, enum or_engine e, struct or_answer *a);

/* A placement the oracle finds best (rule 1, then rule 2), by brute force over at most `budget`
 * count vectors (0: no limit), in the canonical rank order (tree order). Returns 1 and the
 * devices (at least count room in devs), 0 when there is none, -1 when the budget ran out
 * (devs then holds the best found so far, if any). An order-dependent cap on groups may need
 * another order than the canonical one. */
int or_witness(const struct or_case *k, unsigned long budget, uint32_t *devs, size_t *n);

/* A job mix for rule 3 as refined by the library (tp_cluster_set_place_mix): shape i is
 * devices[i] devices inside one domain of tree level level[i], with an integer weight; the
 * weights sum to 64 so that the library's scaling keeps them exactly. */
struct or_mix {
	unsigned n;
	unsigned devices[4], weight[4];
	int level[4];
};

/* The mix's loss of a placement: for each shape and each domain D of its level,
 * weight * devices * (whole jobs in D's free devices before - after). */
unsigned long or_mix_loss(const struct or_case *k, const struct or_mix *m, const uint32_t *devs,
                          size_t n);

/* By brute force (tiny cases): the least mix loss among the placements optimal under rule 1
 * (and rule 2 with balanced). False when nothing can be placed or the case is not tiny. */
bool or_mix_best(const struct or_case *k, const struct or_mix *m, unsigned long *loss);

/* By brute force (tiny cases): the least modelled step time of m (tp_cost_step_us on t, the
 * case's topology; m must not depend on the rank order) among the placements optimal under
 * rule 1 (and rule 2 with balanced). False when nothing can be placed or the case is not tiny. */
bool or_step_best(const struct or_case *k, const tp_topology *t, const tp_step_model *m,
                  double *us);

/* By brute force (tiny cases): the least free devices (before the placement) of the domains of
 * tree level l that a placement optimal under rule 1 (and rule 2 with balanced) uses, summed
 * over the domains it uses (one for a request required at l or below). The library's rule 3
 * for a request one domain must hold chooses that domain of l first (src/place_choice.c).
 * False when nothing can be placed or the case is not tiny. */
bool or_fit_best(const struct or_case *k, int l, unsigned *free_used);

/* Names as given to the library. */
const char *or_level_name(const struct or_case *k, int level);
const char *or_tenant_name(int tenant, bool explicit_default);

/* Build the topology and the cluster state of a case. Returns 0 or the failing code, with a
 * message in why. */
int or_build(const struct or_case *k, const tp_allocator *a, tp_topology **t, tp_cluster **c,
             char *why, size_t len);

/* Fill a tp_request for the case; the pointers refer to static names and to *store. */
struct or_req_store {
	tp_slice slices[2];
	tp_domain_cap caps[2];
	const char *sel_nodes[OR_MAXN];
};
void or_request(const struct or_case *k, tp_request *r, struct or_req_store *store);

/* Check a placement (device ids in rank order, the library's ids, which are in tree order
 * like the case's) against every hard rule. Returns true when valid, else false with the first
 * violation in why. */
bool or_check_placement(const struct or_case *k, const uint32_t *devs, size_t n, char *why,
                        size_t len);

/* Domains used per level and smallest share per level above the node, of a device list. */
void or_placement_shape(const struct or_case *k, const uint32_t *devs, size_t n, int *v, int *s);

/* Print the case as a scenario-v1 document (runnable with `python3 -m topoplace place -`). */
void or_dump_scenario(FILE *f, const struct or_case *k);
/* Print a device list as node/index names. */
void or_dump_devices(FILE *f, const struct or_case *k, const uint32_t *devs, size_t n);

/* The state the case gives a device: a ::tp_device_state, and the holding job's index or -1. */
int or_device_state(const struct or_case *k, unsigned node, unsigned idx, int *job);

/* The first device id of a node (devices are numbered node by node in tree order). */
uint32_t or_node_first_dev(const struct or_case *k, unsigned node);

#endif
