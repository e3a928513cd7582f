/* SPDX-License-Identifier: MIT */
/*
 * tp-bench place: latency of tp_place against fleet size, next to a Kueue-like baseline.
 *
 * Each NVL72 fleet (~10k, ~100k, ~1M GPUs) is filled to ~70% with realistic jobs (bench_fill:
 * random job sizes at random free positions, 2% of racks left empty). Then a fixed mix of
 * requests (1 to 1024 GPUs; required rack, preferred rack, 64-GPU slices per rack, or
 * unconstrained) is cycled: each request is answered by tp_place and by the baseline on the
 * same state, each call timed on its own. After every request the state churns a little (one
 * running job released, the fill topped up again), so the timings cover many states rather than
 * one. For required-rack requests the two answers' racks are compared.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "kueue.h"

#define PLACE_MAX_SIZES 8

enum place_kind { PK_UNCONSTRAINED, PK_REQUIRED, PK_PREFERRED, PK_SLICED };
static const char *const place_kind_name[] = {"unconstrained", "required-rack",
                                              "preferred-rack", "sliced-64/rack"};

struct place_template {
	uint32_t count;
	uint32_t group; /* devices per group (a pod, in Kueue's terms) */
	enum place_kind kind;
};

/* The request mix, cycled in this order. Groups of 4 are whole GB200 nodes. */
static const struct place_template place_mix[] = {
	{1, 1, PK_UNCONSTRAINED},    {1, 1, PK_REQUIRED},        {4, 4, PK_UNCONSTRAINED},
	{4, 4, PK_REQUIRED},         {8, 4, PK_UNCONSTRAINED},   {8, 4, PK_REQUIRED},
	{8, 4, PK_PREFERRED},        {64, 4, PK_UNCONSTRAINED},  {64, 4, PK_REQUIRED},
	{64, 4, PK_PREFERRED},       {64, 4, PK_SLICED},         {72, 4, PK_REQUIRED},
	{72, 4, PK_PREFERRED},       {512, 4, PK_UNCONSTRAINED}, {512, 4, PK_PREFERRED},
	{512, 4, PK_SLICED},         {1024, 4, PK_PREFERRED},    {1024, 4, PK_SLICED},
};
#define PLACE_NMIX (sizeof place_mix / sizeof place_mix[0])

struct place_opts {
	uint64_t sizes[PLACE_MAX_SIZES];
	int nsizes;
	uint64_t seed;
	long requests;
	long baseline_requests;
	double occupancy;
	const char *json;
	FILE *calls; /* --calls FILE: one CSV line per tp_place call, NULL: none */
	bool mix_on; /* --mix on: tp_cluster_set_place_mix(c, NULL, 0), the frag report's mix */
	bool ends;   /* --ends on: every job and request has an expected end (rule 3's end tie) */
	unsigned torus[3]; /* --torus X,Y,Z (0: the NVL72 fleets) */
};

/* Per template: timings and outcomes of both sides. */
struct place_tstats {
	double *tp_us, *bl_us;
	double *tp_cpu, *bl_cpu; /* the same calls' thread CPU time */
	long ntp, nbl;
	long tp_ok, tp_frag, tp_busy, tp_other;
	long bl_ok, bl_frag, bl_busy;
	long same_rack, diff_rack, only_tp, only_bl, compared;
};

struct place_result {
	uint64_t gpus;
	unsigned blocks, rpb;
	double occupancy;
	double p50, p99, bl_p50, bl_p99;
	double cpu_p50, cpu_p99, bl_cpu_p50, bl_cpu_p99;
	long ntp, nbl;
	long same_rack, diff_rack, only_tp, only_bl;
	uint64_t answers; /* FNV-1a over every tp_place answer (status, devices), in call order */
	struct place_tstats t[PLACE_NMIX];
};

