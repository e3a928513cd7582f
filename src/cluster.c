/* SPDX-License-Identifier: MIT */
/*
 * The mutable cluster state (cluster_impl.h has the layout).
 *
 * Every change goes through apply_devs(), which walks the devices in runs of one node, computes
 * the node's old and new free count once per run, and updates the ancestors' aggregates; the
 * Judy1 index of each touched domain is updated once, when the walk leaves that domain. Callers
 * validate and allocate first (undo log space included), so that once apply_devs() runs nothing
 * can fail any more.
 *
 * Judy allocates its nodes from the C library, outside our allocator, so a Judy1 update can
 * still fail in the middle of a change. Undoing half a change could fail the same way, so the
 * level's index is dropped instead (indexed[l] = false, readers scan) and rebuilt by the next
 * writing call; the state itself is always exact. The job map never fails mid-change: removals
 * that must stay reversible leave a tombstone (value 0) instead of deleting.
 */
#include "cluster_impl.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "request_data.h"

/* Transient dstate bit: the device was seen during validation (duplicate detection). */
#define TP_DS_MARK 0x80u
/* Room for "node/index" (a node name is at most TP_MAX_NAME bytes). */
#define TP_DEVNAME_LEN (TP_MAX_NAME + 16)

static const char tp_default_tenant[] = "default";

static inline Pvoid_t slot_value(uint32_t slot) { return (Pvoid_t)(uintptr_t)(slot + 1u); }

static void dev_name(const struct tp_topology *t, uint32_t dev, char *buf, size_t len)
{
	uint32_t node = t->dev_node[dev];
	snprintf(buf, len, "%s/%u", t->lv[tp_node_level(t)].dname[node],
	         (unsigned)(dev - t->dev_first[node]));
}

/* ---- the Judy1 index of domains by free count ---------------------------------------------- */

static inline Word_t idx_key(uint32_t nfree, uint32_t dom) { return (Word_t)nfree << 32 | dom; }

static void idx_drop(struct tp_cluster *c, unsigned l)
{
	JError_t err;
	Judy1FreeArray(&c->index[l], &err);
	c->index[l] = NULL;
	c->indexed[l] = false;
	c->index_lost = true;
}

/* Move domain dom of level l from free count `from` to `to` in the index. */
static void idx_move(struct tp_cluster *c, unsigned l, uint32_t dom, uint32_t from, uint32_t to)
{
	if (!c->indexed[l] || from == to)
		return;
	JError_t err;
	if (from && Judy1Unset(&c->index[l], idx_key(from, dom), &err) == JERR)
		goto fail;
	if (to && Judy1Set(&c->index[l], idx_key(to, dom), &err) == JERR)
		goto fail;
	return;
fail:
	idx_drop(c, l);
}

/* Build the index of level l from the free counts. */
static int idx_build(const struct tp_cluster *c, unsigned l, Pvoid_t *out)
{
	Pvoid_t arr = NULL;
	JError_t err;
	for (uint32_t d = 0; d < c->t->lv[l].ndom; d++) {
		uint32_t f = c->free[l][d];
		if (f && Judy1Set(&arr, idx_key(f, d), &err) == JERR) {
			Judy1FreeArray(&arr, &err);
			return TP_ENOMEM;
		}
	}
	*out = arr;
	return 0;
}

/* Rebuild indexes that a Judy failure dropped (best effort: they stay dropped on failure). */
static void idx_repair(struct tp_cluster *c)
{
	if (!c->index_lost)
		return;
	c->index_lost = false;
	for (unsigned l = 0; l < c->t->nlevels; l++) {
		if (!c->index_kept[l] || c->indexed[l])
			continue;
		if (idx_build(c, l, &c->index[l]) == 0)
			c->indexed[l] = true;
		else
			c->index_lost = true;
	}
}

/* ---- applying device changes ---------------------------------------------------------------- */

/* Per level above the node: the domain whose index update is pending, and its free count when
 * the walk entered it. */
struct batch {
	uint32_t dom[TP_MAX_LEVELS];
	uint32_t old[TP_MAX_LEVELS];
};

static void batch_init(struct batch *b)
{
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		b->dom[l] = TP_NONE;
}

static void batch_flush_level(struct tp_cluster *c, struct batch *b, unsigned l)
{
	uint32_t d = b->dom[l];
	if (d != TP_NONE) {
		idx_move(c, l, d, b->old[l], c->free[l][d]);
		b->dom[l] = TP_NONE;
	}
}

static void batch_end(struct tp_cluster *c, struct batch *b)
{
	for (unsigned l = 0; l < tp_node_level(c->t); l++)
		batch_flush_level(c, b, l);
}

/* A node's free count went from old to now: update it, its ancestors and the totals. */
static void node_changed(struct tp_cluster *c, struct batch *b, uint32_t node, uint32_t old,
                         uint32_t now)
{
	if (old == now)
		return;
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	uint32_t full = tp_node_ndev(t, node);
	c->free[nl][node] = now;
	c->nfree = c->nfree - old + now;
	if (nl == 0)
		idx_move(c, 0, node, old, now);
	int dfull = (now == full) - (old == full);
	uint32_t d = node;
	for (unsigned l = nl; l-- > 0;) {
		d = t->lv[l + 1].parent[d];
		if (b->dom[l] != d) {
			batch_flush_level(c, b, l);
			b->dom[l] = d;
			b->old[l] = c->free[l][d];
		}
		c->free[l][d] = c->free[l][d] - old + now;
		c->free_nodes[l][d] = (uint32_t)((int64_t)c->free_nodes[l][d] + dfull);
		uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
		h[old]--;
		h[now]++;
	}
}

/* k devices of a node were held (k > 0) or let go (k < 0) by a job of checkpoint bucket b. */
static void ck_changed(struct tp_cluster *c, uint32_t node, unsigned b, int64_t k)
{
	const struct tp_topology *t = c->t;
	uint32_t d = node;
	for (unsigned l = tp_node_level(t); l-- > 0;) {
		d = t->lv[l + 1].parent[d];
		uint32_t *h = c->ckhist[l] + (size_t)d * TP_CK_BUCKETS + b;
		*h = (uint32_t)((int64_t)*h + k);
	}
}

enum devop_kind {
	OP_HOLD,    /* dev_job = slot */
	OP_UNHOLD,  /* dev_job = TP_NO_JOB */
	OP_HEALTH   /* dstate = (dstate & ~mask) | value */
};

