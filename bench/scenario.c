/* SPDX-License-Identifier: MIT */
/*
 * The topology section of a scenario-v1 document, read into a tp_topology (see scenario.h).
 *
 * The checks and their messages follow the Python CLI (bindings/python/topoplace/scenario.py),
 * so that a document the CLI refuses is refused here in the same words: each message starts with
 * the field as a dotted path with [i] for list items and says why. The builder is left to find
 * what it tracks anyway (a node name used twice, a device listed twice under one failure-domain
 * kind); the message then names the earlier occurrence as the CLI does. Any other refusal of the
 * builder is passed on with its own message, after the field it concerns.
 */
#include "scenario.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "topoplace-hwloc.h"

/* Most devices a scenario may describe, as the CLI: a typo in `generate` must not eat the
 * machine (the library's own limit is 2^31). */
#define MAX_DEVICES (1u << 24)
/* Room for a field path: two names of TP_MAX_NAME bytes and a prefix. */
#define PATH_LEN 640

static const char *const top_keys[] = {"version", "topology", "state", "request", "policy",
                                       "replace"};
static const char *const topology_keys[] = {"levels", "fabric", "nodes", "generate",
                                            "failure_domains"};
static const char *const fabric_keys[] = {"kind", "gbps", "latency_us"};
static const char *const node_keys[] = {"name", "path", "gpus", "model", "memory_gb", "perf",
                                        "hwloc"};
static const char *const generate_keys[] = {"counts", "gpus_per_node", "model", "memory_gb",
                                            "perf"};
/* Indexed by tp_link_kind. */
static const char *const link_kinds[] = {"nvlink", "pcie", "ib", "ethernet"};

#define COUNT(a) (sizeof(a) / sizeof *(a))

/* An hwloc file already imported: nodes of one model usually share one. */
struct hwloc_file {
	char *path;
	tp_nodetype *nt;
};

struct scen {
	const char *text; /* the document, to quote values in messages */
	const char *dir;  /* hwloc paths are relative to it */
	char *err;
	size_t errlen;
	tp_topology_builder *b;
	const char *levels[TP_MAX_LEVELS];
	unsigned nlevels;
	double nnodes, ndevices;
	const struct json_value *nodes; /* topology.nodes, to name the first of two equal names */
	unsigned *listed_gpus;          /* devices of topology.nodes[i], for messages */
	unsigned gen_gpus;              /* devices of each generated node */
	struct hwloc_file *hw;
	size_t nhw;
};

/* ---- messages ------------------------------------------------------------------------------ */

