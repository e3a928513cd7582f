/* SPDX-License-Identifier: MIT */
/*
 * The placement oracle of test_place_oracle.c: random cases, an independent checker of the hard
 * rules, and two exhaustive engines (see oracle.h). Written from spec/scenario-v1.md and the
 * public header only.
 */
#include "oracle.h"

#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ------------------------------------------------------------------------------------------ */
/* Random choices */

static unsigned rnd(uint64_t *s, unsigned n)
{
	return tp_test_below(s, n);
}

static bool chance(uint64_t *s, unsigned pct)
{
	return rnd(s, 100) < pct;
}

static unsigned range(uint64_t *s, unsigned lo, unsigned hi)
{
	return lo + rnd(s, hi - lo + 1);
}

/* ------------------------------------------------------------------------------------------ */
/* Names */

static const char *const level_names[3][3] = {
	{"node", NULL, NULL},
	{"rack", "node", NULL},
	{"block", "rack", "node"},
};

const char *or_level_name(const struct or_case *k, int level)
{
	if (level == OR_FD)
		return "power";
	if (level < 0 || (unsigned)level >= k->L)
		return NULL;
	return level_names[k->L - 1][level];
}

const char *or_tenant_name(int tenant, bool explicit_default)
{
	static const char *const names[OR_NTENANTS] = {"default", "t1", "t2"};
	if (tenant == 0 && !explicit_default)
		return NULL;
	return names[tenant];
}

static const char *tenant_label(int tenant)
{
	return or_tenant_name(tenant, true);
}

static const char *const model_names[2] = {"A", "B"};
static const char *const fd_names[2] = {"pdu-a", "pdu-b"};

static void node_name(unsigned node, char *buf, size_t len)
{
	snprintf(buf, len, "n%u", node);
}

/* A domain's own name: the level's initial and its index among siblings ("r1"). */
static void dom_name(const struct or_case *k, unsigned level, unsigned d, char *buf, size_t len)
{
	snprintf(buf, len, "%c%u", or_level_name(k, (int)level)[0], (unsigned)k->dsib[level][d]);
}

static int node_level(const struct or_case *k)
{
	return (int)k->L - 1;
}

/* ------------------------------------------------------------------------------------------ */
/* Devices and domains */

uint32_t or_node_first_dev(const struct or_case *k, unsigned node)
{
	uint32_t first = 0;
	for (unsigned n = 0; n < node; n++)
		first += k->gpus[n];
	return first;
}

int or_device_state(const struct or_case *k, unsigned node, unsigned idx, int *job)
{
	*job = k->held[node][idx];
	if (*job >= 0)
		return TP_DEVICE_HELD;
	if (k->down[node][idx])
		return TP_DEVICE_DOWN;
	return k->cord[node][idx] ? TP_DEVICE_CORDONED : TP_DEVICE_FREE;
}

/* Split a device id into node and index; false for an id past the end. */
static bool dev_split(const struct or_case *k, uint32_t dev, unsigned *node, unsigned *idx)
{
	for (unsigned n = 0; n < k->nnodes; n++) {
		if (dev < k->gpus[n]) {
			*node = n;
			*idx = dev;
			return true;
		}
		dev -= k->gpus[n];
	}
	return false;
}

/* The domain of a node at a tree level, or its failure domain of kind "power" (a node in no
 * listed domain is a domain of its own). */
static int dom_at(const struct or_case *k, unsigned node, int level)
{
	if (level == OR_FD)
		return k->fd[node] >= 0 ? k->fd[node] : 2 + (int)node;
	return k->dom[node][level];
}

static unsigned ndom_at(const struct or_case *k, int level)
{
	return level == OR_FD ? 2 + k->nnodes : k->ndom[level];
}

static double dev_perf(const struct or_case *k, unsigned node, unsigned idx)
{
	return k->perf_list[node] ? k->perf[node][idx] : k->perf[node][0];
}

/* select: model, min_perf, min_memory_gb, nodes. */
static bool dev_matches(const struct or_case *k, unsigned node, unsigned idx)
{
	const struct or_req *r = &k->req;
	if (r->sel_model >= 0 && k->model[node] != r->sel_model)
		return false;
	if (r->min_perf > 0 && dev_perf(k, node, idx) < r->min_perf)
		return false;
	if (r->min_mem > 0 && (k->mem[node] <= 0 || k->mem[node] < r->min_mem))
		return false;
	if (r->nsel_nodes) {
		bool in = false;
		for (unsigned i = 0; i < r->nsel_nodes; i++)
			in = in || r->sel_nodes[i] == node;
		if (!in)
			return false;
	}
	return true;
}

/* Mode 0 is the cluster as it is; mode 1 is the emptier cluster of the spec's "infeasible":
 * every running job gone except the colocate target. */
static bool job_active(const struct or_case *k, int job, int mode)
{
	return mode == 0 || job == k->req.coloc_job;
}

static bool dev_held(const struct or_case *k, unsigned node, unsigned idx, int mode)
{
	int j = k->held[node][idx];
	return j >= 0 && job_active(k, j, mode);
}

/* Free (in the mode), healthy, uncordoned and matching. */
static bool dev_usable(const struct or_case *k, unsigned node, unsigned idx, int mode)
{
	return !k->down[node][idx] && !k->cord[node][idx] && !dev_held(k, node, idx, mode) &&
	       dev_matches(k, node, idx);
}

/* Whether a job has a device in the domain of level `level` that holds `node`. */
static bool job_in_domain_of(const struct or_case *k, int j, int level, unsigned node)
{
	const struct or_job *jb = &k->job[j];
	for (unsigned i = 0; i < jb->n; i++)
		if (dom_at(k, jb->node[i], level) == dom_at(k, node, level))
			return true;
	return false;
}

/* exclusive, the exclusive shapes of other tenants' jobs, and colocate, all decided per node. */
static bool node_allowed(const struct or_case *k, unsigned node, int mode)
{
	const struct or_req *r = &k->req;
	for (unsigned j = 0; j < k->njobs; j++) {
		if (!job_active(k, (int)j, mode) || k->job[j].tenant == r->tenant)
			continue;
		if (r->excl >= 0 && job_in_domain_of(k, (int)j, r->excl, node))
			return false;
		if (k->job[j].excl >= 0 && job_in_domain_of(k, (int)j, k->job[j].excl, node))
			return false;
	}
	if (r->coloc_job >= 0 && !job_in_domain_of(k, r->coloc_job, r->coloc_l, node))
		return false;
	return true;
}

static void compute_avail(const struct or_case *k, int mode, unsigned *avail)
{
	for (unsigned n = 0; n < k->nnodes; n++) {
		avail[n] = 0;
		if (!node_allowed(k, n, mode))
			continue;
		for (unsigned i = 0; i < k->gpus[n]; i++)
			avail[n] += dev_usable(k, n, i, mode);
	}
}

/* A cap on groups per domain whose count depends on the rank order: a group may straddle
 * several domains of the cap level. */
static bool gcap_order_dependent(const struct or_case *k, unsigned i)
{
	const struct or_req *r = &k->req;
	if (!r->cgrp[i] || r->g <= 1)
		return false;
	if (r->cl[i] == OR_FD)
		return r->gl != node_level(k);
	return r->cl[i] > r->gl;
}

/* ------------------------------------------------------------------------------------------ */
/* Generation */

struct fan {
	unsigned lo[OR_MAXL], hi[OR_MAXL];
};

static const struct fan fans[3][3] = {
	/* tiny */
	{{{1, 0, 0}, {6, 0, 0}}, {{1, 1, 0}, {3, 3, 0}}, {{1, 1, 1}, {2, 2, 3}}},
	/* medium */
	{{{2, 0, 0}, {16, 0, 0}}, {{1, 1, 0}, {4, 5, 0}}, {{1, 1, 1}, {3, 3, 4}}},
	/* large */
	{{{8, 0, 0}, {64, 0, 0}}, {{2, 2, 0}, {8, 10, 0}}, {{1, 1, 2}, {4, 4, 8}}},
};

/* Create the children (domains of level l) of domain `parent` of level l-1. */
static void gen_children(struct or_case *k, uint64_t *s, unsigned l, unsigned parent,
                         uint8_t *path, const struct fan *f, const unsigned *regular, bool *over)
{
	/* l < k->L <= OR_MAXL always; said so that an optimising compiler, which cannot follow
	 * the recursion, does not warn of indices past the arrays */
	if (l >= k->L || l >= OR_MAXL)
		return;
	unsigned n = regular[l] ? regular[l] : range(s, f->lo[l], f->hi[l]);
	for (unsigned i = 0; i < n; i++) {
		if (l == k->L - 1) {
			if (k->nnodes >= OR_MAXN) {
				*over = true;
				return;
			}
			unsigned node = k->nnodes++;
			for (unsigned x = 0; x < l; x++)
				k->dom[node][x] = path[x];
			k->dom[node][l] = (uint8_t)node;
			k->dparent[l][node] = (uint8_t)parent;
			k->dsib[l][node] = (uint8_t)i;
			continue;
		}
		if (k->ndom[l] >= OR_MAXD) {
			*over = true;
			return;
		}
		unsigned d = k->ndom[l]++;
		k->dparent[l][d] = (uint8_t)parent;
		k->dsib[l][d] = (uint8_t)i;
		path[l] = (uint8_t)d;
		gen_children(k, s, l + 1, d, path, f, regular, over);
	}
}

