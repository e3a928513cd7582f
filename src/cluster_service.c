/* SPDX-License-Identifier: MIT */
/*
 * Services and their spread caps (tp_cluster_set_service_caps): the model's count, for every
 * service and every domain of every level, and every failure domain of the first
 * TP_SERVICE_FD_KINDS kinds (after the levels' slots: tp_cl_service_fd_slot), of the service's
 * running replicas with a device there. A job is a replica when its shape names the service (tp_request.service). The counts
 * change with the jobs (assign, release, rebind and their undo call tp_cl_service_apply), and
 * their entries are made before a change (tp_cl_service_prepare) and never removed, so that a
 * rollback, which must not fail, only adds and subtracts. Placement reads them (place.c) to
 * keep a new replica out of the domains at the cap: one lookup per domain the service holds.
 */
#include <stddef.h>
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
	c->svc[sid] = (struct tp_service){.name = copy, .level = TP_NONE, .fd_kind = TP_NONE};
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

/* Whether devs[i]'s failure domain of kind k is also an earlier device's, as seen_before. */
static bool fd_seen_before(const struct tp_topology *t, unsigned k, const uint32_t *devs,
                           size_t i, uint32_t fd)
{
	const uint32_t *dev_fd = t->fd[k].dev_fd;
	if (i > 0 && dev_fd[devs[i - 1]] == fd)
		return true;
	for (size_t x = 0; x + 1 < i; x++)
		if (dev_fd[devs[x]] == fd)
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
	for (unsigned k = 0; k < tp_cl_service_fd_kinds(t); k++)
		for (size_t i = 0; i < n; i++) {
			const uint32_t *dev_fd = t->fd[k].dev_fd;
			if (i > 0 && dev_fd[devs[i - 1]] == dev_fd[devs[i]])
				continue;
			JError_t err;
			PPvoid_t p = JudyLIns(&c->svc_count,
			                      tp_cl_service_key(s, tp_cl_service_fd_slot(k), dev_fd[devs[i]]),
			                      &err);
			if (!p || p == PPJERR)
				return TP_ENOMEM;
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
	for (unsigned k = 0; k < tp_cl_service_fd_kinds(t); k++)
		for (size_t i = 0; i < job->ndev; i++) {
			uint32_t fd = t->fd[k].dev_fd[job->devs[i]];
			if (fd_seen_before(t, k, job->devs, i, fd))
				continue;
			JError_t err;
			PPvoid_t p = JudyLGet(c->svc_count,
			                      tp_cl_service_key(job->service, tp_cl_service_fd_slot(k), fd),
			                      &err);
			if (p && p != PPJERR)
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

/* The size of a caps struct of a version (0: one the library does not know): a version-1
 * struct ends before fd_kind. */
static size_t caps_size(unsigned version)
{
	return version == 1                         ? offsetof(tp_service_caps, fd_kind)
	       : version == TP_SERVICE_CAPS_VERSION ? sizeof(tp_service_caps)
	                                            : 0;
}

/* One cap's figures: max_percent in [0, 100], and no figure without what it counts over. */
static int figures_check(struct tp_cluster *c, const char *over, const char *prefix,
                         uint32_t max_per_domain, double max_percent, bool counted)
{
	if (!(max_percent >= 0.0 && max_percent <= 100.0))
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.%smax_percent %g is not in [0, 100]",
		                 prefix, max_percent);
	if (!counted && (max_per_domain || max_percent > 0.0))
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.%s is NULL but caps.%s%s is set: "
		                 "a cap counts over the domains of a %s", over, prefix,
		                 max_per_domain ? "max_per_domain" : "max_percent",
		                 *prefix ? "failure-domain kind" : "level");
	return 0;
}

/* The caller's caps checked and read as the current version into *v; *level and *kind their
 * indexes (-1: none). */
static int caps_check(struct tp_cluster *c, const char *service, const tp_service_caps *caps,
                      tp_service_caps *v, int *level, int *kind)
{
	const char *why = tp_name_problem(service, false);
	if (why)
		return tp_seterr(c->errmsg, TP_EINVAL, "service %s", why);
	*level = *kind = -1;
	*v = (tp_service_caps)TP_SERVICE_CAPS_INIT;
	if (!caps)
		return 0;
	if (!caps_size(caps->version))
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.version %u is not 1 or %d", caps->version,
		                 TP_SERVICE_CAPS_VERSION);
	memcpy(v, caps, caps_size(caps->version));
	v->version = TP_SERVICE_CAPS_VERSION;
	if (v->level && (*level = tp_topology_level_index(c->t, v->level)) < 0)
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.level '%s' is not a level of the "
		                 "topology", v->level);
	int rc = figures_check(c, "level", "", v->max_per_domain, v->max_percent, v->level);
	if (rc)
		return rc;
	if (v->fd_kind && (*kind = tp_topology_fd_kind_by_name(c->t, v->fd_kind)) < 0)
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.fd_kind '%s' is not a failure-domain "
		                 "kind of the topology", v->fd_kind);
	if (*kind >= TP_SERVICE_FD_KINDS)
		return tp_seterr(c->errmsg, TP_EINVAL, "caps.fd_kind '%s' is kind %d of the "
		                 "topology: a service's replicas are counted in the first %d kinds only",
		                 v->fd_kind, *kind, TP_SERVICE_FD_KINDS);
	return figures_check(c, "fd_kind", "fd_", v->fd_max_per_domain, v->fd_max_percent,
	                     v->fd_kind);
}

