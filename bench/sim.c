/* SPDX-License-Identifier: MIT */
/*
 * tp-bench sim: a trace-driven, single-threaded, deterministic cluster simulator.
 *
 * One workload (the bundled generator or a CSV trace) is replayed on one fleet under every
 * policy of sim_policy.c, each on a fresh tp_cluster, all under one queue discipline
 * (sim_schedule: Kueue's BestEffortFIFO or StrictFIFO, or Slurm's EASY backfill; the
 * starvation rule --starve-h is off by default). A started job runs for its duration divided
 * by its placement's efficiency; a migrated job does no useful work while it restarts.
 *
 * Metrics: over a fixed window of simulated time in which the queue should never be empty
 * (default: from 15% of the arrival span to the last arrival; the time the queue was empty
 * inside it is reported), occupancy and effective GPU-hours (sum over running jobs of devices x
 * time x efficiency inside the window); over the whole run, jobs and GPU-hours at full locality
 * (efficiency >= 0.999), queueing delay, makespan; sampled every --sample-s seconds, busy and
 * effective GPUs, queue length and fragmentation (the share of free GPUs outside fully free
 * NVLink domains, and outside fully free nodes).
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#ifndef TP_BENCH_SOURCE_DIR
#define TP_BENCH_SOURCE_DIR "bench"
#endif

/* A completion event. */
struct sim_ev {
	double t;
	uint32_t job;
};

struct sim_run {
	const struct sim_opts *o;
	const struct sim_fleet *f;
	const struct sim_workload *w;
	const struct sim_policy *pol;
	void *st;
	struct sim_ctx ctx;
	struct sim_result *res;

	double now;
	double w0, w1;
	uint32_t busy;     /* GPUs held */
	double eff_busy;   /* sum of GPUs x efficiency over running jobs */
	uint32_t pool_free; /* the ideal policy's free GPUs */
	size_t running;

	uint32_t *queue;
	size_t qlen;
	struct sim_ev *heap;
	size_t nheap, cap_heap;
	double *eff;   /* [jobs] */
	double *start; /* [jobs] */
	double *end;   /* [jobs] current end (a heap entry with another time is stale) */
	double *contrib;     /* [jobs] GPUs x efficiency the job adds to eff_busy now */
	double *restart_end; /* [jobs] end of a moved job's checkpoint and restart (no work) */
	struct sim_due *running_end; /* scratch of the EASY reservation */
	uint32_t *running_gpus;
	/* The EASY reservation of this pass (sim_reserve). */
	bool resv_on, resv_valid;
	uint64_t resv_key[4];  /* top job, releases, starts, moves when it was computed */
	double shadow;
	uint64_t extra, resv_extra; /* the ideal bound (no nodes): GPUs free at the shadow it leaves */
	uint8_t *resv_node;    /* [nodes] reserved for the top job */
	uint32_t *resv_list;   /* the reserved nodes */
	uint32_t nresv;
	uint32_t resv_free;    /* free GPUs on the reserved nodes now */
	uint32_t *resv_devs;   /* [2 x gpus] the top job's trial placements */
	uint32_t *busy_devs;   /* [2 x gpus] sim_reserve_busy's placement and free devices */
	uint8_t *est_node;     /* sim_wait_est's scratch: [nodes], [nodes], [2 x gpus] */
	uint32_t *est_list, *est_devs;
	uint8_t *guard_node;   /* sim_head_guard's scratch: [nodes], [nodes], [2 x gpus] */
	uint32_t *guard_list, *guard_devs;
	bool defrag_tried;  /* one defrag attempt per scheduling pass */
	bool oldest;        /* the job being tried is the oldest waiting one */
	bool head_count;    /* this pass: the oldest waiting job has more GPUs than are free */
	bool behind_frag;   /* ... and a job behind it was answered TP_EFRAGMENTED (EASY: the
	                     * defrag hook's second pass runs for it) */
	bool post_pass;     /* EASY: the pass after backfill, in which the defrag hook runs */
	uint64_t releases;  /* jobs finished so far */
	uint32_t nodefrag_job;      /* the last job the planner found no plan for ... */
	uint64_t nodefrag_releases; /* ... while `releases` had this value */
	double next_defrag;         /* the planner runs at most once per --defrag-every-s */
	uint32_t *devs;
	uint8_t *memo; /* [65536] shapes that failed in this pass */
	uint16_t *memo_set;
	size_t nmemo;

	double busy_all, busy_win, eff_win;
	double next_sample;
	size_t cap_samples;
	struct sim_failures *fail; /* NULL: no failures (the default) */
	struct sim_compact *compact; /* NULL: no compaction (--no-compact, or no defrag hook) */
	bool head_frag;              /* the oldest waiting job was answered TP_EFRAGMENTED */
	bool head_floor;             /* or TP_EBUSY by topoplace's top-job floor (the defrag
	                              * hook's second EASY pass runs for either) */
	double *remain;            /* [2 jobs] a requeued job's work and redo (s), else -1 */
};

/* ---- fleet -------------------------------------------------------------------------------- */

/*
 * What the simulator needs to know of a fleet, read off its topology: the node level is the
 * last; the base level is the one just above it (rack on NVL72, scalable unit on HGX); the
 * NVLink domain is the outermost level reached from the node through NVLink fabrics only (rack
 * on NVL72, node on HGX). Every node must hold the same number of GPUs (job shapes are in whole
 * nodes); domains of one level may differ in size, and the largest counts.
 */
static void sim_fleet_derive(struct sim_fleet *f, const char *spec)
{
	const tp_topology *t = f->t;
	f->gpus = tp_topology_device_count(t);
	f->nlevels = tp_topology_level_count(t);
	f->node_level = f->nlevels - 1;
	f->base_level = f->nlevels >= 2 ? f->nlevels - 2 : 0;
	for (unsigned l = 0; l < f->nlevels; l++)
		f->level_name[l] = tp_topology_level_name(t, l);
	uint32_t first, n;
	BENCH_CHECK(tp_topology_domain_devices(t, f->node_level, 0, &first, &f->node_gpus),
	            "tp_topology_domain_devices");
	for (uint32_t node = 1; node < tp_topology_node_count(t); node++) {
		BENCH_CHECK(tp_topology_domain_devices(t, f->node_level, node, &first, &n),
		            "tp_topology_domain_devices");
		if (n != f->node_gpus)
			bench_die("--fleet %s: node %s has %u GPUs and node %s %u: the simulator needs "
			          "the same number on every node", spec, tp_topology_node_name(t, 0),
			          f->node_gpus, tp_topology_node_name(t, node), n);
	}
	f->nv_level = f->node_level;
	for (;;) {
		tp_link_kind kind;
		BENCH_CHECK(tp_topology_fabric(t, (int)f->nv_level, &kind, NULL, NULL),
		            "tp_topology_fabric");
		if (kind != TP_LINK_NVLINK || f->nv_level == 0)
			break;
		BENCH_CHECK(tp_topology_fabric(t, (int)f->nv_level - 1, &kind, NULL, NULL),
		            "tp_topology_fabric");
		if (kind != TP_LINK_NVLINK)
			break;
		f->nv_level--;
	}
	f->nv_gpus = f->top_gpus = 0;
	for (uint32_t d = 0; d < tp_topology_domain_count(t, f->nv_level); d++) {
		BENCH_CHECK(tp_topology_domain_devices(t, f->nv_level, d, &first, &n), "devices");
		f->nv_gpus = n > f->nv_gpus ? n : f->nv_gpus;
	}
	f->top = tp_topology_domain_count(t, 0);
	for (uint32_t d = 0; d < f->top; d++) {
		BENCH_CHECK(tp_topology_domain_devices(t, 0, d, &first, &n), "devices");
		f->top_gpus = n > f->top_gpus ? n : f->top_gpus;
	}
}

/*
 * The 4-level fleet l4:GPUS: NVL72 racks (18 nodes of 4 GPUs, NVLink inside the rack) in
 * blocks of 4 racks (InfiniBand 50 GB/s), 2 blocks per pod (37.5 GB/s: a 4:3 tapered spine),
 * pods joined at 25 GB/s; the whole number of pods closest to GPUS / 576 (at least one).
 */
static int sim_fleet_l4(struct sim_fleet *f, uint64_t gpus)
{
	static const char *const levels[] = {"pod", "block", "rack", "node"};
	unsigned pods = (unsigned)((gpus + 288) / 576);
	pods = pods ? pods : 1;
	tp_topology_builder *b;
	int rc = tp_topology_builder_create(&b, levels, 4, NULL);
	if (rc < 0)
		return rc;
	tp_node_options no = TP_NODE_OPTIONS_INIT;
	no.model = "GB200";
	no.memory_gb = 186;
	unsigned counts[4] = {pods, 2, 4, NVL72_RACK_NODES};
	if ((rc = tp_topology_builder_set_fabric(b, 3, TP_LINK_NVLINK, 900, 3.4)) < 0 ||
	    (rc = tp_topology_builder_set_fabric(b, 2, TP_LINK_NVLINK, 900, 3.4)) < 0 ||
	    (rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_IB, 50, 14)) < 0 ||
	    (rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 37.5, 17)) < 0 ||
	    (rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25,
	                                         20)) < 0 ||
	    (rc = tp_topology_builder_generate(b, counts, NVL72_NODE_GPUS, &no)) < 0 ||
	    (rc = tp_topology_build(b, &f->t)) < 0) {
		tp_topology_builder_destroy(b);
		return rc;
	}
	tp_topology_builder_destroy(b);
	f->top = pods;
	f->per_top = 8;
	return 0;
}

void sim_fleet_build(struct sim_fleet *f, const char *spec)
{
	memset(f, 0, sizeof *f);
	if (!strncmp(spec, "torus:", 6)) { /* sim_torus.c */
		sim_torus_fleet(f, spec + 6, spec);
		sim_fleet_derive(f, spec);
		return;
	}
	if (!strncmp(spec, "scenario:", 9)) {
		char err[512];
		f->kind = FLEET_SCENARIO;
		f->t = bench_scenario_topology(spec + 9, err, sizeof err);
		if (!f->t)
			bench_die("--fleet %s: %s", spec, err);
		sim_fleet_derive(f, spec);
		f->per_top = tp_topology_domain_count(f->t, f->base_level) / f->top;
		return;
	}
	const char *colon = strchr(spec, ':');
	if (!colon)
		bench_die("--fleet %s: expected nvl72:GPUS, hgx:GPUS, l4:GPUS, mixed:GPUS, "
		          "torus:X,Y,Z or scenario:FILE", spec);
	uint64_t want[1];
	if (bench_parse_sizes(colon + 1, want, 1) != 1)
		bench_die("--fleet %s: bad GPU count", spec);
	int rc;
	if (!strncmp(spec, "nvl72:", 6)) {
		f->kind = FLEET_NVL72;
		bench_nvl72_shape(want[0], &f->top, &f->per_top);
		rc = tp_topology_generate_nvl72(&f->t, f->top, f->per_top, NULL);
	} else if (!strncmp(spec, "l4:", 3)) {
		f->kind = FLEET_L4;
		rc = sim_fleet_l4(f, want[0]);
	} else if (!strncmp(spec, "hgx:", 4)) {
		f->kind = FLEET_HGX;
		bench_hgx_shape(want[0], &f->top, &f->per_top);
		rc = tp_topology_generate_hgx(&f->t, f->top, f->per_top, NULL);
	} else if (!strncmp(spec, "mixed:", 6)) {
		f->kind = FLEET_MIXED;
		rc = bench_mixed_fleet(&f->t, want[0], &f->top);
		f->per_top = 8;
	} else {
		bench_die("--fleet %s: expected nvl72:GPUS, hgx:GPUS, l4:GPUS, mixed:GPUS, "
		          "torus:X,Y,Z or scenario:FILE", spec);
	}
	if (rc < 0)
		bench_die("--fleet %s: %s", spec, tp_err_name(rc));
	sim_fleet_derive(f, spec);
}

