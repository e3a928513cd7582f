/* SPDX-License-Identifier: MIT */
/*
 * Why a request does not fit (tp_pl_explain_failure): the status the spec defines (infeasible:
 * not even with every other job gone; busy: fewer matching devices free than wanted;
 * fragmented: enough free, not where the constraints need them), the fit figures (needed,
 * free_total, level, best) and a message that names the constraint, the domain and the figure
 * that blocks the request.
 *
 * How. The status comes from the solver's own capacities, with every other job imagined gone
 * (tp_pl_go_ideal), then from the free count. The message then names the first rule that alone
 * stops the request, in the state the status speaks of (the emptied cluster for infeasible, the
 * cluster as it is for fragmented), in this order: the select filters, units larger than any
 * domain (group, slices, a cap below one unit), the colocate domains, GPU+NIC pairs,
 * exclusivity, the tree caps, the tree spread, the failure-domain caps and spread, health; when
 * none alone does, the level's figures (the best domain and what it can take). On a level of
 * at most EX_SHORT domains the message adds per-domain reasons (nodes or devices down,
 * cordoned, in use, refused by a filter, another tenant's), naming at most EX_NAMED domains and
 * then "and K more".
 *
 * fit.best is the solver's figure, cut, for a request with failure-domain caps, to what those
 * caps let one domain of the fit level take.
 *
 * Cost. Only on failure. The status and fit figures cost what they did before (the level's
 * index walked down to the best domain, one feasibility check on the emptied cluster), plus,
 * with failure-domain caps, one walk of the nodes of the domains with free devices. Each
 * further check runs only when its rule is in the request: the select counts walk the allowed
 * nodes (or every node) once; the colocate check reads the target's domains; exclusivity walks
 * the domains of its level that have free devices (and the devices of those it blocks); caps
 * and units lifted, and a tree spread, sum capacities of the top level, the required level or
 * the spread level: from the cluster's histograms for an unfiltered request on the cluster as
 * it is, by a walk of the nodes when filtered or on the emptied cluster (as the feasibility
 * check itself walks); the failure-domain figures walk the nodes once. Per-domain reasons read
 * the devices of at most EX_SHORT domains. An ordinary request (no filter, cap, spread, units or
 * colocation) on a level of more than EX_SHORT domains pays nothing beyond the status and fit
 * figures.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "place_internal.h"

#define EX_SHORT 16 /* levels with at most this many domains get per-domain reasons */
#define EX_NAMED 4  /* most domains one message names before "and K more" */

/* A message under construction (truncated at TP_ERRMSG_LEN). */
struct mbuf {
	char s[TP_ERRMSG_LEN];
	size_t n;
};

static void mb_add(struct mbuf *m, const char *fmt, ...) TP_PRINTF(2, 3);
static void mb_add(struct mbuf *m, const char *fmt, ...)
{
	if (m->n + 1 >= sizeof m->s)
		return;
	va_list ap;
	va_start(ap, fmt);
	int w = vsnprintf(m->s + m->n, sizeof m->s - m->n, fmt, ap);
	va_end(ap);
	if (w > 0)
		m->n = m->n + (size_t)w < sizeof m->s ? m->n + (size_t)w : sizeof m->s - 1;
}

/* What an explanation works on. */
struct ex {
	tp_placement *pl;
	struct pctx *p;
	const tp_request *r; /* the request the names come from (a replacement: the job's shape) */
	uint32_t k;          /* devices that must be placed */
	unsigned L;          /* the fit level */
	bool now;            /* the cluster as it is (fragmented), else emptied (infeasible) */
	struct mbuf m;
};

static const char *s_(uint64_t n) { return n == 1 ? "" : "s"; }

static const char *when(const struct ex *e)
{
	return e->now ? " now" : " even with every other job gone";
}

/* ---- the fit figures: the best domain of a level ------------------------------------------- */

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

/* The most devices one domain of level L takes under the failure-domain caps (each cap
 * alone, counted device by device): the fit figure's bound when the request has such caps.
 * Walks the nodes of the domains of L that have free devices (only for such requests). */
static uint32_t fd_level_room(struct pctx *p, unsigned L)
{
	const struct tp_rq *q = p->q;
	const struct tp_topology *t = p->t;
	unsigned nk = q->nfdcaps < TP_MAX_LEVELS ? q->nfdcaps : TP_MAX_LEVELS;
	uint64_t best = 0;
	for (uint32_t d = 0; d < t->lv[L].ndom && !p->err; d++) {
		if (!p->ideal && !p->c->free[L][d])
			continue;
		uint32_t f, n;
		tp_dom_nodes(t, L, d, &f, &n);
		uint64_t room = UINT64_MAX;
		for (unsigned c = 0; c < nk; c++) {
			const struct tp_rq_fdcap *fc = &q->fdcaps[c];
			uint64_t lim = fc->devices != TP_RQ_NOCAP ? fc->devices
			                                          : (uint64_t)fc->groups * q->gsize;
			Pvoid_t cnt = NULL;
			uint64_t r = 0;
			for (uint32_t node = f; node < f + n; node++) {
				uint32_t list[TP_MAX_NODE_DEVICES];
				uint32_t m = tp_pl_capd(p, p->nl, node) ? tp_pl_node_usable(p, node, list) : 0;
				for (uint32_t i = 0; i < m; i++) {
					uint32_t x = t->fd[fc->kind].dev_fd[list[i]];
					r += jl_get(cnt, x) < lim;
					jl_add(p, &cnt, x, 1);
				}
			}
			jl_free(&cnt);
			room = r < room ? r : room;
		}
		best = room > best ? room : best;
	}
	return best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
}

