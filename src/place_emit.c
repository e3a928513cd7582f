/* SPDX-License-Identifier: MIT */
/*
 * Emission: the devices of the best placement, in rank order, deciding as the evaluation
 * does; and unconstrained requests filled tightest holes first.
 */
#include <stdlib.h>
#include <string.h>

#include "place_internal.h"

/* ---- emission: the devices, in rank order --------------------------------------------------- */

/* p->out is allocated once, before any arena mark, with room for the whole answer. */
static int out_push(struct pctx *p, uint32_t dev)
{
	if (p->nout == p->capout)
		return TP_ECORRUPT;
	p->out[p->nout++] = dev;
	return 0;
}

/* Usable GPUs below each PCIe switch of a node type (switch ids index sub[]). */
static void switch_counts(const struct tp_nodetype *nt, const bool *use, uint32_t *sub)
{
	memset(sub, 0, nt->nsw * sizeof *sub);
	for (unsigned g = 0; g < nt->ngpus; g++) {
		if (!use[g])
			continue;
		for (int s = nt->gpu_sw[g]; s >= 0; s = nt->sw_parent[s])
			sub[s]++;
	}
}

static bool below_switch(const struct tp_nodetype *nt, unsigned g, int sw)
{
	for (int s = nt->gpu_sw[g]; s >= 0; s = nt->sw_parent[s])
		if (s == sw)
			return true;
	return sw < 0;
}

static unsigned switch_depth(const struct tp_nodetype *nt, int sw)
{
	unsigned d = 0;
	for (; sw >= 0; sw = nt->sw_parent[sw])
		d++;
	return d;
}

/* The closest k usable GPUs of a node with PCIe switches: inside the smallest switch subtree
 * that holds k (the fewest switches, the lowest level first), GPUs whose own switch has the most
 * usable GPUs first, so that whole switches fill before a new one is opened. */
static void pick_closest(const struct tp_nodetype *nt, const bool *use, uint32_t k, bool *pick)
{
	uint32_t sub[TP_MAX_NODE_DEVICES];
	unsigned nsw = nt->nsw < TP_MAX_NODE_DEVICES ? nt->nsw : TP_MAX_NODE_DEVICES;
	switch_counts(nt, use, sub);
	int root = -1;
	for (unsigned s = 0; s < nsw; s++) {
		if (sub[s] < k)
			continue;
		if (root < 0 || sub[s] < sub[root] ||
		    (sub[s] == sub[root] && switch_depth(nt, (int)s) > switch_depth(nt, root)))
			root = (int)s;
	}
	memset(pick, 0, nt->ngpus * sizeof *pick);
	for (uint32_t got = 0; got < k;) {
		int bg = -1;
		uint32_t bs = 0;
		for (unsigned g = 0; g < nt->ngpus; g++) {
			if (!use[g] || pick[g] || !below_switch(nt, g, root))
				continue;
			int s = nt->gpu_sw[g];
			uint32_t own = s >= 0 && (unsigned)s < nsw ? sub[s] : 0;
			if (bg < 0 || own > bs) {
				bg = (int)g;
				bs = own;
			}
		}
		if (bg < 0)
			break;
		pick[bg] = true;
		got++;
	}
}

/* ---- choosing by the links: NVLink first ---------------------------------------------------
 *
 * Among the usable GPUs of a node whose type has NVLink figures, the k with the best NVLink
 * among them: the largest smallest pairwise figure, then the largest sum; then the fastest
 * slowest device (rule 4); then PCIe locality (the smallest sum of pairwise switch distances,
 * then the fewest pairs across packages); then NIC locality (the smallest sum of each GPU's
 * nearest-NIC rank); then the lowest indices. Exhaustive over the C(n, k) subsets while that is
 * at most LINK_EXHAUSTIVE_MAX (a few dozen GPUs at most per node: 8 GPUs give at most 70),
 * greedy otherwise (add the GPU that keeps the score best, lowest index on ties). Where NVLink
 * leaves every subset equal (an NVSwitch node: every pair the same figure), the PCIe rule
 * (pick_closest) decides as it did before. */

#define LINK_EXHAUSTIVE_MAX 4096

struct link_score {
	double nv_min, nv_sum, perf_min;
	uint64_t pcie, cross, nic;
};

