/* SPDX-License-Identifier: MIT */
/*
 * The free-cell index of grid levels (src/cluster_grid.c, issue #18): after random jobs,
 * releases, down, cordoned and spare chips, inside savepoints that are rolled back or kept, the
 * index of every pod agrees with a recount from the public device states (and with
 * tp_cluster_check, and in a copy). Box requests on rows longer than one 64-bit word (a ring of
 * 150, a 70x3 torus) agree with a brute-force ranking. On a 16x16x16 torus filled as
 * `tp-bench place --torus` fills it, ordinary box requests read far fewer cells than the torus
 * has. A failed allocation of the index (tp_cluster_create, tp_cluster_copy) leaks nothing.
 */
#include <stdio.h>

#include "cluster_impl.h"
#include "place_impl.h"
#include "testutil.h"

static void setup(void) { tp_test_alloc_reset(); }
TestSuite(grid_index, .init = setup);

static uint64_t rng = 88172645463325252ull;
static unsigned rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

/* A grid of `pods` pods with `per` devices per chip, cells 1 in 9 left empty when holes. */
static tp_topology *make_grid(const unsigned *dim, unsigned nd, unsigned wrap, unsigned pods,
                              unsigned per, bool holes)
{
	static const char *const L[] = {"pod", "chip"};
	tp_topology_builder *b = NULL;
	cr_assert_eq(tp_topology_builder_create(&b, L, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_topology_builder_set_grid(b, 0, dim, nd, wrap), 0);
	uint32_t ncell = dim[0] * (nd > 1 ? dim[1] : 1) * (nd > 2 ? dim[2] : 1);
	unsigned d1 = nd > 1 ? dim[1] : 1;
	char name[64], pod[16];
	for (unsigned p = 0; p < pods; p++)
		for (uint32_t i = 0; i < ncell; i++) {
			if (holes && i > 0 && rnd(9) == 0)
				continue;
			snprintf(pod, sizeof pod, "p%u", p);
			snprintf(name, sizeof name, "p%u-c%u", p, i);
			const char *path[1] = {pod};
			cr_assert_eq(tp_topology_builder_add_node(b, name, path, per, NULL), 0);
			unsigned x[3] = {i % dim[0], i / dim[0] % d1, i / dim[0] / d1};
			cr_assert_eq(tp_topology_builder_set_coords(b, 1, name, x), 0, "%s",
			             tp_topology_builder_errmsg(b));
		}
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_build(b, &t), 0, "%s", tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return t;
}

/* Recount every pod's free cells from the device states and compare with the index. */
static void assert_index(const tp_cluster *c)
{
	const tp_topology *t = tp_cluster_topology(c);
	unsigned dim[3], nd, wrap;
	cr_assert_eq(tp_topology_grid(t, 0, dim, &nd, &wrap), 0);
	const struct tp_cl_grid *x = c->grid[0];
	cr_assert_not_null(x);
	uint32_t npods = tp_topology_domain_count(t, 0);
	for (uint32_t p = 0; p < npods; p++) {
		uint32_t nfree = 0;
		for (unsigned z = 0; z < dim[2]; z++) {
			uint32_t plane = 0;
			for (unsigned y = 0; y < dim[1]; y++)
				for (unsigned xx = 0; xx < dim[0]; xx++) {
					unsigned at[3] = {xx, y, z};
					uint32_t ch, f, n;
					bool fr = tp_topology_grid_child(t, 0, p, at, &ch) == 0;
					if (fr) {
						cr_assert_eq(tp_topology_domain_devices(t, 1, ch, &f, &n), 0);
						for (uint32_t d = f; d < f + n; d++)
							fr = fr && tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE;
					}
					size_t row = (size_t)p * x->rows + y + (size_t)dim[1] * z;
					bool bit = x->bits[row * x->words + xx / 64] >> (xx % 64) & 1u;
					cr_assert_eq(bit, fr, "pod %u cell %u,%u,%u: index %d, recount %d", p, xx,
					             y, z, bit, fr);
					plane += fr;
				}
			cr_assert_eq(x->plane[(size_t)p * dim[2] + z], plane, "pod %u plane %u", p, z);
			nfree += plane;
		}
		cr_assert_eq(x->nfree[p], nfree, "pod %u: %u free cells, recounted %u", p,
		             x->nfree[p], nfree);
	}
	char buf[256];
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
}

/* One random change: a job of random devices (some chips whole, some in part), a release, a
 * device down or up, cordoned or not, or the spare policy. */
static void random_op(tp_cluster *c, long *next)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t n = tp_topology_device_count(t), dev = rnd(n);
	char id[32];
	switch (rnd(6)) {
	case 0:
	case 1: {
		uint32_t devs[8], k = 0, first = dev;
		for (uint32_t i = 0; i < 1 + rnd(8) && first + i < n; i++)
			if (tp_cluster_device_state(c, first + i, NULL) == TP_DEVICE_FREE)
				devs[k++] = first + i;
		snprintf(id, sizeof id, "j%ld", (*next)++);
		if (k)
			cr_assert_eq(tp_cluster_assign(c, id, devs, k, NULL), 0, "%s",
			             tp_cluster_errmsg(c));
		break;
	}
	case 2:
		if (tp_cluster_job_count(c)) {
			char keep[32];
			snprintf(keep, sizeof keep, "%s",
			         tp_cluster_job_at(c, rnd((unsigned)tp_cluster_job_count(c))));
			cr_assert_eq(tp_cluster_release(c, keep), 0);
		}
		break;
	case 3:
		cr_assert_eq(tp_cluster_set_down(c, &dev, 1, (int)rnd(2)), 0);
		break;
	case 4:
		cr_assert_eq(tp_cluster_set_cordoned(c, &dev, 1, (int)rnd(2)), 0);
		break;
	default:
		cr_assert_eq(tp_cluster_set_spares(c, 0, rnd(3), 0), 0, "%s", tp_cluster_errmsg(c));
		break;
	}
}

