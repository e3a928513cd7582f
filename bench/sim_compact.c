/* SPDX-License-Identifier: MIT */
/*
 * Compaction when jobs end (tp-bench sim and compare; on by default since 0.4.0, --no-compact
 * turns it off), for the topoplace-defrag policy: after jobs have finished, and after a pass
 * in which the oldest waiting job was answered TP_EFRAGMENTED, the simulator asks the library
 * for cheap moves that leave whole NVLink domains free (tp_defrag_compact at the fleet's NVLink
 * level), so that the large jobs of the queue find them.
 *
 * The expected job mix is the head of the queue: each of its first SIM_COMPACT_HEAD jobs that
 * needs at least half an NVLink domain wants ceil(GPUs / domain size) whole domains. When
 * fewer domains are fully free than that, and the free GPUs would fill one more, the planner is
 * asked for one more free domain, with migrations only (no preemption), no job less local
 * (the planner's default) and within two budgets that refill with simulated time:
 * --compact-moves-h jobs moved per hour and --compact-budget checkpoint GPU-seconds per hour
 * (a share of the fleet's GPU-seconds). A budget holds at most one hour's worth. As with the
 * defrag hook, a plan is carried out only if no moved job runs less efficiently afterwards,
 * and a moved job pays its checkpoint and restart time. A call that finds no plan is not
 * repeated until another job has finished.
 *
 * Under EASY (--queue easy) the head's mix is the wrong target: the top job holds a
 * reservation, a later job may only backfill around it, and a domain freed for the top job
 * that it cannot start on yet becomes part of its reservation, so the holes the migrants filled
 * are gone from backfill while the freed domain stands idle until the shadow time (that is how
 * the rule above lost 5-18% under EASY). There, compaction runs only after a pass in which the
 * top job was answered TP_EFRAGMENTED, asks for as many free domains as the top job's slices
 * need, and a plan is carried out only if the top job then places at once
 * (tp_defrag_compact_for: the library tries it on a savepoint) and the plan costs at most half of what starting it now instead of at its shadow
 * time gains (its GPUs x the wait; half, as a moved job also ends its checkpoint time later,
 * which delays whatever was to start on its GPUs).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#define SIM_COMPACT_HEAD 8u

struct sim_compact {
	const struct sim_fleet *f;
	double moves_h, gpu_s_h;  /* budget refills per hour */
	double moves, gpu_s;      /* what is left of them */
	double last;              /* simulated time of the last refill */
	uint64_t failed_releases; /* releases when a call last found no plan (UINT64_MAX: none) */
	uint32_t *dom_gpus;       /* [NVLink domains] devices of each */
	uint32_t ndom;
	bool easy;                /* --queue easy: only for the top job (compact_for_top) */
};

struct sim_compact *sim_compact_create(const struct sim_opts *o, const struct sim_fleet *f,
                                       const struct sim_policy *pol, double now)
{
	if (!o->compact || !pol->defrag)
		return NULL;
	struct sim_compact *k = calloc(1, sizeof *k);
	if (!k)
		bench_die("out of memory");
	k->f = f;
	k->moves_h = o->compact_moves_h;
	k->gpu_s_h = o->compact_budget * (double)f->gpus * 3600;
	k->moves = k->moves_h;
	k->gpu_s = k->gpu_s_h;
	k->last = now;
	k->failed_releases = UINT64_MAX;
	k->easy = o->queue == SIM_QUEUE_EASY;
	k->ndom = tp_topology_domain_count(f->t, f->nv_level);
	k->dom_gpus = malloc((k->ndom ? k->ndom : 1) * sizeof *k->dom_gpus);
	if (!k->dom_gpus)
		bench_die("out of memory");
	for (uint32_t d = 0; d < k->ndom; d++) {
		uint32_t first, n;
		BENCH_CHECK(tp_topology_domain_devices(f->t, f->nv_level, d, &first, &n),
		            "tp_topology_domain_devices");
		k->dom_gpus[d] = n;
	}
	return k;
}

void sim_compact_destroy(struct sim_compact *k)
{
	if (k)
		free(k->dom_gpus);
	free(k);
}

/* Whole NVLink domains the head of the queue wants. */
static uint32_t wanted_domains(const struct sim_compact *k, const struct sim_workload *w,
                               const uint32_t *queue, size_t qlen)
{
	uint64_t want = 0;
	uint32_t g = k->f->nv_gpus;
	for (size_t i = 0; i < qlen && i < SIM_COMPACT_HEAD; i++) {
		uint32_t n = w->jobs[queue[i]].gpus;
		if (2 * n >= g)
			want += (n + g - 1) / g;
	}
	return want < k->ndom ? (uint32_t)want : k->ndom;
}

