/* SPDX-License-Identifier: MIT */
/*
 * Fabrics per domain: a domain above the node may override its level's fabric (the builder
 * records it by prefix id; the build gives each level with an override one table of every
 * domain's fabric), and the query that reads a domain's fabric back. The node type's own
 * fabric lives in nodetype.c; tp_dom_fabric (topology_impl.h) is the one lookup the cost
 * model uses.
 */
#include "topology_builder.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int tp_topology_builder_set_domain_fabric(tp_topology_builder *b, unsigned level,
                                          const char *path, tp_link_kind kind, double gbps,
                                          double latency_us)
{
	if (!b)
		return TP_EINVAL;
	if (level + 1 >= b->nlevels)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "domain fabric level %u is not a level above the node (%u levels)",
		                 level, b->nlevels);
	if (!path)
		return tp_seterr(b->errmsg, TP_EINVAL, "domain fabric path is NULL");
	if ((unsigned)kind > TP_LINK_ETHERNET)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "domain fabric of %s %s: kind %d is not a tp_link_kind",
		                 b->levels[level], path, (int)kind);
	if (!(gbps > 0) || !isfinite(gbps))
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "domain fabric of %s %s: gbps %g is not a number > 0",
		                 b->levels[level], path, gbps);
	if (!(latency_us >= 0) || !isfinite(latency_us))
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "domain fabric of %s %s: latency_us %g is not a number >= 0",
		                 b->levels[level], path, latency_us);
	PJError_t err = NULL;
	PPvoid_t slot = strlen(path) < PATH_BUF
	                        ? JudySLGet(b->pre[level].by_path, (const uint8_t *)path, err)
	                        : NULL;
	if (!slot)
		return tp_seterr(b->errmsg, TP_ENOTFOUND,
		                 "domain fabric: no %s %s (add its nodes first)", b->levels[level],
		                 path);
	uint32_t pid = (uint32_t)((uintptr_t)*slot - 1);
	struct tp_fabric_impl f = {kind, gbps, latency_us};
	for (size_t i = 0; i < b->ndfab; i++)
		if (b->dfab[i].level == level && b->dfab[i].pid == pid) {
			b->dfab[i].f = f;
			return 0;
		}
	if (tp_grow(&b->alloc, (void **)&b->dfab, &b->cap_dfab, b->ndfab + 1, sizeof *b->dfab))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory setting the fabric of %s %s",
		                 b->levels[level], path);
	b->dfab[b->ndfab++] = (struct bdfab){level, pid, f};
	return 0;
}

int tp_build_domain_fabrics(const tp_topology_builder *b, tp_topology *t,
                            uint32_t *const *pid_to_dom)
{
	for (size_t i = 0; i < b->ndfab; i++) {
		const struct bdfab *d = &b->dfab[i];
		struct tp_level_impl *lv = &t->lv[d->level];
		if (!lv->dfab) {
			lv->dfab = tp_mallocn(&t->alloc, lv->ndom, sizeof *lv->dfab);
			if (!lv->dfab)
				return TP_ENOMEM;
			for (uint32_t k = 0; k < lv->ndom; k++)
				lv->dfab[k] = t->fabric[d->level + 1];
		}
		lv->dfab[pid_to_dom[d->level][d->pid]] = d->f;
	}
	return 0;
}

static bool fabric_equal(const struct tp_fabric_impl *x, const struct tp_fabric_impl *y)
{
	return x->kind == y->kind && x->gbps == y->gbps && x->latency_us == y->latency_us;
}

int tp_topology_domain_fabric(const tp_topology *t, int level, uint32_t dom, tp_link_kind *kind,
                              double *gbps, double *latency_us)
{
	if (!t || level < TP_LEVEL_CLUSTER || level >= (int)t->nlevels)
		return TP_EINVAL;
	if (level == TP_LEVEL_CLUSTER ? dom != 0 : dom >= t->lv[level].ndom)
		return TP_EINVAL;
	const struct tp_fabric_impl *f = tp_dom_fabric(t, level, dom);
	if (kind)
		*kind = f->kind;
	if (gbps)
		*gbps = f->gbps;
	if (latency_us)
		*latency_us = f->latency_us;
	return !fabric_equal(f, &t->fabric[level + 1]);
}

/* ---- fabric classes --------------------------------------------------------------------- */

/* What puts a node in a class: its device model, its own fabric, the fabric above it. */
struct class_key {
	uint16_t model;
	const struct tp_fabric_impl *node, *up;
};

static struct class_key node_key(const tp_topology *t, uint32_t node)
{
	int nl = (int)tp_node_level(t);
	uint32_t up = nl > 0 ? t->lv[nl].parent[node] : 0;
	return (struct class_key){t->node_model[node], tp_dom_fabric(t, nl, node),
	                          tp_dom_fabric(t, nl - 1, up)};
}

static bool same_key(const struct class_key *a, const struct class_key *b)
{
	return a->model == b->model && fabric_equal(a->node, b->node) && fabric_equal(a->up, b->up);
}

