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

/* ---- the root over blocks: which blocks, and which amounts of them, can be optimal -------- */

/* Counts packed into one word, so that adding and comparing them is one operation each: the
 * blocks (top-level domains) above bit 48, the racks above bit 24, the nodes below. */
#define PK_B (1ull << 48)
#define PK_R (1ull << 24)
#define PK_INF (1ull << 62) /* and above: three of them add up without wrapping, so the
                                inner loops add and compare without a test */

static uint64_t pk_min(uint64_t a, uint64_t b) { return a < b ? a : b; }

/* cb[0..J]: the least (racks, nodes) of block dom for each amount, packed (with one block), or
 * PK_INF where it cannot hold it: exactly the leading counts of the block's table (a knapsack
 * over its racks, each taking the shortest prefix of its node capacities, largest first, that
 * holds its amount: leaf_table), on two counts instead of the whole vector. */
static int block_counts(struct pctx *p, uint32_t dom, uint32_t J, uint64_t *cb)
{
	struct amark m = tp_pl_ar_mark(p);
	uint32_t nr;
	struct kid *ks = tp_pl_kids_of(p, 0, dom, 1, &nr);
	uint64_t *nc = tp_pl_ar_alloc(p, ((size_t)J + 1) * sizeof *nc);
	if (p->err || !nc) {
		tp_pl_ar_release(p, m);
		return p->err ? p->err : TP_ENOMEM;
	}
	struct amark rm = tp_pl_ar_mark(p); /* each rack's nodes */
	cb[0] = 0;
	for (uint32_t j = 1; j <= J; j++)
		cb[j] = PK_INF;
	uint32_t reach = 0;
	for (uint32_t i = 0; i < nr && !p->err; i++) {
		uint32_t n, jr = 0;
		struct lnode *ln = tp_pl_leaf_nodes(p, 1, ks[i].dom, &n);
		if (!ln)
			break;
		/* nc[j]: the nodes this rack needs for j (j up to jr, its capacity within J) */
		uint64_t acc = 0;
		uint32_t cap = min32(J, ks[i].cap);
		for (uint32_t t = 0; t < n && jr < cap; t++) {
			acc += ln[t].v;
			while (jr < cap && jr < acc)
				nc[++jr] = PK_R + t + 1;
		}
		for (uint32_t nj = min32(J, reach + jr); nj >= 1; nj--) {
			uint64_t best = cb[nj];
			for (uint32_t j2 = nj > reach ? nj - reach : 1; j2 <= min32(nj, jr); j2++)
				best = pk_min(best, cb[nj - j2] + nc[j2]);
			cb[nj] = pk_min(best, PK_INF);
		}
		reach = min32(J, reach + jr);
		tp_pl_ar_release(p, rm);
	}
	for (uint32_t j = 1; j <= J; j++)
		if (cb[j] < PK_INF)
			cb[j] += PK_B;
	tp_pl_ar_release(p, m);
	return p->err;
}

/* dst[m] = min(a[m], the least a[m - j] + c[j]): a knapsack's row with one more part, c (up
 * to jc) the part's counts. */
static void row_fold(const uint64_t *a, const uint64_t *c, uint32_t jc, uint64_t *dst, uint32_t K)
{
	for (uint32_t m = 0; m <= K; m++) {
		uint64_t best = a[m];
		for (uint32_t j = 1; j <= min32(m, jc); j++)
			best = pk_min(best, a[m - j] + c[j]);
		dst[m] = pk_min(best, PK_INF);
	}
}

