/* SPDX-License-Identifier: MIT */
/*
 * The per-domain aggregates of a cluster state and their queries: applying device changes
 * node by node (free counts, whole free nodes, histograms of node free counts, checkpoint
 * histograms, the Judy1 index of domains by free count), the tightest-domain and histogram
 * queries, and the read-only device and job getters.
 *
 * Every change goes through tp_cl_apply_devs(), which walks the devices in runs of one node,
 * computes the node's old and new free count once per run, and updates the ancestors'
 * aggregates; the Judy1 index of each touched domain is updated once, when the walk leaves
 * that domain.
 */
#include "cluster_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the Judy1 index of domains by free count ---------------------------------------------- */

static void idx_drop(struct tp_cluster *c, unsigned l)
{
	JError_t err;
	Judy1FreeArray(&c->index[l], &err);
	c->index[l] = NULL;
	c->indexed[l] = false;
	c->index_lost = true;
}

/* Move domain dom of level l from free count `from` to `to` in the index. */
static void idx_move(struct tp_cluster *c, unsigned l, uint32_t dom, uint32_t from, uint32_t to)
{
	if (!c->indexed[l] || from == to)
		return;
	JError_t err;
	if (from && Judy1Unset(&c->index[l], tp_cl_idx_key(from, dom), &err) == JERR)
		goto fail;
	if (to && Judy1Set(&c->index[l], tp_cl_idx_key(to, dom), &err) == JERR)
		goto fail;
	return;
fail:
	idx_drop(c, l);
}

/* Build the index of level l from the free counts. */
int tp_cl_idx_build(const struct tp_cluster *c, unsigned l, Pvoid_t *out)
{
	Pvoid_t arr = NULL;
	JError_t err;
	for (uint32_t d = 0; d < c->t->lv[l].ndom; d++) {
		uint32_t f = c->free[l][d];
		if (f && Judy1Set(&arr, tp_cl_idx_key(f, d), &err) == JERR) {
			Judy1FreeArray(&arr, &err);
			return TP_ENOMEM;
		}
	}
	*out = arr;
	return 0;
}

/* Rebuild indexes that a Judy failure dropped (best effort: they stay dropped on failure). */
void tp_cl_idx_repair(struct tp_cluster *c)
{
	if (!c->index_lost)
		return;
	c->index_lost = false;
	for (unsigned l = 0; l < c->t->nlevels; l++) {
		if (c->indexed[l])
			continue;
		if (tp_cl_idx_build(c, l, &c->index[l]) == 0)
			c->indexed[l] = true;
		else
			c->index_lost = true;
	}
}

/* ---- applying device changes ---------------------------------------------------------------- */

/* Per level above the node: the domain whose index update is pending, and its free count when
 * the walk entered it. */
struct batch {
	uint32_t dom[TP_MAX_LEVELS];
	uint32_t old[TP_MAX_LEVELS];
};

static void batch_init(struct batch *b)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		b->dom[l] = TP_NONE;
}

static void batch_flush_level(struct tp_cluster *c, struct batch *b, unsigned l)
{
	uint32_t d = b->dom[l];
	if (d != TP_NONE) {
		idx_move(c, l, d, b->old[l], c->free[l][d]);
		b->dom[l] = TP_NONE;
	}
}

static void batch_end(struct tp_cluster *c, struct batch *b)
{
	for (unsigned l = 0; l < tp_node_level(c->t); l++)
		batch_flush_level(c, b, l);
}

/* A node's free count went from old to now: update it, its ancestors and the totals. */
static void node_changed(struct tp_cluster *c, struct batch *b, uint32_t node, uint32_t old,
                         uint32_t now)
{
	if (old == now)
		return;
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	uint32_t full = tp_node_ndev(t, node);
	c->free[nl][node] = now;
	c->nfree = c->nfree - old + now;
	idx_move(c, nl, node, old, now);
	if (nl > 0 && c->grid[nl - 1])
		tp_cl_grid_changed(c, nl, node, old, now);
	int dfull = (now == full) - (old == full);
	uint32_t d = node;
	for (unsigned l = nl; l-- > 0;) {
		d = t->lv[l + 1].parent[d];
		if (b->dom[l] != d) {
			batch_flush_level(c, b, l);
			b->dom[l] = d;
			b->old[l] = c->free[l][d];
		}
		uint32_t was = c->free[l][d];
		c->free[l][d] = was - old + now;
		if (l > 0 && c->grid[l - 1])
			tp_cl_grid_changed(c, l, d, was, c->free[l][d]);
		c->free_nodes[l][d] = (uint32_t)((int64_t)c->free_nodes[l][d] + dfull);
		uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
		h[old]--;
		h[now]++;
	}
}