Test(grid_index, agrees_with_a_recount_after_random_operations_and_rollbacks)
{
	static const unsigned shapes[][4] = {
		{16, 1, 1, 1}, {5, 3, 1, 2}, {4, 4, 4, 3}, {70, 3, 1, 2}, {3, 2, 5, 3},
	};
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
		const unsigned *dim = shapes[s];
		unsigned nd = dim[3];
		tp_topology *t = make_grid(dim, nd, rnd(1u << nd), 1 + rnd(2), 1 + rnd(2), true);
		tp_cluster *c = tp_test_cluster(t);
		long next = 0;
		for (int round = 0; round < 40; round++) {
			size_t sp;
			cr_assert_eq(tp_cluster_savepoint(c, &sp), 0);
			uint64_t before = tp_cluster_fingerprint(c);
			for (int i = 0; i < 12; i++)
				random_op(c, &next);
			assert_index(c);
			if (rnd(2)) {
				cr_assert_eq(tp_cluster_rollback(c, sp), 0, "%s", tp_cluster_errmsg(c));
				cr_assert_eq(tp_cluster_fingerprint(c), before);
			} else {
				cr_assert_eq(tp_cluster_savepoint_discard(c, sp), 0);
			}
			assert_index(c);
		}
		tp_cluster *d = NULL;
		cr_assert_eq(tp_cluster_copy(&d, c, NULL), 0);
		assert_index(d);
		for (int i = 0; i < 20; i++)
			random_op(d, &next);
		assert_index(d);
		assert_index(c); /* the copy's changes stay in the copy */
		tp_cluster_destroy(d);
		tp_cluster_destroy(c);
		tp_topology_destroy(t);
	}
	TP_ASSERT_NO_LEAKS();
}

Test(grid_index, a_stale_bit_is_caught_by_the_check)
{
	unsigned dim[3] = {4, 4, 1};
	tp_topology *t = make_grid(dim, 2, 0x3, 1, 1, false);
	tp_cluster *c = tp_test_cluster(t);
	char buf[256];
	c->grid[0]->bits[0] ^= 2u; /* cell (1, 0, 0) */
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), TP_ECORRUPT);
	cr_assert(strstr(buf, "cell 1 not free in the free-cell index, recounted free"), "%s", buf);
	c->grid[0]->bits[0] ^= 2u;
	c->grid[0]->plane[0]++;
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), TP_ECORRUPT);
	cr_assert(strstr(buf, "plane z=0 has 17 free cells in the index, recounted 16"), "%s", buf);
	c->grid[0]->plane[0]--;
	c->grid[0]->nfree[0]--;
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), TP_ECORRUPT);
	cr_assert(strstr(buf, "15 free cells in the index, recounted 16"), "%s", buf);
	c->grid[0]->nfree[0]++;
	cr_assert_eq(tp_cluster_check(c, buf, sizeof buf), 0, "%s", buf);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

