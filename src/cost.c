/* SPDX-License-Identifier: MIT */
/*
 * The communication cost model (see cost.h for the interface and docs/cost-model.md for the
 * formulas, their calibration and their limits).
 *
 * Every collective is priced with the alpha-beta model per fabric level: a message of b bytes
 * over a link of fabric f costs f.latency_us + b / (f.gbps * 1e3) microseconds (1 GB/s moves
 * 1e3 bytes per microsecond). Groupings by domain rely on ids being in tree order: once the
 * devices of a collective are sorted, every domain of every level holds one contiguous run of
 * them, and replacing each id by its parent keeps the array sorted.
 */
#include "cost.h"
#include "request_data.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes one GB/s moves in one microsecond. */
#define BYTES_PER_US_PER_GBPS 1e3

/* Port classes of a device: traffic over fabrics of one class shares the same ports (node and
 * rack NVLink use the same NVLink ports; every network level goes through the same NIC). */
enum { PORT_NVLINK, PORT_PCIE, PORT_NET, PORT_CLASSES };

static unsigned port_class(tp_link_kind k)
{
	switch (k) {
	case TP_LINK_NVLINK: return PORT_NVLINK;
	case TP_LINK_PCIE: return PORT_PCIE;
	default: return PORT_NET;
	}
}

static double wire_us(const struct tp_fabric_impl *f, double bytes)
{
	return bytes / (f->gbps * BYTES_PER_US_PER_GBPS);
}

static double message_us(const struct tp_fabric_impl *f, double bytes)
{
	return f->latency_us + wire_us(f, bytes);
}

/* ---- link classes ------------------------------------------------------------------------ */

const struct tp_fabric_impl *tp_cost_link(const struct tp_topology *t, uint32_t a, uint32_t b)
{
	int level = TP_LEVEL_CLUSTER;
	if (tp_topology_common_level(t, a, b, &level) != 0 || level < 0)
		return &t->fabric[0]; /* devices out of range: the slowest link, never a crash */
	/* the smallest common domain's own fabric (topology_fabric.c), else its level's */
	uint32_t node = t->dev_node[a];
	uint32_t dom = (unsigned)level == tp_node_level(t) ? node : tp_node_ancestor(t, node, level);
	return tp_dom_fabric(t, level, dom);
}

/* The fabric joining the children of parent domain p at fabric stage `stage`. */
static const struct tp_fabric_impl *stage_fabric(const struct tp_topology *t, unsigned stage,
                                                 uint32_t p)
{
	return tp_dom_fabric(t, (int)stage - 1, p);
}

/* GB/s between two devices of one node from its node type's pair figures (NVLink, else PCIe);
 * 0 when they do not apply (tp_nt_figures_apply, different nodes, no type, no figure). */
static double type_nvlink(const struct tp_topology *t, uint32_t a, uint32_t b)
{
	if (!t->type_nvlink || a == b)
		return 0.0;
	uint32_t node = t->dev_node[a];
	if (t->dev_node[b] != node || !t->node_type || t->node_type[node] == TP_NO_TYPE ||
	    !t->type_figures[t->node_type[node]])
		return 0.0;
	const struct tp_nodetype *nt = t->types[t->node_type[node]];
	uint32_t base = t->dev_first[node];
	if (nt->ngpus != tp_node_ndev(t, node))
		return 0.0;
	return tp_nt_pair_gbps(nt, a - base, b - base);
}

/* The node fabric's bandwidth between two devices of one node: their NVLink figure, or the
 * level's where there is none. */
static double node_pair_gbps(const struct tp_topology *t, const struct tp_fabric_impl *f,
                             uint32_t a, uint32_t b)
{
	double g = type_nvlink(t, a, b);
	return g > 0 ? g : f->gbps;
}

