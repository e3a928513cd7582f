/* SPDX-License-Identifier: MIT */
/*
 * The layout of a cluster state, shared by the modules that read it (place, frag, defrag).
 * Private: nothing here is part of the API.
 *
 * Per device: a health byte and the slot of the job holding it. Per domain of every level,
 * kept up to date on every change (never recounted on the request path):
 *   - free[l][d]        free devices (healthy, not cordoned, held by no job);
 *   - free_nodes[l][d]  nodes whose every device is free (levels above the node);
 *   - hist[l][d * hstride + k]  nodes of the domain with exactly k free devices (above the node);
 *   - ckhist[l][d * TP_CK_BUCKETS + b]  devices of the domain held by jobs whose checkpoint
 *                       cost per device falls in bucket b (above the node): the defrag planner's
 *                       lower bound on the cost of freeing k devices of a domain, without
 *                       reading them (see tp_ck_bucket);
 *   - index[l]          a Judy1 set of keys (free << 32 | d) for every domain with free > 0, so
 *                       that "the tightest domain with at least k free" is one Judy1First call.
 *                       Kept for every level, the node level included, so that a request
 *                       one node must hold takes the tightest node of the whole fleet
 *                       (place_choice.c), as Kueue's BestFit does. It costs a Judy1 update
 *                       per node a change touches: 72-GPU assign p50 0.9 -> 1.7 us, release
 *                       0.6 -> 1.2 us at 1M GPUs (tp-bench model, docs/benchmarks.md).
 */
#ifndef TP_CLUSTER_IMPL_H
#define TP_CLUSTER_IMPL_H

#include <math.h>
#include <stdatomic.h>

#include "topology_impl.h"

/* Health bits of a device. Down wins over cordoned wherever a device is counted. */
#define TP_DS_DOWN 0x1u
#define TP_DS_CORDONED 0x2u
/* A hot spare (tp_cluster_set_spares): healthy, free, held back from ordinary placement. Every
 * device of a spare node has it, and a spare device is never held, down or cordoned: a change
 * that would make it so drops the node's mark (cluster_spare.c). Not free, so every aggregate
 * leaves spares out and placement never sees them; tp_replace asks for them. */
#define TP_DS_SPARE 0x4u

/* Checkpoint buckets: 0 for checkpoint_s < 1, then four per octave from 1 s (the last one
 * open-ended). tp_ck_floor(b) is at most every checkpoint_s of bucket b, so a sum of floors is
 * a lower bound on the cost of moving the devices counted. frexp is exact: no libm rounding
 * decides a bucket. */
#define TP_CK_BUCKETS 66u

static inline unsigned tp_ck_bucket(double ckpt_s)
{
	if (!(ckpt_s >= 1.0))
		return 0;
	int e;
	double m = frexp(ckpt_s, &e); /* ckpt_s = m * 2^e, m in [0.5, 1), e >= 1 */
	unsigned q = m >= 0.8408964152537145 ? 3u : m >= 0.7071067811865476 ? 2u
	           : m >= 0.5946035575013605 ? 1u : 0u;
	unsigned b = 1u + 4u * (unsigned)(e - 1) + q;
	return b < TP_CK_BUCKETS ? b : TP_CK_BUCKETS - 1;
}

/* The least checkpoint_s of bucket b (rounded down). */
static inline double tp_ck_floor(unsigned b)
{
	static const double q[4] = {0.5, 0.5946035575, 0.7071067811, 0.8408964152};
	if (b == 0)
		return 0.0;
	return ldexp(q[(b - 1) % 4], (int)((b - 1) / 4) + 1);
}

/* dev_job value of a device held by no job. */
#define TP_NO_JOB UINT32_MAX

