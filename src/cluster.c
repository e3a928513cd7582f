/* SPDX-License-Identifier: MIT */
/*
 * The mutable cluster state (cluster_impl.h has the layout).
 *
 * Jobs (the job map, assign, release, rebind), creation and validation live here; the
 * aggregates in cluster_index.c, the fingerprint and check in cluster_check.c, savepoints in
 * cluster_undo.c. Callers validate and allocate first (undo log space included), so that once
 * tp_cl_apply_devs() runs nothing can fail any more.
 *
 * Judy allocates its nodes from the C library, outside our allocator, so a Judy1 update can
 * still fail in the middle of a change. Undoing half a change could fail the same way, so the
 * level's index is dropped instead (indexed[l] = false, readers scan) and rebuilt by the next
 * writing call; the state itself is always exact. The job map never fails mid-change: removals
 * that must stay reversible leave a tombstone (value 0) instead of deleting.
 */
#include "cluster_impl.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "request_data.h"

/* Transient dstate bit: the device was seen during validation (duplicate detection). */
#define TP_DS_MARK 0x80u

static const char tp_default_tenant[] = "default";

_Thread_local const struct tp_cluster *tp_cl_held;

void tp_cl_dev_name(const struct tp_topology *t, uint32_t dev, char *buf, size_t len)
{
	uint32_t node = t->dev_node[dev];
	snprintf(buf, len, "%s/%u", t->lv[tp_node_level(t)].dname[node],
	         (unsigned)(dev - t->dev_first[node]));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Pair the ranks of one node (ord[0..k): node << 32 | rank): a rank the job `self` already
 * holds with a NIC keeps it; the others are matched in rank order to the NICs no other job
 * and no kept rank uses. Ranks left without a NIC get -1. */
static void pair_node(const struct tp_cluster *c, uint32_t self, const uint32_t *devs,
                      const uint64_t *ord, size_t k, struct tp_pairing *pr, int *gpu_of,
                      unsigned char *seen, int16_t *nic)
{
	const struct tp_topology *t = c->t;
	uint32_t node = (uint32_t)(ord[0] >> 32), base = t->dev_first[node];
	const struct tp_nodetype *nt = tp_pairable_type(t, node);
	for (size_t j = 0; j < k; j++)
		nic[(uint32_t)ord[j]] = -1;
	if (!nt)
		return;
	tp_pairing_init(pr, nt, gpu_of, seen);
	for (uint32_t d = base; d < t->dev_first[node + 1]; d++)
		if (c->dev_nic[d] >= 0 && c->dev_job[d] != self)
			tp_pairing_block(pr, c->dev_nic[d]);
	bool kept[TP_MAX_NODE_DEVICES] = {false};
	for (size_t j = 0; j < k; j++) {
		uint32_t r = (uint32_t)ord[j], d = devs[r];
		if (self != TP_NO_JOB && c->dev_job[d] == self && c->dev_nic[d] >= 0) {
			nic[r] = c->dev_nic[d];
			kept[d - base] = true;
			tp_pairing_block(pr, c->dev_nic[d]);
		}
	}
	for (size_t j = 0; j < k; j++) {
		uint32_t d = devs[(uint32_t)ord[j]];
		if (!kept[d - base])
			tp_pair_gpu(pr, d - base);
	}
	for (size_t j = 0; j < k; j++) {
		uint32_t r = (uint32_t)ord[j], d = devs[r];
		if (!kept[d - base])
			nic[r] = (int16_t)pr->nic_of[d - base];
	}
}

/* The NICs of a pairs job about to hold devs (rank order): node by node, see pair_node.
 * self: the job's slot when it is rebound (its NICs on devices it keeps stay), else
 * TP_NO_JOB. *out is a new array, or NULL (out of memory). This is the rule placement
 * follows for tp_placement_nic() (place.c, pair_result), so a committed placement takes the
 * NICs its result reported. */
static int16_t *job_nics(const struct tp_cluster *c, uint32_t self, const uint32_t *devs,
                         size_t n)
{
	const struct tp_topology *t = c->t;
	tp_allocator a = c->alloc;
	unsigned maxnic = 1;
	for (unsigned ty = 0; ty < t->ntypes; ty++)
		if (t->types[ty]->nnic > maxnic)
			maxnic = t->types[ty]->nnic;
	int16_t *nic = tp_mallocn(&a, n, sizeof *nic);
	uint64_t *ord = tp_mallocn(&a, n, sizeof *ord);
	int *gpu_of = tp_mallocn(&a, maxnic, sizeof *gpu_of);
	unsigned char *seen = tp_malloc(&a, maxnic);
	struct tp_pairing *pr = tp_malloc(&a, sizeof *pr);
	if (!nic || !ord || !gpu_of || !seen || !pr) {
		tp_free(&a, nic);
		nic = NULL;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ord[i] = (uint64_t)t->dev_node[devs[i]] << 32 | i;
	qsort(ord, n, sizeof *ord, cmp_u64);
	for (size_t i = 0, k; i < n; i += k) {
		for (k = 1; i + k < n && ord[i + k] >> 32 == ord[i] >> 32; k++)
			;
		pair_node(c, self, devs, ord + i, k, pr, gpu_of, seen, nic);
	}
out:
	tp_free(&a, ord);
	tp_free(&a, gpu_of);
	tp_free(&a, seen);
	tp_free(&a, pr);
	return nic;
}

/* Record (on) or clear a job's NICs in dev_nic. */
void tp_cl_nic_apply(struct tp_cluster *c, const struct tp_job_impl *job, bool on)
{
	if (!job->nic)
		return;
	for (uint32_t i = 0; i < job->ndev; i++)
		c->dev_nic[job->devs[i]] = on ? job->nic[i] : -1;
}

/* ---- jobs and the job map ------------------------------------------------------------------ */

uint32_t tp_cluster_job_slot(const struct tp_cluster *c, const char *id)
{
	if (!c || !id)
		return TP_NO_JOB;
	JError_t err;
	PPvoid_t p = JudySLGet(c->job_by_id, (const uint8_t *)id, &err);
	if (!p || p == PPJERR || !*p)
		return TP_NO_JOB;
	return (uint32_t)((uintptr_t)*p - 1u);
}

/* Point an existing map entry (tombstone or not) at slot. Never allocates. */
void tp_cl_map_set(struct tp_cluster *c, const char *id, uint32_t slot)
{
	JError_t err;
	PPvoid_t p = JudySLGet(c->job_by_id, (const uint8_t *)id, &err);
	if (!p || p == PPJERR)
		return; /* every caller names a mapped id; tp_cluster_check() reports a lost one */
	if (!*p)
		c->ntomb--;
	*p = tp_cl_slot_value(slot);
}

/* Remove id from the map. While a savepoint is open, leave a tombstone so that a rollback
 * can put it back without allocating; a deletion that fails also leaves one. */
static void map_remove(struct tp_cluster *c, const char *id)
{
	JError_t err;
	if (c->nsp == 0 && JudySLDel(&c->job_by_id, (const uint8_t *)id, &err) == 1)
		return;
	PPvoid_t p = JudySLGet(c->job_by_id, (const uint8_t *)id, &err);
	if (p && p != PPJERR && *p) {
		*p = NULL;
		c->ntomb++;
	}
}

/* Delete tombstones once they outnumber the jobs (amortised O(1) per tombstone). */
void tp_cl_map_sweep(struct tp_cluster *c)
{
	if (c->nsp > 0 || c->ntomb <= c->njobs / 2 + 16)
		return;
	uint8_t key[TP_MAX_NAME + 2];
	JError_t err;
	key[0] = '\0';
	PPvoid_t p = JudySLFirst(c->job_by_id, key, &err);
	while (p && p != PPJERR) {
		if (!*p) {
			if (JudySLDel(&c->job_by_id, key, &err) != 1)
				return;
			c->ntomb--;
		}
		p = JudySLNext(c->job_by_id, key, &err);
	}
}

void tp_cl_job_free(const struct tp_cluster *c, struct tp_job_impl *job)
{
	if (!job)
		return;
	if (job->devs_separate)
		tp_free(&c->alloc, job->devs);
	tp_request_free(&c->alloc, job->shape);
	tp_free(&c->alloc, job->nic);
	tp_free(&c->alloc, job->parts);
	tp_free(&c->alloc, job);
}

/* One block: the struct, the devices, the id and the tenant. */
static struct tp_job_impl *job_new(struct tp_cluster *c, const char *id, const uint32_t *devs,
                                   size_t n, const tp_job_options *opts)
{
	const char *tenant = opts && opts->tenant ? opts->tenant : tp_default_tenant;
	size_t idlen = strlen(id) + 1, tlen = strlen(tenant) + 1;
	size_t bytes = sizeof(struct tp_job_impl) + n * sizeof(uint32_t) + idlen + tlen;
	struct tp_job_impl *job = tp_malloc(&c->alloc, bytes);
	if (!job)
		return NULL;
	tp_request *shape = NULL;
	if (opts && opts->shape) {
		shape = tp_request_dup(&c->alloc, opts->shape);
		if (!shape) {
			tp_free(&c->alloc, job);
			return NULL;
		}
	}
	int16_t *nic = NULL;
	if (tp_shape_pairs(shape) && !(nic = job_nics(c, TP_NO_JOB, devs, n))) {
		tp_request_free(&c->alloc, shape);
		tp_free(&c->alloc, job);
		return NULL;
	}
	uint32_t *d = (uint32_t *)(void *)(job + 1);
	char *s = (char *)(d + n);
	memcpy(d, devs, n * sizeof *d);
	memcpy(s, id, idlen);
	memcpy(s + idlen, tenant, tlen);
	tp_job_options def = TP_JOB_OPTIONS_INIT;
	if (!opts)
		opts = &def;
	*job = (struct tp_job_impl){
		.id = s,
		.id_hash = XXH3_64bits(id, idlen - 1),
		.devs = d,
		.ndev = (uint32_t)n,
		.job_class = opts->job_class,
		.priority = opts->priority,
		.tenant = s + idlen,
		.preemptible = opts->preemptible != 0,
		.migratable = opts->migratable != 0,
		.checkpoint_s = opts->checkpoint_s,
		.shape = shape,
		.nic = nic,
		.devs_separate = false,
		.service = TP_NO_SERVICE,
		.bytes = bytes,
	};
	return job;
}

/* Everything assign needs that can fail, done before anything changes: the job, room in the
 * jobs array and the undo log, and the map entry (*slotp, its value still 0 or a tombstone). */
static int assign_prepare(struct tp_cluster *c, const char *id, const uint32_t *devs, size_t n,
                          const tp_job_options *opts, struct tp_job_impl **jobp,
                          PPvoid_t *slotp)
{
	struct tp_job_impl *job = job_new(c, id, devs, n, opts);
	if (!job)
		goto nomem;
	char why[TP_ERRMSG_LEN];
	int rc = tp_cl_part_build(c, TP_NO_JOB, job->tenant, devs, n, NULL, 0, &job->parts,
	                          &job->nparts, why);
	if (rc == TP_ENOMEM)
		goto nomem;
	if (rc) {
		tp_cl_job_free(c, job);
		return tp_seterr(c->errmsg, rc, "job '%s' breaks the NVLink partition rules: %s", id,
		                 why);
	}
	if (tp_grow(&c->alloc, (void **)&c->jobs, &c->cap_jobs, c->njobs + 1, sizeof *c->jobs) ||
	    tp_cl_undo_reserve(c, 1 + tp_cl_spare_need(c, n)) ||
	    tp_cl_service_prepare(c, job->shape, devs, n, &job->service))
		goto nomem;
	JError_t err;
	PPvoid_t p = JudySLGet(c->job_by_id, (const uint8_t *)id, &err);
	if (p && p != PPJERR) {
		if (*p) { /* the caller checked that the id is not running */
			tp_cl_job_free(c, job);
			return tp_seterr(c->errmsg, TP_EINTERNAL,
			                 "internal error: job '%s' is already in the job map", id);
		}
		c->ntomb--; /* a tombstone comes back to life below */
	} else {
		p = JudySLIns(&c->job_by_id, (const uint8_t *)id, &err);
		if (!p || p == PPJERR)
			goto nomem;
	}
	*jobp = job;
	*slotp = p;
	return 0;
nomem:
	tp_cl_job_free(c, job);
	return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory assigning job '%s'", id);
}

static void assign_apply(struct tp_cluster *c, struct tp_job_impl *job, PPvoid_t slotp)
{
	uint32_t slot = (uint32_t)c->njobs++;
	c->jobs[slot] = job;
	c->nexclusive += tp_job_exclusive(job);
	c->npairs += job->nic != NULL;
	*slotp = tp_cl_slot_value(slot);
	struct devop op = {.kind = OP_HOLD, .slot = slot, .ck = tp_ck_bucket(job->checkpoint_s)};
	tp_cl_apply_devs(c, job->devs, job->ndev, &op);
	tp_cl_nic_apply(c, job, true);
	tp_cl_service_apply(c, job, true);
	tp_cl_mix_apply(c, job, true);
	tp_cl_part_apply(c, job, slot, true);
	if (c->nsp)
		tp_cl_undo_push(c, (struct tp_undo){.kind = TP_UNDO_ASSIGN, .slot = slot, .job = job});
	c->generation = ++c->generations;
}

/* Whether devs can be held by the job at slot self (TP_NO_JOB: a new job): in range, listed
 * once, held by no other job. What the public calls check with messages; the internal callers
 * (commit, the planners) must have ensured it, so a failure is an internal error. */
static bool impl_devs_usable(struct tp_cluster *c, const uint32_t *devs, size_t n, uint32_t self)
{
	if (n == 0 || !devs)
		return false;
	size_t i = 0;
	for (; i < n; i++) {
		uint32_t d = devs[i];
		if (d >= c->t->ndevices || (c->dstate[d] & TP_DS_MARK) ||
		    (c->dev_job[d] != TP_NO_JOB && c->dev_job[d] != self))
			break;
		c->dstate[d] |= TP_DS_MARK;
	}
	for (size_t k = 0; k < i; k++)
		c->dstate[devs[k]] &= (uint8_t)~TP_DS_MARK;
	return i == n;
}

int tp_cluster_assign_impl(struct tp_cluster *c, const char *id, const uint32_t *devs, size_t n,
                           const tp_job_options *opts)
{
	if (tp_cluster_job_slot(c, id) != TP_NO_JOB)
		return tp_seterr(c->errmsg, TP_EINTERNAL,
		                 "internal error: job '%s' is assigned but already running", id);
	if (!impl_devs_usable(c, devs, n, TP_NO_JOB))
		return tp_seterr(c->errmsg, TP_EINTERNAL,
		                 "internal error: job '%s' is assigned %zu devices that are out of "
		                 "range, listed twice or held", id, n);
	tp_cl_idx_repair(c);
	struct tp_job_impl *job = NULL;
	PPvoid_t slotp = NULL;
	int rc = assign_prepare(c, id, devs, n, opts, &job, &slotp);
	if (rc)
		return rc;
	assign_apply(c, job, slotp);
	tp_cl_spare_upkeep(c, job->devs, job->ndev);
	return 0;
}

/* Take the job out of its slot; the last job moves into the slot. Returns the job, which the
 * caller frees or hands to the undo log. */
struct tp_job_impl *tp_cl_release_slot(struct tp_cluster *c, uint32_t slot)
{
	struct tp_job_impl *job = c->jobs[slot];
	struct devop op = {.kind = OP_UNHOLD, .ck = tp_ck_bucket(job->checkpoint_s)};
	tp_cl_apply_devs(c, job->devs, job->ndev, &op);
	tp_cl_nic_apply(c, job, false);
	tp_cl_service_apply(c, job, false);
	tp_cl_mix_apply(c, job, false);
	tp_cl_part_apply(c, job, slot, false);
	map_remove(c, job->id);
	c->nexclusive -= tp_job_exclusive(job);
	c->npairs -= job->nic != NULL;
	uint32_t last = (uint32_t)--c->njobs;
	if (slot != last) {
		c->jobs[slot] = c->jobs[last];
		tp_cl_relabel(c, c->jobs[slot], slot);
		tp_cl_map_set(c, c->jobs[slot]->id, slot);
	}
	c->jobs[last] = NULL;
	return job;
}

/* The partitions the job at slot needs on devs, keeping its channels where it stays. */
static int rebind_parts(struct tp_cluster *c, uint32_t slot, const uint32_t *devs, size_t n,
                        struct tp_job_part **parts, uint32_t *nparts, char *why)
{
	const struct tp_job_impl *job = c->jobs[slot];
	return tp_cl_part_build(c, slot, job->tenant, devs, n, job->parts, job->nparts, parts,
	                        nparts, why);
}

int tp_cluster_rebind_impl(struct tp_cluster *c, uint32_t slot, const uint32_t *devs, size_t n)
{
	if (slot >= c->njobs)
		return tp_seterr(c->errmsg, TP_EINTERNAL,
		                 "internal error: rebinding job slot %u of %zu", (unsigned)slot,
		                 c->njobs);
	if (!impl_devs_usable(c, devs, n, slot))
		return tp_seterr(c->errmsg, TP_EINTERNAL,
		                 "internal error: job '%s' is moved to %zu devices that are out of "
		                 "range, listed twice or held by another job", c->jobs[slot]->id, n);
	tp_cl_idx_repair(c);
	uint32_t *nd = tp_mallocn(&c->alloc, n, sizeof *nd);
	int16_t *nic = NULL;
	if (nd && c->jobs[slot]->nic && !(nic = job_nics(c, slot, devs, n))) {
		tp_free(&c->alloc, nd);
		nd = NULL;
	}
	struct tp_job_part *parts = NULL;
	uint32_t nparts = 0, sid;
	char why[TP_ERRMSG_LEN];
	int rc = nd ? rebind_parts(c, slot, devs, n, &parts, &nparts, why) : TP_ENOMEM;
	if (!rc && (tp_cl_undo_reserve(c, 1 + tp_cl_spare_need(c, n + c->jobs[slot]->ndev)) ||
	            tp_cl_service_prepare(c, c->jobs[slot]->shape, devs, n, &sid)))
		rc = TP_ENOMEM;
	if (rc) {
		tp_free(&c->alloc, nd);
		tp_free(&c->alloc, nic);
		tp_free(&c->alloc, parts);
		return rc == TP_ENOMEM ? tp_seterr(c->errmsg, TP_ENOMEM, "out of memory moving job "
		                                   "'%s'", c->jobs[slot]->id)
		                       : tp_seterr(c->errmsg, rc, "job '%s' cannot move: %s",
		                                   c->jobs[slot]->id, why);
	}
	memcpy(nd, devs, n * sizeof *nd);
	struct tp_job_impl *job = c->jobs[slot];
	unsigned ck = tp_ck_bucket(job->checkpoint_s);
	struct devop unhold = {.kind = OP_UNHOLD, .ck = ck},
	             hold = {.kind = OP_HOLD, .slot = slot, .ck = ck};
	tp_cl_apply_devs(c, job->devs, job->ndev, &unhold);
	tp_cl_nic_apply(c, job, false);
	tp_cl_service_apply(c, job, false);
	tp_cl_mix_apply(c, job, false);
	tp_cl_part_apply(c, job, slot, false);
	struct tp_undo e = {.kind = TP_UNDO_REBIND, .slot = slot, .devs = job->devs,
	                    .ndev = job->ndev, .devs_separate = job->devs_separate,
	                    .nic = job->nic, .parts = job->parts, .nparts = job->nparts};
	job->devs = nd;
	job->ndev = (uint32_t)n;
	job->devs_separate = true;
	job->nic = nic;
	job->parts = parts;
	job->nparts = nparts;
	tp_cl_apply_devs(c, nd, n, &hold);
	tp_cl_nic_apply(c, job, true);
	tp_cl_service_apply(c, job, true);
	tp_cl_mix_apply(c, job, true);
	tp_cl_part_apply(c, job, slot, true);
	tp_cl_spare_upkeep(c, nd, n);
	tp_cl_spare_upkeep(c, e.devs, e.ndev);
	if (c->nsp)
		tp_cl_undo_push(c, e);
	else {
		if (e.devs_separate)
			tp_free(&c->alloc, e.devs);
		tp_free(&c->alloc, e.nic);
		tp_free(&c->alloc, e.parts);
	}
	c->generation = ++c->generations;
	return 0;
}

/* ---- create / destroy ---------------------------------------------------------------------- */

/* Every device free: fill the aggregates from the topology. */
static void init_aggregates(struct tp_cluster *c)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	for (uint32_t node = 0; node < t->nnodes; node++) {
		uint32_t nd = tp_node_ndev(t, node);
		c->free[nl][node] = nd;
		c->nfree += nd;
		uint32_t d = node;
		for (unsigned l = nl; l-- > 0;) {
			d = t->lv[l + 1].parent[d];
			c->free[l][d] += nd;
			c->free_nodes[l][d]++;
			c->hist[l][(size_t)d * c->hstride + nd]++;
		}
	}
}

static int create_arrays(struct tp_cluster *c)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	c->dstate = tp_calloc(&c->alloc, t->ndevices, 1);
	c->dev_job = tp_mallocn(&c->alloc, t->ndevices, sizeof *c->dev_job);
	c->dev_nic = tp_mallocn(&c->alloc, t->ndevices, sizeof *c->dev_nic);
	if (!c->dstate || !c->dev_job || !c->dev_nic)
		return TP_ENOMEM;
	memset(c->dev_job, 0xff, (size_t)t->ndevices * sizeof *c->dev_job); /* TP_NO_JOB */
	memset(c->dev_nic, 0xff, (size_t)t->ndevices * sizeof *c->dev_nic); /* -1 */
	for (unsigned l = 0; l <= nl; l++) {
		uint32_t nd = t->lv[l].ndom;
		c->free[l] = tp_calloc(&c->alloc, nd, sizeof(uint32_t));
		c->spare_devs[l] = tp_calloc(&c->alloc, nd, sizeof(uint32_t));
		if (!c->free[l] || !c->spare_devs[l])
			return TP_ENOMEM;
		if (l == nl)
			break;
		c->spare_nodes[l] = tp_calloc(&c->alloc, nd, sizeof(uint32_t));
		if (!c->spare_nodes[l])
			return TP_ENOMEM;
		c->free_nodes[l] = tp_calloc(&c->alloc, nd, sizeof(uint32_t));
		c->hist[l] = tp_calloc(&c->alloc, (size_t)nd * c->hstride, sizeof(uint32_t));
		c->ckhist[l] = tp_calloc(&c->alloc, (size_t)nd * TP_CK_BUCKETS, sizeof(uint32_t));
		if (!c->free_nodes[l] || !c->hist[l] || !c->ckhist[l])
			return TP_ENOMEM;
	}
	return 0;
}

