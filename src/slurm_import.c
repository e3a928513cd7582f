/* SPDX-License-Identifier: MIT */
/*
 * Slurm importer: a topology builder from the text of a topology.conf (tree or block plugin;
 * see topoplace-slurm.h for the levels it makes).
 *
 * Three steps. Reading splits the text into logical lines (comments cut, continuations joined)
 * and records every SwitchName / BlockName line with its unexpanded hostlists. Resolving expands
 * the hostlists, checks names, parents and cycles, and computes levels. Building creates the
 * builder and adds every node with its path. All three work on private state, so a failure
 * leaves nothing behind; Judy maps (name -> record) catch names given twice.
 */
#include "topoplace-slurm.h"

#include <Judy.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "slurm_internal.h"

/* ---- reading lines ------------------------------------------------------------------------ */

struct kv {
	const char *key, *val;
	size_t klen, vlen;
};

static bool key_is(const struct kv *kv, const char *name)
{
	return kv->klen == strlen(name) && strncasecmp(kv->key, name, kv->klen) == 0;
}

static bool is_blank(char ch) { return ch == ' ' || ch == '\t' || ch == '\r'; }

/* Split a logical line into Key=Value pairs (blanks around '=' and "quoted" values allowed). */
static int split_pairs(struct conf *c, unsigned line, char *s, struct kv *kv, unsigned *n)
{
	*n = 0;
	for (;;) {
		while (is_blank(*s))
			s++;
		if (!*s)
			return 0;
		if (*n == MAX_KEYS)
			return tp_sl_fail(c, TP_EPARSE, "line %u: more than %d keys", line, MAX_KEYS);
		struct kv *k = &kv[(*n)++];
		k->key = s;
		while (isalnum((unsigned char)*s) || *s == '_' || *s == '.')
			s++;
		k->klen = (size_t)(s - k->key);
		while (is_blank(*s))
			s++;
		if (k->klen == 0 || *s != '=')
			return tp_sl_fail(c, TP_EPARSE, "line %u: expected Key=Value at '%.40s'", line, k->key);
		s++;
		while (is_blank(*s))
			s++;
		if (*s == '"') {
			k->val = ++s;
			while (*s && *s != '"')
				s++;
			if (!*s)
				return tp_sl_fail(c, TP_EPARSE, "line %u: unclosed '\"' after %.*s=", line,
				            (int)k->klen, k->key);
			k->vlen = (size_t)(s++ - k->val);
		} else {
			k->val = s;
			while (*s && !is_blank(*s))
				s++;
			k->vlen = (size_t)(s - k->val);
		}
		if (k->vlen == 0)
			return tp_sl_fail(c, TP_EPARSE, "line %u: %.*s has an empty value", line, (int)k->klen,
			            k->key);
	}
}

/* The plugin a line belongs to; mixing both in one file is refused. */
static int set_kind(struct conf *c, unsigned line, enum kind k, const char *key)
{
	if (c->kind == KIND_NONE) {
		c->kind = k;
		c->kind_line = line;
		return 0;
	}
	if (c->kind == k)
		return 0;
	return tp_sl_fail(c, TP_EPARSE, "line %u: %s line in a %s topology (line %u); a topology.conf "
	            "describes one plugin: tree, block or ring", line, key,
	            c->kind == KIND_TREE ? "tree (SwitchName)"
	            : c->kind == KIND_BLOCK ? "block (BlockName)" : "ring (RingName)", c->kind_line);
}

/* Check that a name is one the builder takes. */
static int check_name(struct conf *c, unsigned line, const char *what, const char *name)
{
	const char *why = tp_name_problem(name, true);
	if (why)
		return tp_sl_fail(c, TP_EPARSE, "line %u: %s '%.200s' %s", line, what, name, why);
	return 0;
}

/* Record a SwitchName or BlockName line. */
static int read_record(struct conf *c, unsigned line, const struct kv *kv, unsigned n,
                       enum kind k)
{
	const char *what = k == KIND_TREE ? "switch" : k == KIND_BLOCK ? "block" : "ring";
	struct rec r = {.nodes = SIZE_MAX, .kids = SIZE_MAX, .line = line, .parent = NONE};
	int rc = tp_sl_pool_put(c, &c->text, kv[0].val, kv[0].vlen, &r.name);
	if (rc)
		return rc;
	rc = check_name(c, line, what, text_at(c, r.name));
	for (unsigned i = 1; i < n && !rc; i++) {
		size_t *slot = NULL;
		if (key_is(&kv[i], "Nodes"))
			slot = &r.nodes;
		else if (k == KIND_TREE && key_is(&kv[i], "Switches"))
			slot = &r.kids;
		else if (k == KIND_TREE && (key_is(&kv[i], "LinkSpeed") || key_is(&kv[i], "Level")))
			continue; /* Level= is what scontrol show topology prints; levels are computed */
		if (!slot)
			return tp_sl_fail(c, TP_EPARSE, "line %u: unknown key '%.*s' on a %s line", line,
			            (int)kv[i].klen, kv[i].key,
			            k == KIND_TREE ? "SwitchName" : k == KIND_BLOCK ? "BlockName" : "RingName");
		if (*slot != SIZE_MAX)
			return tp_sl_fail(c, TP_EPARSE, "line %u: %.*s given twice", line, (int)kv[i].klen,
			            kv[i].key);
		rc = tp_sl_pool_put(c, &c->text, kv[i].val, kv[i].vlen, slot);
	}
	if (rc)
		return rc;
	/* As Slurm 25.x: an empty leaf switch is warned about, an empty block is a gap (refused
	 * with AllowGaps=no, in build_blocks), and a switch may hold nodes and switches. */
	if (r.nodes == SIZE_MAX && r.kids == SIZE_MAX && k == KIND_TREE)
		tp_sl_warn(c, "line %u: switch '%s' has no Nodes or Switches (an empty leaf switch)", line,
		     text_at(c, r.name));
	if (tp_grow(c->a, (void **)&c->rec, &c->cap_rec, c->nrec + 1, sizeof *c->rec))
		return tp_sl_nomem(c);
	uintptr_t old = 0;
	rc = tp_sl_map_put(c, &c->rec_by_name, text_at(c, r.name), c->nrec + 1, &old);
	if (rc)
		return rc;
	if (old)
		return tp_sl_fail(c, TP_EPARSE, "line %u: %s '%s' is defined twice (first at line %u)", line,
		            what, text_at(c, r.name), c->rec[old - 1].line);
	c->rec[c->nrec++] = r;
	return 0;
}

