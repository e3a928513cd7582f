/* SPDX-License-Identifier: MIT */
/*
 * The constraint solver: the entry of tp_place and the set-up of a call (the model it
 * solves, below; the files place_*.c hold its parts, place_internal.h their context).
 *
 * Model. A request of `count` devices is cut, level by level, into *units*: u[l] is the number
 * of devices every domain of level l must hold a multiple of (the group size at and above the
 * group level, each slice size at and above its slice level; sizes divide, so u[l] is their
 * largest). Holding a multiple of u[l] in every domain of every level is exactly what makes
 * groups and slices expressible: with devices ordered domain by domain in tree order, every run
 * of a group or slice then falls inside one domain. A domain's *capacity* capd(l, d) is the most
 * devices of this request it can take: free usable devices per node (cut to node caps and to
 * multiples of u[node]), summed up the tree, cut at every level to the level's cap and to a
 * multiple of u[l]. Every multiple of u[l] up to the capacity can then be taken, so capacities
 * alone decide feasibility.
 *
 * Objective (spec rule 1, then rule 3 refined). A placement costs the vector
 *     (domains used at level 0, ..., at the node level,
 *      the mix's loss (only when the cluster has a placement mix),
 *      free devices of the used domains summed at level 0, ..., at the node level)
 * compared lexicographically. The first part is rule 1 (fewest domains level by level from the
 * top). The second is rule 3 as this solver refines it: the job mix the cluster protects
 * (tp_cluster_set_place_mix: shapes of d devices inside one domain of a level L, weight w; a
 * new cluster has none, so the vector is then rule 1 and best fit as in 0.3) loses, for each used domain D of level L that the
 * placement takes t of its f free devices from, w * d * (floor(f / d) - floor((f - t) / d))
 * summed over D's shapes: the whole jobs of the mix that D could still start. This is the
 * workload figure of tp_frag_report made incremental, and FGD's idea (Weng et al., USENIX ATC
 * '23: score a choice by how much it lowers the expected capacity for the job mix) extended
 * to every level: FGD scores one node's GPUs; here each shape is charged at the level that
 * must hold it whole (a 36-GPU job at the rack, a 4-GPU job at the node), so a placement that
 * keeps a rack's half free is preferred to one that keeps its free count lowest. The loss is
 * a function of one domain's free count before and after, so the cost stays additive over the
 * tree; it reads c->free of the domains a candidate touches, never a scan. The last part is
 * best fit (the tightest domains, the highest level first), which breaks the ties the mix
 * leaves; for a request one domain of a level must hold (without a mix) place_choice.c
 * chooses that domain first, the tightest of its level, and pins it for the search above. The cost is additive over the tree and lexicographic order on integer vectors is
 * translation-invariant, so min-plus dynamic programming over the tree is exact:
 *     f_D(k) = self(D, k) + min over k = sum k_c of sum_c f_c(k_c)   (f_c(0) = 0)
 * a knapsack over the children of D with vector costs ("tables", one entry per unit amount).
 *
 * Where the mix is not exact. The single-child search stops at the first child that meets
 * the count bound and the mix's lower bound (tp_pl_mix_bound: per level, a small knapsack of
 * the least loss s * floor(t / s) over the parts the counts allow); a child whose own loss plus
 * the bound below cannot beat the best is skipped unevaluated; past the first child that meets
 * the count bound at most MIX_LOOKAHEAD (8) more are evaluated when the mix's bound is not
 * met, so on a large cluster the mix decides among the tightest candidates, not all (a bounded
 * look-ahead that keeps a call far from a scan). Leaf parents and uniform subtrees keep their
 * fast paths and charge the loss of the prefix they count (the largest children whole, the
 * last in part), which emission's tightest choice may beat or miss. The top-level dual (wide
 * requests spread over several top-level domains) counts domains only. Failure-domain
 * searches are exact for rule 1 only. On the oracle's tiny clusters (at most a few nodes per
 * domain) none of these limits binds and the test mix_loss_is_least_among_rule12_optima checks
 * the loss is the least among the rule-1/2 optima.
 *
 * Rule 4 refined (request.comm, place_step.c). The modelled step time of the whole job
 * (tp_cost_step_us over the devices emission would give) is not additive, so it is no part of
 * the vector: in the single-child search, once the best candidate meets its bounds, the
 * children that tie with it on the whole vector (the same free count first: they come
 * tightest first) are compared by the step time of the job placed inside them, at most
 * STEP_TIES (4) per search, and the fastest wins; a tie found earlier is compared the same way.
 * It applies only where one child holds the whole job (never inside a knapsack) and never
 * overrides an earlier rule. Without comm nothing changes (the lowest index wins a tie).
 *
 * Rule 2 (balanced) is not additive (a minimum), so it is handled as constraints: with the
 * rule-1 optimum c* known, for each level from the top where c* uses >= 2 domains, a binary
 * search finds the largest lower bound T such that a placement with every used domain of that
 * level holding >= T devices still has domain counts c*; the bound is then kept for the levels
 * below. A tree `spread` adds a second table dimension: min(S, domains of the spread level).
 *
 * Fast paths (what keeps ordinary requests far from a cluster scan):
 *   - Single child. If one child of D can hold all k, the optimum uses exactly one child (one
 *     domain at level l+1 is the least possible), so f_D(k) = self + min over such children
 *     of f_c(k): a point query, no table. Children are tried tightest first (the cluster's
 *     Judy1 index at the top, walked lazily; a sort of the children below) and the search
 *     stops at the first child that reaches the absolute lower bound of every count (one
 *     domain at l+1, ceil(k / largest domain) below): no other child can beat it on rule 1,
 *     and a looser one cannot beat it on best fit. A child level whose unit (group or slice)
 *     is the whole amount, or a required or colocate level, forces a single child.
 *   - Leaf parents. For a domain whose children are nodes, the fewest nodes that hold k is the
 *     shortest prefix of the node capacities sorted in decreasing order: every table entry in
 *     O(n log n) for the domain, no knapsack.
 *   - Uniform subtrees. When every usable node below a domain two levels above the node holds
 *     the same number of devices and that divides the units above, node counts are forced
 *     (amount / node size), and the fewest children for an amount is a prefix of the children
 *     sorted by capacity: O(c log c), no knapsack.
 *   - Wide spreads at the top (root_dual): with two levels below the top, or three with uniform
 *     nodes, rule 1 is (top-level domains t, their children r); t is greedy on capacities, and
 *     r comes from a knapsack over (domains used, children used) -> devices covered, run only
 *     over the t best domains for each child count (a swap argument shows no other domain is
 *     needed), so its size does not grow with the cluster. Without filters it reads each
 *     top-level domain's children from the histograms in one pass (place_dual.c: no per-child
 *     call, counting sorts, the top count found from the largest free counts down), the same
 *     numbers the general path computes, checked against it in tests/place/test_dual.c.
 *   - Capacities above the node come from the cluster's per-domain histograms of node free
 *     counts when no filter (select, exclusivity, colocate, allow-list) applies; with filters
 *     nodes are walked (and memoised per call). The root's decision is kept between the
 *     evaluation and the emission.
 *
 * Complexity, for a request of K units at domain D with c children: a point query costs the
 * point queries of the children that can hold K, stopping at the first that meets the bound; a
 * generic table costs O(c * K * min(K, cap_c)) vector operations (times (S+1)^2 with a tree
 * spread) plus the children's tables. Required and preferred requests that fit one domain
 * never build a table above the domain that holds them; the top-level dual costs one pass over
 * the top-level domains and their children plus O(t^2 * m^3) (m: most children of a domain).
 * Not covered by a fast path, and so O(c * K^2) at the top: balanced requests that spread over
 * several top-level domains, a spread at a tree level, non-uniform three-level trees (groups of
 * 1 over partly used nodes) and four or more levels. Any request also pays O(running jobs) to
 * find the domains other tenants hold exclusively (see the report: the cluster should keep that
 * set). Rank order: devices are emitted domain by domain in tree order (children in index
 * order, devices of a node in index order, the closest set on nodes with PCIe switches), so at
 * every level each domain is one contiguous run, and groups and slices are runs inside one
 * domain because every domain holds whole units.
 *
 * GPU+NIC pairs (request.gpu_nic_pairs) change only what a node can give: its usable devices
 * are the usable GPUs that a maximum matching to distinct nearest NICs covers (node_pairable,
 * place_pairs.c), so every rule above applies unchanged. Such a request is a filtered one (node
 * capacities come from walking the nodes, as with `select`); the result records each rank's
 * NIC (pair_result), matched again over the final device list of each node. NICs that running
 * pairs jobs hold (cluster dev_nic) are blocked before matching, by the same rule the cluster
 * applies when it commits the result (cluster.c, job_nics), so the NICs reported are the ones
 * the job then holds.
 *
 * Failure-domain caps and spread are not tree-shaped. The tree solver answers first; if its
 * answer breaks them, an exhaustive search (exact for rule 1) runs when at most 16 nodes have
 * free capacity, else a greedy fill (groups of the node level, no slices) that honours them
 * without rule 1's guarantee. A groups cap on a level below the group level is first tried as
 * k * g devices and checked on the rank order; if that breaks it, (k - 1) * g + 1 devices (safe
 * for any alignment, not always optimal).
 *
 * Threading: tp_place and tp_replace only read the cluster; scratch memory comes from the
 * cluster's allocator (a per-call arena) and per-call Judy arrays; messages go to the result.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "place_internal.h"

/* ---- per-call scratch memory: an arena of chunks from the cluster's allocator ------------ */

