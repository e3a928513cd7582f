/* SPDX-License-Identifier: MIT */
/*
 * The cost model: formulas pinned on a hand-built topology, then the two published effects the
 * model is calibrated against (docs/cost-model.md), then efficiency and allocation failures.
 */
#include <math.h>
#include <stdio.h>

#include "cost.h" /* the collectives; the step model is public */
#include "testutil.h"

/* ---- helpers ----------------------------------------------------------------------------- */

/* Expected figures are computed here from the formulas, independently of cost.c. */
static double msg_us(double lat, double gbps, double bytes) { return lat + bytes / (gbps * 1e3); }
static double wire(double gbps, double bytes) { return bytes / (gbps * 1e3); }

#define ASSERT_US(got, want)                                                                   \
	do {                                                                                       \
		double g__ = (got), w__ = (want);                                                      \
		cr_assert(fabs(g__ - w__) <= 1e-9 * fmax(1.0, fabs(w__)), "%s = %.12g, want %.12g",   \
		          #got, g__, w__);                                                             \
	} while (0)

/* The hand-built topology: 2 racks x 2 nodes x 4 GPUs. Devices 0-3 node0, 4-7 node1 (rack0),
 * 8-11 node2, 12-15 node3 (rack1). */
#define NV_GBPS 400.0
#define NV_LAT 2.0
#define RACK_GBPS 40.0
#define RACK_LAT 10.0
#define TOP_GBPS 20.0
#define TOP_LAT 30.0

static tp_topology *hand_topology(tp_link_kind rack_kind, double rack_gbps, double rack_lat,
                                  const double *node_perf)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, NV_GBPS, NV_LAT), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 0, rack_kind, rack_gbps, rack_lat), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, TOP_GBPS,
	                                            TOP_LAT), 0);
	for (unsigned i = 0; i < 4; i++) {
		char name[16], rack[16];
		snprintf(name, sizeof name, "n%u", i);
		snprintf(rack, sizeof rack, "r%u", i / 2);
		const char *path[1] = {rack};
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		if (node_perf)
			o.perf = node_perf[i];
		cr_assert_eq(tp_topology_builder_add_node(b, name, path, 4, &o), 0);
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

static tp_topology *hand(void)
{
	return hand_topology(TP_LINK_IB, RACK_GBPS, RACK_LAT, NULL);
}

static const uint32_t all16[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* ---- link classes and point-to-point ----------------------------------------------------- */

Test(cost, link_is_the_smallest_common_level)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	cr_assert_eq(tp_cost_link(t, 0, 3)->gbps, NV_GBPS);
	cr_assert_eq(tp_cost_link(t, 2, 2)->gbps, NV_GBPS);
	cr_assert_eq(tp_cost_link(t, 3, 4)->gbps, RACK_GBPS);
	cr_assert_eq(tp_cost_link(t, 4, 3)->latency_us, RACK_LAT);
	cr_assert_eq(tp_cost_link(t, 7, 8)->gbps, TOP_GBPS);
	cr_assert_eq(tp_cost_link(t, 15, 0)->latency_us, TOP_LAT);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cost, p2p)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	ASSERT_US(tp_cost_p2p_us(t, 0, 1, 1e6), msg_us(NV_LAT, NV_GBPS, 1e6));
	ASSERT_US(tp_cost_p2p_us(t, 0, 4, 1e6), msg_us(RACK_LAT, RACK_GBPS, 1e6));
	ASSERT_US(tp_cost_p2p_us(t, 12, 3, 1e6), msg_us(TOP_LAT, TOP_GBPS, 1e6));
	ASSERT_US(tp_cost_p2p_us(t, 5, 5, 1e6), 0.0);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- all-reduce -------------------------------------------------------------------------- */

Test(cost, ring_allreduce)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	double b = 4e6;
	ASSERT_US(tp_cost_ring_allreduce_us(t, all16, 1, b), 0.0);
	ASSERT_US(tp_cost_ring_allreduce_us(t, all16, 0, b), 0.0);
	/* in one node: 2(n-1) steps of b/n over NVLink */
	ASSERT_US(tp_cost_ring_allreduce_us(t, all16, 4, b), 6 * msg_us(NV_LAT, NV_GBPS, b / 4));
	/* two nodes of a rack: the two rack edges set the pace of every step */
	uint32_t two[4] = {0, 1, 4, 5};
	ASSERT_US(tp_cost_ring_allreduce_us(t, two, 4, b), 6 * msg_us(RACK_LAT, RACK_GBPS, b / 4));
	/* the whole cluster: 30 steps over the top-level fabric */
	ASSERT_US(tp_cost_ring_allreduce_us(t, all16, 16, b),
	          30 * msg_us(TOP_LAT, TOP_GBPS, b / 16));
	/* the closing edge counts: 0-1-2-3 in a node, 8 in the other rack */
	uint32_t closing[2] = {0, 8};
	ASSERT_US(tp_cost_ring_allreduce_us(t, closing, 2, b),
	          2 * msg_us(TOP_LAT, TOP_GBPS, b / 2));
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* One stage of the hierarchical all-reduce, as documented in cost.h. */
static double stage_us(double m, double lat, double gbps, double shard)
{
	return 2 * ((m - 1) * lat + (m - 1) / m * wire(gbps, shard));
}

Test(cost, hier_allreduce)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	double b = 4e6;
	double node4 = stage_us(4, NV_LAT, NV_GBPS, b);
	/* one node: the same as the ring */
	ASSERT_US(tp_cost_hier_allreduce_us(t, all16, 4, b), node4);
	ASSERT_US(tp_cost_hier_allreduce_us(t, all16, 4, b),
	          tp_cost_ring_allreduce_us(t, all16, 4, b));
	/* one rack: node stage, then 2 nodes exchange shards of b/4 over the rack fabric */
	ASSERT_US(tp_cost_hier_allreduce_us(t, all16, 8, b),
	          node4 + stage_us(2, RACK_LAT, RACK_GBPS, b / 4));
	/* uneven 4 + 1: the lone device carries the whole buffer across the rack */
	ASSERT_US(tp_cost_hier_allreduce_us(t, all16, 5, b),
	          node4 + stage_us(2, RACK_LAT, RACK_GBPS, b));
	/* everything: node, rack, then 2 racks with shards of b/8 over the top fabric */
	double whole = node4 + stage_us(2, RACK_LAT, RACK_GBPS, b / 4) +
	               stage_us(2, TOP_LAT, TOP_GBPS, b / 8);
	ASSERT_US(tp_cost_hier_allreduce_us(t, all16, 16, b), whole);
	/* rank order does not matter */
	uint32_t mixed[16] = {15, 0, 8, 3, 12, 4, 1, 9, 13, 5, 2, 10, 14, 6, 11, 7};
	ASSERT_US(tp_cost_hier_allreduce_us(t, mixed, 16, b), whole);
	/* the chosen all-reduce is the better of the two */
	ASSERT_US(tp_cost_allreduce_us(t, all16, 16, b), whole);
	cr_assert_lt(whole, tp_cost_ring_allreduce_us(t, all16, 16, b));
	uint32_t pair[2] = {0, 4};
	ASSERT_US(tp_cost_allreduce_us(t, pair, 2, b), 2 * msg_us(RACK_LAT, RACK_GBPS, b / 2));
	ASSERT_US(tp_cost_allreduce_us(t, pair, 1, b), 0.0);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- all-to-all -------------------------------------------------------------------------- */

Test(cost, alltoall)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	double b = 4e6;
	ASSERT_US(tp_cost_alltoall_us(t, all16, 1, b), 0.0);
	/* one node: 3 peers of b/4 over NVLink, one latency */
	ASSERT_US(tp_cost_alltoall_us(t, all16, 4, b), NV_LAT + wire(NV_GBPS, 3 * b / 4));
	/* one rack: NVLink (3 peers) and the NIC (4 peers) work in parallel; the NIC is slower */
	ASSERT_US(tp_cost_alltoall_us(t, all16, 8, b),
	          RACK_LAT + fmax(wire(NV_GBPS, 3 * b / 8), wire(RACK_GBPS, 4 * b / 8)));
	/* everything: the rack and cluster levels share the NIC, so they add up */
	double nic = wire(RACK_GBPS, 4 * b / 16) + wire(TOP_GBPS, 8 * b / 16);
	ASSERT_US(tp_cost_alltoall_us(t, all16, 16, b), TOP_LAT + nic);
	/* uneven: 0,1,2 in node0 and 4 in node1: device 4 sends 3 peers' share over the NIC */
	uint32_t uneven[4] = {4, 0, 1, 2};
	ASSERT_US(tp_cost_alltoall_us(t, uneven, 4, b), RACK_LAT + wire(RACK_GBPS, 3 * b / 4));
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cost, alltoall_nvlink_levels_share_ports)
{
	tp_test_alloc_reset();
	tp_topology *t = hand_topology(TP_LINK_NVLINK, 100.0, 5.0, NULL);
	double b = 4e6;
	/* node and rack are both NVLink: the same ports, so their wire times add up */
	ASSERT_US(tp_cost_alltoall_us(t, all16, 8, b),
	          5.0 + wire(NV_GBPS, 3 * b / 8) + wire(100.0, 4 * b / 8));
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- the training step ------------------------------------------------------------------- */

/* The public calls as one figure: the time (or efficiency), or the error code. */
static double step_us(const tp_topology *t, const uint32_t *devs, size_t n,
                      const tp_step_model *m)
{
	double us = -1;
	int rc = tp_cost_step_us(&us, t, devs, n, m, NULL, NULL, 0);
	return rc ? rc : us;
}

static double efficiency(const tp_topology *t, const uint32_t *devs, size_t n,
                         const tp_step_model *m)
{
	double e = -1;
	int rc = tp_cost_efficiency(&e, t, devs, n, m, NULL, NULL, 0);
	return rc ? rc : e;
}

static tp_step_model base_model(unsigned tp, unsigned pp, unsigned dp)
{
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = tp;
	m.pp = pp;
	m.dp = dp;
	m.ep = 1;
	return m;
}

Test(cost, step_formula)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	/* tp 4 (a node), dp 2 (the two nodes of a rack), pp 2 (the two racks) */
	tp_step_model m = base_model(4, 2, 2);
	m.compute_us = 1000;
	m.tp_bytes = 1e6;
	m.tp_msgs = 10;
	m.dp_bytes = 8e6;
	m.dp_overlap = 0.75;
	m.pp_bytes = 2e6;
	m.pp_msgs = 3;
	m.ep = 2;
	m.ep_bytes = 4e6;
	m.ep_msgs = 5;
	double tp = 10 * 6 * msg_us(NV_LAT, NV_GBPS, 1e6 / 4);
	/* dp group of rank t: devices t and t + 4, one per node of a rack */
	double dp = 0.25 * 2 * msg_us(RACK_LAT, RACK_GBPS, 8e6 / 2);
	/* rank r of stage 0 (rack0) talks to rank r of stage 1 (rack1) */
	double pp = 3 * msg_us(TOP_LAT, TOP_GBPS, 2e6);
	/* expert groups are the dp pairs: each sends half its buffer over the rack NIC */
	double ep = 5 * msg_us(RACK_LAT, RACK_GBPS, 4e6 / 2);
	ASSERT_US(step_us(t, all16, 16, &m), 1000 + tp + dp + pp + ep);
	/* each term alone */
	tp_step_model c = base_model(4, 2, 2);
	c.compute_us = 1000;
	ASSERT_US(step_us(t, all16, 16, &c), 1000);
	c.dp_bytes = 8e6;
	c.dp_overlap = 1.0;
	ASSERT_US(step_us(t, all16, 16, &c), 1000);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cost, step_slowest_device_sets_the_pace)
{
	tp_test_alloc_reset();
	static const double perf[4] = {1.0, 1.0, 0.5, 2.0};
	tp_topology *t = hand_topology(TP_LINK_IB, RACK_GBPS, RACK_LAT, perf);
	tp_step_model m = base_model(4, 1, 1);
	m.compute_us = 1000;
	ASSERT_US(step_us(t, all16, 4, &m), 1000);        /* node0, perf 1 */
	ASSERT_US(step_us(t, all16 + 12, 4, &m), 500);    /* node3, perf 2 */
	uint32_t mixed[4] = {0, 1, 8, 12};                         /* node2 is at perf 0.5 */
	tp_step_model one = base_model(1, 1, 4);
	one.compute_us = 1000;
	ASSERT_US(step_us(t, mixed, 4, &one), 2000);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cost, step_rejects_bad_models)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_step_model m = base_model(4, 2, 2);
	cr_assert_eq(step_us(t, all16, 15, &m), TP_EINVAL);   /* 4*2*2 != 15 */
	cr_assert_eq(step_us(t, all16, 16, NULL), TP_EINVAL);
	cr_assert_eq(step_us(t, NULL, 16, &m), TP_EINVAL);
	tp_step_model bad = m;
	bad.tp = 0;
	cr_assert_eq(step_us(t, all16, 16, &bad), TP_EINVAL);
	bad = base_model(1u << 31, 1u << 31, 4); /* the product wraps to 0 in 64 bits */
	cr_assert_eq(step_us(t, all16, 0, &bad), TP_EINVAL);
	bad = base_model(4, 1, 4);
	bad.ep = 3; /* does not divide dp */
	cr_assert_eq(step_us(t, all16, 16, &bad), TP_EINVAL);
	bad = m;
	bad.dp_overlap = 1.5;
	cr_assert_eq(step_us(t, all16, 16, &bad), TP_EINVAL);
	bad = m;
	bad.compute_us = NAN;
	cr_assert_eq(step_us(t, all16, 16, &bad), TP_EINVAL);
	bad = m;
	bad.tp_bytes = -1;
	cr_assert_eq(efficiency(t, all16, 16, &bad), TP_EINVAL);
	uint32_t out_of_range[16];
	memcpy(out_of_range, all16, sizeof all16);
	out_of_range[7] = 16;
	cr_assert_eq(step_us(t, out_of_range, 16, &m), TP_EINVAL);
	cr_assert_eq(efficiency(t, out_of_range, 16, &m), TP_EINVAL);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Each bad argument: the code, a message naming the field and the value, out unchanged. */
