/* SPDX-License-Identifier: MIT */
/*
 * Topology: node types, the builder, generators and read-only queries.
 *
 * The builder records nodes in the order they are added, each with the id of its domain at
 * every level above the node ("prefix ids", given in order of first appearance). Building sorts
 * the nodes into tree order (domains in order of first appearance under their parent, nodes in
 * order of addition inside their lowest domain) so that every domain's nodes, devices and
 * children are contiguous id ranges; generated fleets are already in that order and skip the
 * sort.
 */
#include "topology_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ============================================================================================ */
/* Node types                                                                                   */
/* ============================================================================================ */

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

int tp_nodetype_pcie_switch_parent(const tp_nodetype *nt, unsigned sw)
{
	return nt && sw < nt->nsw ? nt->sw_parent[sw] : TP_ENOTFOUND;
}

int tp_nodetype_gpu_switch(const tp_nodetype *nt, unsigned gpu)
{
	return nt && gpu < nt->ngpus ? nt->gpu_sw[gpu] : TP_ENOTFOUND;
}

const char *tp_nodetype_nic_name(const tp_nodetype *nt, unsigned nic)
{
	return nt && nic < nt->nnic ? nt->nic_name[nic] : NULL;
}

int tp_nodetype_nic_switch(const tp_nodetype *nt, unsigned nic)
{
	return nt && nic < nt->nnic ? nt->nic_sw[nic] : TP_ENOTFOUND;
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

static bool nodetype_has_nvlink(const tp_nodetype *nt)
{
	if (nt->nvlink)
		for (size_t i = 0; i < (size_t)nt->ngpus * nt->ngpus; i++)
			if (nt->nvlink[i] > 0)
				return true;
	return false;
}

/* A deep copy of a node type, with the given allocator. */
static tp_nodetype *nodetype_clone(const tp_nodetype *src, const tp_allocator *a)
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
static bool nodetype_equal(const tp_nodetype *x, const tp_nodetype *y)
{
	if (x->ngpus != y->ngpus || x->nsw != y->nsw || x->nnic != y->nnic || x->nnvs != y->nnvs ||
	    !x->nvlink != !y->nvlink)
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

/* ============================================================================================ */
/* Builder                                                                                      */
/* ============================================================================================ */

#define NO_PERF UINT32_MAX

struct bnode {
	uint32_t name;                   /* offset in the pool */
	uint32_t ngpus;
	uint32_t pid[TP_MAX_LEVELS - 1]; /* prefix id at each level above the node */
	uint32_t perf;                   /* offset in perfs, or NO_PERF (uniform perf1) */
	float perf1;
	float mem_gb;
	uint16_t model;
	uint16_t type;
};

/* The domains of one level above the node, by prefix id (order of first appearance). */
struct bprefix {
	Pvoid_t by_path;   /* JudySL: path -> pid + 1 */
	uint32_t *name;    /* [n] own-name offset in the pool */
	uint32_t *parent;  /* [n] pid at level - 1 */
	size_t n, cap;
};

struct bfd_member {
	uint32_t node;
	int32_t device; /* -1: the whole node */
	uint32_t dom;
};

struct bfd_kind {
	char *name;
	Pvoid_t dom_by_name; /* JudySL: name -> dom + 1 */
	char **dom_names;
	size_t ndom, cap_dom;
	struct bfd_member *members;
	size_t nmem, cap_mem;
	Pvoid_t whole;   /* Judy1 of nodes listed whole */
	Pvoid_t partial; /* JudyL: node -> devices listed singly */
	Pvoid_t devs;    /* Judy1 of (node << 9 | device) listed singly */
};

struct bnvs {
	unsigned level;
	uint32_t pid;
};

struct tp_topology_builder {
	tp_allocator alloc;
	char errmsg[TP_ERRMSG_LEN];
	unsigned nlevels;
	char *levels[TP_MAX_LEVELS];
	struct tp_fabric_impl fabric[TP_MAX_LEVELS + 1];
	bool fabric_set[TP_MAX_LEVELS + 1]; /* set by the caller, not a default */

	struct bnode *nodes;
	size_t nnodes, cap_nodes;
	Pvoid_t node_by_name; /* JudySL: name -> node + 1 */
	uint64_t ndevices;

	char *pool;
	size_t pool_len, pool_cap;

	struct bprefix pre[TP_MAX_LEVELS - 1];

	float *perfs;
	size_t nperfs, cap_perfs;

	char **models;
	size_t nmodels, cap_models;
	tp_nodetype **types;
	size_t ntypes, cap_types;

	struct bfd_kind *fd;
	size_t nfd, cap_fd;

	struct bnvs *nvs;
	size_t nnvs, cap_nvs;
	Pvoid_t nvs_names; /* JudySL: "level/path/name" */
};

static const struct tp_fabric_impl default_node_fabric = {TP_LINK_NVLINK, 900.0, 3.4};
static const struct tp_fabric_impl default_level_fabric = {TP_LINK_IB, 50.0, 14.0};
static const struct tp_fabric_impl default_cluster_fabric = {TP_LINK_IB, 25.0, 20.0};

int tp_topology_builder_create(tp_topology_builder **out, const char *const *levels,
                               unsigned nlevels, const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!levels || !tp_alloc_valid(alloc) || nlevels == 0)
		return TP_EINVAL;
	if (nlevels > TP_MAX_LEVELS)
		return TP_ELIMIT;
	for (unsigned i = 0; i < nlevels; i++) {
		if (tp_name_problem(levels[i], true) || !strcmp(levels[i], "cluster"))
			return TP_EINVAL;
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(levels[i], levels[j]))
				return TP_EINVAL;
	}
	tp_allocator a = tp_alloc_resolve(alloc);
	tp_topology_builder *b = tp_calloc(&a, 1, sizeof *b);
	if (!b)
		return TP_ENOMEM;
	b->alloc = a;
	b->nlevels = nlevels;
	for (unsigned i = 0; i < nlevels; i++) {
		b->levels[i] = tp_strdup(&a, levels[i]);
		if (!b->levels[i]) {
			tp_topology_builder_destroy(b);
			return TP_ENOMEM;
		}
	}
	b->fabric[0] = default_cluster_fabric;
	for (unsigned i = 0; i < nlevels; i++)
		b->fabric[i + 1] = i + 1 == nlevels ? default_node_fabric : default_level_fabric;
	*out = b;
	return 0;
}

static void fd_kind_free(tp_topology_builder *b, struct bfd_kind *k)
{
	PJError_t err = NULL;
	tp_free(&b->alloc, k->name);
	for (size_t i = 0; i < k->ndom; i++)
		tp_free(&b->alloc, k->dom_names[i]);
	tp_free(&b->alloc, k->dom_names);
	tp_free(&b->alloc, k->members);
	JudySLFreeArray(&k->dom_by_name, err);
	Judy1FreeArray(&k->whole, err);
	JudyLFreeArray(&k->partial, err);
	Judy1FreeArray(&k->devs, err);
}

void tp_topology_builder_destroy(tp_topology_builder *b)
{
	if (!b)
		return;
	PJError_t err = NULL;
	tp_allocator a = b->alloc;
	for (unsigned i = 0; i < b->nlevels; i++)
		tp_free(&a, b->levels[i]);
	tp_free(&a, b->nodes);
	JudySLFreeArray(&b->node_by_name, err);
	tp_free(&a, b->pool);
	for (unsigned i = 0; i + 1 < TP_MAX_LEVELS; i++) {
		JudySLFreeArray(&b->pre[i].by_path, err);
		tp_free(&a, b->pre[i].name);
		tp_free(&a, b->pre[i].parent);
	}
	tp_free(&a, b->perfs);
	for (size_t i = 0; i < b->nmodels; i++)
		tp_free(&a, b->models[i]);
	tp_free(&a, b->models);
	for (size_t i = 0; i < b->ntypes; i++)
		tp_nodetype_destroy(b->types[i]);
	tp_free(&a, b->types);
	for (size_t i = 0; i < b->nfd; i++)
		fd_kind_free(b, &b->fd[i]);
	tp_free(&a, b->fd);
	tp_free(&a, b->nvs);
	JudySLFreeArray(&b->nvs_names, err);
	tp_free(&a, b);
}

