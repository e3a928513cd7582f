/* SPDX-License-Identifier: MIT */
/*
 * Fragmentation report: per-level figures read off the cluster's aggregates, and the
 * workload-aware figure for a job mix. A report walks every domain once (it is an operator's
 * question, not the per-request path).
 */
#include <math.h>
#include <string.h>

#include "cluster_impl.h"

struct frag_level {
	uint32_t domains, fully_free, largest_free;
	double fragmentation;
	/* grid levels: the largest box of wholly free children in one domain, and the connected
	 * sets of wholly free children summed over the domains */
	uint32_t box_cells, grid_fragments;
	unsigned box[3];
};

struct tp_frag {
	tp_allocator alloc;
	char errmsg[TP_ERRMSG_LEN]; /* why tp_frag_report failed ("" for a report) */
	unsigned nlevels;
	uint32_t free, down, cordoned;
	struct frag_level lv[TP_MAX_LEVELS];
	double workload;
};

static void level_figures(const struct tp_cluster *c, unsigned l, struct frag_level *out)
{
	const struct tp_topology *t = c->t;
	uint32_t nd = t->lv[l].ndom, fully = 0, largest = 0;
	uint64_t in_fully = 0;
	for (uint32_t d = 0; d < nd; d++) {
		uint32_t f = c->free[l][d];
		if (f > largest)
			largest = f;
		if (f && f == tp_dom_ndev(t, l, d)) {
			fully++;
			in_fully += f;
		}
	}
	out->domains = nd;
	out->fully_free = fully;
	out->largest_free = largest;
	out->fragmentation = c->nfree ? (double)(c->nfree - in_fully) / c->nfree : 0.0;
}

/* The box figures of grid level l: every domain's wholly free children marked, its largest
 * free box and its fragments. */
static int grid_figures(const struct tp_cluster *c, unsigned l, struct frag_level *out)
{
	const struct tp_grid_impl *g = c->t->grid[l];
	unsigned char *mark = tp_malloc(&c->alloc, g->ncell ? g->ncell : 1);
	if (!mark)
		return TP_ENOMEM;
	int rc = 0;
	for (uint32_t d = 0; d < c->t->lv[l].ndom && !rc; d++) {
		const uint32_t *cells = g->cell + (size_t)d * g->ncell;
		for (uint32_t i = 0; i < g->ncell; i++)
			mark[i] = cells[i] != TP_NONE && c->free[l + 1][cells[i]] == g->child_dev;
		uint32_t vol = 0, pieces = 0;
		unsigned ext[3];
		rc = tp_grid_largest_box(&c->alloc, g, mark, &vol, ext);
		if (!rc)
			rc = tp_grid_fragments(&c->alloc, g, mark, &pieces);
		out->grid_fragments += pieces;
		if (!rc && vol > out->box_cells) {
			out->box_cells = vol;
			memcpy(out->box, ext, sizeof ext);
		}
	}
	tp_free(&c->alloc, mark);
	return rc;
}

/* Free devices of level `l` usable by jobs of `k` devices that each fit in one domain. */
static uint64_t usable_by_shape(const struct tp_cluster *c, unsigned l, uint32_t k)
{
	uint64_t usable = 0;
	for (uint32_t d = 0; d < c->t->lv[l].ndom; d++)
		usable += (uint64_t)(c->free[l][d] / k) * k;
	return usable;
}

struct shape {
	uint32_t devices;
	unsigned level;
	double weight;
};

/* The documented default mix: 1 device per node, a whole node, half and all of a domain of the
 * lowest level above the node (a single-level topology uses the node level for all four). */
static unsigned default_mix(const struct tp_topology *t, struct shape mix[4])
{
	unsigned nl = tp_node_level(t);
	unsigned low = nl ? nl - 1 : nl;
	uint32_t node = t->max_node_devices, dom = t->lv[low].max_devices;
	mix[0] = (struct shape){1, nl, 1.0};
	mix[1] = (struct shape){node, nl, 1.0};
	mix[2] = (struct shape){dom / 2 ? dom / 2 : 1, low, 1.0};
	mix[3] = (struct shape){dom, low, 1.0};
	return 4;
}

static double workload_figure(const struct tp_cluster *c, const struct shape *mix, size_t n)
{
	if (!c->nfree)
		return 0.0;
	double wsum = 0, usable = 0;
	for (size_t i = 0; i < n; i++) {
		wsum += mix[i].weight;
		usable += mix[i].weight * (double)usable_by_shape(c, mix[i].level, mix[i].devices);
	}
	double share = usable / (wsum * c->nfree);
	return share >= 1.0 ? 0.0 : 1.0 - share;
}

