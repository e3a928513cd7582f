/* SPDX-License-Identifier: MIT */
/*
 * tp-bench layout: the published 512-GPU comparison, with the cost model. A 512-GPU training
 * job (128 four-GPU nodes) on an NVL72 fleet of 2 blocks x 16 racks, laid out six ways: where
 * tp_place puts it on the empty fleet, exactly 8 racks by hand, and four scattered layouts.
 * For each: racks and blocks used, tensor groups that cross a rack, the modelled step time, its
 * ratio to the 8-rack layout and the placement efficiency (tp_cost_efficiency).
 *
 * The step model is the one of the calibration test (tests/test_cost.c, "effect 2";
 * docs/cost-model.md): TP x PP x DP = 8 x 4 x 16 by default (--tp / --pp change it), ranks in
 * Megatron order (tensor fastest); 1000 tensor all-reduces of 32 MiB per step, compute set so
 * that they are 4.5% of the step on the 8-rack layout; the gradient all-reduce of a
 * 175B-parameter model's shard, 90% hidden; 16 pipeline transfers of 32 MiB. Published: the
 * job packed into exactly 8 racks ran 14% faster than scattered.
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define LAYOUT_GPUS 512u
#define LAYOUT_NODES (LAYOUT_GPUS / 4u)
#define LAYOUT_BLOCKS 2u
#define LAYOUT_RPB 16u /* racks per block */
#define LAYOUT_NPR 18u /* nodes per rack */
#define LAYOUT_RACKS (LAYOUT_BLOCKS * LAYOUT_RPB)

struct layout_opts {
	unsigned tp, pp;
	uint64_t seed;
	const char *json;
};

struct layout {
	const char *name;
	const char *how;
	uint32_t devs[LAYOUT_GPUS];
	unsigned racks, blocks, split_groups;
	double step_us, efficiency;
};

static void layout_usage(FILE *f)
{
	fprintf(f, "usage: tp-bench layout [--tp N] [--pp N] [--seed N] [--json FILE]\n"
	           "  The published 512-GPU comparison: one training job (128 four-GPU nodes) packed\n"
	           "  into exactly 8 NVL72 racks or scattered, modelled step times side by side.\n"
	           "  --tp and --pp set the tensor and pipeline degrees (default 8 and 4; data\n"
	           "  parallel takes the rest of the 512 GPUs).\n");
}

/* Node k (0..575) of the fleet: rack k / 18, its four GPUs 4k .. 4k + 3. */
static void put_node(struct layout *l, uint32_t rank_node, uint32_t node)
{
	for (uint32_t g = 0; g < 4; g++)
		l->devs[4 * rank_node + g] = node * 4 + g;
}

static uint32_t rack_node(uint32_t rack, uint32_t i) { return rack * LAYOUT_NPR + i; }

/* The six layouts; the first is filled by the caller (tp_place). */
static void layouts_by_hand(struct layout *l, uint64_t seed)
{
	/* exactly 8 racks: the first 16 nodes of racks 0-7 */
	for (uint32_t k = 0; k < LAYOUT_NODES; k++)
		put_node(&l[1], k, rack_node(k / 16, k % 16));
	/* 16 racks (racks 0-7 of both blocks), 8 nodes each, consecutive nodes in one rack */
	for (uint32_t k = 0; k < LAYOUT_NODES; k++) {
		uint32_t r = k / 8;
		put_node(&l[2], k, rack_node((r / 8) * LAYOUT_RPB + r % 8, k % 8));
	}
	/* all 32 racks, 4 nodes each */
	for (uint32_t k = 0; k < LAYOUT_NODES; k++)
		put_node(&l[3], k, rack_node(k / 4, k % 4));
	/* 128 nodes drawn at random from the whole fleet, ranks in node order (what a
	 * topology-oblivious scheduler hands out on a fleet whose free nodes are scattered) */
	struct bench_rng rng;
	bench_rng_seed(&rng, seed);
	uint32_t total = LAYOUT_RACKS * LAYOUT_NPR, left = LAYOUT_NODES, k = 0;
	for (uint32_t node = 0; node < total && left; node++)
		if (bench_rng_below(&rng, total - node) < left) { /* selection sampling: sorted */
			put_node(&l[4], k++, node);
			left--;
		}
	/* the 16 racks of layout 2, but consecutive nodes in different racks */
	for (uint32_t k2 = 0; k2 < LAYOUT_NODES; k2++) {
		uint32_t r = k2 % 16;
		put_node(&l[5], k2, rack_node((r / 8) * LAYOUT_RPB + r % 8, k2 / 16));
	}
}