/* k devices of a node were held (k > 0) or let go (k < 0) by a job of checkpoint bucket b. */
static void ck_changed(struct tp_cluster *c, uint32_t node, unsigned b, int64_t k)
{
	const struct tp_topology *t = c->t;
	uint32_t d = node;
	for (unsigned l = tp_node_level(t); l-- > 0;) {
		d = t->lv[l + 1].parent[d];
		uint32_t *h = c->ckhist[l] + (size_t)d * TP_CK_BUCKETS + b;
		*h = (uint32_t)((int64_t)*h + k);
	}
}


static void count_health(struct tp_cluster *c, uint8_t s, int sign)
{
	if (s & TP_DS_DOWN)
		c->ndown = (uint32_t)((int64_t)c->ndown + sign);
	else if (s & TP_DS_CORDONED)
		c->ncordoned = (uint32_t)((int64_t)c->ncordoned + sign);
}

/* A device gained (+1) or lost (-1) its spare mark: the spare counts of it and its node (the
 * node's first device speaks for the node: every device of a spare node has the mark). */
static void spare_changed(struct tp_cluster *c, uint32_t dev, int sign)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	uint32_t node = t->dev_node[dev], d = node;
	bool first = dev == t->dev_first[node];
	c->spare_devs[nl][node] = (uint32_t)((int64_t)c->spare_devs[nl][node] + sign);
	if (first)
		c->nspare_nodes = (uint32_t)((int64_t)c->nspare_nodes + sign);
	for (unsigned l = nl; l-- > 0;) {
		d = t->lv[l + 1].parent[d];
		c->spare_devs[l][d] = (uint32_t)((int64_t)c->spare_devs[l][d] + sign);
		if (first)
			c->spare_nodes[l][d] = (uint32_t)((int64_t)c->spare_nodes[l][d] + sign);
	}
}

void tp_cl_undo_push(struct tp_cluster *c, struct tp_undo e)
{
	if (c->nundo >= c->cap_undo) { /* room is reserved first: never, unless a bug */
		c->undo_lost = true;
		return;
	}
	c->undo[c->nundo++] = e;
}

/* Apply a health change to one device; returns the change of the node's free count. */
static int dev_health(struct tp_cluster *c, uint32_t dev, const struct devop *op)
{
	uint8_t s = c->dstate[dev];
	uint8_t ns = (uint8_t)((s & ~op->mask) | (op->value & op->mask));
	if (ns == s)
		return 0;
	bool was = tp_dev_free(c, dev);
	if (op->log)
		tp_cl_undo_push(c, (struct tp_undo){.kind = TP_UNDO_HEALTH, .dev = dev, .old = s});
	count_health(c, s, -1);
	count_health(c, ns, +1);
	if ((s ^ ns) & TP_DS_SPARE)
		spare_changed(c, dev, (ns & TP_DS_SPARE) ? 1 : -1);
	c->dstate[dev] = ns;
	return (int)tp_dev_free(c, dev) - (int)was;
}

/* Apply op to the run of devs[*i..] on one node; returns the node's new free count. One loop
 * per kind: this is the hot path of every change. */
static uint32_t apply_run(struct tp_cluster *c, const uint32_t *devs, size_t n, size_t *i,
                          uint32_t node, uint32_t nfree, const struct devop *op)
{
	const uint32_t *dev_node = c->t->dev_node;
	size_t k = *i;
	switch (op->kind) {
	case OP_HOLD:
		for (; k < n && dev_node[devs[k]] == node; k++) {
			nfree -= tp_dev_free(c, devs[k]);
			c->dev_job[devs[k]] = op->slot;
		}
		break;
	case OP_UNHOLD:
		for (; k < n && dev_node[devs[k]] == node; k++) {
			c->dev_job[devs[k]] = TP_NO_JOB;
			nfree += c->dstate[devs[k]] == 0;
		}
		break;
	case OP_HEALTH:
		for (; k < n && dev_node[devs[k]] == node; k++)
			nfree = (uint32_t)((int64_t)nfree + dev_health(c, devs[k], op));
		break;
	}
	*i = k;
	return nfree;
}

/* Apply op to devs, in runs of one node, keeping every aggregate and index current. Job device
 * lists (OP_HOLD, OP_UNHOLD) never list a device twice. */