static void expect_bad(const tp_topology *t, const uint32_t *devs, size_t n,
                       const tp_step_model *m, const tp_allocator *alloc, const char *fragment)
{
	char err[256] = "stale";
	double out = 42.0;
	TP_ASSERT_ERR(tp_cost_step_us(&out, t, devs, n, m, alloc, err, sizeof err), TP_EINVAL, err,
	              fragment);
	cr_assert_eq(out, 42.0, "a failed call wrote its output");
	strcpy(err, "stale");
	TP_ASSERT_ERR(tp_cost_efficiency(&out, t, devs, n, m, alloc, err, sizeof err), TP_EINVAL,
	              err, fragment);
	cr_assert_eq(out, 42.0, "a failed call wrote its output");
}

Test(cost, step_messages_name_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_step_model m = base_model(4, 2, 2), bad;
	expect_bad(t, all16, 15, &m, NULL,
	           "model.tp 4 x model.pp 2 x model.dp 2 is not the 15 devices");
	expect_bad(t, all16, 16, NULL, NULL, "model is NULL");
	expect_bad(NULL, all16, 16, &m, NULL, "topology is NULL");
	expect_bad(t, NULL, 16, &m, NULL, "devs is NULL with n 16");
	expect_bad(t, all16, 17, &m, NULL, "n 17 is more than the topology's 16 devices");
	bad = m;
	bad.version = 7;
	expect_bad(t, all16, 16, &bad, NULL, "model.version 7 is not 1 to 3");
	bad = m;
	bad.pp = 0;
	expect_bad(t, all16, 16, &bad, NULL, "model.pp is 0");
	bad = base_model(4, 1, 4);
	bad.ep = 3;
	expect_bad(t, all16, 16, &bad, NULL, "model.ep 3 does not divide model.dp 4");
	bad = m;
	bad.dp_overlap = 1.5;
	expect_bad(t, all16, 16, &bad, NULL, "model.dp_overlap 1.5 is outside [0, 1]");
	bad = m;
	bad.pp_bytes = -2;
	expect_bad(t, all16, 16, &bad, NULL, "model.pp_bytes -2 is negative or not finite");
	uint32_t far[16];
	memcpy(far, all16, sizeof far);
	far[9] = 99;
	expect_bad(t, far, 16, &m, NULL, "devs[9] 99 is out of range: the topology has 16 devices");
	tp_allocator broken = tp_test_allocator;
	broken.free = NULL;
	expect_bad(t, all16, 16, &m, &broken, "alloc has a NULL function");
	char err[64];
	cr_assert_eq(tp_cost_step_us(NULL, t, all16, 16, &m, NULL, err, sizeof err), TP_EINVAL);
	cr_assert_str_eq(err, "out is NULL");
	cr_assert_eq(tp_cost_efficiency(NULL, t, all16, 16, &m, NULL, NULL, 0), TP_EINVAL);
	/* a success clears the buffer */
	double us;
	cr_assert_eq(tp_cost_step_us(&us, t, all16, 16, &m, NULL, err, sizeof err), 0);
	cr_assert_str_empty(err);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

static bool same_model(const tp_step_model *a, const tp_step_model *b)
{
	return a->version == b->version && a->tp == b->tp && a->pp == b->pp && a->dp == b->dp &&
	       a->ep == b->ep && a->compute_us == b->compute_us && a->tp_bytes == b->tp_bytes &&
	       a->tp_msgs == b->tp_msgs && a->dp_bytes == b->dp_bytes &&
	       a->dp_overlap == b->dp_overlap && a->pp_bytes == b->pp_bytes &&
	       a->pp_msgs == b->pp_msgs && a->ep_bytes == b->ep_bytes && a->ep_msgs == b->ep_msgs &&
	       (a->version < 2 || a->min_efficiency == b->min_efficiency);
}

Test(cost, step_model_init)
{
	tp_step_model m, want = TP_STEP_MODEL_INIT;
	memset(&m, 0xa5, sizeof m);
	cr_assert_eq(tp_step_model_init(&m, TP_STEP_MODEL_VERSION), 0);
	cr_assert_eq(m.version, TP_STEP_MODEL_VERSION);
	cr_assert(m.tp == 1 && m.pp == 1 && m.dp == 1 && m.ep == 1);
	cr_assert(m.compute_us == 0 && m.dp_overlap == 0 && m.tp_msgs == 0);
	cr_assert(same_model(&m, &want));
	tp_step_model keep = m;
	cr_assert_eq(tp_step_model_init(&m, 0), TP_EINVAL);
	cr_assert_eq(tp_step_model_init(&m, TP_STEP_MODEL_VERSION + 1), TP_EINVAL);
	cr_assert(same_model(&m, &keep), "a refused init changed the model");
	cr_assert_eq(tp_step_model_init(NULL, TP_STEP_MODEL_VERSION), TP_EINVAL);
	cr_assert_eq(m.min_efficiency, 0.0);
	/* version 1 (0.3's struct): its fields only, the floor's bytes are left as they were */
	tp_step_model v1;
	memset(&v1, 0xa5, sizeof v1);
	double poison = v1.min_efficiency;
	cr_assert_eq(tp_step_model_init(&v1, 1), 0);
	cr_assert_eq(v1.version, 1);
	cr_assert(v1.tp == 1 && v1.ep_msgs == 0);
	cr_assert(memcmp(&v1.min_efficiency, &poison, sizeof poison) == 0);
	/* the initialised model is a valid one-device job */
	tp_topology *t = hand();
	double us = -1;
	cr_assert_eq(tp_cost_step_us(&us, t, all16, 1, &m, NULL, NULL, 0), 0);
	cr_assert_eq(us, 0.0);
	tp_topology_destroy(t);
}

/* The scratch comes from the call's allocator, never the topology's: with NULL the test
 * allocator (the topology's) sees no call, and with it every call is freed again. */
Test(cost, scratch_comes_from_the_calls_allocator)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_step_model m = base_model(4, 1, 4);
	m.dp_bytes = 1e6;
	m.ep = 2;
	m.ep_bytes = 1e6;
	m.ep_msgs = 1;
	uint32_t scattered[16] = {0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15};
	long calls = tp_test_alloc_state.calls;
	double a = 0, b = 0, e = 0;
	cr_assert_eq(tp_cost_step_us(&a, t, scattered, 16, &m, NULL, NULL, 0), 0);
	cr_assert_eq(tp_cost_efficiency(&e, t, scattered, 16, &m, NULL, NULL, 0), 0);
	cr_assert_eq(tp_test_alloc_state.calls, calls, "the topology's allocator was used");
	cr_assert_eq(tp_cost_step_us(&b, t, scattered, 16, &m, &tp_test_allocator, NULL, 0), 0);
	cr_assert_gt(tp_test_alloc_state.calls, calls, "the call's allocator was not used");
	cr_assert_eq(a, b);
	cr_assert(e > 0 && e <= 1);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- efficiency -------------------------------------------------------------------------- */

static tp_step_model busy_model(unsigned tp, unsigned pp, unsigned dp)
{
	tp_step_model m = base_model(tp, pp, dp);
	m.compute_us = 1000;
	m.tp_bytes = 1e6;
	m.tp_msgs = 10;
	m.dp_bytes = 8e6;
	m.dp_overlap = 0.5;
	m.pp_bytes = 1e6;
	m.pp_msgs = 4;
	return m;
}

Test(cost, efficiency_packed_and_scattered)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_step_model m = busy_model(4, 1, 2);
	/* packed: the first two nodes */
	double e = efficiency(t, all16, 8, &m);
	cr_assert(fabs(e - 1.0) <= 1e-9, "packed efficiency %.12g", e);
	/* the same shape elsewhere (rack1) is just as good */
	e = efficiency(t, all16 + 8, 8, &m);
	cr_assert(fabs(e - 1.0) <= 1e-9, "rack1 efficiency %.12g", e);
	/* tensor groups split over nodes and racks */
	uint32_t scattered[8] = {0, 1, 8, 9, 4, 5, 12, 13};
	e = efficiency(t, scattered, 8, &m);
	cr_assert(e > 0.0 && e < 0.9, "scattered efficiency %.12g", e);
	double ideal = step_us(t, all16, 8, &m);
	double actual = step_us(t, scattered, 8, &m);
	ASSERT_US(e, ideal / actual);
	/* a whole-cluster job in tree order is the ideal */
	tp_step_model w = busy_model(4, 2, 2);
	e = efficiency(t, all16, 16, &w);
	cr_assert(fabs(e - 1.0) <= 1e-9, "whole-cluster efficiency %.12g", e);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The ideal keeps tensor groups inside racks: on NVL72 racks of 72, tensor groups of 16 take 64
 * GPUs of each rack, so "the first 128 devices" (a group straddling two racks) is not ideal. */
Test(cost, efficiency_ideal_keeps_groups_whole)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 4, &tp_test_allocator), 0);
	tp_step_model m = busy_model(16, 1, 8);
	uint32_t devs[128];
	for (uint32_t i = 0; i < 128; i++)
		devs[i] = (i / 64) * 72 + i % 64; /* 64 GPUs of rack0, 64 of rack1 */
	double e = efficiency(t, devs, 128, &m);
	cr_assert(fabs(e - 1.0) <= 1e-9, "64 + 64 efficiency %.12g", e);
	for (uint32_t i = 0; i < 128; i++)
		devs[i] = i; /* tree order: the fifth tensor group straddles racks 0 and 1 */
	e = efficiency(t, devs, 128, &m);
	cr_assert(e < 0.9, "straddling efficiency %.12g", e);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- allocation failures ----------------------------------------------------------------- */

