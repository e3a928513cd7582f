/* SPDX-License-Identifier: MIT */
/*
 * Say how a training job communicates (tp_step_model: its tensor- and data-parallel degrees
 * and the bytes each exchanges) and let the modelled step time guide and guard its placement,
 * on a small mixed fleet: an NVL72-like rack whose nodes share an NVLink fabric, and an
 * HGX-like rack whose two 8-GPU nodes talk over InfiniBand. An inference job holds half of
 * each HGX node.
 *
 * The first job goes where its step is fastest; the program prints the modelled step time
 * and the placement efficiency of the answer (tp_cost_step_us(), tp_cost_efficiency()). The
 * second job's tensor group could only straddle the two HGX nodes: with an efficiency floor
 * (min_efficiency) tp_place() answers TP_EBUSY and says what the placement would reach, so
 * the job waits instead of running slowly. Once the inference job ends it fits in one node.
 * Last, with both racks free, a 1-GPU job: the rules alone take the first rack, the NVL72
 * one; with fabric fit (fabric_fit 0.9) it goes to the HGX rack, the slower fabric, which
 * serves a job that does not communicate as well, and the NVLink rack stays whole.
 *
 *   build/examples/step_model
 */
#include <stdio.h>

#include <topoplace.h>

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

/* Rack nvl0: 4 nodes of 4 GPUs on the rack's own NVLink; rack hgx0: 2 nodes of 8 GPUs on the
 * level's InfiniBand. NVLink inside every node. */
static int mixed_fleet(tp_topology **out)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b;
	int rc = tp_topology_builder_create(&b, levels, 2, NULL);
	if (rc)
		return fail("builder", rc, "");
	rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_NVLINK, 900.0, 3.4);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50.0, 10.0);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_ETHERNET, 25.0,
		                                    20.0);
	for (unsigned i = 0; i < 6 && !rc; i++) {
		char name[16];
		const char *rack = i < 4 ? "nvl0" : "hgx0";
		snprintf(name, sizeof name, "%s-n%u", rack, i < 4 ? i : i - 4);
		rc = tp_topology_builder_add_node(b, name, &rack, i < 4 ? 4 : 8, NULL);
	}
	if (!rc) /* the NVL72-like rack: its nodes talk over NVLink, not the level's InfiniBand */
		rc = tp_topology_builder_set_domain_fabric(b, 0, "nvl0", TP_LINK_NVLINK, 900.0,
		                                           3.4);
	if (!rc)
		rc = tp_topology_build(b, out);
	if (rc)
		fail("topology", rc, tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	return rc ? 1 : 0;
}

/* Place a job of count GPUs with model m; print where it went, its modelled step time and
 * its efficiency, or why it was not placed. Returns tp_place()'s code; *out keeps a placed
 * answer (NULL otherwise). */
static int place_job(tp_cluster *c, const char *id, uint32_t count, const tp_step_model *m,
                     tp_placement **out)
{
	const tp_topology *t = tp_cluster_topology(c);
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.count = count;
	r.comm = m;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	*out = NULL;
	printf("%s: %u GPUs, tp %u x dp %u, floor %.2f, fabric fit %.2f: ", id, count, m->tp,
	       m->dp, m->min_efficiency, m->fabric_fit);
	if (rc) {
		printf("%s\n  %s\n", tp_err_name(rc), p ? tp_placement_errmsg(p) : "");
		tp_placement_destroy(p);
		return rc;
	}
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	double us = 0.0, eff = 0.0;
	char why[256];
	int crc = tp_cost_step_us(&us, t, devs, n, m, NULL, why, sizeof why);
	if (!crc)
		crc = tp_cost_efficiency(&eff, t, devs, n, m, NULL, why, sizeof why);
	if (crc) {
		tp_placement_destroy(p);
		return fail("cost", crc, why);
	}
	printf("placed on");
	for (uint32_t i = 0; i < tp_placement_domain_count(p, 1); i++) {
		uint32_t node, k;
		tp_placement_domain_at(p, 1, i, &node, &k);
		printf(" %s=%u", tp_topology_node_name(t, node), k);
	}
	printf("\n  modelled step %.0f us, placement efficiency %.3f\n", us, eff);
	*out = p;
	return 0;
}

