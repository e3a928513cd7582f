/* SPDX-License-Identifier: MIT */
/*
 * NVLink partitions (IMEX domains) of running jobs: the policy (tp_cluster_set_partitions),
 * the partitions a device list needs, recording them, the node query and the check.
 *
 * A job whose devices sit on two or more nodes of a domain of the partition level whose fabric
 * is NVLink holds a partition there: those nodes and a channel of the domain's pool. A node is
 * in at most one partition (part_job), as an IMEX daemon serves one domain
 * (dra-driver-nvidia-gpu #353); a partition's nodes hold jobs of its tenant only (#468). The
 * partitions of a job are a function of its devices, kept with the job (parts), so that
 * release and its undo free and restore exactly the same channels; a rebind keeps the channel
 * of every domain the job stays in.
 */
#include "cluster_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

static bool chan_taken(const struct tp_cluster *c, uint32_t dom, uint32_t ch)
{
	return c->part_bits[(size_t)dom * c->part_words + ch / 64] >> (ch % 64) & 1u;
}

static void chan_set(struct tp_cluster *c, uint32_t dom, uint32_t ch, bool on)
{
	uint64_t *w = &c->part_bits[(size_t)dom * c->part_words + ch / 64];
	uint64_t bit = (uint64_t)1 << (ch % 64);
	*w = on ? *w | bit : *w & ~bit;
	c->part_used[dom] += on ? 1u : (uint32_t)-1;
	c->part_held += on ? 1u : (uint32_t)-1;
}

/* The lowest free channel of dom's pool, or part_channels when none is free. */
static uint32_t chan_lowest(const struct tp_cluster *c, uint32_t dom)
{
	if (c->part_used[dom] >= c->part_channels)
		return c->part_channels;
	const uint64_t *w = &c->part_bits[(size_t)dom * c->part_words];
	for (uint32_t i = 0; i < c->part_words; i++)
		if (~w[i])
			for (uint32_t b = 0; b < 64; b++)
				if (!(w[i] >> b & 1u))
					return i * 64 + b;
	return c->part_channels;
}

static const char *node_name(const struct tp_cluster *c, uint32_t node)
{
	return c->t->lv[tp_node_level(c->t)].dname[node];
}

static const char *dom_name(const struct tp_cluster *c, uint32_t dom)
{
	return c->t->lv[c->part_level].dname[dom];
}

/* Why node cannot join (in_part) or be used beside (!in_part) a partition of the job at self
 * of tenant `tenant`: 0, or TP_EBUSY with the reason in why. */
static int node_refuses(const struct tp_cluster *c, uint32_t node, uint32_t self,
                        const char *tenant, bool in_part, char *why)
{
	uint32_t o;
	if (tp_cl_part_other(c, node, self, &o) &&
	    (in_part || strcmp(c->jobs[o]->tenant, tenant) != 0))
		return why ? tp_seterr(why, TP_EBUSY, "node %s is in the NVLink partition of job "
		                       "'%s' (tenant %s)", node_name(c, node), c->jobs[o]->id,
		                       c->jobs[o]->tenant) : TP_EBUSY;
	if (!in_part)
		return 0;
	const struct tp_topology *t = c->t;
	for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++) {
		uint32_t j = c->dev_job[d];
		if (j != TP_NO_JOB && j != self && strcmp(c->jobs[j]->tenant, tenant) != 0)
			return why ? tp_seterr(why, TP_EBUSY, "node %s runs job '%s' of tenant %s, which "
			                       "an NVLink partition of tenant %s may not share",
			                       node_name(c, node), c->jobs[j]->id, c->jobs[j]->tenant,
			                       tenant) : TP_EBUSY;
	}
	return 0;
}

/* The channel the partition in dom takes: kept from keep, else the lowest free one. */
static int part_channel(const struct tp_cluster *c, uint32_t dom, const struct tp_job_part *keep,
                        uint32_t nkeep, uint32_t *ch, char *why)
{
	for (uint32_t i = 0; i < nkeep; i++)
		if (keep[i].dom == dom) {
			*ch = keep[i].channel;
			return 0;
		}
	*ch = chan_lowest(c, dom);
	if (*ch < c->part_channels)
		return 0;
	return why ? tp_seterr(why, TP_EBUSY, "all %u IMEX channels of %s %s are taken by other "
	                       "jobs' NVLink partitions", c->part_channels,
	                       c->t->lv[c->part_level].name, dom_name(c, dom)) : TP_EBUSY;
}

