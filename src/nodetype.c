/* SPDX-License-Identifier: MIT */
/*
 * Node types: the insides of a node (PCIe switches, NICs, NVSwitches, NVLink figures), their
 * queries, the copies a topology keeps, and the one GPU-NIC matching that placement and the
 * cluster share.
 */
#include "topology_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_NODETYPE_MAX_ITEMS 4096

int tp_nodetype_create(tp_nodetype **out, unsigned gpus, const tp_allocator *alloc)
{
	if (!out || !tp_alloc_valid(alloc))
		return TP_EINVAL;
	*out = NULL;
	if (gpus < 1 || gpus > TP_MAX_NODE_DEVICES)
		return TP_EINVAL;
	tp_allocator a = tp_alloc_resolve(alloc);
	tp_nodetype *nt = tp_calloc(&a, 1, sizeof *nt);
	if (!nt)
		return TP_ENOMEM;
	nt->alloc = a;
	nt->ngpus = gpus;
	nt->gpu_sw = tp_mallocn(&a, gpus, sizeof *nt->gpu_sw);
	nt->gpu_x = tp_calloc(&a, gpus, sizeof *nt->gpu_x);
	if (!nt->gpu_sw || !nt->gpu_x) {
		tp_free(&a, nt->gpu_sw);
		tp_free(&a, nt->gpu_x);
		tp_free(&a, nt);
		return TP_ENOMEM;
	}
	for (unsigned i = 0; i < gpus; i++) {
		nt->gpu_sw[i] = -1;
		nt->gpu_x[i].loc = (struct tp_locality){-1, -1, -1};
	}
	*out = nt;
	return 0;
}

void tp_nodetype_destroy(tp_nodetype *nt)
{
	if (!nt)
		return;
	tp_allocator a = nt->alloc;
	for (unsigned i = 0; i < nt->nnic; i++)
		tp_free(&a, nt->nic_name[i]);
	for (unsigned i = 0; i < nt->nnvs; i++)
		tp_free(&a, nt->nvs_name[i]);
	tp_free(&a, nt->sw_parent);
	tp_free(&a, nt->gpu_sw);
	tp_free(&a, nt->nic_name);
	tp_free(&a, nt->nic_sw);
	tp_free(&a, nt->nic_gbps);
	tp_free(&a, nt->nvs_name);
	tp_free(&a, nt->nvlink);
	tp_free(&a, nt->gpu_x);
	tp_free(&a, nt->nic_x);
	tp_free(&a, nt->pcie_gbps);
	tp_free(&a, nt);
}

const char *tp_nodetype_errmsg(const tp_nodetype *nt)
{
	return nt ? nt->errmsg : "";
}

int tp_nodetype_add_pcie_switch(tp_nodetype *nt, int parent, unsigned *id)
{
	if (!nt)
		return TP_EINVAL;
	if (parent < -1 || (parent >= 0 && (unsigned)parent >= nt->nsw))
		return tp_seterr(nt->errmsg, TP_EINVAL, "parent switch %d does not exist (%u switches)",
		                 parent, nt->nsw);
	if (nt->nsw >= TP_NODETYPE_MAX_ITEMS)
		return tp_seterr(nt->errmsg, TP_ELIMIT, "more than %d PCIe switches",
		                 TP_NODETYPE_MAX_ITEMS);
	if (tp_grow(&nt->alloc, (void **)&nt->sw_parent, &nt->cap_sw, nt->nsw + 1,
	            sizeof *nt->sw_parent))
		return tp_seterr(nt->errmsg, TP_ENOMEM, "out of memory adding a PCIe switch");
	nt->sw_parent[nt->nsw] = parent;
	if (id)
		*id = nt->nsw;
	nt->nsw++;
	return 0;
}

int tp_nodetype_set_gpu_switch(tp_nodetype *nt, unsigned gpu, int sw)
{
	if (!nt)
		return TP_EINVAL;
	if (gpu >= nt->ngpus)
		return tp_seterr(nt->errmsg, TP_EINVAL, "GPU %u does not exist (%u GPUs)", gpu,
		                 nt->ngpus);
	if (sw < -1 || (sw >= 0 && (unsigned)sw >= nt->nsw))
		return tp_seterr(nt->errmsg, TP_EINVAL, "switch %d does not exist (%u switches)", sw,
		                 nt->nsw);
	nt->gpu_sw[gpu] = sw;
	return 0;
}

