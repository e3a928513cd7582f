/* SPDX-License-Identifier: MIT */
/*
 * The tp_placement object: building a result, its accessors, tp_commit, and what the
 * explanation of a failure (place_explain.c) shares with tp_replace: the matching free count
 * and the switch to the emptied cluster.
 */
#include <string.h>

#include "cost.h"
#include "place_internal.h"

/* ---- results -------------------------------------------------------------------------------- */

tp_placement *tp_pl_placement_new(const struct tp_cluster *c, bool replace)
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
	tp_free(&a, pl->parts);
	tp_free(&a, pl);
}

/* Fill a successful result: the devices, the domains per level in first-rank order, the
 * score. One allocation holds the devices and every level's lists. */
int tp_pl_finish_ok(tp_placement *pl, struct pctx *p, const uint32_t *devs, size_t n)
{
	const struct tp_topology *t = p->t;
	size_t per = n ? n : 1;
	uint32_t *block = tp_mallocn(&pl->alloc, per * (1 + 2 * (size_t)p->nlev), sizeof *block);
	if (!block)
		return TP_ENOMEM;
	memcpy(block, devs, n * sizeof *block);
	pl->devs = block;
	/* rule 1 outranks rule 2: a bound of rule 2 decides only where rule 1 did not */
	pl->decided = p->bal_active && p->dec_rule != TP_RULE_LOCALITY ? TP_RULE_BALANCE
	                                                              : p->dec_rule;
	pl->ndev = n;
	uint32_t *dom[TP_MAX_LEVELS], *cnt[TP_MAX_LEVELS], nd[TP_MAX_LEVELS] = {0};
	Pvoid_t seen[TP_MAX_LEVELS] = {NULL}; /* domain -> position + 1, for lists not in runs */
	for (unsigned l = 0; l < p->nlev; l++) {
		dom[l] = block + per * (1 + 2 * l);
		cnt[l] = dom[l] + per;
	}
	/* a node's devices come in runs: each run counts once per level, all on one entry */
	for (size_t i = 0; i < n;) {
		uint32_t node = t->dev_node[devs[i]];
		size_t j = i + 1;
		while (j < n && t->dev_node[devs[j]] == node)
			j++;
		uint32_t run = (uint32_t)(j - i);
		i = j;
		for (unsigned l = 0; l < p->nlev; l++) {
			uint32_t a = tp_node_ancestor(t, node, l);
			if (nd[l] && dom[l][nd[l] - 1] == a) {
				cnt[l][nd[l] - 1] += run;
				continue;
			}
			Word_t at = pl->replace ? jl_get(seen[l], a) : 0;
			if (at) {
				cnt[l][at - 1] += run;
				continue;
			}
			dom[l][nd[l]] = a;
			cnt[l][nd[l]] = run;
			nd[l]++;
			if (pl->replace)
				jl_add(p, &seen[l], a, nd[l]);
		}
	}
	for (unsigned l = 0; l < p->nlev; l++) {
		jl_free(&seen[l]);
		pl->dom[l] = dom[l];
		pl->dcnt[l] = cnt[l];
		pl->ndom[l] = nd[l];
	}
	pl->comm_us = n > 1 ? tp_cost_ring_allreduce_us(t, devs, n, GIB) : 0.0;
	if (!p->err && p->q && p->q->pairs) {
		int rc = tp_pl_pair_result(pl, p, devs, n);
		if (rc)
			return rc;
	}
	return p->err;
}

/* Free, healthy, uncordoned devices that `select` allows. */
uint32_t tp_pl_matching_free(struct pctx *p)
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
			n += tp_pl_node_pairable_free(p, node);
			continue;
		}
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++)
			if (tp_dev_free(p->c, d) && !(q->min_perf > 0 && !(t->dev_perf[d] >= q->min_perf)))
				n++;
	}
	return n;
}

/* Switch a context to "every job but the colocate target (and the repaired job) gone". */
void tp_pl_go_ideal(struct pctx *p)
{
	const struct tp_rq *q = p->q;
	p->ideal = true;
	p->ideal_plain = !p->filtered && !p->extra_down && !p->taken &&
	                 p->self_slot == TP_NO_JOB && q->colocate_slot == TP_NO_JOB_SLOT &&
	                 p->c->ndown == 0 && p->c->ncordoned == 0 && p->c->nspare_nodes == 0 &&
	                 !(q->min_perf > 0); /* spares, like cordons, are not there to take */
	p->filtered = !p->ideal_plain;
	p->root_kind = 0;
	jl_free(&p->memo);
	j1_free(&p->xknown);
	j1_free(&p->xdirty);
	tp_pl_build_xbad(p, true);
	tp_pl_build_sbad(p, false);
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

tp_rule tp_placement_decided_by(const tp_placement *p)
{
	return p && p->status == 0 ? p->decided : TP_RULE_NONE;
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
	if (!p || !fit || !p->has_fit || fit->version < 1 || fit->version > TP_FIT_VERSION)
		return TP_EINVAL;
	unsigned version = fit->version; /* the caller's: a later header's fields stay untouched */
	*fit = p->fit;
	fit->version = version;
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

static int commit_unguarded(tp_cluster *c, const tp_placement *p, const tp_job_options *opts);

int tp_commit(tp_cluster *c, const tp_placement *p, const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, commit_unguarded(c, p, opts));
}

static int commit_unguarded(tp_cluster *c, const tp_placement *p, const tp_job_options *opts)
{
	if (!p)
		return tp_seterr(c->errmsg, TP_EINVAL, "tp_commit: placement is NULL");
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
			if ((rc = tp_cluster_check_job_options(c, opts)))
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

int tp_fit_init(tp_fit *fit, unsigned version)
{
	static const tp_fit init = TP_FIT_INIT;
	return tp_options_init(fit, version == TP_FIT_VERSION ? sizeof init : 0, &init, version);
}