struct tp_job_impl {
	char *id;
	uint64_t id_hash;      /* XXH3 of the id, for the fingerprint */
	uint32_t *devs;        /* [ndev] rank order */
	uint32_t ndev;
	tp_job_class job_class;
	int priority;
	char *tenant;          /* never NULL ("default") */
	bool preemptible;
	bool migratable;
	double checkpoint_s;
	tp_request *shape;     /* deep copy (tp_request_dup in request.h), or NULL */
	int16_t *nic;          /* [ndev] NIC paired with each rank, -1: none; NULL unless the
	                          shape has gpu_nic_pairs (its own allocation) */
	bool devs_separate;    /* devs is its own allocation (after a rebind), not in the block */
	uint32_t service;      /* the service its shape names (cluster_service.c), or
	                          TP_NO_SERVICE */
	struct tp_job_part *parts; /* [nparts] NVLink partitions, domain order (own allocation),
	                              NULL when none (cluster_partition.c) */
	uint32_t nparts;
	size_t bytes;          /* size of the block holding the struct, devs, id and tenant */
};

/* When a running job is expected to end: its shape's expected_end_s (0: not known). */
static inline double tp_job_end(const struct tp_job_impl *j)
{
	return j->shape ? j->shape->expected_end_s : 0.0;
}

/* One NVLink partition of a job: its domain of the partition level, its channel in the
 * domain's pool and how many of the job's nodes it spans (>= 2; the nodes are those of the
 * job's devices in the domain). */
struct tp_job_part {
	uint32_t dom, channel, nnodes;
};

/* An entry of the undo log (see tp_cluster_savepoint). */
enum tp_undo_kind {
	TP_UNDO_HEALTH,   /* device dev had health byte old */
	TP_UNDO_ASSIGN,   /* job was added at slot (undo: remove it) */
	TP_UNDO_RELEASE,  /* job was removed from slot (undo: put it back); owns the job */
	TP_UNDO_REBIND,   /* the job at slot had devs[ndev] (undo: put them back); owns devs when
	                     devs_separate */
	TP_UNDO_SPARES,   /* the spare policy was level `slot`, k `ndev` (undo: put it back) */
	TP_UNDO_SERVICE   /* service `slot` had caps level `dev` (TP_NONE: none), max_per_domain
	                     `ndev`, max_percent `x`, and the failure-domain caps `fdk`, `fdn`,
	                     `fdx` (undo: put them back) */
};

struct tp_undo {
	enum tp_undo_kind kind;
	uint32_t dev;
	uint8_t old;
	bool devs_separate;
	uint32_t slot;
	uint32_t ndev;
	struct tp_job_impl *job;
	uint32_t *devs;
	int16_t *nic;     /* REBIND: the job's NICs before (owned), or NULL */
	struct tp_job_part *parts; /* REBIND: the job's partitions before (owned), or NULL */
	uint32_t nparts;
	double x;         /* SERVICE: the old max_percent */
	uint32_t fdk, fdn; /* SERVICE: the old fd_kind (TP_NONE: none) and fd_max_per_domain */
	double fdx;       /* SERVICE: the old fd_max_percent */
};

/* A service (cluster_service.c): its name, running replicas and spread caps. Services are
 * never removed, so that a rollback finds every one it counted. */
#define TP_NO_SERVICE UINT32_MAX
struct tp_service {
	char *name;
	uint32_t replicas;       /* running jobs whose shape names it */
	uint32_t level;          /* caps level, or TP_NONE: no caps */
	uint32_t max_per_domain; /* 0: none */
	double max_percent;      /* 0: none */
	uint32_t fd_kind;        /* failure-domain kind of the fd caps, or TP_NONE: none */
	uint32_t fd_max_per_domain; /* 0: none */
	double fd_max_percent;   /* 0: none */
};

/* An open savepoint: the undo log's length and the generation when it was opened. */
struct tp_savepoint {
	size_t nundo;
	uint64_t generation;
	uint64_t serial;   /* the handle tp_cluster_savepoint() gave: never reused */
};

/* The free-cell index of one grid level (cluster_grid.c): bit x of row (y, z) of domain d,
 * bits[(d * rows + y + dim[1] * z) * words + x / 64], is set while the child at that cell is
 * wholly free (free count == child_dev); bits past dim[0] stay clear; present has the same
 * layout for the cells that hold a child (the ideal's usable cells). nfree[d] counts the
 * domain's set bits, plane[d * dim[2] + z] those of its plane z. Kept by every change through
 * tp_cl_grid_changed (so rollbacks restore it), copied by tp_cluster_copy, recounted by
 * tp_cluster_check. */
