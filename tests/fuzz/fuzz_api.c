/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: sequences of API calls against a reference model (refmodel.h).
 *
 * The input is read as decisions: first a small topology (builder calls with random levels,
 * nodes, node types and failure domains, some invalid on purpose, or a generator), then a
 * sequence of cluster operations: assign, release, set_down, set_cordoned, savepoints,
 * tp_place + tp_commit, tp_replace + tp_commit, tp_frag_report, tp_defrag_plan /
 * tp_defrag_compact + tp_plan_apply_step, and injected allocation failures. After every step:
 * tp_cluster_check() passes, every public query equals the model's recount, a failed call
 * changed nothing (fingerprint and model), a rollback restores the fingerprint, every placement
 * obeys its request; at the end nothing allocated through the test allocator is live.
 *
 * Placement and defrag calls are made only when the library has them: they are declared weak
 * here, so the target builds (and says so) while those modules are absent.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "refmodel.h"
#include "testutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#pragma weak tp_place
#pragma weak tp_commit
#pragma weak tp_replace
#pragma weak tp_placement_destroy
#pragma weak tp_placement_status
#pragma weak tp_placement_errmsg
#pragma weak tp_placement_job
#pragma weak tp_placement_devices
#pragma weak tp_placement_domain_count
#pragma weak tp_placement_domain_at
#pragma weak tp_placement_step_comm_us
#pragma weak tp_placement_fit
#pragma weak tp_placement_replaced
#pragma weak tp_frag_report
#pragma weak tp_frag_destroy
#pragma weak tp_frag_errmsg
#pragma weak tp_defrag_plan
#pragma weak tp_defrag_compact
#pragma weak tp_plan_destroy
#pragma weak tp_plan_status
#pragma weak tp_plan_errmsg
#pragma weak tp_plan_step_count
#pragma weak tp_plan_step
#pragma weak tp_plan_moved_job_count
#pragma weak tp_plan_moved_device_count
#pragma weak tp_plan_cost_s
#pragma weak tp_plan_placement
#pragma weak tp_plan_apply_step

#define have_place() (tp_place != NULL && tp_commit != NULL)
#define have_replace() (tp_replace != NULL && tp_commit != NULL)
#define have_frag() (tp_frag_report != NULL)
#define have_defrag() (tp_defrag_plan != NULL && tp_plan_apply_step != NULL)

#define MAX_OPS 48
/* The largest topology an input builds (the model recounts everything after every step). */
#define FZ_MAX_DEVICES 4096
#define MAX_SP 12

/* ---- allocation failures ------------------------------------------------------------------- */

struct arm {
	long at;    /* allocation to fail in the next call, or -1 */
	bool hit;   /* the last armed call saw an allocation fail */
};

static void arm_on(struct arm *a)
{
	if (a->at >= 0)
		tp_test_alloc_fail_at(a->at);
}

static void arm_off(struct arm *a)
{
	a->hit = a->at >= 0 && tp_test_alloc_state.failed > 0;
	if (a->at >= 0)
		tp_test_alloc_fail_at(-1);
	a->at = -1;
}

/* ---- the topology -------------------------------------------------------------------------- */

static void check_code(int rc, unsigned allowed, const char *what, const char *msg)
{
	FZ_CHECK(rc == 0 || (fz_code_defined(rc) && (allowed & REF_BIT(rc))),
	         "%s returned %s (%d), not a documented code", what, tp_err_name(rc), rc);
	FZ_CHECK(rc == 0 || rc == TP_ENOMEM || (msg && *msg), "%s failed with %s but no message",
	         what, tp_err_name(rc));
}

#define B(x) REF_BIT(TP_##x)

static const char *const level_pool[] = {"block", "rack", "node"};
static const char *const node_pool[] = {"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"};
static const char *const dom_pool[] = {"a", "b", "c"};

