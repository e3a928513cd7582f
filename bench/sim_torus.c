/* SPDX-License-Identifier: MIT */
/*
 * Torus fleets in the simulator (issue #18 item 5): `--fleet torus:X,Y,Z`, the tpu job mix of
 * box-shaped slices, and the two torus baselines. docs/benchmarks.md, "Torus fleet".
 *
 * The fleet is one TPU-pod-like pod of X x Y x Z chips, every axis wrapping
 * (tp_topology_generate_torus): levels `pod` (the grid) and `chip` (a node of one device).
 * Every job asks for a box of chips; the policies that run there:
 *
 *   topoplace         tp_place with a box request (box_level "pod", the job's extents, its
 *                     rotation and wrap flags): the fewest free fragments left;
 *   topoplace-defrag  the same, and the library's planner when a box does not fit;
 *   first-fit-box     the first anchor cell in x, y, z order (x fastest) where the box is
 *                     wholly free, in the job's own order of extents first and, when the job
 *                     allows rotation, its other orders (lexicographic); across the seam when
 *                     the job allows it. A plain baseline: no objective at all;
 *   slurm-torus-like  Slurm's topology/3d_torus ranking with select/linear's best fit: chips
 *                     sorted along a Hilbert curve (src/plugins/topology/3d_torus/
 *                     hilbert_slurm.c, nodes_to_hilbert_curve: John Skilling's transform of
 *                     the coordinates, bits interleaved x first), every chip of equal node
 *                     weight (so the weight order, which select/linear applies first, is the
 *                     rank order), free chips grouped in runs of consecutive ranks, and the
 *                     smallest run that holds the job taken first (best fit; ties: the lowest
 *                     rank). Slurm's torus plugin does not require adjacent nodes (Cray); a
 *                     TPU slice must be a box, so among the windows of the job's size in those
 *                     runs, in that order, the first whose chips form the job's box is taken
 *                     (the box filter is ours). A Hilbert window never crosses the seam;
 *   ideal             a job starts when enough chips are free (sim.c).
 *
 * random, first-fit, kueue-like, slurm-block-like and slurm-tree-like place groups inside
 * the nodes of a tree and cannot place boxes: they are left out on a torus, with that reason
 * printed (sim_policy_runs_on).
 *
 * The tpu mix. Slice shapes are the 3-D topologies of Cloud TPU v4 / v5p slices (the docs'
 * "topology" values: 2x2x1 for one host of 4 chips up to 16x16x16 for a 4,096-chip pod;
 * 1x1x1 stands for a single chip). There is no public trace of slice requests, so the weights
 * below are ours, chosen to match the llm mix's size profile (sim_workload.c): most jobs are
 * small, jobs of 1,024 chips and more about 1%. Running time log-normal, median 1.5 h, sigma
 * 1.0, clamped to [5 min, 48 h] (the llm mix's training jobs). All jobs are training. Shapes
 * that are not cubes may rotate; every job may cross the seam (the pod is a full torus, so a
 * box across the seam has the same links). Shapes that do not fit the torus are left out of
 * the draw.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct torus_shape {
	uint32_t e[3];
	double w; /* share of jobs, % */
};

static const struct torus_shape tpu_mix[] = {
	{{1, 1, 1}, 20},  {{2, 2, 1}, 22}, {{2, 2, 2}, 15}, {{2, 2, 4}, 12},
	{{2, 4, 4}, 10},  {{4, 4, 4}, 9},  {{4, 4, 8}, 6},  {{4, 8, 8}, 3},
	{{8, 8, 8}, 2},   {{8, 8, 16}, 0.7}, {{16, 16, 16}, 0.3},
};
#define TPU_NMIX (sizeof tpu_mix / sizeof tpu_mix[0])

/* ---- the fleet ---------------------------------------------------------------------------- */

