/* SPDX-License-Identifier: MIT */
/*
 * GPU+NIC pairs: jobs doing GPUDirect RDMA want each GPU next to a NIC of its own. Describe a
 * node's insides (8 GPUs in pairs behind 4 PCIe switches, one NIC per switch, as on many HGX
 * boards), build two such nodes, and place pairs requests: each GPU gets the NIC behind its own
 * switch, no two GPUs share one, and a running pairs job holds its NICs, so the third request
 * below is busy although half of the GPUs are free.
 *
 *   build/examples/gpu_nic_pairs
 *
 * A scheduler would usually build the node type from the node's hwloc XML
 * (tp_nodetype_from_hwloc_xml() in topoplace-hwloc.h) instead of by hand.
 */
#include <stdio.h>

#include <topoplace.h>

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

/* 8 GPUs; switch s holds GPUs 2s and 2s+1 and NIC mlx5_s. */
static int board(tp_nodetype **out)
{
	int rc = tp_nodetype_create(out, 8, NULL);
	if (rc)
		return rc;
	for (unsigned s = 0; s < 4 && !rc; s++) {
		char name[16];
		unsigned sw;
		snprintf(name, sizeof name, "mlx5_%u", s);
		rc = tp_nodetype_add_pcie_switch(*out, -1, &sw);
		if (!rc)
			rc = tp_nodetype_set_gpu_switch(*out, 2 * s, (int)sw);
		if (!rc)
			rc = tp_nodetype_set_gpu_switch(*out, 2 * s + 1, (int)sw);
		if (!rc)
			rc = tp_nodetype_add_nic(*out, name, (int)sw, 50.0, NULL);
	}
	return rc;
}

/* Place a pairs request of `count` GPUs and commit it; print every rank's GPU and NIC. */
static int place_pairs(tp_cluster *c, const char *id, uint32_t count)
{
	const tp_topology *t = tp_cluster_topology(c);
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.count = count;
	r.gpu_nic_pairs = 1;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc) {
		printf("%s (%u GPUs with pairs): %s: %s\n", id, count, tp_err_name(rc),
		       tp_placement_errmsg(p));
		tp_placement_destroy(p);
		return rc;
	}
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	printf("%s:", id);
	for (size_t i = 0; i < n; i++) {
		uint32_t node = tp_topology_device_node(t, devs[i]);
		int nic = tp_placement_nic(p, i);
		printf(" %s/%u+%s", tp_topology_node_name(t, node), tp_topology_device_index(t, devs[i]),
		       nic >= 0 ? tp_nodetype_nic_name(tp_topology_node_type(t, node), (unsigned)nic)
		                : "?");
	}
	printf("\n");
	rc = tp_commit(c, p, NULL);
	tp_placement_destroy(p);
	return rc;
}

int main(void)
{
	tp_nodetype *nt = NULL;
	int rc = board(&nt);
	if (rc)
		return fail("node type", rc, nt ? tp_nodetype_errmsg(nt) : "");
	const char *levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	if ((rc = tp_topology_builder_create(&b, levels, 2, NULL)))
		return fail("builder", rc, "");
	tp_node_options o = TP_NODE_OPTIONS_INIT;
	o.type = nt;
	const char *path[] = {"r0"};
	if ((rc = tp_topology_builder_add_node(b, "hgx0", path, 8, &o)) ||
	    (rc = tp_topology_builder_add_node(b, "hgx1", path, 8, &o)))
		return fail("add node", rc, tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	if ((rc = tp_topology_build(b, &t)))
		return fail("build", rc, tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	tp_nodetype_destroy(nt);
	tp_cluster *c = NULL;
	if ((rc = tp_cluster_create(&c, t, NULL)))
		return fail("cluster", rc, "");

	/* 4 pairs fit on one node (one GPU per switch); the second job takes the other node's
	 * NICs; the third finds 8 free GPUs but no free NIC. */
	int bad = place_pairs(c, "rdma-a", 4) || place_pairs(c, "rdma-b", 4);
	int third = place_pairs(c, "rdma-c", 2);
	printf("free GPUs: %u of %u\n", tp_cluster_free_total_count(c),
	       tp_topology_device_count(t));
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return bad || third != TP_EBUSY ? 1 : 0;
}