const char *tp_topology_builder_errmsg(const tp_topology_builder *b)
{
	return b ? b->errmsg : "";
}

int tp_topology_builder_set_fabric(tp_topology_builder *b, int level, tp_link_kind kind,
                                   double gbps, double latency_us)
{
	if (!b)
		return TP_EINVAL;
	if (level < TP_LEVEL_CLUSTER || level >= (int)b->nlevels)
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric level %d does not exist (%u levels)",
		                 level, b->nlevels);
	if ((unsigned)kind > TP_LINK_ETHERNET)
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric kind %d is not a tp_link_kind",
		                 (int)kind);
	if (!(gbps > 0) || !isfinite(gbps))
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric gbps %g is not a number > 0", gbps);
	if (!(latency_us >= 0) || !isfinite(latency_us))
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric latency_us %g is not a number >= 0",
		                 latency_us);
	b->fabric[level + 1] = (struct tp_fabric_impl){kind, gbps, latency_us};
	b->fabric_set[level + 1] = true;
	return 0;
}

/* Copy a string into the pool; its offset, or UINT32_MAX when out of memory. Room must have
 * been reserved with pool_reserve for the all-or-nothing paths. */
static int pool_reserve(tp_topology_builder *b, size_t bytes)
{
	if (b->pool_len + bytes > UINT32_MAX - 1)
		return TP_ELIMIT;
	return tp_grow(&b->alloc, (void **)&b->pool, &b->pool_cap, b->pool_len + bytes, 1);
}

static uint32_t pool_put(tp_topology_builder *b, const char *s)
{
	size_t n = strlen(s) + 1;
	uint32_t off = (uint32_t)b->pool_len;
	memcpy(b->pool + off, s, n);
	b->pool_len += n;
	return off;
}

/* Index of a model name in the builder's table, adding it when new; -1 when out of memory. */
static int intern_model(tp_topology_builder *b, const char *model)
{
	for (size_t i = 0; i < b->nmodels; i++)
		if (!strcmp(b->models[i], model))
			return (int)i;
	if (b->nmodels >= TP_NO_MODEL)
		return -2;
	char *copy = tp_strdup(&b->alloc, model);
	if (!copy || tp_grow(&b->alloc, (void **)&b->models, &b->cap_models, b->nmodels + 1,
	                     sizeof *b->models)) {
		tp_free(&b->alloc, copy);
		return -1;
	}
	b->models[b->nmodels] = copy;
	return (int)b->nmodels++;
}

/* Index of a node type in the builder's table (an equal one is shared), adding a copy. */
static int intern_type(tp_topology_builder *b, const tp_nodetype *nt)
{
	for (size_t i = 0; i < b->ntypes; i++)
		if (b->types[i] == nt || nodetype_equal(b->types[i], nt))
			return (int)i;
	if (b->ntypes >= TP_NO_TYPE)
		return -2;
	tp_nodetype *copy = nodetype_clone(nt, &b->alloc);
	if (!copy || tp_grow(&b->alloc, (void **)&b->types, &b->cap_types, b->ntypes + 1,
	                     sizeof *b->types)) {
		tp_nodetype_destroy(copy);
		return -1;
	}
	b->types[b->ntypes] = copy;
	return (int)b->ntypes++;
}

/* Forget models and node types interned by a call that then failed (they are the newest). */
static void unintern(tp_topology_builder *b, size_t nmodels, size_t ntypes)
{
	while (b->nmodels > nmodels)
		tp_free(&b->alloc, b->models[--b->nmodels]);
	while (b->ntypes > ntypes)
		tp_nodetype_destroy(b->types[--b->ntypes]);
}

/* Validate node options; NULL when fine, else a message written into b->errmsg. */
static int check_node_options(tp_topology_builder *b, const char *name, unsigned gpus,
                              const tp_node_options *o)
{
	if (o->version < 1 || o->version > TP_NODE_OPTIONS_VERSION)
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: options version %u is not supported",
		                 name, o->version);
	if (o->model) {
		const char *why = tp_name_problem(o->model, false);
		if (why)
			return tp_seterr(b->errmsg, TP_EINVAL, "node %s: model %s", name, why);
	}
	if (!(o->memory_gb >= 0) || !isfinite(o->memory_gb))
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: memory_gb %g is not a number >= 0",
		                 name, o->memory_gb);
	if (!o->device_perf && (!(o->perf > 0) || !isfinite(o->perf)))
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: perf %g is not a number > 0", name,
		                 o->perf);
	if (o->device_perf)
		for (unsigned i = 0; i < gpus; i++)
			if (!(o->device_perf[i] > 0) || !isfinite(o->device_perf[i]))
				return tp_seterr(b->errmsg, TP_EINVAL,
				                 "node %s: perf of device %u is %g, not a number > 0", name,
				                 i, o->device_perf[i]);
	if (o->type && o->type->ngpus != gpus)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "node %s: gpus %u differs from its node type's %u GPUs", name, gpus,
		                 o->type->ngpus);
	return 0;
}

/* Build "p0/p1/.../pk" for the first k+1 path components into buf. */
static size_t join_path(char *buf, size_t cap, const char *const *path, unsigned upto)
{
	size_t len = 0;
	for (unsigned i = 0; i <= upto; i++) {
		size_t n = strlen(path[i]);
		if (len + n + 2 > cap)
			return 0;
		if (i)
			buf[len++] = '/';
		memcpy(buf + len, path[i], n);
		len += n;
	}
	buf[len] = '\0';
	return len;
}

#define PATH_BUF ((TP_MAX_NAME + 1) * TP_MAX_LEVELS + 8)

/* Undo the Judy insertions of a failed add_node: the prefixes created (from level `from`)
 * and, when `named`, the node's name. */
static void unwind_prefixes(tp_topology_builder *b, const char *const *path, const bool *created,
                            unsigned nabove)
{
	char buf[PATH_BUF];
	PJError_t err = NULL;
	for (unsigned l = 0; l < nabove; l++) {
		if (!created[l])
			continue;
		join_path(buf, sizeof buf, path, l);
		JudySLDel(&b->pre[l].by_path, (const uint8_t *)buf, err);
		b->pre[l].n--;
	}
}

