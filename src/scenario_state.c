/* SPDX-License-Identifier: MIT */
/*
 * The `state` section of a scenario: running jobs, down and cordoned devices. Read in the
 * CLI's order (down, cordoned, then each job, then the jobs' devices: explicit lists first,
 * then counts take the lowest indices nobody holds, in job order; then each job's own request),
 * then built on a cluster: the jobs, then the down devices, then the cordoned ones.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"

static const char *const state_keys[] = {"jobs", "down", "cordoned", "x_service_caps",
                                         "x_partitions"};
static const char *const caps_keys[] = {"level", "max_per_domain", "max_percent", "fd_kind",
                                        "fd_max_per_domain", "fd_max_percent"};
static const char *const part_keys[] = {"level", "channels"};
static const char *const job_keys[] = {"id", "class", "priority", "tenant", "preemptible",
                                       "migratable", "checkpoint_s", "devices", "request"};
static const char *const classes[] = {"training", "inference", "interactive"};

static bool push_id(struct scen *s, struct id_list *l, uint32_t id, const char *p)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		uint32_t *ids = sc_alloc(s, cap * sizeof *ids);
		if (!ids)
			return sc_nomem(s, p);
		if (l->n)
			memcpy(ids, l->ids, l->n * sizeof *ids);
		sc_free(s, l->ids);
		l->ids = ids;
		l->cap = cap;
	}
	l->ids[l->n++] = id;
	return true;
}

/* A list of node or device names into device ids (a node stands for all its devices). */
static bool read_refs(struct scen *s, const json_t *v, const char *p, struct id_list *out)
{
	if (!sc_check_list(s, v, p, false))
		return false;
	size_t i;
	json_t *r;
	json_array_foreach(v, i, r) {
		char q[SC_PATH_LEN];
		uint32_t node, first;
		int dev;
		if (!sc_ref(s, r, sc_item(q, p, i), "node or device", &node, &dev))
			return false;
		uint32_t n = sc_node_devices(s->t, node, &first);
		for (uint32_t k = 0; k < n; k++)
			if ((dev < 0 || (uint32_t)dev == k) && !push_id(s, out, first + k, p))
				return false;
	}
	return true;
}

const struct sc_job *sc_job(const struct scen *s, const char *id)
{
	for (size_t i = 0; i < s->njobs; i++)
		if (!strcmp(s->jobs[i].id, id))
			return &s->jobs[i];
	return NULL;
}

bool sc_read_class(struct scen *s, const json_t *v, const char *p, tp_job_class *out)
{
	char b[SC_SHOW_LEN];
	for (unsigned k = 0; k < SC_COUNT(classes); k++)
		if (json_is_string(v) && !strcmp(json_string_value(v), classes[k])) {
			*out = (tp_job_class)k;
			return true;
		}
	return sc_fail(s, p, "unknown class %s (one of training, inference, interactive)",
	               sc_show(s, v, b));
}

/* One node's entry of a job's `devices`: a count, or a list of distinct indices. */
static bool check_job_node(struct scen *s, const char *node, const json_t *v, const char *dp)
{
	char b[SC_SHOW_LEN], q[SC_PATH_LEN];
	uint32_t id;
	if (tp_topology_node_by_name(s->t, node, &id) < 0)
		return sc_fail(s, dp, "unknown node %s", sc_show_str(s, node, b));
	uint32_t gpus = sc_node_devices(s->t, id, NULL);
	if (json_is_array(v)) {
		if (!json_array_size(v))
			return sc_fail(s, dp, "an empty list of devices");
		unsigned char seen[TP_MAX_NODE_DEVICES] = {0};
		size_t k;
		json_t *x;
		json_array_foreach(v, k, x) {
			sc_item(q, dp, k);
			if (!json_is_integer(x))
				return sc_fail(s, q, "must be a device index, not %s", sc_show(s, x, b));
			long long idx = json_integer_value(x);
			if (idx < 0 || idx >= gpus)
				return sc_fail(s, q, "device index %lld is out of range (node %s has %u "
				                     "devices)", idx, node, gpus);
			if (seen[idx])
				return sc_fail(s, q, "device index %lld is listed twice", idx);
			seen[idx] = 1;
		}
		return true;
	}
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 1 || json_integer_value(v) > gpus)
			return sc_fail(s, dp, "count %" JSON_INTEGER_FORMAT " is out of range (node %s has "
			                      "%u devices)", json_integer_value(v), node, gpus);
		return true;
	}
	return sc_fail(s, dp, "must be a device count or a list of device indices, not %s",
	               sc_show(s, v, b));
}

