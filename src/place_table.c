/* SPDX-License-Identifier: MIT */
/*
 * Per-domain tables f_D(j), the knapsack over children, children tightest first, uniform
 * subtrees and point queries f_D(k) (the evaluation half of the tree solver; place.c explains
 * the model).
 */
#include <stdlib.h>
#include <string.h>

#include "place_internal.h"

/* ---- children, tightest first --------------------------------------------------------------- */

static int kid_cmp(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;
	if (x->free != y->free)
		return x->free < y->free ? -1 : 1;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

/* Lists at most this long are sorted by insertion, with the order inline (no qsort call per
 * comparison): a domain's children and a rack's nodes are that few. The orders are total
 * (ties end on the index), so the result is the one qsort gives. */
#define SMALL_SORT 32

static inline bool kid_before(const struct kid *x, const struct kid *y)
{
	return x->free != y->free ? x->free < y->free : x->dom < y->dom;
}

static void kids_sort(struct kid *ks, uint32_t n)
{
	if (n > SMALL_SORT) {
		qsort(ks, n, sizeof *ks, kid_cmp);
		return;
	}
	for (uint32_t i = 1; i < n; i++) {
		struct kid k = ks[i];
		uint32_t j = i;
		for (; j > 0 && kid_before(&k, &ks[j - 1]); j--)
			ks[j] = ks[j - 1];
		ks[j] = k;
	}
}

static struct kid *kids_push(struct pctx *p, struct kid *ks, uint32_t *n, uint32_t *cap,
                             struct kid k)
{
	if (*n == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 32;
		struct kid *nk = tp_pl_ar_alloc(p, ncap * sizeof *nk);
		if (!nk)
			return NULL;
		if (*n)
			memcpy(nk, ks, *n * sizeof *nk);
		ks = nk;
		*cap = ncap;
	}
	ks[(*n)++] = k;
	return ks;
}

/* Whether the top-level domains can be walked tightest first through the cluster's index
 * (capacity never exceeds free there, so keys below the amount can be skipped). */
bool tp_pl_root_indexed(const struct pctx *p)
{
	return !p->scope[0] && p->c->indexed[0] && p->c->index[0] && !p->ideal && !p->spares;
}

static struct kid *kids_collect(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *n,
                                bool sort);

/* The children of (l, d) (the top-level domains for l = -1) that can take at least kmin
 * devices, tightest (fewest free) first, lowest index on ties. NULL with *n = 0 when none;
 * NULL with p->err set when out of memory. */
struct kid *tp_pl_kids_of(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *n)
{
	return kids_collect(p, l, d, kmin, n, true);
}

/* The children of domain d of level l (the top level's domains for l < 0): [*first, *last). */
static inline void child_range(const struct pctx *p, int l, uint32_t d, uint32_t *first,
                               uint32_t *last)
{
	if (l < 0) {
		*first = 0;
		*last = p->t->lv[0].ndom;
	} else {
		*first = p->t->lv[l].child_first[d];
		*last = p->t->lv[l].child_first[d + 1];
	}
}

/* tp_pl_kids_of's children, sorted so or (sort false, l >= 0) in index order. */
static struct kid *kids_collect(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *n,
                                bool sort)
{
	const struct tp_cluster *c = p->c;
	unsigned cl = (unsigned)(l + 1);
	uint32_t first, last;
	child_range(p, l, d, &first, &last);
	struct kid *ks = NULL;
	uint32_t cap = 0;
	*n = 0;
	JError_t je;
	if (l < 0 && tp_pl_root_indexed(p)) {
		/* the index orders (free, dom) already; capacity never exceeds free */
		Word_t key = (Word_t)kmin << 32;
		int r = Judy1First(c->index[0], &key, &je);
		for (; r == 1; r = Judy1Next(c->index[0], &key, &je)) {
			struct kid k = {(uint32_t)(key & 0xffffffffu), (uint32_t)(key >> 32), 0};
			k.cap = tp_pl_capd(p, cl, k.dom);
			if (k.cap >= kmin && k.cap > 0 && !(ks = kids_push(p, ks, n, &cap, k)))
				return NULL;
		}
		return ks;
	}
	if (p->scope[cl]) {
		Word_t key = first;
		int r = Judy1First(p->scope[cl], &key, &je);
		for (; r == 1 && key < last; r = Judy1Next(p->scope[cl], &key, &je)) {
			struct kid k = {(uint32_t)key, c->free[cl][key], 0};
			k.cap = tp_pl_capd(p, cl, k.dom);
			if (k.cap >= kmin && k.cap > 0 && !(ks = kids_push(p, ks, n, &cap, k)))
				return NULL;
		}
	} else {
		for (uint32_t ch = first; ch < last; ch++) {
			if (!p->ideal && dom_free(p, (int)cl, ch) < kmin)
				continue;
			struct kid k = {ch, c->free[cl][ch], 0};
			k.cap = tp_pl_capd(p, cl, ch);
			if (k.cap >= kmin && k.cap > 0 && !(ks = kids_push(p, ks, n, &cap, k)))
				return NULL;
		}
	}
	if (*n > 1 && sort)
		kids_sort(ks, *n);
	return ks;
}

/* The first child tp_pl_kids_of would list (the tightest that can take kmin), without the
 * list: one pass keeping the least (free, index). false when none (or out of memory). */
bool tp_pl_tightest_kid(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *dom)
{
	const struct tp_cluster *c = p->c;
	unsigned cl = (unsigned)(l + 1);
	if (l < 0 && tp_pl_root_indexed(p)) {
		JError_t je;
		Word_t key = (Word_t)kmin << 32;
		for (int r = Judy1First(c->index[0], &key, &je); r == 1;
		     r = Judy1Next(c->index[0], &key, &je)) {
			uint32_t cap = tp_pl_capd(p, cl, (uint32_t)(key & 0xffffffffu));
			if (cap >= kmin && cap > 0) {
				*dom = (uint32_t)(key & 0xffffffffu);
				return true;
			}
		}
		return false;
	}
	uint32_t first, last;
	child_range(p, l, d, &first, &last);
	struct kid best = {0, 0, 0};
	bool found = false;
	if (p->scope[cl]) {
		JError_t je;
		Word_t key = first;
		for (int r = Judy1First(p->scope[cl], &key, &je); r == 1 && key < last;
		     r = Judy1Next(p->scope[cl], &key, &je)) {
			struct kid k = {(uint32_t)key, c->free[cl][key], 0};
			if (found && !kid_before(&k, &best))
				continue; /* capd is pure: skipping it changes nothing */
			k.cap = tp_pl_capd(p, cl, k.dom);
			if (k.cap >= kmin && k.cap > 0) {
				best = k;
				found = true;
			}
		}
	} else {
		for (uint32_t ch = first; ch < last; ch++) {
			if (!p->ideal && dom_free(p, (int)cl, ch) < kmin)
				continue;
			struct kid k = {ch, c->free[cl][ch], 0};
			if (found && !kid_before(&k, &best))
				continue;
			k.cap = tp_pl_capd(p, cl, ch);
			if (k.cap >= kmin && k.cap > 0) {
				best = k;
				found = true;
			}
		}
	}
	if (found)
		*dom = best.dom;
	return found && !p->err;
}

/* Takes in tree order (by child index, distinct): by insertion when few, as the other short
 * lists, else qsort; the same order either way. */
static int take_dom_cmp(const void *a, const void *b)
{
	const struct take *x = a, *y = b;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

void tp_pl_takes_sort(struct take *tk, uint32_t n)
{
	if (n > SMALL_SORT) {
		qsort(tk, n, sizeof *tk, take_dom_cmp);
		return;
	}
	for (uint32_t i = 1; i < n; i++) {
		struct take x = tk[i];
		uint32_t j = i;
		for (; j > 0 && tk[j - 1].dom > x.dom; j--)
			tk[j] = tk[j - 1];
		tk[j] = x;
	}
}

/* ---- cost vectors --------------------------------------------------------------------------- */












/* ---- tables: f_D(j) for every amount j (units of D's level) --------------------------------- */



static int tb_new(struct pctx *p, struct table *tb, uint32_t J, unsigned ns)
{
	size_t n = ((size_t)J + 1) * ns;
	tb->J = J;
	tb->ns = ns;
	tb->v = tp_pl_ar_alloc(p, n * p->W * sizeof *tb->v);
	if (!tb->v)
		return TP_ENOMEM;
	memset(tb->v, 0, n * p->W * sizeof *tb->v);
	for (size_t i = 1; i < n; i++)
		tb->v[i * p->W] = INF;
	return 0;
}


static int dom_table(struct pctx *p, int l, uint32_t d, uint32_t J, uint32_t jlo,
                     struct table *tb);

static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Fold one child's table into the running knapsack (in place, amounts descending), for the
 * amounts lo..hi only: the children before reach at most `reach` (entries above are infinite,
 * so the amounts and takes skipped here are those the full loops skip on c_inf), and amounts
 * below lo cannot grow to the least amount read once the children after are folded. */
static void knap_fold(struct pctx *p, struct knap *kn, uint32_t i, const struct table *tc,
                      uint32_t lo, uint32_t hi, uint32_t reach)
{
	uint32_t cand[W_MAX];
	size_t stride = ((size_t)kn->J + 1) * kn->ns;
	for (uint32_t nj = hi; nj >= lo && nj >= 1; nj--) {
		uint32_t top = min32(nj, tc->J);
		for (uint32_t j2 = nj > reach ? nj - reach : 1; j2 <= top; j2++)
			for (unsigned s2 = 0; s2 < tc->ns; s2++) {
				const uint32_t *e2 = tb_at(p, tc, j2, s2);
				if (c_inf(e2))
					continue;
				for (unsigned s1 = 0; s1 < kn->ns; s1++) {
					const uint32_t *e1 = tb_at(p, &kn->tb, nj - j2, s1);
					if (c_inf(e1))
						continue;
					unsigned s = kn->ns == 1 ? 0 : (unsigned)min32(p->S, s1 + s2);
					uint32_t *dst = tb_at(p, &kn->tb, nj, s);
					c_copy(p, cand, e1);
					c_add(p, cand, e2);
					if (c_inf(dst) || c_cmp(p, cand, dst) < 0) {
						c_copy(p, dst, cand);
						if (kn->cj) {
							size_t at = (size_t)i * stride + (size_t)nj * kn->ns + s;
							kn->cj[at] = j2;
							kn->cs[at] = (uint16_t)s1;
							kn->cc[at] = (uint16_t)s2;
						}
					}
				}
			}
	}
}

/* The knapsack over the children of (l, d) for 0..J units of the children's level; only the
 * entries from jneed up are read after (J for a point query, 1 for all), the others may be
 * left short of their optimum. */
int tp_pl_knap_run(struct pctx *p, int l, uint32_t d, uint32_t J, uint32_t jneed, bool record,
                   struct knap *kn)
{
	unsigned cl = (unsigned)(l + 1);
	memset(kn, 0, sizeof *kn);
	kn->J = J;
	kn->ns = nsl(p, (int)cl);
	kn->ks = tp_pl_kids_of(p, l, d, p->u[cl], &kn->nk);
	if (p->err)
		return p->err;
	/* a plain request's point query at the root: only the blocks, and their amounts, that
	 * can be optimal on the leading counts (place_counts.c) */
	uint32_t *jlo = NULL, *jhi = NULL;
	if (l < 0 && jneed == J && kn->nk > 1 && tp_pl_counts_rank_ok(p, l, J)) {
		jlo = tp_pl_ar_alloc(p, kn->nk * sizeof *jlo);
		jhi = tp_pl_ar_alloc(p, kn->nk * sizeof *jhi);
		if (!jlo || !jhi)
			return TP_ENOMEM;
		int e = tp_pl_span_window(p, kn->ks, &kn->nk, J, jlo, jhi);
		if (e)
			return e;
	}
	int rc = tb_new(p, &kn->tb, J, kn->ns);
	if (rc)
		return rc;
	if (record) {
		size_t n = (size_t)kn->nk * ((size_t)J + 1) * kn->ns;
		kn->cj = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *kn->cj);
		kn->cs = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *kn->cs);
		kn->cc = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *kn->cc);
		if (!kn->cj || !kn->cs || !kn->cc)
			return TP_ENOMEM;
		memset(kn->cj, 0, n * sizeof *kn->cj);
	}
	/* after: the most units the children after i can add */
	uint64_t after = 0, reach = 0;
	for (uint32_t i = 0; i < kn->nk; i++)
		after += jhi ? jhi[i] : min32(J, kn->ks[i].cap / p->u[cl]);
	for (uint32_t i = 0; i < kn->nk; i++) {
		struct amark m = tp_pl_ar_mark(p);
		struct table tc;
		uint32_t jc = jhi ? jhi[i] : min32(J, kn->ks[i].cap / p->u[cl]);
		after -= jc;
		rc = dom_table(p, (int)cl, kn->ks[i].dom, jc, jlo ? jlo[i] : 1, &tc);
		if (rc)
			return rc;
		uint32_t lo = after >= jneed ? 1 : jneed - (uint32_t)after;
		uint32_t hi = (uint32_t)min64(J, reach + jc);
		knap_fold(p, kn, i, &tc, lo, hi, (uint32_t)min64(J, reach));
		reach += jc;
		tp_pl_ar_release(p, m);
	}
	return 0;
}