static int set_caps(struct tp_cluster *c, const char *service, const tp_service_caps *caps)
{
	if (!service)
		return tp_seterr(c->errmsg, TP_EINVAL, "tp_cluster_set_service_caps: service is NULL");
	tp_service_caps v;
	int level = -1, kind = -1, rc = caps_check(c, service, caps, &v, &level, &kind);
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
		                                    .x = s->max_percent, .fdk = s->fd_kind,
		                                    .fdn = s->fd_max_per_domain,
		                                    .fdx = s->fd_max_percent});
	bool any = level >= 0 && (v.max_per_domain || v.max_percent > 0.0);
	s->level = any ? (uint32_t)level : TP_NONE;
	s->max_per_domain = any ? v.max_per_domain : 0;
	s->max_percent = any ? v.max_percent : 0.0;
	bool fd = kind >= 0 && (v.fd_max_per_domain || v.fd_max_percent > 0.0);
	s->fd_kind = fd ? (uint32_t)kind : TP_NONE;
	s->fd_max_per_domain = fd ? v.fd_max_per_domain : 0;
	s->fd_max_percent = fd ? v.fd_max_percent : 0.0;
	c->generation = ++c->generations;
	return 0;
}

int tp_service_caps_init(tp_service_caps *caps, unsigned version)
{
	static const tp_service_caps init = TP_SERVICE_CAPS_INIT;
	return tp_options_init(caps, caps_size(version), &init, version);
}

int tp_cluster_set_service_caps(tp_cluster *c, const char *service, const tp_service_caps *caps)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, set_caps(c, service, caps));
}

int tp_cluster_service_caps(const tp_cluster *c, const char *service, tp_service_caps *caps)
{
	if (!c || !service || !caps || !caps_size(caps->version))
		return TP_EINVAL;
	tp_service_caps v = TP_SERVICE_CAPS_INIT;
	uint32_t sid = tp_cl_service_find(c, service);
	const struct tp_service *s = sid == TP_NO_SERVICE ? NULL : &c->svc[sid];
	if (s && s->level != TP_NONE) {
		v.level = c->t->lv[s->level].name;
		v.max_per_domain = s->max_per_domain;
		v.max_percent = s->max_percent;
	}
	if (s && s->fd_kind != TP_NONE) {
		v.fd_kind = c->t->fd[s->fd_kind].name;
		v.fd_max_per_domain = s->fd_max_per_domain;
		v.fd_max_percent = s->fd_max_percent;
	}
	v.version = caps->version;
	memcpy(caps, &v, caps_size(caps->version));
	return 0;
}

int tp_cluster_service_fd_replicas(const tp_cluster *c, const char *service, unsigned kind,
                                   uint32_t fd, uint32_t *out)
{
	if (!c || !service || !out || kind >= tp_cl_service_fd_kinds(c->t) ||
	    fd >= c->t->fd[kind].ndom)
		return TP_EINVAL;
	uint32_t sid = tp_cl_service_find(c, service);
	*out = sid == TP_NO_SERVICE ? 0 : tp_cl_service_count(c, sid, tp_cl_service_fd_slot(kind), fd);
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
			for (unsigned k = 0; k < tp_cl_service_fd_kinds(t); k++)
				for (size_t i = 0; i < job->ndev; i++) {
					uint32_t fd = t->fd[k].dev_fd[job->devs[i]];
					if (fd_seen_before(t, k, job->devs, i, fd))
						continue;
					touched++;
					missing |= tp_cl_service_count(c, (uint32_t)s, tp_cl_service_fd_slot(k),
					                               fd) == 0;
				}
		}
		Word_t key = tp_cl_service_key((uint32_t)s, 0, 0);
		Word_t last = tp_cl_service_key((uint32_t)s, 15, UINT32_MAX); /* levels and kinds */
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