/* Compare two scores: < 0 when x is better. */
static int link_cmp(const struct link_score *x, const struct link_score *y)
{
	const double dx[3] = {x->nv_min, x->nv_sum, x->perf_min};
	const double dy[3] = {y->nv_min, y->nv_sum, y->perf_min};
	for (unsigned i = 0; i < 3; i++)
		if (dx[i] != dy[i])
			return dx[i] > dy[i] ? -1 : 1;
	const uint64_t ux[3] = {x->pcie, x->cross, x->nic}, uy[3] = {y->pcie, y->cross, y->nic};
	for (unsigned i = 0; i < 3; i++)
		if (ux[i] != uy[i])
			return ux[i] < uy[i] ? -1 : 1;
	return 0;
}

/* Each GPU's nearest-NIC rank (0 for every GPU of a type without NICs). */
static void nic_ranks(const struct tp_nodetype *nt, uint32_t *rank)
{
	for (unsigned g = 0; g < nt->ngpus; g++) {
		uint32_t best = 0;
		for (unsigned n = 0; n < nt->nnic; n++) {
			uint32_t r = tp_nodetype_nic_rank(nt, g, n);
			best = n == 0 || r < best ? r : best;
		}
		rank[g] = best;
	}
}

/* The score of GPUs sel[0..m) of a node (local indices), perf from device base. */
static struct link_score link_score_of(const struct tp_topology *t, const struct tp_nodetype *nt,
                                       uint32_t base, const uint32_t *nic_rank,
                                       const uint32_t *sel, uint32_t m)
{
	struct link_score s = {m > 1 ? -1.0 : 0.0, 0.0, -1.0, 0, 0, 0};
	for (uint32_t i = 0; i < m; i++) {
		double pf = t->dev_perf[base + sel[i]];
		s.perf_min = s.perf_min < 0 || pf < s.perf_min ? pf : s.perf_min;
		s.nic += nic_rank[sel[i]];
		for (uint32_t j = i + 1; j < m; j++) {
			double g = nt->nvlink[(size_t)sel[i] * nt->ngpus + sel[j]];
			s.nv_min = s.nv_min < 0 || g < s.nv_min ? g : s.nv_min;
			s.nv_sum += g;
			s.pcie += (uint64_t)tp_nodetype_pcie_distance(nt, sel[i], sel[j]);
			int pa = nt->gpu_x[sel[i]].loc.package, pb = nt->gpu_x[sel[j]].loc.package;
			s.cross += pa >= 0 && pb >= 0 && pa != pb;
		}
	}
	return s;
}

/* C(n, k), saturated just above LINK_EXHAUSTIVE_MAX. */
static uint64_t choose_bounded(uint32_t n, uint32_t k)
{
	uint64_t c = 1;
	for (uint32_t i = 1; i <= k; i++) {
		c = c * (n - k + i) / i;
		if (c > LINK_EXHAUSTIVE_MAX)
			return LINK_EXHAUSTIVE_MAX + 1;
	}
	return c;
}

/* Exhaustive: the best k of the n usable GPUs g[], in lexicographic order of combinations (so
 * the first best has the lowest indices). */
static void links_exhaustive(const struct tp_topology *t, const struct tp_nodetype *nt,
                             uint32_t base, const uint32_t *rank, const uint32_t *g, uint32_t n,
                             uint32_t k, bool *pick)
{
	uint32_t ix[TP_MAX_NODE_DEVICES], sel[TP_MAX_NODE_DEVICES], best[TP_MAX_NODE_DEVICES];
	struct link_score bs = {0};
	bool have = false;
	for (uint32_t i = 0; i < k; i++)
		ix[i] = i;
	for (;;) {
		for (uint32_t i = 0; i < k; i++)
			sel[i] = g[ix[i]];
		struct link_score sc = link_score_of(t, nt, base, rank, sel, k);
		if (!have || link_cmp(&sc, &bs) < 0) {
			bs = sc;
			memcpy(best, sel, k * sizeof *sel);
			have = true;
		}
		uint32_t i = k;
		while (i-- > 0 && ix[i] == n - k + i)
			;
		if (i == UINT32_MAX)
			break;
		ix[i]++;
		for (uint32_t j = i + 1; j < k; j++)
			ix[j] = ix[j - 1] + 1;
	}
	for (uint32_t i = 0; i < k; i++)
		pick[best[i]] = true;
}