int main(void)
{
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	tp_placement *p = NULL;
	if (mixed_fleet(&t))
		return 1;
	int rc = tp_cluster_create(&c, t, NULL);
	if (rc)
		return fail("cluster", rc, "");

	/* An inference job holds GPUs 0-3 of each HGX node. */
	uint32_t held[8], first, n;
	for (uint32_t node = 4, k = 0; node < 6 && !rc; node++) {
		rc = tp_topology_domain_devices(t, 1, node, &first, &n);
		for (uint32_t i = 0; i < 4 && !rc; i++)
			held[k++] = first + i;
	}
	if (!rc)
		rc = tp_cluster_assign(c, "infer-0", held, 8, NULL);
	if (rc)
		return fail("assign", rc, tp_cluster_errmsg(c));

	/* A step: 200 ms of compute, 128 tensor-parallel all-reduces of 64 MiB, and a 2 GiB
	 * gradient all-reduce half hidden behind the compute. */
	tp_step_model m = TP_STEP_MODEL_INIT;
	m.tp = 8;
	m.dp = 2;
	m.compute_us = 200000.0;
	m.tp_bytes = 64.0 * (1 << 20);
	m.tp_msgs = 128;
	m.dp_bytes = 2.0 * (1 << 30);
	m.dp_overlap = 0.5;
	m.min_efficiency = 0.8;
	rc = place_job(c, "train-a", 16, &m, &p);
	if (rc)
		return fail("train-a", rc, "expected a placement");
	rc = tp_commit(c, p, NULL);
	tp_placement_destroy(p);
	if (rc)
		return fail("commit", rc, tp_cluster_errmsg(c));

	/* One tensor group of 8: only the HGX rack has GPUs left, 4 on each node. */
	m.dp = 1;
	m.dp_bytes = 0.0;
	int busy = place_job(c, "train-b", 8, &m, &p);
	tp_placement_destroy(p);
	m.min_efficiency = 0.0; /* what it would get without the floor */
	rc = place_job(c, "train-b", 8, &m, &p);
	tp_placement_destroy(p);
	if (rc)
		return fail("train-b without a floor", rc, "expected a placement");
	rc = tp_cluster_release(c, "infer-0");
	if (rc)
		return fail("release", rc, tp_cluster_errmsg(c));
	m.min_efficiency = 0.8;
	printf("(infer-0 ends)\n");
	rc = place_job(c, "train-b", 8, &m, &p);
	tp_placement_destroy(p);
	if (busy != TP_EBUSY || rc) {
		tp_cluster_destroy(c);
		tp_topology_destroy(t);
		return busy != TP_EBUSY ? fail("train-b with a floor", busy, "expected TP_EBUSY")
		                        : fail("train-b once infer-0 ended", rc, "expected a placement");
	}

	/* Fabric fit: a 1-GPU job, which runs as fast on any GPU. */
	printf("(train-a ends)\n");
	rc = tp_cluster_release(c, "train-a");
	tp_step_model one = TP_STEP_MODEL_INIT;
	one.compute_us = 200000.0;
	uint32_t node_plain = 0, node_fit = 0;
	for (int fit = 0; fit < 2 && !rc; fit++) {
		one.fabric_fit = fit ? 0.9 : 0.0;
		rc = place_job(c, "notebook", 1, &one, &p);
		if (!rc)
			tp_placement_domain_at(p, 1, 0, fit ? &node_fit : &node_plain, NULL);
		tp_placement_destroy(p);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	if (rc)
		return fail("notebook", rc, "expected a placement");
	/* nodes 0-3 are the NVL72-like rack's, 4-5 the HGX-like rack's */
	if (node_plain >= 4 || node_fit < 4)
		return fail("notebook", TP_EINTERNAL, "expected the NVLink rack without fabric fit "
		            "and the HGX rack with it");
	return 0;
}
