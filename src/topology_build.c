/* SPDX-License-Identifier: MIT */
/*
 * Building a topology from a builder: nodes sorted into tree order, the per-level tables, the
 * name maps, rack NVSwitches and failure domains; and destroying one.
 */
#include "topology_builder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sort record for the (rare) case where nodes were not added in tree order: the prefix ids
 * travel with the node so the comparison needs no context (qsort has none in C11). */
struct sort_rec {
	uint32_t pid[TP_MAX_LEVELS - 1];
	uint32_t idx;
};

static int cmp_tree_order(const void *x, const void *y)
{
	const struct sort_rec *a = x, *c = y;
	for (unsigned l = 0; l < TP_MAX_LEVELS - 1; l++)
		if (a->pid[l] != c->pid[l])
			return a->pid[l] < c->pid[l] ? -1 : 1;
	return a->idx < c->idx ? -1 : a->idx > c->idx;
}

/* Fill order[] with the builder's node indices in tree order. */
static int sort_tree_order(const tp_topology_builder *b, const tp_allocator *a, uint32_t *order)
{
	struct sort_rec *rec = tp_mallocn(a, b->nnodes, sizeof *rec);
	if (!rec)
		return TP_ENOMEM;
	for (size_t i = 0; i < b->nnodes; i++) {
		memset(&rec[i], 0, sizeof rec[i]);
		memcpy(rec[i].pid, b->nodes[i].pid, (b->nlevels - 1) * sizeof(uint32_t));
		rec[i].idx = (uint32_t)i;
	}
	qsort(rec, b->nnodes, sizeof *rec, cmp_tree_order);
	for (size_t i = 0; i < b->nnodes; i++)
		order[i] = rec[i].idx;
	tp_free(a, rec);
	return 0;
}

/* Whether the nodes' prefix ids never decrease in added order (a node's pid at level l only
 * matters among nodes sharing the pids above it; since pids are given in order of first
 * appearance, a tree-ordered list has non-decreasing pids at every level). */
static bool in_tree_order(const tp_topology_builder *b)
{
	unsigned nabove = b->nlevels - 1;
	for (size_t i = 1; i < b->nnodes; i++)
		for (unsigned l = 0; l < nabove; l++) {
			if (b->nodes[i].pid[l] != b->nodes[i - 1].pid[l]) {
				if (b->nodes[i].pid[l] < b->nodes[i - 1].pid[l])
					return false;
				break;
			}
		}
	return true;
}

struct build_ctx {
	tp_topology_builder *b;
	tp_topology *t;
	uint32_t *order;          /* [nnodes] builder node index in tree order */
	uint32_t *pid_to_dom[TP_MAX_LEVELS]; /* [pre[l].n] */
};

static int judy_path_insert(tp_topology *t, Pvoid_t *map, const char *key, uint32_t value)
{
	PJError_t err = NULL;
	PPvoid_t slot = JudySLIns(map, (const uint8_t *)key, err);
	if (slot == PPJERR)
		return TP_ENOMEM;
	*slot = (void *)(uintptr_t)(value + 1);
	(void)t;
	return 0;
}

