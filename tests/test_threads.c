/* SPDX-License-Identifier: MIT */
/*
 * Concurrent readers: several threads ask the read-only functions the same questions about one
 * cluster at once (tp_place, tp_replace, tp_frag_report, the cluster's free counts, histograms,
 * tightest domains, device states, fingerprint and check, and topology queries), and every
 * answer must equal the one a single thread got first. Run it under ThreadSanitizer too
 * (docs/reliability.md): a data race there is a bug even when the answers agree.
 *
 * The cluster is shared, so its allocator is shared: the test allocator's counters are not
 * atomic, so this file counts blocks with an allocator of its own that is (docs/thread-safety.md:
 * an allocator shared by threads must be thread-safe).
 *
 * Criterion's runner does not start under ThreadSanitizer, so with TP_THREADS_STANDALONE the
 * same tests build with their own main() (the test 'threads-tsan').
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TP_THREADS_STANDALONE
#include "topoplace.h"
#define T_ASSERT(cond, ...)                                                                    \
	do {                                                                                       \
		if (!(cond)) {                                                                         \
			fprintf(stderr, "%s:%d: ", __FILE__, __LINE__);                                    \
			fprintf(stderr, __VA_ARGS__);                                                      \
			fputc('\n', stderr);                                                               \
			abort();                                                                           \
		}                                                                                      \
	} while (0)
#define TEST(suite, name) static void name(void)
#else
#include "testutil.h"
#define T_ASSERT(cond, ...) cr_assert(cond, __VA_ARGS__)
#define TEST(suite, name) Test(suite, name)
#endif

#define NTHREADS 4
#define ROUNDS 20

/* ---- a thread-safe counting allocator --------------------------------------------------- */

static atomic_long mt_live;

static void *mt_malloc(void *ud, size_t n)
{
	(void)ud;
	void *p = malloc(n);
	if (p)
		atomic_fetch_add(&mt_live, 1);
	return p;
}

static void *mt_calloc(void *ud, size_t n, size_t s)
{
	(void)ud;
	void *p = calloc(n, s);
	if (p)
		atomic_fetch_add(&mt_live, 1);
	return p;
}

static void *mt_realloc(void *ud, void *q, size_t n)
{
	(void)ud;
	void *p = realloc(q, n);
	if (p && !q)
		atomic_fetch_add(&mt_live, 1);
	return p;
}

static void mt_free(void *ud, void *p)
{
	(void)ud;
	if (p)
		atomic_fetch_sub(&mt_live, 1);
	free(p);
}

static const tp_allocator mt_alloc = {mt_malloc, mt_calloc, mt_realloc, mt_free, NULL};

/* ---- answers as digests ------------------------------------------------------------------ */

static uint64_t mix(uint64_t h, uint64_t v)
{
	for (int i = 0; i < 8; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
	for (; s && *s; s++)
		h = mix(h, (unsigned char)*s);
	return mix(h, s ? 1 : 0);
}

static uint64_t mix_f(uint64_t h, double d)
{
	uint64_t v;
	memcpy(&v, &d, sizeof v);
	return mix(h, v);
}

static uint64_t placement_digest(int rc, const tp_placement *p)
{
	uint64_t h = mix(0xcbf29ce484222325ULL, (uint64_t)(int64_t)rc);
	if (!p)
		return h;
	h = mix(h, (uint64_t)(int64_t)tp_placement_status(p));
	h = mix_str(h, tp_placement_errmsg(p));
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++)
		h = mix(h, d[i]);
	h = mix_f(h, tp_placement_step_comm_us(p));
	tp_fit fit = TP_FIT_INIT;
	if (tp_placement_fit(p, &fit) == 0)
		h = mix(mix(mix(h, fit.needed), fit.free_total), fit.best);
	uint32_t f, r;
	for (size_t i = 0; tp_placement_replaced(p, i, &f, &r) == 0; i++)
		h = mix(mix(h, f), r);
	return h;
}

/* ---- the shared state --------------------------------------------------------------------- */

struct world {
	tp_topology *t;
	tp_cluster *c;
};

