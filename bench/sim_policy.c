/* SPDX-License-Identifier: MIT */
/*
 * Placement policies of the simulator, and the placement efficiency it charges.
 *
 * Every policy answers "which devices would job j get now?" on the same tp_cluster state; the
 * simulator assigns them. The baselines imitate peers (shared/PEERS.md) and live here, never in
 * the library; each says where it simplifies the peer:
 *
 *   random            free group slots (each group inside one node) uniformly at random;
 *   first-fit         the lowest-numbered free group slots (tree order above the node);
 *   kueue-like        kueue.c: required rack for jobs up to a rack, preferred rack for one-node
 *                     jobs, 64-GPU-ish rack slices with a preferred block for larger jobs, and
 *                     LeastFreeCapacity for inference replicas (Kueue has no spread); BestFit;
 *   slurm-block-like  Slurm's topology/block (sim_slurm.c): the block level fixed by the job's
 *                     or segment's node count, the job waits when no block of that level
 *                     fits, segments one by one, Slurm's one-node rule;
 *   slurm-tree-like   Slurm's topology/tree (sim_slurm.c): the lowest switch that holds the
 *                     job, best fit over its leaf switches, best effort;
 *   topoplace         tp_place with the job's shape (sim_job_shape; a box on a torus); on a
 *                     fleet of several fabric classes also its step model with an
 *                     efficiency floor (tp_step_model.min_efficiency) and, for the oldest
 *                     job, the library's search inside each fabric class for a placement
 *                     that meets it (see fabric_floor); on a fleet of one class, under EASY,
 *                     a floor of full locality for the top job (see "The top job's floor");
 *   topoplace-defrag  tp_place, and on TP_EFRAGMENTED the defrag hook, which runs the
 *                     library's planner (tp_defrag_plan); the locality upgrade (bench/sim.c,
 *                     sim_upgrade; on several fabric classes see "The class upgrade");
 *   first-fit-box,
 *   slurm-torus-like  the torus fleet's baselines (sim_torus.c);
 *   ideal             no topology at all: a job starts when enough GPUs are free and runs at
 *                     full locality (an upper bound; handled in sim.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kueue.h"
#include "sim.h"


/* ---- efficiency ------------------------------------------------------------------------- */

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Distinct domains of `level` that the devices touch. */
static uint32_t domains_used(const struct sim_fleet *f, const uint32_t *devs, uint32_t n,
                             unsigned level, uint32_t *tmp)
{
	for (uint32_t i = 0; i < n; i++)
		tmp[i] = tp_topology_node_domain(f->t, tp_topology_device_node(f->t, devs[i]), level);
	qsort(tmp, n, sizeof *tmp, cmp_u32);
	uint32_t k = n ? 1 : 0;
	for (uint32_t i = 1; i < n; i++)
		k += tmp[i] != tmp[i - 1];
	return k;
}

/*
 * The stand-in, from DESIGN.md's published figures: 1.0 when the job's devices are inside its
 * ideal domain; a job that fits one NVLink domain but spans several runs at 0.57 (tensor
 * parallelism leaving NVLink lost ~43%); a larger job on more NVLink domains than it needs at
 * 1/1.14 (the 512-GPU job scattered over racks ran 14% slower); on more top-level domains
 * than it needs (InfiniBand 25 GB/s between blocks instead of 50) a further 0.90. Inference:
 * 0.57 when a replica spans NVLink domains, else 1.0 (replicas do not talk to each other).
 */
double sim_efficiency_standin(const struct sim_fleet *f, const struct sim_job *j,
                              const uint32_t *devs)
{
	uint32_t n = j->gpus;
	if (n <= 1)
		return 1.0;
	uint32_t *tmp = malloc(n * sizeof *tmp);
	if (!tmp)
		bench_die("out of memory");
	double eff = 1.0;
	if (j->cls == TP_CLASS_INFERENCE) {
		uint32_t g = j->shape.group;
		for (uint32_t r = 0; r + g <= n; r += g)
			if (domains_used(f, devs + r, g, f->nv_level, tmp) > 1)
				eff = 0.57;
		free(tmp);
		return eff;
	}
	uint32_t nv = domains_used(f, devs, n, f->nv_level, tmp);
	uint32_t nv_min = (n + f->nv_gpus - 1) / f->nv_gpus;
	if (n <= f->nv_gpus && nv > 1)
		eff *= 0.57;
	else if (nv > nv_min)
		eff *= 1.0 / 1.14;
	if (f->nlevels > 1) {
		uint32_t top = domains_used(f, devs, n, 0, tmp);
		if (top > (n + f->top_gpus - 1) / f->top_gpus)
			eff *= 0.90;
	}
	free(tmp);
	return eff;
}

/*
 * The step model the simulator gives tp_cost_efficiency. Training (and interactive) jobs:
 * tensor parallel tp = the largest power of two <= min(n, 8) dividing n, pipeline pp = 4 for
 * jobs of 128 GPUs and more (when it divides), data parallel for the rest; a 0.4 s compute
 * step; 128 tensor all-reduces of 64 MiB (tensor parallelism across InfiniBand then costs
 * ~40%, as measured); a 4 GiB gradient all-reduce of which 10% is exposed; 16 pipeline
 * transfers of 32 MiB. Inference: each replica is a tensor group (its GPUs, 128 all-reduces of
 * 64 MiB); replicas exchange nothing.
 */
static struct tp_step_model sim_step_model(const struct sim_job *j)
{
	struct tp_step_model m = {.version = TP_STEP_MODEL_VERSION};
	uint32_t n = j->gpus;
	m.compute_us = 400000;
	m.tp_bytes = 64.0 * 1024 * 1024;
	m.tp_msgs = 128;
	m.ep = 0;
	if (j->cls == TP_CLASS_INFERENCE) {
		m.tp = j->shape.group;
		m.pp = 1;
		m.dp = n / m.tp;
		return m;
	}
	m.tp = 1;
	while (m.tp * 2 <= 8 && m.tp * 2 <= n && n % (m.tp * 2) == 0)
		m.tp *= 2;
	uint32_t rest = n / m.tp;
	m.pp = n >= 128 && rest % 4 == 0 ? 4 : 1;
	m.dp = rest / m.pp;
	m.dp_bytes = 4.0 * 1024 * 1024 * 1024;
	m.dp_overlap = 0.9;
	m.pp_bytes = 32.0 * 1024 * 1024;
	m.pp_msgs = m.pp > 1 ? 16 : 0;
	return m;
}

