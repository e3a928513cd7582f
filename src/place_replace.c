/* SPDX-License-Identifier: MIT */
/*
 * tp_replace: new devices for the failed devices of a running job, under its shape.
 */
#include <stdlib.h>
#include <string.h>

#include "place_internal.h"

/* ---- replace -------------------------------------------------------------------------------- */

/*
 * A job's shape nests its constraints: the required (or colocate) domain holds every rank, each
 * slice layer holds runs of its size, each group a run of the group size, each device itself.
 * For a failed rank, the innermost unit that still has healthy members fixes where its
 * replacement must go (the anchor: that unit's domain); the next unit inwards has no healthy
 * member left and is placed anew, as a small request inside the anchor, with the shape's
 * inner slices and groups. Anchors are handled innermost first; each sub-request is solved
 * with the job's devices counting as already used (no new domain for rule 1, and towards the
 * caps). The units are the shape's, as tp_rq_units (request.c) derives them.
 */
struct rclass {
	int a;          /* anchor layer, -1: none (the whole cluster) */
	uint32_t aunit; /* anchor unit index */
	uint32_t first; /* first failed rank (for ordering) */
};

/* Each unit lies inside the units around it (its ranks are a run of theirs), so its domain is
 * at least as deep as theirs: a group whose own level is above the required level still sits
 * in the required domain, and its replacements must too. */
static void nest_levels(struct tp_rq_unit *ly, unsigned nly)
{
	for (unsigned i = 1; i < nly; i++)
		if (ly[i].level < ly[i - 1].level)
			ly[i].level = ly[i - 1].level;
}

/* A rank of unit `unit` of layer ly that is healthy, or UINT32_MAX. */
static uint32_t healthy_rank(const struct tp_rq_unit *ly, uint32_t unit, uint32_t n,
                             const bool *bad)
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
static void sub_request(const struct tp_rq *shape, const struct tp_rq_unit *ly, int a, uint32_t cnt,
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
	const struct tp_rq_unit *in = &ly[a + 1];
	if (in->kind == TP_RQ_UNIT_WHOLE) {
		sub->required = shape->required;
	} else {
		sub->colocate_slot = a >= 0 ? TP_NO_JOB_SLOT : shape->colocate_slot;
		if (a >= 0)
			sub->colocate_level = -1;
	}
	if (in->kind <= TP_RQ_UNIT_SLICE) {
		unsigned from = in->kind == TP_RQ_UNIT_SLICE ? in->slice : 0;
		for (unsigned i = from; i < shape->nslices; i++) {
			sub->slevel[sub->nslices] = shape->slevel[i];
			sub->ssize[sub->nslices++] = shape->ssize[i];
		}
	}
	if (in->kind == TP_RQ_UNIT_DEVICE) {
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
	int spares;       /* the pass: TP_PL_SPARES_ONLY, _TOO, or 0 (the cluster has none) */
	uint64_t work;    /* job ranks visited setting up passes so far */
	uint64_t max_work;    /* tp_replace_options.max_work resolved (UINT64_MAX: none) */
	uint64_t max_time_us; /* tp_replace_options.max_time_us, 0: none */
	uint64_t deadline_ns; /* CLOCK_MONOTONIC deadline, 0: none */
	uint32_t done, ncls;  /* classes placed so far, of ncls (for the budget's message) */
};

/* ---- the work budget (tp_replace_options) --------------------------------------------------- */

static void budget_start(struct rstate *rs, const tp_replace_options *o)
{
	rs->max_work = o->max_work ? o->max_work : TP_REPLACE_MAX_WORK;
	rs->max_time_us = o->max_time_us;
	rs->deadline_ns = tp_deadline_ns(o->max_time_us);
}

/* Charge one pass (its set-up reads every rank of the job); TP_ELIMIT with the message on pl
 * once the budget cannot pay for it or the deadline has passed. */
static int budget_charge(tp_placement *pl, struct rstate *rs)
{
	uint64_t n = rs->job->ndev;
	if (rs->max_work != UINT64_MAX && (rs->work > rs->max_work || n > rs->max_work - rs->work))
		return tp_seterr(pl->errmsg, TP_ELIMIT,
		                 "replace: the work budget ran out after %u of %u sub-requests of job "
		                 "'%s' (%u ranks each): opts.max_work %llu (job ranks visited) is "
		                 "spent; raise it (UINT64_MAX: no limit)",
		                 rs->done, rs->ncls, rs->job->id, rs->job->ndev,
		                 (unsigned long long)rs->max_work);
	if (rs->deadline_ns && tp_monotonic_ns() >= rs->deadline_ns)
		return tp_seterr(pl->errmsg, TP_ELIMIT,
		                 "replace: the time limit ran out after %u of %u sub-requests of job "
		                 "'%s' (opts.max_time_us %llu); raise it (0: no limit)",
		                 rs->done, rs->ncls, rs->job->id, (unsigned long long)rs->max_time_us);
	rs->work += n;
	return 0;
}

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
	int rc = tp_pl_ctx_init(p, rs->c, sub, rs->slot);
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
	p->spares = rs->spares;
	p->filtered = true;
	p->compact = true;
	p->single_to = -1;
	p->sl = -1;
	p->hist_ok[0] = false;
	return p->err;
}