/* A heap entry whose job has this bit ends a moved job's restart, not the job. */
#define SIM_EV_RESTART 0x80000000u

/* ---- event heap --------------------------------------------------------------------------- */

static bool ev_before(const struct sim_ev *a, const struct sim_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->job < b->job);
}

static void heap_push(struct sim_run *r, double t, uint32_t job)
{
	if (r->nheap == r->cap_heap) { /* moved jobs leave stale entries behind */
		r->cap_heap = r->cap_heap ? 2 * r->cap_heap : 1024;
		r->heap = realloc(r->heap, r->cap_heap * sizeof *r->heap);
		if (!r->heap)
			bench_die("out of memory");
	}
	size_t i = r->nheap++;
	r->heap[i] = (struct sim_ev){t, job};
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ev_before(&r->heap[i], &r->heap[p]))
			break;
		struct sim_ev tmp = r->heap[i];
		r->heap[i] = r->heap[p];
		r->heap[p] = tmp;
		i = p;
	}
}

static struct sim_ev heap_pop(struct sim_run *r)
{
	struct sim_ev top = r->heap[0];
	r->heap[0] = r->heap[--r->nheap];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < r->nheap && ev_before(&r->heap[l], &r->heap[m]))
			m = l;
		if (l + 1 < r->nheap && ev_before(&r->heap[l + 1], &r->heap[m]))
			m = l + 1;
		if (m == i)
			break;
		struct sim_ev tmp = r->heap[i];
		r->heap[i] = r->heap[m];
		r->heap[m] = tmp;
		i = m;
	}
	return top;
}

/* ---- metrics ------------------------------------------------------------------------------ */

/* Share of free devices of level `level` that are not in fully free domains of that level. */
static double sim_frag(const struct sim_run *r, unsigned level)
{
	const tp_topology *t = r->f->t;
	uint32_t nd = tp_topology_domain_count(t, level);
	uint64_t free_all = 0, free_whole = 0;
	for (uint32_t d = 0; d < nd; d++) {
		uint32_t fr = tp_cluster_free_count(r->ctx.c, level, d);
		free_all += fr;
		uint32_t first, n;
		tp_topology_domain_devices(t, level, d, &first, &n);
		if (fr == n)
			free_whole += fr;
	}
	return free_all ? (double)(free_all - free_whole) / (double)free_all : 0.0;
}

static void sim_take_sample(struct sim_run *r, double t)
{
	struct sim_result *res = r->res;
	if (res->nsamples == r->cap_samples) {
		r->cap_samples = r->cap_samples ? 2 * r->cap_samples : 1024;
		res->samples = realloc(res->samples, r->cap_samples * sizeof *res->samples);
		if (!res->samples)
			bench_die("out of memory");
	}
	struct sim_sample *s = &res->samples[res->nsamples++];
	s->t = t;
	s->busy = r->busy;
	s->queued = (uint32_t)r->qlen;
	s->running = (uint32_t)r->running;
	s->eff_busy = r->eff_busy;
	s->frag_nv = r->pol->uses_cluster ? sim_frag(r, r->f->nv_level) : 0;
	s->frag_node = r->pol->uses_cluster ? sim_frag(r, r->f->node_level) : 0;
	s->box_free = s->fragments = 0;
	if (r->pol->uses_cluster && r->f->kind == FLEET_TORUS)
		sim_torus_frag(r->f, r->ctx.c, &s->box_free, &s->fragments);
}

/* Move the clock to t: integrate the figures and take the samples due on the way. */
static void sim_advance(struct sim_run *r, double t)
{
	if (t <= r->now)
		return;
	while (r->next_sample <= t) {
		sim_take_sample(r, r->next_sample);
		r->next_sample += r->o->sample_s;
	}
	double dt = t - r->now;
	double lo = r->now > r->w0 ? r->now : r->w0, hi = t < r->w1 ? t : r->w1;
	double ov = hi > lo ? hi - lo : 0;
	r->busy_all += r->busy * dt;
	r->busy_win += r->busy * ov;
	r->eff_win += r->eff_busy * ov;
	if (r->qlen == 0 && ov > 0) {
		r->res->queue_empty_s += ov;
		r->res->last_empty_s = hi;
	} else if (ov > 0) { /* idle GPUs while the oldest job waits: for shape or for count */
		uint32_t fr = r->pol->uses_cluster ? (uint32_t)tp_cluster_free_total_count(r->ctx.c)
		                                   : r->pool_free;
		double idle = (double)fr * ov / 3600;
		if (fr >= r->w->jobs[r->queue[0]].gpus)
			r->res->idle_shape_gpu_h += idle;
		else
			r->res->idle_count_gpu_h += idle;
	}
	r->now = t;
	r->ctx.now = t;
}

/* ---- scheduling --------------------------------------------------------------------------- */

static void sim_planner_time(struct sim_result *res, uint64_t ns)
{
	if (res->nplanner == res->cap_planner) {
		res->cap_planner = res->cap_planner ? 2 * res->cap_planner : 4096;
		res->planner_ms = realloc(res->planner_ms, res->cap_planner * sizeof *res->planner_ms);
		if (!res->planner_ms)
			bench_die("out of memory");
	}
	res->planner_ms[res->nplanner++] = (double)ns * 1e-6;
}

/* Append x to the array *v of *n entries and room for *cap. */
static void sim_push_ms(double **v, size_t *n, size_t *cap, double x)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 256;
		*v = realloc(*v, *cap * sizeof **v);
		if (!*v)
			bench_die("out of memory");
	}
	(*v)[(*n)++] = x;
}

/* One defrag planner call's CPU time (sim_result.defrag_cpu_ms; plan_cpu_ms for a
 * tp_defrag_plan call). */
void sim_defrag_cpu_time(struct sim_result *res, uint64_t ns, bool plan)
{
	sim_push_ms(&res->defrag_cpu_ms, &res->ndefrag_cpu, &res->cap_defrag_cpu, (double)ns * 1e-6);
	if (plan)
		sim_push_ms(&res->plan_cpu_ms, &res->nplan_cpu, &res->cap_plan_cpu, (double)ns * 1e-6);
}

static uint32_t sim_free(const struct sim_run *r)
{
	return r->pol->uses_cluster ? tp_cluster_free_total_count(r->ctx.c) : r->pool_free;
}

/* Record job jid on r->devs in the cluster, as "j<jid>": tp_cluster_assign's code. The job's
 * own request goes with it, as a scheduler has it (Kueue's PodSet topology request, Slurm's
 * job record): tp_replace keeps it, and the defrag planner gives a migrant a home of that
 * shape. Without it the planner only knew the level the job sat in, which allow_less_local
 * treats as a preference: a 16-GPU job required in one NVLink rack got homes over two, and
 * the simulator refused the plan (1,418 of 3,122 plans on llm / nvl72:864 EASY, seed 3). */
static int sim_assign(struct sim_run *r, const struct sim_job *j, uint32_t jid)
{
	char id[24];
	snprintf(id, sizeof id, "j%u", jid);
	tp_job_options opts = TP_JOB_OPTIONS_INIT;
	opts.job_class = j->cls;
	opts.migratable = j->cls != TP_CLASS_INTERACTIVE;
	opts.checkpoint_s = j->checkpoint_s;
	tp_slice sl;
	tp_request shape = sim_tp_request(r->f, j, jid, &sl, id);
	shape.expected_end_s = sim_end_estimate(&r->ctx, j, jid);
	opts.shape = &shape;
	return tp_cluster_assign(r->ctx.c, id, r->devs, j->gpus, &opts);
}

static void sim_start(struct sim_run *r, uint32_t jid)
{
	const struct sim_job *j = &r->w->jobs[jid];
	double eff = 1.0;
	if (r->pol->uses_cluster) {
		int rc = sim_assign(r, j, jid);
		if (rc < 0)
			bench_die("policy %s gave job %u devices the cluster refuses: %s (%s)",
			          r->pol->name, jid, tp_err_name(rc), tp_cluster_errmsg(r->ctx.c));
		if (r->f->kind == FLEET_TORUS) { /* every placement on a torus is the job's box */
			if (!sim_torus_is_box(r->f, j, r->devs))
				bench_die("policy %s gave job %u (a %ux%ux%u box) chips that are no such box",
				          r->pol->name, jid, j->shape.box[0], j->shape.box[1],
				          j->shape.box[2]);
			r->res->box_checked++;
		}
		eff = sim_efficiency(r->f, j, r->devs, r->o->use_cost);
	} else {
		r->pool_free -= j->gpus;
	}
	r->eff[jid] = eff;
	r->busy += j->gpus;
	r->running++;
	double *rq = r->remain && r->remain[2 * jid] >= 0 ? &r->remain[2 * jid] : NULL;
	if (rq) { /* requeued after a failure: restart, redo the lost work, then the rest */
		double rs = fmax(j->checkpoint_s, 60);
		r->restart_end[jid] = r->now + rs + rq[1] / eff;
		sim_failures_charge(r->fail, 0, rs * j->gpus);
		r->end[jid] = r->restart_end[jid] + rq[0] / eff;
		heap_push(r, r->restart_end[jid], jid | SIM_EV_RESTART);
		rq[0] = -1;
	} else {
		r->start[jid] = r->now;
		r->contrib[jid] = j->gpus * eff;
		r->eff_busy += r->contrib[jid];
		r->res->started++;
		r->end[jid] = r->now + j->duration_s / eff;
	}
	heap_push(r, r->end[jid], jid);
}

/* A defrag plan moved running job jid: for its checkpoint and restart time (which grows with
 * its size, sim_checkpoint_s) it holds its new GPUs and does no useful work; then it continues
 * its remaining work at the new placement's efficiency. */
static void sim_rebound(struct sim_run *r, uint32_t jid, const uint32_t *devs, uint32_t n,
                        double restart_s, double redo)
{
	const struct sim_job *j = &r->w->jobs[jid];
	if (n != j->gpus)
		bench_die("job %u moved to %u devices, not %u", jid, n, j->gpus);
	double from = r->restart_end[jid] > r->now ? r->restart_end[jid] : r->now;
	double work = (r->end[jid] - from) * r->eff[jid]; /* seconds at full locality */
	double eff = sim_efficiency(r->f, j, devs, r->o->use_cost);
	r->eff_busy -= r->contrib[jid];
	r->contrib[jid] = 0;
	r->eff[jid] = eff;
	double old_restart = r->restart_end[jid], old_end = r->end[jid];
	r->restart_end[jid] = r->now + restart_s + redo / eff; /* neither is useful work */
	r->end[jid] = r->restart_end[jid] + (work > 0 ? work : 0) / eff;
	/* Moved twice at one instant (compaction, then the defrag hook) with the same times: the
	 * first move's events stand; twins would release the job twice in an EASY projection and
	 * count its restart twice. */
	if (r->restart_end[jid] != old_restart)
		heap_push(r, r->restart_end[jid], jid | SIM_EV_RESTART);
	if (r->end[jid] != old_end)
		heap_push(r, r->end[jid], jid);
}