static bool read_job_devices(struct scen *s, const json_t *j, const char *jp)
{
	char q[SC_PATH_LEN], dp[SC_PATH_LEN];
	const json_t *devs = json_object_get(j, "devices");
	sc_join(q, jp, "devices");
	if (!devs)
		return sc_fail(s, q, "required (node name -> device count or list of indices)");
	if (!json_is_object(devs))
		return sc_fail(s, q, "must be an object (node name -> count or list of indices), not %s",
		               sc_kind(devs));
	if (!json_object_size(devs))
		return sc_fail(s, q, "must not be empty");
	const char *node;
	json_t *v;
	json_object_foreach((json_t *)devs, node, v)
		if (!check_job_node(s, node, v, sc_join(dp, q, node)))
			return false;
	return true;
}

/* The attributes of state.jobs[i] (its devices are resolved later). */
static bool read_job(struct scen *s, const json_t *j, size_t i, size_t dup_at, size_t dup_of)
{
	char jp[64], q[SC_PATH_LEN], b[SC_SHOW_LEN];
	snprintf(jp, sizeof jp, "state.jobs[%zu]", i);
	struct sc_job *job = &s->jobs[i];
	job->where = NULL;
	if (!sc_check_object(s, j, jp, job_keys, SC_COUNT(job_keys)))
		return false;
	const json_t *v = json_object_get(j, "id");
	if (!v)
		return sc_fail(s, sc_join(q, jp, "id"), "required");
	if (!sc_check_name(s, v, sc_join(q, jp, "id"), "a job id", true))
		return false;
	if (i == dup_at)
		return sc_fail(s, q, "duplicate job id %s (also state.jobs[%zu].id)", sc_show(s, v, b),
		               dup_of);
	job->id = json_string_value(v);
	job->doc = (json_t *)j;
	job->opts = (tp_job_options)TP_JOB_OPTIONS_INIT;
	job->opts.tenant = "default";
	long long pr;
	if ((v = json_object_get(j, "class")) &&
	    !sc_read_class(s, v, sc_join(q, jp, "class"), &job->opts.job_class))
		return false;
	if ((v = json_object_get(j, "priority"))) {
		if (!sc_check_int(s, v, sc_join(q, jp, "priority"), INT32_MIN, true, INT32_MAX, true,
		                  "an integer", &pr))
			return false;
		job->opts.priority = (int)pr;
	}
	if ((v = json_object_get(j, "tenant"))) {
		if (!sc_check_name(s, v, sc_join(q, jp, "tenant"), "a tenant", true))
			return false;
		job->opts.tenant = json_string_value(v);
	}
	if ((v = json_object_get(j, "preemptible")) &&
	    !sc_check_bool(s, v, sc_join(q, jp, "preemptible"), &job->opts.preemptible))
		return false;
	if ((v = json_object_get(j, "migratable")) &&
	    !sc_check_bool(s, v, sc_join(q, jp, "migratable"), &job->opts.migratable))
		return false;
	if ((v = json_object_get(j, "checkpoint_s")) &&
	    !sc_check_num(s, v, sc_join(q, jp, "checkpoint_s"), false, true,
	                  &job->opts.checkpoint_s))
		return false;
	return read_job_devices(s, j, jp);
}

static int by_id(const void *a, const void *b)
{
	const char *const *x = a, *const *y = b;
	int c = strcmp(x[0], y[0]);
	return c ? c : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The first job (in document order) whose id an earlier job has: *at and the earlier *of, or
 * *at = SIZE_MAX. Sorted, so that a fleet of jobs costs n log n. */
static bool find_duplicate(struct scen *s, const json_t *jobs, size_t *at, size_t *of)
{
	size_t n = json_array_size(jobs);
	*at = SIZE_MAX;
	const char **pairs = sc_calloc(s, 2 * n, sizeof *pairs);
	if (!pairs)
		return sc_nomem(s, "state.jobs");
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		const char *id = json_string_value(json_object_get(json_array_get(jobs, i), "id"));
		if (id) {
			pairs[2 * m] = id;
			pairs[2 * m + 1] = (const char *)(uintptr_t)(i + 1); /* document order */
			m++;
		}
	}
	qsort(pairs, m, 2 * sizeof *pairs, by_id);
	for (size_t k = 1; k < m; k++)
		if (!strcmp(pairs[2 * k], pairs[2 * k - 2])) {
			size_t i = (size_t)(uintptr_t)pairs[2 * k + 1] - 1;
			size_t first = k - 1;
			while (first > 0 && !strcmp(pairs[2 * first - 2], pairs[2 * k]))
				first--;
			if (i < *at)
				*at = i, *of = (size_t)(uintptr_t)pairs[2 * first + 1] - 1;
		}
	sc_free(s, pairs);
	return true;
}