int tp_cluster_create(tp_cluster **out, const tp_topology *t, const tp_allocator *alloc)
{
	return tp_cluster_create_ext(out, t, alloc, NULL);
}

int tp_cluster_create_ext(tp_cluster **out, const tp_topology *t, const tp_allocator *alloc,
                          const tp_cluster_options *opts)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!t || !tp_alloc_valid(alloc) ||
	    (opts && (opts->version < 1 || opts->version > TP_CLUSTER_OPTIONS_VERSION)))
		return TP_EINVAL;
	tp_allocator a = tp_alloc_resolve(alloc);
	struct tp_cluster *c = tp_calloc(&a, 1, sizeof *c);
	if (!c)
		return TP_ENOMEM;
	c->alloc = a;
	c->t = t;
	c->id = tp_identity_next();
	c->origin = c->id;
	c->guard = opts && opts->writer_guard;
	atomic_init(&c->busy, false);
	c->hstride = t->max_node_devices + 1;
	c->part_level = -1;
	if (create_arrays(c))
		goto nomem;
	init_aggregates(c);
	if (tp_cl_grid_create(c))
		goto nomem;
	unsigned nl = tp_node_level(t);
	for (unsigned l = 0; l <= nl; l++) {
		if (tp_cl_idx_build(c, l, &c->index[l]))
			goto nomem;
		c->indexed[l] = true;
	}
	*out = c;
	return 0;
