/* SPDX-License-Identifier: MIT */
/* Spread caps over a service's replicas (tp_cluster_set_service_caps, tp_request.service):
 * counted over the service's running jobs, kept as it scales out, undone by savepoints. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static void init(void)
{
	tp_test_alloc_reset();
}

TestSuite(service, .init = init);

static tp_topology *nvl72(unsigned racks)
{
	tp_topology *t;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, racks, &tp_test_allocator), 0);
	return t;
}

/* One replica of `service`: 8 GPUs (two trays) in one rack. */
static tp_request replica(const char *id, const char *service)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.count = 8;
	r.required = "rack";
	r.job_class = TP_CLASS_INFERENCE;
	r.service = service;
	return r;
}

/* Place and commit one replica: the placement's code. */
static int add_replica(tp_cluster *c, const char *service, unsigned i)
{
	char id[64];
	snprintf(id, sizeof id, "%s-%u", service, i);
	tp_request r = replica(id, service);
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc == 0)
		cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	return rc;
}

static uint32_t in_rack(const tp_cluster *c, const char *service, uint32_t rack)
{
	uint32_t n;
	cr_assert_eq(tp_cluster_service_replicas(c, service, 1, rack, &n), 0);
	return n;
}

static uint32_t replicas(const tp_cluster *c, const char *service)
{
	uint32_t n;
	cr_assert_eq(tp_cluster_service_replicas(c, service, 0, TP_NONE, &n), 0);
	return n;
}

/* At most one replica per rack: four replicas land in four racks; a fifth is busy and its
 * message names the cap; releasing one makes room in its rack. */
Test(service, one_per_rack)
{
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "rack";
	caps.max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(add_replica(c, "web", i), 0, "replica %u", i);
	for (uint32_t r = 0; r < 4; r++)
		cr_assert_eq(in_rack(c, "web", r), 1, "rack %u", r);
	cr_assert_eq(replicas(c, "web"), 4);
	tp_request r = replica("web-4", "web");
	tp_placement *p;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EBUSY, tp_placement_errmsg(p),
	              "busy: 256 matching devices are free, 0 of them outside the domains where "
	              "service web is at its cap, the request needs 8; service web keeps out of 4 "
	              "racks at its cap of 1 replica per rack (tp_cluster_set_service_caps)");
	tp_placement_destroy(p);
	/* another service, and a job with no service, are not held back */
	cr_assert_eq(add_replica(c, "batch", 0), 0);
	r = replica("free", NULL);
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	/* web-2 goes: its rack takes the next replica */
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "web-2", &devs, &n), 0);
	uint32_t rack = tp_topology_node_domain(t, tp_topology_device_node(t, devs[0]), 1);
	cr_assert_eq(tp_cluster_release(c, "web-2"), 0);
	cr_assert_eq(in_rack(c, "web", rack), 0);
	cr_assert_eq(replicas(c, "web"), 3);
	cr_assert_eq(add_replica(c, "web", 4), 0);
	cr_assert_eq(tp_cluster_job_devices(c, "web-4", &devs, &n), 0);
	cr_assert_eq(tp_topology_node_domain(t, tp_topology_device_node(t, devs[0]), 1), rack);
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* At most 50%: scaling out from 1 to 16 replicas on 4 racks, after every step no rack holds
 * more than max(1, floor(R / 2)) of the R replicas, and so the service survives a rack loss
 * with half its replicas or more once it has two. */
Test(service, percent_cap_holds_while_scaling_out)
{
	tp_topology *t = nvl72(4);
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "rack";
	caps.max_percent = 50;
	cr_assert_eq(tp_cluster_set_service_caps(c, "chat", &caps), 0);
	for (unsigned i = 0; i < 16; i++) {
		cr_assert_eq(add_replica(c, "chat", i), 0, "replica %u", i);
		uint32_t R = i + 1, most = 0;
		for (uint32_t r = 0; r < 4; r++)
			if (in_rack(c, "chat", r) > most)
				most = in_rack(c, "chat", r);
		uint32_t cap = R / 2 ? R / 2 : 1;
		cr_assert_leq(most, cap, "%u replicas: a rack holds %u", R, most);
	}
	/* 16 replicas of 8 GPUs fill 128 of 288; each rack at 4 = 50% of 16 would take a 17th
	 * only at floor(50% x 17) = 8: room again */
	cr_assert_eq(replicas(c, "chat"), 16);
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(c, "chat", &got), 0);
	cr_assert_str_eq(got.level, "rack");
	cr_assert_float_eq(got.max_percent, 50.0, 1e-12);
	cr_assert_eq(tp_cluster_service_caps(c, "none", &got), 0);
	cr_assert_null(got.level);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The caps and the counts are state: a rollback puts both back. */