struct devop {
	enum devop_kind kind;
	uint32_t slot;
	unsigned ck; /* OP_HOLD, OP_UNHOLD: the job's checkpoint bucket */
	uint8_t mask, value;
	bool log; /* log the old health byte of every device that changes */
};

static void count_health(struct tp_cluster *c, uint8_t s, int sign)
{
	if (s & TP_DS_DOWN)
		c->ndown = (uint32_t)((int64_t)c->ndown + sign);
	else if (s & TP_DS_CORDONED)
		c->ncordoned = (uint32_t)((int64_t)c->ncordoned + sign);
}

static void undo_push(struct tp_cluster *c, struct tp_undo e)
{
	assert(c->nundo < c->cap_undo);
	c->undo[c->nundo++] = e;
}

/* Apply a health change to one device; returns the change of the node's free count. */
static int dev_health(struct tp_cluster *c, uint32_t dev, const struct devop *op)
{
	uint8_t s = c->dstate[dev];
	uint8_t ns = (uint8_t)((s & ~op->mask) | (op->value & op->mask));
	if (ns == s)
		return 0;
	bool was = tp_dev_free(c, dev);
	if (op->log)
		undo_push(c, (struct tp_undo){.kind = TP_UNDO_HEALTH, .dev = dev, .old = s});
	count_health(c, s, -1);
	count_health(c, ns, +1);
	c->dstate[dev] = ns;
	return (int)tp_dev_free(c, dev) - (int)was;
}

/* Apply op to the run of devs[*i..] on one node; returns the node's new free count. One loop
 * per kind: this is the hot path of every change. */
static uint32_t apply_run(struct tp_cluster *c, const uint32_t *devs, size_t n, size_t *i,
                          uint32_t node, uint32_t nfree, const struct devop *op)
{
	const uint32_t *dev_node = c->t->dev_node;
	size_t k = *i;
	switch (op->kind) {
	case OP_HOLD:
		for (; k < n && dev_node[devs[k]] == node; k++) {
			assert(c->dev_job[devs[k]] == TP_NO_JOB); /* held twice, or listed twice */
			nfree -= tp_dev_free(c, devs[k]);
			c->dev_job[devs[k]] = op->slot;
		}
		break;
	case OP_UNHOLD:
		for (; k < n && dev_node[devs[k]] == node; k++) {
			assert(c->dev_job[devs[k]] != TP_NO_JOB);
			c->dev_job[devs[k]] = TP_NO_JOB;
			nfree += c->dstate[devs[k]] == 0;
		}
		break;
	case OP_HEALTH:
		for (; k < n && dev_node[devs[k]] == node; k++)
			nfree = (uint32_t)((int64_t)nfree + dev_health(c, devs[k], op));
		break;
	}
	*i = k;
	return nfree;
}

/* Apply op to devs, in runs of one node, keeping every aggregate and index current. Job device
 * lists (OP_HOLD, OP_UNHOLD) never list a device twice. */
static void apply_devs(struct tp_cluster *c, const uint32_t *devs, size_t n,
                       const struct devop *op)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	struct batch b;
	batch_init(&b);
	size_t i = 0;
	while (i < n) {
		uint32_t node = t->dev_node[devs[i]];
		uint32_t old = c->free[nl][node];
		size_t i0 = i;
		uint32_t now = apply_run(c, devs, n, &i, node, old, op);
		node_changed(c, &b, node, old, now);
		if (op->kind != OP_HEALTH)
			ck_changed(c, node, op->ck,
			           op->kind == OP_HOLD ? (int64_t)(i - i0) : -(int64_t)(i - i0));
	}
	batch_end(c, &b);
}

/* The job at slot `from` now sits at slot `to`: its devices say so. */
static void relabel(struct tp_cluster *c, const struct tp_job_impl *job, uint32_t to)
{
	for (uint32_t i = 0; i < job->ndev; i++)
		c->dev_job[job->devs[i]] = to;
}

/* ---- GPU+NIC pairing ---------------------------------------------------------------------- */

const struct tp_nodetype *tp_pairable_type(const struct tp_topology *t, uint32_t node)
{
	uint16_t ty = t->node_type ? t->node_type[node] : TP_NO_TYPE;
	const struct tp_nodetype *nt = ty != TP_NO_TYPE ? t->types[ty] : NULL;
	return nt && nt->nnic > 0 && nt->ngpus == tp_node_ndev(t, node) ? nt : NULL;
}

/* The best rank of a NIC for GPU g (tp_nodetype_nic_rank): the GPU may pair with the NICs of
 * that rank only. */
static int gpu_anchor(const struct tp_nodetype *nt, unsigned g)
{
	unsigned best = UINT32_MAX;
	for (unsigned n = 0; n < nt->nnic; n++) {
		unsigned r = tp_nodetype_nic_rank(nt, g, n);
		best = r < best ? r : best;
	}
	return (int)best;
}

void tp_pairing_init(struct tp_pairing *pr, const struct tp_nodetype *nt, int *gpu_of,
                     unsigned char *seen)
{
	pr->nt = nt;
	pr->gpu_of = gpu_of;
	pr->seen = seen;
	for (unsigned n = 0; n < nt->nnic; n++)
		pr->gpu_of[n] = -1;
	for (unsigned g = 0; g < nt->ngpus; g++) {
		pr->anchor[g] = gpu_anchor(nt, g);
		pr->nic_of[g] = -1;
	}
}

static bool pair_augment(struct tp_pairing *pr, unsigned g)
{
	const struct tp_nodetype *nt = pr->nt;
	for (unsigned n = 0; n < nt->nnic; n++) {
		if (pr->seen[n] || pr->gpu_of[n] == TP_NIC_BLOCKED ||
		    tp_nodetype_nic_rank(nt, g, n) != (unsigned)pr->anchor[g])
			continue;
		pr->seen[n] = 1;
		if (pr->gpu_of[n] < 0 || pair_augment(pr, (unsigned)pr->gpu_of[n])) {
			pr->gpu_of[n] = (int)g;
			pr->nic_of[g] = (int)n;
			return true;
		}
	}
	return false;
}

