/* SPDX-License-Identifier: MIT */
/*
 * Prefill/decode groups of a disaggregated service (topoplace-sizing.h, tp_pd_place): each
 * group's prefill instances as one request inside a domain of the locality level, its decode
 * instances colocated with them there, the groups spread over the domains of a level with a cap
 * per domain, and a pairing of each decode instance with the nearest prefill instance.
 *
 * The service's groups are running jobs named <service>/g<k>/p<i> and <service>/g<k>/d<j>; a
 * call finds the ones already there by name (one lookup per group index) and counts them per
 * spread domain (the domain of the first device of p0), then places the missing groups one by
 * one inside a savepoint, so that a failure rolls everything back. Over the public API only.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster_impl.h"
#include "common.h"
#include "serving_internal.h"
#include "topoplace-sizing.h"

struct tp_pd_result {
	tp_allocator a;
	char errmsg[TP_ERRMSG_LEN];
	tp_pd_instance *inst;
	size_t n, cap;
	const char *locality; /* the level the groups were kept to (owned by the topology) */
	double handoff_us;
	char decision[4 * TP_ERRMSG_LEN];
};

/* What tp_pd_result_locality() says when "auto" kept the groups of one call to different
 * levels (their domains' fabrics differ). */
static const char mixed_locality[] = "mixed";

/* What one call works with. */
struct pd {
	tp_cluster *c;
	const tp_topology *t;
	const tp_pd_request *r;
	tp_pd_result *res;
	int spread;           /* spread level index, or -1 */
	uint32_t ndom;        /* domains of the spread level (1 without one) */
	uint32_t *groups_in;  /* [ndom] groups of the service per domain */
	uint32_t *order;      /* [ndom] scratch: the domains in trying order */
	const char *loc;      /* the locality level tried (NULL: none) */
	bool aut;             /* "auto": loc is chosen per group and domain (place_group_auto) */
	const struct tp_pd_handoff *cand; /* "auto": the candidate tried, or NULL */
	int placed_level;     /* "auto": the level of the groups placed (-2: none yet) */
	bool mixed;           /* "auto": the groups placed were kept to different levels */
	double worst_us;      /* "auto": the largest hand-off of a group placed */
	size_t dlen;          /* "auto": the length of res->decision */
};

static void job_name(char *buf, size_t len, const char *service, unsigned g, char kind,
                     unsigned i)
{
	snprintf(buf, len, "%s/g%u/%c%u", service, g, kind, i);
}

static int check_request(char *err, const tp_topology *t, const tp_pd_request *r)
{
	if (!r->service || !r->service[0])
		return tp_seterr(err, TP_EINVAL, "request.service is %s: a service needs an id",
		                 r->service ? "empty" : "NULL");
	if (strlen(r->service) + 32 > TP_MAX_NAME)
		return tp_seterr(err, TP_EINVAL, "request.service is %zu bytes: its job names "
		                 "would pass %d", strlen(r->service), TP_MAX_NAME);
	const struct {
		const char *name;
		unsigned v;
	} u[] = {{"groups", r->groups}, {"prefill", r->prefill},
	         {"prefill_devices", r->prefill_devices}, {"decode", r->decode},
	         {"decode_devices", r->decode_devices}};
	for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
		if (u[i].v == 0 || u[i].v > (1u << 20))
			return tp_seterr(err, TP_EINVAL, "request.%s %u is outside 1 to 2^20", u[i].name,
			                 u[i].v);
	bool aut = r->locality && strcmp(r->locality, TP_PD_LOCALITY_AUTO) == 0;
	const struct {
		const char *name, *v;
	} l[] = {{"instance_level", r->instance_level}, {"locality", aut ? NULL : r->locality},
	         {"spread_level", r->spread_level}};
	for (size_t i = 0; i < sizeof l / sizeof l[0]; i++)
		if (l[i].v && tp_topology_level_by_name(t, l[i].v) < 0)
			return tp_seterr(err, TP_EINVAL, "request.%s '%s' is not a level of the topology",
			                 l[i].name, l[i].v);
	if (!(r->kv_token_bytes >= 0.0 && r->kv_token_bytes < 1e15))
		return tp_seterr(err, TP_EINVAL, "request.kv_token_bytes %g is not a finite number "
		                 ">= 0", r->kv_token_bytes);
	if (!(r->handoff_slack >= 0.0 && r->handoff_slack < 1e6))
		return tp_seterr(err, TP_EINVAL, "request.handoff_slack %g is not a finite number "
		                 ">= 0", r->handoff_slack);
	if (aut && (r->kv_token_bytes == 0.0 || r->prompt_tokens == 0))
		return tp_seterr(err, TP_EINVAL, "request.locality 'auto' needs the hand-off's size: "
		                 "request.kv_token_bytes %g and request.prompt_tokens %u must be > 0",
		                 r->kv_token_bytes, r->prompt_tokens);
	return 0;
}

