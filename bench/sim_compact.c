/* SPDX-License-Identifier: MIT */
/*
 * Compaction for the blocked oldest job (tp-bench sim and compare; on by default since 0.4.0 but
 * under EASY, --no-compact turns it off, --compact on under EASY too), for the topoplace-defrag
 * policy: after a scheduling pass in which the oldest waiting job (the queue's head; under EASY the
 * top job) was answered TP_EFRAGMENTED, the simulator asks the library for the moves that free as
 * many whole NVLink domains as that job needs such that it then places (tp_defrag_compact_for at
 * the fleet's NVLink level, which tries it on a savepoint), with migrations only (no preemption),
 * no job less local (the planner's default) and within two budgets that refill with simulated time:
 * --compact-moves-h jobs moved per hour and --compact-budget checkpoint GPU-seconds per hour (a
 * share of the fleet's GPU-seconds). A budget holds at most one hour's worth; one call simulates
 * at most --compact-max-sims job sets (its work budget, SIM_COMPACT_MAX_SIMS). As with the defrag
 * hook, a plan is carried out only if no moved job runs less efficiently afterwards and it pays
 * (sim_plan_pays: its checkpoint GPU-seconds under half of the head's GPUs x the wait it saves,
 * estimated from the running jobs' ends; --no-pay: off), and a moved job pays its checkpoint and
 * restart time. A call that finds no plan, or one that does not pay, is not repeated until another
 * job has finished.
 *
 * Until 0.4.0 the rule under BestEffortFIFO was blind: after jobs ended, whole domains for the
 * mix of the queue's first 8 jobs, whether or not one was blocked. It gained on 12 NVL72 racks
 * but lost 4.7% on the 4-level fleet (the quick grid's LLM cell; one seed -19% after a single
 * 123 GPU-second move: the freed domains went to jobs behind a head that waited for count);
 * docs/benchmarks.md, "The pay rule and compaction for the head (#15)", has the figures.
 *
 * Under EASY (--queue easy) the top job holds a reservation and a domain freed that it cannot
 * start on yet becomes part of it, standing idle until the shadow time (the blind rule lost
 * 5-18% there in session 5); the plan, which starts the top job at once, costs at most half of
 * what starting it now instead of at its shadow time gains (its GPUs x the wait; half, as a
 * moved job also ends its checkpoint time later, which delays whatever was to start on its
 * GPUs): the pay rule with the wait known from the reservation. Off by default under EASY
 * since session 15 (--compact turns it on there too): on the full grid's LLM EASY cells it
 * cost 0.05-0.58% per seed on 140 NVL72 racks (topoplace-defrag below topoplace there) and
 * was level elsewhere, 12 seeds +0.06% on average without it (docs/benchmarks.md, "Figures:
 * full grid, session 15").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_compact {
	const struct sim_fleet *f;
	double moves_h, gpu_s_h;  /* budget refills per hour */
	double moves, gpu_s;      /* what is left of them */
	double last;              /* simulated time of the last refill */
	unsigned max_sims;        /* --compact-max-sims */
	uint64_t failed_releases; /* releases when a call last found no plan (UINT64_MAX: none) */
	uint32_t *dom_gpus;       /* [NVLink domains] devices of each */
	uint32_t ndom;
	bool easy;                /* --queue easy: the top job's reservation bounds the cost */
};

struct sim_compact *sim_compact_create(const struct sim_opts *o, const struct sim_fleet *f,
                                       const struct sim_policy *pol, double now)
{
	if (!(o->queue == SIM_QUEUE_EASY ? o->compact_easy : o->compact) || !pol->defrag)
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
	k->max_sims = o->compact_max_sims;
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
	if (isnan(shadow) || qlen == 0 || shadow <= now)
		return 0; /* only for an oldest job that is blocked now */
	double max_cost = k->gpu_s;
	const struct sim_job *top = &w->jobs[queue[0]];
	/* EASY: the top job's gain, it starts now instead of at the shadow time (the pay rule,
	 * sim_plan_pays, with the wait known already) */
	if (k->easy && mv->wait_est)
		max_cost = fmin(max_cost, (double)top->gpus * (shadow - now) * SIM_PAY_SHARE);
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	pol.preempt = 0;
	pol.max_moves = (uint32_t)k->moves;
	pol.max_cost_s = max_cost;
	pol.max_simulations = k->max_sims; /* 0: the library's default */
	tp_plan *p = NULL;
	uint64_t c0 = bench_thread_cpu_ns();
	const char *lv = k->f->level_name[k->f->nv_level];
	/* the plan frees the domains the top job needs and ends with its place step */
	char id[24];
	tp_slice slice;
	tp_request r = sim_tp_request(k->f, top, queue[0], &slice, id);
	int rc = tp_defrag_compact_for(c, lv, &r, &pol, &p);
	size_t nsteps = rc == 0 ? tp_plan_step_count(p) - 1 : 0;
	uint64_t cpu_ns = bench_thread_cpu_ns() - c0;
	sim_defrag_cpu_time(res, cpu_ns, false);
	res->compact_calls++;
	if (rc == TP_ENOMEM || rc == TP_EINVAL || rc == TP_ENOTFOUND)
		bench_die("tp_defrag_compact: %s: %s", tp_err_name(rc), p ? tp_plan_errmsg(p) : "");
	if (rc == 0 && nsteps == 0) { /* EASY: the top job fits already (the defrag hook) */
		tp_plan_destroy(p);
		return 0;
	}
	if (rc == TP_ENOPLAN && strstr(tp_plan_errmsg(p), "still does not fit"))
		res->compact_refused++;
	int moved = -1;
	if (rc == 0 && sim_plan_pays(mv, top, queue[0], p))
		moved = sim_apply_migrations(c, p, nsteps, mv, "tp_defrag_compact");
	if (getenv("TP_BENCH_COMPACT_LOG"))
		fprintf(stderr, "compact t=%.0f head=%u(%u) shadow=%.0f free_domains=%u free=%llu "
		        "rc=%d moved=%d cost=%.0f max=%.0f\n", now, queue[0], top->gpus, shadow,
		        free_domains(k, c),
		        (unsigned long long)tp_cluster_free_total_count(c), rc, moved,
		        rc == 0 ? tp_plan_cost_s(p) : 0, max_cost);
	if (getenv("TP_BENCH_DEFRAG_TRACE"))
		sim_trace_call("compact", &r, rc, p, cpu_ns);
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
