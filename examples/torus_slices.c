/* SPDX-License-Identifier: MIT */
/*
 * Slices of a TPU-pod-like torus: one 4x4x4 torus of chips (tp_topology_generate_torus),
 * box requests (tp_request.box_level, box, box_wrap, box_rotate) placed one after another,
 * the largest free box and the free fragments after each (tp_frag_largest_box,
 * tp_frag_grid_fragment_count), and a box that does not fit as it is asked but fits rotated.
 *
 *   build/examples/torus_slices
 *
 * The same with a builder: tp_topology_builder_set_grid() on the level whose domains are the
 * tori, tp_topology_builder_set_coords() for each chip (or host of chips).
 */
#include <stdio.h>

#include <topoplace.h>

static int fail(const char *what, int rc, const char *msg)
{
	fprintf(stderr, "%s: %s: %s\n", what, tp_err_name(rc), msg);
	return 1;
}

/* Place and commit a box of extents a x b x c; print where it went and what is left. */
static int slice(tp_cluster *c, const char *id, unsigned a, unsigned b, unsigned cz,
                 int rotate)
{
	const tp_topology *t = tp_cluster_topology(c);
	tp_request r = TP_REQUEST_INIT;
	r.id = id;
	r.box_level = "pod";
	r.box[0] = a, r.box[1] = b, r.box[2] = cz;
	r.box_wrap = 1;
	r.box_rotate = rotate;
	r.count = a * b * cz;
	tp_placement *p = NULL;
	int rc = tp_place(c, &r, &p);
	if (rc) {
		printf("%-6s %ux%ux%u%s: %s\n", id, a, b, cz, rotate ? " (any rotation)" : "",
		       tp_placement_errmsg(p));
		tp_placement_destroy(p);
		return rc == TP_EFRAGMENTED || rc == TP_EBUSY ? 0 : fail("tp_place", rc, "");
	}
	size_t n = 0;
	const uint32_t *d = tp_placement_devices(p, &n);
	unsigned x[3];
	tp_topology_domain_coords(t, 1, tp_topology_device_node(t, d[0]), x);
	printf("%-6s %ux%ux%u%s: %zu chips from (%u,%u,%u)", id, a, b, cz,
	       rotate ? " (any rotation)" : "", n, x[0], x[1], x[2]);
	rc = tp_commit(c, p, NULL);
	tp_placement_destroy(p);
	if (rc)
		return fail("tp_commit", rc, tp_cluster_errmsg(c));
	tp_frag *f = NULL;
	if ((rc = tp_frag_report(c, NULL, 0, &f)))
		return fail("tp_frag_report", rc, tp_frag_errmsg(f));
	unsigned e[3];
	uint32_t box = tp_frag_largest_box(f, 0, e);
	printf("; left: largest free box %ux%ux%u (%u chips), %u fragment(s)\n", e[0], e[1], e[2],
	       box, tp_frag_grid_fragment_count(f, 0));
	tp_frag_destroy(f);
	return 0;
}

int main(void)
{
	unsigned dims[3] = {4, 4, 4};
	tp_topology *t = NULL;
	int rc = tp_topology_generate_torus(&t, 1, dims, 3, 0x7, NULL);
	if (rc)
		return fail("tp_topology_generate_torus", rc, "");
	tp_cluster *c = NULL;
	if ((rc = tp_cluster_create(&c, t, NULL)))
		return fail("tp_cluster_create", rc, "");
	/* a takes half the torus; b half of the rest; c as asked (2 along x, 4 along y) has no
	 * room, rotated (4x2x2) it fills what is left exactly */
	int bad = slice(c, "a", 4, 4, 2, 0) || slice(c, "b", 4, 2, 2, 0) ||
	          slice(c, "c", 2, 4, 2, 0) || slice(c, "c", 2, 4, 2, 1);
	tp_cluster_destroy(c);
	tp_topology_destroy(t);
	return bad;
}