double sim_efficiency(const struct sim_fleet *f, const struct sim_job *j, const uint32_t *devs,
                      bool use_cost)
{
	if (use_cost) {
		struct tp_step_model m = sim_step_model(j);
		double e;
		char err[256];
		int rc = tp_cost_efficiency(&e, f->t, devs, j->gpus, &m, NULL, err, sizeof err);
		if (rc)
			bench_die("tp_cost_efficiency(%u GPUs, tp %u pp %u dp %u): %s: %s", j->gpus, m.tp,
			          m.pp, m.dp, tp_err_name(rc), err);
		return e;
	}
	return sim_efficiency_standin(f, j, devs);
}

/* ---- random and first-fit ----------------------------------------------------------------- */

static void *no_state(struct sim_ctx *ctx)
{
	(void)ctx;
	return NULL;
}

static void no_destroy(void *st) { (void)st; }

/*
 * random and first-fit keep each group of the job's shape (j->shape.group devices: the whole
 * job up to a node, whole nodes' worth for larger training jobs, a replica for inference)
 * inside one node, as every real scheduler does for a pod; the topology above the node is
 * ignored. A node offers floor(free / group) group slots.
 */
static uint32_t node_slots(const struct sim_ctx *ctx, uint32_t node, uint32_t group)
{
	return tp_cluster_free_count(ctx->c, ctx->f->node_level, node) / group;
}

/* Fill devs from the chosen slots: slot_node[0..k) lists one node per slot taken. */
static void slots_to_devices(struct sim_ctx *ctx, const uint32_t *slot_node, uint32_t k,
                             uint32_t group, uint32_t *devs)
{
	uint32_t buf[TP_MAX_NODE_DEVICES], got = 0;
	for (uint32_t i = 0; i < k;) {
		uint32_t node = slot_node[i], m = 0;
		while (i + m < k && slot_node[i + m] == node)
			m++;
		unsigned nf = bench_node_free_devices(ctx->c, node, buf, TP_MAX_NODE_DEVICES);
		if (nf < m * group)
			bench_die("random/first-fit: node %u lost its free devices", node);
		memcpy(devs + got, buf, m * group * sizeof *devs);
		got += m * group;
		i += m;
	}
}

static int cmp_u32_asc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Group slots drawn uniformly at random among every free slot (reservoir sampling). */
static int random_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                        uint32_t *devs)
{
	(void)st;
	(void)jid;
	if (tp_cluster_free_total_count(ctx->c) < j->gpus)
		return TP_EBUSY;
	const struct sim_fleet *f = ctx->f;
	uint32_t g = j->shape.group, want = j->gpus / g, seen = 0;
	uint32_t *pick = ctx->scratch; /* [want] the node of each chosen slot */
	uint32_t nn = tp_topology_node_count(f->t);
	for (uint32_t node = 0; node < nn; node++) {
		uint32_t k = node_slots(ctx, node, g);
		for (uint32_t i = 0; i < k; i++, seen++) {
			if (seen < want) {
				pick[seen] = node;
				continue;
			}
			uint64_t r = bench_rng_below(&ctx->rng, (uint64_t)seen + 1);
			if (r < want)
				pick[r] = node;
		}
	}
	if (seen < want)
		return TP_EFRAGMENTED;
	qsort(pick, want, sizeof *pick, cmp_u32_asc);
	slots_to_devices(ctx, pick, want, g, devs);
	for (uint32_t i = want; i > 1; i--) { /* a random rank order of the groups */
		uint32_t r = (uint32_t)bench_rng_below(&ctx->rng, i);
		for (uint32_t d = 0; d < g; d++) {
			uint32_t tmp = devs[(i - 1) * g + d];
			devs[(i - 1) * g + d] = devs[r * g + d];
			devs[r * g + d] = tmp;
		}
	}
	return 0;
}

/* The lowest-numbered group slots (tree order). */
static int first_fit_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                           uint32_t *devs)
{
	(void)st;
	(void)jid;
	if (tp_cluster_free_total_count(ctx->c) < j->gpus)
		return TP_EBUSY;
	const struct sim_fleet *f = ctx->f;
	uint32_t g = j->shape.group, want = j->gpus / g, got = 0;
	uint32_t *pick = ctx->scratch;
	uint32_t nn = tp_topology_node_count(f->t);
	for (uint32_t node = 0; node < nn && got < want; node++)
		for (uint32_t k = node_slots(ctx, node, g); k > 0 && got < want; k--)
			pick[got++] = node;
	if (got < want)
		return TP_EFRAGMENTED;
	slots_to_devices(ctx, pick, want, g, devs);
	return 0;
}

/* ---- kueue-like --------------------------------------------------------------------------- */

static void *kueue_create(struct sim_ctx *ctx)
{
	struct kq *k = kq_create(ctx->f->t);
	if (!k)
		bench_die("out of memory");
	return k;
}

static void kueue_destroy(void *st) { kq_destroy(st); }

static int kueue_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                       uint32_t *devs)
{
	(void)jid;
	const struct sim_fleet *f = ctx->f;
	const struct sim_shape *s = &j->shape;
	struct kq_request r = {j->gpus, s->group, -1, -1, -1, 0};
	if (j->cls == TP_CLASS_INFERENCE) {
		/* no spread in Kueue: replicas are pods placed by LeastFreeCapacity */
	} else if (s->required == (int)f->node_level) {
		r.pod = j->gpus; /* one pod: it lands on one node by itself */
		r.preferred = (int)f->nv_level;
	} else if (s->required >= 0) {
		r.required = s->required;
	} else {
		r.slice_level = s->slice_level;
		r.slice_size = s->slice_size;
		r.preferred = s->preferred;
	}
	return kq_place(st, ctx->c, &r, devs, NULL);
}

/* ---- topoplace ---------------------------------------------------------------------------- */

/* The tp_request of a job's shape; `slice` and `id` (24 bytes) must outlive it. */
tp_request sim_tp_request(const struct sim_fleet *f, const struct sim_job *j, uint32_t jid,
                          tp_slice *slice, char *id)
{
	const struct sim_shape *s = &j->shape;
	snprintf(id, 24, "j%u", jid);
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.job_class = j->cls;
	r.count = j->gpus;
	r.group_size = s->group;
	if (s->required >= 0)
		r.required = f->level_name[s->required];
	if (s->preferred >= 0)
		r.preferred = f->level_name[s->preferred];
	if (s->slice_level >= 0) {
		slice->level = f->level_name[s->slice_level];
		slice->size = s->slice_size;
		r.slices = slice;
		r.nslices = 1;
	}
	r.service = j->service; /* NULL but for the inference class's replicas */
	if (s->box[0]) { /* a torus fleet's slice: a box of the pod's chips (sim_torus.c) */
		r.box_level = f->level_name[0];
		memcpy(r.box, s->box, sizeof r.box);
		r.box_rotate = s->box_rotate;
		r.box_wrap = s->box_wrap;
	}
	return r;
}

