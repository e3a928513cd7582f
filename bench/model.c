/* SPDX-License-Identifier: MIT */
/*
 * tp-bench model: what the cluster model costs against fleet size.
 *
 * For NVL72 fleets of about 10k, 100k and 1M GPUs: build time (tp_topology_generate_nvl72 +
 * tp_cluster_create, median of 3), memory per GPU (tp_topology_memory + tp_cluster_memory over
 * the GPU count, empty and at ~70% occupancy), and the latency of tp_cluster_assign and
 * tp_cluster_release for 1-GPU (one device of a node), 8-GPU (two whole nodes of one rack) and
 * 72-GPU (a whole rack) jobs at random free positions of the 70% cluster. Each call is timed on
 * its own with CLOCK_MONOTONIC; every assign is released again, so the state the next
 * repetition sees is the same 70% cluster.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MODEL_MAX_SIZES 8
#define MODEL_NJOBS 3

static const unsigned model_job_gpus[MODEL_NJOBS] = {1, 8, 72};

struct model_opts {
	uint64_t sizes[MODEL_MAX_SIZES];
	int nsizes;
	uint64_t seed;
	long reps;
	double occupancy;
	const char *json;
};

struct job_timing {
	double assign_p50, assign_p99, release_p50, release_p99;
	long reps;
};

struct model_result {
	uint64_t gpus;
	unsigned blocks, rpb;
	double build_s, gen_s, create_s, build_cpu_s;
	double bytes_empty, bytes_full;
	double occupancy;
	long fill_jobs;
	double fill_s;
	struct job_timing job[MODEL_NJOBS];
};

static void model_usage(FILE *f)
{
	fprintf(f,
	        "usage: tp-bench model [--sizes 10000,100000,1000000] [--seed N] [--reps N]\n"
	        "                      [--occupancy 0.7] [--json FILE]\n"
	        "  Build time, bytes per GPU, and tp_cluster_assign/release latency of 1-, 8- and\n"
	        "  72-GPU jobs on generated NVL72 fleets at ~70%% random occupancy.\n");
}

static double median3(double a, double b, double c)
{
	double v[3] = {a, b, c};
	return bench_quantile(v, 3, 0.5);
}

/* Build the fleet three times (the last one is kept) and record the median times. */
static void model_build(struct model_result *res, tp_topology **tout, tp_cluster **cout)
{
	double gen[3], create[3], total[3], cpu[3];
	for (int i = 0; i < 3; i++) {
		tp_topology *t = NULL;
		tp_cluster *c = NULL;
		uint64_t c0 = bench_cpu_ns();
		uint64_t t0 = bench_now_ns();
		int rc = tp_topology_generate_nvl72(&t, res->blocks, res->rpb, NULL);
		uint64_t t1 = bench_now_ns();
		if (rc < 0)
			bench_die("tp_topology_generate_nvl72(%u, %u): %s", res->blocks, res->rpb,
			          tp_err_name(rc));
		rc = tp_cluster_create(&c, t, NULL);
		uint64_t t2 = bench_now_ns();
		cpu[i] = (double)(bench_cpu_ns() - c0) * 1e-9;
		if (rc < 0)
			bench_die("tp_cluster_create: %s", tp_err_name(rc));
		gen[i] = (double)(t1 - t0) * 1e-9;
		create[i] = (double)(t2 - t1) * 1e-9;
		total[i] = (double)(t2 - t0) * 1e-9;
		if (i < 2) {
			tp_cluster_destroy(c);
			tp_topology_destroy(t);
		} else {
			*tout = t;
			*cout = c;
		}
	}
	res->gen_s = median3(gen[0], gen[1], gen[2]);
	res->create_s = median3(create[0], create[1], create[2]);
	res->build_s = median3(total[0], total[1], total[2]);
	res->build_cpu_s = median3(cpu[0], cpu[1], cpu[2]);
}

/* Candidate positions that stay valid for the whole timing loop (every assign is released). */
struct model_positions {
	uint32_t *nodes;  /* nodes with >= 1 free device */
	size_t nnodes;
	uint32_t *racks2; /* racks with >= 2 wholly free nodes */
	size_t nracks2;
	uint32_t *racks_free; /* racks whose 72 devices are free */
	size_t nracks_free;
};

