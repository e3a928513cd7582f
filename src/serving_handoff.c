/* SPDX-License-Identifier: MIT */
/*
 * The KV hand-off model behind "auto" locality of prefill/decode groups (tp_pd_place with
 * locality TP_PD_LOCALITY_AUTO). A prefill instance hands each request's KV cache to a decode
 * instance of its group; kept inside one domain of level L, the worst pair meets on L's fabric.
 * Packing a group into a tighter domain only pays when that fabric is faster: vLLM #55434
 * measured a multi-node NVLink hand-off slower than RDMA, llm-d #2315 saw no gain from topology
 * routing on 2 x 8 H200. So the candidates whose hand-off is within the slack of the fastest are
 * tried loosest first (more places a group may go), then the slower ones fastest first.
 */
#include <stdlib.h>

#include "common.h"
#include "serving_internal.h"

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
	if (!(r->kv_token_bytes > 0.0) || r->prompt_tokens == 0)
		return 0.0;
	double gbps, lat;
	meeting_fabric(t, level, &gbps, &lat);
	unsigned lanes = r->prefill_devices < r->decode_devices ? r->prefill_devices
	                                                        : r->decode_devices;
	double bytes = r->kv_token_bytes * (double)r->prompt_tokens;
	if (!(gbps > 0.0))
		return lat;
	return lat + bytes / (gbps * 1e3 * lanes); /* GB/s = 1e3 bytes per microsecond */
}

/* Whether one domain of `level` holds a whole group. */
static bool holds_group(const tp_topology *t, unsigned level, uint64_t group)
{
	uint32_t n = tp_topology_domain_count(t, level);
	for (uint32_t d = 0; d < n; d++) {
		uint32_t first, count;
		if (tp_topology_domain_devices(t, level, d, &first, &count) == 0 && count >= group)
			return true;
	}
	return false;
}

static int by_time_then_loosest(const void *a, const void *b)
{
	const struct tp_pd_handoff *x = a, *y = b;
	if (x->us != y->us)
		return x->us < y->us ? -1 : 1;
	return (x->level > y->level) - (x->level < y->level); /* none (-1) first */
}

size_t tp_pd_handoff_candidates(const tp_topology *t, const tp_pd_request *r,
                                struct tp_pd_handoff *out)
{
	unsigned levels = tp_topology_level_count(t);
	int inst = r->instance_level ? tp_topology_level_by_name(t, r->instance_level)
	                             : (int)levels - 1;
	uint64_t group = (uint64_t)r->prefill * r->prefill_devices +
	                 (uint64_t)r->decode * r->decode_devices;
	size_t n = 0;
	out[n++] = (struct tp_pd_handoff){-1, tp_pd_handoff_us(t, r, -1)};
	for (int l = inst; l >= 0; l--)
		if (holds_group(t, (unsigned)l, group))
			out[n++] = (struct tp_pd_handoff){l, tp_pd_handoff_us(t, r, l)};
	qsort(out, n, sizeof *out, by_time_then_loosest);
	/* Within the slack of the fastest: loosest first (a smaller level index is looser). */
	double bound = out[0].us * (1.0 + r->handoff_slack);
	size_t near = 0;
	while (near < n && out[near].us <= bound)
		near++;
	for (size_t i = 1; i < near; i++)
		for (size_t j = i; j > 0 && out[j].level < out[j - 1].level; j--) {
			struct tp_pd_handoff x = out[j];
			out[j] = out[j - 1];
			out[j - 1] = x;
		}
	return n;
}
