/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: tp_nodetype_from_hwloc_xml() on arbitrary bytes. Build with a fuzzing engine
 * (meson -Dfuzz=enabled, clang) or replay the saved corpus with tests/fuzz/replay.c.
 *
 * Checks, beyond "no crash": the result code is one the API documents, a failure leaves *out
 * NULL and a message, a success gives a node type whose GPUs, switches and NICs are consistent,
 * and every byte allocated through the allocator is freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "topoplace-hwloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_hwloc"
#include "counting.h"

static void check_nodetype(const tp_nodetype *nt)
{
	unsigned g = tp_nodetype_gpu_count(nt), nsw = tp_nodetype_pcie_switch_count(nt);
	check(g >= 1 && g <= TP_MAX_NODE_DEVICES, "GPU count out of range");
	for (unsigned i = 0; i < nsw; i++) {
		uint32_t p = 0;
		check(tp_nodetype_pcie_switch_parent(nt, i, &p) == 0 && (p == TP_NONE || p < i),
		      "a switch's parent comes after it");
	}
	for (unsigned i = 0; i < g; i++) {
		uint32_t s = 0;
		check(tp_nodetype_gpu_switch(nt, i, &s) == 0 && (s == TP_NONE || s < nsw),
		      "a GPU sits behind an unknown switch");
		for (unsigned j = 0; j < g; j++) {
			double bw = tp_nodetype_nvlink_gbps(nt, i, j);
			check(bw >= 0 && bw == tp_nodetype_nvlink_gbps(nt, j, i), "NVLink not symmetric");
		}
	}
	for (unsigned i = 0; i < tp_nodetype_nic_count(nt); i++)
		check(tp_nodetype_nic_name(nt, i) != NULL, "a NIC without a name");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	tp_nodetype *nt = NULL;
	char err[256];
	live = 0;
	int rc = tp_nodetype_from_hwloc_xml(&nt, (const char *)data, size, &counting, err,
	                                    sizeof err);
	if (rc == 0) {
		check(nt != NULL && err[0] == '\0', "success without a node type");
		check_nodetype(nt);
		tp_nodetype_destroy(nt);
	} else {
		check(rc == TP_EPARSE || rc == TP_ENOTFOUND || rc == TP_ELIMIT || rc == TP_ENOMEM,
		      "an undocumented error code");
		check(nt == NULL && err[0] != '\0', "a failure without a message or with an object");
	}
	check(live == 0, "memory from the allocator leaked");
	return 0;
}
