/* SPDX-License-Identifier: MIT */
/* Grid levels (rings, tori, meshes): the builder calls and their checks, the queries, the
 * generators, box requests (their checks, the hard rules, the objective, failures) and an
 * allocation-failure loop over building and placing. The exhaustive comparison with a
 * brute-force oracle is test_grid_oracle.c. */
#include <stdio.h>

#include "testutil.h"
#ifdef TP_TEST_SCENARIO
#include "topoplace-scenario.h"
#endif

static void setup(void) { tp_test_alloc_reset(); }
TestSuite(grid, .init = setup);

static tp_topology *torus(unsigned x, unsigned y, unsigned z, unsigned wrap, unsigned pods)
{
	unsigned dims[3] = {x, y, z};
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_torus(&t, pods, dims, 3, wrap, &tp_test_allocator), 0);
	return t;
}

static tp_request box_request(unsigned a, unsigned b, unsigned c, unsigned per)
{
	tp_request r = TP_REQUEST_INIT;
	r.box_level = "pod";
	r.box[0] = a, r.box[1] = b, r.box[2] = c;
	r.count = a * b * c * per;
	return r;
}

/* The coordinates of the chip of device d (chips are one-device nodes). */
static void chip_xyz(const tp_topology *t, uint32_t d, unsigned *x)
{
	cr_assert_eq(tp_topology_domain_coords(t, 1, tp_topology_device_node(t, d), x), 0);
}

static void hold(tp_cluster *c, const char *job, const uint32_t *d, size_t n)
{
	cr_assert_eq(tp_cluster_assign(c, job, d, n, NULL), 0, "%s", tp_cluster_errmsg(c));
}

/* The chip of pod 0 at x, y, z. */
static uint32_t chip(const tp_topology *t, unsigned x, unsigned y, unsigned z)
{
	unsigned xyz[3] = {x, y, z};
	uint32_t ch = TP_NONE;
	cr_assert_eq(tp_topology_grid_child(t, 0, 0, xyz, &ch), 0);
	return ch; /* one device per chip, device id = node id */
}

