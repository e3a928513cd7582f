/* SPDX-License-Identifier: MIT */
/* knap-repro: tp_place latency of plain requests (groups of 1) for 128-512 GPUs on the
 * 140-rack NVL72 fleet (nvl72:10080: 10 blocks x 14 racks x 18 nodes x 4 GPUs) whose nodes are
 * partly used, and the same counts as groups of a node's size (which fail at once there: no
 * node is wholly free). Prints the mean and max milliseconds per request shape and an FNV-1a
 * checksum of the answers, so a solver change can be checked for identical answers and timed
 * the same way:
 *
 *     build-rel/bench/knap-repro [--reps N] [--seed N] [--count N] [--expect CHECKSUM]
 *
 * The checksum covers each shape's first answer (the repetitions only time it), so it does not
 * depend on --reps; with --expect the program exits 1 when it differs (the test
 * `knap_answers` pins the answers of the solver before its count ranking).
 *
 * Public API only, as tp-bench. */
#include <topoplace.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODE_GPUS 4

static uint64_t rng_state;

static uint32_t rng_below(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void check(int rc, const char *what, const tp_cluster *c)
{
	if (rc < 0) {
		fprintf(stderr, "knap-repro: %s: %s (%s)\n", what, tp_err_name(rc),
		        c ? tp_cluster_errmsg(c) : "");
		exit(1);
	}
}

/* Every node gets 1-3 GPUs taken by one-node jobs, and one node in ten is taken whole: no
 * node, rack or block is empty, and a block has fewer than 512 GPUs free. */
static void fill_partly(tp_cluster *c, const tp_topology *t)
{
	unsigned nl = tp_topology_level_count(t) - 1;
	uint32_t nnodes = tp_topology_node_count(t);
	long next = 0;
	for (uint32_t node = 0; node < nnodes; node++) {
		uint32_t first, n, take = rng_below(10) == 0 ? NODE_GPUS : 1 + rng_below(NODE_GPUS - 1);
		check(tp_topology_domain_devices(t, nl, node, &first, &n), "domain_devices", c);
		uint32_t devs[NODE_GPUS];
		for (uint32_t i = 0; i < take; i++)
			devs[i] = first + i;
		char id[32];
		snprintf(id, sizeof id, "fill-%ld", next++);
		check(tp_cluster_assign(c, id, devs, take, NULL), "assign", c);
	}
}

static uint64_t fnv(uint64_t h, uint32_t v)
{
	for (int i = 0; i < 4; i++) {
		h ^= (v >> (8 * i)) & 0xff;
		h *= 1099511628211ull;
	}
	return h;
}

/* A whole number from `arg` of option `opt` in base `base`, or exit 2 naming it. */
static unsigned long long arg_num(const char *opt, const char *arg, int base)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(arg, &end, base);
	if (errno || end == arg || *end || *arg == '-') {
		fprintf(stderr, "knap-repro: %s: '%s' is not a whole number%s\n", opt, arg,
		        base == 16 ? " in hexadecimal" : "");
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	unsigned long long reps = 5, expect = 0;
	bool expecting = false;
	uint32_t counts[] = {128, 256, 512};
	unsigned ncounts = sizeof counts / sizeof *counts;
	rng_state = 88172645463325252ull;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
			reps = arg_num("--reps", argv[++i], 10);
			if (reps < 1 || reps > 1000000) {
				fprintf(stderr, "knap-repro: --reps: %llu is not from 1 to 1000000\n", reps);
				return 2;
			}
		} else if (!strcmp(argv[i], "--seed") && i + 1 < argc) {
			rng_state ^= arg_num("--seed", argv[++i], 10) * 0x9e3779b97f4a7c15ull;
		} else if (!strcmp(argv[i], "--count") && i + 1 < argc) {
			/* one count instead of the three (1024 or 1536 span 3 or 4 blocks) */
			unsigned long long n = arg_num("--count", argv[++i], 10);
			if (n < 1 || n > 10080) {
				fprintf(stderr, "knap-repro: --count: %llu is not from 1 to 10080\n", n);
				return 2;
			}
			counts[0] = (uint32_t)n;
			ncounts = 1;
		} else if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
			expect = arg_num("--expect", argv[++i], 16);
			expecting = true;
		} else {
			fprintf(stderr, "usage: knap-repro [--reps N] [--seed N] [--count N] [--expect CHECKSUM]\n");
			return 2;
		}
	}
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	check(tp_topology_generate_nvl72(&t, 10, 14, NULL), "generate", NULL);
	check(tp_cluster_create(&c, t, NULL), "cluster_create", NULL);
	fill_partly(c, t);
	printf("nvl72:10080 (10 blocks x 14 racks), %u of %u GPUs free, %llu reps\n",
	       (unsigned)tp_cluster_free_total_count(c), (unsigned)tp_topology_device_count(t),
	       reps);
	printf("%-6s %-8s %-6s %-4s %10s %10s\n", "count", "groups", "block", "rc", "mean_ms", "max_ms");
	static const char *const kind[] = {"-", "req", "pref"};
	uint64_t h = 14695981039346656037ull;
	for (unsigned ci = 0; ci < ncounts; ci++)
		for (int gs = 0; gs < 2; gs++)
			for (int reqd = 0; reqd < 3; reqd++) {
				tp_request r = TP_REQUEST_INIT;
				r.id = "probe";
				r.count = counts[ci];
				if (gs) {
					r.group_size = NODE_GPUS;
					r.group_level = "node";
				}
				if (reqd == 1)
					r.required = "block";
				else if (reqd == 2)
					r.preferred = "block";
				double sum = 0, mx = 0;
				int rc0 = 0;
				for (unsigned long long k = 0; k < reps; k++) {
					tp_placement *pl = NULL;
					double t0 = now_ms();
					int rc = tp_place(c, &r, &pl);
					double ms = now_ms() - t0;
					sum += ms;
					mx = ms > mx ? ms : mx;
					if (rc == TP_ENOMEM)
						check(rc, "place", c);
					rc0 = rc;
					if (k == 0) { /* the answer, once: the repetitions only time it */
						size_t n = 0;
						const uint32_t *d = rc == 0 ? tp_placement_devices(pl, &n) : NULL;
						h = fnv(h, (uint32_t)rc);
						for (size_t i = 0; i < n; i++)
							h = fnv(h, d[i]);
					}
					tp_placement_destroy(pl);
				}
				printf("%-6u %-8s %-6s %-4d %10.3f %10.3f\n", (unsigned)counts[ci],
				       gs ? "node(4)" : "1", kind[reqd], rc0, sum / (double)reps, mx);
			}
	printf("checksum %016llx\n", (unsigned long long)h);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	if (expecting && h != expect) {
		fprintf(stderr, "knap-repro: checksum %016llx, not the expected %016llx: the answers "
		        "changed\n", (unsigned long long)h, expect);
		return 1;
	}
	return 0;
}
