/* SPDX-License-Identifier: MIT */
/*
 * The layout of a built topology, shared by the modules that read it (cluster, place, frag,
 * defrag, cost). Private: nothing here is part of the API.
 *
 * Everything is flat arrays indexed by dense ids. Nodes are numbered in tree order, so the nodes
 * (and devices) of any domain form one contiguous id range, and so do a domain's children.
 */
#ifndef TP_TOPOLOGY_IMPL_H
#define TP_TOPOLOGY_IMPL_H

#include <Judy.h>

#include "common.h"

_Static_assert(sizeof(Word_t) >= 8, "Judy keys must hold 64 bits");

/* Marks "no model" / "no node type" in the per-node tables. */
#define TP_NO_MODEL UINT16_MAX
#define TP_NO_TYPE UINT16_MAX

/* Room for a path of every level above the node, joined with '/'. */
#define PATH_BUF ((TP_MAX_NAME + 1) * TP_MAX_LEVELS + 8)

struct tp_fabric_impl {
	tp_link_kind kind;
	double gbps;
	double latency_us;
};

struct tp_nodetype {
	tp_allocator alloc;
	char errmsg[TP_ERRMSG_LEN];
	unsigned ngpus;
	unsigned nsw;      /* PCIe switches */
	int *sw_parent;    /* [nsw] parent switch or -1 */
	int *gpu_sw;       /* [ngpus] switch each GPU sits behind, or -1 */
	unsigned nnic;
	char **nic_name;   /* [nnic] */
	int *nic_sw;       /* [nnic] */
	double *nic_gbps;  /* [nnic] */
	unsigned nnvs;
	char **nvs_name;   /* [nnvs] */
	double *nvlink;    /* [ngpus * ngpus] GB/s, or NULL when none was set */
	size_t cap_sw, cap_nic, cap_nvs;
	/* Where GPUs and NICs sit outside the PCIe switches, and what kind each NIC is: read by
	 * the GPU-NIC rule (tp_nodetype_nic_rank). */
	struct tp_gpu_extra *gpu_x; /* [ngpus] */
	struct tp_nic_extra *nic_x; /* [nnic] */
	size_t cap_nicx;
	bool has_rdma;              /* some NIC is TP_NIC_RDMA */
	/* The type's own intra-node fabric (tp_nodetype_set_fabric), overriding the node level's,
	 * and each GPU's PCIe link GB/s (0: unknown), from which a pair without an NVLink figure
	 * gets its PCIe figure (tp_nt_pair_gbps). */
	bool has_fabric;
	struct tp_fabric_impl fabric;
	double *pcie_gbps; /* [ngpus], or NULL when none was set */
};

#define TP_BUSID_LEN 32 /* a PCI bus id ("0000:3b:00.0") and its NUL, with room to spare */

/* Package, NUMA node and host bridge of a device: ids compared for equality, -1 unknown. */
struct tp_locality {
	int package, numa, host_bridge;
};

struct tp_gpu_extra {
	char bus_id[TP_BUSID_LEN]; /* "" when unknown */
	struct tp_locality loc;
};

struct tp_nic_extra {
	unsigned char kind; /* tp_nic_kind */
	struct tp_locality loc;
};

/* How far NIC n is from GPU g for pairing (smaller is closer; equal ranks tie): see
 * tp_nodetype_gpu_nearest_nic() in topoplace.h for the rule. */
unsigned tp_nodetype_nic_rank(const struct tp_nodetype *nt, unsigned g, unsigned n);

/* One level of the tree. At the node level, domains are the nodes themselves. */
struct tp_level_impl {
	char *name;
	uint32_t ndom;
	uint32_t *parent;      /* [ndom] index at level - 1 (absent at level 0) */
	uint32_t *child_first; /* [ndom + 1] CSR into level + 1 (absent at the node level) */
	uint32_t *node_first;  /* [ndom + 1] CSR into nodes (absent at the node level) */
	const char **dname;    /* [ndom] own name (node level: the node names) */
	uint32_t max_devices;  /* most devices in one domain of this level */
	uint32_t max_nodes;    /* most nodes in one domain of this level */
	uint16_t *nvswitches;  /* [ndom] NVSwitches added to the domain, or NULL when none */
	struct tp_fabric_impl *dfab; /* [ndom] each domain's fabric (above the node), or NULL when
	                                no domain of the level overrides the level's */
	Pvoid_t by_path;       /* JudySL: path -> domain index + 1 */
};

