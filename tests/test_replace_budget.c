/* SPDX-License-Identifier: MIT */
/*
 * tp_replace_ext's work budget: a job with many scattered failures makes replacement quadratic
 * (one sub-request per failed group, each reading the whole job); the budget stops it with
 * TP_ELIMIT, a message naming the field, and the cluster unchanged.
 */
#include <stdio.h>

#include "testutil.h"

#define NODES 64u          /* 4 SUs x 16 nodes of 8 GPUs */
#define JOB (NODES * 4u)   /* the job holds GPUs 0-3 of every node */
#define FAILED (JOB / 2u)  /* one GPU of each of its groups of 2 fails */

static tp_request group_shape(void)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = JOB;
	r.group_size = 2;
	r.group_level = "node";
	return r;
}

/* The hostile case: JOB ranks in groups of 2 inside a node, one rank of every group failed,
 * so that each failure is its own sub-request (FAILED of them, JOB ranks read by each). */
static tp_cluster *hostile(tp_topology **t, uint32_t *failed)
{
	cr_assert_eq(tp_topology_generate_hgx(t, 4, 16, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(*t);
	uint32_t devs[JOB];
	for (uint32_t i = 0; i < JOB; i++)
		devs[i] = i / 4 * 8 + i % 4;
	tp_request shape = group_shape();
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	cr_assert_eq(tp_cluster_assign(c, "big", devs, JOB, &o), 0, "%s", tp_cluster_errmsg(c));
	for (uint32_t i = 0; i < FAILED; i++)
		failed[i] = devs[2 * i];
	return c;
}

static void teardown(tp_cluster *c, tp_topology *t)
{
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(replace_budget, options_init_fills_the_defaults)
{
	tp_replace_options o;
	memset(&o, 0x5a, sizeof o);
	cr_assert_eq(tp_replace_options_init(&o, TP_REPLACE_OPTIONS_VERSION), 0);
	cr_assert_eq(o.version, TP_REPLACE_OPTIONS_VERSION);
	cr_assert_eq(o.max_work, TP_REPLACE_MAX_WORK);
	cr_assert_eq(o.max_time_us, 0);
	cr_assert_eq(tp_replace_options_init(NULL, TP_REPLACE_OPTIONS_VERSION), TP_EINVAL);
	cr_assert_eq(tp_replace_options_init(&o, 0), TP_EINVAL);
	cr_assert_eq(tp_replace_options_init(&o, TP_REPLACE_OPTIONS_VERSION + 1), TP_EINVAL);
}

Test(replace_budget, unknown_version_is_refused_with_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	uint32_t failed[FAILED];
	tp_cluster *c = hostile(&t, failed);
	unsigned bad[] = {0, 2, 77};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		tp_replace_options o = TP_REPLACE_OPTIONS_INIT;
		o.version = bad[i];
		tp_placement *p = NULL;
		int rc = tp_replace_ext(c, "big", failed, 1, &o, &p);
		TP_ASSERT_ERR(rc, TP_EINVAL, tp_placement_errmsg(p), "replace.opts.version");
		cr_assert_eq(tp_placement_status(p), TP_EINVAL);
		tp_placement_destroy(p);
	}
	teardown(c, t);
}

/* The budget stops the search before the sub-request it cannot pay for: with room for 10 of
 * them, 10 are solved and the 11th is refused. */
Test(replace_budget, work_budget_stops_a_quadratic_replacement)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	uint32_t failed[FAILED];
	tp_cluster *c = hostile(&t, failed);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_replace_options o = TP_REPLACE_OPTIONS_INIT;
	o.max_work = 10u * JOB + JOB - 1;
	tp_placement *p = NULL;
	int rc = tp_replace_ext(c, "big", failed, FAILED, &o, &p);
	TP_ASSERT_ERR(rc, TP_ELIMIT, tp_placement_errmsg(p),
	              "replace: the work budget ran out after 10 of 128 sub-requests of job 'big' "
	              "(256 ranks each): opts.max_work 2815 (job ranks visited) is spent");
	cr_assert_eq(tp_placement_status(p), TP_ELIMIT);
	size_t n = 99;
	tp_placement_devices(p, &n);
	cr_assert_eq(n, 0, "a stopped replacement has no devices");
	cr_assert_eq(tp_commit(c, p, NULL), TP_EINVAL, "a stopped replacement cannot be committed");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp, "the stopped call changed the state");
	char buf[128];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	teardown(c, t);
}

