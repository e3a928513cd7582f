/* SPDX-License-Identifier: MIT */
/*
 * `nvidia-smi topo -m` importer: a node type from the matrix nvidia-smi prints (see
 * topoplace-nvsmi.h for what is read and docs/importers.md for the format).
 *
 * One pass over the lines reads the header, the rows and the legends into a matrix of link
 * levels; then union-find over the levels gives PCIe switches (PIX, PXB), host bridges (PHB)
 * and NUMA nodes (NODE), and the node type is built through its public functions. Until the
 * build succeeds the node type is private, so a failure leaves nothing behind.
 */
#include "topoplace-nvsmi.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define NVSMI_MAX_BYTES (1 << 20) /* a 256-GPU matrix with NICs is well under 1 MiB */
#define NVSMI_MAX_NICS 256
#define NVSMI_MAX_LINKS 64        /* NV18 is the most links a GPU has today (H100, B200) */
#define NVSMI_MAX_PAIR_GBPS 10000.0 /* as the hwloc importer: ten times NVLink 5 per GPU */
#define NVSMI_MAX_DEV (TP_MAX_NODE_DEVICES + NVSMI_MAX_NICS)

/* Link levels, closest first. NV is an NVLink (its PCIe path is not shown). */
enum level { LV_SELF = 0, LV_NV, LV_PIX, LV_PXB, LV_PHB, LV_NODE, LV_SYS };