Test(grid, generated_torus_answers_its_queries)
{
	tp_topology *t = torus(4, 3, 2, 0x7, 2);
	unsigned dims[3], nd, wrap;
	cr_assert_eq(tp_topology_grid(t, 0, dims, &nd, &wrap), 0);
	cr_assert_eq(nd, 3);
	cr_assert_eq(wrap, 0x7);
	cr_assert(dims[0] == 4 && dims[1] == 3 && dims[2] == 2);
	cr_assert_eq(tp_topology_grid(t, 1, dims, &nd, &wrap), TP_ENOTFOUND);
	cr_assert_eq(tp_topology_grid(t, 2, dims, &nd, &wrap), TP_EINVAL);
	cr_assert_eq(tp_topology_node_count(t), 48);
	uint32_t node = TP_NONE;
	cr_assert_eq(tp_topology_node_by_name(t, "pod1-chip17", &node), 0);
	unsigned x[3];
	cr_assert_eq(tp_topology_domain_coords(t, 1, node, x), 0);
	cr_assert(x[0] == 1 && x[1] == 1 && x[2] == 1, "chip17 at %u,%u,%u", x[0], x[1], x[2]);
	uint32_t back = TP_NONE;
	cr_assert_eq(tp_topology_grid_child(t, 0, 1, x, &back), 0);
	cr_assert_eq(back, node);
	unsigned out_of_range[3] = {4, 0, 0};
	cr_assert_eq(tp_topology_grid_child(t, 0, 1, out_of_range, &back), TP_EINVAL);
	cr_assert_eq(tp_topology_domain_coords(t, 0, 0, x), TP_ENOTFOUND);
	cr_assert_eq(tp_topology_domain_coords(t, 1, 48, x), TP_EINVAL);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, generated_ring_has_one_wrapping_axis)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_ring(&t, 2, 8, 4, &tp_test_allocator), 0);
	unsigned dims[3], nd, wrap;
	cr_assert_eq(tp_topology_grid(t, 0, dims, &nd, &wrap), 0);
	cr_assert(nd == 1 && wrap == 1 && dims[0] == 8 && dims[1] == 1);
	cr_assert_eq(tp_topology_device_count(t), 64);
	tp_topology *u = NULL;
	cr_assert_eq(tp_topology_generate_ring(&u, 1, 8, 0, &tp_test_allocator), TP_EINVAL);
	unsigned bad[2] = {4, 0};
	cr_assert_eq(tp_topology_generate_torus(&u, 1, bad, 2, 3, &tp_test_allocator), TP_EINVAL);
	cr_assert_eq(tp_topology_generate_torus(&u, 1, bad, 1, 2, &tp_test_allocator), TP_EINVAL);
	cr_assert_null(u);
	/* a ring has one axis: a box along a second is refused */
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.box_level = "ring";
	r.box[0] = 2;
	r.box[1] = 2;
	r.count = 16;
	tp_placement *pl = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.box[1] 2: the grid of ring has 1 axes");
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, builder_checks_name_the_problem)
{
	static const char *const L[] = {"ring", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, L, 2, &tp_test_allocator), 0);
	unsigned d4[1] = {4}, d0[1] = {0}, x[1] = {0};
	TP_ASSERT_ERR(tp_topology_builder_set_grid(b, 1, d4, 1, 1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "not a level above the node");
	TP_ASSERT_ERR(tp_topology_builder_set_grid(b, 0, d4, 4, 1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "ndims 4");
	TP_ASSERT_ERR(tp_topology_builder_set_grid(b, 0, d4, 1, 2), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "wrap 0x2");
	TP_ASSERT_ERR(tp_topology_builder_set_grid(b, 0, d0, 1, 1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "dims[0] 0");
	unsigned big[3] = {1024, 1024, 1024};
	TP_ASSERT_ERR(tp_topology_builder_set_grid(b, 0, big, 3, 0), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "more than");
	const char *path[1] = {"r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "a", path, 2, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "b", path, 2, NULL), 0);
	TP_ASSERT_ERR(tp_topology_builder_set_coords(b, 1, "a", x), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "parent level is no grid");
	cr_assert_eq(tp_topology_builder_set_grid(b, 0, d4, 1, 1), 0);
	unsigned x9[1] = {9};
	TP_ASSERT_ERR(tp_topology_builder_set_coords(b, 1, "a", x9), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "coords[0] 9");
	TP_ASSERT_ERR(tp_topology_builder_set_coords(b, 1, "zz", x), TP_ENOTFOUND,
	              tp_topology_builder_errmsg(b), "no node zz");
	TP_ASSERT_ERR(tp_topology_builder_set_coords(b, 1, NULL, x), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "coords: path or coords is NULL");
	cr_assert_eq(tp_topology_builder_set_coords(b, 1, "a", x), 0);
	tp_topology *t = NULL;
	TP_ASSERT_ERR(tp_topology_build(b, &t), TP_EINVAL, tp_topology_builder_errmsg(b),
	              "node b has no coordinates");
	cr_assert_eq(tp_topology_builder_set_coords(b, 1, "b", x), 0);
	TP_ASSERT_ERR(tp_topology_build(b, &t), TP_EINVAL, tp_topology_builder_errmsg(b),
	              "a and b share cell 0");
	unsigned x1[1] = {1};
	cr_assert_eq(tp_topology_builder_set_coords(b, 1, "b", x1), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "c", path, 4, NULL), 0);
	unsigned x2[1] = {2};
	cr_assert_eq(tp_topology_builder_set_coords(b, 1, "c", x2), 0);
	TP_ASSERT_ERR(tp_topology_build(b, &t), TP_EINVAL, tp_topology_builder_errmsg(b),
	              "c has 4 devices, other children 2");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, box_request_checks_name_the_field)
{
	tp_topology *t = torus(4, 4, 1, 0x3, 1);
	tp_cluster *c = tp_test_cluster(t);
	tp_placement *pl = NULL;
	tp_request r = box_request(2, 2, 1, 1);
	r.count = 5;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.count 5 is not the box's 4 devices");
	tp_placement_destroy(pl);
	r = box_request(2, 2, 2, 1);
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINFEASIBLE, tp_placement_errmsg(pl),
	              "no pod has a 2x2x2 box");
	tp_placement_destroy(pl);
	r = box_request(2, 2, 1, 1);
	r.box_level = "chip";
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.box_level chip is not a grid level");
	tp_placement_destroy(pl);
	r.box_level = "rack";
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_ENOTFOUND, tp_placement_errmsg(pl),
	              "unknown level 'rack'");
	tp_placement_destroy(pl);
	r = box_request(2, 2, 1, 1);
	r.preferred = "pod";
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.preferred cannot be combined with request.box_level");
	tp_placement_destroy(pl);
	r = box_request(2, 2, 1, 1);
	r.box_wrap = 2;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.box_wrap 2");
	tp_placement_destroy(pl);
	r = box_request(0, 2, 1, 1);
	r.count = 2;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.box[0] must be at least 1");
	tp_placement_destroy(pl);
	r = (tp_request)TP_REQUEST_INIT;
	r.count = 4;
	r.box[0] = 2;
	r.box[1] = 2;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "request.box 2x2x0 is set without request.box_level");
	tp_placement_destroy(pl);
	r = box_request(64, 1, 1, 1); /* longer than the grid: more devices than the cluster */
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINFEASIBLE, tp_placement_errmsg(pl),
	              "infeasible: request.box needs 64 devices, the cluster has 16");
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, arc_on_a_ring_wraps_only_when_asked)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_ring(&t, 1, 8, 1, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	uint32_t mid[4] = {2, 3, 4, 5};
	hold(c, "j", mid, 4); /* free: 6 7 0 1 */
	tp_request r = TP_REQUEST_INIT;
	r.box_level = "ring";
	r.box[0] = 4;
	r.count = 4;
	tp_placement *pl = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EFRAGMENTED, tp_placement_errmsg(pl),
	              "no 4x1x1 box");
	tp_placement_destroy(pl);
	r.box_wrap = 1;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(pl, &n);
	cr_assert_eq(n, 4);
	cr_assert(d[0] == 6 && d[1] == 7 && d[2] == 0 && d[3] == 1, "arc %u %u %u %u", d[0], d[1],
	          d[2], d[3]);
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Fewest fragments first: of two free holes, the box that fills one exactly wins over an
 * earlier box that would split or shrink the other. */
