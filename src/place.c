/* SPDX-License-Identifier: MIT */
/*
 * The constraint solver: tp_place, tp_replace, tp_commit and the tp_placement accessors.
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
 * Objective (spec rule 1, then rule 3). A placement costs the vector
 *     (domains used at level 0, ..., at the node level, free devices of the used domains summed
 *      at level 0, ..., at the node level)
 * compared lexicographically. The first half is rule 1 (fewest domains level by level from the
 * top); the second half is this solver's best fit (rule 3): the tightest domains, the highest
 * level first. The cost is additive over the tree and lexicographic order on integer vectors is
 * translation-invariant, so min-plus dynamic programming over the tree is exact:
 *     f_D(k) = self(D) + min over k = sum k_c of sum_c f_c(k_c)   (f_c(0) = 0)
 * a knapsack over the children of D with vector costs ("tables", one entry per unit amount).
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
 *     needed), so its size does not grow with the cluster.
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
 * below), so every rule above applies unchanged. Such a request is a filtered one (node
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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cost.h"
#include "place_impl.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define INF UINT32_MAX
#define W_MAX (2 * TP_MAX_LEVELS)
#define S_MAX 64 /* spread minimums above this use the table with this many columns */

/* ---- per-call scratch memory ---------------------------------------------------------------- */

struct chunk {
	struct chunk *prev;
	size_t cap, used;
	max_align_t data[];
};

struct amark {
	struct chunk *cur;
	size_t used;
};

/* ---- the solver's context ------------------------------------------------------------------- */

struct kid {
	uint32_t dom, free, cap;
};

/* A child and the devices it takes. */
struct take {
	uint32_t dom, amount;
	unsigned col; /* the spread column the child answers from */
};

struct pctx {
	const struct tp_cluster *c;
	const struct tp_topology *t;
	const struct tp_rq *q;
	const tp_allocator *a;
	struct chunk *ar;
	int err;                        /* first failure (TP_ENOMEM) */

	unsigned nlev, nl, W;
	uint32_t u[TP_MAX_LEVELS];      /* devices per unit at each level */
	uint32_t capdev[TP_MAX_LEVELS]; /* cap per domain in devices, TP_RQ_NOCAP: none */
	uint32_t lb[TP_MAX_LEVELS];     /* balanced: least devices per used domain (0: none) */
	uint32_t nodecap[TP_MAX_NODE_DEVICES + 1]; /* node capacity for a free count */
	bool hist_ok[TP_MAX_LEVELS];    /* capd from the histograms at this level */
	int sl;                         /* tree spread level, -1: none */
	uint32_t S;                     /* spread minimum (>= 2 when sl >= 0) */
	int single_to;                  /* levels <= single_to hold everything in one domain */
	bool compact;                   /* rule 1 applies */
	bool ideal;                     /* every job but the colocate target (and self) gone */
	bool filtered;                  /* node capacities need a walk */
	bool capgrp_safe;               /* groups caps below the group level: the safe bound */

	/* node filters */
	Pvoid_t scope[TP_MAX_LEVELS];   /* Judy1 of domains that may be used, NULL: all */
	int colevel;                    /* colocate level (scope holds levels <= colevel) */
	bool allow_list;                /* scope holds every level (select.nodes) */
	Pvoid_t xbad[TP_MAX_LEVELS];    /* Judy1: domains other tenants hold exclusively */
	bool have_xbad;
	int excl;                       /* the request's exclusive level, -1: none */
	Pvoid_t xknown, xdirty;         /* Judy1 memo of the exclusive level's domains */
	uint32_t self_slot;             /* replace: the job being repaired */
	Pvoid_t extra_down;             /* Judy1 of devices treated as down (replace) */
	Pvoid_t taken;                  /* Judy1 of devices already given out in this call */
	Pvoid_t used[TP_MAX_LEVELS];    /* JudyL dom -> devices this job already has there */
	bool have_used;
	Pvoid_t memo;                   /* JudyL (level << 32 | dom) -> capd + 1 (filtered) */
	bool ideal_plain;               /* ideal, and every healthy uncordoned device usable */
	bool pairs;                     /* gpu_nic_pairs: node capacity is a GPU-NIC matching */

	/* the root's decision, kept from eval() for emit() (same amount and column) */
	int root_kind;                  /* 0 none, 1 single top-level domain, 2 dual plan */
	uint32_t root_k, root_kid;
	unsigned root_col;
	uint32_t root_cost[W_MAX];
	struct take *root_plan;         /* [root_nplan], from the allocator */
	uint32_t root_nplan;

	/* output */
	uint32_t *out;
	size_t nout, capout;
};

static void *ar_alloc(struct pctx *p, size_t n)
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

static struct amark ar_mark(const struct pctx *p)
{
	return (struct amark){p->ar, p->ar ? p->ar->used : 0};
}

static void ar_release(struct pctx *p, struct amark m)
{
	while (p->ar != m.cur) {
		struct chunk *prev = p->ar->prev;
		tp_free(p->a, p->ar);
		p->ar = prev;
	}
	if (p->ar)
		p->ar->used = m.used;
}

/* Judy helpers: a failure is recorded as TP_ENOMEM and reads as "not present". */
static bool j1_test(Pcvoid_t arr, Word_t k)
{
	JError_t je;
	return arr && Judy1Test(arr, k, &je) == 1;
}

static void j1_set(struct pctx *p, Pvoid_t *arr, Word_t k)
{
	JError_t je;
	if (Judy1Set(arr, k, &je) == JERR)
		p->err = TP_ENOMEM;
}

static void j1_free(Pvoid_t *arr)
{
	JError_t je;
	if (*arr)
		Judy1FreeArray(arr, &je);
	*arr = NULL;
}

static Word_t jl_get(Pcvoid_t arr, Word_t k)
{
	JError_t je;
	if (!arr)
		return 0;
	PPvoid_t v = JudyLGet(arr, k, &je);
	return (v && v != PPJERR) ? (Word_t)*v : 0;
}

static void jl_add(struct pctx *p, Pvoid_t *arr, Word_t k, Word_t add)
{
	JError_t je;
	PPvoid_t v = JudyLIns(arr, k, &je);
	if (v == PPJERR) {
		p->err = TP_ENOMEM;
		return;
	}
	*v = (void *)((Word_t)*v + add);
}

static void jl_free(Pvoid_t *arr)
{
	JError_t je;
	if (*arr)
		JudyLFreeArray(arr, &je);
	*arr = NULL;
}

static uint32_t min32(uint32_t a, uint32_t b) { return a < b ? a : b; }
static uint32_t max32(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* ---- what may be used ----------------------------------------------------------------------- */

static const struct tp_job_impl *job_at(const struct tp_cluster *c, uint32_t slot)
{
	return slot < c->njobs ? c->jobs[slot] : NULL;
}

/* Whether a domain of the request's exclusive level holds a job of another tenant (memoised). */
static bool excl_dirty(struct pctx *p, uint32_t dom)
{
	if (j1_test(p->xknown, dom))
		return j1_test(p->xdirty, dom);
	const struct tp_cluster *c = p->c;
	uint32_t f, n;
	tp_dom_nodes(p->t, (unsigned)p->excl, dom, &f, &n);
	bool dirty = false;
	for (uint32_t d = p->t->dev_first[f]; d < p->t->dev_first[f + n] && !dirty; d++) {
		uint32_t j = c->dev_job[d];
		if (j == TP_NO_JOB || j == p->self_slot)
			continue;
		const struct tp_job_impl *job = job_at(c, j);
		if (p->ideal && j != p->q->colocate_slot)
			continue;
		dirty = job && strcmp(job->tenant, p->q->tenant) != 0;
	}
	j1_set(p, &p->xknown, dom);
	if (dirty)
		j1_set(p, &p->xdirty, dom);
	return dirty;
}

static bool in_scope(const struct pctx *p, unsigned l, uint32_t d)
{
	return !p->scope[l] || j1_test(p->scope[l], d);
}

/* Whether every device of a node may be considered at all (before per-device checks). */
static bool node_ok(struct pctx *p, uint32_t node)
{
	const struct tp_topology *t = p->t;
	const struct tp_rq *q = p->q;
	if (p->allow_list && !j1_test(p->scope[p->nl], node))
		return false;
	if (p->colevel >= 0 && !p->allow_list &&
	    !j1_test(p->scope[p->colevel], tp_node_ancestor(t, node, (unsigned)p->colevel)))
		return false;
	if (q->has_model && (q->model < 0 || t->node_model[node] != (uint16_t)q->model))
		return false;
	if (q->min_mem > 0 && !(t->node_mem_gb[node] >= q->min_mem))
		return false;
	if (p->have_xbad)
		for (unsigned l = 0; l < p->nlev; l++)
			if (p->xbad[l] && j1_test(p->xbad[l], tp_node_ancestor(t, node, l)))
				return false;
	if (p->excl >= 0 && excl_dirty(p, tp_node_ancestor(t, node, (unsigned)p->excl)))
		return false;
	return true;
}

static bool dev_ok(const struct pctx *p, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	if (c->dstate[d])
		return false;
	uint32_t j = c->dev_job[d];
	if (j != TP_NO_JOB &&
	    (!p->ideal || j == p->q->colocate_slot || j == p->self_slot))
		return false;
	if (p->extra_down && j1_test(p->extra_down, d))
		return false;
	if (p->taken && j1_test(p->taken, d))
		return false;
	if (p->q->min_perf > 0 && !(p->t->dev_perf[d] >= p->q->min_perf))
		return false;
	return true;
}

/* ---- GPU+NIC pairs ---------------------------------------------------------------------------
 *
 * A GPU's nearest NICs are those below its anchor: the lowest PCIe switch above it with a NIC
 * below (every NIC of the node when there is none: anchor -1). Which GPUs of a node can be
 * paired with distinct nearest NICs is a bipartite matching; Kuhn's augmenting paths, GPUs and
 * NICs in index order, give a maximum one deterministically. Any subset of the GPUs a maximum
 * matching covers can be paired too (with the same NICs), so the solver treats the covered
 * usable GPUs as the node's usable devices and needs nothing else. Cost per node:
 * O(GPUs * NICs * switch depth) for the anchors, O(GPUs^2 * NICs) at worst for the matching,
 * plus O(GPUs) to block the NICs running pairs jobs hold (only when there are such jobs). The
 * matching itself lives in cluster.c (tp_pairing), which pairs a committed job by the same rule.
 */

/* Set up a matching with nothing paired; scratch from the arena (false: out of memory). */
static bool pairing_init(struct pctx *p, struct tp_pairing *pr, const struct tp_nodetype *nt)
{
	int *gpu_of = ar_alloc(p, nt->nnic * sizeof *gpu_of);
	unsigned char *seen = ar_alloc(p, nt->nnic);
	if (!gpu_of || !seen)
		return false;
	tp_pairing_init(pr, nt, gpu_of, seen);
	return true;
}

/* Whether the NIC of device d (-1: none) is out of this request's reach because another
 * running job is paired with it, or (replace) the repaired job keeps it on a healthy device.
 * With every job gone (ideal), only the colocate target's and the job's own NICs stay. */
static bool nic_fixed(const struct pctx *p, uint32_t d, bool ideal)
{
	const struct tp_cluster *c = p->c;
	uint32_t j = c->dev_job[d];
	if (c->dev_nic[d] < 0 || j == TP_NO_JOB)
		return false;
	if (j == p->self_slot)
		return !(p->extra_down && j1_test(p->extra_down, d));
	return !ideal || j == p->q->colocate_slot;
}

/* Start a matching on a node with the NICs other jobs (and the repaired job's kept devices)
 * hold already blocked; ideal: as if every job but those the request keeps were gone. */
static bool pairing_node(struct pctx *p, struct tp_pairing *pr, const struct tp_nodetype *nt,
                         uint32_t node, bool ideal)
{
	if (!pairing_init(p, pr, nt))
		return false;
	if (p->c->npairs)
		for (uint32_t d = p->t->dev_first[node]; d < p->t->dev_first[node + 1]; d++)
			if (nic_fixed(p, d, ideal))
				tp_pairing_block(pr, p->c->dev_nic[d]);
	return true;
}

static bool dev_ok(const struct pctx *p, uint32_t d);

/* Devices that hold a NIC before the usable ones are paired: those given out earlier in this
 * call, and the repaired job's own healthy devices. */
static bool keeps_nic(const struct pctx *p, uint32_t d)
{
	if (p->taken && j1_test(p->taken, d))
		return true;
	return p->self_slot != TP_NO_JOB && p->c->dev_job[d] == p->self_slot &&
	       !(p->extra_down && j1_test(p->extra_down, d)) && p->c->dev_nic[d] < 0;
}

/* Usable devices of a node that can be paired with distinct nearest NICs (ids to list). */
static uint32_t node_pairable(struct pctx *p, uint32_t node, uint32_t *list)
{
	const struct tp_topology *t = p->t;
	const struct tp_nodetype *nt = tp_pairable_type(t, node);
	if (!nt)
		return 0;
	struct amark m = ar_mark(p);
	struct tp_pairing pr;
	uint32_t base = t->dev_first[node], n = 0;
	if (pairing_node(p, &pr, nt, node, p->ideal)) {
		for (unsigned g = 0; g < nt->ngpus; g++)
			if (keeps_nic(p, base + g))
				tp_pair_gpu(&pr, g);
		for (unsigned g = 0; g < nt->ngpus; g++) {
			if (!dev_ok(p, base + g) || !tp_pair_gpu(&pr, g))
				continue;
			if (list)
				list[n] = base + g;
			n++;
		}
	}
	ar_release(p, m);
	return n;
}

/* Free devices of a node that `select`'s per-device rule allows and that can be paired. */
static uint32_t node_pairable_free(struct pctx *p, uint32_t node)
{
	const struct tp_topology *t = p->t;
	const struct tp_nodetype *nt = tp_pairable_type(t, node);
	if (!nt)
		return 0;
	struct amark m = ar_mark(p);
	struct tp_pairing pr;
	uint32_t base = t->dev_first[node], n = 0;
	if (pairing_node(p, &pr, nt, node, false))
		for (unsigned g = 0; g < nt->ngpus; g++)
			if (tp_dev_free(p->c, base + g) &&
			    !(p->q->min_perf > 0 && !(t->dev_perf[base + g] >= p->q->min_perf)))
				n += tp_pair_gpu(&pr, g);
	ar_release(p, m);
	return n;
}

/* GPUs of the whole topology that can be paired (for the message of an infeasible request). */
static uint64_t topology_pairable(struct pctx *p)
{
	const struct tp_topology *t = p->t;
	uint64_t sum = 0;
	struct amark m = ar_mark(p);
	uint32_t *per_type = ar_alloc(p, (t->ntypes ? t->ntypes : 1) * sizeof *per_type);
	if (!per_type)
		return 0;
	for (unsigned ty = 0; ty < t->ntypes; ty++) {
		const struct tp_nodetype *nt = t->types[ty];
		struct tp_pairing pr;
		per_type[ty] = 0;
		if (nt->nnic && pairing_init(p, &pr, nt))
			for (unsigned g = 0; g < nt->ngpus; g++)
				per_type[ty] += tp_pair_gpu(&pr, g);
	}
	for (uint32_t node = 0; node < t->nnodes; node++)
		if (tp_pairable_type(t, node))
			sum += per_type[t->node_type[node]];
	ar_release(p, m);
	return sum;
}

/* Whether a device of the result keeps the NIC the repaired job holds it with. */
static bool kept_nic(const struct tp_cluster *c, uint32_t self, uint32_t d)
{
	return self != TP_NO_JOB && c->dev_job[d] == self && c->dev_nic[d] >= 0;
}

/* The NIC of every rank of a placement (pl->nic): the devices of each node, in rank order,
 * matched to distinct nearest NICs. A fresh placement pairs them all by construction; a
 * replacement may hold devices the caller assigned that cannot all be paired (-1). */
static int pair_result(tp_placement *pl, struct pctx *p, const uint32_t *devs, size_t n)
{
	const struct tp_topology *t = p->t;
	pl->nic = tp_mallocn(&pl->alloc, n ? n : 1, sizeof *pl->nic);
	if (!pl->nic)
		return TP_ENOMEM;
	for (size_t i = 0; i < n; i++)
		pl->nic[i] = -1;
	bool all = true;
	Pvoid_t done = NULL; /* nodes already paired */
	for (size_t i = 0; i < n && !p->err; i++) {
		uint32_t node = t->dev_node[devs[i]];
		const struct tp_nodetype *nt = tp_pairable_type(t, node);
		if (!nt || j1_test(done, node)) {
			all = all && nt;
			continue;
		}
		j1_set(p, &done, node);
		struct amark m = ar_mark(p);
		struct tp_pairing pr;
		/* a fresh placement holds each node as one run of ranks; a replacement may not */
		size_t end = i;
		while (end < n && (pl->replace || t->dev_node[devs[end]] == node))
			end++;
		if (pairing_init(p, &pr, nt)) {
			const struct tp_cluster *c = p->c;
			uint32_t self = pl->replace ? p->self_slot : TP_NO_JOB;
			for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++)
				if (c->dev_nic[d] >= 0 && c->dev_job[d] != self)
					tp_pairing_block(&pr, c->dev_nic[d]);
			for (size_t j = i; j < end; j++)
				if (t->dev_node[devs[j]] == node && kept_nic(c, self, devs[j]))
					tp_pairing_block(&pr, c->dev_nic[devs[j]]);
			for (size_t j = i; j < end; j++)
				if (t->dev_node[devs[j]] == node && !kept_nic(c, self, devs[j]))
					tp_pair_gpu(&pr, devs[j] - t->dev_first[node]);
			for (size_t j = i; j < end; j++)
				if (t->dev_node[devs[j]] == node)
					pl->nic[j] = kept_nic(c, self, devs[j])
					                 ? c->dev_nic[devs[j]]
					                 : pr.nic_of[devs[j] - t->dev_first[node]];
		}
		ar_release(p, m);
	}
	j1_free(&done);
	for (size_t i = 0; i < n && !pl->replace; i++)
		all = all && pl->nic[i] >= 0;
	if (p->err)
		return p->err;
	return all || pl->replace ? 0 : TP_ECORRUPT;
}

