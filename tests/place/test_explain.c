/* SPDX-License-Identifier: MIT */
/*
 * Why a placement fails (place_explain.c): for each constraint that can block a request, the
 * status (infeasible, busy, fragmented, as the spec defines them), the fit figures, and a
 * message that names the constraint, the domain and the figure that blocks it, with
 * per-domain reasons on short lists.
 */
#include <stdio.h>

#include "testutil.h"

/* ---- fixtures ------------------------------------------------------------------------------- */

/* Racks r0 .. r{nr-1}, each of npr nodes n<rack><i> of 4 GPUs, model GB200 with 80 GB. Power
 * feeds: "power" a holds the first half of each rack's nodes, b the rest. */
static tp_topology *fleet(unsigned nr, unsigned npr, bool power)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "GB200";
	o.memory_gb = 80;
	for (unsigned r = 0; r < nr; r++)
		for (unsigned i = 0; i < npr; i++) {
			char rack[16], node[16];
			snprintf(rack, sizeof rack, "r%u", r);
			snprintf(node, sizeof node, "n%u%u", r, i);
			const char *path[] = {rack};
			cr_assert_eq(tp_topology_builder_add_node(b, node, path, 4, &o), 0, "%s",
			             tp_topology_builder_errmsg(b));
			if (power)
				cr_assert_eq(tp_topology_builder_add_failure_domain(
				                 b, "power", i < npr / 2 ? "a" : "b", node, -1), 0);
		}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* Give job id (tenant, shape) the devices first .. first + n - 1 of node `node`. */
static void hold(tp_cluster *c, const char *id, const char *tenant, const tp_request *shape,
                 const char *node, unsigned first, unsigned n)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t devs[TP_MAX_NODE_DEVICES];
	for (unsigned i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s/%u", node, first + i);
		devs[i] = tp_test_dev(t, name);
	}
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.tenant = tenant;
	o.shape = shape;
	cr_assert_eq(tp_cluster_assign(c, id, devs, n, &o), 0, "%s", tp_cluster_errmsg(c));
}

static void set_state(tp_cluster *c, const char *dev, bool cordon)
{
	uint32_t d = tp_test_dev(tp_cluster_topology(c), dev);
	int rc = cordon ? tp_cluster_set_cordoned(c, &d, 1, 1) : tp_cluster_set_down(c, &d, 1, 1);
	cr_assert_eq(rc, 0, "%s", tp_cluster_errmsg(c));
}

/* Every device of a node down (or cordoned). */
static void node_state(tp_cluster *c, const char *node, bool cordon)
{
	for (unsigned i = 0; i < 4; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s/%u", node, i);
		set_state(c, name, cordon);
	}
}

/* tp_place must fail with code and a message holding fragment; the fit figures needed and
 * best are checked when best is not UINT32_MAX; the cluster is left as it was. */
static void fails(const tp_cluster *c, const tp_request *r, int code, uint32_t best,
                  const char *fragment)
{
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	int rc = tp_place(c, r, &p);
	cr_assert_not_null(p);
	TP_ASSERT_ERR(rc, code, tp_placement_errmsg(p), fragment);
	if (getenv("TP_EXPLAIN_SHOW")) /* the whole messages, for docs/errors.md */
		fprintf(stderr, "%s | %s\n", tp_err_name(rc), tp_placement_errmsg(p));
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, r->count);
	if (best != UINT32_MAX)
		cr_assert_eq(fit.best, best, "fit.best %u, expected %u (%s)", fit.best, best,
		             tp_placement_errmsg(p));
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
}

