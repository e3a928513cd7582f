/* SPDX-License-Identifier: MIT */
/* Prefill/decode groups (tp_pd_place): locality, spread with a cap, the pairing, scaling out
 * and repair after a rack goes down. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-sizing.h"

static void init(void)
{
	tp_test_alloc_reset();
}

TestSuite(pd, .init = init);

/* 8 NVL72 racks in one block: 18 trays of 4 GB200 each. */
static tp_topology *nvl72_racks(unsigned racks)
{
	tp_topology *t;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, racks, &tp_test_allocator), 0);
	return t;
}

/* A service: 2 prefill instances of 4 GPUs and 4 decode instances of 8 (two trays), each group
 * inside one rack, one group per rack. */
static tp_pd_request service(unsigned groups)
{
	tp_pd_request r = TP_PD_REQUEST_INIT;
	r.service = "chat";
	r.tenant = "t1";
	r.groups = groups;
	r.prefill = 2;
	r.prefill_devices = 4;
	r.decode = 4;
	r.decode_devices = 8;
	r.instance_level = "rack";
	r.locality = "rack";
	r.spread_level = "rack";
	r.max_per_domain = 1;
	return r;
}

static uint32_t rack_of(const tp_topology *t, uint32_t dev)
{
	return tp_topology_node_domain(t, tp_topology_device_node(t, dev), 1);
}

/* Every group's instances in one rack, groups in distinct racks; each decode instance paired
 * with a prefill instance of its group, the two prefill instances serving two each. */
static void check_groups(const tp_topology *t, const tp_cluster *c, unsigned groups)
{
	uint32_t seen[64];
	for (unsigned g = 0; g < groups; g++) {
		uint32_t rack = TP_NONE;
		for (int side = 0; side < 2; side++)
			for (unsigned i = 0; i < (side ? 4u : 2u); i++) {
				char name[64];
				snprintf(name, sizeof name, "chat/g%u/%c%u", g, side ? 'd' : 'p', i);
				const uint32_t *devs;
				size_t n;
				cr_assert_eq(tp_cluster_job_devices(c, name, &devs, &n), 0, "%s", name);
				cr_assert_eq(n, side ? 8u : 4u);
				for (size_t k = 0; k < n; k++) {
					if (rack == TP_NONE)
						rack = rack_of(t, devs[k]);
					cr_assert_eq(rack_of(t, devs[k]), rack, "%s leaves its group's rack",
					             name);
				}
			}
		for (unsigned h = 0; h < g; h++)
			cr_assert_neq(seen[h], rack, "groups %u and %u share a rack", h, g);
		seen[g] = rack;
	}
}

static void check_pairing(const tp_pd_result *res)
{
	unsigned served[64][2] = {{0}};
	for (size_t i = 0; i < tp_pd_result_count(res); i++) {
		const tp_pd_instance *x = tp_pd_result_get(res, i);
		if (!x->prefill) {
			cr_assert_lt(x->pair, 2);
			served[x->group][x->pair]++;
		}
	}
	for (size_t i = 0; i < tp_pd_result_count(res); i++) {
		const tp_pd_instance *x = tp_pd_result_get(res, i);
		if (x->prefill)
			cr_assert_eq(x->pair, served[x->group][x->index], "%s", x->job);
		if (x->prefill)
			cr_assert_eq(x->pair, 2, "%s serves %u decode instances", x->job, x->pair);
	}
}