bool tp_pair_gpu(struct tp_pairing *pr, unsigned g)
{
	if (pr->nic_of[g] >= 0)
		return true;
	memset(pr->seen, 0, pr->nt->nnic);
	return pair_augment(pr, g);
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

static bool shape_pairs(const tp_request *shape)
{
	return shape && shape->version >= 2 && shape->gpu_nic_pairs;
}

/* Record (on) or clear a job's NICs in dev_nic. */
static void nic_apply(struct tp_cluster *c, const struct tp_job_impl *job, bool on)
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
static void map_set(struct tp_cluster *c, const char *id, uint32_t slot)
{
	JError_t err;
	PPvoid_t p = JudySLGet(c->job_by_id, (const uint8_t *)id, &err);
	assert(p && p != PPJERR);
	if (!*p)
		c->ntomb--;
	*p = slot_value(slot);
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
static void map_sweep(struct tp_cluster *c)
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

static void job_free(const struct tp_cluster *c, struct tp_job_impl *job)
{
	if (!job)
		return;
	if (job->devs_separate)
		tp_free(&c->alloc, job->devs);
	tp_request_free(&c->alloc, job->shape);
	tp_free(&c->alloc, job->nic);
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
	if (shape_pairs(shape) && !(nic = job_nics(c, TP_NO_JOB, devs, n))) {
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
		.bytes = bytes,
	};
	return job;
}

/* Make room for k more undo entries when a savepoint is open. */
static int undo_reserve(struct tp_cluster *c, size_t k)
{
	if (c->nsp == 0)
		return 0;
	if (k > SIZE_MAX - c->nundo)
		return TP_ENOMEM;
	return tp_grow(&c->alloc, (void **)&c->undo, &c->cap_undo, c->nundo + k, sizeof *c->undo);
}

/* Free what the log entries own (the changes stay). */
static void undo_drop(struct tp_cluster *c, size_t from)
{
	for (size_t i = from; i < c->nundo; i++) {
		struct tp_undo *e = &c->undo[i];
		if (e->kind == TP_UNDO_RELEASE)
			job_free(c, e->job);
		else if (e->kind == TP_UNDO_REBIND) {
			if (e->devs_separate)
				tp_free(&c->alloc, e->devs);
			tp_free(&c->alloc, e->nic);
		}
	}
	c->nundo = from;
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
	if (tp_grow(&c->alloc, (void **)&c->jobs, &c->cap_jobs, c->njobs + 1, sizeof *c->jobs) ||
	    undo_reserve(c, 1))
		goto nomem;
	JError_t err;
	PPvoid_t p = JudySLGet(c->job_by_id, (const uint8_t *)id, &err);
	if (p && p != PPJERR) {
		assert(!*p);
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
	job_free(c, job);
	return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory assigning job '%s'", id);
}

static void assign_apply(struct tp_cluster *c, struct tp_job_impl *job, PPvoid_t slotp)
{
	uint32_t slot = (uint32_t)c->njobs++;
	c->jobs[slot] = job;
	c->nexclusive += tp_job_exclusive(job);
	c->npairs += job->nic != NULL;
	*slotp = slot_value(slot);
	struct devop op = {.kind = OP_HOLD, .slot = slot, .ck = tp_ck_bucket(job->checkpoint_s)};
	apply_devs(c, job->devs, job->ndev, &op);
	nic_apply(c, job, true);
	if (c->nsp)
		undo_push(c, (struct tp_undo){.kind = TP_UNDO_ASSIGN, .slot = slot, .job = job});
	c->generation = ++c->generations;
}

int tp_cluster_assign_impl(struct tp_cluster *c, const char *id, const uint32_t *devs, size_t n,
                           const tp_job_options *opts)
{
	assert(tp_cluster_job_slot(c, id) == TP_NO_JOB && n >= 1);
	idx_repair(c);
	struct tp_job_impl *job = NULL;
	PPvoid_t slotp = NULL;
	int rc = assign_prepare(c, id, devs, n, opts, &job, &slotp);
	if (rc)
		return rc;
	assign_apply(c, job, slotp);
	return 0;
}

/* Take the job out of its slot; the last job moves into the slot. Returns the job, which the
 * caller frees or hands to the undo log. */
static struct tp_job_impl *release_slot(struct tp_cluster *c, uint32_t slot)
{
	struct tp_job_impl *job = c->jobs[slot];
	struct devop op = {.kind = OP_UNHOLD, .ck = tp_ck_bucket(job->checkpoint_s)};
	apply_devs(c, job->devs, job->ndev, &op);
	nic_apply(c, job, false);
	map_remove(c, job->id);
	c->nexclusive -= tp_job_exclusive(job);
	c->npairs -= job->nic != NULL;
	uint32_t last = (uint32_t)--c->njobs;
	if (slot != last) {
		c->jobs[slot] = c->jobs[last];
		relabel(c, c->jobs[slot], slot);
		map_set(c, c->jobs[slot]->id, slot);
	}
	c->jobs[last] = NULL;
	return job;
}

int tp_cluster_rebind_impl(struct tp_cluster *c, uint32_t slot, const uint32_t *devs, size_t n)
{
	assert(slot < c->njobs && n >= 1);
	idx_repair(c);
	uint32_t *nd = tp_mallocn(&c->alloc, n, sizeof *nd);
	int16_t *nic = NULL;
	if (nd && c->jobs[slot]->nic && !(nic = job_nics(c, slot, devs, n))) {
		tp_free(&c->alloc, nd);
		nd = NULL;
	}
	if (!nd || undo_reserve(c, 1)) {
		tp_free(&c->alloc, nd);
		tp_free(&c->alloc, nic);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory moving job '%s'",
		                 c->jobs[slot]->id);
	}
	memcpy(nd, devs, n * sizeof *nd);
	struct tp_job_impl *job = c->jobs[slot];
	unsigned ck = tp_ck_bucket(job->checkpoint_s);
	struct devop unhold = {.kind = OP_UNHOLD, .ck = ck},
	             hold = {.kind = OP_HOLD, .slot = slot, .ck = ck};
	apply_devs(c, job->devs, job->ndev, &unhold);
	nic_apply(c, job, false);
	struct tp_undo e = {.kind = TP_UNDO_REBIND, .slot = slot, .devs = job->devs,
	                    .ndev = job->ndev, .devs_separate = job->devs_separate,
	                    .nic = job->nic};
	job->devs = nd;
	job->ndev = (uint32_t)n;
	job->devs_separate = true;
	job->nic = nic;
	apply_devs(c, nd, n, &hold);
	nic_apply(c, job, true);
	if (c->nsp)
		undo_push(c, e);
	else {
		if (e.devs_separate)
			tp_free(&c->alloc, e.devs);
		tp_free(&c->alloc, e.nic);
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
		if (!c->free[l])
			return TP_ENOMEM;
		if (l == nl)
			break;
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
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!t || !tp_alloc_valid(alloc))
		return TP_EINVAL;
	tp_allocator a = tp_alloc_resolve(alloc);
	struct tp_cluster *c = tp_calloc(&a, 1, sizeof *c);
	if (!c)
		return TP_ENOMEM;
	c->alloc = a;
	c->t = t;
	c->hstride = t->max_node_devices + 1;
	if (create_arrays(c))
		goto nomem;
	init_aggregates(c);
	unsigned nl = tp_node_level(t);
	for (unsigned l = 0; l <= nl; l++) {
		c->index_kept[l] = l < nl || nl == 0;
		if (c->index_kept[l]) {
			if (idx_build(c, l, &c->index[l]))
				goto nomem;
			c->indexed[l] = true;
		}
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
	undo_drop(c, 0);
	for (size_t i = 0; i < c->njobs; i++)
		job_free(c, c->jobs[i]);
	JudySLFreeArray(&c->job_by_id, &err);
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		Judy1FreeArray(&c->index[l], &err);
		tp_free(&c->alloc, c->free[l]);
		tp_free(&c->alloc, c->free_nodes[l]);
		tp_free(&c->alloc, c->hist[l]);
		tp_free(&c->alloc, c->ckhist[l]);
	}
	tp_free(&c->alloc, c->jobs);
	tp_free(&c->alloc, c->undo);
	tp_free(&c->alloc, c->sp);
	tp_free(&c->alloc, c->dstate);
	tp_free(&c->alloc, c->dev_job);
	tp_free(&c->alloc, c->dev_nic);
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
	dev_name(c->t, devs[dup], name, sizeof name);
	return tp_seterr(c->errmsg, TP_EINVAL, "devices[%zu] %s is listed twice (first at [%zu])",
	                 dup, name, first);
}

static int check_dev_not_held(struct tp_cluster *c, const uint32_t *devs, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t s = c->dev_job[devs[i]];
		if (s != TP_NO_JOB) {
			char name[TP_DEVNAME_LEN];
			dev_name(c->t, devs[i], name, sizeof name);
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

int tp_cluster_assign(tp_cluster *c, const char *job, const uint32_t *devices, size_t n,
                      const tp_job_options *opts)
{
	if (!c)
		return TP_EINVAL;
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

int tp_cluster_release(tp_cluster *c, const char *job)
{
	if (!c)
		return TP_EINVAL;
	if (!job)
		return tp_seterr(c->errmsg, TP_EINVAL, "job id is NULL");
	uint32_t slot = tp_cluster_job_slot(c, job);
	if (slot == TP_NO_JOB)
		return tp_seterr(c->errmsg, TP_ENOTFOUND, "job '%s' is not running", job);
	if (undo_reserve(c, 1))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory releasing job '%s'", job);
	idx_repair(c);
	struct tp_job_impl *j = release_slot(c, slot);
	if (c->nsp)
		undo_push(c, (struct tp_undo){.kind = TP_UNDO_RELEASE, .slot = slot, .job = j});
	else
		job_free(c, j);
	map_sweep(c);
	c->generation = ++c->generations;
	return 0;
}

/* Set or clear one health bit on devices; those already so are left alone. */
static int set_health(struct tp_cluster *c, const uint32_t *devs, size_t n, uint8_t bit,
                      int on)
{
	if (!c)
		return TP_EINVAL;
	int rc = check_devices(c, devs, n);
	if (rc)
		return rc;
	uint8_t value = on ? bit : 0;
	size_t changes = 0;
	for (size_t i = 0; i < n; i++)
		changes += (c->dstate[devs[i]] & bit) != value;
	if (!changes)
		return 0;
	if (undo_reserve(c, changes))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory changing %zu devices", n);
	idx_repair(c);
	struct devop op = {.kind = OP_HEALTH, .mask = bit, .value = value, .log = c->nsp > 0};
	apply_devs(c, devs, n, &op);
	c->generation = ++c->generations;
	return 0;
}

int tp_cluster_set_down(tp_cluster *c, const uint32_t *devices, size_t n, int down)
{
	return set_health(c, devices, n, TP_DS_DOWN, down);
}

int tp_cluster_set_cordoned(tp_cluster *c, const uint32_t *devices, size_t n, int cordoned)
{
	return set_health(c, devices, n, TP_DS_CORDONED, cordoned);
}

/* ---- queries ------------------------------------------------------------------------------- */

static bool dom_valid(const tp_cluster *c, unsigned level, uint32_t dom)
{
	return c && level < c->t->nlevels && dom < c->t->lv[level].ndom;
}

uint32_t tp_cluster_free(const tp_cluster *c, unsigned level, uint32_t dom)
{
	return dom_valid(c, level, dom) ? c->free[level][dom] : 0;
}

uint32_t tp_cluster_free_total(const tp_cluster *c)
{
	return c ? c->nfree : 0;
}

uint32_t tp_cluster_free_nodes(const tp_cluster *c, unsigned level, uint32_t dom)
{
	if (!dom_valid(c, level, dom))
		return 0;
	if (level == tp_node_level(c->t))
		return c->free[level][dom] == tp_node_ndev(c->t, dom);
	return c->free_nodes[level][dom];
}

int tp_cluster_node_histogram(const tp_cluster *c, unsigned level, uint32_t dom,
                              uint32_t *hist, size_t n)
{
	if (!dom_valid(c, level, dom) || (n && !hist))
		return TP_EINVAL;
	if (n)
		memset(hist, 0, n * sizeof *hist);
	if (level == tp_node_level(c->t)) {
		uint32_t f = c->free[level][dom];
		if (f < n)
			hist[f] = 1;
		return (int)f;
	}
	const uint32_t *h = c->hist[level] + (size_t)dom * c->hstride;
	for (size_t k = 0; k < n && k < c->hstride; k++)
		hist[k] = h[k];
	for (uint32_t k = c->hstride; k-- > 1;)
		if (h[k])
			return (int)k;
	return 0;
}

/* Without an index (a lost one): the linear scan the index normally saves. */
static int tightest_scan(const tp_cluster *c, unsigned level, uint32_t min_free, uint32_t *dom)
{
	uint32_t best = TP_NONE, bestf = 0;
	for (uint32_t d = 0; d < c->t->lv[level].ndom; d++) {
		uint32_t f = c->free[level][d];
		if (f >= min_free && (best == TP_NONE || f < bestf)) {
			best = d;
			bestf = f;
		}
	}
	if (best == TP_NONE)
		return TP_ENOTFOUND;
	*dom = best;
	return 0;
}

/* The smallest k >= min_free with hist[k] > 0 in domain d of level l, or 0. */
static uint32_t hist_least_at_least(const tp_cluster *c, unsigned l, uint32_t d,
                                    uint32_t min_free)
{
	const uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
	for (uint32_t k = min_free; k < c->hstride; k++)
		if (h[k])
			return k;
	return 0;
}

/* The node level is not indexed (the node count is large, and a rack's nodes are few): find
 * the smallest qualifying free count from the top-level histograms, then descend into the
 * first domain holding such a node at every level. Scans top-level domains and the children
 * on one path, never all nodes. */
static int tightest_node(const tp_cluster *c, uint32_t min_free, uint32_t *dom)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	if (min_free >= c->hstride)
		return TP_ENOTFOUND;
	uint32_t k = 0, d = TP_NONE;
	for (uint32_t i = 0; i < t->lv[0].ndom; i++) {
		uint32_t ki = hist_least_at_least(c, 0, i, min_free);
		if (ki && (!k || ki < k)) {
			k = ki;
			d = i;
		}
	}
	if (!k)
		return TP_ENOTFOUND;
	for (unsigned l = 1; l < nl; l++) {
		uint32_t first = t->lv[l - 1].child_first[d], end = t->lv[l - 1].child_first[d + 1];
		for (d = first; d < end && !c->hist[l][(size_t)d * c->hstride + k]; d++)
			;
		assert(d < end);
	}
	uint32_t first, nn;
	tp_dom_nodes(t, nl - 1, d, &first, &nn);
	for (uint32_t node = first; node < first + nn; node++)
		if (c->free[nl][node] == k) {
			*dom = node;
			return 0;
		}
	assert(0 && "histogram disagrees with node counts");
	return TP_ENOTFOUND;
}

int tp_cluster_tightest(const tp_cluster *c, unsigned level, uint32_t min_free, uint32_t *dom)
{
	if (!c || !dom || level >= c->t->nlevels || min_free == 0)
		return TP_EINVAL;
	if (c->indexed[level]) {
		Word_t key = idx_key(min_free, 0);
		JError_t err;
		if (Judy1First(c->index[level], &key, &err) != 1)
			return TP_ENOTFOUND;
		*dom = (uint32_t)(key & UINT32_MAX);
		return 0;
	}
	if (level == tp_node_level(c->t) && level > 0)
		return tightest_node(c, min_free, dom);
	return tightest_scan(c, level, min_free, dom);
}

int tp_cluster_device_state(const tp_cluster *c, uint32_t dev, const char **job)
{
	if (job)
		*job = NULL;
	if (!c || dev >= c->t->ndevices)
		return TP_EINVAL;
	uint32_t s = c->dev_job[dev];
	if (s != TP_NO_JOB) {
		if (job)
			*job = c->jobs[s]->id;
		return TP_DEVICE_HELD;
	}
	if (c->dstate[dev] & TP_DS_DOWN)
		return TP_DEVICE_DOWN;
	if (c->dstate[dev] & TP_DS_CORDONED)
		return TP_DEVICE_CORDONED;
	return TP_DEVICE_FREE;
}

int tp_cluster_device_down(const tp_cluster *c, uint32_t dev)
{
	if (!c || dev >= c->t->ndevices)
		return TP_EINVAL;
	return (c->dstate[dev] & TP_DS_DOWN) != 0;
}

int tp_cluster_device_cordoned(const tp_cluster *c, uint32_t dev)
{
	if (!c || dev >= c->t->ndevices)
		return TP_EINVAL;
	return (c->dstate[dev] & TP_DS_CORDONED) != 0;
}

uint32_t tp_cluster_down_total(const tp_cluster *c)
{
	return c ? c->ndown : 0;
}

uint32_t tp_cluster_cordoned_total(const tp_cluster *c)
{
	return c ? c->ncordoned : 0;
}

size_t tp_cluster_job_count(const tp_cluster *c)
{
	return c ? c->njobs : 0;
}

const char *tp_cluster_job_at(const tp_cluster *c, size_t i)
{
	return c && i < c->njobs ? c->jobs[i]->id : NULL;
}

int tp_cluster_job_devices(const tp_cluster *c, const char *job, const uint32_t **devices,
                           size_t *n)
{
	if (!c || !job || !devices || !n)
		return TP_EINVAL;
	uint32_t s = tp_cluster_job_slot(c, job);
	if (s == TP_NO_JOB)
		return TP_ENOTFOUND;
	*devices = c->jobs[s]->devs;
	*n = c->jobs[s]->ndev;
	return 0;
}

int tp_cluster_job_options(const tp_cluster *c, const char *job, tp_job_options *opts)
{
	if (!c || !job || !opts || opts->version != TP_JOB_OPTIONS_VERSION)
		return TP_EINVAL;
	uint32_t s = tp_cluster_job_slot(c, job);
	if (s == TP_NO_JOB)
		return TP_ENOTFOUND;
	const struct tp_job_impl *j = c->jobs[s];
	opts->job_class = j->job_class;
	opts->priority = j->priority;
	opts->tenant = j->tenant;
	opts->preemptible = j->preemptible;
	opts->migratable = j->migratable;
	opts->checkpoint_s = j->checkpoint_s;
	opts->shape = j->shape;
	return 0;
}

/* ---- fingerprint --------------------------------------------------------------------------- */

/* Little-endian serialisation into a buffer flushed to an XXH3 stream, so that the value is
 * the same on every machine. */
struct hbuf {
	XXH3_state_t *st;
	unsigned char b[4096];
	size_t n;
};

static void hb_flush(struct hbuf *h)
{
	XXH3_64bits_update(h->st, h->b, h->n);
	h->n = 0;
}

static void hb_u64(struct hbuf *h, uint64_t v)
{
	if (h->n + 8 > sizeof h->b)
		hb_flush(h);
	for (int i = 0; i < 8; i++)
		h->b[h->n++] = (unsigned char)(v >> (8 * i));
}

static void hb_u8(struct hbuf *h, uint8_t v)
{
	if (h->n + 1 > sizeof h->b)
		hb_flush(h);
	h->b[h->n++] = v;
}

static void hb_f64(struct hbuf *h, double v)
{
	uint64_t u;
	memcpy(&u, &v, sizeof u);
	hb_u64(h, u);
}

/* A string with its length (NULL differs from ""). */
static void hb_str(struct hbuf *h, const char *s)
{
	if (!s) {
		hb_u64(h, UINT64_MAX);
		return;
	}
	size_t len = strlen(s);
	hb_u64(h, len);
	hb_flush(h);
	XXH3_64bits_update(h->st, s, len);
}

static void hash_shape(struct hbuf *h, const tp_request *r)
{
	hb_u8(h, r != NULL);
	if (!r)
		return;
	hb_str(h, r->id);
	hb_u64(h, (uint64_t)r->job_class);
	hb_u64(h, (uint64_t)(int64_t)r->priority);
	hb_str(h, r->tenant);
	hb_u64(h, r->count);
	hb_u64(h, r->group_size);
	hb_str(h, r->group_level);
	hb_str(h, r->required);
	hb_str(h, r->preferred);
	hb_u64(h, r->nslices);
	for (size_t i = 0; i < r->nslices; i++) {
		hb_str(h, r->slices[i].level);
		hb_u64(h, r->slices[i].size);
	}
	hb_u64(h, (uint64_t)r->balanced);
	hb_u64(h, r->ncaps);
	for (size_t i = 0; i < r->ncaps; i++) {
		hb_str(h, r->caps[i].level);
		hb_u64(h, r->caps[i].devices);
		hb_u64(h, r->caps[i].groups);
	}
	hb_str(h, r->spread_level);
	hb_u64(h, r->spread_min_domains);
	hb_str(h, r->colocate_job);
	hb_str(h, r->colocate_level);
	hb_str(h, r->exclusive);
	hb_str(h, r->select_model);
	hb_f64(h, r->select_min_perf);
	hb_f64(h, r->select_min_memory_gb);
	hb_u64(h, r->nselect_nodes);
	for (size_t i = 0; i < r->nselect_nodes; i++)
		hb_str(h, r->select_nodes[i]);
	/* version 2 (shapes are kept at the current version); hashed only when set, so that
	 * fingerprints of states without it are those of version 1 */
	if (r->gpu_nic_pairs)
		hb_u64(h, (uint64_t)r->gpu_nic_pairs);
}

/* Everything about one job (its rank order and attributes). */
static uint64_t job_digest(const struct tp_job_impl *j)
{
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset(&st);
	struct hbuf h = {.st = &st};
	hb_str(&h, j->id);
	hb_u64(&h, (uint64_t)j->job_class);
	hb_u64(&h, (uint64_t)(int64_t)j->priority);
	hb_str(&h, j->tenant);
	hb_u8(&h, j->preemptible);
	hb_u8(&h, j->migratable);
	hb_f64(&h, j->checkpoint_s);
	hb_u64(&h, j->ndev);
	for (uint32_t i = 0; i < j->ndev; i++)
		hb_u64(&h, j->devs[i]);
	hash_shape(&h, j->shape);
	/* the NICs a pairs job holds are state (they decide later pairings); hashed only when
	 * held, so that states without pairs jobs keep their fingerprints */
	for (uint32_t i = 0; j->nic && i < j->ndev; i++)
		hb_u64(&h, (uint64_t)(int64_t)j->nic[i]);
	hb_flush(&h);
	return XXH3_64bits_digest(&st);
}

/* Per device its health and holder, then the jobs' digests summed (the sum does not depend on
 * the order of the job slots, which does depend on history). */
uint64_t tp_cluster_fingerprint(const tp_cluster *c)
{
	if (!c)
		return 0;
	XXH3_state_t st;
	XXH3_INITSTATE(&st);
	XXH3_64bits_reset(&st);
	struct hbuf h = {.st = &st};
	hb_u64(&h, c->t->ndevices);
	for (uint32_t d = 0; d < c->t->ndevices; d++) {
		uint32_t s = c->dev_job[d];
		hb_u8(&h, c->dstate[d]);
		hb_u64(&h, s == TP_NO_JOB ? 0 : c->jobs[s]->id_hash);
	}
	uint64_t sum = 0;
	for (size_t i = 0; i < c->njobs; i++)
		sum += job_digest(c->jobs[i]);
	hb_u64(&h, c->njobs);
	hb_u64(&h, sum);
	hb_flush(&h);
	return XXH3_64bits_digest(&st);
}

/* ---- consistency check --------------------------------------------------------------------- */

#define CHECK_FAIL(...)                                                                        \
	do {                                                                                       \
		if (buf && len)                                                                        \
			snprintf(buf, len, __VA_ARGS__);                                                   \
		return TP_ECORRUPT;                                                                    \
	} while (0)

/* Node counts and totals from the devices. */
static int check_devices_state(const tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	uint32_t nfree = 0, ndown = 0, ncord = 0;
	for (uint32_t node = 0; node < t->nnodes; node++) {
		uint32_t f = 0;
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++) {
			uint8_t s = c->dstate[d];
			if (s & ~(TP_DS_DOWN | TP_DS_CORDONED))
				CHECK_FAIL("device %u has stray state bits 0x%x", d, s);
			if (c->dev_job[d] != TP_NO_JOB && c->dev_job[d] >= c->njobs)
				CHECK_FAIL("device %u names job slot %u of %zu", d, c->dev_job[d],
				           c->njobs);
			f += tp_dev_free(c, d);
			ndown += (s & TP_DS_DOWN) != 0;
			ncord += s == TP_DS_CORDONED;
		}
		if (c->free[nl][node] != f)
			CHECK_FAIL("node %u: free %u, recounted %u", node, c->free[nl][node], f);
		nfree += f;
	}
	if (c->nfree != nfree)
		CHECK_FAIL("nfree %u, recounted %u", c->nfree, nfree);
	if (c->ndown != ndown)
		CHECK_FAIL("ndown %u, recounted %u", c->ndown, ndown);
	if (c->ncordoned != ncord)
		CHECK_FAIL("ncordoned %u, recounted %u", c->ncordoned, ncord);
	return 0;
}

/* free, free_nodes and hist of every domain above the node, from the node counts. */
static int check_domains(const tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	uint32_t cnt[TP_MAX_NODE_DEVICES + 1];
	for (unsigned l = 0; l < nl; l++) {
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t first, nn, f = 0, fn = 0;
			tp_dom_nodes(t, l, d, &first, &nn);
			const uint32_t *h = c->hist[l] + (size_t)d * c->hstride;
			uint32_t hsum = 0;
			for (uint32_t k = 0; k < c->hstride; k++)
				hsum += h[k];
			if (hsum != nn)
				CHECK_FAIL("level %u domain %u: histogram sums to %u, %u nodes", l, d, hsum,
				           nn);
			memset(cnt, 0, c->hstride * sizeof *cnt);
			for (uint32_t node = first; node < first + nn; node++) {
				uint32_t nf = c->free[nl][node];
				f += nf;
				fn += nf == tp_node_ndev(t, node);
				cnt[nf]++;
			}
			if (c->free[l][d] != f)
				CHECK_FAIL("level %u domain %u: free %u, recounted %u", l, d, c->free[l][d],
				           f);
			if (c->free_nodes[l][d] != fn)
				CHECK_FAIL("level %u domain %u: free_nodes %u, recounted %u", l, d,
				           c->free_nodes[l][d], fn);
			for (uint32_t k = 0; k < c->hstride; k++)
				if (h[k] != cnt[k])
					CHECK_FAIL("level %u domain %u: hist[%u] %u, recounted %u", l, d, k,
					           h[k], cnt[k]);
		}
	}
	return 0;
}

/* ckhist of every domain above the node, recounted from its devices' jobs. */
static int check_ckhist(const tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	uint32_t want[TP_CK_BUCKETS];
	for (unsigned l = 0; l < nl; l++)
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t first, nn;
			tp_dom_nodes(t, l, d, &first, &nn);
			memset(want, 0, sizeof want);
			for (uint32_t dev = t->dev_first[first]; dev < t->dev_first[first + nn]; dev++)
				if (c->dev_job[dev] < c->njobs)
					want[tp_ck_bucket(c->jobs[c->dev_job[dev]]->checkpoint_s)]++;
			const uint32_t *h = c->ckhist[l] + (size_t)d * TP_CK_BUCKETS;
			for (unsigned b = 0; b < TP_CK_BUCKETS; b++)
				if (h[b] != want[b])
					CHECK_FAIL("level %u domain %u: ckhist[%u] %u, recounted %u", l, d,
					           b, h[b], want[b]);
		}
	return 0;
}

static int check_indexes(const tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	JError_t err;
	for (unsigned l = 0; l < t->nlevels; l++) {
		if (!c->indexed[l]) {
			if (c->index_kept[l] && !c->index_lost)
				CHECK_FAIL("level %u: index missing", l);
			continue;
		}
		Word_t want = 0;
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t f = c->free[l][d];
			if (!f)
				continue;
			want++;
			if (Judy1Test(c->index[l], idx_key(f, d), &err) != 1)
				CHECK_FAIL("level %u domain %u: free %u missing from the index", l, d, f);
		}
		Word_t have = Judy1Count(c->index[l], 0, (Word_t)-1, &err);
		if (have != want)
			CHECK_FAIL("level %u: index holds %lu keys, %lu domains have free devices", l,
			           (unsigned long)have, (unsigned long)want);
	}
	return 0;
}

