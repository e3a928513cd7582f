/* SPDX-License-Identifier: MIT */
/*
 * The `topology` section of a scenario: levels, fabric, generate, nodes, failure domains, on a
 * topology builder. The builder is left to find what it tracks anyway (a node name used twice,
 * a device listed twice under one failure-domain kind, an unknown member); the message then
 * names the earlier occurrence as the CLI does. Any other refusal of the builder is passed on
 * with its own message, after the field it concerns.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"
#include "topoplace-hwloc.h"

static const char *const topology_keys[] = {"levels", "fabric", "nodes", "generate",
                                            "failure_domains", "x_domain_fabric", "x_grid"};
static const char *const fabric_keys[] = {"kind", "gbps", "latency_us"};
static const char *const node_keys[] = {"name", "path", "gpus", "model", "memory_gb", "perf",
                                        "hwloc", "x_fabric"};
static const char *const generate_keys[] = {"counts", "gpus_per_node", "model", "memory_gb",
                                            "perf", "x_fabric"};
/* Indexed by tp_link_kind. */
static const char *const link_kinds[] = {"nvlink", "pcie", "ib", "ethernet"};

/* A count of devices or domains: a whole number >= 1, at most hi when hi > 0. */
static bool check_count(struct scen *s, const json_t *v, const char *path, unsigned hi,
                        unsigned *out)
{
	long long x;
	if (!sc_check_int(s, v, path, 1, true, hi, hi > 0, "a positive integer", &x))
		return false;
	*out = x > UINT32_MAX ? UINT32_MAX : (unsigned)x;
	return true;
}

static bool read_levels(struct scen *s, const json_t *topo)
{
	const char *p = "topology.levels";
	const json_t *lv = json_object_get(topo, "levels");
	char q[SC_PATH_LEN], b[SC_SHOW_LEN];
	if (!lv)
		return sc_fail(s, p, "required");
	if (!sc_check_list(s, lv, p, true))
		return false;
	if (json_array_size(lv) > TP_MAX_LEVELS)
		return sc_fail(s, p, "%zu levels, at most %d are allowed", json_array_size(lv),
		               TP_MAX_LEVELS);
	size_t i;
	json_t *v;
	json_array_foreach(lv, i, v) {
		sc_item(q, p, i);
		if (!sc_check_name(s, v, q, "a level name", false))
			return false;
		const char *name = json_string_value(v);
		if (!strcmp(name, "cluster"))
			return sc_fail(s, q, "'cluster' may not be a level name (it names the fabric "
			                     "between top-level domains)");
		for (unsigned l = 0; l < s->nlevels; l++)
			if (!strcmp(s->levels[l], name))
				return sc_fail(s, q, "level name %s is used twice", sc_show(s, v, b));
		s->levels[s->nlevels++] = name;
	}
	int rc = tp_topology_builder_create(&s->b, s->levels, s->nlevels, s->o->alloc);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, p);
	if (rc < 0) /* the builder has no message object when creating it fails */
		return sc_fail(s, p, "%s", tp_strerror(rc));
	return true;
}

/* One link object at fp ({kind, gbps, latency_us}, each optional) over the defaults of the
 * fabric of `level` (those of the spec and of the builder). */
struct link {
	tp_link_kind kind;
	double gbps, latency;
};

static bool read_link(struct scen *s, const json_t *link, const char *fp, int level,
                      struct link *out)
{
	char q[SC_PATH_LEN], b[SC_SHOW_LEN];
	if (!sc_check_object(s, link, fp, fabric_keys, SC_COUNT(fabric_keys)))
		return false;
	out->kind = TP_LINK_IB;
	out->gbps = level == TP_LEVEL_CLUSTER ? 25 : 50;
	out->latency = level == TP_LEVEL_CLUSTER ? 20 : 14;
	if (level == (int)s->nlevels - 1)
		out->kind = TP_LINK_NVLINK, out->gbps = 900, out->latency = 3.4;
	const json_t *v = json_object_get(link, "kind");
	if (v) {
		unsigned k = 0;
		while (k < SC_COUNT(link_kinds) &&
		       !(json_is_string(v) && !strcmp(json_string_value(v), link_kinds[k])))
			k++;
		if (k == SC_COUNT(link_kinds))
			return sc_fail(s, sc_join(q, fp, "kind"),
			               "unknown link kind %s (one of nvlink, pcie, ib, ethernet)",
			               sc_show(s, v, b));
		out->kind = (tp_link_kind)k;
	}
	if ((v = json_object_get(link, "gbps")) &&
	    !sc_check_num(s, v, sc_join(q, fp, "gbps"), true, false, &out->gbps))
		return false;
	if ((v = json_object_get(link, "latency_us")) &&
	    !sc_check_num(s, v, sc_join(q, fp, "latency_us"), true, false, &out->latency))
		return false;
	return true;
}