/*
 * topoplace's set-up and the placement mix it gives the library (rule 3 refined,
 * tp_cluster_set_place_mix). TP_BENCH_PLACE_MIX picks it: "off" (no mix: best fit alone, the
 * rule of 0.3 and what a new cluster has; also when unset), "default" (tp_frag_report's default
 * mix: 1 GPU and a node inside a node, half and all of an NVLink rack), "node" (1 GPU and a
 * whole node inside a node, equal weights: FGD's node-level view) or "learn" (the sizes of the
 * requests seen so far, weighted by their GPUs, each inside the smallest level that holds it:
 * node, NVLink domain, top-level domain; the 16 heaviest, updated every 32 requests). On the
 * quick grid "default" and "learn" measured worse on average than "off" (docs/benchmarks.md).
 */
#define LEARN_SIZES 64

/*
 * The efficiency floor topoplace asks for on a fleet of several fabric classes. A class is the
 * nodes that share a device model, a node fabric and the fabric of the domain above the node
 * (on mixed:GPUS: the NVL72 racks, the HGX racks, the PCIe-only racks). For a job, e_c is the
 * efficiency (tp_cost_efficiency, the simulator's own step model) of its devices packed in
 * tree order into class c alone, for every class large enough to hold it. The floor is
 * FLOOR_MANY x the best e_c when two classes or more can hold the job, FLOOR_ONE x it when only
 * one can (every other placement then mixes classes and burns that class's fast devices at a
 * slower one's pace), none when no class can (the job spans classes whatever it gets) or the
 * fleet has a single class (waiting there for a placement that never comes costs more than
 * running slower; the quick grid's one-class fleets keep the request they had).
 * FLOOR_MANY and FLOOR_ONE were picked on llm / mixed:576 (docs/benchmarks.md, "The mixed
 * fleet"): 0.4 for the first lost 16% there under besteffort, 0.8 or 0.9 for the second gave
 * the same figures.
 *
 * When the placement its rules choose is below the floor, tp_place itself searches the
 * fabric classes for one that meets it (src/place_floor.c: the same classes, derived by the
 * library from the topology, tried from the slowest whose e_c meets the floor up, those with
 * too few free GPUs passed over). The policy lets it search only for the oldest waiting job
 * (ctx->oldest; under EASY also the top job in its reservation's trials) and sets
 * tp_step_model.no_floor_search for every other: measured on llm / mixed:576
 * (docs/benchmarks.md, "A floor that gives way to the wait"), a search for every job lost
 * under besteffort (22 points fastest class first, 10 slowest first: the medium jobs it starts
 * inside a class take the racks the large ones wait for), one for the oldest job alone keeps
 * besteffort as it was and gains 0.8 points under EASY. --floor-search every: every job;
 * --floor-search off: no job (the rules' choice or nothing).
 *
 * With --floor-ahead (off by default: it lost under EASY), the floor also gives
 * way, for the oldest waiting job, to the wait still ahead of it (floor_ahead). When a pass
 * has tried every job it may and the oldest is still refused with enough GPUs free, the
 * simulator projects it (bench/sim.c, sim_try_ahead: the running jobs released at their
 * ends, as the EASY reservation projects) to a placement of efficiency e1 >= floor after a
 * further wait W, and it takes a placement of efficiency e now if that ends no later,
 * D / e <= W + D / e1 (D: its duration_s at full locality), that is
 *     e >= e1 x T / (T + W),   T = D / e1.
 * No constant is fitted to it. It weighs the job's own end time, not the fleet's effective
 * GPU-hours, and lost on llm / mixed:576 under EASY, as did two variants measured first: a
 * floor falling with the wait already spent (e >= floor x T / (T + W_spent), T = D / floor,
 * the ski-rental rule) and this rule tried at once, before the later jobs of the pass.
 */
#define FLOOR_MANY 0.5
#define FLOOR_ONE 0.9
/*
 * The class upgrade (topoplace-defrag, with the locality upgrade on; --no-upgrade: off). On a
 * fleet of several fabric classes, a job of several GPUs that tp_place() put below
 * CLASS_UPGRADE_FIT x its best e_c (an 8-GPU job over two HGX nodes at 0.59 while the NVL72
 * racks would run it at 1.0, their free GPUs taken by 1-GPU jobs that run as fast anywhere)
 * asks the planner for the moves after which it is placed at its best e_c (the request's step
 * model with that floor; sim_defrag_make_room), under the locality upgrade's budget and pay
 * rule (bench/sim.c, sim_upgrade); with moves made it is placed again at that floor, without
 * the floor if that is refused. Under StrictFIFO topoplace-defrag's floor for a job two
 * classes or more hold is also lower, FLOOR_MANY_STRICT_MOVES x the best e_c instead of
 * FLOOR_MANY: nothing passes the oldest job while it waits, so it starts now on a slower
 * class, and the upgrade may move it up at once. topoplace has no moves: it keeps FLOOR_MANY
 * (0.4 there cost it 1.7% on philly / mixed:2304 StrictFIFO). Measured on the comparison
 * grid's mixed:2304 cells (docs/benchmarks.md, "The class upgrade"): the upgrade gains or is
 * level under every queue; the lower floor gains under StrictFIFO and lost under besteffort
 * and EASY (philly-like EASY +9.51% -> +6.48% over the best peer).
 */
#define CLASS_UPGRADE_FIT 0.9
#define FLOOR_MANY_STRICT_MOVES 0.35
#define FLOOR_CLASSES 8
#define FLOOR_MEMO 64
/* shape_key's range (sim_workload.c: kind x 4096 + size, kinds 0-3) */
#define SHAPE_KEYS (4 * 4096)

struct fabric_floor {
	double many; /* the floor's factor when several classes hold the job */
	unsigned nclass;
	uint32_t *dev[FLOOR_CLASSES]; /* each class's devices in tree order */
	uint32_t ndev[FLOOR_CLASSES];
	unsigned nmemo;
	struct floor_memo {
		uint32_t gpus, group; /* the job's size; its replica size (inference), else 0 */
		double floor;
		double e[FLOOR_CLASSES]; /* e_c, 0 where class c cannot hold the job */
	} memo[FLOOR_MEMO], spill; /* spill: past FLOOR_MEMO sizes, not kept */
};