int tp_topology_builder_add_node(tp_topology_builder *b, const char *name,
                                 const char *const *path, unsigned gpus,
                                 const tp_node_options *opts)
{
	if (!b)
		return TP_EINVAL;
	const tp_node_options dflt = TP_NODE_OPTIONS_INIT;
	const tp_node_options *o = opts ? opts : &dflt;
	const char *why = tp_name_problem(name, true);
	if (why && !name)
		return tp_seterr(b->errmsg, TP_EINVAL, "node name %s", why);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "node name '%.300s' %s", name, why);
	unsigned nabove = b->nlevels - 1;
	if (nabove && !path)
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: path is NULL (%u names needed)", name,
		                 nabove);
	for (unsigned l = 0; l < nabove; l++) {
		why = tp_name_problem(path[l], true);
		if (why)
			return tp_seterr(b->errmsg, TP_EINVAL, "node %s: path[%u] (%s) %s", name, l,
			                 b->levels[l], why);
	}
	if (gpus < 1 || gpus > TP_MAX_NODE_DEVICES)
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: gpus %u is not in 1..%d", name, gpus,
		                 TP_MAX_NODE_DEVICES);
	int rc = check_node_options(b, name, gpus, o);
	if (rc)
		return rc;
	PJError_t err = NULL;
	if (JudySLGet(b->node_by_name, (const uint8_t *)name, err))
		return tp_seterr(b->errmsg, TP_EEXIST, "node name %s is used twice", name);
	if (b->ndevices + gpus > INT32_MAX)
		return tp_seterr(b->errmsg, TP_ELIMIT, "node %s: more than 2^31 devices", name);

	/* Reserve everything that can be reserved before the first change. */
	size_t pool_need = strlen(name) + 1;
	for (unsigned l = 0; l < nabove; l++)
		pool_need += strlen(path[l]) + 1;
	if (pool_reserve(b, pool_need) ||
	    tp_grow(&b->alloc, (void **)&b->nodes, &b->cap_nodes, b->nnodes + 1, sizeof *b->nodes))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	if (o->device_perf &&
	    tp_grow(&b->alloc, (void **)&b->perfs, &b->cap_perfs, b->nperfs + gpus, sizeof(float)))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	for (unsigned l = 0; l < nabove; l++) {
		struct bprefix *p = &b->pre[l];
		size_t cap1 = p->cap, cap2 = p->cap;
		if (tp_grow(&b->alloc, (void **)&p->name, &cap1, p->n + 1, sizeof *p->name) ||
		    tp_grow(&b->alloc, (void **)&p->parent, &cap2, p->n + 1, sizeof *p->parent))
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
		p->cap = cap1 < cap2 ? cap1 : cap2;
	}
	size_t nmodels0 = b->nmodels, ntypes0 = b->ntypes;
	int model = o->model ? intern_model(b, o->model) : TP_NO_MODEL;
	int type = o->type && model >= 0 ? intern_type(b, o->type) : TP_NO_TYPE;
	if (model < 0 || type < 0) {
		unintern(b, nmodels0, ntypes0);
		if (model == -2 || type == -2)
			return tp_seterr(b->errmsg, TP_ELIMIT,
			                 "node %s: more than 65534 models or node types", name);
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	}

	/* Domains of the path: look up or create each prefix. */
	struct bnode nd = {0};
	bool created[TP_MAX_LEVELS] = {false};
	char buf[PATH_BUF];
	for (unsigned l = 0; l < nabove; l++) {
		struct bprefix *p = &b->pre[l];
		join_path(buf, sizeof buf, path, l);
		PPvoid_t slot = JudySLIns(&p->by_path, (const uint8_t *)buf, err);
		if (slot == PPJERR) {
			unwind_prefixes(b, path, created, l);
			unintern(b, nmodels0, ntypes0);
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
		}
		if (!*slot) {
			*slot = (void *)(uintptr_t)(p->n + 1);
			p->parent[p->n] = l ? nd.pid[l - 1] : 0;
			p->n++;
			created[l] = true;
		}
		nd.pid[l] = (uint32_t)((uintptr_t)*slot - 1);
	}
	PPvoid_t nslot = JudySLIns(&b->node_by_name, (const uint8_t *)name, err);
	if (nslot == PPJERR) {
		unwind_prefixes(b, path, created, nabove);
		unintern(b, nmodels0, ntypes0);
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	}
	*nslot = (void *)(uintptr_t)(b->nnodes + 1);

	/* Nothing can fail from here on. */
	for (unsigned l = 0; l < nabove; l++)
		if (created[l])
			b->pre[l].name[nd.pid[l]] = pool_put(b, path[l]);
	nd.name = pool_put(b, name);
	nd.ngpus = gpus;
	nd.model = (uint16_t)model;
	nd.type = (uint16_t)type;
	nd.mem_gb = (float)o->memory_gb;
	nd.perf1 = (float)(o->device_perf ? 1.0 : o->perf);
	nd.perf = NO_PERF;
	if (o->device_perf) {
		nd.perf = (uint32_t)b->nperfs;
		for (unsigned i = 0; i < gpus; i++)
			b->perfs[b->nperfs++] = (float)o->device_perf[i];
	}
	b->nodes[b->nnodes++] = nd;
	b->ndevices += gpus;
	return 0;
}

/* The path of prefix `pid` of level `l`, joined with '/', into buf (PATH_BUF bytes). */
static void prefix_path(const tp_topology_builder *b, unsigned l, uint32_t pid, char *buf)
{
	uint32_t chain[TP_MAX_LEVELS];
	for (unsigned k = l + 1; k-- > 0;) {
		chain[k] = pid;
		pid = b->pre[k].parent[pid];
	}
	size_t len = 0;
	for (unsigned k = 0; k <= l; k++) {
		const char *nm = b->pool + b->pre[k].name[chain[k]];
		size_t n = strlen(nm);
		if (k)
			buf[len++] = '/';
		memcpy(buf + len, nm, n);
		len += n;
	}
	buf[len] = '\0';
}

/* What a builder holds, to return to it when a multi-node call fails half way. */
struct builder_mark {
	size_t nnodes, pool_len, nperfs, npre[TP_MAX_LEVELS], nmodels, ntypes;
	uint64_t ndevices;
};

static struct builder_mark builder_mark(const tp_topology_builder *b)
{
	struct builder_mark m = {b->nnodes, b->pool_len, b->nperfs, {0}, b->nmodels, b->ntypes,
	                         b->ndevices};
	for (unsigned l = 0; l + 1 < b->nlevels; l++)
		m.npre[l] = b->pre[l].n;
	return m;
}

static void builder_rewind(tp_topology_builder *b, const struct builder_mark *m)
{
	PJError_t err = NULL;
	char buf[PATH_BUF];
	for (size_t i = m->nnodes; i < b->nnodes; i++)
		JudySLDel(&b->node_by_name, (const uint8_t *)(b->pool + b->nodes[i].name), err);
	for (unsigned l = 0; l + 1 < b->nlevels; l++) {
		for (size_t pid = m->npre[l]; pid < b->pre[l].n; pid++) {
			prefix_path(b, l, (uint32_t)pid, buf);
			JudySLDel(&b->pre[l].by_path, (const uint8_t *)buf, err);
		}
		b->pre[l].n = m->npre[l];
	}
	unintern(b, m->nmodels, m->ntypes);
	b->nnodes = m->nnodes;
	b->pool_len = m->pool_len;
	b->nperfs = m->nperfs;
	b->ndevices = m->ndevices;
}

int tp_topology_builder_generate(tp_topology_builder *b, const unsigned *counts,
                                 unsigned gpus_per_node, const tp_node_options *opts)
{
	if (!b)
		return TP_EINVAL;
	if (!counts)
		return tp_seterr(b->errmsg, TP_EINVAL, "generate: counts is NULL");
	uint64_t total = 1;
	for (unsigned l = 0; l < b->nlevels; l++) {
		if (counts[l] < 1)
			return tp_seterr(b->errmsg, TP_EINVAL, "generate: counts[%u] (%s) is 0", l,
			                 b->levels[l]);
		total *= counts[l];
		if (total * gpus_per_node > INT32_MAX)
			return tp_seterr(b->errmsg, TP_ELIMIT, "generate: more than 2^31 devices");
	}
	struct builder_mark mark = builder_mark(b);
	unsigned idx[TP_MAX_LEVELS] = {0};
	char names[TP_MAX_LEVELS][TP_MAX_NAME + 16];
	const char *path[TP_MAX_LEVELS];
	char node_name[PATH_BUF + TP_MAX_LEVELS * 16];
	unsigned nl = b->nlevels;
	for (uint64_t i = 0; i < total; i++) {
		size_t len = 0;
		for (unsigned l = 0; l < nl; l++) {
			int n = snprintf(names[l], sizeof names[l], "%s%u", b->levels[l], idx[l]);
			path[l] = names[l];
			memcpy(node_name + len, names[l], (size_t)n);
			len += (size_t)n;
			node_name[len++] = l + 1 < nl ? '-' : '\0';
		}
		int rc = tp_topology_builder_add_node(b, node_name, path, gpus_per_node, opts);
		if (rc) {
			char msg[TP_ERRMSG_LEN];
			memcpy(msg, b->errmsg, sizeof msg);
			builder_rewind(b, &mark);
			return tp_seterr(b->errmsg, rc, "generate: %.480s", msg);
		}
		for (unsigned l = nl; l-- > 0;) {
			if (++idx[l] < counts[l])
				break;
			idx[l] = 0;
		}
	}
	return 0;
}

/* ---- failure domains and rack NVSwitches --------------------------------------------------- */

static struct bfd_kind *find_fd_kind(tp_topology_builder *b, const char *kind)
{
	for (size_t i = 0; i < b->nfd; i++)
		if (!strcmp(b->fd[i].name, kind))
			return &b->fd[i];
	return NULL;
}