/* Fail every allocation in turn: the call returns TP_ENOMEM and leaks nothing, until it
 * succeeds with the figure it gives without failures. */
typedef double (*cost_fn)(const tp_topology *t, const uint32_t *devs, size_t n, const void *arg);

static double call_hier(const tp_topology *t, const uint32_t *d, size_t n, const void *arg)
{
	(void)arg;
	return tp_cost_hier_allreduce_us(t, d, n, 4e6);
}
static double call_any(const tp_topology *t, const uint32_t *d, size_t n, const void *arg)
{
	(void)arg;
	return tp_cost_allreduce_us(t, d, n, 4e6);
}
static double call_a2a(const tp_topology *t, const uint32_t *d, size_t n, const void *arg)
{
	(void)arg;
	return tp_cost_alltoall_us(t, d, n, 4e6);
}
/* The public calls with the test allocator as the call's own: its failures are the ones
 * injected. */
static double call_step(const tp_topology *t, const uint32_t *d, size_t n, const void *arg)
{
	double us = -1;
	int rc = tp_cost_step_us(&us, t, d, n, arg, &tp_test_allocator, NULL, 0);
	return rc ? rc : us;
}
static double call_eff(const tp_topology *t, const uint32_t *d, size_t n, const void *arg)
{
	double e = -1;
	int rc = tp_cost_efficiency(&e, t, d, n, arg, &tp_test_allocator, NULL, 0);
	return rc ? rc : e;
}

