/* SPDX-License-Identifier: MIT */
/* Helpers every module shares: the allocator, error messages, small arithmetic. Private. */
#ifndef TP_COMMON_H
#define TP_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topoplace.h"

/* Size of the message buffer every object carries. */
#define TP_ERRMSG_LEN 512

#if defined(__GNUC__) || defined(__clang__)
#define TP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define TP_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define TP_PRINTF(f, a)
#define TP_UNLIKELY(x) (x)
#endif

/* The allocator given to a constructor, or the C library's when it was NULL. */
tp_allocator tp_alloc_resolve(const tp_allocator *a);
/* Whether an allocator given by a caller has every function set (NULL counts as valid). */
bool tp_alloc_valid(const tp_allocator *a);

void *tp_malloc(const tp_allocator *a, size_t size);
void *tp_calloc(const tp_allocator *a, size_t n, size_t size);
/* Overflow-checked n * size; NULL (no allocation) when it overflows. */
void *tp_mallocn(const tp_allocator *a, size_t n, size_t size);
void *tp_realloc(const tp_allocator *a, void *p, size_t size);
void *tp_reallocn(const tp_allocator *a, void *p, size_t n, size_t size);
void tp_free(const tp_allocator *a, void *p);
char *tp_strdup(const tp_allocator *a, const char *s);

/* Grow *arr (elements of size elem) so that it holds at least need; doubles the capacity.
 * Returns 0 or TP_ENOMEM (then *arr and *cap are unchanged). */
int tp_grow(const tp_allocator *a, void **arr, size_t *cap, size_t need, size_t elem);

/* Write a formatted message into buf (TP_ERRMSG_LEN bytes) and return code. */
int tp_seterr(char *buf, int code, const char *fmt, ...) TP_PRINTF(3, 4);

/* The buffer importers' channel: write a formatted message into the caller's errbuf (errlen
 * bytes, cut and NUL-terminated; nothing when errbuf is NULL or errlen 0) and return code. */
int tp_errbuf_set(char *errbuf, size_t errlen, int code, const char *fmt, ...) TP_PRINTF(4, 5);

/* A new identity (common.c): distinct for every call in the process, never 0. Clusters and
 * topologies carry one so that a result made on one is recognised by its identity, not by an
 * address that a later object may reuse. Thread-safe. */
uint64_t tp_identity_next(void);

/* Wall-clock limits a caller asked for (tp_defrag_policy.max_time_us,
 * tp_replace_options.max_time_us), the only use of time in the library: CLOCK_MONOTONIC in
 * nanoseconds (0 when the clock fails), and the deadline `us` microseconds from now (0 for
 * us 0: none; saturated instead of wrapping). */
uint64_t tp_monotonic_ns(void);
uint64_t tp_deadline_ns(uint64_t us);
int tp_vseterr(char *buf, int code, const char *fmt, va_list ap) TP_PRINTF(3, 0);

/* A valid name: non-empty, at most TP_MAX_NAME bytes, no '/' (when no_slash), no control
 * characters. Returns NULL when valid, else a reason. */
const char *tp_name_problem(const char *name, bool no_slash);

/* The body of every tp_<struct>_init(): copy the first `size` bytes of the current defaults
 * `init` (the size the caller's `version` of the struct has; 0 for a version the library does
 * not know) into `opts` and set its leading `unsigned version` to `version`. TP_EINVAL with
 * nothing written for a NULL `opts` or a size of 0. Keep `init` static: its padding is then
 * zero, so every initialised struct is the same bytes. */
int tp_options_init(void *opts, size_t size, const void *init, unsigned version);

#endif
