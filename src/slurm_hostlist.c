/* SPDX-License-Identifier: MIT */
/*
 * The Slurm importer's helpers (slurm_internal.h): messages and warnings into the caller's
 * buffers, string pools, JudySL maps, and Slurm hostlists ("gpu[001-018,020]", several
 * brackets per name, the first varying slowest).
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "slurm_internal.h"

/* ---- messages and small helpers ----------------------------------------------------------- */

int tp_sl_fail(struct conf *c, int code, const char *fmt, ...)
{
	if (c->err && c->errlen) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(c->err, c->errlen, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* A warning, where Slurm would log one and go on: appended to the caller's buffer, one per
 * line, cut (never split mid-buffer without a NUL) when the buffer is full. */
void tp_sl_warn(struct conf *c, const char *fmt, ...)
{
	if (!c->warn || c->warnused + 1 >= c->warnlen)
		return;
	va_list ap;
	va_start(ap, fmt);
	size_t room = c->warnlen - c->warnused;
	int k = vsnprintf(c->warn + c->warnused, room, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k + 1 >= room) {
		c->warnused = c->warnlen - 1; /* full: what fits is kept, NUL-terminated */
		return;
	}
	c->warnused += (size_t)k;
	c->warn[c->warnused++] = '\n';
	c->warn[c->warnused] = '\0';
}

int tp_sl_nomem(struct conf *c)
{
	return tp_sl_fail(c, TP_ENOMEM, "out of memory reading topology.conf");
}

/* Append n bytes and a NUL to a pool; the new string's offset goes to *off. */
int tp_sl_pool_put(struct conf *c, struct pool *p, const char *s, size_t n, size_t *off)
{
	if (n > SIZE_MAX - p->len - 1 ||
	    tp_grow(c->a, (void **)&p->s, &p->cap, p->len + n + 1, 1))
		return tp_sl_nomem(c);
	memcpy(p->s + p->len, s, n);
	p->s[p->len + n] = '\0';
	*off = p->len;
	p->len += n + 1;
	return 0;
}


int tp_sl_push_u32(struct conf *c, uint32_t **arr, size_t *n, size_t *cap, uint32_t v)
{
	if (tp_grow(c->a, (void **)arr, cap, *n + 1, sizeof **arr))
		return tp_sl_nomem(c);
	(*arr)[(*n)++] = v;
	return 0;
}

/* JudySL lookup: the value stored for key (index + 1), 0 when absent. */
uintptr_t tp_sl_map_get(Pvoid_t map, const char *key)
{
	PJError_t err = NULL;
	PPvoid_t slot = JudySLGet(map, (const uint8_t *)key, err);
	return slot && slot != PPJERR ? (uintptr_t)*slot : 0;
}

/* JudySL insert of key -> v (> 0); *old receives the value already there (0 when new). */
int tp_sl_map_put(struct conf *c, Pvoid_t *map, const char *key, uintptr_t v, uintptr_t *old)
{
	PJError_t err = NULL;
	PPvoid_t slot = JudySLIns(map, (const uint8_t *)key, err);
	if (slot == PPJERR)
		return tp_sl_nomem(c);
	*old = (uintptr_t)*slot;
	if (!*old)
		*slot = (void *)v;
	return 0;
}

/* ---- hostlists ---------------------------------------------------------------------------- */

struct range {
	unsigned long lo, hi;
	int width; /* digits of lo as written: the zero padding */
};

/* One name of a hostlist: literal pieces around up to HOSTLIST_GROUPS bracket groups. */
struct hterm {
	const char *lit[HOSTLIST_GROUPS + 1];
	size_t litn[HOSTLIST_GROUPS + 1];
	size_t first[HOSTLIST_GROUPS + 1]; /* group g's ranges: first[g] .. first[g + 1] - 1 */
	unsigned ngroups;
};


/* A number of 1 to 18 digits at *p (advanced); -1 when there is none. */
int tp_sl_read_number(const char **p, const char *end, unsigned long *v, int *width)
{
	const char *q = *p;
	unsigned long x = 0;
	while (q < end && isdigit((unsigned char)*q) && q - *p < 18)
		x = x * 10 + (unsigned long)(*q++ - '0');
	if (q == *p || (q < end && isdigit((unsigned char)*q)))
		return -1;
	*width = (int)(q - *p);
	*v = x;
	*p = q;
	return 0;
}

static int hostlist_err(struct conf *c, unsigned line, const char *expr, const char *why)
{
	return tp_sl_fail(c, TP_EPARSE, "line %u: malformed hostlist '%.200s': %s", line, expr, why);
}

/* Parse the ranges of one bracket group [p, end) (without the brackets) into *rs. */
static int parse_group(struct conf *c, unsigned line, const char *expr, const char *p,
                       const char *end, struct range **rs, size_t *nr, size_t *cap,
                       unsigned long *count)
{
	for (;;) {
		struct range r;
		if (tp_sl_read_number(&p, end, &r.lo, &r.width))
			return hostlist_err(c, line, expr, "a range needs a number of 1 to 18 digits");
		r.hi = r.lo;
		if (p < end && *p == '-') {
			int w;
			p++;
			if (tp_sl_read_number(&p, end, &r.hi, &w))
				return hostlist_err(c, line, expr, "a range needs a number after '-'");
			if (r.hi < r.lo)
				return hostlist_err(c, line, expr, "a range decreases");
		}
		if (r.hi - r.lo >= HOSTLIST_MAX || *count + (r.hi - r.lo + 1) > HOSTLIST_MAX)
			return tp_sl_fail(c, TP_ELIMIT, "line %u: hostlist '%.200s' has more than %u names",
			            line, expr, HOSTLIST_MAX);
		*count += r.hi - r.lo + 1;
		if (tp_grow(c->a, (void **)rs, cap, *nr + 1, sizeof **rs))
			return tp_sl_nomem(c);
		(*rs)[(*nr)++] = r;
		if (p == end)
			return 0;
		if (*p != ',')
			return hostlist_err(c, line, expr, "unexpected character in brackets");
		p++;
	}
}

/* Split one name [p, end) into literals and groups; the ranges go to *rs. */
static int parse_term(struct conf *c, unsigned line, const char *expr, const char *p,
                      const char *end, struct hterm *t, struct range **rs, size_t *cap,
                      unsigned long *names)
{
	size_t nr = 0;
	unsigned long total = 1;
	t->ngroups = 0;
	t->lit[0] = p;
	for (;;) {
		const char *open = memchr(p, '[', (size_t)(end - p));
		const char *close = memchr(p, ']', (size_t)(end - p));
		if (close && (!open || close < open))
			return hostlist_err(c, line, expr, "']' without '['");
		unsigned g = t->ngroups;
		if (!open) {
			t->litn[g] = (size_t)(end - p);
			break;
		}
		if (g == HOSTLIST_GROUPS)
			return hostlist_err(c, line, expr, "more than 8 bracket groups in one name");
		t->litn[g] = (size_t)(open - p);
		close = memchr(open, ']', (size_t)(end - open));
		if (!close)
			return hostlist_err(c, line, expr, "'[' without ']'");
		if (memchr(open + 1, '[', (size_t)(close - open - 1)))
			return hostlist_err(c, line, expr, "nested '['");
		t->first[g] = nr;
		unsigned long count = 0;
		int rc = parse_group(c, line, expr, open + 1, close, rs, &nr, cap, &count);
		if (rc)
			return rc;
		if (total > HOSTLIST_MAX / count)
			return tp_sl_fail(c, TP_ELIMIT, "line %u: hostlist '%.200s' has more than %u names",
			            line, expr, HOSTLIST_MAX);
		total *= count;
		t->ngroups++;
		p = close + 1;
		t->lit[g + 1] = p;
	}
	t->first[t->ngroups] = nr;
	if (t->ngroups == 0 && t->litn[0] == 0)
		return hostlist_err(c, line, expr, "an empty name");
	*names += total;
	if (*names > HOSTLIST_MAX)
		return tp_sl_fail(c, TP_ELIMIT, "line %u: hostlist '%.200s' has more than %u names", line,
		            expr, HOSTLIST_MAX);
	return 0;
}

/* Call fn for every name of term t, the first group varying slowest. */
static int expand_term(struct conf *c, unsigned line, const char *expr, const struct hterm *t,
                       const struct range *rs, name_fn fn, void *ctx)
{
	size_t ri[HOSTLIST_GROUPS] = {0};  /* current range of each group */
	unsigned long v[HOSTLIST_GROUPS];  /* current value of each group */
	for (unsigned g = 0; g < t->ngroups; g++) {
		ri[g] = t->first[g];
		v[g] = rs[ri[g]].lo;
	}
	char name[TP_MAX_NAME + 2];
	for (;;) {
		size_t n = 0;
		bool too_long = false;
		for (unsigned g = 0; g <= t->ngroups && !too_long; g++) {
			if (n + t->litn[g] > TP_MAX_NAME) {
				too_long = true;
				break;
			}
			memcpy(name + n, t->lit[g], t->litn[g]);
			n += t->litn[g];
			if (g < t->ngroups) {
				int k = snprintf(name + n, sizeof name - n, "%0*lu", rs[ri[g]].width, v[g]);
				if (k < 0 || n + (size_t)k > TP_MAX_NAME)
					too_long = true;
				else
					n += (size_t)k;
			}
		}
		if (too_long)
			return tp_sl_fail(c, TP_EPARSE, "line %u: hostlist '%.200s' makes a name longer than %d "
			            "bytes", line, expr, TP_MAX_NAME);
		name[n] = '\0';
		int rc = fn(c, ctx, name);
		if (rc)
			return rc;
		/* Advance the odometer: the last group fastest. */
		unsigned g = t->ngroups;
		while (g-- > 0) {
			if (v[g] < rs[ri[g]].hi) {
				v[g]++;
				break;
			}
			if (ri[g] + 1 < t->first[g + 1]) {
				ri[g]++;
				v[g] = rs[ri[g]].lo;
				break;
			}
			ri[g] = t->first[g];
			v[g] = rs[ri[g]].lo;
		}
		if (g == (unsigned)-1)
			return 0;
	}
}

/* Call fn for every name of a hostlist expression, in order. */
int tp_sl_hostlist_each(struct conf *c, unsigned line, const char *expr, name_fn fn, void *ctx)
{
	struct range *rs = NULL;
	size_t cap = 0;
	unsigned long names = 0;
	int rc = 0;
	const char *p = expr, *end = expr + strlen(expr);
	while (!rc) {
		/* A name ends at a comma outside brackets. */
		const char *q = p;
		int depth = 0;
		while (q < end && (*q != ',' || depth > 0)) {
			depth += *q == '[' ? 1 : *q == ']' ? -1 : 0;
			q++;
		}
		struct hterm t;
		/* An empty item ("a,,b", "a,") is skipped, as Slurm's hostlist parser skips it. */
		if (q > p) {
			rc = parse_term(c, line, expr, p, q, &t, &rs, &cap, &names);
			if (!rc)
				rc = expand_term(c, line, expr, &t, rs, fn, ctx);
		}
		if (q == end)
			break;
		p = q + 1;
	}
	tp_free(c->a, rs);
	return rc;
}
