/* SPDX-License-Identifier: MIT */
/*
 * The constraint solver's context (struct pctx) and what its files share. place.c explains
 * the model; each place_*.c holds one part. Private: nothing here is part of the API.
 */
#ifndef TP_PLACE_INTERNAL_H
#define TP_PLACE_INTERNAL_H

#include <stddef.h>
#include <string.h>

#include "place_impl.h"

#define GIB (1024.0 * 1024.0 * 1024.0)
#define INF UINT32_MAX
#define W_MAX (2 * TP_MAX_LEVELS + 1)
#define S_MAX 64 /* spread minimums above this use the table with this many columns */

/* ---- per-call scratch memory ---------------------------------------------------------------- */

struct chunk {
	struct chunk *prev;
	size_t cap, used;
	max_align_t data[];
};

struct amark {
	struct chunk *cur;
	size_t used;
};

/* ---- the solver's context ------------------------------------------------------------------- */

struct kid {
	uint32_t dom, free, cap;
};

/* A child and the devices it takes. */
struct take {
	uint32_t dom, amount;
	unsigned col; /* the spread column the child answers from */
};

struct pctx {
	const struct tp_cluster *c;
	const struct tp_topology *t;
	const struct tp_rq *q;
	const tp_allocator *a;
	struct chunk *ar;
	int err;                        /* first failure (TP_ENOMEM) */

	unsigned nlev, nl, W;
	unsigned fb;                    /* first best-fit component: nlev, or nlev + 1 after the
	                                   mix-loss component (index nlev) when the mix is on */
	bool mix_on;
	uint32_t mb_k[TP_MAX_LEVELS + 1], mb_v[TP_MAX_LEVELS + 1]; /* tp_pl_mix_bound's last */
	unsigned mb_col[TP_MAX_LEVELS + 1];                       /* answer per level, + 1 */
	bool mb_set[TP_MAX_LEVELS + 1];
	struct { uint32_t k, b, u, md, v; } mlb[TP_MAX_LEVELS][4]; /* mix_level_bound's last */
	unsigned mlb_n[TP_MAX_LEVELS];                /* knapsacks per level, round robin */
	unsigned nmix[TP_MAX_LEVELS];   /* the mix's shapes by level (cluster_impl.h) */
	uint32_t u[TP_MAX_LEVELS];      /* devices per unit at each level */
	uint32_t capdev[TP_MAX_LEVELS]; /* cap per domain in devices, TP_RQ_NOCAP: none */
	uint32_t lb[TP_MAX_LEVELS];     /* balanced: least devices per used domain (0: none) */
	bool hist_ok[TP_MAX_LEVELS];    /* capd from the histograms at this level */
	int sl;                         /* tree spread level, -1: none */
	uint32_t S;                     /* spread minimum (>= 2 when sl >= 0) */
	int single_to;                  /* levels <= single_to hold everything in one domain */
	bool compact;                   /* rule 1 applies */
	bool ideal;                     /* every job but the colocate target (and self) gone */
	bool filtered;                  /* node capacities need a walk */
	uint64_t grid_words, grid_probes; /* box search: rows of the free-cell index read as
	                                     words, and single cells read (place_grid.c) */
	bool capgrp_safe;               /* groups caps below the group level: the safe bound */

