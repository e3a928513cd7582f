/* SPDX-License-Identifier: MIT */
/* A small, strict JSON reader (see json.h): recursive descent into an arena-allocated tree. */
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdalign.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena --------------------------------------------------------------------------------- */

struct json_block {
	struct json_block *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

enum { BLOCK_SIZE = 64 * 1024 };

static void *arena_alloc(struct json_doc *doc, size_t size)
{
	size = (size + alignof(max_align_t) - 1) & ~(alignof(max_align_t) - 1);
	struct json_block *b = doc->arena;
	if (!b || b->cap - b->used < size) {
		/* A value larger than a block (a long string) gets a block of its own. */
		size_t cap = size > BLOCK_SIZE ? size : BLOCK_SIZE;
		b = malloc(sizeof *b + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = doc->arena;
		doc->arena = b;
	}
	void *p = b->data + b->used;
	b->used += size;
	return p;
}

void json_free(struct json_doc *doc)
{
	if (!doc)
		return;
	while (doc->arena) {
		struct json_block *next = doc->arena->next;
		free(doc->arena);
		doc->arena = next;
	}
	doc->root = NULL;
}

/* ---- errors -------------------------------------------------------------------------------- */

struct parser {
	const char *text, *p, *end;
	struct json_doc *doc;
	struct json_error *err;
	int depth;
};

static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail_at(struct parser *ps, const char *at, const char *fmt, ...)
{
	struct json_error *e = ps->err;
	if (!e)
		return -1;
	e->offset = (size_t)(at - ps->text);
	e->line = 1;
	e->column = 1;
	for (const char *c = ps->text; c < at; c++) {
		if (*c == '\n') {
			e->line++;
			e->column = 1;
		} else if (((unsigned char)*c & 0xc0) != 0x80) { /* continuation bytes add nothing */
			e->column++;
		}
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(e->reason, sizeof e->reason, fmt, ap);
	va_end(ap);
	snprintf(e->msg, sizeof e->msg, "%s: line %u column %u (byte %zu)", e->reason, e->line,
	         e->column, e->offset);
	return -1;
}

/* "expected X, found Y" with Y the character at p (or the end of the input). */
static int expected(struct parser *ps, const char *what)
{
	if (ps->p >= ps->end)
		return fail_at(ps, ps->p, "expected %s, found the end of the input", what);
	unsigned char c = (unsigned char)*ps->p;
	if (c > 0x20 && c < 0x7f)
		return fail_at(ps, ps->p, "expected %s, found '%c'", what, c);
	return fail_at(ps, ps->p, "expected %s, found byte 0x%02x", what, c);
}

static int out_of_memory(struct parser *ps) { return fail_at(ps, ps->p, "out of memory"); }

/* ---- scanning ------------------------------------------------------------------------------ */

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static struct json_value *new_value(struct parser *ps, enum json_type type)
{
	struct json_value *v = arena_alloc(ps->doc, sizeof *v);
	if (v) {
		memset(v, 0, sizeof *v);
		v->type = type;
		v->offset = (size_t)(ps->p - ps->text);
	}
	return v;
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), or 0. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
	unsigned char c = p[0], lo = 0x80, hi = 0xbf;
	size_t n;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

static char *put_utf8(char *o, uint32_t cp)
{
	if (cp < 0x80) {
		*o++ = (char)cp;
	} else if (cp < 0x800) {
		*o++ = (char)(0xc0 | cp >> 6);
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else if (cp < 0x10000) {
		*o++ = (char)(0xe0 | cp >> 12);
		*o++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*o++ = (char)(0xf0 | cp >> 18);
		*o++ = (char)(0x80 | (cp >> 12 & 0x3f));
		*o++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*o++ = (char)(0x80 | (cp & 0x3f));
	}
	return o;
}

/* The 4 hex digits of a \u escape at p (after "\u"), or -1. */
static long hex4(const char *p, const char *end)
{
	if (end - p < 4)
		return -1;
	long v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0'
		      : c >= 'a' && c <= 'f' ? c - 'a' + 10
		      : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v << 4 | d;
	}
	return v;
}

/* A string at p (on the opening quote) into *out / *out_len, decoded to UTF-8 in the arena. */
static int parse_string(struct parser *ps, const char **out, size_t *out_len)
{
	const char *start = ps->p++;
	/* The decoded string is never longer than its source text, so one allocation does. */
	const char *close = ps->p;
	while (close < ps->end && *close != '"')
		close += *close == '\\' && ps->end - close > 1 ? 2 : 1;
	size_t cap = (size_t)(close - ps->p) + 1;
	char *buf = arena_alloc(ps->doc, cap), *o = buf;
	if (!buf)
		return out_of_memory(ps);
	for (;;) {
		if (ps->p >= ps->end)
			return fail_at(ps, start, "unterminated string");
		unsigned char c = (unsigned char)*ps->p;
		if (c == '"')
			break;
		if (c < 0x20)
			return fail_at(ps, ps->p, "control character U+%04X in a string (write it as \\u%04x)",
			               c, c);
		if (c >= 0x80) {
			size_t n = utf8_seq((const unsigned char *)ps->p, (const unsigned char *)ps->end);
			if (!n)
				return fail_at(ps, ps->p, "invalid UTF-8 in a string (byte 0x%02x)", c);
			memcpy(o, ps->p, n);
			o += n;
			ps->p += n;
			continue;
		}
		if (c != '\\') {
			*o++ = (char)c;
			ps->p++;
			continue;
		}
		const char *esc = ps->p++;
		if (ps->p >= ps->end)
			return fail_at(ps, start, "unterminated string");
		const char *simple = strchr("\"\\/bfnrt", *ps->p);
		if (*ps->p && simple) {
			*o++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
			ps->p++;
			continue;
		}
		if (*ps->p != 'u') {
			unsigned char e = (unsigned char)*ps->p;
			if (e > 0x20 && e < 0x7f)
				return fail_at(ps, esc, "invalid escape \\%c in a string", e);
			return fail_at(ps, esc, "invalid escape in a string (byte 0x%02x after \\)", e);
		}
		long cp = hex4(ps->p + 1, ps->end);
		if (cp < 0)
			return fail_at(ps, esc, "\\u must be followed by 4 hex digits");
		ps->p += 5;
		if (cp >= 0xdc00 && cp <= 0xdfff)
			return fail_at(ps, esc, "lone low surrogate \\u%04lx", cp);
		if (cp >= 0xd800 && cp <= 0xdbff) {
			long lo = ps->end - ps->p >= 2 && ps->p[0] == '\\' && ps->p[1] == 'u'
			        ? hex4(ps->p + 2, ps->end) : -1;
			if (lo < 0xdc00 || lo > 0xdfff)
				return fail_at(ps, esc, "high surrogate \\u%04lx is not followed by a low one",
				               cp);
			cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			ps->p += 6;
		}
		o = put_utf8(o, (uint32_t)cp);
	}
	ps->p++; /* the closing quote */
	*o = '\0';
	*out = buf;
	*out_len = (size_t)(o - buf);
	return 0;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* A number: the grammar of RFC 8259 checked by hand (strtod accepts more: hex, "inf", ".5"),
 * then converted by strtod. The harness never calls setlocale(), so the decimal point is '.'. */
static int parse_number(struct parser *ps, struct json_value *v)
{
	const char *s = ps->p, *e = s;
	/* Take everything that could belong to a number, so that "01" or "1.e5" is reported as
	 * one bad number rather than as a good one followed by garbage. */
	while (e < ps->end && (is_digit(*e) || strchr("+-.eE", *e)) && *e)
		e++;
	size_t n = (size_t)(e - s);
	const char *q = s;
	if (q < e && *q == '-')
		q++;
	bool ok = q < e && is_digit(*q);
	if (ok && *q == '0')
		q++;
	else
		while (q < e && is_digit(*q))
			q++;
	v->integer = true;
	if (ok && q < e && *q == '.') {
		v->integer = false;
		ok = ++q < e && is_digit(*q);
		while (q < e && is_digit(*q))
			q++;
	}
	if (ok && q < e && (*q == 'e' || *q == 'E')) {
		v->integer = false;
		q++;
		if (q < e && (*q == '+' || *q == '-'))
			q++;
		ok = q < e && is_digit(*q);
		while (q < e && is_digit(*q))
			q++;
	}
	if (!ok || q != e || n == 0) {
		if (n == 0)
			return expected(ps, "a value");
		return fail_at(ps, s, "invalid number %.*s", n > 40 ? 40 : (int)n, s);
	}
	char buf[320];
	if (n >= sizeof buf)
		return fail_at(ps, s, "number longer than %zu characters", sizeof buf - 1);
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v->number = strtod(buf, NULL);
	if (isinf(v->number))
		return fail_at(ps, s, "number %.*s is out of range", n > 40 ? 40 : (int)n, s);
	ps->p = e;
	return 0;
}

static int parse_value(struct parser *ps, struct json_value **out);

static int parse_array(struct parser *ps, struct json_value *arr)
{
	struct json_value **tail = &arr->first;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == ']') {
		ps->p++;
		return 0;
	}
	for (;;) {
		struct json_value *item;
		if (parse_value(ps, &item))
			return -1;
		*tail = item;
		tail = &item->next;
		arr->len++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == ']') {
			ps->p++;
			return 0;
		}
		return expected(ps, "',' or ']' after an array element");
	}
}

static int parse_object(struct parser *ps, struct json_value *obj)
{
	struct json_value **tail = &obj->first;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == '}') {
		ps->p++;
		return 0;
	}
	for (;;) {
		skip_ws(ps);
		if (ps->p >= ps->end || *ps->p != '"')
			return expected(ps, "a string key");
		const char *key_at = ps->p, *key;
		size_t key_len;
		if (parse_string(ps, &key, &key_len))
			return -1;
		/* Linear: objects in a scenario are small, and this keeps the tree a plain list. */
		for (const struct json_value *m = obj->first; m; m = m->next)
			if (m->key_len == key_len && !memcmp(m->key, key, key_len))
				return fail_at(ps, key_at, "duplicate key %.*s",
				               (int)(ps->p - key_at > 80 ? 80 : ps->p - key_at), key_at);
		skip_ws(ps);
		if (ps->p >= ps->end || *ps->p != ':')
			return expected(ps, "':' after an object key");
		ps->p++;
		struct json_value *member;
		if (parse_value(ps, &member))
			return -1;
		member->key = key;
		member->key_len = key_len;
		*tail = member;
		tail = &member->next;
		obj->len++;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == '}') {
			ps->p++;
			return 0;
		}
		return expected(ps, "',' or '}' after an object member");
	}
}

