/* SPDX-License-Identifier: MIT */
/*
 * NVLink partitions on an NVL72 rack: a job that spans nodes of the rack needs an IMEX domain
 * (its nodes and a channel of the rack's pool). Turn partitions on, place jobs of two tenants
 * and print the partition each one gets: the second tenant's job stays off the first tenant's
 * partition, and a job that needs a channel when the pool is empty is busy.
 *
 *   build/examples/nvlink_partitions
 *
 * docs/concepts.md ("NVLink partitions") walks through the same rules.
 */
#include <stdio.h>

#include <topoplace.h>

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

/* Place a request of count GPUs for a tenant, print its partitions, and commit it. */
static int place(tp_cluster *c, const char *id, const char *tenant, uint32_t count)
{
	const tp_topology *t = tp_cluster_topology(c);
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.tenant = tenant;
	r.count = count;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc == TP_ENOMEM)
		return fail(id, rc, "out of memory");
	if (rc) {
		printf("%s (%s, %u GPUs): %s\n", id, tenant, count, tp_placement_errmsg(p));
		tp_placement_destroy(p);
		return 0;
	}
	size_t np = tp_placement_partition_count(p);
	printf("%s (%s, %u GPUs): %zu partition%s", id, tenant, count, np, np == 1 ? "" : "s");
	for (size_t i = 0; i < np; i++) {
		uint32_t dom, ch;
		const uint32_t *nodes;
		size_t n;
		char path[128];
		tp_placement_partition(p, i, &dom, &ch, &nodes, &n);
		tp_topology_domain_path(t, 1, dom, path, sizeof path);
		printf("; %s channel %u, nodes", path, ch);
		for (size_t k = 0; k < n; k++)
			printf(" %s", tp_topology_node_name(t, nodes[k]));
	}
	printf("\n");
	rc = tp_commit(c, p, NULL);
	tp_placement_destroy(p);
	return rc ? fail(id, rc, tp_cluster_errmsg(c)) : 0;
}

int main(void)
{
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	int rc = tp_topology_generate_nvl72(&t, 1, 1, NULL); /* one rack of 18 nodes x 4 GPUs */
	if (rc)
		return fail("topology", rc, "");
	if ((rc = tp_cluster_create(&c, t, NULL))) {
		tp_topology_destroy(t);
		return fail("cluster", rc, "");
	}
	/* partitions in the racks, a pool of 2 channels each (Slurm's default is 2048) */
	if ((rc = tp_cluster_set_partitions(c, 1, 2)))
		return fail("partitions", rc, tp_cluster_errmsg(c));
	int bad = place(c, "a", "ta", 6)   /* two nodes: channel 0 */
	       || place(c, "b", "tb", 2)   /* one node, never on a's nodes */
	       || place(c, "c", "ta", 16)  /* four nodes: channel 1 */
	       || place(c, "d", "tb", 8);  /* the pool is empty: busy */
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return bad;
}
