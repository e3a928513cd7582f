/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "place_internal.h"

/* ---- the top level: an exact dual for wide spreads ------------------------------------------ */

/*
 * A request that no top-level domain holds spreads over several. When the top-level domains'
 * children are the last level that counts (a two-level tree: their children are nodes; a
 * three-level tree whose nodes are uniform: node counts are forced), rule 1 is (top-level
 * domains t, their children r), and for a domain B, Q_B(m) (the most it holds with m children:
 * its m largest) is all that matters. The fewest t is greedy on capacities. Then the fewest r
 * with t domains is a knapsack over domains with state (domains used, children used) -> most
 * devices covered, and only the t best domains for each m can be needed (an optimal answer
 * using another domain B with m children can swap B for one of those, unused, that covers at
 * least as much), so the knapsack runs over at most t * (largest child count) candidates.
 *
 * Cost. Every top-level domain and every child is read once per call (the lists need each
 * domain's Q_B), so on a 1M-GPU fleet a wide request reads ~14k rack rows. What is skipped is
 * the rest: the domains come in index order (free, then index) from a counting sort of the free
 * counts, t is counted by capacity value, and a domain's children are sorted and summed only
 * when it could enter a list: the lists are filled from the most free devices down, with the
 * earlier domain first on ties (the same lists as filling them in index order), and the bound
 * "largest child, then the second largest each" (exact for one and two children) rules most
 * domains out of every list for three children or more before any sort. The candidates, the
 * knapsack and the answer are exactly those of reading every domain in full.
 */
struct dual_dom {
	uint32_t dom, free, cap;
	uint32_t first, n;  /* its children's capacities: items[first .. first + n), decreasing
	                       once ready (unsorted before) */
	uint32_t most, next; /* the largest of them and the second largest (0: none) */
	uint32_t pf;        /* its prefix sums: pre[pf + m] the sum of its m largest (pf: first
	                       + its position), filled by dual_ready when first needed */
	bool ready;
};

/* The items and prefix sums of every domain, and how to sort one domain's items. */
struct dual_lazy {
	uint32_t *items;
	uint64_t *pre;
	uint16_t *bucket; /* NULL: insertion sort */
	uint32_t step;    /* every item is a multiple of it (the counting sort's step) */
};

static void dual_sort_desc(uint32_t *it, uint32_t n, uint16_t *cnt, uint32_t u, uint32_t most);

/* Sort domain b's items and fill its prefix sums (once: most domains of a wide cluster never
 * need them, see dual_candidates). */
static void dual_ready(const struct dual_lazy *lz, struct dual_dom *b)
{
	if (b->ready)
		return;
	uint32_t *it = lz->items + b->first;
	uint64_t *pre = lz->pre + b->pf;
	dual_sort_desc(it, b->n, lz->bucket, lz->step, b->most);
	pre[0] = 0;
	for (uint32_t j = 0; j < b->n; j++)
		pre[j + 1] = pre[j] + it[j];
	b->ready = true;
}

/* Q_B(m) before the rounding to the top-level unit (never below Q_B(m)); b must be ready. */
static uint64_t dual_raw(const struct dual_dom *b, const uint64_t *pre, uint32_t m)
{
	uint64_t v = pre[b->pf + (m < b->n ? m : b->n)];
	return v > b->cap ? b->cap : v;
}

/* An upper bound of dual_raw(b, m) that needs no sort: the largest item, then m - 1 at most
 * the second largest each; exact for m <= 2. */
static uint64_t dual_raw_ub(const struct dual_dom *b, uint32_t m)
{
	uint32_t j = m < b->n ? m : b->n;
	uint64_t v = j ? b->most + (uint64_t)(j - 1) * b->next : 0;
	return v > b->cap ? b->cap : v;
}

/* Keep the largest and second largest of the values seen. */
static inline void dual_top2(uint32_t v, uint32_t *most, uint32_t *next)
{
	if (v > *most) {
		*next = *most;
		*most = v;
	} else if (v > *next) {
		*next = v;
	}
}

static uint64_t dual_q(const struct pctx *p, const struct dual_dom *b, const uint64_t *pre,
                       uint32_t m)
{
	uint64_t v = dual_raw(b, pre, m), u = p->u[0];
	return (u & (u - 1)) == 0 ? v & ~(u - 1) : v - v % u;
}