static void done(tp_cluster *c, tp_topology *t)
{
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- failure-domain caps and spread -------------------------------------------------------- */

Test(explain, failure_domain_cap_names_the_cap_not_the_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(1, 4, true);
	tp_cluster *c = tp_test_cluster(t);
	tp_domain_cap cap = {"power", 1, 0};
	tp_request r = TP_REQUEST_INIT;
	r.count = 3;
	r.caps = &cap;
	r.ncaps = 1;
	/* the rack holds 16 devices: the cap, not the rack, blocks (it used to say "one rack could
	 * take at most 3 of them" with needed 3, best 3): best is what the caps let one rack take */
	fails(c, &r, TP_EINFEASIBLE, 2,
	      "infeasible: request.max_per_domain[0] (at most 1 device in one power domain) lets the "
	      "2 power domains with usable devices take at most 2 of the 3 devices even with every "
	      "other job gone");
	tp_domain_cap caps[] = {{"rack", 16, 0}, {"power", 0, 1}};
	r.caps = caps;
	r.ncaps = 2;
	r.count = 12;
	r.group_size = 4;
	fails(c, &r, TP_EINFEASIBLE, 8,
	      "infeasible: request.max_per_domain[1] (at most 1 group in one power domain) lets the 2 "
	      "power domains with usable devices take at most 8 of the 12 devices");
	done(c, t);
}

Test(explain, failure_domain_spread_names_the_domains_it_has)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(1, 4, true);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 3;
	r.spread_level = "power";
	r.spread_min_domains = 3;
	fails(c, &r, TP_EINFEASIBLE, 3,
	      "infeasible: request.spread.min_domains 3 over power: the usable devices lie in only 2 "
	      "power domains even with every other job gone");
	/* feed b's nodes busy: one feed left now */
	hold(c, "b2", "t1", NULL, "n02", 0, 4);
	hold(c, "b3", "t1", NULL, "n03", 0, 4);
	r.spread_min_domains = 2;
	r.count = 2;
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: request.spread.min_domains 2 over power: the usable devices lie in only 1 "
	      "power domain now");
	done(c, t);
}

/* ---- exclusivity -------------------------------------------------------------------------- */

Test(explain, exclusive_names_the_tenants_that_hold_each_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(6, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	const char *jobs[] = {"a", "b", "c", "d", "e", "f"};
	for (unsigned i = 0; i < 6; i++) {
		char node[8];
		snprintf(node, sizeof node, "n%u0", i);
		hold(c, jobs[i], "t1", NULL, node, 0, 1);
	}
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.tenant = "t2";
	r.exclusive = "rack";
	/* it used to say "(the best rack, -, can take 0 of the 2)" */
	fails(c, &r, TP_EFRAGMENTED, 0,
	      "fragmented: 42 devices are free but request.exclusive keeps the request out of every "
	      "rack that has free devices: each holds another tenant's job (r0: tenant t1's job 'a'; "
	      "r1: tenant t1's job 'b'; r2: tenant t1's job 'c'; r3: tenant t1's job 'd'; and 2 more)");
	/* the same tenant's jobs do not count */
	r.tenant = "t1";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	done(c, t);
}

Test(explain, an_exclusive_job_of_another_tenant_is_named_per_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 1;
	shape.exclusive = "rack";
	hold(c, "x", "t3", &shape, "n00", 0, 1);
	hold(c, "y", "t1", NULL, "n10", 0, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.tenant = "t2";
	r.required = "rack";
	fails(c, &r, TP_EFRAGMENTED, 7,
	      "fragmented: 14 devices are free but the best rack (r1) can take 7 of the 8 the request "
	      "needs in one rack; r0: tenant t3's job 'x' holds it exclusively; r1: 1 device in use");
	done(c, t);
}

/* ---- units: groups and slices --------------------------------------------------------------- */

Test(explain, a_group_larger_than_every_node)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.group_size = 8;
	fails(c, &r, TP_EINFEASIBLE, 0,
	      "infeasible: request.group.size 8 is more than any node holds (at most 4 devices)");
	done(c, t);
}

Test(explain, slices_larger_than_every_rack_and_slices_the_free_devices_cannot_make)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(4, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_slice sl = {"rack", 16};
	tp_request r = TP_REQUEST_INIT;
	r.count = 16;
	r.slices = &sl;
	r.nslices = 1;
	fails(c, &r, TP_EINFEASIBLE, 0,
	      "infeasible: request.slices[0].size 16 is more than any rack holds (at most 8 devices)");
	/* 3 free devices in each rack: 12 free, no rack makes a slice of 4 */
	const char *ids[] = {"a", "b", "c", "d"};
	for (unsigned i = 0; i < 4; i++) {
		char n0[8], n1[8], id2[8];
		snprintf(n0, sizeof n0, "n%u0", i);
		snprintf(n1, sizeof n1, "n%u1", i);
		snprintf(id2, sizeof id2, "%s2", ids[i]);
		hold(c, ids[i], "t1", NULL, n0, 0, 4);
		hold(c, id2, "t1", NULL, n1, 0, 1);
	}
	sl.size = 4;
	r.count = 8;
	fails(c, &r, TP_EFRAGMENTED, 0,
	      "fragmented: 12 devices are free but whole request.slices (4 devices in one rack) take "
	      "only 0 of the 8");
	done(c, t);
}

Test(explain, groups_the_free_devices_cannot_make)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "t1", NULL, "n00", 0, 1);
	hold(c, "b", "t1", NULL, "n01", 0, 1);
	hold(c, "c", "t1", NULL, "n10", 0, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.group_size = 4;
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: 13 devices are free but whole groups of request.group.size 4 (each inside "
	      "one node) take only 4 of the 8");
	done(c, t);
}

