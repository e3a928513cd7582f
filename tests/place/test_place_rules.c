/* SPDX-License-Identifier: MIT */
/*
 * The objective's policy rules as the library refines them: rule 3, the job mix that placement
 * protects (tp_cluster_set_place_mix), its messages and how it changes an answer; rule 4's
 * step time (request.comm) and the efficiency floor (request.comm.min_efficiency).
 */
#include <math.h>
#include <stdio.h>

#include "testutil.h"

/* One NVL72 block of two racks (18 nodes of 4 GPUs each): rack 0 with 37 free GPUs (35 held:
 * nodes 0-7 and 3 GPUs of node 8), rack 1 with 40 (nodes 18-25 held). */
static void two_racks(tp_topology **t, tp_cluster **c)
{
	cr_assert_eq(tp_topology_generate_nvl72(t, 1, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(c, *t, &tp_test_allocator), 0);
	uint32_t a[35], b[32];
	for (uint32_t i = 0; i < 35; i++)
		a[i] = i;
	for (uint32_t i = 0; i < 32; i++)
		b[i] = 72 + i;
	cr_assert_eq(tp_cluster_assign(*c, "a", a, 35, NULL), 0, "%s", tp_cluster_errmsg(*c));
	cr_assert_eq(tp_cluster_assign(*c, "b", b, 32, NULL), 0, "%s", tp_cluster_errmsg(*c));
}

/* The rack a 4-GPU, one-node, required-rack request lands in. */
static unsigned rack_of_node_job(tp_cluster *c)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.group_size = 4;
	r.required = "rack";
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	unsigned rack = d[0] / 72;
	for (size_t i = 1; i < n; i++)
		cr_assert_eq(d[i] / 72, rack);
	tp_placement_destroy(p);
	return rack;
}

Test(place_rules, frag_report_mix_keeps_a_half_rack_that_best_fit_breaks)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_racks(&t, &c);
	/* A new cluster has no mix: best fit takes the tighter rack 0 (37 -> 33: no 36-GPU job
	 * fits there any more); the default mix (1, 4, 36, 72 GPUs) takes rack 1 (40 -> 36: still
	 * one). */
	cr_assert_eq(rack_of_node_job(c), 0);
	cr_assert_eq(tp_cluster_set_place_mix(c, NULL, 0), 0);
	cr_assert_eq(rack_of_node_job(c), 1);
	static const tp_job_shape none[1];
	cr_assert_eq(tp_cluster_set_place_mix(c, none, 0), 0);
	cr_assert_eq(rack_of_node_job(c), 0);
	/* A mix of whole nodes only: both racks lose the same, best fit decides. */
	tp_job_shape node4 = {4, "node", 1.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &node4, 1), 0);
	cr_assert_eq(rack_of_node_job(c), 0);
	tp_job_shape half = {36, "rack", 2.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &half, 1), 0);
	cr_assert_eq(rack_of_node_job(c), 1);
	cr_assert_eq(tp_cluster_set_place_mix(c, NULL, 0), 0); /* the frag report's mix again */
	cr_assert_eq(rack_of_node_job(c), 1);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

static void expect_fail(tp_cluster *c, const tp_job_shape *mix, size_t n, int code,
                        const char *msg)
{
	tp_job_shape keep = {36, "rack", 1.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &keep, 1), 0);
	cr_assert_eq(tp_cluster_set_place_mix(c, mix, n), code, "%s", tp_cluster_errmsg(c));
	cr_assert_str_eq(tp_cluster_errmsg(c), msg);
	/* unchanged: the 36-GPU mix still sends the job to rack 1 */
	cr_assert_eq(rack_of_node_job(c), 1);
}