bool tp_pl_dual_ok(const struct pctx *p)
{
	return p->compact && p->sl < 0 && !p->have_used && no_bounds(p) &&
	       (p->nlev == 2 || p->nlev == 3) && p->single_to < 0;
}

/* Room for more items in the arena (the old ones copied): 0 or TP_ENOMEM. */
static int dual_grow(struct pctx *p, uint32_t **items, size_t nitems, size_t *cap_items,
                     uint32_t more)
{
	if (nitems + more <= *cap_items)
		return 0;
	size_t nc = (nitems + more) * 2 + 64;
	uint32_t *ni = tp_pl_ar_alloc(p, nc * sizeof *ni);
	if (!ni)
		return TP_ENOMEM;
	if (nitems)
		memcpy(ni, *items, nitems * sizeof *ni);
	*items = ni;
	*cap_items = nc;
	return 0;
}

/* Whether a three-level tree's rack capacities and node sizes can be read straight from the
 * histograms of the level below the top (no filter, scope, discount or emptied cluster): what
 * tp_pl_capd and tp_pl_uniform_node_dev compute then, in one pass over each domain's rows. */
static bool dual_rows_ok(const struct pctx *p)
{
	return p->nlev == 3 && !p->filtered && !p->ideal && !p->have_used && p->hist_ok[1] &&
	       !p->scope[1];
}

/* The free counts a node can give this request anything from (nodecap[k] > 0), for the rows. */
struct dual_keys {
	uint32_t n, k[TP_MAX_NODE_DEVICES + 1];
	bool pow2; /* u[1] is a power of two: rounding is a mask */
};

static void dual_keys_init(const struct pctx *p, struct dual_keys *dk)
{
	dk->n = 0;
	dk->pow2 = !(p->u[1] & (p->u[1] - 1));
	for (uint32_t k = 1; k < p->c->hstride && k <= TP_MAX_NODE_DEVICES; k++)
		if (p->nodecap[k])
			dk->k[dk->n++] = k;
}

/* Counts by value for dual_sort_desc (values below DUAL_BUCKETS; all zero between calls). */
#define DUAL_BUCKETS 4096

/* Decreasing order: by counting when the values are below DUAL_BUCKETS (the scan steps by u,
 * which divides every value, and clears what it emits), else an insertion sort (a domain's
 * children are few). */
static void dual_sort_desc(uint32_t *it, uint32_t n, uint16_t *cnt, uint32_t u, uint32_t most)
{
	if (cnt && n > 1 && most < DUAL_BUCKETS && n <= UINT16_MAX) {
		for (uint32_t i = 0; i < n; i++)
			cnt[it[i]]++;
		uint32_t at = 0;
		for (uint32_t v = most; at < n; v -= u) {
			for (uint32_t c = cnt[v]; c > 0; c--)
				it[at++] = v;
			cnt[v] = 0;
		}
		return;
	}
	for (uint32_t a = 1; a < n; a++)
		for (uint32_t b = a; b > 0 && it[b - 1] < it[b]; b--) {
			uint32_t tmp = it[b];
			it[b] = it[b - 1];
			it[b - 1] = tmp;
		}
}

/* The nonzero capacities of top-level domain dom's children into items (as tp_pl_capd gives
 * them), unsorted, the two largest (top2), their sum, and the node size they all share
 * (tp_pl_uniform_node_dev's answer: 0 when they differ or it does not divide the units).
 * Returns the number of items. */
