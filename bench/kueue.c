/* SPDX-License-Identifier: MIT */
/* The Kueue-like baseline (see kueue.h for what it does and where it simplifies Kueue). */
#include "kueue.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct kq {
	const tp_topology *t;
	unsigned nl; /* node level */
	uint32_t ndom[TP_MAX_LEVELS];
	uint32_t *child_first[TP_MAX_LEVELS]; /* [ndom + 1] CSR into level + 1 (above the node) */
	uint32_t *dev_first;                  /* [nodes + 1] */

	/* Recounted on every request. */
	uint32_t *freedev[TP_MAX_LEVELS]; /* free devices per domain */
	uint32_t *pods[TP_MAX_LEVELS];    /* pods that fit per domain */
	uint32_t *slices[TP_MAX_LEVELS];  /* slices that fit per domain (levels <= slice level) */
	uint32_t *scratch[TP_MAX_LEVELS]; /* candidate lists while descending */
	uint32_t *order;                  /* [nodes] LeastFreeCapacity order */

	enum kq_rule rule;
	uint32_t *parent[TP_MAX_LEVELS]; /* [ndom] index at level - 1 (levels > 0) */

	/* The request being placed. */
	const tp_cluster *c;
	const struct kq_request *r;
	int S;        /* slice level, or -1 */
	uint32_t pps; /* pods per slice */
	uint32_t *out;
	uint32_t nout;
};

struct kq *kq_create(const tp_topology *t)
{
	struct kq *k = calloc(1, sizeof *k);
	if (!k)
		return NULL;
	k->t = t;
	k->rule = KQ_RULE_KUEUE;
	k->nl = tp_topology_level_count(t) - 1;
	for (unsigned l = 0; l <= k->nl; l++) {
		uint32_t n = tp_topology_domain_count(t, l);
		k->ndom[l] = n;
		k->freedev[l] = calloc(n, sizeof(uint32_t));
		k->pods[l] = calloc(n, sizeof(uint32_t));
		k->slices[l] = calloc(n, sizeof(uint32_t));
		k->scratch[l] = calloc(n, sizeof(uint32_t));
		if (!k->freedev[l] || !k->pods[l] || !k->slices[l] || !k->scratch[l])
			goto fail;
		if (l > 0) {
			k->parent[l] = calloc(n, sizeof(uint32_t));
			if (!k->parent[l])
				goto fail;
			for (uint32_t d = 0; d < n; d++)
				k->parent[l][d] = tp_topology_domain_parent(t, l, d);
		}
		if (l == k->nl)
			continue;
		k->child_first[l] = calloc((size_t)n + 1, sizeof(uint32_t));
		if (!k->child_first[l])
			goto fail;
		for (uint32_t d = 0; d < n; d++) {
			uint32_t first, cnt;
			tp_topology_domain_children(t, l, d, &first, &cnt);
			k->child_first[l][d] = first;
			k->child_first[l][d + 1] = first + cnt;
		}
	}
	uint32_t nn = k->ndom[k->nl];
	k->dev_first = calloc((size_t)nn + 1, sizeof(uint32_t));
	k->order = calloc(nn, sizeof(uint32_t));
	if (!k->dev_first || !k->order)
		goto fail;
	for (uint32_t n = 0; n < nn; n++) {
		uint32_t first, cnt;
		tp_topology_domain_devices(t, k->nl, n, &first, &cnt);
		k->dev_first[n] = first;
		k->dev_first[n + 1] = first + cnt;
	}
	return k;
fail:
	kq_destroy(k);
	return NULL;
}

void kq_set_rule(struct kq *k, enum kq_rule rule) { k->rule = rule; }

void kq_destroy(struct kq *k)
{
	if (!k)
		return;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++) {
		free(k->child_first[l]);
		free(k->freedev[l]);
		free(k->pods[l]);
		free(k->slices[l]);
		free(k->scratch[l]);
		free(k->parent[l]);
	}
	free(k->dev_first);
	free(k->order);
	free(k);
}

/* Units a domain offers: slices at and above the slice level, pods below it. */
static inline uint32_t kq_units(const struct kq *k, unsigned l, uint32_t d)
{
	return (int)l <= k->S ? k->slices[l][d] : k->pods[l][d];
}

/* Devices per unit at level l. */
static inline uint32_t kq_unit_devices(const struct kq *k, unsigned l)
{
	return (int)l <= k->S ? k->r->slice_size : k->r->pod;
}

