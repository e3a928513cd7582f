/* SPDX-License-Identifier: MIT */
/*
 * Simulating one set of jobs for the defragmentation planner: release the set under a
 * savepoint, place the request inside the candidate, find every migrated job a home that is as
 * local as where it sits, order the steps, and roll back. defrag.c describes the whole search.
 */
#include "defrag_internal.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- simulating one set of jobs ---------------------------------------------------------- */

/* ---- locality of a migrated job -------------------------------------------------------------
 *
 * A placement is at least as local as another when, at every level, it spans at most as many
 * domains. Then the smallest domain holding all of it is no higher either (span 1 stays 1).
 * Unless the policy opts out (allow_less_local), a migrant's new home must be at least as
 * local as the devices it leaves.
 */

/* How many domains of each level (0 .. the node level) the devices span. Domains are ranges
 * of device ids (the tree is numbered depth first), so on the sorted list every domain is one
 * run. */
static int dev_spans(struct planner *P, const uint32_t *devs, uint32_t n, uint32_t *span)
{
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	if (defrag_grow_u32(P->a, &P->spanbuf, &P->cap_span, n))
		return TP_ENOMEM;
	uint32_t *v = P->spanbuf;
	memcpy(v, devs, (size_t)n * sizeof *v);
	bool sorted = true;
	for (uint32_t i = 1; i < n && sorted; i++)
		sorted = v[i - 1] <= v[i];
	if (!sorted)
		qsort(v, n, sizeof *v, defrag_cmp_u32);
	for (unsigned l = 0; l <= nl; l++) {
		uint32_t k = 0, prev = UINT32_MAX;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t d = tp_node_ancestor(t, t->dev_node[v[i]], l);
			k += d != prev;
			prev = d;
		}
		span[l] = k;
	}
	return 0;
}

/* Whether a placement (devs) is at least as local as the spans `old`. */
static int as_local(struct planner *P, const uint32_t *devs, uint32_t n, const uint32_t *old,
                    bool *ok)
{
	uint32_t span[TP_MAX_LEVELS];
	int rc = dev_spans(P, devs, n, span);
	*ok = false;
	if (rc)
		return rc;
	for (unsigned l = 0; l <= tp_node_level(P->t); l++)
		if (span[l] > old[l])
			return 0;
	*ok = true;
	return 0;
}

/* The request a migrated job is re-placed with: its own, or one of its size that prefers the
 * smallest domain it sat in. */
static void migrant_request(const struct planner *P, const struct tp_job_impl *j, tp_request *r)
{
	if (j->shape) {
		*r = *j->shape;
		r->id = j->id;
		r->tenant = j->tenant;
		r->count = j->ndev;
		return;
	}
	*r = (tp_request)TP_REQUEST_INIT;
	r->id = j->id;
	r->job_class = j->job_class;
	r->priority = j->priority;
	r->tenant = j->tenant;
	r->count = j->ndev;
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	for (int l = (int)nl; l >= 0; l--) {
		uint32_t d0 = tp_node_ancestor(t, t->dev_node[j->devs[0]], (unsigned)l);
		bool same = true;
		for (uint32_t i = 1; i < j->ndev && same; i++)
			same = tp_node_ancestor(t, t->dev_node[j->devs[i]], (unsigned)l) == d0;
		if (same) {
			r->preferred = t->lv[l].name;
			return;
		}
	}
}

/*
 * A migrant without a shape that fills every node it sits on, on nodes of the largest size
 * (ndev = span(node) x the most devices of a node): a home as local spans at most as many
 * nodes, so it too is whole nodes of that size. Asking for groups of a node's size then
 * changes no answer that matters: the placements of the groups request are those of the plain
 * one made of whole nodes, so when the plain request's best is as local (whole nodes), it is
 * the groups request's best too (the same cost vector, hence the same spans); when the plain
 * request's best is less local, the groups request's best may be as local, a home the plain
 * request would only have found in the packing below. What it saves is the solver's knapsack:
 * groups of 1 over partly used nodes have no fast path in a three-level tree (place.c), so
 * the plain request of a 512-GPU migrant over several blocks of the 140-rack NVL72 fleet ran a
 * knapsack over every rack (20-40 ms); whole nodes take the top-level dual and the uniform
 * tables (well under a millisecond).
 */
static void whole_nodes(const struct tp_topology *t, const struct tp_job_impl *j,
                        const uint32_t *old, tp_request *r)
{
	unsigned nl = tp_node_level(t);
	uint32_t md = t->lv[nl].max_devices;
	if (md > 1 && (uint64_t)old[nl] * md == j->ndev) {
		r->group_size = md;
		r->group_level = NULL; /* the node level */
	}
}

/* The most free devices of any domain of level l: one Judy1 look-up where the level is
 * indexed; elsewhere (the node level) UINT32_MAX, a bound that never stops a search. */
uint32_t defrag_max_free(const struct planner *P, unsigned l)
{
	const struct tp_cluster *c = P->c;
	if (!c->indexed[l])
		return UINT32_MAX;
	Word_t k = ~(Word_t)0;
	JError_t err;
	if (Judy1Last(c->index[l], &k, &err) != 1)
		return 0;
	return (uint32_t)(k >> 32);
}

/* A node and the free devices of its ancestors, for the packing below. */
struct nodekey {
	uint32_t node;
	uint32_t key[TP_MAX_LEVELS]; /* free devices from the level below the domain down */
};

static int nodekey_cmp(const void *x, const void *y)
{
	const struct nodekey *a = x, *b = y;
	for (unsigned l = 0; l < TP_MAX_LEVELS; l++)
		if (a->key[l] != b->key[l])
			return a->key[l] > b->key[l] ? -1 : 1;
	return (a->node > b->node) - (a->node < b->node);
}