static uint32_t dual_rows(const struct pctx *p, const struct dual_keys *dk, uint32_t dom,
                          uint32_t *items, uint32_t *top2, uint32_t *nd_out, uint64_t *total)
{
	const struct tp_cluster *c = p->c;
	const uint32_t hs = c->hstride, capdev = p->capdev[1], u1 = p->u[1];
	uint32_t f = p->t->lv[0].child_first[dom], cnt = p->t->lv[0].child_first[dom + 1] - f;
	const uint32_t *h = c->hist[1] + (size_t)f * hs;
	uint32_t n = 0, lo = UINT32_MAX, hi = 0, most = 0, next = 0;
	*total = 0;
	if (dk->n == 1) {
		/* one free count gives anything (groups of a whole node): one read per child, the
		 * same capacity as below (the sum cut to capdev, then to a multiple of u1) */
		const uint32_t nc = p->nodecap[dk->k[0]], mask = dk->pow2 ? ~(u1 - 1) : 0;
		const uint32_t *hk = h + dk->k[0], *end = hk + (size_t)cnt * hs;
		uint32_t any = 0;
		uint64_t tot = 0;
#define DUAL_ROW(ROUND)                                                                  \
	do {                                                                             \
		uint32_t x = *hk;                                                        \
		uint64_t sum = (uint64_t)x * nc;                                         \
		uint32_t v = sum > capdev ? capdev : (uint32_t)sum, cap = (ROUND);       \
		any |= x;                                                                \
		items[n] = cap;                                                          \
		n += cap != 0;                                                           \
		tot += cap;                                                              \
		if (cap > next)                                                          \
			dual_top2(cap, &most, &next);                                    \
	} while (0)
		if (mask) /* one loop per rounding, so the test stays out of the loop */
			for (; hk < end; hk += hs)
				DUAL_ROW(v & mask);
		else
			for (; hk < end; hk += hs)
				DUAL_ROW(floor_to(v, u1));
#undef DUAL_ROW
		*total = tot;
		hi = any ? nc : 0;
		lo = any ? nc : lo;
	} else {
		for (uint32_t r = 0; r < cnt; r++, h += hs) {
			uint64_t sum = 0;
			for (uint32_t j = 0; j < dk->n; j++) {
				uint32_t x = h[dk->k[j]], nc = p->nodecap[dk->k[j]];
				sum += (uint64_t)x * nc;
				lo = x && nc < lo ? nc : lo;
				hi = x && nc > hi ? nc : hi;
			}
			uint32_t x = min32(sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum, capdev);
			uint32_t cap = dk->pow2 ? x & ~(u1 - 1) : floor_to(x, u1);
			items[n] = cap;
			n += cap != 0;
			*total += cap;
			dual_top2(cap, &most, &next);
		}
	}
	top2[0] = most;
	top2[1] = next;
	*nd_out = !hi || lo != hi || mod_u(u1, hi) || mod_u(p->u[0], hi) ? 0 : hi;
	return n;
}

/* What the collectors give: the domains, their children's capacities (items[first ..
 * first + n) per domain, decreasing) and the forced node size. */
struct dual_set {
	struct dual_dom *bs;
	uint32_t nb, nd;
	uint32_t *items;
	size_t nitems, cap_items;
	uint16_t *bucket; /* the counting sort's counts (rows), NULL: insertion sort */
	uint32_t step;
};

/* Most free counts a counting sort of the top-level domains takes (more: the index walk). */
#define DUAL_ORDER_MAX 65536

/* The top-level domains with at least kmin free devices in the order of the cluster's index
 * (free, then index), into the arena: a counting sort of the free counts (one pass over a
 * contiguous array instead of a Judy1 walk of every key). NULL with *n = 0 when the counts are
 * too large for it (or out of memory: p->err). */
static uint32_t *dual_order(struct pctx *p, uint32_t kmin, uint32_t *n)
{
	const uint32_t nd = p->t->lv[0].ndom, most = p->t->lv[0].max_devices, *fr = p->c->free[0];
	*n = 0;
	if (!most || most > DUAL_ORDER_MAX)
		return NULL;
	uint32_t *start = tp_pl_ar_alloc(p, ((size_t)most + 2) * sizeof *start);
	uint32_t *ord = tp_pl_ar_alloc(p, (nd ? nd : 1) * sizeof *ord);
	if (!start || !ord)
		return NULL;
	memset(start, 0, ((size_t)most + 2) * sizeof *start);
	uint32_t lo = kmin ? kmin : 1;
	for (uint32_t d = 0; d < nd; d++)
		if (fr[d] >= lo)
			start[min32(fr[d], most) + 1]++;
	for (uint32_t v = lo; v <= most; v++)
		start[v + 1] += start[v];
	for (uint32_t d = 0; d < nd; d++)
		if (fr[d] >= lo)
			ord[start[min32(fr[d], most)]++] = d;
	*n = start[most];
	return ord;
}

