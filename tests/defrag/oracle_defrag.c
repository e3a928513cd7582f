/* SPDX-License-Identifier: MIT */
/* The exhaustive oracle of oracle_defrag.h. */
#include "oracle_defrag.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---- random cases ---------------------------------------------------------------------------- */

static void sort_devs(uint32_t *v, unsigned n)
{
	for (unsigned a = 1; a < n; a++)
		for (unsigned b = a; b > 0 && v[b - 1] > v[b]; b--) {
			uint32_t t = v[b];
			v[b] = v[b - 1];
			v[b - 1] = t;
		}
}

/* A job of `size` devices on node `node` (and the next node of its rack when it does not fit
 * one), from the devices still free; false when they are not. */
static bool place_job(const struct od_case *k, bool *held, unsigned node, unsigned size,
                      uint32_t *devs)
{
	unsigned got = 0, rack = node / k->nodes;
	for (unsigned n = node; n < (rack + 1) * k->nodes && got < size; n++)
		for (uint32_t d = n * k->gpus; d < (n + 1) * k->gpus && got < size; d++)
			if (!held[d])
				devs[got++] = d;
	return got == size;
}

static void gen_jobs(struct od_case *k, uint64_t *s)
{
	bool held[OD_DEVS] = {0};
	unsigned nr = k->blocks * k->racks;
	k->njobs = 0;
	for (unsigned rack = 0; rack < nr; rack++) {
		unsigned want = 2 + tp_test_below(s, 5);
		for (unsigned x = 0; x < want && k->njobs < OD_JOBS; x++) {
			/* small jobs mostly: candidates with more movable jobs than the exact
			 * subset search takes (TP_DEFRAG_EXACT_MAX) */
			unsigned size = 1 + tp_test_below(s, tp_test_below(s, 2) ? 2 : k->gpus);
			if (tp_test_below(s, 5) == 0)
				size = k->gpus + 1 + tp_test_below(s, k->gpus); /* two nodes */
			unsigned node = rack * k->nodes + tp_test_below(s, k->nodes);
			unsigned j = k->njobs;
			if (!place_job(k, held, node, size, k->devs[j]))
				continue;
			sort_devs(k->devs[j], size);
			for (unsigned i = 0; i < size; i++)
				held[k->devs[j][i]] = true;
			k->n[j] = size;
			snprintf(k->ids[j], sizeof k->ids[j], "j%u", j);
			tp_job_options o = TP_JOB_OPTIONS_INIT;
			o.migratable = tp_test_below(s, 10) < 7;
			o.preemptible = tp_test_below(s, 10) < 5;
			o.job_class = tp_test_below(s, 10) == 0 ? TP_CLASS_INTERACTIVE : TP_CLASS_TRAINING;
			o.priority = (int)tp_test_below(s, 3);
			static const double ck[] = {10, 30, 60, 120};
			o.checkpoint_s = ck[tp_test_below(s, 4)];
			k->o[j] = o;
			k->njobs++;
		}
	}
	unsigned total = nr * k->nodes * k->gpus;
	for (int which = 0; which < 2; which++) {
		if (tp_test_below(s, 4))
			continue;
		uint32_t d = tp_test_below(s, total);
		if (!held[d] && !k->unusable[d]) {
			k->unusable[d] = true;
			k->down[d] = which == 0;
		}
	}
}