static bool fail(struct scen *s, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Write "path: reason" (just the reason for the whole document) and return false. */
static bool fail(struct scen *s, const char *path, const char *fmt, ...)
{
	if (!s->err || !s->errlen)
		return false;
	int n = *path ? snprintf(s->err, s->errlen, "%s: ", path) : 0;
	if (n < 0 || (size_t)n >= s->errlen)
		return false;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

/* A path too long for its buffer (only an absurdly long unknown key makes one) ends in "...". */
static const char *cut(char *buf, int n)
{
	if (n >= PATH_LEN)
		memcpy(buf + PATH_LEN - 4, "...", 4);
	return buf;
}

/* path.key (or key at the top, whose path is ""). */
static const char *join(char *buf, const char *path, const char *key)
{
	return cut(buf, snprintf(buf, PATH_LEN, *path ? "%s.%s" : "%s%s", path, key));
}

static const char *item(char *buf, const char *path, size_t i)
{
	return cut(buf, snprintf(buf, PATH_LEN, "%s[%zu]", path, i));
}

/* A value as the CLI quotes it: its JSON text cut to 60 characters, or its kind for a list or
 * an object. */
static const char *show(const struct scen *s, const struct json_value *v, char buf[64])
{
	if (v->type == JSON_ARRAY || v->type == JSON_OBJECT)
		return json_kind(v);
	const char *t = s->text + v->offset;
	size_t n = v->end - v->offset;
	if (n <= 60) {
		snprintf(buf, 64, "%.*s", (int)n, t);
	} else {
		n = 57;
		while (n > 0 && ((unsigned char)t[n] & 0xc0) == 0x80) /* not inside a character */
			n--;
		snprintf(buf, 64, "%.*s...", (int)n, t);
	}
	return buf;
}

/* The Ratcliff-Obershelp count of matching characters (what Python's difflib uses): the
 * longest common block, then the same on each side of it. */
static size_t matching(const char *a, size_t na, const char *b, size_t nb)
{
	size_t best = 0, ai = 0, bj = 0;
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++) {
			size_t k = 0;
			while (i + k < na && j + k < nb && a[i + k] == b[j + k])
				k++;
			if (k > best)
				best = k, ai = i, bj = j;
		}
	if (!best)
		return 0;
	return best + matching(a, ai, b, bj) +
	       matching(a + ai + best, na - ai - best, b + bj + best, nb - bj - best);
}

/* The allowed key closest to a misspelt one (similarity >= 0.75, as the CLI's hint), or NULL. */
static const char *close_match(const char *word, const char *const *allowed, size_t n)
{
	size_t nw = strlen(word);
	if (nw > 64)
		return NULL;
	const char *best = NULL;
	double best_score = 0.75;
	for (size_t i = 0; i < n; i++) {
		size_t na = strlen(allowed[i]);
		double score = 2.0 * (double)matching(allowed[i], na, word, nw) / (double)(na + nw);
		if (score > best_score || (score == best_score && (!best || strcmp(allowed[i], best) > 0)))
			best = allowed[i], best_score = score;
	}
	return best;
}

/* ---- small checks: each names the field and fails at the first problem ---------------------- */

/* v must be an object whose keys are all in allowed (JSON itself refuses a key given twice). */
static bool check_object(struct scen *s, const struct json_value *v, const char *path,
                         const char *const *allowed, size_t n)
{
	if (v->type != JSON_OBJECT)
		return fail(s, path, "must be an object, not %s", json_kind(v));
	for (const struct json_value *m = v->first; m; m = m->next) {
		size_t i = 0;
		while (i < n && strcmp(m->key, allowed[i]))
			i++;
		if (i < n && strlen(m->key) == m->key_len)
			continue;
		char list[512] = "", q[PATH_LEN];
		for (i = 0; i < n; i++) {
			size_t len = strlen(list);
			snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", allowed[i]);
		}
		const char *hint = close_match(m->key, allowed, n);
		return fail(s, join(q, path, m->key), "unknown key%s%s%s (allowed: %s)",
		            hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "", list);
	}
	return true;
}

static bool check_list(struct scen *s, const struct json_value *v, const char *path)
{
	if (v->type != JSON_ARRAY)
		return fail(s, path, "must be a list, not %s", json_kind(v));
	return true;
}

/* A name the library accepts: non-empty, at most TP_MAX_NAME bytes, no control character and
 * (unless slash_ok) no '/'. `shown` is how the message quotes it. */
static bool check_name_bytes(struct scen *s, const char *str, size_t len, const char *shown,
                             const char *path, const char *what, bool slash_ok)
{
	if (!len)
		return fail(s, path, "%s must not be empty", what);
	if (len > TP_MAX_NAME)
		return fail(s, path, "%s is longer than %d bytes", what, TP_MAX_NAME);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)str[i] < 32 || str[i] == 127)
			return fail(s, path, "%s %s contains a control character", what, shown);
	if (!slash_ok && memchr(str, '/', len))
		return fail(s, path, "%s %s contains '/'", what, shown);
	return true;
}

static bool check_name(struct scen *s, const struct json_value *v, const char *path,
                       const char *what, bool slash_ok)
{
	char b[64];
	if (v->type != JSON_STRING)
		return fail(s, path, "%s must be a string, not %s", what, show(s, v, b));
	return check_name_bytes(s, v->str, v->len, show(s, v, b), path, what, slash_ok);
}

/* An object key used as a name (a failure-domain kind or domain). */
static bool check_key_name(struct scen *s, const struct json_value *m, const char *path,
                           const char *what)
{
	char shown[80];
	snprintf(shown, sizeof shown, "\"%.60s\"", m->key);
	return check_name_bytes(s, m->key, m->key_len, shown, path, what, false);
}