/* Add top-level domain dom (free devices) to the set, its rows read: 0, 2 (not applicable)
 * or an error. */
static int dual_add_rows(struct pctx *p, const struct dual_keys *dk, struct dual_set *ds,
                         uint32_t dom, uint32_t free)
{
	const uint32_t *cf = p->t->lv[0].child_first, kmin = p->u[0];
	uint32_t u;
	uint64_t total;
	if (dual_grow(p, &ds->items, ds->nitems, &ds->cap_items, cf[dom + 1] - cf[dom]))
		return TP_ENOMEM;
	uint32_t top2[2], n = dual_rows(p, dk, dom, ds->items + ds->nitems, top2, &u, &total);
	uint32_t cap = p->hist_ok[0] ? tp_pl_capd(p, 0, dom)
	                             : floor_to(min32(total > UINT32_MAX ? UINT32_MAX : (uint32_t)total,
	                                              cap_left(p, 0, dom)),
	                                        p->u[0]);
	if (cap < kmin || !cap)
		return 0;
	if (!u || (ds->nd != 1 && u != ds->nd) || mod_u(p->u[0], u))
		return 2;
	ds->nd = u;
	ds->bs[ds->nb] = (struct dual_dom){dom, free, cap, (uint32_t)ds->nitems, n, top2[0],
	                                   top2[1], (uint32_t)ds->nitems + ds->nb, false};
	ds->nb++;
	ds->nitems += n;
	return 0;
}

/* The collector for dual_rows_ok: the top-level domains in the order tp_pl_kids_of gives them
 * (the cluster's index: free, then index), each one's rows read once for its children and
 * its own capacity (tp_pl_capd's: from the histograms, or the sum of its children's cut and
 * rounded). Returns 0, 2 (not applicable) or an error. */
static int dual_collect_rows(struct pctx *p, struct dual_set *ds)
{
	const struct tp_cluster *c = p->c;
	const uint32_t kmin = p->u[0];
	struct dual_keys dk;
	dual_keys_init(p, &dk);
	uint16_t *bucket = tp_pl_ar_alloc(p, DUAL_BUCKETS * sizeof *bucket);
	ds->bs = tp_pl_ar_alloc(p, (p->t->lv[0].ndom ? p->t->lv[0].ndom : 1) * sizeof *ds->bs);
	if (!bucket || !ds->bs)
		return TP_ENOMEM;
	memset(bucket, 0, DUAL_BUCKETS * sizeof *bucket);
	ds->bucket = bucket;
	ds->step = p->u[1];
	uint32_t no;
	const uint32_t *ord = dual_order(p, kmin, &no);
	if (p->err)
		return p->err;
	/* room for every child of the top level at once: no copies as the items grow */
	if (dual_grow(p, &ds->items, 0, &ds->cap_items, p->t->lv[0].child_first[p->t->lv[0].ndom]))
		return TP_ENOMEM;
	int rc = 0;
	if (ord) {
		for (uint32_t i = 0; i < no && !rc; i++)
			rc = dual_add_rows(p, &dk, ds, ord[i], c->free[0][ord[i]]);
		return rc;
	}
	Word_t key = (Word_t)kmin << 32;
	JError_t je;
	for (int r = Judy1First(c->index[0], &key, &je); r == 1 && !rc;
	     r = Judy1Next(c->index[0], &key, &je))
		rc = dual_add_rows(p, &dk, ds, (uint32_t)(key & 0xffffffffu), (uint32_t)(key >> 32));
	return rc;
}

/* The general collector: tp_pl_kids_of, then each domain's children through tp_pl_capd.
 * Returns 0, 2 (not applicable) or an error. */
