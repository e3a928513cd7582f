/* SPDX-License-Identifier: MIT */
/*
 * Rule 3 refined by the expected end (tp_request.expected_end_s, src/place_choice.c): of the
 * TP_PL_END_TIES + 1 tightest nodes that hold it (fewest free devices first, then the lowest
 * index), a request one node must hold takes the node whose running jobs end last at or after
 * its own expected end, nearest first; else the node that ends last; nodes whose jobs give no
 * end (a wholly free node among them) come after both; the walk's order (best fit, then the
 * index) breaks what is left. In the tree solver (a node filter) the end breaks ties among
 * nodes as tight as each other only. Checked by hand on small HGX fleets, at the bound on a
 * fleet of more nodes than it, and against a brute-force oracle on random ones; plus the
 * request's and the shape's validation, versions and the fingerprint.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "testutil.h"

/* Hold devices [from, from + n) as job id, its shape expected to end at `end` (0: no end;
 * negative: no shape at all). */
static void hold_end(tp_cluster *c, const char *id, uint32_t from, uint32_t n, double end)
{
	uint32_t d[64];
	cr_assert_leq(n, 64);
	for (uint32_t i = 0; i < n; i++)
		d[i] = from + i;
	tp_request shape = TP_REQUEST_INIT;
	shape.count = n;
	shape.expected_end_s = end;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = end >= 0 ? &shape : NULL;
	cr_assert_eq(tp_cluster_assign(c, id, d, n, &o), 0, "%s", tp_cluster_errmsg(c));
}

/* The node (8 devices each) a request of `count` devices one node must hold ends up on, and
 * the rule that decided. required NULL: no required level (on HGX a one-group request is
 * placed as one its node must hold). */
static unsigned place_end(tp_cluster *c, uint32_t count, const char *required, double end,
                          unsigned version, tp_rule *rule)
{
	tp_request r;
	cr_assert_eq(tp_request_init(&r, version), 0);
	r.count = count;
	r.group_size = count;
	r.required = required;
	r.expected_end_s = end; /* past a version-5 struct: the library must not read it */
	tp_placement *p = NULL;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", p ? tp_placement_errmsg(p) : "");
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, count);
	for (size_t i = 1; i < n; i++)
		cr_assert_eq(d[i] / 8, d[0] / 8, "device %u outside node %u", d[i], d[0] / 8);
	unsigned node = d[0] / 8;
	if (rule)
		*rule = tp_placement_decided_by(p);
	tp_placement_destroy(p);
	return node;
}