/* The request in the current version: a version-1 caller's struct ends at select_model. */
static int read_request(char *err, const tp_pd_request *in, tp_pd_request *r)
{
	*r = (tp_pd_request)TP_PD_REQUEST_INIT;
	if (in->version == 1)
		memcpy(r, in, offsetof(tp_pd_request, kv_token_bytes));
	else if (in->version == TP_PD_REQUEST_VERSION)
		*r = *in;
	else
		return tp_seterr(err, TP_EINVAL, "request.version %u is not 1 or %u", in->version,
		                 TP_PD_REQUEST_VERSION);
	r->version = TP_PD_REQUEST_VERSION;
	return 0;
}

/* ---- the service's groups already there ---------------------------------------------------- */

/* The spread domain of group g, or TP_NONE when the group does not run. */
static uint32_t group_domain(const struct pd *q, unsigned g)
{
	char name[TP_MAX_NAME + 1];
	job_name(name, sizeof name, q->r->service, g, 'p', 0);
	const uint32_t *devs;
	size_t n;
	if (tp_cluster_job_devices(q->c, name, &devs, &n) || n == 0)
		return TP_NONE;
	if (q->spread < 0)
		return 0;
	uint32_t node = tp_topology_device_node(q->t, devs[0]);
	return tp_topology_node_domain(q->t, node, (unsigned)q->spread);
}

/* A group that does not run (its first prefill instance is gone) must have none of its other
 * instances left either: placing it would assign names that exist. One lookup per instance. */
