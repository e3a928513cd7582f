/* SPDX-License-Identifier: MIT */
/*
 * The bad-input catalog (docs/errors.md): the rows no module suite checked, each asserting its
 * code, a distinctive fragment of its message, and that the failed call left its object as it
 * was (a builder builds the same topology, a node type answers the same queries, a cluster keeps
 * its fingerprint and generation). tests/check_errors_doc.py keeps the catalog and these tests
 * in step.
 */
#include <math.h>
#include <stdio.h>

#include "cluster_impl.h"
#include "testutil.h"
#include "topoplace-hwloc.h"
#include "topoplace-slurm.h"

static void setup(void)
{
	tp_test_alloc_reset();
}
TestSuite(errors, .init = setup);

/* ---- digests of objects that have no fingerprint ------------------------------------------- */

static uint64_t mix(uint64_t h, uint64_t v)
{
	return (h ^ v) * 0x100000001b3ULL;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	if (!s)
		return mix(h, 0xff);
	for (; *s; s++)
		h = mix(h, (unsigned char)*s);
	return mix(h, 0);
}

static uint64_t mix_double(uint64_t h, double d)
{
	uint64_t v;
	memcpy(&v, &d, sizeof v);
	return mix(h, v);
}

/* Everything a topology answers: levels, fabrics, domains and their NVSwitches, nodes and
 * their attributes, failure domains. */
static uint64_t topology_digest(const tp_topology *t)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	unsigned nl = tp_topology_level_count(t);
	for (int l = TP_LEVEL_CLUSTER; l < (int)nl; l++) {
		tp_link_kind kind;
		double gbps, lat;
		cr_assert_eq(tp_topology_fabric(t, l, &kind, &gbps, &lat), 0);
		h = mix_double(mix_double(mix(h, kind), gbps), lat);
	}
	for (unsigned l = 0; l < nl; l++) {
		h = mix_str(h, tp_topology_level_name(t, l));
		for (uint32_t d = 0; d < tp_topology_domain_count(t, l); d++) {
			char path[512];
			cr_assert(tp_topology_domain_path(t, l, d, path, sizeof path) >= 0);
			h = mix(mix_str(h, path), tp_topology_domain_nvswitch_count(t, l, d));
		}
	}
	for (uint32_t n = 0; n < tp_topology_node_count(t); n++) {
		h = mix_str(mix_str(h, tp_topology_node_name(t, n)), tp_topology_node_model(t, n));
		h = mix_double(h, tp_topology_node_memory_gb(t, n));
	}
	for (uint32_t d = 0; d < tp_topology_device_count(t); d++)
		h = mix_double(mix(h, tp_topology_device_node(t, d)), tp_topology_device_perf(t, d));
	for (unsigned k = 0; k < tp_topology_fd_kind_count(t); k++) {
		h = mix_str(h, tp_topology_fd_kind_name(t, k));
		for (uint32_t f = 0; f < tp_topology_fd_count(t, k); f++)
			h = mix_str(h, tp_topology_fd_name(t, k, f));
		for (uint32_t d = 0; d < tp_topology_device_count(t); d++)
			h = mix(h, tp_topology_device_fd(t, k, d));
	}
	return h;
}

/* What the builder would build now (building leaves the builder as it is). */
static uint64_t builder_digest(tp_topology_builder *b)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	uint64_t h = topology_digest(t);
	tp_topology_destroy(t);
	return h;
}

/* Everything a node type answers. */
static uint64_t nodetype_digest(const tp_nodetype *nt)
{
	unsigned g = tp_nodetype_gpu_count(nt), ns = tp_nodetype_pcie_switch_count(nt);
	uint64_t h = mix(mix(0xcbf29ce484222325ULL, g), ns);
	for (unsigned s = 0; s < ns; s++)
		h = mix(h, (uint64_t)tp_test_switch_parent(nt, s));
	for (unsigned a = 0; a < g; a++) {
		h = mix(h, (uint64_t)tp_test_gpu_switch(nt, a));
		for (unsigned b = 0; b < g; b++)
			h = mix_double(h, tp_nodetype_nvlink_gbps(nt, a, b));
	}
	for (unsigned i = 0; i < tp_nodetype_nic_count(nt); i++)
		h = mix(mix_str(h, tp_nodetype_nic_name(nt, i)), (uint64_t)tp_test_nic_switch(nt, i));
	return mix(h, tp_nodetype_nvswitch_count(nt));
}