/* Enough budget (or none) gives exactly tp_replace()'s answer, and tp_replace() is the
 * default budget, which this case fits. */
Test(replace_budget, enough_budget_gives_the_unbudgeted_answer)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	uint32_t failed[FAILED];
	tp_cluster *c = hostile(&t, failed);
	tp_placement *ref = NULL, *p = NULL, *q = NULL;
	cr_assert_eq(tp_replace(c, "big", failed, FAILED, &ref), 0, "%s", tp_placement_errmsg(ref));
	tp_replace_options o = TP_REPLACE_OPTIONS_INIT;
	o.max_work = (uint64_t)FAILED * JOB; /* exactly what it needs */
	cr_assert_eq(tp_replace_ext(c, "big", failed, FAILED, &o, &p), 0, "%s",
	             tp_placement_errmsg(p));
	o.max_work = UINT64_MAX;
	cr_assert_eq(tp_replace_ext(c, "big", failed, FAILED, &o, &q), 0, "%s",
	             tp_placement_errmsg(q));
	size_t nr = 0, np = 0, nq = 0;
	const uint32_t *dr = tp_placement_devices(ref, &nr), *dp = tp_placement_devices(p, &np),
	               *dq = tp_placement_devices(q, &nq);
	cr_assert(nr == JOB && np == JOB && nq == JOB);
	cr_assert(memcmp(dr, dp, JOB * sizeof *dr) == 0 && memcmp(dr, dq, JOB * sizeof *dr) == 0);
	cr_assert_eq(tp_commit(c, p, NULL), 0, "%s", tp_cluster_errmsg(c));
	tp_placement_destroy(ref);
	tp_placement_destroy(p);
	tp_placement_destroy(q);
	teardown(c, t);
}

/* One microsecond cannot cover 128 sub-requests: the time limit stops the call the same way. */
Test(replace_budget, time_limit_stops_the_call)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	uint32_t failed[FAILED];
	tp_cluster *c = hostile(&t, failed);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_replace_options o = TP_REPLACE_OPTIONS_INIT;
	o.max_work = UINT64_MAX;
	o.max_time_us = 1;
	tp_placement *p = NULL;
	int rc = tp_replace_ext(c, "big", failed, FAILED, &o, &p);
	TP_ASSERT_ERR(rc, TP_ELIMIT, tp_placement_errmsg(p), "(opts.max_time_us 1); raise it");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	teardown(c, t);
}

/* Allocation failures on the way to the budget's stop: ENOMEM with nothing leaked, or the
 * stop itself once every allocation succeeds. */
Test(replace_budget, allocation_failures_before_the_stop)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	uint32_t failed[FAILED];
	tp_cluster *c = hostile(&t, failed);
	uint64_t fp = tp_cluster_fingerprint(c);
	tp_replace_options o = TP_REPLACE_OPTIONS_INIT;
	o.max_work = 3u * JOB;
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM; n++) {
		cr_assert(n < 100000, "no end to the allocations");
		tp_placement *p = NULL;
		tp_test_alloc_fail_at(n);
		rc = tp_replace_ext(c, "big", failed, FAILED, &o, &p);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM)
			cr_assert_null(p, "ENOMEM leaves no result");
		else
			TP_ASSERT_ERR(rc, TP_ELIMIT, tp_placement_errmsg(p), "after 3 of 128");
		tp_placement_destroy(p);
		cr_assert_eq(tp_cluster_fingerprint(c), fp);
	}
	teardown(c, t);
}
