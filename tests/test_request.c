/* SPDX-License-Identifier: MIT */
/*
 * Requests (request_data.c, request.c): the one derivation of a resolved request's nested
 * units (tp_rq_units) and of the multiple every domain of a level must hold
 * (tp_rq_level_units), which place, replace and defrag share; and deep copies.
 */
#include <string.h>

#include "request.h"
#include "testutil.h"

/* levels block (0), rack (1), node (2); 2 blocks of 2 racks of 18 nodes of 4 GPUs */
static tp_topology *nvl72(void)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 2, &tp_test_allocator), 0);
	return t;
}

static void resolve(const tp_topology *t, const tp_cluster *c, const tp_request *r,
                    struct tp_rq *q)
{
	char err[TP_ERRMSG_LEN] = "";
	cr_assert_eq(tp_request_resolve(t, c, r, 0, &tp_test_allocator, q, err), 0, "%s", err);
}

Test(request, units_outermost_first)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72();
	tp_cluster *c = tp_test_cluster(t);
	tp_slice sl[] = {{"block", 64}, {"rack", 32}};
	tp_request r = TP_REQUEST_INIT;
	r.count = 128;
	r.group_size = 4;
	r.group_level = "node";
	r.required = "block";
	r.slices = sl;
	r.nslices = 2;
	struct tp_rq q;
	resolve(t, c, &r, &q);
	struct tp_rq_unit u[TP_RQ_MAX_UNITS];
	unsigned n = tp_rq_units(&q, 2, u);
	cr_assert_eq(n, 5);
	const struct tp_rq_unit want[] = {
	    {128, 0, TP_RQ_UNIT_WHOLE, 0}, {64, 0, TP_RQ_UNIT_SLICE, 0}, {32, 1, TP_RQ_UNIT_SLICE, 1},
	    {4, 2, TP_RQ_UNIT_GROUP, 0},   {1, 2, TP_RQ_UNIT_DEVICE, 0},
	};
	for (unsigned i = 0; i < n; i++) {
		cr_assert_eq(u[i].size, want[i].size, "unit %u size %u", i, u[i].size);
		cr_assert_eq(u[i].level, want[i].level, "unit %u level %u", i, u[i].level);
		cr_assert_eq(u[i].kind, want[i].kind, "unit %u kind %d", i, (int)u[i].kind);
		cr_assert_eq(u[i].slice, want[i].slice, "unit %u slice %u", i, u[i].slice);
	}
	uint32_t lu[3];
	tp_rq_level_units(&q, 3, lu);
	cr_assert_eq(lu[0], 64, "block: the block slice");
	cr_assert_eq(lu[1], 32, "rack: the rack slice");
	cr_assert_eq(lu[2], 4, "node: the group");
	tp_rq_release(&tp_test_allocator, &q);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Without a required level there is no whole unit; a group above the node makes every level
 * at or above it hold whole groups, and the node level only single devices. */
Test(request, units_without_required_level)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 24;
	r.group_size = 8;
	r.group_level = "rack";
	struct tp_rq q;
	resolve(t, c, &r, &q);
	struct tp_rq_unit u[TP_RQ_MAX_UNITS];
	cr_assert_eq(tp_rq_units(&q, 2, u), 2);
	cr_assert_eq(u[0].kind, TP_RQ_UNIT_GROUP);
	cr_assert_eq(u[0].size, 8);
	cr_assert_eq(u[0].level, 1);
	cr_assert_eq(u[1].kind, TP_RQ_UNIT_DEVICE);
	uint32_t lu[3];
	tp_rq_level_units(&q, 3, lu);
	cr_assert_eq(lu[0], 8);
	cr_assert_eq(lu[1], 8);
	cr_assert_eq(lu[2], 1);
	tp_rq_release(&tp_test_allocator, &q);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A required and a colocate level: one whole unit, at the deeper of the two. */
Test(request, units_keep_the_deeper_whole)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t devs[] = {0, 1};
	cr_assert_eq(tp_cluster_assign(c, "a", devs, 2, NULL), 0, "%s", tp_cluster_errmsg(c));
	for (int deeper_first = 0; deeper_first < 2; deeper_first++) {
		tp_request r = TP_REQUEST_INIT;
		r.count = 4;
		r.required = deeper_first ? "rack" : "block";
		r.colocate_job = "a";
		r.colocate_level = deeper_first ? "block" : "rack";
		struct tp_rq q;
		resolve(t, c, &r, &q);
		struct tp_rq_unit u[TP_RQ_MAX_UNITS];
		cr_assert_eq(tp_rq_units(&q, 2, u), 3);
		cr_assert_eq(u[0].kind, TP_RQ_UNIT_WHOLE);
		cr_assert_eq(u[0].size, 4);
		cr_assert_eq(u[0].level, 1, "the rack, whichever field names it");
		tp_rq_release(&tp_test_allocator, &q);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A copy holds its own strings and arrays, at the current version. */
Test(request, dup_is_deep)
{
	tp_test_alloc_reset();
	char id[] = "job-1", lvl[] = "rack";
	tp_slice sl = {lvl, 8};
	tp_request r = TP_REQUEST_INIT;
	r.version = 1;
	r.id = id;
	r.count = 16;
	r.slices = &sl;
	r.nslices = 1;
	tp_request *d = tp_request_dup(&tp_test_allocator, &r);
	cr_assert_not_null(d);
	strcpy(id, "xxxxx");
	strcpy(lvl, "yyyy");
	cr_assert_str_eq(d->id, "job-1");
	cr_assert_str_eq(d->slices[0].level, "rack");
	cr_assert_eq(d->slices[0].size, 8);
	cr_assert_eq(d->version, TP_REQUEST_VERSION);
	cr_assert_eq(d->gpu_nic_pairs, 0, "a version 1 request reads the default");
	tp_request_free(&tp_test_allocator, d);
	TP_ASSERT_NO_LEAKS();
}
