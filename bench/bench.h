/* SPDX-License-Identifier: MIT */
/*
 * tp-bench: the benchmark harness. Shared helpers of the subcommands (model, place, sim):
 * timing, a seeded random generator, statistics, a tiny JSON writer, fleet sizing and the
 * "realistic" occupancy fill. Nothing here is part of the library.
 */
#ifndef TP_BENCH_H
#define TP_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "topoplace.h"

/* ---- time -------------------------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t bench_now_ns(void);
/* CLOCK_PROCESS_CPUTIME_ID in nanoseconds: CPU time, which other work on the machine does not
 * inflate (reported next to wall times where a run is long enough to tell). */
uint64_t bench_cpu_ns(void);
/* CLOCK_THREAD_CPUTIME_ID in nanoseconds (a system call: ~0.3 us of overhead per reading). */
uint64_t bench_thread_cpu_ns(void);

/* ---- random numbers (splitmix64 seeding a xoshiro256**; identical on every machine) ------ */

struct bench_rng {
	uint64_t s[4];
};

void bench_rng_seed(struct bench_rng *r, uint64_t seed);
uint64_t bench_rng_next(struct bench_rng *r);
/* Uniform integer in [0, n) (n >= 1), without modulo bias. */
uint64_t bench_rng_below(struct bench_rng *r, uint64_t n);
/* Uniform double in [0, 1). */
double bench_rng_unit(struct bench_rng *r);
/* Normal(0, 1) by Box-Muller. */
double bench_rng_normal(struct bench_rng *r);
/* Index drawn from weights w[0..n-1] (not all zero). */
size_t bench_rng_weighted(struct bench_rng *r, const double *w, size_t n);

/* ---- statistics -------------------------------------------------------------------------- */

/* Sort v in place and return its p-quantile by nearest rank (p in [0, 1]); 0 when n == 0. */
double bench_quantile(double *v, size_t n, double p);
double bench_mean(const double *v, size_t n);

/* ---- JSON output (a small streaming writer; keys are never escaped: we choose them) -------- */

struct bench_json {
	FILE *f;
	int depth;
	bool need_comma[16];
};

/* Open FILE for writing; NULL path gives a writer that discards everything. */
int bench_json_open(struct bench_json *j, const char *path);
int bench_json_close(struct bench_json *j);
/* Begin an object or array; key is NULL inside an array or at the top. */
void bench_json_obj(struct bench_json *j, const char *key);
void bench_json_arr(struct bench_json *j, const char *key);
void bench_json_end_obj(struct bench_json *j);
void bench_json_end_arr(struct bench_json *j);
/* A number with 10 significant digits (effective GPU-hours of 1.7 million to 0.0001: gaps to
 * the ideal bound of a few GPU-seconds stay comparable); null when not finite. */
void bench_json_num(struct bench_json *j, const char *key, double v);
void bench_json_int(struct bench_json *j, const char *key, long long v);
void bench_json_str(struct bench_json *j, const char *key, const char *v);
void bench_json_bool(struct bench_json *j, const char *key, bool v);

/* ---- fleets ------------------------------------------------------------------------------ */

#define NVL72_NODE_GPUS 4u
#define NVL72_RACK_NODES 18u
#define NVL72_RACK_GPUS 72u
#define HGX_NODE_GPUS 8u
#define HGX_SU_NODES 32u

/* blocks x racks_per_block for an NVL72 fleet of about `gpus` GPUs: the whole number of racks
 * closest to gpus / 72 that factors as blocks x racks_per_block with racks_per_block in 8..16
 * (larger preferred on ties); fewer than 8 racks make one block. */
void bench_nvl72_shape(uint64_t gpus, unsigned *blocks, unsigned *racks_per_block);
/* units x 32 nodes for an HGX fleet of about `gpus` GPUs (at least one unit). */
void bench_hgx_shape(uint64_t gpus, unsigned *units, unsigned *nodes_per_unit);

/* The mixed fleet mixed:GPUS (docs/benchmarks.md): blocks of 8 racks of 18 nodes x 4 GPUs, in
 * each block 4 NVL72 racks (the rack's own NVLink 900 GB/s fabric), 2 HGX racks (4-GPU NVLink
 * 450 GB/s nodes on the rack level's InfiniBand) and 2 racks of PCIe-only nodes (4 x L4 on PCIe
 * 32 GB/s); the whole number of 576-GPU blocks closest to gpus (at least one). */