void sim_torus_fleet(struct sim_fleet *f, const char *dims, const char *spec)
{
	unsigned d[3];
	char sep[3] = {0};
	int end = 0;
	if (sscanf(dims, "%u%c%u%c%u%n", &d[0], &sep[0], &d[1], &sep[1], &d[2], &end) != 5 ||
	    dims[end] || sep[0] != sep[1] || (sep[0] != ',' && sep[0] != 'x'))
		bench_die("--fleet %s: expected torus:X,Y,Z (or torus:XxYxZ)", spec);
	uint64_t cells = (uint64_t)d[0] * d[1] * d[2];
	if (!d[0] || !d[1] || !d[2] || cells > 65536)
		bench_die("--fleet %s: each extent must be >= 1 and the torus at most 65,536 chips",
		          spec);
	int rc = tp_topology_generate_torus(&f->t, 1, d, 3, 0x7, NULL);
	if (rc < 0)
		bench_die("--fleet %s: %s", spec, tp_err_name(rc));
	f->kind = FLEET_TORUS;
	memcpy(f->dims, d, sizeof d);
	f->cell_node = malloc(cells * sizeof *f->cell_node);
	f->cell_dev = malloc(cells * sizeof *f->cell_dev);
	f->node_cell = malloc(cells * sizeof *f->node_cell);
	if (!f->cell_node || !f->cell_dev || !f->node_cell)
		bench_die("out of memory");
	for (uint32_t i = 0; i < cells; i++) {
		unsigned co[3] = {i % d[0], i / d[0] % d[1], i / d[0] / d[1]};
		uint32_t node, first, n;
		BENCH_CHECK(tp_topology_grid_child(f->t, 0, 0, co, &node), "tp_topology_grid_child");
		BENCH_CHECK(tp_topology_domain_devices(f->t, 1, node, &first, &n),
		            "tp_topology_domain_devices");
		f->cell_node[i] = node;
		f->cell_dev[i] = first;
		f->node_cell[node] = i;
	}
	f->top = 1;
	f->per_top = (unsigned)cells;
}

void sim_torus_fleet_free(struct sim_fleet *f)
{
	free(f->cell_node);
	free(f->cell_dev);
	free(f->node_cell);
	f->cell_node = f->cell_dev = f->node_cell = NULL;
}

bool sim_policy_runs_on(const struct sim_policy *p, const struct sim_fleet *f, const char **why)
{
	bool torus = f->kind == FLEET_TORUS;
	if (torus && p->on == SIM_ON_TREE) {
		*why = "it places groups inside the nodes of a tree, not boxes of a grid";
		return false;
	}
	if (!torus && p->on == SIM_ON_TORUS) {
		*why = "it places boxes, on torus fleets only";
		return false;
	}
	return true;
}

/* ---- the tpu mix -------------------------------------------------------------------------- */

static bool is_cube(const uint32_t *e) { return e[0] == e[1] && e[1] == e[2]; }

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* Whether extents e fit the torus (in some order when rotate). */
static bool shape_fits(const struct sim_fleet *f, const uint32_t *e, bool rotate)
{
	uint32_t a[3] = {e[0], e[1], e[2]}, b[3] = {f->dims[0], f->dims[1], f->dims[2]};
	if (rotate) {
		qsort(a, 3, sizeof *a, cmp_u32);
		qsort(b, 3, sizeof *b, cmp_u32);
	}
	return a[0] <= b[0] && a[1] <= b[1] && a[2] <= b[2];
}

void sim_torus_gen_job(struct bench_rng *r, const struct sim_fleet *f, struct sim_job *j)
{
	double w[TPU_NMIX];
	for (size_t k = 0; k < TPU_NMIX; k++)
		w[k] = shape_fits(f, tpu_mix[k].e, !is_cube(tpu_mix[k].e)) ? tpu_mix[k].w : 0;
	size_t k = bench_rng_weighted(r, w, TPU_NMIX);
	memset(j, 0, sizeof *j);
	j->cls = TP_CLASS_TRAINING;
	const uint32_t *e = tpu_mix[k].e;
	j->gpus = e[0] * e[1] * e[2];
	double v = 5400 * exp(1.0 * bench_rng_normal(r));
	j->duration_s = v < 300 ? 300 : v > 48 * 3600 ? 48 * 3600 : v;
	j->checkpoint_s = sim_checkpoint_s(j->gpus, j->cls);
	j->shape = (struct sim_shape){.group = 1, .required = -1, .preferred = -1,
	                              .slice_level = -1,
	                              .box = {e[0], e[1], e[2]}, .box_rotate = !is_cube(e),
	                              .box_wrap = true};
	j->shape_key = (uint16_t)(4 * 4096 + k);
}

/* ---- geometry ----------------------------------------------------------------------------- */

/* The orders of the extents a job may take: its own first, then (rotate) the other distinct
 * permutations in lexicographic order of the axis indices. Returns how many into o. */
