/* SPDX-License-Identifier: MIT */
/*
 * tp-bench sim: a trace-driven, single-threaded, deterministic cluster simulator. Shared by
 * sim.c (the event loop and the metrics), sim_workload.c (the bundled generator, the CSV
 * reader and job shapes), sim_policy.c (the placement policies) and sim_easy.c (the EASY
 * reservation of the Slurm queue). See docs/benchmarks.md.
 */
#ifndef TP_BENCH_SIM_H
#define TP_BENCH_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "bench.h"

/* ---- fleet ------------------------------------------------------------------------------ */

enum sim_fleet_kind { FLEET_NVL72, FLEET_HGX, FLEET_L4, FLEET_SCENARIO, FLEET_MIXED, FLEET_TORUS };

struct sim_fleet {
	enum sim_fleet_kind kind;
	unsigned top, per_top; /* top-level domains x base domains per top (the mean) */
	tp_topology *t;
	uint32_t gpus;
	unsigned nlevels;
	unsigned node_level;  /* last level */
	unsigned nv_level;    /* the NVLink domain: rack on NVL72, node on HGX */
	unsigned base_level;  /* the level just above the node: rack on NVL72, su on HGX */
	uint32_t node_gpus;   /* 4 or 8 */
	uint32_t nv_gpus;     /* GPUs of one NVLink domain: 72 or 8 */
	uint32_t top_gpus;    /* GPUs of one top-level domain */
	const char *level_name[TP_MAX_LEVELS];
	/* torus:X,Y,Z (sim_torus.c): one pod of X x Y x Z chips, every axis wrapping; the cell
	 * x + X * (y + Y * z) holds chip node cell_node[cell] and device cell_dev[cell]. */
	unsigned dims[3];
	uint32_t *cell_node, *cell_dev, *node_cell; /* [chips]; NULL on the other fleets */
};

/* ---- jobs ------------------------------------------------------------------------------- */

/* What a job asks for, derived from its size and class (sim_job_shape). Levels are indices,
 * -1 for none. */
struct sim_shape {
	uint32_t group;      /* devices per group; each group inside one node */
	int required;
	int preferred;
	int slice_level;
	uint32_t slice_size;
	/* torus fleets: a box of the pod's chips, extents box[0..3) (all 0 on other fleets),
	 * any order of the extents with box_rotate, across the seam with box_wrap */
	uint32_t box[3];
	bool box_rotate, box_wrap;
};

struct sim_job {
	double submit_s;
	double duration_s; /* running time at full locality */
	uint32_t gpus;
	tp_job_class cls;
	double checkpoint_s;
	struct sim_shape shape;
	uint16_t shape_key; /* jobs with the same key have the same shape (a failure memo) */
	const char *service; /* the service a replica belongs to (sim_serving.c), or NULL */
};

struct sim_workload {
	struct sim_job *jobs;
	size_t n;
	size_t dropped; /* rows larger than the fleet, skipped */
	char source[256];
};

/* The generator's job mixes (documented in sim_workload.c and docs/benchmarks.md). */
enum sim_mix { SIM_MIX_LLM, SIM_MIX_PHILLY, SIM_MIX_OPENB, SIM_MIX_TPU };
extern const char *const sim_mix_names[4];
bool sim_mix_parse(const char *name, enum sim_mix *m);
/* The bundled generator: njobs jobs of one mix, Poisson arrivals offering `load` times the
 * fleet's GPU-hours. */
int sim_workload_generate(struct sim_workload *w, const struct sim_fleet *f, enum sim_mix mix,
                          size_t njobs, double load, uint64_t seed);
/* The job-size distribution of a workload (share of jobs and of GPU-hours by size class). */
void sim_print_mix(FILE *out, const struct sim_workload *w);

/* Shares of jobs and GPU-hours in the size classes 1, 2, 3-4, 5-8, 9-72, 73-127, 128-1023,
 * 1024+ GPUs, into jobs[8] and gpuh[8]. */
#define SIM_SIZE_CLASSES 8
extern const char *const sim_size_class_names[SIM_SIZE_CLASSES];
void sim_size_shares(const struct sim_workload *w, double *jobs, double *gpuh);
/* A CSV trace: submit_s,duration_s,num_gpus[,kind,...]; rows past `limit` (0: all) ignored. */
int sim_workload_read_csv(struct sim_workload *w, const struct sim_fleet *f, const char *path,
                          size_t limit);
void sim_workload_free(struct sim_workload *w);
/* Fill in a job's shape from its size and class. */
void sim_job_shape(const struct sim_fleet *f, struct sim_job *j);

/* ---- runs ------------------------------------------------------------------------------- */

/* Queue disciplines; every policy of a run is scheduled by the same one. */
enum sim_queue {
	SIM_QUEUE_BESTEFFORT, /* Kueue BestEffortFIFO: an inadmissible head is set aside */
	SIM_QUEUE_STRICT,     /* Kueue StrictFIFO: the head blocks the queue */
	SIM_QUEUE_EASY,       /* Slurm: priority order, EASY backfill behind the top job */
};
extern const char *const sim_queue_names[3];
/* "besteffort", "strict" or "easy" into *q; false for another name. */
bool sim_queue_parse(const char *name, enum sim_queue *q);

struct sim_policy;

