/* SPDX-License-Identifier: MIT */
/*
 * The top-level dual (src/place_dual.c) reads an unfiltered request's capacities straight from
 * the cluster's histograms and its index; a request that selects the one model every node has
 * asks exactly the same but walks the nodes (the general collector). The two must agree on
 * every answer: code and devices, in rank order.
 */
#include <stdio.h>

#include "testutil.h"

/* Hold a random number of devices on every node (0 to 4, a third of the nodes left free), one
 * job per node, so that racks and blocks have every kind of free count. */
static void fill_random(tp_cluster *c, const tp_topology *t, uint64_t *s)
{
	uint32_t nodes = tp_topology_node_count(t);
	for (uint32_t n = 0; n < nodes; n++) {
		uint32_t used = tp_test_below(s, 3) ? tp_test_below(s, 5) : 0;
		if (!used)
			continue;
		uint32_t devs[4];
		for (uint32_t i = 0; i < used; i++)
			devs[i] = n * 4 + i;
		char id[32];
		snprintf(id, sizeof id, "j%u", n);
		cr_assert_eq(tp_cluster_assign(c, id, devs, used, NULL), 0, "%s", tp_cluster_errmsg(c));
	}
}

/* The fewest blocks that hold r (groups of r->group_size on nodes of 4, no caps): greedy on
 * the blocks' capacities, as rule 1 counts them; 0 when even all of them cannot. */
static uint32_t fewest_blocks(const tp_cluster *c, const tp_topology *t, const tp_request *r)
{
	uint32_t nb = tp_topology_domain_count(t, 0), per = tp_topology_node_count(t) / nb;
	uint32_t cap[64] = {0};
	cr_assert(nb <= 64);
	for (uint32_t n = 0; n < nb * per; n++)
		cap[n / per] += tp_cluster_free_count(c, 2, n) / r->group_size * r->group_size;
	uint32_t used = 0, got = 0;
	while (got < r->count && used < nb) {
		uint32_t best = 0;
		for (uint32_t b = 1; b < nb; b++)
			if (cap[b] > cap[best])
				best = b;
		got += cap[best];
		cap[best] = 0;
		used++;
	}
	return got >= r->count ? used : 0;
}

/* tp_place with and without the no-op filter: the same code and the same devices. */
static void expect_same(tp_cluster *c, const tp_request *r, const char *what)
{
	tp_request f = *r;
	f.select_model = "GB200";
	tp_placement *a = NULL, *b = NULL;
	int ra = tp_place(c, r, &a), rb = tp_place(c, &f, &b);
	cr_assert_eq(ra, rb, "%s: %s against %s (%s)", what, tp_err_name(ra), tp_err_name(rb),
	             tp_placement_errmsg(a));
	if (ra == 0) {
		size_t na, nb;
		const uint32_t *da = tp_placement_devices(a, &na), *db = tp_placement_devices(b, &nb);
		cr_assert_eq(na, nb, "%s", what);
		for (size_t i = 0; i < na; i++)
			cr_assert_eq(da[i], db[i], "%s: rank %zu: device %u against %u", what, i, da[i],
			             db[i]);
	}
	tp_placement_destroy(a);
	tp_placement_destroy(b);
}

/* Wide requests on random NVL72 fleets of 3 to 12 blocks: groups of 1 to 4 (3 rounds a node
 * down, so its rounding is no mask), preferred or not, rack slices, and caps per block or per
 * rack (a cap keeps capacities far below free counts, so the count of blocks is found by
 * sorting rather than by the walk from the largest). */
Test(dual, histogram_reader_agrees_with_the_node_walk)
{
	tp_test_alloc_reset();
	uint64_t s = 0x5eed;
	unsigned compared = 0, checked = 0;
	for (unsigned round = 0; round < 40; round++) {
		uint32_t blocks = 3 + tp_test_below(&s, 10), racks = 2 + tp_test_below(&s, 3);
		tp_topology *t;
		cr_assert_eq(tp_topology_generate_nvl72(&t, blocks, racks, &tp_test_allocator), 0);
		tp_cluster *c = tp_test_cluster(t);
		fill_random(c, t, &s);
		for (unsigned q = 0; q < 12; q++) {
			static const uint32_t groups[] = {1, 2, 3, 4};
			tp_request r = TP_REQUEST_INIT;
			r.group_size = groups[tp_test_below(&s, 4)];
			r.count = r.group_size * (8 + tp_test_below(&s, 72 * racks / r.group_size));
			if (tp_test_below(&s, 2))
				r.preferred = "rack";
			tp_slice sl = {"rack", 0};
			if (r.group_size == 4 && tp_test_below(&s, 3) == 0 && r.count % 16 == 0) {
				sl.size = 16;
				r.slices = &sl;
				r.nslices = 1;
			}
			tp_domain_cap cap = {tp_test_below(&s, 2) ? "block" : "rack", 0, 0};
			if (tp_test_below(&s, 4) == 0) {
				cap.devices = r.group_size * (4 + tp_test_below(&s, 8));
				r.caps = &cap;
				r.ncaps = 1;
			}
			char what[96];
			snprintf(what, sizeof what, "round %u: %u blocks of %u racks, %u x %u%s%s%s", round,
			         blocks, racks, r.count / r.group_size, r.group_size,
			         r.preferred ? ", preferred rack" : "", r.slices ? ", rack slices" : "",
			         r.caps ? ", capped" : "");
			expect_same(c, &r, what);
			compared++;
			if (!r.preferred || r.slices || r.caps)
				continue;
			/* the count of blocks the walk from the largest finds is rule 1's */
			tp_placement *p;
			uint32_t want = fewest_blocks(c, t, &r);
			int rc = tp_place(c, &r, &p);
			cr_assert_eq(rc == 0, want > 0, "%s: %s", what, tp_placement_errmsg(p));
			if (rc == 0)
				cr_assert_eq(tp_placement_domain_count(p, 0), want, "%s", what);
			tp_placement_destroy(p);
			checked++;
		}
		tp_cluster_destroy(c);
		tp_topology_destroy(t);
	}
	cr_assert_eq(compared, 480);
	cr_assert_gt(checked, 100);
	TP_ASSERT_NO_LEAKS();
}