/* ---- wide rows against a brute-force ranking ------------------------------------------------ */

struct wide {
	unsigned dim[3], wrap;
	uint32_t ncell;
	unsigned char freec[512];
};

static uint32_t wcell(const struct wide *w, const unsigned *x)
{
	return x[0] + w->dim[0] * (x[1] + w->dim[1] * x[2]);
}

/* Connected sets of free cells, those in `taken` left out. */
static int wcomponents(const struct wide *w, const unsigned char *taken)
{
	unsigned char seen[512] = {0};
	uint32_t stack[512];
	int n = 0;
	for (uint32_t s = 0; s < w->ncell; s++) {
		if (!w->freec[s] || taken[s] || seen[s])
			continue;
		n++;
		uint32_t top = 0;
		stack[top++] = s;
		seen[s] = 1;
		while (top) {
			uint32_t c = stack[--top];
			unsigned x[3] = {c % w->dim[0], c / w->dim[0] % w->dim[1], c / w->dim[0] / w->dim[1]};
			for (unsigned i = 0; i < 3; i++)
				for (int dir = -1; dir <= 1; dir += 2) {
					unsigned y[3] = {x[0], x[1], x[2]};
					long v = (long)x[i] + dir;
					if (v < 0 || v >= (long)w->dim[i]) {
						if (!(w->wrap >> i & 1u) || w->dim[i] == 1)
							continue;
						v = v < 0 ? (long)w->dim[i] - 1 : 0;
					}
					y[i] = (unsigned)v;
					uint32_t nb = wcell(w, y);
					if (w->freec[nb] && !taken[nb] && !seen[nb]) {
						seen[nb] = 1;
						stack[top++] = nb;
					}
				}
		}
	}
	return n;
}

/* The best box (fewest fragments after, then anchor cell, then order of extents) as its
 * cells into best[]; false when none. */