/* Defaults of --defrag-max-sims and --defrag-max-cands: the work budget of one planner call
 * in the simulator, in job sets simulated and candidate domains searched
 * (tp_defrag_policy::max_simulations, max_candidates). A simulation of a large request costs
 * 1-10 ms of CPU on the quick grid's fleets; docs/benchmarks.md, "Defrag planner cost,
 * session 6", has the measurements behind the figures. 2 since session 7: with placement
 * trials counted in the budget (32 per simulation) 4 let one call of the quick grid's LLM
 * cell on nvl72:864 take 24 ms; 2 keeps every quick cell's p99 under 7 ms ("Session 7, the
 * merged tree"). */
#define SIM_DEFRAG_MAX_SIMS 2u
/* Default of --defrag-every-s: the defrag hook may run in every scheduling pass in which the
 * oldest waiting job is fragmented (still not again for a job it found no plan for until a
 * job has finished). 1800 s before the pay rule: on the quick grid's Philly cells, whose
 * window is about 2 simulated hours, that allowed ~4 calls per window (docs/benchmarks.md,
 * "The pay rule and compaction for the head"). */
#define SIM_DEFRAG_EVERY_S 0.0
#define SIM_DEFRAG_MAX_CANDS 4u

/* --floor-search: which jobs tp_place() may search the fabric classes for when the
 * efficiency floor refuses its rules' choice (topoplace on a mixed fleet, sim_policy.c). */
enum sim_floor_search {
	SIM_FLOOR_OLDEST, /* the oldest waiting job only (the default) */
	SIM_FLOOR_EVERY,  /* every job */
	SIM_FLOOR_OFF,    /* none: the rules' choice or nothing */
};
/* --floor-search's value into *m; a name other than "oldest", "every" or "off" dies naming
 * the option. */
void sim_floor_search_arg(const char *name, enum sim_floor_search *m);
/* The option's name of m ("oldest", "every", "off"). */
const char *sim_floor_search_name(enum sim_floor_search m);
/* --reserve-busy: whose EASY reservation is placed first on the devices busy now
 * (sim_easy_reserve_busy). */
enum sim_reserve_busy {
	SIM_RESERVE_OURS, /* topoplace and topoplace-defrag (the default) */
	SIM_RESERVE_ALL,  /* every policy with a cluster, the peers too */
	SIM_RESERVE_OFF,  /* none: every policy reserves what its place gives at the shadow time */
};
/* --reserve-busy's value into *m; a name other than "ours", "all" or "off" dies naming the
 * option. */
void sim_reserve_busy_arg(const char *name, enum sim_reserve_busy *m);
/* The option's name of m ("ours", "all", "off"). */
const char *sim_reserve_busy_name(enum sim_reserve_busy m);
/* The usage lines of --reserve-busy (sim and compare). */
#define SIM_RESERVE_USAGE                                                                        \
	"  --reserve-busy ours|all|off: under EASY the top job's reservation is what the\n"      \
	"  policy's place gives it at the shadow time; for topoplace and topoplace-defrag\n"     \
	"  (ours, the default) it is first sought on the devices busy now alone (a placeholder\n"\
	"  holds the free ones while the projection releases the due jobs), so that backfill\n" \
	"  keeps every device free now; all: every policy, the peers too; off: none\n"           \
	"  (bench/sim_easy.c).\n"

/* The help text of --end-estimates (tp-bench sim and compare). */
#define SIM_END_USAGE                                                                            \
	"  --end-estimates none|exact|over:F: when topoplace and topoplace-defrag tell\n"      \
	"  tp_place a job will end (tp_request.expected_end_s, its running job's shape too):\n" \
	"  exact (the default) its start plus its running time, the estimate the EASY\n"      \
	"  reservation and the pay rule use; over:F that running time times 1 + F x u, u\n"   \
	"  uniform in [0, 1) per job (from the seed; over:2: up to 3x, like users' time\n"   \
	"  limits); none: no end. The peers take no end.\n"

/* The help text of --no-head-guard (tp-bench sim and compare). */
#define SIM_GUARD_USAGE                                                                          \
	"  --no-head-guard: off, topoplace's head guard: under StrictFIFO, when a pass would\n" \
	"  end at a job of at least 64 GPUs that does not fit, the jobs it starts ahead of it\n"\
	"  keep off the nodes that job would get as the running jobs end, where they fit\n"    \
	"  elsewhere and that starts it sooner (bench/sim.c, sim_head_guard).\n"

/* --fabric-fit's default: on a fleet of several fabric classes topoplace asks for fabric fit
 * 0.9 (tp_step_model.fabric_fit; sim_policy.c). */
#define SIM_FABRIC_FIT 0.9
/* --fabric-fit's value, a number from 0 to 1; anything else dies naming the option. */
double sim_fabric_fit_arg(const char *s);
/* The efficiency floor topoplace asks for the top job under EASY on a fleet of one fabric
 * class (--top-floor; sim_policy.c, "The top job's floor"): full locality. */
#define SIM_TOP_FLOOR 0.999
/* --top-floor's value, a number from 0 to 1; anything else dies naming the option. */
double sim_top_floor_arg(const char *s);
/* --end-estimates: "none" (SIM_END_NONE), "exact" (0) or "over:F" (F in (0, 100]). */
#define SIM_END_NONE (-1.0)
double sim_end_estimates_arg(const char *s);
/* The name of an end_over value, into buf (room for 32): "none", "exact" or "over:F". */
const char *sim_end_estimates_name(double over, char *buf);
/* The usage lines of --floor-search, --floor-ahead, --fabric-fit and --top-floor (tp-bench
 * sim and compare). */