/* ---- per-domain reasons ----------------------------------------------------------------------- */

/* A job of another tenant with a device in domain (l, d) (with an exclusive shape when
 * need_excl), or TP_NO_JOB; on the emptied cluster, only the colocate target counts. */
static uint32_t foreign_job(const struct pctx *p, unsigned l, uint32_t d, bool need_excl)
{
	const struct tp_cluster *c = p->c;
	uint32_t f, n;
	tp_dom_nodes(p->t, l, d, &f, &n);
	for (uint32_t x = p->t->dev_first[f]; x < p->t->dev_first[f + n]; x++) {
		uint32_t j = c->dev_job[x];
		const struct tp_job_impl *job = j != TP_NO_JOB ? job_at(c, j) : NULL;
		if (!job || j == p->self_slot || (p->ideal && j != p->q->colocate_slot))
			continue;
		if (need_excl && (!job->shape || !job->shape->exclusive))
			continue;
		if (strcmp(job->tenant, p->q->tenant) != 0)
			return j;
	}
	return TP_NO_JOB;
}

/* The job behind a node refused for exclusivity (XBAD or TENANT). */
static uint32_t excl_job(const struct pctx *p, uint32_t node, enum tp_pl_why y)
{
	if (y == TP_PL_WHY_TENANT)
		return foreign_job(p, (unsigned)p->excl, tp_node_ancestor(p->t, node, (unsigned)p->excl),
		                   false);
	for (unsigned l = 0; l < p->nlev; l++) {
		uint32_t a = tp_node_ancestor(p->t, node, l);
		if (p->xbad[l] && j1_test(p->xbad[l], a))
			return foreign_job(p, l, a, true);
	}
	return TP_NO_JOB;
}

struct dcount {
	uint32_t ndev, down_nodes, down, cordoned, busy, slow;
	uint32_t unpaired;                  /* usable GPUs without a free nearest NIC (pairs) */
	uint32_t why[TP_PL_WHY_PARTITION + 1]; /* nodes refused, per filter */
	uint32_t job;                       /* another tenant's job that keeps nodes out */
};

/* Count why the devices of one node are not usable. */
static void node_count(struct pctx *p, uint32_t node, struct dcount *w)
{
	const struct tp_topology *t = p->t;
	const struct tp_cluster *c = p->c;
	uint32_t d0 = t->dev_first[node], d1 = t->dev_first[node + 1], dn = 0;
	w->ndev += d1 - d0;
	for (uint32_t x = d0; x < d1; x++)
		dn += (c->dstate[x] & TP_DS_DOWN) || j1_test(p->extra_down, x);
	if (dn == d1 - d0) {
		w->down_nodes++;
		return;
	}
	w->down += dn;
	enum tp_pl_why y = p->filtered ? tp_pl_node_why(p, node) : TP_PL_WHY_OK;
	if (y != TP_PL_WHY_OK) {
		w->why[y]++;
		if ((y == TP_PL_WHY_XBAD || y == TP_PL_WHY_TENANT) && w->job == TP_NO_JOB)
			w->job = excl_job(p, node, y);
		return;
	}
	uint32_t ok = 0;
	for (uint32_t x = d0; x < d1; x++) {
		uint32_t j = c->dev_job[x];
		if ((c->dstate[x] & TP_DS_DOWN) || j1_test(p->extra_down, x))
			continue;
		if (c->dstate[x] & TP_DS_CORDONED)
			w->cordoned++;
		else if (j != TP_NO_JOB && (!p->ideal || j == p->q->colocate_slot || j == p->self_slot))
			w->busy++;
		else if (p->q->min_perf > 0 && !(t->dev_perf[x] >= p->q->min_perf))
			w->slow++;
		else
			ok++;
	}
	if (p->pairs) {
		uint32_t paired = tp_pl_node_pairable(p, node, NULL);
		w->unpaired += ok > paired ? ok - paired : 0;
	}
}

static void say_count(struct mbuf *m, bool *first, uint32_t n, const char *what, const char *how)
{
	if (!n)
		return;
	mb_add(m, "%s%u %s%s %s", *first ? "" : ", ", n, what, s_(n), how);
	*first = false;
}

