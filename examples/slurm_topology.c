/* SPDX-License-Identifier: MIT */
/*
 * Turn a Slurm topology.conf (block plugin: four NVL72 racks, planned in base blocks of 16
 * nodes) into a topology, give its levels their fabrics, print the levels and domains, then
 * place two jobs: 64 GPUs inside one rack, and 128 GPUs as two 64-GPU slices in two racks of
 * one aggregated block.
 *
 *   build/examples/slurm_topology
 *
 * The library reads no files: a scheduler passes the text of its topology.conf, read however
 * it likes. Here it is embedded.
 */
#include <stdio.h>
#include <string.h>

#include <topoplace-slurm.h>

static const char topology_conf[] =
	"# 4 GB200 NVL72 racks of 18 nodes; Slurm plans in base blocks of 16 nodes\n"
	"BlockName=rack01 Nodes=gb01n[01-18]\n"
	"BlockName=rack02 Nodes=gb02n[01-18]\n"
	"BlockName=rack03 Nodes=gb03n[01-18]\n"
	"BlockName=rack04 Nodes=gb04n[01-18]\n"
	"BlockSizes=16,32,64\n";

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

static void print_levels(const tp_topology *t)
{
	for (unsigned l = 0; l < tp_topology_level_count(t); l++) {
		uint32_t n = tp_topology_domain_count(t, l);
		printf("level %u %-6s %4u domain(s):", l, tp_topology_level_name(t, l), n);
		for (uint32_t d = 0; d < n && d < 4; d++) {
			char path[256];
			tp_topology_domain_path(t, l, d, path, sizeof path);
			printf(" %s", path);
		}
		printf("%s\n", n > 4 ? " ..." : "");
	}
}

/* Place r, print where it went, and commit it. */
static int place(tp_cluster *c, const tp_request *r, unsigned level)
{
	tp_placement *p = NULL;
	int rc = tp_place(c, r, &p);
	if (rc) {
		int code = fail(r->id, rc, p ? tp_placement_errmsg(p) : "");
		tp_placement_destroy(p);
		return code;
	}
	const tp_topology *t = tp_cluster_topology(c);
	printf("%s: %u GPUs in", r->id, r->count);
	for (uint32_t i = 0; i < tp_placement_domain_count(p, level); i++) {
		uint32_t dom, devices;
		char path[256];
		tp_placement_domain_at(p, level, i, &dom, &devices);
		tp_topology_domain_path(t, level, dom, path, sizeof path);
		printf(" %s (%u)", path, devices);
	}
	printf("\n");
	rc = tp_commit(c, p, NULL);
	tp_placement_destroy(p);
	return rc ? fail("commit", rc, tp_cluster_errmsg(c)) : 0;
}

int main(void)
{
	tp_topology_builder *b = NULL;
	char err[256];
	int rc = tp_topology_builder_from_slurm(&b, topology_conf, strlen(topology_conf), 4, NULL,
	                                        err, sizeof err);
	if (rc)
		return fail("topology.conf", rc, err);

	/* Levels: agg64 (all 4 racks), agg32 (pairs of racks), block (a rack), node. Inside a
	 * rack GPUs talk over the NVL72 NVLink fabric; between racks over InfiniBand. */
	int block = 2;
	tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25.0, 20.0);
	tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50.0, 14.0);
	tp_topology_builder_set_fabric(b, 1, TP_LINK_IB, 50.0, 14.0);
	rc = tp_topology_builder_set_fabric(b, block, TP_LINK_NVLINK, 900.0, 3.4);
	if (rc)
		return fail("fabric", rc, tp_topology_builder_errmsg(b));
	tp_topology *t = NULL;
	rc = tp_topology_build(b, &t);
	if (rc)
		return fail("build", rc, tp_topology_builder_errmsg(b));
	tp_topology_builder_destroy(b);
	print_levels(t);

	tp_cluster *c = NULL;
	rc = tp_cluster_create(&c, t, NULL);
	if (rc)
		return fail("cluster", rc, "");

	tp_request one_rack = TP_REQUEST_INIT;
	one_rack.id = "tp-64";
	one_rack.count = 64;
	one_rack.group_size = 4;
	one_rack.required = "block";

	tp_slice per_rack = {"block", 64};
	tp_request two_racks = TP_REQUEST_INIT;
	two_racks.id = "train-128";
	two_racks.count = 128;
	two_racks.group_size = 4;
	two_racks.required = "agg32";
	two_racks.slices = &per_rack;
	two_racks.nslices = 1;

	rc = place(c, &one_rack, (unsigned)block);
	if (!rc)
		rc = place(c, &two_racks, (unsigned)block);
	printf("free GPUs left: %u of %u\n", tp_cluster_free_total_count(c),
	       tp_topology_device_count(t));
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return rc;
}
