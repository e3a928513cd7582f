/* SPDX-License-Identifier: MIT */
/*
 * The tp_plan object: drafts and their order, the message of a failed plan, the accessors, and
 * carrying a plan out step by step (tp_plan_apply_step).
 */
#include "defrag_internal.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plans and drafts ------------------------------------------------------------------------ */

static void steps_free(const tp_allocator *a, struct pstep *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		tp_free(a, s[i].job);
		tp_free(a, s[i].from);
		tp_free(a, s[i].to);
	}
	tp_free(a, s);
}

void defrag_draft_clear(const tp_allocator *a, struct draft *d)
{
	steps_free(a, d->steps, d->n);
	tp_placement_destroy(d->final);
	*d = (struct draft){0};
}

static uint32_t *dup_devs(const tp_allocator *a, const uint32_t *devs, size_t n)
{
	uint32_t *p = tp_mallocn(a, n ? n : 1, sizeof *p);
	if (p && n)
		memcpy(p, devs, n * sizeof *p);
	return p;
}

int defrag_draft_push(const tp_allocator *a, struct draft *d, tp_step_action action,
                      const char *job, const uint32_t *from, size_t nfrom, const uint32_t *to,
                      size_t nto)
{
	if (tp_grow(a, (void **)&d->steps, &d->cap, d->n + 1, sizeof *d->steps))
		return TP_ENOMEM;
	struct pstep s = {.action = action, .nfrom = (uint32_t)nfrom, .nto = (uint32_t)nto};
	s.job = tp_strdup(a, job);
	s.from = nfrom ? dup_devs(a, from, nfrom) : NULL;
	s.to = nto ? dup_devs(a, to, nto) : NULL;
	if (!s.job || (nfrom && !s.from) || (nto && !s.to)) {
		tp_free(a, s.job);
		tp_free(a, s.from);
		tp_free(a, s.to);
		return TP_ENOMEM;
	}
	d->steps[d->n++] = s;
	return 0;
}

/* Plans ordered as the file comment says; < 0 when x is better. */
int defrag_draft_cmp(const struct draft *x, const struct draft *y)
{
	if (x->cost != y->cost)
		return x->cost < y->cost ? -1 : 1;
	if (x->moves != y->moves)
		return x->moves < y->moves ? -1 : 1;
	if (x->moved_devices != y->moved_devices)
		return x->moved_devices < y->moved_devices ? -1 : 1;
	if (x->cand_free != y->cand_free)
		return x->cand_free > y->cand_free ? -1 : 1;
	if (x->frag != y->frag)
		return x->frag > y->frag ? -1 : 1;
	if (x->level != y->level)
		return x->level > y->level ? -1 : 1;
	if (x->dom != y->dom)
		return x->dom < y->dom ? -1 : 1;
	return 0;
}

/* ---- messages ------------------------------------------------------------------------------ */

/* "rack b0/r3" or "the cluster". */
static void dom_phrase(const struct planner *P, int level, uint32_t dom, char *buf, size_t len)
{
	if (level < 0) {
		snprintf(buf, len, "the cluster");
		return;
	}
	char path[256];
	tp_topology_domain_path(P->t, (unsigned)level, dom, path, sizeof path);
	snprintf(buf, len, "%s %s", P->t->lv[level].name, path);
}

