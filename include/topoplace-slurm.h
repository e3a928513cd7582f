/*
 * libtopoplace: import a topology from Slurm's topology.conf.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file topoplace-slurm.h
 * @brief Start a ::tp_topology_builder from the text of a Slurm `topology.conf` or
 * `topology.yaml`.
 *
 * The library reads no files: the caller passes the file's text. Both of Slurm's plugins are
 * read (one per file, as Slurm does):
 *
 * - **topology/tree**: `SwitchName=<name> Switches=<hostlist>` and
 *   `SwitchName=<name> Nodes=<hostlist>` lines. Every switch gets Slurm's level (a switch with
 *   nodes is level 0, any other is one more than its highest child), and the topology has one
 *   level per switch level, outermost first, named `switch<k>` (`switch2`, `switch1`, `switch0`),
 *   then the node level `node`. A switch whose parent is more than one level up (or a root below
 *   the top level) also stands for the levels in between, under its own name, so every node has
 *   a domain at every level and leaf switches are always level `switch0`.
 * - **topology/block**: `BlockName=<name> Nodes=<hostlist>` lines and an optional
 *   `BlockSizes=<n>,<n>...` line. The first size is the base block size (default: the first
 *   block's node count); each further size is that times a power of two; without the line the
 *   sizes are the base size times 1, 2, 4, 8 and 16. As in Slurm, the sizes are cut after the
 *   first one that holds every block, and consecutive blocks (in file order) are aggregated in
 *   groups of size/base blocks. Levels: one per aggregation size, largest first, named
 *   `agg<size>` (`agg64`, `agg32`), then `block` (the blocks of the file), then `node`. An
 *   aggregate is named like Slurm names it, by the hostlist of its blocks (`b[1-4]`); trailing
 *   blocks that Slurm leaves out of an aggregate level get a domain of their own at that level,
 *   named as the domain below it.
 *
 * Syntax as Slurm reads it: `Key=Value` pairs separated by blanks (blanks around `=` and
 * double-quoted values allowed), keys case-insensitive, `#` starts a comment, a trailing `\`
 * joins the next line, `LinkSpeed=` is accepted and ignored. Hostlists: comma-separated names
 * with bracketed ranges, several brackets per name (`r[1-2]n[01-18]` is r1n01 ... r2n18, the
 * first bracket varying slowest), zero padding taken from the width of the range's first
 * number (`gpu[001-018,020]`).
 *
 * As Slurm 25.x reads it: what Slurm accepts with at most a warning is imported (a switch with
 * several parents stays below the first; a node on two leaf switches stays on the first; an
 * empty leaf switch; a switch with both Nodes and Switches, whose Nodes below its switches are
 * the union `scontrol show topology` prints and whose other nodes stand below it; a name listed
 * twice; empty hostlist items; `Level=`), and the warnings go to ::tp_slurm_options.warnbuf.
 * Blocks may be empty or smaller than the base block (`AllowGaps=yes`, Slurm 25.05's default;
 * `AllowGaps=no` refuses them); `BlockLevels=0-4` (Slurm 23.11) is read. `RingName` is refused
 * as not yet supported.
 *
 * Every node gets @p gpus_per_node devices and default attributes; fabrics keep the builder's
 * defaults. The caller may set fabrics, add failure domains or more nodes, then build.
 */
#ifndef TOPOPLACE_SLURM_H
#define TOPOPLACE_SLURM_H

#include <stddef.h>