struct tp_fd_kind {
	char *name;
	uint32_t ndom;       /* named domains first, then implicit one-member domains */
	const char **dname;  /* [ndom] */
	uint32_t *dev_fd;    /* [ndevices] */
};

/* A grid level (topology_grid.c): every domain of the level holds its children (domains of
 * level + 1) at coordinates of one shape. Cell index = x + dim[0] * (y + dim[1] * z). */
struct tp_grid_impl {
	unsigned nd;                    /* axes, 1 to TP_GRID_MAX_DIMS */
	unsigned dim[TP_GRID_MAX_DIMS]; /* extent of each axis (1 past nd) */
	unsigned wrap;                  /* bit i: axis i wraps around (a ring, a torus) */
	uint32_t ncell;                 /* product of the extents */
	uint32_t child_dev;             /* devices in every child */
	uint32_t *cell;                 /* [ndom * ncell] child at each cell, or TP_NONE */
	uint32_t *pos;                  /* [children] each child's cell in its parent */
	uint32_t *nbr;                  /* [ncell * 6] neighbours (-x, +x, -y, +y, -z, +z) across
	                                   wrapping seams, TP_NONE past an edge or an axis */
	uint32_t *xyz;                  /* [ncell * 3] each cell's coordinates */
};

/* Fabric classes (tp_build_fabric_classes): nodes that share a device model, a node fabric and
 * the fabric of the domain above the node (on a mixed fleet: the NVL72 racks, the HGX nodes,
 * the PCIe-only nodes). tp_place()'s search for a placement that meets an efficiency floor
 * (place_floor.c) tries them one by one. */
#define TP_FABRIC_CLASSES_MAX 32

struct tp_fclass {
	uint32_t first;  /* its nodes: class_nodes[first .. first + nnodes), in tree order */
	uint32_t nnodes;
	uint32_t ndev;   /* devices on those nodes */
	uint32_t cover_first; /* the largest domains wholly of the class: class_cover[cover_first */
	uint32_t ncover;      /* .. cover_first + ncover) */
	double node_gbps;     /* its node fabric's and the fabric above the node's bandwidth (the */
	double up_gbps;       /* fabric fit's order between classes of equal efficiency) */
};

struct tp_topology {
	tp_allocator alloc;
	uint64_t id;      /* tp_identity_next() at build time */
	unsigned nlevels; /* node level = nlevels - 1 */
	struct tp_level_impl lv[TP_MAX_LEVELS];
	struct tp_fabric_impl fabric[TP_MAX_LEVELS + 1]; /* [level + 1]; [0] is the cluster */
	bool type_nvlink; /* some node type's pair figures (NVLink, PCIe) price traffic inside
	                     its nodes (tp_nt_figures_apply) */
	bool node_fabric_set; /* the caller set the node level's fabric */
	bool *type_figures;   /* [ntypes] tp_nt_figures_apply per type, or NULL when no type's do */

	uint32_t nnodes;
	uint32_t ndevices;
	uint32_t *dev_first;  /* [nnodes + 1] */
	uint16_t *node_model; /* [nnodes] index into models, or TP_NO_MODEL */
	float *node_mem_gb;   /* [nnodes] */
	uint16_t *node_type;  /* [nnodes] index into types, or TP_NO_TYPE */
	uint32_t max_node_devices;
	Pvoid_t node_by_name; /* JudySL: name -> node + 1 */

	uint32_t *dev_node; /* [ndevices] */
	float *dev_perf;    /* [ndevices] */

	unsigned nmodels;
	char **models;
	unsigned ntypes;
	struct tp_nodetype **types;

	unsigned nfd;            /* kinds built */
	unsigned nfd_alloc;      /* kinds allocated (a failed build may leave one half built) */
	struct tp_fd_kind *fd;

	struct tp_grid_impl *grid[TP_MAX_LEVELS]; /* [level] the level's grid, or NULL */

	unsigned nclass;        /* fabric classes: 1 or more; 0 when there are more than
	                           TP_FABRIC_CLASSES_MAX (then none is kept) */
	struct tp_fclass fclass[TP_FABRIC_CLASSES_MAX];
	uint32_t *class_nodes;  /* [nnodes] the classes' nodes, class after class, or NULL when
	                           nclass < 2 (nothing to search) */
	uint8_t *node_class;    /* [nnodes] each node's class, or NULL when nclass < 2 */
	uint64_t *class_cover;  /* the classes' covers, level << 32 | domain, or NULL */