/* The last resort for a migrant whose placements were all less local: pack it into nodes of
 * domain `dom` of level `lvl` (-1: the cluster), the sub-domain with the most free devices
 * first at every level, then ask tp_place for it restricted to those nodes (a placement inside
 * them spans no more domains than they do). */
static int pack_home(struct planner *P, const tp_request *base, const struct tp_job_impl *j,
                     const uint32_t *old, int lvl, uint32_t dom, tp_placement **out)
{
	const struct tp_topology *t = P->t;
	unsigned nl = tp_node_level(t);
	uint32_t n0 = 0, nn = t->nnodes;
	if (lvl >= 0)
		tp_dom_nodes(t, (unsigned)lvl, dom, &n0, &nn);
	struct nodekey *v = tp_mallocn(P->a, nn ? nn : 1, sizeof *v);
	const char **names = tp_mallocn(P->a, nn ? nn : 1, sizeof *names);
	uint32_t *picked = tp_mallocn(P->a, nn ? nn : 1, sizeof *picked);
	int rc = 0;
	if (!v || !names || !picked) {
		rc = TP_ENOMEM;
		goto out;
	}
	uint32_t nv = 0;
	for (uint32_t node = n0; node < n0 + nn; node++) {
		uint32_t f = P->c->free[nl][node];
		if (!f)
			continue;
		struct nodekey k = {.node = node};
		for (unsigned l = (unsigned)(lvl + 1), x = 0; l <= nl; l++, x++)
			k.key[x] = P->c->free[l][tp_node_ancestor(t, node, l)];
		v[nv++] = k;
	}
	qsort(v, nv, sizeof *v, nodekey_cmp);
	uint32_t need = j->ndev, np = 0;
	for (uint32_t i = 0; i < nv && need; i++) {
		uint32_t f = P->c->free[nl][v[i].node];
		need -= f < need ? f : need;
		picked[np++] = v[i].node;
	}
	if (need)
		goto out;
	qsort(picked, np, sizeof *picked, defrag_cmp_u32);
	for (unsigned l = 0; l <= nl; l++) {
		uint32_t k = 0, prev = UINT32_MAX;
		for (uint32_t i = 0; i < np; i++) {
			uint32_t d = tp_node_ancestor(t, picked[i], l);
			k += d != prev;
			prev = d;
		}
		if (k > old[l])
			goto out; /* the greedy packing is not local enough either */
	}
	for (uint32_t i = 0; i < np; i++)
		names[i] = t->lv[nl].dname[picked[i]];
	tp_request r = *base;
	r.select_nodes = names;
	r.nselect_nodes = np;
	if ((rc = defrag_trial(P)))
		goto out;
	rc = tp_place(P->c, &r, out);
	if (rc) {
		tp_placement_destroy(*out);
		*out = NULL;
		rc = rc == TP_ENOMEM ? rc : 0;
	}
out:
	tp_free(P->a, v);
	tp_free(P->a, names);
	tp_free(P->a, picked);
	return rc;
}

/* A home tp_place found for a migrant whose old devices span `old`: when it is as local, it
 * becomes *out (*ok); an error destroys it; otherwise the caller still owns it. */
static int take_if_local(struct planner *P, tp_placement *pl, const uint32_t *old,
                         tp_placement **out, bool *ok)
{
	size_t n;
	const uint32_t *devs = tp_placement_devices(pl, &n);
	int rc = as_local(P, devs, (uint32_t)n, old, ok);
	if (rc) {
		*ok = false;
		tp_placement_destroy(pl);
		return rc;
	}
	if (*ok)
		*out = pl;
	return 0;
}

/* A home for a box-shaped migrant: its own box request (a box lies in one domain of its grid
 * level whatever `required` says, and takes the same children), kept when as local as now. */
static int box_home(struct planner *P, const tp_request *mr, const uint32_t *old,
                    tp_placement **out, bool *less_local)
{
	tp_placement *pl = NULL;
	int rc = defrag_trial(P);
	if (rc)
		return rc;
	rc = tp_place(P->c, mr, &pl);
	if (rc) {
		tp_placement_destroy(pl);
		return rc == TP_ENOMEM ? rc : 0;
	}
	bool ok;
	if ((rc = take_if_local(P, pl, old, out, &ok)))
		return rc;
	if (!ok) {
		tp_placement_destroy(pl);
		*less_local = true;
	}
	return 0;
}

/* A home for a migrant, or *out NULL. With the locality rule, the job is placed with its own
 * request (without a shape: one of its size) required inside one domain of the deepest level
 * it sits in now, then, while the answer is less local than now, inside one domain of each
 * deeper level in turn (a deeper domain can only lower the spans above it); the first answer
 * at least as local is its home. *less_local: answers were found but none was local enough.
 * Without the rule, the request as migrant_request says, then any free devices. */
