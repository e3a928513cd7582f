/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: tp_nodetype_from_nvsmi_topo() on arbitrary bytes (the first byte picks the
 * NVLink bandwidth per link). Build with a fuzzing engine (meson -Dfuzz=enabled, clang) or
 * replay the saved corpus with tests/fuzz/replay.c.
 *
 * Checks, beyond "no crash": the result code is one the API documents; a failure leaves *out
 * NULL with a message; a success gives a node type whose switches, NICs and NVLink figures are
 * consistent (parents before children, NVLink symmetric and bounded, every GPU's nearest NIC a
 * NIC); every byte allocated through the allocator is freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "topoplace-nvsmi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_nvsmi"
#include "counting.h"

static void check_nodetype(const tp_nodetype *nt)
{
	unsigned g = tp_nodetype_gpu_count(nt), ns = tp_nodetype_pcie_switch_count(nt);
	unsigned nn = tp_nodetype_nic_count(nt);
	check(g >= 1 && g <= TP_MAX_NODE_DEVICES, "GPU count out of range");
	for (unsigned s = 0; s < ns; s++) {
		uint32_t p = 0;
		check(tp_nodetype_pcie_switch_parent(nt, s, &p) == 0 && (p == TP_NONE || p < s),
		      "a switch below a later switch");
	}
	for (unsigned i = 0; i < g; i++) {
		uint32_t s = 0;
		check(tp_nodetype_gpu_switch(nt, i, &s) == 0 && (s == TP_NONE || s < ns),
		      "a GPU behind an unknown switch");
		int n = tp_nodetype_gpu_nearest_nic(nt, i);
		check(nn ? n >= 0 && n < (int)nn : n == TP_ENOTFOUND, "nearest NIC out of range");
		for (unsigned j = 0; j < g; j++) {
			double v = tp_nodetype_nvlink_gbps(nt, i, j);
			check(v == tp_nodetype_nvlink_gbps(nt, j, i), "NVLink not symmetric");
			check(v >= 0 && v <= 10000 && (i != j || v == 0), "NVLink figure out of range");
		}
	}
	for (unsigned i = 0; i < nn; i++) {
		check(tp_nodetype_nic_name(nt, i) != NULL, "a NIC without a name");
		check(tp_nodetype_nic_kind(nt, i) == TP_NIC_RDMA, "a NIC not RDMA");
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	tp_nvsmi_options o = TP_NVSMI_OPTIONS_INIT;
	o.nvlink_link_gbps = 1.0 + data[0] % 150u;
	tp_nodetype *nt = NULL;
	char err[256];
	live = 0;
	int rc = tp_nodetype_from_nvsmi_topo(&nt, (const char *)data + 1, size - 1, &o, &counting,
	                                     err, sizeof err);
	if (rc == 0) {
		check(nt != NULL && err[0] == '\0', "success without a node type or with a message");
		check_nodetype(nt);
		tp_nodetype_destroy(nt);
	} else {
		check(rc == TP_EPARSE || rc == TP_ELIMIT || rc == TP_ENOMEM,
		      "an undocumented error code");
		check(nt == NULL && err[0] != '\0', "a failure without a message or with an object");
	}
	check(live == 0, "memory from the allocator leaked");
	return 0;
}