/* Try to start a builder with bad level lists, then with a good one (or NULL). */
static tp_topology_builder *new_builder(struct fz_in *in, unsigned *nlevels)
{
	tp_topology_builder *b = NULL;
	uint8_t v = fz_u8(in);
	if (v >= 224) {
		static const char *const dup[] = {"rack", "rack"};
		static const char *const clu[] = {"cluster", "node"};
		static const char *const empty[] = {"", "node"};
		static const char *const slash[] = {"r/x", "node"};
		static const char *const null[] = {NULL, "node"};
		static const char *const nine[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
		const char *const *bad[] = {dup, clu, empty, slash, null, nine, NULL, nine};
		unsigned nbad[] = {2, 2, 2, 2, 2, 9, 2, 0};
		int rc = tp_topology_builder_create(&b, bad[v % 8], nbad[v % 8], &fz_allocator);
		FZ_CHECK(rc == TP_EINVAL || rc == TP_ELIMIT, "bad levels accepted: %s",
		         tp_err_name(rc));
		FZ_CHECK(b == NULL, "a failed builder_create returned a builder");
	}
	*nlevels = 1 + fz_below(in, 3);
	const char *const *names = level_pool + 3 - *nlevels;
	int rc = tp_topology_builder_create(&b, names, *nlevels, &fz_allocator);
	FZ_CHECK(rc == 0 && b, "builder_create: %s", tp_err_name(rc));
	return b;
}

static void random_fabric(struct fz_in *in, tp_topology_builder *b, unsigned nlevels)
{
	static const double gbps[] = {50, 900, 0, -1, NAN, INFINITY};
	static const double lat[] = {3.4, 0, -1, NAN};
	int level = (int)fz_below(in, nlevels + 3) - 2;
	int kind = (int)fz_below(in, 5);
	double g = gbps[fz_u8(in) % 6];
	double l = lat[fz_u8(in) % 4];
	int rc = tp_topology_builder_set_fabric(b, level, (tp_link_kind)kind, g, l);
	check_code(rc, B(EINVAL), "set_fabric", tp_topology_builder_errmsg(b));
	bool bad = level < -1 || level >= (int)nlevels || kind > 3 || !(g > 0) || isinf(g) ||
	           !(l >= 0) || isinf(l);
	/* An infinite figure is not something the docs promise to reject; only the clear cases. */
	if (level < -1 || level >= (int)nlevels || kind > 3 || !(g > 0) || !(l >= 0))
		FZ_CHECK(rc == TP_EINVAL, "set_fabric(%d, %d, %g, %g) accepted", level, kind, g, l);
	else if (!bad)
		FZ_CHECK(rc == 0, "set_fabric(%d, %d, %g, %g): %s", level, kind, g, l,
		         tp_topology_builder_errmsg(b));
}

/* A node type with some switches, NICs and NVLinks; some calls invalid on purpose. */
static tp_nodetype *random_nodetype(struct fz_in *in, unsigned gpus)
{
	tp_nodetype *nt = NULL;
	int rc = tp_nodetype_create(&nt, gpus, &fz_allocator);
	if (gpus < 1 || gpus > TP_MAX_NODE_DEVICES) {
		FZ_CHECK(rc == TP_EINVAL && !nt, "nodetype_create(%u) accepted", gpus);
		return NULL;
	}
	if (rc == TP_ENOMEM)
		return NULL;
	FZ_CHECK(rc == 0, "nodetype_create(%u): %s", gpus, tp_err_name(rc));
	unsigned nops = fz_below(in, 6);
	for (unsigned i = 0; i < nops; i++) {
		unsigned nsw = tp_nodetype_pcie_switch_count(nt);
		int sw = (int)fz_below(in, nsw + 2) - 1;
		unsigned id;
		switch (fz_u8(in) % 5) {
		case 0:
			rc = tp_nodetype_add_pcie_switch(nt, sw, &id);
			check_code(rc, B(EINVAL) | B(ELIMIT) | B(ENOMEM), "add_pcie_switch",
			           tp_nodetype_errmsg(nt));
			FZ_CHECK((rc == 0) == (sw < (int)nsw), "add_pcie_switch(%d) with %u switches: %s",
			         sw, nsw, tp_err_name(rc));
			break;
		case 1: {
			unsigned g = fz_below(in, gpus + 1);
			rc = tp_nodetype_set_gpu_switch(nt, g, sw);
			check_code(rc, B(EINVAL), "set_gpu_switch", tp_nodetype_errmsg(nt));
			FZ_CHECK((rc == 0) == (g < gpus && sw < (int)nsw), "set_gpu_switch(%u, %d): %s",
			         g, sw, tp_err_name(rc));
			if (rc == 0)
				FZ_CHECK(tp_test_gpu_switch(nt, g) == sw, "gpu_switch readback");
			break;
		}
		case 2:
			rc = tp_nodetype_add_nic(nt, fz_u8(in) & 1 ? "mlx5_0" : "", sw, 50.0, &id);
			check_code(rc, B(EINVAL) | B(ELIMIT) | B(ENOMEM), "add_nic",
			           tp_nodetype_errmsg(nt));
			break;
		case 3:
			rc = tp_nodetype_add_nvswitch(nt, fz_u8(in) & 1 ? "nvs0" : "", &id);
			check_code(rc, B(EINVAL) | B(ELIMIT) | B(ENOMEM), "add_nvswitch",
			           tp_nodetype_errmsg(nt));
			break;
		default: {
			unsigned a = fz_below(in, gpus + 1);
			unsigned c = fz_below(in, gpus + 1);
			double g = fz_u8(in) & 1 ? 450.0 : -1.0;
			rc = tp_nodetype_set_nvlink(nt, a, c, g);
			check_code(rc, B(EINVAL) | B(ENOMEM), "set_nvlink", tp_nodetype_errmsg(nt));
			if (a >= gpus || c >= gpus || a == c || g < 0)
				FZ_CHECK(rc == TP_EINVAL, "set_nvlink(%u, %u, %g) accepted", a, c, g);
			if (rc == 0)
				FZ_CHECK(tp_nodetype_nvlink_gbps(nt, c, a) == g, "nvlink not symmetric");
			break;
		}
		}
	}
	return nt;
}

/* Add one node; returns whether it was added. */
static bool random_node(struct fz_in *in, tp_topology_builder *b, unsigned nlevels)
{
	static const unsigned gpus_pool[] = {1, 2, 4, 8, 3, 0, 257, 4};
	uint8_t v = fz_u8(in);
	const char *name = v == 255 ? "a/b" : v == 254 ? "" : node_pool[v % 8];
	const char *path[3] = {NULL, NULL, NULL};
	bool bad_path = false;
	for (unsigned i = 0; i + 1 < nlevels; i++) {
		uint8_t w = fz_u8(in);
		path[i] = w == 255 ? "x/y" : w == 254 ? "" : dom_pool[w % 3];
		bad_path |= w >= 254;
	}
	const char *const *pathp = nlevels > 1 && fz_u8(in) != 255 ? path : NULL;
	unsigned gpus = gpus_pool[fz_u8(in) % 8];
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	double perf[8];
	tp_nodetype *nt = NULL;
	uint8_t ov = fz_u8(in);
	bool bad_opts = false;
	if (ov & 1)
		o.model = ov & 2 ? "GB200" : "H100";
	if (ov & 4)
		o.memory_gb = ov & 8 ? 80.0 : 186.0;
	if (ov & 16) {
		o.perf = ov & 32 ? 0.9 : 1.2;
		if (fz_u8(in) == 255)
			o.perf = 0;
	}
	if (ov & 64 && gpus <= 8) {
		for (unsigned i = 0; i < gpus; i++)
			perf[i] = 0.5 + (fz_u8(in) % 8) / 8.0;
		o.device_perf = perf;
	}
	if (ov & 128) {
		unsigned ng = fz_u8(in) == 255 ? gpus + 1 : gpus;
		nt = random_nodetype(in, ng);
		o.type = nt;
		bad_opts |= nt && ng != gpus;
	}
	bad_opts |= o.perf == 0 && !o.device_perf; /* per-device figures override perf */
	int rc = tp_topology_builder_add_node(b, name, pathp, gpus, &o);
	tp_nodetype_destroy(nt);
	check_code(rc, B(EINVAL) | B(EEXIST) | B(ELIMIT) | B(ENOMEM), "add_node",
	           tp_topology_builder_errmsg(b));
	bool invalid = v >= 254 || bad_path || (nlevels > 1 && !pathp) || gpus == 0 ||
	               gpus > TP_MAX_NODE_DEVICES || bad_opts;
	if (invalid)
		FZ_CHECK(rc == TP_EINVAL, "add_node(%s, %u gpus) accepted bad input: %s", name, gpus,
		         tp_err_name(rc));
	return rc == 0;
}

/* The name tp_topology_builder_generate() gives its node k0-0-...-0 ("rack3-node0"). */
static const char *generated_name(char *buf, size_t size, unsigned nlevels, unsigned k0)
{
	size_t len = 0;
	for (unsigned l = 0; l < nlevels; l++)
		len += (size_t)snprintf(buf + len, size - len, "%s%s%u", l ? "-" : "",
		                        level_pool[3 - nlevels + l], l ? 0 : k0);
	return buf;
}

static void random_failure_domain(struct fz_in *in, tp_topology_builder *b, unsigned nlevels)
{
	static const char *const kinds[] = {"power", "tray", "node", ""};
	static const char *const doms[] = {"p0", "p1", "", "p/2"};
	const char *kind = kinds[fz_u8(in) % 4];
	const char *dom = doms[fz_u8(in) % 4];
	uint8_t v = fz_u8(in);
	char gen[64];
	if (v >= FZ_ESCAPE && v < 255)
		FZ_TRACE_ESCAPE(in, v, 8);
	/* a node the builder added by name, a generated one, or none */
	const char *node = v == 255         ? "nosuch"
	                   : v >= FZ_ESCAPE ? generated_name(gen, sizeof gen, nlevels, v - FZ_ESCAPE)
	                                    : node_pool[v % 8];
	int dev = (int)fz_below(in, 10) - 1;
	int rc = tp_topology_builder_add_failure_domain(b, kind, dom, node, dev);
	check_code(rc, B(EINVAL) | B(ENOTFOUND) | B(EEXIST) | B(ENOMEM), "add_failure_domain",
	           tp_topology_builder_errmsg(b));
	if (!strcmp(kind, "node") || !*kind || !*dom)
		FZ_CHECK(rc == TP_EINVAL, "add_failure_domain(%s, %s) accepted", kind, dom);
}

static void random_nvswitch(struct fz_in *in, tp_topology_builder *b, unsigned nlevels)
{
	/* One read per statement: C leaves the order of an initializer list's reads open. */
	const char *path[3] = {NULL, NULL, NULL};
	path[0] = dom_pool[fz_u8(in) % 3];
	path[1] = dom_pool[fz_u8(in) % 3];
	unsigned level = fz_below(in, nlevels + 1);
	int rc = tp_topology_builder_add_nvswitch(b, level, path, fz_u8(in) & 1 ? "tray0" : "");
	check_code(rc, B(EINVAL) | B(ENOTFOUND) | B(EEXIST) | B(ENOMEM), "add_nvswitch",
	           tp_topology_builder_errmsg(b));
	if (level + 1 >= nlevels)
		FZ_CHECK(rc != 0, "add_nvswitch at level %u of %u accepted", level, nlevels);
}

/* Build with allocation failures first when the input asks: ENOMEM, no topology, no leak. */
static tp_topology *build(struct fz_in *in, tp_topology_builder *b, uint32_t nodes)
{
	tp_topology *t = NULL;
	uint8_t v = fz_u8(in);
	if (v >= 200) {
		long live = tp_test_alloc_state.live;
		tp_test_alloc_fail_at(v - 200);
		int rc = tp_topology_build(b, &t);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			FZ_CHECK(!t && tp_test_alloc_state.live == live, "a failed build leaked");
		} else {
			FZ_CHECK(rc == (nodes ? 0 : TP_EINVAL), "build: %s", tp_err_name(rc));
			tp_topology_destroy(t);
			t = NULL;
		}
	}
	int rc = tp_topology_build(b, &t);
	if (nodes == 0) {
		FZ_CHECK(rc == TP_EINVAL && !t, "a builder without nodes built: %s", tp_err_name(rc));
		FZ_CHECK(*tp_topology_builder_errmsg(b), "no message for a build without nodes");
		return NULL;
	}
	FZ_CHECK(rc == 0, "build: %s (%s)", tp_err_name(rc), tp_topology_builder_errmsg(b));
	FZ_CHECK(tp_topology_node_count(t) == nodes, "built %u nodes, %u were added",
	         tp_topology_node_count(t), nodes);
	return t;
}