/* Greedy: grow the set one GPU at a time, each the one that keeps the score best. */
static void links_greedy(const struct tp_topology *t, const struct tp_nodetype *nt,
                         uint32_t base, const uint32_t *rank, const uint32_t *g, uint32_t n,
                         uint32_t k, bool *pick)
{
	uint32_t sel[TP_MAX_NODE_DEVICES];
	for (uint32_t m = 0; m < k; m++) {
		struct link_score bs = {0};
		uint32_t bi = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++) {
			if (pick[g[i]])
				continue;
			sel[m] = g[i];
			/* the first GPU is scored by the sum of its figures to every usable GPU */
			struct link_score sc =
			        m ? link_score_of(t, nt, base, rank, sel, m + 1)
			          : link_score_of(t, nt, base, rank, sel, 1);
			if (m == 0)
				for (uint32_t j = 0; j < n; j++)
					sc.nv_sum += nt->nvlink[(size_t)g[i] * nt->ngpus + g[j]];
			if (bi == UINT32_MAX || link_cmp(&sc, &bs) < 0) {
				bs = sc;
				bi = i;
			}
		}
		sel[m] = g[bi];
		pick[g[bi]] = true;
	}
}

/* Whether the NVLink figures of the usable GPUs g[0..n) differ at all (n >= 2). */
static bool nvlink_differs(const struct tp_nodetype *nt, const uint32_t *g, uint32_t n)
{
	double ref = nt->nvlink[(size_t)g[0] * nt->ngpus + g[1]];
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n; j++)
			if (nt->nvlink[(size_t)g[i] * nt->ngpus + g[j]] != ref)
				return true;
	return false;
}

/* Choose k of the usable GPUs by their links (see above). False, pick untouched, when every
 * usable pair has the same NVLink figure: the caller's PCIe rule decides. */
static bool pick_by_links(const struct tp_topology *t, const struct tp_nodetype *nt,
                          uint32_t base, const bool *use, uint32_t k, bool *pick)
{
	uint32_t g[TP_MAX_NODE_DEVICES], rank[TP_MAX_NODE_DEVICES], n = 0;
	for (unsigned i = 0; i < nt->ngpus; i++)
		if (use[i])
			g[n++] = i;
	if (n < 2 || !nvlink_differs(nt, g, n))
		return false;
	nic_ranks(nt, rank);
	memset(pick, 0, nt->ngpus * sizeof *pick);
	if (choose_bounded(n, k) <= LINK_EXHAUSTIVE_MAX)
		links_exhaustive(t, nt, base, rank, g, n, k, pick);
	else
		links_greedy(t, nt, base, rank, g, n, k, pick);
	return true;
}

static int perf_cmp_dev(const struct tp_topology *t, uint32_t a, uint32_t b)
{
	if (t->dev_perf[a] != t->dev_perf[b])
		return t->dev_perf[a] > t->dev_perf[b] ? -1 : 1;
	return (a > b) - (a < b);
}

