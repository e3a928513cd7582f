/* SPDX-License-Identifier: MIT */
/*
 * The cluster state's fingerprint (xxHash3 over a little-endian serialisation) and its
 * consistency check (every aggregate and index recomputed from the devices).
 */
#include "cluster_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "request_data.h"

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
	if (r->service) /* version 4, the same way */
		hb_str(h, r->service);
	if (r->expected_end_s != 0) /* version 6, the same way */
		hb_f64(h, r->expected_end_s);
}

/* The caps of the services that have some (tp_cluster_set_service_caps), in an order-free sum:
 * states without caps keep their fingerprints. */
static uint64_t caps_digest(const tp_cluster *c)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < c->nsvc; i++) {
		const struct tp_service *s = &c->svc[i];
		if (s->level == TP_NONE && s->fd_kind == TP_NONE)
			continue;
		XXH3_state_t st;
		XXH3_INITSTATE(&st);
		XXH3_64bits_reset(&st);
		struct hbuf h = {.st = &st};
		hb_str(&h, s->name);
		hb_u64(&h, s->level);
		hb_u64(&h, s->max_per_domain);
		hb_f64(&h, s->max_percent);
		if (s->fd_kind != TP_NONE) { /* states without them keep their fingerprints */
			hb_u64(&h, s->fd_kind);
			hb_u64(&h, s->fd_max_per_domain);
			hb_f64(&h, s->fd_max_percent);
		}
		hb_flush(&h);
		sum += XXH3_64bits_digest(&st);
	}
	return sum;
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
	/* likewise the channels of its NVLink partitions, only when it has some */
	for (uint32_t i = 0; i < j->nparts; i++) {
		hb_u64(&h, j->parts[i].dom);
		hb_u64(&h, j->parts[i].channel);
	}
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
	uint64_t caps = caps_digest(c);
	if (caps)
		hb_u64(&h, caps);
	hb_flush(&h);
	return XXH3_64bits_digest(&st);
}

/* ---- consistency check --------------------------------------------------------------------- */

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
			if (s & ~(TP_DS_DOWN | TP_DS_CORDONED | TP_DS_SPARE))
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

/* Spares: every device of a spare node marked, none held, down or cordoned; the counts per
 * domain and the policy in range. */
static int check_spares(const tp_cluster *c, char *buf, size_t len)
{
	const struct tp_topology *t = c->t;
	unsigned nl = tp_node_level(t);
	if (c->spare_k && c->spare_level >= nl)
		CHECK_FAIL("spare policy at level %u, not above the node", c->spare_level);
	uint32_t total = 0;
	for (uint32_t node = 0; node < t->nnodes; node++) {
		uint32_t marked = 0, n = tp_node_ndev(t, node);
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1]; d++) {
			if (!(c->dstate[d] & TP_DS_SPARE))
				continue;
			marked++;
			if (c->dstate[d] != TP_DS_SPARE || c->dev_job[d] != TP_NO_JOB)
				CHECK_FAIL("device %u is a spare but held, down or cordoned", d);
		}
		if (marked && marked != n)
			CHECK_FAIL("node %u: %u of its %u devices are marked spare", node, marked, n);
		if (c->spare_devs[nl][node] != marked)
			CHECK_FAIL("node %u: spare_devs %u, recounted %u", node,
			           c->spare_devs[nl][node], marked);
		total += marked != 0;
	}
	if (c->nspare_nodes != total)
		CHECK_FAIL("nspare_nodes %u, recounted %u", c->nspare_nodes, total);
	for (unsigned l = 0; l < nl; l++)
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t first, nn, sd = 0, sn = 0;
			tp_dom_nodes(t, l, d, &first, &nn);
			for (uint32_t node = first; node < first + nn; node++) {
				sd += c->spare_devs[nl][node];
				sn += c->spare_devs[nl][node] != 0;
			}
			if (c->spare_devs[l][d] != sd || c->spare_nodes[l][d] != sn)
				CHECK_FAIL("level %u domain %u: spares %u nodes / %u devices, recounted %u / "
				           "%u", l, d, c->spare_nodes[l][d], c->spare_devs[l][d], sn, sd);
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
			if (!c->index_lost)
				CHECK_FAIL("level %u: index missing", l);
			continue;
		}
		Word_t want = 0;
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t f = c->free[l][d];
			if (!f)
				continue;
			want++;
			if (Judy1Test(c->index[l], tp_cl_idx_key(f, d), &err) != 1)
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
		if (!j->nic != !tp_shape_pairs(j->shape))
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
	uint64_t held = 0, listed = 0, wide = 0;
	uint32_t exclusive = 0;
	for (uint32_t d = 0; d < c->t->ndevices; d++)
		held += c->dev_job[d] != TP_NO_JOB;
	for (size_t s = 0; s < c->njobs; s++) {
		const struct tp_job_impl *j = c->jobs[s];
		if (!j)
			CHECK_FAIL("job slot %zu is empty", s);
		exclusive += tp_job_exclusive(j);
		wide += tp_cl_job_wide(c->t, j->ndev) ? j->ndev : 0;
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
	if (listed != c->held_devs || wide != c->wide_devs)
		CHECK_FAIL("the jobs hold %llu devices, %llu of them in wide jobs; the counts say %llu "
		           "and %llu", (unsigned long long)listed, (unsigned long long)wide,
		           (unsigned long long)c->held_devs, (unsigned long long)c->wide_devs);
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
	    (rc = check_spares(c, buf, len)) ||
	    (rc = check_ckhist(c, buf, len)) || (rc = check_indexes(c, buf, len)) ||
	    (rc = check_jobs(c, buf, len)) || (rc = tp_cl_service_check(c, buf, len)) ||
	    (rc = tp_cl_part_check(c, buf, len)) || (rc = tp_cl_grid_check(c, buf, len)))
		return rc;
	return 0;
}

