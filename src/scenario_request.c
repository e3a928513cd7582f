/* SPDX-License-Identifier: MIT */
/*
 * A scenario's `request` (the top-level one, or a running job's own), `policy` and `replace`.
 * A request is checked field by field in the CLI's order, and where two fields contradict each
 * other the one that is wrong relative to the other is named (request.count when it is not a
 * multiple of the group size, the inner slice's size). The tp_request points into the JSON
 * tree and into arrays owned by struct sc_request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"

static const char *const request_keys[] = {
	"id", "class", "priority", "tenant", "count", "group", "required", "preferred", "slices",
	"balanced", "max_per_domain", "spread", "colocate", "exclusive", "select",
	"x_gpu_nic_pairs", "x_service", "x_comm", "x_box", "x_expected_end_s"};
static const char *const group_keys[] = {"size", "level"};
static const char *const slice_keys[] = {"level", "size"};
static const char *const cap_keys[] = {"level", "devices", "groups"};
static const char *const spread_keys[] = {"level", "min_domains"};
static const char *const colocate_keys[] = {"job", "level"};
static const char *const select_keys[] = {"model", "min_perf", "min_memory_gb", "nodes"};
static const char *const comm_keys[] = {"tp",       "pp",         "dp",       "ep",
                                        "compute_us", "tp_bytes", "tp_msgs",  "dp_bytes",
                                        "dp_overlap", "pp_bytes", "pp_msgs",  "ep_bytes",
                                        "ep_msgs",    "min_efficiency", "fabric_fit"};
static const char *const policy_keys[] = {"migrate", "preempt", "allow_interactive",
                                          "max_moves", "max_cost_s", "min_priority_gap"};
static const char *const replace_keys[] = {"job", "failed"};

/* The level index of a level name, -1 for a failure-domain kind (when fd_ok), or false after
 * the message. */
static bool read_level(struct scen *s, const json_t *v, const char *p, bool fd_ok,
                       const char **name, int *index)
{
	char b[SC_SHOW_LEN], list[(TP_MAX_LEVELS + SC_COUNT(s->fd_kinds)) * (TP_MAX_NAME + 2)];
	if (json_is_string(v)) {
		const char *str = json_string_value(v);
		for (unsigned l = 0; l < s->nlevels; l++)
			if (!strcmp(str, s->levels[l])) {
				*name = s->levels[l];
				*index = (int)l;
				return true;
			}
		for (unsigned k = 0; fd_ok && k < s->nfd_kinds; k++)
			if (!strcmp(str, s->fd_kinds[k])) {
				*name = s->fd_kinds[k];
				*index = -1;
				return true;
			}
	}
	list[0] = '\0';
	for (unsigned l = 0; l < s->nlevels + (fd_ok ? s->nfd_kinds : 0); l++) {
		size_t o = strlen(list);
		snprintf(list + o, sizeof list - o, "%s%s", l ? ", " : "",
		         l < s->nlevels ? s->levels[l] : s->fd_kinds[l - s->nlevels]);
	}
	return sc_fail(s, p, "unknown level %s (one of %s)", sc_show(s, v, b), list);
}

/* Every key of an object that must be there, in the order given. */
static bool require(struct scen *s, const json_t *obj, const char *p, const char *const *keys,
                    size_t n)
{
	char q[SC_PATH_LEN];
	for (size_t i = 0; i < n; i++)
		if (!json_object_get(obj, keys[i]))
			return sc_fail(s, sc_join(q, p, keys[i]), "required");
	return true;
}

static bool read_u32(struct scen *s, const json_t *v, const char *p, uint32_t *out)
{
	long long x;
	if (!sc_check_int(s, v, p, 1, true, UINT32_MAX, true, "a positive integer", &x))
		return false;
	*out = (uint32_t)x;
	return true;
}

