/* SPDX-License-Identifier: MIT */
/* Topology: builder validation, tree order, look-ups both ways, failure domains, node types,
 * generators, and allocation failures. */
#include <stdio.h>

#include "testutil.h"

static const char *const L3[] = {"block", "rack", "node"};

static tp_topology_builder *new_builder(const char *const *levels, unsigned n)
{
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, n, &tp_test_allocator), 0);
	return b;
}

static void add(tp_topology_builder *b, const char *name, const char *p0, const char *p1,
                unsigned gpus)
{
	const char *path[2] = {p0, p1};
	int rc = tp_topology_builder_add_node(b, name, path, gpus, NULL);
	cr_assert_eq(rc, 0, "%s: %s", name, tp_topology_builder_errmsg(b));
}

static void setup(void) { tp_test_alloc_reset(); }

TestSuite(topology, .init = setup);

Test(topology, builder_rejects_bad_levels)
{
	tp_topology_builder *b = NULL;
	const char *dup[] = {"rack", "rack"};
	const char *slash[] = {"a/b", "node"};
	const char *cl[] = {"cluster", "node"};
	const char *empty[] = {"", "node"};
	const char *nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
	cr_assert_eq(tp_topology_builder_create(NULL, L3, 3, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, NULL, 3, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, L3, 0, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, dup, 2, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, slash, 2, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, cl, 2, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, empty, 2, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_builder_create(&b, nine, 9, NULL), TP_ELIMIT);
	tp_allocator half = tp_test_allocator;
	half.free = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, L3, 3, &half), TP_EINVAL);
	cr_assert_null(b);
	tp_topology_builder_destroy(NULL);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, add_node_validates_and_changes_nothing_on_failure)
{
	tp_topology_builder *b = new_builder(L3, 3);
	add(b, "x1", "b1", "r1", 4);
	const char *path[2] = {"b1", "r1"};
	const char *badpath[2] = {"b1", "r/1"};
	const char *emptypath[2] = {"", "r1"};
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x1", path, 4, NULL), TP_EEXIST,
	              tp_topology_builder_errmsg(b), "x1 is used twice");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x/2", path, 4, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "node name 'x/2' contains '/'");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "", path, 4, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "node name '' is empty");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", badpath, 4, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "path[1] (rack)");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", emptypath, 4, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "path[0] (block) is empty");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", NULL, 4, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "path is NULL");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 0, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "gpus 0");
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 257, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "gpus 257");
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.perf = 0;
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 4, &o), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "perf 0");
	o = (tp_node_options)TP_NODE_OPTIONS_INIT;
	o.memory_gb = -1;
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 4, &o), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "memory_gb -1");
	double perf[2] = {1.0, -2.0};
	o = (tp_node_options)TP_NODE_OPTIONS_INIT;
	o.device_perf = perf;
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 2, &o), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "perf of device 1");
	o = (tp_node_options)TP_NODE_OPTIONS_INIT;
	o.version = 99;
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 4, &o), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "version 99");
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 8, &tp_test_allocator), 0);
	o = (tp_node_options)TP_NODE_OPTIONS_INIT;
	o.type = nt;
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "x2", path, 4, &o), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "node type's 8 GPUs");
	tp_nodetype_destroy(nt);

	/* Nothing of the failed calls is left: one node, one rack, one block. */
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	cr_assert_eq(tp_topology_node_count(t), 1);
	cr_assert_eq(tp_topology_device_count(t), 4);
	cr_assert_eq(tp_topology_domain_count(t, 0), 1);
	cr_assert_eq(tp_topology_domain_count(t, 1), 1);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, build_needs_a_node)
{
	tp_topology_builder *b = new_builder(L3, 3);
	tp_topology *t = NULL;
	TP_ASSERT_ERR(tp_topology_build(b, &t), TP_EINVAL, tp_topology_builder_errmsg(b), "no node");
	cr_assert_null(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

/* Nodes added out of tree order come out grouped by domain, in order of first appearance. */
Test(topology, tree_order_and_lookups)
{
	tp_topology_builder *b = new_builder(L3, 3);
	add(b, "x1", "b1", "r1", 4);
	add(b, "x2", "b2", "r1", 2); /* a different rack named r1, under b2 */
	add(b, "x3", "b1", "r2", 4);
	add(b, "x4", "b1", "r1", 8);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);

	cr_assert_eq(tp_topology_level_count(t), 3);
	cr_assert_str_eq(tp_topology_level_name(t, 1), "rack");
	cr_assert_eq(tp_topology_level_by_name(t, "node"), 2);
	cr_assert_eq(tp_topology_level_by_name(t, "pod"), TP_ENOTFOUND);
	cr_assert_eq(tp_topology_domain_count(t, 0), 2);
	cr_assert_eq(tp_topology_domain_count(t, 1), 3);
	cr_assert_eq(tp_topology_node_count(t), 4);
	cr_assert_eq(tp_topology_device_count(t), 18);

	/* tree order: b1/r1 {x1, x4}, b1/r2 {x3}, b2/r1 {x2} */
	const char *order[] = {"x1", "x4", "x3", "x2"};
	for (uint32_t i = 0; i < 4; i++) {
		cr_assert_str_eq(tp_topology_node_name(t, i), order[i]);
		uint32_t id;
		cr_assert_eq(tp_topology_node_by_name(t, order[i], &id), 0);
		cr_assert_eq(id, i);
	}
	char buf[64];
	const char *racks[] = {"b1/r1", "b1/r2", "b2/r1"};
	for (uint32_t r = 0; r < 3; r++) {
		cr_assert_eq(tp_topology_domain_path(t, 1, r, buf, sizeof buf), (int)strlen(racks[r]));
		cr_assert_str_eq(buf, racks[r]);
		uint32_t d;
		cr_assert_eq(tp_topology_domain_by_path(t, 1, racks[r], &d), 0);
		cr_assert_eq(d, r);
	}
	uint32_t d;
	cr_assert_eq(tp_topology_domain_by_path(t, 1, "b2/r2", &d), TP_ENOTFOUND);
	cr_assert_eq(tp_topology_domain_by_path(t, 2, "x3", &d), 0);
	cr_assert_eq(d, 2);
	/* snprintf-style truncation */
	cr_assert_eq(tp_topology_domain_path(t, 1, 2, buf, 3), 5);
	cr_assert_str_eq(buf, "b2");
	cr_assert_eq(tp_topology_domain_path(t, 1, 2, NULL, 0), 5);
	cr_assert_str_eq(tp_topology_domain_name(t, 1, 2), "r1");
	cr_assert_str_eq(tp_topology_domain_name(t, 2, 1), "x4");

	uint32_t first, n;
	cr_assert_eq(tp_topology_domain_children(t, 0, 0, &first, &n), 0);
	cr_assert_eq(first, 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(tp_topology_domain_children(t, 1, 0, &first, &n), 0);
	cr_assert_eq(first, 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(tp_topology_domain_children(t, 2, 0, &first, &n), TP_EINVAL);
	cr_assert_eq(tp_topology_domain_nodes(t, 0, 1, &first, &n), 0);
	cr_assert_eq(first, 3);
	cr_assert_eq(n, 1);
	cr_assert_eq(tp_topology_domain_devices(t, 0, 0, &first, &n), 0);
	cr_assert_eq(first, 0);
	cr_assert_eq(n, 16);
	cr_assert_eq(tp_topology_domain_devices(t, 1, 0, &first, &n), 0);
	cr_assert_eq(n, 12);
	cr_assert_eq(tp_topology_domain_parent(t, 1, 2), 1);
	cr_assert_eq(tp_topology_domain_parent(t, 2, 3), 2);
	cr_assert_eq(tp_topology_domain_parent(t, 0, 0), TP_NONE);
	cr_assert_eq(tp_topology_node_domain(t, 3, 0), 1);
	cr_assert_eq(tp_topology_node_domain(t, 1, 1), 0);
	cr_assert_eq(tp_topology_node_domain(t, 9, 1), TP_NONE);

	uint32_t dev;
	cr_assert_eq(tp_topology_device_by_name(t, "x4/7", &dev), 0);
	cr_assert_eq(dev, 11);
	cr_assert_eq(tp_topology_device_node(t, dev), 1);
	cr_assert_eq(tp_topology_device_index(t, dev), 7);
	cr_assert_eq(tp_topology_device_by_name(t, "x4/8", &dev), TP_ENOTFOUND);
	cr_assert_eq(tp_topology_device_by_name(t, "x9/0", &dev), TP_ENOTFOUND);
	cr_assert_eq(tp_topology_device_by_name(t, "x4", &dev), TP_EINVAL);
	cr_assert_eq(tp_topology_device_by_name(t, "x4/a", &dev), TP_EINVAL);
	cr_assert_eq(tp_topology_device_by_name(t, "x4/", &dev), TP_EINVAL);

	int lvl;
	cr_assert_eq(tp_topology_common_level(t, 0, 3, &lvl), 0); /* x1/0, x1/3 */
	cr_assert_eq(lvl, 2);
	cr_assert_eq(tp_topology_common_level(t, 0, 4, &lvl), 0); /* x1, x4: rack */
	cr_assert_eq(lvl, 1);
	cr_assert_eq(tp_topology_common_level(t, 0, 12, &lvl), 0); /* x1, x3: block */
	cr_assert_eq(lvl, 0);
	cr_assert_eq(tp_topology_common_level(t, 0, 17, &lvl), 0); /* x1, x2: none */
	cr_assert_eq(lvl, TP_LEVEL_CLUSTER);
	cr_assert_eq(tp_topology_common_level(t, 0, 18, &lvl), TP_EINVAL);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, generate_names_like_the_scenario_format)
{
	tp_topology_builder *b = new_builder(L3, 3);
	unsigned counts[3] = {2, 3, 18};
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "GB200";
	o.memory_gb = 186;
	cr_assert_eq(tp_topology_builder_generate(b, counts, 4, &o), 0);
	add(b, "extra", "block1", "rack2", 8); /* listed nodes come after generated ones */
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	cr_assert_eq(tp_topology_node_count(t), 109);
	cr_assert_eq(tp_topology_device_count(t), 2 * 3 * 18 * 4 + 8);
	uint32_t id;
	cr_assert_eq(tp_topology_node_by_name(t, "block1-rack2-node17", &id), 0);
	cr_assert_eq(id, 107);
	cr_assert_eq(tp_topology_node_by_name(t, "extra", &id), 0);
	cr_assert_eq(id, 108);
	cr_assert_eq(tp_topology_node_domain(t, 108, 1), 5);
	char buf[64];
	tp_topology_domain_path(t, 1, 5, buf, sizeof buf);
	cr_assert_str_eq(buf, "block1/rack2");
	cr_assert_str_eq(tp_topology_node_model(t, 0), "GB200");
	cr_assert_null(tp_topology_node_model(t, 108));
	cr_assert_float_eq(tp_topology_node_memory_gb(t, 0), 186.0, 1e-9);
	cr_assert_float_eq(tp_topology_device_perf(t, 0), 1.0, 1e-9);
	cr_assert(tp_topology_memory(t) > 0);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, generate_rejects_and_rewinds)
{
	tp_topology_builder *b = new_builder(L3, 3);
	add(b, "block0-rack1-node1", "b", "r", 4); /* a generated name, taken in advance */
	unsigned counts[3] = {1, 2, 2};
	unsigned zero[3] = {1, 0, 2};
	TP_ASSERT_ERR(tp_topology_builder_generate(b, zero, 4, NULL), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "counts[1] (rack) is 0");
	TP_ASSERT_ERR(tp_topology_builder_generate(b, counts, 4, NULL), TP_EEXIST,
	              tp_topology_builder_errmsg(b), "block0-rack1-node1 is used twice");
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	cr_assert_eq(tp_topology_node_count(t), 1);
	cr_assert_eq(tp_topology_domain_count(t, 0), 1);
	cr_assert_eq(tp_topology_domain_count(t, 1), 1);
	uint32_t d;
	cr_assert_eq(tp_topology_domain_by_path(t, 0, "block0", &d), TP_ENOTFOUND);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, fabrics)
{
	tp_topology_builder *b = new_builder(L3, 3);
	add(b, "x", "b", "r", 1);
	TP_ASSERT_ERR(tp_topology_builder_set_fabric(b, 3, TP_LINK_IB, 1, 1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "level 3");
	TP_ASSERT_ERR(tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 0, 1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "gbps 0");
	TP_ASSERT_ERR(tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 1, -1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "latency_us -1");
	TP_ASSERT_ERR(tp_topology_builder_set_fabric(b, 0, (tp_link_kind)7, 1, 1), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "kind 7");
	cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900, 3.4), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_link_kind k;
	double g, lat;
	cr_assert_eq(tp_topology_fabric(t, 1, &k, &g, &lat), 0);
	cr_assert_eq(k, TP_LINK_NVLINK);
	cr_assert_float_eq(g, 900, 1e-9);
	cr_assert_eq(tp_topology_fabric(t, 2, &k, &g, NULL), 0); /* default node fabric */
	cr_assert_eq(k, TP_LINK_NVLINK);
	cr_assert_eq(tp_topology_fabric(t, 0, &k, &g, NULL), 0); /* default level fabric */
	cr_assert_eq(k, TP_LINK_IB);
	cr_assert_float_eq(g, 50, 1e-9);
	cr_assert_eq(tp_topology_fabric(t, TP_LEVEL_CLUSTER, &k, &g, NULL), 0);
	cr_assert_float_eq(g, 25, 1e-9);
	cr_assert_eq(tp_topology_fabric(t, 3, &k, &g, NULL), TP_EINVAL);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, failure_domains)
{
	tp_topology_builder *b = new_builder(L3, 3);
	add(b, "x3", "b1", "r1", 2);
	add(b, "x4", "b1", "r1", 2);
	add(b, "x5", "b1", "r2", 2);
	add(b, "x6", "b1", "r2", 2);
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "pdu-a", "x3", -1), 0);
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "pdu-a", "x4", -1), 0);
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "pdu-b", "x5", 0), 0);
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "power", "pdu-b", "x3", -1),
	              TP_EEXIST, tp_topology_builder_errmsg(b), "x3 is listed twice");
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "power", "pdu-c", "x3", 1),
	              TP_EEXIST, tp_topology_builder_errmsg(b), "listed twice under kind power");
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "power", "pdu-c", "x5", -1),
	              TP_EEXIST, tp_topology_builder_errmsg(b), "x5 is listed twice");
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "power", "pdu-c", "x5", 0),
	              TP_EEXIST, tp_topology_builder_errmsg(b), "x5/0 is listed twice");
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "rack", "r", "x5", 0), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "is a level name");
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "power", "p", "x9", 0),
	              TP_ENOTFOUND, tp_topology_builder_errmsg(b), "unknown node x9");
	TP_ASSERT_ERR(tp_topology_builder_add_failure_domain(b, "power", "p", "x5", 2), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "has no device 2");
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	cr_assert_eq(tp_topology_fd_kind_count(t), 1);
	int k = tp_topology_fd_kind_by_name(t, "power");
	cr_assert_eq(k, 0);
	cr_assert_eq(tp_topology_fd_kind_by_name(t, "cooling"), TP_ENOTFOUND);
	cr_assert_str_eq(tp_topology_fd_kind_name(t, 0), "power");
	/* pdu-a, pdu-b, then implicit: x5/1, x6 */
	cr_assert_eq(tp_topology_fd_count(t, 0), 4);
	cr_assert_str_eq(tp_topology_fd_name(t, 0, 0), "pdu-a");
	cr_assert_str_eq(tp_topology_fd_name(t, 0, 1), "pdu-b");
	cr_assert_str_eq(tp_topology_fd_name(t, 0, 2), "x5/1");
	cr_assert_str_eq(tp_topology_fd_name(t, 0, 3), "x6");
	uint32_t dev;
	tp_topology_device_by_name(t, "x4/1", &dev);
	cr_assert_eq(tp_topology_device_fd(t, 0, dev), 0);
	tp_topology_device_by_name(t, "x5/0", &dev);
	cr_assert_eq(tp_topology_device_fd(t, 0, dev), 1);
	tp_topology_device_by_name(t, "x5/1", &dev);
	cr_assert_eq(tp_topology_device_fd(t, 0, dev), 2);
	tp_topology_device_by_name(t, "x6/1", &dev);
	cr_assert_eq(tp_topology_device_fd(t, 0, dev), 3);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, nodetype_pcie_nic_nvlink)
{
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 0, NULL), TP_EINVAL);
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	unsigned root, s0, s1;
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, &root), 0);
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, (int)root, &s0), 0);
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, (int)root, &s1), 0);
	TP_ASSERT_ERR(tp_nodetype_add_pcie_switch(nt, 7, NULL), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "parent switch 7");
	for (unsigned g = 0; g < 4; g++)
		cr_assert_eq(tp_nodetype_set_gpu_switch(nt, g, (int)(g < 2 ? s0 : s1)), 0);
	TP_ASSERT_ERR(tp_nodetype_set_gpu_switch(nt, 4, 0), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "GPU 4");
	cr_assert_eq(tp_nodetype_add_nic(nt, "mlx5_0", (int)s1, 50, NULL), 0);
	cr_assert_eq(tp_nodetype_add_nic(nt, "mlx5_1", (int)s0, 50, NULL), 0);
	TP_ASSERT_ERR(tp_nodetype_add_nic(nt, "bad", 9, 50, NULL), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "switch 9");
	TP_ASSERT_ERR(tp_nodetype_add_nic(nt, "bad", 0, -5, NULL), TP_EINVAL,
	              tp_nodetype_errmsg(nt), "bandwidth -5");
	cr_assert_eq(tp_nodetype_add_nvswitch(nt, "nvs0", NULL), 0);
	cr_assert_eq(tp_nodetype_set_nvlink(nt, 0, 1, 300), 0);
	TP_ASSERT_ERR(tp_nodetype_set_nvlink(nt, 1, 1, 300), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "itself");
	TP_ASSERT_ERR(tp_nodetype_set_nvlink(nt, 0, 9, 300), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "out of range");

	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 3);
	cr_assert_eq(tp_test_switch_parent(nt, s0), (int)root);
	cr_assert_eq(tp_test_switch_parent(nt, root), -1);
	cr_assert_eq(tp_test_gpu_switch(nt, 3), (int)s1);
	/* unknown items are told apart from "the host bridge" (-1) */
	cr_assert_eq(tp_test_gpu_switch(nt, 4), TP_ENOTFOUND);
	cr_assert_eq(tp_test_switch_parent(nt, 3), TP_ENOTFOUND);
	cr_assert_eq(tp_test_nic_switch(nt, 2), TP_ENOTFOUND);
	cr_assert_eq(tp_nodetype_pcie_distance(nt, 0, 1), 2);
	cr_assert_eq(tp_nodetype_pcie_distance(nt, 0, 2), 4);
	cr_assert_eq(tp_nodetype_pcie_distance(nt, 2, 2), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), 1);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 3), 0);
	cr_assert_str_eq(tp_nodetype_nic_name(nt, 1), "mlx5_1");
	cr_assert_eq(tp_test_nic_switch(nt, 1), (int)s0);
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 1);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 1, 0), 300, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 2, 3), 0, 1e-9);

	/* Nodes share one copy of equal types; the topology keeps its own. */
	tp_topology_builder *b = new_builder(L3, 3);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	const char *path[2] = {"b", "r"};
	cr_assert_eq(tp_topology_builder_add_node(b, "n1", path, 4, &o), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "n2", path, 4, &o), 0);
	tp_nodetype_destroy(nt);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	const tp_nodetype *c0 = tp_topology_node_type(t, 0), *c1 = tp_topology_node_type(t, 1);
	cr_assert_not_null(c0);
	cr_assert_eq(c0, c1);
	cr_assert_eq(tp_nodetype_pcie_distance(c0, 0, 2), 4);
	cr_assert_str_eq(tp_nodetype_nic_name(c0, 0), "mlx5_0");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, nvl72_generator)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 8, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_device_count(t), 2 * 8 * 72);
	cr_assert_eq(tp_topology_domain_count(t, 1), 16);
	cr_assert_eq(tp_topology_domain_nvswitch_count(t, 1, 3), 9);
	cr_assert_eq(tp_topology_domain_nvswitch_count(t, 0, 0), 0);
	tp_link_kind k;
	double g;
	cr_assert_eq(tp_topology_fabric(t, 1, &k, &g, NULL), 0);
	cr_assert_eq(k, TP_LINK_NVLINK);
	cr_assert_float_eq(g, 900, 1e-9);
	uint32_t id;
	cr_assert_eq(tp_topology_node_by_name(t, "block1-rack0-node0", &id), 0);
	cr_assert_eq(id, 8 * 18);
	tp_topology *none = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&none, 0, 8, NULL), TP_EINVAL);
	cr_assert_null(none);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, hgx_generator)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_hgx(&t, 4, 32, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_device_count(t), 4 * 32 * 8);
	cr_assert_eq(tp_topology_level_count(t), 2);
	const tp_nodetype *nt = tp_topology_node_type(t, 5);
	cr_assert_not_null(nt);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 4);
	cr_assert_eq(tp_nodetype_nic_count(nt), 8);
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 4);
	cr_assert_eq(tp_nodetype_pcie_distance(nt, 6, 7), 2);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 7), 450, 1e-9);
	cr_assert_str_eq(tp_topology_node_model(t, 0), "H100");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, nvswitch_builder_errors)
{
	tp_topology_builder *b = new_builder(L3, 3);
	add(b, "x", "b", "r", 4);
	const char *path[2] = {"b", "r"};
	const char *other[2] = {"b", "q"};
	cr_assert_eq(tp_topology_builder_add_nvswitch(b, 1, path, "s0"), 0);
	TP_ASSERT_ERR(tp_topology_builder_add_nvswitch(b, 1, path, "s0"), TP_EEXIST,
	              tp_topology_builder_errmsg(b), "added twice");
	TP_ASSERT_ERR(tp_topology_builder_add_nvswitch(b, 1, other, "s0"), TP_ENOTFOUND,
	              tp_topology_builder_errmsg(b), "no rack b/q");
	TP_ASSERT_ERR(tp_topology_builder_add_nvswitch(b, 2, path, "s0"), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "not a level above the node");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(topology, single_level)
{
	const char *lv[] = {"node"};
	tp_topology_builder *b = new_builder(lv, 1);
	cr_assert_eq(tp_topology_builder_add_node(b, "a", NULL, 2, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "b", NULL, 3, NULL), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	cr_assert_eq(tp_topology_domain_count(t, 0), 2);
	int lvl;
	cr_assert_eq(tp_topology_common_level(t, 0, 2, &lvl), 0);
	cr_assert_eq(lvl, TP_LEVEL_CLUSTER);
	cr_assert_eq(tp_topology_common_level(t, 0, 1, &lvl), 0);
	cr_assert_eq(lvl, 0);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Fail each allocation in turn: the call returns TP_ENOMEM, leaks nothing, and the builder
 * still builds the same topology afterwards. */
static void fill(tp_topology_builder *b)
{
	add(b, "x1", "b1", "r1", 4);
	add(b, "x2", "b2", "r1", 2);
}

Test(topology, allocation_failures_add_node_and_failure_domain)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology_builder *b = new_builder(L3, 3);
		fill(b);
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.model = "GB200";
		double perf[3] = {1, 0.9, 1.1};
		o.device_perf = perf;
		const char *path[2] = {"b3", "r9"};
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_builder_add_node(b, "x3", path, 3, &o);
		if (rc == 0)
			rc = tp_topology_builder_add_failure_domain(b, "power", "pdu", "x3", 1);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			tp_topology *t = NULL;
			cr_assert_eq(tp_topology_build(b, &t), 0);
			cr_assert_eq(tp_topology_node_count(t), 3);
			cr_assert_eq(tp_topology_fd_count(t, 0), 1 + 2 + 2);
			tp_topology_destroy(t);
			tp_topology_builder_destroy(b);
			TP_ASSERT_NO_LEAKS();
			cr_assert(n > 3, "expected several allocations, saw %ld", n);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		/* the builder still works and holds what it held before the failed call(s) */
		tp_topology *t = NULL;
		cr_assert_eq(tp_topology_build(b, &t), 0);
		uint32_t nodes = tp_topology_node_count(t);
		cr_assert(nodes == 2 || nodes == 3);
		cr_assert_eq(tp_topology_domain_count(t, 0), nodes);
		tp_topology_destroy(t);
		tp_topology_builder_destroy(b);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(topology, allocation_failures_build_and_generators)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology_builder *b = new_builder(L3, 3);
		fill(b);
		cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "p", "x1", 0), 0);
		const char *path[2] = {"b1", "r1"};
		cr_assert_eq(tp_topology_builder_add_nvswitch(b, 1, path, "tray0"), 0);
		tp_topology *t = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_build(b, &t);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			tp_topology_destroy(t);
			tp_topology_builder_destroy(b);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM);
		cr_assert_null(t);
		tp_topology_builder_destroy(b);
		TP_ASSERT_NO_LEAKS();
	}
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology *t = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_generate_hgx(&t, 2, 2, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			tp_topology_destroy(t);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(topology, allocation_failures_generate_rewinds)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology_builder *b = new_builder(L3, 3);
		fill(b);
		unsigned counts[3] = {2, 2, 3};
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_builder_generate(b, counts, 4, NULL);
		tp_test_alloc_fail_at(-1);
		tp_topology *t = NULL;
		cr_assert_eq(tp_topology_build(b, &t), 0);
		if (rc == 0) {
			cr_assert_eq(tp_topology_node_count(t), 14);
			tp_topology_destroy(t);
			tp_topology_builder_destroy(b);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM);
		cr_assert_eq(tp_topology_node_count(t), 2, "allocation %ld left nodes behind", n);
		cr_assert_eq(tp_topology_domain_count(t, 0), 2);
		cr_assert_eq(tp_topology_domain_count(t, 1), 2);
		tp_topology_destroy(t);
		tp_topology_builder_destroy(b);
		TP_ASSERT_NO_LEAKS();
	}
}