/* Walk the sorted distinct nodes u[nu] domain by domain: check every node, and count (out
 * NULL) or fill the partitions. */
static int part_walk(const struct tp_cluster *c, uint32_t self, const char *tenant,
                     const uint32_t *u, size_t nu, const struct tp_job_part *keep,
                     uint32_t nkeep, struct tp_job_part *out, uint32_t *np, char *why)
{
	unsigned L = (unsigned)c->part_level;
	uint32_t k = 0;
	for (size_t i = 0, e; i < nu; i = e) {
		uint32_t dom = tp_node_ancestor(c->t, u[i], L);
		for (e = i + 1; e < nu && tp_node_ancestor(c->t, u[e], L) == dom;)
			e++;
		bool part = e - i >= 2 && tp_cl_part_domain(c, dom);
		uint32_t ch = 0;
		/* the pool first: no move inside the domain frees a channel (busy, not fragmented) */
		int rc = part ? part_channel(c, dom, keep, nkeep, &ch, why) : 0;
		for (size_t x = i; x < e && !rc; x++)
			rc = node_refuses(c, u[x], self, tenant, part, why);
		if (rc)
			return rc;
		if (!part)
			continue;
		if (out)
			out[k] = (struct tp_job_part){.dom = dom, .channel = ch, .nnodes = (uint32_t)(e - i)};
		k++;
	}
	*np = k;
	return 0;
}

int tp_cl_part_build(const struct tp_cluster *c, uint32_t self, const char *tenant,
                     const uint32_t *devs, size_t n, const struct tp_job_part *keep,
                     uint32_t nkeep, struct tp_job_part **out, uint32_t *nout, char *why)
{
	*out = NULL;
	*nout = 0;
	if (c->part_level < 0 || n == 0)
		return 0;
	uint32_t *u = tp_mallocn(&c->alloc, n, sizeof *u);
	if (!u)
		return TP_ENOMEM;
	for (size_t i = 0; i < n; i++)
		u[i] = c->t->dev_node[devs[i]];
	qsort(u, n, sizeof *u, cmp_u32);
	size_t nu = 0;
	for (size_t i = 0; i < n; i++)
		if (nu == 0 || u[nu - 1] != u[i])
			u[nu++] = u[i];
	uint32_t np = 0;
	int rc = part_walk(c, self, tenant, u, nu, keep, nkeep, NULL, &np, why);
	struct tp_job_part *parts = NULL;
	if (!rc && np) {
		parts = tp_mallocn(&c->alloc, np, sizeof *parts);
		rc = parts ? part_walk(c, self, tenant, u, nu, keep, nkeep, parts, &np, why)
		           : TP_ENOMEM;
	}
	tp_free(&c->alloc, u);
	if (rc) {
		tp_free(&c->alloc, parts);
		return rc;
	}
	*out = parts;
	*nout = np;
	return 0;
}

/* The job's partition in dom, or NULL (parts are in domain order). */
static const struct tp_job_part *part_find(const struct tp_job_impl *job, uint32_t dom)
{
	uint32_t lo = 0, hi = job->nparts;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (job->parts[mid].dom < dom)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < job->nparts && job->parts[lo].dom == dom ? &job->parts[lo] : NULL;
}

void tp_cl_part_apply(struct tp_cluster *c, const struct tp_job_impl *job, uint32_t slot,
                      bool on)
{
	if (!job->nparts)
		return;
	for (uint32_t i = 0; i < job->nparts; i++)
		chan_set(c, job->parts[i].dom, job->parts[i].channel, on);
	for (uint32_t i = 0; i < job->ndev; i++) {
		uint32_t node = c->t->dev_node[job->devs[i]];
		if (part_find(job, tp_node_ancestor(c->t, node, (unsigned)c->part_level)))
			c->part_job[node] = on ? slot : TP_NO_JOB;
	}
}

/* ---- the policy ------------------------------------------------------------------------------ */

