/* SPDX-License-Identifier: MIT */
/*
 * Read-only queries on a built topology: levels, fabrics, domains, nodes, devices, failure
 * domains and memory.
 */
#include "topology_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tp_topology_level_index(const struct tp_topology *t, const char *name)
{
	if (!name)
		return -1;
	for (unsigned l = 0; l < t->nlevels; l++)
		if (!strcmp(t->lv[l].name, name))
			return (int)l;
	return -1;
}

unsigned tp_topology_level_count(const tp_topology *t) { return t ? t->nlevels : 0; }

const char *tp_topology_level_name(const tp_topology *t, unsigned level)
{
	return t && level < t->nlevels ? t->lv[level].name : NULL;
}

int tp_topology_level_by_name(const tp_topology *t, const char *name)
{
	if (!t || !name)
		return TP_EINVAL;
	int l = tp_topology_level_index(t, name);
	return l < 0 ? TP_ENOTFOUND : l;
}

int tp_topology_fabric(const tp_topology *t, int level, tp_link_kind *kind, double *gbps,
                       double *latency_us)
{
	if (!t || level < TP_LEVEL_CLUSTER || level >= (int)t->nlevels)
		return TP_EINVAL;
	const struct tp_fabric_impl *f = &t->fabric[level + 1];
	if (kind)
		*kind = f->kind;
	if (gbps)
		*gbps = f->gbps;
	if (latency_us)
		*latency_us = f->latency_us;
	return 0;
}

static bool dom_ok(const tp_topology *t, unsigned level, uint32_t dom)
{
	return t && level < t->nlevels && dom < t->lv[level].ndom;
}

uint32_t tp_topology_domain_count(const tp_topology *t, unsigned level)
{
	return t && level < t->nlevels ? t->lv[level].ndom : 0;
}

const char *tp_topology_domain_name(const tp_topology *t, unsigned level, uint32_t dom)
{
	return dom_ok(t, level, dom) ? t->lv[level].dname[dom] : NULL;
}

int tp_topology_domain_path(const tp_topology *t, unsigned level, uint32_t dom, char *buf,
                            size_t len)
{
	if (!dom_ok(t, level, dom) || (!buf && len))
		return TP_EINVAL;
	if (level == tp_node_level(t)) {
		int n = snprintf(buf, len, "%s", t->lv[level].dname[dom]);
		return n;
	}
	uint32_t chain[TP_MAX_LEVELS];
	for (unsigned l = level + 1; l-- > 0;) {
		chain[l] = dom;
		if (l)
			dom = t->lv[l].parent[dom];
	}
	size_t total = 0;
	for (unsigned l = 0; l <= level; l++) {
		const char *nm = t->lv[l].dname[chain[l]];
		size_t n = strlen(nm);
		if (l) {
			if (total + 1 < len)
				buf[total] = '/';
			total++;
		}
		for (size_t i = 0; i < n; i++, total++)
			if (total + 1 < len)
				buf[total] = nm[i];
	}
	if (len)
		buf[total < len ? total : len - 1] = '\0';
	return (int)total;
}

int tp_topology_domain_by_path(const tp_topology *t, unsigned level, const char *path,
                               uint32_t *dom)
{
	if (!t || level >= t->nlevels || !path || !dom)
		return TP_EINVAL;
	PJError_t err = NULL;
	Pcvoid_t map = level == tp_node_level(t) ? t->node_by_name : t->lv[level].by_path;
	if (strlen(path) >= PATH_BUF)
		return TP_ENOTFOUND;
	PPvoid_t slot = JudySLGet(map, (const uint8_t *)path, err);
	if (!slot)
		return TP_ENOTFOUND;
	*dom = (uint32_t)((uintptr_t)*slot - 1);
	return 0;
}

uint32_t tp_topology_domain_parent(const tp_topology *t, unsigned level, uint32_t dom)
{
	if (!dom_ok(t, level, dom) || level == 0)
		return TP_NONE;
	return t->lv[level].parent[dom];
}