/* A whole number >= 1 and, when hi > 0, <= hi. Larger values are clamped to UINT32_MAX, which
 * the callers' limits on totals then refuse. */
static bool check_count(struct scen *s, const struct json_value *v, const char *path,
                        unsigned hi, unsigned *out)
{
	char b[64];
	if (v->type != JSON_NUMBER || !v->integer)
		return fail(s, path, "must be a positive integer, not %s", show(s, v, b));
	if (v->number < 1)
		return fail(s, path, "must be at least 1, not %s", show(s, v, b));
	if (hi && v->number > hi)
		return fail(s, path, "%s is above the limit %u", show(s, v, b), hi);
	*out = v->number > UINT32_MAX ? UINT32_MAX : (unsigned)v->number;
	return true;
}

static bool check_positive(struct scen *s, const struct json_value *v, const char *path,
                           double *out)
{
	char b[64];
	if (v->type != JSON_NUMBER)
		return fail(s, path, "must be a number, not %s", show(s, v, b));
	if (!(v->number > 0))
		return fail(s, path, "must be positive, not %s", show(s, v, b));
	*out = v->number;
	return true;
}

/* ---- topology ------------------------------------------------------------------------------ */

static bool read_levels(struct scen *s, const struct json_value *topo)
{
	const char *p = "topology.levels";
	const struct json_value *lv = json_get(topo, "levels");
	if (!lv)
		return fail(s, p, "required");
	if (!check_list(s, lv, p))
		return false;
	if (!lv->len)
		return fail(s, p, "must not be empty");
	if (lv->len > TP_MAX_LEVELS)
		return fail(s, p, "%zu levels, at most %d are allowed", lv->len, TP_MAX_LEVELS);
	char q[PATH_LEN], b[64];
	for (const struct json_value *v = lv->first; v; v = v->next) {
		item(q, p, s->nlevels);
		if (!check_name(s, v, q, "a level name", false))
			return false;
		if (!strcmp(v->str, "cluster"))
			return fail(s, q, "'cluster' may not be a level name (it names the fabric between "
			                  "top-level domains)");
		for (unsigned l = 0; l < s->nlevels; l++)
			if (!strcmp(s->levels[l], v->str))
				return fail(s, q, "level name %s is used twice", show(s, v, b));
		s->levels[s->nlevels++] = v->str;
	}
	int rc = tp_topology_builder_create(&s->b, s->levels, s->nlevels, NULL);
	if (rc < 0) /* the builder has no message object when creating it fails */
		return fail(s, p, "%s", tp_strerror(rc));
	return true;
}

static bool read_fabric(struct scen *s, const struct json_value *fab)
{
	const char *allowed[TP_MAX_LEVELS + 1];
	memcpy(allowed, s->levels, s->nlevels * sizeof *allowed);
	allowed[s->nlevels] = "cluster";
	if (!check_object(s, fab, "topology.fabric", allowed, s->nlevels + 1))
		return false;
	for (const struct json_value *link = fab->first; link; link = link->next) {
		char fp[PATH_LEN], q[PATH_LEN], b[64];
		join(fp, "topology.fabric", link->key);
		if (!check_object(s, link, fp, fabric_keys, COUNT(fabric_keys)))
			return false;
		int level = TP_LEVEL_CLUSTER;
		for (unsigned l = 0; l < s->nlevels; l++)
			if (!strcmp(link->key, s->levels[l]))
				level = (int)l;
		/* The spec's defaults for what the level leaves out (those of the builder too). */
		tp_link_kind kind = TP_LINK_IB;
		double gbps = level == TP_LEVEL_CLUSTER ? 25 : 50;
		double latency = level == TP_LEVEL_CLUSTER ? 20 : 14;
		if (level == (int)s->nlevels - 1)
			kind = TP_LINK_NVLINK, gbps = 900, latency = 3.4;
		const struct json_value *v = json_get(link, "kind");
		if (v) {
			unsigned k = 0;
			while (k < COUNT(link_kinds) &&
			       !(v->type == JSON_STRING && !strcmp(v->str, link_kinds[k]) &&
			         strlen(v->str) == v->len))
				k++;
			if (k == COUNT(link_kinds))
				return fail(s, join(q, fp, "kind"),
				            "unknown link kind %s (one of nvlink, pcie, ib, ethernet)",
				            show(s, v, b));
			kind = (tp_link_kind)k;
		}
		if ((v = json_get(link, "gbps")) && !check_positive(s, v, join(q, fp, "gbps"), &gbps))
			return false;
		if ((v = json_get(link, "latency_us")) &&
		    !check_positive(s, v, join(q, fp, "latency_us"), &latency))
			return false;
		if (tp_topology_builder_set_fabric(s->b, level, kind, gbps, latency) < 0)
			return fail(s, fp, "%s", tp_topology_builder_errmsg(s->b));
	}
	return true;
}