	/* node filters */
	Pvoid_t scope[TP_MAX_LEVELS];   /* Judy1 of domains that may be used, NULL: all */
	int colevel;                    /* colocate level (scope holds levels <= colevel) */
	bool allow_list;                /* scope holds every level (select.nodes) */
	Pvoid_t xbad[TP_MAX_LEVELS];    /* Judy1: domains other tenants hold exclusively */
	bool have_xbad;
	Pvoid_t sbad;                   /* Judy1: domains of svc_level where the request's service
	                                 * is at its cap (tp_pl_build_sbad), NULL: none */
	int svc_level;                  /* the service's caps level, -1: no caps */
	uint32_t svc_cap, svc_blocked;  /* replicas a domain may hold; domains at it */
	Pvoid_t fbad;                   /* Judy1: failure domains of kind svc_fd where the service
	                                 * is at its fd cap (a device filter), NULL: none */
	int svc_fd;                     /* the service's fd caps kind, -1: none */
	uint32_t svc_fd_cap, svc_fd_blocked, svc_fd_first; /* as svc_cap; the first blocked */
	int excl;                       /* the request's exclusive level, -1: none */
	Pvoid_t xknown, xdirty;         /* Judy1 memo of the exclusive level's domains */
	uint32_t self_slot;             /* replace: the job being repaired */
	Pvoid_t extra_down;             /* Judy1 of devices treated as down (replace) */
	int spares;                     /* replace: 1 spare nodes usable too, 2 only spares
	                                 * (TP_PL_SPARES_*); 0 in placement (needs filtered) */
	Pvoid_t taken;                  /* Judy1 of devices already given out in this call */
	Pvoid_t used[TP_MAX_LEVELS];    /* JudyL dom -> devices this job already has there */
	bool have_used;
	Pvoid_t memo;                   /* JudyL (level << 32 | dom) -> capd + 1 (filtered) */
	bool ideal_plain;               /* ideal, and every healthy uncordoned device usable */
	bool pairs;                     /* gpu_nic_pairs: node capacity is a GPU-NIC matching */
	int part_mode;                  /* NVLink partition rules as a node filter: 0 none (the
	                                 * answer is checked after), 1 other tenants' partitions
	                                 * left out, 2 also every node another job's partition
	                                 * holds, in a full pool or running another tenant's job */

	/* the root's decision, kept from tp_pl_eval() for tp_pl_emit() (same amount and column) */
	int root_kind;                  /* 0 none, 1 single top-level domain, 2 a plan of
	                                   takes (the dual's, or root_span's in place_table.c) */
	uint32_t root_k, root_kid;
	unsigned root_col;
	uint32_t root_cost[W_MAX];
	struct take *root_plan;         /* [root_nplan], from the allocator */
	uint32_t root_nplan;

	/* which rule decided the outermost choice among candidates (tp_placement_decided_by) */
	int dec_level;                  /* the level whose children it chose between, INT_MAX none */
	int skip_multi;                 /* level + 1 whose domain, failing the single-child search,
	                                   answers 3 unevaluated (place_table.c, eval_child); 0: none */
	tp_rule dec_rule;
	bool bal_active;                /* rule 2 raised a bound above one unit */

	/* place_choice.c: the domain chosen over its whole level for a single-domain request */
	bool pin_on;                    /* pin_dom of pin_level is chosen: searches above take it */
	int pin_level;
	uint32_t pin_dom;
	tp_rule pin_rule;               /* what decided the choice (tp_placement_decided_by) */

	/* output */
	uint32_t *out;
	size_t nout, capout;

	/* Not cleared by tp_pl_ctx_init (PCTX_CLEARED): the largest arrays, each written before
	 * it is read (the mix's shapes below nmix[l], the node capacities below the cluster's
	 * hstride, capk below ncapk), so a call does not write 2 KB it never reads. */
	unsigned ncapk;
	uint32_t mix_dev[TP_MAX_LEVELS][TP_PLACE_MIX_MAX];
	uint32_t mix_w[TP_MAX_LEVELS][TP_PLACE_MIX_MAX];
	uint64_t mix_m[TP_MAX_LEVELS][TP_PLACE_MIX_MAX]; /* ceil(2^32 / devices), for mix_loss */
	uint32_t nodecap[TP_MAX_NODE_DEVICES + 1]; /* node capacity for a free count */
	uint16_t capk[TP_MAX_NODE_DEVICES + 1]; /* the free counts k >= 1 with nodecap[k] > 0,
	                                           increasing (tp_pl_capk_derive) */
};

/* What tp_pl_ctx_init clears of a context: every field before ncapk. */
#define PCTX_CLEARED offsetof(struct pctx, ncapk)

/* Judy helpers: a failure is recorded as TP_ENOMEM and reads as "not present". */
static inline bool j1_test(Pcvoid_t arr, Word_t k)
{
	JError_t je;
	return arr && Judy1Test(arr, k, &je) == 1;
}

static inline void j1_set(struct pctx *p, Pvoid_t *arr, Word_t k)
{
	JError_t je;
	if (Judy1Set(arr, k, &je) == JERR)
		p->err = TP_ENOMEM;
}