/* A failed builder call: its code, its message, and the builder as it was. */
#define BUILDER_FAILS(b, call, code, fragment)                                                 \
	do {                                                                                       \
		uint64_t bf__before = builder_digest(b);                                               \
		TP_ASSERT_ERR((call), (code), tp_topology_builder_errmsg(b), (fragment));              \
		cr_assert_eq(builder_digest(b), bf__before, "the failed call changed the builder");    \
	} while (0)

#define NODETYPE_FAILS(nt, call, code, fragment)                                               \
	do {                                                                                       \
		uint64_t nf__before = nodetype_digest(nt);                                             \
		TP_ASSERT_ERR((call), (code), tp_nodetype_errmsg(nt), (fragment));                     \
		cr_assert_eq(nodetype_digest(nt), nf__before, "the failed call changed the node type"); \
	} while (0)

/* A failed cluster call: its code, its message, and the state and generation as they were. */
#define CLUSTER_FAILS(c, call, code, fragment)                                                 \
	do {                                                                                       \
		uint64_t cf__fp = tp_cluster_fingerprint(c), cf__gen = (c)->generation;                \
		size_t cf__jobs = tp_cluster_job_count(c);                                             \
		TP_ASSERT_ERR((call), (code), tp_cluster_errmsg(c), (fragment));                       \
		cr_assert_eq(tp_cluster_fingerprint(c), cf__fp, "the failed call changed the state");  \
		cr_assert_eq((c)->generation, cf__gen, "the failed call bumped the generation");       \
		cr_assert_eq(tp_cluster_job_count(c), cf__jobs);                                       \
		char cf__chk[256];                                                                     \
		cr_assert_eq(tp_cluster_check((c), cf__chk, sizeof cf__chk), 0, "%s", cf__chk);        \
	} while (0)

/* ---- fixtures ------------------------------------------------------------------------------ */

static const char *const L3[] = {"block", "rack", "node"};

static tp_topology_builder *new_builder(void)
{
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, L3, 3, &tp_test_allocator), 0);
	return b;
}

static void add(tp_topology_builder *b, const char *name, const char *block, const char *rack)
{
	const char *path[] = {block, rack};
	cr_assert_eq(tp_topology_builder_add_node(b, name, path, 4, NULL), 0, "%s",
	             tp_topology_builder_errmsg(b));
}

/* x0 in b0/r0, x1 in b0/r1, x2 in b1/r0, 4 GPUs each: three racks of 4, 12 devices. */
static tp_topology_builder *small_builder(void)
{
	tp_topology_builder *b = new_builder();
	add(b, "x0", "b0", "r0");
	add(b, "x1", "b0", "r1");
	add(b, "x2", "b1", "r0");
	return b;
}

static tp_topology *small(void)
{
	tp_topology_builder *b = small_builder();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* Give job id the devices first .. first + n - 1 of node `node` (e.g. "x1"). */
static void hold(tp_cluster *c, const char *id, const char *node, unsigned first, unsigned n,
                 const tp_job_options *o)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t devs[TP_MAX_NODE_DEVICES];
	for (unsigned i = 0; i < n; i++) {
		char name[64];
		snprintf(name, sizeof name, "%s/%u", node, first + i);
		devs[i] = tp_test_dev(t, name);
	}
	cr_assert_eq(tp_cluster_assign(c, id, devs, n, o), 0, "%s", tp_cluster_errmsg(c));
}

/* tp_place on a request that must fail: the code, the message, no devices, the cluster as it
 * was (tp_place only reads it). */
static void place_fails(const tp_cluster *c, const tp_request *r, int code, const char *fragment)
{
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	int rc = tp_place(c, r, &p);
	cr_assert_not_null(p, "no result object");
	TP_ASSERT_ERR(rc, code, tp_placement_errmsg(p), fragment);
	cr_assert_eq(tp_placement_status(p), rc);
	size_t n = 1;
	cr_assert_null(tp_placement_devices(p, &n));
	cr_assert_eq(n, 0);
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "tp_place changed the cluster");
}

/* ---- topology builder ------------------------------------------------------------------------ */