void *tp_pl_ar_alloc(struct pctx *p, size_t n)
{
	n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
	struct chunk *c = p->ar;
	if (!c || c->cap - c->used < n) {
		size_t cap = c ? c->cap * 2 : 16384;
		if (cap > ((size_t)1 << 26))
			cap = (size_t)1 << 26;
		if (cap < n)
			cap = n;
		struct chunk *nc = tp_malloc(p->a, sizeof *nc + cap);
		if (!nc) {
			p->err = TP_ENOMEM;
			return NULL;
		}
		nc->prev = c;
		nc->cap = cap;
		nc->used = 0;
		p->ar = c = nc;
	}
	void *r = (char *)c->data + c->used;
	c->used += n;
	return r;
}
struct amark tp_pl_ar_mark(const struct pctx *p)
{
	return (struct amark){p->ar, p->ar ? p->ar->used : 0};
}
void tp_pl_ar_release(struct pctx *p, struct amark m)
{
	while (p->ar != m.cur) {
		struct chunk *prev = p->ar->prev;
		tp_free(p->a, p->ar);
		p->ar = prev;
	}
	if (p->ar)
		p->ar->used = m.used;
}
/* ---- setting up a call ---------------------------------------------------------------------- */

/* Domains of levels <= level that contain one of the given nodes. */
static void scope_add_node(struct pctx *p, uint32_t node, int level)
{
	for (int l = level; l >= 0; l--)
		j1_set(p, &p->scope[l], tp_node_ancestor(p->t, node, (unsigned)l));
}

