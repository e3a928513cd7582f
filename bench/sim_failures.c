/* SPDX-License-Identifier: MIT */
/*
 * Node failures in the simulator (tp-bench sim --failures RATE, off by default).
 *
 * Rate: RATE failures per GPU-day, each taking down the whole node of the failed GPU (a node
 * with a failed GPU or NIC is drained in practice). For scale, the Llama 3 405B run saw 419
 * unexpected interruptions in 54 days on 16,384 GPUs: 419 / (54 x 16,384) = 0.000474 per
 * GPU-day, i.e. 0.0019 per 4-GPU NVL72 tray-day and 0.0038 per 8-GPU HGX node-day; on the
 * default 10,000-GPU fleet, 4.7 node failures a day. Failures form one Poisson process over the
 * fleet (exponential gaps, mean 1 / (RATE x GPUs) days); each hits a node drawn uniformly among
 * the nodes that are up. The sequence comes from its own generator seeded by --seed, so every
 * policy of a run sees the same failures at the same times. A failed node is repaired
 * (set up again) after --repair-h hours (default 8).
 *
 * The job a failure hits restarts from its last checkpoint: it checkpoints every
 * --ckpt-every-s seconds of useful work at its current placement (default 1800), so the work
 * since the last checkpoint is lost and redone; the restart itself takes the documented
 * checkpoint/restart time of a migration (sim_checkpoint_s, docs/benchmarks.md; 60 s for a job
 * that has none). Neither the restart nor the redone work is useful: the job holds its GPUs at
 * zero effective GPUs meanwhile (sim.c, sim_rebound).
 *
 * What happens to the job: the topoplace policies call tp_replace() with the failed devices
 * and commit the answer, so the job keeps its healthy GPUs and its shape; with --spares K the
 * cluster keeps K hot spares per base domain (rack on NVL72) through tp_cluster_set_spares(),
 * which ordinary placement never uses and tp_replace uses first. When tp_replace finds no
 * replacement the job is released and requeued. The peers requeue: Kueue evicts a workload
 * whose pod failed and admits it again through the queue, Slurm requeues a job whose node
 * failed (--requeue); the requeued job goes to the head of the queue and is placed again by its
 * policy. The ideal bound keeps no cluster state and sees no failure.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct sim_repair {
	double t;
	uint32_t node;
};

struct sim_failures {
	const struct sim_opts *o;
	const struct sim_fleet *f;
	tp_cluster *c;
	struct sim_result *res;
	bool replace;       /* the policy repairs through tp_replace */
	struct bench_rng rng;
	double next_fail;   /* time of the next failure */
	double per_s;       /* failures per second over the fleet */
	const struct sim_workload *w;
	uint32_t nnodes;
	uint8_t *down;      /* [nnodes] under repair */
	uint32_t nup;       /* nodes up */
	struct sim_repair *rep; /* FIFO of repairs (all take the same time: in time order) */
	size_t rep_head, rep_n, rep_cap;
	uint32_t *devs;     /* scratch: the failed node's devices held by the job */
	uint32_t *anew;     /* scratch: a fresh placement of the job */
};

static void fail_schedule(struct sim_failures *F, double from)
{
	double u = bench_rng_unit(&F->rng);
	F->next_fail = from - log(1.0 - u) / F->per_s;
}

/* --spares K or K/LEVEL into the level index and k; false without --spares. */
static bool sim_spares_parse(const struct sim_opts *o, const struct sim_fleet *f,
                             unsigned *level, unsigned *k)
{
	*level = f->base_level;
	*k = 0;
	if (!o->spares)
		return false;
	char *end;
	unsigned long v = strtoul(o->spares, &end, 10);
	if (end == o->spares || v > 1000 || (*end && *end != '/'))
		bench_die("--spares: K or K/LEVEL, not '%s'", o->spares);
	*k = (unsigned)v;
	if (*end == '/') {
		int l = tp_topology_level_by_name(f->t, end + 1);
		if (l < 0 || (unsigned)l >= f->node_level)
			bench_die("--spares %s: '%s' is not a level above the node", o->spares, end + 1);
		*level = (unsigned)l;
	}
	return true;
}

