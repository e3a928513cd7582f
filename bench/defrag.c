/* SPDX-License-Identifier: MIT */
/*
 * tp-bench defrag: latency of tp_defrag_plan for a whole-rack request on fragmented fleets.
 *
 * Each NVL72 fleet (~10k and ~100k GPUs by default) is filled to ~85% with small migratable
 * jobs (1, 2 or 4 GPUs inside one node, 8 GPUs as two whole nodes of one rack; checkpoint 30,
 * 60, 120 or 300 s; not preemptible, so every moved job needs a new home) at random positions,
 * so that every rack holds some free GPUs and no rack is free. Then a 72-GPU request (groups of
 * 4, required rack) is planned again and again, each call timed on its own; after each call a
 * few running jobs end and the fill is topped up again, so the timings cover many states.
 *
 * Reported per fleet: p50 / p99 plan time (wall clock, and the thread's CPU time, which a
 * loaded machine does not inflate), the share of calls that found a plan, and the means
 * of moved jobs, moved devices, cost, and the planner's work (racks whose devices were read,
 * racks searched, job sets simulated).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#define DEFRAG_MAX_SIZES 8

struct defrag_opts {
	uint64_t sizes[DEFRAG_MAX_SIZES];
	int nsizes;
	uint64_t seed;
	long reps;
	double occupancy;
	const char *json;
	unsigned rack_jobs; /* --rack-jobs BLOCKS: #19's fleet instead (0: no) */
	bool unlimited;     /* --unlimited: no work budget */
};

struct defrag_result {
	uint64_t gpus;
	unsigned blocks, rpb;
	long jobs;
	double occupancy;
	double p50_ms, p99_ms, mean_ms;
	double cpu_p50_ms, cpu_p99_ms; /* thread CPU time: stable on a loaded machine */
	double ok_share;
	double moved_jobs_mean, moved_devices_mean, cost_s_mean;
	double scanned_mean, evaluated_mean, tried_mean;
	long reps;
};

static void defrag_usage(FILE *f)
{
	fprintf(f, "usage: tp-bench defrag [--sizes 10000,100000] [--seed N] [--reps N]\n"
	           "                       [--occupancy 0.85] [--json FILE]\n"
	           "       tp-bench defrag --rack-jobs BLOCKS [--unlimited]\n"
	           "  tp_defrag_plan latency for a 72-GPU rack-required request on NVL72 fleets\n"
	           "  filled with small migratable jobs; or, with --rack-jobs, once on BLOCKS blocks\n"
	           "  of 1823 racks with one 27-GPU migratable job per rack (issue #19), within\n"
	           "  the default work budget or without one (--unlimited).\n");
}

/* One small job at a random position: 1, 2 or 4 GPUs inside a node, or 8 GPUs as two whole
 * nodes of one rack. Returns false when the random position had no room. */
static bool place_small(tp_cluster *c, const tp_topology *t, struct bench_rng *rng, long *next)
{
	static const unsigned sizes[] = {1, 1, 2, 2, 4, 4, 8};
	static const double ckpt[] = {30, 60, 120, 300};
	unsigned size = sizes[bench_rng_below(rng, sizeof sizes / sizeof *sizes)];
	uint32_t nnodes = tp_topology_node_count(t);
	uint32_t node = (uint32_t)bench_rng_below(rng, nnodes);
	uint32_t devs[8], n = 0;
	if (size <= NVL72_NODE_GPUS) {
		n = bench_node_free_devices(c, node, devs, size);
		if (n < size)
			return false;
	} else {
		if (node + 1 >= nnodes ||
		    tp_topology_node_domain(t, node, NVL_RACK) !=
		            tp_topology_node_domain(t, node + 1, NVL_RACK) ||
		    bench_node_free_devices(c, node, devs, 4) < 4 ||
		    bench_node_free_devices(c, node + 1, devs + 4, 4) < 4)
			return false;
		n = 8;
	}
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.migratable = 1;
	o.preemptible = 0;
	o.checkpoint_s = ckpt[bench_rng_below(rng, 4)];
	char id[32];
	snprintf(id, sizeof id, "small-%ld", (*next)++);
	BENCH_CHECK(tp_cluster_assign(c, id, devs, n, &o), tp_cluster_errmsg(c));
	return true;
}