#define SIM_FLOOR_USAGE                                                                          \
	"  --floor-search oldest|every|off: on a fleet of several fabric classes topoplace asks\n" \
	"  for an efficiency floor; when its rules' choice is below it, tp_place() searches the\n"  \
	"  fabric classes for a placement that meets it for the oldest waiting job only (the\n"    \
	"  default), for every job, or for none. --floor-ahead: for the oldest job the floor\n"    \
	"  also gives way to the wait still ahead of it (off; bench/sim_policy.c).\n"            \
	"  --fabric-fit X: on such a fleet topoplace first tries the fabric classes on which the\n" \
	"  job reaches X times its best efficiency, slowest first (tp_step_model.fabric_fit;\n"   \
	"  default 0.9, 0: off).\n"                                                              \
	"  --top-floor X: under EASY on a fleet of one fabric class topoplace asks for the top\n"  \
	"  job's placement an efficiency of at least X (at most the one its rules reach on the\n"  \
	"  empty fleet): it waits, with its reservation, for one as good (default 0.999, full\n"   \
	"  locality; 0: off).\n"                                                              \
	"  --no-upgrade: topoplace-defrag's locality upgrade off. With it, a job wider than an\n" \
	"  NVLink domain that tp_place() puts below the efficiency its rules give it on the\n"   \
	"  empty fleet gets the moves that free one domain of the level that held it there, if\n" \
	"  they cost under half of the GPU-seconds the slower placement would (not during an\n"  \
	"  EASY backfill; upgrade_calls and upgrade_moves in the JSON; bench/sim.c); on a fleet\n"\
	"  of several fabric classes, a job put below 0.9 x its best class's efficiency gets\n"  \
	"  the moves that place it at that efficiency, and under StrictFIFO its floor is 0.35\n" \
	"  x it, not 0.5 (bench/sim_policy.c).\n"

/* The usage lines of --no-defrag-floor (sim and compare; apart from SIM_FLOOR_USAGE, which a
 * longer literal would take past C99's 4,095 characters). */
#define SIM_DEFRAG_FLOOR_USAGE                                                                   \
	"  --no-defrag-floor: on a fleet of several fabric classes the defrag hook's plan\n"      \
	"  asks, as topoplace's place did, the job's step model and efficiency floor (without\n"  \
	"  the floor's search of the classes and the fabric fit), so that it frees room only\n"   \
	"  where the job may start; this turns that off (bench/sim_policy.c).\n"                  \
	"  --no-defrag-behind: under besteffort and EASY, while the oldest waiting job has\n"    \
	"  more GPUs than are free (a plan cannot start it), the defrag hook makes room for the\n"\
	"  first job behind it that is fragmented (under EASY off the top job's reserved\n"      \
	"  nodes); this turns that off: the hook runs for the oldest job only.\n"                  \
	"  --no-pay-slowdown: the pay rule also counts the GPU-seconds the waiting job would\n"  \
	"  lose running where the plan places it rather than where it would start after its\n"   \
	"  wait (a slower fabric class); this turns that off.\n"                             \
	"  --no-defrag-best: on a fleet of several fabric classes, under besteffort and EASY,\n"  \
	"  the defrag hook's plan must also start the job at the best efficiency it reaches\n"   \
	"  packed into one class (the jobs behind it use the slow classes' room meanwhile);\n"   \
	"  this turns that off. Under StrictFIFO it is off (that room would idle).\n"              \
	"  --no-defrag-less-local: on a fleet whose NVLink domain holds several nodes (the\n"    \
	"  NVL72 racks of nvl72: and l4:), the defrag hook's plan may move a job to devices\n"   \
	"  less local than its own (the planner's allow_less_local) where the moved job runs as\n"\
	"  fast (the simulator's efficiency check); this turns that off: every moved job stays\n"\
	"  as local as it was. Off where the NVLink domain is the node (hgx:, mixed:).\n"