static int check_not_partial(const struct pd *q, unsigned g)
{
	const tp_pd_request *r = q->r;
	for (int side = 1; side >= 0; side--)
		for (unsigned i = side ? 1 : 0; i < (side ? r->prefill : r->decode); i++) {
			char name[TP_MAX_NAME + 1], first[TP_MAX_NAME + 1];
			job_name(name, sizeof name, r->service, g, side ? 'p' : 'd', i);
			const uint32_t *devs;
			size_t n;
			if (tp_cluster_job_devices(q->c, name, &devs, &n))
				continue;
			job_name(first, sizeof first, r->service, g, 'p', 0);
			return tp_seterr(q->res->errmsg, TP_EEXIST,
			                 "group %u of service %s is partly placed: %s does not run but %s "
			                 "does (release the group's other instances first)",
			                 g, r->service, first, name);
		}
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The spread domains below the cap, fewest groups first, then by index. */
static uint32_t domain_order(struct pd *q, uint64_t *keys)
{
	uint32_t n = 0;
	for (uint32_t d = 0; d < q->ndom; d++)
		if (!q->r->max_per_domain || q->groups_in[d] < q->r->max_per_domain)
			keys[n++] = (uint64_t)q->groups_in[d] << 32 | d;
	qsort(keys, n, sizeof *keys, cmp_u64);
	for (uint32_t i = 0; i < n; i++)
		q->order[i] = (uint32_t)keys[i];
	return n;
}

/* ---- one group ------------------------------------------------------------------------------ */

static int result_push(tp_pd_result *res, const char *job, unsigned g, int prefill,
                       unsigned index, const uint32_t *devs, size_t n)
{
	if (tp_grow(&res->a, (void **)&res->inst, &res->cap, res->n + 1, sizeof *res->inst))
		return TP_ENOMEM;
	char *j = tp_strdup(&res->a, job);
	uint32_t *d = tp_mallocn(&res->a, n ? n : 1, sizeof *d);
	if (!j || !d) {
		tp_free(&res->a, j);
		tp_free(&res->a, d);
		return TP_ENOMEM;
	}
	memcpy(d, devs, n * sizeof *d);
	res->inst[res->n++] = (tp_pd_instance){j, g, prefill, index, 0, d, n};
	return 0;
}

/* Assign the instances of one placement (count x size devices in rank order) as jobs. */
static int assign_instances(struct pd *q, const tp_placement *p, unsigned g, int prefill)
{
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n); /* count x size, in rank order */
	unsigned count = prefill ? q->r->prefill : q->r->decode;
	unsigned size = prefill ? q->r->prefill_devices : q->r->decode_devices;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = TP_CLASS_INFERENCE;
	o.tenant = q->r->tenant;
	for (unsigned i = 0; i < count; i++) {
		char name[TP_MAX_NAME + 1];
		job_name(name, sizeof name, q->r->service, g, prefill ? 'p' : 'd', i);
		int rc = tp_cluster_assign(q->c, name, devs + (size_t)i * size, size, &o);
		if (rc)
			return tp_seterr(q->res->errmsg, rc, "group %u: assigning %s: %s", g, name,
			                 tp_cluster_errmsg(q->c));
		if ((rc = result_push(q->res, name, g, prefill, i, devs + (size_t)i * size, size)))
			return tp_seterr(q->res->errmsg, rc, "out of memory recording %s", name);
	}
	return 0;
}

/* The request of one side of a group: the prefill instances inside one domain of the locality
 * level, the decode instances colocated with prefill instance 0 there; both limited to the
 * nodes given (the spread domain tried), or anywhere when there are none. */
static tp_request side_request(const struct pd *q, int prefill, const char **nodes,
                               size_t nnodes, const char *colocate)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = q->r->service;
	r.job_class = TP_CLASS_INFERENCE;
	r.tenant = q->r->tenant;
	unsigned count = prefill ? q->r->prefill : q->r->decode;
	unsigned size = prefill ? q->r->prefill_devices : q->r->decode_devices;
	r.count = count * size;
	r.group_size = size;
	r.group_level = q->r->instance_level;
	r.select_model = q->r->select_model;
	if (nnodes) {
		r.select_nodes = nodes;
		r.nselect_nodes = nnodes;
	}
	if (prefill) {
		r.required = q->loc;
	} else if (q->loc) {
		r.colocate_job = colocate;
		r.colocate_level = q->loc;
	}
	return r;
}

/* Try group g in one spread domain (TP_NONE: anywhere): 0, or the code of the failed side with
 * its message in why. Leaves the instances assigned on success only. */
static size_t domain_node_names(const struct pd *q, int level, uint32_t dom, const char **nodes)
{
	uint32_t first, n;
	tp_topology_domain_nodes(q->t, (unsigned)level, dom, &first, &n);
	for (uint32_t i = 0; i < n; i++)
		nodes[i] = tp_topology_node_name(q->t, first + i);
	return n;
}

/* The nodes of domain dom of level (level -1: the cluster) that the "auto" candidate tried
 * admits (tp_pd_handoff_admits): the domains of the candidate's fabric. */
static size_t admitted_nodes(const struct pd *q, int level, uint32_t dom, const char **nodes)
{
	uint32_t first = 0, n = tp_topology_node_count(q->t);
	if (level >= 0)
		tp_topology_domain_nodes(q->t, (unsigned)level, dom, &first, &n);
	size_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		if (tp_pd_handoff_admits(q->t, q->r, q->cand, first + i))
			nodes[k++] = tp_topology_node_name(q->t, first + i);
	return k;
}

