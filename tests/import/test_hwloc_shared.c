/* SPDX-License-Identifier: MIT */
/*
 * The hwloc importer on the real machines of ../shared/hwloc (suite 'shared'). Each test is
 * skipped, saying so, when the file is missing (a fresh clone without ../shared).
 *
 * The expected values come from `lstopo-no-graphics --input FILE --whole-io` (hwloc 2.9, the
 * tree) and `lstopo-no-graphics --input FILE --whole-io --distances` (the NVLinkBandwidth
 * matrix), read by hand; each test quotes what it relies on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "testutil.h"
#include "topoplace-hwloc.h"
#include "topology_impl.h"

#ifndef TP_SHARED_DIR
#define TP_SHARED_DIR "../shared"
#endif

/* The contents of ../shared/hwloc/<name> (TP_SHARED_DIR overrides the folder), or NULL. */
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

/* Import a shared file, or skip the test when it is absent. */
static tp_nodetype *import_shared(const char *name)
{
	size_t len = 0;
	char *xml = read_shared(name, &len);
	if (!xml)
		cr_skip_test("../shared/hwloc/%s is not there (set TP_SHARED_DIR to its folder)", name);
	tp_nodetype *nt = NULL;
	char err[256];
	int rc = tp_nodetype_from_hwloc_xml(&nt, xml, len, &tp_test_allocator, err, sizeof err);
	free(xml);
	cr_assert_eq(rc, 0, "%s: %s (%s)", name, tp_err_name(rc), err);
	return nt;
}

/*
 * nvidiaDGX2.xml, from lstopo: 16 "(3D)" PCI devices each with CoProc "nvml0".."nvml15"; per
 * host bridge, a root port, then a PCIe switch whose downstream ports each lead to a second
 * switch with two GPUs ("PCIBridge" at depths 2 and 4 in the drawing); 12 "PCI(NVSwitch)"
 * devices; no Net or OpenFabrics device. --distances: NVLinkBandwidth, every GPU 25000 MB/s to
 * each of the 6 NVSwitches of its board (nvml0-7: 61..67, nvml8-15: c1..c7), nothing direct.
 */
Test(hwloc_shared, dgx2)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("nvidiaDGX2.xml");
	cr_assert_eq(tp_nodetype_gpu_count(nt), 16);
	/* 4 host bridges with GPUs, each: a top switch and two leaf switches of two GPUs. */
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 12);
	for (unsigned g = 0; g < 16; g += 2) {
		int leaf = tp_test_gpu_switch(nt, g);
		cr_assert_geq(leaf, 0);
		cr_assert_eq(tp_test_gpu_switch(nt, g + 1), leaf, "GPUs %u and %u", g, g + 1);
		int top = tp_test_switch_parent(nt, (unsigned)leaf);
		cr_assert_geq(top, 0);
		cr_assert_eq(tp_test_switch_parent(nt, (unsigned)top), -1);
		/* Pairs 0-1 and 2-3 share the top switch of their host bridge, 4-5 does not. */
		if (g % 4 == 0) {
			int other = tp_test_gpu_switch(nt, g + 2);
			cr_assert_neq(other, leaf);
			cr_assert_eq(tp_test_switch_parent(nt, (unsigned)other), top);
		}
		if (g + 4 < 16)
			cr_assert_neq(tp_test_switch_parent(
			                  nt, (unsigned)tp_test_gpu_switch(nt, g + 4)),
			              top, "GPU %u and %u are on different host bridges", g, g + 4);
	}
	cr_assert_eq(tp_nodetype_pcie_distance(nt, 0, 1) < tp_nodetype_pcie_distance(nt, 0, 2), 1);
	cr_assert_eq(tp_nodetype_pcie_distance(nt, 0, 2) < tp_nodetype_pcie_distance(nt, 0, 4), 1);
	/* 12 NVSwitches, named by PCI bus id in file order. */
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 12);
	cr_assert_str_eq(nt->nvs_name[0], "0000:61:00.0");
	cr_assert_str_eq(nt->nvs_name[4], "0000:66:00.0"); /* class 0000, known by its subtype */
	cr_assert_str_eq(nt->nvs_name[11], "0000:c7:00.0");
	/* 6 links of 25 GB/s through NVSwitches: 150 GB/s between any two GPUs (what hwloc's
	 * transitive closure, lstopo --distances-transform transitive-closure, shows too). */
	for (unsigned a = 0; a < 16; a++)
		for (unsigned b = 0; b < 16; b++)
			cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, a, b), a == b ? 0.0 : 150.0, 1e-9,
			                   "GPUs %u-%u", a, b);
	cr_assert_eq(tp_nodetype_nic_count(nt), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), TP_ENOTFOUND);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 * power8gpudistances.xml, from lstopo: 4 "(3D)" PCI devices, each alone behind a root port of
 * its own host bridge, with CoProc(CUDA) "cudaN", CoProc(OpenCL) and GPU(NVML) "nvmlN". No
 * PCIe switch, no NIC, no NVSwitch. --distances: NVLinkBandwidth nvml0-nvml1 and nvml2-nvml3
 * 40000 MB/s, each GPU 40000 to its Package, nothing between the pairs.
 */
