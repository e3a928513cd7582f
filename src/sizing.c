/* SPDX-License-Identifier: MIT */
/*
 * Sizing a model for serving (topoplace-sizing.h): for each device model of the fleet and each
 * tensor and pipeline degree, the memory a replica leaves for the KV cache, the sequences it
 * holds, its modelled decode step and the replicas the target needs; then a ranking.
 *
 * One pass over the nodes groups them by (device model, memory) and records, per group, the
 * devices it has, its largest NVLink domain and its first devices in node order (the packed
 * layout on which each option's step is priced, as tp_cost_efficiency packs a job). Each option
 * then costs O(1) plus one tp_cost_step_us() over at most max_tp x max_pp devices.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"
#include "topology_impl.h"
#include "topoplace-sizing.h"

#define DEFAULT_MAX_TP 64u

struct tp_sizing {
	tp_allocator a;
	uint64_t topology_id; /* the topology the options were made on */
	char errmsg[TP_ERRMSG_LEN];
	tp_sizing_option *opt;
	size_t n, cap;
	char **names; /* the device models the options name */
	size_t nnames;
};

/* The devices of one (device model, memory) pair. */
struct group {
	const char *model; /* owned by the topology */
	double memory_gb;
	double hbm_gbps;
	uint64_t devices;
	uint32_t domain;   /* devices of its largest NVLink domain */
	uint32_t at[TP_MAX_LEVELS]; /* devices of its first node's domain at each level */
	unsigned nlevels;
	uint32_t *packed;  /* its first devices in node order */
	uint32_t npacked;
	int stage;         /* how far its best failing option got (enum fail) */
	char why[160];     /* that option's reason */
};

enum fail { FAIL_NONE, FAIL_HBM, FAIL_WEIGHTS, FAIL_KV, FAIL_FLEET };

/* Vendor datasheet figures, GB/s (docs/serving.md names the sources). */
static const struct {
	const char *model;
	double gbps;
} hbm_table[] = {
	{"A100", 2039.0}, {"B200", 8000.0}, {"GB200", 8000.0}, {"H100", 3350.0},
	{"H200", 4800.0}, {"L4", 300.0},    {"L40S", 864.0},   {"MI300X", 5300.0},
	{"T4", 320.0},    {"V100", 900.0},
};

double tp_sizing_hbm_gbps(const char *model)
{
	if (!model)
		return 0.0;
	for (size_t i = 0; i < sizeof hbm_table / sizeof hbm_table[0]; i++)
		if (!strcasecmp(model, hbm_table[i].model))
			return hbm_table[i].gbps;
	return 0.0;
}

int tp_sizing_options_init(tp_sizing_options *o, unsigned version)
{
	static const tp_sizing_options init = TP_SIZING_OPTIONS_INIT;
	return tp_options_init(o, version == TP_SIZING_OPTIONS_VERSION ? sizeof init : 0, &init, version);
}

int tp_model_desc_init(tp_model_desc *m, unsigned version)
{
	static const tp_model_desc init = TP_MODEL_DESC_INIT;
	return tp_options_init(m, version == TP_MODEL_DESC_VERSION ? sizeof init : 0, &init, version);
}

/* ---- checking the arguments ----------------------------------------------------------------- */

static bool positive(double x)
{
	return isfinite(x) && x > 0.0;
}

