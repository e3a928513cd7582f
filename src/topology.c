/* SPDX-License-Identifier: MIT */
/*
 * The topology builder: levels, fabrics, nodes, generated trees, failure domains and rack
 * NVSwitches (topology_builder.h has the layout; topology_build.c turns it into a topology).
 */
#include "topology_builder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct tp_fabric_impl default_node_fabric = {TP_LINK_NVLINK, 900.0, 3.4};
static const struct tp_fabric_impl default_level_fabric = {TP_LINK_IB, 50.0, 14.0};
static const struct tp_fabric_impl default_cluster_fabric = {TP_LINK_IB, 25.0, 20.0};

int tp_topology_builder_create(tp_topology_builder **out, const char *const *levels,
                               unsigned nlevels, const tp_allocator *alloc)
{
	if (!out)
		return TP_EINVAL;
	*out = NULL;
	if (!levels || !tp_alloc_valid(alloc) || nlevels == 0)
		return TP_EINVAL;
	if (nlevels > TP_MAX_LEVELS)
		return TP_ELIMIT;
	for (unsigned i = 0; i < nlevels; i++) {
		if (tp_name_problem(levels[i], true) || !strcmp(levels[i], "cluster"))
			return TP_EINVAL;
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(levels[i], levels[j]))
				return TP_EINVAL;
	}
	tp_allocator a = tp_alloc_resolve(alloc);
	tp_topology_builder *b = tp_calloc(&a, 1, sizeof *b);
	if (!b)
		return TP_ENOMEM;
	b->alloc = a;
	b->nlevels = nlevels;
	for (unsigned i = 0; i < nlevels; i++) {
		b->levels[i] = tp_strdup(&a, levels[i]);
		if (!b->levels[i]) {
			tp_topology_builder_destroy(b);
			return TP_ENOMEM;
		}
	}
	b->fabric[0] = default_cluster_fabric;
	for (unsigned i = 0; i < nlevels; i++)
		b->fabric[i + 1] = i + 1 == nlevels ? default_node_fabric : default_level_fabric;
	b->max_devices = TP_DEFAULT_MAX_DEVICES;
	b->max_nodes = TP_DEFAULT_MAX_NODES;
	*out = b;
	return 0;
}

static void fd_kind_free(tp_topology_builder *b, struct bfd_kind *k)
{
	PJError_t err = NULL;
	tp_free(&b->alloc, k->name);
	for (size_t i = 0; i < k->ndom; i++)
		tp_free(&b->alloc, k->dom_names[i]);
	tp_free(&b->alloc, k->dom_names);
	tp_free(&b->alloc, k->members);
	JudySLFreeArray(&k->dom_by_name, err);
	Judy1FreeArray(&k->whole, err);
	JudyLFreeArray(&k->partial, err);
	Judy1FreeArray(&k->devs, err);
}

void tp_topology_builder_destroy(tp_topology_builder *b)
{
	if (!b)
		return;
	PJError_t err = NULL;
	tp_allocator a = b->alloc;
	for (unsigned i = 0; i < b->nlevels; i++)
		tp_free(&a, b->levels[i]);
	tp_free(&a, b->nodes);
	JudySLFreeArray(&b->node_by_name, err);
	tp_free(&a, b->pool);
	for (unsigned i = 0; i + 1 < TP_MAX_LEVELS; i++) {
		JudySLFreeArray(&b->pre[i].by_path, err);
		tp_free(&a, b->pre[i].name);
		tp_free(&a, b->pre[i].parent);
	}
	tp_free(&a, b->perfs);
	for (size_t i = 0; i < b->nmodels; i++)
		tp_free(&a, b->models[i]);
	tp_free(&a, b->models);
	for (size_t i = 0; i < b->ntypes; i++)
		tp_nodetype_destroy(b->types[i]);
	tp_free(&a, b->types);
	for (size_t i = 0; i < b->nfd; i++)
		fd_kind_free(b, &b->fd[i]);
	tp_free(&a, b->fd);
	tp_free(&a, b->nvs);
	tp_free(&a, b->dfab);
	tp_builder_grids_free(b);
	JudySLFreeArray(&b->nvs_names, err);
	tp_free(&a, b);
}

const char *tp_topology_builder_errmsg(const tp_topology_builder *b)
{
	return b ? b->errmsg : "";
}