struct tp_learn {
	bool on;
	uint32_t seen;
	unsigned n;
	uint32_t size[LEARN_SIZES];
	double gpus[LEARN_SIZES];
	struct fabric_floor *floor; /* NULL: one fabric class (or a torus): no step model asked */
	/* The top job's floor on a one-class fleet (see below): the efficiency the rules give each
	 * job shape on the empty fleet, NAN until asked (indexed by shape_key), and that fleet. */
	double *e_empty;
	int8_t *l_empty; /* the deepest level one domain of which held that placement, -1: none */
	tp_cluster *empty;
};

struct class_key {
	const char *model;
	tp_link_kind node_kind, up_kind;
	double node_gbps, up_gbps;
};

static bool same_class(const struct class_key *a, const struct class_key *b)
{
	return a->node_kind == b->node_kind && a->up_kind == b->up_kind &&
	       a->node_gbps == b->node_gbps && a->up_gbps == b->up_gbps &&
	       !strcmp(a->model, b->model);
}

static void floor_destroy(struct fabric_floor *fl)
{
	if (!fl)
		return;
	for (unsigned c = 0; c < fl->nclass; c++)
		free(fl->dev[c]);
	free(fl);
}

/* Option opt's value s, a number from 0 to 1; anything else dies naming the option. */
static double unit_arg(const char *opt, const char *s)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= 0.0 && v <= 1.0))
		bench_die("%s: a number from 0 to 1 (0: off), not '%s'", opt, s);
	return v;
}

double sim_fabric_fit_arg(const char *s)
{
	return unit_arg("--fabric-fit", s);
}

double sim_top_floor_arg(const char *s)
{
	return unit_arg("--top-floor", s);
}

double sim_end_estimates_arg(const char *s)
{
	if (!strcmp(s, "none"))
		return SIM_END_NONE;
	if (!strcmp(s, "exact"))
		return 0;
	char *end;
	double f = !strncmp(s, "over:", 5) ? strtod(s + 5, &end) : NAN;
	if (!(f > 0 && f <= 100) || *end)
		bench_die("--end-estimates: 'none', 'exact' or 'over:F' with F in (0, 100], not '%s'", s);
	return f;
}

const char *sim_end_estimates_name(double over, char *buf)
{
	if (over < 0)
		return "none";
	if (over == 0)
		return "exact";
	snprintf(buf, 32, "over:%g", over);
	return buf;
}

double sim_end_estimate(const struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid)
{
	if (ctx->end_over < 0)
		return 0;
	double u = 0;
	if (ctx->end_over > 0) { /* splitmix64 of (seed, jid): the same factor on every run */
		uint64_t z = ctx->end_seed * 0x9e3779b97f4a7c15u + jid + 1;
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
		z ^= z >> 31;
		u = (double)(z >> 11) / 9007199254740992.0;
	}
	return ctx->now + j->duration_s * (1 + ctx->end_over * u);
}

static const char *const floor_search_names[3] = {"oldest", "every", "off"};

const char *sim_floor_search_name(enum sim_floor_search m)
{
	return (unsigned)m < 3 ? floor_search_names[m] : "?";
}

void sim_floor_search_arg(const char *name, enum sim_floor_search *m)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(name, floor_search_names[i])) {
			*m = (enum sim_floor_search)i;
			return;
		}
	bench_die("--floor-search: 'oldest', 'every' or 'off', not '%s'", name);
}

/* The fleet's fabric classes, or NULL when it has one (or is a torus). */
static struct fabric_floor *floor_create(const struct sim_fleet *f)
{
	if (f->kind == FLEET_TORUS || f->nlevels < 2)
		return NULL;
	struct fabric_floor *fl = calloc(1, sizeof *fl);
	if (!fl)
		bench_die("out of memory");
	struct class_key key[FLOOR_CLASSES];
	uint32_t nn = tp_topology_node_count(f->t), nd = tp_topology_device_count(f->t);
	for (uint32_t node = 0; node < nn; node++) {
		struct class_key k = {tp_topology_node_model(f->t, node), 0, 0, 0, 0};
		k.model = k.model ? k.model : "";
		BENCH_CHECK(tp_topology_domain_fabric(f->t, (int)f->node_level, node, &k.node_kind,
		                                      &k.node_gbps, NULL), "tp_topology_domain_fabric");
		uint32_t up = tp_topology_node_domain(f->t, node, f->base_level);
		BENCH_CHECK(tp_topology_domain_fabric(f->t, (int)f->base_level, up, &k.up_kind,
		                                      &k.up_gbps, NULL), "tp_topology_domain_fabric");
		unsigned c = 0;
		while (c < fl->nclass && !same_class(&key[c], &k))
			c++;
		if (c == FLOOR_CLASSES) { /* more classes than the floor tells apart: no floor */
			floor_destroy(fl);
			return NULL;
		}
		if (c == fl->nclass) {
			key[fl->nclass++] = k;
			fl->dev[c] = malloc(nd * sizeof *fl->dev[c]);
			if (!fl->dev[c])
				bench_die("out of memory");
		}
		uint32_t first, n;
		BENCH_CHECK(tp_topology_domain_devices(f->t, f->node_level, node, &first, &n),
		            "tp_topology_domain_devices");
		for (uint32_t i = 0; i < n; i++)
			fl->dev[c][fl->ndev[c]++] = first + i;
	}
	if (fl->nclass < 2) {
		floor_destroy(fl);
		return NULL;
	}
	return fl;
}

/* The floor of a job with step model m (see above) and its e_c, memoised per size and replica
 * size. */
static const struct floor_memo *floor_of(struct fabric_floor *fl, const struct sim_fleet *f,
                                         const struct sim_job *j, const struct tp_step_model *m)
{
	uint32_t group = j->cls == TP_CLASS_INFERENCE ? j->shape.group : 0;
	for (unsigned i = 0; i < fl->nmemo; i++)
		if (fl->memo[i].gpus == j->gpus && fl->memo[i].group == group)
			return &fl->memo[i];
	struct floor_memo *fm = fl->nmemo < FLOOR_MEMO ? &fl->memo[fl->nmemo++] : &fl->spill;
	memset(fm, 0, sizeof *fm);
	fm->gpus = j->gpus;
	fm->group = group;
	double best = 0;
	unsigned hold = 0;
	for (unsigned c = 0; c < fl->nclass; c++) {
		if (fl->ndev[c] < j->gpus)
			continue;
		double e;
		char err[256];
		int rc = tp_cost_efficiency(&e, f->t, fl->dev[c], j->gpus, m, NULL, err, sizeof err);
		if (rc)
			bench_die("tp_cost_efficiency(%u GPUs): %s: %s", j->gpus, tp_err_name(rc), err);
		fm->e[c] = e;
		best = e > best ? e : best;
		hold++;
	}
	fm->floor = hold == 0 ? 0.0 : hold == 1 ? FLOOR_ONE * best : fl->many * best;
	return fm;
}