Test(errors, set_fabric)
{
	tp_topology_builder *b = small_builder();
	BUILDER_FAILS(b, tp_topology_builder_set_fabric(b, 7, TP_LINK_IB, 50, 1), TP_EINVAL,
	              "fabric level 7 does not exist (3 levels)");
	BUILDER_FAILS(b, tp_topology_builder_set_fabric(b, 1, (tp_link_kind)9, 50, 1), TP_EINVAL,
	              "fabric kind 9 is not a tp_link_kind");
	BUILDER_FAILS(b, tp_topology_builder_set_fabric(b, 1, TP_LINK_IB, 0, 1), TP_EINVAL,
	              "fabric gbps 0 is not a number > 0");
	BUILDER_FAILS(b, tp_topology_builder_set_fabric(b, 1, TP_LINK_IB, NAN, 1), TP_EINVAL,
	              "is not a number > 0");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, add_node)
{
	tp_topology_builder *b = small_builder();
	const char *path[] = {"b0", "r0"};
	BUILDER_FAILS(b, tp_topology_builder_add_node(b, "x/1", path, 4, NULL), TP_EINVAL,
	              "node name 'x/1' contains '/'");
	BUILDER_FAILS(b, tp_topology_builder_add_node(b, "x9", path, 0, NULL), TP_EINVAL,
	              "node x9: gpus 0 is not in 1..256");
	BUILDER_FAILS(b, tp_topology_builder_add_node(b, "x9", path, 257, NULL), TP_EINVAL,
	              "node x9: gpus 257 is not in 1..256");
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.version = 9;
	BUILDER_FAILS(b, tp_topology_builder_add_node(b, "x9", path, 4, &o), TP_EINVAL,
	              "node x9: options version 9 is not supported");
	o = (tp_node_options)TP_NODE_OPTIONS_INIT;
	o.model = "";
	BUILDER_FAILS(b, tp_topology_builder_add_node(b, "x9", path, 4, &o), TP_EINVAL,
	              "node x9: model is empty");
	o = (tp_node_options)TP_NODE_OPTIONS_INIT;
	o.perf = 0;
	BUILDER_FAILS(b, tp_topology_builder_add_node(b, "x9", path, 4, &o), TP_EINVAL,
	              "node x9: perf 0 is not a number > 0");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, generate_counts_null)
{
	tp_topology_builder *b = small_builder();
	BUILDER_FAILS(b, tp_topology_builder_generate(b, NULL, 4, NULL), TP_EINVAL,
	              "generate: counts is NULL");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, failure_domain_names)
{
	tp_topology_builder *b = small_builder();
	BUILDER_FAILS(b, tp_topology_builder_add_failure_domain(b, "cluster", "p", "x0", -1),
	              TP_EINVAL, "failure-domain kind may not be 'cluster'");
	BUILDER_FAILS(b, tp_topology_builder_add_failure_domain(b, "", "p", "x0", -1), TP_EINVAL,
	              "failure-domain kind is empty");
	BUILDER_FAILS(b, tp_topology_builder_add_failure_domain(b, "power", "", "x0", -1),
	              TP_EINVAL, "failure domain name (kind power) is empty");
	BUILDER_FAILS(b, tp_topology_builder_add_failure_domain(b, "power", "p", NULL, -1),
	              TP_EINVAL, "failure domain p: node is NULL");
	BUILDER_FAILS(b, tp_topology_builder_add_failure_domain(b, "power", "p", "nosuch", -1),
	              TP_ENOTFOUND, "failure domain power/p: unknown node nosuch");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, nvswitch)
{
	tp_topology_builder *b = small_builder();
	const char *rack[] = {"b0", "r1"};
	const char *emptyname[] = {"b0", ""};
	const char *nosuch[] = {"b7", "r0"};
	cr_assert_eq(tp_topology_builder_add_nvswitch(b, 1, rack, "t"), 0);
	const char *slash[] = {"b/0", "r1"};
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, NULL, "t"), TP_EINVAL,
	              "NVSwitch t: path is NULL (2 names needed)");
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, emptyname, "t"), TP_EINVAL,
	              "NVSwitch t: path[1] (rack) is empty");
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, slash, "t"), TP_EINVAL,
	              "NVSwitch t: path[0] (block) contains '/'");
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, rack, ""), TP_EINVAL,
	              "NVSwitch name is empty");
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, NULL, NULL), TP_EINVAL,
	              "NVSwitch name is NULL");
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, nosuch, "t"), TP_ENOTFOUND,
	              "NVSwitch t: no rack b7/r0 (add its nodes first)");
	BUILDER_FAILS(b, tp_topology_builder_add_nvswitch(b, 1, rack, "t"), TP_EEXIST,
	              "NVSwitch t is added twice to that rack");
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, build_without_nodes)
{
	tp_topology_builder *b = new_builder();
	tp_topology *t = (tp_topology *)1;
	TP_ASSERT_ERR(tp_topology_build(b, &t), TP_EINVAL, tp_topology_builder_errmsg(b),
	              "the topology has no node");
	cr_assert_null(t);
	/* still a usable, empty builder */
	add(b, "x0", "b0", "r0");
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	cr_assert_eq(tp_topology_node_count(t), 1);
	tp_topology_destroy(t);
	tp_topology_builder_destroy(b);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, generators)
{
	tp_topology *t = (tp_topology *)1;
	cr_assert_eq(tp_topology_generate_hgx(&t, 0, 4, &tp_test_allocator), TP_EINVAL);
	cr_assert_null(t);
	t = (tp_topology *)1;
	cr_assert_eq(tp_topology_generate_hgx(&t, 2, 0, &tp_test_allocator), TP_EINVAL);
	cr_assert_null(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- node types ------------------------------------------------------------------------------ */

Test(errors, nodetype)
{
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	NODETYPE_FAILS(nt, tp_nodetype_set_gpu_switch(nt, 9, 0), TP_EINVAL,
	               "GPU 9 does not exist (4 GPUs)");
	NODETYPE_FAILS(nt, tp_nodetype_set_gpu_switch(nt, 0, 5), TP_EINVAL,
	               "switch 5 does not exist (0 switches)");
	NODETYPE_FAILS(nt, tp_nodetype_add_nic(nt, "", -1, 50, NULL), TP_EINVAL,
	               "NIC name is empty");
	NODETYPE_FAILS(nt, tp_nodetype_add_nic(nt, "mlx5_0", 4, 50, NULL), TP_EINVAL,
	               "NIC mlx5_0: switch 4 does not exist");
	unsigned id = 77;
	NODETYPE_FAILS(nt, tp_nodetype_add_nvswitch(nt, "", &id), TP_EINVAL,
	               "NVSwitch name is empty");
	cr_assert_eq(id, 77, "a failed call wrote its output");
	NODETYPE_FAILS(nt, tp_nodetype_set_nvlink(nt, 1, 1, 100), TP_EINVAL,
	               "NVLink 1-1: a GPU cannot link to itself");
	NODETYPE_FAILS(nt, tp_nodetype_set_nvlink(nt, 0, 1, -1), TP_EINVAL,
	               "NVLink 0-1: bandwidth -1 is not >= 0");
	tp_nodetype_destroy(nt);
	TP_ASSERT_NO_LEAKS();
}

/* ---- importers ------------------------------------------------------------------------------- */

static int from_xml(const char *xml, size_t len, tp_nodetype **nt, char *err, size_t errlen)
{
	*nt = (tp_nodetype *)1;
	return tp_nodetype_from_hwloc_xml(nt, xml, len, &tp_test_allocator, err, errlen);
}

Test(errors, hwloc_xml)
{
	char err[256];
	tp_nodetype *nt;
	TP_ASSERT_ERR(from_xml(NULL, 10, &nt, err, sizeof err), TP_EINVAL, err, "xml is NULL");
	cr_assert_null(nt);
	TP_ASSERT_ERR(from_xml("<x/>", 0, &nt, err, sizeof err), TP_EPARSE, err,
	              "the XML buffer is empty");
	cr_assert_null(nt);
	/* The reason after "refused:" depends on which check sees the buffer first; the size and
	 * the refusal are what every such message says. */
	TP_ASSERT_ERR(from_xml("garbage", 7, &nt, err, sizeof err), TP_EPARSE, err,
	              "the XML buffer (7 bytes) is refused: ");
	cr_assert_null(nt);
	/* 32 bytes with the NUL, which the screen drops (NULs at the end are ignored) */
	static const char cut[] = "<?xml version=\"1.0\"?><topology ";
	TP_ASSERT_ERR(from_xml(cut, sizeof cut, &nt, err, sizeof err), TP_EPARSE, err,
	              "the XML buffer (31 bytes) is refused: ");
	cr_assert_null(nt);
	TP_ASSERT_NO_LEAKS();
}

/* Each Slurm case fails with EPARSE, names its line and problem, and makes no builder. */
Test(errors, slurm_tree)
{
	static const struct {
		const char *conf, *fragment;
	} cases[] = {
		{"SwitchName=s1 Nodes=n1 Speed=10\n", "line 1: unknown key 'Speed' on a SwitchName line"},
		{"SwitchName=s1 Nodes=n[1-\n", "line 1: malformed hostlist 'n[1-': '[' without ']'"},
		{"BlockName=b1 Nodes=n1\nBlockName=b2 Nodes=n1\n",
		 "line 2: node 'n1' is in two blocks: 'b1' (line 1) and 'b2'"},
		{"SwitchName=top Switches=s9\n", "line 1: switch 'top' lists unknown switch 's9'"},
		{"SwitchName=s1 Nodes=n1\nSwitchName=s1 Nodes=n2\n",
		 "line 2: switch 's1' is defined twice (first at line 1)"},
		{"RingName=r0 Nodes=n[01-17]\n",
		 "line 1: ring 'r0' has 17 nodes, more than Slurm's 16 a ring (topology.conf(5))"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		char err[256];
		tp_topology_builder *b = (tp_topology_builder *)1;
		int rc = tp_topology_builder_from_slurm(&b, cases[i].conf, strlen(cases[i].conf), 4,
		                                        &tp_test_allocator, err, sizeof err);
		TP_ASSERT_ERR(rc, TP_EPARSE, err, cases[i].fragment);
		cr_assert_null(b);
		TP_ASSERT_NO_LEAKS();
	}
}

/* ---- cluster state ----------------------------------------------------------------------------- */

Test(errors, assign)
{
	tp_topology *t = small();
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "x0", 0, 2, NULL);
	uint32_t two[] = {tp_test_dev(t, "x1/0"), tp_test_dev(t, "x1/1")};
	CLUSTER_FAILS(c, tp_cluster_assign(c, "a", two, 0, NULL), TP_EINVAL,
	              "job 'a': n is 0 (a job holds a device)");
	uint32_t taken[] = {tp_test_dev(t, "x1/0"), tp_test_dev(t, "x0/1")};
	CLUSTER_FAILS(c, tp_cluster_assign(c, "b", taken, 2, NULL), TP_EEXIST,
	              "devices[1] x0/1 is held by job 'a'");
	uint32_t dup[] = {tp_test_dev(t, "x1/0"), tp_test_dev(t, "x1/2"), tp_test_dev(t, "x1/0")};
	CLUSTER_FAILS(c, tp_cluster_assign(c, "b", dup, 3, NULL), TP_EINVAL,
	              "devices[2] x1/0 is listed twice (first at [0])");
	CLUSTER_FAILS(c, tp_cluster_assign(c, "a", two, 2, NULL), TP_EEXIST,
	              "job 'a' is already running");
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.required = "nosuch";
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	CLUSTER_FAILS(c, tp_cluster_assign(c, "b", two, 2, &o), TP_EINVAL,
	              "shape.required 'nosuch' is not a level of the topology");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, release_and_health)
{
	tp_topology *t = small();
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "x0", 0, 2, NULL);
	CLUSTER_FAILS(c, tp_cluster_release(c, "nosuch"), TP_ENOTFOUND,
	              "job 'nosuch' is not running");
	CLUSTER_FAILS(c, tp_cluster_release(c, NULL), TP_EINVAL, "job id is NULL");
	uint32_t bad[] = {tp_test_dev(t, "x1/0"), 99};
	CLUSTER_FAILS(c, tp_cluster_set_down(c, bad, 2, 1), TP_EINVAL,
	              "devices[1] 99 is out of range (the topology has 12 devices)");
	CLUSTER_FAILS(c, tp_cluster_set_cordoned(c, NULL, 2, 1), TP_EINVAL,
	              "devices is NULL but n is 2");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- tp_place ---------------------------------------------------------------------------------- */

Test(errors, place_request_fields)
{
	tp_topology_builder *b = small_builder();
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "p", "x0", -1), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "x0", 0, 2, NULL);

	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.id = "";
	place_fails(c, &r, TP_EINVAL, "request.id: is empty");
	r.id = NULL;
	r.tenant = "t\x01";
	place_fails(c, &r, TP_EINVAL, "request.tenant: contains a control character");
	r.tenant = NULL;
	r.required = "nosuch";
	place_fails(c, &r, TP_ENOTFOUND, "request.required: unknown level 'nosuch'");
	r.required = NULL;
	r.group_level = "nosuch";
	place_fails(c, &r, TP_ENOTFOUND, "request.group.level: unknown level 'nosuch'");
	r.group_level = NULL;
	r.required = "rack";
	r.preferred = "block";
	place_fails(c, &r, TP_EINVAL, "request.preferred block is not below request.required rack");
	r.required = r.preferred = NULL;

	tp_domain_cap nolevel[] = {{NULL, 2, 0}};
	r.ncaps = 1;
	place_fails(c, &r, TP_EINVAL, "request.max_per_domain is NULL but request.ncaps is 1");
	r.caps = nolevel;
	place_fails(c, &r, TP_EINVAL, "request.max_per_domain[0].level is required");
	r.caps = NULL;
	r.ncaps = 0;

	r.colocate_level = "rack";
	place_fails(c, &r, TP_EINVAL, "request.colocate.job is required with request.colocate.level");
	r.colocate_job = "nosuch";
	place_fails(c, &r, TP_ENOTFOUND, "request.colocate.job: no running job 'nosuch'");
	r.colocate_job = r.colocate_level = NULL;
	r.exclusive = "nosuch";
	place_fails(c, &r, TP_ENOTFOUND, "request.exclusive: unknown level 'nosuch'");
	r.exclusive = NULL;

	const char *null_node[] = {NULL};
	const char *unknown_node[] = {"nosuch"};
	r.nselect_nodes = 1;
	place_fails(c, &r, TP_EINVAL, "request.select.nodes is NULL but request.nselect_nodes is 1");
	r.select_nodes = null_node;
	place_fails(c, &r, TP_EINVAL, "request.select.nodes[0] is NULL");
	r.select_nodes = unknown_node;
	place_fails(c, &r, TP_ENOTFOUND, "request.select.nodes[0]: unknown node 'nosuch'");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, place_outcomes)
{
	tp_topology *t = small();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.required = "rack";
	r.count = UINT32_MAX;
	place_fails(c, &r, TP_EINFEASIBLE,
	            "infeasible: the request's 4294967295 devices cannot be placed even with every "
	            "other job gone (healthy, uncordoned, matching devices; one rack could take at "
	            "most 4 of them)");
	r.count = 9;
	place_fails(c, &r, TP_EINFEASIBLE,
	            "the request's 9 devices cannot be placed even with every other job gone");

	/* busy: 8 free, 9 wanted anywhere */
	hold(c, "a", "x0", 0, 4, NULL);
	r.required = NULL;
	place_fails(c, &r, TP_EBUSY, "busy: 8 matching devices are free, the request needs 9");
	cr_assert_eq(tp_cluster_release(c, "a"), 0);

	/* fragmented: 9 free (1 + 3 + ... spread), no rack with 4 */
	hold(c, "a", "x0", 0, 1, NULL);
	hold(c, "b", "x1", 0, 1, NULL);
	hold(c, "d", "x2", 0, 1, NULL);
	r.required = "rack";
	r.count = 4;
	place_fails(c, &r, TP_EFRAGMENTED,
	            "fragmented: 9 devices are free but the best rack (b1/r0) can take 3 of the 4 "
	            "the request needs in one rack");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- tp_commit and tp_replace ------------------------------------------------------------------ */

Test(errors, commit_after_a_change)
{
	tp_topology *t = small();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	hold(c, "a", "x2", 0, 1, NULL);
	CLUSTER_FAILS(c, tp_commit(c, p, NULL), TP_EINVAL,
	              "tp_commit: the cluster changed since the placement was made (generation ");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

static void replace_fails(const tp_cluster *c, const char *job, const uint32_t *failed, size_t n,
                          int code, const char *fragment)
{
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	int rc = tp_replace(c, job, failed, n, &p);
	cr_assert_not_null(p, "no result object");
	TP_ASSERT_ERR(rc, code, tp_placement_errmsg(p), fragment);
	cr_assert_eq(tp_placement_status(p), rc);
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "tp_replace changed the cluster");
}

Test(errors, replace)
{
	tp_topology *t = small();
	tp_cluster *c = tp_test_cluster(t);
	hold(c, "a", "x0", 0, 2, NULL);
	uint32_t one[] = {tp_test_dev(t, "x0/0")};
	replace_fails(c, "nosuch", one, 1, TP_ENOTFOUND, "replace.job: no running job 'nosuch'");
	uint32_t out[] = {99};
	replace_fails(c, "a", out, 1, TP_EINVAL, "replace.failed[0]: no device 99");
	uint32_t other[] = {tp_test_dev(t, "x1/3")};
	replace_fails(c, "a", other, 1, TP_EINVAL,
	              "replace.failed[0]: device x1/3 is not held by job 'a'");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- defragmentation --------------------------------------------------------------------------- */

/* Every rack half full: a holds x1/0-1 (b0/r1), m holds x0/0-1, k holds x2/0-1; all
 * migratable and preemptible unless said otherwise. */
static tp_cluster *half_full(const tp_topology *t, int migratable)
{
	tp_cluster *c = tp_test_cluster(t);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = migratable;
	hold(c, "m", "x0", 0, 2, &o);
	hold(c, "a", "x1", 0, 2, &o);
	hold(c, "k", "x2", 0, 2, &o);
	return c;
}

static tp_request rack_of_4(void)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = "new";
	r.priority = 1;
	r.count = 4;
	r.required = "rack";
	return r;
}

/* A failed plan: the code and message, on the plan when there is one (NULL arguments leave
 * none) and always on the cluster; no step. */
static void check_failed_plan(const tp_cluster *c, tp_plan *p, int rc, int code,
                              const char *fragment)
{
	TP_ASSERT_ERR(rc, code, tp_cluster_errmsg(c), fragment);
	if (p) {
		TP_ASSERT_ERR(tp_plan_status(p), code, tp_plan_errmsg(p), fragment);
		cr_assert_eq(tp_plan_step_count(p), 0);
		tp_plan_destroy(p);
	}
}

/* A failed plan: the code, the message on the plan, no step, and the cluster as it was. */
static void plan_fails(tp_cluster *c, const tp_request *r, const tp_defrag_policy *pol,
                       int code, const char *fragment)
{
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;
	tp_plan *p = NULL;
	int rc = tp_defrag_plan(c, r, pol, &p);
	check_failed_plan(c, p, rc, code, fragment);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "a failed plan changed the cluster");
	cr_assert_eq(c->generation, gen);
}