/* #19 item 9: the builder's budgets (defaults 2^24 devices, 2^22 nodes), checked before a
 * node is added or a tree generated, with the figure and the function that raises them. */
Test(topology, builder_budgets)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = new_builder(levels, 2);
	unsigned big[] = {65537, 1};
	TP_ASSERT_ERR(tp_topology_builder_generate(b, big, 256, NULL), TP_ELIMIT,
	              tp_topology_builder_errmsg(b),
	              "generate: the topology would have 16777472 devices, more than max_devices "
	              "16777216 (raise it with tp_topology_builder_set_limits)");
	unsigned many[] = {4194304, 2};
	TP_ASSERT_ERR(tp_topology_builder_generate(b, many, 1, NULL), TP_ELIMIT,
	              tp_topology_builder_errmsg(b), "more than max_nodes 4194304");
	cr_assert_eq(tp_topology_builder_set_limits(b, 8, 2), 0);
	const char *p0[] = {"r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "a", p0, 4, NULL), 0);
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "b", p0, 5, NULL), TP_ELIMIT,
	              tp_topology_builder_errmsg(b),
	              "node b: the topology would have 9 devices, more than max_devices 8");
	cr_assert_eq(tp_topology_builder_add_node(b, "b", p0, 4, NULL), 0);
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "c", p0, 1, NULL), TP_ELIMIT,
	              tp_topology_builder_errmsg(b),
	              "node c: the topology would have 3 nodes, more than max_nodes 2");
	unsigned one[] = {1, 1};
	TP_ASSERT_ERR(tp_topology_builder_generate(b, one, 1, NULL), TP_ELIMIT,
	              tp_topology_builder_errmsg(b), "3 nodes or more, more than max_nodes 2");
	TP_ASSERT_ERR(tp_topology_builder_set_limits(b, 7, 2), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "already holds 2 nodes and 8 devices");
	TP_ASSERT_ERR(tp_topology_builder_set_limits(b, 0, 2), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "max_devices 0 is not in 1..2147483647");
	TP_ASSERT_ERR(tp_topology_builder_set_limits(b, 8, 1u << 31), TP_EINVAL,
	              tp_topology_builder_errmsg(b), "max_nodes 2147483648 is not in");
	cr_assert_eq(tp_topology_builder_set_limits(NULL, 8, 2), TP_EINVAL);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "the failed calls changed nothing");
	cr_assert_eq(tp_topology_device_count(t), 8);
	cr_assert_eq(tp_topology_node_count(t), 2);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