static void enomem_loop(cost_fn fn, const void *arg)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	uint32_t scattered[16] = {0, 8, 4, 12, 1, 9, 5, 13, 2, 10, 6, 14, 3, 11, 7, 15};
	double want = fn(t, scattered, 16, arg);
	cr_assert_gt(want, 0.0);
	for (long k = 0;; k++) {
		tp_test_alloc_fail_at(k);
		long live = tp_test_alloc_state.live;
		double got = fn(t, scattered, 16, arg);
		cr_assert_eq(tp_test_alloc_state.live, live, "leak at failure %ld", k);
		if (tp_test_alloc_state.failed == 0) {
			ASSERT_US(got, want);
			break;
		}
		cr_assert_eq(got, TP_ENOMEM, "failure %ld gave %g", k, got);
		cr_assert_lt(k, 10, "no success after %ld failures", k);
	}
	tp_test_alloc_fail_at(-1);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cost, enomem_hier) { enomem_loop(call_hier, NULL); }
Test(cost, enomem_allreduce) { enomem_loop(call_any, NULL); }
Test(cost, enomem_alltoall) { enomem_loop(call_a2a, NULL); }

Test(cost, enomem_step_and_efficiency)
{
	tp_step_model m = busy_model(2, 2, 4);
	m.ep = 2;
	m.ep_bytes = 1e6;
	m.ep_msgs = 2;
	enomem_loop(call_step, &m);
	enomem_loop(call_eff, &m);
}

