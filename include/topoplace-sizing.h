/*
 * libtopoplace: size a model for serving on the devices a topology has.
 * SPDX-License-Identifier: MIT
 */
/**
 * @file topoplace-sizing.h
 * @brief List the ways to serve a model on a fleet (device model, tensor and pipeline degrees,
 * replicas), with the memory each leaves for the KV cache, the sequences it then holds and its
 * modelled decode step, ranked by the caller's goal.
 *
 * The memory model (docs/serving.md, with worked examples), per GPU of a replica of tensor
 * degree @c tp and pipeline degree @c pp on a device of @c memory_gb:
 * - usable = memory_gb x @c mem_utilisation - @c overhead_gb;
 * - weights = params x weight_bytes / (tp x pp);
 * - KV per token = 2 (K and V) x ceil(layers / pp) x kv_heads_per_gpu x head_dim x kv_bytes,
 *   where kv_heads_per_gpu = kv_heads / tp when tp <= kv_heads, else 1 (a KV head is then
 *   replicated on tp / kv_heads GPUs);
 * - KV room = usable - weights; tokens = floor(KV room / KV per token), the same on every GPU of
 *   the replica (each holds its share of every token); sequences = floor(tokens / context).
 *
 * GB are 10^9 bytes. The decode step is memory-bound: every stage reads its active weights and
 * the KV cache of the batch at full context from HBM, stages run one after the other, and the
 * tensor all-reduces (two a layer) and pipeline hand-offs of the batch's activations are priced
 * by tp_cost_step_us() on the replica's devices packed on an empty fleet. The library reads no
 * files and prints nothing.
 */
#ifndef TOPOPLACE_SIZING_H
#define TOPOPLACE_SIZING_H

#include <stddef.h>

#include "topoplace.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief The version of ::tp_model_desc this header describes. @since 0.4.0 */
#define TP_MODEL_DESC_VERSION 1

/** @brief A transformer model as sizing needs it. @since 0.4.0 */
typedef struct tp_model_desc {
	unsigned version;     /**< ::TP_MODEL_DESC_VERSION */
	double params;        /**< parameters in all (> 0; 70.6e9 for Llama-3.1-70B) */
	double active_params; /**< parameters read per token (a MoE's active ones); 0: @c params */
	double weight_bytes;  /**< bytes per parameter: 2 (fp16/bf16), 1 (fp8), 0.5 (fp4); > 0 */
	double kv_bytes;      /**< bytes per KV-cache element: 2, 1 or 0.5; > 0 */
	unsigned layers;      /**< transformer layers (> 0) */
	unsigned heads;       /**< attention heads (> 0; a multiple of @c kv_heads) */
	unsigned kv_heads;    /**< key/value heads (> 0; fewer than @c heads with GQA) */
	unsigned head_dim;    /**< dimension of a head (> 0) */
	unsigned hidden;      /**< hidden size, the activations exchanged per token (> 0) */
} tp_model_desc;

/** @brief Initialiser of ::tp_model_desc: fp16 weights and KV cache, every size 0. */
#define TP_MODEL_DESC_INIT {TP_MODEL_DESC_VERSION, 0.0, 0.0, 2.0, 2.0, 0, 0, 0, 0, 0}

/** @brief What the ranking of tp_size_model() puts first. @since 0.4.0 */
typedef enum tp_size_goal {
	TP_SIZE_FEWEST_GPUS = 0,        /**< fewest GPUs, then best throughput per GPU */
	TP_SIZE_MOST_KV_PER_GPU = 1,    /**< most KV-cache GB per GPU, then fewest GPUs */
	TP_SIZE_BEST_THROUGHPUT = 2     /**< most decode tokens/s per GPU, then fewest GPUs */
} tp_size_goal;

/** @brief The version of ::tp_sizing_options this header describes. @since 0.4.0 */
#define TP_SIZING_OPTIONS_VERSION 1

/** @brief The default share of a device's memory the server may use (vLLM's default). */
#define TP_SIZING_DEFAULT_UTILISATION 0.9
/** @brief The default memory per GPU kept for activations and the runtime, GB. */
#define TP_SIZING_DEFAULT_OVERHEAD_GB 2.0