static void model_positions_find(const tp_cluster *c, struct model_positions *p)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t nn = tp_topology_node_count(t), nr = tp_topology_domain_count(t, NVL_RACK);
	p->nodes = malloc(nn * sizeof *p->nodes);
	p->racks2 = malloc(nr * sizeof *p->racks2);
	p->racks_free = malloc(nr * sizeof *p->racks_free);
	if (!p->nodes || !p->racks2 || !p->racks_free)
		bench_die("out of memory");
	p->nnodes = p->nracks2 = p->nracks_free = 0;
	for (uint32_t n = 0; n < nn; n++)
		if (tp_cluster_free_count(c, NVL_NODE, n) > 0)
			p->nodes[p->nnodes++] = n;
	for (uint32_t r = 0; r < nr; r++) {
		if (tp_cluster_free_node_count(c, NVL_RACK, r) >= 2)
			p->racks2[p->nracks2++] = r;
		if (tp_cluster_free_count(c, NVL_RACK, r) == NVL72_RACK_GPUS)
			p->racks_free[p->nracks_free++] = r;
	}
}

static void model_positions_free(struct model_positions *p)
{
	free(p->nodes);
	free(p->racks2);
	free(p->racks_free);
}

/* Devices of a `gpus`-GPU job at a random free position; returns the count (0: none). */
static size_t model_pick(const tp_cluster *c, const struct model_positions *p,
                         struct bench_rng *rng, unsigned gpus, uint32_t *devs)
{
	const tp_topology *t = tp_cluster_topology(c);
	if (gpus == 1) {
		if (!p->nnodes)
			return 0;
		uint32_t node = p->nodes[bench_rng_below(rng, p->nnodes)];
		uint32_t free_devs[TP_MAX_NODE_DEVICES];
		unsigned k = bench_node_free_devices(c, node, free_devs, TP_MAX_NODE_DEVICES);
		devs[0] = free_devs[bench_rng_below(rng, k)];
		return 1;
	}
	const uint32_t *racks = gpus == 8 ? p->racks2 : p->racks_free;
	size_t nracks = gpus == 8 ? p->nracks2 : p->nracks_free;
	if (!nracks)
		return 0;
	uint32_t r = racks[bench_rng_below(rng, nracks)];
	uint32_t first, n, whole[NVL72_RACK_NODES];
	unsigned nwhole = 0;
	tp_topology_domain_nodes(t, NVL_RACK, r, &first, &n);
	for (uint32_t i = 0; i < n && nwhole < NVL72_RACK_NODES; i++)
		if (tp_cluster_free_count(c, NVL_NODE, first + i) == NVL72_NODE_GPUS)
			whole[nwhole++] = first + i;
	unsigned want = gpus / NVL72_NODE_GPUS;
	size_t ndev = 0;
	for (unsigned i = 0; i < want; i++) { /* a random subset: partial Fisher-Yates */
		unsigned j = i + (unsigned)bench_rng_below(rng, nwhole - i);
		uint32_t tmp = whole[i];
		whole[i] = whole[j];
		whole[j] = tmp;
		ndev += bench_node_free_devices(c, whole[i], devs + ndev, NVL72_NODE_GPUS);
	}
	return ndev;
}

static void model_time_jobs(tp_cluster *c, struct bench_rng *rng, long reps, unsigned gpus,
                            struct job_timing *out)
{
	struct model_positions pos;
	model_positions_find(c, &pos);
	double *ta = malloc((size_t)reps * sizeof *ta), *tr = malloc((size_t)reps * sizeof *tr);
	if (!ta || !tr)
		bench_die("out of memory");
	uint32_t devs[NVL72_RACK_GPUS];
	char id[32];
	long done = 0;
	for (long i = 0; i < reps; i++) {
		size_t n = model_pick(c, &pos, rng, gpus, devs);
		if (n < gpus)
			break; /* no free position of this shape at all */
		snprintf(id, sizeof id, "bench-%u-%ld", gpus, i);
		uint64_t t0 = bench_now_ns();
		int rc = tp_cluster_assign(c, id, devs, n, NULL);
		uint64_t t1 = bench_now_ns();
		BENCH_CHECK(rc, tp_cluster_errmsg(c));
		uint64_t t2 = bench_now_ns();
		rc = tp_cluster_release(c, id);
		uint64_t t3 = bench_now_ns();
		BENCH_CHECK(rc, tp_cluster_errmsg(c));
		ta[done] = (double)(t1 - t0) * 1e-3;
		tr[done] = (double)(t3 - t2) * 1e-3;
		done++;
	}
	out->reps = done;
	out->assign_p50 = bench_quantile(ta, (size_t)done, 0.5);
	out->assign_p99 = bench_quantile(ta, (size_t)done, 0.99);
	out->release_p50 = bench_quantile(tr, (size_t)done, 0.5);
	out->release_p99 = bench_quantile(tr, (size_t)done, 0.99);
	free(ta);
	free(tr);
	model_positions_free(&pos);
}

static double model_bytes_per_gpu(const tp_topology *t, const tp_cluster *c)
{
	return (double)(tp_topology_memory(t) + tp_cluster_memory(c)) /
	       (double)tp_topology_device_count(t);
}