struct sim_opts {
	const char *fleet;
	const char *trace;
	size_t limit;
	double compress;
	size_t jobs;
	double load;
	uint64_t seed;
	const char *policies;
	double win0_h, win1_h; /* < 0: automatic */
	double sample_s;
	size_t backfill;
	double starve_h;       /* 0: no starvation rule (the default) */
	enum sim_queue queue;
	enum sim_mix mix;
	bool quiet;            /* no per-policy line on stderr (tp-bench compare prints its own) */
	double defrag_every_s;
	double defrag_max_cost; /* a plan's most cost, as a share of the waiting job's work */
	unsigned defrag_max_sims;  /* tp_defrag_policy::max_simulations of each planner call */
	unsigned defrag_max_cands; /* tp_defrag_policy::max_candidates of each planner call */
	bool use_cost;
	double fail_rate;      /* node failures per GPU-day (0: none, the default; sim_failures.c) */
	double repair_h;       /* hours a failed node stays down */
	double ckpt_every_s;   /* a job's checkpoint interval: a failure loses the work since */
	const char *spares;    /* "K" hot spares per base domain, or "K/LEVEL", for the topoplace
	                        * policies (NULL: none) */
	bool compact;          /* compaction when jobs end (sim_compact.c; on by default) */
	bool compact_easy;     /* the same under --queue easy (off by default; --compact: on) */
	bool no_pay;           /* --no-pay: plans carried out without the pay rule */
	bool no_pay_slowdown;  /* --no-pay-slowdown: the pay rule ignores the efficiency a plan
	                        * gives the waiting job */
	bool no_defrag_best;   /* --no-defrag-best: the defrag hook's plan need not reach the job's
	                        * best class efficiency (bench/sim_policy.c) */
	bool no_defrag_less_local; /* --no-defrag-less-local: the defrag hook's plan keeps every
	                            * moved job as local as it was (bench/sim_policy.c) */
	bool defrag_before_backfill; /* EASY: the defrag hook in the first pass, before backfill
	                              * (--defrag-before-backfill; after it by default) */
	double compact_moves_h; /* its budgets: jobs moved per hour, */
	double compact_budget;  /* checkpoint GPU-seconds per hour as a share of the fleet's */
	unsigned compact_max_sims; /* the work budget of one compaction call (job sets simulated) */
	enum sim_floor_search floor_search; /* --floor-search (oldest by default) */
	bool floor_ahead;      /* --floor-ahead: the floor gives way to the wait ahead (off) */
	double fabric_fit;     /* --fabric-fit (SIM_FABRIC_FIT by default; 0: off) */
	double top_floor;      /* --top-floor (SIM_TOP_FLOOR by default; 0: off) */
	bool no_upgrade;       /* --no-upgrade: topoplace-defrag's locality upgrade off */
	bool no_defrag_floor;  /* --no-defrag-floor: the defrag hook's plan asks no fabric floor */
	bool no_defrag_behind; /* --no-defrag-behind: the defrag hook runs for the oldest job only */
	bool no_head_guard;    /* --no-head-guard: topoplace's StrictFIFO head guard off */
	enum sim_reserve_busy reserve_busy; /* --reserve-busy (ours by default) */
	double end_over;       /* --end-estimates: what tp_place is told of a job's end
	                        * (sim_end_estimate): SIM_END_NONE nothing, 0 its running time
	                        * ("exact", the default: the EASY reservation's estimate), > 0 its
	                        * running time x (1 + end_over x u), u uniform in [0, 1) per job */
	size_t inference;      /* > 0: the inference class instead (sim_serving.c): this many
	                        * services with replicas and an availability target */
	const char *json;
	const char *csv;
	const char *plot;
};

/* One sample of the time series. */
struct sim_sample {
	double t;
	uint32_t busy, queued, running;
	double eff_busy;
	double frag_nv, frag_node;
	uint32_t box_free;  /* torus fleets: chips of the largest free box (tp_frag_largest_box) */
	uint32_t fragments; /* and the free space's fragments (tp_frag_grid_fragment_count) */
};

struct sim_result {
	const struct sim_policy *pol;
	double wall_s;
	size_t started, rejected, unfinished;
	double occupancy, occupancy_all, eff_gpu_h, eff_share;
	double full_locality_share, full_locality_gpu_share;
	double mean_wait_s, p95_wait_s, max_wait_s;
	double wait_pct[101]; /* queueing delay at percentile 0, 1, ..., 100 (s) */
	double makespan_s;
	double queue_empty_s;
	double last_empty_s; /* the last time inside the window with an empty queue (or -inf) */
	double frag_nv_mean, frag_node_mean;
	double box_free_mean, fragments_mean; /* torus fleets: the samples' means in the window */
	double box_free_share_mean; /* largest free box over free chips, mean over those samples */
	double mean_eff;
	long place_calls;
	double place_us_mean;
	double *planner_ms;    /* every placement and planner call's wall time */
	size_t nplanner, cap_planner;
	double planner_p99_ms, planner_total_s, wait_p50_s;
	long defrag_moves, defrag_calls, defrag_refused;
	double defrag_cost_s, defrag_us_mean;
	/* the defrag planner's calls alone (tp_defrag_plan, tp_defrag_compact): CPU time of the
	 * thread per call, ms, and their median and 99th percentile */
	double *defrag_cpu_ms;
	size_t ndefrag_cpu, cap_defrag_cpu;
	double defrag_p50_ms, defrag_p99_ms;
	/* the same for the tp_defrag_plan calls alone (the defrag hook's and the locality
	 * upgrade's), without compaction's */
	double *plan_cpu_ms;
	size_t nplan_cpu, cap_plan_cpu;
	double plan_p50_ms, plan_p99_ms;
	long upgrade_calls, upgrade_moves; /* the locality upgrade (sim.c, sim_upgrade); its */
	double upgrade_cost_s;             /* moves count in defrag_moves and defrag_cost_s too */
	long compact_calls, compact_moves; /* compaction (sim_compact.c) */
	long compact_refused;              /* EASY: plans after which the top job still waits */
	long compact_plans;                /* plans carried out, */
	long compact_head_started;         /* after a pass: those the oldest job started after */
	double compact_cost_s;             /* its checkpoint GPU-seconds */
	long defrag_unpaid, compact_unpaid; /* plans the pay rule refused (sim_plan_pays) */
	/* idle GPU-hours in the window while the oldest waiting job waits: with as many GPUs free
	 * as it needs (for shape) or fewer (for count) */
	double idle_shape_gpu_h, idle_count_gpu_h;
	long resv_calls;   /* EASY: trial placements of the top job for its reservation */
	long resv_refused; /* EASY: jobs that fit now but not off the reserved nodes */
	long resv_elsewhere; /* EASY: jobs the policy put on reserved nodes, started off them */
	long resv_busy;    /* EASY: reservations placed on the devices busy now (--reserve-busy) */
	long guard_passes; /* StrictFIFO: passes the head guard changed (sim_head_guard) */
	long guard_moved;  /* StrictFIFO: jobs the head guard started off the blocked job's nodes */
	struct sim_sample *samples;
	size_t nsamples;
	/* failures (sim_failures.c): node failures, jobs they hit, of which repaired in place by
	 * tp_replace and requeued; GPU-hours of work lost (redone) and of restarts, in the window */
	long box_checked; /* torus fleets: placements checked to be the job's box (all started) */
	long fail_nodes, fail_jobs, fail_replaced, fail_replaced_anew, fail_requeued, fail_on_spare;
	double fail_lost_gpu_h, fail_restart_gpu_h;
};