int tp_topology_builder_add_failure_domain(tp_topology_builder *b, const char *kind,
                                           const char *domain, const char *node, int device)
{
	if (!b)
		return TP_EINVAL;
	const char *why = tp_name_problem(kind, true);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "failure-domain kind %s", why);
	for (unsigned l = 0; l < b->nlevels; l++)
		if (!strcmp(kind, b->levels[l]))
			return tp_seterr(b->errmsg, TP_EINVAL,
			                 "failure-domain kind %s is a level name", kind);
	if (!strcmp(kind, "cluster"))
		return tp_seterr(b->errmsg, TP_EINVAL, "failure-domain kind may not be 'cluster'");
	why = tp_name_problem(domain, true);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "failure domain name (kind %s) %s", kind, why);
	if (!node)
		return tp_seterr(b->errmsg, TP_EINVAL, "failure domain %s: node is NULL", domain);
	PJError_t err = NULL;
	PPvoid_t ns = JudySLGet(b->node_by_name, (const uint8_t *)node, err);
	if (!ns)
		return tp_seterr(b->errmsg, TP_ENOTFOUND, "failure domain %s/%s: unknown node %s",
		                 kind, domain, node);
	uint32_t nid = (uint32_t)((uintptr_t)*ns - 1);
	if (device < -1 || (device >= 0 && (uint32_t)device >= b->nodes[nid].ngpus))
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "failure domain %s/%s: node %s has no device %d", kind, domain, node,
		                 device);
	struct bfd_kind *k = find_fd_kind(b, kind);
	if (k) {
		int whole = Judy1Test(k->whole, nid, err);
		PPvoid_t part = JudyLGet(k->partial, nid, err);
		if (whole || (device < 0 && part)) {
			if (device < 0)
				return tp_seterr(b->errmsg, TP_EEXIST, "%s is listed twice under kind %s",
				                 node, kind);
			return tp_seterr(b->errmsg, TP_EEXIST,
			                 "%s/%d is listed twice under kind %s (node %s is listed whole)",
			                 node, device, kind, node);
		}
		if (device >= 0 && Judy1Test(k->devs, (Word_t)nid << 9 | (Word_t)device, err))
			return tp_seterr(b->errmsg, TP_EEXIST, "%s/%d is listed twice under kind %s", node,
			                 device, kind);
	}
	/* Reserve, then insert; undo the insertions that succeeded if a later one fails. */
	bool new_kind = !k;
	if (new_kind) {
		if (tp_grow(&b->alloc, (void **)&b->fd, &b->cap_fd, b->nfd + 1, sizeof *b->fd))
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory");
		k = &b->fd[b->nfd];
		memset(k, 0, sizeof *k);
		k->name = tp_strdup(&b->alloc, kind);
		if (!k->name)
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory");
	}
	if (tp_grow(&b->alloc, (void **)&k->members, &k->cap_mem, k->nmem + 1, sizeof *k->members) ||
	    tp_grow(&b->alloc, (void **)&k->dom_names, &k->cap_dom, k->ndom + 1,
	            sizeof *k->dom_names))
		goto nomem;
	PPvoid_t ds = JudySLIns(&k->dom_by_name, (const uint8_t *)domain, err);
	if (ds == PPJERR)
		goto nomem;
	bool new_dom = !*ds;
	if (new_dom) {
		char *copy = tp_strdup(&b->alloc, domain);
		if (!copy) {
			JudySLDel(&k->dom_by_name, (const uint8_t *)domain, err);
			goto nomem;
		}
		k->dom_names[k->ndom] = copy;
		*ds = (void *)(uintptr_t)(k->ndom + 1);
	}
	uint32_t dom = (uint32_t)((uintptr_t)*ds - 1);
	int ok;
	if (device < 0) {
		ok = Judy1Set(&k->whole, nid, err) != JERR;
	} else {
		ok = Judy1Set(&k->devs, (Word_t)nid << 9 | (Word_t)device, err) != JERR;
		if (ok) {
			PPvoid_t pc = JudyLIns(&k->partial, nid, err);
			if (pc == PPJERR) {
				Judy1Unset(&k->devs, (Word_t)nid << 9 | (Word_t)device, err);
				ok = 0;
			} else {
				*pc = (void *)((uintptr_t)*pc + 1);
			}
		}
	}
	if (!ok) {
		if (new_dom) {
			JudySLDel(&k->dom_by_name, (const uint8_t *)domain, err);
			tp_free(&b->alloc, k->dom_names[k->ndom]);
		}
		goto nomem;
	}
	if (new_dom)
		k->ndom++;
	k->members[k->nmem++] = (struct bfd_member){nid, device, dom};
	if (new_kind)
		b->nfd++;
	return 0;
nomem:
	if (new_kind)
		fd_kind_free(b, k);
	return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding %s to failure domain %s/%s",
	                 node, kind, domain);
}

int tp_topology_builder_add_nvswitch(tp_topology_builder *b, unsigned level,
                                     const char *const *path, const char *name)
{
	if (!b)
		return TP_EINVAL;
	if (level + 1 >= b->nlevels)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "NVSwitch level %u is not a level above the node", level);
	/* The name first, so that the path's messages can say which switch they are about. */
	const char *why = tp_name_problem(name, true);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "NVSwitch name %s", why);
	if (!path)
		return tp_seterr(b->errmsg, TP_EINVAL, "NVSwitch %s: path is NULL (%u names needed)",
		                 name, level + 1);
	for (unsigned l = 0; l <= level; l++) {
		why = tp_name_problem(path[l], true);
		if (why)
			return tp_seterr(b->errmsg, TP_EINVAL, "NVSwitch %s: path[%u] (%s) %s", name, l,
			                 b->levels[l], why);
	}
	char buf[PATH_BUF + TP_MAX_NAME + 8];
	join_path(buf, PATH_BUF, path, level);
	PJError_t err = NULL;
	PPvoid_t slot = JudySLGet(b->pre[level].by_path, (const uint8_t *)buf, err);
	if (!slot)
		return tp_seterr(b->errmsg, TP_ENOTFOUND, "NVSwitch %s: no %s %s (add its nodes first)",
		                 name, b->levels[level], buf);
	uint32_t pid = (uint32_t)((uintptr_t)*slot - 1);
	size_t len = strlen(buf);
	snprintf(buf + len, sizeof buf - len, "\x01%u\x01%s", level, name);
	if (JudySLGet(b->nvs_names, (const uint8_t *)buf, err))
		return tp_seterr(b->errmsg, TP_EEXIST, "NVSwitch %s is added twice to that %s", name,
		                 b->levels[level]);
	if (tp_grow(&b->alloc, (void **)&b->nvs, &b->cap_nvs, b->nnvs + 1, sizeof *b->nvs))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding NVSwitch %s", name);
	PPvoid_t ins = JudySLIns(&b->nvs_names, (const uint8_t *)buf, err);
	if (ins == PPJERR)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding NVSwitch %s", name);
	*ins = (void *)1;
	b->nvs[b->nnvs++] = (struct bnvs){level, pid};
	return 0;
}

/* ============================================================================================ */
/* Build                                                                                        */
/* ============================================================================================ */

/* Sort record for the (rare) case where nodes were not added in tree order: the prefix ids
 * travel with the node so the comparison needs no context (qsort has none in C11). */
struct sort_rec {
	uint32_t pid[TP_MAX_LEVELS - 1];
	uint32_t idx;
};

static int cmp_tree_order(const void *x, const void *y)
{
	const struct sort_rec *a = x, *c = y;
	for (unsigned l = 0; l < TP_MAX_LEVELS - 1; l++)
		if (a->pid[l] != c->pid[l])
			return a->pid[l] < c->pid[l] ? -1 : 1;
	return a->idx < c->idx ? -1 : a->idx > c->idx;
}

/* Fill order[] with the builder's node indices in tree order. */
static int sort_tree_order(const tp_topology_builder *b, const tp_allocator *a, uint32_t *order)
{
	struct sort_rec *rec = tp_mallocn(a, b->nnodes, sizeof *rec);
	if (!rec)
		return TP_ENOMEM;
	for (size_t i = 0; i < b->nnodes; i++) {
		memset(&rec[i], 0, sizeof rec[i]);
		memcpy(rec[i].pid, b->nodes[i].pid, (b->nlevels - 1) * sizeof(uint32_t));
		rec[i].idx = (uint32_t)i;
	}
	qsort(rec, b->nnodes, sizeof *rec, cmp_tree_order);
	for (size_t i = 0; i < b->nnodes; i++)
		order[i] = rec[i].idx;
	tp_free(a, rec);
	return 0;
}