Test(grid, an_exact_fit_beats_an_earlier_position)
{
	tp_topology *t = torus(4, 4, 1, 0, 1); /* a 4x4 mesh */
	tp_cluster *c = tp_test_cluster(t);
	/* hold everything but a 2x2 hole at (2,2) and the row y = 0 */
	uint32_t held[16];
	size_t n = 0;
	for (unsigned y = 1; y < 4; y++)
		for (unsigned x = 0; x < 4; x++)
			if (!(x >= 2 && y >= 2))
				held[n++] = chip(t, x, y, 0);
	hold(c, "j", held, n);
	tp_request r = box_request(2, 2, 1, 1);
	tp_placement *pl = NULL;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	const uint32_t *d = tp_placement_devices(pl, &n);
	unsigned x[3];
	chip_xyz(t, d[0], x);
	cr_assert(x[0] >= 2 && x[1] >= 2, "first chip at %u,%u", x[0], x[1]);
	tp_placement_destroy(pl);
	/* a 1x2 box: the hole's exact fit is gone, rotation lets it stand in row 0 as 2x1 */
	r = box_request(1, 2, 1, 1);
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	d = tp_placement_devices(pl, &n);
	chip_xyz(t, d[0], x);
	cr_assert(x[0] >= 2 && x[1] >= 2, "without rotation the hole: %u,%u", x[0], x[1]);
	tp_placement_destroy(pl);
	r.box_rotate = 1;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	d = tp_placement_devices(pl, &n);
	chip_xyz(t, d[0], x);
	cr_assert_eq(x[1], 0, "a 2x1 box at the row's end keeps it whole: %u,%u", x[0], x[1]);
	cr_assert(x[0] == 0 || x[0] == 2, "at %u", x[0]);
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, boxes_keep_the_hard_rules)
{
	tp_topology *t = torus(2, 2, 1, 0, 2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = box_request(2, 2, 1, 1);
	/* a cordoned chip in pod 0 and a down chip in pod 1: no whole pod */
	uint32_t d0 = chip(t, 1, 1, 0), d1 = d0 + 4;
	cr_assert_eq(tp_cluster_set_cordoned(c, &d0, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_down(c, &d1, 1, 1), 0);
	tp_placement *pl = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EINFEASIBLE, tp_placement_errmsg(pl),
	              "even with every job gone");
	tp_placement_destroy(pl);
	cr_assert_eq(tp_cluster_set_down(c, &d1, 1, 0), 0);
	/* another tenant on pod 1: exclusivity at the pod keeps this tenant out */
	uint32_t other = 4;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.tenant = "blue";
	cr_assert_eq(tp_cluster_assign(c, "b", &other, 1, &o), 0);
	tp_request s = box_request(1, 1, 1, 1);
	s.tenant = "red";
	s.exclusive = "pod";
	s.box_rotate = 1;
	cr_assert_eq(tp_place(c, &s, &pl), 0, "%s", tp_placement_errmsg(pl));
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(pl, &n);
	cr_assert_lt(d[0], 4, "red landed in blue's pod: %u", d[0]);
	tp_placement_destroy(pl);
	/* select: a node allow-list leaves only chips of pod 1 */
	const char *allow[] = {"pod1-chip3"};
	s = box_request(1, 1, 1, 1);
	s.select_nodes = allow;
	s.nselect_nodes = 1;
	cr_assert_eq(tp_place(c, &s, &pl), 0, "%s", tp_placement_errmsg(pl));
	d = tp_placement_devices(pl, &n);
	cr_assert_eq(d[0], 7);
	tp_placement_destroy(pl);
	/* 6 usable chips, but pod 0 has a cordon and pod 1 a job: fragmented */
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EFRAGMENTED, tp_placement_errmsg(pl),
	              "fragmented: 6 usable free chip");
	tp_placement_destroy(pl);
	/* busy: fewer usable chips than the box has */
	uint32_t more[2] = {5, 6};
	hold(c, "m", more, 2);
	uint32_t cord = 0;
	cr_assert_eq(tp_cluster_set_cordoned(c, &cord, 1, 1), 0);
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EBUSY, tp_placement_errmsg(pl),
	              "busy: 3 usable free chip, request.box 2x2x1 needs 4");
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, committed_box_records_its_shape_and_ranks_follow_the_snake)
{
	tp_topology *t = torus(4, 4, 4, 0x7, 1);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = box_request(2, 2, 2, 1);
	r.id = "cube";
	tp_placement *pl = NULL;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(pl, &n);
	cr_assert_eq(n, 8);
	for (size_t i = 0; i + 1 < n; i++) {
		unsigned a[3], b[3];
		chip_xyz(t, d[i], a);
		chip_xyz(t, d[i + 1], b);
		unsigned dist = 0;
		for (unsigned k = 0; k < 3; k++)
			dist += a[k] > b[k] ? a[k] - b[k] : b[k] - a[k];
		cr_assert_eq(dist, 1, "ranks %zu and %zu are not neighbours", i, i + 1);
	}
	cr_assert_eq(tp_commit(c, pl, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(pl);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "cube", &o), 0);
	cr_assert(o.shape && o.shape->box_level && strcmp(o.shape->box_level, "pod") == 0);
	cr_assert_eq(o.shape->box[2], 2);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, a_version_3_request_has_no_box)
{
	tp_topology *t = torus(2, 2, 1, 0, 1);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = box_request(2, 2, 1, 1);
	r.version = 3; /* the box fields are past what version 3 has: a plain request of 4 */
	tp_placement *pl = NULL;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid, allocation_failures_leave_nothing_behind)
{
	for (long k = 0;; k++) {
		tp_test_alloc_reset();
		tp_test_alloc_fail_at(k);
		unsigned dims[3] = {4, 4, 2};
		tp_topology *t = NULL;
		int rc = tp_topology_generate_torus(&t, 2, dims, 3, 0x5, &tp_test_allocator);
		tp_cluster *c = NULL;
		if (!rc)
			rc = tp_cluster_create(&c, t, &tp_test_allocator);
		tp_placement *pl = NULL;
		if (!rc) {
			uint32_t d = 3;
			rc = tp_cluster_assign(c, "j", &d, 1, NULL);
		}
		if (!rc) {
			tp_request r = box_request(3, 2, 2, 1);
			r.box_rotate = 1;
			r.box_wrap = 1;
			rc = tp_place(c, &r, &pl);
		}
		bool done = rc == 0 && tp_test_alloc_state.failed == 0;
		cr_assert(rc == 0 || rc == TP_ENOMEM, "allocation %ld: %s", k, tp_err_name(rc));
		tp_placement_destroy(pl);
		tp_cluster_destroy(c);
		tp_topology_destroy(t);
		TP_ASSERT_NO_LEAKS();
		if (done)
			break;
		cr_assert_lt(k, 100000);
	}
}