/* NICs: dev_nic agrees with the pairs jobs' NIC lists, the count of pairs jobs is right, and
 * no NIC of a node is paired with two devices. */
static int check_nics(const tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	uint64_t marked = 0, listed = 0;
	uint32_t pairs = 0;
	for (size_t s = 0; s < c->njobs; s++) {
		const struct tp_job_impl *j = c->jobs[s];
		if (!j->nic != !shape_pairs(j->shape))
			CHECK_FAIL("job '%s': NICs %s but its shape %s pairs", j->id,
			           j->nic ? "recorded" : "missing", j->nic ? "has no" : "asks for");
		pairs += j->nic != NULL;
		for (uint32_t i = 0; j->nic && i < j->ndev; i++) {
			if (c->dev_nic[j->devs[i]] != j->nic[i])
				CHECK_FAIL("job '%s' rank %u: NIC %d, the device says %d", j->id, i,
				           j->nic[i], c->dev_nic[j->devs[i]]);
			listed += j->nic[i] >= 0;
		}
	}
	if (pairs != c->npairs)
		CHECK_FAIL("%u jobs have NICs, the count says %u", pairs, c->npairs);
	for (uint32_t node = 0; node < t->nnodes; node++)
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++) {
			if (c->dev_nic[d] < 0)
				continue;
			marked++;
			for (uint32_t e = d + 1; e < t->dev_first[node + 1]; e++)
				if (c->dev_nic[e] == c->dev_nic[d])
					CHECK_FAIL("devices %u and %u share NIC %d", d, e, c->dev_nic[d]);
		}
	if (marked != listed)
		CHECK_FAIL("%llu devices have a NIC, the jobs list %llu",
		           (unsigned long long)marked, (unsigned long long)listed);
	return 0;
}