/* Why no plan was found, from what the candidates ran into (limits first). */
void defrag_explain(const struct planner *P, char *msg, const struct draft *unlimited)
{
	char where[300], who[300];
	if (unlimited) {
		if (P->max_cost != COST_NONE && unlimited->cost > P->max_cost) {
			tp_seterr(msg, TP_ENOPLAN,
			          "the cheapest plan costs %g s, over max_cost_s %g",
			          unlimited->cost_s, P->pol.max_cost_s);
			return;
		}
		tp_seterr(msg, TP_ENOPLAN, "the cheapest plan needs %u moves, max_moves is %u",
		          unlimited->moves, P->max_moves);
		return;
	}
	const struct diag *d = &P->diag;
	if (d->nohome && d->nohome_less_local) {
		dom_phrase(P, d->nohome_level, d->nohome_dom, where, sizeof where);
		char spans[200];
		size_t at = 0;
		for (unsigned l = 0; l <= tp_node_level(P->t) && at < sizeof spans; l++)
			at += (size_t)snprintf(spans + at, sizeof spans - at, "%s%s %u", l ? ", " : "",
			                       P->t->lv[l].name, d->nohome_span[l]);
		tp_seterr(msg, TP_ENOPLAN,
		          "%s would need job %s moved, but no free devices keep it as local as it "
		          "sits (domains it spans: %s) and it may not be preempted",
		          where, d->nohome_job->id, spans);
		return;
	}
	if (d->nohome) {
		dom_phrase(P, d->nohome_level, d->nohome_dom, where, sizeof where);
		tp_seterr(
		        msg, TP_ENOPLAN,
		        "%s would need job %s moved, but it has nowhere else to go and may not be "
		        "preempted",
		        where, d->nohome_job->id);
		return;
	}
	if (d->block && d->block_job) {
		dom_phrase(P, d->block_level, d->block_dom, where, sizeof where);
		defrag_job_blocker(P, d->block_job, who, sizeof who);
		tp_seterr(msg, TP_ENOPLAN, "%s would need %s moved", where, who);
		return;
	}
	if (P->level >= 0)
		tp_seterr(msg, TP_ENOPLAN,
		          "no %s can hold the request even with every movable job moved",
		          P->t->lv[P->level].name);
	else
		tp_seterr(msg, TP_ENOPLAN,
		          "the cluster cannot hold the request even with every movable job moved");
}

/* ---- the plan object ----------------------------------------------------------------------- */

tp_plan *defrag_plan_new(const struct tp_cluster *c)
{
	tp_plan *p = tp_calloc(&c->alloc, 1, sizeof *p);
	if (!p)
		return NULL;
	p->alloc = c->alloc;
	p->t = c->t;
	p->topology_id = tp_topology_identity(c->t);
	p->cluster_lineage = tp_cluster_lineage(c);
	return p;
}

void tp_plan_destroy(tp_plan *p)
{
	if (!p)
		return;
	tp_allocator a = p->alloc;
	steps_free(&a, p->steps, p->nsteps);
	tp_placement_destroy(p->placement);
	tp_request_free(&a, p->req);
	tp_free(&a, p);
}

/* Move a draft's steps and placement into the plan. */
/* FNV-1a over the bytes of v: the plan's key is a function of its steps alone (not its
 * address), so plans with the same steps are the same plan to a cluster's cursor. */
static uint64_t fnv(uint64_t h, const void *v, size_t n)
{
	const unsigned char *b = v;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(0x100000001b3);
	return h;
}

static uint64_t steps_key(const struct pstep *s, size_t n)
{
	uint64_t h = fnv(UINT64_C(0xcbf29ce484222325), &n, sizeof n);
	for (size_t i = 0; i < n; i++) {
		uint32_t head[3] = {(uint32_t)s[i].action, s[i].nfrom, s[i].nto};
		h = fnv(h, head, sizeof head);
		h = fnv(h, s[i].job, strlen(s[i].job) + 1);
		h = fnv(h, s[i].from, s[i].nfrom * sizeof *s[i].from);
		h = fnv(h, s[i].to, s[i].nto * sizeof *s[i].to);
	}
	return h;
}

void defrag_plan_take(tp_plan *p, struct draft *d)
{
	p->steps = d->steps;
	p->nsteps = d->n;
	p->moved_jobs = d->moves;
	p->moved_devices = d->moved_devices;
	p->cost_s = d->cost_s;
	p->placement = d->final;
	p->key = steps_key(p->steps, p->nsteps);
	p->lb = d->cost;
	p->cost_key = d->cost;
	p->tlevel = d->tlevel;
	p->ntgt = d->ntgt;
	memcpy(p->tgt, d->tgt, d->ntgt * sizeof *d->tgt);
	*d = (struct draft){0};
}

/* ---- accessors ------------------------------------------------------------------------------ */

int tp_plan_status(const tp_plan *p)
{
	return p ? p->status : TP_EINVAL;
}

const char *tp_plan_errmsg(const tp_plan *p)
{
	return p ? p->errmsg : "";
}

size_t tp_plan_step_count(const tp_plan *p)
{
	return p && p->status == 0 ? p->nsteps : 0;
}