static bool read_who(struct scen *s, const json_t *req, const char *p, const struct sc_job *job,
                     tp_request *r)
{
	char q[SC_PATH_LEN];
	const json_t *v;
	long long x;
	if (job) {
		r->job_class = job->opts.job_class;
		r->priority = job->opts.priority;
	}
	if ((v = json_object_get(req, "id"))) {
		if (!sc_check_name(s, v, sc_join(q, p, "id"), "a job id", true))
			return false;
		r->id = json_string_value(v);
	}
	if ((v = json_object_get(req, "class")) &&
	    !sc_read_class(s, v, sc_join(q, p, "class"), &r->job_class))
		return false;
	if ((v = json_object_get(req, "priority"))) {
		if (!sc_check_int(s, v, sc_join(q, p, "priority"), INT32_MIN, true, INT32_MAX, true,
		                  "an integer", &x))
			return false;
		r->priority = (int)x;
	}
	if ((v = json_object_get(req, "tenant"))) {
		if (!sc_check_name(s, v, sc_join(q, p, "tenant"), "a tenant", true))
			return false;
		r->tenant = json_string_value(v);
	}
	if ((v = json_object_get(req, "x_service"))) { /* extension: the replica's service */
		if (!sc_check_name(s, v, sc_join(q, p, "x_service"), "a service", false))
			return false;
		r->service = json_string_value(v);
	}
	/* extension: when the job is expected to end (tp_request.expected_end_s) */
	if ((v = json_object_get(req, "x_expected_end_s")) &&
	    !sc_check_num(s, v, sc_join(q, p, "x_expected_end_s"), false, true, &r->expected_end_s))
		return false;
	if (job) { /* a job's shape is the job's: its id and tenant win */
		r->id = job->id;
		r->tenant = job->opts.tenant;
	}
	return true;
}

/* count and group; *glevel is the group's level index. */
static bool read_count_group(struct scen *s, const json_t *req, const char *p,
                             const struct sc_job *job, tp_request *r, int *glevel)
{
	char q[SC_PATH_LEN], gp[SC_PATH_LEN];
	const json_t *v = json_object_get(req, "count");
	if (v) {
		long long x;
		if (!sc_check_int(s, v, sc_join(q, p, "count"), 1, true, INT32_MAX, true,
		                  "a positive integer", &x))
			return false;
		r->count = (uint32_t)x;
	} else if (job) {
		r->count = (uint32_t)job->ndevices; /* a running job's shape defaults to what it holds */
	} else {
		return sc_fail(s, sc_join(q, p, "count"), "required (the number of devices wanted)");
	}
	uint32_t gsize = 1;
	*glevel = (int)s->nlevels - 1;
	if ((v = json_object_get(req, "group"))) {
		sc_join(gp, p, "group");
		if (!sc_check_object(s, v, gp, group_keys, SC_COUNT(group_keys)))
			return false;
		const json_t *x;
		long long n;
		if ((x = json_object_get(v, "size"))) {
			if (!sc_check_int(s, x, sc_join(q, gp, "size"), 1, true, INT32_MAX, true,
			                  "a positive integer", &n))
				return false;
			gsize = (uint32_t)n;
		}
		r->group_level = s->levels[s->nlevels - 1];
		if ((x = json_object_get(v, "level")) &&
		    !read_level(s, x, sc_join(q, gp, "level"), false, &r->group_level, glevel))
			return false;
	}
	r->group_size = gsize;
	if (r->count % gsize)
		return sc_fail(s, sc_join(q, p, "count"), "%u is not a multiple of %s.group.size %u",
		               r->count, p, gsize);
	return true;
}

static bool read_required_preferred(struct scen *s, const json_t *req, const char *p,
                                    tp_request *r, int *lreq)
{
	char q[SC_PATH_LEN], b[SC_SHOW_LEN], c[SC_SHOW_LEN];
	const json_t *v;
	int lpref = -1;
	*lreq = -1;
	if ((v = json_object_get(req, "required")) &&
	    !read_level(s, v, sc_join(q, p, "required"), false, &r->required, lreq))
		return false;
	if ((v = json_object_get(req, "preferred")) &&
	    !read_level(s, v, sc_join(q, p, "preferred"), false, &r->preferred, &lpref))
		return false;
	if (r->required && r->preferred && lpref <= *lreq)
		return sc_fail(s, sc_join(q, p, "preferred"), "%s must be below the required level %s",
		               sc_show_str(s, r->preferred, b), sc_show_str(s, r->required, c));
	return true;
}