static const char *const level_name[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"};

/* The extra columns after the matrix, in the order nvidia-smi prints them. */
static const char *const extra_label[] = {"CPU Affinity", "NUMA Affinity", "GPU NUMA ID"};

struct tok {
	const char *s;
	size_t len;
	size_t col; /* 1-based byte column */
};

struct parse {
	const tp_allocator *a;
	char *errbuf;
	size_t errlen;
	unsigned ngpu, nnic, ndev, nextra;
	int extra_kind[3];   /* index into extra_label of each extra column */
	int gpu_numa[TP_MAX_NODE_DEVICES]; /* a GPU's NUMA Affinity when it is one number, or -1 */
	struct tok label[NVSMI_MAX_DEV];
	unsigned char *lv;   /* [ndev * ndev] enum level */
	unsigned char *nv;   /* [ndev * ndev] NVLink count */
	unsigned *row_line;  /* [ndev] line of each row */
	char (*nic_name)[TP_MAX_NAME + 1]; /* [nnic] from the NIC Legend, "" until named */
};

#define fail tp_errbuf_set /* the caller-buffer channel (common.h) */

/* ---- lines and tokens ---------------------------------------------------------------------- */

struct line {
	const char *b, *e; /* without the line end */
	unsigned no;
};

/* The next line of [*p, end) into l (CR-LF and LF ends); false at the end. */
static bool next_line(const char **p, const char *end, struct line *l)
{
	if (*p >= end)
		return false;
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	l->b = *p;
	l->e = nl ? nl : end;
	*p = nl ? nl + 1 : end;
	if (l->e > l->b && l->e[-1] == '\r')
		l->e--;
	l->no++;
	return true;
}

/* Length of an ANSI escape sequence (ESC [ ... letter) at p, 0 when there is none: newer
 * nvidia-smi underlines the header on a terminal and pasted copies keep the codes. */
static size_t ansi_len(const char *p, const char *e)
{
	if (e - p < 2 || p[0] != '\x1b' || p[1] != '[')
		return 0;
	const char *q = p + 2;
	while (q < e && ((*q >= '0' && *q <= '9') || *q == ';'))
		q++;
	return q < e && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')) ? (size_t)(q + 1 - p)
	                                                                      : 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* The next token of the line from *p (blanks and escape codes separate tokens): 1 with t set,
 * 0 at the end of the line, -1 (message set) for a control character. */
static int next_tok(struct parse *ps, const struct line *l, const char **p, struct tok *t)
{
	const char *q = *p;
	for (;;) {
		size_t k;
		if (q < l->e && is_blank(*q))
			q++;
		else if ((k = ansi_len(q, l->e)) > 0)
			q += k;
		else
			break;
	}
	if (q >= l->e) {
		*p = q;
		return 0;
	}
	const char *s = q;
	while (q < l->e && !is_blank(*q) && !ansi_len(q, l->e)) {
		unsigned char c = (unsigned char)*q;
		if (c < 0x20 || c == 0x7f) {
			fail(ps->errbuf, ps->errlen, TP_EPARSE,
			     "line %u, column %zu: a control character (0x%02x)", l->no,
			     (size_t)(q - l->b) + 1, c);
			return -1;
		}
		q++;
	}
	*t = (struct tok){s, (size_t)(q - s), (size_t)(s - l->b) + 1};
	*p = q;
	return 1;
}

static bool tok_is(const struct tok *t, const char *w)
{
	return t->len == strlen(w) && !memcmp(t->s, w, t->len);
}

static bool line_blank(const struct line *l)
{
	for (const char *q = l->b; q < l->e; q++)
		if (!is_blank(*q))
			return false;
	return true;
}

/* "GPU<i>" with i the given index (no leading zeros). */
static bool is_gpu_label(const struct tok *t, unsigned i)
{
	char want[16];
	snprintf(want, sizeof want, "GPU%u", i);
	return tok_is(t, want);
}

static bool starts_gpu_word(const struct tok *t)
{
	return t->len > 3 && !memcmp(t->s, "GPU", 3) && t->s[3] >= '0' && t->s[3] <= '9';
}

/* ---- the header ---------------------------------------------------------------------------- */

/* Which extra column the words at toks[i..] start ("CPU Affinity" ...): its index and *words,
 * or -1. */
static int extra_at(const struct tok *toks, unsigned n, unsigned i, unsigned *words)
{
	for (int x = 0; x < 3; x++) {
		const char *w = extra_label[x];
		unsigned k = 0;
		for (;;) {
			size_t wl = strcspn(w, " ");
			if (i + k >= n || toks[i + k].len != wl || memcmp(toks[i + k].s, w, wl))
				break;
			k++;
			w += wl;
			if (!*w) {
				*words = k;
				return x;
			}
			w++;
		}
	}
	return -1;
}

static int parse_header(struct parse *ps, const struct line *l)
{
	struct tok toks[NVSMI_MAX_DEV + 8];
	unsigned n = 0;
	const char *p = l->b;
	struct tok t;
	int r;
	while ((r = next_tok(ps, l, &p, &t)) == 1) {
		if (n == sizeof toks / sizeof toks[0])
			return fail(ps->errbuf, ps->errlen, TP_ELIMIT,
			            "line %u, column %zu: more than %d GPU and NIC columns", l->no, t.col,
			            NVSMI_MAX_DEV);
		toks[n++] = t;
	}
	if (r < 0)
		return TP_EPARSE;
	if (n == 0 || !is_gpu_label(&toks[0], 0))
		return fail(ps->errbuf, ps->errlen, TP_EPARSE,
		            "line %u, column %zu: expected the header of nvidia-smi topo -m "
		            "(GPU0 GPU1 ... CPU Affinity), got '%.*s'",
		            l->no, n ? toks[0].col : 1, n ? (int)(toks[0].len > 40 ? 40 : toks[0].len) : 0,
		            n ? toks[0].s : "");
	unsigned i = 0;
	while (i < n && is_gpu_label(&toks[i], i))
		i++;
	ps->ngpu = i;
	if (ps->ngpu > TP_MAX_NODE_DEVICES)
		return fail(ps->errbuf, ps->errlen, TP_ELIMIT, "line %u: %u GPU columns (at most %d)",
		            l->no, ps->ngpu, TP_MAX_NODE_DEVICES);
	unsigned words = 0;
	for (; i < n && extra_at(toks, n, i, &words) < 0; i++) {
		if (starts_gpu_word(&toks[i]))
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: GPU column '%.*s' out of order (expected "
			            "GPU0, GPU1, ... before the NICs)",
			            l->no, toks[i].col, (int)toks[i].len, toks[i].s);
		if (toks[i].len > TP_MAX_NAME)
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: a column name longer than %d bytes", l->no,
			            toks[i].col, TP_MAX_NAME);
		for (unsigned j = ps->ngpu; j < i; j++)
			if (toks[j].len == toks[i].len && !memcmp(toks[j].s, toks[i].s, toks[i].len))
				return fail(ps->errbuf, ps->errlen, TP_EPARSE,
				            "line %u, column %zu: column '%.*s' appears twice", l->no,
				            toks[i].col, (int)toks[i].len, toks[i].s);
	}
	ps->ndev = i;
	ps->nnic = i - ps->ngpu;
	if (ps->nnic > NVSMI_MAX_NICS)
		return fail(ps->errbuf, ps->errlen, TP_ELIMIT, "line %u: %u NIC columns (at most %d)",
		            l->no, ps->nnic, NVSMI_MAX_NICS);
	memcpy(ps->label, toks, ps->ndev * sizeof *toks);
	int last = -1;
	while (i < n) {
		int x = extra_at(toks, n, i, &words);
		if (x <= last)
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: '%.*s' where the header has only CPU Affinity, "
			            "NUMA Affinity and GPU NUMA ID after the matrix columns",
			            l->no, toks[i].col, (int)toks[i].len, toks[i].s);
		last = x;
		ps->extra_kind[ps->nextra++] = x;
		i += words;
	}
	return 0;
}