/* Step 1: every node's free devices and pods, summed up the tree (the per-request recount). */
static void kq_recount(struct kq *k)
{
	unsigned nl = k->nl;
	uint32_t pod = k->r->pod;
	for (uint32_t n = 0; n < k->ndom[nl]; n++) {
		uint32_t f = tp_cluster_free_count(k->c, nl, n);
		k->freedev[nl][n] = f;
		k->pods[nl][n] = f / pod;
	}
	if (k->S == (int)nl)
		for (uint32_t n = 0; n < k->ndom[nl]; n++)
			k->slices[nl][n] = k->pods[nl][n] / k->pps;
	for (int l = (int)nl - 1; l >= 0; l--) {
		const uint32_t *cf = k->child_first[l];
		for (uint32_t d = 0; d < k->ndom[l]; d++) {
			uint32_t f = 0, p = 0, s = 0;
			for (uint32_t ch = cf[d]; ch < cf[d + 1]; ch++) {
				f += k->freedev[l + 1][ch];
				p += k->pods[l + 1][ch];
				s += k->slices[l + 1][ch];
			}
			k->freedev[l][d] = f;
			k->pods[l][d] = p;
			if (l == k->S)
				k->slices[l][d] = p / k->pps;
			else if (l < k->S)
				k->slices[l][d] = s;
		}
	}
}

/* BestFit: among the domains of a list that hold `need` units, the one with the fewest free
 * devices, lowest index on ties (tp_place's best-fit rule; see kueue.h). */
static uint32_t kq_tightest(const struct kq *k, unsigned l, const uint32_t *list, uint32_t n,
                            uint32_t need)
{
	uint32_t best = TP_NONE;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t d = list[i];
		if (kq_units(k, l, d) < need)
			continue;
		if (best == TP_NONE || k->freedev[l][d] < k->freedev[l][best] ||
		    (k->freedev[l][d] == k->freedev[l][best] && d < best))
			best = d;
	}
	return best;
}

/* The sort key of a candidate domain for the single-domain choice (see kueue.h). */
struct kq_key {
	uint32_t v[2 * TP_MAX_LEVELS + 2];
	unsigned n;
};

static int kq_node_cmp(const void *a, const void *b, const struct kq *k)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint32_t ux = kq_units(k, k->nl, x), uy = kq_units(k, k->nl, y);
	if (ux != uy)
		return ux > uy ? -1 : 1;
	if (k->freedev[k->nl][x] != k->freedev[k->nl][y])
		return k->freedev[k->nl][x] < k->freedev[k->nl][y] ? -1 : 1;
	return (x > y) - (x < y);
}

/* For a domain whose children are nodes: the fewest nodes that hold `need` units of the
 * domain (a prefix of its nodes, largest first, tighter first on ties) and their free devices. */
static void kq_fewest_nodes(const struct kq *k, uint32_t d, uint32_t need, uint32_t *m,
                            uint32_t *fsum)
{
	unsigned l = k->nl - 1;
	uint32_t node_need = (int)l == k->S ? need * k->pps : need;
	uint32_t lo = k->child_first[l][d], hi = k->child_first[l][d + 1], buf[TP_MAX_NODE_DEVICES];
	uint32_t n = 0;
	for (uint32_t x = lo; x < hi && n < TP_MAX_NODE_DEVICES; x++)
		if (kq_units(k, k->nl, x))
			buf[n++] = x;
	for (uint32_t i = 1; i < n; i++) { /* insertion sort: a rack has 18 nodes */
		uint32_t v = buf[i], j = i;
		while (j > 0 && kq_node_cmp(&buf[j - 1], &v, k) > 0) {
			buf[j] = buf[j - 1];
			j--;
		}
		buf[j] = v;
	}
	uint32_t acc = 0;
	*m = 0;
	*fsum = 0;
	for (uint32_t i = 0; i < n && acc < node_need; i++) {
		acc += kq_units(k, k->nl, buf[i]);
		*fsum += k->freedev[k->nl][buf[i]];
		(*m)++;
	}
}