static bool read_fabric(struct scen *s, const json_t *fab)
{
	const char *allowed[TP_MAX_LEVELS + 1];
	memcpy(allowed, s->levels, s->nlevels * sizeof *allowed);
	allowed[s->nlevels] = "cluster";
	if (!sc_check_object(s, fab, "topology.fabric", allowed, s->nlevels + 1))
		return false;
	const char *key;
	json_t *link;
	json_object_foreach((json_t *)fab, key, link) {
		char fp[SC_PATH_LEN];
		sc_join(fp, "topology.fabric", key);
		int level = TP_LEVEL_CLUSTER;
		for (unsigned l = 0; l < s->nlevels; l++)
			if (!strcmp(key, s->levels[l]))
				level = (int)l;
		struct link k;
		if (!read_link(s, link, fp, level, &k))
			return false;
		if (tp_topology_builder_set_fabric(s->b, level, k.kind, k.gbps, k.latency) < 0)
			return sc_fail(s, fp, "%s", tp_topology_builder_errmsg(s->b));
	}
	return true;
}

/* The extension `x_domain_fabric` (until the spec has it): {level: {domain path: link}} for
 * levels above the node, each domain's own fabric (tp_topology_builder_set_domain_fabric). */
static bool read_domain_fabrics(struct scen *s, const json_t *v)
{
	const char *p = "topology.x_domain_fabric";
	if (!sc_check_object(s, v, p, s->levels, s->nlevels - 1))
		return false;
	const char *lname;
	json_t *doms;
	json_object_foreach((json_t *)v, lname, doms) {
		char lp[SC_PATH_LEN];
		sc_join(lp, p, lname);
		if (!json_is_object(doms))
			return sc_fail(s, lp, "must be an object (domain path -> fabric), not %s",
			               sc_kind(doms));
		unsigned level = 0;
		while (strcmp(s->levels[level], lname))
			level++;
		const char *path;
		json_t *link;
		json_object_foreach(doms, path, link) {
			char fp[SC_PATH_LEN];
			sc_join(fp, lp, path);
			struct link k;
			if (!read_link(s, link, fp, (int)level, &k))
				return false;
			int rc = tp_topology_builder_set_domain_fabric(s->b, level, path, k.kind, k.gbps,
			                                               k.latency);
			if (rc == TP_ENOMEM)
				return sc_nomem(s, fp);
			if (rc == TP_ENOTFOUND)
				return sc_fail(s, fp, "no %s has the path %s", lname, path);
			if (rc < 0)
				return sc_fail(s, fp, "%s", tp_topology_builder_errmsg(s->b));
		}
	}
	return true;
}

/* A node's or generate's extension `x_fabric`: the fabric inside the node, as a node type of
 * `gpus` GPUs that says only that (tp_nodetype_set_fabric). *out stays NULL without one; the
 * caller destroys it once the nodes are added (the builder keeps its own copy). */
static bool read_node_fabric(struct scen *s, const json_t *obj, const char *p, unsigned gpus,
                             tp_node_options *o, tp_nodetype **out)
{
	char q[SC_PATH_LEN];
	const json_t *v = json_object_get(obj, "x_fabric");
	*out = NULL;
	if (!v)
		return true;
	sc_join(q, p, "x_fabric");
	if (o->type)
		return sc_fail(s, q, "not with an hwloc file (the file gives the node's insides; its "
		                     "PCIe-only nodes get a PCIe fabric)");
	struct link k;
	if (!read_link(s, v, q, (int)s->nlevels - 1, &k))
		return false;
	int rc = tp_nodetype_create(out, gpus, s->o->alloc);
	if (!rc)
		rc = tp_nodetype_set_fabric(*out, k.kind, k.gbps, k.latency);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, q);
	if (rc < 0)
		return sc_fail(s, q, "%s", *out ? tp_nodetype_errmsg(*out) : tp_strerror(rc));
	o->type = *out;
	return true;
}