/* The anchor's domain: level and index, or -1 for the whole cluster. */
static int anchor_of(const struct pctx *p, const struct rstate *rs, const struct tp_rq_unit *ly,
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
 * on 0, the context is left set up for tp_pl_explain_failure(). */
/* Evaluate the replacements in domain `*dom` of level `*al`. Without an anchor, start in the
 * smallest domain holding the healthy devices and climb until they fit: staying inside a domain
 * adds no domain at its level or above, which every placement leaving it does, so the first
 * that fits is optimal. */
/* Whether the domains above (al, dom) can take cnt more devices under their caps: tp_pl_eval()
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
                         uint32_t cnt, uint32_t *best, int top)
{
	for (;;) {
		int r = ancestors_take(p, *al, *dom, cnt)
		            ? tp_pl_eval(p, *al, *dom, cnt, colq(p, *al), best)
		            : 0;
		/* never above the anchor, nor above the level the job's shape requires (nor, for
		 * the spares-only pass, above `top`) */
		if (r != 0 || *al < 0 || cl->a >= 0 || (p->q->required >= 0 && *al <= p->q->required) ||
		    *al <= top)
			return r;
		*dom = *al > 0 ? p->t->lv[*al].parent[*dom] : 0;
		(*al)--;
	}
}

static int replace_class_pass(struct pctx *p, struct rstate *rs, const struct tp_rq *shape,
                              const struct tp_rq_unit *ly, const struct rclass *cl,
                              struct tp_rq *sub, uint32_t *need, int *ideal_ok)
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
		rc = tp_pl_out_alloc(p, cnt);
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
	/* spares only: within the spare policy's domain of the healthy devices (a node's parent
	 * without a policy), never further */
	int top = -1;
	if (rs->spares == TP_PL_SPARES_ONLY)
		top = rs->c->spare_k ? (int)rs->c->spare_level : (int)p->nl - 1;
	int r = eval_climbing(p, cl, &al, &dom, cnt, best, top);
	if (r == 0 && rs->spares == TP_PL_SPARES_ONLY)
		return 0; /* the caller tries again with every free device */
	if (r == 0) {
		/* could it fit the anchor with every other job gone? (the job itself stays) */
		al = anchor_of(p, rs, ly, cl, &dom);
		if (al < 0)
			al = smallest_common(p, rs, &dom);
		tp_pl_go_ideal(p);
		r = eval_climbing(p, cl, &al, &dom, cnt, best, -1);
		p->ideal = false;
		p->ideal_plain = false;
		p->filtered = true;
		jl_free(&p->memo);
		j1_free(&p->xknown);
		j1_free(&p->xdirty);
		tp_pl_build_xbad(p, false);
		p->root_kind = 0;
		*ideal_ok = r;
		return r < 0 ? r : 0;
	}
	if (r != 1)
		return r;
	int e = tp_pl_emit(p, al, dom, cnt, colq(p, al));
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