/* "path: 2 nodes down, 1 device cordoned, ..." for domain (l, d). */
static void domain_say(struct ex *e, unsigned l, uint32_t d)
{
	struct pctx *p = e->p;
	struct dcount w;
	memset(&w, 0, sizeof w);
	w.job = TP_NO_JOB;
	uint32_t f, n;
	tp_dom_nodes(p->t, l, d, &f, &n);
	for (uint32_t node = f; node < f + n; node++)
		node_count(p, node, &w);
	char path[192];
	if (tp_topology_domain_path(p->t, l, d, path, sizeof path) < 0)
		snprintf(path, sizeof path, "-");
	mb_add(&e->m, "%s: ", path);
	bool first = true;
	const struct tp_job_impl *job = w.job != TP_NO_JOB ? job_at(p->c, w.job) : NULL;
	if (job) {
		mb_add(&e->m, "tenant %s's job '%s' %s", job->tenant, job->id,
		       w.why[TP_PL_WHY_XBAD] ? "holds it exclusively" : "runs there (request.exclusive)");
		first = false;
	}
	say_count(&e->m, &first, w.down_nodes, "node", "down");
	say_count(&e->m, &first, w.down, "device", "down");
	say_count(&e->m, &first, w.cordoned, "device", "cordoned");
	say_count(&e->m, &first, w.busy, "device", "in use");
	say_count(&e->m, &first, w.why[TP_PL_WHY_NODES], "node", "not in request.select.nodes");
	say_count(&e->m, &first, w.why[TP_PL_WHY_COLOCATE], "node", "away from the colocate job");
	say_count(&e->m, &first, w.why[TP_PL_WHY_MODEL], "node", "of another model");
	say_count(&e->m, &first, w.why[TP_PL_WHY_MEMORY], "node", "below request.select.min_memory_gb");
	say_count(&e->m, &first, w.why[TP_PL_WHY_SERVICE], "node", "at request.service's cap");
	say_count(&e->m, &first, w.why[TP_PL_WHY_PARTITION], "node",
	          "left out by the NVLink partition rules");
	say_count(&e->m, &first, w.slow, "device", "below request.select.min_perf");
	say_count(&e->m, &first, w.unpaired, "GPU", "without a free nearest NIC (request.gpu_nic_pairs)");
	if (first)
		mb_add(&e->m, "%u device%s in all", w.ndev, s_(w.ndev));
}

/* Per-domain reasons on a short level: the domains of level l (with at least k devices when
 * by_size) that can take fewer than min(k, their size), at most EX_NAMED named. */
static void domains_say(struct ex *e, unsigned l, bool by_size)
{
	struct pctx *p = e->p;
	const struct tp_level_impl *lv = &p->t->lv[l];
	if (lv->ndom > EX_SHORT)
		return;
	uint32_t named = 0, more = 0;
	for (uint32_t d = 0; d < lv->ndom && !p->err; d++) {
		uint32_t size = tp_dom_ndev(p->t, l, d);
		if ((by_size && size < e->k) || tp_pl_capd(p, l, d) >= min32(e->k, size))
			continue;
		if (named++ >= EX_NAMED) {
			more++;
			continue;
		}
		mb_add(&e->m, "; ");
		domain_say(e, l, d);
	}
	if (more)
		mb_add(&e->m, "; and %u more", more);
}

/* ---- the rules, one at a time ------------------------------------------------------------- */

/* The request's name for a cap on `level` ("request.max_per_domain[1]"). */
static void cap_field(const struct ex *e, const char *level, char *buf, size_t len)
{
	for (size_t i = 0; e->r && i < e->r->ncaps; i++)
		if (e->r->caps[i].level && strcmp(e->r->caps[i].level, level) == 0) {
			snprintf(buf, len, "request.max_per_domain[%zu]", i);
			return;
		}
	snprintf(buf, len, "request.max_per_domain");
}

struct selcount {
	uint32_t all, model, mem, perf, nodes;
};

/* Healthy, uncordoned devices that each select filter lets through, and all of them. */
static void select_count(struct pctx *p, struct selcount *s)
{
	const struct tp_topology *t = p->t;
	const struct tp_rq *q = p->q;
	memset(s, 0, sizeof *s);
	size_t nn = q->has_nodes ? q->nnodes : t->nnodes;
	for (size_t i = 0; i < nn; i++) {
		uint32_t node = q->has_nodes ? q->nodes[i] : (uint32_t)i;
		bool m = !q->has_model || (q->model >= 0 && t->node_model[node] == (uint16_t)q->model);
		bool g = !(q->min_mem > 0) || t->node_mem_gb[node] >= q->min_mem;
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++) {
			if (p->c->dstate[d] || j1_test(p->extra_down, d))
				continue;
			bool f = !(q->min_perf > 0) || t->dev_perf[d] >= q->min_perf;
			s->nodes++;
			s->model += m;
			s->mem += g;
			s->perf += f;
			s->all += m && g && f;
		}
	}
}

