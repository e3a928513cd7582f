/*
 * libtopoplace: import a node type from hwloc.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file topoplace-hwloc.h
 * @brief Build a ::tp_nodetype from an hwloc topology (XML of hwloc 1.x or 2.x, read by hwloc 2.x).
 *
 * The only public header that names hwloc types; include it only where hwloc is wanted
 * (compile with `pkg-config --cflags hwloc`). The library reads no files: the caller passes the
 * XML as a buffer, or a topology it loaded itself.
 *
 * What is read (see docs/importers.md for the details and examples):
 * - **GPUs**, in PCI bus-id order (domain, bus, device, function: the order CUDA, NVML and
 *   Slurm's GRES number them, not the file's, which hwloc writes by NUMA node): every PCI device
 *   that carries an NVML or CUDA OS device (by subtype, `Backend` info or name `nvml<N>` /
 *   `cuda<N>`) or an RSMI one (AMD: `rsmi<N>`), every PCI device of NVIDIA (vendor 0x10de) with a
 *   display/3D class (0x03xx), and every one of AMD (0x1002) with class 0x0380 or 0x12xx
 *   (Instinct accelerators) that carries none. GPU `i` of the node type is the i-th such device;
 *   tp_nodetype_gpu_bus_id() gives its bus id. AMD's VGA parts (0x0300) are not GPUs here.
 * - **PCIe switches**: hwloc shows a PCIe switch as an upstream-port bridge whose children are
 *   downstream-port bridges. Counting PCI-to-PCI bridges from the host bridge (1 = root port,
 *   2 = switch upstream port, 3 = its downstream ports, 4 = the upstream port of a switch below,
 *   ...), each bridge at an even count is one switch, and its downstream ports are part of it.
 *   Root ports and host bridges are the root (-1). Only switches with a GPU or NIC somewhere
 *   below them are kept, in the topology's order, each below the nearest kept switch above it.
 * - **NICs**: PCI devices of class 0x02xx (network, 0x0207 InfiniBand) or carrying a Network or
 *   OpenFabrics OS device, named by the OpenFabrics device ("mlx5_0"), else the network
 *   interface ("eth0"), else the PCI bus id ("0000:02:00.0"). hwloc records no link rate, so
 *   their bandwidth is 0 (unknown). Kind (tp_nodetype_set_nic_kind()): ::TP_NIC_RDMA with an
 *   OpenFabrics OS device (InfiniBand, RoCE, Omni-Path) or class 0x0207, else
 *   ::TP_NIC_ETHERNET for class 0x0200 or a Network OS device only. Locality
 *   (tp_nodetype_set_nic_locality(), the same for GPUs): the package, the NUMA node (when the
 *   device's CPU-side parent covers exactly one) and the host bridge. With these,
 *   tp_nodetype_gpu_nearest_nic() and GPU+NIC pairs prefer an RDMA NIC, then the closest by
 *   PCIe switches, then one sharing the GPU's host bridge, NUMA node or package: on LLNL's
 *   Lassen each GPU gets an HCA of its own socket, never a 1 GbE port.
 * - **NVSwitches**: PCI devices with subtype "NVSwitch" or of NVIDIA with class 0x0680, named by
 *   their PCI bus id ("0000:61:00.0").
 * - **NVLink**: the first distance matrix named "NVLinkBandwidth" (values in MB/s; taken as
 *   GB/s = MB/s / 1000). Two GPUs get their direct link (the larger of the two directions),
 *   plus, when both reach NVSwitches, the smaller of their total bandwidths to NVSwitches (the
 *   rule of hwloc's HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE: switched GPUs reach each other
 *   at their full switch bandwidth). Links to CPUs are ignored. These figures give the
 *   bandwidth between two GPUs of a node of this type in the cost model, unless the caller sets
 *   the node level's fabric (docs/cost-model.md). A matrix value or a GPU pair's figure above
 *   10 TB/s (10000 GB/s: ten times NVLink 5's 900 GB/s per GPU, room for later generations) is
 *   refused with ::TP_EPARSE: such a figure is a corrupt or mis-scaled matrix.
 * - NUMA locality is not recorded (the node type has no place for it yet).
 *
 * Memory: the node type comes from the given ::tp_allocator; hwloc's own working memory (the
 * parsed topology, distance matrices) comes from the C library, as hwloc allocates it.
 */
#ifndef TOPOPLACE_HWLOC_H
#define TOPOPLACE_HWLOC_H

#include <stddef.h>

#include <hwloc.h>

