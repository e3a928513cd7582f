/* SPDX-License-Identifier: MIT */
/*
 * The init functions of the options structs (tp_<struct>_init(ptr, version), as libgit2's
 * git_clone_options_init): each gives its _INIT macro byte for byte, refuses a NULL pointer and
 * an unknown version without writing, and for a struct the library still reads in older
 * versions writes only the fields of the version asked for. The structs they fill are
 * accepted by the calls that take them.
 */
#include <stddef.h>

#include "testutil.h"
#include "topoplace-nvsmi.h"
#include "topoplace-sizing.h"
#include "topoplace-slurm.h"

#define FILL 0xA5

/* A struct filled with FILL bytes, so that a byte the init function did not write shows. */
#define FILLED(type, name)                                                                     \
	type name;                                                                                 \
	memset(&name, FILL, sizeof name)

static bool untouched(const void *p, size_t from, size_t to)
{
	const unsigned char *b = p;
	for (size_t i = from; i < to; i++)
		if (b[i] != FILL)
			return false;
	return true;
}

/* init(&x, version) gives the macro (static, so its padding is zero as the library's is),
 * and refuses NULL, version 0 and the next version with nothing written. */
#define CHECK_INIT(type, fn, macro, ver)                                                       \
	do {                                                                                       \
		static const type want = macro;                                                        \
		FILLED(type, got);                                                                     \
		cr_assert_eq(fn(&got, ver), 0, #fn);                                                   \
		cr_assert_eq(memcmp(&got, &want, sizeof want), 0, #fn " differs from " #macro);        \
		FILLED(type, bad);                                                                     \
		cr_assert_eq(fn(&bad, 0), TP_EINVAL, #fn "(0)");                                       \
		cr_assert_eq(fn(&bad, (ver) + 1), TP_EINVAL, #fn "(next ver)");                        \
		cr_assert(untouched(&bad, 0, sizeof bad), #fn " wrote on a refused version");          \
		cr_assert_eq(fn(NULL, ver), TP_EINVAL, #fn "(NULL)");                                  \
	} while (0)

Test(options, every_init_gives_its_macro_and_refuses_what_it_does_not_know)
{
	CHECK_INIT(tp_node_options, tp_node_options_init, TP_NODE_OPTIONS_INIT,
	           TP_NODE_OPTIONS_VERSION);
	CHECK_INIT(tp_request, tp_request_init, TP_REQUEST_INIT, TP_REQUEST_VERSION);
	CHECK_INIT(tp_job_options, tp_job_options_init, TP_JOB_OPTIONS_INIT,
	           TP_JOB_OPTIONS_VERSION);
	CHECK_INIT(tp_cluster_options, tp_cluster_options_init, TP_CLUSTER_OPTIONS_INIT,
	           TP_CLUSTER_OPTIONS_VERSION);
	CHECK_INIT(tp_fit, tp_fit_init, TP_FIT_INIT, TP_FIT_VERSION);
	CHECK_INIT(tp_defrag_policy, tp_defrag_policy_init, TP_DEFRAG_POLICY_INIT,
	           TP_DEFRAG_POLICY_VERSION);
	CHECK_INIT(tp_defrag_stats, tp_defrag_stats_init, TP_DEFRAG_STATS_INIT,
	           TP_DEFRAG_STATS_VERSION);
	CHECK_INIT(tp_step_model, tp_step_model_init, TP_STEP_MODEL_INIT, TP_STEP_MODEL_VERSION);
	CHECK_INIT(tp_slurm_options, tp_slurm_options_init, TP_SLURM_OPTIONS_INIT,
	           TP_SLURM_OPTIONS_VERSION);
	CHECK_INIT(tp_nvsmi_options, tp_nvsmi_options_init, TP_NVSMI_OPTIONS_INIT,
	           TP_NVSMI_OPTIONS_VERSION);
	CHECK_INIT(tp_sizing_options, tp_sizing_options_init, TP_SIZING_OPTIONS_INIT,
	           TP_SIZING_OPTIONS_VERSION);
	CHECK_INIT(tp_model_desc, tp_model_desc_init, TP_MODEL_DESC_INIT, TP_MODEL_DESC_VERSION);
	CHECK_INIT(tp_pd_request, tp_pd_request_init, TP_PD_REQUEST_INIT, TP_PD_REQUEST_VERSION);
	CHECK_INIT(tp_service_caps, tp_service_caps_init, TP_SERVICE_CAPS_INIT,
	           TP_SERVICE_CAPS_VERSION);
	CHECK_INIT(tp_replace_options, tp_replace_options_init, TP_REPLACE_OPTIONS_INIT,
	           TP_REPLACE_OPTIONS_VERSION);
	TP_ASSERT_NO_LEAKS();
}

/* An older version: the defaults of the fields that version has, its number in the version
 * field, and not one byte past its end (a caller built against the old header has no more). */
#define CHECK_OLD(type, fn, macro, ver, end)                                                   \
	do {                                                                                       \
		static const type want = macro;                                                        \
		FILLED(type, got);                                                                     \
		cr_assert_eq(fn(&got, ver), 0, #fn "(%u)", (unsigned)(ver));                           \
		cr_assert_eq(got.version, (ver), #fn "(%u)", (unsigned)(ver));                         \
		size_t vsz = sizeof got.version;                                                       \
		cr_assert_eq(memcmp((char *)&got + vsz, (const char *)&want + vsz, (end) - vsz), 0,    \
		             #fn "(%u): a field of that version differs", (unsigned)(ver));            \
		cr_assert(untouched(&got, (end), sizeof got), #fn "(%u) wrote past its version",       \
		          (unsigned)(ver));                                                            \
	} while (0)

Test(options, an_older_version_gets_only_its_own_fields)
{
	CHECK_OLD(tp_request, tp_request_init, TP_REQUEST_INIT, 1,
	          offsetof(tp_request, gpu_nic_pairs));
	CHECK_OLD(tp_request, tp_request_init, TP_REQUEST_INIT, 2, offsetof(tp_request, comm));
	CHECK_OLD(tp_request, tp_request_init, TP_REQUEST_INIT, 3, offsetof(tp_request, service));
	CHECK_OLD(tp_request, tp_request_init, TP_REQUEST_INIT, 4, offsetof(tp_request, box_level));
	CHECK_OLD(tp_pd_request, tp_pd_request_init, TP_PD_REQUEST_INIT, 1,
	          offsetof(tp_pd_request, kv_token_bytes));
	CHECK_OLD(tp_defrag_policy, tp_defrag_policy_init, TP_DEFRAG_POLICY_INIT, 1,
	          offsetof(tp_defrag_policy, allow_less_local));
	CHECK_OLD(tp_defrag_policy, tp_defrag_policy_init, TP_DEFRAG_POLICY_INIT, 2,
	          offsetof(tp_defrag_policy, max_candidates));
	CHECK_OLD(tp_defrag_policy, tp_defrag_policy_init, TP_DEFRAG_POLICY_INIT, 3,
	          offsetof(tp_defrag_policy, prefer_level));
	CHECK_OLD(tp_slurm_options, tp_slurm_options_init, TP_SLURM_OPTIONS_INIT, 1,
	          offsetof(tp_slurm_options, warnbuf));
	CHECK_OLD(tp_service_caps, tp_service_caps_init, TP_SERVICE_CAPS_INIT, 1,
	          offsetof(tp_service_caps, fd_kind));
	TP_ASSERT_NO_LEAKS();
}

static tp_topology *two_racks(void)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, 1, 2, &tp_test_allocator), 0);
	return t;
}

/* What the init functions fill is what the calls take: a cluster from initialised options,
 * an assignment with initialised job options, a placement from an initialised request read
 * through an initialised fit, a plan from every policy version, read through initialised
 * stats. */
Test(options, initialised_structs_are_accepted_by_their_calls)
{
	tp_topology *t = two_racks();
	tp_cluster_options co;
	cr_assert_eq(tp_cluster_options_init(&co, TP_CLUSTER_OPTIONS_VERSION), 0);
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create_ext(&c, t, &tp_test_allocator, &co), 0);

	tp_job_options jo;
	cr_assert_eq(tp_job_options_init(&jo, TP_JOB_OPTIONS_VERSION), 0);
	uint32_t devs[4] = {0, 1, 2, 3};
	cr_assert_eq(tp_cluster_assign(c, "a", devs, 4, &jo), 0, "%s", tp_cluster_errmsg(c));

	tp_request r;
	cr_assert_eq(tp_request_init(&r, TP_REQUEST_VERSION), 0);
	r.count = 142; /* more than is free (140): a failed result with fit figures */
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), TP_EBUSY);
	tp_fit fit;
	cr_assert_eq(tp_fit_init(&fit, TP_FIT_VERSION), 0);
	cr_assert_eq(tp_placement_fit(p, &fit), 0);
	cr_assert_eq(fit.needed, 142);
	cr_assert_eq(fit.free_total, 144 - 4);
	tp_placement_destroy(p);

	for (unsigned v = 1; v <= TP_DEFRAG_POLICY_VERSION; v++) {
		tp_defrag_policy pol;
		cr_assert_eq(tp_defrag_policy_init(&pol, v), 0);
		tp_request big;
		cr_assert_eq(tp_request_init(&big, 1), 0, "an old request version is accepted");
		big.count = 72;
		big.required = "rack";
		tp_plan *plan = NULL;
		int rc = tp_defrag_plan(c, &big, &pol, &plan);
		cr_assert_eq(rc, 0, "policy version %u: %s", v, tp_plan_errmsg(plan));
		tp_defrag_stats st;
		cr_assert_eq(tp_defrag_stats_init(&st, TP_DEFRAG_STATS_VERSION), 0);
		cr_assert_eq(tp_plan_stats(plan, &st), 0);
		tp_plan_destroy(plan);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Allocation failures: a cluster made from initialised options fails cleanly at every
 * allocation, and an initialised request then places on it. */
Test(options, allocation_failures_with_initialised_options)
{
	tp_topology *t = two_racks();
	tp_cluster_options co;
	cr_assert_eq(tp_cluster_options_init(&co, TP_CLUSTER_OPTIONS_VERSION), 0);
	for (long n = 0;; n++) {
		tp_cluster *c = NULL;
		tp_test_alloc_fail_at(n);
		int rc = tp_cluster_create_ext(&c, t, &tp_test_allocator, &co);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			tp_request r;
			cr_assert_eq(tp_request_init(&r, TP_REQUEST_VERSION), 0);
			r.count = 8;
			tp_placement *p = NULL;
			cr_assert_eq(tp_place(c, &r, &p), 0);
			tp_placement_destroy(p);
			tp_cluster_destroy(c);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM, "allocation %ld", n);
		cr_assert_null(c);
	}
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