Test(hwloc_shared, power8)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("power8gpudistances.xml");
	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 0);
	for (unsigned g = 0; g < 4; g++)
		cr_assert_eq(tp_test_gpu_switch(nt, g), -1);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 1), 40.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 2, 3), 40.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 0, 2), 0.0, 1e-9);
	cr_assert_float_eq(tp_nodetype_nvlink_gbps(nt, 1, 3), 0.0, 1e-9);
	cr_assert_eq(tp_nodetype_nic_count(nt), 0);
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 0);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 * 96em64t-4n4d3ca2co-pci.xml, from lstopo: PCI 01:00.0 (VGA) is an ATI ES1000 (vendor 1002)
 * with GPU "card0": not an NVIDIA GPU. Ethernet PCI devices with Net "eth0".."eth7", two per
 * root port ("PCIBridge" right under "HostBridge"), so on the host bridge; no NVLink.
 */
Test(hwloc_shared, x86_server_without_nvidia_gpu)
{
	tp_test_alloc_reset();
	size_t len = 0;
	char *xml = read_shared("96em64t-4n4d3ca2co-pci.xml", &len);
	if (!xml)
		cr_skip_test("../shared/hwloc/96em64t-4n4d3ca2co-pci.xml is not there");
	tp_nodetype *nt = NULL;
	char err[256];
	int rc = tp_nodetype_from_hwloc_xml(&nt, xml, len, &tp_test_allocator, err, sizeof err);
	TP_ASSERT_ERR(rc, TP_ENOTFOUND, err, "no GPU, NVIDIA or AMD");
	cr_assert(strstr(err, "8 NICs"), "%s", err);

	/* The same machine with the display card's vendor changed to NVIDIA: one GPU, and the
	 * eight NICs can be checked one by one. */
	char *at = strstr(xml, "[1002:515e]");
	cr_assert_not_null(at);
	memcpy(at, "[10de:515e]", 11);
	rc = tp_nodetype_from_hwloc_xml(&nt, xml, len, &tp_test_allocator, err, sizeof err);
	free(xml);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(tp_nodetype_gpu_count(nt), 1);
	cr_assert_eq(tp_test_gpu_switch(nt, 0), -1);
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 0);
	cr_assert_eq(tp_nodetype_nic_count(nt), 8);
	for (unsigned i = 0; i < 8; i++) {
		char want[8];
		snprintf(want, sizeof want, "eth%u", i);
		cr_assert_str_eq(tp_nodetype_nic_name(nt, i), want);
		cr_assert_eq(tp_test_nic_switch(nt, i), -1);
	}
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), 0);
	cr_assert_eq(tp_nodetype_nvswitch_count(nt), 0);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* Two-level topology (rack > node) of `n` nodes of type nt in one rack; the node fabric is the
 * default unless `node_gbps` > 0. */