static int check_model(char *err, const tp_model_desc *m)
{
	if (m->version != TP_MODEL_DESC_VERSION)
		return tp_seterr(err, TP_EINVAL, "model.version %u is not %u", m->version,
		                 TP_MODEL_DESC_VERSION);
	const struct {
		const char *name;
		double v;
		bool zero_ok;
	} f[] = {
		{"params", m->params, false},
		{"active_params", m->active_params, true},
		{"weight_bytes", m->weight_bytes, false},
		{"kv_bytes", m->kv_bytes, false},
	};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		if (!positive(f[i].v) && !(f[i].zero_ok && f[i].v == 0.0))
			return tp_seterr(err, TP_EINVAL, "model.%s %g is not a positive finite number",
			                 f[i].name, f[i].v);
	if (m->active_params > m->params)
		return tp_seterr(err, TP_EINVAL, "model.active_params %g exceeds model.params %g",
		                 m->active_params, m->params);
	const struct {
		const char *name;
		unsigned v;
	} u[] = {{"layers", m->layers}, {"heads", m->heads}, {"kv_heads", m->kv_heads},
	         {"head_dim", m->head_dim}, {"hidden", m->hidden}};
	for (size_t i = 0; i < sizeof u / sizeof u[0]; i++)
		if (u[i].v == 0)
			return tp_seterr(err, TP_EINVAL, "model.%s is 0: it must be at least 1",
			                 u[i].name);
	if (m->heads % m->kv_heads)
		return tp_seterr(err, TP_EINVAL, "model.heads %u is not a multiple of model.kv_heads %u",
		                 m->heads, m->kv_heads);
	return 0;
}

static int check_options(char *err, const tp_sizing_options *o)
{
	if (o->version != TP_SIZING_OPTIONS_VERSION)
		return tp_seterr(err, TP_EINVAL, "options.version %u is not %u", o->version,
		                 TP_SIZING_OPTIONS_VERSION);
	if (o->context == 0)
		return tp_seterr(err, TP_EINVAL, "options.context is 0: a sequence has at least one "
		                 "token");
	if (!(isfinite(o->tokens_per_s) && o->tokens_per_s >= 0.0))
		return tp_seterr(err, TP_EINVAL, "options.tokens_per_s %g is not a finite number >= 0",
		                 o->tokens_per_s);
	if ((unsigned)o->goal > TP_SIZE_BEST_THROUGHPUT)
		return tp_seterr(err, TP_EINVAL, "options.goal %d is not a tp_size_goal", (int)o->goal);
	if (!(isfinite(o->mem_utilisation) && o->mem_utilisation > 0.0 && o->mem_utilisation <= 1.0))
		return tp_seterr(err, TP_EINVAL, "options.mem_utilisation %g is outside (0, 1]",
		                 o->mem_utilisation);
	if (!(isfinite(o->overhead_gb) && o->overhead_gb >= 0.0))
		return tp_seterr(err, TP_EINVAL, "options.overhead_gb %g is not a finite number >= 0",
		                 o->overhead_gb);
	if (o->max_tp > TP_MAX_NODE_DEVICES * 64u || o->max_pp > 1024u)
		return tp_seterr(err, TP_EINVAL, "options.max_tp %u or options.max_pp %u is too large "
		                 "(at most %u and 1024)", o->max_tp, o->max_pp, TP_MAX_NODE_DEVICES * 64u);
	if (o->nhbm && (!o->hbm_models || !o->hbm_gbps))
		return tp_seterr(err, TP_EINVAL, "options.nhbm is %zu but hbm_models or hbm_gbps is "
		                 "NULL", o->nhbm);
	for (size_t i = 0; i < o->nhbm; i++) {
		if (!o->hbm_models[i])
			return tp_seterr(err, TP_EINVAL, "options.hbm_models[%zu] is NULL", i);
		if (!positive(o->hbm_gbps[i]))
			return tp_seterr(err, TP_EINVAL, "options.hbm_gbps[%zu] %g (model %s) is not a "
			                 "positive finite number", i, o->hbm_gbps[i], o->hbm_models[i]);
	}
	if (!tp_alloc_valid(o->alloc))
		return tp_seterr(err, TP_EINVAL, "options.alloc lacks one of its four functions");
	return 0;
}

static double hbm_of(const tp_sizing_options *o, const char *model)
{
	for (size_t i = 0; i < o->nhbm; i++)
		if (!strcasecmp(o->hbm_models[i], model))
			return o->hbm_gbps[i];
	return tp_sizing_hbm_gbps(model);
}

/* ---- the fleet's device models --------------------------------------------------------------- */

