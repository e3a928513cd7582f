/* SPDX-License-Identifier: MIT */
/*
 * Knobs and figures of the defragmentation planner, for the tests and the benchmark. Private:
 * the public calls (tp_defrag_plan, tp_defrag_compact) use the defaults.
 */
#ifndef TP_DEFRAG_IMPL_H
#define TP_DEFRAG_IMPL_H

#include "cluster_impl.h"

/* Default of tp_defrag_knobs.exact_max: a candidate domain with at most this many movable jobs
 * is searched exactly (every subset, cheapest first); above it, greedily. */
#define TP_DEFRAG_EXACT_MAX 12u

struct tp_defrag_knobs {
	unsigned exact_max; /* exact subset search up to this many movable jobs (0: greedy only) */
};

/* What one planning call did (filled when a pointer is given). */
struct tp_defrag_stats {
	unsigned long scanned;   /* candidate domains whose devices were read */
	unsigned long evaluated; /* candidate domains searched for a set of jobs */
	unsigned long tried;     /* job sets simulated (release, place, new homes) */
};

/* tp_defrag_plan with knobs (NULL: the defaults) and optional figures. */
int tp_defrag_plan_ex(tp_cluster *c, const tp_request *r, const tp_defrag_policy *policy,
                      const struct tp_defrag_knobs *knobs, struct tp_defrag_stats *stats,
                      tp_plan **out);

#endif
