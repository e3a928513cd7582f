/* SPDX-License-Identifier: MIT */
/*
 * Request resolution: a request checked against a topology and a cluster and turned into the
 * form the solver and the planner work on (struct tp_rq), and the units that form derives.
 */
#include "request.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"
#include "cost.h"

int tp_request_level_or_kind(const struct tp_topology *t, const char *name)
{
	int l = tp_topology_level_index(t, name);
	if (l >= 0)
		return l;
	for (unsigned k = 0; k < t->nfd; k++)
		if (strcmp(t->fd[k].name, name) == 0)
			return -(int)k - 2;
	return -1;
}

void tp_rq_release(const tp_allocator *a, struct tp_rq *q)
{
	if (!q)
		return;
	tp_free(a, q->fdcaps);
	tp_free(a, q->nodes);
	q->fdcaps = NULL;
	q->nodes = NULL;
}

/* A level named by field `what` (NULL when absent): its index in *out (-1 when absent). */
static int resolve_level(const struct tp_topology *t, const char *name, const char *what,
                         int *out, char *err)
{
	*out = -1;
	if (!name)
		return 0;
	int l = tp_topology_level_index(t, name);
	if (l < 0)
		return tp_seterr(err, TP_ENOTFOUND, "%s: unknown level '%s'", what, name);
	*out = l;
	return 0;
}

static const char *lvname(const struct tp_topology *t, int l)
{
	return t->lv[l].name;
}

static int resolve_group(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                         char *err)
{
	q->gsize = r->group_size ? r->group_size : 1;
	int gl;
	int rc = resolve_level(t, r->group_level, "request.group.level", &gl, err);
	if (rc)
		return rc;
	q->glevel = gl < 0 ? t->nlevels - 1 : (unsigned)gl;
	if (r->count % q->gsize)
		return tp_seterr(err, TP_EINVAL,
		                 "request.count %u is not a multiple of request.group.size %u",
		                 r->count, q->gsize);
	return 0;
}

static int resolve_levels(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                          char *err)
{
	int rc = resolve_level(t, r->required, "request.required", &q->required, err);
	if (!rc)
		rc = resolve_level(t, r->preferred, "request.preferred", &q->preferred, err);
	if (rc)
		return rc;
	if (q->required >= 0 && q->preferred >= 0 && q->preferred <= q->required)
		return tp_seterr(err, TP_EINVAL, "request.preferred %s is not below request.required %s",
		                 r->preferred, r->required);
	return 0;
}

static int resolve_slices(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                          char *err)
{
	if (r->nslices && !r->slices)
		return tp_seterr(err, TP_EINVAL, "request.slices is NULL but request.nslices is %zu",
		                 r->nslices);
	if (r->nslices > t->nlevels)
		return tp_seterr(err, TP_EINVAL,
		                 "request.slices has %zu layers; slice levels go strictly downwards, so "
		                 "at most %u fit this topology", r->nslices, t->nlevels);
	for (size_t i = 0; i < r->nslices; i++) {
		const tp_slice *s = &r->slices[i];
		char what[64];
		snprintf(what, sizeof what, "request.slices[%zu].level", i);
		if (!s->level)
			return tp_seterr(err, TP_EINVAL, "%s is required", what);
		int l;
		int rc = resolve_level(t, s->level, what, &l, err);
		if (rc)
			return rc;
		if (s->size == 0)
			return tp_seterr(err, TP_EINVAL, "request.slices[%zu].size must be at least 1", i);
		if (r->count % s->size)
			return tp_seterr(err, TP_EINVAL,
			                 "request.slices[%zu].size %u does not divide request.count %u", i,
			                 s->size, r->count);
		if (s->size % q->gsize)
			return tp_seterr(err, TP_EINVAL,
			                 "request.slices[%zu].size %u is not a multiple of "
			                 "request.group.size %u", i, s->size, q->gsize);
		if (i > 0 && r->slices[i - 1].size % s->size)
			return tp_seterr(err, TP_EINVAL,
			                 "request.slices[%zu].size %u does not divide request.slices[%zu].size "
			                 "%u", i, s->size, i - 1, r->slices[i - 1].size);
		if (q->required >= 0 && l < q->required)
			return tp_seterr(err, TP_EINVAL,
			                 "request.slices[%zu].level %s is above request.required %s", i,
			                 s->level, lvname(t, q->required));
		if ((unsigned)l > q->glevel)
			return tp_seterr(err, TP_EINVAL,
			                 "request.slices[%zu].level %s is below request.group.level %s", i,
			                 s->level, lvname(t, (int)q->glevel));
		if (i > 0 && l <= (int)q->slevel[i - 1])
			return tp_seterr(err, TP_EINVAL,
			                 "request.slices[%zu].level %s is not below request.slices[%zu].level "
			                 "%s", i, s->level, i - 1, lvname(t, (int)q->slevel[i - 1]));
		q->slevel[i] = (unsigned)l;
		q->ssize[i] = s->size;
	}
	q->nslices = (unsigned)r->nslices;
	return 0;
}

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

