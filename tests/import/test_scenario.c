/* SPDX-License-Identifier: MIT */
/*
 * The scenario-v1 importer (include/topoplace-scenario.h): the topology of the fixtures in
 * tests/data/scenarios (TP_SCENARIO_DATA), the state and the question of every command, the
 * CLI's messages for invalid documents, allocation failures, and the topology of every example
 * of ../shared/spec/examples (skipped, saying so, when that folder is absent).
 *
 * Everything the importer keeps goes through tp_test_allocator, so each test asserts that no
 * block is left (jansson's own allocations use the C library's and are checked by LSan).
 */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-scenario.h"

#ifndef TP_SCENARIO_DATA
#define TP_SCENARIO_DATA "tests/data/scenarios"
#endif
#ifndef TP_SHARED_DIR
#define TP_SHARED_DIR "../shared"
#endif

/* ---- reading files, as a caller does ------------------------------------------------------ */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = malloc(1 << 20);
	cr_assert_not_null(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	int bad = ferror(f);
	buf[*len] = '\0';
	fclose(f);
	if (bad) {
		free(buf);
		errno = EISDIR;
		return NULL;
	}
	return buf;
}

/* The hwloc files of one import, relative to `dir`; freed after the import. */
struct files {
	const char *dir;
	char *bufs[8];
	size_t n;
	int calls;
};

static int read_file(void *ud, const char *path, const void **data, size_t *len, char *why,
                     size_t whylen)
{
	struct files *fs = ud;
	char full[2048];
	fs->calls++;
	snprintf(full, sizeof full, "%s/%s", fs->dir, path);
	char *buf = fs->n < 8 ? slurp(full, len) : NULL;
	if (!buf) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	fs->bufs[fs->n++] = buf;
	*data = buf;
	return 0;
}

static void files_free(struct files *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		free(fs->bufs[i]);
	fs->n = 0;
}

/* Import text for cmd (strict or not) on the counting allocator; returns the code. */
static int import(const char *text, tp_scenario_command cmd, int strict, tp_scenario **out,
                  char *err, size_t errlen)
{
	struct files fs = {.dir = TP_SCENARIO_DATA};
	tp_scenario_options o;
	cr_assert_eq(tp_scenario_options_init(&o, TP_SCENARIO_OPTIONS_VERSION), 0);
	o.command = cmd;
	o.strict = strict;
	o.read_file = read_file;
	o.ud = &fs;
	o.alloc = &tp_test_allocator;
	int rc = tp_scenario_from_json(out, text, strlen(text), &o, err, errlen);
	files_free(&fs);
	return rc;
}

