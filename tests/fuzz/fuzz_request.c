/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: request validation. The input decodes into a tp_request with random fields
 * (level names from a dictionary that holds bad ones, counts, groups, slices, caps, select
 * lists) that tp_place() answers on a fixed small cluster: 2 blocks x 2 racks x 2 nodes of 4
 * GPUs, a "power" failure-domain kind, two models, running jobs of two tenants (one exclusive
 * at the rack level), a down and a cordoned device.
 *
 * Checks: the code is 0 or a defined TP_E* code (never ENOMEM: nothing fails allocations here);
 * (a request with an absurd count must be refused, not allocated for: the target runs with
 * libFuzzer's -malloc_limit_mb);
 * the result carries that status, a message on failure and none on success; a success obeys the
 * request; the cluster is unchanged; nothing leaks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refmodel.h"
#include "testutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#pragma weak tp_place
#pragma weak tp_placement_destroy
#pragma weak tp_placement_status
#pragma weak tp_placement_errmsg
#pragma weak tp_placement_devices

/* The fixed topology, built once per process with the C library's allocator and shared by
 * every input, as a scheduler shares one (topology destruction is fuzz_api's business). */
static const tp_topology *fixed_topology(void)
{
	static tp_topology *t;
	if (t)
		return t;
	const char *levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	FZ_CHECK(tp_topology_builder_create(&b, levels, 3, NULL) == 0, "builder");
	for (unsigned i = 0; i < 8; i++) {
		char name[8], blk[4], rack[4];
		snprintf(name, sizeof name, "x%u", i);
		snprintf(blk, sizeof blk, "b%u", i / 4);
		snprintf(rack, sizeof rack, "r%u", i / 2 % 2);
		const char *path[] = {blk, rack};
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.model = i < 6 ? "GB200" : "H100";
		o.memory_gb = i < 6 ? 186 : 80;
		o.perf = i == 7 ? 0.8 : 1.0;
		FZ_CHECK(tp_topology_builder_add_node(b, name, path, 4, &o) == 0, "add_node %s", name);
		FZ_CHECK(tp_topology_builder_add_failure_domain(b, "power", i % 2 ? "pa" : "pb", name,
		                                                -1) == 0,
		         "failure domain");
	}
	FZ_CHECK(tp_topology_build(b, &t) == 0, "build");
	tp_topology_builder_destroy(b);
	return t;
}

static tp_cluster *fixed_cluster(const tp_topology *t)
{
	tp_cluster *c = NULL;
	FZ_CHECK(tp_cluster_create(&c, t, &fz_allocator) == 0, "cluster");
	uint32_t a[] = {0, 1, 2, 3, 4, 5}, b[] = {16, 17}, down = 9, cord = 30;
	tp_job_options oa = TP_JOB_OPTIONS_INIT, ob = TP_JOB_OPTIONS_INIT;
	oa.tenant = "t1";
	ob.tenant = "t2";
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.exclusive = "rack";
	shape.tenant = "t2";
	ob.shape = &shape;
	FZ_CHECK(tp_cluster_assign(c, "j1", a, 6, &oa) == 0, "assign j1");
	FZ_CHECK(tp_cluster_assign(c, "j2", b, 2, &ob) == 0, "assign j2");
	FZ_CHECK(tp_cluster_set_down(c, &down, 1, 1) == 0, "down");
	FZ_CHECK(tp_cluster_set_cordoned(c, &cord, 1, 1) == 0, "cordon");
	return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!tp_place)
		return 0;
	tp_test_alloc_reset();
	fz_big_alloc = 0;
	struct fz_in in = {data, size};
	const tp_topology *t = fixed_topology();
	tp_cluster *c = fixed_cluster(t);
	uint64_t fp = tp_cluster_fingerprint(c);
	for (unsigned round = 0; round < 4 && (round == 0 || fz_more(&in)); round++) {
		struct fz_request q;
		fz_decode_request(&in, t, fz_u8(&in) & 1 ? "j1" : "j2", &q);
		tp_placement *p = NULL;
		fz_trace_request("request", &q.r);
		int rc = tp_place(c, &q.r, &p);
		FZ_TRACE_LINE("round %u: %s for %u\n", round, tp_err_name(rc), q.r.count);
		FZ_CHECK(fz_big_alloc == 0, "tp_place(count %u) asked for %zu bytes at once (%s)",
		         q.r.count, fz_big_alloc, tp_err_name(rc));
		FZ_CHECK(fz_code_defined(rc) && rc != TP_ENOMEM && rc != TP_ECORRUPT &&
		             rc != TP_EPARSE && rc != TP_ENOPLAN && rc != TP_EEXIST && rc != TP_ELIMIT,
		         "tp_place returned %d (%s)", rc, tp_err_name(rc));
		FZ_CHECK(p != NULL, "no result object for %s", tp_err_name(rc));
		FZ_CHECK(tp_placement_status(p) == rc, "status %d, returned %d",
		         tp_placement_status(p), rc);
		const char *msg = tp_placement_errmsg(p);
		FZ_CHECK(msg != NULL, "NULL message");
		FZ_CHECK(rc == 0 ? *msg == '\0' : *msg != '\0', "%s with message '%s'",
		         tp_err_name(rc), msg);
		FZ_CHECK(strlen(msg) < 512, "message not terminated within its buffer");
		size_t n = 0;
		const uint32_t *devs = tp_placement_devices(p, &n);
		if (rc == 0) {
			const char *why = ref_placement_problem(c, &q.r, q.r.tenant, devs, n, true);
			FZ_CHECK(!why, "placement breaks its request: %s", why);
			if (fz_request_pairs(&q.r)) {
				why = ref_pairs_problem(t, p);
				FZ_CHECK(!why, "GPU+NIC pairs: %s", why);
			}
			for (size_t i = 0; i < n; i++)
				FZ_CHECK(tp_cluster_device_state(c, devs[i], NULL) == TP_DEVICE_FREE,
				         "placed on device %u, not free", devs[i]);
		} else {
			FZ_CHECK(!devs && n == 0, "a failure with devices");
		}
		tp_placement_destroy(p);
		FZ_CHECK(tp_cluster_fingerprint(c) == fp, "tp_place changed the cluster");
	}
	tp_cluster_destroy(c);
	FZ_CHECK(fz_big_alloc == 0, "the library asked for %zu bytes at once", fz_big_alloc);
	FZ_CHECK(tp_test_alloc_state.live == 0, "%ld block(s) leaked", tp_test_alloc_state.live);
	return 0;
}
