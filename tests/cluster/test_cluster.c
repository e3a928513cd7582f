/* SPDX-License-Identifier: MIT */
/*
 * The cluster state (cluster.c): assign / release / health with every aggregate compared to a
 * brute-force recount through the public queries after every step, validation errors, savepoints,
 * the fingerprint, the index behind tp_cluster_tightest(), a randomized sequence against a shadow
 * model, and allocation-failure loops.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "cluster_impl.h"
#include "testutil.h"

/* ---- fixtures ------------------------------------------------------------------------------ */

static tp_topology *nvl72(unsigned blocks, unsigned racks)
{
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_nvl72(&t, blocks, racks, &tp_test_allocator), 0);
	return t;
}

/* zone/rack/node with uneven nodes and racks, and a failure-domain kind "power":
 *   z1/r1: n1 (4), n2 (2)    z1/r2: n3 (8)    z2/r3: n4 (1), n5 (4), n6 (4) */
static tp_topology *hand(void)
{
	const char *levels[] = {"zone", "rack", "node"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 3, &tp_test_allocator), 0);
	struct {
		const char *name, *zone, *rack;
		unsigned gpus;
	} nodes[] = {{"n1", "z1", "r1", 4}, {"n2", "z1", "r1", 2}, {"n3", "z1", "r2", 8},
	             {"n4", "z2", "r3", 1}, {"n5", "z2", "r3", 4}, {"n6", "z2", "r3", 4}};
	for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++) {
		const char *path[] = {nodes[i].zone, nodes[i].rack};
		cr_assert_eq(tp_topology_builder_add_node(b, nodes[i].name, path, nodes[i].gpus, NULL),
		             0, "%s", tp_topology_builder_errmsg(b));
	}
	cr_assert_eq(tp_topology_builder_add_failure_domain(b, "power", "pdu-a", "n1", -1), 0);
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* One level only: the node level is the top and is indexed. Nodes of 1..4 devices. */
static tp_topology *flat(unsigned nnodes)
{
	const char *levels[] = {"host"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, levels, 1, &tp_test_allocator), 0);
	for (unsigned i = 0; i < nnodes; i++) {
		char name[16];
		snprintf(name, sizeof name, "h%u", i);
		cr_assert_eq(tp_topology_builder_add_node(b, name, NULL, 1 + i % 4, NULL), 0, "%s",
		             tp_topology_builder_errmsg(b));
	}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

#define CHECK(c)                                                                               \
	do {                                                                                       \
		char chk__[256];                                                                       \
		cr_assert_eq(tp_cluster_check((c), chk__, sizeof chk__), 0, "check: %s", chk__);       \
	} while (0)

/* ---- the brute-force recount -------------------------------------------------------------- */

static uint32_t node_free_count(const tp_cluster *c, uint32_t node)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t first, n, f = 0;
	cr_assert_eq(tp_topology_domain_devices(t, tp_topology_level_count(t) - 1, node, &first, &n),
	             0);
	for (uint32_t d = first; d < first + n; d++)
		f += tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE;
	return f;
}

/* Every public aggregate against a recount from the device states. */
static void assert_aggregates(const tp_cluster *c)
{
	const tp_topology *t = tp_cluster_topology(c);
	unsigned nlv = tp_topology_level_count(t), nl = nlv - 1;
	uint32_t ndev = tp_topology_device_count(t), nnodes = tp_topology_node_count(t);
	uint32_t nfree = 0, ndown = 0, ncord = 0;
	for (uint32_t d = 0; d < ndev; d++) {
		const char *job = NULL;
		int st = tp_cluster_device_state(c, d, &job);
		int down = tp_cluster_device_down(c, d), cord = tp_cluster_device_cordoned(c, d);
		cr_assert(down == 0 || down == 1);
		cr_assert(cord == 0 || cord == 1);
		if (st == TP_DEVICE_HELD)
			cr_assert_not_null(job);
		else
			cr_assert_null(job);
		if (st == TP_DEVICE_DOWN)
			cr_assert(down);
		if (st == TP_DEVICE_CORDONED)
			cr_assert(cord && !down);
		if (st == TP_DEVICE_FREE)
			cr_assert(!cord && !down);
		nfree += st == TP_DEVICE_FREE;
		ndown += down;
		ncord += cord && !down;
	}
	cr_assert_eq(tp_cluster_free_total_count(c), nfree);
	cr_assert_eq(tp_cluster_down_total_count(c), ndown);
	cr_assert_eq(tp_cluster_cordoned_total_count(c), ncord);

	uint32_t *nodefree = malloc(nnodes * sizeof *nodefree);
	for (uint32_t n = 0; n < nnodes; n++)
		nodefree[n] = node_free_count(c, n);
	uint32_t hist[TP_MAX_NODE_DEVICES + 2], want[TP_MAX_NODE_DEVICES + 2];
	for (unsigned l = 0; l < nlv; l++) {
		uint32_t ndom = tp_topology_domain_count(t, l);
		uint32_t *domfree = malloc(ndom * sizeof *domfree), maxf = 0;
		for (uint32_t d = 0; d < ndom; d++) {
			uint32_t first, nn, f = 0, fn = 0, top = 0;
			cr_assert_eq(tp_topology_domain_nodes(t, l, d, &first, &nn), 0);
			memset(want, 0, sizeof want);
			for (uint32_t n = first; n < first + nn; n++) {
				uint32_t df, dn;
				tp_topology_domain_devices(t, nl, n, &df, &dn);
				f += nodefree[n];
				fn += nodefree[n] == dn;
				want[nodefree[n]]++;
				if (nodefree[n] > top)
					top = nodefree[n];
			}
			cr_assert_eq(tp_cluster_free_count(c, l, d), f, "level %u dom %u", l, d);
			cr_assert_eq(tp_cluster_free_node_count(c, l, d), fn, "level %u dom %u", l, d);
			cr_assert_eq(tp_cluster_node_histogram(c, l, d, hist, TP_MAX_NODE_DEVICES + 2),
			             (int)top);
			cr_assert_arr_eq(hist, want, sizeof want, "level %u dom %u histogram", l, d);
			domfree[d] = f;
			if (f > maxf)
				maxf = f;
		}
		for (uint32_t k = 1; k <= maxf + 1; k++) {
			uint32_t best = TP_NONE;
			for (uint32_t d = 0; d < ndom; d++)
				if (domfree[d] >= k && (best == TP_NONE || domfree[d] < domfree[best]))
					best = d;
			uint32_t got = TP_NONE;
			int rc = tp_cluster_tightest(c, l, k, &got);
			if (best == TP_NONE) {
				cr_assert_eq(rc, TP_ENOTFOUND, "level %u k %u", l, k);
			} else {
				cr_assert_eq(rc, 0, "level %u k %u", l, k);
				cr_assert_eq(got, best, "tightest level %u k %u: %u, want %u", l, k, got,
				             best);
			}
		}
		free(domfree);
	}
	free(nodefree);
}

#define STEP(c)                                                                                \
	do {                                                                                       \
		CHECK(c);                                                                              \
		assert_aggregates(c);                                                                  \
	} while (0)

/* Unchanged since (fp, gen, njobs): for failed calls. */
#define ASSERT_UNCHANGED(c, fp, gen)                                                           \
	do {                                                                                       \
		cr_assert_eq(tp_cluster_fingerprint(c), (fp), "a failed call changed the state");      \
		cr_assert_eq((c)->generation, (gen), "a failed call bumped the generation");           \
		CHECK(c);                                                                              \
	} while (0)

/* ---- creation ----------------------------------------------------------------------------- */

Test(cluster, create_empty_nvl72)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2, 3);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_topology(c), t);
	cr_assert_eq(tp_cluster_free_total_count(c), 2 * 3 * 72);
	cr_assert_eq(tp_cluster_free_count(c, 1, 4), 72);
	cr_assert_eq(tp_cluster_free_node_count(c, 1, 4), 18);
	cr_assert_eq(tp_cluster_free_node_count(c, 0, 1), 54);
	cr_assert_eq(tp_cluster_free_node_count(c, 2, 7), 1);
	uint32_t h[5];
	cr_assert_eq(tp_cluster_node_histogram(c, 1, 0, h, 5), 4);
	cr_assert_eq(h[4], 18);
	cr_assert_eq(h[0] + h[1] + h[2] + h[3], 0);
	cr_assert_eq(tp_cluster_job_count(c), 0);
	cr_assert_str_eq(tp_cluster_errmsg(c), "");
	cr_assert_gt(tp_cluster_memory(c), 432 * 5);
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, create_bad_arguments)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = (tp_cluster *)(uintptr_t)1;
	cr_assert_eq(tp_cluster_create(NULL, t, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_create(&c, NULL, NULL), TP_EINVAL);
	cr_assert_null(c);
	tp_allocator half = tp_test_allocator;
	half.realloc = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &half), TP_EINVAL);
	cr_assert_null(c);
	/* The C library's allocator when none is given. */
	cr_assert_eq(tp_cluster_create(&c, t, NULL), 0);
	STEP(c);
	tp_cluster_destroy(c);
	tp_cluster_destroy(NULL);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, create_allocation_failures)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	long base = tp_test_alloc_state.live;
	long n = 0;
	for (;; n++) {
		tp_cluster *c = (tp_cluster *)(uintptr_t)1;
		tp_test_alloc_fail_at(n);
		int rc = tp_cluster_create(&c, t, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == 0) {
			STEP(c);
			tp_cluster_destroy(c);
			break;
		}
		cr_assert_eq(rc, TP_ENOMEM);
		cr_assert_null(c);
		cr_assert_eq(tp_test_alloc_state.live, base, "leak after failing allocation %ld", n);
	}
	cr_assert_gt(n, 3);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- assign / release / health ------------------------------------------------------------ */

