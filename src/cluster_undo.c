/* SPDX-License-Identifier: MIT */
/*
 * Savepoints and rollback: the undo log of a cluster state.
 */
#include "cluster_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the undo log -------------------------------------------------------------------------- */

/* Make room for k more undo entries when a savepoint is open. */
int tp_cl_undo_reserve(struct tp_cluster *c, size_t k)
{
	if (c->nsp == 0)
		return 0;
	if (k > SIZE_MAX - c->nundo)
		return TP_ENOMEM;
	return tp_grow(&c->alloc, (void **)&c->undo, &c->cap_undo, c->nundo + k, sizeof *c->undo);
}

/* Free what the log entries own (the changes stay). */
void tp_cl_undo_drop(struct tp_cluster *c, size_t from)
{
	for (size_t i = from; i < c->nundo; i++) {
		struct tp_undo *e = &c->undo[i];
		if (e->kind == TP_UNDO_RELEASE)
			tp_cl_job_free(c, e->job);
		else if (e->kind == TP_UNDO_REBIND) {
			if (e->devs_separate)
				tp_free(&c->alloc, e->devs);
			tp_free(&c->alloc, e->nic);
			tp_free(&c->alloc, e->parts);
		}
	}
	c->nundo = from;
}


/* ---- savepoints ---------------------------------------------------------------------------- */

static int savepoint_open(tp_cluster *c, size_t *sp)
{
	if (tp_grow(&c->alloc, (void **)&c->sp, &c->cap_sp, c->nsp + 1, sizeof *c->sp))
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory opening a savepoint");
	/* The handle is a serial number never handed out twice by this cluster, so a stale
	 * handle cannot name a newer savepoint that took its place on the stack. */
	uint64_t serial = ++c->sp_serials;
	c->sp[c->nsp++] = (struct tp_savepoint){.nundo = c->nundo, .generation = c->generation,
	                                        .serial = serial};
	*sp = (size_t)serial;
	return 0;
}

int tp_cluster_savepoint(tp_cluster *c, size_t *sp)
{
	if (!c || !sp)
		return TP_EINVAL;
	TP_GUARDED(c, savepoint_open(c, sp));
}

/* The stack index of the open savepoint with handle h, or SIZE_MAX (closed or never opened).
 * Serials increase up the stack: a binary search. */
static size_t sp_index(const struct tp_cluster *c, size_t h)
{
	size_t lo = 0, hi = c->nsp;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->sp[mid].serial < (uint64_t)h)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nsp && c->sp[lo].serial == (uint64_t)h ? lo : SIZE_MAX;
}

/* The open savepoint named by handle h into *i, or TP_EINVAL with a message. */
static int sp_find(struct tp_cluster *c, size_t h, size_t *i)
{
	*i = sp_index(c, h);
	if (*i == SIZE_MAX)
		return tp_seterr(c->errmsg, TP_EINVAL, "savepoint %zu is not open (%zu open)", h,
		                 c->nsp);
	return 0;
}

/* Whether the log from entry `start` can be undone: walked backwards, every entry must find
 * the job slots it restores (the room and slots its change left). Checked before anything is
 * undone, so that a log broken by a bug is refused with the state unchanged. */
static bool undo_log_sound(const struct tp_cluster *c, size_t start)
{
	if (c->undo_lost)
		return false;
	size_t njobs = c->njobs;
	for (size_t i = c->nundo; i-- > start;) {
		const struct tp_undo *e = &c->undo[i];
		switch (e->kind) {
		case TP_UNDO_HEALTH:
			if (e->dev >= c->t->ndevices)
				return false;
			break;
		case TP_UNDO_ASSIGN:
			if (njobs == 0 || e->slot + 1u != njobs)
				return false;
			njobs--;
			break;
		case TP_UNDO_RELEASE:
			if (!e->job || njobs >= c->cap_jobs || e->slot > njobs)
				return false;
			njobs++;
			break;
		case TP_UNDO_REBIND:
			if (e->slot >= njobs)
				return false;
			break;
		case TP_UNDO_SPARES:
			if (e->ndev && e->slot >= tp_node_level(c->t))
				return false;
			break;
		case TP_UNDO_SERVICE:
			if (e->slot >= c->nsvc)
				return false;
			break;
		default:
			return false;
		}
	}
	return true;
}