static int find_home(struct planner *P, const struct tp_job_impl *j, tp_placement **out,
                     bool *less_local)
{
	const struct tp_topology *t = P->t;
	tp_request mr;
	int rc;
	*out = NULL;
	*less_local = false;
	migrant_request(P, j, &mr);
	if (P->pol.allow_less_local) {
		if ((rc = defrag_trial(P)))
			return rc;
		rc = tp_place(P->c, &mr, out);
		if (rc && rc != TP_ENOMEM && !j->shape && mr.preferred) {
			/* the preferred level is a courtesy: any free devices will do */
			tp_placement_destroy(*out);
			*out = NULL;
			mr.preferred = NULL;
			int st = defrag_trial(P);
			if (st)
				return st;
			rc = tp_place(P->c, &mr, out);
		}
		if (rc) {
			tp_placement_destroy(*out);
			*out = NULL;
		}
		return rc == TP_ENOMEM ? rc : 0;
	}
	uint32_t old[TP_MAX_LEVELS];
	if ((rc = dev_spans(P, j->devs, j->ndev, old)))
		return rc;
	memcpy(P->nohome_span, old, sizeof old);
	if (mr.box_level)
		return box_home(P, &mr, old, out, less_local);
	unsigned nl = tp_node_level(t);
	int deep = -1; /* the deepest level whose one domain holds the whole job */
	for (unsigned l = 0; l <= nl; l++)
		if (old[l] == 1)
			deep = (int)l;
	int have = j->shape ? tp_topology_level_index(t, mr.required) : -1;
	if (!j->shape) {
		mr.preferred = NULL;
		if (deep < 0)
			mr.preferred = t->lv[0].name; /* it spans top-level domains: as few as can be */
		whole_nodes(t, j, old, &mr);
	}
	bool pass;
	if ((rc = defrag_home_counts(P, j, old, deep, &pass)))
		return rc;
	if (!pass)
		return 0; /* no home as local: whether a less local one exists is not asked */
	int start = deep > have ? deep : have;
	uint32_t hint = 0; /* the domain of level `start` tp_place chose */
	bool hinted = false;
	for (int l = start; l <= (int)nl; l++) {
		if (l >= 0 && defrag_max_free(P, (unsigned)l) < j->ndev)
			break; /* no domain of this level (or deeper) has room: skip the calls */
		tp_request r = mr;
		if (l >= 0 && l > have) {
			r.required = t->lv[l].name;
			if (tp_topology_level_index(t, r.preferred) <= l)
				r.preferred = NULL; /* one domain of level l is as few as can be */
		}
		tp_placement *pl = NULL;
		if ((rc = defrag_trial(P)))
			return rc;
		rc = tp_place(P->c, &r, &pl);
		if (rc) {
			tp_placement_destroy(pl);
			if (rc == TP_ENOMEM)
				return rc;
			break; /* no room in any domain of this level: none deeper has room */
		}
		bool ok;
		if ((rc = take_if_local(P, pl, old, out, &ok)))
			return rc;
		if (ok) {
			*less_local = false;
			return 0;
		}
		if (l == start && start >= 0) {
			size_t n;
			const uint32_t *devs = tp_placement_devices(pl, &n);
			hint = tp_node_ancestor(t, t->dev_node[devs[0]], (unsigned)start);
			hinted = true;
		}
		tp_placement_destroy(pl);
		*less_local = true;
	}
	if (!*less_local || j->shape)
		return 0;
	/* tp_place's answers were all less local: pack it by hand */
	tp_request r = mr;
	r.preferred = NULL;
	if (start >= 0)
		r.required = t->lv[start].name;
	tp_placement *pl = NULL;
	if ((rc = pack_home(P, &r, j, old, hinted ? start : -1, hint, &pl)))
		return rc;
	if (pl) {
		bool ok;
		if ((rc = take_if_local(P, pl, old, out, &ok)))
			return rc;
		if (ok) {
			*less_local = false;
			return 0;
		}
		tp_placement_destroy(pl);
	}
	return 0;
}

/* For the message of a job with no home: whether it would have one without the locality
 * rule. */
static int less_local_home(struct planner *P, const struct tp_job_impl *j, bool *yes)
{
	bool allow = P->pol.allow_less_local, unused;
	tp_placement *pl = NULL;
	P->pol.allow_less_local = 1;
	int rc = find_home(P, j, &pl, &unused);
	P->pol.allow_less_local = allow;
	*yes = pl != NULL;
	tp_placement_destroy(pl);
	return rc;
}

static tp_job_options job_options(const struct tp_job_impl *j)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = j->job_class;
	o.priority = j->priority;
	o.tenant = j->tenant;
	o.preemptible = j->preemptible;
	o.migratable = j->migratable;
	o.checkpoint_s = j->checkpoint_s;
	o.shape = j->shape;
	return o;
}

/* Nodes a job's devices span (its devices are in rank order, mostly by node). */
static uint32_t node_span(const struct planner *P, const struct tp_job_impl *j)
{
	uint32_t n = 0, prev = UINT32_MAX;
	for (uint32_t i = 0; i < j->ndev; i++) {
		uint32_t node = P->t->dev_node[j->devs[i]];
		n += node != prev;
		prev = node;
	}
	return n;
}

/* The order migrants are re-placed in: those that cannot fall back to preemption first, then
 * larger jobs, then jobs on fewer nodes, then by id. */
static int by_migrant_order(const struct planner *P, uint32_t x, uint32_t y)
{
	const struct cjob *a = &P->scan.jobs[x], *b = &P->scan.jobs[y];
	bool pa = a->can & CAN_PREEMPT, pb = b->can & CAN_PREEMPT;
	if (pa != pb)
		return pa ? 1 : -1;
	if (a->j->ndev != b->j->ndev)
		return a->j->ndev > b->j->ndev ? -1 : 1;
	/* the tighter job first: one that sits on fewer nodes has fewer homes */
	uint32_t na = node_span(P, a->j), nb = node_span(P, b->j);
	if (na != nb)
		return na < nb ? -1 : 1;
	return (x > y) - (x < y);
}

/* Whether a moved job restarts elsewhere (else it is preempted). */
static bool migrates(const struct cjob *cj)
{
	return (cj->can & CAN_MIGRATE) && !cj->force_preempt;
}

/* Migrant results of one simulation: new devices tobuf[off[i] .. off[i+1]), or preempted. */
struct migs {
	uint32_t n;
	uint32_t *k;   /* job index in the scan */
	uint32_t *off; /* [n + 1] */
	bool *preempt;
};