static struct world world_new(void)
{
	struct world w = {NULL, NULL};
	T_ASSERT(tp_topology_generate_nvl72(&w.t, 1, 3, &mt_alloc) == 0, "tp_topology_generate_nvl72");
	T_ASSERT(tp_cluster_create(&w.c, w.t, &mt_alloc) == 0, "tp_cluster_create");
	/* Rack 0 mostly full, rack 1 scattered, rack 2 free; some down and cordoned devices. */
	uint32_t a[60], b[6] = {72, 77, 85, 90, 101, 130}, down[] = {3, 80, 140}, cord[] = {100};
	for (uint32_t i = 0; i < 60; i++)
		a[i] = i + 4;
	tp_job_options oa = TP_JOB_OPTIONS_INIT, ob = TP_JOB_OPTIONS_INIT;
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 60;
	shape.required = "rack";
	oa.shape = &shape;
	oa.migratable = 1;
	ob.tenant = "other";
	T_ASSERT(tp_cluster_assign(w.c, "a", a, 60, &oa) == 0, "tp_cluster_assign");
	T_ASSERT(tp_cluster_assign(w.c, "b", b, 6, &ob) == 0, "tp_cluster_assign");
	T_ASSERT(tp_cluster_set_down(w.c, down, 3, 1) == 0, "tp_cluster_set_down");
	T_ASSERT(tp_cluster_set_cordoned(w.c, cord, 1, 1) == 0, "tp_cluster_set_cordoned");
	return w;
}

static void world_free(struct world *w)
{
	tp_cluster_destroy(w->c);
	tp_topology_destroy(w->t);
}

/* ---- the questions ------------------------------------------------------------------------ */

#define NREQ 10

static tp_request request_at(int i, tp_slice *sl, tp_domain_cap *cap, const char **nodes)
{
	tp_request r = TP_REQUEST_INIT;
	static const uint32_t counts[NREQ] = {1, 4, 8, 16, 72, 36, 12, 140, 20, 0};
	r.count = counts[i];
	switch (i) {
	case 1: r.group_size = 4; break;
	case 2: r.required = "rack"; break;
	case 3: r.preferred = "rack"; r.balanced = 1; break;
	case 4: r.required = "rack"; break;
	case 5:
		sl[0] = (tp_slice){"node", 4};
		r.slices = sl;
		r.nslices = 1;
		r.required = "block";
		break;
	case 6:
		cap[0] = (tp_domain_cap){"rack", 4, 0};
		r.caps = cap;
		r.ncaps = 1;
		r.spread_level = "rack";
		r.spread_min_domains = 3;
		break;
	case 8:
		nodes[0] = "block0-rack2-node0";
		nodes[1] = "block0-rack2-node1";
		r.select_nodes = nodes;
		r.nselect_nodes = 2;
		r.select_model = "GB200";
		break;
	default: break;
	}
	return r;
}

static uint64_t ask_place(const tp_cluster *c, int i)
{
	tp_slice sl[2];
	tp_domain_cap cap[2];
	const char *nodes[2];
	tp_request r = request_at(i, sl, cap, nodes);
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	uint64_t h = placement_digest(rc, p);
	tp_placement_destroy(p);
	return h;
}

static uint64_t ask_replace(const tp_cluster *c)
{
	uint32_t failed[] = {10, 11};
	tp_placement *p = NULL;
	int rc = tp_replace(c, "a", failed, 2, &p);
	uint64_t h = placement_digest(rc, p);
	tp_placement_destroy(p);
	return h;
}

static uint64_t ask_frag(const tp_cluster *c, bool custom)
{
	tp_job_shape mixes[] = {{8, "rack", 1.0}, {4, "node", 2.0}, {72, "rack", 0.5}};
	tp_frag *f = NULL;
	int rc = tp_frag_report(c, custom ? mixes : NULL, custom ? 3 : 0, &f);
	uint64_t h = mix(0, (uint64_t)(int64_t)rc);
	for (unsigned l = 0; f && l < 3; l++) {
		h = mix(mix(mix(h, tp_frag_domain_count(f, l)), tp_frag_free_count(f, l)),
		        tp_frag_fully_free_count(f, l));
		h = mix_f(mix(h, tp_frag_largest_free_count(f, l)), tp_frag_fragmentation(f, l));
	}
	if (f)
		h = mix(mix(mix_f(h, tp_frag_workload(f)), tp_frag_down_count(f)),
		        tp_frag_cordoned_count(f));
	tp_frag_destroy(f);
	return h;
}