/** @brief The serving target and the knobs of the memory model. @since 0.4.0 */
typedef struct tp_sizing_options {
	unsigned version;        /**< ::TP_SIZING_OPTIONS_VERSION */
	unsigned context;        /**< tokens of one sequence, prompt and output (> 0) */
	unsigned sequences;      /**< concurrent sequences to hold in all (0: one replica) */
	double tokens_per_s;     /**< decode throughput to reach in all (0: no goal) */
	tp_size_goal goal;       /**< how options are ranked */
	double mem_utilisation;  /**< share of memory the server uses, in (0, 1] */
	double overhead_gb;      /**< GB per GPU kept for activations and the runtime (>= 0) */
	unsigned max_tp;         /**< largest tensor degree tried (0: 64) */
	unsigned max_pp;         /**< largest pipeline degree tried (0: 1, no pipeline) */
	int cross_domain;        /**< nonzero: a tensor group may leave its NVLink domain */
	const char *const *hbm_models; /**< device models whose HBM bandwidth is given here */
	const double *hbm_gbps;  /**< their HBM GB/s (> 0), overriding the built-in table */
	size_t nhbm;             /**< entries of @c hbm_models and @c hbm_gbps */
	const tp_allocator *alloc; /**< allocator of the result and the scratch, or NULL for the
	                                C library's */
} tp_sizing_options;

/** @brief Initialiser of ::tp_sizing_options with the defaults (context 0 must be set). */
#define TP_SIZING_OPTIONS_INIT                                                                  \
	{TP_SIZING_OPTIONS_VERSION, 0, 0, 0.0, TP_SIZE_FEWEST_GPUS,                             \
	 TP_SIZING_DEFAULT_UTILISATION, TP_SIZING_DEFAULT_OVERHEAD_GB, 0, 0, 0, NULL, NULL, 0, NULL}

/**
 * @brief Initialise options to ::TP_SIZING_OPTIONS_INIT (for bindings that cannot use the
 * macro). @param[out] o The options. @param version ::TP_SIZING_OPTIONS_VERSION.
 * @return 0, or ::TP_EINVAL when @p o is NULL or @p version is not 1 (nothing is written; no
 *         object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_sizing_options_init(tp_sizing_options *o, unsigned version);

/**
 * @brief Initialise a model description to ::TP_MODEL_DESC_INIT.
 * @param[out] m The description. @param version ::TP_MODEL_DESC_VERSION.
 * @return 0, or ::TP_EINVAL when @p m is NULL or @p version is not 1 (nothing is written; no
 *         object carries a message for this call).
 * @since 0.4.0
 */
TP_API int tp_model_desc_init(tp_model_desc *m, unsigned version);

/**
 * @brief The HBM bandwidth of a well-known device model, from the built-in table
 * (docs/serving.md lists it and its sources): H100 3350, H200 4800, B200 and GB200 8000, A100
 * 2039, L4 300, L40S 864, T4 320, V100 900, MI300X 5300 GB/s. Names match without regard to case.
 * @param model The device model. @return GB/s, or 0 when the table does not know it.
 * @since 0.4.0
 */
TP_API double tp_sizing_hbm_gbps(const char *model);

/** @brief One way to serve the model. @since 0.4.0 */
typedef struct tp_sizing_option {
	const char *model;       /**< device model (owned by the result) */
	double memory_gb;        /**< memory of one device */
	unsigned tp;             /**< tensor-parallel degree */
	unsigned pp;             /**< pipeline-parallel degree */
	unsigned replicas;       /**< replicas needed for the target */
	unsigned gpus;           /**< replicas x tp x pp */
	unsigned nvlink_domain;  /**< devices of the NVLink domain a tensor group stays in */
	double weights_gb;       /**< weights per GPU */
	double kv_gb;            /**< KV-cache room per GPU */
	double kv_token_bytes;   /**< KV-cache bytes per token per GPU */
	double tokens;           /**< tokens of KV cache one replica holds */
	unsigned sequences;      /**< sequences of @c context tokens one replica holds */
	double step_us;          /**< modelled decode step of a replica with every sequence it
	                              holds in its batch */
	double tokens_per_s_gpu; /**< decode tokens/s per GPU at that batch */
	const char *replica_level; /**< the smallest level one of whose domains holds a replica
	                                (owned by the topology), or NULL when a replica is larger
	                                than a top-level domain */
	const char *tensor_level;  /**< the same for a tensor group of @c tp devices */
} tp_sizing_option;