int bench_mixed_fleet(tp_topology **out, uint64_t gpus, unsigned *blocks);

/* Parse "10000,100000,1e6" into up to max sizes; returns the count or -1. */
int bench_parse_sizes(const char *s, uint64_t *out, int max);

/* An option's value as a whole number or a finite number; dies naming the option otherwise. */
uint64_t bench_arg_uint(const char *opt, const char *s);
/* The same, at most UINT32_MAX (a 32-bit count). */
unsigned bench_arg_u32(const char *opt, const char *s);
double bench_arg_num(const char *opt, const char *s);

/* ---- occupancy fill ---------------------------------------------------------------------- */

/*
 * Fill an NVL72 cluster (levels block, rack, node) with "realistic" jobs until `target` of its
 * GPUs are held: job sizes drawn from a fixed mix (1, 2, 4 GPUs on one node; 8..72 GPUs as
 * whole nodes in one rack; 128..1024 GPUs as 64-GPU slices of 16 whole nodes in distinct
 * racks), each put at a random free position (tp_cluster_assign). `reserve` is the share of
 * racks the fill leaves untouched (at least 4 when there are 8 racks or more), so that
 * whole-rack jobs have somewhere to go, as a scheduler that packs keeps them. Job ids are
 * "fill-<n>".
 */
struct bench_fill {
	bool *reserved; /* [racks] */
	uint32_t nracks;
	long next_id;
	uint32_t *devs; /* scratch */
	bool ends;      /* each job's shape expected to end at a random time in [1, 1e6] s
	                   (tp_request.expected_end_s; tp-bench place --ends on); false by init */
};

void bench_fill_init(struct bench_fill *f, const tp_cluster *c, struct bench_rng *rng,
                     double reserve);
/* Add jobs until `target` of the GPUs are held (or nothing fits); returns the number of jobs
 * added, or a negative error code of tp_cluster_assign. */
long bench_fill_to(struct bench_fill *f, tp_cluster *c, struct bench_rng *rng, double target);
void bench_fill_fini(struct bench_fill *f);

/* Levels of an NVL72 topology. */
enum { NVL_BLOCK = 0, NVL_RACK = 1, NVL_NODE = 2 };

/* Free devices of `node`, lowest index first, into out[0..max); returns how many. */
unsigned bench_node_free_devices(const tp_cluster *c, uint32_t node, uint32_t *out,
                                 unsigned max);

/* The 1-minute load average (/proc/loadavg), or -1: other work on the machine shows in the
 * tail latencies, so every JSON records it. */
double bench_loadavg(void);

/* Whether stderr is a terminal (progress lines are redrawn there, else printed whole). */
bool bench_stderr_tty(void);

/* Whether the comma-separated list holds name as one of its items (NULL: every name). */
bool bench_list_has(const char *list, const char *name);

/* Progress line on stderr (overwritten in place; a final newline with done = true). */
void bench_progress(bool done, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Die with a message: the harness is a program, so it may. */
/* The topology of the scenario-v1 file at path, read with the library's importer
 * (topoplace-scenario.h; hwloc files relative to the file's folder), owned by the caller; or
 * NULL with the importer's message in err. */
tp_topology *bench_scenario_topology(const char *path, char *err, size_t errlen);

void bench_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* Check a library call: die with its name, code and the object's message. */
#define BENCH_CHECK(call, msg)                                                                  \
	do {                                                                                        \
		int rc_ = (call);                                                                       \
		if (rc_ < 0)                                                                            \
			bench_die("%s:%d: %s failed: %s (%s)", __FILE__, __LINE__, #call,                   \
			          tp_err_name(rc_), (msg));                                                 \
	} while (0)

/* ---- subcommands ------------------------------------------------------------------------- */

int bench_model_main(int argc, char **argv);
int bench_place_main(int argc, char **argv);
/* tp-bench place --torus X,Y,Z (place_torus.c): box requests on one torus of X x Y x Z chips. */
int bench_place_torus(const unsigned *dims, uint64_t seed, long requests, double occupancy,
                      const char *json);
int bench_sim_main(int argc, char **argv);
int bench_defrag_main(int argc, char **argv);
int bench_replace_main(int argc, char **argv);
int bench_layout_main(int argc, char **argv);
int bench_compare_main(int argc, char **argv);

#endif
