/* SPDX-License-Identifier: MIT */
/*
 * Allocation-failure loops over the public calls that allocate and that the module suites do
 * not already walk (test_cluster.c, test_topology.c, test_frag.c, test_cost.c, test_place.c,
 * test_defrag.c, test_hwloc.c and test_slurm.c cover the rest): for n = 0, 1, 2, ... fail
 * allocation n; each failure must return TP_ENOMEM, leak nothing and leave its object usable
 * and unchanged, until the call succeeds.
 */
#include <stdio.h>

#include "testutil.h"

/* Blocks held before a call; a failed call must give them all back. */
#define LIVE() (tp_test_alloc_state.live)

/* ---- constructors ------------------------------------------------------------------------- */

Test(alloc_failures, builder_create)
{
	const char *levels[] = {"block", "rack", "node"};
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology_builder *b = (tp_topology_builder *)&n; /* must be overwritten or kept */
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_builder_create(&b, levels, 3, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			cr_assert_not_null(b);
			tp_topology_builder_destroy(b);
			TP_ASSERT_NO_LEAKS();
			cr_assert_geq(n, 1, "the builder allocates");
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		TP_ASSERT_NO_LEAKS();
	}
}

Test(alloc_failures, nodetype_create)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_nodetype_create(&nt, 8, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			cr_assert_eq(tp_nodetype_gpu_count(nt), 8);
			tp_nodetype_destroy(nt);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		cr_assert_null(nt);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(alloc_failures, generate_nvl72)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology *t = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			cr_assert_eq(tp_topology_device_count(t), 144);
			cr_assert_eq(tp_topology_domain_nvswitch_count(t, 1, 0), 9);
			tp_topology_destroy(t);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld: %s", n, tp_err_name(rc));
		cr_assert_null(t);
		TP_ASSERT_NO_LEAKS();
	}
}

/* ---- node types ---------------------------------------------------------------------------- */

struct nt_shape {
	unsigned sw, nic, nvs;
	double link01;
};

static struct nt_shape nt_shape_of(const tp_nodetype *nt)
{
	return (struct nt_shape){tp_nodetype_pcie_switch_count(nt), tp_nodetype_nic_count(nt),
	                         tp_nodetype_nvswitch_count(nt), tp_nodetype_nvlink_gbps(nt, 0, 1)};
}

/* A node type with one switch, one NIC and no NVLink yet. */
static tp_nodetype *small_nodetype(void)
{
	tp_nodetype *nt = NULL;
	cr_assert_eq(tp_nodetype_create(&nt, 4, &tp_test_allocator), 0);
	cr_assert_eq(tp_nodetype_add_pcie_switch(nt, -1, NULL), 0);
	cr_assert_eq(tp_nodetype_set_gpu_switch(nt, 0, 0), 0);
	cr_assert_eq(tp_nodetype_add_nic(nt, "mlx5_0", 0, 50, NULL), 0);
	return nt;
}

enum nt_call { NT_SWITCH, NT_NIC, NT_NVSWITCH, NT_NVLINK, NT_GPU_SWITCH };

static int nt_call(tp_nodetype *nt, enum nt_call k)
{
	unsigned id;
	switch (k) {
	case NT_SWITCH: return tp_nodetype_add_pcie_switch(nt, 0, &id);
	case NT_NIC: return tp_nodetype_add_nic(nt, "mlx5_1", -1, 25, &id);
	case NT_NVSWITCH: return tp_nodetype_add_nvswitch(nt, "nvs0", &id);
	case NT_NVLINK: return tp_nodetype_set_nvlink(nt, 0, 1, 450);
	default: return tp_nodetype_set_gpu_switch(nt, 1, 0);
	}
}

/* Fail each allocation of one node-type call in turn: the node type keeps its counts and still
 * takes the call afterwards. Also run it a number of times so that arrays must grow. */
static void nodetype_loop(enum nt_call k)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_nodetype *nt = small_nodetype();
		for (int i = 0; i < 3 && k != NT_NVLINK && k != NT_GPU_SWITCH; i++)
			cr_assert_eq(nt_call(nt, k), 0, "warm-up call %d", i);
		struct nt_shape before = nt_shape_of(nt);
		long live = LIVE();
		tp_test_alloc_fail_at(n);
		int rc = nt_call(nt, k);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			tp_nodetype_destroy(nt);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		TP_ASSERT_ERR(rc, TP_ENOMEM, tp_nodetype_errmsg(nt), "out of memory");
		struct nt_shape after = nt_shape_of(nt);
		cr_assert(before.sw == after.sw && before.nic == after.nic && before.nvs == after.nvs &&
		              before.link01 == after.link01,
		          "allocation %ld: a failed call changed the node type", n);
		cr_assert_leq(LIVE(), live, "allocation %ld: a failed call kept memory", n);
		cr_assert_eq(nt_call(nt, k), 0, "the node type is still usable");
		tp_nodetype_destroy(nt);
		TP_ASSERT_NO_LEAKS();
	}
}