/* Whether the nodes' prefix ids never decrease in added order (a node's pid at level l only
 * matters among nodes sharing the pids above it; since pids are given in order of first
 * appearance, a tree-ordered list has non-decreasing pids at every level). */
static bool in_tree_order(const tp_topology_builder *b)
{
	unsigned nabove = b->nlevels - 1;
	for (size_t i = 1; i < b->nnodes; i++)
		for (unsigned l = 0; l < nabove; l++) {
			if (b->nodes[i].pid[l] != b->nodes[i - 1].pid[l]) {
				if (b->nodes[i].pid[l] < b->nodes[i - 1].pid[l])
					return false;
				break;
			}
		}
	return true;
}

struct build_ctx {
	tp_topology_builder *b;
	tp_topology *t;
	uint32_t *order;          /* [nnodes] builder node index in tree order */
	uint32_t *pid_to_dom[TP_MAX_LEVELS]; /* [pre[l].n] */
};

static int judy_path_insert(tp_topology *t, Pvoid_t *map, const char *key, uint32_t value)
{
	PJError_t err = NULL;
	PPvoid_t slot = JudySLIns(map, (const uint8_t *)key, err);
	if (slot == PPJERR)
		return TP_ENOMEM;
	*slot = (void *)(uintptr_t)(value + 1);
	(void)t;
	return 0;
}

static int build_levels(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	unsigned nabove = b->nlevels - 1;
	uint32_t nn = t->nnodes;
	for (unsigned l = 0; l < nabove; l++) {
		struct tp_level_impl *lv = &t->lv[l];
		uint32_t nd = (uint32_t)b->pre[l].n;
		lv->ndom = nd;
		lv->parent = l ? tp_mallocn(a, nd, sizeof(uint32_t)) : NULL;
		lv->child_first = tp_mallocn(a, (size_t)nd + 1, sizeof(uint32_t));
		lv->node_first = tp_mallocn(a, (size_t)nd + 1, sizeof(uint32_t));
		lv->dname = tp_mallocn(a, nd, sizeof(char *));
		x->pid_to_dom[l] = tp_mallocn(a, nd, sizeof(uint32_t));
		if ((l && !lv->parent) || !lv->child_first || !lv->node_first || !lv->dname ||
		    !x->pid_to_dom[l])
			return TP_ENOMEM;
	}
	struct tp_level_impl *nlv = &t->lv[nabove];
	nlv->ndom = nn;
	nlv->parent = nabove ? tp_mallocn(a, nn, sizeof(uint32_t)) : NULL;
	nlv->dname = tp_mallocn(a, nn, sizeof(char *));
	if ((nabove && !nlv->parent) || !nlv->dname)
		return TP_ENOMEM;

	/* Walk the nodes in tree order; a new domain starts where its prefix id changes. */
	uint32_t cur[TP_MAX_LEVELS], cnt[TP_MAX_LEVELS] = {0};
	for (unsigned l = 0; l < nabove; l++)
		cur[l] = UINT32_MAX;
	for (uint32_t i = 0; i < nn; i++) {
		const struct bnode *bn = &b->nodes[x->order[i]];
		bool changed = false;
		for (unsigned l = 0; l < nabove; l++) {
			if (!changed && bn->pid[l] == cur[l])
				continue;
			changed = true;
			cur[l] = bn->pid[l];
			uint32_t d = cnt[l]++;
			x->pid_to_dom[l][bn->pid[l]] = d;
			t->lv[l].node_first[d] = i;
			t->lv[l].child_first[d] = l + 1 < nabove ? cnt[l + 1] : i;
			if (l)
				t->lv[l].parent[d] = cnt[l - 1] - 1;
		}
		if (nabove)
			nlv->parent[i] = cnt[nabove - 1] - 1;
	}
	for (unsigned l = 0; l < nabove; l++) {
		t->lv[l].node_first[cnt[l]] = nn;
		t->lv[l].child_first[cnt[l]] = l + 1 < nabove ? cnt[l + 1] : nn;
	}
	return 0;
}

/* Copy the names into one pool owned by the topology, and fill the name maps. */
static int build_names(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	unsigned nabove = b->nlevels - 1;
	t->names = tp_malloc(&t->alloc, b->pool_len);
	if (!t->names)
		return TP_ENOMEM;
	memcpy(t->names, b->pool, b->pool_len);
	t->names_len = b->pool_len;
	char buf[PATH_BUF];
	for (unsigned l = 0; l < nabove; l++) {
		for (uint32_t pid = 0; pid < b->pre[l].n; pid++) {
			uint32_t d = x->pid_to_dom[l][pid];
			t->lv[l].dname[d] = t->names + b->pre[l].name[pid];
			prefix_path(b, l, pid, buf);
			if (judy_path_insert(t, &t->lv[l].by_path, buf, d))
				return TP_ENOMEM;
		}
	}
	for (uint32_t i = 0; i < t->nnodes; i++) {
		const char *nm = t->names + b->nodes[x->order[i]].name;
		t->lv[nabove].dname[i] = nm;
		if (judy_path_insert(t, &t->node_by_name, nm, i))
			return TP_ENOMEM;
	}
	return 0;
}

static int build_nodes(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	uint32_t nn = t->nnodes, ndev = t->ndevices;
	t->dev_first = tp_mallocn(a, (size_t)nn + 1, sizeof(uint32_t));
	t->node_model = tp_mallocn(a, nn, sizeof(uint16_t));
	t->node_mem_gb = tp_mallocn(a, nn, sizeof(float));
	t->node_type = tp_mallocn(a, nn, sizeof(uint16_t));
	t->dev_node = tp_mallocn(a, ndev, sizeof(uint32_t));
	t->dev_perf = tp_mallocn(a, ndev, sizeof(float));
	if (!t->dev_first || !t->node_model || !t->node_mem_gb || !t->node_type || !t->dev_node ||
	    !t->dev_perf)
		return TP_ENOMEM;
	uint32_t dev = 0;
	for (uint32_t i = 0; i < nn; i++) {
		const struct bnode *bn = &b->nodes[x->order[i]];
		t->dev_first[i] = dev;
		t->node_model[i] = bn->model;
		t->node_mem_gb[i] = bn->mem_gb;
		t->node_type[i] = bn->type;
		if (bn->ngpus > t->max_node_devices)
			t->max_node_devices = bn->ngpus;
		for (uint32_t k = 0; k < bn->ngpus; k++, dev++) {
			t->dev_node[dev] = i;
			t->dev_perf[dev] = bn->perf == NO_PERF ? bn->perf1 : b->perfs[bn->perf + k];
		}
	}
	t->dev_first[nn] = dev;
	/* Largest domain at each level, in devices and in nodes (the index and histograms use it). */
	for (unsigned l = 0; l + 1 < t->nlevels; l++) {
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t f = t->lv[l].node_first[d], e = t->lv[l].node_first[d + 1];
			uint32_t nd = t->dev_first[e] - t->dev_first[f];
			if (nd > t->lv[l].max_devices)
				t->lv[l].max_devices = nd;
			if (e - f > t->lv[l].max_nodes)
				t->lv[l].max_nodes = e - f;
		}
	}
	t->lv[t->nlevels - 1].max_devices = t->max_node_devices;
	t->lv[t->nlevels - 1].max_nodes = 1;
	return 0;
}