/* The floor of job j (step model m, floor0 its fixed floor) told that it would wait
 * ctx->ahead_s more for the placement ctx->ahead_devs (see above): min(floor0, D / (W + D /
 * e1)); floor0 when it is told nothing, 0 when it would never be placed so. */
static double floor_ahead(double floor0, const struct sim_ctx *ctx, const struct sim_job *j,
                          const struct tp_step_model *m)
{
	if (floor0 <= 0 || ctx->ahead_s <= 0 || j->duration_s <= 0)
		return floor0;
	if (!ctx->ahead_devs) /* never placed as the running jobs end: take what fits */
		return 0;
	double e1;
	char err[256];
	int rc = tp_cost_efficiency(&e1, ctx->f->t, ctx->ahead_devs, j->gpus, m, NULL, err,
	                            sizeof err);
	if (rc)
		bench_die("tp_cost_efficiency(%u GPUs): %s: %s", j->gpus, tp_err_name(rc), err);
	double f = j->duration_s / (ctx->ahead_s + j->duration_s / e1);
	return f < floor0 ? f : floor0;
}

static void *topoplace_create(struct sim_ctx *ctx)
{
	const char *m = getenv("TP_BENCH_PLACE_MIX");
	if (m && !strcmp(m, "default"))
		BENCH_CHECK(tp_cluster_set_place_mix(ctx->c, NULL, 0), tp_cluster_errmsg(ctx->c));
	if (m && !strcmp(m, "node")) {
		const tp_job_shape node[2] = {{1, ctx->f->level_name[ctx->f->node_level], 1.0},
		                              {ctx->f->node_gpus,
		                               ctx->f->level_name[ctx->f->node_level], 1.0}};
		BENCH_CHECK(tp_cluster_set_place_mix(ctx->c, node, 2), tp_cluster_errmsg(ctx->c));
	}
	struct tp_learn *L = calloc(1, sizeof *L);
	if (!L)
		bench_die("out of memory");
	L->on = m && !strcmp(m, "learn");
	L->floor = floor_create(ctx->f);
	if (L->floor)
		L->floor->many = ctx->upgrade_on && ctx->strict_fifo ? FLOOR_MANY_STRICT_MOVES
		                                                     : FLOOR_MANY;
	ctx->wants_ahead = L->floor != NULL && ctx->floor_ahead;
	if (!L->floor && (ctx->top_floor > 0 || ctx->upgrade_on) && ctx->f->kind != FLEET_TORUS) {
		L->e_empty = malloc(SHAPE_KEYS * sizeof *L->e_empty);
		L->l_empty = malloc(SHAPE_KEYS * sizeof *L->l_empty);
		if (!L->e_empty || !L->l_empty)
			bench_die("out of memory");
		for (size_t k = 0; k < SHAPE_KEYS; k++) {
			L->e_empty[k] = NAN;
			L->l_empty[k] = -1;
		}
		BENCH_CHECK(tp_cluster_create(&L->empty, ctx->f->t, NULL), "tp_cluster_create");
	}
	return L;
}

static void topoplace_destroy(void *st)
{
	struct tp_learn *L = st;
	floor_destroy(L->floor);
	free(L->e_empty);
	free(L->l_empty);
	tp_cluster_destroy(L->empty);
	free(L);
}

/* The deepest level above the node one domain of which holds all n devices, or -1 (they span
 * top-level domains). */
static int one_domain_level(const struct sim_fleet *f, const uint32_t *d, size_t n)
{
	int deep = -1;
	for (unsigned l = 0; l < f->node_level; l++) {
		uint32_t dom = tp_topology_node_domain(f->t, tp_topology_device_node(f->t, d[0]), l);
		for (size_t i = 1; i < n; i++)
			if (tp_topology_node_domain(f->t, tp_topology_device_node(f->t, d[i]), l) != dom)
				return deep;
		deep = (int)l;
	}
	return deep;
}

/*
 * The top job's floor. Under EASY, on a fleet of one fabric class (no fabric_floor), the top
 * job (ctx->oldest, also in its reservation's trials) asks for an efficiency of at least
 * ctx->top_floor (--top-floor, SIM_TOP_FLOOR 0.999: full locality), capped at the efficiency
 * its rules give it on the empty fleet so that every job can be placed once enough has ended.
 * Refused (TP_EBUSY), it waits with its reservation, which the same floor places, while
 * backfill fills the GPUs around it; then it runs its whole duration at full speed. This is
 * what slurm-block-like gets by its block rule (a job waits for an aligned block of its
 * level), and what it won by on hgx:4096 under EASY, where topoplace's 65-256 GPU jobs ran
 * over several scalable units at 0.97. Backfilled jobs keep no floor (they run now or not in
 * this pass), and under besteffort or strict there is no reservation to wait with: a floor
 * there starves the large jobs. Measured: docs/benchmarks.md, "The top job's floor".
 *
 * Job j's floor: min(ctx->top_floor, the efficiency its rules give it on the empty fleet),
 * that efficiency memoised per shape (a key stands for one size below 4,095 GPUs); 0 when it
 * cannot be placed there.
 */
static double empty_efficiency(struct tp_learn *L, struct sim_ctx *ctx, const struct sim_job *j,
                               const tp_request *r, const struct tp_step_model *m)
{
	double once = NAN, *e = j->gpus < 4095 ? &L->e_empty[j->shape_key] : &once;
	int8_t lonce = -1, *lv = j->gpus < 4095 ? &L->l_empty[j->shape_key] : &lonce;
	if (isnan(*e)) {
		tp_placement *p = NULL;
		*e = 0;
		if (tp_place(L->empty, r, &p) == 0) {
			size_t n;
			const uint32_t *d = tp_placement_devices(p, &n);
			char err[256];
			int rc = tp_cost_efficiency(e, ctx->f->t, d, n, m, NULL, err, sizeof err);
			if (rc)
				bench_die("tp_cost_efficiency(%u GPUs): %s: %s", j->gpus, tp_err_name(rc),
				          err);
			*lv = (int8_t)one_domain_level(ctx->f, d, n);
		}
		tp_placement_destroy(p);
	}
	ctx->floor_level = *lv;
	return *e;
}