/* ---- colocation ----------------------------------------------------------------------------- */

Test(explain, colocate_names_the_domain_of_the_target)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "decode", "t1", NULL, "n10", 0, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.tenant = "t1";
	r.colocate_job = "decode";
	r.colocate_level = "rack";
	/* it used to name the top level's best rack (r0), which colocation does not allow */
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.colocate needs one rack holding job 'decode': r1 could take at "
	      "most 7 of the 8 devices even with every other job gone; r1: 1 device in use");
	hold(c, "other", "t1", NULL, "n11", 0, 4);
	r.count = 4;
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: 11 devices are free but request.colocate needs one rack holding job "
	      "'decode': r1 could take at most 3 of the 4 devices now; r1: 5 devices in use");
	done(c, t);
}

/* ---- select --------------------------------------------------------------------------------- */

Test(explain, select_names_the_filter_and_its_count)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.select_model = "B200";
	/* it used to say "one rack could take at most 0 of them" */
	fails(c, &r, TP_EINFEASIBLE, 0,
	      "infeasible: request.select.model 'B200': no node has that model");
	/* every node has the model: the size of the topology is what blocks */
	r.select_model = "GB200";
	r.count = 17;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: the request's 17 devices are more than the topology's 16");
	r = (tp_request)TP_REQUEST_INIT;
	r.count = 4;
	r.select_min_memory_gb = 100;
	fails(c, &r, TP_EINFEASIBLE, 0,
	      "infeasible: request.select.min_memory_gb 100: 0 healthy, uncordoned devices have that "
	      "much memory, the request needs 4");
	r.select_min_memory_gb = 0;
	r.select_min_perf = 2;
	fails(c, &r, TP_EINFEASIBLE, 0,
	      "infeasible: request.select.min_perf 2: 0 healthy, uncordoned devices are that fast, "
	      "the request needs 4");
	r.select_min_perf = 0;
	const char *allow[] = {"n00", "n11"};
	r.select_nodes = allow;
	r.nselect_nodes = 2;
	r.count = 9;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.select.nodes allows 2 nodes with 8 healthy, uncordoned devices, "
	      "the request needs 9");
	/* a down device counts against the allow-list */
	set_state(c, "n00/1", false);
	r.count = 8;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.select.nodes allows 2 nodes with 7 healthy, uncordoned devices, "
	      "the request needs 8");
	done(c, t);
}

/* ---- caps and spread on the tree ------------------------------------------------------------ */

Test(explain, a_tree_cap_names_the_cap_and_what_it_lets_through)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(4, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_domain_cap cap = {"rack", 2, 0};
	tp_request r = TP_REQUEST_INIT;
	r.count = 10;
	r.caps = &cap;
	r.ncaps = 1;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.max_per_domain[0] (at most 2 devices in one rack) lets the racks "
	      "take at most 8 of the 10 devices even with every other job gone");
	/* r3 full: 6 now */
	hold(c, "a", "t1", NULL, "n30", 0, 4);
	hold(c, "b", "t1", NULL, "n31", 0, 4);
	r.count = 8;
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: request.max_per_domain[0] (at most 2 devices in one rack) lets the racks "
	      "take at most 6 of the 8 devices now");
	/* a cap below one group */
	r.group_size = 4;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.max_per_domain[0] lets one rack hold 2 devices, less than one of "
	      "the request's units of 4 (its groups and slices)");
	done(c, t);
}