Test(cluster, assign_and_release_hand_built)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	STEP(c);
	/* n3 is rack r2 (8 devices), n1+n2 rack r1 (6 devices). */
	uint32_t a[] = {tp_test_dev(t, "n3/7"), tp_test_dev(t, "n3/0"), tp_test_dev(t, "n1/2")};
	cr_assert_eq(tp_cluster_assign(c, "a", a, 3, NULL), 0, "%s", tp_cluster_errmsg(c));
	STEP(c);
	cr_assert_eq(tp_cluster_free_total_count(c), 23 - 3);
	cr_assert_eq(tp_cluster_free_count(c, 2, 2), 6);
	cr_assert_eq(tp_cluster_free_node_count(c, 0, 0), 1); /* n2 */
	uint32_t tight;
	cr_assert_eq(tp_cluster_tightest(c, 1, 5, &tight), 0);
	cr_assert_eq(tight, 0, "r1 has 5 free, r2 6, r3 9");
	cr_assert_eq(tp_cluster_tightest(c, 1, 6, &tight), 0);
	cr_assert_eq(tight, 1);
	cr_assert_eq(tp_cluster_tightest(c, 1, 10, &tight), TP_ENOTFOUND);
	cr_assert_eq(tp_cluster_tightest(c, 2, 6, &tight), 0);
	cr_assert_eq(tight, 2, "n3 is the only node with 6 free");
	cr_assert_eq(tp_cluster_tightest(c, 2, 3, &tight), 0);
	cr_assert_eq(tight, 0, "n1 has 3 free, the lowest such node");

	const char *holder = NULL;
	cr_assert_eq(tp_cluster_device_state(c, a[0], &holder), TP_DEVICE_HELD);
	cr_assert_str_eq(holder, "a");
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "a", &devs, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_arr_eq(devs, a, sizeof a, "rank order is kept");
	tp_job_options o = {.version = TP_JOB_OPTIONS_VERSION};
	cr_assert_eq(tp_cluster_job_options(c, "a", &o), 0);
	cr_assert_str_eq(o.tenant, "default");
	cr_assert_eq(o.job_class, TP_CLASS_TRAINING);
	cr_assert_eq(o.preemptible, 1);
	cr_assert_eq(o.migratable, 0);
	cr_assert_float_eq(o.checkpoint_s, 60.0, 1e-12);
	cr_assert_null(o.shape);

	tp_job_options bo = TP_JOB_OPTIONS_INIT;
	bo.job_class = TP_CLASS_INTERACTIVE;
	bo.priority = -3;
	bo.tenant = "t1";
	bo.preemptible = 0;
	bo.migratable = 1;
	bo.checkpoint_s = 0;
	uint32_t b[] = {tp_test_dev(t, "n4/0"), tp_test_dev(t, "n5/0"), tp_test_dev(t, "n5/1"), tp_test_dev(t, "n5/2"),
	                tp_test_dev(t, "n5/3")};
	cr_assert_eq(tp_cluster_assign(c, "b", b, 5, &bo), 0, "%s", tp_cluster_errmsg(c));
	STEP(c);
	cr_assert_eq(tp_cluster_job_options(c, "b", &o), 0);
	cr_assert_str_eq(o.tenant, "t1");
	cr_assert_eq(o.job_class, TP_CLASS_INTERACTIVE);
	cr_assert_eq(o.priority, -3);
	cr_assert_eq(o.preemptible, 0);
	cr_assert_eq(o.migratable, 1);
	cr_assert_eq(tp_cluster_free_node_count(c, 1, 2), 1);
	cr_assert_eq(tp_cluster_job_count(c), 2);
	cr_assert_str_eq(tp_cluster_job_at(c, 0), "a");
	cr_assert_str_eq(tp_cluster_job_at(c, 1), "b");
	cr_assert_null(tp_cluster_job_at(c, 2));

	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_job_count(c), 1);
	cr_assert_str_eq(tp_cluster_job_at(c, 0), "b", "the last job takes the freed slot");
	cr_assert_eq(tp_cluster_job_devices(c, "a", &devs, &n), TP_ENOTFOUND);
	TP_ASSERT_ERR(tp_cluster_release(c, "a"), TP_ENOTFOUND, tp_cluster_errmsg(c),
	              "job 'a' is not running");
	/* The id can be used again. */
	cr_assert_eq(tp_cluster_assign(c, "a", a, 1, NULL), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_release(c, "b"), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_free_total_count(c), 23);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, one_rack_on_nvl72)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2, 2);
	tp_cluster *c = tp_test_cluster(t);
	uint32_t first, n;
	cr_assert_eq(tp_topology_domain_devices(t, 1, 2, &first, &n), 0);
	cr_assert_eq(n, 72);
	uint32_t devs[72];
	for (uint32_t i = 0; i < 72; i++)
		devs[i] = first + (i * 5) % 72; /* interleaved nodes: still exact */
	cr_assert_eq(tp_cluster_assign(c, "rack", devs, 72, NULL), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_free_count(c, 1, 2), 0);
	cr_assert_eq(tp_cluster_free_count(c, 0, 1), 72);
	cr_assert_eq(tp_cluster_free_node_count(c, 0, 1), 18);
	uint32_t tight;
	cr_assert_eq(tp_cluster_tightest(c, 1, 72, &tight), 0);
	cr_assert_eq(tight, 0);
	cr_assert_eq(tp_cluster_tightest(c, 0, 73, &tight), 0);
	cr_assert_eq(tight, 0, "block 0 is untouched (144 free), block 1 has 72");
	cr_assert_eq(tp_cluster_tightest(c, 0, 72, &tight), 0);
	cr_assert_eq(tight, 1);
	cr_assert_eq(tp_cluster_release(c, "rack"), 0);
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, health)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t d1[] = {tp_test_dev(t, "n1/0"), tp_test_dev(t, "n1/1"), tp_test_dev(t, "n6/3")};
	cr_assert_eq(tp_cluster_set_down(c, d1, 3, 1), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_down_total_count(c), 3);
	cr_assert_eq(tp_cluster_device_state(c, d1[0], NULL), TP_DEVICE_DOWN);
	uint64_t gen = c->generation;
	cr_assert_eq(tp_cluster_set_down(c, d1, 2, 1), 0, "already down is fine");
	cr_assert_eq(c->generation, gen, "nothing changed");

	/* Cordoned and down counts as down. */
	uint32_t d2[] = {tp_test_dev(t, "n1/1"), tp_test_dev(t, "n3/4"), tp_test_dev(t, "n3/4")};
	cr_assert_eq(tp_cluster_set_cordoned(c, d2, 3, 1), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_cordoned_total_count(c), 1);
	cr_assert_eq(tp_cluster_device_state(c, d2[0], NULL), TP_DEVICE_DOWN);
	cr_assert_eq(tp_cluster_device_cordoned(c, d2[0]), 1);
	cr_assert_eq(tp_cluster_device_state(c, d2[1], NULL), TP_DEVICE_CORDONED);
	cr_assert_eq(tp_cluster_set_down(c, d1, 1, 0), 0);
	cr_assert_eq(tp_cluster_set_down(c, d1 + 1, 1, 0), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_cordoned_total_count(c), 2, "n1/1 is up again but still cordoned");
	cr_assert_eq(tp_cluster_device_state(c, d1[1], NULL), TP_DEVICE_CORDONED);

	/* A job may be recorded on down and cordoned devices; they come back down / cordoned. */
	uint32_t j[] = {tp_test_dev(t, "n6/3"), tp_test_dev(t, "n3/4"), tp_test_dev(t, "n3/5")};
	cr_assert_eq(tp_cluster_assign(c, "j", j, 3, NULL), 0, "%s", tp_cluster_errmsg(c));
	STEP(c);
	cr_assert_eq(tp_cluster_device_state(c, j[0], NULL), TP_DEVICE_HELD);
	cr_assert_eq(tp_cluster_device_down(c, j[0]), 1);
	cr_assert_eq(tp_cluster_set_down(c, j + 2, 1, 1), 0, "a device fails under the job");
	STEP(c);
	cr_assert_eq(tp_cluster_release(c, "j"), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_device_state(c, j[0], NULL), TP_DEVICE_DOWN);
	cr_assert_eq(tp_cluster_device_state(c, j[1], NULL), TP_DEVICE_CORDONED);
	cr_assert_eq(tp_cluster_device_state(c, j[2], NULL), TP_DEVICE_DOWN);

	/* A whole node down, then up. */
	uint32_t first, n;
	tp_topology_domain_devices(t, 2, 2, &first, &n);
	uint32_t all[8];
	for (uint32_t i = 0; i < n; i++)
		all[i] = first + i;
	cr_assert_eq(tp_cluster_set_down(c, all, n, 1), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_free_count(c, 1, 1), 0);
	cr_assert_eq(tp_cluster_set_down(c, all, n, 0), 0);
	cr_assert_eq(tp_cluster_set_cordoned(c, all, n, 0), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_set_down(c, NULL, 0, 1), 0, "nothing to do");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, flat_topology_node_index)
{
	tp_test_alloc_reset();
	tp_topology *t = flat(9); /* nodes of 1,2,3,4,1,2,3,4,1 devices */
	tp_cluster *c = tp_test_cluster(t);
	cr_assert(c->indexed[0], "a one-level topology indexes its nodes");
	STEP(c);
	uint32_t tight;
	cr_assert_eq(tp_cluster_tightest(c, 0, 3, &tight), 0);
	cr_assert_eq(tight, 2);
	uint32_t d[] = {tp_test_dev(t, "h2/0")};
	cr_assert_eq(tp_cluster_assign(c, "x", d, 1, NULL), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_tightest(c, 0, 2, &tight), 0);
	cr_assert_eq(tight, 1, "h1 and h2 have 2 free now; the lower wins");
	cr_assert_eq(tp_cluster_release(c, "x"), 0);
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The tightest node with at least w[i].min_free free is w[i].node (TP_NONE: none), asked of
 * the node level's index and then, with the index dropped as after a Judy failure, of the
 * histograms; the index is restored after. */
struct tight_want {
	uint32_t min_free, node;
};

static void tightest_both_ways(tp_cluster *c, unsigned nl, const struct tight_want *w, size_t n)
{
	for (int pass = 0; pass < 2; pass++) {
		if (pass) { /* the index dropped: the histograms answer */
			c->indexed[nl] = false;
			c->index_lost = true;
		}
		for (size_t i = 0; i < n; i++) {
			uint32_t tight;
			uint32_t k = w[i].min_free;
			int rc = tp_cluster_tightest(c, nl, k, &tight);
			if (w[i].node == TP_NONE) {
				cr_assert_eq(rc, TP_ENOTFOUND, "pass %d, %u free", pass, k);
				continue;
			}
			cr_assert_eq(rc, 0, "pass %d, %u free", pass, k);
			cr_assert_eq(tight, w[i].node, "pass %d, %u free", pass, k);
		}
	}
	c->indexed[nl] = true;
	c->index_lost = false;
	CHECK(c);
}

/* The tightest node with at least k free under NVLink racks: the node level keeps an index
 * there too (a node-sized job takes the tightest node of the fleet, place_choice.c), and after
 * a Judy failure dropped it the histograms answer the same. */
Test(cluster, tightest_node_level_under_nvlink_racks)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(3, 2);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert(c->indexed[2], "nodes are indexed under NVLink racks");
	/* Leave 1 free on node 40 and 3 on node 100 and node 7 (lowest wins among equals). */
	uint32_t take[] = {40 * 4, 40 * 4 + 1, 40 * 4 + 2, 100 * 4, 7 * 4 + 3};
	cr_assert_eq(tp_cluster_assign(c, "x", take, 5, NULL), 0);
	STEP(c);
	static const struct tight_want want[] = {{1, 40}, {2, 7}, {4, 0}, {5, TP_NONE}};
	tightest_both_ways(c, 2, want, 4);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Where the node is the NVLink domain (HGX: InfiniBand joins a unit's nodes) the node level
 * keeps an index, kept current by every change; its answers are the histograms' (as after a
 * Judy failure dropped it). */
Test(cluster, tightest_node_level_with_and_without_index)
{
	tp_test_alloc_reset();
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_hgx(&t, 3, 4, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	cr_assert(c->indexed[1], "HGX nodes are indexed");
	/* Leave 1 free on node 9, 5 on node 6 and node 2 (lowest wins among equals). */
	uint32_t take[12];
	uint32_t n = 0;
	for (uint32_t i = 0; i < 7; i++)
		take[n++] = 9 * 8 + i;
	take[n++] = 6 * 8 + 1, take[n++] = 6 * 8 + 2, take[n++] = 6 * 8 + 7;
	take[n++] = 2 * 8, take[n++] = 2 * 8 + 4;
	cr_assert_eq(tp_cluster_assign(c, "x", take, n, NULL), 0);
	take[0] = 2 * 8 + 5;
	cr_assert_eq(tp_cluster_assign(c, "y", take, 1, NULL), 0);
	STEP(c);
	static const struct tight_want want[] = {{1, 9}, {2, 2}, {6, 0}, {9, TP_NONE}};
	tightest_both_ways(c, 1, want, 4);
	cr_assert_eq(tp_cluster_release(c, "y"), 0); /* node 2 back to 6 free: node 6 is tighter */
	uint32_t tight;
	cr_assert_eq(tp_cluster_tightest(c, 1, 2, &tight), 0);
	cr_assert_eq(tight, 6);
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, shape_is_deep_copied)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	char lvl[8] = "rack", node[8] = "n3";
	const char *sel[] = {node};
	tp_slice sl[] = {{lvl, 2}};
	tp_domain_cap cap[] = {{"power", 0, 1}};
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.required = "zone";
	r.slices = sl;
	r.nslices = 1;
	r.caps = cap;
	r.ncaps = 1;
	r.spread_level = "power";
	r.spread_min_domains = 2;
	r.select_nodes = sel;
	r.nselect_nodes = 1;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &r;
	uint32_t d[] = {tp_test_dev(t, "n3/0"), tp_test_dev(t, "n3/1"), tp_test_dev(t, "n3/2"), tp_test_dev(t, "n3/3")};
	cr_assert_eq(tp_cluster_assign(c, "s", d, 4, &o), 0, "%s", tp_cluster_errmsg(c));
	STEP(c);
	strcpy(lvl, "zzz");
	strcpy(node, "zz");
	tp_job_options got = {.version = TP_JOB_OPTIONS_VERSION};
	cr_assert_eq(tp_cluster_job_options(c, "s", &got), 0);
	cr_assert_not_null(got.shape);
	cr_assert_neq(got.shape, &r);
	cr_assert_eq(got.shape->count, 4);
	cr_assert_str_eq(got.shape->required, "zone");
	cr_assert_str_eq(got.shape->slices[0].level, "rack");
	cr_assert_str_eq(got.shape->select_nodes[0], "n3");
	cr_assert_str_eq(got.shape->caps[0].level, "power");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- validation --------------------------------------------------------------------------- */

/* An assign that must fail with code and a message naming the problem, changing nothing. */
#define ASSIGN_FAILS(c, id, devs, n, opts, code, fragment)                                     \
	do {                                                                                       \
		uint64_t fp__ = tp_cluster_fingerprint(c), gen__ = (c)->generation;                    \
		size_t nj__ = tp_cluster_job_count(c);                                                 \
		TP_ASSERT_ERR(tp_cluster_assign((c), (id), (devs), (n), (opts)), (code),               \
		              tp_cluster_errmsg(c), (fragment));                                       \
		cr_assert_eq(tp_cluster_job_count(c), nj__);                                           \
		ASSERT_UNCHANGED(c, fp__, gen__);                                                      \
	} while (0)

Test(cluster, assign_validation)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t held[] = {tp_test_dev(t, "n1/1"), tp_test_dev(t, "n1/2")};
	cr_assert_eq(tp_cluster_assign(c, "a", held, 2, NULL), 0);
	uint32_t ok[] = {tp_test_dev(t, "n3/0"), tp_test_dev(t, "n3/1")};

	char longid[TP_MAX_NAME + 2];
	memset(longid, 'j', sizeof longid - 1);
	longid[sizeof longid - 1] = '\0';
	ASSIGN_FAILS(c, NULL, ok, 2, NULL, TP_EINVAL, "job id is NULL");
	ASSIGN_FAILS(c, "", ok, 2, NULL, TP_EINVAL, "job id is empty");
	ASSIGN_FAILS(c, longid, ok, 2, NULL, TP_EINVAL, "job id is longer than 255 bytes");
	ASSIGN_FAILS(c, "a\nb", ok, 2, NULL, TP_EINVAL, "job id contains a control character");
	ASSIGN_FAILS(c, "x", ok, 0, NULL, TP_EINVAL, "n is 0");
	ASSIGN_FAILS(c, "x", NULL, 2, NULL, TP_EINVAL, "devices is NULL");

	uint32_t out[] = {ok[0], 23};
	ASSIGN_FAILS(c, "x", out, 2, NULL, TP_EINVAL,
	             "devices[1] 23 is out of range (the topology has 23 devices)");
	uint32_t dup[] = {ok[0], ok[1], tp_test_dev(t, "n3/5"), ok[1]};
	ASSIGN_FAILS(c, "x", dup, 4, NULL, TP_EINVAL, "devices[3] n3/1 is listed twice");
	CHECK(c); /* the duplicate marks are gone */
	uint32_t taken[] = {ok[0], held[1]};
	ASSIGN_FAILS(c, "x", taken, 2, NULL, TP_EEXIST, "devices[1] n1/2 is held by job 'a'");
	ASSIGN_FAILS(c, "a", ok, 2, NULL, TP_EEXIST, "job 'a' is already running");

	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.version = 0;
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.version 0");
	o.version = TP_JOB_OPTIONS_VERSION + 1;
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.version 2");
	o = (tp_job_options)TP_JOB_OPTIONS_INIT;
	o.job_class = (tp_job_class)3;
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.job_class 3");
	o = (tp_job_options)TP_JOB_OPTIONS_INIT;
	o.checkpoint_s = -1;
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.checkpoint_s");
	o.checkpoint_s = NAN;
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.checkpoint_s");
	o.checkpoint_s = INFINITY;
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.checkpoint_s");
	o = (tp_job_options)TP_JOB_OPTIONS_INIT;
	o.tenant = "";
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.tenant is empty");
	o.tenant = "t\x01";
	ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, "opts.tenant contains a control character");

	cr_assert_eq(tp_cluster_assign(NULL, "x", ok, 2, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_job_count(c), 1);
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, shape_validation)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t ok[] = {tp_test_dev(t, "n3/0"), tp_test_dev(t, "n3/1")};
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	tp_request r;
	o.shape = &r;

#define SHAPE_FAILS(setup, fragment)                                                           \
	do {                                                                                       \
		r = (tp_request)TP_REQUEST_INIT;                                                       \
		r.count = 2;                                                                           \
		setup;                                                                                 \
		ASSIGN_FAILS(c, "x", ok, 2, &o, TP_EINVAL, fragment);                                  \
	} while (0)

	tp_slice sl_bad[] = {{"rack", 2}, {NULL, 1}};
	tp_slice sl_fd[] = {{"power", 2}};
	tp_domain_cap cap_bad[] = {{"power", 1, 0}, {"nope", 1, 0}};
	tp_domain_cap cap_null[] = {{NULL, 1, 0}};
	const char *sel_bad[] = {"n1", NULL};
	SHAPE_FAILS(r.version = 7, "shape.version 7");
	SHAPE_FAILS(r.count = 0, "shape.count 0");
	SHAPE_FAILS(r.job_class = (tp_job_class)9, "shape.job_class 9");
	SHAPE_FAILS(r.required = "nope", "shape.required 'nope' is not a level");
	SHAPE_FAILS(r.required = "power", "shape.required 'power' is not a level");
	SHAPE_FAILS(r.preferred = "Rack", "shape.preferred 'Rack'");
	SHAPE_FAILS(r.group_level = "gpu", "shape.group_level 'gpu'");
	SHAPE_FAILS(r.exclusive = "row", "shape.exclusive 'row'");
	SHAPE_FAILS((r.colocate_job = "a", r.colocate_level = "pod"), "shape.colocate_level 'pod'");
	SHAPE_FAILS(r.spread_level = "feed", "shape.spread_level 'feed' is not a level or failure");
	SHAPE_FAILS(r.nslices = 1, "shape.slices is NULL but shape.nslices is 1");
	SHAPE_FAILS((r.slices = sl_bad, r.nslices = 2), "shape.slices[1].level is NULL");
	SHAPE_FAILS((r.slices = sl_fd, r.nslices = 1), "shape.slices[0].level 'power'");
	SHAPE_FAILS(r.ncaps = 2, "shape.caps is NULL but shape.ncaps is 2");
	SHAPE_FAILS((r.caps = cap_bad, r.ncaps = 2), "shape.caps[1].level 'nope'");
	SHAPE_FAILS((r.caps = cap_null, r.ncaps = 1), "shape.caps[0].level is NULL");
	SHAPE_FAILS(r.nselect_nodes = 1, "shape.select_nodes is NULL");
	SHAPE_FAILS((r.select_nodes = sel_bad, r.nselect_nodes = 2),
	            "shape.select_nodes[1] is NULL");
#undef SHAPE_FAILS

	/* Failure-domain kinds are fine where the spec allows them. */
	r = (tp_request)TP_REQUEST_INIT;
	r.count = 2;
	r.spread_level = "power";
	r.caps = cap_bad;
	r.ncaps = 1;
	r.required = "zone";
	r.preferred = "rack";
	r.group_level = "node";
	cr_assert_eq(tp_cluster_assign(c, "x", ok, 2, &o), 0, "%s", tp_cluster_errmsg(c));
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, other_call_validation)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t good[] = {tp_test_dev(t, "n1/0"), tp_test_dev(t, "n2/0")};
	cr_assert_eq(tp_cluster_assign(c, "a", good, 1, NULL), 0);
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;

	uint32_t bad[] = {good[0], 99, good[1]};
	TP_ASSERT_ERR(tp_cluster_set_down(c, bad, 3, 1), TP_EINVAL, tp_cluster_errmsg(c),
	              "devices[1] 99 is out of range");
	ASSERT_UNCHANGED(c, fp, gen); /* devices[0] was valid but is not down either */
	TP_ASSERT_ERR(tp_cluster_set_cordoned(c, bad, 3, 1), TP_EINVAL, tp_cluster_errmsg(c),
	              "devices[1] 99");
	TP_ASSERT_ERR(tp_cluster_set_down(c, NULL, 2, 1), TP_EINVAL, tp_cluster_errmsg(c),
	              "devices is NULL");
	TP_ASSERT_ERR(tp_cluster_release(c, NULL), TP_EINVAL, tp_cluster_errmsg(c),
	              "job id is NULL");
	TP_ASSERT_ERR(tp_cluster_release(c, "zz"), TP_ENOTFOUND, tp_cluster_errmsg(c), "'zz'");
	TP_ASSERT_ERR(tp_cluster_rollback(c, 0), TP_EINVAL, tp_cluster_errmsg(c),
	              "savepoint 0 is not open");
	TP_ASSERT_ERR(tp_cluster_savepoint_discard(c, 3), TP_EINVAL, tp_cluster_errmsg(c),
	              "savepoint 3 is not open");
	ASSERT_UNCHANGED(c, fp, gen);

	cr_assert_eq(tp_cluster_set_down(NULL, good, 1, 1), TP_EINVAL);
	cr_assert_eq(tp_cluster_set_cordoned(NULL, good, 1, 1), TP_EINVAL);
	cr_assert_eq(tp_cluster_release(NULL, "a"), TP_EINVAL);
	cr_assert_eq(tp_cluster_savepoint(NULL, &(size_t){0}), TP_EINVAL);
	cr_assert_eq(tp_cluster_savepoint(c, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_rollback(NULL, 0), TP_EINVAL);
	cr_assert_eq(tp_cluster_savepoint_discard(NULL, 0), TP_EINVAL);
	cr_assert_eq(tp_cluster_check(NULL, NULL, 0), TP_EINVAL);
	cr_assert_str_eq(tp_cluster_errmsg(NULL), "");
	cr_assert_null(tp_cluster_topology(NULL));

	/* Read-only queries with bad arguments. */
	uint32_t h[4], d;
	cr_assert_eq(tp_cluster_free_count(c, 3, 0), 0);
	cr_assert_eq(tp_cluster_free_count(c, 1, 3), 0);
	cr_assert_eq(tp_cluster_free_count(NULL, 0, 0), 0);
	cr_assert_eq(tp_cluster_free_node_count(c, 0, 2), 0);
	cr_assert_eq(tp_cluster_free_total_count(NULL), 0);
	cr_assert_eq(tp_cluster_node_histogram(c, 3, 0, h, 4), TP_EINVAL);
	cr_assert_eq(tp_cluster_node_histogram(c, 0, 0, NULL, 4), TP_EINVAL);
	cr_assert_eq(tp_cluster_node_histogram(c, 0, 0, NULL, 0), 8, "counts still returned");
	cr_assert_eq(tp_cluster_tightest(c, 0, 0, &d), TP_EINVAL);
	cr_assert_eq(tp_cluster_tightest(c, 3, 1, &d), TP_EINVAL);
	cr_assert_eq(tp_cluster_tightest(c, 0, 1, NULL), TP_EINVAL);
	cr_assert_eq(tp_cluster_tightest(c, 2, 9, &d), TP_ENOTFOUND);
	cr_assert_eq(tp_cluster_tightest(c, 2, 300, &d), TP_ENOTFOUND);
	const char *job = "junk";
	cr_assert_eq(tp_cluster_device_state(c, 23, &job), TP_EINVAL);
	cr_assert_null(job);
	cr_assert_eq(tp_cluster_device_down(c, 23), TP_EINVAL);
	cr_assert_eq(tp_cluster_device_cordoned(c, 23), TP_EINVAL);
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "b", &devs, &n), TP_ENOTFOUND);
	cr_assert_eq(tp_cluster_job_devices(c, "a", NULL, &n), TP_EINVAL);
	tp_job_options o = {.version = 0};
	cr_assert_eq(tp_cluster_job_options(c, "a", &o), TP_EINVAL);
	o.version = TP_JOB_OPTIONS_VERSION;
	cr_assert_eq(tp_cluster_job_options(c, "b", &o), TP_ENOTFOUND);
	cr_assert_null(tp_cluster_job_at(c, 1));
	cr_assert_eq(tp_cluster_job_count(NULL), 0);
	cr_assert_eq(tp_cluster_memory(NULL), 0);
	cr_assert_eq(tp_cluster_fingerprint(NULL), 0);
	ASSERT_UNCHANGED(c, fp, gen);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, check_reports_corruption)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	char buf[256];
	c->free[1][1]++;
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), TP_ECORRUPT);
	cr_assert(strstr(buf, "level 1 domain 1: free 9, recounted 8"), "%s", buf);
	c->free[1][1]--;
	c->dev_job[3] = 0; /* held by a job that does not exist */
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), TP_ECORRUPT);
	cr_assert(strstr(buf, "device 3"), "%s", buf);
	c->dev_job[3] = TP_NO_JOB;
	c->ndown = 1;
	cr_assert_eq(tp_cluster_check(c, NULL, 0), TP_ECORRUPT);
	c->ndown = 0;
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- fingerprint ---------------------------------------------------------------------------- */

