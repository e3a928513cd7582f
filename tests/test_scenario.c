/* SPDX-License-Identifier: MIT */
/*
 * The benchmark harness's JSON reader (bench/json.c) and its reader of a scenario's topology
 * (bench/scenario.c, `tp-bench sim --fleet scenario:FILE`). Fixtures are in
 * tests/data/scenarios (TP_SCENARIO_DATA). The last test builds the topology of every example of
 * ../shared/spec/examples and is skipped, saying so, when that folder is absent.
 *
 * Both readers use the C library's allocator (the harness has no allocator hook), so leaks are
 * checked by the ASan/LSan build rather than by tp_test_allocator.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "scenario.h"
#include "testutil.h"

#ifndef TP_SCENARIO_DATA
#define TP_SCENARIO_DATA "tests/data/scenarios"
#endif
#ifndef TP_SHARED_DIR
#define TP_SHARED_DIR "../shared"
#endif

/* ---- JSON reader --------------------------------------------------------------------------- */

static struct json_doc parse_ok(const char *text)
{
	struct json_doc doc;
	struct json_error err;
	cr_assert_eq(json_parse(&doc, text, strlen(text), &err), 0, "%s: %s", text, err.msg);
	return doc;
}

Test(json, reads_every_kind_of_value)
{
	const char *text = " {\"a\": [1, -2.5e1, true, false, null, \"x\", {}, []],\r\n"
	                   "\t\"b\": {\"c\": 0}} ";
	struct json_doc doc = parse_ok(text);
	const struct json_value *root = doc.root;
	cr_assert_eq(root->type, JSON_OBJECT);
	cr_assert_eq(root->len, 2);
	cr_assert_str_eq(root->first->key, "a");
	cr_assert_eq(root->offset, 1);
	cr_assert_eq(root->end, strlen(text) - 1);

	const struct json_value *a = json_get(root, "a"), *v = a->first;
	cr_assert_eq(a->type, JSON_ARRAY);
	cr_assert_eq(a->len, 8);
	cr_assert(v->type == JSON_NUMBER && v->number == 1 && v->integer);
	v = v->next;
	cr_assert(v->type == JSON_NUMBER && v->number == -25 && !v->integer);
	cr_assert_eq(strncmp(text + v->offset, "-2.5e1", v->end - v->offset), 0);
	v = v->next;
	cr_assert(v->type == JSON_BOOL && v->boolean);
	v = v->next;
	cr_assert(v->type == JSON_BOOL && !v->boolean);
	v = v->next;
	cr_assert_eq(v->type, JSON_NULL);
	v = v->next;
	cr_assert(v->type == JSON_STRING && v->len == 1 && !strcmp(v->str, "x"));
	v = v->next;
	cr_assert(v->type == JSON_OBJECT && v->len == 0 && !v->first);
	v = v->next;
	cr_assert(v->type == JSON_ARRAY && v->len == 0 && !v->next);

	const struct json_value *c = json_get(json_get(root, "b"), "c");
	cr_assert(c && c->number == 0 && c->integer);
	cr_assert_null(json_get(root, "c"));
	cr_assert_null(json_get(a, "a"), "an array has no members");
	cr_assert_str_eq(json_kind(a), "a list");
	cr_assert_str_eq(json_kind(root), "an object");
	cr_assert_str_eq(json_kind(c), "a number");
	json_free(&doc);
	json_free(&doc); /* twice is harmless */
	json_free(NULL);
}

Test(json, decodes_every_escape_to_utf8)
{
	struct json_doc doc = parse_ok("[\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\","
	                               " \"\\u0041\\u00e9\\u20AC\", \"\\ud83d\\ude00\", \"a\\u0000b\","
	                               " \"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]");
	const struct json_value *v = doc.root->first;
	cr_assert_str_eq(v->str, "\" \\ / \b \f \n \r \t");
	v = v->next;
	cr_assert_str_eq(v->str, "A\xc3\xa9\xe2\x82\xac");
	v = v->next;
	cr_assert_str_eq(v->str, "\xf0\x9f\x98\x80", "a surrogate pair is one 4-byte character");
	v = v->next;
	cr_assert_eq(v->len, 3, "\\u0000 is kept, and len says so");
	cr_assert_eq(memcmp(v->str, "a\0b", 4), 0);
	v = v->next;
	cr_assert_str_eq(v->str, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "raw UTF-8 is copied");
	json_free(&doc);
}

