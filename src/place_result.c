/* SPDX-License-Identifier: MIT */
/*
 * The tp_placement object: building a result, its accessors, tp_commit, and the
 * explanation of a failure (infeasible, busy or fragmented, with the fit figures).
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

/* What one domain of level L takes in whole groups and slices (groups of a level above L
 * count whole too: the request sits in one domain of L). */
static uint32_t fit_take(struct pctx *p, unsigned L, uint32_t d)
{
	uint32_t x = tp_pl_capd(p, L, d);
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
}

/* Why k devices could not be placed: the status, the fit figures and the message. */
int tp_pl_explain_failure(tp_placement *pl, struct pctx *p, uint32_t k, uint32_t needed,
                          int level, int ideal_ok)
{
	const struct tp_topology *t = p->t;
	const struct tp_rq *q = p->q;
	unsigned L = level >= 0 ? (unsigned)level : 0;
	char path[256] = "-";
	uint32_t dom;
	pl->has_fit = true;
	pl->fit.needed = needed;
	pl->fit.level = (int)L;
	pl->fit.free_total = tp_pl_matching_free(p);
	pl->fit.best = min32(best_at_level(p, L, k, &dom), min32(needed, pl->fit.free_total));
	if (dom != TP_NONE)
		tp_topology_domain_path(t, L, dom, path, sizeof path);
	const char *lv = t->lv[L].name;
	tp_pl_go_ideal(p);
	int r = ideal_ok >= 0 ? ideal_ok : tp_pl_feasible(p, -1, 0, k);
	if (r == 1 && ideal_ok < 0 && p->sl >= 0 && p->compact) {
		/* a spread couples levels: ask the exact evaluator */
		uint32_t tmp[W_MAX];
		r = tp_pl_eval(p, -1, 0, k, colq(p, -1), tmp);
	}
	if (r == 1 && ideal_ok < 0 && tp_pl_has_fd_rules(q)) {
		struct amark m = tp_pl_ar_mark(p);
		r = tp_pl_fd_search(p, k);
		tp_pl_ar_release(p, m);
		if (r == 2)
			r = tp_pl_fd_fill(p, -1, 0, k);
		if (r == 2)
			r = tp_pl_fd_possible(p, k);
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
			                 (unsigned long long)tp_pl_topology_pairable(p), lv, ib);
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