static void sim_moved(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n)
{
	struct sim_run *r = ud;
	sim_rebound(r, jid, devs, n, r->w->jobs[jid].checkpoint_s, 0);
}

/* Failures (sim_failures.c): the work since the last checkpoint is lost. */
static double sim_lost_work(struct sim_run *r, uint32_t jid)
{
	double since = r->now - fmax(r->restart_end[jid], r->start[jid]);
	return since > 0 ? fmod(since, r->o->ckpt_every_s) * r->eff[jid] : 0;
}

static void sim_fail_repaired(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n)
{
	struct sim_run *r = ud;
	double lost = sim_lost_work(r, jid), rs = fmax(r->w->jobs[jid].checkpoint_s, 60);
	sim_failures_charge(r->fail, lost * n, rs * n);
	sim_rebound(r, jid, devs, n, rs, lost);
}

static void sim_finish(struct sim_run *r, uint32_t jid);
static void sim_fail_requeue(void *ud, uint32_t jid)
{
	struct sim_run *r = ud;
	double work = (r->end[jid] - fmax(r->restart_end[jid], r->now)) * r->eff[jid];
	r->remain[2 * jid] = fmax(work, 0);
	r->remain[2 * jid + 1] = sim_lost_work(r, jid);
	sim_failures_charge(r->fail, r->remain[2 * jid + 1] * r->w->jobs[jid].gpus, 0);
	sim_finish(r, jid);
	r->releases--; /* not a completion; its heap entries are stale: */
	r->end[jid] = -INFINITY;
	memmove(r->queue + 1, r->queue, r->qlen++ * sizeof *r->queue);
	r->queue[0] = jid;
}

/* A moved job's restart is over: it does useful work again. */
static void sim_restarted(struct sim_run *r, uint32_t jid, double t)
{
	if (t != r->restart_end[jid] || r->end[jid] < t)
		return; /* stale: moved again since */
	r->contrib[jid] = r->w->jobs[jid].gpus * r->eff[jid];
	r->eff_busy += r->contrib[jid];
}

/* Whether a defrag plan may move running job jid to devs: not if it would run less
 * efficiently there (the planner keeps locality; this checks the efficiency it is charged). */
static bool sim_keeps_efficiency(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n)
{
	struct sim_run *r = ud;
	const struct sim_job *j = &r->w->jobs[jid];
	if (n != j->gpus)
		bench_die("defrag would move job %u to %u devices, not %u", jid, n, j->gpus);
	return sim_efficiency(r->f, j, devs, r->o->use_cost) >= r->eff[jid] - 1e-9;
}

/* The due ends of the running jobs into due[0..n) (room for 2 x n): the ones a running job's
 * heap entry holds (a moved job's stale entries are skipped). */
static size_t sim_due_ends(const struct sim_run *r, struct sim_due *due)
{
	size_t n = 0;
	for (size_t i = 0; i < r->nheap; i++) {
		uint32_t jid = r->heap[i].job;
		if (!(jid & SIM_EV_RESTART) && r->heap[i].t == r->end[jid])
			due[n++] = (struct sim_due){r->heap[i].t, jid, r->w->jobs[jid].gpus};
	}
	return n;
}

/*
 * The pay rule's estimate of waiting job jid's wait if nothing is moved (s): until enough
 * capacity frees by itself, that is the first due end of the running jobs after which the
 * policy's placement function places it on the projected state (the jobs released in end
 * order, as the EASY reservation projects; estimates are exact here, but jobs started later
 * are not foreseen). INFINITY if it never fits so. Leaves the cluster, the rng and the EASY
 * reservation as they were.
 */
static double sim_wait_est(void *ud, uint32_t jid, double *eff)
{
	struct sim_run *r = ud;
	const struct sim_job *j = &r->w->jobs[jid];
	size_t n = sim_due_ends(r, r->running_end);
	uint32_t nlist = 0;
	long calls = 0;
	double t = sim_easy_reserve(&r->ctx, r->pol, r->st, j, jid, r->running_end, n, r->est_devs,
	                            r->est_node, r->est_list, &nlist, &calls);
	for (uint32_t k = 0; k < nlist; k++)
		r->est_node[r->est_list[k]] = 0;
	if (eff)
		*eff = isinf(t) ? 0 : sim_efficiency(r->f, j, r->est_devs, r->o->use_cost);
	return t > r->now ? t - r->now : 0;
}

static double sim_job_efficiency(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n)
{
	struct sim_run *r = ud;
	const struct sim_job *j = &r->w->jobs[jid];
	if (n != j->gpus)
		bench_die("a plan places job %u on %u devices, not %u", jid, n, j->gpus);
	return sim_efficiency(r->f, j, devs, r->o->use_cost);
}

bool sim_plan_pays(const struct sim_mover *mv, const struct sim_job *j, uint32_t jid,
                   const tp_plan *p)
{
	if (!mv->wait_est)
		return true;
	double later = 0;
	double gain = (double)j->gpus * mv->wait_est(mv->ud, jid, &later) * SIM_PAY_SHARE;
	double slower = 0; /* GPU-seconds j holds its GPUs longer where the plan puts it */
	if (mv->efficiency && later > 0) {
		const uint32_t *to;
		size_t nto, last = tp_plan_step_count(p) - 1;
		BENCH_CHECK(tp_plan_step(p, last, NULL, NULL, NULL, NULL, &to, &nto), "tp_plan_step");
		double now = mv->efficiency(mv->ud, jid, to, (uint32_t)nto);
		if (now > 0 && now < later)
			slower = (double)j->gpus * j->duration_s * (1 / now - 1 / later);
	}
	if (tp_plan_cost_s(p) + slower < gain)
		return true;
	(*mv->unpaid)++;
	return false;
}

static void sim_finish(struct sim_run *r, uint32_t jid)
{
	const struct sim_job *j = &r->w->jobs[jid];
	if (r->pol->uses_cluster) {
		char id[24];
		snprintf(id, sizeof id, "j%u", jid);
		BENCH_CHECK(tp_cluster_release(r->ctx.c, id), tp_cluster_errmsg(r->ctx.c));
	} else {
		r->pool_free += j->gpus;
	}
	r->busy -= j->gpus;
	r->eff_busy -= r->contrib[jid];
	r->contrib[jid] = 0;
	if (r->running == 1)
		r->eff_busy = 0; /* no drift from the additions */
	r->running--;
	r->releases++;
}

static bool repairing(const struct sim_run *r) { return r->fail && sim_failures_repairing(r->fail); }

/*
 * Job jid, the oldest waiting, was refused (TP_EBUSY) by a policy that wants the wait ahead
 * (topoplace's efficiency floor): project when the policy would place it as the running jobs
 * end (as the EASY reservation and the pay rule do; estimates are exact, later arrivals are
 * not foreseen) and place it again now, told that wait and that placement (ctx->ahead_s,
 * ctx->ahead_devs). The placements count as planner calls.
 */
static int sim_try_ahead(struct sim_run *r, uint32_t jid)
{
	const struct sim_job *j = &r->w->jobs[jid];
	size_t n = sim_due_ends(r, r->running_end);
	uint32_t nlist = 0;
	long calls = 0;
	uint64_t t0 = bench_now_ns();
	r->ctx.oldest = true;
	double t = sim_easy_reserve(&r->ctx, r->pol, r->st, j, jid, r->running_end, n,
	                            r->est_devs, r->est_node, r->est_list, &nlist, &calls);
	for (uint32_t k = 0; k < nlist; k++)
		r->est_node[r->est_list[k]] = 0;
	r->ctx.ahead_s = t > r->now ? t - r->now : isinf(t) ? INFINITY : 0;
	r->ctx.ahead_devs = isinf(t) ? NULL : r->est_devs;
	int rc = r->ctx.ahead_s > 0 ? r->pol->place(r->st, &r->ctx, j, jid, r->devs) : TP_EBUSY;
	r->ctx.ahead_s = 0;
	r->ctx.ahead_devs = NULL;
	uint64_t dt = bench_now_ns() - t0;
	r->res->place_calls += calls + 1;
	sim_planner_time(r->res, dt);
	return rc;
}

/*
 * The locality upgrade (topoplace-defrag; --no-upgrade: off). Job jid was just placed, by rules
 * that asked no floor, below the efficiency they give it on the empty fleet (ctx.upgrade, set
 * by topoplace's place): a 512-GPU job on NVL72 racks spread over two blocks though one block
 * held it there. Placed so, it holds its GPUs 1 / placed_eff - 1 / upgrade_eff times its work
 * longer than it would at that efficiency. The planner is asked for the moves that free one
 * domain of the level that held it (sim_defrag_make_room, as for the top job's floor), under
 * the usual cost cap and, unless --no-pay, at most SIM_PAY_SHARE of the GPU-seconds the slower
 * placement would cost; the pay rule's wait estimate does not apply (the job starts now either
 * way). With moves made, the job is placed again asking for that efficiency, and without the
 * floor if it is refused. Only outside an EASY backfill (moves there could land on the top
 * job's reserved nodes). On a fleet of several fabric classes the same for a job of several
 * GPUs put below 0.9 x its best class's efficiency, the moves asked being those that place it
 * at that efficiency (the class upgrade, bench/sim_policy.c). Returns place's code; the job's
 * devices are in r->devs.
 */
static int sim_upgrade(struct sim_run *r, uint32_t jid)
{
	const struct sim_job *j = &r->w->jobs[jid];
	struct sim_ctx *ctx = &r->ctx;
	double saved = 1 / ctx->placed_eff - 1 / ctx->upgrade_eff; /* per GPU-second of work */
	double share = r->o->no_pay ? r->o->defrag_max_cost
	                            : fmin(r->o->defrag_max_cost, SIM_PAY_SHARE * saved);
	struct sim_mover mv = {r, sim_moved, sim_keeps_efficiency, share, &r->res->defrag_refused,
	                       r->o->defrag_max_sims, r->o->defrag_max_cands, NULL,
	                       &r->res->defrag_unpaid, NULL, 0, NULL, sim_job_efficiency};
	double cost = 0;
	uint64_t d0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
	int moves = sim_defrag_make_room(ctx, j, jid, &mv, &cost);
	ctx->upgrade = false;
	sim_defrag_cpu_time(r->res, bench_thread_cpu_ns() - c0, true);
	sim_planner_time(r->res, bench_now_ns() - d0);
	r->res->upgrade_calls++;
	if (moves <= 0)
		return 0; /* the first placement stands */
	r->res->upgrade_moves += moves;
	r->res->upgrade_cost_s += cost;
	r->res->defrag_moves += moves;
	r->res->defrag_cost_s += cost;
	d0 = bench_now_ns();
	ctx->want_eff = ctx->upgrade_eff;
	int rc = r->pol->place(r->st, ctx, j, jid, r->devs);
	ctx->want_eff = 0;
	if (rc != 0)
		rc = r->pol->place(r->st, ctx, j, jid, r->devs);
	ctx->upgrade = false;
	sim_planner_time(r->res, bench_now_ns() - d0);
	r->res->place_calls++;
	return rc;
}