/* Re-place the migrants, one after the other. With `blockers` (a second attempt, after the
 * first one's migrations formed a cycle), the devices a later migrant still occupies stay held
 * until its turn, so that no migrant lands where a later one sits (the steps can then always
 * be ordered); migrants the first attempt preempted stay preempted. *bad: the migrant with no
 * home, or UINT32_MAX. */
static int place_migrants(struct planner *P, struct migs *m, bool blockers, uint32_t *bad)
{
	struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	char id[48];
	int rc = 0;
	*bad = UINT32_MAX;
	if (blockers) {
		for (uint32_t i = 0; i < m->n; i++) {
			if (m->preempt[i])
				continue; /* preempted in the first attempt: it stays stopped */
			const struct tp_job_impl *j = s->jobs[m->k[i]].j;
			if (defrag_grow_u32(P->a, &P->holdbuf, &P->cap_hold, j->ndev))
				return TP_ENOMEM;
			uint32_t nb = 0;
			for (uint32_t x = 0; x < j->ndev; x++)
				if (tp_dev_free(c, j->devs[x]))
					P->holdbuf[nb++] = j->devs[x];
			snprintf(id, sizeof id, BLOCK_FMT, i);
			if (nb && (rc = tp_cluster_assign_impl(c, id, P->holdbuf, nb, NULL)))
				return rc;
		}
	}
	size_t used = 0;
	m->off[0] = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		const struct cjob *cj = &s->jobs[m->k[i]];
		if (blockers && m->preempt[i]) {
			m->off[i + 1] = (uint32_t)used;
			continue;
		}
		if (blockers) {
			snprintf(id, sizeof id, BLOCK_FMT, i);
			if (tp_cluster_job_slot(c, id) != TP_NO_JOB &&
			    (rc = tp_cluster_release(c, id)))
				return rc;
		}
		tp_placement *pl = NULL;
		bool less_local;
		if ((rc = find_home(P, cj->j, &pl, &less_local)))
			return rc;
		m->preempt[i] = false;
		if (pl) {
			size_t n;
			const uint32_t *devs = tp_placement_devices(pl, &n);
			if (defrag_grow_u32(P->a, &P->tobuf, &P->cap_to, used + n)) {
				tp_placement_destroy(pl);
				return TP_ENOMEM;
			}
			memcpy(P->tobuf + used, devs, n * sizeof *devs);
			tp_job_options o = job_options(cj->j);
			rc = tp_cluster_assign_impl(c, cj->j->id, devs, n, &o);
			tp_placement_destroy(pl);
			if (rc)
				return rc;
			used += n;
		} else {
			tp_placement_destroy(pl);
			rc = 0;
			if (!(cj->can & CAN_PREEMPT)) {
				*bad = i;
				/* only the first such job makes the message: probe for it alone */
				if (!less_local && !P->pol.allow_less_local && !P->diag.nohome &&
				    (rc = less_local_home(P, cj->j, &less_local)))
					return rc;
				P->nohome_less_local = less_local;
				return 0;
			}
			m->preempt[i] = true;
		}
		m->off[i + 1] = (uint32_t)used;
	}
	return 0;
}

struct owner {
	uint32_t dev, i;
};

static int owner_cmp(const void *x, const void *y)
{
	const struct owner *a = x, *b = y;
	return (a->dev > b->dev) - (a->dev < b->dev);
}

/* Order the migrations so that each one's targets are free when its turn comes: a migrant that
 * lands on devices another migrant leaves goes after it. Writes the order to ord[]; returns
 * false on a cycle. Ties keep the placement order. */
static int order_migrants(struct planner *P, const struct migs *m, uint32_t *ord, bool *ok)
{
	const struct cscan *s = &P->scan;
	size_t nown = 0;
	for (uint32_t i = 0; i < m->n; i++)
		if (!m->preempt[i])
			nown += s->jobs[m->k[i]].j->ndev;
	struct owner *own = tp_mallocn(P->a, nown ? nown : 1, sizeof *own);
	uint32_t *indeg = tp_calloc(P->a, m->n ? m->n : 1, sizeof *indeg);
	bool *done = tp_calloc(P->a, m->n ? m->n : 1, sizeof *done);
	/* edges: after[e] must follow before[e] */
	size_t cap_eb = 0, cap_ea = 0, ne = 0;
	uint32_t *eb = NULL, *ea = NULL;
	int rc = 0;
	if (!own || !indeg || !done) {
		rc = TP_ENOMEM;
		goto out;
	}
	nown = 0;
	for (uint32_t i = 0; i < m->n; i++) {
		if (m->preempt[i])
			continue;
		const struct tp_job_impl *j = s->jobs[m->k[i]].j;
		for (uint32_t x = 0; x < j->ndev; x++)
			own[nown++] = (struct owner){j->devs[x], i};
	}
	qsort(own, nown, sizeof *own, owner_cmp);
	for (uint32_t i = 0; i < m->n; i++) {
		for (uint32_t x = m->off[i]; x < m->off[i + 1]; x++) {
			struct owner key = {P->tobuf[x], 0};
			struct owner *o = bsearch(&key, own, nown, sizeof *own, owner_cmp);
			if (!o || o->i == i)
				continue;
			if (tp_grow(P->a, (void **)&eb, &cap_eb, ne + 1, sizeof *eb) ||
			    tp_grow(P->a, (void **)&ea, &cap_ea, ne + 1, sizeof *ea)) {
				rc = TP_ENOMEM;
				goto out;
			}
			eb[ne] = o->i;
			ea[ne++] = i;
			indeg[i]++;
		}
	}
	uint32_t nord = 0;
	for (;;) {
		uint32_t next = UINT32_MAX;
		for (uint32_t i = 0; i < m->n && next == UINT32_MAX; i++)
			if (!done[i] && !indeg[i])
				next = i;
		if (next == UINT32_MAX)
			break;
		done[next] = true;
		ord[nord++] = next;
		for (size_t e = 0; e < ne; e++)
			if (eb[e] == next)
				indeg[ea[e]]--;
	}
	*ok = nord == m->n;
out:
	tp_free(P->a, own);
	tp_free(P->a, indeg);
	tp_free(P->a, done);
	tp_free(P->a, eb);
	tp_free(P->a, ea);
	return rc;
}