struct sim_fleet;
/* Build a fleet from its spec (nvl72:GPUS, hgx:GPUS, l4:GPUS, scenario:FILE); dies naming the
 * spec on error. */
void sim_fleet_build(struct sim_fleet *f, const char *spec);
/* Run one policy on a workload; res->pol names the policy. Prints progress on stderr. */
void sim_run_policy(const struct sim_opts *o, const struct sim_fleet *f,
                    const struct sim_workload *w, double w0, double w1, struct sim_result *res);
void sim_result_free(struct sim_result *res);
/* Record one defrag planner call's CPU time (ns) in res->defrag_cpu_ms, and in
 * res->plan_cpu_ms too for a tp_defrag_plan call (plan). */
void sim_defrag_cpu_time(struct sim_result *res, uint64_t ns, bool plan);
/* tp-bench sim --inference N (sim_serving.c): services instead of the training workload;
 * prints per policy the share of service-hours that survive any single rack or power-feed
 * loss beside effective GPU-hours. */
void sim_serving_run(const struct sim_opts *o, const struct sim_fleet *f);
/* The automatic measurement window: from 15% of the arrival span to the last arrival. */
void sim_window(const struct sim_workload *w, double *w0, double *w1);
/* Migration cost (checkpoint + restart, seconds) of a job of n GPUs (sim_workload.c). */
double sim_checkpoint_s(uint32_t gpus, tp_job_class cls);

/* ---- policies --------------------------------------------------------------------------- */

struct sim_ctx {
	const struct sim_fleet *f;
	tp_cluster *c;
	struct bench_rng rng;
	uint32_t *scratch; /* [gpus] */
	/* For a second try of the oldest waiting job (sim.c, sim_try_ahead), else 0 and NULL: the
	 * wait still ahead of it (s; INFINITY: never) until the policy places it on the projected
	 * state, the running jobs released at their ends, and that placement (the job's GPUs).
	 * Only a policy that sets wants_ahead in create gets the second try. */
	bool wants_ahead;
	double ahead_s;
	const uint32_t *ahead_devs;
	/* The job being placed is the oldest waiting one (also in the EASY reservation's trials,
	 * for the top job). */
	bool oldest;
	double now;       /* the simulated time (s) */
	double end_over;  /* the run's --end-estimates (sim_opts.end_over) */
	uint64_t end_seed; /* the run's seed, for the over-estimates */
	enum sim_floor_search floor_search; /* the run's --floor-search, --floor-ahead and */
	bool floor_ahead;                   /* --fabric-fit */
	double fabric_fit;
	double top_floor; /* --top-floor under EASY, else 0 */
	/* Set by topoplace's place: the top job's floor refused the placement its rules chose
	 * (TP_EBUSY) and floor_level, the deepest level one domain of which held the job on the
	 * empty fleet, lies below the job's required level: the level the defrag hook then asks a
	 * plan for (sim_defrag_make_room). floor_level -1: no single domain held it. */
	bool floor_refused;
	int floor_level;
	/* The locality upgrade (topoplace-defrag; --no-upgrade: off). With upgrade_on set,
	 * topoplace's place sets upgrade when it placed a job wider than an NVLink domain below
	 * upgrade_eff, the efficiency its rules give it on the empty fleet (placed_eff: the one it
	 * got), with floor_level as above; want_eff > 0 asks place for at least that efficiency
	 * (the place after an upgrade's moves). On a fleet of several fabric classes it sets
	 * upgrade and class_upgrade when it placed a job of several GPUs below CLASS_UPGRADE_FIT
	 * times best_eff (below), upgrade_eff then being best_eff (bench/sim_policy.c). */
	bool upgrade_on, upgrade, class_upgrade;
	double upgrade_eff, placed_eff, want_eff;
	/* The queue is StrictFIFO (nothing passes the oldest job while it waits). */
	bool strict_fifo;
	/* The step model and fabric floor topoplace's place last asked for on a fleet of several
	 * fabric classes (have_comm), and for which job: the defrag hook asks its plan for the
	 * same unless defrag_floor is off (--no-defrag-floor; sim_defrag_make_room). */
	bool defrag_floor, have_comm;
	struct tp_step_model last_comm;
	uint32_t comm_jid;
	/* On such a fleet, under besteffort and EASY (defrag_best; --no-defrag-best: off), the
	 * hook's plan must also reach best_eff, the best efficiency of job comm_jid in any one
	 * class (its devices packed there), which topoplace's place sets (sim_defrag_make_room). */
	bool defrag_best;
	double best_eff;
	/* The hook's plan may move a job less local if it runs as fast there, on a fleet whose
	 * NVLink domain holds several nodes (defrag_less_local; --no-defrag-less-local: off;
	 * sim_defrag_make_room). */
	bool defrag_less_local;
};

