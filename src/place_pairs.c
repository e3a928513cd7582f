/* SPDX-License-Identifier: MIT */
#include "place_internal.h"

/* ---- GPU+NIC pairs ---------------------------------------------------------------------------
 *
 * A GPU's nearest NICs are those below its anchor: the lowest PCIe switch above it with a NIC
 * below (every NIC of the node when there is none: anchor -1). Which GPUs of a node can be
 * paired with distinct nearest NICs is a bipartite matching; Kuhn's augmenting paths, GPUs and
 * NICs in index order, give a maximum one deterministically. Any subset of the GPUs a maximum
 * matching covers can be paired too (with the same NICs), so the solver treats the covered
 * usable GPUs as the node's usable devices and needs nothing else. Cost per node:
 * O(GPUs * NICs * switch depth) for the anchors, O(GPUs^2 * NICs) at worst for the matching,
 * plus O(GPUs) to block the NICs running pairs jobs hold (only when there are such jobs). The
 * matching itself lives in cluster.c (tp_pairing), which pairs a committed job by the same rule.
 */

/* Set up a matching with nothing paired; scratch from the arena (false: out of memory). */
static bool pairing_init(struct pctx *p, struct tp_pairing *pr, const struct tp_nodetype *nt)
{
	int *gpu_of = tp_pl_ar_alloc(p, nt->nnic * sizeof *gpu_of);
	unsigned char *seen = tp_pl_ar_alloc(p, nt->nnic);
	if (!gpu_of || !seen)
		return false;
	tp_pairing_init(pr, nt, gpu_of, seen);
	return true;
}

/* Whether the NIC of device d (-1: none) is out of this request's reach because another
 * running job is paired with it, or (replace) the repaired job keeps it on a healthy device.
 * With every job gone (ideal), only the colocate target's and the job's own NICs stay. */
static bool nic_fixed(const struct pctx *p, uint32_t d, bool ideal)
{
	const struct tp_cluster *c = p->c;
	uint32_t j = c->dev_job[d];
	if (c->dev_nic[d] < 0 || j == TP_NO_JOB)
		return false;
	if (j == p->self_slot)
		return !(p->extra_down && j1_test(p->extra_down, d));
	return !ideal || j == p->q->colocate_slot;
}

/* Start a matching on a node with the NICs other jobs (and the repaired job's kept devices)
 * hold already blocked; ideal: as if every job but those the request keeps were gone. */
static bool pairing_node(struct pctx *p, struct tp_pairing *pr, const struct tp_nodetype *nt,
                         uint32_t node, bool ideal)
{
	if (!pairing_init(p, pr, nt))
		return false;
	if (p->c->npairs)
		for (uint32_t d = p->t->dev_first[node]; d < p->t->dev_first[node + 1]; d++)
			if (nic_fixed(p, d, ideal))
				tp_pairing_block(pr, p->c->dev_nic[d]);
	return true;
}


/* Devices that hold a NIC before the usable ones are paired: those given out earlier in this
 * call, and the repaired job's own healthy devices. */
static bool keeps_nic(const struct pctx *p, uint32_t d)
{
	if (p->taken && j1_test(p->taken, d))
		return true;
	return p->self_slot != TP_NO_JOB && p->c->dev_job[d] == p->self_slot &&
	       !(p->extra_down && j1_test(p->extra_down, d)) && p->c->dev_nic[d] < 0;
}

/* Usable devices of a node that can be paired with distinct nearest NICs (ids to list). */
uint32_t tp_pl_node_pairable(struct pctx *p, uint32_t node, uint32_t *list)
{
	const struct tp_topology *t = p->t;
	const struct tp_nodetype *nt = tp_pairable_type(t, node);
	if (!nt)
		return 0;
	struct amark m = tp_pl_ar_mark(p);
	struct tp_pairing pr;
	uint32_t base = t->dev_first[node], n = 0;
	if (pairing_node(p, &pr, nt, node, p->ideal)) {
		for (unsigned g = 0; g < nt->ngpus; g++)
			if (keeps_nic(p, base + g))
				tp_pair_gpu(&pr, g);
		for (unsigned g = 0; g < nt->ngpus; g++) {
			if (!tp_pl_dev_ok(p, base + g) || !tp_pair_gpu(&pr, g))
				continue;
			if (list)
				list[n] = base + g;
			n++;
		}
	}
	tp_pl_ar_release(p, m);
	return n;
}