/* ---- published effect 1: tensor parallelism across HGX nodes ----------------------------- */

/*
 * Published: tensor-parallel training that crosses nodes lost about 43% of its throughput
 * (8-GPU nodes, NVLink inside, InfiniBand between), with about 4.5% of the step being exposed
 * tensor-parallel communication at full locality.
 *
 * The model job: 16 GPUs of an HGX fleet (two nodes), the same global batch either way.
 *   - TP=8 x DP=2: every tensor group inside one node. K all-reduces of B bytes per step; the
 *     compute is set so that they are 4.5% of the step (the published share). The gradient
 *     all-reduce is hidden behind the backward pass (dp_overlap = 1), as with Megatron's
 *     overlapped gradient reduction.
 *   - TP=16 x DP=1 over the two nodes: the same work per GPU (1/16 of the matmuls of the whole
 *     batch either way), the same K all-reduces per step, but each carries the activations of
 *     twice the local batch (2B), and its ring crosses InfiniBand twice.
 * B = 32 MiB (sequence 4096 x hidden 4096 x 2 bytes, one micro-batch), K = 1000.
 *
 * The model gives 40.8% (docs/cost-model.md). The assertion accepts 25-60%: the published
 * figure is one measurement on one system, the model has one fitted number (the 4.5% share)
 * and a single-ring bound for the cross-node all-reduce, so we pin the magnitude ("a large
 * loss, of the order of 40%") rather than the digits. Below 25% the model would no longer say
 * that crossing nodes is a serious mistake; above 60% it would overstate the published effect.
 */