/* One slice layer, checked against the required level, the group and the layer above. */
static bool read_slice(struct scen *s, const json_t *sv, const char *sp, const tp_request *r,
                       int lreq, int glevel, const tp_slice *prev, int lprev, tp_slice *out,
                       int *lout)
{
	char q[SC_PATH_LEN], b[SC_SHOW_LEN], c[SC_SHOW_LEN];
	long long size;
	if (!sc_check_object(s, sv, sp, slice_keys, SC_COUNT(slice_keys)) ||
	    !require(s, sv, sp, slice_keys, SC_COUNT(slice_keys)) ||
	    !read_level(s, json_object_get(sv, "level"), sc_join(q, sp, "level"), false, &out->level,
	                lout) ||
	    !sc_check_int(s, json_object_get(sv, "size"), sc_join(q, sp, "size"), 1, true,
	                  INT32_MAX, true, "a positive integer", &size))
		return false;
	out->size = (uint32_t)size;
	sc_join(q, sp, "level");
	if (r->required && *lout < lreq)
		return sc_fail(s, q, "%s is above the required level %s", sc_show_str(s, out->level, b),
		               sc_show_str(s, r->required, c));
	if (*lout > glevel)
		return sc_fail(s, q, "%s is below the group level %s", sc_show_str(s, out->level, b),
		               sc_show_str(s, s->levels[glevel], c));
	if (prev && *lout <= lprev)
		return sc_fail(s, q, "slice levels must go strictly downwards (%s after %s)",
		               sc_show_str(s, out->level, b), sc_show_str(s, prev->level, c));
	sc_join(q, sp, "size");
	if (r->count % out->size)
		return sc_fail(s, q, "%u does not divide count %u", out->size, r->count);
	if (out->size % r->group_size)
		return sc_fail(s, q, "%u is not a multiple of the group size %u", out->size,
		               r->group_size);
	if (prev && prev->size % out->size)
		return sc_fail(s, q, "%u does not divide the outer slice's size %u", out->size,
		               prev->size);
	return true;
}

static bool read_slices(struct scen *s, const json_t *v, const char *p, struct sc_request *o,
                        int lreq, int glevel)
{
	char sp[SC_PATH_LEN];
	sc_join(sp, p, "slices");
	if (!sc_check_list(s, v, sp, true))
		return false;
	size_t n = json_array_size(v);
	if (!(o->slices = sc_calloc(s, n, sizeof *o->slices)))
		return sc_nomem(s, sp);
	int lprev = -1;
	for (size_t i = 0; i < n; i++) {
		char ip[SC_PATH_LEN];
		int l;
		if (!read_slice(s, json_array_get(v, i), sc_item(ip, sp, i), &o->r, lreq, glevel,
		                i ? &o->slices[i - 1] : NULL, lprev, &o->slices[i], &l))
			return false;
		lprev = l;
	}
	o->r.slices = o->slices;
	o->r.nslices = n;
	return true;
}

static bool read_caps(struct scen *s, const json_t *v, const char *p, struct sc_request *o)
{
	char cp[SC_PATH_LEN];
	sc_join(cp, p, "max_per_domain");
	if (!sc_check_list(s, v, cp, false))
		return false;
	size_t n = json_array_size(v);
	if (!(o->caps = sc_calloc(s, n, sizeof *o->caps)))
		return sc_nomem(s, cp);
	for (size_t i = 0; i < n; i++) {
		char mp[SC_PATH_LEN], q[SC_PATH_LEN];
		const json_t *m = json_array_get(v, i);
		int l;
		sc_item(mp, cp, i);
		if (!sc_check_object(s, m, mp, cap_keys, SC_COUNT(cap_keys)) ||
		    !require(s, m, mp, cap_keys, 1) ||
		    !read_level(s, json_object_get(m, "level"), sc_join(q, mp, "level"), true,
		                &o->caps[i].level, &l))
			return false;
		const json_t *dv = json_object_get(m, "devices"), *gv = json_object_get(m, "groups");
		if (!dv == !gv)
			return sc_fail(s, mp, "needs exactly one of devices, groups");
		if (dv && !read_u32(s, dv, sc_join(q, mp, "devices"), &o->caps[i].devices))
			return false;
		if (gv && !read_u32(s, gv, sc_join(q, mp, "groups"), &o->caps[i].groups))
			return false;
	}
	o->r.caps = o->caps;
	o->r.ncaps = n;
	return true;
}