Test(cluster, fingerprint_is_history_independent)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(1, 2);
	tp_cluster *x = tp_test_cluster(t), *y = tp_test_cluster(t);
	cr_assert_eq(tp_cluster_fingerprint(x), tp_cluster_fingerprint(y));
	uint32_t a[] = {0, 1, 2, 3, 9}, b[] = {40, 41}, z[] = {5, 6}, down[] = {100, 2};

	cr_assert_eq(tp_cluster_assign(x, "a", a, 5, NULL), 0);
	cr_assert_eq(tp_cluster_assign(x, "b", b, 2, NULL), 0);
	cr_assert_eq(tp_cluster_set_down(x, down, 2, 1), 0);

	cr_assert_eq(tp_cluster_set_down(y, down, 1, 1), 0);
	cr_assert_eq(tp_cluster_assign(y, "z", z, 2, NULL), 0);
	cr_assert_eq(tp_cluster_assign(y, "b", b, 2, NULL), 0);
	cr_assert_eq(tp_cluster_set_cordoned(y, b, 2, 1), 0);
	cr_assert_eq(tp_cluster_set_cordoned(y, b, 2, 0), 0);
	cr_assert_eq(tp_cluster_release(y, "z"), 0);
	cr_assert_eq(tp_cluster_set_down(y, down + 1, 1, 1), 0);
	cr_assert_eq(tp_cluster_assign(y, "a", a, 5, NULL), 0);
	CHECK(x);
	CHECK(y);
	cr_assert_str_neq(tp_cluster_job_at(x, 0), tp_cluster_job_at(y, 0), "slots differ");
	cr_assert_eq(tp_cluster_fingerprint(x), tp_cluster_fingerprint(y));

	/* Anything that differs shows. */
	uint64_t same = tp_cluster_fingerprint(y);
	cr_assert_eq(tp_cluster_release(y, "a"), 0);
	uint32_t a2[] = {0, 1, 2, 9, 3}; /* same devices, another rank order */
	cr_assert_eq(tp_cluster_assign(y, "a", a2, 5, NULL), 0);
	cr_assert_neq(tp_cluster_fingerprint(y), same);
	cr_assert_eq(tp_cluster_release(y, "a"), 0);
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.priority = 1;
	cr_assert_eq(tp_cluster_assign(y, "a", a, 5, &o), 0);
	cr_assert_neq(tp_cluster_fingerprint(y), same);
	cr_assert_eq(tp_cluster_release(y, "a"), 0);
	cr_assert_eq(tp_cluster_assign(y, "a", a, 5, NULL), 0);
	cr_assert_eq(tp_cluster_fingerprint(y), same);
	cr_assert_eq(tp_cluster_set_cordoned(y, b, 1, 1), 0);
	cr_assert_neq(tp_cluster_fingerprint(y), same, "cordoning a held device shows");
	tp_cluster_destroy(x);
	tp_cluster_destroy(y);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- savepoints ----------------------------------------------------------------------------- */

