/* SPDX-License-Identifier: MIT */
/*
 * Services and their spread caps (tp_cluster_set_service_caps): the model's count, for every
 * service and every domain of every level, of the service's running replicas with a device
 * there. A job is a replica when its shape names the service (tp_request.service). The counts
 * change with the jobs (assign, release, rebind and their undo call tp_cl_service_apply), and
 * their entries are made before a change (tp_cl_service_prepare) and never removed, so that a
 * rollback, which must not fail, only adds and subtracts. Placement reads them (place.c) to
 * keep a new replica out of the domains at the cap: one lookup per domain the service holds.
 */
#include <string.h>

#include "cluster_impl.h"

uint32_t tp_cl_service_find(const struct tp_cluster *c, const char *name)
{
	JError_t err;
	PPvoid_t p = JudySLGet(c->svc_by_name, (const uint8_t *)name, &err);
	if (!p || p == PPJERR || !*p)
		return TP_NO_SERVICE;
	return (uint32_t)((Word_t)*p - 1);
}

/* The service's index, made when new; TP_NO_SERVICE when out of memory. */
static uint32_t service_get(struct tp_cluster *c, const char *name)
{
	uint32_t sid = tp_cl_service_find(c, name);
	if (sid != TP_NO_SERVICE)
		return sid;
	if (c->nsvc >= (1u << 27) ||
	    tp_grow(&c->alloc, (void **)&c->svc, &c->cap_svc, c->nsvc + 1, sizeof *c->svc))
		return TP_NO_SERVICE;
	char *copy = tp_strdup(&c->alloc, name);
	JError_t err;
	PPvoid_t p = copy ? JudySLIns(&c->svc_by_name, (const uint8_t *)name, &err) : NULL;
	if (!p || p == PPJERR) {
		tp_free(&c->alloc, copy);
		return TP_NO_SERVICE;
	}
	sid = (uint32_t)c->nsvc++;
	c->svc[sid] = (struct tp_service){.name = copy, .level = TP_NONE};
	*p = (void *)(Word_t)(sid + 1);
	return sid;
}

int tp_cl_service_copy(struct tp_cluster *d, const struct tp_cluster *c)
{
	for (size_t s = 0; s < c->nsvc; s++) {
		uint32_t sid = service_get(d, c->svc[s].name);
		if (sid == TP_NO_SERVICE)
			return TP_ENOMEM;
		char *name = d->svc[sid].name;
		d->svc[sid] = c->svc[s];
		d->svc[sid].name = name;
	}
	Word_t key = 0;
	JError_t err;
	for (PPvoid_t p = JudyLFirst(c->svc_count, &key, &err); p && p != PPJERR;
	     p = JudyLNext(c->svc_count, &key, &err)) {
		PPvoid_t q = JudyLIns(&d->svc_count, key, &err);
		if (!q || q == PPJERR)
			return TP_ENOMEM;
		*q = *p;
	}
	return 0;
}

uint32_t tp_cl_service_count(const struct tp_cluster *c, uint32_t sid, unsigned level,
                             uint32_t dom)
{
	JError_t err;
	PPvoid_t p = JudyLGet(c->svc_count, tp_cl_service_key(sid, level, dom), &err);
	return p && p != PPJERR ? (uint32_t)(Word_t)*p : 0;
}

/* Whether devs[i]'s domain of level l is also an earlier device's (it is counted there). */
static bool seen_before(const struct tp_topology *t, const uint32_t *devs, size_t i, unsigned l,
                        uint32_t dom)
{
	if (i > 0 && tp_node_ancestor(t, t->dev_node[devs[i - 1]], l) == dom)
		return true; /* ranks are mostly in runs of one domain: the common case is one test */
	for (size_t k = 0; k + 1 < i; k++)
		if (tp_node_ancestor(t, t->dev_node[devs[k]], l) == dom)
			return true;
	return false;
}

