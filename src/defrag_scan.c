/* SPDX-License-Identifier: MIT */
/*
 * Scanning one candidate domain of the defragmentation planner: the devices the request can
 * use, the jobs on the candidate and what each would free, the tallies of what fits once a set
 * of jobs has left, the lower bounds that order and prune candidates, and the request kept
 * inside the candidate. defrag.c describes the whole search.
 */
#include "defrag_internal.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- devices the request can use ----------------------------------------------------------- */

int defrag_cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return (a > b) - (a < b);
}

/* The request's `select`, as a necessary condition (a device it accepts may still be refused
 * by tp_place for other reasons; the planner only uses this to count). */
static bool dev_matches(const struct planner *P, uint32_t dev)
{
	if (!P->have_q)
		return true;
	const struct tp_rq *q = &P->q;
	const struct tp_topology *t = P->t;
	uint32_t node = t->dev_node[dev];
	if (q->has_model && (q->model < 0 || t->node_model[node] != (uint16_t)q->model))
		return false;
	if (q->min_mem > 0 && !(t->node_mem_gb[node] >= q->min_mem))
		return false;
	if (q->min_perf > 0 && !(t->dev_perf[dev] >= q->min_perf))
		return false;
	if (q->has_nodes && !bsearch(&node, q->nodes, q->nnodes, sizeof *q->nodes, defrag_cmp_u32))
		return false;
	return true;
}

/* Free for the request once its holder (if any) has left. */
static bool dev_usable(const struct planner *P, uint32_t dev)
{
	if (P->tnode && !P->tnode[P->t->dev_node[dev]])
		return false; /* outside the target set being searched */
	return P->c->dstate[dev] == 0 && (!P->select || dev_matches(P, dev));
}

/* ---- scanning a candidate ---------------------------------------------------------------- */

/* The domains of level u inside domain `dom` of level l (l < u; l = -1: the cluster). */
void defrag_desc_range(const struct tp_topology *t, int l, uint32_t dom, unsigned u, uint32_t *e0,
                       uint32_t *ne)
{
	if (l < 0) {
		*e0 = 0;
		*ne = t->lv[u].ndom;
		return;
	}
	uint32_t lo = dom, hi = dom + 1;
	for (unsigned k = (unsigned)l; k < u; k++) {
		lo = t->lv[k].child_first[lo];
		hi = t->lv[k].child_first[hi];
	}
	*e0 = lo;
	*ne = hi - lo;
}

static int add_layer(struct planner *P, unsigned level, uint32_t size)
{
	struct cscan *s = &P->scan;
	if ((int)level <= s->level || size <= 1)
		return 0;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (s->ly[i].level == level) {
			if (size > s->ly[i].size) {
				s->ly[i].size = size;
				s->ly[i].need = P->count / size;
			}
			return 0;
		}
	struct scan_layer *ly = &s->ly[s->nlayers];
	defrag_desc_range(P->t, s->level, s->dom, level, &ly->e0, &ly->ne);
	size_t cap = ly->cap;
	if (tp_grow(P->a, (void **)&ly->f0, &cap, ly->ne ? ly->ne : 1, sizeof *ly->f0))
		return TP_ENOMEM;
	cap = ly->cap;
	if (tp_grow(P->a, (void **)&ly->f, &cap, ly->ne ? ly->ne : 1, sizeof *ly->f))
		return TP_ENOMEM;
	ly->cap = cap;
	memset(ly->f0, 0, (size_t)ly->ne * sizeof *ly->f0);
	ly->level = level;
	ly->size = size;
	ly->need = P->count / size;
	s->nlayers++;
	return 0;
}

/* The layers of the request below the candidate's level: its groups, then each slice layer,
 * from the one derivation of a request's units (tp_rq_units, shared with place and replace). */
static int setup_layers(struct planner *P)
{
	struct cscan *s = &P->scan;
	s->nlayers = 0;
	if (!P->have_q)
		return 0;
	struct tp_rq_unit un[TP_RQ_MAX_UNITS];
	unsigned n = tp_rq_units(&P->q, P->t->nlevels - 1, un);
	int rc = 0;
	for (unsigned i = 0; !rc && i < n; i++)
		if (un[i].kind == TP_RQ_UNIT_GROUP)
			rc = add_layer(P, un[i].level, un[i].size);
	for (unsigned i = 0; !rc && i < n; i++)
		if (un[i].kind == TP_RQ_UNIT_SLICE)
			rc = add_layer(P, un[i].level, un[i].size);
	return rc;
}