#include "topoplace.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Start a topology builder from a Slurm `topology.conf` (tree or block plugin).
 *
 * No object exists to carry a message when this fails, so the message goes to @p errbuf; it
 * names the line and the problem ("line 4: switch 's2' lists unknown switch 's9'"), is always
 * NUL-terminated and cut to @p errlen bytes, and is "" on success.
 *
 * @param[out] out The builder, owned by the caller (tp_topology_builder_destroy()); NULL on
 *        failure.
 * @param conf The file's text; need not be NUL-terminated. Borrowed for the call.
 * @param len Bytes of @p conf.
 * @param gpus_per_node Devices of every node, 1 to ::TP_MAX_NODE_DEVICES.
 * @param alloc Allocator for the builder and what it builds, or NULL for the C library's.
 * @param errbuf Receives the message of a failure (may be NULL).
 * @param errlen Size of @p errbuf (0 when it is NULL).
 * @return 0; ::TP_EINVAL (NULL @p out or @p conf, @p gpus_per_node out of range, an invalid
 *         allocator); ::TP_EPARSE (a syntax error, an unknown key, a malformed hostlist,
 *         BlockSizes, BlockLevels or AllowGaps, a switch or block defined twice, an unknown switch,
 *         switches in a cycle, a node in two blocks, a block smaller than the base block size with
 *         AllowGaps=no, a bad name, tree and block lines in one file, no switch or block with
 *         nodes, RingName, a topology.yaml); ::TP_ELIMIT (more levels than ::TP_MAX_LEVELS allows,
 *         a hostlist of more than 2^20 names, more than 2^22 nodes, more than
 *         ::TP_DEFAULT_MAX_DEVICES devices: see tp_topology_builder_from_slurm_ext()); ::TP_ENOMEM.
 *         On failure the caller's @p errbuf says why (@p *out is NULL); every call first empties
 *         it.
 * @note Thread-safe: the call shares nothing with other calls.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_from_slurm(tp_topology_builder **out, const char *conf,
                                          size_t len, unsigned gpus_per_node,
                                          const tp_allocator *alloc, char *errbuf,
                                          size_t errlen);

/** @brief Version of ::tp_slurm_options this header describes (2 since 0.4.0: warnings and
 * the topology.yaml entry). */
#define TP_SLURM_OPTIONS_VERSION 2

/**
 * @brief Options of tp_topology_builder_from_slurm_ext() and
 * tp_topology_builder_from_slurm_yaml().
 *
 * Budgets: a short file can name millions of nodes (`Nodes=b0[0-1048575]`), so the import
 * stops, while reading, at the first node past either budget. The builder keeps them
 * (tp_topology_builder_set_limits()).
 *
 * Warnings (version 2): what Slurm 25.x accepts with a warning (a switch with several parents,
 * a node on two leaf switches, an empty leaf switch, a switch with both Nodes and Switches, a
 * name listed twice) is imported and described in @p warnbuf, one warning per line, each
 * ending in `\n` and naming the line ("line 3: switch 'l' has several parents: 'a' (line 1)
 * and 'b'; kept below 'a'"). The library never prints them.
 */
typedef struct tp_slurm_options {
	unsigned version;     /**< ::TP_SLURM_OPTIONS_VERSION (1 or 2) */
	uint32_t max_devices; /**< most devices (nodes x gpus_per_node); 0: ::TP_DEFAULT_MAX_DEVICES */
	uint32_t max_nodes;   /**< most nodes; 0: ::TP_DEFAULT_MAX_NODES */
	/** Version 2: receives the warnings, NUL-terminated, cut to @p warnlen bytes when they do
	 * not fit ("" when there are none; on a failure, those found before it); NULL: none kept.
	 * Owned by the caller. @since 0.4.0 */
	char *warnbuf;
	size_t warnlen; /**< Version 2: size of @p warnbuf. @since 0.4.0 */
	/** Version 2, topology.yaml only: the name of the topology to read (its `topology:`);
	 * NULL: the first with `cluster_default: true`, else the first of the file. Borrowed for
	 * the call. @since 0.4.0 */
	const char *topology;
} tp_slurm_options;

/** @brief Initialiser for ::tp_slurm_options: the default budgets, no warnings kept. */
#define TP_SLURM_OPTIONS_INIT {TP_SLURM_OPTIONS_VERSION, 0, 0, NULL, 0, NULL}

