/* SPDX-License-Identifier: MIT */
/*
 * Box requests on grid levels (rings, tori, meshes): the job takes every child at the cells of
 * a box inside one grid domain. The objective (topoplace.h, tp_request): the fewest fragments
 * of the free space left, as the change the box makes to its domain's count of connected sets
 * of wholly free children; then the tightest domain; then the lowest domain, anchor cell and
 * order of extents.
 *
 * Per domain with enough free devices: the wholly free cells are the cluster's free-cell index
 * (cluster_grid.c: one bit per cell in rows along x, counts per plane), read row by row as
 * words; only under a filter (or the ideal with down, cordoned or spare chips) are the
 * usable cells marked by a walk of the domain. For extents (a, b, c) the anchors of a usable
 * run of a cells along x are computed once per row that a candidate needs (shifts and ANDs of
 * its words, around the seam when the box may wrap), ANDed over the c planes once per column
 * and over the b columns per position (y, z); planes with fewer than a * b free cells are
 * skipped on their counts. Boxes come in the order of their keys (anchor cell, then order of
 * extents), so the search of a domain stops as soon as even a whole fragment there would rank
 * after the best, and once a box that leaves the count as it was (0) is found, only whole
 * fragments can win: the positions left are filtered on masks of the rows along and beside
 * the box (no free cell next to it). Then for each usable box, cheapest test first and only
 * while it can still win:
 *   - no wholly free cell next to the box: the box is a whole fragment, it removes one (-1);
 *   - the free neighbours of the box meet each other in the shell one cell around it: every
 *     path through the box can go around it, nothing splits (0);
 *   - else a search from all the box's free neighbours at once counts the pieces it splits
 *     the fragment into (pieces - 1), reading the smaller pieces but never the largest.
 * On an empty grid the first box anchored at cell 0 answers 0 by the shell test, and every
 * later position is dismissed on the row masks of the whole-fragment test.
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
	const struct tp_cl_grid *ix; /* the cluster's free-cell index of the level */
	unsigned level, cl;       /* grid level, child level */
	uint32_t words;           /* words per row of cells */
	bool plain;               /* usable == wholly free: the index answers, nothing is scanned */
	unsigned nrot;
	unsigned rot[6][3];       /* distinct orders of the extents, lexicographic */
	const uint64_t *fbits;    /* the current domain's rows of wholly free cells (index) */
	const uint64_t *ubits;    /* its rows of wholly usable cells: fbits, or ubuf */
	uint64_t *ubuf;           /* [rows * words] usable cells when not plain */
	uint64_t *starts_all;     /* [nrot * rows * words] per rotation: anchors along x of a
	                             usable run of its extent along x, per row */
	uint32_t *sstamp_all;     /* [nrot * rows] sgen when the row's starts were computed */
	uint64_t *acc_all;        /* [nrot * words] per rotation: anchors of the current y, z */
	uint64_t *side_all, *face_all; /* [nrot * rows * words] per rotation and row: anchors with
	                             a free cell beside the box along x, and anchors whose x range
	                             holds a free cell (side_mask, face_mask) */
	uint32_t *side_st_all, *face_st_all; /* [nrot * rows] their sgen */
	uint64_t *col_all;        /* [nrot * dim[1] * words] per rotation and y: col_starts */
	uint32_t *col_st_all;     /* [nrot * dim[1]] their vgen */
	uint32_t vgen;            /* a new plane z0 (or domain): every column is stale */
	uint64_t *starts, *acc, *side, *face, *col; /* the current rotation's (use_rot) */
	uint32_t *sstamp, *side_st, *face_st, *col_st;
	unsigned s_ext;           /* the current rotation's extent along x */
	uint32_t sgen;            /* a new domain: every row's starts are stale */
	uint64_t *rowbuf;         /* [2 * words + 2] one row, doubled across the x seam */
	uint32_t *seen;           /* [ncell] stamp of the last search that reached the cell */
	uint32_t *tgt;            /* [ncell] tstamp of the free neighbours of the current box */
	uint32_t stamp, tstamp;
	uint32_t *queue;          /* [ncell] */
	uint32_t *nb;             /* [ncell] free neighbours of the box */
	uint32_t *lab, *up, *pend; /* [ncell] count_pieces: each cell's label; per label its
	                              union-find parent and cells still queued */
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
	if (s->plain)
		return fr;
	uint32_t f, n;
	tp_dom_nodes(p->t, s->cl, ch, &f, &n);
	bool ok = true;
	for (uint32_t x = f; x < f + n && ok; x++)
		ok = tp_pl_node_usable(p, x, NULL) == tp_node_ndev(p->t, x);
	return ok;
}