void sim_failures_check_opts(const struct sim_opts *o)
{
	if (!(o->fail_rate >= 0))
		bench_die("--failures: %g is negative (0 turns failures off)", o->fail_rate);
	if (!(o->repair_h > 0))
		bench_die("--repair-h: %g; a failed node's repair takes more than 0 hours",
		          o->repair_h);
	if (!(o->ckpt_every_s > 0))
		bench_die("--ckpt-every-s: %g; jobs checkpoint at an interval above 0 seconds",
		          o->ckpt_every_s);
	if (o->spares) {
		char *end;
		unsigned long v = strtoul(o->spares, &end, 10);
		if (end == o->spares || v > 1000 || (*end && *end != '/'))
			bench_die("--spares: K (0 to 1000) or K/LEVEL, not '%s'", o->spares);
	}
}

struct sim_failures *sim_failures_create(const struct sim_opts *o, const struct sim_fleet *f,
                                         const struct sim_workload *w,
                                         const struct sim_policy *pol, tp_cluster *c,
                                         struct sim_result *res, double t0)
{
	if (!(o->fail_rate > 0) || !pol->uses_cluster)
		return NULL;
	struct sim_failures *F = calloc(1, sizeof *F);
	if (!F)
		bench_die("out of memory");
	F->o = o;
	F->f = f;
	F->c = c;
	F->res = res;
	F->w = w;
	F->replace = strncmp(pol->name, "topoplace", 9) == 0;
	F->nnodes = tp_topology_domain_count(f->t, f->node_level);
	F->nup = F->nnodes;
	F->down = calloc(F->nnodes, 1);
	F->devs = malloc(f->node_gpus * sizeof *F->devs);
	F->anew = malloc(f->gpus * sizeof *F->anew);
	if (!F->down || !F->devs || !F->anew)
		bench_die("out of memory");
	F->per_s = o->fail_rate * f->gpus / 86400.0;
	bench_rng_seed(&F->rng, o->seed ^ 0xfa11u);
	fail_schedule(F, t0);
	unsigned level, k;
	if (F->replace && sim_spares_parse(o, f, &level, &k) && k)
		BENCH_CHECK(tp_cluster_set_spares(c, level, k, 0), tp_cluster_errmsg(c));
	return F;
}

double *sim_failures_remain(size_t n)
{
	double *r = malloc(2 * n * sizeof *r);
	if (!r)
		bench_die("out of memory");
	for (size_t i = 0; i < 2 * n; i++)
		r[i] = -1;
	return r;
}

void sim_failures_destroy(struct sim_failures *F)
{
	if (!F)
		return;
	free(F->down);
	free(F->rep);
	free(F->devs);
	free(F->anew);
	free(F);
}

double sim_failures_next(const struct sim_failures *F)
{
	double t = F->next_fail;
	if (F->rep_n && F->rep[F->rep_head].t < t)
		t = F->rep[F->rep_head].t;
	return t;
}

bool sim_failures_repairing(const struct sim_failures *F)
{
	return F->rep_n > 0;
}

void sim_failures_charge(struct sim_failures *F, double lost_gpu_s, double restart_gpu_s)
{
	F->res->fail_lost_gpu_h += lost_gpu_s / 3600;
	F->res->fail_restart_gpu_h += restart_gpu_s / 3600;
}

static void node_set(struct sim_failures *F, uint32_t node, int down)
{
	uint32_t first, n;
	tp_topology_domain_devices(F->f->t, F->f->node_level, node, &first, &n);
	for (uint32_t i = 0; i < n; i++)
		F->devs[i] = first + i;
	BENCH_CHECK(tp_cluster_set_down(F->c, F->devs, n, down), tp_cluster_errmsg(F->c));
}

static void repair_push(struct sim_failures *F, double t, uint32_t node)
{
	if (F->rep_head + F->rep_n == F->rep_cap) {
		if (F->rep_head) {
			memmove(F->rep, F->rep + F->rep_head, F->rep_n * sizeof *F->rep);
			F->rep_head = 0;
		} else {
			F->rep_cap = F->rep_cap ? 2 * F->rep_cap : 64;
			F->rep = realloc(F->rep, F->rep_cap * sizeof *F->rep);
			if (!F->rep)
				bench_die("out of memory");
		}
	}
	F->rep[F->rep_head + F->rep_n++] = (struct sim_repair){t, node};
}

/* The jid of the job holding a device of node ("j<N>", sim.c), and the node's devices it
 * holds into F->devs; UINT32_MAX when none. A node holds at most one job's devices in the
 * simulator only when groups fill nodes, so each holder is handled in turn by the caller. */