static double top_floor(struct tp_learn *L, struct sim_ctx *ctx, const struct sim_job *j,
                        const tp_request *r, const struct tp_step_model *m)
{
	double e = empty_efficiency(L, ctx, j, r, m);
	return e < ctx->top_floor ? e : ctx->top_floor;
}

/* The locality upgrade's test (sim.c, sim_upgrade): job j, placed on devs d[0..n) by rules
 * that asked no floor, runs below the efficiency they give it on the empty fleet, and one
 * domain of a level above its required one held it there. */
static void upgrade_check(struct tp_learn *L, struct sim_ctx *ctx, const struct sim_job *j,
                          const tp_request *r, const struct tp_step_model *m, const uint32_t *d,
                          size_t n)
{
	double goal = empty_efficiency(L, ctx, j, r, m), e;
	if (!(goal > 0) || ctx->floor_level < 0 || j->shape.required >= ctx->floor_level)
		return;
	char err[256];
	int rc = tp_cost_efficiency(&e, ctx->f->t, d, n, m, NULL, err, sizeof err);
	if (rc)
		bench_die("tp_cost_efficiency(%u GPUs): %s: %s", j->gpus, tp_err_name(rc), err);
	if (e < goal * (1 - 1e-9)) {
		ctx->upgrade = true;
		ctx->upgrade_eff = goal;
		ctx->placed_eff = e;
	}
}

/* The class upgrade (see CLASS_UPGRADE_FIT): job j, placed at devices d on a fleet of several
 * fabric classes, with its step model m, below CLASS_UPGRADE_FIT x its best e_c. */
static void class_upgrade_check(struct sim_ctx *ctx, const struct sim_job *j,
                                const struct tp_step_model *m, const uint32_t *d, size_t n)
{
	if (j->gpus < 2 || !(ctx->best_eff > 0))
		return;
	double e;
	char err[256];
	int rc = tp_cost_efficiency(&e, ctx->f->t, d, n, m, NULL, err, sizeof err);
	if (rc)
		bench_die("tp_cost_efficiency(%u GPUs): %s: %s", j->gpus, tp_err_name(rc), err);
	if (e < CLASS_UPGRADE_FIT * ctx->best_eff) {
		ctx->upgrade = true;
		ctx->class_upgrade = true;
		ctx->upgrade_eff = ctx->best_eff;
		ctx->placed_eff = e;
	}
}

static int cmp_learn(const void *a, const void *b)
{
	const double *x = a, *y = b;
	return (*x < *y) - (*x > *y);
}

/* Count job j's size; every 32 requests, hand the heaviest sizes to the library. */
static void learn_mix(struct tp_learn *L, struct sim_ctx *ctx, const struct sim_job *j)
{
	const struct sim_fleet *f = ctx->f;
	unsigned i = 0;
	while (i < L->n && L->size[i] != j->gpus)
		i++;
	if (i == L->n && L->n < LEARN_SIZES) {
		L->size[L->n] = j->gpus;
		L->gpus[L->n++] = 0;
	}
	if (i < L->n)
		L->gpus[i] += j->gpus;
	if (++L->seen % 32)
		return;
	struct {
		double w;
		uint32_t size;
	} order[LEARN_SIZES];
	for (unsigned k = 0; k < L->n; k++) {
		order[k].w = L->gpus[k];
		order[k].size = L->size[k];
	}
	qsort(order, L->n, sizeof order[0], cmp_learn);
	tp_job_shape mix[TP_PLACE_MIX_MAX];
	size_t nm = 0;
	for (unsigned k = 0; k < L->n && nm < TP_PLACE_MIX_MAX; k++) {
		uint32_t n = order[k].size;
		int lv = n <= f->node_gpus ? (int)f->node_level
		         : n <= f->nv_gpus ? (int)f->nv_level : n <= f->top_gpus ? 0 : -1;
		if (lv >= 0)
			mix[nm++] = (tp_job_shape){n, f->level_name[lv], order[k].w};
	}
	if (nm)
		BENCH_CHECK(tp_cluster_set_place_mix(ctx->c, mix, nm), tp_cluster_errmsg(ctx->c));
}

static int topoplace_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                           uint32_t *devs)
{
	struct tp_learn *L = st;
	if (L->on)
		learn_mix(L, ctx, j);
	char id[24];
	tp_slice slice;
	tp_request r = sim_tp_request(ctx->f, j, jid, &slice, id);
	struct tp_step_model m = sim_step_model(j);
	ctx->best_eff = 0;
	if (L->floor && !r.box_level) {
		const struct floor_memo *fm = floor_of(L->floor, ctx->f, j, &m);
		for (unsigned c = 0; c < L->floor->nclass; c++)
			ctx->best_eff = fm->e[c] > ctx->best_eff ? fm->e[c] : ctx->best_eff;
		m.min_efficiency = floor_ahead(fm->floor, ctx, j, &m);
		m.no_floor_search = ctx->floor_search == SIM_FLOOR_OFF ||
		                    (ctx->floor_search == SIM_FLOOR_OLDEST && !ctx->oldest);
		m.fabric_fit = ctx->fabric_fit;
		r.comm = &m;
	} else if (L->e_empty && ctx->top_floor > 0 && ctx->oldest && !r.box_level) {
		m.min_efficiency = top_floor(L, ctx, j, &r, &m);
		r.comm = &m;
	}
	if (ctx->want_eff > 0 && !r.box_level) { /* after an upgrade's moves */
		m.min_efficiency = ctx->want_eff;
		r.comm = &m;
	}
	ctx->upgrade = false;
	ctx->class_upgrade = false;
	ctx->have_comm = r.comm != NULL && L->floor != NULL; /* for the defrag hook */
	ctx->comm_jid = jid;
	if (ctx->have_comm)
		ctx->last_comm = m;
	r.expected_end_s = sim_end_estimate(ctx, j, jid);
	tp_placement *p = NULL;
	int rc = tp_place(ctx->c, &r, &p);
	/* the floor's own refusal, by its documented message (docs/errors.md), not any TP_EBUSY
	 * (with --failures a busy answer may also come from down nodes), and only where the
	 * defrag hook has a level to ask for beyond the job's own */
	ctx->floor_refused = rc == TP_EBUSY && ctx->want_eff == 0 && r.comm &&
	                     m.min_efficiency > 0 && !L->floor && p &&
	                     strstr(tp_placement_errmsg(p), "request.comm.min_efficiency") != NULL &&
	                     ctx->floor_level >= 0 && j->shape.required < ctx->floor_level;
	if (rc == 0) {
		size_t n;
		const uint32_t *d = tp_placement_devices(p, &n);
		if (n != j->gpus)
			bench_die("tp_place returned %zu devices for %u", n, j->gpus);
		memcpy(devs, d, n * sizeof *devs);
		if (ctx->upgrade_on && L->e_empty && !r.comm && !r.box_level &&
		    j->gpus > ctx->f->nv_gpus)
			upgrade_check(L, ctx, j, &r, &m, d, n);
		else if (ctx->upgrade_on && L->floor && ctx->want_eff == 0 && !r.box_level)
			class_upgrade_check(ctx, j, &m, d, n);
	} else if (rc == TP_EINVAL || rc == TP_ENOTFOUND || rc == TP_ENOMEM) {
		bench_die("tp_place(job %u, %u GPUs): %s: %s", jid, j->gpus, tp_err_name(rc),
		          p ? tp_placement_errmsg(p) : "");
	} else if (rc == TP_EINFEASIBLE && getenv("TP_BENCH_DEBUG")) {
		fprintf(stderr, "tp_place(job %u, %u GPUs, class %d): %s: %s\n", jid, j->gpus, j->cls,
		        tp_err_name(rc), tp_placement_errmsg(p));
	}
	tp_placement_destroy(p);
	return rc;
}