/* A class placed on spares first when the cluster has any (in the spare domain of its healthy
 * devices), else on spares and free devices alike: the leaf tables take the tightest nodes
 * first, and a spare node counts no free device, so spares still win ties there. */
static int replace_class(tp_placement *pl, struct pctx *p, struct rstate *rs,
                         const struct tp_rq *shape, const struct tp_rq_unit *ly,
                         const struct rclass *cl, struct tp_rq *sub, uint32_t *need,
                         int *ideal_ok)
{
	int rc = budget_charge(pl, rs);
	if (rc)
		return rc;
	if (!rs->c->nspare_nodes) {
		rs->spares = 0;
		return replace_class_pass(p, rs, shape, ly, cl, sub, need, ideal_ok);
	}
	rs->spares = TP_PL_SPARES_ONLY;
	int r = replace_class_pass(p, rs, shape, ly, cl, sub, need, ideal_ok);
	if (r != 0)
		return r;
	tp_pl_ctx_fini(p);
	if ((rc = budget_charge(pl, rs)))
		return rc;
	rs->spares = TP_PL_SPARES_TOO;
	return replace_class_pass(p, rs, shape, ly, cl, sub, need, ideal_ok);
}

/* A replacement refused after the fact (its list breaks a rule the classes do not see): the
 * fit figures as tp_pl_explain_failure() gives them, FRAGMENTED since the replacements
 * themselves were found free. */