static uint32_t layer_dom(const struct planner *P, const struct scan_layer *ly, uint32_t dev)
{
	uint32_t node = P->t->dev_node[dev];
	return tp_node_ancestor(P->t, node, ly->level) - ly->e0;
}

static int cjob_cmp_id(const void *x, const void *y)
{
	const struct cjob *a = x, *b = y;
	return strcmp(a->j->id, b->j->id);
}

int defrag_scan_candidate(struct planner *P, int level, uint32_t dom)
{
	if (P->deadline_ns && defrag_budget_check(P, TP_BUDGET_TIME))
		return DEFRAG_STOP;
	return defrag_scan_jobs(P, level, dom, true);
}


/*
 * A tally reads a layer's free counts only for its units (sum of f / size). In a domain where
 * one job alone has devices, f is the free count f0 with or without that job's n, so the job
 * changes the units there by the constant (f0 + n) / size - f0 / size, whatever else is
 * tallied. Each job's runs of such domains fold into one run per layer carrying that sum
 * (e TP_NONE): a 512-GPU job on 128 whole nodes is then a few runs, not 136, and every tally
 * gives the same units. The free counts of those domains are no longer written (nothing
 * reads them).
 */
static int fold_runs(struct planner *P)
{
	struct cscan *s = &P->scan;
	size_t total = 0, base[TP_MAX_LEVELS];
	for (unsigned i = 0; i < s->nlayers; i++) {
		base[i] = total;
		total += s->ly[i].ne;
	}
	if (defrag_grow_u32(P->a, &s->runcnt, &s->cap_runcnt, total))
		return TP_ENOMEM;
	memset(s->runcnt, 0, total * sizeof *s->runcnt);
	for (uint32_t k = 0; k < s->njobs; k++) {
		const struct cjob *cj = &s->jobs[k];
		for (uint32_t r = cj->r0; r < cj->r0 + cj->nr; r++)
			s->runcnt[base[s->jrun[r].layer] + s->jrun[r].e]++;
	}
	/* in place: a job's runs come layer by layer, and a folded run replaces at least one */
	uint32_t out = 0;
	for (uint32_t k = 0; k < s->njobs; k++) {
		struct cjob *cj = &s->jobs[k];
		uint32_t r = cj->r0, end = cj->r0 + cj->nr;
		cj->r0 = out;
		while (r < end) {
			uint32_t layer = s->jrun[r].layer, units = 0;
			bool folded = false;
			const struct scan_layer *ly = &s->ly[layer];
			for (; r < end && s->jrun[r].layer == layer; r++) {
				struct jrun run = s->jrun[r];
				if (s->runcnt[base[layer] + run.e] == 1) {
					uint32_t f0 = ly->f0[run.e];
					units += (f0 + run.n) / ly->size - f0 / ly->size;
					folded = true;
				} else {
					s->jrun[out++] = run;
				}
			}
			if (folded)
				s->jrun[out++] = (struct jrun){layer, TP_NONE, units};
		}
		cj->nr = out - cj->r0;
	}
	return 0;
}

/* Each job's devices of the candidate (jdom) as runs of one domain per layer: a tally then
 * costs a job's domains, not its devices. At most `ndev` runs per layer. */
static int build_runs(struct planner *P, size_t ndev)
{
	struct cscan *s = &P->scan;
	size_t need = ndev * s->nlayers;
	if (tp_grow(P->a, (void **)&s->jrun, &s->cap_jrun, need ? need : 1, sizeof *s->jrun))
		return TP_ENOMEM;
	uint32_t nr = 0;
	for (uint32_t k = 0; k < s->njobs; k++) {
		struct cjob *cj = &s->jobs[k];
		cj->r0 = nr;
		for (unsigned i = 0; i < s->nlayers; i++)
			for (uint32_t x = 0; x < cj->a; x++) {
				uint32_t e = s->jdom[(size_t)(cj->d0 + x) * s->nlayers + i];
				if (nr > cj->r0 && s->jrun[nr - 1].layer == i && s->jrun[nr - 1].e == e)
					s->jrun[nr - 1].n++;
				else
					s->jrun[nr++] = (struct jrun){i, e, 1};
			}
		cj->nr = nr - cj->r0;
	}
	return fold_runs(P);
}

