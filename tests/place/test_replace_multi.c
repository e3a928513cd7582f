/* SPDX-License-Identifier: MIT */
/*
 * tp_replace with several failed nodes of one job at once, and what it says when repair is
 * impossible.
 */
#include <stdio.h>

#include "testutil.h"

static tp_topology *nvl72(unsigned racks)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, racks, &tp_test_allocator), 0);
	return t;
}

static void node_devs(uint32_t node, uint32_t *d)
{
	for (uint32_t i = 0; i < 4; i++)
		d[i] = 4 * node + i;
}

/* A job on whole nodes: the runs [first[i], first[i] + n[i]). */
static void job_runs(tp_cluster *c, const char *id, const uint32_t *first, const uint32_t *n,
                     size_t runs, const tp_request *shape)
{
	uint32_t devs[1024];
	size_t nd = 0;
	for (size_t r = 0; r < runs; r++)
		for (uint32_t i = 0; i < n[r]; i++, nd += 4)
			node_devs(first[r] + i, devs + nd);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = shape;
	cr_assert_eq(tp_cluster_assign(c, id, devs, nd, &o), 0, "%s", tp_cluster_errmsg(c));
}

static const tp_slice per_rack[] = {{"rack", 64}};

static tp_request sliced_shape(void)
{
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 128;
	shape.group_size = 4;
	shape.required = "block";
	shape.slices = per_rack;
	shape.nslices = 1;
	return shape;
}

/* A 128-GPU job as two rack slices of 64: rack 0 nodes 0-15, rack 1 nodes 18-33. */
static void sliced_job(tp_cluster *c, const tp_request *shape)
{
	uint32_t f[] = {0, 18}, n[] = {16, 16};
	job_runs(c, "big", f, n, 2, shape);
}

static uint32_t rack_of(const tp_topology *t, uint32_t dev)
{
	return tp_topology_device_node(t, dev) / 18;
}

/* Every rank of slice s in one rack, every group of 4 on one node. */
static void assert_shape_kept(const tp_topology *t, const tp_placement *p)
{
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 128);
	for (size_t r = 0; r < n; r++) {
		cr_assert_eq(rack_of(t, d[r]), rack_of(t, d[r - r % 64]), "rank %zu left its slice", r);
		cr_assert_eq(tp_topology_device_node(t, d[r]), tp_topology_device_node(t, d[r - r % 4]),
		             "rank %zu left its group", r);
	}
}