int tp_pl_lnode_cmp(const void *a, const void *b)
{
	const struct lnode *x = a, *y = b;
	if (x->v != y->v)
		return x->v > y->v ? -1 : 1;
	if (x->free != y->free)
		return x->free < y->free ? -1 : 1;
	return (x->node > y->node) - (x->node < y->node);
}

/* The nodes of a leaf parent (every node for the root of a one-level topology) that can take
 * something, largest capacity first. */
struct lnode *tp_pl_leaf_nodes(struct pctx *p, int l, uint32_t d, uint32_t *n)
{
	uint32_t f = 0, cnt = p->t->nnodes;
	if (l >= 0)
		tp_dom_nodes(p->t, (unsigned)l, d, &f, &cnt);
	struct lnode *ln = tp_pl_ar_alloc(p, (cnt ? cnt : 1) * sizeof *ln);
	*n = 0;
	if (!ln)
		return NULL;
	for (uint32_t x = f; x < f + cnt; x++) {
		uint32_t cap = tp_pl_capd(p, p->nl, x);
		if (cap)
			ln[(*n)++] = (struct lnode){x, cap / p->u[p->nl], p->c->free[p->nl][x]};
	}
	if (*n > SMALL_SORT) {
		qsort(ln, *n, sizeof *ln, tp_pl_lnode_cmp);
		return ln;
	}
	for (uint32_t i = 1; i < *n; i++) {
		struct lnode x = ln[i];
		uint32_t j = i;
		for (; j > 0 && tp_pl_lnode_cmp(&x, &ln[j - 1]) < 0; j--)
			ln[j] = ln[j - 1];
		ln[j] = x;
	}
	return ln;
}

