/* SPDX-License-Identifier: MIT */
/*
 * tp-bench: libtopoplace's benchmark harness, one program with a subcommand per subject.
 *
 *   tp-bench model  latency of tp_cluster_assign / release and memory against fleet size
 *   tp-bench place  latency of tp_place against fleet size, and a Kueue-like baseline
 *   tp-bench sim    trace-driven cluster simulator comparing placement policies
 *   tp-bench defrag latency of tp_defrag_plan on fragmented fleets
 *   tp-bench replace tp_replace on its hostile case, with and without the work budget
 *   tp-bench layout the published 512-GPU comparison: packed into 8 racks vs scattered
 *   tp-bench compare the whole comparison: workload x fleet x queue x seed x policy
 *
 * Every subcommand prints a table on stdout, progress on stderr, and with --json FILE writes its
 * figures as JSON. docs/benchmarks.md describes each one and the figures measured.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: tp-bench <subcommand> [options]\n"
	        "\n"
	        "subcommands:\n"
	        "  model   build time, bytes per GPU, tp_cluster_assign/release latency\n"
	        "  place   tp_place latency and a Kueue-like recount baseline\n"
	        "  sim     trace-driven simulator comparing placement policies\n"
	        "  defrag  tp_defrag_plan latency on fragmented fleets\n"
	        "  replace tp_replace on a quadratic case, within the work budget or not\n"
	        "  layout  512 GPUs in exactly 8 NVL72 racks vs scattered: modelled step times\n"
	        "  compare the grid workload x fleet x queue x seed x policy, tables and plots\n"
	        "\n"
	        "Run 'tp-bench <subcommand> --help' for its options. libtopoplace %s.\n",
	        tp_version_string());
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "model"))
		return bench_model_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "place"))
		return bench_place_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "sim"))
		return bench_sim_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "defrag"))
		return bench_defrag_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "replace"))
		return bench_replace_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "compare"))
		return bench_compare_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "layout"))
		return bench_layout_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "tp-bench: unknown subcommand '%s'\n", cmd);
	usage(stderr);
	return 2;
}