Test(explain, a_tree_spread_names_the_domains_that_can_take_a_unit)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(4, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	const char *down[] = {"n20", "n21", "n30", "n31"};
	for (unsigned i = 0; i < 4; i++)
		node_state(c, down[i], false);
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.spread_level = "rack";
	r.spread_min_domains = 3;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.spread.min_domains 3 over rack: only 2 racks can take a unit of 1 "
	      "device even with every other job gone");
	r.spread_min_domains = 2;
	hold(c, "a", "t1", NULL, "n10", 0, 4);
	hold(c, "b", "t1", NULL, "n11", 0, 4);
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: request.spread.min_domains 2 over rack: only 1 rack can take a unit of 1 "
	      "device now");
	done(c, t);
}

/* ---- health and cordons: per-domain reasons, bounded ---------------------------------------- */

Test(explain, health_and_cordons_are_given_per_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(6, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	node_state(c, "n00", false);
	set_state(c, "n10/2", true);
	node_state(c, "n21", true);
	set_state(c, "n30/0", false);
	set_state(c, "n40/0", false);
	set_state(c, "n50/3", true);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.required = "rack";
	fails(c, &r, TP_EINFEASIBLE, 7,
	      "infeasible: the request's 8 devices cannot be placed even with every other job gone "
	      "(healthy, uncordoned, matching devices; one rack could take at most 7 of them); r0: 1 "
	      "node down; r1: 1 device cordoned; r2: 4 devices cordoned; r3: 1 device down; and 2 "
	      "more");
	/* unconstrained: short of healthy devices in all */
	r.required = NULL;
	r.count = 40;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: 36 of the topology's 48 devices are healthy and uncordoned (6 down, 6 "
	      "cordoned), the request needs 40; r0: 1 node down; r1: 1 device cordoned;");
	done(c, t);
}

Test(explain, a_long_level_gets_no_per_domain_walk)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(20, 1, false);
	tp_cluster *c = tp_test_cluster(t);
	for (unsigned i = 0; i < 20; i++) {
		char dev[16];
		snprintf(dev, sizeof dev, "n%u0/0", i);
		set_state(c, dev, false);
	}
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.required = "rack";
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "one rack could take at most 3 of them)");
	cr_assert_null(strstr(tp_placement_errmsg(p), "r0:"), "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	done(c, t);
}

Test(explain, busy_keeps_its_message)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 1, false);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "t1", NULL, "n00", 0, 4);
	tp_request r = TP_REQUEST_INIT;
	r.count = 5;
	fails(c, &r, TP_EBUSY, 4, "busy: 4 matching devices are free, the request needs 5");
	done(c, t);
}

/* Two racks of two 4-GPU nodes: r0 GB200 (80 GB, perf 1), r1 H100 (40 GB, perf 2). */
static tp_topology *mixed(void)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	const char *names[] = {"g0", "g1", "h0", "h1"};
	for (unsigned i = 0; i < 4; i++) {
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.model = i < 2 ? "GB200" : "H100";
		o.memory_gb = i < 2 ? 80 : 40;
		o.perf = i < 2 ? 1.0 : 2.0;
		const char *path[] = {i < 2 ? "r0" : "r1"};
		cr_assert_eq(tp_topology_builder_add_node(b, names[i], path, 4, &o), 0);
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

Test(explain, select_filters_alone_and_together)
{
	tp_test_alloc_reset();
	tp_topology *t = mixed();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 9;
	r.select_model = "H100";
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.select.model 'H100': 8 healthy, uncordoned devices have that "
	      "model, the request needs 9");
	/* each filter alone leaves 8, together none */
	r.count = 6;
	r.select_model = "GB200";
	r.select_min_perf = 1.5;
	fails(c, &r, TP_EINFEASIBLE, 0,
	      "infeasible: request.select's filters together leave 0 healthy, uncordoned devices, "
	      "the request needs 6");
	done(c, t);
}

