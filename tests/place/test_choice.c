/* SPDX-License-Identifier: MIT */
/*
 * Rule 3 as the solver refines it for requests one domain must hold (src/place_choice.c): best
 * fit at the level that holds the job (the tightest rack over the whole fleet, not the tightest
 * rack of the tightest block; for a node-sized job the tightest node of the fleet, whatever
 * fabric joins the nodes), the ancestors as the tie-break above the node and the index at it
 * (Kueue's BestFit), rule 1 first; on HGX a request of one group as one its node must hold;
 * and the tightest of equally large children when a job spans several (emission,
 * src/place_emit.c).
 * The oracle check is place_oracle/choice_is_the_tightest_domain_among_rule12_optima.
 */
#include <stdio.h>

#include "testutil.h"

/* Hold devices [from, from + n) of t's device order as job id. */
static void hold(tp_cluster *c, const char *id, uint32_t from, uint32_t n)
{
	uint32_t d[288];
	cr_assert_leq(n, 288);
	for (uint32_t i = 0; i < n; i++)
		d[i] = from + i;
	cr_assert_eq(tp_cluster_assign(c, id, d, n, NULL), 0, "%s", tp_cluster_errmsg(c));
}

/* Two blocks of two NVL72 racks (rack r holds devices 72r .. 72r + 71, node n of it 4n ..):
 * rack 0 full; rack 1 with 70 free (2 GPUs of its first node held); rack 2 with 10 free (nodes
 * 0-14 and 2 GPUs of node 15 held: node 15 has 2 free, nodes 16 and 17 are whole); rack 3
 * empty. Block 0 has 70 free, block 1 82: block 0 is the tighter block, rack 2 the tightest
 * rack that has room. */
static void fleet(tp_topology **t, tp_cluster **c)
{
	cr_assert_eq(tp_topology_generate_nvl72(t, 2, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(c, *t, &tp_test_allocator), 0);
	hold(*c, "r0", 0, 72);
	hold(*c, "r1", 72, 2);
	hold(*c, "r2", 144, 62);
}

static tp_placement *place(tp_cluster *c, uint32_t count, uint32_t group, const char *required)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = count;
	r.group_size = group;
	r.required = required;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", p ? tp_placement_errmsg(p) : "");
	return p;
}

/* The one rack all of p's devices are in (fails when they span several). */
static unsigned rack_of(const tp_placement *p)
{
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_gt(n, 0);
	for (size_t i = 1; i < n; i++)
		cr_assert_eq(d[i] / 72, d[0] / 72, "device %u outside rack %u", d[i], d[0] / 72);
	return d[0] / 72;
}

static void done(tp_topology *t, tp_cluster *c)
{
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

Test(choice, required_rack_takes_the_tightest_rack_not_the_tightest_block)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	fleet(&t, &c);
	/* two whole nodes: rack 2 has them (nodes 16, 17); the tightest block's only rack with room
	 * is rack 1, which would drop to 62 free and no longer hold a 64-GPU slice */
	tp_placement *p = place(c, 8, 4, "rack");
	cr_assert_eq(rack_of(p), 2);
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 8);
	cr_assert_eq(d[0], 144 + 64); /* node 16 */
	cr_assert_eq(tp_placement_decided_by(p), TP_RULE_FIT);
	tp_placement_destroy(p);
	done(t, c);
}

/* fleet()'s devices held by jobs of at most a node (4 GPUs): no job is wider than half a rack. */
static void fleet_small(tp_topology **t, tp_cluster **c)
{
	cr_assert_eq(tp_topology_generate_nvl72(t, 2, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(c, *t, &tp_test_allocator), 0);
	char id[16];
	for (uint32_t d = 0; d < 72; d += 4) {
		snprintf(id, sizeof id, "a%u", d);
		hold(*c, id, d, 4);
	}
	hold(*c, "b", 72, 2);
	for (uint32_t d = 144; d < 144 + 60; d += 4) {
		snprintf(id, sizeof id, "c%u", d);
		hold(*c, id, d, 4);
	}
	hold(*c, "d", 204, 2);
}

/* `count` GPUs required in one node start at device `want`. */
static void expect_dev(tp_cluster *c, uint32_t count, uint32_t want)
{
	tp_placement *p = place(c, count, 1, "node");
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, count);
	cr_assert_eq(d[0], want, "%u GPUs: device %u, not %u", count, d[0], want);
	tp_placement_destroy(p);
}