/* model, memory_gb and perf of a node or of `generate` (gpus devices) into o; a perf list goes
 * to perfs[0..gpus). */
static bool read_attrs(struct scen *s, const struct json_value *obj, const char *p,
                       unsigned gpus, tp_node_options *o, double *perfs)
{
	char q[PATH_LEN], r[PATH_LEN], b[64];
	const struct json_value *v = json_get(obj, "model");
	if (v) {
		if (!check_name(s, v, join(q, p, "model"), "a model", true))
			return false;
		o->model = v->str;
	}
	if ((v = json_get(obj, "memory_gb")) &&
	    !check_positive(s, v, join(q, p, "memory_gb"), &o->memory_gb))
		return false;
	if (!(v = json_get(obj, "perf")))
		return true;
	join(q, p, "perf");
	if (v->type == JSON_NUMBER)
		return check_positive(s, v, q, &o->perf);
	if (v->type != JSON_ARRAY)
		return fail(s, q, "must be a positive number or a list with one per device, not %s",
		            show(s, v, b));
	if (v->len != gpus)
		return fail(s, q, "has %zu values, the node has %u devices (one value per device)",
		            v->len, gpus);
	size_t k = 0;
	for (const struct json_value *x = v->first; x; x = x->next, k++)
		if (!check_positive(s, x, item(r, q, k), &perfs[k]))
			return false;
	o->device_perf = perfs;
	return true;
}

static bool read_generate(struct scen *s, const struct json_value *g)
{
	const char *p = "topology.generate";
	char q[PATH_LEN], r[PATH_LEN];
	if (!check_object(s, g, p, generate_keys, COUNT(generate_keys)))
		return false;
	const struct json_value *counts = json_get(g, "counts");
	join(q, p, "counts");
	if (!counts)
		return fail(s, q, "required");
	if (!check_list(s, counts, q))
		return false;
	if (counts->len != s->nlevels)
		return fail(s, q, "has %zu counts, the topology has %u levels (one count per level)",
		            counts->len, s->nlevels);
	unsigned c[TP_MAX_LEVELS], gpn;
	double nodes = 1;
	size_t i = 0;
	for (const struct json_value *v = counts->first; v; v = v->next, i++) {
		if (!check_count(s, v, item(r, q, i), 0, &c[i]))
			return false;
		nodes *= c[i];
		if (nodes > MAX_DEVICES)
			return fail(s, q, "generates more than %u nodes", MAX_DEVICES);
	}
	const struct json_value *v = json_get(g, "gpus_per_node");
	if (!v)
		return fail(s, join(r, p, "gpus_per_node"), "required");
	if (!check_count(s, v, join(r, p, "gpus_per_node"), TP_MAX_NODE_DEVICES, &gpn))
		return false;
	if (nodes * gpn > MAX_DEVICES)
		return fail(s, q, "generates more than %u devices", MAX_DEVICES);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	double perfs[TP_MAX_NODE_DEVICES];
	if (!read_attrs(s, g, p, gpn, &o, perfs))
		return false;
	if (tp_topology_builder_generate(s->b, c, gpn, &o) < 0)
		return fail(s, p, "%s", tp_topology_builder_errmsg(s->b));
	s->nnodes += nodes;
	s->ndevices += nodes * gpn;
	s->gen_gpus = gpn;
	return true;
}

