/* SPDX-License-Identifier: MIT */
/*
 * The Slurm baselines of the simulator: slurm-block-like (topology/block) and slurm-tree-like
 * (topology/tree). Our own code, written from reading Slurm's (SchedMD/slurm, commit 284c3b95):
 * docs/benchmarks.md names the file and function each rule comes from and what is left out.
 *
 * Both see the fleet as Slurm would be configured on it: the domains just above the node are
 * the base blocks (topology/block) or leaf switches (topology/tree): NVL72 racks, HGX scalable
 * units. A job of more than one node takes whole free nodes (exclusive nodes, the way GPU
 * training jobs are submitted); a job of one node or less shares a node.
 */
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct slurm_st {
	uint32_t nbase;
	uint32_t bnc;        /* nodes of the largest base block (Slurm's bblock_node_cnt) */
	unsigned max_level;  /* largest block level: 2^max_level base blocks cover the fleet */
	uint32_t *fn;        /* [nbase] wholly free nodes not yet taken by this job */
	uint32_t *node_first, *node_n; /* [nbase] the nodes of each base block */
	uint8_t *taken;      /* [nodes] taken by the job being placed */
	uint32_t *taken_list;
	uint32_t ntaken;
};

void *sim_slurm_create(struct sim_ctx *ctx)
{
	const struct sim_fleet *f = ctx->f;
	struct slurm_st *s = calloc(1, sizeof *s);
	if (!s)
		bench_die("out of memory");
	s->nbase = tp_topology_domain_count(f->t, f->base_level);
	uint32_t nn = tp_topology_node_count(f->t);
	s->fn = calloc(s->nbase, sizeof *s->fn);
	s->node_first = calloc(s->nbase, sizeof *s->node_first);
	s->node_n = calloc(s->nbase, sizeof *s->node_n);
	s->taken = calloc(nn, 1);
	s->taken_list = calloc(nn, sizeof *s->taken_list);
	if (!s->fn || !s->node_first || !s->node_n || !s->taken || !s->taken_list)
		bench_die("out of memory");
	for (uint32_t b = 0; b < s->nbase; b++) {
		BENCH_CHECK(tp_topology_domain_nodes(f->t, f->base_level, b, &s->node_first[b],
		                                     &s->node_n[b]), "tp_topology_domain_nodes");
		s->bnc = s->node_n[b] > s->bnc ? s->node_n[b] : s->bnc;
	}
	while ((1u << s->max_level) < s->nbase)
		s->max_level++;
	return s;
}

void sim_slurm_destroy(void *st)
{
	struct slurm_st *s = st;
	free(s->fn);
	free(s->node_first);
	free(s->node_n);
	free(s->taken);
	free(s->taken_list);
	free(s);
}

/* Nodes the job needs: whole nodes of node_gpus, the last one possibly partly used. */
static uint32_t job_nodes(const struct sim_fleet *f, const struct sim_job *j)
{
	return (j->gpus + f->node_gpus - 1) / f->node_gpus;
}

/*
 * One node or less: the base block with the fewest nodes able to host the job (ties: the
 * last, as the block choice of eval_nodes_block() with level 0), then its first such node in
 * bitmap order; the node's lowest free devices.
 */
static int slurm_one_node(struct slurm_st *s, struct sim_ctx *ctx, const struct sim_job *j,
                          uint32_t *devs)
{
	const struct sim_fleet *f = ctx->f;
	uint32_t best = TP_NONE, best_cnt = UINT32_MAX, best_node = TP_NONE;
	for (uint32_t b = 0; b < s->nbase; b++) {
		if (tp_cluster_free_count(ctx->c, f->base_level, b) < j->gpus)
			continue;
		uint32_t cnt = 0, first = TP_NONE;
		for (uint32_t node = s->node_first[b]; node < s->node_first[b] + s->node_n[b]; node++)
			if (tp_cluster_free_count(ctx->c, f->node_level, node) >= j->gpus) {
				if (first == TP_NONE)
					first = node;
				cnt++;
			}
		if (cnt && cnt <= best_cnt) { /* ties: the last, as eval_nodes_block()'s "<=" */
			best = b;
			best_cnt = cnt;
			best_node = first;
		}
	}
	if (best == TP_NONE)
		return TP_EFRAGMENTED;
	bench_node_free_devices(ctx->c, best_node, devs, j->gpus);
	return 0;
}