/* The topology of a document (asserts success); the scenario is handed back to free. */
static const tp_topology *topology_of(const char *text, tp_scenario **sc)
{
	char err[512] = "x";
	cr_assert_eq(import(text, TP_SCENARIO_TOPOLOGY, 0, sc, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(err, "");
	return tp_scenario_topology(*sc);
}

/* ---- scenarios: the fixtures --------------------------------------------------------------- */

/* The topology of a scenario file, taken out of its scenario (the caller destroys it). */
static tp_topology *load_fixture_path(const char *path, char *err, size_t errlen)
{
	size_t len;
	char *text = slurp(path, &len);
	cr_assert_not_null(text, "%s", path);
	tp_scenario *sc = NULL;
	tp_topology *t = NULL;
	if (import(text, TP_SCENARIO_TOPOLOGY, 0, &sc, err, errlen) == 0)
		cr_assert_eq(tp_scenario_topology_take(sc, &t), 0);
	tp_scenario_destroy(sc);
	free(text);
	return t;
}

static tp_topology *load_fixture(const char *name, char *err, size_t errlen)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", TP_SCENARIO_DATA, name);
	return load_fixture_path(path, err, errlen);
}

static void assert_fabric(const tp_topology *t, int level, tp_link_kind kind, double gbps,
                          double latency)
{
	tp_link_kind k;
	double g, l;
	cr_assert_eq(tp_topology_fabric(t, level, &k, &g, &l), 0);
	cr_assert(k == kind && g == gbps && l == latency,
	          "fabric of level %d: kind %d %g GB/s %g us, expected %d %g %g", level, (int)k, g, l,
	          (int)kind, gbps, latency);
}

static uint32_t node_named(const tp_topology *t, const char *name)
{
	uint32_t node;
	cr_assert_eq(tp_topology_node_by_name(t, name, &node), 0, "no node %s", name);
	return node;
}

static uint32_t device_named(const tp_topology *t, const char *name)
{
	uint32_t dev;
	cr_assert_eq(tp_topology_device_by_name(t, name, &dev), 0, "no device %s", name);
	return dev;
}

Test(scenario, builds_a_generated_nvl72_fleet)
{
	char err[512] = "x";
	tp_topology *t = load_fixture("nvl72-generated.json", err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_str_eq(err, "");
	cr_assert_eq(tp_topology_level_count(t), 3);
	cr_assert_str_eq(tp_topology_level_name(t, 0), "block");
	cr_assert_str_eq(tp_topology_level_name(t, 1), "rack");
	cr_assert_str_eq(tp_topology_level_name(t, 2), "node");
	cr_assert_eq(tp_topology_domain_count(t, 0), 2);
	cr_assert_eq(tp_topology_domain_count(t, 1), 8);
	cr_assert_eq(tp_topology_node_count(t), 144);
	cr_assert_eq(tp_topology_device_count(t), 576);

	cr_assert_str_eq(tp_topology_node_name(t, 0), "block0-rack0-node0");
	cr_assert_str_eq(tp_topology_node_name(t, 143), "block1-rack3-node17");
	uint32_t n = node_named(t, "block0-rack1-node17");
	char path[64];
	uint32_t rack = tp_topology_node_domain(t, n, 1);
	cr_assert_gt(tp_topology_domain_path(t, 1, rack, path, sizeof path), 0);
	cr_assert_str_eq(path, "block0/rack1");
	cr_assert_str_eq(tp_topology_domain_name(t, 2, n), "block0-rack1-node17");
	cr_assert_str_eq(tp_topology_node_model(t, n), "GB200");
	cr_assert_eq(tp_topology_node_memory_gb(t, n), 186);
	cr_assert_eq(tp_topology_device_perf(t, device_named(t, "block1-rack3-node17/3")), 1.0);

	assert_fabric(t, 2, TP_LINK_NVLINK, 900, 3.4);   /* node: the default */
	assert_fabric(t, 1, TP_LINK_NVLINK, 900, 3.4);   /* rack: NVL72 */
	assert_fabric(t, 0, TP_LINK_IB, 50, 14);         /* block: the default */
	assert_fabric(t, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);
	tp_topology_destroy(t);
}

Test(scenario, builds_listed_nodes_with_perf_and_failure_domains)
{
	char err[512];
	tp_topology *t = load_fixture("nodes-perf-fd.json", err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(tp_topology_node_count(t), 4);
	cr_assert_eq(tp_topology_device_count(t), 9);
	cr_assert_eq(tp_topology_domain_count(t, 0), 2);
	cr_assert_eq(tp_topology_domain_count(t, 1), 3);
	/* perf is stored as a float */
	cr_assert_float_eq(tp_topology_device_perf(t, device_named(t, "a1/0")), 1.0, 1e-6);
	cr_assert_float_eq(tp_topology_device_perf(t, device_named(t, "a1/1")), 0.9, 1e-6);
	cr_assert_float_eq(tp_topology_device_perf(t, device_named(t, "a2/1")), 1.1, 1e-6);
	cr_assert_float_eq(tp_topology_device_perf(t, device_named(t, "a3/3")), 1.0, 1e-6);
	cr_assert_str_eq(tp_topology_node_model(t, node_named(t, "a2")), "H100");
	cr_assert_eq(tp_topology_node_memory_gb(t, node_named(t, "a2")), 80);
	cr_assert_str_eq(tp_topology_node_model(t, node_named(t, "b1")), "L40S");
	cr_assert_null(tp_topology_node_model(t, node_named(t, "a3")));
	char path[64];
	tp_topology_domain_path(t, 1, tp_topology_node_domain(t, node_named(t, "b1"), 1), path,
	                        sizeof path);
	cr_assert_str_eq(path, "r2/k1");

	assert_fabric(t, 2, TP_LINK_PCIE, 32, 3.4);      /* latency: the node default */
	assert_fabric(t, 1, TP_LINK_IB, 50, 14);
	assert_fabric(t, 0, TP_LINK_ETHERNET, 12.5, 30);
	assert_fabric(t, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);

	cr_assert_eq(tp_topology_fd_kind_count(t), 2);
	int power = tp_topology_fd_kind_by_name(t, "power");
	int cooling = tp_topology_fd_kind_by_name(t, "cooling");
	cr_assert(power >= 0 && cooling >= 0);
	static const struct {
		const char *dev, *power, *cooling;
	} want[] = {
		{"a1/0", "pdu-a", "loop-1"}, {"a2/1", "pdu-a", "a2"},     {"a3/0", "pdu-b", "loop-1"},
		{"a3/1", "pdu-b", "loop-1"}, {"a3/2", "pdu-c", "loop-1"}, {"b1/0", "b1", "loop-1"},
	};
	for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
		uint32_t dev = device_named(t, want[i].dev);
		const char *p = tp_topology_fd_name(t, (unsigned)power,
		                                    tp_topology_device_fd(t, (unsigned)power, dev));
		const char *c = tp_topology_fd_name(t, (unsigned)cooling,
		                                    tp_topology_device_fd(t, (unsigned)cooling, dev));
		cr_assert(p && !strcmp(p, want[i].power), "%s: power %s", want[i].dev, p);
		cr_assert(c && !strcmp(c, want[i].cooling), "%s: cooling %s", want[i].dev, c);
	}
	/* a3/3 is under no power domain: a domain of its own (named by the device or the node). */
	uint32_t fd = tp_topology_device_fd(t, (unsigned)power, device_named(t, "a3/3"));
	cr_assert_neq(fd, tp_topology_device_fd(t, (unsigned)power, device_named(t, "a3/2")));
	cr_assert_neq(fd, TP_NONE);
	tp_topology_destroy(t);
}

Test(scenario, imports_a_node_from_its_hwloc_file)
{
	char err[512];
	tp_topology *t = load_fixture("hwloc-node.json", err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(tp_topology_device_count(t), 16);
	for (int i = 0; i < 2; i++) {
		uint32_t n = node_named(t, i ? "h2" : "h1");
		const tp_nodetype *nt = tp_topology_node_type(t, n);
		cr_assert_not_null(nt, "node h%d has the file's insides", i + 1);
		cr_assert_eq(tp_nodetype_gpu_count(nt), 4);
		cr_assert_eq(tp_nodetype_pcie_switch_count(nt), 2);
		/* GPUs in pairs behind the two switches */
		cr_assert_eq(tp_test_gpu_switch(nt, 0), tp_test_gpu_switch(nt, 1));
		cr_assert_eq(tp_test_gpu_switch(nt, 2), tp_test_gpu_switch(nt, 3));
		cr_assert_neq(tp_test_gpu_switch(nt, 0), tp_test_gpu_switch(nt, 2));
	}
	cr_assert_str_eq(tp_topology_node_model(t, node_named(t, "h1")), "H100");
	cr_assert_float_eq(tp_topology_device_perf(t, device_named(t, "h2/2")), 0.95, 1e-6);
	cr_assert_null(tp_topology_node_type(t, node_named(t, "p1")));
	tp_topology_destroy(t);
}

Test(scenario, says_when_a_file_cannot_be_read)
{
	char err[512];
	tp_scenario *sc = (tp_scenario *)&err; /* set to NULL on failure */
	const char *doc = "{\"version\": 1, \"topology\": {\"levels\": [\"node\"], \"nodes\": "
	                  "[{\"name\": \"h\", \"hwloc\": \"nope.xml\"}]}}";
	cr_assert_eq(import(doc, TP_SCENARIO_TOPOLOGY, 0, &sc, err, sizeof err), TP_EPARSE);
	cr_assert_null(sc);
	cr_assert_str_eq(err, "topology.nodes[0].hwloc: cannot read \"nope.xml\" (No such file or "
	                      "directory)");
	/* without a reader, such a node is refused as the CLI refuses it without hwloc */
	tp_scenario_options o = TP_SCENARIO_OPTIONS_INIT;
	cr_assert_eq(tp_scenario_from_json(&sc, doc, strlen(doc), &o, err, sizeof err), TP_EPARSE);
	cr_assert_str_eq(err, "topology.nodes[0].hwloc: not supported by this build (no hwloc "
	                      "importer)");
	/* a short buffer gets a cut, NUL-terminated message; none at all is fine */
	char tiny[8];
	cr_assert_eq(import(doc, TP_SCENARIO_TOPOLOGY, 0, &sc, tiny, sizeof tiny), TP_EPARSE);
	cr_assert_str_eq(tiny, "topolog");
	cr_assert_eq(import(doc, TP_SCENARIO_TOPOLOGY, 0, &sc, NULL, 0), TP_EPARSE);
	TP_ASSERT_NO_LEAKS();
}

/* ---- scenarios: invalid documents ---------------------------------------------------------- */

/* A document written with ' for " (the fixtures below would drown in backslashes). */
static char *dq(const char *text)
{
	char *s = strdup(text);
	cr_assert_not_null(s);
	for (char *c = s; *c; c++)
		if (*c == '\'')
			*c = '"';
	return s;
}

static void assert_refused_for(const char *doc_text, tp_scenario_command cmd, const char *want,
                               bool prefix);

/* The document is refused with exactly this message (or, with prefix, a message that starts
 * with it). */
static void assert_refused(const char *doc_text, const char *want, bool prefix)
{
	assert_refused_for(doc_text, TP_SCENARIO_TOPOLOGY, want, prefix);
}

/* The same for a command (its sections are read too). */
static void assert_refused_for(const char *doc_text, tp_scenario_command cmd, const char *want,
                               bool prefix)
{
	char *doc = dq(doc_text);
	char err[512] = "x";
	tp_scenario *sc = NULL;
	int rc = import(doc, cmd, 0, &sc, err, sizeof err);
	cr_assert_null(sc, "accepted: %s", doc);
	cr_assert(rc == TP_EPARSE || rc == TP_ELIMIT, "%s: %s", doc, tp_err_name(rc));
	if (prefix)
		cr_assert_eq(strncmp(err, want, strlen(want)), 0, "%s\n  message: %s\n  expected: %s...",
		             doc, err, want);
	else
		cr_assert_str_eq(err, want, "%s\n  message: %s\n  expected: %s", doc, err, want);
	free(doc);
	TP_ASSERT_NO_LEAKS();
}

/* A topology inside a valid document. */
#define TOPO(t) "{'version': 1, 'topology': " t "}"
#define RACKS "'levels': ['rack', 'node']"

struct bad_doc {
	const char *doc;
	const char *message;
};

static void assert_all_refused(const struct bad_doc *cases, size_t n)
{
	for (size_t i = 0; i < n; i++)
		assert_refused(cases[i].doc, cases[i].message, false);
}

Test(scenario, refuses_bad_top_level_fields)
{
	/* through the call itself, with default options (the cases below go through import()) */
	const char *dup = "{\"version\": 1, \"version\": 1}";
	char err[256];
	tp_scenario *sc;
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, dup, strlen(dup), NULL, err, sizeof err), TP_EPARSE,
	              err, "duplicate object key near");
	static const struct bad_doc cases[] = {
		{"[]", "must be an object, not a list"},
		{"{'version': 1, 'topology': {}, 'extra': 1}",
		 "extra: unknown key (allowed: version, topology, state, request, policy, replace, x_sizing, x_pd)"},
		{"{'versoin': 1}", "versoin: unknown key (did you mean 'version'?) (allowed: version, "
		                   "topology, state, request, policy, replace, x_sizing, x_pd)"},
		{"{'topology': {}}", "version: required (must be 1)"},
		{"{'version': 2, 'topology': {}}", "version: must be 1, not 2"},
		{"{'version': 1.0, 'topology': {}}", "version: must be 1, not 1.0"},
		{"{'version': '1', 'topology': {}}", "version: must be 1, not \"1\""},
		{"{'version': 1}", "topology: required"},
		{"{'version': 1, 'topology': []}", "topology: must be an object, not a list"},
		{TOPO("{" RACKS ", 'level': 1}"),
		 "topology.level: unknown key (did you mean 'levels'?) (allowed: levels, fabric, nodes, "
		 "generate, failure_domains, x_domain_fabric, x_grid)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 1}], 'state': {}}"),
		 "topology.state: unknown key (allowed: levels, fabric, nodes, generate, "
		 "failure_domains, x_domain_fabric, x_grid)"},
	};
	assert_all_refused(cases, sizeof cases / sizeof *cases);
	assert_refused("{'version': 1, 'version': 1}",
	               "not a valid JSON document: duplicate object key near '\"version\"': line 1 "
	               "column 24 (byte 24)", false);
	assert_refused("{'version': 1,\n 'topology': {'levels': ['a'],}}",
	               "not a valid JSON document: string or '}' expected near '}': line 2 column 31 "
	               "(byte 46)", false);
	/* strict JSON: NaN, trailing data, a lone surrogate, nothing at all */
	assert_refused("{'version': NaN}", "not a valid JSON document: ", true);
	assert_refused("{'version': 1} x", "not a valid JSON document: end of file expected", true);
	assert_refused("", "not a valid JSON document: ", true);
}

