/* SPDX-License-Identifier: MIT */
/*
 * tp_placement_decided_by: which rule of the objective decided the outermost choice among
 * candidate domains, one case per rule.
 */
#include <stdio.h>

#include "testutil.h"

/* Racks of 4-GPU nodes under one level "rack" (two levels: rack, node). */
static tp_topology *racks(unsigned nracks, unsigned nodes_per_rack)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	for (unsigned r = 0; r < nracks; r++)
		for (unsigned n = 0; n < nodes_per_rack; n++) {
			char rack[16], node[16];
			snprintf(rack, sizeof rack, "r%u", r);
			snprintf(node, sizeof node, "x%u", r * nodes_per_rack + n);
			const char *path[] = {rack};
			cr_assert_eq(tp_topology_builder_add_node(b, node, path, 4, NULL), 0);
		}
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* Hold n devices of node x (its first ones) as job id. */
static void hold(tp_cluster *c, const char *id, unsigned node, unsigned n)
{
	uint32_t d[4];
	for (unsigned i = 0; i < n; i++)
		d[i] = node * 4 + i;
	cr_assert_eq(tp_cluster_assign(c, id, d, n, NULL), 0, "%s", tp_cluster_errmsg(c));
}

/* The rule that decided r on c (the request must be placed). */
static tp_rule decided(tp_cluster *c, const tp_request *r)
{
	tp_placement *p;
	cr_assert_eq(tp_place(c, r, &p), 0, "%s", tp_placement_errmsg(p));
	tp_rule rule = tp_placement_decided_by(p);
	tp_placement_destroy(p);
	return rule;
}

Test(decided, tie_fit_and_none)
{
	tp_test_alloc_reset();
	tp_topology *t = racks(2, 2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.required = "node";
	/* four empty nodes: equal on every rule, the lowest index wins */
	cr_assert_eq(decided(c, &r), TP_RULE_TIE);
	/* x1 has a GPU held: x0, x2 and x3 can still take 3; best fit takes x1 for 3 GPUs */
	hold(c, "a", 1, 1);
	r.count = 3;
	cr_assert_eq(decided(c, &r), TP_RULE_FIT);
	/* unconstrained: filled tightest first, no choice among candidates */
	tp_request u = TP_REQUEST_INIT;
	u.count = 3;
	cr_assert_eq(decided(c, &u), TP_RULE_NONE);
	/* a failed result and NULL say none */
	tp_placement *p;
	r.count = 5;
	cr_assert_eq(tp_place(c, &r, &p), TP_EINFEASIBLE);
	cr_assert_eq(tp_placement_decided_by(p), TP_RULE_NONE);
	tp_placement_destroy(p);
	cr_assert_eq(tp_placement_decided_by(NULL), TP_RULE_NONE);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Rack r1 is tighter (8 free: 2 on each node) and is looked at first, but needs four nodes
 * where r0 (9 free: two whole nodes and one GPU) needs two: rule 1 decides. */
Test(decided, locality)
{
	tp_test_alloc_reset();
	tp_topology *t = racks(2, 4);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", 2, 3);
	hold(c, "b", 3, 4);
	char id[8];
	for (unsigned n = 4; n < 8; n++) {
		snprintf(id, sizeof id, "j%u", n);
		hold(c, id, n, 2);
	}
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.preferred = "rack";
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_placement_domain_count(p, 1), 2);
	cr_assert_eq(tp_placement_decided_by(p), TP_RULE_LOCALITY);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* No rack holds 8 of 6 + 6 free: balanced splits them 4 + 4 (rule 2); without balance the
 * racks are chosen together and nothing is compared. */
Test(decided, balance)
{
	tp_test_alloc_reset();
	tp_topology *t = racks(2, 2);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", 0, 2);
	hold(c, "b", 2, 2);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.preferred = "rack";
	cr_assert_eq(decided(c, &r), TP_RULE_NONE);
	r.balanced = 1;
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	uint32_t dom, n0, n1;
	cr_assert_eq(tp_placement_domain_at(p, 0, 0, &dom, &n0), 0);
	cr_assert_eq(tp_placement_domain_at(p, 0, 1, &dom, &n1), 0);
	cr_assert_eq(n0, 4);
	cr_assert_eq(n1, 4);
	cr_assert_eq(tp_placement_decided_by(p), TP_RULE_BALANCE);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Two racks tied on every earlier rule, r1 on a 400 GB/s fabric of its own, r0 on the level's
 * 25 GB/s: with a step model the faster rack wins by rule 4; without, the lowest index. */
Test(decided, step)
{
	tp_test_alloc_reset();
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 0, TP_LINK_ETHERNET, 25.0, 10.0), 0);
	const char *p0[] = {"r0"}, *p1[] = {"r1"};
	cr_assert_eq(tp_topology_builder_add_node(b, "x0", p0, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "x1", p0, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "x2", p1, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "x3", p1, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 0, "r1", TP_LINK_NVLINK, 400.0, 1.0), 0,
	             "%s", tp_topology_builder_errmsg(b));
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.required = "rack";
	cr_assert_eq(decided(c, &r), TP_RULE_TIE);
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = 8;
	m.tp_bytes = 64.0 * 1024 * 1024;
	m.tp_msgs = 16;
	r.comm = &m;
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	cr_assert_eq(tp_placement_devices(p, &n)[0], 8); /* x2/0: rack r1 */
	cr_assert_eq(tp_placement_decided_by(p), TP_RULE_STEP);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Allocation failures on a call that records a decision: TP_ENOMEM and no leak until it
 * succeeds with the same rule. */
Test(decided, allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t = racks(2, 2);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", 1, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 3;
	r.required = "node";
	int rc = TP_ENOMEM;
	for (long i = 0; rc == TP_ENOMEM; i++) {
		tp_test_alloc_fail_at(i);
		tp_placement *p = NULL;
		rc = tp_place(c, &r, &p);
		tp_test_alloc_fail_at(-1);
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s", i, tp_err_name(rc));
		if (rc == 0)
			cr_assert_eq(tp_placement_decided_by(p), TP_RULE_FIT);
		tp_placement_destroy(p);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
