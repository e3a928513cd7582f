/* SPDX-License-Identifier: MIT */
/*
 * A service scaled out one replica at a time: each replica is its own job (8 GPUs, two trays
 * of one NVL72 rack), and the service's caps keep at most half of its replicas in one rack,
 * counted by the cluster over the replicas running, so that losing a rack leaves at least half
 * of them. Best fit fills the first racks up to the cap: after nine replicas two racks hold
 * four each (4 of 9, under half), and at no step does a rack hold more than half.
 *
 *   build/examples/service_scale_out
 */
#include <stdio.h>

#include <topoplace.h>

int main(void)
{
	tp_topology *t = NULL;
	tp_cluster *c = NULL;
	if (tp_topology_generate_nvl72(&t, 1, 4, NULL) || tp_cluster_create(&c, t, NULL))
		return 1;
	tp_service_caps caps = TP_SERVICE_CAPS_INIT;
	caps.level = "rack";
	caps.max_percent = 50;
	int rc = tp_cluster_set_service_caps(c, "chat", &caps);
	for (unsigned i = 0; !rc && i < 9; i++) {
		char id[32];
		snprintf(id, sizeof id, "chat-%u", i);
		tp_request r = TP_REQUEST_INIT;
		r.id = id;
		r.job_class = TP_CLASS_INFERENCE;
		r.count = 8;
		r.required = "rack";
		r.service = "chat";
		tp_placement *p = NULL;
		rc = tp_place(c, &r, &p);
		if (rc == 0) {
			rc = tp_commit(c, p, NULL);
			uint32_t per[4];
			for (uint32_t k = 0; k < 4; k++)
				tp_cluster_service_replicas(c, "chat", 1, k, &per[k]);
			printf("%s placed: replicas per rack %u %u %u %u\n", id, per[0], per[1], per[2],
			       per[3]);
		} else {
			printf("%s waits: %s\n", id, p ? tp_placement_errmsg(p) : tp_err_name(rc));
		}
		tp_placement_destroy(p);
	}
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return rc ? 1 : 0;
}
