/* SPDX-License-Identifier: MIT */
/*
 * Hot spares: nodes held back from ordinary placement for tp_replace.
 *
 * A spare node has TP_DS_SPARE on every device (cluster_impl.h): it is not free, so every
 * aggregate, index and placement leaves it out at no cost per request; tp_replace asks for
 * spares explicitly (place_usable.c). The spare counts per domain are kept by the health path
 * (cluster_index.c, spare_changed) and logged with it, so savepoints cover every mark.
 *
 * The policy (tp_cluster_set_spares) keeps k spares in every domain of a level. After each
 * change of devices (assign, release, rebind, health) tp_cl_spare_upkeep() looks only at the
 * nodes and policy domains of the devices changed: a spare node that is no longer healthy and
 * free loses its mark; a policy domain with fewer than k spares takes its last healthy free
 * nodes (highest index first) until it has k. A domain that has its k spares costs one compare;
 * one that lacks them is scanned (its nodes only) on each change inside it.
 */
#include "cluster_impl.h"

#include <stdio.h>
#include <string.h>

/* Whether node can be a spare: every device healthy, uncordoned, held by no job (a spare's
 * own mark is allowed). */
static bool node_eligible(const struct tp_cluster *c, uint32_t node)
{
	const struct tp_topology *t = c->t;
	for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++)
		if ((c->dstate[d] & ~TP_DS_SPARE) || c->dev_job[d] != TP_NO_JOB)
			return false;
	return true;
}

static bool node_spare(const struct tp_cluster *c, uint32_t node)
{
	return (c->dstate[c->t->dev_first[node]] & TP_DS_SPARE) != 0;
}

/* Set or clear the mark on every device of node (logged while a savepoint is open; the room
 * is the caller's to reserve: one entry per device). */
static void node_mark(struct tp_cluster *c, uint32_t node, bool on)
{
	const struct tp_topology *t = c->t;
	uint32_t devs[TP_MAX_NODE_DEVICES], n = 0;
	for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++)
		devs[n++] = d;
	struct devop op = {.kind = OP_HEALTH, .mask = TP_DS_SPARE,
	                   .value = on ? TP_DS_SPARE : 0, .log = c->nsp > 0};
	tp_cl_apply_devs(c, devs, n, &op);
}

/* Give domain dom of the policy level its k spares from its last eligible nodes. */
static void refill(struct tp_cluster *c, uint32_t dom)
{
	uint32_t have = c->spare_nodes[c->spare_level][dom];
	if (have >= c->spare_k)
		return;
	uint32_t first, n;
	tp_dom_nodes(c->t, c->spare_level, dom, &first, &n);
	for (uint32_t x = first + n; x-- > first && have < c->spare_k;)
		if (!node_spare(c, x) && node_eligible(c, x)) {
			node_mark(c, x, true);
			have++;
		}
}

size_t tp_cl_spare_need(const struct tp_cluster *c, size_t n)
{
	if (!c->spare_k && !c->nspare_nodes)
		return 0;
	/* per device: its node's marks dropped, and a refill of its domain */
	size_t per = (size_t)(c->hstride - 1) * (1 + c->spare_k);
	return n > SIZE_MAX / per ? SIZE_MAX / 2 : n * per;
}

void tp_cl_spare_upkeep(struct tp_cluster *c, const uint32_t *devs, size_t n)
{
	if (!c->spare_k && !c->nspare_nodes)
		return;
	const struct tp_topology *t = c->t;
	uint32_t last = TP_NONE;
	for (size_t i = 0; i < n; i++) {
		uint32_t node = t->dev_node[devs[i]];
		if (node != last && node_spare(c, node) && !node_eligible(c, node))
			node_mark(c, node, false);
		last = node;
	}
	if (!c->spare_k)
		return;
	last = TP_NONE;
	for (size_t i = 0; i < n; i++) {
		uint32_t dom = tp_node_ancestor(t, t->dev_node[devs[i]], c->spare_level);
		if (dom != last)
			refill(c, dom);
		last = dom;
	}
}

/* ---- the public calls ---------------------------------------------------------------------- */

/* The most nodes a domain of level l holds. */
static uint32_t max_dom_nodes(const struct tp_topology *t, unsigned l)
{
	uint32_t m = 0;
	for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
		uint32_t f, n;
		tp_dom_nodes(t, l, d, &f, &n);
		if (n > m)
			m = n;
	}
	return m;
}