/* BlockSizes=4,8,16: sizes in nodes, checked later against the base block size. */
static int read_block_sizes(struct conf *c, unsigned line, const struct kv *kv)
{
	if (c->nsizes)
		return tp_sl_fail(c, TP_EPARSE, "line %u: BlockSizes given twice (first at line %u)", line,
		            c->sizes_line);
	const char *p = kv->val, *end = kv->val + kv->vlen;
	for (;;) {
		unsigned long v;
		int w;
		if (tp_sl_read_number(&p, end, &v, &w) || v == 0 || (p < end && *p != ','))
			return tp_sl_fail(c, TP_EPARSE, "line %u: BlockSizes '%.*s' is not a list of positive "
			            "numbers", line, (int)kv->vlen, kv->val);
		if (c->nsizes == MAX_BLOCK_LEVELS)
			return tp_sl_fail(c, TP_EPARSE, "line %u: BlockSizes has more than %d sizes", line,
			            MAX_BLOCK_LEVELS);
		c->sizes[c->nsizes++] = v;
		if (p == end)
			break;
		p++;
	}
	c->sizes_line = line;
	return 0;
}

/* AllowGaps=yes|no (Slurm 25.05; yes by default): whether blocks may be empty or smaller
 * than the base block. */
static int read_allow_gaps(struct conf *c, unsigned line, const struct kv *kv)
{
	static const char *const yes[] = {"yes", "true", "1", "y"}, *const no[] = {"no", "false",
	                                                                            "0", "n"};
	if (c->allow_gaps >= 0)
		return tp_sl_fail(c, TP_EPARSE, "line %u: AllowGaps given twice (first at line %u)", line,
		            c->gaps_line);
	for (unsigned i = 0; i < 4; i++) {
		if (kv->vlen == strlen(yes[i]) && !strncasecmp(kv->val, yes[i], kv->vlen))
			c->allow_gaps = 1;
		if (kv->vlen == strlen(no[i]) && !strncasecmp(kv->val, no[i], kv->vlen))
			c->allow_gaps = 0;
	}
	if (c->allow_gaps < 0)
		return tp_sl_fail(c, TP_EPARSE, "line %u: AllowGaps '%.*s' is not yes or no", line,
		            (int)kv->vlen, kv->val);
	c->gaps_line = line;
	return 0;
}

/* BlockLevels=0-4 (Slurm 23.11's form of BlockSizes): aggregation levels as powers of two of
 * the base block, a list of numbers and ranges from 0 to 15. */
static int read_block_levels(struct conf *c, unsigned line, const struct kv *kv)
{
	if (c->levels || c->nsizes)
		return tp_sl_fail(c, TP_EPARSE, "line %u: BlockLevels given with BlockSizes or twice (first "
		            "at line %u)", line, c->levels ? c->levels_line : c->sizes_line);
	const char *p = kv->val, *end = kv->val + kv->vlen;
	for (;;) {
		unsigned long lo, hi;
		int w;
		if (tp_sl_read_number(&p, end, &lo, &w))
			break;
		hi = lo;
		if (p < end && *p == '-' && (++p, tp_sl_read_number(&p, end, &hi, &w)))
			break;
		if (hi < lo || hi > 15 || (p < end && *p != ','))
			break;
		for (unsigned long l = lo; l <= hi; l++)
			c->levels |= 1u << l;
		if (p == end) {
			c->levels |= 1u; /* the blocks themselves are always a level here */
			c->levels_line = line;
			return 0;
		}
		p++;
	}
	return tp_sl_fail(c, TP_EPARSE, "line %u: BlockLevels '%.*s' is not a list of levels 0 to 15 "
	            "(such as 0-4)", line, (int)kv->vlen, kv->val);
}