Test(pd, four_groups_one_per_rack_then_six_then_repair)
{
	tp_topology *t = nvl72_racks(8);
	tp_cluster *c = tp_test_cluster(t);
	tp_pd_request r = service(4);
	tp_pd_result *res;
	cr_assert_eq(tp_pd_place(c, &r, &res), 0, "%s", tp_pd_result_errmsg(res));
	cr_assert_eq(tp_pd_result_count(res), 4 * 6);
	check_groups(t, c, 4);
	check_pairing(res);
	tp_pd_result_destroy(res);
	/* Again with 4: nothing to do. */
	cr_assert_eq(tp_pd_place(c, &r, &res), 0);
	cr_assert_eq(tp_pd_result_count(res), 0);
	tp_pd_result_destroy(res);
	/* Scale out to 6: two more groups, in two more racks, the ratio kept. */
	r.groups = 6;
	cr_assert_eq(tp_pd_place(c, &r, &res), 0, "%s", tp_pd_result_errmsg(res));
	cr_assert_eq(tp_pd_result_count(res), 2 * 6);
	for (size_t i = 0; i < tp_pd_result_count(res); i++)
		cr_assert_geq(tp_pd_result_get(res, i)->group, 4);
	check_groups(t, c, 6);
	check_pairing(res);
	tp_pd_result_destroy(res);
	/* The rack of group 1 goes down: release the groups it hit, place them again. */
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "chat/g1/p0", &devs, &n), 0);
	uint32_t rack = rack_of(t, devs[0]), first, nd;
	cr_assert_eq(tp_topology_domain_devices(t, 1, rack, &first, &nd), 0);
	uint32_t down[72];
	for (uint32_t i = 0; i < nd; i++)
		down[i] = first + i;
	cr_assert_eq(tp_cluster_set_down(c, down, nd, 1), 0);
	unsigned released = 0;
	cr_assert_eq(tp_pd_release_failed(c, "chat", 6, &released), 0);
	cr_assert_eq(released, 1);
	cr_assert_eq(tp_pd_place(c, &r, &res), 0, "%s", tp_pd_result_errmsg(res));
	cr_assert_eq(tp_pd_result_count(res), 6);
	cr_assert_eq(tp_pd_result_get(res, 0)->group, 1);
	check_groups(t, c, 6);
	cr_assert_eq(tp_cluster_job_devices(c, "chat/g1/p0", &devs, &n), 0);
	cr_assert_neq(rack_of(t, devs[0]), rack);
	tp_pd_result_destroy(res);
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A ninth group on eight racks breaks the cap: nothing is assigned, the message says why. */
Test(pd, all_or_nothing_at_the_cap)
{
	tp_topology *t = nvl72_racks(8);
	tp_cluster *c = tp_test_cluster(t);
	tp_pd_request r = service(9);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_pd_result *res;
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EBUSY, tp_pd_result_errmsg(res),
	              "group 8: every rack holds 1 groups of service chat (request.max_per_domain)");
	cr_assert_eq(tp_pd_result_count(res), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	cr_assert_eq(tp_cluster_job_count(c), 0);
	tp_pd_result_destroy(res);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Racks busy enough that no group fits: the code and the last rack's reason. */
Test(pd, no_rack_has_room)
{
	tp_topology *t = nvl72_racks(2);
	tp_cluster *c = tp_test_cluster(t);
	for (uint32_t rack = 0; rack < 2; rack++) {
		uint32_t d[40];
		for (uint32_t i = 0; i < 40; i++)
			d[i] = rack * 72 + i;
		char id[16];
		snprintf(id, sizeof id, "busy%u", rack);
		cr_assert_eq(tp_cluster_assign(c, id, d, 40, NULL), 0);
	}
	tp_pd_request r = service(1);
	tp_pd_result *res;
	int rc = tp_pd_place(c, &r, &res);
	cr_assert(rc == TP_EBUSY || rc == TP_EFRAGMENTED, "%s", tp_err_name(rc));
	cr_assert(strstr(tp_pd_result_errmsg(res), "group 0 of service chat fits no rack (2 tried; "
	                 "the last, block0/rack1: decode: "), "%s", tp_pd_result_errmsg(res));
	cr_assert_eq(tp_cluster_job_count(c), 2);
	tp_pd_result_destroy(res);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(pd, bad_requests)
{
	tp_topology *t = nvl72_racks(1);
	tp_cluster *c = tp_test_cluster(t);
	tp_pd_result *res;
	cr_assert_eq(tp_pd_place(c, NULL, NULL), TP_EINVAL);
	TP_ASSERT_ERR(tp_pd_place(NULL, NULL, &res), TP_EINVAL, tp_pd_result_errmsg(res),
	              "the cluster is NULL");
	tp_pd_result_destroy(res);
	tp_pd_request r = service(1);
	r.version = 9;
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EINVAL, tp_pd_result_errmsg(res),
	              "request.version 9 is not 1 or 2");
	tp_pd_result_destroy(res);
	r = service(1);
	r.service = "";
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EINVAL, tp_pd_result_errmsg(res),
	              "request.service is empty");
	tp_pd_result_destroy(res);
	r = service(1);
	r.decode = 0;
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EINVAL, tp_pd_result_errmsg(res),
	              "request.decode 0 is outside 1 to 2^20");
	tp_pd_result_destroy(res);
	r = service(1);
	r.locality = "row";
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EINVAL, tp_pd_result_errmsg(res),
	              "request.locality 'row' is not a level of the topology");
	tp_pd_result_destroy(res);
	cr_assert_eq(tp_pd_release_failed(c, NULL, 1, NULL), TP_EINVAL);
	cr_assert(strstr(tp_cluster_errmsg(c), "service is NULL"));
	cr_assert_eq(tp_cluster_job_count(c), 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(pd, allocation_failures)
{
	tp_topology *t = nvl72_racks(4);
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM && n < 100000; n++) {
		tp_test_alloc_reset();
		tp_cluster *c = tp_test_cluster(t);
		tp_test_alloc_fail_at(n);
		tp_pd_request r = service(3);
		tp_pd_result *res = NULL;
		uint64_t fp = tp_cluster_fingerprint(c);
		rc = tp_pd_place(c, &r, &res);
		tp_test_alloc_fail_at(-1);
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s %s", n, tp_err_name(rc),
		          tp_pd_result_errmsg(res));
		if (rc)
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "allocation %ld changed the state", n);
		else
			cr_assert_eq(tp_pd_result_count(res), 18);
		tp_pd_result_destroy(res);
		tp_cluster_destroy(c);
	}
	cr_assert_eq(rc, 0);
	tp_test_alloc_reset();
	tp_topology_destroy(t);
}