/* When the locality level lies inside the spread domain (or there is no spread), the prefill
 * side alone could take a locality domain the decode side then does not fit in: first find the
 * tightest locality domain with room for the whole group (one tp_place of its devices), and
 * keep both sides to its nodes. 0 (nodes narrowed or left), or the probe's code. */
static int narrow_to_locality(struct pd *q, const char **nodes, size_t *nn, char *why,
                              size_t whylen)
{
	int loc = q->loc ? tp_topology_level_by_name(q->t, q->loc) : -1;
	if (loc < 0 || loc <= q->spread)
		return 0;
	tp_request r = side_request(q, 1, nodes, *nn, NULL);
	r.count = q->r->prefill * q->r->prefill_devices + q->r->decode * q->r->decode_devices;
	r.group_size = r.count;
	r.group_level = q->loc;
	r.required = NULL;
	tp_placement *p = NULL;
	int rc = tp_place(q->c, &r, &p);
	if (rc == 0) {
		size_t n;
		const uint32_t *devs = tp_placement_devices(p, &n);
		uint32_t node = tp_topology_device_node(q->t, devs[0]);
		*nn = domain_node_names(q, loc, tp_topology_node_domain(q->t, node, (unsigned)loc),
		                        nodes);
		if (q->cand && q->cand->narrow)
			*nn = admitted_nodes(q, loc, tp_topology_node_domain(q->t, node, (unsigned)loc),
			                     nodes);
	} else {
		snprintf(why, whylen, "group: %s", p ? tp_placement_errmsg(p) : "out of memory");
	}
	tp_placement_destroy(p);
	return rc;
}

static int try_group(struct pd *q, unsigned g, uint32_t dom, const char **nodes,
                     char *why, size_t whylen)
{
	size_t nn = dom == TP_NONE ? 0 : domain_node_names(q, q->spread, dom, nodes);
	if (q->cand && q->cand->narrow) {
		nn = admitted_nodes(q, dom == TP_NONE ? -1 : q->spread, dom, nodes);
		if (nn == 0) {
			snprintf(why, whylen, "no domain of the candidate's fabric there");
			return TP_EINFEASIBLE;
		}
	}
	int rc = narrow_to_locality(q, nodes, &nn, why, whylen);
	if (rc)
		return rc;
	char p0[TP_MAX_NAME + 1];
	job_name(p0, sizeof p0, q->r->service, g, 'p', 0);
	size_t sp, mark = q->res->n;
	rc = tp_cluster_savepoint(q->c, &sp);
	if (rc)
		return tp_seterr(q->res->errmsg, rc, "%s", tp_cluster_errmsg(q->c));
	for (int side = 1; side >= 0 && !rc; side--) {
		tp_request r = side_request(q, side, nodes, nn, p0);
		tp_placement *p = NULL;
		rc = tp_place(q->c, &r, &p);
		if (rc == 0)
			rc = assign_instances(q, p, g, side);
		else
			snprintf(why, whylen, "%s: %s", side ? "prefill" : "decode",
			         p ? tp_placement_errmsg(p) : "out of memory");
		tp_placement_destroy(p);
	}
	if (rc) {
		tp_cluster_rollback(q->c, sp);
		while (q->res->n > mark) {
			q->res->n--;
			tp_free(&q->res->a, (void *)q->res->inst[q->res->n].job);
			tp_free(&q->res->a, (void *)q->res->inst[q->res->n].devices);
		}
		return rc;
	}
	tp_cluster_savepoint_discard(q->c, sp);
	return 0;
}

static const char *locality_name(const tp_topology *t, int level)
{
	return level < 0 ? "none" : tp_topology_level_name(t, (unsigned)level);
}