/* Free devices of a node that `select`'s per-device rule allows and that can be paired. */
uint32_t tp_pl_node_pairable_free(struct pctx *p, uint32_t node)
{
	const struct tp_topology *t = p->t;
	const struct tp_nodetype *nt = tp_pairable_type(t, node);
	if (!nt)
		return 0;
	struct amark m = tp_pl_ar_mark(p);
	struct tp_pairing pr;
	uint32_t base = t->dev_first[node], n = 0;
	if (pairing_node(p, &pr, nt, node, false))
		for (unsigned g = 0; g < nt->ngpus; g++)
			if (tp_dev_free(p->c, base + g) &&
			    !(p->q->min_perf > 0 && !(t->dev_perf[base + g] >= p->q->min_perf)))
				n += tp_pair_gpu(&pr, g);
	tp_pl_ar_release(p, m);
	return n;
}

/* GPUs of the whole topology that can be paired (for the message of an infeasible request). */
uint64_t tp_pl_topology_pairable(struct pctx *p)
{
	const struct tp_topology *t = p->t;
	uint64_t sum = 0;
	struct amark m = tp_pl_ar_mark(p);
	uint32_t *per_type = tp_pl_ar_alloc(p, (t->ntypes ? t->ntypes : 1) * sizeof *per_type);
	if (!per_type)
		return 0;
	for (unsigned ty = 0; ty < t->ntypes; ty++) {
		const struct tp_nodetype *nt = t->types[ty];
		struct tp_pairing pr;
		per_type[ty] = 0;
		if (nt->nnic && pairing_init(p, &pr, nt))
			for (unsigned g = 0; g < nt->ngpus; g++)
				per_type[ty] += tp_pair_gpu(&pr, g);
	}
	for (uint32_t node = 0; node < t->nnodes; node++)
		if (tp_pairable_type(t, node))
			sum += per_type[t->node_type[node]];
	tp_pl_ar_release(p, m);
	return sum;
}

/* Whether a device of the result keeps the NIC the repaired job holds it with. */
static bool kept_nic(const struct tp_cluster *c, uint32_t self, uint32_t d)
{
	return self != TP_NO_JOB && c->dev_job[d] == self && c->dev_nic[d] >= 0;
}

/* The NIC of every rank of a placement (pl->nic): the devices of each node, in rank order,
 * matched to distinct nearest NICs. A fresh placement pairs them all by construction; a
 * replacement may hold devices the caller assigned that cannot all be paired (-1). */
int tp_pl_pair_result(tp_placement *pl, struct pctx *p, const uint32_t *devs, size_t n)
{
	const struct tp_topology *t = p->t;
	pl->nic = tp_mallocn(&pl->alloc, n ? n : 1, sizeof *pl->nic);
	if (!pl->nic)
		return TP_ENOMEM;
	for (size_t i = 0; i < n; i++)
		pl->nic[i] = -1;
	bool all = true;
	Pvoid_t done = NULL; /* nodes already paired */
	for (size_t i = 0; i < n && !p->err; i++) {
		uint32_t node = t->dev_node[devs[i]];
		const struct tp_nodetype *nt = tp_pairable_type(t, node);
		if (!nt || j1_test(done, node)) {
			all = all && nt;
			continue;
		}
		j1_set(p, &done, node);
		struct amark m = tp_pl_ar_mark(p);
		struct tp_pairing pr;
		/* a fresh placement holds each node as one run of ranks; a replacement may not */
		size_t end = i;
		while (end < n && (pl->replace || t->dev_node[devs[end]] == node))
			end++;
		if (pairing_init(p, &pr, nt)) {
			const struct tp_cluster *c = p->c;
			uint32_t self = pl->replace ? p->self_slot : TP_NO_JOB;
			for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++)
				if (c->dev_nic[d] >= 0 && c->dev_job[d] != self)
					tp_pairing_block(&pr, c->dev_nic[d]);
			for (size_t j = i; j < end; j++)
				if (t->dev_node[devs[j]] == node && kept_nic(c, self, devs[j]))
					tp_pairing_block(&pr, c->dev_nic[devs[j]]);
			for (size_t j = i; j < end; j++)
				if (t->dev_node[devs[j]] == node && !kept_nic(c, self, devs[j]))
					tp_pair_gpu(&pr, devs[j] - t->dev_first[node]);
			for (size_t j = i; j < end; j++)
				if (t->dev_node[devs[j]] == node)
					pl->nic[j] = kept_nic(c, self, devs[j])
					                 ? c->dev_nic[devs[j]]
					                 : pr.nic_of[devs[j] - t->dev_first[node]];
		}
		tp_pl_ar_release(p, m);
	}
	j1_free(&done);
	for (size_t i = 0; i < n && !pl->replace; i++)
		all = all && pl->nic[i] >= 0;
	if (p->err)
		return p->err;
	return all || pl->replace ? 0 : TP_ECORRUPT;
}
