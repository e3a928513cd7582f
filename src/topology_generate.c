/* SPDX-License-Identifier: MIT */
/*
 * Generators for standard shapes: NVL72 racks and HGX scalable units.
 */
#include "topology_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tp_topology_generate_nvl72(tp_topology **out, unsigned blocks, unsigned racks_per_block,
                               const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (blocks < 1 || racks_per_block < 1)
		return TP_EINVAL;
	if ((uint64_t)blocks * racks_per_block * 72 > INT32_MAX)
		return TP_ELIMIT;
	static const char *const levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	int rc = tp_topology_builder_create(&b, levels, 3, alloc);
	if (rc)
		return rc;
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "GB200";
	o.memory_gb = 186;
	unsigned counts[3] = {blocks, racks_per_block, 18};
	rc = tp_topology_builder_set_fabric(b, 2, TP_LINK_NVLINK, 900, 3.4);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900, 3.4);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 14);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, 4, &o);
	/* Each rack's NVLink fabric: 9 NVSwitch trays. */
	char bn[32], rn[32], sn[32];
	for (unsigned i = 0; !rc && i < blocks; i++)
		for (unsigned r = 0; !rc && r < racks_per_block; r++)
			for (unsigned s = 0; !rc && s < 9; s++) {
				snprintf(bn, sizeof bn, "block%u", i);
				snprintf(rn, sizeof rn, "rack%u", r);
				snprintf(sn, sizeof sn, "nvswitch-tray%u", s);
				const char *path[2] = {bn, rn};
				rc = tp_topology_builder_add_nvswitch(b, 1, path, sn);
			}
	if (!rc)
		rc = tp_topology_build(b, out);
	tp_topology_builder_destroy(b);
	return rc;
}

/* An HGX H100 board: 4 PCIe switches each holding 2 GPUs and 2 NICs under the host bridge, and
 * 4 NVSwitches joining all 8 GPUs (450 GB/s per GPU, one direction). */
static int hgx_nodetype(tp_nodetype **out, const tp_allocator *alloc)
{
	tp_nodetype *nt = NULL;
	int rc = tp_nodetype_create(&nt, 8, alloc);
	char name[32];
	for (unsigned s = 0; !rc && s < 4; s++) {
		unsigned sw;
		rc = tp_nodetype_add_pcie_switch(nt, -1, &sw);
		for (unsigned g = 0; !rc && g < 2; g++)
			rc = tp_nodetype_set_gpu_switch(nt, 2 * s + g, (int)sw);
		for (unsigned n = 0; !rc && n < 2; n++) {
			snprintf(name, sizeof name, "mlx5_%u", 2 * s + n);
			rc = tp_nodetype_add_nic(nt, name, (int)sw, 50, NULL);
		}
	}
	for (unsigned s = 0; !rc && s < 4; s++) {
		snprintf(name, sizeof name, "nvswitch%u", s);
		rc = tp_nodetype_add_nvswitch(nt, name, NULL);
	}
	for (unsigned i = 0; !rc && i < 8; i++)
		for (unsigned j = i + 1; !rc && j < 8; j++)
			rc = tp_nodetype_set_nvlink(nt, i, j, 450);
	if (rc) {
		tp_nodetype_destroy(nt);
		return rc;
	}
	*out = nt;
	return 0;
}

int tp_topology_generate_hgx(tp_topology **out, unsigned units, unsigned nodes_per_unit,
                             const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (units < 1 || nodes_per_unit < 1)
		return TP_EINVAL;
	if ((uint64_t)units * nodes_per_unit * 8 > INT32_MAX)
		return TP_ELIMIT;
	static const char *const levels[] = {"su", "node"};
	tp_topology_builder *b = NULL;
	tp_nodetype *nt = NULL;
	int rc = tp_topology_builder_create(&b, levels, 2, alloc);
	if (rc)
		return rc;
	rc = hgx_nodetype(&nt, alloc);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "H100";
	o.memory_gb = 80;
	o.type = nt;
	unsigned counts[2] = {units, nodes_per_unit};
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 450, 3.0);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 10);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, 8, &o);
	if (!rc)
		rc = tp_topology_build(b, out);
	tp_nodetype_destroy(nt);
	tp_topology_builder_destroy(b);
	return rc;
}