Test(scenario, refuses_bad_levels_and_fabrics)
{
	static const struct bad_doc cases[] = {
		{TOPO("{'nodes': []}"), "topology.levels: required"},
		{TOPO("{'levels': 'node'}"), "topology.levels: must be a list, not a string"},
		{TOPO("{'levels': []}"), "topology.levels: must not be empty"},
		{TOPO("{'levels': ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i']}"),
		 "topology.levels: 9 levels, at most 8 are allowed"},
		{TOPO("{'levels': ['a', 'cluster']}"),
		 "topology.levels[1]: 'cluster' may not be a level name (it names the fabric between "
		 "top-level domains)"},
		{TOPO("{'levels': ['a', 'b', 'a']}"), "topology.levels[2]: level name \"a\" is used twice"},
		{TOPO("{'levels': ['a/b', 'n']}"),
		 "topology.levels[0]: a level name \"a/b\" contains '/'"},
		{TOPO("{'levels': [3]}"), "topology.levels[0]: a level name must be a string, not 3"},
		{TOPO("{'levels': ['']}"), "topology.levels[0]: a level name must not be empty"},
		{TOPO("{'levels': ['a\\u0007']}"),
		 "topology.levels[0]: a level name \"a\\u0007\" contains a control character"},
		{TOPO("{" RACKS ", 'fabric': {'rak': {}}}"),
		 "topology.fabric.rak: unknown key (did you mean 'rack'?) (allowed: rack, node, "
		 "cluster)"},
		{TOPO("{" RACKS ", 'fabric': {'rack': {'kind': 'nvlnk'}}}"),
		 "topology.fabric.rack.kind: unknown link kind \"nvlnk\" (one of nvlink, pcie, ib, "
		 "ethernet)"},
		{TOPO("{" RACKS ", 'fabric': {'rack': {'kind': 1}}}"),
		 "topology.fabric.rack.kind: unknown link kind 1 (one of nvlink, pcie, ib, ethernet)"},
		{TOPO("{" RACKS ", 'fabric': {'node': {'gbps': 0}}}"),
		 "topology.fabric.node.gbps: must be positive, not 0"},
		{TOPO("{" RACKS ", 'fabric': {'cluster': {'gbps': 'fast'}}}"),
		 "topology.fabric.cluster.gbps: must be a number, not \"fast\""},
		{TOPO("{" RACKS ", 'fabric': {'node': {'latency_us': -1}}}"),
		 "topology.fabric.node.latency_us: must be positive, not -1"},
		{TOPO("{" RACKS ", 'fabric': {'rack': {'speed': 1}}}"),
		 "topology.fabric.rack.speed: unknown key (allowed: kind, gbps, latency_us)"},
		{TOPO("{" RACKS ", 'fabric': {'rack': []}}"),
		 "topology.fabric.rack: must be an object, not a list"},
		{TOPO("{" RACKS "}"), "topology: needs nodes or generate (or both)"},
	};
	assert_all_refused(cases, sizeof cases / sizeof *cases);
}

Test(scenario, refuses_bad_generate)
{
	static const struct bad_doc cases[] = {
		{TOPO("{" RACKS ", 'generate': {'gpus_per_node': 4}}"),
		 "topology.generate.counts: required"},
		{TOPO("{" RACKS ", 'generate': {'counts': [2], 'gpus_per_node': 4}}"),
		 "topology.generate.counts: has 1 counts, the topology has 2 levels (one count per "
		 "level)"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 0], 'gpus_per_node': 4}}"),
		 "topology.generate.counts[1]: must be at least 1, not 0"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2.5], 'gpus_per_node': 4}}"),
		 "topology.generate.counts[1]: must be a positive integer, not 2.5"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2]}}"),
		 "topology.generate.gpus_per_node: required"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 300}}"),
		 "topology.generate.gpus_per_node: 300 is above the limit 256"},
		{TOPO("{" RACKS ", 'generate': {'counts': [5000, 5000], 'gpus_per_node': 1}}"),
		 "topology.generate.counts: generates more than 16777216 nodes"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1e30, 5], 'gpus_per_node': 1}}"),
		 "topology.generate.counts[0]: must be a positive integer, not 1e+30"},
		{TOPO("{" RACKS ", 'generate': {'counts': [4096, 1024], 'gpus_per_node': 8}}"),
		 "topology.generate.counts: generates more than 16777216 devices"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 4, 'perf': [1, 1]}}"),
		 "topology.generate.perf: has 2 values, the node has 4 devices (one value per device)"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 1, 'perf': 'x'}}"),
		 "topology.generate.perf: must be a positive number or a list with one per device, not "
		 "\"x\""},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 1, 'memory_gb': 0}}"),
		 "topology.generate.memory_gb: must be positive, not 0"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 1, 'nodes': 2}}"),
		 "topology.generate.nodes: unknown key (allowed: counts, gpus_per_node, model, "
		 "memory_gb, perf, x_fabric)"},
	};
	assert_all_refused(cases, sizeof cases / sizeof *cases);
}

Test(scenario, refuses_bad_nodes)
{
	static const struct bad_doc cases[] = {
		{TOPO("{" RACKS ", 'nodes': {}}"), "topology.nodes: must be a list, not an object"},
		{TOPO("{" RACKS ", 'nodes': []}"), "topology.nodes: the topology has no node"},
		{TOPO("{" RACKS ", 'nodes': [1]}"), "topology.nodes[0]: must be an object, not a number"},
		{TOPO("{" RACKS ", 'nodes': [{'path': ['r'], 'gpus': 1}]}"),
		 "topology.nodes[0].name: required"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'a/b', 'path': ['r'], 'gpus': 1}]}"),
		 "topology.nodes[0].name: a node name \"a/b\" contains '/'"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'gpus': 1}]}"),
		 "topology.nodes[0].path: required: 1 domain names (rack)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r', 's'], 'gpus': 1}]}"),
		 "topology.nodes[0].path: has 2 names, needs 1 (one per level above the node: rack)"},
		{TOPO("{'levels': ['node'], 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 1}]}"),
		 "topology.nodes[0].path: has 1 names, needs 0 (one per level above the node: none)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': [''], 'gpus': 1}]}"),
		 "topology.nodes[0].path[0]: a domain name must not be empty"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': 'r', 'gpus': 1}]}"),
		 "topology.nodes[0].path: must be a list, not a string"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r']}]}"),
		 "topology.nodes[0].gpus: required (the node's device count)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'w', 'path': ['r'], 'gpus': 1},"
		      "{'name': 'x', 'path': ['r'], 'gpus': 1}, {'name': 'y', 'path': ['r'], 'gpus': 1},"
		      "{'name': 'z', 'path': ['r'], 'gpus': 0}]}"),
		 "topology.nodes[3].gpus: must be at least 1, not 0"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 257}]}"),
		 "topology.nodes[0].gpus: 257 is above the limit 256"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': true}]}"),
		 "topology.nodes[0].gpus: must be a positive integer, not true"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 2, 'perf': [1, -1]}]}"),
		 "topology.nodes[0].perf[1]: must be positive, not -1"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 2, 'perf': [1]}]}"),
		 "topology.nodes[0].perf: has 1 values, the node has 2 devices (one value per device)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 2, 'model': 5}]}"),
		 "topology.nodes[0].model: a model must be a string, not 5"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 1},"
		      "{'name': 'y', 'path': ['r'], 'gpu': 1}]}"),
		 "topology.nodes[1].gpu: unknown key (did you mean 'gpus'?) (allowed: name, path, gpus, "
		 "model, memory_gb, perf, hwloc, x_fabric)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x1', 'path': ['r1'], 'gpus': 4},"
		      "{'name': 'x2', 'path': ['r1'], 'gpus': 4}, {'name': 'x1', 'path': ['r2'], "
		      "'gpus': 4}]}"),
		 "topology.nodes[2].name: duplicate node name \"x1\" (also topology.nodes[0])"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 4},"
		      "'nodes': [{'name': 'rack0-node1', 'path': ['r9'], 'gpus': 4}]}"),
		 "topology.nodes[0].name: duplicate node name \"rack0-node1\" (a generated node has it)"},
		/* a duplicate name is named before the node's other fields are read */
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x1', 'path': ['r1'], 'gpus': 4},"
		      "{'name': 'x1', 'path': ['r1'], 'gpus': 'x1'}]}"),
		 "topology.nodes[1].name: duplicate node name \"x1\" (also topology.nodes[0])"},
		/* generated names are recognised by their spelling and range */
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 4},"
		      "'nodes': [{'name': 'rack0-node01', 'path': ['r9'], 'gpus': 4},"
		      "{'name': 'rack0-node2', 'path': ['r9'], 'gpus': 4},"
		      "{'name': 'rack0-node0', 'path': ['r9'], 'gpus': 4}]}"),
		 "topology.nodes[2].name: duplicate node name \"rack0-node0\" (a generated node has it)"},
	};
	assert_all_refused(cases, sizeof cases / sizeof *cases);
}