struct tp_cl_grid {
	uint32_t words; /* per row: (dim[0] + 63) / 64 */
	uint32_t rows;  /* per domain: dim[1] * dim[2] */
	uint64_t *bits;
	uint64_t *present; /* [ndom * rows * words] cells that hold a child (the topology's, fixed) */
	uint32_t *nfree;
	uint32_t *plane;
};

/* One shape of the placement mix: jobs of `devices` inside one domain of `level`. */
struct tp_place_shape {
	uint32_t devices, weight;
	unsigned level;
};

struct tp_cluster {
	tp_allocator alloc;
	uint64_t id;               /* tp_identity_next() at creation: placements record it */
	uint64_t origin;           /* the lineage: id of the cluster this one was copied from
	                              (tp_cluster_copy, transitively), else id; plans record it */
	bool guard;                /* tp_cluster_options.writer_guard */
	atomic_bool busy;          /* a guarded writing call is inside (guard only) */
	const struct tp_topology *t;
	char errmsg[TP_ERRMSG_LEN];

	uint8_t *dstate;   /* [ndevices] TP_DS_* bits */
	uint32_t *dev_job; /* [ndevices] job slot or TP_NO_JOB */

	uint32_t *free[TP_MAX_LEVELS];       /* [lv.ndom] per level, node level included */
	uint32_t *free_nodes[TP_MAX_LEVELS]; /* [lv.ndom] levels above the node */
	uint32_t *hist[TP_MAX_LEVELS];       /* [lv.ndom * hstride] levels above the node */
	uint32_t hstride;                    /* max_node_devices + 1 */
	uint32_t *ckhist[TP_MAX_LEVELS];     /* [lv.ndom * TP_CK_BUCKETS] levels above the node */
	Pvoid_t index[TP_MAX_LEVELS];        /* Judy1, see above; NULL while dropped */
	bool indexed[TP_MAX_LEVELS];         /* index[l] is current: use it */
	bool index_lost;                     /* a Judy failure dropped an index; the next writing
	                                        call rebuilds it (until then indexed[l] is false
	                                        and readers scan) */

	uint32_t nfree, ndown, ncordoned;

	struct tp_job_impl **jobs; /* [njobs] by slot */
	size_t njobs, cap_jobs;
	Pvoid_t job_by_id;         /* JudySL: id -> slot + 1; 0 marks a removed id (a tombstone,
	                              so that a rollback can restore it without allocating) */
	size_t ntomb;              /* tombstones in job_by_id */

	struct tp_undo *undo;      /* log, active while nsp > 0 */
	size_t nundo, cap_undo;
	struct tp_savepoint *sp;   /* open savepoints, serials increasing */
	size_t nsp, cap_sp;
	uint64_t sp_serials;       /* savepoint handles handed out */
	bool undo_lost;            /* an entry found no room (a bug): no rollback until the log
	                              is empty again */

