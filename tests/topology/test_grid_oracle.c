/* SPDX-License-Identifier: MIT */
/*
 * Box requests against a brute-force oracle (issue #18): random rings up to 16 and tori and
 * meshes up to 4x4x4 (one or two grid domains, chips of one or two devices), random jobs, down
 * and cordoned chips; for every box shape that fits the grid, with and without wrap and
 * rotation, the oracle enumerates every domain, anchor and order of extents, counts the free
 * fragments before and after by a full search, and ranks as topoplace.h documents. tp_place
 * must return the oracle's best box (the same children, in snake order) or, when none exists,
 * the status the oracle derives (infeasible with every job gone, busy, fragmented). The
 * fragmentation report's largest free box and fragment count are checked the same way.
 * GO_CASES sets the number of random cases (the slow suite runs many more); GO_SEED one case.
 */
#include <stdio.h>

#include "testutil.h"

static void setup(void) { tp_test_alloc_reset(); }
TestSuite(grid_oracle, .init = setup);

static uint64_t rng;
static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

struct world {
	tp_topology *t;
	tp_cluster *c;
	unsigned nd, dim[3], wrap, pods, per;
	uint32_t ncell;
};

static struct world make_world(void)
{
	struct world w = {0};
	unsigned kind = rnd(3);
	w.nd = kind + 1;
	w.dim[0] = w.dim[1] = w.dim[2] = 1;
	for (unsigned i = 0; i < w.nd; i++)
		w.dim[i] = w.nd == 1 ? 1 + rnd(16) : 1 + rnd(4);
	w.wrap = rnd(1u << w.nd);
	w.pods = 1 + rnd(2);
	w.per = 1 + rnd(2);
	w.ncell = w.dim[0] * w.dim[1] * w.dim[2];
	static const char *const L[] = {"pod", "chip"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, L, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_set_grid(b, 0, w.dim, w.nd, w.wrap), 0);
	char name[64], pod[16];
	for (unsigned p = 0; p < w.pods; p++)
		for (uint32_t i = 0; i < w.ncell; i++) {
			if (i > 0 && w.ncell > 2 && rnd(12) == 0)
				continue; /* a hole */
			snprintf(pod, sizeof pod, "p%u", p);
			snprintf(name, sizeof name, "p%u-c%u", p, i);
			const char *path[1] = {pod};
			cr_assert_eq(tp_topology_builder_add_node(b, name, path, w.per, NULL), 0);
			unsigned x[3] = {i % w.dim[0], i / w.dim[0] % w.dim[1], i / w.dim[0] / w.dim[1]};
			cr_assert_eq(tp_topology_builder_set_coords(b, 1, name, x), 0,
			             "%s", tp_topology_builder_errmsg(b));
		}
	cr_assert_eq(tp_topology_build(b, &w.t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	w.c = tp_test_cluster(w.t);
	return w;
}

/* Random jobs (whole chips and single devices), down and cordoned devices. */
static void fill_state(struct world *w)
{
	uint32_t n = tp_topology_device_count(w->t), njob = 0;
	unsigned busy = rnd(80);
	char job[32];
	for (uint32_t d = 0; d < n; d++) {
		unsigned r = rnd(100);
		if (r < busy) {
			snprintf(job, sizeof job, "j%u", njob++);
			cr_assert_eq(tp_cluster_assign(w->c, job, &d, 1, NULL), 0);
		} else if (r < busy + 3) {
			cr_assert_eq(tp_cluster_set_down(w->c, &d, 1, 1), 0);
		} else if (r < busy + 6) {
			cr_assert_eq(tp_cluster_set_cordoned(w->c, &d, 1, 1), 0);
		}
	}
}

/* The oracle's view of one pod: children per cell, usable and free marks. */
struct pod {
	uint32_t child[64];
	unsigned char usable[64], freec[64];
};

static bool dev_usable(const tp_cluster *c, uint32_t d, bool ideal)
{
	if (!ideal)
		return tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE;
	return !tp_cluster_device_down(c, d) && !tp_cluster_device_cordoned(c, d);
}

static void read_pod(const struct world *w, uint32_t pod, bool ideal, struct pod *o)
{
	for (uint32_t i = 0; i < w->ncell; i++) {
		unsigned x[3] = {i % w->dim[0], i / w->dim[0] % w->dim[1], i / w->dim[0] / w->dim[1]};
		uint32_t ch = TP_NONE;
		int rc = tp_topology_grid_child(w->t, 0, pod, x, &ch);
		cr_assert(rc == 0 || rc == TP_ENOTFOUND);
		o->child[i] = rc ? TP_NONE : ch;
		o->usable[i] = o->freec[i] = 0;
		if (rc)
			continue;
		uint32_t f, n;
		cr_assert_eq(tp_topology_domain_devices(w->t, 1, ch, &f, &n), 0);
		bool use = true, fr = true;
		for (uint32_t d = f; d < f + n; d++) {
			use = use && dev_usable(w->c, d, ideal);
			fr = fr && tp_cluster_device_state(w->c, d, NULL) == TP_DEVICE_FREE;
		}
		o->usable[i] = use;
		o->freec[i] = fr;
	}
}

static uint32_t cell_of(const struct world *w, const unsigned *x)
{
	return x[0] + w->dim[0] * (x[1] + w->dim[1] * x[2]);
}

/* Connected sets of marked cells (neighbours along the axes, across wrapping seams). */
static int components(const struct world *w, const unsigned char *mark)
{
	unsigned char seen[64] = {0};
	uint32_t stack[64];
	int n = 0;
	for (uint32_t s = 0; s < w->ncell; s++) {
		if (!mark[s] || seen[s])
			continue;
		n++;
		uint32_t top = 0;
		stack[top++] = s;
		seen[s] = 1;
		while (top) {
			uint32_t c = stack[--top];
			unsigned x[3] = {c % w->dim[0], c / w->dim[0] % w->dim[1], c / w->dim[0] / w->dim[1]};
			for (unsigned a = 0; a < w->nd; a++)
				for (int dir = -1; dir <= 1; dir += 2) {
					unsigned y[3] = {x[0], x[1], x[2]};
					long v = (long)x[a] + dir;
					if (v < 0 || v >= (long)w->dim[a]) {
						if (!(w->wrap >> a & 1u))
							continue;
						v = (v + (long)w->dim[a]) % (long)w->dim[a];
					}
					y[a] = (unsigned)v;
					uint32_t nc = cell_of(w, y);
					if (mark[nc] && !seen[nc]) {
						seen[nc] = 1;
						stack[top++] = nc;
					}
				}
		}
	}
	return n;
}

struct okey {
	int delta;
	uint32_t tight, dom, cell;
	unsigned rot;
};

static bool better(const struct okey *a, const struct okey *b)
{
	if (a->delta != b->delta)
		return a->delta < b->delta;
	if (a->tight != b->tight)
		return a->tight < b->tight;
	if (a->dom != b->dom)
		return a->dom < b->dom;
	if (a->cell != b->cell)
		return a->cell < b->cell;
	return a->rot < b->rot;
}

struct oracle {
	bool found;
	struct okey best;
	uint32_t children[64];
	uint32_t nchildren;
};

/* The cells of a box in snake order into out; false when one is not usable. */
static bool box_cells(const struct world *w, const struct pod *o, const unsigned *at,
                      const unsigned *e, uint32_t *out)
{
	uint32_t n = 0;
	for (unsigned z = 0; z < e[2]; z++)
		for (unsigned yy = 0; yy < e[1]; yy++) {
			unsigned y = z % 2 ? e[1] - 1 - yy : yy;
			bool back = (z * e[1] + yy) % 2;
			for (unsigned xx = 0; xx < e[0]; xx++) {
				unsigned x = back ? e[0] - 1 - xx : xx;
				unsigned c[3] = {(at[0] + x) % w->dim[0], (at[1] + y) % w->dim[1],
				                 (at[2] + z) % w->dim[2]};
				uint32_t cell = cell_of(w, c);
				if (!o->usable[cell])
					return false;
				out[n++] = cell;
			}
		}
	return true;
}

static unsigned anchors(const struct world *w, unsigned a, unsigned e, bool wrap)
{
	if (e > w->dim[a])
		return 0;
	if (e == w->dim[a])
		return 1;
	return wrap && (w->wrap >> a & 1u) ? w->dim[a] : w->dim[a] - e + 1;
}

static void oracle_run(const struct world *w, const unsigned *ext, bool wrap, bool rotate,
                       bool ideal, struct oracle *or)
{
	static const unsigned perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
	                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	unsigned rots[6][3], nrot = 0;
	for (unsigned i = 0; i < (rotate ? 6u : 1u); i++) {
		unsigned x[3] = {ext[perm[i][0]], ext[perm[i][1]], ext[perm[i][2]]};
		bool dup = false;
		for (unsigned j = 0; j < nrot; j++)
			dup = dup || memcmp(rots[j], x, sizeof x) == 0;
		if (!dup)
			memcpy(rots[nrot++], x, sizeof x);
	}
	or->found = false;
	uint32_t vol = ext[0] * ext[1] * ext[2];
	for (uint32_t pod = 0; pod < w->pods; pod++) {
		struct pod o;
		read_pod(w, pod, ideal, &o);
		int before = components(w, o.freec);
		uint32_t tight = 0;
		for (uint32_t i = 0; i < w->ncell; i++)
			tight += o.freec[i];
		for (unsigned r = 0; r < nrot; r++) {
			const unsigned *e = rots[r];
			unsigned na[3], at[3];
			for (unsigned a = 0; a < 3; a++)
				na[a] = anchors(w, a, e[a], wrap);
			for (at[2] = 0; at[2] < na[2]; at[2]++)
				for (at[1] = 0; at[1] < na[1]; at[1]++)
					for (at[0] = 0; at[0] < na[0]; at[0]++) {
						uint32_t cells[64];
						if (!box_cells(w, &o, at, e, cells))
							continue;
						unsigned char left[64];
						memcpy(left, o.freec, sizeof left);
						for (uint32_t i = 0; i < vol; i++)
							left[cells[i]] = 0;
						struct okey k = {components(w, left) - before, tight, pod,
						                 cell_of(w, at), r};
						if (or->found && !better(&k, &or->best))
							continue;
						or->found = true;
						or->best = k;
						or->nchildren = vol;
						for (uint32_t i = 0; i < vol; i++)
							or->children[i] = o.child[cells[i]];
					}
		}
	}
}

/* Wholly usable children over every pod (the busy / fragmented split). */
static uint32_t usable_total(const struct world *w)
{
	uint32_t n = 0;
	for (uint32_t pod = 0; pod < w->pods; pod++) {
		struct pod o;
		read_pod(w, pod, false, &o);
		for (uint32_t i = 0; i < w->ncell; i++)
			n += o.usable[i];
	}
	return n;
}

struct stats {
	unsigned placed, busy, fragmented, infeasible, exact_fits, splits;
};

static void check_shape(const struct world *w, const unsigned *ext, bool wrap, bool rotate,
                        uint64_t seed, struct stats *st)
{
	tp_request r = TP_REQUEST_INIT;
	r.box_level = "pod";
	memcpy(r.box, ext, sizeof r.box);
	r.box_wrap = wrap;
	r.box_rotate = rotate;
	uint32_t vol = ext[0] * ext[1] * ext[2];
	r.count = vol * w->per;
	struct oracle or;
	oracle_run(w, ext, wrap, rotate, false, &or);
	tp_placement *pl = NULL;
	int rc = tp_place(w->c, &r, &pl);
#define what "seed %llu box %ux%ux%u wrap %d rotate %d grid %ux%ux%u wrap 0x%x: %s"
#define CTX (unsigned long long)seed, ext[0], ext[1], ext[2], wrap, rotate, w->dim[0], \
	w->dim[1], w->dim[2], w->wrap, tp_placement_errmsg(pl)
	if (or.found) {
		cr_assert_eq(rc, 0, what, CTX);
		size_t n = 0;
		const uint32_t *devs = tp_placement_devices(pl, &n);
		cr_assert_eq(n, (size_t)r.count, what, CTX);
		for (uint32_t i = 0; i < or.nchildren; i++) {
			uint32_t f, k;
			cr_assert_eq(tp_topology_domain_devices(w->t, 1, or.children[i], &f, &k), 0);
			for (uint32_t j = 0; j < k; j++)
				cr_assert_eq(devs[i * w->per + j], f + j, "rank %u: " "%s", i * w->per + j,
				             tp_placement_errmsg(pl));
		}
		st->placed++;
		st->exact_fits += or.best.delta < 0;
		st->splits += or.best.delta > 0;
	} else {
		struct oracle ideal;
		oracle_run(w, ext, wrap, rotate, true, &ideal);
		int want = !ideal.found ? TP_EINFEASIBLE
		           : usable_total(w) < vol ? TP_EBUSY : TP_EFRAGMENTED;
		cr_assert_eq(rc, want, what, CTX);
		cr_assert(strstr(tp_placement_errmsg(pl), "request.box"), what, CTX);
		st->infeasible += want == TP_EINFEASIBLE;
		st->busy += want == TP_EBUSY;
		st->fragmented += want == TP_EFRAGMENTED;
	}
#undef CTX
#undef what
	tp_placement_destroy(pl);
}

/* tp_frag_report's grid figures against a brute force: the largest box of wholly free chips
 * over every shape and anchor (wrapping where the grid does), and the free fragments. */
static void check_frag(const struct world *w, uint64_t seed)
{
	uint32_t best = 0, pieces = 0;
	for (uint32_t pod = 0; pod < w->pods; pod++) {
		struct pod o;
		read_pod(w, pod, false, &o);
		memcpy(o.usable, o.freec, sizeof o.usable);
		pieces += (uint32_t)components(w, o.freec);
		unsigned e[3], at[3], na[3];
		for (e[2] = 1; e[2] <= w->dim[2]; e[2]++)
			for (e[1] = 1; e[1] <= w->dim[1]; e[1]++)
				for (e[0] = 1; e[0] <= w->dim[0]; e[0]++) {
					uint32_t vol = e[0] * e[1] * e[2], cells[64];
					for (unsigned a = 0; a < 3; a++)
						na[a] = anchors(w, a, e[a], true);
					for (at[2] = 0; at[2] < na[2] && vol > best; at[2]++)
						for (at[1] = 0; at[1] < na[1] && vol > best; at[1]++)
							for (at[0] = 0; at[0] < na[0] && vol > best; at[0]++)
								if (box_cells(w, &o, at, e, cells))
									best = vol;
				}
	}
	tp_frag *f = NULL;
	cr_assert_eq(tp_frag_report(w->c, NULL, 0, &f), 0);
	unsigned ext[3];
	uint32_t got = tp_frag_largest_box(f, 0, ext);
	cr_assert_eq(got, best, "seed %llu: largest free box %u, brute force %u",
	             (unsigned long long)seed, got, best);
	cr_assert_eq(ext[0] * ext[1] * ext[2], got);
	cr_assert_eq(tp_frag_grid_fragment_count(f, 0), pieces, "seed %llu: fragments",
	             (unsigned long long)seed);
	cr_assert_eq(tp_frag_largest_box(f, 1, NULL), 0);
	tp_frag_destroy(f);
}

static void run_case(uint64_t seed, struct stats *st)
{
	rng = seed * 0x9E3779B97F4A7C15ull + 1;
	struct world w = make_world();
	fill_state(&w);
	unsigned ext[3];
	for (ext[2] = 1; ext[2] <= w.dim[2]; ext[2]++)
		for (ext[1] = 1; ext[1] <= w.dim[1]; ext[1]++)
			for (ext[0] = 1; ext[0] <= w.dim[0]; ext[0]++)
				for (unsigned f = 0; f < 4; f++)
					check_shape(&w, ext, f & 1, f >> 1, seed, st);
	check_frag(&w, seed);
	tp_cluster_destroy(w.c);
	tp_topology_destroy(w.t);
}

Test(grid_oracle, every_box_shape_matches_the_brute_force_oracle, .timeout = 1500)
{
	unsigned ncases = 60;
	const char *n = getenv("GO_CASES"), *one = getenv("GO_SEED");
	if (n)
		ncases = (unsigned)strtoul(n, NULL, 10);
	uint64_t first = one ? strtoull(one, NULL, 10) : 1, last = one ? first : ncases;
	struct stats st = {0};
	for (uint64_t s = first; s <= last; s++)
		run_case(s, &st);
	fprintf(stderr, "grid oracle: %llu cases: %u placed (%u exact fits, %u splits), %u busy, "
	        "%u fragmented, %u infeasible\n", (unsigned long long)(last - first + 1), st.placed,
	        st.exact_fits, st.splits, st.busy, st.fragmented, st.infeasible);
	cr_assert_gt(st.placed, 0);
	cr_assert_gt(st.fragmented, 0);
	TP_ASSERT_NO_LEAKS();
}
