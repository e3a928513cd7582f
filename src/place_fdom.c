/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "place_internal.h"

/* ---- failure-domain caps and spread (not tree-shaped: a greedy fill) ------------------------ */

bool tp_pl_has_fd_rules(const struct tp_rq *q)
{
	return q->nfdcaps > 0 || (q->spread_fd >= 0 && q->spread_min >= 2);
}

/* Whether a device list in rank order meets the failure-domain caps and spread. */
int tp_pl_fd_check(struct pctx *p, const uint32_t *devs, size_t n, bool *ok)
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

/* Domains of the tree spread's level that a device list in tree order touches. */
static uint32_t tree_domains(const struct pctx *p, const uint32_t *devs, size_t n)
{
	uint32_t doms = 0, prev = TP_NONE;
	for (size_t i = 0; i < n; i++) {
		uint32_t a = tp_node_ancestor(p->t, p->t->dev_node[devs[i]], (unsigned)p->sl);
		if (a != prev)
			doms++, prev = a;
	}
	return doms;
}

/* Greedy fill of domain (l, d) honouring failure-domain caps and spread and a tree spread,
 * groups of the node level only (no slices): first one group per new spread domain (of the
 * failure-domain kind, or of the tree spread's level), then groups wherever the caps allow,
 * nodes in tree order. Returns 1 with p->out filled, 0, or an error. */
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
	bool tspread = p->sl >= 0; /* nodes are walked in tree order: a new ancestor is a new domain */
	uint32_t ntree = 0, last_tree = TP_NONE;
	for (int pass = spread || tspread ? 0 : 1; pass < 2 && p->nout < k && !p->err; pass++)
		for (uint32_t node = first; node < first + nn && p->nout < k && !p->err; node++) {
			uint32_t tdom = tspread ? tp_node_ancestor(p->t, node, (unsigned)p->sl) : 0;
			uint32_t list[TP_MAX_NODE_DEVICES];
			uint32_t n = tp_pl_node_usable(p, node, list), have = 0;
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
				bool want_fd = spread && st.nspread < q->spread_min &&
				               fd_group_new_spread(p, &st, g);
				bool want_tree = tspread && ntree < p->S && tdom != last_tree;
				if (pass == 0 && !want_fd && !want_tree) {
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
				if (pass == 0 && tspread && tdom != last_tree)
					last_tree = tdom, ntree++;
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
	qsort(p->out, p->nout, sizeof *p->out, dev_cmp);
	if (p->nout < k || (spread && st.nspread < q->spread_min) ||
	    (tspread && tree_domains(p, p->out, p->nout) < p->S)) {
		p->nout = 0;
		return 0;
	}
	return 1;
}

/* The failure-domain fill over the request's scope: each candidate domain of the required
 * (or colocate) level, tightest first, or the whole cluster. */
int tp_pl_fd_fill(struct pctx *p, int l, uint32_t d, uint32_t k)
{
	if (l == (int)p->nl)
		return fd_fill_in(p, l, d, k);
	/* one child first (rule 1 from the top), the tightest that works */
	struct amark m = tp_pl_ar_mark(p);
	uint32_t n;
	struct kid *ks = tp_pl_kids_of(p, l, d, k, &n);
	int r = p->err;
	for (uint32_t i = 0; i < n && !r; i++)
		r = tp_pl_fd_fill(p, l + 1, ks[i].dom, k);
	tp_pl_ar_release(p, m);
	if (r || forced_single(p, l, k))
		return r;
	return fd_fill_in(p, l, d, k);
}
/* tp_pl_fd_fill returns 2 where the greedy does not apply (slices, or groups above the node). */

/* Necessary conditions of the failure-domain rules on the usable devices (used where the greedy
 * fill does not apply): enough devices under the caps, enough domains for the spread. */
int tp_pl_fd_possible(struct pctx *p, uint32_t k)
{
	const struct tp_rq *q = p->q;
	const struct tp_topology *t = p->t;
	Pvoid_t cnt[TP_MAX_LEVELS + 1] = {NULL};
	unsigned nk = q->nfdcaps < TP_MAX_LEVELS ? q->nfdcaps : TP_MAX_LEVELS;
	uint64_t room[TP_MAX_LEVELS + 1] = {0};
	uint32_t nspread = 0;
	for (uint32_t node = 0; node < t->nnodes && !p->err; node++) {
		uint32_t list[TP_MAX_NODE_DEVICES];
		uint32_t n = tp_pl_capd(p, p->nl, node) ? tp_pl_node_usable(p, node, list) : 0;
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
		tp_pl_node_usable(f->p, f->node[i], list);
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
	if (tp_pl_fd_check(p, f->devs, nd, &ok) || !ok)
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
int tp_pl_fd_search(struct pctx *p, uint32_t k)
{
	struct fds *f = tp_pl_ar_alloc(p, sizeof *f);
	if (!f)
		return TP_ENOMEM;
	memset(f, 0, sizeof *f);
	f->p = p;
	f->k = k;
	f->budget = FDS_BUDGET;
	for (uint32_t x = 0; x < p->t->nnodes; x++) {
		uint32_t cap = tp_pl_capd(p, p->nl, x);
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
	f->devs = tp_pl_ar_alloc(p, ((size_t)k + 1) * sizeof *f->devs);
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
