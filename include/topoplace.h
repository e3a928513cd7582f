/*
 * libtopoplace: topology-aware placement of GPU jobs.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file topoplace.h
 * @brief The public C API of libtopoplace.
 *
 * The library is organised around three objects:
 *
 * - ::tp_topology, the immutable graph of levels, domains, nodes and devices, built with a
 *   ::tp_topology_builder or a generator. Once built it is read-only and may be shared by any
 *   number of threads.
 * - ::tp_cluster, the mutable state of one topology: which device is free, held by which job,
 *   down or cordoned. One writer at a time; functions marked *read-only* may run concurrently
 *   with each other but not with a writer.
 * - ::tp_placement, the answer of tp_place() or tp_replace(): devices in rank order, or the
 *   precise reason why the request cannot be placed.
 *
 * Conventions (see docs/concepts.md and docs/errors.md):
 * - Functions that can fail return 0 or a negative ::tp_error code. Outputs come first as
 *   `T **out`, owned by the caller; destructors accept NULL.
 * - A failure's message has one of two homes, and each `@return` says which: an object's
 *   `_errmsg()` (the node type, builder or cluster the call writes, or the result the call
 *   returns even on failure: placement, fragmentation report, plan, sizing, P/D result), or
 *   the caller's buffer (the buffer importers and the cost model, which empty it first). A
 *   success does not clear an object's message, which stays the last failure's; a result made
 *   by a successful call says "". Read-only calls, and calls given a NULL object, leave no
 *   message. A failed call leaves the object unchanged.
 * - The library never prints, reads files, aborts or keeps global state. Memory comes from the
 *   ::tp_allocator given to the constructor (the system allocator when NULL), except the
 *   internal nodes of Judy arrays, which Judy takes from the C library.
 * - Ids are dense integers: levels `0..nlevels-1` outermost first (the last is the node level),
 *   domains `0..n-1` per level, nodes and devices `0..n-1` in tree order.
 */
#ifndef TOPOPLACE_H
#define TOPOPLACE_H

#include <stddef.h>
#include <stdint.h>

#include "topoplace-version.h"

