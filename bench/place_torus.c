/* SPDX-License-Identifier: MIT */
/*
 * tp-bench place --torus X,Y,Z: latency of box requests (issue #18) on one TPU-pod-like torus
 * (tp_topology_generate_torus, every axis wrapping). The torus is filled to the occupancy with
 * box jobs of the mix below, each placed by tp_place itself (so the free space is what the
 * objective leaves, not random holes); then the mix is cycled, each request timed on its own,
 * and after each one a random running job is released and the fill topped up again, so the
 * timings cover many states.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct torus_shape {
	unsigned e[3];
	int rotate, wrap;
};

/* Slices of a TPU pod, from one chip to an 8x8x8 block. */
static const struct torus_shape torus_mix[] = {
	{{1, 1, 1}, 0, 0}, {{2, 2, 1}, 1, 1}, {{2, 2, 2}, 0, 1}, {{4, 4, 1}, 1, 1},
	{{2, 2, 4}, 1, 1}, {{4, 4, 4}, 0, 1}, {{4, 4, 8}, 1, 1}, {{8, 8, 8}, 0, 1},
};
#define TORUS_NMIX (sizeof torus_mix / sizeof torus_mix[0])
/* Weights of the fill (small slices are the most common). */
static const double torus_fill_w[TORUS_NMIX] = {8, 6, 5, 3, 3, 2, 1, 0.5};

struct torus_stats {
	double *us, *cpu; /* wall and thread CPU time of each call */
	long n, ok, frag, busy, other;
};

static tp_request torus_request(const struct torus_shape *s, const char *id)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.box_level = "pod";
	memcpy(r.box, s->e, sizeof r.box);
	r.box_rotate = s->rotate;
	r.box_wrap = s->wrap;
	r.count = s->e[0] * s->e[1] * s->e[2];
	return r;
}

/* Place and commit random jobs until `target` of the chips are held (or 64 misses). */
static void torus_fill(tp_cluster *c, struct bench_rng *rng, double target, long *next_id)
{
	uint32_t total = tp_topology_device_count(tp_cluster_topology(c));
	char id[32];
	for (int miss = 0; miss < 64;) {
		if (1.0 - (double)tp_cluster_free_total_count(c) / total >= target)
			return;
		size_t k = bench_rng_weighted(rng, torus_fill_w, TORUS_NMIX);
		snprintf(id, sizeof id, "fill-%ld", (*next_id)++);
		tp_request r = torus_request(&torus_mix[k], id);
		tp_placement *pl = NULL;
		int rc = tp_place(c, &r, &pl);
		if (rc == 0)
			BENCH_CHECK(tp_commit(c, pl, NULL), tp_cluster_errmsg(c));
		else
			miss++;
		tp_placement_destroy(pl);
	}
}

static void torus_churn(tp_cluster *c, struct bench_rng *rng, double target, long *next_id)
{
	size_t n = tp_cluster_job_count(c);
	if (n) {
		const char *job = tp_cluster_job_at(c, (size_t)bench_rng_below(rng, n));
		char keep[64];
		snprintf(keep, sizeof keep, "%s", job);
		BENCH_CHECK(tp_cluster_release(c, keep), tp_cluster_errmsg(c));
	}
	torus_fill(c, rng, target, next_id);
}

static void torus_one(tp_cluster *c, const struct torus_shape *s, struct torus_stats *st)
{
	tp_request r = torus_request(s, "bench");
	tp_placement *pl = NULL;
	uint64_t c0 = bench_thread_cpu_ns(), t0 = bench_now_ns();
	int rc = tp_place(c, &r, &pl);
	uint64_t t1 = bench_now_ns(), c1 = bench_thread_cpu_ns();
	st->cpu[st->n] = (double)(c1 - c0) / 1e3;
	st->us[st->n++] = (double)(t1 - t0) / 1e3;
	if (rc == 0)
		st->ok++;
	else if (rc == TP_EFRAGMENTED)
		st->frag++;
	else if (rc == TP_EBUSY)
		st->busy++;
	else if (rc == TP_ENOMEM || rc == TP_EINVAL)
		bench_die("tp_place: %s", tp_placement_errmsg(pl));
	else
		st->other++;
	tp_placement_destroy(pl);
}