static inline void j1_free(Pvoid_t *arr)
{
	JError_t je;
	if (*arr)
		Judy1FreeArray(arr, &je);
	*arr = NULL;
}

static inline Word_t jl_get(Pcvoid_t arr, Word_t k)
{
	JError_t je;
	if (!arr)
		return 0;
	PPvoid_t v = JudyLGet(arr, k, &je);
	return (v && v != PPJERR) ? (Word_t)*v : 0;
}

static inline void jl_add(struct pctx *p, Pvoid_t *arr, Word_t k, Word_t add)
{
	JError_t je;
	PPvoid_t v = JudyLIns(arr, k, &je);
	if (v == PPJERR) {
		p->err = TP_ENOMEM;
		return;
	}
	*v = (void *)((Word_t)*v + add);
}

static inline void jl_free(Pvoid_t *arr)
{
	JError_t je;
	if (*arr)
		JudyLFreeArray(arr, &je);
	*arr = NULL;
}

static inline uint32_t min32(uint32_t a, uint32_t b) { return a < b ? a : b; }
static inline uint32_t max32(uint32_t a, uint32_t b) { return a > b ? a : b; }

static inline const struct tp_job_impl *job_at(const struct tp_cluster *c, uint32_t slot)
{
	return slot < c->njobs ? c->jobs[slot] : NULL;
}

static inline bool in_scope(const struct pctx *p, unsigned l, uint32_t d)
{
	return !p->scope[l] || j1_test(p->scope[l], d);
}

/* Devices this job already holds in a domain (replace), for caps and the discount. */
static inline uint32_t used_in(const struct pctx *p, unsigned l, uint32_t d)
{
	return p->have_used ? (uint32_t)jl_get(p->used[l], d) : 0;
}

/* The cap of a domain once what the job already holds there is counted. */
static inline uint32_t cap_left(const struct pctx *p, unsigned l, uint32_t d)
{
	uint32_t cap = p->capdev[l];
	if (cap == TP_RQ_NOCAP || !p->have_used)
		return cap;
	uint32_t u = used_in(p, l, d);
	return cap > u ? cap - u : 0;
}

/* What a replace may use of a domain (l, d; the whole cluster for l < 0) with spares: free and
 * spare devices (p->spares 1) or spare devices only (2), place_usable.c. */
#define TP_PL_SPARES_TOO 1
#define TP_PL_SPARES_ONLY 2
uint32_t tp_pl_spare_free(const struct pctx *p, int l, uint32_t d);

/* x rounded down to a multiple of u; units are mostly powers of two, where that is a mask
 * (a division costs tens of cycles on the per-request path). */
static inline uint32_t mod_u(uint32_t x, uint32_t u)
{
	return (u & (u - 1)) == 0 ? x & (u - 1) : x % u;
}

static inline uint32_t floor_to(uint32_t x, uint32_t u)
{
	return (u & (u - 1)) == 0 ? x & ~(u - 1) : x - x % u;
}

/* The free counts a node gives this request anything from, after nodecap changes: the
 * histogram readers sum over these alone (the other counts add 0). */
static inline void tp_pl_capk_derive(struct pctx *p)
{
	p->ncapk = 0;
	for (uint32_t k = 1; k < p->c->hstride && k <= TP_MAX_NODE_DEVICES; k++)
		if (p->nodecap[k])
			p->capk[p->ncapk++] = (uint16_t)k;
}

static inline uint32_t dom_free(const struct pctx *p, int l, uint32_t d)
{
	if (p->spares) /* replace: spares are usable, and not free */
		return tp_pl_spare_free(p, l, d);
	return l < 0 ? p->c->nfree : p->c->free[l][d];
}

static inline bool c_inf(const uint32_t *v) { return v[0] == INF; }

static inline int c_cmp(const struct pctx *p, const uint32_t *a, const uint32_t *b)
{
	for (unsigned i = 0; i < p->W; i++)
		if (a[i] != b[i])
			return a[i] < b[i] ? -1 : 1;
	return 0;
}

static inline void c_add(const struct pctx *p, uint32_t *dst, const uint32_t *a)
{
	for (unsigned i = 0; i < p->W; i++)
		dst[i] += a[i];
}

