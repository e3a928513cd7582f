/* SPDX-License-Identifier: MIT */
/*
 * A baseline that places a request the way Kueue's topology-aware scheduling does
 * (kubernetes-sigs/kueue, pkg/cache/tas_flavor_snapshot.go; summarised in shared/PEERS.md):
 *
 *   1. for every node, count how many pods (of `pod` devices) fit in its free devices, and sum
 *      these counts up the tree; at the slice level, turn pods into slices. This recount over
 *      every node happens for every request, as in Kueue, and dominates its cost at scale;
 *   2. at the requested level, pick a domain by BestFit; with `required`, the domain must hold
 *      everything (else the request waits); with `preferred`, go one level up while no domain
 *      holds everything, and at the top take domains greedily, largest first, with the last one
 *      replaced by the tightest domain that still holds the remainder;
 *   3. descend level by level with the same rule (largest first, tightest last), in slices at
 *      and above the slice level and in pods below it; in a node take the lowest free devices.
 *   Unconstrained requests use LeastFreeCapacity: nodes with the least free room first.
 *
 * Where it simplifies or departs from Kueue (documented in docs/benchmarks.md too):
 *   - Which single domain holds a required (or preferred) request is decided by one of two
 *     rules (kq_set_rule): KQ_RULE_KUEUE, the fewest slices (pods) that fit, then the fewest
 *     free devices, then the index (our reading of BestFit; Kueue breaks the last ties by
 *     name); or KQ_RULE_TP, tp_place's own objective for a request one domain holds (fewest
 *     nodes, then the tightest domain, then the tightest ancestors from the top, then the
 *     tightest nodes), so that `tp-bench place` compares the two at equal answers: with it,
 *     required-rack requests land in the same rack as tp_place's. Below the chosen domain
 *     both rules use Kueue's "largest first, tightest last" (devices may differ from
 *     tp_place's; the rack does not). Above the level just over the nodes, KQ_RULE_TP does not
 *     count the racks and nodes a domain would need (tp_place does).
 *   - Domains are chosen by a linear scan (and children sorted by insertion sort) instead of
 *     sorting every domain of the level, which only makes the baseline faster.
 *   - Node capacity is a device count (tp_cluster_free_count of the node), not a resource vector;
 *     there is no leader pod set, no taints, no per-pod resource other than GPUs.
 *   - LeastFreeCapacity is applied to the nodes of the whole cluster directly (bucketed by free
 *     pods), not level by level.
 *   - Balanced placement, multi-layer slices and preemption are not modelled.
 */
#ifndef TP_BENCH_KUEUE_H
#define TP_BENCH_KUEUE_H

#include <stdint.h>

#include "topoplace.h"

/* A request in Kueue's terms. Levels are topology level indices, -1 for none. */
struct kq_request {
	uint32_t count;      /* devices */
	uint32_t pod;        /* devices per pod (pods lie in one node); divides count */
	int required;        /* level every device must share, or -1 */
	int preferred;       /* level to try first, or -1 */
	int slice_level;     /* level of each slice, or -1 */
	uint32_t slice_size; /* devices per slice (a multiple of pod; divides count) */
};

struct kq;

enum kq_rule {
	KQ_RULE_KUEUE = 0, /* the default */
	KQ_RULE_TP = 1
};

/* Create the baseline's arrays for a topology (the tree is copied once; the capacities are
 * recounted on every call). Returns NULL when out of memory. */
struct kq *kq_create(const tp_topology *t);
void kq_destroy(struct kq *k);
/* Choose the single-domain rule (see above). */
void kq_set_rule(struct kq *k, enum kq_rule rule);

/*
 * Place r on the cluster's current state. On success writes r->count devices to devs and, when
 * `dom` is not NULL, the domain chosen at the required level (else at the level where the
 * request was placed whole, else TP_NONE) to *dom.
 * Returns 0, TP_EBUSY (fewer free devices than count), TP_EFRAGMENTED (enough are free but no
 * domain holds the request), or TP_EINVAL (a malformed request).
 */
int kq_place(struct kq *k, const tp_cluster *c, const struct kq_request *r, uint32_t *devs,
             uint32_t *dom);

#endif