/** @brief The ranked options of tp_size_model(), or why there are none. */
typedef struct tp_sizing tp_sizing;

/**
 * @brief List and rank the ways to serve @p m on the devices of @p t.
 *
 * For every device model of @p t with a known memory (nodes without a model or memory are left
 * out) and every tensor degree (powers of two up to @c max_tp that divide @c heads, with @c
 * kv_heads a multiple of the degree or the degree a multiple of @c kv_heads, and within the
 * model's NVLink domain unless @c cross_domain) and pipeline degree (powers of two up to
 * @c max_pp and @c layers), the option is kept when a replica holds at least one sequence of
 * @c context tokens and the fleet has the GPUs its replicas need. Replicas = the most of 1,
 * ceil(@c sequences / sequences per replica) and ceil(@c tokens_per_s / a replica's tokens/s).
 * A model's NVLink domain is its node, or the largest domain above it whose level's fabric is
 * NVLink. Ties in the ranking are broken by device model name, then tp, then pp.
 *
 * Costs one pass over the nodes and one tp_cost_step_us() per option; not for the per-request
 * path of a scheduler (call it when a service is defined, keep the answer).
 *
 * @param t The topology (read-only: may be shared by threads).
 * @param m The model. @param o The options.
 * @param[out] out Receives the result, also on failure (its message says why; NULL only when
 *        @p out is NULL or memory ran out first). Destroy it with tp_sizing_destroy().
 * @return 0; ::TP_EINVAL (a NULL argument, a version not 1, a figure out of range: the message
 *         names the field and the value); ::TP_EINFEASIBLE (no option: the message gives each
 *         device model's reason); ::TP_ENOMEM. The message is on the result: for every code but
 *         ::TP_ENOMEM and a NULL @p out, @p *out is a result whose tp_sizing_errmsg() says why (""
 *         on success). @p t is not written.
 * @since 0.4.0
 */
TP_API int tp_size_model(const tp_topology *t, const tp_model_desc *m,
                         const tp_sizing_options *o, tp_sizing **out);

/**
 * @brief Place the best-ranked option of @p s that fits @p c now, as one request.
 *
 * Each option in rank order becomes @p tmpl with @c count = the option's GPUs, a group of tp
 * devices (a tensor group) in one domain of @c tensor_level, @c select_model and
 * @c select_min_memory_gb = the option's device model and memory, and, when pp > 1 and @p tmpl
 * has no slices, one slice layer of tp x pp devices (a replica) at @c replica_level.
 * Everything else comes from @p tmpl as the caller set it: id, tenant, class, priority, spread
 * over failure domains, caps per domain (of groups: tensor groups, which are the replicas when
 * pp is 1), exclusivity.
 * The first option that tp_place() places is the answer.
 *
 * @param c The cluster (read-only: as tp_place(), it may run concurrently).
 * @param s A successful tp_size_model() result for @p c's topology.
 * @param tmpl The request the options fill in (its @c count, @c group_size, @c group_level,
 *        @c select_model and @c select_min_memory_gb are replaced, and @c slices set for a
 *        pipeline when it has none).
 * @param[out] out The placement of the option placed, or of the best-ranked option when none
 *        is placed (its status and message say why); always destroy it.
 * @param[out] chosen The rank of the option placed (may be NULL; unchanged when none).
 * @param why Receives, for each better-ranked option, why it was not placed ("#0 H100 tp 8 x
 *        pp 1, 8 GPUs: busy: ...", tp_placement_errmsg() of its placement, one per line, cut to @p whylen); may be NULL.
 * @param whylen Size of @p why (0 when it is NULL).
 * @return 0 (placed); ::TP_EBUSY, ::TP_EFRAGMENTED or ::TP_EINFEASIBLE (no option placed: the
 *         best-ranked option's code, or ::TP_EBUSY when any option was only busy); ::TP_EINVAL (a
 *         NULL argument, a failed or empty @p s, a topology other than the one @p s was made on);
 *         any other code of tp_place() for a request it refuses (the message is in @p why and on
 *         @p *out); ::TP_ENOMEM. On failure the caller's @p why says why (every call first empties
 *         it); @p *out, when set, is the last placement tried and carries its own message
 *         (tp_placement_errmsg()). @p c and @p s are not written.
 * @since 0.4.0
 */