static void model_run_size(const struct model_opts *o, uint64_t want, struct model_result *res)
{
	memset(res, 0, sizeof *res);
	bench_nvl72_shape(want, &res->blocks, &res->rpb);
	res->gpus = (uint64_t)res->blocks * res->rpb * NVL72_RACK_GPUS;
	bench_progress(false, "model: %llu GPUs: building", (unsigned long long)res->gpus);
	tp_topology *t;
	tp_cluster *c;
	model_build(res, &t, &c);
	res->bytes_empty = model_bytes_per_gpu(t, c);

	struct bench_rng rng;
	bench_rng_seed(&rng, o->seed ^ res->gpus);
	bench_progress(false, "model: %llu GPUs: filling to %.0f%%", (unsigned long long)res->gpus,
	               o->occupancy * 100);
	uint64_t f0 = bench_now_ns();
	struct bench_fill fill;
	bench_fill_init(&fill, c, &rng, 0.02);
	res->fill_jobs = bench_fill_to(&fill, c, &rng, o->occupancy);
	bench_fill_fini(&fill);
	res->fill_s = (double)(bench_now_ns() - f0) * 1e-9;
	if (res->fill_jobs < 0)
		bench_die("fill: %s (%s)", tp_err_name((int)res->fill_jobs), tp_cluster_errmsg(c));
	res->occupancy = 1.0 - (double)tp_cluster_free_total_count(c) / (double)res->gpus;
	res->bytes_full = model_bytes_per_gpu(t, c);

	for (int j = 0; j < MODEL_NJOBS; j++) {
		bench_progress(false, "model: %llu GPUs: timing %u-GPU assign/release",
		               (unsigned long long)res->gpus, model_job_gpus[j]);
		model_time_jobs(c, &rng, o->reps, model_job_gpus[j], &res->job[j]);
	}
	char buf[256];
	if (tp_cluster_check(c, buf, sizeof buf) < 0)
		bench_die("tp_cluster_check after the run: %s", buf);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	bench_progress(true, "model: %llu GPUs: done", (unsigned long long)res->gpus);
}

static void model_print(const struct model_result *r, int n)
{
	printf("%-9s %-9s %8s %8s %8s %7s %6s %4s %9s %9s %9s %9s\n", "GPUs", "blocks", "build_s",
	       "B/GPU", "B/GPU70", "occup", "jobs", "job", "asg_p50", "asg_p99", "rel_p50",
	       "rel_p99");
	for (int i = 0; i < n; i++) {
		for (int j = 0; j < MODEL_NJOBS; j++) {
			const struct job_timing *jt = &r[i].job[j];
			char shape[24];
			snprintf(shape, sizeof shape, "%ux%u", r[i].blocks, r[i].rpb);
			if (j == 0)
				printf("%-9llu %-9s %8.3f %8.1f %8.1f %6.1f%% %6ld", (unsigned long long)r[i].gpus,
				       shape, r[i].build_s, r[i].bytes_empty, r[i].bytes_full,
				       r[i].occupancy * 100, r[i].fill_jobs);
			else
				printf("%-9s %-9s %8s %8s %8s %7s %6s", "", "", "", "", "", "", "");
			if (jt->reps)
				printf(" %4u %9.2f %9.2f %9.2f %9.2f\n", model_job_gpus[j], jt->assign_p50,
				       jt->assign_p99, jt->release_p50, jt->release_p99);
			else
				printf(" %4u %9s %9s %9s %9s\n", model_job_gpus[j], "n/a", "n/a", "n/a", "n/a");
		}
	}
	printf("(times in microseconds; B/GPU = (tp_topology_memory + tp_cluster_memory) / GPUs, "
	       "empty and at the fill; blocks = blocks x racks per block)\n");
	for (int i = 0; i < n; i++) {
		if (r[i].gpus < 900000)
			continue;
		const struct job_timing *j72 = &r[i].job[2];
		printf("targets at %llu GPUs: build %.3f s wall, %.3f s CPU (<= 1 s: %s), %.1f B/GPU at 70%% "
		       "(<= 256: %s), 72-GPU assign p50 %.2f us / release p50 %.2f us "
		       "(<= 5 us: %s)\n",
		       (unsigned long long)r[i].gpus, r[i].build_s, r[i].build_cpu_s,
		       r[i].build_s <= 1.0 ? "met" : "MISSED",
		       r[i].bytes_full, r[i].bytes_full <= 256 ? "met" : "MISSED", j72->assign_p50,
		       j72->release_p50,
		       j72->reps && j72->assign_p50 <= 5 && j72->release_p50 <= 5 ? "met" : "MISSED");
	}
}