Test(scenario, refuses_bad_hwloc_nodes)
{
	static const struct bad_doc cases[] = {
		{TOPO("{" RACKS ", 'nodes': [{'name': 'h', 'path': ['r'], 'hwloc': 3}]}"),
		 "topology.nodes[0].hwloc: must be the path of an hwloc XML file"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'h', 'path': ['r'], 'hwloc': ''}]}"),
		 "topology.nodes[0].hwloc: must be the path of an hwloc XML file"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'h', 'path': ['r'], 'hwloc': 'nope.xml'}]}"),
		 "topology.nodes[0].hwloc: cannot read \"nope.xml\" (No such file or directory)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'h', 'path': ['r'], 'hwloc': 'pcie-pairs.xml',"
		      "'gpus': 8}]}"),
		 "topology.nodes[0].gpus: 8, but the hwloc file \"pcie-pairs.xml\" has 4 GPUs"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'h', 'path': ['r'], 'hwloc': 'pcie-pairs.xml',"
		      "'perf': [1, 1]}]}"),
		 "topology.nodes[0].perf: has 2 values, the node has 4 devices (one value per device)"},
	};
	assert_all_refused(cases, sizeof cases / sizeof *cases);
	/* The importer's own message follows the file's name. */
	assert_refused(TOPO("{" RACKS ", 'nodes': [{'name': 'h', 'path': ['r'], "
	                    "'hwloc': 'not-hwloc.xml'}]}"),
	               "topology.nodes[0].hwloc: \"not-hwloc.xml\": ", true);
}

Test(scenario, refuses_bad_failure_domains)
{
#define FD_TOPO(fd) TOPO("{" RACKS ", 'nodes': [{'name': 'x1', 'path': ['r'], 'gpus': 4}," \
                         "{'name': 'x2', 'path': ['r'], 'gpus': 4}], 'failure_domains': " fd "}")
	static const struct bad_doc cases[] = {
		{FD_TOPO("[]"), "topology.failure_domains: must be an object, not a list"},
		{FD_TOPO("{'rack': {}}"),
		 "topology.failure_domains.rack: a failure-domain kind may not be a level name"},
		{FD_TOPO("{'cluster': {}}"),
		 "topology.failure_domains.cluster: 'cluster' may not be a failure-domain kind"},
		{FD_TOPO("{'a/b': {}}"),
		 "topology.failure_domains.a/b: a failure-domain kind \"a/b\" contains '/'"},
		{FD_TOPO("{'power': ['x1']}"),
		 "topology.failure_domains.power: must be an object (domain name -> list of nodes or "
		 "devices), not a list"},
		{FD_TOPO("{'power': {'': ['x1']}}"),
		 "topology.failure_domains.power.: a failure-domain name must not be empty"},
		{FD_TOPO("{'power': {'pdu-a': {'x1': 1}}}"),
		 "topology.failure_domains.power.pdu-a: must be a list, not an object"},
		{FD_TOPO("{'power': {'pdu-a': [3]}}"),
		 "topology.failure_domains.power.pdu-a[0]: must be a node or device name, not 3"},
		{FD_TOPO("{'power': {'pdu-a': ['x1', 'x9']}}"),
		 "topology.failure_domains.power.pdu-a[1]: unknown node or device \"x9\""},
		{FD_TOPO("{'power': {'pdu-a': ['x9/0']}}"),
		 "topology.failure_domains.power.pdu-a[0]: unknown node or device \"x9/0\""},
		{FD_TOPO("{'power': {'pdu-a': ['x1/4']}}"),
		 "topology.failure_domains.power.pdu-a[0]: node x1 has 4 devices, so there is no "
		 "device x1/4"},
		{FD_TOPO("{'power': {'pdu-a': ['x1/123456789012']}}"),
		 "topology.failure_domains.power.pdu-a[0]: node x1 has 4 devices, so there is no "
		 "device x1/123456789012"},
		{FD_TOPO("{'power': {'pdu-a': ['x1/a']}}"),
		 "topology.failure_domains.power.pdu-a[0]: \"x1/a\" is not a device name (node/index)"},
		{FD_TOPO("{'power': {'pdu-a': ['x1/']}}"),
		 "topology.failure_domains.power.pdu-a[0]: \"x1/\" is not a device name (node/index)"},
		{FD_TOPO("{'power': {'pdu-a': ['x9/a']}}"), /* the node part is no node either */
		 "topology.failure_domains.power.pdu-a[0]: unknown node or device \"x9/a\""},
		{FD_TOPO("{'power': {'pdu-a': ['x1'], 'pdu-b': ['x2', 'x1']}}"),
		 "topology.failure_domains.power.pdu-b[1]: x1 is listed twice under power (also at "
		 "topology.failure_domains.power.pdu-a[0])"},
		{FD_TOPO("{'power': {'pdu-a': ['x1'], 'pdu-b': ['x1/0']}}"),
		 "topology.failure_domains.power.pdu-b[0]: x1/0 is listed twice under power (also at "
		 "topology.failure_domains.power.pdu-a[0])"},
		{FD_TOPO("{'power': {'pdu-a': ['x2/1', 'x1/3'], 'pdu-b': ['x1']}}"),
		 "topology.failure_domains.power.pdu-b[0]: x1 is listed twice under power (also at "
		 "topology.failure_domains.power.pdu-a[1])"},
		{FD_TOPO("{'power': {'pdu-a': ['x1/3', 'x1/03']}}"),
		 "topology.failure_domains.power.pdu-a[1]: x1/3 is listed twice under power (also at "
		 "topology.failure_domains.power.pdu-a[0])"},
		{FD_TOPO("{'power': {'pdu-a': ['x1']}, 'cooling': {'c': ['x1/0'], 'd': ['x1']}}"),
		 "topology.failure_domains.cooling.d[0]: x1 is listed twice under cooling (also at "
		 "topology.failure_domains.cooling.c[0])"},
	};
#undef FD_TOPO
	assert_all_refused(cases, sizeof cases / sizeof *cases);
}