static tp_topology *random_topology(struct fz_in *in)
{
	uint8_t mode = fz_u8(in);
	tp_topology *t = NULL;
	if (mode < 16) {
		/* Read in source order (clang's order of the arguments this once was, so inputs
		 * libFuzzer found keep their meaning; gcc read them the other way round). */
		unsigned sus = 1 + fz_below(in, 2);
		unsigned nodes = 1 + fz_below(in, 3);
		int rc = tp_topology_generate_hgx(&t, sus, nodes, &fz_allocator);
		FZ_CHECK(rc == 0, "generate_hgx: %s", tp_err_name(rc));
		return t;
	}
	if (mode < 24) {
		int rc = tp_topology_generate_nvl72(&t, 1, 1, &fz_allocator);
		FZ_CHECK(rc == 0, "generate_nvl72: %s", tp_err_name(rc));
		return t;
	}
	if (mode < 26) {
		int rc = tp_topology_generate_hgx(&t, mode & 1, 1, &fz_allocator);
		FZ_CHECK(rc == (mode & 1 ? 0 : TP_EINVAL), "generate_hgx(%d): %s", mode & 1,
		         tp_err_name(rc));
		return t;
	}
	unsigned nlevels;
	tp_topology_builder *b = new_builder(in, &nlevels);
	uint32_t nodes = 0;
	unsigned nfab = fz_below(in, 3);
	for (unsigned i = 0; i < nfab; i++)
		random_fabric(in, b, nlevels);
	if (mode & 1) {
		unsigned counts[3];
		bool bad = false;
		for (unsigned i = 0; i < nlevels; i++) {
			/* 1..4 mostly; an escape gives a count over the whole range */
			uint8_t v = fz_u8(in);
			if (v >= FZ_ESCAPE) {
				FZ_TRACE_ESCAPE(in, v, 4);
				counts[i] = fz_wide_escape(in, v);
			} else {
				counts[i] = v % 4;
				counts[i] += fz_u8(in) != 255;
			}
			bad |= counts[i] == 0;
		}
		unsigned gpus = 1 + fz_below(in, 4);
		uint64_t devices = gpus; /* saturates past 2^31 */
		for (unsigned i = 0; i < nlevels && devices <= INT32_MAX; i++)
			devices *= counts[i];
		bool huge = !bad && devices > INT32_MAX;
		/* Between what the model holds and the documented 2^31 devices, a generator builds
		 * what it is asked for (millions of nodes): not tried until builders have budgets
		 * (#19 item 9). */
		if (bad || huge || devices <= FZ_MAX_DEVICES - 64) {
			int rc = tp_topology_builder_generate(b, counts, gpus, NULL);
			check_code(rc, B(EINVAL) | B(EEXIST) | B(ELIMIT) | B(ENOMEM), "generate",
			           tp_topology_builder_errmsg(b));
			if (bad)
				FZ_CHECK(rc == TP_EINVAL || rc == TP_ELIMIT, "generate with a 0 count: %s",
				         tp_err_name(rc));
			else
				FZ_CHECK(huge ? rc == TP_ELIMIT : rc == 0, "generate of %llu devices: %s",
				         (unsigned long long)devices, tp_err_name(rc));
			nodes += rc == 0 ? (uint32_t)(devices / gpus) : 0;
		}
	}
	unsigned nn = fz_below(in, 9);
	for (unsigned i = 0; i < nn; i++)
		nodes += random_node(in, b, nlevels);
	unsigned nfd = fz_below(in, 4);
	for (unsigned i = 0; i < nfd; i++)
		random_failure_domain(in, b, nlevels);
	if (fz_u8(in) & 1)
		random_nvswitch(in, b, nlevels);
	t = build(in, b, nodes);
	tp_topology_builder_destroy(b);
	return t;
}

/* ---- the cluster under test ------------------------------------------------------------------ */

struct savepoint {
	size_t handle;
	uint64_t fp;
	struct ref_model m;
};

struct pending {
	tp_placement *p;
	struct ref_model m;       /* the model when it was made */
	unsigned long writes;     /* st.writes when it was made */
	char id[REF_MAX_ID + 1];
	char tenant[REF_MAX_ID + 1];
	bool pairs;               /* its request asked for GPU+NIC pairs */
};

struct st {
	const tp_topology *t;
	tp_cluster *c;
	struct ref_model m;
	struct savepoint sp[MAX_SP];
	size_t nsp;
	struct pending pend;
	struct arm arm;
	unsigned long writes;     /* successful writing calls so far (each may bump the
	                             cluster's change counter, which tp_commit checks) */
};

/* A failed writing call: a defined code it may return, a message, nothing changed. */
static void failed_unchanged(struct st *s, int rc, unsigned allowed, uint64_t fp,
                             const char *what)
{
	if (rc == TP_ENOMEM)
		FZ_CHECK(s->arm.hit, "%s: ENOMEM without an injected failure", what);
	else
		check_code(rc, allowed, what, tp_cluster_errmsg(s->c));
	FZ_CHECK(tp_cluster_fingerprint(s->c) == fp, "%s failed (%s) but changed the state", what,
	         tp_err_name(rc));
}

/* Ids: the model's running jobs, a small pool, and bad ones. */
static const char *pick_job(struct fz_in *in, const struct ref_model *m, char *longname)
{
	static const char *const pool[] = {"j0", "j1", "j2", "j3", "j4", "j5", "new"};
	uint8_t v = fz_u8(in);
	if (v < 96 && m->njobs)
		return m->jobs[v % m->njobs].id;
	if (v < 240)
		return pool[v % 7];
	switch (v % 4) {
	case 0: return NULL;
	case 1: return "";
	case 2: return "ctl\x01";
	default:
		memset(longname, 'j', TP_MAX_NAME + 1);
		longname[TP_MAX_NAME + 1] = '\0';
		return longname;
	}
}

/* Devices: mostly valid ids, sometimes out of range, duplicates come by themselves. */
static size_t pick_devices(struct fz_in *in, uint32_t ndev, uint32_t *devs, size_t max)
{
	size_t n = fz_below(in, (uint32_t)max + 1);
	for (size_t i = 0; i < n; i++) {
		uint8_t v = fz_u8(in);
		devs[i] = v == 255 ? ndev + fz_u8(in) : v == 254 ? UINT32_MAX : fz_below(in, ndev);
	}
	return n;
}

/* Options for a job, a few invalid; `bad` says whether they are. */
static const tp_job_options *pick_options(struct fz_in *in, tp_job_options *o,
                                          const tp_topology *t, const struct ref_model *m,
                                          struct fz_request *shape, bool *bad)
{
	static const char *const tenants[] = {NULL, "t1", "t2", "default"};
	tp_job_options init = TP_JOB_OPTIONS_INIT;
	*o = init;
	*bad = false;
	uint8_t v = fz_u8(in);
	if (v < 64)
		return NULL;
	o->job_class = (tp_job_class)(fz_u8(in) % 3);
	static const double checkpoints[] = {0.0, 60.0, 120.0, 180.0};
	o->priority = fz_wide_int(in);
	o->tenant = tenants[fz_u8(in) % 4];
	o->preemptible = fz_u8(in) & 1;
	o->migratable = fz_u8(in) & 1;
	o->checkpoint_s = fz_wide_double(in, checkpoints, 4);
	if (o->checkpoint_s > 1e12)
		o->checkpoint_s = 1e12; /* a plan's cost sums them: keep the sum finite */
	if (v & 1)
		o->shape = (fz_decode_request(in, t, m->njobs ? m->jobs[0].id : NULL, shape), &shape->r);
	switch (v >= 248 ? v % 6 : 6) {
	case 0: o->version = 0; *bad = true; break;
	case 1: o->job_class = (tp_job_class)7; *bad = true; break;
	case 2: o->checkpoint_s = -1; *bad = true; break;
	case 3: o->checkpoint_s = NAN; *bad = true; break;
	case 4: o->tenant = ""; *bad = true; break;
	case 5: o->tenant = "tab\there"; *bad = true; break;
	default: break;
	}
	return o;
}

static const char *opts_tenant(const tp_job_options *o)
{
	return o && o->tenant ? o->tenant : "default";
}