/* Append a copied name to a name array (grown with its capacity). */
static int push_name(tp_nodetype *nt, char ***arr, unsigned n, size_t *cap, const char *name)
{
	char *copy = tp_strdup(&nt->alloc, name);
	if (!copy)
		return TP_ENOMEM;
	if (tp_grow(&nt->alloc, (void **)arr, cap, (size_t)n + 1, sizeof **arr)) {
		tp_free(&nt->alloc, copy);
		return TP_ENOMEM;
	}
	(*arr)[n] = copy;
	return 0;
}

int tp_nodetype_add_nic(tp_nodetype *nt, const char *name, int sw, double gbps, unsigned *id)
{
	if (!nt)
		return TP_EINVAL;
	const char *why = tp_name_problem(name, false);
	if (why)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NIC name %s", why);
	if (sw < -1 || (sw >= 0 && (unsigned)sw >= nt->nsw))
		return tp_seterr(nt->errmsg, TP_EINVAL, "NIC %s: switch %d does not exist", name, sw);
	if (!(gbps >= 0) || !isfinite(gbps))
		return tp_seterr(nt->errmsg, TP_EINVAL, "NIC %s: bandwidth %g is not a number >= 0",
		                 name, gbps);
	if (nt->nnic >= TP_NODETYPE_MAX_ITEMS)
		return tp_seterr(nt->errmsg, TP_ELIMIT, "more than %d NICs", TP_NODETYPE_MAX_ITEMS);
	size_t cap_sw = nt->cap_nic, cap_g = nt->cap_nic;
	if (tp_grow(&nt->alloc, (void **)&nt->nic_sw, &cap_sw, nt->nnic + 1, sizeof *nt->nic_sw) ||
	    tp_grow(&nt->alloc, (void **)&nt->nic_gbps, &cap_g, nt->nnic + 1, sizeof(double)) ||
	    tp_grow(&nt->alloc, (void **)&nt->nic_x, &nt->cap_nicx, nt->nnic + 1,
	            sizeof *nt->nic_x))
		return tp_seterr(nt->errmsg, TP_ENOMEM, "out of memory adding NIC %s", name);
	size_t cap_n = nt->cap_nic;
	if (push_name(nt, &nt->nic_name, nt->nnic, &cap_n, name))
		return tp_seterr(nt->errmsg, TP_ENOMEM, "out of memory adding NIC %s", name);
	/* The three arrays grow in step; keep the smallest capacity as the shared one. */
	nt->cap_nic = cap_n < cap_sw ? (cap_n < cap_g ? cap_n : cap_g) : (cap_sw < cap_g ? cap_sw : cap_g);
	nt->nic_sw[nt->nnic] = sw;
	nt->nic_gbps[nt->nnic] = gbps;
	nt->nic_x[nt->nnic] = (struct tp_nic_extra){TP_NIC_UNKNOWN, {-1, -1, -1}};
	if (id)
		*id = nt->nnic;
	nt->nnic++;
	return 0;
}

int tp_nodetype_add_nvswitch(tp_nodetype *nt, const char *name, unsigned *id)
{
	if (!nt)
		return TP_EINVAL;
	const char *why = tp_name_problem(name, false);
	if (why)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NVSwitch name %s", why);
	if (nt->nnvs >= TP_NODETYPE_MAX_ITEMS)
		return tp_seterr(nt->errmsg, TP_ELIMIT, "more than %d NVSwitches",
		                 TP_NODETYPE_MAX_ITEMS);
	if (push_name(nt, &nt->nvs_name, nt->nnvs, &nt->cap_nvs, name))
		return tp_seterr(nt->errmsg, TP_ENOMEM, "out of memory adding NVSwitch %s", name);
	if (id)
		*id = nt->nnvs;
	nt->nnvs++;
	return 0;
}