/* Devices of the largest NVLink domain holding the node: the node, then each level above it
 * whose fabric is NVLink. */
static uint32_t nvlink_domain(const tp_topology *t, uint32_t node)
{
	unsigned nl = tp_topology_level_count(t) - 1;
	uint32_t first, n = 0;
	tp_topology_domain_devices(t, nl, node, &first, &n);
	for (int l = (int)nl - 1; l >= 0; l--) {
		tp_link_kind kind;
		if (tp_topology_fabric(t, l, &kind, NULL, NULL) || kind != TP_LINK_NVLINK)
			break;
		uint32_t d = tp_topology_node_domain(t, node, (unsigned)l);
		tp_topology_domain_devices(t, (unsigned)l, d, &first, &n);
	}
	return n;
}

static void groups_free(const tp_allocator *a, struct group *g, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tp_free(a, g[i].packed);
	tp_free(a, g);
}

/* Group the nodes by (model, memory); *out is NULL with *n 0 when no node has both. */
static int groups_build(const tp_topology *t, const tp_sizing_options *o, uint32_t want,
                        const tp_allocator *a, struct group **out, size_t *n)
{
	struct group *g = NULL;
	size_t ng = 0, cap = 0;
	unsigned nl = tp_topology_level_count(t) - 1;
	for (uint32_t node = 0; node < tp_topology_node_count(t); node++) {
		const char *model = tp_topology_node_model(t, node);
		double mem = tp_topology_node_memory_gb(t, node);
		if (!model || !(mem > 0.0))
			continue;
		size_t i = 0;
		while (i < ng && !(g[i].memory_gb == mem && !strcmp(g[i].model, model)))
			i++;
		if (i == ng) {
			if (tp_grow(a, (void **)&g, &cap, ng + 1, sizeof *g)) {
				groups_free(a, g, ng);
				return TP_ENOMEM;
			}
			g[ng] = (struct group){.model = model, .memory_gb = mem,
			                       .hbm_gbps = hbm_of(o, model), .nlevels = nl + 1};
			for (unsigned l = 0; l <= nl; l++) {
				uint32_t f0, nd0 = 0;
				uint32_t d = l == nl ? node : tp_topology_node_domain(t, node, l);
				tp_topology_domain_devices(t, l, d, &f0, &nd0);
				g[ng].at[l] = nd0;
			}
			g[ng].packed = tp_mallocn(a, want, sizeof *g[ng].packed);
			if (!g[ng++].packed) {
				groups_free(a, g, ng);
				return TP_ENOMEM;
			}
		}
		uint32_t first, nd;
		tp_topology_domain_devices(t, nl, node, &first, &nd);
		g[i].devices += nd;
		uint32_t dom = nvlink_domain(t, node);
		if (dom > g[i].domain)
			g[i].domain = dom;
		for (uint32_t k = 0; k < nd && g[i].npacked < want; k++)
			g[i].packed[g[i].npacked++] = first + k;
	}
	*out = g;
	*n = ng;
	return 0;
}

/* ---- one option -------------------------------------------------------------------------------- */

static void note(struct group *g, enum fail stage, const char *fmt, ...) TP_PRINTF(3, 4);
static void note(struct group *g, enum fail stage, const char *fmt, ...)
{
	if ((int)stage < g->stage)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->why, sizeof g->why, fmt, ap);
	va_end(ap);
	g->stage = (int)stage;
}