struct snap {
	uint64_t fp;
	size_t njobs;
	char order[8][16];
};

static struct snap snap_take(const tp_cluster *c)
{
	struct snap s = {.fp = tp_cluster_fingerprint(c), .njobs = tp_cluster_job_count(c)};
	for (size_t i = 0; i < s.njobs && i < 8; i++)
		snprintf(s.order[i], sizeof s.order[i], "%s", tp_cluster_job_at(c, i));
	return s;
}

static void snap_assert(const tp_cluster *c, const struct snap *s)
{
	cr_assert_eq(tp_cluster_fingerprint(c), s->fp);
	cr_assert_eq(tp_cluster_job_count(c), s->njobs);
	for (size_t i = 0; i < s->njobs && i < 8; i++)
		cr_assert_str_eq(tp_cluster_job_at(c, i), s->order[i], "job order at slot %zu", i);
}

Test(cluster, savepoints_nest_and_roll_back)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1}, b[] = {4, 5}, d[] = {6, 7, 8}, e[] = {20};
	cr_assert_eq(tp_cluster_assign(c, "a", a, 2, NULL), 0);
	cr_assert_eq(tp_cluster_assign(c, "b", b, 2, NULL), 0);
	cr_assert_eq(tp_cluster_assign(c, "d", d, 3, NULL), 0);
	struct snap s0 = snap_take(c);

	size_t sp0, sp1, sp2;
	uint64_t gen0 = c->generation;
	cr_assert_eq(tp_cluster_savepoint(c, &sp0), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0); /* d moves into slot 0 */
	cr_assert_eq(tp_cluster_set_down(c, b, 2, 1), 0);
	tp_request r = TP_REQUEST_INIT;
	r.count = 1;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &r;
	cr_assert_eq(tp_cluster_assign(c, "e", e, 1, &o), 0);
	STEP(c);
	struct snap s1 = snap_take(c);

	uint64_t gen1 = c->generation;
	cr_assert_eq(tp_cluster_savepoint(c, &sp1), 0);
	cr_assert_gt(sp1, sp0);
	cr_assert_eq(tp_cluster_release(c, "d"), 0);
	cr_assert_eq(tp_cluster_assign(c, "a", d, 3, NULL), 0, "a again, on d's devices");
	cr_assert_eq(tp_cluster_set_cordoned(c, e, 1, 1), 0);
	cr_assert_eq(tp_cluster_release(c, "b"), 0);
	STEP(c);
	cr_assert_eq(tp_cluster_savepoint(c, &sp2), 0);
	cr_assert_eq(tp_cluster_release(c, "e"), 0);
	STEP(c);
	uint64_t gen = c->generation;
	cr_assert_neq(gen, gen1, "the changes took new generations");
	cr_assert_eq(tp_cluster_rollback(c, sp1), 0, "closes sp2 too");
	/* The state is the savepoint's again, and so is the generation: a placement made before
	 * the savepoint is still good, one made inside it is not. */
	cr_assert_eq(c->generation, gen1, "a rollback returns to the savepoint's generation");
	STEP(c);
	snap_assert(c, &s1);
	cr_assert_eq(tp_cluster_rollback(c, sp2), TP_EINVAL, "sp2 closed with sp1");

	/* Changes kept by discarding an inner savepoint are still undone by the outer one. */
	cr_assert_eq(tp_cluster_savepoint(c, &sp1), 0);
	cr_assert_eq(tp_cluster_release(c, "e"), 0);
	cr_assert_eq(tp_cluster_savepoint_discard(c, sp1), 0);
	cr_assert_eq(tp_cluster_job_count(c), 2);
	cr_assert_eq(tp_cluster_rollback(c, sp0), 0);
	cr_assert_eq(c->generation, gen0);
	STEP(c);
	snap_assert(c, &s0);
	/* A change after a rollback takes a generation never handed out before. */
	cr_assert_eq(tp_cluster_set_down(c, e, 1, 1), 0);
	cr_assert_gt(c->generation, gen, "a generation of the undone changes came back");
	cr_assert_eq(tp_cluster_set_down(c, e, 1, 0), 0);

	/* Nothing to undo: no change. */
	cr_assert_eq(tp_cluster_savepoint(c, &sp0), 0);
	gen = c->generation;
	cr_assert_eq(tp_cluster_rollback(c, sp0), 0);
	cr_assert_eq(c->generation, gen);

	/* Discarding the outermost keeps everything and frees the log (released jobs included). */
	cr_assert_eq(tp_cluster_savepoint(c, &sp0), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert_eq(tp_cluster_release(c, "b"), 0);
	struct snap s2 = snap_take(c);
	cr_assert_eq(tp_cluster_savepoint_discard(c, sp0), 0);
	cr_assert_eq(c->nundo, 0);
	snap_assert(c, &s2);
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, destroy_with_open_savepoints)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1};
	size_t sp;
	cr_assert_eq(tp_cluster_assign(c, "a", a, 2, NULL), 0);
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	tp_cluster_destroy(c); /* the log owns a; no leak */
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, rebind_and_roll_back)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1, 2}, moved[] = {2, 10, 11, 12};
	cr_assert_eq(tp_cluster_assign(c, "a", a, 3, NULL), 0);
	struct snap s0 = snap_take(c);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_rebind_impl(c, 0, moved, 4), 0);
	STEP(c);
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "a", &devs, &n), 0);
	cr_assert_eq(n, 4);
	cr_assert_arr_eq(devs, moved, sizeof moved);
	cr_assert_eq(tp_cluster_device_state(c, 0, NULL), TP_DEVICE_FREE);
	cr_assert_eq(tp_cluster_rebind_impl(c, 0, a + 1, 1), 0, "a second rebind");
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	STEP(c);
	snap_assert(c, &s0);
	/* Without a savepoint, and discarding one that logged a rebind. */
	cr_assert_eq(tp_cluster_rebind_impl(c, 0, moved, 4), 0);
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_rebind_impl(c, 0, a, 3), 0);
	cr_assert_eq(tp_cluster_savepoint_discard(c, sp), 0);
	STEP(c);
	snap_assert(c, &s0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* What a Judy failure in the middle of a change leaves (Judy allocates from the C library, so
 * the test allocator cannot fail it): the level's index dropped. Queries still answer, check
 * accepts it, and the next writing call rebuilds it. */
Test(cluster, lost_index_is_rebuilt)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(2, 3);
	tp_cluster *c = tp_test_cluster(t);
	uint32_t devs[] = {72, 73, 74, 200};
	cr_assert_eq(tp_cluster_assign(c, "a", devs, 4, NULL), 0);
	JError_t err;
	Judy1FreeArray(&c->index[1], &err);
	c->indexed[1] = false;
	c->index_lost = true;
	STEP(c); /* tightest over racks answers from a scan */
	uint32_t d;
	cr_assert_eq(tp_cluster_tightest(c, 1, 1, &d), 0);
	cr_assert_eq(d, 1, "rack 1 has 69 free, rack 2 has 71");
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert(c->indexed[1] && !c->index_lost, "rebuilt by the next change");
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Ids removed under a savepoint stay in the map as tombstones (so a rollback needs no memory)
 * and are swept once the savepoint closes. */
Test(cluster, tombstones_are_swept)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1}, b[] = {4};
	cr_assert_eq(tp_cluster_assign(c, "keep", a, 2, NULL), 0);
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_release(c, "keep"), 0);
	cr_assert_eq(tp_cluster_assign(c, "keep", b, 1, NULL), 0, "the tombstone comes back");
	for (int i = 0; i < 40; i++) {
		char id[16];
		snprintf(id, sizeof id, "tmp%d", i);
		cr_assert_eq(tp_cluster_assign(c, id, a, 2, NULL), 0);
		cr_assert_eq(tp_cluster_release(c, id), 0);
	}
	cr_assert_eq(c->ntomb, 40);
	CHECK(c);
	cr_assert_eq(tp_cluster_savepoint_discard(c, sp), 0);
	cr_assert_eq(c->ntomb, 0);
	STEP(c);
	const uint32_t *devs;
	size_t n;
	cr_assert_eq(tp_cluster_job_devices(c, "keep", &devs, &n), 0);
	cr_assert_eq(n, 1);
	cr_assert_eq(tp_cluster_job_devices(c, "tmp3", &devs, &n), TP_ENOTFOUND);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- allocation failures ------------------------------------------------------------------ */