static uint32_t node_job(struct sim_failures *F, uint32_t node, uint32_t *n)
{
	uint32_t first, nd;
	tp_topology_domain_devices(F->f->t, F->f->node_level, node, &first, &nd);
	const char *id = NULL;
	*n = 0;
	for (uint32_t i = 0; i < nd; i++) {
		const char *j;
		if (tp_cluster_device_state(F->c, first + i, &j) != TP_DEVICE_HELD)
			continue;
		if (!id)
			id = j;
		if (strcmp(id, j) == 0)
			F->devs[(*n)++] = first + i;
	}
	return id ? (uint32_t)strtoul(id + 1, NULL, 10) : UINT32_MAX;
}

/* The expected end the job was recorded with (its shape's expected_end_s; 0: none): a
 * repaired job keeps it, as the scheduler keeps a requeued job's time limit. */
static double recorded_end(const struct sim_failures *F, const char *id)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	BENCH_CHECK(tp_cluster_job_options(F->c, id, &o), "tp_cluster_job_options");
	return o.shape ? o.shape->expected_end_s : 0;
}

/* The job's placement afresh, as if it were released (inside a savepoint, undone): its
 * efficiency, its devices in F->anew; -1 when it does not fit. */
static double place_anew(struct sim_failures *F, uint32_t jid, const char *id)
{
	const struct sim_job *j = &F->w->jobs[jid];
	size_t sp;
	double eff = -1;
	tp_slice sl;
	char rid[24];
	tp_request r = sim_tp_request(F->f, j, jid, &sl, rid);
	r.expected_end_s = recorded_end(F, id);
	BENCH_CHECK(tp_cluster_savepoint(F->c, &sp), tp_cluster_errmsg(F->c));
	BENCH_CHECK(tp_cluster_release(F->c, id), tp_cluster_errmsg(F->c));
	tp_placement *p = NULL;
	if (tp_place(F->c, &r, &p) == 0) {
		size_t n;
		const uint32_t *d = tp_placement_devices(p, &n);
		memcpy(F->anew, d, n * sizeof *d);
		eff = sim_efficiency(F->f, j, d, F->o->use_cost);
	}
	tp_placement_destroy(p);
	BENCH_CHECK(tp_cluster_rollback(F->c, sp), tp_cluster_errmsg(F->c));
	return eff;
}

/* Move job jid to F->anew: released and assigned again with the same options. */
static void move_anew(struct sim_failures *F, uint32_t jid, const char *id)
{
	const struct sim_job *j = &F->w->jobs[jid];
	tp_slice sl;
	char rid[24];
	tp_request shape = sim_tp_request(F->f, j, jid, &sl, rid);
	double end = recorded_end(F, id);
	shape.expected_end_s = end;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = j->cls;
	o.migratable = j->cls != TP_CLASS_INTERACTIVE;
	o.checkpoint_s = j->checkpoint_s;
	o.shape = &shape;
	BENCH_CHECK(tp_cluster_release(F->c, id), tp_cluster_errmsg(F->c));
	BENCH_CHECK(tp_cluster_assign(F->c, id, F->anew, j->gpus, &o), tp_cluster_errmsg(F->c));
	if (getenv("TP_BENCH_FAILURE_TRACE")) /* what the cluster keeps (tests/check_bench.py) */
		fprintf(stderr, "failure-trace %s placed afresh: expected end %.3f, kept %.3f\n", id,
		        end, recorded_end(F, id));
}

/* Repair job jid: tp_replace keeps its healthy GPUs; a placement afresh moves every rank,
 * which costs nothing more since the whole job restarts from its checkpoint anyway. The more
 * efficient of the two (the simulator's model; tp_replace on a tie). False when neither fits. */