/* model, memory_gb and perf of a node or of `generate` (gpus devices) into o; a perf list
 * goes to perfs[0..gpus). */
static bool read_attrs(struct scen *s, const json_t *obj, const char *p, unsigned gpus,
                       tp_node_options *o, double *perfs)
{
	char q[SC_PATH_LEN], r[SC_PATH_LEN], b[SC_SHOW_LEN];
	const json_t *v = json_object_get(obj, "model");
	if (v) {
		if (!sc_check_name(s, v, sc_join(q, p, "model"), "a model", true))
			return false;
		o->model = json_string_value(v);
	}
	if ((v = json_object_get(obj, "memory_gb")) &&
	    !sc_check_num(s, v, sc_join(q, p, "memory_gb"), true, false, &o->memory_gb))
		return false;
	if (!(v = json_object_get(obj, "perf")))
		return true;
	sc_join(q, p, "perf");
	if (json_is_number(v))
		return sc_check_num(s, v, q, true, false, &o->perf);
	if (!json_is_array(v))
		return sc_fail(s, q, "must be a positive number or a list with one per device, not %s",
		               sc_show(s, v, b));
	if (json_array_size(v) != gpus)
		return sc_fail(s, q, "has %zu values, the node has %u devices (one value per device)",
		               json_array_size(v), gpus);
	size_t k;
	json_t *x;
	json_array_foreach(v, k, x)
		if (!sc_check_num(s, x, sc_item(r, q, k), true, false, &perfs[k]))
			return false;
	o->device_perf = perfs;
	return true;
}

static bool read_generate(struct scen *s, const json_t *g)
{
	const char *p = "topology.generate";
	char q[SC_PATH_LEN], r[SC_PATH_LEN];
	uint32_t max = s->o->max_devices ? s->o->max_devices : SC_MAX_DEVICES;
	if (!sc_check_object(s, g, p, generate_keys, SC_COUNT(generate_keys)))
		return false;
	const json_t *counts = json_object_get(g, "counts");
	sc_join(q, p, "counts");
	if (!counts)
		return sc_fail(s, q, "required");
	if (!sc_check_list(s, counts, q, false))
		return false;
	if (json_array_size(counts) != s->nlevels)
		return sc_fail(s, q, "has %zu counts, the topology has %u levels (one count per level)",
		               json_array_size(counts), s->nlevels);
	unsigned c[TP_MAX_LEVELS], gpn;
	double nodes = 1;
	size_t i;
	json_t *v;
	json_array_foreach(counts, i, v) {
		if (!check_count(s, v, sc_item(r, q, i), 0, &c[i]))
			return false;
		nodes *= c[i];
		if (nodes > max) {
			s->code = TP_ELIMIT;
			return sc_fail(s, q, "generates more than %u nodes", max);
		}
	}
	const json_t *gv = json_object_get(g, "gpus_per_node");
	if (!gv)
		return sc_fail(s, sc_join(r, p, "gpus_per_node"), "required");
	if (!check_count(s, gv, sc_join(r, p, "gpus_per_node"), TP_MAX_NODE_DEVICES, &gpn))
		return false;
	if (nodes * gpn > max) {
		s->code = TP_ELIMIT;
		return sc_fail(s, q, "generates more than %u devices", max);
	}
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	double perfs[TP_MAX_NODE_DEVICES];
	tp_nodetype *fab = NULL;
	if (!read_attrs(s, g, p, gpn, &o, perfs) || !read_node_fabric(s, g, p, gpn, &o, &fab))
		return false;
	int rc = tp_topology_builder_generate(s->b, c, gpn, &o);
	tp_nodetype_destroy(fab);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, p);
	if (rc < 0)
		return sc_fail(s, p, "%s", tp_topology_builder_errmsg(s->b));
	s->nnodes += nodes;
	s->ndevices += nodes * gpn;
	s->gen_gpus = gpn;
	memcpy(s->gen_counts, c, sizeof c);
	return true;
}