	char *names; /* one pool holding every domain and node name */
	size_t names_len;
	size_t judy_bytes;
};

/* ---- inline accessors used on hot paths ---------------------------------------------------- */

static inline unsigned tp_node_level(const struct tp_topology *t) { return t->nlevels - 1; }

static inline uint32_t tp_node_ndev(const struct tp_topology *t, uint32_t node)
{
	return t->dev_first[node + 1] - t->dev_first[node];
}

/* The domain of `level` holding `node` (level < node level): walks up the parents. */
static inline uint32_t tp_node_ancestor(const struct tp_topology *t, uint32_t node,
                                        unsigned level)
{
	unsigned nl = tp_node_level(t);
	uint32_t d = node;
	for (unsigned l = nl; l > level; l--)
		d = t->lv[l].parent[d];
	return d;
}

/* First node and node count of a domain (a node at the node level). */
static inline void tp_dom_nodes(const struct tp_topology *t, unsigned level, uint32_t dom,
                                uint32_t *first, uint32_t *n)
{
	if (level == tp_node_level(t)) {
		*first = dom;
		*n = 1;
		return;
	}
	*first = t->lv[level].node_first[dom];
	*n = t->lv[level].node_first[dom + 1] - *first;
}

/* Device count of a domain. */
static inline uint32_t tp_dom_ndev(const struct tp_topology *t, unsigned level, uint32_t dom)
{
	uint32_t f, n;
	tp_dom_nodes(t, level, dom, &f, &n);
	return t->dev_first[f + n] - t->dev_first[f];
}

/* The fabric joining the children of domain `dom` of `level` (TP_LEVEL_CLUSTER: the top-level
 * domains, dom ignored): the domain's own when it or (at the node level) its node type sets
 * one, else the level's. */
static inline const struct tp_fabric_impl *tp_dom_fabric(const struct tp_topology *t, int level,
                                                         uint32_t dom)
{
	if (level < 0)
		return &t->fabric[0];
	if ((unsigned)level == tp_node_level(t)) {
		uint16_t ty = t->node_type ? t->node_type[dom] : TP_NO_TYPE;
		if (ty != TP_NO_TYPE && t->types[ty]->has_fabric)
			return &t->types[ty]->fabric;
		return &t->fabric[level + 1];
	}
	return t->lv[level].dfab ? &t->lv[level].dfab[dom] : &t->fabric[level + 1];
}

/* GB/s between GPUs a and b (a != b) of a node type from its own figures: the NVLink figure,
 * else the PCIe figure of where their paths meet (docs/cost-model.md), else 0. */
double tp_nt_pair_gbps(const struct tp_nodetype *nt, unsigned a, unsigned b);

/* Whether a type has pair figures (NVLink or PCIe) at all. */
bool tp_nt_has_figures(const struct tp_nodetype *nt);

/* Whether a type's pair figures price traffic inside its nodes of t: it has some, and it sets
 * its own fabric or the caller left the node level's at its default (docs/cost-model.md). */
static inline bool tp_nt_figures_apply(const struct tp_topology *t, const struct tp_nodetype *nt)
{
	return (nt->has_fabric || !t->node_fabric_set) && tp_nt_has_figures(nt);
}

/* Node types as a topology keeps them (nodetype.c): whether some GPU pair has an NVLink
 * figure, a deep copy with allocator a (NULL when out of memory), and whether two describe the
 * same insides (so nodes can share one copy). */
bool tp_nt_has_nvlink(const struct tp_nodetype *nt);
struct tp_nodetype *tp_nt_clone(const struct tp_nodetype *src, const tp_allocator *a);
bool tp_nt_equal(const struct tp_nodetype *x, const struct tp_nodetype *y);

/* The identity of a topology: results compare it instead of the address. */
static inline uint64_t tp_topology_identity(const struct tp_topology *t) { return t->id; }

/* Grid geometry shared by placement and fragmentation (topology_grid.c). A box is an anchor
 * cell plus an extent per axis; along an axis that wraps it may cross the seam. */
struct tp_grid_box {
	unsigned at[TP_GRID_MAX_DIMS];  /* anchor coordinates */
	unsigned ext[TP_GRID_MAX_DIMS]; /* extents (1 past nd) */
};