/* The holders of a node's devices other than nobody, sorted and once each, for a message. */
static void holders(const struct scen *s, const uint32_t *held, uint32_t first, uint32_t n,
                    char *buf, size_t len)
{
	const char *names[TP_MAX_NODE_DEVICES];
	size_t m = 0;
	for (uint32_t k = 0; k < n; k++)
		if (held[first + k])
			names[m++] = s->jobs[held[first + k] - 1].id;
	for (size_t a = 1; a < m; a++) /* insertion sort: at most 256 names */
		for (size_t b = a; b > 0 && strcmp(names[b - 1], names[b]) > 0; b--) {
			const char *t = names[b];
			names[b] = names[b - 1], names[b - 1] = t;
		}
	buf[0] = '\0';
	for (size_t a = 0; a < m; a++) {
		if (a && !strcmp(names[a], names[a - 1]))
			continue;
		size_t o = strlen(buf);
		snprintf(buf + o, len - o, "%s%s", o ? ", " : "", names[a]);
	}
}

/* Pass 1 (lists) or 2 (counts) over every job's devices; held[d] is 1 + the holder's index. */
static bool take_devices(struct scen *s, uint32_t *held, int pass)
{
	for (size_t ji = 0; ji < s->njobs; ji++) {
		struct sc_job *job = &s->jobs[ji];
		const char *node;
		json_t *v;
		json_object_foreach(json_object_get(job->doc, "devices"), node, v) {
			char dp[SC_PATH_LEN], q[SC_PATH_LEN];
			uint32_t id, first;
			tp_topology_node_by_name(s->t, node, &id);
			uint32_t gpus = sc_node_devices(s->t, id, &first);
			sc_join(dp, sc_join(q, job->where, "devices"), node);
			if (pass == 1 && json_is_array(v)) {
				size_t k;
				json_t *x;
				json_array_foreach(v, k, x) {
					uint32_t d = first + (uint32_t)json_integer_value(x);
					if (held[d])
						return sc_fail(s, sc_item(q, dp, k), "device %s/%" JSON_INTEGER_FORMAT
						               " is already held by job %s", node, json_integer_value(x),
						               s->jobs[held[d] - 1].id);
					held[d] = (uint32_t)ji + 1;
				}
			} else if (pass == 2 && json_is_integer(v)) {
				uint32_t want = (uint32_t)json_integer_value(v), got = 0;
				for (uint32_t k = 0; k < gpus; k++)
					got += !held[first + k];
				if (got < want) {
					char who[TP_MAX_NODE_DEVICES * 8];
					holders(s, held, first, gpus, who, sizeof who);
					return sc_fail(s, dp, "%u devices wanted, only %u of node %s are not already "
					               "held (by %s)", want, got, node, who);
				}
				for (uint32_t k = 0, took = 0; k < gpus && took < want; k++)
					if (!held[first + k])
						held[first + k] = (uint32_t)ji + 1, took++;
			}
		}
	}
	return true;
}

/* Each job's devices in rank order: its nodes in document order, each node's in list order
 * (or lowest first for a count). */
static bool list_devices(struct scen *s, const uint32_t *held)
{
	for (size_t ji = 0; ji < s->njobs; ji++) {
		struct sc_job *job = &s->jobs[ji];
		const json_t *devs = json_object_get(job->doc, "devices");
		size_t n = 0;
		const char *node;
		json_t *v;
		json_object_foreach((json_t *)devs, node, v)
			n += json_is_array(v) ? json_array_size(v) : (size_t)json_integer_value(v);
		job->devices = sc_alloc(s, n * sizeof *job->devices);
		if (!job->devices)
			return sc_nomem(s, job->where);
		json_object_foreach((json_t *)devs, node, v) {
			uint32_t id, first;
			tp_topology_node_by_name(s->t, node, &id);
			uint32_t gpus = sc_node_devices(s->t, id, &first);
			if (json_is_array(v)) {
				size_t k;
				json_t *x;
				json_array_foreach(v, k, x)
					job->devices[job->ndevices++] = first + (uint32_t)json_integer_value(x);
			} else {
				for (uint32_t k = 0; k < gpus; k++)
					if (held[first + k] == ji + 1)
						job->devices[job->ndevices++] = first + k;
			}
		}
	}
	return true;
}

static bool resolve_jobs(struct scen *s)
{
	uint32_t *held = sc_calloc(s, tp_topology_device_count(s->t), sizeof *held);
	if (!held)
		return sc_nomem(s, "state.jobs");
	bool ok = take_devices(s, held, 1) && take_devices(s, held, 2) && list_devices(s, held);
	sc_free(s, held);
	return ok;
}

