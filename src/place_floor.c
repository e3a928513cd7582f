/* SPDX-License-Identifier: MIT */
/*
 * The efficiency floor (request.comm.min_efficiency, tp_step_model version 2) and the search
 * for a placement that meets it.
 *
 * tp_place tests the placement its rules chose against the floor (tp_cost_efficiency,
 * O(count log count)). When it is below, and the model does not opt out (no_floor_search,
 * version 3), the search tries the topology's fabric classes one by one (topology_fabric.c,
 * tp_build_fabric_classes: the nodes sharing a device model, a node fabric and the fabric of
 * the domain above the node, derived once when the topology is built): the request
 * restricted to the class's nodes (and to its own allow-list), the floor unchanged; the first
 * placement that meets the floor is the answer.
 *
 * Order. e_c is the efficiency of the job's devices packed in tree order into class c alone,
 * the layout the class gives it when empty; a class too small for the job has none. Classes
 * with fewer free devices than the job needs are passed over first (their e_c is not even
 * computed), only those with e_c >= floor are tried (no other can meet it), and they go
 * slowest first (the lowest e_c; ties to
 * the lower class index): best fit over the classes. A job that a slow class holds at its
 * floor leaves the fast classes to the jobs that only they hold at theirs, as best fit over
 * domains leaves the large free domains to the large jobs; fastest first would put every
 * medium job on the fast fabric and the large ones behind it. The simulator measured both
 * (docs/benchmarks.md, "A floor that gives way to the wait"): on llm / mixed:576 under
 * besteffort fastest first lost 12.5 points more than slowest first.
 *
 * Cost. A request without a floor pays one test of a pointer; one whose rules' choice meets
 * it pays that choice's efficiency. The search costs, per class that can hold the job, a sum
 * of the free counts of its cover (the largest domains wholly of the class: its racks on a
 * fleet of one class per rack), and per one with room one efficiency (O(count log count));
 * per class tried,
 * a placement restricted to the class's node ids (kept with the topology: nothing is
 * resolved or sorted per call, and the filtered solver walks the class's nodes, not the rest
 * of the cluster). A topology of more than TP_FABRIC_CLASSES_MAX classes is not searched.
 *
 * The answer is deterministic: the order depends only on the topology, the request and the
 * cluster's free counts. tp_place only reads the cluster, so a refusal leaves it as it was.
 */
#include <stdio.h>
#include <string.h>

#include "cost.h"
#include "place_internal.h"

/* The best placement seen: its efficiency and step time, and where (a class; -1: no class
 * named, the topology has one; -2: across classes). */
struct reach {
	double eff, us;
	int cls;
};

/* The efficiency of pl's devices and, when it is below the floor, their step time. */
static int measure(const tp_placement *pl, const struct tp_rq *q, double floor, double *eff,
                   double *us, char *why)
{
	const struct tp_topology *t = pl->c->t;
	*us = 0.0;
	int rc = tp_cost_efficiency(eff, t, pl->devs, pl->ndev, q->comm, &pl->alloc, why,
	                            TP_ERRMSG_LEN);
	if (!rc && *eff < floor)
		rc = tp_cost_step_us(us, t, pl->devs, pl->ndev, q->comm, &pl->alloc, why,
		                     TP_ERRMSG_LEN);
	return rc;
}

/* e_c: the efficiency of the job's devices packed in tree order into class c (buf: count). */
static int class_ideal(double *e, const struct tp_topology *t, unsigned c,
                       const struct tp_rq *q, uint32_t *buf, const tp_allocator *a)
{
	const struct tp_fclass *fc = &t->fclass[c];
	uint32_t got = 0;
	for (uint32_t i = 0; i < fc->nnodes && got < q->count; i++) {
		uint32_t node = t->class_nodes[fc->first + i];
		for (uint32_t d = t->dev_first[node]; d < t->dev_first[node + 1] && got < q->count; d++)
			buf[got++] = d;
	}
	return tp_cost_efficiency(e, t, buf, q->count, q->comm, a, NULL, 0);
}

/* Free devices of class k: a sum over its cover (the largest domains wholly of the class). */
static uint32_t class_free(const struct tp_cluster *c, unsigned k)
{
	const struct tp_topology *t = c->t;
	const struct tp_fclass *fc = &t->fclass[k];
	uint32_t sum = 0;
	for (uint32_t i = 0; i < fc->ncover; i++) {
		uint64_t x = t->class_cover[fc->cover_first + i];
		sum += c->free[x >> 32][(uint32_t)x];
	}
	return sum;
}

