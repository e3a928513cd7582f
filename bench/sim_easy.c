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

/* The due jobs in end order (then by index), taken lazily off a min-heap: a reservation
 * usually needs the first few of them, not a sort of all. */
struct easy_order {
	struct sim_due *heap; /* [nh] */
	size_t nh;
	struct sim_due *out;  /* [nout] the first ones, in order */
	size_t nout, n;       /* n: all */
};

static bool due_before(const struct sim_due *x, const struct sim_due *y)
{
	return x->t < y->t || (x->t == y->t && x->job < y->job);
}

static void sift_down(struct sim_due *h, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && due_before(&h[l], &h[m]))
			m = l;
		if (l + 1 < n && due_before(&h[l + 1], &h[m]))
			m = l + 1;
		if (m == i)
			return;
		struct sim_due tmp = h[i];
		h[i] = h[m];
		h[m] = tmp;
		i = m;
	}
}

static void order_init(struct easy_order *o, struct sim_due *due, size_t n)
{
	*o = (struct easy_order){due, n, due + n, 0, n};
	for (size_t i = n / 2; i-- > 0;)
		sift_down(due, n, i);
}

/* Make out[0..k) (or all) known. */
static void order_fetch(struct easy_order *o, size_t k)
{
	while (o->nout < k && o->nh > 0) {
		o->out[o->nout++] = o->heap[0];
		o->heap[0] = o->heap[--o->nh];
		sift_down(o->heap, o->nh, 0);
	}
}

/* The end of the end-time group that starts at out[i] (i < o->n). */
static size_t group_end(struct easy_order *o, size_t i)
{
	size_t k = i + 1;
	for (order_fetch(o, k + 1); k < o->n && o->out[k].t == o->out[i].t; order_fetch(o, k + 1))
		k++;
	return k;
}

/* The running jobs on a savepoint: out[0..cur) are released. */
struct easy_proj {
	tp_cluster *c;
	struct easy_order *o;
	size_t cur;
};

static void release_to(struct easy_proj *p, size_t k)
{
	char id[24];
	order_fetch(p->o, k);
	for (; p->cur < k; p->cur++) {
		snprintf(id, sizeof id, "j%u", p->o->out[p->cur].job);
		BENCH_CHECK(tp_cluster_release(p->c, id), tp_cluster_errmsg(p->c));
	}
}

/* Place the top job as it would start at time t (ctx->now is the clock its expected end,
 * sim_end_estimate, counts from; put back after). */
static int place_at(struct sim_ctx *ctx, double t, const struct sim_policy *pol, void *st,
                    const struct sim_job *top, uint32_t top_id, uint32_t *devs)
{
	double now = ctx->now;
	ctx->now = t > now ? t : now;
	int rc = pol->place(st, ctx, top, top_id, devs);
	ctx->now = now;
	return rc;
}

/* Place the top job with out[0..k) released, as it would start when the last of them ends;
 * the rng is the same for every trial. */
static int try_at(struct easy_proj *p, size_t k, struct sim_ctx *ctx,
                  const struct sim_policy *pol, void *st, const struct sim_job *top,
                  uint32_t top_id, uint32_t *devs, const struct bench_rng *rng, long *calls)
{
	release_to(p, k);
	ctx->rng = *rng;
	(*calls)++;
	return place_at(ctx, k ? p->o->out[k - 1].t : ctx->now, pol, st, top, top_id, devs);
}

/*
 * The running jobs are due[0..n) (taken in order of end time, then index; due has room for
 * 2 x n and is overwritten). On a savepoint of
 * ctx->c, the first end time after which pol->place fits the top job: from the first at which
 * enough GPUs are free (it cannot fit with fewer), galloping forward over the end times
 * (1, 2, 4, ... end times further, each trial on its own savepoint) and then bisecting between
 * the last failure and the first success. Slurm's will-run test tries every end time in turn;
 * this finds the same time wherever freeing more GPUs never makes the top job fail, in
 * O(log n) placements instead of O(n). On success the nodes of that placement are marked in
 * reserved[] (listed in list[0..*nlist)), devs[0..top->gpus) holds it (devs has room for
 * 2 x top->gpus) and the shadow time is returned; INFINITY when it never fits (nothing
 * marked). The cluster and ctx->rng are left as they were. *calls counts the placements.
 */