/* A group the caller released only in part (its first prefill instance gone, the others
 * running) is neither missing nor whole: tp_pd_place refuses it, naming the group and the
 * instance still there, and changes nothing; once the rest is released it is placed again. */
Test(pd, partly_released_group)
{
	tp_topology *t = nvl72_racks(2);
	tp_cluster *c = tp_test_cluster(t);
	tp_pd_request r = service(1);
	tp_pd_result *res;
	cr_assert_eq(tp_pd_place(c, &r, &res), 0, "%s", tp_pd_result_errmsg(res));
	tp_pd_result_destroy(res);
	cr_assert_eq(tp_cluster_release(c, "chat/g0/p0"), 0);
	uint64_t fp = tp_cluster_fingerprint(c);
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EEXIST, tp_pd_result_errmsg(res),
	              "group 0 of service chat is partly placed: chat/g0/p0 does not run but "
	              "chat/g0/p1 does (release the group's other instances first)");
	cr_assert_eq(tp_pd_result_count(res), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	tp_pd_result_destroy(res);
	/* the same with "auto" locality */
	r.locality = TP_PD_LOCALITY_AUTO;
	r.kv_token_bytes = 1e5;
	r.prompt_tokens = 1000;
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EEXIST, tp_pd_result_errmsg(res),
	              "group 0 of service chat is partly placed: chat/g0/p0 does not run but "
	              "chat/g0/p1 does (release the group's other instances first)");
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	tp_pd_result_destroy(res);
	/* only decode instances left: named the same way */
	r.locality = "rack";
	cr_assert_eq(tp_cluster_release(c, "chat/g0/p1"), 0);
	TP_ASSERT_ERR(tp_pd_place(c, &r, &res), TP_EEXIST, tp_pd_result_errmsg(res),
	              "group 0 of service chat is partly placed: chat/g0/p0 does not run but "
	              "chat/g0/d0 does (release the group's other instances first)");
	tp_pd_result_destroy(res);
	for (unsigned i = 0; i < 4; i++) {
		char name[32];
		snprintf(name, sizeof name, "chat/g0/d%u", i);
		cr_assert_eq(tp_cluster_release(c, name), 0);
	}
	cr_assert_eq(tp_pd_place(c, &r, &res), 0, "%s", tp_pd_result_errmsg(res));
	cr_assert_eq(tp_pd_result_count(res), 6);
	check_groups(t, c, 1);
	tp_pd_result_destroy(res);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