struct tp_fabric_impl tp_cost_pair(const struct tp_topology *t, uint32_t a, uint32_t b)
{
	struct tp_fabric_impl f = *tp_cost_link(t, a, b);
	double g = type_nvlink(t, a, b);
	if (g > 0)
		f.gbps = g;
	return f;
}

double tp_cost_p2p_us(const struct tp_topology *t, uint32_t a, uint32_t b, double bytes)
{
	if (a == b)
		return 0.0;
	struct tp_fabric_impl f = tp_cost_pair(t, a, b);
	return message_us(&f, bytes);
}

/* ---- ring all-reduce --------------------------------------------------------------------- */

double tp_cost_ring_allreduce_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                                 double bytes)
{
	if (n <= 1)
		return 0.0;
	/* Every step moves one chunk over every edge at once; the slowest edge sets the pace. */
	double chunk = bytes / (double)n;
	double step = 0.0;
	/* A pair's link depends only on the two devices' nodes (tp_cost_link), unless a node
	 * type's pair figures apply (same node, type_nvlink): runs of pairs between the same two
	 * nodes (every pair inside a node, in a placement's rank order) reuse the last one's. */
	uint32_t last_a = UINT32_MAX, last_b = UINT32_MAX;
	for (size_t i = 0; i < n; i++) {
		uint32_t a = devs[i], b = devs[(i + 1) % n];
		bool known = a < t->ndevices && b < t->ndevices;
		uint32_t na = known ? t->dev_node[a] : UINT32_MAX;
		uint32_t nb = known ? t->dev_node[b] : UINT32_MAX;
		if (known && na == last_a && nb == last_b)
			continue; /* same nodes as the pair before: the same step, already counted */
		/* two devices of one node without pair figures meet at the node's own fabric (what
		 * tp_cost_pair gives them) */
		bool same = known && na == nb && !t->type_nvlink;
		struct tp_fabric_impl f = same ? *tp_dom_fabric(t, (int)tp_node_level(t), na)
		                               : tp_cost_pair(t, a, b);
		double s = message_us(&f, chunk);
		if (s > step)
			step = s;
		bool reuse = known && (na != nb || !t->type_nvlink);
		last_a = reuse ? na : UINT32_MAX;
		last_b = reuse ? nb : UINT32_MAX;
		/* the rest of a node's run pairs the same node with itself: skip it at once */
		while (same && i + 2 < n && devs[i + 2] < t->ndevices && t->dev_node[devs[i + 2]] == na)
			i++;
	}
	return 2.0 * (double)(n - 1) * step;
}

/* ---- grouping by domain ------------------------------------------------------------------ */

/* Scratch of a collective over up to n devices, in one allocation. */
struct scratch {
	void *block;
	uint32_t *ids;  /* [n] each device's domain at the level being climbed */
	uint32_t *prev; /* [n] (all-to-all) participants in that domain */
	uint32_t *pick; /* [n] (step model) the devices of one group */
	double *acc;    /* [n * (PORT_CLASSES + 1)] (all-to-all) per-device wire time and latency */
};

#define ACC_STRIDE (PORT_CLASSES + 1)

static int scratch_alloc(const tp_allocator *a, size_t n, struct scratch *s)
{
	size_t per = ACC_STRIDE * sizeof(double) + 3 * sizeof(uint32_t);
	s->block = tp_mallocn(a, n ? n : 1, per);
	if (!s->block)
		return TP_ENOMEM;
	s->acc = s->block;
	s->ids = (uint32_t *)(s->acc + n * ACC_STRIDE);
	s->prev = s->ids + n;
	s->pick = s->prev + n;
	return 0;
}