static void build_scope(struct pctx *p)
{
	const struct tp_rq *q = p->q;
	const struct tp_cluster *c = p->c;
	const struct tp_job_impl *target = q->colocate_slot != TP_NO_JOB_SLOT
	                                       ? job_at(c, q->colocate_slot) : NULL;
	if (target && q->colocate_level >= 0) {
		p->colevel = q->colocate_level;
		for (uint32_t i = 0; i < target->ndev; i++)
			scope_add_node(p, p->t->dev_node[target->devs[i]], p->colevel);
	}
	if (!q->has_nodes)
		return;
	Pvoid_t co = p->colevel >= 0 ? p->scope[p->colevel] : NULL;
	Pvoid_t keep[TP_MAX_LEVELS] = {NULL};
	for (unsigned l = 0; l < p->nlev; l++) {
		keep[l] = p->scope[l];
		p->scope[l] = NULL;
	}
	for (size_t i = 0; i < q->nnodes; i++) {
		uint32_t node = q->nodes[i];
		if (co && !j1_test(co, tp_node_ancestor(p->t, node, (unsigned)p->colevel)))
			continue;
		scope_add_node(p, node, (int)p->nl);
	}
	/* an empty allow-list still restricts: mark the node level as present */
	if (!p->scope[p->nl])
		j1_set(p, &p->scope[p->nl], (Word_t)UINT32_MAX + 1);
	for (unsigned l = 0; l < p->nlev; l++)
		j1_free(&keep[l]);
	p->allow_list = true;
}