Test(json, reads_numbers_exactly_as_strtod)
{
	struct json_doc doc =
		parse_ok("[0, -0, 123456789012, 0.5, 1E3, 1e-400, 1.7976931348623157e308]");
	const struct json_value *v = doc.root->first;
	double want[] = {0, 0, 123456789012.0, 0.5, 1000, 0, 1.7976931348623157e308};
	bool integer[] = {true, true, true, false, false, false, false};
	for (size_t i = 0; i < 7; i++, v = v->next) {
		cr_assert_eq(v->number, want[i], "value %zu", i);
		cr_assert_eq(v->integer, integer[i], "value %zu", i);
	}
	json_free(&doc);
}

Test(json, a_string_value_and_a_long_string_parse_alone)
{
	/* A string longer than an arena block gets its own block. */
	size_t n = 200000;
	char *text = malloc(n + 3);
	cr_assert_not_null(text);
	text[0] = '"';
	memset(text + 1, 'y', n);
	text[n + 1] = '"';
	text[n + 2] = '\0';
	struct json_doc doc = parse_ok(text);
	cr_assert_eq(doc.root->len, n);
	json_free(&doc);
	free(text);
}

/* One invalid text: where the error is and what the reason says. */
struct bad_json {
	const char *text;
	size_t offset;
	unsigned line, column;
	const char *reason;
};