#ifndef TP_API
#if defined(__GNUC__) || defined(__clang__)
/** Marks a function exported from the shared library. */
#define TP_API __attribute__((visibility("default")))
#else
#define TP_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/** @name Errors
 *  @{ */

/**
 * @brief The error table: `X(NAME, value, description)` for every code.
 *
 * One table yields tp_strerror() and tp_err_name(); ::tp_error lists the same codes.
 */
#define TP_ERRNO_MAP(X)                                                                        \
	X(EINVAL, -1, "invalid argument")                                                          \
	X(ENOMEM, -2, "out of memory")                                                             \
	X(ENOTFOUND, -3, "not found")                                                              \
	X(EEXIST, -4, "already exists")                                                            \
	X(EINFEASIBLE, -5, "the request can never be placed on this cluster")                      \
	X(EBUSY, -6, "fewer matching devices are free than the request needs")                     \
	X(EFRAGMENTED, -7, "enough devices are free, but not where the request needs them")        \
	X(ENOPLAN, -8, "no plan within the policy")                                                \
	X(EPARSE, -9, "the input could not be parsed")                                             \
	X(ELIMIT, -10, "a size limit of the library was exceeded")                                 \
	X(ECORRUPT, -11, "internal consistency check failed")                                      \
	X(EINTERNAL, -12, "internal error: the library found itself inconsistent")

/**
 * @brief Error codes. Every failing function returns one of these (negative) values.
 *
 * The values and descriptions are those of ::TP_ERRNO_MAP (the library checks at compile time
 * that the two agree).
 */
typedef enum tp_error {
	TP_OK = 0,            /**< success */
	TP_EINVAL = -1,       /**< invalid argument; the object's message names the item and why */
	TP_ENOMEM = -2,       /**< an allocation failed; nothing was changed */
	TP_ENOTFOUND = -3,    /**< a named item (node, domain, level, job) does not exist */
	TP_EEXIST = -4,       /**< the item exists already (a name used twice, a device held) */
	TP_EINFEASIBLE = -5,  /**< the request cannot be placed even on an empty cluster */
	TP_EBUSY = -6,        /**< fewer matching devices are free than the request needs */
	TP_EFRAGMENTED = -7,  /**< enough devices are free, but not where the request needs them */
	TP_ENOPLAN = -8,      /**< no plan within the policy */
	TP_EPARSE = -9,       /**< the input buffer could not be parsed */
	TP_ELIMIT = -10,      /**< a size limit of the library was exceeded */
	TP_ECORRUPT = -11,    /**< an internal consistency check failed */
	TP_EINTERNAL = -12    /**< the library found its own state inconsistent (a bug); the call
	                           changed nothing and the object's message says what */
} tp_error;

/**
 * @brief A fixed description of an error code.
 * @param code 0 or a ::tp_error code.
 * @return A static string; "unknown error" for a value outside the table. Never NULL.
 * @note Thread-safe. @since 0.1.0
 */
TP_API const char *tp_strerror(int code);

/**
 * @brief The symbolic name of an error code, without the `TP_` prefix ("EINVAL").
 * @param code 0 or a ::tp_error code.
 * @return A static string ("OK" for 0, "UNKNOWN" for a value outside the table). Never NULL.
 * @note Thread-safe. @since 0.1.0
 */
TP_API const char *tp_err_name(int code);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Version and allocator
 *  @{ */

/**
 * @brief The library's version as `MAJOR * 10000 + MINOR * 100 + PATCH`.
 * @return The run-time version; compare with ::TP_VERSION_NUMBER for the compile-time one.
 * @note Thread-safe. @since 0.1.0
 */
TP_API unsigned tp_version(void);

/**
 * @brief The library's version as a string ("0.1.0").
 * @return A static string. @note Thread-safe. @since 0.1.0
 */
TP_API const char *tp_version_string(void);

/**
 * @brief Memory functions used by an object and everything it creates.
 *
 * Pass NULL wherever an allocator is taken to use the C library's functions. All four function
 * pointers must be set; `ud` is passed back unchanged. The allocator must stay valid until the
 * last object created with it is destroyed. Returning NULL from an allocation function makes the
 * call fail with ::TP_ENOMEM and leave its object unchanged.
 */
typedef struct tp_allocator {
	void *(*malloc)(void *ud, size_t size);                /**< like malloc() */
	void *(*calloc)(void *ud, size_t nmemb, size_t size);  /**< like calloc() */
	void *(*realloc)(void *ud, void *ptr, size_t size);    /**< like realloc() */
	void (*free)(void *ud, void *ptr);                     /**< like free(); ptr may be NULL */
	void *ud;                                              /**< user pointer */
} tp_allocator;

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Limits and kinds
 *  @{ */

/** @brief Most levels a topology may have (the node level included). */
#define TP_MAX_LEVELS 8
/** @brief Most devices one node may hold. */
#define TP_MAX_NODE_DEVICES 256
/** @brief Most bytes of a name (node, domain, level, job, tenant, model), without the NUL. */
#define TP_MAX_NAME 255
/** @brief The level argument that names the fabric between top-level domains. */
#define TP_LEVEL_CLUSTER (-1)
/** @brief A domain, node or device index that names nothing (returned for "no parent"). */
#define TP_NONE UINT32_MAX

/** @brief The kind of link a fabric level uses. */
typedef enum tp_link_kind {
	TP_LINK_NVLINK = 0,   /**< NVLink (inside a node, or an NVL72 rack) */
	TP_LINK_PCIE = 1,     /**< PCI Express */
	TP_LINK_IB = 2,       /**< InfiniBand */
	TP_LINK_ETHERNET = 3  /**< Ethernet (RoCE) */
} tp_link_kind;

/** @brief The class of a job; it decides what a defrag plan may do to it. */
typedef enum tp_job_class {
	TP_CLASS_TRAINING = 0,    /**< batch training (the default) */
	TP_CLASS_INFERENCE = 1,   /**< serving */
	TP_CLASS_INTERACTIVE = 2  /**< a person is waiting on it; never moved unless allowed */
} tp_job_class;

/** @brief What a device is doing, as tp_cluster_device_state() reports it. */
typedef enum tp_device_state {
	TP_DEVICE_FREE = 0,      /**< healthy, not cordoned, held by no job */
	TP_DEVICE_HELD = 1,      /**< held by a job (it may also be down or cordoned) */
	TP_DEVICE_DOWN = 2,      /**< unhealthy and held by no job */
	TP_DEVICE_CORDONED = 3,  /**< healthy, closed to new work, held by no job */
	TP_DEVICE_SPARE = 4      /**< a hot spare (tp_cluster_set_spares()): healthy, held by no
	                              job, kept for tp_replace() (@since 0.4.0) */
} tp_device_state;

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Node types: the insides of a node
 *
 * A node type describes what sits inside a node: PCIe switches (a tree), the switch each GPU sits
 * behind, NICs, NVSwitches and NVLink bandwidth between GPU pairs. Nodes that share a type share
 * one copy. The hwloc importer (topoplace-hwloc.h) fills one in from a real machine; the
 * functions below set it by hand. A node type is mutable until it is given to a node; the
 * topology keeps its own copy.
 *  @{ */

/** @brief The insides of a node (opaque). */
typedef struct tp_nodetype tp_nodetype;

/**
 * @brief Create a node type with @p gpus GPUs, no switches, NICs or NVLink figures.
 * @param[out] out The new node type, owned by the caller (tp_nodetype_destroy()).
 * @param gpus Number of GPUs, 1 to ::TP_MAX_NODE_DEVICES.
 * @param alloc Allocator, or NULL for the C library's.
 * @return 0, ::TP_EINVAL (NULL @p out or @p gpus out of range), ::TP_ENOMEM. No message: no object
 *         exists on failure, and @p *out is NULL.
 * @since 0.1.0
 */
TP_API int tp_nodetype_create(tp_nodetype **out, unsigned gpus, const tp_allocator *alloc);

/** @brief Destroy a node type. @param nt The node type, or NULL. @since 0.1.0 */
TP_API void tp_nodetype_destroy(tp_nodetype *nt);

/**
 * @brief The message of the last failure on @p nt ("" when none).
 * @param nt The node type. @return A string owned by @p nt, valid until its next call.
 * @since 0.1.0
 */
TP_API const char *tp_nodetype_errmsg(const tp_nodetype *nt);

/**
 * @brief Add a PCIe switch below @p parent (or below the host bridge when @p parent is -1).
 * @param nt The node type.
 * @param parent Index of an existing switch, or -1.
 * @param[out] id Index of the new switch (may be NULL).
 * @return 0, ::TP_EINVAL (unknown parent), ::TP_ELIMIT, ::TP_ENOMEM. On failure
 *         tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a
 *         success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_nodetype_add_pcie_switch(tp_nodetype *nt, int parent, unsigned *id);

/**
 * @brief Put GPU @p gpu behind PCIe switch @p sw (or directly on the host bridge when -1).
 * @param nt The node type. @param gpu GPU index. @param sw Switch index or -1.
 * @return 0, ::TP_EINVAL (unknown GPU or switch). On failure tp_nodetype_errmsg() of @p nt says why
 *         (a NULL @p nt gets ::TP_EINVAL and no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_nodetype_set_gpu_switch(tp_nodetype *nt, unsigned gpu, int sw);

/**
 * @brief Add a NIC behind PCIe switch @p sw (or on the host bridge when -1).
 * @param nt The node type. @param name The NIC's name ("mlx5_0"), copied.
 * @param sw Switch index or -1. @param gbps Bandwidth in GB/s, one direction (>= 0).
 * @param[out] id Index of the new NIC (may be NULL).
 * @return 0, ::TP_EINVAL (bad name, switch or bandwidth), ::TP_ELIMIT, ::TP_ENOMEM. On failure
 *         tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a
 *         success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_nodetype_add_nic(tp_nodetype *nt, const char *name, int sw, double gbps,
                               unsigned *id);

/**
 * @brief Add an NVSwitch to the node.
 * @param nt The node type. @param name Its name, copied. @param[out] id Its index (may be NULL).
 * @return 0, ::TP_EINVAL, ::TP_ELIMIT, ::TP_ENOMEM. On failure tp_nodetype_errmsg() of @p nt says
 *         why (a NULL @p nt gets ::TP_EINVAL and no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_nodetype_add_nvswitch(tp_nodetype *nt, const char *name, unsigned *id);

/**
 * @brief Set the NVLink bandwidth between two GPUs (both directions). The cost model prices
 * traffic between these GPUs of a node of this type at this figure, unless the caller set the
 * node level's fabric (tp_topology_builder_set_fabric(); docs/cost-model.md).
 * @param nt The node type. @param a GPU index. @param b Another GPU index.
 * @param gbps GB/s one direction, >= 0 (0: no NVLink between them).
 * @return 0, ::TP_EINVAL (unknown GPU, a == b, negative or non-finite bandwidth), ::TP_ENOMEM. On
 *         failure tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no
 *         message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_nodetype_set_nvlink(tp_nodetype *nt, unsigned a, unsigned b, double gbps);

/** @brief Number of GPUs. @param nt The node type. @return The count. @since 0.1.0 */
TP_API unsigned tp_nodetype_gpu_count(const tp_nodetype *nt);
/** @brief Number of PCIe switches. @param nt The node type. @return The count. @since 0.1.0 */
TP_API unsigned tp_nodetype_pcie_switch_count(const tp_nodetype *nt);
/**
 * @brief The parent of a PCIe switch.
 * @param nt The node type. @param sw Switch index.
 * @param[out] parent Receives the parent switch, or ::TP_NONE for the host bridge.
 * @return 0, ::TP_ENOTFOUND for an unknown switch, ::TP_EINVAL for a NULL argument (@p parent is
 *         then unchanged). (Before 0.4.0 the switch was the return value, -1 for the host bridge,
 *         which is also ::TP_EINVAL.) No message: the call only reads @p nt.
 * @since 0.1.0
 */
TP_API int tp_nodetype_pcie_switch_parent(const tp_nodetype *nt, unsigned sw, uint32_t *parent);
/**
 * @brief The PCIe switch a GPU sits directly behind.
 * @param nt The node type. @param gpu GPU index.
 * @param[out] sw Receives the switch, or ::TP_NONE for the host bridge.
 * @return 0, ::TP_ENOTFOUND for an unknown GPU, ::TP_EINVAL for a NULL argument (@p sw is then
 *         unchanged). (Before 0.4.0 the switch was the return value.) No message: the call only
 *         reads @p nt.
 * @since 0.1.0
 */
TP_API int tp_nodetype_gpu_switch(const tp_nodetype *nt, unsigned gpu, uint32_t *sw);
/** @brief Number of NICs. @param nt The node type. @return The count. @since 0.1.0 */
TP_API unsigned tp_nodetype_nic_count(const tp_nodetype *nt);
/**
 * @brief The name of a NIC. @param nt The node type. @param nic NIC index.
 * @return The name (owned by @p nt), or NULL for an unknown NIC. @since 0.1.0
 */
TP_API const char *tp_nodetype_nic_name(const tp_nodetype *nt, unsigned nic);
/**
 * @brief The PCIe switch a NIC sits behind.
 * @param nt The node type. @param nic NIC index.
 * @param[out] sw Receives the switch, or ::TP_NONE for the host bridge.
 * @return 0, ::TP_ENOTFOUND for an unknown NIC, ::TP_EINVAL for a NULL argument (@p sw is then
 *         unchanged). (Before 0.4.0 the switch was the return value.) No message: the call only
 *         reads @p nt.
 * @since 0.1.0
 */
TP_API int tp_nodetype_nic_switch(const tp_nodetype *nt, unsigned nic, uint32_t *sw);
/**
 * @brief The NIC closest to a GPU, by the rule GPU+NIC pairs follow.
 *
 * NICs are ranked for a GPU by, in this order: (1) kind: when the node has an RDMA NIC
 * (tp_nodetype_set_nic_kind()), every NIC that is not RDMA ranks behind every RDMA NIC, so a
 * plain Ethernet port is never chosen while an RDMA NIC is there; (2) PCIe: the fewer switch
 * hops from the GPU up to the lowest switch that has the NIC below it, the closer; (3) for NICs
 * reached only through the host bridges, what the GPU and the NIC share
 * (tp_nodetype_set_gpu_locality()): the same host bridge, else the same NUMA node, else the same
 * package, else nothing. The closest NIC is the one of best rank, the lowest index on ties.
 * A pairs request pairs each GPU with one of the NICs of its best rank (docs/concepts.md,
 * "GPU+NIC pairs"). Without kinds and localities this is the NIC behind the lowest common
 * switch, as before 0.2.
 * @param nt The node type. @param gpu GPU index.
 * @return The NIC index, ::TP_ENOTFOUND when the node has no NIC, ::TP_EINVAL for an unknown GPU.
 *         No message: the call only reads @p nt.
 * @note Read-only. @since 0.1.0
 */
TP_API int tp_nodetype_gpu_nearest_nic(const tp_nodetype *nt, unsigned gpu);
/** @brief Number of NVSwitches. @param nt The node type. @return The count. @since 0.1.0 */
TP_API unsigned tp_nodetype_nvswitch_count(const tp_nodetype *nt);
/**
 * @brief The NVLink bandwidth between two GPUs.
 * @param nt The node type. @param a GPU index. @param b GPU index.
 * @return GB/s one direction; 0 when there is no NVLink or an index is out of range.
 * @since 0.1.0
 */
TP_API double tp_nodetype_nvlink_gbps(const tp_nodetype *nt, unsigned a, unsigned b);
/**
 * @brief How far apart two GPUs are on PCIe: the number of switch hops from each GPU up to
 * their lowest common switch, summed (0 for the same GPU; switches and the host bridge count).
 * @param nt The node type. @param a GPU index. @param b GPU index.
 * @return The distance, or ::TP_EINVAL for an unknown GPU. No message: the call only reads @p nt.
 * @since 0.1.0
 */
TP_API int tp_nodetype_pcie_distance(const tp_nodetype *nt, unsigned a, unsigned b);

/**
 * @brief Set the fabric inside nodes of this type: it overrides the node level's fabric
 * (tp_topology_builder_set_fabric()) for these nodes, even one the caller set, and with it the
 * type's own pair figures (NVLink, PCIe) apply inside them. A PCIe-only node (8 x L4) says so
 * here.
 * @param nt The node type (mutable until given to a node).
 * @param kind The link kind. @param gbps GB/s per device, one direction (> 0).
 * @param latency_us Latency in microseconds (>= 0).
 * @return 0, ::TP_EINVAL (bad kind or number; the message is on @p nt). On failure
 *         tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a
 *         success does not clear it.
 * @since 0.4.0
 */
TP_API int tp_nodetype_set_fabric(tp_nodetype *nt, tp_link_kind kind, double gbps,
                                  double latency_us);
/**
 * @brief The fabric a node type sets for its nodes (tp_nodetype_set_fabric()).
 * @param nt The node type (read-only).
 * @param[out] kind Link kind (may be NULL). @param[out] gbps GB/s (may be NULL).
 * @param[out] latency_us Latency (may be NULL).
 * @return 0, ::TP_ENOTFOUND (the type sets none: its nodes use the node level's fabric),
 *         ::TP_EINVAL (NULL @p nt). No message: the call only reads @p nt.
 * @since 0.4.0
 */
TP_API int tp_nodetype_fabric(const tp_nodetype *nt, tp_link_kind *kind, double *gbps,
                              double *latency_us);
/**
 * @brief Set the PCIe link bandwidth of a GPU (hwloc's `pci_link_speed`). A GPU pair with no
 * NVLink figure whose GPUs both have one gets a PCIe figure (tp_nodetype_pair_gbps()).
 * @param nt The node type. @param gpu GPU index. @param gbps GB/s one direction (> 0), or 0 to
 *        forget it.
 * @return 0, ::TP_EINVAL (unknown GPU, bad number; the message is on @p nt), ::TP_ENOMEM. On
 *         failure tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no
 *         message); a success does not clear it.
 * @since 0.4.0
 */
TP_API int tp_nodetype_set_gpu_pcie_gbps(tp_nodetype *nt, unsigned gpu, double gbps);
/**
 * @brief The bandwidth the cost model gives two GPUs of this type from the type's own figures:
 * their NVLink figure; else, when both have a PCIe link figure, the smaller of the two when
 * their PCIe paths meet inside one package (a common switch or host bridges of one package),
 * half of it when they meet only across packages (the inter-socket link; docs/cost-model.md);
 * else 0 (the node's fabric applies).
 * @param nt The node type (read-only). @param a GPU index. @param b GPU index.
 * @return GB/s one direction, or 0 (no figure, @p a == @p b, index out of range).
 * @since 0.4.0
 */
TP_API double tp_nodetype_pair_gbps(const tp_nodetype *nt, unsigned a, unsigned b);

/** @brief What a NIC is, for GPU+NIC pairing (tp_nodetype_gpu_nearest_nic()). @since 0.3.0 */
typedef enum tp_nic_kind {
	TP_NIC_UNKNOWN = 0,  /**< not said (NICs added by hand start so) */
	TP_NIC_RDMA = 1,     /**< an RDMA NIC: InfiniBand, RoCE (an OpenFabrics device in hwloc) */
	TP_NIC_ETHERNET = 2  /**< plain Ethernet without RDMA (a 1 GbE management port) */
} tp_nic_kind;

/**
 * @brief Set the kind of a NIC (read by the pairing rule, tp_nodetype_gpu_nearest_nic()).
 * @param nt The node type. @param nic NIC index. @param kind Its kind.
 * @return 0, ::TP_EINVAL (NULL @p nt, unknown NIC, a value not in ::tp_nic_kind). On failure
 *         tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a
 *         success does not clear it.
 * @since 0.3.0
 */
TP_API int tp_nodetype_set_nic_kind(tp_nodetype *nt, unsigned nic, tp_nic_kind kind);
/**
 * @brief The kind of a NIC.
 * @param nt The node type. @param nic NIC index.
 * @return A ::tp_nic_kind value, or ::TP_ENOTFOUND (-3) for an unknown NIC. No message: the call
 *         only reads @p nt.
 * @note Read-only. @since 0.3.0
 */
TP_API int tp_nodetype_nic_kind(const tp_nodetype *nt, unsigned nic);
/**
 * @brief Say where a GPU sits outside the PCIe switches: its package (socket), NUMA node and
 * host bridge, as identifiers compared for equality only (any values >= 0), -1 for unknown.
 * Read by the pairing rule for NICs that are reached only through the host bridges.
 * @param nt The node type. @param gpu GPU index.
 * @param package Package id or -1. @param numa NUMA node id or -1.
 * @param host_bridge Host bridge id or -1.
 * @return 0, ::TP_EINVAL (NULL @p nt, unknown GPU, a value below -1). On failure
 *         tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a
 *         success does not clear it.
 * @since 0.3.0
 */
TP_API int tp_nodetype_set_gpu_locality(tp_nodetype *nt, unsigned gpu, int package, int numa,
                                        int host_bridge);
/**
 * @brief Say where a NIC sits outside the PCIe switches, as tp_nodetype_set_gpu_locality().
 * @param nt The node type. @param nic NIC index.
 * @param package Package id or -1. @param numa NUMA node id or -1.
 * @param host_bridge Host bridge id or -1.
 * @return 0, ::TP_EINVAL (NULL @p nt, unknown NIC, a value below -1). On failure
 *         tp_nodetype_errmsg() of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a
 *         success does not clear it.
 * @since 0.3.0
 */
TP_API int tp_nodetype_set_nic_locality(tp_nodetype *nt, unsigned nic, int package, int numa,
                                        int host_bridge);
/**
 * @brief Record the PCI bus id of a GPU ("0000:3b:00.0"), as the importers do.
 * @param nt The node type. @param gpu GPU index.
 * @param bus_id The bus id, copied: 1 to 31 bytes, printable, no '/'.
 * @return 0, ::TP_EINVAL (NULL @p nt, unknown GPU, a bad bus id). On failure tp_nodetype_errmsg()
 *         of @p nt says why (a NULL @p nt gets ::TP_EINVAL and no message); a success does not
 *         clear it.
 * @since 0.3.0
 */
TP_API int tp_nodetype_set_gpu_bus_id(tp_nodetype *nt, unsigned gpu, const char *bus_id);
/**
 * @brief The PCI bus id of a GPU. The importers number GPUs in bus-id order (the order CUDA,
 * NVML and Slurm's GRES use), so GPU `i` is CUDA device `i` of the machine.
 * @param nt The node type. @param gpu GPU index.
 * @return The bus id (owned by @p nt, lower-case hex, `dddd:bb:dd.f` from the importers), or
 *         NULL when unknown or for an unknown GPU.
 * @note Read-only. @since 0.3.0
 */
TP_API const char *tp_nodetype_gpu_bus_id(const tp_nodetype *nt, unsigned gpu);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Topology builder
 *  @{ */

/** @brief An immutable topology (opaque). Read-only after tp_topology_build(); thread-safe. */
typedef struct tp_topology tp_topology;
/** @brief Collects levels, fabrics, nodes and failure domains, then builds a ::tp_topology. */
typedef struct tp_topology_builder tp_topology_builder;

/** @brief Version of ::tp_node_options this header describes. */
#define TP_NODE_OPTIONS_VERSION 1

/** @brief Attributes of a node added with tp_topology_builder_add_node(). */
typedef struct tp_node_options {
	unsigned version;           /**< ::TP_NODE_OPTIONS_VERSION */
	const char *model;          /**< device model ("GB200"), or NULL for none; copied */
	double memory_gb;           /**< memory per device in GB; 0 for unknown */
	double perf;                /**< relative speed of every device (1.0 nominal); > 0 */
	const double *device_perf;  /**< NULL, or one relative speed per device (overrides perf) */
	const tp_nodetype *type;    /**< the node's insides, or NULL for plain GPUs; copied */
} tp_node_options;

/** @brief Initialiser for ::tp_node_options with every default. */
#define TP_NODE_OPTIONS_INIT {TP_NODE_OPTIONS_VERSION, NULL, 0.0, 1.0, NULL, NULL}

/**
 * @brief Set a ::tp_node_options to ::TP_NODE_OPTIONS_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] o The struct to fill; its version field becomes @p version.
 * @param version ::TP_NODE_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is not ::TP_NODE_OPTIONS_VERSION
 *         (nothing is written; no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_node_options_init(tp_node_options *o, unsigned version);

/**
 * @brief Start a topology with the given levels, outermost first; the last is the node level.
 *
 * Fabrics default to NVLink 900 GB/s at the node level, InfiniBand 50 GB/s at every other level
 * and InfiniBand 25 GB/s between top-level domains (latencies 3.4, 14 and 20 us). While the
 * node level's fabric is left at its default, the NVLink figures of node types
 * (tp_nodetype_set_nvlink(), the hwloc importer) give the bandwidth between two GPUs of such a
 * node (docs/cost-model.md).
 *
 * @param[out] out The new builder, owned by the caller (tp_topology_builder_destroy()).
 * @param levels Level names (copied): 1 to ::TP_MAX_LEVELS, unique, non-empty, no `/`, not
 *        "cluster".
 * @param nlevels Number of names in @p levels.
 * @param alloc Allocator for the builder and the topologies it builds, or NULL.
 * @return 0, ::TP_EINVAL (NULL pointer, bad or duplicate level name), ::TP_ELIMIT (more than
 *         ::TP_MAX_LEVELS), ::TP_ENOMEM. No message object exists on failure. No message: no object
 *         exists on failure, and @p *out is NULL.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_create(tp_topology_builder **out, const char *const *levels,
                                      unsigned nlevels, const tp_allocator *alloc);

/** @brief Destroy a builder. @param b The builder, or NULL. @since 0.1.0 */
TP_API void tp_topology_builder_destroy(tp_topology_builder *b);

/**
 * @brief The message of the last failure on @p b ("" when none).
 * @param b The builder. @return A string owned by @p b, valid until its next call. @since 0.1.0
 */
TP_API const char *tp_topology_builder_errmsg(const tp_topology_builder *b);

/**
 * @brief Set the fabric of a level: the link two devices use when the smallest domain holding
 * both is a domain of that level. Setting the node level's fabric also makes it the bandwidth
 * inside every node, in place of the NVLink figures of node types.
 * @param b The builder.
 * @param level A level index, or ::TP_LEVEL_CLUSTER for traffic between top-level domains.
 * @param kind The link kind. @param gbps GB/s per device, one direction (> 0).
 * @param latency_us Latency in microseconds (>= 0).
 * @return 0, ::TP_EINVAL (unknown level or kind, bad number). On failure
 *         tp_topology_builder_errmsg() of @p b says why (a NULL @p b gets ::TP_EINVAL and no
 *         message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_set_fabric(tp_topology_builder *b, int level, tp_link_kind kind,
                                          double gbps, double latency_us);

/**
 * @brief Set the fabric of one domain above the node: it overrides its level's fabric
 * (tp_topology_builder_set_fabric()) for traffic whose smallest common domain is this one, so
 * that a fleet of NVL72 racks (NVLink) and HGX racks (InfiniBand) prices each right. Setting it
 * again replaces it.
 * @param b The builder. @param level A level above the node.
 * @param path The domain's path ("block0/rack3", as tp_topology_domain_path() gives it); its
 *        nodes must have been added.
 * @param kind The link kind. @param gbps GB/s per device, one direction (> 0).
 * @param latency_us Latency in microseconds (>= 0).
 * @return 0, ::TP_EINVAL (not a level above the node, bad kind or number), ::TP_ENOTFOUND (no such
 *         domain yet), ::TP_ENOMEM; the message is on @p b. On failure tp_topology_builder_errmsg()
 *         of @p b says why (a NULL @p b gets ::TP_EINVAL and no message); a success does not clear
 *         it.
 * @since 0.4.0
 */
TP_API int tp_topology_builder_set_domain_fabric(tp_topology_builder *b, unsigned level,
                                                 const char *path, tp_link_kind kind,
                                                 double gbps, double latency_us);

/**
 * @brief Add a node.
 * @param b The builder.
 * @param name Node name: unique, non-empty, no `/`, at most ::TP_MAX_NAME bytes; copied.
 * @param path Names of the node's domains at every level above the node (nlevels - 1 names),
 *        outermost first; non-empty, no `/`. Copied. May be NULL for a one-level topology.
 * @param gpus Devices in the node, 1 to ::TP_MAX_NODE_DEVICES (must equal the node type's GPU
 *        count when one is given).
 * @param opts Attributes, or NULL for the defaults.
 * @return 0, ::TP_EINVAL (bad name, path or attribute), ::TP_EEXIST (name used before), ::TP_ELIMIT
 *         (past the builder's budget of devices or nodes, see tp_topology_builder_set_limits()),
 *         ::TP_ENOMEM. On failure tp_topology_builder_errmsg() of @p b says why (a NULL @p b gets
 *         ::TP_EINVAL and no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_add_node(tp_topology_builder *b, const char *name,
                                        const char *const *path, unsigned gpus,
                                        const tp_node_options *opts);

/** @brief Default budget of devices in one topology: 2^24 (the CLI's cap on scenarios), which
 *  builds in seconds and about 1.5 GB on the CI machine. */
#define TP_DEFAULT_MAX_DEVICES (1u << 24)
/** @brief Default budget of nodes in one topology: 2^22. */
#define TP_DEFAULT_MAX_NODES (1u << 22)
/** @brief The most a budget may be raised to: 2^31 - 1 devices (or nodes). */
#define TP_LIMIT_MAX_DEVICES 2147483647u

/**
 * @brief Set the builder's budgets: the most devices and nodes its topology may have. Adding a
 * node or generating a tree past either fails with ::TP_ELIMIT and a message that names the
 * budget, the figure and this function. Defaults: ::TP_DEFAULT_MAX_DEVICES,
 * ::TP_DEFAULT_MAX_NODES (the generators use them too).
 * @param b The builder.
 * @param max_devices 1 to ::TP_LIMIT_MAX_DEVICES, at least the devices already added.
 * @param max_nodes 1 to ::TP_LIMIT_MAX_DEVICES, at least the nodes already added.
 * @return 0, ::TP_EINVAL (out of range, below what the builder holds; the message is on @p b). On
 *         failure tp_topology_builder_errmsg() of @p b says why (a NULL @p b gets ::TP_EINVAL and
 *         no message); a success does not clear it.
 * @since 0.3.0
 */
TP_API int tp_topology_builder_set_limits(tp_topology_builder *b, uint32_t max_devices,
                                          uint32_t max_nodes);

/**
 * @brief Add a regular tree of nodes, as the scenario format's `generate`.
 *
 * `counts[i]` is the number of domains of level `i` inside each domain of level `i-1` (the first
 * is the number of top-level domains, the last the nodes per lowest domain). Domains are named
 * `<level><index>` (0-based among siblings) and a node's name is its path and its own name joined
 * with `-` (`block0-rack1-node17`).
 *
 * @param b The builder.
 * @param counts One count per level, each >= 1.
 * @param gpus_per_node Devices per node. @param opts Attributes of every node, or NULL.
 * @return as tp_topology_builder_add_node(); on failure no node was added. On failure
 *         tp_topology_builder_errmsg() of @p b says why (a NULL @p b gets ::TP_EINVAL and no
 *         message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_generate(tp_topology_builder *b, const unsigned *counts,
                                        unsigned gpus_per_node, const tp_node_options *opts);

/**
 * @brief Put a node, or one of its devices, in a failure domain (a power feed, a switch tray).
 *
 * Failure domains group devices across the tree; @p kind may not be a level name. A node or
 * device not listed under a kind is a domain of its own for that kind, named by the node (or
 * `node/index`).
 *
 * @param b The builder. @param kind Kind name ("power"). @param domain Domain name ("pdu-a").
 * @param node A node already added. @param device A device index in the node, or -1 for all.
 * @return 0, ::TP_EINVAL (bad name, kind is a level, device out of range), ::TP_ENOTFOUND (unknown
 *         node), ::TP_EEXIST (the node or device is already in a domain of @p kind), ::TP_ENOMEM.
 *         On failure tp_topology_builder_errmsg() of @p b says why (a NULL @p b gets ::TP_EINVAL
 *         and no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_add_failure_domain(tp_topology_builder *b, const char *kind,
                                                  const char *domain, const char *node,
                                                  int device);

/**
 * @brief Add an NVSwitch (or NVSwitch tray) to a domain above the node: the NVLink fabric of an
 * NVL72 rack. Node-level NVSwitches belong to the node type.
 * @param b The builder. @param level A level above the node.
 * @param path The domain's path from the top (level + 1 names).
 * @param name The switch's name, unique within the domain; copied.
 * @return 0, ::TP_EINVAL, ::TP_ENOTFOUND (no node in that domain yet), ::TP_EEXIST, ::TP_ENOMEM. On
 *         failure tp_topology_builder_errmsg() of @p b says why (a NULL @p b gets ::TP_EINVAL and
 *         no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_topology_builder_add_nvswitch(tp_topology_builder *b, unsigned level,
                                            const char *const *path, const char *name);

/** @brief The most axes a grid level has (::tp_topology_builder_set_grid()). */
#define TP_GRID_MAX_DIMS 3
/** @brief The most cells one domain of a grid level holds (the product of its extents). */
#define TP_GRID_MAX_CELLS (1u << 20)

/**
 * @brief Declare that every domain of @p level holds its children (the domains of
 * `level + 1`, or the nodes) at coordinates of a ring, a 2-D or 3-D torus, or a mesh: a grid
 * of @p ndims axes with extents @p dims, wrapping around along each axis whose bit is set in
 * @p wrap (a ring is one wrapping axis; a torus wraps on every axis; a mesh on none). Give each
 * child its coordinates with tp_topology_builder_set_coords(); a cell may stay empty (a chip
 * that is missing), and every child of a grid domain must hold the same number of devices
 * (tp_topology_build() checks both). A request with `box_level` takes a box of children
 * (docs/concepts.md, "Rings and tori"). Setting it again replaces it.
 * @param b The builder. @param level A level above the node.
 * @param dims @p ndims extents, each >= 1; their product at most ::TP_GRID_MAX_CELLS.
 * @param ndims 1 to ::TP_GRID_MAX_DIMS. @param wrap Bit i: axis i wraps around.
 * @return 0, ::TP_EINVAL (not a level above the node, bad extents or wrap bits); the message
 *         is on @p b. @since 0.4.0
 */
TP_API int tp_topology_builder_set_grid(tp_topology_builder *b, unsigned level,
                                        const unsigned *dims, unsigned ndims, unsigned wrap);

/**
 * @brief Give a child of a grid domain its coordinates (tp_topology_builder_set_grid() on
 * `level - 1`). Setting them again replaces them.
 * @param b The builder. @param level The child's level (>= 1), whose parent level is a grid.
 * @param path The child's path ("pod0/cube3", as tp_topology_domain_path() gives it), or the
 *        node's name at the node level; it must have been added.
 * @param coords One coordinate per axis of the grid, each below its extent.
 * @return 0, ::TP_EINVAL (the parent level is no grid, a coordinate out of range),
 *         ::TP_ENOTFOUND (no such domain or node yet), ::TP_ENOMEM; the message is on @p b.
 * @since 0.4.0
 */
TP_API int tp_topology_builder_set_coords(tp_topology_builder *b, unsigned level,
                                          const char *path, const unsigned *coords);

/**
 * @brief Build the topology. The builder is unchanged and may build again or be destroyed.
 * @param b The builder.
 * @param[out] out The topology, owned by the caller (tp_topology_destroy()).
 * @return 0, ::TP_EINVAL (no node), ::TP_ENOMEM. On failure tp_topology_builder_errmsg() of @p b
 *         says why (a NULL @p b gets ::TP_EINVAL and no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_topology_build(tp_topology_builder *b, tp_topology **out);

/**
 * @brief Generate a GB200 NVL72 fleet: levels `block`, `rack`, `node`; racks of 18 nodes x 4
 * GPUs (model "GB200", 186 GB); NVLink 900 GB/s inside nodes and racks (9 NVSwitch trays per
 * rack), InfiniBand 50 GB/s inside a block and 25 GB/s between blocks.
 * @param[out] out The topology, owned by the caller.
 * @param blocks Number of blocks (>= 1). @param racks_per_block Racks per block (>= 1).
 * @param alloc Allocator, or NULL.
 * @return 0, ::TP_EINVAL, ::TP_ELIMIT, ::TP_ENOMEM. No message: no object exists on failure, and
 *         @p *out is NULL.
 * @since 0.1.0
 */
TP_API int tp_topology_generate_nvl72(tp_topology **out, unsigned blocks,
                                      unsigned racks_per_block, const tp_allocator *alloc);

/**
 * @brief Generate an HGX fleet: levels `su` (scalable unit), `node`; 8-GPU nodes ("H100",
 * 80 GB) with NVLink 450 GB/s inside the node (8 PCIe switches pairing GPUs and NICs, 4
 * NVSwitches), InfiniBand 50 GB/s inside a scalable unit and 25 GB/s between them.
 * @param[out] out The topology, owned by the caller.
 * @param units Scalable units (>= 1). @param nodes_per_unit Nodes per unit (>= 1).
 * @param alloc Allocator, or NULL.
 * @return 0, ::TP_EINVAL, ::TP_ELIMIT, ::TP_ENOMEM. No message: no object exists on failure, and
 *         @p *out is NULL.
 * @since 0.1.0
 */
TP_API int tp_topology_generate_hgx(tp_topology **out, unsigned units, unsigned nodes_per_unit,
                                    const tp_allocator *alloc);

/**
 * @brief Generate TPU-pod-like tori: levels `pod`, `chip`; @p pods pods, each a grid of
 * @p ndims axes with extents @p dims (wrapping on the axes whose bit is set in @p wrap: all of
 * them for a torus), one chip (a node of one device, model "TPU") per cell. Chips are named
 * `pod<p>-chip<i>` with i the cell index x + dims[0] * (y + dims[1] * z). Fabric: 45 GB/s,
 * 2 us inside a pod (tp_link_kind NVLink stands for the chip-to-chip links), InfiniBand
 * 25 GB/s between pods.
 * @param[out] out The topology, owned by the caller.
 * @param pods Number of pods (>= 1). @param dims Extents (each >= 1).
 * @param ndims 1 to ::TP_GRID_MAX_DIMS. @param wrap Bit i: axis i wraps around.
 * @param alloc Allocator, or NULL.
 * @return 0, ::TP_EINVAL, ::TP_ELIMIT, ::TP_ENOMEM. @since 0.4.0
 */
TP_API int tp_topology_generate_torus(tp_topology **out, unsigned pods, const unsigned *dims,
                                      unsigned ndims, unsigned wrap, const tp_allocator *alloc);

/**
 * @brief Generate rings of nodes, as Slurm's topology/ring: levels `ring`, `node`; @p rings
 * rings of @p nodes_per_ring nodes of @p gpus_per_node devices, node i of a ring at ring
 * position i, named `ring<r>-node<i>`. InfiniBand 50 GB/s inside a ring, 25 GB/s between.
 * @param[out] out The topology, owned by the caller.
 * @param rings Rings (>= 1). @param nodes_per_ring Nodes per ring (>= 1).
 * @param gpus_per_node Devices per node (1 to ::TP_MAX_NODE_DEVICES).
 * @param alloc Allocator, or NULL.
 * @return 0, ::TP_EINVAL, ::TP_ELIMIT, ::TP_ENOMEM. @since 0.4.0
 */
TP_API int tp_topology_generate_ring(tp_topology **out, unsigned rings, unsigned nodes_per_ring,
                                     unsigned gpus_per_node, const tp_allocator *alloc);

/** @brief Destroy a topology. Every cluster made from it must be destroyed first.
 *  @param t The topology, or NULL. @since 0.1.0 */
TP_API void tp_topology_destroy(tp_topology *t);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Topology queries (read-only, thread-safe)
 *
 * A query with an out-of-range argument returns ::TP_EINVAL (int results), ::TP_NONE (ids),
 * 0 (counts) or NULL (strings); topologies carry no message because they are shared by threads.
 *  @{ */

/** @brief Number of levels. @param t The topology. @return 1 to ::TP_MAX_LEVELS. @since 0.1.0 */
TP_API unsigned tp_topology_level_count(const tp_topology *t);
/** @brief Name of a level. @param t The topology. @param level Level index.
 *  @return The name (owned by @p t) or NULL. @since 0.1.0 */
TP_API const char *tp_topology_level_name(const tp_topology *t, unsigned level);
/** @brief Find a level by name. @param t The topology. @param name Level name.
 *  @return The level index, or ::TP_ENOTFOUND. No message: the call only reads @p t.
 *  @since 0.1.0 */
TP_API int tp_topology_level_by_name(const tp_topology *t, const char *name);
/**
 * @brief The fabric of a level.
 * @param t The topology. @param level Level index or ::TP_LEVEL_CLUSTER.
 * @param[out] kind Link kind (may be NULL). @param[out] gbps GB/s per device (may be NULL).
 * @param[out] latency_us Latency (may be NULL).
 * @return 0 or ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_fabric(const tp_topology *t, int level, tp_link_kind *kind, double *gbps,
                              double *latency_us);
/**
 * @brief The fabric joining the children of one domain: the domain's own
 * (tp_topology_builder_set_domain_fabric()), at the node level its node type's
 * (tp_nodetype_set_fabric()), else its level's (tp_topology_fabric()).
 * @param t The topology. @param level Level index, or ::TP_LEVEL_CLUSTER (then @p dom is 0).
 * @param dom Domain index (a node at the node level).
 * @param[out] kind Link kind (may be NULL). @param[out] gbps GB/s per device (may be NULL).
 * @param[out] latency_us Latency (may be NULL).
 * @return 1 when the domain's (or node type's) fabric differs from its level's, 0 when it is the
 *         level's, ::TP_EINVAL (level or domain out of range). No message: the call only reads
 *         @p t.
 * @since 0.4.0
 */
TP_API int tp_topology_domain_fabric(const tp_topology *t, int level, uint32_t dom,
                                     tp_link_kind *kind, double *gbps, double *latency_us);
/** @brief Number of domains of a level (nodes at the node level).
 *  @param t The topology. @param level Level index. @return The count. @since 0.1.0 */
TP_API uint32_t tp_topology_domain_count(const tp_topology *t, unsigned level);
/** @brief A domain's own name (the node name at the node level).
 *  @param t The topology. @param level Level. @param dom Domain index.
 *  @return The name (owned by @p t) or NULL. @since 0.1.0 */
TP_API const char *tp_topology_domain_name(const tp_topology *t, unsigned level, uint32_t dom);
/**
 * @brief A domain's path: its ancestors' names and its own joined with `/` ("b1/r3"); at the
 * node level, the node name.
 * @param t The topology. @param level Level. @param dom Domain index.
 * @param buf Buffer for the NUL-terminated path (may be NULL when @p len is 0).
 * @param len Size of @p buf.
 * @return The path's length without the NUL (as snprintf: the path was cut if >= @p len), or
 *         ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_domain_path(const tp_topology *t, unsigned level, uint32_t dom, char *buf,
                                   size_t len);
/**
 * @brief Find a domain by its path ("b1/r3"; a node name at the node level).
 * @param t The topology. @param level Level. @param path The path.
 * @param[out] dom The domain index.
 * @return 0, ::TP_ENOTFOUND, ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_domain_by_path(const tp_topology *t, unsigned level, const char *path,
                                      uint32_t *dom);
/** @brief The parent of a domain (at level - 1).
 *  @param t The topology. @param level Level (> 0). @param dom Domain index.
 *  @return The parent's index, or ::TP_NONE at level 0 or for a bad argument. @since 0.1.0 */
TP_API uint32_t tp_topology_domain_parent(const tp_topology *t, unsigned level, uint32_t dom);
/**
 * @brief The children of a domain: the domains `first .. first + n - 1` of level + 1.
 * @param t The topology. @param level Level above the node. @param dom Domain index.
 * @param[out] first First child. @param[out] n Number of children.
 * @return 0 or ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_domain_children(const tp_topology *t, unsigned level, uint32_t dom,
                                       uint32_t *first, uint32_t *n);
/**
 * @brief The nodes of a domain: `first .. first + n - 1` (ids are in tree order).
 * @param t The topology. @param level Level. @param dom Domain index.
 * @param[out] first First node. @param[out] n Number of nodes.
 * @return 0 or ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_domain_nodes(const tp_topology *t, unsigned level, uint32_t dom,
                                    uint32_t *first, uint32_t *n);
/**
 * @brief The devices of a domain: `first .. first + n - 1`.
 * @param t The topology. @param level Level. @param dom Domain index.
 * @param[out] first First device. @param[out] n Number of devices.
 * @return 0 or ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_domain_devices(const tp_topology *t, unsigned level, uint32_t dom,
                                      uint32_t *first, uint32_t *n);
/** @brief The domain of a level that holds a node.
 *  @param t The topology. @param node Node id. @param level Level.
 *  @return The domain index, or ::TP_NONE. @since 0.1.0 */
TP_API uint32_t tp_topology_node_domain(const tp_topology *t, uint32_t node, unsigned level);
/** @brief Number of NVSwitches added to a domain above the node.
 *  @param t The topology. @param level Level. @param dom Domain.
 *  @return The count. @since 0.1.0 */
TP_API unsigned tp_topology_domain_nvswitch_count(const tp_topology *t, unsigned level,
                                                  uint32_t dom);

/**
 * @brief The grid of a level (tp_topology_builder_set_grid()).
 * @param t The topology. @param level A level.
 * @param[out] dims ::TP_GRID_MAX_DIMS extents (1 past the grid's axes), or NULL.
 * @param[out] ndims The grid's axes, or NULL. @param[out] wrap Its wrap bits, or NULL.
 * @return 0, ::TP_EINVAL (no such level), ::TP_ENOTFOUND (the level is no grid).
 * @since 0.4.0
 */
TP_API int tp_topology_grid(const tp_topology *t, unsigned level, unsigned *dims,
                            unsigned *ndims, unsigned *wrap);

/**
 * @brief The coordinates of a child of a grid domain.
 * @param t The topology. @param level The child's level (its parent level is a grid).
 * @param dom The child. @param[out] coords ::TP_GRID_MAX_DIMS coordinates (0 past the axes).
 * @return 0, ::TP_EINVAL (no such domain, NULL), ::TP_ENOTFOUND (the parent level is no grid).
 * @since 0.4.0
 */
TP_API int tp_topology_domain_coords(const tp_topology *t, unsigned level, uint32_t dom,
                                     unsigned *coords);

/**
 * @brief The child of a grid domain at given coordinates.
 * @param t The topology. @param level A grid level. @param dom A domain of @p level.
 * @param coords One coordinate per axis. @param[out] child The child (a domain of
 *        `level + 1`).
 * @return 0, ::TP_EINVAL (no such domain, coordinates out of range, NULL), ::TP_ENOTFOUND (the
 *         level is no grid, or the cell is empty). @since 0.4.0
 */
TP_API int tp_topology_grid_child(const tp_topology *t, unsigned level, uint32_t dom,
                                  const unsigned *coords, uint32_t *child);

/** @brief Number of nodes. @param t The topology. @return The count. @since 0.1.0 */
TP_API uint32_t tp_topology_node_count(const tp_topology *t);
/** @brief Number of devices. @param t The topology. @return The count. @since 0.1.0 */
TP_API uint32_t tp_topology_device_count(const tp_topology *t);
/** @brief Find a node by name. @param t The topology. @param name Node name.
 *  @param[out] node The node id. @return 0, ::TP_ENOTFOUND, ::TP_EINVAL. No message: the call only
 *          reads @p t.
 *  @since 0.1.0 */
TP_API int tp_topology_node_by_name(const tp_topology *t, const char *name, uint32_t *node);
/** @brief A node's name. @param t The topology. @param node Node id.
 *  @return The name (owned by @p t) or NULL. @since 0.1.0 */
TP_API const char *tp_topology_node_name(const tp_topology *t, uint32_t node);
/** @brief A node's model. @param t The topology. @param node Node id.
 *  @return The model (owned by @p t) or NULL when it has none. @since 0.1.0 */
TP_API const char *tp_topology_node_model(const tp_topology *t, uint32_t node);
/** @brief Memory per device of a node. @param t The topology. @param node Node id.
 *  @return GB, 0 when unknown. @since 0.1.0 */
TP_API double tp_topology_node_memory_gb(const tp_topology *t, uint32_t node);
/** @brief A node's insides. @param t The topology. @param node Node id.
 *  @return The node type (owned by @p t) or NULL for a plain node. @since 0.1.0 */
TP_API const tp_nodetype *tp_topology_node_type(const tp_topology *t, uint32_t node);
/** @brief The node holding a device. @param t The topology. @param dev Device id.
 *  @return The node id or ::TP_NONE. @since 0.1.0 */
TP_API uint32_t tp_topology_device_node(const tp_topology *t, uint32_t dev);
/** @brief A device's index inside its node. @param t The topology. @param dev Device id.
 *  @return The index or ::TP_NONE. @since 0.1.0 */
TP_API uint32_t tp_topology_device_index(const tp_topology *t, uint32_t dev);
/** @brief A device's relative speed. @param t The topology. @param dev Device id.
 *  @return The speed (1.0 nominal), 0 for a bad id. @since 0.1.0 */
TP_API double tp_topology_device_perf(const tp_topology *t, uint32_t dev);
/**
 * @brief Find a device by its name `node/index`.
 * @param t The topology. @param name The name. @param[out] dev The device id.
 * @return 0, ::TP_ENOTFOUND (unknown node or index), ::TP_EINVAL (malformed). No message: the call
 *         only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_device_by_name(const tp_topology *t, const char *name, uint32_t *dev);
/**
 * @brief The smallest level whose one domain holds both devices.
 * @param t The topology. @param a Device id. @param b Device id.
 * @param[out] level The level index (the node level for two devices of one node), or
 *        ::TP_LEVEL_CLUSTER when they are in different top-level domains.
 * @return 0 or ::TP_EINVAL. No message: the call only reads @p t.
 * @since 0.1.0
 */
TP_API int tp_topology_common_level(const tp_topology *t, uint32_t a, uint32_t b, int *level);

/** @brief Number of failure-domain kinds. @param t The topology. @return The count.
 *  @since 0.1.0 */
TP_API unsigned tp_topology_fd_kind_count(const tp_topology *t);
/** @brief Name of a failure-domain kind. @param t The topology. @param kind Kind index.
 *  @return The name or NULL. @since 0.1.0 */
TP_API const char *tp_topology_fd_kind_name(const tp_topology *t, unsigned kind);
/** @brief Find a failure-domain kind. @param t The topology. @param name Kind name.
 *  @return The kind index or ::TP_ENOTFOUND. No message: the call only reads @p t.
 *  @since 0.1.0 */
TP_API int tp_topology_fd_kind_by_name(const tp_topology *t, const char *name);
/** @brief Number of failure domains of a kind, implicit one-member domains included.
 *  @param t The topology. @param kind Kind index. @return The count. @since 0.1.0 */
TP_API uint32_t tp_topology_fd_count(const tp_topology *t, unsigned kind);
/** @brief Name of a failure domain. @param t The topology. @param kind Kind. @param fd Domain.
 *  @return The name (a node or `node/index` name for an implicit domain) or NULL.
 *  @since 0.1.0 */
TP_API const char *tp_topology_fd_name(const tp_topology *t, unsigned kind, uint32_t fd);
/** @brief The failure domain of a kind that holds a device.
 *  @param t The topology. @param kind Kind. @param dev Device id.
 *  @return The domain index or ::TP_NONE. @since 0.1.0 */
TP_API uint32_t tp_topology_device_fd(const tp_topology *t, unsigned kind, uint32_t dev);

/**
 * @brief Bytes of memory the topology holds (arrays, names and Judy maps).
 * @param t The topology. @return The size in bytes. @since 0.1.0
 */
TP_API size_t tp_topology_memory(const tp_topology *t);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Requests
 *  @{ */

/** @brief One layer of slices: the devices, in rank order, cut into runs of @p size devices,
 *  each inside one domain of @p level. */
typedef struct tp_slice {
	const char *level; /**< a level name */
	uint32_t size;     /**< devices per slice */
} tp_slice;

/** @brief A cap: at most @p devices devices, or @p groups groups, in any one domain of
 *  @p level (a level name or a failure-domain kind). Exactly one of the two is non-zero. */
typedef struct tp_domain_cap {
	const char *level; /**< level or failure-domain kind */
	uint32_t devices;  /**< most devices per domain, or 0 */
	uint32_t groups;   /**< most groups per domain, or 0 */
} tp_domain_cap;

/** @brief Version of ::tp_request this header describes: 6 since 0.4.0 (`expected_end_s`), 5
 *  since 0.4.0 (`box_level`, `box`, `box_wrap`, `box_rotate`), 4 since 0.4.0 (`service`), 3 since
 *  0.4.0 (`comm`), 2 since 0.2.0 (`gpu_nic_pairs`). The library also reads versions 1 to 5 (the
 *  fields that version has; the missing fields take their defaults), so callers built against
 *  an older header keep working. */
#define TP_REQUEST_VERSION 6

/**
 * @brief What a job asks for. The semantics are those of the scenario format's `request`
 * (docs/concepts.md). Every pointer is borrowed for the duration of the call only.
 *
 * `version` must be 1 to 6 (::TP_REQUEST_VERSION); the library reads only the fields that
 * version has.
 *
 * **When the job is expected to end** (`expected_end_s`, version 6): a time on the caller's own
 * clock (seconds; any epoch, the same for every call on a cluster), such as the job's start
 * plus its time limit (Slurm's TimeLimit, Kueue's `maximumExecutionTimeSeconds`) or a
 * predictor's estimate; 0 (the default): not known. A running job's expected end is that of
 * the shape it was recorded with (tp_job_options.shape; tp_commit() records the request).
 * Rule 3, refined: for a request one node must hold (`required` the node level, or one group
 * as on the fleets below), of the tightest nodes that hold it (every earlier rule tied; at
 * most 65, taken in best-fit order: fewest free devices first, then the lowest index), the
 * node whose running jobs are expected to end last, at or after this job's end, and nearest
 * to it, wins: the job then ends before its node would free anyway, so it keeps no node from
 * becoming whole later than it would have. Where none of them lasts that long, the one
 * expected to free last wins (the least delay); nodes whose jobs give no end (a wholly free
 * node among them) come after both, and best fit, then the lowest index, breaks what remains
 * tied, as without an end. So nodes free whole together, for the jobs that need whole nodes
 * (earlier 0.4.0 builds let the end decide only among nodes as tight as the tightest). Each
 * compared node costs a read of its devices' jobs: no
 * cluster scan. Where the solver chooses a node inside a domain instead (a request with
 * `select` nodes, a step model, the fabric classes' search), ties among that domain's nodes
 * as tight as each other are broken the same way, after the step time.
 * ::tp_placement_decided_by() gives ::TP_RULE_END when it decided. A negative, infinite or NaN
 * value is ::TP_EINVAL ("request.expected_end_s ..."). Example: `examples/expected_end.c`.
 *
 * **A service's replica** (`service`, version 4): the job is one replica of the named service.
 * tp_place() keeps it out of every domain where the service's spread caps
 * (tp_cluster_set_service_caps()) are reached, counted over the service's running replicas
 * (the running jobs whose shape names the service), and a job committed or assigned with this
 * request as its shape counts as one of them. NULL (the default): no service.
 *
 * **A box of a grid** (`box_level`, version 5): the job takes whole children of one domain of
 * the grid level `box_level` (tp_topology_builder_set_grid()): every child at the cells of a
 * box of extents `box[0]` x `box[1]` x `box[2]` (an unused axis 0 or 1; on a ring, an arc of
 * `box[0]` children). `count` must be the box's devices (its cells times the devices of one
 * child). With `box_wrap` the box may cross the seam of an axis that wraps around; with
 * `box_rotate` any order of the extents is allowed. Every child of the box must be wholly
 * usable under the same hard rules as other requests: health, cordons, hot spares, tenant
 * exclusivity and `select_*`. Among the boxes that qualify, the objective is: the fewest
 * fragments of the free space left (connected sets of wholly free children of the grid domain,
 * neighbours along the axes, across the seam where the grid wraps), counted as the change the
 * box makes to its domain's count; then the tightest domain (fewest wholly free children);
 * then the lowest domain, the lowest anchor cell (x + dims[0] * (y + dims[1] * z)), and the
 * first order of the extents (x, y, z order before its permutations, in lexicographic order).
 * Ranks follow the box in snake order, so consecutive ranks are neighbours. Combining a box
 * with `group_size` > 1, `group_level`, `required`, `preferred`, slices, `balanced`, caps,
 * `spread`, `colocate`, `gpu_nic_pairs` or `comm` is ::TP_EINVAL.
 *
 * **How the job communicates** (`comm`, version 3): a ::tp_step_model whose degrees multiply
 * to `count` (tp_cost_step_us() checks the same). Spec rule 4, refined: among candidate domains
 * that tie on every earlier rule (rule 1, rule 2, the placement mix, best fit), the one where
 * the whole job's modelled step time (tp_cost_step_us(): ring tensor all-reduces, the better of
 * ring and hierarchical data-parallel all-reduce, pipeline transfers, expert all-to-all) is the
 * least wins, so bandwidths (node types' NVLink figures, level fabrics) decide where the hard
 * rules leave room. NULL (the default, and what a request of version 1 or 2 has): no step
 * model; ties go to the lowest index as before. The model is copied with the request when a job
 * records it (tp_commit()). With `comm->min_efficiency` > 0 (model version 2) tp_place() also
 * computes the chosen placement's efficiency (tp_cost_efficiency(), O(count log count)). When
 * it is below the floor, tp_place() searches the topology's *fabric classes* for a placement
 * that meets it: a class is the nodes that share a device model, a node fabric and the fabric
 * of the domain above the node (on a mixed fleet: the NVL72 racks, the HGX nodes, the
 * PCIe-only nodes), derived once when the topology is built (a topology of one class, or of
 * more than 32, is not searched). Each class is tried with the request restricted to its nodes
 * (and to `select_nodes`), the floor unchanged; classes with fewer free devices than `count`
 * are passed over, only those whose e_c, the efficiency of the job packed in tree order into
 * the class alone, meets the floor are tried, and they go slowest first (the lowest e_c, ties
 * to the lower class): best fit over the classes, so the fast fabrics stay free for the jobs
 * only they hold at their floor. The first placement that meets the floor is the answer
 * (its rules are those of the request inside the class; the job records the request as
 * given). The search costs, per class that can hold the job, a sum of its nodes' free counts,
 * per class with room one efficiency, and per class tried one placement restricted to its
 * nodes; a request
 * without a floor, or whose rules' choice meets it, pays none of it. With
 * `comm->no_floor_search` (model version 3) there is no search. Without a placement that meets
 * the floor the answer is ::TP_EBUSY, naming the floor, the best efficiency reachable now and
 * where, and what the search found ("busy: request.comm.min_efficiency 0.9: the best placement
 * now reaches 0.320 (step 3.654e+05 us, 1.169e+05 us on the ideal layout) inside fabric class 1
 * (2 nodes like b0); of the 2 fabric classes that hold the job, 1 has too few free devices, 0
 * cannot reach it even when wholly free, 1 has no such placement now"; docs/errors.md lists the
 * others). The answer is deterministic
 * and tp_place() still only reads the cluster. The planners place through tp_place(), so a plan
 * honours the floor of the request and of every moved job whose recorded shape has one;
 * tp_replace() does not apply it (a repair keeps the job running).
 * With `comm->fabric_fit` > 0 (model version 3) on a topology of two fabric classes or more,
 * before the rules choose over the whole cluster, the classes on which the job packed reaches
 * fabric_fit x its best class efficiency are tried slowest first, each restricted to the class
 * with the floor fabric_fit x its efficiency, and the first placement found is the answer (best
 * fit over fabrics: ::tp_step_model, `fabric_fit`).
 *
 * **GPU+NIC pairs** (`gpu_nic_pairs = 1`, version 2): every device of the placement is a GPU
 * paired with a NIC of its own node that is nearest to it, and no two devices of the placement
 * share a NIC. The nearest NICs of a GPU are the NICs below the lowest PCIe switch above it
 * that has any NIC below it (every NIC of the node when no switch above the GPU has one): on a
 * node type with one NIC per leaf switch, the NIC of its own switch. Only nodes with a node type
 * that has NICs (tp_nodetype_add_nic(), the hwloc importer) qualify; on such a node, at most as
 * many GPUs can be taken as a maximum matching of its usable GPUs to distinct nearest NICs
 * (a DGX-2 with one NIC per pair of GPUs: 8 of 16). That per-node limit is the only change:
 * `count`, groups, slices, `required`, caps and every other field apply as without pairs.
 * NICs are held: a running job whose recorded shape (tp_job_options.shape; tp_commit() records
 * the request) has `gpu_nic_pairs` holds the NIC of each of its GPUs until it is released, and
 * a new request is paired only with NICs no running job holds, so no two running jobs share a
 * NIC. A job recorded by tp_cluster_assign() with such a shape takes, node by node, the NICs its
 * GPUs can get in rank order (a GPU left without one holds none). Jobs without the flag hold no
 * NIC. tp_placement_nic() gives the NIC paired with each device, and tp_commit() records exactly
 * those; tp_replace() keeps the pairing for a job whose shape asks for it (its healthy GPUs keep
 * their NICs, replacements get NICs nobody holds). Outcomes: ::TP_EINFEASIBLE when the
 * topology cannot give `count` paired GPUs even with every other job gone (no node type with
 * NICs, or too few NICs where the other fields need them; the message names
 * `request.gpu_nic_pairs`), ::TP_EBUSY / ::TP_EFRAGMENTED as for other requests, counting only
 * free GPUs that can be paired with a NIC no running job holds. A request with pairs walks the nodes it considers (as one with
 * `select` does); requests without it are unaffected.
 */
typedef struct tp_request {
	unsigned version;            /**< ::TP_REQUEST_VERSION */
	const char *id;              /**< job id, used by tp_commit() (NULL: "new") */
	tp_job_class job_class;      /**< the job's class */
	int priority;                /**< higher wins (defrag, preemption) */
	const char *tenant;          /**< tenant (NULL: "default") */
	uint32_t count;              /**< devices wanted, all or nothing (>= 1) */
	uint32_t group_size;         /**< devices per group (0: 1) */
	const char *group_level;     /**< level each group lies in (NULL: the node level) */
	const char *required;        /**< every device in one domain of this level, or NULL */
	const char *preferred;       /**< as few domains as possible, from this level up, or NULL */
	const tp_slice *slices;      /**< slice layers, outermost first */
	size_t nslices;              /**< number of slice layers */
	int balanced;                /**< split evenly over the domains it spans */
	const tp_domain_cap *caps;   /**< per-domain caps (`max_per_domain`) */
	size_t ncaps;                /**< number of caps */
	const char *spread_level;    /**< level or failure-domain kind to spread over, or NULL */
	uint32_t spread_min_domains; /**< touch at least this many domains of spread_level */
	const char *colocate_job;    /**< a running job to sit next to, or NULL */
	const char *colocate_level;  /**< the level of the shared domain */
	const char *exclusive;       /**< level at which other tenants are kept out, or NULL */
	const char *select_model;    /**< only devices of this model, or NULL */
	double select_min_perf;      /**< only devices at least this fast (0: any) */
	double select_min_memory_gb; /**< only devices with at least this memory (0: any) */
	const char *const *select_nodes; /**< allow-list of node names, or NULL */
	size_t nselect_nodes;        /**< number of names in select_nodes */
	int gpu_nic_pairs;           /**< 1: every device a GPU paired with its own nearest NIC
	                                  (see above); 0: no pairing. @since 0.2.0 (version 2) */
	const struct tp_step_model *comm; /**< how the job communicates (see above), or NULL.
	                                       @since 0.4.0 (version 3) */
	const char *service;         /**< the service this job is a replica of (see above), or
	                                  NULL. @since 0.4.0 (version 4) */
	const char *box_level;       /**< a grid level: take a box of its children (see above),
	                                  or NULL. @since 0.4.0 (version 5) */
	uint32_t box[TP_GRID_MAX_DIMS]; /**< the box's extents (0 or 1 past the grid's axes).
	                                     @since 0.4.0 (version 5) */
	int box_wrap;                /**< 1: the box may cross a wrapping axis's seam.
	                                  @since 0.4.0 (version 5) */
	int box_rotate;              /**< 1: any order of the extents. @since 0.4.0 (version 5) */
	double expected_end_s;       /**< when the job is expected to end, on the caller's clock
	                                  (see above); 0: not known. @since 0.4.0 (version 6) */
} tp_request;

/** @brief Initialiser for ::tp_request: count 0 (must be set), everything else default. */
#define TP_REQUEST_INIT                                                                        \
	{TP_REQUEST_VERSION, NULL, TP_CLASS_TRAINING, 0, NULL, 0, 0, NULL, NULL, NULL, NULL, 0, 0,  \
	 NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, 0.0, 0.0, NULL, 0, 0, NULL, NULL, NULL, {0, 0, 0}, \
	 0, 0, 0.0}

/**
 * @brief Set a ::tp_request to ::TP_REQUEST_INIT, for callers that cannot use the macro (bindings),
 * as libgit2's `git_clone_options_init()` does.
 * @param[out] r The struct to fill; its version field becomes @p version.
 * @param version ::TP_REQUEST_VERSION, or an older version the library still reads (any from 1): only
 *        the fields of that version are written, so a caller built against an older header is not
 *        overrun.
 * @return 0, or ::TP_EINVAL when @p r is NULL or @p version is none of these (nothing is written;
 *         no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_request_init(tp_request *r, unsigned version);

/** @brief Version of ::tp_job_options this header describes. */
#define TP_JOB_OPTIONS_VERSION 1

/** @brief A running job's attributes, for tp_cluster_assign() and tp_commit(). */
typedef struct tp_job_options {
	unsigned version;        /**< ::TP_JOB_OPTIONS_VERSION */
	tp_job_class job_class;  /**< the job's class */
	int priority;            /**< higher wins */
	const char *tenant;      /**< tenant (NULL: "default"); copied */
	int preemptible;         /**< may be stopped and requeued */
	int migratable;          /**< may restart elsewhere from a checkpoint */
	double checkpoint_s;     /**< seconds lost when stopped or moved (>= 0) */
	const tp_request *shape; /**< the job's own request, or NULL; deep-copied */
} tp_job_options;

/** @brief Initialiser for ::tp_job_options: training, priority 0, tenant "default",
 *  preemptible, not migratable, 60 s checkpoint, no shape. */
#define TP_JOB_OPTIONS_INIT {TP_JOB_OPTIONS_VERSION, TP_CLASS_TRAINING, 0, NULL, 1, 0, 60.0, NULL}

/**
 * @brief Set a ::tp_job_options to ::TP_JOB_OPTIONS_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] o The struct to fill; its version field becomes @p version.
 * @param version ::TP_JOB_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is not ::TP_JOB_OPTIONS_VERSION
 *         (nothing is written; no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_job_options_init(tp_job_options *o, unsigned version);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Cluster state
 *  @{ */

/** @brief The mutable state of a topology (opaque): one writer at a time. */
typedef struct tp_cluster tp_cluster;

/**
 * @brief Create an empty cluster state: every device free and healthy.
 * @param[out] out The cluster, owned by the caller (tp_cluster_destroy()).
 * @param t The topology; borrowed, must outlive the cluster.
 * @param alloc Allocator, or NULL.
 * @return 0, ::TP_EINVAL, ::TP_ENOMEM. No message: no object exists on failure, and @p *out is
 *         NULL.
 * @since 0.1.0
 */
TP_API int tp_cluster_create(tp_cluster **out, const tp_topology *t, const tp_allocator *alloc);

/** @brief Version of ::tp_cluster_options this header describes. */
#define TP_CLUSTER_OPTIONS_VERSION 1

/** @brief Options of tp_cluster_create_ext(). */
typedef struct tp_cluster_options {
	unsigned version;   /**< ::TP_CLUSTER_OPTIONS_VERSION */
	/**
	 * 1: detect a second writer. Every writing call on the cluster (assign, release, health,
	 * savepoints, tp_commit(), the planners, tp_plan_apply_step()) takes an atomic flag on
	 * entry and returns ::TP_EBUSY when another call holds it, without a message (the
	 * cluster's message belongs to the call inside). The library's own calls inside a call
	 * pass. A debugging aid for a caller's locking, not a lock: readers are not checked, and
	 * the second writer is caught only while the first is inside. Costs about 50 ns per
	 * writing call, measured (docs/thread-safety.md); 0 (default): no check, one branch.
	 */
	int writer_guard;
} tp_cluster_options;

/** @brief Initialiser for ::tp_cluster_options: no writer guard. */
#define TP_CLUSTER_OPTIONS_INIT {TP_CLUSTER_OPTIONS_VERSION, 0}

/**
 * @brief Set a ::tp_cluster_options to ::TP_CLUSTER_OPTIONS_INIT, for callers that cannot use the
 * macro (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] o The struct to fill; its version field becomes @p version.
 * @param version ::TP_CLUSTER_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is not ::TP_CLUSTER_OPTIONS_VERSION
 *         (nothing is written; no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_cluster_options_init(tp_cluster_options *o, unsigned version);

/**
 * @brief Create an empty cluster state with options (tp_cluster_create() with NULL options).
 * @param[out] out The cluster, owned by the caller (tp_cluster_destroy()).
 * @param t The topology; borrowed, must outlive the cluster.
 * @param alloc Allocator, or NULL.
 * @param opts Options, or NULL for the defaults.
 * @return 0, ::TP_EINVAL (NULL pointer, bad allocator, `opts->version` not 1 to
 *         ::TP_CLUSTER_OPTIONS_VERSION), ::TP_ENOMEM. No message object exists on failure. No
 *         message: no object exists on failure, and @p *out is NULL.
 * @since 0.3.0
 */
TP_API int tp_cluster_create_ext(tp_cluster **out, const tp_topology *t,
                                 const tp_allocator *alloc, const tp_cluster_options *opts);

/**
 * @brief A copy of a cluster state: same topology, devices, health, spares, jobs (in the same
 * order, with their options, shapes and NICs) and placement mix, so the same fingerprint; no
 * open savepoint. *Read-only* on @p c: may run while other threads read @p c, e.g. to plan on
 * the copy while they keep placing on the original.
 *
 * The copy has an identity of its own: a placement made on one of them cannot be committed to
 * the other. It keeps the lineage of @p c: a plan made on @p c (or on any copy of it) may be
 * carried out on the copy with tp_plan_apply_step(), and a plan made on the copy on @p c,
 * while a plan made on an unrelated cluster is refused even when its state is the same.
 * The copy takes the writer guard setting of @p c.
 *
 * @param[out] out The copy, owned by the caller (tp_cluster_destroy()).
 * @param c The cluster to copy. @param alloc Allocator of the copy, or NULL for the one of @p c.
 * @return 0, ::TP_EINVAL (a NULL argument or an incomplete allocator, no message: the copy
 *         does not exist and @p c is not written), ::TP_ENOMEM.
 * @since 0.4.0
 */
TP_API int tp_cluster_copy(tp_cluster **out, const tp_cluster *c, const tp_allocator *alloc);

/** @brief Destroy a cluster state. @param c The cluster, or NULL. @since 0.1.0 */
TP_API void tp_cluster_destroy(tp_cluster *c);

/**
 * @brief The message of the last failure of a writing call on @p c ("" when none).
 * @param c The cluster. @return A string owned by @p c, valid until its next writing call.
 * @since 0.1.0
 */
TP_API const char *tp_cluster_errmsg(const tp_cluster *c);

/** @brief The cluster's topology. @param c The cluster. @return The topology (borrowed).
 *  @since 0.1.0 */
TP_API const tp_topology *tp_cluster_topology(const tp_cluster *c);

/**
 * @brief Record a running job on explicit devices, in rank order.
 *
 * Devices that are down or cordoned may be given (the job is already running there). When
 * `opts->shape` has `gpu_nic_pairs`, the job also holds NICs (see ::tp_request).
 *
 * @param c The cluster.
 * @param job The job's id: unique, non-empty, at most ::TP_MAX_NAME bytes; copied.
 * @param devices Device ids in rank order. @param n Number of devices (>= 1).
 * @param opts The job's attributes, or NULL for the defaults.
 * @return 0, ::TP_EINVAL (bad id, device out of range or listed twice, bad option), ::TP_EEXIST
 *         (the id is running, or a device is held by another job; the message names the device and
 *         the job), ::TP_EBUSY (with tp_cluster_set_partitions(): the job would break an NVLink
 *         partition rule; the message names the node and the job), ::TP_ENOMEM. On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_assign(tp_cluster *c, const char *job, const uint32_t *devices, size_t n,
                             const tp_job_options *opts);

/**
 * @brief Remove a running job; its devices become free (unless down or cordoned).
 * @param c The cluster. @param job The job's id.
 * @return 0, ::TP_ENOTFOUND (no such job), ::TP_EINVAL, ::TP_ENOMEM (only while a savepoint is
 *         open). On failure tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from
 *         the writer guard, leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_release(tp_cluster *c, const char *job);

/**
 * @brief Mark devices down (unhealthy) or up. A down device is never allocated; a job already
 * on it stays until released.
 * @param c The cluster. @param devices Device ids. @param n Number of ids.
 * @param down 1 for down, 0 for up.
 * @return 0, ::TP_EINVAL (unknown device), ::TP_ENOMEM (only while a savepoint is open). On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_set_down(tp_cluster *c, const uint32_t *devices, size_t n, int down);

/**
 * @brief Cordon devices (healthy but closed to new work) or open them again.
 * @param c The cluster. @param devices Device ids. @param n Number of ids.
 * @param cordoned 1 to cordon, 0 to open.
 * @return 0, ::TP_EINVAL, ::TP_ENOMEM (only while a savepoint is open). On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_set_cordoned(tp_cluster *c, const uint32_t *devices, size_t n,
                                   int cordoned);

/**
 * @brief Keep @p k hot spares in every domain of a level (for example 2 of the 18 nodes of
 * each NVL72 rack).
 *
 * A spare is a whole node, healthy, uncordoned and free, held back from ordinary placement:
 * tp_place() and the defrag planner never use it, its devices do not count as free
 * (tp_cluster_free_count() and every figure leave them out), and tp_replace() uses spares first.
 * The call first clears every spare mark (the policy's and tp_cluster_set_node_spare()'s),
 * then marks in each domain of @p level its last @p k eligible nodes (highest node index
 * first). The library keeps the policy from then on: after every change of devices (assign,
 * release, commit, replace, health) a spare that became held, down or cordoned loses its mark,
 * and a domain of the changed devices that has fewer than @p k spares takes its last eligible
 * nodes again; only the domains of the changed devices are looked at, never the whole cluster.
 * A domain with no eligible node simply has fewer spares until one frees. Spare marks and the
 * policy are covered by savepoints.
 *
 * @param c The cluster (one writer). @param level A level above the node (an index as in
 *        tp_cluster_free_count()). @param k Spares per domain; 0 clears every mark and the policy
 *        (@p level is then ignored). @param flags 0 (no flag is defined yet).
 * @return 0, ::TP_EINVAL (level not above the node, @p k above the nodes of the largest domain,
 *         unknown flags; the message names the field), ::TP_ENOMEM (state unchanged). O(nodes) for
 *         the clearing and marking, once per call. On failure tp_cluster_errmsg() of @p c says why
 *         (a NULL @p c, and ::TP_EBUSY from the writer guard, leave no message); a success does not
 *         clear it.
 * @since 0.4.0
 */
TP_API int tp_cluster_set_spares(tp_cluster *c, unsigned level, unsigned k, unsigned flags);

/**
 * @brief Mark one node a spare (the caller's choice), or clear its mark.
 *
 * Under a policy (tp_cluster_set_spares()) a cleared node may be marked again by the next
 * change in its domain if the domain then lacks spares.
 * @param c The cluster. @param node Node index. @param spare 1 to mark, 0 to clear.
 * @return 0 (also when already so), ::TP_EINVAL (node out of range, spare not 0 or 1), ::TP_EEXIST
 *         (a device of the node is held by a job; the message names it), ::TP_EBUSY (a device is
 *         down or cordoned), ::TP_ENOMEM (state unchanged). On failure tp_cluster_errmsg() of @p c
 *         says why (a NULL @p c, and ::TP_EBUSY from the writer guard, leave no message); a success
 *         does not clear it.
 * @since 0.4.0
 */
TP_API int tp_cluster_set_node_spare(tp_cluster *c, uint32_t node, int spare);

/**
 * @brief Whether a node is a spare. *Read-only.* @param c The cluster. @param node Node index.
 * @return 1, 0, or ::TP_EINVAL (no such node). O(1). No message: the call only reads @p c.
 * @since 0.4.0
 */
TP_API int tp_cluster_node_is_spare(const tp_cluster *c, uint32_t node);

/**
 * @brief Spare nodes in a domain. *Read-only.*
 * @param c The cluster. @param level Level (the node level: 1 for a spare node).
 * @param dom Domain index. @return The count, 0 for a bad argument. O(1). @since 0.4.0
 */
TP_API uint32_t tp_cluster_spare_count(const tp_cluster *c, unsigned level, uint32_t dom);

/** @brief Spare nodes in the whole cluster. *Read-only.* @param c The cluster.
 *  @return The count (0 for NULL). O(1). @since 0.4.0 */
TP_API uint32_t tp_cluster_spare_total_count(const tp_cluster *c);

/**
 * @brief The spare policy in force. *Read-only.*
 * @param c The cluster. @param[out] level Its level (0 without a policy), or NULL.
 * @param[out] k Spares per domain (0: no policy), or NULL.
 * @return 0 or ::TP_EINVAL (c is NULL). No message: the call only reads @p c.
 * @since 0.4.0
 */
TP_API int tp_cluster_spare_policy(const tp_cluster *c, unsigned *level, unsigned *k);

/** @brief Most IMEX channels one NVLink domain's pool may have (tp_cluster_set_partitions()). */
#define TP_PARTITION_CHANNELS_MAX 65536u

/**
 * @brief Give jobs NVLink partitions (IMEX domains) in the domains of @p level whose fabric is
 * NVLink (tp_topology_domain_fabric()), for example the racks of an NVL72 fleet.
 *
 * From then on a job whose devices sit on two or more nodes of such a domain holds a partition
 * there: those nodes, and a channel from the domain's pool of @p channels (Slurm's
 * `imex_channel_count`, 2048 by default there), the lowest free one. A node is in at most one
 * partition at a time; a job without a partition (one node) may still use free devices of a
 * node in a partition of a job of its own tenant, never of another tenant's. tp_place() honours
 * these rules, tp_commit() and tp_cluster_assign() record the partitions, tp_cluster_release()
 * frees them, savepoints undo them and tp_cluster_check() verifies them
 * (docs/concepts.md, "NVLink partitions").
 *
 * @param c The cluster (writer); it must run no job and have no open savepoint.
 * @param level A level above the node, or -1 to turn partitions off.
 * @param channels Channels per domain, 1 to ::TP_PARTITION_CHANNELS_MAX (ignored for -1).
 * @return 0, ::TP_EINVAL (bad level, a level without an NVLink domain, bad channel count, jobs
 *         running, a savepoint open; the message is on @p c), ::TP_ENOMEM, ::TP_EBUSY (writer
 *         guard). @since 0.4.0
 */
TP_API int tp_cluster_set_partitions(tp_cluster *c, int level, uint32_t channels);

/**
 * @brief The partition policy of a cluster (tp_cluster_set_partitions()). *Read-only.*
 * @param c The cluster. @param[out] level The level, -1 when off (or NULL).
 * @param[out] channels Channels per domain, 0 when off (or NULL).
 * @return 0 or ::TP_EINVAL (NULL @p c). @since 0.4.0
 */
TP_API int tp_cluster_partition_policy(const tp_cluster *c, int *level, uint32_t *channels);

/**
 * @brief The partition a node is in: the running job that holds it and the channel.
 * *Read-only.*
 * @param c The cluster. @param node The node. @param[out] job The job's id, valid until the
 *        job is released (or NULL). @param[out] channel The channel (or NULL).
 * @return 0, ::TP_ENOTFOUND (the node is in no partition), ::TP_EINVAL (bad node). @since 0.4.0
 */
TP_API int tp_cluster_node_partition(const tp_cluster *c, uint32_t node, const char **job,
                                     uint32_t *channel);

/**
 * @brief Free devices (healthy, not cordoned, held by no job) in a domain. *Read-only.*
 * @param c The cluster. @param level Level. @param dom Domain index (a node at the node level).
 * @return The count, 0 for a bad argument. O(1). @since 0.1.0 (named tp_cluster_free, which read
 *         like a destructor, until 0.4.0)
 */
TP_API uint32_t tp_cluster_free_count(const tp_cluster *c, unsigned level, uint32_t dom);

/** @brief Free devices in the whole cluster. *Read-only.* @param c The cluster.
 *  @return The count. @since 0.1.0 (named tp_cluster_free_total until 0.4.0) */
TP_API uint32_t tp_cluster_free_total_count(const tp_cluster *c);

/**
 * @brief Nodes of a domain whose every device is free. *Read-only.*
 * @param c The cluster. @param level Level. @param dom Domain index.
 * @return The count, 0 for a bad argument. O(1). @since 0.1.0 (named tp_cluster_free_nodes until
 *         0.4.0)
 */
TP_API uint32_t tp_cluster_free_node_count(const tp_cluster *c, unsigned level, uint32_t dom);

/**
 * @brief Histogram of free devices per node in a domain: `hist[k]` nodes have exactly `k` free
 * devices, for `k < n` (larger counts are not reported). *Read-only.*
 * @param c The cluster. @param level Level. @param dom Domain index.
 * @param hist Output array of @p n counts. @param n Its length.
 * @return The largest `k` with a node (0 when none is free), or ::TP_EINVAL. No message: the call
 *         only reads @p c.
 * @since 0.1.0
 */
TP_API int tp_cluster_node_histogram(const tp_cluster *c, unsigned level, uint32_t dom,
                                     uint32_t *hist, size_t n);

/**
 * @brief The tightest domain of a level that has at least @p min_free free devices: the one
 * with the fewest free devices, lowest index on ties. Answered from an index, without a scan.
 * *Read-only.*
 * @param c The cluster. @param level Level (the node level included).
 * @param min_free Free devices wanted (>= 1). @param[out] dom The domain.
 * @return 0, ::TP_ENOTFOUND (no such domain), ::TP_EINVAL, ::TP_EINTERNAL (the kept histograms
 *         disagree, a bug that tp_cluster_check() describes; no message: the call is read-only). No
 *         message: the call only reads @p c.
 * @since 0.1.0
 */
TP_API int tp_cluster_tightest(const tp_cluster *c, unsigned level, uint32_t min_free,
                               uint32_t *dom);

/**
 * @brief The state of a device. *Read-only.*
 * @param c The cluster. @param dev Device id.
 * @param[out] job The holding job's id when held (owned by @p c), else NULL (may be NULL).
 * @return A ::tp_device_state, or ::TP_EINVAL. No message: the call only reads @p c.
 * @since 0.1.0
 */
TP_API int tp_cluster_device_state(const tp_cluster *c, uint32_t dev, const char **job);

/** @brief Whether a device is down. *Read-only.* @param c The cluster. @param dev Device id.
 *  @return 1, 0, or ::TP_EINVAL. No message: the call only reads @p c.
 *  @since 0.1.0 */
TP_API int tp_cluster_device_down(const tp_cluster *c, uint32_t dev);
/** @brief Whether a device is cordoned. *Read-only.* @param c The cluster.
 *  @param dev Device id. @return 1, 0, or ::TP_EINVAL. No message: the call only reads @p c.
 *  @since 0.1.0 */
TP_API int tp_cluster_device_cordoned(const tp_cluster *c, uint32_t dev);

/** @brief Devices that are down. *Read-only.* @param c The cluster. @return The count.
 *  @since 0.1.0 (named tp_cluster_down_total until 0.4.0) */
TP_API uint32_t tp_cluster_down_total_count(const tp_cluster *c);
/** @brief Devices that are cordoned and not down. *Read-only.* @param c The cluster.
 *  @return The count. @since 0.1.0 (named tp_cluster_cordoned_total until 0.4.0) */
TP_API uint32_t tp_cluster_cordoned_total_count(const tp_cluster *c);

/** @brief Number of running jobs. *Read-only.* @param c The cluster. @return The count.
 *  @since 0.1.0 */
TP_API size_t tp_cluster_job_count(const tp_cluster *c);

/**
 * @brief The id of the i-th running job, in the order jobs were assigned (a released job's
 * slot is taken by the last one). *Read-only.*
 * @param c The cluster. @param i Index below tp_cluster_job_count().
 * @return The id (owned by @p c) or NULL. @since 0.1.0
 */
TP_API const char *tp_cluster_job_at(const tp_cluster *c, size_t i);

/**
 * @brief A running job's devices in rank order. *Read-only.*
 * @param c The cluster. @param job The job's id.
 * @param[out] devices The devices (owned by @p c, valid until the next writing call).
 * @param[out] n Their number.
 * @return 0, ::TP_ENOTFOUND, ::TP_EINVAL. No message: the call only reads @p c.
 * @since 0.1.0
 */
TP_API int tp_cluster_job_devices(const tp_cluster *c, const char *job, const uint32_t **devices,
                                  size_t *n);

/**
 * @brief A running job's attributes. *Read-only.*
 * @param c The cluster. @param job The job's id.
 * @param[out] opts Filled in; `tenant` and `shape` point into @p c (valid until the job is
 *        released). `opts->version` must be set by the caller.
 * @return 0, ::TP_ENOTFOUND, ::TP_EINVAL. No message: the call only reads @p c.
 * @since 0.1.0
 */
TP_API int tp_cluster_job_options(const tp_cluster *c, const char *job, tp_job_options *opts);

/* Services: spread caps over a service's replicas.
 * A service is a name; its replicas are the running jobs whose shape (tp_job_options.shape,
 * which tp_commit() records from the request) has that `service`. The cluster counts, for
 * every service and every domain of every level, the replicas with a device there, kept up to
 * date on every assign, release, move and rollback (never recounted on the request path), so
 * that a service's caps hold as it scales out, as Kueue's topology spreading does for whole
 * workloads. */

/** @brief Version of ::tp_service_caps this header describes (2 since 0.4.0: the
 *  failure-domain caps; version 1, without them, is still read). @since 0.4.0 */
#define TP_SERVICE_CAPS_VERSION 2

/** @brief The most failure-domain kinds whose domains a service's replicas are counted in
 *  (the first ones of the topology, tp_topology_fd_kind_name()). @since 0.4.0 */
#define TP_SERVICE_FD_KINDS 8

/** @brief How a service's replicas spread over the domains of a level, and over the failure
 *  domains of one kind (power feeds, switch trays). @since 0.4.0 */
typedef struct tp_service_caps {
	unsigned version;        /**< ::TP_SERVICE_CAPS_VERSION, or 1 (a struct without the
	                              `fd_` fields) */
	const char *level;       /**< the level whose domains are counted, or NULL: no caps
	                              over the tree */
	uint32_t max_per_domain; /**< most replicas with a device in one domain (0: no limit) */
	double max_percent;      /**< most share of the replicas in one domain, in percent, in
	                              (0, 100] (0: no limit): a new replica may go to a domain
	                              holding r of the service's R running replicas when r + 1 <=
	                              max(1, floor(max_percent x (R + 1) / 100)) */
	/* version 2 */
	const char *fd_kind;        /**< a failure-domain kind (tp_topology_builder_add_failure_domain(),
	                                 one of the first ::TP_SERVICE_FD_KINDS) whose domains are
	                                 counted as well, or NULL: no caps over failure domains */
	uint32_t fd_max_per_domain; /**< most replicas with a device in one failure domain of
	                                 `fd_kind` (0: no limit) */
	double fd_max_percent;      /**< as `max_percent`, for one failure domain of `fd_kind` */
} tp_service_caps;

/** @brief Initialiser for ::tp_service_caps: no caps. @since 0.4.0 */
#define TP_SERVICE_CAPS_INIT {TP_SERVICE_CAPS_VERSION, NULL, 0, 0.0, NULL, 0, 0.0}

/**
 * @brief Set a ::tp_service_caps to ::TP_SERVICE_CAPS_INIT, for callers that cannot use the
 * macro (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] caps The struct to fill; its version field becomes @p version.
 * @param version ::TP_SERVICE_CAPS_VERSION, or 1 (then only a version-1 struct's fields are
 *        written).
 * @return 0, or ::TP_EINVAL when @p caps is NULL or @p version is not 1 or
 *         ::TP_SERVICE_CAPS_VERSION (nothing is written; no object carries a message for this
 *         call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_service_caps_init(tp_service_caps *caps, unsigned version);

/**
 * @brief Set (or replace) the spread caps of a service; its replicas placed from now on keep to
 * them (running replicas are not moved), and so do their repairs (tp_replace(): a replica may
 * take replacements in the domains it already holds a device of, and elsewhere only where the
 * caps leave room). The caps are part of the state: a rollback to a savepoint opened before the
 * call puts the old ones back. The caps over a level and over a failure-domain kind
 * (version 2) hold together: a replica goes only where both leave room.
 * @param c The cluster (written). @param service The service's name (copied; not empty).
 * @param caps The caps, or NULL to lift them (a version-1 struct lifts the failure-domain
 *        caps).
 * @return 0, ::TP_EINVAL (NULL cluster or service, a bad name, version not 1 or 2, an unknown
 *         level or failure-domain kind, a kind past ::TP_SERVICE_FD_KINDS, max_percent or
 *         fd_max_percent outside [0, 100]; the message names the field), ::TP_ENOMEM.
 *         On failure nothing changes. @since 0.4.0
 */
TP_API int tp_cluster_set_service_caps(tp_cluster *c, const char *service,
                                       const tp_service_caps *caps);

/**
 * @brief The caps of a service (tp_cluster_set_service_caps()). *Read-only.*
 * @param c The cluster. @param service The service's name.
 * @param[out] caps Receives them (its @c version must be set, 1 or 2: a version-1 struct
 *        gets no `fd_` fields; @c level and @c fd_kind are owned by the topology, NULL when
 *        there are none).
 * @return 0, ::TP_EINVAL (NULL argument, version not 1 or 2). @since 0.4.0
 */
TP_API int tp_cluster_service_caps(const tp_cluster *c, const char *service,
                                   tp_service_caps *caps);

/**
 * @brief How many running replicas of a service have a device in one domain, or in all.
 * *Read-only;* one lookup.
 * @param c The cluster. @param service The service's name.
 * @param level A level index. @param dom A domain of it, or ::TP_NONE for the whole cluster
 *        (then @p level is not read).
 * @param[out] out The count (0 for a service nothing has named).
 * @return 0, ::TP_EINVAL (NULL argument, level or domain out of range). @since 0.4.0
 */
TP_API int tp_cluster_service_replicas(const tp_cluster *c, const char *service, unsigned level,
                                       uint32_t dom, uint32_t *out);

/**
 * @brief How many running replicas of a service have a device in one failure domain (a power
 * feed), counted for the first ::TP_SERVICE_FD_KINDS kinds whether or not caps are set.
 * *Read-only;* one lookup.
 * @param c The cluster. @param service The service's name.
 * @param kind A failure-domain kind index (tp_topology_fd_kind_by_name()), below
 *        ::TP_SERVICE_FD_KINDS. @param fd A domain of it (tp_topology_device_fd()).
 * @param[out] out The count (0 for a service nothing has named).
 * @return 0, ::TP_EINVAL (NULL argument, kind or domain out of range). @since 0.4.0
 */
TP_API int tp_cluster_service_fd_replicas(const tp_cluster *c, const char *service,
                                          unsigned kind, uint32_t fd, uint32_t *out);

/**
 * @brief A fingerprint of the state (occupancy, health, jobs, services' caps): equal states
 * give equal values on every machine. *Read-only.* O(devices).
 * @param c The cluster. @return A 64-bit hash (xxHash3). @since 0.1.0
 */
TP_API uint64_t tp_cluster_fingerprint(const tp_cluster *c);

/**
 * @brief Recompute every aggregate and index from the devices and compare with the kept ones.
 * *Read-only.* O(devices). For tests and debugging.
 * @param c The cluster.
 * @param buf Receives a description of the first difference (may be NULL). @param len Its size.
 * @return 0 when consistent, ::TP_ECORRUPT otherwise, ::TP_ENOMEM (with NVLink partitions on,
 *         tp_cluster_set_partitions(): checking them needs scratch memory). No message on @p c
 *         (the call only reads it): the description goes to the caller's @p buf, which every call
 *         first empties.
 * @since 0.1.0
 */
TP_API int tp_cluster_check(const tp_cluster *c, char *buf, size_t len);

/**
 * @brief Open a savepoint: every later change is logged so that tp_cluster_rollback() can undo
 * it. Savepoints nest.
 *
 * A handle is an opaque number that the cluster never hands out twice: once its savepoint is
 * closed (rolled back, discarded, or closed with an outer one), the handle is refused with
 * ::TP_EINVAL, even when a newer savepoint took the same place on the stack.
 *
 * @param c The cluster. @param[out] sp The savepoint's handle.
 * @return 0, ::TP_EINVAL, ::TP_ENOMEM. On failure tp_cluster_errmsg() of @p c says why (a NULL
 *         @p c, and ::TP_EBUSY from the writer guard, leave no message); a success does not
 *         clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_savepoint(tp_cluster *c, size_t *sp);

/**
 * @brief Undo every change since savepoint @p sp and close it (and every savepoint opened after
 * it). Cannot fail for a valid savepoint.
 * @param c The cluster. @param sp A savepoint handle from tp_cluster_savepoint().
 * @return 0, ::TP_EINVAL (no such open savepoint: never opened, or closed already), ::TP_EINTERNAL
 *         (the undo log cannot be replayed, a bug: nothing was undone and the savepoint stays open;
 *         tp_cluster_savepoint_discard() still closes it). The message is on @p c. On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_rollback(tp_cluster *c, size_t sp);

/**
 * @brief Close savepoint @p sp (and every later one), keeping the changes.
 * @param c The cluster. @param sp A savepoint handle.
 * @return 0 or ::TP_EINVAL (no such open savepoint; the message is on @p c). On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_cluster_savepoint_discard(tp_cluster *c, size_t sp);

/**
 * @brief Bytes of memory the cluster state holds (topology excluded, Judy maps included).
 * *Read-only.* @param c The cluster. @return The size. @since 0.1.0
 */
TP_API size_t tp_cluster_memory(const tp_cluster *c);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Placement
 *
 * tp_place() answers "where would this request go?" without changing the cluster; tp_commit()
 * applies the answer. The objective is the scenario format's (docs/concepts.md): hard
 * constraints; then, for a request with a required or preferred level or slices, the fewest
 * domains level by level from the top; with `balanced`, the largest smallest share per domain;
 * then best fit, faster devices and deterministic tie-breaks.
 *  @{ */

/** @brief The answer to a request (opaque): a placement, or why there is none. */
typedef struct tp_placement tp_placement;

/**
 * @brief Place a request. *Read-only* on @p c: any number of threads may call it at once.
 *
 * Unless the return value is ::TP_ENOMEM (or ::TP_EINVAL for a NULL argument), @p *out receives
 * a result object that the caller destroys with tp_placement_destroy(), whatever the outcome: it
 * holds the devices when the call returns 0, and the message and the fit figures otherwise.
 * The idiom: set @p *out to NULL, read the message from it on failure, and always destroy it
 * (tp_placement_destroy() accepts NULL):
 * @code
 * tp_placement *p = NULL;
 * int rc = tp_place(c, &r, &p);
 * if (rc < 0)
 *         fprintf(stderr, "%s\n", p ? tp_placement_errmsg(p) : tp_strerror(rc));
 * else
 *         rc = tp_commit(c, p, NULL);
 * tp_placement_destroy(p);
 * @endcode
 *
 * @param c The cluster. @param r The request (borrowed for the call).
 * @param[out] out The result.
 * @return 0 (placed); ::TP_EINVAL (the request is invalid: the message names the field, as
 *         `request.slices[1].size`); ::TP_ENOTFOUND (an unknown level, job or node named by the
 *         request); ::TP_EINFEASIBLE (it could not be placed even on an empty cluster); ::TP_EBUSY
 *         (fewer matching devices are free than `count`); ::TP_EFRAGMENTED (enough are free, but
 *         not where the constraints need them); ::TP_ENOMEM. The message is on the result: for
 *         every code but ::TP_ENOMEM and a NULL argument, @p *out is a placement whose
 *         tp_placement_errmsg() says why ("" when placed); otherwise @p *out is NULL. @p c is not
 *         written.
 * @since 0.1.0
 */
TP_API int tp_place(const tp_cluster *c, const tp_request *r, tp_placement **out);

/**
 * @brief Replacement devices for the failed devices of a running job. *Read-only* on @p c.
 *
 * The failed devices, and any of the job's devices already down, are treated as down. Every
 * healthy device of the job stays; each failed device gets a replacement that takes its rank.
 * The job's own request (its shape), when it has one, still holds afterwards; a job without one
 * stays in the smallest domain that holds its healthy devices when it can. The result is as for
 * tp_place(); tp_commit() applies it to the running job.
 *
 * @param c The cluster. @param job The running job's id.
 * @param failed Failed device ids, each held by the job. @param nfailed Their number (>= 1).
 * @param[out] out The result.
 * @return 0, ::TP_EINVAL (a failed device the job does not hold; a job whose shape is a box
 *         (::tp_request `box_level`), which a replacement would break: release it and place its
 *         shape again), ::TP_ENOTFOUND (no such job), ::TP_EINFEASIBLE, ::TP_EBUSY,
 *         ::TP_EFRAGMENTED, ::TP_ENOMEM. The message is on the result: for every code but
 *         ::TP_ENOMEM and a NULL argument, @p *out is a placement whose tp_placement_errmsg()
 *         says why ("" when placed); otherwise @p *out is NULL. @p c is not written.
 * @since 0.1.0
 */
TP_API int tp_replace(const tp_cluster *c, const char *job, const uint32_t *failed,
                      size_t nfailed, tp_placement **out);

/** @brief Version of ::tp_replace_options this header describes. */
#define TP_REPLACE_OPTIONS_VERSION 1

/** @brief Default of tp_replace_options::max_work: job ranks visited per call (2^24). */
#define TP_REPLACE_MAX_WORK 16777216u

/**
 * @brief How much work tp_replace_ext() may spend (tp_replace() uses the defaults).
 *
 * A replacement solves one sub-request per group of failed ranks that share an anchor (the
 * innermost unit of the job's shape that keeps a healthy member), and setting up each one reads
 * every rank of the job: the work grows as (sub-requests x job size), which a large job with
 * many scattered failures makes quadratic. The budget counts that work, not time, by default,
 * so the same input gives the same answer on every machine: before each sub-request the job's
 * size is added to the work done, and when that would pass @c max_work the call stops with
 * ::TP_ELIMIT and a message naming the field (the cluster is only read, so it is unchanged).
 * With the default a call stays within a few seconds on a 2-core machine (docs/reliability.md
 * gives the figures); any replacement of a job of up to 2^20 devices with up to 16
 * sub-requests fits it (8 on a cluster with hot spares, where a sub-request may take two
 * passes: spares first, then every free device). An optional wall-clock limit (@c max_time_us) stops the call the same
 * way; it makes answers depend on the machine and its load, so leave it 0 where answers must be
 * reproducible.
 */
typedef struct tp_replace_options {
	unsigned version;     /**< ::TP_REPLACE_OPTIONS_VERSION */
	/** Job ranks visited setting up sub-requests, at most (0: the default,
	 *  ::TP_REPLACE_MAX_WORK; UINT64_MAX: no limit). */
	uint64_t max_work;
	/** Wall-clock limit of the call in microseconds, 0: none (the default). Answers then
	 *  depend on the machine. */
	uint64_t max_time_us;
} tp_replace_options;

/** @brief Initialiser for ::tp_replace_options: the default work budget, no time limit. */
#define TP_REPLACE_OPTIONS_INIT {TP_REPLACE_OPTIONS_VERSION, TP_REPLACE_MAX_WORK, 0}

/**
 * @brief Fill @p o with ::TP_REPLACE_OPTIONS_INIT (for bindings that cannot use the macro).
 * @param o The options. @param version ::TP_REPLACE_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is not 1.
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_replace_options_init(tp_replace_options *o, unsigned version);

/**
 * @brief tp_replace() with a work budget. *Read-only* on @p c.
 *
 * As tp_replace(); when the budget in @p opts runs out before every failed rank has a
 * replacement, the result's status is ::TP_ELIMIT and its message names the limit and the
 * field that raises it ("replace: the work budget ran out ... opts.max_work ...").
 *
 * @param c The cluster. @param job The running job's id.
 * @param failed Failed device ids, each held by the job. @param nfailed Their number (>= 1).
 * @param opts The budget (read during the call), or NULL for ::TP_REPLACE_OPTIONS_INIT.
 * @param[out] out The result, as for tp_replace().
 * @return As tp_replace(), and ::TP_ELIMIT (the budget ran out); ::TP_EINVAL also for an
 *         @c opts->version other than 1 (the message is on the result).
 * @since 0.4.0
 */
TP_API int tp_replace_ext(const tp_cluster *c, const char *job, const uint32_t *failed,
                          size_t nfailed, const tp_replace_options *opts, tp_placement **out);

/**
 * @brief Apply a successful placement: assign its devices to a new job (tp_place()), or swap the
 * failed devices of the job for their replacements (tp_replace()).
 * @param c The cluster the placement was made on, unchanged since (checked by a change counter).
 * @param p A result of tp_place() or tp_replace() that returned 0.
 * @param opts The new job's attributes, or NULL: class, priority and tenant from the request,
 *        the other defaults of ::TP_JOB_OPTIONS_INIT, and the request as the job's shape. With
 *        @p opts given and `opts->shape` NULL, the request is still recorded as the shape.
 *        Ignored for a replacement.
 * @return 0, ::TP_EINVAL (not a successful placement, or the cluster changed since it was made),
 *         ::TP_EEXIST (the job id is already running), ::TP_EBUSY (@p opts names another
 *         tenant than the request, and the NVLink partition rules refuse it there),
 *         ::TP_ENOMEM. On failure tp_cluster_errmsg() of @p c says why (a NULL @p c, and
 *         ::TP_EBUSY from the writer guard, leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_commit(tp_cluster *c, const tp_placement *p, const tp_job_options *opts);

/** @brief Destroy a result. @param p The result, or NULL. @since 0.1.0 */
TP_API void tp_placement_destroy(tp_placement *p);

/**
 * @brief The outcome: 0 or the code tp_place() / tp_replace() returned.
 * @param p The result. @return The code. No message: the call only reads @p p.
 * @since 0.1.0
 */
TP_API int tp_placement_status(const tp_placement *p);

/**
 * @brief A message a person understands: why the request failed, "" on success.
 * @param p The result. @return A string owned by @p p. @since 0.1.0
 */
TP_API const char *tp_placement_errmsg(const tp_placement *p);

/**
 * @brief The job id the result is for (the request's `id`, or the replaced job).
 * @param p The result. @return A string owned by @p p. @since 0.1.0
 */
TP_API const char *tp_placement_job(const tp_placement *p);

/**
 * @brief The devices, in rank order (for a replacement: the job's whole new device list).
 * @param p The result. @param[out] n Number of devices (0 on failure).
 * @return The device ids (owned by @p p), or NULL on failure. @since 0.1.0
 */
TP_API const uint32_t *tp_placement_devices(const tp_placement *p, size_t *n);

/**
 * @brief How many domains of a level the placement uses.
 * @param p The result. @param level Level index.
 * @return The count (0 on failure or for a bad level). @since 0.1.0
 */
TP_API uint32_t tp_placement_domain_count(const tp_placement *p, unsigned level);

/**
 * @brief The i-th domain of a level the placement uses, in first-rank order, and how many of
 * the placement's devices it holds.
 * @param p The result. @param level Level index. @param i Index below
 *        tp_placement_domain_count(). @param[out] dom The domain. @param[out] devices Its count.
 * @return 0 or ::TP_EINVAL. No message: the call only reads @p p.
 * @since 0.1.0
 */
TP_API int tp_placement_domain_at(const tp_placement *p, unsigned level, uint32_t i,
                                  uint32_t *dom, uint32_t *devices);

/**
 * @brief The objective's rule that decided a placement's outermost choice among candidates
 * (tp_placement_decided_by()).
 *
 * The solver chooses a single domain for the job where one can hold it: the top-level domain,
 * then a child of it, and so on. At the outermost level where it compared candidates, this
 * says on which rule the chosen domain beat the closest candidate it evaluated (the spec's
 * objective, spec/scenario-v1.md, and its refinements in ::tp_request).
 * @since 0.4.0
 */
typedef enum tp_rule {
	/** No choice was made among candidates: one domain could take the job, the request is
	 *  unconstrained (filled tightest first), or the job spans several top-level domains
	 *  chosen together. */
	TP_RULE_NONE = 0,
	/** Rule 1: the others would use more domains at some level. */
	TP_RULE_LOCALITY = 1,
	/** Rule 2: with `balanced`, the split had to keep a smallest share above one unit (a
	 *  bound the others could not meet with the same domain counts). */
	TP_RULE_BALANCE = 2,
	/** Rule 3: the placement mix's loss (tp_cluster_set_place_mix()), then best fit; also
	 *  when the search stopped at a candidate that meets every count's lower bound, the rest
	 *  being looser. */
	TP_RULE_FIT = 3,
	/** Rule 4 refined (`comm`): candidates tied on rules 1 to 3 and the modelled step time
	 *  of the whole job chose among them. */
	TP_RULE_STEP = 4,
	/** Candidates tied on every rule (and step time, or no `comm`): the lowest index won. */
	TP_RULE_TIE = 5,
	/** Rule 3 refined (`expected_end_s`): of the tightest nodes that hold the request, the
	 *  one whose running jobs end last at or after the job's expected end (else the latest)
	 *  won. */
	TP_RULE_END = 6
} tp_rule;

/**
 * @brief Which rule of the objective decided the placement's outermost choice among
 * candidate domains (::tp_rule). *Read-only.*
 * @param p The result. @return The rule; ::TP_RULE_NONE for NULL, a failed result, or when no
 *         choice among candidates was made. @note Thread-safe on a result nobody destroys.
 * @since 0.4.0
 */
TP_API tp_rule tp_placement_decided_by(const tp_placement *p);

/**
 * @brief The modelled time of one ring all-reduce of 1 GiB over the placement's devices, in
 * microseconds (the cost model's score; 0 for one device).
 * @param p The result. @return The time, or 0 on failure. @since 0.1.0
 */
TP_API double tp_placement_step_comm_us(const tp_placement *p);

/**
 * @brief The NIC paired with the device of rank @p i of a placement made for a request with
 * `gpu_nic_pairs` (see ::tp_request). *Read-only.*
 * @param p The result. @param i Rank, below the count of tp_placement_devices().
 * The NIC is one no other running job holds; tp_commit() records it as held by the job.
 * @return The NIC's index in the node type of the device's node (tp_topology_node_type(),
 *         tp_nodetype_nic_name()); ::TP_ENOTFOUND when the request did not ask for pairs, or, for a
 *         replacement, when a device the job already held has no NIC left to pair with; ::TP_EINVAL
 *         for a failed result or @p i out of range. No message: the call only reads @p p.
 * @since 0.2.0
 */
TP_API int tp_placement_nic(const tp_placement *p, size_t i);

/**
 * @brief For a tp_replace() that could not repair the job: the cheapest shrink, the job without
 * its outermost slices (else groups, else devices) that hold a failed rank it could not
 * replace. The message says the same and names the jobs whose eviction would make room.
 * *Read-only.*
 * @param p The result. @param[out] ranks Ranks the shrunk job keeps (0: nothing would be
 *        left), or NULL. @param[out] units Whole slices (groups, devices) it keeps, or NULL.
 * @param[out] of The job's slices (groups, devices), or NULL.
 * @return 0, or ::TP_EINVAL (not a failed replacement with figures: a success, a bad argument, or a
 *         refusal after the fact such as a spread). No message: the call only reads @p p.
 * @since 0.4.0
 */
TP_API int tp_placement_repair_shrink(const tp_placement *p, uint32_t *ranks, uint32_t *units,
                                      uint32_t *of);

/**
 * @brief The NVLink partitions a successful placement needs (tp_cluster_set_partitions()): one
 * per NVLink domain of the partition level in which it uses two or more nodes. *Read-only.*
 * @param p The result.
 * @return Their number; 0 for a failed result, with partitions off, or on one node. @since 0.4.0
 */
TP_API size_t tp_placement_partition_count(const tp_placement *p);

/**
 * @brief The i-th partition of a placement, in domain order. *Read-only.*
 * @param p The result. @param i Index, below tp_placement_partition_count().
 * @param[out] dom The domain of the partition level (or NULL).
 * @param[out] channel Its channel in the domain's pool (or NULL).
 * @param[out] nodes The nodes that form it, ascending, owned by @p p (or NULL).
 * @param[out] n Their number (or NULL).
 * @return 0, ::TP_ENOTFOUND (@p i past the end), ::TP_EINVAL (NULL @p p). @since 0.4.0
 */
TP_API int tp_placement_partition(const tp_placement *p, size_t i, uint32_t *dom,
                                  uint32_t *channel, const uint32_t **nodes, size_t *n);

/** @brief Version of ::tp_fit this header describes. */
#define TP_FIT_VERSION 1

/** @brief Fit figures of a request that could not be placed (an output struct: the caller
 *  sets `version`, the library fills the fields that version has). */
typedef struct tp_fit {
	unsigned version;    /**< ::TP_FIT_VERSION, set by the caller */
	uint32_t needed;     /**< the request's count (devices to replace, for tp_replace()) */
	uint32_t free_total; /**< free, healthy, uncordoned devices that match the request */
	int level;           /**< the required level, else the top level */
	uint32_t best;       /**< most devices of the request one domain of `level` takes now */
} tp_fit;

/** @brief Initialiser for ::tp_fit. */
#define TP_FIT_INIT {TP_FIT_VERSION, 0, 0, 0, 0}

/**
 * @brief Set a ::tp_fit to ::TP_FIT_INIT, for callers that cannot use the macro (bindings), as
 * libgit2's `git_clone_options_init()` does.
 * @param[out] fit The struct to fill; its version field becomes @p version.
 * @param version ::TP_FIT_VERSION.
 * @return 0, or ::TP_EINVAL when @p fit is NULL or @p version is not ::TP_FIT_VERSION (nothing is
 *         written; no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_fit_init(tp_fit *fit, unsigned version);

/**
 * @brief The fit figures of a failed result (::TP_EINFEASIBLE, ::TP_EBUSY, ::TP_EFRAGMENTED).
 * @param p The result. @param[out] fit The figures; `fit->version` must be set
 *        (::TP_FIT_INIT).
 * @return 0, or ::TP_EINVAL when the result is a success or an invalid request, or the version is
 *         not supported. No message: the call only reads @p p.
 * @since 0.1.0
 */
TP_API int tp_placement_fit(const tp_placement *p, tp_fit *fit);

/**
 * @brief For a replacement: the i-th failed device and the device that replaces it.
 * @param p The result. @param i Index, from 0. @param[out] failed The failed device.
 * @param[out] replacement Its replacement.
 * @return 0, ::TP_ENOTFOUND (past the end), ::TP_EINVAL (not a successful replacement). No message:
 *         the call only reads @p p.
 * @since 0.1.0
 */
TP_API int tp_placement_replaced(const tp_placement *p, size_t i, uint32_t *failed,
                                 uint32_t *replacement);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Fragmentation report
 *
 * How scattered the free devices are, per level, and for an expected mix of jobs: the share of
 * free devices that the mix cannot use at full locality. A report is a snapshot; it does not
 * change when the cluster does.
 *  @{ */

/** @brief A fragmentation report (opaque). */
typedef struct tp_frag tp_frag;

/** @brief One kind of job in a mix: `devices` devices that want to sit inside one domain of
 *  `level` (full locality), with a relative `weight`. */
typedef struct tp_job_shape {
	uint32_t devices;  /**< devices per job (>= 1) */
	const char *level; /**< the level one job should fit inside */
	double weight;     /**< relative share of the mix (> 0) */
} tp_job_shape;

/**
 * @brief Build a fragmentation report. *Read-only* on @p c; O(domains of every level).
 *
 * Per level: the number of domains; free devices; fully free domains (every device free,
 * healthy and uncordoned); the most free devices in one domain; and the fragmentation, the share
 * of free devices that are not in fully free domains (0 when nothing is free).
 *
 * The workload figure uses @p mix, or when @p mix is NULL the default mix: equal weights of
 * 1 device per node, a whole node, half a domain of the lowest level above the node, and a whole
 * such domain (on an NVL72 fleet: 1, 4, 36 and 72 GPUs, the last two inside one rack). A job of
 * the mix can use the free devices of a domain of its level in whole jobs only, so the figure is
 * 1 - (sum of weight x devices usable by that shape) / (sum of weights x free devices).
 *
 * @param c The cluster. @param mix Job shapes, or NULL for the default mix.
 * @param nmix Number of shapes (0 with NULL).
 * @param[out] out The report, owned by the caller (tp_frag_destroy()). It is set on a failed
 *        mix too, to a report that carries the reason (tp_frag_errmsg()) and no figures; it
 *        is NULL only when @p c or @p out is NULL or memory ran out. Set it to NULL before the
 *        call and always destroy it, as with tp_place().
 * @return 0, ::TP_EINVAL (a shape with 0 devices or no level, a weight <= 0 or not finite, a NULL
 *         mix with @p nmix > 0, or @p c or @p out NULL), ::TP_ENOTFOUND (a shape's level does not
 *         exist), ::TP_ENOMEM. The message names the shape and the field. (Before 0.4.0 a failure
 *         returned no report and kept no reason.) The message is on the report: for every code but
 *         ::TP_ENOMEM and a NULL @p c or @p out, @p *out is a report whose tp_frag_errmsg() says
 *         why ("" for a report made); @p c is not written.
 * @since 0.1.0
 */
TP_API int tp_frag_report(const tp_cluster *c, const tp_job_shape *mix, size_t nmix,
                          tp_frag **out);

/** @brief Destroy a report. @param f The report, or NULL. @since 0.1.0 */
TP_API void tp_frag_destroy(tp_frag *f);

/** @brief Why tp_frag_report() failed ("" for a report it made).
 *  @param f The report. @return The message (owned by @p f). @since 0.4.0 */
TP_API const char *tp_frag_errmsg(const tp_frag *f);

/** @brief Domains of a level. @param f The report. @param level Level.
 *  @return The count (0 for a bad level). @since 0.1.0 (named tp_frag_domains until 0.4.0) */
TP_API uint32_t tp_frag_domain_count(const tp_frag *f, unsigned level);
/** @brief Free devices at a level (the same at every level: free devices of the cluster).
 *  @param f The report. @param level Level. @return The count.
 *  @since 0.1.0 (named tp_frag_free until 0.4.0) */
TP_API uint32_t tp_frag_free_count(const tp_frag *f, unsigned level);
/** @brief Domains of a level whose every device is free, healthy and uncordoned.
 *  @param f The report. @param level Level. @return The count.
 *  @since 0.1.0 (named tp_frag_fully_free until 0.4.0) */
TP_API uint32_t tp_frag_fully_free_count(const tp_frag *f, unsigned level);
/** @brief The most free devices in one domain of a level.
 *  @param f The report. @param level Level. @return The count.
 *  @since 0.1.0 (named tp_frag_largest_free until 0.4.0) */
TP_API uint32_t tp_frag_largest_free_count(const tp_frag *f, unsigned level);
/**
 * @brief The largest box of wholly free children in one domain of a grid level
 * (tp_topology_builder_set_grid()): the biggest box request that fits now, wrapping where the
 * grid wraps.
 * @param f The report. @param level A grid level.
 * @param[out] ext ::TP_GRID_MAX_DIMS extents of that box (0 when none), or NULL.
 * @return The box's children (0 when the level is no grid or nothing is wholly free).
 * @since 0.4.0
 */
TP_API uint32_t tp_frag_largest_box(const tp_frag *f, unsigned level, unsigned *ext);
/**
 * @brief The fragments of a grid level's free space: connected sets of wholly free children
 * (neighbours along the axes, across the seam where the grid wraps), summed over its domains.
 * The count box requests keep low (::tp_request).
 * @param f The report. @param level A grid level.
 * @return The count (0 when the level is no grid). @since 0.4.0
 */
TP_API uint32_t tp_frag_grid_fragment_count(const tp_frag *f, unsigned level);
/** @brief Share of free devices not in fully free domains of a level, in [0, 1].
 *  @param f The report. @param level Level. @return The share (0 when nothing is free).
 *  @since 0.1.0 */
TP_API double tp_frag_fragmentation(const tp_frag *f, unsigned level);
/** @brief Share of free devices the job mix cannot use at full locality, in [0, 1].
 *  @param f The report. @return The share (0 when nothing is free). @since 0.1.0 */
TP_API double tp_frag_workload(const tp_frag *f);
/** @brief Devices down when the report was made. @param f The report. @return The count.
 *  @since 0.1.0 (named tp_frag_down until 0.4.0) */
TP_API uint32_t tp_frag_down_count(const tp_frag *f);
/** @brief Devices cordoned (and not down) when the report was made. @param f The report.
 *  @return The count. @since 0.1.0 (named tp_frag_cordoned until 0.4.0) */
TP_API uint32_t tp_frag_cordoned_count(const tp_frag *f);

/** @brief The most shapes tp_cluster_set_place_mix() takes. @since 0.4.0 */
#define TP_PLACE_MIX_MAX 16

/**
 * @brief Set the job mix that placement protects (spec rule 3, refined). *Writing* on @p c.
 *
 * Among placements equal under rules 1 and 2 (fewest domains level by level, balance),
 * tp_place() and tp_replace() prefer the one that least lowers the devices the mix could use
 * at full locality, the figure of tp_frag_workload(): for each shape (d devices, level L,
 * weight w) and each domain D of level L that the placement takes t devices from, the loss is
 * w * d * (floor(f / d) - floor((f - t) / d)), f being D's free devices before. The losses are
 * summed over the shapes and domains; best fit (the tightest domains, the highest level first)
 * breaks the ties that remain. Weights are relative; they are scaled to integers summing to
 * about 64 (each at least 1). The score reads only the free counts the cluster keeps, per
 * domain used: no scan.
 *
 * A new cluster has no mix (best fit alone, the rule of 0.3): on the simulator's comparison
 * grid the default mix below measured worse than best fit (docs/concepts.md, "The placement
 * mix"), so the mix is the caller's choice, best its own job mix.
 *
 * @param c The cluster.
 * @param mix The shapes (copied); NULL with @p nmix 0: the mix tp_frag_report() uses by
 *        default (equal weights of 1 device and a whole node inside a node, half and all of a
 *        domain of the lowest level above the node); non-NULL with @p nmix 0: no mix (best fit
 *        alone, as a new cluster has).
 * @param nmix Number of shapes, at most ::TP_PLACE_MIX_MAX.
 * @return 0, ::TP_EINVAL (NULL @p c, NULL @p mix with @p nmix > 0, more than ::TP_PLACE_MIX_MAX
 *         shapes, a shape with no level, 0 devices or a weight that is not finite and > 0),
 *         ::TP_ENOTFOUND (a level the topology lacks); on failure the mix is unchanged and
 *         tp_cluster_errmsg() names the shape, the field and the value. On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.4.0
 */
TP_API int tp_cluster_set_place_mix(tp_cluster *c, const tp_job_shape *mix, size_t nmix);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Defragmentation plans
 *
 * When a request does not fit (typically ::TP_EFRAGMENTED), a plan says which running jobs to
 * migrate or preempt, in which order, so that it does: the cheapest plan first (checkpoint
 * seconds x devices of every job moved), then the fewest jobs moved, then the least fragmented
 * cluster afterwards. The planner also frees whole domains ahead of time (compaction).
 *  @{ */

/** @brief Version of ::tp_defrag_policy this header describes. */
#define TP_DEFRAG_POLICY_VERSION 4

/** @brief Default of tp_defrag_policy::max_candidates: candidate domains searched per call. */
#define TP_DEFRAG_MAX_CANDIDATES 4096u
/** @brief Default of tp_defrag_policy::max_simulations: job sets simulated per call. */
#define TP_DEFRAG_MAX_SIMULATIONS 512u
/** @brief Placement trials (the planner's own tp_place() calls outside a simulation's request:
 *  fit checks of a job set, and each try at a migrant's new home) a call may make per
 *  simulation of its budget: at most tp_defrag_policy::max_simulations times this many.
 *  @since 0.4.0 */
#define TP_DEFRAG_TRIALS_PER_SIMULATION 32u

/**
 * @brief What a plan may do, and how much work the planner may spend finding it.
 *
 * Version 1 ends at @c min_priority_gap and behaves as version 3 with @c allow_less_local 0;
 * version 2 ends at @c allow_less_local. Both are still accepted (read by their size) and get
 * the default work budget. Version 3 ends at @c max_time_us and has no preferred targets.
 *
 * The work budget (version 3) bounds the search, where @c max_moves and @c max_cost_s bound
 * the plan. It is counted in work, not time, by default, so the same input gives the same
 * answer on every machine: at most @c max_candidates candidate domains are searched and at most
 * @c max_simulations job sets are simulated (released, placed, given new homes) per call,
 * counting the second search that explains a failure. With the defaults a call stays within
 * a few seconds even on a fleet of 2.1 million GPUs (docs/defrag.md gives the figures). When
 * the budget runs out the search stops: the best plan found so far is returned (status 0,
 * flagged in tp_defrag_stats::budget), or, when none was found, ::TP_ENOPLAN with a message
 * that names the limit and the field that raises it. An optional wall-clock limit
 * (@c max_time_us) stops the search the same way; it makes answers depend on the machine and
 * its load, so leave it 0 where answers must be reproducible.
 */
typedef struct tp_defrag_policy {
	unsigned version;       /**< ::TP_DEFRAG_POLICY_VERSION (1 and 2 are accepted too) */
	int migrate;            /**< migratable jobs of priority <= the request's may move */
	int preempt;            /**< preemptible jobs at least min_priority_gap below may stop */
	int allow_interactive;  /**< interactive jobs may be touched (an administrator's choice) */
	uint32_t max_moves;     /**< most jobs migrated or preempted (UINT32_MAX: no limit) */
	double max_cost_s;      /**< most total cost in checkpoint-seconds (< 0: no limit) */
	int min_priority_gap;   /**< a preempted job's priority is at least this far below */
	/** 0 (the default): a migrated job never lands less local than it sits: at every level,
	 *  its new devices span at most as many domains as its old ones (so the smallest domain
	 *  holding all of them is no higher); a job with no such home is not migrated (it may
	 *  still be preempted). Nonzero: a migrated job may land less local (a job without a
	 *  shape anywhere its size fits, as before version 2). */
	int allow_less_local;
	/** Candidate domains the planner searches for a set of jobs, at most (0: the default,
	 *  ::TP_DEFRAG_MAX_CANDIDATES; UINT32_MAX: no limit). Version 3. */
	uint32_t max_candidates;
	/** Job sets the planner simulates, at most (0: the default,
	 *  ::TP_DEFRAG_MAX_SIMULATIONS; UINT32_MAX: no limit). Version 3. It also bounds the
	 *  placement trials (fit checks, and the tries at each migrant's new home) to this many
	 *  times ::TP_DEFRAG_TRIALS_PER_SIMULATION (since 0.4.0); when they run out the search
	 *  stops as when the simulations do (tp_defrag_stats::budget is
	 *  ::TP_BUDGET_SIMULATIONS, and the message says which ran out). */
	uint32_t max_simulations;
	/** Wall-clock limit of the call in microseconds, 0: none (the default). Answers then
	 *  depend on the machine. Version 3. */
	uint64_t max_time_us;
	/** Level of @c prefer_targets (a level index, as tp_plan_targets() gives it). Version 4.
	 *  @since 0.4.0 */
	unsigned prefer_level;
	/** Stable targets: the domains an earlier plan drained (tp_plan_targets()), read only
	 *  during the call. When a plan exists whose request lands inside these domains, the
	 *  planner returns the cheapest such plan even if another target became cheaper; only
	 *  when none exists (within the policy's limits) does it search everywhere. NULL with
	 *  @c nprefer_targets 0: no preference (the default). Every call that takes the policy
	 *  checks them (::TP_EINVAL for a bad level or domain), even one that needs no search
	 *  and tp_defrag_compact(), which does not use them. Version 4. @since 0.4.0 */
	const uint32_t *prefer_targets;
	/** Number of @c prefer_targets. Version 4. @since 0.4.0 */
	size_t nprefer_targets;
} tp_defrag_policy;

/** @brief Initialiser for ::tp_defrag_policy: migrate and preempt allowed, interactive jobs
 *  untouched, no limits on the plan, priority gap 1, migrated jobs never less local, the
 *  default work budget, no wall-clock limit and no preferred targets. */
#define TP_DEFRAG_POLICY_INIT                                                                  \
	{TP_DEFRAG_POLICY_VERSION, 1, 1, 0, UINT32_MAX, -1.0, 1, 0, TP_DEFRAG_MAX_CANDIDATES,       \
	 TP_DEFRAG_MAX_SIMULATIONS, 0, 0, NULL, 0}

/**
 * @brief Set a ::tp_defrag_policy to ::TP_DEFRAG_POLICY_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] p The struct to fill; its version field becomes @p version.
 * @param version ::TP_DEFRAG_POLICY_VERSION, or an older version the library still reads (1 to 4):
 *        only the fields of that version are written, so a caller built against an older header is
 *        not overrun.
 * @return 0, or ::TP_EINVAL when @p p is NULL or @p version is none of these (nothing is written;
 *         no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_defrag_policy_init(tp_defrag_policy *p, unsigned version);

/** @brief A defragmentation plan (opaque). */
typedef struct tp_plan tp_plan;

/** @brief What one step of a plan does. */
typedef enum tp_step_action {
	TP_STEP_MIGRATE = 0, /**< stop a job and restart it on its `to` devices */
	TP_STEP_PREEMPT = 1, /**< stop a job (it is requeued by the caller) */
	TP_STEP_PLACE = 2    /**< place the request on its `to` devices (always the last step) */
} tp_step_action;

/**
 * @brief Plan the moves that make a request placeable.
 *
 * The planner tries moves on @p c under savepoints and rolls every one back: when it returns,
 * @p c is exactly as before (same fingerprint), but it is a *writing* call (one writer at a
 * time). Unless the return value is ::TP_ENOMEM (or ::TP_EINVAL for a NULL argument), @p *out
 * receives a plan object to destroy with tp_plan_destroy(), holding the steps on success and
 * the reason otherwise. When the request fits already, the plan is the single place step.
 *
 * @param c The cluster. @param r The request. @param policy What may be done, or NULL for
 *        ::TP_DEFRAG_POLICY_INIT.
 * @param[out] out The plan.
 * @return 0; ::TP_ENOPLAN (no plan within the policy: the message says what blocked it, e.g. "rack
 *         b0/r3 would need interactive job j17 moved"); ::TP_EINFEASIBLE (no plan can exist: the
 *         request does not fit even an empty cluster); ::TP_EINVAL / ::TP_ENOTFOUND (invalid
 *         request or policy; the message names the field); ::TP_ENOMEM. The message is on the plan:
 *         whenever @p *out is set, tp_plan_errmsg() says why ("" for a plan found), and a failure
 *         copies it to tp_cluster_errmsg() of @p c; when no plan could be made (a NULL argument,
 *         ::TP_ENOMEM, the writer guard) @p *out is NULL and only @p c carries the message (none
 *         for a NULL @p c or the guard). A success does not clear the cluster's message.
 * @since 0.1.0
 */
TP_API int tp_defrag_plan(tp_cluster *c, const tp_request *r, const tp_defrag_policy *policy,
                          tp_plan **out);

/**
 * @brief Plan the moves that leave @p ndomains domains of a level fully free (compaction), for
 * operators who want racks ready before a big job arrives. A writing call that leaves @p c as
 * it was, as tp_defrag_plan(). The plan has no place step.
 * @param c The cluster. @param level The level's name. @param ndomains Domains to free (>= 1).
 * @param policy What may be done (priorities are compared with 0), or NULL for the defaults.
 * @param[out] out The plan.
 * @return 0, ::TP_ENOPLAN, ::TP_EINVAL, ::TP_ENOTFOUND, ::TP_ENOMEM. The message is on the plan:
 *         whenever @p *out is set, tp_plan_errmsg() says why ("" for a plan found), and a failure
 *         copies it to tp_cluster_errmsg() of @p c; when no plan could be made (a NULL argument,
 *         ::TP_ENOMEM, the writer guard) @p *out is NULL and only @p c carries the message (none
 *         for a NULL @p c or the guard). A success does not clear the cluster's message.
 * @since 0.1.0
 */
TP_API int tp_defrag_compact(tp_cluster *c, const char *level, uint32_t ndomains,
                             const tp_defrag_policy *policy, tp_plan **out);

/**
 * @brief Compaction for one waiting request: the moves that free as many whole domains of
 * @p level as @p r needs, such that @p r then fits (a scheduler's blocked head job, e.g. the
 * job an EASY reservation waits for). A writing call that leaves @p c as it was, as
 * tp_defrag_compact().
 *
 * When @p r fits already, the plan is the single place step. When it is answered
 * ::TP_EFRAGMENTED, the number of domains to free is those fully free now plus, for a slice
 * layer of @p r at @p level, one per slice less the domains that can hold a slice already
 * (at least one): tp_defrag_compact() with that count, under @p policy (its `max_moves` and
 * `max_cost_s` bound the plan; a caller passes the request's gain there). The plan is
 * returned only if @p r then places: its migration steps are followed by the place step, as
 * with tp_defrag_plan(), and tp_plan_apply_step() carries them out.
 *
 * @param c The cluster. @param level The level whose domains are freed (the NVLink domain,
 *        say). @param r The waiting request (borrowed; copied into the plan).
 * @param policy What may be done (priorities are compared with 0), or NULL for the defaults.
 * @param[out] out The plan.
 * @return 0; ::TP_ENOPLAN (no set of domains can be freed within @p policy, the message of
 *         tp_defrag_compact(); or @p r still does not fit with them free: "with 2 rack domains
 *         freed the request still does not fit: ..."); ::TP_EBUSY (fewer free devices than
 *         @p r wants: moves cannot help; the placement's message); ::TP_EINFEASIBLE,
 *         ::TP_EINVAL, ::TP_ENOTFOUND (the request or the level, as tp_place() and
 *         tp_defrag_compact() say; "request is NULL"); ::TP_ENOMEM. The message is on the plan
 *         as with tp_defrag_compact().
 * @since 0.4.0
 */
TP_API int tp_defrag_compact_for(tp_cluster *c, const char *level, const tp_request *r,
                                 const tp_defrag_policy *policy, tp_plan **out);

/** @brief Destroy a plan. @param p The plan, or NULL. @since 0.1.0 */
TP_API void tp_plan_destroy(tp_plan *p);
/** @brief The outcome: 0 or the code the planner returned. @param p The plan.
 *  @return The code. No message: the call only reads @p p.
 *  @since 0.1.0 */
TP_API int tp_plan_status(const tp_plan *p);
/** @brief Why no plan was found ("" on success). @param p The plan.
 *  @return A string owned by @p p. @since 0.1.0 */
TP_API const char *tp_plan_errmsg(const tp_plan *p);
/** @brief Number of steps (0 on failure). @param p The plan. @return The count. @since 0.1.0 */
TP_API size_t tp_plan_step_count(const tp_plan *p);
/**
 * @brief One step of the plan, in the order they can be carried out.
 * @param p The plan. @param i Step index.
 * @param[out] action What the step does. @param[out] job The job's id (the request's id for
 *        the place step; owned by @p p).
 * @param[out] from The job's current devices (none for the place step). @param[out] nfrom Count.
 * @param[out] to Target devices (none for a preemption). @param[out] nto Count.
 * @return 0 or ::TP_EINVAL. Any output pointer may be NULL. No message: the call only reads @p p.
 * @since 0.1.0
 */
TP_API int tp_plan_step(const tp_plan *p, size_t i, tp_step_action *action, const char **job,
                        const uint32_t **from, size_t *nfrom, const uint32_t **to, size_t *nto);
/** @brief Jobs migrated or preempted. @param p The plan. @return The count.
 *  @since 0.1.0 (named tp_plan_moved_jobs until 0.4.0) */
TP_API uint32_t tp_plan_moved_job_count(const tp_plan *p);
/** @brief Devices of the jobs migrated or preempted. @param p The plan. @return The count.
 *  @since 0.1.0 (named tp_plan_moved_devices until 0.4.0) */
TP_API uint32_t tp_plan_moved_device_count(const tp_plan *p);
/** @brief The plan's cost: checkpoint seconds x devices, summed over the jobs moved.
 *  @param p The plan. @return Seconds. @since 0.1.0 */
TP_API double tp_plan_cost_s(const tp_plan *p);
/**
 * @brief The final placement of the request (as tp_place() answers on the cluster the plan
 * leaves), or NULL for a compaction plan or a failed plan.
 * @param p The plan. @return A placement owned by @p p. @since 0.1.0
 */
TP_API const tp_placement *tp_plan_placement(const tp_plan *p);
/**
 * @brief A lower bound on the cost of every plan for the request under the policy (seconds),
 * so a caller knows how far from optimal the plan may be: the plan's own cost when the search
 * was exact (every candidate and target set searched to its end, as for candidates with at
 * most 32 movable jobs within the default budgets), else the smallest fractional bound of
 * what was not searched exactly (docs/defrag.md). For a plan kept on preferred targets
 * (tp_defrag_policy::prefer_targets), the bound is over the plans on those targets.
 * @param p The plan (read-only). @return Seconds, at most tp_plan_cost_s(); 0 for a failed
 *         plan. @since 0.4.0
 */
TP_API double tp_plan_lower_bound_s(const tp_plan *p);
/**
 * @brief The domains the plan drains: the domains of one level where the request lands (the
 * target set, for a request sliced or grouped below its candidate level; else the candidate
 * domain, e.g. the rack of a rack-required request). A request without a required level has
 * none. Pass them back in tp_defrag_policy::prefer_targets to keep them on a later call.
 * @param p The plan (read-only). @param[out] level The level's index.
 * @param[out] doms The domain ids of that level, owned by @p p (NULL when none).
 * @param[out] n Their count (0 for a failed plan or none).
 * @return 0, or ::TP_EINVAL when an argument is NULL (no object carries a message for this call).
 *         No message: the call only reads @p p.
 * @note Read-only. @since 0.4.0
 */
TP_API int tp_plan_targets(const tp_plan *p, unsigned *level, const uint32_t **doms,
                           size_t *n);
/**
 * @brief Carry out step @p i on the cluster's records: a migration moves the job's devices, a
 * preemption releases the job, the place step commits the request (with @p opts as
 * tp_commit()). Steps must be applied in order on the cluster the plan was made for or on a
 * copy of it (tp_cluster_copy(): the plan records the cluster's lineage, and any other cluster
 * is refused); step 0 may always start over. The cluster keeps the cursor (the last plan
 * applied to it, known by its steps, and the step it accepts next), so @p p is only read: one
 * plan may be applied to several clusters at once, from several threads (a writing call on
 * each cluster, read-only on the plan).
 * @param c The cluster (written). @param p The plan (read-only). @param i The step.
 * @param opts The new job's attributes for the place step, or NULL.
 * @return 0, ::TP_EINVAL (out of order, a cluster that is neither the plan's nor a copy of it,
 *         or the cluster no longer matches the step: the message names the device or job),
 *         ::TP_EEXIST (the place step's job id is already running), ::TP_ENOMEM. On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer
 *         guard, leave no message); a success does not clear it.
 * @since 0.1.0
 */
TP_API int tp_plan_apply_step(tp_cluster *c, const tp_plan *p, size_t i,
                              const tp_job_options *opts);

/** @brief Version of ::tp_defrag_stats this header describes. */
#define TP_DEFRAG_STATS_VERSION 1

/** @brief Which part of the work budget stopped a search (tp_defrag_stats::budget). */
typedef enum tp_defrag_budget {
	TP_BUDGET_NONE = 0,        /**< the search ran to its end */
	TP_BUDGET_CANDIDATES = 1,  /**< tp_defrag_policy::max_candidates */
	TP_BUDGET_SIMULATIONS = 2, /**< tp_defrag_policy::max_simulations (job sets simulated, or
	                                the placement trials it allows) */
	TP_BUDGET_TIME = 3         /**< tp_defrag_policy::max_time_us */
} tp_defrag_budget;

/** @brief The work one planning call did (tp_plan_stats()). */
typedef struct tp_defrag_stats {
	unsigned version;        /**< ::TP_DEFRAG_STATS_VERSION, set by the caller */
	uint64_t scanned;        /**< reads of a candidate domain's devices (a domain searched is
	                              read twice: to bound it, then to search it) */
	uint64_t evaluated;      /**< candidate domains searched for a set of jobs */
	uint64_t simulated;      /**< job sets simulated (released, placed, given new homes) */
	tp_defrag_budget budget; /**< what stopped the search early, ::TP_BUDGET_NONE if nothing */
} tp_defrag_stats;

/** @brief Initialiser for ::tp_defrag_stats. */
#define TP_DEFRAG_STATS_INIT {TP_DEFRAG_STATS_VERSION, 0, 0, 0, TP_BUDGET_NONE}

/**
 * @brief Set a ::tp_defrag_stats to ::TP_DEFRAG_STATS_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] s The struct to fill; its version field becomes @p version.
 * @param version ::TP_DEFRAG_STATS_VERSION.
 * @return 0, or ::TP_EINVAL when @p s is NULL or @p version is not ::TP_DEFRAG_STATS_VERSION
 *         (nothing is written; no object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_defrag_stats_init(tp_defrag_stats *s, unsigned version);

/**
 * @brief The work the call that made @p p did, whether it found a plan or not: how many
 * candidate domains it read and searched, how many job sets it simulated, and whether the work
 * budget (tp_defrag_policy::max_candidates and the fields after it) stopped it early. A plan
 * that fits without moves, and a plan refused before any search, report zeros.
 * @param p The plan (read-only). @param[in,out] out Receives the figures; set its @c version
 *        first (::TP_DEFRAG_STATS_INIT).
 * @return 0, or ::TP_EINVAL when @p p or @p out is NULL or @c out->version is not 1 (no object
 *         carries a message for this call). No message: the call only reads @p p.
 * @note Read-only: may run on one plan from several threads. @since 0.3.0
 */
TP_API int tp_plan_stats(const tp_plan *p, tp_defrag_stats *out);

/** @} */

/* ------------------------------------------------------------------------------------------ */
/** @name Cost model
 * The communication model behind scores and the simulator (docs/cost-model.md): the modelled
 * time of a training step of a job laid out on given devices, and the placement efficiency of
 * that layout against the best one the topology allows.
 *  @{ */

/** @brief Version of ::tp_step_model this header describes (2 since 0.4.0: `min_efficiency`;
 *  3 since 0.4.0: `no_floor_search` and `fabric_fit`; a model of version 1 is still accepted
 *  and has no floor, one of version 2 has the floor and its search and no fabric fit). */
#define TP_STEP_MODEL_VERSION 3

/**
 * @brief A training step: parallel degrees and what each kind of group exchanges.
 *
 * The job's n devices are in rank order, tensor (@c tp), pipeline (@c pp) and data (@c dp)
 * parallel degrees with tp x pp x dp = n, ranks ordered tensor fastest, then data, then
 * pipeline (Megatron's order: rank = t + tp x (d + dp x p)). The step time is
 * compute_us / (relative speed of the slowest device)
 * + tp_msgs x the slowest tensor group's ring all-reduce of tp_bytes
 * + (1 - dp_overlap) x the slowest data-parallel group's all-reduce of dp_bytes (the better of
 *   ring and hierarchical)
 * + pp_msgs x the slowest point-to-point transfer of pp_bytes between consecutive stages
 * + ep_msgs x the slowest expert group's all-to-all of ep_bytes (@c ep consecutive
 *   data-parallel ranks; ep 0 or 1: no expert parallelism).
 * Sizes are in bytes, times in microseconds.
 */
typedef struct tp_step_model {
	unsigned version;  /**< ::TP_STEP_MODEL_VERSION */
	unsigned tp;       /**< tensor-parallel degree (>= 1) */
	unsigned pp;       /**< pipeline-parallel degree (>= 1) */
	unsigned dp;       /**< data-parallel degree (>= 1) */
	unsigned ep;       /**< expert-parallel degree (0 or 1: none; else divides dp) */
	double compute_us; /**< compute time of a step on a device of relative speed 1 (>= 0) */
	double tp_bytes;   /**< bytes of one tensor-parallel all-reduce (>= 0) */
	unsigned tp_msgs;  /**< tensor-parallel all-reduces per step */
	double dp_bytes;   /**< bytes of the data-parallel gradient all-reduce (>= 0) */
	double dp_overlap; /**< share of it hidden behind compute, 0 to 1 */
	double pp_bytes;   /**< bytes of one pipeline transfer (>= 0) */
	unsigned pp_msgs;  /**< pipeline transfers per step */
	double ep_bytes;   /**< bytes each device sends in one all-to-all (>= 0) */
	unsigned ep_msgs;  /**< expert all-to-alls per step */
	/** The lowest placement efficiency (tp_cost_efficiency()) tp_place() may answer for a
	 *  request whose `comm` is this model, in [0, 1]; 0 (the default): no floor. When the
	 *  placement the rules choose is below it, tp_place() searches the topology's fabric
	 *  classes for one that meets it (see ::tp_request, "How the job communicates"; unless
	 *  @c no_floor_search) and, finding none, answers ::TP_EBUSY with a message naming
	 *  `request.comm.min_efficiency`, its value and the best efficiency reachable now: the
	 *  job waits for a better placement instead of burning devices at a low speed. The other
	 *  functions of the cost model ignore it. @since 0.4.0 (version 2) */
	double min_efficiency;
	/** 1: tp_place() tests only the placement its rules choose against @c min_efficiency
	 *  and does not search the fabric classes for another (a caller that searches only for
	 *  some of its jobs, as the simulator does for the oldest waiting one); 0 (the default,
	 *  and what a model of version 2 means): search. The other functions of the cost model
	 *  ignore it. @since 0.4.0 (version 3) */
	int no_floor_search;
	/** Fabric fit, in [0, 1]; 0 (the default): off. On a topology of two fabric classes or
	 *  more (nodes sharing a device model, a node fabric and the fabric above the node: on a
	 *  mixed fleet the NVL72 racks, the HGX nodes, the PCIe-only nodes), tp_place() first
	 *  tries the classes on which the job, packed into the class alone, would reach at least
	 *  @c fabric_fit x the best such efficiency of any class that holds it: slowest first
	 *  (the lowest of those efficiencies, ties to the slower node fabric, then the slower
	 *  fabric above the node), each with the request restricted to the class's nodes and the
	 *  floor max(@c min_efficiency, @c fabric_fit x the class's packed efficiency). The
	 *  first placement found is the answer; with none, the rules choose over the whole
	 *  cluster as without it (and @c min_efficiency applies). Best fit over fabrics: a job
	 *  that a slow fabric serves nearly as well as the fastest (a 1-GPU job, which does not
	 *  communicate, on a PCIe-only node) leaves the fast fabric to the jobs that need it. It
	 *  costs, per request that sets it on such a topology, one efficiency per class that
	 *  holds the job (O(count log count) each) and a restricted placement per class tried.
	 *  The other functions of the cost model ignore it. @since 0.4.0 (version 3) */
	double fabric_fit;
} tp_step_model;

/** @brief Initialiser for ::tp_step_model: every degree 1, every figure 0, no efficiency floor
 *  (and its search on, should a floor be set), no fabric fit. */
#define TP_STEP_MODEL_INIT                                                                     \
	{TP_STEP_MODEL_VERSION, 1, 1, 1, 1, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0, 0.0, 0, 0.0, 0, 0.0}

/**
 * @brief Initialise a step model to ::TP_STEP_MODEL_INIT (for bindings that cannot use the
 * macro).
 * @param[out] m The model. @param version ::TP_STEP_MODEL_VERSION, 2 (the fields up to
 *        @c min_efficiency) or 1 (the fields up to @c ep_msgs only: a caller built against
 *        0.3's header).
 * @return 0, or ::TP_EINVAL when @p m is NULL or @p version is not 1 to 3 (@p m is then
 *         unchanged; no object carries a message for this call).
 * @note Thread-safe. @since 0.3.0
 */
TP_API int tp_step_model_init(tp_step_model *m, unsigned version);

/**
 * @brief The modelled time of one training step of @p m laid out on @p devs.
 * @param[out] out_us Receives the time in microseconds (0 for one device and no compute).
 * @param t The topology (read-only). @param devs The job's devices in rank order.
 * @param n Their count (tp x pp x dp). @param m The step model.
 * @param alloc Allocator for the call's scratch memory, or NULL for the C library's; never
 *        the topology's, so that threads sharing @p t need no thread-safe allocator there.
 * @param errbuf Receives the message of a failure (may be NULL): no object carries it.
 * @param errlen Size of @p errbuf (0 when it is NULL).
 * @return 0; ::TP_EINVAL (a NULL argument, @c m->version not 1 or 2, a degree 0, degrees that do not
 *         multiply to @p n, @c ep that does not divide @c dp, a figure negative or not finite, @c
 *         dp_overlap or (version 2) @c min_efficiency outside [0, 1], a device id out of range: the
 *         message names the field and the value); ::TP_ENOMEM. @p *out_us is unchanged on failure. On failure the caller's
 *         @p errbuf says why; every call first empties it.
 * @note Read-only on @p t: may run concurrently on a shared topology. @since 0.3.0
 */
TP_API int tp_cost_step_us(double *out_us, const tp_topology *t, const uint32_t *devs, size_t n,
                           const tp_step_model *m, const tp_allocator *alloc, char *errbuf,
                           size_t errlen);

/**
 * @brief The placement efficiency of @p devs for @p m, in (0, 1]: the step time on the best
 * packed layout of the same job on an empty cluster of the topology, divided by the step time
 * on @p devs (1 when @p devs is at least as good). In the packed layout a tensor group never
 * straddles the boundary of a domain that could have held it whole. Both times use the speed
 * of the slowest device of @p devs, so the figure measures locality only.
 * @param[out] out Receives the efficiency.
 * @param t The topology (read-only). @param devs The job's devices in rank order.
 * @param n Their count. @param m The step model.
 * @param alloc Allocator for scratch memory, or NULL, as for tp_cost_step_us().
 * @param errbuf Receives the message of a failure (may be NULL).
 * @param errlen Size of @p errbuf (0 when it is NULL).
 * @return As tp_cost_step_us(). On failure the caller's @p errbuf says why; every call first
 *         empties it.
 * @note Read-only on @p t. @since 0.3.0
 */
TP_API int tp_cost_efficiency(double *out, const tp_topology *t, const uint32_t *devs, size_t n,
                              const tp_step_model *m, const tp_allocator *alloc, char *errbuf,
                              size_t errlen);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* TOPOPLACE_H */