static void compact_fails(tp_cluster *c, const char *level, uint32_t n,
                          const tp_defrag_policy *pol, int code, const char *fragment)
{
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;
	tp_plan *p = NULL;
	int rc = tp_defrag_compact(c, level, n, pol, &p);
	check_failed_plan(c, p, rc, code, fragment);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "a failed plan changed the cluster");
	cr_assert_eq(c->generation, gen);
}

Test(errors, defrag_plan)
{
	tp_topology *t = small();
	tp_cluster *c = half_full(t, 1);
	tp_request r = rack_of_4();
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;

	plan_fails(c, NULL, &pol, TP_EINVAL, "request is NULL");
	r.count = 0;
	plan_fails(c, &r, &pol, TP_EINVAL, "request.count must be at least 1");
	r = rack_of_4();
	r.nslices = 1;
	plan_fails(c, &r, &pol, TP_EINVAL, "request.slices is NULL but request.nslices is 1");
	r = rack_of_4();
	r.count = 9;
	plan_fails(c, &r, &pol, TP_EINFEASIBLE,
	           "infeasible: the request's 9 devices cannot be placed even with every other job "
	           "gone");
	r = rack_of_4();

	pol.migrate = 0;
	pol.preempt = 0;
	plan_fails(c, &r, &pol, TP_ENOPLAN,
	           "rack b0/r0 would need job m (migration is off; preemption is off) moved");
	pol = (tp_defrag_policy)TP_DEFRAG_POLICY_INIT;
	pol.max_moves = 0;
	plan_fails(c, &r, &pol, TP_ENOPLAN, "the cheapest plan needs 1 moves, max_moves is 0");
	pol = (tp_defrag_policy)TP_DEFRAG_POLICY_INIT;
	pol.max_cost_s = 1;
	plan_fails(c, &r, &pol, TP_ENOPLAN, "the cheapest plan costs 120 s, over max_cost_s 1");
	tp_cluster_destroy(c);

	/* not migratable, and preemption needs a gap the request's priority does not give */
	c = half_full(t, 0);
	pol = (tp_defrag_policy)TP_DEFRAG_POLICY_INIT;
	r.priority = 0;
	plan_fails(c, &r, &pol, TP_ENOPLAN,
	           "rack b0/r0 would need job m (not migratable; priority 0 not 1 below 0) moved");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, defrag_compact)
{
	tp_topology *t = small();
	tp_cluster *c = half_full(t, 1);
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	compact_fails(c, NULL, 1, &pol, TP_EINVAL, "level is NULL");
	compact_fails(c, "rack", 0, &pol, TP_EINVAL, "ndomains 0: at least one domain to free");
	compact_fails(c, "nosuch", 1, &pol, TP_ENOTFOUND,
	              "level 'nosuch' is not a level of the topology");
	compact_fails(c, "rack", 9, &pol, TP_EINVAL,
	              "ndomains 9 is not between 1 and the 3 domains of level rack");
	pol.migrate = 0;
	pol.preempt = 0;
	compact_fails(c, "rack", 1, &pol, TP_ENOPLAN,
	              "only 0 of 1 rack domains can be freed: rack b0/r0 would need job m "
	              "(migration is off; preemption is off) moved");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(errors, apply_step)
{
	tp_topology *t = small();
	tp_cluster *c = half_full(t, 1);
	tp_request r = rack_of_4();
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	pol.preempt = 0;
	tp_plan *p = NULL;
	cr_assert_eq(tp_defrag_plan(c, &r, &pol, &p), 0, "%s", tp_plan_errmsg(p));
	cr_assert_eq(tp_plan_step_count(p), 2);
	tp_step_action act;
	const char *moved = NULL;
	cr_assert_eq(tp_plan_step(p, 0, &act, &moved, NULL, NULL, NULL, NULL), 0);
	cr_assert_eq(act, TP_STEP_MIGRATE);
	char name[TP_MAX_NAME + 1];
	snprintf(name, sizeof name, "%s", moved);

	/* the moved job is gone */
	uint32_t devs[TP_MAX_NODE_DEVICES];
	const uint32_t *held;
	size_t nheld;
	cr_assert_eq(tp_cluster_job_devices(c, name, &held, &nheld), 0);
	memcpy(devs, held, nheld * sizeof *devs);
	cr_assert_eq(tp_cluster_release(c, name), 0);
	char want[TP_MAX_NAME + 64];
	snprintf(want, sizeof want, "step 0: job %s is no longer running", name);
	CLUSTER_FAILS(c, tp_plan_apply_step(c, p, 0, NULL), TP_EINVAL, want);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	cr_assert_eq(tp_cluster_assign(c, name, devs, nheld, &o), 0, "%s", tp_cluster_errmsg(c));

	/* the place step's id is taken meanwhile */
	cr_assert_eq(tp_plan_apply_step(c, p, 0, NULL), 0, "%s", tp_cluster_errmsg(c));
	const uint32_t *to;
	size_t nto;
	cr_assert_eq(tp_plan_step(p, 1, &act, NULL, NULL, NULL, &to, &nto), 0);
	cr_assert_eq(act, TP_STEP_PLACE);
	uint32_t elsewhere = TP_NONE;
	for (uint32_t d = 0; d < tp_topology_device_count(t) && elsewhere == TP_NONE; d++) {
		int mine = 0;
		for (size_t i = 0; i < nto; i++)
			mine |= to[i] == d;
		if (!mine && tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE)
			elsewhere = d;
	}
	cr_assert_neq(elsewhere, TP_NONE);
	cr_assert_eq(tp_cluster_assign(c, "new", &elsewhere, 1, NULL), 0);
	CLUSTER_FAILS(c, tp_plan_apply_step(c, p, 1, NULL), TP_EEXIST,
	              "tp_commit: job 'new' is already running");
	tp_plan_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A plan tries moves under a savepoint and undoes them: failed or not, it leaves the cluster
 * as it was, change counter included, so a placement made before it can still be committed. */
Test(errors, planning_keeps_placements_committable)
{
	tp_topology *t = small();
	tp_cluster *c = half_full(t, 1);
	tp_request two = TP_REQUEST_INIT;
	two.id = "two";
	two.count = 2;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &two, &p), 0, "%s", tp_placement_errmsg(p));

	tp_request r = rack_of_4();
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	pol.max_moves = 0;
	plan_fails(c, &r, &pol, TP_ENOPLAN, "max_moves is 0");
	tp_plan *plan = NULL;
	cr_assert_eq(tp_defrag_plan(c, &r, NULL, &plan), 0, "%s", tp_plan_errmsg(plan));
	tp_plan_destroy(plan);

	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