static uint32_t free_domains(const struct sim_compact *k, const tp_cluster *c)
{
	uint32_t n = 0;
	for (uint32_t d = 0; d < k->ndom; d++)
		n += tp_cluster_free_count(c, k->f->nv_level, d) == k->dom_gpus[d];
	return n;
}

int sim_compact_run(struct sim_compact *k, tp_cluster *c, const struct sim_workload *w,
                    const uint32_t *queue, size_t qlen, double now, uint64_t releases,
                    double shadow, const struct sim_mover *mv, struct sim_result *res)
{
	if (!k || releases == k->failed_releases)
		return 0;
	double dt = (now - k->last) / 3600;
	k->last = now;
	k->moves = fmin(k->moves_h, k->moves + dt * k->moves_h);
	k->gpu_s = fmin(k->gpu_s_h, k->gpu_s + dt * k->gpu_s_h);
	if (k->moves < 1 || k->gpu_s <= 0)
		return 0;
	if (k->easy && (isnan(shadow) || qlen == 0 || shadow <= now))
		return 0; /* EASY: only for a top job that is blocked now */
	uint32_t have = free_domains(k, c), want;
	double max_cost = k->gpu_s;
	const struct sim_job *top = qlen ? &w->jobs[queue[0]] : NULL;
	if (k->easy) {
		want = have + 1; /* tp_defrag_compact_for counts the top job's */
		/* the top job's gain: it starts now instead of at the shadow time */
		max_cost = fmin(max_cost, (double)top->gpus * (shadow - now) / 2);
	} else {
		want = wanted_domains(k, w, queue, qlen);
		if (tp_cluster_free_total_count(c) < (have + 1) * k->f->nv_gpus)
			return 0;
		want = want > have ? have + 1 : have;
	}
	if (have >= want)
		return 0;
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	pol.preempt = 0;
	pol.max_moves = (uint32_t)k->moves;
	pol.max_cost_s = max_cost;
	tp_plan *p = NULL;
	uint64_t c0 = bench_thread_cpu_ns();
	const char *lv = k->f->level_name[k->f->nv_level];
	int rc;
	size_t nsteps = 0;
	if (k->easy) {
		/* the plan frees the domains the top job needs and ends with its place step */
		char id[24];
		tp_slice slice;
		tp_request r = sim_tp_request(k->f, top, queue[0], &slice, id);
		rc = tp_defrag_compact_for(c, lv, &r, &pol, &p);
		nsteps = rc == 0 ? tp_plan_step_count(p) - 1 : 0;
	} else {
		rc = tp_defrag_compact(c, lv, want, &pol, &p);
		nsteps = rc == 0 ? tp_plan_step_count(p) : 0;
	}
	sim_defrag_cpu_time(res, bench_thread_cpu_ns() - c0);
	res->compact_calls++;
	if (rc == TP_ENOMEM || rc == TP_EINVAL || rc == TP_ENOTFOUND)
		bench_die("tp_defrag_compact: %s: %s", tp_err_name(rc), p ? tp_plan_errmsg(p) : "");
	if (rc == 0 && nsteps == 0) { /* EASY: the top job fits already (the defrag hook) */
		tp_plan_destroy(p);
		return 0;
	}
	if (rc == TP_ENOPLAN && k->easy && strstr(tp_plan_errmsg(p), "still does not fit"))
		res->compact_refused++;
	int moved = rc < 0 ? -1 : sim_apply_migrations(c, p, nsteps, mv, "tp_defrag_compact");
	if (getenv("TP_BENCH_COMPACT_LOG"))
		fprintf(stderr, "compact t=%.0f head=%u(%u) shadow=%.0f want=%u have=%u free=%llu "
		        "rc=%d moved=%d cost=%.0f max=%.0f\n", now, qlen ? queue[0] : 0,
		        top ? top->gpus : 0, shadow, want, have,
		        (unsigned long long)tp_cluster_free_total_count(c), rc, moved,
		        rc == 0 ? tp_plan_cost_s(p) : 0, max_cost);
	if (moved < 0) {
		k->failed_releases = releases;
	} else {
		res->compact_plans += moved > 0;
		k->moves -= moved;
		k->gpu_s -= tp_plan_cost_s(p);
		res->compact_moves += moved;
		res->compact_cost_s += tp_plan_cost_s(p);
	}
	tp_plan_destroy(p);
	return moved > 0 ? moved : 0;
}