/* With !full, only what bounding needs: the jobs, their usable devices on the candidate, their
 * costs and what the policy allows (no layers, no device lists; one pass). */
int defrag_scan_jobs(struct planner *P, int level, uint32_t dom, bool full)
{
	struct cscan *s = &P->scan;
	struct tp_cluster *c = P->c;
	const struct tp_topology *t = P->t;
	int rc = 0;
	P->stats.scanned++;
	s->level = level;
	s->dom = dom;
	if (level < 0) {
		s->node0 = 0;
		s->nnodes = t->nnodes;
	} else {
		tp_dom_nodes(t, (unsigned)level, dom, &s->node0, &s->nnodes);
	}
	s->dev0 = t->dev_first[s->node0];
	s->dev1 = t->dev_first[s->node0 + s->nnodes];
	s->nlayers = 0;
	if (full && (rc = setup_layers(P)))
		return rc;
	size_t old = P->cap_slot;
	if (c->njobs > old) {
		if (tp_grow(P->a, (void **)&P->slot_local, &P->cap_slot, c->njobs,
		            sizeof *P->slot_local))
			return TP_ENOMEM;
		for (size_t i = old; i < P->cap_slot; i++)
			P->slot_local[i] = TP_NONE;
	}
	s->njobs = 0;
	s->free = 0;
	s->unusable = 0;
	uint32_t prev_slot = TP_NO_JOB, prev_k = 0;
	for (uint32_t dev = s->dev0; dev < s->dev1; dev++) {
		uint32_t slot = c->dev_job[dev];
		bool usable = dev_usable(P, dev);
		s->unusable += c->dstate[dev] != 0;
		if (slot == TP_NO_JOB) {
			if (usable) {
				s->free++;
				for (unsigned i = 0; i < s->nlayers; i++)
					s->ly[i].f0[layer_dom(P, &s->ly[i], dev)]++;
			}
			continue;
		}
		if (slot == prev_slot) { /* a job's devices are mostly adjacent */
			s->jobs[prev_k].a += usable;
			continue;
		}
		uint32_t k = P->slot_local[slot];
		if (k == TP_NONE) {
			if (tp_grow(P->a, (void **)&s->jobs, &s->cap_jobs, s->njobs + 1,
			            sizeof *s->jobs)) {
				rc = TP_ENOMEM;
				break;
			}
			k = s->njobs++;
			P->slot_local[slot] = k;
			s->jobs[k] = (struct cjob){.j = c->jobs[slot], .slot = slot};
		}
		s->jobs[k].a += usable;
		prev_slot = slot;
		prev_k = k;
	}
	if (rc || !full) {
		s->ninside = s->njobs;
		s->with_outside = false;
		for (uint32_t k = 0; k < s->njobs; k++) {
			struct cjob *cj = &s->jobs[k];
			P->slot_local[cj->slot] = TP_NONE;
			cj->w = defrag_cost_of(cj->j->checkpoint_s, cj->j->ndev);
			cj->rate = cj->a ? (double)cj->w / cj->a : INFINITY;
			cj->can = (uint8_t)defrag_job_can(P, cj->j);
		}
		return rc;
	}
	size_t off = 0;
	for (uint32_t k = 0; k < s->njobs; k++) {
		P->slot_local[s->jobs[k].slot] = k;
		s->jobs[k].d0 = (uint32_t)off;
		off += s->jobs[k].a;
		s->jobs[k].a = 0;
	}
	if (defrag_grow_u32(P->a, &s->jdev, &s->cap_jdev, off) ||
	    defrag_grow_u32(P->a, &s->jdom, &s->cap_jdom, off * (s->nlayers ? s->nlayers : 1))) {
		for (uint32_t k = 0; k < s->njobs; k++)
			P->slot_local[s->jobs[k].slot] = TP_NONE;
		return TP_ENOMEM;
	}
	for (uint32_t dev = s->dev0; dev < s->dev1; dev++) {
		uint32_t slot = c->dev_job[dev];
		if (slot == TP_NO_JOB || !dev_usable(P, dev))
			continue;
		struct cjob *cj = &s->jobs[P->slot_local[slot]];
		uint32_t at = cj->d0 + cj->a++;
		s->jdev[at] = dev;
		for (unsigned i = 0; i < s->nlayers; i++)
			s->jdom[(size_t)at * s->nlayers + i] = layer_dom(P, &s->ly[i], dev);
	}
	if (build_runs(P, off)) {
		for (uint32_t k = 0; k < s->njobs; k++)
			P->slot_local[s->jobs[k].slot] = TP_NONE;
		return TP_ENOMEM;
	}
	s->nmov = 0;
	s->movcap = 0;
	s->ninside = s->njobs;
	s->with_outside = false;
	for (uint32_t k = 0; k < s->njobs; k++) {
		struct cjob *cj = &s->jobs[k];
		P->slot_local[cj->slot] = TP_NONE;
		cj->w = defrag_cost_of(cj->j->checkpoint_s, cj->j->ndev);
		cj->rate = cj->a ? (double)cj->w / cj->a : INFINITY;
		cj->can = (uint8_t)defrag_job_can(P, cj->j);
		if (cj->can) {
			s->nmov++;
			s->movcap += cj->a;
		}
	}
	return 0;
}

