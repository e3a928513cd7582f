/* SPDX-License-Identifier: MIT */
/*
 * The free-cell index of every grid level (issue #18): which children of each grid domain are
 * wholly free (every device free: healthy, not cordoned, no spare, held by no job), as one bit
 * per cell in rows along x, with the count per domain and per plane of constant z. Box
 * placement (place_grid.c) reads whole rows as words instead of every cell of a domain.
 *
 * It follows the free counts: node_changed() in cluster_index.c reports every child whose free
 * count moved, and a child's bit flips when the count reaches or leaves the child's device
 * count. Every change (assign, release, rebind, health, cordon, spares, and the undoing of
 * each by a rollback) goes through there, so the index needs no undo entries of its own; it
 * never allocates after tp_cluster_create, so no change can fail on it.
 */
#include "cluster_impl.h"

#include <stdio.h>
#include <string.h>

static size_t grid_words(const struct tp_cl_grid *x, uint32_t ndom)
{
	return (size_t)ndom * x->rows * x->words;
}

/* The word of cell `cell` of domain dom in a bit table of the index's layout, and its bit. */
static uint64_t *grid_word(const struct tp_cl_grid *x, const struct tp_grid_impl *g,
                           uint64_t *table, uint32_t dom, uint32_t cell, uint64_t *m)
{
	const uint32_t *xyz = &g->xyz[(size_t)cell * 3];
	size_t row = (size_t)dom * x->rows + xyz[1] + (size_t)g->dim[1] * xyz[2];
	*m = (uint64_t)1 << (xyz[0] % 64);
	return &table[row * x->words + xyz[0] / 64];
}

static void grid_set(struct tp_cl_grid *x, const struct tp_grid_impl *g, uint32_t dom,
                     uint32_t cell, bool on)
{
	const uint32_t *xyz = &g->xyz[(size_t)cell * 3];
	uint64_t m, *w = grid_word(x, g, x->bits, dom, cell, &m);
	int k = on ? 1 : -1;
	*w = on ? *w | m : *w & ~m;
	x->nfree[dom] = (uint32_t)((int64_t)x->nfree[dom] + k);
	uint32_t *pl = &x->plane[(size_t)dom * g->dim[2] + xyz[2]];
	*pl = (uint32_t)((int64_t)*pl + k);
}

/* Fill the index of grid level l from the child level's free counts. */
static void grid_fill(const struct tp_cluster *c, unsigned l, struct tp_cl_grid *x)
{
	const struct tp_topology *t = c->t;
	const struct tp_grid_impl *g = t->grid[l];
	uint32_t ndom = t->lv[l].ndom;
	memset(x->bits, 0, grid_words(x, ndom) * sizeof *x->bits);
	memset(x->present, 0, grid_words(x, ndom) * sizeof *x->present);
	memset(x->nfree, 0, ndom * sizeof *x->nfree);
	memset(x->plane, 0, (size_t)ndom * g->dim[2] * sizeof *x->plane);
	const uint32_t *fr = c->free[l + 1];
	for (uint32_t d = 0; d < ndom; d++)
		for (uint32_t i = 0; i < g->ncell; i++) {
			uint32_t ch = g->cell[(size_t)d * g->ncell + i];
			uint64_t m;
			if (ch != TP_NONE) { /* the word first: `*grid_word(.., &m) |= m` reads m
			                      * unsequenced (clang read it before the call) */
				uint64_t *w = grid_word(x, g, x->present, d, i, &m);
				*w |= m;
			}
			if (ch != TP_NONE && fr[ch] == g->child_dev)
				grid_set(x, g, d, i, true);
		}
}

int tp_cl_grid_create(struct tp_cluster *c)
{
	const struct tp_topology *t = c->t;
	for (unsigned l = 0; l + 1 < t->nlevels; l++) {
		const struct tp_grid_impl *g = t->grid[l];
		if (!g)
			continue;
		struct tp_cl_grid *x = tp_calloc(&c->alloc, 1, sizeof *x);
		if (!x)
			return TP_ENOMEM;
		c->grid[l] = x;
		uint32_t ndom = t->lv[l].ndom;
		x->words = (g->dim[0] + 63) / 64;
		x->rows = g->dim[1] * g->dim[2];
		x->bits = tp_mallocn(&c->alloc, grid_words(x, ndom), sizeof *x->bits);
		x->present = tp_mallocn(&c->alloc, grid_words(x, ndom), sizeof *x->present);
		x->nfree = tp_mallocn(&c->alloc, ndom, sizeof *x->nfree);
		x->plane = tp_mallocn(&c->alloc, (size_t)ndom * g->dim[2], sizeof *x->plane);
		if (!x->bits || !x->present || !x->nfree || !x->plane)
			return TP_ENOMEM;
		grid_fill(c, l, x);
	}
	return 0;
}