Test(alloc_failures, nodetype_add_pcie_switch) { nodetype_loop(NT_SWITCH); }
Test(alloc_failures, nodetype_add_nic) { nodetype_loop(NT_NIC); }
Test(alloc_failures, nodetype_add_nvswitch) { nodetype_loop(NT_NVSWITCH); }
Test(alloc_failures, nodetype_set_nvlink) { nodetype_loop(NT_NVLINK); }
Test(alloc_failures, nodetype_set_gpu_switch) { nodetype_loop(NT_GPU_SWITCH); }

/* ---- builder calls not walked elsewhere ----------------------------------------------------- */

static tp_topology_builder *two_racks(void)
{
	const char *levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 3, &tp_test_allocator), 0);
	const char *p0[] = {"b0", "r0"}, *p1[] = {"b0", "r1"};
	cr_assert_eq(tp_topology_builder_add_node(b, "x0", p0, 4, NULL), 0);
	cr_assert_eq(tp_topology_builder_add_node(b, "x1", p1, 4, NULL), 0);
	return b;
}

/* What a builder holds, as the topology it builds says. */
struct built {
	uint32_t nodes, devices;
	unsigned nvs_r0, nvs_r1;
	bool typed;
};

static struct built built_of(tp_topology_builder *b)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "the builder still builds: %s",
	             tp_topology_builder_errmsg(b));
	uint32_t x2;
	bool typed = tp_topology_node_by_name(t, "x2", &x2) == 0 && tp_topology_node_type(t, x2);
	struct built r = {tp_topology_node_count(t), tp_topology_device_count(t),
	                  tp_topology_domain_nvswitch_count(t, 1, 0),
	                  tp_topology_domain_nvswitch_count(t, 1, 1), typed};
	tp_topology_destroy(t);
	return r;
}

static bool built_eq(struct built a, struct built b)
{
	return a.nodes == b.nodes && a.devices == b.devices && a.nvs_r0 == b.nvs_r0 &&
	       a.nvs_r1 == b.nvs_r1 && a.typed == b.typed;
}

enum b_call { B_NVSWITCH, B_TYPED_NODE, B_FABRIC };

static int b_call(tp_topology_builder *b, enum b_call k, const tp_nodetype *nt, int i)
{
	char name[16];
	switch (k) {
	case B_NVSWITCH: {
		const char *path[] = {"b0", i % 2 ? "r1" : "r0"};
		snprintf(name, sizeof name, "tray%d", i);
		return tp_topology_builder_add_nvswitch(b, 1, path, name);
	}
	case B_TYPED_NODE: {
		const char *path[] = {"b1", "r0"};
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.type = nt;
		o.model = "H100";
		snprintf(name, sizeof name, i ? "y%d" : "x2", i);
		return tp_topology_builder_add_node(b, name, path, 4, &o);
	}
	default:
		return tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900, 3.4);
	}
}

static void builder_loop(enum b_call k, int warm, long slack)
{
	for (long n = 0;; n++) {
		tp_test_alloc_reset();
		tp_topology_builder *b = two_racks();
		tp_nodetype *nt = small_nodetype();
		for (int i = 1; i <= warm; i++)
			cr_assert_eq(b_call(b, k, nt, i), 0, "warm-up %d: %s", i,
			             tp_topology_builder_errmsg(b));
		struct built before = built_of(b);
		long live = LIVE();
		tp_test_alloc_fail_at(n);
		int rc = b_call(b, k, nt, 0);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			struct built after = built_of(b);
			cr_assert(!built_eq(before, after) || k == B_FABRIC, "the call changed nothing");
			tp_nodetype_destroy(nt);
			tp_topology_builder_destroy(b);
			TP_ASSERT_NO_LEAKS();
			break;
		}
		TP_ASSERT_ERR(rc, TP_ENOMEM, tp_topology_builder_errmsg(b), "out of memory");
		cr_assert_leq(LIVE(), live + slack,
		              "allocation %ld: only capacity may stay (%ld blocks more)", n,
		              LIVE() - live);
		cr_assert(built_eq(before, built_of(b)), "allocation %ld: the builder changed", n);
		cr_assert_eq(b_call(b, k, nt, 0), 0, "the builder is still usable: %s",
		             tp_topology_builder_errmsg(b));
		tp_nodetype_destroy(nt);
		tp_topology_builder_destroy(b);
		TP_ASSERT_NO_LEAKS();
	}
}

