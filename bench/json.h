/* SPDX-License-Identifier: MIT */
/*
 * A small, strict JSON reader (RFC 8259) for the benchmark harness, which reads scenario files
 * (bench/scenario.c). The library itself does no I/O and parses no JSON.
 *
 * The whole text is parsed into a tree of tagged values that live in one arena and are freed at
 * once with json_free(). Strict means every deviation from RFC 8259 is an error, as the scenario
 * format asks ("a typo must not silently change the answer"): trailing data, a key given twice in
 * one object, control characters or invalid UTF-8 in strings, lone surrogates, NaN/Infinity,
 * leading zeros, numbers beyond the range of a double, and nesting deeper than JSON_MAX_DEPTH.
 * Errors carry the byte offset, the line and column (1-based; columns count characters, not
 * bytes) and a reason.
 */
#ifndef TP_BENCH_JSON_H
#define TP_BENCH_JSON_H

#include <stdbool.h>
#include <stddef.h>

/* Most arrays and objects open at once; a scenario needs 6. */
#define JSON_MAX_DEPTH 128

enum json_type { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json_value {
	enum json_type type;
	size_t offset, end;      /* the value's text is [offset, end) of the input (for messages) */
	bool boolean;            /* JSON_BOOL */
	double number;           /* JSON_NUMBER */
	bool integer;            /* JSON_NUMBER written without fraction or exponent ("3", not "3.0") */
	const char *str;         /* JSON_STRING: UTF-8, NUL-terminated (may also hold NUL: see len) */
	size_t len;              /* JSON_STRING: bytes of str; JSON_ARRAY, JSON_OBJECT: children */
	struct json_value *first; /* JSON_ARRAY, JSON_OBJECT: first child, in document order */
	struct json_value *next;  /* the next child of the parent, or NULL */
	const char *key;         /* a member of an object: its key (NUL-terminated), else NULL */
	size_t key_len;
};

/* A parsed document: its root and the arena everything lives in (owned; json_free()). */
struct json_doc {
	struct json_value *root;
	struct json_block *arena;
};

struct json_error {
	size_t offset;         /* byte offset of the problem in the input */
	unsigned line, column; /* 1-based; the column counts UTF-8 characters */
	char reason[128];      /* "expected ':' after an object key, found '1'" */
	char msg[192];         /* reason + ": line L column C (byte B)" */
};

/*
 * Parse text[0..len) (need not be NUL-terminated; a NUL byte outside a string is an error).
 * Returns 0 and fills doc, or -1 with err filled (doc then holds nothing to free; an allocation
 * failure is reported as the reason "out of memory"). err may be NULL.
 */
int json_parse(struct json_doc *doc, const char *text, size_t len, struct json_error *err);

/* Free everything json_parse() allocated; doc may be NULL or already freed. */
void json_free(struct json_doc *doc);

/* The member of obj named key (first match), or NULL when obj is not an object or lacks it. */
const struct json_value *json_get(const struct json_value *obj, const char *key);

/* What a value is, as a message names it: "null", "a boolean", "a number", "a string", "a list",
 * "an object" (the wording of the Python CLI). */
const char *json_kind(const struct json_value *v);

#endif