static int build_tables(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	for (unsigned l = 0; l < b->nlevels; l++) {
		t->lv[l].name = tp_strdup(a, b->levels[l]);
		if (!t->lv[l].name)
			return TP_ENOMEM;
	}
	memcpy(t->fabric, b->fabric, sizeof t->fabric);
	if (b->nmodels) {
		t->models = tp_calloc(a, b->nmodels, sizeof(char *));
		if (!t->models)
			return TP_ENOMEM;
		for (size_t i = 0; i < b->nmodels; i++, t->nmodels++)
			if (!(t->models[i] = tp_strdup(a, b->models[i])))
				return TP_ENOMEM;
	}
	if (b->ntypes) {
		t->types = tp_calloc(a, b->ntypes, sizeof(tp_nodetype *));
		if (!t->types)
			return TP_ENOMEM;
		for (size_t i = 0; i < b->ntypes; i++, t->ntypes++)
			if (!(t->types[i] = nodetype_clone(b->types[i], a)))
				return TP_ENOMEM;
	}
	/* A node type's NVLink figures set the bandwidth inside its nodes unless the caller set
	 * the node level's fabric (docs/cost-model.md). */
	for (unsigned i = 0; i < t->ntypes && !b->fabric_set[b->nlevels]; i++)
		t->type_nvlink = t->type_nvlink || nodetype_has_nvlink(t->types[i]);
	return 0;
}

static int build_nvswitches(struct build_ctx *x)
{
	tp_topology *t = x->t;
	for (size_t i = 0; i < x->b->nnvs; i++) {
		const struct bnvs *v = &x->b->nvs[i];
		struct tp_level_impl *lv = &t->lv[v->level];
		if (!lv->nvswitches && !(lv->nvswitches = tp_calloc(&t->alloc, lv->ndom, sizeof(uint16_t))))
			return TP_ENOMEM;
		uint16_t *n = &lv->nvswitches[x->pid_to_dom[v->level][v->pid]];
		if (*n < UINT16_MAX)
			(*n)++;
	}
	return 0;
}

/* Failure domains: named domains first (in order of first mention), then one implicit domain
 * for every node (or device of a partly listed node) not listed. */
static int build_fd(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	if (!b->nfd)
		return 0;
	t->fd = tp_calloc(a, b->nfd, sizeof *t->fd);
	if (!t->fd)
		return TP_ENOMEM;
	t->nfd_alloc = (unsigned)b->nfd;
	uint32_t *inv = tp_mallocn(a, t->nnodes ? t->nnodes : 1, sizeof(uint32_t));
	if (!inv)
		return TP_ENOMEM;
	for (uint32_t i = 0; i < t->nnodes; i++)
		inv[x->order[i]] = i;
	int rc = TP_ENOMEM;
	for (size_t ki = 0; ki < b->nfd; ki++, t->nfd++) {
		const struct bfd_kind *k = &b->fd[ki];
		struct tp_fd_kind *fk = &t->fd[ki];
		if (!(fk->name = tp_strdup(a, k->name)))
			goto out;
		fk->dev_fd = tp_mallocn(a, t->ndevices, sizeof(uint32_t));
		if (!fk->dev_fd)
			goto out;
		for (uint32_t d = 0; d < t->ndevices; d++)
			fk->dev_fd[d] = TP_NONE;
		for (size_t m = 0; m < k->nmem; m++) {
			const struct bfd_member *mb = &k->members[m];
			uint32_t node = inv[mb->node];
			uint32_t f = t->dev_first[node], e = t->dev_first[node + 1];
			if (mb->device >= 0)
				fk->dev_fd[f + (uint32_t)mb->device] = mb->dom;
			else
				for (uint32_t d = f; d < e; d++)
					fk->dev_fd[d] = mb->dom;
		}
		/* Implicit domains: count them, then name them. */
		size_t extra = 0;
		for (uint32_t node = 0; node < t->nnodes; node++) {
			uint32_t f = t->dev_first[node], e = t->dev_first[node + 1], unl = 0;
			for (uint32_t d = f; d < e; d++)
				unl += fk->dev_fd[d] == TP_NONE;
			extra += unl == e - f ? 1 : unl;
		}
		fk->ndom = (uint32_t)(k->ndom + extra);
		fk->dname = tp_calloc(a, fk->ndom, sizeof(char *));
		if (!fk->dname)
			goto out;
		for (size_t i = 0; i < k->ndom; i++)
			if (!(fk->dname[i] = tp_strdup(a, k->dom_names[i])))
				goto out;
		uint32_t next = (uint32_t)k->ndom;
		char buf[TP_MAX_NAME + 16];
		for (uint32_t node = 0; node < t->nnodes; node++) {
			uint32_t f = t->dev_first[node], e = t->dev_first[node + 1], unl = 0;
			for (uint32_t d = f; d < e; d++)
				unl += fk->dev_fd[d] == TP_NONE;
			if (!unl)
				continue;
			const char *nm = t->lv[t->nlevels - 1].dname[node];
			if (unl == e - f) {
				if (!(fk->dname[next] = tp_strdup(a, nm)))
					goto out;
				for (uint32_t d = f; d < e; d++)
					fk->dev_fd[d] = next;
				next++;
				continue;
			}
			for (uint32_t d = f; d < e; d++) {
				if (fk->dev_fd[d] != TP_NONE)
					continue;
				snprintf(buf, sizeof buf, "%s/%u", nm, d - f);
				if (!(fk->dname[next] = tp_strdup(a, buf)))
					goto out;
				fk->dev_fd[d] = next++;
			}
		}
	}
	rc = 0;
out:
	tp_free(a, inv);
	return rc;
}

int tp_topology_build(tp_topology_builder *b, tp_topology **out)
{
	if (!b || !out)
		return TP_EINVAL;
	*out = NULL;
	if (b->nnodes == 0)
		return tp_seterr(b->errmsg, TP_EINVAL, "the topology has no node");
	tp_topology *t = tp_calloc(&b->alloc, 1, sizeof *t);
	if (!t)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory building the topology");
	t->alloc = b->alloc;
	t->nlevels = b->nlevels;
	t->nnodes = (uint32_t)b->nnodes;
	t->ndevices = (uint32_t)b->ndevices;
	struct build_ctx x = {b, t, NULL, {NULL}};
	int rc = TP_ENOMEM;
	x.order = tp_mallocn(&t->alloc, b->nnodes, sizeof(uint32_t));
	if (!x.order)
		goto out;
	for (uint32_t i = 0; i < t->nnodes; i++)
		x.order[i] = i;
	if (!in_tree_order(b) && (rc = sort_tree_order(b, &t->alloc, x.order)) != 0)
		goto out;
	rc = build_tables(&x);
	if (!rc)
		rc = build_levels(&x);
	if (!rc)
		rc = build_nodes(&x);
	if (!rc)
		rc = build_names(&x);
	if (!rc)
		rc = build_nvswitches(&x);
	if (!rc)
		rc = build_fd(&x);
out:
	tp_free(&t->alloc, x.order);
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		tp_free(&t->alloc, x.pid_to_dom[l]);
	if (rc) {
		tp_topology_destroy(t);
		return tp_seterr(b->errmsg, rc, "out of memory building the topology");
	}
	*out = t;
	return 0;
}

void tp_topology_destroy(tp_topology *t)
{
	if (!t)
		return;
	tp_allocator a = t->alloc;
	PJError_t err = NULL;
	for (unsigned l = 0; l < t->nlevels; l++) {
		struct tp_level_impl *lv = &t->lv[l];
		tp_free(&a, lv->name);
		tp_free(&a, lv->parent);
		tp_free(&a, lv->child_first);
		tp_free(&a, lv->node_first);
		tp_free(&a, (void *)lv->dname);
		tp_free(&a, lv->nvswitches);
		JudySLFreeArray(&lv->by_path, err);
	}
	tp_free(&a, t->dev_first);
	tp_free(&a, t->node_model);
	tp_free(&a, t->node_mem_gb);
	tp_free(&a, t->node_type);
	JudySLFreeArray(&t->node_by_name, err);
	tp_free(&a, t->dev_node);
	tp_free(&a, t->dev_perf);
	for (unsigned i = 0; i < t->nmodels; i++)
		tp_free(&a, t->models[i]);
	tp_free(&a, t->models);
	for (unsigned i = 0; i < t->ntypes; i++)
		tp_nodetype_destroy(t->types[i]);
	tp_free(&a, t->types);
	/* Every allocated kind, including one a failed build left half built (zeroed fields). */
	for (unsigned k = 0; t->fd && k < t->nfd_alloc; k++) {
		struct tp_fd_kind *fk = &t->fd[k];
		tp_free(&a, fk->name);
		if (fk->dname)
			for (uint32_t i = 0; i < fk->ndom; i++)
				tp_free(&a, (void *)fk->dname[i]);
		tp_free(&a, (void *)fk->dname);
		tp_free(&a, fk->dev_fd);
	}
	tp_free(&a, t->fd);
	tp_free(&a, t->names);
	tp_free(&a, t);
}

