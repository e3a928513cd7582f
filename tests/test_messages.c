/* SPDX-License-Identifier: MIT */
/*
 * Where a failure's message lands, for a sample of the calls of each family, as their
 * @return says (#12 item 6): on the object the call writes (node type, builder, cluster), on
 * the result object it returns (placement, fragmentation report, plan, sizing, P/D result),
 * or in the caller's buffer (the buffer importers, the cost model). A success does not clear
 * an object's message; a result made by a successful call has ""; a caller's buffer is
 * emptied by every call; read-only calls leave no message.
 */
#include "testutil.h"
#include "topoplace-hwloc.h"
#include "topoplace-sizing.h"
#include "topoplace-slurm.h"

#define MSG_LEN 512

/* The message is non-empty and names the problem. */
#define ASSERT_SAYS(msg, fragment)                                                             \
	cr_assert(strstr((msg), (fragment)), "message '%s' lacks '%s'", (msg), (fragment))

static tp_topology *two_racks(void)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	return t;
}

Test(messages, node_type_writers_set_it_and_readers_and_successes_leave_it)
{
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	cr_assert_str_eq(tp_nodetype_errmsg(nt), "");
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, 7, NULL), TP_EINVAL);
	ASSERT_SAYS(tp_nodetype_errmsg(nt), "7");
	char before[MSG_LEN];
	snprintf(before, sizeof before, "%s", tp_nodetype_errmsg(nt));
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, NULL), 0);
	cr_assert_str_eq(tp_nodetype_errmsg(nt), before, "a success does not clear it");
	uint32_t sw = 0;
	cr_assert_eq(tp_nodetype_gpu_switch(nt, 99, &sw), TP_ENOTFOUND);
	cr_assert_str_eq(tp_nodetype_errmsg(nt), before, "a read-only call leaves no message");
	tp_nodetype_destroy(nt);

	tp_nodetype *none = (tp_nodetype *)&sw;
	cr_assert_eq(tp_nodetype_create(&none, 0, &tp_test_allocator), TP_EINVAL);
	cr_assert_null(none, "no object exists on failure");
	TP_ASSERT_NO_LEAKS();
}

Test(messages, builder_writers_set_it)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), TP_EINVAL);
	ASSERT_SAYS(tp_topology_builder_errmsg(b), "no node");
	const char *path[] = {"r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "n/0", path, 4, NULL), TP_EINVAL);
	ASSERT_SAYS(tp_topology_builder_errmsg(b), "n/0");
	char before[MSG_LEN];
	snprintf(before, sizeof before, "%s", tp_topology_builder_errmsg(b));
	cr_assert_eq(tp_topology_builder_add_node(b, "n0", path, 4, NULL), 0);
	cr_assert_str_eq(tp_topology_builder_errmsg(b), before, "a success does not clear it");
	tp_topology_builder_destroy(b);

	const char *dup[] = {"x", "x"};
	tp_topology_builder *none = NULL;
	cr_assert_eq(tp_topology_builder_create(&none, dup, 2, &tp_test_allocator), TP_EINVAL);
	cr_assert_null(none);
	TP_ASSERT_NO_LEAKS();
}