int tp_nodetype_set_nvlink(tp_nodetype *nt, unsigned a, unsigned b, double gbps)
{
	if (!nt)
		return TP_EINVAL;
	if (a >= nt->ngpus || b >= nt->ngpus)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NVLink %u-%u: GPU out of range (%u GPUs)", a,
		                 b, nt->ngpus);
	if (a == b)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NVLink %u-%u: a GPU cannot link to itself", a,
		                 b);
	if (!(gbps >= 0) || !isfinite(gbps))
		return tp_seterr(nt->errmsg, TP_EINVAL, "NVLink %u-%u: bandwidth %g is not >= 0", a, b,
		                 gbps);
	if (!nt->nvlink) {
		nt->nvlink = tp_calloc(&nt->alloc, (size_t)nt->ngpus * nt->ngpus, sizeof(double));
		if (!nt->nvlink)
			return tp_seterr(nt->errmsg, TP_ENOMEM, "out of memory for the NVLink matrix");
	}
	nt->nvlink[(size_t)a * nt->ngpus + b] = gbps;
	nt->nvlink[(size_t)b * nt->ngpus + a] = gbps;
	return 0;
}

unsigned tp_nodetype_gpu_count(const tp_nodetype *nt) { return nt ? nt->ngpus : 0; }
unsigned tp_nodetype_pcie_switch_count(const tp_nodetype *nt) { return nt ? nt->nsw : 0; }
unsigned tp_nodetype_nic_count(const tp_nodetype *nt) { return nt ? nt->nnic : 0; }
unsigned tp_nodetype_nvswitch_count(const tp_nodetype *nt) { return nt ? nt->nnvs : 0; }

/* A switch index as the public queries give it: TP_NONE for the host bridge (-1 inside). */
static int switch_out(int v, uint32_t *out)
{
	*out = v < 0 ? TP_NONE : (uint32_t)v;
	return 0;
}

int tp_nodetype_pcie_switch_parent(const tp_nodetype *nt, unsigned sw, uint32_t *parent)
{
	if (!nt || !parent)
		return TP_EINVAL;
	return sw < nt->nsw ? switch_out(nt->sw_parent[sw], parent) : TP_ENOTFOUND;
}

int tp_nodetype_gpu_switch(const tp_nodetype *nt, unsigned gpu, uint32_t *sw)
{
	if (!nt || !sw)
		return TP_EINVAL;
	return gpu < nt->ngpus ? switch_out(nt->gpu_sw[gpu], sw) : TP_ENOTFOUND;
}

const char *tp_nodetype_nic_name(const tp_nodetype *nt, unsigned nic)
{
	return nt && nic < nt->nnic ? nt->nic_name[nic] : NULL;
}

int tp_nodetype_nic_switch(const tp_nodetype *nt, unsigned nic, uint32_t *sw)
{
	if (!nt || !sw)
		return TP_EINVAL;
	return nic < nt->nnic ? switch_out(nt->nic_sw[nic], sw) : TP_ENOTFOUND;
}

double tp_nodetype_nvlink_gbps(const tp_nodetype *nt, unsigned a, unsigned b)
{
	if (!nt || !nt->nvlink || a >= nt->ngpus || b >= nt->ngpus)
		return 0;
	return nt->nvlink[(size_t)a * nt->ngpus + b];
}

/* Depth of a switch (host bridge = 0, a switch on it = 1, ...); -1 is the host bridge. */
static unsigned switch_depth(const tp_nodetype *nt, int sw)
{
	unsigned d = 0;
	while (sw >= 0 && d <= nt->nsw) {
		sw = nt->sw_parent[sw];
		d++;
	}
	return d;
}

/* Hops from switches x and y up to their lowest common switch (the host bridge counts). */
static unsigned switch_distance(const tp_nodetype *nt, int x, int y)
{
	unsigned dx = switch_depth(nt, x), dy = switch_depth(nt, y), hops = 0;
	while (dx > dy) {
		x = nt->sw_parent[x];
		dx--;
		hops++;
	}
	while (dy > dx) {
		y = nt->sw_parent[y];
		dy--;
		hops++;
	}
	while (x != y) {
		x = nt->sw_parent[x];
		y = nt->sw_parent[y];
		hops += 2;
	}
	return hops;
}

int tp_nodetype_pcie_distance(const tp_nodetype *nt, unsigned a, unsigned b)
{
	if (!nt || a >= nt->ngpus || b >= nt->ngpus)
		return TP_EINVAL;
	if (a == b)
		return 0;
	/* A GPU is one hop below its switch; two GPUs on one switch are 2 apart. */
	return (int)(2 + switch_distance(nt, nt->gpu_sw[a], nt->gpu_sw[b]));
}