/* Whether cell c of the current domain is wholly free (one bit of the index). */
static bool cell_free(struct gsearch *s, uint32_t c)
{
	const uint32_t *x = &s->g->xyz[(size_t)c * 3];
	size_t r = x[1] + (size_t)s->g->dim[1] * x[2];
	s->p->grid_probes++;
	return s->fbits[r * s->words + x[0] / 64] >> (x[0] % 64) & 1u;
}

/* Point the search at domain d: its free rows from the index, and its usable rows (the same
 * unless a filter or the ideal decides: then a walk of its cells). */
static void set_domain(struct gsearch *s, uint32_t d)
{
	const struct tp_grid_impl *g = s->g;
	size_t len = (size_t)s->ix->rows * s->words;
	s->fbits = s->ix->bits + (size_t)d * len;
	s->ubits = s->fbits;
	s->sgen++;
	s->plain = !s->p->filtered && !s->p->ideal; /* explain() switches to the ideal */
	if (s->plain)
		return;
	if (s->p->ideal && s->p->ideal_plain) { /* every child usable with the jobs gone */
		s->ubits = s->ix->present + (size_t)d * len;
		return;
	}
	const uint32_t *cells = g->cell + (size_t)d * g->ncell, *fr = s->p->c->free[s->cl];
	memset(s->ubuf, 0, len * sizeof *s->ubuf);
	for (uint32_t i = 0; i < g->ncell; i++) {
		uint32_t ch = cells[i];
		const uint32_t *x = &g->xyz[(size_t)i * 3];
		if (ch != TP_NONE && child_usable(s, ch, fr[ch] == g->child_dev))
			s->ubuf[(x[1] + (size_t)g->dim[1] * x[2]) * s->words + x[0] / 64] |=
				(uint64_t)1 << (x[0] % 64);
	}
	s->p->grid_probes += g->ncell;
	s->ubits = s->ubuf;
}

/* b[i] &= (or |=) bit i + sh of b, over nw words (bits past the end read as clear). */
static void fold_shifted(uint64_t *b, uint32_t nw, unsigned sh, bool any)
{
	uint32_t q = sh / 64;
	unsigned r = sh % 64;
	for (uint32_t i = 0; i < nw; i++) {
		uint64_t lo = i + q < nw ? b[i + q] : 0, hi = i + q + 1 < nw ? b[i + q + 1] : 0;
		uint64_t v = r ? lo >> r | hi << (64 - r) : lo;
		b[i] = any ? b[i] | v : b[i] & v;
	}
}

/* Fold runs of a bits: bit x of b becomes the AND (any: the OR) of bits x .. x + a - 1. */
static void fold_runs(uint64_t *b, uint32_t nw, unsigned a, bool any)
{
	for (unsigned have = 1; have < a;) {
		unsigned sh = have < a - have ? have : a - have;
		fold_shifted(b, nw, sh, any);
		have += sh;
	}
}

/* Row u (s->words words of dx bits) into s->rowbuf, doubled (bits dx .. 2dx - 1 repeat it)
 * when dbl; the words that hold it. */