/* tp_place on the empty fleet: groups of one node, at most 64 GPUs per rack slice, as few racks
 * as possible (the shape the simulator gives jobs larger than a rack). */
static void layout_tp_place(const tp_topology *t, struct layout *l)
{
	tp_cluster *c = NULL;
	BENCH_CHECK(tp_cluster_create(&c, t, NULL), "tp_cluster_create");
	tp_slice slice = {"rack", 64};
	tp_request r = TP_REQUEST_INIT;
	r.id = "job512";
	r.count = LAYOUT_GPUS;
	r.group_size = 4;
	r.preferred = "rack";
	r.slices = &slice;
	r.nslices = 1;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc)
		bench_die("tp_place(512 GPUs): %s: %s", tp_err_name(rc), tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	if (n != LAYOUT_GPUS)
		bench_die("tp_place returned %zu devices, not %u", n, LAYOUT_GPUS);
	memcpy(l->devs, d, sizeof l->devs);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
}

static void layout_measure(const tp_topology *t, struct layout *l, unsigned tp,
                           const struct tp_step_model *m)
{
	bool rack[LAYOUT_RACKS] = {0}, block[LAYOUT_BLOCKS] = {0};
	l->racks = l->blocks = l->split_groups = 0;
	for (uint32_t i = 0; i < LAYOUT_GPUS; i++) {
		uint32_t rk = l->devs[i] / (4 * LAYOUT_NPR);
		if (rk >= LAYOUT_RACKS)
			bench_die("layout %s: device %u is outside the fleet", l->name, l->devs[i]);
		l->racks += !rack[rk];
		l->blocks += !block[rk / LAYOUT_RPB];
		rack[rk] = block[rk / LAYOUT_RPB] = true;
	}
	for (uint32_t g = 0; g < LAYOUT_GPUS; g += tp)
		for (uint32_t i = g + 1; i < g + tp; i++)
			if (l->devs[i] / (4 * LAYOUT_NPR) != l->devs[g] / (4 * LAYOUT_NPR)) {
				l->split_groups++;
				break;
			}
	char err[256];
	int rc = tp_cost_step_us(&l->step_us, t, l->devs, LAYOUT_GPUS, m, NULL, err, sizeof err);
	if (!rc)
		rc = tp_cost_efficiency(&l->efficiency, t, l->devs, LAYOUT_GPUS, m, NULL, err,
		                        sizeof err);
	if (rc)
		bench_die("cost model on layout %s: %s: %s", l->name, tp_err_name(rc), err);
}