static bool read_spread(struct scen *s, const json_t *v, const char *p, tp_request *r)
{
	char sp[SC_PATH_LEN], q[SC_PATH_LEN];
	int l;
	sc_join(sp, p, "spread");
	return sc_check_object(s, v, sp, spread_keys, SC_COUNT(spread_keys)) &&
	       require(s, v, sp, spread_keys, SC_COUNT(spread_keys)) &&
	       read_level(s, json_object_get(v, "level"), sc_join(q, sp, "level"), true,
	                  &r->spread_level, &l) &&
	       read_u32(s, json_object_get(v, "min_domains"), sc_join(q, sp, "min_domains"),
	                &r->spread_min_domains);
}

static bool read_colocate(struct scen *s, const json_t *v, const char *p,
                          const struct sc_job *job, tp_request *r)
{
	char cp[SC_PATH_LEN], q[SC_PATH_LEN], b[SC_SHOW_LEN];
	int l;
	sc_join(cp, p, "colocate");
	if (!sc_check_object(s, v, cp, colocate_keys, SC_COUNT(colocate_keys)) ||
	    !require(s, v, cp, colocate_keys, SC_COUNT(colocate_keys)))
		return false;
	const json_t *jv = json_object_get(v, "job");
	if (!sc_check_name(s, jv, sc_join(q, cp, "job"), "a job id", true))
		return false;
	const char *jid = json_string_value(jv);
	if (!job && !sc_job(s, jid))
		return sc_fail(s, q, "no running job %s", sc_show(s, jv, b));
	if (job && !strcmp(jid, job->id))
		return sc_fail(s, q, "a job cannot be colocated with itself");
	r->colocate_job = jid;
	return read_level(s, json_object_get(v, "level"), sc_join(q, cp, "level"), false,
	                  &r->colocate_level, &l);
}

static bool read_select_nodes(struct scen *s, const json_t *v, const char *sp,
                              struct sc_request *o)
{
	char np[SC_PATH_LEN], b[SC_SHOW_LEN];
	sc_join(np, sp, "nodes");
	if (!sc_check_list(s, v, np, false))
		return false;
	size_t n = json_array_size(v), m = 0;
	if (!n)
		return sc_fail(s, np, "an empty list allows no node (leave it out to allow all)");
	if (!(o->nodes = sc_calloc(s, n, sizeof *o->nodes)))
		return sc_nomem(s, np);
	for (size_t i = 0; i < n; i++) {
		char ip[SC_PATH_LEN];
		const json_t *x = json_array_get(v, i);
		uint32_t node;
		sc_item(ip, np, i);
		if (!json_is_string(x))
			return sc_fail(s, ip, "must be a node name, not %s", sc_show(s, x, b));
		if (tp_topology_node_by_name(s->t, json_string_value(x), &node) < 0)
			return sc_fail(s, ip, "unknown node %s", sc_show(s, x, b));
		size_t k = 0; /* a name given twice counts once (the list is short) */
		while (k < m && strcmp(o->nodes[k], json_string_value(x)))
			k++;
		if (k == m)
			o->nodes[m++] = json_string_value(x);
	}
	o->r.select_nodes = o->nodes;
	o->r.nselect_nodes = m;
	return true;
}

