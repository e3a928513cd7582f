/* SPDX-License-Identifier: MIT */
/* Sizing a model for serving (topoplace-sizing.h). The expected figures are the hand
 * computations of docs/serving.md. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-sizing.h"

/* Llama-3.1-70B: 70.6e9 parameters, 80 layers, 64 heads, 8 KV heads of 128, hidden 8192. */
static tp_model_desc llama70b(double weight_bytes)
{
	tp_model_desc m = TP_MODEL_DESC_INIT;
	m.params = 70.6e9;
	m.weight_bytes = weight_bytes;
	m.kv_bytes = 2.0;
	m.layers = 80;
	m.heads = 64;
	m.kv_heads = 8;
	m.head_dim = 128;
	m.hidden = 8192;
	return m;
}

/* `nodes` nodes of `gpus` devices of `model` in one rack; the rack's fabric is InfiniBand. */
static tp_topology *fleet(unsigned nodes, unsigned gpus, const char *model, double mem)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_node_options no = TP_NODE_OPTIONS_INIT;
	no.model = model;
	no.memory_gb = mem;
	unsigned counts[] = {1, nodes};
	cr_assert_eq(tp_topology_builder_generate(b, counts, gpus, &no), 0);
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

static tp_sizing_options opts(unsigned context)
{
	tp_sizing_options o = TP_SIZING_OPTIONS_INIT;
	o.context = context;
	o.alloc = &tp_test_allocator;
	return o;
}

static void init(void)
{
	tp_test_alloc_reset();
}

TestSuite(sizing, .init = init);

#define NEAR(a, b) cr_assert(fabs((a) - (b)) < 1e-6, "%.9g != %.9g", (double)(a), (double)(b))

/* Two 8 x H100 nodes, context 8192, the defaults (90% of 80 GB, 2 GB overhead: 70 GB usable).
 * tp 1 and 2 do not fit (141.2 and 70.6 GB of weights); tp 4 leaves 34.7 GB, 2 KV heads a
 * GPU, 81,920 B a token: 423,583 tokens, 51 sequences; tp 8 leaves 52.35 GB, 1 head, 40,960 B:
 * 1,278,076 tokens, 156 sequences; tp 16 leaves the node. */
