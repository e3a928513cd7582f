/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: tp_scenario_from_json() on arbitrary bytes. The first byte picks the command
 * (low 3 bits, 0 to 4), strict (bit 3) and whether allocation number (byte >> 4) fails; the rest
 * is the document. Build with a fuzzing engine (meson -Dfuzz=enabled, clang) or replay the
 * saved corpus with tests/fuzz/replay.c.
 *
 * Checks, beyond "no crash": the code is one the header documents; a failure leaves *out NULL
 * with a non-empty message; a success leaves "" and gives a topology, a cluster for every
 * command but topology (consistent by tp_cluster_check()), the request of place and defrag
 * (which tp_place() then answers with a documented code), the policy of defrag only and the
 * replace job of replace only; every block allocated through the allocator is freed. Scenarios
 * are capped at 4096 devices so that every input stays fast.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "topoplace-scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_NAME "fuzz_scenario"
#include "counting.h"

/* hwloc files: "x.xml" reads as a tiny non-hwloc file, anything else is missing. */
static int read_file(void *ud, const char *path, const void **out, size_t *len, char *why,
                     size_t whylen)
{
	(void)ud;
	static const char xml[] = "<?xml version=\"1.0\"?><topology></topology>";
	if (!strcmp(path, "x.xml")) {
		*out = xml;
		*len = sizeof xml - 1;
		return 0;
	}
	snprintf(why, whylen, "No such file or directory");
	return -1;
}

static void check_success(tp_scenario *sc, tp_scenario_command cmd)
{
	check(tp_scenario_topology(sc) != NULL, "no topology");
	tp_cluster *c = tp_scenario_cluster(sc);
	check((c != NULL) == (cmd != TP_SCENARIO_TOPOLOGY), "a cluster for the wrong command");
	if (c) {
		char why[256];
		check(tp_cluster_check(c, why, sizeof why) == 0, why);
	}
	const tp_request *r = tp_scenario_request(sc);
	check((r != NULL) == (cmd == TP_SCENARIO_PLACE || cmd == TP_SCENARIO_DEFRAG),
	      "a request for the wrong command");
	check((tp_scenario_policy(sc) != NULL) == (cmd == TP_SCENARIO_DEFRAG),
	      "a policy for the wrong command");
	check((tp_scenario_replace_job(sc) != NULL) == (cmd == TP_SCENARIO_REPLACE),
	      "a replace job for the wrong command");
	if (r && c) {
		tp_placement *p = NULL;
		int rc = tp_place(c, r, &p);
		check(rc == 0 || rc == TP_EINVAL || rc == TP_ENOTFOUND || rc == TP_EINFEASIBLE ||
		          rc == TP_EBUSY || rc == TP_EFRAGMENTED || rc == TP_ENOMEM || rc == TP_ELIMIT,
		      "tp_place returned an undocumented code");
		tp_placement_destroy(p);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	tp_scenario_options o = TP_SCENARIO_OPTIONS_INIT;
	o.command = (tp_scenario_command)((data[0] & 7u) % 5u);
	o.strict = (data[0] >> 3) & 1u;
	o.read_file = read_file;
	o.max_devices = 4096;
	o.alloc = &counting;
	live = calls = 0;
	fail_at = data[0] >> 4 ? (long)(data[0] >> 4) * 3 : -1;
	tp_scenario *sc = (tp_scenario *)&o;
	char err[512];
	int rc = tp_scenario_from_json(&sc, (const char *)data + 1, size - 1, &o, err, sizeof err);
	check(rc == 0 || rc == TP_EPARSE || rc == TP_ELIMIT || rc == TP_ENOMEM,
	      "undocumented code");
	if (rc == 0) {
		check(err[0] == '\0', "a message after a success");
		check_success(sc, o.command);
	} else {
		check(sc == NULL, "*out not NULL after a failure");
		check(err[0] != '\0', "a failure without a message");
	}
	tp_scenario_destroy(sc);
	check(live == 0, "a block leaked");
	return 0;
}
