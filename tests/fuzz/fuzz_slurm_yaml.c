/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: tp_topology_builder_from_slurm_yaml() on arbitrary bytes. The first byte picks
 * the GPUs per node (bits 0-2), whether warnings are kept in a small buffer (bit 3) and
 * whether the topology named "b" is asked for (bit 4). Build with a fuzzing engine (meson
 * -Dfuzz=enabled, clang) or replay the saved corpus with tests/fuzz/replay.c.
 *
 * Checks, beyond "no crash": the result code is one the API documents; a failure leaves *out
 * NULL with a message; a success gives a builder that builds a topology whose every node sits
 * in one domain of every level; the warnings are NUL-terminated inside their buffer; every
 * byte allocated through the allocator is freed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topoplace-slurm.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_slurm_yaml"
#include "counting.h"

static void check_topology(const tp_topology *t)
{
	unsigned nl = tp_topology_level_count(t);
	check(nl >= 2 && nl <= TP_MAX_LEVELS, "level count out of range");
	for (uint32_t n = 0; n < tp_topology_node_count(t); n++)
		for (unsigned l = 0; l < nl; l++)
			check(tp_topology_node_domain(t, n, l) < tp_topology_domain_count(t, l),
			      "a node outside every domain of a level");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned gpus = 1u + data[0] % 8u;
	char warn[96];
	memset(warn, 'x', sizeof warn);
	tp_slurm_options o = TP_SLURM_OPTIONS_INIT;
	if (data[0] & 8u) {
		o.warnbuf = warn;
		o.warnlen = sizeof warn;
	}
	if (data[0] & 16u)
		o.topology = "b";
	tp_topology_builder *b = NULL;
	char err[256];
	live = 0;
	int rc = tp_topology_builder_from_slurm_yaml(&b, (const char *)data + 1, size - 1, gpus,
	                                             &counting, &o, err, sizeof err);
	if (o.warnbuf)
		check(memchr(warn, '\0', sizeof warn) != NULL, "warnings not NUL-terminated");
	if (rc == 0) {
		check(b != NULL, "success without a builder");
		check(err[0] == '\0', "a success with a message");
		tp_topology *t = NULL;
		int brc = tp_topology_build(b, &t);
		check(brc == 0 || brc == TP_EINVAL || brc == TP_ENOMEM, "build: undocumented code");
		if (brc == 0)
			check_topology(t);
		tp_topology_destroy(t);
		tp_topology_builder_destroy(b);
	} else {
		check(rc == TP_EPARSE || rc == TP_ELIMIT || rc == TP_ENOMEM || rc == TP_EINVAL,
		      "an undocumented error code");
		check(b == NULL && err[0] != '\0', "a failure without a message or with an object");
	}
	check(live == 0, "memory from the allocator leaked");
	return 0;
}