#define EFFECT_SHARE 0.045
#define EFFECT_BYTES (32.0 * 1024 * 1024)
#define EFFECT_MSGS 1000u

/* Set compute_us so that the exposed communication of m on devs is `share` of the step. */
static void calibrate(const tp_topology *t, const uint32_t *devs, size_t n,
                      tp_step_model *m, double share)
{
	m->compute_us = 0;
	double comm = step_us(t, devs, n, m);
	cr_assert_gt(comm, 0.0);
	m->compute_us = comm * (1.0 - share) / share;
	ASSERT_US(comm / step_us(t, devs, n, m), share);
}

Test(calibration, tp_across_hgx_nodes)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_hgx(&t, 1, 4, &tp_test_allocator), 0);
	uint32_t devs[16];
	for (uint32_t i = 0; i < 16; i++)
		devs[i] = i; /* nodes 0 and 1 */
	tp_step_model in_node = base_model(8, 1, 2);
	in_node.tp_bytes = EFFECT_BYTES;
	in_node.tp_msgs = EFFECT_MSGS;
	in_node.dp_bytes = 1e9;
	in_node.dp_overlap = 1.0;
	calibrate(t, devs, 16, &in_node, EFFECT_SHARE);
	double tp8 = step_us(t, devs, 16, &in_node);

	tp_step_model across = base_model(16, 1, 1);
	across.compute_us = in_node.compute_us;
	across.tp_bytes = 2 * EFFECT_BYTES;
	across.tp_msgs = EFFECT_MSGS;
	double tp16 = step_us(t, devs, 16, &across);
	double loss = 1.0 - tp8 / tp16;

	/* For the report: the same TP=8 group split 4 + 4 over the two nodes. */
	tp_step_model split = in_node;
	split.dp = 1;
	double split_loss = 1.0 - step_us(t, devs, 8, &split) /
	                              step_us(t, devs + 4, 8, &split);
	cr_log_info("effect 1: TP=8 in a node %.0f us/step, TP=16 over two nodes %.0f us/step: "
	            "%.1f%% throughput lost (published ~43%%); TP=8 split 4+4: %.1f%% lost",
	            tp8, tp16, 100 * loss, 100 * split_loss);
	cr_assert(loss >= 0.25 && loss <= 0.60, "modelled loss %.3f", loss);
	cr_assert_gt(split_loss, 0.15);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- published effect 2: a 512-GPU job in exactly 8 NVL72 racks -------------------------- */