/* q: wall p50, p99, CPU p50, p99 over every request. */
static void torus_report(const unsigned *dims, double occ, struct torus_stats *st,
                         const double *q, long n, const char *json)
{
	printf("torus %ux%ux%u (%u chips), occupancy %.1f%%: %ld box requests, wall p50 %.1f us, "
	       "p99 %.1f us; CPU p50 %.1f us, p99 %.1f us (target p99 < 1000 us)\n", dims[0],
	       dims[1], dims[2], dims[0] * dims[1] * dims[2], occ * 100, n, q[0], q[1], q[2], q[3]);
	printf("  %-12s %6s %6s %6s %6s %10s %10s %10s\n", "box", "n", "ok", "frag", "busy",
	       "p50 us", "p99 us", "cpu p99");
	struct bench_json j;
	if (bench_json_open(&j, json) != 0)
		bench_die("cannot open %s", json);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "bench", "place-torus");
	bench_json_int(&j, "chips", (long long)dims[0] * dims[1] * dims[2]);
	bench_json_num(&j, "occupancy", occ);
	bench_json_num(&j, "p50_us", q[0]);
	bench_json_num(&j, "p99_us", q[1]);
	bench_json_num(&j, "cpu_p50_us", q[2]);
	bench_json_num(&j, "cpu_p99_us", q[3]);
	bench_json_num(&j, "loadavg", bench_loadavg());
	bench_json_arr(&j, "shapes");
	for (size_t k = 0; k < TORUS_NMIX; k++) {
		const struct torus_shape *s = &torus_mix[k];
		char name[32];
		snprintf(name, sizeof name, "%ux%ux%u%s%s", s->e[0], s->e[1], s->e[2],
		         s->rotate ? "r" : "", s->wrap ? "w" : "");
		double q50 = bench_quantile(st[k].us, (size_t)st[k].n, 0.5);
		double q99 = bench_quantile(st[k].us, (size_t)st[k].n, 0.99);
		double c99 = bench_quantile(st[k].cpu, (size_t)st[k].n, 0.99);
		printf("  %-12s %6ld %6ld %6ld %6ld %10.1f %10.1f %10.1f\n", name, st[k].n, st[k].ok,
		       st[k].frag, st[k].busy, q50, q99, c99);
		bench_json_obj(&j, NULL);
		bench_json_str(&j, "box", name);
		bench_json_int(&j, "requests", st[k].n);
		bench_json_int(&j, "ok", st[k].ok);
		bench_json_int(&j, "fragmented", st[k].frag);
		bench_json_int(&j, "busy", st[k].busy);
		bench_json_num(&j, "p50_us", q50);
		bench_json_num(&j, "p99_us", q99);
		bench_json_num(&j, "cpu_p99_us", c99);
		bench_json_end_obj(&j);
	}
	bench_json_end_arr(&j);
	bench_json_end_obj(&j);
	if (bench_json_close(&j) != 0)
		bench_die("cannot write %s", json);
}

int bench_place_torus(const unsigned *dims, uint64_t seed, long requests, double occupancy,
                      const char *json)
{
	tp_topology *t;
	tp_cluster *c;
	BENCH_CHECK(tp_topology_generate_torus(&t, 1, dims, 3, 0x7, NULL), "generate torus");
	BENCH_CHECK(tp_cluster_create(&c, t, NULL), "cluster create");
	struct bench_rng rng;
	bench_rng_seed(&rng, seed);
	long next_id = 0;
	torus_fill(c, &rng, occupancy, &next_id);
	long per = (requests + (long)TORUS_NMIX - 1) / (long)TORUS_NMIX;
	struct torus_stats st[TORUS_NMIX];
	memset(st, 0, sizeof st);
	for (size_t k = 0; k < TORUS_NMIX; k++)
		if (!(st[k].us = calloc((size_t)per, sizeof(double))) ||
		    !(st[k].cpu = calloc((size_t)per, sizeof(double))))
			bench_die("out of memory");
	for (long i = 0; i < per * (long)TORUS_NMIX; i++) {
		size_t k = (size_t)i % TORUS_NMIX;
		torus_one(c, &torus_mix[k], &st[k]);
		torus_churn(c, &rng, occupancy, &next_id);
	}
	double occ = 1.0 - (double)tp_cluster_free_total_count(c) / tp_topology_device_count(t);
	double *all = malloc((size_t)per * TORUS_NMIX * sizeof *all);
	double *call = malloc((size_t)per * TORUS_NMIX * sizeof *call);
	if (!all || !call)
		bench_die("out of memory");
	long n = 0;
	for (size_t k = 0; k < TORUS_NMIX; k++) {
		memcpy(all + n, st[k].us, (size_t)st[k].n * sizeof *all);
		memcpy(call + n, st[k].cpu, (size_t)st[k].n * sizeof *call);
		n += st[k].n;
	}
	double q[4] = {bench_quantile(all, (size_t)n, 0.5), bench_quantile(all, (size_t)n, 0.99),
	               bench_quantile(call, (size_t)n, 0.5), bench_quantile(call, (size_t)n, 0.99)};
	uint64_t f0 = bench_now_ns();
	tp_frag *f = NULL;
	BENCH_CHECK(tp_frag_report(c, NULL, 0, &f), "frag report");
	unsigned ext[3];
	uint32_t box = tp_frag_largest_box(f, 0, ext);
	printf("tp_frag_report: %.2f ms; largest free box %ux%ux%u (%u chips), %u free fragments\n",
	       (double)(bench_now_ns() - f0) / 1e6, ext[0], ext[1], ext[2], box,
	       tp_frag_grid_fragment_count(f, 0));
	tp_frag_destroy(f);
	torus_report(dims, occ, st, q, n, json);
	free(all);
	free(call);
	for (size_t k = 0; k < TORUS_NMIX; k++) {
		free(st[k].us);
		free(st[k].cpu);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return 0;
}