int tp_topology_builder_set_fabric(tp_topology_builder *b, int level, tp_link_kind kind,
                                   double gbps, double latency_us)
{
	if (!b)
		return TP_EINVAL;
	if (level < TP_LEVEL_CLUSTER || level >= (int)b->nlevels)
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric level %d does not exist (%u levels)",
		                 level, b->nlevels);
	if ((unsigned)kind > TP_LINK_ETHERNET)
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric kind %d is not a tp_link_kind",
		                 (int)kind);
	if (!(gbps > 0) || !isfinite(gbps))
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric gbps %g is not a number > 0", gbps);
	if (!(latency_us >= 0) || !isfinite(latency_us))
		return tp_seterr(b->errmsg, TP_EINVAL, "fabric latency_us %g is not a number >= 0",
		                 latency_us);
	b->fabric[level + 1] = (struct tp_fabric_impl){kind, gbps, latency_us};
	b->fabric_set[level + 1] = true;
	return 0;
}

/* Copy a string into the pool; its offset, or UINT32_MAX when out of memory. Room must have
 * been reserved with pool_reserve for the all-or-nothing paths. */
static int pool_reserve(tp_topology_builder *b, size_t bytes)
{
	if (b->pool_len + bytes > UINT32_MAX - 1)
		return TP_ELIMIT;
	return tp_grow(&b->alloc, (void **)&b->pool, &b->pool_cap, b->pool_len + bytes, 1);
}

static uint32_t pool_put(tp_topology_builder *b, const char *s)
{
	size_t n = strlen(s) + 1;
	uint32_t off = (uint32_t)b->pool_len;
	memcpy(b->pool + off, s, n);
	b->pool_len += n;
	return off;
}

/* Index of a model name in the builder's table, adding it when new; -1 when out of memory. */
static int intern_model(tp_topology_builder *b, const char *model)
{
	for (size_t i = 0; i < b->nmodels; i++)
		if (!strcmp(b->models[i], model))
			return (int)i;
	if (b->nmodels >= TP_NO_MODEL)
		return -2;
	char *copy = tp_strdup(&b->alloc, model);
	if (!copy || tp_grow(&b->alloc, (void **)&b->models, &b->cap_models, b->nmodels + 1,
	                     sizeof *b->models)) {
		tp_free(&b->alloc, copy);
		return -1;
	}
	b->models[b->nmodels] = copy;
	return (int)b->nmodels++;
}

/* Index of a node type in the builder's table (an equal one is shared), adding a copy. */
static int intern_type(tp_topology_builder *b, const tp_nodetype *nt)
{
	for (size_t i = 0; i < b->ntypes; i++)
		if (b->types[i] == nt || tp_nt_equal(b->types[i], nt))
			return (int)i;
	if (b->ntypes >= TP_NO_TYPE)
		return -2;
	tp_nodetype *copy = tp_nt_clone(nt, &b->alloc);
	if (!copy || tp_grow(&b->alloc, (void **)&b->types, &b->cap_types, b->ntypes + 1,
	                     sizeof *b->types)) {
		tp_nodetype_destroy(copy);
		return -1;
	}
	b->types[b->ntypes] = copy;
	return (int)b->ntypes++;
}

/* Forget models and node types interned by a call that then failed (they are the newest). */
static void unintern(tp_topology_builder *b, size_t nmodels, size_t ntypes)
{
	while (b->nmodels > nmodels)
		tp_free(&b->alloc, b->models[--b->nmodels]);
	while (b->ntypes > ntypes)
		tp_nodetype_destroy(b->types[--b->ntypes]);
}

/* Validate node options; NULL when fine, else a message written into b->errmsg. */
static int check_node_options(tp_topology_builder *b, const char *name, unsigned gpus,
                              const tp_node_options *o)
{
	if (o->version < 1 || o->version > TP_NODE_OPTIONS_VERSION)
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: options version %u is not supported",
		                 name, o->version);
	if (o->model) {
		const char *why = tp_name_problem(o->model, false);
		if (why)
			return tp_seterr(b->errmsg, TP_EINVAL, "node %s: model %s", name, why);
	}
	if (!(o->memory_gb >= 0) || !isfinite(o->memory_gb))
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: memory_gb %g is not a number >= 0",
		                 name, o->memory_gb);
	if (!o->device_perf && (!(o->perf > 0) || !isfinite(o->perf)))
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: perf %g is not a number > 0", name,
		                 o->perf);
	if (o->device_perf)
		for (unsigned i = 0; i < gpus; i++)
			if (!(o->device_perf[i] > 0) || !isfinite(o->device_perf[i]))
				return tp_seterr(b->errmsg, TP_EINVAL,
				                 "node %s: perf of device %u is %g, not a number > 0", name,
				                 i, o->device_perf[i]);
	if (o->type && o->type->ngpus != gpus)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "node %s: gpus %u differs from its node type's %u GPUs", name, gpus,
		                 o->type->ngpus);
	return 0;
}

