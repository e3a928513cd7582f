/* SPDX-License-Identifier: MIT */
/*
 * The communication cost model (alpha-beta per fabric level). Private; cost.c implements it.
 *
 * A link class is the level of the smallest domain two devices share (node level = fastest,
 * TP_LEVEL_CLUSTER = between top-level domains); its fabric gives bandwidth (GB/s per device,
 * one direction) and latency. Times are in microseconds, sizes in bytes.
 */
#ifndef TP_COST_H
#define TP_COST_H

#include "topology_impl.h"

/* The fabric of the smallest level two devices share (the node level's fabric for two devices
 * of one node, and for a == b). O(depth). */
const struct tp_fabric_impl *tp_cost_link(const struct tp_topology *t, uint32_t a, uint32_t b);

/* What two devices use: tp_cost_link's fabric, except that two GPUs of one node whose node type
 * has an NVLink figure for the pair talk at that bandwidth (unless the caller set the node
 * level's fabric: t->type_nvlink). Every collective below prices node traffic this way. */
struct tp_fabric_impl tp_cost_pair(const struct tp_topology *t, uint32_t a, uint32_t b);

/*
 * Every function below takes devices that are valid ids (asserted, not checked), returns a
 * time in microseconds, and returns 0 for
 * n <= 1. Those that need scratch memory take it from the topology's allocator (so they may run
 * on a shared topology only when that allocator is thread-safe) and return TP_ENOMEM (a
 * negative value) when it fails. None keeps state.
 */

/* Ring all-reduce of `bytes` over devs in the given (rank) order: 2(n-1) steps, each moving
 * bytes/n over every edge of the ring at once (the ring closes from the last device to the
 * first), so a step costs the slowest edge's latency + bytes/n / bandwidth. One ring, one
 * channel: this is the bound for a collective that cannot spread over every NIC of a node.
 * Never allocates. */
double tp_cost_ring_allreduce_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                                 double bytes);

/* Hierarchical all-reduce: from the node up to the cluster, inside every domain the child
 * domains that take part run a ring reduce-scatter (and later the mirror all-gather) over that
 * level's fabric. m children per domain cost 2((m-1) latency + (m-1)/m * S / bandwidth), where
 * S = bytes / (devices of the smallest child): every device carries its own shard over its own
 * link (one NIC per GPU). The slowest domain of a level sets its pace; levels add up. Rank order
 * does not matter. O(n log n). May return TP_ENOMEM. */
double tp_cost_hier_allreduce_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                                 double bytes);

/* The faster of the ring (in the given order) and the hierarchical all-reduce: what a collective
 * library that picks its algorithm would reach. May return TP_ENOMEM. */
double tp_cost_allreduce_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                            double bytes);

/* All-to-all where every device sends bytes/n to every other (expert parallelism), so that each
 * device exchanges bytes (n-1)/n. A device's traffic to the peers it reaches over one fabric
 * level goes at that level's per-device bandwidth; levels whose link kind uses the same ports
 * (NVLink; PCIe; the network: IB and Ethernet) add up, different port classes run in parallel;
 * one latency of the slowest level it uses is added. The slowest device sets the pace. Rank
 * order does not matter. O(n log n). May return TP_ENOMEM. */
double tp_cost_alltoall_us(const struct tp_topology *t, const uint32_t *devs, size_t n,
                           double bytes);

/* Point-to-point transfer of `bytes` from a to b (a pipeline stage boundary): latency +
 * bytes / bandwidth of their link class; 0 when a == b. */
double tp_cost_p2p_us(const struct tp_topology *t, uint32_t a, uint32_t b, double bytes);

/* Check a step model's own fields for a job of n devices (version, degrees that multiply to
 * n, figures): 0, or TP_EINVAL with a message ("model.tp 2 x model.pp 1 x model.dp 3 is not the
 * 8 devices") in err (len bytes). */
int tp_cost_model_check(const tp_step_model *m, size_t n, char *err, size_t len);

/* The efficiency floor of a step model: its min_efficiency, 0 for a model of version 1 (which
 * has no such field; nothing past its own fields is read). */
double tp_cost_model_floor(const tp_step_model *m);

/* Whether tp_place() searches the fabric classes when the floor refuses its rules' choice:
 * true but for a model of version 3 or later with no_floor_search set. */
bool tp_cost_model_floor_search(const tp_step_model *m);

/* The fabric fit of a step model: its fabric_fit, 0 (off) for a model of version 1 or 2. */
double tp_cost_model_fit(const tp_step_model *m);

/* The training step model (tp_step_model, tp_cost_step_us, tp_cost_efficiency) is public:
 * include/topoplace.h. Its scratch comes from the caller's allocator, not the topology's. */

#endif