static int check_policy(struct tp_cluster *c, int level, uint32_t channels)
{
	const struct tp_topology *t = c->t;
	if (c->njobs)
		return tp_seterr(c->errmsg, TP_EINVAL, "partitions: the cluster runs %zu jobs; set the "
		                 "partition policy before recording any", c->njobs);
	if (c->nsp)
		return tp_seterr(c->errmsg, TP_EINVAL, "partitions: a savepoint is open");
	if (level < 0)
		return 0;
	if ((unsigned)level >= tp_node_level(t))
		return tp_seterr(c->errmsg, TP_EINVAL, "partitions.level %d is not a level above the "
		                 "node (the topology has %u levels)", level, t->nlevels);
	if (channels < 1 || channels > TP_PARTITION_CHANNELS_MAX)
		return tp_seterr(c->errmsg, TP_EINVAL, "partitions.channels %u is not between 1 and %u",
		                 channels, TP_PARTITION_CHANNELS_MAX);
	for (uint32_t d = 0; d < t->lv[level].ndom; d++)
		if (tp_dom_fabric(t, level, d)->kind == TP_LINK_NVLINK)
			return 0;
	return tp_seterr(c->errmsg, TP_EINVAL, "partitions.level %s has no domain whose fabric is "
	                 "NVLink", t->lv[level].name);
}

static void policy_free(struct tp_cluster *c)
{
	tp_free(&c->alloc, c->part_job);
	tp_free(&c->alloc, c->part_bits);
	tp_free(&c->alloc, c->part_used);
	c->part_job = NULL;
	c->part_bits = NULL;
	c->part_used = NULL;
	c->part_level = -1;
	c->part_channels = c->part_words = c->part_held = 0;
}

static int policy_set(struct tp_cluster *c, int level, uint32_t channels)
{
	int rc = check_policy(c, level, channels);
	if (rc)
		return rc;
	if (level < 0) {
		policy_free(c);
		return 0;
	}
	const struct tp_topology *t = c->t;
	uint32_t words = (channels + 63) / 64, ndom = t->lv[level].ndom;
	uint32_t *job = tp_mallocn(&c->alloc, t->nnodes, sizeof *job);
	uint64_t *bits = tp_calloc(&c->alloc, (size_t)ndom * words, sizeof *bits);
	uint32_t *used = tp_calloc(&c->alloc, ndom, sizeof *used);
	if (!job || !bits || !used) {
		tp_free(&c->alloc, job);
		tp_free(&c->alloc, bits);
		tp_free(&c->alloc, used);
		return tp_seterr(c->errmsg, TP_ENOMEM, "out of memory setting partitions");
	}
	memset(job, 0xff, (size_t)t->nnodes * sizeof *job); /* TP_NO_JOB */
	policy_free(c);
	c->part_job = job;
	c->part_bits = bits;
	c->part_used = used;
	c->part_level = level;
	c->part_channels = channels;
	c->part_words = words;
	c->generation = ++c->generations;
	return 0;
}

int tp_cluster_set_partitions(tp_cluster *c, int level, uint32_t channels)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, policy_set(c, level, channels));
}

void tp_cl_part_free(struct tp_cluster *c)
{
	policy_free(c);
}

int tp_cl_part_copy(struct tp_cluster *d, const struct tp_cluster *c)
{
	if (c->part_level < 0)
		return 0;
	if (policy_set(d, c->part_level, c->part_channels))
		return TP_ENOMEM;
	const struct tp_topology *t = c->t;
	uint32_t ndom = t->lv[c->part_level].ndom;
	memcpy(d->part_job, c->part_job, (size_t)t->nnodes * sizeof *d->part_job);
	memcpy(d->part_bits, c->part_bits, (size_t)ndom * c->part_words * sizeof *d->part_bits);
	memcpy(d->part_used, c->part_used, (size_t)ndom * sizeof *d->part_used);
	d->part_held = c->part_held;
	return 0;
}

int tp_cluster_partition_policy(const tp_cluster *c, int *level, uint32_t *channels)
{
	if (!c)
		return TP_EINVAL;
	if (level)
		*level = c->part_level;
	if (channels)
		*channels = c->part_level < 0 ? 0 : c->part_channels;
	return 0;
}