static int resolve_caps(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                        const tp_allocator *a, char *err)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		q->capdev[l] = q->capgrp[l] = TP_RQ_NOCAP;
	if (r->ncaps && !r->caps)
		return tp_seterr(err, TP_EINVAL, "request.max_per_domain is NULL but request.ncaps is %zu",
		                 r->ncaps);
	size_t nfd = 0;
	for (size_t i = 0; i < r->ncaps; i++) {
		const tp_domain_cap *cp = &r->caps[i];
		if (!cp->level)
			return tp_seterr(err, TP_EINVAL, "request.max_per_domain[%zu].level is required", i);
		int lk = tp_request_level_or_kind(t, cp->level);
		if (lk == -1)
			return tp_seterr(err, TP_ENOTFOUND,
			                 "request.max_per_domain[%zu].level: unknown level or failure-domain "
			                 "kind '%s'", i, cp->level);
		if ((cp->devices == 0) == (cp->groups == 0))
			return tp_seterr(err, TP_EINVAL,
			                 "request.max_per_domain[%zu] needs exactly one of devices, groups", i);
		if (lk < -1)
			nfd++;
	}
	if (nfd) {
		q->fdcaps = tp_mallocn(a, nfd, sizeof *q->fdcaps);
		if (!q->fdcaps)
			return tp_seterr(err, TP_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r->ncaps; i++) {
		const tp_domain_cap *cp = &r->caps[i];
		int lk = tp_request_level_or_kind(t, cp->level);
		if (lk < -1) {
			struct tp_rq_fdcap *f = &q->fdcaps[q->nfdcaps++];
			f->kind = (unsigned)(-lk - 2);
			f->devices = cp->devices ? cp->devices : TP_RQ_NOCAP;
			f->groups = cp->groups ? cp->groups : TP_RQ_NOCAP;
		} else if (cp->devices) {
			q->capdev[lk] = min_u32(q->capdev[lk], cp->devices);
		} else if ((unsigned)lk <= q->glevel) {
			/* every group lies in one domain of this level: a groups cap is a devices cap */
			uint64_t d = (uint64_t)cp->groups * q->gsize;
			q->capdev[lk] = min_u32(q->capdev[lk], d > UINT32_MAX ? UINT32_MAX : (uint32_t)d);
		} else {
			q->capgrp[lk] = min_u32(q->capgrp[lk], cp->groups);
		}
	}
	return 0;
}

static int resolve_spread(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                          char *err)
{
	q->spread_level = q->spread_fd = -1;
	q->spread_min = 0;
	if (!r->spread_level)
		return 0;
	int lk = tp_request_level_or_kind(t, r->spread_level);
	if (lk == -1)
		return tp_seterr(err, TP_ENOTFOUND,
		                 "request.spread.level: unknown level or failure-domain kind '%s'",
		                 r->spread_level);
	if (r->spread_min_domains == 0)
		return tp_seterr(err, TP_EINVAL, "request.spread.min_domains must be at least 1");
	if (lk >= 0)
		q->spread_level = lk;
	else
		q->spread_fd = -lk - 2;
	q->spread_min = r->spread_min_domains;
	return 0;
}