/* Append to the result's decision (bounded: the tail of a long one is cut). */
static void say(struct pd *q, const char *fmt, ...) TP_PRINTF(2, 3);
static void say(struct pd *q, const char *fmt, ...)
{
	size_t cap = sizeof q->res->decision;
	if (q->dlen >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(q->res->decision + q->dlen, cap - q->dlen, fmt, ap);
	va_end(ap);
	q->dlen = k < 0 ? cap : q->dlen + (size_t)k;
}

/* A group placed at candidate h: what the result says of the call's locality. */
static void note_placed(struct pd *q, const struct tp_pd_handoff *h)
{
	if (q->placed_level != -2 && q->placed_level != h->level)
		q->mixed = true;
	q->placed_level = h->level;
	if (h->us > q->worst_us)
		q->worst_us = h->us;
}

/* "auto": group g, candidate by candidate (each domain's k-th best before any domain's
 * (k + 1)-th, the domains in spread order), each domain's candidates from the fabrics of its
 * own domains (tp_pd_handoff_scope); the decision says, for the group, the candidates where it
 * was placed and each try. */
static int place_group_auto(struct pd *q, unsigned g, uint32_t n, const char **nodes,
                            char *why, size_t whylen)
{
	struct tp_pd_handoff cand[TP_PD_MAX_CANDIDATES];
	char tries[TP_ERRMSG_LEN] = "";
	size_t tl = 0;
	int last = TP_EINFEASIBLE;
	for (size_t k = 0; k < TP_PD_MAX_CANDIDATES; k++) {
		bool any = false;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t dom = q->spread < 0 ? TP_NONE : q->order[i];
			size_t nc = tp_pd_handoff_scope(q->t, q->r, q->spread, dom, cand);
			if (k >= nc)
				continue;
			any = true;
			q->cand = &cand[k];
			q->loc = cand[k].level < 0 ? NULL : tp_topology_level_name(q->t,
			                                                            (unsigned)cand[k].level);
			int rc = try_group(q, g, dom, nodes, why, whylen);
			q->cand = NULL;
			char path[TP_MAX_NAME + 1] = "";
			if (dom != TP_NONE)
				tp_topology_domain_path(q->t, (unsigned)q->spread, dom, path, sizeof path);
			if (tl < sizeof tries)
				tl += (size_t)snprintf(tries + tl, sizeof tries - tl, "; tried %s%s%s: %s",
				                       locality_name(q->t, cand[k].level), *path ? " in " : "",
				                       path, rc ? tp_err_name(rc) : "placed");
			if (rc == 0) {
				q->groups_in[q->spread < 0 ? 0 : dom]++;
				note_placed(q, &cand[k]);
				say(q, "%s g%u%s%s:", q->dlen > 5 ? " |" : "", g, *path ? " in " : "", path);
				for (size_t x = 0; x < nc; x++)
					say(q, "%s %s %.1f us", x ? "," : "", locality_name(q->t, cand[x].level),
					    cand[x].us);
				say(q, "%s", tries);
				return 0;
			}
			if (rc != TP_EBUSY && rc != TP_EFRAGMENTED && rc != TP_EINFEASIBLE)
				return q->res->errmsg[0] ? rc : tp_seterr(q->res->errmsg, rc, "group %u: %s",
				                                          g, why);
			last = rc;
		}
		if (!any)
			break;
	}
	return tp_seterr(q->res->errmsg, last, "group %u of service %s: locality auto: no "
	                 "candidate places the groups (%s); the last: %s", g, q->r->service,
	                 tries[0] ? tries + 2 : "none", why);
}