/* Domains that running jobs of other tenants hold exclusively (their shape's `exclusive`);
 * only the colocate target's when `only_target` (every other job imagined gone). */
void tp_pl_build_xbad(struct pctx *p, bool only_target)
{
	const struct tp_cluster *c = p->c;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		j1_free(&p->xbad[l]);
	p->have_xbad = false;
	/* Jobs are scanned only when some running job holds its domains exclusively. */
	for (size_t j = 0; c->nexclusive && j < c->njobs; j++) {
		const struct tp_job_impl *job = c->jobs[j];
		if (!job || j == p->self_slot || !job->shape || !job->shape->exclusive)
			continue;
		if (only_target && j != p->q->colocate_slot)
			continue;
		if (strcmp(job->tenant, p->q->tenant) == 0)
			continue;
		int l = tp_topology_level_index(p->t, job->shape->exclusive);
		if (l < 0)
			continue;
		for (uint32_t i = 0; i < job->ndev; i++)
			j1_set(p, &p->xbad[l], tp_node_ancestor(p->t, p->t->dev_node[job->devs[i]],
			                                        (unsigned)l));
		p->have_xbad = true;
	}
}

static void set_units(struct pctx *p)
{
	const struct tp_rq *q = p->q;
	tp_rq_level_units(q, p->nlev, p->u);
	for (unsigned l = 0; l < p->nlev; l++) {
		p->capdev[l] = q->capdev[l];
		/* A groups cap below the group level, where a group may touch several domains. First
		 * try k * g devices (what k aligned groups hold; nothing when k covers every group),
		 * and verify the answer; if the rank order breaks it, a run of (k - 1) * g + 1
		 * devices touches at most k groups whatever its alignment. */
		uint32_t k = q->capgrp[l];
		if (k != TP_RQ_NOCAP && (uint64_t)k * q->gsize < q->count) {
			uint64_t lim = p->capgrp_safe ? (uint64_t)(k ? k - 1 : 0) * q->gsize + (k ? 1 : 0)
			                              : (uint64_t)k * q->gsize;
			p->capdev[l] = min32(p->capdev[l], lim > UINT32_MAX ? UINT32_MAX : (uint32_t)lim);
		}
	}
	const struct tp_cluster *c = p->c;
	for (uint32_t k = 0; k < c->hstride && k <= TP_MAX_NODE_DEVICES; k++)
		p->nodecap[k] = floor_to(min32(k, p->capdev[p->nl]), p->u[p->nl]);
	tp_pl_capk_derive(p);
	for (unsigned l = 0; l < p->nl; l++) {
		p->hist_ok[l] = c->hist[l] != NULL;
		for (unsigned x = l + 1; x < p->nl; x++)
			if (p->u[x] != p->u[p->nl] || p->capdev[x] != TP_RQ_NOCAP)
				p->hist_ok[l] = false;
	}
}

void tp_pl_ctx_fini(struct pctx *p)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		j1_free(&p->scope[l]);
		j1_free(&p->xbad[l]);
		jl_free(&p->used[l]);
	}
	j1_free(&p->sbad);
	j1_free(&p->fbad);
	j1_free(&p->xknown);
	j1_free(&p->xdirty);
	j1_free(&p->extra_down);
	j1_free(&p->taken);
	jl_free(&p->memo);
	tp_free(p->a, p->root_plan);
	p->root_plan = NULL;
	p->root_kind = 0;
	tp_pl_ar_release(p, (struct amark){NULL, 0});
}

/* The mix's shapes by level, and the cost vector's layout (counts, the mix's loss when there
 * is a mix, best fit). Shapes larger than every domain of their level can never lose. */