/* Jobs: the map, the slots, and dev_job agreeing with the job device lists. */
static int check_jobs(const tp_cluster *c, char *buf, size_t len)
{
	uint64_t held = 0, listed = 0;
	uint32_t exclusive = 0;
	for (uint32_t d = 0; d < c->t->ndevices; d++)
		held += c->dev_job[d] != TP_NO_JOB;
	for (size_t s = 0; s < c->njobs; s++) {
		const struct tp_job_impl *j = c->jobs[s];
		if (!j)
			CHECK_FAIL("job slot %zu is empty", s);
		exclusive += tp_job_exclusive(j);
		if (tp_cluster_job_slot(c, j->id) != s)
			CHECK_FAIL("job '%s' at slot %zu: the map says %u", j->id, s,
			           tp_cluster_job_slot(c, j->id));
		if (j->id_hash != XXH3_64bits(j->id, strlen(j->id)))
			CHECK_FAIL("job '%s': stale id hash", j->id);
		for (uint32_t i = 0; i < j->ndev; i++) {
			uint32_t d = j->devs[i];
			if (d >= c->t->ndevices || c->dev_job[d] != s)
				CHECK_FAIL("job '%s' devs[%u] %u is not held by it", j->id, i, d);
		}
		listed += j->ndev;
	}
	if (held != listed)
		CHECK_FAIL("%llu devices held, the jobs list %llu", (unsigned long long)held,
		           (unsigned long long)listed);
	if (exclusive != c->nexclusive)
		CHECK_FAIL("%u jobs hold domains exclusively, the count says %u", exclusive,
		           c->nexclusive);
	int rc = check_nics(c, buf, len);
	if (rc)
		return rc;
	uint8_t key[TP_MAX_NAME + 2];
	JError_t err;
	size_t live = 0, tomb = 0;
	key[0] = '\0';
	for (PPvoid_t p = JudySLFirst(c->job_by_id, key, &err); p && p != PPJERR;
	     p = JudySLNext(c->job_by_id, key, &err)) {
		if (*p)
			live++;
		else
			tomb++;
	}
	if (live != c->njobs || tomb != c->ntomb)
		CHECK_FAIL("job map: %zu ids and %zu tombstones, expected %zu and %zu", live, tomb,
		           c->njobs, c->ntomb);
	return 0;
}

