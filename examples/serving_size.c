/* SPDX-License-Identifier: MIT */
/*
 * Sizing: the ways to serve Llama-3.1-70B (fp16) for 100 concurrent sequences of 8192 tokens on
 * two HGX H100 nodes, fewest GPUs first (docs/serving.md works the figures out by hand).
 *
 *   build/examples/serving_size
 */
#include <stdio.h>

#include <topoplace-sizing.h>

int main(void)
{
	static const char *const levels[] = {"rack", "node"};
	tp_topology_builder *b = NULL;
	tp_topology *t = NULL;
	int rc = tp_topology_builder_create(&b, levels, 2, NULL);
	unsigned counts[2] = {1, 2};
	tp_node_options no = TP_NODE_OPTIONS_INIT;
	no.model = "H100";
	no.memory_gb = 80;
	if (!rc)
		rc = tp_topology_builder_generate(b, counts, 8, &no);
	if (!rc)
		rc = tp_topology_build(b, &t);
	if (rc) {
		fprintf(stderr, "topology: %s: %s\n", tp_err_name(rc),
		        b ? tp_topology_builder_errmsg(b) : "");
		tp_topology_builder_destroy(b);
		return 1;
	}
	tp_topology_builder_destroy(b);

	tp_model_desc m = TP_MODEL_DESC_INIT; /* fp16 weights and KV cache */
	m.params = 70.6e9;
	m.layers = 80;
	m.heads = 64;
	m.kv_heads = 8;
	m.head_dim = 128;
	m.hidden = 8192;
	tp_sizing_options o = TP_SIZING_OPTIONS_INIT;
	o.context = 8192;
	o.sequences = 100;
	tp_sizing *s = NULL;
	rc = tp_size_model(t, &m, &o, &s);
	if (rc) {
		fprintf(stderr, "size: %s: %s\n", tp_err_name(rc), tp_sizing_errmsg(s));
	} else {
		printf("%-6s %3s %3s %8s %5s %10s %7s %8s\n", "device", "tp", "pp", "replicas", "GPUs",
		       "weights GB", "KV GB", "seqs");
		for (size_t i = 0; i < tp_sizing_count(s); i++) {
			const tp_sizing_option *x = tp_sizing_get(s, i);
			printf("%-6s %3u %3u %8u %5u %10.2f %7.2f %8u\n", x->model, x->tp, x->pp,
			       x->replicas, x->gpus, x->weights_gb, x->kv_gb, x->sequences);
		}
	}
	tp_sizing_destroy(s);
	tp_topology_destroy(t);
	return rc ? 1 : 0;
}