/* The whole of a file into a malloc'ed buffer, or NULL with errno set. */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *bigger = realloc(buf, cap *= 2);
		if (!bigger)
			free(buf);
		buf = bigger;
	}
	int saved = buf ? 0 : ENOMEM;
	if (buf && ferror(f)) { /* a directory: fopen() succeeds, reading fails with EISDIR */
		saved = errno ? errno : EIO;
		free(buf);
		buf = NULL;
	}
	fclose(f);
	errno = saved;
	*len = n;
	return buf;
}

/* The node type of a node's `hwloc` file (owned by s->hw), read and imported once per file. */
static bool load_hwloc(struct scen *s, const struct json_value *v, const char *p,
                       tp_nodetype **out)
{
	char b[64];
	if (v->type != JSON_STRING || !v->len || strlen(v->str) != v->len)
		return fail(s, p, "must be the path of an hwloc XML file");
	size_t dlen = v->str[0] == '/' ? 0 : strlen(s->dir) + 1;
	char *path = malloc(dlen + v->len + 1);
	if (!path)
		return fail(s, p, "out of memory");
	snprintf(path, dlen + v->len + 1, "%s%s%s", dlen ? s->dir : "", dlen ? "/" : "", v->str);
	for (size_t i = 0; i < s->nhw; i++)
		if (!strcmp(s->hw[i].path, path)) {
			free(path);
			*out = s->hw[i].nt;
			return true;
		}
	struct hwloc_file *hw = realloc(s->hw, (s->nhw + 1) * sizeof *hw);
	if (!hw) {
		free(path);
		return fail(s, p, "out of memory");
	}
	s->hw = hw;
	size_t len;
	char *xml = read_file(path, &len);
	if (!xml) {
		free(path);
		return fail(s, p, "cannot read %s (%s)", show(s, v, b), strerror(errno));
	}
	char msg[256];
	int rc = tp_nodetype_from_hwloc_xml(out, xml, len, NULL, msg, sizeof msg);
	free(xml);
	if (rc < 0) {
		free(path);
		if (rc == TP_ENOTFOUND)
			return fail(s, p, "%s: no NVIDIA GPU in it (%s)", show(s, v, b),
			            *msg ? msg : tp_strerror(rc));
		return fail(s, p, "%s: %s", show(s, v, b), *msg ? msg : tp_strerror(rc));
	}
	s->hw[s->nhw++] = (struct hwloc_file){path, *out};
	return true;
}

/* The node's `path`: one domain name per level above the node. */
static bool read_node_path(struct scen *s, const struct json_value *n, const char *p,
                           const char **names)
{
	char q[PATH_LEN], r[PATH_LEN], above[TP_MAX_LEVELS * (TP_MAX_NAME + 2)] = "";
	for (unsigned l = 0; l + 1 < s->nlevels; l++) {
		size_t len = strlen(above);
		snprintf(above + len, sizeof above - len, "%s%s", l ? ", " : "", s->levels[l]);
	}
	const struct json_value *v = json_get(n, "path");
	join(q, p, "path");
	if (!v) {
		if (s->nlevels > 1)
			return fail(s, q, "required: %u domain names (%s)", s->nlevels - 1, above);
		return true;
	}
	if (!check_list(s, v, q))
		return false;
	if (v->len != s->nlevels - 1)
		return fail(s, q, "has %zu names, needs %u (one per level above the node: %s)", v->len,
		            s->nlevels - 1, *above ? above : "none");
	size_t k = 0;
	for (const struct json_value *d = v->first; d; d = d->next, k++) {
		if (!check_name(s, d, item(r, q, k), "a domain name", false))
			return false;
		names[k] = d->str;
	}
	return true;
}

