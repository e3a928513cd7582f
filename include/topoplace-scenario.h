/*
 * libtopoplace: import a scenario-v1 document (JSON).
 * SPDX-License-Identifier: MIT
 */
/**
 * @file topoplace-scenario.h
 * @brief Build the topology, the cluster state and the question of a scenario-v1 document.
 *
 * The scenario format (`spec/scenario-v1.md`) describes a topology, the state of a cluster on
 * it (running jobs, down and cordoned devices) and one question: a `request` to place (or to
 * make room for, with a defrag `policy`), or a `replace` of a job's failed devices. This
 * importer reads such a document from a buffer (the library reads no files; a node's `hwloc`
 * file is read through a callback of the caller) and builds every part of it:
 * tp_scenario_topology(), tp_scenario_cluster(), tp_scenario_request(), tp_scenario_policy(),
 * tp_scenario_replace_job() and tp_scenario_replace_failed().
 *
 * Validation is that of the command-line tool `python3 -m topoplace`, word for word: the JSON is
 * strict (a key given twice, NaN, a lone surrogate or trailing data is an error), unknown keys
 * are errors with a "did you mean" hint, and every message starts with the offending field as a
 * dotted path with `[i]` for list items, then says why
 * ("request.slices[1].size: 6 does not divide count 8").
 *
 * The importer is optional: it is built when jansson (Debian's `libjansson-dev`) is found.
 * jansson's allocations use the C library's allocator (its hooks are process-wide, which a
 * library must not change); everything else, and everything that outlives the call, uses the
 * caller's ::tp_allocator.
 */
#ifndef TOPOPLACE_SCENARIO_H
#define TOPOPLACE_SCENARIO_H

#include <stddef.h>
#include <stdint.h>

#include "topoplace.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief What a scenario is read for: which sections are validated and built. */
typedef enum tp_scenario_command {
	/** The topology only: `state`, `request`, `policy` and `replace` are allowed and
	 *  ignored. No cluster is built. */
	TP_SCENARIO_TOPOLOGY = 0,
	/** `place`: the state and the (required) request. */
	TP_SCENARIO_PLACE = 1,
	/** `defrag`: the state, the (required) request and the policy (defaults when absent). */
	TP_SCENARIO_DEFRAG = 2,
	/** `frag`: the state. */
	TP_SCENARIO_FRAG = 3,
	/** `replace`: the state and the (required) replace section. */
	TP_SCENARIO_REPLACE = 4
} tp_scenario_command;

/**
 * @brief Read a file a scenario names (a node's `hwloc`), on behalf of the importer.
 *
 * @param ud The options' user pointer.
 * @param path The path as the document writes it (the caller resolves a relative one, usually
 *        against the scenario's folder).
 * @param[out] data The file's bytes, borrowed by the importer until tp_scenario_from_json()
 *        returns.
 * @param[out] len Bytes of @p data.
 * @param why Receives the reason of a failure ("No such file or directory").
 * @param whylen Size of @p why.
 * @return 0, or any negative value when the file cannot be read.
 */
typedef int (*tp_scenario_read_fn)(void *ud, const char *path, const void **data, size_t *len,
                                   char *why, size_t whylen);

/** @brief Version of ::tp_scenario_options this header describes. */
#define TP_SCENARIO_OPTIONS_VERSION 1

/** @brief How tp_scenario_from_json() reads a document. */
typedef struct tp_scenario_options {
	unsigned version;              /**< ::TP_SCENARIO_OPTIONS_VERSION */
	tp_scenario_command command;   /**< the sections to read (::TP_SCENARIO_TOPOLOGY) */
	int strict;                    /**< also validate the sections the command does not use
	                                    (they are never built) */
	tp_scenario_read_fn read_file; /**< reads `hwloc` files; NULL: a node with `hwloc` is
	                                    refused ("not supported by this build") */
	void *ud;                      /**< passed to @c read_file */
	uint32_t max_devices;          /**< most devices the topology may have (0: 2^24) */
	const tp_allocator *alloc;     /**< allocator of the objects built, or NULL */
} tp_scenario_options;

/** @brief Initialiser for ::tp_scenario_options: topology only, not strict, no file reader,
 *  at most 2^24 devices, the C library's allocator. */
#define TP_SCENARIO_OPTIONS_INIT                                                              \
	{TP_SCENARIO_OPTIONS_VERSION, TP_SCENARIO_TOPOLOGY, 0, NULL, NULL, 0, NULL}

/**
 * @brief Set @p opts to the defaults of ::TP_SCENARIO_OPTIONS_INIT.
 * @param opts The options to set.
 * @param version ::TP_SCENARIO_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p opts is NULL or @p version is not
 *         ::TP_SCENARIO_OPTIONS_VERSION (nothing is written; no object carries a message for
 *         this call).
 * @note Thread-safe.
 * @since 0.3.0
 */
TP_API int tp_scenario_options_init(tp_scenario_options *opts, unsigned version);

/** @brief An imported scenario (opaque): its topology, cluster state and question. */
typedef struct tp_scenario tp_scenario;