/* Carry out the first ns steps of plan p (migrations; `who` made it) if no moved job would run
 * less efficiently (mv->keeps_efficiency), reporting each move (mv->moved): the number of jobs
 * moved, or -1 for a plan refused (counted in *mv->refused). */
int sim_apply_migrations(tp_cluster *c, const tp_plan *p, size_t ns, const struct sim_mover *mv,
                         const char *who)
{
	for (size_t i = 0; i < ns; i++) { /* worth carrying out? */
		tp_step_action a;
		const char *job;
		const uint32_t *to;
		size_t nto;
		BENCH_CHECK(tp_plan_step(p, i, &a, &job, NULL, NULL, &to, &nto), "tp_plan_step");
		if (a != TP_STEP_MIGRATE)
			bench_die("%s preempted job %s although the policy forbids it", who, job);
		uint32_t moved = (uint32_t)strtoul(job + 1, NULL, 10); /* ids are "j<index>" */
		if (!mv->keeps_efficiency(mv->ud, moved, to, (uint32_t)nto)) {
			(*mv->refused)++;
			return -1;
		}
	}
	for (size_t i = 0; i < ns; i++) {
		const char *job;
		const uint32_t *to;
		size_t nto;
		BENCH_CHECK(tp_plan_step(p, i, NULL, &job, NULL, NULL, &to, &nto), "tp_plan_step");
		BENCH_CHECK(tp_plan_apply_step(c, p, i, NULL), tp_cluster_errmsg(c));
		mv->moved(mv->ud, (uint32_t)strtoul(job + 1, NULL, 10), to, (uint32_t)nto);
	}
	return (int)ns;
}

void sim_trace_call(const char *what, const tp_request *r, int rc, const tp_plan *p,
                    uint64_t cpu_ns)
{
	tp_defrag_stats st = TP_DEFRAG_STATS_INIT;
	if (p)
		tp_plan_stats(p, &st);
	fprintf(stderr,
	        "%s-trace %s gpus %u group %u required %s slice %s/%u -> %s cpu_ms %.3f "
	        "scanned %llu evaluated %llu simulated %llu budget %d moves %zu cost_s %.0f%s%s\n",
	        what, r->id, r->count, r->group_size, r->required ? r->required : "-",
	        r->nslices ? r->slices[0].level : "-", r->nslices ? r->slices[0].size : 0,
	        rc ? tp_err_name(rc) : "ok", (double)cpu_ns * 1e-6, (unsigned long long)st.scanned,
	        (unsigned long long)st.evaluated, (unsigned long long)st.simulated, (int)st.budget,
	        p && !rc ? tp_plan_step_count(p) - 1 : 0, p && !rc ? tp_plan_cost_s(p) : 0.0,
	        rc && p ? ": " : "", rc && p ? tp_plan_errmsg(p) : "");
}

/* Hold the free devices of nodes list[0..n) by a pinned placeholder job, after a savepoint
 * (*sp) that takes it away again. */
static void sim_pin_nodes(tp_cluster *c, const uint32_t *list, uint32_t n, size_t *sp)
{
	uint32_t *buf = malloc((size_t)n * TP_MAX_NODE_DEVICES * sizeof *buf);
	if (!buf)
		bench_die("out of memory");
	uint32_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += bench_node_free_devices(c, list[i], buf + k, TP_MAX_NODE_DEVICES);
	BENCH_CHECK(tp_cluster_savepoint(c, sp), tp_cluster_errmsg(c));
	if (k > 0) {
		tp_job_options opts = TP_JOB_OPTIONS_INIT;
		opts.migratable = 0;
		BENCH_CHECK(tp_cluster_assign(c, "easy-pinned", buf, k, &opts), tp_cluster_errmsg(c));
	}
	free(buf);
}

/* Whether a migration of p's first ns steps lands on a pinned node: one that another move
 * of the plan freed (the placeholder held only the devices free before it). */
static bool sim_lands_on_pinned(const struct sim_ctx *ctx, const tp_plan *p, size_t ns,
                                const uint8_t *pinned)
{
	for (size_t i = 0; i < ns; i++) {
		const uint32_t *to;
		size_t nto;
		BENCH_CHECK(tp_plan_step(p, i, NULL, NULL, NULL, NULL, &to, &nto), "tp_plan_step");
		for (size_t d = 0; d < nto; d++)
			if (pinned[tp_topology_device_node(ctx->f->t, to[d])])
				return true;
	}
	return false;
}

/*
 * The defrag hook: ask the library's planner for the moves that make job j fit, with
 * migrations only (no preemption: the simulator has no requeue), interactive jobs untouched
 * (the planner's default), at most 8 jobs moved and a cost (checkpoint seconds x devices) of at
 * most mv->max_cost_share of j's own work. A plan is carried out only if no moved job would run
 * less efficiently afterwards (mv->keeps_efficiency: the planner keeps each job's locality
 * unless ctx->defrag_less_local lets it move one less local, and the simulator checks the
 * efficiency it charges). Then every migration step is applied to the
 * cluster (tp_plan_apply_step) and reported (mv->moved), which charges the moved job its
 * checkpoint time. The place step is left to the caller, which places j again.
 * Returns the number of jobs moved, or a negative code (TP_ENOPLAN also for a plan refused).
 */