Test(scenario, ignores_the_other_sections_and_builds_one_level_fleets)
{
	char *doc = dq("{'version': 1, 'state': {'anything': 1}, 'request': 7, 'policy': null,"
	               "'replace': [], 'topology': {'levels': ['node'], "
	               "'nodes': [{'name': 'solo', 'gpus': 2}]}}");
	tp_scenario *sc;
	const tp_topology *t = topology_of(doc, &sc);
	cr_assert_eq(tp_topology_device_count(t), 2);
	cr_assert_str_eq(tp_topology_node_name(t, 0), "solo");
	cr_assert_null(tp_scenario_cluster(sc));
	cr_assert_null(tp_scenario_request(sc));
	cr_assert_null(tp_scenario_policy(sc));
	cr_assert_null(tp_scenario_replace_job(sc));
	tp_scenario_destroy(sc);
	/* strict reads them, and refuses the first that is wrong */
	char err[512];
	cr_assert_eq(import(doc, TP_SCENARIO_TOPOLOGY, 1, &sc, err, sizeof err), TP_EPARSE);
	cr_assert_str_eq(err, "state.anything: unknown key (allowed: jobs, down, cordoned, x_service_caps, x_partitions)");
	free(doc);
	TP_ASSERT_NO_LEAKS();
}

/* ---- the spec's examples ------------------------------------------------------------------- */

/* The fields an example's expectation says make its topology invalid: the alternatives of its
 * message_contains that start with "topology" ("topology.nodes[2].name"), into alts; returns
 * how many (0: the topology should build). */
static size_t expected_topology_errors(const char *expect_path, char alts[][128], size_t max)
{
	size_t n = 0;
	json_error_t je;
	json_t *doc = json_load_file(expect_path, 0, &je);
	cr_assert_not_null(doc, "%s: %s", expect_path, je.text);
	const char *status = json_string_value(json_object_get(doc, "status"));
	json_t *hard = json_object_get(doc, "hard");
	size_t i, k;
	json_t *h, *alt;
	if (status && !strcmp(status, "invalid"))
		json_array_foreach(hard, i, h) {
			json_t *mc = json_object_get(h, "message_contains");
			json_t *one = json_array();
			if (json_is_string(mc))
				json_array_append(one, mc);
			json_array_foreach(json_is_array(mc) ? mc : one, k, alt)
				if (n < max && json_is_string(alt) &&
				    !strncmp(json_string_value(alt), "topology", 8))
					snprintf(alts[n++], 128, "%s", json_string_value(alt));
			json_decref(one);
		}
	json_decref(doc);
	return n;
}

Test(scenario, builds_the_topology_of_every_spec_example)
{
	const char *shared = getenv("TP_SHARED_DIR");
	char dir[1024];
	snprintf(dir, sizeof dir, "%s/spec/examples", shared && *shared ? shared : TP_SHARED_DIR);
	DIR *d = opendir(dir);
	if (!d)
		cr_skip_test("skipped: %s is not there (set TP_SHARED_DIR to the shared folder)", dir);
	size_t built = 0, refused = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n < 6 || strcmp(e->d_name + n - 5, ".json") ||
		    (n > 12 && !strcmp(e->d_name + n - 12, ".expect.json")))
			continue;
		char path[2048], expect[2100], alts[8][128], err[512];
		snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
		snprintf(expect, sizeof expect, "%.*s.expect.json", (int)strlen(path) - 5, path);
		size_t nalts = expected_topology_errors(expect, alts, 8);
		tp_topology *t = load_fixture_path(path, err, sizeof err);
		if (!nalts) {
			cr_assert_not_null(t, "%s: %s", e->d_name, err);
			cr_assert_gt(tp_topology_device_count(t), 0);
			built++;
		} else {
			cr_assert_null(t, "%s was built, but its topology is invalid", e->d_name);
			bool named = false;
			for (size_t i = 0; i < nalts; i++)
				named |= strstr(err, alts[i]) != NULL;
			cr_assert(named, "%s: '%s' names none of the expected fields (%s, ...)", e->d_name,
			          err, alts[0]);
			refused++;
		}
		tp_topology_destroy(t);
	}
	closedir(d);
	cr_assert_gt(built, 0, "no example in %s", dir);
	cr_log_info("%zu example topologies built, %zu refused as expected", built, refused);
}

/* ---- state, request, policy, replace -------------------------------------------------------- */

/* The document of bindings/python/tests/test_scenario.py (BASE), which every command accepts. */
#define BASE_TOPOLOGY                                                                          \
	"'topology': {'levels': ['block', 'rack', 'node'], 'nodes': ["                             \
	"{'name': 'x1', 'path': ['b1', 'r1'], 'gpus': 4},"                                         \
	"{'name': 'x2', 'path': ['b1', 'r1'], 'gpus': 4, 'model': 'GB200', 'perf': 1.1},"          \
	"{'name': 'x3', 'path': ['b1', 'r2'], 'gpus': 4, 'memory_gb': 80},"                        \
	"{'name': 'x4', 'path': ['b2', 'r3'], 'gpus': 8, 'perf': [1, 1, 1, 1, 1, 1, 1, 0.9]}],"    \
	"'failure_domains': {'power': {'pdu-a': ['x1', 'x2'], 'pdu-b': ['x3', 'x4/0']}}}"
#define BASE_STATE                                                                             \
	"'state': {'jobs': [{'id': 'a', 'devices': {'x1': 2}},"                                    \
	"{'id': 'b', 'class': 'inference', 'priority': 5, 'tenant': 't1', 'migratable': true,"     \
	" 'checkpoint_s': 30, 'devices': {'x1': [0], 'x3': 2},"                                    \
	" 'request': {'count': 3, 'required': 'block'}}],"                                         \
	"'down': ['x4/7'], 'cordoned': ['x2']}"
#define BASE_REQUEST                                                                           \
	"'request': {'id': 'new', 'count': 8, 'group': {'size': 4, 'level': 'node'},"              \
	"'required': 'block', 'slices': [{'level': 'rack', 'size': 8}],"                           \
	"'max_per_domain': [{'level': 'power', 'devices': 8}],"                                    \
	"'spread': {'level': 'node', 'min_domains': 2},"                                           \
	"'colocate': {'job': 'a', 'level': 'block'}, 'exclusive': 'rack',"                         \
	"'select': {'model': 'GB200', 'min_perf': 0.5, 'nodes': ['x1', 'x2', 'x1']}}"
#define BASE_REST "'policy': {'max_moves': 2, 'migrate': false, 'min_priority_gap': 1.5}, "   \
	"'replace': {'job': 'b', 'failed': ['x3', 'x1/0', 'x3/1']}"
#define BASE(extra)                                                                            \
	"{'version': 1, " BASE_TOPOLOGY ", " BASE_STATE ", " BASE_REQUEST ", " BASE_REST extra "}"

static tp_scenario *import_ok(const char *doc_text, tp_scenario_command cmd, int strict)
{
	char *doc = dq(doc_text);
	char err[512] = "x";
	tp_scenario *sc = NULL;
	cr_assert_eq(import(doc, cmd, strict, &sc, err, sizeof err), 0, "%s", err);
	cr_assert_str_eq(err, "");
	free(doc);
	return sc;
}

static void assert_job(const tp_cluster *c, const tp_topology *t, const char *job,
                       const char *const *want, size_t n)
{
	const uint32_t *devs;
	size_t got;
	cr_assert_eq(tp_cluster_job_devices(c, job, &devs, &got), 0, "job %s", job);
	cr_assert_eq(got, n, "job %s holds %zu devices", job, got);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(devs[i], tp_test_dev(t, want[i]), "job %s rank %zu", job, i);
}

Test(scenario, builds_the_state_lists_first_then_counts_in_job_order)
{
	tp_scenario *sc = import_ok(BASE(""), TP_SCENARIO_FRAG, 0);
	const tp_topology *t = tp_scenario_topology(sc);
	tp_cluster *c = tp_scenario_cluster(sc);
	cr_assert_not_null(c);
	cr_assert_eq(tp_cluster_job_count(c), 2);
	/* b's list takes x1/0 first; a's count then takes the lowest indices not held */
	assert_job(c, t, "a", (const char *const[]){"x1/1", "x1/2"}, 2);
	assert_job(c, t, "b", (const char *const[]){"x1/0", "x3/0", "x3/1"}, 3);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "b", &o), 0);
	cr_assert(o.job_class == TP_CLASS_INFERENCE && o.priority == 5 && o.migratable &&
	          o.preemptible && o.checkpoint_s == 30);
	cr_assert_str_eq(o.tenant, "t1");
	cr_assert_not_null(o.shape);
	cr_assert_eq(o.shape->count, 3);
	cr_assert_str_eq(o.shape->required, "block");
	cr_assert_str_eq(o.shape->id, "b"); /* a job's shape is the job's */
	cr_assert_eq(tp_cluster_job_options(c, "a", &o), 0);
	cr_assert(o.job_class == TP_CLASS_TRAINING && o.checkpoint_s == 60 && !o.shape);
	cr_assert_str_eq(o.tenant, "default");
	cr_assert_eq(tp_cluster_device_down(c, tp_test_dev(t, "x4/7")), 1);
	cr_assert_eq(tp_cluster_down_total_count(c), 1);
	cr_assert_eq(tp_cluster_cordoned_total_count(c), 4);
	for (unsigned i = 0; i < 4; i++) {
		char name[8];
		snprintf(name, sizeof name, "x2/%u", i);
		cr_assert_eq(tp_cluster_device_cordoned(c, tp_test_dev(t, name)), 1);
	}
	/* frag reads no request, policy or replace */
	cr_assert_null(tp_scenario_request(sc));
	cr_assert_null(tp_scenario_policy(sc));
	cr_assert_null(tp_scenario_replace_job(sc));
	tp_topology *taken;
	cr_assert_eq(tp_scenario_topology_take(sc, &taken), TP_EINVAL); /* the cluster uses it */
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}