Test(place_rules, bad_mix_is_refused_and_names_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_racks(&t, &c);
	cr_assert_eq(tp_cluster_set_place_mix(NULL, NULL, 0), TP_EINVAL);
	expect_fail(c, NULL, 2, TP_EINVAL, "place mix: NULL with 2 shapes");
	tp_job_shape many[TP_PLACE_MIX_MAX + 1];
	for (size_t i = 0; i < TP_PLACE_MIX_MAX + 1; i++)
		many[i] = (tp_job_shape){1, "node", 1.0};
	expect_fail(c, many, TP_PLACE_MIX_MAX + 1, TP_EINVAL, "place mix: 17 shapes, at most 16");
	tp_job_shape bad[2] = {{4, "node", 1.0}, {4, NULL, 1.0}};
	expect_fail(c, bad, 2, TP_EINVAL, "place mix[1].level is NULL");
	bad[1] = (tp_job_shape){0, "rack", 1.0};
	expect_fail(c, bad, 2, TP_EINVAL, "place mix[1].devices is 0");
	bad[1] = (tp_job_shape){4, "rack", -1.0};
	expect_fail(c, bad, 2, TP_EINVAL, "place mix[1].weight -1 is not a finite number > 0");
	bad[1] = (tp_job_shape){4, "pod", 1.0};
	expect_fail(c, bad, 2, TP_ENOTFOUND,
	            "place mix[1].level 'pod' is not a level of the topology");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

/* ---- rule 4 refined: the modelled step time (request.comm) --------------------------------- */

/* One rack of two 4-GPU nodes that differ only in their NVLink figures: n0 50 GB/s between
 * every pair, n1 900 GB/s. */
static tp_topology *two_node_types(void)
{
	static const char *const levels[] = {"rack", "node"};
	static const char *const path[] = {"r0"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_nodetype *nt[2];
	const double gbps[2] = {50, 900};
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(tp_nodetype_create(&nt[i], 4, &tp_test_allocator), 0);
		for (unsigned a = 0; a < 4; a++)
			for (unsigned c = a + 1; c < 4; c++)
				cr_assert_eq(tp_nodetype_set_nvlink(nt[i], a, c, gbps[i]), 0);
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.type = nt[i];
		cr_assert_eq(tp_topology_builder_add_node(b, i ? "n1" : "n0", path, 4, &o), 0,
		             "%s", tp_topology_builder_errmsg(b));
		tp_nodetype_destroy(nt[i]);
	}
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* The node (0 or 1) a 2-GPU required-node request lands on, with or without a step model. */
static unsigned node_of(tp_cluster *c, const tp_step_model *m)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.required = "node";
	r.comm = m;
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 2);
	unsigned node = d[0] / 4;
	cr_assert_eq(d[1] / 4, node);
	tp_placement_destroy(p);
	return node;
}

Test(place_rules, step_time_breaks_a_tie_between_node_types)
{
	tp_test_alloc_reset();
	tp_topology *t = two_node_types();
	tp_cluster *c;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = 2;
	m.tp_bytes = 64.0 * 1024 * 1024;
	m.tp_msgs = 128;
	cr_assert_eq(node_of(c, NULL), 0); /* a tie on every earlier rule: the lowest index */
	cr_assert_eq(node_of(c, &m), 1);   /* the faster NVLink */
	double slow, fast;
	const uint32_t on0[2] = {0, 1}, on1[2] = {4, 5};
	cr_assert_eq(tp_cost_step_us(&slow, t, on0, 2, &m, NULL, NULL, 0), 0);
	cr_assert_eq(tp_cost_step_us(&fast, t, on1, 2, &m, NULL, NULL, 0), 0);
	cr_assert_lt(fast, slow);
	/* the step model never overrides an earlier rule: with n1 partly used, best fit takes it */
	const uint32_t held[1] = {7};
	cr_assert_eq(tp_cluster_assign(c, "x", held, 1, NULL), 0);
	cr_assert_eq(node_of(c, NULL), 1);
	cr_assert_eq(tp_cluster_release(c, "x"), 0);
	const uint32_t held0[1] = {3};
	cr_assert_eq(tp_cluster_assign(c, "y", held0, 1, NULL), 0);
	cr_assert_eq(node_of(c, &m), 0); /* n0 is tighter: rule 3 decides before rule 4 */
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

Test(place_rules, bad_comm_is_refused_and_names_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t = two_node_types();
	tp_cluster *c;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = 3;
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.required = "node";
	r.comm = &m;
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), TP_EINVAL);
	cr_assert_str_eq(tp_placement_errmsg(p),
	                 "request.comm: model.tp 3 x model.pp 1 x model.dp 1 is not the 2 devices");
	tp_placement_destroy(p);
	m.tp = 2;
	m.dp_overlap = 2;
	cr_assert_eq(tp_place(c, &r, &p), TP_EINVAL);
	cr_assert_str_eq(tp_placement_errmsg(p), "request.comm: model.dp_overlap 2 is outside [0, 1]");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