/*
 * Published: a 512-GPU job placed into exactly 8 NVL72 racks ran 14% faster than the same job
 * scattered across racks.
 *
 * The model job: TP=8 (two 4-GPU nodes) x PP=4 x DP=16 on an NVL72 fleet of 2 blocks x 16 racks.
 * Tensor all-reduces as in effect 1 (K = 1000 of 32 MiB, compute set so that they are 4.5% of
 * the packed step before the other terms are added); the gradient all-reduce of a
 * 175B-parameter model's shard (175e9 / 32 parameters x 2 bytes per data-parallel rank) with
 * 90% hidden behind the backward pass; 16 pipeline transfers of 32 MiB exposed per step.
 * Three placements:
 *   - packed: racks 0-7 of block 0, the first 16 nodes (64 GPUs) of each;
 *   - spread: 128 nodes over 16 racks (racks 0-7 of both blocks, 8 nodes each), consecutive
 *     nodes in the same rack, so every tensor group stays inside a rack;
 *   - cross: the same 16 racks, consecutive nodes in different racks, so every tensor group
 *     crosses InfiniBand.
 * The model gives +0.6% for spread and +50% for cross (docs/cost-model.md): it attributes the
 * published 14% to tensor (NVLink-domain) traffic leaving the rack, which it prices at the full
 * 18x bandwidth gap, while data-parallel and pipeline traffic crossing more racks and blocks
 * costs little because most of it is hidden. The assertions pin that reading: packed is the
 * fastest, spread costs less than the published 14%, cross more.
 */
static void nvl72_layouts(uint32_t *packed, uint32_t *spread, uint32_t *cross)
{
	for (uint32_t i = 0; i < 512; i++)
		packed[i] = (i / 64) * 72 + i % 64;
	for (uint32_t k = 0; k < 128; k++) {
		uint32_t rs = k / 8, rc = k % 16;                /* the k-th node's rack (0-15) */
		uint32_t node_s = ((rs / 8) * 16 + rs % 8) * 18 + k % 8;
		uint32_t node_c = ((rc / 8) * 16 + rc % 8) * 18 + k / 16;
		for (uint32_t g = 0; g < 4; g++) {
			spread[4 * k + g] = node_s * 4 + g;
			cross[4 * k + g] = node_c * 4 + g;
		}
	}
}

Test(calibration, nvl72_packed_racks)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 16, &tp_test_allocator), 0);
	uint32_t packed[512], spread[512], cross[512];
	nvl72_layouts(packed, spread, cross);
	tp_step_model m = base_model(8, 4, 16);
	m.tp_bytes = EFFECT_BYTES;
	m.tp_msgs = EFFECT_MSGS;
	calibrate(t, packed, 512, &m, EFFECT_SHARE);
	m.dp_bytes = 175e9 / 32 * 2;
	m.dp_overlap = 0.9;
	m.pp_bytes = EFFECT_BYTES;
	m.pp_msgs = 16;
	double p = step_us(t, packed, 512, &m);
	double s = step_us(t, spread, 512, &m);
	double c = step_us(t, cross, 512, &m);
	double ep = efficiency(t, packed, 512, &m);
	double es = efficiency(t, spread, 512, &m);
	double ec = efficiency(t, cross, 512, &m);
	cr_log_info("effect 2: packed %.0f us/step; spread %.0f (x%.3f, efficiency %.3f); "
	            "cross %.0f (x%.3f, efficiency %.3f); published x1.14",
	            p, s, s / p, es, c, c / p, ec);
	cr_assert_lt(p, s);
	cr_assert_lt(p, c);
	cr_assert_lt(s / p, 1.14);
	cr_assert_gt(c / p, 1.14);
	cr_assert(fabs(ep - 1.0) <= 1e-9, "packed efficiency %.12g", ep);
	cr_assert(es < 1.0 && ec < es, "efficiencies %.6f %.6f", es, ec);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- node types' NVLink figures set the bandwidth inside their nodes ---------------------- */