/* Growing the builder's arrays (nodes, prefixes, the name pool) before the first change is
 * allowed to stay behind a failed call: at most this many blocks. */
#define CAPACITY_SLACK 8

Test(alloc_failures, builder_add_nvswitch) { builder_loop(B_NVSWITCH, 0, CAPACITY_SLACK); }
Test(alloc_failures, builder_add_nvswitch_grows) { builder_loop(B_NVSWITCH, 5, CAPACITY_SLACK); }
Test(alloc_failures, builder_add_node_with_type) { builder_loop(B_TYPED_NODE, 0, 64); }
Test(alloc_failures, builder_add_node_with_type_again) { builder_loop(B_TYPED_NODE, 3, 64); }
Test(alloc_failures, builder_set_fabric) { builder_loop(B_FABRIC, 0, 0); }

/* A failed add_node must not keep what it interned for the node (its model and a copy of its
 * node type). This test found a version that copied the type before an allocation that could
 * still fail, leaving 8 blocks in the builder until it was destroyed. */
Test(alloc_failures, builder_add_node_with_type_keeps_nothing)
{
	builder_loop(B_TYPED_NODE, 0, 2);
}

/* ---- cluster calls not walked elsewhere ----------------------------------------------------- */

static tp_topology *hgx(void)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_hgx(&t, 2, 2, &tp_test_allocator), 0);
	return t;
}