static void done(tp_topology *t, tp_cluster *c)
{
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

/* An empty HGX fleet of `units` x `per` 8-GPU nodes (node n holds devices 8n .. 8n + 7). */
static void hgx_fleet(unsigned units, unsigned per, tp_topology **t, tp_cluster **c)
{
	cr_assert_eq(tp_topology_generate_hgx(t, units, per, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(c, *t, &tp_test_allocator), 0);
}

/* Two HGX units of two 8-GPU nodes: nodes 0, 1, 2 with 4 GPUs held, their jobs expected to end
 * at 100, 300 and 200; node 3 empty. */
static void three_ends(tp_topology **t, tp_cluster **c)
{
	hgx_fleet(2, 2, t, c);
	hold_end(*c, "a", 0, 4, 100);
	hold_end(*c, "b", 8, 4, 300);
	hold_end(*c, "c", 16, 4, 200);
}

Test(end, ties_go_to_the_node_that_ends_nearest_at_or_after_the_job)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	three_ends(&t, &c);
	tp_rule rule;
	/* 150: nodes 1 (300) and 2 (200) last that long, node 2 the nearer */
	cr_assert_eq(place_end(c, 2, "node", 150, TP_REQUEST_VERSION, &rule), 2);
	cr_assert_eq(rule, TP_RULE_END);
	cr_assert_eq(place_end(c, 2, "node", 250, TP_REQUEST_VERSION, NULL), 1);
	cr_assert_eq(place_end(c, 2, "node", 50, TP_REQUEST_VERSION, NULL), 0);
	cr_assert_eq(place_end(c, 2, "node", 200, TP_REQUEST_VERSION, NULL), 2); /* ends with it */
	/* 400: none lasts that long; node 1 frees last, the job delays it least */
	cr_assert_eq(place_end(c, 2, "node", 400, TP_REQUEST_VERSION, NULL), 1);
	/* one group without a required level on HGX: the same choice */
	cr_assert_eq(place_end(c, 3, NULL, 150, TP_REQUEST_VERSION, NULL), 2);
	/* no end: the lowest index, as before */
	cr_assert_eq(place_end(c, 2, "node", 0, TP_REQUEST_VERSION, &rule), 0);
	cr_assert_eq(rule, TP_RULE_TIE);
	/* a version-5 caller has no such field: nothing past its struct is read */
	cr_assert_eq(place_end(c, 2, "node", 150, 5, NULL), 0);
	done(t, c);
}

/* With a node filter the whole-level walk is off and the tree solver chooses the node inside
 * the unit: the same end rule applies among the unit's nodes as tight as each other. */
Test(end, the_tree_search_breaks_node_ties_by_the_end_too)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	hgx_fleet(1, 4, &t, &c);
	hold_end(c, "a", 0, 4, 100);
	hold_end(c, "b", 8, 4, 300);
	hold_end(c, "c", 16, 4, 200);
	static const char *const nodes[] = {"su0-node0", "su0-node1", "su0-node2", "su0-node3"};
	static const double ends[] = {150, 250, 400, 0};
	static const unsigned want[] = {2, 1, 1, 0};
	static const tp_rule rules[] = {TP_RULE_END, TP_RULE_END, TP_RULE_END, TP_RULE_TIE};
	for (int i = 0; i < 4; i++) {
		tp_request r = TP_REQUEST_INIT;
		r.count = 2;
		r.required = "node";
		r.select_nodes = nodes;
		r.nselect_nodes = 4;
		r.expected_end_s = ends[i];
		tp_placement *p = NULL;
		cr_assert_eq(tp_place(c, &r, &p), 0, "%s", p ? tp_placement_errmsg(p) : "");
		size_t n;
		const uint32_t *d = tp_placement_devices(p, &n);
		cr_assert_eq(d[0] / 8, want[i], "end %g: node %u, not %u", ends[i], d[0] / 8, want[i]);
		cr_assert_eq(tp_placement_decided_by(p), rules[i], "end %g: rule %d", ends[i],
		             (int)tp_placement_decided_by(p));
		tp_placement_destroy(p);
	}
	done(t, c);
}

Test(end, the_end_comes_before_best_fit_and_best_fit_breaks_its_ties)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	hgx_fleet(2, 2, &t, &c);
	hold_end(c, "a", 0, 5, 1000); /* node 0: 3 free, ends far from 150 */
	hold_end(c, "b", 8, 4, 150);  /* node 1: 4 free, ends with the job */
	tp_rule rule;
	/* node 1 frees whole at 150 with the job; on node 0 it would wait for 1000 anyway, but
	 * node 1 is the nearer: the job keeps node 0's 3 GPUs for a job that runs as long */
	cr_assert_eq(place_end(c, 3, "node", 150, TP_REQUEST_VERSION, &rule), 1);
	cr_assert_eq(rule, TP_RULE_END);
	cr_assert_eq(place_end(c, 3, "node", 900, TP_REQUEST_VERSION, NULL), 0); /* 1000 nearer */
	cr_assert_eq(place_end(c, 4, "node", 150, TP_REQUEST_VERSION, NULL), 1); /* only 1 holds 4 */
	/* the same end on both: best fit decides (node 0, the tighter) */
	hold_end(c, "c", 13, 1, 1000); /* node 1: 3 free, ends at 1000 */
	hold_end(c, "d", 16, 6, 1000); /* node 2: 2 free, ends at 1000 */
	cr_assert_eq(place_end(c, 3, "node", 500, TP_REQUEST_VERSION, &rule), 0);
	cr_assert_eq(rule, TP_RULE_TIE); /* node 1 as tight, the lower index */
	cr_assert_eq(place_end(c, 2, "node", 500, TP_REQUEST_VERSION, &rule), 2);
	cr_assert_eq(rule, TP_RULE_FIT); /* nodes 0 and 1 as suited, looser */
	/* a wholly free node (node 3) comes after every busy one, whatever their ends */
	cr_assert_eq(place_end(c, 1, "node", 5000, TP_REQUEST_VERSION, NULL), 2);
	done(t, c);
}

