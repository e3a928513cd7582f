/* SPDX-License-Identifier: MIT */
/*
 * Messages and the small checks of the scenario importer. The words are those of the
 * command-line tool (bindings/python/topoplace/scenario.py wrote them first and
 * docs/errors.md lists them): a value is quoted as Python's json.dumps() writes it, cut to 60
 * characters, and a misspelt key gets difflib's closest match.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "scenario_internal.h"

/* ---- memory ------------------------------------------------------------------------------ */

void *sc_alloc(struct scen *s, size_t n)
{
	return tp_malloc(s->alloc, n ? n : 1);
}

void *sc_calloc(struct scen *s, size_t n, size_t size)
{
	return tp_calloc(s->alloc, n ? n : 1, size ? size : 1);
}

void sc_free(struct scen *s, void *p)
{
	tp_free(s->alloc, p);
}

/* ---- messages ---------------------------------------------------------------------------- */

bool sc_fail(struct scen *s, const char *path, const char *fmt, ...)
{
	if (!s->err || !s->errlen)
		return false;
	int n = *path ? snprintf(s->err, s->errlen, "%s: ", path) : 0;
	if (n < 0 || (size_t)n >= s->errlen)
		return false;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->err + n, s->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return false;
}

bool sc_nomem(struct scen *s, const char *path)
{
	s->code = TP_ENOMEM;
	return sc_fail(s, path, "out of memory");
}

/* A path too long for its buffer (only an absurdly long key makes one) ends in "...". */
static const char *cut(char *buf, int n)
{
	if (n >= SC_PATH_LEN)
		memcpy(buf + SC_PATH_LEN - 4, "...", 4);
	return buf;
}

const char *sc_join(char *buf, const char *path, const char *key)
{
	return cut(buf, snprintf(buf, SC_PATH_LEN, *path ? "%s.%s" : "%s%s", path, key));
}

const char *sc_item(char *buf, const char *path, size_t i)
{
	return cut(buf, snprintf(buf, SC_PATH_LEN, "%s[%zu]", path, i));
}

const char *sc_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_NULL: return "null";
	case JSON_TRUE:
	case JSON_FALSE: return "a boolean";
	case JSON_INTEGER:
	case JSON_REAL: return "a number";
	case JSON_STRING: return "a string";
	case JSON_ARRAY: return "a list";
	default: return "an object";
	}
}

/* Python's repr() of a float: the shortest digits that read back, in fixed notation for
 * decimal exponents -4 to 15, else as 1.5e-05. */
static void float_repr(double x, char *buf, size_t len)
{
	char e[40];
	int prec = 1;
	for (; prec <= 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, x);
		if (strtod(e, NULL) == x)
			break;
	}
	const char *p = e;
	bool neg = *p == '-';
	p += neg;
	char digits[24];
	size_t nd = 0;
	for (; *p && *p != 'e'; p++)
		if (*p != '.')
			digits[nd++] = *p;
	int exp = atoi(p + 1);
	while (nd > 1 && digits[nd - 1] == '0')
		nd--;
	digits[nd] = '\0';
	char out[64];
	size_t o = 0;
	if (neg)
		out[o++] = '-';
	if (exp >= -4 && exp <= 15) {
		if (exp < 0) {
			out[o++] = '0', out[o++] = '.';
			for (int z = 0; z < -exp - 1; z++)
				out[o++] = '0';
			memcpy(out + o, digits, nd), o += nd;
		} else {
			for (int i = 0; i <= exp; i++)
				out[o++] = (size_t)i < nd ? digits[i] : '0';
			out[o++] = '.';
			if (nd > (size_t)exp + 1)
				memcpy(out + o, digits + exp + 1, nd - (size_t)exp - 1), o += nd - (size_t)exp - 1;
			else
				out[o++] = '0';
		}
		out[o] = '\0';
	} else {
		out[o++] = digits[0];
		if (nd > 1) {
			out[o++] = '.';
			memcpy(out + o, digits + 1, nd - 1), o += nd - 1;
		}
		snprintf(out + o, sizeof out - o, "e%c%02d", exp < 0 ? '-' : '+', abs(exp));
	}
	snprintf(buf, len, "%s", out);
}