/* The memory figures of tp x pp on g; false (with a note) when no sequence fits. */
static bool option_memory(struct group *g, const tp_model_desc *m, const tp_sizing_options *o,
                          tp_sizing_option *x)
{
	unsigned tp = x->tp, pp = x->pp;
	double usable = g->memory_gb * o->mem_utilisation - o->overhead_gb;
	x->weights_gb = m->params * m->weight_bytes / ((double)tp * pp) / 1e9;
	if (x->weights_gb >= usable) {
		note(g, FAIL_WEIGHTS, "weights need %.1f GB per GPU at tp %u x pp %u, %.1f GB usable",
		     x->weights_gb, tp, pp, usable);
		return false;
	}
	double heads = tp <= m->kv_heads ? (double)(m->kv_heads / tp) : 1.0;
	double layers = ceil((double)m->layers / pp);
	x->kv_token_bytes = 2.0 * layers * heads * m->head_dim * m->kv_bytes;
	x->kv_gb = usable - x->weights_gb;
	x->tokens = floor(x->kv_gb * 1e9 / x->kv_token_bytes);
	double seqs = floor(x->tokens / o->context);
	if (seqs < 1.0) {
		note(g, FAIL_KV, "at tp %u x pp %u the %.2f GB of KV room hold %.0f tokens, fewer "
		     "than one sequence of %u", tp, pp, x->kv_gb, x->tokens, o->context);
		return false;
	}
	x->sequences = seqs > 1e9 ? 1000000000u : (unsigned)seqs;
	return true;
}

/* The decode step of a full batch on g's packed devices, and the replicas the target needs. */
static int option_step(const tp_topology *t, struct group *g, const tp_model_desc *m,
                       const tp_sizing_options *o, const tp_allocator *a, tp_sizing_option *x,
                       char *err)
{
	unsigned tp = x->tp, pp = x->pp, b = x->sequences;
	double active = m->active_params > 0.0 ? m->active_params : m->params;
	double read = active * m->weight_bytes / ((double)tp * pp) +
	              (double)b * o->context * x->kv_token_bytes;
	tp_step_model sm = TP_STEP_MODEL_INIT;
	sm.tp = tp;
	sm.pp = pp;
	sm.compute_us = pp * read / (g->hbm_gbps * 1e3);
	sm.tp_bytes = (double)b * m->hidden * 2.0;
	sm.tp_msgs = tp > 1 ? 2u * m->layers : 0u;
	sm.pp_bytes = (double)b * m->hidden * 2.0;
	sm.pp_msgs = pp - 1;
	char buf[TP_ERRMSG_LEN];
	int rc = tp_cost_step_us(&x->step_us, t, g->packed, (size_t)tp * pp, &sm, a, buf,
	                         sizeof buf);
	if (rc)
		return tp_seterr(err, rc, "pricing tp %u x pp %u on %s: %s", tp, pp, g->model, buf);
	double replica_tps = x->step_us > 0.0 ? b / (x->step_us * 1e-6) : INFINITY;
	double r = 1.0;
	if (o->sequences)
		r = fmax(r, ceil((double)o->sequences / b));
	if (o->tokens_per_s > 0.0)
		r = fmax(r, ceil(o->tokens_per_s / replica_tps));
	double gpus = r * tp * pp;
	if (gpus > (double)g->devices) {
		note(g, FAIL_FLEET, "tp %u x pp %u needs %.0f replicas, %.0f GPUs: the fleet has %llu",
		     tp, pp, r, gpus, (unsigned long long)g->devices);
		return 1;
	}
	x->replicas = (unsigned)r;
	x->gpus = (unsigned)gpus;
	x->tokens_per_s_gpu = replica_tps / ((double)tp * pp);
	return 0;
}

/* ---- the result ---------------------------------------------------------------------------- */

/* An option with its ranking key (larger is better), so the sort needs no shared state. */
struct ranked {
	double k[2];
	const tp_sizing_option *x;
};

static void rank_key(struct ranked *r, const tp_sizing_option *x, tp_size_goal goal)
{
	r->x = x;
	double gpus = -(double)x->gpus;
	switch (goal) {
	case TP_SIZE_MOST_KV_PER_GPU:
		r->k[0] = x->kv_gb, r->k[1] = gpus;
		break;
	case TP_SIZE_BEST_THROUGHPUT:
		r->k[0] = x->tokens_per_s_gpu, r->k[1] = gpus;
		break;
	default:
		r->k[0] = gpus, r->k[1] = x->tokens_per_s_gpu;
		break;
	}
}