static uint32_t row_load(struct gsearch *s, const uint64_t *u, bool dbl)
{
	uint32_t w = s->words;
	unsigned dx = s->g->dim[0];
	uint64_t *b = s->rowbuf;
	s->p->grid_words += w;
	memset(b, 0, ((size_t)2 * w + 2) * sizeof *b);
	memcpy(b, u, w * sizeof *b);
	if (!dbl)
		return w;
	for (uint32_t k = 0; k < w; k++) {
		unsigned at = dx + 64 * k;
		b[at / 64] |= u[k] << (at % 64);
		if (at % 64)
			b[at / 64 + 1] |= u[k] >> (64 - at % 64);
	}
	return (2 * dx + 63) / 64;
}

/* Whether a box of extent a along x may cross the x seam: its cells need the row doubled. */
static bool box_dbl(const struct gsearch *s, unsigned a)
{
	return s->p->q->box_wrap && (s->g->wrap & 1u) && a < s->g->dim[0];
}

/* The anchors x of row r where a run of s_ext usable cells starts (around the seam when the
 * box may wrap along x), computed once per domain and extent. */
static const uint64_t *row_starts(struct gsearch *s, uint32_t r)
{
	const struct tp_grid_impl *g = s->g;
	uint32_t w = s->words;
	uint64_t *out = s->starts + (size_t)r * w;
	if (s->sstamp[r] == s->sgen)
		return out;
	s->sstamp[r] = s->sgen;
	const uint64_t *u = s->ubits + (size_t)r * w;
	unsigned a = s->s_ext;
	uint32_t ones = 0;
	for (uint32_t k = 0; k < w; k++)
		ones += (uint32_t)__builtin_popcountll(u[k]);
	s->p->grid_words += w;
	memset(out, 0, w * sizeof *out);
	if (ones < a)
		return out;
	uint32_t nw = row_load(s, u, box_dbl(s, a));
	fold_runs(s->rowbuf, nw, a, false);
	unsigned na = tp_grid_anchors(g, 0, a, s->p->q->box_wrap);
	for (uint32_t k = 0; k < w; k++) {
		unsigned lo = 64 * k;
		uint64_t keep = na >= lo + 64 ? ~(uint64_t)0
		              : na > lo ? ((uint64_t)1 << (na - lo)) - 1 : 0;
		out[k] = s->rowbuf[k] & keep;
	}
	return out;
}

/* Bit x: cell x + sh of the row in s->rowbuf (nw words), or with `up` cell x - 1. */
static uint64_t moved_word(const struct gsearch *s, uint32_t k, uint32_t nw, unsigned sh, bool up)
{
	const uint64_t *b = s->rowbuf;
	if (up)
		return b[k] << 1 | (k ? b[k - 1] >> 63 : 0);
	uint32_t q = sh / 64;
	unsigned rr = sh % 64;
	uint64_t lo = k + q < nw ? b[k + q] : 0, hi = k + q + 1 < nw ? b[k + q + 1] : 0;
	return rr ? lo >> rr | hi << (64 - rr) : lo;
}

/* The anchors x of row r whose box of the current rotation has a wholly free cell beside it
 * along x in this row (cell x - 1 or x + a, across the seam where the grid wraps), once per
 * domain and rotation. */
static const uint64_t *side_mask(struct gsearch *s, uint32_t r)
{
	const struct tp_grid_impl *g = s->g;
	uint32_t w = s->words;
	uint64_t *out = s->side + (size_t)r * w;
	if (s->side_st[r] == s->sgen)
		return out;
	s->side_st[r] = s->sgen;
	unsigned dx = g->dim[0], a = s->s_ext;
	bool xw = g->wrap & 1u;
	memset(out, 0, w * sizeof *out);
	if (a >= dx)
		return out; /* nothing beside the box along x: it fills the axis */
	uint32_t nw = row_load(s, s->fbits + (size_t)r * w, xw);
	for (uint32_t k = 0; k < w; k++)
		out[k] = moved_word(s, k, nw, a, false) |
		         moved_word(s, k, nw, xw ? dx - 1 : 0, !xw);
	return out;
}

