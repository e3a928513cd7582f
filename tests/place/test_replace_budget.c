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
struct hostile {
	tp_topology *t;
	tp_cluster *c;
	uint64_t fp; /* the cluster's fingerprint before any replace */
	uint32_t failed[FAILED];
};

static void hostile_setup(struct hostile *h)
{
	tp_test_alloc_reset();
	cr_assert_eq(tp_topology_generate_hgx(&h->t, 4, 16, &tp_test_allocator), 0);
	h->c = tp_test_cluster(h->t);
	uint32_t devs[JOB];
	for (uint32_t i = 0; i < JOB; i++)
		devs[i] = i / 4 * 8 + i % 4;
	tp_request shape = group_shape();
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	cr_assert_eq(tp_cluster_assign(h->c, "big", devs, JOB, &o), 0, "%s",
	             tp_cluster_errmsg(h->c));
	for (uint32_t i = 0; i < FAILED; i++)
		h->failed[i] = devs[2 * i];
	h->fp = tp_cluster_fingerprint(h->c);
}

/* The cluster is as before (a replacement only reads it), and nothing leaked. */
static void hostile_teardown(struct hostile *h)
{
	cr_assert_eq(tp_cluster_fingerprint(h->c), h->fp, "a replace changed the state");
	char buf[128];
	cr_assert_eq(tp_cluster_check(h->c, buf, sizeof buf), 0, "%s", buf);
	tp_cluster_destroy(h->c);
	tp_topology_destroy(h->t);
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
	struct hostile h;
	hostile_setup(&h);
	tp_cluster *c = h.c;
	const uint32_t *failed = h.failed;
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
	hostile_teardown(&h);
}

/* The budget stops the search before the sub-request it cannot pay for: with room for 10 of
 * them, 10 are solved and the 11th is refused. */
Test(replace_budget, work_budget_stops_a_quadratic_replacement)
{
	struct hostile h;
	hostile_setup(&h);
	tp_cluster *c = h.c;
	const uint32_t *failed = h.failed;
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
	hostile_teardown(&h);
}

/* Enough budget (or none) gives exactly tp_replace()'s answer, and tp_replace() is the
 * default budget, which this case fits. */
Test(replace_budget, enough_budget_gives_the_unbudgeted_answer)
{
	struct hostile h;
	hostile_setup(&h);
	tp_cluster *c = h.c;
	const uint32_t *failed = h.failed;
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
	h.fp = tp_cluster_fingerprint(c); /* the commit is the one change */
	tp_placement_destroy(ref);
	tp_placement_destroy(p);
	tp_placement_destroy(q);
	hostile_teardown(&h);
}

/* One microsecond cannot cover 128 sub-requests: the time limit stops the call the same way. */
Test(replace_budget, time_limit_stops_the_call)
{
	struct hostile h;
	hostile_setup(&h);
	tp_cluster *c = h.c;
	const uint32_t *failed = h.failed;
	tp_replace_options o = TP_REPLACE_OPTIONS_INIT;
	o.max_work = UINT64_MAX;
	o.max_time_us = 1;
	tp_placement *p = NULL;
	int rc = tp_replace_ext(c, "big", failed, FAILED, &o, &p);
	TP_ASSERT_ERR(rc, TP_ELIMIT, tp_placement_errmsg(p), "(opts.max_time_us 1); raise it");
	tp_placement_destroy(p);
	cr_assert_eq(tp_cluster_fingerprint(c), h.fp);
	hostile_teardown(&h);
}

/* Allocation failures on the way to the budget's stop: ENOMEM with nothing leaked, or the
 * stop itself once every allocation succeeds. */
Test(replace_budget, allocation_failures_before_the_stop)
{
	struct hostile h;
	hostile_setup(&h);
	tp_cluster *c = h.c;
	const uint32_t *failed = h.failed;
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
		cr_assert_eq(tp_cluster_fingerprint(c), h.fp);
	}
	hostile_teardown(&h);
}