static int cmp_ranked(const void *pa, const void *pb)
{
	const struct ranked *ra = pa, *rb = pb;
	for (int i = 0; i < 2; i++)
		if (ra->k[i] != rb->k[i])
			return ra->k[i] > rb->k[i] ? -1 : 1;
	const tp_sizing_option *a = ra->x, *b = rb->x;
	int c = strcmp(a->model, b->model);
	if (c)
		return c;
	if (a->memory_gb != b->memory_gb)
		return a->memory_gb < b->memory_gb ? -1 : 1;
	if (a->tp != b->tp)
		return a->tp < b->tp ? -1 : 1;
	return (a->pp > b->pp) - (a->pp < b->pp);
}

/* Sort the options by the goal: a sort of keys, then the options copied in that order. */
static int sizing_rank(tp_sizing *s, tp_size_goal goal)
{
	if (s->n < 2)
		return 0;
	struct ranked *r = tp_mallocn(&s->a, s->n, sizeof *r);
	tp_sizing_option *sorted = tp_mallocn(&s->a, s->n, sizeof *sorted);
	if (!r || !sorted) {
		tp_free(&s->a, r);
		tp_free(&s->a, sorted);
		return tp_seterr(s->errmsg, TP_ENOMEM, "out of memory ranking the options");
	}
	for (size_t i = 0; i < s->n; i++)
		rank_key(&r[i], &s->opt[i], goal);
	qsort(r, s->n, sizeof *r, cmp_ranked);
	for (size_t i = 0; i < s->n; i++)
		sorted[i] = *r[i].x;
	tp_free(&s->a, r);
	tp_free(&s->a, s->opt);
	s->opt = sorted;
	s->cap = s->n;
	return 0;
}

static int sizing_push(tp_sizing *s, const tp_sizing_option *x, const char *model)
{
	size_t k = 0;
	while (k < s->nnames && strcmp(s->names[k], model))
		k++;
	if (k == s->nnames) {
		char **nn = tp_reallocn(&s->a, s->names, k + 1, sizeof *nn);
		if (!nn)
			return TP_ENOMEM;
		s->names = nn;
		if (!(nn[k] = tp_strdup(&s->a, model)))
			return TP_ENOMEM;
		s->nnames++;
	}
	if (tp_grow(&s->a, (void **)&s->opt, &s->cap, s->n + 1, sizeof *s->opt))
		return TP_ENOMEM;
	s->opt[s->n] = *x;
	s->opt[s->n++].model = s->names[k];
	return 0;
}

/* The smallest level one of whose domains (around the group's first node) holds n devices. */
static const char *level_holding(const tp_topology *t, const struct group *g, uint64_t n)
{
	for (int l = (int)g->nlevels - 1; l >= 0; l--)
		if (g->at[l] >= n)
			return tp_topology_level_name(t, (unsigned)l);
	return NULL;
}

/* Every option of one group. */
static int size_group(tp_sizing *s, const tp_topology *t, struct group *g,
                      const tp_model_desc *m, const tp_sizing_options *o)
{
	unsigned max_tp = o->max_tp ? o->max_tp : DEFAULT_MAX_TP;
	unsigned max_pp = o->max_pp ? o->max_pp : 1u;
	if (!(g->hbm_gbps > 0.0)) {
		note(g, FAIL_HBM, "no HBM bandwidth is known for it (give it in options.hbm_gbps)");
		return 0;
	}
	for (unsigned tp = 1; tp <= max_tp; tp *= 2) {
		if (m->heads % tp || (m->kv_heads % tp && tp % m->kv_heads))
			continue;
		if (tp > g->domain && !o->cross_domain)
			break;
		for (unsigned pp = 1; pp <= max_pp && pp <= m->layers; pp *= 2) {
			if ((uint64_t)tp * pp > g->npacked)
				break;
			tp_sizing_option x = {.memory_gb = g->memory_gb, .tp = tp, .pp = pp,
			                      .nvlink_domain = g->domain,
			                      .replica_level = level_holding(t, g, tp * pp),
			                      .tensor_level = level_holding(t, g, tp)};
			if (!option_memory(g, m, o, &x))
				continue;
			int rc = option_step(t, g, m, o, &s->a, &x, s->errmsg);
			if (rc < 0)
				return rc;
			if (rc == 0 && (rc = sizing_push(s, &x, g->model)))
				return tp_seterr(s->errmsg, rc, "out of memory listing the options");
		}
	}
	return 0;
}

