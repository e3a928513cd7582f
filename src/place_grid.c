/* SPDX-License-Identifier: MIT */
/*
 * Box requests on grid levels (rings, tori, meshes): the job takes every child at the cells of
 * a box inside one grid domain. The objective (topoplace.h, tp_request): the fewest fragments
 * of the free space left, as the change the box makes to its domain's count of connected sets
 * of wholly free children; then the tightest domain; then the lowest domain, anchor cell and
 * order of extents.
 *
 * Per domain with enough free devices: mark usable and wholly free cells (the per-child free
 * counts the cluster keeps; a walk of the nodes only under a filter) and the run of usable
 * cells along x from each cell, so that a box is usable when each of its rows starts a long
 * enough run (stopping at the first that does not); then for each usable box, cheapest test
 * first and only while it can still win:
 *   - no wholly free cell next to the box: the box is a whole fragment, it removes one (-1);
 *   - the free neighbours of the box meet each other in the shell one cell around it: every
 *     path through the box can go around it, nothing splits (0);
 *   - else a search of the box's fragment counts the pieces it splits into (pieces - 1).
 * On an empty grid the first box anchored at cell 0 answers 0 by the shell test and later boxes
 * are dismissed by the first test, which stops at the first free neighbour.
 */
#include <string.h>

#include "place_internal.h"

/* One candidate's rank: smaller is better, compared field by field. */
struct gkey {
	int delta;      /* change in the domain's fragment count */
	uint32_t tight; /* wholly free children in the domain */
	uint32_t dom;
	uint32_t cell;  /* anchor cell */
	unsigned rot;   /* index of the order of extents */
};

static int key_cmp(const struct gkey *a, const struct gkey *b)
{
	if (a->delta != b->delta)
		return a->delta < b->delta ? -1 : 1;
	if (a->tight != b->tight)
		return a->tight < b->tight ? -1 : 1;
	if (a->dom != b->dom)
		return a->dom < b->dom ? -1 : 1;
	if (a->cell != b->cell)
		return a->cell < b->cell ? -1 : 1;
	return a->rot < b->rot ? -1 : a->rot > b->rot;
}

/* The state of one search over the grid domains. */
struct gsearch {
	struct pctx *p;
	const struct tp_grid_impl *g;
	unsigned level, cl;       /* grid level, child level */
	unsigned nrot;
	unsigned rot[6][3];       /* distinct orders of the extents, lexicographic */
	unsigned char *usable;    /* [ncell] child wholly usable by the request */
	unsigned char *freec;     /* [ncell] child wholly free */
	uint32_t *runx;           /* [ncell] usable cells in a row from here along x */
	uint32_t *seen;           /* [ncell] stamp of the last search that reached the cell */
	uint32_t *tgt;            /* [ncell] tstamp of the free neighbours of the current box */
	uint32_t stamp, tstamp;
	uint32_t *queue;          /* [ncell] */
	uint32_t *nb;             /* [ncell] free neighbours of the box */
	bool have;
	struct gkey best;
	struct tp_grid_box best_box;
};

static void set_rotations(struct gsearch *s)
{
	static const unsigned perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
	                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	const unsigned *e = s->p->q->box;
	s->nrot = 0;
	for (unsigned i = 0; i < (s->p->q->box_rotate ? 6u : 1u); i++) {
		unsigned x[3] = {e[perm[i][0]], e[perm[i][1]], e[perm[i][2]]};
		bool dup = false;
		for (unsigned j = 0; j < s->nrot && !dup; j++)
			dup = memcmp(s->rot[j], x, sizeof x) == 0;
		if (!dup)
			memcpy(s->rot[s->nrot++], x, sizeof x);
	}
}

/* Whether child ch of the child level is wholly usable (a walk of its nodes when a filter,
 * the ideal or a hot spare may change what its free count says). */
static bool child_usable(struct gsearch *s, uint32_t ch, bool fr)
{
	struct pctx *p = s->p;
	if (!p->filtered && !p->ideal)
		return fr;
	uint32_t f, n;
	tp_dom_nodes(p->t, s->cl, ch, &f, &n);
	bool ok = true;
	for (uint32_t x = f; x < f + n && ok; x++)
		ok = tp_pl_node_usable(p, x, NULL) == tp_node_ndev(p->t, x);
	return ok;
}

