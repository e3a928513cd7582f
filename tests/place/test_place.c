/* SPDX-License-Identifier: MIT */
/*
 * The solver (place.c): request validation (code and the field named), every constraint, the
 * conformance examples of spec/examples rebuilt in C, the three not-placeable statuses with
 * their fit figures, replace, commit and its checks, rank order, read-only-ness, and
 * allocation-failure loops over tp_place, tp_replace and tp_commit.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

/* ---- fixtures ------------------------------------------------------------------------------- */

struct nspec {
	const char *name, *p0, *p1; /* p1 NULL for two-level topologies */
	unsigned gpus;
};

static tp_topology *build(const char *const *levels, unsigned nlev, const struct nspec *ns,
                          size_t n)
{
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, nlev, &tp_test_allocator), 0);
	for (size_t i = 0; i < n; i++) {
		const char *path[] = {ns[i].p0, ns[i].p1};
		cr_assert_eq(tp_topology_builder_add_node(b, ns[i].name, nlev > 1 ? path : NULL,
		                                          ns[i].gpus, NULL),
		             0, "%s", tp_topology_builder_errmsg(b));
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

static tp_topology *build3(const struct nspec *ns, size_t n)
{
	const char *levels[] = {"block", "rack", "node"};
	return build(levels, 3, ns, n);
}

static uint32_t node_of(const tp_topology *t, const char *name)
{
	uint32_t n;
	cr_assert_eq(tp_topology_node_by_name(t, name, &n), 0, "no node %s", name);
	return n;
}

/* Record a running job on the first `count` devices of each listed node. */
static void job_on(tp_cluster *c, const char *id, const char *tenant, const tp_request *shape,
                   const char *const *nodes, const unsigned *counts, size_t n)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t devs[1024];
	size_t nd = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t first, cnt;
		cr_assert_eq(tp_topology_domain_devices(t, tp_topology_level_count(t) - 1,
		                                        node_of(t, nodes[i]), &first, &cnt), 0);
		for (unsigned k = 0; k < counts[i]; k++)
			devs[nd++] = first + k;
	}
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.tenant = tenant;
	o.shape = shape;
	cr_assert_eq(tp_cluster_assign(c, id, devs, nd, &o), 0, "%s", tp_cluster_errmsg(c));
}

/* Devices a placement puts on a node. */
static unsigned on_node(const tp_placement *p, const tp_topology *t, const char *node)
{
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	uint32_t nd = node_of(t, node);
	unsigned k = 0;
	for (size_t i = 0; i < n; i++)
		k += tp_topology_device_node(t, d[i]) == nd;
	return k;
}

static void domain_path(const tp_topology *t, unsigned l, uint32_t d, char *buf, size_t len)
{
	cr_assert(tp_topology_domain_path(t, l, d, buf, len) >= 0);
}

/* At every level, each domain's devices form one contiguous run; the per-level lists of the
 * result agree with the devices; no device twice; every device free. */
static void assert_sane(const tp_placement *p, const tp_cluster *c, size_t count)
{
	const tp_topology *t = tp_cluster_topology(c);
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, count, "%zu devices, expected %zu", n, count);
	for (size_t i = 0; i < n; i++) {
		cr_assert_eq(tp_cluster_device_state(c, d[i], NULL), TP_DEVICE_FREE);
		for (size_t j = 0; j < i; j++)
			cr_assert_neq(d[i], d[j], "device listed twice");
	}
	unsigned nl = tp_topology_level_count(t);
	for (unsigned l = 0; l < nl; l++) {
		uint32_t runs = 0, total = 0;
		for (size_t i = 0; i < n; i++) {
			uint32_t a = tp_topology_node_domain(t, tp_topology_device_node(t, d[i]), l);
			if (i && a == tp_topology_node_domain(t, tp_topology_device_node(t, d[i - 1]), l))
				continue;
			for (size_t j = 0; j + 1 < i; j++)
				cr_assert_neq(tp_topology_node_domain(t, tp_topology_device_node(t, d[j]), l),
				              a, "level %u: a domain is entered twice", l);
			uint32_t dom, cnt;
			cr_assert_eq(tp_placement_domain_at(p, l, runs, &dom, &cnt), 0);
			cr_assert_eq(dom, a);
			total += cnt;
			runs++;
		}
		cr_assert_eq(tp_placement_domain_count(p, l), runs);
		cr_assert_eq(total, n);
	}
}

static uint32_t used(const tp_placement *p, unsigned level)
{
	return tp_placement_domain_count(p, level);
}

/* ---- validation ----------------------------------------------------------------------------- */

static tp_topology *small3(void)
{
	static const struct nspec ns[] = {
	    {"x1", "b1", "r1", 4}, {"x2", "b1", "r1", 4}, {"x3", "b1", "r2", 4},
	    {"x4", "b2", "r3", 4}, {"x5", "b2", "r3", 4}, {"x6", "b2", "r4", 4},
	};
	return build3(ns, sizeof ns / sizeof *ns);
}

struct bad {
	const char *what;
	int code;
	const char *fragment;
	void (*set)(tp_request *r);
};

static const tp_slice sl_48[] = {{"rack", 64}, {"node", 48}};
static const tp_slice sl_nodiv[] = {{"rack", 6}};
static const tp_slice sl_nogroup[] = {{"rack", 6}};
static const tp_slice sl_inner[] = {{"rack", 8}, {"node", 3}};
static const tp_slice sl_above[] = {{"block", 8}};
static const tp_slice sl_below[] = {{"node", 8}};
static const tp_slice sl_updown[] = {{"node", 8}, {"rack", 4}};
static const tp_slice sl_nolevel[] = {{NULL, 8}};
static const tp_slice sl_unknown[] = {{"rak", 8}};
static const tp_slice sl_zero[] = {{"rack", 0}};
static const tp_domain_cap cap_unknown[] = {{"powr", 2, 0}};
static const tp_domain_cap cap_both[] = {{"rack", 2, 1}};
static const char *const nodes_unknown[] = {"x1", "nope"};

static void b_count0(tp_request *r) { r->count = 0; }
static void b_version(tp_request *r) { r->version = 99; }
static void b_group(tp_request *r) { r->count = 10; r->group_size = 4; }
static void b_glevel(tp_request *r) { r->group_level = "nod"; }
static void b_required(tp_request *r) { r->required = "rak"; }
static void b_preferred(tp_request *r) { r->required = "node"; r->preferred = "rack"; }
static void b_same(tp_request *r) { r->required = "rack"; r->preferred = "rack"; }
static void b_s48(tp_request *r) { r->count = 512; r->slices = sl_48; r->nslices = 2; }
static void b_snodiv(tp_request *r) { r->count = 8; r->slices = sl_nodiv; r->nslices = 1; }
static void b_snogroup(tp_request *r)
{
	r->count = 24; r->group_size = 4; r->slices = sl_nogroup; r->nslices = 1;
}
static void b_sinner(tp_request *r) { r->count = 24; r->slices = sl_inner; r->nslices = 2; }
static void b_sabove(tp_request *r)
{
	r->count = 8; r->required = "rack"; r->slices = sl_above; r->nslices = 1;
}
static void b_sbelow(tp_request *r)
{
	r->count = 8; r->group_level = "rack"; r->slices = sl_below; r->nslices = 1;
}
static void b_supdown(tp_request *r) { r->count = 8; r->slices = sl_updown; r->nslices = 2; }
static void b_snolevel(tp_request *r) { r->count = 8; r->slices = sl_nolevel; r->nslices = 1; }
static void b_sunknown(tp_request *r) { r->count = 8; r->slices = sl_unknown; r->nslices = 1; }
static void b_szero(tp_request *r) { r->count = 8; r->slices = sl_zero; r->nslices = 1; }
static void b_snull(tp_request *r) { r->slices = NULL; r->nslices = 1; }
static void b_capunknown(tp_request *r) { r->caps = cap_unknown; r->ncaps = 1; }
static void b_capboth(tp_request *r) { r->caps = cap_both; r->ncaps = 1; }
static void b_spread(tp_request *r) { r->spread_level = "rak"; r->spread_min_domains = 2; }
static void b_spread0(tp_request *r) { r->spread_level = "rack"; }
static void b_cojob(tp_request *r) { r->colocate_job = "ghost"; r->colocate_level = "rack"; }
static void b_colevel(tp_request *r) { r->colocate_job = "ghost"; }
static void b_excl(tp_request *r) { r->exclusive = "rak"; }
static void b_perf(tp_request *r) { r->select_min_perf = -1; }
static void b_mem(tp_request *r) { r->select_min_memory_gb = -2; }
static void b_nodes(tp_request *r) { r->select_nodes = nodes_unknown; r->nselect_nodes = 2; }
static void b_class(tp_request *r) { r->job_class = (tp_job_class)7; }
static void b_id(tp_request *r) { r->id = "a/b\n"; }

static const struct bad bads[] = {
    {"count 0", TP_EINVAL, "request.count must be at least 1", b_count0},
    {"version", TP_EINVAL, "request.version", b_version},
    {"group", TP_EINVAL, "request.count 10 is not a multiple of request.group.size 4", b_group},
    {"group level", TP_ENOTFOUND, "request.group.level: unknown level 'nod'", b_glevel},
    {"required", TP_ENOTFOUND, "request.required: unknown level 'rak'", b_required},
    {"preferred", TP_EINVAL, "request.preferred rack is not below request.required node",
     b_preferred},
    {"preferred same", TP_EINVAL, "request.preferred rack is not below", b_same},
    {"slice 48", TP_EINVAL, "request.slices[1].size 48 does not divide", b_s48},
    {"slice count", TP_EINVAL, "request.slices[0].size 6 does not divide request.count 8",
     b_snodiv},
    {"slice group", TP_EINVAL, "request.slices[0].size 6 is not a multiple of request.group.size",
     b_snogroup},
    {"slice inner", TP_EINVAL, "request.slices[1].size 3 does not divide request.slices[0].size",
     b_sinner},
    {"slice above", TP_EINVAL, "request.slices[0].level block is above request.required rack",
     b_sabove},
    {"slice below", TP_EINVAL, "request.slices[0].level node is below request.group.level rack",
     b_sbelow},
    {"slice order", TP_EINVAL, "request.slices[1].level rack is not below request.slices[0]",
     b_supdown},
    {"slice level", TP_EINVAL, "request.slices[0].level is required", b_snolevel},
    {"slice unknown", TP_ENOTFOUND, "request.slices[0].level: unknown level 'rak'", b_sunknown},
    {"slice zero", TP_EINVAL, "request.slices[0].size must be at least 1", b_szero},
    {"slices null", TP_EINVAL, "request.slices is NULL", b_snull},
    {"cap unknown", TP_ENOTFOUND, "request.max_per_domain[0].level: unknown", b_capunknown},
    {"cap both", TP_EINVAL, "request.max_per_domain[0] needs exactly one of devices, groups",
     b_capboth},
    {"spread", TP_ENOTFOUND, "request.spread.level: unknown", b_spread},
    {"spread 0", TP_EINVAL, "request.spread.min_domains must be at least 1", b_spread0},
    {"colocate job", TP_ENOTFOUND, "request.colocate.job: no running job 'ghost'", b_cojob},
    {"colocate level", TP_EINVAL, "request.colocate.level is required", b_colevel},
    {"exclusive", TP_ENOTFOUND, "request.exclusive: unknown level 'rak'", b_excl},
    {"min perf", TP_EINVAL, "request.select.min_perf", b_perf},
    {"min mem", TP_EINVAL, "request.select.min_memory_gb", b_mem},
    {"nodes", TP_ENOTFOUND, "request.select.nodes[1]: unknown node 'nope'", b_nodes},
    {"class", TP_EINVAL, "request.class 7", b_class},
    {"id", TP_EINVAL, "request.id", b_id},
};