/* Take k usable devices of a node, appended in index order. */
static int emit_node(struct pctx *p, uint32_t node, uint32_t k)
{
	const struct tp_topology *t = p->t;
	uint32_t list[TP_MAX_NODE_DEVICES];
	uint32_t n = tp_pl_node_usable(p, node, list);
	if (n < k)
		return TP_ECORRUPT;
	if (k == n) {
		/* the whole usable list, in index order: what every choice below gives when it must
		 * take all (a whole node, as groups of a node's size take) */
		for (uint32_t i = 0; i < n; i++) {
			int rc = out_push(p, list[i]);
			if (rc)
				return rc;
		}
		return 0;
	}
	uint32_t base = t->dev_first[node];
	bool use[TP_MAX_NODE_DEVICES] = {false}, pick[TP_MAX_NODE_DEVICES] = {false};
	uint16_t ty = t->node_type ? t->node_type[node] : TP_NO_TYPE;
	const struct tp_nodetype *nt = ty != TP_NO_TYPE ? t->types[ty] : NULL;
	bool typed = nt && nt->ngpus == tp_node_ndev(t, node) && k < n;
	for (uint32_t i = 0; typed && i < n; i++)
		use[list[i] - base] = true;
	bool linked = typed && nt->nvlink && k > 1 && pick_by_links(t, nt, base, use, k, pick);
	if (linked) {
		/* chosen by NVLink */
	} else if (typed && nt->nsw > 0) {
		pick_closest(nt, use, k, pick);
	} else {
		/* faster devices first (rule 4), then the lowest index: a selection sort over at
		 * most TP_MAX_NODE_DEVICES */
		for (uint32_t got = 0; got < k; got++) {
			uint32_t bi = UINT32_MAX;
			for (uint32_t i = 0; i < n; i++)
				if (!pick[list[i] - base] &&
				    (bi == UINT32_MAX || perf_cmp_dev(t, list[i], list[bi]) < 0))
					bi = i;
			pick[list[bi] - base] = true;
		}
	}
	uint32_t got = 0;
	for (uint32_t i = 0; i < n; i++)
		if (pick[list[i] - base]) {
			int rc = out_push(p, list[i]);
			if (rc)
				return rc;
			got++;
		}
	return got == k ? 0 : TP_ECORRUPT;
}




/* Emit the children of a level-l domain in tree order with their amounts. */
static int emit_takes(struct pctx *p, int l, struct take *tk, uint32_t n)
{
	tp_pl_takes_sort(tk, n);
	for (uint32_t i = 0; i < n; i++) {
		int rc = tp_pl_emit(p, l + 1, tk[i].dom, tk[i].amount, tk[i].col);
		if (rc)
			return rc;
	}
	return 0;
}

/* Choose m of the n nodes (largest first in ln, fewest free first among equal capacities)
 * that hold x units, tightest that still can: at each step the smallest node such that it and
 * the largest remaining others still cover the rest, and of the nodes of that capacity the
 * one with the fewest free devices (best fit among equals: the first of them in ln, which
 * covers the rest whenever a later one does). O(m * n). */
static int leaf_choose(struct pctx *p, struct lnode *ln, uint32_t n, uint32_t m, uint64_t x,
                       struct take *tk)
{
	bool *used = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *used);
	uint64_t *pre = tp_pl_ar_alloc(p, ((size_t)n + 1) * sizeof *pre);
	uint32_t *rank = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *rank);
	if (!used || !pre || !rank)
		return TP_ENOMEM;
	memset(used, 0, n * sizeof *used);
	uint64_t rem = x;
	if (n && ln[0].v == ln[n - 1].v) {
		/* all of one capacity (whole nodes of one size): every unused node covers the rest
		 * with the others, so each step below picks the first unused one, ln in order */
		for (uint32_t step = 0; step < m; step++) {
			uint64_t a = ln[step].v < rem ? ln[step].v : rem;
			tk[step] = (struct take){ln[step].node, (uint32_t)a, 0};
			rem -= a;
		}
		return rem == 0 ? 0 : TP_ECORRUPT;
	}
	for (uint32_t step = 0; step < m; step++) {
		uint32_t others = m - step - 1, nu = 0;
		pre[0] = 0;
		for (uint32_t j = 0; j < n; j++)
			if (!used[j]) {
				rank[j] = nu;
				pre[nu + 1] = pre[nu] + ln[j].v;
				nu++;
			}
		uint32_t pick = UINT32_MAX;
		for (uint32_t i = n; i-- > 0;) {
			if (used[i])
				continue;
			uint32_t o = others < nu - 1 ? others : nu - 1;
			uint64_t top = rank[i] < o ? pre[o + 1] - ln[i].v : pre[o];
			if (ln[i].v + top >= rem) {
				pick = i;
				break;
			}
		}
		if (pick == UINT32_MAX)
			return TP_ECORRUPT;
		for (uint32_t j = pick; j-- > 0 && ln[j].v == ln[pick].v;)
			if (!used[j])
				pick = j;
		used[pick] = true;
		uint64_t a = ln[pick].v < rem ? ln[pick].v : rem;
		tk[step] = (struct take){ln[pick].node, (uint32_t)a, 0};
		rem -= a;
	}
	return rem == 0 ? 0 : TP_ECORRUPT;
}