/* The ends of at most TP_PL_END_TIES + 1 nodes are read (no cluster scan): of 66 nodes as
 * tight (1 GPU free each, their jobs ending at 100), the 65th in index order is compared and
 * the 66th is not. */
Test(end, at_most_the_bound_of_nodes_is_compared)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	hgx_fleet(11, 6, &t, &c);
	for (uint32_t n = 0; n < 66; n++) {
		char id[16];
		snprintf(id, sizeof id, "j%u", n);
		hold_end(c, id, 8 * n, 7, n == 64 || n == 65 ? 300 : 100);
	}
	tp_rule rule;
	/* ending at 250: nodes 64 and 65 last that long; node 64 is within the bound */
	cr_assert_eq(place_end(c, 1, "node", 250, TP_REQUEST_VERSION, &rule), 64);
	cr_assert_eq(rule, TP_RULE_END);
	cr_assert_eq(tp_cluster_release(c, "j64"), 0);
	hold_end(c, "k64", 8 * 64, 7, 100);
	/* now only node 65 lasts that long, beyond the bound: the first of the tightest */
	cr_assert_eq(place_end(c, 1, "node", 250, TP_REQUEST_VERSION, &rule), 0);
	cr_assert_eq(rule, TP_RULE_TIE);
	done(t, c);
}

Test(end, nodes_without_ends_come_last)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	hgx_fleet(2, 2, &t, &c);
	hold_end(c, "a", 0, 4, -1);  /* node 0: a job with no shape */
	hold_end(c, "b", 8, 4, 0);   /* node 1: a shape without an end */
	hold_end(c, "c", 16, 4, 100); /* node 2 */
	cr_assert_eq(place_end(c, 1, "node", 50, TP_REQUEST_VERSION, NULL), 2);
	cr_assert_eq(place_end(c, 1, "node", 500, TP_REQUEST_VERSION, NULL), 2);
	/* a node's end is the last of its jobs' that give one */
	hold_end(c, "d", 4, 2, 700); /* node 0 now 2 free, too tight for 3 */
	hold_end(c, "e", 12, 2, 700);
	hold_end(c, "f", 20, 2, 40);
	/* nodes 0, 1 and 2 have 2 free; ends: node 0 700 (job a gives none), node 1 700, node 2
	 * 100: at 90 node 2 is the nearest that lasts */
	cr_assert_eq(place_end(c, 2, "node", 90, TP_REQUEST_VERSION, NULL), 2);
	cr_assert_eq(place_end(c, 2, "node", 600, TP_REQUEST_VERSION, NULL), 0);
	done(t, c);
}

Test(end, bad_ends_are_refused_and_change_nothing)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	three_ends(&t, &c);
	uint64_t before = tp_cluster_fingerprint(c);
	static const double bad[] = {-1, -INFINITY, INFINITY, NAN};
	char want[96];
	for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
		tp_request r = TP_REQUEST_INIT;
		r.count = 1;
		r.expected_end_s = bad[i];
		tp_placement *p = NULL;
		snprintf(want, sizeof want, "request.expected_end_s %g is not a finite time >= 0 "
		         "(0: not known)", bad[i]);
		TP_ASSERT_ERR(tp_place(c, &r, &p), TP_EINVAL, tp_placement_errmsg(p), want);
		tp_placement_destroy(p);
		tp_request shape = TP_REQUEST_INIT;
		shape.count = 1;
		shape.expected_end_s = bad[i];
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.shape = &shape;
		uint32_t dev = 30;
		snprintf(want, sizeof want, "shape.expected_end_s %g is not a finite time >= 0 "
		         "(0: not known)", bad[i]);
		TP_ASSERT_ERR(tp_cluster_assign(c, "x", &dev, 1, &o), TP_EINVAL, tp_cluster_errmsg(c),
		              want);
		cr_assert_eq(tp_cluster_fingerprint(c), before);
	}
	done(t, c);
}

/* The fingerprint covers the ends (they change answers); a state without any keeps the
 * fingerprint it had before the field existed (a shape with end 0 hashes as one without). */