int tp_topology_domain_children(const tp_topology *t, unsigned level, uint32_t dom,
                                uint32_t *first, uint32_t *n)
{
	if (!dom_ok(t, level, dom) || level + 1 >= t->nlevels || !first || !n)
		return TP_EINVAL;
	*first = t->lv[level].child_first[dom];
	*n = t->lv[level].child_first[dom + 1] - *first;
	return 0;
}

int tp_topology_domain_nodes(const tp_topology *t, unsigned level, uint32_t dom,
                             uint32_t *first, uint32_t *n)
{
	if (!dom_ok(t, level, dom) || !first || !n)
		return TP_EINVAL;
	tp_dom_nodes(t, level, dom, first, n);
	return 0;
}

int tp_topology_domain_devices(const tp_topology *t, unsigned level, uint32_t dom,
                               uint32_t *first, uint32_t *n)
{
	if (!dom_ok(t, level, dom) || !first || !n)
		return TP_EINVAL;
	uint32_t f, k;
	tp_dom_nodes(t, level, dom, &f, &k);
	*first = t->dev_first[f];
	*n = t->dev_first[f + k] - *first;
	return 0;
}

uint32_t tp_topology_node_domain(const tp_topology *t, uint32_t node, unsigned level)
{
	if (!t || node >= t->nnodes || level >= t->nlevels)
		return TP_NONE;
	return tp_node_ancestor(t, node, level);
}

unsigned tp_topology_domain_nvswitch_count(const tp_topology *t, unsigned level, uint32_t dom)
{
	if (!dom_ok(t, level, dom) || !t->lv[level].nvswitches)
		return 0;
	return t->lv[level].nvswitches[dom];
}

uint32_t tp_topology_node_count(const tp_topology *t) { return t ? t->nnodes : 0; }
uint32_t tp_topology_device_count(const tp_topology *t) { return t ? t->ndevices : 0; }

int tp_topology_node_by_name(const tp_topology *t, const char *name, uint32_t *node)
{
	if (!t)
		return TP_EINVAL;
	return tp_topology_domain_by_path(t, tp_node_level(t), name, node);
}

const char *tp_topology_node_name(const tp_topology *t, uint32_t node)
{
	return t && node < t->nnodes ? t->lv[tp_node_level(t)].dname[node] : NULL;
}

const char *tp_topology_node_model(const tp_topology *t, uint32_t node)
{
	if (!t || node >= t->nnodes || t->node_model[node] == TP_NO_MODEL)
		return NULL;
	return t->models[t->node_model[node]];
}

double tp_topology_node_memory_gb(const tp_topology *t, uint32_t node)
{
	return t && node < t->nnodes ? t->node_mem_gb[node] : 0;
}

const tp_nodetype *tp_topology_node_type(const tp_topology *t, uint32_t node)
{
	if (!t || node >= t->nnodes || t->node_type[node] == TP_NO_TYPE)
		return NULL;
	return t->types[t->node_type[node]];
}

uint32_t tp_topology_device_node(const tp_topology *t, uint32_t dev)
{
	return t && dev < t->ndevices ? t->dev_node[dev] : TP_NONE;
}

uint32_t tp_topology_device_index(const tp_topology *t, uint32_t dev)
{
	return t && dev < t->ndevices ? dev - t->dev_first[t->dev_node[dev]] : TP_NONE;
}

double tp_topology_device_perf(const tp_topology *t, uint32_t dev)
{
	return t && dev < t->ndevices ? t->dev_perf[dev] : 0;
}

int tp_topology_device_by_name(const tp_topology *t, const char *name, uint32_t *dev)
{
	if (!t || !name || !dev)
		return TP_EINVAL;
	const char *slash = strrchr(name, '/');
	if (!slash || slash == name || !slash[1])
		return TP_EINVAL;
	size_t nlen = (size_t)(slash - name);
	if (nlen > TP_MAX_NAME)
		return TP_ENOTFOUND;
	char node[TP_MAX_NAME + 1];
	memcpy(node, name, nlen);
	node[nlen] = '\0';
	unsigned long idx = 0;
	for (const char *p = slash + 1; *p; p++) {
		if (*p < '0' || *p > '9' || idx > TP_MAX_NODE_DEVICES)
			return TP_EINVAL;
		idx = idx * 10 + (unsigned long)(*p - '0');
	}
	uint32_t n;
	if (tp_topology_node_by_name(t, node, &n))
		return TP_ENOTFOUND;
	if (idx >= tp_node_ndev(t, n))
		return TP_ENOTFOUND;
	*dev = t->dev_first[n] + (uint32_t)idx;
	return 0;
}