/* A literal name (true, false, null); anything else made of letters is reported whole. */
static int parse_word(struct parser *ps, struct json_value *v)
{
	const char *s = ps->p, *e = s;
	while (e < ps->end && ((*e >= 'a' && *e <= 'z') || (*e >= 'A' && *e <= 'Z')))
		e++;
	size_t n = (size_t)(e - s);
	if (n == 4 && !memcmp(s, "true", 4)) {
		v->type = JSON_BOOL;
		v->boolean = true;
	} else if (n == 5 && !memcmp(s, "false", 5)) {
		v->type = JSON_BOOL;
	} else if (n == 4 && !memcmp(s, "null", 4)) {
		v->type = JSON_NULL;
	} else {
		return fail_at(ps, s, "invalid literal %.*s (expected a value)", n > 40 ? 40 : (int)n, s);
	}
	ps->p = e;
	return 0;
}

static int parse_value(struct parser *ps, struct json_value **out)
{
	skip_ws(ps);
	if (ps->p >= ps->end)
		return expected(ps, "a value");
	struct json_value *v = new_value(ps, JSON_NULL);
	if (!v)
		return out_of_memory(ps);
	int rc;
	char c = *ps->p;
	if (c == '{' || c == '[') {
		if (++ps->depth > JSON_MAX_DEPTH)
			return fail_at(ps, ps->p, "nested deeper than %d arrays and objects",
			               JSON_MAX_DEPTH);
		v->type = c == '{' ? JSON_OBJECT : JSON_ARRAY;
		rc = c == '{' ? parse_object(ps, v) : parse_array(ps, v);
		ps->depth--;
	} else if (c == '"') {
		v->type = JSON_STRING;
		rc = parse_string(ps, &v->str, &v->len);
	} else if (c == '-' || is_digit(c)) {
		v->type = JSON_NUMBER;
		rc = parse_number(ps, v);
	} else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
		rc = parse_word(ps, v);
	} else {
		rc = expected(ps, "a value");
	}
	v->end = (size_t)(ps->p - ps->text);
	*out = v;
	return rc;
}

int json_parse(struct json_doc *doc, const char *text, size_t len, struct json_error *err)
{
	struct parser ps = {text, text, text + len, doc, err, 0};
	doc->root = NULL;
	doc->arena = NULL;
	if (err)
		memset(err, 0, sizeof *err);
	struct json_value *root;
	int rc = parse_value(&ps, &root);
	if (!rc) {
		skip_ws(&ps);
		if (ps.p < ps.end)
			rc = expected(&ps, "the end of the document");
	}
	if (rc) {
		json_free(doc);
		return -1;
	}
	doc->root = root;
	return 0;
}

const struct json_value *json_get(const struct json_value *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	size_t n = strlen(key);
	for (const struct json_value *m = obj->first; m; m = m->next)
		if (m->key_len == n && !memcmp(m->key, key, n))
			return m;
	return NULL;
}

const char *json_kind(const struct json_value *v)
{
	static const char *const kinds[] = {"null", "a boolean", "a number", "a string", "a list",
	                                    "an object"};
	return kinds[v->type];
}
