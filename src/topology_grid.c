/* SPDX-License-Identifier: MIT */
/*
 * Grid levels: a level whose domains hold their children at coordinates of a ring, a torus or
 * a mesh. The builder records the shape per level and a cell per child; the build turns them
 * into one cell table per level (cell -> child) and one position per child (child -> cell),
 * checked: every child placed, inside the grid, alone in its cell, all with the same devices.
 * Also the geometry placement and fragmentation share: prefix sums over a grid doubled along
 * its wrapping axes (any box is eight corners) and the largest box of marked cells.
 */
#include "topology_builder.h"

#include <stdio.h>
#include <string.h>

int tp_topology_builder_set_grid(tp_topology_builder *b, unsigned level, const unsigned *dims,
                                 unsigned ndims, unsigned wrap)
{
	if (!b)
		return TP_EINVAL;
	if (level + 1 >= b->nlevels)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "grid level %u is not a level above the node (%u levels)", level,
		                 b->nlevels);
	if (!dims || ndims < 1 || ndims > TP_GRID_MAX_DIMS)
		return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: ndims %u is not 1 to %u (or dims "
		                 "is NULL)", b->levels[level], ndims, TP_GRID_MAX_DIMS);
	if (wrap >> ndims)
		return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: wrap 0x%x names an axis past its "
		                 "%u", b->levels[level], wrap, ndims);
	uint64_t cells = 1;
	for (unsigned i = 0; i < ndims; i++) {
		if (dims[i] < 1 || dims[i] > TP_GRID_MAX_CELLS)
			return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: dims[%u] %u is not 1 to %u",
			                 b->levels[level], i, dims[i], TP_GRID_MAX_CELLS);
		cells *= dims[i];
		if (cells > TP_GRID_MAX_CELLS)
			return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: more than %u cells",
			                 b->levels[level], TP_GRID_MAX_CELLS);
	}
	struct bgrid g = {true, ndims, {1, 1, 1}, wrap};
	memcpy(g.dim, dims, ndims * sizeof *dims);
	b->grid[level] = g;
	PJError_t err = NULL;
	JudyLFreeArray(&b->coords[level + 1], err); /* cells of the old shape mean nothing now */
	return 0;
}

/* The builder id of a child: its prefix id, or the node index at the node level. */
static int child_id(tp_topology_builder *b, unsigned level, const char *path, Word_t *id)
{
	PJError_t err = NULL;
	Pvoid_t map = level + 1 == b->nlevels ? b->node_by_name : b->pre[level].by_path;
	PPvoid_t slot = strlen(path) < PATH_BUF ? JudySLGet(map, (const uint8_t *)path, err)
	                                        : NULL;
	if (!slot)
		return tp_seterr(b->errmsg, TP_ENOTFOUND, "coords: no %s %s (add its nodes first)",
		                 b->levels[level], path);
	*id = (Word_t)((uintptr_t)*slot - 1);
	return 0;
}

int tp_topology_builder_set_coords(tp_topology_builder *b, unsigned level, const char *path,
                                   const unsigned *coords)
{
	if (!b)
		return TP_EINVAL;
	if (!path || !coords)
		return tp_seterr(b->errmsg, TP_EINVAL, "coords: path or coords is NULL");
	if (level < 1 || level >= b->nlevels || !b->grid[level - 1].on)
		return tp_seterr(b->errmsg, TP_EINVAL, "coords of %s: level %u's parent level is no "
		                 "grid (tp_topology_builder_set_grid)", path, level);
	const struct bgrid *g = &b->grid[level - 1];
	uint64_t cell = 0;
	for (unsigned i = g->nd; i-- > 0;) {
		if (coords[i] >= g->dim[i])
			return tp_seterr(b->errmsg, TP_EINVAL, "coords of %s: coords[%u] %u is not below "
			                 "the grid's extent %u", path, i, coords[i], g->dim[i]);
		cell = cell * g->dim[i] + coords[i];
	}
	Word_t id = 0;
	int rc = child_id(b, level, path, &id);
	if (rc)
		return rc;
	PJError_t err = NULL;
	PPvoid_t slot = JudyLIns(&b->coords[level], id, err);
	if (slot == PPJERR)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory setting the coords of %s", path);
	*slot = (void *)(uintptr_t)(cell + 1);
	return 0;
}

void tp_builder_grids_free(tp_topology_builder *b)
{
	PJError_t err = NULL;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		JudyLFreeArray(&b->coords[l], err);
}

void tp_grids_free(tp_topology *t)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		struct tp_grid_impl *g = t->grid[l];
		if (!g)
			continue;
		tp_free(&t->alloc, g->cell);
		tp_free(&t->alloc, g->pos);
		tp_free(&t->alloc, g->nbr);
		tp_free(&t->alloc, g->xyz);
		tp_free(&t->alloc, g);
		t->grid[l] = NULL;
	}
}

