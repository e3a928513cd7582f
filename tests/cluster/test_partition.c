/* SPDX-License-Identifier: MIT */
/*
 * NVLink partitions (src/cluster_partition.c, src/place_partition.c): the policy, the
 * partitions tp_place returns and tp_commit records, a node in one partition at a time, tenants
 * kept apart, the channel pool, release, savepoints, tp_replace and the defrag planner keeping
 * the invariant, allocation failures, and every error with its message.
 */
#include <stdio.h>

#include "testutil.h"

/* One block of `racks` NVL72 racks (block 0, rack 1, node 2): 18 nodes of 4 GPUs per rack;
 * node i of rack r is node 18 r + i, its devices 4 node .. 4 node + 3. */
static tp_topology *nvl72(unsigned racks)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, racks, &tp_test_allocator), 0);
	return t;
}

static tp_cluster *parts_cluster(const tp_topology *t, uint32_t channels)
{
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_set_partitions(c, 1, channels), 0, "%s", tp_cluster_errmsg(c));
	return c;
}

static void assert_consistent(const tp_cluster *c)
{
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

/* Devices [first, first + n) for job id of tenant. */
static int assign_run(tp_cluster *c, const char *id, const char *tenant, uint32_t first,
                      uint32_t n)
{
	uint32_t devs[512];
	for (uint32_t i = 0; i < n; i++)
		devs[i] = first + i;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.tenant = tenant;
	return tp_cluster_assign(c, id, devs, n, &o);
}

static tp_placement *place(const tp_cluster *c, const char *id, const char *tenant,
                           uint32_t count, int want)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.tenant = tenant;
	r.count = count;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	cr_assert_eq(rc, want, "%s: %s", tp_err_name(rc), p ? tp_placement_errmsg(p) : "-");
	return p;
}

static void place_commit(tp_cluster *c, const char *id, const char *tenant, uint32_t count)
{
	tp_placement *p = place(c, id, tenant, count, 0);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
}

/* Whether node is one of the placement's devices' nodes. */
static bool uses_node(const tp_placement *p, uint32_t node)
{
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++)
		if (d[i] / 4 == node)
			return true;
	return false;
}