static bool wide_oracle(const struct wide *w, const unsigned *ext, bool wrap, bool rotate,
                        unsigned char *best)
{
	static const unsigned perm[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
	                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
	unsigned rots[6][3], nrot = 0;
	for (unsigned i = 0; i < (rotate ? 6u : 1u); i++) {
		unsigned e[3] = {ext[perm[i][0]], ext[perm[i][1]], ext[perm[i][2]]};
		bool dup = false;
		for (unsigned j = 0; j < nrot; j++)
			dup = dup || memcmp(rots[j], e, sizeof e) == 0;
		if (!dup)
			memcpy(rots[nrot++], e, sizeof e);
	}
	int before = wcomponents(w, (unsigned char[512]){0});
	bool have = false;
	int bdelta = 0;
	uint32_t bcell = 0;
	unsigned brot = 0;
	for (unsigned r = 0; r < nrot; r++) {
		unsigned na[3];
		for (unsigned i = 0; i < 3; i++) {
			unsigned e = rots[r][i], d = w->dim[i];
			na[i] = e > d ? 0 : e == d ? 1 : wrap && (w->wrap >> i & 1u) ? d : d - e + 1;
		}
		unsigned a[3];
		for (a[2] = 0; a[2] < na[2]; a[2]++)
			for (a[1] = 0; a[1] < na[1]; a[1]++)
				for (a[0] = 0; a[0] < na[0]; a[0]++) {
					unsigned char taken[512] = {0};
					bool ok = true;
					unsigned o[3];
					for (o[2] = 0; o[2] < rots[r][2] && ok; o[2]++)
						for (o[1] = 0; o[1] < rots[r][1] && ok; o[1]++)
							for (o[0] = 0; o[0] < rots[r][0] && ok; o[0]++) {
								unsigned x[3];
								for (unsigned i = 0; i < 3; i++)
									x[i] = (a[i] + o[i]) % w->dim[i];
								uint32_t c = wcell(w, x);
								ok = w->freec[c];
								taken[c] = 1;
							}
					if (!ok)
						continue;
					int delta = wcomponents(w, taken) - before;
					uint32_t cell = wcell(w, a);
					if (have && (delta > bdelta || (delta == bdelta && (cell > bcell ||
					             (cell == bcell && r > brot)))))
						continue;
					have = true;
					bdelta = delta, bcell = cell, brot = r;
					memcpy(best, taken, w->ncell);
				}
	}
	return have;
}

Test(grid_index, rows_longer_than_a_word_match_a_brute_force_ranking, .timeout = 300)
{
	static const unsigned shapes[][4] = {{150, 1, 1, 1}, {70, 3, 1, 2}, {65, 2, 2, 3}};
	static const unsigned boxes[][3] = {{1, 1, 1}, {3, 1, 1}, {2, 2, 1}, {64, 1, 1},
	                                    {65, 1, 1}, {3, 2, 2}, {140, 1, 1}, {66, 2, 1}};
	long checked = 0;
	for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
		for (unsigned wrap = 0; wrap < (1u << shapes[s][3]); wrap += 1 + (shapes[s][3] > 1)) {
			struct wide w = {{shapes[s][0], shapes[s][1], shapes[s][2]}, wrap, 0, {0}};
			w.ncell = w.dim[0] * w.dim[1] * w.dim[2];
			tp_topology *t = make_grid(w.dim, shapes[s][3], wrap, 1, 1, false);
			uint32_t dev_of[512], cell_of[512];
			for (uint32_t i = 0; i < w.ncell; i++) {
				unsigned x[3] = {i % w.dim[0], i / w.dim[0] % w.dim[1], i / w.dim[0] / w.dim[1]};
				uint32_t ch, f, n;
				cr_assert_eq(tp_topology_grid_child(t, 0, 0, x, &ch), 0);
				cr_assert_eq(tp_topology_domain_devices(t, 1, ch, &f, &n), 0);
				dev_of[i] = f;
				cell_of[f] = i;
			}
			for (int round = 0; round < 3; round++) {
				tp_cluster *c = tp_test_cluster(t);
				unsigned busy = rnd(50);
				char id[32];
				for (uint32_t d = 0; d < w.ncell; d++) {
					w.freec[d] = rnd(100) >= busy;
					snprintf(id, sizeof id, "j%u", d);
					if (!w.freec[d])
						cr_assert_eq(tp_cluster_assign(c, id, &dev_of[d], 1, NULL), 0);
				}
				for (size_t k = 0; k < sizeof boxes / sizeof boxes[0]; k++)
					for (int opt = 0; opt < 4; opt++) {
						tp_request r = TP_REQUEST_INIT;
						r.box_level = "pod";
						memcpy(r.box, boxes[k], sizeof r.box);
						r.box_wrap = opt & 1;
						r.box_rotate = opt >> 1;
						r.count = boxes[k][0] * boxes[k][1] * boxes[k][2];
						unsigned char best[512];
						bool have = wide_oracle(&w, boxes[k], r.box_wrap, r.box_rotate, best);
						tp_placement *pl = NULL;
						int rc = tp_place(c, &r, &pl);
						cr_assert_eq(rc == 0, have, "grid %ux%ux%u wrap %u box %ux%ux%u opt %d: "
						             "rc %d (%s), oracle %d", w.dim[0], w.dim[1], w.dim[2], wrap,
						             boxes[k][0], boxes[k][1], boxes[k][2], opt, rc,
						             tp_placement_errmsg(pl), have);
						if (have) {
							size_t n;
							const uint32_t *devs = tp_placement_devices(pl, &n);
							cr_assert_eq(n, r.count);
							for (size_t i = 0; i < n; i++)
								cr_assert(best[cell_of[devs[i]]], "grid %ux%ux%u wrap %u box %ux%ux%u "
								          "opt %d: device %u is not in the oracle's box",
								          w.dim[0], w.dim[1], w.dim[2], wrap, boxes[k][0],
								          boxes[k][1], boxes[k][2], opt, devs[i]);
							checked++;
						}
						tp_placement_destroy(pl);
					}
				tp_cluster_destroy(c);
			}
			tp_topology_destroy(t);
		}
	cr_assert_gt(checked, 100);
	TP_ASSERT_NO_LEAKS();
}

/* ---- reads per request ----------------------------------------------------------------------- */

static tp_request torus_box(const unsigned *e, int rotate, int wrap, const char *id)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.box_level = "pod";
	memcpy(r.box, e, sizeof r.box);
	r.box_rotate = rotate;
	r.box_wrap = wrap;
	r.count = e[0] * e[1] * e[2];
	return r;
}