/* ---- the rows ------------------------------------------------------------------------------ */

/* The level of a matrix entry and its NVLink count; -1 when it is not an entry. */
static int entry_level(const struct tok *t, unsigned *links)
{
	*links = 0;
	if (tok_is(t, "X"))
		return LV_SELF;
	if (tok_is(t, "PIX"))
		return LV_PIX;
	if (tok_is(t, "PXB"))
		return LV_PXB;
	if (tok_is(t, "PHB"))
		return LV_PHB;
	if (tok_is(t, "NODE"))
		return LV_NODE;
	if (tok_is(t, "SYS") || tok_is(t, "SOC"))
		return LV_SYS;
	if (t->len >= 3 && t->len <= 4 && !memcmp(t->s, "NV", 2)) {
		unsigned v = 0;
		for (size_t k = 2; k < t->len; k++) {
			if (t->s[k] < '0' || t->s[k] > '9')
				return -1;
			v = v * 10 + (unsigned)(t->s[k] - '0');
		}
		*links = v;
		return LV_NV;
	}
	return -1;
}

/* A token of 1 to 6 decimal digits as a number, else -1 (the text is not NUL-terminated). */
static int small_number(const struct tok *t)
{
	if (t->len < 1 || t->len > 6)
		return -1;
	int v = 0;
	for (size_t k = 0; k < t->len; k++) {
		if (t->s[k] < '0' || t->s[k] > '9')
			return -1;
		v = v * 10 + (t->s[k] - '0');
	}
	return v;
}