	uint64_t generation;       /* names the current state; tp_commit checks it */
	uint64_t generations;      /* generation numbers handed out: a change takes a new one */
	uint32_t nexclusive;       /* running jobs whose shape has `exclusive`: placement reads
	                            * them only when there are any */
	uint64_t held_devs;        /* devices the running jobs hold */
	uint64_t wide_devs;        /* of those, the devices of jobs wider than half an NVLink
	                            * rack (tp_cl_job_wide): the running mix place_choice.c reads */
	int16_t *dev_nic;          /* [ndevices] NIC of the device's node paired with it by the
	                            * pairs job holding it, -1: none (see tp_job_impl.nic) */
	uint32_t npairs;           /* running jobs with NICs (gpu_nic_pairs): placement blocks
	                            * taken NICs only when there are any */
	uint32_t *spare_devs[TP_MAX_LEVELS];  /* [lv.ndom] devices marked TP_DS_SPARE, per level
	                                       * (node level included) */
	uint32_t *spare_nodes[TP_MAX_LEVELS]; /* [lv.ndom] spare nodes, levels above the node */
	uint32_t nspare_nodes;                /* spare nodes in the cluster */
	uint32_t spare_level;                 /* the spare policy: keep spare_k spares in every */
	uint32_t spare_k;                     /* domain of spare_level (0: no policy) */
	/* NVLink partitions (tp_cluster_set_partitions, cluster_partition.c): off when
	 * part_level < 0. part_job[node] is the slot of the job whose partition holds the node
	 * (TP_NO_JOB: none); part_bits has part_words words per domain of part_level, bit k set
	 * while channel k is taken; part_used[dom] counts them. */
	int part_level;
	uint32_t part_channels, part_words;
	uint32_t *part_job;
	uint64_t *part_bits;
	uint32_t *part_used;
	uint32_t part_held;        /* partitions held in the cluster */
	uint64_t plan_key;         /* tp_plan_apply_step's cursor: the key of the plan last
	                            * applied here (defrag_plan.c), and its next step; on the
	                            * cluster so that a plan stays read-only while applied */
	size_t plan_next;
	/* the job mix placement protects (tp_cluster_set_place_mix, frag.c): 0 none (best fit
	 * alone; a new cluster), 1 the caller's pmix[0 .. npmix), 2 tp_frag_report's default mix */
	struct tp_service *svc;    /* [nsvc] services by index */
	size_t nsvc, cap_svc;
	Pvoid_t svc_by_name;       /* JudySL: name -> index + 1 */
	Pvoid_t svc_count;         /* JudyL: tp_cl_service_key(s, l, d) -> replicas of service s
	                            * with a device in domain d of level l (entries are made
	                            * before a change and never removed, so that applying and
	                            * undoing counts never allocates) */
	int pmix_mode;
	unsigned npmix;
	struct tp_place_shape pmix[TP_PLACE_MIX_MAX];
	struct tp_cl_grid *grid[TP_MAX_LEVELS]; /* [level] free-cell index of each grid level
	                                         * (cluster_grid.c), NULL elsewhere */
};

/* The mix placement scores with (frag.c): its shapes, weights scaled to integers summing to
 * about 64 (each >= 1); returns their number, 0 when the score is off. */
unsigned tp_place_mix(const struct tp_cluster *c, struct tp_place_shape *out);

/* Whether a job keeps other tenants out of its domains (its shape has `exclusive`). */
static inline bool tp_job_exclusive(const struct tp_job_impl *j)
{
	return j->shape && j->shape->exclusive;
}

/* The identity of a cluster, which a result records when it is made on it; and whether c is
 * the cluster of identity id. Compare identities, never addresses: a result that outlives its
 * cluster must be refused by a new cluster allocated at the same address. */
static inline uint64_t tp_cluster_identity(const struct tp_cluster *c) { return c->id; }

/* The lineage of a cluster: its own identity, or the one of the cluster it is a copy of
 * (cluster_copy.c). A plan records it, so that it may be carried out on copies of its state. */
static inline uint64_t tp_cluster_lineage(const struct tp_cluster *c) { return c->origin; }

static inline bool tp_cluster_is(const struct tp_cluster *c, uint64_t id)
{
	return c->id == id;
}

/* ---- the writer guard (tp_cluster_options.writer_guard) ---------------------------------- */

/* The cluster the calling thread's innermost guarded call holds: the library's own calls on a
 * cluster it holds (a planner's savepoints, a plan step's commit) pass the guard. */
extern _Thread_local const struct tp_cluster *tp_cl_held;

struct tp_guard {
	const struct tp_cluster *prev; /* tp_cl_held before this call took the guard */
	bool took;
};

/* Enter a writing call: 0, or TP_EBUSY when another call holds the cluster. Without a message:
 * the message buffer belongs to the writer inside. Costs one branch when the guard is off. */
static inline int tp_cl_enter(struct tp_cluster *c, struct tp_guard *g)
{
	g->prev = NULL;
	g->took = false;
	if (!c->guard || tp_cl_held == c)
		return 0;
	if (atomic_exchange_explicit(&c->busy, true, memory_order_acquire))
		return TP_EBUSY;
	g->prev = tp_cl_held;
	tp_cl_held = c;
	g->took = true;
	return 0;
}

static inline void tp_cl_leave(struct tp_cluster *c, const struct tp_guard *g)
{
	if (!g->took)
		return;
	tp_cl_held = g->prev;
	atomic_store_explicit(&c->busy, false, memory_order_release);
}