static void gen_request(struct od_case *k, uint64_t *s)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = "req";
	r.priority = (int)tp_test_below(s, 3);
	k->kind = (enum od_kind)tp_test_below(s, 3);
	k->level = -1;
	k->preferred = false;
	unsigned rack = k->nodes * k->gpus;
	if (k->kind == OD_RACK_SLICES) {
		unsigned most = k->racks < 2 ? k->racks : 2;
		k->need = 1 + tp_test_below(s, most);
		k->slice = (tp_slice){"rack", rack};
		r.count = k->need * rack;
		unsigned w = tp_test_below(s, 10);
		if (w < 6) {
			k->level = 0;
			r.required = "block";
		} else if (w < 8) {
			k->level = 0;
			k->preferred = true;
			r.preferred = "block";
		}
	} else if (k->kind == OD_NODE_GROUPS) {
		k->need = 1 + tp_test_below(s, k->nodes);
		r.count = k->need * k->gpus;
		r.group_size = k->gpus;
		r.group_level = "node";
		k->level = 1;
		r.required = "rack";
	} else {
		k->need = 1 + tp_test_below(s, 2);
		k->slice = (tp_slice){"node", k->gpus};
		r.count = k->need * k->gpus;
		k->level = 0;
		r.required = "block";
	}
	k->r = r;
	if (k->kind != OD_NODE_GROUPS) {
		k->r.slices = &k->slice;
		k->r.nslices = 1;
	}
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	unsigned sw = tp_test_below(s, 4);
	pol.migrate = sw != 1;
	pol.preempt = sw != 2;
	pol.allow_interactive = tp_test_below(s, 5) == 0;
	pol.min_priority_gap = (int)tp_test_below(s, 2);
	if (tp_test_below(s, 6) == 0)
		pol.max_moves = 1 + tp_test_below(s, 4);
	if (tp_test_below(s, 6) == 0)
		pol.max_cost_s = 60 + 60.0 * tp_test_below(s, 20);
	k->pol = pol;
}

void od_gen(struct od_case *k, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ULL + 29;
	memset(k, 0, sizeof *k);
	k->seed = seed;
	k->blocks = 1 + tp_test_below(&s, 2);
	k->racks = 2 + tp_test_below(&s, 3);
	k->nodes = 2 + tp_test_below(&s, 2);
	k->gpus = tp_test_below(&s, 2) ? 4 : 2;
	if (tp_test_below(&s, 2)) {
		/* one block of 3-4 racks of 4 nodes of 4 GPUs, up to 16 small jobs: the shape
		 * of issue #15 scaled down (more movable jobs than the exact subset search
		 * takes) */
		k->blocks = 1;
		k->racks = 3 + tp_test_below(&s, 2);
		k->nodes = 4;
		k->gpus = 4;
	}
	while (k->blocks * k->racks * k->nodes > OD_NODES)
		k->racks--;
	gen_jobs(k, &s);
	gen_request(k, &s);
}

int od_build(const struct od_case *k, const tp_allocator *a, tp_topology **tp, tp_cluster **cp)
{
	const char *levels[] = {"block", "rack", "node"};
	tp_topology_builder *b = NULL;
	int rc = tp_topology_builder_create(&b, levels, 3, a);
	unsigned counts[] = {k->blocks, k->racks, k->nodes};
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, k->gpus, NULL);
	if (!rc)
		rc = tp_topology_build(b, tp);
	tp_topology_builder_destroy(b);
	if (rc)
		return rc;
	if ((rc = tp_cluster_create(cp, *tp, a)))
		return rc;
	for (unsigned j = 0; j < k->njobs && !rc; j++)
		rc = tp_cluster_assign(*cp, k->ids[j], k->devs[j], k->n[j], &k->o[j]);
	unsigned total = k->blocks * k->racks * k->nodes * k->gpus;
	for (uint32_t d = 0; d < total && !rc; d++)
		if (k->unusable[d])
			rc = k->down[d] ? tp_cluster_set_down(*cp, &d, 1, 1)
			                : tp_cluster_set_cordoned(*cp, &d, 1, 1);
	return rc;
}

/* ---- target sets ----------------------------------------------------------------------------- */

struct od_targets {
	uint64_t dev[512]; /* devices of each target set */
	unsigned n;
};

/* Every set of `need` consecutive-numbered units (domains of `per` nodes) among units
 * [u0, u0 + nu): their devices. */
static void add_sets(const struct od_case *k, struct od_targets *T, unsigned u0, unsigned nu,
                     unsigned per)
{
	unsigned idx[8];
	unsigned need = k->need;
	if (need > nu)
		return;
	for (unsigned i = 0; i < need; i++)
		idx[i] = i;
	for (;;) {
		uint64_t m = 0;
		for (unsigned i = 0; i < need; i++) {
			unsigned first = (u0 + idx[i]) * per * k->gpus;
			for (unsigned d = first; d < first + per * k->gpus; d++)
				m |= UINT64_C(1) << d;
		}
		if (T->n < 512)
			T->dev[T->n++] = m;
		int i = (int)need - 1;
		while (i >= 0 && idx[i] == nu - need + (unsigned)i)
			i--;
		if (i < 0)
			return;
		idx[i]++;
		for (unsigned j = (unsigned)i + 1; j < need; j++)
			idx[j] = idx[j - 1] + 1;
	}
}