static void gen_tree(struct or_case *k, uint64_t *s)
{
	static const unsigned maxn[3] = {6, 16, 64};
	unsigned p = rnd(s, 100);
	const unsigned L = k->kind == OR_TINY ? (p < 15 ? 1 : p < 55 ? 2 : 3)
	                                      : (p < 5 ? 1 : p < 40 ? 2 : 3);
	k->L = L;
	const struct fan *f = &fans[k->kind][L - 1];
	bool regular = chance(s, 40);
	for (;;) {
		unsigned reg[OR_MAXL] = {0};
		uint8_t path[OR_MAXL] = {0};
		bool over = false;
		k->nnodes = 0;
		memset(k->ndom, 0, sizeof k->ndom);
		for (unsigned l = 0; regular && l < L; l++)
			reg[l] = range(s, f->lo[l], f->hi[l]);
		gen_children(k, s, 0, 0, path, f, reg, &over);
		k->ndom[L - 1] = k->nnodes;
		if (!over && k->nnodes >= 1 && k->nnodes <= maxn[k->kind])
			break;
	}
}

static void gen_nodes(struct or_case *k, uint64_t *s)
{
	static const unsigned gchoice[2][4] = {{1, 2, 3, 4}, {1, 2, 4, 8}};
	const unsigned *gc = gchoice[k->kind != OR_TINY];
	unsigned gmax = k->kind == OR_TINY ? 4 : 8;
	bool uniform = chance(s, 55);
	unsigned ug = gc[rnd(s, 4)];
	unsigned model_mode = rnd(s, 100);
	static const double perfs[3] = {0.8, 1.0, 1.2};
	for (unsigned n = 0; n < k->nnodes; n++) {
		k->gpus[n] = uniform ? ug : range(s, 1, gmax);
		if (model_mode < 60)
			k->model[n] = 0;
		else
			k->model[n] = chance(s, 60) ? 0 : chance(s, 60) ? 1 : -1;
		unsigned p = rnd(s, 100);
		k->mem[n] = p < 70 ? 80.0 : p < 90 ? 40.0 : 0.0;
		p = rnd(s, 100);
		k->perf_list[n] = p >= 90;
		k->perf[n][0] = p < 80 ? 1.0 : perfs[rnd(s, 3)];
		for (unsigned i = 0; i < k->gpus[n] && k->perf_list[n]; i++)
			k->perf[n][i] = perfs[rnd(s, 3)];
		k->fd[n] = -1;
	}
	k->has_fd = k->kind == OR_TINY && chance(s, 35);
	bool listed = false;
	for (unsigned n = 0; n < k->nnodes && k->has_fd; n++) {
		k->fd[n] = (int)rnd(s, 3) - 1;
		listed = listed || k->fd[n] >= 0;
	}
	/* The C API declares a kind by listing a node in it. */
	if (k->has_fd && !listed)
		k->fd[rnd(s, k->nnodes)] = 0;
}

/* Take some free devices of one node for a job. */
static void job_take_node(struct or_case *k, uint64_t *s, struct or_job *jb, unsigned j,
                          unsigned node)
{
	uint8_t freeidx[OR_MAXG];
	unsigned nfree = 0;
	for (unsigned i = 0; i < k->gpus[node]; i++)
		if (k->held[node][i] < 0)
			freeidx[nfree++] = (uint8_t)i;
	if (!nfree)
		return;
	unsigned take = chance(s, 50) ? nfree : range(s, 1, nfree);
	bool lowest = chance(s, 50);
	for (unsigned t = 0; t < take && jb->n < OR_MAXJD; t++) {
		unsigned pick = lowest ? 0 : rnd(s, nfree);
		unsigned idx = freeidx[pick];
		memmove(&freeidx[pick], &freeidx[pick + 1], nfree - pick - 1);
		nfree--;
		k->held[node][idx] = (int8_t)j;
		jb->node[jb->n] = (uint8_t)node;
		jb->idx[jb->n] = (uint8_t)idx;
		jb->n++;
	}
}

static void gen_state(struct or_case *k, uint64_t *s)
{
	static const unsigned maxjobs[3] = {4, 7, 12};
	memset(k->held, -1, sizeof k->held);
	unsigned want = rnd(s, maxjobs[k->kind] + 1);
	for (unsigned t = 0; t < want; t++) {
		struct or_job *jb = &k->job[k->njobs];
		memset(jb, 0, sizeof *jb);
		unsigned anchor = rnd(s, k->nnodes), span = range(s, 1, 3);
		for (unsigned x = 0; x < span && anchor + x < k->nnodes; x++)
			job_take_node(k, s, jb, k->njobs, anchor + x);
		if (!jb->n)
			continue;
		jb->tenant = (int)rnd(s, OR_NTENANTS);
		jb->tenant_explicit = jb->tenant == 0 && chance(s, 30);
		jb->excl = chance(s, 20) ? (int)rnd(s, k->L) : -1;
		k->njobs++;
	}
	for (unsigned n = 0; n < k->nnodes; n++) {
		bool dn = chance(s, 3), cn = chance(s, 3);
		for (unsigned i = 0; i < k->gpus[n]; i++) {
			k->down[n][i] = dn || chance(s, 4);
			k->cord[n][i] = cn || chance(s, 4);
		}
	}
}

static unsigned max_gpus(const struct or_case *k)
{
	unsigned m = 0;
	for (unsigned n = 0; n < k->nnodes; n++)
		m = k->gpus[n] > m ? k->gpus[n] : m;
	return m;
}

static void gen_slices(struct or_case *k, uint64_t *s)
{
	struct or_req *r = &k->req;
	int lo = r->required >= 0 ? r->required : 0, hi = r->gl;
	if (lo > hi)
		return;
	r->nslices = (hi > lo && chance(s, 40)) ? 2 : 1;
	unsigned inner = r->g * range(s, 1, 3);
	if (hi == node_level(k) && inner > max_gpus(k))
		inner = r->g;
	if (r->nslices == 1) {
		r->sl[0] = lo + (int)rnd(s, (unsigned)(hi - lo + 1));
		r->ss[0] = inner;
	} else {
		r->sl[0] = lo + (int)rnd(s, (unsigned)(hi - lo));
		r->sl[1] = r->sl[0] + 1 + (int)rnd(s, (unsigned)(hi - r->sl[0]));
		r->ss[1] = inner;
		r->ss[0] = inner * range(s, 1, 3);
	}
}

/* Healthy, uncordoned devices of a domain (level -1: the cluster). */
static unsigned healthy_in(const struct or_case *k, int level, unsigned d)
{
	unsigned x = 0;
	for (unsigned n = 0; n < k->nnodes; n++)
		for (unsigned i = 0; i < k->gpus[n] && (level < 0 || k->dom[n][level] == d); i++)
			x += !k->down[n][i] && !k->cord[n][i];
	return x;
}

/* A count of the right size for the part of the cluster the request may use, so that most
 * cases are close calls rather than obviously infeasible. */
static void gen_count(struct or_case *k, uint64_t *s)
{
	struct or_req *r = &k->req;
	unsigned maxc = k->kind == OR_LARGE ? 64 : OR_MAXC;
	int scope = r->required;
	unsigned d = 0;
	if (r->coloc_job >= 0 && r->coloc_l >= scope) {
		scope = r->coloc_l;
		d = k->dom[k->job[r->coloc_job].node[0]][scope];
	} else if (scope >= 0) {
		d = rnd(s, k->ndom[scope]);
	}
	unsigned cap = healthy_in(k, scope, d);
	if (r->coloc_job >= 0)
		cap -= cap > k->job[r->coloc_job].n ? k->job[r->coloc_job].n : cap;
	cap = cap ? cap : 1;
	if (r->nslices && r->ss[0] > maxc)
		r->nslices = 0;
	unsigned unit = r->nslices ? r->ss[0] : r->g;
	unsigned p = rnd(s, 100), target;
	if (p < 45)
		target = range(s, 1, cap / 3 > 1 ? cap / 3 : 1);
	else if (p < 85)
		target = range(s, 1, cap);
	else
		target = range(s, 1, cap + cap / 3 + 1);
	unsigned mult = target / unit ? target / unit : 1;
	while (mult > 1 && unit * mult > maxc)
		mult--;
	r->count = unit * mult;
}

static void gen_caps(struct or_case *k, uint64_t *s)
{
	struct or_req *r = &k->req;
	r->ncaps = chance(s, 20) ? 2 : 1;
	for (unsigned i = 0; i < r->ncaps; i++) {
		r->cl[i] = (k->has_fd && chance(s, 35)) ? OR_FD : (int)rnd(s, k->L);
		if (i == 1 && r->cl[1] == r->cl[0]) {
			r->ncaps = 1;
			break;
		}
		unsigned groups = r->count / r->g;
		if (chance(s, 50))
			r->cdev[i] = range(s, 1, r->count);
		else
			r->cgrp[i] = range(s, 1, groups);
		/* Order-dependent group caps only where brute force can search the orders. */
		bool fd_orderdep = r->cl[i] == OR_FD && gcap_order_dependent(k, i);
		if (gcap_order_dependent(k, i) && (fd_orderdep || k->kind != OR_TINY)) {
			r->cdev[i] = range(s, 1, r->count);
			r->cgrp[i] = 0;
		}
	}
}