struct touched {
	uint32_t dom;
	int64_t after;
};

static int touched_cmp(const void *x, const void *y)
{
	const struct touched *a = x, *b = y;
	return (a->dom > b->dom) - (a->dom < b->dom);
}

/* Domains of the fragmentation level a list of devices touches, appended to *t. */
static int touch_devs(struct planner *P, struct touched **t, size_t *n, size_t *cap,
                      const uint32_t *devs, size_t nd)
{
	for (size_t i = 0; i < nd; i++) {
		if (tp_grow(P->a, (void **)t, cap, *n + 1, sizeof **t))
			return TP_ENOMEM;
		uint32_t node = P->t->dev_node[devs[i]];
		(*t)[(*n)++] = (struct touched){tp_node_ancestor(P->t, node, P->flevel), 0};
	}
	return 0;
}

/* The gain in the sum of squared free counts of the touched domains: larger means the free
 * devices left are gathered in fewer domains. `after` is read on the simulated cluster (minus
 * the request's own devices), `before` after the rollback. */
static void frag_after(struct planner *P, struct touched *t, size_t *n, const uint32_t *req,
                       size_t nreq)
{
	if (*n > 1)
		qsort(t, *n, sizeof *t, touched_cmp);
	size_t u = 0;
	for (size_t i = 0; i < *n; i++)
		if (!u || t[u - 1].dom != t[i].dom)
			t[u++] = t[i];
	*n = u;
	for (size_t i = 0; i < u; i++)
		t[i].after = P->c->free[P->flevel][t[i].dom];
	for (size_t i = 0; i < nreq; i++) {
		struct touched key = {tp_node_ancestor(P->t, P->t->dev_node[req[i]], P->flevel), 0};
		struct touched *x = bsearch(&key, t, u, sizeof *t, touched_cmp);
		if (x)
			x->after--;
	}
}

static int64_t frag_gain(const struct planner *P, const struct touched *t, size_t n)
{
	int64_t g = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t b = P->c->free[P->flevel][t[i].dom];
		g += t[i].after * t[i].after - b * b;
	}
	return g;
}

/* The steps of a simulated set: preemptions (in the scan's order), migrations (in `ord`), the
 * place step. */
static int build_steps(struct planner *P, const uint32_t *S, uint32_t n, const struct migs *m,
                       const uint32_t *ord, const tp_placement *final, struct draft *d)
{
	const struct cscan *s = &P->scan;
	int rc;
	if (defrag_grow_u32(P->a, &P->u32c, &P->cap_c, n))
		return TP_ENOMEM;
	uint32_t np = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!migrates(&s->jobs[S[i]]))
			P->u32c[np++] = S[i];
	for (uint32_t i = 0; i < m->n; i++)
		if (m->preempt[i])
			P->u32c[np++] = m->k[i];
	defrag_sort_jobs(P, P->u32c, np, defrag_by_index);
	for (uint32_t i = 0; i < np; i++) {
		const struct tp_job_impl *j = s->jobs[P->u32c[i]].j;
		if ((rc = defrag_draft_push(P->a, d, TP_STEP_PREEMPT, j->id, j->devs, j->ndev, NULL, 0)))
			return rc;
	}
	for (uint32_t x = 0; x < m->n; x++) {
		uint32_t i = ord[x];
		if (m->preempt[i])
			continue;
		const struct tp_job_impl *j = s->jobs[m->k[i]].j;
		if ((rc = defrag_draft_push(P->a, d, TP_STEP_MIGRATE, j->id, j->devs, j->ndev,
		                            P->tobuf + m->off[i], m->off[i + 1] - m->off[i])))
			return rc;
	}
	if (final) {
		size_t nf;
		const uint32_t *f = tp_placement_devices(final, &nf);
		if ((rc = defrag_draft_push(P->a, d, TP_STEP_PLACE, tp_placement_job(final), NULL, 0, f,
		                            nf)))
			return rc;
	}
	d->cost = 0;
	d->cost_s = 0;
	d->moves = n;
	d->moved_devices = 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct cjob *cj = &s->jobs[S[i]];
		d->cost = defrag_cost_add(d->cost, cj->w);
		d->cost_s += cj->j->checkpoint_s * cj->j->ndev;
		d->moved_devices += cj->j->ndev;
	}
	d->cand_free = s->free;
	d->level = s->level;
	d->dom = s->dom;
	d->tlevel = s->level;
	d->ntgt = s->level >= 0;
	d->tgt[0] = s->dom;
	return 0;
}

/* Everything a simulation allocates for its migrants. */
static int migs_new(struct planner *P, struct migs *m, uint32_t n)
{
	m->n = n;
	m->k = tp_mallocn(P->a, n ? n : 1, sizeof *m->k);
	m->off = tp_mallocn(P->a, n + 1, sizeof *m->off);
	m->preempt = tp_calloc(P->a, n ? n : 1, sizeof *m->preempt);
	return m->k && m->off && m->preempt ? 0 : TP_ENOMEM;
}

static void migs_free(struct planner *P, struct migs *m)
{
	tp_free(P->a, m->k);
	tp_free(P->a, m->off);
	tp_free(P->a, m->preempt);
}