struct sim_policy {
	const char *name;
	const char *what;
	/* false: no cluster state (the ideal bound; place is NULL). */
	bool uses_cluster;
	void *(*create)(struct sim_ctx *ctx);
	/* Devices for job j into devs; 0, or a negative TP_E* code (TP_EINFEASIBLE: never). */
	int (*place)(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
	             uint32_t *devs);
	void (*destroy)(void *st);
	/* When place fails with TP_EFRAGMENTED: a plan of moves, or NULL (see sim_policy.c). */
	bool defrag;
	/* The fleets it runs on: SIM_ON_TREE (every fleet but torus, the default 0), SIM_ON_TORUS
	 * (torus fleets only), SIM_ON_BOTH. */
	unsigned char on;
};
#define SIM_ON_TREE 0
#define SIM_ON_TORUS 1
#define SIM_ON_BOTH 2
/* Whether policy p runs on fleet f; if not, why into why (sim_torus.c). */
bool sim_policy_runs_on(const struct sim_policy *p, const struct sim_fleet *f, const char **why);

extern const struct sim_policy sim_policies[];

/* The EASY reservation (sim_easy.c): a running job, its GPUs and the time it is due to end. */
struct sim_due {
	double t;
	uint32_t job;
	uint32_t gpus;
};
/* Takes due[0..n) in end order (due: room for 2 x n, overwritten) and finds, on a savepoint of ctx->c with those jobs released in end order,
 * the first end time after which pol->place fits the top job: returns it (the shadow time),
 * leaves the placement in devs[0..top->gpus) (devs: room for 2 x top->gpus) and marks its
 * nodes in reserved[] (listed in list[0..*nlist)); INFINITY if it never fits. Leaves the
 * cluster and ctx->rng as they were; *calls counts the placement calls. */
/* The top job's reservation at the same shadow time on the devices busy now alone: the free
 * ones held by a placeholder (on a savepoint) while the due jobs that end by `shadow`
 * (due[0..n), any order) are released. True with the placement in devs[0..top->gpus), false
 * (devs unspecified) when it does not fit so. buf: room for the fleet's devices. The cluster
 * and ctx->rng are left as they were. */
bool sim_easy_reserve_busy(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                           const struct sim_job *top, uint32_t top_id, const struct sim_due *due,
                           size_t n, double shadow, uint32_t *devs, uint32_t *buf);
double sim_easy_reserve(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                        const struct sim_job *top, uint32_t top_id, struct sim_due *due,
                        size_t n, uint32_t *devs, uint8_t *reserved, uint32_t *list,
                        uint32_t *nlist, long *calls);
/* The ideal bound's reservation, a GPU count: the first end time of due[0..n) (room for 2n) at
 * which `need` GPUs are free, given `fr` free now (now if they are; INFINITY if never);
 * *extra the GPUs free then beyond need. */
double sim_easy_count(struct sim_due *due, size_t n, uint64_t fr, uint32_t need, double now,
                      uint64_t *extra);
/* Place job j with pol->place while the free devices of the nodes list[0..n) are held (by a
 * placeholder job on a savepoint, rolled back): 0 and devs, or the policy's code. buf: room
 * for the fleet's GPUs. */
int sim_easy_place_off(struct sim_ctx *ctx, const struct sim_policy *pol, void *st,
                       const struct sim_job *j, uint32_t jid, const uint32_t *list, uint32_t n,
                       uint32_t *devs, uint32_t *buf);
/* Free GPUs now on the nodes list[0..n). */
uint32_t sim_easy_free_on(const struct sim_ctx *ctx, const uint32_t *list, uint32_t n);
/* How many of devs[0..n) lie on reserved nodes. */
uint32_t sim_easy_overlap(const struct sim_ctx *ctx, const uint8_t *reserved,
                          const uint32_t *devs, uint32_t n);

/* The Slurm baselines (sim_slurm.c). */
void *sim_slurm_create(struct sim_ctx *ctx);
void sim_slurm_destroy(void *st);
int sim_slurm_block_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                          uint32_t *devs);
int sim_slurm_tree_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                         uint32_t *devs);
/* NVIDIA's segment advice in nodes where it divides the job's node count; 0: no segment. */
uint32_t sim_slurm_segment(const struct sim_fleet *f, const struct sim_job *j);
extern const size_t sim_npolicies;

/* The locality stand-in (--efficiency standin): 1.0 inside the job's ideal domain, a penalty by
 * the level crossed otherwise (see sim_policy.c). */
double sim_efficiency_standin(const struct sim_fleet *f, const struct sim_job *j,
                              const uint32_t *devs);
/* The job's efficiency: tp_cost_efficiency with the job's step model (use_cost), else the
 * stand-in. */
double sim_efficiency(const struct sim_fleet *f, const struct sim_job *j, const uint32_t *devs,
                      bool use_cost);