static void gen_select(struct or_case *k, uint64_t *s)
{
	static const double perfs[4] = {0.9, 1.0, 1.0, 1.1}, mems[3] = {40.0, 60.0, 80.0};
	struct or_req *r = &k->req;
	if (chance(s, 10)) {
		int m = k->model[rnd(s, k->nnodes)];
		r->sel_model = m >= 0 ? m : (int)rnd(s, 2);
	}
	if (chance(s, 8))
		r->min_perf = perfs[rnd(s, 4)];
	if (chance(s, 8))
		r->min_mem = mems[rnd(s, 3)];
	if (chance(s, 8)) {
		for (unsigned n = 0; n < k->nnodes; n++)
			if (chance(s, 60))
				r->sel_nodes[r->nsel_nodes++] = (uint8_t)n;
		if (!r->nsel_nodes)
			r->sel_nodes[r->nsel_nodes++] = (uint8_t)rnd(s, k->nnodes);
	}
}

static void gen_request(struct or_case *k, uint64_t *s)
{
	struct or_req *r = &k->req;
	int N = node_level(k);
	r->required = r->preferred = r->spread_l = r->coloc_job = r->coloc_l = r->excl = -1;
	r->sel_model = -1;
	r->tenant = (int)rnd(s, OR_NTENANTS);
	r->tenant_explicit = r->tenant == 0 && chance(s, 30);
	r->g = 1;
	r->gl = N;
	if (chance(s, 45)) {
		static const unsigned gs[6] = {2, 2, 4, 4, 3, 8};
		r->g = gs[rnd(s, 6)];
		r->gl = chance(s, 70) ? N : (int)rnd(s, k->L);
		if (r->gl == N && r->g > max_gpus(k))
			r->g = max_gpus(k) >= 2 ? 2 : 1;
		r->group_given = true;
	} else if (chance(s, 15)) {
		r->gl = (int)rnd(s, k->L);
		r->group_given = true;
	}
	unsigned mode = rnd(s, 100);
	bool slices = false;
	if (mode < 25) {
		/* unconstrained */
	} else if (mode < 50) {
		r->required = (int)rnd(s, k->L);
	} else if (mode < 75 || N == 0) {
		r->preferred = (int)rnd(s, k->L);
	} else if (mode < 87) {
		r->required = (int)rnd(s, (unsigned)N);
		r->preferred = r->required + 1 + (int)rnd(s, (unsigned)(N - r->required));
	} else {
		slices = true;
	}
	if (mode >= 25 && chance(s, 30))
		slices = true;
	if (slices)
		gen_slices(k, s);
	if (k->njobs && chance(s, 12)) {
		r->coloc_job = (int)rnd(s, k->njobs);
		r->coloc_l = (int)rnd(s, k->L);
	}
	gen_count(k, s);
	r->balanced = chance(s, 30);
	if (chance(s, 22))
		gen_caps(k, s);
	if (chance(s, 15)) {
		r->spread_l = (k->has_fd && chance(s, 35)) ? OR_FD : (int)rnd(s, k->L);
		r->spread_m = range(s, 2, 3);
	}
	if (chance(s, 15))
		r->excl = (int)rnd(s, k->L);
	gen_select(k, s);
}

void or_generate(struct or_case *k, uint64_t seed)
{
	memset(k, 0, sizeof *k);
	k->seed = seed;
	uint64_t s = seed ^ 0x5eed0f0ac1e5ULL;
	unsigned p = rnd(&s, 100);
	k->kind = p < 40 ? OR_TINY : p < 85 ? OR_MEDIUM : OR_LARGE;
	gen_tree(k, &s);
	gen_nodes(k, &s);
	gen_state(k, &s);
	gen_request(k, &s);
}

/* ------------------------------------------------------------------------------------------ */
/* Building the library's objects */