/* The node type of a node's `hwloc` file (owned by s->hw), read and imported once per file. */
static bool load_hwloc(struct scen *s, const json_t *v, const char *p, tp_nodetype **out)
{
	char b[SC_SHOW_LEN];
	if (!json_is_string(v) || !json_string_length(v))
		return sc_fail(s, p, "must be the path of an hwloc XML file");
	if (!s->o->read_file)
		return sc_fail(s, p, "not supported by this build (no hwloc importer)");
	const char *path = json_string_value(v);
	for (size_t i = 0; i < s->nhw; i++)
		if (!strcmp(s->hw[i].path, path)) {
			*out = s->hw[i].nt;
			return true;
		}
	struct sc_hwloc *hw = sc_alloc(s, (s->nhw + 1) * sizeof *hw);
	if (!hw)
		return sc_nomem(s, p);
	if (s->nhw)
		memcpy(hw, s->hw, s->nhw * sizeof *hw);
	sc_free(s, s->hw);
	s->hw = hw;
	const void *xml = NULL;
	size_t len = 0;
	char why[256] = "";
	if (s->o->read_file(s->o->ud, path, &xml, &len, why, sizeof why) < 0 || !xml)
		return sc_fail(s, p, "cannot read %s (%s)", sc_show(s, v, b), *why ? why : "unreadable");
	char msg[256] = "";
	int rc = tp_nodetype_from_hwloc_xml(out, xml, len, s->o->alloc, msg, sizeof msg);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, p);
	if (rc == TP_ENOTFOUND)
		return sc_fail(s, p, "%s: no NVIDIA GPU in it (%s)", sc_show(s, v, b),
		               *msg ? msg : tp_strerror(rc));
	if (rc < 0)
		return sc_fail(s, p, "%s: %s", sc_show(s, v, b), *msg ? msg : tp_strerror(rc));
	s->hw[s->nhw++] = (struct sc_hwloc){path, *out};
	return true;
}

/* The node's `path`: one domain name per level above the node. */
static bool read_node_path(struct scen *s, const json_t *n, const char *p, const char **names)
{
	char q[SC_PATH_LEN], r[SC_PATH_LEN], above[TP_MAX_LEVELS * (TP_MAX_NAME + 2)] = "";
	for (unsigned l = 0; l + 1 < s->nlevels; l++) {
		size_t len = strlen(above);
		snprintf(above + len, sizeof above - len, "%s%s", l ? ", " : "", s->levels[l]);
	}
	const json_t *v = json_object_get(n, "path");
	sc_join(q, p, "path");
	if (!v) {
		if (s->nlevels > 1)
			return sc_fail(s, q, "required: %u domain names (%s)", s->nlevels - 1, above);
		return true;
	}
	if (!sc_check_list(s, v, q, false))
		return false;
	if (json_array_size(v) != s->nlevels - 1)
		return sc_fail(s, q, "has %zu names, needs %u (one per level above the node: %s)",
		               json_array_size(v), s->nlevels - 1, *above ? above : "none");
	size_t k;
	json_t *d;
	json_array_foreach(v, k, d) {
		if (!sc_check_name(s, d, sc_item(r, q, k), "a domain name", false))
			return false;
		names[k] = json_string_value(d);
	}
	return true;
}

/* Whether a name is one `generate` gives: <level0><i>-<level1><j>-... with every index in
 * range and written without leading zeros. */
static bool generated(const struct scen *s, const char *name)
{
	if (!s->gen_counts[0])
		return false;
	const char *p = name;
	for (unsigned l = 0; l < s->nlevels; l++) {
		size_t n = strlen(s->levels[l]);
		if (strncmp(p, s->levels[l], n))
			return false;
		p += n;
		if (*p < '0' || *p > '9' || (*p == '0' && p[1] >= '0' && p[1] <= '9'))
			return false;
		unsigned long long i = 0;
		while (*p >= '0' && *p <= '9' && i < UINT32_MAX)
			i = i * 10 + (unsigned long long)(*p++ - '0');
		if (i >= s->gen_counts[l] || *p != (l + 1 < s->nlevels ? '-' : '\0'))
			return false;
		p += l + 1 < s->nlevels;
	}
	return true;
}

static size_t name_hash(const char *str)
{
	size_t h = 14695981039346656037u; /* FNV-1a */
	for (; *str; str++)
		h = (h ^ (unsigned char)*str) * 1099511628211u;
	return h;
}

static const char *listed_name(const struct scen *s, size_t i)
{
	return json_string_value(json_object_get(json_array_get(s->nodes, i), "name"));
}

/* The slot of a listed name in the hash (holding 0 when absent). */
static size_t *name_slot(const struct scen *s, const char *name)
{
	size_t mask = s->names_cap - 1, i = name_hash(name) & mask;
	while (s->names[i] && strcmp(listed_name(s, s->names[i] - 1), name))
		i = (i + 1) & mask;
	return &s->names[i];
}