Test(place, invalid_requests_name_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t);
	for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
		tp_request r = TP_REQUEST_INIT;
		r.count = 4;
		bads[i].set(&r);
		tp_placement *p = NULL;
		int rc = tp_place(c, &r, &p);
		cr_assert(p, "%s: no result object", bads[i].what);
		TP_ASSERT_ERR(rc, bads[i].code, tp_placement_errmsg(p), bads[i].fragment);
		cr_assert_eq(tp_placement_status(p), rc);
		size_t n = 1;
		cr_assert_null(tp_placement_devices(p, &n));
		cr_assert_eq(n, 0);
		tp_fit fit = TP_FIT_INIT;
		cr_assert_eq(tp_placement_fit(p, &fit), TP_EINVAL, "%s: an invalid request has no fit",
		             bads[i].what);
		tp_placement_destroy(p);
	}
	tp_placement *p = (tp_placement *)1;
	cr_assert_eq(tp_place(NULL, NULL, &p), TP_EINVAL);
	cr_assert_null(p);
	cr_assert_eq(tp_place(c, NULL, NULL), TP_EINVAL);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- the conformance examples, rebuilt ------------------------------------------------------ */

static tp_topology *kueue_default(void)
{
	static const struct nspec ns[] = {
	    {"x3", "b1", "r1", 1}, {"x5", "b1", "r2", 1}, {"x1", "b1", "r2", 1},
	    {"x6", "b1", "r2", 1}, {"x2", "b2", "r1", 1}, {"x4", "b2", "r2", 2},
	};
	return build3(ns, sizeof ns / sizeof *ns);
}

Test(place, example_kueue_k05_required_rack_counts_nodes)
{
	tp_test_alloc_reset();
	tp_topology *t = kueue_default();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.required = "rack";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 2);
	cr_assert_eq(on_node(p, t, "x4"), 2);
	cr_assert_eq(used(p, 2), 1);
	cr_assert_str_eq(tp_placement_job(p), "new");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, example_kueue_k12a_preferred_climbs_to_fewest_blocks_racks_nodes)
{
	tp_test_alloc_reset();
	tp_topology *t = kueue_default();
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 6;
	r.preferred = "rack";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 6);
	cr_assert_eq(used(p, 0), 2);
	cr_assert_eq(used(p, 1), 3);
	cr_assert_eq(used(p, 2), 5);
	cr_assert_gt(tp_placement_step_comm_us(p), 0.0);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, example_volcano_v03_gang_in_one_tier1)
{
	tp_test_alloc_reset();
	const char *levels[] = {"tier2", "tier1", "node"};
	static const struct nspec ns[] = {
	    {"s0-n1", "s2", "s0", 4}, {"s0-n2", "s2", "s0", 4},
	    {"s1-n3", "s2", "s1", 4}, {"s1-n4", "s2", "s1", 4},
	};
	tp_topology *t = build(levels, 3, ns, 4);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.group_size = 4;
	r.required = "tier1";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 8);
	cr_assert_eq(used(p, 1), 1);
	cr_assert_eq(used(p, 2), 2);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

static tp_topology *slurm_s01(void)
{
	const char *levels[] = {"agg", "block", "node"};
	static const struct nspec ns[] = {
	    {"node1", "a1", "b1", 4}, {"node2", "a1", "b1", 4}, {"node3", "a1", "b1", 4},
	    {"node4", "a1", "b1", 4}, {"node5", "a1", "b2", 4}, {"node6", "a1", "b2", 4},
	    {"node7", "a1", "b2", 4}, {"node8", "a1", "b2", 4},
	};
	return build(levels, 3, ns, 8);
}

Test(place, example_slurm_s01_fragmented_with_fit)
{
	tp_test_alloc_reset();
	tp_topology *t = slurm_s01();
	tp_cluster *c = tp_test_cluster(t);
	const char *j1[] = {"node1", "node2"}, *j2[] = {"node5", "node6", "node7"};
	const unsigned four[] = {4, 4, 4};
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 12;
	shape.group_size = 4;
	shape.required = "block";
	job_on(c, "J1", NULL, NULL, j1, four, 2);
	job_on(c, "J2", NULL, &shape, j2, four, 3);
	tp_request r = shape;
	r.id = "J3";
	r.priority = 1;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	TP_ASSERT_ERR(rc, TP_EFRAGMENTED, tp_placement_errmsg(p), "best block (a1/b1) can take 8");
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 12);
	cr_assert_eq(fit.free_total, 12);
	cr_assert_eq(fit.level, 1);
	cr_assert_eq(fit.best, 8);
	cr_assert_eq(fit.version, TP_FIT_VERSION, "the caller's version is kept");
	/* #19 item 10: a version this library does not know is refused, the struct untouched */
	const unsigned bad[] = {0, TP_FIT_VERSION + 1, UINT_MAX};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		tp_fit f = {.version = bad[i], .needed = 77};
		cr_assert_eq(tp_placement_fit(p, &f), TP_EINVAL, "version %u", bad[i]);
		cr_assert_eq(f.needed, 77, "version %u: nothing written", bad[i]);
	}
	cr_assert_str_eq(tp_placement_job(p), "J3");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, example_nvl72_512_exactly_8_racks)
{
	tp_test_alloc_reset();
	const char *levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 3, &tp_test_allocator), 0);
	tp_node_options no = TP_NODE_OPTIONS_INIT;
	no.model = "GB200";
	const unsigned counts[] = {2, 8, 18};
	cr_assert_eq(tp_topology_builder_generate(b, counts, 4, &no), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	for (int k = 0; k < 3; k++) {
		static const char *racks[] = {"rack0", "rack3", "rack5"};
		char names[6][64];
		const char *nodes[6];
		const unsigned four[6] = {4, 4, 4, 4, 4, 4};
		for (int i = 0; i < 6; i++) {
			snprintf(names[i], sizeof names[i], "block0-%s-node%d", racks[k], i);
			nodes[i] = names[i];
		}
		char id[16];
		snprintf(id, sizeof id, "small-%d", k);
		job_on(c, id, "t2", NULL, nodes, four, 6);
	}
	tp_slice sl = {"rack", 64};
	tp_domain_cap cap = {"rack", 64, 0};
	tp_request r = TP_REQUEST_INIT;
	r.id = "train-512";
	r.tenant = "t1";
	r.count = 512;
	r.group_size = 4;
	r.preferred = "block";
	r.slices = &sl;
	r.nslices = 1;
	r.caps = &cap;
	r.ncaps = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 512);
	cr_assert_eq(used(p, 0), 1);
	cr_assert_eq(used(p, 1), 8);
	cr_assert_eq(used(p, 2), 128);
	uint32_t dom, cnt;
	char path[64];
	cr_assert_eq(tp_placement_domain_at(p, 0, 0, &dom, &cnt), 0);
	domain_path(t, 0, dom, path, sizeof path);
	cr_assert_str_eq(path, "block1");
	for (uint32_t i = 0; i < 8; i++) {
		cr_assert_eq(tp_placement_domain_at(p, 1, i, &dom, &cnt), 0);
		cr_assert_eq(cnt, 64);
		domain_path(t, 1, dom, path, sizeof path);
		char want[32];
		snprintf(want, sizeof want, "block1/rack%u", i);
		cr_assert_str_eq(path, want);
	}
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, example_invalid_count_not_multiple_of_group)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 10;
	r.group_size = 4;
	r.group_level = "node";
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINVAL, tp_placement_errmsg(p), "request.count");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* rack0: 18 nodes; the job holds nodes 0..15 of rack0, failed nodes 3 and 7; rack1 holds
 * another job on 10 nodes. */
Test(place, example_replace_two_nodes_same_rack)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	char names[18][64];
	const char *nodes[18];
	unsigned four[18];
	for (int i = 0; i < 18; i++) {
		snprintf(names[i], sizeof names[i], "block0-rack0-node%d", i);
		nodes[i] = names[i];
		four[i] = 4;
	}
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 64;
	shape.group_size = 4;
	shape.required = "rack";
	job_on(c, "big", "t1", &shape, nodes, four, 16);
	char names1[10][64];
	const char *nodes1[10];
	for (int i = 0; i < 10; i++) {
		snprintf(names1[i], sizeof names1[i], "block0-rack1-node%d", i);
		nodes1[i] = names1[i];
	}
	job_on(c, "r1-job", "t2", NULL, nodes1, four, 10);
	const uint32_t *before;
	size_t nb;
	cr_assert_eq(tp_cluster_job_devices(c, "big", &before, &nb), 0);
	uint32_t old[64];
	memcpy(old, before, sizeof old);
	uint32_t failed[8];
	for (int i = 0; i < 4; i++) {
		failed[i] = old[3 * 4 + i];
		failed[4 + i] = old[7 * 4 + i];
	}
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "big", failed, 8, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "tp_replace changed the cluster");
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 64);
	for (int r = 0; r < 64; r++) {
		int node = r / 4;
		if (node == 3 || node == 7) {
			uint32_t want = node_of(t, node == 3 ? "block0-rack0-node16"
			                                     : "block0-rack0-node17");
			cr_assert_eq(tp_topology_device_node(t, d[r]), want, "rank %d", r);
		} else {
			cr_assert_eq(d[r], old[r], "rank %d moved", r);
		}
	}
	for (size_t i = 0; i < 8; i++) {
		uint32_t f, rep;
		cr_assert_eq(tp_placement_replaced(p, i, &f, &rep), 0);
		cr_assert_eq(f, failed[i]);
	}
	cr_assert_eq(tp_placement_replaced(p, 8, NULL, NULL), TP_ENOTFOUND);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	const uint32_t *after;
	cr_assert_eq(tp_cluster_job_devices(c, "big", &after, &nb), 0);
	cr_assert_eq(memcmp(after, d, 64 * sizeof *d), 0);
	for (int i = 0; i < 8; i++)
		cr_assert_eq(tp_cluster_device_state(c, failed[i], NULL), TP_DEVICE_FREE);
	cr_assert_eq(tp_cluster_check(c, NULL, 0), 0);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- not placeable -------------------------------------------------------------------------- */