TP_API int tp_size_place(const tp_cluster *c, const tp_sizing *s, const tp_request *tmpl,
                         tp_placement **out, size_t *chosen, char *why, size_t whylen);

/** @brief Number of options, best first. @param s The result. @return The count (0 on
 *  failure). @since 0.4.0 */
TP_API size_t tp_sizing_count(const tp_sizing *s);
/** @brief One option. @param s The result. @param i Its rank, from 0.
 *  @return The option (owned by @p s) or NULL when @p i is out of range. @since 0.4.0 */
TP_API const tp_sizing_option *tp_sizing_get(const tp_sizing *s, size_t i);
/** @brief The message of a failed tp_size_model(). @param s The result.
 *  @return The message ("" on success). @since 0.4.0 */
TP_API const char *tp_sizing_errmsg(const tp_sizing *s);
/** @brief Free a result. @param s The result (NULL is accepted). @since 0.4.0 */
TP_API void tp_sizing_destroy(tp_sizing *s);

/* ------------------------------------------------------------------------------------------ */
/** @name Prefill/decode groups
 * A disaggregated service: groups of @c prefill prefill instances and @c decode decode
 * instances, each group kept inside one domain of @c locality (the KV cache's hand-off stays on
 * that domain's fabric), the groups spread over the domains of @c spread_level with at most
 * @c max_per_domain groups of the service in one. Instances are running jobs of the cluster,
 * named `<service>/g<k>/p<i>` and `<service>/g<k>/d<j>` (class inference), so that a later call
 * sees the groups already there: a call asks for the service's total number of groups and
 * places the ones missing (scaling out keeps the ratio and the spread; after a failure,
 * tp_pd_release_failed() then tp_pd_place() repairs it).
 *  @{ */

/** @brief The version of ::tp_pd_request this header describes (1 ends at @c select_model).
 *  @since 0.4.0 */
#define TP_PD_REQUEST_VERSION 2

/** @brief The ::tp_pd_request locality that lets tp_pd_place() choose the level from the
 *  modelled KV hand-off time (docs/serving.md, "auto locality"). @since 0.4.0 */
#define TP_PD_LOCALITY_AUTO "auto"

/** @brief The default hand-off slack of "auto" locality: a looser locality is preferred while
 *  its modelled hand-off is within 10% of the fastest candidate's. @since 0.4.0 */
#define TP_PD_DEFAULT_HANDOFF_SLACK 0.1

/** @brief A prefill/decode service. @since 0.4.0 */
typedef struct tp_pd_request {
	unsigned version;          /**< ::TP_PD_REQUEST_VERSION */
	const char *service;       /**< the service's id (its jobs' prefix); no NUL, not empty */
	const char *tenant;        /**< tenant of its jobs (NULL: "default") */
	unsigned groups;           /**< groups the service should have in all (>= 1) */
	unsigned prefill;          /**< prefill instances per group (>= 1) */
	unsigned prefill_devices;  /**< devices per prefill instance (its tensor degree, >= 1) */
	unsigned decode;           /**< decode instances per group (>= 1) */
	unsigned decode_devices;   /**< devices per decode instance (>= 1) */
	const char *instance_level;/**< level one instance lies in (NULL: the node level) */
	const char *locality;      /**< level whose one domain holds a whole group, NULL (none)
	                                or ::TP_PD_LOCALITY_AUTO */
	const char *spread_level;  /**< level whose domains the groups spread over, or NULL */
	unsigned max_per_domain;   /**< most groups in one domain of @c spread_level (0: no cap) */
	const char *select_model;  /**< only devices of this model, or NULL */
	/* version 2 */
	double kv_token_bytes;     /**< KV-cache bytes of one token, whole model (2 x layers x
	                                kv_heads x head_dim x kv_bytes); needed by "auto" (> 0),
	                                else only reported (0: no hand-off figure) */
	unsigned prompt_tokens;    /**< tokens a request hands over (its prompt); "auto" needs
	                                it > 0 */
	double handoff_slack;      /**< "auto": the share by which a looser locality's hand-off
	                                may exceed the fastest candidate's and still be preferred
	                                (>= 0; ::TP_PD_DEFAULT_HANDOFF_SLACK) */
} tp_pd_request;