/* Append the movable jobs that are not on the candidate (a = 0: they free nothing there, but
 * stopping one makes room for a job that has to leave the candidate). O(jobs). */
int defrag_append_outside(struct planner *P)
{
	struct cscan *s = &P->scan;
	struct tp_cluster *c = P->c;
	if (s->with_outside)
		return 0;
	s->with_outside = true;
	if (c->njobs > P->cap_slot) {
		size_t old = P->cap_slot;
		if (tp_grow(P->a, (void **)&P->slot_local, &P->cap_slot, c->njobs,
		            sizeof *P->slot_local))
			return TP_ENOMEM;
		for (size_t i = old; i < P->cap_slot; i++)
			P->slot_local[i] = TP_NONE;
	}
	for (uint32_t k = 0; k < s->ninside; k++)
		P->slot_local[s->jobs[k].slot] = k;
	int rc = 0;
	for (size_t slot = 0; slot < c->njobs && !rc; slot++) {
		struct tp_job_impl *j = c->jobs[slot];
		unsigned can;
		if (P->slot_local[slot] != TP_NONE || j->id[0] == '\x01' || !(can = defrag_job_can(P, j)))
			continue;
		if (tp_grow(P->a, (void **)&s->jobs, &s->cap_jobs, s->njobs + 1, sizeof *s->jobs)) {
			rc = TP_ENOMEM;
			break;
		}
		s->jobs[s->njobs++] = (struct cjob){.j = j,
		                                    .slot = (uint32_t)slot,
		                                    .w = defrag_cost_of(j->checkpoint_s, j->ndev),
		                                    .rate = INFINITY,
		                                    .can = (uint8_t)can,
		                                    .outside = true};
		s->nmov++;
	}
	/* slots depend on history: list them by id */
	if (s->njobs - s->ninside > 1)
		qsort(s->jobs + s->ninside, s->njobs - s->ninside, sizeof *s->jobs, cjob_cmp_id);
	for (uint32_t k = 0; k < s->ninside; k++)
		P->slot_local[s->jobs[k].slot] = TP_NONE;
	return rc;
}

/* ---- tallies: what fits once a set of jobs has left ------------------------------------------ */

void defrag_tally_reset(struct planner *P)
{
	struct cscan *s = &P->scan;
	s->tally = s->free;
	for (unsigned i = 0; i < s->nlayers; i++) {
		struct scan_layer *ly = &s->ly[i];
		memcpy(ly->f, ly->f0, (size_t)ly->ne * sizeof *ly->f);
		uint64_t u = 0;
		for (uint32_t e = 0; e < ly->ne; e++)
			u += ly->f[e] / ly->size;
		ly->units = u;
	}
}