Test(place, infeasible_busy_fragmented_with_fit)
{
	tp_test_alloc_reset();
	tp_topology *t = small3(); /* 6 nodes of 4: b1/r1 x1 x2, b1/r2 x3, b2/r3 x4 x5, b2/r4 x6 */
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	tp_placement *p = NULL;
	tp_fit fit = TP_FIT_INIT;

	/* more than any rack could ever hold */
	r.count = 12;
	r.required = "rack";
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p), "infeasible");
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 12);
	cr_assert_eq(fit.free_total, 24);
	cr_assert_eq(fit.level, 1);
	cr_assert_eq(fit.best, 8);
	tp_placement_destroy(p);

	/* busy: a rack could take it, but fewer devices are free than asked */
	const char *most[] = {"x1", "x2", "x3", "x4", "x5"};
	const unsigned four[] = {4, 4, 4, 4, 2};
	job_on(c, "j", NULL, NULL, most, four, 5);
	r.count = 8;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EBUSY, tp_placement_errmsg(p), "busy: 6 matching");
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 8);
	cr_assert_eq(fit.free_total, 6);
	cr_assert_eq(fit.best, 4);
	tp_placement_destroy(p);

	/* fragmented: 6 free, 2 in b2/r3 and 4 in b2/r4; 6 in one rack is not possible */
	r.count = 6;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EFRAGMENTED, tp_placement_errmsg(p),
	              "best rack (b2/r4) can take 4 of the 6");
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 6);
	cr_assert_eq(fit.free_total, 6);
	cr_assert_eq(fit.level, 1);
	cr_assert_eq(fit.best, 4);
	tp_placement_destroy(p);

	/* a preferred request reports the top level */
	r.required = NULL;
	r.preferred = "rack";
	r.count = 7;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EBUSY, tp_placement_errmsg(p), "busy");
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.level, 0);
	cr_assert_eq(fit.best, 6);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- constraints ---------------------------------------------------------------------------- */

Test(place, groups_take_whole_groups_per_node)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t);
	const char *some[] = {"x1", "x2", "x4"};
	const unsigned cnt[] = {1, 1, 2};
	job_on(c, "j", NULL, NULL, some, cnt, 3);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.group_size = 4;
	r.required = "block";
	tp_placement *p = NULL;
	/* b1 has x3 whole (x1, x2 have 3 free each): one group only; b2: x5 and x6 */
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 8);
	cr_assert_eq(on_node(p, t, "x5"), 4);
	cr_assert_eq(on_node(p, t, "x6"), 4);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, rule1_prefers_fewer_nodes_over_largest_first)
{
	tp_test_alloc_reset();
	/* r1: 8 nodes with 1 free each; r2: 2 whole nodes of 4 and 2 busy nodes; both hold 8 */
	static const struct nspec ns[] = {
	    {"a0", "b", "r1", 4}, {"a1", "b", "r1", 4}, {"a2", "b", "r1", 4},
	    {"a3", "b", "r1", 4}, {"a4", "b", "r1", 4}, {"a5", "b", "r1", 4},
	    {"a6", "b", "r1", 4}, {"a7", "b", "r1", 4}, {"c0", "b", "r2", 4},
	    {"c1", "b", "r2", 4}, {"c2", "b", "r2", 4}, {"c3", "b", "r2", 4},
	};
	tp_topology *t = build3(ns, 12);
	tp_cluster *c = tp_test_cluster(t);
	const char *busy[] = {"a0", "a1", "a2", "a3", "a4", "a5", "a6", "a7", "c2", "c3"};
	const unsigned cnt[] = {3, 3, 3, 3, 3, 3, 3, 3, 4, 4};
	job_on(c, "j", NULL, NULL, busy, cnt, 10);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.required = "rack";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 8);
	cr_assert_eq(used(p, 2), 2);
	cr_assert_eq(on_node(p, t, "c0") + on_node(p, t, "c1"), 8);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, slices_and_balance)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	/* 24 nodes over two racks of 18: balanced gives 12 + 12 */
	tp_request r = TP_REQUEST_INIT;
	r.count = 96;
	r.group_size = 4;
	r.required = "block";
	r.balanced = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 96);
	uint32_t dom, a, b;
	cr_assert_eq(used(p, 1), 2);
	cr_assert_eq(tp_placement_domain_at(p, 1, 0, &dom, &a), 0);
	cr_assert_eq(tp_placement_domain_at(p, 1, 1, &dom, &b), 0);
	cr_assert_eq(a, 48);
	cr_assert_eq(b, 48);
	tp_placement_destroy(p);
	/* without balance the split is uneven (one rack filled) but still 2 racks */
	r.balanced = 0;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(used(p, 1), 2);
	tp_placement_destroy(p);
	/* slices of 32 per rack: each rack holds whole slices */
	tp_slice sl = {"rack", 32};
	r.slices = &sl;
	r.nslices = 1;
	r.count = 128;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 128);
	for (uint32_t i = 0; i < used(p, 1); i++) {
		cr_assert_eq(tp_placement_domain_at(p, 1, i, &dom, &a), 0);
		cr_assert_eq(a % 32, 0);
	}
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, caps_and_spread)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	tp_domain_cap cap = {"rack", 0, 16};
	tp_request r = TP_REQUEST_INIT;
	r.count = 72;
	r.group_size = 4;
	r.preferred = "rack";
	r.caps = &cap;
	r.ncaps = 1;
	tp_placement *p = NULL;
	/* 18 groups, at most 16 per rack: two racks */
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 72);
	cr_assert_eq(used(p, 1), 2);
	uint32_t dom, n;
	for (uint32_t i = 0; i < 2; i++) {
		cr_assert_eq(tp_placement_domain_at(p, 1, i, &dom, &n), 0);
		cr_assert_leq(n, 64);
	}
	tp_placement_destroy(p);
	/* spread: 8 devices on at least 2 racks even though one rack holds them */
	tp_request s = TP_REQUEST_INIT;
	s.count = 8;
	s.preferred = "rack";
	s.spread_level = "rack";
	s.spread_min_domains = 2;
	cr_assert_eq(tp_place(c, &s, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 8);
	cr_assert_eq(used(p, 1), 2);
	cr_assert_eq(used(p, 2), 2);
	tp_placement_destroy(p);
	/* a spread over more racks than exist can never be met */
	s.spread_min_domains = 3;
	TP_ASSERT_ERR(tp_place(c, &s, &p), TP_EINFEASIBLE, tp_placement_errmsg(p), "infeasible");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, failure_domain_caps_one_replica_per_feed)
{
	tp_test_alloc_reset();
	const char *levels[] = {"rack", "node"};
	static const struct nspec ns[] = {
	    {"n1", "r1", NULL, 4}, {"n2", "r1", NULL, 4}, {"n3", "r1", NULL, 4}, {"n4", "r1", NULL, 4},
	};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	for (int i = 0; i < 4; i++) {
		const char *path[] = {ns[i].p0};
		cr_assert_eq(tp_topology_builder_add_node(b, ns[i].name, path, 4, NULL), 0);
	}
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "a", "n1", -1), 0);
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "a", "n2", -1), 0);
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "b", "n3", -1), 0);
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "b", "n4", -1), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	tp_domain_cap cap = {"power", 0, 1};
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.group_size = 4;
	r.required = "rack";
	r.caps = &cap;
	r.ncaps = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 8);
	cr_assert_eq(on_node(p, t, "n1") + on_node(p, t, "n2"), 4);
	cr_assert_eq(on_node(p, t, "n3") + on_node(p, t, "n4"), 4);
	tp_placement_destroy(p);
	r.count = 12;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p), "infeasible");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, colocate_exclusive_and_exclusive_jobs)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t);
	const char *dn[] = {"x4"};
	const unsigned one[] = {1};
	job_on(c, "decode", "t1", NULL, dn, one, 1);
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.tenant = "t1";
	r.colocate_job = "decode";
	r.colocate_level = "block";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 4);
	uint32_t dom, n;
	char path[32];
	cr_assert_eq(tp_placement_domain_at(p, 0, 0, &dom, &n), 0);
	domain_path(t, 0, dom, path, sizeof path);
	cr_assert_str_eq(path, "b2");
	cr_assert_eq(used(p, 0), 1);
	tp_placement_destroy(p);

	/* exclusive rack for tenant t2: b2/r3 holds a t1 job, so only r1, r2, r4 qualify */
	tp_request e = TP_REQUEST_INIT;
	e.count = 8;
	e.tenant = "t2";
	e.required = "rack";
	e.exclusive = "rack";
	const char *x1[] = {"x1"};
	job_on(c, "t1-small", "t1", NULL, x1, one, 1);
	/* r1 has a t1 job now; r2 and r4 have 4 each; r3 has 7 but is dirty: fragmented, and the
	 * message says which tenant's job keeps the request out of r3 */
	TP_ASSERT_ERR(tp_place(c, &e, &p), TP_EFRAGMENTED, tp_placement_errmsg(p),
	              "b2/r3: tenant t1's job 'decode' runs there (request.exclusive)");
	tp_placement_destroy(p);
	e.count = 4;
	cr_assert_eq(tp_place(c, &e, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(on_node(p, t, "x4") + on_node(p, t, "x5") + on_node(p, t, "x1") +
	                 on_node(p, t, "x2"), 0);
	/* committed with its shape, it keeps t1 out of its rack */
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	uint32_t erack;
	cr_assert_eq(tp_placement_domain_at(p, 1, 0, &erack, &n), 0);
	tp_placement_destroy(p);
	tp_request o = TP_REQUEST_INIT;
	o.count = 4;
	o.tenant = "t1";
	o.required = "rack";
	tp_placement *q = NULL;
	cr_assert_eq(tp_place(c, &o, &q), 0, "%s", tp_placement_errmsg(q));
	cr_assert_neq(tp_placement_domain_at(q, 1, 0, &dom, &n) == 0 ? dom : erack, erack);
	tp_placement_destroy(q);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, select_down_and_cordoned)
{
	tp_test_alloc_reset();
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_node_options h = TP_NODE_OPTIONS_INIT, a = TP_NODE_OPTIONS_INIT;
	h.model = "H100";
	h.memory_gb = 80;
	a.model = "A100";
	a.memory_gb = 40;
	const double perf[] = {1.0, 0.5, 1.0, 1.0};
	h.device_perf = perf;
	const char *r1[] = {"r1"}, *r2[] = {"r2"};
	cr_assert_eq(tp_topology_builder_add_node(b, "h1", r1, 4, &h), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "a1", r1, 4, &a), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "a2", r2, 4, &a), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "p1", r2, 4, NULL), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	tp_placement *p = NULL;
	r.count = 3;
	r.select_model = "H100";
	r.select_min_perf = 0.9;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(on_node(p, t, "h1"), 3);
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++)
		cr_assert_neq(d[i], tp_test_dev(t, "h1/1"), "a slow device was used");
	tp_placement_destroy(p);
	r.count = 4;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p), "infeasible");
	tp_placement_destroy(p);

	tp_request m = TP_REQUEST_INIT;
	m.count = 8;
	m.select_min_memory_gb = 40; /* p1 has no memory figure: never matches */
	uint32_t down[] = {tp_test_dev(t, "a1/0")}, cord[] = {tp_test_dev(t, "a2/3")};
	cr_assert_eq(tp_cluster_set_down(c, down, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_cordoned(c, cord, 1, 1), 0);
	cr_assert_eq(tp_place(c, &m, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(on_node(p, t, "p1"), 0);
	d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++) {
		cr_assert_neq(d[i], down[0]);
		cr_assert_neq(d[i], cord[0]);
	}
	tp_placement_destroy(p);
	m.count = 12; /* 4 + 3 + 3 matching and healthy: 10 */
	TP_ASSERT_ERR(tp_place(c, &m, &p), TP_EINFEASIBLE, tp_placement_errmsg(p), "infeasible");
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.free_total, 10);
	tp_placement_destroy(p);

	const char *allow[] = {"a2", "p1"};
	tp_request l = TP_REQUEST_INIT;
	l.count = 5;
	l.select_nodes = allow;
	l.nselect_nodes = 2;
	cr_assert_eq(tp_place(c, &l, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(on_node(p, t, "a2") + on_node(p, t, "p1"), 5);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, pcie_pairs_are_taken_behind_one_switch)
{
	tp_test_alloc_reset();
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	unsigned s0, s1;
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, &s0), 0);
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, &s1), 0);
	/* GPUs 0 and 2 behind one switch, 1 and 3 behind the other */
	cr_assert_eq(tp_nodetype_set_gpu_switch(nt, 0, (int)s0), 0);
	cr_assert_eq(tp_nodetype_set_gpu_switch(nt, 2, (int)s0), 0);
	cr_assert_eq(tp_nodetype_set_gpu_switch(nt, 1, (int)s1), 0);
	cr_assert_eq(tp_nodetype_set_gpu_switch(nt, 3, (int)s1), 0);
	const char *levels[] = {"node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 1, &tp_test_allocator), 0);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	cr_assert_eq(tp_topology_builder_add_node(b, "h", NULL, 4, &o), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	tp_nodetype_destroy(nt);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 2);
	cr_assert_eq(tp_topology_device_index(t, d[1]) - tp_topology_device_index(t, d[0]), 2,
	             "devices %u and %u are not behind one switch", d[0], d[1]);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, unconstrained_fills_tightest_holes)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t);
	const char *some[] = {"x1", "x2", "x4"};
	const unsigned cnt[] = {3, 4, 2};
	job_on(c, "j", NULL, NULL, some, cnt, 3);
	tp_request r = TP_REQUEST_INIT;
	r.count = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	/* b1 (5 free) is tighter than b2 (10), r1 (1) than r2 (4): x1, the tightest hole */
	cr_assert_eq(on_node(p, t, "x1"), 1);
	tp_placement_destroy(p);
	/* 6: b2 is the tightest block that holds them, r3 (x4 2 + x5 4) its tightest rack */
	r.count = 6;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 6);
	cr_assert_eq(on_node(p, t, "x4"), 2);
	cr_assert_eq(on_node(p, t, "x5"), 4);
	tp_placement_destroy(p);
	/* 12: no block holds them; the smallest holes go first (all of b1, then r4 of b2), and
	 * the rest goes to the tightest hole that holds it (3 on x5, not 2 + 1) */
	r.count = 12;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_sane(p, c, 12);
	cr_assert_eq(on_node(p, t, "x1"), 1);
	cr_assert_eq(on_node(p, t, "x3"), 4);
	cr_assert_eq(on_node(p, t, "x6"), 4);
	cr_assert_eq(on_node(p, t, "x5"), 3);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- replace and commit --------------------------------------------------------------------- */