int sim_defrag_make_room(struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                         const struct sim_mover *mv, double *cost_s)
{
	char id[24];
	tp_slice slice;
	tp_request r = sim_tp_request(ctx->f, j, jid, &slice, id);
	r.expected_end_s = sim_end_estimate(ctx, j, jid);
	if (ctx->floor_refused || (ctx->upgrade && !ctx->class_upgrade)) {
		/* room at the floor: one domain of its level */
		r.required = ctx->f->level_name[ctx->floor_level];
		if (j->shape.preferred >= 0 && j->shape.preferred <= ctx->floor_level)
			r.preferred = NULL; /* held by the required level */
	}
	/* On a fleet of several fabric classes, room where the job may start: its step model
	 * and floor, as its place asked (moves that free room below the floor are wasted: the
	 * job still waits). Without the floor's search of the classes and the fabric fit, which
	 * would run in every placement the planner tries (p99 up to 11.8 ms a call on
	 * mixed:2304, against 3.5 ms without). Under besteffort and EASY the plan must also
	 * reach the job's best class efficiency (ctx->defrag_best): the cheapest room is on the
	 * slow classes, and a job started there ran at 0.69-0.74 where the same sizes ran at
	 * 0.90-0.92 without a plan, while the jobs behind it could have used that room
	 * (docs/benchmarks.md, "The defrag hook's plan at the job's best class"). Under
	 * StrictFIFO nothing else starts while it waits: room on a slow class beats idle GPUs. */
	struct tp_step_model comm;
	if (ctx->defrag_floor && ctx->have_comm && ctx->comm_jid == jid && !ctx->upgrade) {
		comm = ctx->last_comm;
		comm.no_floor_search = true;
		comm.fabric_fit = 0;
		if (ctx->defrag_best && ctx->best_eff > comm.min_efficiency)
			comm.min_efficiency = ctx->best_eff;
		r.comm = &comm;
	}
	if (ctx->upgrade && ctx->class_upgrade) { /* room at its best class's efficiency */
		comm = ctx->last_comm;
		comm.min_efficiency = ctx->upgrade_eff;
		comm.no_floor_search = true;
		comm.fabric_fit = 0;
		r.comm = &comm;
	}
	tp_defrag_policy pol = TP_DEFRAG_POLICY_INIT;
	pol.preempt = 0;
	pol.max_moves = 8;
	pol.max_cost_s = mv->max_cost_share * (double)j->gpus * j->duration_s;
	pol.max_simulations = mv->max_sims; /* 0: the library's default */
	pol.max_candidates = mv->max_cands;
	pol.allow_less_local = ctx->defrag_less_local;
	tp_plan *p = NULL;
	*cost_s = 0;
	uint64_t c0 = bench_thread_cpu_ns();
	size_t sp = 0;
	if (mv->npin > 0)
		sim_pin_nodes(ctx->c, mv->pin, mv->npin, &sp);
	int rc = tp_defrag_plan(ctx->c, &r, &pol, &p);
	if (mv->npin > 0) /* the plan's steps apply without the placeholder too */
		BENCH_CHECK(tp_cluster_rollback(ctx->c, sp), tp_cluster_errmsg(ctx->c));
	if (getenv("TP_BENCH_DEFRAG_TRACE"))
		sim_trace_call("defrag", &r, rc, p, bench_thread_cpu_ns() - c0);
	if (rc == TP_ENOMEM || rc == TP_EINVAL || rc == TP_ENOTFOUND)
		bench_die("tp_defrag_plan(job %u): %s: %s", jid, tp_err_name(rc),
		          p ? tp_plan_errmsg(p) : "");
	if (rc < 0) {
		tp_plan_destroy(p);
		return rc;
	}
	size_t ns = tp_plan_step_count(p) - 1; /* the last step places j */
	if (mv->npin > 0 && sim_lands_on_pinned(ctx, p, ns, mv->pin_node)) {
		(*mv->refused)++;
		tp_plan_destroy(p);
		return TP_ENOPLAN;
	}
	if (!sim_plan_pays(mv, j, jid, p) ||
	    sim_apply_migrations(ctx->c, p, ns, mv, "tp_defrag_plan") < 0) {
		tp_plan_destroy(p);
		return TP_ENOPLAN;
	}
	*cost_s = tp_plan_cost_s(p);
	tp_plan_destroy(p);
	return (int)ns;
}

const struct sim_policy sim_policies[] = {
	{"random", "random free devices", true, no_state, random_place, no_destroy, false, SIM_ON_TREE},
	{"first-fit", "lowest-numbered free devices", true, no_state, first_fit_place, no_destroy,
	 false, SIM_ON_TREE},
	{"kueue-like", "Kueue TAS: required/preferred rack, slices, BestFit", true, kueue_create,
	 kueue_place, kueue_destroy, false, SIM_ON_TREE},
	{"slurm-block-like", "Slurm topology/block: block level by size, waits, segments", true,
	 sim_slurm_create, sim_slurm_block_place, sim_slurm_destroy, false, SIM_ON_TREE},
	{"slurm-tree-like", "Slurm topology/tree: lowest switch, best fit, best effort", true,
	 sim_slurm_create, sim_slurm_tree_place, sim_slurm_destroy, false, SIM_ON_TREE},
	{"first-fit-box", "first free box in x, y, z order (torus fleets)", true, sim_torus_create,
	 sim_first_fit_box_place, sim_torus_destroy, false, SIM_ON_TORUS},
	{"slurm-torus-like", "Slurm topology/3d_torus: Hilbert ranking, best fit (torus fleets)",
	 true, sim_torus_create, sim_slurm_torus_place, sim_torus_destroy, false, SIM_ON_TORUS},
	{"topoplace", "tp_place with the job's shape", true, topoplace_create, topoplace_place,
	 topoplace_destroy, false, SIM_ON_BOTH},
	{"topoplace-defrag", "tp_place + defrag planner", true, topoplace_create, topoplace_place,
	 topoplace_destroy, true, SIM_ON_BOTH},
	{"ideal", "full locality, perfect packing (upper bound)", false, no_state, NULL, no_destroy,
	 false, SIM_ON_BOTH},
};
const size_t sim_npolicies = sizeof sim_policies / sizeof sim_policies[0];
