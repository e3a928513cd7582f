/* SPDX-License-Identifier: MIT */
/*
 * The box fields of a request: a box of children of a grid level (a ring's arc, a torus's
 * block). Checked here against the topology and the fields a box does not combine with.
 */
#include "request.h"

#include <stdio.h>

/* The first field set that a box request may not combine with, or NULL. */
static const char *box_conflict(const tp_request *r)
{
	if (r->group_size > 1)
		return "request.group_size";
	if (r->group_level)
		return "request.group_level";
	if (r->required)
		return "request.required";
	if (r->preferred)
		return "request.preferred";
	if (r->nslices)
		return "request.slices";
	if (r->balanced)
		return "request.balanced";
	if (r->ncaps)
		return "request.max_per_domain";
	if (r->spread_level)
		return "request.spread";
	if (r->colocate_job)
		return "request.colocate";
	if (r->gpu_nic_pairs)
		return "request.gpu_nic_pairs";
	if (r->comm)
		return "request.comm";
	return NULL;
}

int tp_request_resolve_box(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                           char *err)
{
	q->box_level = -1;
	if (!r->box_level) {
		if (r->box[0] > 1 || r->box[1] > 1 || r->box[2] > 1)
			return tp_seterr(err, TP_EINVAL, "request.box %ux%ux%u is set without "
			                 "request.box_level", r->box[0], r->box[1], r->box[2]);
		return 0;
	}
	int l = tp_topology_level_index(t, r->box_level);
	if (l < 0)
		return tp_seterr(err, TP_ENOTFOUND, "request.box_level: unknown level '%s'",
		                 r->box_level);
	const struct tp_grid_impl *g = t->grid[l];
	if (!g)
		return tp_seterr(err, TP_EINVAL, "request.box_level %s is not a grid level "
		                 "(tp_topology_builder_set_grid)", r->box_level);
	const char *bad = box_conflict(r);
	if (bad)
		return tp_seterr(err, TP_EINVAL, "%s cannot be combined with request.box_level (a box "
		                 "takes whole children of one %s)", bad, r->box_level);
	if ((r->box_wrap != 0 && r->box_wrap != 1) || (r->box_rotate != 0 && r->box_rotate != 1))
		return tp_seterr(err, TP_EINVAL, "request.box_wrap %d and request.box_rotate %d must "
		                 "be 0 or 1", r->box_wrap, r->box_rotate);
	uint64_t cells = 1;
	for (unsigned i = 0; i < TP_GRID_MAX_DIMS; i++) {
		unsigned e = r->box[i] ? r->box[i] : 1;
		if (i >= g->nd && e > 1)
			return tp_seterr(err, TP_EINVAL, "request.box[%u] %u: the grid of %s has %u "
			                 "axes", i, e, r->box_level, g->nd);
		if (i == 0 && r->box[0] == 0)
			return tp_seterr(err, TP_EINVAL, "request.box[0] must be at least 1");
		q->box[i] = e;
		cells *= e;
	}
	uint64_t need = cells * g->child_dev;
	if (need != r->count)
		return tp_seterr(err, TP_EINVAL, "request.count %u is not the box's %llu devices "
		                 "(%ux%ux%u children of %u devices)", r->count,
		                 (unsigned long long)need, q->box[0], q->box[1], q->box[2],
		                 g->child_dev);
	q->box_level = l;
	q->box_wrap = r->box_wrap == 1;
	q->box_rotate = r->box_rotate == 1;
	return 0;
}
