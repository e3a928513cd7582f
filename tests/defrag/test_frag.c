/* SPDX-License-Identifier: MIT */
/* Fragmentation report: the per-level figures of the shared conformance case
 * own-frag-small-cluster, worked out by hand, and the workload figure. */
#include <math.h>

#include "testutil.h"

static void setup(void) { tp_test_alloc_reset(); }
TestSuite(frag, .init = setup);

/* n1..n6 have 4 GPUs, n7 has 8; j1 fills n1, j2 holds 2 of n3, j3 holds n7/0-2. */
static tp_topology *small_cluster(tp_cluster **c)
{
	static const char *const L[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, L, 3, &tp_test_allocator), 0);
	struct { const char *n, *b, *r; unsigned g; } nodes[] = {
		{"n1", "b1", "r1", 4}, {"n2", "b1", "r1", 4}, {"n3", "b1", "r2", 4},
		{"n4", "b1", "r2", 4}, {"n5", "b2", "r3", 4}, {"n6", "b2", "r3", 4},
		{"n7", "b2", "r4", 8},
	};
	for (size_t i = 0; i < 7; i++) {
		const char *path[2] = {nodes[i].b, nodes[i].r};
		cr_assert_eq(tp_topology_builder_add_node(b, nodes[i].n, path, nodes[i].g, NULL), 0);
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	cr_assert_eq(tp_cluster_create(c, t, &tp_test_allocator), 0);
	uint32_t j1[4] = {0, 1, 2, 3}, j2[2] = {8, 9}, j3[3] = {24, 25, 26};
	cr_assert_eq(tp_cluster_assign(*c, "j1", j1, 4, NULL), 0);
	cr_assert_eq(tp_cluster_assign(*c, "j2", j2, 2, NULL), 0);
	cr_assert_eq(tp_cluster_assign(*c, "j3", j3, 3, NULL), 0);
	return t;
}