/* Run `call` with allocation n failing for n = 0, 1, ... until it succeeds; every failure must be
 * TP_ENOMEM with a message, leaving the state, the generation and the live blocks unchanged.
 * Returns how many failures were seen. */
#define ENOMEM_LOOP(c, call, failures)                                                         \
	do {                                                                                       \
		for (long n__ = 0;; n__++) {                                                           \
			uint64_t fp__ = tp_cluster_fingerprint(c), gen__ = (c)->generation;                \
			long live__ = tp_test_alloc_state.live;                                            \
			tp_test_alloc_fail_at(n__);                                                        \
			int rc__ = (call);                                                                 \
			tp_test_alloc_fail_at(-1);                                                         \
			if (rc__ == 0)                                                                     \
				break;                                                                         \
			TP_ASSERT_ERR(rc__, TP_ENOMEM, tp_cluster_errmsg(c), "out of memory");             \
			ASSERT_UNCHANGED(c, fp__, gen__);                                                  \
			cr_assert_leq(tp_test_alloc_state.live, live__ + 2,                                \
			              "only capacity may grow on a failure");                              \
			(failures)++;                                                                      \
		}                                                                                      \
		CHECK(c);                                                                              \
	} while (0)

/* Fill the open savepoint's log to its capacity so that the next logged change must grow it. */
static void fill_log(tp_cluster *c)
{
	uint32_t d = 0;
	if (c->nundo == c->cap_undo && c->cap_undo)
		return;
	for (int i = 0; i < 1000 && (c->nundo < c->cap_undo || c->cap_undo == 0); i++) {
		int on = !tp_cluster_device_cordoned(c, d);
		cr_assert_eq(tp_cluster_set_cordoned(c, &d, 1, on), 0);
	}
	cr_assert_eq(c->nundo, c->cap_undo);
}

