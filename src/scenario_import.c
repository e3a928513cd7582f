/* SPDX-License-Identifier: MIT */
/*
 * tp_scenario_from_json(): parse with jansson, read the sections the command uses (all of them
 * with `strict`), build the cluster state, and hand the caller a tp_scenario that owns it all.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scenario_internal.h"

/* x_sizing and x_pd are read by the CLI's size and pd commands (docs/serving.md) and left
 * alone here, so that one document serves both. */
static const char *const top_keys[] = {"version", "topology", "state", "request", "policy",
                                       "replace", "x_sizing", "x_pd"};
static const char *const command_names[] = {"topology", "place", "defrag", "frag", "replace"};

struct tp_scenario {
	struct scen s; /* what the import built, with the JSON tree its strings point into */
	json_t *root;
	tp_allocator alloc;
	tp_scenario_options opts;
};

/* The sections a command reads (the spec's examples read the others as "allowed, neither
 * validated nor applied"; strict validates them too). */
enum { USE_STATE = 1, USE_REQUEST = 2, USE_POLICY = 4, USE_REPLACE = 8 };

static unsigned uses(tp_scenario_command c)
{
	switch (c) {
	case TP_SCENARIO_PLACE: return USE_STATE | USE_REQUEST;
	case TP_SCENARIO_DEFRAG: return USE_STATE | USE_REQUEST | USE_POLICY;
	case TP_SCENARIO_FRAG: return USE_STATE;
	case TP_SCENARIO_REPLACE: return USE_STATE | USE_REPLACE;
	default: return 0;
	}
}

int tp_scenario_options_init(tp_scenario_options *opts, unsigned version)
{
	static const tp_scenario_options init = TP_SCENARIO_OPTIONS_INIT;
	return tp_options_init(opts, version == TP_SCENARIO_OPTIONS_VERSION ? sizeof init : 0, &init, version);
}

static bool read_version(struct scen *s, const json_t *doc)
{
	char b[SC_SHOW_LEN];
	const json_t *v = json_object_get(doc, "version");
	if (!v)
		return sc_fail(s, "version", "required (must be 1)");
	if (!json_is_integer(v) || json_integer_value(v) != 1)
		return sc_fail(s, "version", "must be 1, not %s", sc_show(s, v, b));
	return true;
}

static bool read_question(struct scen *s, const json_t *doc, unsigned use)
{
	tp_scenario_command cmd = s->o->command;
	const json_t *v;
	if (use & USE_REQUEST) {
		if ((v = json_object_get(doc, "request"))) {
			if (!(s->req = sc_calloc(s, 1, sizeof *s->req)))
				return sc_nomem(s, "request");
			if (!sc_read_request(s, v, "request", NULL, s->req))
				return false;
		} else if (cmd == TP_SCENARIO_PLACE || cmd == TP_SCENARIO_DEFRAG) {
			return sc_fail(s, "request", "required by %s", command_names[cmd]);
		}
	}
	s->policy = (tp_defrag_policy)TP_DEFRAG_POLICY_INIT;
	/* scenario-v1 plans let a job without a request restart on any free devices */
	s->policy.allow_less_local = 1;
	if ((use & USE_POLICY) && (v = json_object_get(doc, "policy")) && !sc_read_policy(s, v))
		return false;
	s->has_policy = cmd == TP_SCENARIO_DEFRAG;
	if (use & USE_REPLACE) {
		if ((v = json_object_get(doc, "replace"))) {
			if (!sc_read_replace(s, v))
				return false;
		} else if (cmd == TP_SCENARIO_REPLACE) {
			return sc_fail(s, "replace", "required by replace");
		}
	}
	return true;
}

static bool read_document(struct scen *s, const json_t *doc)
{
	if (!sc_check_object(s, doc, "", top_keys, SC_COUNT(top_keys)) || !read_version(s, doc))
		return false;
	const json_t *topo = json_object_get(doc, "topology");
	if (!topo)
		return sc_fail(s, "topology", "required");
	unsigned use = s->o->strict ? ~0u : uses(s->o->command);
	if (!sc_read_topology(s, topo))
		return false;
	const json_t *state = json_object_get(doc, "state");
	if ((use & USE_STATE) && state && !sc_read_state(s, state))
		return false;
	if (!read_question(s, doc, use))
		return false;
	return s->o->command == TP_SCENARIO_TOPOLOGY || sc_build_state(s);
}

/* Free what the import built; the topology and the cluster only when asked (a failed import
 * frees them, a successful one hands them to the tp_scenario). */
static void scen_free(struct scen *s)
{
	tp_cluster_destroy(s->c);
	tp_topology_destroy(s->t);
	tp_topology_builder_destroy(s->b);
	for (size_t i = 0; i < s->nhw; i++)
		tp_nodetype_destroy(s->hw[i].nt);
	sc_free(s, s->hw);
	sc_free(s, s->listed_gpus);
	sc_free(s, s->names);
	sc_free(s, s->down.ids);
	sc_free(s, s->cordoned.ids);
	for (size_t i = 0; s->jobs && i < s->njobs; i++) {
		sc_free(s, (void *)s->jobs[i].where);
		sc_free(s, s->jobs[i].devices);
	}
	if (s->shapes)
		for (size_t i = 0; i < s->njobs; i++)
			sc_request_free(s, &s->shapes[i]);
	/* a job that failed half-read may own devices or a where without being counted */
	sc_free(s, s->jobs);
	sc_free(s, s->shapes);
	sc_request_free(s, s->req);
	sc_free(s, s->req);
	sc_free(s, s->failed);
}