Test(messages, cluster_writers_set_it_and_readers_leave_it)
{
	tp_topology *t = two_racks();
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_str_eq(tp_cluster_errmsg(c), "");
	uint32_t bad[] = {100000};
	cr_assert_eq(tp_cluster_assign(c, "a", bad, 1, NULL), TP_EINVAL);
	ASSERT_SAYS(tp_cluster_errmsg(c), "100000");
	cr_assert_eq(tp_cluster_release(c, "nobody"), TP_ENOTFOUND);
	ASSERT_SAYS(tp_cluster_errmsg(c), "nobody");
	cr_assert_eq(tp_cluster_rollback(c, 42), TP_EINVAL);
	ASSERT_SAYS(tp_cluster_errmsg(c), "savepoint 42");

	char before[MSG_LEN];
	snprintf(before, sizeof before, "%s", tp_cluster_errmsg(c));
	uint32_t devs[] = {0, 1, 2, 3};
	cr_assert_eq(tp_cluster_assign(c, "a", devs, 4, NULL), 0);
	cr_assert_str_eq(tp_cluster_errmsg(c), before, "a success does not clear it");
	const uint32_t *held = NULL;
	size_t n = 0;
	cr_assert_eq(tp_cluster_job_devices(c, "ghost", &held, &n), TP_ENOTFOUND);
	cr_assert_eq(tp_cluster_tightest(c, 0, 1000, &bad[0]), TP_ENOTFOUND);
	cr_assert_str_eq(tp_cluster_errmsg(c), before, "read-only calls leave no message");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(messages, place_and_replace_answer_with_a_result_that_carries_it)
{
	tp_topology *t = two_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.required = "nowhere";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), TP_ENOTFOUND);
	cr_assert_not_null(p, "a failed placement is still returned");
	ASSERT_SAYS(tp_placement_errmsg(p), "nowhere");
	cr_assert_str_eq(tp_cluster_errmsg(c), "", "the cluster is not written");
	tp_placement_destroy(p);

	r.required = "rack";
	cr_assert_eq(tp_place(c, &r, &p), 0);
	cr_assert_str_eq(tp_placement_errmsg(p), "");
	/* tp_commit writes the cluster: its failure is on the cluster */
	cr_assert_eq(tp_commit(c, p, NULL), 0);
	cr_assert_lt(tp_commit(c, p, NULL), 0, "committed twice");
	cr_assert_neq(tp_cluster_errmsg(c)[0], '\0');
	tp_placement_destroy(p);

	uint32_t failed[] = {0};
	cr_assert_eq(tp_replace(c, "ghost", failed, 1, &p), TP_ENOTFOUND);
	cr_assert_not_null(p);
	ASSERT_SAYS(tp_placement_errmsg(p), "ghost");
	tp_placement_destroy(p);

	cr_assert_eq(tp_place(c, &r, NULL), TP_EINVAL, "a NULL out: no result, no message");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(messages, frag_and_defrag_answer_with_a_result_that_carries_it)
{
	tp_topology *t = two_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_job_shape mix[] = {{4, "rack", -1.0}};
	tp_frag *f = NULL;
	cr_assert_eq(tp_frag_report(c, mix, 1, &f), TP_EINVAL);
	cr_assert_not_null(f);
	ASSERT_SAYS(tp_frag_errmsg(f), "mix[0].weight");
	cr_assert_str_eq(tp_cluster_errmsg(c), "");
	tp_frag_destroy(f);
	cr_assert_eq(tp_frag_report(c, NULL, 0, &f), 0);
	cr_assert_str_eq(tp_frag_errmsg(f), "");
	tp_frag_destroy(f);

	/* the plan carries the message, and a failure copies it to the cluster */
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	pol.min_priority_gap = -1;
	tp_plan *plan = NULL;
	cr_assert_eq(tp_defrag_plan(c, &r, &pol, &plan), TP_EINVAL);
	cr_assert_not_null(plan);
	ASSERT_SAYS(tp_plan_errmsg(plan), "policy.min_priority_gap");
	cr_assert_str_eq(tp_cluster_errmsg(c), tp_plan_errmsg(plan));
	tp_plan_destroy(plan);
	cr_assert_eq(tp_defrag_compact(c, "rack", 0, NULL, &plan), TP_EINVAL);
	ASSERT_SAYS(tp_plan_errmsg(plan), "ndomains 0");
	cr_assert_str_eq(tp_cluster_errmsg(c), tp_plan_errmsg(plan));
	/* applying a step writes the cluster: its failure is on the cluster */
	cr_assert_eq(tp_plan_apply_step(c, plan, 0, NULL), TP_EINVAL);
	ASSERT_SAYS(tp_cluster_errmsg(c), "no steps");
	tp_plan_destroy(plan);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(messages, buffer_importers_and_the_cost_model_write_the_callers_buffer)
{
	char err[MSG_LEN] = "stale";
	tp_topology_builder *b = (tp_topology_builder *)err;
	const char conf[] = "SwitchName=s0 Nodes=n[0-1]\nSwitchName=s1 Bogus=1\n";
	cr_assert_lt(tp_topology_builder_from_slurm(&b, conf, sizeof conf - 1, 4, &tp_test_allocator,
	                                            err, sizeof err),
	             0);
	cr_assert_null(b);
	ASSERT_SAYS(err, "line 2");
	const char good[] = "SwitchName=s0 Nodes=n[0-1]\n";
	cr_assert_eq(tp_topology_builder_from_slurm(&b, good, sizeof good - 1, 4,
	                                            &tp_test_allocator, err, sizeof err),
	             0);
	cr_assert_str_eq(err, "", "every call first empties the buffer");
	tp_topology_builder_destroy(b);

	tp_nodetype *nt = NULL;
	const char xml[] = "<notxml";
	cr_assert_lt(tp_nodetype_from_hwloc_xml(&nt, xml, sizeof xml - 1, &tp_test_allocator, err,
	                                        sizeof err),
	             0);
	cr_assert_null(nt);
	cr_assert_neq(err[0], '\0');

	tp_topology *t = two_racks();
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = 0;
	uint32_t devs[] = {0, 1};
	double us = 0;
	cr_assert_eq(tp_cost_step_us(&us, t, devs, 2, &m, &tp_test_allocator, err, sizeof err),
	             TP_EINVAL);
	ASSERT_SAYS(err, "tp");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(messages, sizing_and_pd_answer_with_a_result_that_carries_it)
{
	tp_topology *t = two_racks();
	tp_model_desc md = TP_MODEL_DESC_INIT; /* params 0: refused */
	tp_sizing_options so = TP_SIZING_OPTIONS_INIT;
	so.context = 4096;
	tp_sizing *s = NULL;
	cr_assert_eq(tp_size_model(t, &md, &so, &s), TP_EINVAL);
	cr_assert_not_null(s);
	ASSERT_SAYS(tp_sizing_errmsg(s), "params");
	tp_sizing_destroy(s);

	tp_cluster *c = tp_test_cluster(t);
	tp_pd_request pr = TP_PD_REQUEST_INIT;
	pr.service = "svc";
	pr.groups = 0;
	tp_pd_result *res = NULL;
	cr_assert_eq(tp_pd_place(c, &pr, &res), TP_EINVAL);
	cr_assert_not_null(res);
	ASSERT_SAYS(tp_pd_result_errmsg(res), "groups");
	cr_assert_str_eq(tp_cluster_errmsg(c), "", "the cluster carries none");
	tp_pd_result_destroy(res);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Allocation failures: ::TP_ENOMEM is the one code without a result (and the cluster is not
 * written); every other outcome comes with a result that says why, until the call succeeds. */
Test(messages, allocation_failures_return_no_result_and_write_nothing)
{
	tp_topology *t = two_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 16;
	r.required = "rack";
	for (long n = 0;; n++) {
		tp_placement *p = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_place(c, &r, &p);
		tp_test_alloc_fail_at(-1);
		cr_assert_str_eq(tp_cluster_errmsg(c), "");
		if (rc == 0) {
			cr_assert_str_eq(tp_placement_errmsg(p), "");
			tp_placement_destroy(p);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", n, p ? tp_placement_errmsg(p) : "");
		cr_assert_null(p);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
