/* SPDX-License-Identifier: MIT */
/*
 * Request data: the deep copy a running job keeps of its shape, and reading a request of any
 * version the library accepts. Model side: the cluster uses it; nothing here resolves a
 * request against a topology (that is request.c, the solver's).
 */
#include "request_data.h"

#include <stddef.h>
#include <string.h>

/* A copy lives in one block: the struct, then the arrays, then the strings. Two passes over the
 * same walk: the first measures, the second copies. */
struct packer {
	char *base;   /* NULL while measuring */
	size_t used;
};

static void *pack_bytes(struct packer *p, const void *src, size_t n, size_t align)
{
	p->used = (p->used + align - 1) & ~(align - 1);
	void *dst = p->base ? p->base + p->used : NULL;
	if (dst && n)
		memcpy(dst, src, n);
	p->used += n;
	return dst;
}

static const char *pack_str(struct packer *p, const char *s)
{
	return s ? pack_bytes(p, s, strlen(s) + 1, 1) : NULL;
}

size_t tp_step_model_size(unsigned version)
{
	switch (version) {
	case 1:
		return offsetof(tp_step_model, min_efficiency);
	case 2:
		return offsetof(tp_step_model, no_floor_search);
	case TP_STEP_MODEL_VERSION:
		return sizeof(tp_step_model);
	default:
		return 0;
	}
}

/* A step model of an older version is copied as the current one, the fields it lacks at
 * their defaults (version 1: no floor; version 2: the floor's search on); reads no byte past the
 * caller's own version (resolving checked it). */
static tp_step_model *pack_model(struct packer *p, const tp_step_model *src)
{
	tp_step_model *dst = pack_bytes(p, src, 0, _Alignof(tp_step_model));
	p->used += sizeof *dst;
	if (dst) {
		static const tp_step_model init = TP_STEP_MODEL_INIT;
		size_t n = tp_step_model_size(src->version);
		*dst = init;
		memcpy(dst, src, n ? n : sizeof dst->version);
		dst->version = TP_STEP_MODEL_VERSION;
	}
	return dst;
}

size_t tp_request_size(unsigned version)
{
	switch (version) {
	case 1:
		return offsetof(tp_request, gpu_nic_pairs);
	case 2:
		return offsetof(tp_request, comm);
	case 3:
		return offsetof(tp_request, service);
	case 4:
		return offsetof(tp_request, box_level);
	case 5:
		return offsetof(tp_request, expected_end_s);
	case TP_REQUEST_VERSION:
		return sizeof(tp_request);
	default:
		return 0;
	}
}

void tp_request_read(const tp_request *src, tp_request *dst)
{
	size_t n = tp_request_size(src->version);
	*dst = (tp_request)TP_REQUEST_INIT;
	memcpy(dst, src, n ? n : sizeof dst->version);
	dst->version = TP_REQUEST_VERSION;
}

static void pack_request(struct packer *p, const tp_request *orig, tp_request *dst)
{
	tp_request cur;
	tp_request_read(orig, &cur);
	const tp_request *src = &cur;
	tp_slice *slices = src->nslices
	                       ? pack_bytes(p, src->slices, src->nslices * sizeof *slices,
	                                    _Alignof(tp_slice))
	                       : NULL;
	tp_domain_cap *caps = src->ncaps ? pack_bytes(p, src->caps, src->ncaps * sizeof *caps,
	                                              _Alignof(tp_domain_cap))
	                                 : NULL;
	const char **nodes = src->nselect_nodes
	                         ? pack_bytes(p, src->select_nodes,
	                                      src->nselect_nodes * sizeof *nodes, _Alignof(char *))
	                         : NULL;
	tp_step_model *comm = src->comm ? pack_model(p, src->comm) : NULL;
	tp_request r = *src;
	r.version = TP_REQUEST_VERSION;
	r.comm = comm;
	r.id = pack_str(p, src->id);
	r.tenant = pack_str(p, src->tenant);
	r.group_level = pack_str(p, src->group_level);
	r.required = pack_str(p, src->required);
	r.preferred = pack_str(p, src->preferred);
	r.spread_level = pack_str(p, src->spread_level);
	r.colocate_job = pack_str(p, src->colocate_job);
	r.colocate_level = pack_str(p, src->colocate_level);
	r.exclusive = pack_str(p, src->exclusive);
	r.select_model = pack_str(p, src->select_model);
	r.service = pack_str(p, src->service);
	r.box_level = pack_str(p, src->box_level);
	for (size_t i = 0; i < src->nslices; i++) {
		const char *lv = pack_str(p, src->slices[i].level);
		if (slices)
			slices[i].level = lv;
	}
	for (size_t i = 0; i < src->ncaps; i++) {
		const char *lv = pack_str(p, src->caps[i].level);
		if (caps)
			caps[i].level = lv;
	}
	for (size_t i = 0; i < src->nselect_nodes; i++) {
		const char *nm = pack_str(p, src->select_nodes[i]);
		if (nodes)
			nodes[i] = nm;
	}
	r.slices = slices;
	r.caps = caps;
	r.select_nodes = (const char *const *)nodes;
	if (dst)
		*dst = r;
}

tp_request *tp_request_dup(const tp_allocator *a, const tp_request *src)
{
	struct packer p = {NULL, sizeof(tp_request)};
	pack_request(&p, src, NULL);
	char *block = tp_malloc(a, p.used);
	if (!block)
		return NULL;
	p = (struct packer){block, sizeof(tp_request)};
	pack_request(&p, src, (tp_request *)(void *)block);
	return (tp_request *)(void *)block;
}

void tp_request_free(const tp_allocator *a, tp_request *r)
{
	tp_free(a, r);
}

/* ---- resolution ---------------------------------------------------------------------------- */

int tp_request_init(tp_request *r, unsigned version)
{
	static const tp_request init = TP_REQUEST_INIT;
	return tp_options_init(r, tp_request_size(version), &init, version);
}