/* One UTF-8 character at *p (jansson has checked the encoding). */
static unsigned long utf8_next(const unsigned char **p)
{
	const unsigned char *s = *p;
	unsigned long c = *s++;
	int more = c >= 0xf0 ? 3 : c >= 0xe0 ? 2 : c >= 0xc0 ? 1 : 0;
	if (more)
		c &= 0x3fu >> more;
	while (more-- && (*s & 0xc0) == 0x80)
		c = (c << 6) | (*s++ & 0x3f);
	*p = s;
	return c;
}

/* A string as json.dumps() writes it (ASCII only), cut as _show() cuts it. */
const char *sc_show_str(const struct scen *s, const char *str, char buf[SC_SHOW_LEN])
{
	char out[SC_SHOW_LEN + 16];
	size_t o = 0;
	out[o++] = '"';
	const unsigned char *p = (const unsigned char *)str;
	while (*p && o < SC_SHOW_LEN) {
		unsigned long c = utf8_next(&p);
		const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" :
		                  c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b" :
		                  c == '\f' ? "\\f" : NULL;
		if (esc) {
			memcpy(out + o, esc, 2), o += 2;
		} else if (c >= 0x20 && c < 0x7f) {
			out[o++] = (char)c;
		} else if (c < 0x10000) {
			o += (size_t)snprintf(out + o, 7, "\\u%04lx", c);
		} else if (s->marked && c >= 0x10f800) { /* a lone surrogate, as Python shows it */
			o += (size_t)snprintf(out + o, 7, "\\u%04lx", c - 0x10f800 + 0xd800);
		} else {
			c -= 0x10000;
			o += (size_t)snprintf(out + o, 7, "\\u%04lx", 0xd800 | (c >> 10));
			if (o < SC_SHOW_LEN)
				o += (size_t)snprintf(out + o, 7, "\\u%04lx", 0xdc00 | (c & 0x3ff));
		}
	}
	if (!*p && o < SC_SHOW_LEN)
		out[o++] = '"';
	if (o > 60 || *p)
		snprintf(buf, SC_SHOW_LEN, "%.57s...", out);
	else
		snprintf(buf, SC_SHOW_LEN, "%.*s", (int)o, out);
	return buf;
}

const char *sc_show(const struct scen *s, const json_t *v, char buf[SC_SHOW_LEN])
{
	char num[64];
	switch (json_typeof(v)) {
	case JSON_NULL: return "null";
	case JSON_TRUE: return "true";
	case JSON_FALSE: return "false";
	case JSON_INTEGER:
		snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
		break;
	case JSON_REAL: float_repr(json_real_value(v), num, sizeof num); break;
	case JSON_STRING: return sc_show_str(s, json_string_value(v), buf);
	default: return sc_kind(v);
	}
	if (strlen(num) > 60)
		snprintf(buf, SC_SHOW_LEN, "%.57s...", num);
	else
		snprintf(buf, SC_SHOW_LEN, "%s", num);
	return buf;
}

/* ---- "did you mean" ---------------------------------------------------------------------- */

/* The Ratcliff-Obershelp count of matching characters (what difflib's ratio() counts): the
 * earliest longest common block, then the same on each side of it. */
static size_t matching(const char *a, size_t na, const char *b, size_t nb)
{
	size_t best = 0, ai = 0, bj = 0;
	for (size_t i = 0; i < na; i++)
		for (size_t j = 0; j < nb; j++) {
			size_t k = 0;
			while (i + k < na && j + k < nb && a[i + k] == b[j + k])
				k++;
			if (k > best)
				best = k, ai = i, bj = j;
		}
	if (!best)
		return 0;
	return best + matching(a, ai, b, bj) +
	       matching(a + ai + best, na - ai - best, b + bj + best, nb - bj - best);
}

/* The allowed key closest to a misspelt one (ratio >= 0.75; on a tie the greater string, as
 * difflib.get_close_matches), or NULL. */
static const char *close_match(const char *word, const char *const *allowed, size_t n)
{
	size_t nw = strlen(word);
	if (nw > 64)
		return NULL;
	const char *best = NULL;
	double best_score = 0.75;
	for (size_t i = 0; i < n; i++) {
		size_t na = strlen(allowed[i]);
		double score = 2.0 * (double)matching(allowed[i], na, word, nw) / (double)(na + nw);
		if (score > best_score || (score == best_score && (!best || strcmp(allowed[i], best) > 0)))
			best = allowed[i], best_score = score;
	}
	return best;
}

/* ---- small checks: each names the field and fails at the first problem -------------------- */