static uint64_t ask_counts(const tp_cluster *c)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint64_t h = mix(mix(0, tp_cluster_free_total_count(c)), tp_cluster_down_total_count(c));
	h = mix(h, tp_cluster_cordoned_total_count(c));
	for (unsigned l = 0; l < tp_topology_level_count(t); l++)
		for (uint32_t d = 0; d < tp_topology_domain_count(t, l); d++) {
			uint32_t hist[6] = {0};
			h = mix(mix(h, tp_cluster_free_count(c, l, d)), tp_cluster_free_node_count(c, l, d));
			h = mix(h, (uint64_t)tp_cluster_node_histogram(c, l, d, hist, 6));
			for (int k = 0; k < 6; k++)
				h = mix(h, hist[k]);
		}
	return h;
}

static uint64_t ask_tightest(const tp_cluster *c)
{
	uint64_t h = 0;
	for (unsigned l = 0; l < 3; l++)
		for (uint32_t k = 1; k <= 73; k++) {
			uint32_t dom = TP_NONE;
			h = mix(mix(h, (uint64_t)(int64_t)tp_cluster_tightest(c, l, k, &dom)), dom);
		}
	return h;
}

static uint64_t ask_devices(const tp_cluster *c)
{
	uint64_t h = tp_cluster_fingerprint(c);
	char buf[128];
	h = mix(h, (uint64_t)(int64_t)tp_cluster_check(c, buf, sizeof buf));
	for (uint32_t d = 0; d < tp_topology_device_count(tp_cluster_topology(c)); d++) {
		const char *job = NULL;
		h = mix_str(mix(h, (uint64_t)(int64_t)tp_cluster_device_state(c, d, &job)), job);
	}
	for (size_t j = 0; j < tp_cluster_job_count(c); j++) {
		const char *id = tp_cluster_job_at(c, j);
		const uint32_t *devs;
		size_t n;
		h = mix_str(h, id);
		if (tp_cluster_job_devices(c, id, &devs, &n) == 0)
			for (size_t i = 0; i < n; i++)
				h = mix(h, devs[i]);
	}
	return h;
}

static uint64_t ask_topology(const tp_topology *t)
{
	uint64_t h = 0;
	char buf[64];
	for (unsigned l = 0; l < tp_topology_level_count(t); l++) {
		h = mix_str(h, tp_topology_level_name(t, l));
		for (uint32_t d = 0; d < tp_topology_domain_count(t, l); d++) {
			uint32_t back = TP_NONE;
			h = mix(h, (uint64_t)tp_topology_domain_path(t, l, d, buf, sizeof buf));
			h = mix(mix_str(h, buf), (uint64_t)tp_topology_domain_by_path(t, l, buf, &back));
			h = mix(mix(h, back), tp_topology_domain_parent(t, l, d));
		}
	}
	for (uint32_t a = 0; a < tp_topology_device_count(t); a += 7)
		for (uint32_t b = 0; b < tp_topology_device_count(t); b += 11) {
			int lv = 99;
			h = mix(h, (uint64_t)(int64_t)tp_topology_common_level(t, a, b, &lv));
			h = mix(h, (uint64_t)(int64_t)lv);
		}
	uint32_t dev = TP_NONE;
	h = mix(mix(h, (uint64_t)tp_topology_device_by_name(t, "block0-rack1-node3/2", &dev)), dev);
	return mix(h, tp_topology_memory(t));
}

#define NQUESTIONS (NREQ + 8)

static uint64_t ask(const struct world *w, int q)
{
	if (q < NREQ)
		return ask_place(w->c, q);
	switch (q - NREQ) {
	case 0: return ask_replace(w->c);
	case 1: return ask_frag(w->c, false);
	case 2: return ask_frag(w->c, true);
	case 3: return ask_counts(w->c);
	case 4: return ask_tightest(w->c);
	case 5: return ask_devices(w->c);
	case 6: return ask_topology(w->t);
	default: return tp_cluster_fingerprint(w->c);
	}
}

struct reader {
	pthread_t tid;
	int id;
	const struct world *w;
	const uint64_t *expected;
	int mismatches;
	int first_bad;
};