static inline void c_copy(const struct pctx *p, uint32_t *dst, const uint32_t *a)
{
	memcpy(dst, a, p->W * sizeof *dst);
}

/* What the mix loses when k of the f free devices of a level-l domain are taken: for each
 * shape of that level, weight * devices * (whole jobs before - whole jobs after). */
static inline uint32_t mix_loss(const struct pctx *p, int l, uint32_t f, uint32_t k)
{
	uint32_t loss = 0, after = k < f ? f - k : 0;
	/* below 2^16, x / s is (x * ceil(2^32 / s)) >> 32 exactly (the error stays below 1 / s):
	 * a multiplication instead of two divisions per shape */
	bool small = f <= 0xFFFF;
	for (unsigned i = 0; i < p->nmix[l]; i++) {
		uint32_t s = p->mix_dev[l][i];
		uint64_t m = p->mix_m[l][i];
		uint32_t jobs = small ? (uint32_t)((f * m) >> 32) - (uint32_t)((after * m) >> 32)
		                      : f / s - after / s;
		loss += p->mix_w[l][i] * s * jobs;
	}
	return loss;
}

/* What taking k devices from domain d of level l adds: one domain (none when the job already
 * has devices there), the mix's loss and its free devices. */
static inline void add_self(const struct pctx *p, int l, uint32_t d, uint32_t k, uint32_t *v)
{
	if (l < 0)
		return;
	uint32_t f = dom_free(p, l, d);
	v[l] += used_in(p, (unsigned)l, d) ? 0 : 1;
	if (p->mix_on)
		v[p->nlev] += mix_loss(p, l, f, k);
	v[p->fb + (unsigned)l] += f;
}


static inline uint32_t ul(const struct pctx *p, int l) { return p->u[l < 0 ? 0 : l]; }

/* Columns of a table of level l: min(S, spread domains) + 1 at and above the spread level. */
static inline unsigned nsl(const struct pctx *p, int l)
{
	return (p->sl >= 0 && l <= p->sl) ? p->S + 1 : 1;
}

/* The column a domain of level l answers from: S (spread met) above the spread level, 1 at
 * it, 0 below it. */
static inline unsigned colq(const struct pctx *p, int l)
{
	if (p->sl < 0 || l > p->sl)
		return 0;
	return l == p->sl ? 1 : p->S;
}

/* Whether the best single child answers for a level-l domain asked for k at spread column
 * col: always when one child must hold everything, never when the children are the spread
 * level and the column needs several of them, else when single children are optimal (not with
 * the replace discount, where children the job already uses cost nothing). */
static inline bool use_single(const struct pctx *p, int l, uint32_t k, unsigned col, bool forced)
{
	(void)k;
	if (p->sl == l + 1)
		return col <= 1;
	return forced || !p->have_used;
}

/* Whether one child of a level-l domain must hold all k: a required or colocate level below,
 * or a unit of the child level (a group or slice) as large as the whole amount. */
static inline bool forced_single(const struct pctx *p, int l, uint32_t k)
{
	return l + 1 <= p->single_to || (l + 1 <= (int)p->nl && p->u[l + 1] >= k);
}

/* Whether the counts below level l (l+1 .. node) meet the absolute lower bound for k. */
static inline bool counts_meet(const struct pctx *p, int l, uint32_t k, unsigned col,
                               const uint32_t *v)
{
	for (unsigned x = (unsigned)(l + 1); x < p->nlev; x++) {
		uint32_t md = p->t->lv[x].max_devices ? p->t->lv[x].max_devices : 1;
		uint32_t b = (int)x == l + 1 ? 1 : (k + md - 1) / md;
		if (p->sl == (int)x)
			b = max32(b, col);
		if (v[x] != b)
			return false;
	}
	return true;
}

uint32_t tp_pl_mix_bound(struct pctx *p, int l, uint32_t k, unsigned col, const uint32_t *v);

/* Whether the counts meet their lower bound and the mix's loss its lower bound for those
 * counts: no other child can beat v. */