Test(service, savepoints_undo_caps_and_counts)
{
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(add_replica(c, "web", 0), 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "rack";
	caps.max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	cr_assert_eq(add_replica(c, "web", 1), 0);
	cr_assert_eq(tp_cluster_release(c, "web-0"), 0);
	cr_assert_eq(replicas(c, "web"), 1);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	cr_assert_eq(replicas(c, "web"), 1);
	cr_assert_eq(in_rack(c, "web", 0) + in_rack(c, "web", 1), 1);
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), 0);
	cr_assert_null(got.level, "the caps set inside the savepoint are gone");
	/* without the cap two replicas may share a rack (best fit packs them) */
	cr_assert_eq(add_replica(c, "web", 1), 0);
	cr_assert_eq(in_rack(c, "web", 0) + in_rack(c, "web", 1), 2);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A job assigned with a shape that names the service counts; moving it (tp_replace and commit)
 * moves its count. */
Test(service, assign_and_replace_keep_the_counts)
{
	tp_topology *t = nvl72(2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = replica("a", "web");
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	uint32_t devs[8];
	for (uint32_t i = 0; i < 8; i++)
		devs[i] = 72 + i; /* rack 1 */
	cr_assert_eq(tp_cluster_assign(c, "a", devs, 8, &o), 0);
	cr_assert_eq(in_rack(c, "web", 1), 1);
	cr_assert_eq(in_rack(c, "web", 0), 0);
	uint32_t node;
	cr_assert_eq(tp_cluster_service_replicas(c, "web", 2, tp_topology_device_node(t, 72), &node),
	             0);
	cr_assert_eq(node, 1);
	/* the whole of rack 1 goes down: the replacement must leave it */
	uint32_t down[72];
	for (uint32_t i = 0; i < 72; i++)
		down[i] = 72 + i;
	cr_assert_eq(tp_cluster_set_down(c, down, 72, 1), 0);
	tp_placement *p;
	cr_assert_eq(tp_replace(c, "a", devs, 8, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	cr_assert_eq(in_rack(c, "web", 1), 0);
	cr_assert_eq(in_rack(c, "web", 0), 1);
	cr_assert_eq(replicas(c, "web"), 1);
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(service, bad_arguments)
{
	tp_topology *t = nvl72(1);
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "row";
	caps.max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(NULL, "web", &caps), TP_EINVAL);
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, NULL, &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "tp_cluster_set_service_caps: service is NULL");
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "", &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "service is empty");
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL,
	              tp_cluster_errmsg(c), "caps.level 'row' is not a level of the topology");
	caps.level = NULL;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL,
	              tp_cluster_errmsg(c), "caps.level is NULL but caps.max_per_domain is set");
	caps.level = "rack";
	caps.max_percent = 150;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL,
	              tp_cluster_errmsg(c), "caps.max_percent 150 is not in [0, 100]");
	caps.max_percent = 0;
	caps.version = 0;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL,
	              tp_cluster_errmsg(c), "caps.version 0 is not 1 or 2");
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), 0);
	cr_assert_null(got.level, "nothing was set");
	got.version = 0;
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), TP_EINVAL);
	uint32_t n;
	cr_assert_eq(tp_cluster_service_replicas(c, "web", 1, 5, &n), TP_EINVAL);
	cr_assert_eq(tp_cluster_service_replicas(c, "web", 9, 0, &n), TP_EINVAL);
	cr_assert_eq(tp_cluster_service_replicas(c, NULL, 0, TP_NONE, &n), TP_EINVAL);
	tp_request r = replica("x", "bad/name\n");
	tp_placement *p;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINVAL, tp_placement_errmsg(p), "request.service: ");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Every allocation of setting caps, assigning a replica and placing one can fail: ENOMEM,
 * nothing changed, the cluster still usable. */
