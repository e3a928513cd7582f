/* SPDX-License-Identifier: MIT */
/*
 * Slurm topology.yaml importer (topology.yaml(5), Slurm 24.05 and later): one topology of the
 * file, read with libyaml's document loader, becomes the topology.conf lines that say the same
 * (`SwitchName="s" Switches="..." Nodes="..."`, `BlockName=...`, `BlockSizes=...`), which
 * tp_topology_builder_from_slurm_ext() turns into a builder. So both formats share one set of
 * rules, levels and warnings; each generated line remembers the YAML line it came from, and
 * every "line N" of a message or warning is rewritten to the YAML's line.
 */
#include "topoplace-slurm.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common.h"

#define YAML_MAX_LEN ((size_t)1 << 30) /* libyaml takes an int-sized length in places */

struct ycx {
	const tp_allocator *a;
	yaml_document_t doc;
	char *err;
	size_t errlen;
	const char *topo; /* the name of the topology being read, for messages */
	char *conf;       /* the generated topology.conf */
	size_t len, cap;
	unsigned *lines; /* YAML line of each generated line */
	size_t nlines, cap_lines;
};

static int yfail(struct ycx *y, int code, const char *fmt, ...) TP_PRINTF(3, 4);

static int yfail(struct ycx *y, int code, const char *fmt, ...)
{
	if (y->err && y->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(y->err, y->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

static unsigned line_of(const yaml_node_t *n) { return (unsigned)n->start_mark.line + 1; }

static yaml_node_t *node_at(struct ycx *y, int id) { return yaml_document_get_node(&y->doc, id); }

/* A node's scalar text, or NULL when it is not a scalar. */
static const char *scalar(const yaml_node_t *n)
{
	return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static const char *kind_name(const yaml_node_t *n)
{
	return !n ? "nothing" : n->type == YAML_SCALAR_NODE ? "a scalar"
	       : n->type == YAML_SEQUENCE_NODE             ? "a list"
	                                                   : "a mapping";
}

/* YAML 1.1 booleans, as Slurm's parser takes them. */
static int boolean(const char *s)
{
	static const char *const t[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On",
	                                "ON", "y", "Y"};
	static const char *const f[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off",
	                                "OFF", "n", "N"};
	for (size_t i = 0; s && i < sizeof t / sizeof *t; i++) {
		if (!strcmp(s, t[i]))
			return 1;
		if (!strcmp(s, f[i]))
			return 0;
	}
	return -1;
}

/* Append text to the generated configuration. */
static int put(struct ycx *y, const char *s, size_t n)
{
	if (n > SIZE_MAX - y->len - 1 || tp_grow(y->a, (void **)&y->conf, &y->cap, y->len + n + 1, 1))
		return yfail(y, TP_ENOMEM, "out of memory reading topology.yaml");
	memcpy(y->conf + y->len, s, n);
	y->len += n;
	y->conf[y->len] = '\0';
	return 0;
}

static int puts_(struct ycx *y, const char *s) { return put(y, s, strlen(s)); }

/* End a generated line that came from YAML line `line`. */
static int end_line(struct ycx *y, unsigned line)
{
	if (tp_grow(y->a, (void **)&y->lines, &y->cap_lines, y->nlines + 1, sizeof *y->lines))
		return yfail(y, TP_ENOMEM, "out of memory reading topology.yaml");
	y->lines[y->nlines++] = line;
	return put(y, "\n", 1);
}

/* ` Key="value"`: a scalar, or a list of scalars joined by commas (a hostlist). */
static int put_value(struct ycx *y, const char *key, const char *what, yaml_node_t *v)
{
	/* An empty value (`nodes:`, `nodes: []`, `nodes: ""`) is as if the key were absent. */
	if ((v->type == YAML_SEQUENCE_NODE &&
	     v->data.sequence.items.start == v->data.sequence.items.top) ||
	    (v->type == YAML_SCALAR_NODE && !*scalar(v)))
		return 0;
	int rc = puts_(y, " ");
	if (!rc)
		rc = puts_(y, key);
	if (!rc)
		rc = puts_(y, "=\"");
	if (v->type == YAML_MAPPING_NODE)
		return yfail(y, TP_EPARSE, "line %u: topology '%s': %s is a mapping; expected a "
		             "hostlist or a list of names", line_of(v), y->topo, what);
	yaml_node_item_t *it = v->type == YAML_SEQUENCE_NODE ? v->data.sequence.items.start : NULL;
	yaml_node_item_t *end = it ? v->data.sequence.items.top : NULL;
	for (bool first = true; !rc && (it ? it < end : first); first = false) {
		yaml_node_t *e = it ? node_at(y, *it++) : v;
		const char *s = scalar(e);
		if (!s)
			return yfail(y, TP_EPARSE, "line %u: topology '%s': an item of %s is %s; expected "
			             "a name", line_of(e), y->topo, what, kind_name(e));
		if (strpbrk(s, "\"\n\r\\#"))
			return yfail(y, TP_EPARSE, "line %u: topology '%s': %s '%.200s' holds a quote, "
			             "backslash, '#' or line break", line_of(e), y->topo, what, s);
		if (!first)
			rc = puts_(y, ",");
		if (!rc)
			rc = puts_(y, s);
	}
	return rc ? rc : puts_(y, "\"");
}

/* One switch or block entry: `switch`/`block` (required), `children` (switches only),
 * `nodes`. */
static int read_entry(struct ycx *y, yaml_node_t *e, bool tree)
{
	const char *what = tree ? "switch" : "block";
	if (e->type != YAML_MAPPING_NODE)
		return yfail(y, TP_EPARSE, "line %u: topology '%s': a %s entry is %s; expected a "
		             "mapping (%s: NAME, %snodes: HOSTLIST)", line_of(e), y->topo, what,
		             kind_name(e), what, tree ? "children: HOSTLIST, " : "");
	yaml_node_t *name = NULL, *kids = NULL, *nodes = NULL;
	for (yaml_node_pair_t *p = e->data.mapping.pairs.start; p < e->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node_at(y, p->key), *v = node_at(y, p->value);
		const char *ks = scalar(k);
		yaml_node_t **slot = !ks                        ? NULL
		                     : !strcmp(ks, what)         ? &name
		                     : tree && !strcmp(ks, "children") ? &kids
		                     : !strcmp(ks, "nodes")      ? &nodes
		                                                 : NULL;
		if (!slot)
			return yfail(y, TP_EPARSE, "line %u: topology '%s': unknown key '%.100s' in a %s "
			             "(expected %s, %snodes)", line_of(k), y->topo, ks ? ks : "?", what,
			             what, tree ? "children, " : "");
		if (*slot)
			return yfail(y, TP_EPARSE, "line %u: topology '%s': %s given twice in one %s",
			             line_of(k), y->topo, ks, what);
		*slot = v;
	}
	if (!name || !scalar(name) || !*scalar(name))
		return yfail(y, TP_EPARSE, "line %u: topology '%s': a %s entry without a %s name",
		             line_of(e), y->topo, what, what);
	int rc = put_value(y, tree ? "SwitchName" : "BlockName", what, name);
	if (!rc && kids)
		rc = put_value(y, "Switches", "children", kids);
	if (!rc && nodes)
		rc = put_value(y, "Nodes", "nodes", nodes);
	return rc ? rc : end_line(y, line_of(e));
}

/* block_sizes: a list of numbers (or one scalar "4,16"). */
static int read_block_sizes(struct ycx *y, yaml_node_t *v)
{
	int rc = puts_(y, "BlockSizes=");
	if (v->type == YAML_SCALAR_NODE)
		rc = rc ? rc : puts_(y, scalar(v));
	else if (v->type == YAML_SEQUENCE_NODE)
		for (yaml_node_item_t *it = v->data.sequence.items.start;
		     !rc && it < v->data.sequence.items.top; it++) {
			yaml_node_t *e = node_at(y, *it);
			const char *s = scalar(e);
			if (!s || !*s || strspn(s, "0123456789") != strlen(s))
				return yfail(y, TP_EPARSE, "line %u: topology '%s': block_sizes holds '%.40s'; "
				             "expected positive numbers", line_of(e), y->topo, s ? s : "?");
			rc = it > v->data.sequence.items.start ? puts_(y, ",") : 0;
			rc = rc ? rc : puts_(y, s);
		}
	else
		return yfail(y, TP_EPARSE, "line %u: topology '%s': block_sizes is a mapping; "
		             "expected a list of numbers", line_of(v), y->topo);
	return rc ? rc : end_line(y, line_of(v));
}

/* The mapping of `tree:` (switches) or `block:` (block_sizes, blocks). */
static int read_plugin(struct ycx *y, yaml_node_t *m, bool tree)
{
	const char *list = tree ? "switches" : "blocks";
	if (m->type != YAML_MAPPING_NODE)
		return yfail(y, TP_EPARSE, "line %u: topology '%s': %s is %s; expected a mapping with "
		             "%s", line_of(m), y->topo, tree ? "tree" : "block", kind_name(m), list);
	yaml_node_t *entries = NULL, *sizes = NULL;
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node_at(y, p->key);
		const char *ks = scalar(k);
		if (ks && !strcmp(ks, list) && !entries)
			entries = node_at(y, p->value);
		else if (ks && !tree && !strcmp(ks, "block_sizes") && !sizes)
			sizes = node_at(y, p->value);
		else
			return yfail(y, TP_EPARSE, "line %u: topology '%s': unknown or repeated key "
			             "'%.100s' in %s (expected %s)", line_of(k), y->topo, ks ? ks : "?",
			             tree ? "tree" : "block", tree ? "switches" : "block_sizes, blocks");
	}
	if (!entries || entries->type != YAML_SEQUENCE_NODE)
		return yfail(y, TP_EPARSE, "line %u: topology '%s': %s needs a list '%s'", line_of(m),
		             y->topo, tree ? "tree" : "block", list);
	int rc = sizes ? read_block_sizes(y, sizes) : 0;
	for (yaml_node_item_t *it = entries->data.sequence.items.start;
	     !rc && it < entries->data.sequence.items.top; it++)
		rc = read_entry(y, node_at(y, *it), tree);
	return rc;
}

/* One topology's mapping: its one plugin. */
static int read_topology(struct ycx *y, yaml_node_t *t)
{
	static const char *const later[] = {"ring", "torus3d"};
	yaml_node_t *plugin = NULL;
	bool tree = false;
	for (yaml_node_pair_t *p = t->data.mapping.pairs.start; p < t->data.mapping.pairs.top; p++) {
		yaml_node_t *k = node_at(y, p->key), *v = node_at(y, p->value);
		const char *ks = scalar(k);
		if (ks && (!strcmp(ks, "topology") || !strcmp(ks, "cluster_default")))
			continue;
		for (size_t i = 0; ks && i < sizeof later / sizeof *later; i++)
			if (!strcmp(ks, later[i]))
				return yfail(y, TP_EPARSE, "line %u: topology '%s' is a %s topology (Slurm's "
				             "topology/%s), recognised but not yet supported; this importer "
				             "reads tree and block topologies", line_of(k), y->topo, ks, ks);
		if (ks && !strcmp(ks, "flat"))
			return yfail(y, TP_EPARSE, "line %u: topology '%s' is flat (topology/flat): it "
			             "lists no switches or blocks, so there is nothing to import",
			             line_of(k), y->topo);
		if (!ks || (strcmp(ks, "tree") && strcmp(ks, "block")))
			return yfail(y, TP_EPARSE, "line %u: topology '%s': unknown key '%.100s' (expected "
			             "topology, cluster_default, tree, block, flat, ring or torus3d)",
			             line_of(k), y->topo, ks ? ks : "?");
		if (plugin)
			return yfail(y, TP_EPARSE, "line %u: topology '%s' defines more than one of tree "
			             "and block", line_of(k), y->topo);
		plugin = v;
		tree = !strcmp(ks, "tree");
	}
	if (!plugin)
		return yfail(y, TP_EPARSE, "line %u: topology '%s' has no tree or block", line_of(t),
		             y->topo);
	return read_plugin(y, plugin, tree);
}

/* The value of key `key` in mapping m, or NULL. */
static yaml_node_t *lookup(struct ycx *y, yaml_node_t *m, const char *key)
{
	for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
		const char *ks = scalar(node_at(y, p->key));
		if (ks && !strcmp(ks, key))
			return node_at(y, p->value);
	}
	return NULL;
}

/* Check every topology's shape and name; pick the one to read. */
static int choose(struct ycx *y, const char *want, yaml_node_t **out)
{
	yaml_node_t *root = yaml_document_get_root_node(&y->doc);
	if (!root)
		return yfail(y, TP_EPARSE, "the YAML document is empty (a topology.yaml is a list of "
		             "topologies)");
	if (root->type != YAML_SEQUENCE_NODE)
		return yfail(y, TP_EPARSE, "line %u: a topology.yaml is a list of topologies "
		             "('- topology: NAME'), not %s", line_of(root), kind_name(root));
	yaml_node_t *first = NULL, *dflt = NULL, *named = NULL;
	for (yaml_node_item_t *it = root->data.sequence.items.start;
	     it < root->data.sequence.items.top; it++) {
		yaml_node_t *t = node_at(y, *it);
		yaml_node_pair_t *p0 = t->type == YAML_MAPPING_NODE ? t->data.mapping.pairs.start : NULL;
		const char *k0 = p0 && p0 < t->data.mapping.pairs.top ? scalar(node_at(y, p0->key)) : NULL;
		const char *name = k0 && !strcmp(k0, "topology") ? scalar(node_at(y, p0->value)) : NULL;
		if (!name || !*name)
			return yfail(y, TP_EPARSE, "line %u: a topology of the list is %s without "
			             "'topology: NAME' as its first key", line_of(t), kind_name(t));
		yaml_node_t *cd = lookup(y, t, "cluster_default");
		int isdef = cd ? boolean(scalar(cd)) : 0;
		if (isdef < 0)
			return yfail(y, TP_EPARSE, "line %u: topology '%.200s': cluster_default is "
			             "'%.40s', not true or false", line_of(cd), name,
			             scalar(cd) ? scalar(cd) : kind_name(cd));
		first = first ? first : t;
		dflt = dflt || !isdef ? dflt : t;
		named = named || !want || strcmp(want, name) ? named : t;
	}
	if (!first)
		return yfail(y, TP_EPARSE, "line %u: the list of topologies is empty", line_of(root));
	if (want && !named)
		return yfail(y, TP_EPARSE, "no topology named '%.200s' in the file", want);
	*out = want ? named : dflt ? dflt : first;
	y->topo = scalar(lookup(y, *out, "topology"));
	return 0;
}

/* Copy msg to out (outlen bytes), each "line N" of the generated text replaced by the YAML
 * line it came from. */
static void remap_lines(const struct ycx *y, const char *msg, char *out, size_t outlen)
{
	size_t n = 0;
	while (*msg && n + 1 < outlen) {
		if (!strncmp(msg, "line ", 5) && msg[5] >= '0' && msg[5] <= '9') {
			char *end;
			unsigned long l = strtoul(msg + 5, &end, 10);
			if (l >= 1 && l <= y->nlines) {
				int k = snprintf(out + n, outlen - n, "line %u", y->lines[l - 1]);
				n = k < 0 || (size_t)k >= outlen - n ? outlen - 1 : n + (size_t)k;
				msg = end;
				continue;
			}
		}
		out[n++] = *msg++;
	}
	out[n] = '\0';
}

static int load(struct ycx *y, const char *text, size_t len)
{
	yaml_parser_t parser;
	if (!yaml_parser_initialize(&parser))
		return yfail(y, TP_ENOMEM, "out of memory starting the YAML parser");
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	int ok = yaml_parser_load(&parser, &y->doc);
	int rc = 0;
	if (!ok) {
		rc = parser.error == YAML_MEMORY_ERROR ? TP_ENOMEM : TP_EPARSE;
		yfail(y, rc, "line %zu, column %zu: not valid YAML: %s%s%s",
		      parser.problem_mark.line + 1, parser.problem_mark.column + 1,
		      parser.problem ? parser.problem : "error",
		      parser.context ? " " : "", parser.context ? parser.context : "");
	}
	yaml_parser_delete(&parser);
	return rc;
}

/* Read the chosen topology into topology.conf lines and import those. */
static int convert_and_import(struct ycx *y, tp_topology_builder **out, unsigned gpus,
                              const tp_allocator *alloc, const tp_slurm_options *opts)
{
	yaml_node_t *t = NULL;
	int rc = choose(y, opts && opts->version >= 2 ? opts->topology : NULL, &t);
	if (!rc)
		rc = read_topology(y, t);
	if (rc)
		return rc;
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	if (opts)
		memcpy(&o, opts, opts->version >= 2 ? sizeof o : offsetof(tp_slurm_options, warnbuf));
	o.version = TP_SLURM_OPTIONS_VERSION;
	char *warn = NULL;
	if (o.warnbuf && o.warnlen) {
		warn = tp_malloc(y->a, o.warnlen);
		if (!warn)
			return yfail(y, TP_ENOMEM, "out of memory reading topology.yaml");
		o.warnbuf = warn;
	}
	char msg[1024];
	rc = tp_topology_builder_from_slurm_ext(out, y->conf ? y->conf : "", y->len, gpus, alloc,
	                                        &o, msg, sizeof msg);
	if (warn) {
		remap_lines(y, warn, opts->warnbuf, opts->warnlen);
		tp_free(y->a, warn);
	}
	if (rc) {
		char where[1024];
		remap_lines(y, msg, where, sizeof where);
		yfail(y, rc, "topology '%.200s': %s", y->topo, where);
	}
	return rc;
}

int tp_topology_builder_from_slurm_yaml(tp_topology_builder **out, const char *yaml, size_t len,
                                        unsigned gpus_per_node, const tp_allocator *alloc,
                                        const tp_slurm_options *opts, char *errbuf,
                                        size_t errlen)
{
	tp_allocator a = tp_alloc_resolve(alloc);
	struct ycx y = {.a = &a, .err = errbuf, .errlen = errlen};
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (opts && opts->version >= 2 && opts->warnbuf && opts->warnlen)
		opts->warnbuf[0] = '\0';
	if (!out)
		return yfail(&y, TP_EINVAL, "out is NULL");
	*out = NULL;
	if (!yaml)
		return yfail(&y, TP_EINVAL, "yaml is NULL");
	if (!tp_alloc_valid(alloc))
		return yfail(&y, TP_EINVAL, "alloc lacks a function");
	if (gpus_per_node < 1 || gpus_per_node > TP_MAX_NODE_DEVICES)
		return yfail(&y, TP_EINVAL, "gpus_per_node %u is not in 1..%d", gpus_per_node,
		             TP_MAX_NODE_DEVICES);
	if (opts && (opts->version < 1 || opts->version > TP_SLURM_OPTIONS_VERSION))
		return yfail(&y, TP_EINVAL, "opts.version %u is not 1 to %d", opts->version,
		             TP_SLURM_OPTIONS_VERSION);
	if (len > YAML_MAX_LEN)
		return yfail(&y, TP_ELIMIT, "the YAML text is %zu bytes, more than %zu", len,
		             YAML_MAX_LEN);
	if (memchr(yaml, '\0', len))
		return yfail(&y, TP_EPARSE, "a NUL byte in the YAML text");
	int rc = load(&y, yaml, len);
	if (rc)
		return rc;
	rc = convert_and_import(&y, out, gpus_per_node, alloc, opts);
	yaml_document_delete(&y.doc);
	tp_free(y.a, y.conf);
	tp_free(y.a, y.lines);
	return rc;
}