static void place_usage(FILE *f)
{
	fprintf(f,
	        "usage: tp-bench place [--sizes 10000,100000,1000000] [--seed N] [--requests N]\n"
	        "                      [--baseline-requests N] [--occupancy 0.7] [--json FILE]\n"
	        "                      [--mix on|off] [--ends on|off] [--calls FILE]\n"
	        "                      [--torus X,Y,Z]\n"
	        "  p50/p99 of tp_place over a request mix on NVL72 fleets at ~70%% occupancy, and\n"
	        "  of a Kueue-like baseline that recounts every node per request. --mix on: the\n"
	        "  cluster protects tp_frag_report's default job mix (tp_cluster_set_place_mix\n"
	        "  with NULL); off (default): no mix, best fit alone, as a new cluster has.\n"
	        "  --ends on: every running job's shape and every request has an expected end\n"
	        "  (random, tp_request.expected_end_s), and the required requests of 4 GPUs or\n"
	        "  fewer require their node instead of the rack, so that ties among equally\n"
	        "  tight nodes are decided by the jobs' ends (rule 3 refined); off (default):\n"
	        "  no ends.\n"
	        "  --calls FILE: every tp_place call as a CSV line (gpus,count,group,kind,\n"
	        "  after_baseline,wall_us,cpu_us; after_baseline 1: a baseline call came just before).\n"
	        "  --torus X,Y,Z: instead, box requests (1x1x1 to 8x8x8 chips) on one torus of\n"
	        "  X x Y x Z chips filled to the occupancy with box jobs (tp_topology_generate_torus).\n");
}

/* With --ends on, the required templates one node can hold require the node, where the end
 * rule (rule 3's tie among equally tight nodes) applies. */
static bool place_node_sized(const struct place_template *m, bool ends)
{
	return ends && m->kind == PK_REQUIRED && m->count <= 4;
}

/* A template's kind as printed: "required-node" where --ends makes it require its node. */
static const char *place_kind(const struct place_template *m, bool ends)
{
	return place_node_sized(m, ends) ? "required-node" : place_kind_name[m->kind];
}

/* The tp_request of a template. `slice` must outlive the request. */
static tp_request place_tp_request(const struct place_template *m, tp_slice *slice, bool ends)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = "bench";
	r.count = m->count;
	r.group_size = m->group;
	switch (m->kind) {
	case PK_REQUIRED: r.required = place_node_sized(m, ends) ? "node" : "rack"; break;
	case PK_PREFERRED: r.preferred = "rack"; break;
	case PK_SLICED:
		slice->level = "rack";
		slice->size = 64;
		r.slices = slice;
		r.nslices = 1;
		break;
	case PK_UNCONSTRAINED: break;
	}
	return r;
}

static struct kq_request place_kq_request(const struct place_template *m, bool ends)
{
	struct kq_request r = {m->count, m->group, -1, -1, -1, 0};
	switch (m->kind) {
	case PK_REQUIRED: r.required = place_node_sized(m, ends) ? NVL_NODE : NVL_RACK; break;
	case PK_PREFERRED: r.preferred = NVL_RACK; break;
	case PK_SLICED:
		r.slice_level = NVL_RACK;
		r.slice_size = 64;
		break;
	case PK_UNCONSTRAINED: break;
	}
	return r;
}

/* Release one random running job and top the fill up again. */
static void place_churn(tp_cluster *c, struct bench_fill *fill, struct bench_rng *rng,
                        double occupancy)
{
	size_t n = tp_cluster_job_count(c);
	if (n) {
		const char *id = tp_cluster_job_at(c, bench_rng_below(rng, n));
		BENCH_CHECK(tp_cluster_release(c, id), tp_cluster_errmsg(c));
	}
	long rc = bench_fill_to(fill, c, rng, occupancy);
	if (rc < 0)
		bench_die("fill: %s (%s)", tp_err_name((int)rc), tp_cluster_errmsg(c));
}

/* Whether every run of `size` devices lies in one domain of `level`. */
static bool place_runs_in_one(const tp_topology *t, const uint32_t *devs, uint32_t n,
                              uint32_t size, unsigned level)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t a = tp_topology_node_domain(t, tp_topology_device_node(t, devs[i]), level);
		uint32_t b = tp_topology_node_domain(t, tp_topology_device_node(t, devs[i - i % size]),
		                                     level);
		if (a != b)
			return false;
	}
	return true;
}