/* The file-wide keys of the block plugin: BlockSizes, BlockLevels, AllowGaps. */
static int read_block_key(struct conf *c, unsigned line, const struct kv *kv, unsigned n,
                          const char *key)
{
	int rc = set_kind(c, line, KIND_BLOCK, key);
	if (!rc && n > 1)
		rc = tp_sl_fail(c, TP_EPARSE, "line %u: %s takes no other key", line, key);
	if (rc)
		return rc;
	if (key_is(kv, "AllowGaps"))
		return read_allow_gaps(c, line, kv);
	if (key_is(kv, "BlockLevels"))
		return read_block_levels(c, line, kv);
	if (c->levels)
		return tp_sl_fail(c, TP_EPARSE, "line %u: BlockSizes given with BlockLevels (line %u)", line,
		            c->levels_line);
	return read_block_sizes(c, line, kv);
}

static int read_line(struct conf *c, unsigned line, char *s)
{
	struct kv kv[MAX_KEYS];
	unsigned n;
	int rc = split_pairs(c, line, s, kv, &n);
	if (rc || n == 0)
		return rc;
	if (key_is(&kv[0], "SwitchName")) {
		rc = set_kind(c, line, KIND_TREE, "SwitchName");
		return rc ? rc : read_record(c, line, kv, n, KIND_TREE);
	}
	if (key_is(&kv[0], "BlockName")) {
		rc = set_kind(c, line, KIND_BLOCK, "BlockName");
		return rc ? rc : read_record(c, line, kv, n, KIND_BLOCK);
	}
	if (key_is(&kv[0], "BlockSizes") || key_is(&kv[0], "BlockLevels") ||
	    key_is(&kv[0], "AllowGaps"))
		return read_block_key(c, line, kv, n, key_is(&kv[0], "BlockSizes") ? "BlockSizes"
		                      : key_is(&kv[0], "AllowGaps") ? "AllowGaps" : "BlockLevels");
	if (key_is(&kv[0], "RingName")) {
		rc = set_kind(c, line, KIND_RING, "RingName");
		return rc ? rc : read_record(c, line, kv, n, KIND_RING);
	}
	if (key_is(&kv[0], "Include"))
		return tp_sl_fail(c, TP_EPARSE, "line %u: Include is not supported (the library reads no "
		            "files; pass the included text in the buffer)", line);
	return tp_sl_fail(c, TP_EPARSE, "line %u: unknown key '%.*s' (expected SwitchName, BlockName, "
	            "BlockSizes, BlockLevels, AllowGaps or RingName)", line, (int)kv[0].klen,
	            kv[0].key);
}

/* Append physical line [p, q) to the logical line, without its comment; a trailing '\\' is
 * removed and the next line follows directly, as Slurm joins them. */
static int append_physical(struct conf *c, const char *p, const char *q, size_t *n, bool *more)
{
	const char *hash = memchr(p, '#', (size_t)(q - p));
	if (hash)
		q = hash;
	while (q > p && (is_blank(q[-1]) || q[-1] == '\n'))
		q--;
	*more = q > p && q[-1] == '\\';
	if (*more)
		q--;
	size_t add = (size_t)(q - p);
	if (tp_grow(c->a, (void **)&c->line, &c->line_cap, *n + add + 1, 1))
		return tp_sl_nomem(c);
	memcpy(c->line + *n, p, add);
	*n += add;
	c->line[*n] = '\0';
	return 0;
}

/* Whether the text opens like a topology.yaml: its first line that is not blank or a comment
 * is "---" or starts with "- topology:" or "topology:". */
static bool looks_like_yaml(const char *p, const char *end)
{
	while (p < end) {
		const char *q = memchr(p, '\n', (size_t)(end - p));
		q = q ? q : end;
		while (p < q && is_blank(*p))
			p++;
		if (p < q && *p != '#') {
			size_t n = (size_t)(q - p);
			return (n >= 3 && !memcmp(p, "---", 3)) ||
			       (n >= 11 && !memcmp(p, "- topology:", 11)) ||
			       (n >= 9 && !memcmp(p, "topology:", 9));
		}
		p = q + 1;
	}
	return false;
}

static int read_all(struct conf *c, const char *conf, size_t len)
{
	if (looks_like_yaml(conf, conf + len))
		return tp_sl_fail(c, TP_EPARSE, "the text looks like a topology.yaml (YAML), not a "
		            "topology.conf (read it with tp_topology_builder_from_slurm_yaml())");
	const char *p = conf, *end = conf + len;
	unsigned lineno = 0, first = 0;
	size_t n = 0;
	bool more = false;
	const char *nul = memchr(conf, '\0', len);
	if (nul) {
		for (const char *q = conf; q < nul; q++)
			lineno += *q == '\n';
		return tp_sl_fail(c, TP_EPARSE, "line %u: a NUL byte in the text", lineno + 1);
	}
	while (p < end) {
		const char *q = memchr(p, '\n', (size_t)(end - p));
		q = q ? q + 1 : end;
		lineno++;
		if (!more) {
			first = lineno;
			n = 0;
		}
		int rc = append_physical(c, p, q, &n, &more);
		if (!rc && !more)
			rc = read_line(c, first, c->line);
		if (rc)
			return rc;
		p = q;
	}
	if (more)
		return read_line(c, first, c->line);
	return 0;
}

/* ---- resolving ---------------------------------------------------------------------------- */

struct node_ctx {
	uint32_t rec;
};

/* Whether switch `below` is in the subtree of switch `top` (bounded: the parents are not yet
 * checked for cycles). */