static bool why_select(struct ex *e)
{
	struct pctx *p = e->p;
	const struct tp_rq *q = p->q;
	const char *model = e->r && e->r->select_model ? e->r->select_model : "?";
	if (q->has_model && q->model < 0) {
		mb_add(&e->m, "infeasible: request.select.model '%s': no node has that model", model);
		return true;
	}
	if (!q->has_model && !(q->min_perf > 0) && !(q->min_mem > 0) && !q->has_nodes)
		return false;
	struct selcount s;
	select_count(p, &s);
	const char *hu = "healthy, uncordoned devices";
	/* a filter is named only when it is what removes the devices the request lacks */
	if (!q->has_nodes && s.nodes < e->k)
		return false;
	if (q->has_nodes && s.nodes < e->k)
		mb_add(&e->m, "infeasible: request.select.nodes allows %zu node%s with %u %s, the "
		       "request needs %u", q->nnodes, s_(q->nnodes), s.nodes, hu, e->k);
	else if (q->has_model && s.model < e->k)
		mb_add(&e->m, "infeasible: request.select.model '%s': %u %s%s have that model, the "
		       "request needs %u", model, s.model, hu, q->has_nodes ? " of the allowed nodes" : "",
		       e->k);
	else if (q->min_mem > 0 && s.mem < e->k)
		mb_add(&e->m, "infeasible: request.select.min_memory_gb %g: %u %s have that much "
		       "memory, the request needs %u", q->min_mem, s.mem, hu, e->k);
	else if (q->min_perf > 0 && s.perf < e->k)
		mb_add(&e->m, "infeasible: request.select.min_perf %g: %u %s are that fast, the "
		       "request needs %u", q->min_perf, s.perf, hu, e->k);
	else if (s.all < e->k)
		mb_add(&e->m, "infeasible: request.select's filters together leave %u %s, the request "
		       "needs %u", s.all, hu, e->k);
	else
		return false;
	return true;
}

/* A unit (group, slice) larger than every domain of its level, or a cap below one unit. */
static bool why_units(struct ex *e)
{
	struct pctx *p = e->p;
	const struct tp_rq *q = p->q;
	const struct tp_level_impl *lv = p->t->lv;
	if (q->gsize > lv[q->glevel].max_devices) {
		mb_add(&e->m, "infeasible: request.group.size %u is more than any %s holds (at most %u "
		       "devices)", q->gsize, lv[q->glevel].name, lv[q->glevel].max_devices);
		return true;
	}
	for (unsigned i = 0; i < q->nslices; i++)
		if (q->ssize[i] > lv[q->slevel[i]].max_devices) {
			mb_add(&e->m, "infeasible: request.slices[%u].size %u is more than any %s holds (at "
			       "most %u devices)", i, q->ssize[i], lv[q->slevel[i]].name,
			       lv[q->slevel[i]].max_devices);
			return true;
		}
	if (p->sl >= 0 && p->sl <= p->single_to) {
		/* the request sits in one domain of single_to, so in one of the spread level */
		bool req = q->required >= p->sl;
		mb_add(&e->m, "infeasible: request.spread.min_domains %u over %s cannot be met inside "
		       "one %s (%s)", p->S, lv[p->sl].name, lv[p->single_to].name,
		       req ? "request.required" : "request.colocate");
		return true;
	}
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->capdev[l] != TP_RQ_NOCAP && p->capdev[l] < p->u[l] && !p->have_used) {
			char f[48];
			cap_field(e, lv[l].name, f, sizeof f);
			mb_add(&e->m, "infeasible: %s lets one %s hold %u devices, less than one of the "
			       "request's units of %u (its groups and slices)", f, lv[l].name,
			       p->capdev[l], p->u[l]);
			return true;
		}
	return false;
}

/* The domains of the colocate level that hold the target: what the best of them takes. */
static bool why_colocate(struct ex *e)
{
	struct pctx *p = e->p;
	if (p->colevel < 0 || !p->scope[p->colevel])
		return false;
	unsigned cl = (unsigned)p->colevel;
	const struct tp_job_impl *job = job_at(p->c, p->q->colocate_slot);
	uint32_t best = 0, bdom = TP_NONE, ndom = 0;
	Word_t key = 0;
	JError_t je;
	for (int r = Judy1First(p->scope[cl], &key, &je); r == 1 && key < p->t->lv[cl].ndom;
	     r = Judy1Next(p->scope[cl], &key, &je)) {
		uint32_t cap = tp_pl_capd(p, cl, (uint32_t)key);
		ndom++;
		if (bdom == TP_NONE || cap > best)
			best = cap, bdom = (uint32_t)key;
	}
	if (bdom == TP_NONE || best >= e->k || !job)
		return false;
	char path[192];
	tp_topology_domain_path(p->t, cl, bdom, path, sizeof path);
	const char *lv = p->t->lv[cl].name;
	if (e->now)
		mb_add(&e->m, "fragmented: %u devices are free but request.colocate needs one %s holding "
		       "job '%s': ", e->pl->fit.free_total, lv, job->id);
	else
		mb_add(&e->m, "infeasible: request.colocate needs one %s holding job '%s': ", lv,
		       job->id);
	if (ndom == 1)
		mb_add(&e->m, "%s could take at most %u of the %u devices%s", path, best, e->k, when(e));
	else
		mb_add(&e->m, "the best of its %u %ss, %s, could take at most %u of the %u devices%s",
		       ndom, lv, path, best, e->k, when(e));
	key = 0;
	for (int r = Judy1First(p->scope[cl], &key, &je); ndom <= EX_NAMED && r == 1 &&
	     key < p->t->lv[cl].ndom; r = Judy1Next(p->scope[cl], &key, &je)) {
		mb_add(&e->m, "; ");
		domain_say(e, cl, (uint32_t)key);
	}
	return true;
}

/* Exclusivity (the request's, or other tenants' exclusive jobs) on the cluster as it is: the
 * domains of its level with free devices that it keeps out. */