static int infeasible(tp_sizing *s, const struct group *g, size_t ng, const tp_model_desc *m)
{
	char buf[TP_ERRMSG_LEN];
	int len = snprintf(buf, sizeof buf, "no way to serve the model (%.1f GB of weights)",
	                   m->params * m->weight_bytes / 1e9);
	if (ng == 0)
		snprintf(buf + len, sizeof buf - len, ": no node of the topology has a device model "
		         "with a known memory");
	for (size_t i = 0; i < ng && len > 0 && (size_t)len < sizeof buf; i++)
		len += snprintf(buf + len, sizeof buf - len, "%s %s (%g GB, %llu GPU%s): %s",
		                i ? ";" : ":", g[i].model, g[i].memory_gb,
		                (unsigned long long)g[i].devices, g[i].devices == 1 ? "" : "s",
		                g[i].why);
	return tp_seterr(s->errmsg, TP_EINFEASIBLE, "%s", buf);
}

static int size_all(tp_sizing *s, const tp_topology *t, const tp_model_desc *m,
                    const tp_sizing_options *o)
{
	unsigned max_tp = o->max_tp ? o->max_tp : DEFAULT_MAX_TP;
	unsigned max_pp = o->max_pp ? o->max_pp : 1u;
	uint64_t want = (uint64_t)max_tp * max_pp;
	if (want > tp_topology_device_count(t))
		want = tp_topology_device_count(t);
	struct group *g;
	size_t ng;
	if (groups_build(t, o, (uint32_t)want, &s->a, &g, &ng))
		return tp_seterr(s->errmsg, TP_ENOMEM, "out of memory grouping the nodes");
	int rc = 0;
	for (size_t i = 0; i < ng && !rc; i++)
		rc = size_group(s, t, &g[i], m, o);
	if (!rc && s->n == 0)
		rc = infeasible(s, g, ng, m);
	groups_free(&s->a, g, ng);
	if (rc)
		return rc;
	return sizing_rank(s, o->goal);
}

int tp_size_model(const tp_topology *t, const tp_model_desc *m, const tp_sizing_options *o,
                  tp_sizing **out)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	tp_allocator a = tp_alloc_resolve(o && tp_alloc_valid(o->alloc) ? o->alloc : NULL);
	tp_sizing *s = tp_calloc(&a, 1, sizeof *s);
	if (!s)
		return TP_ENOMEM;
	s->a = a;
	s->topology_id = t ? tp_topology_identity(t) : 0;
	*out = s;
	if (!t || !m || !o)
		return tp_seterr(s->errmsg, TP_EINVAL, "%s is NULL",
		                 !t ? "the topology" : !m ? "the model" : "the options");
	int rc = check_model(s->errmsg, m);
	if (!rc)
		rc = check_options(s->errmsg, o);
	if (!rc)
		rc = size_all(s, t, m, o);
	if (rc)
		s->n = 0;
	return rc;
}

/* ---- placing an option ------------------------------------------------------------------- */

/* Append one line to the caller's buffer (cut, always NUL-terminated). */
static void why_add(char *why, size_t whylen, size_t *used, const char *fmt, ...)
	TP_PRINTF(4, 5);
static void why_add(char *why, size_t whylen, size_t *used, const char *fmt, ...)
{
	if (!why || *used + 1 >= whylen)
		return;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(why + *used, whylen - *used, fmt, ap);
	va_end(ap);
	if (n > 0)
		*used = *used + (size_t)n < whylen ? *used + (size_t)n : whylen - 1;
}