/* Build "p0/p1/.../pk" for the first k+1 path components into buf. */
static size_t join_path(char *buf, size_t cap, const char *const *path, unsigned upto)
{
	size_t len = 0;
	for (unsigned i = 0; i <= upto; i++) {
		size_t n = strlen(path[i]);
		if (len + n + 2 > cap)
			return 0;
		if (i)
			buf[len++] = '/';
		memcpy(buf + len, path[i], n);
		len += n;
	}
	buf[len] = '\0';
	return len;
}

/* Undo the Judy insertions of a failed add_node: the prefixes created (from level `from`)
 * and, when `named`, the node's name. */
static void unwind_prefixes(tp_topology_builder *b, const char *const *path, const bool *created,
                            unsigned nabove)
{
	char buf[PATH_BUF];
	PJError_t err = NULL;
	for (unsigned l = 0; l < nabove; l++) {
		if (!created[l])
			continue;
		join_path(buf, sizeof buf, path, l);
		JudySLDel(&b->pre[l].by_path, (const uint8_t *)buf, err);
		b->pre[l].n--;
	}
}

/* One more node of gpus devices stays within the builder's budgets. */
static int check_budgets(tp_topology_builder *b, const char *name, unsigned gpus)
{
	if (b->nnodes + 1 > b->max_nodes)
		return tp_seterr(b->errmsg, TP_ELIMIT,
		                 "node %s: the topology would have %zu nodes, more than max_nodes %u "
		                 "(raise it with tp_topology_builder_set_limits)", name, b->nnodes + 1,
		                 (unsigned)b->max_nodes);
	if (b->ndevices + gpus > b->max_devices)
		return tp_seterr(b->errmsg, TP_ELIMIT,
		                 "node %s: the topology would have %llu devices, more than "
		                 "max_devices %u (raise it with tp_topology_builder_set_limits)", name,
		                 (unsigned long long)(b->ndevices + gpus), (unsigned)b->max_devices);
	return 0;
}

