/* SPDX-License-Identifier: MIT */
/*
 * The hwloc importer on real machines as sites keep them: hwloc 1.x XML files of LLNL's Lassen
 * (4 V100, 4 ConnectX-5 HCA ports, 2 BCM5719 1 GbE ports) and Corona (8 AMD MI50 with RSMI OS
 * devices), from flux-framework/flux-sched's test data (tests/data/README.md). What each test
 * asserts is what `lstopo-no-graphics --input FILE --whole-io` (hwloc 2.9) shows:
 *
 * Lassen (lassen-v1.xml):
 *   Package 0 / NUMANode P#0:
 *     HostBridge 0003: PCI 0003:01:00.0 and .1 (InfiniBand): mlx5_0, mlx5_1
 *     HostBridge 0004: PLX switch: PCI 0004:04:00.0 "cuda0", 0004:05:00.0 "cuda1"
 *     HostBridge 0005: PCI 0005:01:00.0 and .1 (BCM5719 Ethernet): enP5p1s0f0, enP5p1s0f1
 *   Package 1 / NUMANode P#8:
 *     HostBridge 0033: PCI 0033:01:00.0 and .1 (InfiniBand): mlx5_2, mlx5_3
 *     HostBridge 0035: PLX switch: PCI 0035:03:00.0 "cuda2", 0035:04:00.0 "cuda3"
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-hwloc.h"
#include "topology_impl.h"

#ifndef TP_DATA_DIR
#define TP_DATA_DIR "tests/data"
#endif

static char *read_data(const char *name, size_t *len)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", TP_DATA_DIR, name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	cr_assert_eq(fseek(f, 0, SEEK_END), 0);
	long n = ftell(f);
	cr_assert(n > 0);
	rewind(f);
	char *buf = malloc((size_t)n + 1); /* NUL-terminated for strstr(); len leaves it out */
	cr_assert_not_null(buf);
	cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = '\0';
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static tp_nodetype *import_data(const char *name)
{
	size_t len = 0;
	char *xml = read_data(name, &len);
	tp_nodetype *nt = NULL;
	char err[256];
	int rc = tp_nodetype_from_hwloc_xml(&nt, xml, len, &tp_test_allocator, err, sizeof err);
	free(xml);
	cr_assert_eq(rc, 0, "%s: %s: %s", name, tp_err_name(rc), err);
	cr_assert_str_empty(err);
	return nt;
}

static int nic_index(const tp_nodetype *nt, const char *name)
{
	for (unsigned i = 0; i < tp_nodetype_nic_count(nt); i++)
		if (!strcmp(tp_nodetype_nic_name(nt, i), name))
			return (int)i;
	cr_assert_fail("no NIC %s", name);
	return -1;
}

