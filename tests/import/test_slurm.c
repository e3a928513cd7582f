/* SPDX-License-Identifier: MIT */
/* Unit tests of the Slurm topology.conf importer (tree and block plugins), on files written
 * here: the levels and domains it makes, hostlists, syntax, every error it reports. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "topoplace-slurm.h"

/* Import conf (4 GPUs a node) with the test allocator; the message goes to err. */
static int import(const char *conf, tp_topology_builder **b, char *err)
{
	return tp_topology_builder_from_slurm(b, conf, strlen(conf), 4, &tp_test_allocator, err,
	                                      256);
}

/* Import and build; the test fails with the message when either step fails. */
static tp_topology *build(const char *conf)
{
	tp_topology_builder *b = NULL;
	char err[256];
	cr_assert_eq(import(conf, &b, err), 0, "%s", err);
	cr_assert_str_empty(err);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* Every domain path of a level joined with spaces, e.g. "top/s3 top/s2". */
static const char *paths(const tp_topology *t, unsigned level)
{
	static char buf[4096];
	size_t n = 0;
	buf[0] = '\0';
	for (uint32_t d = 0; d < tp_topology_domain_count(t, level); d++) {
		if (n)
			buf[n++] = ' ';
		int k = tp_topology_domain_path(t, level, d, buf + n, sizeof buf - n);
		cr_assert(k >= 0 && (size_t)k < sizeof buf - n);
		n += (size_t)k;
	}
	return buf;
}

static void assert_levels(const tp_topology *t, const char *const *names, unsigned n)
{
	cr_assert_eq(tp_topology_level_count(t), n);
	for (unsigned l = 0; l < n; l++)
		cr_assert_str_eq(tp_topology_level_name(t, l), names[l]);
}

/* ---- tree plugin ---------------------------------------------------------------------------- */

Test(slurm, tree_levels_and_domains)
{
	tp_test_alloc_reset();
	tp_topology *t = build("# a two-tier fat tree\n"
	                       "SwitchName=s0 Nodes=gpu[001-002] LinkSpeed=100\n"
	                       "SwitchName=s1 Nodes=gpu[003-004]\n"
	                       "SwitchName=s2 Nodes=gpu[005-006]\n"
	                       "SwitchName=s3 Nodes=gpu[007-008]\n"
	                       "SwitchName=spine0 Switches=s[0-1]\n"
	                       "SwitchName=spine1 Switches=s[2-3]\n"
	                       "SwitchName=core Switches=spine[0-1]\n");
	const char *levels[] = {"switch2", "switch1", "switch0", "node"};
	assert_levels(t, levels, 4);
	cr_assert_str_eq(paths(t, 0), "core");
	cr_assert_str_eq(paths(t, 1), "core/spine0 core/spine1");
	cr_assert_str_eq(paths(t, 2), "core/spine0/s0 core/spine0/s1 core/spine1/s2 core/spine1/s3");
	cr_assert_str_eq(paths(t, 3), "gpu001 gpu002 gpu003 gpu004 gpu005 gpu006 gpu007 gpu008");
	cr_assert_eq(tp_topology_device_count(t), 32);
	uint32_t node;
	cr_assert_eq(tp_topology_node_by_name(t, "gpu006", &node), 0);
	char p[64];
	tp_topology_domain_path(t, 2, tp_topology_node_domain(t, node, 2), p, sizeof p);
	cr_assert_str_eq(p, "core/spine1/s2");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, unbalanced_tree_and_forest_are_padded)
{
	tp_test_alloc_reset();
	/* s2 hangs straight off the level-2 switch `top`; `lone` is a root at level 0. */
	tp_topology *t = build("SwitchName=s0 Nodes=a[1-2]\n"
	                       "SwitchName=s1 Nodes=b1\n"
	                       "SwitchName=s2 Nodes=c1\n"
	                       "SwitchName=mid Switches=s[0-1]\n"
	                       "SwitchName=top Switches=mid,s2\n"
	                       "SwitchName=lone Nodes=d1\n");
	const char *levels[] = {"switch2", "switch1", "switch0", "node"};
	assert_levels(t, levels, 4);
	cr_assert_str_eq(paths(t, 0), "top lone");
	cr_assert_str_eq(paths(t, 1), "top/mid top/s2 lone/lone");
	cr_assert_str_eq(paths(t, 2), "top/mid/s0 top/mid/s1 top/s2/s2 lone/lone/lone");
	cr_assert_str_eq(paths(t, 3), "a1 a2 b1 c1 d1");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, single_leaf_switch)
{
	tp_test_alloc_reset();
	tp_topology *t = build("SwitchName=only Nodes=n[1-3]");
	const char *levels[] = {"switch0", "node"};
	assert_levels(t, levels, 2);
	cr_assert_str_eq(paths(t, 0), "only");
	cr_assert_eq(tp_topology_node_count(t), 3);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, syntax_as_slurm_reads_it)
{
	tp_test_alloc_reset();
	/* Keys in any case, blanks around '=', quoted values, comments, CRLF, continuations,
	 * switches defined after use, LinkSpeed ignored. */
	tp_topology *t = build("  # header comment\r\n"
	                       "switchname = top   SWITCHES=\"leaf[1-2]\" # trailing\r\n"
	                       "\r\n"
	                       "SwitchName=leaf1 \\\n"
	                       "   Nodes=x[1-2] \\\n"
	                       "   linkspeed=400\n"
	                       "SwitchName=leaf2\tNodes=y1,y2");
	const char *levels[] = {"switch1", "switch0", "node"};
	assert_levels(t, levels, 3);
	cr_assert_str_eq(paths(t, 1), "top/leaf1 top/leaf2");
	cr_assert_str_eq(paths(t, 2), "x1 x2 y1 y2");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- hostlists ------------------------------------------------------------------------------ */

/* The node names a Nodes= hostlist expands to, joined with spaces. */
static const char *expand(const char *hostlist)
{
	char conf[512];
	snprintf(conf, sizeof conf, "SwitchName=s Nodes=%s\n", hostlist);
	tp_topology *t = build(conf);
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s", paths(t, 1));
	tp_topology_destroy(t);
	return buf;
}

Test(slurm, hostlist_expressions)
{
	tp_test_alloc_reset();
	cr_assert_str_eq(expand("gpu[001-003,007]"), "gpu001 gpu002 gpu003 gpu007");
	cr_assert_str_eq(expand("n[8-11]"), "n8 n9 n10 n11");
	cr_assert_str_eq(expand("n[08-11]"), "n08 n09 n10 n11");
	cr_assert_str_eq(expand("n[098-101]"), "n098 n099 n100 n101");
	cr_assert_str_eq(expand("r[1-2]n[01-02]"), "r1n01 r1n02 r2n01 r2n02");
	cr_assert_str_eq(expand("n[1-2]-ib"), "n1-ib n2-ib");
	cr_assert_str_eq(expand("a,b[1-2],c"), "a b1 b2 c");
	cr_assert_str_eq(expand("x[0]"), "x0");
	cr_assert_str_eq(expand("[1-2]"), "1 2");
	cr_assert_str_eq(expand("r[1,3]-g[0-1]-n[7]"), "r1-g0-n7 r1-g1-n7 r3-g0-n7 r3-g1-n7");
	cr_assert_str_eq(expand("gpu[001-018,020]"),
	                 "gpu001 gpu002 gpu003 gpu004 gpu005 gpu006 gpu007 gpu008 gpu009 gpu010 "
	                 "gpu011 gpu012 gpu013 gpu014 gpu015 gpu016 gpu017 gpu018 gpu020");
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, malformed_hostlists)
{
	static const struct {
		const char *hostlist, *fragment;
	} cases[] = {
		{"n[1-3", "'[' without ']'"},
		{"n1-3]", "']' without '['"},
		{"n[3-1]", "decreases"},
		{"n[]", "number"},
		{"n[1,]", "number"},
		{"n[a-b]", "number"},
		{"n[1-]", "after '-'"},
		{"n[1-2[3]]", "nested"},
		{"n[1x]", "unexpected character"},
		{"n[1234567890123456789]", "number"},
		{"n[1]m[1]o[1]p[1]q[1]r[1]s[1]t[1]u[1]", "more than 8"},
		{"bad/name", "contains '/'"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char conf[256], err[256];
		snprintf(conf, sizeof conf, "# comment\nSwitchName=s Nodes=%s\n", cases[i].hostlist);
		tp_topology_builder *b = (tp_topology_builder *)1;
		int rc = import(conf, &b, err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, cases[i].fragment);
		cr_assert(strstr(err, "line 2"), "'%s': %s", cases[i].hostlist, err);
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
	tp_test_alloc_reset();
	tp_topology_builder *b = NULL;
	char err[256];
	TP_ASSERT_ERR(import("SwitchName=s Nodes=n[0-9999999]\n", &b, err), TP_ELIMIT, err,
	              "more than");
	TP_ASSERT_ERR(import("SwitchName=s Nodes=n[0-2047]m[0-2047]x[0-1]\n", &b, err), TP_ELIMIT,
	              err, "more than");
	char longname[300];
	memset(longname, 'a', 260);
	snprintf(longname + 260, sizeof longname - 260, "[1-2]");
	char conf[400];
	snprintf(conf, sizeof conf, "SwitchName=s Nodes=%s\n", longname);
	TP_ASSERT_ERR(import(conf, &b, err), TP_EPARSE, err, "longer than 255");
	TP_ASSERT_NO_LEAKS();
}

/* ---- tree errors ---------------------------------------------------------------------------- */

Test(slurm, tree_errors_name_the_line_and_problem)
{
	static const struct {
		const char *conf, *fragment;
	} cases[] = {
		{"SwitchName=a Nodes=n1\nSwitchName=b Switches=a,z\n",
		 "line 2: switch 'b' lists unknown switch 'z'"},
		{"SwitchName=l Nodes=n1\nSwitchName=a Switches=b\nSwitchName=b Switches=a\n",
		 "switches form a cycle"},
		{"SwitchName=a Switches=a\n", "line 1: switch 'a' lists itself"},
		{"SwitchName=a Nodes=n1\n\nSwitchName=a Nodes=n2\n",
		 "line 3: switch 'a' is defined twice (first at line 1)"},
		{"---\n- topology: t\n", "looks like a topology.yaml (YAML)"},
		{"SwitchName=a\n", "no SwitchName or BlockName line with nodes"},
		{"SwitchName=a Nodes=n1 Color=red\n", "line 1: unknown key 'Color'"},
		{"SwitchName=a Nodes=n1 Nodes=n2\n", "line 1: Nodes given twice"},
		{"NodeName=n1\n", "line 1: unknown key 'NodeName'"},
		{"Include /etc/slurm/topo2.conf\n", "line 1: expected Key=Value"},
		{"Include=topo2.conf\n", "line 1: Include is not supported"},
		{"SwitchName=a Nodes=\n", "line 1: Nodes has an empty value"},
		{"SwitchName=a Nodes=\"n1\n", "unclosed"},
		{"SwitchName=a/b Nodes=n1\n", "line 1: switch 'a/b' contains '/'"},
		{"SwitchName=a Nodes=n1\nBlockName=b1 Nodes=n2\n",
		 "line 2: BlockName line in a tree (SwitchName) topology (line 1)"},
		{"", "no SwitchName, BlockName or RingName line"},
		{"# only a comment\n\n   \n", "no SwitchName, BlockName or RingName line"},
		{"SwitchName=a Nodes=n1\n\0SwitchName=b Nodes=n2\n", "line 2: a NUL byte"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char err[256];
		tp_topology_builder *b = (tp_topology_builder *)1;
		size_t len = strlen(cases[i].conf);
		if (strstr(cases[i].fragment, "NUL"))
			len += 1 + strlen(cases[i].conf + len + 1);
		int rc = tp_topology_builder_from_slurm(&b, cases[i].conf, len, 4, &tp_test_allocator,
		                                        err, sizeof err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(slurm, tree_too_deep_is_a_limit)
{
	tp_test_alloc_reset();
	/* A chain of 8 switch levels: with the node level, 9 > TP_MAX_LEVELS. */
	char conf[1024];
	size_t n = (size_t)snprintf(conf, sizeof conf, "SwitchName=s0 Nodes=n1\n");
	for (int i = 1; i < 8; i++)
		n += (size_t)snprintf(conf + n, sizeof conf - n, "SwitchName=s%d Switches=s%d\n", i,
		                      i - 1);
	tp_topology_builder *b = NULL;
	char err[256];
	TP_ASSERT_ERR(import(conf, &b, err), TP_ELIMIT, err, "8 levels");
	cr_assert_null(b);
	/* Seven switch levels fit. */
	char *last = strstr(conf, "SwitchName=s7");
	*last = '\0';
	cr_assert_eq(import(conf, &b, err), 0, "%s", err);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

/* ---- block plugin --------------------------------------------------------------------------- */

Test(slurm, block_levels_follow_block_sizes)
{
	tp_test_alloc_reset();
	/* Base blocks of 4 nodes aggregate by 2 and by 4. Slurm leaves b5 out of both aggregate
	 * levels (no larger block holds it), so it stands for itself there. */
	tp_topology *t = build("BlockName=b1 Nodes=n[01-04]\n"
	                       "BlockName=b2 Nodes=n[05-08]\n"
	                       "BlockName=b3 Nodes=n[09-12]\n"
	                       "BlockName=b4 Nodes=n[13-16]\n"
	                       "BlockName=b5 Nodes=n[17-20]\n"
	                       "BlockSizes=4,8,16\n");
	const char *levels[] = {"agg16", "agg8", "block", "node"};
	assert_levels(t, levels, 4);
	cr_assert_str_eq(paths(t, 0), "b[1-4] b5");
	cr_assert_str_eq(paths(t, 1), "b[1-4]/b[1-2] b[1-4]/b[3-4] b5/b5");
	cr_assert_str_eq(paths(t, 2), "b[1-4]/b[1-2]/b1 b[1-4]/b[1-2]/b2 b[1-4]/b[3-4]/b3 "
	                              "b[1-4]/b[3-4]/b4 b5/b5/b5");
	cr_assert_eq(tp_topology_node_count(t), 20);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, block_default_sizes_and_partial_aggregate)
{
	tp_test_alloc_reset();
	/* No BlockSizes: the base size is the first block's 2 nodes and the sizes double until
	 * one holds all 3 blocks (1, 2, 4 blocks). The 4-block level holds the 3 there are. */
	tp_topology *t = build("BlockName=b1 Nodes=n[1-2]\n"
	                       "BlockName=b2 Nodes=n[3-4]\n"
	                       "BlockName=b3 Nodes=n[5-6]\n");
	const char *levels[] = {"agg8", "agg4", "block", "node"};
	assert_levels(t, levels, 4);
	cr_assert_str_eq(paths(t, 0), "b[1-3]");
	cr_assert_str_eq(paths(t, 1), "b[1-3]/b[1-2] b[1-3]/b3");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, block_nvl72_racks)
{
	tp_test_alloc_reset();
	/* NVL72 racks of 18 nodes with a planning base block of 16 (as NVIDIA advises). */
	tp_topology *t = build("BlockName=rack01 Nodes=r01n[01-18]\n"
	                       "BlockName=rack02 Nodes=r02n[01-18]\n"
	                       "BlockName=rack03 Nodes=r03n[01-18]\n"
	                       "BlockName=rack04 Nodes=r04n[01-18]\n"
	                       "BlockSizes=16,32,64\n");
	const char *levels[] = {"agg64", "agg32", "block", "node"};
	assert_levels(t, levels, 4);
	cr_assert_str_eq(paths(t, 0), "rack[01-04]");
	cr_assert_str_eq(paths(t, 1), "rack[01-04]/rack[01-02] rack[01-04]/rack[03-04]");
	cr_assert_eq(tp_topology_node_count(t), 72);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, block_names_that_do_not_range)
{
	tp_test_alloc_reset();
	tp_topology *t = build("BlockName=east Nodes=e[1-2]\n"
	                       "BlockName=west Nodes=w[1-2]\n"
	                       "BlockName=b9 Nodes=x[1-2]\n"
	                       "BlockName=b10 Nodes=y[1-2]\n"
	                       "BlockSizes=2,4,8\n");
	cr_assert_str_eq(paths(t, 0), "east,west,b[9-10]");
	cr_assert_str_eq(paths(t, 1), "east,west,b[9-10]/east,west east,west,b[9-10]/b[9-10]");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, block_errors)
{
	static const struct {
		const char *conf, *fragment;
	} cases[] = {
		{"BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=n[4-7]\n",
		 "line 2: node 'n4' is in two blocks: 'b1' (line 1) and 'b2'"},
		{"AllowGaps=no\nBlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=m[1-3]\n",
		 "line 3: block 'b2' has 3 nodes, fewer than the base block size 4 (AllowGaps=no, "
		 "line 1)"},
		{"BlockName=b1 Nodes=n[1-4]\nAllowGaps=no\nBlockName=b2\n",
		 "line 3: block 'b2' has 0 nodes, fewer than the base block size 4"},
		{"AllowGaps=maybe\nBlockName=b1 Nodes=n1\n", "line 1: AllowGaps 'maybe' is not yes or no"},
		{"AllowGaps=yes\nAllowGaps=no\nBlockName=b1 Nodes=n1\n",
		 "line 2: AllowGaps given twice (first at line 1)"},
		{"BlockLevels=0-16\nBlockName=b1 Nodes=n1\n",
		 "line 1: BlockLevels '0-16' is not a list of levels 0 to 15"},
		{"BlockLevels=0-2\nBlockSizes=4\nBlockName=b1 Nodes=n1\n",
		 "line 2: BlockSizes given with BlockLevels (line 1)"},
		{"BlockName=b1\nBlockName=b2\n", "line 1: no block has nodes"},
		/* topograph writes such files (its placeholder blocks, before nodes join) */
		{"BlockName=b1\nBlockName=b2\nBlockSizes=2,4\n",
		 "line 1: no block has nodes (Slurm accepts that for nodes added later"},
		{"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,12\n", "line 2: BlockSizes value 12"},
		{"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,6\n", "line 2: BlockSizes value 6"},
		{"BlockName=b1 Nodes=n[1-4]\nBlockName=b2 Nodes=m[1-4]\nBlockSizes=4,16,8\n",
		 "must increase"},
		{"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,0\n", "not a list of positive numbers"},
		{"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4,x\n", "not a list of positive numbers"},
		{"BlockName=b1 Nodes=n[1-4]\nBlockSizes=4\nBlockSizes=4\n",
		 "line 3: BlockSizes given twice (first at line 2)"},
		{"BlockSizes=4 Nodes=n1\n", "BlockSizes takes no other key"},
		{"BlockSizes=4\n", "BlockSizes without any BlockName"},
		{"BlockName=b1 Switches=s1\n", "line 1: unknown key 'Switches' on a BlockName line"},
		{"BlockName=b1 Nodes=n1\nBlockName=b1 Nodes=n2\n", "block 'b1' is defined twice"},
		{"BlockName=b1 Nodes=n1\nSwitchName=s Nodes=n2\n",
		 "line 2: SwitchName line in a block (BlockName) topology (line 1)"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char err[256];
		tp_topology_builder *b = (tp_topology_builder *)1;
		TP_ASSERT_ERR(import(cases[i].conf, &b, err), TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
}

/* ---- API ------------------------------------------------------------------------------------ */

Test(slurm, builder_can_be_extended_and_built)
{
	tp_test_alloc_reset();
	tp_topology_builder *b = NULL;
	char err[256];
	cr_assert_eq(import("SwitchName=leaf Nodes=n[1-2]\nSwitchName=top Switches=leaf\n", &b,
	                    err),
	             0, "%s", err);
	cr_assert_eq(tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50.0, 5.0), 0);
	const char *path[] = {"top", "leaf"};
	cr_assert_eq(tp_topology_builder_add_node(b, "n3", path, 4, NULL), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	cr_assert_eq(tp_topology_node_count(t), 3);
	double gbps = 0;
	cr_assert_eq(tp_topology_fabric(t, 0, NULL, &gbps, NULL), 0);
	cr_assert_float_eq(gbps, 50.0, 1e-9);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, bad_arguments)
{
	tp_test_alloc_reset();
	tp_topology_builder *b = NULL;
	char err[256];
	const char *conf = "SwitchName=s Nodes=n1\n";
	TP_ASSERT_ERR(tp_topology_builder_from_slurm(NULL, conf, strlen(conf), 4, NULL, err,
	                                             sizeof err),
	              TP_EINVAL, err, "out");
	TP_ASSERT_ERR(tp_topology_builder_from_slurm(&b, NULL, 3, 4, NULL, err, sizeof err),
	              TP_EINVAL, err, "conf");
	TP_ASSERT_ERR(tp_topology_builder_from_slurm(&b, conf, strlen(conf), 0, NULL, err,
	                                             sizeof err),
	              TP_EINVAL, err, "gpus_per_node 0");
	TP_ASSERT_ERR(tp_topology_builder_from_slurm(&b, conf, strlen(conf), 257, NULL, err,
	                                             sizeof err),
	              TP_EINVAL, err, "gpus_per_node 257");
	tp_allocator broken = tp_test_allocator;
	broken.free = NULL;
	TP_ASSERT_ERR(tp_topology_builder_from_slurm(&b, conf, strlen(conf), 4, &broken, err,
	                                             sizeof err),
	              TP_EINVAL, err, "alloc");
	/* A buffer that is not NUL-terminated is read to len only. */
	cr_assert_eq(tp_topology_builder_from_slurm(&b, "SwitchName=s Nodes=n1garbage", 21, 4,
	                                            &tp_test_allocator, NULL, 0),
	             0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	cr_assert_str_eq(tp_topology_node_name(t, 0), "n1");
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	/* A small message buffer gets a cut, terminated message. */
	char small[6];
	b = (tp_topology_builder *)1;
	cr_assert_eq(tp_topology_builder_from_slurm(&b, "Bogus=1", 7, 4, &tp_test_allocator, small,
	                                            sizeof small),
	             TP_EPARSE);
	cr_assert_str_eq(small, "line ");
	cr_assert_null(b);
	TP_ASSERT_NO_LEAKS();
}

/* Fail every allocation in turn: TP_ENOMEM, no builder, nothing leaked, until it succeeds. */
static void allocation_failure_loop(const char *conf, uint32_t nodes)
{
	tp_test_alloc_reset();
	for (long n = 0;; n++) {
		tp_topology_builder *b = (tp_topology_builder *)1;
		char err[256];
		tp_test_alloc_fail_at(n);
		int rc = import(conf, &b, err);
		if (tp_test_alloc_state.failed == 0) {
			cr_assert_eq(rc, 0, "%s", err);
			tp_test_alloc_fail_at(-1);
			tp_topology *t = NULL;
			cr_assert_eq(tp_topology_build(b, &t), 0);
			cr_assert_eq(tp_topology_node_count(t), nodes);
			tp_topology_destroy(t);
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

Test(slurm, allocation_failures_tree)
{
	allocation_failure_loop("SwitchName=s0 Nodes=a[01-40]\n"
	                        "SwitchName=s1 Nodes=b[1-3],c\n"
	                        "SwitchName=s2 Nodes=d1\n"
	                        "SwitchName=mid Switches=s[0-1]\n"
	                        "SwitchName=top \\\n Switches=mid,s2\n",
	                        45);
}

/* ---- ring plugin ---------------------------------------------------------------------------- */

/* topology.conf(5)'s example: rings of 8 nodes in listed order, wrapping arcs placed on them. */
Test(slurm, rings_import_as_wrapping_grids)
{
	tp_test_alloc_reset();
	tp_topology *t = build("RingName=ring0 Nodes=node[01-08]\n"
	                       "RingName=ring1 Nodes=node[13-16],node[09-12]\n");
	static const char *const L[] = {"ring", "node"};
	assert_levels(t, L, 2);
	cr_assert_str_eq(paths(t, 0), "ring0 ring1");
	unsigned dims[3], nd, wrap;
	cr_assert_eq(tp_topology_grid(t, 0, dims, &nd, &wrap), 0);
	cr_assert(nd == 1 && dims[0] == 8 && wrap == 1);
	uint32_t node = TP_NONE;
	unsigned x[3];
	cr_assert_eq(tp_topology_node_by_name(t, "node14", &node), 0);
	cr_assert_eq(tp_topology_domain_coords(t, 1, node, x), 0);
	cr_assert_eq(x[0], 1, "node14 is second in ring1: %u", x[0]);
	/* node02..node06 taken: the arc node07 node08 node01 across ring0's seam fills its free
	 * space exactly, so it wins over ring1 (which it would leave in one piece) */
	tp_cluster *c = tp_test_cluster(t);
	uint32_t held[20];
	for (uint32_t i = 0; i < 20; i++)
		held[i] = 4 + i;
	cr_assert_eq(tp_cluster_assign(c, "j", held, 20, NULL), 0);
	tp_request r = TP_REQUEST_INIT;
	r.box_level = "ring";
	r.box[0] = 3;
	r.box_wrap = 1;
	r.count = 12;
	tp_placement *pl = NULL;
	cr_assert_eq(tp_place(c, &r, &pl), 0, "%s", tp_placement_errmsg(pl));
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(pl, &n);
	cr_assert_str_eq(tp_topology_node_name(t, tp_topology_device_node(t, d[0])), "node07");
	cr_assert_str_eq(tp_topology_node_name(t, tp_topology_device_node(t, d[4])), "node08");
	cr_assert_str_eq(tp_topology_node_name(t, tp_topology_device_node(t, d[8])), "node01");
	tp_placement_destroy(pl);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, ring_errors)
{
	static const struct {
		const char *conf, *fragment;
	} cases[] = {
		{"RingName=r0 Nodes=n[1-4]\nRingName=r1 Nodes=n[4-7]\n",
		 "line 2: node 'n4' is in two rings: 'r0' (line 1) and 'r1'"},
		{"RingName=r0 Nodes=n[1-4]\nRingName=r1 Nodes=m[1-3]\n",
		 "line 2: ring 'r1' has 3 nodes, ring 'r0' 4"},
		{"RingName=r0 Nodes=n[01-17]\n", "ring 'r0' has 17 nodes, more than Slurm's 16"},
		{"RingName=r0\n", "line 1: ring 'r0' has no Nodes"},
		{"RingName=r0 Nodes=n1 Switches=s1\n", "line 1: unknown key 'Switches' on a RingName line"},
		{"RingName=r0 Nodes=n1\nRingName=r0 Nodes=n2\n",
		 "line 2: ring 'r0' is defined twice (first at line 1)"},
		{"RingName=r0 Nodes=n1\nSwitchName=s Nodes=n2\n",
		 "line 2: SwitchName line in a ring (RingName) topology (line 1)"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		tp_topology_builder *b = NULL;
		char err[256];
		TP_ASSERT_ERR(import(cases[i].conf, &b, err), TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(slurm, allocation_failures_ring)
{
	allocation_failure_loop("RingName=ring0 Nodes=node[01-08]\n"
	                        "RingName=ring1 Nodes=node[09-16]\n",
	                        16);
}

Test(slurm, allocation_failures_block)
{
	allocation_failure_loop("BlockName=b1 Nodes=n[01-04]\n"
	                        "BlockName=b2 Nodes=n[05-08]\n"
	                        "BlockName=b3 Nodes=n[09-12]\n"
	                        "BlockSizes=4,8,16\n",
	                        12);
}

/* #19 item 9: 144 bytes naming 2^22 nodes; with 256 GPUs a node that was 2^30 devices (9 GB,
 * 28 s). The default budget (2^24 devices) stops it while reading, at the first node past it,
 * with a message naming the line, the figure and the option. */
static const char amplifier[] = "SwitchName=s0 Nodes=b0[0-1048575]\n"
                                "SwitchName=s1 Nodes=b1[0-1048575]\n"
                                "SwitchName=s2 Nodes=b2[0-1048575]\n"
                                "SwitchName=s3 Nodes=b3[0-1048575]\n";

Test(slurm, device_budget_stops_an_amplifying_file)
{
	tp_test_alloc_reset();
	cr_assert(strlen(amplifier) <= 144, "a file of a few bytes");
	tp_topology_builder *b = (tp_topology_builder *)&b;
	char err[256];
	TP_ASSERT_ERR(tp_topology_builder_from_slurm(&b, amplifier, strlen(amplifier), 256,
	                                             &tp_test_allocator, err, sizeof err),
	              TP_ELIMIT, err,
	              "65537 nodes of 256 GPUs are 16777472 devices, more than the budget "
	              "tp_slurm_options.max_devices 16777216");
	cr_assert_null(b);
	cr_assert(strstr(err, "line 1:"), "%s", err);
	TP_ASSERT_NO_LEAKS();
}

/* The caller's budgets: lower ones stop sooner, a node budget too; the builder keeps them. */
Test(slurm, caller_budgets_are_honoured_and_kept)
{
	tp_test_alloc_reset();
	const char *conf = "SwitchName=s0 Nodes=n[0-7]\n";
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	tp_topology_builder *b = NULL;
	char err[256];
	o.max_devices = 16; /* 4 nodes of 4 */
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4,
	                                                 &tp_test_allocator, &o, err, sizeof err),
	              TP_ELIMIT, err, "line 1: 5 nodes of 4 GPUs are 20 devices");
	o.max_devices = 0;
	o.max_nodes = 7;
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4,
	                                                 &tp_test_allocator, &o, err, sizeof err),
	              TP_ELIMIT, err, "more than 7 nodes, the budget tp_slurm_options.max_nodes");
	o.max_nodes = 8;
	o.max_devices = 33;
	cr_assert_eq(tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4,
	                                                &tp_test_allocator, &o, err, sizeof err),
	             0, "%s", err);
	const char *path[] = {"s0"};
	TP_ASSERT_ERR(tp_topology_builder_add_node(b, "extra", path, 4, NULL), TP_ELIMIT,
	              tp_topology_builder_errmsg(b), "more than max_nodes 8");
	tp_topology_builder_destroy(b);
	o.version = 3;
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4,
	                                                 &tp_test_allocator, &o, err, sizeof err),
	              TP_EINVAL, err, "opts.version 3 is not 1 to 2");
	o.version = 1;
	o.max_devices = 1u << 31;
	TP_ASSERT_ERR(tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4,
	                                                 &tp_test_allocator, &o, err, sizeof err),
	              TP_EINVAL, err, "opts.max_devices 2147483648 or opts.max_nodes 8 is above");
	TP_ASSERT_NO_LEAKS();
}

/* ---- Slurm 25.x leniencies: accepted, and warned about where Slurm warns ------------------- */

/* Import conf with a warnings buffer; build; the warnings go to warn. */
static tp_topology *build_warned(const char *conf, char *warn, size_t warnlen)
{
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	o.warnbuf = warn;
	o.warnlen = warnlen;
	tp_topology_builder *b = NULL;
	char err[256];
	int rc = tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4, &tp_test_allocator,
	                                            &o, err, sizeof err);
	cr_assert_eq(rc, 0, "%s", err);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

Test(slurm, tree_leniencies_warn_and_import)
{
	static const struct {
		const char *conf, *warning, *leaves;
	} cases[] = {
		/* example 2 of Slurm's topology guide: every spine lists every leaf */
		{"SwitchName=l0 Nodes=n[1-2]\nSwitchName=l1 Nodes=n[3-4]\n"
		 "SwitchName=sp0 Switches=l[0-1]\nSwitchName=sp1 Switches=l[0-1]\n",
		 "line 4: switch 'l0' has several parents: 'sp0' (line 3) and 'sp1'; kept below 'sp0'\n"
		 "line 4: switch 'l1' has several parents: 'sp0' (line 3) and 'sp1'; kept below 'sp0'\n",
		 "sp0/l0 sp0/l1"},
		{"SwitchName=a Nodes=n[1-2]\nSwitchName=b Nodes=n2,n3\n",
		 "line 2: node 'n2' is on two leaf switches: 'a' (line 1) and 'b'; kept on 'a'\n",
		 "a b"},
		{"SwitchName=a Nodes=n1,n2,n1\n", "line 1: node 'n1' is listed twice in 'a'; counted "
		 "once\n", "a"},
		{"SwitchName=a Nodes=n1\nSwitchName=e\nSwitchName=t Switches=a,e\n",
		 "line 2: switch 'e' has no Nodes or Switches (an empty leaf switch)\n", "t/a"},
		{"SwitchName=a Nodes=n1\nSwitchName=t Switches=a Nodes=n2\n",
		 "line 2: switch 't' has both Nodes and Switches; the nodes below none of its "
		 "switches stand below it at every lower level\n", "t/t t/a"},
		/* what scontrol show topology prints (Slurm 22.05, a real run): a switch's Nodes
		 * are the union of its subtree, and Level= is given */
		{"SwitchName=leaf0 Level=0 LinkSpeed=1 Nodes=gpu[001-004]\n"
		 "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu[005-008]\n"
		 "SwitchName=spine Level=1 LinkSpeed=1 Nodes=gpu[001-008] Switches=leaf[0-1]\n", "",
		 "spine/leaf0 spine/leaf1"},
		{"SwitchName=a Nodes=n1\nSwitchName=t Switches=a,a\n",
		 "line 2: switch 't' lists switch 'a' twice; counted once\n", "t/a"},
		{"SwitchName=a Nodes=n1,,n2,\n", "", "a"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		tp_test_alloc_reset();
		char warn[512];
		tp_topology *t = build_warned(cases[i].conf, warn, sizeof warn);
		cr_assert_str_eq(warn, cases[i].warning, "case %zu", i);
		unsigned leaf = tp_topology_level_count(t) - 2;
		cr_assert_str_eq(paths(t, leaf), cases[i].leaves, "case %zu", i);
		tp_topology_destroy(t);
		TP_ASSERT_NO_LEAKS();
	}
	/* the node on two leaves stays on the first; the mixed switch's node is below it */
	tp_test_alloc_reset();
	char warn[512];
	tp_topology *t = build_warned(cases[4].conf, warn, sizeof warn);
	cr_assert_eq(tp_topology_node_count(t), 2);
	uint32_t n2;
	cr_assert_eq(tp_topology_node_by_name(t, "n2", &n2), 0);
	char p[64];
	tp_topology_domain_path(t, 0, tp_topology_node_domain(t, n2, 0), p, sizeof p);
	cr_assert_str_eq(p, "t");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(slurm, warnings_are_cut_to_the_buffer)
{
	char warn[40];
	memset(warn, 'x', sizeof warn);
	tp_topology *t = build_warned("SwitchName=a Nodes=n1,n1,n1\n", warn, sizeof warn);
	cr_assert_eq(strlen(warn), sizeof warn - 1);
	cr_assert(!strncmp(warn, "line 1: node 'n1' is listed twice", 33), "%s", warn);
	tp_topology_destroy(t);
	/* a version-1 caller gets no warnings and the same tree */
	tp_slurm_options o1 = {1, 0, 0, NULL, 0, NULL};
	tp_topology_builder *b = NULL;
	char err[256];
	const char *conf = "SwitchName=a Nodes=n1,n1\n";
	cr_assert_eq(tp_topology_builder_from_slurm_ext(&b, conf, strlen(conf), 4, NULL, &o1, err,
	                                                sizeof err), 0, "%s", err);
	tp_topology_builder_destroy(b);
}

Test(slurm, block_gaps_and_block_levels)
{
	tp_test_alloc_reset();
	char warn[256];
	/* topograph pads NVLink domains: an empty block and a short one (AllowGaps is the
	 * default since Slurm 25.05) */
	tp_topology *t = build_warned("BlockName=b1 Nodes=n[01-04]\nBlockName=b2\n"
	                              "BlockName=b3 Nodes=n[09-10]\nBlockName=b4 Nodes=n[13-16]\n"
	                              "BlockSizes=4,16\n", warn, sizeof warn);
	cr_assert_str_empty(warn);
	const char *levels[] = {"agg16", "block", "node"};
	assert_levels(t, levels, 3);
	cr_assert_str_eq(paths(t, 0), "b[1-4]");
	cr_assert_str_eq(paths(t, 1), "b[1-4]/b1 b[1-4]/b3 b[1-4]/b4");
	cr_assert_eq(tp_topology_node_count(t), 10);
	tp_topology_destroy(t);
	/* BlockLevels=0-1 (Slurm 23.11): base block and pairs */
	t = build_warned("AllowGaps=yes\nBlockLevels=0-1\nBlockName=b1 Nodes=n[1-2]\n"
	                 "BlockName=b2 Nodes=n[3-4]\nBlockName=b3 Nodes=n[5-6]\n"
	                 "BlockName=b4 Nodes=n[7-8]\n", warn, sizeof warn);
	const char *levels2[] = {"agg4", "block", "node"};
	assert_levels(t, levels2, 3);
	cr_assert_str_eq(paths(t, 0), "b[1-2] b[3-4]");
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The shapes NVIDIA topograph writes (written here after its tests/ci/expected.*.conf): dotted
 * switch names with bracketed suffixes, a comment line per record, and NVLink domains padded
 * into blocks smaller than the base block or empty, which Slurm 25.05 accepts. */
Test(slurm, topograph_shaped_outputs)
{
	tp_test_alloc_reset();
	char warn[256];
	tp_topology *t = build_warned("# switch.3.1=core\nSwitchName=switch.3.1 Switches=switch.2.[1-2]\n"
	                              "# switch.2.1=spine-1\nSwitchName=switch.2.1 Switches=switch.1.[1-2]\n"
	                              "SwitchName=switch.2.2 Switches=switch.1.[3-4]\n"
	                              "SwitchName=switch.1.1 Nodes=srv[1101-1102]\n"
	                              "SwitchName=switch.1.2 Nodes=srv[1201-1202]\n"
	                              "SwitchName=switch.1.3 Nodes=srv[2101-2102]\n"
	                              "SwitchName=switch.1.4 Nodes=srv[2201-2202]\n", warn, sizeof warn);
	cr_assert_str_empty(warn);
	cr_assert_str_eq(paths(t, 1), "switch.3.1/switch.2.1 switch.3.1/switch.2.2");
	cr_assert_eq(tp_topology_node_count(t), 8);
	tp_topology_destroy(t);
	t = build_warned("# rack11=nvl-1-1\nBlockName=rack11 Nodes=srv[1101-1108]\n"
	                 "BlockName=rack12 Nodes=srv[1201-1208]\n"
	                 "# rack21=nvl-2-1 (padded: 4 of 8 nodes)\nBlockName=rack21 Nodes=srv[2101-2104]\n"
	                 "BlockName=rack22\nBlockSizes=8,16,32\n", warn, sizeof warn);
	cr_assert_str_empty(warn);
	const char *levels[] = {"agg32", "agg16", "block", "node"};
	assert_levels(t, levels, 4);
	cr_assert_str_eq(paths(t, 1), "rack[11-12,21-22]/rack[11-12] rack[11-12,21-22]/rack[21-22]");
	cr_assert_eq(tp_topology_node_count(t), 20);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