/* Hold the devices the request (or the freed domain) takes, as the request's tenant. */
static int hold_devices(struct planner *P, const char *id, const uint32_t *devs, size_t n)
{
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.preemptible = 0;
	if (P->r) {
		o.job_class = P->r->job_class;
		o.priority = P->r->priority;
		o.tenant = P->r->tenant;
		o.shape = P->r;
	}
	return tp_cluster_assign_impl(P->c, id, devs, n, &o);
}

/* Once the set has left: take the devices the request gets in the candidate (compaction: the
 * whole domain, or the ranges held for a set of domains; else tp_place's answer, kept in *pl)
 * and hold them for the request. *held is false when the request does not fit there. */
static int hold_request(struct planner *P, tp_placement **pl, bool *held)
{
	struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	const uint32_t *X;
	size_t nX;
	int rc;
	*held = false;
	if (P->compact) {
		uint32_t one[2] = {s->dev0, s->dev1};
		const uint32_t *cr = P->ncr ? P->cr : one;
		uint32_t ncr = P->ncr ? P->ncr : 1;
		nX = 0;
		for (uint32_t r = 0; r < ncr; r++)
			nX += cr[2 * r + 1] - cr[2 * r];
		if ((rc = defrag_grow_u32(P->a, &P->holdbuf, &P->cap_hold, nX)))
			return rc;
		nX = 0;
		for (uint32_t r = 0; r < ncr; r++)
			for (uint32_t dev = cr[2 * r]; dev < cr[2 * r + 1]; dev++)
				P->holdbuf[nX++] = dev;
		X = P->holdbuf;
		for (size_t i = 0; i < nX; i++)
			if (!tp_dev_free(c, X[i]))
				return 0; /* cannot happen: the scan saw every holder */
	} else {
		rc = tp_place(c, P->rreq, pl);
		if (rc == TP_ENOMEM)
			return rc;
		if (rc)
			return 0;
		X = tp_placement_devices(*pl, &nX);
	}
	if ((rc = hold_devices(P, HOLD_REQUEST, X, nX)))
		return rc;
	*held = true;
	return 0;
}

/* Times a set's migrants are placed again, the one that had no home first. */
#define MIGRANT_RETRIES 3u

/* New homes for the set's migrants (m->k, in migrant order; *ord: the order of their steps,
 * both allocated here and freed by the caller). *ordered false: none found, *bad then names
 * the migrant with no home (UINT32_MAX: their homes formed a cycle). The homes stay held. */
static int home_migrants(struct planner *P, const uint32_t *S, uint32_t n, struct migs *m,
                         uint32_t **ord, bool *ordered, uint32_t *bad)
{
	struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	int rc;
	uint32_t nm = 0;
	for (uint32_t i = 0; i < n; i++)
		nm += migrates(&s->jobs[S[i]]);
	if ((rc = migs_new(P, m, nm)))
		return rc;
	*ord = tp_mallocn(P->a, nm ? nm : 1, sizeof **ord);
	if (!*ord)
		return TP_ENOMEM;
	nm = 0;
	for (uint32_t i = 0; i < n; i++)
		if (migrates(&s->jobs[S[i]]))
			m->k[nm++] = S[i];
	defrag_sort_jobs(P, m->k, nm, by_migrant_order);
	size_t sp2;
	if ((rc = tp_cluster_savepoint(c, &sp2)))
		return rc;
	/* attempt 0: every migrant in turn; 1 (their new homes formed a cycle): again, each one
	 * kept off the devices later migrants still hold; 2 (that left one with no home, or a
	 * cycle): the migrants that may be preempted are, at the same cost, and the others
	 * placed as in 1 */
	*ordered = false;
	*bad = UINT32_MAX;
	unsigned retries = 0;
	for (int attempt = 0; attempt < 3 && !*ordered; attempt++) {
		if (attempt == 2) {
			bool any = false;
			for (uint32_t i = 0; i < m->n; i++)
				if (!m->preempt[i] && (s->jobs[m->k[i]].can & CAN_PREEMPT))
					any = m->preempt[i] = true;
			if (!any)
				break;
		}
		if (attempt && (rc = tp_cluster_rollback(c, sp2)) == 0)
			rc = tp_cluster_savepoint(c, &sp2);
		if (rc || (rc = place_migrants(P, m, attempt >= 1, bad)))
			return rc;
		if (*bad != UINT32_MAX && attempt == 0 && *bad > 0 && retries < MIGRANT_RETRIES) {
			/* the migrant with no home goes first: the others may fit around it */
			uint32_t k = m->k[*bad];
			memmove(m->k + 1, m->k, *bad * sizeof *m->k);
			m->k[0] = k;
			retries++;
			attempt = -1;
			if ((rc = tp_cluster_rollback(c, sp2)) || (rc = tp_cluster_savepoint(c, &sp2)))
				return rc;
			continue;
		}
		if (*bad != UINT32_MAX) {
			if (attempt == 1)
				continue;
			break;
		}
		if ((rc = order_migrants(P, m, *ord, ordered)))
			return rc;
	}
	return 0;
}

/* The draft of a set whose migrants have homes: the domains every step touches (for the
 * fragmentation gain, *tch) and the steps. */
static int draft_steps(struct planner *P, const uint32_t *S, uint32_t n, const struct migs *m,
                       const uint32_t *ord, const tp_placement *final, struct draft *d,
                       struct touched **tch, size_t *ntch)
{
	const struct cscan *s = &P->scan;
	size_t cap_tch = 0;
	int rc = 0;
	for (uint32_t i = 0; i < n && !rc; i++) {
		const struct tp_job_impl *j = s->jobs[S[i]].j;
		rc = touch_devs(P, tch, ntch, &cap_tch, j->devs, j->ndev);
	}
	if (!rc)
		rc = touch_devs(P, tch, ntch, &cap_tch, P->tobuf, m->off[m->n]);
	size_t nfin = 0;
	const uint32_t *fin = final ? tp_placement_devices(final, &nfin) : NULL;
	if (!rc)
		rc = touch_devs(P, tch, ntch, &cap_tch, fin, nfin);
	if (rc)
		return rc;
	frag_after(P, *tch, ntch, fin, nfin);
	return build_steps(P, S, n, m, ord, final, d);
}