static int build_levels(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	unsigned nabove = b->nlevels - 1;
	uint32_t nn = t->nnodes;
	for (unsigned l = 0; l < nabove; l++) {
		struct tp_level_impl *lv = &t->lv[l];
		uint32_t nd = (uint32_t)b->pre[l].n;
		lv->ndom = nd;
		lv->parent = l ? tp_mallocn(a, nd, sizeof(uint32_t)) : NULL;
		lv->child_first = tp_mallocn(a, (size_t)nd + 1, sizeof(uint32_t));
		lv->node_first = tp_mallocn(a, (size_t)nd + 1, sizeof(uint32_t));
		lv->dname = tp_mallocn(a, nd, sizeof(char *));
		x->pid_to_dom[l] = tp_mallocn(a, nd, sizeof(uint32_t));
		if ((l && !lv->parent) || !lv->child_first || !lv->node_first || !lv->dname ||
		    !x->pid_to_dom[l])
			return TP_ENOMEM;
	}
	struct tp_level_impl *nlv = &t->lv[nabove];
	nlv->ndom = nn;
	nlv->parent = nabove ? tp_mallocn(a, nn, sizeof(uint32_t)) : NULL;
	nlv->dname = tp_mallocn(a, nn, sizeof(char *));
	if ((nabove && !nlv->parent) || !nlv->dname)
		return TP_ENOMEM;

	/* Walk the nodes in tree order; a new domain starts where its prefix id changes. */
	uint32_t cur[TP_MAX_LEVELS], cnt[TP_MAX_LEVELS] = {0};
	for (unsigned l = 0; l < nabove; l++)
		cur[l] = UINT32_MAX;
	for (uint32_t i = 0; i < nn; i++) {
		const struct bnode *bn = &b->nodes[x->order[i]];
		bool changed = false;
		for (unsigned l = 0; l < nabove; l++) {
			if (!changed && bn->pid[l] == cur[l])
				continue;
			changed = true;
			cur[l] = bn->pid[l];
			uint32_t d = cnt[l]++;
			x->pid_to_dom[l][bn->pid[l]] = d;
			t->lv[l].node_first[d] = i;
			t->lv[l].child_first[d] = l + 1 < nabove ? cnt[l + 1] : i;
			if (l)
				t->lv[l].parent[d] = cnt[l - 1] - 1;
		}
		if (nabove)
			nlv->parent[i] = cnt[nabove - 1] - 1;
	}
	for (unsigned l = 0; l < nabove; l++) {
		t->lv[l].node_first[cnt[l]] = nn;
		t->lv[l].child_first[cnt[l]] = l + 1 < nabove ? cnt[l + 1] : nn;
	}
	return 0;
}

/* Copy the names into one pool owned by the topology, and fill the name maps. */
static int build_names(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	unsigned nabove = b->nlevels - 1;
	t->names = tp_malloc(&t->alloc, b->pool_len);
	if (!t->names)
		return TP_ENOMEM;
	memcpy(t->names, b->pool, b->pool_len);
	t->names_len = b->pool_len;
	char buf[PATH_BUF];
	for (unsigned l = 0; l < nabove; l++) {
		for (uint32_t pid = 0; pid < b->pre[l].n; pid++) {
			uint32_t d = x->pid_to_dom[l][pid];
			t->lv[l].dname[d] = t->names + b->pre[l].name[pid];
			tp_builder_prefix_path(b, l, pid, buf);
			if (judy_path_insert(t, &t->lv[l].by_path, buf, d))
				return TP_ENOMEM;
		}
	}
	for (uint32_t i = 0; i < t->nnodes; i++) {
		const char *nm = t->names + b->nodes[x->order[i]].name;
		t->lv[nabove].dname[i] = nm;
		if (judy_path_insert(t, &t->node_by_name, nm, i))
			return TP_ENOMEM;
	}
	return 0;
}