/* Build a fleet with make; 1 GPU and then 3 required in one node start at devices one and
 * three. */
static void expect_on(void (*make)(tp_topology **, tp_cluster **), uint32_t one, uint32_t three,
                      tp_topology **t, tp_cluster **c)
{
	make(t, c);
	expect_dev(*c, 1, one);
	expect_dev(*c, 3, three);
}

/* With no job wider than half a rack running, a job one node must hold takes the tightest
 * node of the fleet: node 18 (rack 1's first, 2 free) and node 51 (rack 2's node 15, 2 free)
 * tie, and the lower index wins, though rack 2 is the tighter rack: a fixed order among
 * equals fills the same nodes again (place_choice.c). 3 GPUs: no node has exactly 3 free, so
 * the first whole node, rack 1's node 1. */
Test(choice, required_node_takes_the_tightest_node_of_the_fleet)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	expect_on(fleet_small, 72 + 2, 72 + 4, &t, &c);
	done(t, c);
}

/* The same devices held, but by a 72-GPU and a 62-GPU job (wider than half a rack, all of the
 * held devices but 2): the tightest rack first keeps racks whole for jobs of that size, so the
 * job goes to rack 2 (10 free) and its tightest node: node 15 (2 free) for 1 GPU, node 16 for
 * 3. */
Test(choice, required_node_takes_the_tightest_rack_while_wide_jobs_run)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	expect_on(fleet, 144 + 62, 144 + 64, &t, &c);
	/* the 72-GPU job ends: 62 of 64 held devices are still a wide job's */
	cr_assert_eq(tp_cluster_release(c, "r0"), 0);
	expect_dev(c, 1, 144 + 62);
	/* and the 62-GPU one, and rack 3 filled but its last node's 2 GPUs by small jobs: no wide
	 * job is left, so the tightest node of the fleet, node 18 (rack 1, 2 free, the lower of
	 * the two nodes with 2 free), not the tightest rack's (rack 3, 2 free: device 286) */
	cr_assert_eq(tp_cluster_release(c, "r2"), 0);
	char id[16];
	for (uint32_t d = 216; d < 216 + 68; d += 4) {
		snprintf(id, sizeof id, "s%u", d);
		hold(c, id, d, 4);
	}
	hold(c, "s284", 284, 2);
	expect_dev(c, 1, 72 + 2);
	done(t, c);
}

/* The node of the device p starts with, for nodes of `per` devices. */
static unsigned node_of(const tp_placement *p, unsigned per)
{
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_gt(n, 0);
	for (size_t i = 1; i < n; i++)
		cr_assert_eq(d[i] / per, d[0] / per, "device %u outside node %u", d[i], d[0] / per);
	return d[0] / per;
}

/* Two HGX scalable units of two 8-GPU nodes (node n holds devices 8n .. 8n + 7): node 0 with
 * 2 free, node 1 empty, and of su1 the first `b` devices of node 2 and the first `c` of node 3
 * held. */