/* A leaf parent's part: the fewest nodes (best fit among them), in tree order. */
static int emit_leaf(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	struct amark mk = tp_pl_ar_mark(p);
	uint32_t n;
	struct lnode *ln = tp_pl_leaf_nodes(p, l, d, &n);
	if (!ln)
		return TP_ENOMEM;
	uint64_t x = k / p->u[p->nl], acc = 0;
	uint32_t m = 0;
	while (acc < x && m < n)
		acc += ln[m++].v;
	if (acc < x)
		return TP_ECORRUPT;
	struct take *tk = tp_pl_ar_alloc(p, (m ? m : 1) * sizeof *tk);
	int rc = tk ? leaf_choose(p, ln, n, m, x, tk) : TP_ENOMEM;
	if (!rc) {
		for (uint32_t i = 0; i < m; i++)
			tk[i].amount *= p->u[p->nl];
		rc = emit_takes(p, l, tk, m);
	}
	tp_pl_ar_release(p, mk);
	return rc;
}

/* A uniform domain's part: the fewest children (best fit among them), in tree order. */
static int emit_linear(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	unsigned cl = (unsigned)(l + 1);
	struct amark mk = tp_pl_ar_mark(p);
	uint32_t n;
	struct kid *ks = tp_pl_kids_of(p, l, d, p->u[cl], &n);
	struct lnode *ln = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *ln);
	if (!ln) {
		tp_pl_ar_release(p, mk);
		return TP_ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		ln[i] = (struct lnode){ks[i].dom, ks[i].cap / p->u[cl], ks[i].free};
	qsort(ln, n, sizeof *ln, tp_pl_lnode_cmp);
	uint64_t x = k / p->u[cl], acc = 0;
	uint32_t m = 0;
	while (acc < x && m < n)
		acc += ln[m++].v;
	struct take *tk = tp_pl_ar_alloc(p, (m ? m : 1) * sizeof *tk);
	int rc = acc < x ? TP_ECORRUPT : tk ? leaf_choose(p, ln, n, m, x, tk) : TP_ENOMEM;
	if (!rc) {
		for (uint32_t i = 0; i < m; i++)
			tk[i].amount *= p->u[cl];
		rc = emit_takes(p, l, tk, m);
	}
	tp_pl_ar_release(p, mk);
	return rc;
}

/* Emit the best placement of k devices inside (l, d), deciding as tp_pl_eval() does; col is the
 * spread column the caller counted on (colq(l) at the top). */
int tp_pl_emit(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col)
{
	if (k == 0)
		return 0;
	if (l == (int)p->nl)
		return emit_node(p, d, k);
	bool forced = forced_single(p, l, k);
	if (use_single(p, l, k, col, forced)) {
		uint32_t kid, best[W_MAX];
		/* a pinned domain's ancestor is the child (its evaluation is not needed again) */
		int r = tp_pl_pin_kid(p, l, k, &kid);
		if (r == 2)
			r = tp_pl_best_single(p, l, d, k, col, best, &kid);
		if (r < 0)
			return r;
		if (r)
			return tp_pl_emit(p, l + 1, kid, k, tp_pl_child_col(p, l, col));
		if (forced || p->sl == l + 1)
			return TP_ECORRUPT;
	} else if (forced) {
		return TP_ECORRUPT;
	}
	if (tp_pl_leaf_fast(p, l))
		return emit_leaf(p, l, d, k);
	if (tp_pl_linear_ok(p, l) && l >= 0 && tp_pl_uniform_node_dev(p, l, d))
		return emit_linear(p, l, d, k);
	if (l < 0 && p->root_kind == 2 && p->root_k == k && p->root_col == col) {
		struct take *tk = tp_pl_ar_alloc(p, (p->root_nplan ? p->root_nplan : 1) * sizeof *tk);
		if (!tk)
			return TP_ENOMEM;
		memcpy(tk, p->root_plan, p->root_nplan * sizeof *tk);
		return emit_takes(p, l, tk, p->root_nplan);
	}
	if (l < 0 && tp_pl_dual_ok(p)) {
		struct amark dm = tp_pl_ar_mark(p);
		uint32_t cost[W_MAX], ntk;
		struct take *tk;
		int r = tp_pl_root_dual(p, k, cost, &tk, &ntk);
		if (r == 1)
			r = emit_takes(p, l, tk, ntk);
		else if (r == 0)
			r = TP_ECORRUPT;
		tp_pl_ar_release(p, dm);
		if (r != 2)
			return r;
	}
	struct amark m = tp_pl_ar_mark(p);
	struct knap kn;
	unsigned cl = (unsigned)(l + 1);
	uint32_t J = k / p->u[cl];
	int rc = tp_pl_knap_run(p, l, d, J, J, true, &kn);
	if (rc) {
		tp_pl_ar_release(p, m);
		return rc;
	}
	unsigned s = kn.ns == nsl(p, l) ? col : 0;
	if (c_inf(tb_at(p, &kn.tb, J, s))) {
		tp_pl_ar_release(p, m);
		return TP_ECORRUPT;
	}
	struct take *tk = tp_pl_ar_alloc(p, (kn.nk ? kn.nk : 1) * sizeof *tk);
	if (!tk) {
		tp_pl_ar_release(p, m);
		return TP_ENOMEM;
	}
	uint32_t j;
	uint32_t nt = tp_pl_knap_takes(&kn, J, s, p->u[cl], tk, &j);
	rc = j == 0 ? emit_takes(p, l, tk, nt) : TP_ECORRUPT;
	tp_pl_ar_release(p, m);
	return rc;
}