static bool read_select(struct scen *s, const json_t *v, const char *p, struct sc_request *o)
{
	char sp[SC_PATH_LEN], q[SC_PATH_LEN];
	sc_join(sp, p, "select");
	if (!sc_check_object(s, v, sp, select_keys, SC_COUNT(select_keys)))
		return false;
	const json_t *x;
	if ((x = json_object_get(v, "model"))) {
		if (!sc_check_name(s, x, sc_join(q, sp, "model"), "a model", true))
			return false;
		o->r.select_model = json_string_value(x);
	}
	if ((x = json_object_get(v, "min_perf")) &&
	    !sc_check_num(s, x, sc_join(q, sp, "min_perf"), false, true, &o->r.select_min_perf))
		return false;
	if ((x = json_object_get(v, "min_memory_gb")) &&
	    !sc_check_num(s, x, sc_join(q, sp, "min_memory_gb"), false, true,
	                  &o->r.select_min_memory_gb))
		return false;
	if ((x = json_object_get(v, "nodes")) && !read_select_nodes(s, x, sp, o))
		return false;
	return true;
}

static bool read_shape(struct scen *s, const json_t *req, const char *p,
                       struct sc_request *o, int lreq, int glevel)
{
	char q[SC_PATH_LEN];
	const json_t *v;
	if ((v = json_object_get(req, "slices")) && !read_slices(s, v, p, o, lreq, glevel))
		return false;
	if ((v = json_object_get(req, "balanced")) &&
	    !sc_check_bool(s, v, sc_join(q, p, "balanced"), &o->r.balanced))
		return false;
	if ((v = json_object_get(req, "x_gpu_nic_pairs")) &&
	    !sc_check_bool(s, v, sc_join(q, p, "x_gpu_nic_pairs"), &o->r.gpu_nic_pairs))
		return false;
	if ((v = json_object_get(req, "max_per_domain")) && !read_caps(s, v, p, o))
		return false;
	if ((v = json_object_get(req, "spread")) && !read_spread(s, v, p, &o->r))
		return false;
	return true;
}

/* ---- x_comm: how the job communicates (tp_request.comm) ----------------------------------- */

/* An unsigned field of x_comm (at least lo), or false after the message. */
static bool comm_uint(struct scen *s, const json_t *obj, const char *cp, const char *key,
                      long long lo, unsigned *out)
{
	char q[SC_PATH_LEN];
	const json_t *v = json_object_get(obj, key);
	long long x;
	if (!v)
		return true;
	if (!sc_check_int(s, v, sc_join(q, cp, key), lo, true, UINT32_MAX, true,
	                  lo ? "a positive integer" : "an integer >= 0", &x))
		return false;
	*out = (unsigned)x;
	return true;
}

/* A figure of x_comm (>= 0), or false after the message. */
static bool comm_num(struct scen *s, const json_t *obj, const char *cp, const char *key,
                     double *out)
{
	char q[SC_PATH_LEN];
	const json_t *v = json_object_get(obj, key);
	return !v || sc_check_num(s, v, sc_join(q, cp, key), false, true, out);
}

/* The degrees: tp and pp default to 1, dp to what the count leaves; they multiply to it. */
static bool comm_degrees(struct scen *s, const json_t *v, const char *cp, uint32_t count,
                         tp_step_model *m)
{
	char q[SC_PATH_LEN];
	if (!comm_uint(s, v, cp, "tp", 1, &m->tp) || !comm_uint(s, v, cp, "pp", 1, &m->pp) ||
	    !comm_uint(s, v, cp, "dp", 1, &m->dp) || !comm_uint(s, v, cp, "ep", 0, &m->ep))
		return false;
	if (count % m->tp)
		return sc_fail(s, sc_join(q, cp, "tp"), "%u does not divide the request's count %u",
		               m->tp, count);
	bool pp_divides = count / m->tp % m->pp == 0;
	if (!json_object_get(v, "dp")) {
		if (!pp_divides)
			return sc_fail(s, sc_join(q, cp, "pp"),
			               "tp %u x pp %u does not divide the request's count %u", m->tp,
			               m->pp, count);
		m->dp = count / m->tp / m->pp;
	} else if (!pp_divides || count / m->tp / m->pp != m->dp) {
		return sc_fail(s, sc_join(q, cp, "dp"), "tp %u x pp %u x dp %u is not the request's count %u",
		               m->tp, m->pp, m->dp, count);
	}
	if (m->ep > 1 && m->dp % m->ep)
		return sc_fail(s, sc_join(q, cp, "ep"), "%u does not divide dp %u", m->ep, m->dp);
	return true;
}