int tp_topology_common_level(const tp_topology *t, uint32_t a, uint32_t b, int *level)
{
	if (!t || a >= t->ndevices || b >= t->ndevices || !level)
		return TP_EINVAL;
	uint32_t x = t->dev_node[a], y = t->dev_node[b];
	int l = (int)tp_node_level(t);
	while (l >= 0 && x != y) {
		if (l == 0) {
			*level = TP_LEVEL_CLUSTER;
			return 0;
		}
		x = t->lv[l].parent[x];
		y = t->lv[l].parent[y];
		l--;
	}
	*level = l;
	return 0;
}

unsigned tp_topology_fd_kind_count(const tp_topology *t) { return t ? t->nfd : 0; }

const char *tp_topology_fd_kind_name(const tp_topology *t, unsigned kind)
{
	return t && kind < t->nfd ? t->fd[kind].name : NULL;
}

int tp_topology_fd_kind_by_name(const tp_topology *t, const char *name)
{
	if (!t || !name)
		return TP_EINVAL;
	for (unsigned k = 0; k < t->nfd; k++)
		if (!strcmp(t->fd[k].name, name))
			return (int)k;
	return TP_ENOTFOUND;
}

uint32_t tp_topology_fd_count(const tp_topology *t, unsigned kind)
{
	return t && kind < t->nfd ? t->fd[kind].ndom : 0;
}

const char *tp_topology_fd_name(const tp_topology *t, unsigned kind, uint32_t fd)
{
	return t && kind < t->nfd && fd < t->fd[kind].ndom ? t->fd[kind].dname[fd] : NULL;
}

uint32_t tp_topology_device_fd(const tp_topology *t, unsigned kind, uint32_t dev)
{
	return t && kind < t->nfd && dev < t->ndevices ? t->fd[kind].dev_fd[dev] : TP_NONE;
}

/* Judy has no size query for JudySL arrays; estimate 16 bytes per 8-byte chunk of each key,
 * which is what its branch-and-leaf layout costs for keys that share no long prefixes. */
static size_t judysl_estimate(const char *const *names, size_t n)
{
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		m += 16 * ((strlen(names[i]) + 8) / 8);
	return m;
}

size_t tp_topology_memory(const tp_topology *t)
{
	if (!t)
		return 0;
	size_t m = sizeof *t + t->names_len;
	m += ((size_t)t->nnodes + 1) * sizeof(uint32_t);            /* dev_first */
	m += (size_t)t->nnodes * (2 * sizeof(uint16_t) + sizeof(float));
	m += (size_t)t->ndevices * (sizeof(uint32_t) + sizeof(float));
	for (unsigned l = 0; l < t->nlevels; l++) {
		const struct tp_level_impl *lv = &t->lv[l];
		size_t n = lv->ndom;
		m += n * sizeof(char *);                                  /* dname */
		if (lv->parent)
			m += n * sizeof(uint32_t);
		if (lv->child_first)
			m += 2 * (n + 1) * sizeof(uint32_t);
		if (lv->nvswitches)
			m += n * sizeof(uint16_t);
		if (lv->dfab)
			m += n * sizeof(struct tp_fabric_impl);
		/* paths above the node are about one name per level longer than the own name */
		m += judysl_estimate(lv->dname, n) + (l + 1 < t->nlevels ? n * 16 * l : 0);
	}
	for (unsigned k = 0; k < t->nfd; k++)
		m += (size_t)t->ndevices * sizeof(uint32_t) + t->fd[k].ndom * (sizeof(char *) + 16);
	return m;
}