static void assert_consistent(const tp_cluster *c)
{
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

Test(replace_multi, three_failed_nodes_of_a_sliced_job_at_once)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = sliced_shape();
	sliced_job(c, &shape);
	uint32_t failed[12];
	node_devs(2, failed);
	node_devs(5, failed + 4);
	node_devs(20, failed + 8);
	cr_assert_eq(tp_cluster_set_down(c, failed, 12, 1), 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "big", failed, 12, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "tp_replace is read-only");
	assert_shape_kept(t, p);
	for (size_t i = 0; i < 12; i++) {
		uint32_t f, r;
		cr_assert_eq(tp_placement_replaced(p, i, &f, &r), 0);
		cr_assert_eq(rack_of(t, r), rack_of(t, f), "device %u replaced outside its rack", f);
	}
	cr_assert_eq(tp_placement_replaced(p, 12, NULL, NULL), TP_ENOTFOUND);
	cr_assert_eq(tp_placement_repair_shrink(p, NULL, NULL, NULL), TP_EINVAL, "a success");
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	assert_consistent(c);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(replace_multi, spares_first_then_free_nodes)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = sliced_shape();
	sliced_job(c, &shape);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 1, 0), 0); /* nodes 17, 35, 53, 71 */
	uint32_t failed[12];
	node_devs(2, failed);
	node_devs(5, failed + 4);
	node_devs(20, failed + 8);
	cr_assert_eq(tp_cluster_set_down(c, failed, 12, 1), 0);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "big", failed, 12, &p), 0, "%s", tp_placement_errmsg(p));
	assert_shape_kept(t, p);
	bool used17 = false;
	for (size_t i = 0; i < 12; i++) {
		uint32_t f, r;
		cr_assert_eq(tp_placement_replaced(p, i, &f, &r), 0);
		uint32_t node = tp_topology_device_node(t, r);
		if (rack_of(t, f) == 0) /* two nodes needed, one spare: the spare and node 16 */
			cr_assert(node == 16 || node == 17, "rack 0 replaced on node %u", node);
		else
			cr_assert_eq(node, 35, "rack 1 has a spare: node %u instead", node);
		used17 |= node == 17;
	}
	cr_assert(used17, "rack 0's spare was not used");
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_spare_count(c, 1, 0), 0,
	             "rack 0 has no free node left for a spare");
	cr_assert_eq(tp_cluster_spare_count(c, 1, 1), 1, "rack 1 marks node 34");
	cr_assert_eq(tp_cluster_node_is_spare(c, 34), 1);
	assert_consistent(c);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(replace_multi, caps_are_kept)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	static const tp_domain_cap cap[] = {{"rack", 32, 0}};
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 64;
	shape.group_size = 4;
	shape.required = "block";
	shape.caps = cap;
	shape.ncaps = 1;
	uint32_t f[] = {0, 18}, n[] = {8, 8};
	job_runs(c, "capped", f, n, 2, &shape);
	uint32_t failed[12];
	node_devs(2, failed);
	node_devs(20, failed + 4);
	node_devs(21, failed + 8);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "capped", failed, 12, &p), 0, "%s", tp_placement_errmsg(p));
	size_t nd;
	const uint32_t *d = tp_placement_devices(p, &nd);
	unsigned per[4] = {0};
	for (size_t r = 0; r < nd; r++) {
		per[rack_of(t, d[r])]++;
		cr_assert_eq(tp_topology_device_node(t, d[r]), tp_topology_device_node(t, d[r - r % 4]));
	}
	for (unsigned k = 0; k < 4; k++)
		cr_assert_leq(per[k], 32, "rack %u holds %u of the job", k, per[k]);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(replace_multi, impossible_repair_names_the_cheapest_alternatives)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = sliced_shape();
	sliced_job(c, &shape);
	uint32_t o1[] = {16}, o2[] = {2};
	job_runs(c, "other", o1, o2, 1, NULL); /* rack 0 is full */
	uint32_t failed[12];
	node_devs(2, failed);
	node_devs(5, failed + 4);
	node_devs(20, failed + 8);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	int rc = tp_replace(c, "big", failed, 12, &p);
	TP_ASSERT_ERR(rc, TP_EFRAGMENTED, tp_placement_errmsg(p),
	              "fragmented: replace: the 8 failed devices of job 'big' must be replaced "
	              "inside block0/rack0 (where its shape keeps them), which has 0 free devices "
	              "and 0 spares");
	const char *m = tp_placement_errmsg(p);
	cr_assert(strstr(m, "the cheapest alternatives: shrink to 1 of 2 slices (64 ranks), or "
	                    "evict job 'other' (8 devices) in block0/rack0"), "%s", m);
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.level, 1);
	cr_assert_eq(fit.best, 0);
	uint32_t ranks, units, of;
	cr_assert_eq(tp_placement_repair_shrink(p, &ranks, &units, &of), 0);
	cr_assert_eq(ranks, 64);
	cr_assert_eq(units, 1);
	cr_assert_eq(of, 2);
	cr_assert_eq(tp_placement_repair_shrink(NULL, NULL, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* #14: a job that requires its rack is told about its own rack, never another one. */
Test(replace_multi, a_required_rack_is_the_only_domain_named)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_request s = TP_REQUEST_INIT;
	s.count = 16;
	s.group_size = 4;
	s.required = "rack";
	uint32_t f1[] = {36}, n1[] = {4};
	job_runs(c, "small", f1, n1, 1, &s);
	uint32_t f2[] = {40, 44}, n2[] = {3, 10};
	job_runs(c, "fill", f2, n2, 2, NULL);
	uint32_t f3[] = {43}, n3[] = {1};
	job_runs(c, "tiny", f3, n3, 1, NULL);
	uint32_t failed[4];
	node_devs(37, failed);
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_replace(c, "small", failed, 4, &p), TP_EFRAGMENTED, tp_placement_errmsg(p),
	              "must be replaced inside block0/rack2 (where its shape keeps them)");
	const char *m = tp_placement_errmsg(p);
	cr_assert(!strstr(m, "rack0") && !strstr(m, "rack1") && !strstr(m, "rack3"),
	          "the message names a rack the job may not use: %s", m);
	cr_assert(strstr(m, "shrink to 3 of 4 groups (12 ranks), or evict job 'tiny' (4 devices) "
	                    "in block0/rack2"), "%s", m);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(replace_multi, every_rank_failed_keeps_the_required_level)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request s = TP_REQUEST_INIT;
	s.count = 8;
	s.group_size = 4;
	s.required = "rack";
	uint32_t f1[] = {16}, n1[] = {2};
	job_runs(c, "pair", f1, n1, 1, &s);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 1, 0), 0); /* nodes 15 and 35 */
	uint32_t failed[8];
	node_devs(16, failed);
	node_devs(17, failed + 4);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "pair", failed, 8, &p), 0, "%s", tp_placement_errmsg(p));
	size_t nd;
	const uint32_t *d = tp_placement_devices(p, &nd);
	for (size_t r = 0; r < nd; r++)
		cr_assert_eq(rack_of(t, d[r]), rack_of(t, d[0]), "rank %zu left the job's rack", r);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* No replacement even with every other job gone: the code and message of tp_place, and the
 * shrink alternative. */
