/* SPDX-License-Identifier: MIT */
/*
 * The EASY reservation of the simulator's Slurm queue (sim.c, --queue easy): where and when the
 * top job would start if the running jobs end when they are due.
 *
 * Slurm's sched/backfill asks the select plugin when and where the top job could run
 * (select/cons_tres in will-run mode: _will_run_test() in src/plugins/select/cons_tres/
 * job_test.c removes the running jobs one at a time in order of end time and tests the pending
 * job after each removal). The first time it fits is the shadow time, and the nodes it would
 * get there are reserved: a later job may start now only if it ends by the shadow time or uses
 * none of them. Here the test is the policy's own placement function, run on the cluster
 * projected to that time (the due jobs released under a savepoint, rolled back afterwards), so
 * each policy reserves the nodes it would itself give the top job.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static int cmp_due(const void *a, const void *b)
{
	const struct sim_due *x = a, *y = b;
	if (x->t != y->t)
		return (x->t > y->t) - (x->t < y->t);
	return (x->job > y->job) - (x->job < y->job);
}

static void release_due(tp_cluster *c, const struct sim_due *d)
{
	char id[24];
	snprintf(id, sizeof id, "j%u", d->job);
	BENCH_CHECK(tp_cluster_release(c, id), tp_cluster_errmsg(c));
}

/*
 * The running jobs are due[0..n) (sorted here by end time, then index). Releases them in that
 * order on a savepoint of ctx->c: first as many as the top job's GPU count needs (it cannot fit
 * with fewer free), then one end time at a time, placing the top job with pol->place after each
 * step until it fits. On success the nodes of that placement are marked in reserved[] (listed
 * in list[0..*nlist)) and the shadow time is returned; INFINITY when it never fits (then
 * nothing is marked). The cluster, the policy's random stream and everything else are left as
 * they were. *calls counts the placement calls made.
 */
double sim_easy_reserve(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                        const struct sim_job *top, uint32_t top_id, struct sim_due *due,
                        size_t n, double now, uint32_t *devs, uint8_t *reserved,
                        uint32_t *list, uint32_t *nlist, long *calls)
{
	tp_cluster *c = ctx->c;
	const tp_topology *t = ctx->f->t;
	qsort(due, n, sizeof *due, cmp_due);
	size_t sp;
	BENCH_CHECK(tp_cluster_savepoint(c, &sp), tp_cluster_errmsg(c));
	struct bench_rng rng = ctx->rng; /* a trial placement draws nothing from the real stream */
	double shadow = now;
	size_t i = 0;
	while (i < n && tp_cluster_free_total(c) < top->gpus) {
		shadow = due[i].t;
		for (; i < n && due[i].t == shadow; i++)
			release_due(c, &due[i]);
	}
	double found = INFINITY;
	while (tp_cluster_free_total(c) >= top->gpus) {
		(*calls)++;
		int rc = pol->place(st, ctx, top, top_id, devs);
		if (rc == 0) {
			found = shadow;
			break;
		}
		if (rc == TP_EINFEASIBLE || i == n)
			break;
		shadow = due[i].t;
		for (; i < n && due[i].t == shadow; i++)
			release_due(c, &due[i]);
	}
	ctx->rng = rng;
	BENCH_CHECK(tp_cluster_rollback(c, sp), tp_cluster_errmsg(c));
	*nlist = 0;
	if (found == INFINITY)
		return found;
	for (uint32_t k = 0; k < top->gpus; k++) {
		uint32_t node = tp_topology_device_node(t, devs[k]);
		if (!reserved[node]) {
			reserved[node] = 1;
			list[(*nlist)++] = node;
		}
	}
	return found;
}

/*
 * The ideal bound has no nodes: its shadow is the first end time at which `need` GPUs are free
 * (now if they are), and *extra the GPUs free then that the top job does not need; INFINITY
 * (and *extra 0) if they never are.
 */
double sim_easy_count(struct sim_due *due, size_t n, const struct sim_workload *w,
                      uint64_t fr, uint32_t need, double now, uint64_t *extra)
{
	qsort(due, n, sizeof *due, cmp_due);
	double shadow = now;
	for (size_t i = 0; i < n && fr < need; i++) {
		fr += w->jobs[due[i].job].gpus;
		shadow = due[i].t;
	}
	*extra = fr >= need ? fr - need : 0;
	return fr >= need ? shadow : INFINITY;
}

/* Free GPUs of the nodes in list[0..n) now. */
uint32_t sim_easy_free_on(const struct sim_ctx *ctx, const uint32_t *list, uint32_t n)
{
	uint32_t fr = 0;
	for (uint32_t k = 0; k < n; k++)
		fr += tp_cluster_free(ctx->c, ctx->f->node_level, list[k]);
	return fr;
}

/* GPUs of devs[0..n) on reserved nodes. */
uint32_t sim_easy_overlap(const struct sim_ctx *ctx, const uint8_t *reserved,
                          const uint32_t *devs, uint32_t n)
{
	uint32_t k = 0;
	for (uint32_t d = 0; d < n; d++)
		k += reserved[tp_topology_device_node(ctx->f->t, devs[d])];
	return k;
}