static int resolve_colocate(const struct tp_topology *t, const struct tp_cluster *c,
                            const tp_request *r, unsigned flags, struct tp_rq *q, char *err)
{
	q->colocate_slot = TP_NO_JOB_SLOT;
	q->colocate_level = -1;
	if (!r->colocate_job && !r->colocate_level)
		return 0;
	if (!r->colocate_job)
		return tp_seterr(err, TP_EINVAL, "request.colocate.job is required with "
		                 "request.colocate.level");
	if (!r->colocate_level)
		return tp_seterr(err, TP_EINVAL, "request.colocate.level is required with "
		                 "request.colocate.job");
	int l;
	int rc = resolve_level(t, r->colocate_level, "request.colocate.level", &l, err);
	if (rc)
		return rc;
	uint32_t slot = tp_cluster_job_slot(c, r->colocate_job);
	if (slot == TP_NO_JOB) {
		if (flags & TP_RQ_SHAPE)
			return 0;
		return tp_seterr(err, TP_ENOTFOUND, "request.colocate.job: no running job '%s'",
		                 r->colocate_job);
	}
	q->colocate_slot = slot;
	q->colocate_level = l;
	return 0;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static int resolve_select(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                          const tp_allocator *a, char *err)
{
	if (!(r->select_min_perf >= 0) || r->select_min_perf > 1e300)
		return tp_seterr(err, TP_EINVAL,
		                 "request.select.min_perf must be a non-negative number");
	if (!(r->select_min_memory_gb >= 0) || r->select_min_memory_gb > 1e300)
		return tp_seterr(err, TP_EINVAL,
		                 "request.select.min_memory_gb must be a non-negative number");
	q->min_perf = r->select_min_perf;
	q->min_mem = r->select_min_memory_gb;
	q->has_model = r->select_model != NULL;
	q->model = -1;
	if (q->has_model)
		for (unsigned m = 0; m < t->nmodels; m++)
			if (strcmp(t->models[m], r->select_model) == 0)
				q->model = (int)m;
	if (r->nselect_nodes && !r->select_nodes)
		return tp_seterr(err, TP_EINVAL,
		                 "request.select.nodes is NULL but request.nselect_nodes is %zu",
		                 r->nselect_nodes);
	q->has_nodes = r->select_nodes != NULL;
	if (!q->has_nodes)
		return 0;
	for (size_t i = 0; i < r->nselect_nodes; i++) {
		const char *nm = r->select_nodes[i];
		if (!nm)
			return tp_seterr(err, TP_EINVAL, "request.select.nodes[%zu] is NULL", i);
		JError_t je;
		PPvoid_t v = JudySLGet(t->node_by_name, (const uint8_t *)nm, &je);
		if (!v || v == PPJERR)
			return tp_seterr(err, TP_ENOTFOUND, "request.select.nodes[%zu]: unknown node '%s'",
			                 i, nm);
	}
	q->nodes = tp_mallocn(a, r->nselect_nodes ? r->nselect_nodes : 1, sizeof *q->nodes);
	if (!q->nodes)
		return tp_seterr(err, TP_ENOMEM, "out of memory");
	for (size_t i = 0; i < r->nselect_nodes; i++) {
		JError_t je;
		const uint8_t *nm = (const uint8_t *)r->select_nodes[i];
		PPvoid_t v = JudySLGet(t->node_by_name, nm, &je);
		q->nodes[i] = (uint32_t)((Word_t)*v - 1);
	}
	qsort(q->nodes, r->nselect_nodes, sizeof *q->nodes, cmp_u32);
	size_t n = 0;
	for (size_t i = 0; i < r->nselect_nodes; i++)
		if (n == 0 || q->nodes[n - 1] != q->nodes[i])
			q->nodes[n++] = q->nodes[i];
	q->nnodes = n;
	return 0;
}

static int resolve_names(const tp_request *r, struct tp_rq *q, char *err)
{
	const char *why;
	q->id = r->id ? r->id : "new";
	q->tenant = r->tenant ? r->tenant : "default";
	if ((why = tp_name_problem(q->id, false)))
		return tp_seterr(err, TP_EINVAL, "request.id: %s", why);
	if ((why = tp_name_problem(q->tenant, false)))
		return tp_seterr(err, TP_EINVAL, "request.tenant: %s", why);
	q->service = r->service;
	if (r->service && (why = tp_name_problem(r->service, false)))
		return tp_seterr(err, TP_EINVAL, "request.service: %s", why);
	if ((unsigned)r->job_class > TP_CLASS_INTERACTIVE)
		return tp_seterr(err, TP_EINVAL, "request.class %d is not a job class",
		                 (int)r->job_class);
	return 0;
}

/* comm: a step model whose degrees multiply to the count (rule 4, refined). */
static int resolve_comm(const tp_request *r, struct tp_rq *q, char *err)
{
	if (!r->comm)
		return 0;
	char why[TP_ERRMSG_LEN - 32];
	int rc = tp_cost_model_check(r->comm, r->count, why, sizeof why);
	if (rc)
		return tp_seterr(err, rc, "request.comm: %s", why);
	q->comm = r->comm;
	return 0;
}

/* gpu_nic_pairs: a flag. Whether the topology can give the pairs is the solver's to say. */
static int resolve_pairs(const tp_request *r, struct tp_rq *q, char *err)
{
	if (r->gpu_nic_pairs != 0 && r->gpu_nic_pairs != 1)
		return tp_seterr(err, TP_EINVAL, "request.gpu_nic_pairs %d is not 0 or 1",
		                 r->gpu_nic_pairs);
	q->pairs = r->gpu_nic_pairs == 1;
	return 0;
}

/* expected_end_s: a finite time >= 0 (0: not known). */
static int resolve_end(const tp_request *r, struct tp_rq *q, char *err)
{
	if (!isfinite(r->expected_end_s) || r->expected_end_s < 0)
		return tp_seterr(err, TP_EINVAL,
		                 "request.expected_end_s %g is not a finite time >= 0 (0: not known)",
		                 r->expected_end_s);
	q->end_s = r->expected_end_s;
	return 0;
}

int tp_request_resolve(const struct tp_topology *t, const struct tp_cluster *c,
                       const tp_request *orig, unsigned flags, const tp_allocator *a,
                       struct tp_rq *q, char *err)
{
	memset(q, 0, sizeof *q);
	if (!tp_request_size(orig->version))
		return tp_seterr(err, TP_EINVAL,
		                 "request.version %u is not 1 to %u (TP_REQUEST_VERSION)",
		                 orig->version, TP_REQUEST_VERSION);
	tp_request cur;
	tp_request_read(orig, &cur);
	const tp_request *r = &cur;
	if (r->count == 0)
		return tp_seterr(err, TP_EINVAL, "request.count must be at least 1");
	q->count = r->count;
	q->balanced = r->balanced != 0;
	int rc = resolve_names(r, q, err);
	if (!rc)
		rc = resolve_group(t, r, q, err);
	if (!rc)
		rc = resolve_levels(t, r, q, err);
	if (!rc)
		rc = resolve_slices(t, r, q, err);
	if (!rc)
		rc = resolve_caps(t, r, q, a, err);
	if (!rc)
		rc = resolve_spread(t, r, q, err);
	if (!rc)
		rc = resolve_colocate(t, c, r, flags, q, err);
	if (!rc)
		rc = resolve_level(t, r->exclusive, "request.exclusive", &q->exclusive, err);
	if (!rc)
		rc = resolve_select(t, r, q, a, err);
	if (!rc)
		rc = resolve_pairs(r, q, err);
	if (!rc)
		rc = resolve_end(r, q, err);
	if (!rc)
		rc = resolve_comm(r, q, err);
	if (!rc)
		rc = tp_request_resolve_box(t, r, q, err);
	if (rc)
		tp_rq_release(a, q);
	return rc;
}

/* ---- units ----------------------------------------------------------------------------------- */

unsigned tp_rq_units(const struct tp_rq *q, unsigned node_level, struct tp_rq_unit *out)
{
	unsigned k = 0;
	if (q->required >= 0)
		out[k++] = (struct tp_rq_unit){q->count, (unsigned)q->required, TP_RQ_UNIT_WHOLE, 0};
	if (q->colocate_slot != TP_NO_JOB_SLOT && q->colocate_level >= 0)
		out[k++] = (struct tp_rq_unit){q->count, (unsigned)q->colocate_level, TP_RQ_UNIT_WHOLE,
		                               0};
	if (k == 2 && out[1].level < out[0].level)
		k = 1; /* keep the deeper of the two */
	else if (k == 2)
		out[0] = out[1], k = 1;
	for (unsigned i = 0; i < q->nslices; i++)
		out[k++] = (struct tp_rq_unit){q->ssize[i], q->slevel[i], TP_RQ_UNIT_SLICE, i};
	out[k++] = (struct tp_rq_unit){q->gsize, q->glevel, TP_RQ_UNIT_GROUP, 0};
	out[k++] = (struct tp_rq_unit){1, node_level, TP_RQ_UNIT_DEVICE, 0};
	return k;
}

void tp_rq_level_units(const struct tp_rq *q, unsigned nlevels, uint32_t *u)
{
	struct tp_rq_unit un[TP_RQ_MAX_UNITS];
	unsigned n = tp_rq_units(q, nlevels - 1, un);
	for (unsigned l = 0; l < nlevels; l++) {
		u[l] = 1;
		for (unsigned i = 0; i < n; i++)
			if ((un[i].kind == TP_RQ_UNIT_SLICE || un[i].kind == TP_RQ_UNIT_GROUP) &&
			    l <= un[i].level && un[i].size > u[l])
				u[l] = un[i].size;
	}
}
