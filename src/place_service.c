/* SPDX-License-Identifier: MIT */
/*
 * Spread caps over a service's replicas (tp_cluster_set_service_caps, tp_request.service): the
 * domains of the caps level where the service already has as many replicas as its caps let a
 * domain hold become a node filter, like the domains other tenants hold exclusively. They are
 * read from the model's counts (cluster_service.c), walking only the domains the service has
 * ever held at that level, never the cluster. The failure domains of the caps' fd kind at the
 * cap become a device filter (a feed crosses the tree) the same way.
 */
#include <math.h>
#include <stdio.h>

#include "place_internal.h"

/* The most replicas one domain may hold once the new one runs: max_per_domain, and
 * max(1, floor(max_percent x (R + 1) / 100)) of the R running ones plus the new one (a repair
 * adds no replica: R). The same for the tree's caps and the failure domains'. */
static uint32_t service_cap(const struct tp_service *s, uint32_t max_per_domain,
                            double max_percent, bool repair)
{
	uint32_t cap = max_per_domain ? max_per_domain : UINT32_MAX;
	if (max_percent > 0.0) {
		double r = (double)s->replicas + (repair ? 0.0 : 1.0);
		double share = floor(max_percent * r / 100.0 + 1e-9);
		uint32_t n = share < 1.0 ? 1u : share >= (double)UINT32_MAX ? UINT32_MAX : (uint32_t)share;
		cap = n < cap ? n : cap;
	}
	return cap;
}

/* Whether the job holds a device in failure domain fd of kind k (the repair path only). */
static bool job_in_fd(const struct tp_cluster *c, const struct tp_job_impl *job, unsigned k,
                      uint32_t fd)
{
	for (uint32_t i = 0; i < job->ndev; i++)
		if (c->t->fd[k].dev_fd[job->devs[i]] == fd)
			return true;
	return false;
}

/* The failure domains of the service's fd kind at its cap, as a device filter (fbad): the
 * domains it has ever held of that kind, never the cluster. */
static void build_fbad(struct pctx *p, uint32_t sid, const struct tp_job_impl *self)
{
	const struct tp_cluster *c = p->c;
	const struct tp_service *s = &c->svc[sid];
	if (s->fd_kind == TP_NONE)
		return;
	unsigned k = s->fd_kind;
	p->svc_fd = (int)k;
	p->svc_fd_cap = service_cap(s, s->fd_max_per_domain, s->fd_max_percent, self != NULL);
	Word_t key = tp_cl_service_key(sid, tp_cl_service_fd_slot(k), 0);
	Word_t last = tp_cl_service_key(sid, tp_cl_service_fd_slot(k), UINT32_MAX);
	JError_t err;
	for (PPvoid_t v = JudyLFirst(c->svc_count, &key, &err); v && v != PPJERR && key <= last;
	     v = JudyLNext(c->svc_count, &key, &err))
		if ((Word_t)*v >= p->svc_fd_cap && !(self && job_in_fd(c, self, k, (uint32_t)key))) {
			if (!p->svc_fd_blocked++)
				p->svc_fd_first = (uint32_t)key;
			j1_set(p, &p->fbad, (uint32_t)key);
		}
}

/* Whether the job holds a device in domain dom of level (a repair's own domains; the repair
 * path only, once per domain at the cap). */
static bool job_in_domain(const struct tp_cluster *c, const struct tp_job_impl *job,
                          unsigned level, uint32_t dom)
{
	const struct tp_topology *t = c->t;
	for (uint32_t i = 0; i < job->ndev; i++)
		if (tp_node_ancestor(t, t->dev_node[job->devs[i]], level) == dom)
			return true;
	return false;
}