static bool in_subtree(const struct conf *c, uint32_t below, uint32_t top)
{
	for (size_t steps = 0; below != NONE && steps <= c->nrec; steps++, below = c->rec[below].parent)
		if (below == top)
			return true;
	return false;
}

/* A name of record r seen before, in record old: Slurm keeps a node once (its records hold
 * node bitmaps). A switch's Nodes that are in its subtree are the union scontrol show
 * topology prints: nothing to add. A name listed twice in one record is counted once; a node
 * on two leaf switches stays on the first. A node in two blocks is refused: blocks partition
 * the nodes here. */
static int node_seen(struct conf *c, uint32_t r, uint32_t old, const char *name)
{
	unsigned line = c->rec[r].line;
	if (old == r) {
		tp_sl_warn(c, "line %u: node '%s' is listed twice in '%s'; counted once", line, name,
		           rec_name(c, r));
		return 0;
	}
	if (c->kind == KIND_TREE && c->rec[r].kids != SIZE_MAX && in_subtree(c, old, r))
		return 0;
	if (c->kind == KIND_TREE) {
		tp_sl_warn(c, "line %u: node '%s' is on two leaf switches: '%s' (line %u) and '%s'; "
		           "kept on '%s'", line, name, rec_name(c, old), c->rec[old].line,
		           rec_name(c, r), rec_name(c, old));
		return 0;
	}
	return tp_sl_fail(c, TP_EPARSE, "line %u: node '%s' is in two %s: '%s' (line %u) and "
	                  "'%s'", line, name, c->kind == KIND_RING ? "rings" : "blocks",
	                  rec_name(c, old), c->rec[old].line, rec_name(c, r));
}

/* A node of record r: checked, listed once, stored. */
static int add_node_name(struct conf *c, void *ctx, const char *name)
{
	uint32_t r = ((struct node_ctx *)ctx)->rec;
	unsigned line = c->rec[r].line;
	uintptr_t old = tp_sl_map_get(c->node_by_name, name);
	if (old)
		return node_seen(c, r, (uint32_t)old - 1, name);
	if (c->nnode >= NODES_MAX)
		return tp_sl_fail(c, TP_ELIMIT, "line %u: more than %u nodes", line, NODES_MAX);
	/* The budgets are checked while reading, before a builder holds any of it. */
	if (c->nnode + 1 > c->max_nodes)
		return tp_sl_fail(c, TP_ELIMIT,
		            "line %u: more than %u nodes, the budget tp_slurm_options.max_nodes", line,
		            (unsigned)c->max_nodes);
	if ((uint64_t)(c->nnode + 1) * c->gpus > c->max_devices)
		return tp_sl_fail(c, TP_ELIMIT,
		            "line %u: %zu nodes of %u GPUs are %llu devices, more than the budget "
		            "tp_slurm_options.max_devices %u", line, c->nnode + 1, c->gpus,
		            (unsigned long long)(c->nnode + 1) * c->gpus, (unsigned)c->max_devices);
	int rc = check_name(c, line, "node", name);
	if (!rc)
		rc = tp_sl_map_put(c, &c->node_by_name, name, (uintptr_t)r + 1, &old);
	size_t off;
	if (!rc)
		rc = tp_sl_pool_put(c, &c->names, name, strlen(name), &off);
	if (!rc && tp_grow(c->a, (void **)&c->node, &c->cap_node, c->nnode + 1, sizeof *c->node))
		rc = tp_sl_nomem(c);
	if (!rc)
		c->node[c->nnode++] = off;
	return rc;
}

/* A child switch of record r: known, not r itself, with no other parent. */
static int add_kid_name(struct conf *c, void *ctx, const char *name)
{
	uint32_t r = ((struct node_ctx *)ctx)->rec;
	unsigned line = c->rec[r].line;
	uintptr_t k = tp_sl_map_get(c->rec_by_name, name);
	if (!k)
		return tp_sl_fail(c, TP_EPARSE, "line %u: switch '%s' lists unknown switch '%s'", line,
		            rec_name(c, r), name);
	uint32_t kid = (uint32_t)k - 1;
	if (kid == r)
		return tp_sl_fail(c, TP_EPARSE, "line %u: switch '%s' lists itself (a cycle)", line, name);
	/* Slurm accepts several parents (a fat tree: every spine lists every leaf); the tree
	 * here keeps the first and says so. */
	if (c->rec[kid].parent == r) {
		tp_sl_warn(c, "line %u: switch '%s' lists switch '%s' twice; counted once", line,
		     rec_name(c, r), name);
		return 0;
	}
	if (c->rec[kid].parent != NONE) {
		tp_sl_warn(c, "line %u: switch '%s' has several parents: '%s' (line %u) and '%s'; kept "
		     "below '%s'", line, name, rec_name(c, c->rec[kid].parent),
		     c->rec[c->rec[kid].parent].line, rec_name(c, r), rec_name(c, c->rec[kid].parent));
		return 0;
	}
	c->rec[kid].parent = r;
	return tp_sl_push_u32(c, &c->kid, &c->nkid, &c->cap_kid, kid);
}