int tp_plan_step(const tp_plan *p, size_t i, tp_step_action *action, const char **job,
                 const uint32_t **from, size_t *nfrom, const uint32_t **to, size_t *nto)
{
	if (!p || p->status != 0 || i >= p->nsteps)
		return TP_EINVAL;
	const struct pstep *s = &p->steps[i];
	if (action)
		*action = s->action;
	if (job)
		*job = s->job;
	if (from)
		*from = s->from;
	if (nfrom)
		*nfrom = s->nfrom;
	if (to)
		*to = s->to;
	if (nto)
		*nto = s->nto;
	return 0;
}

int tp_plan_stats(const tp_plan *p, tp_defrag_stats *out)
{
	if (!p || !out || out->version != TP_DEFRAG_STATS_VERSION)
		return TP_EINVAL;
	*out = p->stats;
	out->version = TP_DEFRAG_STATS_VERSION;
	return 0;
}

uint32_t tp_plan_moved_job_count(const tp_plan *p)
{
	return p && p->status == 0 ? p->moved_jobs : 0;
}

uint32_t tp_plan_moved_device_count(const tp_plan *p)
{
	return p && p->status == 0 ? p->moved_devices : 0;
}

double tp_plan_cost_s(const tp_plan *p)
{
	return p && p->status == 0 ? p->cost_s : 0.0;
}

const tp_placement *tp_plan_placement(const tp_plan *p)
{
	return p && p->status == 0 ? p->placement : NULL;
}

double tp_plan_lower_bound_s(const tp_plan *p)
{
	if (!p || p->status != 0)
		return 0.0;
	if (p->lb >= p->cost_key)
		return p->cost_s; /* the search was exact: the plan's own cost, as summed */
	return (double)p->lb / 1e6;
}

int tp_plan_targets(const tp_plan *p, unsigned *level, const uint32_t **doms, size_t *n)
{
	if (!p || !n || !level || !doms)
		return TP_EINVAL;
	*n = p->status == 0 ? p->ntgt : 0;
	*level = *n ? (unsigned)p->tlevel : 0;
	*doms = *n ? p->tgt : NULL;
	return 0;
}

/* ---- carrying a plan out --------------------------------------------------------------------- */

static void dev_label(const struct tp_topology *t, uint32_t dev, char *buf, size_t len)
{
	uint32_t node = t->dev_node[dev];
	snprintf(buf, len, "%s/%u", t->lv[tp_node_level(t)].dname[node],
	         (unsigned)(dev - t->dev_first[node]));
}

/* The job still holds exactly `from`, in that order. */
static int check_holds(struct tp_cluster *c, const struct pstep *s, size_t i, uint32_t *slot)
{
	*slot = tp_cluster_job_slot(c, s->job);
	if (*slot == TP_NO_JOB)
		return tp_seterr(c->errmsg, TP_EINVAL, "step %zu: job %s is no longer running", i,
		                 s->job);
	const struct tp_job_impl *j = c->jobs[*slot];
	if (j->ndev != s->nfrom || memcmp(j->devs, s->from, s->nfrom * sizeof *s->from))
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "step %zu: job %s no longer holds the %u devices the plan moves",
		                 i, s->job, s->nfrom);
	return 0;
}

/* Each target is free, or the job's own healthy device (a migrated job may restart on its own
 * devices, even cordoned ones). */
static int check_targets(struct tp_cluster *c, const struct pstep *s, size_t i, uint32_t slot)
{
	char name[TP_MAX_NAME + 16];
	for (uint32_t x = 0; x < s->nto; x++) {
		uint32_t dev = s->to[x];
		if (dev >= c->t->ndevices)
			return tp_seterr(c->errmsg, TP_EINVAL,
			                 "step %zu: device %u is out of range", i, dev);
		bool own = slot != TP_NO_JOB && c->dev_job[dev] == slot &&
		           !(c->dstate[dev] & TP_DS_DOWN);
		if (own || tp_dev_free(c, dev))
			continue;
		dev_label(c->t, dev, name, sizeof name);
		const char *why = c->dev_job[dev] != TP_NO_JOB  ? "is held by job"
		                  : c->dstate[dev] & TP_DS_DOWN ? "is down"
		                                                : "is cordoned";
		return tp_seterr(c->errmsg, TP_EINVAL, "step %zu: target %s %s%s%s", i, name, why,
		                 c->dev_job[dev] != TP_NO_JOB ? " " : "",
		                 c->dev_job[dev] != TP_NO_JOB ? c->jobs[c->dev_job[dev]]->id : "");
	}
	return 0;
}