/* Counts of marked cells over a grid, doubled along wrapping axes so that any box, wrapping
 * or not, is a sum of eight corners. */
struct tp_grid_sum {
	const struct tp_grid_impl *g;
	unsigned e[TP_GRID_MAX_DIMS]; /* extents of the doubled grid */
	uint32_t *s;                  /* [(e0+1)(e1+1)(e2+1)] prefix sums */
};

/* The anchors of a box of extent ext along axis i: every cell where the axis wraps and wrap
 * allows crossing it (one when the extent is the whole axis), else those where the box ends
 * inside; 0 when the extent is longer than the axis. */
unsigned tp_grid_anchors(const struct tp_grid_impl *g, unsigned i, unsigned ext, bool wrap);
/* Fill sum from mark[ncell] (non-zero: counted); s must hold tp_grid_sum_len(g) entries. */
size_t tp_grid_sum_len(const struct tp_grid_impl *g);
void tp_grid_sum_fill(struct tp_grid_sum *sum, const struct tp_grid_impl *g,
                      const unsigned char *mark, uint32_t *s);
/* Marked cells inside box bx (extents at most the grid's; wrapping only on wrapping axes). */
uint32_t tp_grid_sum_box(const struct tp_grid_sum *sum, const struct tp_grid_box *bx);
/* The cell of coordinates x (each below its extent). */
static inline uint32_t tp_grid_cell(const struct tp_grid_impl *g, const unsigned *x)
{
	return x[0] + g->dim[0] * (x[1] + g->dim[1] * x[2]);
}
/* The coordinates of cell i into x[TP_GRID_MAX_DIMS]. */
static inline void tp_grid_coords(const struct tp_grid_impl *g, uint32_t i, unsigned *x)
{
	x[0] = i % g->dim[0];
	x[1] = i / g->dim[0] % g->dim[1];
	x[2] = i / g->dim[0] / g->dim[1];
}
/* The largest box of cells with mark set in one domain (wrapping where the grid does): its
 * volume into *vol and its extents into ext (when not NULL). 0 or TP_ENOMEM. */
int tp_grid_largest_box(const tp_allocator *a, const struct tp_grid_impl *g,
                        const unsigned char *mark, uint32_t *vol, unsigned *ext);

/* Connected sets of cells with mark set (neighbours along the axes, across wrapping seams)
 * into *count. 0 or TP_ENOMEM. */
int tp_grid_fragments(const tp_allocator *a, const struct tp_grid_impl *g,
                      const unsigned char *mark, uint32_t *count);

/* Resolve a level name: the level index, or -1. */
int tp_topology_level_index(const struct tp_topology *t, const char *name);

/* GPU+NIC matching on one node (Kuhn's augmenting paths, GPUs and NICs in index order, so
 * deterministic). Shared by placement (what a node can give, the NICs of a result) and the
 * cluster (the NICs a pairs job takes when it is assigned or rebound), which must agree. */
#define TP_NIC_BLOCKED (-2) /* gpu_of value of a NIC that cannot be paired (taken) */

struct tp_pairing {
	const struct tp_nodetype *nt;
	int anchor[TP_MAX_NODE_DEVICES];  /* per GPU: best NIC rank (tp_nodetype_nic_rank) */
	int nic_of[TP_MAX_NODE_DEVICES];  /* per GPU: paired NIC, -1 */
	int *gpu_of;                      /* [nnic] paired GPU, -1, or TP_NIC_BLOCKED */
	unsigned char *seen;              /* [nnic] visited by the current augmentation */
};

/* The node type of a node whose devices are the GPUs of a type with NICs, else NULL. */
const struct tp_nodetype *tp_pairable_type(const struct tp_topology *t, uint32_t node);

/* Start a matching with nothing paired; gpu_of and seen hold nt->nnic entries each. */
void tp_pairing_init(struct tp_pairing *pr, const struct tp_nodetype *nt, int *gpu_of,
                     unsigned char *seen);

/* Add GPU g to the matching (GPUs already paired stay paired); whether it got a NIC. */
bool tp_pair_gpu(struct tp_pairing *pr, unsigned g);

/* Take NIC n out of the matching (it must not be paired yet). */
static inline void tp_pairing_block(struct tp_pairing *pr, int n)
{
	if (n >= 0 && (unsigned)n < pr->nt->nnic)
		pr->gpu_of[n] = TP_NIC_BLOCKED;
}

#endif