static int place_group(struct pd *q, unsigned g, uint64_t *keys, const char **nodes)
{
	uint32_t n = domain_order(q, keys);
	char why[TP_ERRMSG_LEN] = "";
	int last = TP_EINFEASIBLE;
	if (n == 0)
		return tp_seterr(q->res->errmsg, TP_EBUSY, "group %u: every %s holds %u groups of "
		                 "service %s (request.max_per_domain)", g, q->r->spread_level,
		                 q->r->max_per_domain, q->r->service);
	if (q->aut)
		return place_group_auto(q, g, n, nodes, why, sizeof why);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t dom = q->spread < 0 ? TP_NONE : q->order[i];
		int rc = try_group(q, g, dom, nodes, why, sizeof why);
		if (rc == 0) {
			q->groups_in[q->spread < 0 ? 0 : dom]++;
			return 0;
		}
		if (rc != TP_EBUSY && rc != TP_EFRAGMENTED && rc != TP_EINFEASIBLE)
			return q->res->errmsg[0] ? rc : tp_seterr(q->res->errmsg, rc, "group %u: %s", g,
			                                          why);
		last = rc;
	}
	char path[TP_MAX_NAME + 1] = "the cluster";
	if (q->spread >= 0)
		tp_topology_domain_path(q->t, (unsigned)q->spread, q->order[n - 1], path,
		                        sizeof path);
	return tp_seterr(q->res->errmsg, last, "group %u of service %s fits no %s (%u tried; the "
	                 "last, %s: %s)", g, q->r->service,
	                 q->spread < 0 ? "placement" : q->r->spread_level, n, path, why);
}

/* ---- pairing ------------------------------------------------------------------------------ */

/* The deepest level whose one domain holds both devices (a larger figure is nearer). */
static int nearness(const tp_topology *t, uint32_t a, uint32_t b)
{
	int level;
	if (tp_topology_common_level(t, a, b, &level))
		return -2;
	return level;
}

/* Each decode instance of the groups placed gets the nearest prefill instance of its group,
 * then the one serving fewest, then the lowest index. */
static void pair_instances(const struct pd *q, size_t from)
{
	tp_pd_result *res = q->res;
	for (size_t i = from; i < res->n; i++) {
		tp_pd_instance *d = &res->inst[i];
		if (d->prefill)
			continue;
		tp_pd_instance *best = NULL;
		int best_near = -3;
		for (size_t j = from; j < res->n; j++) {
			tp_pd_instance *p = &res->inst[j];
			if (!p->prefill || p->group != d->group)
				continue;
			int near = nearness(q->t, p->devices[0], d->devices[0]);
			if (!best || near > best_near || (near == best_near && p->pair < best->pair)) {
				best = p;
				best_near = near;
			}
		}
		d->pair = best ? best->index : 0;
		if (best)
			best->pair++;
	}
}

/* ---- entry points ----------------------------------------------------------------------- */

static int pd_run(struct pd *q)
{
	const tp_pd_request *r = q->r;
	tp_allocator *a = &q->res->a;
	q->spread = r->spread_level ? tp_topology_level_by_name(q->t, r->spread_level) : -1;
	q->ndom = q->spread < 0 ? 1 : tp_topology_domain_count(q->t, (unsigned)q->spread);
	q->groups_in = tp_calloc(a, q->ndom, sizeof *q->groups_in);
	q->order = tp_mallocn(a, q->ndom, sizeof *q->order);
	uint64_t *keys = tp_mallocn(a, q->ndom, sizeof *keys);
	q->loc = q->aut ? NULL : r->locality;
	q->placed_level = -2;
	int loc = q->loc ? tp_topology_level_by_name(q->t, q->loc) : -1;
	int widest = q->spread >= 0 ? q->spread : loc; /* the nodes buffer holds its largest */
	uint32_t most = q->aut ? tp_topology_node_count(q->t) : 0; /* auto: a fabric's nodes */
	uint32_t nw = widest < 0 ? 0 : tp_topology_domain_count(q->t, (unsigned)widest);
	for (uint32_t d = 0; d < nw; d++) {
		uint32_t first, n;
		tp_topology_domain_nodes(q->t, (unsigned)widest, d, &first, &n);
		if (n > most)
			most = n;
	}
	const char **nodes = tp_mallocn(a, most ? most : 1, sizeof *nodes);
	int rc = 0;
	if (!q->groups_in || !q->order || !keys || !nodes)
		rc = tp_seterr(q->res->errmsg, TP_ENOMEM, "out of memory setting up the groups");
	for (unsigned g = 0; !rc && g < r->groups; g++) {
		uint32_t dom = group_domain(q, g);
		if (dom != TP_NONE && dom < q->ndom)
			q->groups_in[dom]++;
		else if (dom == TP_NONE)
			rc = check_not_partial(q, g);
	}
	size_t sp = 0;
	if (!rc && (rc = tp_cluster_savepoint(q->c, &sp)))
		tp_seterr(q->res->errmsg, rc, "%s", tp_cluster_errmsg(q->c));
	bool open = !rc;
	for (unsigned g = 0; !rc && g < r->groups; g++)
		if (group_domain(q, g) == TP_NONE)
			rc = place_group(q, g, keys, nodes);
	if (open) {
		if (rc)
			tp_cluster_rollback(q->c, sp);
		else
			tp_cluster_savepoint_discard(q->c, sp);
	}
	if (!rc)
		pair_instances(q, 0);
	tp_free(a, q->groups_in);
	tp_free(a, q->order);
	tp_free(a, keys);
	tp_free(a, (void *)nodes);
	return rc;
}