Test(scenario, reads_the_request_of_place_and_defrag)
{
	for (int cmd = TP_SCENARIO_PLACE; cmd <= TP_SCENARIO_DEFRAG; cmd++) {
		tp_scenario *sc = import_ok(BASE(""), (tp_scenario_command)cmd, 0);
		const tp_request *r = tp_scenario_request(sc);
		cr_assert_not_null(r);
		cr_assert_str_eq(r->id, "new");
		cr_assert(r->count == 8 && r->group_size == 4 && r->job_class == TP_CLASS_TRAINING);
		cr_assert_str_eq(r->group_level, "node");
		cr_assert_str_eq(r->required, "block");
		cr_assert_null(r->preferred);
		cr_assert(r->nslices == 1 && r->slices[0].size == 8);
		cr_assert_str_eq(r->slices[0].level, "rack");
		cr_assert(r->ncaps == 1 && r->caps[0].devices == 8 && r->caps[0].groups == 0);
		cr_assert_str_eq(r->caps[0].level, "power");
		cr_assert_str_eq(r->spread_level, "node");
		cr_assert_eq(r->spread_min_domains, 2);
		cr_assert_str_eq(r->colocate_job, "a");
		cr_assert_str_eq(r->colocate_level, "block");
		cr_assert_str_eq(r->exclusive, "rack");
		cr_assert_str_eq(r->select_model, "GB200");
		cr_assert(r->select_min_perf == 0.5 && r->select_min_memory_gb == 0);
		cr_assert_eq(r->nselect_nodes, 2); /* a name given twice counts once */
		cr_assert_str_eq(r->select_nodes[0], "x1");
		cr_assert_str_eq(r->select_nodes[1], "x2");
		cr_assert_null(r->tenant);
		const tp_defrag_policy *p = tp_scenario_policy(sc);
		if (cmd == TP_SCENARIO_PLACE) {
			cr_assert_null(p);
		} else {
			cr_assert_not_null(p);
			cr_assert(!p->migrate && p->preempt && !p->allow_interactive && p->max_moves == 2 &&
			          p->max_cost_s < 0 && p->allow_less_local);
			cr_assert_eq(p->min_priority_gap, 2, "a fractional gap rounds up");
		}
		tp_scenario_destroy(sc);
	}
	/* without a policy section, defrag gets the spec's defaults */
	tp_scenario *sc = import_ok("{'version': 1, " BASE_TOPOLOGY ", 'request': {'count': 4}}",
	                            TP_SCENARIO_DEFRAG, 0);
	const tp_defrag_policy *p = tp_scenario_policy(sc);
	cr_assert(p && p->migrate && p->preempt && !p->allow_interactive &&
	          p->max_moves == UINT32_MAX && p->max_cost_s < 0 && p->min_priority_gap == 1);
	cr_assert_eq(tp_cluster_job_count(tp_scenario_cluster(sc)), 0);
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}

Test(scenario, reads_the_replace_section)
{
	tp_scenario *sc = import_ok(BASE(""), TP_SCENARIO_REPLACE, 0);
	const tp_topology *t = tp_scenario_topology(sc);
	cr_assert_str_eq(tp_scenario_replace_job(sc), "b");
	const uint32_t *f;
	size_t n;
	cr_assert_eq(tp_scenario_replace_failed(sc, &f, &n), 0);
	/* x3 stands for its 4 devices; x3/1 again is given once */
	const char *want[] = {"x3/0", "x3/1", "x3/2", "x3/3", "x1/0"};
	cr_assert_eq(n, 5);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(f[i], tp_test_dev(t, want[i]), "failed[%zu]", i);
	cr_assert_null(tp_scenario_request(sc));
	cr_assert_eq(tp_scenario_replace_failed(sc, NULL, &n), TP_EINVAL);
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}

Test(scenario, refuses_bad_state_request_policy_and_replace)
{
	static const struct {
		tp_scenario_command cmd;
		const char *extra, *message;
	} cases[] = {
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'devices': {'x1': 1}}, "
		                   "{'id': 'a', 'devices': {'x2': 1}}]}",
		 "state.jobs[1].id: duplicate job id \"a\" (also state.jobs[0].id)"},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'class': 'batch', 'devices': {}}]}",
		 "state.jobs[0].class: unknown class \"batch\" (one of training, inference, interactive)"},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'priority': 2147483648, "
		                   "'devices': {'x1': 1}}]}",
		 "state.jobs[0].priority: 2147483648 is above the limit 2147483647"},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'devices': {'x9': 1}}]}",
		 "state.jobs[0].devices.x9: unknown node \"x9\""},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'devices': {'x1': [1, 1]}}]}",
		 "state.jobs[0].devices.x1[1]: device index 1 is listed twice"},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'devices': {'x1': 3}}, "
		                   "{'id': 'b', 'devices': {'x1': 2}}]}",
		 "state.jobs[1].devices.x1: 2 devices wanted, only 1 of node x1 are not already held "
		 "(by a)"},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'devices': {'x1': [0]}}, "
		                   "{'id': 'b', 'devices': {'x1': [0]}}]}",
		 "state.jobs[1].devices.x1[0]: device x1/0 is already held by job a"},
		{TP_SCENARIO_FRAG, ", 'state': {'jobs': [{'id': 'a', 'devices': {'x1': 1}, "
		                   "'request': {'count': 1, 'colocate': {'job': 'a', 'level': 'rack'}}}]}",
		 "state.jobs[0].request.colocate.job: a job cannot be colocated with itself"},
		{TP_SCENARIO_FRAG, ", 'state': {'down': ['x1/9']}",
		 "state.down[0]: node x1 has 4 devices, so there is no device x1/9"},
		{TP_SCENARIO_FRAG, ", 'state': {'cordoned': ['nope']}",
		 "state.cordoned[0]: unknown node or device \"nope\""},
		{TP_SCENARIO_PLACE, "", "request: required by place"},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 10, 'group': {'size': 4}}",
		 "request.count: 10 is not a multiple of request.group.size 4"},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 16, 'slices': [{'level': 'rack', 'size': 8},"
		                    " {'level': 'node', 'size': 16}]}",
		 "request.slices[1].size: 16 does not divide the outer slice's size 8"},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 8, 'required': 'rack', 'preferred': 'rack'}",
		 "request.preferred: \"rack\" must be below the required level \"rack\""},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 8, 'max_per_domain': [{'level': 'cooling', "
		                    "'devices': 4}]}",
		 "request.max_per_domain[0].level: unknown level \"cooling\" (one of block, rack, node, "
		 "power)"},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 4, 'spread': {'level': 'rack', "
		                    "'min_domains': 4294967296}}",
		 "request.spread.min_domains: 4294967296 is above the limit 4294967295"},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 4, 'colocate': {'job': 'zz', 'level': 'rack'}}",
		 "request.colocate.job: no running job \"zz\""},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 4, 'select': {'nodes': []}}",
		 "request.select.nodes: an empty list allows no node (leave it out to allow all)"},
		{TP_SCENARIO_PLACE, ", 'request': {'count': 4, 'prefered': 'rack'}",
		 "request.prefered: unknown key (did you mean 'preferred'?) (allowed: id, class, "
		 "priority, tenant, count, group, required, preferred, slices, balanced, "
		 "max_per_domain, spread, colocate, exclusive, select, x_gpu_nic_pairs, x_service, x_comm, x_box, x_expected_end_s)"},
		{TP_SCENARIO_DEFRAG, ", 'request': {'count': 4}, 'policy': {'max_moves': -1}",
		 "policy.max_moves: -1 is below 0"},
		{TP_SCENARIO_DEFRAG, ", 'request': {'count': 4}, 'policy': {'min_priority_gap': 2147483648}",
		 "policy.min_priority_gap: 2147483648 is above the limit 2147483647"},
		{TP_SCENARIO_DEFRAG, ", 'request': {'count': 4}, 'policy': {'min_priority_gap': 1e300}",
		 "policy.min_priority_gap: 1e+300 is above the limit 2147483647"},
		{TP_SCENARIO_REPLACE, "", "replace: required by replace"},
		{TP_SCENARIO_REPLACE, ", 'replace': {'job': 'zz', 'failed': ['x1']}",
		 "replace.job: no running job \"zz\""},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char doc[4096];
		snprintf(doc, sizeof doc, "{'version': 1, %s%s}", BASE_TOPOLOGY, cases[i].extra);
		assert_refused_for(doc, cases[i].cmd, cases[i].message, false);
	}
	/* the code, through the call itself */
	const char *bad = "{\"version\": 1, \"topology\": {\"levels\": [\"node\"], \"nodes\": "
	                  "[{\"name\": \"n\", \"gpus\": 4}]}, \"request\": {\"count\": 10, "
	                  "\"slices\": [{\"level\": \"node\", \"size\": 8}]}}";
	char err[256];
	tp_scenario *sc;
	tp_scenario_options o = TP_SCENARIO_OPTIONS_INIT;
	o.command = TP_SCENARIO_PLACE;
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, bad, strlen(bad), &o, err, sizeof err), TP_EPARSE,
	              err, "request.slices[0].size: 8 does not divide count 10");
	cr_assert_null(sc);
	TP_ASSERT_NO_LEAKS();
}