#include "topoplace.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Build a node type from an hwloc XML buffer (as written by `lstopo file.xml` or
 *        hwloc_topology_export_xmlbuffer()).
 *
 * The buffer is parsed by hwloc with every I/O object kept (PCI devices, bridges and OS devices:
 * HWLOC_TYPE_FILTER_KEEP_ALL), then read as tp_nodetype_from_hwloc() does.
 *
 * No object exists to carry a message when this fails, so the message goes to @p errbuf
 * ("hwloc could not parse the XML buffer (1234 bytes)"); it is always NUL-terminated and cut to
 * @p errlen bytes; on success it is set to "".
 *
 * hwloc 2.9's XML importer trusts its input, so the buffer is screened first. It must be
 * well-formed XML of the shape hwloc writes: after the optional `<?xml` line and the DOCTYPE
 * line hwloc writes (exactly `<!DOCTYPE topology SYSTEM "hwloc.dtd">` or `"hwloc2.dtd"`: no
 * internal subset, no other SYSTEM id, which an hwloc built on libxml2 would act on), one
 * `<topology>` (hwloc 1.x) or `<topology version="2.x">` element and nothing but white space
 * after it; every element
 * `<name attr="value" ...>` or `<name .../>` (names of letters, digits and `_`, attributes
 * `name="value"` with only the entities hwloc writes) and closed in order by `</name>`; at
 * most 128 elements open at once; text without '>', control characters or unknown entities;
 * no comments, CDATA or processing instructions; no NUL byte before the end (NULs at the end
 * are ignored); at most 64 MiB. Then, for what made hwloc crash, hang or print when fuzzed
 * (tests/fuzz/fuzz_hwloc.c): there is one top-level object; every object of a CPU or memory
 * type has well-formed `cpuset`,
 * `complete_cpuset`, `nodeset` and `complete_nodeset` (the root also `allowed_cpuset` and
 * `allowed_nodeset`; in 1.x, whose first versions wrote no nodesets, nodesets only when the
 * root has one); there is a PU and (in 2.x) a NUMANode, each with an `os_index` up to 2^20; a
 * 1.x `<distances>` has `nbobjs` up to 4096 (hwloc allocates nbobjs^2 floats unchecked). A
 * buffer of another format gets a message saying what it looks like (NCCL's topology XML,
 * YAML, JSON, `nvidia-smi topo -m` output, a Slurm topology.conf). The
 * screen closes the failures fuzzing found, not every possible one: prefer XML written by
 * hwloc (`lstopo file.xml`) from a source you trust.
 *
 * hwloc's parser prints nothing unless the environment variable HWLOC_XML_VERBOSE is set, but
 * hwloc_topology_load() may print one line to stderr for a topology it finds unusable ("hwloc:
 * Topology became empty, aborting!"; HWLOC_HIDE_ERRORS=2 silences it). The library sets no
 * environment variable. hwloc reads its own `HWLOC_*` variables, which may change what it
 * loads.
 *
 * @param[out] out The node type, owned by the caller (tp_nodetype_destroy()); NULL on failure.
 * @param xml The XML text; need not be NUL-terminated (NULs at the end are ignored, one
 *        before the end is an error). Borrowed.
 * @param len Bytes of @p xml (>= 1, at most 64 MiB = 2^26).
 * @param alloc Allocator for the node type, or NULL for the C library's.
 * @param errbuf Receives the message of a failure (may be NULL).
 * @param errlen Size of @p errbuf (0 when it is NULL).
 * @return 0; ::TP_EINVAL (NULL @p out or @p xml, an invalid allocator); ::TP_EPARSE (the buffer
 *         fails the screen above or hwloc rejects it: malformed or truncated XML, or @p len is 0;
 *         an NVLink figure above 10 TB/s); ::TP_ENOTFOUND (no NVIDIA or AMD GPU in it); ::TP_ELIMIT
 *         (more than ::TP_MAX_NODE_DEVICES GPUs, more than 4096 switches, NICs or NVSwitches, or
 *         @p len above 2^26); ::TP_ENOMEM. On failure the caller's @p errbuf says why (@p *out is
 *         NULL); every call first empties it.
 * @note Thread-safe: each call uses its own hwloc topology.
 * @since 0.1.0
 */
TP_API int tp_nodetype_from_hwloc_xml(tp_nodetype **out, const char *xml, size_t len,
                                      const tp_allocator *alloc, char *errbuf, size_t errlen);

/**
 * @brief Build a node type from an hwloc topology the caller has loaded.
 *
 * The topology must hold its I/O objects: load it after
 * `hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL)` (or at least
 * KEEP_IMPORTANT), else no GPU is found. It is only read; its objects' `userdata` is not
 * touched.
 *
 * @param[out] out The node type, owned by the caller (tp_nodetype_destroy()); NULL on failure.
 * @param topo A loaded hwloc topology; borrowed for the call.
 * @param alloc Allocator for the node type, or NULL for the C library's.
 * @param errbuf Receives the message of a failure, as for tp_nodetype_from_hwloc_xml().
 * @param errlen Size of @p errbuf.
 * @return 0; ::TP_EINVAL (NULL @p out or @p topo, an invalid allocator); ::TP_ENOTFOUND (no NVIDIA
 *         or AMD GPU, as in a topology that was not loaded or lost its I/O objects); ::TP_EPARSE
 *         (an NVLink figure above 10 TB/s); ::TP_ELIMIT; ::TP_ENOMEM. On failure the caller's
 *         @p errbuf says why (@p *out is NULL); every call first empties it.
 * @note Thread-safe as far as hwloc is: several threads may read one loaded topology at once.
 * @since 0.1.0
 */
TP_API int tp_nodetype_from_hwloc(tp_nodetype **out, hwloc_topology_t topo,
                                  const tp_allocator *alloc, char *errbuf, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* TOPOPLACE_HWLOC_H */