/* The deepest level one domain of which holds all of j's devices, or -1. */
static int deepest_common(const struct planner *P, const struct tp_job_impl *j)
{
	const struct tp_topology *t = P->t;
	for (int l = (int)tp_node_level(t); l >= 0; l--) {
		uint32_t d0 = tp_node_ancestor(t, t->dev_node[j->devs[0]], (unsigned)l);
		bool same = true;
		for (uint32_t i = 1; i < j->ndev && same; i++)
			same = tp_node_ancestor(t, t->dev_node[j->devs[i]], (unsigned)l) == d0;
		if (same)
			return l;
	}
	return -1;
}

/* cj's own figures, the same for every set: its deepest level and its spans. */
int defrag_job_reach(struct planner *P, struct cjob *cj)
{
	if (cj->placed)
		return 0;
	cj->deep = (int8_t)deepest_common(P, cj->j);
	int rc = dev_spans(P, cj->j->devs, cj->j->ndev, cj->span);
	if (rc)
		return rc;
	cj->placed = true;
	return 0;
}

/* Whether the counts leave job cj no home once the set (its nodes in P->roombuf,
 * defrag_set_nodes) left (*none), for a migrant that may not fall back to preemption;
 * *level: the deepest level that holds it now (-1: none, then no bound applies). Every count
 * below only grows as the set grows (its jobs' devices are counted free), so a job with no
 * home after a set has none after any subset of it either. */
static int job_homeless(struct planner *P, size_t nset, struct cjob *cj, int *level, bool *none)
{
	*none = false;
	*level = -1;
	if (!migrates(cj) || (cj->can & CAN_PREEMPT))
		return 0;
	int rc = defrag_job_reach(P, cj);
	if (rc)
		return rc;
	int l = cj->deep;
	if (l < 0)
		return 0;
	*level = l;
	uint32_t most;
	if ((rc = defrag_most_free_after(P, nset, (unsigned)l, &most)))
		return rc;
	if (most < cj->j->ndev) {
		*none = true;
		return 0;
	}
	bool room = true;
	if (P->room_bound && (rc = defrag_home_room(P, nset, cj->j, cj->span, l, &room)))
		return rc;
	*none = !room;
	return 0;
}

/* Whether the counts rule sets out at all: with the locality rule, once a simulation has
 * given the failed plan's message (the counts do not say whether a less local home exists). */
bool defrag_counts_rule_out(const struct planner *P)
{
	return !P->pol.allow_less_local && P->diag.nohome && !P->compact;
}

/* Counts that rule a set out before any simulation: with the locality rule, a migrant that
 * may not be preempted lands inside one domain of the deepest level that holds it now, so
 * some domain of that level must have its size free once the set left, on no more nodes than
 * it spans now (defrag_home_room, defrag_homes.c), and the migrants together must find their
 * sizes (defrag_homes_joint). *nohome: the first migrant that has no such domain, else NULL. */
static int homes_ruled_out(struct planner *P, const uint32_t *S, uint32_t n,
                           const struct tp_job_impl **nohome)
{
	*nohome = NULL;
	if (!defrag_counts_rule_out(P))
		return 0;
	size_t nset;
	uint32_t *size = tp_mallocn(P->a, n ? n : 1, sizeof *size);
	int *level = tp_mallocn(P->a, n ? n : 1, sizeof *level);
	const struct tp_job_impl *first = NULL; /* the first migrant the joint bound counts */
	uint32_t m = 0;
	int rc = size && level ? defrag_set_nodes(P, S, n, &nset) : TP_ENOMEM;
	for (uint32_t i = 0; i < n && !rc && !*nohome; i++) {
		struct cjob *cj = &P->scan.jobs[S[i]];
		int l;
		bool none;
		if ((rc = job_homeless(P, nset, cj, &l, &none)))
			break;
		if (none) {
			*nohome = cj->j;
		} else if (l >= 0) {
			if (!first)
				first = cj->j;
			size[m] = cj->j->ndev;
			level[m++] = l;
		}
	}
	/* part of the joint bound: the request's devices and the migrants' homes are disjoint,
	 * together at most the free devices once the set left (spares excepted: placement never
	 * takes them) */
	if (!rc && !*nohome && P->joint_bound) {
		uint64_t need = P->count, have = P->c->nfree;
		const struct tp_job_impl *blame = NULL;
		for (uint32_t i = 0; i < n; i++) {
			const struct cjob *cj = &P->scan.jobs[S[i]];
			have += cj->j->ndev;
			if (migrates(cj) && !(cj->can & CAN_PREEMPT)) {
				need += cj->j->ndev;
				if (!blame)
					blame = cj->j;
			}
		}
		if (blame && need > have)
			*nohome = blame;
	}
	bool room = true;
	if (!rc && !*nohome && P->joint_bound &&
	    (rc = defrag_homes_joint(P, nset, size, level, m, &room)) == 0 && !room)
		*nohome = first; /* one of them has no home; the message was made already */
	tp_free(P->a, size);
	tp_free(P->a, level);
	return rc;
}

/* The jobs among S[0..n) that the counts leave no home even when all of S left: bit i of
 * *mask for S[i] (n <= 32). Every set holding one of them is ruled out by homes_ruled_out, so
 * a search over the subsets of S may pass such sets by without trying them. 0 while the
 * counts rule nothing out (counts_rule_out). */