static bool why_exclusive(struct ex *e)
{
	struct pctx *p = e->p;
	int xl = p->excl;
	for (unsigned l = 0; xl < 0 && l < p->nlev; l++)
		if (p->xbad[l])
			xl = (int)l;
	if (xl < 0)
		return false;
	unsigned l = (unsigned)xl;
	const struct tp_level_impl *lv = &p->t->lv[l];
	uint32_t with_free = 0, blocked = 0, named = 0, more = 0;
	uint64_t left = 0, kept = 0; /* what the others take; the free devices kept out */
	struct mbuf list = {.n = 0};
	for (uint32_t d = 0; d < lv->ndom && !p->err; d++) {
		if (!p->c->free[l][d] || !in_scope(p, l, d))
			continue;
		with_free++;
		uint32_t f, n, job = TP_NO_JOB;
		tp_dom_nodes(p->t, l, d, &f, &n);
		enum tp_pl_why y = tp_pl_node_why(p, f);
		if (y == TP_PL_WHY_XBAD || y == TP_PL_WHY_TENANT)
			job = excl_job(p, f, y);
		if (job == TP_NO_JOB) {
			left += tp_pl_capd(p, l, d);
			continue;
		}
		blocked++;
		kept += p->c->free[l][d];
		if (named++ >= EX_NAMED) {
			more++;
			continue;
		}
		const struct tp_job_impl *jb = job_at(p->c, job);
		char path[192];
		tp_topology_domain_path(p->t, l, d, path, sizeof path);
		mb_add(&list, "%s%s: tenant %s's job '%s'", named == 1 ? "" : "; ", path, jb->tenant,
		       jb->id);
	}
	/* exclusivity is what blocks only when the devices it keeps out would make up the rest */
	if (!blocked || left >= e->k || left + kept < e->k)
		return false;
	/* in one domain of a required level, the sum of the others says nothing: the level's
	 * figures with per-domain reasons do */
	if (p->single_to >= 0 && blocked != with_free)
		return false;
	if (more)
		mb_add(&list, "; and %u more", more);
	const char *field = p->excl >= 0 ? "request.exclusive" : "another tenant's exclusive job";
	if (blocked == with_free)
		mb_add(&e->m, "fragmented: %u devices are free but %s keeps the request out of every %s "
		       "that has free devices: each holds another tenant's job (%s)",
		       e->pl->fit.free_total, field, lv->name, list.s);
	else
		mb_add(&e->m, "fragmented: %u devices are free but %s keeps the request out of %u of "
		       "the %u %ss that have free devices (%s); the others can take %llu of the %u",
		       e->pl->fit.free_total, field, blocked, with_free, lv->name, list.s,
		       (unsigned long long)left, e->k);
	return true;
}

/* What the request can take under the tree rules: its required (or colocate) level's best
 * domain when it must sit in one, else the top level's sum. Walks nodes (filtered). */
static uint32_t tree_room(struct pctx *p, uint32_t k, uint32_t *dom)
{
	*dom = TP_NONE;
	if (p->single_to >= 0)
		return best_at_level(p, (unsigned)p->single_to, k, dom);
	uint64_t sum = 0;
	for (uint32_t d = 0; d < p->t->lv[0].ndom; d++)
		sum += tp_pl_capd(p, 0, d);
	return sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
}

/* The node capacities by free count and the levels whose capacities the histograms give, for
 * the context's caps and units (what set_units in place.c derives from them). */
static void derive_hist(struct pctx *p)
{
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

/* tree_room with every tree cap lifted (nocap) and every unit one device (nounits). Unfiltered,
 * the histograms answer as for the request itself; filtered, the nodes are walked. */
static uint32_t tree_room_without(struct pctx *p, uint32_t k, bool nocap, bool nounits,
                                  uint32_t *dom)
{
	uint32_t keep[TP_MAX_LEVELS], keepu[TP_MAX_LEVELS];
	uint32_t keepn[TP_MAX_NODE_DEVICES + 1];
	bool keeph[TP_MAX_LEVELS];
	memcpy(keep, p->capdev, sizeof keep);
	memcpy(keepu, p->u, sizeof keepu);
	memcpy(keepn, p->nodecap, sizeof keepn);
	memcpy(keeph, p->hist_ok, sizeof keeph);
	for (unsigned l = 0; l < p->nlev; l++) {
		if (nocap)
			p->capdev[l] = TP_RQ_NOCAP;
		if (nounits)
			p->u[l] = 1;
	}
	derive_hist(p);
	jl_free(&p->memo);
	uint32_t room = tree_room(p, k, dom);
	jl_free(&p->memo);
	memcpy(p->capdev, keep, sizeof keep);
	memcpy(p->u, keepu, sizeof keepu);
	memcpy(p->nodecap, keepn, sizeof keepn);
	tp_pl_capk_derive(p);
	memcpy(p->hist_ok, keeph, sizeof keeph);
	return room;
}

static bool why_caps(struct ex *e)
{
	struct pctx *p = e->p;
	int cl = -1;
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->capdev[l] != TP_RQ_NOCAP)
			cl = (int)l;
	if (cl < 0 || p->have_used)
		return false;
	uint32_t dom, with = tree_room(p, e->k, &dom);
	if (with >= e->k || tree_room_without(p, e->k, true, false, &dom) < e->k)
		return false;
	jl_free(&p->memo);
	with = tree_room(p, e->k, &dom);
	const struct tp_level_impl *lv = p->t->lv;
	char f[48];
	cap_field(e, lv[cl].name, f, sizeof f);
	mb_add(&e->m, "%s: %s (at most %u devices in one %s) lets ", e->now ? "fragmented" : "infeasible",
	       f, p->capdev[cl], lv[cl].name);
	if (p->single_to >= 0 && dom != TP_NONE) {
		char path[192];
		tp_topology_domain_path(p->t, (unsigned)p->single_to, dom, path, sizeof path);
		mb_add(&e->m, "the best %s (%s) take at most %u of the %u devices%s", lv[p->single_to].name,
		       path, with, e->k, when(e));
	} else {
		mb_add(&e->m, "the %s%s take at most %u of the %u devices%s", lv[cl].name,
		       p->nlev > 1 ? "s" : "", with, e->k, when(e));
	}
	return true;
}

