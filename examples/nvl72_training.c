/* SPDX-License-Identifier: MIT */
/*
 * Place a 512-GPU training job on a GB200 NVL72 fleet as one 64-GPU slice in each of exactly 8
 * racks (tensor-parallel groups never leave a rack's NVLink fabric), commit it, and print where
 * it went. Then ask for 576 GPUs inside one block and show why it does not fit although enough
 * GPUs are free: the answer a scheduler turns into a defrag plan.
 *
 *   build/examples/nvl72_training
 */
#include <stdio.h>

#include <topoplace.h>

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

int main(void)
{
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	tp_placement *p = NULL;
	int rc = tp_topology_generate_nvl72(&t, 2, 8, NULL); /* 2 blocks x 8 racks x 72 GPUs */
	if (rc)
		return fail("generate", rc, "");
	rc = tp_cluster_create(&c, t, NULL);
	if (rc)
		return fail("cluster", rc, "");

	/* A small job already runs in rack block0/rack0. */
	uint32_t first, n;
	tp_topology_domain_devices(t, 1, 0, &first, &n);
	uint32_t small[24];
	for (uint32_t i = 0; i < 24; i++)
		small[i] = first + i;
	rc = tp_cluster_assign(c, "small-0", small, 24, NULL);
	if (rc)
		return fail("assign", rc, tp_cluster_errmsg(c));

	tp_slice per_rack = {"rack", 64};
	tp_domain_cap cap = {"rack", 64, 0};
	tp_request r = TP_REQUEST_INIT;
	r.id = "train-512";
	r.count = 512;
	r.group_size = 4; /* one tensor-parallel group of 4 per node */
	r.preferred = "block";
	r.slices = &per_rack;
	r.nslices = 1;
	r.caps = &cap;
	r.ncaps = 1;

	rc = tp_place(c, &r, &p);
	if (rc)
		return fail("place", rc, p ? tp_placement_errmsg(p) : "");
	size_t ndev;
	tp_placement_devices(p, &ndev);
	printf("%s: %zu devices, modelled 1 GiB all-reduce %.0f us\n", tp_placement_job(p), ndev,
	       tp_placement_step_comm_us(p));
	for (unsigned level = 0; level < 2; level++) {
		printf("  %s:", tp_topology_level_name(t, level));
		for (uint32_t i = 0; i < tp_placement_domain_count(p, level); i++) {
			uint32_t dom, cnt;
			char path[64];
			tp_placement_domain_at(p, level, i, &dom, &cnt);
			tp_topology_domain_path(t, level, dom, path, sizeof path);
			printf(" %s=%u", path, cnt);
		}
		printf("\n");
	}
	rc = tp_commit(c, p, NULL);
	tp_placement_destroy(p);
	if (rc)
		return fail("commit", rc, tp_cluster_errmsg(c));

	/* Now 576 GPUs inside one block: 616 are free, but no block holds 576 of them. */
	tp_request big = TP_REQUEST_INIT;
	big.id = "block-job";
	big.count = 576;
	big.group_size = 4;
	big.required = "block";
	rc = tp_place(c, &big, &p);
	printf("block-job: %s", rc ? tp_err_name(rc) : "placed");
	if (rc && p) {
		tp_fit fit = TP_FIT_INIT;
		tp_placement_fit(p, &fit);
		printf(" (%s; needed %u, free %u, best block %u)", tp_placement_errmsg(p),
		       fit.needed, fit.free_total, fit.best);
	}
	printf("\n");
	tp_placement_destroy(p);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return rc == TP_EFRAGMENTED ? 0 : fail("block-job", rc, "expected TP_EFRAGMENTED");
}