/* The class's nodes that the request's own allow-list keeps (both sorted), into buf. */
static size_t class_allowed(const struct tp_topology *t, unsigned k, const struct tp_rq *q,
                            uint32_t *buf)
{
	const uint32_t *a = t->class_nodes + t->fclass[k].first;
	size_t na = t->fclass[k].nnodes, i = 0, j = 0, n = 0;
	while (i < na && j < q->nnodes) {
		if (a[i] < q->nodes[j])
			i++;
		else if (a[i] > q->nodes[j])
			j++;
		else {
			buf[n++] = a[i];
			i++;
			j++;
		}
	}
	return n;
}

/* "fabric class 1 (18 nodes like rack0-n0, H100)" into buf (n bytes). */
static void class_name(const struct tp_topology *t, int k, char *buf, size_t n)
{
	const struct tp_fclass *fc = &t->fclass[k];
	uint32_t node = t->class_nodes[fc->first];
	uint16_t m = t->node_model[node];
	snprintf(buf, n, "fabric class %d (%u node%s like %s%s%s)", k, fc->nnodes,
	         fc->nnodes == 1 ? "" : "s", t->lv[tp_node_level(t)].dname[node],
	         m != TP_NO_MODEL ? ", " : "", m != TP_NO_MODEL ? t->models[m] : "");
}

/* The classes that hold the job, by what the search can do in them: too few free devices
 * now (skipped, their e_c not computed), e_c below the floor (skipped), or candidates,
 * returned in cand slowest first. */
struct tally {
	unsigned hold, few, slow, ncand;
	unsigned cand[TP_FABRIC_CLASSES_MAX];
};

static int order_classes(const struct tp_cluster *c, const struct tp_rq *q, double floor,
                         struct tally *ty, const tp_allocator *a)
{
	const struct tp_topology *t = c->t;
	double e[TP_FABRIC_CLASSES_MAX];
	uint32_t *buf = tp_mallocn(a, q->count, sizeof *buf);
	if (!buf)
		return TP_ENOMEM;
	int rc = 0;
	memset(ty, 0, sizeof *ty);
	for (unsigned k = 0; k < t->nclass && !rc; k++) {
		if (t->fclass[k].ndev < q->count)
			continue;
		ty->hold++;
		if (class_free(c, k) < q->count) {
			ty->few++;
			continue;
		}
		rc = class_ideal(&e[k], t, k, q, buf, a);
		if (rc)
			break;
		if (!(e[k] >= floor)) {
			ty->slow++;
			continue;
		}
		unsigned at = ty->ncand++; /* insertion: ascending e_c, the lower index on ties */
		while (at > 0 && e[ty->cand[at - 1]] > e[k]) {
			ty->cand[at] = ty->cand[at - 1];
			at--;
		}
		ty->cand[at] = k;
	}
	tp_free(a, buf);
	return rc;
}

/* Place q inside class k (its free devices suffice): 0 with *out the placement that meets the
 * floor, 1 when the class has none (best updated with what it offered), or TP_ENOMEM. */
static int try_class(const struct tp_cluster *c, const struct tp_rq *q, unsigned k,
                     double floor, uint32_t *nodes_buf, struct reach *best, tp_placement **out)
{
	const struct tp_topology *t = c->t;
	struct tp_rq qk = *q;
	qk.has_nodes = true;
	if (q->has_nodes) {
		qk.nodes = nodes_buf;
		qk.nnodes = class_allowed(t, k, q, nodes_buf);
		if (qk.nnodes == 0)
			return 1;
	} else {
		qk.nodes = t->class_nodes + t->fclass[k].first;
		qk.nnodes = t->fclass[k].nnodes;
	}
	tp_placement *pk = tp_pl_placement_new(c, false);
	if (!pk)
		return TP_ENOMEM;
	int rc = tp_pl_place_parts(pk, c, &qk);
	if (rc == 0) {
		double eff, us;
		char why[TP_ERRMSG_LEN];
		rc = measure(pk, q, floor, &eff, &us, why);
		if (rc == 0 && eff >= floor) {
			*out = pk;
			return 0;
		}
		if (rc == 0 && eff > best->eff)
			*best = (struct reach){eff, us, (int)k};
	}
	tp_placement_destroy(pk);
	return rc == TP_ENOMEM ? TP_ENOMEM : 1;
}