static tp_topology *nodes_of(const tp_nodetype *nt, unsigned n, double node_gbps)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	if (node_gbps > 0)
		cr_assert_eq(tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, node_gbps, 3.4), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	const char *path[1] = {"r0"};
	for (unsigned i = 0; i < n; i++) {
		char name[16];
		snprintf(name, sizeof name, "dgx%u", i);
		cr_assert_eq(tp_topology_builder_add_node(b, name, path, tp_nodetype_gpu_count(nt), &o),
		             0, "%s", tp_topology_builder_errmsg(b));
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	return t;
}

/*
 * The DGX-2's NVLinkBandwidth matrix (150 GB/s between any two GPUs, see dgx2 above) sets the
 * bandwidth inside its nodes, where the default node fabric says 900 GB/s; a node fabric set by
 * the caller still wins.
 */
Test(hwloc_shared, dgx2_nvlink_sets_the_node_bandwidth)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("nvidiaDGX2.xml");
	tp_topology *t = nodes_of(nt, 1, 0), *set = nodes_of(nt, 1, 900);
	cr_assert_eq(tp_cost_pair(t, 0, 15).gbps, 150.0);
	cr_assert_eq(tp_cost_pair(t, 3, 4).gbps, 150.0);
	cr_assert_eq(tp_cost_pair(set, 0, 15).gbps, 900.0);
	uint32_t all[16];
	for (uint32_t i = 0; i < 16; i++)
		all[i] = i;
	const double B = 1024.0 * 1024 * 1024;
	/* the ring of 16: 30 steps of B/16 at 150 GB/s (+3.4 us each) */
	double ring = tp_cost_ring_allreduce_us(t, all, 16, B);
	cr_assert_float_eq(ring, 30 * (3.4 + B / 16 / 150e3), 1e-6 * ring);
	tp_step_model m = {.version = TP_STEP_MODEL_VERSION, .tp = 16, .pp = 1, .dp = 1, .ep = 1,
	                   .compute_us = 10000, .tp_bytes = 32.0 * 1024 * 1024, .tp_msgs = 100};
	double with = 0, dflt = 0;
	cr_assert_eq(tp_cost_step_us(&with, t, all, 16, &m, NULL, NULL, 0), 0);
	cr_assert_eq(tp_cost_step_us(&dflt, set, all, 16, &m, NULL, NULL, 0), 0);
	cr_assert(with > 2 * dflt, "step %g us from the matrix, %g us at 900 GB/s", with, dflt);
	/* the placement's score is the same ring */
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	tp_request r = TP_REQUEST_INIT;
	r.count = 16;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0);
	cr_assert_float_eq(tp_placement_step_comm_us(p), ring, 1e-6 * ring);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	tp_topology_destroy(set);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/*
 * GPU+NIC pairs on the DGX-2: its XML has no NIC (lstopo shows no Net or OpenFabrics device),
 * so no GPU can be paired; with one NIC added by hand behind each leaf switch (two GPUs each),
 * a node pairs 8 of its 16 GPUs, one per leaf switch.
 */
Test(hwloc_shared, dgx2_gpu_nic_pairs)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_shared("nvidiaDGX2.xml");
	tp_topology *t = nodes_of(nt, 2, 0);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	tp_request r = TP_REQUEST_INIT;
	r.count = 1;
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "the topology has 0 GPUs that can be paired");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);

	for (unsigned g = 0; g < 16; g += 2) {
		char name[16];
		snprintf(name, sizeof name, "mlx5_%u", g / 2);
		cr_assert_eq(tp_nodetype_add_nic(nt, name, tp_test_gpu_switch(nt, g), 0.0, NULL), 0);
	}
	t = nodes_of(nt, 2, 0);
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	r.count = 8;
	r.required = "node";
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++) {
		unsigned gpu = tp_topology_device_index(t, d[i]);
		int nic = tp_placement_nic(p, i);
		cr_assert_eq(gpu / 2, (unsigned)nic, "rank %zu: GPU %u, NIC %d", i, gpu, nic);
		cr_assert_eq(tp_test_nic_switch(nt, (unsigned)nic), tp_test_gpu_switch(nt, gpu));
	}
	tp_placement_destroy(p);
	r.count = 9;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "request.gpu_nic_pairs");
	tp_placement_destroy(p);
	r.count = 16;
	r.required = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_placement_domain_count(p, 1), 2);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}