/* The root's knapsack over the top-level domains (blocks) for K devices of a plain request
 * (tp_pl_counts_rank_ok(p, -1, K)): the blocks ks[0..*nk) that are in some placement with the
 * least (blocks, racks, nodes), the leading components of the root's vector, are kept in
 * their order (*nk lowered), and each kept block's amounts in such placements lie in
 * jlo[i]..jhi[i]. The knapsack over the kept blocks, their tables holding only those amounts,
 * gives the same answer, ties and all: every option it loses is in no optimal placement, so
 * no entry on the optimum's chain changes value, and an entry only ever takes a strictly
 * better candidate, so no earlier one wins a tie. The knapsack over every block's full table
 * cost 30 ms on 10 blocks of 14 racks (bench/knap-repro); these counts are knapsacks on one
 * word, about a tenth of it, and leave 2 blocks there. The blocks'
 * counts come from their racks and nodes alone (block_counts), so this works on any fleet with
 * fewer than 2^13 blocks and 2^24 nodes; otherwise every block is kept with all its amounts.
 * 0 or an error. */
int tp_pl_span_window(struct pctx *p, struct kid *ks, uint32_t *nk, uint32_t K, uint32_t *jlo,
                      uint32_t *jhi)
{
	uint32_t n = *nk;
	for (uint32_t i = 0; i < n; i++) {
		jlo[i] = 1;
		jhi[i] = min32(K, ks[i].cap);
	}
	if (!n || n >= (1u << 13) || p->t->nnodes >= (1u << 24))
		return 0;
	struct amark m = tp_pl_ar_mark(p);
	size_t row = (size_t)K + 1;
	uint64_t *cb = tp_pl_ar_alloc(p, n * row * sizeof *cb);
	uint64_t *F = tp_pl_ar_alloc(p, ((size_t)n + 1) * row * sizeof *F);
	bool *on = tp_pl_ar_alloc(p, ((size_t)n + 1) * row * sizeof *on);
	uint32_t *lo = tp_pl_ar_alloc(p, n * sizeof *lo), *hi = tp_pl_ar_alloc(p, n * sizeof *hi);
	if (!cb || !F || !on || !lo || !hi) {
		tp_pl_ar_release(p, m);
		return TP_ENOMEM;
	}
	int rc = 0;
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = block_counts(p, ks[i].dom, jhi[i], cb + i * row);
	if (rc) {
		tp_pl_ar_release(p, m);
		return rc;
	}
	/* F[i][x]: the least counts of x devices on the blocks before i */
	for (uint32_t x = 0; x <= K; x++)
		F[x] = x ? PK_INF : 0;
	for (uint32_t i = 0; i < n; i++)
		row_fold(F + i * row, cb + i * row, jhi[i], F + (i + 1) * row, K);
	uint64_t opt = F[(size_t)n * row + K];
	/* Back from (n, K): on[i][x] when the blocks before i taking x at their least counts
	 * complete to the optimum. Every option reaching F[i + 1][x] from such a state is in an
	 * optimal placement, and every optimal placement passes only such states (a prefix above
	 * its least would leave the whole above the optimum). lo, hi: block i's amounts there. */
	memset(on, 0, ((size_t)n + 1) * row * sizeof *on);
	on[(size_t)n * row + K] = opt < PK_INF;
	for (uint32_t i = n; i-- > 0;) {
		const uint64_t *fi = F + i * row, *fn = F + (i + 1) * row, *ci = cb + i * row;
		bool *oi = on + i * row, *onx = on + (i + 1) * row;
		lo[i] = hi[i] = 0;
		for (uint32_t x = 0; x <= K; x++) {
			if (!onx[x])
				continue;
			oi[x] = oi[x] || fi[x] == fn[x];
			for (uint32_t j = 1; j <= min32(x, jhi[i]); j++)
				if (fi[x - j] + ci[j] == fn[x]) {
					oi[x - j] = true;
					lo[i] = lo[i] && lo[i] < j ? lo[i] : j;
					hi[i] = hi[i] > j ? hi[i] : j;
				}
		}
	}
	uint32_t kept = 0;
	for (uint32_t i = 0; i < n && opt < PK_INF; i++) {
		if (!lo[i])
			continue;
		ks[kept] = ks[i];
		jlo[kept] = lo[i];
		jhi[kept] = hi[i];
		kept++;
	}
	*nk = kept; /* none when nothing holds K: the blocks' capacities decide both knapsacks */
	tp_pl_ar_release(p, m);
	return 0;
}
