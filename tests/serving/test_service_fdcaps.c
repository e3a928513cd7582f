/* SPDX-License-Identifier: MIT */
/* A service's spread caps over a failure-domain kind (tp_service_caps version 2: fd_kind,
 * fd_max_per_domain, fd_max_percent): the replicas per power feed are counted incrementally,
 * copied, checked and undone like the tree's, and tp_place and tp_replace keep to them. */
#include <criterion/criterion.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"

static void init(void)
{
	tp_test_alloc_reset();
}

TestSuite(service_fd, .init = init);

/* 4 racks of 2 nodes of 4 GPUs; racks 0 and 1 on power feed "pdu-a", 2 and 3 on "pdu-b"
 * (feeds cross the racks: a rack cap alone may put two replicas on one feed). Device d is in
 * rack d / 8. */
static tp_topology *fed_racks(void)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	for (unsigned r = 0; r < 4; r++)
		for (unsigned n = 0; n < 2; n++) {
			char rack[16], node[16];
			snprintf(rack, sizeof rack, "r%u", r);
			snprintf(node, sizeof node, "r%un%u", r, n);
			const char *path[1] = {rack};
			cr_assert_eq(tp_topology_builder_add_node(b, node, path, 4, NULL), 0);
			cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", r < 2 ? "pdu-a" :
			             "pdu-b", node, -1), 0, "%s", tp_topology_builder_errmsg(b));
		}
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* One replica of `service`: 4 GPUs (a node). */
static tp_request replica(const char *id, const char *service)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.count = 4;
	r.required = "node";
	r.job_class = TP_CLASS_INFERENCE;
	r.service = service;
	return r;
}

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

static uint32_t on_feed(const tp_cluster *c, const char *service, uint32_t fd)
{
	uint32_t n;
	cr_assert_eq(tp_cluster_service_fd_replicas(c, service, 0, fd, &n), 0);
	return n;
}

/* The feed of a running job's first device. */
static uint32_t feed_of(const tp_cluster *c, const char *job)
{
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, job, &devs, &n), 0);
	return tp_topology_device_fd(tp_cluster_topology(c), 0, devs[0]);
}