static int build_topology(const struct or_case *k, const tp_allocator *a, tp_topology **t,
                          char *why, size_t len)
{
	tp_topology_builder *b = NULL;
	int rc = tp_topology_builder_create(&b, level_names[k->L - 1], k->L, a);
	if (rc) {
		snprintf(why, len, "builder_create: %s", tp_err_name(rc));
		return rc;
	}
	for (unsigned n = 0; n < k->nnodes && !rc; n++) {
		char name[16], pbuf[OR_MAXL][16];
		const char *path[OR_MAXL];
		for (unsigned l = 0; l + 1 < k->L; l++) {
			dom_name(k, l, k->dom[n][l], pbuf[l], sizeof pbuf[l]);
			path[l] = pbuf[l];
		}
		node_name(n, name, sizeof name);
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.model = k->model[n] >= 0 ? model_names[k->model[n]] : NULL;
		o.memory_gb = k->mem[n];
		o.perf = k->perf[n][0];
		o.device_perf = k->perf_list[n] ? k->perf[n] : NULL;
		rc = tp_topology_builder_add_node(b, name, k->L > 1 ? path : NULL, k->gpus[n], &o);
		if (!rc && k->fd[n] >= 0)
			rc = tp_topology_builder_add_failure_domain(b, "power", fd_names[k->fd[n]], name,
			                                            -1);
	}
	for (unsigned d = 0; k->L > 1 && d < k->ndom[0] && !rc; d++)
		if (k->top_gbps[d] > 0) {
			char dn[16];
			dom_name(k, 0, d, dn, sizeof dn);
			rc = tp_topology_builder_set_domain_fabric(b, 0, dn, TP_LINK_IB,
			                                           k->top_gbps[d], 2.0);
		}
	if (!rc)
		rc = tp_topology_build(b, t);
	if (rc)
		snprintf(why, len, "topology: %s: %s", tp_err_name(rc), tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return rc;
}

/* The library numbers nodes and devices in tree order, as the case does; make sure. */
static int check_numbering(const struct or_case *k, const tp_topology *t, char *why, size_t len)
{
	for (unsigned n = 0; n < k->nnodes; n++) {
		char name[16];
		uint32_t id = TP_NONE, first = 0, cnt = 0;
		node_name(n, name, sizeof name);
		if (tp_topology_node_by_name(t, name, &id) || id != n ||
		    tp_topology_domain_devices(t, k->L - 1, id, &first, &cnt) ||
		    first != or_node_first_dev(k, n) || cnt != k->gpus[n]) {
			snprintf(why, len, "node %s: id %u first device %u (%u devices), expected id %u "
			         "first %u (%u)", name, id, first, cnt, n, or_node_first_dev(k, n),
			         k->gpus[n]);
			return TP_ECORRUPT;
		}
	}
	return 0;
}

static int assign_jobs(const struct or_case *k, tp_cluster *c, char *why, size_t len)
{
	for (unsigned j = 0; j < k->njobs; j++) {
		const struct or_job *jb = &k->job[j];
		uint32_t devs[OR_MAXJD];
		char id[16];
		for (unsigned i = 0; i < jb->n; i++)
			devs[i] = or_node_first_dev(k, jb->node[i]) + jb->idx[i];
		snprintf(id, sizeof id, "j%u", j);
		tp_request shape = TP_REQUEST_INIT;
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.tenant = or_tenant_name(jb->tenant, jb->tenant_explicit);
		if (jb->excl >= 0) {
			shape.count = jb->n;
			shape.tenant = o.tenant;
			shape.exclusive = or_level_name(k, jb->excl);
			o.shape = &shape;
		}
		int rc = tp_cluster_assign(c, id, devs, jb->n, &o);
		if (rc) {
			snprintf(why, len, "assign %s: %s: %s", id, tp_err_name(rc), tp_cluster_errmsg(c));
			return rc;
		}
	}
	return 0;
}

static int mark_devices(const struct or_case *k, tp_cluster *c, char *why, size_t len)
{
	uint32_t down[OR_MAXN * OR_MAXG], cord[OR_MAXN * OR_MAXG];
	size_t nd = 0, nc = 0;
	for (unsigned n = 0; n < k->nnodes; n++) {
		for (unsigned i = 0; i < k->gpus[n]; i++) {
			if (k->down[n][i])
				down[nd++] = or_node_first_dev(k, n) + i;
			if (k->cord[n][i])
				cord[nc++] = or_node_first_dev(k, n) + i;
		}
	}
	int rc = nd ? tp_cluster_set_down(c, down, nd, 1) : 0;
	if (!rc && nc)
		rc = tp_cluster_set_cordoned(c, cord, nc, 1);
	if (rc)
		snprintf(why, len, "down/cordon: %s: %s", tp_err_name(rc), tp_cluster_errmsg(c));
	return rc;
}

int or_build(const struct or_case *k, const tp_allocator *a, tp_topology **t, tp_cluster **c,
             char *why, size_t len)
{
	*t = NULL;
	*c = NULL;
	int rc = build_topology(k, a, t, why, len);
	if (!rc)
		rc = check_numbering(k, *t, why, len);
	if (!rc) {
		rc = tp_cluster_create(c, *t, a);
		if (rc)
			snprintf(why, len, "cluster_create: %s", tp_err_name(rc));
	}
	if (!rc)
		rc = assign_jobs(k, *c, why, len);
	if (!rc)
		rc = mark_devices(k, *c, why, len);
	if (rc) {
		tp_cluster_destroy(*c);
		tp_topology_destroy(*t);
		*c = NULL;
		*t = NULL;
	}
	return rc;
}

void or_request(const struct or_case *k, tp_request *r, struct or_req_store *st)
{
	static const char *const node_names[OR_MAXN] = {
		"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9", "n10", "n11", "n12",
		"n13", "n14", "n15", "n16", "n17", "n18", "n19", "n20", "n21", "n22", "n23", "n24",
		"n25", "n26", "n27", "n28", "n29", "n30", "n31", "n32", "n33", "n34", "n35", "n36",
		"n37", "n38", "n39", "n40", "n41", "n42", "n43", "n44", "n45", "n46", "n47", "n48",
		"n49", "n50", "n51", "n52", "n53", "n54", "n55", "n56", "n57", "n58", "n59", "n60",
		"n61", "n62", "n63"};
	static const char *const job_names[OR_MAXJ] = {"j0", "j1", "j2", "j3", "j4", "j5",
	                                                  "j6", "j7", "j8", "j9", "j10", "j11"};
	const struct or_req *q = &k->req;
	tp_request init = TP_REQUEST_INIT;
	*r = init;
	r->id = "new";
	r->tenant = or_tenant_name(q->tenant, q->tenant_explicit);
	r->count = q->count;
	if (q->group_given) {
		r->group_size = q->g;
		r->group_level = or_level_name(k, q->gl);
	}
	r->required = q->required >= 0 ? or_level_name(k, q->required) : NULL;
	r->preferred = q->preferred >= 0 ? or_level_name(k, q->preferred) : NULL;
	for (unsigned i = 0; i < q->nslices; i++) {
		st->slices[i].level = or_level_name(k, q->sl[i]);
		st->slices[i].size = q->ss[i];
	}
	r->slices = q->nslices ? st->slices : NULL;
	r->nslices = q->nslices;
	r->balanced = q->balanced;
	for (unsigned i = 0; i < q->ncaps; i++) {
		st->caps[i].level = or_level_name(k, q->cl[i]);
		st->caps[i].devices = q->cdev[i];
		st->caps[i].groups = q->cgrp[i];
	}
	r->caps = q->ncaps ? st->caps : NULL;
	r->ncaps = q->ncaps;
	if (q->spread_l != -1) {
		r->spread_level = or_level_name(k, q->spread_l);
		r->spread_min_domains = q->spread_m;
	}
	if (q->coloc_job >= 0) {
		r->colocate_job = job_names[q->coloc_job];
		r->colocate_level = or_level_name(k, q->coloc_l);
	}
	r->exclusive = q->excl >= 0 ? or_level_name(k, q->excl) : NULL;
	r->select_model = q->sel_model >= 0 ? model_names[q->sel_model] : NULL;
	r->select_min_perf = q->min_perf;
	r->select_min_memory_gb = q->min_mem;
	for (unsigned i = 0; i < q->nsel_nodes; i++)
		st->sel_nodes[i] = node_names[q->sel_nodes[i]];
	r->select_nodes = q->nsel_nodes ? st->sel_nodes : NULL;
	r->nselect_nodes = q->nsel_nodes;
}

/* ------------------------------------------------------------------------------------------ */
/* The checker: every hard rule of the spec, on a device list in rank order (the same rules as
 * the conformance checker's valid_placement). */

struct plist {
	unsigned n;
	uint8_t node[OR_MAXN * OR_MAXG];
	uint8_t idx[OR_MAXN * OR_MAXG];
};

#define FAIL(...)                                                                              \
	do {                                                                                       \
		snprintf(why, len, __VA_ARGS__);                                                       \
		return false;                                                                          \
	} while (0)

static bool chunks_in_one_domain(const struct or_case *k, const struct plist *p, unsigned size,
                                 int level, const char *what, char *why, size_t len)
{
	for (unsigned i = 0; size > 1 && i < p->n; i++) {
		if (i % size && dom_at(k, p->node[i], level) != dom_at(k, p->node[i - 1], level))
			FAIL("%s %u (ranks %u-%u) spans several %s domains", what, i / size,
			     i / size * size, i / size * size + size - 1, or_level_name(k, level));
	}
	return true;
}

/* Devices per domain of a level (or failure-domain kind), and how many domains are used. */
static unsigned per_domain(const struct or_case *k, const struct plist *p, int level,
                           unsigned *cnt)
{
	unsigned used = 0;
	memset(cnt, 0, sizeof(unsigned) * ndom_at(k, level));
	for (unsigned i = 0; i < p->n; i++)
		used += cnt[dom_at(k, p->node[i], level)]++ == 0;
	return used;
}

static bool check_devices(const struct or_case *k, const struct plist *p, int mode, char *why,
                          size_t len)
{
	bool seen[OR_MAXN][OR_MAXG] = {{false}};
	if (p->n != k->req.count)
		FAIL("%u devices placed, count is %u", p->n, k->req.count);
	for (unsigned i = 0; i < p->n; i++) {
		unsigned n = p->node[i], x = p->idx[i];
		if (seen[n][x])
			FAIL("device n%u/%u used twice", n, x);
		seen[n][x] = true;
		if (k->down[n][x])
			FAIL("device n%u/%u is down", n, x);
		if (k->cord[n][x])
			FAIL("device n%u/%u is cordoned", n, x);
		if (dev_held(k, n, x, mode))
			FAIL("device n%u/%u is held by job j%d", n, x, k->held[n][x]);
		if (!dev_matches(k, n, x))
			FAIL("device n%u/%u does not match select", n, x);
	}
	return true;
}

static bool check_caps(const struct or_case *k, const struct plist *p, bool skip_orderdep,
                       char *why, size_t len)
{
	const struct or_req *r = &k->req;
	unsigned cnt[2 + OR_MAXN];
	for (unsigned c = 0; c < r->ncaps; c++) {
		int lv = r->cl[c];
		if (r->cdev[c]) {
			per_domain(k, p, lv, cnt);
			for (unsigned d = 0; d < ndom_at(k, lv); d++)
				if (cnt[d] > r->cdev[c])
					FAIL("max_per_domain: %s domain %u holds %u devices > %u",
					     or_level_name(k, lv), d, cnt[d], r->cdev[c]);
			continue;
		}
		if (skip_orderdep && gcap_order_dependent(k, c))
			continue;
		/* Groups by rank order: each group counts once in every domain it touches. */
		memset(cnt, 0, sizeof cnt);
		for (unsigned gstart = 0; gstart < p->n; gstart += r->g) {
			bool touched[2 + OR_MAXN] = {false};
			for (unsigned i = gstart; i < gstart + r->g && i < p->n; i++) {
				int d = dom_at(k, p->node[i], lv);
				if (!touched[d])
					cnt[d]++;
				touched[d] = true;
			}
		}
		for (unsigned d = 0; d < ndom_at(k, lv); d++)
			if (cnt[d] > r->cgrp[c])
				FAIL("max_per_domain: %s domain %u holds %u groups > %u",
				     or_level_name(k, lv), d, cnt[d], r->cgrp[c]);
	}
	return true;
}

static bool check_tenancy(const struct or_case *k, const struct plist *p, int mode, char *why,
                          size_t len)
{
	const struct or_req *r = &k->req;
	for (unsigned i = 0; i < p->n; i++) {
		for (unsigned j = 0; j < k->njobs; j++) {
			const struct or_job *jb = &k->job[j];
			if (!job_active(k, (int)j, mode) || jb->tenant == r->tenant)
				continue;
			if (r->excl >= 0 && job_in_domain_of(k, (int)j, r->excl, p->node[i]))
				FAIL("exclusive %s: the domain of n%u holds job j%u of tenant %s",
				     or_level_name(k, r->excl), p->node[i], j, tenant_label(jb->tenant));
			if (jb->excl >= 0 && job_in_domain_of(k, (int)j, jb->excl, p->node[i]))
				FAIL("job j%u (tenant %s) holds the %s of n%u exclusively", j,
				     tenant_label(jb->tenant), or_level_name(k, jb->excl), p->node[i]);
		}
	}
	return true;
}

static bool check_contiguity(const struct or_case *k, const struct plist *p, char *why,
                             size_t len)
{
	for (unsigned l = 0; l < k->L; l++) {
		bool seen[OR_MAXN] = {false};
		for (unsigned i = 0; i < p->n; i++) {
			int d = dom_at(k, p->node[i], (int)l);
			if (i && d == dom_at(k, p->node[i - 1], (int)l))
				continue;
			if (seen[d])
				FAIL("rank %u returns to %s domain %d (not one contiguous run)", i,
				     or_level_name(k, (int)l), d);
			seen[d] = true;
		}
	}
	return true;
}

static bool check_list(const struct or_case *k, const struct plist *p, int mode,
                       bool skip_orderdep, char *why, size_t len)
{
	const struct or_req *r = &k->req;
	unsigned cnt[2 + OR_MAXN];
	if (!check_devices(k, p, mode, why, len))
		return false;
	if (!chunks_in_one_domain(k, p, r->g, r->gl, "group", why, len))
		return false;
	if (r->required >= 0 && per_domain(k, p, r->required, cnt) > 1)
		FAIL("required %s: devices in several domains", or_level_name(k, r->required));
	for (unsigned i = 0; i < r->nslices; i++)
		if (!chunks_in_one_domain(k, p, r->ss[i], r->sl[i], "slice", why, len))
			return false;
	if (!check_caps(k, p, skip_orderdep, why, len))
		return false;
	if (r->spread_l != -1 && per_domain(k, p, r->spread_l, cnt) < r->spread_m)
		FAIL("spread: fewer than %u %s domains", r->spread_m, or_level_name(k, r->spread_l));
	if (r->coloc_job >= 0) {
		if (per_domain(k, p, r->coloc_l, cnt) > 1)
			FAIL("colocate: devices in several %s domains", or_level_name(k, r->coloc_l));
		if (p->n && !job_in_domain_of(k, r->coloc_job, r->coloc_l, p->node[0]))
			FAIL("colocate: the %s of n%u holds no device of j%d", or_level_name(k, r->coloc_l),
			     p->node[0], r->coloc_job);
	}
	if (!check_tenancy(k, p, mode, why, len))
		return false;
	return check_contiguity(k, p, why, len);
}

bool or_check_placement(const struct or_case *k, const uint32_t *devs, size_t n, char *why,
                        size_t len)
{
	struct plist p;
	if (n > OR_MAXN * OR_MAXG)
		FAIL("%zu devices placed, more than the cluster has", n);
	p.n = (unsigned)n;
	for (size_t i = 0; i < n; i++) {
		unsigned node, idx;
		if (!dev_split(k, devs[i], &node, &idx))
			FAIL("device id %u does not exist", devs[i]);
		p.node[i] = (uint8_t)node;
		p.idx[i] = (uint8_t)idx;
	}
	return check_list(k, &p, 0, false, why, len);
}

/* Domains used per level, and the smallest share per level above the node, of per-node counts. */
static void shape_of_counts(const struct or_case *k, const unsigned *cnt, int *v, int *s)
{
	for (unsigned l = 0; l < k->L; l++) {
		unsigned per[OR_MAXN] = {0};
		for (unsigned n = 0; n < k->nnodes; n++)
			per[k->dom[n][l]] += cnt[n];
		v[l] = 0;
		s[l] = 0;
		for (unsigned d = 0; d < k->ndom[l]; d++) {
			if (!per[d])
				continue;
			v[l]++;
			if (l + 1 < k->L && (s[l] == 0 || (int)per[d] < s[l]))
				s[l] = (int)per[d];
		}
	}
}

void or_placement_shape(const struct or_case *k, const uint32_t *devs, size_t n, int *v, int *s)
{
	unsigned cnt[OR_MAXN] = {0};
	for (size_t i = 0; i < n; i++) {
		unsigned node, idx;
		if (dev_split(k, devs[i], &node, &idx))
			cnt[node]++;
	}
	shape_of_counts(k, cnt, v, s);
}

/* ------------------------------------------------------------------------------------------ */
/* Engine 1: dynamic programme over the tree. For every domain and every device count k (and,
 * with spread on a tree level, every number of spread domains touched, capped at min_domains),
 * the lexicographically smallest vector of domains used per level inside it. Lexicographic
 * order is compatible with addition, so the smallest sum over a split is the sum of the
 * smallest parts. Rule 2 is found by raising a floor on the per-domain count level by level
 * while the rule 1 optimum still holds. */

struct dp_ent {
	int16_t v[OR_MAXL];
	bool ok;
};

struct dp {
	const struct or_case *k;
	unsigned count, m, w;        /* w = m + 1 spread states */
	int spread_l;
	int reff;                    /* levels above this one hold at most one used child */
	unsigned avail[OR_MAXN];
	unsigned thr[OR_MAXL];       /* floor on the count of every used domain of a level */
};

static bool vec_less(const int16_t *a, const int16_t *b, unsigned L)
{
	for (unsigned l = 0; l < L; l++)
		if (a[l] != b[l])
			return a[l] < b[l];
	return false;
}

static void ent_offer(struct dp_ent *e, const int16_t *v, unsigned L)
{
	if (!e->ok || vec_less(v, e->v, L)) {
		memcpy(e->v, v, sizeof e->v);
		e->ok = true;
	}
}

/* The per-domain rules that depend on the domain's count alone. */
static bool dp_count_ok(const struct dp *d, int l, unsigned cnt)
{
	const struct or_req *r = &d->k->req;
	if (l == r->gl && cnt % r->g)
		return false;
	for (unsigned i = 0; i < r->nslices; i++)
		if (r->sl[i] == l && cnt % r->ss[i])
			return false;
	for (unsigned i = 0; i < r->ncaps; i++) {
		if (r->cl[i] != l)
			continue;
		if (r->cdev[i] && cnt > r->cdev[i])
			return false;
		if (r->cgrp[i] && (cnt + r->g - 1) / r->g > r->cgrp[i])
			return false;
	}
	return !(l < node_level(d->k) && d->thr[l] && cnt < d->thr[l]);
}

static struct dp_ent *dp_table(const struct dp *d)
{
	struct dp_ent *t = calloc((size_t)(d->count + 1) * d->w, sizeof *t);
	if (!t)
		abort();
	t[0].ok = true;
	return t;
}

static void dp_node(const struct dp *d, unsigned node, struct dp_ent *out)
{
	int N = node_level(d->k);
	for (unsigned c = 1; c <= d->avail[node] && c <= d->count; c++) {
		if (!dp_count_ok(d, N, c))
			continue;
		int16_t v[OR_MAXL] = {0};
		v[N] = 1;
		unsigned s = d->spread_l == N ? (d->m < 1 ? d->m : 1) : 0;
		ent_offer(&out[c * d->w + s], v, d->k->L);
	}
}

/* Merge a child's table into acc: either any number of used children, or at most one. */
static void dp_merge(const struct dp *d, struct dp_ent *acc, const struct dp_ent *ch, bool single)
{
	unsigned L = d->k->L, w = d->w;
	struct dp_ent *out = dp_table(d);
	memcpy(out, acc, sizeof *out * (d->count + 1) * w);
	for (unsigned a = 0; a <= d->count; a++) {
		for (unsigned sa = 0; sa < w; sa++) {
			const struct dp_ent *ea = &acc[a * w + sa];
			if (!ea->ok || (single && a))
				continue;
			for (unsigned b = 1; a + b <= d->count; b++) {
				for (unsigned sb = 0; sb < w; sb++) {
					const struct dp_ent *eb = &ch[b * w + sb];
					if (!eb->ok)
						continue;
					int16_t v[OR_MAXL];
					for (unsigned l = 0; l < L; l++)
						v[l] = (int16_t)(ea->v[l] + eb->v[l]);
					unsigned s = sa + sb < d->m ? sa + sb : d->m;
					ent_offer(&out[(a + b) * w + s], v, L);
				}
			}
		}
	}
	memcpy(acc, out, sizeof *out * (d->count + 1) * w);
	free(out);
}

static void dp_domain(const struct dp *d, int l, unsigned dom, struct dp_ent *out);

/* Combine the children of domain `dom` of level l (l == -1: the cluster, children are the
 * top-level domains). */
static void dp_children(const struct dp *d, int l, unsigned dom, struct dp_ent *acc)
{
	const struct or_case *k = d->k;
	int cl = l + 1;
	bool single = l < d->reff;
	for (unsigned c = 0; c < k->ndom[cl]; c++) {
		if (cl > 0 && k->dparent[cl][c] != dom)
			continue;
		struct dp_ent *ch = dp_table(d);
		dp_domain(d, cl, c, ch);
		dp_merge(d, acc, ch, single);
		free(ch);
	}
}

static void dp_domain(const struct dp *d, int l, unsigned dom, struct dp_ent *out)
{
	const struct or_case *k = d->k;
	if (l == node_level(k)) {
		dp_node(d, dom, out);
		return;
	}
	struct dp_ent *acc = dp_table(d);
	dp_children(d, l, dom, acc);
	for (unsigned c = 1; c <= d->count; c++) {
		if (!dp_count_ok(d, l, c))
			continue;
		for (unsigned s = 0; s < d->w; s++) {
			const struct dp_ent *e = &acc[c * d->w + s];
			if (!e->ok)
				continue;
			int16_t v[OR_MAXL];
			memcpy(v, e->v, sizeof v);
			v[l]++;
			unsigned s2 = d->spread_l == l ? (d->m < 1 ? d->m : 1) : s;
			ent_offer(&out[c * d->w + s2], v, k->L);
		}
	}
	free(acc);
}

/* The smallest rule 1 vector of a valid placement, or false when there is none. */
static bool dp_run(const struct dp *d, int *v)
{
	struct dp_ent *root = dp_table(d);
	dp_children(d, -1, 0, root);
	const struct dp_ent *e = &root[d->count * d->w + d->m];
	bool ok = e->ok;
	for (unsigned l = 0; ok && l < d->k->L; l++)
		v[l] = e->v[l];
	free(root);
	return ok;
}

static void dp_init(struct dp *d, const struct or_case *k, int mode)
{
	const struct or_req *r = &k->req;
	memset(d, 0, sizeof *d);
	d->k = k;
	d->count = r->count;
	d->spread_l = r->spread_l;
	d->m = r->spread_l >= 0 && r->spread_l != OR_FD ? r->spread_m : 0;
	d->w = d->m + 1;
	d->reff = r->required > r->coloc_l ? r->required : r->coloc_l;
	if (r->coloc_job < 0)
		d->reff = r->required;
	compute_avail(k, mode, d->avail);
}

bool or_dp_supported(const struct or_case *k)
{
	const struct or_req *r = &k->req;
	if (r->spread_l == OR_FD || r->count > OR_MAXC)
		return false;
	for (unsigned i = 0; i < r->ncaps; i++)
		if (r->cl[i] == OR_FD || gcap_order_dependent(k, i))
			return false;
	return true;
}

/* Rule 2: the largest floor at each level above the node, top first, that keeps the rule 1
 * optimum reachable. */
static void dp_rule2(struct dp *d, const int *vbest, int *s)
{
	const struct or_case *k = d->k;
	for (unsigned l = 0; l + 1 < k->L; l++) {
		if (vbest[l] <= 1) {
			s[l] = (int)d->count;
			continue;
		}
		unsigned lo = 1, hi = d->count;  /* lo is reachable */
		while (lo < hi) {
			unsigned mid = (lo + hi + 1) / 2;
			int v[OR_MAXL];
			d->thr[l] = mid;
			bool ok = dp_run(d, v) && !memcmp(v, vbest, sizeof(int) * k->L);
			if (ok)
				lo = mid;
			else
				hi = mid - 1;
		}
		d->thr[l] = lo;
		s[l] = (int)lo;
	}
}

/* ------------------------------------------------------------------------------------------ */
/* Engine 2: brute force over per-node count vectors, each turned into a canonical rank order
 * (tree order, lowest usable indices) and checked with the checker; a cap on groups that
 * depends on the order is checked by searching the orders of the children of each domain. */

struct brute {
	const struct or_case *k;
	int mode;
	unsigned avail[OR_MAXN], suffix[OR_MAXN + 1], cnt[OR_MAXN], best_cnt[OR_MAXN];
	unsigned long budget, visited;  /* count vectors to try (0: no limit), tried */
	bool found;
	int v[OR_MAXL], s[OR_MAXL];
	unsigned per[OR_MAXL][OR_MAXD];
	const struct or_mix *mix;       /* or_mix_best: the least loss among the optimal */
	bool mfound;
	int mv[OR_MAXL], ms[OR_MAXL];
	unsigned long mloss;
	const tp_topology *t;           /* or_step_best: the least step time among the optimal */
	const tp_step_model *sm;
	bool sfound;
	int sv[OR_MAXL], ss[OR_MAXL];
	double sbest;
	int fit_l;                      /* or_fit_best: the level, -1 none; the least free used */
	bool ffound;
	int fv[OR_MAXL], fs[OR_MAXL];
	unsigned fbest;
};

static bool s_greater(const int *a, const int *b, unsigned n);

/* Free devices (healthy, uncordoned, held by no job) of every domain of level l. */
static void free_per_domain(const struct or_case *k, int l, unsigned *f)
{
	memset(f, 0, OR_MAXN * sizeof *f);
	for (unsigned n = 0; n < k->nnodes; n++)
		for (unsigned i = 0; i < k->gpus[n]; i++) {
			int job;
			if (or_device_state(k, n, i, &job) == TP_DEVICE_FREE)
				f[dom_at(k, n, l)]++;
		}
}

static unsigned long mix_loss_counts(const struct or_case *k, const struct or_mix *m,
                                     const unsigned *cnt)
{
	unsigned long loss = 0;
	for (unsigned i = 0; i < m->n; i++) {
		int l = m->level[i];
		unsigned f[OR_MAXN], take[OR_MAXN] = {0}, sz = m->devices[i];
		free_per_domain(k, l, f);
		for (unsigned n = 0; n < k->nnodes; n++)
			take[dom_at(k, n, l)] += cnt[n];
		for (unsigned d = 0; d < ndom_at(k, l); d++)
			loss += (unsigned long)m->weight[i] * sz * (f[d] / sz - (f[d] - take[d]) / sz);
	}
	return loss;
}

/* Keep the least mix loss among the placements best under rule 1 (and rule 2 if balanced). */
static void mix_offer(struct brute *b, const int *v, const int *s)
{
	const struct or_case *k = b->k;
	bool bal = k->req.balanced;
	int cmp = -1;
	if (b->mfound) {
		cmp = 0;
		for (unsigned l = 0; l < k->L && !cmp; l++)
			cmp = v[l] < b->mv[l] ? -1 : v[l] > b->mv[l] ? 1 : 0;
		if (!cmp && bal)
			cmp = s_greater(s, b->ms, k->L - 1) ? -1 : s_greater(b->ms, s, k->L - 1) ? 1 : 0;
	}
	unsigned long ml = mix_loss_counts(k, b->mix, b->cnt);
	if (cmp < 0 || (cmp == 0 && ml < b->mloss)) {
		b->mfound = true;
		b->mloss = ml;
		memcpy(b->mv, v, sizeof b->mv);
		memcpy(b->ms, s, sizeof b->ms);
	}
}

/* Keep the least free devices of the level-b->fit_l domains used among the placements best
 * under rule 1 (and rule 2 if balanced). */
static void fit_offer(struct brute *b, const int *v, const int *s)
{
	const struct or_case *k = b->k;
	int cmp = -1;
	if (b->ffound) {
		cmp = 0;
		for (unsigned l = 0; l < k->L && !cmp; l++)
			cmp = v[l] < b->fv[l] ? -1 : v[l] > b->fv[l] ? 1 : 0;
		if (!cmp && k->req.balanced)
			cmp = s_greater(s, b->fs, k->L - 1) ? -1 : s_greater(b->fs, s, k->L - 1) ? 1 : 0;
	}
	unsigned f[OR_MAXN], used = 0;
	free_per_domain(k, b->fit_l, f);
	for (unsigned d = 0; d < ndom_at(k, b->fit_l); d++)
		used += b->per[b->fit_l][d] ? f[d] : 0;
	if (cmp < 0 || (cmp == 0 && used < b->fbest)) {
		b->ffound = true;
		b->fbest = used;
		memcpy(b->fv, v, sizeof b->fv);
		memcpy(b->fs, s, sizeof b->fs);
	}
}

/* Keep the least step time among the placements best under rule 1 (and rule 2 if balanced);
 * the placement is the canonical list (the model must not depend on the rank order). */
static void step_offer(struct brute *b, const int *v, const int *s, const uint8_t *node,
                       const uint8_t *idx, unsigned n)
{
	const struct or_case *k = b->k;
	int cmp = -1;
	if (b->sfound) {
		cmp = 0;
		for (unsigned l = 0; l < k->L && !cmp; l++)
			cmp = v[l] < b->sv[l] ? -1 : v[l] > b->sv[l] ? 1 : 0;
		if (!cmp && k->req.balanced)
			cmp = s_greater(s, b->ss, k->L - 1) ? -1 : s_greater(b->ss, s, k->L - 1) ? 1 : 0;
	}
	if (cmp > 0)
		return;
	uint32_t devs[OR_MAXN * OR_MAXG];
	for (unsigned i = 0; i < n; i++)
		devs[i] = or_node_first_dev(k, node[i]) + idx[i];
	double us;
	if (tp_cost_step_us(&us, b->t, devs, n, b->sm, NULL, NULL, 0) != 0)
		abort();
	if (cmp < 0 || us < b->sbest) {
		b->sfound = true;
		b->sbest = us;
		memcpy(b->sv, v, sizeof b->sv);
		memcpy(b->ss, s, sizeof b->ss);
	}
}

/* Whether the subtree of domain d of level l, starting at rank offset o (mod g), can be
 * ordered so that every domain of the cap level touches at most `cap` groups. */
static bool order_ok(const struct brute *b, int l, unsigned d, unsigned o, int cl, unsigned cap)
{
	const struct or_case *k = b->k;
	unsigned g = k->req.g;
	if (l == cl) {
		unsigned n = b->per[l][d];
		return !n || (o + n - 1) / g - o / g + 1 <= cap;
	}
	unsigned kids[OR_MAXN], nk = 0;
	for (unsigned c = 0; c < k->ndom[l + 1]; c++)
		if (k->dparent[l + 1][c] == d && b->per[l + 1][c])
			kids[nk++] = c;
	if (nk > 12)
		abort();
	bool *reach = calloc((size_t)1 << nk, sizeof *reach);
	if (!reach)
		abort();
	reach[0] = true;
	for (unsigned mask = 0; mask < (1u << nk); mask++) {
		if (!reach[mask])
			continue;
		unsigned off = o;
		for (unsigned i = 0; i < nk; i++)
			if (mask & (1u << i))
				off += b->per[l + 1][kids[i]];
		for (unsigned i = 0; i < nk; i++)
			if (!(mask & (1u << i)) && order_ok(b, l + 1, kids[i], off % g, cl, cap))
				reach[mask | (1u << i)] = true;
	}
	bool ok = reach[(1u << nk) - 1];
	free(reach);
	return ok;
}

static bool orderdep_caps_ok(const struct brute *b)
{
	const struct or_req *r = &b->k->req;
	for (unsigned i = 0; i < r->ncaps; i++) {
		if (!gcap_order_dependent(b->k, i))
			continue;
		if (r->cl[i] == OR_FD)
			abort(); /* never generated: not a tree */
		/* Every group-level domain starts at a multiple of g. */
		for (unsigned d = 0; d < b->k->ndom[r->gl]; d++)
			if (b->per[r->gl][d] && !order_ok(b, r->gl, d, 0, r->cl[i], r->cgrp[i]))
				return false;
	}
	return true;
}

static bool s_greater(const int *a, const int *b, unsigned n)
{
	for (unsigned l = 0; l < n; l++)
		if (a[l] != b[l])
			return a[l] > b[l];
	return false;
}

static void brute_eval(struct brute *b)
{
	const struct or_case *k = b->k;
	struct plist p;
	char why[256];
	p.n = 0;
	for (unsigned n = 0; n < k->nnodes; n++) {
		unsigned left = b->cnt[n];
		for (unsigned i = 0; i < k->gpus[n] && left; i++) {
			if (!dev_usable(k, n, i, b->mode))
				continue;
			p.node[p.n] = (uint8_t)n;
			p.idx[p.n++] = (uint8_t)i;
			left--;
		}
	}
	if (!check_list(k, &p, b->mode, true, why, sizeof why))
		return;
	memset(b->per, 0, sizeof b->per);
	for (unsigned n = 0; n < k->nnodes; n++)
		for (unsigned l = 0; l < k->L; l++)
			b->per[l][k->dom[n][l]] += b->cnt[n];
	if (!orderdep_caps_ok(b))
		return;
	int v[OR_MAXL], s[OR_MAXL];
	shape_of_counts(k, b->cnt, v, s);
	int16_t v16[OR_MAXL], b16[OR_MAXL];
	for (unsigned l = 0; l < k->L; l++) {
		v16[l] = (int16_t)v[l];
		b16[l] = (int16_t)b->v[l];
	}
	if (b->mix)
		mix_offer(b, v, s);
	if (b->sm)
		step_offer(b, v, s, p.node, p.idx, p.n);
	if (b->fit_l >= 0)
		fit_offer(b, v, s);
	bool better = !b->found || vec_less(v16, b16, k->L) ||
	              (!vec_less(b16, v16, k->L) && s_greater(s, b->s, k->L - 1));
	if (better) {
		memcpy(b->best_cnt, b->cnt, sizeof b->best_cnt);
		b->found = true;
		memcpy(b->v, v, sizeof b->v);
		memcpy(b->s, s, sizeof b->s);
	}
}

static void brute_rec(struct brute *b, unsigned node, unsigned left)
{
	if (left > b->suffix[node])
		return;
	if (b->budget && b->visited >= b->budget)
		return;
	if (node == b->k->nnodes) {
		b->visited++;
		brute_eval(b);
		return;
	}
	for (unsigned c = 0; c <= b->avail[node] && c <= left; c++) {
		b->cnt[node] = c;
		brute_rec(b, node + 1, left - c);
	}
	b->cnt[node] = 0;
}

static bool brute_run(const struct or_case *k, int mode, int *v, int *s)
{
	struct brute *b = calloc(1, sizeof *b);
	if (!b)
		abort();
	b->k = k;
	b->mode = mode;
	compute_avail(k, mode, b->avail);
	for (unsigned n = k->nnodes; n-- > 0;)
		b->suffix[n] = b->suffix[n + 1] + b->avail[n];
	brute_rec(b, 0, k->req.count);
	bool found = b->found;
	memcpy(v, b->v, sizeof b->v);
	memcpy(s, b->s, sizeof b->s);
	free(b);
	return found;
}

/* The canonical rank order of per-node counts: tree order, lowest usable indices first. */
static size_t materialize(const struct or_case *k, const unsigned *cnt, int mode, uint32_t *devs)
{
	size_t n = 0;
	for (unsigned node = 0; node < k->nnodes; node++) {
		unsigned left = cnt[node];
		for (unsigned i = 0; i < k->gpus[node] && left; i++) {
			if (!dev_usable(k, node, i, mode))
				continue;
			devs[n++] = or_node_first_dev(k, node) + i;
			left--;
		}
	}
	return n;
}

int or_witness(const struct or_case *k, unsigned long budget, uint32_t *devs, size_t *n)
{
	struct brute *b = calloc(1, sizeof *b);
	if (!b)
		abort();
	b->k = k;
	b->budget = budget;
	compute_avail(k, 0, b->avail);
	for (unsigned node = k->nnodes; node-- > 0;)
		b->suffix[node] = b->suffix[node + 1] + b->avail[node];
	brute_rec(b, 0, k->req.count);
	int rc = b->budget && b->visited >= b->budget ? -1 : b->found ? 1 : 0;
	*n = b->found ? materialize(k, b->best_cnt, 0, devs) : 0;
	free(b);
	return rc;
}

unsigned long or_mix_loss(const struct or_case *k, const struct or_mix *m, const uint32_t *devs,
                          size_t n)
{
	unsigned cnt[OR_MAXN] = {0};
	for (size_t i = 0; i < n; i++) {
		unsigned node, idx;
		if (dev_split(k, devs[i], &node, &idx))
			cnt[node]++;
	}
	return mix_loss_counts(k, m, cnt);
}

/* Run the brute force over every count vector of b->k (set up with what it should keep). */
static void brute_all(struct brute *b)
{
	const struct or_case *k = b->k;
	compute_avail(k, 0, b->avail);
	for (unsigned node = k->nnodes; node-- > 0;)
		b->suffix[node] = b->suffix[node + 1] + b->avail[node];
	brute_rec(b, 0, k->req.count);
}

/* A brute force over k, to set up with what it should keep before brute_all. */
static struct brute *brute_new(const struct or_case *k)
{
	struct brute *b = calloc(1, sizeof *b);
	if (!b)
		abort();
	b->k = k;
	b->fit_l = -1;
	return b;
}

bool or_mix_best(const struct or_case *k, const struct or_mix *m, unsigned long *loss)
{
	if (!or_brute_supported(k))
		return false;
	struct brute *b = brute_new(k);
	b->mix = m;
	brute_all(b);
	bool found = b->mfound;
	*loss = b->mloss;
	free(b);
	return found;
}

bool or_step_best(const struct or_case *k, const tp_topology *t, const tp_step_model *m,
                  double *us)
{
	if (!or_brute_supported(k))
		return false;
	struct brute *b = brute_new(k);
	b->t = t;
	b->sm = m;
	brute_all(b);
	bool found = b->sfound;
	*us = b->sbest;
	free(b);
	return found;
}

bool or_fit_best(const struct or_case *k, int l, unsigned *free_used)
{
	if (!or_brute_supported(k) || l < 0 || (unsigned)l >= k->L)
		return false;
	struct brute *b = brute_new(k);
	b->fit_l = l;
	brute_all(b);
	bool found = b->ffound;
	*free_used = b->fbest;
	free(b);
	return found;
}

bool or_brute_supported(const struct or_case *k)
{
	return k->kind == OR_TINY;
}

/* ------------------------------------------------------------------------------------------ */
/* The answer */

/* Free matching devices of a domain of level l, in whole groups and slices. */
static unsigned fit_take(const struct or_case *k, const unsigned *avail, int l, unsigned d)
{
	const struct or_req *r = &k->req;
	unsigned x = 0;
	if (l == node_level(k)) {
		x = avail[d];
	} else {
		for (unsigned c = 0; c < k->ndom[l + 1]; c++)
			if (k->dparent[l + 1][c] == d)
				x += fit_take(k, avail, l + 1, c);
	}
	if (l == r->gl)
		x -= x % r->g;
	for (unsigned i = 0; i < r->nslices; i++)
		if (r->sl[i] == l)
			x -= x % r->ss[i];
	return x;
}

static void compute_fit(const struct or_case *k, struct or_answer *a)
{
	const struct or_req *r = &k->req;
	unsigned freem[OR_MAXN];
	a->free_total = 0;
	for (unsigned n = 0; n < k->nnodes; n++) {
		freem[n] = 0;
		for (unsigned i = 0; i < k->gpus[n]; i++)
			freem[n] += dev_usable(k, n, i, 0);
		a->free_total += freem[n];
	}
	int fl = r->required >= 0 ? r->required : 0;
	unsigned best = 0;
	for (unsigned d = 0; d < k->ndom[fl]; d++) {
		unsigned x = fit_take(k, freem, fl, d);
		if (r->gl < fl)
			x -= x % r->g;
		x = x < r->count ? x : r->count;
		best = x > best ? x : best;
	}
	a->fit.version = TP_FIT_VERSION;
	a->fit.needed = r->count;
	a->fit.free_total = a->free_total;
	a->fit.level = fl;
	a->fit.best = best;
	/* Whole groups and slices of free matching devices is what the spec counts; caps,
	 * spread, colocate and exclusivity are a reading the spec does not settle. */
	bool other_excl = false;
	for (unsigned j = 0; j < k->njobs; j++)
		other_excl = other_excl || (k->job[j].excl >= 0 && k->job[j].tenant != r->tenant);
	a->best_strict = !r->ncaps && r->spread_l == -1 && r->coloc_job < 0 && r->excl < 0 &&
	                 !other_excl;
}

bool or_solve(const struct or_case *k, enum or_engine e, struct or_answer *a)
{
	const struct or_req *r = &k->req;
	if ((e == OR_ENGINE_DP && !or_dp_supported(k)) ||
	    (e == OR_ENGINE_BRUTE && !or_brute_supported(k)))
		return false;
	memset(a, 0, sizeof *a);
	a->rule1 = r->required >= 0 || r->preferred >= 0 || r->nslices > 0;
	a->rule2 = a->rule1 && r->balanced;
	compute_fit(k, a);
	bool now;
	if (e == OR_ENGINE_DP) {
		struct dp d;
		dp_init(&d, k, 0);
		now = dp_run(&d, a->v);
		if (now && a->rule2)
			dp_rule2(&d, a->v, a->s);
	} else {
		now = brute_run(k, 0, a->v, a->s);
	}
	if (now) {
		a->status = 0;
		return true;
	}
	bool empty;
	int v[OR_MAXL], s[OR_MAXL];
	if (e == OR_ENGINE_DP) {
		struct dp d;
		dp_init(&d, k, 1);
		empty = dp_run(&d, v);
	} else {
		empty = brute_run(k, 1, v, s);
	}
	if (!empty)
		a->status = TP_EINFEASIBLE;
	else if (a->free_total < r->count)
		a->status = TP_EBUSY;
	else
		a->status = TP_EFRAGMENTED;
	return true;
}

/* ------------------------------------------------------------------------------------------ */
/* Dumps */

static void dump_level(FILE *f, const struct or_case *k, int level)
{
	fprintf(f, "\"%s\"", or_level_name(k, level));
}

static void dump_topology(FILE *f, const struct or_case *k)
{
	fprintf(f, "  \"topology\": {\n    \"levels\": [");
	for (unsigned l = 0; l < k->L; l++) {
		fprintf(f, "%s", l ? ", " : "");
		dump_level(f, k, (int)l);
	}
	fprintf(f, "],\n    \"nodes\": [\n");
	for (unsigned n = 0; n < k->nnodes; n++) {
		fprintf(f, "      {\"name\": \"n%u\", \"path\": [", n);
		for (unsigned l = 0; l + 1 < k->L; l++) {
			char b[16];
			dom_name(k, l, k->dom[n][l], b, sizeof b);
			fprintf(f, "%s\"%s\"", l ? ", " : "", b);
		}
		fprintf(f, "], \"gpus\": %u", k->gpus[n]);
		if (k->model[n] >= 0)
			fprintf(f, ", \"model\": \"%s\"", model_names[k->model[n]]);
		if (k->mem[n] > 0)
			fprintf(f, ", \"memory_gb\": %g", k->mem[n]);
		if (k->perf_list[n]) {
			fprintf(f, ", \"perf\": [");
			for (unsigned i = 0; i < k->gpus[n]; i++)
				fprintf(f, "%s%g", i ? ", " : "", k->perf[n][i]);
			fprintf(f, "]");
		} else if (k->perf[n][0] != 1.0) {
			fprintf(f, ", \"perf\": %g", k->perf[n][0]);
		}
		fprintf(f, "}%s\n", n + 1 < k->nnodes ? "," : "");
	}
	fprintf(f, "    ]");
	if (k->has_fd) {
		fprintf(f, ",\n    \"failure_domains\": {\"power\": {");
		for (int x = 0; x < 2; x++) {
			fprintf(f, "%s\"%s\": [", x ? ", " : "", fd_names[x]);
			bool first = true;
			for (unsigned n = 0; n < k->nnodes; n++) {
				if (k->fd[n] != x)
					continue;
				fprintf(f, "%s\"n%u\"", first ? "" : ", ", n);
				first = false;
			}
			fprintf(f, "]");
		}
		fprintf(f, "}}");
	}
	fprintf(f, "\n  },\n");
}

static void dump_flagged(FILE *f, const struct or_case *k, bool down)
{
	bool first = true;
	for (unsigned n = 0; n < k->nnodes; n++) {
		for (unsigned i = 0; i < k->gpus[n]; i++) {
			if (!(down ? k->down[n][i] : k->cord[n][i]))
				continue;
			fprintf(f, "%s\"n%u/%u\"", first ? "" : ", ", n, i);
			first = false;
		}
	}
}

static void dump_state(FILE *f, const struct or_case *k)
{
	fprintf(f, "  \"state\": {\n    \"jobs\": [\n");
	for (unsigned j = 0; j < k->njobs; j++) {
		const struct or_job *jb = &k->job[j];
		fprintf(f, "      {\"id\": \"j%u\"", j);
		if (or_tenant_name(jb->tenant, jb->tenant_explicit))
			fprintf(f, ", \"tenant\": \"%s\"", tenant_label(jb->tenant));
		fprintf(f, ", \"devices\": {");
		for (unsigned i = 0; i < jb->n; i++) {
			bool open = !i || jb->node[i] != jb->node[i - 1];
			bool close = i + 1 == jb->n || jb->node[i + 1] != jb->node[i];
			if (open)
				fprintf(f, "%s\"n%u\": [", i ? ", " : "", jb->node[i]);
			fprintf(f, "%s%u", open ? "" : ", ", jb->idx[i]);
			if (close)
				fprintf(f, "]");
		}
		fprintf(f, "}");
		if (jb->excl >= 0)
			fprintf(f, ", \"request\": {\"count\": %u, \"exclusive\": \"%s\"}", jb->n,
			        or_level_name(k, jb->excl));
		fprintf(f, "}%s\n", j + 1 < k->njobs ? "," : "");
	}
	fprintf(f, "    ],\n    \"down\": [");
	dump_flagged(f, k, true);
	fprintf(f, "],\n    \"cordoned\": [");
	dump_flagged(f, k, false);
	fprintf(f, "]\n  },\n");
}

static void dump_select(FILE *f, const struct or_case *k)
{
	const struct or_req *r = &k->req;
	if (r->sel_model < 0 && r->min_perf <= 0 && r->min_mem <= 0 && !r->nsel_nodes)
		return;
	const char *sep = "";
	fprintf(f, ",\n    \"select\": {");
	if (r->sel_model >= 0) {
		fprintf(f, "\"model\": \"%s\"", model_names[r->sel_model]);
		sep = ", ";
	}
	if (r->min_perf > 0) {
		fprintf(f, "%s\"min_perf\": %g", sep, r->min_perf);
		sep = ", ";
	}
	if (r->min_mem > 0) {
		fprintf(f, "%s\"min_memory_gb\": %g", sep, r->min_mem);
		sep = ", ";
	}
	if (r->nsel_nodes) {
		fprintf(f, "%s\"nodes\": [", sep);
		for (unsigned i = 0; i < r->nsel_nodes; i++)
			fprintf(f, "%s\"n%u\"", i ? ", " : "", r->sel_nodes[i]);
		fprintf(f, "]");
	}
	fprintf(f, "}");
}

static void dump_request(FILE *f, const struct or_case *k)
{
	const struct or_req *r = &k->req;
	fprintf(f, "  \"request\": {\n    \"id\": \"new\", \"count\": %u", r->count);
	if (or_tenant_name(r->tenant, r->tenant_explicit))
		fprintf(f, ", \"tenant\": \"%s\"", tenant_label(r->tenant));
	if (r->group_given)
		fprintf(f, ",\n    \"group\": {\"size\": %u, \"level\": \"%s\"}", r->g,
		        or_level_name(k, r->gl));
	if (r->required >= 0)
		fprintf(f, ",\n    \"required\": \"%s\"", or_level_name(k, r->required));
	if (r->preferred >= 0)
		fprintf(f, ",\n    \"preferred\": \"%s\"", or_level_name(k, r->preferred));
	if (r->nslices) {
		fprintf(f, ",\n    \"slices\": [");
		for (unsigned i = 0; i < r->nslices; i++)
			fprintf(f, "%s{\"level\": \"%s\", \"size\": %u}", i ? ", " : "",
			        or_level_name(k, r->sl[i]), r->ss[i]);
		fprintf(f, "]");
	}
	if (r->balanced)
		fprintf(f, ",\n    \"balanced\": true");
	if (r->ncaps) {
		fprintf(f, ",\n    \"max_per_domain\": [");
		for (unsigned i = 0; i < r->ncaps; i++)
			fprintf(f, "%s{\"level\": \"%s\", \"%s\": %u}", i ? ", " : "",
			        or_level_name(k, r->cl[i]), r->cdev[i] ? "devices" : "groups",
			        r->cdev[i] ? r->cdev[i] : r->cgrp[i]);
		fprintf(f, "]");
	}
	if (r->spread_l != -1)
		fprintf(f, ",\n    \"spread\": {\"level\": \"%s\", \"min_domains\": %u}",
		        or_level_name(k, r->spread_l), r->spread_m);
	if (r->coloc_job >= 0)
		fprintf(f, ",\n    \"colocate\": {\"job\": \"j%d\", \"level\": \"%s\"}", r->coloc_job,
		        or_level_name(k, r->coloc_l));
	if (r->excl >= 0)
		fprintf(f, ",\n    \"exclusive\": \"%s\"", or_level_name(k, r->excl));
	dump_select(f, k);
	fprintf(f, "\n  }\n");
}

void or_dump_scenario(FILE *f, const struct or_case *k)
{
	fprintf(f, "{\n  \"version\": 1,\n");
	dump_topology(f, k);
	dump_state(f, k);
	dump_request(f, k);
	fprintf(f, "}\n");
}

void or_dump_devices(FILE *f, const struct or_case *k, const uint32_t *devs, size_t n)
{
	fprintf(f, "[");
	for (size_t i = 0; i < n; i++) {
		unsigned node, idx;
		if (dev_split(k, devs[i], &node, &idx))
			fprintf(f, "%s\"n%u/%u\"", i ? ", " : "", node, idx);
		else
			fprintf(f, "%s<bad id %u>", i ? ", " : "", devs[i]);
	}
	fprintf(f, "]");
}