Test(service, allocation_failures)
{
	tp_topology *t = nvl72(2);
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 100000; n++) {
		tp_test_alloc_reset();
		tp_cluster *c = tp_test_cluster(t);
		cr_assert_eq(add_replica(c, "old", 0), 0);
		uint64_t fp = tp_cluster_fingerprint(c);
		tp_test_alloc_fail_at(n);
		tp_service_caps caps = TP_SERVICE_CAPS_INIT;
		caps.level = "rack";
		caps.max_per_domain = 1;
		rc = tp_cluster_set_service_caps(c, "web", &caps);
		bool caps_set = rc == 0;
		tp_request r = replica("web-0", "web");
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.shape = &r;
		uint32_t devs[8] = {72, 73, 74, 75, 76, 77, 78, 79};
		if (rc == 0)
			rc = tp_cluster_assign(c, "web-0", devs, 8, &o);
		tp_placement *p = NULL;
		if (rc == 0) {
			r.id = "web-1";
			rc = tp_place(c, &r, &p);
		}
		tp_test_alloc_fail_at(-1);
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s %s", n, tp_err_name(rc),
		          tp_cluster_errmsg(c));
		if (rc == 0) {
			cr_assert_eq(tp_commit(c, p, NULL), 0);
			cr_assert_eq(in_rack(c, "web", 0), 1);
			cr_assert_eq(in_rack(c, "web", 1), 1);
		} else if (!caps_set) {
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "allocation %ld", n);
		} else if (replicas(c, "web") == 0) {
			cr_assert_neq(tp_cluster_fingerprint(c), fp, "the caps are part of the state");
		}
		tp_placement_destroy(p);
		char buf[256];
		cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
		tp_cluster_destroy(c);
	}
	cr_assert_eq(rc, 0);
	tp_test_alloc_reset();
	tp_topology_destroy(t);
}

/* A repair keeps to the caps too: a replica whose failed device must move out of its full rack
 * goes to a rack where the service has room, not to the tighter rack another replica holds. It
 * may still use the racks it holds, where it is already counted. */
static void assign_replica(tp_cluster *c, const char *id, uint32_t first)
{
	static tp_request shape;
	shape = (tp_request)TP_REQUEST_INIT;
	shape.count = 8;
	shape.job_class = TP_CLASS_INFERENCE;
	shape.service = "web";
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = TP_CLASS_INFERENCE;
	o.shape = &shape;
	uint32_t devs[8];
	for (uint32_t i = 0; i < 8; i++)
		devs[i] = first + i;
	cr_assert_eq(tp_cluster_assign(c, id, devs, 8, &o), 0, "%s", tp_cluster_errmsg(c));
}

Test(service, a_repair_keeps_to_the_caps)
{
	tp_topology *t = nvl72(3);
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "rack";
	caps.max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	assign_replica(c, "web-0", 0);  /* rack 0 */
	assign_replica(c, "web-1", 72); /* rack 1 */
	uint32_t fill[64];
	for (uint32_t i = 0; i < 64; i++)
		fill[i] = 8 + i; /* the rest of rack 0 */
	cr_assert_eq(tp_cluster_assign(c, "fill", fill, 64, NULL), 0, "%s", tp_cluster_errmsg(c));
	uint32_t failed = 0;
	cr_assert_eq(tp_cluster_set_down(c, &failed, 1, 1), 0);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "web-0", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n = 0;
	const uint32_t *devs = tp_placement_devices(p, &n);
	cr_assert_eq(n, 8);
	cr_assert(devs[0] >= 144, "the replacement of rank 0 lands in rack 2, not on device %u "
	          "(rack 1 holds web-1 and is at the cap)", devs[0]);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	for (uint32_t r = 0; r < 3; r++)
		cr_assert_leq(in_rack(c, "web", r), 1, "rack %u", r);
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	/* room in its own rack again: the repair may use either rack it holds (0 or 2), never
	 * web-1's */
	cr_assert_eq(tp_cluster_release(c, "fill"), 0);
	failed = 1; /* web-0's rank 1 is still on device 1 of rack 0 */
	cr_assert_eq(tp_cluster_set_down(c, &failed, 1, 1), 0);
	cr_assert_eq(tp_replace(c, "web-0", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	devs = tp_placement_devices(p, &n);
	cr_assert(devs[1] < 72 || devs[1] >= 144, "rank 1's replacement in rack 1 (device %u)",
	          devs[1]);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