Test(replace_multi, infeasible_repair_offers_to_shrink)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	tp_request s = TP_REQUEST_INIT;
	s.count = 72;
	s.group_size = 4;
	s.required = "rack";
	uint32_t f[] = {0}, n[] = {18};
	job_runs(c, "wide", f, n, 1, &s);
	uint32_t failed[4];
	node_devs(9, failed);
	cr_assert_eq(tp_cluster_set_down(c, failed, 4, 1), 0);
	tp_placement *p = NULL;
	int rc = tp_replace(c, "wide", failed, 4, &p);
	TP_ASSERT_ERR(rc, TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "; the cheapest alternative: shrink to 17 of 18 groups (68 ranks)");
	cr_assert(!strncmp(tp_placement_errmsg(p), "infeasible: ", 12), "%s",
	          tp_placement_errmsg(p));
	uint32_t ranks, units, of;
	cr_assert_eq(tp_placement_repair_shrink(p, &ranks, &units, &of), 0);
	cr_assert(ranks == 68 && units == 17 && of == 18, "%u ranks, %u of %u", ranks, units, of);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Allocation failures: tp_replace with spares (both passes) fails cleanly with TP_ENOMEM, leaks
 * nothing and changes nothing, until it succeeds with the same answer. */
Test(replace_multi, allocation_failures_with_spares)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = sliced_shape();
	sliced_job(c, &shape);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 1, 0), 0);
	uint32_t failed[12];
	node_devs(2, failed);
	node_devs(5, failed + 4);
	node_devs(20, failed + 8);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *want = NULL;
	cr_assert_eq(tp_replace(c, "big", failed, 12, &want), 0, "%s", tp_placement_errmsg(want));
	long live = tp_test_alloc_state.live;
	int rc = TP_ENOMEM;
	long n = 0;
	for (; rc == TP_ENOMEM && n < 2000; n++) {
		tp_placement *p = NULL;
		tp_test_alloc_fail_at(n);
		rc = tp_replace(c, "big", failed, 12, &p);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			cr_assert_null(p);
			cr_assert_eq(tp_test_alloc_state.live, live, "failure %ld leaked", n);
		} else {
			cr_assert_eq(rc, 0, "%s", tp_placement_errmsg(p));
			size_t n1, n2;
			const uint32_t *a = tp_placement_devices(p, &n1), *b = tp_placement_devices(want, &n2);
			cr_assert(n1 == n2 && !memcmp(a, b, n1 * sizeof *a), "another answer after failures");
		}
		tp_placement_destroy(p);
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
	}
	cr_assert_eq(rc, 0);
	cr_assert_gt(n, 3, "only %ld allocations were failed", n);
	tp_placement_destroy(want);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