int tp_topology_builder_add_node(tp_topology_builder *b, const char *name,
                                 const char *const *path, unsigned gpus,
                                 const tp_node_options *opts)
{
	if (!b)
		return TP_EINVAL;
	const tp_node_options dflt = TP_NODE_OPTIONS_INIT;
	const tp_node_options *o = opts ? opts : &dflt;
	const char *why = tp_name_problem(name, true);
	if (why && !name)
		return tp_seterr(b->errmsg, TP_EINVAL, "node name %s", why);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "node name '%.300s' %s", name, why);
	unsigned nabove = b->nlevels - 1;
	if (nabove && !path)
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: path is NULL (%u names needed)", name,
		                 nabove);
	for (unsigned l = 0; l < nabove; l++) {
		why = tp_name_problem(path[l], true);
		if (why)
			return tp_seterr(b->errmsg, TP_EINVAL, "node %s: path[%u] (%s) %s", name, l,
			                 b->levels[l], why);
	}
	if (gpus < 1 || gpus > TP_MAX_NODE_DEVICES)
		return tp_seterr(b->errmsg, TP_EINVAL, "node %s: gpus %u is not in 1..%d", name, gpus,
		                 TP_MAX_NODE_DEVICES);
	int rc = check_node_options(b, name, gpus, o);
	if (rc)
		return rc;
	PJError_t err = NULL;
	if (JudySLGet(b->node_by_name, (const uint8_t *)name, err))
		return tp_seterr(b->errmsg, TP_EEXIST, "node name %s is used twice", name);
	if ((rc = check_budgets(b, name, gpus)))
		return rc;

	/* Reserve everything that can be reserved before the first change. */
	size_t pool_need = strlen(name) + 1;
	for (unsigned l = 0; l < nabove; l++)
		pool_need += strlen(path[l]) + 1;
	if (pool_reserve(b, pool_need) ||
	    tp_grow(&b->alloc, (void **)&b->nodes, &b->cap_nodes, b->nnodes + 1, sizeof *b->nodes))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	if (o->device_perf &&
	    tp_grow(&b->alloc, (void **)&b->perfs, &b->cap_perfs, b->nperfs + gpus, sizeof(float)))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	for (unsigned l = 0; l < nabove; l++) {
		struct bprefix *p = &b->pre[l];
		size_t cap1 = p->cap, cap2 = p->cap;
		if (tp_grow(&b->alloc, (void **)&p->name, &cap1, p->n + 1, sizeof *p->name) ||
		    tp_grow(&b->alloc, (void **)&p->parent, &cap2, p->n + 1, sizeof *p->parent))
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
		p->cap = cap1 < cap2 ? cap1 : cap2;
	}
	size_t nmodels0 = b->nmodels, ntypes0 = b->ntypes;
	int model = o->model ? intern_model(b, o->model) : TP_NO_MODEL;
	int type = o->type && model >= 0 ? intern_type(b, o->type) : TP_NO_TYPE;
	if (model < 0 || type < 0) {
		unintern(b, nmodels0, ntypes0);
		if (model == -2 || type == -2)
			return tp_seterr(b->errmsg, TP_ELIMIT,
			                 "node %s: more than 65534 models or node types", name);
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	}

	/* Domains of the path: look up or create each prefix. */
	struct bnode nd = {0};
	bool created[TP_MAX_LEVELS] = {false};
	char buf[PATH_BUF];
	for (unsigned l = 0; l < nabove; l++) {
		struct bprefix *p = &b->pre[l];
		join_path(buf, sizeof buf, path, l);
		PPvoid_t slot = JudySLIns(&p->by_path, (const uint8_t *)buf, err);
		if (slot == PPJERR) {
			unwind_prefixes(b, path, created, l);
			unintern(b, nmodels0, ntypes0);
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
		}
		if (!*slot) {
			*slot = (void *)(uintptr_t)(p->n + 1);
			p->parent[p->n] = l ? nd.pid[l - 1] : 0;
			p->n++;
			created[l] = true;
		}
		nd.pid[l] = (uint32_t)((uintptr_t)*slot - 1);
	}
	PPvoid_t nslot = JudySLIns(&b->node_by_name, (const uint8_t *)name, err);
	if (nslot == PPJERR) {
		unwind_prefixes(b, path, created, nabove);
		unintern(b, nmodels0, ntypes0);
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding node %s", name);
	}
	*nslot = (void *)(uintptr_t)(b->nnodes + 1);

	/* Nothing can fail from here on. */
	for (unsigned l = 0; l < nabove; l++)
		if (created[l])
			b->pre[l].name[nd.pid[l]] = pool_put(b, path[l]);
	nd.name = pool_put(b, name);
	nd.ngpus = gpus;
	nd.model = (uint16_t)model;
	nd.type = (uint16_t)type;
	nd.mem_gb = (float)o->memory_gb;
	nd.perf1 = (float)(o->device_perf ? 1.0 : o->perf);
	nd.perf = NO_PERF;
	if (o->device_perf) {
		nd.perf = (uint32_t)b->nperfs;
		for (unsigned i = 0; i < gpus; i++)
			b->perfs[b->nperfs++] = (float)o->device_perf[i];
	}
	b->nodes[b->nnodes++] = nd;
	b->ndevices += gpus;
	return 0;
}

void tp_builder_prefix_path(const tp_topology_builder *b, unsigned l, uint32_t pid, char *buf)
{
	uint32_t chain[TP_MAX_LEVELS];
	for (unsigned k = l + 1; k-- > 0;) {
		chain[k] = pid;
		pid = b->pre[k].parent[pid];
	}
	size_t len = 0;
	for (unsigned k = 0; k <= l; k++) {
		const char *nm = b->pool + b->pre[k].name[chain[k]];
		size_t n = strlen(nm);
		if (k)
			buf[len++] = '/';
		memcpy(buf + len, nm, n);
		len += n;
	}
	buf[len] = '\0';
}

/* What a builder holds, to return to it when a multi-node call fails half way. */
struct builder_mark {
	size_t nnodes, pool_len, nperfs, npre[TP_MAX_LEVELS], nmodels, ntypes;
	uint64_t ndevices;
};