static int build_nodes(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	uint32_t nn = t->nnodes, ndev = t->ndevices;
	t->dev_first = tp_mallocn(a, (size_t)nn + 1, sizeof(uint32_t));
	t->node_model = tp_mallocn(a, nn, sizeof(uint16_t));
	t->node_mem_gb = tp_mallocn(a, nn, sizeof(float));
	t->node_type = tp_mallocn(a, nn, sizeof(uint16_t));
	t->dev_node = tp_mallocn(a, ndev, sizeof(uint32_t));
	t->dev_perf = tp_mallocn(a, ndev, sizeof(float));
	if (!t->dev_first || !t->node_model || !t->node_mem_gb || !t->node_type || !t->dev_node ||
	    !t->dev_perf)
		return TP_ENOMEM;
	uint32_t dev = 0;
	for (uint32_t i = 0; i < nn; i++) {
		const struct bnode *bn = &b->nodes[x->order[i]];
		t->dev_first[i] = dev;
		t->node_model[i] = bn->model;
		t->node_mem_gb[i] = bn->mem_gb;
		t->node_type[i] = bn->type;
		if (bn->ngpus > t->max_node_devices)
			t->max_node_devices = bn->ngpus;
		for (uint32_t k = 0; k < bn->ngpus; k++, dev++) {
			t->dev_node[dev] = i;
			t->dev_perf[dev] = bn->perf == NO_PERF ? bn->perf1 : b->perfs[bn->perf + k];
		}
	}
	t->dev_first[nn] = dev;
	/* Largest domain at each level, in devices and in nodes (the index and histograms use it). */
	for (unsigned l = 0; l + 1 < t->nlevels; l++) {
		for (uint32_t d = 0; d < t->lv[l].ndom; d++) {
			uint32_t f = t->lv[l].node_first[d], e = t->lv[l].node_first[d + 1];
			uint32_t nd = t->dev_first[e] - t->dev_first[f];
			if (nd > t->lv[l].max_devices)
				t->lv[l].max_devices = nd;
			if (e - f > t->lv[l].max_nodes)
				t->lv[l].max_nodes = e - f;
		}
	}
	t->lv[t->nlevels - 1].max_devices = t->max_node_devices;
	t->lv[t->nlevels - 1].max_nodes = 1;
	return 0;
}

static int build_tables(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	for (unsigned l = 0; l < b->nlevels; l++) {
		t->lv[l].name = tp_strdup(a, b->levels[l]);
		if (!t->lv[l].name)
			return TP_ENOMEM;
	}
	memcpy(t->fabric, b->fabric, sizeof t->fabric);
	if (b->nmodels) {
		t->models = tp_calloc(a, b->nmodels, sizeof(char *));
		if (!t->models)
			return TP_ENOMEM;
		for (size_t i = 0; i < b->nmodels; i++, t->nmodels++)
			if (!(t->models[i] = tp_strdup(a, b->models[i])))
				return TP_ENOMEM;
	}
	if (b->ntypes) {
		t->types = tp_calloc(a, b->ntypes, sizeof(tp_nodetype *));
		if (!t->types)
			return TP_ENOMEM;
		for (size_t i = 0; i < b->ntypes; i++, t->ntypes++)
			if (!(t->types[i] = tp_nt_clone(b->types[i], a)))
				return TP_ENOMEM;
	}
	/* A node type's pair figures set the bandwidth inside its nodes unless the caller set
	 * the node level's fabric and the type sets none of its own (docs/cost-model.md). */
	t->node_fabric_set = b->fabric_set[b->nlevels];
	for (unsigned i = 0; i < t->ntypes; i++)
		t->type_nvlink = t->type_nvlink || tp_nt_figures_apply(t, t->types[i]);
	if (t->type_nvlink) {
		if (!(t->type_figures = tp_calloc(a, t->ntypes, sizeof(bool))))
			return TP_ENOMEM;
		for (unsigned i = 0; i < t->ntypes; i++)
			t->type_figures[i] = tp_nt_figures_apply(t, t->types[i]);
	}
	return 0;
}

static int build_nvswitches(struct build_ctx *x)
{
	tp_topology *t = x->t;
	for (size_t i = 0; i < x->b->nnvs; i++) {
		const struct bnvs *v = &x->b->nvs[i];
		struct tp_level_impl *lv = &t->lv[v->level];
		if (!lv->nvswitches && !(lv->nvswitches = tp_calloc(&t->alloc, lv->ndom, sizeof(uint16_t))))
			return TP_ENOMEM;
		uint16_t *n = &lv->nvswitches[x->pid_to_dom[v->level][v->pid]];
		if (*n < UINT16_MAX)
			(*n)++;
	}
	return 0;
}

/* Failure domains: named domains first (in order of first mention), then one implicit domain
 * for every node (or device of a partly listed node) not listed. */
