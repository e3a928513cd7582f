/* SPDX-License-Identifier: MIT */
/*
 * The objective's policy rules as the library refines them: rule 3, the job mix that placement
 * protects (tp_cluster_set_place_mix), its messages and how it changes an answer.
 */
#include "testutil.h"

/* One NVL72 block of two racks (18 nodes of 4 GPUs each): rack 0 with 37 free GPUs (35 held:
 * nodes 0-7 and 3 GPUs of node 8), rack 1 with 40 (nodes 18-25 held). */
static void two_racks(tp_topology **t, tp_cluster **c)
{
	cr_assert_eq(tp_topology_generate_nvl72(t, 1, 2, &tp_test_allocator), 0);
	cr_assert_eq(tp_cluster_create(c, *t, &tp_test_allocator), 0);
	uint32_t a[35], b[32];
	for (uint32_t i = 0; i < 35; i++)
		a[i] = i;
	for (uint32_t i = 0; i < 32; i++)
		b[i] = 72 + i;
	cr_assert_eq(tp_cluster_assign(*c, "a", a, 35, NULL), 0, "%s", tp_cluster_errmsg(*c));
	cr_assert_eq(tp_cluster_assign(*c, "b", b, 32, NULL), 0, "%s", tp_cluster_errmsg(*c));
}

/* The rack a 4-GPU, one-node, required-rack request lands in. */
static unsigned rack_of_node_job(tp_cluster *c)
{
	tp_request r = TP_REQUEST_INIT;
	r.count = 4;
	r.group_size = 4;
	r.required = "rack";
	tp_placement *p;
	cr_assert_eq(tp_place(c, &r, &p), 0, "%s", tp_placement_errmsg(p));
	size_t n;
	const uint32_t *d = tp_placement_devices(p, &n);
	cr_assert_eq(n, 4);
	unsigned rack = d[0] / 72;
	for (size_t i = 1; i < n; i++)
		cr_assert_eq(d[i] / 72, rack);
	tp_placement_destroy(p);
	return rack;
}

Test(place_rules, default_mix_keeps_a_half_rack_that_best_fit_breaks)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_racks(&t, &c);
	/* Best fit takes the tighter rack 0 (37 -> 33: no 36-GPU job fits there any more); the
	 * default mix (1, 4, 36, 72 GPUs) takes rack 1 (40 -> 36: still one). */
	cr_assert_eq(rack_of_node_job(c), 1);
	static const tp_job_shape none[1];
	cr_assert_eq(tp_cluster_set_place_mix(c, none, 0), 0);
	cr_assert_eq(rack_of_node_job(c), 0);
	/* A mix of whole nodes only: both racks lose the same, best fit decides. */
	tp_job_shape node4 = {4, "node", 1.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &node4, 1), 0);
	cr_assert_eq(rack_of_node_job(c), 0);
	tp_job_shape half = {36, "rack", 2.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &half, 1), 0);
	cr_assert_eq(rack_of_node_job(c), 1);
	cr_assert_eq(tp_cluster_set_place_mix(c, NULL, 0), 0); /* back to the default */
	cr_assert_eq(rack_of_node_job(c), 1);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}

static void expect_fail(tp_cluster *c, const tp_job_shape *mix, size_t n, int code,
                        const char *msg)
{
	tp_job_shape keep = {36, "rack", 1.0};
	cr_assert_eq(tp_cluster_set_place_mix(c, &keep, 1), 0);
	cr_assert_eq(tp_cluster_set_place_mix(c, mix, n), code, "%s", tp_cluster_errmsg(c));
	cr_assert_str_eq(tp_cluster_errmsg(c), msg);
	/* unchanged: the 36-GPU mix still sends the job to rack 1 */
	cr_assert_eq(rack_of_node_job(c), 1);
}

Test(place_rules, bad_mix_is_refused_and_names_the_field)
{
	tp_test_alloc_reset();
	tp_topology *t;
	tp_cluster *c;
	two_racks(&t, &c);
	cr_assert_eq(tp_cluster_set_place_mix(NULL, NULL, 0), TP_EINVAL);
	expect_fail(c, NULL, 2, TP_EINVAL, "place mix: NULL with 2 shapes");
	tp_job_shape many[TP_PLACE_MIX_MAX + 1];
	for (size_t i = 0; i < TP_PLACE_MIX_MAX + 1; i++)
		many[i] = (tp_job_shape){1, "node", 1.0};
	expect_fail(c, many, TP_PLACE_MIX_MAX + 1, TP_EINVAL, "place mix: 17 shapes, at most 16");
	tp_job_shape bad[2] = {{4, "node", 1.0}, {4, NULL, 1.0}};
	expect_fail(c, bad, 2, TP_EINVAL, "place mix[1].level is NULL");
	bad[1] = (tp_job_shape){0, "rack", 1.0};
	expect_fail(c, bad, 2, TP_EINVAL, "place mix[1].devices is 0");
	bad[1] = (tp_job_shape){4, "rack", -1.0};
	expect_fail(c, bad, 2, TP_EINVAL, "place mix[1].weight -1 is not a finite number > 0");
	bad[1] = (tp_job_shape){4, "pod", 1.0};
	expect_fail(c, bad, 2, TP_ENOTFOUND,
	            "place mix[1].level 'pod' is not a level of the topology");
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	cr_assert_eq(tp_test_alloc_state.live, 0);
}