/** @brief Initialiser of ::tp_pd_request: one prefill and one decode instance of one device
 *  a group, no locality, no spread, no hand-off figures. */
#define TP_PD_REQUEST_INIT {TP_PD_REQUEST_VERSION, NULL, NULL, 1, 1, 1, 1, 1, NULL, NULL, NULL, \
                            0, NULL, 0.0, 0, TP_PD_DEFAULT_HANDOFF_SLACK}

/**
 * @brief Set a ::tp_pd_request to ::TP_PD_REQUEST_INIT, for callers that cannot use the macro
 * (bindings), as libgit2's `git_clone_options_init()` does.
 * @param[out] r The struct to fill; its version field becomes @p version.
 * @param version ::TP_PD_REQUEST_VERSION, or 1 (only the fields of version 1, up to
 *        `select_model`, are written, so a caller built against the older header is not written
 *        past its struct).
 * @return 0, or ::TP_EINVAL when @p r is NULL or @p version is neither (nothing is written; no
 *         object carries a message for this call).
 * @note Thread-safe. @since 0.4.0
 */
TP_API int tp_pd_request_init(tp_pd_request *r, unsigned version);

/** @brief One instance a call placed. @since 0.4.0 */
typedef struct tp_pd_instance {
	const char *job;         /**< its job id (owned by the result) */
	unsigned group;          /**< its group's index */
	int prefill;             /**< 1: a prefill instance; 0: a decode instance */
	unsigned index;          /**< its index among the group's prefill or decode instances */
	unsigned pair;           /**< decode: the prefill instance of its group that hands it the
	                              KV cache (the nearest in the tree, then the least loaded);
	                              prefill: the number of decode instances it serves */
	const uint32_t *devices; /**< its devices in rank order (owned by the result) */
	size_t ndevices;         /**< their count */
} tp_pd_instance;

/** @brief What tp_pd_place() placed, or why it could not. */
typedef struct tp_pd_result tp_pd_result;

/**
 * @brief Place the groups of a prefill/decode service that are missing, and assign them.
 *
 * A group exists when its first prefill instance runs; groups @c 0 .. @c groups - 1 that do
 * not are placed in index order. For each, the domains of @c spread_level (or the whole
 * cluster) are tried fewest groups of the service first, then in index order, skipping those at
 * @c max_per_domain: the prefill instances as one request inside one domain of @c locality
 * (groups of @c prefill_devices in one domain of @c instance_level), then the decode instances
 * colocated with them at @c locality (tp_request's colocate). All or nothing: when one group
 * cannot be placed, nothing is assigned and the message names the group and why.
 *
 * When the locality level lies inside the spread domain (or there is no spread), each group
 * first finds the tightest locality domain with room for the whole group (one tp_place() of
 * its devices) and keeps both sides to it. With ::TP_PD_LOCALITY_AUTO the level is chosen as
 * tp_pd_result_locality() says.
 *
 * Costs two or three tp_place() calls per domain tried and one lookup per group index (with
 * "auto", per group and spread domain tried a pass over its nodes per candidate level, and
 * up to one such call per candidate and domain); the service's existing groups are found by their names, never by a scan of the
 * cluster's jobs.
 *
 * @param c The cluster (written: the instances are assigned to it on success).
 * @param r The service. @param[out] out Receives the result, also on failure (NULL only when
 *        @p out is NULL or memory ran out first); destroy it with tp_pd_result_destroy().
 * @return 0 (the instances placed this call are in the result: none when every group existed);
 *         ::TP_EINVAL (a NULL argument, a figure 0, an unknown level, a name too long; the message
 *         names the field); ::TP_EBUSY, ::TP_EFRAGMENTED, ::TP_EINFEASIBLE (a group could not be
 *         placed: the code of its last attempt); ::TP_EEXIST (a group that does not run still
 *         has some of its instances, released in part by the caller: release the rest, as
 *         tp_pd_release_failed() does); ::TP_ENOMEM. On failure the cluster is unchanged.
 *         The message is on the result: for every code but ::TP_ENOMEM and a NULL @p out, @p *out
 *         is a result whose tp_pd_result_errmsg() says why ("" on success); @p c carries none.
 * @since 0.4.0
 */
