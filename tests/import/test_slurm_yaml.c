/* SPDX-License-Identifier: MIT */
/* Unit tests of the Slurm topology.yaml importer: the files of tests/data/slurm and inline
 * documents; the same levels as the topology.conf that says the same; the topology chosen;
 * every error naming the YAML line and the topology; warnings on YAML lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-slurm.h"

static char *slurp(const char *name, size_t *len)
{
	char path[512];
	snprintf(path, sizeof path, "%s/slurm/%s", TP_DATA_DIR, name);
	FILE *f = fopen(path, "rb");
	cr_assert_not_null(f, "cannot open %s", path);
	static char buf[65536];
	*len = fread(buf, 1, sizeof buf - 1, f);
	buf[*len] = '\0';
	fclose(f);
	return buf;
}

/* Import YAML text (topology `name`, or the default when NULL) and build it. */
static tp_topology *yaml_build(const char *text, size_t len, const char *name, char *warn,
                               size_t warnlen)
{
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	o.topology = name;
	o.warnbuf = warn;
	o.warnlen = warnlen;
	tp_topology_builder *b = NULL;
	char err[512];
	int rc = tp_topology_builder_from_slurm_yaml(&b, text, len, 4, &tp_test_allocator, &o, err,
	                                             sizeof err);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_str_empty(err);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

static tp_topology *conf_build(const char *conf)
{
	tp_topology_builder *b = NULL;
	char err[512];
	cr_assert_eq(tp_topology_builder_from_slurm(&b, conf, strlen(conf), 4, &tp_test_allocator,
	                                            err, sizeof err), 0, "%s", err);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* Every level, "name: path path ..." one per line. */
static const char *describe(const tp_topology *t)
{
	static char buf[8192];
	size_t n = 0;
	for (unsigned l = 0; l < tp_topology_level_count(t); l++) {
		n += (size_t)snprintf(buf + n, sizeof buf - n, "%s:", tp_topology_level_name(t, l));
		for (uint32_t d = 0; d < tp_topology_domain_count(t, l); d++) {
			buf[n++] = ' ';
			int k = tp_topology_domain_path(t, l, d, buf + n, sizeof buf - n);
			cr_assert(k >= 0 && (size_t)k < sizeof buf - n);
			n += (size_t)k;
		}
		buf[n++] = '\n';
		buf[n] = '\0';
	}
	return buf;
}

static void assert_same(const tp_topology *a, const tp_topology *b)
{
	char da[8192];
	snprintf(da, sizeof da, "%s", describe(a));
	cr_assert_str_eq(da, describe(b));
	cr_assert_eq(tp_topology_device_count(a), tp_topology_device_count(b));
}

Test(slurm_yaml, several_topologies_default_and_by_name)
{
	tp_test_alloc_reset();
	size_t len;
	const char *text = slurp("topology-three.yaml", &len);
	char warn[256];
	/* the cluster_default one */
	tp_topology *t = yaml_build(text, len, NULL, warn, sizeof warn);
	cr_assert_str_eq(describe(t), "switch0: top\nnode: gx01 gx02 gx03 gx04\n");
	cr_assert_str_empty(warn);
	tp_topology_destroy(t);
	/* by name: the block topology is the topology.conf with the same lines */
	t = yaml_build(text, len, "racks", warn, sizeof warn);
	tp_topology *c = conf_build("BlockName=r1 Nodes=gx[01-04]\nBlockName=r2 Nodes=gx[05-08]\n"
	                            "BlockName=r3 Nodes=gx[09-12]\nBlockName=r4 Nodes=gx[13-16]\n"
	                            "BlockSizes=4,16\n");
	assert_same(t, c);
	cr_assert(strstr(describe(t), "agg16: r[1-4]\nblock: r[1-4]/r1"), "%s", describe(t));
	tp_topology_destroy(t);
	tp_topology_destroy(c);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm_yaml, tree_with_children_and_node_lists_matches_conf)
{
	tp_test_alloc_reset();
	size_t len;
	const char *text = slurp("topology-fattree.yaml", &len);
	char warn[256];
	tp_topology *t = yaml_build(text, len, NULL, warn, sizeof warn);
	tp_topology *c = conf_build("SwitchName=spine Switches=leaf[0-1]\n"
	                            "SwitchName=leaf0 Nodes=gpu[001-004]\n"
	                            "SwitchName=leaf1 Nodes=gpu[005-007],gpu008\n");
	assert_same(t, c);
	tp_topology_destroy(c);
	tp_topology_destroy(t);
	/* the block entry with an empty block (a gap) */
	t = yaml_build(text, len, "nvl", warn, sizeof warn);
	cr_assert_str_eq(describe(t), "agg4: nvl[0-1] nvl[2-3]\nblock: nvl[0-1]/nvl0 nvl[0-1]/nvl1 "
	                 "nvl[2-3]/nvl2\nnode: gpu001 gpu002 gpu003 gpu004 gpu005 gpu006\n");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm_yaml, warnings_name_yaml_lines)
{
	tp_test_alloc_reset();
	const char *text = "- topology: t\n"
	                   "  tree:\n"
	                   "    switches:\n"
	                   "      - switch: l0\n"
	                   "        nodes: n[1-2]\n"
	                   "      - switch: sp0\n"
	                   "        children: l0\n"
	                   "      - switch: sp1\n"
	                   "        children: l0\n";
	char warn[256];
	tp_topology *t = yaml_build(text, strlen(text), NULL, warn, sizeof warn);
	cr_assert_str_eq(warn, "line 8: switch 'l0' has several parents: 'sp0' (line 6) and 'sp1'; "
	                       "kept below 'sp0'\n");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm_yaml, errors_name_the_line_and_topology)
{
	static const struct {
		const char *yaml, *fragment;
	} cases[] = {
		{"- topology: a\n  tree: [\n", "line 3, column 1: not valid YAML: did not find expected node content"},
		{"", "the YAML document is empty"},
		{"topology: a\ntree: {}\n", "line 1: a topology.yaml is a list of topologies ('- "
		 "topology: NAME'), not a mapping"},
		{"- tree: {}\n  topology: a\n", "line 1: a topology of the list is a mapping without "
		 "'topology: NAME' as its first key"},
		{"- topology: a\n  cluster_default: maybe\n  flat: true\n",
		 "line 2: topology 'a': cluster_default is 'maybe', not true or false"},
		{"- topology: a\n  flat: true\n", "line 2: topology 'a' is flat (topology/flat)"},
		{"- topology: a\n  ring:\n    rings: []\n", "line 2: topology 'a' is a ring topology "
		 "(Slurm's topology/ring), recognised but not yet supported"},
		{"- topology: a\n  torus3d: {}\n", "topology 'a' is a torus3d topology"},
		{"- topology: a\n  tre: {}\n", "line 2: topology 'a': unknown key 'tre'"},
		{"- topology: a\n", "line 1: topology 'a' has no tree or block"},
		{"- topology: a\n  tree: {}\n  block: {}\n", "line 3: topology 'a' defines more than "
		 "one of tree and block"},
		{"- topology: a\n  tree: {}\n", "line 2: topology 'a': tree needs a list 'switches'"},
		{"- topology: a\n  tree:\n    switches:\n    - nodes: n1\n",
		 "line 4: topology 'a': a switch entry without a switch name"},
		{"- topology: a\n  tree:\n    switches:\n    - switch: s\n      node: n1\n",
		 "line 5: topology 'a': unknown key 'node' in a switch (expected switch, children, "
		 "nodes)"},
		{"- topology: a\n  tree:\n    switches:\n    - switch: s\n      nodes: {x: 1}\n",
		 "line 5: topology 'a': nodes is a mapping"},
		{"- topology: a\n  tree:\n    switches:\n    - switch: s\n      nodes: 'n\"1'\n",
		 "holds a quote"},
		{"- topology: a\n  block:\n    block_sizes: [4, x]\n    blocks: []\n",
		 "line 3: topology 'a': block_sizes holds 'x'"},
		/* errors of the topology.conf rules, on the YAML's lines */
		{"- topology: a\n  tree:\n    switches:\n    - switch: s\n      nodes: n1\n"
		 "    - switch: top\n      children: s,z\n",
		 "topology 'a': line 6: switch 'top' lists unknown switch 'z'"},
		{"- topology: a\n  tree:\n    switches:\n    - switch: s\n      nodes: n1\n"
		 "    - switch: s\n      nodes: n2\n",
		 "topology 'a': line 6: switch 's' is defined twice (first at line 4)"},
		{"- topology: a\n  block:\n    block_sizes: [4, 12]\n    blocks:\n"
		 "    - block: b\n      nodes: n[1-4]\n",
		 "topology 'a': line 3: BlockSizes value 12 is not the base block size 4"},
		{"- topology: a\n  flat: true\n- topology: b\n  tree: {switches: []}\n",
		 "line 2: topology 'a' is flat"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char err[512];
		tp_topology_builder *b = (tp_topology_builder *)1;
		int rc = tp_topology_builder_from_slurm_yaml(&b, cases[i].yaml, strlen(cases[i].yaml),
		                                             4, &tp_test_allocator, NULL, err,
		                                             sizeof err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
	/* a name that is not in the file */
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	o.topology = "nope";
	char err[512];
	tp_topology_builder *b = NULL;
	const char *y = "- topology: a\n  flat: true\n";
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_yaml(&b, y, strlen(y), 4, NULL, &o, err,
	                                                  sizeof err),
	              TP_EPARSE, err, "no topology named 'nope' in the file");
}

Test(slurm_yaml, bad_arguments)
{
	char err[256];
	tp_topology_builder *b = NULL;
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_yaml(NULL, "x", 1, 4, NULL, NULL, err,
	                                                  sizeof err), TP_EINVAL, err, "out is NULL");
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_yaml(&b, NULL, 1, 4, NULL, NULL, err,
	                                                  sizeof err), TP_EINVAL, err, "yaml is NULL");
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_yaml(&b, "x", 1, 0, NULL, NULL, err,
	                                                  sizeof err),
	              TP_EINVAL, err, "gpus_per_node 0 is not in 1..256");
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	o.version = 9;
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_yaml(&b, "x", 1, 4, NULL, &o, err, sizeof err),
	              TP_EINVAL, err, "opts.version 9 is not 1 to 2");
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_yaml(&b, "- a\n\0", 5, 4, NULL, NULL, err,
	                                                  sizeof err),
	              TP_EPARSE, err, "a NUL byte in the YAML text");
	cr_assert_null(b);
}

Test(slurm_yaml, allocation_failures)
{
	size_t len;
	const char *text = slurp("topology-fattree.yaml", &len);
	tp_test_alloc_reset();
	for (long n = 0;; n++) {
		tp_topology_builder *b = (tp_topology_builder *)1;
		char err[256];
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_builder_from_slurm_yaml(&b, text, len, 4, &tp_test_allocator, NULL,
		                                             err, sizeof err);
		if (tp_test_alloc_state.failed == 0) {
			cr_assert_eq(rc, 0, "%s", err);
			tp_test_alloc_fail_at(-1);
			tp_topology_builder_destroy(b);
			cr_assert_gt(n, 5, "too few allocations to test");
			break;
		}
		TP_ASSERT_ERR(rc, TP_ENOMEM, err, "out of memory");
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
	TP_ASSERT_NO_LEAKS();
}