/* Usable devices of a node; their ids (index order) go to list when it is not NULL. */
static uint32_t node_usable(struct pctx *p, uint32_t node, uint32_t *list)
{
	if (!p->filtered && !p->ideal && !list)
		return tp_node_free(p->c, node);
	if (p->ideal_plain && !list)
		return tp_node_ndev(p->t, node);
	if (p->filtered && !node_ok(p, node))
		return 0;
	if (p->pairs)
		return node_pairable(p, node, list);
	uint32_t n = 0;
	for (uint32_t d = p->t->dev_first[node]; d < p->t->dev_first[node + 1]; d++)
		if (dev_ok(p, d)) {
			if (list)
				list[n] = d;
			n++;
		}
	return n;
}

/* Devices this job already holds in a domain (replace), for caps and the discount. */
static uint32_t used_in(const struct pctx *p, unsigned l, uint32_t d)
{
	return p->have_used ? (uint32_t)jl_get(p->used[l], d) : 0;
}

/* The cap of a domain once what the job already holds there is counted. */
static uint32_t cap_left(const struct pctx *p, unsigned l, uint32_t d)
{
	uint32_t cap = p->capdev[l];
	if (cap == TP_RQ_NOCAP || !p->have_used)
		return cap;
	uint32_t u = used_in(p, l, d);
	return cap > u ? cap - u : 0;
}

static uint32_t floor_to(uint32_t x, uint32_t u) { return x - x % u; }

static uint32_t capd(struct pctx *p, unsigned l, uint32_t d);

