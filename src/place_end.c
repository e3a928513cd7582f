/* SPDX-License-Identifier: MIT */
/*
 * Rule 3 refined by the expected end (tp_request.expected_end_s): how well a node suits a job
 * expected to end at a given time, from the expected ends of the jobs running on it (each
 * job's shape, tp_job_end). Used where the solver chooses a node: among the tightest nodes
 * in the whole-level walk of a request one node must hold (place_choice.c), and among nodes as
 * tight as each other in the single-child search whose children are nodes (place_table.c). A
 * node costs one read of its devices.
 */
#include "place_internal.h"

struct tp_end_key tp_pl_node_end_key(const struct pctx *p, uint32_t node, double end)
{
	const struct tp_cluster *c = p->c;
	double last = 0;
	for (uint32_t i = p->t->dev_first[node]; i < p->t->dev_first[node + 1]; i++) {
		uint32_t s = c->dev_job[i];
		double e = s == TP_NO_JOB ? 0.0 : tp_job_end(c->jobs[s]);
		last = e > last ? e : last;
	}
	if (last <= 0)
		return (struct tp_end_key){2, 0};
	return last >= end ? (struct tp_end_key){0, last - end}
	                   : (struct tp_end_key){1, end - last};
}

bool tp_pl_end_wins(const struct pctx *p, uint32_t node, struct tp_end_key *best)
{
	struct tp_end_key k = tp_pl_node_end_key(p, node, p->q->end_s);
	if (!tp_pl_end_key_less(k, *best))
		return false;
	*best = k;
	return true;
}
