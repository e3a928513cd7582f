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
 */
struct dual_dom {
	uint32_t dom, free, cap;
	uint32_t first, n;  /* its children's capacities: items[first .. first + n), decreasing */
};

static uint64_t dual_q(const struct pctx *p, const struct dual_dom *b, const uint64_t *pre,
                       uint32_t m)
{
	uint64_t v = pre[b->first + (m < b->n ? m : b->n)] - pre[b->first];
	if (v > b->cap)
		v = b->cap;
	return v - v % p->u[0];
}

bool tp_pl_dual_ok(const struct pctx *p)
{
	return p->compact && p->sl < 0 && !p->have_used && no_bounds(p) &&
	       (p->nlev == 2 || p->nlev == 3) && p->single_to < 0;
}

/* Collect the top-level domains and their children's capacities; *nd the forced node size
 * (three levels) or 1. Returns 0, 2 (not applicable) or an error. */
static int dual_collect(struct pctx *p, uint32_t k, struct dual_dom **out, uint32_t *nb,
                        uint64_t **pre_out, uint32_t *nd)
{
	uint32_t n;
	struct kid *ks = tp_pl_kids_of(p, -1, 0, p->u[0], &n);
	if (p->err)
		return p->err;
	struct dual_dom *bs = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *bs);
	if (!bs)
		return TP_ENOMEM;
	size_t nitems = 0, cap_items = 0;
	uint32_t *items = NULL;
	*nd = 1;
	for (uint32_t i = 0; i < n; i++) {
		bs[i] = (struct dual_dom){ks[i].dom, ks[i].free, ks[i].cap, (uint32_t)nitems, 0};
		if (p->nlev == 3) {
			uint32_t u = tp_pl_uniform_node_dev(p, 0, ks[i].dom);
			if (!u || (*nd != 1 && u != *nd) || p->u[0] % u)
				return 2;
			*nd = u;
		}
		uint32_t f, cnt;
		if (p->nlev == 3) {
			f = p->t->lv[0].child_first[ks[i].dom];
			cnt = p->t->lv[0].child_first[ks[i].dom + 1] - f;
		} else {
			tp_dom_nodes(p->t, 0, ks[i].dom, &f, &cnt);
		}
		if (nitems + cnt > cap_items) {
			size_t nc = (nitems + cnt) * 2 + 64;
			uint32_t *ni = tp_pl_ar_alloc(p, nc * sizeof *ni);
			if (!ni)
				return TP_ENOMEM;
			if (nitems)
				memcpy(ni, items, nitems * sizeof *ni);
			items = ni;
			cap_items = nc;
		}
		for (uint32_t x = f; x < f + cnt; x++) {
			uint32_t cap = tp_pl_capd(p, p->nlev == 3 ? 1 : p->nl, x);
			if (cap)
				items[nitems++] = cap;
		}
		bs[i].n = (uint32_t)(nitems - bs[i].first);
		/* decreasing order: an insertion sort (a domain's children are few) */
		uint32_t *it = items + bs[i].first;
		for (uint32_t a = 1; a < bs[i].n; a++)
			for (uint32_t b = a; b > 0 && it[b - 1] < it[b]; b--) {
				uint32_t tmp = it[b];
				it[b] = it[b - 1];
				it[b - 1] = tmp;
			}
	}
	uint64_t *pre = tp_pl_ar_alloc(p, (nitems + 1) * sizeof *pre);
	if (!pre)
		return TP_ENOMEM;
	pre[0] = 0;
	for (size_t i = 0; i < nitems; i++)
		pre[i + 1] = pre[i] + items[i];
	(void)k;
	*out = bs;
	*nb = n;
	*pre_out = pre;
	return 0;
}

static int dual_cap_cmp(const void *a, const void *b)
{
	const struct dual_dom *x = a, *y = b;
	if (x->cap != y->cap)
		return x->cap > y->cap ? -1 : 1;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

/* The fewest top-level domains that hold k devices (greedy on capacities), 0 when all of
 * them together cannot; *mmax the most children any of them has. */
static int dual_fewest_top(struct pctx *p, const struct dual_dom *bs, uint32_t nb, uint32_t k,
                           uint32_t *t_out, uint32_t *mmax)
{
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
	*mmax = 0;
	for (uint32_t i = 0; i < nb; i++)
		*mmax = max32(*mmax, bs[i].n);
	return 0;
}

/* The candidates: the t best domains for each child count m (indices into bs, increasing). */
static int dual_candidates(struct pctx *p, const struct dual_dom *bs, uint32_t nb,
                           const uint64_t *pre, uint32_t t, uint32_t mmax, uint32_t **ci_out,
                           uint32_t *nc_out)
{
	bool *cand = tp_pl_ar_alloc(p, (nb ? nb : 1) * sizeof *cand);
	uint32_t *top = tp_pl_ar_alloc(p, ((size_t)t + 1) * sizeof *top);
	if (!cand || !top)
		return TP_ENOMEM;
	memset(cand, 0, nb * sizeof *cand);
	for (uint32_t m = 1; m <= mmax; m++) {
		uint32_t nt = 0;
		for (uint32_t i = 0; i < nb; i++) {
			uint64_t q = dual_q(p, &bs[i], pre, m);
			uint32_t at = nt;
			while (at > 0 && dual_q(p, &bs[top[at - 1]], pre, m) < q)
				at--;
			if (at >= t)
				continue;
			if (nt < t)
				nt++;
			memmove(top + at + 1, top + at, (nt - 1 - at) * sizeof *top);
			top[at] = i;
		}
		for (uint32_t i = 0; i < nt; i++)
			cand[top[i]] = true;
	}
	uint32_t nc = 0;
	for (uint32_t i = 0; i < nb; i++)
		nc += cand[i];
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
	uint64_t *pre;
	struct dual_knap kn;
	int rc = dual_collect(p, k, &bs, &nb, &pre, &nd);
	if (rc)
		return rc;
	if ((rc = dual_fewest_top(p, bs, nb, k, &t, &mmax)))
		return rc;
	if (!t)
		return 0;
	if ((rc = dual_candidates(p, bs, nb, pre, t, mmax, &ci, &nc)) ||
	    (rc = dual_knapsack(p, bs, ci, nc, pre, t, mmax, &kn)))
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
	return dual_plan(p, bs, ci, nc, pre, &kn, t, rstar, k, plan, nplan);
}