static int apply_place(tp_cluster *c, const tp_plan *p, const struct pstep *s, size_t i,
                       const tp_job_options *opts)
{
	int rc = check_targets(c, s, i, TP_NO_JOB);
	if (rc)
		return rc;
	tp_placement *pl = NULL;
	rc = tp_place(c, p->req, &pl);
	if (rc == TP_ENOMEM) {
		tp_placement_destroy(pl);
		return tp_seterr(c->errmsg, rc, "out of memory placing %s", s->job);
	}
	size_t n = 0;
	const uint32_t *devs = rc == 0 ? tp_placement_devices(pl, &n) : NULL;
	if (rc || n != s->nto || memcmp(devs, s->to, n * sizeof *devs)) {
		tp_placement_destroy(pl);
		return tp_seterr(
		        c->errmsg, TP_EINVAL,
		        "step %zu: the cluster no longer matches the plan: %s would not be "
		        "placed on the planned devices",
		        i, s->job);
	}
	rc = tp_commit(c, pl, opts);
	tp_placement_destroy(pl);
	return rc;
}

static int apply_step_unguarded(tp_cluster *c, const tp_plan *p, size_t i,
                                const tp_job_options *opts);

int tp_plan_apply_step(tp_cluster *c, const tp_plan *p, size_t i, const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, apply_step_unguarded(c, p, i, opts));
}

static int apply_step_unguarded(tp_cluster *c, const tp_plan *p, size_t i,
                                const tp_job_options *opts)
{
	if (!p)
		return tp_seterr(c->errmsg, TP_EINVAL, "plan is NULL");
	if (p->status != 0)
		return tp_seterr(c->errmsg, TP_EINVAL, "the plan failed (%s): it has no steps",
		                 tp_err_name(p->status));
	if (p->topology_id != tp_topology_identity(c->t))
		return tp_seterr(c->errmsg, TP_EINVAL, "the plan was made for another topology");
	if (p->cluster_lineage != tp_cluster_lineage(c))
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "the plan was made on another cluster: it applies to that cluster "
		                 "and to its copies (tp_cluster_copy) only");
	if (i >= p->nsteps)
		return tp_seterr(c->errmsg, TP_EINVAL, "step %zu: the plan has %zu steps", i,
		                 p->nsteps);
	/* the cluster keeps the cursor: the plan is read-only, and may be applied to copies of a
	 * state from several threads. Step 0 starts over (a replay on a rolled-back cluster). */
	size_t next = c->plan_key == p->key ? c->plan_next : 0;
	if (i != next && i != 0)
		return tp_seterr(c->errmsg, TP_EINVAL,
		                 "step %zu applied out of order: step %zu is next", i, next);
	const struct pstep *s = &p->steps[i];
	uint32_t slot = TP_NO_JOB;
	int rc;
	switch (s->action) {
	case TP_STEP_MIGRATE:
		if ((rc = check_holds(c, s, i, &slot)) || (rc = check_targets(c, s, i, slot)))
			return rc;
		rc = tp_cluster_rebind_impl(c, slot, s->to, s->nto);
		break;
	case TP_STEP_PREEMPT:
		if ((rc = check_holds(c, s, i, &slot)))
			return rc;
		rc = tp_cluster_release(c, s->job);
		break;
	default:
		rc = apply_place(c, p, s, i, opts);
		break;
	}
	if (rc == 0) {
		c->plan_key = p->key;
		c->plan_next = i + 1;
	}
	return rc;
}

int tp_defrag_stats_init(tp_defrag_stats *s, unsigned version)
{
	static const tp_defrag_stats init = TP_DEFRAG_STATS_INIT;
	return tp_options_init(s, version == TP_DEFRAG_STATS_VERSION ? sizeof init : 0, &init, version);
}