static void op_assign(struct st *s, struct fz_in *in)
{
	char longname[TP_MAX_NAME + 2];
	uint32_t devs[8];
	const char *id = pick_job(in, &s->m, longname);
	size_t n = pick_devices(in, s->m.ndev, devs, 8);
	tp_job_options o;
	struct fz_request shape;
	bool bad_opts;
	const tp_job_options *op = pick_options(in, &o, s->t, &s->m, &shape, &bad_opts);
	const uint32_t *dp = fz_u8(in) == 255 ? NULL : devs;
	unsigned errs = ref_assign_errors(&s->m, id, dp, n) | (bad_opts ? B(EINVAL) : 0);
	uint64_t fp = tp_cluster_fingerprint(s->c);
	arm_on(&s->arm);
	int rc = tp_cluster_assign(s->c, id, dp, n, op);
	arm_off(&s->arm);
	if (rc == 0) {
		FZ_CHECK(errs == 0, "assign('%s', %zu devices) succeeded, model expected %#x",
		         id ? id : "(null)", n, errs);
		ref_assign(&s->m, id, opts_tenant(op), devs, n);
		if (op && ref_shape_pairs(op->shape)) /* it holds NICs the model cannot name */
			ref_set_nics(&s->m, (int)s->m.njobs - 1, NULL);
		s->writes++;
		return;
	}
	bool shape_may_fail = op && op->shape; /* its levels are checked (EINVAL) */
	failed_unchanged(s, rc, errs | (shape_may_fail ? B(EINVAL) : 0) | B(ENOMEM), fp, "assign");
	FZ_CHECK(errs || shape_may_fail || rc == TP_ENOMEM, "assign('%s') failed: %s (%s)", id,
	         tp_err_name(rc), tp_cluster_errmsg(s->c));
}

static void op_release(struct st *s, struct fz_in *in)
{
	char longname[TP_MAX_NAME + 2];
	const char *id = pick_job(in, &s->m, longname);
	int j = ref_job_find(&s->m, id);
	uint64_t fp = tp_cluster_fingerprint(s->c);
	arm_on(&s->arm);
	int rc = tp_cluster_release(s->c, id);
	arm_off(&s->arm);
	if (rc == 0) {
		FZ_CHECK(j >= 0, "release('%s') of no running job succeeded", id ? id : "(null)");
		ref_release(&s->m, j);
		s->writes++;
		return;
	}
	failed_unchanged(s, rc, j < 0 ? B(ENOTFOUND) | B(EINVAL) : B(ENOMEM), fp, "release");
	FZ_CHECK(j < 0 || rc == TP_ENOMEM, "release('%s') failed: %s", id, tp_err_name(rc));
}

static void op_health(struct st *s, struct fz_in *in, bool cordon)
{
	uint32_t devs[6];
	size_t n = pick_devices(in, s->m.ndev, devs, 6);
	bool on = fz_u8(in) & 1;
	const uint32_t *dp = n && fz_u8(in) == 255 ? NULL : devs;
	bool bad = n && !dp;
	for (size_t i = 0; dp && i < n; i++)
		bad |= devs[i] >= s->m.ndev;
	uint64_t fp = tp_cluster_fingerprint(s->c);
	arm_on(&s->arm);
	int rc = cordon ? tp_cluster_set_cordoned(s->c, dp, n, on)
	                : tp_cluster_set_down(s->c, dp, n, on);
	arm_off(&s->arm);
	const char *what = cordon ? "set_cordoned" : "set_down";
	if (rc == 0) {
		FZ_CHECK(!bad, "%s accepted a bad device list", what);
		ref_set_health(&s->m, devs, n, cordon, on);
		s->writes++;
		return;
	}
	failed_unchanged(s, rc, B(EINVAL) | B(ENOMEM), fp, what);
	FZ_CHECK(bad || rc == TP_ENOMEM, "%s failed: %s", what, tp_err_name(rc));
}

static void op_savepoint(struct st *s)
{
	if (s->nsp == MAX_SP)
		return;
	size_t h = 0;
	uint64_t fp = tp_cluster_fingerprint(s->c);
	arm_on(&s->arm);
	int rc = tp_cluster_savepoint(s->c, &h);
	arm_off(&s->arm);
	if (rc) {
		failed_unchanged(s, rc, B(ENOMEM), fp, "savepoint");
		return;
	}
	for (size_t i = 0; i < s->nsp; i++)
		FZ_CHECK(s->sp[i].handle != h, "savepoint handle %zu given twice", h);
	s->writes++;
	struct savepoint *e = &s->sp[s->nsp++];
	e->handle = h;
	e->fp = fp;
	ref_copy(&e->m, &s->m);
}

static void close_savepoints(struct st *s, size_t from)
{
	while (s->nsp > from)
		ref_free(&s->sp[--s->nsp].m);
}

/* A handle no open savepoint has. */
static size_t bogus_handle(const struct st *s, uint8_t v)
{
	size_t h = v;
	for (bool clash = true; clash;) {
		clash = false;
		for (size_t i = 0; i < s->nsp; i++)
			clash |= s->sp[i].handle == h;
		h += clash;
	}
	return h;
}

static void op_close(struct st *s, struct fz_in *in, bool rollback)
{
	uint8_t v = fz_u8(in);
	bool valid = s->nsp && v < 200;
	size_t i = valid ? v % s->nsp : 0;
	size_t h = valid ? s->sp[i].handle : bogus_handle(s, v);
	uint64_t fp = tp_cluster_fingerprint(s->c);
	arm_on(&s->arm);
	int rc = rollback ? tp_cluster_rollback(s->c, h) : tp_cluster_savepoint_discard(s->c, h);
	arm_off(&s->arm);
	const char *what = rollback ? "rollback" : "discard";
	if (!valid) {
		FZ_CHECK(rc == TP_EINVAL, "%s of handle %zu (not open) returned %s", what, h,
		         tp_err_name(rc));
		failed_unchanged(s, rc, B(EINVAL), fp, what);
		return;
	}
	FZ_CHECK(rc == 0, "%s of an open savepoint failed: %s", what, tp_err_name(rc));
	s->writes++;
	if (rollback) {
		FZ_CHECK(tp_cluster_fingerprint(s->c) == s->sp[i].fp,
		         "rollback did not restore the fingerprint");
		ref_free(&s->m);
		ref_copy(&s->m, &s->sp[i].m);
	} else {
		FZ_CHECK(tp_cluster_fingerprint(s->c) == fp, "discard changed the state");
	}
	close_savepoints(s, i);
}

/* ---- placements ---------------------------------------------------------------------------- */

/* Free, matching devices now. */
static uint32_t matching_free(const struct st *s, const tp_request *r)
{
	uint32_t k = 0;
	for (uint32_t d = 0; d < s->m.ndev; d++)
		k += ref_dev_free(&s->m, d) && ref_dev_matches(s->t, r, d);
	return k;
}

/* Most free matching devices in one domain of level l. */
static uint32_t best_domain_free(const struct st *s, const tp_request *r, unsigned l)
{
	uint32_t best = 0;
	for (uint32_t d = 0; d < tp_topology_domain_count(s->t, l); d++) {
		uint32_t first, n, k = 0;
		tp_topology_domain_devices(s->t, l, d, &first, &n);
		for (uint32_t x = first; x < first + n; x++)
			k += ref_dev_free(&s->m, x) && ref_dev_matches(s->t, r, x);
		if (k > best)
			best = k;
	}
	return best;
}

/* Whether some running job of another tenant keeps others out of a domain (so that free
 * counts alone do not predict the answer). */
static bool exclusive_jobs(const struct st *s)
{
	for (size_t j = 0; j < s->m.njobs; j++) {
		tp_job_options o = {.version = TP_JOB_OPTIONS_VERSION};
		tp_cluster_job_options(s->c, s->m.jobs[j].id, &o);
		if (o.shape && o.shape->exclusive)
			return true;
	}
	return false;
}