static inline bool meets_bound(struct pctx *p, int l, uint32_t k, unsigned col,
                               const uint32_t *v)
{
	return counts_meet(p, l, k, col, v) &&
	       (!p->mix_on || v[p->nlev] == tp_pl_mix_bound(p, l, k, col, v));
}

struct table {
	uint32_t J, ns;
	uint32_t *v; /* [(J + 1) * ns * W] */
};

static inline uint32_t *tb_at(const struct pctx *p, const struct table *tb, uint32_t j, unsigned s)
{
	return tb->v + ((size_t)j * tb->ns + s) * p->W;
}

struct knap {
	uint32_t J, ns, nk;
	struct kid *ks;
	struct table tb;  /* in units of the children's level */
	uint32_t *cj;     /* [nk][(J + 1) * ns] amount child i takes, when recorded */
	uint16_t *cs;     /* [nk][(J + 1) * ns] column before child i */
	uint16_t *cc;     /* [nk][(J + 1) * ns] column of child i's own table */
};

struct lnode {
	uint32_t node, v, free;
};

/* Whether no balance bound applies at any level (the greedy fast paths assume none). */
static inline bool no_bounds(const struct pctx *p)
{
	for (unsigned l = 0; l < p->nlev; l++)
		if (p->lb[l])
			return false;
	return true;
}

/* ---- functions shared between the files (each definition says what it does) ---------------- */

/* place.c: the scratch arena, setting up a call, the solver's entry */

void *tp_pl_ar_alloc(struct pctx *p, size_t n);
struct amark tp_pl_ar_mark(const struct pctx *p);
void tp_pl_ar_release(struct pctx *p, struct amark m);
void tp_pl_build_xbad(struct pctx *p, bool only_target);
/* place_service.c: the domains a replica of the request's service must keep out of (on), or
 * none (off: on the emptied cluster its other replicas are gone too) */
void tp_pl_build_sbad(struct pctx *p, bool on);
void tp_pl_say_service(const struct pctx *p, char *buf, size_t len);
uint32_t tp_pl_service_free_outside(const struct pctx *p, uint32_t free_total);
void tp_pl_ctx_fini(struct pctx *p);
int tp_pl_ctx_init(struct pctx *p, const struct tp_cluster *c, const struct tp_rq *q,
                   uint32_t self_slot);
int tp_pl_out_alloc(struct pctx *p, size_t n);
int tp_pl_feasible(struct pctx *p, int l, uint32_t d, uint32_t k);

/* place_usable.c: filters and capacities */

/* Which node filter refuses a node (tp_pl_node_why), for the explanation of a failure. */
enum tp_pl_why {
	TP_PL_WHY_OK,       /* none */
	TP_PL_WHY_NODES,    /* not in select.nodes (or outside the colocate domains) */
	TP_PL_WHY_COLOCATE, /* outside the domains of the colocate level holding the target */
	TP_PL_WHY_MODEL,    /* select.model */
	TP_PL_WHY_MEMORY,   /* select.min_memory_gb */
	TP_PL_WHY_XBAD,     /* in a domain another tenant's job holds exclusively */
	TP_PL_WHY_TENANT,   /* its exclusive-level domain holds another tenant's job */
	TP_PL_WHY_SERVICE,  /* its domain holds as many of the request's service as its caps let */
	TP_PL_WHY_PARTITION /* in another job's NVLink partition (place_partition.c) */
};

enum tp_pl_why tp_pl_node_why(struct pctx *p, uint32_t node);

/* place_partition.c: NVLink partitions. Whether the partition rules refuse node; the
 * partitions of a successful result (0, TP_ENOMEM, or TP_EBUSY with the reason in why);
 * forget a result's answer (before the strict second pass of tp_place). */
bool tp_pl_part_refuses(const struct pctx *p, uint32_t node);
int tp_pl_part_result(tp_placement *pl, const struct pctx *p, const uint32_t *devs, size_t n,
                      char *why);
void tp_pl_part_forget(tp_placement *pl);
bool tp_pl_dev_ok(const struct pctx *p, uint32_t d);
uint32_t tp_pl_node_usable(struct pctx *p, uint32_t node, uint32_t *list);
uint32_t tp_pl_capd_any(struct pctx *p, unsigned l, uint32_t d);