static void replace_fit(tp_placement *pl, struct pctx *p, uint32_t needed, int level)
{
	pl->has_fit = true;
	pl->fit.needed = needed;
	pl->fit.level = level < 0 ? 0 : level;
	pl->fit.free_total = tp_pl_matching_free(p);
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

/* The job's shape resolved (*has_shape), or when it has none or it no longer resolves, the
 * plainest one: groups of one device, no level, no cap. Returns 0 or the code of a shape that
 * no longer resolves (the replacement then fails with it). */
static int replace_shape(tp_placement *pl, const struct tp_cluster *c,
                         const struct tp_job_impl *job, struct tp_rq *shape, bool *has_shape)
{
	char scratch[TP_ERRMSG_LEN];
	int rc = 0;
	*has_shape = false;
	if (job->shape) {
		rc = tp_request_resolve(c->t, c, job->shape, TP_RQ_SHAPE, &pl->alloc, shape, scratch);
		if (rc == TP_ENOMEM)
			return rc;
		*has_shape = rc == 0;
	}
	if (!*has_shape) {
		memset(shape, 0, sizeof *shape);
		shape->gsize = 1;
		shape->glevel = c->t->nlevels - 1;
		shape->required = shape->preferred = shape->exclusive = -1;
		shape->spread_level = shape->spread_fd = shape->colocate_level = -1;
		shape->colocate_slot = TP_NO_JOB_SLOT;
		for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
			shape->capdev[l] = shape->capgrp[l] = TP_RQ_NOCAP;
	}
	shape->id = job->id;
	shape->tenant = job->tenant;
	shape->count = job->ndev;
	return rc;
}

/* Mark the ranks to replace: the failed devices and the job's devices that are down.
 * Returns how many (*nbad); p->err on failure. */
static void replace_mark_bad(struct pctx *p, struct rstate *rs, const uint32_t *failed,
                             size_t nfailed, uint32_t *nbad)
{
	const struct tp_job_impl *job = rs->job;
	for (size_t i = 0; i < nfailed; i++)
		j1_set(p, &rs->down, failed[i]);
	*nbad = 0;
	for (uint32_t r = 0; r < job->ndev; r++) {
		rs->bad[r] = j1_test(rs->down, job->devs[r]) ||
		             (rs->c->dstate[job->devs[r]] & TP_DS_DOWN);
		if (rs->bad[r]) {
			j1_set(p, &rs->down, job->devs[r]);
			(*nbad)++;
		}
	}
}

/* One class per (anchor layer, anchor unit) of the ranks to replace, innermost anchor first.
 * Ranks are visited in order, so at every layer the unit of a rank never decreases: each
 * unit's healthy member is looked for once and a class is new exactly when its unit is not the
 * last one of its layer, which keeps this linear in the job's size times its layers. */
static uint32_t replace_classes(const struct tp_rq_unit *ly, unsigned nly, const bool *bad,
                                uint32_t n, struct rclass *cls)
{
	uint32_t ncls = 0;
	uint32_t unit[TP_RQ_MAX_UNITS], last[TP_RQ_MAX_UNITS + 1];
	bool healthy[TP_RQ_MAX_UNITS];
	for (unsigned x = 0; x < nly; x++)
		unit[x] = UINT32_MAX;
	for (unsigned x = 0; x <= nly; x++)
		last[x] = UINT32_MAX;
	for (uint32_t r = 0; r < n; r++) {
		if (!bad[r])
			continue;
		int a = -1;
		for (int x = (int)nly - 1; x >= 0 && a < 0; x--) {
			if (unit[x] != r / ly[x].size) {
				unit[x] = r / ly[x].size;
				healthy[x] = healthy_rank(&ly[x], unit[x], n, bad) != UINT32_MAX;
			}
			if (healthy[x])
				a = x;
		}
		uint32_t au = a >= 0 ? r / ly[a].size : 0;
		if (last[a + 1] != au) {
			last[a + 1] = au;
			cls[ncls++] = (struct rclass){a, au, r};
		}
	}
	qsort(cls, ncls, sizeof *cls, rclass_cmp);
	return ncls;
}

/* The rules the classes cannot see, on the job's final list: failure-domain caps and spread
 * (they count the whole job), and a tree spread (it couples the classes: refuse a list that
 * spreads less than the job's did, below the shape's minimum). */
static int replace_check_whole(tp_placement *pl, struct pctx *p, const struct rstate *rs,
                               const struct tp_rq *shape, const uint32_t *orig, uint32_t nbad)
{
	const struct tp_cluster *c = rs->c;
	uint32_t n = rs->job->ndev;
	int rc = 0;
	if (tp_pl_has_fd_rules(shape)) {
		struct pctx q;
		rc = tp_pl_ctx_init(&q, c, shape, rs->slot);
		bool ok = true;
		if (!rc)
			rc = tp_pl_fd_check(&q, rs->devs, n, &ok);
		if (!rc && !ok) {
			replace_fit(pl, &q, nbad, 0);
			rc = tp_seterr(pl->errmsg, TP_EFRAGMENTED,
			               "fragmented: the replacements would break the job's "
			               "failure-domain caps or spread");
		}
		tp_pl_ctx_fini(&q);
	}
	if (!rc && shape->spread_level >= 0 && shape->spread_min >= 2) {
		unsigned l = (unsigned)shape->spread_level;
		uint32_t now = domains_touched(p, l, rs->devs, n);
		uint32_t before = domains_touched(p, l, orig, n);
		if (p->err)
			rc = p->err;
		if (!rc && now < shape->spread_min && now < before) {
			replace_fit(pl, p, nbad, (int)l);
			rc = tp_seterr(pl->errmsg, TP_EFRAGMENTED,
			               "fragmented: the replacements would leave job '%s' on %u "
			               "domains of %s, below its spread of %u", rs->job->id, now,
			               c->t->lv[l].name, shape->spread_min);
		}
	}
	return rc;
}

/* ---- when repair is impossible ------------------------------------------------------------ */

/* Where the replacements of class cl may go: the anchor's domain, else the job's required
 * domain (the one holding its healthy devices), else the whole cluster (-1). */
static int class_home(const struct pctx *p, const struct rstate *rs, const struct tp_rq *shape,
                      const struct tp_rq_unit *ly, const struct rclass *cl, uint32_t *dom)
{
	int al = anchor_of(p, rs, ly, cl, dom);
	if (al >= 0 || shape->required < 0)
		return al;
	int l = smallest_common(p, rs, dom);
	if (l < shape->required)
		return -1;
	uint32_t node = p->t->dev_node[p->t->dev_first[0]];
	for (uint32_t r = 0; r < rs->job->ndev; r++)
		if (!rs->bad[r]) {
			node = p->t->dev_node[rs->devs[r]];
			break;
		}
	*dom = tp_node_ancestor(p->t, node, (unsigned)shape->required);
	return shape->required;
}

/* "shrink to K of N slices (R ranks)": the job without the outermost slices (else groups)
 * that hold a failed rank of the class that cannot be repaired (ranks [from, to)). */
static void shrink_text(tp_placement *pl, const struct rstate *rs, const struct tp_rq_unit *ly,
                        unsigned nly, uint32_t from, uint32_t to, char *buf, size_t len)
{
	uint32_t n = rs->job->ndev;
	const struct tp_rq_unit *u = NULL;
	for (unsigned i = 0; i < nly && !u; i++)
		if (ly[i].kind == TP_RQ_UNIT_SLICE)
			u = &ly[i];
	for (unsigned i = 0; i < nly && !u; i++)
		if (ly[i].kind == TP_RQ_UNIT_GROUP && ly[i].size > 1)
			u = &ly[i];
	uint32_t size = u ? u->size : 1, units = n / size, kept = 0;
	for (uint32_t k = 0; k < units; k++) {
		bool lost = false;
		for (uint32_t r = k * size; r < (k + 1) * size && !lost; r++)
			lost = r >= from && r < to && rs->bad[r];
		kept += !lost;
	}
	const char *what = !u ? "devices" : u->kind == TP_RQ_UNIT_SLICE ? "slices" : "groups";
	pl->has_shrink = true;
	pl->shrink_ranks = kept * size;
	pl->shrink_units = kept;
	pl->shrink_of = units;
	if (kept)
		snprintf(buf, len, "shrink to %u of %u %s (%u ranks)", kept, units, what, kept * size);
	else
		snprintf(buf, len, "none (no whole %s would be left to shrink to)", what);
}

static int cmp_evict(const void *x, const void *y)
{
	const uint64_t *a = x, *b = y; /* devices << 32 | slot, fewest devices first */
	return (*a > *b) - (*a < *b);
}

/* "evict job 'a' (8 devices) in block0/rack0": counted in devices, the smallest job of the home
 * domain that frees what its free devices and spares lack, else its largest jobs until they
 * do. Empty when the home is the whole cluster or evicting every job would not do. */
static void evict_text(struct pctx *p, const struct rstate *rs, int al, uint32_t dom,
                       uint32_t need, const char *path, char *buf, size_t len)
{
	const struct tp_cluster *c = rs->c;
	buf[0] = '\0';
	if (al < 0)
		return;
	uint32_t first, nn;
	tp_dom_nodes(p->t, (unsigned)al, dom, &first, &nn);
	Pvoid_t cnt = NULL;
	for (uint32_t d = p->t->dev_first[first]; d < p->t->dev_first[first + nn]; d++) {
		uint32_t j = c->dev_job[d];
		if (j != TP_NO_JOB && j != rs->slot && !(c->dstate[d] & TP_DS_DOWN))
			jl_add(p, &cnt, j, 1);
	}
	uint64_t ord[64];
	size_t no = 0;
	Word_t k = 0;
	JError_t je;
	for (PWord_t v = cnt ? (PWord_t)JudyLFirst(cnt, &k, &je) : NULL; v && v != PJERR && no < 64;
	     v = (PWord_t)JudyLNext(cnt, &k, &je))
		ord[no++] = (uint64_t)*v << 32 | k;
	jl_free(&cnt);
	qsort(ord, no, sizeof *ord, cmp_evict);
	uint64_t have = (uint64_t)c->free[al][dom] + c->spare_devs[al][dom];
	size_t take = 0, at = 0, one = no;
	for (size_t i = 0; i < no && one == no; i++)
		if (have + (ord[i] >> 32) >= need)
			one = i;
	if (one < no) {
		ord[0] = ord[one];
		take = 1;
	} else {
		for (size_t i = 0; i < no / 2; i++) { /* largest first */
			uint64_t x = ord[i];
			ord[i] = ord[no - 1 - i];
			ord[no - 1 - i] = x;
		}
		while (take < no && have < need)
			have += ord[take++] >> 32;
		if (have < need)
			return;
	}
	if (take == 0)
		return;
	at = (size_t)snprintf(buf, len, ", or evict");
	for (size_t i = 0; i < take && i < 4 && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s job '%s' (%u devices)", i ? "," : "",
		                       c->jobs[(uint32_t)ord[i]]->id, (unsigned)(ord[i] >> 32));
	if (at < len)
		snprintf(buf + at, len - at, "%s in %s", take > 4 ? " and more" : "", path);
}

/* A class could not be placed: say where its replacements must go (only a domain the job may
 * use) and the cheapest alternatives. Keeps the code tp_pl_explain_failure() chose; an
 * infeasible class keeps its message and gets the shrink alternative. */
static void replace_explain(tp_placement *pl, struct pctx *p, const struct rstate *rs,
                            const struct tp_rq *shape, const struct tp_rq_unit *ly, unsigned nly,
                            const struct rclass *cl, uint32_t need, int code)
{
	const struct tp_topology *t = p->t;
	const struct tp_cluster *c = rs->c;
	uint32_t dom;
	int al = class_home(p, rs, shape, ly, cl, &dom);
	char path[256] = "the cluster", shrink[96], evict[320], head[TP_ERRMSG_LEN];
	if (al >= 0)
		tp_topology_domain_path(t, (unsigned)al, dom, path, sizeof path);
	uint32_t asz = cl->a >= 0 ? ly[cl->a].size : rs->job->ndev;
	uint32_t af = cl->a >= 0 ? cl->aunit * asz : 0;
	shrink_text(pl, rs, ly, nly, af, af + asz, shrink, sizeof shrink);
	if (code == TP_EINFEASIBLE) {
		snprintf(head, sizeof head, "%s", pl->errmsg);
		tp_seterr(pl->errmsg, code, "%s; the cheapest alternative: %s", head, shrink);
		return;
	}
	uint32_t fr = al >= 0 ? c->free[al][dom] : c->nfree;
	uint32_t sp = al >= 0 ? c->spare_devs[al][dom] : 0;
	if (al < 0)
		for (uint32_t d = 0; d < t->lv[0].ndom; d++)
			sp += c->spare_devs[0][d];
	evict_text(p, rs, al, dom, need, path, evict, sizeof evict);
	pl->fit.level = al >= 0 ? al : 0;
	pl->fit.best = fr + sp < need ? fr + sp : need;
	char svc[256] = ""; /* the service's caps, when they keep the replacements out */
	tp_pl_say_service(p, svc, sizeof svc);
	tp_seterr(pl->errmsg, code,
	          "%s: replace: the %u failed devices of job '%s' must be replaced inside %s (where "
	          "its shape keeps them), which has %u free devices and %u spares, not enough in "
	          "the shape they need; the cheapest alternatives: %s%s%s", code == TP_EBUSY ? "busy" : "fragmented", need,
	          rs->job->id, path, fr, sp, shrink, evict, svc);
}

/* Place each class in turn; the last one's context is kept for the result (*p, which then
 * points to *sub: the caller keeps it until the context is released). */
static int replace_place_classes(tp_placement *pl, struct pctx *p, struct rstate *rs,
                                 const struct tp_rq *shape, const struct tp_rq_unit *ly,
                                 unsigned nly, const struct rclass *cls, uint32_t ncls,
                                 const uint32_t *orig, uint32_t nbad, struct tp_rq *sub)
{
	int rc = 0;
	for (uint32_t i = 0; i < ncls && !rc; i++) {
		uint32_t need;
		int ideal_ok = -1;
		int r = replace_class(pl, p, rs, shape, ly, &cls[i], sub, &need, &ideal_ok);
		if (r == 0) {
			rc = tp_pl_explain_failure(pl, p, need, nbad, shape->required, ideal_ok);
			if (rc == TP_EINFEASIBLE || rc == TP_EBUSY || rc == TP_EFRAGMENTED)
				replace_explain(pl, p, rs, shape, ly, nly, &cls[i], need, rc);
		}
		else if (r < 0)
			rc = r;
		else if (++rs->done == ncls)
			rc = replace_check_whole(pl, p, rs, shape, orig, nbad);
		if (i + 1 < ncls || rc)
			tp_pl_ctx_fini(p);
	}
	return rc;
}

/* The result: the job's whole new list and each failed device with its replacement. */
static int replace_record(tp_placement *pl, struct pctx *p, const struct rstate *rs,
                          const uint32_t *orig, uint32_t nbad)
{
	uint32_t n = rs->job->ndev;
	pl->failed = tp_mallocn(&pl->alloc, 2 * (size_t)(nbad ? nbad : 1), sizeof *pl->failed);
	if (!pl->failed)
		return TP_ENOMEM;
	pl->repl = pl->failed + nbad;
	for (uint32_t r = 0; r < n; r++)
		if (orig[r] != rs->devs[r]) {
			pl->failed[pl->nrepl] = orig[r];
			pl->repl[pl->nrepl++] = rs->devs[r];
		}
	int rc = tp_pl_finish_ok(pl, p, rs->devs, n);
	char why[TP_ERRMSG_LEN] = "";
	if (!rc && (rc = tp_pl_part_result(pl, p, rs->devs, n, why)) == TP_EBUSY)
		tp_seterr(pl->errmsg, rc, "busy: the repaired job's NVLink partition: %s", why);
	return rc;
}

static int replace_run(tp_placement *pl, const struct tp_cluster *c, uint32_t slot,
                       const uint32_t *failed, size_t nfailed, const tp_replace_options *o)
{
	const struct tp_job_impl *job = c->jobs[slot];
	uint32_t n = job->ndev;
	struct rstate rs = {.c = c, .job = job, .slot = slot};
	budget_start(&rs, o);
	struct tp_rq shape;
	bool has_shape;
	int shape_rc = replace_shape(pl, c, job, &shape, &has_shape), rc = 0;
	if (shape_rc == TP_ENOMEM)
		return shape_rc;
	rs.devs = tp_mallocn(&pl->alloc, n, sizeof *rs.devs);
	rs.bad = tp_calloc(&pl->alloc, n, sizeof *rs.bad);
	uint32_t *orig = tp_mallocn(&pl->alloc, n, sizeof *orig);
	struct rclass *cls = tp_mallocn(&pl->alloc, n, sizeof *cls);
	struct pctx p;
	memset(&p, 0, sizeof p);
	p.a = &c->alloc;
	uint32_t nbad;
	if (!rs.devs || !rs.bad || !orig || !cls) {
		rc = TP_ENOMEM;
		goto out;
	}
	memcpy(rs.devs, job->devs, n * sizeof *rs.devs);
	memcpy(orig, job->devs, n * sizeof *orig);
	replace_mark_bad(&p, &rs, failed, nfailed, &nbad);
	if (p.err || shape_rc) {
		rc = p.err ? p.err : shape_rc;
		goto out;
	}
	struct tp_rq_unit ly[TP_RQ_MAX_UNITS];
	unsigned nly = tp_rq_units(&shape, c->t->nlevels - 1, ly);
	nest_levels(ly, nly);
	uint32_t ncls = replace_classes(ly, nly, rs.bad, n, cls);
	rs.ncls = ncls;
	struct tp_rq sub;
	rc = replace_place_classes(pl, &p, &rs, &shape, ly, nly, cls, ncls, orig, nbad, &sub);
	if (!rc) {
		rc = replace_record(pl, &p, &rs, orig, nbad);
		tp_pl_ctx_fini(&p);
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
	tp_pl_ar_release(&p, (struct amark){NULL, 0});
	tp_free(&pl->alloc, rs.devs);
	tp_free(&pl->alloc, rs.bad);
	tp_free(&pl->alloc, orig);
	tp_free(&pl->alloc, cls);
	if (has_shape)
		tp_rq_release(&pl->alloc, &shape);
	return rc;
}

int tp_placement_repair_shrink(const tp_placement *p, uint32_t *ranks, uint32_t *units,
                               uint32_t *of)
{
	if (!p || !p->replace || !p->has_shrink)
		return TP_EINVAL;
	if (ranks)
		*ranks = p->shrink_ranks;
	if (units)
		*units = p->shrink_units;
	if (of)
		*of = p->shrink_of;
	return 0;
}

int tp_replace_options_init(tp_replace_options *o, unsigned version)
{
	static const tp_replace_options init = TP_REPLACE_OPTIONS_INIT;
	return tp_options_init(o, version == TP_REPLACE_OPTIONS_VERSION ? sizeof init : 0, &init,
	                       version);
}

int tp_replace(const tp_cluster *c, const char *job, const uint32_t *failed, size_t nfailed,
               tp_placement **out)
{
	return tp_replace_ext(c, job, failed, nfailed, NULL, out);
}

int tp_replace_ext(const tp_cluster *c, const char *job, const uint32_t *failed,
                   size_t nfailed, const tp_replace_options *opts, tp_placement **out)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!c || !job || (nfailed && !failed))
		return TP_EINVAL;
	tp_placement *pl = tp_pl_placement_new(c, true);
	if (!pl)
		return TP_ENOMEM;
	const tp_replace_options dflt = TP_REPLACE_OPTIONS_INIT;
	int rc = 0;
	uint32_t slot = tp_cluster_job_slot(c, job);
	if (opts && opts->version != TP_REPLACE_OPTIONS_VERSION)
		rc = tp_seterr(pl->errmsg, TP_EINVAL,
		               "replace.opts.version %u: only version %u is known", opts->version,
		               TP_REPLACE_OPTIONS_VERSION);
	else if (slot == TP_NO_JOB)
		rc = tp_seterr(pl->errmsg, TP_ENOTFOUND, "replace.job: no running job '%s'", job);
	else if (nfailed == 0)
		rc = tp_seterr(pl->errmsg, TP_EINVAL, "replace.failed: at least one device is needed");
	else if (job_at(c, slot)->shape && job_at(c, slot)->shape->box_level)
		/* a replacement chip would break the box; a box job is placed again whole */
		rc = tp_seterr(pl->errmsg, TP_EINVAL, "replace.job: '%s' is a box of %s "
		               "(request.box_level): release it and place its shape again", job,
		               job_at(c, slot)->shape->box_level);
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
		rc = pl->job ? replace_run(pl, c, slot, failed, nfailed, opts ? opts : &dflt)
		             : TP_ENOMEM;
	}
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		return TP_ENOMEM;
	}
	pl->status = rc;
	*out = pl;
	return rc;
}