/* runx along each row of usable cells, around the seam when the box may wrap along x. */
static void fill_runs(struct gsearch *s)
{
	const struct tp_grid_impl *g = s->g;
	unsigned dx = g->dim[0];
	bool w = s->p->q->box_wrap && (g->wrap & 1u);
	for (uint32_t row = 0; row < g->ncell; row += dx) {
		uint32_t *r = s->runx + row;
		const unsigned char *u = s->usable + row;
		uint32_t next = 0;
		for (unsigned x = dx; x-- > 0;)
			r[x] = next = u[x] ? next + 1 : 0;
		if (!w || r[0] == 0)
			continue;
		for (unsigned x = dx; x-- > 0 && u[x] && x + r[x] == dx;)
			r[x] = r[x] + r[0] > dx ? dx : r[x] + r[0];
	}
}

/* Mark domain d's cells; the count of wholly free children. */
static uint32_t mark_domain(struct gsearch *s, uint32_t d)
{
	const struct tp_grid_impl *g = s->g;
	const uint32_t *cells = g->cell + (size_t)d * g->ncell, *fr = s->p->c->free[s->cl];
	uint32_t nfree = 0;
	for (uint32_t i = 0; i < g->ncell; i++) {
		uint32_t ch = cells[i];
		bool f = ch != TP_NONE && fr[ch] == g->child_dev;
		s->usable[i] = ch != TP_NONE && child_usable(s, ch, f);
		s->freec[i] = f;
		nfree += f;
	}
	fill_runs(s);
	return nfree;
}

/* Whether every cell of box bx is usable: each of its rows along x starts a long enough run. */
static bool box_usable(const struct gsearch *s, const struct tp_grid_box *bx)
{
	const struct tp_grid_impl *g = s->g;
	for (unsigned z = 0; z < bx->ext[2]; z++) {
		unsigned cz = (bx->at[2] + z) % g->dim[2];
		for (unsigned y = 0; y < bx->ext[1]; y++) {
			unsigned x[3] = {bx->at[0], (bx->at[1] + y) % g->dim[1], cz};
			if (s->runx[tp_grid_cell(g, x)] < bx->ext[0])
				return false;
		}
	}
	return true;
}

/* Whether cell c lies in box bx grown by `grow` cells on each side. */
static bool in_box(const struct tp_grid_impl *g, const struct tp_grid_box *bx, uint32_t c,
                   unsigned grow)
{
	const uint32_t *x = &g->xyz[(size_t)c * 3];
	for (unsigned i = 0; i < g->nd; i++) {
		long o = (long)x[i] - (long)bx->at[i] + (long)grow;
		unsigned span = bx->ext[i] + 2 * grow;
		if (g->wrap >> i & 1u) {
			if (span >= g->dim[i])
				continue;
			o += o < 0 ? (long)g->dim[i] : o >= (long)g->dim[i] ? -(long)g->dim[i] : 0;
		}
		if (o < 0 || o >= (long)span)
			return false;
	}
	return true;
}

/* The neighbours of cell c along the axes into out[6]; how many. */
static unsigned neighbours(const struct tp_grid_impl *g, uint32_t c, uint32_t *out)
{
	const uint32_t *nb = &g->nbr[(size_t)c * 6];
	unsigned n = 0;
	for (unsigned i = 0; i < 2 * g->nd; i++)
		if (nb[i] != TP_NONE)
			out[n++] = nb[i];
	return n;
}

/* The cell of offset o inside box bx. */
static uint32_t box_cell(const struct tp_grid_impl *g, const struct tp_grid_box *bx,
                         const unsigned *o)
{
	unsigned x[3];
	for (unsigned i = 0; i < 3; i++)
		x[i] = (bx->at[i] + o[i]) % g->dim[i];
	return tp_grid_cell(g, x);
}

static bool cell_in_box(const struct tp_grid_impl *g, const struct tp_grid_box *bx, uint32_t c)
{
	return in_box(g, bx, c, 0);
}

/* The wholly free neighbours of box bx into s->nb (each once); how many. With stop_at_one, at
 * most one. */
static uint32_t box_neighbours(struct gsearch *s, const struct tp_grid_box *bx, bool stop_at_one)
{
	const struct tp_grid_impl *g = s->g;
	uint32_t n = 0, nbr[6];
	s->stamp++;
	unsigned o[3];
	for (o[2] = 0; o[2] < bx->ext[2]; o[2]++)
		for (o[1] = 0; o[1] < bx->ext[1]; o[1]++)
			for (o[0] = 0; o[0] < bx->ext[0]; o[0]++) {
				unsigned k = neighbours(g, box_cell(g, bx, o), nbr);
				for (unsigned j = 0; j < k; j++) {
					uint32_t c = nbr[j];
					if (!s->freec[c] || s->seen[c] == s->stamp || cell_in_box(g, bx, c))
						continue;
					s->seen[c] = s->stamp;
					s->nb[n++] = c;
					if (stop_at_one)
						return n;
				}
			}
	return n;
}