/* ---- the efficiency floor (request.comm.min_efficiency) ------------------------------------ */

/* One rack of two nodes of 4 GPUs: NVLink (900 GB/s) inside a node, InfiniBand (50 GB/s)
 * between them. */
static tp_topology *two_nodes_ib(void)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	const unsigned counts[2] = {1, 2};
	cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900, 3.4), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 10), 0);
	cr_assert_eq(tp_topology_builder_generate(b, counts, 4, NULL), 0,
	             "%s", tp_topology_builder_errmsg(b));
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* A 4-GPU tensor-parallel job whose all-reduces leave NVLink badly over InfiniBand. */
static tp_step_model tensor4(double floor)
{
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = 4;
	m.compute_us = 100000;
	m.tp_bytes = 64.0 * 1024 * 1024;
	m.tp_msgs = 128;
	m.min_efficiency = floor;
	return m;
}

static int place4(tp_cluster *c, const tp_step_model *m, tp_placement **p)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.comm = m;
	return tp_place(c, &r, p);
}

Test(place_rules, efficiency_floor_refuses_a_slow_placement_and_names_the_figure)
{
	tp_test_alloc_reset();
	tp_topology *t = two_nodes_ib();
	tp_cluster *c;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	/* two GPUs held on each node: any 4 GPUs straddle the two nodes */
	const uint32_t held[4] = {0, 1, 4, 5};
	cr_assert_eq(tp_cluster_assign(c, "x", held, 4, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_step_model m = tensor4(0.0);
	tp_placement *p;
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p)); /* no floor: it runs */
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	double eff;
	cr_assert_eq(tp_cost_efficiency(&eff, t, d, n, &m, NULL, NULL, 0), 0);
	cr_assert_lt(eff, 0.5);
	tp_placement_destroy(p);
	m = tensor4(0.5);
	uint64_t fp = tp_cluster_fingerprint(c);
	cr_assert_eq(place4(c, &m, &p), TP_EBUSY);
	cr_assert_eq(tp_placement_status(p), TP_EBUSY);
	cr_assert_null(tp_placement_devices(p, &n));
	cr_assert_eq(n, 0);
	const char *msg = tp_placement_errmsg(p);
	cr_assert(strstr(msg, "busy: request.comm.min_efficiency 0.5: the best placement now "
	                      "reaches ") == msg, "%s", msg);
	char want[32];
	snprintf(want, sizeof want, "reaches %.3f (step ", eff);
	cr_assert(strstr(msg, want), "%s", msg);
	cr_assert(strstr(msg, "us on the ideal layout)"), "%s", msg);
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "a refused placement changed the cluster");
	/* a floor the placement meets lets it through */
	m = tensor4(eff * 0.99);
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	/* once a whole node is free the job fits inside it at full efficiency */
	cr_assert_eq(tp_cluster_release(c, "x"), 0);
	m = tensor4(1.0);
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	cr_assert_eq(d[0] / 4, d[3] / 4);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