/* Why a caller's mix is refused (0 when it is valid): the code, with the message in err. */
static int check_mix(char *err, const struct tp_topology *t, const tp_job_shape *mix,
                     size_t nmix)
{
	if (!mix && nmix)
		return tp_seterr(err, TP_EINVAL, "mix is NULL with nmix %zu", nmix);
	for (size_t i = 0; mix && i < nmix; i++) {
		if (!mix[i].level)
			return tp_seterr(err, TP_EINVAL, "mix[%zu].level is NULL", i);
		if (mix[i].devices == 0)
			return tp_seterr(err, TP_EINVAL, "mix[%zu].devices is 0: a shape holds at least "
			                 "one device", i);
		if (!(mix[i].weight > 0) || !isfinite(mix[i].weight))
			return tp_seterr(err, TP_EINVAL, "mix[%zu].weight %g is not a positive finite "
			                 "number", i, mix[i].weight);
		if (tp_topology_level_index(t, mix[i].level) < 0)
			return tp_seterr(err, TP_ENOTFOUND, "mix[%zu].level '%s' is not a level of the "
			                 "topology", i, mix[i].level);
	}
	return 0;
}

int tp_frag_report(const tp_cluster *c, const tp_job_shape *mix, size_t nmix, tp_frag **out)
{
	if (out)
		*out = NULL;
	if (!c || !out)
		return TP_EINVAL;
	const struct tp_topology *t = c->t;
	char err[TP_ERRMSG_LEN];
	int rc = check_mix(err, t, mix, nmix);
	if (rc) {
		tp_frag *bad = tp_calloc(&c->alloc, 1, sizeof *bad);
		if (!bad)
			return TP_ENOMEM;
		bad->alloc = c->alloc;
		memcpy(bad->errmsg, err, sizeof err);
		*out = bad;
		return rc;
	}
	struct shape dflt[4];
	struct shape *shapes = dflt;
	size_t n = 0;
	if (mix) {
		if (nmix > 4) {
			shapes = tp_mallocn(&c->alloc, nmix, sizeof *shapes);
			if (!shapes)
				return TP_ENOMEM;
		}
		for (size_t i = 0; i < nmix; i++)
			shapes[i] = (struct shape){mix[i].devices,
			                           (unsigned)tp_topology_level_index(t, mix[i].level),
			                           mix[i].weight};
		n = nmix;
	} else {
		n = default_mix(t, dflt);
	}
	tp_frag *f = tp_calloc(&c->alloc, 1, sizeof *f);
	if (!f) {
		if (shapes != dflt)
			tp_free(&c->alloc, shapes);
		return TP_ENOMEM;
	}
	f->alloc = c->alloc;
	f->nlevels = t->nlevels;
	f->free = c->nfree;
	f->down = c->ndown;
	f->cordoned = c->ncordoned;
	for (unsigned l = 0; l < t->nlevels; l++) {
		level_figures(c, l, &f->lv[l]);
		if (t->grid[l] && grid_figures(c, l, &f->lv[l])) {
			if (shapes != dflt)
				tp_free(&c->alloc, shapes);
			tp_free(&c->alloc, f);
			return TP_ENOMEM;
		}
	}
	f->workload = workload_figure(c, shapes, n);
	if (shapes != dflt)
		tp_free(&c->alloc, shapes);
	*out = f;
	return 0;
}

void tp_frag_destroy(tp_frag *f)
{
	if (f) {
		tp_allocator a = f->alloc;
		tp_free(&a, f);
	}
}

static const struct frag_level *lvl(const tp_frag *f, unsigned level)
{
	return f && level < f->nlevels ? &f->lv[level] : NULL;
}

uint32_t tp_frag_domain_count(const tp_frag *f, unsigned level)
{
	const struct frag_level *l = lvl(f, level);
	return l ? l->domains : 0;
}

uint32_t tp_frag_free_count(const tp_frag *f, unsigned level)
{
	return lvl(f, level) ? f->free : 0;
}

uint32_t tp_frag_fully_free_count(const tp_frag *f, unsigned level)
{
	const struct frag_level *l = lvl(f, level);
	return l ? l->fully_free : 0;
}

