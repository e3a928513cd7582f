/* SPDX-License-Identifier: MIT */
/*
 * What a request may use: node and device filters, and the capacity of a domain
 * (the most devices of the request it can take).
 */
#include <string.h>

#include "place_internal.h"

/* ---- what may be used ----------------------------------------------------------------------- */


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


/* The first node filter that refuses a node (TP_PL_WHY_OK: none), in the order node_ok
 * applies them; the explanation of a failure names it. */
enum tp_pl_why tp_pl_node_why(struct pctx *p, uint32_t node)
{
	const struct tp_topology *t = p->t;
	const struct tp_rq *q = p->q;
	if (p->allow_list && !j1_test(p->scope[p->nl], node))
		return TP_PL_WHY_NODES;
	if (p->colevel >= 0 && !p->allow_list &&
	    !j1_test(p->scope[p->colevel], tp_node_ancestor(t, node, (unsigned)p->colevel)))
		return TP_PL_WHY_COLOCATE;
	if (q->has_model && (q->model < 0 || t->node_model[node] != (uint16_t)q->model))
		return TP_PL_WHY_MODEL;
	if (q->min_mem > 0 && !(t->node_mem_gb[node] >= q->min_mem))
		return TP_PL_WHY_MEMORY;
	if (p->have_xbad)
		for (unsigned l = 0; l < p->nlev; l++)
			if (p->xbad[l] && j1_test(p->xbad[l], tp_node_ancestor(t, node, l)))
				return TP_PL_WHY_XBAD;
	if (p->excl >= 0 && excl_dirty(p, tp_node_ancestor(t, node, (unsigned)p->excl)))
		return TP_PL_WHY_TENANT;
	if (p->sbad && j1_test(p->sbad, tp_node_ancestor(t, node, (unsigned)p->svc_level)))
		return TP_PL_WHY_SERVICE;
	if (tp_pl_part_refuses(p, node))
		return TP_PL_WHY_PARTITION;
	return TP_PL_WHY_OK;
}

/* Whether every device of a node may be considered at all (before per-device checks). */
static bool node_ok(struct pctx *p, uint32_t node)
{
	return tp_pl_node_why(p, node) == TP_PL_WHY_OK;
}

bool tp_pl_dev_ok(const struct pctx *p, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	if (p->spares == TP_PL_SPARES_ONLY ? c->dstate[d] != TP_DS_SPARE
	                                   : c->dstate[d] && !(p->spares && c->dstate[d] == TP_DS_SPARE))
		return false; /* spares only for a replace that asks (a spare is never held) */
	uint32_t j = c->dev_job[d];
	if (j != TP_NO_JOB &&
	    (!p->ideal || j == p->q->colocate_slot || j == p->self_slot))
		return false;
	if (p->extra_down && j1_test(p->extra_down, d))
		return false;
	if (p->taken && j1_test(p->taken, d))
		return false;
	if (p->fbad && j1_test(p->fbad, p->t->fd[p->svc_fd].dev_fd[d]))
		return false; /* its failure domain is at the service's cap */
	if (p->q->min_perf > 0 && !(p->t->dev_perf[d] >= p->q->min_perf))
		return false;
	return true;
}

uint32_t tp_pl_spare_free(const struct pctx *p, int l, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	uint32_t sp = l < 0 ? c->nspare_nodes ? UINT32_MAX : 0 : c->spare_devs[l][d];
	if (p->spares == TP_PL_SPARES_ONLY)
		return sp;
	uint32_t f = l < 0 ? c->nfree : c->free[l][d];
	return f > UINT32_MAX - sp ? UINT32_MAX : f + sp;
}

/* Usable devices of a node; their ids (index order) go to list when it is not NULL. */
uint32_t tp_pl_node_usable(struct pctx *p, uint32_t node, uint32_t *list)
{
	if (!p->filtered && !p->ideal && !list)
		return tp_node_free(p->c, node);
	if (p->ideal_plain && !list)
		return tp_node_ndev(p->t, node);
	if (p->filtered && !node_ok(p, node))
		return 0;
	if (p->pairs)
		return tp_pl_node_pairable(p, node, list);
	uint32_t n = 0;
	if (!p->filtered && !p->ideal && !p->spares && !p->extra_down && !p->taken && !p->fbad &&
	    !(p->q->min_perf > 0)) {
		/* tp_pl_dev_ok with none of its filters on: free, healthy and uncordoned */
		const struct tp_cluster *c = p->c;
		for (uint32_t d = p->t->dev_first[node]; d < p->t->dev_first[node + 1]; d++)
			if (!c->dstate[d] && c->dev_job[d] == TP_NO_JOB)
				list[n++] = d;
		return n;
	}
	for (uint32_t d = p->t->dev_first[node]; d < p->t->dev_first[node + 1]; d++)
		if (tp_pl_dev_ok(p, d)) {
			if (list)
				list[n] = d;
			n++;
		}
	return n;
}





static uint32_t capd_sum_children(struct pctx *p, unsigned l, uint32_t d)
{
	const struct tp_level_impl *lv = &p->t->lv[l];
	uint64_t sum = 0;
	if (p->scope[l + 1]) {
		Word_t k = lv->child_first[d];
		JError_t je;
		int r = Judy1First(p->scope[l + 1], &k, &je);
		while (r == 1 && k < lv->child_first[d + 1]) {
			sum += tp_pl_capd(p, l + 1, (uint32_t)k);
			r = Judy1Next(p->scope[l + 1], &k, &je);
		}
	} else {
		/* a child with fewer free devices than its unit adds 0 (its capacity never exceeds
		 * its free count outside the emptied cluster), so its rows need not be read */
		const uint32_t *fr = p->c->free[l + 1], u = p->u[l + 1];
		bool skip = !p->ideal && !p->spares;
		for (uint32_t ch = lv->child_first[d]; ch < lv->child_first[d + 1]; ch++)
			if (!skip || fr[ch] >= u)
				sum += tp_pl_capd(p, l + 1, ch);
	}
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

static uint32_t capd_from_hist(const struct pctx *p, unsigned l, uint32_t d)
{
	const struct tp_cluster *c = p->c;
	const uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
	uint64_t sum = 0;
	for (unsigned i = 0; i < p->ncapk; i++)
		sum += (uint64_t)h[p->capk[i]] * p->nodecap[p->capk[i]];
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

/* The most devices of the request domain d of level l can take (a multiple of u[l]); every
 * case (tp_pl_capd in place_internal.h answers the histogram one inline). */
uint32_t tp_pl_capd_any(struct pctx *p, unsigned l, uint32_t d)
{
	if (l == p->nl) {
		uint32_t x = min32(tp_pl_node_usable(p, d, NULL), cap_left(p, l, d));
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