static void fill_small(tp_cluster *c, const tp_topology *t, struct bench_rng *rng, long *next,
                       double target)
{
	double total = tp_topology_device_count(t);
	int misses = 0;
	while (1.0 - tp_cluster_free_total_count(c) / total < target && misses < 2000)
		misses = place_small(c, t, rng, next) ? 0 : misses + 1;
}

static void churn(tp_cluster *c, const tp_topology *t, struct bench_rng *rng, long *next,
                  double target)
{
	for (int i = 0; i < 4 && tp_cluster_job_count(c); i++) {
		char id[64];
		snprintf(id, sizeof id, "%s",
		         tp_cluster_job_at(c, bench_rng_below(rng, tp_cluster_job_count(c))));
		BENCH_CHECK(tp_cluster_release(c, id), tp_cluster_errmsg(c));
	}
	fill_small(c, t, rng, next, target);
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void defrag_run(const struct defrag_opts *o, uint64_t gpus, struct defrag_result *res)
{
	memset(res, 0, sizeof *res);
	bench_nvl72_shape(gpus, &res->blocks, &res->rpb);
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	BENCH_CHECK(tp_topology_generate_nvl72(&t, res->blocks, res->rpb, NULL), "");
	BENCH_CHECK(tp_cluster_create(&c, t, NULL), "");
	res->gpus = tp_topology_device_count(t);
	struct bench_rng rng;
	bench_rng_seed(&rng, o->seed ^ gpus);
	long next = 0;
	fill_small(c, t, &rng, &next, o->occupancy);
	res->jobs = (long)tp_cluster_job_count(c);
	res->occupancy = 1.0 - (double)tp_cluster_free_total_count(c) / res->gpus;

	tp_request r = TP_REQUEST_INIT;
	r.id = "rack-job";
	r.count = NVL72_RACK_GPUS;
	r.group_size = NVL72_NODE_GPUS;
	r.group_level = "node";
	r.required = "rack";
	double *ms = calloc((size_t)o->reps, sizeof *ms);
	double *mj = calloc((size_t)o->reps, sizeof *mj), *md = calloc((size_t)o->reps, sizeof *md);
	double *cs = calloc((size_t)o->reps, sizeof *cs),
	       *cpu = calloc((size_t)o->reps, sizeof *cpu);
	if (!ms || !mj || !md || !cs || !cpu)
		bench_die("out of memory");
	long ok = 0;
	double scanned = 0, evaluated = 0, tried = 0;
	for (long i = 0; i < o->reps; i++) {
		tp_plan *p = NULL;
		tp_defrag_stats st = TP_DEFRAG_STATS_INIT;
		uint64_t c0 = thread_cpu_ns(), t0 = bench_now_ns();
		int rc = tp_defrag_plan(c, &r, NULL, &p);
		uint64_t t1 = bench_now_ns(), c1 = thread_cpu_ns();
		if (p)
			BENCH_CHECK(tp_plan_stats(p, &st), "tp_plan_stats");
		cpu[i] = (double)(c1 - c0) / 1e6;
		if (rc == TP_ENOMEM || rc == TP_EINVAL)
			bench_die("tp_defrag_plan: %s (%s)", tp_err_name(rc), tp_plan_errmsg(p));
		ms[i] = (double)(t1 - t0) / 1e6;
		if (rc == 0) {
			mj[ok] = tp_plan_moved_job_count(p);
			md[ok] = tp_plan_moved_device_count(p);
			cs[ok] = tp_plan_cost_s(p);
			ok++;
		}
		scanned += (double)st.scanned;
		evaluated += (double)st.evaluated;
		tried += (double)st.simulated;
		tp_plan_destroy(p);
		churn(c, t, &rng, &next, o->occupancy);
		bench_progress(false, "defrag %llu GPUs: %ld/%ld", (unsigned long long)res->gpus,
		               i + 1, o->reps);
	}
	bench_progress(true, "defrag %llu GPUs: done", (unsigned long long)res->gpus);
	res->reps = o->reps;
	res->mean_ms = bench_mean(ms, (size_t)o->reps);
	res->p50_ms = bench_quantile(ms, (size_t)o->reps, 0.5);
	res->p99_ms = bench_quantile(ms, (size_t)o->reps, 0.99);
	res->cpu_p50_ms = bench_quantile(cpu, (size_t)o->reps, 0.5);
	res->cpu_p99_ms = bench_quantile(cpu, (size_t)o->reps, 0.99);
	res->ok_share = (double)ok / (double)o->reps;
	res->moved_jobs_mean = bench_mean(mj, (size_t)ok);
	res->moved_devices_mean = bench_mean(md, (size_t)ok);
	res->cost_s_mean = bench_mean(cs, (size_t)ok);
	res->scanned_mean = scanned / (double)o->reps;
	res->evaluated_mean = evaluated / (double)o->reps;
	res->tried_mean = tried / (double)o->reps;
	free(ms);
	free(mj);
	free(md);
	free(cs);
	free(cpu);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
}

/* Issue #19's long search: one 27-GPU migratable job (checkpoint 60 s) on every rack of
 * `blocks` NVL72 blocks of 1823 racks (2.1M GPUs at 16 blocks), one 72-GPU one-rack request,
 * planned once. */
static int rack_jobs_run(const struct defrag_opts *o)
{
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	BENCH_CHECK(tp_topology_generate_nvl72(&t, o->rack_jobs, 1823, NULL), "");
	BENCH_CHECK(tp_cluster_create(&c, t, NULL), "");
	uint32_t racks = o->rack_jobs * 1823u, devs[27];
	tp_job_options jo = TP_JOB_OPTIONS_INIT;
	jo.migratable = 1;
	jo.preemptible = 0;
	for (uint32_t k = 0; k < racks; k++) {
		char id[32];
		for (uint32_t i = 0; i < 27; i++)
			devs[i] = k * NVL72_RACK_GPUS + i;
		snprintf(id, sizeof id, "j%u", k);
		BENCH_CHECK(tp_cluster_assign(c, id, devs, 27, &jo), tp_cluster_errmsg(c));
	}
	tp_request r = TP_REQUEST_INIT;
	r.id = "rack-job";
	r.count = NVL72_RACK_GPUS;
	r.required = "rack";
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	if (o->unlimited)
		pol.max_candidates = pol.max_simulations = UINT32_MAX;
	tp_plan *p = NULL;
	uint64_t c0 = thread_cpu_ns(), t0 = bench_now_ns();
	int rc = tp_defrag_plan(c, &r, &pol, &p);
	uint64_t t1 = bench_now_ns(), c1 = thread_cpu_ns();
	if (!p)
		bench_die("tp_defrag_plan: %s", tp_err_name(rc));
	tp_defrag_stats st = TP_DEFRAG_STATS_INIT;
	BENCH_CHECK(tp_plan_stats(p, &st), "tp_plan_stats");
	printf("racks %u gpus %llu: %s in %.3f s wall, %.3f s CPU; %llu racks read, %llu searched, "
	       "%llu sets simulated, budget %s, moved jobs %u%s%s\n",
	       racks, (unsigned long long)tp_topology_device_count(t), tp_err_name(rc),
	       (double)(t1 - t0) / 1e9, (double)(c1 - c0) / 1e9, (unsigned long long)st.scanned,
	       (unsigned long long)st.evaluated, (unsigned long long)st.simulated,
	       st.budget == TP_BUDGET_NONE ? "not reached" : "reached", tp_plan_moved_job_count(p),
	       rc ? ": " : "", rc ? tp_plan_errmsg(p) : "");
	tp_plan_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return 0;
}

static int defrag_parse(int argc, char **argv, struct defrag_opts *o)
{
	*o = (struct defrag_opts){
	        .sizes = {10000, 100000}, .nsizes = 2, .seed = 1, .reps = 200, .occupancy = 0.85};
	static const struct option lo[] = {{"sizes", required_argument, 0, 's'},
	                                   {"seed", required_argument, 0, 'S'},
	                                   {"reps", required_argument, 0, 'r'},
	                                   {"occupancy", required_argument, 0, 'o'},
	                                   {"json", required_argument, 0, 'j'},
	                                   {"rack-jobs", required_argument, 0, 'k'},
	                                   {"unlimited", no_argument, 0, 'u'},
	                                   {"help", no_argument, 0, 'h'},
	                                   {0, 0, 0, 0}};
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 's':
			o->nsizes = bench_parse_sizes(optarg, o->sizes, DEFRAG_MAX_SIZES);
			if (o->nsizes <= 0)
				return 2;
			break;
		case 'S':
			o->seed = strtoull(optarg, NULL, 10);
			break;
		case 'r':
			o->reps = strtol(optarg, NULL, 10);
			if (o->reps < 1)
				return 2;
			break;
		case 'o':
			o->occupancy = strtod(optarg, NULL);
			if (!(o->occupancy > 0 && o->occupancy < 1))
				return 2;
			break;
		case 'j':
			o->json = optarg;
			break;
		case 'k':
			o->rack_jobs = (unsigned)strtoul(optarg, NULL, 10);
			if (o->rack_jobs < 1 || o->rack_jobs > 64)
				return 2;
			break;
		case 'u':
			o->unlimited = true;
			break;
		case 'h':
			defrag_usage(stdout);
			return 1;
		default:
			return 2;
		}
	}
	return 0;
}