int defrag_homeless_mask(struct planner *P, const uint32_t *S, uint32_t n, uint32_t *mask)
{
	*mask = 0;
	if (!defrag_counts_rule_out(P) || n > 32)
		return 0;
	size_t nset;
	int rc = defrag_set_nodes(P, S, n, &nset);
	for (uint32_t i = 0; i < n && !rc; i++) {
		int l;
		bool none;
		if (!(rc = job_homeless(P, nset, &P->scan.jobs[S[i]], &l, &none)) && none)
			*mask |= 1u << i;
	}
	return rc;
}

/* Inside a simulation, once the set left and the request's devices are held: the first
 * migrant (that may not fall back to preemption) that defrag_home_counts leaves no home as
 * local as it sits, else NULL. The other migrants only take room, so such a set cannot work:
 * it is answered without placing any migrant. Only once a simulation has given the failed
 * plan's message (whose wording asks tp_place whether a less local home exists). */
static int migrants_counted_out(struct planner *P, const uint32_t *S, uint32_t n,
                                const struct tp_job_impl **nohome)
{
	*nohome = NULL;
	if (P->pol.allow_less_local || !P->diag.nohome)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		const struct cjob *cj = &P->scan.jobs[S[i]];
		if (!migrates(cj) || (cj->can & CAN_PREEMPT) || (cj->j->shape && cj->j->shape->box_level))
			continue;
		uint32_t old[TP_MAX_LEVELS];
		bool pass;
		int rc = dev_spans(P, cj->j->devs, cj->j->ndev, old);
		if (!rc)
			rc = defrag_home_counts(P, cj->j, old, deepest_common(P, cj->j), &pass);
		if (rc)
			return rc;
		if (!pass) {
			*nohome = cj->j;
			return 0;
		}
	}
	return 0;
}

/*
 * Try one set of jobs S (indices into the scan) on the candidate: release them, place the
 * request inside the candidate (compaction: take the whole domain), find the migrants new homes,
 * order the steps, and place the request on the cluster the plan leaves. Everything is rolled
 * back. *out: OUT_OK with the plan in *d, or why not; *nohome: the job that had no home.
 */
int defrag_try_subset(struct planner *P, const uint32_t *S, uint32_t n, struct draft *d, int *out,
                      const struct tp_job_impl **nohome)
{
	struct tp_cluster *c = P->c;
	const struct cscan *s = &P->scan;
	struct migs m = {0};
	tp_placement *pl = NULL, *final = NULL;
	struct touched *tch = NULL;
	size_t ntch = 0;
	uint32_t *ord = NULL;
	size_t sp;
	int rc;
	*out = OUT_NOFIT;
	*nohome = NULL;
	if ((rc = homes_ruled_out(P, S, n, nohome)))
		return rc;
	if (*nohome) {
		*out = OUT_NOHOME; /* from the counts, without simulating */
		P->ruled_out++;
		return 0;
	}
	if ((rc = defrag_budget_check(P, TP_BUDGET_SIMULATIONS)))
		return rc;
	P->stats.simulated++;
	if ((rc = tp_cluster_savepoint(c, &sp)))
		return rc;
	for (uint32_t i = 0; i < n; i++)
		if ((rc = tp_cluster_release(c, s->jobs[S[i]].j->id)))
			goto out;
	bool held, ordered;
	uint32_t bad;
	if ((rc = hold_request(P, &pl, &held)) || !held)
		goto out;
	if ((rc = migrants_counted_out(P, S, n, nohome)))
		goto out;
	if (*nohome) {
		*out = OUT_NOHOME;
		goto out;
	}
	if ((rc = home_migrants(P, S, n, &m, &ord, &ordered, &bad)))
		goto out;
	if (!ordered) {
		*out = bad != UINT32_MAX ? OUT_NOHOME : OUT_CYCLE;
		if (bad != UINT32_MAX)
			*nohome = s->jobs[m.k[bad]].j;
		goto out;
	}
	if ((rc = tp_cluster_release(c, HOLD_REQUEST)))
		goto out;
	if (!P->compact) {
		rc = tp_place(c, P->r, &final);
		if (rc == TP_ENOMEM)
			goto out;
		if (rc) {
			rc = 0;
			goto out; /* cannot happen: the held devices were a placement */
		}
	}
	if ((rc = draft_steps(P, S, n, &m, ord, final, d, &tch, &ntch)))
		goto out;
	*out = OUT_OK;
out:
	tp_cluster_rollback(c, sp);
	if (*out == OUT_OK) {
		d->frag = frag_gain(P, tch, ntch);
		d->final = final;
		final = NULL;
	} else {
		defrag_draft_clear(P->a, d);
	}
	if (rc)
		defrag_draft_clear(P->a, d);
	tp_placement_destroy(pl);
	tp_placement_destroy(final);
	tp_free(P->a, tch);
	tp_free(P->a, ord);
	migs_free(P, &m);
	return rc;
}

/* Whether the request fits inside the candidate once the jobs S have left. */
int defrag_fit_check(struct planner *P, const uint32_t *S, uint32_t n, bool *fits)
{
	struct tp_cluster *c = P->c;
	size_t sp;
	int rc;
	*fits = false;
	if ((rc = tp_cluster_savepoint(c, &sp)))
		return rc;
	for (uint32_t i = 0; i < n && !rc; i++)
		rc = tp_cluster_release(c, P->scan.jobs[S[i]].j->id);
	if (!rc)
		rc = defrag_trial(P);
	if (!rc) {
		tp_placement *pl = NULL;
		rc = tp_place(c, P->rreq, &pl);
		*fits = rc == 0;
		if (rc != TP_ENOMEM)
			rc = 0;
		tp_placement_destroy(pl);
	}
	tp_cluster_rollback(c, sp);
	return rc;
}