int tp_nodetype_gpu_nearest_nic(const tp_nodetype *nt, unsigned gpu)
{
	if (!nt || gpu >= nt->ngpus)
		return TP_EINVAL;
	if (nt->nnic == 0)
		return TP_ENOTFOUND;
	unsigned best = 0, best_d = UINT32_MAX;
	for (unsigned i = 0; i < nt->nnic; i++) {
		unsigned d = tp_nodetype_nic_rank(nt, gpu, i);
		if (d < best_d) {
			best_d = d;
			best = i;
		}
	}
	return (int)best;
}

static bool nic_below_switch(const tp_nodetype *nt, unsigned n, int sw)
{
	for (int s = nt->nic_sw[n]; s >= 0; s = nt->sw_parent[s])
		if (s == sw)
			return true;
	return false;
}

/* 3: same host bridge, 2: same NUMA node, 1: same package, 0: none known in common. */
static unsigned locality_shared(const struct tp_locality *x, const struct tp_locality *y)
{
	if (x->host_bridge >= 0 && x->host_bridge == y->host_bridge)
		return 3;
	if (x->numa >= 0 && x->numa == y->numa)
		return 2;
	return x->package >= 0 && x->package == y->package;
}

/* Kind first (a NIC that is not RDMA ranks behind every RDMA NIC, when the node has one), then
 * the switch hops from the GPU up to the lowest switch with the NIC below it, then, for NICs
 * reached only through the host bridges, what GPU and NIC share: host bridge, NUMA node,
 * package. */
unsigned tp_nodetype_nic_rank(const tp_nodetype *nt, unsigned g, unsigned n)
{
	unsigned kind = nt->has_rdma && nt->nic_x[n].kind != TP_NIC_RDMA;
	unsigned hops = 0;
	int s = nt->gpu_sw[g];
	while (s >= 0 && !nic_below_switch(nt, n, s) && hops <= nt->nsw) {
		s = nt->sw_parent[s];
		hops++;
	}
	unsigned far = s < 0 ? 3 - locality_shared(&nt->gpu_x[g].loc, &nt->nic_x[n].loc) : 0;
	return kind << 20 | hops << 2 | far;
}

int tp_nodetype_set_gpu_bus_id(tp_nodetype *nt, unsigned gpu, const char *bus_id)
{
	if (!nt)
		return TP_EINVAL;
	if (gpu >= nt->ngpus)
		return tp_seterr(nt->errmsg, TP_EINVAL, "GPU %u does not exist (%u GPUs)", gpu,
		                 nt->ngpus);
	const char *why = tp_name_problem(bus_id, true);
	if (!why && strlen(bus_id) >= TP_BUSID_LEN)
		why = "is longer than 31 bytes";
	if (why)
		return tp_seterr(nt->errmsg, TP_EINVAL, "GPU %u: bus id %s", gpu, why);
	memcpy(nt->gpu_x[gpu].bus_id, bus_id, strlen(bus_id) + 1);
	return 0;
}

const char *tp_nodetype_gpu_bus_id(const tp_nodetype *nt, unsigned gpu)
{
	return nt && gpu < nt->ngpus && nt->gpu_x[gpu].bus_id[0] ? nt->gpu_x[gpu].bus_id : NULL;
}

int tp_nodetype_set_nic_kind(tp_nodetype *nt, unsigned nic, tp_nic_kind kind)
{
	if (!nt)
		return TP_EINVAL;
	if (nic >= nt->nnic)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NIC %u does not exist (%u NICs)", nic,
		                 nt->nnic);
	if (kind != TP_NIC_UNKNOWN && kind != TP_NIC_RDMA && kind != TP_NIC_ETHERNET)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NIC %u: kind %d is not a tp_nic_kind", nic,
		                 (int)kind);
	nt->nic_x[nic].kind = (unsigned char)kind;
	nt->has_rdma = false;
	for (unsigned i = 0; i < nt->nnic; i++)
		nt->has_rdma = nt->has_rdma || nt->nic_x[i].kind == TP_NIC_RDMA;
	return 0;
}

int tp_nodetype_nic_kind(const tp_nodetype *nt, unsigned nic)
{
	return nt && nic < nt->nnic ? nt->nic_x[nic].kind : TP_ENOTFOUND;
}