static int build_fd(struct build_ctx *x)
{
	tp_topology_builder *b = x->b;
	tp_topology *t = x->t;
	const tp_allocator *a = &t->alloc;
	if (!b->nfd)
		return 0;
	t->fd = tp_calloc(a, b->nfd, sizeof *t->fd);
	if (!t->fd)
		return TP_ENOMEM;
	t->nfd_alloc = (unsigned)b->nfd;
	uint32_t *inv = tp_mallocn(a, t->nnodes ? t->nnodes : 1, sizeof(uint32_t));
	if (!inv)
		return TP_ENOMEM;
	for (uint32_t i = 0; i < t->nnodes; i++)
		inv[x->order[i]] = i;
	int rc = TP_ENOMEM;
	for (size_t ki = 0; ki < b->nfd; ki++, t->nfd++) {
		const struct bfd_kind *k = &b->fd[ki];
		struct tp_fd_kind *fk = &t->fd[ki];
		if (!(fk->name = tp_strdup(a, k->name)))
			goto out;
		fk->dev_fd = tp_mallocn(a, t->ndevices, sizeof(uint32_t));
		if (!fk->dev_fd)
			goto out;
		for (uint32_t d = 0; d < t->ndevices; d++)
			fk->dev_fd[d] = TP_NONE;
		for (size_t m = 0; m < k->nmem; m++) {
			const struct bfd_member *mb = &k->members[m];
			uint32_t node = inv[mb->node];
			uint32_t f = t->dev_first[node], e = t->dev_first[node + 1];
			if (mb->device >= 0)
				fk->dev_fd[f + (uint32_t)mb->device] = mb->dom;
			else
				for (uint32_t d = f; d < e; d++)
					fk->dev_fd[d] = mb->dom;
		}
		/* Implicit domains: count them, then name them. */
		size_t extra = 0;
		for (uint32_t node = 0; node < t->nnodes; node++) {
			uint32_t f = t->dev_first[node], e = t->dev_first[node + 1], unl = 0;
			for (uint32_t d = f; d < e; d++)
				unl += fk->dev_fd[d] == TP_NONE;
			extra += unl == e - f ? 1 : unl;
		}
		fk->ndom = (uint32_t)(k->ndom + extra);
		fk->dname = tp_calloc(a, fk->ndom, sizeof(char *));
		if (!fk->dname)
			goto out;
		for (size_t i = 0; i < k->ndom; i++)
			if (!(fk->dname[i] = tp_strdup(a, k->dom_names[i])))
				goto out;
		uint32_t next = (uint32_t)k->ndom;
		char buf[TP_MAX_NAME + 16];
		for (uint32_t node = 0; node < t->nnodes; node++) {
			uint32_t f = t->dev_first[node], e = t->dev_first[node + 1], unl = 0;
			for (uint32_t d = f; d < e; d++)
				unl += fk->dev_fd[d] == TP_NONE;
			if (!unl)
				continue;
			const char *nm = t->lv[t->nlevels - 1].dname[node];
			if (unl == e - f) {
				if (!(fk->dname[next] = tp_strdup(a, nm)))
					goto out;
				for (uint32_t d = f; d < e; d++)
					fk->dev_fd[d] = next;
				next++;
				continue;
			}
			for (uint32_t d = f; d < e; d++) {
				if (fk->dev_fd[d] != TP_NONE)
					continue;
				snprintf(buf, sizeof buf, "%s/%u", nm, d - f);
				if (!(fk->dname[next] = tp_strdup(a, buf)))
					goto out;
				fk->dev_fd[d] = next++;
			}
		}
	}
	rc = 0;
out:
	tp_free(a, inv);
	return rc;
}