static bool read_jobs(struct scen *s, const json_t *jobs)
{
	if (!sc_check_list(s, jobs, "state.jobs", false))
		return false;
	size_t n = json_array_size(jobs), dup_at, dup_of = 0;
	s->jobs = sc_calloc(s, n, sizeof *s->jobs);
	if (!s->jobs || !find_duplicate(s, jobs, &dup_at, &dup_of))
		return s->jobs ? false : sc_nomem(s, "state.jobs");
	for (size_t i = 0; i < n; i++) {
		if (!read_job(s, json_array_get(jobs, i), i, dup_at, dup_of))
			return false;
		char where[64];
		int len = snprintf(where, sizeof where, "state.jobs[%zu]", i);
		char *w = sc_alloc(s, (size_t)len + 1);
		if (!w)
			return sc_nomem(s, where);
		memcpy(w, where, (size_t)len + 1);
		s->jobs[i].where = w;
		s->njobs = i + 1;
	}
	if (!resolve_jobs(s))
		return false;
	/* A job's own request is read once every job is known (its colocate may name another). */
	s->shapes = sc_calloc(s, n, sizeof *s->shapes);
	if (!s->shapes)
		return sc_nomem(s, "state.jobs");
	for (size_t i = 0; i < n; i++) {
		const json_t *r = json_object_get(s->jobs[i].doc, "request");
		char q[SC_PATH_LEN];
		if (r && !sc_read_request(s, r, sc_join(q, s->jobs[i].where, "request"), &s->jobs[i],
		                          &s->shapes[i]))
			return false;
		if (r)
			s->jobs[i].opts.shape = &s->shapes[i].r;
	}
	return true;
}

/* state.x_service_caps (extension): {"<service>": {"level", "max_per_domain",
 * "max_percent", "fd_kind", "fd_max_per_domain", "fd_max_percent"}} (a level, a failure-domain
 * kind or both), set on the cluster before the jobs are assigned. */
static bool read_service_caps(struct scen *s, const json_t *v)
{
	if (!json_is_object(v))
		return sc_fail(s, "state.x_service_caps", "must be an object, not %s", sc_kind(v));
	const char *name;
	const json_t *c;
	json_object_foreach((json_t *)v, name, c) {
		char p[SC_PATH_LEN], q[SC_PATH_LEN];
		snprintf(p, sizeof p, "state.x_service_caps.%s", name);
		if (!sc_check_key_name(s, name, "state.x_service_caps", "a service") ||
		    !sc_check_object(s, c, p, caps_keys, SC_COUNT(caps_keys)))
			return false;
		const json_t *x = json_object_get(c, "level"), *k = json_object_get(c, "fd_kind");
		if ((x || !k) && (!x || !json_is_string(x)))
			return sc_fail(s, sc_join(q, p, "level"), "%s: a level name is required (or "
			               "fd_kind alone)", x ? sc_kind(x) : "missing");
		if (k && !json_is_string(k))
			return sc_fail(s, sc_join(q, p, "fd_kind"), "%s: a failure-domain kind's name "
			               "is required", sc_kind(k));
		long long n;
		double pct;
		static const char *const counts[] = {"max_per_domain", "fd_max_per_domain"};
		static const char *const shares[] = {"max_percent", "fd_max_percent"};
		for (size_t i = 0; i < 2; i++) {
			if ((x = json_object_get(c, counts[i])) &&
			    !sc_check_int(s, x, sc_join(q, p, counts[i]), 0, true, UINT32_MAX, true,
			                  "an integer from 0 to 2^32 - 1", &n))
				return false;
			if ((x = json_object_get(c, shares[i])) &&
			    !sc_check_num(s, x, sc_join(q, p, shares[i]), false, true, &pct))
				return false;
		}
	}
	s->svc_caps = v;
	return true;
}

/* Set the caps read by read_service_caps on the new cluster. */
static bool build_service_caps(struct scen *s)
{
	const char *name;
	const json_t *c;
	json_object_foreach((json_t *)s->svc_caps, name, c) {
		tp_service_caps caps = TP_SERVICE_CAPS_INIT;
		caps.level = json_string_value(json_object_get(c, "level"));
		const json_t *x = json_object_get(c, "max_per_domain");
		caps.max_per_domain = x ? (uint32_t)json_integer_value(x) : 0;
		x = json_object_get(c, "max_percent");
		caps.max_percent = x ? json_number_value(x) : 0.0;
		caps.fd_kind = json_string_value(json_object_get(c, "fd_kind"));
		x = json_object_get(c, "fd_max_per_domain");
		caps.fd_max_per_domain = x ? (uint32_t)json_integer_value(x) : 0;
		x = json_object_get(c, "fd_max_percent");
		caps.fd_max_percent = x ? json_number_value(x) : 0.0;
		int rc = tp_cluster_set_service_caps(s->c, name, &caps);
		if (rc == TP_ENOMEM)
			return sc_nomem(s, "state.x_service_caps");
		if (rc < 0)
			return sc_fail(s, "state.x_service_caps", "%s: %s", name,
			               tp_cluster_errmsg(s->c));
	}
	return true;
}