/* ============================================================================================ */
/* Generators                                                                                   */
/* ============================================================================================ */

int tp_topology_generate_nvl72(tp_topology **out, unsigned blocks, unsigned racks_per_block,
                               const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (blocks < 1 || racks_per_block < 1)
		return TP_EINVAL;
	if ((uint64_t)blocks * racks_per_block * 72 > INT32_MAX)
		return TP_ELIMIT;
	static const char *const levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	int rc = tp_topology_builder_create(&b, levels, 3, alloc);
	if (rc)
		return rc;
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "GB200";
	o.memory_gb = 186;
	unsigned counts[3] = {blocks, racks_per_block, 18};
	rc = tp_topology_builder_set_fabric(b, 2, TP_LINK_NVLINK, 900, 3.4);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900, 3.4);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 14);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, 4, &o);
	/* Each rack's NVLink fabric: 9 NVSwitch trays. */
	char bn[32], rn[32], sn[32];
	for (unsigned i = 0; !rc && i < blocks; i++)
		for (unsigned r = 0; !rc && r < racks_per_block; r++)
			for (unsigned s = 0; !rc && s < 9; s++) {
				snprintf(bn, sizeof bn, "block%u", i);
				snprintf(rn, sizeof rn, "rack%u", r);
				snprintf(sn, sizeof sn, "nvswitch-tray%u", s);
				const char *path[2] = {bn, rn};
				rc = tp_topology_builder_add_nvswitch(b, 1, path, sn);
			}
	if (!rc)
		rc = tp_topology_build(b, out);
	tp_topology_builder_destroy(b);
	return rc;
}

/* An HGX H100 board: 4 PCIe switches each holding 2 GPUs and 2 NICs under the host bridge, and
 * 4 NVSwitches joining all 8 GPUs (450 GB/s per GPU, one direction). */
static int hgx_nodetype(tp_nodetype **out, const tp_allocator *alloc)
{
	tp_nodetype *nt = NULL;
	int rc = tp_nodetype_create(&nt, 8, alloc);
	char name[32];
	for (unsigned s = 0; !rc && s < 4; s++) {
		unsigned sw;
		rc = tp_nodetype_add_pcie_switch(nt, -1, &sw);
		for (unsigned g = 0; !rc && g < 2; g++)
			rc = tp_nodetype_set_gpu_switch(nt, 2 * s + g, (int)sw);
		for (unsigned n = 0; !rc && n < 2; n++) {
			snprintf(name, sizeof name, "mlx5_%u", 2 * s + n);
			rc = tp_nodetype_add_nic(nt, name, (int)sw, 50, NULL);
		}
	}
	for (unsigned s = 0; !rc && s < 4; s++) {
		snprintf(name, sizeof name, "nvswitch%u", s);
		rc = tp_nodetype_add_nvswitch(nt, name, NULL);
	}
	for (unsigned i = 0; !rc && i < 8; i++)
		for (unsigned j = i + 1; !rc && j < 8; j++)
			rc = tp_nodetype_set_nvlink(nt, i, j, 450);
	if (rc) {
		tp_nodetype_destroy(nt);
		return rc;
	}
	*out = nt;
	return 0;
}

int tp_topology_generate_hgx(tp_topology **out, unsigned units, unsigned nodes_per_unit,
                             const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (units < 1 || nodes_per_unit < 1)
		return TP_EINVAL;
	if ((uint64_t)units * nodes_per_unit * 8 > INT32_MAX)
		return TP_ELIMIT;
	static const char *const levels[] = {"su", "node"};
	tp_topology_builder *b = NULL;
	tp_nodetype *nt = NULL;
	int rc = tp_topology_builder_create(&b, levels, 2, alloc);
	if (rc)
		return rc;
	rc = hgx_nodetype(&nt, alloc);
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "H100";
	o.memory_gb = 80;
	o.type = nt;
	unsigned counts[2] = {units, nodes_per_unit};
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 450, 3.0);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 10);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, 8, &o);
	if (!rc)
		rc = tp_topology_build(b, out);
	tp_nodetype_destroy(nt);
	tp_topology_builder_destroy(b);
	return rc;
}

/* ============================================================================================ */
/* Queries                                                                                      */
/* ============================================================================================ */

int tp_topology_level_index(const struct tp_topology *t, const char *name)
{
	if (!name)
		return -1;
	for (unsigned l = 0; l < t->nlevels; l++)
		if (!strcmp(t->lv[l].name, name))
			return (int)l;
	return -1;
}

unsigned tp_topology_level_count(const tp_topology *t) { return t ? t->nlevels : 0; }

const char *tp_topology_level_name(const tp_topology *t, unsigned level)
{
	return t && level < t->nlevels ? t->lv[level].name : NULL;
}

int tp_topology_level_by_name(const tp_topology *t, const char *name)
{
	if (!t || !name)
		return TP_EINVAL;
	int l = tp_topology_level_index(t, name);
	return l < 0 ? TP_ENOTFOUND : l;
}

int tp_topology_fabric(const tp_topology *t, int level, tp_link_kind *kind, double *gbps,
                       double *latency_us)
{
	if (!t || level < TP_LEVEL_CLUSTER || level >= (int)t->nlevels)
		return TP_EINVAL;
	const struct tp_fabric_impl *f = &t->fabric[level + 1];
	if (kind)
		*kind = f->kind;
	if (gbps)
		*gbps = f->gbps;
	if (latency_us)
		*latency_us = f->latency_us;
	return 0;
}

static bool dom_ok(const tp_topology *t, unsigned level, uint32_t dom)
{
	return t && level < t->nlevels && dom < t->lv[level].ndom;
}

uint32_t tp_topology_domain_count(const tp_topology *t, unsigned level)
{
	return t && level < t->nlevels ? t->lv[level].ndom : 0;
}

const char *tp_topology_domain_name(const tp_topology *t, unsigned level, uint32_t dom)
{
	return dom_ok(t, level, dom) ? t->lv[level].dname[dom] : NULL;
}

int tp_topology_domain_path(const tp_topology *t, unsigned level, uint32_t dom, char *buf,
                            size_t len)
{
	if (!dom_ok(t, level, dom) || (!buf && len))
		return TP_EINVAL;
	if (level == tp_node_level(t)) {
		int n = snprintf(buf, len, "%s", t->lv[level].dname[dom]);
		return n;
	}
	uint32_t chain[TP_MAX_LEVELS];
	for (unsigned l = level + 1; l-- > 0;) {
		chain[l] = dom;
		if (l)
			dom = t->lv[l].parent[dom];
	}
	size_t total = 0;
	for (unsigned l = 0; l <= level; l++) {
		const char *nm = t->lv[l].dname[chain[l]];
		size_t n = strlen(nm);
		if (l) {
			if (total + 1 < len)
				buf[total] = '/';
			total++;
		}
		for (size_t i = 0; i < n; i++, total++)
			if (total + 1 < len)
				buf[total] = nm[i];
	}
	if (len)
		buf[total < len ? total : len - 1] = '\0';
	return (int)total;
}

int tp_topology_domain_by_path(const tp_topology *t, unsigned level, const char *path,
                               uint32_t *dom)
{
	if (!t || level >= t->nlevels || !path || !dom)
		return TP_EINVAL;
	PJError_t err = NULL;
	Pcvoid_t map = level == tp_node_level(t) ? t->node_by_name : t->lv[level].by_path;
	if (strlen(path) >= PATH_BUF)
		return TP_ENOTFOUND;
	PPvoid_t slot = JudySLGet(map, (const uint8_t *)path, err);
	if (!slot)
		return TP_ENOTFOUND;
	*dom = (uint32_t)((uintptr_t)*slot - 1);
	return 0;
}