Test(hwloc_sites, lassen_v1_file_is_read)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_data("hwloc/lassen-v1.xml");
	cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
	static const char *const bus[] = {"0004:04:00.0", "0004:05:00.0", "0035:03:00.0",
	                                  "0035:04:00.0"};
	for (unsigned g = 0; g < 4; g++)
		cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, g), bus[g]);
	cr_assert_null(tp_nodetype_gpu_bus_id(nt, 4));
	/* one PLX switch per GPU pair; the HCAs and 1 GbE ports sit on root ports */
	cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 2);
	cr_assert_eq(tp_test_gpu_switch(nt, 0), tp_test_gpu_switch(nt, 1));
	cr_assert_neq(tp_test_gpu_switch(nt, 0), tp_test_gpu_switch(nt, 2));
	cr_assert_eq(tp_nodetype_nic_count(nt), 6);
	static const char *const rdma[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
	for (unsigned i = 0; i < 4; i++) {
		int n = nic_index(nt, rdma[i]);
		cr_assert_eq(tp_nodetype_nic_kind(nt, (unsigned)n), TP_NIC_RDMA, "%s", rdma[i]);
		cr_assert_eq(tp_test_nic_switch(nt, (unsigned)n), -1);
	}
	cr_assert_eq(tp_nodetype_nic_kind(nt, (unsigned)nic_index(nt, "enP5p1s0f0")),
	             TP_NIC_ETHERNET);
	cr_assert_eq(tp_nodetype_nic_kind(nt, (unsigned)nic_index(nt, "enP5p1s0f1")),
	             TP_NIC_ETHERNET);
	/* the nearest NIC is an HCA of the GPU's own socket */
	for (unsigned g = 0; g < 4; g++) {
		const char *name = tp_nodetype_nic_name(nt, (unsigned)tp_nodetype_gpu_nearest_nic(nt, g));
		cr_assert_str_eq(name, g < 2 ? "mlx5_0" : "mlx5_2", "GPU %u got %s", g, name);
	}
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* The 4-GPU pairs job of issue #16: the four HCAs, each on its GPU's socket, no 1 GbE port. */
Test(hwloc_sites, lassen_pairs_job_gets_the_four_hcas)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_data("hwloc/lassen-v1.xml");
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	const char *path[] = {"r0"};
	cr_assert_eq(tp_topology_builder_add_node(b, "lassen1", path, 4, &o), 0, "%s",
	             tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	tp_nodetype_destroy(nt);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.id = "pairs4";
	r.count = 4;
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n = 0;
	const uint32_t *devs = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	const tp_nodetype *type = tp_topology_node_type(t, 0);
	bool used[6] = {false};
	for (size_t i = 0; i < n; i++) {
		int nic = tp_placement_nic(p, i);
		cr_assert(nic >= 0, "rank %zu has no NIC", i);
		const char *name = tp_nodetype_nic_name(type, (unsigned)nic);
		unsigned gpu = tp_topology_device_index(t, devs[i]);
		cr_assert_eq(tp_nodetype_nic_kind(type, (unsigned)nic), TP_NIC_RDMA, "GPU %u got %s",
		             gpu, name);
		/* socket 0: mlx5_0/1, socket 1: mlx5_2/3 */
		bool socket1 = !strcmp(name, "mlx5_2") || !strcmp(name, "mlx5_3");
		cr_assert_eq(socket1, gpu >= 2, "GPU %u got %s", gpu, name);
		cr_assert(!used[nic], "NIC %s paired twice", name);
		used[nic] = true;
	}
	cr_assert_eq(tp_commit(c, p, NULL), 0);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Corona: 8 MI50 (vendor 1002, class 0380, RSMI OS devices) are GPUs, in bus-id order; the
 * board's VGA (0000:65:00.0) is not. */
Test(hwloc_sites, corona_amd_gpus)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = import_data("hwloc/corona-mi50-v1.xml");
	cr_assert_eq(tp_nodetype_gpu_count(nt), 8);
	for (unsigned g = 1; g < 8; g++)
		cr_assert(strcmp(tp_nodetype_gpu_bus_id(nt, g - 1), tp_nodetype_gpu_bus_id(nt, g)) < 0,
		          "GPU %u %s after %s", g, tp_nodetype_gpu_bus_id(nt, g),
		          tp_nodetype_gpu_bus_id(nt, g - 1));
	cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, 0), "0000:03:00.0");
	for (unsigned g = 0; g < 8; g++)
		cr_assert_neq(strcmp(tp_nodetype_gpu_bus_id(nt, g), "0000:65:00.0"), 0);
	int hca = nic_index(nt, "mlx5_0");
	cr_assert_eq(tp_nodetype_nic_kind(nt, (unsigned)hca), TP_NIC_RDMA);
	cr_assert_eq(tp_nodetype_nic_kind(nt, (unsigned)nic_index(nt, "eno1")), TP_NIC_ETHERNET);
	/* RDMA first: every GPU's nearest NIC is the one HCA */
	for (unsigned g = 0; g < 8; g++)
		cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, g), hca, "GPU %u", g);
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* A 1.x file whose root has no nodesets (as hwloc 1.0 wrote) is read; one that gives the root a
 * nodeset but leaves it out of another object is refused. */
Test(hwloc_sites, v1_nodesets)
{
	size_t len = 0;
	char *xml = read_data("hwloc/lassen-v1.xml", &len);
	char err[256];
	tp_nodetype *nt = NULL;
	/* drop one NUMANode's complete_nodeset */
	char *at = strstr(xml, "<object type=\"NUMANode\" os_index=\"8\"");
	cr_assert_not_null(at);
	char *cn = strstr(at, " complete_nodeset=\"");
	cr_assert_not_null(cn);
	char *end = strchr(cn + 19, '"') + 1;
	memmove(cn, end, (size_t)(xml + len - end));
	len -= (size_t)(end - cn);
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, xml, len, NULL, err, sizeof err), TP_EPARSE,
	              err, "without one of its cpusets or nodesets");
	free(xml);
}

/* hwloc allocates nbobjs^2 floats for a 1.x <distances> unchecked: above 4096 is refused. */
Test(hwloc_sites, v1_distances_are_bounded)
{
	size_t len = 0;
	char *xml = read_data("hwloc/lassen-v1.xml", &len);
	char *at = strstr(xml, "<distances nbobjs=\"2\"");
	cr_assert_not_null(at);
	char *copy = malloc(len + 16);
	cr_assert_not_null(copy);
	size_t head = (size_t)(at - xml) + strlen("<distances nbobjs=\"");
	memcpy(copy, xml, head);
	memcpy(copy + head, "4097", 4);
	memcpy(copy + head + 4, xml + head + 1, len - head - 1);
	char err[256];
	tp_nodetype *nt = NULL;
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, copy, len + 3, NULL, err, sizeof err),
	              TP_EPARSE, err, "a 1.x <distances> matrix with nbobjs not a number up to 4096");
	cr_assert_null(nt);
	free(copy);
	free(xml);
}