Test(grid_index, box_requests_on_a_4096_chip_torus_read_a_fraction_of_its_cells,
     .timeout = 300)
{
	static const unsigned mix[][5] = {{1, 1, 1, 0, 0}, {2, 2, 1, 1, 1}, {2, 2, 2, 0, 1},
	                                  {4, 4, 1, 1, 1}, {2, 2, 4, 1, 1}, {4, 4, 4, 0, 1}};
	unsigned dims[3] = {16, 16, 16};
	tp_topology *t = NULL;
	cr_assert_eq(tp_topology_generate_torus(&t, 1, dims, 3, 0x7, &tp_test_allocator), 0);
	tp_cluster *c = tp_test_cluster(t);
	long next = 0, requests = 0;
	uint64_t words = 0, probes = 0, worst = 0;
	char id[32];
	for (int round = 0; round < 400; round++) {
		const unsigned *m = mix[rnd(6)];
		snprintf(id, sizeof id, "j%ld", next++);
		tp_request r = torus_box(m, (int)m[3], (int)m[4], id);
		tp_placement *pl = NULL;
		int rc = tp_place(c, &r, &pl);
		words += pl->grid_words;
		probes += pl->grid_probes;
		worst = pl->grid_probes > worst ? pl->grid_probes : worst;
		requests++;
		if (rc == 0)
			cr_assert_eq(tp_commit(c, pl, NULL), 0, "%s", tp_cluster_errmsg(c));
		tp_placement_destroy(pl);
		/* held at about 70%: release a random job past it */
		while (tp_cluster_free_total_count(c) < 4096 * 3 / 10) {
			char keep[32];
			snprintf(keep, sizeof keep, "%s",
			         tp_cluster_job_at(c, rnd((unsigned)tp_cluster_job_count(c))));
			cr_assert_eq(tp_cluster_release(c, keep), 0);
		}
	}
	cr_log_info("16x16x16 torus: %ld box requests; per request %.1f index words (a word is "
	            "one row of 16 cells) and %.1f single cells read, %llu cells at most",
	            requests, (double)words / (double)requests, (double)probes / (double)requests,
	            (unsigned long long)worst);
	/* marking every cell, as the search did before the index, reads 4096 per request; the
	 * index's rows are 256 per rotation, each read at most three times */
	cr_assert_lt(probes / (uint64_t)requests, 4096 / 4, "%llu cells read per request",
	             (unsigned long long)(probes / (uint64_t)requests));
	cr_assert_lt(words / (uint64_t)requests, 3 * 256 * 3, "%llu index words per request",
	             (unsigned long long)(words / (uint64_t)requests));
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}

Test(grid_index, a_failed_allocation_of_the_index_leaks_nothing)
{
	unsigned dim[3] = {70, 3, 2};
	tp_topology *t = make_grid(dim, 3, 0x5, 2, 1, true);
	long live = tp_test_alloc_state.live;
	tp_cluster *c = NULL;
	int rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM; n++) {
		cr_assert(n < 10000, "no end to the allocations");
		tp_test_alloc_fail_at(n);
		rc = tp_cluster_create(&c, t, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			cr_assert_null(c);
			cr_assert_eq(tp_test_alloc_state.live, live, "failure %ld leaked", n);
		}
	}
	cr_assert_eq(rc, 0);
	long next = 0;
	for (int i = 0; i < 30; i++)
		random_op(c, &next);
	live = tp_test_alloc_state.live;
	tp_cluster *d = NULL;
	rc = TP_ENOMEM;
	for (long n = 0; rc == TP_ENOMEM; n++) {
		cr_assert(n < 10000, "no end to the allocations");
		tp_test_alloc_fail_at(n);
		rc = tp_cluster_copy(&d, c, &tp_test_allocator);
		tp_test_alloc_fail_at(-1);
		if (rc == TP_ENOMEM) {
			cr_assert_null(d);
			cr_assert_eq(tp_test_alloc_state.live, live, "failure %ld leaked", n);
		}
	}
	cr_assert_eq(rc, 0);
	assert_index(d);
	tp_cluster_destroy(d);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	TP_ASSERT_NO_LEAKS();
}
