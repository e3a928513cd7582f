/* SPDX-License-Identifier: MIT */
/*
 * Test helpers shared by the Criterion suites: a counting allocator that can fail the N-th
 * allocation, so every test asserts zero outstanding blocks at the end of its body (LeakSanitizer
 * does not fail a Criterion test) and allocation-failure loops can walk every allocation.
 */
#ifndef TP_TESTUTIL_H
#define TP_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "topoplace.h"

struct tp_test_alloc {
	long live;      /* blocks allocated and not freed */
	long calls;     /* allocations attempted since the last reset */
	long fail_at;   /* fail the allocation with this 0-based number; -1: never */
	long failed;    /* allocations failed */
};

extern struct tp_test_alloc tp_test_alloc_state;
extern const tp_allocator tp_test_allocator;

/* Start counting from zero; fail nothing. */
void tp_test_alloc_reset(void);
/* Fail allocation number n (0-based) from now on, counting from now. */
void tp_test_alloc_fail_at(long n);

/* Assert that every block allocated through tp_test_allocator was freed. */
#define TP_ASSERT_NO_LEAKS()                                                                   \
	cr_assert_eq(tp_test_alloc_state.live, 0, "%ld block(s) leaked", tp_test_alloc_state.live)

/* Assert an error code and that the message contains a fragment. */
#define TP_ASSERT_ERR(rc, code, msg, fragment)                                                 \
	do {                                                                                       \
		int tp__rc = (rc);                                                                     \
		const char *tp__m = (msg);                                                             \
		cr_assert_eq(tp__rc, (code), "expected %s, got %s (%s)", tp_err_name(code),            \
		             tp_err_name(tp__rc), tp__m ? tp__m : "(null)");                           \
		cr_assert(tp__m && strstr(tp__m, (fragment)), "message '%s' lacks '%s'",               \
		          tp__m ? tp__m : "(null)", (fragment));                                       \
	} while (0)

/* A cluster of t on the counting allocator (asserts success). Inline, so that the fuzz
 * replays, which link testutil.c without Criterion, never reference cr_assert. */
static inline tp_cluster *tp_test_cluster(const tp_topology *t)
{
	tp_cluster *c = NULL;
	cr_assert_eq(tp_cluster_create(&c, t, &tp_test_allocator), 0);
	return c;
}

/* The id of device `name` ("node/index"; asserts that it exists). */
static inline uint32_t tp_test_dev(const tp_topology *t, const char *name)
{
	uint32_t d = TP_NONE;
	cr_assert_eq(tp_topology_device_by_name(t, name, &d), 0, "no device %s", name);
	return d;
}

/* The switch queries as one int, for tables of expectations: the switch, -1 for the host
 * bridge, or the (negative, below -1) code. The out-parameter form is tested on its own in
 * test_topology.c. */
static inline int tp_test_sw(int rc, uint32_t sw)
{
	return rc ? rc : sw == TP_NONE ? -1 : (int)sw;
}
static inline int tp_test_gpu_switch(const tp_nodetype *nt, unsigned gpu)
{
	uint32_t sw = TP_NONE;
	int rc = tp_nodetype_gpu_switch(nt, gpu, &sw);
	return tp_test_sw(rc, sw);
}
static inline int tp_test_nic_switch(const tp_nodetype *nt, unsigned nic)
{
	uint32_t sw = TP_NONE;
	int rc = tp_nodetype_nic_switch(nt, nic, &sw);
	return tp_test_sw(rc, sw);
}
static inline int tp_test_switch_parent(const tp_nodetype *nt, unsigned s)
{
	uint32_t sw = TP_NONE;
	int rc = tp_nodetype_pcie_switch_parent(nt, s, &sw);
	return tp_test_sw(rc, sw);
}

/* A small deterministic PRNG (splitmix64) for property tests. */
static inline uint64_t tp_test_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline uint32_t tp_test_below(uint64_t *s, uint32_t n)
{
	return n ? (uint32_t)(tp_test_rand(s) % n) : 0;
}

#endif