Test(place_rules, efficiency_floor_is_checked_and_absent_from_a_version_1_model)
{
	tp_test_alloc_reset();
	tp_topology *t = two_nodes_ib();
	tp_cluster *c;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	const uint32_t held[4] = {0, 1, 4, 5};
	cr_assert_eq(tp_cluster_assign(c, "x", held, 4, NULL), 0, "%s", tp_cluster_errmsg(c));
	const double bad[3] = {1.5, -0.1, NAN};
	const char *const say[3] = {"1.5", "-0.1", "nan"};
	for (int i = 0; i < 3; i++) {
		tp_step_model m = tensor4(bad[i]);
		tp_placement *p;
		cr_assert_eq(place4(c, &m, &p), TP_EINVAL);
		char want[96];
		snprintf(want, sizeof want, "request.comm: model.min_efficiency %s is outside [0, 1]",
		         say[i]);
		cr_assert_str_eq(tp_placement_errmsg(p), want);
		tp_placement_destroy(p);
	}
	/* a caller of 0.3 hands a version-1 model: the field is not read, there is no floor */
	tp_step_model m1 = tensor4(0.9);
	m1.version = 1;
	tp_placement *p;
	cr_assert_eq(place4(c, &m1, &p), 0, "%s", tp_placement_errmsg(p));
	/* the job records the model at the current version, without a floor */
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "new", &o), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_not_null(o.shape);
	cr_assert_not_null(o.shape->comm);
	cr_assert_eq(o.shape->comm->version, TP_STEP_MODEL_VERSION);
	cr_assert_eq(o.shape->comm->tp, 4);
	cr_assert_eq(o.shape->comm->min_efficiency, 0.0);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

/* Allocation failures while the floor is checked (the efficiency's scratch comes from the
 * cluster's allocator): TP_ENOMEM and nothing leaked, until the call answers as without
 * failures. */