static void set_mix(struct pctx *p)
{
	struct tp_place_shape sh[TP_PLACE_MIX_MAX];
	unsigned n = tp_place_mix(p->c, sh);
	for (unsigned i = 0; i < n; i++) {
		unsigned l = sh[i].level;
		uint32_t md = p->t->lv[l].max_devices ? p->t->lv[l].max_devices : UINT32_MAX;
		if (l >= p->nlev || sh[i].devices > md)
			continue;
		p->mix_dev[l][p->nmix[l]] = sh[i].devices;
		p->mix_m[l][p->nmix[l]] = ((UINT64_C(1) << 32) + sh[i].devices - 1) / sh[i].devices;
		p->mix_w[l][p->nmix[l]++] = sh[i].weight;
		p->mix_on = true;
	}
	p->fb = p->nlev + (p->mix_on ? 1 : 0);
	p->W = p->fb + p->nlev;
}

/* Set up a call for request q. self_slot: the job being repaired (TP_NO_JOB otherwise). */
int tp_pl_ctx_init(struct pctx *p, const struct tp_cluster *c, const struct tp_rq *q,
                   uint32_t self_slot)
{
	memset(p, 0, PCTX_CLEARED);
	p->ncapk = 0;
	p->dec_level = INT_MAX;
	p->c = c;
	p->t = c->t;
	p->q = q;
	p->a = &c->alloc;
	p->nlev = c->t->nlevels;
	p->nl = p->nlev - 1;
	set_mix(p);
	p->self_slot = self_slot;
	p->colevel = -1;
	p->excl = q->exclusive;
	p->sl = -1;
	set_units(p);
	if (q->spread_level >= 0 && q->spread_min >= 2) {
		p->sl = q->spread_level;
		p->S = q->spread_min;
	}
	p->single_to = q->required;
	if (q->colocate_slot != TP_NO_JOB_SLOT && q->colocate_level > p->single_to)
		p->single_to = q->colocate_level;
	p->compact = q->required >= 0 || q->preferred >= 0 || q->nslices > 0 || p->sl >= 0;
	/* One device, or one group, without a required level: one domain of the group's level (a
	 * node unless group_level says otherwise) must hold it anyway, so where the node is the
	 * NVLink domain (HGX, PCIe nodes, mixed fleets) it is placed as required there
	 * (place_choice.c: the tightest such domain of the fleet). Not under NVL72-style racks:
	 * there the tree order (tightest rack first) measured better on llm / nvl72:10080
	 * (docs/benchmarks.md, session 26). */
	bool one_group = q->gsize == q->count && q->count > 0;
	if (!p->compact && one_group && q->colocate_slot == TP_NO_JOB_SLOT &&
	    !tp_cl_nvlink_rack_devices(c->t)) {
		p->single_to = (int)q->glevel;
		p->compact = true;
	}
	build_scope(p);
	tp_pl_build_xbad(p, false);
	tp_pl_build_sbad(p, true);
	p->pairs = q->pairs;
	p->part_mode = self_slot != TP_NO_JOB && c->part_level >= 0 ? 2 : 0; /* a repair: strict */
	p->filtered = q->has_model || q->min_perf > 0 || q->min_mem > 0 || q->has_nodes ||
	              q->exclusive >= 0 || p->have_xbad || p->colevel >= 0 || q->pairs || p->sbad ||
	              p->fbad || p->part_mode > 0;
	p->out = NULL;
	return p->err;
}

int tp_pl_out_alloc(struct pctx *p, size_t n)
{
	p->out = tp_pl_ar_alloc(p, (n ? n : 1) * sizeof *p->out);
	p->capout = n;
	p->nout = 0;
	return p->out ? 0 : TP_ENOMEM;
}

/* ---- rule 2: the largest smallest share, level by level from the top ------------------------ */

static bool same_counts(const struct pctx *p, const uint32_t *a, const uint32_t *b)
{
	return memcmp(a, b, p->nlev * sizeof *a) == 0;
}