Test(explain, exclusivity_that_keeps_the_request_out_of_some_racks)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(3, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 1;
	shape.exclusive = "rack";
	hold(c, "x", "t3", &shape, "n00", 0, 1);
	hold(c, "y", "t3", &shape, "n10", 0, 1);
	hold(c, "z", "t1", NULL, "n20", 0, 4);
	tp_request r = TP_REQUEST_INIT;
	r.count = 6;
	r.tenant = "t2";
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: 18 devices are free but another tenant's exclusive job keeps the request "
	      "out of 2 of the 3 racks that have free devices (r0: tenant t3's job 'x'; r1: tenant "
	      "t3's job 'y'); the others can take 4 of the 6");
	/* every rack with free devices */
	hold(c, "w", "t1", NULL, "n21", 0, 4);
	r.count = 2;
	fails(c, &r, TP_EFRAGMENTED, UINT32_MAX,
	      "fragmented: 14 devices are free but another tenant's exclusive job keeps the request "
	      "out of every rack that has free devices: each holds another tenant's job (r0: tenant "
	      "t3's job 'x'; r1: tenant t3's job 'y')");
	done(c, t);
}

Test(explain, failure_domain_rules_together_and_a_spread_wider_than_the_request)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(1, 4, true);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.spread_level = "power";
	r.spread_min_domains = 3;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.spread.min_domains 3 over power needs more devices than the "
	      "request's 2");
	/* 4 devices of feed a and 4 of feed b pass a cap of 2 per feed counted device by device,
	 * but a group of 3 lies in one node, so in one feed */
	tp_domain_cap cap = {"power", 2, 0};
	r = (tp_request)TP_REQUEST_INIT;
	r.caps = &cap;
	r.ncaps = 1;
	r.count = 3;
	r.group_size = 3;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: no placement of the 3 devices in groups of 3 meets the failure-domain "
	      "rules (request.max_per_domain[0] over power) even with every other job gone, though "
	      "counted device by device they leave room");
	done(c, t);
}

/* ---- no rule alone: the level's figures, with per-rack reasons ------------------------------ */

Test(explain, rules_that_block_only_together_fall_back_to_the_racks)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "t1", NULL, "n00", 0, 1);
	hold(c, "b", "t2", NULL, "n11", 0, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 12;
	r.group_size = 4;
	r.tenant = "t2";
	r.exclusive = "rack";
	/* exclusivity keeps r0's 7 out, groups leave r1 with 4: neither alone explains 12 */
	fails(c, &r, TP_EFRAGMENTED, 4,
	      "fragmented: 14 devices are free but not where the request's constraints need them "
	      "(the best rack, r1, can take 4 of the 12); r0: tenant t1's job 'a' runs there "
	      "(request.exclusive); r1: 1 device in use");
	hold(c, "d", "t2", NULL, "n10", 0, 1);
	r.count = 8;
	fails(c, &r, TP_EFRAGMENTED, 0,
	      "fragmented: 13 devices are free but not where the request's constraints need them "
	      "(no rack can take any of the 8); r0: tenant t1's job 'a' runs there "
	      "(request.exclusive); r1: 2 devices in use");
	done(c, t);
}

/* ---- random requests: every failure's message starts with its status ------------------------ */

static const char *status_word(int rc)
{
	return rc == TP_EINFEASIBLE ? "infeasible: " : rc == TP_EBUSY ? "busy: " : "fragmented: ";
}