int bench_layout_main(int argc, char **argv)
{
	struct layout_opts o = {.tp = 8, .pp = 4, .seed = 1};
	static const struct option lopts[] = {
		{"tp", required_argument, NULL, 't'},   {"pp", required_argument, NULL, 'p'},
		{"seed", required_argument, NULL, 'S'}, {"json", required_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 't': o.tp = bench_arg_u32("--tp", optarg); break;
		case 'p': o.pp = bench_arg_u32("--pp", optarg); break;
		case 'S': o.seed = bench_arg_uint("--seed", optarg); break;
		case 'j': o.json = optarg; break;
		case 'h': layout_usage(stdout); return 0;
		default: layout_usage(stderr); return 2;
		}
	}
	if (optind < argc || !o.tp || !o.pp || LAYOUT_GPUS % (o.tp * o.pp))
		bench_die("--tp %u x --pp %u must divide %u GPUs (and no other arguments)", o.tp, o.pp,
		          LAYOUT_GPUS);

	tp_topology *t = NULL;
	BENCH_CHECK(tp_topology_generate_nvl72(&t, LAYOUT_BLOCKS, LAYOUT_RPB, NULL),
	            "tp_topology_generate_nvl72");
	static struct layout l[6] = {
		{.name = "topoplace", .how = "tp_place on the empty fleet"},
		{.name = "8-racks", .how = "exactly 8 racks, 16 nodes each (by hand)"},
		{.name = "16-racks", .how = "16 racks, 8 nodes each, tensor groups inside racks"},
		{.name = "32-racks", .how = "all 32 racks, 4 nodes each"},
		{.name = "random-nodes", .how = "128 random nodes, ranks in node order"},
		{.name = "16-racks-cross", .how = "16 racks, consecutive nodes in different racks"},
	};
	layout_tp_place(t, &l[0]);
	layouts_by_hand(l, o.seed);

	/* The step model, calibrated on the 8-rack layout (see the file comment). */
	struct tp_step_model m = {.version = TP_STEP_MODEL_VERSION, .tp = o.tp, .pp = o.pp,
	                          .dp = LAYOUT_GPUS / (o.tp * o.pp), .ep = 1,
	                          .tp_bytes = 32.0 * 1024 * 1024, .tp_msgs = 1000};
	double comm = 0;
	BENCH_CHECK(tp_cost_step_us(&comm, t, l[1].devs, LAYOUT_GPUS, &m, NULL, NULL, 0),
	            "tp_cost_step_us");
	if (!(comm > 0))
		bench_die("cost model: no tensor traffic to calibrate with (--tp 1?)");
	m.compute_us = comm * (1 - 0.045) / 0.045;
	m.dp_bytes = 175e9 / 32 * 2;
	m.dp_overlap = 0.9;
	m.pp_bytes = 32.0 * 1024 * 1024;
	m.pp_msgs = 16;

	for (size_t i = 0; i < 6; i++)
		layout_measure(t, &l[i], o.tp, &m);
	double ref = l[1].step_us;
	printf("512-GPU training job on NVL72 (2 blocks x 16 racks x 18 nodes x 4 GPUs), "
	       "TP %u x PP %u x DP %u\n\n",
	       m.tp, m.pp, m.dp);
	printf("%-15s %5s %6s %10s %9s %8s %6s  %s\n", "layout", "racks", "blocks", "TP-split", "step_ms",
	       "vs_8rk", "effic", "how");
	for (size_t i = 0; i < 6; i++)
		printf("%-15s %5u %6u %10u %9.2f %7.3fx %6.3f  %s\n", l[i].name, l[i].racks,
		       l[i].blocks, l[i].split_groups, l[i].step_us / 1000, l[i].step_us / ref,
		       l[i].efficiency, l[i].how);
	printf("\nTP-split = tensor groups whose GPUs are in more than one rack; vs_8rk = step time "
	       "over the 8-rack layout's.\nPublished: packed into exactly 8 racks, 14%% faster "
	       "than scattered (x1.14).\n");

	if (o.json) {
		struct bench_json j;
		if (bench_json_open(&j, o.json))
			bench_die("cannot write %s", o.json);
		bench_json_obj(&j, NULL);
		bench_json_str(&j, "bench", "layout");
		bench_json_int(&j, "gpus", LAYOUT_GPUS);
		bench_json_int(&j, "tp", m.tp);
		bench_json_int(&j, "pp", m.pp);
		bench_json_int(&j, "dp", m.dp);
		bench_json_int(&j, "seed", (long long)o.seed);
		bench_json_arr(&j, "results");
		for (size_t i = 0; i < 6; i++) {
			bench_json_obj(&j, NULL);
			bench_json_str(&j, "layout", l[i].name);
			bench_json_str(&j, "how", l[i].how);
			bench_json_int(&j, "racks", l[i].racks);
			bench_json_int(&j, "blocks", l[i].blocks);
			bench_json_int(&j, "tp_split_groups", l[i].split_groups);
			bench_json_num(&j, "step_ms", l[i].step_us / 1000);
			bench_json_num(&j, "vs_8_racks", l[i].step_us / ref);
			bench_json_num(&j, "efficiency", l[i].efficiency);
			bench_json_end_obj(&j);
		}
		bench_json_end_arr(&j);
		bench_json_end_obj(&j);
		if (bench_json_close(&j))
			bench_die("cannot write %s", o.json);
	}
	tp_topology_destroy(t);
	return 0;
}
