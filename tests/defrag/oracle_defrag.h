/* SPDX-License-Identifier: MIT */
/*
 * An exhaustive oracle for defragmentation plans of requests made of whole domains (issue
 * #15): random blocks of racks holding several small jobs each, and a request whose units
 * are whole racks (slices of a rack's size) or whole nodes (groups or slices of a node's
 * size), required or preferred at a level. Every placement of such a request takes every
 * device of its target domains, so the oracle enumerates the target sets exactly, every set
 * of movable jobs cheapest first, and every home of every migrant (as local as it sits).
 * It uses no part of the library: it works on the case's own arrays.
 */
#ifndef TP_ORACLE_DEFRAG_H
#define TP_ORACLE_DEFRAG_H

#include <stdbool.h>
#include <stdint.h>

#include "topoplace.h"

#define OD_JOBS 16
#define OD_NODES 16
#define OD_DEVS 64

enum od_kind {
	OD_RACK_SLICES, /* count = need x rack size, slices of a rack, required / preferred block */
	OD_NODE_GROUPS, /* count = need x node size, groups of a node, required rack */
	OD_NODE_SLICES  /* count = need x node size, slices of a node, required block */
};

struct od_case {
	uint64_t seed;
	unsigned blocks, racks, nodes, gpus; /* racks per block, nodes per rack */
	unsigned njobs;
	char ids[OD_JOBS][8];
	tp_job_options o[OD_JOBS];
	uint32_t devs[OD_JOBS][8];
	unsigned n[OD_JOBS];
	bool unusable[OD_DEVS]; /* free but down or cordoned */
	bool down[OD_DEVS];
	enum od_kind kind;
	unsigned need;
	int level; /* required (or preferred) level: 0 block, 1 rack, -1 none */
	bool preferred;
	tp_slice slice;
	tp_request r;
	tp_defrag_policy pol;
};

struct od_answer {
	bool fits_now; /* the request fits without moves */
	bool found;    /* bound: migrants may land on each other's old devices */
	double cost;
	unsigned moves;
	bool sfound; /* strict: no migrant lands on another one's old devices */
	double scost;
	unsigned smoves;
	unsigned long checks; /* (set of jobs, target set) pairs packed */
};

/* A random case of `seed` (its request points into the case: do not copy the case). */
void od_gen(struct od_case *k, uint64_t seed);

/* The topology (levels block, rack, node; devices numbered depth first) and the cluster. */
int od_build(const struct od_case *k, const tp_allocator *a, tp_topology **t, tp_cluster **c);

/* The optimum by exhaustive search (cost, then moves), bound and strict. */
void od_solve(const struct od_case *k, struct od_answer *a);

/* The case on stderr, to reproduce a failure. */
void od_dump(const struct od_case *k);

#endif