Test(cluster, allocation_failures_under_a_savepoint)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {3, 4, 5}, b[] = {10, 11};
	cr_assert_eq(tp_cluster_assign(c, "a", a, 3, NULL), 0);
	struct snap s0 = snap_take(c);
	long failures = 0;
	size_t sp = 99;
	ENOMEM_LOOP(c, tp_cluster_savepoint(c, &sp), failures);
	cr_assert_eq(failures, 1);

	/* assign with a shape: the job block, the shape, the jobs array, the log. */
	fill_log(c);
	tp_slice sl[] = {{"rack", 1}};
	tp_request r = TP_REQUEST_INIT;
	r.count = 2;
	r.slices = sl;
	r.nslices = 1;
	r.tenant = "t";
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &r;
	o.tenant = "t";
	failures = 0;
	ENOMEM_LOOP(c, tp_cluster_assign(c, "b", b, 2, &o), failures);
	cr_assert_geq(failures, 3, "job, shape and log allocations were failed");

	fill_log(c);
	failures = 0;
	ENOMEM_LOOP(c, tp_cluster_release(c, "a"), failures);
	cr_assert_eq(failures, 1);

	fill_log(c);
	failures = 0;
	uint32_t down[] = {12, 13, 14, 12};
	ENOMEM_LOOP(c, tp_cluster_set_down(c, down, 4, 1), failures);
	cr_assert_eq(failures, 1);

	fill_log(c);
	failures = 0;
	ENOMEM_LOOP(c, tp_cluster_rebind_impl(c, 0, a, 3), failures);
	cr_assert_geq(failures, 1);

	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	STEP(c);
	snap_assert(c, &s0);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, allocation_failures_without_a_savepoint)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	long failures = 0;
	for (uint32_t i = 0; i < 9; i++) { /* the jobs array must grow on the 9th */
		char id[8];
		snprintf(id, sizeof id, "j%u", i);
		uint32_t d = i;
		ENOMEM_LOOP(c, tp_cluster_assign(c, id, &d, 1, NULL), failures);
	}
	cr_assert_eq(failures, 11, "one job block each, plus the jobs array twice");
	failures = 0;
	ENOMEM_LOOP(c, tp_cluster_release(c, "j0"), failures);
	cr_assert_eq(failures, 0, "a release needs no memory without a savepoint");
	uint32_t all[23];
	for (uint32_t i = 0; i < 23; i++)
		all[i] = i;
	ENOMEM_LOOP(c, tp_cluster_set_down(c, all, 23, 1), failures);
	cr_assert_eq(failures, 0);
	STEP(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- a randomized sequence against a shadow model ------------------------------------------ */

struct shadow {
	uint32_t ndev;
	uint8_t *health;  /* TP_DS_* */
	int32_t *holder;  /* job number or -1 */
	int32_t *order;   /* job numbers by slot */
	size_t njobs;
};

static struct shadow shadow_new(uint32_t ndev)
{
	struct shadow s = {ndev, calloc(ndev, 1), malloc(ndev * sizeof(int32_t)),
	                   malloc((ndev + 1) * sizeof(int32_t)), 0};
	for (uint32_t i = 0; i < ndev; i++)
		s.holder[i] = -1;
	return s;
}

static struct shadow shadow_copy(const struct shadow *o)
{
	struct shadow s = shadow_new(o->ndev);
	memcpy(s.health, o->health, o->ndev);
	memcpy(s.holder, o->holder, o->ndev * sizeof(int32_t));
	memcpy(s.order, o->order, (o->ndev + 1) * sizeof(int32_t));
	s.njobs = o->njobs;
	return s;
}

static void shadow_free(struct shadow *s)
{
	free(s->health);
	free(s->holder);
	free(s->order);
}

static void shadow_assert(const tp_cluster *c, const struct shadow *s)
{
	for (uint32_t d = 0; d < s->ndev; d++) {
		const char *job;
		int st = tp_cluster_device_state(c, d, &job);
		if (s->holder[d] >= 0) {
			char id[16];
			snprintf(id, sizeof id, "j%d", s->holder[d]);
			cr_assert_eq(st, TP_DEVICE_HELD, "device %u", d);
			cr_assert_str_eq(job, id);
		} else {
			int want = s->health[d] & TP_DS_DOWN       ? TP_DEVICE_DOWN
			           : s->health[d] & TP_DS_CORDONED ? TP_DEVICE_CORDONED
			                                           : TP_DEVICE_FREE;
			cr_assert_eq(st, want, "device %u", d);
		}
		cr_assert_eq(tp_cluster_device_down(c, d), (s->health[d] & TP_DS_DOWN) != 0);
		cr_assert_eq(tp_cluster_device_cordoned(c, d), (s->health[d] & TP_DS_CORDONED) != 0);
	}
	cr_assert_eq(tp_cluster_job_count(c), s->njobs);
	for (size_t i = 0; i < s->njobs; i++) {
		char id[16];
		snprintf(id, sizeof id, "j%d", s->order[i]);
		cr_assert_str_eq(tp_cluster_job_at(c, i), id, "slot %zu", i);
	}
}

static void shadow_release(struct shadow *s, size_t slot)
{
	for (uint32_t d = 0; d < s->ndev; d++)
		if (s->holder[d] == s->order[slot])
			s->holder[d] = -1;
	s->order[slot] = s->order[--s->njobs];
}

struct sp_entry {
	size_t sp;
	struct shadow s;
	uint64_t fp;
};

static void random_sequence(const tp_topology *t, uint64_t seed, int steps, bool full_every)
{
	tp_cluster *c = tp_test_cluster(t);
	uint32_t ndev = tp_topology_device_count(t);
	struct shadow s = shadow_new(ndev);
	struct sp_entry stack[6];
	size_t depth = 0;
	int next_job = 0;
	uint32_t devs[16];
	for (int step = 0; step < steps; step++) {
		uint32_t op = tp_test_below(&seed, 100);
		if (op < 35) { /* assign random devices: maybe a duplicate or a held one */
			uint32_t k = 1 + tp_test_below(&seed, 12), base = tp_test_below(&seed, ndev);
			bool dup = false, held = false;
			for (uint32_t i = 0; i < k; i++) {
				devs[i] = tp_test_below(&seed, 8) ? (base + i * (1 + base % 3)) % ndev
				                                  : tp_test_below(&seed, ndev);
				for (uint32_t j = 0; j < i; j++)
					dup |= devs[j] == devs[i];
			}
			for (uint32_t i = 0; i < k; i++)
				held |= s.holder[devs[i]] >= 0;
			char id[16];
			snprintf(id, sizeof id, "j%d", next_job);
			int rc = tp_cluster_assign(c, id, devs, k, NULL);
			int want = dup ? TP_EINVAL : held ? TP_EEXIST : 0;
			cr_assert_eq(rc, want, "step %d: %s", step, tp_cluster_errmsg(c));
			if (!rc) {
				for (uint32_t i = 0; i < k; i++)
					s.holder[devs[i]] = next_job;
				s.order[s.njobs++] = next_job++;
			}
		} else if (op < 55) { /* release */
			if (s.njobs == 0 || tp_test_below(&seed, 10) == 0) {
				cr_assert_eq(tp_cluster_release(c, "nope"), TP_ENOTFOUND);
				continue;
			}
			size_t slot = tp_test_below(&seed, (uint32_t)s.njobs);
			char id[16];
			snprintf(id, sizeof id, "j%d", s.order[slot]);
			cr_assert_eq(tp_cluster_release(c, id), 0);
			shadow_release(&s, slot);
		} else if (op < 78) { /* health */
			uint32_t k = 1 + tp_test_below(&seed, 8), base = tp_test_below(&seed, ndev);
			uint8_t bit = op < 68 ? TP_DS_DOWN : TP_DS_CORDONED;
			int on = (int)tp_test_below(&seed, 2);
			for (uint32_t i = 0; i < k; i++)
				devs[i] = (base + i) % ndev;
			int rc = bit == TP_DS_DOWN ? tp_cluster_set_down(c, devs, k, on)
			                           : tp_cluster_set_cordoned(c, devs, k, on);
			cr_assert_eq(rc, 0);
			for (uint32_t i = 0; i < k; i++)
				s.health[devs[i]] = (uint8_t)(on ? s.health[devs[i]] | bit
				                                 : s.health[devs[i]] & ~bit);
		} else if (op < 83) { /* rebind a job onto some of its devices plus free ones */
			if (s.njobs == 0)
				continue;
			size_t slot = tp_test_below(&seed, (uint32_t)s.njobs);
			int32_t job = s.order[slot];
			uint32_t k = 0;
			for (uint32_t d = 0; d < ndev && k < 16; d++)
				if ((s.holder[d] == job || s.holder[d] < 0) && tp_test_below(&seed, 4) == 0)
					devs[k++] = d;
			if (k == 0)
				continue;
			cr_assert_eq(tp_cluster_rebind_impl(c, (uint32_t)slot, devs, k), 0);
			for (uint32_t d = 0; d < ndev; d++)
				if (s.holder[d] == job)
					s.holder[d] = -1;
			for (uint32_t i = 0; i < k; i++)
				s.holder[devs[i]] = job;
		} else if (op < 90) { /* open a savepoint */
			if (depth == 6)
				continue;
			struct sp_entry *e = &stack[depth++];
			cr_assert_eq(tp_cluster_savepoint(c, &e->sp), 0);
			e->s = shadow_copy(&s);
			e->fp = tp_cluster_fingerprint(c);
		} else if (depth > 0) { /* roll back or discard a random open savepoint */
			size_t i = tp_test_below(&seed, (uint32_t)depth);
			if (op < 95) {
				cr_assert_eq(tp_cluster_rollback(c, stack[i].sp), 0);
				cr_assert_eq(tp_cluster_fingerprint(c), stack[i].fp, "step %d", step);
				shadow_free(&s);
				s = shadow_copy(&stack[i].s);
			} else {
				cr_assert_eq(tp_cluster_savepoint_discard(c, stack[i].sp), 0);
			}
			while (depth > i)
				shadow_free(&stack[--depth].s);
		}
		CHECK(c);
		shadow_assert(c, &s);
		if (full_every || step % 50 == 0)
			assert_aggregates(c);
	}
	while (depth > 0)
		shadow_free(&stack[--depth].s);
	shadow_free(&s);
	assert_aggregates(c);
	tp_cluster_destroy(c);
}

Test(cluster, random_sequences)
{
	tp_test_alloc_reset();
	tp_topology *h = hand(), *f = flat(13), *n = nvl72(2, 2);
	random_sequence(h, 1, 3000, true);
	random_sequence(f, 2, 3000, true);
	random_sequence(n, 3, 3000, false);
	tp_topology_destroy(h);
	tp_topology_destroy(f);
	tp_topology_destroy(n);
	TP_ASSERT_NO_LEAKS();
}

/* ---- memory ----------------------------------------------------------------------------- */

Test(cluster, memory_per_gpu)
{
	tp_test_alloc_reset();
	tp_topology *t = nvl72(4, 25); /* 7200 GPUs */
	tp_cluster *c = tp_test_cluster(t);
	size_t empty = tp_cluster_memory(c);
	cr_assert_leq(empty, 7200 * 100, "%zu bytes for 7200 GPUs", empty);
	uint32_t first, n;
	tp_topology_domain_devices(t, 1, 3, &first, &n);
	uint32_t devs[72];
	for (uint32_t i = 0; i < 72; i++)
		devs[i] = first + i;
	cr_assert_eq(tp_cluster_assign(c, "rack", devs, 72, NULL), 0);
	cr_assert_gt(tp_cluster_memory(c), empty + 72 * 4);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- stale savepoint handles, internal errors ---------------------------------------------- */

/* A handle is never handed out twice: once its savepoint is closed, a newer savepoint that took
 * the same place on the stack does not answer to it (issue #19 item 10). */
Test(cluster, stale_savepoint_handle_is_refused)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1}, b[] = {4, 5};
	size_t old, cur;
	cr_assert_eq(tp_cluster_savepoint(c, &old), 0);
	cr_assert_eq(tp_cluster_assign(c, "a", a, 2, NULL), 0);
	cr_assert_eq(tp_cluster_savepoint_discard(c, old), 0);
	cr_assert_eq(tp_cluster_savepoint(c, &cur), 0); /* the same stack slot as `old` */
	cr_assert_neq(cur, old);
	cr_assert_eq(tp_cluster_assign(c, "b", b, 2, NULL), 0);
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;
	char want[64];
	snprintf(want, sizeof want, "savepoint %zu is not open (1 open)", old);
	TP_ASSERT_ERR(tp_cluster_rollback(c, old), TP_EINVAL, tp_cluster_errmsg(c), want);
	ASSERT_UNCHANGED(c, fp, gen);
	TP_ASSERT_ERR(tp_cluster_savepoint_discard(c, old), TP_EINVAL, tp_cluster_errmsg(c), want);
	cr_assert_eq(c->nsp, 1, "the newer savepoint is still open");
	cr_assert_eq(tp_cluster_rollback(c, cur), 0);
	cr_assert_eq(tp_cluster_job_count(c), 1, "b undone, a kept");
	cr_assert_str_eq(tp_cluster_job_at(c, 0), "a");
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Nested handles name their own savepoint whatever closed in between. */
Test(cluster, nested_savepoint_handles_find_their_savepoint)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0}, b[] = {4}, d[] = {6};
	size_t s0, s1, s2;
	cr_assert_eq(tp_cluster_savepoint(c, &s0), 0);
	cr_assert_eq(tp_cluster_assign(c, "a", a, 1, NULL), 0);
	cr_assert_eq(tp_cluster_savepoint(c, &s1), 0);
	cr_assert_eq(tp_cluster_assign(c, "b", b, 1, NULL), 0);
	cr_assert_eq(tp_cluster_rollback(c, s1), 0);
	cr_assert_eq(tp_cluster_savepoint(c, &s2), 0);
	cr_assert_eq(tp_cluster_assign(c, "d", d, 1, NULL), 0);
	cr_assert_eq(tp_cluster_rollback(c, s1), TP_EINVAL, "s1 closed");
	cr_assert_eq(tp_cluster_savepoint_discard(c, s2), 0);
	cr_assert_eq(tp_cluster_job_count(c), 2);
	cr_assert_eq(tp_cluster_rollback(c, s0), 0);
	cr_assert_eq(tp_cluster_job_count(c), 0);
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The internal entry points (tp_commit's and the planners') check what they rely on: a broken
 * promise is TP_EINTERNAL with a message and no change, never an assertion (issue #19 item 11). */
Test(cluster, internal_entry_points_refuse_broken_preconditions)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1}, held[] = {1, 2}, twice[] = {3, 3}, far[] = {0, 99}, free2[] = {6, 7};
	cr_assert_eq(tp_cluster_assign(c, "a", a, 2, NULL), 0);
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;
	TP_ASSERT_ERR(tp_cluster_assign_impl(c, "a", free2, 2, NULL), TP_EINTERNAL,
	              tp_cluster_errmsg(c), "job 'a' is assigned but already running");
	TP_ASSERT_ERR(tp_cluster_assign_impl(c, "x", held, 2, NULL), TP_EINTERNAL,
	              tp_cluster_errmsg(c), "listed twice or held");
	TP_ASSERT_ERR(tp_cluster_assign_impl(c, "x", twice, 2, NULL), TP_EINTERNAL,
	              tp_cluster_errmsg(c), "job 'x' is assigned 2 devices");
	TP_ASSERT_ERR(tp_cluster_assign_impl(c, "x", far, 2, NULL), TP_EINTERNAL,
	              tp_cluster_errmsg(c), "out of range");
	TP_ASSERT_ERR(tp_cluster_assign_impl(c, "x", free2, 0, NULL), TP_EINTERNAL,
	              tp_cluster_errmsg(c), "internal error");
	ASSERT_UNCHANGED(c, fp, gen);
	TP_ASSERT_ERR(tp_cluster_rebind_impl(c, 5, free2, 2), TP_EINTERNAL, tp_cluster_errmsg(c),
	              "rebinding job slot 5 of 1");
	cr_assert_eq(tp_cluster_assign(c, "b", free2, 2, NULL), 0);
	fp = tp_cluster_fingerprint(c);
	gen = c->generation;
	TP_ASSERT_ERR(tp_cluster_rebind_impl(c, 0, free2, 2), TP_EINTERNAL, tp_cluster_errmsg(c),
	              "job 'a' is moved to 2 devices");
	ASSERT_UNCHANGED(c, fp, gen);
	uint32_t keep_one[] = {1, 8};
	cr_assert_eq(tp_cluster_rebind_impl(c, 0, keep_one, 2), 0, "its own devices are fine");
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* An undo log that cannot be replayed (simulated: the entry that found no room) is refused
 * before anything is undone; closing the savepoints clears the condition. */
