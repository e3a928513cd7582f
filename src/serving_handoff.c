/* SPDX-License-Identifier: MIT */
/*
 * The KV hand-off model behind "auto" locality of prefill/decode groups (tp_pd_place with
 * locality TP_PD_LOCALITY_AUTO). A prefill instance hands each request's KV cache to a decode
 * instance of its group; kept inside one domain of level L, the worst pair meets on that
 * domain's fabric: its own (tp_topology_builder_set_domain_fabric), at the node level its node
 * type's (tp_nodetype_set_fabric), else L's. So the candidates are worked out for the domains a
 * group may use (the spread domain tried, or the cluster): on a mixed fleet an NVL72 rack and
 * an HGX rack beside it give different answers, and a level whose domains there differ gives
 * one candidate per fabric, kept to its domains. Packing a group into a tighter domain only
 * pays when that fabric is faster: vLLM #55434 measured a multi-node NVLink hand-off slower
 * than RDMA, llm-d #2315 saw no gain from topology routing on 2 x 8 H200. So the candidates
 * whose hand-off is within the slack of the fastest are tried loosest first (more places a
 * group may go), then the slower ones fastest first.
 */
#include <stdlib.h>

#include "common.h"
#include "serving_internal.h"

/* The hand-off of one request on a fabric of gbps GB/s per device and lat microseconds. */
static double handoff_on(const tp_pd_request *r, double gbps, double lat)
{
	if (!(r->kv_token_bytes > 0.0) || r->prompt_tokens == 0)
		return 0.0;
	unsigned lanes = r->prefill_devices < r->decode_devices ? r->prefill_devices
	                                                        : r->decode_devices;
	double bytes = r->kv_token_bytes * (double)r->prompt_tokens;
	if (!(gbps > 0.0))
		return lat;
	return lat + bytes / (gbps * 1e3 * lanes); /* GB/s = 1e3 bytes per microsecond */
}

/* The fabric two devices meet on when their smallest common domain is of `level`; for no
 * locality, the fabric above the top level (or the top level's when it has one domain). */
static void meeting_fabric(const tp_topology *t, int level, double *gbps, double *lat_us)
{
	int f = level;
	if (level < 0)
		f = tp_topology_domain_count(t, 0) > 1 ? TP_LEVEL_CLUSTER : 0;
	*gbps = 0.0;
	*lat_us = 0.0;
	tp_topology_fabric(t, f, NULL, gbps, lat_us);
}

double tp_pd_handoff_us(const tp_topology *t, const tp_pd_request *r, int level)
{
	double gbps, lat;
	meeting_fabric(t, level, &gbps, &lat);
	return handoff_on(r, gbps, lat);
}

double tp_pd_handoff_in(const tp_topology *t, const tp_pd_request *r, int level, uint32_t dom)
{
	if (level < 0)
		return tp_pd_handoff_us(t, r, -1);
	double gbps = 0.0, lat = 0.0;
	tp_topology_domain_fabric(t, level, dom, NULL, &gbps, &lat);
	return handoff_on(r, gbps, lat);
}

static uint64_t group_devices(const tp_pd_request *r)
{
	return (uint64_t)r->prefill * r->prefill_devices + (uint64_t)r->decode * r->decode_devices;
}

/* Whether domain d of level l holds a whole group, and its fabric. */
static bool domain_holds(const tp_topology *t, unsigned l, uint32_t d, uint64_t group,
                         double *gbps, double *lat)
{
	uint32_t first, count;
	if (tp_topology_domain_devices(t, l, d, &first, &count) || count < group)
		return false;
	*gbps = 0.0;
	*lat = 0.0;
	tp_topology_domain_fabric(t, (int)l, d, NULL, gbps, lat);
	return true;
}

/* Add level l's candidate of fabric (gbps, lat) unless there is one; false when full. */
static bool add_class(struct tp_pd_handoff *out, size_t *n, size_t from, int l, double gbps,
                      double lat, const tp_pd_request *r)
{
	for (size_t i = from; i < *n; i++)
		if (out[i].gbps == gbps && out[i].lat == lat)
			return true;
	if (*n >= TP_PD_MAX_CANDIDATES)
		return false;
	out[(*n)++] = (struct tp_pd_handoff){l, handoff_on(r, gbps, lat), gbps, lat, false};
	return true;
}

static int by_time_then_loosest(const void *a, const void *b)
{
	const struct tp_pd_handoff *x = a, *y = b;
	if (x->us != y->us)
		return x->us < y->us ? -1 : 1;
	if (x->level != y->level)
		return (x->level > y->level) - (x->level < y->level); /* none (-1) first */
	return (x->gbps < y->gbps) - (x->gbps > y->gbps);
}

/* Within the slack of the fastest: loosest first (a smaller level index is looser). */
static void order(struct tp_pd_handoff *out, size_t n, double slack)
{
	qsort(out, n, sizeof *out, by_time_then_loosest);
	double bound = out[0].us * (1.0 + slack);
	size_t near = 0;
	while (near < n && out[near].us <= bound)
		near++;
	for (size_t i = 1; i < near; i++)
		for (size_t j = i; j > 0 && out[j].level < out[j - 1].level; j--) {
			struct tp_pd_handoff x = out[j];
			out[j] = out[j - 1];
			out[j - 1] = x;
		}
}

size_t tp_pd_handoff_scope(const tp_topology *t, const tp_pd_request *r, int spread,
                           uint32_t dom, struct tp_pd_handoff *out)
{
	unsigned levels = tp_topology_level_count(t);
	int inst = r->instance_level ? tp_topology_level_by_name(t, r->instance_level)
	                             : (int)levels - 1;
	uint64_t group = group_devices(r);
	uint32_t first = 0, nn = tp_topology_node_count(t);
	if (spread >= 0 && dom != TP_NONE)
		tp_topology_domain_nodes(t, (unsigned)spread, dom, &first, &nn);
	else
		spread = -1;
	size_t n = 0;
	out[n++] = (struct tp_pd_handoff){-1, tp_pd_handoff_us(t, r, -1), 0.0, 0.0, false};
	meeting_fabric(t, -1, &out[0].gbps, &out[0].lat);
	for (int l = inst; l >= 0; l--) {
		size_t from = n;
		uint32_t prev = TP_NONE;
		double gbps, lat;
		/* the level's domains the scope's nodes lie in, once each (they come in runs) */
		for (uint32_t node = first; node < first + nn; node++) {
			uint32_t d = tp_topology_node_domain(t, node, (unsigned)l);
			if (d == prev)
				continue;
			prev = d;
			if (domain_holds(t, (unsigned)l, d, group, &gbps, &lat) &&
			    !add_class(out, &n, from, l, gbps, lat, r))
				break;
			if (l <= spread)
				break; /* one domain of l holds the whole scope */
		}
		for (size_t i = from; n - from > 1 && i < n; i++)
			out[i].narrow = true; /* its domains differ: each candidate keeps to its own */
	}
	order(out, n, r->handoff_slack);
	return n;
}

bool tp_pd_handoff_admits(const tp_topology *t, const tp_pd_request *r,
                          const struct tp_pd_handoff *h, uint32_t node)
{
	if (!h->narrow || h->level < 0)
		return true;
	uint32_t d = tp_topology_node_domain(t, node, (unsigned)h->level);
	double gbps, lat;
	return domain_holds(t, (unsigned)h->level, d, group_devices(r), &gbps, &lat) &&
	       gbps == h->gbps && lat == h->lat;
}
