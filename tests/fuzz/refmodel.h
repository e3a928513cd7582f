/* SPDX-License-Identifier: MIT */
/*
 * A reference model of a cluster state for the fuzz targets, written to be obviously correct
 * rather than fast: per device its health and holder, per job its devices, and every figure the
 * library keeps incrementally recounted from scratch by walking devices. It also holds the
 * helpers both targets share: the byte reader that turns fuzz input into decisions, a request
 * decoder, and a checker that a placement obeys its request.
 *
 * Nothing here includes the library's private headers: the model sees the library only through
 * the public API, so a bug in the library's layout cannot hide in the model.
 */
#ifndef TP_FUZZ_REFMODEL_H
#define TP_FUZZ_REFMODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topoplace.h"

/* ---- failing loudly -------------------------------------------------------------------------- */

/* Print what broke and abort(), so that libFuzzer (or the replay driver) reports a crash. */
void fz_fail(const char *file, int line, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
	__attribute__((format(printf, 3, 4), noreturn))
#endif
	;

#define FZ_CHECK(cond, ...)                                                                    \
	do {                                                                                       \
		if (!(cond))                                                                           \
			fz_fail(__FILE__, __LINE__, __VA_ARGS__);                                          \
	} while (0)

/* ---- the allocator under test ------------------------------------------------------------- */

/* tp_test_allocator (counting, failure injection), except that it refuses any one allocation
 * above FZ_MAX_ALLOC bytes and records its size in fz_big_alloc: a small cluster never needs
 * that much, and a request must not make the library ask for gigabytes (on a machine that
 * overcommits, such a request would succeed and go unnoticed). */
#define FZ_MAX_ALLOC ((size_t)1 << 28)
extern const tp_allocator fz_allocator;
extern size_t fz_big_alloc;

/* ---- reading decisions from the input -------------------------------------------------------- */

/*
 * Decoders read the input one byte at a time, and at most one read happens in an expression
 * whose evaluation order C leaves open (function arguments, the operands of + or |, an
 * initializer list): there gcc and clang differ, and an input found with one would mean
 * something else to the other. Several reads are fine where C sequences them (&&, ||, ?:, one
 * declarator after another, one statement after another).
 *
 * With -DFZ_TRACE the targets print what they decoded and what the library answered, one line
 * per step, to stderr (the replay driver prints "== FILE" before each input): the traces of a
 * gcc and a clang build must be identical (tests/fuzz/check-order.sh).
 */
#ifdef FZ_TRACE
#include <stdio.h>
#define FZ_TRACE_LINE(...) fprintf(stderr, __VA_ARGS__)
#else
#define FZ_TRACE_LINE(...) ((void)0)
#endif

struct fz_in {
	const uint8_t *p;
	size_t n;
};

/* The next byte, or 0 once the input is used up (so every decision has a default). */
static inline uint8_t fz_u8(struct fz_in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

static inline uint32_t fz_u16(struct fz_in *in)
{
	uint32_t a = fz_u8(in);
	return a | (uint32_t)fz_u8(in) << 8;
}

/* A value in 0 .. n-1 (0 when n is 0). */
static inline uint32_t fz_below(struct fz_in *in, uint32_t n)
{
	if (n <= 1)
		return 0;
	return (n <= 256 ? fz_u8(in) : fz_u16(in)) % n;
}

static inline bool fz_more(const struct fz_in *in) { return in->n > 0; }

/*
 * Numbers over a type's whole range. The byte values 0..247 keep the meaning a decoder gave
 * them before these helpers existed (v % n, or the table entry v % n), so saved inputs keep
 * theirs; 248..255 escape to the ends of the range: 0, 1, the maximum, the maximum - 1, the
 * int maximum and one past it, a power of two from 2^8 to 2^31, or any value (four more
 * bytes).
 */
uint32_t fz_wide_escape(struct fz_in *in, uint8_t v);
#define FZ_ESCAPE 248

/* With FZ_TRACE: note a byte that now means something it did not mean before the wide ranges
 * (n: the byte meant v % n then; 0: no byte value means the same), with its place counted from
 * the end of the input, so that an old input can be re-encoded to keep its meaning. */
#define FZ_TRACE_ESCAPE(IN, V, MOD)                                                            \
	FZ_TRACE_LINE("  escape %zu from the end: byte %u, was %% %u\n", (IN)->n + 1, (unsigned)(V), \
	              (unsigned)(MOD))

/* 0 .. n-1 (n <= 256) for most bytes, or an escape value. */
static inline uint32_t fz_wide(struct fz_in *in, uint32_t n)
{
	uint8_t v = fz_u8(in);
	if (v < FZ_ESCAPE)
		return v % (n ? n : 1);
	FZ_TRACE_ESCAPE(in, v, n);
	return fz_wide_escape(in, v);
}

/* One of table[0..n-1] for most bytes, or an escape value. */
static inline uint32_t fz_wide_pick(struct fz_in *in, const uint32_t *table, uint32_t n)
{
	uint8_t v = fz_u8(in);
	if (v < FZ_ESCAPE)
		return table[v % n];
	FZ_TRACE_ESCAPE(in, v, n);
	return fz_wide_escape(in, v);
}

/* An int from one byte as (int8_t), with -128 and 127 standing for INT_MIN and INT_MAX. */
int fz_wide_int(struct fz_in *in);

/* One of table[0..n-1] for most bytes, or a double at the ends of the range (0, -0, the
 * smallest normal, a huge finite value, the largest finite value). */
double fz_wide_double(struct fz_in *in, const double *table, uint32_t n);

/* ---- the reference model --------------------------------------------------------------------- */

#define REF_MAX_ID 300

/* A rank's NIC that a pairs job holds, but which one the model does not know: the library
 * picks it by a matching it does not expose (tp_cluster_assign() with a pairs shape, a
 * migration's rebind). */
#define REF_NIC_UNKNOWN (-2)

struct ref_job {
	char id[REF_MAX_ID + 1];
	char tenant[REF_MAX_ID + 1];
	uint32_t *devs;
	uint32_t ndev;
	int16_t *nic; /* a GPU+NIC pairs job: per rank its NIC (-1: none), else NULL */
};

struct ref_model {
	uint32_t ndev;
	bool *down;
	bool *cordoned;
	int32_t *holder;       /* index into jobs, or -1 */
	struct ref_job *jobs;  /* in the library's slot order */
	size_t njobs;
};

void ref_init(struct ref_model *m, uint32_t ndev);
void ref_free(struct ref_model *m);
void ref_copy(struct ref_model *dst, const struct ref_model *src);
bool ref_equal(const struct ref_model *a, const struct ref_model *b);

/* A job's index by id, or -1. */
int ref_job_find(const struct ref_model *m, const char *id);
/* Whether a device can take new work. */
bool ref_dev_free(const struct ref_model *m, uint32_t dev);

/* The errors tp_cluster_assign() may return for these arguments (a bit per code, bit -code),
 * or 0 when it must succeed. A shape is not judged here (see the caller). */
unsigned ref_assign_errors(const struct ref_model *m, const char *id, const uint32_t *devs,
                           size_t n);
#define REF_BIT(code) (1u << (unsigned)-(code))

/* Record a job; the caller checked it is valid. Devices keep their health. */
void ref_assign(struct ref_model *m, const char *id, const char *tenant, const uint32_t *devs,
                size_t n);
/* Remove job j; the last job takes its slot (as the library's documented order). */
void ref_release(struct ref_model *m, int j);
/* Give job j a new device list (replacement, migration). */
void ref_rebind(struct ref_model *m, int j, const uint32_t *devs, size_t n);
void ref_set_health(struct ref_model *m, const uint32_t *devs, size_t n, bool cordon, bool on);

/* The NICs job j holds (it is a GPU+NIC pairs job from now on): those p paired its ranks with
 * (tp_placement_nic(); tp_commit() records exactly those), or, with p NULL, unknown ones. */
void ref_set_nics(struct ref_model *m, int j, const tp_placement *p);

/* Whether a job's recorded shape makes it hold NICs (as the library reads a shape). */
bool ref_shape_pairs(const tp_request *shape);

/* For a successful placement with GPU+NIC pairs, against the NICs running jobs hold: no rank
 * gets a NIC another job holds on that node, and for a replacement of job `self` (-1 for a
 * new placement) a rank whose device stays keeps the NIC it held. NULL or the first violation
 * (a static buffer). */
const char *ref_nics_problem(const struct ref_model *m, const tp_topology *t,
                             const tp_placement *p, int self);

/* Compare every public query of the cluster with a recount of the model; abort on a
 * difference. Also runs tp_cluster_check(). */
void ref_compare(const struct ref_model *m, const tp_cluster *c);

/* Compare a fragmentation report with a recount (default mix only for the workload figure:
 * the caller passes the mix it used, or NULL). */
void ref_compare_frag(const struct ref_model *m, const tp_cluster *c, const tp_frag *f,
                      const tp_job_shape *mix, size_t nmix);

/* ---- requests -------------------------------------------------------------------------------- */

/* Storage for a decoded request: the strings and arrays it points to. */
struct fz_request {
	tp_request r;
	tp_slice slices[4];
	tp_domain_cap caps[3];
	const char *nodes[4];
	char longname[REF_MAX_ID + 1];
};

/* Decode a request from the input: fields from a dictionary of names that exist in t and of
 * names that do not (or are malformed), counts around the cluster's size. `running` names a
 * running job for colocate (may be NULL). */
void fz_decode_request(struct fz_in *in, const tp_topology *t, const char *running,
                       struct fz_request *out);

/* With FZ_TRACE: print a decoded request's fields (one line) to stderr; otherwise nothing. */
void fz_trace_request(const char *what, const tp_request *r);

/* Whether the request carries no constraint beyond count and select (so that success is
 * predictable from free counts). */
bool fz_request_plain(const tp_request *r);

/* Whether device `dev` matches the request's select (model, perf, memory, nodes). */
bool ref_dev_matches(const tp_topology *t, const tp_request *r, uint32_t dev);

/* Check that devs[n] obey every hard rule of r that the reference understands (count, unique,
 * groups, required, slices, caps, spread, select, colocate and exclusive against the running
 * jobs of c), and (contiguous) that the devices of each domain form one run of ranks. Returns
 * NULL or a description of the first violation (a static buffer). */
const char *ref_placement_problem(const tp_cluster *c, const tp_request *r, const char *tenant,
                                  const uint32_t *devs, size_t n, bool contiguous);

/* Whether r asks for GPU+NIC pairs as the library reads it (version 2 and the flag 1). */
bool fz_request_pairs(const tp_request *r);

/* For a successful placement of a request with gpu_nic_pairs: every rank has a NIC of its
 * node's type, no two ranks of one node share one, and each is below the lowest PCIe switch
 * above its GPU that has any NIC below it (every NIC when none has). Checked with public
 * queries only. NULL or the first violation (a static buffer). */
const char *ref_pairs_problem(const tp_topology *t, const tp_placement *p);

/* Whether code is 0 or a code of the error table. */
bool fz_code_defined(int code);

#endif