/* A tree spread: the domains of its level that can take one unit. */
static bool why_tree_spread(struct ex *e)
{
	struct pctx *p = e->p;
	if (p->sl < 0)
		return false;
	unsigned sl = (unsigned)p->sl;
	uint32_t have = 0;
	for (uint32_t x = 0; x < p->t->lv[sl].ndom && have < p->S && !p->err; x++)
		have += tp_pl_capd(p, sl, x) > 0;
	if (have >= p->S)
		return false;
	const char *lv = p->t->lv[sl].name;
	mb_add(&e->m, "%s: request.spread.min_domains %u over %s: only %u %s%s can take a unit of %u "
	       "device%s%s", e->now ? "fragmented" : "infeasible", p->S, lv, have, lv, s_(have),
	       p->u[sl], s_(p->u[sl]), when(e));
	return true;
}

/* Failure-domain rules: per cap, the devices the usable ones allow under it (per domain at
 * most its limit), and the failure domains holding usable devices (spread). One node walk. */
static bool why_fd(struct ex *e, bool blocked)
{
	struct pctx *p = e->p;
	const struct tp_rq *q = p->q;
	const struct tp_topology *t = p->t;
	if (!tp_pl_has_fd_rules(q))
		return false;
	unsigned nk = q->nfdcaps < TP_MAX_LEVELS ? q->nfdcaps : TP_MAX_LEVELS;
	Pvoid_t cnt[TP_MAX_LEVELS + 1] = {NULL};
	uint64_t room[TP_MAX_LEVELS] = {0};
	uint32_t ndom[TP_MAX_LEVELS + 1] = {0};
	for (uint32_t node = 0; node < t->nnodes && !p->err; node++) {
		uint32_t list[TP_MAX_NODE_DEVICES];
		uint32_t n = tp_pl_capd(p, p->nl, node) ? tp_pl_node_usable(p, node, list) : 0;
		for (uint32_t i = 0; i < n; i++)
			for (unsigned c = 0; c <= nk; c++) {
				bool spread = c == nk;
				if (spread && q->spread_fd < 0)
					continue;
				const struct tp_rq_fdcap *fc = spread ? NULL : &q->fdcaps[c];
				uint32_t f = t->fd[spread ? (unsigned)q->spread_fd : fc->kind].dev_fd[list[i]];
				unsigned slot = spread ? TP_MAX_LEVELS : c;
				uint64_t have = jl_get(cnt[slot], f);
				ndom[slot] += !have;
				if (!spread && have < (fc->devices != TP_RQ_NOCAP
				                           ? fc->devices : (uint64_t)fc->groups * q->gsize))
					room[c]++;
				jl_add(p, &cnt[slot], f, 1);
			}
	}
	for (unsigned c = 0; c <= TP_MAX_LEVELS; c++)
		jl_free(&cnt[c]);
	const char *st = e->now ? "fragmented" : "infeasible";
	for (unsigned c = 0; c < nk; c++) {
		if (room[c] >= e->k)
			continue;
		const struct tp_rq_fdcap *fc = &q->fdcaps[c];
		const char *kind = t->fd[fc->kind].name;
		char f[48];
		cap_field(e, kind, f, sizeof f);
		bool dev = fc->devices != TP_RQ_NOCAP;
		uint32_t lim = dev ? fc->devices : fc->groups;
		mb_add(&e->m, "%s: %s (at most %u %s%s in one %s domain) lets the %u %s domain%s with "
		       "usable devices take at most %llu of the %u devices%s", st, f, lim,
		       dev ? "device" : "group", s_(lim), kind, ndom[c], kind, s_(ndom[c]),
		       (unsigned long long)room[c], e->k, when(e));
		return true;
	}
	const char *sk = q->spread_fd >= 0 ? t->fd[q->spread_fd].name : "";
	if (q->spread_fd >= 0 && e->k < q->spread_min) {
		mb_add(&e->m, "infeasible: request.spread.min_domains %u over %s needs more devices than "
		       "the request's %u", q->spread_min, sk, e->k);
		return true;
	}
	if (q->spread_fd >= 0 && ndom[TP_MAX_LEVELS] < q->spread_min) {
		mb_add(&e->m, "%s: request.spread.min_domains %u over %s: the usable devices lie in only "
		       "%u %s domain%s%s", st, q->spread_min, sk, ndom[TP_MAX_LEVELS], sk,
		       s_(ndom[TP_MAX_LEVELS]), when(e));
		return true;
	}
	if (!blocked)
		return false;
	/* each rule alone leaves room counted device by device: the groups, slices and the tree
	 * rules with them do not */
	struct mbuf rules = {.n = 0};
	for (unsigned c = 0; c < nk; c++) {
		char f[48];
		cap_field(e, t->fd[q->fdcaps[c].kind].name, f, sizeof f);
		mb_add(&rules, "%s%s over %s", c ? ", " : "", f, t->fd[q->fdcaps[c].kind].name);
	}
	if (q->spread_fd >= 0)
		mb_add(&rules, "%srequest.spread over %s", nk ? ", " : "", sk);
	mb_add(&e->m, "%s: no placement of the %u devices in groups of %u meets the failure-domain "
	       "rules (%s)%s, though counted device by device they leave room", st, e->k, q->gsize,
	       rules.s, when(e));
	return true;
}