static void model_json(const struct model_opts *o, const struct model_result *r, int n)
{
	struct bench_json j;
	if (bench_json_open(&j, o->json) < 0)
		bench_die("cannot write %s", o->json);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "bench", "model");
	bench_json_str(&j, "library_version", tp_version_string());
	bench_json_int(&j, "seed", (long long)o->seed);
	bench_json_int(&j, "reps", o->reps);
	bench_json_num(&j, "loadavg_1min_at_end", bench_loadavg());
	bench_json_str(&j, "note", "assign_*/release_* without a size are the 72-GPU job");
	bench_json_arr(&j, "results");
	for (int i = 0; i < n; i++) {
		bench_json_obj(&j, NULL);
		bench_json_int(&j, "gpus", (long long)r[i].gpus);
		bench_json_int(&j, "blocks", r[i].blocks);
		bench_json_int(&j, "racks_per_block", r[i].rpb);
		bench_json_num(&j, "build_s", r[i].build_s);
		bench_json_num(&j, "build_cpu_s", r[i].build_cpu_s);
		bench_json_num(&j, "build_generate_s", r[i].gen_s);
		bench_json_num(&j, "build_cluster_s", r[i].create_s);
		bench_json_num(&j, "bytes_per_gpu", r[i].bytes_full);
		bench_json_num(&j, "bytes_per_gpu_empty", r[i].bytes_empty);
		bench_json_num(&j, "occupancy", r[i].occupancy);
		bench_json_int(&j, "fill_jobs", r[i].fill_jobs);
		bench_json_num(&j, "fill_s", r[i].fill_s);
		const struct job_timing *j72 = &r[i].job[2];
		bench_json_num(&j, "assign_p50_us", j72->assign_p50);
		bench_json_num(&j, "assign_p99_us", j72->assign_p99);
		bench_json_num(&j, "release_p50_us", j72->release_p50);
		bench_json_num(&j, "release_p99_us", j72->release_p99);
		for (int k = 0; k < MODEL_NJOBS; k++) {
			const struct job_timing *jt = &r[i].job[k];
			char key[48];
			unsigned g = model_job_gpus[k];
			snprintf(key, sizeof key, "assign_%u_p50_us", g);
			bench_json_num(&j, key, jt->reps ? jt->assign_p50 : NAN);
			snprintf(key, sizeof key, "assign_%u_p99_us", g);
			bench_json_num(&j, key, jt->reps ? jt->assign_p99 : NAN);
			snprintf(key, sizeof key, "release_%u_p50_us", g);
			bench_json_num(&j, key, jt->reps ? jt->release_p50 : NAN);
			snprintf(key, sizeof key, "release_%u_p99_us", g);
			bench_json_num(&j, key, jt->reps ? jt->release_p99 : NAN);
			snprintf(key, sizeof key, "reps_%u", g);
			bench_json_int(&j, key, jt->reps);
		}
		bench_json_end_obj(&j);
	}
	bench_json_end_arr(&j);
	bench_json_end_obj(&j);
	if (bench_json_close(&j) != 0)
		bench_die("cannot write %s", o->json);
}

int bench_model_main(int argc, char **argv)
{
	struct model_opts o = {.sizes = {10000, 100000, 1000000}, .nsizes = 3, .seed = 1,
	                       .reps = 20000, .occupancy = 0.7};
	static const struct option lopts[] = {
		{"sizes", required_argument, NULL, 's'}, {"seed", required_argument, NULL, 'S'},
		{"reps", required_argument, NULL, 'r'},  {"occupancy", required_argument, NULL, 'o'},
		{"json", required_argument, NULL, 'j'},  {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.nsizes = bench_parse_sizes(optarg, o.sizes, MODEL_MAX_SIZES);
			if (o.nsizes <= 0)
				bench_die("--sizes: expected a comma-separated list of GPU counts");
			break;
		case 'S': o.seed = bench_arg_uint("--seed", optarg); break;
		case 'r': o.reps = strtol(optarg, NULL, 0); break;
		case 'o': o.occupancy = bench_arg_num("--occupancy", optarg); break;
		case 'j': o.json = optarg; break;
		case 'h': model_usage(stdout); return 0;
		default: model_usage(stderr); return 2;
		}
	}
	if (o.reps < 1 || o.occupancy < 0 || o.occupancy > 0.95)
		bench_die("--reps must be >= 1 and --occupancy in [0, 0.95]");
	struct model_result res[MODEL_MAX_SIZES];
	for (int i = 0; i < o.nsizes; i++)
		model_run_size(&o, o.sizes[i], &res[i]);
	model_print(res, o.nsizes);
	model_json(&o, res, o.nsizes);
	return 0;
}