static int parse_row(struct parse *ps, const struct line *l, unsigned d)
{
	const char *p = l->b;
	struct tok t;
	int r = next_tok(ps, l, &p, &t);
	if (r < 0)
		return TP_EPARSE;
	const struct tok *want = &ps->label[d];
	if (r == 0 || t.len != want->len || memcmp(t.s, want->s, want->len))
		return fail(ps->errbuf, ps->errlen, TP_EPARSE,
		            "line %u, column %zu: expected the row of %.*s (the header's column %u), "
		            "got '%.*s'",
		            l->no, r ? t.col : 1, (int)want->len, want->s, d + 1,
		            r ? (int)(t.len > 40 ? 40 : t.len) : 0, r ? t.s : "");
	ps->row_line[d] = l->no;
	for (unsigned j = 0; j < ps->ndev; j++) {
		r = next_tok(ps, l, &p, &t);
		if (r < 0)
			return TP_EPARSE;
		if (r == 0)
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u: the row of %.*s has %u entries, the header %u GPU and NIC "
			            "columns",
			            l->no, (int)want->len, want->s, j, ps->ndev);
		unsigned links;
		int lv = entry_level(&t, &links);
		if (lv < 0)
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: '%.*s' is not a topology entry (X, NV#, PIX, "
			            "PXB, PHB, NODE, SYS)",
			            l->no, t.col, (int)(t.len > 40 ? 40 : t.len), t.s);
		if ((lv == LV_SELF) != (j == d))
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: %s between %.*s and %.*s ('X' is the diagonal "
			            "only)",
			            l->no, t.col, lv == LV_SELF ? "'X'" : "an entry other than 'X'",
			            (int)want->len, want->s, (int)ps->label[j].len, ps->label[j].s);
		if (lv == LV_NV && (d >= ps->ngpu || j >= ps->ngpu))
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: NVLink '%.*s' between %.*s and %.*s (NVLink joins "
			            "GPUs only)",
			            l->no, t.col, (int)t.len, t.s, (int)want->len, want->s,
			            (int)ps->label[j].len, ps->label[j].s);
		if (lv == LV_NV && (links < 1 || links > NVSMI_MAX_LINKS))
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: '%.*s': an NVLink count from 1 to %d", l->no,
			            t.col, (int)t.len, t.s, NVSMI_MAX_LINKS);
		size_t at = (size_t)d * ps->ndev + j, mirror = (size_t)j * ps->ndev + d;
		if (j < d && (ps->lv[mirror] != lv || ps->nv[mirror] != links))
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: %.*s -> %.*s is '%.*s' but %.*s -> %.*s (line %u) "
			            "is '%s%.0u': the matrix is not symmetric",
			            l->no, t.col, (int)want->len, want->s, (int)ps->label[j].len,
			            ps->label[j].s, (int)t.len, t.s, (int)ps->label[j].len, ps->label[j].s,
			            (int)want->len, want->s, ps->row_line[j], level_name[ps->lv[mirror]],
			            ps->nv[mirror]);
		ps->lv[at] = (unsigned char)lv;
		ps->nv[at] = (unsigned char)links;
	}
	/* GPU rows end with the affinity columns; only a NUMA Affinity of one number is read */
	unsigned extra = 0;
	if (d < ps->ngpu)
		ps->gpu_numa[d] = -1;
	while ((r = next_tok(ps, l, &p, &t)) == 1) {
		if (d >= ps->ngpu || extra >= ps->nextra)
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: '%.*s' after the last column of the header", l->no,
			            t.col, (int)(t.len > 40 ? 40 : t.len), t.s);
		if (ps->extra_kind[extra++] == 1)
			ps->gpu_numa[d] = small_number(&t);
	}
	return r < 0 ? TP_EPARSE : 0;
}

/* ---- after the rows: Legend and NIC Legend -------------------------------------------------- */

enum section { SEC_NONE, SEC_LEGEND, SEC_NICS };

static int parse_nic_legend(struct parse *ps, const struct line *l)
{
	const char *p = l->b;
	struct tok key, name, more;
	if (next_tok(ps, l, &p, &key) < 0)
		return TP_EPARSE;
	int r = next_tok(ps, l, &p, &name);
	if (r < 0)
		return TP_EPARSE;
	unsigned k = 0;
	bool ok = key.len > 4 && !memcmp(key.s, "NIC", 3) && key.s[key.len - 1] == ':' && r == 1;
	for (size_t i = 3; ok && i + 1 < key.len; i++) {
		ok = key.s[i] >= '0' && key.s[i] <= '9' && k < 100000;
		k = k * 10 + (unsigned)(key.s[i] - '0');
	}
	if (!ok)
		return fail(ps->errbuf, ps->errlen, TP_EPARSE,
		            "line %u, column %zu: expected 'NIC<k>: <name>' in the NIC Legend", l->no,
		            key.col);
	char label[16];
	snprintf(label, sizeof label, "NIC%u", k);
	unsigned nic = ps->nnic;
	for (unsigned i = 0; i < ps->nnic; i++)
		if (tok_is(&ps->label[ps->ngpu + i], label))
			nic = i;
	if (nic == ps->nnic)
		return fail(ps->errbuf, ps->errlen, TP_EPARSE,
		            "line %u, column %zu: the NIC Legend names %s, which is not a column", l->no,
		            key.col, label);
	if (ps->nic_name[nic][0])
		return fail(ps->errbuf, ps->errlen, TP_EPARSE,
		            "line %u, column %zu: %s is named twice in the NIC Legend", l->no, key.col,
		            label);
	if ((r = next_tok(ps, l, &p, &more)) != 0)
		return r < 0 ? TP_EPARSE
		             : fail(ps->errbuf, ps->errlen, TP_EPARSE,
		                    "line %u, column %zu: more than one name for %s", l->no, more.col,
		                    label);
	if (name.len > TP_MAX_NAME)
		return fail(ps->errbuf, ps->errlen, TP_EPARSE,
		            "line %u, column %zu: a NIC name longer than %d bytes", l->no, name.col,
		            TP_MAX_NAME);
	memcpy(ps->nic_name[nic], name.s, name.len);
	ps->nic_name[nic][name.len] = '\0';
	return 0;
}