TP_API int tp_pd_place(tp_cluster *c, const tp_pd_request *r, tp_pd_result **out);

/**
 * @brief Release every group of the service (its first @p groups) that has an instance on a
 * device that is down, so that tp_pd_place() places it again.
 * @param c The cluster. @param service The service's id. @param groups Its groups in all.
 * @param[out] released Receives the number of groups released (may be NULL).
 * @return 0, ::TP_EINVAL (NULL argument; message on @p c), ::TP_ENOMEM. On failure
 *         tp_cluster_errmsg() of @p c says why (a NULL @p c, and ::TP_EBUSY from the writer guard,
 *         leave no message); a success does not clear it.
 * @since 0.4.0
 */
TP_API int tp_pd_release_failed(tp_cluster *c, const char *service, unsigned groups,
                                unsigned *released);

/**
 * @brief The locality the groups placed by the call were kept to, and its modelled KV hand-off.
 *
 * With ::TP_PD_LOCALITY_AUTO each missing group decides for the domains it may use (the
 * spread domain tried, or the cluster without a spread): the candidates are every level from
 * @c instance_level up with a domain there that holds a whole group, and none. A candidate's
 * hand-off per request is latency + kv_token_bytes x prompt_tokens / (GB/s x
 * min(prefill_devices, decode_devices)) on the fabric of that level's domain
 * (tp_topology_domain_fabric(): its own, a node type's at the node level, else the level's),
 * for none on the fabric above the top level (or of the top level when it has one domain); a
 * level whose domains there have different fabrics gives a candidate per fabric, kept to its
 * own domains. The candidates within (1 + @c handoff_slack) of the fastest are tried loosest
 * first (packing that gains nothing only costs placeable groups), then the others fastest
 * first, each domain's k-th candidate before any domain's (k + 1)-th; the call is still all or
 * nothing. So on a mixed fleet (NVL72 racks beside HGX racks) groups may keep to different
 * levels. tp_pd_result_decision() lists each group's figures and tries.
 *
 * @param res The result.
 * @param[out] handoff_us The modelled hand-off of one request at that locality, in
 *        microseconds (the largest over the groups placed, each on its locality domain's
 *        fabric; the level's when the call placed none; 0 without
 *        @c kv_token_bytes and @c prompt_tokens; may be NULL).
 * @return The level's name (owned by the topology), NULL for no locality (also for a failed
 *         call or NULL @p res), or "mixed" (static) when "auto" kept the groups of the call to
 *         different levels. @since 0.4.0
 */
TP_API const char *tp_pd_result_locality(const tp_pd_result *res, double *handoff_us);
/**
 * @brief How "auto" locality decided: for each group placed, where (the spread domain), the
 * candidates there with their modelled hand-off, and the outcome of each try ("auto: g0 in
 * b0/r0: rack 190.1 us, none 6721.9 us; tried rack in b0/r0: placed | g1 ..."; without a
 * spread "auto: g0: rack ..."). Long texts are cut at 2,047 bytes.
 * @param res The result. @return The text ("" without "auto"; owned by @p res). @since 0.4.0
 */
TP_API const char *tp_pd_result_decision(const tp_pd_result *res);
/** @brief Instances placed. @param res The result. @return The count. @since 0.4.0 */
TP_API size_t tp_pd_result_count(const tp_pd_result *res);
/** @brief One instance. @param res The result. @param i From 0.
 *  @return The instance (owned by @p res) or NULL. @since 0.4.0 */
TP_API const tp_pd_instance *tp_pd_result_get(const tp_pd_result *res, size_t i);
/** @brief The message of a failed call ("" on success). @param res The result.
 *  @return The message. @since 0.4.0 */
TP_API const char *tp_pd_result_errmsg(const tp_pd_result *res);
/** @brief Free a result. @param res The result, or NULL. @since 0.4.0 */
TP_API void tp_pd_result_destroy(tp_pd_result *res);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