int bench_defrag_main(int argc, char **argv)
{
	struct defrag_opts o;
	int prc = defrag_parse(argc, argv, &o);
	if (prc == 1)
		return 0;
	if (prc) {
		defrag_usage(stderr);
		return 2;
	}
	if (o.rack_jobs)
		return rack_jobs_run(&o);
	struct defrag_result res[DEFRAG_MAX_SIZES];
	printf("%10s %7s %6s %8s %8s %8s %8s %5s %7s %8s %8s %7s %8s %6s\n", "gpus", "jobs", "occ",
	       "p50_ms", "p99_ms", "cpu_p50", "cpu_p99", "ok", "moved_j", "moved_d", "cost_s",
	       "scanned", "searched", "tried");
	for (int i = 0; i < o.nsizes; i++) {
		defrag_run(&o, o.sizes[i], &res[i]);
		const struct defrag_result *x = &res[i];
		printf("%10llu %7ld %6.3f %8.3f %8.3f %8.3f %8.3f %5.2f %7.1f %8.1f %8.0f %7.1f "
		       "%8.1f "
		       "%6.1f\n",
		       (unsigned long long)x->gpus, x->jobs, x->occupancy, x->p50_ms, x->p99_ms,
		       x->cpu_p50_ms, x->cpu_p99_ms, x->ok_share, x->moved_jobs_mean,
		       x->moved_devices_mean, x->cost_s_mean, x->scanned_mean, x->evaluated_mean,
		       x->tried_mean);
		fflush(stdout);
	}
	struct bench_json j;
	if (bench_json_open(&j, o.json))
		bench_die("cannot write %s", o.json);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "bench", "defrag");
	bench_json_int(&j, "seed", (long long)o.seed);
	bench_json_arr(&j, "results");
	for (int i = 0; i < o.nsizes; i++) {
		const struct defrag_result *x = &res[i];
		bench_json_obj(&j, NULL);
		bench_json_int(&j, "gpus", (long long)x->gpus);
		bench_json_int(&j, "jobs", x->jobs);
		bench_json_num(&j, "occupancy", x->occupancy);
		bench_json_int(&j, "reps", x->reps);
		bench_json_num(&j, "p50_ms", x->p50_ms);
		bench_json_num(&j, "p99_ms", x->p99_ms);
		bench_json_num(&j, "mean_ms", x->mean_ms);
		bench_json_num(&j, "cpu_p50_ms", x->cpu_p50_ms);
		bench_json_num(&j, "cpu_p99_ms", x->cpu_p99_ms);
		bench_json_num(&j, "plan_found_share", x->ok_share);
		bench_json_num(&j, "moved_jobs_mean", x->moved_jobs_mean);
		bench_json_num(&j, "moved_devices_mean", x->moved_devices_mean);
		bench_json_num(&j, "cost_s_mean", x->cost_s_mean);
		bench_json_num(&j, "racks_scanned_mean", x->scanned_mean);
		bench_json_num(&j, "racks_searched_mean", x->evaluated_mean);
		bench_json_num(&j, "sets_simulated_mean", x->tried_mean);
		bench_json_end_obj(&j);
	}
	bench_json_end_arr(&j);
	bench_json_end_obj(&j);
	return bench_json_close(&j);
}