/* One random request on the state of c, built from the menu of constraints. */
static void random_request(uint64_t *s, tp_request *r, tp_domain_cap *caps, tp_slice *sl,
                           const char **allow)
{
	*r = (tp_request)TP_REQUEST_INIT;
	static const uint32_t groups[] = {1, 1, 2, 4};
	r->group_size = groups[tp_test_below(s, 4)];
	r->count = r->group_size * (1 + tp_test_below(s, 10));
	r->tenant = tp_test_below(s, 2) ? "t1" : "t2";
	switch (tp_test_below(s, 3)) {
	case 0: r->required = "rack"; break;
	case 1: r->preferred = "rack"; break;
	default: break;
	}
	size_t nc = 0;
	if (tp_test_below(s, 3) == 0)
		caps[nc++] = (tp_domain_cap){"rack", 1 + tp_test_below(s, 8), 0};
	if (tp_test_below(s, 3) == 0)
		caps[nc++] = (tp_domain_cap){"power", 0, 1 + tp_test_below(s, 3)};
	r->caps = nc ? caps : NULL;
	r->ncaps = nc;
	if (tp_test_below(s, 4) == 0) {
		r->spread_level = tp_test_below(s, 2) ? "rack" : "power";
		r->spread_min_domains = 2 + tp_test_below(s, 2);
	}
	if (tp_test_below(s, 4) == 0)
		r->exclusive = "rack";
	if (tp_test_below(s, 5) == 0) {
		r->colocate_job = "j0";
		r->colocate_level = "rack";
	}
	if (tp_test_below(s, 6) == 0)
		r->select_model = tp_test_below(s, 2) ? "GB200" : "B200";
	if (tp_test_below(s, 6) == 0) {
		r->select_nodes = allow;
		r->nselect_nodes = 2;
	}
	if (tp_test_below(s, 6) == 0 && r->required && !r->colocate_job) {
		sl->level = "rack";
		sl->size = r->count;
		r->slices = sl;
		r->nslices = 1;
	}
}

Test(explain, every_failure_of_random_requests_says_its_status_and_a_reason)
{
	tp_test_alloc_reset();
	uint64_t seed = 14;
	long failures = 0, generic = 0;
	for (int round = 0; round < 12; round++) {
		tp_topology *t = fleet(3 + tp_test_below(&seed, 3), 2 + 2 * tp_test_below(&seed, 2), true);
		tp_cluster *c = tp_test_cluster(t);
		uint32_t nn = tp_topology_node_count(t);
		tp_request shape = TP_REQUEST_INIT;
		shape.count = 1;
		shape.exclusive = "rack";
		for (uint32_t n = 0; n < nn; n++) {
			const char *node = tp_topology_node_name(t, n);
			unsigned k = tp_test_below(&seed, 5);
			char id[16];
			snprintf(id, sizeof id, "j%u", n);
			if (k)
				hold(c, id, tp_test_below(&seed, 2) ? "t1" : "t3",
				     tp_test_below(&seed, 8) == 0 ? &shape : NULL, node, 0, k);
			if (tp_test_below(&seed, 10) == 0)
				node_state(c, node, tp_test_below(&seed, 2));
		}
		const char *allow[] = {tp_topology_node_name(t, 0), tp_topology_node_name(t, nn - 1)};
		for (int i = 0; i < 60; i++) {
			tp_request r;
			tp_domain_cap caps[2];
			tp_slice sl;
			random_request(&seed, &r, caps, &sl, allow);
			tp_placement *p = NULL;
			int rc = tp_place(c, &r, &p);
			if (rc == TP_EINFEASIBLE || rc == TP_EBUSY || rc == TP_EFRAGMENTED) {
				const char *m = tp_placement_errmsg(p);
				failures++;
				cr_assert(strncmp(m, status_word(rc), strlen(status_word(rc))) == 0,
				          "%s: %s", tp_err_name(rc), m);
				cr_assert(strlen(m) > 30, "%s", m);
				cr_assert_null(strstr(m, ", -,"), "a domain with no name: %s", m);
				tp_fit fit = TP_FIT_INIT;
				cr_assert_eq(tp_placement_fit(p, &fit), 0);
				cr_assert(fit.best <= fit.needed && fit.best <= fit.free_total, "%s", m);
				generic += strstr(m, "not where the request's constraints") != NULL;
				if (getenv("TP_EXPLAIN_SHOW"))
					fprintf(stderr, "%s | %s [count %u group %u req %s pref %s caps %zu "
					        "spread %s/%u excl %s coloc %s model %s nodes %zu; %u devices]\n",
					        tp_err_name(rc), m, r.count, r.group_size, r.required ? "y" : "-",
					        r.preferred ? "y" : "-", r.ncaps,
					        r.spread_level ? r.spread_level : "-", r.spread_min_domains,
					        r.exclusive ? "y" : "-", r.colocate_job ? "y" : "-",
					        r.select_model ? r.select_model : "-", r.nselect_nodes,
					        tp_topology_device_count(t));
			} else {
				cr_assert(rc == 0 || rc == TP_ENOTFOUND || rc == TP_EINVAL, "%s: %s",
				          tp_err_name(rc), tp_placement_errmsg(p));
			}
			tp_placement_destroy(p);
		}
		tp_cluster_destroy(c);
		tp_topology_destroy(t);
	}
	cr_assert_gt(failures, 100, "only %ld failures: the menu should fail often", failures);
	cr_log_info("%ld failures, %ld with the generic fragmented message", failures, generic);
	TP_ASSERT_NO_LEAKS();
}