/* Place child dom (builder id id) of child level cl in its parent's cells. */
static int grid_put(tp_topology_builder *b, tp_topology *t, unsigned cl, uint32_t dom, Word_t id)
{
	struct tp_grid_impl *g = t->grid[cl - 1];
	char path[PATH_BUF], other[PATH_BUF];
	tp_topology_domain_path(t, cl, dom, path, sizeof path);
	PJError_t err = NULL;
	PPvoid_t slot = JudyLGet(b->coords[cl], id, err);
	if (!slot)
		return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: %s %s has no coordinates "
		                 "(tp_topology_builder_set_coords)", b->levels[cl - 1], b->levels[cl],
		                 path);
	uint32_t cell = (uint32_t)((uintptr_t)*slot - 1);
	uint32_t parent = t->lv[cl].parent[dom];
	uint32_t *at = &g->cell[(size_t)parent * g->ncell + cell];
	if (*at != TP_NONE) {
		tp_topology_domain_path(t, cl, *at, other, sizeof other);
		return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: %s and %s share cell %u",
		                 b->levels[cl - 1], other, path, cell);
	}
	uint32_t nd = tp_dom_ndev(t, cl, dom);
	if (g->child_dev == 0)
		g->child_dev = nd;
	if (nd != g->child_dev)
		return tp_seterr(b->errmsg, TP_EINVAL, "grid of %s: %s has %u devices, other children "
		                 "%u (every child of a grid holds the same)", b->levels[cl - 1], path,
		                 nd, g->child_dev);
	*at = dom;
	g->pos[dom] = cell;
	return 0;
}

/* Each cell's coordinates and neighbours, so that searches need no division. */
static int grid_tables(const tp_allocator *a, struct tp_grid_impl *g)
{
	g->nbr = tp_mallocn(a, (size_t)g->ncell * 6, sizeof *g->nbr);
	g->xyz = tp_mallocn(a, (size_t)g->ncell * 3, sizeof *g->xyz);
	if (!g->nbr || !g->xyz)
		return TP_ENOMEM;
	for (uint32_t c = 0; c < g->ncell; c++) {
		unsigned x[3];
		tp_grid_coords(g, c, x);
		memcpy(&g->xyz[(size_t)c * 3], x, sizeof x);
		for (unsigned i = 0; i < 3; i++) {
			unsigned v = x[i], d = g->dim[i];
			bool w = g->wrap >> i & 1u;
			uint32_t *out = &g->nbr[(size_t)c * 6 + 2 * i];
			out[0] = out[1] = TP_NONE;
			if (i >= g->nd || d == 1)
				continue;
			if (v > 0 || w) {
				x[i] = v > 0 ? v - 1 : d - 1;
				out[0] = tp_grid_cell(g, x);
			}
			if (v + 1 < d || w) {
				x[i] = v + 1 < d ? v + 1 : 0;
				out[1] = tp_grid_cell(g, x);
			}
			x[i] = v;
		}
	}
	return 0;
}

static int build_grid(tp_topology_builder *b, tp_topology *t, unsigned l,
                      const struct build_grid_in *in)
{
	const struct bgrid *bg = &b->grid[l];
	unsigned cl = l + 1;
	struct tp_grid_impl *g = tp_calloc(&t->alloc, 1, sizeof *g);
	if (!g)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory building the topology");
	t->grid[l] = g;
	g->nd = bg->nd;
	memcpy(g->dim, bg->dim, sizeof g->dim);
	g->wrap = bg->wrap;
	g->ncell = bg->dim[0] * bg->dim[1] * bg->dim[2];
	g->cell = tp_mallocn(&t->alloc, (size_t)t->lv[l].ndom * g->ncell, sizeof *g->cell);
	g->pos = tp_mallocn(&t->alloc, t->lv[cl].ndom, sizeof *g->pos);
	if (!g->cell || !g->pos)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory building the topology");
	memset(g->cell, 0xff, (size_t)t->lv[l].ndom * g->ncell * sizeof *g->cell);
	if (grid_tables(&t->alloc, g))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory building the topology");
	int rc = 0;
	if (cl == tp_node_level(t)) {
		for (uint32_t i = 0; i < t->nnodes && !rc; i++)
			rc = grid_put(b, t, cl, i, in->order[i]);
	} else {
		for (size_t pid = 0; pid < b->pre[cl].n && !rc; pid++)
			rc = grid_put(b, t, cl, in->pid_to_dom[cl][pid], pid);
	}
	return rc;
}

int tp_build_grids(tp_topology_builder *b, tp_topology *t, const struct build_grid_in *in)
{
	for (unsigned l = 0; l + 1 < b->nlevels; l++)
		if (b->grid[l].on) {
			int rc = build_grid(b, t, l, in);
			if (rc)
				return rc;
		}
	return 0;
}

