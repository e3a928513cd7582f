/* SPDX-License-Identifier: MIT */
/*
 * tp-bench replace: tp_replace on its hostile case (#19), within the default work budget or
 * without one.
 *
 * HGX nodes of 8 GPUs in one scalable unit; one job holds GPUs 0-3 of every node in groups of 2
 * inside a node, and one GPU of every group fails, so that every failure is its own
 * sub-request and each sub-request reads the whole job: the work grows as the square of the
 * job's size. One tp_replace_ext call is timed (wall clock and CPU time).
 */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static void replace_usage(FILE *f)
{
	fprintf(f, "usage: tp-bench replace [--nodes N] [--unlimited]\n"
	           "  one tp_replace_ext of a job on 4 GPUs of each of N 8-GPU nodes (default\n"
	           "  2048) in groups of 2, one GPU of every group failed, within the default\n"
	           "  work budget or without one (--unlimited).\n");
}

int bench_replace_main(int argc, char **argv)
{
	static const struct option lo[] = {{"nodes", required_argument, 0, 'n'},
	                                   {"unlimited", no_argument, 0, 'u'},
	                                   {"help", no_argument, 0, 'h'},
	                                   {0, 0, 0, 0}};
	unsigned nodes = 2048;
	bool unlimited = false;
	int ch;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (ch == 'n' && (nodes = (unsigned)strtoul(optarg, NULL, 10)) >= 1 && nodes <= 65536)
			continue;
		if (ch == 'u') {
			unlimited = true;
			continue;
		}
		replace_usage(ch == 'h' ? stdout : stderr);
		return ch == 'h' ? 0 : 2;
	}
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	BENCH_CHECK(tp_topology_generate_hgx(&t, 1, nodes, NULL), "");
	BENCH_CHECK(tp_cluster_create(&c, t, NULL), "");
	uint32_t n = 4 * nodes, nf = n / 2;
	uint32_t *devs = malloc(n * sizeof *devs), *failed = malloc(nf * sizeof *failed);
	if (!devs || !failed)
		bench_die("out of memory");
	for (uint32_t i = 0; i < n; i++)
		devs[i] = i / 4 * 8 + i % 4;
	for (uint32_t i = 0; i < nf; i++)
		failed[i] = devs[2 * i];
	tp_request shape = TP_REQUEST_INIT;
	shape.count = n;
	shape.group_size = 2;
	shape.group_level = "node";
	tp_job_options jo = TP_JOB_OPTIONS_INIT;
	jo.shape = &shape;
	BENCH_CHECK(tp_cluster_assign(c, "big", devs, n, &jo), tp_cluster_errmsg(c));
	tp_replace_options ro = TP_REPLACE_OPTIONS_INIT;
	if (unlimited)
		ro.max_work = UINT64_MAX;
	tp_placement *p = NULL;
	uint64_t c0 = bench_cpu_ns(), t0 = bench_now_ns();
	int rc = tp_replace_ext(c, "big", failed, nf, &ro, &p);
	uint64_t t1 = bench_now_ns(), c1 = bench_cpu_ns();
	if (!p)
		bench_die("tp_replace_ext: %s", tp_err_name(rc));
	printf("nodes %u, job %u ranks, %u failed: %s in %.3f s wall, %.3f s CPU%s%s\n", nodes, n,
	       nf, tp_err_name(rc), (double)(t1 - t0) / 1e9, (double)(c1 - c0) / 1e9,
	       rc ? ": " : "", rc ? tp_placement_errmsg(p) : "");
	tp_placement_destroy(p);
	free(devs);
	free(failed);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return 0;
}