/* Flood the free cells outside bx from `from` (within the grown box when `local`) under the
 * current stamp, counting the box's free neighbours (tgt == tstamp) it reaches into *reached;
 * it stops once all n are reached. */
static void flood(struct gsearch *s, const struct tp_grid_box *bx, uint32_t from, bool local,
                  uint32_t n, uint32_t *reached)
{
	const struct tp_grid_impl *g = s->g;
	uint32_t head = 0, tail = 0, nbr[6];
	s->seen[from] = s->stamp;
	s->queue[tail++] = from;
	if (++*reached == n)
		return;
	while (head < tail) {
		unsigned k = neighbours(g, s->queue[head++], nbr);
		for (unsigned j = 0; j < k; j++) {
			uint32_t c = nbr[j];
			if (!s->freec[c] || s->seen[c] == s->stamp || cell_in_box(g, bx, c))
				continue;
			if (local && !in_box(g, bx, c, 1))
				continue;
			s->seen[c] = s->stamp;
			s->queue[tail++] = c;
			if (s->tgt[c] == s->tstamp && ++*reached == n)
				return;
		}
	}
}

/* The change box bx makes to the fragment count, given its n >= 1 free neighbours in s->nb:
 * 0 when they meet in the shell around the box, else the pieces they fall into, less one. */
static int split_delta(struct gsearch *s, const struct tp_grid_box *bx, uint32_t n)
{
	s->tstamp++;
	for (uint32_t i = 0; i < n; i++)
		s->tgt[s->nb[i]] = s->tstamp;
	uint32_t reached = 0;
	s->stamp++;
	flood(s, bx, s->nb[0], true, n, &reached);
	if (reached == n)
		return 0;
	s->stamp++;
	reached = 0;
	int pieces = 0;
	for (uint32_t i = 0; i < n && reached < n; i++)
		if (s->seen[s->nb[i]] != s->stamp) {
			pieces++;
			flood(s, bx, s->nb[i], false, n, &reached);
		}
	return pieces - 1;
}

/* Rank box bx of domain d against the best so far. */
static void try_box(struct gsearch *s, const struct tp_grid_box *bx, struct gkey k)
{
	k.delta = -1;
	if (s->have && key_cmp(&k, &s->best) >= 0)
		return;
	uint32_t n = box_neighbours(s, bx, true);
	if (n) {
		k.delta = 0;
		if (s->have && key_cmp(&k, &s->best) >= 0)
			return;
		n = box_neighbours(s, bx, false);
		k.delta = split_delta(s, bx, n);
		if (s->have && key_cmp(&k, &s->best) >= 0)
			return;
	}
	s->have = true;
	s->best = k;
	s->best_box = *bx;
}

/* Every usable box of domain d. With first_only, stop at the first (the ideal check). */
static void search_domain(struct gsearch *s, uint32_t d, uint32_t tight, bool first_only)
{
	const struct tp_grid_impl *g = s->g;
	for (unsigned r = 0; r < s->nrot; r++) {
		const unsigned *e = s->rot[r];
		unsigned na[3];
		bool fits = true;
		for (unsigned i = 0; i < 3; i++) {
			na[i] = tp_grid_anchors(g, i, e[i], s->p->q->box_wrap);
			fits = fits && na[i] > 0;
		}
		if (!fits)
			continue;
		struct tp_grid_box bx = {{0, 0, 0}, {e[0], e[1], e[2]}};
		for (bx.at[2] = 0; bx.at[2] < na[2]; bx.at[2]++)
			for (bx.at[1] = 0; bx.at[1] < na[1]; bx.at[1]++)
				for (bx.at[0] = 0; bx.at[0] < na[0]; bx.at[0]++) {
					if (!box_usable(s, &bx))
						continue;
					struct gkey k = {0, tight, d, tp_grid_cell(g, bx.at), r};
					if (first_only) {
						s->have = true;
						s->best = k;
						s->best_box = bx;
						return;
					}
					try_box(s, &bx, k);
				}
	}
}