static bool try_replace(struct sim_failures *F, uint32_t jid, uint32_t nfailed,
                        const struct sim_fail_hooks *h)
{
	const struct sim_job *j = &F->w->jobs[jid];
	char id[24];
	snprintf(id, sizeof id, "j%u", jid);
	double anew = place_anew(F, jid, id), eff = -1;
	tp_placement *p = NULL;
	int rc = tp_replace(F->c, id, F->devs, nfailed, &p);
	if (rc == TP_ENOMEM || rc == TP_EINVAL || rc == TP_ENOTFOUND)
		bench_die("tp_replace(%s): %s: %s", id, tp_err_name(rc), tp_placement_errmsg(p));
	size_t n = 0;
	const uint32_t *d = rc == 0 ? tp_placement_devices(p, &n) : NULL;
	if (d)
		eff = sim_efficiency(F->f, j, d, F->o->use_cost);
	if (anew > eff + 1e-9) {
		move_anew(F, jid, id);
		F->res->fail_replaced_anew++;
		h->repaired(h->ud, jid, F->anew, j->gpus);
	} else if (d) {
		for (size_t i = 0; i < nfailed; i++) {
			uint32_t fd, rd;
			if (tp_placement_replaced(p, i, &fd, &rd) == 0 &&
			    tp_cluster_device_state(F->c, rd, NULL) == TP_DEVICE_SPARE) {
				F->res->fail_on_spare++;
				break;
			}
		}
		BENCH_CHECK(tp_commit(F->c, p, NULL), tp_cluster_errmsg(F->c));
		d = tp_placement_devices(p, &n);
		h->repaired(h->ud, jid, d, (uint32_t)n);
	}
	tp_placement_destroy(p);
	return anew >= 0 || eff >= 0;
}

static void fail_one(struct sim_failures *F, double t, const struct sim_fail_hooks *h)
{
	uint32_t k = (uint32_t)bench_rng_below(&F->rng, F->nup), node = 0;
	for (uint32_t seen = 0; node < F->nnodes; node++) /* the k-th node that is up */
		if (!F->down[node] && seen++ == k)
			break;
	F->down[node] = 1;
	F->nup--;
	F->res->fail_nodes++;
	repair_push(F, t + F->o->repair_h * 3600, node);
	uint32_t first, nd, n;
	tp_topology_domain_devices(F->f->t, F->f->node_level, node, &first, &nd);
	node_set(F, node, 1);
	for (uint32_t jid, k2 = 0; k2 < nd && (jid = node_job(F, node, &n)) != UINT32_MAX; k2++) {
		F->res->fail_jobs++;
		if (F->replace && try_replace(F, jid, n, h)) {
			F->res->fail_replaced++;
			continue;
		}
		F->res->fail_requeued++;
		h->requeue(h->ud, jid);
	}
}

void sim_failures_due(struct sim_failures *F, double t, const struct sim_fail_hooks *h)
{
	for (;;) {
		bool rep = F->rep_n && F->rep[F->rep_head].t <= t &&
		           F->rep[F->rep_head].t <= F->next_fail;
		if (rep) {
			uint32_t node = F->rep[F->rep_head].node;
			F->rep_head++;
			F->rep_n--;
			F->down[node] = 0;
			F->nup++;
			node_set(F, node, 0);
		} else if (F->next_fail <= t && F->nup > 0) {
			double at = F->next_fail;
			fail_one(F, at, h);
			fail_schedule(F, at);
		} else {
			return;
		}
	}
}

void sim_failures_print(const struct sim_opts *o, const struct sim_fleet *f,
                        const struct sim_result *res, size_t n)
{
	if (!(o->fail_rate > 0))
		return;
	unsigned level, k;
	sim_spares_parse(o, f, &level, &k);
	printf("\nnode failures: %g per GPU-day (%.4f per %u-GPU node-day), repaired after %g h; "
	       "checkpoints every %g s; spares per %s: %u (topoplace policies)\n", o->fail_rate,
	       o->fail_rate * f->node_gpus, f->node_gpus, o->repair_h, o->ckpt_every_s,
	       f->level_name[level], k);
	printf("%-17s %7s %6s %8s %6s %8s %7s %9s %9s\n", "policy", "nodes", "jobs", "replaced",
	       "anew", "requeued", "spare", "lost_GPUh", "rstrt_GPUh");
	for (size_t i = 0; i < n; i++) {
		const struct sim_result *r = &res[i];
		if (!r->pol->uses_cluster)
			continue;
		printf("%-17s %7ld %6ld %8ld %6ld %8ld %7ld %9.0f %9.0f\n", r->pol->name,
		       r->fail_nodes, r->fail_jobs, r->fail_replaced, r->fail_replaced_anew,
		       r->fail_requeued, r->fail_on_spare,
		       r->fail_lost_gpu_h, r->fail_restart_gpu_h);
	}
	printf("nodes = node failures; jobs = running jobs they hit; replaced = repaired by "
	       "tp_replace (spare: on a hot spare) or, anew, placed afresh (more efficient); lost = work redone since the last "
	       "checkpoint; rstrt = restart time (both in GPU-hours, the whole run)\n");
}