/* Take up to `want` wholly free, not yet taken nodes of base block b in bitmap order. */
static uint32_t take_nodes(struct slurm_st *s, struct sim_ctx *ctx, uint32_t b, uint32_t want)
{
	const struct sim_fleet *f = ctx->f;
	uint32_t got = 0;
	for (uint32_t node = s->node_first[b];
	     node < s->node_first[b] + s->node_n[b] && got < want; node++) {
		if (s->taken[node] || tp_cluster_free_count(ctx->c, f->node_level, node) != f->node_gpus)
			continue;
		s->taken[node] = 1;
		s->taken_list[s->ntaken++] = node;
		got++;
	}
	s->fn[b] -= got;
	return got;
}

/* The devices of the taken nodes, in the order taken; the last node may be partly used. */
static void taken_devices(struct slurm_st *s, struct sim_ctx *ctx, const struct sim_job *j,
                          uint32_t *devs)
{
	uint32_t got = 0;
	for (uint32_t i = 0; i < s->ntaken; i++) {
		uint32_t want = j->gpus - got < ctx->f->node_gpus ? j->gpus - got : ctx->f->node_gpus;
		got += bench_node_free_devices(ctx->c, s->taken_list[i], devs + got, want);
	}
}

static void untake(struct slurm_st *s)
{
	for (uint32_t i = 0; i < s->ntaken; i++)
		s->taken[s->taken_list[i]] = 0;
	s->ntaken = 0;
}

static void count_free(struct slurm_st *s, struct sim_ctx *ctx, uint64_t *total)
{
	*total = 0;
	for (uint32_t b = 0; b < s->nbase; b++) {
		s->fn[b] = tp_cluster_free_node_count(ctx->c, ctx->f->base_level, b);
		*total += s->fn[b];
	}
}

/*
 * NVIDIA's segment advice for NVL72 (16 nodes for jobs of 128 GPUs and more, 4 nodes for 32 to
 * 64 GPUs), only where the segment divides the node count (Slurm rejects a job whose segment
 * does not divide it, so such a job is submitted without one); 0: no segment.
 */
uint32_t sim_slurm_segment(const struct sim_fleet *f, const struct sim_job *j)
{
	if (f->nv_level >= f->node_level) /* no NVLink domain above the node (HGX) */
		return 0;
	uint32_t nodes = job_nodes(f, j);
	uint32_t seg = j->gpus >= 128 ? 16 : j->gpus >= 32 && j->gpus <= 64 ? 4 : 0;
	return seg && seg < nodes && nodes % seg == 0 ? seg : 0;
}

/*
 * One segment of `rem` nodes (the whole job when it has none): the block level is the smallest
 * whose blocks have as many base blocks as the segment needs; among the blocks of that level
 * (aligned runs of 2^level base blocks) that have `rem` free nodes, the one with the fewest
 * (ties: the last); none: the job waits (ESLURM_TOPO_NO_FIT). Inside it, base blocks one at a
 * time: one that holds the rest, the fewest free nodes first, else the one with the most.
 */
static int slurm_block_segment(struct slurm_st *s, struct sim_ctx *ctx, uint32_t rem)
{
	uint32_t need_bb = (rem + s->bnc - 1) / s->bnc;
	unsigned level = 0;
	while ((1u << level) < need_bb)
		level++;
	if (level > s->max_level)
		return TP_EINFEASIBLE;
	uint32_t run = 1u << level, best = TP_NONE;
	uint64_t best_cnt = 0;
	for (uint32_t lo = 0; lo < s->nbase; lo += run) {
		uint64_t cnt = 0;
		for (uint32_t b = lo; b < lo + run && b < s->nbase; b++)
			cnt += s->fn[b];
		if (cnt >= rem && (best == TP_NONE || cnt <= best_cnt)) {
			best = lo;
			best_cnt = cnt;
		}
	}
	if (best == TP_NONE)
		return TP_EFRAGMENTED;
	uint32_t hi = best + run < s->nbase ? best + run : s->nbase;
	while (rem > 0) {
		uint32_t pick = TP_NONE;
		bool pick_fit = false;
		for (uint32_t b = best; b < hi; b++) {
			if (!s->fn[b])
				continue;
			bool fit = s->fn[b] >= rem;
			if (pick == TP_NONE || (fit && !pick_fit) ||
			    (!fit && !pick_fit && s->fn[b] >= s->fn[pick]) ||
			    (fit && s->fn[b] <= s->fn[pick])) {
				pick = b;
				pick_fit = fit;
			}
		}
		if (pick == TP_NONE)
			bench_die("slurm-block-like: block lost its free nodes");
		rem -= take_nodes(s, ctx, pick, rem);
	}
	return 0;
}