/* Whether a node name is known before the topology is built (listed so far, or generated). */
static bool known_node(const struct scen *s, const char *name)
{
	return generated(s, name) || (s->names && *name_slot(s, name));
}

/* Which node had this name first, now that the builder refused it as a duplicate. */
static bool duplicate_name(struct scen *s, const json_t *name, const char *p, size_t i)
{
	char b[SC_SHOW_LEN], q[SC_PATH_LEN];
	for (size_t k = 0; k < i; k++) {
		const json_t *other = json_object_get(json_array_get(s->nodes, k), "name");
		if (other && !strcmp(json_string_value(other), json_string_value(name)))
			return sc_fail(s, sc_join(q, p, "name"),
			               "duplicate node name %s (also topology.nodes[%zu])", sc_show(s, name, b),
			               k);
	}
	return sc_fail(s, sc_join(q, p, "name"), "duplicate node name %s (a generated node has it)",
	               sc_show(s, name, b));
}

/* The node's device count: its `gpus`, or its hwloc file's GPUs (which `gpus` must match). */
static bool read_node_gpus(struct scen *s, const json_t *n, const char *p, tp_node_options *o,
                           unsigned *ngpus)
{
	char q[SC_PATH_LEN], b[SC_SHOW_LEN];
	const json_t *hw = json_object_get(n, "hwloc"), *gpus = json_object_get(n, "gpus");
	if (!hw) {
		if (!gpus)
			return sc_fail(s, sc_join(q, p, "gpus"), "required (the node's device count)");
		return check_count(s, gpus, sc_join(q, p, "gpus"), TP_MAX_NODE_DEVICES, ngpus);
	}
	tp_nodetype *nt;
	if (!load_hwloc(s, hw, sc_join(q, p, "hwloc"), &nt))
		return false;
	o->type = nt;
	unsigned found = tp_nodetype_gpu_count(nt);
	if (gpus) {
		if (!check_count(s, gpus, sc_join(q, p, "gpus"), TP_MAX_NODE_DEVICES, ngpus))
			return false;
		if (*ngpus != found)
			return sc_fail(s, q, "%u, but the hwloc file %s has %u GPUs", *ngpus,
			               sc_show(s, hw, b), found);
	}
	*ngpus = found;
	return true;
}

static bool read_node(struct scen *s, const json_t *n, size_t i)
{
	char p[64], q[SC_PATH_LEN];
	uint32_t max = s->o->max_devices ? s->o->max_devices : SC_MAX_DEVICES;
	snprintf(p, sizeof p, "topology.nodes[%zu]", i);
	if (!sc_check_object(s, n, p, node_keys, SC_COUNT(node_keys)))
		return false;
	const json_t *name = json_object_get(n, "name");
	if (!name)
		return sc_fail(s, sc_join(q, p, "name"), "required");
	if (!sc_check_name(s, name, sc_join(q, p, "name"), "a node name", false))
		return false;
	size_t *slot = name_slot(s, json_string_value(name));
	if (*slot || generated(s, json_string_value(name)))
		return duplicate_name(s, name, p, i);
	const char *path[TP_MAX_LEVELS];
	if (!read_node_path(s, n, p, path))
		return false;
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	unsigned ngpus = 0;
	double perfs[TP_MAX_NODE_DEVICES];
	tp_nodetype *fab = NULL;
	if (!read_node_gpus(s, n, p, &o, &ngpus) || !read_attrs(s, n, p, ngpus, &o, perfs) ||
	    !read_node_fabric(s, n, p, ngpus, &o, &fab))
		return false;
	int rc = tp_topology_builder_add_node(s->b, json_string_value(name), path, ngpus, &o);
	tp_nodetype_destroy(fab);
	if (rc == TP_EEXIST)
		return duplicate_name(s, name, p, i);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, p);
	if (rc < 0)
		return sc_fail(s, p, "%s", tp_topology_builder_errmsg(s->b));
	*name_slot(s, json_string_value(name)) = i + 1;
	s->listed_gpus[i] = ngpus;
	s->nnodes++;
	s->ndevices += ngpus;
	if (s->ndevices > max) {
		s->code = TP_ELIMIT;
		return sc_fail(s, p, "the topology has more than %u devices", max);
	}
	return true;
}