/* Five one-rack blocks: three with 62 free GPUs of which whole nodes give only 32 (ten nodes
 * hold 1 GPU each), two with 60 in whole nodes. 100 GPUs in groups of 4 take the two tighter
 * blocks: the walk from the largest free count must not stop at the first three blocks that
 * reach the count. */
Test(dual, a_loose_block_can_hold_less_than_a_tight_one)
{
	tp_test_alloc_reset();
	tp_topology *t;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 5, 1, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	for (uint32_t b = 0; b < 5; b++)
		for (uint32_t n = 0; n < 18; n++) {
			uint32_t node = b * 18 + n, devs[4], used = 0;
			if (b < 3 && n >= 8)
				used = 1;
			else if (b >= 3 && n >= 15)
				used = 4;
			for (uint32_t i = 0; i < used; i++)
				devs[i] = node * 4 + i;
			char id[32];
			snprintf(id, sizeof id, "j%u", node);
			if (used)
				cr_assert_eq(tp_cluster_assign(c, id, devs, used, NULL), 0);
		}
	tp_request r = TP_REQUEST_INIT;
	r.count = 100;
	r.group_size = 4;
	r.preferred = "rack";
	expect_same(c, &r, "100 over loose and tight blocks");
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_placement_domain_count(p, 0), 2);
	uint32_t dom, cnt;
	cr_assert_eq(tp_placement_domain_at(p, 0, 0, &dom, &cnt), 0);
	cr_assert_geq(dom, 3);
	cr_assert_eq(tp_placement_domain_at(p, 0, 1, &dom, &cnt), 0);
	cr_assert_geq(dom, 3);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A fleet with more blocks than the walk keeps (64): a per-block cap makes it give up and
 * sort, and the answer is still the node walk's. */
Test(dual, many_capped_blocks_fall_back_to_the_sort)
{
	tp_test_alloc_reset();
	uint64_t s = 7;
	tp_topology *t;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 80, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	fill_random(c, t, &s);
	tp_domain_cap cap = {"block", 8, 0};
	tp_request r = TP_REQUEST_INIT;
	r.count = 8 * 70;
	r.group_size = 4;
	r.preferred = "rack";
	r.caps = &cap;
	r.ncaps = 1;
	expect_same(c, &r, "70 blocks of 8");
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	uint32_t dom, cnt, blocks = 0;
	while (tp_placement_domain_at(p, 0, blocks, &dom, &cnt) == 0)
		blocks++;
	cr_assert_eq(blocks, 70);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Allocation failures inside the dual: TP_ENOMEM, no leak, the cluster unchanged and usable,
 * until the call succeeds with the answer it gives without failures. */
Test(dual, allocation_failures)
{
	tp_test_alloc_reset();
	uint64_t s = 11;
	tp_topology *t;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 6, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	fill_random(c, t, &s);
	tp_request r = TP_REQUEST_INIT;
	r.count = 200;
	r.group_size = 4;
	r.preferred = "rack";
	tp_placement *want;
	cr_assert_eq(tp_place(c, &r, &want), 0, "%s", tp_placement_errmsg(want));
	uint64_t fp = tp_cluster_fingerprint(c);
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM; n++) {
		tp_test_alloc_fail_at(n);
		tp_placement *p = NULL;
		rc = tp_place(c, &r, &p);
		tp_test_alloc_fail_at(-1);
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
		if (rc == 0) {
			size_t na, nb;
			const uint32_t *a = tp_placement_devices(p, &na), *b = tp_placement_devices(want, &nb);
			cr_assert_eq(na, nb);
			cr_assert_eq(memcmp(a, b, na * sizeof *a), 0);
		}
		tp_placement_destroy(p);
	}
	tp_placement_destroy(want);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