bool tp_pl_leaf_fast(const struct pctx *p, int l)
{
	return l == (int)p->nl - 1 && !p->have_used && p->sl != (int)p->nl &&
	       (l >= 0 || !p->scope[0]);
}

/* A leaf parent's table: the fewest nodes for an amount is the shortest prefix of the node
 * capacities in decreasing order. Entries below jlo are left unset (a point query reads one). */
static int leaf_table(struct pctx *p, int l, uint32_t d, uint32_t jlo, struct table *tb)
{
	uint32_t n;
	struct lnode *ln = tp_pl_leaf_nodes(p, l, d, &n);
	if (!ln)
		return TP_ENOMEM;
	uint32_t ratio = ul(p, l) / p->u[p->nl], un = p->u[p->nl];
	uint64_t acc = 0, fs = 0, whole = 0; /* whole: the loss of the nodes taken whole */
	uint32_t m = 0;
	unsigned col = colq(p, l);
	for (uint32_t j = 1; j <= tb->J; j++) {
		uint64_t x = (uint64_t)j * ratio;
		while (acc < x && m < n) {
			if (m)
				whole += mix_loss(p, (int)p->nl, ln[m - 1].free, ln[m - 1].v * un);
			acc += ln[m].v;
			fs += ln[m].free;
			m++;
		}
		if (acc < x)
			break;
		if (j < jlo)
			continue;
		uint32_t *e = tb_at(p, tb, j, col);
		memset(e, 0, p->W * sizeof *e);
		e[p->nl] = m;
		e[p->fb + p->nl] = (uint32_t)fs;
		if (p->mix_on) /* the last node takes what is left */
			e[p->nlev] = (uint32_t)whole +
			             mix_loss(p, (int)p->nl, ln[m - 1].free,
			                      (uint32_t)(x - (acc - ln[m - 1].v)) * un);
	}
	return 0;
}

/* ---- uniform subtrees: node counts are forced ----------------------------------------------- */


/* The devices every usable node below (l, d) holds, when they all hold the same and that
 * divides the units of levels l and l + 1 (so every amount there is whole nodes, and the
 * node count of any placement is amount / that); 0 otherwise. l is two levels above the node. */
uint32_t tp_pl_uniform_node_dev(struct pctx *p, int l, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	unsigned rl = (unsigned)(l + 1);
	uint32_t first = l < 0 ? 0 : p->t->lv[l].child_first[d];
	uint32_t last = l < 0 ? p->t->lv[0].ndom : p->t->lv[l].child_first[d + 1];
	uint32_t nd = 0;
	if (l >= 0 && p->ncapk == 1 && !p->filtered && p->hist_ok[rl] && !p->scope[rl] &&
	    c->hist[l]) {
		/* one free count gives anything (groups of a whole node): the children's rows below
		 * would find its capacity wherever a node has that count, which the domain's own row
		 * (their sum) tells at once */
		uint32_t k = p->capk[0];
		nd = c->hist[l][(size_t)d * c->hstride + k] ? p->nodecap[k] : 0;
		first = last;
	}
	for (uint32_t r = first; r < last; r++) {
		if (!in_scope(p, rl, r))
			continue;
		if (!p->filtered && p->hist_ok[rl]) {
			const uint32_t *h = c->hist[rl] + (size_t)r * c->hstride;
			for (unsigned i = 0; i < p->ncapk; i++) {
				uint32_t k = p->capk[i];
				if (h[k]) {
					if (nd && nd != p->nodecap[k])
						return 0;
					nd = p->nodecap[k];
				}
			}
		} else {
			uint32_t f, n;
			tp_dom_nodes(p->t, rl, r, &f, &n);
			for (uint32_t x = f; x < f + n; x++) {
				uint32_t cap = tp_pl_capd(p, p->nl, x);
				if (cap && nd && nd != cap)
					return 0;
				if (cap)
					nd = cap;
			}
		}
	}
	if (!nd || p->u[rl] % nd || ul(p, l) % nd)
		return 0;
	return nd;
}