Test(place_rules, efficiency_floor_survives_allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t = two_nodes_ib();
	tp_cluster *c;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	const uint32_t held[4] = {0, 1, 4, 5};
	cr_assert_eq(tp_cluster_assign(c, "x", held, 4, NULL), 0, "%s", tp_cluster_errmsg(c));
	long live = tp_test_alloc_state.live;
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_step_model m = tensor4(0.5);
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM; n++) {
		tp_test_alloc_fail_at(n);
		tp_placement *p = NULL;
		rc = place4(c, &m, &p);
		tp_test_alloc_fail_at(-1);
		cr_assert(rc == TP_ENOMEM || rc == TP_EBUSY, "failing allocation %ld: %d", n, rc);
		if (rc == TP_ENOMEM)
			cr_assert_null(p);
		tp_placement_destroy(p);
		cr_assert_eq(tp_test_alloc_state.live, live, "allocation %ld: a leak", n);
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

/* ---- the search for a placement that meets the floor (place_floor.c) ---------------------- */

/* Two racks of two 4-GPU nodes (a0 a1 in r0, b0 b1 in r1), NVLink 900 GB/s inside a node:
 * r0 joins its nodes by NVLink at the same speed, r1 by InfiniBand at 50 GB/s, so the
 * topology has two fabric classes (class 0: r0's nodes, class 1: r1's). Held: `r0_held` GPUs
 * of r0 (1: one of a0, 7 free; 5: three of a0 and one of a1, 3 free), two on each node of r1
 * (4 free, spread over b0 and b1). Without a floor a 4-GPU request takes r1, the tighter
 * rack, over InfiniBand. */
static void two_classes(tp_topology **t, tp_cluster **c, int r0_held)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900, 3.4), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 10), 0);
	const char *p0[] = {"r0"}, *p1[] = {"r1"};
	cr_assert_eq(tp_topology_builder_add_node(b, "a0", p0, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "a1", p0, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "b0", p1, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "b1", p1, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 0, "r0", TP_LINK_NVLINK, 900, 3.4),
	             0, "%s", tp_topology_builder_errmsg(b));
	cr_assert_eq(tp_topology_build(b, t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	*c = tp_test_cluster(*t);
	static const uint32_t r0[5] = {0, 1, 2, 4, 6}, r1[4] = {8, 9, 12, 13};
	cr_assert_eq(tp_cluster_assign(*c, "x", r0, (size_t)r0_held, NULL), 0);
	cr_assert_eq(tp_cluster_assign(*c, "y", r1, 4, NULL), 0, "%s", tp_cluster_errmsg(*c));
}

Test(place_rules, efficiency_floor_is_met_on_another_fabric_class)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_classes(&t, &c, 1);
	/* no floor: best fit takes the tighter rack r1 (4 free against 7), over InfiniBand */
	tp_step_model m = tensor4(0.0);
	tp_placement *p;
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++)
		cr_assert_geq(d[i], 8, "the rules' choice is r1");
	double slow;
	cr_assert_eq(tp_cost_efficiency(&slow, t, d, n, &m, NULL, NULL, 0), 0);
	cr_assert_lt(slow, 0.5);
	tp_placement_destroy(p);
	/* a floor of 0.9: the rules' choice is below it, r0's class meets it; the answer is there */
	m = tensor4(0.9);
	uint64_t fp = tp_cluster_fingerprint(c);
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_placement_status(p), 0);
	d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++)
		cr_assert_lt(d[i], 8, "device %u is not in r0", d[i]);
	double eff;
	cr_assert_eq(tp_cost_efficiency(&eff, t, d, n, &m, NULL, NULL, 0), 0);
	cr_assert_geq(eff, 0.9);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "tp_place changed the cluster");
	uint32_t first = d[0];
	/* the same with the request's own allow-list (every node): the search keeps to it */
	static const char *const all[4] = {"a0", "a1", "b0", "b1"};
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.comm = &m;
	r.select_nodes = all;
	r.nselect_nodes = 4;
	tp_placement *q;
	cr_assert_eq(tp_place(c, &r, &q), 0, "%s", tp_placement_errmsg(q));
	cr_assert_eq(tp_placement_devices(q, &n)[0], first);
	tp_placement_destroy(q);
	/* an allow-list without r0: nothing meets the floor */
	r.nselect_nodes = 2;
	r.select_nodes = all + 2;
	cr_assert_eq(tp_place(c, &r, &q), TP_EBUSY);
	tp_placement_destroy(q);
	/* a version 2 model searches as well */
	tp_step_model m2 = m;
	m2.version = 2;
	cr_assert_eq(place4(c, &m2, &q), 0, "%s", tp_placement_errmsg(q));
	cr_assert_eq(tp_placement_devices(q, &n)[0], first);
	tp_placement_destroy(q);
	/* no_floor_search: the rules' choice or nothing */
	m.no_floor_search = 1;
	cr_assert_eq(place4(c, &m, &q), TP_EBUSY);
	TP_ASSERT_ERR(TP_EBUSY, TP_EBUSY, tp_placement_errmsg(q),
	              "; not searched further (request.comm.no_floor_search)");
	tp_placement_destroy(q);
	/* the job records the request as it was asked, without the class's nodes */
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "new", &o), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(o.shape->nselect_nodes, 0);
	cr_assert_eq(o.shape->comm->min_efficiency, 0.9);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place_rules, efficiency_floor_met_nowhere_names_the_floor_and_the_best)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_classes(&t, &c, 5); /* r0 keeps 3 free GPUs: too few for the job */
	tp_step_model m = tensor4(0.0);
	tp_placement *p;
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	double eff;
	cr_assert_eq(tp_cost_efficiency(&eff, t, d, n, &m, NULL, NULL, 0), 0);
	tp_placement_destroy(p);
	m = tensor4(0.9);
	uint64_t fp = tp_cluster_fingerprint(c);
	cr_assert_eq(place4(c, &m, &p), TP_EBUSY);
	cr_assert_null(tp_placement_devices(p, &n));
	const char *msg = tp_placement_errmsg(p);
	char want[160];
	snprintf(want, sizeof want, "busy: request.comm.min_efficiency 0.9: the best placement "
	         "now reaches %.3f (step ", eff);
	cr_assert(strstr(msg, want) == msg, "%s", msg);
	cr_assert(strstr(msg, "us on the ideal layout) inside fabric class 1 (2 nodes like b0); of "
	                      "the 2 fabric classes that hold the job, 1 has too few free devices, 0 "
	                      "cannot reach it even when wholly free, 1 has no such placement now"),
	          "%s", msg);
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "a refused placement changed the cluster");
	/* a job no class holds alone (12 GPUs, 8 in each class): nothing to search */
	cr_assert_eq(tp_cluster_release(c, "x"), 0);
	cr_assert_eq(tp_cluster_release(c, "y"), 0);
	const uint32_t held[4] = {0, 4, 8, 12};
	cr_assert_eq(tp_cluster_assign(c, "z", held, 4, NULL), 0);
	tp_step_model m12 = tensor4(1.0);
	m12.dp = 3;
	tp_request r = TP_REQUEST_INIT;
	r.count = 12;
	r.comm = &m12;
	cr_assert_eq(tp_place(c, &r, &p), TP_EBUSY);
	TP_ASSERT_ERR(TP_EBUSY, TP_EBUSY, tp_placement_errmsg(p),
	              "across fabric classes; no fabric class holds the job's 12 devices alone");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Every allocation of a 4-GPU call with model m fails in turn: TP_ENOMEM, no result, nothing
 * leaked, the cluster unchanged; then the same answer as without failures. More than `least`
 * allocations are made. */