static bool read_comm(struct scen *s, const json_t *v, const char *p, struct sc_request *o)
{
	char cp[SC_PATH_LEN], q[SC_PATH_LEN];
	sc_join(cp, p, "x_comm");
	if (!sc_check_object(s, v, cp, comm_keys, SC_COUNT(comm_keys)))
		return false;
	tp_step_model m = TP_STEP_MODEL_INIT;
	if (!comm_degrees(s, v, cp, o->r.count, &m) ||
	    !comm_num(s, v, cp, "compute_us", &m.compute_us) ||
	    !comm_num(s, v, cp, "tp_bytes", &m.tp_bytes) ||
	    !comm_uint(s, v, cp, "tp_msgs", 0, &m.tp_msgs) ||
	    !comm_num(s, v, cp, "dp_bytes", &m.dp_bytes) ||
	    !comm_num(s, v, cp, "dp_overlap", &m.dp_overlap) ||
	    !comm_num(s, v, cp, "pp_bytes", &m.pp_bytes) ||
	    !comm_uint(s, v, cp, "pp_msgs", 0, &m.pp_msgs) ||
	    !comm_num(s, v, cp, "ep_bytes", &m.ep_bytes) ||
	    !comm_uint(s, v, cp, "ep_msgs", 0, &m.ep_msgs) ||
	    !comm_num(s, v, cp, "min_efficiency", &m.min_efficiency) ||
	    !comm_num(s, v, cp, "fabric_fit", &m.fabric_fit))
		return false;
	if (m.dp_overlap > 1.0)
		return sc_fail(s, sc_join(q, cp, "dp_overlap"), "%g is above 1 (the share of the "
		               "all-reduce hidden behind compute)", m.dp_overlap);
	/* the floor tp_place() keeps to (tp_step_model.min_efficiency): an efficiency, at most 1 */
	if (m.min_efficiency > 1.0)
		return sc_fail(s, sc_join(q, cp, "min_efficiency"),
		               "%g is above 1 (the lowest placement efficiency the job accepts, "
		               "from 0 to 1)", m.min_efficiency);
	/* best fit over fabric classes (tp_step_model.fabric_fit): a share, at most 1 */
	if (m.fabric_fit > 1.0)
		return sc_fail(s, sc_join(q, cp, "fabric_fit"),
		               "%g is above 1 (fabric fit: the share of its best fabric class's "
		               "efficiency a slower class must give the job, from 0 to 1)",
		               m.fabric_fit);
	if (!(o->comm = sc_alloc(s, sizeof *o->comm)))
		return sc_nomem(s, cp);
	*o->comm = m;
	o->r.comm = o->comm;
	return true;
}

bool sc_read_request(struct scen *s, const json_t *req, const char *p, const struct sc_job *job,
                     struct sc_request *o)
{
	char q[SC_PATH_LEN];
	const json_t *v;
	int lreq, glevel, l;
	o->r = (tp_request)TP_REQUEST_INIT;
	if (!sc_check_object(s, req, p, request_keys, SC_COUNT(request_keys)) ||
	    !read_who(s, req, p, job, &o->r) || !read_count_group(s, req, p, job, &o->r, &glevel) ||
	    !read_required_preferred(s, req, p, &o->r, &lreq) ||
	    !read_shape(s, req, p, o, lreq, glevel))
		return false;
	if ((v = json_object_get(req, "colocate")) && !read_colocate(s, v, p, job, &o->r))
		return false;
	if ((v = json_object_get(req, "exclusive")) &&
	    !read_level(s, v, sc_join(q, p, "exclusive"), false, &o->r.exclusive, &l))
		return false;
	if ((v = json_object_get(req, "select")) && !read_select(s, v, p, o))
		return false;
	if ((v = json_object_get(req, "x_comm")) && !read_comm(s, v, p, o))
		return false;
	if ((v = json_object_get(req, "x_box")) && !sc_read_box(s, v, p, &o->r))
		return false;
	return true;
}

void sc_request_free(struct scen *s, struct sc_request *r)
{
	if (!r)
		return;
	sc_free(s, r->slices);
	sc_free(s, r->caps);
	sc_free(s, (void *)r->nodes);
	sc_free(s, r->comm);
}

