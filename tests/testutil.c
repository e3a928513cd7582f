/* SPDX-License-Identifier: MIT */
#include "testutil.h"

struct tp_test_alloc tp_test_alloc_state = {0, 0, -1, 0};

static bool should_fail(void)
{
	long n = tp_test_alloc_state.calls++;
	if (tp_test_alloc_state.fail_at >= 0 && n == tp_test_alloc_state.fail_at) {
		tp_test_alloc_state.failed++;
		return true;
	}
	return false;
}

static void *t_malloc(void *ud, size_t size)
{
	(void)ud;
	if (should_fail())
		return NULL;
	void *p = malloc(size);
	if (p)
		tp_test_alloc_state.live++;
	return p;
}

static void *t_calloc(void *ud, size_t n, size_t size)
{
	(void)ud;
	if (should_fail())
		return NULL;
	void *p = calloc(n, size);
	if (p)
		tp_test_alloc_state.live++;
	return p;
}

static void *t_realloc(void *ud, void *ptr, size_t size)
{
	(void)ud;
	if (should_fail())
		return NULL;
	void *p = realloc(ptr, size);
	if (p && !ptr)
		tp_test_alloc_state.live++;
	return p;
}

static void t_free(void *ud, void *ptr)
{
	(void)ud;
	if (ptr) {
		tp_test_alloc_state.live--;
		free(ptr);
	}
}

const tp_allocator tp_test_allocator = {t_malloc, t_calloc, t_realloc, t_free, NULL};

void tp_test_alloc_reset(void)
{
	tp_test_alloc_state = (struct tp_test_alloc){0, 0, -1, 0};
}

void tp_test_alloc_fail_at(long n)
{
	tp_test_alloc_state.calls = 0;
	tp_test_alloc_state.failed = 0;
	tp_test_alloc_state.fail_at = n;
}