static int sim_try(struct sim_run *r, uint32_t jid)
{
	const struct sim_job *j = &r->w->jobs[jid];
	if (j->gpus > sim_free(r))
		return TP_EBUSY;
	if (!r->pol->uses_cluster)
		return 0;
	uint64_t t0 = bench_now_ns();
	int rc = r->pol->place(r->st, &r->ctx, j, jid, r->devs);
	uint64_t dt = bench_now_ns() - t0;
	r->head_frag |= rc == TP_EFRAGMENTED && r->oldest;
	r->behind_frag |= rc == TP_EFRAGMENTED && r->head_count;
	r->head_floor |= rc == TP_EBUSY && r->ctx.floor_refused && r->oldest;
	r->res->place_us_mean += (double)dt * 1e-3;
	r->res->place_calls++;
	sim_planner_time(r->res, dt);
	/* The planner is costly: as a periodic defrag cycle, it runs at most once per pass and
	 * per --defrag-every-s of simulated time, for one job, and not again for a job it found no
	 * plan for until some job has finished. The job is the oldest waiting one or, while that
	 * one has more GPUs than are free (no plan can start it; besteffort and EASY), the first
	 * fragmented job behind it (docs/benchmarks.md "Room for the job behind the head"); under
	 * EASY its moves keep off the top job's reserved nodes, which a placeholder holds while
	 * the planner runs. Also under EASY: without it there (measured, docs/benchmarks.md "The
	 * pay rule and compaction for the head") the LLM mix was level over 10 seeds and the
	 * Philly cells of the quick grid lost 0.4-0.5%. */
	bool floor_wait = rc == TP_EBUSY && r->ctx.floor_refused; /* the top job's floor */
	if ((rc == TP_EFRAGMENTED || floor_wait) && r->pol->defrag &&
	    (r->oldest || r->head_count) && !r->defrag_tried &&
	    (r->o->queue != SIM_QUEUE_EASY || r->post_pass || r->o->defrag_before_backfill) &&
	    r->now >= r->next_defrag &&
	    !(jid == r->nodefrag_job && r->releases == r->nodefrag_releases)) {
		double cost = 0;
		struct sim_mover mv = {r, sim_moved, sim_keeps_efficiency, r->o->defrag_max_cost,
		                       &r->res->defrag_refused, r->o->defrag_max_sims,
		                       r->o->defrag_max_cands, r->o->no_pay ? NULL : sim_wait_est,
		                       &r->res->defrag_unpaid, NULL, 0, NULL,
		                       r->o->no_pay_slowdown ? NULL : sim_job_efficiency};
		if (!r->oldest && r->resv_on) { /* EASY: not on the top job's reserved nodes */
			mv.pin = r->resv_list;
			mv.npin = r->nresv;
			mv.pin_node = r->resv_node;
		}
		uint32_t pinned_free = mv.npin ? sim_easy_free_on(&r->ctx, mv.pin, mv.npin) : 0;
		r->defrag_tried = true;
		r->next_defrag = r->now + r->o->defrag_every_s;
		uint64_t d0 = bench_now_ns(), c0 = bench_thread_cpu_ns();
		int moves = sim_defrag_make_room(&r->ctx, j, jid, &mv, &cost);
		if (moves > 0 && mv.npin) { /* moves may free reserved GPUs, never take them */
			uint32_t now_free = sim_easy_free_on(&r->ctx, mv.pin, mv.npin);
			if (now_free < pinned_free)
				bench_die("sim: the plan for job %u took %u of the top job's reserved GPUs",
				          jid, pinned_free - now_free);
			r->resv_free = now_free;
		}
		sim_defrag_cpu_time(r->res, bench_thread_cpu_ns() - c0, true);
		r->res->defrag_calls++;
		r->res->defrag_us_mean += (double)(bench_now_ns() - d0) * 1e-3;
		sim_planner_time(r->res, bench_now_ns() - d0);
		if (moves <= 0) {
			r->nodefrag_job = jid;
			r->nodefrag_releases = r->releases;
		} else {
			r->res->defrag_moves += moves;
			r->res->defrag_cost_s += cost;
			d0 = bench_now_ns();
			rc = r->pol->place(r->st, &r->ctx, j, jid, r->devs);
			sim_planner_time(r->res, bench_now_ns() - d0);
			r->res->place_calls++;
		}
	}
	if (rc == 0 && r->ctx.upgrade && r->pol->defrag && !r->resv_on)
		rc = sim_upgrade(r, jid);
	r->ctx.upgrade = false;
	return rc;
}

const char *const sim_queue_names[3] = {"besteffort", "strict", "easy"};

bool sim_queue_parse(const char *name, enum sim_queue *q)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(name, sim_queue_names[i])) {
			*q = (enum sim_queue)i;
			return true;
		}
	return false;
}

static void sim_memo_set(struct sim_run *r, uint16_t key)
{
	r->memo[key] = 1;
	r->memo_set[r->nmemo++] = key;
}

/* Whether this run's policy reserves on the devices busy now first (--reserve-busy). */
static bool sim_reserves_busy(const struct sim_run *r)
{
	return r->o->reserve_busy == SIM_RESERVE_ALL ||
	       (r->o->reserve_busy == SIM_RESERVE_OURS && !strncmp(r->pol->name, "topoplace", 9));
}

/* The reservation of top job j again on the devices busy now (sim_easy_reserve_busy), at the
 * shadow time sim_easy_reserve found; kept where it fits so. */
static void sim_reserve_busy(struct sim_run *r, const struct sim_job *j, uint32_t top)
{
	size_t n = sim_due_ends(r, r->running_end);
	uint32_t *devs = r->busy_devs, *buf = r->busy_devs + r->f->gpus;
	r->res->resv_calls++;
	if (!sim_easy_reserve_busy(&r->ctx, r->pol, r->st, j, top, r->running_end, n, r->shadow,
	                           devs, buf))
		return;
	r->res->resv_busy++;
	for (uint32_t k = 0; k < r->nresv; k++)
		r->resv_node[r->resv_list[k]] = 0;
	r->nresv = 0;
	memcpy(r->resv_devs, devs, j->gpus * sizeof *devs);
	for (uint32_t i = 0; i < j->gpus; i++) {
		uint32_t node = tp_topology_device_node(r->f->t, devs[i]);
		if (!r->resv_node[node]) {
			r->resv_node[node] = 1;
			r->resv_list[r->nresv++] = node;
		}
	}
}

/*
 * The EASY reservation of the top job (Slurm's sched/backfill), once per pass, assuming the
 * running jobs end when they are due (the simulator knows each running job's end: estimates
 * are exact). On a cluster policy it is a set of nodes (sim_easy_reserve): the shadow time is
 * the first end time after which the policy's own placement function places the top job on
 * the projected state, and the nodes of that placement are reserved. The ideal bound has no
 * nodes: its shadow is the first time enough GPUs are free, and r->extra the GPUs free then
 * that the top job does not need.
 */
static void sim_reservation(struct sim_run *r, uint32_t top)
{
	const struct sim_job *j = &r->w->jobs[top];
	r->resv_on = true;
	/* The same top job on the same state (nothing started, ended or moved since): the same
	 * reservation. */
	uint64_t key[4] = {top, r->releases, r->res->started,
	                   (uint64_t)(r->res->defrag_moves + r->res->compact_moves)};
	if (r->resv_valid && !memcmp(key, r->resv_key, sizeof key)) {
		r->extra = r->resv_extra;
		r->resv_free = sim_easy_free_on(&r->ctx, r->resv_list, r->nresv);
		return;
	}
	memcpy(r->resv_key, key, sizeof key);
	r->resv_valid = true;
	struct sim_due *due = r->running_end;
	size_t n = sim_due_ends(r, due);
	for (uint32_t k = 0; k < r->nresv; k++)
		r->resv_node[r->resv_list[k]] = 0;
	r->nresv = 0;
	if (!r->pol->uses_cluster) {
		r->shadow = sim_easy_count(due, n, sim_free(r), j->gpus, r->now, &r->resv_extra);
		r->extra = r->resv_extra;
		return;
	}
	bool oldest = r->ctx.oldest;
	r->ctx.oldest = true; /* the top job */
	r->shadow = sim_easy_reserve(&r->ctx, r->pol, r->st, j, top, due, n, r->resv_devs,
	                             r->resv_node, r->resv_list, &r->nresv, &r->res->resv_calls);
	if (!isinf(r->shadow) && sim_reserves_busy(r))
		sim_reserve_busy(r, j, top);
	r->ctx.oldest = oldest;
	r->resv_free = sim_easy_free_on(&r->ctx, r->resv_list, r->nresv);
}

/* Whether job j, which would end after the shadow time, cannot start now without the
 * reserved capacity: more GPUs than are free off the reserved nodes (or, for the ideal bound,
 * than the top job leaves free at the shadow). */
static bool sim_needs_reserved(const struct sim_run *r, const struct sim_job *j)
{
	if (r->pol->uses_cluster)
		return j->gpus > sim_free(r) - r->resv_free;
	return j->gpus > r->extra;
}

/* Job jid fits now at r->devs and ends at `end`: whether EASY lets it start (from r->devs). A
 * job that ends by the shadow time always may; a later one only off the reserved nodes: when
 * the policy put it on one, it is placed again with the reserved nodes taken away, as Slurm's
 * backfill hides them from a job that overlaps the reservation, and refused if it does not
 * fit so. The ideal bound: within the spare GPU count, which it then uses up. */
static bool sim_easy_admits(struct sim_run *r, uint32_t jid, double end)
{
	const struct sim_job *j = &r->w->jobs[jid];
	if (r->pol->uses_cluster) {
		uint32_t on = sim_easy_overlap(&r->ctx, r->resv_node, r->devs, j->gpus);
		if (end > r->shadow && on > 0) {
			uint64_t t0 = bench_now_ns();
			int rc = sim_easy_place_off(&r->ctx, r->pol, r->st, j, jid, r->resv_list, r->nresv,
			                            r->devs, r->resv_devs);
			uint64_t dt = bench_now_ns() - t0;
			r->res->place_us_mean += (double)dt * 1e-3;
			r->res->place_calls++;
			sim_planner_time(r->res, dt);
			if (rc != 0) {
				r->res->resv_refused++;
				return false;
			}
			r->res->resv_elsewhere++;
			return true;
		}
		r->resv_free -= on;
		return true;
	}
	if (end <= r->shadow)
		return true;
	if (j->gpus > r->extra)
		return false;
	r->extra -= j->gpus;
	return true;
}