Test(cluster, broken_undo_log_is_refused_unchanged)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	uint32_t a[] = {0, 1};
	size_t sp;
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_assign(c, "a", a, 2, NULL), 0);
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;
	c->undo_lost = true;
	TP_ASSERT_ERR(tp_cluster_rollback(c, sp), TP_EINTERNAL, tp_cluster_errmsg(c),
	              "cannot be replayed (nothing was undone)");
	ASSERT_UNCHANGED(c, fp, gen);
	cr_assert_eq(c->nsp, 1, "the savepoint stays open");
	c->undo_lost = false;
	c->undo[0].slot = 7; /* an assignment that never had that slot */
	TP_ASSERT_ERR(tp_cluster_rollback(c, sp), TP_EINTERNAL, tp_cluster_errmsg(c),
	              "cannot be replayed");
	ASSERT_UNCHANGED(c, fp, gen);
	c->undo[0].slot = 0;
	c->undo_lost = true;
	cr_assert_eq(tp_cluster_savepoint_discard(c, sp), 0, "keeping the changes still works");
	cr_assert(!c->undo_lost, "an empty log is sound again");
	cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
	cr_assert_eq(tp_cluster_release(c, "a"), 0);
	cr_assert_eq(tp_cluster_rollback(c, sp), 0);
	cr_assert_eq(tp_cluster_fingerprint(c), fp);
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* Histograms that disagree with the node counts make the tightest-node query say
 * TP_EINTERNAL instead of aborting. */
Test(cluster, tightest_node_reports_inconsistent_histograms)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = tp_test_cluster(t);
	unsigned nl = tp_node_level(t);
	uint32_t dom;
	c->indexed[nl] = false; /* answered from the histograms, as after a Judy failure */
	c->index_lost = true;
	cr_assert_eq(tp_cluster_tightest(c, nl, 8, &dom), 0);
	uint32_t n3;
	cr_assert_eq(tp_topology_node_by_name(t, "n3", &n3), 0);
	cr_assert_eq(dom, n3);
	c->free[nl][dom] = 7; /* the rack's histogram still says one node has 8 free */
	cr_assert_eq(tp_cluster_tightest(c, nl, 8, &dom), TP_EINTERNAL);
	c->free[nl][n3] = 8;
	uint32_t *h = c->hist[1] + (size_t)1 * c->hstride; /* rack r2 */
	h[8] = 0;                                          /* the zone still counts it */
	cr_assert_eq(tp_cluster_tightest(c, nl, 8, &dom), TP_EINTERNAL);
	h[8] = 1;
	c->indexed[nl] = true;
	c->index_lost = false;
	CHECK(c);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- cluster identity ---------------------------------------------------------------------- */

/* An allocator that keeps the last freed block of one size and hands it back to the next
 * allocation of that size, so that a new cluster lands at the address of a destroyed one.
 * Blocks carry their size in a header (the free callback is not told it). */
struct reuse_alloc {
	size_t size;  /* the size whose blocks are reused */
	void *spare;  /* a freed block of that size, or NULL */
	long live;
	int reused;
};

#define REUSE_HDR 16

static void *reuse_malloc(void *ud, size_t n)
{
	struct reuse_alloc *r = ud;
	if (n == r->size && r->spare) {
		void *p = r->spare;
		r->spare = NULL;
		r->reused++;
		r->live++;
		return p;
	}
	unsigned char *b = malloc(n + REUSE_HDR);
	if (!b)
		return NULL;
	memcpy(b, &n, sizeof n);
	r->live++;
	return b + REUSE_HDR;
}

static void *reuse_calloc(void *ud, size_t k, size_t n)
{
	if (n && k > SIZE_MAX / n)
		return NULL;
	void *p = reuse_malloc(ud, k * n);
	if (p)
		memset(p, 0, k * n);
	return p;
}

static void reuse_free(void *ud, void *p)
{
	struct reuse_alloc *r = ud;
	if (!p)
		return;
	r->live--;
	unsigned char *b = (unsigned char *)p - REUSE_HDR;
	size_t n;
	memcpy(&n, b, sizeof n);
	if (n == r->size && !r->spare) {
		r->spare = p;
		return;
	}
	free(b);
}

static void *reuse_realloc(void *ud, void *p, size_t n)
{
	if (!p)
		return reuse_malloc(ud, n);
	unsigned char *b = (unsigned char *)p - REUSE_HDR;
	size_t old;
	memcpy(&old, b, sizeof old);
	void *q = reuse_malloc(ud, n);
	if (!q)
		return NULL;
	memcpy(q, p, old < n ? old : n);
	reuse_free(ud, p);
	return q;
}