static unsigned orientations(const struct sim_job *j, uint32_t o[6][3])
{
	static const unsigned perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
	                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	const uint32_t *e = j->shape.box;
	unsigned n = 0;
	for (unsigned p = 0; p < (j->shape.box_rotate ? 6u : 1u); p++) {
		uint32_t c[3] = {e[perm[p][0]], e[perm[p][1]], e[perm[p][2]]};
		bool dup = false;
		for (unsigned k = 0; k < n; k++)
			dup |= !memcmp(o[k], c, sizeof c);
		if (!dup)
			memcpy(o[n++], c, sizeof c);
	}
	return n;
}

/* Whether the coordinates used along one axis (used[0..dim), cnt of them) are one interval of
 * length e, cyclic when wrap. */
static bool axis_interval(const uint8_t *used, unsigned dim, unsigned cnt, uint32_t e, bool wrap)
{
	if (cnt != e)
		return false;
	if (e == dim)
		return true;
	unsigned starts = 0; /* coordinates used whose predecessor is not */
	for (unsigned x = 0; x < dim; x++) {
		bool prev = x > 0 ? used[x - 1] : (wrap ? used[dim - 1] : false);
		starts += used[x] && !prev;
	}
	return starts == 1;
}

bool sim_torus_is_box(const struct sim_fleet *f, const struct sim_job *j, const uint32_t *devs)
{
	uint32_t n = j->gpus, o[6][3];
	const unsigned *d = f->dims;
	if (!j->shape.box[0] || n != j->shape.box[0] * j->shape.box[1] * j->shape.box[2])
		return false;
	uint32_t cells = d[0] * d[1] * d[2];
	uint8_t *seen = calloc(cells + d[0] + d[1] + d[2], 1);
	if (!seen)
		bench_die("out of memory");
	uint8_t *used[3] = {seen + cells, seen + cells + d[0], seen + cells + d[0] + d[1]};
	unsigned cnt[3] = {0, 0, 0};
	bool ok = true;
	for (uint32_t i = 0; i < n && ok; i++) {
		uint32_t node = tp_topology_device_node(f->t, devs[i]);
		uint32_t c = node < cells ? f->node_cell[node] : cells;
		if (c >= cells || seen[c]) {
			ok = false;
			break;
		}
		seen[c] = 1;
		unsigned co[3] = {c % d[0], c / d[0] % d[1], c / d[0] / d[1]};
		for (int a = 0; a < 3; a++)
			if (!used[a][co[a]]) {
				used[a][co[a]] = 1;
				cnt[a]++;
			}
	}
	/* n distinct cells whose coordinates span intervals of the box's extents fill it */
	bool box = false;
	unsigned no = ok ? orientations(j, o) : 0;
	for (unsigned k = 0; k < no && !box; k++)
		box = axis_interval(used[0], d[0], cnt[0], o[k][0], j->shape.box_wrap) &&
		      axis_interval(used[1], d[1], cnt[1], o[k][1], j->shape.box_wrap) &&
		      axis_interval(used[2], d[2], cnt[2], o[k][2], j->shape.box_wrap);
	free(seen);
	return box;
}

void sim_torus_frag(const struct sim_fleet *f, tp_cluster *c, uint32_t *box, uint32_t *frags)
{
	(void)f;
	tp_frag *fr = NULL;
	BENCH_CHECK(tp_frag_report(c, NULL, 0, &fr), tp_cluster_errmsg(c));
	*box = tp_frag_largest_box(fr, 0, NULL);
	*frags = tp_frag_grid_fragment_count(fr, 0);
	tp_frag_destroy(fr);
}

/* ---- the baselines' state ----------------------------------------------------------------- */

struct torus_state {
	uint32_t cells;
	uint32_t *prefix; /* [(X+1)(Y+1)(Z+1)] busy-chip counts of the boxes [0,x) x [0,y) x [0,z) */
	uint32_t *rank;   /* [cells] the cells in Hilbert order (slurm-torus-like) */
	uint32_t *runs;   /* [2 cells] free runs: start (rank position), length */
	uint32_t *dq;     /* [6 cells] the sliding window's monotonic queues */
	uint8_t *busy;    /* [cells] the chips not wholly free, as of the last build_prefix */
};

static unsigned coord(uint32_t c, int a, const unsigned *d)
{
	return a == 0 ? c % d[0] : a == 1 ? c / d[0] % d[1] : c / d[0] / d[1];
}

/* John Skilling's transform ("Programming the Hilbert curve", AIP Conf. Proc. 707, 2004) of
 * coordinates x[0..3) of `bits` bits into the transposed Hilbert index, whose bits interleaved
 * (x[0] highest) give the position along the curve, as Slurm's nodes_to_hilbert_curve does. */