static void assert_allocation_failures(tp_cluster *c, const tp_step_model *m, long least)
{
	tp_placement *p;
	cr_assert_eq(place4(c, m, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	uint32_t want = tp_placement_devices(p, &n)[0];
	tp_placement_destroy(p);
	uint64_t fp = tp_cluster_fingerprint(c);
	long live = tp_test_alloc_state.live, k = 0;
	int rc;
	do {
		tp_test_alloc_fail_at(k++);
		p = NULL;
		rc = place4(c, m, &p);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert_null(p);
		else
			cr_assert_eq(rc, 0, "allocation %ld: %s", k - 1, tp_err_name(rc));
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
		if (rc == 0)
			cr_assert_eq(tp_placement_devices(p, &n)[0], want);
		tp_placement_destroy(p);
		cr_assert_eq(tp_test_alloc_state.live, live, "allocation %ld: a leak", k - 1);
	} while (rc == TP_ENOMEM);
	cr_assert_gt(k, least, "the call allocates");
}

Test(place_rules, efficiency_floor_search_allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_classes(&t, &c, 1);
	tp_step_model m = tensor4(0.9);
	assert_allocation_failures(c, &m, 3);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- fabric fit (request.comm.fabric_fit, place_floor.c) ------------------------------------ */

/* A 1-GPU job has the same efficiency on every class: fabric fit sends it to the slowest
 * fabric (r1, InfiniBand above the node), though best fit alone takes the tightest node (a0,
 * one GPU free, in the NVLink rack r0). */
Test(place_rules, fabric_fit_sends_a_job_that_does_not_communicate_to_the_slowest_fabric)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_classes(&t, &c, 5); /* r0: 1 free on a0, 2 on a1; r1: 2 free on b0 and on b1 */
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.compute_us = 100000;
	tp_request r = TP_REQUEST_INIT;
	r.count = 1;
	r.comm = &m;
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	cr_assert_lt(tp_placement_devices(p, &n)[0], 4, "without fit: a0, the tightest node");
	tp_placement_destroy(p);
	m.fabric_fit = 0.9;
	uint64_t fp = tp_cluster_fingerprint(c);
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 1);
	cr_assert_geq(d[0], 8, "device %u is not in r1", d[0]);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "tp_place changed the cluster");
	/* the job records the request as it was asked, without the class's nodes */
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "new", &o), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(o.shape->nselect_nodes, 0);
	cr_assert_eq(o.shape->comm->fabric_fit, 0.9);
	tp_placement_destroy(p);
	/* a version 2 model has no fabric fit: the rules' choice */
	cr_assert_eq(tp_cluster_release(c, "new"), 0);
	m.version = 2;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_lt(tp_placement_devices(p, &n)[0], 4);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A 4-GPU tensor group packs into one node of either class (e_c = 1 in both), so the slower
 * class r1 is tried first; but r1's free GPUs are two on each node, over InfiniBand, below
 * 0.9 x e_c: r1 is no fit, and r0 gives a whole node. Best fit alone takes r1 (the tighter
 * rack) at under half the efficiency. With the allow-list b0 b1 there is no fit: the rules'
 * choice. */