static void check(const tp_cluster *c)
{
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

/* With one replica per rack only, best fit packs the second replica into rack 1, on the same
 * feed as rack 0; with the feed cap at 50% it goes to the other feed. */
Test(service_fd, the_feed_cap_moves_a_replica_the_rack_cap_allows)
{
	tp_topology *t = fed_racks();
	uint32_t a = tp_topology_device_fd(t, 0, 0), b = tp_topology_device_fd(t, 0, 16);
	cr_assert_str_eq(tp_topology_fd_name(t, 0, a), "pdu-a");
	for (int with_feeds = 0; with_feeds < 2; with_feeds++) {
		tp_cluster *c = tp_test_cluster(t);
		tp_service_caps caps = TP_SERVICE_CAPS_INIT;
		caps.level = "rack";
		caps.max_per_domain = 1;
		if (with_feeds) {
			caps.fd_kind = "power";
			caps.fd_max_percent = 50;
		}
		cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0, "%s",
		             tp_cluster_errmsg(c));
		cr_assert_eq(add_replica(c, "web", 0), 0);
		cr_assert_eq(add_replica(c, "web", 1), 0);
		bool apart = feed_of(c, "web-0") != feed_of(c, "web-1");
		cr_assert_eq(apart, with_feeds, "feeds %s: replicas on feeds %u and %u",
		             with_feeds ? "capped" : "not capped", feed_of(c, "web-0"),
		             feed_of(c, "web-1"));
		/* counted whether or not capped */
		cr_assert_eq(on_feed(c, "web", a) + on_feed(c, "web", b), 2);
		/* a third would make floor(50% x 3) = 1 a feed: only without the feed cap */
		cr_assert_eq(add_replica(c, "web", 2), with_feeds ? TP_EBUSY : 0);
		/* with the cap at 75%, floor(75% x 3) = 2 a feed */
		if (with_feeds) {
			caps.fd_max_percent = 75;
			cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
			cr_assert_eq(add_replica(c, "web", 2), 0);
		}
		uint32_t na = on_feed(c, "web", a), nb = on_feed(c, "web", b);
		cr_assert(na + nb == 3 && na <= 2 && nb <= 2, "feeds hold %u and %u", na, nb);
		check(c);
		tp_cluster_destroy(c);
	}
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* At the cap on both feeds a new replica is busy, and the message names the kind, the domain
 * and the figure; releasing a replica makes room on its feed. */
Test(service_fd, at_the_cap_the_message_names_the_feed)
{
	tp_topology *t = fed_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.fd_kind = "power";
	caps.fd_max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(add_replica(c, "web", 0), 0);
	cr_assert_eq(add_replica(c, "web", 1), 0);
	tp_request r = replica("web-2", "web");
	tp_placement *p;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EBUSY, tp_placement_errmsg(p),
	              "; service web keeps out of power 'pdu-a' and 1 more at its cap of 1 "
	              "replica per power (tp_cluster_set_service_caps, fd_kind)");
	tp_placement_destroy(p);
	caps.fd_max_per_domain = 0;
	caps.fd_max_percent = 50; /* floor(50% x 3) = 1 */
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	cr_assert_eq(tp_place(c, &r, &p), TP_EBUSY);
	tp_placement_destroy(p);
	uint32_t fd = feed_of(c, "web-1");
	cr_assert_eq(tp_cluster_release(c, "web-1"), 0);
	cr_assert_eq(add_replica(c, "web", 2), 0);
	cr_assert_eq(feed_of(c, "web-2"), fd);
	/* another service is not held back */
	cr_assert_eq(add_replica(c, "batch", 0), 0);
	check(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A repair keeps to the feed cap: the replica whose node fails may not move to the feed the
 * other replica holds, though that rack has room; it may stay on its own feed. */
Test(service_fd, a_repair_keeps_to_the_feed_cap)
{
	tp_topology *t = fed_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.fd_kind = "power";
	caps.fd_max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	tp_request shape = replica("x", "web");
	shape.required = NULL; /* a failed rank may leave its node */
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = TP_CLASS_INFERENCE;
	o.shape = &shape;
	uint32_t d0[4] = {0, 1, 2, 3}, d1[4] = {16, 17, 18, 19};
	cr_assert_eq(tp_cluster_assign(c, "web-0", d0, 4, &o), 0); /* pdu-a */
	cr_assert_eq(tp_cluster_assign(c, "web-1", d1, 4, &o), 0); /* pdu-b */
	uint32_t fill[8];
	for (uint32_t i = 0; i < 8; i++)
		fill[i] = 4 + i; /* the rest of rack 0 and node 0 of rack 1 */
	cr_assert_eq(tp_cluster_assign(c, "fill", fill, 8, NULL), 0);
	cr_assert_eq(tp_cluster_set_down(c, d0, 1, 1), 0);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "web-0", d0, 1, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	cr_assert(devs[0] >= 12 && devs[0] < 16, "rank 0's replacement on device %u: not the free "
	          "node of pdu-a (pdu-b is at the cap, though rack 2 is tighter)", devs[0]);
	uint32_t moved = devs[0];
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	uint32_t a = tp_topology_device_fd(t, 0, 0), b = tp_topology_device_fd(t, 0, 16);
	cr_assert_eq(on_feed(c, "web", a), 1);
	cr_assert_eq(on_feed(c, "web", b), 1);
	check(c);
	/* pdu-a full: the repair has nowhere to go and says the feed blocks */
	uint32_t more[3], nm = 0;
	for (uint32_t x = 12; x < 16; x++)
		if (x != moved)
			more[nm++] = x;
	cr_assert_eq(tp_cluster_assign(c, "fill2", more, nm, NULL), 0, "%s", tp_cluster_errmsg(c));
	uint32_t failed = moved;
	cr_assert_eq(tp_cluster_set_down(c, &failed, 1, 1), 0);
	TP_ASSERT_ERR(tp_replace(c, "web-0", &failed, 1, &p), TP_EBUSY, tp_placement_errmsg(p),
	              "service web keeps out of power 'pdu-b' at its cap of 1 replica per power");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The caps and the counts are state: a copy has them, a rollback puts the old ones back, and
 * the fingerprint sees them. */
Test(service_fd, copies_and_savepoints)
{
	tp_topology *t = fed_racks();
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(add_replica(c, "web", 0), 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.fd_kind = "power";
	caps.fd_max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	cr_assert_neq(tp_cluster_fingerprint(c), fp);
	cr_assert_eq(add_replica(c, "web", 1), 0);
	tp_cluster *d;
	cr_assert_eq(tp_cluster_copy(&d, c, &tp_test_allocator), 0);
	check(d);
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(d, "web", &got), 0);
	cr_assert_str_eq(got.fd_kind, "power");
	cr_assert_eq(got.fd_max_per_domain, 1);
	cr_assert_null(got.level);
	cr_assert_eq(tp_cluster_fingerprint(d), tp_cluster_fingerprint(c));
	uint32_t a = tp_topology_device_fd(t, 0, 0), b = tp_topology_device_fd(t, 0, 16);
	cr_assert_eq(on_feed(d, "web", a) + on_feed(d, "web", b), 2);
	cr_assert_eq(add_replica(d, "web", 2), TP_EBUSY, "the copy keeps to the caps");
	tp_cluster_destroy(d);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), 0);
	cr_assert_null(got.fd_kind);
	cr_assert_eq(on_feed(c, "web", a) + on_feed(c, "web", b), 1);
	check(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A version-1 caller (a struct without the fd_ fields) still sets and reads tree caps, and
 * nothing past its struct is read or written; setting with version 1 lifts the fd caps. */
typedef struct {
	unsigned version;
	const char *level;
	uint32_t max_per_domain;
	double max_percent;
} caps_v1;

Test(service_fd, version_1_callers)
{
	cr_assert_eq(sizeof(caps_v1), offsetof(tp_service_caps, fd_kind));
	tp_topology *t = fed_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps v2 = TP_SERVICE_CAPS_INIT;
	v2.fd_kind = "power";
	v2.fd_max_per_domain = 1;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &v2), 0);
	struct {
		caps_v1 caps;
		unsigned char guard[32];
	} old;
	memset(&old, 0xa5, sizeof old);
	cr_assert_eq(tp_service_caps_init((tp_service_caps *)&old.caps, 1), 0);
	cr_assert_eq(old.caps.version, 1);
	cr_assert_null(old.caps.level);
	for (size_t i = 0; i < sizeof old.guard; i++)
		cr_assert_eq(old.guard[i], 0xa5, "init wrote past a version-1 struct");
	cr_assert_eq(tp_cluster_service_caps(c, "web", (tp_service_caps *)&old.caps), 0);
	cr_assert_null(old.caps.level);
	for (size_t i = 0; i < sizeof old.guard; i++)
		cr_assert_eq(old.guard[i], 0xa5, "the query wrote past a version-1 struct");
	old.caps.level = "rack";
	old.caps.max_per_domain = 2;
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", (const tp_service_caps *)&old.caps), 0);
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), 0);
	cr_assert_str_eq(got.level, "rack");
	cr_assert_eq(got.max_per_domain, 2);
	cr_assert_null(got.fd_kind, "a version-1 struct has no fd caps: setting it lifts them");
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(add_replica(c, "web", i), 0, "replica %u", i);
	check(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(service_fd, bad_arguments)
{
	tp_topology *t = fed_racks();
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.fd_kind = "cooling";
	caps.fd_max_per_domain = 1;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "caps.fd_kind 'cooling' is not a failure-domain kind of the topology");
	caps.fd_kind = NULL;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "caps.fd_kind is NULL but caps.fd_max_per_domain is set: a cap counts over "
	              "the domains of a failure-domain kind");
	caps.fd_kind = "power";
	caps.fd_max_percent = -1;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "caps.fd_max_percent -1 is not in [0, 100]");
	caps.fd_max_percent = 0;
	caps.version = 3;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "caps.version 3 is not 1 or 2");
	tp_service_caps got = TP_SERVICE_CAPS_INIT;
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), 0);
	cr_assert_null(got.fd_kind, "nothing was set");
	got.version = 3;
	cr_assert_eq(tp_cluster_service_caps(c, "web", &got), TP_EINVAL);
	cr_assert_eq(tp_service_caps_init(&got, 3), TP_EINVAL);
	uint32_t n;
	cr_assert_eq(tp_cluster_service_fd_replicas(c, "web", 1, 0, &n), TP_EINVAL);
	cr_assert_eq(tp_cluster_service_fd_replicas(c, "web", 0, 2, &n), TP_EINVAL);
	cr_assert_eq(tp_cluster_service_fd_replicas(c, NULL, 0, 0, &n), TP_EINVAL);
	cr_assert_eq(tp_cluster_service_fd_replicas(c, "none", 0, 0, &n), 0);
	cr_assert_eq(n, 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Kinds past TP_SERVICE_FD_KINDS are not counted: caps on one are refused by name. */
Test(service_fd, a_kind_past_the_counted_ones)
{
	static const char *const levels[] = {"node"};
	tp_topology_builder *b;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 1, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "n0", NULL, 4, NULL), 0);
	for (unsigned k = 0; k <= TP_SERVICE_FD_KINDS; k++) {
		char kind[16];
		snprintf(kind, sizeof kind, "kind%u", k);
		cr_assert_eq(tp_topology_builder_add_failure_domain(b, kind, "d", "n0", -1), 0);
	}
	tp_topology *t;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.fd_kind = "kind8";
	caps.fd_max_per_domain = 1;
	TP_ASSERT_ERR(tp_cluster_set_service_caps(c, "web", &caps), TP_EINVAL, tp_cluster_errmsg(c),
	              "caps.fd_kind 'kind8' is kind 8 of the topology: a service's replicas are "
	              "counted in the first 8 kinds only");
	caps.fd_kind = "kind7";
	cr_assert_eq(tp_cluster_set_service_caps(c, "web", &caps), 0);
	cr_assert_eq(add_replica(c, "web", 0), 0);
	cr_assert_eq(add_replica(c, "web", 1), TP_EBUSY, "one node, one domain of kind7");
	check(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Every allocation of setting fd caps and assigning a replica can fail: ENOMEM, the cluster
 * consistent and usable. */
Test(service_fd, allocation_failures)
{
	tp_topology *t = fed_racks();
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 100000; n++) {
		tp_test_alloc_reset();
		tp_cluster *c = tp_test_cluster(t);
		tp_test_alloc_fail_at(n);
		tp_service_caps caps = TP_SERVICE_CAPS_INIT;
		caps.fd_kind = "power";
		caps.fd_max_per_domain = 1;
		rc = tp_cluster_set_service_caps(c, "web", &caps);
		tp_request r = replica("web-0", "web");
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.shape = &r;
		uint32_t devs[4] = {0, 1, 2, 3};
		if (rc == 0)
			rc = tp_cluster_assign(c, "web-0", devs, 4, &o);
		tp_placement *p = NULL;
		if (rc == 0) {
			r.id = "web-1";
			rc = tp_place(c, &r, &p);
		}
		tp_test_alloc_fail_at(-1);
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		if (rc == 0) {
			size_t nd;
			const uint32_t *d = tp_placement_devices(p, &nd);
			cr_assert_geq(d[0], 16, "the second replica on the other feed");
		}
		tp_placement_destroy(p);
		check(c);
		tp_cluster_destroy(c);
	}
	cr_assert_eq(rc, 0);
	tp_test_alloc_reset();
	tp_topology_destroy(t);
}
