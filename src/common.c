/* SPDX-License-Identifier: MIT */
#include "common.h"

#include <stdatomic.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *std_malloc(void *ud, size_t size) { (void)ud; return malloc(size); }
static void *std_calloc(void *ud, size_t n, size_t size) { (void)ud; return calloc(n, size); }
static void *std_realloc(void *ud, void *p, size_t size) { (void)ud; return realloc(p, size); }
static void std_free(void *ud, void *p) { (void)ud; free(p); }

tp_allocator tp_alloc_resolve(const tp_allocator *a)
{
	if (a)
		return *a;
	return (tp_allocator){std_malloc, std_calloc, std_realloc, std_free, NULL};
}

bool tp_alloc_valid(const tp_allocator *a)
{
	return !a || (a->malloc && a->calloc && a->realloc && a->free);
}

void *tp_malloc(const tp_allocator *a, size_t size)
{
	return a->malloc(a->ud, size ? size : 1);
}

void *tp_calloc(const tp_allocator *a, size_t n, size_t size)
{
	if (n == 0 || size == 0)
		n = size = 1;
	return a->calloc(a->ud, n, size);
}

void *tp_mallocn(const tp_allocator *a, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return tp_malloc(a, n * size);
}

void *tp_realloc(const tp_allocator *a, void *p, size_t size)
{
	return a->realloc(a->ud, p, size ? size : 1);
}

void *tp_reallocn(const tp_allocator *a, void *p, size_t n, size_t size)
{
	if (size && n > SIZE_MAX / size)
		return NULL;
	return tp_realloc(a, p, n * size);
}

void tp_free(const tp_allocator *a, void *p)
{
	if (p)
		a->free(a->ud, p);
}

char *tp_strdup(const tp_allocator *a, const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = tp_malloc(a, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

int tp_grow(const tp_allocator *a, void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t ncap = *cap ? *cap : 8;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return TP_ENOMEM;
		ncap *= 2;
	}
	void *p = tp_reallocn(a, *arr, ncap, elem);
	if (!p)
		return TP_ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

int tp_vseterr(char *buf, int code, const char *fmt, va_list ap)
{
	vsnprintf(buf, TP_ERRMSG_LEN, fmt, ap);
	return code;
}

int tp_seterr(char *buf, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	tp_vseterr(buf, code, fmt, ap);
	va_end(ap);
	return code;
}

int tp_errbuf_set(char *errbuf, size_t errlen, int code, const char *fmt, ...)
{
	if (errbuf && errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(errbuf, errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

const char *tp_name_problem(const char *name, bool no_slash)
{
	if (!name)
		return "is NULL";
	size_t n = strlen(name);
	if (n == 0)
		return "is empty";
	if (n > TP_MAX_NAME)
		return "is longer than 255 bytes";
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)name[i];
		if (ch < 0x20 || ch == 0x7f)
			return "contains a control character";
		if (no_slash && ch == '/')
			return "contains '/'";
	}
	return NULL;
}

/* ---- identities ---------------------------------------------------------------------------- */

/* One counter for every object that needs an identity other than its address: a lock-free
 * atomic, so that clusters and topologies can be created from different threads. 2^64 values
 * never run out. */
static _Atomic uint64_t tp_identities;

uint64_t tp_identity_next(void)
{
	return atomic_fetch_add_explicit(&tp_identities, 1, memory_order_relaxed) + 1;
}

/* ---- deadlines ----------------------------------------------------------------------------- */

uint64_t tp_monotonic_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_MONOTONIC, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t tp_deadline_ns(uint64_t us)
{
	if (!us)
		return 0;
	uint64_t now = tp_monotonic_ns();
	uint64_t ns = us > (UINT64_MAX - now) / 1000u ? UINT64_MAX - now : us * 1000u;
	return now + ns;
}

/* ---- error table and version -------------------------------------------------------------- */

/* The documented enum and the table must agree, code by code. */
#define TP__ERR_CHECK(name, value, text)                                                       \
	_Static_assert(TP_##name == (value), "TP_" #name " disagrees with TP_ERRNO_MAP");
TP_ERRNO_MAP(TP__ERR_CHECK)
#undef TP__ERR_CHECK

const char *tp_strerror(int code)
{
	switch (code) {
	case TP_OK:
		return "success";
#define TP__ERR_TEXT(name, value, text)                                                        \
	case TP_##name:                                                                            \
		return text;
		TP_ERRNO_MAP(TP__ERR_TEXT)
#undef TP__ERR_TEXT
	default:
		return "unknown error";
	}
}

const char *tp_err_name(int code)
{
	switch (code) {
	case TP_OK:
		return "OK";
#define TP__ERR_NAME(name, value, text)                                                        \
	case TP_##name:                                                                            \
		return #name;
		TP_ERRNO_MAP(TP__ERR_NAME)
#undef TP__ERR_NAME
	default:
		return "UNKNOWN";
	}
}

unsigned tp_version(void)
{
	return TP_VERSION_NUMBER;
}

const char *tp_version_string(void)
{
	return TP_VERSION_STRING;
}

int tp_options_init(void *opts, size_t size, const void *init, unsigned version)
{
	if (!opts || size < sizeof version)
		return TP_EINVAL;
	memcpy(opts, init, size);
	memcpy(opts, &version, sizeof version);
	return 0;
}