/*
 * The key that orders the candidates of a single-domain choice at level l, smallest first.
 * KQ_RULE_KUEUE: the fewest units that fit (Kueue's BestFit "tightest"), then the fewest free
 * devices. KQ_RULE_TP: tp_place's objective for a request that one domain of l holds (its
 * rule 1 then its best fit, src/place_choice.c): the fewest nodes (for a domain whose children
 * are nodes), then the free devices of the domain itself, then those of every ancestor from
 * the top, then the free devices of those nodes. The index breaks the remaining ties in both.
 */
static void kq_key_of(const struct kq *k, unsigned l, uint32_t d, uint32_t need,
                      struct kq_key *key)
{
	key->n = 0;
	if (k->rule == KQ_RULE_KUEUE) {
		key->v[key->n++] = kq_units(k, l, d);
		key->v[key->n++] = k->freedev[l][d];
	} else {
		uint32_t m = 0, fsum = 0;
		if (l + 1 == k->nl)
			kq_fewest_nodes(k, d, need, &m, &fsum);
		key->v[key->n++] = m;
		key->v[key->n++] = k->freedev[l][d];
		uint32_t anc[TP_MAX_LEVELS], a = d;
		for (unsigned x = l + 1; x-- > 0;) {
			anc[x] = a;
			if (x > 0)
				a = k->parent[x][a];
		}
		for (unsigned x = 0; x < l; x++)
			key->v[key->n++] = k->freedev[x][anc[x]];
		key->v[key->n++] = fsum;
	}
	key->v[key->n++] = d;
}

static bool kq_key_less(const struct kq_key *a, const struct kq_key *b)
{
	for (unsigned i = 0; i < a->n; i++)
		if (a->v[i] != b->v[i])
			return a->v[i] < b->v[i];
	return false;
}

/* The single domain of a whole level chosen for `need` units (TP_NONE when none holds them). */
static uint32_t kq_tightest_level(const struct kq *k, unsigned l, uint32_t need)
{
	uint32_t best = TP_NONE;
	struct kq_key bk = {{0}, 0}, key;
	for (uint32_t d = 0; d < k->ndom[l]; d++) {
		if (kq_units(k, l, d) < need)
			continue;
		kq_key_of(k, l, d, need, &key);
		if (best == TP_NONE || kq_key_less(&key, &bk)) {
			best = d;
			bk = key;
		}
	}
	return best;
}

static const struct kq *kq_sort_ctx; /* qsort has no context argument in C11 */
static unsigned kq_sort_level;

static int kq_cmp_largest(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	uint32_t ux = kq_units(kq_sort_ctx, kq_sort_level, x);
	uint32_t uy = kq_units(kq_sort_ctx, kq_sort_level, y);
	if (ux != uy)
		return ux > uy ? -1 : 1;
	return (x > y) - (x < y);
}

/* Order a candidate list largest first (most units, then lowest index). */
static void kq_sort_largest(const struct kq *k, unsigned l, uint32_t *list, uint32_t n)
{
	if (n > 32) {
		kq_sort_ctx = k;
		kq_sort_level = l;
		qsort(list, n, sizeof *list, kq_cmp_largest);
		return;
	}
	for (uint32_t i = 1; i < n; i++) {
		uint32_t v = list[i], j = i;
		uint32_t uv = kq_units(k, l, v);
		while (j > 0 && (kq_units(k, l, list[j - 1]) < uv ||
		                 (kq_units(k, l, list[j - 1]) == uv && list[j - 1] > v))) {
			list[j] = list[j - 1];
			j--;
		}
		list[j] = v;
	}
}

static int kq_descend(struct kq *k, unsigned l, uint32_t d, uint32_t need);

/* Split `need` units over the domains [lo, hi) of level l: largest first, and the last one the
 * tightest that holds the remainder (Kueue's rule at every level). */
static int kq_distribute(struct kq *k, unsigned l, uint32_t lo, uint32_t hi, uint32_t need)
{
	uint32_t *list = k->scratch[l] + lo; /* ranges of siblings never overlap */
	uint32_t n = 0;
	for (uint32_t d = lo; d < hi; d++)
		if (kq_units(k, l, d) > 0)
			list[n++] = d;
	kq_sort_largest(k, l, list, n);
	for (uint32_t i = 0; i < n && need > 0; i++) {
		uint32_t u = kq_units(k, l, list[i]);
		if (u >= need) {
			uint32_t best = kq_tightest(k, l, list + i, n - i, need);
			return kq_descend(k, l, best, need);
		}
		int rc = kq_descend(k, l, list[i], u);
		if (rc < 0)
			return rc;
		need -= u;
	}
	return need ? TP_EFRAGMENTED : 0;
}