static int set_locality(tp_nodetype *nt, struct tp_locality *loc, const char *what,
                        unsigned i, int package, int numa, int host_bridge)
{
	if (package < -1 || numa < -1 || host_bridge < -1)
		return tp_seterr(nt->errmsg, TP_EINVAL,
		                 "%s %u: locality (%d, %d, %d) has a value below -1", what, i, package,
		                 numa, host_bridge);
	*loc = (struct tp_locality){package, numa, host_bridge};
	return 0;
}

int tp_nodetype_set_gpu_locality(tp_nodetype *nt, unsigned gpu, int package, int numa,
                                 int host_bridge)
{
	if (!nt)
		return TP_EINVAL;
	if (gpu >= nt->ngpus)
		return tp_seterr(nt->errmsg, TP_EINVAL, "GPU %u does not exist (%u GPUs)", gpu,
		                 nt->ngpus);
	return set_locality(nt, &nt->gpu_x[gpu].loc, "GPU", gpu, package, numa, host_bridge);
}

int tp_nodetype_set_nic_locality(tp_nodetype *nt, unsigned nic, int package, int numa,
                                 int host_bridge)
{
	if (!nt)
		return TP_EINVAL;
	if (nic >= nt->nnic)
		return tp_seterr(nt->errmsg, TP_EINVAL, "NIC %u does not exist (%u NICs)", nic,
		                 nt->nnic);
	return set_locality(nt, &nt->nic_x[nic].loc, "NIC", nic, package, numa, host_bridge);
}

bool tp_nt_has_nvlink(const tp_nodetype *nt)
{
	if (nt->nvlink)
		for (size_t i = 0; i < (size_t)nt->ngpus * nt->ngpus; i++)
			if (nt->nvlink[i] > 0)
				return true;
	return false;
}

/* ---- the type's own fabric and pair figures (docs/cost-model.md) ------------------------- */

int tp_nodetype_set_fabric(tp_nodetype *nt, tp_link_kind kind, double gbps, double latency_us)
{
	if (!nt)
		return TP_EINVAL;
	if ((unsigned)kind > TP_LINK_ETHERNET)
		return tp_seterr(nt->errmsg, TP_EINVAL, "node type fabric kind %d is not a tp_link_kind",
		                 (int)kind);
	if (!(gbps > 0) || !isfinite(gbps))
		return tp_seterr(nt->errmsg, TP_EINVAL, "node type fabric gbps %g is not a number > 0",
		                 gbps);
	if (!(latency_us >= 0) || !isfinite(latency_us))
		return tp_seterr(nt->errmsg, TP_EINVAL,
		                 "node type fabric latency_us %g is not a number >= 0", latency_us);
	nt->fabric = (struct tp_fabric_impl){kind, gbps, latency_us};
	nt->has_fabric = true;
	return 0;
}

int tp_nodetype_fabric(const tp_nodetype *nt, tp_link_kind *kind, double *gbps,
                       double *latency_us)
{
	if (!nt)
		return TP_EINVAL;
	if (!nt->has_fabric)
		return TP_ENOTFOUND;
	if (kind)
		*kind = nt->fabric.kind;
	if (gbps)
		*gbps = nt->fabric.gbps;
	if (latency_us)
		*latency_us = nt->fabric.latency_us;
	return 0;
}

int tp_nodetype_set_gpu_pcie_gbps(tp_nodetype *nt, unsigned gpu, double gbps)
{
	if (!nt)
		return TP_EINVAL;
	if (gpu >= nt->ngpus)
		return tp_seterr(nt->errmsg, TP_EINVAL, "GPU %u does not exist (%u GPUs)", gpu,
		                 nt->ngpus);
	if (!(gbps >= 0) || !isfinite(gbps))
		return tp_seterr(nt->errmsg, TP_EINVAL, "GPU %u: PCIe gbps %g is not a number >= 0",
		                 gpu, gbps);
	if (!nt->pcie_gbps && !(nt->pcie_gbps = tp_calloc(&nt->alloc, nt->ngpus, sizeof(double))))
		return tp_seterr(nt->errmsg, TP_ENOMEM, "out of memory setting GPU %u's PCIe gbps",
		                 gpu);
	nt->pcie_gbps[gpu] = gbps;
	return 0;
}

/* The share of the PCIe link rate a GPU pair gets when its paths meet only across packages:
 * peer traffic crosses the inter-socket link (QPI/UPI, X-Bus), which the model prices at half
 * the link rate (an assumption, docs/cost-model.md). */
