/* SPDX-License-Identifier: MIT */
/*
 * Fabrics per domain and per node type, the PCIe figures of GPU pairs without NVLink, and the
 * choice of a node's GPUs by their links (suite 'unit'). The tests on real machines read
 * ../shared/hwloc (TP_SHARED_DIR) and are skipped, saying so, when the file is missing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "testutil.h"
#include "topoplace-hwloc.h"
#include "topoplace-scenario.h"
#include "topology_impl.h"

#ifndef TP_SHARED_DIR
#define TP_SHARED_DIR "../shared"
#endif

#ifndef TP_SCENARIO_DATA
#define TP_SCENARIO_DATA "tests/data/scenarios"
#endif

static const double MB = 1024.0 * 1024;

/* ---- helpers ------------------------------------------------------------------------------ */

/* The contents of ../shared/hwloc/<name>, or NULL. */
static char *read_shared(const char *name, size_t *len)
{
	const char *dir = getenv("TP_SHARED_DIR");
	char path[1024];
	snprintf(path, sizeof path, "%s/hwloc/%s", dir && *dir ? dir : TP_SHARED_DIR, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t cap = 0, n = 0;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			char *more = realloc(buf, cap);
			cr_assert_not_null(more);
			buf = more;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	fclose(f);
	*len = n;
	return buf;
}

/* Import a shared file (with every `<cut ...</cut>` element blanked when cut is not NULL), or
 * skip the test when it is absent. */
static tp_nodetype *import_shared(const char *name, const char *cut)
{
	size_t len = 0;
	char *xml = read_shared(name, &len);
	if (!xml)
		cr_skip_test("../shared/hwloc/%s is not there (set TP_SHARED_DIR to its folder)", name);
	if (cut) {
		char open[64], close[64];
		snprintf(open, sizeof open, "<%s", cut);
		snprintf(close, sizeof close, "</%s>", cut);
		char *a = strstr(xml, open), *b = a ? strstr(a, close) : NULL;
		cr_assert(a && b, "%s has no %s element", name, cut);
		memset(a, ' ', (size_t)(b - a) + strlen(close));
	}
	tp_nodetype *nt = NULL;
	char err[256];
	int rc = tp_nodetype_from_hwloc_xml(&nt, xml, len, &tp_test_allocator, err, sizeof err);
	free(xml);
	cr_assert_eq(rc, 0, "%s: %s (%s)", name, tp_err_name(rc), err);
	return nt;
}

/* Two racks (r0, r1) of `per_rack` nodes of `gpus` GPUs each, node type nt (or none); rack r1
 * gets its own fabric when r1_gbps > 0. Levels rack, node. */
static tp_topology *two_racks(unsigned per_rack, unsigned gpus, const tp_nodetype *nt,
                              double r1_gbps)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	for (unsigned r = 0; r < 2; r++) {
		char rack[8];
		snprintf(rack, sizeof rack, "r%u", r);
		const char *path[1] = {rack};
		for (unsigned i = 0; i < per_rack; i++) {
			char name[16];
			snprintf(name, sizeof name, "n%u-%u", r, i);
			cr_assert_eq(tp_topology_builder_add_node(b, name, path, gpus, &o), 0, "%s",
			             tp_topology_builder_errmsg(b));
		}
	}
	if (r1_gbps > 0)
		cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 0, "r1", TP_LINK_NVLINK, r1_gbps,
		                                                   2.0),
		             0, "%s", tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	return t;
}

/* One node of type nt in one rack. */
static tp_topology *one_node(const tp_nodetype *nt, double node_gbps)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	if (node_gbps > 0)
		cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, node_gbps, 3.4), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	const char *path[1] = {"r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "x", path, tp_nodetype_gpu_count(nt), &o), 0,
	             "%s", tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	return t;
}

/* Place `count` GPUs (committed when commit), returning the devices in dev[] (count entries). */
static void place_n(tp_cluster *c, unsigned count, const char *id, uint32_t *dev, double *comm)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.count = count;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	cr_assert_eq(rc, 0, "%s: %s", tp_err_name(rc), tp_placement_errmsg(p));
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, count);
	memcpy(dev, d, count * sizeof *dev);
	if (comm)
		*comm = tp_placement_step_comm_us(p);
	if (id)
		cr_assert_eq(tp_commit(c, p, NULL), 0);
	tp_placement_destroy(p);
}

/* ---- fabric per domain ---------------------------------------------------------------------- */