/* The class every node below (l, d) has, or -1 (pure[l] for the levels above the node). */
static int pure_class(const tp_topology *t, int8_t *const *pure, const uint8_t *cls, unsigned l,
                      uint32_t d)
{
	return l == tp_node_level(t) ? cls[d] : pure[l][d];
}

/*
 * Each class's cover: the largest domains whose nodes are all of the class (a domain of it
 * whose parent is not), so that a class's free devices are a sum over a few domains' free
 * counts (on a fleet of one class per rack: its racks or blocks, not its nodes). Two passes
 * over every domain of every level, once per topology.
 */
static int build_covers(tp_topology *t, const uint8_t *cls)
{
	unsigned nl = tp_node_level(t);
	int8_t *pure[TP_MAX_LEVELS] = {NULL};
	int rc = 0;
	for (unsigned l = nl; l-- > 0 && !rc;) {
		const struct tp_level_impl *lv = &t->lv[l];
		if (!(pure[l] = tp_mallocn(&t->alloc, lv->ndom, 1))) {
			rc = TP_ENOMEM;
			break;
		}
		for (uint32_t d = 0; d < lv->ndom; d++) {
			int k = -2;
			for (uint32_t x = lv->child_first[d]; x < lv->child_first[d + 1] && k != -1; x++) {
				int kx = pure_class(t, pure, cls, l + 1, x);
				k = k == -2 || k == kx ? kx : -1;
			}
			pure[l][d] = (int8_t)(k < 0 ? -1 : k);
		}
	}
	uint32_t ncover = 0, at[TP_FABRIC_CLASSES_MAX] = {0};
	for (int pass = 0; pass < 2 && !rc; pass++) {
		for (unsigned l = 0; l <= nl; l++)
			for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
				int k = pure_class(t, pure, cls, l, d);
				if (k < 0 || (l > 0 && pure_class(t, pure, cls, l - 1, t->lv[l].parent[d]) >= 0))
					continue;
				if (pass == 0)
					t->fclass[k].ncover++;
				else
					t->class_cover[at[k]++] = (uint64_t)l << 32 | d;
			}
		if (pass == 0) {
			for (unsigned k = 0; k < t->nclass; k++) {
				t->fclass[k].cover_first = at[k] = ncover;
				ncover += t->fclass[k].ncover;
			}
			t->class_cover = tp_mallocn(&t->alloc, ncover, sizeof *t->class_cover);
			rc = t->class_cover ? 0 : TP_ENOMEM;
		}
	}
	for (unsigned l = 0; l < nl; l++)
		tp_free(&t->alloc, pure[l]);
	return rc;
}

/*
 * One pass over the nodes, each matched against the classes found so far (at most
 * TP_FABRIC_CLASSES_MAX, so O(nodes x classes) once per topology); the node lists and each
 * node's class are kept only when there are two classes or more, the only case a floor's
 * search has anywhere else to look.
 */
int tp_build_fabric_classes(tp_topology *t)
{
	struct class_key key[TP_FABRIC_CLASSES_MAX];
	uint8_t *cls = tp_mallocn(&t->alloc, t->nnodes, sizeof *cls);
	if (!cls)
		return TP_ENOMEM;
	unsigned n = 0;
	for (uint32_t node = 0; node < t->nnodes && n <= TP_FABRIC_CLASSES_MAX; node++) {
		struct class_key k = node_key(t, node);
		unsigned c = 0;
		while (c < n && !same_key(&key[c], &k))
			c++;
		if (c == n && n++ < TP_FABRIC_CLASSES_MAX) {
			key[c] = k;
			t->fclass[c] = (struct tp_fclass){0, 0, 0, 0, 0, k.node->gbps, k.up->gbps};
		}
		if (c < TP_FABRIC_CLASSES_MAX) {
			cls[node] = (uint8_t)c;
			t->fclass[c].nnodes++;
			t->fclass[c].ndev += tp_node_ndev(t, node);
		}
	}
	t->nclass = n <= TP_FABRIC_CLASSES_MAX ? n : 0;
	if (t->nclass >= 2) {
		t->class_nodes = tp_mallocn(&t->alloc, t->nnodes, sizeof *t->class_nodes);
		if (!t->class_nodes) {
			tp_free(&t->alloc, cls);
			return TP_ENOMEM;
		}
		uint32_t at[TP_FABRIC_CLASSES_MAX], sum = 0;
		for (unsigned c = 0; c < t->nclass; c++) {
			t->fclass[c].first = at[c] = sum;
			sum += t->fclass[c].nnodes;
		}
		for (uint32_t node = 0; node < t->nnodes; node++)
			t->class_nodes[at[cls[node]]++] = node;
		t->node_class = cls; /* kept: where a refused placement lies (place_floor.c) */
		return build_covers(t, cls);
	}
	tp_free(&t->alloc, cls);
	return 0;
}