static void *read_all(void *arg)
{
	struct reader *r = arg;
	for (int round = 0; round < ROUNDS; round++)
		for (int k = 0; k < NQUESTIONS; k++) {
			int q = (k + r->id * 5 + round) % NQUESTIONS; /* threads in different orders */
			if (ask(r->w, q) != r->expected[q]) {
				if (!r->mismatches)
					r->first_bad = q;
				r->mismatches++;
			}
		}
	return NULL;
}

TEST(threads, readers_agree_with_one_thread)
{
	atomic_store(&mt_live, 0);
	struct world w = world_new();
	uint64_t fp = tp_cluster_fingerprint(w.c);
	uint64_t expected[NQUESTIONS];
	for (int q = 0; q < NQUESTIONS; q++)
		expected[q] = ask(&w, q);
	/* The questions must not all be failures: some placements succeed, some do not. */
	tp_placement *p = NULL;
	tp_request r = TP_REQUEST_INIT;
	r.count = 72;
	r.required = "rack";
	T_ASSERT(tp_place(w.c, &r, &p) == 0, "a whole free rack is placeable");
	tp_placement_destroy(p);
	r.count = 140;
	T_ASSERT(tp_place(w.c, &r, &p) != 0, "140 devices in one rack are not");
	tp_placement_destroy(p);

	struct reader rd[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		rd[i] = (struct reader){.id = i, .w = &w, .expected = expected};
		T_ASSERT(pthread_create(&rd[i].tid, NULL, read_all, &rd[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < NTHREADS; i++)
		T_ASSERT(pthread_join(rd[i].tid, NULL) == 0, "pthread_join");
	for (int i = 0; i < NTHREADS; i++)
		T_ASSERT((rd[i].mismatches) == (0), "thread %d: %d answers differ (first: question %d)",
		             i, rd[i].mismatches, rd[i].first_bad);
	T_ASSERT((tp_cluster_fingerprint(w.c)) == (fp), "readers changed the cluster");
	world_free(&w);
	T_ASSERT((atomic_load(&mt_live)) == (0), "%ld block(s) leaked", atomic_load(&mt_live));
}

/* Clusters of one topology are independent: one writer each, all at once. */
static void *write_own(void *arg)
{
	const tp_topology *t = arg;
	tp_cluster *c = NULL;
	long bad = 0;
	if (tp_cluster_create(&c, t, &mt_alloc) != 0)
		return (void *)1;
	for (uint32_t i = 0; i < 40; i++) {
		char id[16];
		snprintf(id, sizeof id, "j%u", i);
		tp_request r = TP_REQUEST_INIT;
		r.id = id;
		r.count = 1 + i % 8;
		tp_placement *p = NULL;
		if (tp_place(c, &r, &p) == 0)
			bad += tp_commit(c, p, NULL) != 0;
		tp_placement_destroy(p);
		if (i % 3 == 0) {
			snprintf(id, sizeof id, "j%u", i / 2);
			tp_cluster_release(c, id);
		}
	}
	char buf[128];
	bad += tp_cluster_check(c, buf, sizeof buf) != 0;
	tp_cluster_destroy(c);
	return (void *)(intptr_t)bad;
}

TEST(threads, one_writer_per_cluster_on_a_shared_topology)
{
	atomic_store(&mt_live, 0);
	tp_topology *t = NULL;
	T_ASSERT(tp_topology_generate_hgx(&t, 2, 4, &mt_alloc) == 0, "tp_topology_generate_hgx");
	pthread_t tid[NTHREADS];
	for (int i = 0; i < NTHREADS; i++)
		T_ASSERT(pthread_create(&tid[i], NULL, write_own, t) == 0, "pthread_create");
	for (int i = 0; i < NTHREADS; i++) {
		void *res;
		T_ASSERT(pthread_join(tid[i], &res) == 0, "pthread_join");
		T_ASSERT((res) == NULL, "writer %d saw %ld failures", i, (long)(intptr_t)res);
	}
	tp_topology_destroy(t);
	T_ASSERT((atomic_load(&mt_live)) == (0), "%ld block(s) leaked", atomic_load(&mt_live));
}

/* ---- one plan applied to copies of a state ------------------------------------------------ */

/* The plan is read-only while it is applied (the cursor is the cluster's): threads that carry
 * out the same plan on their own copies of the state (tp_cluster_copy: a copy keeps the
 * lineage the plan records) never see each other's steps. */

/* 8 HGX nodes, each with a 2-GPU migratable job on GPUs 0-1: a request for two whole nodes
 * needs two migrations. */
static tp_cluster *two_gpu_jobs(const tp_topology *t)
{
	tp_cluster *c = NULL;
	T_ASSERT(tp_cluster_create(&c, t, &mt_alloc) == 0, "tp_cluster_create");
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	o.preemptible = 0;
	for (uint32_t k = 0; k < 8; k++) {
		char id[16];
		uint32_t devs[2] = {8 * k, 8 * k + 1};
		snprintf(id, sizeof id, "j%u", k);
		T_ASSERT(tp_cluster_assign(c, id, devs, 2, &o) == 0, "assign: %s", tp_cluster_errmsg(c));
	}
	return c;
}

struct applier {
	pthread_t tid;
	const tp_plan *p;
	tp_cluster *c;
	long refused;
	char msg[512];
};

/* Carry the whole plan out, then roll it back, again and again. */
static void *apply_all(void *arg)
{
	struct applier *a = arg;
	size_t n = tp_plan_step_count(a->p);
	for (int round = 0; round < 10 * ROUNDS && !a->refused; round++) {
		size_t sp;
		if (tp_cluster_savepoint(a->c, &sp) != 0) {
			a->refused++;
			break;
		}
		for (size_t i = 0; i < n && !a->refused; i++)
			if (tp_plan_apply_step(a->c, a->p, i, NULL) != 0) {
				a->refused++;
				snprintf(a->msg, sizeof a->msg, "step %zu: %s", i, tp_cluster_errmsg(a->c));
			}
		tp_cluster_rollback(a->c, sp);
	}
	return NULL;
}

TEST(threads, one_plan_applied_to_copies_of_a_state)
{
	atomic_store(&mt_live, 0);
	tp_topology *t = NULL;
	T_ASSERT(tp_topology_generate_hgx(&t, 2, 4, &mt_alloc) == 0, "tp_topology_generate_hgx");
	tp_cluster *origin = two_gpu_jobs(t);
	tp_request r = TP_REQUEST_INIT;
	r.id = "two-nodes";
	r.count = 16;
	r.group_size = 8;
	r.group_level = "node";
	tp_plan *p = NULL;
	T_ASSERT(tp_defrag_plan(origin, &r, NULL, &p) == 0, "plan: %s", tp_plan_errmsg(p));
	T_ASSERT(tp_plan_step_count(p) == 3, "%zu steps, expected 2 migrations and the place",
	         tp_plan_step_count(p));
	struct applier a[NTHREADS];
	for (int i = 0; i < NTHREADS; i++) {
		a[i] = (struct applier){.p = p};
		T_ASSERT(tp_cluster_copy(&a[i].c, origin, NULL) == 0, "tp_cluster_copy");
		T_ASSERT(pthread_create(&a[i].tid, NULL, apply_all, &a[i]) == 0, "pthread_create");
	}
	for (int i = 0; i < NTHREADS; i++) {
		T_ASSERT(pthread_join(a[i].tid, NULL) == 0, "pthread_join");
		T_ASSERT(a[i].refused == 0, "thread %d was refused: %s", i, a[i].msg);
		char buf[128];
		T_ASSERT(tp_cluster_check(a[i].c, buf, sizeof buf) == 0, "%s", buf);
		T_ASSERT(tp_cluster_fingerprint(a[i].c) == tp_cluster_fingerprint(origin),
		         "a rolled-back copy differs from the original");
		tp_cluster_destroy(a[i].c);
	}
	/* the order is still checked, per cluster */
	T_ASSERT(tp_plan_apply_step(origin, p, 1, NULL) == TP_EINVAL, "step 1 before step 0");
	T_ASSERT(strstr(tp_cluster_errmsg(origin), "step 1 applied out of order: step 0 is next"),
	         "%s", tp_cluster_errmsg(origin));
	tp_plan_destroy(p);
	tp_cluster_destroy(origin);
	tp_topology_destroy(t);
	T_ASSERT((atomic_load(&mt_live)) == (0), "%ld block(s) leaked", atomic_load(&mt_live));
}

#ifdef TP_THREADS_STANDALONE
int main(void)
{
	readers_agree_with_one_thread();
	one_writer_per_cluster_on_a_shared_topology();
	one_plan_applied_to_copies_of_a_state();
	puts("threads: 3 tests passed");
	return 0;
}
#endif