bool tp_pl_linear_ok(const struct pctx *p, int l)
{
	return l == (int)p->nl - 2 && !p->have_used && p->sl < 0 && no_bounds(p);
}

static int kid_cap_cmp(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;
	if (x->cap != y->cap)
		return x->cap > y->cap ? -1 : 1;
	if (x->free != y->free)
		return x->free < y->free ? -1 : 1;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

/* With node counts forced, the fewest children for an amount is the shortest prefix of the
 * children's capacities in decreasing order. Entries below jlo are left unset. */
static int linear_table(struct pctx *p, int l, uint32_t d, uint32_t nd, uint32_t jlo,
                        struct table *tb)
{
	unsigned cl = (unsigned)(l + 1);
	uint32_t n;
	/* a point query reads the prefix for J alone: its children are picked largest first as
	 * the prefix grows (a selection, in the same total order as the sort below) */
	bool lazy = jlo == tb->J;
	struct kid *ks = kids_collect(p, l, d, p->u[cl], &n, !lazy);
	if (p->err)
		return p->err;
	if (lazy) {
		/* sorted as needed below */
	} else if (n > SMALL_SORT) {
		qsort(ks, n, sizeof *ks, kid_cap_cmp);
	} else {
		for (uint32_t i = 1; i < n; i++) {
			struct kid x = ks[i];
			uint32_t j = i;
			for (; j > 0 && kid_cap_cmp(&x, &ks[j - 1]) < 0; j--)
				ks[j] = ks[j - 1];
			ks[j] = x;
		}
	}
	uint64_t acc = 0, fs = 0, whole = 0; /* whole: the loss of the children taken whole */
	uint32_t m = 0;
	for (uint32_t j = 1; j <= tb->J; j++) {
		uint64_t x = (uint64_t)j * ul(p, l);
		while (acc < x && m < n) {
			if (m)
				whole += mix_loss(p, (int)cl, ks[m - 1].free, ks[m - 1].cap);
			if (lazy) {
				uint32_t b = m;
				for (uint32_t i = m + 1; i < n; i++)
					if (kid_cap_cmp(&ks[i], &ks[b]) < 0)
						b = i;
				struct kid t = ks[m];
				ks[m] = ks[b];
				ks[b] = t;
			}
			acc += ks[m].cap;
			fs += ks[m].free;
			m++;
		}
		if (acc < x)
			break;
		if (j < jlo)
			continue;
		uint32_t *e = tb_at(p, tb, j, 0);
		memset(e, 0, p->W * sizeof *e);
		e[cl] = m;
		e[p->nl] = (uint32_t)(x / nd);
		e[p->fb + cl] = (uint32_t)fs;
		if (p->mix_on) /* the last child takes what is left; nodes are taken whole */
			e[p->nlev] = (uint32_t)whole +
			             mix_loss(p, (int)cl, ks[m - 1].free,
			                      (uint32_t)(x - (acc - ks[m - 1].cap))) +
			             (uint32_t)(x / nd) * mix_loss(p, (int)p->nl, nd, nd);
	}
	return 0;
}

/* f_D(j) for j = 0..J units of D's level (the top-level domains' units at the root); with
 * jlo > 1, only the entries from jlo on (a point query needs f_D(J) alone: the leaf and uniform
 * tables then only walk their prefix below it, the same prefix, so the same entries). */
static int dom_table(struct pctx *p, int l, uint32_t d, uint32_t J, uint32_t jlo,
                     struct table *tb)
{
	uint32_t nd;
	int rc = tb_new(p, tb, J, nsl(p, l));
	if (rc)
		return rc;
	if (l == (int)p->nl) {
		uint32_t cap = tp_pl_capd(p, p->nl, d);
		for (uint32_t j = jlo; j <= J && (uint64_t)j * p->u[l] <= cap; j++)
			memset(tb_at(p, tb, j, colq(p, l)), 0, p->W * sizeof(uint32_t));
	} else if (tp_pl_leaf_fast(p, l)) {
		rc = leaf_table(p, l, d, jlo, tb);
	} else if (tp_pl_linear_ok(p, l) && l >= 0 && (nd = tp_pl_uniform_node_dev(p, l, d)) != 0) {
		rc = linear_table(p, l, d, nd, jlo, tb);
	} else {
		uint32_t ratio = ul(p, l) / p->u[l + 1];
		struct amark m = tp_pl_ar_mark(p);
		struct knap kn;
		rc = tp_pl_knap_run(p, l, d, J * ratio, jlo * ratio, false, &kn);
		if (!rc) {
			unsigned col = colq(p, l);
			for (uint32_t j = jlo; j <= J; j++) {
				if (kn.ns == tb->ns) {
					for (unsigned s = 0; s < tb->ns; s++)
						c_copy(p, tb_at(p, tb, j, s), tb_at(p, &kn.tb, j * ratio, s));
				} else {
					c_copy(p, tb_at(p, tb, j, col), tb_at(p, &kn.tb, j * ratio, 0));
				}
			}
		}
		tp_pl_ar_release(p, m);
	}
	if (rc)
		return rc;
	for (uint32_t j = jlo; j <= J; j++)
		for (unsigned s = 0; s < tb->ns; s++) {
			uint32_t *e = tb_at(p, tb, j, s);
			if (c_inf(e))
				continue;
			if (l >= 0 && (uint64_t)j * p->u[l] < p->lb[l])
				e[0] = INF;
			else
				add_self(p, l, d, j * ul(p, l), e);
		}
	return 0;
}

/* ---- the least mix loss, for the single-child search's stop ------------------------------- */

/* The least loss of the level-x shapes for one domain taking t devices, whatever it holds
 * free: s * floor(t / s) per shape (reached when the free count's remainder is large). */
static uint32_t mix_floor(const struct pctx *p, unsigned x, uint32_t t)
{
	uint32_t h = 0;
	for (unsigned i = 0; i < p->nmix[x]; i++)
		h += p->mix_w[x][i] * p->mix_dev[x][i] * (t / p->mix_dev[x][i]);
	return h;
}

/* The least loss at level x of k devices over exactly b domains, each holding a multiple of
 * u[x] up to the level's size and cap: a knapsack over the parts when small, else the bound
 * s * (floor(k / s) - b + 1) per shape (each part loses less than one job to rounding). */
static uint32_t mix_level_bound(struct pctx *p, unsigned x, uint32_t k, uint32_t b)
{
	if (!p->nmix[x] || !b)
		return 0;
	uint32_t ux = p->u[x], K = k / ux;
	uint32_t md = p->t->lv[x].max_devices ? p->t->lv[x].max_devices : k;
	if (p->capdev[x] != TP_RQ_NOCAP)
		md = min32(md, p->capdev[x]);
	uint32_t M = min32(md / ux, K);
	if (b == 1)
		return mix_floor(p, x, k);
	if (M && (uint64_t)b * K * M <= 65536) {
		/* the same (k, b) recurs as the search offers child after child: keep the last few */
		unsigned have = min32(p->mlb_n[x], 4);
		for (unsigned i = 0; i < have; i++)
			if (p->mlb[x][i].k == k && p->mlb[x][i].b == b && p->mlb[x][i].u == ux &&
			    p->mlb[x][i].md == md)
				return p->mlb[x][i].v;
		if (M == 1) {
			/* every part takes one unit: the knapsack below reaches K only when b == K, with
			 * the parts' losses added one by one (the same sums) */
			uint32_t f1 = mix_floor(p, x, ux), r = 0;
			for (uint32_t part = 0; part < b && K == b && r != INF; part++)
				r = min32(INF, r + f1);
			return r == INF ? 0 : r;
		}
		struct amark m = tp_pl_ar_mark(p);
		uint32_t *a = tp_pl_ar_alloc(p, (2 * ((size_t)K + 1) + M + 1) * sizeof *a);
		if (a) {
			uint32_t *cur = a, *nxt = a + K + 1, *fl = a + 2 * ((size_t)K + 1);
			for (uint32_t t = 1; t <= M; t++) /* each part's least loss, computed once */
				fl[t] = mix_floor(p, x, t * ux);
			for (uint32_t j = 0; j <= K; j++)
				cur[j] = j ? INF : 0;
			for (uint32_t part = 0; part < b; part++) {
				for (uint32_t j = 0; j <= K; j++) {
					nxt[j] = INF;
					for (uint32_t t = 1; t <= M && t <= j; t++)
						if (cur[j - t] != INF)
							nxt[j] = min32(nxt[j], cur[j - t] + fl[t]);
				}
				uint32_t *sw = cur;
				cur = nxt;
				nxt = sw;
			}
			uint32_t r = cur[K] == INF ? 0 : cur[K];
			tp_pl_ar_release(p, m);
			unsigned at = p->mlb_n[x]++ % 4;
			p->mlb[x][at].k = k;
			p->mlb[x][at].b = b;
			p->mlb[x][at].u = ux;
			p->mlb[x][at].md = md;
			p->mlb[x][at].v = r;
			return r;
		}
		p->err = 0; /* the coarse bound below needs no memory */
		tp_pl_ar_release(p, m);
	}
	uint32_t lb = 0;
	for (unsigned i = 0; i < p->nmix[x]; i++) {
		uint32_t s = p->mix_dev[x][i], w = k / s;
		if (w + 1 > b)
			lb += p->mix_w[x][i] * s * (w + 1 - b);
	}
	return lb;
}

/* The least mix loss of any placement of k devices below level l (levels l+1 .. node) with
 * the domain counts v; the last answer per level is kept (the search asks it repeatedly). */
uint32_t tp_pl_mix_bound(struct pctx *p, int l, uint32_t k, unsigned col, const uint32_t *v)
{
	unsigned at = (unsigned)(l + 1);
	if (p->mb_set[at] && p->mb_k[at] == k && p->mb_col[at] == col)
		return p->mb_v[at];
	uint32_t lb = 0;
	for (unsigned x = at; x < p->nlev; x++)
		lb += mix_level_bound(p, x, k, v[x]);
	p->mb_set[at] = true;
	p->mb_k[at] = k;
	p->mb_col[at] = col;
	p->mb_v[at] = lb;
	return lb;
}

/* ---- point queries: f_D(k) ------------------------------------------------------------------ */



/* The spread column a single child answers from when its parent answers from col. */
unsigned tp_pl_child_col(const struct pctx *p, int l, unsigned col)
{
	if (p->sl < 0 || l + 1 > p->sl)
		return 0;
	return l + 1 == p->sl ? 1 : col;
}

/* The best single child of (l, d) holding all k at spread column col: 1 and the child's cost
 * and index, 0 when no child can, or an error. */
static int best_single_walk(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col,
                            uint32_t *best, uint32_t *kid);

/* The root's answer is asked twice (eval, then emit): keep it. */
int tp_pl_best_single(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col,
                      uint32_t *best, uint32_t *kid)
{
	int pin = tp_pl_pin_offer(p, l, k, col, best, kid); /* place_choice.c */
	if (pin != 2)
		return pin;
	if (l >= 0)
		return best_single_walk(p, l, d, k, col, best, kid);
	if (p->root_kind == 1 && p->root_k == k && p->root_col == col) {
		*kid = p->root_kid;
		c_copy(p, best, p->root_cost);
		return 1;
	}
	int r = best_single_walk(p, l, d, k, col, best, kid);
	if (r == 1) {
		p->root_kind = 1;
		p->root_k = k;
		p->root_col = col;
		p->root_kid = *kid;
		c_copy(p, p->root_cost, best);
	}
	return r;
}

/* Whether a child of level l + 1 with f free devices cannot beat best, which meets the count
 * bound: its own loss plus the least loss below it exceeds best's, or equals it with more free
 * devices (best fit). Candidates come tightest first, so this prunes without evaluating. */
/* Children evaluated past the first that meets the count bound, when the mix's bound is not
 * met (place.c: the mix's look-ahead). */
#define MIX_LOOKAHEAD 8

static bool cannot_beat(struct pctx *p, int l, uint32_t k, unsigned col, const uint32_t *best,
                        uint32_t f)
{
	if (!p->mix_on || p->have_used || !counts_meet(p, l, k, col, best))
		return false;
	uint32_t lb = mix_loss(p, l + 1, f, k) +
	              tp_pl_mix_bound(p, l + 1, k, tp_pl_child_col(p, l, col), best);
	uint32_t bm = best[p->nlev];
	return lb > bm || (lb == bm && f > best[p->fb + (unsigned)(l + 1)]);
}

/* Ties examined per search once the best meets its bounds (rule 4: each costs two emissions
 * and a step time). */
#define STEP_TIES 4

/* The single-child search's state: what it has found, how far past the bounds it looks. */
struct walk {
	int found;
	unsigned more, ties;
	bool ties_only;   /* the best meets every bound: only equal candidates remain of interest */
	double best_step; /* the best's modelled step, < 0: not computed yet */
	/* what decided (tp_placement_decided_by): the closest loser evaluated, ties, step times */
	bool has_ru, tied, step_split, stopped;
	bool lazy;        /* the best is known by its count prefix only (walk_offer_counts) */
	bool by_end;      /* the expected end chose among nodes as tight (rule 3 refined) */
	struct tp_end_key bkey; /* the best's, when the children are nodes and the job has an end */
	uint32_t ru[W_MAX];
};

/* Keep v as the closest loser when it is (lexicographically smallest of the losers is the
 * one that agrees longest with the winner). */
static void walk_loser(const struct pctx *p, struct walk *w, const uint32_t *v)
{
	if (!w->has_ru || c_cmp(p, v, w->ru) < 0) {
		c_copy(p, w->ru, v);
		w->has_ru = true;
	}
}

/* The rule that separated the search's winner best from the rest (see tp_placement_decided_by),
 * recorded for the outermost level that chose (the last search there wins). */
static void walk_record(struct pctx *p, const struct walk *w, int l, const uint32_t *best)
{
	tp_rule r = TP_RULE_NONE;
	if (w->by_end) {
		r = TP_RULE_END;
	} else if (w->step_split) {
		r = TP_RULE_STEP;
	} else if (w->tied) {
		r = TP_RULE_TIE;
	} else if (w->has_ru) {
		unsigned i = 0;
		while (i < p->W && best[i] == w->ru[i])
			i++;
		r = i < p->nlev ? TP_RULE_LOCALITY : TP_RULE_FIT;
	} else if (w->stopped) {
		r = TP_RULE_FIT; /* the rest are looser: they lose on rule 1 or on best fit */
	}
	if (r != TP_RULE_NONE && l <= p->dec_level) {
		p->dec_level = l;
		p->dec_rule = r;
	}
}

/* Whether domain dom of level l cannot hold k because one of its children must hold all of it
 * and none has k free devices (a capacity never exceeds the free count outside the emptied
 * cluster): tp_pl_eval would answer 0 after a search that finds no child, with nothing else
 * changed, so the children's free counts decide it without the search. */
static bool no_grandchild_holds(const struct pctx *p, int l, uint32_t dom, uint32_t k)
{
	if (p->ideal || p->sl >= 0 || l + 1 >= (int)p->nl || !forced_single(p, l, k))
		return false;
	for (uint32_t ch = p->t->lv[l].child_first[dom]; ch < p->t->lv[l].child_first[dom + 1]; ch++)
		if (dom_free(p, l + 1, ch) >= k)
			return false;
	return true;
}

/* Evaluate child dom of (l, d) for the search into tmp. Once the best uses one domain of level
 * l + 2 (the least possible), a child that no single child of its own can hold k in must use
 * several there: with every count above equal (one child, no domain already used), it loses
 * on rule 1 at level l + 2 whatever the rest of its cost. Its table is then not built
 * (tp_pl_eval answers 3 after the failed single-child search) and it is recorded as the best
 * with that count raised: what decided (walk_record) looks only at where the best and the
 * closest loser part, level l + 2 for the real vector as for this one, and any loser that
 * agrees with the best further is smaller than both. Without spreads, bounds, used domains or a
 * cap at l + 1, the child's table would be finite (capacities decide), so it is a loser either
 * way. */
static int eval_child(struct pctx *p, const struct walk *w, int l, uint32_t dom, uint32_t k,
                      unsigned cc, const uint32_t *best, uint32_t *tmp)
{
	if (no_grandchild_holds(p, l + 1, dom, k))
		return 0;
	int keep = p->skip_multi;
	bool skip = w->found && l + 2 <= (int)p->nl && best[l + 2] == 1 && !p->have_used &&
	            p->sl < 0 && no_bounds(p) && p->capdev[l + 1] == TP_RQ_NOCAP &&
	            k % ul(p, l + 1) == 0;
	p->skip_multi = skip ? l + 2 : 0;
	int e = tp_pl_eval(p, l + 1, dom, k, cc, tmp);
	p->skip_multi = keep;
	if (e == 3) {
		c_copy(p, tmp, best);
		tmp[l + 2] = 2;
		e = 1;
	}
	return e;
}

/* The search's best, when known only by its count prefix: evaluate it now (the same vector
 * its evaluation would have given when it was offered: nothing the evaluation reads changed). */
static int walk_settle(struct pctx *p, struct walk *w, int l, uint32_t k, unsigned col,
                       uint32_t *best, uint32_t kid)
{
	if (!w->lazy)
		return 0;
	w->lazy = false;
	int e = tp_pl_eval(p, l + 1, kid, k, tp_pl_child_col(p, l, col), best);
	if (e < 0)
		return e;
	return e == 1 ? 0 : TP_ECORRUPT;
}

/* The search over children two levels above the nodes, ranked by their count prefixes while
 * they decide (tp_pl_count_prefix, place_counts.c): a child that parts from the best there
 * wins or loses without its table, and what decided reads the same from the prefix (losers
 * are kept by where they part from the best, which the prefix fixes). Only children that tie
 * the best on the whole prefix are evaluated, and the best (lazy until then) when the search
 * ends. 1 offered (*done set when the walk stops), 0 when it cannot rank dom so, or an
 * error. */
static int walk_offer_counts(struct pctx *p, struct walk *w, int l, uint32_t k, unsigned col,
                             uint32_t dom, uint32_t *best, uint32_t *kid, int *done)
{
	uint32_t pre[W_MAX];
	*done = 0;
	if (!tp_pl_counts_rank_ok(p, l, k))
		return 0;
	int r = tp_pl_count_prefix(p, l, dom, k, w->found ? best : NULL, pre);
	if (r <= 0)
		return r;
	unsigned n = p->fb + (unsigned)(l + 1) + 1; /* what the prefix holds */
	if (w->found) {
		if (!w->lazy && !memcmp(pre, best, n * sizeof *pre))
			return 0; /* ties the evaluated best on the prefix: evaluate */
		if (w->lazy && !memcmp(pre, best, n * sizeof *pre)) {
			int e = walk_settle(p, w, l, k, col, best, *kid);
			return e ? e : 0;
		}
		if (c_cmp(p, pre, best) > 0) {
			walk_loser(p, w, pre);
			return 1;
		}
		walk_loser(p, w, best);
	}
	c_copy(p, best, pre);
	*kid = dom;
	w->found = 1;
	w->lazy = true;
	w->best_step = -1;
	if (meets_bound(p, l, k, col, best))
		*done = 1;
	return 1;
}

/* Offer child dom (f free devices) of (l, d) to the search: 1 to stop the walk, 0 to go on,
 * or an error. */
static int walk_offer(struct pctx *p, struct walk *w, int l, uint32_t k, unsigned col,
                      uint32_t dom, uint32_t f, uint32_t *best, uint32_t *kid)
{
	unsigned cc = tp_pl_child_col(p, l, col);
	/* the children are nodes and the job says when it ends: ties among nodes as tight go to
	 * their jobs' ends (after the step time, where rule 4 applies) */
	bool ends = l + 1 == (int)p->nl && p->q->end_s > 0;
	bool step = tp_pl_step_on(p, k);
	if (w->ties_only && (f > best[p->fb + (unsigned)(l + 1)] ||
	                     w->ties >= (ends && !step ? TP_PL_END_TIES : STEP_TIES)))
		return 1;
	if (w->found && !w->ties_only) {
		if (cannot_beat(p, l, k, col, best, f))
			return 0;
		if (counts_meet(p, l, k, col, best) && w->more++ >= MIX_LOOKAHEAD)
			return 1;
	}
	int done;
	int e = walk_offer_counts(p, w, l, k, col, dom, best, kid, &done);
	if (e)
		return e < 0 ? e : done;
	if ((e = walk_settle(p, w, l, k, col, best, *kid)) != 0)
		return e;
	uint32_t tmp[W_MAX];
	e = eval_child(p, w, l, dom, k, cc, best, tmp);
	if (e <= 0)
		return e;
	int cmp = w->found ? c_cmp(p, tmp, best) : -1;
	if (cmp < 0 && w->found)
		walk_loser(p, w, best);
	else if (cmp > 0)
		walk_loser(p, w, tmp);
	if (cmp < 0) {
		c_copy(p, best, tmp);
		*kid = dom;
		w->found = 1;
		w->best_step = -1;
		if (ends)
			w->bkey = tp_pl_node_end_key(p, dom, p->q->end_s);
		if (meets_bound(p, l, k, col, best)) {
			if (!step && !ends)
				return 1;
			w->ties_only = true;
		}
	} else if (cmp == 0 && ends && !step) {
		w->ties++;
		w->tied = true;
		if (tp_pl_end_wins(p, dom, &w->bkey)) {
			*kid = dom;
			w->by_end = true;
		}
	} else if (cmp == 0 && step) {
		w->ties++;
		if (w->best_step < 0)
			w->best_step = tp_pl_step_of(p, l + 1, *kid, k, cc);
		double s = tp_pl_step_of(p, l + 1, dom, k, cc);
		if (p->err)
			return p->err;
		if (s >= 0 && w->best_step >= 0 && s != w->best_step)
			w->step_split = true;
		else
			w->tied = true;
		if (s >= 0 && w->best_step >= 0 && s < w->best_step) {
			*kid = dom;
			w->best_step = s;
			if (ends)
				w->bkey = tp_pl_node_end_key(p, dom, p->q->end_s);
		} else if (ends && s == w->best_step && tp_pl_end_wins(p, dom, &w->bkey)) {
			*kid = dom;
			w->by_end = true;
		}
	} else if (cmp == 0) {
		w->tied = true;
	}
	return 0;
}

/* The search stopped at its best with candidates left, the next one (dom, f free) no tighter:
 * when it is as tight, evaluate it to tell a tie from a loss (what decided); a looser one
 * loses on rule 1 or best fit. 0 or an error. */
static int walk_next(struct pctx *p, struct walk *w, int l, uint32_t k, unsigned col,
                     const uint32_t *best, uint32_t dom, uint32_t f)
{
	w->stopped = true;
	if (w->tied || w->step_split || f != best[p->fb + (unsigned)(l + 1)])
		return 0;
	uint32_t tmp[W_MAX];
	int e = eval_child(p, w, l, dom, k, tp_pl_child_col(p, l, col), best, tmp);
	if (e < 0)
		return e;
	if (e && c_cmp(p, tmp, best) == 0)
		w->tied = true;
	else if (e)
		walk_loser(p, w, tmp);
	return 0;
}

static int best_single_walk(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col,
                            uint32_t *best, uint32_t *kid)
{
	struct walk w = {0};
	w.best_step = -1;
	if (l < 0 && tp_pl_root_indexed(p)) {
		/* walk the index lazily: the search usually stops at the first few domains */
		JError_t je;
		Word_t key = (Word_t)k << 32;
		for (int r = Judy1First(p->c->index[0], &key, &je); r == 1 && !p->err;
		     r = Judy1Next(p->c->index[0], &key, &je)) {
			int e = walk_offer(p, &w, l, k, col, (uint32_t)(key & 0xffffffffu),
			                   (uint32_t)(key >> 32), best, kid);
			if (e < 0)
				return e;
			if (e) {
				if ((e = walk_settle(p, &w, l, k, col, best, *kid)) != 0)
					return e;
				if (Judy1Next(p->c->index[0], &key, &je) == 1 &&
				    (e = walk_next(p, &w, l, k, col, best, (uint32_t)(key & 0xffffffffu),
				                   (uint32_t)(key >> 32))) < 0)
					return e;
				break;
			}
		}
		if (!p->err) {
			int e = walk_settle(p, &w, l, k, col, best, *kid);
			if (e)
				return e;
		}
		if (w.found && !p->err)
			walk_record(p, &w, l, best);
		return p->err ? p->err : w.found;
	}

	struct amark m = tp_pl_ar_mark(p);
	uint32_t n, i = 0;
	struct kid *ks = tp_pl_kids_of(p, l, d, k, &n);
	int rc = 0;
	for (; i < n && !p->err && !rc; i++)
		rc = walk_offer(p, &w, l, k, col, ks[i].dom, ks[i].free, best, kid);
	if (rc >= 0 && !p->err) {
		int e = walk_settle(p, &w, l, k, col, best, *kid);
		if (e)
			rc = e;
	}
	if (rc == 1 && i < n)
		rc = walk_next(p, &w, l, k, col, best, ks[i].dom, ks[i].free);
	tp_pl_ar_release(p, m);
	if (rc < 0)
		return rc;
	if (w.found && !p->err)
		walk_record(p, &w, l, best);
	return p->err ? p->err : w.found;
}

/* The root's answer for a plain request over several blocks (tp_pl_counts_rank_ok): the
 * knapsack over the blocks (only those that can be optimal, tp_pl_span_window), recorded, its
 * plan kept for tp_pl_emit as the dual's is (root_kind 2): the emission would run the same
 * knapsack again and walk it the same way (place_emit.c), which cost as much as this. 1 with
 * the cost in out, 0 when the blocks cannot hold k, or an error. */
static int root_span(struct pctx *p, uint32_t d, uint32_t k, unsigned col, uint32_t *out)
{
	struct amark m = tp_pl_ar_mark(p);
	struct knap kn;
	uint32_t J = k / p->u[0];
	int rc = tp_pl_knap_run(p, -1, d, J, J, true, &kn);
	if (!rc && c_inf(tb_at(p, &kn.tb, J, 0)))
		rc = 1; /* nothing holds k: 0 below */
	struct take *tk = rc ? NULL : tp_pl_ar_alloc(p, (kn.nk ? kn.nk : 1) * sizeof *tk);
	if (!rc && !tk)
		rc = TP_ENOMEM;
	if (rc) {
		tp_pl_ar_release(p, m);
		return rc == 1 ? 0 : rc;
	}
	/* the takes, last block first, as tp_pl_emit walks a recorded knapsack */
	uint32_t j;
	uint32_t nt = tp_pl_knap_takes(&kn, J, 0, p->u[0], tk, &j);
	p->root_kind = 0; /* until the new plan is kept */
	tp_free(p->a, p->root_plan);
	p->root_plan = j ? NULL : tp_mallocn(p->a, nt ? nt : 1, sizeof *tk);
	if (p->root_plan) {
		memcpy(p->root_plan, tk, nt * sizeof *tk);
		p->root_nplan = nt;
		p->root_kind = 2;
		p->root_k = k;
		p->root_col = col;
		c_copy(p, out, tb_at(p, &kn.tb, J, 0));
	}
	tp_pl_ar_release(p, m);
	return j ? TP_ECORRUPT : p->root_plan ? 1 : TP_ENOMEM;
}

/* f_D(k) for domain d of level l (the root for l = -1) at spread column col (colq(l) for
 * "spread met"): 1 and the cost in out, 0 when D cannot hold k so, or an error. */
int tp_pl_eval(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col, uint32_t *out)
{
	memset(out, 0, p->W * sizeof *out);
	if (l >= 0) {
		if (k > tp_pl_capd(p, (unsigned)l, d) || k < p->lb[l])
			return 0;
		if (l == (int)p->nl) {
			add_self(p, l, d, k, out);
			return 1;
		}
	}
	bool forced = forced_single(p, l, k);
	if (use_single(p, l, k, col, forced)) {
		uint32_t kid;
		uint32_t best[W_MAX];
		int r = tp_pl_best_single(p, l, d, k, col, best, &kid);
		if (r < 0)
			return r;
		if (r) {
			add_self(p, l, d, k, out);
			c_add(p, out, best);
			return 1;
		}
		if (forced || p->sl == l + 1)
			return 0;
		if (l >= 0 && l + 1 == p->skip_multi)
			return 3; /* several children needed: the search above knows that loses */
	} else if (forced) {
		return 0;
	}
	if (l < 0 && tp_pl_dual_ok(p)) {
		struct amark dm = tp_pl_ar_mark(p);
		struct take *tk = NULL;
		uint32_t ntk = 0;
		int r = tp_pl_root_dual(p, k, out, &tk, &ntk);
		if (r == 1) {
			/* keep the plan for tp_pl_emit() */
			tp_free(p->a, p->root_plan);
			p->root_plan = tp_mallocn(p->a, ntk ? ntk : 1, sizeof *tk);
			if (!p->root_plan) {
				r = TP_ENOMEM;
			} else {
				memcpy(p->root_plan, tk, ntk * sizeof *tk);
				p->root_nplan = ntk;
				p->root_kind = 2;
				p->root_k = k;
				p->root_col = col;
			}
		}
		tp_pl_ar_release(p, dm);
		if (r != 2)
			return r;
		memset(out, 0, p->W * sizeof *out);
	}
	if (l < 0 && tp_pl_counts_rank_ok(p, l, k))
		return root_span(p, d, k, col, out);
	struct amark m = tp_pl_ar_mark(p);
	struct table tb;
	uint32_t J = k / ul(p, l);
	int rc = dom_table(p, l, d, J, J ? J : 1, &tb);
	if (!rc) {
		const uint32_t *e = tb_at(p, &tb, J, tb.ns > 1 ? col : 0);
		rc = c_inf(e) ? 0 : 1;
		if (rc)
			c_copy(p, out, e);
	}
	tp_pl_ar_release(p, m);
	return rc;
}