int tp_cl_service_prepare(struct tp_cluster *c, const tp_request *shape, const uint32_t *devs,
                          size_t n, uint32_t *sid)
{
	*sid = TP_NO_SERVICE;
	if (!shape || !shape->service)
		return 0;
	uint32_t s = service_get(c, shape->service);
	if (s == TP_NO_SERVICE)
		return TP_ENOMEM;
	const struct tp_topology *t = c->t;
	for (unsigned l = 0; l < t->nlevels; l++)
		for (size_t i = 0; i < n; i++) {
			uint32_t dom = tp_node_ancestor(t, t->dev_node[devs[i]], l);
			if (i > 0 && tp_node_ancestor(t, t->dev_node[devs[i - 1]], l) == dom)
				continue;
			JError_t err;
			PPvoid_t p = JudyLIns(&c->svc_count, tp_cl_service_key(s, l, dom), &err);
			if (!p || p == PPJERR)
				return TP_ENOMEM; /* entries made so far stay, at 0: harmless */
		}
	*sid = s;
	return 0;
}

void tp_cl_service_apply(struct tp_cluster *c, const struct tp_job_impl *job, bool on)
{
	if (job->service == TP_NO_SERVICE)
		return;
	const struct tp_topology *t = c->t;
	struct tp_service *s = &c->svc[job->service];
	s->replicas = on ? s->replicas + 1 : s->replicas - 1;
	for (unsigned l = 0; l < t->nlevels; l++)
		for (size_t i = 0; i < job->ndev; i++) {
			uint32_t dom = tp_node_ancestor(t, t->dev_node[job->devs[i]], l);
			if (seen_before(t, job->devs, i, l, dom))
				continue;
			JError_t err;
			PPvoid_t p = JudyLGet(c->svc_count, tp_cl_service_key(job->service, l, dom), &err);
			if (p && p != PPJERR) /* always found: tp_cl_service_prepare made it */
				*p = (void *)((Word_t)*p + (on ? 1 : (Word_t)-1));
		}
}

void tp_cl_service_free(struct tp_cluster *c)
{
	JError_t err;
	for (size_t i = 0; i < c->nsvc; i++)
		tp_free(&c->alloc, c->svc[i].name);
	tp_free(&c->alloc, c->svc);
	c->svc = NULL;
	c->nsvc = c->cap_svc = 0;
	JudySLFreeArray(&c->svc_by_name, &err);
	JudyLFreeArray(&c->svc_count, &err);
}

/* ---- the public calls ------------------------------------------------------------------------ */

static int caps_check(struct tp_cluster *c, const char *service, const tp_service_caps *caps,
                      int *level)
{
	const char *why = tp_name_problem(service, false);
	if (why)
		return tp_seterr(c->errmsg, TP_EINVAL, "service %s", why);
	*level = -1;
	if (!caps)
		return 0;
	if (caps->version != TP_SERVICE_CAPS_VERSION)
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.version %u is not %d", caps->version,
		                 TP_SERVICE_CAPS_VERSION);
	if (!(caps->max_percent >= 0.0 && caps->max_percent <= 100.0))
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.max_percent %g is not in [0, 100]",
		                 caps->max_percent);
	if (caps->level && (*level = tp_topology_level_index(c->t, caps->level)) < 0)
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.level '%s' is not a level of the "
		                 "topology", caps->level);
	if (!caps->level && (caps->max_per_domain || caps->max_percent > 0.0))
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.level is NULL but caps.%s is set: "
		                 "a cap counts over the domains of a level",
		                 caps->max_per_domain ? "max_per_domain" : "max_percent");
	return 0;
}

static int set_caps(struct tp_cluster *c, const char *service, const tp_service_caps *caps)
{
	if (!service)
		return tp_seterr(c->errmsg, TP_EINVAL, "tp_cluster_set_service_caps: service is NULL");
	int level = -1, rc = caps_check(c, service, caps, &level);
	if (rc)
		return rc;
	uint32_t sid = service_get(c, service);
	if (sid == TP_NO_SERVICE || tp_cl_undo_reserve(c, 1))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory setting the caps of service "
		                 "'%s'", service);
	struct tp_service *s = &c->svc[sid];
	if (c->nsp)
		tp_cl_undo_push(c, (struct tp_undo){.kind = TP_UNDO_SERVICE, .slot = sid,
		                                    .dev = s->level, .ndev = s->max_per_domain,
		                                    .x = s->max_percent});
	bool any = caps && level >= 0 && (caps->max_per_domain || caps->max_percent > 0.0);
	s->level = any ? (uint32_t)level : TP_NONE;
	s->max_per_domain = any ? caps->max_per_domain : 0;
	s->max_percent = any ? caps->max_percent : 0.0;
	c->generation = ++c->generations;
	return 0;
}