/**
 * @brief Read a scenario-v1 document and build what @p opts->command needs.
 *
 * Builds the topology (`levels`, `fabric` with the spec's defaults, `generate`, then `nodes`
 * in order, then `failure_domains`); for every command but ::TP_SCENARIO_TOPOLOGY the cluster
 * state (`state.jobs` with their classes, priorities, tenants, flags, checkpoint costs and own
 * requests; device lists are taken first, then counts take the lowest free indices in job
 * order; then `state.down` and `state.cordoned`); and the command's question: the request
 * (place, defrag), the policy (defrag: the spec's defaults when absent; `allow_less_local` is
 * set, as scenario-v1 plans let a job without a request restart on any free devices), or the
 * replace section (replace).
 *
 * No object exists to carry a message when this fails, so the message goes to @p errbuf
 * (always NUL-terminated, cut to @p errlen bytes; "" on success). It is the message the
 * command-line tool gives: the field's dotted path, then why
 * ("topology.nodes[2].name: duplicate node name \"x1\" (also topology.nodes[0])"); a document
 * that is not JSON says where ("not a valid JSON document: ... line 3 column 5"); a refusal of
 * the library's builder or cluster comes after the field it concerns.
 *
 * @param[out] out The scenario, owned by the caller (tp_scenario_destroy()); NULL on failure.
 * @param json The document's text; need not be NUL-terminated. Borrowed for the call.
 * @param len Bytes of @p json.
 * @param opts Options, or NULL for ::TP_SCENARIO_OPTIONS_INIT.
 * @param errbuf Receives the message of a failure (may be NULL).
 * @param errlen Size of @p errbuf (0 when it is NULL).
 * @return 0; ::TP_EINVAL (NULL @p out or @p json, an unknown options version or command, an
 *         allocator that lacks a function; the message names the argument); ::TP_EPARSE (the
 *         document is not valid JSON or not a valid scenario: every message of the command-line
 *         tool); ::TP_ELIMIT (more than @c max_devices devices); ::TP_ENOMEM. On failure the
 *         caller's @p errbuf says why (@p *out is NULL); every call first empties it.
 * @note Thread-safe: the call shares nothing with other calls (a @c read_file callback is
 *       called on the caller's thread).
 * @since 0.3.0
 */
TP_API int tp_scenario_from_json(tp_scenario **out, const char *json, size_t len,
                                 const tp_scenario_options *opts, char *errbuf, size_t errlen);

/** @brief Destroy a scenario and everything it owns. @param s The scenario, or NULL.
 *  @since 0.3.0 */
TP_API void tp_scenario_destroy(tp_scenario *s);

/**
 * @brief The scenario's topology.
 * @param s The scenario.
 * @return The topology, owned by @p s (NULL for a NULL @p s). *Read-only.*
 * @since 0.3.0
 */
TP_API const tp_topology *tp_scenario_topology(const tp_scenario *s);

/**
 * @brief Take the topology out of a scenario read for ::TP_SCENARIO_TOPOLOGY.
 * @param s The scenario; it keeps no topology afterwards (tp_scenario_topology() gives NULL).
 * @param[out] out The topology, owned by the caller (tp_topology_destroy()).
 * @return 0, ::TP_EINVAL (NULL argument, no topology left, or the scenario has a cluster that uses
 *         it). No message: only a NULL or spent argument fails.
 * @since 0.3.0
 */
TP_API int tp_scenario_topology_take(tp_scenario *s, tp_topology **out);

/**
 * @brief The scenario's cluster state: its jobs, down and cordoned devices.
 * @param s The scenario.
 * @return The cluster, owned by @p s (the caller may change it, one writer at a time), or NULL
 *         for ::TP_SCENARIO_TOPOLOGY.
 * @since 0.3.0
 */
TP_API tp_cluster *tp_scenario_cluster(tp_scenario *s);

/**
 * @brief The scenario's request (place, defrag).
 * @param s The scenario.
 * @return The request, owned by @p s (its strings too), or NULL when the command has none.
 *         *Read-only.*
 * @since 0.3.0
 */
TP_API const tp_request *tp_scenario_request(const tp_scenario *s);

/**
 * @brief The scenario's defrag policy (defrag).
 * @param s The scenario.
 * @return The policy, owned by @p s, or NULL when the command is not defrag. *Read-only.*
 * @since 0.3.0
 */
TP_API const tp_defrag_policy *tp_scenario_policy(const tp_scenario *s);

/**
 * @brief The job of the scenario's `replace` section (replace).
 * @param s The scenario.
 * @return The job id, owned by @p s, or NULL when the command is not replace. *Read-only.*
 * @since 0.3.0
 */
TP_API const char *tp_scenario_replace_job(const tp_scenario *s);

/**
 * @brief The failed devices of the scenario's `replace` section, in the document's order (a
 *        failed node stands for all its devices; a device named twice is given once).
 * @param s The scenario.
 * @param[out] devices The device ids, owned by @p s (NULL when there are none).
 * @param[out] n The number of ids.
 * @return 0, ::TP_EINVAL (NULL argument). *Read-only.* No message: only a NULL or spent argument
 *         fails.
 * @since 0.3.0
 */
TP_API int tp_scenario_replace_failed(const tp_scenario *s, const uint32_t **devices,
                                      size_t *n);

#ifdef __cplusplus
}
#endif

#endif /* TOPOPLACE_SCENARIO_H */