/* The most devices of the request domain d of level l can take (a multiple of u[l]):
 * tp_pl_capd_any (place_usable.c), with its most frequent cases inline, the same sums and
 * rounding: a node without filters (its free count's nodecap, which is that count cut to the
 * node cap and rounded to the unit), a domain above the node read from the histograms (no
 * filter, no scope). */
static inline uint32_t tp_pl_capd(struct pctx *p, unsigned l, uint32_t d)
{
	if (l == p->nl && !p->filtered && !p->ideal && !p->have_used) {
		uint32_t f = p->c->free[l][d];
		if (f <= TP_MAX_NODE_DEVICES)
			return p->nodecap[f];
	}
	if (l < p->nl && !p->filtered && !p->ideal && p->hist_ok[l] && !p->scope[l]) {
		const uint32_t *h = p->c->hist[l] + (size_t)d * p->c->hstride;
		uint64_t sum = 0;
		for (unsigned i = 0; i < p->ncapk; i++)
			sum += (uint64_t)h[p->capk[i]] * p->nodecap[p->capk[i]];
		uint32_t s = sum > UINT32_MAX ? UINT32_MAX : (uint32_t)sum;
		return floor_to(min32(s, cap_left(p, l, d)), p->u[l]);
	}
	return tp_pl_capd_any(p, l, d);
}

/* place_pairs.c: GPU+NIC pairs */

uint32_t tp_pl_node_pairable(struct pctx *p, uint32_t node, uint32_t *list);
uint32_t tp_pl_node_pairable_free(struct pctx *p, uint32_t node);
uint64_t tp_pl_topology_pairable(struct pctx *p);
int tp_pl_pair_result(tp_placement *pl, struct pctx *p, const uint32_t *devs, size_t n);

/* place_table.c: tables, knapsack, point queries, uniform subtrees */

bool tp_pl_root_indexed(const struct pctx *p);
struct kid *tp_pl_kids_of(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *n);
bool tp_pl_tightest_kid(struct pctx *p, int l, uint32_t d, uint32_t kmin, uint32_t *dom);
void tp_pl_takes_sort(struct take *tk, uint32_t n);
int tp_pl_knap_run(struct pctx *p, int l, uint32_t d, uint32_t J, uint32_t jneed, bool record,
                   struct knap *kn);
/* The takes of recorded knapsack kn for J units of `unit` devices from column s, last child
 * first (place_emit.c): their number, into tk (room for kn->nk); *left gets the units no take
 * accounts for (0 unless the record is corrupt). */
uint32_t tp_pl_knap_takes(const struct knap *kn, uint32_t J, unsigned s, uint32_t unit,
                          struct take *tk, uint32_t *left);
int tp_pl_lnode_cmp(const void *a, const void *b);
struct lnode *tp_pl_leaf_nodes(struct pctx *p, int l, uint32_t d, uint32_t *n);
bool tp_pl_leaf_fast(const struct pctx *p, int l);
/* place_counts.c: a child's leading counts without its table (plain requests) */
bool tp_pl_counts_rank_ok(const struct pctx *p, int l, uint32_t k);
int tp_pl_count_prefix(struct pctx *p, int l, uint32_t dom, uint32_t k, const uint32_t *best,
                       uint32_t *out);
int tp_pl_span_window(struct pctx *p, struct kid *ks, uint32_t *nk, uint32_t K, uint32_t *jlo,
                      uint32_t *jhi);
uint32_t tp_pl_uniform_node_dev(struct pctx *p, int l, uint32_t d);
bool tp_pl_linear_ok(const struct pctx *p, int l);
unsigned tp_pl_child_col(const struct pctx *p, int l, unsigned col);
int tp_pl_best_single(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col,
                      uint32_t *best, uint32_t *kid);
int tp_pl_eval(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col, uint32_t *out);

/* place_step.c: rule 4, the modelled step time on ties */

bool tp_pl_step_on(const struct pctx *p, uint32_t k);
double tp_pl_step_of(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col);

/* place_floor.c: the efficiency floor (request.comm.min_efficiency) */

/* tp_place's floor on the placement *plp its rules chose: 0 when it meets the floor, the
 * request has none, or the search over the fabric classes found one that does (*plp is then
 * that placement, the old one destroyed); else TP_EBUSY with (*plp)'s message, or TP_ENOMEM. */