static int balance(struct pctx *p, uint32_t k, const uint32_t *best)
{
	uint32_t cstar[W_MAX], tmp[W_MAX];
	memcpy(cstar, best, p->W * sizeof *cstar);
	for (unsigned l = 0; l < p->nl; l++) {
		if (cstar[l] < 2)
			continue;
		uint32_t u = p->u[l];
		uint32_t lo = 1, hi = k / cstar[l] / u; /* in units; lo is always met */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo + 1) / 2;
			p->lb[l] = mid * u;
			p->root_kind = 0;
			int r = tp_pl_eval(p, -1, 0, k, colq(p, -1), tmp);
			if (r < 0)
				return r;
			if (r && same_counts(p, tmp, cstar))
				lo = mid;
			else
				hi = mid - 1;
		}
		p->lb[l] = lo * u;
		p->bal_active = p->bal_active || lo > 1;
	}
	p->root_kind = 0;
	return 0;
}

/* ---- the solver's entry point for one request ----------------------------------------------- */

/* Whether the groups caps below the group level hold for the rank order in p->out. */
static bool capgrp_ok(struct pctx *p)
{
	const struct tp_rq *q = p->q;
	bool ok = true;
	for (unsigned l = 0; l < p->nlev && ok; l++) {
		if (q->capgrp[l] == TP_RQ_NOCAP)
			continue;
		Pvoid_t cnt = NULL;
		for (size_t r = 0; r < p->nout && ok; r += q->gsize)
			for (size_t x = r; x < r + q->gsize && x < p->nout && ok; x++) {
				uint32_t a = tp_node_ancestor(p->t, p->t->dev_node[p->out[x]], l);
				bool seen = false;
				for (size_t y = r; y < x && !seen; y++)
					seen = tp_node_ancestor(p->t, p->t->dev_node[p->out[y]], l) == a;
				if (!seen) {
					jl_add(p, &cnt, a, 1);
					ok = jl_get(cnt, a) <= q->capgrp[l];
				}
			}
		jl_free(&cnt);
	}
	return ok;
}

static int solve_tree(struct pctx *p, uint32_t k);

/* Place q->count devices (k): 1 with p->out filled, 0 when impossible, or an error. */
static int solve(struct pctx *p, uint32_t k)
{
	int r = solve_tree(p, k);
	if (r == 1 && !p->capgrp_safe && !capgrp_ok(p)) {
		p->capgrp_safe = true;
		set_units(p);
		jl_free(&p->memo);
		p->root_kind = 0;
		r = solve_tree(p, k);
	}
	return r;
}

static int solve_tree(struct pctx *p, uint32_t k)
{
	uint32_t best[W_MAX];
	int r;
	p->nout = 0;
	if (p->compact) {
		r = tp_pl_pin_choose(p, k);
		if (r < 0)
			return r;
		r = tp_pl_eval(p, -1, 0, k, colq(p, -1), best);
		if (r == 1 && p->q->balanced) {
			int e = balance(p, k, best);
			if (e)
				return e;
		}
		if (r == 1) {
			int e = tp_pl_emit(p, -1, 0, k, colq(p, -1));
			if (e)
				return p->err ? p->err : e;
		}
	} else {
		r = tp_pl_fill(p, -1, 0, k);
	}
	if (r < 0 || !tp_pl_has_fd_rules(p->q))
		return r;
	if (r == 1) {
		bool ok;
		if (tp_pl_fd_check(p, p->out, p->nout, &ok))
			return p->err;
		if (ok)
			return 1;
	}
	struct amark m = tp_pl_ar_mark(p);
	r = tp_pl_fd_search(p, k);
	tp_pl_ar_release(p, m);
	if (r != 2)
		return r;
	r = tp_pl_fd_fill(p, -1, 0, k);
	return r == 2 ? 0 : r;
}

/* Whether k devices could be placed at all on (l, d): capacities only (balance never makes a
 * request infeasible). */