nomem:
	tp_cluster_destroy(c);
	return TP_ENOMEM;
}

void tp_cluster_destroy(tp_cluster *c)
{
	if (!c)
		return;
	JError_t err;
	tp_cl_undo_drop(c, 0);
	for (size_t i = 0; i < c->njobs; i++)
		tp_cl_job_free(c, c->jobs[i]);
	JudySLFreeArray(&c->job_by_id, &err);
	tp_cl_service_free(c);
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		Judy1FreeArray(&c->index[l], &err);
		tp_free(&c->alloc, c->free[l]);
		tp_free(&c->alloc, c->free_nodes[l]);
		tp_free(&c->alloc, c->hist[l]);
		tp_free(&c->alloc, c->ckhist[l]);
		tp_free(&c->alloc, c->spare_devs[l]);
		tp_free(&c->alloc, c->spare_nodes[l]);
	}
	tp_free(&c->alloc, c->jobs);
	tp_free(&c->alloc, c->undo);
	tp_free(&c->alloc, c->sp);
	tp_free(&c->alloc, c->dstate);
	tp_free(&c->alloc, c->dev_job);
	tp_free(&c->alloc, c->dev_nic);
	tp_cl_part_free(c);
	tp_cl_grid_free(c);
	tp_allocator a = c->alloc;
	tp_free(&a, c);
}

