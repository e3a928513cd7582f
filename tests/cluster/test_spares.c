/* SPDX-License-Identifier: MIT */
/*
 * Hot spares (src/cluster_spare.c): the policy's marks, their upkeep as nodes fail, are
 * repaired, freed and taken, placement leaving them alone, tp_replace using them first,
 * savepoints covering them, and every error with its message.
 */
#include <stdio.h>

#include "testutil.h"

/* One block of `racks` NVL72 racks: levels block 0, rack 1, node 2; 18 nodes of 4 GPUs per
 * rack, node i of rack r is node 18 r + i, its devices 4 node .. 4 node + 3. */
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

/* A job on whole nodes [first, first + n). */
static void job_nodes(tp_cluster *c, const char *id, uint32_t first, uint32_t n,
                      const tp_request *shape)
{
	uint32_t devs[1024];
	for (uint32_t i = 0; i < n; i++)
		node_devs(first + i, devs + 4 * i);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = shape;
	cr_assert_eq(tp_cluster_assign(c, id, devs, 4 * n, &o), 0, "%s", tp_cluster_errmsg(c));
}

static void assert_consistent(const tp_cluster *c)
{
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

static void set_node_down(tp_cluster *c, uint32_t node, int down)
{
	uint32_t d[4];
	node_devs(node, d);
	cr_assert_eq(tp_cluster_set_down(c, d, 4, down), 0, "%s", tp_cluster_errmsg(c));
}

Test(spares, policy_marks_the_last_free_nodes_of_each_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	job_nodes(c, "busy", 17, 1, NULL); /* rack 0's last node is taken: 16 and 15 instead */
	cr_assert_eq(tp_cluster_set_spares(c, 1, 2, 0), 0, "%s", tp_cluster_errmsg(c));
	unsigned level, k;
	cr_assert_eq(tp_cluster_spare_policy(c, &level, &k), 0);
	cr_assert_eq(level, 1);
	cr_assert_eq(k, 2);
	cr_assert_eq(tp_cluster_spare_total_count(c), 4);
	cr_assert_eq(tp_cluster_spare_count(c, 1, 0), 2);
	cr_assert_eq(tp_cluster_spare_count(c, 1, 1), 2);
	cr_assert_eq(tp_cluster_spare_count(c, 0, 0), 4);
	cr_assert_eq(tp_cluster_node_is_spare(c, 16), 1);
	cr_assert_eq(tp_cluster_node_is_spare(c, 15), 1);
	cr_assert_eq(tp_cluster_node_is_spare(c, 17), 0);
	cr_assert_eq(tp_cluster_node_is_spare(c, 34), 1);
	cr_assert_eq(tp_cluster_node_is_spare(c, 35), 1);
	cr_assert_eq(tp_cluster_spare_count(c, 2, 35), 1);
	/* spares are not free: 144 GPUs, 4 busy, 16 spare */
	cr_assert_eq(tp_cluster_free_total_count(c), 144 - 4 - 16);
	cr_assert_eq(tp_cluster_free_count(c, 1, 0), 72 - 4 - 8);
	assert_consistent(c);
	/* k = 0 clears every mark and the policy */
	cr_assert_eq(tp_cluster_set_spares(c, 1, 0, 0), 0);
	cr_assert_eq(tp_cluster_spare_total_count(c), 0);
	cr_assert_eq(tp_cluster_free_total_count(c), 140);
	cr_assert_eq(tp_cluster_spare_policy(c, &level, &k), 0);
	cr_assert_eq(k, 0);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, placement_never_uses_a_spare)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 2, 0), 0);
	tp_request r = TP_REQUEST_INIT;
	r.id = "all";
	r.count = 128;
	r.group_size = 4;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(tp_cluster_node_is_spare(c, tp_topology_device_node(t, d[i])), 0,
		             "rank %zu on spare device %u", i, d[i]);
	tp_placement_destroy(p);
	r.count = 132; /* only with the spares: as with cordoned devices, infeasible */
	cr_assert_eq(tp_place(c, &r, &p), TP_EINFEASIBLE, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, upkeep_follows_failures_repairs_and_releases)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 2, 0), 0);
	cr_assert_eq(tp_cluster_node_is_spare(c, 17), 1);
	cr_assert_eq(tp_cluster_node_is_spare(c, 16), 1);
	/* a spare fails: it loses its mark, node 15 takes its place */
	set_node_down(c, 17, 1);
	cr_assert_eq(tp_cluster_node_is_spare(c, 17), 0);
	cr_assert_eq(tp_cluster_node_is_spare(c, 15), 1);
	cr_assert_eq(tp_cluster_spare_count(c, 1, 0), 2);
	assert_consistent(c);
	/* repaired: the rack has its 2 spares, so 17 is simply free */
	set_node_down(c, 17, 0);
	cr_assert_eq(tp_cluster_node_is_spare(c, 17), 0);
	cr_assert_eq(tp_cluster_free_count(c, 2, 17), 4);
	/* the rack fills up: no spare can be found until a node frees */
	job_nodes(c, "a", 0, 15, NULL);
	job_nodes(c, "b", 17, 1, NULL);
	set_node_down(c, 16, 1);
	cr_assert_eq(tp_cluster_spare_count(c, 1, 0), 1, "only node 15 is left as a spare");
	cr_assert_eq(tp_cluster_release(c, "b"), 0);
	cr_assert_eq(tp_cluster_node_is_spare(c, 17), 1, "the freed node becomes a spare");
	cr_assert_eq(tp_cluster_spare_count(c, 1, 0), 2);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, caller_marks_its_own_spares)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_set_node_spare(c, 3, 1), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_set_node_spare(c, 3, 1), 0, "marking twice is fine");
	cr_assert_eq(tp_cluster_node_is_spare(c, 3), 1);
	cr_assert_eq(tp_cluster_spare_total_count(c), 1);
	cr_assert_eq(tp_cluster_free_total_count(c), 68);
	uint32_t d[4];
	node_devs(3, d);
	/* a job assigned onto a spare takes it: the mark goes */
	cr_assert_eq(tp_cluster_assign(c, "j", d, 2, NULL), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_node_is_spare(c, 3), 0);
	cr_assert_eq(tp_cluster_free_count(c, 2, 3), 2);
	assert_consistent(c);
	cr_assert_eq(tp_cluster_set_node_spare(c, 5, 1), 0);
	cr_assert_eq(tp_cluster_set_node_spare(c, 5, 0), 0);
	cr_assert_eq(tp_cluster_spare_total_count(c), 0);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, errors_name_the_field_and_leave_state_unchanged)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	job_nodes(c, "j", 0, 1, NULL);
	uint32_t d[4];
	node_devs(1, d);
	cr_assert_eq(tp_cluster_set_cordoned(c, d, 1, 1), 0);
	node_devs(2, d);
	cr_assert_eq(tp_cluster_set_down(c, d + 3, 1, 1), 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	TP_ASSERT_ERR(tp_cluster_set_spares(c, 2, 1, 0), TP_EINVAL, tp_cluster_errmsg(c),
	              "spares.level 2 is not a level above the node (the topology has 3 levels, the "
	              "node is level 2)");
	TP_ASSERT_ERR(tp_cluster_set_spares(c, 1, 19, 0), TP_EINVAL, tp_cluster_errmsg(c),
	              "spares.k 19 exceeds the 18 nodes of the largest rack");
	TP_ASSERT_ERR(tp_cluster_set_spares(c, 1, 1, 4), TP_EINVAL, tp_cluster_errmsg(c),
	              "spares.flags 0x4: no flag is defined (pass 0)");
	TP_ASSERT_ERR(tp_cluster_set_node_spare(c, 18, 1), TP_EINVAL, tp_cluster_errmsg(c),
	              "spare.node 18 is out of range (the topology has 18 nodes)");
	TP_ASSERT_ERR(tp_cluster_set_node_spare(c, 4, 2), TP_EINVAL, tp_cluster_errmsg(c),
	              "spare 2 is not 0 or 1");
	TP_ASSERT_ERR(tp_cluster_set_node_spare(c, 0, 1), TP_EEXIST, tp_cluster_errmsg(c),
	              "spare.node block0-rack0-node0: device block0-rack0-node0/0 is held by job 'j'");
	TP_ASSERT_ERR(tp_cluster_set_node_spare(c, 1, 1), TP_EBUSY, tp_cluster_errmsg(c),
	              "spare.node block0-rack0-node1: device block0-rack0-node1/0 is cordoned");
	TP_ASSERT_ERR(tp_cluster_set_node_spare(c, 2, 1), TP_EBUSY, tp_cluster_errmsg(c),
	              "spare.node block0-rack0-node2: device block0-rack0-node2/3 is down");
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	cr_assert_eq(tp_cluster_node_is_spare(c, 99), TP_EINVAL);
	cr_assert_eq(tp_cluster_set_spares(NULL, 1, 1, 0), TP_EINVAL);
	cr_assert_eq(tp_cluster_spare_policy(NULL, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_spare_count(c, 7, 0), 0);
	cr_assert_eq(tp_cluster_spare_total_count(NULL), 0);
	/* the policy skips the held, cordoned and down nodes: none of 0, 1, 2 */
	cr_assert_eq(tp_cluster_set_spares(c, 1, 18, 0), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_spare_total_count(c), 15);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, savepoints_undo_every_mark)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_set_node_spare(c, 4, 1), 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 3, 0), 0);
	set_node_down(c, 17, 1);
	job_nodes(c, "a", 0, 10, NULL);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert_eq(tp_cluster_set_node_spare(c, 20, 1), 0);
	assert_consistent(c);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	cr_assert_eq(tp_cluster_spare_total_count(c), 1);
	cr_assert_eq(tp_cluster_node_is_spare(c, 4), 1);
	unsigned k;
	cr_assert_eq(tp_cluster_spare_policy(c, NULL, &k), 0);
	cr_assert_eq(k, 0, "the policy is undone too");
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, out_of_memory_leaves_state_unchanged)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0); /* the undo log allocates */
	uint64_t fp = tp_cluster_fingerprint(c);
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 100; n++) {
		tp_test_alloc_fail_at(n);
		rc = tp_cluster_set_spares(c, 1, 2, 0);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "failed call %ld changed the state", n);
			cr_assert(strstr(tp_cluster_errmsg(c), "out of memory setting 2 spares per rack"));
		}
	}
	cr_assert_eq(rc, 0);
	cr_assert_eq(tp_cluster_spare_total_count(c), 4);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, replace_takes_the_spare_of_the_failed_nodes_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 32;
	shape.group_size = 4;
	shape.required = "rack";
	job_nodes(c, "j", 0, 8, &shape); /* rack 0 keeps 8 free nodes besides its spares */
	cr_assert_eq(tp_cluster_set_spares(c, 1, 2, 0), 0);
	uint32_t failed[4];
	node_devs(3, failed);
	cr_assert_eq(tp_cluster_set_down(c, failed, 4, 1), 0);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "j", failed, 4, &p), 0, "%s", tp_placement_errmsg(p));
	uint32_t used = TP_NONE;
	for (size_t i = 0; i < 4; i++) {
		uint32_t f, r;
		cr_assert_eq(tp_placement_replaced(p, i, &f, &r), 0);
		uint32_t node = tp_topology_device_node(t, r);
		cr_assert_eq(tp_cluster_node_is_spare(c, node), 1, "replacement %u is not a spare", r);
		cr_assert(node >= 16 && node < 18, "the spare is not in rack 0: node %u", node);
		cr_assert(used == TP_NONE || used == node, "the group left one node");
		used = node;
	}
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	/* the spare was taken: the rack marks its next free node */
	cr_assert_eq(tp_cluster_node_is_spare(c, used), 0);
	cr_assert_eq(tp_cluster_spare_count(c, 1, 0), 2);
	cr_assert_eq(tp_cluster_node_is_spare(c, 15), 1);
	assert_consistent(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(spares, replace_falls_back_to_free_nodes)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 32;
	shape.group_size = 4;
	shape.required = "rack";
	job_nodes(c, "j", 0, 8, &shape);
	/* the only spare is in rack 1: the job may not leave rack 0 */
	cr_assert_eq(tp_cluster_set_node_spare(c, 30, 1), 0);
	uint32_t failed[4];
	node_devs(2, failed);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "j", failed, 4, &p), 0, "%s", tp_placement_errmsg(p));
	uint32_t f, r;
	cr_assert_eq(tp_placement_replaced(p, 0, &f, &r), 0);
	cr_assert(tp_topology_device_node(t, r) < 18, "the replacement left rack 0");
	cr_assert_eq(tp_cluster_node_is_spare(c, tp_topology_device_node(t, r)), 0);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Spares count as a cordon does: a request that only spares could hold is infeasible. */