/* Drop what the command does not use (read only to be validated, with strict). */
static void keep_used(tp_scenario *sc)
{
	struct scen *s = &sc->s;
	unsigned use = uses(sc->opts.command);
	if (!(use & USE_REQUEST) && s->req) {
		sc_request_free(s, s->req);
		sc_free(s, s->req);
		s->req = NULL;
	}
	if (!(use & USE_REPLACE)) {
		sc_free(s, s->failed);
		s->failed = NULL;
		s->nfailed = 0;
		s->replace_job = NULL;
	}
	tp_topology_builder_destroy(s->b);
	s->b = NULL;
}

/* Misuse, with a message saying which argument (nothing is built yet). */
static bool bad_arguments(tp_scenario **out, const char *json, const tp_scenario_options *o,
                          char *errbuf, size_t errlen)
{
	struct scen s = {.err = errbuf, .errlen = errlen};
	if (!out)
		return !sc_fail(&s, "", "out is NULL");
	if (!json)
		return !sc_fail(&s, "", "json is NULL");
	if (o->version != TP_SCENARIO_OPTIONS_VERSION)
		return !sc_fail(&s, "", "opts->version %u is not %d", o->version,
		                TP_SCENARIO_OPTIONS_VERSION);
	if ((unsigned)o->command >= SC_COUNT(command_names))
		return !sc_fail(&s, "", "opts->command %u is not a tp_scenario_command",
		                (unsigned)o->command);
	if (!tp_alloc_valid(o->alloc))
		return !sc_fail(&s, "", "opts->alloc lacks a function");
	return false;
}

static void parse_error(struct scen *s, const json_error_t *je)
{
	s->code = TP_EPARSE;
	sc_fail(s, "", "not a valid JSON document: %s: line %d column %d (byte %d)", je->text,
	        je->line, je->column, je->position);
}

int tp_scenario_from_json(tp_scenario **out, const char *json, size_t len,
                          const tp_scenario_options *opts, char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (out)
		*out = NULL;
	tp_scenario_options defaults = TP_SCENARIO_OPTIONS_INIT;
	if (!opts)
		opts = &defaults;
	if (bad_arguments(out, json, opts, errbuf, errlen))
		return TP_EINVAL;
	tp_allocator a = tp_alloc_resolve(opts->alloc);
	const tp_allocator *alloc = &a;
	tp_scenario *sc = tp_calloc(alloc, 1, sizeof *sc);
	if (!sc) {
		if (errbuf && errlen)
			snprintf(errbuf, errlen, "out of memory");
		return TP_ENOMEM;
	}
	sc->alloc = *alloc;
	sc->opts = *opts;
	struct scen *s = &sc->s;
	*s = (struct scen){.o = &sc->opts, .alloc = &sc->alloc, .err = errbuf, .errlen = errlen,
	                   .code = TP_EPARSE};
	json_error_t je;
	const size_t flags = JSON_REJECT_DUPLICATES | JSON_DECODE_ANY;
	sc->root = json_loadb(json, len, flags, &je);
	if (!sc->root && !strncmp(je.text, "invalid Unicode", 15)) {
		/* JSON lets a string hold half of a UTF-16 pair; jansson does not: mark them, so
		 * that the message names the field as the CLI does */
		size_t mlen = len;
		char *marked = sc_mark_surrogates(s, json, &mlen);
		if (!marked && mlen == SIZE_MAX) {
			sc_nomem(s, "");
			tp_scenario_destroy(sc);
			return TP_ENOMEM;
		}
		if (marked) {
			json_error_t je2;
			sc->root = json_loadb(marked, mlen, flags, &je2);
			s->marked = sc->root != NULL;
			sc_free(s, marked);
		}
	}
	if (!sc->root)
		parse_error(s, &je);
	if (!sc->root || !read_document(s, sc->root)) {
		int code = s->code;
		tp_scenario_destroy(sc);
		return code;
	}
	keep_used(sc);
	if (errbuf && errlen)
		errbuf[0] = '\0';
	*out = sc;
	return 0;
}

void tp_scenario_destroy(tp_scenario *sc)
{
	if (!sc)
		return;
	scen_free(&sc->s);
	json_decref(sc->root);
	tp_allocator a = sc->alloc;
	tp_free(&a, sc);
}

const tp_topology *tp_scenario_topology(const tp_scenario *sc)
{
	return sc ? sc->s.t : NULL;
}

int tp_scenario_topology_take(tp_scenario *sc, tp_topology **out)
{
	if (!sc || !out || !sc->s.t || sc->s.c)
		return TP_EINVAL;
	*out = sc->s.t;
	sc->s.t = NULL;
	return 0;
}

tp_cluster *tp_scenario_cluster(tp_scenario *sc)
{
	return sc ? sc->s.c : NULL;
}

const tp_request *tp_scenario_request(const tp_scenario *sc)
{
	return sc && sc->s.req ? &sc->s.req->r : NULL;
}

const tp_defrag_policy *tp_scenario_policy(const tp_scenario *sc)
{
	return sc && sc->s.has_policy ? &sc->s.policy : NULL;
}

const char *tp_scenario_replace_job(const tp_scenario *sc)
{
	return sc ? sc->s.replace_job : NULL;
}

int tp_scenario_replace_failed(const tp_scenario *sc, const uint32_t **devices, size_t *n)
{
	if (!sc || !devices || !n)
		return TP_EINVAL;
	*devices = sc->s.failed;
	*n = sc->s.nfailed;
	return 0;
}
