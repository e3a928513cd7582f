/* SPDX-License-Identifier: MIT */
/*
 * The layout of a placement result, shared by the modules that build or read one (place,
 * defrag). Private: nothing here is part of the API.
 */
#ifndef TP_PLACE_IMPL_H
#define TP_PLACE_IMPL_H

#include "cluster_impl.h"
#include "request.h"

struct tp_placement {
	tp_allocator alloc;
	char errmsg[TP_ERRMSG_LEN];
	int status;                  /* 0 or the code tp_place / tp_replace returned */
	bool replace;                /* a result of tp_replace */
	bool has_fit;                /* fit holds figures (INFEASIBLE, BUSY, FRAGMENTED) */
	const struct tp_cluster *c;  /* the cluster it was made on */
	uint64_t generation;         /* c->generation at that time */
	uint64_t cluster_id;         /* tp_cluster_identity(c): what tp_commit compares */
	char *job;                   /* request id, or the replaced job's id */
	tp_request *req;             /* place: a copy of the request (recorded as the shape) */
	uint32_t *devs;              /* [ndev] rank order (replace: the job's whole new list) */
	size_t ndev;
	int32_t *nic;                /* [ndev] NIC paired with each rank (-1: none), or NULL when
	                                the request has no gpu_nic_pairs */
	uint32_t *failed, *repl;     /* replace: [nrepl] failed device -> its replacement */
	size_t nrepl;
	unsigned nlevels;
	uint32_t *dom[TP_MAX_LEVELS];  /* [ndom[l]] domains used, in first-rank order */
	uint32_t *dcnt[TP_MAX_LEVELS]; /* [ndom[l]] devices of the placement in each */
	uint32_t ndom[TP_MAX_LEVELS];
	double comm_us;
	tp_rule decided;             /* tp_placement_decided_by */
	tp_fit fit;
	bool has_shrink;             /* a failed replace: the shrink alternative below */
	uint32_t shrink_ranks, shrink_units, shrink_of; /* (tp_placement_repair_shrink) */
	struct tp_job_part *parts;   /* [nparts] NVLink partitions, then their nodes (one block) */
	uint32_t nparts;
	uint32_t *part_nodes;        /* [sum of parts[i].nnodes], inside the block of parts */
	uint64_t grid_words;         /* a box request: index words and single cells its search */
	uint64_t grid_probes;        /* read (place_grid.c); a test-only figure, no accessor */
};

#endif