double sim_easy_reserve(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                        const struct sim_job *top, uint32_t top_id, struct sim_due *due,
                        size_t n, uint32_t *devs, uint8_t *reserved, uint32_t *list,
                        uint32_t *nlist, long *calls)
{
	tp_cluster *c = ctx->c;
	struct easy_order o;
	order_init(&o, due, n);
	*nlist = 0;
	/* lo: a state known to fail (by its GPU count, or the state now); hi: the next to try */
	uint64_t fr = tp_cluster_free_total_count(c);
	size_t lo = 0, hi = 0;
	while (fr < top->gpus && hi < n) {
		size_t k = group_end(&o, hi);
		for (size_t i = hi; i < k; i++)
			fr += o.out[i].gpus;
		if (fr < top->gpus)
			lo = k;
		hi = k;
	}
	if (fr < top->gpus || n == 0)
		return INFINITY;
	if (hi == 0) /* enough GPUs free now, yet the top job failed now */
		hi = group_end(&o, 0);
	struct easy_proj p = {c, &o, 0};
	const struct bench_rng rng = ctx->rng; /* trials draw nothing from the real stream */
	uint32_t *trial = devs + top->gpus;
	size_t sp, sp_try;
	BENCH_CHECK(tp_cluster_savepoint(c, &sp), tp_cluster_errmsg(c));
	release_to(&p, lo);
	int rc;
	for (size_t step = 1;; step *= 2) { /* gallop */
		BENCH_CHECK(tp_cluster_savepoint(c, &sp_try), tp_cluster_errmsg(c));
		rc = try_at(&p, hi, ctx, pol, st, top, top_id, devs, &rng, calls);
		if (rc == 0) {
			BENCH_CHECK(tp_cluster_rollback(c, sp_try), tp_cluster_errmsg(c));
			p.cur = lo;
			break;
		}
		if (rc == TP_EINFEASIBLE || hi == n)
			break;
		BENCH_CHECK(tp_cluster_savepoint_discard(c, sp_try), tp_cluster_errmsg(c));
		lo = hi;
		for (size_t g = 0; g < step && hi < n; g++)
			hi = group_end(&o, hi);
	}
	while (rc == 0) { /* bisect over the end times strictly between lo and hi */
		size_t groups = 0, mid = lo;
		for (size_t k = group_end(&o, lo); k < hi; k = group_end(&o, k))
			groups++;
		if (groups == 0)
			break;
		for (size_t g = 0; g < (groups + 1) / 2; g++)
			mid = group_end(&o, mid);
		BENCH_CHECK(tp_cluster_savepoint(c, &sp_try), tp_cluster_errmsg(c));
		if (try_at(&p, mid, ctx, pol, st, top, top_id, trial, &rng, calls) == 0) {
			memcpy(devs, trial, top->gpus * sizeof *devs);
			hi = mid;
			BENCH_CHECK(tp_cluster_rollback(c, sp_try), tp_cluster_errmsg(c));
			p.cur = lo;
		} else {
			BENCH_CHECK(tp_cluster_savepoint_discard(c, sp_try), tp_cluster_errmsg(c));
			lo = mid;
		}
	}
	ctx->rng = rng;
	BENCH_CHECK(tp_cluster_rollback(c, sp), tp_cluster_errmsg(c));
	if (rc != 0)
		return INFINITY;
	for (uint32_t i = 0; i < top->gpus; i++) {
		uint32_t node = tp_topology_device_node(ctx->f->t, devs[i]);
		if (!reserved[node]) {
			reserved[node] = 1;
			list[(*nlist)++] = node;
		}
	}
	return o.out[hi - 1].t;
}

/* A savepoint of c, then a placeholder job `id` (not migratable) on devs[0..k) if k > 0: the
 * savepoint to roll back to. */
static size_t hold_devices(tp_cluster *c, const char *id, const uint32_t *devs, uint32_t k)
{
	size_t sp;
	BENCH_CHECK(tp_cluster_savepoint(c, &sp), tp_cluster_errmsg(c));
	if (k > 0) {
		tp_job_options opts = TP_JOB_OPTIONS_INIT;
		opts.migratable = 0;
		BENCH_CHECK(tp_cluster_assign(c, id, devs, k, &opts), tp_cluster_errmsg(c));
	}
	return sp;
}