Test(json, rejects_each_kind_of_invalid_text_saying_where)
{
	static const struct bad_json cases[] = {
		{"", 0, 1, 1, "expected a value, found the end of the input"},
		{"   ", 3, 1, 4, "expected a value, found the end of the input"},
		{"[1,]", 3, 1, 4, "expected a value, found ']'"},
		{"[1 2]", 3, 1, 4, "expected ',' or ']' after an array element, found '2'"},
		{"[1", 2, 1, 3, "expected ',' or ']' after an array element, found the end of the input"},
		{"{\"a\":1,}", 7, 1, 8, "expected a string key, found '}'"},
		{"{\"a\" 1}", 5, 1, 6, "expected ':' after an object key, found '1'"},
		{"{\"a\":1 \"b\":2}", 7, 1, 8, "expected ',' or '}' after an object member, found '\"'"},
		{"{a:1}", 1, 1, 2, "expected a string key, found 'a'"},
		{"{\"a\":1,\"b\":2,\"a\":3}", 13, 1, 14, "duplicate key \"a\""},
		{"[1] x", 4, 1, 5, "expected the end of the document, found 'x'"},
		{"{}{}", 2, 1, 3, "expected the end of the document, found '{'"},
		{"\"a\tb\"", 2, 1, 3, "control character U+0009 in a string"},
		{"\"a\nb\"", 2, 1, 3, "control character U+000A in a string"},
		{"\"abc", 0, 1, 1, "unterminated string"},
		{"\"ab\\", 0, 1, 1, "unterminated string"},
		{"\"\\x\"", 1, 1, 2, "invalid escape \\x in a string"},
		{"\"\\u12G4\"", 1, 1, 2, "\\u must be followed by 4 hex digits"},
		{"\"\\u12\"", 1, 1, 2, "\\u must be followed by 4 hex digits"},
		{"\"\\ud800\"", 1, 1, 2, "high surrogate \\ud800 is not followed by a low one"},
		{"\"\\ud800\\u0041\"", 1, 1, 2, "high surrogate \\ud800 is not followed by a low one"},
		{"\"\\udc00\"", 1, 1, 2, "lone low surrogate \\udc00"},
		{"\"\xc0\x80\"", 1, 1, 2, "invalid UTF-8 in a string (byte 0xc0)"},
		{"\"\xed\xa0\x80\"", 1, 1, 2, "invalid UTF-8 in a string (byte 0xed)"},
		{"\"\xf4\x90\x80\x80\"", 1, 1, 2, "invalid UTF-8 in a string (byte 0xf4)"},
		{"\"\xe2\x82\"", 1, 1, 2, "invalid UTF-8 in a string (byte 0xe2)"},
		{"\"\x80\"", 1, 1, 2, "invalid UTF-8 in a string (byte 0x80)"},
		{"\xef\xbb\xbf{}", 0, 1, 1, "expected a value, found byte 0xef"},
		{"01", 0, 1, 1, "invalid number 01"},
		{"-", 0, 1, 1, "invalid number -"},
		{"1.", 0, 1, 1, "invalid number 1."},
		{"[.5]", 1, 1, 2, "expected a value, found '.'"},
		{"1e", 0, 1, 1, "invalid number 1e"},
		{"1e+", 0, 1, 1, "invalid number 1e+"},
		{"+1", 0, 1, 1, "expected a value, found '+'"},
		{"--1", 0, 1, 1, "invalid number --1"},
		{"1.5.2", 0, 1, 1, "invalid number 1.5.2"},
		{"[1e999]", 1, 1, 2, "number 1e999 is out of range"},
		{"[-1e999]", 1, 1, 2, "number -1e999 is out of range"},
		{"tru", 0, 1, 1, "invalid literal tru"},
		{"[NaN]", 1, 1, 2, "invalid literal NaN"},
		{"[-Infinity]", 1, 1, 2, "invalid number -"},
		{"True", 0, 1, 1, "invalid literal True"},
		{"nulll", 0, 1, 1, "invalid literal nulll"},
		{"[1,\n  2,\n\t\"\xc3\xa9\", ]", 16, 3, 7, "expected a value, found ']'"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const struct bad_json *c = &cases[i];
		struct json_doc doc;
		struct json_error err;
		cr_assert_eq(json_parse(&doc, c->text, strlen(c->text), &err), -1, "case %zu parsed", i);
		cr_assert_null(doc.root);
		cr_assert_eq(err.offset, c->offset, "case %zu: offset %zu, not %zu (%s)", i, err.offset,
		             c->offset, err.msg);
		cr_assert_eq(err.line, c->line, "case %zu: line %u (%s)", i, err.line, err.msg);
		cr_assert_eq(err.column, c->column, "case %zu: column %u (%s)", i, err.column, err.msg);
		cr_assert(strstr(err.reason, c->reason), "case %zu: '%s' lacks '%s'", i, err.reason,
		          c->reason);
		char where[64];
		snprintf(where, sizeof where, ": line %u column %u (byte %zu)", c->line, c->column,
		         c->offset);
		cr_assert(strstr(err.msg, where), "case %zu: '%s' lacks '%s'", i, err.msg, where);
	}
}

Test(json, a_nul_byte_ends_nothing_but_is_garbage)
{
	struct json_doc doc;
	struct json_error err;
	cr_assert_eq(json_parse(&doc, "[1]\0", 4, &err), -1);
	cr_assert_eq(err.offset, 3);
	cr_assert_str_eq(err.reason, "expected the end of the document, found byte 0x00");
	cr_assert_eq(json_parse(&doc, "\"a\0b\"", 5, &err), -1);
	cr_assert_str_eq(err.reason, "control character U+0000 in a string (write it as \\u0000)");
	cr_assert_eq(json_parse(&doc, "[1]", 2, NULL), -1, "only len bytes are read; err may be NULL");
}

Test(json, limits_the_depth)
{
	char text[2 * JSON_MAX_DEPTH + 8];
	for (int deep = JSON_MAX_DEPTH; deep <= JSON_MAX_DEPTH + 1; deep++) {
		memset(text, '[', (size_t)deep);
		memset(text + deep, ']', (size_t)deep);
		struct json_doc doc;
		struct json_error err;
		int rc = json_parse(&doc, text, 2 * (size_t)deep, &err);
		if (deep == JSON_MAX_DEPTH) {
			cr_assert_eq(rc, 0, "%s", err.msg);
			json_free(&doc);
		} else {
			cr_assert_eq(rc, -1);
			cr_assert_eq(err.offset, JSON_MAX_DEPTH);
			cr_assert(strstr(err.reason, "nested deeper than 128"), "%s", err.reason);
		}
	}
}

/* ---- scenarios: the fixtures --------------------------------------------------------------- */

static tp_topology *load_fixture(const char *name, char *err, size_t errlen)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", TP_SCENARIO_DATA, name);
	return bench_scenario_topology(path, err, errlen);
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
		cr_assert_eq(tp_nodetype_gpu_switch(nt, 0), tp_nodetype_gpu_switch(nt, 1));
		cr_assert_eq(tp_nodetype_gpu_switch(nt, 2), tp_nodetype_gpu_switch(nt, 3));
		cr_assert_neq(tp_nodetype_gpu_switch(nt, 0), tp_nodetype_gpu_switch(nt, 2));
	}
	cr_assert_str_eq(tp_topology_node_model(t, node_named(t, "h1")), "H100");
	cr_assert_float_eq(tp_topology_device_perf(t, device_named(t, "h2/2")), 0.95, 1e-6);
	cr_assert_null(tp_topology_node_type(t, node_named(t, "p1")));
	tp_topology_destroy(t);
}