Test(scenario, validates_unused_sections_only_when_strict)
{
	const char *doc = BASE(", 'x': 1");
	assert_refused_for(doc, TP_SCENARIO_FRAG, "x: unknown key (allowed: version, topology, "
	                   "state, request, policy, replace, x_sizing, x_pd)", false);
	const char *bad_policy = "{'version': 1, " BASE_TOPOLOGY ", 'policy': {'budget': 1}}";
	tp_scenario *sc = import_ok(bad_policy, TP_SCENARIO_FRAG, 0);
	tp_scenario_destroy(sc);
	char *d = dq(bad_policy);
	char err[512];
	cr_assert_eq(import(d, TP_SCENARIO_FRAG, 1, &sc, err, sizeof err), TP_EPARSE);
	cr_assert_str_eq(err, "policy.budget: unknown key (allowed: migrate, preempt, "
	                      "allow_interactive, max_moves, max_cost_s, min_priority_gap)");
	free(d);
	TP_ASSERT_NO_LEAKS();
}

Test(scenario, refuses_misuse_and_a_topology_over_the_budget)
{
	char err[64] = "x";
	tp_scenario *sc = (tp_scenario *)err;
	tp_scenario_options o = TP_SCENARIO_OPTIONS_INIT;
	TP_ASSERT_ERR(tp_scenario_from_json(NULL, "{}", 2, &o, err, sizeof err), TP_EINVAL, err,
	              "out is NULL");
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, NULL, 0, &o, err, sizeof err), TP_EINVAL, err,
	              "json is NULL");
	cr_assert_null(sc);
	o.version = 99;
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, "{}", 2, &o, err, sizeof err), TP_EINVAL, err,
	              "opts->version 99 is not 1");
	o.version = TP_SCENARIO_OPTIONS_VERSION;
	o.command = (tp_scenario_command)5;
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, "{}", 2, &o, err, sizeof err), TP_EINVAL, err,
	              "opts->command 5 is not a tp_scenario_command");
	cr_assert_eq(tp_scenario_options_init(&o, 2), TP_EINVAL);
	cr_assert_eq(tp_scenario_options_init(NULL, TP_SCENARIO_OPTIONS_VERSION), TP_EINVAL);
	tp_allocator half = {0};
	o = (tp_scenario_options)TP_SCENARIO_OPTIONS_INIT;
	o.alloc = &half;
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, "{}", 2, &o, err, sizeof err), TP_EINVAL, err,
	              "opts->alloc lacks a function");
	/* NULL readers are harmless */
	tp_scenario_destroy(NULL);
	cr_assert_null(tp_scenario_topology(NULL));
	cr_assert_null(tp_scenario_cluster(NULL));
	cr_assert_null(tp_scenario_request(NULL));
	cr_assert_null(tp_scenario_policy(NULL));
	cr_assert_null(tp_scenario_replace_job(NULL));

	const char *big = "{\"version\": 1, \"topology\": {\"levels\": [\"node\"], \"nodes\": ["
	                  "{\"name\": \"a\", \"gpus\": 8}, {\"name\": \"b\", \"gpus\": 8}]}}";
	o = (tp_scenario_options)TP_SCENARIO_OPTIONS_INIT;
	o.max_devices = 15;
	TP_ASSERT_ERR(tp_scenario_from_json(&sc, big, strlen(big), &o, err, sizeof err), TP_ELIMIT,
	              err, "topology.nodes[1]: the topology has more than 15 devices");
	o.max_devices = 16;
	cr_assert_eq(tp_scenario_from_json(&sc, big, strlen(big), &o, err, sizeof err), 0);
	tp_scenario_destroy(sc);
}

/* request.x_comm (extension): the step model of tp_request.comm, dp from the count by default,
 * and its allocation fails cleanly. */
Test(scenario, reads_the_x_comm_extension)
{
	tp_test_alloc_reset();
	tp_scenario *sc = import_ok("{'version': 1, " BASE_TOPOLOGY ", 'request': {'count': 8, "
	                            "'x_comm': {'tp': 4, 'tp_bytes': 1e6, 'tp_msgs': 3, "
	                            "'dp_overlap': 0.5, 'ep': 2}}}",
	                            TP_SCENARIO_PLACE, 0);
	const tp_request *r = tp_scenario_request(sc);
	cr_assert_not_null(r->comm);
	cr_assert_eq(r->comm->version, TP_STEP_MODEL_VERSION);
	cr_assert(r->comm->tp == 4 && r->comm->pp == 1 && r->comm->dp == 2 && r->comm->ep == 2);
	cr_assert(r->comm->tp_bytes == 1e6 && r->comm->tp_msgs == 3 && r->comm->dp_overlap == 0.5);
	tp_placement *p;
	cr_assert_eq(tp_place(tp_scenario_cluster(sc), r, &p), 0, "%s", tp_placement_errmsg(p));
	tp_placement_destroy(p);
	tp_scenario_destroy(sc);
	sc = import_ok("{'version': 1, " BASE_TOPOLOGY ", 'request': {'count': 4}}",
	               TP_SCENARIO_PLACE, 0);
	cr_assert_null(tp_scenario_request(sc)->comm);
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
	char *doc = dq("{'version': 1, " BASE_TOPOLOGY ", 'request': {'count': 4, 'x_comm': {}}}");
	char err[512];
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_test_alloc_fail_at(n);
		sc = NULL;
		int rc = import(doc, TP_SCENARIO_PLACE, 0, &sc, err, sizeof err);
		if (rc == 0) {
			cr_assert_eq(tp_scenario_request(sc)->comm->dp, 4);
			tp_scenario_destroy(sc);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s (%s)", n, tp_err_name(rc), err);
		TP_ASSERT_NO_LEAKS();
	}
	TP_ASSERT_NO_LEAKS();
	tp_test_alloc_reset();
	free(doc);
	/* refusals name the field (the command-line table of docs/errors.md lists each one) */
	static const struct {
		const char *comm, *message;
	} bad[] = {
		{"{'tp': 3}", "request.x_comm.tp: 3 does not divide the request's count 4"},
		{"{'tp': 2, 'pp': 3}", "request.x_comm.pp: tp 2 x pp 3 does not divide the request's count 4"},
		{"{'tp': 2, 'dp': 3}", "request.x_comm.dp: tp 2 x pp 1 x dp 3 is not the request's count 4"},
		{"{'ep': 3}", "request.x_comm.ep: 3 does not divide dp 4"},
		{"{'dp_overlap': 2}", "request.x_comm.dp_overlap: 2 is above 1 (the share of the "
		                      "all-reduce hidden behind compute)"},
		{"{'min_efficiency': 1.5}", "request.x_comm.min_efficiency: 1.5 is above 1 (the lowest "
		                            "placement efficiency the job accepts, from 0 to 1)"},
		{"{'min_efficiency': -0.1}",
		 "request.x_comm.min_efficiency: must not be negative (-0.1)"},
		{"{'min_efficiency': '0.5'}",
		 "request.x_comm.min_efficiency: must be a number, not \"0.5\""},
	};
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		char text[2048];
		snprintf(text, sizeof text, "{'version': 1, %s, 'request': {'count': 4, 'x_comm': %s}}",
		         BASE_TOPOLOGY, bad[i].comm);
		assert_refused_for(text, TP_SCENARIO_PLACE, bad[i].message, false);
	}
}

