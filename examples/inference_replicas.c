/* SPDX-License-Identifier: MIT */
/*
 * Inference: 6 replicas of an 8-GPU model server (each replica inside one node of an HGX fleet),
 * at most one replica per power feed, spread over at least 3 scalable units, for tenant "search"
 * with the scalable units it uses kept to itself.
 *
 *   build/examples/inference_replicas
 */
#include <stdio.h>

#include <topoplace.h>

int main(void)
{
	static const char *const levels[] = {"su", "node"};
	tp_topology_builder *b = NULL;
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	tp_placement *p = NULL;
	int rc = tp_topology_builder_create(&b, levels, 2, NULL);
	unsigned counts[2] = {4, 8}; /* 4 scalable units of 8 nodes */
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.model = "H100";
	o.memory_gb = 80;
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, 8, &o);
	/* Two power feeds per scalable unit: even nodes on feed a, odd nodes on feed b. */
	char node[64], feed[32];
	for (unsigned su = 0; !rc && su < 4; su++)
		for (unsigned i = 0; !rc && i < 8; i++) {
			snprintf(node, sizeof node, "su%u-node%u", su, i);
			snprintf(feed, sizeof feed, "pdu-%u%c", su, i % 2 ? 'b' : 'a');
			rc = tp_topology_builder_add_failure_domain(b, "power", feed, node, -1);
		}
	if (!rc)
		rc = tp_topology_build(b, &t);
	if (rc) {
		fprintf(stderr, "topology: %s: %s\n", tp_err_name(rc), tp_topology_builder_errmsg(b));
		return 1;
	}
	tp_topology_builder_destroy(b);
	if ((rc = tp_cluster_create(&c, t, NULL)) != 0)
		return 1;

	tp_domain_cap one_per_feed = {"power", 0, 1};
	tp_request r = TP_REQUEST_INIT;
	r.id = "llm-serve";
	r.job_class = TP_CLASS_INFERENCE;
	r.tenant = "search";
	r.count = 48;
	r.group_size = 8; /* a replica: one whole node */
	r.caps = &one_per_feed;
	r.ncaps = 1;
	r.spread_level = "su";
	r.spread_min_domains = 3;
	r.exclusive = "su";
	rc = tp_place(c, &r, &p);
	if (rc) {
		fprintf(stderr, "place: %s: %s\n", tp_err_name(rc), p ? tp_placement_errmsg(p) : "");
		return 1;
	}
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	printf("%s: %zu replicas\n", tp_placement_job(p), n / 8);
	for (size_t i = 0; i < n; i += 8) {
		uint32_t nd = tp_topology_device_node(t, devs[i]);
		unsigned kind = (unsigned)tp_topology_fd_kind_by_name(t, "power");
		printf("  replica %zu: %s (%s)\n", i / 8, tp_topology_node_name(t, nd),
		       tp_topology_fd_name(t, kind, tp_topology_device_fd(t, kind, devs[i])));
	}
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return 0;
}