/* ---- queries ------------------------------------------------------------------------------- */

int tp_topology_grid(const tp_topology *t, unsigned level, unsigned *dims, unsigned *ndims,
                     unsigned *wrap)
{
	if (!t || level >= t->nlevels)
		return TP_EINVAL;
	const struct tp_grid_impl *g = t->grid[level];
	if (!g)
		return TP_ENOTFOUND;
	if (dims)
		memcpy(dims, g->dim, sizeof g->dim);
	if (ndims)
		*ndims = g->nd;
	if (wrap)
		*wrap = g->wrap;
	return 0;
}

int tp_topology_domain_coords(const tp_topology *t, unsigned level, uint32_t dom,
                              unsigned *coords)
{
	if (!t || !coords || level >= t->nlevels || dom >= t->lv[level].ndom)
		return TP_EINVAL;
	const struct tp_grid_impl *g = level ? t->grid[level - 1] : NULL;
	if (!g)
		return TP_ENOTFOUND;
	tp_grid_coords(g, g->pos[dom], coords);
	for (unsigned i = g->nd; i < TP_GRID_MAX_DIMS; i++)
		coords[i] = 0;
	return 0;
}

int tp_topology_grid_child(const tp_topology *t, unsigned level, uint32_t dom,
                           const unsigned *coords, uint32_t *child)
{
	if (!t || !coords || !child || level >= t->nlevels || dom >= t->lv[level].ndom)
		return TP_EINVAL;
	const struct tp_grid_impl *g = t->grid[level];
	if (!g)
		return TP_ENOTFOUND;
	unsigned x[TP_GRID_MAX_DIMS] = {0, 0, 0};
	for (unsigned i = 0; i < g->nd; i++) {
		if (coords[i] >= g->dim[i])
			return TP_EINVAL;
		x[i] = coords[i];
	}
	uint32_t ch = g->cell[(size_t)dom * g->ncell + tp_grid_cell(g, x)];
	if (ch == TP_NONE)
		return TP_ENOTFOUND;
	*child = ch;
	return 0;
}

/* ---- geometry ------------------------------------------------------------------------------ */

size_t tp_grid_sum_len(const struct tp_grid_impl *g)
{
	size_t n = 1;
	for (unsigned i = 0; i < TP_GRID_MAX_DIMS; i++)
		n *= (size_t)g->dim[i] * ((g->wrap >> i & 1u) ? 2 : 1) + 1;
	return n;
}

void tp_grid_sum_fill(struct tp_grid_sum *sum, const struct tp_grid_impl *g,
                      const unsigned char *mark, uint32_t *s)
{
	sum->g = g;
	sum->s = s;
	for (unsigned i = 0; i < TP_GRID_MAX_DIMS; i++)
		sum->e[i] = g->dim[i] * ((g->wrap >> i & 1u) ? 2 : 1);
	size_t s0 = 1, s1 = sum->e[0] + 1, s2 = s1 * (sum->e[1] + 1);
	memset(s, 0, tp_grid_sum_len(g) * sizeof *s);
	for (unsigned z = 1; z <= sum->e[2]; z++)
		for (unsigned y = 1; y <= sum->e[1]; y++)
			for (unsigned x = 1; x <= sum->e[0]; x++) {
				unsigned c[3] = {(x - 1) % g->dim[0], (y - 1) % g->dim[1], (z - 1) % g->dim[2]};
				uint32_t v = mark[tp_grid_cell(g, c)] ? 1 : 0;
				size_t i = x * s0 + y * s1 + z * s2;
				s[i] = v + s[i - s0] + s[i - s1] + s[i - s2] - s[i - s0 - s1] - s[i - s0 - s2] -
				       s[i - s1 - s2] + s[i - s0 - s1 - s2];
			}
}

uint32_t tp_grid_sum_box(const struct tp_grid_sum *sum, const struct tp_grid_box *bx)
{
	size_t s1 = sum->e[0] + 1, s2 = s1 * (sum->e[1] + 1);
	size_t x0 = bx->at[0], y0 = bx->at[1] * s1, z0 = bx->at[2] * s2;
	size_t x1 = x0 + bx->ext[0], y1 = y0 + bx->ext[1] * s1, z1 = z0 + bx->ext[2] * s2;
	const uint32_t *s = sum->s;
	int64_t v = (int64_t)s[x1 + y1 + z1] - s[x0 + y1 + z1] - s[x1 + y0 + z1] - s[x1 + y1 + z0] +
	            s[x0 + y0 + z1] + s[x0 + y1 + z0] + s[x1 + y0 + z0] - s[x0 + y0 + z0];
	return (uint32_t)v;
}