/*
 * The defrag hook of the topoplace-defrag policy (sim_policy.c): job `jid` was answered
 * TP_EFRAGMENTED; make room by migrating running jobs (the cluster is updated by the hook) and
 * report each move through mv. Returns the number of jobs moved (then the caller places the job
 * again), or a negative code (TP_ENOPLAN: no plan, or none worth carrying out). *cost_s
 * receives the plan's cost (checkpoint seconds x devices).
 */
struct sim_mover {
	void *ud;
	/* Running job `jid` now sits on devs[0..n): the simulator charges its checkpoint time and
	 * recomputes its efficiency and end. */
	void (*moved)(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n);
	/* Whether running job `jid` would run at least as efficiently on devs[0..n) as where it
	 * runs now (the simulator's efficiency model). */
	bool (*keeps_efficiency)(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n);
	/* The most a plan may cost, as a share of the waiting job's work (its GPUs x duration). */
	double max_cost_share;
	long *refused; /* counts the plans found but not carried out */
	unsigned max_sims;  /* the planner's work budget: job sets simulated per call (0: the
	                     * library's default) */
	unsigned max_cands; /* ... and candidate domains searched per call (0: the default) */
	/* The pay rule (sim_plan_pays; off with --no-pay): the waiting job `jid`'s expected wait
	 * (s) if nothing is moved (sim_wait_est; INFINITY: never by itself) and, in *eff, the
	 * efficiency of the placement it would get then (0: none foreseen); the counter of plans
	 * it refused. NULL wait_est: no pay rule. */
	double (*wait_est)(void *ud, uint32_t jid, double *eff);
	long *unpaid;
	/* Nodes whose free devices the plan may not use (EASY: the top job's reserved nodes, when
	 * the plan is for a job behind it), held by a pinned placeholder while the planner runs. */
	const uint32_t *pin;
	uint32_t npin;
	const uint8_t *pin_node; /* [nodes] the same nodes as flags: no migrant may land there */
	/* The efficiency waiting job `jid` would run at on devs[0..n) (the simulator's model), for
	 * the pay rule; NULL: the rule does not weigh it. */
	double (*efficiency)(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n);
};
/* Whether carrying out plan p (its steps before the place step are migrations) for waiting
 * job j pays: the GPU-seconds its moved jobs lose to checkpoint and restart (tp_plan_cost_s,
 * the simulator's model of a move), plus those j would hold its GPUs longer where the plan
 * places it than where it would start after its wait (j->gpus x its work x (1 / efficiency
 * there - 1 / efficiency then), when the plan's is the lower; with mv->efficiency), are under
 * SIM_PAY_SHARE of the GPU-seconds j would otherwise wait on its GPUs (j->gpus x
 * mv->wait_est). Half, as a moved job also ends its checkpoint time later, which delays
 * whatever was to start on its GPUs (the share the EASY compaction rule used already). True
 * without a pay rule (mv->wait_est NULL, --no-pay); counts a refusal in *mv->unpaid. */
#define SIM_PAY_SHARE 0.5
bool sim_plan_pays(const struct sim_mover *mv, const struct sim_job *j, uint32_t jid,
                   const tp_plan *p);
int sim_defrag_make_room(struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                         const struct sim_mover *mv, double *cost_s);
/* TP_BENCH_DEFRAG_TRACE set: one line per planner call on stderr, "<what>-trace" (defrag,
 * compact) with the request's shape, the answer, the work the call did (tp_plan_stats), its CPU
 * time and a failure's message, to see where the planner's time goes (sim_policy.c). */
void sim_trace_call(const char *what, const tp_request *r, int rc, const tp_plan *p,
                    uint64_t cpu_ns);

/* Carry out the first ns steps of a plan (migrations) unless a moved job would run less
 * efficiently: the number of jobs moved, or -1 for a plan refused (sim_policy.c). */
int sim_apply_migrations(tp_cluster *c, const tp_plan *p, size_t ns, const struct sim_mover *mv,
                         const char *who);

/* ---- compaction when jobs end (sim_compact.c) ------------------------------------------- */

/* Defaults of --compact-moves-h and --compact-budget. */
#define SIM_COMPACT_MOVES_H 4.0
#define SIM_COMPACT_BUDGET 0.005
/* Default of --compact-max-sims: job sets one compaction call may simulate
 * (tp_defrag_policy::max_simulations). With the library's default (512) a call that found no
 * plan cost 10-19 ms of CPU on the full grid's mixed fleet (philly-like, strict) while the
 * 1,240 that found one simulated at most 3 sets (docs/benchmarks.md, "Session 16: the moves
 * bound and the compaction budget"). */
#define SIM_COMPACT_MAX_SIMS 32u

struct sim_compact;
/* NULL unless o->compact (o->compact_easy under EASY) and the policy has the defrag hook. */
struct sim_compact *sim_compact_create(const struct sim_opts *o, const struct sim_fleet *f,
                                       const struct sim_policy *pol, double now);
void sim_compact_destroy(struct sim_compact *k);
/* Compaction moves for the queue's head queue[0], within the budgets (k may be NULL: nothing);
 * `releases` counts the jobs finished so far. `shadow`: after a pass in which the head was
 * answered TP_EFRAGMENTED, its shadow time under EASY, INFINITY under the other disciplines
 * (NAN otherwise: no compaction). Returns the number of jobs moved. */