void tp_cl_apply_devs(struct tp_cluster *c, const uint32_t *devs, size_t n,
                       const struct devop *op)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	struct batch b;
	batch_init(&b);
	size_t i = 0;
	while (i < n) {
		uint32_t node = t->dev_node[devs[i]];
		uint32_t old = c->free[nl][node];
		size_t i0 = i;
		uint32_t now = apply_run(c, devs, n, &i, node, old, op);
		node_changed(c, &b, node, old, now);
		if (op->kind != OP_HEALTH)
			ck_changed(c, node, op->ck,
			           op->kind == OP_HOLD ? (int64_t)(i - i0) : -(int64_t)(i - i0));
	}
	batch_end(c, &b);
}

/* The job at slot `from` now sits at slot `to`: its devices say so. */
void tp_cl_relabel(struct tp_cluster *c, const struct tp_job_impl *job, uint32_t to)
{
	for (uint32_t i = 0; i < job->ndev; i++) {
		uint32_t d = job->devs[i], node = c->t->dev_node[d];
		if (c->part_level >= 0 && c->part_job[node] == c->dev_job[d])
			c->part_job[node] = to; /* its own partition follows it */
		c->dev_job[d] = to;
	}
}

/* ---- queries ------------------------------------------------------------------------------- */

static bool dom_valid(const tp_cluster *c, unsigned level, uint32_t dom)
{
	return c && level < c->t->nlevels && dom < c->t->lv[level].ndom;
}

uint32_t tp_cluster_free_count(const tp_cluster *c, unsigned level, uint32_t dom)
{
	return dom_valid(c, level, dom) ? c->free[level][dom] : 0;
}

uint32_t tp_cluster_free_total_count(const tp_cluster *c)
{
	return c ? c->nfree : 0;
}

uint32_t tp_cluster_free_node_count(const tp_cluster *c, unsigned level, uint32_t dom)
{
	if (!dom_valid(c, level, dom))
		return 0;
	if (level == tp_node_level(c->t))
		return c->free[level][dom] == tp_node_ndev(c->t, dom);
	return c->free_nodes[level][dom];
}

int tp_cluster_node_histogram(const tp_cluster *c, unsigned level, uint32_t dom,
                              uint32_t *hist, size_t n)
{
	if (!dom_valid(c, level, dom) || (n && !hist))
		return TP_EINVAL;
	if (n)
		memset(hist, 0, n * sizeof *hist);
	if (level == tp_node_level(c->t)) {
		uint32_t f = c->free[level][dom];
		if (f < n)
			hist[f] = 1;
		return (int)f;
	}
	const uint32_t *h = c->hist[level] + (size_t)dom * c->hstride;
	for (size_t k = 0; k < n && k < c->hstride; k++)
		hist[k] = h[k];
	for (uint32_t k = c->hstride; k-- > 1;)
		if (h[k])
			return (int)k;
	return 0;
}

/* Without an index (a lost one): the linear scan the index normally saves. */
static int tightest_scan(const tp_cluster *c, unsigned level, uint32_t min_free, uint32_t *dom)
{
	uint32_t best = TP_NONE, bestf = 0;
	for (uint32_t d = 0; d < c->t->lv[level].ndom; d++) {
		uint32_t f = c->free[level][d];
		if (f >= min_free && (best == TP_NONE || f < bestf)) {
			best = d;
			bestf = f;
		}
	}
	if (best == TP_NONE)
		return TP_ENOTFOUND;
	*dom = best;
	return 0;
}

/* The smallest k >= min_free with hist[k] > 0 in domain d of level l, or 0. */
static uint32_t hist_least_at_least(const tp_cluster *c, unsigned l, uint32_t d,
                                    uint32_t min_free)
{
	const uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
	for (uint32_t k = min_free; k < c->hstride; k++)
		if (h[k])
			return k;
	return 0;
}

/* The node level's index was dropped (a Judy failure; rebuilt by the next writing call): find
 * the smallest qualifying free count from the top-level histograms, then descend into the
 * first domain holding such a node at every level. Scans top-level domains and the children
 * on one path, never all nodes. */