int tp_pl_floor(tp_placement **plp, const struct tp_cluster *c, const struct tp_rq *q);

/* tp_place's fabric fit (request.comm.fabric_fit), before its rules choose over the whole
 * cluster: *fitted true when a class's placement is the answer (*plp is then that one), false
 * when there is nothing to fit or no class placed it; 0, or TP_ENOMEM (message in *plp). */
int tp_pl_fit(tp_placement **plp, const struct tp_cluster *c, const struct tp_rq *q,
              bool *fitted);

/* place.c: one placement of q into pl with the NVLink partition rules (what tp_place runs). */
int tp_pl_place_parts(tp_placement *pl, const struct tp_cluster *c, const struct tp_rq *q);

/* place_choice.c: best fit at the level that holds a single-domain request */

/* Rule 3 refined by the expected end (place_end.c): the nodes after the best in best-fit order
 * compared with it on their jobs' expected ends (place_choice.c; in place_table.c's search,
 * nodes as tight as the best), at most this many per choice. */
#define TP_PL_END_TIES 64

/* How well a node suits a job expected to end at `end` (lower is better): class 0 when its
 * running jobs are expected to end last at or after `end`, class 1 when before, class 2 when
 * none of them gives an end; then the distance between the two ends. */
struct tp_end_key {
	unsigned cls;
	double dist;
};

struct tp_end_key tp_pl_node_end_key(const struct pctx *p, uint32_t node, double end);
/* Whether node `node` suits the request's end (q->end_s) better than *best, tied with it on
 * every earlier rule; if so *best becomes its key. */
bool tp_pl_end_wins(const struct pctx *p, uint32_t node, struct tp_end_key *best);

static inline bool tp_pl_end_key_less(struct tp_end_key a, struct tp_end_key b)
{
	return a.cls != b.cls ? a.cls < b.cls : a.dist < b.dist;
}

int tp_pl_pin_choose(struct pctx *p, uint32_t k);
int tp_pl_pin_offer(struct pctx *p, int l, uint32_t k, unsigned col, uint32_t *best,
                    uint32_t *kid);
int tp_pl_pin_kid(struct pctx *p, int l, uint32_t k, uint32_t *kid);

/* place_dual.c: the top-level dual */

bool tp_pl_dual_ok(const struct pctx *p);
int tp_pl_root_dual(struct pctx *p, uint32_t k, uint32_t *cost, struct take **plan,
                    uint32_t *nplan);

/* place_emit.c: emission in rank order */

int tp_pl_emit(struct pctx *p, int l, uint32_t d, uint32_t k, unsigned col);
int tp_pl_fill(struct pctx *p, int l, uint32_t d, uint32_t k);

/* place_fdom.c: failure-domain caps and spread */

bool tp_pl_has_fd_rules(const struct tp_rq *q);
int tp_pl_fd_check(struct pctx *p, const uint32_t *devs, size_t n, bool *ok);
int tp_pl_fd_fill(struct pctx *p, int l, uint32_t d, uint32_t k);
int tp_pl_fd_possible(struct pctx *p, uint32_t k);
int tp_pl_fd_search(struct pctx *p, uint32_t k);

/* place_result.c: the result object */

tp_placement *tp_pl_placement_new(const struct tp_cluster *c, bool replace);
int tp_pl_finish_ok(tp_placement *pl, struct pctx *p, const uint32_t *devs, size_t n);
uint32_t tp_pl_matching_free(struct pctx *p);
void tp_pl_go_ideal(struct pctx *p);

/* place_grid.c: a box request on a grid level. 1 with p->out filled; TP_EINFEASIBLE,
 * TP_EBUSY or TP_EFRAGMENTED with the reason in msg (TP_ERRMSG_LEN bytes); or an error. */
int tp_pl_grid_solve(struct pctx *p, char *msg);

/* place_explain.c: why a request does not fit (status, fit figures, message) */

int tp_pl_explain_failure(tp_placement *pl, struct pctx *p, uint32_t k, uint32_t needed,
                          int level, int ideal_ok);

#endif