Test(end, the_fingerprint_covers_the_ends)
{
	tp_test_alloc_reset();
	uint64_t fp[3];
	static const double ends[3] = {0, 100, 200};
	for (int i = 0; i < 3; i++) {
		tp_topology *t;
		tp_cluster *c;
		hgx_fleet(1, 2, &t, &c);
		hold_end(c, "a", 0, 4, ends[i]);
		fp[i] = tp_cluster_fingerprint(c);
		done(t, c);
	}
	cr_assert_neq(fp[0], fp[1]);
	cr_assert_neq(fp[1], fp[2]);
}

/* ---- against a brute-force oracle --------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

/* The node the rule chooses, by reading every node: the nodes that hold k in best-fit order
 * (fewest free devices, then the index); with an end, of the first 65 of them (the fleets
 * here have at most 32 nodes) the least class and distance of the node's last job end, the
 * earliest in that order on a tie; without one, the first. */
static unsigned oracle_node(const unsigned *nfree, const double *last, unsigned nodes, unsigned k,
                            double end)
{
	unsigned best = UINT32_MAX, bcls = 3;
	double bdist = 0;
	for (unsigned f = k; f <= 8; f++) {
		for (unsigned n = 0; n < nodes; n++) {
			if (nfree[n] != f)
				continue;
			unsigned cls = end <= 0 ? 0 : last[n] <= 0 ? 2 : last[n] >= end ? 0 : 1;
			double dist = end <= 0 || last[n] <= 0 ? 0 : fabs(last[n] - end);
			if (cls < bcls || (cls == bcls && dist < bdist)) {
				best = n;
				bcls = cls;
				bdist = dist;
			}
		}
	}
	return best;
}

Test(end, the_choice_matches_the_oracle_on_random_hgx_fleets)
{
	tp_test_alloc_reset();
	unsigned compared = 0, by_end = 0;
	for (uint64_t seed = 1; seed <= 2000; seed++) {
		uint64_t s = seed;
		unsigned units = 1 + (unsigned)(rng_next(&s) % 4), per = 1 + (unsigned)(rng_next(&s) % 8);
		unsigned nodes = units * per;
		tp_topology *t;
		tp_cluster *c;
		hgx_fleet(units, per, &t, &c);
		unsigned nfree[32];
		double last[32];
		for (unsigned n = 0; n < nodes; n++) {
			unsigned used = 0;
			last[n] = 0;
			while (used < 8 && rng_next(&s) % 3) {
				unsigned take = 1 + (unsigned)(rng_next(&s) % (8 - used));
				/* ends from a few values, so that some tie; 0: none */
				double e = (double)(rng_next(&s) % 6) * 50;
				char id[32];
				snprintf(id, sizeof id, "j%u.%u", n, used);
				hold_end(c, id, 8 * n + used, take, e);
				last[n] = e > last[n] ? e : last[n];
				used += take;
			}
			nfree[n] = 8 - used;
		}
		unsigned k = 1 + (unsigned)(rng_next(&s) % 8);
		double end = (double)(rng_next(&s) % 7) * 40;
		unsigned want = oracle_node(nfree, last, nodes, k, end);
		tp_request r = TP_REQUEST_INIT;
		r.count = k;
		r.required = "node";
		r.expected_end_s = end;
		tp_placement *p = NULL;
		int rc = tp_place(c, &r, &p);
		if (want == UINT32_MAX) {
			cr_assert_neq(rc, 0, "seed %" PRIu64 ": placed where no node holds %u", seed, k);
		} else {
			cr_assert_eq(rc, 0, "seed %" PRIu64 ": %s", seed, tp_placement_errmsg(p));
			size_t n;
			const uint32_t *d = tp_placement_devices(p, &n);
			cr_assert_eq(d[0] / 8, want, "seed %" PRIu64 ": %u GPUs ending at %g on node %u, "
			             "the oracle's node %u", seed, k, end, d[0] / 8, want);
			compared++;
			by_end += tp_placement_decided_by(p) == TP_RULE_END;
		}
		tp_placement_destroy(p);
		done(t, c);
	}
	cr_assert_gt(compared, 1000, "only %u cases compared", compared);
	cr_assert_gt(by_end, 50, "the end decided only %u cases", by_end);
}
