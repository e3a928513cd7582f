/* SPDX-License-Identifier: MIT */
/* Shared by the files of the serving family (serving_*.c): the KV hand-off model of "auto"
 * locality (serving_handoff.c). */
#ifndef TP_SERVING_INTERNAL_H
#define TP_SERVING_INTERNAL_H

#include <stddef.h>

#include "topoplace-sizing.h"

/* A locality a group may be kept to: a level index, or -1 for none, with the modelled
 * hand-off of one request's KV cache at it. */
struct tp_pd_handoff {
	int level;
	double us;
};

/* The hand-off of one request when prefill and decode meet at a domain of `level` (-1: no
 * locality, the widest fabric); 0 without kv_token_bytes or prompt_tokens. */
double tp_pd_handoff_us(const tp_topology *t, const tp_pd_request *r, int level);

/* The candidates of "auto" locality in trying order (at most TP_MAX_LEVELS + 1 in out). */
size_t tp_pd_handoff_candidates(const tp_topology *t, const tp_pd_request *r,
                                struct tp_pd_handoff *out);

#endif