/* A failure-domain member: a node name, or `node/index` for one device (dev -1 for a node).
 * Returns false when it is not a string of that shape; whether the node exists is the
 * builder's to say. An index too long to be one becomes TP_MAX_NODE_DEVICES, which no node
 * has. */
static bool fd_ref(const json_t *m, char node[TP_MAX_NAME + 1], int *dev)
{
	if (!json_is_string(m))
		return false;
	const char *str = json_string_value(m);
	const char *slash = strrchr(str, '/');
	size_t nlen = slash ? (size_t)(slash - str) : strlen(str);
	if (nlen > TP_MAX_NAME)
		return false;
	memcpy(node, str, nlen);
	node[nlen] = '\0';
	*dev = -1;
	if (slash) {
		const char *d = slash + 1;
		if (!*d || strspn(d, "0123456789") != strlen(d))
			return false;
		unsigned long i = 0;
		for (; *d && i < TP_MAX_NODE_DEVICES; d++)
			i = i * 10 + (unsigned long)(*d - '0');
		*dev = *d || i > TP_MAX_NODE_DEVICES ? TP_MAX_NODE_DEVICES : (int)i;
	}
	return true;
}

/* Devices of a node the builder has (listed, else generated); asked only once it refused an
 * index, so a linear search does. */
static unsigned builder_node_gpus(const struct scen *s, const char *node)
{
	for (size_t i = 0; i < json_array_size(s->nodes); i++)
		if (!strcmp(json_string_value(json_object_get(json_array_get(s->nodes, i), "name")),
		            node))
			return s->listed_gpus[i];
	return s->gen_gpus;
}

/* The builder refused a member as listed twice under `kind`: name the earlier member it
 * clashes with (the same device, or the whole node, or one of the node's devices). */
static bool listed_twice(struct scen *s, const char *kname, const json_t *kind,
                         const json_t *member, const char *mp, const char *node, int dev)
{
	char what[TP_MAX_NAME + 16], other[TP_MAX_NAME + 1], kp[SC_PATH_LEN], dp[SC_PATH_LEN];
	char at[SC_PATH_LEN];
	snprintf(what, sizeof what, dev < 0 ? "%s" : "%s/%d", node, dev);
	const char *dname;
	json_t *d;
	json_object_foreach((json_t *)kind, dname, d) {
		size_t i;
		json_t *m;
		json_array_foreach(d, i, m) {
			if (m == member)
				break;
			int odev;
			if (fd_ref(m, other, &odev) && !strcmp(other, node) &&
			    (odev < 0 || dev < 0 || odev == dev)) {
				sc_join(kp, "topology.failure_domains", kname);
				return sc_fail(s, mp, "%s is listed twice under %s (also at %s)", what, kname,
				               sc_item(at, sc_join(dp, kp, dname), i));
			}
		}
		if (i < json_array_size(d))
			break;
	}
	return sc_fail(s, mp, "%s", tp_topology_builder_errmsg(s->b));
}

static bool read_fd_member(struct scen *s, const char *kname, const json_t *kind,
                           const char *dname, const json_t *m, const char *mp)
{
	char b[SC_SHOW_LEN], node[TP_MAX_NAME + 1];
	int dev;
	if (!json_is_string(m))
		return sc_fail(s, mp, "must be a node or device name, not %s", sc_show(s, m, b));
	const char *str = json_string_value(m);
	if (!fd_ref(m, node, &dev)) {
		const char *slash = strrchr(str, '/');
		if (slash && (size_t)(slash - str) <= TP_MAX_NAME) {
			char part[TP_MAX_NAME + 1];
			memcpy(part, str, (size_t)(slash - str));
			part[slash - str] = '\0';
			if (known_node(s, part))
				return sc_fail(s, mp, "%s is not a device name (node/index)",
				               sc_show(s, m, b));
		}
		return sc_fail(s, mp, "unknown node or device %s", sc_show(s, m, b));
	}
	int rc = tp_topology_builder_add_failure_domain(s->b, kname, dname, node, dev);
	if (rc == TP_ENOTFOUND)
		return sc_fail(s, mp, "unknown node or device %s", sc_show(s, m, b));
	if (rc == TP_EINVAL && dev >= 0)
		return sc_fail(s, mp, "node %s has %u devices, so there is no device %s", node,
		               builder_node_gpus(s, node), str);
	if (rc == TP_EEXIST)
		return listed_twice(s, kname, kind, m, mp, node, dev);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, mp);
	if (rc < 0)
		return sc_fail(s, mp, "%s", tp_topology_builder_errmsg(s->b));
	return true;
}