bool sc_check_object(struct scen *s, const json_t *v, const char *path,
                     const char *const *allowed, size_t n)
{
	if (!json_is_object(v))
		return sc_fail(s, path, "must be an object, not %s", sc_kind(v));
	const char *key;
	json_t *m;
	json_object_foreach((json_t *)v, key, m) {
		size_t i = 0;
		while (i < n && strcmp(key, allowed[i]))
			i++;
		if (i < n)
			continue;
		char list[TP_MAX_LEVELS * (TP_MAX_NAME + 2) + 64] = "", q[SC_PATH_LEN];
		for (i = 0; i < n; i++) {
			size_t len = strlen(list);
			snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", allowed[i]);
		}
		const char *hint = close_match(key, allowed, n);
		return sc_fail(s, sc_join(q, path, key), "unknown key%s%s%s (allowed: %s)",
		               hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "",
		               list);
	}
	return true;
}

bool sc_check_list(struct scen *s, const json_t *v, const char *path, bool nonempty)
{
	if (!json_is_array(v))
		return sc_fail(s, path, "must be a list, not %s", sc_kind(v));
	if (nonempty && !json_array_size(v))
		return sc_fail(s, path, "must not be empty");
	return true;
}

bool sc_check_bool(struct scen *s, const json_t *v, const char *path, int *out)
{
	if (!json_is_boolean(v))
		return sc_fail(s, path, "must be true or false, not %s", sc_kind(v));
	*out = json_is_true(v);
	return true;
}

bool sc_check_int(struct scen *s, const json_t *v, const char *path, long long lo, bool has_lo,
                  long long hi, bool has_hi, const char *what, long long *out)
{
	char b[SC_SHOW_LEN];
	if (!json_is_integer(v))
		return sc_fail(s, path, "must be %s, not %s", what, sc_show(s, v, b));
	long long x = json_integer_value(v);
	if (has_lo && x < lo) {
		if (lo == 1)
			return sc_fail(s, path, "must be at least 1, not %lld", x);
		return sc_fail(s, path, "%lld is below %lld", x, lo);
	}
	if (has_hi && x > hi)
		return sc_fail(s, path, "%lld is above the limit %lld", x, hi);
	*out = x;
	return true;
}

bool sc_check_num(struct scen *s, const json_t *v, const char *path, bool positive,
                  bool nonneg, double *out)
{
	char b[SC_SHOW_LEN];
	if (!json_is_number(v))
		return sc_fail(s, path, "must be a number, not %s", sc_show(s, v, b));
	double x = json_number_value(v);
	if (positive && !(x > 0))
		return sc_fail(s, path, "must be positive, not %s", sc_show(s, v, b));
	if (nonneg && x < 0)
		return sc_fail(s, path, "must not be negative (%s)", sc_show(s, v, b));
	*out = x;
	return true;
}

/* ---- lone surrogates --------------------------------------------------------------------- */

static int hexval(const char *p)
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = p[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
		        c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		v = v * 16 + d;
	}
	return v;
}

char *sc_mark_surrogates(struct scen *s, const char *text, size_t *len)
{
	size_t n = *len, o = 0, found = 0;
	char *out = sc_alloc(s, 2 * n + 1); /* each 6-byte escape becomes 12 bytes */
	if (!out) {
		*len = SIZE_MAX;
		return NULL;
	}
	bool in_string = false;
	for (size_t i = 0; i < n; i++) {
		char c = text[i];
		if (!in_string) {
			in_string = c == '"';
			out[o++] = c;
			continue;
		}
		if (c == '"') {
			in_string = false;
		} else if (c == '\\' && i + 1 < n && text[i + 1] != 'u') {
			out[o++] = c;
			c = text[++i];
		} else if (c == '\\' && i + 5 < n && hexval(text + i + 2) >= 0) {
			int u = hexval(text + i + 2);
			bool high = u >= 0xd800 && u <= 0xdbff, low = u >= 0xdc00 && u <= 0xdfff;
			int next = i + 11 < n && text[i + 6] == '\\' && text[i + 7] == 'u' ?
			           hexval(text + i + 8) : -1;
			if (high && next >= 0xdc00 && next <= 0xdfff) { /* a pair: keep both */
				memcpy(out + o, text + i, 12);
				o += 12, i += 11;
				continue;
			}
			if (high || low) {
				unsigned v = 0xff800u + (unsigned)(u - 0xd800);
				o += (size_t)snprintf(out + o, 13, "\\u%04x\\u%04x", 0xd800 | (v >> 10),
				                      0xdc00 | (v & 0x3ff));
				i += 5, found++;
				continue;
			}
		}
		out[o++] = c;
	}
	if (!found) {
		sc_free(s, out);
		return NULL;
	}
	out[o] = '\0';
	*len = o;
	return out;
}