/* The domains a placement reports, against its devices. */
static void check_domains(const tp_topology *t, const tp_placement *p, const uint32_t *devs,
                          size_t n)
{
	unsigned nl = tp_topology_level_count(t);
	for (unsigned l = 0; l < nl; l++) {
		uint32_t nd = tp_placement_domain_count(p, l), seen = 0;
		for (uint32_t i = 0; i < nd; i++) {
			uint32_t dom = TP_NONE, cnt = 0, k = 0;
			FZ_CHECK(tp_placement_domain_at(p, l, i, &dom, &cnt) == 0, "domain_at(%u, %u)", l,
			         i);
			for (size_t x = 0; x < n; x++)
				k += tp_topology_node_domain(t, tp_topology_device_node(t, devs[x]), l) == dom;
			FZ_CHECK(k == cnt && cnt > 0, "domain_at(%u, %u): dom %u count %u, devices say %u",
			         l, i, dom, cnt, k);
			seen += cnt;
		}
		FZ_CHECK(seen == n, "level %u: domains hold %u devices of %zu", l, seen, n);
		uint32_t dom, cnt;
		FZ_CHECK(tp_placement_domain_at(p, l, nd, &dom, &cnt) == TP_EINVAL, "domain_at past end");
	}
	FZ_CHECK(tp_placement_domain_count(p, nl) == 0, "domain_count of a bad level");
}

/* The common checks of a result of tp_place / tp_replace. */
static void check_result(struct st *s, int rc, const tp_placement *p, const tp_request *r,
                         uint32_t needed, uint32_t free_match)
{
	FZ_CHECK(fz_code_defined(rc), "undefined code %d", rc);
	FZ_TRACE_LINE("  placement: %s for %u\n", tp_err_name(rc), needed);
	FZ_CHECK(fz_big_alloc == 0, "a request for %u asked for %zu bytes at once (%s)", needed,
	         fz_big_alloc, tp_err_name(rc));
	if (rc == TP_ENOMEM) {
		FZ_CHECK(s->arm.hit, "ENOMEM without an injected failure");
		return;
	}
	FZ_CHECK(p != NULL, "no result object for %s", tp_err_name(rc));
	FZ_CHECK(tp_placement_status(p) == rc, "status %d, returned %d", tp_placement_status(p), rc);
	size_t n = 99;
	const uint32_t *devs = tp_placement_devices(p, &n);
	tp_fit fit = TP_FIT_INIT;
	int frc = tp_placement_fit(p, &fit);
	if (rc == 0) {
		FZ_CHECK(devs && n > 0, "a success without devices");
		FZ_CHECK(*tp_placement_errmsg(p) == '\0', "a success with message '%s'",
		         tp_placement_errmsg(p));
		FZ_CHECK(frc == TP_EINVAL, "fit of a success: %s", tp_err_name(frc));
		double us = tp_placement_step_comm_us(p);
		FZ_CHECK(isfinite(us) && us >= 0, "step_comm_us %g", us);
		check_domains(s->t, p, devs, n);
		return;
	}
	FZ_CHECK(!devs && n == 0, "a failure with %zu devices", n);
	FZ_CHECK(*tp_placement_errmsg(p), "%s without a message", tp_err_name(rc));
	if (rc == TP_EINFEASIBLE || rc == TP_EBUSY || rc == TP_EFRAGMENTED) {
		FZ_CHECK(frc == 0, "fit of %s: %s", tp_err_name(rc), tp_err_name(frc));
		FZ_CHECK(fit.needed == needed, "fit.needed %u, wanted %u", fit.needed, needed);
		if (r && !fz_request_pairs(r)) /* pairs count only pairable GPUs */
			FZ_CHECK(fit.free_total == free_match, "fit.free_total %u, recount %u (%s)",
			         fit.free_total, free_match, tp_placement_errmsg(p));
		if (rc == TP_EBUSY)
			FZ_CHECK(fit.free_total < fit.needed, "BUSY with %u free for %u (%s)",
			         fit.free_total, fit.needed, tp_placement_errmsg(p));
		if (rc == TP_EFRAGMENTED)
			FZ_CHECK(fit.free_total >= fit.needed, "FRAGMENTED with %u free for %u (%s)",
			         fit.free_total, fit.needed, tp_placement_errmsg(p));
	} else {
		FZ_CHECK(frc == TP_EINVAL, "fit of %s: %s", tp_err_name(rc), tp_err_name(frc));
	}
}

/* A request whose fields are plainly invalid must be refused as such. */
static bool plainly_invalid(const tp_request *r)
{
	return r->count == 0 || r->version < 1 || r->version > TP_REQUEST_VERSION ||
	       (r->version >= 2 && r->gpu_nic_pairs != 0 && r->gpu_nic_pairs != 1) ||
	       (unsigned)r->job_class > TP_CLASS_INTERACTIVE || (r->nslices && !r->slices) ||
	       (r->nselect_nodes && !r->select_nodes) ||
	       (r->group_size > 1 && r->count % r->group_size);
}

static void pending_drop(struct st *s)
{
	if (s->pend.p) {
		tp_placement_destroy(s->pend.p);
		ref_free(&s->pend.m);
		s->pend.p = NULL;
	}
}

/* Commit a successful tp_place result and mirror it in the model (with the NICs it paired
 * when its request asked for pairs: the commit records the request as the job's shape). */
static void commit_place(struct st *s, const tp_placement *p, const char *id,
                         const char *tenant, const tp_job_options *opts, bool pairs,
                         bool stale, bool may_be_stale)
{
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	bool running = ref_job_find(&s->m, id) >= 0;
	uint64_t fp = tp_cluster_fingerprint(s->c);
	arm_on(&s->arm);
	int rc = tp_commit(s->c, p, opts);
	arm_off(&s->arm);
	if (rc == 0) {
		FZ_CHECK(!stale, "a placement made before a change was committed");
		FZ_CHECK(!running, "commit of a running id '%s' succeeded", id);
		for (size_t i = 0; i < n; i++)
			FZ_CHECK(ref_dev_free(&s->m, devs[i]), "commit took device %u, not free", devs[i]);
		ref_assign(&s->m, id, opts ? opts_tenant(opts) : tenant, devs, n);
		if (pairs)
			ref_set_nics(&s->m, (int)s->m.njobs - 1, p);
		s->writes++;
		return;
	}
	failed_unchanged(s, rc, B(EINVAL) | B(EEXIST) | B(ENOMEM), fp, "commit");
	FZ_CHECK(stale || may_be_stale || running || rc == TP_ENOMEM, "commit failed: %s (%s)",
	         tp_err_name(rc), tp_cluster_errmsg(s->c));
}

static void op_place(struct st *s, struct fz_in *in)
{
	if (!have_place())
		return;
	struct fz_request q;
	fz_decode_request(in, s->t, s->m.njobs ? s->m.jobs[fz_below(in, (uint32_t)s->m.njobs)].id
	                                        : NULL,
	                  &q);
	const tp_request *r = &q.r;
	fz_trace_request("place", r);
	uint64_t fp = tp_cluster_fingerprint(s->c);
	tp_placement *p = NULL;
	arm_on(&s->arm);
	int rc = tp_place(s->c, r, &p);
	arm_off(&s->arm);
	FZ_CHECK(tp_cluster_fingerprint(s->c) == fp, "tp_place changed the cluster");
	uint32_t free_match = matching_free(s, r);
	check_result(s, rc, p, r, r->count, free_match);
	if (plainly_invalid(r) && !(rc == TP_ENOMEM && s->arm.hit))
		FZ_CHECK(rc == TP_EINVAL || rc == TP_ENOTFOUND, "a plainly invalid request gave %s",
		         tp_err_name(rc));
	bool judged = rc != TP_EINVAL && rc != TP_ENOTFOUND && rc != TP_ENOMEM;
	if (judged && !exclusive_jobs(s) && fz_request_plain(r) && !r->balanced)
		FZ_CHECK((rc == 0) == (free_match >= r->count),
		         "plain request of %u with %u free matching: %s (%s)", r->count, free_match,
		         tp_err_name(rc), tp_placement_errmsg(p));
	if (judged && !exclusive_jobs(s) && !fz_request_pairs(r) && r->required &&
	    r->group_size <= 1 && !r->group_level &&
	    !r->preferred && !r->nslices && !r->ncaps && !r->spread_level && !r->colocate_job &&
	    !r->exclusive) {
		int l = tp_topology_level_by_name(s->t, r->required);
		uint32_t best = best_domain_free(s, r, (unsigned)l);
		FZ_CHECK((rc == 0) == (best >= r->count),
		         "required %s for %u, best domain has %u: %s (%s)", r->required, r->count, best,
		         tp_err_name(rc), tp_placement_errmsg(p));
	}
	const char *id = r->id ? r->id : "new", *tenant = r->tenant ? r->tenant : "default";
	if (rc == 0) {
		size_t n;
		const uint32_t *devs = tp_placement_devices(p, &n);
		FZ_CHECK(!strcmp(tp_placement_job(p), id), "placement job '%s', request id '%s'",
		         tp_placement_job(p), id);
		for (size_t i = 0; i < n; i++)
			FZ_CHECK(ref_dev_free(&s->m, devs[i]), "placed on device %u, not free", devs[i]);
		const char *why = ref_placement_problem(s->c, r, tenant, devs, n, true);
		FZ_CHECK(!why, "placement breaks its request: %s", why);
		if (fz_request_pairs(r)) {
			why = ref_pairs_problem(s->t, p);
			FZ_CHECK(!why, "GPU+NIC pairs: %s", why);
			why = ref_nics_problem(&s->m, s->t, p, -1);
			FZ_CHECK(!why, "GPU+NIC pairs: %s", why);
		} else {
			FZ_CHECK(tp_placement_nic(p, 0) == TP_ENOTFOUND, "a NIC without pairs asked");
		}
		uint8_t v = fz_u8(in);
		if (v < 160) {
			tp_job_options o;
			struct fz_request shape;
			bool bad;
			const tp_job_options *op = pick_options(in, &o, s->t, &s->m, &shape, &bad);
			if (!bad && !(op && op->shape)) {
				if (fz_u8(in) & 1)
					s->arm.at = fz_below(in, 8);
				commit_place(s, p, id, tenant, op, fz_request_pairs(r), false, false);
			}
		} else if (v < 220) {
			pending_drop(s);
			s->pend.p = p;
			ref_copy(&s->pend.m, &s->m);
			s->pend.writes = s->writes;
			snprintf(s->pend.id, sizeof s->pend.id, "%s", id);
			snprintf(s->pend.tenant, sizeof s->pend.tenant, "%s", tenant);
			s->pend.pairs = fz_request_pairs(r);
			return;
		}
	}
	tp_placement_destroy(p);
}