Test(explain, a_spread_inside_the_one_domain_the_request_must_sit_in)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.required = "rack";
	r.spread_level = "rack";
	r.spread_min_domains = 2;
	fails(c, &r, TP_EINFEASIBLE, UINT32_MAX,
	      "infeasible: request.spread.min_domains 2 over rack cannot be met inside one rack "
	      "(request.required)");
	done(c, t);
}

Test(explain, no_rack_of_a_required_level_takes_any)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 2, false);
	tp_cluster *c = tp_test_cluster(t);
	const char *nodes[] = {"n00", "n01", "n10", "n11"};
	for (unsigned i = 0; i < 4; i++)
		hold(c, nodes[i], "t1", NULL, nodes[i], 0, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.group_size = 4;
	r.required = "rack";
	fails(c, &r, TP_EFRAGMENTED, 0,
	      "fragmented: 12 devices are free but no rack can take any of the 8 the request needs in "
	      "one rack; r0: 2 devices in use; r1: 2 devices in use");
	done(c, t);
}

/* ---- allocation failures: an explanation that runs out of memory says so, leaks nothing ------- */

/* Fail allocation n = 0, 1, ... of tp_place until the call gives the failure it gives with
 * memory enough: each earlier call is TP_ENOMEM with no result and nothing left allocated. */
static void alloc_loop(const tp_cluster *c, const tp_request *r)
{
	tp_placement *p = NULL;
	int want = tp_place(c, r, &p);
	char msg[512];
	snprintf(msg, sizeof msg, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	long live = tp_test_alloc_state.live;
	for (long n = 0;; n++) {
		tp_test_alloc_fail_at(n);
		int rc = tp_place(c, r, &p);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			cr_assert_null(p);
			cr_assert_eq(tp_test_alloc_state.live, live, "allocation %ld: a leak", n);
			continue;
		}
		cr_assert_eq(rc, want, "allocation %ld: %s", n, tp_err_name(rc));
		cr_assert_str_eq(tp_placement_errmsg(p), msg);
		tp_placement_destroy(p);
		cr_assert_eq(tp_test_alloc_state.live, live);
		break;
	}
}

Test(explain, allocation_failures_in_an_explanation)
{
	tp_test_alloc_reset();
	tp_topology *t = fleet(2, 4, true);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "t1", NULL, "n00", 0, 1);
	hold(c, "b", "t1", NULL, "n10", 0, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.tenant = "t2";
	r.exclusive = "rack";
	alloc_loop(c, &r);
	tp_domain_cap cap = {"power", 1, 0};
	r = (tp_request)TP_REQUEST_INIT;
	r.count = 5;
	r.caps = &cap;
	r.ncaps = 1;
	alloc_loop(c, &r);
	r = (tp_request)TP_REQUEST_INIT;
	r.count = 8;
	r.tenant = "t1";
	r.colocate_job = "a";
	r.colocate_level = "rack";
	alloc_loop(c, &r);
	done(c, t);
}
