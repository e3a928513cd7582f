/* SPDX-License-Identifier: MIT */
/*
 * The Slurm importer's own state and helpers, shared by its files: slurm_import.c (reading,
 * resolving, building) and slurm_hostlist.c (messages, pools, maps and hostlists). Nothing here
 * is for other modules.
 */
#ifndef TP_SLURM_INTERNAL_H
#define TP_SLURM_INTERNAL_H

#include <Judy.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "topoplace-slurm.h"

#define NONE UINT32_MAX
#define HOSTLIST_MAX (1u << 20)  /* names one hostlist may expand to */
#define NODES_MAX (1u << 22)     /* nodes in one file */
#define HOSTLIST_GROUPS 8        /* bracket groups in one name */
#define MAX_KEYS 8               /* Key=Value pairs on one line */
#define MAX_BLOCK_LEVELS 16      /* as Slurm: aggregation up to 2^15 base blocks */

enum kind { KIND_NONE = 0, KIND_TREE, KIND_BLOCK, KIND_RING };

/* Slurm's most nodes in one ring (topology.conf(5), topology/ring). */
#define RING_MAX_NODES 16

/* A growable byte pool of NUL-terminated strings, referred to by offset (stable over growth). */
struct pool {
	char *s;
	size_t len, cap;
};

/* One SwitchName or BlockName line. */
struct rec {
	size_t name;        /* offset in text */
	size_t nodes, kids; /* offsets of the Nodes / Switches hostlists in text, or SIZE_MAX */
	unsigned line;
	uint32_t parent;               /* tree: parent switch, or NONE */
	uint32_t kid_first, nkids;     /* tree: child switches in kid[] */
	uint32_t node_first, nnodes;   /* nodes in node[] */
	int level;                     /* tree: Slurm's switch level (leaves 0) */
};

struct conf {
	const tp_allocator *a;
	char *err;
	size_t errlen;
	struct pool text;  /* record names and hostlists as read */
	struct pool names; /* expanded node names and aggregate names */
	struct rec *rec;
	size_t nrec, cap_rec;
	enum kind kind;
	unsigned kind_line;
	size_t *node; /* offsets in names */
	size_t nnode, cap_node;
	uint32_t *kid;
	size_t nkid, cap_kid;
	Pvoid_t rec_by_name;  /* JudySL: record name -> index + 1 */
	Pvoid_t node_by_name; /* JudySL: node name -> record index + 1 */
	unsigned long sizes[MAX_BLOCK_LEVELS];
	unsigned nsizes, sizes_line;
	char *line; /* the logical line being read */
	size_t line_cap;
	uint32_t max_devices, max_nodes; /* the caller's budgets (tp_slurm_options) */
	unsigned gpus;                   /* devices per node */
	char *warn;                      /* the caller's warnings buffer (tp_slurm_options v2) */
	size_t warnlen, warnused;
	int allow_gaps;                  /* AllowGaps: -1 unset (Slurm 25.05's default: yes) */
	unsigned gaps_line;
	uint32_t levels;                 /* BlockLevels: bit l for 2^l base blocks */
	unsigned levels_line;
};

static inline const char *text_at(const struct conf *c, size_t off) { return c->text.s + off; }
static inline const char *name_at(const struct conf *c, size_t off) { return c->names.s + off; }
static inline const char *rec_name(const struct conf *c, uint32_t r)
{
	return text_at(c, c->rec[r].name);
}

typedef int (*name_fn)(struct conf *c, void *ctx, const char *name);

int tp_sl_fail(struct conf *c, int code, const char *fmt, ...) TP_PRINTF(3, 4);
void tp_sl_warn(struct conf *c, const char *fmt, ...) TP_PRINTF(2, 3);
int tp_sl_nomem(struct conf *c);
int tp_sl_pool_put(struct conf *c, struct pool *p, const char *s, size_t n, size_t *off);
int tp_sl_push_u32(struct conf *c, uint32_t **arr, size_t *n, size_t *cap, uint32_t v);
uintptr_t tp_sl_map_get(Pvoid_t map, const char *key);
int tp_sl_map_put(struct conf *c, Pvoid_t *map, const char *key, uintptr_t v, uintptr_t *old);
/* A number of 1 to 18 digits at *p (advanced); -1 when there is none. */
int tp_sl_read_number(const char **p, const char *end, unsigned long *v, int *width);
/* Call fn for every name of a hostlist expression, in order. */
int tp_sl_hostlist_each(struct conf *c, unsigned line, const char *expr, name_fn fn, void *ctx);

/* What a build makes: the builder, its levels and the devices per node. */
struct build {
	tp_topology_builder *b;
	unsigned gpus;
	unsigned nlevels;
	char level_names[TP_MAX_LEVELS][32];
};

/* The builder of a topology.conf's levels (slurm_import.c). */
int tp_sl_create_builder(struct conf *c, struct build *bd);
/* RingName lines (slurm_ring.c): one `ring` domain per line, its nodes at ring positions 0,
 * 1, ... in listed order, the level a wrapping one-axis grid. */
int tp_sl_build_rings(struct conf *c, struct build *bd);

#endif /* TP_SLURM_INTERNAL_H */