static void hgx_units(tp_topology **t, tp_cluster **cl, uint32_t b, uint32_t c)
{
	cr_assert_eq(tp_topology_generate_hgx(t, 2, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(cl, *t, &tp_test_allocator), 0);
	hold(*cl, "a", 0, 6);
	hold(*cl, "b", 16, b);
	hold(*cl, "c", 24, c);
}

/* `count` devices required in one node go to node `want` (8-GPU nodes). */
static void expect_node(tp_cluster *c, uint32_t count, unsigned want)
{
	tp_placement *p = place(c, count, 1, "node");
	cr_assert_eq(node_of(p, 8), want, "%u GPUs", count);
	tp_placement_destroy(p);
}

/* On HGX (the node is the NVLink domain) a request of one group (or of one device) with no
 * required level is one its node must hold, and is placed as if it required the node: the same
 * devices as with required "node" (src/place.c). */
Test(choice, one_group_on_hgx_is_placed_as_required_in_its_node)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	hgx_units(&t, &c, 4, 7);
	for (uint32_t k = 1; k <= 8; k++) {
		tp_placement *a = place(c, k, k, NULL), *b = place(c, k, k, "node");
		size_t na, nb;
		const uint32_t *da = tp_placement_devices(a, &na);
		const uint32_t *db = tp_placement_devices(b, &nb);
		cr_assert_eq(na, nb);
		for (size_t i = 0; i < na; i++)
			cr_assert_eq(da[i], db[i], "%u GPUs: device %zu differs", k, i);
		tp_placement_destroy(a);
		tp_placement_destroy(b);
	}
	done(t, c);
	/* su0: node 0 with 1 free, node 1 empty (9 free); su1: node 2 with 2 free, node 3 with 6
	 * (8 free, the tighter unit). 1 GPU goes to the tightest node of the fleet, node 0, not to
	 * the tighter unit's tightest node (node 2: the tree order's answer) */
	tp_test_alloc_reset();
	cr_assert_eq(tp_topology_generate_hgx(&t, 2, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	hold(c, "a", 0, 7);
	hold(c, "b", 16, 6);
	hold(c, "c", 24, 2);
	tp_placement *p = place(c, 1, 1, NULL);
	cr_assert_eq(node_of(p, 8), 0);
	tp_placement_destroy(p);
	done(t, c);
}

/* On HGX (InfiniBand joins a scalable unit's nodes) too a job one node must hold goes to the
 * fleet's tightest node, whatever unit it is in, and of nodes as tight to the lowest. */
Test(choice, required_node_on_hgx_takes_the_tightest_node_of_the_fleet)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	/* su0 has 10 free (node 0 at 2, node 1 empty), su1 3 (node 2 at 3, node 3 full): the
	 * tightest unit first would break node 2 for 2 GPUs */
	hgx_units(&t, &c, 5, 8);
	expect_node(c, 2, 0);
	expect_node(c, 3, 2); /* node 2's 3 free fit exactly */
	expect_node(c, 4, 1); /* only node 1 has 4 */
	done(t, c);
	/* node 0 (su0, 10 free) and node 2 (su1, 5 free) both have 2 free: the lower, though su1
	 * is the tighter unit */
	hgx_units(&t, &c, 6, 5);
	expect_node(c, 2, 0);
	done(t, c);
}

/* Two racks of two 4-GPU nodes, the racks' fabric `kind`: rack 0 with node 0 at 2 free and
 * node 1 empty (6 free), rack 1 with node 2 at 3 free and node 3 full (3 free). */
static void two_racks(tp_link_kind kind, tp_topology **t, tp_cluster **c)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 0, kind, kind == TP_LINK_NVLINK ? 900 : 50,
	                                            kind == TP_LINK_NVLINK ? 3.4 : 14),
	             0);
	unsigned counts[2] = {2, 2};
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	cr_assert_eq(tp_topology_builder_generate(b, counts, 4, &o), 0,
	             "%s", tp_topology_builder_errmsg(b));
	cr_assert_eq(tp_topology_build(b, t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	cr_assert_eq(tp_cluster_create(c, *t, &tp_test_allocator), 0);
	hold(*c, "a", 0, 2);
	hold(*c, "b", 8, 1);
	hold(*c, "c", 12, 4);
}

/* The fabric above the node does not change the choice for a node-sized job: the tightest
 * node (node 0, 2 free) though rack 1 is the tighter rack. Keeping the NVLink rack tight
 * (rack 1, node 2) lost on the comparison grid (place_choice.c). */
Test(choice, a_node_sized_job_takes_the_tightest_node_whatever_the_fabric)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_racks(TP_LINK_IB, &t, &c);
	tp_placement *p = place(c, 2, 1, "node");
	cr_assert_eq(node_of(p, 4), 0, "InfiniBand racks: the tightest node");
	tp_placement_destroy(p);
	done(t, c);
	two_racks(TP_LINK_NVLINK, &t, &c);
	p = place(c, 2, 1, "node");
	cr_assert_eq(node_of(p, 4), 0, "NVLink racks: the tightest node");
	tp_placement_destroy(p);
	done(t, c);
}