/* The extension `x_partitions` (until the spec has it): {"level": name, "channels": n}, NVLink
 * partitions in the level's NVLink domains (tp_cluster_set_partitions), 2048 channels unless
 * said. The level is checked against the topology when the state is built. */
static bool read_partitions(struct scen *s, const json_t *v)
{
	const char *p = "state.x_partitions";
	char q[SC_PATH_LEN];
	if (!sc_check_object(s, v, p, part_keys, SC_COUNT(part_keys)))
		return false;
	const json_t *l = json_object_get(v, "level");
	if (!l)
		return sc_fail(s, sc_join(q, p, "level"), "required");
	if (!sc_check_name(s, l, sc_join(q, p, "level"), "a level name", true))
		return false;
	s->part_level = json_string_value(l);
	s->part_channels = 2048;
	const json_t *ch = json_object_get(v, "channels");
	long long n;
	if (ch && !sc_check_int(s, ch, sc_join(q, p, "channels"), 1, true,
	                        TP_PARTITION_CHANNELS_MAX, true, "an integer", &n))
		return false;
	if (ch)
		s->part_channels = (uint32_t)n;
	return true;
}

bool sc_read_state(struct scen *s, const json_t *state)
{
	if (!sc_check_object(s, state, "state", state_keys, SC_COUNT(state_keys)))
		return false;
	const json_t *v;
	if ((v = json_object_get(state, "down")) && !read_refs(s, v, "state.down", &s->down))
		return false;
	if ((v = json_object_get(state, "cordoned")) &&
	    !read_refs(s, v, "state.cordoned", &s->cordoned))
		return false;
	if ((v = json_object_get(state, "x_partitions")) && !read_partitions(s, v))
		return false;
	if ((v = json_object_get(state, "jobs")) && !read_jobs(s, v))
		return false;
	if ((v = json_object_get(state, "x_service_caps")) && !read_service_caps(s, v))
		return false;
	return true;
}

/* A refusal of the cluster, after the field it concerns (unless it names it already). */
static bool lib_fail(struct scen *s, int rc, const char *where)
{
	if (rc == TP_ENOMEM)
		return sc_nomem(s, where);
	const char *msg = tp_cluster_errmsg(s->c);
	if (!strncmp(msg, where, strlen(where)))
		return sc_fail(s, "", "%s", msg);
	return sc_fail(s, where, "%s", msg);
}

bool sc_build_state(struct scen *s)
{
	int rc = tp_cluster_create(&s->c, s->t, s->o->alloc);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, "state");
	if (rc < 0)
		return sc_fail(s, "state", "%s", tp_strerror(rc));
	if (s->svc_caps && !build_service_caps(s))
		return false;
	if (s->part_level) {
		int l = tp_topology_level_by_name(s->t, s->part_level);
		if (l < 0)
			return sc_fail(s, "state.x_partitions.level", "unknown level '%s'", s->part_level);
		if ((rc = tp_cluster_set_partitions(s->c, l, s->part_channels)) < 0)
			return lib_fail(s, rc, "state.x_partitions");
	}
	for (size_t i = 0; i < s->njobs; i++) {
		const struct sc_job *job = &s->jobs[i];
		rc = tp_cluster_assign(s->c, job->id, job->devices, job->ndevices, &job->opts);
		if (rc < 0 && job->opts.shape && !strncmp(tp_cluster_errmsg(s->c), "request", 7))
			return sc_fail(s, "", "%s.%s", job->where, tp_cluster_errmsg(s->c));
		if (rc < 0)
			return lib_fail(s, rc, job->where);
	}
	if (s->down.n && (rc = tp_cluster_set_down(s->c, s->down.ids, s->down.n, 1)) < 0)
		return lib_fail(s, rc, "state.down");
	if (s->cordoned.n &&
	    (rc = tp_cluster_set_cordoned(s->c, s->cordoned.ids, s->cordoned.n, 1)) < 0)
		return lib_fail(s, rc, "state.cordoned");
	return true;
}