/* ---- policy, replace --------------------------------------------------------------------- */

bool sc_read_policy(struct scen *s, const json_t *pol)
{
	const char *p = "policy";
	char q[SC_PATH_LEN], b[SC_SHOW_LEN];
	if (!sc_check_object(s, pol, p, policy_keys, SC_COUNT(policy_keys)))
		return false;
	int *flags[] = {&s->policy.migrate, &s->policy.preempt, &s->policy.allow_interactive};
	const json_t *v;
	for (unsigned k = 0; k < 3; k++)
		if ((v = json_object_get(pol, policy_keys[k])) &&
		    !sc_check_bool(s, v, sc_join(q, p, policy_keys[k]), flags[k]))
			return false;
	long long x;
	if ((v = json_object_get(pol, "max_moves"))) {
		if (!sc_check_int(s, v, sc_join(q, p, "max_moves"), 0, true, UINT32_MAX, true,
		                  "a non-negative integer", &x))
			return false;
		s->policy.max_moves = (uint32_t)x;
	}
	if ((v = json_object_get(pol, "max_cost_s")) &&
	    !sc_check_num(s, v, sc_join(q, p, "max_cost_s"), false, true, &s->policy.max_cost_s))
		return false;
	double gap;
	if ((v = json_object_get(pol, "min_priority_gap"))) {
		if (!sc_check_num(s, v, sc_join(q, p, "min_priority_gap"), false, true, &gap))
			return false;
		if (gap > INT32_MAX) /* the field is an int; a gap beyond it can never be met anyway */
			return sc_fail(s, q, "%s is above the limit %d", sc_show(s, v, b), INT32_MAX);
		int g = (int)gap;
		s->policy.min_priority_gap = g < gap ? g + 1 : g; /* a fractional gap rounds up */
	}
	return true;
}

bool sc_read_replace(struct scen *s, const json_t *rep)
{
	const char *p = "replace";
	char q[SC_PATH_LEN], b[SC_SHOW_LEN];
	if (!sc_check_object(s, rep, p, replace_keys, SC_COUNT(replace_keys)))
		return false;
	const json_t *v = json_object_get(rep, "job");
	if (!v)
		return sc_fail(s, "replace.job", "required");
	if (!sc_check_name(s, v, "replace.job", "a job id", true))
		return false;
	if (!sc_job(s, json_string_value(v)))
		return sc_fail(s, "replace.job", "no running job %s", sc_show(s, v, b));
	s->replace_job = json_string_value(v);
	const json_t *f = json_object_get(rep, "failed");
	if (!f)
		return sc_fail(s, "replace.failed", "required (the failed nodes or devices)");
	if (!sc_check_list(s, f, "replace.failed", true))
		return false;
	struct id_list l = {0};
	size_t i;
	json_t *r;
	bool ok = true;
	json_array_foreach(f, i, r) {
		uint32_t node, first;
		int dev;
		if (!(ok = sc_ref(s, r, sc_item(q, "replace.failed", i), "node or device", &node, &dev)))
			break;
		uint32_t n = sc_node_devices(s->t, node, &first);
		for (uint32_t k = 0; ok && k < n; k++) {
			bool seen = false; /* a device named twice is given once */
			for (size_t j = 0; j < l.n && !seen; j++)
				seen = l.ids[j] == first + k;
			if ((dev < 0 || (uint32_t)dev == k) && !seen) {
				if (l.n == l.cap) {
					size_t cap = l.cap ? 2 * l.cap : 16;
					uint32_t *ids = sc_alloc(s, cap * sizeof *ids);
					if (!(ok = ids != NULL)) {
						sc_nomem(s, "replace.failed");
						break;
					}
					if (l.n)
						memcpy(ids, l.ids, l.n * sizeof *ids);
					sc_free(s, l.ids);
					l.ids = ids, l.cap = cap;
				}
				l.ids[l.n++] = first + k;
			}
		}
	}
	if (!ok) {
		sc_free(s, l.ids);
		return false;
	}
	s->failed = l.ids;
	s->nfailed = l.n;
	return true;
}