static int parse_tail(struct parse *ps, struct line *l, const char **p, const char *end)
{
	enum section sec = SEC_NONE;
	while (next_line(p, end, l)) {
		if (line_blank(l))
			continue;
		const char *q = l->b;
		struct tok t;
		if (next_tok(ps, l, &q, &t) < 0)
			return TP_EPARSE;
		if (tok_is(&t, "Legend:") && q == l->e) {
			sec = SEC_LEGEND;
			continue;
		}
		if (tok_is(&t, "NIC")) {
			struct tok t2;
			int r = next_tok(ps, l, &q, &t2);
			if (r < 0)
				return TP_EPARSE;
			if (r == 1 && tok_is(&t2, "Legend:") && q == l->e) {
				sec = SEC_NICS;
				continue;
			}
		}
		if (sec == SEC_NICS) {
			int rc = parse_nic_legend(ps, l);
			if (rc)
				return rc;
		} else if (sec == SEC_NONE || !is_blank(l->b[0])) {
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u, column %zu: '%.*s' after the matrix (only the Legend and the "
			            "NIC Legend may follow its rows)",
			            l->no, t.col, (int)(t.len > 40 ? 40 : t.len), t.s);
		}
	}
	return 0;
}

/* ---- from levels to switches, host bridges, NUMA nodes ------------------------------------ */

static unsigned uf_find(unsigned *up, unsigned x)
{
	while (up[x] != x)
		x = up[x] = up[up[x]];
	return x;
}

/* Join every pair at `level` or closer; the smallest member becomes each class's root. */
static void uf_classes(const struct parse *ps, unsigned *up, int level)
{
	for (unsigned i = 0; i < ps->ndev; i++)
		up[i] = i;
	for (unsigned i = 0; i < ps->ndev; i++)
		for (unsigned j = i + 1; j < ps->ndev; j++) {
			int lv = ps->lv[(size_t)i * ps->ndev + j];
			if (lv >= LV_PIX && lv <= level) {
				unsigned a = uf_find(up, i), b = uf_find(up, j);
				if (a != b)
					up[a > b ? a : b] = a < b ? a : b;
			}
		}
	for (unsigned i = 0; i < ps->ndev; i++)
		up[i] = uf_find(up, i);
}

/* The switch of every device (sw[ndev], -1: host bridge), switches in order of their first
 * device, as in the header doc. */
static int build_switches(const struct parse *ps, tp_nodetype *nt, const unsigned *pix,
                          const unsigned *pxb, int *sw)
{
	unsigned size_pix[NVSMI_MAX_DEV] = {0}, size_pxb[NVSMI_MAX_DEV] = {0};
	unsigned npix_in[NVSMI_MAX_DEV] = {0};
	int top[NVSMI_MAX_DEV], leaf[NVSMI_MAX_DEV];
	for (unsigned i = 0; i < ps->ndev; i++) {
		size_pix[pix[i]]++;
		size_pxb[pxb[i]]++;
		if (pix[i] == i)
			npix_in[pxb[i]]++;
		top[i] = leaf[i] = -2; /* not made yet */
	}
	for (unsigned i = 0; i < ps->ndev; i++) {
		sw[i] = -1;
		if (size_pxb[pxb[i]] < 2)
			continue;
		int rc;
		unsigned id;
		if (top[pxb[i]] == -2) {
			if ((rc = tp_nodetype_add_pcie_switch(nt, -1, &id)))
				return rc;
			top[pxb[i]] = (int)id;
		}
		sw[i] = top[pxb[i]];
		if (npix_in[pxb[i]] < 2 || size_pix[pix[i]] < 2)
			continue; /* one switch for the whole group, or a device on the upper switch */
		if (leaf[pix[i]] == -2) {
			if ((rc = tp_nodetype_add_pcie_switch(nt, top[pxb[i]], &id)))
				return rc;
			leaf[pix[i]] = (int)id;
		}
		sw[i] = leaf[pix[i]];
	}
	return 0;
}