Test(place, replace_without_shape_stays_close)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t);
	const char *on[] = {"x4", "x5"};
	const unsigned cnt[] = {4, 2};
	job_on(c, "j", NULL, NULL, on, cnt, 2);
	uint32_t failed[] = {tp_test_dev(t, "x4/1")};
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "j", failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	uint32_t f, rep;
	cr_assert_eq(tp_placement_replaced(p, 0, &f, &rep), 0);
	cr_assert_eq(f, failed[0]);
	cr_assert_eq(tp_topology_device_node(t, rep), node_of(t, "x5"),
	             "the replacement left the rack the job sits in");
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 6);
	cr_assert_eq(d[1], rep);
	cr_assert_str_eq(tp_placement_job(p), "j");
	tp_placement_destroy(p);

	/* errors */
	uint32_t other[] = {tp_test_dev(t, "x1/0")};
	TP_ASSERT_ERR(tp_replace(c, "j", other, 1, &p), TP_EINVAL, tp_placement_errmsg(p),
	              "not held by job 'j'");
	tp_placement_destroy(p);
	TP_ASSERT_ERR(tp_replace(c, "ghost", failed, 1, &p), TP_ENOTFOUND, tp_placement_errmsg(p),
	              "no running job 'ghost'");
	tp_placement_destroy(p);
	TP_ASSERT_ERR(tp_replace(c, "j", failed, 0, &p), TP_EINVAL, tp_placement_errmsg(p),
	              "at least one");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, replace_not_possible_reports_fit)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 8;
	shape.group_size = 4;
	shape.required = "rack";
	const char *on[] = {"x1", "x2"};
	const unsigned cnt[] = {4, 4};
	job_on(c, "j", NULL, &shape, on, cnt, 2);
	uint32_t failed[] = {tp_test_dev(t, "x2/0")};
	tp_placement *p = NULL;
	/* the group of x2 keeps 3 healthy devices on x2: the replacement must be on x2 */
	TP_ASSERT_ERR(tp_replace(c, "j", failed, 1, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "infeasible");
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 1);
	cr_assert_eq(fit.level, 1);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, commit_checks_and_records_the_shape)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t), *c2 = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.id = "new";
	r.count = 4;
	r.tenant = "t9";
	r.priority = 3;
	r.required = "node";
	tp_placement *p = NULL, *bad = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	TP_ASSERT_ERR(tp_commit(c2, p, NULL), TP_EINVAL, tp_cluster_errmsg(c2), "another cluster");
	r.count = 99;
	TP_ASSERT_ERR(tp_place(c, &r, &bad), TP_EINFEASIBLE, tp_placement_errmsg(bad), "infeasible");
	TP_ASSERT_ERR(tp_commit(c, bad, NULL), TP_EINVAL, tp_cluster_errmsg(c), "not a placement");
	tp_placement_destroy(bad);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	cr_assert_eq(tp_cluster_job_options(c, "new", &o), 0);
	cr_assert_str_eq(o.tenant, "t9");
	cr_assert_eq(o.priority, 3);
	cr_assert_not_null(o.shape);
	cr_assert_str_eq(o.shape->required, "node");
	cr_assert_eq(tp_cluster_check(c, NULL, 0), 0);
	/* the cluster changed: the same result no longer commits */
	TP_ASSERT_ERR(tp_commit(c, p, NULL), TP_EINVAL, tp_cluster_errmsg(c), "changed");
	tp_placement_destroy(p);
	/* an id that runs already */
	r.count = 4;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	TP_ASSERT_ERR(tp_commit(c, p, NULL), TP_EEXIST, tp_cluster_errmsg(c), "already running");
	tp_placement_destroy(p);
	/* explicit options */
	r.id = "other";
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	tp_job_options bo = TP_JOB_OPTIONS_INIT;
	bo.checkpoint_s = -1;
	TP_ASSERT_ERR(tp_commit(c, p, &bo), TP_EINVAL, tp_cluster_errmsg(c),
	              "opts.checkpoint_s -1 is not a finite number >= 0");
	bo.checkpoint_s = 5;
	bo.tenant = "t3";
	cr_assert_eq(tp_commit(c, p, &bo), 0, "%s", tp_cluster_errmsg(c));
	o.version = TP_JOB_OPTIONS_VERSION;
	cr_assert_eq(tp_cluster_job_options(c, "other", &o), 0);
	cr_assert_str_eq(o.tenant, "t3");
	cr_assert_not_null(o.shape, "the request is recorded as the shape");
	tp_placement_destroy(p);
	cr_assert_eq(tp_commit(NULL, NULL, NULL), TP_EINVAL);
	/* #19 item 10: a NULL placement gets its own message, not the previous failure's */
	TP_ASSERT_ERR(tp_commit(c, NULL, NULL), TP_EINVAL, tp_cluster_errmsg(c),
	              "tp_commit: placement is NULL");
	tp_cluster_destroy(c);
	tp_cluster_destroy(c2);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Options that tp_cluster_assign refuses, each with the message both calls give. */
struct opts_bad {
	const char *what;
	const char *msg;
};

static const struct opts_bad opts_bads[] = {
    {"version 0", "opts.version 0 is not 1"},
    {"class 5", "opts.job_class 5 is not a job class"},
    {"checkpoint NaN", "opts.checkpoint_s nan is not a finite number >= 0"},
    {"tenant empty", "opts.tenant is empty"},
    {"shape slices NULL", "shape.slices is NULL but shape.nslices is 1"},
    {"shape unknown level", "shape.required 'nosuch' is not a level of the topology"},
    {"shape version 77", "shape.version 77 is not 1 to 6"},
    {"shape version 99 count 0", "shape.version 99 is not 1 to 6"},
    {"shape count 0", "shape.count 0: a request needs at least one device"},
};

static void opts_bad_set(size_t i, tp_job_options *o, tp_request *shape)
{
	*o = (tp_job_options)TP_JOB_OPTIONS_INIT;
	*shape = (tp_request)TP_REQUEST_INIT;
	shape->count = 4;
	switch (i) {
	case 0: o->version = 0; break;
	case 1: o->job_class = (tp_job_class)5; break;
	case 2: o->checkpoint_s = NAN; break;
	case 3: o->tenant = ""; break;
	case 4: shape->nslices = 1; break; /* slices stays NULL */
	case 5: shape->required = "nosuch"; break;
	case 6: shape->version = 77; break;
	case 7: shape->version = 99, shape->count = 0; break;
	default: shape->count = 0; break;
	}
	if (i >= 4)
		o->shape = shape;
}