void defrag_tally_job(struct planner *P, uint32_t k, int sign)
{
	struct cscan *s = &P->scan;
	const struct cjob *cj = &s->jobs[k];
	s->tally = sign > 0 ? s->tally + cj->a : s->tally - cj->a;
	for (uint32_t r = cj->r0; r < cj->r0 + cj->nr; r++) {
		const struct jrun *run = &s->jrun[r];
		struct scan_layer *ly = &s->ly[run->layer];
		if (run->e == TP_NONE) { /* domains this job alone holds (fold_runs) */
			ly->units = sign > 0 ? ly->units + run->n : ly->units - run->n;
			continue;
		}
		uint32_t *f = &ly->f[run->e];
		ly->units -= *f / ly->size;
		*f = sign > 0 ? *f + run->n : *f - run->n;
		ly->units += *f / ly->size;
	}
}

/* Necessary for the request to fit: enough usable devices and enough whole units per layer. */
bool defrag_tally_enough(const struct planner *P)
{
	const struct cscan *s = &P->scan;
	if (s->tally < P->count)
		return false;
	for (unsigned i = 0; i < s->nlayers; i++)
		if (s->ly[i].units < s->ly[i].need)
			return false;
	return true;
}

/* ---- lower bounds ------------------------------------------------------------------------- */

static void sift_down(const struct planner *P, uint32_t *v, size_t i, size_t n, job_order cmp)
{
	for (;;) {
		size_t l = 2 * i + 1, m = i;
		if (l < n && cmp(P, v[l], v[m]) > 0)
			m = l;
		if (l + 1 < n && cmp(P, v[l + 1], v[m]) > 0)
			m = l + 1;
		if (m == i)
			return;
		uint32_t x = v[i];
		v[i] = v[m];
		v[m] = x;
		i = m;
	}
}

/* Heapsort: no allocation, and every order below is total, so stability does not matter. */
void defrag_sort_jobs(const struct planner *P, uint32_t *v, size_t n, job_order cmp)
{
	if (n < 2)
		return;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(P, v, i, n, cmp);
	for (size_t end = n - 1; end > 0; end--) {
		uint32_t x = v[0];
		v[0] = v[end];
		v[end] = x;
		sift_down(P, v, 0, end, cmp);
	}
}

/* Cost per usable device ascending (jobs that free nothing last); then more usable devices
 * first (fewer jobs), fewer devices in all, then the scan's order. */
int defrag_by_rate(const struct planner *P, uint32_t x, uint32_t y)
{
	const struct cjob *a = &P->scan.jobs[x], *b = &P->scan.jobs[y];
	/* equal ratios divide to the same correctly rounded double, so exact ties stay ties */
	if (a->rate != b->rate)
		return a->rate < b->rate ? -1 : 1;
	if (a->a != b->a)
		return a->a > b->a ? -1 : 1;
	if (a->j->ndev != b->j->ndev) /* fewer devices moved in all */
		return a->j->ndev < b->j->ndev ? -1 : 1;
	return (x > y) - (x < y);
}

/* More usable devices first (the fewest jobs), then by rate. */
int defrag_by_size(const struct planner *P, uint32_t x, uint32_t y)
{
	uint32_t a = P->scan.jobs[x].a, b = P->scan.jobs[y].a;
	if (a != b)
		return a > b ? -1 : 1;
	return defrag_by_rate(P, x, y);
}

int defrag_by_index(const struct planner *P, uint32_t x, uint32_t y)
{
	(void)P;
	return (x > y) - (x < y);
}

/* A movable job as the bounds see it. */
struct bitem {
	double rate;
	int64_t w;
	uint32_t a;
};

/* Ascending rate (insertion sort: a rack holds a few dozen jobs; larger lists use the heap). */
static void bitems_sort(struct bitem *v, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		struct bitem x = v[i];
		size_t k = i;
		for (; k > 0 &&
		       (v[k - 1].rate > x.rate || (v[k - 1].rate == x.rate && v[k - 1].a < x.a));
		     k--)
			v[k] = v[k - 1];
		v[k] = x;
	}
}

/* The fractional knapsack bound on the cost of freeing the missing devices (jobs by cost per
 * device, the last one in part), and the fewest jobs that could free them. */


/* Heap sort's sift-down over v[0..end): the item at x sinks below larger rates. */
static void bitems_sift(struct bitem *v, size_t x, size_t end)
{
	for (;;) {
		size_t l = 2 * x + 1, mx = x;
		if (l < end && v[l].rate > v[mx].rate)
			mx = l;
		if (l + 1 < end && v[l + 1].rate > v[mx].rate)
			mx = l + 1;
		if (mx == x)
			return;
		struct bitem t = v[x];
		v[x] = v[mx];
		v[mx] = t;
		x = mx;
	}
}

