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

/* Grid generators: one grid domain per pod or ring, one node per cell, named by its index. */
struct grid_gen {
	const char *levels[2];
	unsigned ndom, nd, wrap, gpus;
	const unsigned *dims;
	const char *model;
	struct tp_fabric_impl inner, outer;
};

static int grid_nodes(tp_topology_builder *b, const struct grid_gen *gg, uint32_t ncell)
{
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = gg->model;
	unsigned counts[2] = {gg->ndom, ncell};
	int rc = tp_topology_builder_generate(b, counts, gg->gpus, &o);
	char name[64];
	for (unsigned p = 0; !rc && p < gg->ndom; p++)
		for (uint32_t i = 0; !rc && i < ncell; i++) {
			unsigned x[TP_GRID_MAX_DIMS] = {i % gg->dims[0], 0, 0};
			if (gg->nd > 1)
				x[1] = i / gg->dims[0] % gg->dims[1];
			if (gg->nd > 2)
				x[2] = i / gg->dims[0] / gg->dims[1];
			snprintf(name, sizeof name, "%s%u-%s%u", gg->levels[0], p, gg->levels[1], i);
			rc = tp_topology_builder_set_coords(b, 1, name, x);
		}
	return rc;
}

static int generate_grid(tp_topology **out, const struct grid_gen *gg, const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (gg->ndom < 1 || !gg->dims || gg->nd < 1 || gg->nd > TP_GRID_MAX_DIMS || gg->wrap >> gg->nd)
		return TP_EINVAL;
	uint64_t ncell = 1;
	for (unsigned i = 0; i < gg->nd; i++) {
		if (gg->dims[i] < 1)
			return TP_EINVAL;
		ncell *= gg->dims[i];
		if (ncell > TP_GRID_MAX_CELLS)
			return TP_ELIMIT;
	}
	if (ncell * gg->ndom * gg->gpus > INT32_MAX)
		return TP_ELIMIT;
	tp_topology_builder *b = NULL;
	int rc = tp_topology_builder_create(&b, gg->levels, 2, alloc);
	if (rc)
		return rc;
	rc = tp_topology_builder_set_fabric(b, 1, gg->inner.kind, gg->inner.gbps,
	                                    gg->inner.latency_us);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, gg->inner.kind, gg->inner.gbps,
		                                    gg->inner.latency_us);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, gg->outer.kind, gg->outer.gbps,
		                                    gg->outer.latency_us);
	if (!rc)
		rc = tp_topology_builder_set_grid(b, 0, gg->dims, gg->nd, gg->wrap);
	if (!rc)
		rc = grid_nodes(b, gg, (uint32_t)ncell);
	if (!rc)
		rc = tp_topology_build(b, out);
	tp_topology_builder_destroy(b);
	return rc;
}

int tp_topology_generate_torus(tp_topology **out, unsigned pods, const unsigned *dims,
                               unsigned ndims, unsigned wrap, const tp_allocator *alloc)
{
	struct grid_gen gg = {{"pod", "chip"}, pods, ndims, wrap, 1, dims, "TPU",
	                      {TP_LINK_NVLINK, 45, 2}, {TP_LINK_IB, 25, 20}};
	return generate_grid(out, &gg, alloc);
}

int tp_topology_generate_ring(tp_topology **out, unsigned rings, unsigned nodes_per_ring,
                              unsigned gpus_per_node, const tp_allocator *alloc)
{
	if (gpus_per_node < 1 || gpus_per_node > TP_MAX_NODE_DEVICES)
		return out ? (*out = NULL, TP_EINVAL) : TP_EINVAL;
	unsigned dims[1] = {nodes_per_ring};
	struct grid_gen gg = {{"ring", "node"}, rings, 1, 1, gpus_per_node, dims, NULL,
	                      {TP_LINK_IB, 50, 14}, {TP_LINK_IB, 25, 20}};
	return generate_grid(out, &gg, alloc);
}