static void list_targets(const struct od_case *k, struct od_targets *T)
{
	T->n = 0;
	unsigned nr = k->blocks * k->racks;
	if (k->kind == OD_RACK_SLICES) {
		if (k->level == 0 && !k->preferred)
			for (unsigned b = 0; b < k->blocks; b++)
				add_sets(k, T, b * k->racks, k->racks, k->nodes);
		else
			add_sets(k, T, 0, nr, k->nodes);
	} else if (k->kind == OD_NODE_GROUPS) {
		for (unsigned r = 0; r < nr; r++)
			add_sets(k, T, r * k->nodes, k->nodes, 1);
	} else {
		for (unsigned b = 0; b < k->blocks; b++)
			add_sets(k, T, b * k->racks * k->nodes, k->racks * k->nodes, 1);
	}
}

/* ---- homes ----------------------------------------------------------------------------------- */

/* The migrants packed into free devices per node: free[n] for anyone, own[j][n] for migrant j
 * alone; migrant j takes at most span[j][0] blocks, span[j][1] racks, span[j][2] nodes. */
struct od_pack {
	const struct od_case *k;
	unsigned free[OD_NODES], own[OD_JOBS][OD_NODES];
	unsigned nj, size[OD_JOBS], span[OD_JOBS][3];
};

static bool pack_job(struct od_pack *pk, unsigned j, unsigned node, unsigned left,
                     unsigned used[3], unsigned last_rack, unsigned last_block);

static bool pack_from(struct od_pack *pk, unsigned j)
{
	if (j == pk->nj)
		return true;
	unsigned used[3] = {0, 0, 0};
	return pack_job(pk, j, 0, pk->size[j], used, UINT32_MAX, UINT32_MAX);
}

static bool pack_job(struct od_pack *pk, unsigned j, unsigned node, unsigned left,
                     unsigned used[3], unsigned last_rack, unsigned last_block)
{
	if (!left)
		return pack_from(pk, j + 1);
	const struct od_case *k = pk->k;
	unsigned nn = k->blocks * k->racks * k->nodes;
	if (used[2] == pk->span[j][2])
		return false;
	for (unsigned n = node; n < nn; n++) {
		unsigned rack = n / k->nodes, block = rack / k->racks;
		unsigned u[3] = {used[0] + (block != last_block), used[1] + (rack != last_rack),
		                 used[2] + 1};
		unsigned avail = pk->free[n] + pk->own[j][n];
		if (!avail || u[0] > pk->span[j][0] || u[1] > pk->span[j][1])
			continue;
		unsigned most = avail < left ? avail : left;
		/* the nodes still allowed after this one must hold the rest */
		unsigned later = (pk->span[j][2] - u[2]) * k->gpus;
		unsigned least = left > later ? left - later : 1;
		for (unsigned take = most; take >= least; take--) {
			unsigned o = take < pk->own[j][n] ? take : pk->own[j][n];
			pk->free[n] -= take - o;
			bool ok = pack_job(pk, j, n + 1, left - take, u, rack, block);
			pk->free[n] += take - o;
			if (ok)
				return true;
		}
	}
	return false;
}

static void spans(const struct od_case *k, unsigned j, unsigned *sp)
{
	unsigned last[3] = {UINT32_MAX, UINT32_MAX, UINT32_MAX};
	sp[0] = sp[1] = sp[2] = 0;
	for (unsigned x = 0; x < k->n[j]; x++) {
		unsigned node = k->devs[j][x] / k->gpus, rack = node / k->nodes;
		unsigned v[3] = {rack / k->racks, rack, node};
		for (int l = 0; l < 3; l++) {
			sp[l] += v[l] != last[l];
			last[l] = v[l];
		}
	}
}

/* Whether the jobs of `mask` that must migrate (`must`) have homes outside the target set's
 * devices `tdev`; strict: none on another migrant's old devices. */