static struct builder_mark builder_mark(const tp_topology_builder *b)
{
	struct builder_mark m = {b->nnodes, b->pool_len, b->nperfs, {0}, b->nmodels, b->ntypes,
	                         b->ndevices};
	for (unsigned l = 0; l + 1 < b->nlevels; l++)
		m.npre[l] = b->pre[l].n;
	return m;
}

static void builder_rewind(tp_topology_builder *b, const struct builder_mark *m)
{
	PJError_t err = NULL;
	char buf[PATH_BUF];
	for (size_t i = m->nnodes; i < b->nnodes; i++)
		JudySLDel(&b->node_by_name, (const uint8_t *)(b->pool + b->nodes[i].name), err);
	for (unsigned l = 0; l + 1 < b->nlevels; l++) {
		for (size_t pid = m->npre[l]; pid < b->pre[l].n; pid++) {
			tp_builder_prefix_path(b, l, (uint32_t)pid, buf);
			JudySLDel(&b->pre[l].by_path, (const uint8_t *)buf, err);
		}
		b->pre[l].n = m->npre[l];
	}
	unintern(b, m->nmodels, m->ntypes);
	b->nnodes = m->nnodes;
	b->pool_len = m->pool_len;
	b->nperfs = m->nperfs;
	b->ndevices = m->ndevices;
}

int tp_topology_builder_set_limits(tp_topology_builder *b, uint32_t max_devices,
                                   uint32_t max_nodes)
{
	if (!b)
		return TP_EINVAL;
	if (max_devices < 1 || max_devices > TP_LIMIT_MAX_DEVICES)
		return tp_seterr(b->errmsg, TP_EINVAL, "max_devices %u is not in 1..%u",
		                 (unsigned)max_devices, (unsigned)TP_LIMIT_MAX_DEVICES);
	if (max_nodes < 1 || max_nodes > TP_LIMIT_MAX_DEVICES)
		return tp_seterr(b->errmsg, TP_EINVAL, "max_nodes %u is not in 1..%u",
		                 (unsigned)max_nodes, (unsigned)TP_LIMIT_MAX_DEVICES);
	if (b->ndevices > max_devices || b->nnodes > max_nodes)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "the builder already holds %zu nodes and %llu devices, more than "
		                 "max_nodes %u or max_devices %u", b->nnodes,
		                 (unsigned long long)b->ndevices, (unsigned)max_nodes,
		                 (unsigned)max_devices);
	b->max_devices = max_devices;
	b->max_nodes = max_nodes;
	return 0;
}

int tp_topology_builder_generate(tp_topology_builder *b, const unsigned *counts,
                                 unsigned gpus_per_node, const tp_node_options *opts)
{
	if (!b)
		return TP_EINVAL;
	if (!counts)
		return tp_seterr(b->errmsg, TP_EINVAL, "generate: counts is NULL");
	uint64_t total = 1;
	for (unsigned l = 0; l < b->nlevels; l++) {
		if (counts[l] < 1)
			return tp_seterr(b->errmsg, TP_EINVAL, "generate: counts[%u] (%s) is 0", l,
			                 b->levels[l]);
		total *= counts[l];
		if (total > UINT32_MAX) /* and the product below cannot overflow */
			break;
	}
	if (b->nnodes + total > b->max_nodes)
		return tp_seterr(b->errmsg, TP_ELIMIT,
		                 "generate: the topology would have %llu nodes or more, more than "
		                 "max_nodes %u (raise it with tp_topology_builder_set_limits)",
		                 (unsigned long long)(b->nnodes + total), (unsigned)b->max_nodes);
	if (b->ndevices + total * gpus_per_node > b->max_devices)
		return tp_seterr(b->errmsg, TP_ELIMIT,
		                 "generate: the topology would have %llu devices, more than "
		                 "max_devices %u (raise it with tp_topology_builder_set_limits)",
		                 (unsigned long long)(b->ndevices + total * gpus_per_node),
		                 (unsigned)b->max_devices);
	struct builder_mark mark = builder_mark(b);
	unsigned idx[TP_MAX_LEVELS] = {0};
	char names[TP_MAX_LEVELS][TP_MAX_NAME + 16];
	const char *path[TP_MAX_LEVELS];
	char node_name[PATH_BUF + TP_MAX_LEVELS * 16];
	unsigned nl = b->nlevels;
	for (uint64_t i = 0; i < total; i++) {
		size_t len = 0;
		for (unsigned l = 0; l < nl; l++) {
			int n = snprintf(names[l], sizeof names[l], "%s%u", b->levels[l], idx[l]);
			path[l] = names[l];
			memcpy(node_name + len, names[l], (size_t)n);
			len += (size_t)n;
			node_name[len++] = l + 1 < nl ? '-' : '\0';
		}
		int rc = tp_topology_builder_add_node(b, node_name, path, gpus_per_node, opts);
		if (rc) {
			char msg[TP_ERRMSG_LEN];
			memcpy(msg, b->errmsg, sizeof msg);
			builder_rewind(b, &mark);
			return tp_seterr(b->errmsg, rc, "generate: %.480s", msg);
		}
		for (unsigned l = nl; l-- > 0;) {
			if (++idx[l] < counts[l])
				break;
			idx[l] = 0;
		}
	}
	return 0;
}