int sim_compact_run(struct sim_compact *k, tp_cluster *c, const struct sim_workload *w,
                    const uint32_t *queue, size_t qlen, double now, uint64_t releases,
                    double shadow, const struct sim_mover *mv, struct sim_result *res);

/* ---- torus fleets (sim_torus.c) ---------------------------------------------------------- */

/* Build torus:X,Y,Z (also XxYxZ) from the text after "torus:"; dies naming the spec. */
void sim_torus_fleet(struct sim_fleet *f, const char *dims, const char *spec);
void sim_torus_fleet_free(struct sim_fleet *f);
/* The tpu mix (documented in sim_torus.c and docs/benchmarks.md): job j's size and box. */
void sim_torus_gen_job(struct bench_rng *r, const struct sim_fleet *f, struct sim_job *j);
/* Whether devs[0..n) are exactly the chips of one box of j's shape (any order of the extents
 * if j may rotate, across the seam if it may wrap). */
bool sim_torus_is_box(const struct sim_fleet *f, const struct sim_job *j, const uint32_t *devs);
/* Largest free box (chips) and fragments of the free space now. */
void sim_torus_frag(const struct sim_fleet *f, tp_cluster *c, uint32_t *box, uint32_t *frags);
/* The torus baselines. */
void *sim_torus_create(struct sim_ctx *ctx);
void sim_torus_destroy(void *st);
int sim_first_fit_box_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                            uint32_t *devs);
int sim_slurm_torus_place(void *st, struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid,
                          uint32_t *devs);

/* ---- node failures (sim_failures.c) ---------------------------------------------------- */

/* When job j (index jid), placed now, is expected to end as the run's --end-estimates says
 * (ctx->now plus its running time, over-estimated by a factor from the run's seed and jid),
 * or 0 for none: tp_request.expected_end_s. */
double sim_end_estimate(const struct sim_ctx *ctx, const struct sim_job *j, uint32_t jid);
/* The request the topoplace policies place job j with (id: room for 24 bytes; sim_policy.c). */
tp_request sim_tp_request(const struct sim_fleet *f, const struct sim_job *j, uint32_t jid,
                          tp_slice *slice, char *id);

/* Defaults of --repair-h and --ckpt-every-s. */
#define SIM_REPAIR_H 8.0
#define SIM_CKPT_EVERY_S 1800.0

struct sim_failures;
/* Exits with a message naming the option when --failures, --repair-h, --ckpt-every-s or
 * --spares is out of range (the spares' level is checked against the fleet later). */
void sim_failures_check_opts(const struct sim_opts *o);
/* What the event loop does for a job that a failure hit (sim.c). */
struct sim_fail_hooks {
	void *ud;
	/* The job now sits on devs[0..n) (tp_replace, or placed afresh): it restarts from its last
	 * checkpoint. */
	void (*repaired)(void *ud, uint32_t jid, const uint32_t *devs, uint32_t n);
	/* The job is released and goes back to the head of the queue, from its last checkpoint. */
	void (*requeue)(void *ud, uint32_t jid);
};
/* NULL when o->fail_rate is 0 or the policy keeps no cluster state. Sets the spare policy of
 * the topoplace policies (o->spares per base domain). */
struct sim_failures *sim_failures_create(const struct sim_opts *o, const struct sim_fleet *f,
                                         const struct sim_workload *w,
                                         const struct sim_policy *pol, tp_cluster *c,
                                         struct sim_result *res, double t0);
/* The time of the next failure or repair. */
double sim_failures_next(const struct sim_failures *F);
/* Whether a failed node is still under repair (the queue may yet start). */
bool sim_failures_repairing(const struct sim_failures *F);
/* Carry out the failures and repairs due at or before t. */
void sim_failures_due(struct sim_failures *F, double t, const struct sim_fail_hooks *h);
/* Account lost work and restart time (GPU-seconds) if inside the window. */
void sim_failures_charge(struct sim_failures *F, double lost_gpu_s, double restart_gpu_s);
void sim_failures_destroy(struct sim_failures *F);
/* The requeued jobs' [2 n] remaining work and redo, every entry -1 (free it). */
double *sim_failures_remain(size_t n);
/* One line per policy (nothing when failures are off). */
void sim_failures_print(const struct sim_opts *o, const struct sim_fleet *f,
                        const struct sim_result *res, size_t n);

/* sim_output.c: what tp-bench sim writes of its results (the table, JSON, CSV, plots). */
void sim_print(const struct sim_opts *o, const struct sim_fleet *f, const struct sim_workload *w,
               double w0, double w1, const struct sim_result *res, size_t n);
void sim_json(const struct sim_opts *o, const struct sim_fleet *f, const struct sim_workload *w,
              double w0, double w1, const struct sim_result *res, size_t n);
void sim_csv(const struct sim_opts *o, const struct sim_fleet *f, const struct sim_result *res,
             size_t n);
void sim_plot(const struct sim_opts *o, const struct sim_result *res, size_t n);
struct bench_json;
/* The object "policy_settings": every option that changes what a policy does (the defrag
 * hook's, compaction's, the pay rule's, the floors'), so that a JSON file says how its figures
 * were made. tp-bench sim and compare write it alike. */
void sim_json_policy_settings(struct bench_json *j, const struct sim_opts *o);

#endif