/* Free the block the allocator kept and check that nothing is left. */
static void reuse_finish(struct reuse_alloc *ra)
{
	free((unsigned char *)ra->spare - REUSE_HDR);
	cr_assert_eq(ra->live, 0);
	TP_ASSERT_NO_LEAKS();
}

/* #19 item 6: a placement that outlives its cluster is refused by a new cluster allocated at
 * the same address with the same change counter (it would write past the smaller cluster's
 * arrays). */
Test(cluster, placement_outliving_its_cluster_is_refused_at_the_same_address)
{
	tp_test_alloc_reset();
	struct reuse_alloc ra = {.size = sizeof(struct tp_cluster)};
	tp_allocator a = {reuse_malloc, reuse_calloc, reuse_realloc, reuse_free, &ra};
	tp_topology *big = hand(), *small = flat(2); /* 23 devices, 3 devices */
	tp_cluster *c1 = NULL, *c2 = NULL;
	cr_assert_eq(tp_cluster_create(&c1, big, &a), 0);
	tp_request r = TP_REQUEST_INIT;
	r.id = "j";
	r.count = 8;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c1, &r, &p), 0, "%s", tp_placement_errmsg(p));
	uint64_t gen = c1->generation;
	void *addr = c1;
	tp_cluster_destroy(c1);
	cr_assert_eq(tp_cluster_create(&c2, small, &a), 0);
	cr_assert_eq((void *)c2, addr, "the allocator put the new cluster at the old address");
	cr_assert_eq(ra.reused, 1);
	cr_assert_eq(c2->generation, gen, "the change counters match, as in the report");
	uint64_t fp = tp_cluster_fingerprint(c2);
	TP_ASSERT_ERR(tp_commit(c2, p, NULL), TP_EINVAL, tp_cluster_errmsg(c2),
	              "the placement was made on another cluster");
	ASSERT_UNCHANGED(c2, fp, gen);
	tp_placement_destroy(p);
	tp_cluster_destroy(c2);
	tp_topology_destroy(big);
	tp_topology_destroy(small);
	reuse_finish(&ra);
}

/* Two HGX nodes, a migratable 2-GPU job on each: a request for a whole node needs one
 * migration. */
static void two_small_jobs(tp_cluster *c)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	uint32_t d0[] = {0, 1}, d1[] = {8, 9};
	cr_assert_eq(tp_cluster_assign(c, "j0", d0, 2, &o), 0, "%s", tp_cluster_errmsg(c));
	cr_assert_eq(tp_cluster_assign(c, "j1", d1, 2, &o), 0, "%s", tp_cluster_errmsg(c));
}

/* #19 "a cluster identity in each plan": a plan that outlives its cluster is refused by a new
 * cluster at the same address with the same topology and the same jobs (the plan records the
 * lineage of its cluster, not its topology's identity alone); a copy of the cluster accepts it
 * (test_cluster_copy.c). */
Test(cluster, plan_outliving_its_cluster_is_refused_at_the_same_address)
{
	tp_test_alloc_reset();
	struct reuse_alloc ra = {.size = sizeof(struct tp_cluster)};
	tp_allocator a = {reuse_malloc, reuse_calloc, reuse_realloc, reuse_free, &ra};
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_hgx(&t, 1, 2, &tp_test_allocator), 0);
	tp_cluster *c1 = NULL, *c2 = NULL;
	cr_assert_eq(tp_cluster_create(&c1, t, &a), 0);
	two_small_jobs(c1);
	tp_request r = TP_REQUEST_INIT;
	r.id = "whole";
	r.count = 8;
	r.required = "node";
	tp_plan *p = NULL;
	cr_assert_eq(tp_defrag_plan(c1, &r, NULL, &p), 0, "%s", tp_plan_errmsg(p));
	cr_assert_eq(tp_plan_step_count(p), 2, "one migration and the place step");
	void *addr = c1;
	tp_cluster_destroy(c1);
	cr_assert_eq(tp_cluster_create(&c2, t, &a), 0);
	cr_assert_eq((void *)c2, addr, "the allocator put the new cluster at the old address");
	two_small_jobs(c2);
	uint64_t fp = tp_cluster_fingerprint(c2), gen = c2->generation;
	TP_ASSERT_ERR(tp_plan_apply_step(c2, p, 0, NULL), TP_EINVAL, tp_cluster_errmsg(c2),
	              "the plan was made on another cluster: it applies to that cluster and to its "
	              "copies (tp_cluster_copy) only");
	ASSERT_UNCHANGED(c2, fp, gen);
	tp_plan_destroy(p);
	tp_cluster_destroy(c2);
	tp_topology_destroy(t);
	reuse_finish(&ra);
}

/* Identities are distinct per cluster and per topology, also across threads (a C11 atomic):
 * here, distinct across many creations. */
Test(cluster, identities_are_distinct)
{
	tp_test_alloc_reset();
	tp_topology *t = hand(), *u = flat(1);
	cr_assert_neq(tp_topology_identity(t), tp_topology_identity(u));
	cr_assert_neq(tp_topology_identity(t), 0);
	uint64_t prev = 0;
	for (int i = 0; i < 4; i++) {
		tp_cluster *c = tp_test_cluster(t);
		cr_assert_neq(tp_cluster_identity(c), prev);
		cr_assert_neq(tp_cluster_identity(c), 0);
		cr_assert(tp_cluster_is(c, tp_cluster_identity(c)));
		prev = tp_cluster_identity(c);
		tp_cluster_destroy(c);
	}
	tp_topology_destroy(t);
	tp_topology_destroy(u);
	TP_ASSERT_NO_LEAKS();
}

/* ---- the writer guard ---------------------------------------------------------------------- */

static tp_cluster *guarded(const tp_topology *t, int on)
{
	tp_cluster_options o = TP_CLUSTER_OPTIONS_INIT;
	o.writer_guard = on;
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create_ext(&c, t, &tp_test_allocator, &o), 0);
	return c;
}

/* With the guard on, a writing call that finds another writer inside (simulated: the flag that
 * writer holds) returns TP_EBUSY and changes nothing; once it left, calls pass again. */
Test(cluster, writer_guard_refuses_a_second_writer)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *c = guarded(t, 1);
	uint32_t a[] = {0, 1}, b[] = {4};
	cr_assert_eq(tp_cluster_assign(c, "a", a, 2, NULL), 0);
	tp_request r = TP_REQUEST_INIT;
	r.id = "p";
	r.count = 2;
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0);
	size_t sp = 0;
	uint64_t fp = tp_cluster_fingerprint(c), gen = c->generation;
	atomic_store(&c->busy, true); /* another thread is inside a writing call */
	cr_assert_eq(tp_cluster_assign(c, "b", b, 1, NULL), TP_EBUSY);
	cr_assert_eq(tp_cluster_release(c, "a"), TP_EBUSY);
	cr_assert_eq(tp_cluster_set_down(c, b, 1, 1), TP_EBUSY);
	cr_assert_eq(tp_cluster_set_cordoned(c, b, 1, 1), TP_EBUSY);
	cr_assert_eq(tp_cluster_savepoint(c, &sp), TP_EBUSY);
	cr_assert_eq(tp_cluster_rollback(c, 1), TP_EBUSY);
	cr_assert_eq(tp_cluster_savepoint_discard(c, 1), TP_EBUSY);
	cr_assert_eq(tp_commit(c, p, NULL), TP_EBUSY);
	tp_plan *plan = (tp_plan *)&plan; /* must be set to NULL */
	cr_assert_eq(tp_defrag_compact(c, "rack", 1, NULL, &plan), TP_EBUSY);
	cr_assert_null(plan);
	cr_assert_eq(c->nsp, 0);
	ASSERT_UNCHANGED(c, fp, gen);
	atomic_store(&c->busy, false); /* it left */
	cr_assert_eq(tp_commit(c, p, NULL), 0);
	cr_assert(!atomic_load(&c->busy), "the guard is let go after each call");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* The library's own calls inside a guarded call pass (a planner's savepoints and releases);
 * without the guard the flag is never read. */
Test(cluster, writer_guard_lets_nested_library_calls_through)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster *g = guarded(t, 1), *u = guarded(t, 0);
	uint32_t a[] = {0}, b[] = {6};
	for (int k = 0; k < 2; k++) {
		tp_cluster *c = k ? u : g;
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.migratable = 1;
		cr_assert_eq(tp_cluster_assign(c, "a", a, 1, &o), 0);
		cr_assert_eq(tp_cluster_assign(c, "b", b, 1, &o), 0);
		uint64_t fp = tp_cluster_fingerprint(c);
		tp_plan *plan = NULL;
		int rc = tp_defrag_compact(c, "rack", 2, NULL, &plan);
		cr_assert(rc == 0 || rc == TP_ENOPLAN, "%s: %s", tp_err_name(rc), tp_cluster_errmsg(c));
		cr_assert_eq(tp_cluster_fingerprint(c), fp, "the planner rolled back");
		if (rc == 0)
			for (size_t i = 0; i < tp_plan_step_count(plan); i++)
				cr_assert_eq(tp_plan_apply_step(c, plan, i, NULL), 0, "%s",
				             tp_cluster_errmsg(c));
		tp_plan_destroy(plan);
		cr_assert(!atomic_load(&c->busy));
	}
	atomic_store(&u->busy, true); /* ignored without the guard */
	cr_assert_eq(tp_cluster_release(u, "a"), 0);
	CHECK(g);
	CHECK(u);
	tp_cluster_destroy(g);
	tp_cluster_destroy(u);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(cluster, create_ext_checks_the_options_version)
{
	tp_test_alloc_reset();
	tp_topology *t = hand();
	tp_cluster_options o = TP_CLUSTER_OPTIONS_INIT;
	tp_cluster *c = (tp_cluster *)&c;
	for (unsigned v = 0; v < 3; v += 2) {
		o.version = v;
		cr_assert_eq(tp_cluster_create_ext(&c, t, &tp_test_allocator, &o), TP_EINVAL);
		cr_assert_null(c);
	}
	o.version = UINT_MAX;
	cr_assert_eq(tp_cluster_create_ext(&c, t, &tp_test_allocator, &o), TP_EINVAL);
	cr_assert_eq(tp_cluster_create_ext(&c, t, &tp_test_allocator, NULL), 0);
	cr_assert(!c->guard);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