static int build(struct parse *ps, tp_nodetype **out, const tp_allocator *alloc, double link)
{
	unsigned pix[NVSMI_MAX_DEV], pxb[NVSMI_MAX_DEV], phb[NVSMI_MAX_DEV], node[NVSMI_MAX_DEV];
	int sw[NVSMI_MAX_DEV];
	uf_classes(ps, pix, LV_PIX);
	uf_classes(ps, pxb, LV_PXB);
	uf_classes(ps, phb, LV_PHB);
	uf_classes(ps, node, LV_NODE);
	/* A NODE group's NUMA node: the NUMA Affinity of a GPU in it, else an id of its own above
	 * any real one. */
	int numa[NVSMI_MAX_DEV];
	for (unsigned i = 0; i < ps->ndev; i++)
		numa[i] = (1 << 24) + (int)node[i];
	for (unsigned g = ps->ngpu; g-- > 0;)
		if (ps->gpu_numa[g] >= 0)
			numa[node[g]] = ps->gpu_numa[g];
	for (unsigned i = 0; i < ps->ndev; i++)
		numa[i] = numa[node[i]];
	tp_nodetype *nt = NULL;
	int rc = tp_nodetype_create(&nt, ps->ngpu, alloc);
	if (rc)
		return fail(ps->errbuf, ps->errlen, rc, "out of memory creating a node type of %u GPUs",
		            ps->ngpu);
	const char *what = "the PCIe switches";
	rc = build_switches(ps, nt, pix, pxb, sw);
	for (unsigned g = 0; g < ps->ngpu && !rc; g++) {
		what = "a GPU";
		rc = tp_nodetype_set_gpu_switch(nt, g, sw[g]);
		if (!rc)
			rc = tp_nodetype_set_gpu_locality(nt, g, -1, numa[g], (int)phb[g]);
	}
	for (unsigned i = 0; i < ps->nnic && !rc; i++) {
		unsigned d = ps->ngpu + i;
		char name[TP_MAX_NAME + 1];
		if (ps->nic_name[i][0])
			memcpy(name, ps->nic_name[i], sizeof name);
		else
			snprintf(name, sizeof name, "%.*s", (int)ps->label[d].len, ps->label[d].s);
		what = "a NIC";
		rc = tp_nodetype_add_nic(nt, name, sw[d], 0.0, NULL);
		if (!rc)
			rc = tp_nodetype_set_nic_kind(nt, i, TP_NIC_RDMA);
		if (!rc)
			rc = tp_nodetype_set_nic_locality(nt, i, -1, numa[d], (int)phb[d]);
	}
	for (unsigned x = 0; x < ps->ngpu && !rc; x++)
		for (unsigned y = x + 1; y < ps->ngpu && !rc; y++) {
			unsigned links = ps->nv[(size_t)x * ps->ndev + y];
			what = "the NVLink figures";
			if (links && links * link > NVSMI_MAX_PAIR_GBPS) {
				tp_nodetype_destroy(nt);
				return fail(ps->errbuf, ps->errlen, TP_EPARSE,
				            "line %u: GPU%u - GPU%u: NV%u at %g GB/s per link is %g GB/s, "
				            "above the %.0f GB/s believed",
				            ps->row_line[y], x, y, links, link, links * link,
				            NVSMI_MAX_PAIR_GBPS);
			}
			if (links)
				rc = tp_nodetype_set_nvlink(nt, x, y, links * link);
		}
	if (rc) {
		if (rc == TP_ENOMEM)
			fail(ps->errbuf, ps->errlen, rc, "out of memory adding %s", what);
		else
			fail(ps->errbuf, ps->errlen, rc, "%s: %s", what, tp_nodetype_errmsg(nt));
		tp_nodetype_destroy(nt);
		return rc;
	}
	*out = nt;
	return 0;
}

/* ---- the entry point ----------------------------------------------------------------------- */