/* Which node had this name first, now that the builder refused it as a duplicate. */
static bool duplicate_name(struct scen *s, const struct json_value *name, const char *p, size_t i)
{
	char b[64], q[PATH_LEN];
	size_t k = 0;
	for (const struct json_value *n = s->nodes->first; n && k < i; n = n->next, k++) {
		const struct json_value *other = json_get(n, "name");
		if (other && !strcmp(other->str, name->str))
			return fail(s, join(q, p, "name"), "duplicate node name %s (also topology.nodes[%zu])",
			            show(s, name, b), k);
	}
	return fail(s, join(q, p, "name"), "duplicate node name %s (a generated node has it)",
	            show(s, name, b));
}

static bool read_node(struct scen *s, const struct json_value *n, size_t i)
{
	char p[64], q[PATH_LEN], b[64];
	snprintf(p, sizeof p, "topology.nodes[%zu]", i);
	if (!check_object(s, n, p, node_keys, COUNT(node_keys)))
		return false;
	const struct json_value *name = json_get(n, "name");
	if (!name)
		return fail(s, join(q, p, "name"), "required");
	if (!check_name(s, name, join(q, p, "name"), "a node name", false))
		return false;
	const char *path[TP_MAX_LEVELS];
	if (!read_node_path(s, n, p, path))
		return false;

	tp_node_options o = TP_NODE_OPTIONS_INIT;
	const struct json_value *hw = json_get(n, "hwloc"), *gpus = json_get(n, "gpus");
	unsigned ngpus = 0;
	if (hw) {
		tp_nodetype *nt;
		if (!load_hwloc(s, hw, join(q, p, "hwloc"), &nt))
			return false;
		o.type = nt;
		unsigned found = tp_nodetype_gpu_count(nt);
		if (gpus) {
			if (!check_count(s, gpus, join(q, p, "gpus"), TP_MAX_NODE_DEVICES, &ngpus))
				return false;
			if (ngpus != found)
				return fail(s, q, "%u, but the hwloc file %s has %u GPUs", ngpus,
				            show(s, hw, b), found);
		}
		ngpus = found;
	} else {
		if (!gpus)
			return fail(s, join(q, p, "gpus"), "required (the node's device count)");
		if (!check_count(s, gpus, join(q, p, "gpus"), TP_MAX_NODE_DEVICES, &ngpus))
			return false;
	}
	double perfs[TP_MAX_NODE_DEVICES];
	if (!read_attrs(s, n, p, ngpus, &o, perfs))
		return false;
	int rc = tp_topology_builder_add_node(s->b, name->str, path, ngpus, &o);
	if (rc == TP_EEXIST)
		return duplicate_name(s, name, p, i);
	if (rc < 0)
		return fail(s, p, "%s", tp_topology_builder_errmsg(s->b));
	s->listed_gpus[i] = ngpus;
	s->nnodes++;
	s->ndevices += ngpus;
	if (s->ndevices > MAX_DEVICES)
		return fail(s, p, "the topology has more than %u devices", MAX_DEVICES);
	return true;
}

/* A failure-domain member: a node name, or `node/index` for one device (dev -1 for a node).
 * Returns false when it is not a string of that shape; whether the node exists is the
 * builder's to say. An index too long to be one becomes TP_MAX_NODE_DEVICES, which no node
 * has. */
static bool fd_ref(const struct json_value *m, char node[TP_MAX_NAME + 1], int *dev)
{
	if (m->type != JSON_STRING || strlen(m->str) != m->len)
		return false;
	const char *slash = strrchr(m->str, '/');
	size_t nlen = slash ? (size_t)(slash - m->str) : m->len;
	if (nlen > TP_MAX_NAME)
		return false;
	memcpy(node, m->str, nlen);
	node[nlen] = '\0';
	*dev = -1;
	if (slash) {
		const char *d = slash + 1;
		if (!*d || strspn(d, "0123456789") != strlen(d))
			return false;
		*dev = strlen(d) > 4 ? TP_MAX_NODE_DEVICES : atoi(d);
	}
	return true;
}

/* Devices of a node the builder has (listed, else generated); asked only once it refused an
 * index, so a linear search does. */
