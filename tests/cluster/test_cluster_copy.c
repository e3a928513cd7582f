/* SPDX-License-Identifier: MIT */
/*
 * tp_cluster_copy: a copy equals its source in every figure, is independent of it afterwards,
 * has an identity of its own (placements do not cross) and keeps its lineage (plans do).
 */
#include <stdio.h>

#include "testutil.h"

/* 2 SUs x 2 HGX nodes: a migratable 2-GPU job on every node, one down and one cordoned
 * device, one spare per SU. */
static tp_cluster *busy_state(tp_topology **t)
{
	cr_assert_eq(tp_topology_generate_hgx(t, 2, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(*t);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	o.checkpoint_s = 30;
	o.tenant = "blue";
	for (uint32_t k = 0; k < 3; k++) {
		char id[8];
		uint32_t d[2] = {8 * k, 8 * k + 1};
		snprintf(id, sizeof id, "j%u", k);
		cr_assert_eq(tp_cluster_assign(c, id, d, 2, &o), 0, "%s", tp_cluster_errmsg(c));
	}
	/* a released job leaves a slot moved and a tombstone in the id map */
	cr_assert_eq(tp_cluster_release(c, "j0"), 0);
	uint32_t down = 5, cordoned = 13;
	cr_assert_eq(tp_cluster_set_down(c, &down, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_cordoned(c, &cordoned, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_spares(c, 0, 1, 0), 0, "%s", tp_cluster_errmsg(c));
	return c;
}

/* A 2-GPU job "shaped" on GPUs 2-3 of the last node, with a shape and a priority. */
static void add_shaped(tp_cluster *c, const tp_request *shape, int priority)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = shape;
	o.priority = priority;
	uint32_t devs[] = {26, 27};
	cr_assert_eq(tp_cluster_assign(c, "shaped", devs, 2, &o), 0, "%s", tp_cluster_errmsg(c));
}

static void destroy_all(tp_cluster *c, tp_cluster *d, tp_topology *t)
{
	tp_cluster_destroy(d);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

static void assert_same_state(const tp_cluster *a, const tp_cluster *b)
{
	const tp_topology *t = tp_cluster_topology(a);
	cr_assert_eq(tp_cluster_topology(b), t);
	cr_assert_eq(tp_cluster_fingerprint(a), tp_cluster_fingerprint(b));
	char buf[128];
	cr_assert_eq(tp_cluster_check(b, buf, sizeof buf), 0, "%s", buf);
	cr_assert_eq(tp_cluster_job_count(a), tp_cluster_job_count(b));
	for (size_t i = 0; i < tp_cluster_job_count(a); i++)
		cr_assert_str_eq(tp_cluster_job_at(a, i), tp_cluster_job_at(b, i), "job slot %zu", i);
	for (uint32_t d = 0; d < tp_topology_device_count(t); d++)
		cr_assert_eq(tp_cluster_device_state(a, d, NULL), tp_cluster_device_state(b, d, NULL),
		             "device %u", d);
	cr_assert_eq(tp_cluster_free_total_count(a), tp_cluster_free_total_count(b));
	cr_assert_eq(tp_cluster_spare_total_count(a), tp_cluster_spare_total_count(b));
	cr_assert_eq(tp_cluster_free_node_count(a, 0, 1), tp_cluster_free_node_count(b, 0, 1));
}

Test(cluster_copy, copy_equals_its_source_and_is_independent)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	tp_cluster *c = busy_state(&t), *d = NULL;
	cr_assert_eq(tp_cluster_copy(&d, c, NULL), 0);
	assert_same_state(c, d);
	/* the copy answers a placement as its source does */
	tp_request r = TP_REQUEST_INIT;
	r.id = "n";
	r.count = 4;
	r.required = "node";
	tp_placement *pc = NULL, *pd = NULL;
	cr_assert_eq(tp_place(c, &r, &pc), 0, "%s", tp_placement_errmsg(pc));
	cr_assert_eq(tp_place(d, &r, &pd), 0, "%s", tp_placement_errmsg(pd));
	size_t nc = 0, nd = 0;
	const uint32_t *dc = tp_placement_devices(pc, &nc), *dd = tp_placement_devices(pd, &nd);
	cr_assert(nc == 4 && nd == 4 && memcmp(dc, dd, 4 * sizeof *dc) == 0);
	/* a placement belongs to its own cluster: identities differ */
	TP_ASSERT_ERR(tp_commit(d, pc, NULL), TP_EINVAL, tp_cluster_errmsg(d),
	              "the placement was made on another cluster");
	uint64_t fp = tp_cluster_fingerprint(c);
	cr_assert_eq(tp_commit(d, pd, NULL), 0, "%s", tp_cluster_errmsg(d));
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "a change of the copy reached its source");
	cr_assert_neq(tp_cluster_fingerprint(d), fp);
	cr_assert_eq(tp_cluster_release(d, "j1"), 0);
	const uint32_t *jd = NULL;
	size_t jn = 0;
	cr_assert_eq(tp_cluster_job_devices(c, "j1", &jd, &jn), 0, "the source keeps job j1");
	tp_placement_destroy(pc);
	tp_placement_destroy(pd);
	destroy_all(c, d, t);
}

/* Jobs keep their options, shapes and NICs in the copy. */
Test(cluster_copy, jobs_keep_options_shapes_and_nics)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	tp_cluster *c = busy_state(&t), *d = NULL;
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.required = "node";
	add_shaped(c, &shape, 7);
	uint32_t devs[] = {26, 27};
	cr_assert_eq(tp_cluster_copy(&d, c, &tp_test_allocator), 0);
	assert_same_state(c, d);
	tp_job_options a = TP_JOB_OPTIONS_INIT, b = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "shaped", &a), 0);
	cr_assert_eq(tp_cluster_job_options(d, "shaped", &b), 0);
	cr_assert_eq(a.priority, 7);
	cr_assert_eq(b.priority, 7);
	cr_assert(b.shape && b.shape != a.shape && b.shape->count == 2, "the shape is copied");
	cr_assert_str_eq(b.shape->required, "node");
	cr_assert_eq(tp_cluster_job_options(d, "j1", &b), 0);
	cr_assert_str_eq(b.tenant, "blue");
	cr_assert_eq(b.checkpoint_s, 30);
	/* the source's replacement of a shaped job and the copy's agree */
	tp_placement *pc = NULL, *pd = NULL;
	cr_assert_eq(tp_replace(c, "shaped", devs, 1, &pc), 0, "%s", tp_placement_errmsg(pc));
	cr_assert_eq(tp_replace(d, "shaped", devs, 1, &pd), 0, "%s", tp_placement_errmsg(pd));
	size_t nc = 0, nd = 0;
	const uint32_t *dc = tp_placement_devices(pc, &nc), *dd = tp_placement_devices(pd, &nd);
	cr_assert(nc == 2 && nd == 2 && memcmp(dc, dd, 2 * sizeof *dc) == 0);
	tp_placement_destroy(pc);
	tp_placement_destroy(pd);
	destroy_all(c, d, t);
}