static void consistent(const tp_cluster *c)
{
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

/* Run `call` with allocation n failing, n = 0, 1, ...: each failure is ENOMEM with a message,
 * the fingerprint and the check hold, nothing is kept; adds the failures seen to `fails`. */
#define CLUSTER_LOOP(c, call, fails)                                                           \
	do {                                                                                       \
		for (long n__ = 0;; n__++) {                                                           \
			uint64_t fp__ = tp_cluster_fingerprint(c);                                         \
			long live__ = LIVE();                                                              \
			tp_test_alloc_fail_at(n__);                                                        \
			int rc__ = (call);                                                                 \
			tp_test_alloc_fail_at(-1);                                                         \
			if (rc__ == 0)                                                                     \
				break;                                                                         \
			TP_ASSERT_ERR(rc__, TP_ENOMEM, tp_cluster_errmsg(c), "out of memory");             \
			cr_assert_eq(tp_cluster_fingerprint(c), fp__, "allocation %ld changed the state", \
			             n__);                                                                 \
			cr_assert_leq(LIVE(), live__ + 2, "allocation %ld: only capacity may stay", n__);  \
			consistent(c);                                                                     \
			(fails)++;                                                                         \
		}                                                                                      \
		consistent(c);                                                                         \
	} while (0)

/* Cordoning logs every change under a savepoint; the log must grow without losing a change. */
Test(alloc_failures, set_cordoned_under_a_savepoint)
{
	tp_test_alloc_reset();
	tp_topology *t = hgx();
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	uint64_t fp0 = tp_cluster_fingerprint(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	long fails = 0;
	for (uint32_t round = 0; round < 4; round++) {
		uint32_t devs[8];
		for (uint32_t i = 0; i < 8; i++)
			devs[i] = round * 8 + i;
		CLUSTER_LOOP(c, tp_cluster_set_cordoned(c, devs, 8, 1), fails);
		cr_assert_eq(tp_cluster_cordoned_total_count(c), 8 * (round + 1));
	}
	cr_assert_geq(fails, 1, "the undo log grew at least once");
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp0, "rollback restores the empty cluster");
	cr_assert_eq(tp_cluster_cordoned_total_count(c), 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* tp_commit with options that carry a shape (deep-copied), under a savepoint. */
Test(alloc_failures, commit_with_options_and_shape)
{
	tp_test_alloc_reset();
	tp_topology *t = hgx();
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	tp_slice sl[] = {{"node", 4}};
	tp_request r = TP_REQUEST_INIT;
	r.id = "train";
	r.count = 8;
	r.slices = sl;
	r.nslices = 1;
	r.required = "su";
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", p ? tp_placement_errmsg(p) : "no result");
	tp_request shape = r;
	shape.tenant = "research";
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.tenant = "research";
	o.migratable = 1;
	o.shape = &shape;
	long fails = 0;
	CLUSTER_LOOP(c, tp_commit(c, p, &o), fails);
	cr_assert_geq(fails, 2, "the job block and the shape were failed");
	tp_job_options back = {.version = TP_JOB_OPTIONS_VERSION};
	cr_assert_eq(tp_cluster_job_options(c, "train", &back), 0);
	cr_assert_str_eq(back.tenant, "research");
	cr_assert(back.shape && back.shape->count == 8 && back.shape->nslices == 1);
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_job_count(c), 0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* tp_commit of a replacement swaps devices in place (a rebind), logged under a savepoint. */
Test(alloc_failures, commit_of_a_replacement)
{
	tp_test_alloc_reset();
	tp_topology *t = hgx();
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	uint32_t devs[] = {0, 1, 2, 3};
	cr_assert_eq(tp_cluster_assign(c, "a", devs, 4, NULL), 0);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	uint32_t failed = 2;
	cr_assert_eq(tp_cluster_set_down(c, &failed, 1, 1), 0);
	tp_placement *p = NULL;
	cr_assert_eq(tp_replace(c, "a", &failed, 1, &p), 0, "%s",
	             p ? tp_placement_errmsg(p) : "no result");
	long fails = 0;
	CLUSTER_LOOP(c, tp_commit(c, p, NULL), fails);
	cr_assert_geq(fails, 1, "the undo log or the new device list was failed");
	const uint32_t *now;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "a", &now, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_neq(now[2], 2u, "the failed device was replaced");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_job_devices(c, "a", &now, &n), 0);
	cr_assert_eq(now[2], 2u, "rollback restores the job's devices");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* GPU+NIC pairs on HGX nodes (one NIC per PCIe switch): tp_place with pairs, and tp_replace of
 * a job whose shape asks for pairs (its healthy GPUs keep their NICs), under every failure. */
Test(alloc_failures, place_and_replace_with_gpu_nic_pairs)
{
	tp_test_alloc_reset();
	tp_topology *t = hgx();
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	tp_request r = TP_REQUEST_INIT;
	r.id = "pairs";
	r.count = 4;
	r.required = "node";
	r.gpu_nic_pairs = 1;
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_placement *p = NULL;
	int rc;
	for (long n = 0;; n++) {
		long live = LIVE();
		tp_test_alloc_fail_at(n);
		rc = tp_place(c, &r, &p);
		tp_test_alloc_fail_at(-1);
		if (rc != TP_ENOMEM)
			break;
		cr_assert_null(p);
		cr_assert_eq(LIVE(), live, "allocation %ld: a failed tp_place leaked", n);
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
	}
	cr_assert_eq(rc, 0, "%s", tp_placement_errmsg(p));
	for (size_t i = 0; i < 4; i++)
		cr_assert_geq(tp_placement_nic(p, i), 0);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	size_t nd;
	uint32_t failed = tp_placement_devices(p, &nd)[1];
	int nic = tp_placement_nic(p, 1);
	tp_placement_destroy(p);
	p = NULL;
	fp = tp_cluster_fingerprint(c);
	for (long n = 0;; n++) {
		long live = LIVE();
		tp_test_alloc_fail_at(n);
		rc = tp_replace(c, "pairs", &failed, 1, &p);
		tp_test_alloc_fail_at(-1);
		if (rc != TP_ENOMEM)
			break;
		cr_assert_null(p);
		cr_assert_eq(LIVE(), live, "allocation %ld: a failed tp_replace leaked", n);
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
	}
	cr_assert_eq(rc, 0, "%s", tp_placement_errmsg(p));
	/* HGX: one GPU per switch and NIC, so the replacement brings its own NIC */
	const uint32_t *d = tp_placement_devices(p, &nd);
	cr_assert_neq(d[1], failed);
	cr_assert_geq(tp_placement_nic(p, 1), 0);
	cr_assert_neq(tp_placement_nic(p, 1), nic);
	for (size_t i = 0; i < nd; i++)
		for (size_t j = 0; j < i; j++)
			cr_assert(tp_topology_device_node(t, d[i]) != tp_topology_device_node(t, d[j]) ||
			          tp_placement_nic(p, i) != tp_placement_nic(p, j), "ranks %zu, %zu", j, i);
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