static int dual_collect_kids(struct pctx *p, struct dual_set *ds)
{
	uint32_t n;
	struct kid *ks = tp_pl_kids_of(p, -1, 0, p->u[0], &n);
	if (p->err)
		return p->err;
	struct dual_dom *bs = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *bs);
	if (!bs)
		return TP_ENOMEM;
	ds->bs = bs;
	ds->nb = n;
	for (uint32_t i = 0; i < n; i++) {
		bs[i] = (struct dual_dom){ks[i].dom, ks[i].free, ks[i].cap, (uint32_t)ds->nitems, 0, 0,
		                          0, (uint32_t)ds->nitems + i, false};
		if (p->nlev == 3) {
			uint32_t u = tp_pl_uniform_node_dev(p, 0, ks[i].dom);
			if (!u || (ds->nd != 1 && u != ds->nd) || p->u[0] % u)
				return 2;
			ds->nd = u;
		}
		uint32_t f, cnt;
		if (p->nlev == 3) {
			f = p->t->lv[0].child_first[ks[i].dom];
			cnt = p->t->lv[0].child_first[ks[i].dom + 1] - f;
		} else {
			tp_dom_nodes(p->t, 0, ks[i].dom, &f, &cnt);
		}
		if (dual_grow(p, &ds->items, ds->nitems, &ds->cap_items, cnt))
			return TP_ENOMEM;
		for (uint32_t x = f; x < f + cnt; x++) {
			uint32_t cap = tp_pl_capd(p, p->nlev == 3 ? 1 : p->nl, x);
			if (cap)
				ds->items[ds->nitems++] = cap;
			dual_top2(cap, &bs[i].most, &bs[i].next);
		}
		bs[i].n = (uint32_t)(ds->nitems - bs[i].first);
	}
	return 0;
}

/* Collect the top-level domains and their children's capacities; *nd the forced node size
 * (three levels) or 1. Returns 0, 2 (not applicable) or an error. */
static int dual_collect(struct pctx *p, struct dual_dom **out, uint32_t *nb,
                        struct dual_lazy *lz, uint32_t *nd)
{
	struct dual_set ds = {NULL, 0, 1, NULL, 0, 0, NULL, 1};
	int rc = dual_rows_ok(p) && tp_pl_root_indexed(p) ? dual_collect_rows(p, &ds)
	                                                  : dual_collect_kids(p, &ds);
	if (rc)
		return rc;
	/* room for every domain's prefix sums; each is filled when first needed */
	uint64_t *pre = tp_pl_ar_alloc(p, (ds.nitems + ds.nb + 1) * sizeof *pre);
	if (!pre)
		return TP_ENOMEM;
	*out = ds.bs;
	*nb = ds.nb;
	*lz = (struct dual_lazy){ds.items, pre, ds.bucket, ds.step};
	*nd = ds.nd;
	return 0;
}