static bool homes(const struct od_case *k, uint32_t mask, const bool *must, uint64_t tdev,
                  bool strict)
{
	struct od_pack pk;
	memset(&pk, 0, sizeof pk);
	pk.k = k;
	int owner[OD_DEVS];
	unsigned total = k->blocks * k->racks * k->nodes * k->gpus;
	for (unsigned d = 0; d < total; d++)
		owner[d] = -2; /* free */
	for (unsigned j = 0; j < k->njobs; j++)
		for (unsigned x = 0; x < k->n[j]; x++)
			owner[k->devs[j][x]] = (mask >> j & 1) ? (must[j] ? (int)j : -2) : -1;
	int slot[OD_JOBS];
	for (unsigned j = 0; j < k->njobs; j++) {
		slot[j] = -1;
		if ((mask >> j & 1) && must[j]) {
			slot[j] = (int)pk.nj;
			pk.size[pk.nj] = k->n[j];
			spans(k, j, pk.span[pk.nj]);
			pk.nj++;
		}
	}
	for (unsigned d = 0; d < total; d++) {
		if (owner[d] == -1 || k->unusable[d] || (tdev >> d & 1))
			continue;
		unsigned node = d / k->gpus;
		if (owner[d] >= 0 && strict)
			pk.own[slot[owner[d]]][node]++;
		else
			pk.free[node]++;
	}
	/* enough devices at all, and the largest (then tightest) migrants first */
	unsigned have = 0, want = 0;
	for (unsigned n = 0; n < OD_NODES; n++)
		have += pk.free[n];
	for (unsigned i = 0; i < pk.nj; i++) {
		want += pk.size[i];
		for (unsigned n = 0; n < OD_NODES; n++)
			have += pk.own[i][n];
	}
	if (have < want)
		return false;
	for (unsigned i = 1; i < pk.nj; i++)
		for (unsigned x = i; x > 0; x--) {
			unsigned a = x - 1, b = x;
			if (pk.size[a] > pk.size[b] ||
			    (pk.size[a] == pk.size[b] && pk.span[a][2] <= pk.span[b][2]))
				break;
			unsigned ts = pk.size[a], tsp[3], town[OD_NODES];
			pk.size[a] = pk.size[b];
			pk.size[b] = ts;
			memcpy(tsp, pk.span[a], sizeof tsp);
			memcpy(pk.span[a], pk.span[b], sizeof tsp);
			memcpy(pk.span[b], tsp, sizeof tsp);
			memcpy(town, pk.own[a], sizeof town);
			memcpy(pk.own[a], pk.own[b], sizeof town);
			memcpy(pk.own[b], town, sizeof town);
		}
	return pack_from(&pk, 0);
}

/* ---- the search ------------------------------------------------------------------------------ */

struct od_set {
	double cost;
	unsigned moves;
	uint32_t mask;
};

static int od_set_cmp(const void *x, const void *y)
{
	const struct od_set *a = x, *b = y;
	if (a->cost != b->cost)
		return a->cost < b->cost ? -1 : 1;
	if (a->moves != b->moves)
		return a->moves < b->moves ? -1 : 1;
	return (a->mask > b->mask) - (a->mask < b->mask);
}