const char *tp_cluster_errmsg(const tp_cluster *c)
{
	return c ? c->errmsg : "";
}

const tp_topology *tp_cluster_topology(const tp_cluster *c)
{
	return c ? c->t : NULL;
}

/* ---- validation ---------------------------------------------------------------------------- */

/* A level name of the request's shape: a level of the topology, or (fd_ok) a failure-domain
 * kind. */
static int check_shape_level(struct tp_cluster *c, const char *name, const char *field,
                             bool fd_ok)
{
	if (!name || tp_topology_level_index(c->t, name) >= 0)
		return 0;
	if (fd_ok)
		for (unsigned k = 0; k < c->t->nfd; k++)
			if (strcmp(c->t->fd[k].name, name) == 0)
				return 0;
	return tp_seterr(c->errmsg, TP_EINVAL, "%s '%s' is not a level%s of the topology", field,
	                 name, fd_ok ? " or failure-domain kind" : "");
}

/* The pointer fields of a shape are usable (it is deep-copied) and its level names exist;
 * the rest of its meaning is place's to judge. */
static int check_shape(struct tp_cluster *c, const tp_request *r)
{
	char *m = c->errmsg;
	char field[64];
	int rc;
	if (!tp_request_size(r->version))
		return tp_seterr(m, TP_EINVAL, "shape.version %u is not 1 to %d", r->version,
		                 TP_REQUEST_VERSION);
	if (r->version >= 2 && r->gpu_nic_pairs != 0 && r->gpu_nic_pairs != 1)
		return tp_seterr(m, TP_EINVAL, "shape.gpu_nic_pairs %d is not 0 or 1",
		                 r->gpu_nic_pairs);
	if (r->count < 1)
		return tp_seterr(m, TP_EINVAL, "shape.count 0: a request needs at least one device");
	if (r->version >= 6 && (!isfinite(r->expected_end_s) || r->expected_end_s < 0))
		return tp_seterr(m, TP_EINVAL,
		                 "shape.expected_end_s %g is not a finite time >= 0 (0: not known)",
		                 r->expected_end_s);
	if ((unsigned)r->job_class > TP_CLASS_INTERACTIVE)
		return tp_seterr(m, TP_EINVAL, "shape.job_class %d is not a job class",
		                 (int)r->job_class);
	if (r->nslices && !r->slices)
		return tp_seterr(m, TP_EINVAL, "shape.slices is NULL but shape.nslices is %zu",
		                 r->nslices);
	if (r->ncaps && !r->caps)
		return tp_seterr(m, TP_EINVAL, "shape.caps is NULL but shape.ncaps is %zu", r->ncaps);
	if (r->nselect_nodes && !r->select_nodes)
		return tp_seterr(m, TP_EINVAL,
		                 "shape.select_nodes is NULL but shape.nselect_nodes is %zu",
		                 r->nselect_nodes);
	for (size_t i = 0; i < r->nslices; i++) {
		snprintf(field, sizeof field, "shape.slices[%zu].level", i);
		if (!r->slices[i].level)
			return tp_seterr(m, TP_EINVAL, "%s is NULL", field);
		if ((rc = check_shape_level(c, r->slices[i].level, field, false)))
			return rc;
	}
	for (size_t i = 0; i < r->ncaps; i++) {
		snprintf(field, sizeof field, "shape.caps[%zu].level", i);
		if (!r->caps[i].level)
			return tp_seterr(m, TP_EINVAL, "%s is NULL", field);
		if ((rc = check_shape_level(c, r->caps[i].level, field, true)))
			return rc;
	}
	for (size_t i = 0; i < r->nselect_nodes; i++)
		if (!r->select_nodes[i])
			return tp_seterr(m, TP_EINVAL, "shape.select_nodes[%zu] is NULL", i);
	if ((rc = check_shape_level(c, r->group_level, "shape.group_level", false)) ||
	    (rc = check_shape_level(c, r->required, "shape.required", false)) ||
	    (rc = check_shape_level(c, r->preferred, "shape.preferred", false)) ||
	    (rc = check_shape_level(c, r->spread_level, "shape.spread_level", true)) ||
	    (rc = check_shape_level(c, r->colocate_level, "shape.colocate_level", false)) ||
	    (rc = check_shape_level(c, r->exclusive, "shape.exclusive", false)))
		return rc;
	return 0;
}