static bool read_fd_kind(struct scen *s, const char *kname, const json_t *k, const char *kp)
{
	if (!sc_check_key_name(s, kname, kp, "a failure-domain kind"))
		return false;
	for (unsigned l = 0; l < s->nlevels; l++)
		if (!strcmp(kname, s->levels[l]))
			return sc_fail(s, kp, "a failure-domain kind may not be a level name");
	if (!strcmp(kname, "cluster"))
		return sc_fail(s, kp, "'cluster' may not be a failure-domain kind");
	if (!json_is_object(k))
		return sc_fail(s, kp, "must be an object (domain name -> list of nodes or devices), "
		                      "not %s", sc_kind(k));
	if (s->nfd_kinds == SC_COUNT(s->fd_kinds)) {
		s->code = TP_ELIMIT;
		return sc_fail(s, kp, "more than %zu failure-domain kinds", SC_COUNT(s->fd_kinds));
	}
	s->fd_kinds[s->nfd_kinds++] = kname;
	const char *dname;
	json_t *d;
	json_object_foreach((json_t *)k, dname, d) {
		char dp[SC_PATH_LEN], mp[SC_PATH_LEN];
		sc_join(dp, kp, dname);
		if (!sc_check_key_name(s, dname, dp, "a failure-domain name") ||
		    !sc_check_list(s, d, dp, false))
			return false;
		size_t i;
		json_t *m;
		json_array_foreach(d, i, m)
			if (!read_fd_member(s, kname, k, dname, m, sc_item(mp, dp, i)))
				return false;
	}
	return true;
}

static bool read_failure_domains(struct scen *s, const json_t *fds)
{
	const char *p = "topology.failure_domains";
	if (!json_is_object(fds))
		return sc_fail(s, p, "must be an object, not %s", sc_kind(fds));
	const char *kname;
	json_t *k;
	json_object_foreach((json_t *)fds, kname, k) {
		char kp[SC_PATH_LEN];
		if (!read_fd_kind(s, kname, k, sc_join(kp, p, kname)))
			return false;
	}
	return true;
}

static bool read_nodes(struct scen *s)
{
	if (!sc_check_list(s, s->nodes, "topology.nodes", false))
		return false;
	size_t count = json_array_size(s->nodes);
	s->names_cap = 16;
	while (s->names_cap < 2 * count)
		s->names_cap *= 2;
	s->listed_gpus = sc_calloc(s, count + 1, sizeof *s->listed_gpus);
	s->names = sc_calloc(s, s->names_cap, sizeof *s->names);
	if (!s->listed_gpus || !s->names)
		return sc_nomem(s, "topology.nodes");
	size_t i;
	json_t *n;
	json_array_foreach(s->nodes, i, n)
		if (!read_node(s, n, i))
			return false;
	return true;
}

bool sc_read_topology(struct scen *s, const json_t *topo)
{
	if (!sc_check_object(s, topo, "topology", topology_keys, SC_COUNT(topology_keys)) ||
	    !read_levels(s, topo))
		return false;
	const json_t *v = json_object_get(topo, "fabric");
	if (v && !read_fabric(s, v))
		return false;
	s->nodes = json_object_get(topo, "nodes");
	const json_t *gen = json_object_get(topo, "generate");
	if (!s->nodes && !gen)
		return sc_fail(s, "topology", "needs nodes or generate (or both)");
	/* Generated nodes come first, then the listed ones (the spec's order of node ids). */
	if (gen && !read_generate(s, gen))
		return false;
	if (s->nodes && !read_nodes(s))
		return false;
	if (s->nnodes == 0)
		return sc_fail(s, "topology.nodes", "the topology has no node");
	if ((v = json_object_get(topo, "failure_domains")) && !read_failure_domains(s, v))
		return false;
	if ((v = json_object_get(topo, "x_domain_fabric")) && !read_domain_fabrics(s, v))
		return false;
	if ((v = json_object_get(topo, "x_grid")) && !sc_read_grids(s, v))
		return false;
	int rc = tp_topology_build(s->b, &s->t);
	if (rc == TP_ENOMEM)
		return sc_nomem(s, "topology");
	if (rc < 0)
		return sc_fail(s, "topology", "%s", tp_topology_builder_errmsg(s->b));
	return true;
}