int tp_service_caps_init(tp_service_caps *caps, unsigned version)
{
	static const tp_service_caps init = TP_SERVICE_CAPS_INIT;
	return tp_options_init(caps, version == TP_SERVICE_CAPS_VERSION ? sizeof init : 0, &init,
	                       version);
}

int tp_cluster_set_service_caps(tp_cluster *c, const char *service, const tp_service_caps *caps)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, set_caps(c, service, caps));
}

int tp_cluster_service_caps(const tp_cluster *c, const char *service, tp_service_caps *caps)
{
	if (!c || !service || !caps || caps->version != TP_SERVICE_CAPS_VERSION)
		return TP_EINVAL;
	*caps = (tp_service_caps)TP_SERVICE_CAPS_INIT;
	uint32_t sid = tp_cl_service_find(c, service);
	if (sid == TP_NO_SERVICE || c->svc[sid].level == TP_NONE)
		return 0;
	caps->level = c->t->lv[c->svc[sid].level].name;
	caps->max_per_domain = c->svc[sid].max_per_domain;
	caps->max_percent = c->svc[sid].max_percent;
	return 0;
}

int tp_cluster_service_replicas(const tp_cluster *c, const char *service, unsigned level,
                                uint32_t dom, uint32_t *out)
{
	if (!c || !service || !out)
		return TP_EINVAL;
	if (dom != TP_NONE && (level >= c->t->nlevels || dom >= c->t->lv[level].ndom))
		return TP_EINVAL;
	uint32_t sid = tp_cl_service_find(c, service);
	*out = sid == TP_NO_SERVICE ? 0
	       : dom == TP_NONE     ? c->svc[sid].replicas
	                            : tp_cl_service_count(c, sid, level, dom);
	return 0;
}

/* ---- consistency (tp_cluster_check) ------------------------------------------------------- */

int tp_cl_service_check(const struct tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	for (size_t s = 0; s < c->nsvc; s++) {
		uint32_t jobs = 0;
		uint64_t touched = 0, counted = 0; /* (job, domain) pairs over every level */
		bool missing = false;
		for (size_t j = 0; j < c->njobs; j++) {
			const struct tp_job_impl *job = c->jobs[j];
			if (job->service != s)
				continue;
			jobs++;
			for (unsigned l = 0; l < t->nlevels; l++)
				for (size_t i = 0; i < job->ndev; i++) {
					uint32_t dom = tp_node_ancestor(t, t->dev_node[job->devs[i]], l);
					if (seen_before(t, job->devs, i, l, dom))
						continue;
					touched++;
					missing |= tp_cl_service_count(c, (uint32_t)s, l, dom) == 0;
				}
		}
		Word_t key = tp_cl_service_key((uint32_t)s, 0, 0);
		Word_t last = tp_cl_service_key((uint32_t)s, t->nlevels - 1, UINT32_MAX);
		JError_t err;
		for (PPvoid_t v = JudyLFirst(c->svc_count, &key, &err); v && v != PPJERR && key <= last;
		     v = JudyLNext(c->svc_count, &key, &err))
			counted += (Word_t)*v;
		if (missing || jobs != c->svc[s].replicas || touched != counted) {
			if (buf && len)
				snprintf(buf, len, "service '%s': %u running replicas touching %llu domains, "
				         "the counts say %u and %llu", c->svc[s].name, jobs,
				         (unsigned long long)touched, c->svc[s].replicas,
				         (unsigned long long)counted);
			return TP_ECORRUPT;
		}
	}
	return 0;
}