static uint64_t hilbert_index(const unsigned *co, unsigned bits)
{
	uint32_t x[3] = {co[0], co[1], co[2]};
	uint32_t m = 1u << (bits - 1);
	for (uint32_t q = m; q > 1; q >>= 1) { /* inverse undo of the excess work */
		uint32_t p = q - 1;
		for (int i = 0; i < 3; i++) {
			if (x[i] & q) {
				x[0] ^= p;
			} else {
				uint32_t t = (x[0] ^ x[i]) & p;
				x[0] ^= t;
				x[i] ^= t;
			}
		}
	}
	for (int i = 1; i < 3; i++) /* Gray encode */
		x[i] ^= x[i - 1];
	uint32_t t = 0;
	for (uint32_t q = m; q > 1; q >>= 1)
		if (x[2] & q)
			t ^= q - 1;
	for (int i = 0; i < 3; i++)
		x[i] ^= t;
	uint64_t h = 0;
	for (int b = (int)bits - 1; b >= 0; b--)
		for (int i = 0; i < 3; i++)
			h = (h << 1) | ((x[i] >> b) & 1u);
	return h;
}

static const uint64_t *hilbert_keys; /* qsort's context (single-threaded simulator) */

static int cmp_hilbert(const void *a, const void *b)
{
	uint64_t x = hilbert_keys[*(const uint32_t *)a], y = hilbert_keys[*(const uint32_t *)b];
	return (x > y) - (x < y);
}

void *sim_torus_create(struct sim_ctx *ctx)
{
	const struct sim_fleet *f = ctx->f;
	const unsigned *d = f->dims;
	struct torus_state *s = calloc(1, sizeof *s);
	if (!s)
		bench_die("out of memory");
	s->cells = d[0] * d[1] * d[2];
	s->prefix = malloc((size_t)(d[0] + 1) * (d[1] + 1) * (d[2] + 1) * sizeof *s->prefix);
	s->rank = malloc(s->cells * sizeof *s->rank);
	s->runs = malloc(2 * (size_t)s->cells * sizeof *s->runs);
	s->dq = malloc(6 * (size_t)s->cells * sizeof *s->dq);
	s->busy = malloc(s->cells);
	uint64_t *key = malloc(s->cells * sizeof *key);
	if (!s->prefix || !s->rank || !s->runs || !s->dq || !s->busy || !key)
		bench_die("out of memory");
	unsigned bits = 1;
	while ((1u << bits) < d[0] || (1u << bits) < d[1] || (1u << bits) < d[2])
		bits++;
	for (uint32_t c = 0; c < s->cells; c++) {
		unsigned co[3] = {c % d[0], c / d[0] % d[1], c / d[0] / d[1]};
		key[c] = hilbert_index(co, bits);
		s->rank[c] = c;
	}
	hilbert_keys = key;
	qsort(s->rank, s->cells, sizeof *s->rank, cmp_hilbert);
	hilbert_keys = NULL;
	free(key);
	if (d[0] == d[1] && d[1] == d[2] && d[0] == 1u << bits) /* a whole curve: a path */
		for (uint32_t i = 1; i < s->cells; i++) {
			unsigned dist = 0;
			for (int a = 0; a < 3; a++) {
				unsigned p = coord(s->rank[i - 1], a, d), q = coord(s->rank[i], a, d);
				dist += p > q ? p - q : q - p;
			}
			if (dist != 1)
				bench_die("slurm-torus-like: ranks %u and %u are not neighbours on the "
				          "Hilbert curve", i - 1, i);
		}
	return s;
}

void sim_torus_destroy(void *st)
{
	struct torus_state *s = st;
	if (!s)
		return;
	free(s->prefix);
	free(s->rank);
	free(s->runs);
	free(s->dq);
	free(s->busy);
	free(s);
}

static bool cell_free(const struct sim_ctx *ctx, uint32_t cell)
{
	const struct sim_fleet *f = ctx->f;
	return tp_cluster_free_count(ctx->c, f->node_level, f->cell_node[cell]) == f->node_gpus;
}