int tp_cluster_check(const tp_cluster *c, char *buf, size_t len)
{
	if (!c)
		return TP_EINVAL;
	if (buf && len)
		buf[0] = '\0';
	int rc;
	if ((rc = check_devices_state(c, buf, len)) || (rc = check_domains(c, buf, len)) ||
	    (rc = check_ckhist(c, buf, len)) || (rc = check_indexes(c, buf, len)) ||
	    (rc = check_jobs(c, buf, len)))
		return rc;
	return 0;
}

/* ---- savepoints ---------------------------------------------------------------------------- */

int tp_cluster_savepoint(tp_cluster *c, size_t *sp)
{
	if (!c || !sp)
		return TP_EINVAL;
	if (tp_grow(&c->alloc, (void **)&c->sp, &c->cap_sp, c->nsp + 1, sizeof *c->sp))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory opening a savepoint");
	c->sp[c->nsp] = (struct tp_savepoint){.nundo = c->nundo, .generation = c->generation};
	*sp = c->nsp++;
	return 0;
}

static void undo_release(struct tp_cluster *c, struct tp_undo *e)
{
	uint32_t m = (uint32_t)c->njobs, s = e->slot;
	assert(c->njobs < c->cap_jobs && s <= m);
	if (s < m) {
		c->jobs[m] = c->jobs[s];
		relabel(c, c->jobs[m], m);
		map_set(c, c->jobs[m]->id, m);
	}
	c->jobs[s] = e->job;
	c->njobs = m + 1;
	c->nexclusive += tp_job_exclusive(e->job);
	c->npairs += e->job->nic != NULL;
	map_set(c, e->job->id, s);
	struct devop op = {.kind = OP_HOLD, .slot = s, .ck = tp_ck_bucket(e->job->checkpoint_s)};
	apply_devs(c, e->job->devs, e->job->ndev, &op);
	nic_apply(c, e->job, true);
	e->job = NULL; /* the cluster owns it again */
}