Test(frag, per_level_figures_match_the_hand_computation)
{
	tp_cluster *c;
	tp_topology *t = small_cluster(&c);
	tp_frag *f = NULL;
	cr_assert_eq(tp_frag_report(c, NULL, 0, &f), 0);
	/* free per node 0,4,2,4,4,4,5 (23) */
	cr_assert_eq(tp_frag_free_count(f, 0), 23);
	cr_assert_eq(tp_frag_domain_count(f, 0), 2);
	cr_assert_eq(tp_frag_fully_free_count(f, 0), 0);
	cr_assert_eq(tp_frag_largest_free_count(f, 0), 13);
	cr_assert_float_eq(tp_frag_fragmentation(f, 0), 1.0, 1e-12);
	cr_assert_eq(tp_frag_domain_count(f, 1), 4);
	cr_assert_eq(tp_frag_fully_free_count(f, 1), 1);
	cr_assert_eq(tp_frag_largest_free_count(f, 1), 8);
	cr_assert_float_eq(tp_frag_fragmentation(f, 1), 15.0 / 23, 1e-12);
	cr_assert_eq(tp_frag_domain_count(f, 2), 7);
	cr_assert_eq(tp_frag_fully_free_count(f, 2), 4);
	cr_assert_eq(tp_frag_largest_free_count(f, 2), 5);
	cr_assert_float_eq(tp_frag_fragmentation(f, 2), 7.0 / 23, 1e-12);
	cr_assert_eq(tp_frag_down_count(f), 0);
	cr_assert_eq(tp_frag_cordoned_count(f), 0);
	cr_assert_eq(tp_frag_domain_count(f, 3), 0);
	tp_frag_destroy(f);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(frag, workload_figure)
{
	tp_cluster *c;
	tp_topology *t = small_cluster(&c);
	/* Whole 4-GPU nodes: usable free per node 0,4,0,4,4,4,4 = 20 of 23. */
	tp_job_shape node4 = {4, "node", 1.0};
	tp_frag *f = NULL;
	cr_assert_eq(tp_frag_report(c, &node4, 1, &f), 0);
	cr_assert_float_eq(tp_frag_workload(f), 3.0 / 23, 1e-12);
	tp_frag_destroy(f);
	/* Mixed: 1-GPU jobs use everything; 8-GPU rack jobs use racks 4,6,8,5 -> 0,0,8,0. */
	tp_job_shape mix[2] = {{1, "node", 1.0}, {8, "rack", 3.0}};
	cr_assert_eq(tp_frag_report(c, mix, 2, &f), 0);
	cr_assert_float_eq(tp_frag_workload(f), 1.0 - (23.0 + 3 * 8.0) / (4 * 23.0), 1e-12);
	tp_frag_destroy(f);
	/* Default mix on this cluster: 1, 8 (largest node), 4 and 8 inside one rack. */
	cr_assert_eq(tp_frag_report(c, NULL, 0, &f), 0);
	double usable = 23 + 0 /* 8-GPU nodes: n7 has 5 free */ + (4 + 4 + 8 + 4) + 8;
	cr_assert_float_eq(tp_frag_workload(f), 1.0 - usable / (4 * 23.0), 1e-12);
	tp_frag_destroy(f);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(frag, bad_mix_and_empty_cluster)
{
	tp_cluster *c;
	tp_topology *t = small_cluster(&c);
	tp_frag *f = NULL;
	tp_job_shape zero = {0, "node", 1.0}, neg = {1, "node", -1}, nolvl = {1, "pod", 1.0},
	             nullvl = {1, NULL, 1.0};
	/* A failed mix gives a report that says why (and has no figures); destroy it. */
	const struct {
		const tp_job_shape *mix;
		size_t n;
		int code;
		const char *msg;
	} bad[] = {
		{&zero, 1, TP_EINVAL, "mix[0].devices is 0: a shape holds at least one device"},
		{&neg, 1, TP_EINVAL, "mix[0].weight -1 is not a positive finite number"},
		{&nolvl, 1, TP_ENOTFOUND, "mix[0].level 'pod' is not a level of the topology"},
		{&nullvl, 1, TP_EINVAL, "mix[0].level is NULL"},
		{NULL, 2, TP_EINVAL, "mix is NULL with nmix 2"},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		f = NULL;
		TP_ASSERT_ERR(tp_frag_report(c, bad[i].mix, bad[i].n, &f), bad[i].code,
		              tp_frag_errmsg(f), bad[i].msg);
		cr_assert_eq(tp_frag_domain_count(f, 0), 0);
		cr_assert_eq(tp_frag_free_count(f, 0), 0);
		tp_frag_destroy(f);
	}
	cr_assert_eq(tp_frag_report(NULL, NULL, 0, &f), TP_EINVAL);
	cr_assert_null(f);
	cr_assert_eq(tp_frag_report(c, NULL, 0, NULL), TP_EINVAL);
	cr_assert_str_eq(tp_frag_errmsg(NULL), "");
	/* Everything down: nothing free, figures 0. */
	uint32_t all[32];
	for (uint32_t i = 0; i < 32; i++)
		all[i] = i;
	cr_assert_eq(tp_cluster_set_down(c, all, 32, 1), 0);
	cr_assert_eq(tp_frag_report(c, NULL, 0, &f), 0);
	cr_assert_eq(tp_frag_free_count(f, 2), 0);
	cr_assert_eq(tp_frag_down_count(f), 32);
	cr_assert_float_eq(tp_frag_fragmentation(f, 1), 0.0, 1e-12);
	cr_assert_float_eq(tp_frag_workload(f), 0.0, 1e-12);
	tp_frag_destroy(f);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(frag, allocation_failures)
{
	tp_cluster *c;
	tp_topology *t = small_cluster(&c);
	tp_job_shape mix[5] = {{1, "node", 1}, {2, "node", 1}, {4, "node", 1}, {8, "rack", 1},
	                       {16, "block", 1}};
	for (long n = 0;; n++) {
		tp_frag *f = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_frag_report(c, mix, 5, &f);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			tp_frag_destroy(f);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM);
		cr_assert_null(f);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