Test(partition, off_by_default_and_the_answer_is_unchanged)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	int level;
	uint32_t ch;
	cr_assert_eq(tp_cluster_partition_policy(c, &level, &ch), 0);
	cr_assert_eq(level, -1);
	cr_assert_eq(ch, 0);
	tp_placement *p = place(c, "a", NULL, 16, 0);
	cr_assert_eq(tp_placement_partition_count(p), 0);
	TP_ASSERT_ERR(tp_placement_partition(p, 0, NULL, NULL, NULL, NULL), TP_ENOTFOUND, "", "");
	cr_assert_eq(tp_commit(c, p, NULL), 0);
	cr_assert_eq(tp_cluster_node_partition(c, 0, NULL, NULL), TP_ENOTFOUND);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, policy_errors_name_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	TP_ASSERT_ERR(tp_cluster_set_partitions(c, 2, 8), TP_EINVAL, tp_cluster_errmsg(c),
	              "partitions.level 2 is not a level above the node");
	TP_ASSERT_ERR(tp_cluster_set_partitions(c, 1, 0), TP_EINVAL, tp_cluster_errmsg(c),
	              "partitions.channels 0 is not between 1 and 65536");
	TP_ASSERT_ERR(tp_cluster_set_partitions(c, 0, 8), TP_EINVAL, tp_cluster_errmsg(c),
	              "partitions.level block has no domain whose fabric is NVLink");
	cr_assert_eq(assign_run(c, "a", NULL, 0, 4), 0);
	TP_ASSERT_ERR(tp_cluster_set_partitions(c, 1, 8), TP_EINVAL, tp_cluster_errmsg(c),
	              "partitions: the cluster runs 1 jobs");
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	TP_ASSERT_ERR(tp_cluster_set_partitions(c, 1, 8), TP_EINVAL, tp_cluster_errmsg(c),
	              "partitions: a savepoint is open");
	cr_assert_eq(tp_cluster_savepoint_discard(c, sp), 0);
	cr_assert_eq(tp_cluster_set_partitions(c, 1, 2048), 0);
	cr_assert_eq(tp_cluster_set_partitions(c, -1, 0), 0);
	int level;
	cr_assert_eq(tp_cluster_partition_policy(c, &level, NULL), 0);
	cr_assert_eq(level, -1);
	cr_assert_eq(tp_cluster_set_partitions(NULL, 1, 8), TP_EINVAL);
	cr_assert_eq(tp_cluster_node_partition(c, 99, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_placement_partition(NULL, 0, NULL, NULL, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_placement_partition_count(NULL), 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, a_placement_on_nvl72_returns_its_partition)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = parts_cluster(t, 2048);
	tp_placement *p = place(c, "a", NULL, 16, 0);
	cr_assert_eq(tp_placement_partition_count(p), 1);
	uint32_t dom, ch;
	const uint32_t *nodes;
	size_t n;
	cr_assert_eq(tp_placement_partition(p, 0, &dom, &ch, &nodes, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_eq(ch, 0);
	for (size_t i = 0; i < n; i++) {
		cr_assert(uses_node(p, nodes[i]));
		cr_assert_eq(nodes[i] / 18, dom);
		cr_assert(i == 0 || nodes[i] > nodes[i - 1]);
	}
	cr_assert_eq(tp_placement_partition(p, 1, NULL, NULL, NULL, NULL), TP_ENOTFOUND);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	const char *job;
	uint32_t node0 = nodes[0];
	cr_assert_eq(tp_cluster_node_partition(c, node0, &job, &ch), 0);
	cr_assert_str_eq(job, "a");
	cr_assert_eq(ch, 0);
	tp_placement_destroy(p);
	/* a second job in the same rack takes the next channel; a one-node job takes none */
	p = place(c, "b", NULL, 8, 0);
	cr_assert_eq(tp_placement_partition_count(p), 1);
	cr_assert_eq(tp_placement_partition(p, 0, &dom, &ch, NULL, NULL), 0);
	cr_assert_eq(ch, 1);
	tp_placement_destroy(p);
	p = place(c, "c", NULL, 4, 0);
	cr_assert_eq(tp_placement_partition_count(p), 0);
	tp_placement_destroy(p);
	assert_consistent(c);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert_eq(tp_cluster_node_partition(c, node0, NULL, NULL), TP_ENOTFOUND);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* One-node jobs of tenant on nodes [first, end). */
static void fill_nodes(tp_cluster *c, const char *tenant, uint32_t first, uint32_t end)
{
	char id[32];
	for (uint32_t node = first; node < end; node++) {
		snprintf(id, sizeof id, "fill%u", node);
		cr_assert_eq(assign_run(c, id, tenant, 4 * node, 4), 0, "%s", tp_cluster_errmsg(c));
	}
}

/* Tenant a's job holds nodes 0 and 1 of rack 0 (6 devices: node 1 keeps 2 free); the rest of
 * the one rack is full but for node 17's 2 devices. */
static tp_cluster *half_node_fleet(const tp_topology *t)
{
	tp_cluster *c = parts_cluster(t, 2048);
	cr_assert_eq(assign_run(c, "a", "ta", 0, 6), 0, "%s", tp_cluster_errmsg(c));
	fill_nodes(c, "ta", 2, 17);
	cr_assert_eq(assign_run(c, "fill17", "ta", 68, 2), 0, "%s", tp_cluster_errmsg(c));
	return c;
}

Test(partition, a_second_tenants_job_never_shares_a_partition)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = half_node_fleet(t);
	const char *job;
	cr_assert_eq(tp_cluster_node_partition(c, 1, &job, NULL), 0);
	cr_assert_str_eq(job, "a");
	/* tenant b may not use node 1's free devices: it gets node 17's */
	tp_placement *p = place(c, "b", "tb", 2, 0);
	cr_assert(!uses_node(p, 1) && uses_node(p, 17));
	tp_placement_destroy(p);
	/* nor, once node 17 is taken, anything: the message names the partition */
	cr_assert_eq(assign_run(c, "g", "ta", 70, 2), 0, "%s", tp_cluster_errmsg(c));
	p = place(c, "b", "tb", 2, TP_EFRAGMENTED);
	cr_assert(strstr(tp_placement_errmsg(p), "left out by the NVLink partition rules"), "%s",
	          tp_placement_errmsg(p));
	tp_placement_destroy(p);
	/* tenant a's own one-node job may */
	p = place(c, "a2", "ta", 2, 0);
	cr_assert(uses_node(p, 1));
	cr_assert_eq(tp_placement_partition_count(p), 0);
	/* committed under another tenant, it breaks the rule: refused, the state unchanged */
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.tenant = "tb";
	TP_ASSERT_ERR(tp_commit(c, p, &o), TP_EBUSY, tp_cluster_errmsg(c),
	              "job 'a2' breaks the NVLink partition rules");
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	tp_placement_destroy(p);
	/* the record refuses another tenant on the partition's nodes too */
	TP_ASSERT_ERR(assign_run(c, "x", "tb", 6, 1), TP_EBUSY, tp_cluster_errmsg(c),
	              "job 'x' breaks the NVLink partition rules: node block0-rack0-node1 is in the "
	              "NVLink partition of job 'a' (tenant ta)");
	/* and a partition never forms where another tenant's job runs */
	cr_assert_eq(tp_cluster_release(c, "fill2"), 0);
	cr_assert_eq(tp_cluster_release(c, "fill3"), 0);
	cr_assert_eq(assign_run(c, "c", "tb", 8, 2), 0, "%s", tp_cluster_errmsg(c));
	TP_ASSERT_ERR(assign_run(c, "y", "ta", 10, 4), TP_EBUSY, tp_cluster_errmsg(c),
	              "job 'y' breaks the NVLink partition rules: node block0-rack0-node2 runs job "
	              "'c' of tenant tb, which an NVLink partition of tenant ta may not share");
	p = place(c, "y", "ta", 6, TP_EFRAGMENTED); /* node 2's 2 and node 3's 4 are not for it */
	cr_assert(strstr(tp_placement_errmsg(p), "needs a partition"), "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, a_node_is_in_one_partition_at_a_time)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = parts_cluster(t, 2048);
	cr_assert_eq(assign_run(c, "a", NULL, 0, 6), 0, "%s", tp_cluster_errmsg(c));
	/* node 1 has 2 free devices; a same-tenant job of 6 spanning it and node 2 would put node
	 * 1 into a second partition: it is placed on other nodes */
	fill_nodes(c, NULL, 3, 18);
	/* free: node 1 (2 devices), node 2 (4 devices) */
	tp_placement *p = place(c, "b", NULL, 6, TP_EFRAGMENTED);
	cr_assert(strstr(tp_placement_errmsg(p), "needs a partition"), "%s", tp_placement_errmsg(p));
	cr_assert(strstr(tp_placement_errmsg(p), "node block0-rack0-node1 is in the NVLink partition of job 'a'"),
	          "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	TP_ASSERT_ERR(assign_run(c, "b", NULL, 6, 6), TP_EBUSY, tp_cluster_errmsg(c),
	              "job 'b' breaks the NVLink partition rules: node block0-rack0-node1 is in the NVLink "
	              "partition of job 'a'");
	/* after a is released, the same request fits and forms one partition of nodes 1 and 2 */
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	p = place(c, "b", NULL, 6, 0);
	cr_assert_eq(tp_placement_partition_count(p), 1);
	tp_placement_destroy(p);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, an_exhausted_channel_pool_is_busy)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = parts_cluster(t, 1);
	place_commit(c, "a", NULL, 8);
	/* rack 0's one channel is taken: the next multi-node job goes to rack 1 */
	tp_placement *p = place(c, "b", NULL, 8, 0);
	uint32_t dom, ch;
	cr_assert_eq(tp_placement_partition(p, 0, &dom, &ch, NULL, NULL), 0);
	cr_assert_neq(uses_node(p, 0) || uses_node(p, 1), true);
	cr_assert_eq(ch, 0);
	cr_assert_eq(tp_commit(c, p, NULL), 0);
	tp_placement_destroy(p);
	/* both pools taken: busy, and the message says so */
	p = place(c, "c", NULL, 8, TP_EBUSY);
	cr_assert(strstr(tp_placement_errmsg(p), "all 1 IMEX channels of rack"), "%s",
	          tp_placement_errmsg(p));
	tp_placement_destroy(p);
	/* one-node jobs still fit */
	p = place(c, "d", NULL, 4, 0);
	tp_placement_destroy(p);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, savepoints_undo_partitions)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = parts_cluster(t, 4);
	place_commit(c, "a", NULL, 8);
	place_commit(c, "b", NULL, 8);
	uint64_t fp = tp_cluster_fingerprint(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	place_commit(c, "c", NULL, 12); /* takes a's channel 0 */
	cr_assert_eq(tp_cluster_release(c, "b"), 0);
	assert_consistent(c);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	assert_consistent(c);
	const char *job;
	uint32_t ch;
	cr_assert_eq(tp_cluster_node_partition(c, 0, &job, &ch), 0);
	cr_assert_str_eq(job, "a");
	cr_assert_eq(ch, 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, replace_keeps_the_channel_and_the_invariant)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = parts_cluster(t, 8);
	place_commit(c, "x", NULL, 8);
	place_commit(c, "a", NULL, 8);
	const char *job;
	uint32_t ch, failed = 0;
	size_t n;
	tp_placement *p = NULL;
	{
		tp_placement *q = place(c, "probe", NULL, 4, 0); /* where "a" is not */
		tp_placement_destroy(q);
	}
	/* fail a's first device and repair it */
	for (uint32_t node = 0; node < 18; node++)
		if (tp_cluster_node_partition(c, node, &job, &ch) == 0 && strcmp(job, "a") == 0) {
			failed = 4 * node;
			break;
		}
	cr_assert_eq(ch, 1);
	cr_assert_eq(tp_cluster_set_down(c, &failed, 1, 1), 0);
	cr_assert_eq(tp_replace(c, "a", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	tp_placement_devices(p, &n);
	cr_assert_eq(n, 8);
	uint32_t dom, pch;
	cr_assert_eq(tp_placement_partition(p, 0, &dom, &pch, NULL, NULL), 0);
	cr_assert_eq(pch, 1);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, defrag_plans_keep_the_invariant)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = parts_cluster(t, 2048);
	/* two-node jobs of two tenants scattered over both racks */
	char id[16];
	for (uint32_t i = 0; i < 6; i++) {
		snprintf(id, sizeof id, "j%u", i);
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.tenant = i % 2 ? "tb" : "ta";
		o.migratable = 1;
		uint32_t devs[8], node = (i % 2) * 18 + 6 * (i / 2);
		for (uint32_t k = 0; k < 8; k++)
			devs[k] = 4 * node + k;
		cr_assert_eq(tp_cluster_assign(c, id, devs, 8, &o), 0, "%s", tp_cluster_errmsg(c));
	}
	tp_request r = TP_REQUEST_INIT;
	r.id = "big";
	r.count = 64;
	r.required = "rack";
	r.tenant = "ta";
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	tp_plan *plan = NULL;
	int rc = tp_defrag_plan(c, &r, &pol, &plan);
	cr_assert_eq(rc, 0, "%s", tp_err_name(rc));
	if (rc == 0) {
		for (size_t i = 0; i < tp_plan_step_count(plan); i++) {
			cr_assert_eq(tp_plan_apply_step(c, plan, i, NULL), 0, "step %zu: %s", i,
			             tp_cluster_errmsg(c));
			assert_consistent(c);
		}
		cr_assert_eq(tp_cluster_job_count(c), 7);
	}
	tp_plan_destroy(plan);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(partition, allocation_failures_leave_the_state_unchanged)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 100; n++) {
		tp_test_alloc_fail_at(n);
		rc = tp_cluster_set_partitions(c, 1, 64);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert(strstr(tp_cluster_errmsg(c), "out of memory setting partitions"));
	}
	cr_assert_eq(rc, 0);
	place_commit(c, "a", NULL, 8);
	uint64_t fp = tp_cluster_fingerprint(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 500; n++) {
		tp_request r = TP_REQUEST_INIT;
		r.id = "b";
		r.count = 12;
		tp_placement *p = NULL;
		tp_test_alloc_fail_at(n);
		rc = tp_place(c, &r, &p);
		if (!rc)
			rc = tp_commit(c, p, NULL);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "failed call %ld changed the state", n);
		tp_placement_destroy(p);
	}
	cr_assert_eq(rc, 0, "%d %s", rc, tp_err_name(rc));
	assert_consistent(c);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