int tp_pl_feasible(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	if (l >= 0 && tp_pl_capd(p, (unsigned)l, d) < k)
		return 0;
	if (l == (int)p->nl)
		return 1;
	if (forced_single(p, l, k)) {
		if (p->sl == l + 1)
			return 0;
		struct amark m = tp_pl_ar_mark(p);
		uint32_t n;
		struct kid *ks = tp_pl_kids_of(p, l, d, k, &n);
		int r = p->err;
		for (uint32_t i = 0; i < n && !r; i++)
			r = tp_pl_feasible(p, l + 1, ks[i].dom, k);
		tp_pl_ar_release(p, m);
		return r;
	}
	struct amark m = tp_pl_ar_mark(p);
	uint32_t n;
	struct kid *ks = tp_pl_kids_of(p, l, d, 1, &n);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += ks[i].cap;
	int r = p->err ? p->err : sum >= k;
	tp_pl_ar_release(p, m);
	if (r != 1 || p->sl < 0 || p->sl <= l)
		return r;
	/* spread: at least S domains of the spread level with a unit each */
	uint32_t first = 0, cnt = p->t->lv[p->sl].ndom;
	if (l >= 0) {
		uint32_t f, nn;
		tp_dom_nodes(p->t, (unsigned)l, d, &f, &nn);
		first = tp_node_ancestor(p->t, f, (unsigned)p->sl);
		cnt = tp_node_ancestor(p->t, f + nn - 1, (unsigned)p->sl) + 1 - first;
	}
	uint32_t have = 0;
	for (uint32_t x = first; x < first + cnt && have < p->S; x++)
		have += tp_pl_capd(p, (unsigned)p->sl, x) > 0;
	return have >= p->S && (uint64_t)p->S * p->u[p->sl] <= k;
}

/* A tree spread no placement can meet, known before any table is sized by its minimum S:
 * S domains that each hold a unit need more devices than the request has, or the level has
 * fewer than S domains. Writes the reason to why (TP_ERRMSG_LEN bytes). */
static bool spread_unmeetable(const struct pctx *p, char *why)
{
	if (p->sl < 0)
		return false;
	const struct tp_level_impl *lv = &p->t->lv[p->sl];
	uint64_t need = (uint64_t)p->S * p->u[p->sl];
	if (need > p->q->count) {
		snprintf(why, TP_ERRMSG_LEN,
		         "infeasible: request.spread.min_domains %u needs at least %llu devices (%u in "
		         "each %s), the request has %u", p->S, (unsigned long long)need, p->u[p->sl],
		         lv->name, p->q->count);
		return true;
	}
	if (p->S > lv->ndom) {
		snprintf(why, TP_ERRMSG_LEN,
		         "infeasible: request.spread.min_domains %u is more than the %u domains of %s",
		         p->S, lv->ndom, lv->name);
		return true;
	}
	return false;
}

static int place_run(tp_placement *pl, const struct tp_cluster *c, const struct tp_rq *q,
                     int part_mode, char *pwhy)
{
	struct pctx p;
	char why[TP_ERRMSG_LEN];
	int rc = tp_pl_ctx_init(&p, c, q, TP_NO_JOB);
	if (part_mode) {
		p.part_mode = part_mode;
		p.filtered = true;
	}
	/* More devices than the cluster has can never fit: explain the failure without sizing the
	 * answer's buffers by a count that may be near 2^32. Nor can a spread over more domains
	 * than the request or the level has (and its tables would be sized by it). */
	bool too_big = q->count > c->t->ndevices;
	bool unmeetable = !rc && spread_unmeetable(&p, why);
	if (!rc && !too_big && !unmeetable)
		rc = tp_pl_out_alloc(&p, q->count);
	if (!rc && q->box_level >= 0) {
		int r = too_big ? 0 : tp_pl_grid_solve(&p, why);
		pl->grid_words = p.grid_words;
		pl->grid_probes = p.grid_probes;
		if (r == 1)
			rc = tp_pl_finish_ok(pl, &p, p.out, p.nout);
		else if (r == 0)
			rc = tp_seterr(pl->errmsg, TP_EINFEASIBLE, "infeasible: request.box needs %u "
			               "devices, the cluster has %u", q->count, c->t->ndevices);
		else if ((rc = r) == TP_EINFEASIBLE || rc == TP_EBUSY || rc == TP_EFRAGMENTED)
			snprintf(pl->errmsg, TP_ERRMSG_LEN, "%s", why);
	} else if (!rc) {
		int r = too_big || unmeetable ? 0 : solve(&p, q->count);
		if (r == 1) {
			rc = tp_pl_finish_ok(pl, &p, p.out, p.nout);
			if (!rc)
				rc = tp_pl_part_result(pl, &p, p.out, p.nout, pwhy);
		}
		else if (r == 0)
			rc = tp_pl_explain_failure(pl, &p, q->count, q->count, q->required,
			                           unmeetable ? 0 : -1);
		else
			rc = r;
		if (rc == TP_EINFEASIBLE && unmeetable)
			snprintf(pl->errmsg, TP_ERRMSG_LEN, "%s", why);
	}
	if (p.err)
		rc = p.err;
	if (rc == TP_ECORRUPT)
		tp_seterr(pl->errmsg, rc, "internal error: the solver's answer did not add up");
	tp_pl_ctx_fini(&p);
	return rc;
}