static void scratch_free(const tp_allocator *a, struct scratch *s)
{
	tp_free(a, s->block);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Copy devs into ids, sorted, so that every domain's devices are contiguous. */
static void sort_devices(const uint32_t *devs, size_t n, uint32_t *ids)
{
	memcpy(ids, devs, n * sizeof *ids);
	qsort(ids, n, sizeof *ids, cmp_u32);
}

/* The parent of id at fabric stage `stage`: ids are devices when stage is the node's fabric
 * (node level + 1), domains of level `stage` otherwise; stage 0 joins the top-level domains. */
static uint32_t stage_parent(const struct tp_topology *t, unsigned stage, uint32_t id)
{
	if (stage == tp_node_level(t) + 1)
		return t->dev_node[id];
	if (stage == 0)
		return 0;
	return t->lv[stage].parent[id];
}

/* End of the run of ids[i..n) with the same parent at `stage`. */
static size_t parent_run_end(const struct tp_topology *t, const uint32_t *ids, size_t n,
                             size_t i, unsigned stage)
{
	uint32_t p = stage_parent(t, stage, ids[i]);
	size_t j = i + 1;
	while (j < n && stage_parent(t, stage, ids[j]) == p)
		j++;
	return j;
}

/* ---- hierarchical all-reduce ------------------------------------------------------------- */

/* One stage of the hierarchical all-reduce: inside every parent domain, the m children that take
 * part run a reduce-scatter and later an all-gather (ring, m - 1 steps each). A child of c
 * devices holds bytes / c per device after the stages below (each of its devices carries its
 * own shard over its own link), so the child with the fewest devices sets the pace. Returns the
 * slowest parent's time and replaces the ids by their parents. */
static double hier_stage(const struct tp_topology *t, uint32_t *ids, size_t n, unsigned stage,
                         double bytes)
{
	bool in_node = stage == tp_node_level(t) + 1 && t->type_nvlink;
	double worst = 0.0;
	for (size_t i = 0; i < n;) {
		size_t end = parent_run_end(t, ids, n, i, stage);
		const struct tp_fabric_impl *lf = stage_fabric(t, stage, stage_parent(t, stage, ids[i]));
		struct tp_fabric_impl fn = *lf;
		const struct tp_fabric_impl *f = lf;
		if (in_node) {
			/* the ring of the node's devices runs at its slowest pair */
			double slowest = 0.0;
			for (size_t j = i; j < end; j++)
				for (size_t k = j + 1; k < end; k++) {
					double g = node_pair_gbps(t, lf, ids[j], ids[k]);
					slowest = slowest == 0.0 || g < slowest ? g : slowest;
				}
			if (slowest > 0)
				fn.gbps = slowest;
			f = &fn;
		}
		size_t m = 0, fewest = SIZE_MAX;
		for (size_t j = i; j < end;) {
			size_t k = j + 1;
			while (k < end && ids[k] == ids[j])
				k++;
			m++;
			if (k - j < fewest)
				fewest = k - j;
			j = k;
		}
		if (m > 1) {
			double dm = (double)m;
			double s = 2.0 * ((dm - 1.0) * f->latency_us +
			                  (dm - 1.0) / dm * wire_us(f, bytes / (double)fewest));
			if (s > worst)
				worst = s;
		}
		uint32_t p = stage_parent(t, stage, ids[i]);
		for (size_t j = i; j < end; j++)
			ids[j] = p;
		i = end;
	}
	return worst;
}

/* Hierarchical all-reduce over sorted ids (overwritten). */
static double hier_sorted(const struct tp_topology *t, uint32_t *ids, size_t n, double bytes)
{
	double total = 0.0;
	for (unsigned stage = tp_node_level(t) + 1;; stage--) {
		total += hier_stage(t, ids, n, stage, bytes);
		if (ids[0] == ids[n - 1] || stage == 0)
			break; /* one domain holds everything: the stages above cost nothing */
	}
	return total;
}

double tp_cost_hier_allreduce_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                                 double bytes)
{
	if (n <= 1)
		return 0.0;
	struct scratch s;
	if (scratch_alloc(&t->alloc, n, &s))
		return TP_ENOMEM;
	sort_devices(devs, n, s.ids);
	double us = hier_sorted(t, s.ids, n, bytes);
	scratch_free(&t->alloc, &s);
	return us;
}