/* The anchors x of row r where cells x .. x + a - 1 (the current rotation's a, across the seam
 * when the box may wrap) hold a wholly free cell, once per domain and rotation. */
static const uint64_t *face_mask(struct gsearch *s, uint32_t r)
{
	uint32_t w = s->words;
	uint64_t *out = s->face + (size_t)r * w;
	if (s->face_st[r] == s->sgen)
		return out;
	s->face_st[r] = s->sgen;
	uint32_t nw = row_load(s, s->fbits + (size_t)r * w, box_dbl(s, s->s_ext));
	fold_runs(s->rowbuf, nw, s->s_ext, true);
	memcpy(out, s->rowbuf, w * sizeof *out);
	return out;
}

static void acc_clear(struct gsearch *s, const uint64_t *m)
{
	for (uint32_t k = 0; k < s->words; k++)
		s->acc[k] &= ~m[k];
}

/* The row beside the box along axis i (1 or 2) from anchor v of extent e: below (hi false)
 * or past it; false when there is none (an edge of a mesh, an axis the box fills). */
static bool face_at(const struct tp_grid_impl *g, unsigned i, unsigned v, unsigned e, bool hi,
                    unsigned *out)
{
	unsigned d = g->dim[i];
	bool w = g->wrap >> i & 1u;
	if (d == 1 || e >= d)
		return false;
	if (!hi) {
		if (v == 0 && !w)
			return false;
		*out = v ? v - 1 : d - 1;
		return true;
	}
	if (v + e >= d && !w)
		return false;
	*out = (v + e) % d;
	return true;
}

/* Keep in s->acc only the anchors at (y0, z0) whose box e has no wholly free cell next to it
 * (it would be a whole fragment: -1), from the rows of the index along and beside the box. */
static void whole_fragments(struct gsearch *s, const unsigned *e, unsigned y0, unsigned z0)
{
	const struct tp_grid_impl *g = s->g;
	unsigned dx = g->dim[0], dy = g->dim[1], dz = g->dim[2], f;
	for (unsigned z = 0; z < e[2] && e[0] < dx; z++)
		for (unsigned y = 0; y < e[1]; y++)
			acc_clear(s, side_mask(s, (y0 + y) % dy + dy * ((z0 + z) % dz)));
	for (unsigned hi = 0; hi < 2; hi++) {
		if (face_at(g, 1, y0, e[1], hi, &f))
			for (unsigned z = 0; z < e[2]; z++)
				acc_clear(s, face_mask(s, f + dy * ((z0 + z) % dz)));
		if (face_at(g, 2, z0, e[2], hi, &f))
			for (unsigned y = 0; y < e[1]; y++)
				acc_clear(s, face_mask(s, (y0 + y) % dy + dy * f));
	}
}

/* Whether planes z0 .. z0 + ext - 1 of domain d each hold at least `need` free cells (the
 * index's plane counts; only when usable == free). */
static bool planes_hold(const struct gsearch *s, uint32_t d, unsigned z0, unsigned ext,
                        uint32_t need)
{
	if (!s->plain)
		return true;
	const uint32_t *pl = s->ix->plane + (size_t)d * s->g->dim[2];
	for (unsigned z = 0; z < ext; z++)
		if (pl[(z0 + z) % s->g->dim[2]] < need)
			return false;
	return true;
}

/* The AND of the current rotation's starts over rows (y, z0) .. (y, z0 + c - 1): the anchors
 * of one column of rows of the box, once per plane z0. */
static const uint64_t *col_starts(struct gsearch *s, unsigned y, unsigned z0, unsigned c)
{
	const struct tp_grid_impl *g = s->g;
	uint32_t w = s->words;
	uint64_t *out = s->col + (size_t)y * w;
	if (s->col_st[y] == s->vgen)
		return out;
	s->col_st[y] = s->vgen;
	for (unsigned z = 0; z < c; z++) {
		const uint64_t *m = row_starts(s, y + g->dim[1] * ((z0 + z) % g->dim[2]));
		uint64_t any = 0;
		for (uint32_t k = 0; k < w; k++) {
			out[k] = z ? out[k] & m[k] : m[k];
			any |= out[k];
		}
		if (!any)
			break;
	}
	return out;
}