int tp_cluster_node_partition(const tp_cluster *c, uint32_t node, const char **job,
                              uint32_t *channel)
{
	if (!c || node >= c->t->nnodes)
		return TP_EINVAL;
	if (c->part_level < 0 || c->part_job[node] == TP_NO_JOB)
		return TP_ENOTFOUND;
	const struct tp_job_impl *j = c->jobs[c->part_job[node]];
	const struct tp_job_part *p =
	    part_find(j, tp_node_ancestor(c->t, node, (unsigned)c->part_level));
	if (job)
		*job = j->id;
	if (channel)
		*channel = p ? p->channel : 0;
	return 0;
}

/* ---- the check ------------------------------------------------------------------------------- */

/* One job's partitions against what its devices need and the node and channel marks. */
static int check_job_parts(const struct tp_cluster *c, uint32_t s, char *buf, size_t len)
{
	const struct tp_job_impl *j = c->jobs[s];
	struct tp_job_part *want = NULL;
	uint32_t nw = 0;
	int rc = tp_cl_part_build(c, s, j->tenant, j->devs, j->ndev, j->parts, j->nparts, &want,
	                          &nw, NULL);
	bool same = !rc && nw == j->nparts &&
	            (nw == 0 || memcmp(want, j->parts, nw * sizeof *want) == 0);
	tp_free(&c->alloc, want);
	if (rc == TP_ENOMEM) {
		if (buf && len)
			snprintf(buf, len, "out of memory checking job '%s''s partitions", j->id);
		return TP_ENOMEM;
	}
	if (!same)
		CHECK_FAIL("job '%s': its %u NVLink partitions are not the ones its devices need%s",
		           j->id, j->nparts, rc ? " (a node is shared or a pool is exhausted)" : "");
	for (uint32_t i = 0; i < j->nparts; i++)
		if (!chan_taken(c, j->parts[i].dom, j->parts[i].channel))
			CHECK_FAIL("job '%s': channel %u of %s is not marked taken", j->id,
			           j->parts[i].channel, dom_name(c, j->parts[i].dom));
	for (uint32_t i = 0; i < j->ndev; i++) {
		uint32_t node = c->t->dev_node[j->devs[i]];
		bool in = part_find(j, tp_node_ancestor(c->t, node, (unsigned)c->part_level)) != NULL;
		if (in && c->part_job[node] != s)
			CHECK_FAIL("job '%s': node %s of its partition is marked for slot %u", j->id,
			           node_name(c, node), c->part_job[node]);
	}
	return 0;
}

int tp_cl_part_check(const struct tp_cluster *c, char *buf, size_t len)
{
	if (c->part_level < 0)
		return 0;
	uint64_t parts = 0, chans = 0, nodes = 0, marked = 0;
	for (uint32_t s = 0; s < c->njobs; s++) {
		int rc = check_job_parts(c, s, buf, len);
		if (rc)
			return rc;
		parts += c->jobs[s]->nparts;
		for (uint32_t i = 0; i < c->jobs[s]->nparts; i++)
			nodes += c->jobs[s]->parts[i].nnodes;
	}
	for (uint32_t d = 0; d < c->t->lv[c->part_level].ndom; d++) {
		uint32_t k = 0;
		for (uint32_t ch = 0; ch < c->part_channels; ch++)
			k += chan_taken(c, d, ch);
		if (k != c->part_used[d])
			CHECK_FAIL("%s %s: %u channels marked, the count says %u",
			           c->t->lv[c->part_level].name, dom_name(c, d), k, c->part_used[d]);
		chans += k;
	}
	for (uint32_t node = 0; node < c->t->nnodes; node++) {
		uint32_t s = c->part_job[node];
		if (s != TP_NO_JOB && s >= c->njobs)
			CHECK_FAIL("node %s is in the partition of job slot %u of %zu",
			           node_name(c, node), s, c->njobs);
		marked += s != TP_NO_JOB;
	}
	if (chans != parts || marked != nodes)
		CHECK_FAIL("%llu channels and %llu nodes marked, the jobs' %llu partitions have "
		           "%llu nodes", (unsigned long long)chans, (unsigned long long)marked,
		           (unsigned long long)parts, (unsigned long long)nodes);
	return 0;
}