static double allreduce_with(const struct tp_topology *t, const uint32_t *devs, size_t n,
                             double bytes, struct scratch *s)
{
	if (n <= 1)
		return 0.0;
	double ring = tp_cost_ring_allreduce_us(t, devs, n, bytes);
	sort_devices(devs, n, s->ids);
	double hier = hier_sorted(t, s->ids, n, bytes);
	return hier < ring ? hier : ring;
}

double tp_cost_allreduce_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                            double bytes)
{
	if (n <= 1)
		return 0.0;
	struct scratch s;
	if (scratch_alloc(&t->alloc, n, &s))
		return TP_ENOMEM;
	double us = allreduce_with(t, devs, n, bytes, &s);
	scratch_free(&t->alloc, &s);
	return us;
}

/* ---- all-to-all -------------------------------------------------------------------------- */

/* Record, for every device, the peers it reaches over fabric `stage`: those sharing its parent
 * domain but not its child domain. prev holds the child's participants and becomes the
 * parent's. */
static void alltoall_stage(const struct tp_topology *t, struct scratch *s, size_t n,
                           unsigned stage, double per_peer)
{
	bool in_node = stage == tp_node_level(t) + 1 && t->type_nvlink;
	for (size_t i = 0; i < n;) {
		size_t end = parent_run_end(t, s->ids, n, i, stage);
		uint32_t p = stage_parent(t, stage, s->ids[i]);
		const struct tp_fabric_impl *f = stage_fabric(t, stage, p);
		unsigned port = port_class(f->kind);
		for (size_t j = i; j < end; j++) {
			uint32_t peers = (uint32_t)(end - i) - s->prev[j];
			double *acc = s->acc + j * ACC_STRIDE;
			if (peers && in_node) {
				/* each peer of the node at the pair's own bandwidth */
				for (size_t k = i; k < end; k++)
					if (k != j)
						acc[port] += per_peer / (node_pair_gbps(t, f, s->ids[j], s->ids[k]) *
						                         BYTES_PER_US_PER_GBPS);
				if (f->latency_us > acc[PORT_CLASSES])
					acc[PORT_CLASSES] = f->latency_us;
			} else if (peers) {
				acc[port] += wire_us(f, (double)peers * per_peer);
				if (f->latency_us > acc[PORT_CLASSES])
					acc[PORT_CLASSES] = f->latency_us;
			}
		}
		/* only now: the node stage above reads the run's device ids */
		for (size_t j = i; j < end; j++) {
			s->prev[j] = (uint32_t)(end - i);
			s->ids[j] = p;
		}
		i = end;
	}
}

/* All-to-all over devs using s (n entries). Per device: the wire time of each port class is the
 * sum over the fabrics of that class (they share the ports); classes run in parallel; one
 * latency of the slowest fabric it uses is added. The slowest device sets the pace. */
static double alltoall_with(const struct tp_topology *t, const uint32_t *devs, size_t n,
                            double bytes, struct scratch *s)
{
	if (n <= 1)
		return 0.0;
	sort_devices(devs, n, s->ids);
	for (size_t i = 0; i < n; i++)
		s->prev[i] = 1;
	memset(s->acc, 0, n * ACC_STRIDE * sizeof *s->acc);
	double per_peer = bytes / (double)n;
	for (unsigned stage = tp_node_level(t) + 1;; stage--) {
		alltoall_stage(t, s, n, stage, per_peer);
		if (stage == 0)
			break;
	}
	double worst = 0.0;
	for (size_t i = 0; i < n; i++) {
		const double *acc = s->acc + i * ACC_STRIDE;
		double wire = 0.0;
		for (unsigned c = 0; c < PORT_CLASSES; c++)
			wire = acc[c] > wire ? acc[c] : wire;
		double us = wire + acc[PORT_CLASSES];
		worst = us > worst ? us : worst;
	}
	return worst;
}