static void result_clear(tp_pd_result *res)
{
	for (size_t i = 0; i < res->n; i++) {
		tp_free(&res->a, (void *)res->inst[i].job);
		tp_free(&res->a, (void *)res->inst[i].devices);
	}
	res->n = 0;
}

/* "auto" locality: each missing group keeps to the candidate that its domain's fabrics give
 * (place_group_auto), all groups or none (pd_run's savepoint). The result's locality is the
 * groups' level, or "mixed" when they differ; its hand-off the largest of theirs; with no
 * group to place, the cluster's first candidate. */
static int pd_auto(tp_cluster *c, tp_pd_request *r, tp_pd_result *res)
{
	const tp_topology *t = tp_cluster_topology(c);
	struct pd q = {.c = c, .t = t, .r = r, .res = res, .aut = true};
	q.dlen = (size_t)snprintf(res->decision, sizeof res->decision, "auto:");
	int rc = pd_run(&q);
	if (rc) {
		result_clear(res);
		return rc;
	}
	if (q.placed_level == -2) {
		struct tp_pd_handoff cand[TP_PD_MAX_CANDIDATES];
		tp_pd_handoff_scope(t, r, -1, TP_NONE, cand);
		q.placed_level = cand[0].level;
		q.worst_us = cand[0].us;
	}
	res->locality = q.mixed ? mixed_locality
	                : q.placed_level < 0 ? NULL
	                                     : tp_topology_level_name(t, (unsigned)q.placed_level);
	res->handoff_us = q.worst_us;
	return 0;
}

/* A fixed locality's hand-off: the largest over the groups placed of their locality domain's
 * fabric (a mixed fleet's domains differ); the level's when the call placed none. */
static double placed_handoff(const tp_topology *t, const tp_pd_request *r,
                             const tp_pd_result *res, int level)
{
	double worst = -1.0;
	for (size_t i = 0; level >= 0 && i < res->n; i++) {
		const tp_pd_instance *x = &res->inst[i];
		if (!x->prefill || x->index != 0 || x->ndevices == 0)
			continue;
		uint32_t node = tp_topology_device_node(t, x->devices[0]);
		double us = tp_pd_handoff_in(t, r, level, tp_topology_node_domain(t, node,
		                                                                  (unsigned)level));
		worst = us > worst ? us : worst;
	}
	return worst >= 0.0 ? worst : tp_pd_handoff_us(t, r, level);
}