int tp_cluster_check_job_options(struct tp_cluster *c, const tp_job_options *o)
{
	char *m = c->errmsg;
	if (!o)
		return 0;
	if (o->version < 1 || o->version > TP_JOB_OPTIONS_VERSION)
		return tp_seterr(m, TP_EINVAL, "opts.version %u is not %d", o->version,
		                 TP_JOB_OPTIONS_VERSION);
	if ((unsigned)o->job_class > TP_CLASS_INTERACTIVE)
		return tp_seterr(m, TP_EINVAL, "opts.job_class %d is not a job class",
		                 (int)o->job_class);
	if (!isfinite(o->checkpoint_s) || o->checkpoint_s < 0)
		return tp_seterr(m, TP_EINVAL, "opts.checkpoint_s %g is not a finite number >= 0",
		                 o->checkpoint_s);
	const char *why;
	if (o->tenant && (why = tp_name_problem(o->tenant, false)))
		return tp_seterr(m, TP_EINVAL, "opts.tenant %s", why);
	return o->shape ? check_shape(c, o->shape) : 0;
}

/* Every id in range. */
static int check_dev_range(struct tp_cluster *c, const uint32_t *devs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (devs[i] >= c->t->ndevices)
			return tp_seterr(c->errmsg, TP_EINVAL,
			                 "devices[%zu] %u is out of range (the topology has %u devices)",
			                 i, devs[i], c->t->ndevices);
	return 0;
}