/* The refusal's message: the floor, the best reached and where, then what the search found. */
static int refuse(tp_placement *pl, double floor, const struct reach *best, const char *tail)
{
	char where[TP_ERRMSG_LEN / 2] = "";
	if (best->cls == -2)
		snprintf(where, sizeof where, " across fabric classes");
	if (best->cls >= 0) {
		char name[TP_ERRMSG_LEN / 2 - 16];
		class_name(pl->c->t, best->cls, name, sizeof name);
		snprintf(where, sizeof where, " inside %s", name);
	}
	return tp_seterr(pl->errmsg, TP_EBUSY,
	                 "busy: request.comm.min_efficiency %g: the best placement now reaches "
	                 "%.3f (step %.4g us, %.4g us on the ideal layout)%s%s", floor, best->eff,
	                 best->us, best->us * best->eff, where, tail);
}

/* A class's placement becomes the answer, for the request as it was asked (*plp's job id and
 * request go to it; *plp is destroyed). */
static void adopt(tp_placement **plp, tp_placement *found)
{
	tp_placement *pl = *plp;
	found->job = pl->job;
	found->req = pl->req;
	pl->job = NULL;
	pl->req = NULL;
	tp_placement_destroy(pl);
	*plp = found;
}

/* The search over the fabric classes for *plp's request (its rules' choice is best). */
static int search(tp_placement **plp, const struct tp_cluster *c, const struct tp_rq *q,
                  double floor, struct reach *best)
{
	tp_placement *pl = *plp;
	struct tally ty;
	int rc = order_classes(c, q, floor, &ty, &pl->alloc);
	if (rc)
		return rc;
	uint32_t *nodes_buf = NULL;
	if (ty.ncand && q->has_nodes &&
	    !(nodes_buf = tp_mallocn(&pl->alloc, q->nnodes ? q->nnodes : 1, sizeof *nodes_buf)))
		return TP_ENOMEM;
	tp_placement *found = NULL;
	rc = 1;
	for (unsigned i = 0; i < ty.ncand && rc == 1; i++)
		rc = try_class(c, q, ty.cand[i], floor, nodes_buf, best, &found);
	tp_free(&pl->alloc, nodes_buf);
	if (rc == 0) {
		adopt(plp, found);
		return 0;
	}
	if (rc != 1)
		return rc;
	char tail[TP_ERRMSG_LEN / 2];
	if (ty.hold == 0)
		snprintf(tail, sizeof tail, "; no fabric class holds the job's %u devices alone",
		         q->count);
	else
		snprintf(tail, sizeof tail, "; of the %u fabric classes that hold the job, %u %s too "
		         "few free devices, %u cannot reach it even when wholly free, %u %s no such "
		         "placement now", ty.hold, ty.few, ty.few == 1 ? "has" : "have", ty.slow,
		         ty.ncand, ty.ncand == 1 ? "has" : "have");
	return refuse(pl, floor, best, tail);
}

int tp_pl_floor(tp_placement **plp, const struct tp_cluster *c, const struct tp_rq *q)
{
	double floor = q->comm ? tp_cost_model_floor(q->comm) : 0.0;
	if (!(floor > 0.0))
		return 0;
	tp_placement *pl = *plp;
	struct reach best = {1.0, 0.0, -1};
	char why[TP_ERRMSG_LEN];
	int rc = measure(pl, q, floor, &best.eff, &best.us, why);
	if (rc) /* the model was checked when the request was resolved: only TP_ENOMEM is left */
		return tp_seterr(pl->errmsg, rc, "request.comm: %s", why);
	if (best.eff >= floor)
		return 0;
	const struct tp_topology *t = c->t;
	for (size_t i = 0; t->node_class && i < pl->ndev && best.cls != -2; i++) {
		int k = t->node_class[t->dev_node[pl->devs[i]]];
		best.cls = best.cls == -1 || best.cls == k ? k : -2;
	}
	char tail[96];
	if (!tp_cost_model_floor_search(q->comm))
		return refuse(pl, floor, &best, "; not searched further (request.comm.no_floor_search)");
	if (t->nclass < 2) {
		if (t->nclass == 0)
			snprintf(tail, sizeof tail, "; not searched further: the topology has more than "
			         "%d fabric classes", TP_FABRIC_CLASSES_MAX);
		else
			snprintf(tail, sizeof tail, "; the topology has one fabric class");
		return refuse(pl, floor, &best, tail);
	}
	rc = search(plp, c, q, floor, &best);
	if (rc && rc != TP_EBUSY)
		return tp_seterr((*plp)->errmsg, rc, "out of memory searching the fabric classes "
		                 "for request.comm.min_efficiency %g", floor);
	return rc;
}

/* ---- fabric fit (request.comm.fabric_fit) ------------------------------------------------- */