Test(scenario, says_when_the_file_cannot_be_read)
{
	char err[512];
	cr_assert_null(bench_scenario_topology("/nonexistent/x.json", err, sizeof err));
	cr_assert_str_eq(err, "cannot read /nonexistent/x.json: No such file or directory");
	cr_assert_null(bench_scenario_topology(TP_SCENARIO_DATA, err, sizeof err));
	cr_assert(strstr(err, "Is a directory"), "%s", err);
	/* a short buffer gets a cut, NUL-terminated message; none at all is fine */
	char tiny[8];
	cr_assert_null(bench_scenario_topology("/nonexistent/x.json", tiny, sizeof tiny));
	cr_assert_str_eq(tiny, "cannot ");
	cr_assert_null(bench_scenario_topology("/nonexistent/x.json", NULL, 0));
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

/* The document is refused with exactly this message (or, with prefix, a message that starts
 * with it). */
static void assert_refused(const char *doc_text, const char *want, bool prefix)
{
	char *doc = dq(doc_text);
	char err[512] = "x";
	tp_topology *t = bench_scenario_topology_from_text(doc, strlen(doc), TP_SCENARIO_DATA, err,
	                                                   sizeof err);
	cr_assert_null(t, "accepted: %s", doc);
	if (prefix)
		cr_assert_eq(strncmp(err, want, strlen(want)), 0, "%s\n  message: %s\n  expected: %s...",
		             doc, err, want);
	else
		cr_assert_str_eq(err, want, "%s\n  message: %s\n  expected: %s", doc, err, want);
	free(doc);
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
	static const struct bad_doc cases[] = {
		{"[]", "must be an object, not a list"},
		{"{'version': 1, 'topology': {}, 'extra': 1}",
		 "extra: unknown key (allowed: version, topology, state, request, policy, replace)"},
		{"{'versoin': 1}", "versoin: unknown key (did you mean 'version'?) (allowed: version, "
		                   "topology, state, request, policy, replace)"},
		{"{'topology': {}}", "version: required (must be 1)"},
		{"{'version': 2, 'topology': {}}", "version: must be 1, not 2"},
		{"{'version': 1.0, 'topology': {}}", "version: must be 1, not 1.0"},
		{"{'version': '1', 'topology': {}}", "version: must be 1, not \"1\""},
		{"{'version': 1}", "topology: required"},
		{"{'version': 1, 'topology': []}", "topology: must be an object, not a list"},
		{TOPO("{" RACKS ", 'level': 1}"),
		 "topology.level: unknown key (did you mean 'levels'?) (allowed: levels, fabric, nodes, "
		 "generate, failure_domains)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x', 'path': ['r'], 'gpus': 1}], 'state': {}}"),
		 "topology.state: unknown key (allowed: levels, fabric, nodes, generate, "
		 "failure_domains)"},
	};
	assert_all_refused(cases, sizeof cases / sizeof *cases);
	assert_refused("{'version': 1, 'version': 1}",
	               "not a valid JSON document: duplicate key \"version\": line 1 column 16 "
	               "(byte 15)", false);
	assert_refused("{'version': 1,\n 'topology': {'levels': ['a'],}}",
	               "not a valid JSON document: expected a string key, found '}': line 2 column "
	               "31 (byte 45)", false);
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
		 "topology.generate.counts[0]: must be a positive integer, not 1e30"},
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
		 "memory_gb, perf)"},
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
		 "model, memory_gb, perf, hwloc)"},
		{TOPO("{" RACKS ", 'nodes': [{'name': 'x1', 'path': ['r1'], 'gpus': 4},"
		      "{'name': 'x2', 'path': ['r1'], 'gpus': 4}, {'name': 'x1', 'path': ['r2'], "
		      "'gpus': 4}]}"),
		 "topology.nodes[2].name: duplicate node name \"x1\" (also topology.nodes[0])"},
		{TOPO("{" RACKS ", 'generate': {'counts': [1, 2], 'gpus_per_node': 4},"
		      "'nodes': [{'name': 'rack0-node1', 'path': ['r9'], 'gpus': 4}]}"),
		 "topology.nodes[0].name: duplicate node name \"rack0-node1\" (a generated node has it)"},
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
	char err[512];
	char *doc = dq("{'version': 1, 'state': {'anything': 1}, 'request': 7, 'policy': null,"
	               "'replace': [], 'topology': {'levels': ['node'], "
	               "'nodes': [{'name': 'solo', 'gpus': 2}]}}");
	tp_topology *t = bench_scenario_topology_from_text(doc, strlen(doc), NULL, err, sizeof err);
	cr_assert_not_null(t, "%s", err);
	cr_assert_eq(tp_topology_device_count(t), 2);
	cr_assert_str_eq(tp_topology_node_name(t, 0), "solo");
	tp_topology_destroy(t);
	free(doc);
}