Test(choice, racks_as_tight_go_to_the_tighter_block)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	/* racks 0 and 2 both 32 free; block 0 has 104 free (rack 1 empty), block 1 32 (rack 3
	 * full): the tie goes to the tighter block, not to the lower index */
	hold(c, "a", 0, 40);
	hold(c, "b", 144, 40);
	hold(c, "c", 216, 72);
	tp_placement *p = place(c, 8, 4, "rack");
	cr_assert_eq(rack_of(p), 2);
	tp_placement_destroy(p);
	done(t, c);
}

Test(choice, fewest_nodes_comes_before_the_tightest_rack)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	/* rack 0: 8 free, one on each of nodes 0-7 (3 held there, nodes 8-17 full); rack 1: 12
	 * free, 3 whole nodes; racks 2 and 3 full. Eight single GPUs fit both racks, but rack 0
	 * needs 8 nodes and rack 1 two (rule 1). */
	char id[8];
	for (uint32_t n = 0; n < 8; n++) {
		snprintf(id, sizeof id, "a%u", n);
		hold(c, id, 4 * n + 1, 3);
	}
	hold(c, "b", 32, 40);
	hold(c, "c", 72, 60);
	hold(c, "d", 144, 144);
	tp_placement *p = place(c, 8, 1, "rack");
	cr_assert_eq(rack_of(p), 1);
	cr_assert_eq(tp_placement_decided_by(p), TP_RULE_LOCALITY);
	tp_placement_destroy(p);
	done(t, c);
}

Test(choice, slices_take_the_tightest_of_equally_large_racks)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 3, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	/* rack 0 has 70 free (17 whole nodes), racks 1 and 2 are empty: every rack holds one
	 * 64-GPU slice, and two slices go to rack 0 and rack 1, keeping rack 2 whole */
	hold(c, "a", 0, 2);
	tp_slice s = {"rack", 64};
	tp_request r = TP_REQUEST_INIT;
	r.count = 128;
	r.group_size = 4;
	r.slices = &s;
	r.nslices = 1;
	r.preferred = "block";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", p ? tp_placement_errmsg(p) : "");
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 128);
	unsigned per[3] = {0};
	for (size_t i = 0; i < n; i++)
		per[d[i] / 72]++;
	cr_assert_eq(per[0], 64);
	cr_assert_eq(per[1], 64);
	cr_assert_eq(per[2], 0);
	tp_placement_destroy(p);
	done(t, c);
}

Test(choice, a_placement_mix_keeps_the_tree_order)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	fleet(&t, &c);
	/* with a mix the mix's loss comes before best fit, and the choice over the whole level is
	 * off: whole nodes only, so every rack loses the same and the tree's best fit (the
	 * tightest block first) decides, as before */
	tp_job_shape node4 = {4, "node", 1.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &node4, 1), 0, "%s", tp_cluster_errmsg(c));
	tp_placement *p = place(c, 8, 4, "rack");
	cr_assert_eq(rack_of(p), 1);
	tp_placement_destroy(p);
	done(t, c);
}
