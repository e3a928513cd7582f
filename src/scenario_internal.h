/* SPDX-License-Identifier: MIT */
/*
 * The scenario-v1 importer (topoplace-scenario.h), private to its files:
 *   scenario_check.c     messages and the small checks every section uses (the CLI's words)
 *   scenario_topology.c  the `topology` section, through the topology builder
 *   scenario_state.c     `state`: running jobs, down and cordoned devices, on a cluster
 *   scenario_request.c   `request` (also a running job's own), `policy` and `replace`
 *   scenario_import.c    the entry point, the tp_scenario object and its accessors
 *
 * Every reader returns false after writing "path: reason" with sc_fail(), and leaves freeing to
 * the entry point: what it allocates hangs off struct scen.
 */
#ifndef TP_SCENARIO_INTERNAL_H
#define TP_SCENARIO_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "topoplace-scenario.h"

/* Room for a field path: two names of TP_MAX_NAME bytes and a prefix. */
#define SC_PATH_LEN 640
/* Room for a value as messages quote it (60 characters and a NUL). */
#define SC_SHOW_LEN 64
/* Most devices a scenario may describe by default, as the CLI. */
#define SC_MAX_DEVICES (1u << 24)

#define SC_COUNT(a) (sizeof(a) / sizeof *(a))

/* An hwloc file already imported: nodes of one model usually share one. */
struct sc_hwloc {
	const char *path; /* as the document writes it (borrowed from the JSON tree) */
	tp_nodetype *nt;
};

/* A running job of state.jobs, its devices resolved in rank order. */
struct sc_job {
	const char *id;
	const char *where; /* "state.jobs[3]", owned */
	json_t *doc;
	tp_job_options opts;
	uint32_t *devices; /* device ids, rank order */
	size_t ndevices;
};

/* Device ids of state.down or state.cordoned (a node stands for all its devices). */
struct id_list {
	uint32_t *ids;
	size_t n, cap;
};

/* A request being read, with the arrays its pointers point into (owned). */
struct sc_request {
	tp_request r;
	tp_slice *slices;
	tp_domain_cap *caps;
	const char **nodes;
	tp_step_model *comm; /* x_comm, or NULL */
};

struct scen {
	const tp_scenario_options *o;
	const tp_allocator *alloc; /* never NULL: the caller's or the C library's */
	char *err;
	size_t errlen;
	int code; /* the code of the failure: TP_EPARSE unless said otherwise */
	bool marked; /* the text went through sc_mark_surrogates() */

	/* topology */
	tp_topology_builder *b;
	tp_topology *t;
	const char *levels[TP_MAX_LEVELS];
	unsigned nlevels;
	const char *fd_kinds[64];
	unsigned nfd_kinds;
	double nnodes, ndevices;
	json_t *nodes;        /* topology.nodes, to name the first of two equal names */
	unsigned *listed_gpus; /* devices of topology.nodes[i], for messages */
	unsigned gen_gpus;
	unsigned gen_counts[TP_MAX_LEVELS]; /* topology.generate.counts, or all 0 */
	size_t *names;         /* open hash of listed node names: 1 + index into nodes, or 0 */
	size_t names_cap;      /* a power of two */
	struct sc_hwloc *hw;
	size_t nhw;

	/* state */
	tp_cluster *c;
	struct id_list down, cordoned;
	struct sc_job *jobs;
	size_t njobs;
	const json_t *svc_caps; /* state.x_service_caps, checked, or NULL */
	const char *part_level;  /* state.x_partitions.level, or NULL */
	uint32_t part_channels;

	/* the question */
	struct sc_request *req;     /* the top-level request */
	struct sc_request *shapes;  /* one per job (r.count 0: none) */
	tp_defrag_policy policy;
	bool has_policy;
	const char *replace_job;
	uint32_t *failed;
	size_t nfailed;
};

/* ---- scenario_check.c ---- */
void *sc_alloc(struct scen *s, size_t n);
void *sc_calloc(struct scen *s, size_t n, size_t size);
void sc_free(struct scen *s, void *p);
bool sc_fail(struct scen *s, const char *path, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
bool sc_nomem(struct scen *s, const char *path);
const char *sc_join(char *buf, const char *path, const char *key);
const char *sc_item(char *buf, const char *path, size_t i);
const char *sc_show(const struct scen *s, const json_t *v, char buf[SC_SHOW_LEN]);
const char *sc_show_str(const struct scen *s, const char *str, char buf[SC_SHOW_LEN]);
/* A copy of text whose lone surrogate escapes ("\udc80") are written as characters of
 * U+10F800..U+10FFFF, so that jansson reads the document and the checks can name the field
 * that holds one; NULL when there is none, or no memory (*len then SIZE_MAX). */
char *sc_mark_surrogates(struct scen *s, const char *text, size_t *len);
const char *sc_kind(const json_t *v);
bool sc_check_object(struct scen *s, const json_t *v, const char *path,
                     const char *const *allowed, size_t n);
bool sc_check_list(struct scen *s, const json_t *v, const char *path, bool nonempty);
bool sc_check_bool(struct scen *s, const json_t *v, const char *path, int *out);
bool sc_check_int(struct scen *s, const json_t *v, const char *path, long long lo, bool has_lo,
                  long long hi, bool has_hi, const char *what, long long *out);
bool sc_check_num(struct scen *s, const json_t *v, const char *path, bool positive,
                  bool nonneg, double *out);
bool sc_check_name(struct scen *s, const json_t *v, const char *path, const char *what,
                   bool slash_ok);
bool sc_check_key_name(struct scen *s, const char *key, const char *path, const char *what);
/* Devices of a node of the built topology; *first (when not NULL) the first device id. */
uint32_t sc_node_devices(const tp_topology *t, uint32_t node, uint32_t *first);
int sc_ref(struct scen *s, const json_t *v, const char *path, const char *what, uint32_t *node,
           int *dev);

/* ---- scenario_topology.c ---- */
bool sc_read_topology(struct scen *s, const json_t *topo);

/* ---- scenario_grid.c ---- */
/* topology.x_grid (grid levels and their children's coordinates) and a request's x_box. */
bool sc_read_grids(struct scen *s, const json_t *v);
bool sc_read_box(struct scen *s, const json_t *v, const char *p, tp_request *r);

/* ---- scenario_state.c ---- */
bool sc_read_state(struct scen *s, const json_t *state);
bool sc_build_state(struct scen *s);
const struct sc_job *sc_job(const struct scen *s, const char *id);
bool sc_read_class(struct scen *s, const json_t *v, const char *p, tp_job_class *out);

/* ---- scenario_request.c ---- */
bool sc_read_request(struct scen *s, const json_t *req, const char *p, const struct sc_job *job,
                     struct sc_request *out);
void sc_request_free(struct scen *s, struct sc_request *r);
bool sc_read_policy(struct scen *s, const json_t *pol);
bool sc_read_replace(struct scen *s, const json_t *rep);

#endif