/* Place with the NVLink partition rules. The first pass ignores them (an ordinary request
 * stays unfiltered: nothing is scanned); an answer that breaks them is placed again with
 * other tenants' partitions left out, and an answer that still breaks them once more with
 * every node a partition could not use left out (the answer is then the best of what the
 * rules allow, not always the best overall: docs/concepts.md). A failure of a later pass says
 * what the rules took away. */
int tp_pl_place_parts(tp_placement *pl, const struct tp_cluster *c, const struct tp_rq *q)
{
	char why[TP_ERRMSG_LEN] = "", again[TP_ERRMSG_LEN] = "";
	int rc = place_run(pl, c, q, 0, why);
	if (rc != TP_EBUSY || !why[0] || c->part_level < 0)
		return rc;
	for (int mode = 1; mode <= 2; mode++) {
		tp_pl_part_forget(pl);
		again[0] = '\0';
		rc = place_run(pl, c, q, mode, again);
		if (rc != TP_EBUSY || !again[0])
			break;
	}
	if (rc == TP_EBUSY && again[0])
		return tp_seterr(pl->errmsg, TP_EINTERNAL, "internal error: the placement without "
		                 "partitioned nodes still needs one: %s", again);
	if (rc == TP_EBUSY || rc == TP_EFRAGMENTED || rc == TP_EINFEASIBLE) {
		bool pool = strstr(why, "IMEX channels") != NULL;
		char rest[TP_ERRMSG_LEN];
		const char *r = strchr(pl->errmsg, ':'); /* drop the inner "fragmented: " */
		snprintf(rest, sizeof rest, "%s", r && r[1] == ' ' ? r + 2 : pl->errmsg);
		rc = tp_seterr(pl->errmsg, pool ? TP_EBUSY : TP_EFRAGMENTED,
		               "%s: the request spans nodes of an NVLink domain and needs a partition, "
		               "but %s; without such nodes: %s", pool ? "busy" : "fragmented", why,
		               rest);
	}
	return rc;
}

int tp_place(const tp_cluster *c, const tp_request *r, tp_placement **out)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!c || !r)
		return TP_EINVAL;
	tp_placement *pl = tp_pl_placement_new(c, false);
	if (!pl)
		return TP_ENOMEM;
	struct tp_rq q;
	pl->job = tp_strdup(&pl->alloc, r->id ? r->id : "new");
	int rc = pl->job ? tp_request_resolve(c->t, c, r, 0, &pl->alloc, &q, pl->errmsg)
	                 : TP_ENOMEM;
	if (!rc) {
		pl->req = tp_request_dup(&pl->alloc, r);
		bool fitted = false;
		rc = pl->req ? tp_pl_fit(&pl, c, &q, &fitted) : TP_ENOMEM;
		if (!rc && !fitted)
			rc = tp_pl_place_parts(pl, c, &q);
		if (!rc && !fitted)
			rc = tp_pl_floor(&pl, c, &q);
		tp_rq_release(&pl->alloc, &q);
	}
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		return TP_ENOMEM;
	}
	pl->status = rc;
	*out = pl;
	return rc;
}