static void undo_release(struct tp_cluster *c, struct tp_undo *e)
{
	uint32_t m = (uint32_t)c->njobs, s = e->slot; /* room and slot: undo_log_sound() */
	if (s < m) {
		c->jobs[m] = c->jobs[s];
		tp_cl_relabel(c, c->jobs[m], m);
		tp_cl_map_set(c, c->jobs[m]->id, m);
	}
	c->jobs[s] = e->job;
	c->njobs = m + 1;
	c->nexclusive += tp_job_exclusive(e->job);
	c->npairs += e->job->nic != NULL;
	tp_cl_map_set(c, e->job->id, s);
	struct devop op = {.kind = OP_HOLD, .slot = s, .ck = tp_ck_bucket(e->job->checkpoint_s)};
	tp_cl_apply_devs(c, e->job->devs, e->job->ndev, &op);
	tp_cl_nic_apply(c, e->job, true);
	tp_cl_service_apply(c, e->job, true);
	tp_cl_mix_apply(c, e->job, true);
	tp_cl_part_apply(c, e->job, s, true);
	e->job = NULL; /* the cluster owns it again */
}

static void undo_assign(struct tp_cluster *c, struct tp_undo *e)
{
	/* e->slot is the last slot (undo_log_sound()) and holds e->job */
	struct tp_job_impl *j = tp_cl_release_slot(c, e->slot);
	tp_cl_job_free(c, j);
}

static void undo_rebind(struct tp_cluster *c, struct tp_undo *e)
{
	struct tp_job_impl *j = c->jobs[e->slot];
	unsigned ck = tp_ck_bucket(j->checkpoint_s);
	struct devop unhold = {.kind = OP_UNHOLD, .ck = ck},
	             hold = {.kind = OP_HOLD, .slot = e->slot, .ck = ck};
	tp_cl_apply_devs(c, j->devs, j->ndev, &unhold);
	tp_cl_nic_apply(c, j, false);
	tp_cl_service_apply(c, j, false);
	tp_cl_mix_apply(c, j, false);
	tp_cl_part_apply(c, j, e->slot, false);
	if (j->devs_separate)
		tp_free(&c->alloc, j->devs);
	tp_free(&c->alloc, j->nic);
	tp_free(&c->alloc, j->parts);
	j->devs = e->devs;
	j->ndev = e->ndev;
	j->devs_separate = e->devs_separate;
	j->nic = e->nic;
	e->nic = NULL;
	j->parts = e->parts;
	j->nparts = e->nparts;
	e->parts = NULL;
	tp_cl_apply_devs(c, j->devs, j->ndev, &hold);
	tp_cl_nic_apply(c, j, true);
	tp_cl_service_apply(c, j, true);
	tp_cl_mix_apply(c, j, true);
	tp_cl_part_apply(c, j, e->slot, true);
}

static void undo_entry(struct tp_cluster *c, struct tp_undo *e)
{
	switch (e->kind) {
	case TP_UNDO_HEALTH: {
		struct devop op = {.kind = OP_HEALTH,
		                   .mask = TP_DS_DOWN | TP_DS_CORDONED | TP_DS_SPARE, .value = e->old};
		tp_cl_apply_devs(c, &e->dev, 1, &op);
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
	case TP_UNDO_SPARES:
		c->spare_level = e->slot;
		c->spare_k = e->ndev;
		break;
	case TP_UNDO_SERVICE:
		c->svc[e->slot].level = e->dev;
		c->svc[e->slot].max_per_domain = e->ndev;
		c->svc[e->slot].max_percent = e->x;
		c->svc[e->slot].fd_kind = e->fdk;
		c->svc[e->slot].fd_max_per_domain = e->fdn;
		c->svc[e->slot].fd_max_percent = e->fdx;
		break;
	}
}

static int rollback_to(tp_cluster *c, size_t sp)
{
	size_t i;
	int rc = sp_find(c, sp, &i);
	if (rc)
		return rc;
	size_t start = c->sp[i].nundo;
	if (!undo_log_sound(c, start))
		return tp_seterr(c->errmsg, TP_EINTERNAL,
		                 "internal error: the undo log of savepoint %zu cannot be replayed "
		                 "(nothing was undone)", sp);
	tp_cl_idx_repair(c);
	while (c->nundo > start)
		undo_entry(c, &c->undo[--c->nundo]);
	/* The state is again the one the savepoint saw, so is its generation: a placement made
	 * before the savepoint can still be committed (a plan that tried moves and undid them
	 * voids nothing), and one made inside it cannot, its number is never handed out again. */
	c->generation = c->sp[i].generation;
	c->nsp = i;
	tp_cl_map_sweep(c);
	return 0;
}

int tp_cluster_rollback(tp_cluster *c, size_t sp)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, rollback_to(c, sp));
}

static int discard_to(tp_cluster *c, size_t sp)
{
	size_t i;
	int rc = sp_find(c, sp, &i);
	if (rc)
		return rc;
	c->nsp = i;
	if (c->nsp == 0) {
		tp_cl_undo_drop(c, 0);
		c->undo_lost = false;
		tp_cl_map_sweep(c);
	}
	return 0;
}

int tp_cluster_savepoint_discard(tp_cluster *c, size_t sp)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, discard_to(c, sp));
}
