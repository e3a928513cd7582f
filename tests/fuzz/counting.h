/* SPDX-License-Identifier: MIT */
/*
 * The counting allocator of the importer fuzz targets (fuzz_hwloc, fuzz_slurm, fuzz_nvsmi,
 * fuzz_scenario), and their check(). `live` counts the blocks the library holds, so a target
 * asserts `live == 0` after destroying what it got; allocation `fail_at` (counted in `calls`
 * from 0) fails, -1: none. Include it once, in the target's .c file, after defining FZ_NAME
 * (the target's name, for check()'s message).
 */
#ifndef TP_FUZZ_COUNTING_H
#define TP_FUZZ_COUNTING_H

#include <stdio.h>
#include <stdlib.h>

#include "topoplace.h"

#ifndef FZ_NAME
#error "define FZ_NAME (the fuzz target's name) before including counting.h"
#endif

static long live, calls, fail_at = -1;

static void *f_malloc(void *ud, size_t n)
{
	(void)ud;
	if (calls++ == fail_at)
		return NULL;
	void *p = malloc(n);
	live += p != NULL;
	return p;
}

static void *f_calloc(void *ud, size_t n, size_t s)
{
	(void)ud;
	if (calls++ == fail_at)
		return NULL;
	void *p = calloc(n, s);
	live += p != NULL;
	return p;
}

static void *f_realloc(void *ud, void *q, size_t n)
{
	(void)ud;
	if (calls++ == fail_at)
		return NULL;
	void *p = realloc(q, n);
	live += p && !q;
	return p;
}

static void f_free(void *ud, void *p)
{
	(void)ud;
	live -= p != NULL;
	free(p);
}

static const tp_allocator counting = {f_malloc, f_calloc, f_realloc, f_free, NULL};

/* A failed check ends the run: the fuzzing engine keeps the input. */
static void check(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, FZ_NAME ": %s\n", what);
		abort();
	}
}

#endif