Test(place_rules, fabric_fit_passes_over_a_class_whose_free_devices_are_scattered)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_classes(&t, &c, 1);
	tp_step_model m = tensor4(0.0);
	m.fabric_fit = 0.9;
	tp_placement *p;
	cr_assert_eq(place4(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++)
		cr_assert(d[i] >= 4 && d[i] < 8, "device %u is not on a1", d[i]);
	double eff;
	cr_assert_eq(tp_cost_efficiency(&eff, t, d, n, &m, NULL, NULL, 0), 0);
	cr_assert_eq(eff, 1.0);
	tp_placement_destroy(p);
	static const char *const r1[2] = {"b0", "b1"};
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.comm = &m;
	r.select_nodes = r1;
	r.nselect_nodes = 2;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_geq(tp_placement_devices(p, &n)[0], 8);
	tp_placement_destroy(p);
	/* every allocation of the fitting call fails in turn */
	assert_allocation_failures(c, &m, 3);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place_rules, fabric_fit_outside_0_1_is_invalid)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_classes(&t, &c, 1);
	tp_step_model m = tensor4(0.0);
	m.fabric_fit = 1.5;
	tp_placement *p;
	uint64_t fp = tp_cluster_fingerprint(c);
	cr_assert_eq(place4(c, &m, &p), TP_EINVAL);
	TP_ASSERT_ERR(TP_EINVAL, TP_EINVAL, tp_placement_errmsg(p),
	              "model.fabric_fit 1.5 is outside [0, 1]");
	tp_placement_destroy(p);
	m.fabric_fit = -0.1;
	cr_assert_eq(place4(c, &m, &p), TP_EINVAL);
	TP_ASSERT_ERR(TP_EINVAL, TP_EINVAL, tp_placement_errmsg(p),
	              "model.fabric_fit -0.1 is outside [0, 1]");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The fabric classes are derived when the topology is built: every allocation of a build of
 * two classes fails in turn (TP_ENOMEM, nothing leaked), then the build succeeds and its
 * classes serve the search. */
Test(place_rules, fabric_classes_build_allocation_failures)
{
	tp_test_alloc_reset();
	static const char *const levels[] = {"rack", "node"};
	const char *p0[] = {"r0"}, *p1[] = {"r1"};
	for (long k = 0;; k++) {
		tp_topology_builder *b;
		cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
		cr_assert_eq(tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 10), 0);
		cr_assert_eq(tp_topology_builder_add_node(b, "a0", p0, 4, NULL), 0);
		cr_assert_eq(tp_topology_builder_add_node(b, "b0", p1, 4, NULL), 0);
		cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 0, "r0", TP_LINK_NVLINK, 900, 3),
		             0);
		long live = tp_test_alloc_state.live;
		tp_topology *t = NULL;
		tp_test_alloc_fail_at(k);
		int rc = tp_topology_build(b, &t);
		tp_test_alloc_fail_at(-1);
		tp_topology_builder_destroy(b);
		if (rc == 0) {
			cr_assert_gt(k, 0);
			tp_topology_destroy(t);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", k, tp_err_name(rc));
		cr_assert_null(t);
		cr_assert_leq(tp_test_alloc_state.live, live);
	}
	TP_ASSERT_NO_LEAKS();
}