/* The first lone surrogate of a string of a marked document, or 0. */
static unsigned surrogate(const struct scen *s, const char *str)
{
	if (!s->marked)
		return 0;
	const unsigned char *p = (const unsigned char *)str;
	while (*p) {
		unsigned long c = utf8_next(&p);
		if (c >= 0x10f800)
			return (unsigned)(c - 0x10f800 + 0xd800);
	}
	return 0;
}

/* A name the library accepts: non-empty, at most TP_MAX_NAME bytes, no control character
 * and (unless slash_ok) no '/'. */
static bool check_name_str(struct scen *s, const char *str, size_t len, const char *path,
                           const char *what, bool slash_ok)
{
	char b[SC_SHOW_LEN];
	if (!len)
		return sc_fail(s, path, "%s must not be empty", what);
	unsigned u = surrogate(s, str);
	if (u)
		return sc_fail(s, path, "%s %s holds a lone surrogate (\\u%04x), which is not a "
		                        "character", what, sc_show_str(s, str, b), u);
	if (len > TP_MAX_NAME)
		return sc_fail(s, path, "%s is longer than %d bytes", what, TP_MAX_NAME);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)str[i] < 32 || str[i] == 127)
			return sc_fail(s, path, "%s %s contains a control character", what,
			               sc_show_str(s, str, b));
	if (!slash_ok && strchr(str, '/'))
		return sc_fail(s, path, "%s %s contains '/'", what, sc_show_str(s, str, b));
	return true;
}

bool sc_check_name(struct scen *s, const json_t *v, const char *path, const char *what,
                   bool slash_ok)
{
	char b[SC_SHOW_LEN];
	if (!json_is_string(v))
		return sc_fail(s, path, "%s must be a string, not %s", what, sc_show(s, v, b));
	return check_name_str(s, json_string_value(v), json_string_length(v), path, what,
	                      slash_ok);
}

bool sc_check_key_name(struct scen *s, const char *key, const char *path, const char *what)
{
	return check_name_str(s, key, strlen(key), path, what, false);
}

uint32_t sc_node_devices(const tp_topology *t, uint32_t node, uint32_t *first)
{
	uint32_t n = 0, f = 0;
	unsigned last = tp_topology_level_count(t) - 1;
	tp_topology_domain_devices(t, last, tp_topology_node_domain(t, node, last), &f, &n);
	if (first)
		*first = f;
	return n;
}

/* A node name or a device `node/index` of the built topology: 0 with the node and the index
 * (-1 for a whole node), or false after the message. */
int sc_ref(struct scen *s, const json_t *v, const char *path, const char *what, uint32_t *node,
           int *dev)
{
	char b[SC_SHOW_LEN];
	if (!json_is_string(v))
		return sc_fail(s, path, "must be a node or device name, not %s", sc_show(s, v, b));
	const char *str = json_string_value(v);
	if (tp_topology_node_by_name(s->t, str, node) == 0) {
		*dev = -1;
		return true;
	}
	const char *slash = strrchr(str, '/');
	char name[TP_MAX_NAME + 1];
	size_t nlen = slash ? (size_t)(slash - str) : 0;
	if (slash && nlen <= TP_MAX_NAME) {
		memcpy(name, str, nlen);
		name[nlen] = '\0';
		if (tp_topology_node_by_name(s->t, name, node) == 0) {
			const char *d = slash + 1;
			uint32_t gpus = sc_node_devices(s->t, *node, NULL);
			if (*d && strspn(d, "0123456789") == strlen(d)) {
				unsigned long i = 0;
				for (; *d && i < TP_MAX_NODE_DEVICES; d++) /* leading zeros count for nothing */
					i = i * 10 + (unsigned long)(*d - '0');
				if (!*d && i < gpus) {
					*dev = (int)i;
					return true;
				}
				return sc_fail(s, path, "node %s has %u devices, so there is no device %s",
				               name, gpus, str);
			}
			return sc_fail(s, path, "%s is not a device name (node/index)", sc_show(s, v, b));
		}
	}
	return sc_fail(s, path, "unknown %s %s", what, sc_show(s, v, b));
}