/* Check a baseline answer: distinct free devices, groups in one node, the required rack, the
 * slices each in one rack. The harness dies on a wrong answer rather than time it. */
static void place_check_baseline(const tp_cluster *c, const struct place_template *m,
                                 const uint32_t *devs)
{
	const tp_topology *t = tp_cluster_topology(c);
	for (uint32_t i = 0; i < m->count; i++) {
		if (tp_cluster_device_state(c, devs[i], NULL) != TP_DEVICE_FREE)
			bench_die("baseline returned a device that is not free (%u)", devs[i]);
		for (uint32_t k = 0; k < i; k++)
			if (devs[k] == devs[i])
				bench_die("baseline returned device %u twice", devs[i]);
	}
	bool ok = place_runs_in_one(t, devs, m->count, m->group, NVL_NODE);
	if (m->kind == PK_REQUIRED)
		ok = ok && place_runs_in_one(t, devs, m->count, m->count, NVL_RACK);
	if (m->kind == PK_SLICED)
		ok = ok && place_runs_in_one(t, devs, m->count, 64, NVL_RACK);
	if (!ok)
		bench_die("baseline answer for %u GPUs (%s) breaks its constraints", m->count,
		          place_kind_name[m->kind]);
}

/* FNV-1a over n bytes of v, continuing from h. */
static uint64_t place_fnv(uint64_t h, const void *v, size_t n)
{
	const unsigned char *b = v;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

/* Fold one tp_place answer into the checksum: its status, and its devices in rank order
 * (the same states and calls give the same checksum; any changed answer changes it). */
static uint64_t place_fold_answer(uint64_t h, int rc, const tp_placement *p)
{
	size_t n = 0;
	const uint32_t *d = rc == 0 ? tp_placement_devices(p, &n) : NULL;
	uint32_t head[2] = {(uint32_t)rc, (uint32_t)n};
	h = place_fnv(h, head, sizeof head);
	return n ? place_fnv(h, d, n * sizeof *d) : h;
}

static void place_one(tp_cluster *c, struct kq *kq, const struct place_template *m,
                      struct place_tstats *st, bool run_baseline, uint32_t *devs,
                      uint64_t *answers, FILE *calls, bool after_baseline, double end)
{
	uint32_t tp_rack = TP_NONE;
	tp_slice slice;
	tp_request req = place_tp_request(m, &slice, end > 0);
	req.expected_end_s = end;
	tp_placement *p = NULL;
	uint64_t c0 = bench_thread_cpu_ns();
	uint64_t t0 = bench_now_ns();
	int rc = tp_place(c, &req, &p);
	uint64_t t1 = bench_now_ns();
	uint64_t c1 = bench_thread_cpu_ns();
	if (rc == TP_ENOMEM || rc == TP_EINVAL || !p)
		bench_die("tp_place(%u, %s): %s (%s)", m->count, place_kind(m, end > 0),
		          tp_err_name(rc), p ? tp_placement_errmsg(p) : "no result");
	st->tp_cpu[st->ntp] = (double)(c1 - c0) * 1e-3;
	st->tp_us[st->ntp++] = (double)(t1 - t0) * 1e-3;
	if (calls)
		fprintf(calls, "%u,%u,%u,%s,%d,%.3f,%.3f\n",
		        tp_topology_device_count(tp_cluster_topology(c)), m->count, m->group,
		        place_kind(m, end > 0), after_baseline, (double)(t1 - t0) * 1e-3,
		        (double)(c1 - c0) * 1e-3);
	if (rc == 0)
		st->tp_ok++;
	else if (rc == TP_EFRAGMENTED)
		st->tp_frag++;
	else if (rc == TP_EBUSY)
		st->tp_busy++;
	else
		st->tp_other++;
	*answers = place_fold_answer(*answers, rc, p);
	uint32_t cnt;
	if (rc == 0 && m->kind == PK_REQUIRED)
		tp_placement_domain_at(p, NVL_RACK, 0, &tp_rack, &cnt);
	tp_placement_destroy(p);
	if (!run_baseline)
		return;

	struct kq_request kr = place_kq_request(m, end > 0);
	uint32_t bl_rack;
	uint64_t bc0 = bench_thread_cpu_ns();
	uint64_t b0 = bench_now_ns();
	int brc = kq_place(kq, c, &kr, devs, &bl_rack);
	uint64_t b1 = bench_now_ns();
	uint64_t bc1 = bench_thread_cpu_ns();
	st->bl_cpu[st->nbl] = (double)(bc1 - bc0) * 1e-3;
	st->bl_us[st->nbl++] = (double)(b1 - b0) * 1e-3;
	if (brc == 0) {
		st->bl_ok++;
		place_check_baseline(c, m, devs);
	} else if (brc == TP_EFRAGMENTED) {
		st->bl_frag++;
	} else if (brc == TP_EBUSY) {
		st->bl_busy++;
	} else {
		bench_die("baseline(%u, %s): %s", m->count, place_kind(m, end > 0), tp_err_name(brc));
	}
	if (m->kind != PK_REQUIRED || st->ntp == 0)
		return;
	st->compared++;
	if (rc == 0 && brc == 0)
		*(tp_rack == bl_rack ? &st->same_rack : &st->diff_rack) += 1;
	else if (rc == 0)
		st->only_tp++;
	else if (brc == 0)
		st->only_bl++;
}

static void place_run_size(const struct place_opts *o, uint64_t want, struct place_result *res)
{
	memset(res, 0, sizeof *res);
	bench_nvl72_shape(want, &res->blocks, &res->rpb);
	res->gpus = (uint64_t)res->blocks * res->rpb * NVL72_RACK_GPUS;
	tp_topology *t;
	tp_cluster *c;
	BENCH_CHECK(tp_topology_generate_nvl72(&t, res->blocks, res->rpb, NULL), "generate");
	BENCH_CHECK(tp_cluster_create(&c, t, NULL), "cluster create");
	if (o->mix_on)
		BENCH_CHECK(tp_cluster_set_place_mix(c, NULL, 0), tp_cluster_errmsg(c));
	struct kq *kq = kq_create(t);
	if (!kq)
		bench_die("out of memory");
	kq_set_rule(kq, KQ_RULE_TP); /* same answers as tp_place for single-rack requests */
	struct bench_rng rng;
	bench_rng_seed(&rng, o->seed ^ (res->gpus * 0x9e3779b97f4a7c15u));
	struct bench_fill fill;
	bench_fill_init(&fill, c, &rng, 0.02);
	fill.ends = o->ends;
	bench_progress(false, "place: %llu GPUs: filling", (unsigned long long)res->gpus);
	place_churn(c, &fill, &rng, o->occupancy);

	long per = (o->requests + (long)PLACE_NMIX - 1) / (long)PLACE_NMIX;
	for (size_t i = 0; i < PLACE_NMIX; i++) {
		res->t[i].tp_us = calloc((size_t)per, sizeof(double));
		res->t[i].bl_us = calloc((size_t)per, sizeof(double));
		res->t[i].tp_cpu = calloc((size_t)per, sizeof(double));
		res->t[i].bl_cpu = calloc((size_t)per, sizeof(double));
		if (!res->t[i].tp_us || !res->t[i].bl_us || !res->t[i].tp_cpu || !res->t[i].bl_cpu)
			bench_die("out of memory");
	}
	uint32_t *devs = malloc(1024 * sizeof *devs);
	uint64_t last = 0;
	res->answers = UINT64_C(0xcbf29ce484222325);
	for (long i = 0; i < per * (long)PLACE_NMIX; i++) {
		size_t k = (size_t)i % PLACE_NMIX;
		bool baseline = i < o->baseline_requests;
		/* the previous request's baseline call ran just before this one (cold caches) */
		bool after = i > 0 && i - 1 < o->baseline_requests;
		double end = o->ends ? 1.0 + (double)bench_rng_below(&rng, 1000000) : 0;
		place_one(c, kq, &place_mix[k], &res->t[k], baseline, devs, &res->answers, o->calls,
		          after, end);
		place_churn(c, &fill, &rng, o->occupancy);
		uint64_t now = bench_now_ns();
		if (now - last > 200000000u) {
			bench_progress(false, "place: %llu GPUs: request %ld/%ld",
			               (unsigned long long)res->gpus, i, per * (long)PLACE_NMIX);
			last = now;
		}
	}
	free(devs);
	res->occupancy = 1.0 - (double)tp_cluster_free_total_count(c) / (double)res->gpus;

	/* Overall figures over every request of the mix. */
	double *all = malloc((size_t)per * PLACE_NMIX * sizeof *all);
	double *ball = malloc((size_t)per * PLACE_NMIX * sizeof *ball);
	double *call = malloc((size_t)per * PLACE_NMIX * sizeof *call);
	double *bcall = malloc((size_t)per * PLACE_NMIX * sizeof *bcall);
	long na = 0, nb = 0;
	for (size_t k = 0; k < PLACE_NMIX; k++) {
		struct place_tstats *st = &res->t[k];
		memcpy(all + na, st->tp_us, (size_t)st->ntp * sizeof *all);
		memcpy(ball + nb, st->bl_us, (size_t)st->nbl * sizeof *ball);
		memcpy(call + na, st->tp_cpu, (size_t)st->ntp * sizeof *call);
		memcpy(bcall + nb, st->bl_cpu, (size_t)st->nbl * sizeof *bcall);
		na += st->ntp;
		nb += st->nbl;
		res->same_rack += st->same_rack;
		res->diff_rack += st->diff_rack;
		res->only_tp += st->only_tp;
		res->only_bl += st->only_bl;
	}
	res->ntp = na;
	res->nbl = nb;
	res->p50 = na ? bench_quantile(all, (size_t)na, 0.5) : NAN;
	res->p99 = na ? bench_quantile(all, (size_t)na, 0.99) : NAN;
	res->bl_p50 = bench_quantile(ball, (size_t)nb, 0.5);
	res->bl_p99 = bench_quantile(ball, (size_t)nb, 0.99);
	res->cpu_p50 = na ? bench_quantile(call, (size_t)na, 0.5) : NAN;
	res->cpu_p99 = na ? bench_quantile(call, (size_t)na, 0.99) : NAN;
	res->bl_cpu_p50 = bench_quantile(bcall, (size_t)nb, 0.5);
	res->bl_cpu_p99 = bench_quantile(bcall, (size_t)nb, 0.99);
	free(all);
	free(ball);
	free(call);
	free(bcall);
	bench_fill_fini(&fill);
	kq_destroy(kq);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	bench_progress(true, "place: %llu GPUs: done (%ld tp_place, %ld baseline)",
	               (unsigned long long)res->gpus, na, nb);
}

static void place_print(const struct place_result *r, int n, bool ends)
{
	for (int i = 0; i < n; i++) {
		printf("NVL72 fleet of %llu GPUs (%u blocks x %u racks), occupancy %.1f%%\n",
		       (unsigned long long)r[i].gpus, r[i].blocks, r[i].rpb, r[i].occupancy * 100);
		printf("  %5s %-15s %9s %9s %9s %9s %8s  %-14s %-14s\n", "GPUs", "request", "tp_p50",
		       "tp_p99", "base_p50", "base_p99", "speedup", "tp ok/frag/bsy",
		       "base ok/frg/bsy");
		for (size_t k = 0; k < PLACE_NMIX; k++) {
			struct place_tstats st = r[i].t[k];
			double p50 = st.ntp ? bench_quantile(st.tp_us, (size_t)st.ntp, 0.5) : NAN;
			double p99 = st.ntp ? bench_quantile(st.tp_us, (size_t)st.ntp, 0.99) : NAN;
			double b50 = bench_quantile(st.bl_us, (size_t)st.nbl, 0.5);
			double b99 = bench_quantile(st.bl_us, (size_t)st.nbl, 0.99);
			char a[32], b[32];
			snprintf(a, sizeof a, "%ld/%ld/%ld", st.tp_ok, st.tp_frag, st.tp_busy);
			snprintf(b, sizeof b, "%ld/%ld/%ld", st.bl_ok, st.bl_frag, st.bl_busy);
			printf("  %5u %-15s %9.1f %9.1f %9.1f %9.1f %7.1fx  %-14s %-14s\n",
			       place_mix[k].count, place_kind(&place_mix[k], ends), p50, p99, b50, b99,
			       p50 > 0 ? b50 / p50 : 0, a, b);
		}
		printf("  %5s %-15s %9.1f %9.1f %9.1f %9.1f %7.1fx\n", "all", "(mix)", r[i].p50,
		       r[i].p99, r[i].bl_p50, r[i].bl_p99, r[i].p50 > 0 ? r[i].bl_p50 / r[i].p50 : 0);
		printf("  %5s %-15s %9.1f %9.1f %9.1f %9.1f %7.1fx   (thread CPU time)\n", "all",
		       "(mix, CPU)", r[i].cpu_p50, r[i].cpu_p99, r[i].bl_cpu_p50, r[i].bl_cpu_p99,
		       r[i].cpu_p50 > 0 ? r[i].bl_cpu_p50 / r[i].cpu_p50 : 0);
		printf("  %s answers: same rack %ld, different rack %ld, only tp_place "
		       "placed %ld, only the baseline placed %ld\n",
		       ends ? "required (rack or node)" : "required-rack", r[i].same_rack,
		       r[i].diff_rack, r[i].only_tp, r[i].only_bl);
		printf("  tp_place answers checksum (FNV-1a): %016llx\n\n",
		       (unsigned long long)r[i].answers);
	}
	printf("(times in microseconds; speedup = baseline p50 / tp_place p50)\n");
	static const double t50[] = {20, 50, 200}, t99[] = {200, 1000, 5000};
	for (int i = 0; i < n; i++) {
		int k = r[i].gpus < 50000 ? 0 : r[i].gpus < 500000 ? 1 : 2;
		if (!r[i].ntp) {
			printf("targets at %llu GPUs: not measured (tp_place is not in this build)\n",
			       (unsigned long long)r[i].gpus);
			continue;
		}
		printf("targets at %llu GPUs (wall; CPU time): p50 %.1f; %.1f us (<= %.0f: %s; %s), "
		       "p99 %.1f; %.1f us (<= %.0f: %s; %s)",
		       (unsigned long long)r[i].gpus, r[i].p50, r[i].cpu_p50, t50[k],
		       r[i].p50 <= t50[k] ? "met" : "MISSED", r[i].cpu_p50 <= t50[k] ? "met" : "MISSED",
		       r[i].p99, r[i].cpu_p99, t99[k], r[i].p99 <= t99[k] ? "met" : "MISSED",
		       r[i].cpu_p99 <= t99[k] ? "met" : "MISSED");
		if (k == 1)
			printf(", speedup %.1fx; %.1fx (>= 10x: %s; %s)", r[i].bl_p50 / r[i].p50,
			       r[i].bl_cpu_p50 / r[i].cpu_p50,
			       r[i].bl_p50 >= 10 * r[i].p50 ? "met" : "MISSED",
			       r[i].bl_cpu_p50 >= 10 * r[i].cpu_p50 ? "met" : "MISSED");
		printf("\n");
	}
}

static void place_json(const struct place_opts *o, const struct place_result *r, int n)
{
	struct bench_json j;
	if (bench_json_open(&j, o->json) < 0)
		bench_die("cannot write %s", o->json);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "bench", "place");
	bench_json_str(&j, "library_version", tp_version_string());
	bench_json_int(&j, "seed", (long long)o->seed);
	bench_json_bool(&j, "ends", o->ends);
	bench_json_num(&j, "loadavg_1min_at_end", bench_loadavg());
	bench_json_arr(&j, "results");
	for (int i = 0; i < n; i++) {
		bench_json_obj(&j, NULL);
		bench_json_int(&j, "gpus", (long long)r[i].gpus);
		bench_json_int(&j, "blocks", r[i].blocks);
		bench_json_int(&j, "racks_per_block", r[i].rpb);
		bench_json_num(&j, "occupancy", r[i].occupancy);
		bench_json_num(&j, "p50_us", r[i].p50);
		bench_json_num(&j, "p99_us", r[i].p99);
		bench_json_num(&j, "baseline_p50_us", r[i].bl_p50);
		bench_json_num(&j, "baseline_p99_us", r[i].bl_p99);
		bench_json_num(&j, "speedup_p50", r[i].p50 > 0 ? r[i].bl_p50 / r[i].p50 : NAN);
		bench_json_num(&j, "speedup_p99", r[i].p99 > 0 ? r[i].bl_p99 / r[i].p99 : NAN);
		bench_json_num(&j, "cpu_p50_us", r[i].cpu_p50);
		bench_json_num(&j, "cpu_p99_us", r[i].cpu_p99);
		bench_json_num(&j, "baseline_cpu_p50_us", r[i].bl_cpu_p50);
		bench_json_num(&j, "baseline_cpu_p99_us", r[i].bl_cpu_p99);
		bench_json_num(&j, "speedup_cpu_p50",
		               r[i].cpu_p50 > 0 ? r[i].bl_cpu_p50 / r[i].cpu_p50 : NAN);
		bench_json_int(&j, "requests", r[i].ntp);
		bench_json_int(&j, "baseline_requests", r[i].nbl);
		bench_json_int(&j, "required_rack_same", r[i].same_rack);
		bench_json_int(&j, "required_rack_different", r[i].diff_rack);
		bench_json_int(&j, "required_rack_only_tp", r[i].only_tp);
		bench_json_int(&j, "required_rack_only_baseline", r[i].only_bl);
		char hex[24];
		snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r[i].answers);
		bench_json_str(&j, "answers_fnv1a", hex);
		bench_json_arr(&j, "mix");
		for (size_t k = 0; k < PLACE_NMIX; k++) {
			struct place_tstats st = r[i].t[k];
			bench_json_obj(&j, NULL);
			bench_json_int(&j, "count", place_mix[k].count);
			bench_json_int(&j, "group", place_mix[k].group);
			bench_json_str(&j, "kind", place_kind(&place_mix[k], o->ends));
			bench_json_num(&j, "p50_us",
			               st.ntp ? bench_quantile(st.tp_us, (size_t)st.ntp, 0.5) : NAN);
			bench_json_num(&j, "p99_us",
			               st.ntp ? bench_quantile(st.tp_us, (size_t)st.ntp, 0.99) : NAN);
			bench_json_num(&j, "baseline_p50_us", bench_quantile(st.bl_us, (size_t)st.nbl, 0.5));
			bench_json_num(&j, "baseline_p99_us",
			               bench_quantile(st.bl_us, (size_t)st.nbl, 0.99));
			bench_json_num(&j, "cpu_p50_us",
			               st.ntp ? bench_quantile(st.tp_cpu, (size_t)st.ntp, 0.5) : NAN);
			bench_json_num(&j, "cpu_p99_us",
			               st.ntp ? bench_quantile(st.tp_cpu, (size_t)st.ntp, 0.99) : NAN);
			bench_json_num(&j, "baseline_cpu_p50_us",
			               bench_quantile(st.bl_cpu, (size_t)st.nbl, 0.5));
			bench_json_int(&j, "ok", st.tp_ok);
			bench_json_int(&j, "fragmented", st.tp_frag);
			bench_json_int(&j, "busy", st.tp_busy);
			bench_json_int(&j, "baseline_ok", st.bl_ok);
			bench_json_int(&j, "baseline_fragmented", st.bl_frag);
			bench_json_int(&j, "baseline_busy", st.bl_busy);
			bench_json_end_obj(&j);
		}
		bench_json_end_arr(&j);
		bench_json_end_obj(&j);
	}
	bench_json_end_arr(&j);
	bench_json_end_obj(&j);
	if (bench_json_close(&j) != 0)
		bench_die("cannot write %s", o->json);
}