/* ---- the spec's examples ------------------------------------------------------------------- */

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	char *buf = malloc(1 << 20);
	cr_assert_not_null(buf);
	*len = fread(buf, 1, (1 << 20) - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

/* The fields an example's expectation says make its topology invalid: the alternatives of its
 * message_contains that start with "topology" ("topology.nodes[2].name"), into alts; returns
 * how many (0: the topology should build). */
static size_t expected_topology_errors(const char *expect_path, char alts[][128], size_t max)
{
	size_t len, n = 0;
	char *text = slurp(expect_path, &len);
	struct json_doc doc;
	struct json_error err;
	cr_assert_eq(json_parse(&doc, text, len, &err), 0, "%s: %s", expect_path, err.msg);
	const struct json_value *status = json_get(doc.root, "status");
	const struct json_value *hard = json_get(doc.root, "hard");
	if (status && status->type == JSON_STRING && !strcmp(status->str, "invalid") && hard)
		for (const struct json_value *h = hard->first; h; h = h->next) {
			const struct json_value *mc = json_get(h, "message_contains");
			if (!mc)
				continue;
			const struct json_value *alt = mc->type == JSON_ARRAY ? mc->first : mc;
			for (; alt && n < max; alt = mc->type == JSON_ARRAY ? alt->next : NULL)
				if (alt->type == JSON_STRING && !strncmp(alt->str, "topology", 8))
					snprintf(alts[n++], 128, "%s", alt->str);
		}
	json_free(&doc);
	free(text);
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
		tp_topology *t = bench_scenario_topology(path, err, sizeof err);
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