/* ---- failure domains and rack NVSwitches --------------------------------------------------- */

static struct bfd_kind *find_fd_kind(tp_topology_builder *b, const char *kind)
{
	for (size_t i = 0; i < b->nfd; i++)
		if (!strcmp(b->fd[i].name, kind))
			return &b->fd[i];
	return NULL;
}

int tp_topology_builder_add_failure_domain(tp_topology_builder *b, const char *kind,
                                           const char *domain, const char *node, int device)
{
	if (!b)
		return TP_EINVAL;
	const char *why = tp_name_problem(kind, true);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "failure-domain kind %s", why);
	for (unsigned l = 0; l < b->nlevels; l++)
		if (!strcmp(kind, b->levels[l]))
			return tp_seterr(b->errmsg, TP_EINVAL,
			                 "failure-domain kind %s is a level name", kind);
	if (!strcmp(kind, "cluster"))
		return tp_seterr(b->errmsg, TP_EINVAL, "failure-domain kind may not be 'cluster'");
	why = tp_name_problem(domain, true);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "failure domain name (kind %s) %s", kind, why);
	if (!node)
		return tp_seterr(b->errmsg, TP_EINVAL, "failure domain %s: node is NULL", domain);
	PJError_t err = NULL;
	PPvoid_t ns = JudySLGet(b->node_by_name, (const uint8_t *)node, err);
	if (!ns)
		return tp_seterr(b->errmsg, TP_ENOTFOUND, "failure domain %s/%s: unknown node %s",
		                 kind, domain, node);
	uint32_t nid = (uint32_t)((uintptr_t)*ns - 1);
	if (device < -1 || (device >= 0 && (uint32_t)device >= b->nodes[nid].ngpus))
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "failure domain %s/%s: node %s has no device %d", kind, domain, node,
		                 device);
	struct bfd_kind *k = find_fd_kind(b, kind);
	if (k) {
		int whole = Judy1Test(k->whole, nid, err);
		PPvoid_t part = JudyLGet(k->partial, nid, err);
		if (whole || (device < 0 && part)) {
			if (device < 0)
				return tp_seterr(b->errmsg, TP_EEXIST, "%s is listed twice under kind %s",
				                 node, kind);
			return tp_seterr(b->errmsg, TP_EEXIST,
			                 "%s/%d is listed twice under kind %s (node %s is listed whole)",
			                 node, device, kind, node);
		}
		if (device >= 0 && Judy1Test(k->devs, (Word_t)nid << 9 | (Word_t)device, err))
			return tp_seterr(b->errmsg, TP_EEXIST, "%s/%d is listed twice under kind %s", node,
			                 device, kind);
	}
	/* Reserve, then insert; undo the insertions that succeeded if a later one fails. */
	bool new_kind = !k;
	if (new_kind) {
		if (tp_grow(&b->alloc, (void **)&b->fd, &b->cap_fd, b->nfd + 1, sizeof *b->fd))
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory");
		k = &b->fd[b->nfd];
		memset(k, 0, sizeof *k);
		k->name = tp_strdup(&b->alloc, kind);
		if (!k->name)
			return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory");
	}
	if (tp_grow(&b->alloc, (void **)&k->members, &k->cap_mem, k->nmem + 1, sizeof *k->members) ||
	    tp_grow(&b->alloc, (void **)&k->dom_names, &k->cap_dom, k->ndom + 1,
	            sizeof *k->dom_names))
		goto nomem;
	PPvoid_t ds = JudySLIns(&k->dom_by_name, (const uint8_t *)domain, err);
	if (ds == PPJERR)
		goto nomem;
	bool new_dom = !*ds;
	if (new_dom) {
		char *copy = tp_strdup(&b->alloc, domain);
		if (!copy) {
			JudySLDel(&k->dom_by_name, (const uint8_t *)domain, err);
			goto nomem;
		}
		k->dom_names[k->ndom] = copy;
		*ds = (void *)(uintptr_t)(k->ndom + 1);
	}
	uint32_t dom = (uint32_t)((uintptr_t)*ds - 1);
	int ok;
	if (device < 0) {
		ok = Judy1Set(&k->whole, nid, err) != JERR;
	} else {
		ok = Judy1Set(&k->devs, (Word_t)nid << 9 | (Word_t)device, err) != JERR;
		if (ok) {
			PPvoid_t pc = JudyLIns(&k->partial, nid, err);
			if (pc == PPJERR) {
				Judy1Unset(&k->devs, (Word_t)nid << 9 | (Word_t)device, err);
				ok = 0;
			} else {
				*pc = (void *)((uintptr_t)*pc + 1);
			}
		}
	}
	if (!ok) {
		if (new_dom) {
			JudySLDel(&k->dom_by_name, (const uint8_t *)domain, err);
			tp_free(&b->alloc, k->dom_names[k->ndom]);
		}
		goto nomem;
	}
	if (new_dom)
		k->ndom++;
	k->members[k->nmem++] = (struct bfd_member){nid, device, dom};
	if (new_kind)
		b->nfd++;
	return 0;