/* No device twice: mark each in dstate while walking, then clear the marks. */
static int check_dev_unique(struct tp_cluster *c, const uint32_t *devs, size_t n)
{
	size_t dup = n;
	for (size_t i = 0; i < n && dup == n; i++) {
		if (c->dstate[devs[i]] & TP_DS_MARK)
			dup = i;
		else
			c->dstate[devs[i]] |= TP_DS_MARK;
	}
	for (size_t i = 0; i < dup; i++)
		c->dstate[devs[i]] &= (uint8_t)~TP_DS_MARK;
	if (dup == n)
		return 0;
	size_t first = 0;
	while (devs[first] != devs[dup])
		first++;
	char name[TP_DEVNAME_LEN];
	tp_cl_dev_name(c->t, devs[dup], name, sizeof name);
	return tp_seterr(c->errmsg, TP_EINVAL, "devices[%zu] %s is listed twice (first at [%zu])",
	                 dup, name, first);
}

static int check_dev_not_held(struct tp_cluster *c, const uint32_t *devs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t s = c->dev_job[devs[i]];
		if (s != TP_NO_JOB) {
			char name[TP_DEVNAME_LEN];
			tp_cl_dev_name(c->t, devs[i], name, sizeof name);
			return tp_seterr(c->errmsg, TP_EEXIST, "devices[%zu] %s is held by job '%s'",
			                 i, name, c->jobs[s]->id);
		}
	}
	return 0;
}