int tp_pd_place(tp_cluster *c, const tp_pd_request *r, tp_pd_result **out)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	tp_allocator a = c ? c->alloc : tp_alloc_resolve(NULL);
	tp_pd_result *res = tp_calloc(&a, 1, sizeof *res);
	if (!res)
		return TP_ENOMEM;
	res->a = a;
	*out = res;
	if (!c || !r)
		return tp_seterr(res->errmsg, TP_EINVAL, "%s is NULL", !c ? "the cluster" :
		                 "the request");
	const tp_topology *t = tp_cluster_topology(c);
	tp_pd_request req;
	int rc = read_request(res->errmsg, r, &req);
	if (!rc)
		rc = check_request(res->errmsg, t, &req);
	if (rc)
		return rc;
	if (req.locality && strcmp(req.locality, TP_PD_LOCALITY_AUTO) == 0)
		return pd_auto(c, &req, res);
	int level = req.locality ? tp_topology_level_by_name(t, req.locality) : -1;
	struct pd q = {.c = c, .t = t, .r = &req, .res = res};
	rc = pd_run(&q);
	if (rc) {
		result_clear(res);
		return rc;
	}
	res->locality = level < 0 ? NULL : tp_topology_level_name(t, (unsigned)level);
	res->handoff_us = placed_handoff(t, &req, res, level);
	return 0;
}

int tp_pd_release_failed(tp_cluster *c, const char *service, unsigned groups,
                         unsigned *released)
{
	if (!c || !service)
		return c ? tp_seterr(c->errmsg, TP_EINVAL, "tp_pd_release_failed: service is NULL")
		         : TP_EINVAL;
	unsigned n = 0;
	size_t sp;
	int rc = tp_cluster_savepoint(c, &sp);
	for (unsigned g = 0; !rc && g < groups; g++) {
		bool hit = false;
		for (int side = 1; side >= 0 && !hit; side--)
			for (unsigned i = 0;; i++) {
				char name[TP_MAX_NAME + 1];
				job_name(name, sizeof name, service, g, side ? 'p' : 'd', i);
				const uint32_t *devs;
				size_t nd;
				if (tp_cluster_job_devices(c, name, &devs, &nd))
					break;
				for (size_t k = 0; k < nd && !hit; k++)
					hit = tp_cluster_device_down(c, devs[k]) > 0;
				if (hit)
					break;
			}
		if (!hit)
			continue;
		for (int side = 1; side >= 0 && !rc; side--)
			for (unsigned i = 0; !rc; i++) {
				char name[TP_MAX_NAME + 1];
				job_name(name, sizeof name, service, g, side ? 'p' : 'd', i);
				const uint32_t *devs;
				size_t nd;
				if (tp_cluster_job_devices(c, name, &devs, &nd))
					break;
				rc = tp_cluster_release(c, name);
			}
		n++;
	}
	if (rc) {
		tp_cluster_rollback(c, sp);
		return rc;
	}
	tp_cluster_savepoint_discard(c, sp);
	if (released)
		*released = n;
	return 0;
}

size_t tp_pd_result_count(const tp_pd_result *res)
{
	return res ? res->n : 0;
}

const tp_pd_instance *tp_pd_result_get(const tp_pd_result *res, size_t i)
{
	return res && i < res->n ? &res->inst[i] : NULL;
}

const char *tp_pd_result_locality(const tp_pd_result *res, double *handoff_us)
{
	if (handoff_us)
		*handoff_us = res ? res->handoff_us : 0.0;
	return res ? res->locality : NULL;
}

const char *tp_pd_result_decision(const tp_pd_result *res)
{
	return res ? res->decision : "";
}

const char *tp_pd_result_errmsg(const tp_pd_result *res)
{
	return res ? res->errmsg : "";
}

void tp_pd_result_destroy(tp_pd_result *res)
{
	if (!res)
		return;
	result_clear(res);
	tp_free(&res->a, res->inst);
	tp_free(&res->a, res);
}

int tp_pd_request_init(tp_pd_request *r, unsigned version)
{
	static const tp_pd_request init = TP_PD_REQUEST_INIT;
	size_t size = version == TP_PD_REQUEST_VERSION ? sizeof init
	              : version == 1                   ? offsetof(tp_pd_request, kv_token_bytes)
	                                               : 0;
	return tp_options_init(r, size, &init, version);
}