#define CROSS_PACKAGE_SHARE 0.5

/* Whether GPUs a and b sit in different packages (both known). */
static bool across_packages(const tp_nodetype *nt, unsigned a, unsigned b)
{
	int pa = nt->gpu_x[a].loc.package, pb = nt->gpu_x[b].loc.package;
	return pa >= 0 && pb >= 0 && pa != pb;
}

double tp_nt_pair_gbps(const tp_nodetype *nt, unsigned a, unsigned b)
{
	if (nt->nvlink) {
		double g = nt->nvlink[(size_t)a * nt->ngpus + b];
		if (g > 0)
			return g;
	}
	if (!nt->pcie_gbps || !(nt->pcie_gbps[a] > 0) || !(nt->pcie_gbps[b] > 0))
		return 0.0;
	double link = nt->pcie_gbps[a] < nt->pcie_gbps[b] ? nt->pcie_gbps[a] : nt->pcie_gbps[b];
	/* GPUs under one switch never cross packages, whatever their locality says */
	bool same_switch = nt->gpu_sw[a] >= 0 && nt->gpu_sw[a] == nt->gpu_sw[b];
	return !same_switch && across_packages(nt, a, b) ? link * CROSS_PACKAGE_SHARE : link;
}

double tp_nodetype_pair_gbps(const tp_nodetype *nt, unsigned a, unsigned b)
{
	if (!nt || a >= nt->ngpus || b >= nt->ngpus || a == b)
		return 0.0;
	return tp_nt_pair_gbps(nt, a, b);
}

bool tp_nt_has_figures(const tp_nodetype *nt)
{
	if (tp_nt_has_nvlink(nt))
		return true;
	for (unsigned i = 0; nt->pcie_gbps && i < nt->ngpus; i++)
		if (nt->pcie_gbps[i] > 0)
			return true;
	return false;
}

/* A deep copy of a node type, with the given allocator. */
tp_nodetype *tp_nt_clone(const tp_nodetype *src, const tp_allocator *a)
{
	tp_nodetype *nt = NULL;
	if (tp_nodetype_create(&nt, src->ngpus, a))
		return NULL;
	memcpy(nt->gpu_sw, src->gpu_sw, src->ngpus * sizeof *nt->gpu_sw);
	memcpy(nt->gpu_x, src->gpu_x, src->ngpus * sizeof *nt->gpu_x);
	for (unsigned i = 0; i < src->nsw; i++)
		if (tp_nodetype_add_pcie_switch(nt, src->sw_parent[i], NULL))
			goto fail;
	for (unsigned i = 0; i < src->nnic; i++)
		if (tp_nodetype_add_nic(nt, src->nic_name[i], src->nic_sw[i], src->nic_gbps[i], NULL))
			goto fail;
	if (src->nnic)
		memcpy(nt->nic_x, src->nic_x, src->nnic * sizeof *nt->nic_x);
	nt->has_rdma = src->has_rdma;
	for (unsigned i = 0; i < src->nnvs; i++)
		if (tp_nodetype_add_nvswitch(nt, src->nvs_name[i], NULL))
			goto fail;
	if (src->nvlink) {
		size_t n = (size_t)src->ngpus * src->ngpus;
		nt->nvlink = tp_mallocn(&nt->alloc, n, sizeof(double));
		if (!nt->nvlink)
			goto fail;
		memcpy(nt->nvlink, src->nvlink, n * sizeof(double));
	}
	if (src->pcie_gbps) {
		nt->pcie_gbps = tp_mallocn(&nt->alloc, src->ngpus, sizeof(double));
		if (!nt->pcie_gbps)
			goto fail;
		memcpy(nt->pcie_gbps, src->pcie_gbps, src->ngpus * sizeof(double));
	}
	nt->has_fabric = src->has_fabric;
	nt->fabric = src->fabric;
	return nt;
fail:
	tp_nodetype_destroy(nt);
	return NULL;
}

static bool loc_equal(const struct tp_locality *x, const struct tp_locality *y)
{
	return x->package == y->package && x->numa == y->numa && x->host_bridge == y->host_bridge;
}