static int check_devices(struct tp_cluster *c, const uint32_t *devs, size_t n)
{
	if (n && !devs)
		return tp_seterr(c->errmsg, TP_EINVAL, "devices is NULL but n is %zu", n);
	return check_dev_range(c, devs, n);
}

/* ---- assign / release / health ------------------------------------------------------------- */

static int assign_checked(tp_cluster *c, const char *job, const uint32_t *devices, size_t n,
                          const tp_job_options *opts)
{
	const char *why = tp_name_problem(job, false);
	if (why)
		return tp_seterr(c->errmsg, TP_EINVAL, "job id %s", why);
	if (n == 0)
		return tp_seterr(c->errmsg, TP_EINVAL, "job '%s': n is 0 (a job holds a device)", job);
	int rc;
	if ((rc = tp_cluster_check_job_options(c, opts)) || (rc = check_devices(c, devices, n)) ||
	    (rc = check_dev_unique(c, devices, n)))
		return rc;
	if (tp_cluster_job_slot(c, job) != TP_NO_JOB)
		return tp_seterr(c->errmsg, TP_EEXIST, "job '%s' is already running", job);
	if ((rc = check_dev_not_held(c, devices, n)))
		return rc;
	return tp_cluster_assign_impl(c, job, devices, n, opts);
}

int tp_cluster_assign(tp_cluster *c, const char *job, const uint32_t *devices, size_t n,
                      const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, assign_checked(c, job, devices, n, opts));
}

