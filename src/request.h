/* SPDX-License-Identifier: MIT */
/*
 * Request resolution: the form of a request the solver and the planner work on (level indices
 * instead of names, defaults filled in, every rule of the scenario format's `request` checked)
 * and the units it derives. Private. Solver side: the model includes request_data.h instead.
 */
#ifndef TP_REQUEST_H
#define TP_REQUEST_H

#include "request_data.h"
#include "topology_impl.h"

struct tp_cluster;

/* "No limit" for a per-domain cap. */
#define TP_RQ_NOCAP UINT32_MAX

/* A cap on the domains of a failure-domain kind. */
struct tp_rq_fdcap {
	unsigned kind;
	uint32_t devices; /* TP_RQ_NOCAP when the cap counts groups */
	uint32_t groups;  /* TP_RQ_NOCAP when the cap counts devices */
};

/* A request resolved against a topology and a cluster. Levels are indices (-1: none). */
struct tp_rq {
	const char *id;     /* "new" when the request had none */
	const char *tenant; /* "default" when the request had none */
	const char *service; /* the service it is a replica of, or NULL */
	uint32_t count;
	uint32_t gsize;     /* >= 1 */
	unsigned glevel;
	int required;
	int preferred;
	unsigned nslices;   /* slice layers, outermost first */
	unsigned slevel[TP_MAX_LEVELS];
	uint32_t ssize[TP_MAX_LEVELS];
	bool balanced;
	double end_s;       /* expected_end_s: when the job is expected to end (0: not known) */
	/* Tree caps folded per level, in devices (groups caps at or above the group level are
	 * groups * gsize). capgrp holds a groups cap on a level below the group level, where a
	 * group may touch several domains. */
	uint32_t capdev[TP_MAX_LEVELS];
	uint32_t capgrp[TP_MAX_LEVELS];
	unsigned nfdcaps;
	struct tp_rq_fdcap *fdcaps;  /* [nfdcaps], owned */
	int spread_level;            /* tree level, or -1 */
	int spread_fd;               /* failure-domain kind, or -1 */
	uint32_t spread_min;
	uint32_t colocate_slot;      /* job slot, or TP_NO_JOB_SLOT */
	int colocate_level;
	int exclusive;
	bool has_model;
	int model;                   /* index into t->models; -1: no node has it */
	double min_perf;
	double min_mem;
	bool has_nodes;
	uint32_t *nodes;             /* [nnodes] sorted node ids of the allow-list, owned */
	size_t nnodes;
	bool pairs;                  /* gpu_nic_pairs: each GPU with a distinct nearest NIC */
	const tp_step_model *comm;   /* how the job communicates (rule 4), borrowed; NULL: none */
	int box_level;               /* a grid level: the job is a box of its children; -1: none */
	unsigned box[TP_GRID_MAX_DIMS]; /* extents, 1 past the grid's axes */
	bool box_wrap;               /* the box may cross a wrapping axis's seam */
	bool box_rotate;             /* any order of the extents */
};

#define TP_NO_JOB_SLOT UINT32_MAX

/* Resolving a running job's shape: a colocate target that is no longer running is ignored
 * instead of being an error. */
#define TP_RQ_SHAPE 0x1u

/*
 * Check *r against topology t and cluster c (for the colocate job) and fill *out. Messages
 * name the field in the scenario format's dotted style ("request.slices[1].size 48 does not
 * divide request.count 512") and are written to err (TP_ERRMSG_LEN bytes).
 * Returns 0, TP_EINVAL (a bad value or two fields that contradict each other), TP_ENOTFOUND
 * (an unknown level, failure-domain kind, job or node) or TP_ENOMEM. On failure nothing is
 * left allocated. Release a success with tp_rq_release.
 */
int tp_request_resolve(const struct tp_topology *t, const struct tp_cluster *c,
                       const tp_request *r, unsigned flags, const tp_allocator *a,
                       struct tp_rq *out, char *err);

/* The box fields of r (request_box.c): checked against t and the rest of the request. */
int tp_request_resolve_box(const struct tp_topology *t, const tp_request *r, struct tp_rq *q,
                           char *err);

/* One nested unit of a resolved request: each aligned run of `size` ranks (ranks
 * [i * size, (i + 1) * size)) lies inside one domain of `level`. */
enum tp_rq_unit_kind {
	TP_RQ_UNIT_WHOLE,  /* every rank: the required or colocate domain (the deeper of the two) */
	TP_RQ_UNIT_SLICE,  /* one slice layer; `slice` is its index in slevel / ssize */
	TP_RQ_UNIT_GROUP,  /* a group */
	TP_RQ_UNIT_DEVICE, /* one device, inside its node */
};

struct tp_rq_unit {
	uint32_t size;
	unsigned level;
	enum tp_rq_unit_kind kind;
	unsigned slice;
};

/* The most units a request has: the whole, every slice layer, the group, the device. */
#define TP_RQ_MAX_UNITS (TP_MAX_LEVELS + 3)

/* The units of q, outermost first, into out[TP_RQ_MAX_UNITS]: the whole (when a required or
 * colocate level is set), each slice layer, the group, the device (node_level: the node's
 * level index). The one derivation of a request's nesting, for place, replace and defrag.
 * Returns how many. */
unsigned tp_rq_units(const struct tp_rq *q, unsigned node_level, struct tp_rq_unit *out);

/* For each level l < nlevels, the devices every domain of level l must hold a multiple of:
 * the largest size of a group or slice unit at level l or below it (1 when none), so that
 * every such unit can lie inside one domain. */
void tp_rq_level_units(const struct tp_rq *q, unsigned nlevels, uint32_t *u);

/* Release what tp_request_resolve allocated (the struct itself is the caller's). */
void tp_rq_release(const tp_allocator *a, struct tp_rq *q);

/* A level or failure-domain kind by name: the level index (>= 0), -(kind + 2) for a kind,
 * or -1 when neither. */
int tp_request_level_or_kind(const struct tp_topology *t, const char *name);

#endif