/* tp_commit validates its options, the shape included, as tp_cluster_assign does: the same
 * code and the same message, and a refusal changes nothing (issue #19 item 3: a shape with
 * nslices 1 and slices NULL crashed tp_commit; an unknown level or version 77 was recorded). */
Test(place, commit_rejects_what_assign_rejects)
{
	tp_test_alloc_reset();
	tp_topology *t = small3();
	tp_cluster *c = tp_test_cluster(t), *ca = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.id = "new";
	r.count = 4;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	for (size_t i = 0; i < sizeof opts_bads / sizeof *opts_bads; i++) {
		const struct opts_bad *b = &opts_bads[i];
		tp_job_options o;
		tp_request shape;
		opts_bad_set(i, &o, &shape);
		TP_ASSERT_ERR(tp_cluster_assign(ca, "new", devs, n, &o), TP_EINVAL,
		              tp_cluster_errmsg(ca), b->msg);
		TP_ASSERT_ERR(tp_commit(c, p, &o), TP_EINVAL, tp_cluster_errmsg(c), b->msg);
		cr_assert_str_eq(tp_cluster_errmsg(c), tp_cluster_errmsg(ca), "%s", b->what);
		cr_assert_eq(tp_cluster_job_count(c), 0, "%s: nothing recorded", b->what);
		cr_assert_eq(tp_cluster_job_count(ca), 0, "%s: nothing recorded", b->what);
	}
	/* the state is unchanged: the same placement still commits */
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_job_count(c), 1);
	cr_assert_eq(tp_cluster_check(c, NULL, 0), 0);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_cluster_destroy(ca);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, place_is_read_only_and_deterministic)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 4, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	uint64_t s = 7;
	for (int j = 0; j < 40; j++) {
		uint32_t d = tp_test_below(&s, tp_topology_device_count(t));
		char id[16];
		snprintf(id, sizeof id, "j%d", j);
		if (tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE)
			cr_assert_eq(tp_cluster_assign(c, id, &d, 1, NULL), 0);
	}
	uint64_t fp = tp_cluster_fingerprint(c);
	const char *prefs[] = {NULL, "rack", "block"};
	for (int i = 0; i < 3; i++) {
		tp_request r = TP_REQUEST_INIT;
		r.count = 100;
		r.preferred = prefs[i];
		tp_placement *a = NULL, *b = NULL;
		cr_assert_eq(tp_place(c, &r, &a), 0, "%s", tp_placement_errmsg(a));
		cr_assert_eq(tp_place(c, &r, &b), 0);
		assert_sane(a, c, 100);
		size_t na, nb;
		const uint32_t *da = tp_placement_devices(a, &na), *db = tp_placement_devices(b, &nb);
		cr_assert_eq(na, nb);
		cr_assert_eq(memcmp(da, db, na * sizeof *da), 0, "two calls, two answers");
		tp_placement_destroy(a);
		tp_placement_destroy(b);
	}
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- allocation failures -------------------------------------------------------------------- */

Test(place, allocation_failures_place_replace_commit)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 2, 2, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	const char *on[] = {"block0-rack0-node0", "block0-rack0-node1"};
	const unsigned cnt[] = {4, 4};
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 8;
	shape.group_size = 4;
	shape.required = "rack";
	job_on(c, "j", "t1", &shape, on, cnt, 2);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_slice sl = {"rack", 32};
	tp_request reqs[3] = {TP_REQUEST_INIT, TP_REQUEST_INIT, TP_REQUEST_INIT};
	reqs[0].count = 8;
	reqs[0].required = "rack";
	reqs[1].count = 160;
	reqs[1].group_size = 4;
	reqs[1].preferred = "rack";
	reqs[1].slices = &sl;
	reqs[1].nslices = 1;
	reqs[1].balanced = 1;
	reqs[2].count = 200; /* not placeable: the fit path */
	reqs[2].required = "rack";
	for (int i = 0; i < 3; i++) {
		int rc;
		long n = 0;
		do {
			tp_placement *p = NULL;
			tp_test_alloc_fail_at(n++);
			rc = tp_place(c, &reqs[i], &p);
			if (rc == TP_ENOMEM)
				cr_assert_null(p);
			tp_placement_destroy(p);
			cr_assert_eq(tp_cluster_fingerprint(c), fp);
		} while (rc == TP_ENOMEM);
		cr_assert_eq(rc, i == 2 ? TP_EINFEASIBLE : 0, "request %d: %s", i, tp_err_name(rc));
	}
	/* a whole group fails: its replacement is a new node of the same rack */
	uint32_t failed[4];
	for (int i = 0; i < 4; i++) {
		char nm[64];
		snprintf(nm, sizeof nm, "block0-rack0-node1/%d", i);
		failed[i] = tp_test_dev(t, nm);
	}
	int rc;
	long n = 0;
	tp_placement *p = NULL;
	do {
		tp_test_alloc_fail_at(n++);
		rc = tp_replace(c, "j", failed, 4, &p);
		if (rc == TP_ENOMEM)
			cr_assert_null(p);
	} while (rc == TP_ENOMEM);
	tp_test_alloc_fail_at(-1);
	cr_assert_eq(rc, 0, "%s", tp_placement_errmsg(p));
	n = 0;
	do {
		tp_test_alloc_fail_at(n++);
		rc = tp_commit(c, p, NULL);
		if (rc == TP_ENOMEM)
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "a failed commit changed the cluster");
	} while (rc == TP_ENOMEM);
	tp_test_alloc_fail_at(-1);
	cr_assert_eq(rc, 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	fp = tp_cluster_fingerprint(c);
	cr_assert_eq(tp_place(c, &reqs[0], &p), 0);
	n = 0;
	do {
		tp_test_alloc_fail_at(n++);
		rc = tp_commit(c, p, NULL);
		if (rc == TP_ENOMEM)
			cr_assert_eq(tp_cluster_fingerprint(c), fp, "a failed commit changed the cluster");
	} while (rc == TP_ENOMEM);
	tp_test_alloc_fail_at(-1);
	cr_assert_eq(rc, 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_check(c, NULL, 0), 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- GPU+NIC pairs (request.gpu_nic_pairs) -------------------------------------------------- */

/*
 * A DGX-2-like node type: 4 top PCIe switches, each with 2 leaf switches; each leaf switch has
 * 2 GPUs and 1 NIC (16 GPUs, 8 NICs). GPU g sits behind leaf switch g / 2, NIC k behind leaf k.
 */
static tp_nodetype *dgx2_like(void)
{
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 16, &tp_test_allocator), 0);
	int leaf[8];
	for (int top = 0; top < 4; top++) {
		unsigned t, l0, l1;
		cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, &t), 0);
		cr_assert_eq(tp_nodetype_add_pcie_switch(nt, (int)t, &l0), 0);
		cr_assert_eq(tp_nodetype_add_pcie_switch(nt, (int)t, &l1), 0);
		leaf[2 * top] = (int)l0;
		leaf[2 * top + 1] = (int)l1;
	}
	for (unsigned g = 0; g < 16; g++)
		cr_assert_eq(tp_nodetype_set_gpu_switch(nt, g, leaf[g / 2]), 0);
	for (int k = 0; k < 8; k++) {
		char name[16];
		snprintf(name, sizeof name, "mlx5_%d", k);
		cr_assert_eq(tp_nodetype_add_nic(nt, name, leaf[k], 25.0, NULL), 0);
	}
	return nt;
}

/* Levels rack > node; `nodes` nodes of the DGX-2-like type in rack r0, plus `plain` nodes of 16
 * GPUs without a node type in rack r1. */
static tp_topology *pairs_topology(unsigned nodes, unsigned plain)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	tp_nodetype *nt = dgx2_like();
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	for (unsigned i = 0; i < nodes + plain; i++) {
		char name[16];
		snprintf(name, sizeof name, "n%u", i);
		const char *path[] = {i < nodes ? "r0" : "r1"};
		cr_assert_eq(tp_topology_builder_add_node(b, name, path, 16, i < nodes ? &o : NULL), 0,
		             "%s", tp_topology_builder_errmsg(b));
	}
	tp_nodetype_destroy(nt);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	return t;
}

/* A successful pairs placement: every device has its own NIC, behind the device's switch. */
static void assert_paired(const tp_topology *t, const tp_placement *p)
{
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert(n > 0);
	for (size_t i = 0; i < n; i++) {
		int nic = tp_placement_nic(p, i);
		uint32_t node = tp_topology_device_node(t, d[i]);
		const tp_nodetype *nt = tp_topology_node_type(t, node);
		cr_assert(nic >= 0 && nt, "rank %zu: %s", i, tp_err_name(nic));
		unsigned g = tp_topology_device_index(t, d[i]);
		cr_assert_eq(tp_test_nic_switch(nt, (unsigned)nic), tp_test_gpu_switch(nt, g),
		             "rank %zu: GPU %u with NIC %d of another switch", i, g, nic);
		for (size_t j = 0; j < i; j++)
			cr_assert(tp_topology_device_node(t, d[j]) != node || tp_placement_nic(p, j) != nic,
			          "ranks %zu and %zu share NIC %d", j, i, nic);
	}
	cr_assert_eq(tp_placement_nic(p, n), TP_EINVAL);
}