/* Whether two node types describe the same insides (so nodes can share one copy). */
bool tp_nt_equal(const tp_nodetype *x, const tp_nodetype *y)
{
	if (x->ngpus != y->ngpus || x->nsw != y->nsw || x->nnic != y->nnic || x->nnvs != y->nnvs ||
	    !x->nvlink != !y->nvlink || !x->pcie_gbps != !y->pcie_gbps ||
	    x->has_fabric != y->has_fabric)
		return false;
	if (x->has_fabric && memcmp(&x->fabric, &y->fabric, sizeof x->fabric))
		return false;
	if (x->pcie_gbps && memcmp(x->pcie_gbps, y->pcie_gbps, x->ngpus * sizeof(double)))
		return false;
	if (memcmp(x->gpu_sw, y->gpu_sw, x->ngpus * sizeof *x->gpu_sw) ||
	    (x->nsw && memcmp(x->sw_parent, y->sw_parent, x->nsw * sizeof *x->sw_parent)))
		return false;
	for (unsigned i = 0; i < x->nnic; i++)
		if (x->nic_sw[i] != y->nic_sw[i] || x->nic_gbps[i] != y->nic_gbps[i] ||
		    strcmp(x->nic_name[i], y->nic_name[i]) ||
		    x->nic_x[i].kind != y->nic_x[i].kind || !loc_equal(&x->nic_x[i].loc, &y->nic_x[i].loc))
			return false;
	for (unsigned i = 0; i < x->ngpus; i++)
		if (strcmp(x->gpu_x[i].bus_id, y->gpu_x[i].bus_id) ||
		    !loc_equal(&x->gpu_x[i].loc, &y->gpu_x[i].loc))
			return false;
	for (unsigned i = 0; i < x->nnvs; i++)
		if (strcmp(x->nvs_name[i], y->nvs_name[i]))
			return false;
	return !x->nvlink ||
	       !memcmp(x->nvlink, y->nvlink, (size_t)x->ngpus * x->ngpus * sizeof(double));
}
/* ---- GPU+NIC pairing ---------------------------------------------------------------------- */

const struct tp_nodetype *tp_pairable_type(const struct tp_topology *t, uint32_t node)
{
	uint16_t ty = t->node_type ? t->node_type[node] : TP_NO_TYPE;
	const struct tp_nodetype *nt = ty != TP_NO_TYPE ? t->types[ty] : NULL;
	return nt && nt->nnic > 0 && nt->ngpus == tp_node_ndev(t, node) ? nt : NULL;
}

/* The best rank of a NIC for GPU g (tp_nodetype_nic_rank): the GPU may pair with the NICs of
 * that rank only. */
static int gpu_anchor(const struct tp_nodetype *nt, unsigned g)
{
	unsigned best = UINT32_MAX;
	for (unsigned n = 0; n < nt->nnic; n++) {
		unsigned r = tp_nodetype_nic_rank(nt, g, n);
		best = r < best ? r : best;
	}
	return (int)best;
}

void tp_pairing_init(struct tp_pairing *pr, const struct tp_nodetype *nt, int *gpu_of,
                     unsigned char *seen)
{
	pr->nt = nt;
	pr->gpu_of = gpu_of;
	pr->seen = seen;
	for (unsigned n = 0; n < nt->nnic; n++)
		pr->gpu_of[n] = -1;
	for (unsigned g = 0; g < nt->ngpus; g++) {
		pr->anchor[g] = gpu_anchor(nt, g);
		pr->nic_of[g] = -1;
	}
}

static bool pair_augment(struct tp_pairing *pr, unsigned g)
{
	const struct tp_nodetype *nt = pr->nt;
	for (unsigned n = 0; n < nt->nnic; n++) {
		if (pr->seen[n] || pr->gpu_of[n] == TP_NIC_BLOCKED ||
		    tp_nodetype_nic_rank(nt, g, n) != (unsigned)pr->anchor[g])
			continue;
		pr->seen[n] = 1;
		if (pr->gpu_of[n] < 0 || pair_augment(pr, (unsigned)pr->gpu_of[n])) {
			pr->gpu_of[n] = (int)g;
			pr->nic_of[g] = (int)n;
			return true;
		}
	}
	return false;
}

bool tp_pair_gpu(struct tp_pairing *pr, unsigned g)
{
	if (pr->nic_of[g] >= 0)
		return true;
	memset(pr->seen, 0, pr->nt->nnic);
	return pair_augment(pr, g);
}