/* The request of option x: tmpl with the option's count and device model, a tensor group of
 * tp devices inside one domain of tensor_level, and, for a pipeline, the replica as one slice
 * of tp x pp devices inside one domain of replica_level (when tmpl has no slices). */
static tp_request option_request(const tp_request *tmpl, const tp_sizing_option *x,
                                 tp_slice *replica)
{
	tp_request r = *tmpl;
	r.count = x->gpus;
	r.group_size = x->tensor_level ? x->tp : 1;
	r.group_level = x->tensor_level;
	r.select_model = x->model;
	r.select_min_memory_gb = x->memory_gb;
	if (!tmpl->nslices && x->pp > 1 && x->replica_level && x->tensor_level) {
		*replica = (tp_slice){x->replica_level, x->tp * x->pp};
		r.slices = replica;
		r.nslices = 1;
	}
	return r;
}

int tp_size_place(const tp_cluster *c, const tp_sizing *s, const tp_request *tmpl,
                  tp_placement **out, size_t *chosen, char *why, size_t whylen)
{
	size_t used = 0;
	if (why && whylen)
		why[0] = '\0';
	if (out)
		*out = NULL;
	if (!c || !s || !tmpl || !out)
		return tp_errbuf_set(why, whylen, TP_EINVAL, "%s is NULL",
		                     !c ? "the cluster" : !s ? "the sizing" : !tmpl ? "the request"
		                                                                  : "out");
	if (s->n == 0)
		return tp_errbuf_set(why, whylen, TP_EINVAL, "the sizing has no option (%s)",
		                     s->errmsg[0] ? s->errmsg : "it failed");
	if (tp_topology_identity(tp_cluster_topology(c)) != s->topology_id)
		return tp_errbuf_set(why, whylen, TP_EINVAL, "the sizing was made on another "
		                     "topology than the cluster's");
	tp_placement *first = NULL;
	int first_rc = 0;
	bool busy = false;
	for (size_t i = 0; i < s->n; i++) {
		const tp_sizing_option *x = &s->opt[i];
		tp_slice replica;
		tp_request r = option_request(tmpl, x, &replica);
		tp_placement *p = NULL;
		int rc = tp_place(c, &r, &p);
		if (rc == 0) {
			tp_placement_destroy(first);
			*out = p;
			if (chosen)
				*chosen = i;
			return 0;
		}
		if (rc != TP_EBUSY && rc != TP_EFRAGMENTED && rc != TP_EINFEASIBLE) {
			tp_placement_destroy(first);
			why_add(why, whylen, &used, "%s#%zu %s tp %u x pp %u, %u GPUs: %s", i ? "\n" : "",
			        i, x->model, x->tp, x->pp, x->gpus,
			        p ? tp_placement_errmsg(p) : "out of memory");
			*out = p;
			return rc;
		}
		busy |= rc == TP_EBUSY;
		why_add(why, whylen, &used, "%s#%zu %s tp %u x pp %u, %u GPUs: %s", i ? "\n" : "", i,
		        x->model, x->tp, x->pp, x->gpus, tp_placement_errmsg(p));
		if (!first) {
			first = p;
			first_rc = rc;
		} else {
			tp_placement_destroy(p);
		}
	}
	*out = first;
	return busy ? TP_EBUSY : first_rc;
}

size_t tp_sizing_count(const tp_sizing *s)
{
	return s ? s->n : 0;
}

const tp_sizing_option *tp_sizing_get(const tp_sizing *s, size_t i)
{
	return s && i < s->n ? &s->opt[i] : NULL;
}

const char *tp_sizing_errmsg(const tp_sizing *s)
{
	return s ? s->errmsg : "";
}

void tp_sizing_destroy(tp_sizing *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nnames; i++)
		tp_free(&s->a, s->names[i]);
	tp_free(&s->a, s->names);
	tp_free(&s->a, s->opt);
	tp_free(&s->a, s);
}
