/* SPDX-License-Identifier: MIT */
/* Shared by the files of the serving family (serving_*.c): the KV hand-off model of "auto"
 * locality (serving_handoff.c). */
#ifndef TP_SERVING_INTERNAL_H
#define TP_SERVING_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "topoplace-sizing.h"

/* The most candidates of "auto" locality for one scope. */
#define TP_PD_MAX_CANDIDATES 32

/* A locality a group may be kept to: a level index, or -1 for none, with the modelled
 * hand-off of one request's KV cache at it and the fabric that gives it; narrow: the level's
 * domains in the scope have different fabrics, and this candidate keeps to those of its own
 * (tp_pd_handoff_admits). */
struct tp_pd_handoff {
	int level;
	double us;
	double gbps, lat;
	bool narrow;
};

/* The hand-off of one request when prefill and decode meet at a domain of `level` (-1: no
 * locality, the widest fabric), on the level's fabric; 0 without kv_token_bytes or
 * prompt_tokens. */
double tp_pd_handoff_us(const tp_topology *t, const tp_pd_request *r, int level);

/* The hand-off of one request of a group kept to domain dom of level (-1: no locality), on
 * that domain's own fabric (tp_topology_domain_fabric). */
double tp_pd_handoff_in(const tp_topology *t, const tp_pd_request *r, int level, uint32_t dom);

/* The candidates of "auto" locality in trying order for a group kept to domain dom of level
 * spread (spread -1 or dom TP_NONE: anywhere), each level's from the fabrics of its domains
 * there that hold a whole group (at most TP_PD_MAX_CANDIDATES in out). Walks the scope's nodes
 * once per level. */
size_t tp_pd_handoff_scope(const tp_topology *t, const tp_pd_request *r, int spread,
                           uint32_t dom, struct tp_pd_handoff *out);

/* Whether a group tried at candidate h may use node (its domain of h's level has h's fabric
 * and holds a group; always for a candidate that is not narrow). */
bool tp_pd_handoff_admits(const tp_topology *t, const tp_pd_request *r,
                          const struct tp_pd_handoff *h, uint32_t node);

#endif