static void op_commit_pending(struct st *s)
{
	if (!s->pend.p)
		return;
	/* A different state must be refused; a state reached again after writes may be (the
	 * change counter moved on). */
	bool stale = !ref_equal(&s->pend.m, &s->m);
	commit_place(s, s->pend.p, s->pend.id, s->pend.tenant, NULL, s->pend.pairs, stale,
	             s->writes != s->pend.writes);
	pending_drop(s);
}

static bool in_list(const uint32_t *a, size_t n, uint32_t x)
{
	for (size_t i = 0; i < n; i++)
		if (a[i] == x)
			return true;
	return false;
}

static void check_replacement(struct st *s, const tp_placement *p, int j, const uint32_t *failed,
                              size_t nf)
{
	const struct ref_job *job = &s->m.jobs[j];
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	FZ_CHECK(n == job->ndev, "replacement has %zu devices, the job %u", n, job->ndev);
	FZ_CHECK(!strcmp(tp_placement_job(p), job->id), "replacement for '%s', asked '%s'",
	         tp_placement_job(p), job->id);
	for (size_t i = 0; i < n; i++) {
		uint32_t old = job->devs[i];
		bool gone = in_list(failed, nf, old) || s->m.down[old];
		FZ_CHECK(in_list(failed, nf, old) ? devs[i] != old : gone || devs[i] == old,
		         "rank %zu: %u -> %u (failed: %d)", i, old, devs[i], in_list(failed, nf, old));
		if (devs[i] != old)
			FZ_CHECK(ref_dev_free(&s->m, devs[i]), "rank %zu replaced by %u, not free", i,
			         devs[i]);
		for (size_t k = 0; k < i; k++)
			FZ_CHECK(devs[k] != devs[i], "replacement lists %u twice", devs[i]);
	}
	uint32_t f, rdev;
	size_t i = 0;
	for (; tp_placement_replaced(p, i, &f, &rdev) == 0; i++) {
		bool found = false;
		for (size_t k = 0; k < n; k++)
			found |= job->devs[k] == f && devs[k] == rdev;
		FZ_CHECK(found, "replaced pair %u -> %u is not a rank's change", f, rdev);
	}
	size_t distinct = 0;
	for (size_t k = 0; k < nf; k++)
		distinct += !in_list(failed, k, failed[k]);
	FZ_CHECK(i >= distinct, "%zu replaced pairs for %zu failed devices", i, distinct);
	tp_job_options o = {.version = TP_JOB_OPTIONS_VERSION};
	tp_cluster_job_options(s->c, job->id, &o);
	if (o.shape && !ref_placement_problem(s->c, o.shape, job->tenant, job->devs, job->ndev,
	                                      false)) {
		const char *why = ref_placement_problem(s->c, o.shape, job->tenant, devs, n, false);
		FZ_CHECK(!why, "replacement breaks the job's shape: %s", why);
	}
}

static void op_replace(struct st *s, struct fz_in *in)
{
	if (!have_replace())
		return;
	char longname[TP_MAX_NAME + 2];
	const char *id = pick_job(in, &s->m, longname);
	int j = ref_job_find(&s->m, id);
	uint32_t failed[4];
	size_t nf = fz_below(in, 4);
	bool bad = nf == 0;
	for (size_t i = 0; i < nf; i++) {
		uint8_t v = fz_u8(in);
		if (j >= 0 && v < 240) {
			failed[i] = s->m.jobs[j].devs[v % s->m.jobs[j].ndev];
		} else {
			failed[i] = fz_below(in, s->m.ndev + 2);
			bad |= j < 0 || failed[i] >= s->m.ndev || s->m.holder[failed[i]] != j;
		}
	}
	uint64_t fp = tp_cluster_fingerprint(s->c);
	tp_placement *p = NULL;
	arm_on(&s->arm);
	int rc = tp_replace(s->c, id, failed, nf, &p);
	arm_off(&s->arm);
	FZ_CHECK(tp_cluster_fingerprint(s->c) == fp, "tp_replace changed the cluster");
	if (j < 0 && rc != TP_ENOMEM)
		FZ_CHECK(rc == TP_ENOTFOUND || rc == TP_EINVAL, "replace of no job: %s",
		         tp_err_name(rc));
	if (bad && rc != TP_ENOMEM)
		FZ_CHECK(rc == TP_EINVAL || rc == TP_ENOTFOUND, "replace with bad devices: %s",
		         tp_err_name(rc));
	/* fit.needed for a replacement is the number of devices to replace; the free figure's
	 * definition depends on the job's shape, so only its consistency is checked here. */
	uint32_t need = 0;
	for (size_t i = 0; j >= 0 && i < s->m.jobs[j].ndev; i++) {
		uint32_t d = s->m.jobs[j].devs[i];
		need += in_list(failed, nf, d) || s->m.down[d];
	}
	if (rc == TP_ENOMEM || (rc != 0 && !p)) {
		FZ_CHECK(rc == TP_ENOMEM || rc == TP_EINVAL, "replace: no result for %s",
		         tp_err_name(rc));
		return;
	}
	check_result(s, rc, p, NULL, need, 0);
	if (rc == 0) {
		check_replacement(s, p, j, failed, nf);
		if (s->m.jobs[j].nic) {
			const char *why = ref_nics_problem(&s->m, s->t, p, j);
			FZ_CHECK(!why, "replacement of pairs job '%s': %s", s->m.jobs[j].id, why);
		}
		if (fz_u8(in) < 192) {
			size_t n;
			const uint32_t *devs = tp_placement_devices(p, &n);
			arm_on(&s->arm);
			int crc = tp_commit(s->c, p, NULL);
			arm_off(&s->arm);
			if (crc == 0) {
				bool pairs = s->m.jobs[j].nic != NULL;
				ref_rebind(&s->m, j, devs, n);
				if (pairs) /* tp_commit() records the NICs the replacement reported */
					ref_set_nics(&s->m, j, p);
				s->writes++;
			} else {
				failed_unchanged(s, crc, B(ENOMEM), fp, "commit of a replacement");
			}
		}
	}
	tp_placement_destroy(p);
}

/* ---- fragmentation report ------------------------------------------------------------------ */