/* A rack's own fabric prices traffic inside that rack only; the level's stays the default. */
Test(fabric, domain_fabric_prices_its_domain)
{
	tp_test_alloc_reset();
	tp_topology *t = two_racks(2, 4, NULL, 900.0);
	tp_link_kind k = TP_LINK_PCIE;
	double g = 0, lat = 0;
	cr_assert_eq(tp_topology_domain_fabric(t, 0, 1, &k, &g, &lat), 1);
	cr_assert_eq(k, TP_LINK_NVLINK);
	cr_assert_eq(g, 900.0);
	cr_assert_eq(lat, 2.0);
	cr_assert_eq(tp_topology_domain_fabric(t, 0, 0, &k, &g, &lat), 0, "r0 keeps the level's");
	cr_assert_eq(k, TP_LINK_IB);
	cr_assert_eq(g, 50.0);
	cr_assert_eq(tp_topology_domain_fabric(t, TP_LEVEL_CLUSTER, 0, NULL, &g, NULL), 0);
	cr_assert_eq(g, 25.0);
	cr_assert_eq(tp_topology_domain_fabric(t, 1, 3, NULL, &g, NULL), 0, "a node: the level's");
	cr_assert_eq(g, 900.0);
	cr_assert_eq(tp_topology_domain_fabric(t, 0, 2, NULL, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_domain_fabric(t, 2, 0, NULL, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_domain_fabric(t, TP_LEVEL_CLUSTER, 1, NULL, NULL, NULL), TP_EINVAL);
	cr_assert_eq(tp_topology_domain_fabric(NULL, 0, 0, NULL, NULL, NULL), TP_EINVAL);
	/* the level's own fabric is unchanged */
	cr_assert_eq(tp_topology_fabric(t, 0, NULL, &g, NULL), 0);
	cr_assert_eq(g, 50.0);

	/* devices 0-3 n0-0, 4-7 n0-1 (r0); 8-11 n1-0, 12-15 n1-1 (r1) */
	cr_assert_eq(tp_cost_link(t, 0, 4)->gbps, 50.0);
	cr_assert_eq(tp_cost_link(t, 8, 12)->gbps, 900.0);
	cr_assert_eq(tp_cost_link(t, 8, 12)->latency_us, 2.0);
	cr_assert_eq(tp_cost_link(t, 0, 8)->gbps, 25.0);
	/* the all-reduce of two GPUs across the nodes of r1 runs at the rack's NVLink */
	uint32_t r0[2] = {0, 4}, r1[2] = {8, 12};
	double a0 = tp_cost_allreduce_us(t, r0, 2, 64 * MB), a1 = tp_cost_allreduce_us(t, r1, 2, 64 * MB);
	double want1 = 2.0 * (2.0 + 32 * MB / 900e3);
	cr_assert_float_eq(a1, want1, 1e-6 * want1);
	cr_assert(a0 > 10 * a1, "r0 %g us, r1 %g us", a0, a1);
	/* all-to-all too */
	cr_assert(tp_cost_alltoall_us(t, r0, 2, 64 * MB) > 10 * tp_cost_alltoall_us(t, r1, 2, 64 * MB));
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Setting a domain's fabric again replaces it; a failed call changes nothing. */
Test(fabric, set_domain_fabric_errors)
{
	tp_test_alloc_reset();
	static const char *const levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 3, &tp_test_allocator), 0);
	const char *path[2] = {"b0", "r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "x0", path, 4, NULL), 0);
	int rc = tp_topology_builder_set_domain_fabric(b, 2, "x0", TP_LINK_IB, 50, 2);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_topology_builder_errmsg(b),
	              "domain fabric level 2 is not a level above the node (3 levels)");
	rc = tp_topology_builder_set_domain_fabric(b, 1, NULL, TP_LINK_IB, 50, 2);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_topology_builder_errmsg(b), "domain fabric path is NULL");
	rc = tp_topology_builder_set_domain_fabric(b, 1, "b0/r0", (tp_link_kind)9, 50, 2);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_topology_builder_errmsg(b),
	              "domain fabric of rack b0/r0: kind 9 is not a tp_link_kind");
	rc = tp_topology_builder_set_domain_fabric(b, 1, "b0/r0", TP_LINK_IB, 0, 2);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_topology_builder_errmsg(b),
	              "domain fabric of rack b0/r0: gbps 0 is not a number > 0");
	rc = tp_topology_builder_set_domain_fabric(b, 1, "b0/r0", TP_LINK_IB, 50, -1);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_topology_builder_errmsg(b),
	              "domain fabric of rack b0/r0: latency_us -1 is not a number >= 0");
	rc = tp_topology_builder_set_domain_fabric(b, 1, "b0/r9", TP_LINK_IB, 50, 2);
	TP_ASSERT_ERR(rc, TP_ENOTFOUND, tp_topology_builder_errmsg(b),
	              "domain fabric: no rack b0/r9 (add its nodes first)");
	cr_assert_eq(tp_topology_builder_set_domain_fabric(NULL, 1, "b0/r0", TP_LINK_IB, 5, 2),
	             TP_EINVAL);
	/* nothing was set by the failures */
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	cr_assert_null(t->lv[1].dfab);
	cr_assert_eq(tp_topology_domain_fabric(t, 1, 0, NULL, NULL, NULL), 0);
	tp_topology_destroy(t);
	/* set twice: the second wins; a block's fabric too */
	cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 1, "b0/r0", TP_LINK_IB, 5, 2), 0);
	cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 1, "b0/r0", TP_LINK_ETHERNET, 7, 3), 0);
	cr_assert_eq(tp_topology_builder_set_domain_fabric(b, 0, "b0", TP_LINK_IB, 11, 4), 0);
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_link_kind k;
	double g, lat;
	cr_assert_eq(tp_topology_domain_fabric(t, 1, 0, &k, &g, &lat), 1);
	cr_assert_eq(k, TP_LINK_ETHERNET);
	cr_assert_eq(g, 7.0);
	cr_assert_eq(lat, 3.0);
	cr_assert_eq(tp_topology_domain_fabric(t, 0, 0, &k, &g, &lat), 1);
	cr_assert_eq(g, 11.0);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

