/* SPDX-License-Identifier: MIT */
/*
 * NVLink partitions in the solver: the node filter that keeps the partition rules, and the
 * partitions of a result (tp_placement_partition_count, tp_placement_partition). The rules
 * and the state are the cluster's (cluster_partition.c); this file only reads them.
 */
#include <stdlib.h>
#include <string.h>

#include "place_internal.h"

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Whether the job at slot self holds a partition in dom (it keeps its channel there). */
static bool self_has(const struct pctx *p, uint32_t dom)
{
	if (p->self_slot == TP_NO_JOB)
		return false;
	const struct tp_job_impl *j = job_at(p->c, p->self_slot);
	for (uint32_t i = 0; j && i < j->nparts; i++)
		if (j->parts[i].dom == dom)
			return true;
	return false;
}

static bool foreign_job_on(const struct pctx *p, uint32_t node, const char *tenant)
{
	const struct tp_cluster *c = p->c;
	for (uint32_t d = p->t->dev_first[node]; d < p->t->dev_first[node + 1]; d++) {
		uint32_t j = c->dev_job[d];
		if (j != TP_NO_JOB && j != p->self_slot && strcmp(job_at(c, j)->tenant, tenant) != 0)
			return true;
	}
	return false;
}

static const char *rq_tenant(const struct pctx *p)
{
	return p->self_slot != TP_NO_JOB ? job_at(p->c, p->self_slot)->tenant : p->q->tenant;
}

bool tp_pl_part_refuses(const struct pctx *p, uint32_t node)
{
	const struct tp_cluster *c = p->c;
	if (c->part_level < 0 || p->ideal || p->part_mode == 0)
		return false;
	uint32_t o;
	const char *tenant = rq_tenant(p);
	if (tp_cl_part_other(c, node, p->self_slot, &o))
		return p->part_mode == 2 || strcmp(job_at(c, o)->tenant, tenant) != 0;
	if (p->part_mode < 2)
		return false;
	uint32_t dom = tp_node_ancestor(p->t, node, (unsigned)c->part_level);
	if (!tp_cl_part_domain(c, dom))
		return false;
	if (c->part_used[dom] >= c->part_channels && !self_has(p, dom))
		return true;
	return foreign_job_on(p, node, tenant);
}

int tp_pl_part_result(tp_placement *pl, const struct pctx *p, const uint32_t *devs, size_t n,
                      char *why)
{
	const struct tp_cluster *c = p->c;
	if (c->part_level < 0)
		return 0;
	const struct tp_job_impl *self = p->self_slot != TP_NO_JOB ? job_at(c, p->self_slot) : NULL;
	struct tp_job_part *parts = NULL;
	uint32_t np = 0;
	int rc = tp_cl_part_build(c, p->self_slot, rq_tenant(p), devs, n, self ? self->parts : NULL,
	                          self ? self->nparts : 0, &parts, &np, why);
	if (rc || !np)
		return rc;
	size_t nn = 0;
	for (uint32_t i = 0; i < np; i++)
		nn += parts[i].nnodes;
	/* one block: the partitions, then their nodes */
	size_t bytes = np * sizeof *parts + nn * sizeof(uint32_t);
	struct tp_job_part *blk = tp_malloc(&pl->alloc, bytes);
	if (!blk) {
		tp_free(&c->alloc, parts);
		return TP_ENOMEM;
	}
	memcpy(blk, parts, np * sizeof *parts);
	tp_free(&c->alloc, parts);
	uint32_t *nodes = (uint32_t *)(void *)(blk + np);
	/* the nodes of each partition in ascending order: a partition's nodes are the result's
	 * nodes in its domain, and nodes of a domain are numbered contiguously */
	unsigned L = (unsigned)c->part_level;
	uint32_t *u = tp_mallocn(&pl->alloc, n, sizeof *u);
	if (!u) {
		tp_free(&pl->alloc, blk);
		return TP_ENOMEM;
	}
	for (size_t x = 0; x < n; x++)
		u[x] = p->t->dev_node[devs[x]];
	qsort(u, n, sizeof *u, cmp_u32);
	size_t k = 0;
	for (size_t x = 0, i = 0; x < n && i < np; x++) {
		if (x && u[x] == u[x - 1])
			continue;
		uint32_t dom = tp_node_ancestor(p->t, u[x], L);
		while (i < np && blk[i].dom < dom)
			i++;
		if (i < np && blk[i].dom == dom && k < nn)
			nodes[k++] = u[x];
	}
	tp_free(&pl->alloc, u);
	pl->parts = blk;
	pl->nparts = np;
	pl->part_nodes = nodes;
	return k == nn ? 0 : TP_ECORRUPT;
}

void tp_pl_part_forget(tp_placement *pl)
{
	tp_free(&pl->alloc, pl->devs);
	tp_free(&pl->alloc, pl->nic);
	tp_free(&pl->alloc, pl->parts);
	pl->devs = NULL;
	pl->nic = NULL;
	pl->parts = NULL;
	pl->part_nodes = NULL;
	pl->ndev = 0;
	pl->nparts = 0;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		pl->dom[l] = pl->dcnt[l] = NULL;
		pl->ndom[l] = 0;
	}
	pl->comm_us = 0.0;
	pl->errmsg[0] = '\0';
}

size_t tp_placement_partition_count(const tp_placement *p)
{
	return p && p->status == 0 ? p->nparts : 0;
}

int tp_placement_partition(const tp_placement *p, size_t i, uint32_t *dom, uint32_t *channel,
                           const uint32_t **nodes, size_t *n)
{
	if (!p)
		return TP_EINVAL;
	if (p->status != 0 || i >= p->nparts)
		return TP_ENOTFOUND;
	size_t off = 0;
	for (size_t k = 0; k < i; k++)
		off += p->parts[k].nnodes;
	if (dom)
		*dom = p->parts[i].dom;
	if (channel)
		*channel = p->parts[i].channel;
	if (nodes)
		*nodes = p->part_nodes + off;
	if (n)
		*n = p->parts[i].nnodes;
	return 0;
}