nomem:
	if (new_kind)
		fd_kind_free(b, k);
	return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding %s to failure domain %s/%s",
	                 node, kind, domain);
}

int tp_topology_builder_add_nvswitch(tp_topology_builder *b, unsigned level,
                                     const char *const *path, const char *name)
{
	if (!b)
		return TP_EINVAL;
	if (level + 1 >= b->nlevels)
		return tp_seterr(b->errmsg, TP_EINVAL,
		                 "NVSwitch level %u is not a level above the node", level);
	/* The name first, so that the path's messages can say which switch they are about. */
	const char *why = tp_name_problem(name, true);
	if (why)
		return tp_seterr(b->errmsg, TP_EINVAL, "NVSwitch name %s", why);
	if (!path)
		return tp_seterr(b->errmsg, TP_EINVAL, "NVSwitch %s: path is NULL (%u names needed)",
		                 name, level + 1);
	for (unsigned l = 0; l <= level; l++) {
		why = tp_name_problem(path[l], true);
		if (why)
			return tp_seterr(b->errmsg, TP_EINVAL, "NVSwitch %s: path[%u] (%s) %s", name, l,
			                 b->levels[l], why);
	}
	char buf[PATH_BUF + TP_MAX_NAME + 8];
	join_path(buf, PATH_BUF, path, level);
	PJError_t err = NULL;
	PPvoid_t slot = JudySLGet(b->pre[level].by_path, (const uint8_t *)buf, err);
	if (!slot)
		return tp_seterr(b->errmsg, TP_ENOTFOUND, "NVSwitch %s: no %s %s (add its nodes first)",
		                 name, b->levels[level], buf);
	uint32_t pid = (uint32_t)((uintptr_t)*slot - 1);
	size_t len = strlen(buf);
	snprintf(buf + len, sizeof buf - len, "\x01%u\x01%s", level, name);
	if (JudySLGet(b->nvs_names, (const uint8_t *)buf, err))
		return tp_seterr(b->errmsg, TP_EEXIST, "NVSwitch %s is added twice to that %s", name,
		                 b->levels[level]);
	if (tp_grow(&b->alloc, (void **)&b->nvs, &b->cap_nvs, b->nnvs + 1, sizeof *b->nvs))
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding NVSwitch %s", name);
	PPvoid_t ins = JudySLIns(&b->nvs_names, (const uint8_t *)buf, err);
	if (ins == PPJERR)
		return tp_seterr(b->errmsg, TP_ENOMEM, "out of memory adding NVSwitch %s", name);
	*ins = (void *)1;
	b->nvs[b->nnvs++] = (struct bnvs){level, pid};
	return 0;
}