static int release_job(tp_cluster *c, const char *job)
{
	if (!job)
		return tp_seterr(c->errmsg, TP_EINVAL, "job id is NULL");
	uint32_t slot = tp_cluster_job_slot(c, job);
	if (slot == TP_NO_JOB)
		return tp_seterr(c->errmsg, TP_ENOTFOUND, "job '%s' is not running", job);
	if (tp_cl_undo_reserve(c, 1 + tp_cl_spare_need(c, c->jobs[slot]->ndev)))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory releasing job '%s'", job);
	tp_cl_idx_repair(c);
	struct tp_job_impl *j = tp_cl_release_slot(c, slot);
	tp_cl_spare_upkeep(c, j->devs, j->ndev);
	if (c->nsp)
		tp_cl_undo_push(c, (struct tp_undo){.kind = TP_UNDO_RELEASE, .slot = slot, .job = j});
	else
		tp_cl_job_free(c, j);
	tp_cl_map_sweep(c);
	c->generation = ++c->generations;
	return 0;
}

int tp_cluster_release(tp_cluster *c, const char *job)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, release_job(c, job));
}

/* Set or clear one health bit on devices; those already so are left alone. */
static int set_health_bits(struct tp_cluster *c, const uint32_t *devs, size_t n, uint8_t bit,
                           int on)
{
	int rc = check_devices(c, devs, n);
	if (rc)
		return rc;
	uint8_t value = on ? bit : 0;
	size_t changes = 0;
	for (size_t i = 0; i < n; i++)
		changes += (c->dstate[devs[i]] & bit) != value;
	if (!changes)
		return 0;
	if (tp_cl_undo_reserve(c, changes + tp_cl_spare_need(c, n)))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory changing %zu devices", n);
	tp_cl_idx_repair(c);
	struct devop op = {.kind = OP_HEALTH, .mask = bit, .value = value, .log = c->nsp > 0};
	tp_cl_apply_devs(c, devs, n, &op);
	tp_cl_spare_upkeep(c, devs, n);
	c->generation = ++c->generations;
	return 0;
}

static int set_health(struct tp_cluster *c, const uint32_t *devs, size_t n, uint8_t bit,
                      int on)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, set_health_bits(c, devs, n, bit, on));
}

int tp_cluster_set_down(tp_cluster *c, const uint32_t *devices, size_t n, int down)
{
	return set_health(c, devices, n, TP_DS_DOWN, down);
}

int tp_cluster_set_cordoned(tp_cluster *c, const uint32_t *devices, size_t n, int cordoned)
{
	return set_health(c, devices, n, TP_DS_CORDONED, cordoned);
}

/* ---- memory -------------------------------------------------------------------------------- */

size_t tp_cluster_memory(const tp_cluster *c)
{
	if (!c)
		return 0;
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	size_t m = sizeof *c + (size_t)t->ndevices * (sizeof *c->dstate + sizeof *c->dev_job +
	                                              sizeof *c->dev_nic);
	for (unsigned l = 0; l <= nl; l++) {
		m += (size_t)t->lv[l].ndom * 2 * sizeof(uint32_t); /* free, spare_devs */
		if (l < nl) /* free_nodes, spare_nodes, hist, ckhist */
			m += (size_t)t->lv[l].ndom * (2 + c->hstride + TP_CK_BUCKETS) * sizeof(uint32_t);
		m += Judy1MemUsed(c->index[l]);
	}
	m += c->cap_jobs * sizeof *c->jobs + c->cap_undo * sizeof *c->undo +
	     c->cap_sp * sizeof *c->sp;
	/* JudySL keeps about the key plus two words per entry: an estimate, Judy does not say. */
	for (size_t i = 0; i < c->njobs; i++) {
		const struct tp_job_impl *j = c->jobs[i];
		m += j->bytes + strlen(j->id) + 2 * sizeof(Word_t);
		if (j->devs_separate)
			m += (size_t)j->ndev * sizeof(uint32_t);
		if (j->shape)
			m += sizeof(tp_request);
		if (j->nic)
			m += (size_t)j->ndev * sizeof *j->nic;
		m += (size_t)j->nparts * sizeof *j->parts;
	}
	if (c->part_level >= 0)
		m += (size_t)t->nnodes * sizeof *c->part_job +
		     (size_t)t->lv[c->part_level].ndom *
		         ((size_t)c->part_words * sizeof *c->part_bits + sizeof *c->part_used);
	m += c->ntomb * (TP_MAX_NAME / 8 + 2 * sizeof(Word_t));
	for (size_t i = 0; i < c->nundo; i++) {
		const struct tp_undo *e = &c->undo[i];
		if (e->kind == TP_UNDO_RELEASE)
			m += e->job->bytes;
		else if (e->kind == TP_UNDO_REBIND && e->devs_separate)
			m += (size_t)e->ndev * sizeof(uint32_t);
	}
	return m;
}

int tp_job_options_init(tp_job_options *o, unsigned version)
{
	static const tp_job_options init = TP_JOB_OPTIONS_INIT;
	return tp_options_init(o, version == TP_JOB_OPTIONS_VERSION ? sizeof init : 0, &init, version);
}

int tp_cluster_options_init(tp_cluster_options *o, unsigned version)
{
	static const tp_cluster_options init = TP_CLUSTER_OPTIONS_INIT;
	return tp_options_init(o, version == TP_CLUSTER_OPTIONS_VERSION ? sizeof init : 0, &init, version);
}
