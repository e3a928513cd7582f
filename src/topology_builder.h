/* SPDX-License-Identifier: MIT */
/*
 * The topology builder's layout, shared by the builder (topology.c) and the build
 * (topology_build.c). Private: nothing here is part of the API.
 *
 * The builder records nodes in the order they are added, each with the id of its domain at
 * every level above the node ("prefix ids", given in order of first appearance). Building sorts
 * the nodes into tree order (domains in order of first appearance under their parent, nodes in
 * order of addition inside their lowest domain) so that every domain's nodes, devices and
 * children are contiguous id ranges; generated fleets are already in that order and skip the
 * sort.
 */
#ifndef TP_TOPOLOGY_BUILDER_H
#define TP_TOPOLOGY_BUILDER_H

#include "topology_impl.h"

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

/* A domain's own fabric (tp_topology_builder_set_domain_fabric). */
struct bdfab {
	unsigned level;
	uint32_t pid;
	struct tp_fabric_impl f;
};

/* A grid declared on a level (tp_topology_builder_set_grid). */
struct bgrid {
	bool on;
	unsigned nd;
	unsigned dim[3];
	unsigned wrap;
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
	uint32_t max_devices, max_nodes; /* budgets (tp_topology_builder_set_limits) */

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

	struct bdfab *dfab;
	size_t ndfab, cap_dfab;

	struct bgrid grid[TP_MAX_LEVELS];  /* [level] the grid its domains hold their children in */
	Pvoid_t coords[TP_MAX_LEVELS];     /* [child level] JudyL: prefix id (node: node index) ->
	                                      packed coordinates + 1 */
};

/* The path of prefix `pid` of level `l`, joined with '/', into buf (PATH_BUF bytes). */
void tp_builder_prefix_path(const tp_topology_builder *b, unsigned l, uint32_t pid, char *buf);

/* Give every level with a domain fabric its per-domain table (topology_fabric.c). */
int tp_build_domain_fabrics(const tp_topology_builder *b, tp_topology *t,
                            uint32_t *const *pid_to_dom);

/* Derive the fabric classes (t->nclass, t->fclass, t->class_nodes) once the nodes, their
 * types and the domain fabrics are built (topology_fabric.c). */
int tp_build_fabric_classes(tp_topology *t);

/* Give every grid level its cell tables (topology_grid.c); a message goes to b on failure. */
struct build_grid_in {
	const uint32_t *order;               /* [nnodes] builder node index in tree order */
	uint32_t *const *pid_to_dom;         /* [level][pid] */
};
int tp_build_grids(tp_topology_builder *b, tp_topology *t, const struct build_grid_in *in);
void tp_grids_free(tp_topology *t);
void tp_builder_grids_free(tp_topology_builder *b);

#endif