static unsigned node_gpus(const struct scen *s, const char *node)
{
	size_t i = 0;
	for (const struct json_value *n = s->nodes ? s->nodes->first : NULL; n; n = n->next, i++)
		if (!strcmp(json_get(n, "name")->str, node))
			return s->listed_gpus[i];
	return s->gen_gpus;
}

/* The builder refused a member as listed twice under `kind`: name the earlier member it
 * clashes with (the same device, or the whole node, or one of the node's devices), as the CLI. */
static bool listed_twice(struct scen *s, const struct json_value *kind,
                         const struct json_value *member, const char *mp, const char *node,
                         int dev)
{
	char what[TP_MAX_NAME + 16], other[TP_MAX_NAME + 1], kp[PATH_LEN], dp[PATH_LEN];
	char at[PATH_LEN];
	snprintf(what, sizeof what, dev < 0 ? "%s" : "%s/%d", node, dev);
	for (const struct json_value *d = kind->first; d; d = d->next) {
		size_t i = 0;
		for (const struct json_value *m = d->first; m && m != member; m = m->next, i++) {
			int odev;
			if (fd_ref(m, other, &odev) && !strcmp(other, node) &&
			    (odev < 0 || dev < 0 || odev == dev)) {
				join(kp, "topology.failure_domains", kind->key);
				return fail(s, mp, "%s is listed twice under %s (also at %s)", what, kind->key,
				            item(at, join(dp, kp, d->key), i));
			}
		}
	}
	return fail(s, mp, "%s", tp_topology_builder_errmsg(s->b));
}

static bool read_fd_member(struct scen *s, const struct json_value *kind,
                           const struct json_value *dom, const struct json_value *m,
                           const char *mp)
{
	char b[64], node[TP_MAX_NAME + 1];
	int dev;
	if (m->type != JSON_STRING)
		return fail(s, mp, "must be a node or device name, not %s", show(s, m, b));
	if (!fd_ref(m, node, &dev)) {
		if (strlen(m->str) == m->len && strchr(m->str, '/'))
			return fail(s, mp, "%s is not a device name (node/index)", show(s, m, b));
		return fail(s, mp, "unknown node or device %s", show(s, m, b));
	}
	int rc = tp_topology_builder_add_failure_domain(s->b, kind->key, dom->key, node, dev);
	if (rc == TP_ENOTFOUND)
		return fail(s, mp, "unknown node or device %s", show(s, m, b));
	if (rc == TP_EINVAL && dev >= 0)
		return fail(s, mp, "node %s has %u devices, so there is no device %s", node,
		            node_gpus(s, node), m->str);
	if (rc == TP_EEXIST)
		return listed_twice(s, kind, m, mp, node, dev);
	if (rc < 0)
		return fail(s, mp, "%s", tp_topology_builder_errmsg(s->b));
	return true;
}

static bool read_failure_domains(struct scen *s, const struct json_value *fds)
{
	const char *p = "topology.failure_domains";
	if (fds->type != JSON_OBJECT)
		return fail(s, p, "must be an object, not %s", json_kind(fds));
	for (const struct json_value *k = fds->first; k; k = k->next) {
		char kp[PATH_LEN], dp[PATH_LEN], mp[PATH_LEN];
		join(kp, p, k->key);
		if (!check_key_name(s, k, kp, "a failure-domain kind"))
			return false;
		for (unsigned l = 0; l < s->nlevels; l++)
			if (!strcmp(k->key, s->levels[l]))
				return fail(s, kp, "a failure-domain kind may not be a level name");
		if (!strcmp(k->key, "cluster"))
			return fail(s, kp, "'cluster' may not be a failure-domain kind");
		if (k->type != JSON_OBJECT)
			return fail(s, kp, "must be an object (domain name -> list of nodes or devices), "
			                   "not %s", json_kind(k));
		for (const struct json_value *d = k->first; d; d = d->next) {
			join(dp, kp, d->key);
			if (!check_key_name(s, d, dp, "a failure-domain name") || !check_list(s, d, dp))
				return false;
			size_t i = 0;
			for (const struct json_value *m = d->first; m; m = m->next, i++)
				if (!read_fd_member(s, k, d, m, item(mp, dp, i)))
					return false;
		}
	}
	return true;
}