Test(sizing, llama70b_on_h100_fewest_gpus)
{
	tp_topology *t = fleet(2, 8, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	cr_assert_eq(tp_sizing_count(s), 2);
	const tp_sizing_option *a = tp_sizing_get(s, 0), *b = tp_sizing_get(s, 1);
	cr_assert_str_eq(a->model, "H100");
	cr_assert_eq(a->tp, 4);
	cr_assert_eq(a->pp, 1);
	cr_assert_eq(a->gpus, 4);
	cr_assert_eq(a->replicas, 1);
	cr_assert_eq(a->nvlink_domain, 8);
	NEAR(a->weights_gb, 35.3);
	NEAR(a->kv_gb, 34.7);
	NEAR(a->kv_token_bytes, 81920.0);
	cr_assert_eq(a->tokens, 423583.0);
	cr_assert_eq(a->sequences, 51);
	cr_assert_eq(b->tp, 8);
	NEAR(b->kv_gb, 52.35);
	NEAR(b->kv_token_bytes, 40960.0);
	cr_assert_eq(b->tokens, 1278076.0);
	cr_assert_eq(b->sequences, 156);
	for (size_t i = 0; i < 2; i++) {
		const tp_sizing_option *x = tp_sizing_get(s, i);
		cr_assert(x->step_us > 0.0);
		NEAR(x->tokens_per_s_gpu, x->sequences / (x->step_us * 1e-6) / x->tp);
	}
	cr_assert_null(tp_sizing_get(s, 2));
	cr_assert_str_eq(tp_sizing_errmsg(s), "");
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(sizing, most_kv_per_gpu_puts_tp8_first)
{
	tp_topology *t = fleet(2, 8, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.goal = TP_SIZE_MOST_KV_PER_GPU;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0);
	cr_assert_eq(tp_sizing_get(s, 0)->tp, 8);
	cr_assert_eq(tp_sizing_get(s, 1)->tp, 4);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
}

/* 200 sequences: tp 4 needs ceil(200 / 51) = 4 replicas, tp 8 ceil(200 / 156) = 2: 16 GPUs
 * each, so the throughput per GPU decides. 400 sequences need 32 and 24 GPUs of the 16. */
Test(sizing, sequences_set_the_replicas)
{
	tp_topology *t = fleet(2, 8, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.sequences = 200;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0);
	cr_assert_eq(tp_sizing_count(s), 2);
	const tp_sizing_option *a = tp_sizing_get(s, 0), *b = tp_sizing_get(s, 1);
	cr_assert_eq(a->gpus, 16);
	cr_assert_eq(b->gpus, 16);
	cr_assert_eq(a->replicas * a->tp, 16);
	cr_assert(a->tokens_per_s_gpu >= b->tokens_per_s_gpu);
	tp_sizing_destroy(s);
	o.sequences = 400;
	TP_ASSERT_ERR(tp_size_model(t, &m, &o, &s), TP_EINFEASIBLE, tp_sizing_errmsg(s),
	              "tp 8 x pp 1 needs 3 replicas, 24 GPUs: the fleet has 16");
	cr_assert_eq(tp_sizing_count(s), 0);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(sizing, throughput_goal_sets_the_replicas)
{
	tp_topology *t = fleet(4, 8, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0);
	const tp_sizing_option *one = tp_sizing_get(s, 0);
	double replica = one->tokens_per_s_gpu * one->tp;
	unsigned tp = one->tp;
	tp_sizing_destroy(s);
	o.tokens_per_s = 2.5 * replica;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0);
	for (size_t i = 0; i < tp_sizing_count(s); i++)
		if (tp_sizing_get(s, i)->tp == tp)
			cr_assert_eq(tp_sizing_get(s, i)->replicas, 3);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
}

/* One GPU: 141.2 GB of fp16 weights against 70 GB usable. */
Test(sizing, llama70b_does_not_fit_one_h100)
{
	tp_topology *t = fleet(4, 1, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	TP_ASSERT_ERR(tp_size_model(t, &m, &o, &s), TP_EINFEASIBLE, tp_sizing_errmsg(s),
	              "no way to serve the model (141.2 GB of weights): H100 (80 GB, 4 GPUs): weights "
	              "need 141.2 GB per GPU at tp 1 x pp 1, 70.0 GB usable");
	tp_sizing_destroy(s);
	/* Across the InfiniBand of the rack when the caller allows it. */
	o.cross_domain = 1;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	cr_assert_eq(tp_sizing_get(s, 0)->tp, 4);
	cr_assert_eq(tp_sizing_get(s, 0)->nvlink_domain, 1);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* fp8 weights, 95% of memory, no overhead (76 GB usable): one H100 holds the 70.6 GB of
 * weights and leaves 5.4 GB, 8 KV heads, 327,680 B a token: 16,479 tokens, 4 sequences of 4096;
 * two hold 35.3 GB each and leave 40.7 GB; 4 KV heads a GPU, 163,840 B a token: 248,413 tokens,
 * 60 sequences. */
Test(sizing, fp8_on_two_h100)
{
	tp_topology *t = fleet(1, 2, "H100", 80.0);
	tp_model_desc m = llama70b(1.0);
	tp_sizing_options o = opts(4096);
	o.mem_utilisation = 0.95;
	o.overhead_gb = 0.0;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	cr_assert_eq(tp_sizing_count(s), 2);
	const tp_sizing_option *one = tp_sizing_get(s, 0);
	cr_assert_eq(one->tp, 1);
	NEAR(one->weights_gb, 70.6);
	NEAR(one->kv_gb, 5.4);
	NEAR(one->kv_token_bytes, 327680.0);
	cr_assert_eq(one->tokens, 16479.0);
	cr_assert_eq(one->sequences, 4);
	const tp_sizing_option *a = tp_sizing_get(s, 1);
	cr_assert_eq(a->tp, 2);
	NEAR(a->weights_gb, 35.3);
	NEAR(a->kv_gb, 40.7);
	NEAR(a->kv_token_bytes, 163840.0);
	cr_assert_eq(a->tokens, 248413.0);
	cr_assert_eq(a->sequences, 60);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
}

/* Past the KV heads the heads are replicated: tp 16 keeps one head a GPU, as tp 8. */
Test(sizing, kv_heads_replicated_past_their_count)
{
	tp_topology *t;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 1, &tp_test_allocator), 0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	const tp_sizing_option *t8 = NULL, *t16 = NULL, *t64 = NULL;
	for (size_t i = 0; i < tp_sizing_count(s); i++) {
		const tp_sizing_option *x = tp_sizing_get(s, i);
		cr_assert_str_eq(x->model, "GB200");
		cr_assert_eq(x->nvlink_domain, 72);
		if (x->tp == 8)
			t8 = x;
		if (x->tp == 16)
			t16 = x;
		if (x->tp == 64)
			t64 = x;
	}
	cr_assert(t8 && t16 && t64);
	NEAR(t16->kv_token_bytes, t8->kv_token_bytes);
	cr_assert(t16->kv_gb > t8->kv_gb);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
}

/* Pipeline stages split the layers: ceil(80 / 2) = 40 a stage halves the KV bytes a token. */
Test(sizing, pipeline_degrees)
{
	tp_topology *t = fleet(2, 4, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.max_pp = 2;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	bool found = false;
	for (size_t i = 0; i < tp_sizing_count(s); i++) {
		const tp_sizing_option *x = tp_sizing_get(s, i);
		if (x->tp == 4 && x->pp == 2) {
			found = true;
			cr_assert_eq(x->gpus, 8);
			NEAR(x->weights_gb, 17.65);
			NEAR(x->kv_token_bytes, 40960.0);
		}
	}
	cr_assert(found);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
}

Test(sizing, hbm_table_and_override)
{
	cr_assert_eq(tp_sizing_hbm_gbps("h100"), 3350.0);
	cr_assert_eq(tp_sizing_hbm_gbps("GB200"), 8000.0);
	cr_assert_eq(tp_sizing_hbm_gbps("X1"), 0.0);
	cr_assert_eq(tp_sizing_hbm_gbps(NULL), 0.0);
	tp_topology *t = fleet(1, 8, "X1", 96.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	TP_ASSERT_ERR(tp_size_model(t, &m, &o, &s), TP_EINFEASIBLE, tp_sizing_errmsg(s),
	              "X1 (96 GB, 8 GPUs): no HBM bandwidth is known for it");
	tp_sizing_destroy(s);
	const char *models[] = {"x1"};
	double gbps[] = {4000.0};
	o.hbm_models = models;
	o.hbm_gbps = gbps;
	o.nhbm = 1;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	cr_assert(tp_sizing_count(s) >= 1);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(sizing, nodes_without_model_or_memory)
{
	tp_topology *t = fleet(1, 8, NULL, 0.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	TP_ASSERT_ERR(tp_size_model(t, &m, &o, &s), TP_EINFEASIBLE, tp_sizing_errmsg(s),
	              "no node of the topology has a device model with a known memory");
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

static void expect_einval(const tp_model_desc *m, const tp_sizing_options *o, const char *frag)
{
	tp_topology *t = fleet(1, 8, "H100", 80.0);
	tp_sizing *s;
	TP_ASSERT_ERR(tp_size_model(t, m, o, &s), TP_EINVAL, tp_sizing_errmsg(s), frag);
	cr_assert_eq(tp_sizing_count(s), 0);
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(sizing, bad_model)
{
	tp_sizing_options o = opts(8192);
	tp_model_desc m = llama70b(2.0);
	m.version = 7;
	expect_einval(&m, &o, "model.version 7 is not 1");
	m = llama70b(2.0);
	m.params = 0;
	expect_einval(&m, &o, "model.params 0 is not a positive finite number");
	m = llama70b(2.0);
	m.kv_bytes = NAN;
	expect_einval(&m, &o, "model.kv_bytes nan is not a positive finite number");
	m = llama70b(2.0);
	m.active_params = 80e9;
	expect_einval(&m, &o, "model.active_params 8e+10 exceeds model.params 7.06e+10");
	m = llama70b(2.0);
	m.head_dim = 0;
	expect_einval(&m, &o, "model.head_dim is 0: it must be at least 1");
	m = llama70b(2.0);
	m.kv_heads = 6;
	expect_einval(&m, &o, "model.heads 64 is not a multiple of model.kv_heads 6");
}

Test(sizing, bad_options)
{
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(0);
	expect_einval(&m, &o, "options.context is 0");
	o = opts(8192);
	o.mem_utilisation = 1.5;
	expect_einval(&m, &o, "options.mem_utilisation 1.5 is outside (0, 1]");
	o = opts(8192);
	o.overhead_gb = -1;
	expect_einval(&m, &o, "options.overhead_gb -1 is not a finite number >= 0");
	o = opts(8192);
	o.goal = (tp_size_goal)9;
	expect_einval(&m, &o, "options.goal 9 is not a tp_size_goal");
	o = opts(8192);
	o.tokens_per_s = -5;
	expect_einval(&m, &o, "options.tokens_per_s -5");
	o = opts(8192);
	o.nhbm = 1;
	expect_einval(&m, &o, "options.nhbm is 1 but hbm_models or hbm_gbps is NULL");
	const char *models[] = {"H100"};
	double gbps[] = {-1};
	o.hbm_models = models;
	o.hbm_gbps = gbps;
	expect_einval(&m, &o, "options.hbm_gbps[0] -1 (model H100) is not a positive finite");
	o = opts(8192);
	o.version = 2;
	expect_einval(&m, &o, "options.version 2 is not 1");
	o = opts(8192);
	o.max_pp = 5000;
	expect_einval(&m, &o, "options.max_pp 5000 is too large");
}

Test(sizing, null_arguments_and_inits)
{
	tp_topology *t = fleet(1, 8, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, NULL), TP_EINVAL);
	TP_ASSERT_ERR(tp_size_model(NULL, &m, &o, &s), TP_EINVAL, tp_sizing_errmsg(s),
	              "the topology is NULL");
	tp_sizing_destroy(s);
	TP_ASSERT_ERR(tp_size_model(t, NULL, &o, &s), TP_EINVAL, tp_sizing_errmsg(s),
	              "the model is NULL");
	tp_sizing_destroy(s);
	TP_ASSERT_ERR(tp_size_model(t, &m, NULL, &s), TP_EINVAL, tp_sizing_errmsg(s),
	              "the options is NULL");
	tp_sizing_destroy(s);
	cr_assert_eq(tp_sizing_count(NULL), 0);
	cr_assert_null(tp_sizing_get(NULL, 0));
	tp_sizing_destroy(NULL);
	tp_sizing_options oi;
	cr_assert_eq(tp_sizing_options_init(&oi, TP_SIZING_OPTIONS_VERSION), 0);
	cr_assert_eq(oi.mem_utilisation, TP_SIZING_DEFAULT_UTILISATION);
	cr_assert_eq(tp_sizing_options_init(&oi, 2), TP_EINVAL);
	cr_assert_eq(tp_sizing_options_init(NULL, 1), TP_EINVAL);
	tp_model_desc mi;
	cr_assert_eq(tp_model_desc_init(&mi, TP_MODEL_DESC_VERSION), 0);
	cr_assert_eq(mi.weight_bytes, 2.0);
	cr_assert_eq(tp_model_desc_init(&mi, 0), TP_EINVAL);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Every allocation may fail (the five options: tp 2 x pp 2, tp 4 x pp 1 and 2, tp 8 x pp 1 and
 * 2): the call then returns TP_ENOMEM (or no result at all) and leaks
 * nothing. */
Test(sizing, allocation_failures)
{
	tp_topology *t = fleet(2, 8, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.max_pp = 2;
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 10000; n++) {
		tp_test_alloc_reset();
		tp_test_alloc_fail_at(n);
		tp_sizing *s = NULL;
		rc = tp_size_model(t, &m, &o, &s);
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		if (rc == 0)
			cr_assert_eq(tp_sizing_count(s), 5, "%zu options", tp_sizing_count(s));
		tp_sizing_destroy(s);
		cr_assert_eq(tp_test_alloc_state.live, 0, "allocation %ld: %ld leaked", n,
		             tp_test_alloc_state.live);
	}
	cr_assert_eq(rc, 0);
	tp_test_alloc_reset();
	tp_topology_destroy(t);
}

/* ---- placing an option ------------------------------------------------------------------- */

/* Hold devices first .. first + n - 1 as job `id`. */
static void hold(tp_cluster *c, const char *id, uint32_t first, uint32_t n)
{
	uint32_t d[64];
	for (uint32_t i = 0; i < n; i++)
		d[i] = first + i;
	cr_assert_eq(tp_cluster_assign(c, id, d, n, NULL), 0, "%s", tp_cluster_errmsg(c));
}

static tp_sizing *size_llama(const tp_topology *t, tp_size_goal goal, unsigned sequences)
{
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.goal = goal;
	o.sequences = sequences;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	return s;
}

Test(sizing, replica_and_tensor_levels)
{
	tp_topology *t = fleet(2, 4, "H100", 80.0);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.max_pp = 2;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	for (size_t i = 0; i < tp_sizing_count(s); i++) {
		const tp_sizing_option *x = tp_sizing_get(s, i);
		cr_assert_str_eq(x->tensor_level, "node");
		cr_assert_str_eq(x->replica_level, x->tp * x->pp <= 4 ? "node" : "rack");
	}
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
}

/* The best-ranked option (tp 8, most KV per GPU) finds no whole node free: fragmented; the
 * next (tp 4) is placed inside one node, and the answer says why the first was not. */
Test(sizing, place_takes_the_best_option_that_fits)
{
	tp_topology *t = fleet(2, 8, "H100", 80.0);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", 0, 4);
	hold(c, "b", 8, 4);
	tp_sizing *s = size_llama(t, TP_SIZE_MOST_KV_PER_GPU, 0);
	tp_request r = TP_REQUEST_INIT;
	r.id = "llama";
	r.job_class = TP_CLASS_INFERENCE;
	tp_placement *p;
	size_t chosen = 99;
	char why[512];
	cr_assert_eq(tp_size_place(c, s, &r, &p, &chosen, why, sizeof why), 0, "%s", why);
	cr_assert_eq(chosen, 1);
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(tp_topology_device_node(t, d[i]), tp_topology_device_node(t, d[0]));
	cr_assert(strstr(why, "#0 H100 tp 8 x pp 1, 8 GPUs: fragmented: "), "%s", why);
	tp_placement_destroy(p);
	/* Two replicas of tp 8 (200 sequences) on an empty fleet: one per node. */
	tp_cluster *e = tp_test_cluster(t);
	tp_sizing *two = size_llama(t, TP_SIZE_MOST_KV_PER_GPU, 200);
	cr_assert_eq(tp_sizing_get(two, 0)->replicas, 2);
	cr_assert_eq(tp_size_place(e, two, &r, &p, &chosen, why, sizeof why), 0, "%s", why);
	cr_assert_eq(chosen, 0);
	d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 16);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(tp_topology_device_node(t, d[i]), tp_topology_device_node(t, d[i / 8 * 8]));
	tp_placement_destroy(p);
	tp_sizing_destroy(two);
	tp_cluster_destroy(e);
	tp_sizing_destroy(s);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A pipeline replica of tp 4 x pp 2 on 4-GPU nodes: one rack group, each tensor group a node. */
Test(sizing, place_keeps_tensor_groups_in_their_domain)
{
	tp_topology *t = fleet(4, 4, "H100", 80.0);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", 0, 1);
	hold(c, "b", 8, 1);
	tp_model_desc m = llama70b(2.0);
	tp_sizing_options o = opts(8192);
	o.max_pp = 2;
	o.max_tp = 4;
	o.goal = TP_SIZE_MOST_KV_PER_GPU;
	tp_sizing *s;
	cr_assert_eq(tp_size_model(t, &m, &o, &s), 0, "%s", tp_sizing_errmsg(s));
	const tp_sizing_option *x = tp_sizing_get(s, 0);
	cr_assert_eq(x->tp, 4);
	cr_assert_eq(x->pp, 2);
	tp_request r = TP_REQUEST_INIT;
	tp_placement *p;
	char why[512];
	cr_assert_eq(tp_size_place(c, s, &r, &p, NULL, why, sizeof why), 0, "%s", why);
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 8);
	for (size_t i = 0; i < n; i++) /* nodes 1 and 3 are the whole free ones */
		cr_assert_eq(tp_topology_device_node(t, d[i]), tp_topology_device_node(t, d[i / 4 * 4]));
	cr_assert_neq(tp_topology_device_node(t, d[0]), tp_topology_device_node(t, d[4]));
	tp_placement_destroy(p);
	tp_sizing_destroy(s);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(sizing, place_when_nothing_fits)
{
	tp_topology *t = fleet(2, 8, "H100", 80.0);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", 0, 8);
	hold(c, "b", 8, 5);
	tp_sizing *s = size_llama(t, TP_SIZE_FEWEST_GPUS, 0);
	tp_request r = TP_REQUEST_INIT;
	tp_placement *p;
	size_t chosen = 99;
	char why[512];
	cr_assert_eq(tp_size_place(c, s, &r, &p, &chosen, why, sizeof why), TP_EBUSY);
	cr_assert_eq(chosen, 99);
	cr_assert_not_null(p);
	cr_assert_eq(tp_placement_status(p), TP_EBUSY);
	cr_assert(strstr(why, "#0 H100 tp 4 x pp 1, 4 GPUs: busy: 3 matching devices are free"), "%s", why);
	cr_assert(strstr(why, "\n#1 H100 tp 8 x pp 1, 8 GPUs: busy: "), "%s", why);
	tp_placement_destroy(p);
	/* Bad arguments. */
	TP_ASSERT_ERR(tp_size_place(NULL, s, &r, &p, NULL, why, sizeof why), TP_EINVAL, why,
	              "the cluster is NULL");
	tp_topology *other = fleet(2, 8, "H100", 80.0);
	tp_sizing *s2 = size_llama(other, TP_SIZE_FEWEST_GPUS, 0);
	TP_ASSERT_ERR(tp_size_place(c, s2, &r, &p, NULL, why, sizeof why), TP_EINVAL, why,
	              "the sizing was made on another topology than the cluster's");
	cr_assert_null(p);
	tp_model_desc huge = llama70b(2.0);
	huge.params = 1e15;
	tp_sizing_options o = opts(8192);
	tp_sizing *none;
	cr_assert_eq(tp_size_model(t, &huge, &o, &none), TP_EINFEASIBLE);
	TP_ASSERT_ERR(tp_size_place(c, none, &r, &p, NULL, why, sizeof why), TP_EINVAL, why,
	              "the sizing has no option (no way to serve the model");
	tp_sizing_destroy(none);
	tp_request bad = TP_REQUEST_INIT;
	bad.spread_level = "nowhere";
	int rc = tp_size_place(c, s, &bad, &p, NULL, why, sizeof why);
	cr_assert_eq(rc, tp_placement_status(p), "%s", why);
	cr_assert(rc == TP_EINVAL || rc == TP_ENOTFOUND, "%s: %s", tp_err_name(rc), why);
	cr_assert(strstr(why, "nowhere"), "%s", why);
	tp_placement_destroy(p);
	tp_sizing_destroy(s2);
	tp_topology_destroy(other);
	tp_sizing_destroy(s);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