int tp_topology_build(tp_topology_builder *b, tp_topology **out)
{
	if (!b || !out)
		return TP_EINVAL;
	*out = NULL;
	if (b->nnodes == 0)
		return tp_seterr(b->errmsg, TP_EINVAL, "the topology has no node");
	tp_topology *t = tp_calloc(&b->alloc, 1, sizeof *t);
	if (!t)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory building the topology");
	t->alloc = b->alloc;
	t->id = tp_identity_next();
	t->nlevels = b->nlevels;
	t->nnodes = (uint32_t)b->nnodes;
	t->ndevices = (uint32_t)b->ndevices;
	struct build_ctx x = {b, t, NULL, {NULL}};
	int rc = TP_ENOMEM;
	bool said = false; /* the grid check wrote its own message */
	x.order = tp_mallocn(&t->alloc, b->nnodes, sizeof(uint32_t));
	if (!x.order)
		goto out;
	for (uint32_t i = 0; i < t->nnodes; i++)
		x.order[i] = i;
	if (!in_tree_order(b) && (rc = sort_tree_order(b, &t->alloc, x.order)) != 0)
		goto out;
	rc = build_tables(&x);
	if (!rc)
		rc = build_levels(&x);
	if (!rc)
		rc = build_nodes(&x);
	if (!rc)
		rc = build_names(&x);
	if (!rc)
		rc = build_nvswitches(&x);
	if (!rc)
		rc = build_fd(&x);
	if (!rc)
		rc = tp_build_domain_fabrics(b, t, x.pid_to_dom);
	if (!rc)
		rc = tp_build_fabric_classes(t);
	if (!rc) {
		struct build_grid_in gin = {x.order, x.pid_to_dom};
		rc = tp_build_grids(b, t, &gin);
		said = rc != 0;
	}
out:
	tp_free(&t->alloc, x.order);
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		tp_free(&t->alloc, x.pid_to_dom[l]);
	if (rc) {
		tp_topology_destroy(t);
		return said ? rc : tp_seterr(b->errmsg, rc, "out of memory building the topology");
	}
	*out = t;
	return 0;
}

void tp_topology_destroy(tp_topology *t)
{
	if (!t)
		return;
	tp_allocator a = t->alloc;
	PJError_t err = NULL;
	for (unsigned l = 0; l < t->nlevels; l++) {
		struct tp_level_impl *lv = &t->lv[l];
		tp_free(&a, lv->name);
		tp_free(&a, lv->parent);
		tp_free(&a, lv->child_first);
		tp_free(&a, lv->node_first);
		tp_free(&a, (void *)lv->dname);
		tp_free(&a, lv->nvswitches);
		tp_free(&a, lv->dfab);
		JudySLFreeArray(&lv->by_path, err);
	}
	tp_free(&a, t->dev_first);
	tp_free(&a, t->node_model);
	tp_free(&a, t->node_mem_gb);
	tp_free(&a, t->node_type);
	JudySLFreeArray(&t->node_by_name, err);
	tp_free(&a, t->dev_node);
	tp_free(&a, t->dev_perf);
	for (unsigned i = 0; i < t->nmodels; i++)
		tp_free(&a, t->models[i]);
	tp_free(&a, t->models);
	for (unsigned i = 0; i < t->ntypes; i++)
		tp_nodetype_destroy(t->types[i]);
	tp_free(&a, t->types);
	tp_free(&a, t->type_figures);
	/* Every allocated kind, including one a failed build left half built (zeroed fields). */
	for (unsigned k = 0; t->fd && k < t->nfd_alloc; k++) {
		struct tp_fd_kind *fk = &t->fd[k];
		tp_free(&a, fk->name);
		if (fk->dname)
			for (uint32_t i = 0; i < fk->ndom; i++)
				tp_free(&a, (void *)fk->dname[i]);
		tp_free(&a, (void *)fk->dname);
		tp_free(&a, fk->dev_fd);
	}
	tp_free(&a, t->fd);
	tp_grids_free(t);
	tp_free(&a, t->class_nodes);
	tp_free(&a, t->node_class);
	tp_free(&a, t->class_cover);
	tp_free(&a, t->names);
	tp_free(&a, t);
}

int tp_node_options_init(tp_node_options *o, unsigned version)
{
	static const tp_node_options init = TP_NODE_OPTIONS_INIT;
	return tp_options_init(o, version == TP_NODE_OPTIONS_VERSION ? sizeof init : 0, &init, version);
}