void od_solve(const struct od_case *k, struct od_answer *a)
{
	memset(a, 0, sizeof *a);
	const tp_defrag_policy *pol = &k->pol;
	bool can_m[OD_JOBS], can_p[OD_JOBS], must[OD_JOBS];
	uint32_t movable = 0;
	for (unsigned j = 0; j < k->njobs; j++) {
		const tp_job_options *o = &k->o[j];
		bool ok = o->job_class != TP_CLASS_INTERACTIVE || pol->allow_interactive;
		can_m[j] = ok && pol->migrate && o->migratable && o->priority <= k->r.priority;
		can_p[j] = ok && pol->preempt && o->preemptible &&
		           (long)o->priority <= (long)k->r.priority - pol->min_priority_gap;
		must[j] = !can_p[j];
		if (can_m[j] || can_p[j])
			movable |= 1u << j;
	}
	static struct od_targets T;
	list_targets(k, &T);
	uint32_t need[512];
	bool clean[512];
	for (unsigned t = 0; t < T.n; t++) {
		need[t] = 0;
		clean[t] = true;
		for (unsigned d = 0; d < OD_DEVS; d++)
			if ((T.dev[t] >> d & 1) && k->unusable[d])
				clean[t] = false;
		for (unsigned j = 0; j < k->njobs; j++)
			for (unsigned x = 0; x < k->n[j]; x++)
				if (T.dev[t] >> k->devs[j][x] & 1)
					need[t] |= 1u << j;
		if (clean[t] && !need[t])
			a->fits_now = true;
	}
	if (a->fits_now) {
		a->found = a->sfound = true;
		return;
	}
	/* every subset of the movable jobs, cheapest first */
	unsigned nm = 0, bit[OD_JOBS];
	for (unsigned j = 0; j < k->njobs; j++)
		if (movable >> j & 1)
			bit[nm++] = j;
	size_t nsets = (size_t)1 << nm;
	struct od_set *v = malloc(nsets * sizeof *v);
	size_t n = 0;
	for (size_t x = 1; x < nsets; x++) {
		uint32_t mask = 0;
		double cost = 0;
		unsigned moves = 0;
		for (unsigned i = 0; i < nm; i++)
			if (x >> i & 1) {
				mask |= 1u << bit[i];
				cost += k->o[bit[i]].checkpoint_s * k->n[bit[i]];
				moves++;
			}
		if (moves > pol->max_moves || (pol->max_cost_s >= 0 && cost > pol->max_cost_s))
			continue;
		v[n++] = (struct od_set){cost, moves, mask};
	}
	qsort(v, n, sizeof *v, od_set_cmp);
	for (size_t x = 0; x < n && !a->sfound; x++) {
		for (unsigned t = 0; t < T.n && !a->sfound; t++) {
			if (!clean[t] || (need[t] & ~v[x].mask))
				continue;
			a->checks++;
			if (!a->found && homes(k, v[x].mask, must, T.dev[t], false)) {
				a->found = true;
				a->cost = v[x].cost;
				a->moves = v[x].moves;
			}
			if (a->found && homes(k, v[x].mask, must, T.dev[t], true)) {
				a->sfound = true;
				a->scost = v[x].cost;
				a->smoves = v[x].moves;
				if (getenv("OD_SEED"))
					fprintf(stderr, "oracle: jobs 0x%x, target devices 0x%llx\n",
					        v[x].mask, (unsigned long long)T.dev[t]);
			}
		}
	}
	free(v);
}

void od_dump(const struct od_case *k)
{
	static const char *kinds[] = {"rack slices", "node groups", "node slices"};
	fprintf(stderr,
	        "case %llu: %u blocks x %u racks x %u nodes x %u GPUs; %s x%u (count %u) %s%s "
	        "prio %d; policy migrate %d preempt %d interactive %d gap %d moves %u cost %g\n",
	        (unsigned long long)k->seed, k->blocks, k->racks, k->nodes, k->gpus,
	        kinds[k->kind], k->need, k->r.count,
	        k->r.required ? "required " : k->r.preferred ? "preferred " : "",
	        k->r.required ? k->r.required : k->r.preferred ? k->r.preferred : "",
	        k->r.priority, k->pol.migrate, k->pol.preempt, k->pol.allow_interactive,
	        k->pol.min_priority_gap, k->pol.max_moves, k->pol.max_cost_s);
	for (unsigned j = 0; j < k->njobs; j++) {
		fprintf(stderr, "  %s: m%d p%d %s prio %d ckpt %g devs", k->ids[j],
		        k->o[j].migratable, k->o[j].preemptible,
		        k->o[j].job_class == TP_CLASS_INTERACTIVE ? "inter" : "train",
		        k->o[j].priority, k->o[j].checkpoint_s);
		for (unsigned x = 0; x < k->n[j]; x++)
			fprintf(stderr, " %u", k->devs[j][x]);
		fprintf(stderr, "\n");
	}
	unsigned total = k->blocks * k->racks * k->nodes * k->gpus;
	for (unsigned d = 0; d < total; d++)
		if (k->unusable[d])
			fprintf(stderr, "  device %u %s\n", d, k->down[d] ? "down" : "cordoned");
}
