/* SPDX-License-Identifier: MIT */
/*
 * Slurm's topology/ring (topology.conf(5), Slurm 26.11): `RingName=<name> Nodes=<hostlist>`,
 * the order of the nodes being their ring positions from 0, at most 16 nodes a ring. Each
 * ring becomes a domain of level `ring` holding its nodes on a one-axis grid that wraps
 * around (tp_topology_builder_set_grid), so that a request with `box_level = "ring"` takes a
 * contiguous arc that may wrap, as Slurm's plugin allocates.
 */
#include <stdio.h>

#include "slurm_internal.h"

/* Every ring's size: one grid shape per level holds the rings, so they must agree. */
static int ring_size(struct conf *c, unsigned *size)
{
	*size = 0;
	for (uint32_t r = 0; r < c->nrec; r++) {
		const struct rec *x = &c->rec[r];
		if (x->nnodes == 0)
			return tp_sl_fail(c, TP_EPARSE, "line %u: ring '%s' has no Nodes", x->line,
			                  rec_name(c, r));
		if (x->nnodes > RING_MAX_NODES)
			return tp_sl_fail(c, TP_EPARSE, "line %u: ring '%s' has %u nodes, more than "
			                  "Slurm's %u a ring (topology.conf(5))", x->line, rec_name(c, r),
			                  x->nnodes, RING_MAX_NODES);
		if (*size && x->nnodes != *size)
			return tp_sl_fail(c, TP_EPARSE, "line %u: ring '%s' has %u nodes, ring '%s' %u: "
			                  "this importer needs rings of one size (one grid shape)",
			                  x->line, rec_name(c, r), x->nnodes, rec_name(c, 0), *size);
		*size = x->nnodes;
	}
	return 0;
}

int tp_sl_build_rings(struct conf *c, struct build *bd)
{
	unsigned size;
	int rc = ring_size(c, &size);
	if (rc)
		return rc;
	bd->nlevels = 2;
	snprintf(bd->level_names[0], sizeof bd->level_names[0], "ring");
	snprintf(bd->level_names[1], sizeof bd->level_names[1], "node");
	rc = tp_sl_create_builder(c, bd);
	if (!rc && tp_topology_builder_set_grid(bd->b, 0, &size, 1, 1))
		return tp_sl_fail(c, TP_EINTERNAL, "internal error: %s",
		                  tp_topology_builder_errmsg(bd->b));
	for (uint32_t r = 0; !rc && r < c->nrec; r++) {
		const struct rec *x = &c->rec[r];
		const char *path[1] = {rec_name(c, r)};
		for (unsigned i = 0; !rc && i < x->nnodes; i++) {
			const char *name = name_at(c, c->node[x->node_first + i]);
			rc = tp_topology_builder_add_node(bd->b, name, path, bd->gpus, NULL);
			if (!rc)
				rc = tp_topology_builder_set_coords(bd->b, 1, name, &i);
			if (rc)
				return tp_sl_fail(c, rc, "line %u: node '%s': %s", x->line, name,
				                  tp_topology_builder_errmsg(bd->b));
		}
	}
	return rc;
}