/* Unconstrained requests short of healthy, uncordoned devices. */
static bool why_health(struct ex *e)
{
	struct pctx *p = e->p;
	const struct tp_cluster *c = p->c;
	if (p->single_to >= 0 || (!c->ndown && !c->ncordoned) || p->extra_down)
		return false;
	uint32_t n = p->t->ndevices, ok = n - c->ndown - c->ncordoned;
	if (ok >= e->k || n < e->k)
		return false;
	mb_add(&e->m, "infeasible: %u of the topology's %u devices are healthy and uncordoned (%u "
	       "down, %u cordoned), the request needs %u", ok, n, c->ndown, c->ncordoned, e->k);
	domains_say(e, 0, false);
	return true;
}

/* ---- the statuses ------------------------------------------------------------------------- */

static int say_infeasible(struct ex *e, bool fd_blocked)
{
	struct pctx *p = e->p;
	const struct tp_rq *q = p->q;
	const char *lv = p->t->lv[e->L].name;
	uint32_t dom, ib = best_at_level(p, e->L, e->k, &dom);
	/* larger than any domain of the required level: that level's figure says it all */
	bool too_big = q->required >= 0 && e->k > p->t->lv[q->required].max_devices;
	if (!too_big && (why_select(e) || why_units(e) || why_colocate(e)))
		return TP_EINFEASIBLE;
	if (q->pairs) {
		mb_add(&e->m, "infeasible: request.gpu_nic_pairs 1: the request's %u devices cannot "
		       "each be paired with a distinct nearest NIC of their node, even with every other "
		       "job gone (the topology has %llu GPUs that can be paired; one %s could take at "
		       "most %u of them)", e->k, (unsigned long long)tp_pl_topology_pairable(p), lv, ib);
		return TP_EINFEASIBLE;
	}
	if (!too_big && (why_caps(e) || why_tree_spread(e) || why_fd(e, fd_blocked) || why_health(e)))
		return TP_EINFEASIBLE;
	if (q->required < 0 && p->single_to < 0 && e->k > p->t->ndevices) {
		mb_add(&e->m, "infeasible: the request's %u devices are more than the topology's %u",
		       e->k, p->t->ndevices);
		return TP_EINFEASIBLE;
	}
	mb_add(&e->m, "infeasible: the request's %u devices cannot be placed even with every other "
	       "job gone (healthy, uncordoned, matching devices; one %s could take at most %u of "
	       "them)", e->k, lv, ib);
	domains_say(e, e->L, p->single_to >= 0);
	return TP_EINFEASIBLE;
}

/* Units that the free devices cannot make (groups, slices), on an unconstrained request. */
static bool why_units_now(struct ex *e)
{
	struct pctx *p = e->p;
	if (p->single_to >= 0 || (p->u[p->nl] <= 1 && !p->q->nslices))
		return false;
	uint32_t dom, room = tree_room(p, e->k, &dom);
	if (room >= e->k)
		return false;
	if (tree_room_without(p, e->k, false, true, &dom) < e->k)
		return false;
	const struct tp_rq *q = p->q;
	if (q->nslices && p->u[0] > p->u[p->nl])
		mb_add(&e->m, "fragmented: %u devices are free but whole request.slices (%u devices in "
		       "one %s) take only %u of the %u", e->pl->fit.free_total, q->ssize[q->nslices - 1],
		       p->t->lv[q->slevel[q->nslices - 1]].name, room, e->k);
	else
		mb_add(&e->m, "fragmented: %u devices are free but whole groups of request.group.size %u "
		       "(each inside one %s) take only %u of the %u", e->pl->fit.free_total, q->gsize,
		       p->t->lv[q->glevel].name, room, e->k);
	return true;
}