/* Item 3 of #18: a box request that is fragmented gets a plan that frees a box. A 4x4 mesh
 * holds four migratable one-chip jobs on its diagonal, so no 2x2 box is free although 12 chips
 * are; the plan moves jobs so that one is, and carrying it out places the box. */
Test(grid, defrag_frees_a_box)
{
	tp_topology *t = torus(4, 4, 1, 0, 1);
	tp_cluster *c = tp_test_cluster(t);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	tp_request one = box_request(1, 1, 1, 1);
	o.shape = &one;
	char id[8];
	for (unsigned i = 0; i < 4; i++) {
		uint32_t d = chip(t, i, i, 0);
		snprintf(id, sizeof id, "d%u", i);
		cr_assert_eq(tp_cluster_assign(c, id, &d, 1, &o), 0, "%s", tp_cluster_errmsg(c));
	}
	uint32_t d = chip(t, 3, 0, 0), e = chip(t, 0, 3, 0);
	hold(c, "corner1", &d, 1);
	hold(c, "corner2", &e, 1);
	tp_request r = box_request(2, 2, 1, 1);
	r.id = "box";
	tp_placement *pl = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &pl), TP_EFRAGMENTED, tp_placement_errmsg(pl),
	              "fragmented: 10 usable free chip");
	tp_placement_destroy(pl);
	tp_plan *plan = NULL;
	cr_assert_eq(tp_defrag_plan(c, &r, NULL, &plan), 0, "%s", tp_plan_errmsg(plan));
	cr_assert_eq(tp_plan_moved_job_count(plan), 1, "moving one diagonal job frees a box");
	for (size_t i = 0; i < tp_plan_step_count(plan); i++)
		cr_assert_eq(tp_plan_apply_step(c, plan, i, NULL), 0, "%s", tp_cluster_errmsg(c));
	const char *owner = NULL;
	size_t held = 0;
	for (uint32_t x = 0; x < 16; x++)
		if (tp_cluster_device_state(c, x, &owner) == TP_DEVICE_HELD && !strcmp(owner, "box"))
			held++;
	cr_assert_eq(held, 4, "the plan placed the box on %zu chips", held);
	tp_plan_destroy(plan);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