/*
 * The head guard (topoplace under StrictFIFO; --no-head-guard: off). A StrictFIFO pass starts
 * jobs in order until one does not fit, the blocked job H, and nothing passes H until it
 * starts; the jobs started ahead of it go where best fit and the expected end put them, which
 * may be on the nodes H would otherwise get as the running jobs end, so that H waits for them
 * too. The pass is therefore first run dry (on a savepoint, rolled back; strict_dry_pass),
 * twice: as it is, and with every job ahead of H that would still run at H's shadow time and
 * sits on H's reserved nodes placed off them where it fits elsewhere (guard_off, as EASY
 * places a backfilled job off the top job's nodes). The reservation is EASY's
 * (sim_easy_reserve) for H on the state before the pass. After each dry run H's shadow time
 * is projected on the state the jobs ahead leave; the real pass keeps the guard only if the
 * same jobs start and H's shadow is earlier with it. Only for an H of at least
 * HEAD_GUARD_MIN_GPUS GPUs (8 HGX nodes, 16 NVL72 trays): with every size, the heads of one
 * or two nodes (the Philly mixes' 8-GPU jobs on nvl72:864) lost 0.9-1.2 points over the best
 * peer on the three nvl72:864 StrictFIFO cells; with 16 or 32 the Philly mixes' cells moved
 * both ways within their spreads; with 64 they are as without the guard, and the LLM cells
 * gain as much as with 16; with 128 the LLM cells gain less (docs/benchmarks.md, "The head
 * guard"). Not for topoplace-defrag, which moves jobs
 * instead: measured level on the LLM StrictFIFO cells. Both dry runs together count as one
 * planner call in the latency figures.
 */
#define HEAD_GUARD_MIN_GPUS 64

/* Job jid placed at r->devs: if it ends after the shadow time and uses a reserved node, place
 * it again with the reserved nodes held; true if it then fits (r->devs holds the new
 * placement), false if the first placement stands. */
static bool guard_off(struct sim_run *r, const struct sim_job *j, uint32_t jid)
{
	double end = r->now + j->duration_s / sim_efficiency(r->f, j, r->devs, r->o->use_cost);
	if (!(end > r->shadow) || sim_easy_overlap(&r->ctx, r->resv_node, r->devs, j->gpus) == 0)
		return false;
	uint32_t *prev = r->busy_devs, *buf = r->busy_devs + r->f->gpus;
	memcpy(prev, r->devs, j->gpus * sizeof *prev);
	int rc = sim_easy_place_off(&r->ctx, r->pol, r->st, j, jid, r->resv_list, r->nresv,
	                            r->devs, buf);
	r->res->place_calls++;
	if (rc != 0) {
		memcpy(r->devs, prev, j->gpus * sizeof *prev);
		return false;
	}
	return true;
}

/* The StrictFIFO pass run dry on a savepoint (rolled back), with the guard or without: the
 * blocked job into *h (UINT32_MAX: none, also when the pass's --backfill tries run out first,
 * as the real pass then tries no further job), the number of jobs started ahead of it into
 * *m, and the blocked job's shadow time on the state they leave (INFINITY: none). */
static double strict_dry_pass(struct sim_run *r, bool guard, uint32_t *h, size_t *m)
{
	tp_cluster *c = r->ctx.c;
	struct sim_due *due = r->running_end;
	size_t n = sim_due_ends(r, due), sp;
	*h = UINT32_MAX;
	*m = 0;
	BENCH_CHECK(tp_cluster_savepoint(c, &sp), tp_cluster_errmsg(c));
	for (size_t i = 0; i < r->qlen && i < r->o->backfill; i++) {
		uint32_t jid = r->queue[i];
		const struct sim_job *j = &r->w->jobs[jid];
		int rc = TP_EBUSY;
		if (j->gpus <= sim_free(r)) {
			r->ctx.oldest = i == 0;
			rc = r->pol->place(r->st, &r->ctx, j, jid, r->devs);
			r->ctx.upgrade = false;
			r->res->place_calls++;
		}
		if (rc == TP_EINFEASIBLE)
			continue; /* rejected in the real pass */
		if (rc != 0) {
			*h = jid;
			break;
		}
		if (guard)
			guard_off(r, j, jid);
		BENCH_CHECK(sim_assign(r, j, jid), tp_cluster_errmsg(c));
		double eff = sim_efficiency(r->f, j, r->devs, r->o->use_cost);
		due[n++] = (struct sim_due){r->now + j->duration_s / eff, jid, j->gpus};
		(*m)++;
	}
	double shadow = INFINITY;
	if (*h != UINT32_MAX && *m > 0) {
		uint32_t nl = 0;
		r->ctx.oldest = true;
		shadow = sim_easy_reserve(&r->ctx, r->pol, r->st, &r->w->jobs[*h], *h, due, n,
		                          r->guard_devs, r->guard_node, r->guard_list, &nl,
		                          &r->res->resv_calls);
		for (uint32_t k = 0; k < nl; k++)
			r->guard_node[r->guard_list[k]] = 0;
	}
	BENCH_CHECK(tp_cluster_rollback(c, sp), tp_cluster_errmsg(c));
	return shadow;
}

/* Whether this StrictFIFO pass runs with the head guard; if so the blocked job's reservation
 * (before the pass) is in r->resv_node / resv_list and its shadow time in r->shadow. Leaves
 * the cluster and the rng as they were. */
static bool sim_head_guard(struct sim_run *r)
{
	uint64_t t0 = bench_now_ns();
	const struct bench_rng rng = r->ctx.rng;
	for (uint32_t k = 0; k < r->nresv; k++)
		r->resv_node[r->resv_list[k]] = 0;
	r->nresv = 0;
	r->resv_valid = false;
	uint32_t h, hg;
	size_t m, mg;
	double plain = strict_dry_pass(r, false, &h, &m);
	bool on = false;
	if (h != UINT32_MAX && m > 0 && r->w->jobs[h].gpus >= HEAD_GUARD_MIN_GPUS) {
		struct sim_due *due = r->running_end;
		size_t n = sim_due_ends(r, due);
		r->ctx.oldest = true;
		r->shadow = sim_easy_reserve(&r->ctx, r->pol, r->st, &r->w->jobs[h], h, due, n,
		                             r->resv_devs, r->resv_node, r->resv_list, &r->nresv,
		                             &r->res->resv_calls);
		if (!isinf(r->shadow) && r->nresv > 0) {
			double guarded = strict_dry_pass(r, true, &hg, &mg);
			on = hg == h && mg == m && guarded < plain;
		}
	}
	r->ctx.rng = rng;
	r->ctx.upgrade = false;
	r->res->guard_passes += on;
	sim_planner_time(r->res, bench_now_ns() - t0);
	return on;
}

/*
 * One pass over the queue at the current time, in submission order (every job has the same
 * priority, so Slurm's priority order is the age order too). Each job is tried in turn, at most
 * --backfill jobs per pass; a job whose shape already failed in this pass is skipped (starting
 * jobs only take capacity away, so it would fail again).
 *   besteffort (Kueue BestEffortFIFO): a job that cannot start is set aside, the next is tried;
 *   strict (Kueue StrictFIFO): the first job that cannot start ends the pass;
 *   easy (Slurm main scheduler + EASY backfill): jobs start in order up to the first that
 *     cannot (the top job); it gets a reservation (sim_reservation: a shadow time and the
 *     nodes the policy would give it then), and a later job starts only if it fits now and
 *     either ends by the shadow time or uses none of the reserved nodes. A job refused for
 *     that is not a shape failure (another job of its shape may land elsewhere).
 * With --starve-h H > 0, once the oldest waiting job has waited H hours nothing may pass it.
 * After the pass, a policy that sets ctx.wants_ahead tries the oldest job again if it was
 * refused with enough GPUs free (sim_try_ahead).
 */
static void sim_schedule(struct sim_run *r)
{
	size_t scanned = 0, out = 0;
	bool strict = false, blocked = false, head_busy = false;
	uint32_t top = UINT32_MAX; /* the EASY top job, its reservation not yet computed */
	enum sim_queue q = r->o->queue;
	bool guard = q == SIM_QUEUE_STRICT && !r->o->no_head_guard && r->qlen > 1 &&
	             !strcmp(r->pol->name, "topoplace") && sim_head_guard(r);
	r->defrag_tried = false;
	r->head_count = false;
	for (size_t i = 0; i < r->qlen; i++) {
		uint32_t jid = r->queue[i];
		const struct sim_job *j = &r->w->jobs[jid];
		bool keep = true;
		if (out == 0 && r->o->starve_h > 0) /* j is the oldest job still waiting */
			strict = r->now - j->submit_s > r->o->starve_h * 3600;
		r->oldest = out == 0;
		r->ctx.oldest = r->oldest;
		bool may_try = scanned < r->o->backfill && (!strict || out == 0) && !blocked &&
		               !r->memo[j->shape_key];
		if (may_try && top != UINT32_MAX) { /* computed when a later job needs it */
			sim_reservation(r, top);
			top = UINT32_MAX;
		}
		if (may_try && r->resv_on && r->now + j->duration_s > r->shadow &&
		    sim_needs_reserved(r, j))
			may_try = false; /* EASY: it would delay the top job wherever it went */
		if (may_try) {
			scanned++;
			int rc = sim_try(r, jid);
			head_busy |= rc == TP_EBUSY && out == 0;
			/* The oldest job waits for GPUs to end, not for a shape: the defrag hook may
			 * make room for a job behind it instead (--no-defrag-behind: off). */
			if (out == 0 && rc == TP_EBUSY && j->gpus > sim_free(r) && q != SIM_QUEUE_STRICT &&
			    !r->o->no_defrag_behind)
				r->head_count = true;
			if (rc == 0 && r->resv_on) { /* EASY: does it delay the top job? */
				double end = r->now + j->duration_s / (r->pol->uses_cluster ?
				             sim_efficiency(r->f, j, r->devs, r->o->use_cost) : 1.0);
				if (!sim_easy_admits(r, jid, end))
					goto kept; /* not a shape failure: no memo */
			}
			if (rc == 0 && guard && guard_off(r, j, jid))
				r->res->guard_moved++;
			if (rc == 0) {
				sim_start(r, jid);
				keep = false;
			} else if (rc == TP_EINFEASIBLE) {
				r->res->rejected++;
				keep = false;
			} else {
				sim_memo_set(r, j->shape_key);
				if (q == SIM_QUEUE_STRICT) {
					blocked = true;
				} else if (q == SIM_QUEUE_EASY && !r->resv_on && top == UINT32_MAX) {
					top = jid;
				}
			}
		}
	kept:
		if (keep)
			r->queue[out++] = jid;
	}
	r->qlen = out;
	/* The oldest job was refused (TP_EBUSY) with enough GPUs free, and every job after it
	 * had its try: a policy that wants it (topoplace's floor) is asked once more, told the
	 * wait ahead (sim_try_ahead), so that it may take GPUs nothing else took this pass. */
	if (r->qlen && r->ctx.wants_ahead && head_busy && r->w->jobs[r->queue[0]].gpus <=
	    sim_free(r) && sim_try_ahead(r, r->queue[0]) == 0) {
		sim_start(r, r->queue[0]);
		memmove(r->queue, r->queue + 1, --r->qlen * sizeof *r->queue);
	}
	r->resv_on = false; /* kept for the next pass while nothing changes */
	for (size_t i = 0; i < r->nmemo; i++)
		r->memo[r->memo_set[i]] = 0;
	r->nmemo = 0;
}