/*
 * topoplace's reservation (--reserve-busy): where the top job goes at the shadow time decides
 * what backfill may use until then, since a job that would still run at the shadow time may
 * not touch a reserved node. The policy's place on the projected state sees the devices free
 * now and the ones the due jobs release alike, and its best fit often picks free ones: those
 * nodes then idle until the shadow time unless a job short enough turns up. Tried first here
 * with every device free now held by a placeholder, so that it takes only devices the
 * projection frees; when it fits so (the shadow time is the same: the state has no more free
 * devices than sim_easy_reserve's), backfill keeps every device free now. Slurm's
 * sched/backfill takes whatever the select plugin picks at the shadow time (the peers keep
 * that unless --reserve-busy all).
 */
bool sim_easy_reserve_busy(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                           const struct sim_job *top, uint32_t top_id, const struct sim_due *due,
                           size_t n, double shadow, uint32_t *devs, uint32_t *buf)
{
	tp_cluster *c = ctx->c;
	uint32_t nd = tp_topology_device_count(ctx->f->t), k = 0;
	for (uint32_t d = 0; d < nd; d++)
		if (tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE)
			buf[k++] = d;
	size_t sp = hold_devices(c, "easy-free-now", buf, k);
	char id[24];
	for (size_t i = 0; i < n; i++)
		if (due[i].t <= shadow) {
			snprintf(id, sizeof id, "j%u", due[i].job);
			BENCH_CHECK(tp_cluster_release(c, id), tp_cluster_errmsg(c));
		}
	const struct bench_rng rng = ctx->rng; /* the trial draws nothing from the real stream */
	int rc = tp_cluster_free_total_count(c) < top->gpus
	                 ? TP_EBUSY
	                 : place_at(ctx, shadow, pol, st, top, top_id, devs);
	ctx->rng = rng;
	BENCH_CHECK(tp_cluster_rollback(c, sp), tp_cluster_errmsg(c));
	return rc == 0;
}

static const char *const reserve_busy_names[3] = {"ours", "all", "off"};

const char *sim_reserve_busy_name(enum sim_reserve_busy m) { return reserve_busy_names[m]; }

void sim_reserve_busy_arg(const char *name, enum sim_reserve_busy *m)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(name, reserve_busy_names[i])) {
			*m = (enum sim_reserve_busy)i;
			return;
		}
	bench_die("--reserve-busy: 'ours', 'all' or 'off', not '%s'", name);
}

/*
 * The ideal bound has no nodes: its shadow is the first end time at which `need` GPUs are free
 * (now if they are), and *extra the GPUs free then that the top job does not need; INFINITY
 * (and *extra 0) if they never are.
 */
double sim_easy_count(struct sim_due *due, size_t n, uint64_t fr, uint32_t need, double now,
                      uint64_t *extra)
{
	struct easy_order o;
	order_init(&o, due, n);
	double shadow = now;
	for (size_t i = 0; i < n && fr < need; i++) {
		order_fetch(&o, i + 1);
		fr += o.out[i].gpus;
		shadow = o.out[i].t;
	}
	*extra = fr >= need ? fr - need : 0;
	return fr >= need ? shadow : INFINITY;
}

/*
 * Slurm's backfill computes the nodes a job may use over its whole run from the node-space map:
 * a job that would still run at the shadow time does not see the reserved nodes. Here a
 * placeholder job holds their free devices (on a savepoint) while the policy places j.
 */
int sim_easy_place_off(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                       const struct sim_job *j, uint32_t jid, const uint32_t *list, uint32_t n,
                       uint32_t *devs, uint32_t *buf)
{
	tp_cluster *c = ctx->c;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += bench_node_free_devices(c, list[i], buf + k, TP_MAX_NODE_DEVICES);
	size_t sp = hold_devices(c, "easy-reserved", buf, k);
	int rc = tp_cluster_free_total_count(c) < j->gpus ? TP_EBUSY
	                                                 : pol->place(st, ctx, j, jid, devs);
	BENCH_CHECK(tp_cluster_rollback(c, sp), tp_cluster_errmsg(c));
	return rc;
}

/* Free GPUs of the nodes in list[0..n) now. */
uint32_t sim_easy_free_on(const struct sim_ctx *ctx, const uint32_t *list, uint32_t n)
{
	uint32_t fr = 0;
	for (uint32_t k = 0; k < n; k++)
		fr += tp_cluster_free_count(ctx->c, ctx->f->node_level, list[k]);
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