/* request.x_comm.min_efficiency: tp_step_model.min_efficiency, the floor tp_place() keeps to.
 * Two 4-GPU nodes of one rack, NVLink inside a node and InfiniBand between them, two GPUs of
 * each held: any 4 free GPUs straddle the nodes, far below the efficiency of one node. */
#define FLOOR_DOC(floor)                                                                       \
	"{'version': 1, 'topology': {'levels': ['rack', 'node'], 'fabric': {"                       \
	"'node': {'kind': 'nvlink', 'gbps': 900, 'latency_us': 3.4},"                              \
	"'rack': {'kind': 'ib', 'gbps': 50, 'latency_us': 10}}, 'nodes': ["                        \
	"{'name': 'a', 'path': ['r0'], 'gpus': 4}, {'name': 'b', 'path': ['r0'], 'gpus': 4}]},"    \
	"'state': {'jobs': [{'id': 'x', 'devices': {'a': 2, 'b': 2}}]},"                           \
	"'request': {'count': 4, 'x_comm': {'tp': 4, 'compute_us': 1e5, 'tp_bytes': 67108864,"     \
	"'tp_msgs': 128" floor "}}}"

Test(scenario, x_comm_min_efficiency_is_the_floor_of_the_placement)
{
	tp_test_alloc_reset();
	tp_scenario *sc = import_ok(FLOOR_DOC(""), TP_SCENARIO_PLACE, 0);
	const tp_request *r = tp_scenario_request(sc);
	cr_assert_eq(r->comm->min_efficiency, 0.0, "no key: no floor");
	tp_placement *p;
	cr_assert_eq(tp_place(tp_scenario_cluster(sc), r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	double eff;
	cr_assert_eq(tp_cost_efficiency(&eff, tp_scenario_topology(sc), d, n, r->comm, NULL, NULL,
	                                0), 0);
	cr_assert_lt(eff, 0.5);
	tp_placement_destroy(p);
	tp_scenario_destroy(sc);

	sc = import_ok(FLOOR_DOC(", 'min_efficiency': 0.5"), TP_SCENARIO_PLACE, 0);
	r = tp_scenario_request(sc);
	cr_assert_eq(r->comm->version, TP_STEP_MODEL_VERSION);
	cr_assert_eq(r->comm->min_efficiency, 0.5);
	cr_assert_eq(tp_place(tp_scenario_cluster(sc), r, &p), TP_EBUSY);
	char want[64];
	snprintf(want, sizeof want, "the best placement now reaches %.3f (step ", eff);
	const char *msg = tp_placement_errmsg(p);
	cr_assert(strstr(msg, "busy: request.comm.min_efficiency 0.5: ") == msg, "%s", msg);
	cr_assert(strstr(msg, want), "%s", msg);
	tp_placement_destroy(p);
	tp_scenario_destroy(sc);

	/* a floor the placement meets, and 0 and 1, the ends of the range, are accepted */
	char floor[64];
	snprintf(floor, sizeof floor, ", 'min_efficiency': %.6f", eff * 0.99);
	char text[1024];
	snprintf(text, sizeof text, FLOOR_DOC("%s"), floor);
	sc = import_ok(text, TP_SCENARIO_PLACE, 0);
	cr_assert_eq(tp_place(tp_scenario_cluster(sc), tp_scenario_request(sc), &p), 0, "%s",
	             tp_placement_errmsg(p));
	tp_placement_destroy(p);
	tp_scenario_destroy(sc);
	sc = import_ok(FLOOR_DOC(", 'min_efficiency': 1"), TP_SCENARIO_PLACE, 0);
	cr_assert_eq(tp_scenario_request(sc)->comm->min_efficiency, 1.0);
	tp_scenario_destroy(sc);
	sc = import_ok(FLOOR_DOC(", 'min_efficiency': 0"), TP_SCENARIO_PLACE, 0);
	cr_assert_eq(tp_scenario_request(sc)->comm->min_efficiency, 0.0);
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}

Test(scenario, allocation_failures_leave_nothing_behind)
{
	char *doc = dq(BASE(""));
	char err[512];
	long n = 0;
	for (;; n++) {
		tp_test_alloc_reset();
		tp_test_alloc_fail_at(n);
		tp_scenario *sc = NULL;
		int rc = import(doc, TP_SCENARIO_DEFRAG, 1, &sc, err, sizeof err);
		if (rc == 0) {
			cr_assert_not_null(tp_scenario_request(sc));
			tp_scenario_destroy(sc);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s (%s)", n, tp_err_name(rc), err);
		cr_assert(strstr(err, "out of memory"), "allocation %ld: %s", n, err);
		cr_assert_null(sc);
		TP_ASSERT_NO_LEAKS();
	}
	cr_assert_gt(n, 10, "only %ld allocations", n);
	free(doc);
	/* the copy that marks lone surrogates is an allocation too */
	doc = dq("{'version': 1, 'topology': {'levels': ['node'], 'nodes': [{'name': 'a\\udc80', "
	         "'gpus': 1}]}}");
	tp_test_alloc_reset();
	tp_test_alloc_fail_at(1);
	tp_scenario *sc = NULL;
	TP_ASSERT_ERR(import(doc, TP_SCENARIO_TOPOLOGY, 0, &sc, err, sizeof err), TP_ENOMEM, err,
	              "out of memory");
	TP_ASSERT_NO_LEAKS();
	free(doc);
}

Test(scenario, names_the_field_that_holds_a_lone_surrogate)
{
	/* jansson refuses "\udc80"; the importer still names the field, as the CLI does */
	assert_refused_for("{'version': 1, " BASE_TOPOLOGY ", 'state': {'jobs': [{'id': 'a', "
	                   "'tenant': 't\\udc80', 'devices': {'x1': 1}}]}}",
	                   TP_SCENARIO_FRAG, "state.jobs[0].tenant: a tenant \"t\\udc80\" holds a lone "
	                   "surrogate (\\udc80), which is not a character", false);
	assert_refused_for("{'version': 1, " BASE_TOPOLOGY ", 'request': {'count': 1, "
	                   "'select': {'nodes': ['\\ud800x']}}}", TP_SCENARIO_PLACE,
	                   "request.select.nodes[0]: unknown node \"\\ud800x\"", false);
	const char *doc = "{\"version\": 1, \"topology\": {\"levels\": [\"node\"], \"nodes\": "
	                  "[{\"name\": \"\\udc80\", \"gpus\": 1}]}}";
	char err[256];
	tp_scenario *bad;
	TP_ASSERT_ERR(tp_scenario_from_json(&bad, doc, strlen(doc), NULL, err, sizeof err), TP_EPARSE,
	              err, "topology.nodes[0].name: a node name \"\\udc80\" holds a lone surrogate");
	/* a proper pair is a character like any other */
	tp_scenario *sc = import_ok("{'version': 1, 'topology': {'levels': ['node'], 'nodes': "
	                            "[{'name': 'n\\ud83d\\ude00', 'gpus': 1}]}}",
	                            TP_SCENARIO_TOPOLOGY, 0);
	cr_assert_str_eq(tp_topology_node_name(tp_scenario_topology(sc), 0), "n\xf0\x9f\x98\x80");
	tp_scenario_destroy(sc);
	TP_ASSERT_NO_LEAKS();
}