static int parse_text(struct parse *ps, const char *text, size_t len)
{
	const char *p = text, *end = text + len;
	struct line l = {NULL, NULL, 0};
	bool got = false;
	while ((got = next_line(&p, end, &l)) && line_blank(&l))
		;
	if (!got)
		return fail(ps->errbuf, ps->errlen, TP_EPARSE, "the text has only blank lines");
	int rc = parse_header(ps, &l);
	if (rc)
		return rc;
	size_t nn = (size_t)ps->ndev * ps->ndev;
	ps->lv = tp_calloc(ps->a, nn, 1);
	ps->nv = tp_calloc(ps->a, nn, 1);
	ps->row_line = tp_calloc(ps->a, ps->ndev, sizeof *ps->row_line);
	ps->nic_name = tp_calloc(ps->a, ps->nnic ? ps->nnic : 1, sizeof *ps->nic_name);
	if (!ps->lv || !ps->nv || !ps->row_line || !ps->nic_name)
		return fail(ps->errbuf, ps->errlen, TP_ENOMEM, "out of memory reading the matrix");
	for (unsigned d = 0; d < ps->ndev; d++) {
		if (!next_line(&p, end, &l) || line_blank(&l))
			return fail(ps->errbuf, ps->errlen, TP_EPARSE,
			            "line %u: the matrix ends before the row of %.*s (%u rows of %u)",
			            l.no, (int)ps->label[d].len, ps->label[d].s, d, ps->ndev);
		if ((rc = parse_row(ps, &l, d)))
			return rc;
	}
	return parse_tail(ps, &l, &p, end);
}

int tp_nodetype_from_nvsmi_topo(tp_nodetype **out, const char *text, size_t len,
                                const tp_nvsmi_options *opts, const tp_allocator *alloc,
                                char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		errbuf[0] = '\0';
	if (!out)
		return fail(errbuf, errlen, TP_EINVAL, "out is NULL");
	*out = NULL;
	if (!text)
		return fail(errbuf, errlen, TP_EINVAL, "text is NULL");
	if (!tp_alloc_valid(alloc))
		return fail(errbuf, errlen, TP_EINVAL, "alloc lacks a function");
	tp_nvsmi_options o = TP_NVSMI_OPTIONS_INIT;
	if (opts) {
		if (opts->version != TP_NVSMI_OPTIONS_VERSION)
			return fail(errbuf, errlen, TP_EINVAL, "opts.version %u is not %d", opts->version,
			            TP_NVSMI_OPTIONS_VERSION);
		o = *opts;
	}
	if (!(o.nvlink_link_gbps > 0) || !isfinite(o.nvlink_link_gbps) ||
	    o.nvlink_link_gbps > NVSMI_MAX_PAIR_GBPS / NVSMI_MAX_LINKS)
		return fail(errbuf, errlen, TP_EINVAL,
		            "opts.nvlink_link_gbps %g is not a number > 0 and up to %g", o.nvlink_link_gbps,
		            NVSMI_MAX_PAIR_GBPS / NVSMI_MAX_LINKS);
	if (len > NVSMI_MAX_BYTES)
		return fail(errbuf, errlen, TP_ELIMIT, "the text has %zu bytes (at most %d)", len,
		            NVSMI_MAX_BYTES);
	while (len > 0 && text[len - 1] == '\0')
		len--;
	if (len == 0)
		return fail(errbuf, errlen, TP_EPARSE, "the text is empty");
	const char *nul = memchr(text, '\0', len);
	if (nul)
		return fail(errbuf, errlen, TP_EPARSE,
		            "the text has a NUL byte at offset %zu, before its end (%zu bytes)",
		            (size_t)(nul - text), len);
	tp_allocator a = tp_alloc_resolve(alloc);
	struct parse *ps = tp_calloc(&a, 1, sizeof *ps);
	if (!ps)
		return fail(errbuf, errlen, TP_ENOMEM, "out of memory reading the text");
	ps->a = &a;
	ps->errbuf = errbuf;
	ps->errlen = errlen;
	int rc = parse_text(ps, text, len);
	if (!rc)
		rc = build(ps, out, alloc, o.nvlink_link_gbps);
	tp_free(&a, ps->lv);
	tp_free(&a, ps->nv);
	tp_free(&a, ps->row_line);
	tp_free(&a, ps->nic_name);
	tp_free(&a, ps);
	return rc;
}

int tp_nvsmi_options_init(tp_nvsmi_options *o, unsigned version)
{
	static const tp_nvsmi_options init = TP_NVSMI_OPTIONS_INIT;
	return tp_options_init(o, version == TP_NVSMI_OPTIONS_VERSION ? sizeof init : 0, &init, version);
}