/* Return the result of `call` (an int expression on c) made under the writer guard. */
#define TP_GUARDED(c, call)                                                                    	do {                                                                                       		struct tp_guard tp__g;                                                                 		int tp__rc = tp_cl_enter((c), &tp__g);                                                 		if (tp__rc)                                                                            			return tp__rc;                                                                     		tp__rc = (call);                                                                       		tp_cl_leave((c), &tp__g);                                                              		return tp__rc;                                                                         	} while (0)

/* Look a job up by id: its slot, or TP_NO_JOB. */
uint32_t tp_cluster_job_slot(const struct tp_cluster *c, const char *id);

/* Whether a device can take new work: healthy, not cordoned, held by no job. */
static inline bool tp_dev_free(const struct tp_cluster *c, uint32_t dev)
{
	return c->dstate[dev] == 0 && c->dev_job[dev] == TP_NO_JOB;
}

/* Free devices of a node (the node-level aggregate). */
static inline uint32_t tp_node_free(const struct tp_cluster *c, uint32_t node)
{
	return c->free[c->t->nlevels - 1][node];
}

/* Assign devs to a new job without validation beyond what cannot be checked by the caller:
 * used by tp_commit and the planners. Returns 0 or TP_ENOMEM (state unchanged). */
int tp_cluster_assign_impl(struct tp_cluster *c, const char *id, const uint32_t *devs, size_t n,
                           const tp_job_options *opts);

/* The one check of job options (tp_cluster_assign and tp_commit): version, class, checkpoint
 * cost, tenant name, and a shape's pointers and level names. NULL is fine. 0 or TP_EINVAL with
 * the message on the cluster ("opts.job_class 5 is not a job class"). */
int tp_cluster_check_job_options(struct tp_cluster *c, const tp_job_options *o);

/* Replace a running job's device list in place (replacement after failures, migration within
 * a plan): devices leaving the job become free, new ones become held. 0 or TP_ENOMEM. */
int tp_cluster_rebind_impl(struct tp_cluster *c, uint32_t slot, const uint32_t *devs, size_t n);

/* ---- shared by the cluster's own files (cluster*.c) only --------------------------------- */

/* Spare upkeep (cluster_spare.c). Undo entries the upkeep after a change of devs may need
 * (reserve them with the change's own); then, after the change, drop the mark of spare nodes of
 * devs that are no longer healthy and free, and refill the policy's domains of devs. Both cost
 * one branch without spares. */
size_t tp_cl_spare_need(const struct tp_cluster *c, size_t n);
void tp_cl_spare_upkeep(struct tp_cluster *c, const uint32_t *devs, size_t n);

enum devop_kind {
	OP_HOLD,    /* dev_job = slot */
	OP_UNHOLD,  /* dev_job = TP_NO_JOB */
	OP_HEALTH   /* dstate = (dstate & ~mask) | value */
};

/* One change applied to a list of devices (tp_cl_apply_devs). */
struct devop {
	enum devop_kind kind;
	uint32_t slot;
	unsigned ck; /* OP_HOLD, OP_UNHOLD: the job's checkpoint bucket */
	uint8_t mask, value;
	bool log; /* log the old health byte of every device that changes */
};

/* Room for "node/index" (a node name is at most TP_MAX_NAME bytes). */
#define TP_DEVNAME_LEN (TP_MAX_NAME + 16)

/* The JudySL value of a job at slot. */
static inline Pvoid_t tp_cl_slot_value(uint32_t slot) { return (Pvoid_t)(uintptr_t)(slot + 1u); }

/* The Judy1 key of a domain in a level's index. */
static inline Word_t tp_cl_idx_key(uint32_t nfree, uint32_t dom)
{
	return (Word_t)nfree << 32 | dom;
}

/* Whether a job's shape asks for GPU+NIC pairs (so the job holds NICs). */
static inline bool tp_shape_pairs(const tp_request *shape)
{
	return shape && shape->version >= 2 && shape->gpu_nic_pairs;
}

/* A device's "node/index" name into buf. */
void tp_cl_dev_name(const struct tp_topology *t, uint32_t dev, char *buf, size_t len);

/* Build the Judy1 index of level l into *out: 0 or TP_ENOMEM (*out then freed). */
int tp_cl_idx_build(const struct tp_cluster *c, unsigned l, Pvoid_t *out);