uint32_t tp_pl_knap_takes(const struct knap *kn, uint32_t J, unsigned s, uint32_t unit,
                          struct take *tk, uint32_t *left)
{
	uint32_t nt = 0, j = J;
	size_t stride = ((size_t)J + 1) * kn->ns;
	for (uint32_t i = kn->nk; i-- > 0;) {
		size_t at = (size_t)i * stride + (size_t)j * kn->ns + s;
		uint32_t j2 = kn->cj[at];
		if (!j2)
			continue;
		tk[nt++] = (struct take){kn->ks[i].dom, j2 * unit, kn->cc[at]};
		s = kn->cs[at];
		j -= j2;
	}
	*left = j;
	return nt;
}

/* ---- unconstrained requests: tightest holes first ------------------------------------------- */

/* Fill k devices into (l, d): the tightest child that holds everything, else children from
 * the tightest up. Returns 1 (emitted), 0 (cannot) or an error. */
int tp_pl_fill(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	if (l == (int)p->nl)
		return emit_node(p, d, k) ? TP_ECORRUPT : 1;
	if (l < 0 && tp_pl_root_indexed(p)) {
		JError_t je;
		Word_t key = (Word_t)k << 32;
		for (int r = Judy1First(p->c->index[0], &key, &je); r == 1;
		     r = Judy1Next(p->c->index[0], &key, &je)) {
			uint32_t dom = (uint32_t)(key & 0xffffffffu);
			if (tp_pl_capd(p, 0, dom) >= k)
				return tp_pl_fill(p, 0, dom, k);
		}
	}
	struct amark m = tp_pl_ar_mark(p);
	uint32_t n, dom;
	struct kid *ks;
	int rc;
	if (tp_pl_tightest_kid(p, l, d, k, &dom)) {
		tp_pl_ar_release(p, m);
		return tp_pl_fill(p, l + 1, dom, k);
	}
	if (p->err || forced_single(p, l, k)) {
		tp_pl_ar_release(p, m);
		return p->err ? p->err : 0;
	}
	ks = tp_pl_kids_of(p, l, d, p->u[l + 1], &n);
	struct take *tk = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *tk);
	if (!tk) {
		tp_pl_ar_release(p, m);
		return TP_ENOMEM;
	}
	uint32_t nt = 0, rem = k;
	for (uint32_t i = 0; i < n && rem; i++) {
		uint32_t a = min32(ks[i].cap, rem);
		tk[nt++] = (struct take){ks[i].dom, a, 0};
		rem -= a;
	}
	if (rem) {
		tp_pl_ar_release(p, m);
		return 0;
	}
	tp_pl_takes_sort(tk, nt);
	rc = 1;
	for (uint32_t i = 0; i < nt && rc == 1; i++)
		rc = tp_pl_fill(p, l + 1, tk[i].dom, tk[i].amount);
	tp_pl_ar_release(p, m);
	return rc;
}