int sim_slurm_block_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                          uint32_t *devs)
{
	(void)jid;
	struct slurm_st *s = st;
	const struct sim_fleet *f = ctx->f;
	if (tp_cluster_free_total_count(ctx->c) < j->gpus)
		return TP_EBUSY;
	if (j->gpus <= f->node_gpus)
		return slurm_one_node(s, ctx, j, devs);
	uint32_t nodes = job_nodes(f, j), seg = sim_slurm_segment(f, j);
	uint64_t total;
	count_free(s, ctx, &total);
	if (total < nodes)
		return TP_EBUSY;
	uint32_t nseg = seg ? nodes / seg : 1, size = seg ? seg : nodes;
	for (uint32_t k = 0; k < nseg; k++) { /* segments one by one, each in its own block */
		int rc = slurm_block_segment(s, ctx, size);
		if (rc < 0) {
			untake(s);
			return rc;
		}
	}
	taken_devices(s, ctx, j, devs);
	untake(s);
	return 0;
}

/* ---- slurm-tree-like ---------------------------------------------------------------------- */

/* The level of the lowest common ancestor of base blocks a and b (-1: only the cluster). */
static int tree_common(const struct sim_fleet *f, uint32_t a, uint32_t b)
{
	int l = (int)f->base_level;
	while (l >= 0 && a != b) {
		if (l == 0)
			return -1;
		a = tp_topology_domain_parent(f->t, (unsigned)l, a);
		b = tp_topology_domain_parent(f->t, (unsigned)l, b);
		l--;
	}
	return l;
}

/*
 * topology/tree, for a job of more than one node: the lowest switch (domain) whose subtree has
 * enough free nodes, best fit (the fewest free nodes; ties: the first); inside it, one leaf
 * switch that holds the whole job (the fewest free nodes) if there is one, else leaf switches
 * from the one with the most free nodes, each next one the nearest to the first (the deepest
 * common switch), tightest that holds the rest, else the largest. Best effort: the job spans
 * as many leaf switches as it must; it waits only when the cluster has too few free nodes.
 */
int sim_slurm_tree_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                         uint32_t *devs)
{
	(void)jid;
	struct slurm_st *s = st;
	const struct sim_fleet *f = ctx->f;
	if (tp_cluster_free_total_count(ctx->c) < j->gpus)
		return TP_EBUSY;
	if (j->gpus <= f->node_gpus)
		return slurm_one_node(s, ctx, j, devs);
	uint32_t nodes = job_nodes(f, j);
	uint64_t total;
	count_free(s, ctx, &total);
	if (total < nodes)
		return TP_EBUSY;
	/* The lowest level with a domain holding the job; best fit among its domains. */
	int top_level = -1;
	uint32_t top = 0;
	for (int l = (int)f->base_level; l >= 0 && top_level < 0; l--) {
		uint32_t nd = tp_topology_domain_count(f->t, (unsigned)l);
		uint64_t best_cnt = UINT64_MAX;
		for (uint32_t d = 0; d < nd; d++) {
			uint64_t cnt = tp_cluster_free_node_count(ctx->c, (unsigned)l, d);
			if (cnt >= nodes && cnt < best_cnt) {
				best_cnt = cnt;
				top = d;
				top_level = l;
			}
		}
	}
	uint32_t lo = 0, hi = s->nbase; /* the base blocks under the chosen switch */
	if (top_level >= 0) {
		uint32_t first, n;
		BENCH_CHECK(tp_topology_domain_nodes(f->t, (unsigned)top_level, top, &first, &n),
		            "tp_topology_domain_nodes");
		lo = tp_topology_node_domain(f->t, first, f->base_level);
		hi = tp_topology_node_domain(f->t, first + n - 1, f->base_level) + 1;
	}
	uint32_t rem = nodes, anchor = TP_NONE;
	while (rem > 0) {
		uint32_t pick = TP_NONE;
		int pick_near = -2;
		bool pick_fit = false;
		for (uint32_t b = lo; b < hi; b++) {
			if (!s->fn[b])
				continue;
			int near = anchor == TP_NONE ? 0 : tree_common(f, anchor, b);
			bool fit = s->fn[b] >= rem;
			bool better;
			if (pick == TP_NONE || near > pick_near)
				better = true;
			else if (near < pick_near)
				better = false;
			else if (fit != pick_fit)
				better = fit;
			else if (fit)
				better = s->fn[b] < s->fn[pick];
			else
				better = s->fn[b] > s->fn[pick];
			if (better) {
				pick = b;
				pick_near = near;
				pick_fit = fit;
			}
		}
		if (pick == TP_NONE)
			bench_die("slurm-tree-like: switch lost its free nodes");
		if (anchor == TP_NONE)
			anchor = pick;
		rem -= take_nodes(s, ctx, pick, rem);
	}
	taken_devices(s, ctx, j, devs);
	untake(s);
	return 0;
}