static int expand_records(struct conf *c)
{
	/* Child switches first, then the nodes of leaf switches (and blocks), then those of
	 * switches that also list switches, so that their Nodes can be told apart from the
	 * union of their subtree (what scontrol show topology prints). */
	for (int pass = 0; pass < 3; pass++) {
		for (uint32_t r = 0; r < c->nrec; r++) {
			struct rec *x = &c->rec[r];
			struct node_ctx ctx = {r};
			int rc = 0;
			if (pass == 0 && x->kids != SIZE_MAX) {
				x->kid_first = (uint32_t)c->nkid;
				rc = tp_sl_hostlist_each(c, x->line, text_at(c, x->kids), add_kid_name, &ctx);
				c->rec[r].nkids = (uint32_t)c->nkid - c->rec[r].kid_first;
			}
			if (pass > 0 && x->nodes != SIZE_MAX && (x->kids != SIZE_MAX) == (pass == 2)) {
				x->node_first = (uint32_t)c->nnode;
				rc = tp_sl_hostlist_each(c, x->line, text_at(c, x->nodes), add_node_name,
				                         &ctx);
				x = &c->rec[r];
				x->nnodes = (uint32_t)c->nnode - x->node_first;
				if (!rc && pass == 2 && x->nnodes)
					tp_sl_warn(c, "line %u: switch '%s' has both Nodes and Switches; the "
					           "nodes below none of its switches stand below it at every "
					           "lower level", x->line, rec_name(c, r));
			}
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Name a cycle among the switches no root reaches, starting from switch s: "a -> b -> a",
 * each switch listing the next in its Switches=. */
static int cycle_error(struct conf *c, uint32_t s)
{
	/* Walk up nrec steps: then s is surely on the cycle. */
	for (size_t i = 0; i < c->nrec; i++)
		s = c->rec[s].parent;
	uint32_t walk[16];
	unsigned n = 0;
	uint32_t t = s;
	do {
		walk[n++] = t;
		t = c->rec[t].parent;
	} while (t != s && n < 16);
	char buf[256];
	size_t len = 0;
	for (unsigned i = n; i-- > 0 && len < sizeof buf;) {
		int k = snprintf(buf + len, sizeof buf - len, "%s -> ", rec_name(c, walk[i]));
		len = k < 0 ? sizeof buf : len + (size_t)k;
	}
	return tp_sl_fail(c, TP_EPARSE, "line %u: switches form a cycle (%.200s%s%s, each listing the "
	            "next)", c->rec[s].line, len < sizeof buf ? buf : "", t == s ? "" : "... -> ",
	            rec_name(c, walk[n - 1]));
}

/* Switches in breadth-first order from the roots (file order); levels from the leaves up. */
static int tree_levels(struct conf *c, uint32_t *order, int *top)
{
	size_t n = 0;
	for (uint32_t r = 0; r < c->nrec; r++)
		if (c->rec[r].parent == NONE)
			order[n++] = r;
	for (size_t i = 0; i < n; i++) {
		const struct rec *x = &c->rec[order[i]];
		for (uint32_t k = 0; k < x->nkids; k++)
			order[n++] = c->kid[x->kid_first + k];
	}
	if (n < c->nrec) {
		for (uint32_t r = 0; r < c->nrec; r++) {
			uint32_t s = r;
			size_t steps = 0;
			while (c->rec[s].parent != NONE && steps++ <= c->nrec)
				s = c->rec[s].parent;
			if (c->rec[s].parent != NONE)
				return cycle_error(c, r);
		}
	}
	*top = 0;
	for (size_t i = n; i-- > 0;) {
		struct rec *x = &c->rec[order[i]];
		x->level = 0;
		for (uint32_t k = 0; k < x->nkids; k++) {
			int l = c->rec[c->kid[x->kid_first + k]].level + 1;
			x->level = l > x->level ? l : x->level;
		}
		*top = x->level > *top ? x->level : *top;
	}
	if (*top + 2 > TP_MAX_LEVELS)
		return tp_sl_fail(c, TP_ELIMIT, "the switch tree has %d levels; at most %d fit with the node "
		            "level", *top + 1, TP_MAX_LEVELS - 1);
	return 0;
}

/* ---- building ------------------------------------------------------------------------------ */

static int add_nodes(struct conf *c, struct build *bd, uint32_t r, const char *const *path)
{
	const struct rec *x = &c->rec[r];
	for (uint32_t i = 0; i < x->nnodes; i++) {
		const char *name = name_at(c, c->node[x->node_first + i]);
		int rc = tp_topology_builder_add_node(bd->b, name, path, bd->gpus, NULL);
		if (rc)
			return tp_sl_fail(c, rc, "line %u: node '%s': %s", x->line, name,
			            tp_topology_builder_errmsg(bd->b));
	}
	return 0;
}

int tp_sl_create_builder(struct conf *c, struct build *bd)
{
	const char *names[TP_MAX_LEVELS];
	for (unsigned l = 0; l < bd->nlevels; l++)
		names[l] = bd->level_names[l];
	int rc = tp_topology_builder_create(&bd->b, names, bd->nlevels, c->a);
	if (rc)
		return tp_sl_fail(c, rc, "could not create the builder (%s)", tp_strerror(rc));
	/* The builder keeps the budgets for what the caller adds later. */
	if (tp_topology_builder_set_limits(bd->b, c->max_devices, c->max_nodes))
		return tp_sl_fail(c, TP_EINTERNAL, "internal error: %s",
		            tp_topology_builder_errmsg(bd->b));
	return 0;
}

/* The path of a leaf switch's nodes: at level k (Slurm level top - k), the switch of the
 * chain with the largest Slurm level not above it. */
static void tree_path(const struct conf *c, uint32_t leaf, int top, const char **path)
{
	uint32_t chain[TP_MAX_LEVELS];
	unsigned n = 0;
	for (uint32_t s = leaf; s != NONE && n < TP_MAX_LEVELS; s = c->rec[s].parent)
		chain[n++] = s;
	for (int k = top; k >= 0; k--) {
		unsigned pick = 0;
		for (unsigned i = 0; i < n; i++)
			if (c->rec[chain[i]].level <= k)
				pick = i;
		path[top - k] = rec_name(c, chain[pick]);
	}
}

static int build_tree(struct conf *c, struct build *bd)
{
	uint32_t *order = tp_mallocn(c->a, c->nrec, sizeof *order);
	if (!order)
		return tp_sl_nomem(c);
	int top = 0;
	int rc = tree_levels(c, order, &top);
	if (!rc) {
		bd->nlevels = (unsigned)top + 2;
		for (int k = top; k >= 0; k--)
			snprintf(bd->level_names[top - k], sizeof bd->level_names[0], "switch%d", k);
		snprintf(bd->level_names[top + 1], sizeof bd->level_names[0], "node");
		rc = tp_sl_create_builder(c, bd);
	}
	/* Depth-first from the roots in file order, children in listed order: `order` is
	 * reused as the stack. */
	size_t sp = 0;
	for (uint32_t r = (uint32_t)c->nrec; !rc && r-- > 0;)
		if (c->rec[r].parent == NONE)
			order[sp++] = r;
	while (!rc && sp > 0) {
		uint32_t s = order[--sp];
		const struct rec *x = &c->rec[s];
		if (x->nnodes > 0) {
			const char *path[TP_MAX_LEVELS];
			tree_path(c, s, top, path);
			rc = add_nodes(c, bd, s, path);
		}
		for (uint32_t k = x->nkids; k-- > 0;)
			order[sp++] = c->kid[x->kid_first + k];
	}
	tp_free(c->a, order);
	return rc;
}

/* The base-block counts of each block level, as Slurm computes them (block_record.c). */
static int block_levels(struct conf *c, unsigned long *mult, unsigned *nmult,
                        unsigned long *base)
{
	/* Without BlockSizes the base is the first block's node count (its first non-empty one
	 * where gaps are allowed). */
	*base = c->nsizes ? c->sizes[0] : 0;
	for (uint32_t r = 0; r < c->nrec && !*base; r++)
		*base = c->rec[r].nnodes;
	/* Slurm takes blocks that are all empty (dynamic nodes join them later), with or without
	 * BlockSizes; there is nothing to place on, so say why rather than fail the build. */
	if (c->nnode == 0)
		return tp_sl_fail(c, TP_EPARSE, "line %u: no block has nodes (Slurm accepts that "
		                  "for nodes added later; a topology to place on needs nodes)",
		                  c->rec[0].line);
	/* Slurm 25.05 allows gaps by default: blocks may be empty or smaller than the base. */
	for (uint32_t r = 0; r < c->nrec && c->allow_gaps == 0; r++)
		if (c->rec[r].nnodes < *base)
			return tp_sl_fail(c, TP_EPARSE, "line %u: block '%s' has %u nodes, fewer than the base "
			            "block size %lu (AllowGaps=no, line %u)", c->rec[r].line,
			            rec_name(c, r), c->rec[r].nnodes, *base, c->gaps_line);
	for (unsigned i = 0; i < c->nsizes; i++) {
		unsigned long m = c->sizes[i] / *base;
		if (c->sizes[i] % *base || (m & (m - 1)) || m > (1ul << 15))
			return tp_sl_fail(c, TP_EPARSE, "line %u: BlockSizes value %lu is not the base block "
			            "size %lu times a power of two up to 2^15", c->sizes_line,
			            c->sizes[i], *base);
		if (i && c->sizes[i] <= c->sizes[i - 1])
			return tp_sl_fail(c, TP_EPARSE, "line %u: BlockSizes must increase (%lu after %lu)",
			            c->sizes_line, c->sizes[i], c->sizes[i - 1]);
	}
	/* As Slurm: stop after the first size that holds every block. */
	*nmult = 0;
	uint32_t lv = c->nsizes ? 0 : c->levels ? c->levels : 0x1fu;
	for (unsigned i = 0; c->nsizes ? i < c->nsizes : i < 16; i++) {
		if (!c->nsizes && !(lv & (1u << i)))
			continue;
		mult[(*nmult)++] = c->nsizes ? c->sizes[i] / *base : 1ul << i;
		if (mult[*nmult - 1] >= c->nrec)
			break;
	}
	if (*nmult + 1 > TP_MAX_LEVELS)
		return tp_sl_fail(c, TP_ELIMIT, "%u block levels and the node level are more than %d levels",
		            *nmult, TP_MAX_LEVELS);
	return 0;
}

/* Whether numbered name s splits as prefix + digits; *digits is where the digits start. */
static bool split_number(const char *s, size_t *digits)
{
	size_t n = strlen(s), i = n;
	while (i > 0 && isdigit((unsigned char)s[i - 1]) && n - i < 18)
		i--;
	*digits = i;
	return i < n;
}

/* Digits that may stand in one bracket together: same padding class. */
static bool same_width(const char *a, const char *b)
{
	bool pa = a[0] == '0' && a[1], pb = b[0] == '0' && b[1];
	return pa || pb ? strlen(a) == strlen(b) : true;
}

/* Slurm's name for an aggregate of blocks first..first+n-1: their hostlist ("b[1-4]").
 * Returns false when it would not fit in TP_MAX_NAME bytes. */
static bool ranged_name(const struct conf *c, uint32_t first, uint32_t n, char *out)
{
	size_t len = 0;
	out[0] = '\0';
	for (uint32_t i = first; i < first + n;) {
		const char *s = rec_name(c, i);
		size_t d;
		uint32_t j = i + 1;
		int k = 0;
		if (split_number(s, &d)) {
			while (j < first + n) {
				const char *t = rec_name(c, j);
				size_t e;
				if (!split_number(t, &e) || e != d || strncmp(s, t, d) ||
				    !same_width(s + d, t + e))
					break;
				j++;
			}
		}
		if (j == i + 1) {
			k = snprintf(out + len, TP_MAX_NAME + 1 - len, "%s%s", len ? "," : "", s);
		} else {
			k = snprintf(out + len, TP_MAX_NAME + 1 - len, "%s%.*s[", len ? "," : "", (int)d,
			             s);
			for (uint32_t r = i; r < j && k >= 0 && len + (size_t)k <= TP_MAX_NAME;) {
				/* a run of consecutive numbers */
				const char *lo = rec_name(c, r) + d;
				unsigned long v = strtoul(lo, NULL, 10);
				uint32_t e = r + 1;
				while (e < j && strtoul(rec_name(c, e) + d, NULL, 10) == v + (e - r))
					e++;
				const char *hi = rec_name(c, e - 1) + d;
				size_t at = len + (size_t)k;
				int m = e - r > 1 ? snprintf(out + at, TP_MAX_NAME + 1 - at, "%s%s-%s",
				                             r > i ? "," : "", lo, hi)
				                  : snprintf(out + at, TP_MAX_NAME + 1 - at, "%s%s",
				                             r > i ? "," : "", lo);
				k = m < 0 ? -1 : k + m;
				r = e;
			}
			if (k >= 0 && len + (size_t)k < TP_MAX_NAME) {
				out[len + (size_t)k] = ']';
				k++;
				out[len + (size_t)k] = '\0';
			} else {
				k = -1;
			}
		}
		if (k < 0 || len + (size_t)k > TP_MAX_NAME)
			return false;
		len += (size_t)k;
		i = j;
	}
	return true;
}

/* Names of the domains of every aggregation level: agg[j][group] offsets into names. */
static int block_domains(struct conf *c, const unsigned long *mult, unsigned nmult,
                         unsigned long base, size_t **agg)
{
	uint32_t nb = (uint32_t)c->nrec;
	char name[TP_MAX_NAME + 1];
	for (unsigned j = 1; j < nmult; j++) {
		unsigned long m = mult[j];
		size_t ngroups = (nb + m - 1) / m;
		agg[j] = tp_mallocn(c->a, ngroups, sizeof **agg);
		if (!agg[j])
			return tp_sl_nomem(c);
		for (size_t g = 0; g < ngroups; g++) {
			uint32_t first = (uint32_t)(g * m);
			uint32_t left = nb - first;
			size_t off;
			int rc;
			if (m > left && mult[j - 1] >= left) {
				/* Slurm makes no aggregate here: the domain below stands for it. */
				size_t below = j > 1 ? agg[j - 1][first / mult[j - 1]] : SIZE_MAX;
				const char *s = j > 1 ? name_at(c, below) : rec_name(c, first);
				snprintf(name, sizeof name, "%s", s);
			} else if (!ranged_name(c, first, left < m ? left : (uint32_t)m, name)) {
				snprintf(name, sizeof name, "agg%lu-%zu", m * base, g);
			}
			rc = tp_sl_pool_put(c, &c->names, name, strlen(name), &off);
			if (rc)
				return rc;
			agg[j][g] = off;
		}
	}
	return 0;
}

static int build_blocks(struct conf *c, struct build *bd)
{
	unsigned long mult[MAX_BLOCK_LEVELS], base = 0;
	unsigned nmult = 0;
	int rc = block_levels(c, mult, &nmult, &base);
	if (rc)
		return rc;
	size_t *agg[MAX_BLOCK_LEVELS] = {NULL};
	rc = block_domains(c, mult, nmult, base, agg);
	if (!rc) {
		bd->nlevels = nmult + 1;
		for (unsigned j = nmult; j-- > 1;)
			snprintf(bd->level_names[nmult - 1 - j], sizeof bd->level_names[0], "agg%lu",
			         mult[j] * base);
		snprintf(bd->level_names[nmult - 1], sizeof bd->level_names[0], "block");
		snprintf(bd->level_names[nmult], sizeof bd->level_names[0], "node");
		rc = tp_sl_create_builder(c, bd);
	}
	for (uint32_t r = 0; !rc && r < c->nrec; r++) {
		const char *path[TP_MAX_LEVELS];
		for (unsigned j = nmult; j-- > 1;)
			path[nmult - 1 - j] = name_at(c, agg[j][r / mult[j]]);
		path[nmult - 1] = rec_name(c, r);
		rc = add_nodes(c, bd, r, path);
	}
	for (unsigned j = 0; j < nmult; j++)
		tp_free(c->a, agg[j]);
	return rc;
}

/* ---- entry point -------------------------------------------------------------------------- */

static void conf_free(struct conf *c)
{
	PJError_t err = NULL;
	JudySLFreeArray(&c->rec_by_name, err);
	JudySLFreeArray(&c->node_by_name, err);
	tp_free(c->a, c->text.s);
	tp_free(c->a, c->names.s);
	tp_free(c->a, c->rec);
	tp_free(c->a, c->node);
	tp_free(c->a, c->kid);
	tp_free(c->a, c->line);
}

static int resolve_and_build(struct conf *c, struct build *bd)
{
	if (c->kind == KIND_NONE || c->nrec == 0)
		return tp_sl_fail(c, TP_EPARSE, c->kind == KIND_BLOCK
		                              ? "BlockSizes without any BlockName line"
		                              : "no SwitchName, BlockName or RingName line");
	int rc = expand_records(c);
	if (rc)
		return rc;
	if (c->kind == KIND_TREE && c->nnode == 0)
		return tp_sl_fail(c, TP_EPARSE, "no SwitchName or BlockName line with nodes (every "
		                  "switch is empty)");
	return c->kind == KIND_TREE   ? build_tree(c, bd)
	       : c->kind == KIND_BLOCK ? build_blocks(c, bd)
	                               : tp_sl_build_rings(c, bd);
}

int tp_topology_builder_from_slurm(tp_topology_builder **out, const char *conf, size_t len,
                                   unsigned gpus_per_node, const tp_allocator *alloc,
                                   char *errbuf, size_t errlen)
{
	return tp_topology_builder_from_slurm_ext(out, conf, len, gpus_per_node, alloc, NULL,
	                                          errbuf, errlen);
}

/* Budgets from the options: 0 or a missing field (an older version) is the default. */
static int slurm_budgets(struct conf *c, const tp_slurm_options *o)
{
	c->max_devices = TP_DEFAULT_MAX_DEVICES;
	c->max_nodes = TP_DEFAULT_MAX_NODES;
	if (!o)
		return 0;
	if (o->version < 1 || o->version > TP_SLURM_OPTIONS_VERSION)
		return tp_sl_fail(c, TP_EINVAL, "opts.version %u is not 1 to %d", o->version,
		            TP_SLURM_OPTIONS_VERSION);
	if (o->max_devices)
		c->max_devices = o->max_devices;
	if (o->max_nodes)
		c->max_nodes = o->max_nodes;
	if (c->max_devices > TP_LIMIT_MAX_DEVICES || c->max_nodes > TP_LIMIT_MAX_DEVICES)
		return tp_sl_fail(c, TP_EINVAL, "opts.max_devices %u or opts.max_nodes %u is above %u",
		            (unsigned)c->max_devices, (unsigned)c->max_nodes,
		            (unsigned)TP_LIMIT_MAX_DEVICES);
	if (o->version >= 2 && o->warnbuf && o->warnlen) {
		c->warn = o->warnbuf;
		c->warnlen = o->warnlen;
		c->warn[0] = '\0';
	}
	return 0;
}

int tp_topology_builder_from_slurm_ext(tp_topology_builder **out, const char *conf, size_t len,
                                       unsigned gpus_per_node, const tp_allocator *alloc,
                                       const tp_slurm_options *opts, char *errbuf,
                                       size_t errlen)
{
	tp_allocator a = tp_alloc_resolve(alloc);
	struct conf c = {.a = &a, .err = errbuf, .errlen = errlen, .gpus = gpus_per_node,
	                 .allow_gaps = -1};
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!out)
		return tp_sl_fail(&c, TP_EINVAL, "out is NULL");
	*out = NULL;
	if (!conf)
		return tp_sl_fail(&c, TP_EINVAL, "conf is NULL");
	if (!tp_alloc_valid(alloc))
		return tp_sl_fail(&c, TP_EINVAL, "alloc lacks a function");
	if (gpus_per_node < 1 || gpus_per_node > TP_MAX_NODE_DEVICES)
		return tp_sl_fail(&c, TP_EINVAL, "gpus_per_node %u is not in 1..%d", gpus_per_node,
		            TP_MAX_NODE_DEVICES);
	int rc0 = slurm_budgets(&c, opts);
	if (rc0)
		return rc0;
	struct build bd = {.gpus = gpus_per_node};
	int rc = read_all(&c, conf, len);
	if (!rc)
		rc = resolve_and_build(&c, &bd);
	conf_free(&c);
	if (rc) {
		tp_topology_builder_destroy(bd.b);
		return rc;
	}
	*out = bd.b;
	return 0;
}

int tp_slurm_options_init(tp_slurm_options *o, unsigned version)
{
	static const tp_slurm_options init = TP_SLURM_OPTIONS_INIT;
	size_t size = version == 1 ? offsetof(tp_slurm_options, warnbuf)
	              : version == TP_SLURM_OPTIONS_VERSION ? sizeof init : 0;
	return tp_options_init(o, size, &init, version);
}