int bench_place_main(int argc, char **argv)
{
	struct place_opts o = {.sizes = {10000, 100000, 1000000}, .nsizes = 3, .seed = 1,
	                       .requests = 5400, .baseline_requests = 1800, .occupancy = 0.7};
	static const struct option lopts[] = {
		{"sizes", required_argument, NULL, 's'},
		{"seed", required_argument, NULL, 'S'},
		{"requests", required_argument, NULL, 'r'},
		{"baseline-requests", required_argument, NULL, 'b'},
		{"occupancy", required_argument, NULL, 'o'},
		{"json", required_argument, NULL, 'j'},
		{"mix", required_argument, NULL, 'm'},
		{"ends", required_argument, NULL, 'e'},
		{"torus", required_argument, NULL, 't'},
		{"calls", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.nsizes = bench_parse_sizes(optarg, o.sizes, PLACE_MAX_SIZES);
			if (o.nsizes <= 0)
				bench_die("--sizes: expected a comma-separated list of GPU counts");
			break;
		case 'S': o.seed = bench_arg_uint("--seed", optarg); break;
		case 'r': o.requests = strtol(optarg, NULL, 0); break;
		case 'b': o.baseline_requests = strtol(optarg, NULL, 0); break;
		case 'o': o.occupancy = bench_arg_num("--occupancy", optarg); break;
		case 'j': o.json = optarg; break;
		case 'm':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				bench_die("--mix: expected on or off, not '%s'", optarg);
			o.mix_on = !strcmp(optarg, "on");
			break;
		case 'e':
			if (strcmp(optarg, "on") && strcmp(optarg, "off"))
				bench_die("--ends: expected on or off, not '%s'", optarg);
			o.ends = !strcmp(optarg, "on");
			break;
		case 't':
			if (sscanf(optarg, "%u,%u,%u", &o.torus[0], &o.torus[1], &o.torus[2]) != 3 ||
			    !o.torus[0] || !o.torus[1] || !o.torus[2])
				bench_die("--torus: expected X,Y,Z (each >= 1), not '%s'", optarg);
			break;
		case 'c':
			if (o.calls)
				fclose(o.calls);
			if (!(o.calls = fopen(optarg, "w")))
				bench_die("--calls: cannot write %s", optarg);
			fputs("gpus,count,group,kind,after_baseline,wall_us,cpu_us\n", o.calls);
			break;
		case 'h': place_usage(stdout); return 0;
		default: place_usage(stderr); return 2;
		}
	}
	if (o.requests < (long)PLACE_NMIX || o.baseline_requests < 0 || o.occupancy < 0 ||
	    o.occupancy > 0.95)
		bench_die("--requests must be >= %zu, --baseline-requests >= 0, --occupancy in "
		          "[0, 0.95]", PLACE_NMIX);
	if (o.torus[0] && o.calls)
		bench_die("--calls: not with --torus");
	if (o.torus[0])
		return bench_place_torus(o.torus, o.seed, o.requests, o.occupancy, o.json);
	struct place_result *res = calloc(PLACE_MAX_SIZES, sizeof *res);
	if (!res)
		bench_die("out of memory");
	for (int i = 0; i < o.nsizes; i++)
		place_run_size(&o, o.sizes[i], &res[i]);
	place_print(res, o.nsizes, o.ends);
	place_json(&o, res, o.nsizes);
	if (o.calls && fclose(o.calls))
		bench_die("--calls: write failed");
	for (int i = 0; i < o.nsizes; i++)
		for (size_t k = 0; k < PLACE_NMIX; k++) {
			free(res[i].t[k].tp_us);
			free(res[i].t[k].bl_us);
			free(res[i].t[k].tp_cpu);
			free(res[i].t[k].bl_cpu);
		}
	free(res);
	return 0;
}