/* The switch queries answer through out-parameters: the host bridge is TP_NONE, never a value
 * that is also an error code. */
Test(topology, switch_queries_out_parameters)
{
	tp_nodetype *nt;
	cr_assert_eq(tp_nodetype_create(&nt, 2, &tp_test_allocator), 0);
	unsigned sw;
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, &sw), 0);
	cr_assert_eq(tp_nodetype_set_gpu_switch(nt, 0, (int)sw), 0);
	uint32_t out = 7;
	cr_assert_eq(tp_nodetype_gpu_switch(nt, 0, &out), 0);
	cr_assert_eq(out, sw);
	cr_assert_eq(tp_nodetype_gpu_switch(nt, 1, &out), 0);
	cr_assert_eq(out, TP_NONE, "GPU 1 sits on the host bridge");
	cr_assert_eq(tp_nodetype_pcie_switch_parent(nt, sw, &out), 0);
	cr_assert_eq(out, TP_NONE);
	out = 7;
	cr_assert_eq(tp_nodetype_gpu_switch(nt, 2, &out), TP_ENOTFOUND);
	cr_assert_eq(tp_nodetype_pcie_switch_parent(nt, 5, &out), TP_ENOTFOUND);
	cr_assert_eq(tp_nodetype_nic_switch(nt, 0, &out), TP_ENOTFOUND);
	cr_assert_eq(out, 7, "a failed query leaves the output alone");
	cr_assert_eq(tp_nodetype_gpu_switch(nt, 0, NULL), TP_EINVAL);
	cr_assert_eq(tp_nodetype_gpu_switch(NULL, 0, &out), TP_EINVAL);
	cr_assert_eq(tp_nodetype_nic_switch(NULL, 0, &out), TP_EINVAL);
	cr_assert_eq(tp_nodetype_pcie_switch_parent(NULL, 0, &out), TP_EINVAL);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}