/* After a pass in which the oldest waiting job (queue[0]; under EASY the top job) was
 * fragmented: under EASY its shadow time (the pass's reservation, or computed afresh when the
 * pass had no later job that needed it), INFINITY under the other disciplines (the pay rule
 * estimates the wait itself); NAN without compaction or an empty queue. */
static double sim_top_shadow(struct sim_run *r)
{
	if (!r->compact || r->qlen == 0)
		return NAN;
	if (r->o->queue != SIM_QUEUE_EASY)
		return INFINITY; /* no reservation: the pay rule's estimate decides */
	uint32_t top = r->queue[0];
	uint64_t key[4] = {top, r->releases, r->res->started,
	                   (uint64_t)(r->res->defrag_moves + r->res->compact_moves)};
	if (!r->resv_valid || memcmp(key, r->resv_key, sizeof key))
		sim_reservation(r, top);
	r->resv_on = false;
	return r->shadow;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void sim_summarise(struct sim_run *r)
{
	struct sim_result *res = r->res;
	const struct sim_workload *w = r->w;
	double *waits = malloc((w->n ? w->n : 1) * sizeof *waits);
	size_t nw = 0, full = 0;
	double gpu_h = 0, full_gpu_h = 0, eff_sum = 0;
	for (size_t i = 0; i < w->n; i++) {
		if (r->start[i] < 0)
			continue;
		waits[nw++] = r->start[i] - w->jobs[i].submit_s;
		double run = w->jobs[i].duration_s / r->eff[i] * w->jobs[i].gpus;
		gpu_h += run;
		eff_sum += r->eff[i];
		if (r->eff[i] >= 0.999) {
			full++;
			full_gpu_h += run;
		}
	}
	res->mean_wait_s = bench_mean(waits, nw);
	qsort(waits, nw, sizeof *waits, cmp_double);
	res->p95_wait_s = bench_quantile(waits, nw, 0.95);
	res->wait_p50_s = bench_quantile(waits, nw, 0.50);
	res->max_wait_s = nw ? waits[nw - 1] : 0;
	for (int q = 0; q <= 100; q++)
		res->wait_pct[q] = bench_quantile(waits, nw, q / 100.0);
	free(waits);
	res->full_locality_share = nw ? (double)full / (double)nw : 0;
	res->full_locality_gpu_share = gpu_h > 0 ? full_gpu_h / gpu_h : 0;
	res->mean_eff = nw ? eff_sum / (double)nw : 0;
	res->makespan_s = r->now;
	double win = r->w1 - r->w0;
	res->occupancy = win > 0 ? r->busy_win / (r->f->gpus * win) : 0;
	res->occupancy_all = r->now > 0 ? r->busy_all / (r->f->gpus * r->now) : 0;
	res->eff_gpu_h = r->eff_win / 3600;
	res->eff_share = r->busy_win > 0 ? r->eff_win / r->busy_win : 0;
	res->unfinished = w->n - res->started - res->rejected;
	if (res->place_calls)
		res->place_us_mean /= (double)res->place_calls;
	res->planner_total_s = 0;
	for (size_t i = 0; i < res->nplanner; i++)
		res->planner_total_s += res->planner_ms[i] * 1e-3;
	res->planner_p99_ms = bench_quantile(res->planner_ms, res->nplanner, 0.99);
	if (res->defrag_calls)
		res->defrag_us_mean /= (double)res->defrag_calls;
	res->defrag_p50_ms = bench_quantile(res->defrag_cpu_ms, res->ndefrag_cpu, 0.50);
	res->defrag_p99_ms = bench_quantile(res->defrag_cpu_ms, res->ndefrag_cpu, 0.99);
	res->plan_p50_ms = bench_quantile(res->plan_cpu_ms, res->nplan_cpu, 0.50);
	res->plan_p99_ms = bench_quantile(res->plan_cpu_ms, res->nplan_cpu, 0.99);
	double fn = 0, fd = 0, bx = 0, fg = 0, bs = 0;
	size_t ns = 0, nbs = 0;
	for (size_t i = 0; i < res->nsamples; i++) {
		const struct sim_sample *s = &res->samples[i];
		if (s->t < r->w0 || s->t > r->w1)
			continue;
		fn += s->frag_nv;
		fd += s->frag_node;
		bx += s->box_free;
		fg += s->fragments;
		if (s->busy < r->f->gpus) { /* the largest free box as a share of the free chips */
			bs += (double)s->box_free / (double)(r->f->gpus - s->busy);
			nbs++;
		}
		ns++;
	}
	res->frag_nv_mean = ns ? fn / (double)ns : 0;
	res->frag_node_mean = ns ? fd / (double)ns : 0;
	res->box_free_mean = ns ? bx / (double)ns : 0;
	res->fragments_mean = ns ? fg / (double)ns : 0;
	res->box_free_share_mean = nbs ? bs / (double)nbs : 0;
}

void sim_run_policy(const struct sim_opts *o, const struct sim_fleet *f,
                    const struct sim_workload *w, double w0, double w1, struct sim_result *res)
{
	struct sim_run r;
	memset(&r, 0, sizeof r);
	r.o = o;
	r.f = f;
	r.w = w;
	r.pol = res->pol;
	r.res = res;
	r.w0 = w0;
	r.w1 = w1;
	r.pool_free = f->gpus;
	r.nodefrag_job = UINT32_MAX;
	r.ctx.f = f;
	r.ctx.floor_search = o->floor_search;
	r.ctx.floor_ahead = o->floor_ahead;
	r.ctx.fabric_fit = o->fabric_fit;
	r.ctx.end_over = o->end_over;
	r.ctx.end_seed = o->seed;
	r.ctx.top_floor = o->queue == SIM_QUEUE_EASY ? o->top_floor : 0;
	r.ctx.upgrade_on = res->pol->defrag && !o->no_upgrade && f->kind != FLEET_TORUS;
	r.ctx.defrag_floor = !o->no_defrag_floor;
	r.ctx.defrag_best = !o->no_defrag_best && o->queue != SIM_QUEUE_STRICT;
	r.ctx.strict_fifo = o->queue == SIM_QUEUE_STRICT;
	/* Moves less local only where a job can spread over more nodes of its NVLink domain and
	 * run as fast (NVL72 racks): where the domain is the node (HGX, and the mixed fleet by its
	 * levels), a less local home crosses the network, which the efficiency check refuses for
	 * every job of several GPUs, and the plans refused cost the ones that would start the job
	 * (docs/benchmarks.md, "Moves less local where the moved job runs as fast"). */
	r.ctx.defrag_less_local = !o->no_defrag_less_local && f->nv_level < f->node_level;
	res->last_empty_s = -INFINITY;
	bench_rng_seed(&r.ctx.rng, o->seed ^ 0x5151u);
	size_t n = w->n ? w->n : 1;
	r.queue = malloc(n * sizeof *r.queue);
	r.eff = malloc(n * sizeof *r.eff);
	r.start = malloc(n * sizeof *r.start);
	r.end = malloc(n * sizeof *r.end);
	r.contrib = calloc(n, sizeof *r.contrib);
	r.restart_end = calloc(n, sizeof *r.restart_end);
	r.running_end = malloc(2 * n * sizeof *r.running_end); /* sim_easy_reserve's room */
	r.resv_node = calloc(tp_topology_node_count(f->t), 1);
	r.resv_list = malloc(tp_topology_node_count(f->t) * sizeof *r.resv_list);
	r.resv_devs = malloc(2 * (size_t)f->gpus * sizeof *r.resv_devs);
	r.busy_devs = malloc(2 * (size_t)f->gpus * sizeof *r.busy_devs);
	r.est_node = calloc(tp_topology_node_count(f->t), 1);
	r.est_list = malloc(tp_topology_node_count(f->t) * sizeof *r.est_list);
	r.est_devs = malloc(2 * (size_t)f->gpus * sizeof *r.est_devs);
	r.guard_node = calloc(tp_topology_node_count(f->t), 1);
	r.guard_list = malloc(tp_topology_node_count(f->t) * sizeof *r.guard_list);
	r.guard_devs = malloc(2 * (size_t)f->gpus * sizeof *r.guard_devs);
	r.devs = malloc(f->gpus * sizeof *r.devs);
	r.memo = calloc(65536, 1);
	r.memo_set = malloc(65536 * sizeof *r.memo_set);
	r.ctx.scratch = malloc(f->gpus * sizeof *r.ctx.scratch);
	if (!r.queue || !r.eff || !r.start || !r.end || !r.devs || !r.memo || !r.memo_set ||
	    !r.ctx.scratch || !r.contrib || !r.restart_end || !r.running_end || !r.resv_node ||
	    !r.resv_list || !r.resv_devs || !r.busy_devs || !r.est_node || !r.est_list || !r.est_devs ||
	    !r.guard_node || !r.guard_list || !r.guard_devs)
		bench_die("out of memory");
	for (size_t i = 0; i < w->n; i++) {
		r.start[i] = -1;
		r.restart_end[i] = -INFINITY;
	}
	if (r.pol->uses_cluster)
		BENCH_CHECK(tp_cluster_create(&r.ctx.c, f->t, NULL), "tp_cluster_create");
	r.st = r.pol->create(&r.ctx);

	uint64_t t0 = bench_now_ns(), last = t0;
	size_t next = 0;
	r.now = w->n ? w->jobs[0].submit_s : 0;
	r.next_sample = r.now;
	struct sim_fail_hooks fh = {&r, sim_fail_repaired, sim_fail_requeue};
	if ((r.fail = sim_failures_create(o, f, w, r.pol, r.ctx.c, res, r.now)))
		r.remain = sim_failures_remain(n);
	r.compact = sim_compact_create(o, f, r.pol, r.now);
	struct sim_mover cmv = {&r, sim_moved, sim_keeps_efficiency, 0, &res->defrag_refused,
	                        0, 0, o->no_pay ? NULL : sim_wait_est, &res->compact_unpaid,
	                        NULL, 0, NULL,
	                        o->no_pay_slowdown ? NULL : sim_job_efficiency};
	while (next < w->n || r.nheap > 0 || (r.qlen && repairing(&r))) {
		double t_arr = next < w->n ? w->jobs[next].submit_s : INFINITY;
		double t_end = r.nheap ? r.heap[0].t : INFINITY;
		double t = t_arr < t_end ? t_arr : t_end;
		if (r.fail && sim_failures_next(r.fail) < t)
			t = sim_failures_next(r.fail);
		sim_advance(&r, t);
		while (r.nheap && r.heap[0].t <= t) {
			struct sim_ev ev = heap_pop(&r);
			if (ev.job & SIM_EV_RESTART)
				sim_restarted(&r, ev.job & ~SIM_EV_RESTART, ev.t);
			else if (ev.t == r.end[ev.job]) { /* else a stale entry of a moved job */
				sim_finish(&r, ev.job);
				r.end[ev.job] = -INFINITY; /* a move without restart time left a twin */
			}
		}
		if (r.fail)
			sim_failures_due(r.fail, t, &fh);
		while (next < w->n && w->jobs[next].submit_s <= t)
			r.queue[r.qlen++] = (uint32_t)next++;
		r.head_frag = r.head_floor = r.behind_frag = false;
		sim_schedule(&r);
		/* EASY: the planner runs for the top job after backfill has had the free GPUs, in a
		 * second pass (its in-pass run stands aside): a plan then moves jobs only into what
		 * backfill left idle. Before backfill its moves took the holes backfill would have
		 * filled: on l4:2304 (llm, seeds 1-3) topoplace-defrag lost 0.37% to topoplace so,
		 * and gains 0.09% so (docs/benchmarks.md, "The defrag hook after backfill"). */
		if ((r.head_frag || r.head_floor || r.behind_frag) && o->queue == SIM_QUEUE_EASY &&
		    r.pol->defrag && !o->defrag_before_backfill) {
			r.head_frag = r.head_floor = r.behind_frag = false;
			r.post_pass = true;
			sim_schedule(&r);
			r.post_pass = false;
		}
		uint32_t head = r.qlen ? r.queue[0] : 0;
		if (r.head_frag && sim_compact_run(r.compact, r.ctx.c, w, r.queue, r.qlen, r.now,
		                                   r.releases, sim_top_shadow(&r), &cmv, res) > 0) {
			sim_schedule(&r);
			res->compact_head_started += r.start[head] == r.now;
		}
		if (r.qlen > 0 && r.nheap == 0 && next == w->n && !repairing(&r)) {
			/* Nothing runs, nothing arrives, and the queue cannot start: give up on it. */
			if (getenv("TP_BENCH_DEBUG"))
				for (size_t i = 0; i < r.qlen; i++)
					fprintf(stderr, "sim: %s: job %u (%u GPUs, class %d) never fits: %s\n",
					        r.pol->name, r.queue[i], w->jobs[r.queue[i]].gpus,
					        w->jobs[r.queue[i]].cls, tp_err_name(sim_try(&r, r.queue[i])));
			res->rejected += r.qlen;
			r.qlen = 0;
		}
		uint64_t now = bench_now_ns();
		/* a terminal gets a line redrawn 4 times a second, a log file one line per 10 s */
		bool tty = bench_stderr_tty();
		if (now - last > (tty ? 250000000u : 10000000000u)) {
			bench_progress(!tty, "sim: %s: %.1f of %.1f days simulated, %llu of %zu jobs done, "
			               "%zu queued, %.0f s", r.pol->name, r.now / 86400,
			               w->n ? w->jobs[w->n - 1].submit_s / 86400 : 0,
			               (unsigned long long)r.releases, w->n, r.qlen,
			               (double)(now - t0) * 1e-9);
			last = now;
		}
	}
	sim_take_sample(&r, r.now);
	res->wall_s = (double)(bench_now_ns() - t0) * 1e-9;
	sim_summarise(&r);
	if (r.pol->uses_cluster) {
		char buf[256];
		if (tp_cluster_check(r.ctx.c, buf, sizeof buf) < 0)
			bench_die("tp_cluster_check after policy %s: %s", r.pol->name, buf);
	}
	r.pol->destroy(r.st);
	sim_failures_destroy(r.fail);
	sim_compact_destroy(r.compact);
	free(r.remain);
	tp_cluster_destroy(r.ctx.c);
	free(r.queue);
	free(r.heap);
	free(r.eff);
	free(r.start);
	free(r.end);
	free(r.contrib);
	free(r.restart_end);
	free(r.running_end);
	free(r.resv_node);
	free(r.resv_list);
	free(r.resv_devs);
	free(r.busy_devs);
	free(r.est_node);
	free(r.est_list);
	free(r.est_devs);
	free(r.guard_node);
	free(r.guard_list);
	free(r.guard_devs);
	free(r.devs);
	free(r.memo);
	free(r.memo_set);
	free(r.ctx.scratch);
	if (!o->quiet)
		bench_progress(true, "sim: %s: %zu jobs in %.1f s of wall time; planner %ld calls, "
		               "p99 %.3f ms, %.2f s in all", r.pol->name, res->started, res->wall_s,
		               (long)res->nplanner, res->planner_p99_ms, res->planner_total_s);
}

void sim_window(const struct sim_workload *w, double *w0, double *w1)
{
	double span = w->n ? w->jobs[w->n - 1].submit_s - w->jobs[0].submit_s : 0;
	*w0 = w->n ? w->jobs[0].submit_s + 0.15 * span : 0;
	*w1 = w->n ? w->jobs[w->n - 1].submit_s : 0;
}

void sim_result_free(struct sim_result *res)
{
	free(res->samples);
	free(res->planner_ms);
	free(res->defrag_cpu_ms);
	free(res->plan_cpu_ms);
	res->samples = NULL;
	res->planner_ms = NULL;
	res->defrag_cpu_ms = NULL;
	res->plan_cpu_ms = NULL;
}

/* ---- output ------------------------------------------------------------------------------- */

static void sim_usage(FILE *f)
{
	fputs("usage: tp-bench sim [--fleet nvl72:10000|hgx:4096|torus:16,16,16|scenario:FILE]\n"
	      "                    [--trace FILE [--limit N]] [--compress X]\n"
	      "                    [--jobs N] [--load X] [--seed N] [--policies a,b,...]\n"
	      "                    [--window START_H,END_H] [--sample-s S] [--backfill N]\n"
	      "                    [--queue besteffort|strict|easy] [--starve-h H]\n"
	      "                    [--defrag-every-s S] [--defrag-max-cost X]\n"
	      "                    [--defrag-max-sims N] [--defrag-max-cands N]\n"
	      "                    [--efficiency cost|standin]\n"
	      "                    [--failures RATE [--repair-h H] [--ckpt-every-s S] [--spares K]]\n"
	      "                    [--no-compact] [--compact-moves-h N] [--compact-budget X]\n"
	      "                    [--compact-max-sims N]\n"
	      "                    [--no-pay] [--defrag-before-backfill]\n"
	      "                    [--floor-search oldest|every|off] [--floor-ahead]\n"
	      "                    [--fabric-fit X] [--top-floor X] [--no-upgrade] [--no-defrag-floor]\n"
	      "                    [--no-defrag-behind] [--no-pay-slowdown] [--no-defrag-best]\n"
	      "                    [--no-defrag-less-local] [--reserve-busy ours|all|off]\n"
	      "                    [--end-estimates none|exact|over:F] [--no-head-guard]\n"
	      "                    [--json FILE] [--csv FILE] [--plot PREFIX]\n", f);
	fprintf(f,
	        "  Replays a workload (the bundled generator, or a CSV trace with columns\n"
	        "  submit_s,duration_s,num_gpus[,kind]) under every policy: random, first-fit,\n"
	        "  kueue-like, slurm-block-like, slurm-tree-like, topoplace, topoplace-defrag,\n"
	        "  ideal (first-fit-box and slurm-torus-like on torus fleets), all under one queue\n"
	        "  discipline: besteffort (Kueue BestEffortFIFO, the default), strict (Kueue\n"
	        "  StrictFIFO) or easy (Slurm: priority order and EASY backfill). --starve-h H > 0:\n"
	        "  nothing passes a job that has waited H hours (off).\n"
	        "  --mix llm|philly|openb|tpu picks the generator's job mix (llm; tpu on a torus).\n"
	        "  --fleet l4:GPUS is a 4-level NVL72 fleet (pod, block, rack, node).\n"
	        "  --fleet mixed:GPUS mixes NVL72, HGX and PCIe-only racks, each priced by its\n"
	        "  own fabric (blocks of 576 GPUs; docs/benchmarks.md).\n"
	        "  --fleet torus:X,Y,Z (or XxYxZ) is one TPU-pod-like torus of X x Y x Z chips\n"
	        "  (every axis wrapping) with box-shaped jobs (the tpu mix, its only mix); there the\n"
	        "  policies are topoplace and topoplace-defrag (box requests), first-fit-box (the\n"
	        "  first free box in x, y, z order), slurm-torus-like (Slurm's topology/3d_torus\n"
	        "  Hilbert ranking with best fit) and ideal; the others place groups in the nodes of\n"
	        "  a tree and are left out (each named with its reason). Per policy also the mean\n"
	        "  largest free box and free fragments (bench/sim_torus.c, docs/benchmarks.md).\n"
	        "  --fleet scenario:FILE simulates the topology of a scenario-v1 document (its\n"
	        "  other sections are ignored; every node must hold the same number of GPUs).\n"
	        "  --compress X divides every submit time by X (a trace too light to keep the fleet\n"
	        "  busy). --defrag-every-s: the defrag hook runs at most once per S simulated\n"
	        "  seconds (default 0: in every pass in which the oldest job is fragmented; 1800\n"
	        "  before 0.4.0); --defrag-max-cost: a plan may cost at most X times the waiting\n"
	        "  job's GPU-seconds of work in checkpoints (default 0.05); --defrag-max-sims: the\n"
	        "  planner's work budget per call, job sets simulated (default %u), --defrag-max-cands\n"
	        "  candidate domains searched (default %u); 0: the library's defaults.\n"
	        "  --plot needs --csv; it runs gnuplot on bench/sim_plot.gp.\n"
	        "  --failures RATE: node failures per GPU-day (off; Llama 3: 0.000474), see\n"
	        "  bench/sim_failures.c; --spares K[/LEVEL]: hot spares per rack (or LEVEL).\n"
	        "  topoplace-defrag also compacts for the oldest waiting job when it is fragmented\n"
	        "  (bench/sim_compact.c; on by default but under --queue easy; --no-compact: off;\n"
	        "  --compact: on under EASY too): the moves after which it starts at once, at most\n"
	        "  --compact-moves-h jobs (default %g) and\n"
	        "  --compact-budget checkpoint GPU-seconds (a share of the fleet's, default %g) per\n"
	        "  simulated hour; one call simulates at most --compact-max-sims job sets\n"
	        "  (default %u; 0: the library's default).\n"
	        "  Pay rule: a defrag or compaction plan is carried out only if its checkpoint\n"
	        "  GPU-seconds are under half of the waiting job's GPUs x the wait it saves\n"
	        "  (estimated from the running jobs' ends); refusals are defrag_unpaid and\n"
	        "  compact_unpaid in the JSON. --no-pay: no pay rule.\n",
	        SIM_DEFRAG_MAX_SIMS, SIM_DEFRAG_MAX_CANDS, SIM_COMPACT_MOVES_H, SIM_COMPACT_BUDGET,
	        SIM_COMPACT_MAX_SIMS);
	fputs("  Under --queue easy the defrag hook runs for the top job after backfill (a\n"
	      "  second pass); --defrag-before-backfill: in the first pass, before it (the\n"
	      "  order before 0.4.0).\n"
	      SIM_FLOOR_USAGE, f);
	fputs(SIM_RESERVE_USAGE, f);
	fputs(SIM_END_USAGE, f);
	fputs(SIM_GUARD_USAGE, f);
	fputs(SIM_DEFRAG_FLOOR_USAGE
	      "  --inference N: N services with replicas and an availability target instead of\n"
	      "  the training workload (bench/sim_serving.c): per policy the share of\n"
	      "  service-hours that survive any single rack or power-feed loss, and effective\n"
	      "  GPU-hours.\n", f);
}

int bench_sim_main(int argc, char **argv)
{
	struct sim_opts o = {.fleet = "nvl72:10000", .jobs = 20000, .load = 1.15, .seed = 1,
	                     .win0_h = -1, .compress = 1, .win1_h = -1, .sample_s = 900, .backfill = 256,
	                     .starve_h = 0, .defrag_every_s = SIM_DEFRAG_EVERY_S, .defrag_max_cost = 0.05,
	                     .defrag_max_sims = SIM_DEFRAG_MAX_SIMS,
	                     .defrag_max_cands = SIM_DEFRAG_MAX_CANDS,
	                     .use_cost = true, .repair_h = SIM_REPAIR_H, .ckpt_every_s = SIM_CKPT_EVERY_S,
	                     .compact = true, .compact_moves_h = SIM_COMPACT_MOVES_H,
	                     .compact_budget = SIM_COMPACT_BUDGET,
	                     .compact_max_sims = SIM_COMPACT_MAX_SIMS, .fabric_fit = SIM_FABRIC_FIT,
	                     .top_floor = SIM_TOP_FLOOR};
	static const struct option lopts[] = {
		{"fleet", required_argument, NULL, 'f'},    {"trace", required_argument, NULL, 't'},
		{"limit", required_argument, NULL, 'L'},    {"jobs", required_argument, NULL, 'n'},
		{"load", required_argument, NULL, 'l'},     {"seed", required_argument, NULL, 'S'},
		{"policies", required_argument, NULL, 'p'}, {"window", required_argument, NULL, 'w'},
		{"sample-s", required_argument, NULL, 's'}, {"backfill", required_argument, NULL, 'b'},
		{"starve-h", required_argument, NULL, 'x'}, {"efficiency", required_argument, NULL, 'e'},
		{"json", required_argument, NULL, 'j'},     {"csv", required_argument, NULL, 'c'},
		{"plot", required_argument, NULL, 'P'},     {"help", no_argument, NULL, 'h'},
		{"compress", required_argument, NULL, 'C'},
		{"queue", required_argument, NULL, 'Q'},    {"mix", required_argument, NULL, 'X'},
		{"defrag-every-s", required_argument, NULL, 'D'},
		{"defrag-max-cost", required_argument, NULL, 'M'},
		{"defrag-max-sims", required_argument, NULL, 'W'},
		{"defrag-max-cands", required_argument, NULL, 'Y'},
		{"failures", required_argument, NULL, 'F'}, {"repair-h", required_argument, NULL, 'R'},
		{"ckpt-every-s", required_argument, NULL, 'K'}, {"spares", required_argument, NULL, 'A'},
		{"compact", no_argument, NULL, 'k'},
		{"no-compact", no_argument, NULL, 1001},
		{"no-pay", no_argument, NULL, 1002},
		{"defrag-before-backfill", no_argument, NULL, 1003},
		{"compact-moves-h", required_argument, NULL, 'm'},
		{"compact-budget", required_argument, NULL, 'B'},
		{"compact-max-sims", required_argument, NULL, 1009},
		{"inference", required_argument, NULL, 'I'},
		{"floor-search", required_argument, NULL, 1004},
		{"floor-ahead", no_argument, NULL, 1005},
		{"fabric-fit", required_argument, NULL, 1006},
		{"top-floor", required_argument, NULL, 1007},
		{"no-upgrade", no_argument, NULL, 1008},
		{"no-defrag-floor", no_argument, NULL, 1010},
		{"no-defrag-behind", no_argument, NULL, 1011},
		{"no-pay-slowdown", no_argument, NULL, 1012},
		{"no-defrag-best", no_argument, NULL, 1013},
		{"no-defrag-less-local", no_argument, NULL, 1014},
		{"reserve-busy", required_argument, NULL, 1015},
		{"end-estimates", required_argument, NULL, 1016},
		{"no-head-guard", no_argument, NULL, 1017},
		{NULL, 0, NULL, 0}};
	int ch;
	bool mix_given = false;
	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'f': o.fleet = optarg; break;
		case 't': o.trace = optarg; break;
		case 'L': o.limit = bench_arg_uint("--limit", optarg); break;
		case 'C': o.compress = bench_arg_num("--compress", optarg); break;
		case 'D': o.defrag_every_s = bench_arg_num("--defrag-every-s", optarg); break;
		case 'M': o.defrag_max_cost = bench_arg_num("--defrag-max-cost", optarg); break;
		case 'W': o.defrag_max_sims = bench_arg_u32("--defrag-max-sims", optarg); break;
		case 'Y':
			o.defrag_max_cands = bench_arg_u32("--defrag-max-cands", optarg);
			break;
		case 'n': o.jobs = bench_arg_uint("--jobs", optarg); break;
		case 'F': o.fail_rate = bench_arg_num("--failures", optarg); break;
		case 'R': o.repair_h = bench_arg_num("--repair-h", optarg); break;
		case 'K': o.ckpt_every_s = bench_arg_num("--ckpt-every-s", optarg); break;
		case 'A': o.spares = optarg; break;
		case 'k': o.compact = o.compact_easy = true; break;
		case 1001: o.compact = o.compact_easy = false; break;
		case 1002: o.no_pay = true; break;
		case 1003: o.defrag_before_backfill = true; break;
		case 1004: sim_floor_search_arg(optarg, &o.floor_search); break;
		case 1005: o.floor_ahead = true; break;
		case 1006: o.fabric_fit = sim_fabric_fit_arg(optarg); break;
		case 1007: o.top_floor = sim_top_floor_arg(optarg); break;
		case 1008: o.no_upgrade = true; break;
		case 1010: o.no_defrag_floor = true; break;
		case 1011: o.no_defrag_behind = true; break;
		case 1012: o.no_pay_slowdown = true; break;
		case 1013: o.no_defrag_best = true; break;
		case 1014: o.no_defrag_less_local = true; break;
		case 1015: sim_reserve_busy_arg(optarg, &o.reserve_busy); break;
		case 1016: o.end_over = sim_end_estimates_arg(optarg); break;
		case 1017: o.no_head_guard = true; break;
		case 'm': o.compact_moves_h = bench_arg_num("--compact-moves-h", optarg); break;
		case 'B': o.compact_budget = bench_arg_num("--compact-budget", optarg); break;
		case 1009: o.compact_max_sims = bench_arg_u32("--compact-max-sims", optarg); break;
		case 'I': o.inference = bench_arg_uint("--inference", optarg); break;
		case 'l': o.load = bench_arg_num("--load", optarg); break;
		case 'S': o.seed = bench_arg_uint("--seed", optarg); break;
		case 'p': o.policies = optarg; break;
		case 'w':
			if (sscanf(optarg, "%lf,%lf", &o.win0_h, &o.win1_h) != 2 || o.win1_h <= o.win0_h)
				bench_die("--window: expected START_H,END_H with END_H > START_H");
			break;
		case 's': o.sample_s = bench_arg_num("--sample-s", optarg); break;
		case 'b': o.backfill = bench_arg_uint("--backfill", optarg); break;
		case 'x': o.starve_h = bench_arg_num("--starve-h", optarg); break;
		case 'Q':
			if (!sim_queue_parse(optarg, &o.queue))
				bench_die("--queue: 'besteffort', 'strict' or 'easy', not '%s'", optarg);
			break;
		case 'X':
			if (!sim_mix_parse(optarg, &o.mix))
				bench_die("--mix: 'llm', 'philly', 'openb' or 'tpu', not '%s'", optarg);
			mix_given = true;
			break;
		case 'e':
			if (!strcmp(optarg, "standin"))
				o.use_cost = false;
			else if (!strcmp(optarg, "cost"))
				o.use_cost = true;
			else
				bench_die("--efficiency: 'cost' or 'standin', not '%s'", optarg);
			break;
		case 'j': o.json = optarg; break;
		case 'c': o.csv = optarg; break;
		case 'P': o.plot = optarg; break;
		case 'h': sim_usage(stdout); return 0;
		default: sim_usage(stderr); return 2;
		}
	}
	if (o.sample_s <= 0 || o.backfill < 1 || o.load <= 0 || !(o.compress > 0) ||
	    !(o.defrag_every_s >= 0) || !(o.defrag_max_cost >= 0) ||
	    !(o.compact_moves_h >= 0) || !(o.compact_budget >= 0) || (o.plot && !o.csv))
		bench_die("--sample-s, --load and --compress must be > 0, --backfill >= 1, "
		          "--compact-moves-h and --compact-budget >= 0; --plot needs --csv");
	sim_failures_check_opts(&o);

	struct sim_fleet f;
	sim_fleet_build(&f, o.fleet);
	if (f.kind == FLEET_TORUS && !mix_given)
		o.mix = SIM_MIX_TPU; /* box-shaped slices: the torus fleet's only mix */
	if (o.inference && f.kind == FLEET_TORUS)
		bench_die("--inference: the inference class has no box shapes; not on a torus fleet");
	if (o.inference) { /* the inference class instead of the training workload */
		sim_serving_run(&o, &f);
		tp_topology_destroy(f.t);
		sim_torus_fleet_free(&f);
		return 0;
	}
	struct sim_workload w;
	if (o.trace)
		sim_workload_read_csv(&w, &f, o.trace, o.limit);
	else if (sim_workload_generate(&w, &f, o.mix, o.jobs, o.load, o.seed) < 0)
		bench_die("out of memory");
	if (w.n == 0)
		bench_die("the workload has no job");
	if (o.compress != 1) { /* a trace too light for the fleet: arrivals o.compress times faster */
		for (size_t i = 0; i < w.n; i++)
			w.jobs[i].submit_s = floor(w.jobs[i].submit_s / o.compress);
		size_t len = strlen(w.source);
		snprintf(w.source + len, sizeof w.source - len, ", arrivals compressed %gx", o.compress);
	}
	double w0, w1;
	sim_window(&w, &w0, &w1);
	if (o.win0_h >= 0) {
		w0 = o.win0_h * 3600;
		w1 = o.win1_h * 3600;
	}
	sim_print_mix(stdout, &w);

	struct sim_result *res = calloc(sim_npolicies, sizeof *res);
	size_t n = 0;
	for (size_t i = 0; i < sim_npolicies; i++) {
		if (!bench_list_has(o.policies, sim_policies[i].name))
			continue;
		const char *why;
		if (!sim_policy_runs_on(&sim_policies[i], &f, &why)) {
			if (o.policies || f.kind == FLEET_TORUS) /* not silently */
				printf("policy %s left out on %s: %s\n", sim_policies[i].name, o.fleet, why);
			continue;
		}
		res[n].pol = &sim_policies[i];
		sim_run_policy(&o, &f, &w, w0, w1, &res[n]);
		n++;
	}
	if (n == 0)
		bench_die("--policies selects no policy");
	sim_print(&o, &f, &w, w0, w1, res, n);
	sim_failures_print(&o, &f, res, n);
	sim_json(&o, &f, &w, w0, w1, res, n);
	if (o.csv)
		sim_csv(&o, &f, res, n);
	if (o.plot)
		sim_plot(&o, res, n);
	for (size_t i = 0; i < n; i++)
		sim_result_free(&res[i]);
	free(res);
	sim_workload_free(&w);
	tp_topology_destroy(f.t);
	sim_torus_fleet_free(&f);
	return 0;
}
