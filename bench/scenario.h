/* SPDX-License-Identifier: MIT */
/*
 * The topology of a scenario-v1 document (../shared/spec/scenario-v1.md) as a tp_topology, for
 * `tp-bench sim --fleet scenario:FILE`. The library reads no files; the harness does, here.
 */
#ifndef TP_BENCH_SCENARIO_H
#define TP_BENCH_SCENARIO_H

#include <stddef.h>

#include "topoplace.h"

/*
 * Read the scenario file at `path` and build the topology its `topology` section describes.
 *
 * The document must be strict JSON (bench/json.h) whose `version` is 1. `topology` is read as
 * scenario-v1.md says: `levels`; `fabric` (each level's link, with the spec's defaults for
 * what is left out); `generate` (a regular tree named `<level><index>`, nodes
 * `block0-rack1-node17`, built by tp_topology_builder_generate); then `nodes` in order (name,
 * path, gpus, model, memory_gb, perf as one number or one per device, and `hwloc`: an hwloc XML
 * file, relative to the scenario's folder, whose GPUs become the node's devices); then
 * `failure_domains`. The sections `state`, `request`, `policy` and `replace` are allowed and
 * ignored (not validated); any other key, at the top or anywhere inside `topology`, is an error.
 *
 * On failure returns NULL and writes to err (always NUL-terminated, cut to errlen bytes) a
 * message in the words of the Python CLI: the offending field as a dotted path with brackets,
 * then why ("topology.nodes[3].gpus: must be at least 1, not 0"); a JSON syntax error says
 * where ("not a valid JSON document: duplicate key \"levels\": line 3 column 5 (byte 40)"); an
 * error only the builder finds is passed on with tp_topology_builder_errmsg() after the field it
 * concerns ("topology.nodes[2]: <builder message>"). On success err is set to "".
 *
 * Returns a topology owned by the caller (tp_topology_destroy()), made with the C library's
 * allocator. Nothing else stays allocated either way. Keeps no state between calls (messages
 * use strerror(); hwloc reads its HWLOC_* environment variables while importing a node's file).
 */
tp_topology *bench_scenario_topology(const char *path, char *err, size_t errlen);

/*
 * The same for a document already in memory: text[0..len), with `hwloc` paths taken relative to
 * the folder `dir` ("." when NULL). bench_scenario_topology() reads the file and calls this; the
 * tests call it with inline documents.
 */
tp_topology *bench_scenario_topology_from_text(const char *text, size_t len, const char *dir,
                                               char *err, size_t errlen);

#endif
