/*
 * libtopoplace: import a node type from `nvidia-smi topo -m`.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file topoplace-nvsmi.h
 * @brief Build a ::tp_nodetype from the text `nvidia-smi topo -m` prints.
 *
 * The matrix every NVIDIA node prints and users paste: one column per GPU (`GPU0` ...) and per
 * NIC (`NIC0` ... with a `NIC Legend`, or the NIC's own name as older drivers print it), then
 * `CPU Affinity`, `NUMA Affinity` and `GPU NUMA ID` columns; one row per GPU and per NIC; then
 * the `Legend:` and `NIC Legend:` blocks. Needs nothing beyond topoplace.h. The library reads no
 * files: the caller passes the text as a buffer. See docs/importers.md for what is read and what
 * is left out.
 */
#ifndef TOPOPLACE_NVSMI_H
#define TOPOPLACE_NVSMI_H

#include <stddef.h>

#include "topoplace.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The version of ::tp_nvsmi_options this header describes. @since 0.3.0 */
#define TP_NVSMI_OPTIONS_VERSION 1

/**
 * @brief The default NVLink bandwidth of one link, GB/s one direction: NVLink 2 (V100), 3
 * (A100) and 4 (H100) all carry 25 GB/s per link and direction, so `NV12` on a DGX A100 is
 * 300 GB/s and `NV18` on an H100 450 GB/s. Set 50 for NVLink 5 (B200, GB200). @since 0.3.0
 */
#define TP_NVSMI_DEFAULT_LINK_GBPS 25.0

/** @brief Options of tp_nodetype_from_nvsmi_topo(). @since 0.3.0 */
typedef struct tp_nvsmi_options {
	unsigned version;        /**< ::TP_NVSMI_OPTIONS_VERSION */
	double nvlink_link_gbps; /**< GB/s one direction per NVLink (`NV#` gives # times this);
	                              > 0; ::TP_NVSMI_DEFAULT_LINK_GBPS by default */
} tp_nvsmi_options;

/** @brief Initialiser of ::tp_nvsmi_options with the defaults. @since 0.3.0 */
#define TP_NVSMI_OPTIONS_INIT {TP_NVSMI_OPTIONS_VERSION, TP_NVSMI_DEFAULT_LINK_GBPS}

/**
 * @brief Set a ::tp_nvsmi_options to ::TP_NVSMI_OPTIONS_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] o The struct to fill; its version field becomes @p version.
 * @param version ::TP_NVSMI_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is not ::TP_NVSMI_OPTIONS_VERSION
 *         (nothing is written; no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_nvsmi_options_init(tp_nvsmi_options *o, unsigned version);

/**
 * @brief Build a node type from the output of `nvidia-smi topo -m`.
 *
 * What is read (docs/importers.md, "nvidia-smi topo -m"):
 * - **GPUs**: the `GPU<i>` columns, in order (GPU `i` is nvidia-smi's and CUDA's device `i`
 *   under the default `CUDA_DEVICE_ORDER=PCI_BUS_ID`).
 * - **NICs**: every other matrix column, named by the `NIC Legend` (`NIC0: mlx5_0`) or by the
 *   column itself (`mlx5_0`); all of kind ::TP_NIC_RDMA (nvidia-smi lists RDMA devices).
 * - **PCIe switches**: devices joined by `PIX` (at most one bridge between them) share a switch;
 *   `PIX` groups joined by `PXB` (several bridges, no host bridge) hang below one switch above
 *   them; a device in a `PXB` group without a `PIX` partner sits on that upper switch; devices
 *   with neither sit on the host bridge (-1).
 * - **Locality**: `PHB` (and closer) groups are host bridges, `NODE` (and closer) groups NUMA
 *   nodes, numbered by a GPU's `NUMA Affinity` when the group has a GPU with one number there.
 * - **NVLink**: `NV#` gives # times @p opts->nvlink_link_gbps between the two GPUs (refused
 *   above 10000 GB/s, as the hwloc importer does).
 *
 * Strict: the header must come first (blank lines aside), every row must name its device in
 * column order, every entry must be one of `X` (the diagonal only), `NV#` (# 1 to 64, GPU pairs
 * only), `PIX`, `PXB`, `PHB`, `NODE`, `SYS` (or `SOC`, its old name), and the matrix must be
 * symmetric. After the rows come only blank lines, the `Legend:` block and the `NIC Legend:`
 * block. Every failure is ::TP_EPARSE with a message naming the line and column and why
 * ("line 3, column 17: 'NVX' is not a topology entry (X, NV#, PIX, PXB, PHB, NODE, SYS)").
 *
 * @param[out] out The node type, owned by the caller (tp_nodetype_destroy()); NULL on failure.
 * @param text The text; need not be NUL-terminated (NULs at the end are ignored, one before
 *        the end is an error). Borrowed.
 * @param len Bytes of @p text (1 to 2^20).
 * @param opts Options, or NULL for the defaults.
 * @param alloc Allocator for the node type, or NULL for the C library's.
 * @param errbuf Receives the message of a failure (may be NULL); NUL-terminated, cut to
 *        @p errlen bytes, "" on success.
 * @param errlen Size of @p errbuf (0 when it is NULL).
 * @return 0; ::TP_EINVAL (NULL @p out or @p text, an invalid allocator, @p opts of another version
 *         or with a link bandwidth that is not a number > 0 and up to 10000 / 64); ::TP_EPARSE (the
 *         text is empty or not as above); ::TP_ELIMIT (more than ::TP_MAX_NODE_DEVICES GPUs, more
 *         than 256 NICs, @p len above 2^20); ::TP_ENOMEM. On failure the caller's @p errbuf says
 *         why (@p *out is NULL); every call first empties it.
 * @note Thread-safe: no state is shared between calls.
 * @since 0.3.0
 */
TP_API int tp_nodetype_from_nvsmi_topo(tp_nodetype **out, const char *text, size_t len,
                                       const tp_nvsmi_options *opts, const tp_allocator *alloc,
                                       char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TOPOPLACE_NVSMI_H */