static int dual_cap_cmp(const void *a, const void *b)
{
	const struct dual_dom *x = a, *y = b;
	if (x->cap != y->cap)
		return x->cap > y->cap ? -1 : 1;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

/* The greedy count over every domain, largest capacities first: 0 or TP_ENOMEM. Capacities
 * are multiples of u[0]; when they are few enough values, counted by value (the count depends
 * on the capacities alone, not on their order), else sorted. */
static int dual_fewest_sorted(struct pctx *p, const struct dual_dom *bs, uint32_t nb, uint32_t k,
                              uint32_t *t_out)
{
	const uint32_t u = p->u[0] ? p->u[0] : 1;
	uint32_t most = 0;
	bool whole = true;
	for (uint32_t i = 0; i < nb; i++) {
		most = max32(most, bs[i].cap);
		whole = whole && bs[i].cap % u == 0;
	}
	if (whole && most / u < DUAL_ORDER_MAX) {
		uint32_t nv = most / u + 1, *cnt = tp_pl_ar_alloc(p, (size_t)nv * sizeof *cnt);
		if (!cnt)
			return TP_ENOMEM;
		memset(cnt, 0, (size_t)nv * sizeof *cnt);
		for (uint32_t i = 0; i < nb; i++)
			cnt[bs[i].cap / u]++;
		uint64_t acc = 0;
		uint32_t t = 0;
		for (uint32_t v = nv; v-- > 0 && acc < k;)
			for (uint32_t x = cnt[v]; x > 0 && acc < k; x--) {
				acc += (uint64_t)v * u;
				t++;
			}
		*t_out = acc < k ? 0 : t;
		return 0;
	}
	struct dual_dom *by = tp_pl_ar_alloc(p, (nb ? nb : 1) * sizeof *by);
	if (!by)
		return TP_ENOMEM;
	memcpy(by, bs, nb * sizeof *by);
	qsort(by, nb, sizeof *by, dual_cap_cmp);
	uint64_t acc = 0;
	uint32_t t = 0;
	while (acc < k && t < nb)
		acc += by[t++].cap;
	*t_out = acc < k ? 0 : t;
	return 0;
}

/* The same count from the largest free counts down: bs comes in increasing free order and
 * (outside replace's spares and the emptied cluster) a capacity never exceeds its free count,
 * so once the t-th best capacity seen, with the first t reaching k, is at least the next free
 * count, no domain left could lower t. Returns 1 with *t_out, or 0 when the walk grew long
 * (the caller sorts instead). */
static int dual_fewest_walk(const struct dual_dom *bs, uint32_t nb, uint32_t k, uint32_t *best,
                            uint32_t *t_out)
{
	enum { WALK_MAX = 64 };
	uint32_t nbest = 0, t = 0;
	for (uint32_t i = nb; i-- > 0;) {
		if (t && best[t - 1] >= bs[i].free)
			break;
		if (nbest == WALK_MAX)
			return 0;
		uint32_t at = nbest++;
		for (; at > 0 && best[at - 1] < bs[i].cap; at--)
			best[at] = best[at - 1];
		best[at] = bs[i].cap;
		uint64_t acc = 0;
		for (t = 0; acc < k && t < nbest;)
			acc += best[t++];
		if (acc < k)
			t = 0;
	}
	*t_out = t;
	return 1;
}

/* The fewest top-level domains that hold k devices (greedy on capacities), 0 when all of
 * them together cannot; *mmax the most children any of them has. */
static int dual_fewest_top(struct pctx *p, const struct dual_dom *bs, uint32_t nb, uint32_t k,
                           uint32_t *t_out, uint32_t *mmax)
{
	uint32_t best[64];
	if (p->ideal || p->spares || !dual_fewest_walk(bs, nb, k, best, t_out)) {
		int rc = dual_fewest_sorted(p, bs, nb, k, t_out);
		if (rc)
			return rc;
	}
	*mmax = 0;
	for (uint32_t i = 0; i < nb; i++)
		*mmax = max32(*mmax, bs[i].n);
	return 0;
}

/* Offer domain i with Q = q to the list of the t best for one child count (top and topq, nt
 * long, best first, earlier domains first on ties). Domains come in decreasing order, so i
 * goes before the equal ones already listed. */
static void dual_offer(uint32_t *top, uint64_t *topq, uint32_t nt, uint32_t t, uint32_t i,
                       uint64_t q)
{
	uint32_t at = nt < t ? nt : t;
	while (at > 0 && topq[at - 1] <= q)
		at--;
	if (at >= t)
		return;
	uint32_t len = nt < t ? nt + 1 : t;
	memmove(top + at + 1, top + at, (len - 1 - at) * sizeof *top);
	memmove(topq + at + 1, topq + at, (len - 1 - at) * sizeof *topq);
	top[at] = i;
	topq[at] = q;
}

/* Whether domain b's bound (dual_raw_ub) reaches the last of a full list for 3 children or
 * more. The lists hold the t best of the domains seen, so their lasts grow with m, as the
 * bound does: once the bound stops at the capacity below a last, no later list can take it. */
static bool dual_longer_list(const struct dual_dom *b, const uint64_t *topq, uint32_t t,
                             uint32_t mmax)
{
	uint64_t ub = b->most; /* the bound for m children before the cut to the capacity */
	for (uint32_t m = 2; m <= mmax; m++) {
		if (m <= b->n)
			ub += b->next;
		if (m < 3)
			continue;
		uint64_t v = ub > b->cap ? b->cap : ub, last = topq[(size_t)m * (t + 1) + t - 1];
		if (v >= last)
			return true;
		if (v == b->cap)
			return false;
	}
	return false;
}

/* The candidates: the t best domains for each child count m (indices into bs, increasing;
 * the best Q_B(m), the earliest domain on ties). Domains in the outer loop, from the last
 * (the most free devices, so the lists fill with good domains first), one list per m; a
 * domain worse than a full list's last cannot enter it, so its rounding is skipped; one whose
 * bound (dual_raw_ub, exact for one and two children) is worse than every full list's last
 * for three children or more is not sorted (only the final candidates must be). */
static int dual_candidates(struct pctx *p, struct dual_dom *bs, uint32_t nb,
                           const struct dual_lazy *lz, uint32_t t, uint32_t mmax,
                           uint32_t **ci_out, uint32_t *nc_out)
{
	const uint64_t *pre = lz->pre;
	size_t lists = (size_t)mmax + 1;
	bool *cand = tp_pl_ar_alloc(p, (nb ? nb : 1) * sizeof *cand);
	uint32_t *top = tp_pl_ar_alloc(p, lists * ((size_t)t + 1) * sizeof *top);
	uint64_t *topq = tp_pl_ar_alloc(p, lists * ((size_t)t + 1) * sizeof *topq);
	if (!cand || !top || !topq)
		return TP_ENOMEM;
	memset(cand, 0, nb * sizeof *cand);
	for (uint32_t i = nb; i-- > 0;) {
		uint32_t seen = nb - 1 - i, nt = seen < t ? seen : t;
		if (nt == t) {
			/* lists of 1 and 2 children take the exact bound; a longer one needs the sort */
			if (!dual_longer_list(&bs[i], topq, t, mmax)) {
				for (uint32_t m = 1; m <= 2 && m <= mmax; m++) {
					uint64_t raw = dual_raw_ub(&bs[i], m);
					if (raw >= topq[(size_t)m * (t + 1) + t - 1])
						dual_offer(top + (size_t)m * (t + 1), topq + (size_t)m * (t + 1), nt,
						           t, i, raw - raw % p->u[0]);
				}
				continue;
			}
		}
		dual_ready(lz, &bs[i]);
		for (uint32_t m = 1; m <= mmax; m++) {
			uint32_t *tm = top + (size_t)m * (t + 1);
			uint64_t *qm = topq + (size_t)m * (t + 1);
			if (nt == t && dual_raw(&bs[i], pre, m) < qm[t - 1])
				continue;
			dual_offer(tm, qm, nt, t, i, dual_q(p, &bs[i], pre, m));
		}
	}
	uint32_t nt = nb < t ? nb : t;
	for (uint32_t m = 1; m <= mmax; m++)
		for (uint32_t i = 0; i < nt; i++)
			cand[top[(size_t)m * (t + 1) + i]] = true;
	uint32_t nc = 0;
	for (uint32_t i = 0; i < nb; i++) {
		nc += cand[i];
		if (cand[i]) /* the knapsack reads every candidate's prefix sums */
			dual_ready(lz, &bs[i]);
	}
	uint32_t *ci = tp_pl_ar_alloc(p, (nc ? nc : 1) * sizeof *ci);
	if (!ci)
		return TP_ENOMEM;
	nc = 0;
	for (uint32_t i = 0; i < nb; i++)
		if (cand[i])
			ci[nc++] = i;
	*ci_out = ci;
	*nc_out = nc;
	return 0;
}

/* The knapsack over the candidates: best[tt * (R + 1) + r] the most devices tt domains with r
 * children cover (-1: none), ch[c * states + state] the children candidate c took to reach
 * that state (0: not taken). Returns 0, 2 (too large: not applicable) or an error. */
struct dual_knap {
	size_t R, states;
	int64_t *best;
	uint16_t *ch;
};

static int dual_knapsack(struct pctx *p, const struct dual_dom *bs, const uint32_t *ci,
                         uint32_t nc, const uint64_t *pre, uint32_t t, uint32_t mmax,
                         struct dual_knap *kn)
{
	size_t R = (size_t)t * mmax, states = ((size_t)t + 1) * (R + 1);
	if ((size_t)nc * states > ((size_t)1 << 24))
		return 2;
	int64_t *best = tp_pl_ar_alloc(p, states * sizeof *best);
	size_t nch = (size_t)nc * states;
	uint16_t *ch = tp_pl_ar_alloc(p, (nch ? nch : 1) * sizeof *ch);
	if (!best || !ch)
		return TP_ENOMEM;
	for (size_t i = 0; i < states; i++)
		best[i] = -1;
	best[0] = 0;
	memset(ch, 0, (size_t)nc * states * sizeof *ch);
	for (uint32_t c = 0; c < nc; c++) {
		const struct dual_dom *b = &bs[ci[c]];
		for (uint32_t tt = t; tt-- > 0;)
			for (size_t r = R + 1; r-- > 0;) {
				int64_t cur = best[tt * (R + 1) + r];
				if (cur < 0)
					continue;
				for (uint32_t m = 1; m <= b->n && r + m <= R; m++) {
					int64_t v = cur + (int64_t)dual_q(p, b, pre, m);
					size_t at = (tt + 1) * (R + 1) + r + m;
					if (v > best[at]) {
						best[at] = v;
						ch[(size_t)c * states + at] = (uint16_t)m;
					}
				}
			}
	}
	*kn = (struct dual_knap){R, states, best, ch};
	return 0;
}

/* The domains and amounts of the knapsack's answer (t domains, rstar children), the excess
 * over k given back. Returns 1 or an error. */
static int dual_plan(struct pctx *p, const struct dual_dom *bs, const uint32_t *ci, uint32_t nc,
                     const uint64_t *pre, const struct dual_knap *kn, uint32_t t, size_t rstar,
                     uint32_t k, struct take **plan, uint32_t *nplan)
{
	struct take *tk = tp_pl_ar_alloc(p, (size_t)t * sizeof *tk);
	if (!tk)
		return TP_ENOMEM;
	uint32_t ntk = 0, tt = t;
	size_t r = rstar;
	uint64_t sum = 0;
	for (uint32_t c = nc; c-- > 0 && tt > 0;) {
		size_t at = (size_t)tt * (kn->R + 1) + r;
		uint16_t m = kn->ch[(size_t)c * kn->states + at];
		if (!m)
			continue;
		const struct dual_dom *b = &bs[ci[c]];
		uint64_t q = dual_q(p, b, pre, m);
		tk[ntk++] = (struct take){b->dom, (uint32_t)q, 0};
		sum += q;
		tt--;
		r -= m;
	}
	if (tt || r)
		return TP_ECORRUPT;
	/* give back the excess; an amount never drops to fewer children (that would beat r) */
	uint64_t excess = sum - k;
	for (uint32_t i = 0; i < ntk && excess; i++) {
		uint64_t give = tk[i].amount - p->u[0];
		if (give > excess)
			give = excess;
		tk[i].amount -= (uint32_t)give;
		excess -= give;
	}
	*plan = tk;
	*nplan = ntk;
	return excess ? TP_ECORRUPT : 1;
}

/* The fewest top-level domains (t), then the fewest of their children (r), for k devices:
 * 1 with the cost (and, when plan is given, the domains and amounts), 0 when impossible,
 * 2 when not applicable, or an error. */
int tp_pl_root_dual(struct pctx *p, uint32_t k, uint32_t *cost, struct take **plan,
                    uint32_t *nplan)
{
	struct dual_dom *bs;
	uint32_t nb, nd, t, mmax, *ci, nc;
	struct dual_lazy lz;
	struct dual_knap kn;
	int rc = dual_collect(p, &bs, &nb, &lz, &nd);
	if (rc)
		return rc;
	if ((rc = dual_fewest_top(p, bs, nb, k, &t, &mmax)))
		return rc;
	if (!t)
		return 0;
	/* every candidate was made ready by dual_candidates */
	if ((rc = dual_candidates(p, bs, nb, &lz, t, mmax, &ci, &nc)) ||
	    (rc = dual_knapsack(p, bs, ci, nc, lz.pre, t, mmax, &kn)))
		return rc;
	size_t rstar = kn.R + 1;
	for (size_t r = 1; r <= kn.R && rstar > kn.R; r++)
		if (kn.best[(size_t)t * (kn.R + 1) + r] >= (int64_t)k)
			rstar = r;
	if (rstar > kn.R)
		return 0;
	memset(cost, 0, p->W * sizeof *cost);
	cost[0] = t;
	cost[1] = (uint32_t)rstar;
	if (p->nlev == 3)
		cost[2] = k / nd;
	if (!plan)
		return 1;
	return dual_plan(p, bs, ci, nc, lz.pre, &kn, t, rstar, k, plan, nplan);
}