int defrag_lower_bounds(struct planner *P)
{
	struct cscan *s = &P->scan;
	s->lb = 0;
	s->lb_moves = 0;
	uint64_t need = P->count > s->free ? P->count - s->free : 0;
	if (!need)
		return 0;
	size_t m = 0;
	struct bitem small[64], *v = small;
	for (uint32_t k = 0; k < s->njobs; k++)
		m += s->jobs[k].can && s->jobs[k].a;
	if (m > 64 && !(v = tp_mallocn(P->a, m, sizeof *v)))
		return TP_ENOMEM;
	m = 0;
	for (uint32_t k = 0; k < s->njobs; k++)
		if (s->jobs[k].can && s->jobs[k].a)
			v[m++] = (struct bitem){s->jobs[k].rate, s->jobs[k].w, s->jobs[k].a};
	if (m <= 64) {
		bitems_sort(v, m);
	} else { /* heap sort of indices would need the scan; sort the items by rate */
		for (size_t i = m / 2; i-- > 0;)
			bitems_sift(v, i, m);
		for (size_t end = m - 1; end > 0; end--) {
			struct bitem t = v[0];
			v[0] = v[end];
			v[end] = t;
			bitems_sift(v, 0, end);
		}
	}
	uint64_t left = need;
	int64_t lb = 0;
	for (size_t i = 0; i < m && left; i++) {
		if (v[i].a <= left) {
			lb = defrag_cost_add(lb, v[i].w);
			left -= v[i].a;
		} else {
			lb = defrag_cost_add(lb, (int64_t)((long double)v[i].w * left / v[i].a));
			left = 0;
		}
	}
	/* fewest jobs: the largest first; a count of jobs per size avoids a second sort */
	uint32_t moves = 0, amax = 0;
	for (size_t i = 0; i < m; i++)
		amax = v[i].a > amax ? v[i].a : amax;
	left = need;
	if (amax <= 64) {
		for (uint32_t a = amax; a > 0 && left; a--)
			for (size_t i = 0; i < m && left; i++)
				if (v[i].a == a) {
					left -= a < left ? a : left;
					moves++;
				}
	} else { /* large jobs: their sizes sorted, largest first */
		for (size_t i = 0; i < m; i++)
			v[i].rate = -(double)v[i].a;
		bitems_sort(v, m);
		for (size_t i = 0; i < m && left; i++, moves++)
			left -= v[i].a < left ? v[i].a : left;
	}
	if (v != small)
		tp_free(P->a, v);
	s->lb = lb;
	s->lb_moves = moves;
	return 0;
}

/* ---- the request kept inside the candidate -------------------------------------------------- */

static bool node_allowed(const struct planner *P, uint32_t node)
{
	if (P->tnode && !P->tnode[node])
		return false;
	return !P->have_q || !P->q.has_nodes ||
	       bsearch(&node, P->q.nodes, P->q.nnodes, sizeof *P->q.nodes, defrag_cmp_u32);
}

/* The request with an allow-list of the candidate's nodes (the whole cluster: the request). */
int defrag_restrict_request(struct planner *P, bool *empty)
{
	const struct cscan *s = &P->scan;
	*empty = false;
	if (P->compact) {
		P->rreq = NULL;
		return 0;
	}
	if (s->level < 0) {
		P->rreq = P->r;
		return 0;
	}
	if (tp_grow(P->a, (void **)&P->rnames, &P->cap_rnames, s->nnodes, sizeof *P->rnames))
		return TP_ENOMEM;
	size_t n = 0;
	unsigned nl = tp_node_level(P->t);
	for (uint32_t node = s->node0; node < s->node0 + s->nnodes; node++)
		if (node_allowed(P, node))
			P->rnames[n++] = P->t->lv[nl].dname[node];
	tp_request_read(P->r, &P->rreq_store); /* by its version: no byte past its end */
	P->rreq_store.select_nodes = P->rnames;
	P->rreq_store.nselect_nodes = n;
	P->rreq = &P->rreq_store;
	*empty = n == 0;
	return 0;
}