/* The node type's setters refuse what they cannot hold, leaving the node type as it was. */
Test(hwloc_sites, nodetype_kind_locality_bus_id_setters)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_nodetype_add_nic(nt, "eth0", -1, 0, NULL), 0);
	cr_assert_eq(tp_nodetype_add_nic(nt, "mlx5_0", -1, 0, NULL), 0);
	cr_assert_eq(tp_nodetype_nic_kind(nt, 0), TP_NIC_UNKNOWN);
	/* without kinds, ties go to the lowest index */
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 1), 0);
	TP_ASSERT_ERR(tp_nodetype_set_nic_kind(nt, 2, TP_NIC_RDMA), TP_EINVAL,
	              tp_nodetype_errmsg(nt), "NIC 2 does not exist (2 NICs)");
	TP_ASSERT_ERR(tp_nodetype_set_nic_kind(nt, 0, (tp_nic_kind)7), TP_EINVAL,
	              tp_nodetype_errmsg(nt), "NIC 0: kind 7 is not a tp_nic_kind");
	cr_assert_eq(tp_nodetype_set_nic_kind(nt, 1, TP_NIC_RDMA), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 1), 1);
	/* locality breaks ties among NICs of one kind on the host bridges */
	cr_assert_eq(tp_nodetype_add_nic(nt, "mlx5_1", -1, 0, NULL), 0);
	cr_assert_eq(tp_nodetype_set_nic_kind(nt, 2, TP_NIC_RDMA), 0);
	cr_assert_eq(tp_nodetype_set_nic_locality(nt, 2, 1, 1, 7), 0);
	cr_assert_eq(tp_nodetype_set_nic_locality(nt, 1, 0, 0, 3), 0);
	cr_assert_eq(tp_nodetype_set_gpu_locality(nt, 0, 1, 1, 9), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), 2);
	cr_assert_eq(tp_nodetype_set_gpu_locality(nt, 0, 0, -1, -1), 0);
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), 1);
	TP_ASSERT_ERR(tp_nodetype_set_gpu_locality(nt, 0, -2, 0, 0), TP_EINVAL,
	              tp_nodetype_errmsg(nt), "GPU 0: locality (-2, 0, 0) has a value below -1");
	TP_ASSERT_ERR(tp_nodetype_set_nic_locality(nt, 5, 0, 0, 0), TP_EINVAL,
	              tp_nodetype_errmsg(nt), "NIC 5 does not exist (3 NICs)");
	cr_assert_eq(tp_nodetype_gpu_nearest_nic(nt, 0), 1);
	cr_assert_null(tp_nodetype_gpu_bus_id(nt, 0));
	cr_assert_eq(tp_nodetype_set_gpu_bus_id(nt, 0, "0000:3b:00.0"), 0);
	cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, 0), "0000:3b:00.0");
	TP_ASSERT_ERR(tp_nodetype_set_gpu_bus_id(nt, 0, ""), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "GPU 0: bus id is empty");
	TP_ASSERT_ERR(tp_nodetype_set_gpu_bus_id(nt, 0, "0123456789012345678901234567890123"),
	              TP_EINVAL, tp_nodetype_errmsg(nt), "GPU 0: bus id is longer than 31 bytes");
	TP_ASSERT_ERR(tp_nodetype_set_gpu_bus_id(nt, 2, "x"), TP_EINVAL, tp_nodetype_errmsg(nt),
	              "GPU 2 does not exist (2 GPUs)");
	cr_assert_str_eq(tp_nodetype_gpu_bus_id(nt, 0), "0000:3b:00.0");
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* Cut short anywhere (sampled every 251 bytes), a 1.x file is a parse error with a message, never
 * a crash or a node type. */
Test(hwloc_sites, v1_truncations_are_parse_errors)
{
	size_t len = 0;
	char *xml = read_data("hwloc/lassen-v1.xml", &len);
	for (size_t cut = 1; cut < len - 2; cut += 251) {
		tp_nodetype *nt = NULL;
		char err[256];
		int rc = tp_nodetype_from_hwloc_xml(&nt, xml, cut, NULL, err, sizeof err);
		cr_assert_eq(rc, TP_EPARSE, "prefix of %zu bytes: %s (%s)", cut, tp_err_name(rc), err);
		cr_assert(strstr(err, "bytes"), "prefix of %zu bytes: '%s'", cut, err);
		cr_assert_null(nt);
	}
	free(xml);
}

/* hwloc's own test file of a 1.x topology without any nodeset (8em64t-2p2ca2co-nonodesets.v1.xml,
 * hwloc 2.9.3): accepted by the screen and loaded by hwloc; it has NICs but no GPU. */
Test(hwloc_sites, v1_without_nodesets_loads)
{
	size_t len = 0;
	char *xml = read_data("hwloc/8em64t-2p2ca2co-nonodesets.v1.xml", &len);
	cr_assert_null(strstr(xml, "nodeset"));
	tp_nodetype *nt = NULL;
	char err[256];
	TP_ASSERT_ERR(tp_nodetype_from_hwloc_xml(&nt, xml, len, NULL, err, sizeof err), TP_ENOTFOUND,
	              err, "no GPU, NVIDIA or AMD (5 PCI devices, 3 NICs;");
	free(xml);
}