/**
 * @brief Set a ::tp_slurm_options to ::TP_SLURM_OPTIONS_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] o The struct to fill; its version field becomes @p version.
 * @param version ::TP_SLURM_OPTIONS_VERSION, or an older version the library still reads (1 or 2):
 *        only the fields of that version are written, so a caller built against an older header is
 *        not overrun.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is none of these (nothing is written;
 *         no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_slurm_options_init(tp_slurm_options *o, unsigned version);

/**
 * @brief tp_topology_builder_from_slurm() with budgets.
 * @param[out] out The builder, owned by the caller; NULL on failure.
 * @param conf The file's text. @param len Bytes of @p conf.
 * @param gpus_per_node Devices of every node, 1 to ::TP_MAX_NODE_DEVICES.
 * @param alloc Allocator, or NULL.
 * @param opts Budgets, or NULL for the defaults.
 * @param errbuf Receives the message of a failure (may be NULL). @param errlen Its size.
 * @return as tp_topology_builder_from_slurm(), and ::TP_EINVAL (`opts->version` not 1 to
 *         ::TP_SLURM_OPTIONS_VERSION, a budget above ::TP_LIMIT_MAX_DEVICES), ::TP_ELIMIT (more
 *         nodes or devices than a budget: the message names the line, the figure and the option).
 *         On failure the caller's @p errbuf says why (@p *out is NULL); every call first empties
 *         it.
 * @note Thread-safe. @since 0.3.0
 */
TP_API int tp_topology_builder_from_slurm_ext(tp_topology_builder **out, const char *conf,
                                              size_t len, unsigned gpus_per_node,
                                              const tp_allocator *alloc,
                                              const tp_slurm_options *opts, char *errbuf,
                                              size_t errlen);

/**
 * @brief Start a topology builder from a Slurm `topology.yaml` (Slurm 24.05 and later; read
 * before topology.conf when both exist).
 *
 * The file is a YAML list of topologies as topology.yaml(5) defines them: each a mapping with
 * `topology` (its name), optionally `cluster_default`, and one of `tree` (`switches`: a list
 * of `switch`, `children`, `nodes`), `block` (`block_sizes`, `blocks`: a list of `block`,
 * `nodes`) or `flat`. The topology read is `opts->topology`, else the first with
 * `cluster_default: true`, else the first. A tree or block topology gives the levels and
 * domains tp_topology_builder_from_slurm() gives for the same topology.conf, with the same
 * leniencies and warnings; `flat`, `ring` and `torus3d` topologies are refused as not yet
 * supported. Parsed with libyaml; no file is read.
 *
 * @param[out] out The builder, owned by the caller; NULL on failure.
 * @param yaml The file's text (UTF-8). @param len Bytes of @p yaml.
 * @param gpus_per_node Devices of every node, 1 to ::TP_MAX_NODE_DEVICES.
 * @param alloc Allocator for the builder, or NULL (libyaml's own allocations use the C
 *        library's).
 * @param opts Budgets, warnings, the topology to read; or NULL.
 * @param errbuf Receives the message of a failure, naming the line of the YAML and the
 *        topology (may be NULL). @param errlen Its size.
 * @return 0; ::TP_EINVAL (as tp_topology_builder_from_slurm_ext()); ::TP_EPARSE (not YAML, not a
 *         list of topologies, an unknown or missing key, a value of the wrong kind, no topology of
 *         the name asked, a flat, ring or torus3d topology, and every error of topology.conf);
 *         ::TP_ELIMIT; ::TP_ENOMEM. On failure the caller's @p errbuf says why (@p *out is NULL);
 *         every call first empties it.
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_topology_builder_from_slurm_yaml(tp_topology_builder **out, const char *yaml,
                                               size_t len, unsigned gpus_per_node,
                                               const tp_allocator *alloc,
                                               const tp_slurm_options *opts, char *errbuf,
                                               size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TOPOPLACE_SLURM_H */