/* The anchors along x of usable boxes e at (y0, z0) into s->acc: the AND of the starts of its
 * rows, a column at a time, stopping at the first empty one. Whether any. */
static bool box_anchors(struct gsearch *s, const unsigned *e, unsigned y0, unsigned z0)
{
	uint32_t w = s->words;
	for (unsigned y = 0; y < e[1]; y++) {
		const uint64_t *m = col_starts(s, (y0 + y) % s->g->dim[1], z0, e[2]);
		uint64_t any = 0;
		for (uint32_t k = 0; k < w; k++) {
			s->acc[k] = y ? s->acc[k] & m[k] : m[k];
			any |= s->acc[k];
		}
		if (!any)
			return false;
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
					if (!cell_free(s, c) || s->seen[c] == s->stamp || cell_in_box(g, bx, c))
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
			if (!cell_free(s, c) || s->seen[c] == s->stamp || cell_in_box(g, bx, c))
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

static uint32_t uf_find(uint32_t *up, uint32_t i)
{
	while (up[i] != i)
		i = up[i] = up[up[i]];
	return i;
}

/* The pieces the n free neighbours of box bx fall into outside it: one search from all of
 * them at once, level by level, each cell labelled with the neighbour it came from; labels
 * that meet are joined. It stops when one group is left (0 more pieces) or when every group
 * but at most one has run out of cells: those are whole pieces, so the search reads the
 * smaller pieces of a split and the paths between neighbours that meet, never the largest
 * piece. */
static uint32_t count_pieces(struct gsearch *s, const struct tp_grid_box *bx, uint32_t n)
{
	const struct tp_grid_impl *g = s->g;
	uint32_t head = 0, tail = 0, groups = n, live = n, nbr[6];
	s->stamp++;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = s->nb[i];
		s->up[i] = i;
		s->pend[i] = 1;
		s->seen[c] = s->stamp;
		s->lab[c] = i;
		s->queue[tail++] = c;
	}
	while (head < tail && groups > 1 && live > 1) {
		uint32_t c = s->queue[head++], gr = uf_find(s->up, s->lab[c]);
		unsigned k = neighbours(g, c, nbr);
		for (unsigned j = 0; j < k; j++) {
			uint32_t x = nbr[j];
			if (!cell_free(s, x) || cell_in_box(g, bx, x))
				continue;
			if (s->seen[x] != s->stamp) {
				s->seen[x] = s->stamp;
				s->lab[x] = gr;
				s->queue[tail++] = x;
				s->pend[gr]++;
				continue;
			}
			uint32_t o = uf_find(s->up, s->lab[x]);
			if (o == gr)
				continue;
			s->up[o] = gr; /* o's pending cells are gr's now */
			live -= s->pend[o] > 0 && s->pend[gr] > 0;
			s->pend[gr] += s->pend[o];
			groups--;
		}
		if (--s->pend[gr] == 0)
			live--;
	}
	return groups;
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
	return (int)count_pieces(s, bx, n) - 1;
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

/* Whether no box of rotation r anchored at `cell` or later in domain d can win any more:
 * even a whole fragment (-1) there ranks after the best. */
static bool beaten(const struct gsearch *s, uint32_t tight, uint32_t d, uint32_t cell,
                   unsigned r)
{
	struct gkey k = {-1, tight, d, cell, r};
	return s->have && key_cmp(&k, &s->best) >= 0;
}

/* Make rotation r the current one (its starts, its anchors). */
static void use_rot(struct gsearch *s, unsigned r)
{
	s->starts = s->starts_all + (size_t)r * s->ix->rows * s->words;
	s->sstamp = s->sstamp_all + (size_t)r * s->ix->rows;
	s->acc = s->acc_all + (size_t)r * s->words;
	s->side = s->side_all + (size_t)r * s->ix->rows * s->words;
	s->face = s->face_all + (size_t)r * s->ix->rows * s->words;
	s->side_st = s->side_st_all + (size_t)r * s->ix->rows;
	s->face_st = s->face_st_all + (size_t)r * s->ix->rows;
	s->col = s->col_all + (size_t)r * s->g->dim[1] * s->words;
	s->col_st = s->col_st_all + (size_t)r * s->g->dim[1];
	s->s_ext = s->rot[r][0];
}

/* The anchors at (y0, z0) of usable boxes of rotation r into its acc, only those of whole
 * fragments once nothing else can win; whether any. */
static bool row_anchors(struct gsearch *s, uint32_t d, uint32_t tight, unsigned r,
                        const unsigned *na, unsigned y0, unsigned z0, bool first_only)
{
	const unsigned *e = s->rot[r];
	use_rot(s, r);
	if (!na[0] || y0 >= na[1] || z0 >= na[2] || !planes_hold(s, d, z0, e[2], e[0] * e[1]) ||
	    !box_anchors(s, e, y0, z0))
		return false;
	struct gkey k0 = {0, tight, d, s->g->dim[0] * (y0 + s->g->dim[1] * z0), r};
	if (first_only || !s->have || key_cmp(&k0, &s->best) < 0)
		return true;
	whole_fragments(s, e, y0, z0); /* only a -1 can still win */
	uint64_t any = 0;
	for (uint32_t k = 0; k < s->words; k++)
		any |= s->acc[k];
	return any != 0;
}

/* Every usable box of domain d in the order of the keys (anchor cell, then rotation), while
 * one can still win: so the first box that leaves the fragments as they were (0) ends the
 * tests that may search a fragment, and a whole fragment (-1) ends the search. With
 * first_only, stop at the first box (the ideal check). */
static void search_domain(struct gsearch *s, uint32_t d, uint32_t tight, bool first_only)
{
	const struct tp_grid_impl *g = s->g;
	unsigned na[6][3], my = 0, mz = 0;
	for (unsigned r = 0; r < s->nrot; r++) {
		for (unsigned i = 0; i < 3; i++)
			na[r][i] = tp_grid_anchors(g, i, s->rot[r][i], s->p->q->box_wrap);
		if (na[r][0] && na[r][1] && na[r][2]) {
			my = na[r][1] > my ? na[r][1] : my;
			mz = na[r][2] > mz ? na[r][2] : mz;
		} else {
			na[r][0] = 0;
		}
	}
	struct tp_grid_box bx;
	for (unsigned z0 = 0; z0 < mz; z0++) {
		s->vgen++;
		for (unsigned y0 = 0; y0 < my; y0++) {
			uint32_t row = g->dim[0] * (y0 + g->dim[1] * z0);
			if (!first_only && beaten(s, tight, d, row, 0))
				return;
			bool live[6], any = false;
			for (unsigned r = 0; r < s->nrot; r++)
				any |= live[r] = row_anchors(s, d, tight, r, na[r], y0, z0, first_only);
			for (uint32_t k = 0; any && k < s->words; k++) {
				uint64_t u = 0;
				for (unsigned r = 0; r < s->nrot; r++)
					u |= live[r] ? s->acc_all[(size_t)r * s->words + k] : 0;
				for (; u; u &= u - 1) {
					unsigned x = 64 * k + (unsigned)__builtin_ctzll(u);
					for (unsigned r = 0; r < s->nrot; r++) {
						if (!live[r] || !(s->acc_all[(size_t)r * s->words + k] >> (x % 64) & 1u))
							continue;
						struct gkey key = {0, tight, d, row + x, r};
						bx = (struct tp_grid_box){{x, y0, z0},
						                          {s->rot[r][0], s->rot[r][1], s->rot[r][2]}};
						if (first_only) {
							s->have = true;
							s->best = key;
							s->best_box = bx;
							return;
						}
						if (beaten(s, tight, d, key.cell, r))
							return;
						try_box(s, &bx, key);
					}
				}
			}
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
	s->ix = p->c->grid[s->level];
	s->words = s->ix->words;
	s->plain = !p->filtered && !p->ideal;
	uint32_t nc = s->g->ncell, rows = s->ix->rows;
	size_t len = (size_t)rows * s->words;
	set_rotations(s);
	s->ubuf = tp_pl_ar_alloc(p, len * sizeof *s->ubuf);
	s->starts_all = tp_pl_ar_alloc(p, s->nrot * len * sizeof *s->starts_all);
	s->sstamp_all = tp_pl_ar_alloc(p, (size_t)s->nrot * rows * sizeof *s->sstamp_all);
	s->side_all = tp_pl_ar_alloc(p, s->nrot * len * sizeof *s->side_all);
	s->face_all = tp_pl_ar_alloc(p, s->nrot * len * sizeof *s->face_all);
	s->side_st_all = tp_pl_ar_alloc(p, (size_t)s->nrot * rows * sizeof *s->side_st_all);
	s->face_st_all = tp_pl_ar_alloc(p, (size_t)s->nrot * rows * sizeof *s->face_st_all);
	size_t ny = (size_t)s->nrot * s->g->dim[1];
	s->col_all = tp_pl_ar_alloc(p, ny * s->words * sizeof *s->col_all);
	s->col_st_all = tp_pl_ar_alloc(p, ny * sizeof *s->col_st_all);
	s->rowbuf = tp_pl_ar_alloc(p, ((size_t)2 * s->words + 2) * sizeof *s->rowbuf);
	s->acc_all = tp_pl_ar_alloc(p, (size_t)s->nrot * s->words * sizeof *s->acc_all);
	s->seen = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->seen);
	s->tgt = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->tgt);
	s->queue = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->queue);
	s->nb = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->nb);
	s->lab = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->lab);
	s->up = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->up);
	s->pend = tp_pl_ar_alloc(p, (size_t)nc * sizeof *s->pend);
	if (p->err)
		return p->err;
	memset(s->sstamp_all, 0, (size_t)s->nrot * rows * sizeof *s->sstamp_all);
	memset(s->side_st_all, 0, (size_t)s->nrot * rows * sizeof *s->side_st_all);
	memset(s->face_st_all, 0, (size_t)s->nrot * rows * sizeof *s->face_st_all);
	memset(s->col_st_all, 0, ny * sizeof *s->col_st_all);
	memset(s->seen, 0, (size_t)nc * sizeof *s->seen);
	memset(s->tgt, 0, (size_t)nc * sizeof *s->tgt);
	return 0;
}

/* Search every grid domain that could hold the box; first_only: any box at all. A domain
 * whose whole fragments (-1) would rank after the best is skipped unread. */
static void search_all(struct gsearch *s, bool first_only)
{
	const struct tp_topology *t = s->p->t;
	uint32_t need = s->p->q->count;
	for (uint32_t d = 0; d < t->lv[s->level].ndom; d++) {
		uint32_t room = s->p->ideal ? tp_dom_ndev(t, s->level, d) : s->p->c->free[s->level][d];
		uint32_t tight = s->ix->nfree[d];
		if (room < need || (!first_only && beaten(s, tight, d, 0, 0)))
			continue;
		set_domain(s, d);
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
	size_t len = (size_t)s->ix->rows * s->words;
	for (uint32_t d = 0; d < s->p->t->lv[s->level].ndom; d++) {
		if (s->p->c->free[s->level][d] < g->child_dev)
			continue;
		set_domain(s, d);
		for (size_t k = 0; k < len; k++)
			n += (uint32_t)__builtin_popcountll(s->ubits[k]);
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