unsigned tp_grid_anchors(const struct tp_grid_impl *g, unsigned i, unsigned ext, bool wrap)
{
	if (ext > g->dim[i])
		return 0;
	if (ext == g->dim[i])
		return 1;
	return wrap && (g->wrap >> i & 1u) ? g->dim[i] : g->dim[i] - ext + 1;
}

/* Whether some box of extents ext holds no blocked cell (sum counts blocked cells). */
static bool box_exists(const struct tp_grid_sum *sum, const unsigned *ext)
{
	const struct tp_grid_impl *g = sum->g;
	unsigned n[3];
	for (unsigned i = 0; i < 3; i++)
		n[i] = tp_grid_anchors(g, i, ext[i], true);
	struct tp_grid_box bx = {{0, 0, 0}, {ext[0], ext[1], ext[2]}};
	for (bx.at[2] = 0; bx.at[2] < n[2]; bx.at[2]++)
		for (bx.at[1] = 0; bx.at[1] < n[1]; bx.at[1]++)
			for (bx.at[0] = 0; bx.at[0] < n[0]; bx.at[0]++)
				if (tp_grid_sum_box(sum, &bx) == 0)
					return true;
	return false;
}

int tp_grid_largest_box(const tp_allocator *a, const struct tp_grid_impl *g,
                        const unsigned char *mark, uint32_t *vol, unsigned *ext)
{
	uint32_t *s = tp_mallocn(a, tp_grid_sum_len(g), sizeof *s);
	unsigned char *blocked = tp_malloc(a, g->ncell);
	/* cm[a][b]: an upper bound on the depth of a free box a x b x depth (a box that does not
	 * exist has no larger box around it, so bounds only shrink as a and b grow). */
	size_t w = (size_t)g->dim[1] + 1;
	unsigned *cm = tp_mallocn(a, ((size_t)g->dim[0] + 1) * w, sizeof *cm);
	if (!s || !blocked || !cm) {
		tp_free(a, s);
		tp_free(a, blocked);
		tp_free(a, cm);
		return TP_ENOMEM;
	}
	uint32_t nfree = 0;
	for (uint32_t i = 0; i < g->ncell; i++) {
		blocked[i] = !mark[i];
		nfree += mark[i] ? 1 : 0;
	}
	struct tp_grid_sum sum;
	tp_grid_sum_fill(&sum, g, blocked, s);
	uint32_t best = 0;
	unsigned be[3] = {0, 0, 0};
	for (size_t i = 0; i <= g->dim[0]; i++)
		for (size_t j = 0; j < w; j++)
			cm[i * w + j] = g->dim[2];
	for (unsigned x = 1; x <= g->dim[0]; x++)
		for (unsigned y = 1; y <= g->dim[1]; y++) {
			unsigned up = cm[(x - 1) * w + y] < cm[x * w + y - 1] ? cm[(x - 1) * w + y]
			                                                      : cm[x * w + y - 1];
			unsigned d = 0;
			while (d < up && (uint64_t)x * y * (d + 1) <= nfree) {
				unsigned e[3] = {x, y, d + 1};
				if (!box_exists(&sum, e))
					break;
				d++;
			}
			bool cut = d < up && (uint64_t)x * y * (d + 1) <= nfree;
			cm[x * w + y] = cut ? d : up;
			if ((uint64_t)x * y * d > best) {
				best = x * y * d;
				be[0] = x, be[1] = y, be[2] = d;
			}
		}
	tp_free(a, s);
	tp_free(a, blocked);
	tp_free(a, cm);
	*vol = best;
	if (ext)
		memcpy(ext, be, sizeof be);
	return 0;
}

int tp_grid_fragments(const tp_allocator *a, const struct tp_grid_impl *g,
                      const unsigned char *mark, uint32_t *count)
{
	uint32_t *stack = tp_mallocn(a, g->ncell, sizeof *stack);
	unsigned char *seen = tp_calloc(a, g->ncell ? g->ncell : 1, 1);
	if (!stack || !seen) {
		tp_free(a, stack);
		tp_free(a, seen);
		return TP_ENOMEM;
	}
	uint32_t n = 0;
	for (uint32_t s = 0; s < g->ncell; s++) {
		if (!mark[s] || seen[s])
			continue;
		n++;
		uint32_t top = 0;
		stack[top++] = s;
		seen[s] = 1;
		while (top) {
			const uint32_t *nb = &g->nbr[(size_t)stack[--top] * 6];
			for (unsigned i = 0; i < 6; i++)
				if (nb[i] != TP_NONE && mark[nb[i]] && !seen[nb[i]]) {
					seen[nb[i]] = 1;
					stack[top++] = nb[i];
				}
		}
	}
	tp_free(a, stack);
	tp_free(a, seen);
	*count = n;
	return 0;
}