static void op_frag(struct st *s, struct fz_in *in)
{
	if (!have_frag())
		return;
	static const double weights[] = {1.0, 0.5, 2.0, 0.0, -1.0, NAN};
	tp_job_shape mix[6];
	size_t nmix = fz_below(in, 7);
	unsigned errs = 0;
	unsigned nl = tp_topology_level_count(s->t);
	for (size_t i = 0; i < nmix; i++) {
		uint8_t v = fz_u8(in);
		mix[i].devices = v < 250 ? 1 + fz_wide(in, 16) : 0;
		mix[i].level = v == 251 ? "nosuch" : v == 252 ? NULL : tp_topology_level_name(s->t,
		                                                                             v % nl);
		mix[i].weight = weights[v > 200 ? v % 6 : v % 3];
		if (errs)
			continue;
		if (!mix[i].level || !mix[i].devices || !(mix[i].weight > 0))
			errs = B(EINVAL);
		else if (tp_topology_level_by_name(s->t, mix[i].level) < 0)
			errs = B(ENOTFOUND);
	}
	const tp_job_shape *mp = nmix || fz_u8(in) & 1 ? mix : NULL;
	if (!nmix && mp)
		mp = NULL; /* an empty mix given as NULL */
	uint64_t fp = tp_cluster_fingerprint(s->c);
	tp_frag *f = NULL;
	arm_on(&s->arm);
	int rc = tp_frag_report(s->c, mp, mp ? nmix : 0, &f);
	arm_off(&s->arm);
	FZ_CHECK(tp_cluster_fingerprint(s->c) == fp, "frag_report changed the cluster");
	if (rc == 0) {
		FZ_CHECK(!errs, "frag_report accepted a bad mix");
		ref_compare_frag(&s->m, s->c, f, mp, mp ? nmix : 0);
		tp_frag_destroy(f);
		return;
	}
	FZ_CHECK(rc == TP_ENOMEM || (f && tp_frag_errmsg(f)[0]),
	         "a failed frag_report gave no report with its reason");
	FZ_CHECK(!f || tp_frag_domain_count(f, 0) == 0, "a failed frag_report has figures");
	tp_frag_destroy(f);
	FZ_CHECK((rc == TP_ENOMEM && s->arm.hit) || (errs & REF_BIT(rc)),
	         "frag_report: %s, expected %#x", tp_err_name(rc), errs);
}

/* ---- defragmentation plans ------------------------------------------------------------------ */

static const tp_defrag_policy *pick_policy(struct fz_in *in, tp_defrag_policy *pol)
{
	tp_defrag_policy init = TP_DEFRAG_POLICY_INIT;
	*pol = init;
	uint8_t v = fz_u8(in);
	if (v < 64)
		return NULL;
	static const uint32_t moves[] = {UINT32_MAX, 0, 1, 2, 3};
	static const double costs[] = {-1.0, 0.0, 120.0, 1e9};
	pol->migrate = v & 1;
	pol->preempt = (v >> 1) & 1;
	pol->allow_interactive = (v >> 2) & 1;
	pol->max_moves = fz_wide_pick(in, moves, 5);
	pol->max_cost_s = fz_wide_double(in, costs, 4);
	uint8_t g = fz_u8(in);
	if (g >= 254)
		FZ_TRACE_ESCAPE(in, g, 4);
	pol->min_priority_gap = g == 255 ? INT_MAX : g == 254 ? INT_MIN : (int)(g % 4) - 1;
	if (v >= 250)
		pol->version = 0;
	return pol;
}

struct jobinfo {
	char id[REF_MAX_ID + 1];
	tp_job_options o;
	uint32_t ndev;
};

/* Every step within the policy, and the figures the plan reports. */
static void check_plan_policy(struct st *s, const tp_plan *plan, const tp_defrag_policy *pol,
                              int priority, bool compaction)
{
	tp_defrag_policy dflt = TP_DEFRAG_POLICY_INIT;
	if (!pol)
		pol = &dflt;
	size_t ns = tp_plan_step_count(plan);
	uint32_t moved = 0, mdev = 0;
	double cost = 0;
	for (size_t i = 0; i < ns; i++) {
		tp_step_action a;
		const char *job;
		const uint32_t *from, *to;
		size_t nfrom, nto;
		FZ_CHECK(tp_plan_step(plan, i, &a, &job, &from, &nfrom, &to, &nto) == 0, "step %zu", i);
		if (a == TP_STEP_PLACE) {
			FZ_CHECK(!compaction && i + 1 == ns, "a place step at %zu of %zu", i, ns);
			continue;
		}
		int j = ref_job_find(&s->m, job);
		FZ_CHECK(j >= 0, "step %zu moves '%s', not running", i, job);
		tp_job_options o = {.version = TP_JOB_OPTIONS_VERSION};
		tp_cluster_job_options(s->c, job, &o);
		FZ_CHECK(o.job_class != TP_CLASS_INTERACTIVE || pol->allow_interactive,
		         "step %zu touches interactive job '%s'", i, job);
		if (a == TP_STEP_MIGRATE)
			FZ_CHECK(pol->migrate && o.migratable && o.priority <= priority,
			         "step %zu migrates '%s' (migratable %d, priority %d vs %d)", i, job,
			         o.migratable, o.priority, priority);
		else
			FZ_CHECK(pol->preempt && o.preemptible &&
			             (long)o.priority <= (long)priority - pol->min_priority_gap,
			         "step %zu preempts '%s' (preemptible %d, priority %d vs %d gap %d)", i,
			         job, o.preemptible, o.priority, priority, pol->min_priority_gap);
		moved++;
		mdev += s->m.jobs[j].ndev;
		cost += o.checkpoint_s * s->m.jobs[j].ndev;
	}
	FZ_CHECK(compaction || ns >= 1, "a request plan without steps");
	FZ_CHECK(tp_plan_moved_job_count(plan) == moved, "moved_jobs %u, steps say %u",
	         tp_plan_moved_job_count(plan), moved);
	FZ_CHECK(tp_plan_moved_device_count(plan) == mdev, "moved_devices %u, steps say %u",
	         tp_plan_moved_device_count(plan), mdev);
	FZ_CHECK(fabs(tp_plan_cost_s(plan) - cost) <= 1e-6 * (1 + cost), "cost %g, steps say %g",
	         tp_plan_cost_s(plan), cost);
	FZ_CHECK(moved <= pol->max_moves, "%u moves, policy allows %u", moved, pol->max_moves);
	if (pol->max_cost_s >= 0)
		FZ_CHECK(cost <= pol->max_cost_s + 1e-9, "cost %g over the policy's %g", cost,
		         pol->max_cost_s);
}

/* Apply a plan's steps in order, mirroring each in the model and checking every one. */
static void apply_plan(struct st *s, struct fz_in *in, const tp_plan *plan, const tp_request *r)
{
	size_t ns = tp_plan_step_count(plan);
	if (ns > 1 && fz_u8(in) >= 224) { /* out of order: refused, nothing changes */
		uint64_t fp = tp_cluster_fingerprint(s->c);
		int rc = tp_plan_apply_step(s->c, plan, 1, NULL);
		FZ_CHECK(rc == TP_EINVAL, "step 1 applied before step 0: %s", tp_err_name(rc));
		failed_unchanged(s, rc, B(EINVAL), fp, "apply_step out of order");
	}
	for (size_t i = 0; i < ns; i++) {
		tp_step_action a;
		const char *job;
		const uint32_t *from, *to;
		size_t nfrom, nto;
		tp_plan_step(plan, i, &a, &job, &from, &nfrom, &to, &nto);
		int j = ref_job_find(&s->m, job);
		if (a == TP_STEP_MIGRATE) {
			FZ_CHECK(j >= 0 && nto == s->m.jobs[j].ndev, "migration of '%s' to %zu devices",
			         job, nto);
			for (size_t k = 0; k < nto; k++)
				FZ_CHECK(to[k] < s->m.ndev && !s->m.down[to[k]] && !s->m.cordoned[to[k]] &&
				             (s->m.holder[to[k]] < 0 || s->m.holder[to[k]] == j),
				         "migration of '%s' onto device %u, not free", job, to[k]);
		} else if (a == TP_STEP_PREEMPT) {
			FZ_CHECK(j >= 0 && nto == 0, "preemption of '%s'", job);
		} else {
			for (size_t k = 0; k < nto; k++)
				FZ_CHECK(ref_dev_free(&s->m, to[k]), "place step onto device %u, not free",
				         to[k]);
			const char *why = ref_placement_problem(s->c, r, r->tenant, to, nto, true);
			FZ_CHECK(!why, "the plan's place step breaks the request: %s", why);
		}
		uint64_t fp = tp_cluster_fingerprint(s->c);
		arm_on(&s->arm);
		int rc = tp_plan_apply_step(s->c, plan, i, NULL);
		arm_off(&s->arm);
		FZ_TRACE_LINE("  apply_step %zu (action %d): %s\n", i, (int)a, tp_err_name(rc));
		if (rc) {
			/* the place step commits the request's id, which may already be running */
			failed_unchanged(s, rc, B(ENOMEM) | (a == TP_STEP_PLACE ? B(EEXIST) : 0), fp,
			                 "apply_step");
			return; /* later steps are out of order now */
		}
		s->writes++;
		if (a == TP_STEP_MIGRATE)
			ref_rebind(&s->m, j, to, nto);
		else if (a == TP_STEP_PREEMPT)
			ref_release(&s->m, j);
		else {
			ref_assign(&s->m, r->id ? r->id : "new", r->tenant, to, nto);
			if (fz_request_pairs(r))
				ref_set_nics(&s->m, (int)s->m.njobs - 1, NULL);
		}
		ref_compare(&s->m, s->c);
	}
}