/* Rebuild indexes that a Judy failure dropped (best effort). */
void tp_cl_idx_repair(struct tp_cluster *c);

/* Apply op to devs, in runs of one node, keeping every aggregate and index current. */
void tp_cl_apply_devs(struct tp_cluster *c, const uint32_t *devs, size_t n,
                      const struct devop *op);

/* The free-cell index of grid levels (cluster_grid.c): allocate and fill it from the free
 * counts (0 or TP_ENOMEM, freed by tp_cl_grid_free), copy it between clusters of one
 * topology, follow child ch of child level cl (whose parent level is a grid) from free count
 * old to now, and recount it (0 or TP_ECORRUPT with the difference in buf). */
int tp_cl_grid_create(struct tp_cluster *c);
void tp_cl_grid_free(struct tp_cluster *c);
void tp_cl_grid_copy(struct tp_cluster *d, const struct tp_cluster *c);
void tp_cl_grid_changed(struct tp_cluster *c, unsigned cl, uint32_t ch, uint32_t old,
                        uint32_t now);
int tp_cl_grid_check(const struct tp_cluster *c, char *buf, size_t len);

/* The job now sits at slot `to`: its devices say so. */
void tp_cl_relabel(struct tp_cluster *c, const struct tp_job_impl *job, uint32_t to);

/* NVLink partitions (cluster_partition.c). tp_cl_part_build: the partitions devs[n] would
 * need for the job at slot self (TP_NO_JOB: a new job) of tenant `tenant`, a job at self keeping
 * the channels of its partitions `keep` in the same domains; *out NULL when none. 0, TP_ENOMEM,
 * or TP_EBUSY with the reason in why (TP_ERRMSG_LEN bytes; NULL: none wanted): a node in
 * another job's partition, a node of another tenant's job in the partition or a pool with no
 * free channel. tp_cl_part_apply records (on) or clears a job's partitions at slot. */
int tp_cl_part_build(const struct tp_cluster *c, uint32_t self, const char *tenant,
                     const uint32_t *devs, size_t n, const struct tp_job_part *keep,
                     uint32_t nkeep, struct tp_job_part **out, uint32_t *nout, char *why);
void tp_cl_part_apply(struct tp_cluster *c, const struct tp_job_impl *job, uint32_t slot,
                      bool on);

/* Whether node is in the partition of a job other than self, and that job's slot. */
static inline bool tp_cl_part_other(const struct tp_cluster *c, uint32_t node, uint32_t self,
                                    uint32_t *owner)
{
	if (c->part_level < 0 || c->part_job[node] == TP_NO_JOB || c->part_job[node] == self)
		return false;
	*owner = c->part_job[node];
	return true;
}

/* Whether the partition level's domain dom joins its nodes by NVLink (needs partitions). */
static inline bool tp_cl_part_domain(const struct tp_cluster *c, uint32_t dom)
{
	return c->part_level >= 0 && tp_dom_fabric(c->t, c->part_level, dom)->kind == TP_LINK_NVLINK;
}

/* Record (on) or clear a job's NICs in dev_nic. */
void tp_cl_nic_apply(struct tp_cluster *c, const struct tp_job_impl *job, bool on);

/* Point an existing job-map entry at slot; remove tombstones once they outnumber the jobs. */
void tp_cl_map_set(struct tp_cluster *c, const char *id, uint32_t slot);
void tp_cl_map_sweep(struct tp_cluster *c);

/* Services (cluster_service.c). Make room, before a job with this shape holds devs, for its
 * service and its counts; *sid receives the service (TP_NO_SERVICE when the shape names
 * none). Then apply (on) or take back a running job's counts. */
int tp_cl_service_prepare(struct tp_cluster *c, const tp_request *shape, const uint32_t *devs,
                          size_t n, uint32_t *sid);
void tp_cl_service_apply(struct tp_cluster *c, const struct tp_job_impl *job, bool on);
uint32_t tp_cl_service_find(const struct tp_cluster *c, const char *name);
uint32_t tp_cl_service_count(const struct tp_cluster *c, uint32_t sid, unsigned level,
                             uint32_t dom);