#ifdef TP_TEST_SCENARIO
/* The scenario extensions topology.x_grid and request.x_box: each malformed value named. */
Test(grid, scenario_extensions_name_the_field)
{
	static const struct {
		const char *grid, *box, *msg;
	} cases[] = {
		{"\"x_grid\": {\"ring\": {\"dims\": [2], \"color\": 1}}", "",
		 "topology.x_grid.ring.color: unknown key (allowed: dims, wrap, coords)"},
		{"\"x_grid\": {\"node\": {\"dims\": [2]}}", "", "topology.x_grid.node: unknown key"},
		{"\"x_grid\": {\"ring\": {}}", "", "topology.x_grid.ring: needs dims"},
		{"\"x_grid\": {\"ring\": {\"dims\": [2, 2, 2, 2]}}", "",
		 "topology.x_grid.ring.dims: has 4 values, at most 3 (x, y, z)"},
		{"\"x_grid\": {\"ring\": {\"dims\": [2048, 2048]}}", "",
		 "topology.x_grid.ring: grid of ring: more than 1048576 cells"},
		{"\"x_grid\": {\"ring\": {\"dims\": [2], \"coords\": [1]}}", "",
		 "topology.x_grid.ring.coords: must be an object (child path -> coordinates), not a "
		 "list"},
		{"\"x_grid\": {\"ring\": {\"dims\": [2], \"coords\": {\"x\": [5]}}}", "",
		 "topology.x_grid.ring.coords.x: coords of x: coords[0] 5 is not below the grid's "
		 "extent 2"},
		{"\"x_grid\": {\"ring\": {\"dims\": [2], \"coords\": {\"x\": [0], \"y\": [1]}}}",
		 ", \"request\": {\"count\": 4, \"x_box\": {\"shape\": [1]}}",
		 "request.x_box.level: must be a level name"},
		{"\"x_grid\": {\"ring\": {\"dims\": [2], \"coords\": {\"x\": [0], \"y\": [1]}}}",
		 ", \"request\": {\"count\": 4, \"x_box\": {\"level\": \"ring\"}}",
		 "request.x_box: needs shape (the box's extents)"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char text[1024], err[512] = "";
		snprintf(text, sizeof text,
		         "{\"version\": 1, \"topology\": {\"levels\": [\"ring\", \"node\"], "
		         "\"nodes\": [{\"name\": \"x\", \"path\": [\"r0\"], \"gpus\": 4}, "
		         "{\"name\": \"y\", \"path\": [\"r0\"], \"gpus\": 4}], %s}%s}",
		         cases[i].grid, cases[i].box);
		tp_scenario_options o;
		cr_assert_eq(tp_scenario_options_init(&o, TP_SCENARIO_OPTIONS_VERSION), 0);
		o.command = cases[i].box[0] ? TP_SCENARIO_PLACE : TP_SCENARIO_TOPOLOGY;
		o.alloc = &tp_test_allocator;
		tp_scenario *sc = NULL;
		int rc = tp_scenario_from_json(&sc, text, strlen(text), &o, err, sizeof err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, cases[i].msg);
		cr_assert_null(sc);
		TP_ASSERT_NO_LEAKS();
	}
}
#endif

/* A replacement chip would break a box: tp_replace refuses a box job and says what to do. */
Test(grid, replace_refuses_a_box_job)
{
	tp_topology *t = torus(4, 4, 1, 0x3, 1);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = box_request(2, 2, 1, 1);
	r.id = "b";
	tp_placement *pl = NULL;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	cr_assert_eq(tp_commit(c, pl, NULL), 0);
	size_t n = 0;
	uint32_t f = tp_placement_devices(pl, &n)[0];
	tp_placement_destroy(pl);
	cr_assert_eq(tp_cluster_set_down(c, &f, 1, 1), 0);
	TP_ASSERT_ERR(tp_replace(c, "b", &f, 1, &pl), TP_EINVAL, tp_placement_errmsg(pl),
	              "replace.job: 'b' is a box of pod (request.box_level): release it and place "
	              "its shape again");
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