void tp_pl_build_sbad(struct pctx *p, bool on)
{
	j1_free(&p->sbad);
	j1_free(&p->fbad);
	if (!on) /* the explanation's emptied cluster: the service's other replicas are gone */
		return;
	p->svc_level = p->svc_fd = -1;
	p->svc_blocked = p->svc_fd_blocked = 0;
	const struct tp_cluster *c = p->c;
	uint32_t sid = p->q->service ? tp_cl_service_find(c, p->q->service) : TP_NO_SERVICE;
	if (sid == TP_NO_SERVICE)
		return;
	/* A repair (tp_replace) is already counted in the domains it holds a device of: it may
	 * take more there, and goes elsewhere only where the caps leave room for one more. */
	const struct tp_job_impl *self = p->self_slot != TP_NO_JOB ? c->jobs[p->self_slot] : NULL;
	build_fbad(p, sid, self);
	const struct tp_service *s = &c->svc[sid];
	if (s->level == TP_NONE)
		return;
	p->svc_level = (int)s->level;
	p->svc_cap = service_cap(s, s->max_per_domain, s->max_percent, self != NULL);
	Word_t key = tp_cl_service_key(sid, s->level, 0);
	Word_t last = tp_cl_service_key(sid, s->level, UINT32_MAX);
	JError_t err;
	for (PPvoid_t v = JudyLFirst(c->svc_count, &key, &err); v && v != PPJERR && key <= last;
	     v = JudyLNext(c->svc_count, &key, &err))
		if ((Word_t)*v >= p->svc_cap && !(self && job_in_domain(c, self, s->level, (uint32_t)key))) {
			j1_set(p, &p->sbad, (uint32_t)key);
			p->svc_blocked++;
		}
}

void tp_pl_say_service(const struct pctx *p, char *buf, size_t len)
{
	size_t n = 0;
	if (p->svc_level >= 0 && p->svc_blocked) {
		const struct tp_level_impl *lv = &p->t->lv[p->svc_level];
		n = (size_t)snprintf(buf, len, "; service %s keeps out of %u %s%s at its cap of %u "
		                     "replica%s per %s (tp_cluster_set_service_caps)", p->q->service,
		                     p->svc_blocked, lv->name, p->svc_blocked == 1 ? "" : "s",
		                     p->svc_cap, p->svc_cap == 1 ? "" : "s", lv->name);
	}
	if (p->svc_fd < 0 || !p->svc_fd_blocked || n >= len)
		return;
	const struct tp_fd_kind *k = &p->t->fd[p->svc_fd];
	char more[48] = "";
	if (p->svc_fd_blocked > 1)
		snprintf(more, sizeof more, " and %u more", p->svc_fd_blocked - 1);
	snprintf(buf + n, len - n, "; service %s keeps out of %s '%s'%s at its cap of %u "
	         "replica%s per %s (tp_cluster_set_service_caps, fd_kind)", p->q->service, k->name,
	         k->dname[p->svc_fd_first], more, p->svc_fd_cap, p->svc_fd_cap == 1 ? "" : "s",
	         k->name);
}

/* Of free_total free devices, those outside the domains the service's caps keep it out of.
 * The failure domains have no free counts: their devices are walked, on the failure path
 * only (the explanation walks the nodes as well). */
uint32_t tp_pl_service_free_outside(const struct pctx *p, uint32_t free_total)
{
	if (!p->sbad && !p->fbad)
		return free_total;
	uint64_t in = 0;
	Word_t d = 0;
	JError_t err;
	for (int ok = Judy1First(p->sbad, &d, &err); p->sbad && ok == 1;
	     ok = Judy1Next(p->sbad, &d, &err))
		in += p->c->free[p->svc_level][d];
	if (p->fbad) {
		const struct tp_topology *t = p->t;
		const uint32_t *dev_fd = t->fd[p->svc_fd].dev_fd;
		for (uint32_t x = 0; x < t->ndevices; x++)
			if (tp_dev_free(p->c, x) && j1_test(p->fbad, dev_fd[x]) &&
			    !(p->sbad && j1_test(p->sbad, tp_node_ancestor(t, t->dev_node[x],
			                                                   (unsigned)p->svc_level))))
				in++;
	}
	return in >= free_total ? 0 : free_total - (uint32_t)in;
}