/* Devices of the box at anchor a with extents e, x fastest, wrapping. */
static void box_devices(const struct sim_fleet *f, const unsigned *a, const uint32_t *e,
                        uint32_t *devs)
{
	const unsigned *d = f->dims;
	uint32_t k = 0;
	for (uint32_t z = 0; z < e[2]; z++)
		for (uint32_t y = 0; y < e[1]; y++)
			for (uint32_t x = 0; x < e[0]; x++) {
				uint32_t c = (a[0] + x) % d[0] +
				             d[0] * ((a[1] + y) % d[1] + d[1] * ((a[2] + z) % d[2]));
				devs[k++] = f->cell_dev[c];
			}
}

/* ---- first-fit-box ------------------------------------------------------------------------ */

#define PFX(s, d, x, y, z) ((s)->prefix[((size_t)(z) * ((d)[1] + 1) + (y)) * ((d)[0] + 1) + (x)])

static void build_prefix(struct torus_state *s, const struct sim_ctx *ctx)
{
	const unsigned *d = ctx->f->dims;
	for (unsigned z = 0; z <= d[2]; z++)
		for (unsigned y = 0; y <= d[1]; y++)
			for (unsigned x = 0; x <= d[0]; x++) {
				if (!x || !y || !z) {
					PFX(s, d, x, y, z) = 0;
					continue;
				}
				uint32_t c = (x - 1) + d[0] * ((y - 1) + d[1] * (z - 1));
				s->busy[c] = !cell_free(ctx, c);
				PFX(s, d, x, y, z) = s->busy[c] + PFX(s, d, x - 1, y, z) +
				                     PFX(s, d, x, y - 1, z) + PFX(s, d, x, y, z - 1) -
				                     PFX(s, d, x - 1, y - 1, z) - PFX(s, d, x - 1, y, z - 1) -
				                     PFX(s, d, x, y - 1, z - 1) + PFX(s, d, x - 1, y - 1, z - 1);
			}
}

/* Busy chips of the plain box [lo, hi) (no wrap). */
static uint32_t busy_plain(const struct torus_state *s, const unsigned *d, const unsigned *lo,
                           const unsigned *hi)
{
	return PFX(s, d, hi[0], hi[1], hi[2]) - PFX(s, d, lo[0], hi[1], hi[2]) -
	       PFX(s, d, hi[0], lo[1], hi[2]) - PFX(s, d, hi[0], hi[1], lo[2]) +
	       PFX(s, d, lo[0], lo[1], hi[2]) + PFX(s, d, lo[0], hi[1], lo[2]) +
	       PFX(s, d, hi[0], lo[1], lo[2]) - PFX(s, d, lo[0], lo[1], lo[2]);
}

/* Busy chips of the box at anchor a, extents e, split at the seams into plain boxes. */
static uint32_t busy_box(const struct torus_state *s, const unsigned *d, const unsigned *a,
                         const uint32_t *e)
{
	unsigned lo[3][2], hi[3][2], np[3];
	for (int i = 0; i < 3; i++) {
		lo[i][0] = a[i];
		if (a[i] + e[i] <= d[i]) {
			hi[i][0] = a[i] + e[i];
			np[i] = 1;
		} else {
			hi[i][0] = d[i];
			lo[i][1] = 0;
			hi[i][1] = a[i] + e[i] - d[i];
			np[i] = 2;
		}
	}
	uint32_t busy = 0;
	for (unsigned i = 0; i < np[0]; i++)
		for (unsigned k = 0; k < np[1]; k++)
			for (unsigned m = 0; m < np[2]; m++) {
				unsigned l[3] = {lo[0][i], lo[1][k], lo[2][m]};
				unsigned h[3] = {hi[0][i], hi[1][k], hi[2][m]};
				busy += busy_plain(s, d, l, h);
			}
	return busy;
}

int sim_first_fit_box_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                            uint32_t *devs)
{
	(void)jid;
	struct torus_state *s = st;
	const struct sim_fleet *f = ctx->f;
	const unsigned *d = f->dims;
	uint32_t o[6][3];
	unsigned no = orientations(j, o), fits = 0;
	for (unsigned k = 0; k < no; k++)
		fits += o[k][0] <= d[0] && o[k][1] <= d[1] && o[k][2] <= d[2];
	if (!fits)
		return TP_EINFEASIBLE;
	if (tp_cluster_free_total_count(ctx->c) < j->gpus)
		return TP_EBUSY;
	build_prefix(s, ctx);
	for (uint32_t c = 0; c < s->cells; c++) {
		if (s->busy[c]) /* every box anchored there holds it */
			continue;
		unsigned a[3] = {c % d[0], c / d[0] % d[1], c / d[0] / d[1]};
		for (unsigned k = 0; k < no; k++) {
			const uint32_t *e = o[k];
			if (e[0] > d[0] || e[1] > d[1] || e[2] > d[2])
				continue;
			if (!j->shape.box_wrap &&
			    (a[0] + e[0] > d[0] || a[1] + e[1] > d[1] || a[2] + e[2] > d[2]))
				continue;
			if (busy_box(s, d, a, e) == 0) {
				box_devices(f, a, e, devs);
				return 0;
			}
		}
	}
	return TP_EFRAGMENTED;
}