/* One rack of two nodes of a 4-GPU node type: NVLink 0-1 and 2-3 at 100 GB/s, the cross pairs
 * at 40 GB/s, except 1-3, which has none. `explicit_node` sets the node fabric by hand. */
static tp_topology *nvlink_topology(bool with_matrix, bool explicit_node)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	if (explicit_node)
		cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, NV_GBPS, NV_LAT), 0);
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	if (with_matrix) {
		cr_assert_eq(tp_nodetype_set_nvlink(nt, 0, 1, 100), 0);
		cr_assert_eq(tp_nodetype_set_nvlink(nt, 2, 3, 100), 0);
		cr_assert_eq(tp_nodetype_set_nvlink(nt, 0, 2, 40), 0);
		cr_assert_eq(tp_nodetype_set_nvlink(nt, 0, 3, 40), 0);
		cr_assert_eq(tp_nodetype_set_nvlink(nt, 1, 2, 40), 0);
	}
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	const char *path[1] = {"r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "n0", path, 4, &o), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "n1", path, 4, &o), 0);
	tp_nodetype_destroy(nt);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

Test(cost, nvlink_matrix_sets_the_node_fabric)
{
	tp_test_alloc_reset();
	tp_topology *t = nvlink_topology(true, false), *plain = nvlink_topology(false, false);
	tp_topology *set = nvlink_topology(true, true);
	const double B = 64.0 * 1024 * 1024, lat = 3.4, dflt = 900.0; /* default node fabric */
	/* point to point: each pair at its own figure; 1-3 (no NVLink) at the level's */
	ASSERT_US(tp_cost_p2p_us(t, 0, 1, B), msg_us(lat, 100, B));
	ASSERT_US(tp_cost_p2p_us(t, 0, 2, B), msg_us(lat, 40, B));
	ASSERT_US(tp_cost_p2p_us(t, 1, 3, B), msg_us(lat, dflt, B));
	cr_assert_eq(tp_cost_pair(t, 2, 3).gbps, 100.0);
	cr_assert_eq(tp_cost_link(t, 2, 3)->gbps, dflt, "the level's fabric itself is unchanged");
	/* between nodes: the rack's fabric, matrix or not */
	ASSERT_US(tp_cost_p2p_us(t, 0, 4, B), tp_cost_p2p_us(plain, 0, 4, B));
	/* without a matrix, or with the node fabric set by the caller, nothing changes */
	ASSERT_US(tp_cost_p2p_us(plain, 0, 1, B), msg_us(lat, dflt, B));
	ASSERT_US(tp_cost_p2p_us(set, 0, 1, B), msg_us(NV_LAT, NV_GBPS, B));
	/* ring over 0,1,2 (edges 0-1, 1-2, 2-0): the 40 GB/s edges set the pace */
	uint32_t three[3] = {0, 1, 2};
	ASSERT_US(tp_cost_ring_allreduce_us(t, three, 3, B), 2.0 * 2 * msg_us(lat, 40, B / 3));
	/* hierarchical on one node: the node's slowest pair among 0,1,2 (40) */
	double h = tp_cost_hier_allreduce_us(t, three, 3, B);
	ASSERT_US(h, 2.0 * (2 * lat + 2.0 / 3.0 * wire(40, B)));
	/* all-to-all on 0,1: each sends B/2 to the other at 100 GB/s */
	uint32_t two[2] = {0, 1};
	ASSERT_US(tp_cost_alltoall_us(t, two, 2, B), wire(100, B / 2) + lat);
	/* all-to-all on 0..3: device 1 reaches 0 at 100, 2 at 40, 3 at the level's 900 */
	uint32_t four[4] = {0, 1, 2, 3};
	double d1 = wire(100, B / 4) + wire(40, B / 4) + wire(dflt, B / 4);
	double d0 = wire(100, B / 4) + 2 * wire(40, B / 4);
	ASSERT_US(tp_cost_alltoall_us(t, four, 4, B), fmax(d0, d1) + lat);
	/* a tensor-parallel step on one node: slower than with the default node fabric */
	tp_step_model m = {.version = TP_STEP_MODEL_VERSION, .tp = 4, .pp = 1, .dp = 1, .ep = 1,
	                   .compute_us = 1000, .tp_bytes = B, .tp_msgs = 10};
	double with = step_us(t, four, 4, &m), without = step_us(plain, four, 4, &m);
	cr_assert(with > 1.5 * without, "step %g us with the matrix, %g us without", with, without);
	ASSERT_US(with, 1000 + 10 * 2.0 * 3 * msg_us(lat, dflt < 40 ? dflt : 40, B / 4));
	tp_topology_destroy(t);
	tp_topology_destroy(plain);
	tp_topology_destroy(set);
	TP_ASSERT_NO_LEAKS();
}