static void op_defrag(struct st *s, struct fz_in *in, bool compact)
{
	if (!have_defrag() || (compact && !tp_defrag_compact))
		return;
	struct fz_request q;
	fz_decode_request(in, s->t, s->m.njobs ? s->m.jobs[0].id : NULL, &q);
	fz_trace_request(compact ? "compact" : "defrag", &q.r);
	tp_defrag_policy polbuf;
	const tp_defrag_policy *pol = pick_policy(in, &polbuf);
	unsigned nl = tp_topology_level_count(s->t);
	uint8_t v = fz_u8(in);
	const char *level = v == 255 ? "nosuch" : tp_topology_level_name(s->t, v % nl);
	uint32_t ndom = fz_wide(in, 4);
	uint64_t fp = tp_cluster_fingerprint(s->c);
	tp_plan *plan = NULL;
	arm_on(&s->arm);
	int rc = compact ? tp_defrag_compact(s->c, level, ndom, pol, &plan)
	                 : tp_defrag_plan(s->c, &q.r, pol, &plan);
	arm_off(&s->arm);
	const char *what = compact ? "defrag_compact" : "defrag_plan";
	FZ_CHECK(tp_cluster_fingerprint(s->c) == fp, "%s changed the cluster (%s)", what,
	         tp_err_name(rc));
	ref_compare(&s->m, s->c);
	FZ_CHECK(fz_code_defined(rc), "%s: undefined code %d", what, rc);
	FZ_TRACE_LINE("  %s: %s (count %u)\n", what, tp_err_name(rc), q.r.count);
	FZ_CHECK(fz_big_alloc == 0, "%s (count %u) asked for %zu bytes at once (%s)", what,
	         q.r.count, fz_big_alloc, tp_err_name(rc));
	if (rc == TP_ENOMEM) {
		FZ_CHECK(s->arm.hit, "%s: ENOMEM without an injected failure", what);
		tp_plan_destroy(plan);
		return;
	}
	if (!compact && plainly_invalid(&q.r))
		FZ_CHECK(rc == TP_EINVAL || rc == TP_ENOTFOUND, "%s of a plainly invalid request: %s", what,
		         tp_err_name(rc));
	if (compact && ndom == 0)
		FZ_CHECK(rc == TP_EINVAL, "compact of 0 domains: %s", tp_err_name(rc));
	if (pol && pol->version != TP_DEFRAG_POLICY_VERSION)
		FZ_CHECK(rc == TP_EINVAL, "%s with a bad policy version: %s", what, tp_err_name(rc));
	if (!plan) {
		FZ_CHECK(rc == TP_EINVAL, "%s: no plan object for %s", what, tp_err_name(rc));
		return;
	}
	FZ_CHECK(tp_plan_status(plan) == rc, "plan status %d, returned %d", tp_plan_status(plan),
	         rc);
	if (rc) {
		FZ_CHECK(*tp_plan_errmsg(plan), "%s failed (%s) without a message", what,
		         tp_err_name(rc));
		FZ_CHECK(tp_plan_step_count(plan) == 0, "a failed plan has steps");
		tp_plan_destroy(plan);
		return;
	}
	check_plan_policy(s, plan, pol, compact ? 0 : q.r.priority, compact);
	const tp_placement *pp = tp_plan_placement(plan);
	FZ_CHECK(compact ? pp == NULL : pp != NULL, "plan placement");
	if (fz_u8(in) < 200) {
		apply_plan(s, in, plan, &q.r);
		if (compact) {
			int l = tp_topology_level_by_name(s->t, level);
			uint32_t full = 0;
			for (uint32_t d = 0; d < tp_topology_domain_count(s->t, (unsigned)l); d++) {
				uint32_t first, n, k = 0;
				tp_topology_domain_devices(s->t, (unsigned)l, d, &first, &n);
				for (uint32_t x = first; x < first + n; x++)
					k += ref_dev_free(&s->m, x);
				full += k == n;
			}
			FZ_CHECK(full >= ndom, "compaction left %u fully free domains, %u wanted", full,
			         ndom);
		}
	}
	tp_plan_destroy(plan);
}

/* ---- the driver ---------------------------------------------------------------------------- */

/* Operations run, for the soak driver's report (soak.c). */
unsigned long long fz_soak_ops;

static void run(struct fz_in *in, const tp_topology *t)
{
	struct st s = {.t = t, .arm = {-1, false}};
	uint8_t v = fz_u8(in);
	if (v >= 240) { /* creation under allocation failures */
		long live = tp_test_alloc_state.live;
		tp_test_alloc_fail_at(v - 240);
		int rc = tp_cluster_create(&s.c, t, &fz_allocator);
		tp_test_alloc_fail_at(-1);
		FZ_CHECK(rc == 0 || (rc == TP_ENOMEM && !s.c && tp_test_alloc_state.live == live),
		         "cluster_create under failure: %s", tp_err_name(rc));
		tp_cluster_destroy(s.c);
		s.c = NULL;
	}
	int rc = tp_cluster_create(&s.c, t, &fz_allocator);
	FZ_CHECK(rc == 0, "cluster_create: %s", tp_err_name(rc));
	ref_init(&s.m, tp_topology_device_count(t));
	ref_compare(&s.m, s.c);
	for (unsigned i = 0; i < MAX_OPS && fz_more(in); i++) {
		uint8_t op = fz_u8(in) % 17;
		switch (op) {
		case 0: case 1: case 2: op_assign(&s, in); break;
		case 3: op_release(&s, in); break;
		case 4: op_health(&s, in, false); break;
		case 5: op_health(&s, in, true); break;
		case 6: op_savepoint(&s); break;
		case 7: op_close(&s, in, true); break;
		case 8: op_close(&s, in, false); break;
		case 9: case 10: op_place(&s, in); break;
		case 11: op_replace(&s, in); break;
		case 12: op_frag(&s, in); break;
		case 13: op_defrag(&s, in, false); break;
		case 14: op_defrag(&s, in, true); break;
		case 15: s.arm.at = fz_below(in, 12); break;
		default: op_commit_pending(&s); break;
		}
		fz_soak_ops++;
		ref_compare(&s.m, s.c);
		FZ_TRACE_LINE("op %u: fingerprint %016llx, %zu job(s)\n", op,
		              (unsigned long long)tp_cluster_fingerprint(s.c), s.m.njobs);
	}
	pending_drop(&s);
	close_savepoints(&s, 0);
	ref_free(&s.m);
	tp_cluster_destroy(s.c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tp_test_alloc_reset();
	fz_big_alloc = 0;
	struct fz_in in = {data, size};
	tp_topology *t = random_topology(&in);
	if (t) {
		FZ_TRACE_LINE("topology: %u level(s), %u node(s), %u device(s)\n",
		              tp_topology_level_count(t), tp_topology_node_count(t),
		              tp_topology_device_count(t));
		FZ_CHECK(tp_topology_device_count(t) <= FZ_MAX_DEVICES, "topology too large for the model");
		run(&in, t);
		tp_topology_destroy(t);
	}
	FZ_CHECK(fz_big_alloc == 0, "the library asked for %zu bytes at once", fz_big_alloc);
	FZ_CHECK(tp_test_alloc_state.live == 0, "%ld block(s) leaked", tp_test_alloc_state.live);
	return 0;
}