/*
 * Best fit over fabrics. With fabric_fit f > 0 on a topology of two classes or more, before
 * the rules choose over the whole cluster, the classes whose e_c is at least f x the best e_c
 * of the classes that hold the job (room or not: the fast class stays the measure while it is
 * full) and that have enough free devices are tried, slowest first: the lowest e_c, then the
 * slower node fabric, then the slower fabric above the node, then the lower index (a 1-GPU job
 * has e_c = 1 everywhere: it goes to the slowest fabric). Each try is the request restricted
 * to the class, with the floor max(min_efficiency, f x e_c): a class's placement that a
 * fragmented class would stretch over its slow fabric is no fit. The first placement found
 * is the answer.
 *
 * Why: on a fleet of NVL72 racks, HGX nodes and PCIe-only nodes the rules alone (fewest
 * domains, best fit by free devices) cannot tell the fabrics apart, and put a job that does
 * not need NVLink on the NVL72 racks as readily as on a PCIe node; the job that needs them
 * then waits, or runs over InfiniBand. Measured in the simulator on mixed:576, 4 workloads x
 * 3 queue disciplines x 3 seeds (docs/benchmarks.md, "Fabric fit"): f = 0.9 against the
 * same policy without it.
 */

/* Whether class a goes before class b (e: their e_c). */
static bool fit_before(const struct tp_topology *t, const double *e, unsigned a, unsigned b)
{
	const struct tp_fclass *x = &t->fclass[a], *y = &t->fclass[b];
	if (e[a] != e[b])
		return e[a] < e[b];
	if (x->node_gbps != y->node_gbps)
		return x->node_gbps < y->node_gbps;
	if (x->up_gbps != y->up_gbps)
		return x->up_gbps < y->up_gbps;
	return a < b;
}

/* The classes to try for fabric fit f, in order, into ty->cand (e: every class's e_c, 0 where
 * the class cannot hold the job). */
static int order_fit(const struct tp_cluster *c, const struct tp_rq *q, double f,
                     struct tally *ty, double *e, const tp_allocator *a)
{
	const struct tp_topology *t = c->t;
	uint32_t *buf = tp_mallocn(a, q->count, sizeof *buf);
	if (!buf)
		return TP_ENOMEM;
	int rc = 0;
	double best = 0.0;
	memset(ty, 0, sizeof *ty);
	for (unsigned k = 0; k < t->nclass && !rc; k++) {
		e[k] = 0.0;
		if (t->fclass[k].ndev < q->count)
			continue;
		rc = class_ideal(&e[k], t, k, q, buf, a);
		best = e[k] > best ? e[k] : best;
	}
	tp_free(a, buf);
	for (unsigned k = 0; k < t->nclass && !rc; k++) {
		if (!(e[k] > 0.0 && e[k] >= f * best) || class_free(c, k) < q->count)
			continue;
		unsigned at = ty->ncand++;
		while (at > 0 && fit_before(t, e, k, ty->cand[at - 1])) {
			ty->cand[at] = ty->cand[at - 1];
			at--;
		}
		ty->cand[at] = k;
	}
	return rc;
}

int tp_pl_fit(tp_placement **plp, const struct tp_cluster *c, const struct tp_rq *q,
              bool *fitted)
{
	*fitted = false;
	const struct tp_topology *t = c->t;
	double f = q->comm ? tp_cost_model_fit(q->comm) : 0.0;
	if (!(f > 0.0) || t->nclass < 2 || q->count == 0)
		return 0;
	tp_placement *pl = *plp;
	struct tally ty;
	double e[TP_FABRIC_CLASSES_MAX];
	int rc = order_fit(c, q, f, &ty, e, &pl->alloc);
	uint32_t *nodes_buf = NULL;
	if (!rc && ty.ncand && q->has_nodes &&
	    !(nodes_buf = tp_mallocn(&pl->alloc, q->nnodes ? q->nnodes : 1, sizeof *nodes_buf)))
		rc = TP_ENOMEM;
	double floor = tp_cost_model_floor(q->comm);
	struct reach best = {0.0, 0.0, -1};
	tp_placement *found = NULL;
	int got = 1;
	for (unsigned i = 0; !rc && i < ty.ncand && got == 1; i++) {
		unsigned k = ty.cand[i];
		double fk = f * e[k] > floor ? f * e[k] : floor;
		got = try_class(c, q, k, fk, nodes_buf, &best, &found);
		if (got == TP_ENOMEM)
			rc = TP_ENOMEM;
	}
	tp_free(&pl->alloc, nodes_buf);
	if (rc)
		return tp_seterr(pl->errmsg, rc, "out of memory fitting request.comm.fabric_fit %g",
		                 f);
	if (got == 0) {
		adopt(plp, found);
		*fitted = true;
	}
	return 0;
}