Test(spares, a_request_only_spares_could_hold_is_infeasible)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 1, 0), 0);
	tp_request r = TP_REQUEST_INIT;
	r.id = "rack";
	r.count = 72;
	r.group_size = 4;
	r.required = "rack";
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p), "infeasible");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_set_spares(c, 1, 0, 0), 0);
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Random changes under a policy: after each, the state is consistent (tp_cluster_check
 * recounts the spare marks and counts), every policy domain has k spares or no eligible node
 * left, and a rollback gives back the fingerprint the savepoint saw. */
Test(spares, random_changes_keep_the_policy)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(3);
	tp_cluster *c = tp_test_cluster(t);
	uint64_t seed = 15;
	cr_assert_eq(tp_cluster_set_spares(c, 1, 2, 0), 0);
	unsigned njobs = 0;
	for (int step = 0; step < 600; step++) {
		size_t sp = 0;
		bool open = tp_test_below(&seed, 8) == 0;
		uint64_t fp = tp_cluster_fingerprint(c);
		if (open)
			cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
		uint32_t node = tp_test_below(&seed, 54), d[4];
		for (uint32_t i = 0; i < 4; i++)
			d[i] = 4 * node + i;
		char id[16];
		switch (tp_test_below(&seed, 5)) {
		case 0:
		case 1: {
			snprintf(id, sizeof id, "j%u", njobs);
			uint32_t n = 1 + tp_test_below(&seed, 4);
			bool held = false;
			for (uint32_t i = 0; i < n; i++)
				held |= tp_cluster_device_state(c, d[i], NULL) == TP_DEVICE_HELD;
			if (!held && tp_cluster_assign(c, id, d, n, NULL) == 0)
				njobs++;
			break;
		}
		case 2:
			snprintf(id, sizeof id, "j%u", tp_test_below(&seed, njobs ? njobs : 1));
			(void)tp_cluster_release(c, id);
			break;
		case 3:
			cr_assert_eq(tp_cluster_set_down(c, d, 4, (int)tp_test_below(&seed, 2)), 0);
			break;
		default:
			cr_assert_eq(tp_cluster_set_spares(c, 1, tp_test_below(&seed, 4), 0), 0);
			break;
		}
		assert_consistent(c);
		unsigned k;
		cr_assert_eq(tp_cluster_spare_policy(c, NULL, &k), 0);
		for (uint32_t r = 0; r < 3; r++) {
			uint32_t eligible = 0;
			for (uint32_t x = 18 * r; x < 18 * r + 18; x++)
				eligible += tp_cluster_free_count(c, 2, x) == 4 || tp_cluster_node_is_spare(c, x);
			uint32_t want = k < eligible ? k : eligible;
			cr_assert_geq(tp_cluster_spare_count(c, 1, r), want,
			              "step %d: rack %u has %u spares of %u", step, r,
			              tp_cluster_spare_count(c, 1, r), k);
		}
		if (open) {
			cr_assert_eq(tp_cluster_rollback(c, sp), 0, "%s", tp_cluster_errmsg(c));
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "step %d: rollback", step);
			assert_consistent(c);
		}
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