uint32_t tp_topology_domain_parent(const tp_topology *t, unsigned level, uint32_t dom)
{
	if (!dom_ok(t, level, dom) || level == 0)
		return TP_NONE;
	return t->lv[level].parent[dom];
}

int tp_topology_domain_children(const tp_topology *t, unsigned level, uint32_t dom,
                                uint32_t *first, uint32_t *n)
{
	if (!dom_ok(t, level, dom) || level + 1 >= t->nlevels || !first || !n)
		return TP_EINVAL;
	*first = t->lv[level].child_first[dom];
	*n = t->lv[level].child_first[dom + 1] - *first;
	return 0;
}

int tp_topology_domain_nodes(const tp_topology *t, unsigned level, uint32_t dom,
                             uint32_t *first, uint32_t *n)
{
	if (!dom_ok(t, level, dom) || !first || !n)
		return TP_EINVAL;
	tp_dom_nodes(t, level, dom, first, n);
	return 0;
}

int tp_topology_domain_devices(const tp_topology *t, unsigned level, uint32_t dom,
                               uint32_t *first, uint32_t *n)
{
	if (!dom_ok(t, level, dom) || !first || !n)
		return TP_EINVAL;
	uint32_t f, k;
	tp_dom_nodes(t, level, dom, &f, &k);
	*first = t->dev_first[f];
	*n = t->dev_first[f + k] - *first;
	return 0;
}

uint32_t tp_topology_node_domain(const tp_topology *t, uint32_t node, unsigned level)
{
	if (!t || node >= t->nnodes || level >= t->nlevels)
		return TP_NONE;
	return tp_node_ancestor(t, node, level);
}

unsigned tp_topology_domain_nvswitch_count(const tp_topology *t, unsigned level, uint32_t dom)
{
	if (!dom_ok(t, level, dom) || !t->lv[level].nvswitches)
		return 0;
	return t->lv[level].nvswitches[dom];
}

uint32_t tp_topology_node_count(const tp_topology *t) { return t ? t->nnodes : 0; }
uint32_t tp_topology_device_count(const tp_topology *t) { return t ? t->ndevices : 0; }

int tp_topology_node_by_name(const tp_topology *t, const char *name, uint32_t *node)
{
	if (!t)
		return TP_EINVAL;
	return tp_topology_domain_by_path(t, tp_node_level(t), name, node);
}

const char *tp_topology_node_name(const tp_topology *t, uint32_t node)
{
	return t && node < t->nnodes ? t->lv[tp_node_level(t)].dname[node] : NULL;
}

const char *tp_topology_node_model(const tp_topology *t, uint32_t node)
{
	if (!t || node >= t->nnodes || t->node_model[node] == TP_NO_MODEL)
		return NULL;
	return t->models[t->node_model[node]];
}

double tp_topology_node_memory_gb(const tp_topology *t, uint32_t node)
{
	return t && node < t->nnodes ? t->node_mem_gb[node] : 0;
}

const tp_nodetype *tp_topology_node_type(const tp_topology *t, uint32_t node)
{
	if (!t || node >= t->nnodes || t->node_type[node] == TP_NO_TYPE)
		return NULL;
	return t->types[t->node_type[node]];
}

uint32_t tp_topology_device_node(const tp_topology *t, uint32_t dev)
{
	return t && dev < t->ndevices ? t->dev_node[dev] : TP_NONE;
}

uint32_t tp_topology_device_index(const tp_topology *t, uint32_t dev)
{
	return t && dev < t->ndevices ? dev - t->dev_first[t->dev_node[dev]] : TP_NONE;
}

double tp_topology_device_perf(const tp_topology *t, uint32_t dev)
{
	return t && dev < t->ndevices ? t->dev_perf[dev] : 0;
}

int tp_topology_device_by_name(const tp_topology *t, const char *name, uint32_t *dev)
{
	if (!t || !name || !dev)
		return TP_EINVAL;
	const char *slash = strrchr(name, '/');
	if (!slash || slash == name || !slash[1])
		return TP_EINVAL;
	size_t nlen = (size_t)(slash - name);
	if (nlen > TP_MAX_NAME)
		return TP_ENOTFOUND;
	char node[TP_MAX_NAME + 1];
	memcpy(node, name, nlen);
	node[nlen] = '\0';
	unsigned long idx = 0;
	for (const char *p = slash + 1; *p; p++) {
		if (*p < '0' || *p > '9' || idx > TP_MAX_NODE_DEVICES)
			return TP_EINVAL;
		idx = idx * 10 + (unsigned long)(*p - '0');
	}
	uint32_t n;
	if (tp_topology_node_by_name(t, node, &n))
		return TP_ENOTFOUND;
	if (idx >= tp_node_ndev(t, n))
		return TP_ENOTFOUND;
	*dev = t->dev_first[n] + (uint32_t)idx;
	return 0;
}

int tp_topology_common_level(const tp_topology *t, uint32_t a, uint32_t b, int *level)
{
	if (!t || a >= t->ndevices || b >= t->ndevices || !level)
		return TP_EINVAL;
	uint32_t x = t->dev_node[a], y = t->dev_node[b];
	int l = (int)tp_node_level(t);
	while (l >= 0 && x != y) {
		if (l == 0) {
			*level = TP_LEVEL_CLUSTER;
			return 0;
		}
		x = t->lv[l].parent[x];
		y = t->lv[l].parent[y];
		l--;
	}
	*level = l;
	return 0;
}

unsigned tp_topology_fd_kind_count(const tp_topology *t) { return t ? t->nfd : 0; }

const char *tp_topology_fd_kind_name(const tp_topology *t, unsigned kind)
{
	return t && kind < t->nfd ? t->fd[kind].name : NULL;
}

int tp_topology_fd_kind_by_name(const tp_topology *t, const char *name)
{
	if (!t || !name)
		return TP_EINVAL;
	for (unsigned k = 0; k < t->nfd; k++)
		if (!strcmp(t->fd[k].name, name))
			return (int)k;
	return TP_ENOTFOUND;
}

uint32_t tp_topology_fd_count(const tp_topology *t, unsigned kind)
{
	return t && kind < t->nfd ? t->fd[kind].ndom : 0;
}

const char *tp_topology_fd_name(const tp_topology *t, unsigned kind, uint32_t fd)
{
	return t && kind < t->nfd && fd < t->fd[kind].ndom ? t->fd[kind].dname[fd] : NULL;
}

uint32_t tp_topology_device_fd(const tp_topology *t, unsigned kind, uint32_t dev)
{
	return t && kind < t->nfd && dev < t->ndevices ? t->fd[kind].dev_fd[dev] : TP_NONE;
}

/* Judy has no size query for JudySL arrays; estimate 16 bytes per 8-byte chunk of each key,
 * which is what its branch-and-leaf layout costs for keys that share no long prefixes. */
static size_t judysl_estimate(const char *const *names, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += 16 * ((strlen(names[i]) + 8) / 8);
	return m;
}

size_t tp_topology_memory(const tp_topology *t)
{
	if (!t)
		return 0;
	size_t m = sizeof *t + t->names_len;
	m += ((size_t)t->nnodes + 1) * sizeof(uint32_t);            /* dev_first */
	m += (size_t)t->nnodes * (2 * sizeof(uint16_t) + sizeof(float));
	m += (size_t)t->ndevices * (sizeof(uint32_t) + sizeof(float));
	for (unsigned l = 0; l < t->nlevels; l++) {
		const struct tp_level_impl *lv = &t->lv[l];
		size_t n = lv->ndom;
		m += n * sizeof(char *);                                  /* dname */
		if (lv->parent)
			m += n * sizeof(uint32_t);
		if (lv->child_first)
			m += 2 * (n + 1) * sizeof(uint32_t);
		if (lv->nvswitches)
			m += n * sizeof(uint16_t);
		/* paths above the node are about one name per level longer than the own name */
		m += judysl_estimate(lv->dname, n) + (l + 1 < t->nlevels ? n * 16 * l : 0);
	}
	for (unsigned k = 0; k < t->nfd; k++)
		m += (size_t)t->ndevices * sizeof(uint32_t) + t->fd[k].ndom * (sizeof(char *) + 16);
	return m;
}