double tp_cost_alltoall_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                           double bytes)
{
	if (n <= 1)
		return 0.0;
	struct scratch s;
	if (scratch_alloc(&t->alloc, n, &s))
		return TP_ENOMEM;
	double us = alltoall_with(t, devs, n, bytes, &s);
	scratch_free(&t->alloc, &s);
	return us;
}

/* ---- the training step ------------------------------------------------------------------- */

static bool finite_nonneg(double x)
{
	return isfinite(x) && x >= 0.0;
}

/* Write a failure's message into the caller's buffer (if any) and return code. */
static int TP_PRINTF(4, 5) cost_err(char *buf, size_t len, int code, const char *fmt, ...)
{
	if (buf && len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(buf, len, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* The figures of a step model that must be finite and >= 0, by field name. */
static const char *bad_figure(const struct tp_step_model *m, double *v)
{
	const struct {
		const char *name;
		double v;
	} f[] = {{"compute_us", m->compute_us}, {"tp_bytes", m->tp_bytes},
	         {"dp_bytes", m->dp_bytes},     {"pp_bytes", m->pp_bytes},
	         {"ep_bytes", m->ep_bytes}};
	for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
		if (!finite_nonneg(f[i].v)) {
			*v = f[i].v;
			return f[i].name;
		}
	return NULL;
}

/* The model's own fields: version, degrees, figures. */
static int model_check(const struct tp_step_model *m, size_t n, char *err, size_t len)
{
	if (m->version < 1 || m->version > TP_STEP_MODEL_VERSION)
		return cost_err(err, len, TP_EINVAL, "model.version %u is not 1 to %d", m->version,
		                TP_STEP_MODEL_VERSION);
	if (m->tp == 0 || m->pp == 0 || m->dp == 0)
		return cost_err(err, len, TP_EINVAL, "model.%s is 0: every degree is at least 1",
		                m->tp == 0 ? "tp" : m->pp == 0 ? "pp" : "dp");
	/* tp * pp * dp == n, by division so that no product can overflow */
	if (n % m->tp || n / m->tp % m->pp || n / m->tp / m->pp != m->dp)
		return cost_err(err, len, TP_EINVAL,
		                "model.tp %u x model.pp %u x model.dp %u is not the %zu devices",
		                m->tp, m->pp, m->dp, n);
	if (m->ep > 1 && m->dp % m->ep != 0)
		return cost_err(err, len, TP_EINVAL, "model.ep %u does not divide model.dp %u",
		                m->ep, m->dp);
	double v;
	const char *field = bad_figure(m, &v);
	if (field)
		return cost_err(err, len, TP_EINVAL, "model.%s %g is negative or not finite", field,
		                v);
	if (!(m->dp_overlap >= 0.0 && m->dp_overlap <= 1.0))
		return cost_err(err, len, TP_EINVAL, "model.dp_overlap %g is outside [0, 1]",
		                m->dp_overlap);
	double floor = tp_cost_model_floor(m);
	if (!(floor >= 0.0 && floor <= 1.0))
		return cost_err(err, len, TP_EINVAL, "model.min_efficiency %g is outside [0, 1]",
		                floor);
	double fit = tp_cost_model_fit(m);
	if (!(fit >= 0.0 && fit <= 1.0))
		return cost_err(err, len, TP_EINVAL, "model.fabric_fit %g is outside [0, 1]", fit);
	return 0;
}

double tp_cost_model_fit(const tp_step_model *m)
{
	return m->version >= 3 ? m->fabric_fit : 0.0;
}

double tp_cost_model_floor(const tp_step_model *m)
{
	return m->version >= 2 ? m->min_efficiency : 0.0;
}

bool tp_cost_model_floor_search(const tp_step_model *m)
{
	return m->version < 3 || !m->no_floor_search;
}

int tp_cost_model_check(const tp_step_model *m, size_t n, char *err, size_t len)
{
	return model_check(m, n, err, len);
}

/* The arguments of tp_cost_step_us and tp_cost_efficiency. */
static int step_check(const void *out, const struct tp_topology *t, const uint32_t *devs,
                      size_t n, const struct tp_step_model *m, const tp_allocator *alloc,
                      char *err, size_t len)
{
	if (!out)
		return cost_err(err, len, TP_EINVAL, "out is NULL");
	if (!t)
		return cost_err(err, len, TP_EINVAL, "topology is NULL");
	if (!m)
		return cost_err(err, len, TP_EINVAL, "model is NULL");
	if (n && !devs)
		return cost_err(err, len, TP_EINVAL, "devs is NULL with n %zu", n);
	if (!tp_alloc_valid(alloc))
		return cost_err(err, len, TP_EINVAL, "alloc has a NULL function");
	if (n > t->ndevices)
		return cost_err(err, len, TP_EINVAL, "n %zu is more than the topology's %u devices",
		                n, t->ndevices);
	int rc = model_check(m, n, err, len);
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++)
		if (devs[i] >= t->ndevices)
			return cost_err(err, len, TP_EINVAL,
			                "devs[%zu] %u is out of range: the topology has %u devices", i,
			                devs[i], t->ndevices);
	return 0;
}

/* The slowest device's relative speed (it sets the pace of synchronous steps). */
static double slowest_perf(const struct tp_topology *t, const uint32_t *devs, size_t n)
{
	double p = INFINITY;
	for (size_t i = 0; i < n; i++)
		if (t->dev_perf[devs[i]] < p)
			p = t->dev_perf[devs[i]];
	return n && p > 0.0 ? p : 1.0;
}

/* Rank of (tensor index, data index, pipeline stage) in Megatron order. */
static size_t rank_of(const struct tp_step_model *m, size_t ti, size_t di, size_t pi)
{
	return ti + (size_t)m->tp * (di + (size_t)m->dp * pi);
}

/* Every tensor group is a contiguous run of tp ranks; all run at once, the slowest counts. */
static double tp_term(const struct tp_topology *t, const uint32_t *devs, size_t n,
                      const struct tp_step_model *m)
{
	if (m->tp <= 1 || m->tp_msgs == 0)
		return 0.0;
	double worst = 0.0;
	for (size_t base = 0; base < n; base += m->tp) {
		double us = tp_cost_ring_allreduce_us(t, devs + base, m->tp, m->tp_bytes);
		worst = us > worst ? us : worst;
	}
	return worst * m->tp_msgs;
}

static double dp_term(const struct tp_topology *t, const uint32_t *devs,
                      const struct tp_step_model *m, struct scratch *s)
{
	if (m->dp <= 1 || m->dp_bytes <= 0.0)
		return 0.0;
	double worst = 0.0;
	for (size_t pi = 0; pi < m->pp; pi++) {
		for (size_t ti = 0; ti < m->tp; ti++) {
			for (size_t di = 0; di < m->dp; di++)
				s->pick[di] = devs[rank_of(m, ti, di, pi)];
			double us = allreduce_with(t, s->pick, m->dp, m->dp_bytes, s);
			worst = us > worst ? us : worst;
		}
	}
	return worst * (1.0 - m->dp_overlap);
}

static double pp_term(const struct tp_topology *t, const uint32_t *devs,
                      const struct tp_step_model *m)
{
	if (m->pp <= 1 || m->pp_msgs == 0)
		return 0.0;
	size_t stage = (size_t)m->tp * m->dp;
	double worst = 0.0;
	for (size_t pi = 0; pi + 1 < m->pp; pi++) {
		for (size_t r = 0; r < stage; r++) {
			size_t a = pi * stage + r;
			double us = tp_cost_p2p_us(t, devs[a], devs[a + stage], m->pp_bytes);
			worst = us > worst ? us : worst;
		}
	}
	return worst * m->pp_msgs;
}

/* Expert groups: ep consecutive data-parallel ranks of one tensor index and stage. */
static double ep_term(const struct tp_topology *t, const uint32_t *devs,
                      const struct tp_step_model *m, struct scratch *s)
{
	if (m->ep <= 1 || m->ep_msgs == 0)
		return 0.0;
	double worst = 0.0;
	for (size_t pi = 0; pi < m->pp; pi++) {
		for (size_t ti = 0; ti < m->tp; ti++) {
			for (size_t d0 = 0; d0 < m->dp; d0 += m->ep) {
				for (size_t e = 0; e < m->ep; e++)
					s->pick[e] = devs[rank_of(m, ti, d0 + e, pi)];
				double us = alltoall_with(t, s->pick, m->ep, m->ep_bytes, s);
				worst = us > worst ? us : worst;
			}
		}
	}
	return worst * m->ep_msgs;
}

/* The step time of a checked model with the compute term at relative speed perf. */
static double step_at(const struct tp_topology *t, const uint32_t *devs, size_t n,
                      const struct tp_step_model *m, double perf, struct scratch *s)
{
	return m->compute_us / perf + tp_term(t, devs, n, m) + dp_term(t, devs, m, s) +
	       pp_term(t, devs, m) + ep_term(t, devs, m, s);
}

int tp_step_model_init(tp_step_model *m, unsigned version)
{
	static const tp_step_model init = TP_STEP_MODEL_INIT;
	return tp_options_init(m, tp_step_model_size(version), &init, version);
}

int tp_cost_step_us(double *out_us, const tp_topology *t, const uint32_t *devs, size_t n,
                    const tp_step_model *m, const tp_allocator *alloc, char *errbuf,
                    size_t errlen)
{
	if (errbuf && errlen)
		errbuf[0] = '\0';
	int rc = step_check(out_us, t, devs, n, m, alloc, errbuf, errlen);
	if (rc)
		return rc;
	tp_allocator a = tp_alloc_resolve(alloc);
	struct scratch s;
	if (scratch_alloc(&a, m->dp, &s))
		return cost_err(errbuf, errlen, TP_ENOMEM, "out of memory for %u devices' scratch",
		                m->dp);
	*out_us = step_at(t, devs, n, m, slowest_perf(t, devs, n), &s);
	scratch_free(&a, &s);
	return 0;
}

/* ---- efficiency -------------------------------------------------------------------------- */

/* Move *cur forward so that a group of g devices starting there crosses no domain boundary
 * that a whole group could have stayed inside: when the rest of the current domain (at any
 * level, the node included) is too small but the domain itself could hold g, skip to the next
 * domain. Returns false when the devices run out. */
static bool align_group(const struct tp_topology *t, uint32_t *cur, unsigned g)
{
	unsigned nl = tp_node_level(t);
	for (;;) {
		if ((uint64_t)*cur + g > t->ndevices)
			return false;
		bool moved = false;
		uint32_t node = t->dev_node[*cur];
		for (unsigned l = 0; l <= nl && !moved; l++) {
			uint32_t dom = l == nl ? node : tp_node_ancestor(t, node, l);
			uint32_t first, nn;
			tp_dom_nodes(t, l, dom, &first, &nn);
			uint32_t end = t->dev_first[first + nn];
			uint32_t size = end - t->dev_first[first];
			if (end - *cur < g && size >= g) {
				*cur = end;
				moved = true;
			}
		}
		if (!moved)
			return true;
	}
}

/* Take up to `quota` devices (whole groups of g) from each domain of `level` in turn, in tree
 * order inside each domain with groups kept whole (align_group). False when the domains run
 * out before n devices are taken. */
static bool quota_layout(const struct tp_topology *t, size_t n, unsigned g, unsigned level,
                         size_t quota, uint32_t *out)
{
	size_t k = 0;
	for (uint32_t d = 0; d < t->lv[level].ndom && k < n; d++) {
		uint32_t first, nn;
		tp_dom_nodes(t, level, d, &first, &nn);
		uint32_t cur = t->dev_first[first], end = t->dev_first[first + nn];
		for (size_t took = 0; took + g <= quota && k < n; took += g) {
			if (!align_group(t, &cur, g) || cur + g > end)
				break;
			for (unsigned i = 0; i < g; i++)
				out[k++] = cur++;
		}
	}
	return k == n;
}

/* The balanced quota per domain of `level`: the fewest domains that can hold n devices in whole
 * groups of g, filled evenly (512 GPUs in racks of 72 with groups of 8: 8 racks of 64). 0 when
 * one domain cannot hold a group. */
static size_t balanced_quota(const struct tp_topology *t, size_t n, unsigned g, unsigned level)
{
	size_t most = t->lv[level].max_devices / g * g;
	if (most == 0)
		return 0;
	size_t ndom = (n + most - 1) / most;
	size_t share = (n + ndom - 1) / ndom;
	size_t quota = (share + g - 1) / g * g;
	return quota < most ? quota : most;
}

/* The step time of m on the best of a few packed placements on an empty cluster of the same
 * topology: the whole job in tree order with tensor groups kept whole, and for every level the
 * balanced quota per domain. buf holds n devices. */
static double ideal_step(const struct tp_topology *t, size_t n, const struct tp_step_model *m,
                         double perf, struct scratch *s, uint32_t *buf)
{
	double best = INFINITY;
	uint32_t cur = 0;
	bool ok = true;
	for (size_t k = 0; k < n && ok; k += m->tp) {
		ok = align_group(t, &cur, m->tp);
		for (unsigned i = 0; ok && i < m->tp; i++)
			buf[k + i] = cur++;
	}
	if (ok)
		best = step_at(t, buf, n, m, perf, s);
	for (unsigned level = 0; level < t->nlevels; level++) {
		size_t quota = balanced_quota(t, n, m->tp, level);
		if (quota && quota_layout(t, n, m->tp, level, quota, buf)) {
			double us = step_at(t, buf, n, m, perf, s);
			best = us < best ? us : best;
		}
	}
	if (best == INFINITY) { /* groups cannot be kept whole: the first n devices */
		for (size_t i = 0; i < n; i++)
			buf[i] = (uint32_t)i;
		best = step_at(t, buf, n, m, perf, s);
	}
	return best;
}

int tp_cost_efficiency(double *out, const tp_topology *t, const uint32_t *devs, size_t n,
                       const tp_step_model *m, const tp_allocator *alloc, char *errbuf,
                       size_t errlen)
{
	if (errbuf && errlen)
		errbuf[0] = '\0';
	int rc = step_check(out, t, devs, n, m, alloc, errbuf, errlen);
	if (rc)
		return rc;
	tp_allocator a = tp_alloc_resolve(alloc);
	struct scratch s;
	uint32_t *ideal = NULL;
	if (scratch_alloc(&a, m->dp, &s))
		return cost_err(errbuf, errlen, TP_ENOMEM, "out of memory for %u devices' scratch",
		                m->dp);
	ideal = tp_mallocn(&a, n ? n : 1, sizeof *ideal);
	if (!ideal) {
		scratch_free(&a, &s);
		return cost_err(errbuf, errlen, TP_ENOMEM,
		                "out of memory for the ideal layout of %zu devices", n);
	}
	double perf = slowest_perf(t, devs, n);
	double actual = step_at(t, devs, n, m, perf, &s);
	double best = ideal_step(t, n, m, perf, &s, ideal);
	tp_free(&a, ideal);
	scratch_free(&a, &s);
	*out = !(actual > 0.0) || best >= actual ? 1.0 : best / actual;
	return 0;
}