static tp_plan *whole_node_plan(tp_cluster *c)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = "whole";
	r.count = 8;
	r.required = "node";
	tp_plan *p = NULL;
	cr_assert_eq(tp_defrag_plan(c, &r, NULL, &p), 0, "%s", tp_plan_errmsg(p));
	cr_assert_gt(tp_plan_step_count(p), 1, "the plan moves a job");
	return p;
}

static void apply_all(tp_cluster *c, const tp_plan *p)
{
	for (size_t i = 0; i < tp_plan_step_count(p); i++)
		cr_assert_eq(tp_plan_apply_step(c, p, i, NULL), 0, "step %zu: %s", i,
		             tp_cluster_errmsg(c));
	char buf[128];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

/* A plan made on a cluster applies to its copies, to copies of copies, and the other way
 * round (they share one lineage); never to a cluster built to the same state on its own. */
Test(cluster_copy, plans_follow_the_lineage)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	tp_cluster *c = busy_state(&t), *d = NULL, *e = NULL, *other;
	cr_assert_eq(tp_cluster_copy(&d, c, NULL), 0);
	cr_assert_eq(tp_cluster_copy(&e, d, NULL), 0);
	/* the same state built on its own, on the same topology */
	other = tp_test_cluster(t);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	o.checkpoint_s = 30;
	o.tenant = "blue";
	uint32_t j2[] = {16, 17}, j1[] = {8, 9}, down = 5, cordoned = 13;
	cr_assert_eq(tp_cluster_assign(other, "j2", j2, 2, &o), 0);
	cr_assert_eq(tp_cluster_assign(other, "j1", j1, 2, &o), 0);
	cr_assert_eq(tp_cluster_set_down(other, &down, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_cordoned(other, &cordoned, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_spares(other, 0, 1, 0), 0);
	cr_assert_eq(tp_cluster_fingerprint(other), tp_cluster_fingerprint(c),
	             "built to the same state");
	tp_plan *p = whole_node_plan(c);
	uint64_t fp = tp_cluster_fingerprint(other);
	TP_ASSERT_ERR(tp_plan_apply_step(other, p, 0, NULL), TP_EINVAL, tp_cluster_errmsg(other),
	              "the plan was made on another cluster");
	cr_assert_eq(tp_cluster_fingerprint(other), fp, "a refused step changed the state");
	apply_all(e, p); /* a copy of a copy */
	apply_all(d, p);
	cr_assert_eq(tp_cluster_fingerprint(d), tp_cluster_fingerprint(e));
	tp_plan *q = whole_node_plan(other);
	TP_ASSERT_ERR(tp_plan_apply_step(c, q, 0, NULL), TP_EINVAL, tp_cluster_errmsg(c),
	              "the plan was made on another cluster");
	tp_plan_destroy(q);
	/* a plan made on a copy applies to its source */
	tp_cluster *f = NULL;
	cr_assert_eq(tp_cluster_copy(&f, c, NULL), 0);
	q = whole_node_plan(f);
	apply_all(c, q);
	tp_plan_destroy(q);
	tp_plan_destroy(p);
	tp_cluster_destroy(f);
	tp_cluster_destroy(other);
	tp_cluster_destroy(e);
	destroy_all(c, d, t);
}

Test(cluster_copy, bad_arguments)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	tp_cluster *c = busy_state(&t), *d = (tp_cluster *)1;
	tp_allocator half = {NULL, NULL, NULL, NULL, NULL};
	cr_assert_eq(tp_cluster_copy(NULL, c, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_copy(&d, NULL, NULL), TP_EINVAL);
	cr_assert_null(d, "a failed copy sets *out to NULL");
	cr_assert_eq(tp_cluster_copy(&d, c, &half), TP_EINVAL);
	cr_assert_null(d);
	destroy_all(c, NULL, t);
}

/* Fail each allocation of the copy in turn: ENOMEM, no leak, the source untouched. */
Test(cluster_copy, allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	tp_cluster *c = busy_state(&t), *d = NULL;
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.gpu_nic_pairs = 1;
	add_shaped(c, &shape, 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	long live = tp_test_alloc_state.live;
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM; n++) {
		cr_assert(n < 10000, "no end to the allocations");
		tp_test_alloc_fail_at(n);
		rc = tp_cluster_copy(&d, c, NULL);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			cr_assert_null(d);
			cr_assert_eq(tp_test_alloc_state.live, live, "failure %ld leaked", n);
		}
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
	}
	cr_assert_eq(rc, 0);
	assert_same_state(c, d);
	destroy_all(c, d, t);
}

/* A copy keeps what the newer state holds: a service's caps and replica counts, and the NVLink
 * partitions (policy, each node's partition, the channels taken). */
Test(cluster_copy, keeps_service_caps_and_nvlink_partitions)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t), *d = NULL;
	cr_assert_eq(tp_cluster_set_partitions(c, 1, 16), 0, "%s", tp_cluster_errmsg(c));
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "rack";
	caps.max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0, "%s", tp_cluster_errmsg(c));
	tp_request r = TP_REQUEST_INIT;
	r.id = "web-0";
	r.count = 8; /* two nodes of one rack: a partition */
	r.service = "web";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_copy(&d, c, NULL), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), tp_cluster_fingerprint(d));
	char buf[256];
	cr_assert_eq(tp_cluster_check(d, buf, sizeof buf), 0, "%s", buf);
	int level = -2;
	uint32_t ch = 0;
	cr_assert_eq(tp_cluster_partition_policy(d, &level, &ch), 0);
	cr_assert(level == 1 && ch == 16);
	const char *job = NULL;
	cr_assert_eq(tp_cluster_node_partition(d, 0, &job, &ch), 0, "node 0 is in web-0's partition");
	cr_assert_str_eq(job, "web-0");
	cr_assert_eq(ch, 0);
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(d, "web", &got), 0);
	cr_assert(got.max_per_domain == 1 && got.level && !strcmp(got.level, "rack"));
	uint32_t n = 0;
	cr_assert_eq(tp_cluster_service_replicas(d, "web", 0, TP_NONE, &n), 0);
	cr_assert_eq(n, 1);
	/* the copy keeps to the caps: a second replica goes to the other rack, and takes its
	 * rack's first channel */
	r.id = "web-1";
	cr_assert_eq(tp_place(d, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t nd = 0;
	const uint32_t *devs = tp_placement_devices(p, &nd);
	cr_assert(nd == 8 && devs[0] >= 72, "web-1 lands in rack 1, not on device %u", devs[0]);
	cr_assert_eq(tp_commit(d, p, NULL), 0, "%s", tp_cluster_errmsg(d));
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_check(d, buf, sizeof buf), 0, "%s", buf);
	cr_assert_eq(tp_cluster_service_replicas(c, "web", 0, TP_NONE, &n), 0);
	cr_assert_eq(n, 1, "the source still counts one replica");
	destroy_all(c, d, t);
}