Test(place, gpu_nic_pairs_take_one_gpu_per_nic)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(2, 0);
	tp_cluster *c = tp_test_cluster(t);
	tp_placement *p = NULL;
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	r.required = "node";
	r.gpu_nic_pairs = 1;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_paired(t, p);
	cr_assert_eq(tp_placement_domain_count(p, 1), 1);
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++) /* one GPU of each leaf switch, its NIC the switch's */
		cr_assert_eq(tp_topology_device_index(t, d[i]) / 2, (unsigned)tp_placement_nic(p, i));
	tp_placement_destroy(p);

	/* 9 pairs never fit one node: 8 NICs */
	r.count = 9;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "request.gpu_nic_pairs 1");
	cr_assert(strstr(tp_placement_errmsg(p), "16 GPUs that can be paired"), "%s",
	          tp_placement_errmsg(p));
	tp_placement_destroy(p);
	/* without pairs the same request fits */
	r.gpu_nic_pairs = 0;
	cr_assert_eq(tp_place(c, &r, &p), 0);
	cr_assert_eq(tp_placement_nic(p, 0), TP_ENOTFOUND, "no pairs asked: no NIC");
	tp_placement_destroy(p);

	/* 16 pairs: 8 on each node; groups of 4 stay whole in a node */
	r.required = NULL;
	r.count = 16;
	r.group_size = 4;
	r.gpu_nic_pairs = 1;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_paired(t, p);
	cr_assert_eq(tp_placement_domain_count(p, 1), 2);
	tp_placement_destroy(p);
	r.count = 20;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "request.gpu_nic_pairs");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, gpu_nic_pairs_busy_fragmented_and_infeasible)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(2, 1);
	tp_cluster *c = tp_test_cluster(t);
	/* node n0: both GPUs of leaf switches 0 and 1 held, and one GPU of each other leaf: the
	 * other six leaves still pair one GPU each (6); node n1: leaves 0..1 fully held (6). */
	uint32_t held[32];
	size_t nh = 0;
	uint32_t f0, f1, cnt;
	cr_assert_eq(tp_topology_domain_devices(t, 1, node_of(t, "n0"), &f0, &cnt), 0);
	cr_assert_eq(tp_topology_domain_devices(t, 1, node_of(t, "n1"), &f1, &cnt), 0);
	for (unsigned g = 0; g < 4; g++)
		held[nh++] = f0 + g;
	for (unsigned g = 4; g < 16; g += 2)
		held[nh++] = f0 + g;
	for (unsigned g = 0; g < 4; g++)
		held[nh++] = f1 + g;
	cr_assert_eq(tp_cluster_assign(c, "j", held, nh, NULL), 0);
	tp_placement *p = NULL;
	tp_request r = TP_REQUEST_INIT;
	r.gpu_nic_pairs = 1;
	r.count = 16;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EBUSY, tp_placement_errmsg(p),
	              "12 matching devices are free");
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.free_total, 12, "pairable free GPUs only (the plain node has none)");
	tp_placement_destroy(p);
	r.count = 8;
	r.required = "node";
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EFRAGMENTED, tp_placement_errmsg(p), "fragmented");
	tp_placement_destroy(p);
	r.count = 6;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_paired(t, p);
	tp_placement_destroy(p);
	/* a topology whose nodes have no NIC can never give pairs */
	tp_topology *plain = pairs_topology(0, 2);
	tp_cluster *c2 = tp_test_cluster(plain);
	r.count = 1;
	r.required = NULL;
	TP_ASSERT_ERR(tp_place(c2, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "0 GPUs that can be paired");
	tp_placement_destroy(p);
	tp_cluster_destroy(c2);
	tp_topology_destroy(plain);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, gpu_nic_pairs_validation_and_versions)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(1, 0);
	tp_cluster *c = tp_test_cluster(t);
	tp_placement *p = NULL;
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.gpu_nic_pairs = 2;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINVAL, tp_placement_errmsg(p),
	              "request.gpu_nic_pairs 2 is not 0 or 1");
	tp_placement_destroy(p);
	r.version = 7;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINVAL, tp_placement_errmsg(p),
	              "request.version 7 is not 1 to 6");
	tp_placement_destroy(p);
	/* a caller built against version 1 passes a shorter struct: nothing past it is read (ASan
	 * checks the exact-size copy), and its placement has no pairs */
	r.version = 1;
	r.gpu_nic_pairs = 1;
	size_t v1 = offsetof(tp_request, gpu_nic_pairs);
	tp_request *old = malloc(v1);
	cr_assert_not_null(old);
	memcpy(old, &r, v1);
	cr_assert_eq(tp_place(c, old, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_placement_nic(p, 0), TP_ENOTFOUND);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = old;
	uint32_t d = tp_test_dev(t, "n0/15");
	cr_assert_eq(tp_cluster_assign(c, "v1", &d, 1, &o), 0, "%s", tp_cluster_errmsg(c));
	free(old);
	/* a shape with a bad flag is refused by assign */
	r.version = TP_REQUEST_VERSION;
	r.gpu_nic_pairs = -1;
	o.shape = &r;
	d = tp_test_dev(t, "n0/14");
	TP_ASSERT_ERR(tp_cluster_assign(c, "bad", &d, 1, &o), TP_EINVAL, tp_cluster_errmsg(c),
	              "shape.gpu_nic_pairs -1 is not 0 or 1");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, gpu_nic_pairs_survive_commit_and_replace)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(2, 0);
	tp_cluster *c = tp_test_cluster(t);
	tp_placement *p = NULL;
	tp_request r = TP_REQUEST_INIT;
	r.id = "pairs";
	r.count = 8;
	r.required = "node";
	r.gpu_nic_pairs = 1;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	uint32_t failed = d[3];
	int lost_nic = tp_placement_nic(p, 3);
	tp_placement_destroy(p);
	/* the job's shape keeps the pairs: the replacement takes the NIC the failed GPU left */
	cr_assert_eq(tp_replace(c, "pairs", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	assert_paired(t, p);
	d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 8);
	cr_assert_neq(d[3], failed);
	cr_assert_eq(tp_placement_nic(p, 3), lost_nic);
	uint32_t fd, rd;
	cr_assert_eq(tp_placement_replaced(p, 0, &fd, &rd), 0);
	cr_assert_eq(fd, failed);
	cr_assert_eq(tp_placement_nic(p, 99), TP_EINVAL);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(place, gpu_nic_pairs_allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(2, 1);
	tp_cluster *c = tp_test_cluster(t);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_request r = TP_REQUEST_INIT;
	r.count = 12;
	r.gpu_nic_pairs = 1;
	for (int pass = 0; pass < 2; pass++) {
		int rc;
		long k = 0;
		tp_placement *p = NULL;
		do {
			tp_test_alloc_fail_at(k++);
			rc = tp_place(c, &r, &p);
			if (rc == TP_ENOMEM)
				cr_assert_null(p);
			else if (rc == 0)
				assert_paired(t, p);
			tp_placement_destroy(p);
			p = NULL;
			cr_assert_eq(tp_cluster_fingerprint(c), fp);
		} while (rc == TP_ENOMEM);
		tp_test_alloc_fail_at(-1);
		cr_assert_eq(rc, pass == 0 ? 0 : TP_EINFEASIBLE, "%s", tp_err_name(rc));
		r.count = 17; /* the failure path counts the pairable GPUs of the topology */
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Place and commit a pairs request of `count` GPUs on one node; its NICs go to nics. */
static void commit_pairs(tp_cluster *c, const tp_topology *t, const char *id, uint32_t count,
                         int *nics)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.count = count;
	r.required = "node";
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s: %s", id, tp_placement_errmsg(p));
	assert_paired(t, p);
	for (uint32_t i = 0; i < count; i++)
		nics[i] = tp_placement_nic(p, i);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
}

/* A pairs request of `count` on the cluster: its code; on success, no NIC in taken[ntaken]. */
static int try_pairs(tp_cluster *c, uint32_t count, const int *taken, size_t ntaken,
                     const char *msg)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = count;
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc == 0) {
		for (uint32_t i = 0; i < count; i++)
			for (size_t k = 0; k < ntaken; k++)
				cr_assert_neq(tp_placement_nic(p, i), taken[k], "rank %u: NIC %d is taken",
				              i, taken[k]);
	} else if (msg) {
		cr_assert(strstr(tp_placement_errmsg(p), msg), "%s", tp_placement_errmsg(p));
	}
	tp_placement_destroy(p);
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	return rc;
}

static bool nic_in(int nic, const int *set, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (set[i] == nic)
			return true;
	return false;
}

Test(place, gpu_nic_pairs_jobs_never_share_a_nic)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(1, 0);
	tp_cluster *c = tp_test_cluster(t);
	/* a job without pairs takes GPUs, never NICs: GPU 0 held, GPU 1 still gets NIC 0 */
	uint32_t g0 = tp_test_dev(t, "n0/0");
	cr_assert_eq(tp_cluster_assign(c, "plain", &g0, 1, NULL), 0);
	cr_assert_eq(try_pairs(c, 8, NULL, 0, NULL), 0);
	cr_assert_eq(tp_cluster_release(c, "plain"), 0);

	int a[4], b[4];
	commit_pairs(c, t, "a", 4, a);
	commit_pairs(c, t, "b", 4, b);
	for (int i = 0; i < 4; i++)
		cr_assert(!nic_in(b[i], a, 4), "jobs a and b share NIC %d", b[i]);
	/* 8 GPUs are free, one per leaf switch, but every NIC is taken */
	cr_assert_eq(try_pairs(c, 1, NULL, 0, "busy: 0 matching devices are free"), TP_EBUSY);
	tp_request r = TP_REQUEST_INIT;
	r.count = 8;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "without pairs the free GPUs fit");
	tp_placement_destroy(p);

	/* release frees the NICs; a rollback takes them again */
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert_eq(try_pairs(c, 4, b, 4, NULL), 0);
	cr_assert_eq(try_pairs(c, 5, NULL, 0, "busy: 4 matching devices are free"), TP_EBUSY);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(try_pairs(c, 1, NULL, 0, "busy"), TP_EBUSY);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert_eq(try_pairs(c, 4, b, 4, NULL), 0);

	/* assign with a pairs shape takes NICs: GPUs of leaves 0..3 (NICs 0..3), then a GPU of
	 * leaf 0 again, which has no NIC left (assign still succeeds) */
	cr_assert_eq(tp_cluster_release(c, "b"), 0);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 4;
	shape.gpu_nic_pairs = 1;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	uint32_t held[4] = {tp_test_dev(t, "n0/0"), tp_test_dev(t, "n0/2"), tp_test_dev(t, "n0/4"), tp_test_dev(t, "n0/6")};
	cr_assert_eq(tp_cluster_assign(c, "asg", held, 4, &o), 0, "%s", tp_cluster_errmsg(c));
	uint32_t g1 = tp_test_dev(t, "n0/1");
	shape.count = 1;
	cr_assert_eq(tp_cluster_assign(c, "late", &g1, 1, &o), 0, "%s", tp_cluster_errmsg(c));
	int low[4] = {0, 1, 2, 3};
	cr_assert_eq(try_pairs(c, 5, NULL, 0, "busy: 4 matching devices are free"), TP_EBUSY);
	cr_assert_eq(try_pairs(c, 4, low, 4, NULL), 0);

	/* replace: a failed GPU of a pairs job is replaced by one whose NIC nobody else has */
	cr_assert_eq(tp_cluster_release(c, "late"), 0);
	int q[3];
	commit_pairs(c, t, "q", 3, q); /* leaves 4..6 */
	for (int i = 0; i < 3; i++)
		cr_assert(!nic_in(q[i], low, 4));
	uint32_t failed = held[1];
	cr_assert_eq(tp_replace(c, "asg", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	for (size_t i = 0; i < n; i++) {
		cr_assert(!nic_in(tp_placement_nic(p, i), q, 3), "rank %zu took job q's NIC", i);
		cr_assert_eq(tp_placement_nic(p, i), tp_topology_device_index(t, d[i]) / 2);
	}
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* NICs held on two nodes leave 2 free on each: 4 pairs fit the cluster but no one node. */
Test(place, gpu_nic_pairs_held_nics_fragment)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(2, 0);
	tp_cluster *c = tp_test_cluster(t);
	int x[6], y[6];
	commit_pairs(c, t, "x", 6, x);
	commit_pairs(c, t, "y", 6, y);
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.required = "node";
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EFRAGMENTED, tp_placement_errmsg(p),
	              "n0: 6 devices in use, 8 GPUs without a free nearest NIC (request.gpu_nic_pairs)");
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.free_total, 4, "20 GPUs are free, 4 of them can get a NIC");
	cr_assert_eq(fit.best, 2);
	tp_placement_destroy(p);
	r.count = 2;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	assert_paired(t, p);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Two GPUs of one leaf switch share its one NIC: whichever pairs job comes first holds it, and
 * the fingerprint tells the two states apart. */