/* Out of memory while growing the builder's table or building the per-domain table. */
Test(fabric, domain_fabric_alloc_failures)
{
	for (unsigned fail = 0;; fail++) {
		tp_test_alloc_reset();
		static const char *const levels[] = {"rack", "node"};
		tp_topology_builder *b = NULL;
		cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
		const char *path[1] = {"r0"};
		cr_assert_eq(tp_topology_builder_add_node(b, "x0", path, 4, NULL), 0);
		tp_test_alloc_fail_at((long)fail);
		int rc = tp_topology_builder_set_domain_fabric(b, 0, "r0", TP_LINK_IB, 5, 2);
		tp_topology *t = NULL;
		if (!rc)
			rc = tp_topology_build(b, &t);
		tp_test_alloc_fail_at(-1);
		if (rc) {
			cr_assert_eq(rc, TP_ENOMEM, "%s", tp_err_name(rc));
			cr_assert(strstr(tp_topology_builder_errmsg(b), "out of memory"));
			tp_topology_builder_destroy(b);
			TP_ASSERT_NO_LEAKS();
			continue;
		}
		double g = 0;
		cr_assert_eq(tp_topology_domain_fabric(t, 0, 0, NULL, &g, NULL), 1);
		cr_assert_eq(g, 5.0);
		tp_topology_destroy(t);
		tp_topology_builder_destroy(b);
		TP_ASSERT_NO_LEAKS();
		break;
	}
}

/* ---- the node type's own fabric and its pair figures ----------------------------------------- */

Test(fabric, nodetype_fabric_and_pcie_figures)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	cr_assert_eq(tp_nodetype_fabric(nt, NULL, NULL, NULL), TP_ENOTFOUND);
	cr_assert_eq(tp_nodetype_fabric(NULL, NULL, NULL, NULL), TP_EINVAL);
	int rc = tp_nodetype_set_fabric(nt, (tp_link_kind)7, 16, 5);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_nodetype_errmsg(nt),
	              "node type fabric kind 7 is not a tp_link_kind");
	rc = tp_nodetype_set_fabric(nt, TP_LINK_PCIE, -2, 5);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_nodetype_errmsg(nt),
	              "node type fabric gbps -2 is not a number > 0");
	rc = tp_nodetype_set_fabric(nt, TP_LINK_PCIE, 16, -1);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_nodetype_errmsg(nt),
	              "node type fabric latency_us -1 is not a number >= 0");
	cr_assert_eq(tp_nodetype_fabric(nt, NULL, NULL, NULL), TP_ENOTFOUND, "failures set nothing");
	rc = tp_nodetype_set_gpu_pcie_gbps(nt, 4, 16);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_nodetype_errmsg(nt), "GPU 4 does not exist (4 GPUs)");
	rc = tp_nodetype_set_gpu_pcie_gbps(nt, 1, -16);
	TP_ASSERT_ERR(rc, TP_EINVAL, tp_nodetype_errmsg(nt), "GPU 1: PCIe gbps -16 is not a number >= 0");
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 0, 1), 0.0, "no figure yet");

	/* GPUs 0,1 in package 0, 2,3 in package 1; 0-1 NVLink 40; links 16 GB/s, GPU 3 at 8 */
	for (unsigned g = 0; g < 4; g++) {
		cr_assert_eq(tp_nodetype_set_gpu_locality(nt, g, g / 2, g / 2, (int)g), 0);
		cr_assert_eq(tp_nodetype_set_gpu_pcie_gbps(nt, g, g == 3 ? 8 : 16), 0);
	}
	cr_assert_eq(tp_nodetype_set_nvlink(nt, 0, 1, 40), 0);
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 0, 1), 40.0);
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 0, 2), 8.0, "across packages: half the link");
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 2, 3), 8.0, "one package: the slower link");
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 1, 3), 4.0);
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 2, 2), 0.0);
	cr_assert_eq(tp_nodetype_pair_gbps(nt, 2, 9), 0.0);

	/* the default node fabric: the type's figures price the node */
	tp_topology *t = one_node(nt, 0);
	cr_assert_eq(tp_cost_pair(t, 0, 1).gbps, 40.0);
	cr_assert_eq(tp_cost_pair(t, 1, 2).gbps, 8.0);
	cr_assert_eq(tp_cost_pair(t, 1, 2).kind, TP_LINK_NVLINK, "the node level's fabric kind");
	tp_topology_destroy(t);
	/* the caller's node fabric wins over the figures of a type without its own fabric ... */
	t = one_node(nt, 100);
	cr_assert_eq(tp_cost_pair(t, 1, 2).gbps, 100.0);
	tp_topology_destroy(t);
	/* ... but not over a type that sets its own */
	cr_assert_eq(tp_nodetype_set_fabric(nt, TP_LINK_PCIE, 4, 5), 0);
	tp_link_kind k;
	double g, lat;
	cr_assert_eq(tp_nodetype_fabric(nt, &k, &g, &lat), 0);
	cr_assert_eq(k, TP_LINK_PCIE);
	cr_assert_eq(g, 4.0);
	t = one_node(nt, 100);
	cr_assert_eq(tp_cost_pair(t, 1, 2).gbps, 8.0);
	cr_assert_eq(tp_cost_pair(t, 1, 2).kind, TP_LINK_PCIE);
	cr_assert_eq(tp_cost_pair(t, 1, 2).latency_us, 5.0);
	cr_assert_eq(tp_topology_domain_fabric(t, 1, 0, &k, &g, &lat), 1);
	cr_assert_eq(k, TP_LINK_PCIE);
	cr_assert_eq(lat, 5.0);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* Out of memory while setting PCIe figures or building a topology whose type has them and its
 * own fabric: TP_ENOMEM, nothing leaked, and the call succeeds once memory is there. */