static void undo_assign(struct tp_cluster *c, struct tp_undo *e)
{
	assert(e->slot + 1 == c->njobs && c->jobs[e->slot] == e->job);
	struct tp_job_impl *j = release_slot(c, e->slot);
	job_free(c, j);
}

static void undo_rebind(struct tp_cluster *c, struct tp_undo *e)
{
	struct tp_job_impl *j = c->jobs[e->slot];
	unsigned ck = tp_ck_bucket(j->checkpoint_s);
	struct devop unhold = {.kind = OP_UNHOLD, .ck = ck},
	             hold = {.kind = OP_HOLD, .slot = e->slot, .ck = ck};
	apply_devs(c, j->devs, j->ndev, &unhold);
	nic_apply(c, j, false);
	if (j->devs_separate)
		tp_free(&c->alloc, j->devs);
	tp_free(&c->alloc, j->nic);
	j->devs = e->devs;
	j->ndev = e->ndev;
	j->devs_separate = e->devs_separate;
	j->nic = e->nic;
	e->nic = NULL;
	apply_devs(c, j->devs, j->ndev, &hold);
	nic_apply(c, j, true);
}

static void undo_entry(struct tp_cluster *c, struct tp_undo *e)
{
	switch (e->kind) {
	case TP_UNDO_HEALTH: {
		struct devop op = {.kind = OP_HEALTH, .mask = TP_DS_DOWN | TP_DS_CORDONED,
		                   .value = e->old};
		apply_devs(c, &e->dev, 1, &op);
		break;
	}
	case TP_UNDO_ASSIGN:
		undo_assign(c, e);
		break;
	case TP_UNDO_RELEASE:
		undo_release(c, e);
		break;
	case TP_UNDO_REBIND:
		undo_rebind(c, e);
		break;
	}
}

