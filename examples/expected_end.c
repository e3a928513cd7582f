/* SPDX-License-Identifier: MIT */
/*
 * Tell the library when jobs are expected to end (tp_request.expected_end_s) so that small
 * jobs share nodes with jobs that end about when they do, and nodes free whole together.
 *
 * One HGX scalable unit of four 8-GPU nodes. Three jobs of 4 GPUs run on nodes 0, 1 and 2,
 * recorded with their shapes, which say they end at t = 1 h, 3 h and 2 h (the clock is the
 * caller's: here seconds since the scheduler started). A 2-GPU job one node must hold fits
 * on any of the three, all as tight (4 free). Without an end it takes the lowest node, 0,
 * whose job ends at 1 h: from then on node 0 is held until the new job ends. Told it ends at
 * 1.5 h, it takes node 2, whose job runs to 2 h anyway, and node 0 frees whole at 1 h.
 *
 *   build/examples/expected_end     (exits 1 if either answer is not the one above)
 */
#include <stdio.h>
#include <string.h>

#include <topoplace.h>

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

/* Record job `id` on GPUs 0-3 of `node`, expected to end at `end_s`. */
static int run_job(tp_cluster *c, const tp_topology *t, const char *id, const char *node,
                   double end_s)
{
	uint32_t devs[4];
	for (unsigned g = 0; g < 4; g++) {
		char name[32];
		snprintf(name, sizeof name, "%s/%u", node, g);
		int rc = tp_topology_device_by_name(t, name, &devs[g]);
		if (rc)
			return fail("device", rc, name);
	}
	tp_request shape = TP_REQUEST_INIT;
	shape.count = 4;
	shape.expected_end_s = end_s;
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.shape = &shape;
	int rc = tp_cluster_assign(c, id, devs, 4, &o);
	return rc ? fail("assign", rc, tp_cluster_errmsg(c)) : 0;
}

/* Place 2 GPUs one node must hold, expected to end at end_s (0: not said), print where, and
 * fail unless that is node `want` (the example checks what it shows). */
static int place(tp_cluster *c, const tp_topology *t, double end_s, const char *want)
{
	tp_request r = TP_REQUEST_INIT;
	r.id = "small";
	r.count = 2;
	r.required = "node";
	r.expected_end_s = end_s;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc) {
		fail("place", rc, p ? tp_placement_errmsg(p) : "");
		tp_placement_destroy(p);
		return 1;
	}
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	const char *node = tp_topology_node_name(t, tp_topology_device_node(t, d[0]));
	static const char *const rules[] = {"none", "locality", "balance", "fit", "step", "tie",
	                                    "end"};
	tp_rule rule = tp_placement_decided_by(p);
	printf("2 GPUs, end %s: %zu GPUs on %s, decided by %s\n",
	       end_s > 0 ? "1.5 h" : "not said", n, node,
	       (unsigned)rule < sizeof rules / sizeof *rules ? rules[rule] : "?");
	int wrong = strcmp(node, want) != 0;
	if (wrong)
		fprintf(stderr, "expected %s, got %s\n", want, node);
	tp_placement_destroy(p);
	return wrong;
}

int main(void)
{
	tp_topology *t;
	int rc = tp_topology_generate_hgx(&t, 1, 4, NULL);
	if (rc)
		return fail("topology", rc, "");
	tp_cluster *c;
	if ((rc = tp_cluster_create(&c, t, NULL))) {
		tp_topology_destroy(t);
		return fail("cluster", rc, "");
	}
	int bad = run_job(c, t, "a", "su0-node0", 3600) || run_job(c, t, "b", "su0-node1", 10800) ||
	          run_job(c, t, "c", "su0-node2", 7200) || place(c, t, 0, "su0-node0") ||
	          place(c, t, 5400, "su0-node2");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return bad;
}