Test(fabric, pcie_figures_alloc_failures)
{
	for (long fail = 0;; fail++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = NULL;
		cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
		static const char *const levels[] = {"rack", "node"};
		tp_topology_builder *b = NULL;
		cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
		cr_assert_eq(tp_nodetype_set_fabric(nt, TP_LINK_PCIE, 16, 5), 0);
		tp_test_alloc_fail_at(fail);
		int rc = tp_nodetype_set_gpu_pcie_gbps(nt, 0, 16);
		if (!rc)
			rc = tp_nodetype_set_gpu_pcie_gbps(nt, 1, 16);
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.type = nt;
		const char *path[1] = {"r0"};
		if (!rc)
			rc = tp_topology_builder_add_node(b, "x", path, 4, &o);
		tp_topology *t = NULL;
		if (!rc)
			rc = tp_topology_build(b, &t);
		tp_test_alloc_fail_at(-1);
		if (!rc) {
			cr_assert_eq(tp_cost_pair(t, 0, 1).gbps, 16.0);
			cr_assert_eq(tp_cost_pair(t, 0, 2).gbps, 16.0, "no figure: the type's fabric");
			cr_assert_eq(tp_cost_pair(t, 0, 2).kind, TP_LINK_PCIE);
		} else {
			cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", fail, tp_err_name(rc));
		}
		tp_topology_destroy(t);
		tp_topology_builder_destroy(b);
		tp_nodetype_destroy(nt);
		TP_ASSERT_NO_LEAKS();
		if (!rc)
			break;
	}
}