static int search_init(struct gsearch *s, struct pctx *p)
{
	memset(s, 0, sizeof *s);
	s->p = p;
	s->level = (unsigned)p->q->box_level;
	s->cl = s->level + 1;
	s->g = p->t->grid[s->level];
	uint32_t nc = s->g->ncell;
	s->usable = tp_pl_ar_alloc(p, nc);
	s->freec = tp_pl_ar_alloc(p, nc);
	s->runx = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->runx);
	s->seen = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->seen);
	s->tgt = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->tgt);
	s->queue = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->queue);
	s->nb = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->nb);
	if (p->err)
		return p->err;
	memset(s->seen, 0, (size_t)nc * sizeof *s->seen);
	memset(s->tgt, 0, (size_t)nc * sizeof *s->tgt);
	set_rotations(s);
	return 0;
}

/* Search every grid domain that could hold the box; first_only: any box at all. */
static void search_all(struct gsearch *s, bool first_only)
{
	const struct tp_topology *t = s->p->t;
	uint32_t need = s->p->q->count;
	for (uint32_t d = 0; d < t->lv[s->level].ndom; d++) {
		uint32_t room = s->p->ideal ? tp_dom_ndev(t, s->level, d) : s->p->c->free[s->level][d];
		if (room < need)
			continue;
		uint32_t tight = mark_domain(s, d);
		search_domain(s, d, tight, first_only);
		if (first_only && s->have)
			return;
	}
}

/* The devices of the chosen box, children in snake order, into p->out. */
static void emit_box(struct gsearch *s)
{
	struct pctx *p = s->p;
	const struct tp_grid_impl *g = s->g;
	const struct tp_grid_box *bx = &s->best_box;
	unsigned o[3];
	p->nout = 0;
	for (unsigned z = 0; z < bx->ext[2]; z++)
		for (unsigned yy = 0; yy < bx->ext[1]; yy++) {
			o[2] = z;
			o[1] = z % 2 ? bx->ext[1] - 1 - yy : yy;
			bool back = (z * bx->ext[1] + yy) % 2;
			for (unsigned xx = 0; xx < bx->ext[0]; xx++) {
				o[0] = back ? bx->ext[0] - 1 - xx : xx;
				uint32_t ch = g->cell[(size_t)s->best.dom * g->ncell + box_cell(g, bx, o)];
				uint32_t f, n;
				tp_dom_nodes(p->t, s->cl, ch, &f, &n);
				for (uint32_t dv = p->t->dev_first[f]; dv < p->t->dev_first[f + n]; dv++)
					p->out[p->nout++] = dv;
			}
		}
}

/* Wholly usable free children over the grid domains (the busy / fragmented figure). */
static uint32_t usable_children(struct gsearch *s)
{
	uint32_t n = 0;
	const struct tp_grid_impl *g = s->g;
	for (uint32_t d = 0; d < s->p->t->lv[s->level].ndom; d++) {
		if (s->p->c->free[s->level][d] < g->child_dev)
			continue;
		mark_domain(s, d);
		for (uint32_t i = 0; i < g->ncell; i++)
			n += s->usable[i];
	}
	return n;
}

/* Why no box fits: infeasible (not even on the emptied cluster), busy or fragmented. */
static int explain(struct gsearch *s, char *msg)
{
	struct pctx *p = s->p;
	const struct tp_rq *q = p->q;
	const char *lv = p->t->lv[s->level].name, *cn = p->t->lv[s->cl].name;
	uint32_t vol = q->box[0] * q->box[1] * q->box[2];
	uint32_t have = usable_children(s);
	tp_pl_go_ideal(p);
	s->have = false;
	search_all(s, true);
	if (p->err)
		return p->err;
	if (!s->have)
		return tp_seterr(msg, TP_EINFEASIBLE, "infeasible: no %s has a %ux%ux%u box "
		                 "(request.box, box_rotate %d, box_wrap %d) of %s the request may use, "
		                 "even with every job gone", lv, q->box[0], q->box[1], q->box[2],
		                 q->box_rotate, q->box_wrap, cn);
	if (have < vol)
		return tp_seterr(msg, TP_EBUSY, "busy: %u usable free %s, request.box %ux%ux%u needs "
		                 "%u", have, cn, q->box[0], q->box[1], q->box[2], vol);
	return tp_seterr(msg, TP_EFRAGMENTED, "fragmented: %u usable free %s, but no %ux%ux%u box "
	                 "(request.box) of them in one %s", have, cn, q->box[0], q->box[1],
	                 q->box[2], lv);
}

int tp_pl_grid_solve(struct pctx *p, char *msg)
{
	struct gsearch s;
	int rc = search_init(&s, p);
	if (rc)
		return rc;
	search_all(&s, false);
	if (p->err)
		return p->err;
	if (!s.have)
		return explain(&s, msg);
	emit_box(&s);
	return 1;
}