static uint32_t capd_sum_children(struct pctx *p, unsigned l, uint32_t d)
{
	const struct tp_level_impl *lv = &p->t->lv[l];
	uint64_t sum = 0;
	if (p->scope[l + 1]) {
		Word_t k = lv->child_first[d];
		JError_t je;
		int r = Judy1First(p->scope[l + 1], &k, &je);
		while (r == 1 && k < lv->child_first[d + 1]) {
			sum += capd(p, l + 1, (uint32_t)k);
			r = Judy1Next(p->scope[l + 1], &k, &je);
		}
	} else {
		for (uint32_t ch = lv->child_first[d]; ch < lv->child_first[d + 1]; ch++)
			sum += capd(p, l + 1, ch);
	}
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

static uint32_t capd_from_hist(const struct pctx *p, unsigned l, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	const uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
	uint64_t sum = 0;
	for (uint32_t k = 1; k < c->hstride; k++)
		if (h[k])
			sum += (uint64_t)h[k] * p->nodecap[k];
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

/* The most devices of the request domain d of level l can take (a multiple of u[l]). */
static uint32_t capd(struct pctx *p, unsigned l, uint32_t d)
{
	if (l == p->nl) {
		uint32_t x = min32(node_usable(p, d, NULL), cap_left(p, l, d));
		return floor_to(x, p->u[l]);
	}
	if (!in_scope(p, l, d))
		return 0;
	Word_t key = (Word_t)l << 32 | d;
	if (p->filtered) {
		Word_t m = jl_get(p->memo, key);
		if (m)
			return (uint32_t)(m - 1);
	}
	uint32_t sum = (!p->filtered && !p->ideal && p->hist_ok[l]) ? capd_from_hist(p, l, d)
	                                                            : capd_sum_children(p, l, d);
	sum = floor_to(min32(sum, cap_left(p, l, d)), p->u[l]);
	if (p->filtered)
		jl_add(p, &p->memo, key, (Word_t)sum + 1);
	return sum;
}

static uint32_t dom_free(const struct pctx *p, int l, uint32_t d)
{
	return l < 0 ? p->c->nfree : p->c->free[l][d];
}

/* ---- children, tightest first --------------------------------------------------------------- */

static int kid_cmp(const void *a, const void *b)
{
	const struct kid *x = a, *y = b;
	if (x->free != y->free)
		return x->free < y->free ? -1 : 1;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

static struct kid *kids_push(struct pctx *p, struct kid *ks, uint32_t *n, uint32_t *cap,
                             struct kid k)
{
	if (*n == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 32;
		struct kid *nk = ar_alloc(p, ncap * sizeof *nk);
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
static bool root_indexed(const struct pctx *p)
{
	return !p->scope[0] && p->c->indexed[0] && p->c->index[0] && !p->ideal;
}

/* The children of (l, d) (the top-level domains for l = -1) that can take at least kmin
 * devices, tightest (fewest free) first, lowest index on ties. NULL with *n = 0 when none;
 * NULL with p->err set when out of memory. */
static struct kid *kids_of(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *n)
{
	const struct tp_cluster *c = p->c;
	unsigned cl = (unsigned)(l + 1);
	uint32_t first, last;
	if (l < 0) {
		first = 0;
		last = p->t->lv[0].ndom;
	} else {
		first = p->t->lv[l].child_first[d];
		last = p->t->lv[l].child_first[d + 1];
	}
	struct kid *ks = NULL;
	uint32_t cap = 0;
	*n = 0;
	JError_t je;
	if (l < 0 && root_indexed(p)) {
		/* the index orders (free, dom) already; capacity never exceeds free */
		Word_t key = (Word_t)kmin << 32;
		int r = Judy1First(c->index[0], &key, &je);
		for (; r == 1; r = Judy1Next(c->index[0], &key, &je)) {
			struct kid k = {(uint32_t)(key & 0xffffffffu), (uint32_t)(key >> 32), 0};
			k.cap = capd(p, cl, k.dom);
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
			k.cap = capd(p, cl, k.dom);
			if (k.cap >= kmin && k.cap > 0 && !(ks = kids_push(p, ks, n, &cap, k)))
				return NULL;
		}
	} else {
		for (uint32_t ch = first; ch < last; ch++) {
			if (!p->ideal && c->free[cl][ch] < kmin)
				continue;
			struct kid k = {ch, c->free[cl][ch], 0};
			k.cap = capd(p, cl, ch);
			if (k.cap >= kmin && k.cap > 0 && !(ks = kids_push(p, ks, n, &cap, k)))
				return NULL;
		}
	}
	if (*n > 1)
		qsort(ks, *n, sizeof *ks, kid_cmp);
	return ks;
}

/* ---- cost vectors --------------------------------------------------------------------------- */

static bool c_inf(const uint32_t *v) { return v[0] == INF; }

static int c_cmp(const struct pctx *p, const uint32_t *a, const uint32_t *b)
{
	for (unsigned i = 0; i < p->W; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

static void c_add(const struct pctx *p, uint32_t *dst, const uint32_t *a)
{
	for (unsigned i = 0; i < p->W; i++)
		dst[i] += a[i];
}

static void c_copy(const struct pctx *p, uint32_t *dst, const uint32_t *a)
{
	memcpy(dst, a, p->W * sizeof *dst);
}

/* What using domain d of level l adds: one domain (none when the job already has devices
 * there) and its free devices. */
static void add_self(const struct pctx *p, int l, uint32_t d, uint32_t *v)
{
	if (l < 0)
		return;
	v[l] += used_in(p, (unsigned)l, d) ? 0 : 1;
	v[p->nlev + (unsigned)l] += dom_free(p, l, d);
}

static uint32_t ul(const struct pctx *p, int l) { return p->u[l < 0 ? 0 : l]; }

/* Columns of a table of level l: min(S, spread domains) + 1 at and above the spread level. */
static unsigned nsl(const struct pctx *p, int l)
{
	return (p->sl >= 0 && l <= p->sl) ? p->S + 1 : 1;
}

/* The column a domain of level l answers from: S (spread met) above the spread level, 1 at
 * it, 0 below it. */
static unsigned colq(const struct pctx *p, int l)
{
	if (p->sl < 0 || l > p->sl)
		return 0;
	return l == p->sl ? 1 : p->S;
}

/* Whether the best single child answers for a level-l domain asked for k at spread column
 * col: always when one child must hold everything, never when the children are the spread
 * level and the column needs several of them, else when single children are optimal (not with
 * the replace discount, where children the job already uses cost nothing). */
static bool use_single(const struct pctx *p, int l, uint32_t k, unsigned col, bool forced)
{
	(void)k;
	if (p->sl == l + 1)
		return col <= 1;
	return forced || !p->have_used;
}

/* Whether one child of a level-l domain must hold all k: a required or colocate level below,
 * or a unit of the child level (a group or slice) as large as the whole amount. */
static bool forced_single(const struct pctx *p, int l, uint32_t k)
{
	return l + 1 <= p->single_to || (l + 1 <= (int)p->nl && p->u[l + 1] >= k);
}

/* Whether the counts below level l (l+1 .. node) meet the absolute lower bound for k. */
static bool meets_bound(const struct pctx *p, int l, uint32_t k, unsigned col,
                        const uint32_t *v)
{
	for (unsigned x = (unsigned)(l + 1); x < p->nlev; x++) {
		uint32_t md = p->t->lv[x].max_devices ? p->t->lv[x].max_devices : 1;
		uint32_t b = (int)x == l + 1 ? 1 : (k + md - 1) / md;
		if (p->sl == (int)x)
			b = max32(b, col);
		if (v[x] != b)
			return false;
	}
	return true;
}

/* ---- tables: f_D(j) for every amount j (units of D's level) --------------------------------- */

struct table {
	uint32_t J, ns;
	uint32_t *v; /* [(J + 1) * ns * W] */
};

static uint32_t *tb_at(const struct pctx *p, const struct table *tb, uint32_t j, unsigned s)
{
	return tb->v + ((size_t)j * tb->ns + s) * p->W;
}

static int tb_new(struct pctx *p, struct table *tb, uint32_t J, unsigned ns)
{
	size_t n = ((size_t)J + 1) * ns;
	tb->J = J;
	tb->ns = ns;
	tb->v = ar_alloc(p, n * p->W * sizeof *tb->v);
	if (!tb->v)
		return TP_ENOMEM;
	memset(tb->v, 0, n * p->W * sizeof *tb->v);
	for (size_t i = 1; i < n; i++)
		tb->v[i * p->W] = INF;
	return 0;
}

struct knap {
	uint32_t J, ns, nk;
	struct kid *ks;
	struct table tb;  /* in units of the children's level */
	uint32_t *cj;     /* [nk][(J + 1) * ns] amount child i takes, when recorded */
	uint16_t *cs;     /* [nk][(J + 1) * ns] column before child i */
	uint16_t *cc;     /* [nk][(J + 1) * ns] column of child i's own table */
};

static int dom_table(struct pctx *p, int l, uint32_t d, uint32_t J, struct table *tb);

/* Fold one child's table into the running knapsack (in place, amounts descending). */
static void knap_fold(struct pctx *p, struct knap *kn, uint32_t i, const struct table *tc)
{
	uint32_t cand[W_MAX];
	size_t stride = ((size_t)kn->J + 1) * kn->ns;
	for (uint32_t nj = kn->J; nj >= 1; nj--) {
		uint32_t top = min32(nj, tc->J);
		for (uint32_t j2 = 1; j2 <= top; j2++)
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

/* The knapsack over the children of (l, d) for 0..J units of the children's level. */
static int knap_run(struct pctx *p, int l, uint32_t d, uint32_t J, bool record, struct knap *kn)
{
	unsigned cl = (unsigned)(l + 1);
	memset(kn, 0, sizeof *kn);
	kn->J = J;
	kn->ns = nsl(p, (int)cl);
	kn->ks = kids_of(p, l, d, p->u[cl], &kn->nk);
	if (p->err)
		return p->err;
	int rc = tb_new(p, &kn->tb, J, kn->ns);
	if (rc)
		return rc;
	if (record) {
		size_t n = (size_t)kn->nk * ((size_t)J + 1) * kn->ns;
		kn->cj = ar_alloc(p, (n ? n : 1) * sizeof *kn->cj);
		kn->cs = ar_alloc(p, (n ? n : 1) * sizeof *kn->cs);
		kn->cc = ar_alloc(p, (n ? n : 1) * sizeof *kn->cc);
		if (!kn->cj || !kn->cs || !kn->cc)
			return TP_ENOMEM;
		memset(kn->cj, 0, n * sizeof *kn->cj);
	}
	for (uint32_t i = 0; i < kn->nk; i++) {
		struct amark m = ar_mark(p);
		struct table tc;
		uint32_t jc = min32(J, kn->ks[i].cap / p->u[cl]);
		rc = dom_table(p, (int)cl, kn->ks[i].dom, jc, &tc);
		if (rc)
			return rc;
		knap_fold(p, kn, i, &tc);
		ar_release(p, m);
	}
	return 0;
}

struct lnode {
	uint32_t node, v, free;
};

static int lnode_cmp(const void *a, const void *b)
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
static struct lnode *leaf_nodes(struct pctx *p, int l, uint32_t d, uint32_t *n)
{
	uint32_t f = 0, cnt = p->t->nnodes;
	if (l >= 0)
		tp_dom_nodes(p->t, (unsigned)l, d, &f, &cnt);
	struct lnode *ln = ar_alloc(p, (cnt ? cnt : 1) * sizeof *ln);
	*n = 0;
	if (!ln)
		return NULL;
	for (uint32_t x = f; x < f + cnt; x++) {
		uint32_t cap = capd(p, p->nl, x);
		if (cap)
			ln[(*n)++] = (struct lnode){x, cap / p->u[p->nl], p->c->free[p->nl][x]};
	}
	qsort(ln, *n, sizeof *ln, lnode_cmp);
	return ln;
}

static bool leaf_fast(const struct pctx *p, int l)
{
	return l == (int)p->nl - 1 && !p->have_used && p->sl != (int)p->nl &&
	       (l >= 0 || !p->scope[0]);
}

/* A leaf parent's table: the fewest nodes for an amount is the shortest prefix of the node
 * capacities in decreasing order. */
static int leaf_table(struct pctx *p, int l, uint32_t d, struct table *tb)
{
	uint32_t n;
	struct lnode *ln = leaf_nodes(p, l, d, &n);
	if (!ln)
		return TP_ENOMEM;
	uint32_t ratio = ul(p, l) / p->u[p->nl];
	uint64_t acc = 0, fs = 0;
	uint32_t m = 0;
	unsigned col = colq(p, l);
	for (uint32_t j = 1; j <= tb->J; j++) {
		uint64_t x = (uint64_t)j * ratio;
		while (acc < x && m < n) {
			acc += ln[m].v;
			fs += ln[m].free;
			m++;
		}
		if (acc < x)
			break;
		uint32_t *e = tb_at(p, tb, j, col);
		memset(e, 0, p->W * sizeof *e);
		e[p->nl] = m;
		e[p->nlev + p->nl] = (uint32_t)fs;
	}
	return 0;
}

/* ---- uniform subtrees: node counts are forced ----------------------------------------------- */

/* Whether no balance bound applies at any level (the greedy fast paths assume none). */
static bool no_bounds(const struct pctx *p)
{
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->lb[l])
			return false;
	return true;
}

/* The devices every usable node below (l, d) holds, when they all hold the same and that
 * divides the units of levels l and l + 1 (so every amount there is whole nodes, and the
 * node count of any placement is amount / that); 0 otherwise. l is two levels above the node. */
static uint32_t uniform_node_dev(struct pctx *p, int l, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	unsigned rl = (unsigned)(l + 1);
	uint32_t first = l < 0 ? 0 : p->t->lv[l].child_first[d];
	uint32_t last = l < 0 ? p->t->lv[0].ndom : p->t->lv[l].child_first[d + 1];
	uint32_t nd = 0;
	for (uint32_t r = first; r < last; r++) {
		if (!in_scope(p, rl, r))
			continue;
		if (!p->filtered && p->hist_ok[rl]) {
			const uint32_t *h = c->hist[rl] + (size_t)r * c->hstride;
			for (uint32_t k = 1; k < c->hstride; k++)
				if (h[k] && p->nodecap[k]) {
					if (nd && nd != p->nodecap[k])
						return 0;
					nd = p->nodecap[k];
				}
		} else {
			uint32_t f, n;
			tp_dom_nodes(p->t, rl, r, &f, &n);
			for (uint32_t x = f; x < f + n; x++) {
				uint32_t cap = capd(p, p->nl, x);
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

static bool linear_ok(const struct pctx *p, int l)
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
 * children's capacities in decreasing order. */
static int linear_table(struct pctx *p, int l, uint32_t d, uint32_t nd, struct table *tb)
{
	unsigned cl = (unsigned)(l + 1);
	uint32_t n;
	struct kid *ks = kids_of(p, l, d, p->u[cl], &n);
	if (p->err)
		return p->err;
	if (n > 1)
		qsort(ks, n, sizeof *ks, kid_cap_cmp);
	uint64_t acc = 0, fs = 0;
	uint32_t m = 0;
	for (uint32_t j = 1; j <= tb->J; j++) {
		uint64_t x = (uint64_t)j * ul(p, l);
		while (acc < x && m < n) {
			acc += ks[m].cap;
			fs += ks[m].free;
			m++;
		}
		if (acc < x)
			break;
		uint32_t *e = tb_at(p, tb, j, 0);
		memset(e, 0, p->W * sizeof *e);
		e[cl] = m;
		e[p->nl] = (uint32_t)(x / nd);
		e[p->nlev + cl] = (uint32_t)fs;
	}
	return 0;
}

/* f_D(j) for j = 0..J units of D's level (the top-level domains' units at the root). */
static int dom_table(struct pctx *p, int l, uint32_t d, uint32_t J, struct table *tb)
{
	uint32_t nd;
	int rc = tb_new(p, tb, J, nsl(p, l));
	if (rc)
		return rc;
	if (l == (int)p->nl) {
		uint32_t cap = capd(p, p->nl, d);
		for (uint32_t j = 1; j <= J && (uint64_t)j * p->u[l] <= cap; j++)
			memset(tb_at(p, tb, j, colq(p, l)), 0, p->W * sizeof(uint32_t));
	} else if (leaf_fast(p, l)) {
		rc = leaf_table(p, l, d, tb);
	} else if (linear_ok(p, l) && l >= 0 && (nd = uniform_node_dev(p, l, d)) != 0) {
		rc = linear_table(p, l, d, nd, tb);
	} else {
		uint32_t ratio = ul(p, l) / p->u[l + 1];
		struct amark m = ar_mark(p);
		struct knap kn;
		rc = knap_run(p, l, d, J * ratio, false, &kn);
		if (!rc) {
			unsigned col = colq(p, l);
			for (uint32_t j = 1; j <= J; j++) {
				if (kn.ns == tb->ns) {
					for (unsigned s = 0; s < tb->ns; s++)
						c_copy(p, tb_at(p, tb, j, s), tb_at(p, &kn.tb, j * ratio, s));
				} else {
					c_copy(p, tb_at(p, tb, j, col), tb_at(p, &kn.tb, j * ratio, 0));
				}
			}
		}
		ar_release(p, m);
	}
	if (rc)
		return rc;
	for (uint32_t j = 1; j <= J; j++)
		for (unsigned s = 0; s < tb->ns; s++) {
			uint32_t *e = tb_at(p, tb, j, s);
			if (c_inf(e))
				continue;
			if (l >= 0 && (uint64_t)j * p->u[l] < p->lb[l])
				e[0] = INF;
			else
				add_self(p, l, d, e);
		}
	return 0;
}

/* ---- point queries: f_D(k) ------------------------------------------------------------------ */

static bool dual_ok(const struct pctx *p);
static int root_dual(struct pctx *p, uint32_t k, uint32_t *cost, struct take **plan,
                     uint32_t *nplan);

static int eval(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col, uint32_t *out);

/* The spread column a single child answers from when its parent answers from col. */
static unsigned child_col(const struct pctx *p, int l, unsigned col)
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
static int best_single(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col,
                       uint32_t *best, uint32_t *kid)
{
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

static int best_single_walk(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col,
                            uint32_t *best, uint32_t *kid)
{
	if (l < 0 && root_indexed(p)) {
		/* walk the index lazily: the search usually stops at the first few domains */
		JError_t je;
		Word_t key = (Word_t)k << 32;
		int found = 0;
		uint32_t tmp[W_MAX];
		for (int r = Judy1First(p->c->index[0], &key, &je); r == 1 && !p->err;
		     r = Judy1Next(p->c->index[0], &key, &je)) {
			uint32_t dom = (uint32_t)(key & 0xffffffffu);
			int e = eval(p, 0, dom, k, child_col(p, l, col), tmp);
			if (e < 0)
				return e;
			if (e && (!found || c_cmp(p, tmp, best) < 0)) {
				c_copy(p, best, tmp);
				*kid = dom;
				found = 1;
				if (meets_bound(p, l, k, col, best))
					break;
			}
		}
		return p->err ? p->err : found;
	}

	struct amark m = ar_mark(p);
	uint32_t n;
	struct kid *ks = kids_of(p, l, d, k, &n);
	int found = 0;
	uint32_t tmp[W_MAX];
	for (uint32_t i = 0; i < n && !p->err; i++) {
		int r = eval(p, l + 1, ks[i].dom, k, child_col(p, l, col), tmp);
		if (r < 0) {
			found = r;
			break;
		}
		if (r && (!found || c_cmp(p, tmp, best) < 0)) {
			c_copy(p, best, tmp);
			*kid = ks[i].dom;
			found = 1;
			if (meets_bound(p, l, k, col, best))
				break;
		}
	}
	ar_release(p, m);
	return p->err ? p->err : found;
}

/* f_D(k) for domain d of level l (the root for l = -1) at spread column col (colq(l) for
 * "spread met"): 1 and the cost in out, 0 when D cannot hold k so, or an error. */
static int eval(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col, uint32_t *out)
{
	memset(out, 0, p->W * sizeof *out);
	if (l >= 0) {
		if (k > capd(p, (unsigned)l, d) || k < p->lb[l])
			return 0;
		if (l == (int)p->nl) {
			add_self(p, l, d, out);
			return 1;
		}
	}
	bool forced = forced_single(p, l, k);
	if (use_single(p, l, k, col, forced)) {
		uint32_t kid;
		uint32_t best[W_MAX];
		int r = best_single(p, l, d, k, col, best, &kid);
		if (r < 0)
			return r;
		if (r) {
			add_self(p, l, d, out);
			c_add(p, out, best);
			return 1;
		}
		if (forced || p->sl == l + 1)
			return 0;
	} else if (forced) {
		return 0;
	}
	if (l < 0 && dual_ok(p)) {
		struct amark dm = ar_mark(p);
		struct take *tk = NULL;
		uint32_t ntk = 0;
		int r = root_dual(p, k, out, &tk, &ntk);
		if (r == 1) {
			/* keep the plan for emit() */
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
		ar_release(p, dm);
		if (r != 2)
			return r;
		memset(out, 0, p->W * sizeof *out);
	}
	struct amark m = ar_mark(p);
	struct table tb;
	uint32_t J = k / ul(p, l);
	int rc = dom_table(p, l, d, J, &tb);
	if (!rc) {
		const uint32_t *e = tb_at(p, &tb, J, tb.ns > 1 ? col : 0);
		rc = c_inf(e) ? 0 : 1;
		if (rc)
			c_copy(p, out, e);
	}
	ar_release(p, m);
	return rc;
}

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
	uint32_t n = node_usable(p, node, list);
	if (n < k)
		return TP_ECORRUPT;
	uint32_t base = t->dev_first[node];
	bool use[TP_MAX_NODE_DEVICES] = {false}, pick[TP_MAX_NODE_DEVICES] = {false};
	uint16_t ty = t->node_type ? t->node_type[node] : TP_NO_TYPE;
	const struct tp_nodetype *nt = ty != TP_NO_TYPE ? t->types[ty] : NULL;
	if (nt && nt->nsw > 0 && nt->ngpus == tp_node_ndev(t, node) && k < n) {
		for (uint32_t i = 0; i < n; i++)
			use[list[i] - base] = true;
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


static int take_cmp(const void *a, const void *b)
{
	const struct take *x = a, *y = b;
	return (x->dom > y->dom) - (x->dom < y->dom);
}

static int emit(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col);

/* Emit the children of a level-l domain in tree order with their amounts. */
static int emit_takes(struct pctx *p, int l, struct take *tk, uint32_t n)
{
	qsort(tk, n, sizeof *tk, take_cmp);
	for (uint32_t i = 0; i < n; i++) {
		int rc = emit(p, l + 1, tk[i].dom, tk[i].amount, tk[i].col);
		if (rc)
			return rc;
	}
	return 0;
}

/* Choose m of the n nodes (largest first in ln) that hold x units, tightest that still can:
 * at each step the smallest node such that it and the largest remaining others still cover
 * the rest. O(m * n). */
static int leaf_choose(struct pctx *p, struct lnode *ln, uint32_t n, uint32_t m, uint64_t x,
                       struct take *tk)
{
	bool *used = ar_alloc(p, (n ? n : 1) * sizeof *used);
	uint64_t *pre = ar_alloc(p, ((size_t)n + 1) * sizeof *pre);
	uint32_t *rank = ar_alloc(p, (n ? n : 1) * sizeof *rank);
	if (!used || !pre || !rank)
		return TP_ENOMEM;
	memset(used, 0, n * sizeof *used);
	uint64_t rem = x;
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
	struct amark mk = ar_mark(p);
	uint32_t n;
	struct lnode *ln = leaf_nodes(p, l, d, &n);
	if (!ln)
		return TP_ENOMEM;
	uint64_t x = k / p->u[p->nl], acc = 0;
	uint32_t m = 0;
	while (acc < x && m < n)
		acc += ln[m++].v;
	if (acc < x)
		return TP_ECORRUPT;
	struct take *tk = ar_alloc(p, (m ? m : 1) * sizeof *tk);
	int rc = tk ? leaf_choose(p, ln, n, m, x, tk) : TP_ENOMEM;
	if (!rc) {
		for (uint32_t i = 0; i < m; i++)
			tk[i].amount *= p->u[p->nl];
		rc = emit_takes(p, l, tk, m);
	}
	ar_release(p, mk);
	return rc;
}

/* A uniform domain's part: the fewest children (best fit among them), in tree order. */
static int emit_linear(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	unsigned cl = (unsigned)(l + 1);
	struct amark mk = ar_mark(p);
	uint32_t n;
	struct kid *ks = kids_of(p, l, d, p->u[cl], &n);
	struct lnode *ln = ar_alloc(p, (n ? n : 1) * sizeof *ln);
	if (!ln) {
		ar_release(p, mk);
		return TP_ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		ln[i] = (struct lnode){ks[i].dom, ks[i].cap / p->u[cl], ks[i].free};
	qsort(ln, n, sizeof *ln, lnode_cmp);
	uint64_t x = k / p->u[cl], acc = 0;
	uint32_t m = 0;
	while (acc < x && m < n)
		acc += ln[m++].v;
	struct take *tk = ar_alloc(p, (m ? m : 1) * sizeof *tk);
	int rc = acc < x ? TP_ECORRUPT : tk ? leaf_choose(p, ln, n, m, x, tk) : TP_ENOMEM;
	if (!rc) {
		for (uint32_t i = 0; i < m; i++)
			tk[i].amount *= p->u[cl];
		rc = emit_takes(p, l, tk, m);
	}
	ar_release(p, mk);
	return rc;
}

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

static bool dual_ok(const struct pctx *p)
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
	struct kid *ks = kids_of(p, -1, 0, p->u[0], &n);
	if (p->err)
		return p->err;
	struct dual_dom *bs = ar_alloc(p, (n ? n : 1) * sizeof *bs);
	if (!bs)
		return TP_ENOMEM;
	size_t nitems = 0, cap_items = 0;
	uint32_t *items = NULL;
	*nd = 1;
	for (uint32_t i = 0; i < n; i++) {
		bs[i] = (struct dual_dom){ks[i].dom, ks[i].free, ks[i].cap, (uint32_t)nitems, 0};
		if (p->nlev == 3) {
			uint32_t u = uniform_node_dev(p, 0, ks[i].dom);
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
			uint32_t *ni = ar_alloc(p, nc * sizeof *ni);
			if (!ni)
				return TP_ENOMEM;
			if (nitems)
				memcpy(ni, items, nitems * sizeof *ni);
			items = ni;
			cap_items = nc;
		}
		for (uint32_t x = f; x < f + cnt; x++) {
			uint32_t cap = capd(p, p->nlev == 3 ? 1 : p->nl, x);
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
	uint64_t *pre = ar_alloc(p, (nitems + 1) * sizeof *pre);
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

/* The fewest top-level domains (t), then the fewest of their children (r), for k devices:
 * 1 with the cost (and, when plan is given, the domains and amounts), 0 when impossible,
 * 2 when not applicable, or an error. */
static int root_dual(struct pctx *p, uint32_t k, uint32_t *cost, struct take **plan,
                     uint32_t *nplan)
{
	struct dual_dom *bs;
	uint32_t nb, nd;
	uint64_t *pre;
	int rc = dual_collect(p, k, &bs, &nb, &pre, &nd);
	if (rc)
		return rc;
	/* t: greedy on capacities */
	struct dual_dom *by = ar_alloc(p, (nb ? nb : 1) * sizeof *by);
	if (!by)
		return TP_ENOMEM;
	memcpy(by, bs, nb * sizeof *by);
	qsort(by, nb, sizeof *by, dual_cap_cmp);
	uint64_t acc = 0;
	uint32_t t = 0, mmax = 0;
	while (acc < k && t < nb)
		acc += by[t++].cap;
	if (acc < k)
		return 0;
	for (uint32_t i = 0; i < nb; i++)
		mmax = max32(mmax, bs[i].n);
	/* candidates: the t best domains for each child count m */
	bool *cand = ar_alloc(p, (nb ? nb : 1) * sizeof *cand);
	uint32_t *top = ar_alloc(p, ((size_t)t + 1) * sizeof *top);
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
	size_t R = (size_t)t * mmax, states = ((size_t)t + 1) * (R + 1);
	if ((size_t)nc * states > ((size_t)1 << 24))
		return 2;
	int64_t *best = ar_alloc(p, states * sizeof *best);
	size_t nch = (size_t)nc * states;
	uint16_t *ch = ar_alloc(p, (nch ? nch : 1) * sizeof *ch);
	uint32_t *ci = ar_alloc(p, (nc ? nc : 1) * sizeof *ci);
	if (!best || !ch || !ci)
		return TP_ENOMEM;
	for (size_t i = 0; i < states; i++)
		best[i] = -1;
	best[0] = 0;
	memset(ch, 0, (size_t)nc * states * sizeof *ch);
	nc = 0;
	for (uint32_t i = 0; i < nb; i++)
		if (cand[i])
			ci[nc++] = i;
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
	size_t rstar = R + 1;
	for (size_t r = 1; r <= R && rstar > R; r++)
		if (best[(size_t)t * (R + 1) + r] >= (int64_t)k)
			rstar = r;
	if (rstar > R)
		return 0;
	memset(cost, 0, p->W * sizeof *cost);
	cost[0] = t;
	cost[1] = (uint32_t)rstar;
	if (p->nlev == 3)
		cost[2] = k / nd;
	if (!plan)
		return 1;
	struct take *tk = ar_alloc(p, (size_t)t * sizeof *tk);
	if (!tk)
		return TP_ENOMEM;
	uint32_t ntk = 0, tt = t;
	size_t r = rstar;
	uint64_t sum = 0;
	for (uint32_t c = nc; c-- > 0 && tt > 0;) {
		size_t at = (size_t)tt * (R + 1) + r;
		uint16_t m = ch[(size_t)c * states + at];
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

/* Emit the best placement of k devices inside (l, d), deciding as eval() does; col is the
 * spread column the caller counted on (colq(l) at the top). */
static int emit(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col)
{
	if (k == 0)
		return 0;
	if (l == (int)p->nl)
		return emit_node(p, d, k);
	bool forced = forced_single(p, l, k);
	if (use_single(p, l, k, col, forced)) {
		uint32_t kid, best[W_MAX];
		int r = best_single(p, l, d, k, col, best, &kid);
		if (r < 0)
			return r;
		if (r)
			return emit(p, l + 1, kid, k, child_col(p, l, col));
		if (forced || p->sl == l + 1)
			return TP_ECORRUPT;
	} else if (forced) {
		return TP_ECORRUPT;
	}
	if (leaf_fast(p, l))
		return emit_leaf(p, l, d, k);
	if (linear_ok(p, l) && l >= 0 && uniform_node_dev(p, l, d))
		return emit_linear(p, l, d, k);
	if (l < 0 && p->root_kind == 2 && p->root_k == k && p->root_col == col) {
		struct take *tk = ar_alloc(p, (p->root_nplan ? p->root_nplan : 1) * sizeof *tk);
		if (!tk)
			return TP_ENOMEM;
		memcpy(tk, p->root_plan, p->root_nplan * sizeof *tk);
		return emit_takes(p, l, tk, p->root_nplan);
	}
	if (l < 0 && dual_ok(p)) {
		struct amark dm = ar_mark(p);
		uint32_t cost[W_MAX], ntk;
		struct take *tk;
		int r = root_dual(p, k, cost, &tk, &ntk);
		if (r == 1)
			r = emit_takes(p, l, tk, ntk);
		else if (r == 0)
			r = TP_ECORRUPT;
		ar_release(p, dm);
		if (r != 2)
			return r;
	}
	struct amark m = ar_mark(p);
	struct knap kn;
	unsigned cl = (unsigned)(l + 1);
	uint32_t J = k / p->u[cl];
	int rc = knap_run(p, l, d, J, true, &kn);
	if (rc) {
		ar_release(p, m);
		return rc;
	}
	unsigned s = kn.ns == nsl(p, l) ? col : 0;
	if (c_inf(tb_at(p, &kn.tb, J, s))) {
		ar_release(p, m);
		return TP_ECORRUPT;
	}
	struct take *tk = ar_alloc(p, (kn.nk ? kn.nk : 1) * sizeof *tk);
	if (!tk) {
		ar_release(p, m);
		return TP_ENOMEM;
	}
	uint32_t nt = 0, j = J;
	size_t stride = ((size_t)J + 1) * kn.ns;
	for (uint32_t i = kn.nk; i-- > 0;) {
		size_t at = (size_t)i * stride + (size_t)j * kn.ns + s;
		uint32_t j2 = kn.cj[at];
		if (!j2)
			continue;
		tk[nt++] = (struct take){kn.ks[i].dom, j2 * p->u[cl], kn.cc[at]};
		s = kn.cs[at];
		j -= j2;
	}
	rc = j == 0 ? emit_takes(p, l, tk, nt) : TP_ECORRUPT;
	ar_release(p, m);
	return rc;
}

/* ---- unconstrained requests: tightest holes first ------------------------------------------- */

/* Fill k devices into (l, d): the tightest child that holds everything, else children from
 * the tightest up. Returns 1 (emitted), 0 (cannot) or an error. */
static int fill(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	if (l == (int)p->nl)
		return emit_node(p, d, k) ? TP_ECORRUPT : 1;
	if (l < 0 && root_indexed(p)) {
		JError_t je;
		Word_t key = (Word_t)k << 32;
		for (int r = Judy1First(p->c->index[0], &key, &je); r == 1;
		     r = Judy1Next(p->c->index[0], &key, &je)) {
			uint32_t dom = (uint32_t)(key & 0xffffffffu);
			if (capd(p, 0, dom) >= k)
				return fill(p, 0, dom, k);
		}
	}
	struct amark m = ar_mark(p);
	uint32_t n;
	struct kid *ks = kids_of(p, l, d, k, &n);
	int rc;
	if (n) {
		uint32_t dom = ks[0].dom;
		ar_release(p, m);
		return fill(p, l + 1, dom, k);
	}
	if (p->err || forced_single(p, l, k)) {
		ar_release(p, m);
		return p->err ? p->err : 0;
	}
	ks = kids_of(p, l, d, p->u[l + 1], &n);
	struct take *tk = ar_alloc(p, (n ? n : 1) * sizeof *tk);
	if (!tk) {
		ar_release(p, m);
		return TP_ENOMEM;
	}
	uint32_t nt = 0, rem = k;
	for (uint32_t i = 0; i < n && rem; i++) {
		uint32_t a = min32(ks[i].cap, rem);
		tk[nt++] = (struct take){ks[i].dom, a, 0};
		rem -= a;
	}
	if (rem) {
		ar_release(p, m);
		return 0;
	}
	qsort(tk, nt, sizeof *tk, take_cmp);
	rc = 1;
	for (uint32_t i = 0; i < nt && rc == 1; i++)
		rc = fill(p, l + 1, tk[i].dom, tk[i].amount);
	ar_release(p, m);
	return rc;
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
static void build_xbad(struct pctx *p, bool only_target)
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
	for (unsigned l = 0; l < p->nlev; l++) {
		p->u[l] = l <= q->glevel ? q->gsize : 1;
		for (unsigned i = 0; i < q->nslices; i++)
			if (l <= q->slevel[i])
				p->u[l] = max32(p->u[l], q->ssize[i]);
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
	for (unsigned l = 0; l < p->nl; l++) {
		p->hist_ok[l] = c->hist[l] != NULL;
		for (unsigned x = l + 1; x < p->nl; x++)
			if (p->u[x] != p->u[p->nl] || p->capdev[x] != TP_RQ_NOCAP)
				p->hist_ok[l] = false;
	}
}

static void ctx_fini(struct pctx *p)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		j1_free(&p->scope[l]);
		j1_free(&p->xbad[l]);
		jl_free(&p->used[l]);
	}
	j1_free(&p->xknown);
	j1_free(&p->xdirty);
	j1_free(&p->extra_down);
	j1_free(&p->taken);
	jl_free(&p->memo);
	tp_free(p->a, p->root_plan);
	p->root_plan = NULL;
	p->root_kind = 0;
	ar_release(p, (struct amark){NULL, 0});
}

/* Set up a call for request q. self_slot: the job being repaired (TP_NO_JOB otherwise). */
static int ctx_init(struct pctx *p, const struct tp_cluster *c, const struct tp_rq *q,
                    uint32_t self_slot)
{
	memset(p, 0, sizeof *p);
	p->c = c;
	p->t = c->t;
	p->q = q;
	p->a = &c->alloc;
	p->nlev = c->t->nlevels;
	p->nl = p->nlev - 1;
	p->W = 2 * p->nlev;
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
	build_scope(p);
	build_xbad(p, false);
	p->pairs = q->pairs;
	p->filtered = q->has_model || q->min_perf > 0 || q->min_mem > 0 || q->has_nodes ||
	              q->exclusive >= 0 || p->have_xbad || p->colevel >= 0 || q->pairs;
	p->out = NULL;
	return p->err;
}

static int out_alloc(struct pctx *p, size_t n)
{
	p->out = ar_alloc(p, (n ? n : 1) * sizeof *p->out);
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
			int r = eval(p, -1, 0, k, colq(p, -1), tmp);
			if (r < 0)
				return r;
			if (r && same_counts(p, tmp, cstar))
				lo = mid;
			else
				hi = mid - 1;
		}
		p->lb[l] = lo * u;
	}
	p->root_kind = 0;
	return 0;
}

/* ---- failure-domain caps and spread (not tree-shaped: a greedy fill) ------------------------ */

static bool has_fd_rules(const struct tp_rq *q)
{
	return q->nfdcaps > 0 || (q->spread_fd >= 0 && q->spread_min >= 2);
}

/* Whether a device list in rank order meets the failure-domain caps and spread. */
static int fd_check(struct pctx *p, const uint32_t *devs, size_t n, bool *ok)
{
	const struct tp_topology *t = p->t;
	const struct tp_rq *q = p->q;
	*ok = true;
	for (unsigned i = 0; i < q->nfdcaps && *ok; i++) {
		const struct tp_rq_fdcap *fc = &q->fdcaps[i];
		const uint32_t *fd = t->fd[fc->kind].dev_fd;
		Pvoid_t cnt = NULL;
		for (size_t r = 0; r < n && *ok; r++) {
			if (fc->devices != TP_RQ_NOCAP) {
				jl_add(p, &cnt, fd[devs[r]], 1);
				*ok = jl_get(cnt, fd[devs[r]]) <= fc->devices;
			} else if (r % q->gsize == 0) {
				/* a group counts once in every domain it touches */
				for (size_t x = r; x < r + q->gsize && x < n && *ok; x++) {
					bool seen = false;
					for (size_t y = r; y < x; y++)
						seen = seen || fd[devs[y]] == fd[devs[x]];
					if (!seen) {
						jl_add(p, &cnt, fd[devs[x]], 1);
						*ok = jl_get(cnt, fd[devs[x]]) <= fc->groups;
					}
				}
			}
		}
		jl_free(&cnt);
	}
	if (*ok && q->spread_fd >= 0 && q->spread_min >= 2) {
		Pvoid_t seen = NULL;
		uint32_t nd = 0;
		const uint32_t *fd = t->fd[q->spread_fd].dev_fd;
		for (size_t r = 0; r < n; r++)
			if (!j1_test(seen, fd[devs[r]])) {
				j1_set(p, &seen, fd[devs[r]]);
				nd++;
			}
		j1_free(&seen);
		*ok = nd >= q->spread_min;
	}
	return p->err;
}

struct fdstate {
	Pvoid_t cnt[TP_MAX_LEVELS]; /* per cap: JudyL fd domain -> devices or groups */
	Pvoid_t tree[TP_MAX_LEVELS]; /* per level: JudyL domain -> devices taken */
	Pvoid_t spread;             /* Judy1 of spread domains touched */
	uint32_t nspread;
};

/* Whether one more group made of devs[0..g) on one node fits every cap. */
static bool fd_group_fits(struct pctx *p, struct fdstate *st, uint32_t node, const uint32_t *g)
{
	const struct tp_rq *q = p->q;
	uint32_t gs = q->gsize;
	for (unsigned i = 0; i < q->nfdcaps; i++) {
		const struct tp_rq_fdcap *fc = &q->fdcaps[i];
		const uint32_t *fd = p->t->fd[fc->kind].dev_fd;
		for (uint32_t x = 0; x < gs; x++) {
			uint32_t same = 0;
			for (uint32_t y = 0; y < gs; y++)
				same += fd[g[y]] == fd[g[x]];
			bool first = true;
			for (uint32_t y = 0; y < x; y++)
				first = first && fd[g[y]] != fd[g[x]];
			uint64_t have = jl_get(st->cnt[i], fd[g[x]]);
			if (fc->devices != TP_RQ_NOCAP && have + same > fc->devices)
				return false;
			if (fc->groups != TP_RQ_NOCAP && first && have + 1 > fc->groups)
				return false;
		}
	}
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->capdev[l] != TP_RQ_NOCAP) {
			uint32_t dom = tp_node_ancestor(p->t, node, l);
			if (jl_get(st->tree[l], dom) + gs > cap_left(p, l, dom))
				return false;
		}
	return true;
}

static void fd_group_take(struct pctx *p, struct fdstate *st, uint32_t node, const uint32_t *g)
{
	const struct tp_rq *q = p->q;
	for (unsigned i = 0; i < q->nfdcaps; i++) {
		const struct tp_rq_fdcap *fc = &q->fdcaps[i];
		const uint32_t *fd = p->t->fd[fc->kind].dev_fd;
		for (uint32_t x = 0; x < q->gsize; x++) {
			bool first = true;
			for (uint32_t y = 0; y < x; y++)
				first = first && fd[g[y]] != fd[g[x]];
			if (fc->devices != TP_RQ_NOCAP)
				jl_add(p, &st->cnt[i], fd[g[x]], 1);
			else if (first)
				jl_add(p, &st->cnt[i], fd[g[x]], 1);
		}
	}
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->capdev[l] != TP_RQ_NOCAP)
			jl_add(p, &st->tree[l], tp_node_ancestor(p->t, node, l), q->gsize);
	if (q->spread_fd >= 0) {
		const uint32_t *fd = p->t->fd[q->spread_fd].dev_fd;
		for (uint32_t x = 0; x < q->gsize; x++)
			if (!j1_test(st->spread, fd[g[x]])) {
				j1_set(p, &st->spread, fd[g[x]]);
				st->nspread++;
			}
	}
}

static bool fd_group_new_spread(const struct pctx *p, const struct fdstate *st,
                                const uint32_t *g)
{
	const uint32_t *fd = p->t->fd[p->q->spread_fd].dev_fd;
	for (uint32_t x = 0; x < p->q->gsize; x++)
		if (!j1_test(st->spread, fd[g[x]]))
			return true;
	return false;
}

static int dev_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Greedy fill of domain (l, d) honouring failure-domain caps and spread, groups of the node
 * level only (no slices): first one group per new spread domain, then groups wherever the caps
 * allow, nodes in tree order. Returns 1 with p->out filled, 0, or an error. */
static int fd_fill_in(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	const struct tp_rq *q = p->q;
	if (q->glevel != p->nl || q->nslices)
		return 2; /* not handled: the caller must not conclude anything */
	uint32_t first = 0, nn = p->t->nnodes;
	if (l >= 0)
		tp_dom_nodes(p->t, (unsigned)l, d, &first, &nn);
	struct fdstate st;
	memset(&st, 0, sizeof st);
	p->nout = 0;
	bool spread = q->spread_fd >= 0 && q->spread_min >= 2;
	for (int pass = spread ? 0 : 1; pass < 2 && p->nout < k && !p->err; pass++)
		for (uint32_t node = first; node < first + nn && p->nout < k && !p->err; node++) {
			uint32_t list[TP_MAX_NODE_DEVICES];
			uint32_t n = node_usable(p, node, list), have = 0;
			bool mine[TP_MAX_NODE_DEVICES] = {false};
			for (size_t i = 0; i < p->nout; i++)
				if (p->t->dev_node[p->out[i]] == node)
					have++, mine[p->out[i] - p->t->dev_first[node]] = true;
			uint32_t free_list[TP_MAX_NODE_DEVICES], nf = 0;
			for (uint32_t i = 0; i < n; i++)
				if (!mine[list[i] - p->t->dev_first[node]])
					free_list[nf++] = list[i];
			uint32_t room = p->capdev[p->nl] == TP_RQ_NOCAP ? nf
			                : (p->capdev[p->nl] > have ? p->capdev[p->nl] - have : 0);
			for (uint32_t i = 0; i + q->gsize <= nf && room >= q->gsize && p->nout < k;) {
				const uint32_t *g = &free_list[i];
				if (pass == 0 && !(fd_group_new_spread(p, &st, g) &&
				                   st.nspread < q->spread_min)) {
					i++;
					continue;
				}
				if (!fd_group_fits(p, &st, node, g)) {
					i++;
					continue;
				}
				fd_group_take(p, &st, node, g);
				for (uint32_t x = 0; x < q->gsize; x++)
					p->out[p->nout++] = g[x];
				room -= q->gsize;
				i += q->gsize;
				if (pass == 0)
					break;
			}
		}
	for (unsigned i = 0; i < TP_MAX_LEVELS; i++) {
		jl_free(&st.cnt[i]);
		jl_free(&st.tree[i]);
	}
	j1_free(&st.spread);
	if (p->err)
		return p->err;
	if (p->nout < k || (spread && st.nspread < q->spread_min)) {
		p->nout = 0;
		return 0;
	}
	qsort(p->out, p->nout, sizeof *p->out, dev_cmp);
	return 1;
}

/* The failure-domain fill over the request's scope: each candidate domain of the required
 * (or colocate) level, tightest first, or the whole cluster. */
static int fd_fill(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	if (l == (int)p->nl)
		return fd_fill_in(p, l, d, k);
	/* one child first (rule 1 from the top), the tightest that works */
	struct amark m = ar_mark(p);
	uint32_t n;
	struct kid *ks = kids_of(p, l, d, k, &n);
	int r = p->err;
	for (uint32_t i = 0; i < n && !r; i++)
		r = fd_fill(p, l + 1, ks[i].dom, k);
	ar_release(p, m);
	if (r || forced_single(p, l, k))
		return r;
	return fd_fill_in(p, l, d, k);
}
/* fd_fill returns 2 where the greedy does not apply (slices, or groups above the node). */

/* Necessary conditions of the failure-domain rules on the usable devices (used where the greedy
 * fill does not apply): enough devices under the caps, enough domains for the spread. */
static int fd_possible(struct pctx *p, uint32_t k)
{
	const struct tp_rq *q = p->q;
	const struct tp_topology *t = p->t;
	Pvoid_t cnt[TP_MAX_LEVELS + 1] = {NULL};
	unsigned nk = q->nfdcaps < TP_MAX_LEVELS ? q->nfdcaps : TP_MAX_LEVELS;
	uint64_t room[TP_MAX_LEVELS + 1] = {0};
	uint32_t nspread = 0;
	for (uint32_t node = 0; node < t->nnodes && !p->err; node++) {
		uint32_t list[TP_MAX_NODE_DEVICES];
		uint32_t n = capd(p, p->nl, node) ? node_usable(p, node, list) : 0;
		for (uint32_t i = 0; i < n; i++) {
			for (unsigned c = 0; c < nk; c++) {
				const struct tp_rq_fdcap *fc = &q->fdcaps[c];
				uint32_t f = t->fd[fc->kind].dev_fd[list[i]];
				uint64_t lim = fc->devices != TP_RQ_NOCAP ? fc->devices
				               : (uint64_t)fc->groups * q->gsize;
				uint64_t have = jl_get(cnt[c], f);
				if (have < lim)
					room[c]++;
				jl_add(p, &cnt[c], f, 1);
			}
			if (q->spread_fd >= 0) {
				uint32_t f = t->fd[q->spread_fd].dev_fd[list[i]];
				if (!jl_get(cnt[TP_MAX_LEVELS], f))
					nspread++;
				jl_add(p, &cnt[TP_MAX_LEVELS], f, 1);
			}
		}
	}
	bool ok = true;
	for (unsigned c = 0; c < nk; c++)
		ok = ok && room[c] >= k;
	if (q->spread_fd >= 0 && q->spread_min >= 2)
		ok = ok && nspread >= q->spread_min && k >= q->spread_min;
	for (unsigned c = 0; c <= TP_MAX_LEVELS; c++)
		jl_free(&cnt[c]);
	return p->err ? p->err : ok;
}

/* ---- failure-domain rules on small clusters: an exact search -------------------------------- */

#define FDS_NODES 16          /* most nodes with free capacity the search takes on */
#define FDS_BUDGET 2000000L   /* most complete assignments it looks at */

struct fds {
	struct pctx *p;
	uint32_t k, n;
	uint32_t node[FDS_NODES], cap[FDS_NODES], amt[FDS_NODES], best_amt[FDS_NODES];
	uint64_t after[FDS_NODES + 1]; /* capacity of nodes i.. */
	uint32_t best[W_MAX];
	bool found;
	long budget;
	uint32_t *devs;
};

/* The devices of an assignment in rank order (nodes in tree order, lowest usable first). */
static uint32_t fds_devices(struct fds *f)
{
	uint32_t nd = 0;
	for (uint32_t i = 0; i < f->n; i++) {
		if (!f->amt[i])
			continue;
		uint32_t list[TP_MAX_NODE_DEVICES];
		node_usable(f->p, f->node[i], list);
		for (uint32_t x = 0; x < f->amt[i]; x++)
			f->devs[nd++] = list[x];
	}
	return nd;
}

/* Check an assignment against every rule and keep it when its domain counts are smaller. */
static void fds_leaf(struct fds *f)
{
	struct pctx *p = f->p;
	const struct tp_topology *t = p->t;
	uint32_t cost[W_MAX] = {0};
	for (unsigned l = 0; l < p->nlev; l++) {
		uint32_t prev = TP_NONE, sum = 0, doms = 0;
		for (uint32_t i = 0; i <= f->n; i++) {
			uint32_t a = i < f->n && f->amt[i] ? tp_node_ancestor(t, f->node[i], l) : TP_NONE;
			if (i < f->n && !f->amt[i])
				continue;
			if (a != prev && prev != TP_NONE) {
				if (sum % p->u[l] || sum > cap_left(p, l, prev))
					return;
				doms++;
				sum = 0;
			}
			if (i < f->n) {
				prev = a;
				sum += f->amt[i];
			}
		}
		cost[l] = doms;
		if ((int)l <= p->single_to && doms > 1)
			return;
		if ((int)l == p->sl && doms < p->S)
			return;
	}
	if (f->found && c_cmp(p, cost, f->best) >= 0)
		return;
	uint32_t nd = fds_devices(f);
	bool ok;
	if (fd_check(p, f->devs, nd, &ok) || !ok)
		return;
	c_copy(p, f->best, cost);
	memcpy(f->best_amt, f->amt, sizeof f->amt);
	f->found = true;
}

static void fds_walk(struct fds *f, uint32_t i, uint32_t left)
{
	if (f->budget <= 0)
		return;
	if (left == 0) {
		for (uint32_t x = i; x < f->n; x++)
			f->amt[x] = 0;
		f->budget--;
		fds_leaf(f);
		return;
	}
	if (i == f->n || f->after[i] < left)
		return;
	uint32_t u = f->p->u[f->p->nl];
	uint32_t top = f->cap[i] < left ? f->cap[i] : left;
	for (uint32_t a = top - top % u;; a -= u) {
		f->amt[i] = a;
		fds_walk(f, i + 1, left - a);
		if (a < u)
			break;
	}
}

/* Every placement of k devices on the nodes with free capacity, when there are few: 1 with the
 * rule-1 best in p->out, 0 when none meets every rule, 2 when too large to search. */
static int fd_search(struct pctx *p, uint32_t k)
{
	struct fds *f = ar_alloc(p, sizeof *f);
	if (!f)
		return TP_ENOMEM;
	memset(f, 0, sizeof *f);
	f->p = p;
	f->k = k;
	f->budget = FDS_BUDGET;
	for (uint32_t x = 0; x < p->t->nnodes; x++) {
		uint32_t cap = capd(p, p->nl, x);
		if (!cap)
			continue;
		if (f->n == FDS_NODES)
			return 2;
		f->node[f->n] = x;
		f->cap[f->n++] = cap;
	}
	f->after[f->n] = 0;
	for (uint32_t i = f->n; i-- > 0;)
		f->after[i] = f->after[i + 1] + f->cap[i];
	f->devs = ar_alloc(p, ((size_t)k + 1) * sizeof *f->devs);
	if (!f->devs)
		return TP_ENOMEM;
	fds_walk(f, 0, k);
	if (p->err)
		return p->err;
	if (f->budget <= 0 && !f->found)
		return 2;
	if (!f->found)
		return 0;
	memcpy(f->amt, f->best_amt, sizeof f->amt);
	p->nout = fds_devices(f);
	memcpy(p->out, f->devs, p->nout * sizeof *p->out);
	return 1;
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
		r = eval(p, -1, 0, k, colq(p, -1), best);
		if (r == 1 && p->q->balanced) {
			int e = balance(p, k, best);
			if (e)
				return e;
		}
		if (r == 1) {
			int e = emit(p, -1, 0, k, colq(p, -1));
			if (e)
				return p->err ? p->err : e;
		}
	} else {
		r = fill(p, -1, 0, k);
	}
	if (r < 0 || !has_fd_rules(p->q))
		return r;
	if (r == 1) {
		bool ok;
		if (fd_check(p, p->out, p->nout, &ok))
			return p->err;
		if (ok)
			return 1;
	}
	struct amark m = ar_mark(p);
	r = fd_search(p, k);
	ar_release(p, m);
	if (r != 2)
		return r;
	r = fd_fill(p, -1, 0, k);
	return r == 2 ? 0 : r;
}

/* Whether k devices could be placed at all on (l, d): capacities only (balance never makes a
 * request infeasible). */
static int feasible(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	if (l >= 0 && capd(p, (unsigned)l, d) < k)
		return 0;
	if (l == (int)p->nl)
		return 1;
	if (forced_single(p, l, k)) {
		if (p->sl == l + 1)
			return 0;
		struct amark m = ar_mark(p);
		uint32_t n;
		struct kid *ks = kids_of(p, l, d, k, &n);
		int r = p->err;
		for (uint32_t i = 0; i < n && !r; i++)
			r = feasible(p, l + 1, ks[i].dom, k);
		ar_release(p, m);
		return r;
	}
	struct amark m = ar_mark(p);
	uint32_t n;
	struct kid *ks = kids_of(p, l, d, 1, &n);
	uint64_t sum = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += ks[i].cap;
	int r = p->err ? p->err : sum >= k;
	ar_release(p, m);
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
		have += capd(p, (unsigned)p->sl, x) > 0;
	return have >= p->S && (uint64_t)p->S * p->u[p->sl] <= k;
}

/* ---- results -------------------------------------------------------------------------------- */

static tp_placement *placement_new(const struct tp_cluster *c, bool replace)
{
	tp_placement *pl = tp_calloc(&c->alloc, 1, sizeof *pl);
	if (!pl)
		return NULL;
	pl->alloc = c->alloc;
	pl->c = c;
	pl->cluster_id = tp_cluster_identity(c);
	pl->generation = c->generation;
	pl->nlevels = c->t->nlevels;
	pl->replace = replace;
	return pl;
}

void tp_placement_destroy(tp_placement *pl)
{
	if (!pl)
		return;
	tp_allocator a = pl->alloc;
	tp_free(&a, pl->job);
	tp_request_free(&a, pl->req);
	tp_free(&a, pl->devs);
	tp_free(&a, pl->nic);
	tp_free(&a, pl->failed);
	tp_free(&a, pl);
}

/* Fill a successful result: the devices, the domains per level in first-rank order, the
 * score. One allocation holds the devices and every level's lists. */
static int finish_ok(tp_placement *pl, struct pctx *p, const uint32_t *devs, size_t n)
{
	const struct tp_topology *t = p->t;
	size_t per = n ? n : 1;
	uint32_t *block = tp_mallocn(&pl->alloc, per * (1 + 2 * (size_t)p->nlev), sizeof *block);
	if (!block)
		return TP_ENOMEM;
	memcpy(block, devs, n * sizeof *block);
	pl->devs = block;
	pl->ndev = n;
	for (unsigned l = 0; l < p->nlev; l++) {
		uint32_t *dom = block + per * (1 + 2 * l), *cnt = dom + per, nd = 0;
		Pvoid_t seen = NULL; /* domain -> position + 1, for lists that are not runs */
		for (size_t i = 0; i < n; i++) {
			uint32_t a = tp_node_ancestor(t, t->dev_node[devs[i]], l);
			if (nd && dom[nd - 1] == a) {
				cnt[nd - 1]++;
				continue;
			}
			Word_t at = pl->replace ? jl_get(seen, a) : 0;
			if (at) {
				cnt[at - 1]++;
				continue;
			}
			dom[nd] = a;
			cnt[nd] = 1;
			nd++;
			if (pl->replace)
				jl_add(p, &seen, a, nd);
		}
		jl_free(&seen);
		pl->dom[l] = dom;
		pl->dcnt[l] = cnt;
		pl->ndom[l] = nd;
	}
	pl->comm_us = n > 1 ? tp_cost_ring_allreduce_us(t, devs, n, GIB) : 0.0;
	if (!p->err && p->q && p->q->pairs) {
		int rc = pair_result(pl, p, devs, n);
		if (rc)
			return rc;
	}
	return p->err;
}

/* Free, healthy, uncordoned devices that `select` allows. */
static uint32_t matching_free(struct pctx *p)
{
	const struct tp_rq *q = p->q;
	const struct tp_topology *t = p->t;
	if (!q->has_model && !(q->min_perf > 0) && !(q->min_mem > 0) && !q->has_nodes && !q->pairs)
		return p->c->nfree;
	uint32_t n = 0;
	size_t nn = q->has_nodes ? q->nnodes : t->nnodes;
	for (size_t i = 0; i < nn; i++) {
		uint32_t node = q->has_nodes ? q->nodes[i] : (uint32_t)i;
		if (q->has_model && (q->model < 0 || t->node_model[node] != (uint16_t)q->model))
			continue;
		if (q->min_mem > 0 && !(t->node_mem_gb[node] >= q->min_mem))
			continue;
		if (q->pairs) {
			n += node_pairable_free(p, node);
			continue;
		}
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++)
			if (tp_dev_free(p->c, d) && !(q->min_perf > 0 && !(t->dev_perf[d] >= q->min_perf)))
				n++;
	}
	return n;
}

/* What one domain of level L takes in whole groups and slices (groups of a level above L
 * count whole too: the request sits in one domain of L). */
static uint32_t fit_take(struct pctx *p, unsigned L, uint32_t d)
{
	uint32_t x = capd(p, L, d);
	return p->q->glevel < L ? floor_to(x, p->q->gsize) : x;
}

/* The most devices of the request one domain of level L takes now (whole units), and which. */
static uint32_t best_at_level(struct pctx *p, unsigned L, uint32_t k, uint32_t *dom)
{
	const struct tp_cluster *c = p->c;
	uint32_t best = 0;
	*dom = TP_NONE;
	JError_t je;
	if (c->indexed[L] && !p->ideal) {
		Word_t key = ~(Word_t)0;
		int r = c->index[L] ? Judy1Last(c->index[L], &key, &je) : 0;
		for (; r == 1 && best < k; r = Judy1Prev(c->index[L], &key, &je)) {
			if ((uint32_t)(key >> 32) <= best)
				break;
			uint32_t d = (uint32_t)(key & 0xffffffffu), cap = min32(fit_take(p, L, d), k);
			if (cap > best) {
				best = cap;
				*dom = d;
			}
		}
		return best;
	}
	for (uint32_t d = 0; d < p->t->lv[L].ndom && best < k; d++) {
		if (!p->ideal && c->free[L][d] <= best)
			continue;
		uint32_t cap = min32(fit_take(p, L, d), k);
		if (cap > best) {
			best = cap;
			*dom = d;
		}
	}
	return best;
}

/* Switch a context to "every job but the colocate target (and the repaired job) gone". */
static void go_ideal(struct pctx *p)
{
	const struct tp_rq *q = p->q;
	p->ideal = true;
	p->ideal_plain = !p->filtered && !p->extra_down && !p->taken &&
	                 p->self_slot == TP_NO_JOB && q->colocate_slot == TP_NO_JOB_SLOT &&
	                 p->c->ndown == 0 && p->c->ncordoned == 0 && !(q->min_perf > 0);
	p->filtered = !p->ideal_plain;
	p->root_kind = 0;
	jl_free(&p->memo);
	j1_free(&p->xknown);
	j1_free(&p->xdirty);
	build_xbad(p, true);
}

/* Why k devices could not be placed: the status, the fit figures and the message. */
static int classify(tp_placement *pl, struct pctx *p, uint32_t k, uint32_t needed, int level,
                    int ideal_ok)
{
	const struct tp_topology *t = p->t;
	const struct tp_rq *q = p->q;
	unsigned L = level >= 0 ? (unsigned)level : 0;
	char path[256] = "-";
	uint32_t dom;
	pl->has_fit = true;
	pl->fit.needed = needed;
	pl->fit.level = (int)L;
	pl->fit.free_total = matching_free(p);
	pl->fit.best = min32(best_at_level(p, L, k, &dom), min32(needed, pl->fit.free_total));
	if (dom != TP_NONE)
		tp_topology_domain_path(t, L, dom, path, sizeof path);
	const char *lv = t->lv[L].name;
	go_ideal(p);
	int r = ideal_ok >= 0 ? ideal_ok : feasible(p, -1, 0, k);
	if (r == 1 && ideal_ok < 0 && p->sl >= 0 && p->compact) {
		/* a spread couples levels: ask the exact evaluator */
		uint32_t tmp[W_MAX];
		r = eval(p, -1, 0, k, colq(p, -1), tmp);
	}
	if (r == 1 && ideal_ok < 0 && has_fd_rules(q)) {
		struct amark m = ar_mark(p);
		r = fd_search(p, k);
		ar_release(p, m);
		if (r == 2)
			r = fd_fill(p, -1, 0, k);
		if (r == 2)
			r = fd_possible(p, k);
	}
	if (r < 0)
		return r;
	if (!r) {
		uint32_t ib = best_at_level(p, L, k, &dom);
		if (q->pairs)
			return tp_seterr(pl->errmsg, TP_EINFEASIBLE,
			                 "infeasible: request.gpu_nic_pairs 1: the request's %u devices "
			                 "cannot each be paired with a distinct nearest NIC of their node, "
			                 "even with every other job gone (the topology has %llu GPUs that "
			                 "can be paired; one %s could take at most %u of them)", k,
			                 (unsigned long long)topology_pairable(p), lv, ib);
		return tp_seterr(pl->errmsg, TP_EINFEASIBLE,
		                 "infeasible: the request's %u devices cannot be placed even with every "
		                 "other job gone (healthy, uncordoned, matching devices; one %s could "
		                 "take at most %u of them)", k, lv, ib);
	}
	if (pl->fit.free_total < needed)
		return tp_seterr(pl->errmsg, TP_EBUSY,
		                 "busy: %u matching devices are free, the request needs %u",
		                 pl->fit.free_total, needed);
	if (level >= 0)
		return tp_seterr(pl->errmsg, TP_EFRAGMENTED,
		                 "fragmented: %u devices are free but the best %s (%s) can take %u of "
		                 "the %u the request needs in one %s", pl->fit.free_total, lv, path,
		                 pl->fit.best, needed, lv);
	return tp_seterr(pl->errmsg, TP_EFRAGMENTED,
	                 "fragmented: %u devices are free but not where the request's constraints "
	                 "need them (the best %s, %s, can take %u of the %u)", pl->fit.free_total,
	                 lv, path, pl->fit.best, needed);
}

static int place_run(tp_placement *pl, const struct tp_cluster *c, const struct tp_rq *q)
{
	struct pctx p;
	int rc = ctx_init(&p, c, q, TP_NO_JOB);
	/* More devices than the cluster has can never fit: classify without sizing the answer's
	 * buffers by a count that may be near 2^32. */
	bool too_big = q->count > c->t->ndevices;
	if (!rc && !too_big)
		rc = out_alloc(&p, q->count);
	if (!rc) {
		int r = too_big ? 0 : solve(&p, q->count);
		if (r == 1)
			rc = finish_ok(pl, &p, p.out, p.nout);
		else if (r == 0)
			rc = classify(pl, &p, q->count, q->count, q->required, -1);
		else
			rc = r;
	}
	if (p.err)
		rc = p.err;
	if (rc == TP_ECORRUPT)
		tp_seterr(pl->errmsg, rc, "internal error: the solver's answer did not add up");
	ctx_fini(&p);
	return rc;
}

int tp_place(const tp_cluster *c, const tp_request *r, tp_placement **out)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!c || !r)
		return TP_EINVAL;
	tp_placement *pl = placement_new(c, false);
	if (!pl)
		return TP_ENOMEM;
	struct tp_rq q;
	pl->job = tp_strdup(&pl->alloc, r->id ? r->id : "new");
	int rc = pl->job ? tp_request_resolve(c->t, c, r, 0, &pl->alloc, &q, pl->errmsg)
	                 : TP_ENOMEM;
	if (!rc) {
		pl->req = tp_request_dup(&pl->alloc, r);
		rc = pl->req ? place_run(pl, c, &q) : TP_ENOMEM;
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

/* ---- accessors ------------------------------------------------------------------------------ */

int tp_placement_status(const tp_placement *p)
{
	return p ? p->status : TP_EINVAL;
}

const char *tp_placement_errmsg(const tp_placement *p)
{
	return p ? p->errmsg : "";
}

const char *tp_placement_job(const tp_placement *p)
{
	return p && p->job ? p->job : "";
}

const uint32_t *tp_placement_devices(const tp_placement *p, size_t *n)
{
	if (n)
		*n = p && p->status == 0 ? p->ndev : 0;
	return p && p->status == 0 ? p->devs : NULL;
}

uint32_t tp_placement_domain_count(const tp_placement *p, unsigned level)
{
	if (!p || p->status != 0 || level >= p->nlevels)
		return 0;
	return p->ndom[level];
}

int tp_placement_domain_at(const tp_placement *p, unsigned level, uint32_t i, uint32_t *dom,
                           uint32_t *devices)
{
	if (!p || p->status != 0 || level >= p->nlevels || i >= p->ndom[level])
		return TP_EINVAL;
	if (dom)
		*dom = p->dom[level][i];
	if (devices)
		*devices = p->dcnt[level][i];
	return 0;
}

double tp_placement_step_comm_us(const tp_placement *p)
{
	return p && p->status == 0 ? p->comm_us : 0.0;
}

int tp_placement_nic(const tp_placement *p, size_t i)
{
	if (!p || p->status != 0 || i >= p->ndev)
		return TP_EINVAL;
	if (!p->nic || p->nic[i] < 0)
		return TP_ENOTFOUND;
	return (int)p->nic[i];
}

int tp_placement_fit(const tp_placement *p, tp_fit *fit)
{
	if (!p || !fit || !p->has_fit)
		return TP_EINVAL;
	*fit = p->fit;
	return 0;
}

int tp_placement_replaced(const tp_placement *p, size_t i, uint32_t *failed,
                          uint32_t *replacement)
{
	if (!p || !p->replace || p->status != 0)
		return TP_EINVAL;
	if (i >= p->nrepl)
		return TP_ENOTFOUND;
	if (failed)
		*failed = p->failed[i];
	if (replacement)
		*replacement = p->repl[i];
	return 0;
}

/* ---- commit --------------------------------------------------------------------------------- */

static int check_job_options(tp_cluster *c, const tp_job_options *o)
{
	const char *why;
	if (o->version != TP_JOB_OPTIONS_VERSION)
		return tp_seterr(c->errmsg, TP_EINVAL, "opts->version %u is not %u", o->version,
		                 TP_JOB_OPTIONS_VERSION);
	if ((unsigned)o->job_class > TP_CLASS_INTERACTIVE)
		return tp_seterr(c->errmsg, TP_EINVAL, "opts->job_class %d is not a job class",
		                 (int)o->job_class);
	if (!(o->checkpoint_s >= 0) || !isfinite(o->checkpoint_s))
		return tp_seterr(c->errmsg, TP_EINVAL, "opts->checkpoint_s must be a finite number >= 0");
	if (o->tenant && (why = tp_name_problem(o->tenant, false)))
		return tp_seterr(c->errmsg, TP_EINVAL, "opts->tenant: %s", why);
	return 0;
}

static int commit_unguarded(tp_cluster *c, const tp_placement *p, const tp_job_options *opts);

int tp_commit(tp_cluster *c, const tp_placement *p, const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, commit_unguarded(c, p, opts));
}

static int commit_unguarded(tp_cluster *c, const tp_placement *p, const tp_job_options *opts)
{
	if (!c || !p)
		return TP_EINVAL;
	if (p->status != 0 || !p->devs)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "tp_commit: the result is not a placement (its status is %s)",
		                 tp_err_name(p->status));
	if (!tp_cluster_is(c, p->cluster_id))
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "tp_commit: the placement was made on another cluster");
	if (p->generation != c->generation)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "tp_commit: the cluster changed since the placement was made "
		                 "(generation %llu, now %llu)", (unsigned long long)p->generation,
		                 (unsigned long long)c->generation);
	int rc;
	if (p->replace) {
		uint32_t slot = tp_cluster_job_slot(c, p->job);
		if (slot == TP_NO_JOB)
			return tp_seterr(c->errmsg, TP_EINVAL, "tp_commit: job '%s' is not running",
			                 p->job);
		rc = tp_cluster_rebind_impl(c, slot, p->devs, p->ndev);
	} else {
		if (tp_cluster_job_slot(c, p->job) != TP_NO_JOB)
			return tp_seterr(c->errmsg, TP_EEXIST, "tp_commit: job '%s' is already running",
			                 p->job);
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		if (opts) {
			if ((rc = check_job_options(c, opts)))
				return rc;
			o = *opts;
		} else {
			o.job_class = p->req->job_class;
			o.priority = p->req->priority;
			o.tenant = p->req->tenant;
		}
		if (!o.shape)
			o.shape = p->req;
		rc = tp_cluster_assign_impl(c, p->job, p->devs, p->ndev, &o);
	}
	if (rc == TP_ENOMEM)
		tp_seterr(c->errmsg, rc, "tp_commit: out of memory");
	return rc;
}

/* ---- replace -------------------------------------------------------------------------------- */

/*
 * A job's shape nests its constraints: the required (or colocate) domain holds every rank, each
 * slice layer holds runs of its size, each group a run of the group size, each device itself.
 * For a failed rank, the innermost unit that still has healthy members fixes where its
 * replacement must go (the anchor: that unit's domain); the next unit inwards has no healthy
 * member left and is placed anew, as a small request inside the anchor, with the shape's
 * inner slices and groups. Anchors are handled innermost first; each sub-request is solved
 * with the job's devices counting as already used (no new domain for rule 1, and towards the
 * caps).
 */
struct layer {
	uint32_t size;
	unsigned level;
	int kind; /* 0 required/colocate, 1 slice (index in slice), 2 group, 3 device */
	unsigned slice;
};

struct rclass {
	int a;          /* anchor layer, -1: none (the whole cluster) */
	uint32_t aunit; /* anchor unit index */
	uint32_t first; /* first failed rank (for ordering) */
};

static unsigned shape_layers(const struct tp_rq *q, uint32_t n, unsigned nl, struct layer *ly)
{
	unsigned k = 0;
	if (q->required >= 0)
		ly[k++] = (struct layer){n, (unsigned)q->required, 0, 0};
	if (q->colocate_slot != TP_NO_JOB_SLOT && q->colocate_level >= 0)
		ly[k++] = (struct layer){n, (unsigned)q->colocate_level, 0, 0};
	if (k == 2 && ly[1].level < ly[0].level)
		k = 1; /* keep the deeper of the two */
	else if (k == 2)
		ly[0] = ly[1], k = 1;
	for (unsigned i = 0; i < q->nslices; i++)
		ly[k++] = (struct layer){q->ssize[i], q->slevel[i], 1, i};
	ly[k++] = (struct layer){q->gsize, q->glevel, 2, 0};
	ly[k++] = (struct layer){1, nl, 3, 0};
	return k;
}

/* A rank of unit `unit` of layer ly that is healthy, or UINT32_MAX. */
static uint32_t healthy_rank(const struct layer *ly, uint32_t unit, uint32_t n, const bool *bad)
{
	uint32_t f = unit * ly->size;
	for (uint32_t r = f; r < f + ly->size && r < n; r++)
		if (!bad[r])
			return r;
	return UINT32_MAX;
}

static int rclass_cmp(const void *x, const void *y)
{
	const struct rclass *a = x, *b = y;
	if (a->a != b->a)
		return a->a > b->a ? -1 : 1;
	return (a->first > b->first) - (a->first < b->first);
}

/* The sub-request of a class: the shape's inner layers below the anchor. */
static void sub_request(const struct tp_rq *shape, const struct layer *ly, int a, uint32_t cnt,
                        struct tp_rq *sub)
{
	*sub = *shape;
	sub->count = cnt;
	sub->required = -1;
	sub->preferred = shape->preferred;
	sub->spread_level = sub->spread_fd = -1;
	sub->spread_min = 0;
	sub->balanced = false;
	sub->nslices = 0;
	const struct layer *in = &ly[a + 1];
	if (in->kind == 0) {
		sub->required = shape->required;
	} else {
		sub->colocate_slot = a >= 0 ? TP_NO_JOB_SLOT : shape->colocate_slot;
		if (a >= 0)
			sub->colocate_level = -1;
	}
	if (in->kind <= 1) {
		unsigned from = in->kind == 1 ? in->slice : 0;
		for (unsigned i = from; i < shape->nslices; i++) {
			sub->slevel[sub->nslices] = shape->slevel[i];
			sub->ssize[sub->nslices++] = shape->ssize[i];
		}
	}
	if (in->kind == 3) {
		sub->gsize = 1;
		sub->glevel = ly[a + 1].level;
	}
	/* fd caps count the whole job: handled by the check after each class */
	sub->nfdcaps = 0;
}

struct rstate {
	const struct tp_cluster *c;
	const struct tp_job_impl *job;
	uint32_t slot;
	uint32_t *devs;   /* the job's new device list, rank order */
	bool *bad;        /* [ndev] rank still to be replaced */
	Pvoid_t down;     /* Judy1 of failed devices */
	Pvoid_t taken;    /* Judy1 of replacements given out */
};

/* Copy a Judy1 set. */
static void j1_copy(struct pctx *p, Pvoid_t *dst, Pcvoid_t src)
{
	JError_t je;
	Word_t k = 0;
	for (int r = src ? Judy1First(src, &k, &je) : 0; r == 1; r = Judy1Next(src, &k, &je))
		j1_set(p, dst, k);
}

/* Context for one class: the shape's sub-request with the job's devices already used. */
static int rctx_init(struct pctx *p, struct rstate *rs, const struct tp_rq *sub)
{
	int rc = ctx_init(p, rs->c, sub, rs->slot);
	if (rc)
		return rc;
	j1_copy(p, &p->extra_down, rs->down);
	j1_copy(p, &p->taken, rs->taken);
	for (uint32_t r = 0; r < rs->job->ndev; r++) {
		if (rs->bad[r])
			continue;
		uint32_t node = p->t->dev_node[rs->devs[r]];
		for (unsigned l = 0; l < p->nlev; l++)
			jl_add(p, &p->used[l], tp_node_ancestor(p->t, node, l), 1);
	}
	p->have_used = true;
	p->filtered = true;
	p->compact = true;
	p->single_to = -1;
	p->sl = -1;
	p->hist_ok[0] = false;
	return p->err;
}

/* The anchor's domain: level and index, or -1 for the whole cluster. */
static int anchor_of(const struct pctx *p, const struct rstate *rs, const struct layer *ly,
                     const struct rclass *cl, uint32_t *dom)
{
	if (cl->a < 0) {
		*dom = 0;
		return -1;
	}
	uint32_t r = healthy_rank(&ly[cl->a], cl->aunit, rs->job->ndev, rs->bad);
	*dom = tp_node_ancestor(p->t, p->t->dev_node[rs->devs[r]], ly[cl->a].level);
	return (int)ly[cl->a].level;
}

/* The smallest domain holding every healthy device of the job (level, or -1 for none). */
static int smallest_common(const struct pctx *p, const struct rstate *rs, uint32_t *dom)
{
	*dom = 0;
	for (int l = (int)p->nl; l >= 0; l--) {
		uint32_t d = TP_NONE;
		bool one = true;
		for (uint32_t r = 0; r < rs->job->ndev && one; r++) {
			if (rs->bad[r])
				continue;
			uint32_t a = tp_node_ancestor(p->t, p->t->dev_node[rs->devs[r]], (unsigned)l);
			one = d == TP_NONE || d == a;
			d = a;
		}
		if (one && d != TP_NONE) {
			*dom = d;
			return l;
		}
	}
	return -1;
}

/* Solve one class: place its fully failed inner units inside the anchor. 1, 0 or an error;
 * on 0, the context is left set up for classify(). */
/* Evaluate the replacements in domain `*dom` of level `*al`. Without an anchor, start in the
 * smallest domain holding the healthy devices and climb until they fit: staying inside a domain
 * adds no domain at its level or above, which every placement leaving it does, so the first
 * that fits is optimal. */
/* Whether the domains above (al, dom) can take cnt more devices under their caps: eval()
 * inside a domain applies the caps of that domain and below only. */
static bool ancestors_take(const struct pctx *p, int al, uint32_t dom, uint32_t cnt)
{
	uint32_t d = dom;
	for (int l = al - 1; l >= 0; l--) {
		d = p->t->lv[l + 1].parent[d];
		if (cap_left(p, (unsigned)l, d) < cnt)
			return false;
	}
	return true;
}

static int eval_climbing(struct pctx *p, const struct rclass *cl, int *al, uint32_t *dom,
                         uint32_t cnt, uint32_t *best)
{
	for (;;) {
		int r = ancestors_take(p, *al, *dom, cnt) ? eval(p, *al, *dom, cnt, colq(p, *al), best)
		                                          : 0;
		/* never above the anchor, nor above the level the job's shape requires */
		if (r != 0 || *al < 0 || cl->a >= 0 || (p->q->required >= 0 && *al <= p->q->required))
			return r;
		*dom = *al > 0 ? p->t->lv[*al].parent[*dom] : 0;
		(*al)--;
	}
}

static int replace_class(struct pctx *p, struct rstate *rs, const struct tp_rq *shape,
                         const struct layer *ly, const struct rclass *cl, struct tp_rq *sub,
                         uint32_t *need, int *ideal_ok)
{
	uint32_t n = rs->job->ndev, usz = ly[cl->a + 1].size;
	uint32_t asz = cl->a >= 0 ? ly[cl->a].size : n;
	uint32_t af = cl->a >= 0 ? cl->aunit * asz : 0;
	uint32_t cnt = 0;
	for (uint32_t r = af; r < af + asz && r < n; r++)
		cnt += rs->bad[r];
	*need = cnt;
	sub_request(shape, ly, cl->a, cnt, sub);
	int rc = rctx_init(p, rs, sub);
	if (!rc)
		rc = out_alloc(p, cnt);
	if (rc)
		return rc;
	uint32_t dom;
	int al = anchor_of(p, rs, ly, cl, &dom);
	if (al < 0)
		al = smallest_common(p, rs, &dom);
	if (al < 0) {
		/* no healthy device anchors the class (every rank of the job failed): the required
		 * and colocate levels must hold the replacements whole, as in tp_place */
		p->single_to = sub->required;
		if (sub->colocate_slot != TP_NO_JOB_SLOT && sub->colocate_level > p->single_to)
			p->single_to = sub->colocate_level;
	}
	uint32_t best[W_MAX];
	int r = eval_climbing(p, cl, &al, &dom, cnt, best);
	if (r == 0) {
		/* could it fit the anchor with every other job gone? (the job itself stays) */
		al = anchor_of(p, rs, ly, cl, &dom);
		if (al < 0)
			al = smallest_common(p, rs, &dom);
		go_ideal(p);
		r = eval_climbing(p, cl, &al, &dom, cnt, best);
		p->ideal = false;
		p->ideal_plain = false;
		p->filtered = true;
		jl_free(&p->memo);
		j1_free(&p->xknown);
		j1_free(&p->xdirty);
		build_xbad(p, false);
		p->root_kind = 0;
		*ideal_ok = r;
		return r < 0 ? r : 0;
	}
	if (r != 1)
		return r;
	int e = emit(p, al, dom, cnt, colq(p, al));
	if (e)
		return p->err ? p->err : e;
	/* the units of the emitted list, in order, replace the failed units in rank order */
	uint32_t at = 0;
	for (uint32_t u0 = af; u0 < af + asz && u0 < n; u0 += usz)
		for (uint32_t x = u0; x < u0 + usz && x < n; x++)
			if (rs->bad[x]) {
				uint32_t dev = p->out[at++];
				rs->devs[x] = dev;
				rs->bad[x] = false;
				j1_set(p, &rs->taken, dev);
			}
	return p->err ? p->err : (at == cnt ? 1 : TP_ECORRUPT);
}

/* A replacement refused after the fact (its list breaks a rule the classes do not see): the
 * fit figures as classify() gives them, FRAGMENTED since the replacements themselves were
 * found free. */
static void replace_fit(tp_placement *pl, struct pctx *p, uint32_t needed, int level)
{
	pl->has_fit = true;
	pl->fit.needed = needed;
	pl->fit.level = level < 0 ? 0 : level;
	pl->fit.free_total = matching_free(p);
	pl->fit.best = 0;
}

/* Domains of level l that a device list touches (a tree spread's measure). */
static uint32_t domains_touched(struct pctx *p, unsigned l, const uint32_t *devs, uint32_t n)
{
	Pvoid_t seen = NULL;
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t d = tp_node_ancestor(p->t, p->t->dev_node[devs[i]], l);
		if (!j1_test(seen, d)) {
			j1_set(p, &seen, d);
			k++;
		}
	}
	j1_free(&seen);
	return k;
}

static int replace_run(tp_placement *pl, const struct tp_cluster *c, uint32_t slot,
                       const uint32_t *failed, size_t nfailed)
{
	const struct tp_job_impl *job = c->jobs[slot];
	uint32_t n = job->ndev;
	struct rstate rs = {c, job, slot, NULL, NULL, NULL, NULL};
	struct tp_rq shape;
	bool has_shape = false;
	int rc = 0;
	char scratch[TP_ERRMSG_LEN];
	if (job->shape) {
		rc = tp_request_resolve(c->t, c, job->shape, TP_RQ_SHAPE, &pl->alloc, &shape, scratch);
		if (rc == TP_ENOMEM)
			return rc;
		has_shape = rc == 0;
	}
	if (!has_shape) {
		memset(&shape, 0, sizeof shape);
		shape.gsize = 1;
		shape.glevel = c->t->nlevels - 1;
		shape.required = shape.preferred = shape.exclusive = -1;
		shape.spread_level = shape.spread_fd = shape.colocate_level = -1;
		shape.colocate_slot = TP_NO_JOB_SLOT;
		for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
			shape.capdev[l] = shape.capgrp[l] = TP_RQ_NOCAP;
	}
	shape.id = job->id;
	shape.tenant = job->tenant;
	shape.count = n;
	rs.devs = tp_mallocn(&pl->alloc, n, sizeof *rs.devs);
	rs.bad = tp_calloc(&pl->alloc, n, sizeof *rs.bad);
	uint32_t *orig = tp_mallocn(&pl->alloc, n, sizeof *orig);
	struct rclass *cls = tp_mallocn(&pl->alloc, n, sizeof *cls);
	struct pctx p;
	memset(&p, 0, sizeof p);
	p.a = &c->alloc;
	if (!rs.devs || !rs.bad || !orig || !cls) {
		rc = TP_ENOMEM;
		goto out;
	}
	memcpy(rs.devs, job->devs, n * sizeof *rs.devs);
	memcpy(orig, job->devs, n * sizeof *orig);
	for (size_t i = 0; i < nfailed; i++)
		j1_set(&p, &rs.down, failed[i]);
	uint32_t nbad = 0;
	for (uint32_t r = 0; r < n; r++) {
		rs.bad[r] = j1_test(rs.down, job->devs[r]) || (c->dstate[job->devs[r]] & TP_DS_DOWN);
		if (rs.bad[r]) {
			j1_set(&p, &rs.down, job->devs[r]);
			nbad++;
		}
	}
	if (p.err) {
		rc = p.err;
		goto out;
	}
	struct layer ly[TP_MAX_LEVELS + 4];
	unsigned nly = shape_layers(&shape, n, c->t->nlevels - 1, ly);
	/* one class per (anchor layer, anchor unit) */
	uint32_t ncls = 0;
	for (uint32_t r = 0; r < n; r++) {
		if (!rs.bad[r])
			continue;
		int a = -1;
		for (int x = (int)nly - 1; x >= 0 && a < 0; x--)
			if (healthy_rank(&ly[x], r / ly[x].size, n, rs.bad) != UINT32_MAX)
				a = x;
		uint32_t au = a >= 0 ? r / ly[a].size : 0;
		bool seen = false;
		for (uint32_t i = 0; i < ncls && !seen; i++)
			seen = cls[i].a == a && cls[i].aunit == au;
		if (!seen)
			cls[ncls++] = (struct rclass){a, au, r};
	}
	qsort(cls, ncls, sizeof *cls, rclass_cmp);
	struct tp_rq sub;
	for (uint32_t i = 0; i < ncls && !rc; i++) {
		uint32_t need;
		int ideal_ok = -1;
		int r = replace_class(&p, &rs, &shape, ly, &cls[i], &sub, &need, &ideal_ok);
		if (r == 0) {
			rc = classify(pl, &p, need, nbad, shape.required, ideal_ok);
		} else if (r < 0) {
			rc = r;
		} else if (has_fd_rules(&shape) && i + 1 == ncls) {
			/* failure-domain caps count the whole job: check the final list */
			struct pctx q;
			rc = ctx_init(&q, c, &shape, slot);
			bool ok = true;
			if (!rc)
				rc = fd_check(&q, rs.devs, n, &ok);
			if (!rc && !ok) {
				replace_fit(pl, &q, nbad, 0);
				rc = tp_seterr(pl->errmsg, TP_EFRAGMENTED,
				               "fragmented: the replacements would break the job's "
				               "failure-domain caps or spread");
			}
			ctx_fini(&q);
		}
		if (!rc && i + 1 == ncls && shape.spread_level >= 0 && shape.spread_min >= 2) {
			/* the classes are placed without the tree spread (it couples them): refuse a
			 * list that spreads less than the job's did, below the shape's minimum */
			unsigned l = (unsigned)shape.spread_level;
			uint32_t now = domains_touched(&p, l, rs.devs, n);
			uint32_t before = domains_touched(&p, l, orig, n);
			if (p.err)
				rc = p.err;
			if (!rc && now < shape.spread_min && now < before) {
				replace_fit(pl, &p, nbad, (int)l);
				rc = tp_seterr(pl->errmsg, TP_EFRAGMENTED,
				               "fragmented: the replacements would leave job '%s' on %u "
				               "domains of %s, below its spread of %u", job->id, now,
				               c->t->lv[l].name, shape.spread_min);
			}
		}
		if (i + 1 < ncls || rc)
			ctx_fini(&p);
	}
	if (!rc) {
		pl->failed = tp_mallocn(&pl->alloc, 2 * (size_t)(nbad ? nbad : 1), sizeof *pl->failed);
		if (!pl->failed) {
			rc = TP_ENOMEM;
		} else {
			pl->repl = pl->failed + nbad;
			for (uint32_t r = 0; r < n; r++)
				if (orig[r] != rs.devs[r]) {
					pl->failed[pl->nrepl] = orig[r];
					pl->repl[pl->nrepl++] = rs.devs[r];
				}
			rc = finish_ok(pl, &p, rs.devs, n);
		}
		ctx_fini(&p);
	}
out:
	if (rc == TP_ECORRUPT)
		tp_seterr(pl->errmsg, rc, "internal error: the replacements did not add up");
	else if (rc < 0 && rc != TP_ENOMEM && !pl->errmsg[0])
		/* a sub-request built from the job's shape was refused without a message of its own */
		tp_seterr(pl->errmsg, rc,
		          "replace: the failed devices of job '%s' cannot be replaced under its shape "
		          "(%s)", job->id, tp_strerror(rc));
	j1_free(&rs.down);
	j1_free(&rs.taken);
	ar_release(&p, (struct amark){NULL, 0});
	tp_free(&pl->alloc, rs.devs);
	tp_free(&pl->alloc, rs.bad);
	tp_free(&pl->alloc, orig);
	tp_free(&pl->alloc, cls);
	if (has_shape)
		tp_rq_release(&pl->alloc, &shape);
	return rc;
}

int tp_replace(const tp_cluster *c, const char *job, const uint32_t *failed, size_t nfailed,
               tp_placement **out)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!c || !job || (nfailed && !failed))
		return TP_EINVAL;
	tp_placement *pl = placement_new(c, true);
	if (!pl)
		return TP_ENOMEM;
	int rc = 0;
	uint32_t slot = tp_cluster_job_slot(c, job);
	if (slot == TP_NO_JOB)
		rc = tp_seterr(pl->errmsg, TP_ENOTFOUND, "replace.job: no running job '%s'", job);
	else if (nfailed == 0)
		rc = tp_seterr(pl->errmsg, TP_EINVAL, "replace.failed: at least one device is needed");
	for (size_t i = 0; i < nfailed && !rc; i++) {
		if (failed[i] >= c->t->ndevices)
			rc = tp_seterr(pl->errmsg, TP_EINVAL, "replace.failed[%zu]: no device %u", i,
			               failed[i]);
		else if (c->dev_job[failed[i]] != slot)
			rc = tp_seterr(pl->errmsg, TP_EINVAL,
			               "replace.failed[%zu]: device %s/%u is not held by job '%s'", i,
			               c->t->lv[c->t->nlevels - 1].dname[c->t->dev_node[failed[i]]],
			               failed[i] - c->t->dev_first[c->t->dev_node[failed[i]]], job);
	}
	if (!rc) {
		pl->job = tp_strdup(&pl->alloc, job);
		rc = pl->job ? replace_run(pl, c, slot, failed, nfailed) : TP_ENOMEM;
	}
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		return TP_ENOMEM;
	}
	pl->status = rc;
	*out = pl;
	return rc;
}