static tp_topology *read_topology(struct scen *s, const struct json_value *topo)
{
	if (!check_object(s, topo, "topology", topology_keys, COUNT(topology_keys)) ||
	    !read_levels(s, topo))
		return NULL;
	const struct json_value *v = json_get(topo, "fabric");
	if (v && !read_fabric(s, v))
		return NULL;
	s->nodes = json_get(topo, "nodes");
	const struct json_value *gen = json_get(topo, "generate");
	if (!s->nodes && !gen) {
		fail(s, "topology", "needs nodes or generate (or both)");
		return NULL;
	}
	/* Generated nodes come first, then the listed ones (the spec's order of node ids). */
	if (gen && !read_generate(s, gen))
		return NULL;
	if (s->nodes) {
		if (!check_list(s, s->nodes, "topology.nodes"))
			return NULL;
		s->listed_gpus = malloc((s->nodes->len + 1) * sizeof *s->listed_gpus);
		if (!s->listed_gpus) {
			fail(s, "topology.nodes", "out of memory");
			return NULL;
		}
		size_t i = 0;
		for (const struct json_value *n = s->nodes->first; n; n = n->next, i++)
			if (!read_node(s, n, i))
				return NULL;
	}
	if (s->nnodes == 0) {
		fail(s, "topology.nodes", "the topology has no node");
		return NULL;
	}
	if ((v = json_get(topo, "failure_domains")) && !read_failure_domains(s, v))
		return NULL;
	tp_topology *t = NULL;
	if (tp_topology_build(s->b, &t) < 0) {
		fail(s, "topology", "%s", tp_topology_builder_errmsg(s->b));
		return NULL;
	}
	return t;
}

static tp_topology *read_document(struct scen *s, const struct json_value *doc)
{
	char b[64];
	if (!check_object(s, doc, "", top_keys, COUNT(top_keys)))
		return NULL;
	const struct json_value *v = json_get(doc, "version");
	if (!v) {
		fail(s, "version", "required (must be 1)");
		return NULL;
	}
	if (v->type != JSON_NUMBER || !v->integer || v->number != 1) {
		fail(s, "version", "must be 1, not %s", show(s, v, b));
		return NULL;
	}
	/* state, request, policy and replace say nothing about the topology: the simulator
	 * ignores them, as the CLI ignores the sections its command does not use. */
	if (!(v = json_get(doc, "topology"))) {
		fail(s, "topology", "required");
		return NULL;
	}
	return read_topology(s, v);
}

tp_topology *bench_scenario_topology_from_text(const char *text, size_t len, const char *dir,
                                               char *err, size_t errlen)
{
	struct scen s = {.text = text, .dir = dir ? dir : ".", .err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = '\0';
	struct json_doc doc;
	struct json_error je;
	if (json_parse(&doc, text, len, &je) < 0) {
		fail(&s, "", "not a valid JSON document: %s", je.msg);
		return NULL;
	}
	tp_topology *t = read_document(&s, doc.root);
	tp_topology_builder_destroy(s.b);
	for (size_t i = 0; i < s.nhw; i++) {
		tp_nodetype_destroy(s.hw[i].nt);
		free(s.hw[i].path);
	}
	free(s.hw);
	free(s.listed_gpus);
	json_free(&doc);
	return t;
}

tp_topology *bench_scenario_topology(const char *path, char *err, size_t errlen)
{
	struct scen s = {.err = err, .errlen = errlen};
	if (err && errlen)
		err[0] = '\0';
	size_t len;
	char *text = read_file(path, &len);
	if (!text) {
		fail(&s, "", "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	/* hwloc files are relative to the scenario's folder. */
	char *dir = strdup(path);
	if (!dir) {
		free(text);
		fail(&s, "", "out of memory");
		return NULL;
	}
	char *slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir] = '\0'; /* "/x.json" keeps "/" */
	tp_topology *t = bench_scenario_topology_from_text(text, len, slash ? dir : ".", err, errlen);
	free(dir);
	free(text);
	return t;
}