static int say_fragmented(struct ex *e, int level, const char *path)
{
	struct pctx *p = e->p;
	const char *lv = p->t->lv[e->L].name;
	bool tree_ok = false;
	if (tp_pl_has_fd_rules(p->q)) {
		int r = tp_pl_feasible(p, -1, 0, e->k);
		if (r < 0)
			return r;
		tree_ok = r == 1;
	}
	if (why_colocate(e) || why_exclusive(e) || why_caps(e) || why_tree_spread(e) ||
	    (tree_ok && why_fd(e, true)) || why_units_now(e))
		return TP_EFRAGMENTED;
	if (level >= 0 && e->pl->fit.best == 0)
		mb_add(&e->m, "fragmented: %u devices are free but no %s can take any of the %u the "
		       "request needs in one %s", e->pl->fit.free_total, lv, e->pl->fit.needed, lv);
	else if (level >= 0)
		mb_add(&e->m, "fragmented: %u devices are free but the best %s (%s) can take %u of the "
		       "%u the request needs in one %s", e->pl->fit.free_total, lv, path,
		       e->pl->fit.best, e->pl->fit.needed, lv);
	else if (e->pl->fit.best == 0)
		mb_add(&e->m, "fragmented: %u devices are free but not where the request's constraints "
		       "need them (no %s can take any of the %u)", e->pl->fit.free_total, lv,
		       e->pl->fit.needed);
	else
		mb_add(&e->m, "fragmented: %u devices are free but not where the request's constraints "
		       "need them (the best %s, %s, can take %u of the %u)", e->pl->fit.free_total, lv,
		       path, e->pl->fit.best, e->pl->fit.needed);
	domains_say(e, e->L, level >= 0);
	return TP_EFRAGMENTED;
}

/* Back from the emptied cluster to the cluster as it is (what tp_pl_go_ideal changed). */
static void go_now(struct pctx *p, bool filtered)
{
	p->ideal = false;
	p->ideal_plain = false;
	p->filtered = filtered;
	p->root_kind = 0;
	jl_free(&p->memo);
	j1_free(&p->xknown);
	j1_free(&p->xdirty);
	tp_pl_build_xbad(p, false);
	tp_pl_build_sbad(p, true);
}

/* Whether k devices fit the emptied cluster: 1, 0 (*fd_blocked when the tree has room and the
 * failure-domain rules do not), or an error. */
static int ideal_feasible(struct pctx *p, uint32_t k, int ideal_ok, bool *fd_blocked)
{
	const struct tp_rq *q = p->q;
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
		*fd_blocked = r == 0;
	}
	return r;
}

/* Why k devices could not be placed: the status, the fit figures and the message. */
int tp_pl_explain_failure(tp_placement *pl, struct pctx *p, uint32_t k, uint32_t needed,
                          int level, int ideal_ok)
{
	const struct tp_topology *t = p->t;
	struct ex *e = tp_pl_ar_alloc(p, sizeof *e);
	if (!e)
		return TP_ENOMEM;
	memset(e, 0, sizeof *e);
	*e = (struct ex){.pl = pl, .p = p, .r = pl->replace ? NULL : pl->req, .k = k,
	                 .L = level >= 0 ? (unsigned)level : 0};
	const struct tp_job_impl *self = p->self_slot != TP_NO_JOB ? job_at(p->c, p->self_slot) : NULL;
	if (!e->r && self)
		e->r = self->shape; /* a replacement: the names are the job's shape's */
	char path[192] = "-";
	uint32_t dom;
	pl->has_fit = true;
	pl->fit.needed = needed;
	pl->fit.level = (int)e->L;
	pl->fit.free_total = tp_pl_matching_free(p);
	pl->fit.best = min32(best_at_level(p, e->L, k, &dom), min32(needed, pl->fit.free_total));
	if (p->q->nfdcaps && pl->fit.best) {
		/* the tree's figure does not see the failure-domain caps; what they let through does */
		uint32_t fr = fd_level_room(p, e->L), u = p->u[e->L];
		if (p->q->glevel < e->L)
			u = max32(u, p->q->gsize);
		pl->fit.best = min32(pl->fit.best, floor_to(fr, u));
	}
	if (dom != TP_NONE)
		tp_topology_domain_path(t, e->L, dom, path, sizeof path);
	bool filtered = p->filtered, fd_blocked = false;
	tp_pl_go_ideal(p);
	int r = ideal_feasible(p, k, ideal_ok, &fd_blocked);
	if (r < 0)
		return r;
	int rc;
	if (!r) {
		rc = say_infeasible(e, fd_blocked);
	} else if (pl->fit.free_total < needed) {
		mb_add(&e->m, "busy: %u matching devices are free, the request needs %u",
		       pl->fit.free_total, needed);
		rc = TP_EBUSY;
	} else {
		go_now(p, filtered);
		e->now = true;
		uint32_t outside = tp_pl_service_free_outside(p, pl->fit.free_total);
		if (outside < needed) { /* the service's own replicas hold the room its caps allow */
			mb_add(&e->m, "busy: %u matching devices are free, %u of them outside the "
			       "domains where service %s is at its cap, the request needs %u",
			       pl->fit.free_total, outside, p->q->service, needed);
			rc = TP_EBUSY;
		} else {
			rc = say_fragmented(e, level, path);
		}
	}
	if (p->err)
		return p->err;
	if (rc < 0 && rc != TP_EINFEASIBLE && rc != TP_EBUSY && rc != TP_EFRAGMENTED)
		return rc;
	char svc[256] = "";
	if (rc != TP_EINFEASIBLE)
		tp_pl_say_service(p, svc, sizeof svc);
	return tp_seterr(pl->errmsg, rc, "%s%s", e->m.s, svc);
}