Test(place, gpu_nic_pairs_fingerprint_tells_who_holds_the_nic)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(1, 0);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 1;
	shape.gpu_nic_pairs = 1;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	uint32_t g0 = tp_test_dev(t, "n0/0"), g1 = tp_test_dev(t, "n0/1");
	uint64_t fp[2];
	for (int order = 0; order < 2; order++) {
		tp_cluster *c = tp_test_cluster(t);
		cr_assert_eq(tp_cluster_assign(c, order ? "b" : "a", order ? &g1 : &g0, 1, &o), 0);
		cr_assert_eq(tp_cluster_assign(c, order ? "a" : "b", order ? &g0 : &g1, 1, &o), 0);
		fp[order] = tp_cluster_fingerprint(c);
		/* 7 leaf switches still have a free NIC */
		cr_assert_eq(try_pairs(c, 8, NULL, 0, "busy: 7 matching devices are free"), TP_EBUSY);
		tp_cluster_destroy(c);
	}
	cr_assert_neq(fp[0], fp[1]);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Committing a pairs placement and assigning a pairs shape allocate the job's NICs: every
 * failure is TP_ENOMEM and leaves the cluster as it was. */
Test(place, gpu_nic_pairs_commit_allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t = pairs_topology(2, 0);
	tp_cluster *c = tp_test_cluster(t);
	tp_request r = TP_REQUEST_INIT;
	r.id = "p";
	r.count = 12;
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	uint64_t fp = tp_cluster_fingerprint(c);
	int rc;
	long k = 0;
	do {
		tp_test_alloc_fail_at(k++);
		rc = tp_commit(c, p, NULL);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert_eq(tp_cluster_fingerprint(c), fp);
	} while (rc == TP_ENOMEM);
	cr_assert_eq(rc, 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	cr_assert_eq(try_pairs(c, 5, NULL, 0, "busy: 4 matching devices are free"), TP_EBUSY);
	cr_assert_eq(tp_cluster_release(c, "p"), 0);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.gpu_nic_pairs = 1;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	uint32_t held[2] = {tp_test_dev(t, "n0/0"), tp_test_dev(t, "n1/3")};
	fp = tp_cluster_fingerprint(c);
	k = 0;
	do {
		tp_test_alloc_fail_at(k++);
		rc = tp_cluster_assign(c, "s", held, 2, &o);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert_eq(tp_cluster_fingerprint(c), fp);
	} while (rc == TP_ENOMEM);
	cr_assert_eq(rc, 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(try_pairs(c, 15, NULL, 0, "busy: 14 matching devices are free"), TP_EBUSY);
	/* a replacement (a rebind) allocates them again */
	uint32_t failed = held[0];
	cr_assert_eq(tp_replace(c, "s", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	fp = tp_cluster_fingerprint(c);
	k = 0;
	do {
		tp_test_alloc_fail_at(k++);
		rc = tp_commit(c, p, NULL);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert_eq(tp_cluster_fingerprint(c), fp);
	} while (rc == TP_ENOMEM);
	cr_assert_eq(rc, 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(p);
	cr_assert_eq(try_pairs(c, 15, NULL, 0, "busy: 14 matching devices are free"), TP_EBUSY);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/*
 * Property test against an oracle that needs no matching: on the DGX-2-like type (one NIC per
 * leaf switch of two GPUs), a node can pair exactly as many GPUs as it has leaf switches with a
 * free GPU and a NIC no running pairs job holds. Random occupancy of 3 nodes (2 in rack r0, 1
 * in r1) by a job without pairs and a pairs job (which takes the NIC of every leaf it is on),
 * and random requests (count, groups, required node / rack / none): the outcome, free_total
 * and the pairing must agree.
 */
Test(place, gpu_nic_pairs_property_against_leaf_oracle)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	{
		const char *levels[] = {"rack", "node"};
		tp_topology_builder *b = NULL;
		cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
		tp_nodetype *nt = dgx2_like();
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.type = nt;
		const char *r0[] = {"r0"}, *r1[] = {"r1"};
		cr_assert_eq(tp_topology_builder_add_node(b, "n0", r0, 16, &o), 0);
		cr_assert_eq(tp_topology_builder_add_node(b, "n1", r0, 16, &o), 0);
		cr_assert_eq(tp_topology_builder_add_node(b, "n2", r1, 16, &o), 0);
		tp_nodetype_destroy(nt);
		cr_assert_eq(tp_topology_build(b, &t), 0);
		tp_topology_builder_destroy(b);
	}
	uint64_t seed = 42;
	for (int round = 0; round < 150; round++) {
		tp_cluster *c = tp_test_cluster(t);
		uint32_t held[48];
		size_t nh = 0;
		unsigned pct = tp_test_below(&seed, 90);
		for (uint32_t d = 0; d < 48; d++)
			if (tp_test_below(&seed, 100) < pct)
				held[nh++] = d;
		if (nh)
			cr_assert_eq(tp_cluster_assign(c, "busy", held, nh, NULL), 0);
		/* a running pairs job on some free GPUs: it takes the NIC of each leaf it is on */
		bool nic_taken[3][8] = {{false}};
		uint32_t pj[48];
		size_t npj = 0;
		for (uint32_t d = 0; d < 48; d++)
			if (tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE &&
			    tp_test_below(&seed, 100) < 15) {
				pj[npj++] = d;
				nic_taken[d / 16][d % 16 / 2] = true;
			}
		if (npj) {
			tp_request shape = TP_REQUEST_INIT;
			shape.count = (uint32_t)npj;
			shape.gpu_nic_pairs = 1;
			tp_job_options o = TP_JOB_OPTIONS_INIT;
			o.shape = &shape;
			cr_assert_eq(tp_cluster_assign(c, "pairs", pj, npj, &o), 0);
		}
		/* the oracle: pairable GPUs per node = leaves with a free GPU and a free NIC */
		unsigned per_node[3] = {0, 0, 0}, per_rack[2] = {0, 0}, total = 0;
		for (uint32_t n = 0; n < 3; n++) {
			for (uint32_t leaf = 0; leaf < 8; leaf++) {
				uint32_t d0 = 16 * n + 2 * leaf;
				per_node[n] += !nic_taken[n][leaf] &&
				               (tp_cluster_device_state(c, d0, NULL) == TP_DEVICE_FREE ||
				                tp_cluster_device_state(c, d0 + 1, NULL) == TP_DEVICE_FREE);
			}
			per_rack[n < 2 ? 0 : 1] += per_node[n];
			total += per_node[n];
		}
		static const char *const req_levels[] = {NULL, "node", "rack"};
		tp_request r = TP_REQUEST_INIT;
		r.gpu_nic_pairs = 1;
		r.required = req_levels[tp_test_below(&seed, 3)];
		r.group_size = tp_test_below(&seed, 2) ? 2 : 1;
		r.count = r.group_size * (1 + tp_test_below(&seed, 12));
		unsigned best = 0, cap = 0; /* what one domain of the required level takes now, empty */
		if (r.required && r.required[0] == 'n') {
			for (int n = 0; n < 3; n++)
				best = per_node[n] > best ? per_node[n] : best;
			cap = 8;
		} else if (r.required) {
			best = per_rack[0] > per_rack[1] ? per_rack[0] : per_rack[1];
			cap = 16;
		} else {
			unsigned sum = 0; /* groups of 2 lie in one node: whole pairs per node */
			for (int n = 0; n < 3; n++)
				sum += per_node[n] - per_node[n] % r.group_size;
			best = sum;
			cap = 24;
		}
		if (r.required && r.required[0] == 'r' && r.group_size == 2) {
			/* groups of 2 lie in one node: whole pairs per node of the rack */
			unsigned a = per_node[0] - per_node[0] % 2 + per_node[1] - per_node[1] % 2;
			unsigned b2 = per_node[2] - per_node[2] % 2;
			best = a > b2 ? a : b2;
		}
		tp_placement *p = NULL;
		int rc = tp_place(c, &r, &p);
		int want = r.count > cap ? TP_EINFEASIBLE
		           : r.count <= best ? 0
		           : total < r.count ? TP_EBUSY : TP_EFRAGMENTED;
		cr_assert_eq(rc, want, "round %d: count %u group %u required %s, nodes %u/%u/%u: got %s "
		             "(%s), want %s", round, r.count, r.group_size,
		             r.required ? r.required : "-", per_node[0], per_node[1], per_node[2],
		             tp_err_name(rc), tp_placement_errmsg(p), tp_err_name(want));
		if (rc == 0) {
			size_t n;
			const uint32_t *pd = tp_placement_devices(p, &n);
			cr_assert_eq(n, r.count);
			assert_paired(t, p);
			for (size_t i = 0; i < n; i++)
				cr_assert(!nic_taken[pd[i] / 16][tp_placement_nic(p, i)],
				          "round %d: rank %zu got a NIC the pairs job holds", round, i);
		} else if (rc == TP_EBUSY || rc == TP_EFRAGMENTED) {
			tp_fit fit = TP_FIT_INIT;
			cr_assert_eq(tp_placement_fit(p, &fit), 0);
			cr_assert_eq(fit.free_total, total, "round %d", round);
		}
		tp_placement_destroy(p);
		tp_cluster_destroy(c);
	}
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- replacements keep the job's shape (fuzz_api findings 9 to 12) --------------------------- */

static tp_topology *two_level(const char *const *names, const char *const *racks,
                              const unsigned *gpus, size_t n)
{
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	for (size_t i = 0; i < n; i++) {
		const char *path[] = {racks[i]};
		cr_assert_eq(tp_topology_builder_add_node(b, names[i], path, gpus[i], NULL), 0);
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0);
	tp_topology_builder_destroy(b);
	return t;
}

/* A devices cap of 1 per rack: the replacement may not join the job's healthy device's rack
 * (before: it was put on n0/1, two devices in rack r0). */
Test(place, replace_keeps_a_rack_cap_of_the_shape)
{
	tp_test_alloc_reset();
	const char *names[] = {"n0", "n2", "n1"}, *racks[] = {"r0", "r0", "r1"};
	const unsigned gpus[] = {2, 4, 2};
	tp_topology *t = two_level(names, racks, gpus, 3);
	tp_cluster *c = tp_test_cluster(t);
	tp_domain_cap cap = {"rack", 1, 0};
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.caps = &cap;
	shape.ncaps = 1;
	uint32_t devs[] = {tp_test_dev(t, "n0/0"), tp_test_dev(t, "n1/0")}, cord = tp_test_dev(t, "n1/1");
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	cr_assert_eq(tp_cluster_assign(c, "j", devs, 2, &o), 0);
	cr_assert_eq(tp_cluster_set_cordoned(c, &cord, 1, 1), 0);
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_replace(c, "j", &devs[1], 1, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "infeasible");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_set_cordoned(c, &cord, 1, 0), 0);
	cr_assert_eq(tp_replace(c, "j", &devs[1], 1, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *got = tp_placement_devices(p, &n);
	cr_assert_eq(got[1], cord, "the only device of rack r1 left");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Every rank failed: the replacements must still sit in one domain of the required level
 * (before: they were spread over two nodes). */
Test(place, replace_of_every_rank_keeps_required)
{
	tp_test_alloc_reset();
	const char *names[] = {"n7", "n0", "n6"}, *racks[] = {"r0", "r0", "r0"};
	const unsigned gpus[] = {4, 1, 1};
	tp_topology *t = two_level(names, racks, gpus, 3);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.required = "node";
	uint32_t devs[] = {tp_test_dev(t, "n7/0"), tp_test_dev(t, "n7/2")}, down = tp_test_dev(t, "n7/1");
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	cr_assert_eq(tp_cluster_assign(c, "j", devs, 2, &o), 0);
	cr_assert_eq(tp_cluster_set_down(c, &down, 1, 1), 0);
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_replace(c, "j", devs, 2, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "one node could take at most 1");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_set_down(c, &down, 1, 0), 0);
	cr_assert_eq(tp_replace(c, "j", devs, 2, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *got = tp_placement_devices(p, &n);
	cr_assert_eq(tp_topology_device_node(t, got[0]), node_of(t, "n7"));
	cr_assert_eq(tp_topology_device_node(t, got[1]), node_of(t, "n7"));
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* A spread over nodes: a replacement that would bring the job down to one node is refused
 * (before: it was accepted, breaking the spread). */
Test(place, replace_keeps_a_tree_spread)
{
	tp_test_alloc_reset();
	const char *names[] = {"a", "b"}, *racks[] = {"r0", "r0"};
	const unsigned gpus[] = {2, 1};
	tp_topology *t = two_level(names, racks, gpus, 2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 2;
	shape.spread_level = "node";
	shape.spread_min_domains = 2;
	uint32_t devs[] = {tp_test_dev(t, "a/0"), tp_test_dev(t, "b/0")};
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	cr_assert_eq(tp_cluster_assign(c, "j", devs, 2, &o), 0);
	tp_placement *p = NULL;
	TP_ASSERT_ERR(tp_replace(c, "j", &devs[1], 1, &p), TP_EFRAGMENTED, tp_placement_errmsg(p),
	              "would leave job 'j' on 1 domains of node, below its spread of 2");
	tp_fit fit = TP_FIT_INIT;
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 1);
	cr_assert_geq(fit.free_total, fit.needed);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- issue #19: crashes and wrong answers found by fuzzing ---------------------------------- */

/* An allocator that refuses any single block over 64 MB: a table sized by a huge spread
 * minimum would show as TP_ENOMEM instead of an answer. */
static void *capped_malloc(void *ud, size_t n)
{
	(void)ud;
	return n > ((size_t)64 << 20) ? NULL : malloc(n);
}

static void *capped_calloc(void *ud, size_t m, size_t n)
{
	(void)ud;
	return n && m > ((size_t)64 << 20) / n ? NULL : calloc(m, n);
}

static void *capped_realloc(void *ud, void *ptr, size_t n)
{
	(void)ud;
	return n > ((size_t)64 << 20) ? NULL : realloc(ptr, n);
}

static void capped_free(void *ud, void *ptr)
{
	(void)ud;
	free(ptr);
}

static const tp_allocator capped = {capped_malloc, capped_calloc, capped_realloc, capped_free,
                                    NULL};

/* #19 items 1 and 2: spread.min_domains 2^32 - 1 crashed tp_place (S + 1 wrapped to 0) and
 * 10^6 .. 10^8 allocated gigabytes; a spread over more domains than the request has devices
 * for, or than the level has, is infeasible before anything is sized by it. */
Test(place, spread_larger_than_the_request_is_infeasible_at_once)
{
	static const struct nspec ns[] = {
	    {"n0", "r0", NULL, 4}, {"n1", "r0", NULL, 4}, {"n2", "r1", NULL, 4}, {"n3", "r1", NULL, 4},
	};
	const char *levels[] = {"rack", "node"};
	tp_topology *t = build(levels, 2, ns, 4);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &capped), 0);
	static const struct {
		uint32_t count, min;
		const char *msg;
	} cases[] = {
	    {4, 4294967295u, "request.spread.min_domains 4294967295 needs at least 4294967295 "
	                     "devices (1 in each rack), the request has 4"},
	    {4, 1000000, "request.spread.min_domains 1000000 needs at least 1000000 devices"},
	    {4, 100000000, "request.spread.min_domains 100000000 needs at least 100000000 devices"},
	    {8, 3, "request.spread.min_domains 3 is more than the 2 domains of rack"},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		tp_request r = TP_REQUEST_INIT;
		r.count = cases[i].count;
		r.spread_level = "rack";
		r.spread_min_domains = cases[i].min;
		tp_placement *p = NULL;
		TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
		              cases[i].msg);
		tp_plan *plan = NULL;
		/* tp_defrag_plan crashed on the same request: it now gets tp_place's answer */
		TP_ASSERT_ERR(tp_defrag_plan(c, &r, NULL, &plan), TP_EINFEASIBLE, tp_plan_errmsg(plan),
		              cases[i].msg);
		tp_plan_destroy(plan);
		tp_fit fit = TP_FIT_INIT;
		cr_assert_eq(tp_placement_fit(p, &fit), 0);
		cr_assert_eq(fit.needed, cases[i].count);
		cr_assert_eq(fit.free_total, 16);
		tp_placement_destroy(p);
	}
	/* a spread the request can meet is still placed, on that many racks */
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.spread_level = "rack";
	r.spread_min_domains = 2;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_eq(used(p, 0), 2);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
}

/* #19 item 4: with a failure-domain cap and more than 16 nodes (past the exact search), the
 * greedy fill ignored a tree spread. Here the tree answer (the three tightest racks) breaks the
 * power cap (5 devices in p, cap 4), so the greedy runs: it used to fill the first node (4 + 1
 * devices: two racks); it now takes one device per rack until the spread is met.
 * And the fuzzer's 1-device request with a spread of 2 is infeasible. */
Test(place, failure_domain_fill_keeps_a_tree_spread)
{
	tp_test_alloc_reset();
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 2, &tp_test_allocator), 0);
	for (unsigned i = 0; i < 17; i++) {
		char node[8], rack[8];
		snprintf(node, sizeof node, "n%u", i);
		snprintf(rack, sizeof rack, "r%u", i);
		const char *path[] = {rack};
		cr_assert_eq(tp_topology_builder_add_node(b, node, path, 4, NULL), 0);
	}
	const char *in_power[] = {"n5", "n6", "n7"};
	for (unsigned i = 0; i < 3; i++)
		cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "p", in_power[i], -1),
		             0, "%s", tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	tp_cluster *c = tp_test_cluster(t);
	uint32_t held[6];
	for (unsigned i = 0; i < 6; i++) {
		char dev[16];
		snprintf(dev, sizeof dev, "%s/%u", in_power[i / 2], i % 2);
		held[i] = tp_test_dev(t, dev);
	}
	cr_assert_eq(tp_cluster_assign(c, "old", held, 6, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_domain_cap cap = {"power", 4, 0};
	tp_request r = TP_REQUEST_INIT;
	r.count = 5;
	r.caps = &cap;
	r.ncaps = 1;
	r.spread_level = "rack";
	r.spread_min_domains = 3;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	cr_assert_geq(used(p, 0), 3, "the spread: three racks, not %u", used(p, 0));
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	unsigned in_p = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t node = tp_topology_device_node(t, devs[i]);
		for (unsigned x = 0; x < 3; x++)
			in_p += node == node_of(t, in_power[x]);
	}
	cr_assert_leq(in_p, 4, "the power cap");
	tp_placement_destroy(p);
	r.count = 1;
	r.spread_min_domains = 2;
	cap.devices = 6;
	TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINFEASIBLE, tp_placement_errmsg(p),
	              "request.spread.min_domains 2 needs at least 2 devices");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* #19 item 5: the replacement of a rank whose group level (su) is above the shape's required
 * level (node) went to another node; the group lies inside the required node, so must its
 * replacement. */
Test(place, replace_keeps_required_below_the_group_level)
{
	tp_test_alloc_reset();
	const char *levels[] = {"su", "node"};
	static const struct nspec ns[] = {{"su0-node0", "su0", NULL, 8}, {"su0-node1", "su0", NULL, 8}};
	tp_topology *t = build(levels, 2, ns, 2);
	tp_cluster *c = tp_test_cluster(t);
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 6;
	shape.group_size = 3;
	shape.group_level = "su";
	shape.required = "node";
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	uint32_t devs[6];
	for (unsigned i = 0; i < 6; i++)
		devs[i] = i;
	cr_assert_eq(tp_cluster_assign(c, "j", devs, 6, &o), 0, "%s", tp_cluster_errmsg(c));
	uint32_t cordon[] = {tp_test_dev(t, "su0-node0/6"), tp_test_dev(t, "su0-node0/7")};
	cr_assert_eq(tp_cluster_set_cordoned(c, cordon, 2, 1), 0);
	uint32_t failed = tp_test_dev(t, "su0-node0/2");
	tp_placement *p = NULL;
	int rc = tp_replace(c, "j", &failed, 1, &p);
	cr_assert(rc == TP_EINFEASIBLE || rc == TP_EBUSY || rc == TP_EFRAGMENTED,
	          "not placeable, got %s: %s", tp_err_name(rc), tp_placement_errmsg(p));
	cr_assert_eq(tp_placement_status(p), rc);
	tp_placement_destroy(p);
	/* with a free device on the job's node, the replacement stays on it */
	cr_assert_eq(tp_cluster_set_cordoned(c, cordon, 1, 0), 0);
	cr_assert_eq(tp_replace(c, "j", &failed, 1, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *got = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(tp_topology_device_node(t, got[i]), node_of(t, "su0-node0"));
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