/* Two types that differ only in their fabric or PCIe figures are not merged into one copy. */
Test(fabric, types_differing_in_fabric_stay_apart)
{
	tp_test_alloc_reset();
	tp_nodetype *a = NULL, *b = NULL;
	cr_assert_eq(tp_nodetype_create(&a, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_nodetype_create(&b, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_nodetype_set_fabric(b, TP_LINK_PCIE, 16, 5), 0);
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *bl = NULL;
	cr_assert_eq(tp_topology_builder_create(&bl, levels, 2, &tp_test_allocator), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	const char *path[1] = {"r0"};
	o.type = a;
	cr_assert_eq(tp_topology_builder_add_node(bl, "a", path, 2, &o), 0);
	o.type = b;
	cr_assert_eq(tp_topology_builder_add_node(bl, "b", path, 2, &o), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(bl, &t), 0);
	double g = 0;
	cr_assert_eq(tp_topology_domain_fabric(t, 1, 0, NULL, &g, NULL), 0);
	cr_assert_eq(g, 900.0);
	cr_assert_eq(tp_topology_domain_fabric(t, 1, 1, NULL, &g, NULL), 1);
	cr_assert_eq(g, 16.0);
	cr_assert_eq(tp_cost_link(t, 2, 3)->gbps, 16.0);
	cr_assert_eq(tp_cost_link(t, 0, 1)->gbps, 900.0);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(bl);
	tp_nodetype_destroy(a);
	tp_nodetype_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

/* ---- hwloc node types: PCIe figures where there is no NVLink ------------------------------- */

/*
 * power8gpudistances.xml: NVLink 40 GB/s between GPUs 0-1 and 2-3 only (see hwloc_shared::power8);
 * each GPU's pci_link_speed is 15.753846 GB/s, GPUs 0-1 in package 0, 2-3 in package 1. A pair
 * across the packages gets half the link, not the node fabric's NVLink 900 GB/s.
 */
Test(fabric, power8_pairs_without_nvlink)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("power8gpudistances.xml", NULL);
	const double link = 15.753846;
	cr_assert_float_eq(tp_nodetype_pair_gbps(nt, 0, 1), 40.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_pair_gbps(nt, 2, 3), 40.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_pair_gbps(nt, 1, 2), link / 2, 1e-5);
	cr_assert_float_eq(tp_nodetype_pair_gbps(nt, 0, 3), link / 2, 1e-5);
	cr_assert_eq(tp_nodetype_fabric(nt, NULL, NULL, NULL), TP_ENOTFOUND, "it has NVLink");
	tp_topology *t = one_node(nt, 0);
	cr_assert_float_eq(tp_cost_pair(t, 1, 2).gbps, link / 2, 1e-5);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 * The POWER8 node with GPU 0 busy: a 2-GPU request gets the NVLink pair 2-3, not 1-2 (which
 * share no NVLink), and its modelled step is the NVLink pair's.
 */
Test(fabric, power8_two_gpus_take_the_nvlink_pair)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("power8gpudistances.xml", NULL);
	tp_topology *t = one_node(nt, 0);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	uint32_t dev[2];
	double comm = 0;
	place_n(c, 1, "busy", dev, NULL);
	cr_assert_eq(dev[0], 0, "the 1-GPU job takes GPU 0");
	place_n(c, 2, NULL, dev, &comm);
	cr_assert_eq(dev[0], 2);
	cr_assert_eq(dev[1], 3);
	/* the score reported is the NVLink pair's ring of 1 GiB, at 40 GB/s, not 900 */
	uint32_t nv[2] = {2, 3}, pcie[2] = {1, 2};
	const double GiB = 1024.0 * MB;
	double ring = tp_cost_ring_allreduce_us(t, nv, 2, GiB);
	cr_assert_float_eq(comm, ring, 1e-9 * ring);
	cr_assert_float_eq(ring, 2 * (3.4 + GiB / 2 / 40e3), 1e-9 * ring);
	/* and the PCIe pair would cost more for the same bytes */
	cr_assert(tp_cost_ring_allreduce_us(t, pcie, 2, 64 * MB) >
	                  4 * tp_cost_ring_allreduce_us(t, nv, 2, 64 * MB),
	          "PCIe pair %g us, NVLink pair %g us", tp_cost_ring_allreduce_us(t, pcie, 2, 64 * MB),
	          tp_cost_ring_allreduce_us(t, nv, 2, 64 * MB));
	/* with GPU 0 free again, 2 GPUs take 0-1 (the lowest NVLink pair) */
	cr_assert_eq(tp_cluster_release(c, "busy"), 0);
	place_n(c, 2, NULL, dev, NULL);
	cr_assert_eq(dev[0], 0);
	cr_assert_eq(dev[1], 1);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 * nvidiaDGX2.xml without its NVLinkBandwidth matrix is a PCIe-only node of 16 GPUs (each
 * pci_link_speed 15.753846, two packages): the importer gives it a PCIe fabric at the slowest
 * pair's figure, every pair its PCIe figure, and a 2-GPU placement's step time is priced at
 * PCIe, not at NVLink 900 GB/s.
 */
Test(fabric, pcie_only_node_is_priced_as_pcie)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("nvidiaDGX2.xml", "distances2hetero");
	const double link = 15.753846;
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 0.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_pair_gbps(nt, 0, 1), link, 1e-5);
	cr_assert_float_eq(tp_nodetype_pair_gbps(nt, 0, 15), link / 2, 1e-5, "across packages");
	tp_link_kind k;
	double g = 0, lat = 0;
	cr_assert_eq(tp_nodetype_fabric(nt, &k, &g, &lat), 0);
	cr_assert_eq(k, TP_LINK_PCIE);
	cr_assert_float_eq(g, link / 2, 1e-5);
	cr_assert_eq(lat, 5.0);
	tp_topology *t = one_node(nt, 0);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	uint32_t dev[2];
	double comm = 0;
	place_n(c, 2, NULL, dev, &comm);
	/* the PCIe rule still decides (no NVLink): two GPUs under one leaf switch */
	cr_assert_eq(tp_test_gpu_switch(nt, dev[0]), tp_test_gpu_switch(nt, dev[1]));
	cr_assert_float_eq(tp_cost_pair(t, dev[0], dev[1]).gbps, link, 1e-5);
	cr_assert_eq(tp_cost_pair(t, dev[0], dev[1]).kind, TP_LINK_PCIE);
	/* the score is the ring of 1 GiB at the PCIe figure and the PCIe latency */
	const double GiB = 1024.0 * MB;
	double want = 2 * (5.0 + GiB / 2 / (link * 1e3));
	cr_assert_float_eq(comm, want, 1e-6 * want);
	/* the same pair on the node fabric's default NVLink would be far cheaper */
	tp_topology *nv = two_racks(1, 16, NULL, 0);
	uint32_t pair[2] = {0, 1};
	cr_assert(tp_cost_ring_allreduce_us(t, dev, 2, 64 * MB) >
	          20 * tp_cost_ring_allreduce_us(nv, pair, 2, 64 * MB));
	tp_topology_destroy(nv);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* ---- choosing a node's GPUs by their links ----------------------------------------------- */

/* A node type of n GPUs whose NVLink joins GPUs in islands of `island` (figure 100 inside an
 * island, none between), optionally each island's GPUs interleaved (GPU g in island g % k). */
static tp_nodetype *islands(unsigned n, unsigned island, bool interleave)
{
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, n, &tp_test_allocator), 0);
	unsigned k = n / island;
	for (unsigned a = 0; a < n; a++)
		for (unsigned b = a + 1; b < n; b++) {
			bool same = interleave ? a % k == b % k : a / island == b / island;
			if (same)
				cr_assert_eq(tp_nodetype_set_nvlink(nt, a, b, 100), 0);
		}
	return nt;
}

/* The exhaustive choice (small C(n, k)): the island with room, whatever the indices. */
Test(fabric, links_choose_the_nvlink_island)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = islands(8, 4, true); /* islands {0,2,4,6} and {1,3,5,7} */
	tp_topology *t = one_node(nt, 0);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	uint32_t dev[4];
	place_n(c, 1, "one", dev, NULL); /* takes GPU 0 */
	cr_assert_eq(dev[0], 0);
	place_n(c, 4, NULL, dev, NULL);
	for (unsigned i = 0; i < 4; i++)
		cr_assert_eq(dev[i], 2 * i + 1, "rank %u: GPU %u", i, dev[i]);
	/* 3 GPUs: {1,3,5} and {2,4,6} are equally linked; the lowest indices win */
	place_n(c, 3, NULL, dev, NULL);
	cr_assert_eq(dev[0], 1);
	cr_assert_eq(dev[1], 3);
	cr_assert_eq(dev[2], 5);
	/* with GPU 1 busy too, 3 GPUs: 2,4,6 and 3,5,7 tie again; 2 GPUs of the even island are
	 * never mixed with an odd one */
	uint32_t one = 1;
	cr_assert_eq(tp_cluster_set_down(c, &one, 1, 1), 0);
	place_n(c, 3, NULL, dev, NULL);
	cr_assert_eq(dev[0], 2);
	cr_assert_eq(dev[1], 4);
	cr_assert_eq(dev[2], 6);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* The greedy choice (C(32, 16) is past the exhaustive bound): still one whole island. */
Test(fabric, links_greedy_on_a_large_node)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = islands(32, 16, true); /* even and odd GPUs */
	tp_topology *t = one_node(nt, 0);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	uint32_t dev[16];
	place_n(c, 1, "one", dev, NULL);
	cr_assert_eq(dev[0], 0);
	place_n(c, 16, NULL, dev, NULL);
	for (unsigned i = 0; i < 16; i++)
		cr_assert_eq(dev[i] % 2, 1, "rank %u: GPU %u is not in the odd island", i, dev[i]);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 * The exhaustive choice is the best of every subset under the documented order: on random
 * 6-GPU figures with random busy GPUs, the chosen set has the largest smallest pairwise figure,
 * and among those the largest sum (checked against enumeration here).
 */
Test(fabric, links_choice_matches_enumeration)
{
	srand(14);
	for (unsigned trial = 0; trial < 40; trial++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = NULL;
		cr_assert_eq(tp_nodetype_create(&nt, 6, &tp_test_allocator), 0);
		double fig[6][6] = {{0}};
		for (unsigned a = 0; a < 6; a++)
			for (unsigned b = a + 1; b < 6; b++) {
				double v = (double)(rand() % 4) * 25.0;
				fig[a][b] = fig[b][a] = v;
				if (v > 0)
					cr_assert_eq(tp_nodetype_set_nvlink(nt, a, b, v), 0);
			}
		tp_topology *t = one_node(nt, 0);
		tp_cluster *c = NULL;
		cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
		uint32_t busy = (uint32_t)(rand() % 6);
		cr_assert_eq(tp_cluster_set_down(c, &busy, 1, 1), 0);
		unsigned k = 2 + (unsigned)(rand() % 3);
		uint32_t dev[6];
		place_n(c, k, NULL, dev, NULL);
		double got_min = 1e9, got_sum = 0;
		for (unsigned i = 0; i < k; i++)
			for (unsigned j = i + 1; j < k; j++) {
				double v = fig[dev[i]][dev[j]];
				got_min = v < got_min ? v : got_min;
				got_sum += v;
			}
		double best_min = -1, best_sum = -1;
		for (unsigned mask = 0; mask < 64; mask++) {
			if ((unsigned)__builtin_popcount(mask) != k || mask & (1u << busy))
				continue;
			double mn = 1e9, sm = 0;
			for (unsigned a = 0; a < 6; a++)
				for (unsigned b = a + 1; b < 6; b++)
					if (mask & (1u << a) && mask & (1u << b)) {
						mn = fig[a][b] < mn ? fig[a][b] : mn;
						sm += fig[a][b];
					}
			if (mn > best_min || (mn == best_min && sm > best_sum)) {
				best_min = mn;
				best_sum = sm;
			}
		}
		/* every usable pair the same figure: the PCIe rule decides, any set is as good */
		double ref = -1;
		bool all_equal = true;
		for (unsigned a = 0; a < 6; a++)
			for (unsigned b = a + 1; b < 6; b++) {
				if (a == busy || b == busy)
					continue;
				if (ref < 0)
					ref = fig[a][b];
				all_equal = all_equal && fig[a][b] == ref;
			}
		cr_assert_eq(got_min, best_min, "trial %u: min %g, best %g", trial, got_min, best_min);
		if (!all_equal)
			cr_assert_eq(got_sum, best_sum, "trial %u: sum %g, best %g", trial, got_sum,
			             best_sum);
		for (unsigned i = 0; i < k; i++)
			cr_assert_neq(dev[i], busy);
		tp_cluster_destroy(c);
		tp_topology_destroy(t);
		tp_nodetype_destroy(nt);
		TP_ASSERT_NO_LEAKS();
	}
}

/* ---- the scenario extensions x_domain_fabric and x_fabric --------------------------------- */
#ifdef TP_TEST_SCENARIO

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "%s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)n + 1);
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

/* The scenario's file reader: files of TP_SCENARIO_DATA, one at a time (ud keeps the last). */
static int read_data(void *ud, const char *path, const void **data, size_t *len, char *why,
                     size_t whylen)
{
	char full[2048];
	snprintf(full, sizeof full, "%s/%s", TP_SCENARIO_DATA, path);
	free(*(char **)ud);
	*(char **)ud = slurp(full, len);
	*data = *(char **)ud;
	(void)why;
	(void)whylen;
	return 0;
}

/* Import a scenario's topology; the code, the message in err. */
static int import_text(const char *text, tp_scenario **out, char *err, size_t errlen)
{
	char *held = NULL;
	tp_scenario_options o;
	cr_assert_eq(tp_scenario_options_init(&o, TP_SCENARIO_OPTIONS_VERSION), 0);
	o.command = TP_SCENARIO_TOPOLOGY;
	o.read_file = read_data;
	o.ud = &held;
	o.alloc = &tp_test_allocator;
	int rc = tp_scenario_from_json(out, text, strlen(text), &o, err, errlen);
	free(held);
	return rc;
}

/* tests/data/scenarios/mixed-fabrics.json: rack b0/nvl0 on its own NVLink, rack b0/hgx0 on the
 * level's InfiniBand with NVLink 450 inside its nodes, PCIe-only L4 nodes in b1/pcie0. */
Test(fabric, scenario_mixed_fabrics)
{
	tp_test_alloc_reset();
	size_t len;
	char *text = slurp(TP_SCENARIO_DATA "/mixed-fabrics.json", &len);
	tp_scenario *sc = NULL;
	char err[512] = "x";
	cr_assert_eq(import_text(text, &sc, err, sizeof err), 0, "%s", err);
	free(text);
	const tp_topology *t = tp_scenario_topology(sc);
	uint32_t nvl, hgx, gb0, h0, l0;
	cr_assert_eq(tp_topology_domain_by_path(t, 1, "b0/nvl0", &nvl), 0);
	cr_assert_eq(tp_topology_domain_by_path(t, 1, "b0/hgx0", &hgx), 0);
	cr_assert_eq(tp_topology_node_by_name(t, "gb0", &gb0), 0);
	cr_assert_eq(tp_topology_node_by_name(t, "h0", &h0), 0);
	cr_assert_eq(tp_topology_node_by_name(t, "l0", &l0), 0);
	tp_link_kind k;
	double g, lat;
	cr_assert_eq(tp_topology_domain_fabric(t, 1, nvl, &k, &g, &lat), 1);
	cr_assert(k == TP_LINK_NVLINK && g == 900 && lat == 2, "nvl0: %d %g %g", (int)k, g, lat);
	cr_assert_eq(tp_topology_domain_fabric(t, 1, hgx, &k, &g, &lat), 0);
	cr_assert(k == TP_LINK_IB && g == 50 && lat == 5, "hgx0: %d %g %g", (int)k, g, lat);
	cr_assert_eq(tp_topology_domain_fabric(t, 2, h0, &k, &g, &lat), 1);
	cr_assert(k == TP_LINK_NVLINK && g == 450 && lat == 3, "h0: %d %g %g", (int)k, g, lat);
	cr_assert_eq(tp_topology_domain_fabric(t, 2, l0, &k, &g, &lat), 1);
	cr_assert(k == TP_LINK_PCIE && g == 32 && lat == 5, "l0: %d %g %g", (int)k, g, lat);
	cr_assert_eq(tp_topology_domain_fabric(t, 2, gb0, &k, &g, &lat), 0);
	/* two GPUs on two nodes of each rack: NVLink in nvl0, InfiniBand in hgx0 */
	uint32_t d_gb0 = t->dev_first[gb0];
	uint32_t d_h0 = t->dev_first[h0], d_l0 = t->dev_first[l0];
	cr_assert_eq(tp_cost_link(t, d_gb0, d_gb0 + 4)->gbps, 900.0);
	cr_assert_eq(tp_cost_link(t, d_h0, d_h0 + 8)->gbps, 50.0);
	cr_assert_eq(tp_cost_link(t, d_h0, d_h0 + 1)->gbps, 450.0);
	cr_assert_eq(tp_cost_link(t, d_l0, d_l0 + 1)->gbps, 32.0);
	cr_assert_eq(tp_cost_link(t, d_l0, d_l0 + 1)->kind, TP_LINK_PCIE);
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}

/* Each new message of the importer, with its code. */
Test(fabric, scenario_refuses_bad_fabric_extensions)
{
	static const struct {
		const char *topo, *msg;
	} cases[] = {
		{"\"x_domain_fabric\": {\"node\": {}}",
		 "topology.x_domain_fabric.node: unknown key (allowed: rack)"},
		{"\"x_domain_fabric\": {\"rack\": [1]}",
		 "topology.x_domain_fabric.rack: must be an object (domain path -> fabric), not a list"},
		{"\"x_domain_fabric\": {\"rack\": {\"r9\": {\"kind\": \"ib\"}}}",
		 "topology.x_domain_fabric.rack.r9: no rack has the path r9"},
		{"\"x_domain_fabric\": {\"rack\": {\"r0\": {\"kind\": \"myrinet\"}}}",
		 "topology.x_domain_fabric.rack.r0.kind: unknown link kind \"myrinet\" (one of nvlink, "
		 "pcie, ib, ethernet)"},
		{"\"x_domain_fabric\": {\"rack\": {\"r0\": {\"gbps\": 0}}}",
		 "topology.x_domain_fabric.rack.r0.gbps: must be positive, not 0"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char text[1024], err[512] = "";
		snprintf(text, sizeof text,
		         "{\"version\": 1, \"topology\": {\"levels\": [\"rack\", \"node\"], "
		         "\"nodes\": [{\"name\": \"x\", \"path\": [\"r0\"], \"gpus\": 4}], %s}}",
		         cases[i].topo);
		tp_scenario *sc = NULL;
		int rc = import_text(text, &sc, err, sizeof err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, cases[i].msg);
		cr_assert_null(sc);
		TP_ASSERT_NO_LEAKS();
	}
	static const struct {
		const char *node, *msg;
	} nodes[] = {
		{"\"gpus\": 4, \"x_fabric\": {\"kind\": \"pcie\", \"mtu\": 9000}",
		 "topology.nodes[0].x_fabric.mtu: unknown key (allowed: kind, gbps, latency_us)"},
		{"\"gpus\": 4, \"x_fabric\": {\"latency_us\": -1}",
		 "topology.nodes[0].x_fabric.latency_us: must be"},
		{"\"hwloc\": \"pcie-pairs.xml\", \"x_fabric\": {\"kind\": \"pcie\"}",
		 "topology.nodes[0].x_fabric: not with an hwloc file (the file gives the node's insides; "
		 "its PCIe-only nodes get a PCIe fabric)"},
	};
	for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
		tp_test_alloc_reset();
		char text[1024], err[512] = "";
		snprintf(text, sizeof text,
		         "{\"version\": 1, \"topology\": {\"levels\": [\"rack\", \"node\"], "
		         "\"nodes\": [{\"name\": \"x\", \"path\": [\"r0\"], %s}]}}",
		         nodes[i].node);
		tp_scenario *sc = NULL;
		int rc = import_text(text, &sc, err, sizeof err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, nodes[i].msg);
		TP_ASSERT_NO_LEAKS();
	}
	/* generate takes x_fabric too */
	tp_test_alloc_reset();
	const char *gen = "{\"version\": 1, \"topology\": {\"levels\": [\"rack\", \"node\"], "
	                  "\"generate\": {\"counts\": [1, 2], \"gpus_per_node\": 4, "
	                  "\"x_fabric\": {\"kind\": \"pcie\", \"gbps\": 16}}}}";
	tp_scenario *sc = NULL;
	char err[512] = "";
	cr_assert_eq(import_text(gen, &sc, err, sizeof err), 0, "%s", err);
	double g = 0;
	cr_assert_eq(tp_topology_domain_fabric(tp_scenario_topology(sc), 1, 1, NULL, &g, NULL), 1);
	cr_assert_eq(g, 16.0);
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}
#endif