static int spares_check(struct tp_cluster *c, unsigned level, unsigned k, unsigned flags)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	if (flags)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "spares.flags 0x%x: no flag is defined (pass 0)", flags);
	if (k == 0)
		return 0;
	if (level >= nl)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "spares.level %u is not a level above the node (the topology has %u "
		                 "levels, the node is level %u)", level, t->nlevels, nl);
	uint32_t most = max_dom_nodes(t, level);
	if (k > most)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "spares.k %u exceeds the %u nodes of the largest %s", k, most,
		                 t->lv[level].name);
	return 0;
}

static int spares_set(struct tp_cluster *c, unsigned level, unsigned k, unsigned flags)
{
	int rc = spares_check(c, level, k, flags);
	if (rc)
		return rc;
	const struct tp_topology *t = c->t;
	size_t need = 1 + (size_t)c->nspare_nodes * (c->hstride - 1) +
	              (size_t)k * t->lv[k ? level : 0].ndom * (c->hstride - 1);
	if (tp_cl_undo_reserve(c, need))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory setting %u spares per %s", k,
		                 t->lv[k ? level : 0].name);
	tp_cl_idx_repair(c);
	if (c->nsp)
		tp_cl_undo_push(c, (struct tp_undo){.kind = TP_UNDO_SPARES, .slot = c->spare_level,
		                                    .ndev = c->spare_k});
	for (uint32_t x = 0; x < t->nnodes && c->nspare_nodes; x++)
		if (node_spare(c, x))
			node_mark(c, x, false);
	c->spare_level = k ? level : 0;
	c->spare_k = k;
	for (uint32_t d = 0; k && d < t->lv[level].ndom; d++)
		refill(c, d);
	c->generation = ++c->generations;
	return 0;
}

int tp_cluster_set_spares(tp_cluster *c, unsigned level, unsigned k, unsigned flags)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, spares_set(c, level, k, flags));
}

/* Why node cannot be a spare, into the cluster's message: 0 when it can. */
static int node_why_not(struct tp_cluster *c, uint32_t node)
{
	const struct tp_topology *t = c->t;
	const char *name = t->lv[tp_node_level(t)].dname[node];
	for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++) {
		unsigned i = (unsigned)(d - t->dev_first[node]);
		if (c->dev_job[d] != TP_NO_JOB)
			return tp_seterr(c->errmsg, TP_EEXIST,
			                 "spare.node %s: device %s/%u is held by job '%s'", name, name, i,
			                 c->jobs[c->dev_job[d]]->id);
		if (c->dstate[d] & (TP_DS_DOWN | TP_DS_CORDONED))
			return tp_seterr(c->errmsg, TP_EBUSY, "spare.node %s: device %s/%u is %s", name,
			                 name, i, (c->dstate[d] & TP_DS_DOWN) ? "down" : "cordoned");
	}
	return 0;
}

static int node_spare_set(struct tp_cluster *c, uint32_t node, int spare)
{
	const struct tp_topology *t = c->t;
	if (node >= t->nnodes)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "spare.node %u is out of range (the topology has %u nodes)", node,
		                 t->nnodes);
	if (spare != 0 && spare != 1)
		return tp_seterr(c->errmsg, TP_EINVAL, "spare %d is not 0 or 1", spare);
	if (node_spare(c, node) == (spare != 0))
		return 0;
	int rc = spare ? node_why_not(c, node) : 0;
	if (rc)
		return rc;
	if (tp_cl_undo_reserve(c, tp_node_ndev(t, node)))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory marking node %s",
		                 t->lv[tp_node_level(t)].dname[node]);
	tp_cl_idx_repair(c);
	node_mark(c, node, spare != 0);
	c->generation = ++c->generations;
	return 0;
}

int tp_cluster_set_node_spare(tp_cluster *c, uint32_t node, int spare)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, node_spare_set(c, node, spare));
}

int tp_cluster_node_is_spare(const tp_cluster *c, uint32_t node)
{
	if (!c || node >= c->t->nnodes)
		return TP_EINVAL;
	return node_spare(c, node);
}

uint32_t tp_cluster_spare_count(const tp_cluster *c, unsigned level, uint32_t dom)
{
	if (!c || level >= c->t->nlevels || dom >= c->t->lv[level].ndom)
		return 0;
	if (level == tp_node_level(c->t))
		return node_spare(c, dom);
	return c->spare_nodes[level][dom];
}

uint32_t tp_cluster_spare_total_count(const tp_cluster *c)
{
	return c ? c->nspare_nodes : 0;
}

int tp_cluster_spare_policy(const tp_cluster *c, unsigned *level, unsigned *k)
{
	if (!c)
		return TP_EINVAL;
	if (level)
		*level = c->spare_level;
	if (k)
		*k = c->spare_k;
	return 0;
}