void tp_cl_service_free(struct tp_cluster *c);
/* tp_cluster_copy: every service of c (same indexes, caps, replicas) and its counts into the
 * new, empty d. */
int tp_cl_service_copy(struct tp_cluster *d, const struct tp_cluster *c);
/* tp_cluster_check's part: every count what the running jobs give. */
int tp_cl_service_check(const struct tp_cluster *c, char *buf, size_t len);

static inline Word_t tp_cl_service_key(uint32_t sid, unsigned level, uint32_t dom)
{
	return (Word_t)sid << 36 | (Word_t)level << 32 | dom;
}

/* The counts' slot (the `level` of tp_cl_service_key) of failure-domain kind k, after the
 * levels': the first TP_SERVICE_FD_KINDS kinds are counted (4 bits hold 8 + 8 slots). */
static inline unsigned tp_cl_service_fd_slot(unsigned kind)
{
	return TP_MAX_LEVELS + kind;
}

/* The failure-domain kinds a service's replicas are counted in. */
static inline unsigned tp_cl_service_fd_kinds(const struct tp_topology *t)
{
	return t->nfd < TP_SERVICE_FD_KINDS ? t->nfd : TP_SERVICE_FD_KINDS;
}

/* Free a job and what it owns (NULL is fine). */
void tp_cl_job_free(const struct tp_cluster *c, struct tp_job_impl *job);

/* Take the job out of its slot (the last job moves in); returns it to free or to log. */
struct tp_job_impl *tp_cl_release_slot(struct tp_cluster *c, uint32_t slot);

/* The undo log (cluster_undo.c): room for k more entries while a savepoint is open, append
 * an entry (room reserved), free what the entries from `from` own. */
int tp_cl_undo_reserve(struct tp_cluster *c, size_t k);
void tp_cl_undo_push(struct tp_cluster *c, struct tp_undo e);
void tp_cl_undo_drop(struct tp_cluster *c, size_t from);

/* Free the partition policy's arrays (tp_cluster_destroy). */
void tp_cl_part_free(struct tp_cluster *c);
/* tp_cluster_copy: the partition policy and state of c into the new, empty d. */
int tp_cl_part_copy(struct tp_cluster *d, const struct tp_cluster *c);

/* A failed consistency check (tp_cluster_check): the message into buf (len bytes, either may
 * be 0), then return TP_ECORRUPT. Needs <stdio.h>. */
#define CHECK_FAIL(...)                                                                        \
	do {                                                                                       \
		if (buf && len)                                                                        \
			snprintf(buf, len, __VA_ARGS__);                                                   \
		return TP_ECORRUPT;                                                                    \
	} while (0)

/* The partition check of tp_cluster_check (cluster_partition.c). */
int tp_cl_part_check(const struct tp_cluster *c, char *buf, size_t len);

/* Devices of an NVLink rack where NVLink joins the nodes of the level above the node (an
 * NVL72 rack: its most devices), else 0 (HGX and PCIe nodes under InfiniBand or Ethernet, a
 * level whose domains have fabrics of their own, a one-level topology). */
static inline uint32_t tp_cl_nvlink_rack_devices(const struct tp_topology *t)
{
	unsigned nl = tp_node_level(t);
	if (nl == 0 || t->lv[nl - 1].dfab || t->fabric[nl].kind != TP_LINK_NVLINK)
		return 0;
	return t->lv[nl - 1].max_devices;
}

/* Whether a job of ndev devices is wide: more than half an NVLink rack (never where the
 * topology has none). */
static inline bool tp_cl_job_wide(const struct tp_topology *t, uint32_t ndev)
{
	uint32_t r = tp_cl_nvlink_rack_devices(t);
	return r > 0 && 2 * (uint64_t)ndev > r;
}

/* Count job's devices into the running mix (on) or out of it. */
static inline void tp_cl_mix_apply(struct tp_cluster *c, const struct tp_job_impl *job, bool on)
{
	uint64_t n = job->ndev, w = tp_cl_job_wide(c->t, job->ndev) ? n : 0;
	c->held_devs = on ? c->held_devs + n : c->held_devs - n;
	c->wide_devs = on ? c->wide_devs + w : c->wide_devs - w;
}

#endif
