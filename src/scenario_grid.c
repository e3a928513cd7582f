/* SPDX-License-Identifier: MIT */
/*
 * The scenario extensions for rings and tori (until the spec has them):
 *
 *   topology.x_grid: {"<level>": {"dims": [4, 4, 4], "wrap": [0, 1, 2],
 *                                 "coords": {"<child path or node name>": [x, y, z]}}}
 *     a grid level (tp_topology_builder_set_grid; "wrap" lists the wrapping axes, default
 *     every one) and its children's coordinates (tp_topology_builder_set_coords);
 *   request.x_box: {"level": "<grid level>", "shape": [2, 2, 1], "wrap": false,
 *                   "rotate": false}
 *     a box request (tp_request.box_level, box, box_wrap, box_rotate).
 */
#include <string.h>

#include "scenario_internal.h"

static const char *const grid_keys[] = {"dims", "wrap", "coords"};
static const char *const box_keys[] = {"level", "shape", "wrap", "rotate"};

/* A list of 1 to 3 whole numbers (each lo..hi) into out; how many, or 0 after the message. */
static unsigned read_triple(struct scen *s, const json_t *v, const char *p, long long lo,
                            long long hi, unsigned *out)
{
	if (!sc_check_list(s, v, p, true))
		return 0;
	size_t n = json_array_size(v);
	if (n > TP_GRID_MAX_DIMS) {
		sc_fail(s, p, "has %zu values, at most %d (x, y, z)", n, TP_GRID_MAX_DIMS);
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		char q[SC_PATH_LEN];
		long long x;
		if (!sc_check_int(s, json_array_get(v, i), sc_item(q, p, i), lo, true, hi, true,
		                  "a whole number", &x))
			return 0;
		out[i] = (unsigned)x;
	}
	return (unsigned)n;
}

static bool read_wrap(struct scen *s, const json_t *g, const char *p, unsigned nd,
                      unsigned *wrap)
{
	const json_t *v = json_object_get(g, "wrap");
	*wrap = (1u << nd) - 1;
	if (!v)
		return true;
	char q[SC_PATH_LEN];
	sc_join(q, p, "wrap");
	if (!sc_check_list(s, v, q, false))
		return false;
	*wrap = 0;
	for (size_t i = 0; i < json_array_size(v); i++) {
		char r[SC_PATH_LEN];
		long long a;
		if (!sc_check_int(s, json_array_get(v, i), sc_item(r, q, i), 0, true, nd - 1, true,
		                  "an axis of the grid", &a))
			return false;
		*wrap |= 1u << a;
	}
	return true;
}

static bool read_coords(struct scen *s, const json_t *v, const char *p, unsigned level)
{
	if (!json_is_object(v))
		return sc_fail(s, p, "must be an object (child path -> coordinates), not %s",
		               sc_kind(v));
	const char *path;
	json_t *c;
	json_object_foreach((json_t *)v, path, c) {
		char q[SC_PATH_LEN];
		sc_join(q, p, path);
		unsigned x[TP_GRID_MAX_DIMS] = {0, 0, 0};
		if (!read_triple(s, c, q, 0, TP_GRID_MAX_CELLS - 1, x))
			return false;
		int rc = tp_topology_builder_set_coords(s->b, level + 1, path, x);
		if (rc == TP_ENOMEM)
			return sc_nomem(s, q);
		if (rc < 0)
			return sc_fail(s, q, "%s", tp_topology_builder_errmsg(s->b));
	}
	return true;
}

bool sc_read_grids(struct scen *s, const json_t *v)
{
	const char *p = "topology.x_grid";
	if (!sc_check_object(s, v, p, s->levels, s->nlevels - 1))
		return false;
	const char *lname;
	json_t *g;
	json_object_foreach((json_t *)v, lname, g) {
		char lp[SC_PATH_LEN], q[SC_PATH_LEN];
		sc_join(lp, p, lname);
		if (!sc_check_object(s, g, lp, grid_keys, SC_COUNT(grid_keys)))
			return false;
		unsigned level = 0;
		while (strcmp(s->levels[level], lname))
			level++;
		const json_t *d = json_object_get(g, "dims");
		if (!d)
			return sc_fail(s, lp, "needs dims (the grid's extents)");
		unsigned dims[TP_GRID_MAX_DIMS], wrap;
		unsigned nd = read_triple(s, d, sc_join(q, lp, "dims"), 1, TP_GRID_MAX_CELLS, dims);
		if (!nd || !read_wrap(s, g, lp, nd, &wrap))
			return false;
		if (tp_topology_builder_set_grid(s->b, level, dims, nd, wrap) < 0)
			return sc_fail(s, lp, "%s", tp_topology_builder_errmsg(s->b));
		const json_t *c = json_object_get(g, "coords");
		if (c && !read_coords(s, c, sc_join(q, lp, "coords"), level))
			return false;
	}
	return true;
}

bool sc_read_box(struct scen *s, const json_t *v, const char *p, tp_request *r)
{
	char bp[SC_PATH_LEN], q[SC_PATH_LEN];
	sc_join(bp, p, "x_box");
	if (!sc_check_object(s, v, bp, box_keys, SC_COUNT(box_keys)))
		return false;
	const json_t *x = json_object_get(v, "level");
	if (!x || !json_is_string(x))
		return sc_fail(s, sc_join(q, bp, "level"), "must be a level name");
	r->box_level = json_string_value(x);
	x = json_object_get(v, "shape");
	if (!x)
		return sc_fail(s, bp, "needs shape (the box's extents)");
	unsigned e[TP_GRID_MAX_DIMS] = {0, 0, 0};
	if (!read_triple(s, x, sc_join(q, bp, "shape"), 1, TP_GRID_MAX_CELLS, e))
		return false;
	memcpy(r->box, e, sizeof e);
	if ((x = json_object_get(v, "wrap")) &&
	    !sc_check_bool(s, x, sc_join(q, bp, "wrap"), &r->box_wrap))
		return false;
	if ((x = json_object_get(v, "rotate")) &&
	    !sc_check_bool(s, x, sc_join(q, bp, "rotate"), &r->box_rotate))
		return false;
	return true;
}