void tp_cl_grid_free(struct tp_cluster *c)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		struct tp_cl_grid *x = c->grid[l];
		if (!x)
			continue;
		tp_free(&c->alloc, x->bits);
		tp_free(&c->alloc, x->present);
		tp_free(&c->alloc, x->nfree);
		tp_free(&c->alloc, x->plane);
		tp_free(&c->alloc, x);
		c->grid[l] = NULL;
	}
}

void tp_cl_grid_copy(struct tp_cluster *d, const struct tp_cluster *c)
{
	const struct tp_topology *t = c->t;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		const struct tp_cl_grid *x = c->grid[l];
		struct tp_cl_grid *y = d->grid[l];
		if (!x || !y)
			continue;
		uint32_t ndom = t->lv[l].ndom;
		memcpy(y->bits, x->bits, grid_words(x, ndom) * sizeof *x->bits);
		memcpy(y->present, x->present, grid_words(x, ndom) * sizeof *x->present);
		memcpy(y->nfree, x->nfree, ndom * sizeof *x->nfree);
		memcpy(y->plane, x->plane, (size_t)ndom * t->grid[l]->dim[2] * sizeof *x->plane);
	}
}

void tp_cl_grid_changed(struct tp_cluster *c, unsigned cl, uint32_t ch, uint32_t old,
                        uint32_t now)
{
	const struct tp_grid_impl *g = c->t->grid[cl - 1];
	bool was = old == g->child_dev, is = now == g->child_dev;
	if (was != is)
		grid_set(c->grid[cl - 1], g, c->t->lv[cl].parent[ch], g->pos[ch], is);
}

/* One domain's bits, counts and padding against its cells' free counts. */
static int grid_check_dom(const struct tp_cluster *c, unsigned l, uint32_t d, char *buf,
                          size_t len)
{
	const struct tp_grid_impl *g = c->t->grid[l];
	const struct tp_cl_grid *x = c->grid[l];
	const uint32_t *fr = c->free[l + 1];
	uint32_t n = 0;
	for (uint32_t r = 0; r < x->rows; r++) {
		const uint64_t *w = &x->bits[((size_t)d * x->rows + r) * x->words];
		for (uint32_t b = 0; b < x->words * 64; b++) {
			bool on = w[b / 64] >> (b % 64) & 1u;
			uint32_t cell = r * g->dim[0] + b;
			uint32_t ch = b < g->dim[0] ? g->cell[(size_t)d * g->ncell + cell] : TP_NONE;
			bool want = ch != TP_NONE && fr[ch] == g->child_dev;
			bool here = x->present[((size_t)d * x->rows + r) * x->words + b / 64] >> (b % 64) &
			            1u;
			if (here != (ch != TP_NONE))
				CHECK_FAIL("grid level %u domain %u: bit %u of row %u %s a child in the "
				           "free-cell index, the topology says %s", l, d, b, r,
				           here ? "has" : "has no", ch != TP_NONE ? "it has" : "it has none");
			if (on != want)
				CHECK_FAIL("grid level %u domain %u: cell %u %s in the free-cell index, "
				           "recounted %s", l, d, b < g->dim[0] ? cell : TP_NONE,
				           on ? "free" : "not free", want ? "free" : "not free");
			n += on;
		}
	}
	if (x->nfree[d] != n)
		CHECK_FAIL("grid level %u domain %u: %u free cells in the index, recounted %u", l, d,
		           x->nfree[d], n);
	for (unsigned z = 0; z < g->dim[2]; z++) {
		uint32_t m = 0;
		for (uint32_t r = z * g->dim[1]; r < (z + 1) * g->dim[1]; r++)
			for (uint32_t k = 0; k < x->words; k++)
				m += (uint32_t)__builtin_popcountll(x->bits[((size_t)d * x->rows + r) *
				                                            x->words + k]);
		if (x->plane[(size_t)d * g->dim[2] + z] != m)
			CHECK_FAIL("grid level %u domain %u: plane z=%u has %u free cells in the index, "
			           "recounted %u", l, d, z, x->plane[(size_t)d * g->dim[2] + z], m);
	}
	return 0;
}

int tp_cl_grid_check(const struct tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	for (unsigned l = 0; l + 1 < t->nlevels; l++) {
		if (!t->grid[l] != !c->grid[l])
			CHECK_FAIL("grid level %u: %s free-cell index", l,
			           c->grid[l] ? "a stray" : "no");
		if (!c->grid[l])
			continue;
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			int rc = grid_check_dom(c, l, d, buf, len);
			if (rc)
				return rc;
		}
	}
	return 0;
}