static int tightest_node(const tp_cluster *c, uint32_t min_free, uint32_t *dom)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	if (min_free >= c->hstride)
		return TP_ENOTFOUND;
	uint32_t k = 0, d = TP_NONE;
	for (uint32_t i = 0; i < t->lv[0].ndom; i++) {
		uint32_t ki = hist_least_at_least(c, 0, i, min_free);
		if (ki && (!k || ki < k)) {
			k = ki;
			d = i;
		}
	}
	if (!k)
		return TP_ENOTFOUND;
	for (unsigned l = 1; l < nl; l++) {
		uint32_t first = t->lv[l - 1].child_first[d], end = t->lv[l - 1].child_first[d + 1];
		for (d = first; d < end && !c->hist[l][(size_t)d * c->hstride + k]; d++)
			;
		if (d == end)
			return TP_EINTERNAL; /* the histograms disagree with each other */
	}
	uint32_t first, nn;
	tp_dom_nodes(t, nl - 1, d, &first, &nn);
	for (uint32_t node = first; node < first + nn; node++)
		if (c->free[nl][node] == k) {
			*dom = node;
			return 0;
		}
	return TP_EINTERNAL; /* the histogram disagrees with the node counts */
}

int tp_cluster_tightest(const tp_cluster *c, unsigned level, uint32_t min_free, uint32_t *dom)
{
	if (!c || !dom || level >= c->t->nlevels || min_free == 0)
		return TP_EINVAL;
	if (c->indexed[level]) {
		Word_t key = tp_cl_idx_key(min_free, 0);
		JError_t err;
		if (Judy1First(c->index[level], &key, &err) != 1)
			return TP_ENOTFOUND;
		*dom = (uint32_t)(key & UINT32_MAX);
		return 0;
	}
	if (level == tp_node_level(c->t) && level > 0)
		return tightest_node(c, min_free, dom);
	return tightest_scan(c, level, min_free, dom);
}

int tp_cluster_device_state(const tp_cluster *c, uint32_t dev, const char **job)
{
	if (job)
		*job = NULL;
	if (!c || dev >= c->t->ndevices)
		return TP_EINVAL;
	uint32_t s = c->dev_job[dev];
	if (s != TP_NO_JOB) {
		if (job)
			*job = c->jobs[s]->id;
		return TP_DEVICE_HELD;
	}
	if (c->dstate[dev] & TP_DS_DOWN)
		return TP_DEVICE_DOWN;
	if (c->dstate[dev] & TP_DS_CORDONED)
		return TP_DEVICE_CORDONED;
	if (c->dstate[dev] & TP_DS_SPARE)
		return TP_DEVICE_SPARE;
	return TP_DEVICE_FREE;
}

int tp_cluster_device_down(const tp_cluster *c, uint32_t dev)
{
	if (!c || dev >= c->t->ndevices)
		return TP_EINVAL;
	return (c->dstate[dev] & TP_DS_DOWN) != 0;
}

int tp_cluster_device_cordoned(const tp_cluster *c, uint32_t dev)
{
	if (!c || dev >= c->t->ndevices)
		return TP_EINVAL;
	return (c->dstate[dev] & TP_DS_CORDONED) != 0;
}

uint32_t tp_cluster_down_total_count(const tp_cluster *c)
{
	return c ? c->ndown : 0;
}

uint32_t tp_cluster_cordoned_total_count(const tp_cluster *c)
{
	return c ? c->ncordoned : 0;
}

size_t tp_cluster_job_count(const tp_cluster *c)
{
	return c ? c->njobs : 0;
}

const char *tp_cluster_job_at(const tp_cluster *c, size_t i)
{
	return c && i < c->njobs ? c->jobs[i]->id : NULL;
}

int tp_cluster_job_devices(const tp_cluster *c, const char *job, const uint32_t **devices,
                           size_t *n)
{
	if (!c || !job || !devices || !n)
		return TP_EINVAL;
	uint32_t s = tp_cluster_job_slot(c, job);
	if (s == TP_NO_JOB)
		return TP_ENOTFOUND;
	*devices = c->jobs[s]->devs;
	*n = c->jobs[s]->ndev;
	return 0;
}

int tp_cluster_job_options(const tp_cluster *c, const char *job, tp_job_options *opts)
{
	if (!c || !job || !opts || opts->version != TP_JOB_OPTIONS_VERSION)
		return TP_EINVAL;
	uint32_t s = tp_cluster_job_slot(c, job);
	if (s == TP_NO_JOB)
		return TP_ENOTFOUND;
	const struct tp_job_impl *j = c->jobs[s];
	opts->job_class = j->job_class;
	opts->priority = j->priority;
	opts->tenant = j->tenant;
	opts->preemptible = j->preemptible;
	opts->migratable = j->migratable;
	opts->checkpoint_s = j->checkpoint_s;
	opts->shape = j->shape;
	return 0;
}