uint32_t tp_frag_largest_free_count(const tp_frag *f, unsigned level)
{
	const struct frag_level *l = lvl(f, level);
	return l ? l->largest_free : 0;
}

double tp_frag_fragmentation(const tp_frag *f, unsigned level)
{
	const struct frag_level *l = lvl(f, level);
	return l ? l->fragmentation : 0.0;
}

double tp_frag_workload(const tp_frag *f) { return f ? f->workload : 0.0; }

uint32_t tp_frag_largest_box(const tp_frag *f, unsigned level, unsigned *ext)
{
	const struct frag_level *x = lvl(f, level);
	if (ext)
		for (unsigned i = 0; i < 3; i++)
			ext[i] = x ? x->box[i] : 0;
	return x ? x->box_cells : 0;
}

uint32_t tp_frag_grid_fragment_count(const tp_frag *f, unsigned level)
{
	const struct frag_level *x = lvl(f, level);
	return x ? x->grid_fragments : 0;
}
const char *tp_frag_errmsg(const tp_frag *f) { return f ? f->errmsg : ""; }
uint32_t tp_frag_down_count(const tp_frag *f) { return f ? f->down : 0; }
uint32_t tp_frag_cordoned_count(const tp_frag *f) { return f ? f->cordoned : 0; }

/* ---- the mix placement protects (spec rule 3, refined; see place.c) ------------------------ */

/* Weights scaled to integers summing to about 64, each >= 1. */
static unsigned scale_weights(const struct shape *sh, size_t n, struct tp_place_shape *out)
{
	double wsum = 0;
	for (size_t i = 0; i < n; i++)
		wsum += sh[i].weight;
	for (size_t i = 0; i < n; i++) {
		double w = floor(64.0 * sh[i].weight / wsum + 0.5);
		out[i] = (struct tp_place_shape){sh[i].devices, w < 1 ? 1 : (uint32_t)w, sh[i].level};
	}
	return (unsigned)n;
}

unsigned tp_place_mix(const struct tp_cluster *c, struct tp_place_shape *out)
{
	if (c->pmix_mode == 0)
		return 0;
	if (c->pmix_mode == 1) {
		memcpy(out, c->pmix, c->npmix * sizeof *out);
		return c->npmix;
	}
	struct shape dflt[4];
	return scale_weights(dflt, default_mix(c->t, dflt), out);
}

static int set_place_mix(tp_cluster *c, const tp_job_shape *mix, size_t nmix)
{
	if (!mix && nmix)
		return tp_seterr(c->errmsg, TP_EINVAL, "place mix: NULL with %zu shapes", nmix);
	if (nmix > TP_PLACE_MIX_MAX)
		return tp_seterr(c->errmsg, TP_EINVAL, "place mix: %zu shapes, at most %d", nmix,
		                 TP_PLACE_MIX_MAX);
	struct shape sh[TP_PLACE_MIX_MAX];
	for (size_t i = 0; i < nmix; i++) {
		if (!mix[i].level)
			return tp_seterr(c->errmsg, TP_EINVAL, "place mix[%zu].level is NULL", i);
		if (mix[i].devices == 0)
			return tp_seterr(c->errmsg, TP_EINVAL, "place mix[%zu].devices is 0", i);
		if (!(mix[i].weight > 0) || !isfinite(mix[i].weight))
			return tp_seterr(c->errmsg, TP_EINVAL,
			                 "place mix[%zu].weight %g is not a finite number > 0", i,
			                 mix[i].weight);
		int l = tp_topology_level_index(c->t, mix[i].level);
		if (l < 0)
			return tp_seterr(c->errmsg, TP_ENOTFOUND,
			                 "place mix[%zu].level '%s' is not a level of the topology", i,
			                 mix[i].level);
		sh[i] = (struct shape){mix[i].devices, (unsigned)l, mix[i].weight};
	}
	if (!mix) {
		c->pmix_mode = 2;
		c->npmix = 0;
	} else if (!nmix) {
		c->pmix_mode = 0;
		c->npmix = 0;
	} else {
		c->pmix_mode = 1;
		c->npmix = scale_weights(sh, nmix, c->pmix);
	}
	c->errmsg[0] = '\0';
	return 0;
}

int tp_cluster_set_place_mix(tp_cluster *c, const tp_job_shape *mix, size_t nmix)
{
	if (!c)
		return TP_EINVAL;
	TP_GUARDED(c, set_place_mix(c, mix, nmix));
}
