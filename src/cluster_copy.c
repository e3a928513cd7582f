/* SPDX-License-Identifier: MIT */
/*
 * tp_cluster_copy: a second cluster with the same state, for planning on a copy while other
 * threads keep placing on the original, or for carrying one plan out on several copies.
 *
 * A copy has an identity of its own (a placement made on one is refused by the other) and the
 * lineage of its source (c->origin): a plan records the lineage of the cluster it was made on,
 * and tp_plan_apply_step() accepts it on that cluster and on every copy of it, never on an
 * unrelated cluster, even one at the same address with the same jobs. The copy is made from
 * the arrays of the source, not by replaying its history, so it is equal to it in every figure
 * (same fingerprint, same job slots, the same NICs held), and it costs one pass over them.
 */
#include "cluster_impl.h"

#include <string.h>

#include "request_data.h"

/* The job, in a block of its own on d's allocator (struct, devices, id, tenant, as job_new in
 * cluster.c lays it out), with its shape, NICs and NVLink partitions. */
static struct tp_job_impl *job_copy(const struct tp_cluster *d, const struct tp_job_impl *j)
{
	size_t idlen = strlen(j->id) + 1, tlen = strlen(j->tenant) + 1;
	size_t bytes = sizeof *j + (size_t)j->ndev * sizeof(uint32_t) + idlen + tlen;
	struct tp_job_impl *job = tp_malloc(&d->alloc, bytes);
	if (!job)
		return NULL;
	*job = *j;
	job->shape = NULL;
	job->nic = NULL;
	job->parts = NULL;
	job->devs = (uint32_t *)(void *)(job + 1);
	job->id = (char *)(job->devs + j->ndev);
	job->tenant = job->id + idlen;
	job->devs_separate = false;
	job->bytes = bytes;
	memcpy(job->devs, j->devs, (size_t)j->ndev * sizeof *j->devs);
	memcpy(job->id, j->id, idlen);
	memcpy(job->tenant, j->tenant, tlen);
	if ((j->shape && !(job->shape = tp_request_dup(&d->alloc, j->shape))) ||
	    (j->nic && !(job->nic = tp_mallocn(&d->alloc, j->ndev, sizeof *job->nic))) ||
	    (j->nparts && !(job->parts = tp_mallocn(&d->alloc, j->nparts, sizeof *job->parts)))) {
		tp_cl_job_free(d, job);
		return NULL;
	}
	if (j->nic)
		memcpy(job->nic, j->nic, (size_t)j->ndev * sizeof *j->nic);
	if (j->nparts)
		memcpy(job->parts, j->parts, (size_t)j->nparts * sizeof *j->parts);
	return job;
}

/* Every job in its slot, and the id map (without the source's tombstones). */
static int jobs_copy(struct tp_cluster *d, const struct tp_cluster *c)
{
	if (c->njobs &&
	    tp_grow(&d->alloc, (void **)&d->jobs, &d->cap_jobs, c->njobs, sizeof *d->jobs))
		return TP_ENOMEM;
	for (size_t s = 0; s < c->njobs; s++) {
		struct tp_job_impl *job = job_copy(d, c->jobs[s]);
		if (!job)
			return TP_ENOMEM;
		JError_t err;
		PPvoid_t p = JudySLIns(&d->job_by_id, (const uint8_t *)job->id, &err);
		if (!p || p == PPJERR) {
			tp_cl_job_free(d, job);
			return TP_ENOMEM;
		}
		*p = tp_cl_slot_value((uint32_t)s);
		d->jobs[d->njobs++] = job;
	}
	return 0;
}

/* The per-device and per-domain arrays, which tp_cluster_create_ext sized for the topology. */
static void arrays_copy(struct tp_cluster *d, const struct tp_cluster *c)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	memcpy(d->dstate, c->dstate, t->ndevices);
	memcpy(d->dev_job, c->dev_job, (size_t)t->ndevices * sizeof *d->dev_job);
	memcpy(d->dev_nic, c->dev_nic, (size_t)t->ndevices * sizeof *d->dev_nic);
	for (unsigned l = 0; l <= nl; l++) {
		size_t nd = t->lv[l].ndom;
		memcpy(d->free[l], c->free[l], nd * sizeof(uint32_t));
		memcpy(d->spare_devs[l], c->spare_devs[l], nd * sizeof(uint32_t));
		if (l == nl)
			break;
		memcpy(d->spare_nodes[l], c->spare_nodes[l], nd * sizeof(uint32_t));
		memcpy(d->free_nodes[l], c->free_nodes[l], nd * sizeof(uint32_t));
		memcpy(d->hist[l], c->hist[l], nd * c->hstride * sizeof(uint32_t));
		memcpy(d->ckhist[l], c->ckhist[l], nd * TP_CK_BUCKETS * sizeof(uint32_t));
	}
	d->nfree = c->nfree;
	d->ndown = c->ndown;
	d->ncordoned = c->ncordoned;
	d->nexclusive = c->nexclusive;
	d->held_devs = c->held_devs;
	d->wide_devs = c->wide_devs;
	d->npairs = c->npairs;
	d->nspare_nodes = c->nspare_nodes;
	d->spare_level = c->spare_level;
	d->spare_k = c->spare_k;
	d->plan_key = c->plan_key;
	d->plan_next = c->plan_next;
	d->pmix_mode = c->pmix_mode;
	d->npmix = c->npmix;
	memcpy(d->pmix, c->pmix, sizeof d->pmix);
}

/* The indexes of the copied counts (the empty cluster's are dropped). */
static int indexes_rebuild(struct tp_cluster *d)
{
	unsigned nl = tp_node_level(d->t);
	for (unsigned l = 0; l <= nl; l++) {
		JError_t err;
		Judy1FreeArray(&d->index[l], &err);
		d->indexed[l] = false;
		if (tp_cl_idx_build(d, l, &d->index[l]))
			return TP_ENOMEM;
		d->indexed[l] = true;
	}
	return 0;
}

int tp_cluster_copy(tp_cluster **out, const tp_cluster *c, const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!c || !tp_alloc_valid(alloc))
		return TP_EINVAL;
	tp_cluster_options o = TP_CLUSTER_OPTIONS_INIT;
	o.writer_guard = c->guard;
	tp_cluster *d = NULL;
	int rc = tp_cluster_create_ext(&d, c->t, alloc ? alloc : &c->alloc, &o);
	if (rc)
		return rc;
	d->origin = c->origin;
	arrays_copy(d, c);
	tp_cl_grid_copy(d, c);
	if (tp_cl_service_copy(d, c) || tp_cl_part_copy(d, c) || jobs_copy(d, c) ||
	    indexes_rebuild(d)) {
		tp_cluster_destroy(d);
		return TP_ENOMEM;
	}
	d->generation = d->generations = c->generations;
	*out = d;
	return 0;
}