/* ---- slurm-torus-like --------------------------------------------------------------------- */

static int cmp_run(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b; /* (start, length): shortest first, then lowest rank */
	if (x[1] != y[1])
		return (x[1] > y[1]) - (x[1] < y[1]);
	return (x[0] > y[0]) - (x[0] < y[0]);
}

/* The first window of n ranks inside run [start, start + len) whose chips form one of the
 * orientations o[0..no) as a plain box (Hilbert windows never cross the seam): its first rank
 * position, or UINT32_MAX. n distinct chips whose bounding box has the box's extents fill it.
 * Sliding minima and maxima per axis with monotonic queues of window positions. */
static uint32_t run_box_window(const struct torus_state *s, const unsigned *d, uint32_t start,
                               uint32_t len, uint32_t n, uint32_t o[6][3], unsigned no)
{
	uint32_t *q[6];
	size_t head[6] = {0}, tail[6] = {0};
	for (int i = 0; i < 6; i++)
		q[i] = s->dq + (size_t)i * s->cells;
	const uint32_t *rk = s->rank + start;
	for (uint32_t i = 0; i < len; i++) {
		for (int a = 0; a < 3; a++) {
			unsigned v = coord(rk[i], a, d);
			for (int m = 0; m < 2; m++) { /* m 0: minima, 1: maxima */
				uint32_t *qq = q[2 * a + m];
				size_t *h = &head[2 * a + m], *t = &tail[2 * a + m];
				while (*t > *h) {
					unsigned pv = coord(rk[qq[*t - 1]], a, d);
					if (m == 0 ? pv < v : pv > v)
						break;
					(*t)--;
				}
				qq[(*t)++] = i;
				while (qq[*h] + n <= i) /* left the window [i + 1 - n, i] */
					(*h)++;
			}
		}
		if (i + 1 < n)
			continue;
		uint32_t ext[3];
		for (int a = 0; a < 3; a++)
			ext[a] = coord(rk[q[2 * a + 1][head[2 * a + 1]]], a, d) -
			         coord(rk[q[2 * a][head[2 * a]]], a, d) + 1;
		for (unsigned k = 0; k < no; k++)
			if (!memcmp(ext, o[k], sizeof ext))
				return start + i + 1 - n;
	}
	return UINT32_MAX;
}

int sim_slurm_torus_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                          uint32_t *devs)
{
	(void)jid;
	struct torus_state *s = st;
	const struct sim_fleet *f = ctx->f;
	const unsigned *d = f->dims;
	uint32_t o[6][3], n = j->gpus;
	unsigned no = orientations(j, o), fits = 0;
	for (unsigned k = 0; k < no; k++)
		fits += o[k][0] <= d[0] && o[k][1] <= d[1] && o[k][2] <= d[2];
	if (!fits)
		return TP_EINFEASIBLE;
	if (tp_cluster_free_total_count(ctx->c) < n)
		return TP_EBUSY;
	uint32_t nr = 0;
	for (uint32_t i = 0; i < s->cells;) { /* runs of free chips in rank order */
		if (!cell_free(ctx, s->rank[i])) {
			i++;
			continue;
		}
		uint32_t b = i;
		while (i < s->cells && cell_free(ctx, s->rank[i]))
			i++;
		if (i - b >= n) {
			s->runs[2 * nr] = b;
			s->runs[2 * nr + 1] = i - b;
			nr++;
		}
	}
	qsort(s->runs, nr, 2 * sizeof *s->runs, cmp_run);
	for (uint32_t r = 0; r < nr; r++) {
		uint32_t w = run_box_window(s, d, s->runs[2 * r], s->runs[2 * r + 1], n, o, no);
		if (w == UINT32_MAX)
			continue;
		for (uint32_t i = 0; i < n; i++)
			devs[i] = f->cell_dev[s->rank[w + i]];
		return 0;
	}
	return TP_EFRAGMENTED;
}
