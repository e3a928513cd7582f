/* SPDX-License-Identifier: MIT */
/*
 * The counts a child two levels above the nodes would answer for a plain request, without its
 * table: the single-child search (place_table.c, walk_offer_counts) ranks such children by
 * them and builds the knapsack of only those that tie its best there.
 */
#include <string.h>

#include "place_internal.h"

static uint64_t min64(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* Whether the search over the children of level l may rank a child two levels above the nodes
 * by its counts (tp_pl_count_prefix) before building its table: a plain request (every unit one
 * device), no spread, bound, cap, filter, used domain, pin, mix or step model, and nothing
 * forcing a single child. Its evaluation then finds a finite vector whenever its capacities
 * hold k. */
bool tp_pl_counts_rank_ok(const struct pctx *p, int l, uint32_t k)
{
	int c = l + 1;
	if (c + 2 != (int)p->nl || p->mix_on || p->have_used || p->sl >= 0 || !no_bounds(p) ||
	    p->filtered || p->pairs || p->spares || p->pin_on || p->excl >= 0 ||
	    p->svc_level >= 0 || p->sbad || p->fbad || forced_single(p, c, k) ||
	    tp_pl_step_on(p, k))
		return false;
	for (unsigned x = (unsigned)c; x <= p->nl; x++)
		if (p->u[x] != 1 || p->capdev[x] != TP_RQ_NOCAP)
			return false;
	return true;
}

/* The leading components of child dom's vector for k devices, exactly as its evaluation finds
 * them, without its table (a knapsack over its children: the costly part of a plain request on
 * partly used nodes): 1 at l + 1, R at l + 2, N at l + 3 and its free devices at fb + l + 1,
 * zeros elsewhere. Its table ranks its children's placements by the fewest children R first,
 * then the fewest nodes N, and a child taking j devices uses the shortest prefix of its node
 * capacities, largest first, that holds j (leaf_table; the single-child search finds the same
 * for R = 1). So R is the fewest children whose capacities (the node sum clipped by the
 * child's own) hold k, and N the fewest nodes of R children that hold k: a knapsack over the
 * children on (children, nodes), small beside one on devices. 1 with out set, 0 when it cannot
 * tell (then the child is evaluated), or an error. With best (the search's best, or NULL) at
 * R children, N is sought only up to best's: past it out says best's plus one, which parts
 * from best and from any later best where the real N would. */
int tp_pl_count_prefix(struct pctx *p, int l, uint32_t dom, uint32_t k, const uint32_t *best,
                        uint32_t *out)
{
	int c = l + 1;
	if (tp_pl_capd(p, (unsigned)c, dom) < k)
		return p->err;
	struct amark m = tp_pl_ar_mark(p);
	int ok = 0;
	uint32_t nr;
	struct kid *ks = tp_pl_kids_of(p, c, dom, 1, &nr);
	uint64_t *tot = ks ? tp_pl_ar_alloc(p, (nr ? nr : 1) * sizeof *tot) : NULL;
	uint32_t *nn = ks ? tp_pl_ar_alloc(p, (nr ? nr : 1) * sizeof *nn) : NULL;
	struct lnode **ln = ks ? tp_pl_ar_alloc(p, (nr ? nr : 1) * sizeof *ln) : NULL;
	if (!tot || !nn || !ln || p->err)
		goto out;
	uint64_t all = 0;
	for (uint32_t i = 0; i < nr; i++) {
		ln[i] = tp_pl_leaf_nodes(p, c + 1, ks[i].dom, &nn[i]);
		if (!ln[i])
			goto out;
		uint64_t sum = 0;
		for (uint32_t t = 0; t < nn[i]; t++)
			sum += ln[i][t].v;
		tot[i] = min64(sum, ks[i].cap);
		all += tot[i];
	}
	if (all < k)
		goto out;
	/* R: the largest totals first; B: the nodes of those R children, enough for N */
	uint32_t R = 0, B = 0;
	uint64_t have = 0;
	bool *taken = tp_pl_ar_alloc(p, (nr ? nr : 1) * sizeof *taken);
	if (!taken)
		goto out;
	memset(taken, 0, (nr ? nr : 1) * sizeof *taken);
	while (have < k) {
		uint32_t bi = UINT32_MAX;
		for (uint32_t i = 0; i < nr; i++)
			if (!taken[i] && (bi == UINT32_MAX || tot[i] > tot[bi]))
				bi = i;
		taken[bi] = true;
		have += tot[bi];
		B += nn[bi];
		R++;
	}
	if (best && R > best[c + 1]) {
		memset(out, 0, p->W * sizeof *out);
		out[c] = 1;
		out[c + 1] = R;
		out[c + 2] = best[c + 2];
		out[p->fb + (unsigned)c] = dom_free(p, c, dom);
		ok = 1;
		goto out;
	}
	bool capped = best && R == best[c + 1] && best[c + 2] < B;
	if (capped)
		B = best[c + 2];
	/* h[a][b]: most devices on at most a children and b nodes */
	size_t row = (size_t)B + 1;
	uint64_t *h = tp_pl_ar_alloc(p, ((size_t)R + 1) * row * sizeof *h);
	uint64_t *g = tp_pl_ar_alloc(p, row * sizeof *g);
	if (!h || !g)
		goto out;
	memset(h, 0, ((size_t)R + 1) * row * sizeof *h);
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t top = min32(nn[i], B);
		g[0] = 0;
		for (uint32_t t = 1; t <= top; t++)
			g[t] = min64(g[t - 1] + ln[i][t - 1].v, ks[i].cap);
		for (uint32_t a = min32(R, i + 1); a >= 1; a--)
			for (uint32_t b = B; b >= 1; b--) {
				uint64_t *e = &h[(size_t)a * row + b];
				const uint64_t *src = &h[(size_t)(a - 1) * row + b];
				for (uint32_t t = 1; t <= min32(b, top); t++)
					if (src[-(ptrdiff_t)t] + g[t] > *e)
						*e = src[-(ptrdiff_t)t] + g[t];
			}
	}
	uint32_t N = 1;
	while (N <= B && h[(size_t)R * row + N] < k)
		N++;
	if (N > B && !capped)
		goto out;
	memset(out, 0, p->W * sizeof *out);
	out[c] = 1;
	out[c + 1] = R;
	out[c + 2] = N;
	out[p->fb + (unsigned)c] = dom_free(p, c, dom);
	ok = 1;
out:
	tp_pl_ar_release(p, m);
	return p->err ? p->err : ok;
}