int tp_cluster_rollback(tp_cluster *c, size_t sp)
{
	if (!c)
		return TP_EINVAL;
	if (sp >= c->nsp)
		return tp_seterr(c->errmsg, TP_EINVAL, "savepoint %zu is not open (%zu open)", sp,
		                 c->nsp);
	idx_repair(c);
	size_t start = c->sp[sp].nundo;
	while (c->nundo > start)
		undo_entry(c, &c->undo[--c->nundo]);
	/* The state is again the one the savepoint saw, so is its generation: a placement made
	 * before the savepoint can still be committed (a plan that tried moves and undid them
	 * voids nothing), and one made inside it cannot, its number is never handed out again. */
	c->generation = c->sp[sp].generation;
	c->nsp = sp;
	map_sweep(c);
	return 0;
}

int tp_cluster_savepoint_discard(tp_cluster *c, size_t sp)
{
	if (!c)
		return TP_EINVAL;
	if (sp >= c->nsp)
		return tp_seterr(c->errmsg, TP_EINVAL, "savepoint %zu is not open (%zu open)", sp,
		                 c->nsp);
	c->nsp = sp;
	if (c->nsp == 0) {
		undo_drop(c, 0);
		map_sweep(c);
	}
	return 0;
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
		m += (size_t)t->lv[l].ndom * sizeof(uint32_t);
		if (l < nl)
			m += (size_t)t->lv[l].ndom * (1 + c->hstride + TP_CK_BUCKETS) * sizeof(uint32_t);
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
	}
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