/* Take `need` units of domain d of level l, descending to devices. */
static int kq_descend(struct kq *k, unsigned l, uint32_t d, uint32_t need)
{
	if (l == k->nl) {
		uint32_t want = need * kq_unit_devices(k, l);
		for (uint32_t dev = k->dev_first[d]; dev < k->dev_first[d + 1] && want; dev++) {
			if (tp_cluster_device_state(k->c, dev, NULL) != TP_DEVICE_FREE)
				continue;
			k->out[k->nout++] = dev;
			want--;
		}
		return want ? TP_EFRAGMENTED : 0;
	}
	uint32_t child_need = (int)l == k->S ? need * k->pps : need;
	return kq_distribute(k, l + 1, k->child_first[l][d], k->child_first[l][d + 1], child_need);
}

/* LeastFreeCapacity for unconstrained requests: fill the nodes with the fewest free pods
 * first (a counting sort of the nodes by free pods, lowest index first within a count). */
static int kq_least_free(struct kq *k)
{
	unsigned nl = k->nl;
	uint32_t nn = k->ndom[nl], cnt[TP_MAX_NODE_DEVICES + 2] = {0};
	for (uint32_t n = 0; n < nn; n++)
		cnt[k->pods[nl][n] + 1]++;
	for (unsigned p = 1; p < TP_MAX_NODE_DEVICES + 2; p++)
		cnt[p] += cnt[p - 1];
	for (uint32_t n = 0; n < nn; n++)
		k->order[cnt[k->pods[nl][n]]++] = n;
	uint32_t need = k->r->count / k->r->pod;
	for (uint32_t i = 0; i < nn && need > 0; i++) {
		uint32_t n = k->order[i], p = k->pods[nl][n];
		if (!p)
			continue;
		uint32_t take = p < need ? p : need;
		int rc = kq_descend(k, nl, n, take);
		if (rc < 0)
			return rc;
		need -= take;
	}
	return need ? TP_EFRAGMENTED : 0;
}

static bool kq_valid(const struct kq *k, const struct kq_request *r)
{
	if (r->count == 0 || r->pod == 0 || r->count % r->pod)
		return false;
	if (r->required > (int)k->nl || r->preferred > (int)k->nl || r->slice_level > (int)k->nl)
		return false;
	if (r->slice_level >= 0) {
		if (!r->slice_size || r->slice_size % r->pod || r->count % r->slice_size)
			return false;
		if (r->required >= 0 && r->slice_level < r->required)
			return false;
	}
	return true;
}

int kq_place(struct kq *k, const tp_cluster *c, const struct kq_request *r, uint32_t *devs,
             uint32_t *dom)
{
	if (!kq_valid(k, r))
		return TP_EINVAL;
	k->c = c;
	k->r = r;
	k->S = r->slice_level;
	k->pps = r->slice_level >= 0 ? r->slice_size / r->pod : 1;
	k->out = devs;
	k->nout = 0;
	if (dom)
		*dom = TP_NONE;
	kq_recount(k);

	uint32_t total = 0;
	for (uint32_t d = 0; d < k->ndom[0]; d++)
		total += k->freedev[0][d];
	if (total < r->count)
		return TP_EBUSY;
	if (r->required < 0 && r->preferred < 0 && r->slice_level < 0)
		return kq_least_free(k);

	if (r->required >= 0) {
		unsigned l = (unsigned)r->required;
		uint32_t need = r->count / kq_unit_devices(k, l);
		uint32_t d = kq_tightest_level(k, l, need);
		if (d == TP_NONE)
			return TP_EFRAGMENTED;
		if (dom)
			*dom = d;
		return kq_descend(k, l, d, need);
	}
	/* Preferred (a request with slices only prefers the top level). */
	int p = r->preferred >= 0 ? r->preferred : 0;
	for (int l = p; l >= 0; l--) {
		uint32_t need = r->count / kq_unit_devices(k, (unsigned)l);
		uint32_t d = kq_tightest_level(k, (unsigned)l, need);
		if (d != TP_NONE) {
			if (dom)
				*dom = d;
			return kq_descend(k, (unsigned)l, d, need);
		}
	}
	return kq_distribute(k, 0, 0, k->ndom[0], r->count / kq_unit_devices(k, 0));
}
