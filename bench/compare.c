/* SPDX-License-Identifier: MIT */
/*
 * tp-bench compare: the whole comparison in one command. It runs the grid workload x fleet x
 * queue discipline x seed x policy with the simulator (sim.c), prints one table per workload,
 * fleet and queue discipline (every figure as mean and spread over the seeds), and writes JSON,
 * CSV and gnuplot plots. See docs/benchmarks.md.
 *
 * The window rule: useful work is measured while the queue is never empty. Every cell (one
 * workload, fleet, queue discipline and seed, all policies) is run at an intensity (the
 * generator's load, or a trace's time compression) picked from a ladder: the lowest at which
 * the ideal bound's queue stays non-empty over the whole window. A cell in which any policy's
 * queue empties inside the window is flagged and kept out of every headline figure.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim.h"

#ifndef TP_BENCH_SOURCE_DIR
#define TP_BENCH_SOURCE_DIR "bench"
#endif

#define CMP_MAX 32
#define CMP_MAX_SEEDS 16

/* The peers whose best is the baseline of "gain" (on torus fleets the last two: the others
 * do not run there). */
static const char *const cmp_peers[] = {"kueue-like", "slurm-block-like", "slurm-tree-like",
                                        "first-fit-box", "slurm-torus-like"};

static const double cmp_load_ladder[] = {1.15, 1.3, 1.5, 2.0, 3.0};
static const double cmp_compress_ladder[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};

/* A workload of the grid: a generator mix, or a trace file. */
struct cmp_workload {
	char name[64];
	bool trace;
	enum sim_mix mix;
	char path[2100];
	size_t jobs;  /* generator: jobs; trace: rows per seed (0: all) */
	size_t asked; /* trace: the rows per seed asked for, when the trace is too short for it */
};

struct cmp_cell_pol {
	double eff_gpu_h, occupancy, wait_p50_m, wait_p95_m, planner_p99_ms, qempty;
	long planner_calls;
	long defrag_calls;               /* the defrag planner's calls alone */
	double defrag_p50_ms, defrag_p99_ms; /* their CPU time per call */
	long plan_calls;                 /* of them tp_defrag_plan's (the hook's, the upgrade's) */
	double plan_p50_ms, plan_p99_ms; /* their CPU time per call, without compaction's */
	long defrag_unpaid, compact_unpaid; /* plans the pay rule refused (sim_plan_pays) */
	long upgrade_calls, upgrade_moves;  /* the locality upgrade (sim.c, sim_upgrade) */
	double idle_shape_gpu_h, idle_count_gpu_h; /* idle while the oldest job waits */
	long defrag_moves, compact_moves; /* jobs moved by the defrag hook (upgrades too) and by
	                                   * compaction, over the whole run */
	double move_cost_gpu_h; /* the checkpoint GPU-hours of all those moves */
	double eff_share;       /* effective GPU-hours over busy GPU-hours in the window */
	long fail_jobs, fail_on_spare;   /* --failures: running jobs hit, repaired on a spare */
	double fail_lost_gpu_h, fail_restart_gpu_h;
};

struct cmp_cell {
	int wl, fl, q;
	uint64_t seed;
	double intensity; /* load or compression used */
	double queue_empty_share;
	double window_kept; /* share of the automatic window in which the ideal queue is full */
	bool flagged;
	struct cmp_cell_pol pol[16];
};

struct cmp_opts {
	struct cmp_workload wl[CMP_MAX];
	int nwl;
	const char *fleet[CMP_MAX];
	int nfl;
	enum sim_queue queue[3];
	int nq;
	uint64_t seed[CMP_MAX_SEEDS];
	int nseed;
	const char *json, *csv, *plot;
	const char *policies;
	bool quick;
	struct sim_opts sim;
};

/* The copies cmp_split cuts up, freed when the command ends. */
static char *cmp_copies[8];
static int cmp_ncopies;

/* Split a comma list into up to max pieces (pointers into a copy kept until the end). */
static int cmp_split(const char *opt, const char *s, const char **out, int max)
{
	char *copy = strdup(s);
	if (!copy || cmp_ncopies == (int)(sizeof cmp_copies / sizeof *cmp_copies))
		bench_die("out of memory");
	cmp_copies[cmp_ncopies++] = copy;
	int n = 0;
	for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
		if (n == max)
			bench_die("%s: more than %d items in '%s'", opt, max, s);
		out[n++] = tok;
	}
	if (n == 0)
		bench_die("%s: no item in '%s'", opt, s);
	return n;
}

static const char *cmp_shared_traces(const char *shared)
{
	static char dir[1024];
	snprintf(dir, sizeof dir, "%s/traces", shared);
	return dir;
}

static bool cmp_file_exists(const char *path)
{
	return access(path, R_OK) == 0;
}

/* A workload name: philly-like, openb-like, llm (generated); philly, openb, dlrm (the traces
 * of SHARED/traces); trace:FILE. */
static void cmp_add_workload(struct cmp_opts *o, const char *name, const char *shared,
                             size_t gen_jobs, size_t trace_rows)
{
	if (o->nwl == CMP_MAX)
		bench_die("--workloads: more than %d workloads", CMP_MAX);
	struct cmp_workload *w = &o->wl[o->nwl];
	memset(w, 0, sizeof *w);
	static const struct {
		const char *name, *file;
	} traces[] = {{"philly", "philly_pollux.csv"},
	              {"openb", "alibaba_openb2023.csv"},
	              {"dlrm", "alibaba_dlrm2025_gpu.csv"}};
	snprintf(w->name, sizeof w->name, "%s", name);
	if (!strcmp(name, "philly-like") || !strcmp(name, "openb-like") || !strcmp(name, "llm") ||
	    !strcmp(name, "tpu")) {
		w->mix = name[0] == 'p' ? SIM_MIX_PHILLY : name[0] == 'o' ? SIM_MIX_OPENB
		         : name[0] == 't' ? SIM_MIX_TPU : SIM_MIX_LLM;
		w->jobs = gen_jobs;
		o->nwl++;
		return;
	}
	w->trace = true;
	w->jobs = trace_rows;
	if (!strncmp(name, "trace:", 6)) {
		snprintf(w->path, sizeof w->path, "%s", name + 6);
		const char *base = strrchr(w->path, '/');
		snprintf(w->name, sizeof w->name, "trace:%.56s", base ? base + 1 : w->path);
		if (!cmp_file_exists(w->path))
			bench_die("--trace %s: cannot read the file", w->path);
		o->nwl++;
		return;
	}
	for (size_t i = 0; i < sizeof traces / sizeof traces[0]; i++)
		if (!strcmp(name, traces[i].name)) {
			snprintf(w->path, sizeof w->path, "%s/%s", cmp_shared_traces(shared),
			         traces[i].file);
			if (!cmp_file_exists(w->path))
				bench_die("--workloads %s: %s is absent (give --shared DIR)", name, w->path);
			o->nwl++;
			return;
		}
	bench_die("--workloads: '%s' is not philly-like, openb-like, llm, philly, openb, dlrm or "
	          "trace:FILE", name);
}

/* The data rows of a trace file (its lines after the header). */
static size_t cmp_trace_rows(const char *path)
{
	FILE *in = fopen(path, "r");
	if (!in)
		bench_die("%s: cannot read the file", path);
	size_t lines = 0;
	int c, last = '\n';
	while ((c = getc(in)) != EOF) {
		if (c == '\n')
			lines++;
		last = c;
	}
	if (last != '\n')
		lines++;
	fclose(in);
	return lines ? lines - 1 : 0;
}

/*
 * Seed s replays rows s x R to (s + 1) x R of a trace (R rows per seed): disjoint slices after
 * the first. A trace shorter than (largest seed + 1) x R rows (Alibaba's openb and DLRM traces
 * have about 7,000) gets the largest R that still gives every seed a slice of its own, and the
 * tables say so.
 */
static void cmp_fit_trace_slices(struct cmp_opts *o)
{
	uint64_t top = 0;
	for (int s = 0; s < o->nseed; s++)
		top = o->seed[s] > top ? o->seed[s] : top;
	for (int i = 0; i < o->nwl; i++) {
		struct cmp_workload *w = &o->wl[i];
		if (!w->trace || !w->jobs)
			continue;
		size_t rows = cmp_trace_rows(w->path);
		if ((top + 1) * w->jobs <= rows)
			continue;
		size_t per = rows / (top + 1);
		if (per == 0)
			bench_die("%s: %zu rows cannot give seeds up to %llu a slice each", w->path, rows,
			          (unsigned long long)top);
		fprintf(stderr, "compare: %s has %zu rows: %zu rows per seed instead of %zu, so that "
		        "seeds up to %llu replay disjoint slices\n", w->name, rows, per, w->jobs,
		        (unsigned long long)top);
		w->asked = w->jobs;
		w->jobs = per;
	}
}

/* Build the workload of one cell. A trace's seed picks its slice: `rows` rows from seed x rows
 * on, so that seeds replay disjoint slices and the first slice (the trace's start-up, when the
 * recorded cluster was filling) is left out; 0 rows: the whole trace, the same for every seed. */
static void cmp_workload_build(const struct cmp_workload *cw, const struct sim_fleet *f,
                               uint64_t seed, double intensity, struct sim_workload *w)
{
	if (!cw->trace) {
		if (sim_workload_generate(w, f, cw->mix, cw->jobs, intensity, seed) < 0)
			bench_die("out of memory");
		return;
	}
	size_t skip = cw->jobs ? (size_t)seed * cw->jobs : 0;
	struct sim_workload all;
	sim_workload_read_csv(&all, f, cw->path, cw->jobs ? skip + cw->jobs : 0);
	if (skip >= all.n)
		bench_die("%s: seed %llu starts at row %zu, past the %zu rows read", cw->path,
		          (unsigned long long)seed, skip, all.n);
	memset(w, 0, sizeof *w);
	w->n = all.n - skip;
	w->jobs = malloc((w->n ? w->n : 1) * sizeof *w->jobs);
	if (!w->jobs)
		bench_die("out of memory");
	double t0 = all.jobs[skip].submit_s;
	for (size_t i = 0; i < w->n; i++) {
		w->jobs[i] = all.jobs[skip + i];
		w->jobs[i].submit_s = floor((w->jobs[i].submit_s - t0) / intensity);
	}
	w->dropped = all.dropped;
	snprintf(w->source, sizeof w->source, "%s rows %zu-%zu, compressed %gx", cw->name, skip,
	         skip + w->n, intensity);
	sim_workload_free(&all);
}

static size_t cmp_ideal_index(void)
{
	for (size_t i = 0; i < sim_npolicies; i++)
		if (!strcmp(sim_policies[i].name, "ideal"))
			return i;
	bench_die("no ideal policy");
}

/*
 * The window of a cell: from 15% of the arrival span to the last arrival (sim_window), its
 * start moved past the last moment at which the ideal bound's queue is empty, so that the
 * fleet is saturated over the whole window (the ideal bound packs best: the other policies'
 * queues fill sooner). Returns the share of the automatic window that is kept.
 */
static double cmp_window(const struct cmp_opts *o, const struct sim_fleet *f,
                         const struct sim_workload *w, uint64_t seed, enum sim_queue q,
                         double *w0, double *w1)
{
	double a0, a1;
	sim_window(w, &a0, &a1);
	struct sim_result res;
	memset(&res, 0, sizeof res);
	res.pol = &sim_policies[cmp_ideal_index()];
	struct sim_opts so = o->sim;
	so.seed = seed;
	so.queue = q;
	sim_run_policy(&so, f, w, a0, a1, &res);
	*w0 = res.last_empty_s > a0 ? res.last_empty_s : a0;
	*w1 = a1;
	sim_result_free(&res);
	return a1 > a0 && *w1 > *w0 ? (*w1 - *w0) / (a1 - a0) : 0;
}

/* The share of the automatic window kept at one intensity, the least over seeds and queues. */
static double cmp_kept(const struct cmp_opts *o, const struct cmp_workload *cw,
                       const struct sim_fleet *f, double x)
{
	double kept = 1;
	for (int s = 0; s < o->nseed; s++) {
		struct sim_workload w;
		cmp_workload_build(cw, f, o->seed[s], x, &w);
		for (int q = 0; q < o->nq; q++) {
			double w0, w1;
			kept = fmin(kept, cmp_window(o, f, &w, o->seed[s], o->queue[q], &w0, &w1));
		}
		sim_workload_free(&w);
	}
	return kept;
}

/* The lowest intensity of the ladder at which the ideal bound's queue is non-empty over at
 * least the last half of the automatic window, for every seed and queue discipline of the grid
 * (the highest when none is: its cells are then flagged where a queue empties). One intensity
 * per workload and fleet keeps the seeds and the queue disciplines comparable. */
static double cmp_pick_intensity(const struct cmp_opts *o, const struct cmp_workload *cw,
                                 const struct sim_fleet *f, const char *fname)
{
	const double *ladder = cw->trace ? cmp_compress_ladder : cmp_load_ladder;
	size_t n = cw->trace ? sizeof cmp_compress_ladder / sizeof *ladder
	                     : sizeof cmp_load_ladder / sizeof *ladder;
	for (size_t i = 0; i < n; i++) {
		bench_progress(true, "compare: %s on %s: trying %s %g with the ideal bound", cw->name,
		               fname, cw->trace ? "compression" : "load", ladder[i]);
		if (cmp_kept(o, cw, f, ladder[i]) >= 0.5)
			return ladder[i];
	}
	return ladder[n - 1];
}

static void cmp_run_cell(const struct cmp_opts *o, const struct sim_fleet *f,
                         const size_t *pols, size_t npol, struct cmp_cell *cell)
{
	const struct cmp_workload *cw = &o->wl[cell->wl];
	struct sim_workload w;
	cmp_workload_build(cw, f, cell->seed, cell->intensity, &w);
	if (w.n == 0)
		bench_die("%s on %s: the workload has no job", cw->name, o->fleet[cell->fl]);
	double w0, w1;
	cell->window_kept = cmp_window(o, f, &w, cell->seed, o->queue[cell->q], &w0, &w1);
	struct sim_opts so = o->sim;
	so.seed = cell->seed;
	so.queue = o->queue[cell->q];
	cell->queue_empty_share = 0;
	for (size_t k = 0; k < npol; k++) {
		struct sim_result res;
		memset(&res, 0, sizeof res);
		res.pol = &sim_policies[pols[k]];
		sim_run_policy(&so, f, &w, w0, w1, &res);
		struct cmp_cell_pol *p = &cell->pol[k];
		p->eff_gpu_h = res.eff_gpu_h;
		p->occupancy = res.occupancy;
		p->wait_p50_m = res.wait_p50_s / 60;
		p->wait_p95_m = res.p95_wait_s / 60;
		p->planner_calls = (long)res.nplanner;
		p->planner_p99_ms = res.planner_p99_ms;
		p->defrag_calls = (long)res.ndefrag_cpu;
		p->defrag_p50_ms = res.defrag_p50_ms;
		p->defrag_p99_ms = res.defrag_p99_ms;
		p->plan_calls = (long)res.nplan_cpu;
		p->plan_p50_ms = res.plan_p50_ms;
		p->plan_p99_ms = res.plan_p99_ms;
		p->defrag_unpaid = res.defrag_unpaid;
		p->compact_unpaid = res.compact_unpaid;
		p->upgrade_calls = res.upgrade_calls;
		p->upgrade_moves = res.upgrade_moves;
		p->idle_shape_gpu_h = res.idle_shape_gpu_h;
		p->idle_count_gpu_h = res.idle_count_gpu_h;
		p->defrag_moves = res.defrag_moves;
		p->compact_moves = res.compact_moves;
		p->move_cost_gpu_h = (res.defrag_cost_s + res.compact_cost_s) / 3600;
		p->eff_share = res.eff_share;
		p->fail_jobs = res.fail_jobs;
		p->fail_on_spare = res.fail_on_spare;
		p->fail_lost_gpu_h = res.fail_lost_gpu_h;
		p->fail_restart_gpu_h = res.fail_restart_gpu_h;
		p->qempty = w1 > w0 ? res.queue_empty_s / (w1 - w0) : 1;
		if (p->qempty > cell->queue_empty_share)
			cell->queue_empty_share = p->qempty;
		sim_result_free(&res);
	}
	cell->flagged = cell->queue_empty_share > 0 || cell->window_kept < 0.5;
	sim_workload_free(&w);
}

/* Mean and spread (sample standard deviation; 0 for one value) of v[0..n). */
static void cmp_stats(const double *v, int n, double *mean, double *spread)
{
	double s = 0, q = 0;
	for (int i = 0; i < n; i++)
		s += v[i];
	*mean = n ? s / n : 0;
	for (int i = 0; i < n; i++)
		q += (v[i] - *mean) * (v[i] - *mean);
	*spread = n > 1 ? sqrt(q / (n - 1)) : 0;
}

struct cmp_group_pol {
	double eff_mean, eff_spread, occ_mean, p50_mean, p95_mean;
	double gain, gain_spread; /* over the best peer, seed by seed: mean and spread (shares) */
	double gap;        /* to ideal (share) */
	bool gain_real;    /* |gain| exceeds its spread */
	double p99_ms;
	long calls;
	long dcalls;             /* defrag planner calls, all seeds */
	long ucalls, umoves;     /* the locality upgrade's calls and moves, all seeds */
	double dp50_ms, dp99_ms; /* their largest per-seed p50 and p99 of CPU time */
	long pcalls;             /* of them tp_defrag_plan's, all seeds */
	double pp99_ms;          /* their largest per-seed p99 of CPU time */
};

struct cmp_group {
	int wl, fl, q;
	int ncells, nused;
	struct cmp_group_pol pol[16];
	double intensity_min, intensity_max;
};

static void cmp_summarise(const struct cmp_opts *o, const struct cmp_cell *cells, int ncells,
                          const size_t *pols, size_t npol, struct cmp_group *g)
{
	double v[4][CMP_MAX_SEEDS];
	g->ncells = g->nused = 0;
	g->intensity_min = INFINITY;
	g->intensity_max = 0;
	for (size_t k = 0; k < npol; k++) {
		int n = 0;
		double calls = 0, p99 = 0, dcalls = 0, dp50 = 0, dp99 = 0, ucalls = 0, umoves = 0;
		double pcalls = 0, pp99 = 0;
		for (int c = 0; c < ncells; c++) {
			const struct cmp_cell *cell = &cells[c];
			if (cell->wl != g->wl || cell->fl != g->fl || cell->q != g->q)
				continue;
			if (k == 0) {
				g->ncells++;
				g->intensity_min = fmin(g->intensity_min, cell->intensity);
				g->intensity_max = fmax(g->intensity_max, cell->intensity);
			}
			calls += cell->pol[k].planner_calls;
			p99 = fmax(p99, cell->pol[k].planner_p99_ms);
			dcalls += cell->pol[k].defrag_calls;
			ucalls += cell->pol[k].upgrade_calls;
			umoves += cell->pol[k].upgrade_moves;
			dp50 = fmax(dp50, cell->pol[k].defrag_p50_ms);
			dp99 = fmax(dp99, cell->pol[k].defrag_p99_ms);
			pcalls += cell->pol[k].plan_calls;
			pp99 = fmax(pp99, cell->pol[k].plan_p99_ms);
			if (cell->flagged)
				continue;
			v[0][n] = cell->pol[k].eff_gpu_h;
			v[1][n] = cell->pol[k].occupancy;
			v[2][n] = cell->pol[k].wait_p50_m;
			v[3][n] = cell->pol[k].wait_p95_m;
			n++;
		}
		g->nused = n;
		struct cmp_group_pol *p = &g->pol[k];
		double sp;
		cmp_stats(v[0], n, &p->eff_mean, &p->eff_spread);
		cmp_stats(v[1], n, &p->occ_mean, &sp);
		cmp_stats(v[2], n, &p->p50_mean, &sp);
		cmp_stats(v[3], n, &p->p95_mean, &sp);
		p->calls = (long)calls;
		p->p99_ms = p99;
		p->dcalls = (long)dcalls;
		p->ucalls = (long)ucalls;
		p->umoves = (long)umoves;
		p->dp50_ms = dp50;
		p->dp99_ms = dp99;
		p->pcalls = (long)pcalls;
		p->pp99_ms = pp99;
	}
	int best = -1, ideal = -1;
	for (size_t k = 0; k < npol; k++) {
		const char *name = sim_policies[pols[k]].name;
		if (!strcmp(name, "ideal"))
			ideal = (int)k;
		for (size_t i = 0; i < sizeof cmp_peers / sizeof *cmp_peers; i++)
			if (!strcmp(name, cmp_peers[i]) &&
			    (best < 0 || g->pol[k].eff_mean > g->pol[best].eff_mean))
				best = (int)k;
	}
	(void)o;
	/* The gain is paired: each unflagged seed's ratio to the best peer's figure in the same
	 * seed (the seeds' windows differ in length, which the spread of the raw figures holds). */
	for (size_t k = 0; k < npol; k++) {
		struct cmp_group_pol *p = &g->pol[k];
		double r[CMP_MAX_SEEDS];
		int n = 0;
		for (int c = 0; c < ncells && best >= 0; c++) {
			const struct cmp_cell *cell = &cells[c];
			if (cell->wl != g->wl || cell->fl != g->fl || cell->q != g->q || cell->flagged ||
			    !(cell->pol[best].eff_gpu_h > 0))
				continue;
			r[n++] = cell->pol[k].eff_gpu_h / cell->pol[best].eff_gpu_h - 1;
		}
		if (n > 0)
			cmp_stats(r, n, &p->gain, &p->gain_spread);
		else
			p->gain = p->gain_spread = NAN;
		p->gain_real = n > 1 && fabs(p->gain) > p->gain_spread && (int)k != best;
		p->gap = ideal >= 0 && g->pol[ideal].eff_mean > 0
		         ? 1 - p->eff_mean / g->pol[ideal].eff_mean : NAN;
	}
}

static const char *cmp_verdict(const struct cmp_group_pol *p)
{
	if (isnan(p->gain))
		return "";
	if (!p->gain_real)
		return "~";
	return p->gain > 0 ? "gain" : "loss";
}

static void cmp_print_group(const struct cmp_opts *o, const struct cmp_group *g,
                            const size_t *pols, size_t npol)
{
	const struct cmp_workload *cw = &o->wl[g->wl];
	printf("\n== %s on %s, queue %s: %d of %d seeds unflagged; %s %g", cw->name,
	       o->fleet[g->fl], sim_queue_names[o->queue[g->q]], g->nused, g->ncells,
	       cw->trace ? "compression" : "load", g->intensity_min);
	if (g->intensity_max != g->intensity_min)
		printf(" to %g", g->intensity_max);
	if (cw->asked)
		printf("; %zu trace rows per seed (the trace is too short for %zu)", cw->jobs, cw->asked);
	printf("\n");
	if (g->nused == 0) {
		printf("   every seed flagged (a queue emptied inside the window): no figure\n");
		return;
	}
	printf("%-17s %10s %8s %7s %8s %8s %8s %7s %-8s %7s %8s %9s\n", "policy", "eff_GPU_h",
	       "spread", "occup", "p50w_m", "p95w_m", "gain", "spread", "", "gap", "calls",
	       "p99_ms");
	for (size_t k = 0; k < npol; k++) {
		const struct cmp_group_pol *p = &g->pol[k];
		printf("%-17s %10.0f %8.0f %6.1f%% %8.1f %8.1f %+7.1f%% %6.1f%% %-8s %6.1f%% %8ld "
		       "%9.3f\n", sim_policies[pols[k]].name, p->eff_mean, p->eff_spread,
		       p->occ_mean * 100, p->p50_mean, p->p95_mean, p->gain * 100,
		       p->gain_spread * 100, cmp_verdict(p), p->gap * 100, p->calls, p->p99_ms);
	}
	for (size_t k = 0; k < npol; k++)
		if (g->pol[k].dcalls) {
			printf("%s: defrag planner %ld calls, CPU per call p50 %.3f ms, p99 %.3f ms "
			       "(largest per seed)", sim_policies[pols[k]].name, g->pol[k].dcalls,
			       g->pol[k].dp50_ms, g->pol[k].dp99_ms);
			if (g->pol[k].pcalls < g->pol[k].dcalls)
				printf("; tp_defrag_plan alone (the hook, without compaction): %ld calls, "
				       "p99 %.3f ms", g->pol[k].pcalls, g->pol[k].pp99_ms);
			if (g->pol[k].ucalls)
				printf("; of them the locality upgrade: %ld calls, %ld jobs moved",
				       g->pol[k].ucalls, g->pol[k].umoves);
			printf("\n");
		}
}

/* A policy's figures over the whole grid: the groups with an unflagged seed. */
struct cmp_overall {
	int cells;               /* groups with a gain figure */
	int gains, losses;       /* groups labelled gain or loss (beyond the spread) */
	double mean_gain;        /* mean over those groups of the gain over the best peer */
	double mean_gap;         /* mean of the gap to ideal */
};

static void cmp_overall(const struct cmp_group *groups, int ngroups, size_t k,
                        struct cmp_overall *out)
{
	double gain = 0, gap = 0;
	int ngap = 0;
	*out = (struct cmp_overall){0};
	for (int i = 0; i < ngroups; i++) {
		const struct cmp_group_pol *p = &groups[i].pol[k];
		if (groups[i].nused == 0 || isnan(p->gain))
			continue;
		out->cells++;
		gain += p->gain;
		if (p->gain_real && p->gain > 0)
			out->gains++;
		else if (p->gain_real)
			out->losses++;
		if (!isnan(p->gap)) {
			gap += p->gap;
			ngap++;
		}
	}
	out->mean_gain = out->cells ? gain / out->cells : NAN;
	out->mean_gap = ngap ? gap / ngap : NAN;
}

/* The grid in one table. The ideal bound packs perfectly, so its mean gain over the best peer
 * is about the most any policy can reach on this grid: a target above it cannot be met here. */
static void cmp_print_overall(const struct cmp_group *groups, int ngroups, const size_t *pols,
                              size_t npol)
{
	struct cmp_overall any;
	cmp_overall(groups, ngroups, 0, &any);
	if (any.cells == 0) { /* no peer among the policies, or every cell flagged */
		printf("\n== the whole grid: no cell with a peer baseline and an unflagged seed, no "
		       "gain to average\n");
		return;
	}
	printf("\n== the whole grid: per policy, the mean over the cells of its gain over the best "
	       "peer\n%-17s %6s %10s %6s %6s %6s %9s\n", "policy", "cells", "mean_gain", "gain",
	       "loss", "level", "mean_gap");
	for (size_t k = 0; k < npol; k++) {
		struct cmp_overall v;
		cmp_overall(groups, ngroups, k, &v);
		char gap[16] = "-"; /* no ideal bound among the policies */
		if (!isnan(v.mean_gap))
			snprintf(gap, sizeof gap, "%.2f%%", v.mean_gap * 100);
		printf("%-17s %6d %+9.2f%% %6d %6d %6d %9s\n", sim_policies[pols[k]].name, v.cells,
		       v.mean_gain * 100, v.gains, v.losses, v.cells - v.gains - v.losses, gap);
	}
	printf("(gain / loss / level: cells beyond the spread either way, or within it; the ideal "
	       "bound's mean\ngain is the most a placement policy can gain on this grid)\n");
}

static void cmp_json(const struct cmp_opts *o, const struct cmp_cell *cells, int ncells,
                     const struct cmp_group *groups, int ngroups, const size_t *pols,
                     size_t npol)
{
	struct bench_json j;
	if (bench_json_open(&j, o->json) < 0)
		bench_die("--json %s: cannot write the file", o->json);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "bench", "compare");
	bench_json_num(&j, "failures_per_gpu_day", o->sim.fail_rate);
	if (o->sim.fail_rate > 0) {
		bench_json_num(&j, "repair_h", o->sim.repair_h);
		bench_json_num(&j, "checkpoint_every_s", o->sim.ckpt_every_s);
		bench_json_str(&j, "spares", o->sim.spares ? o->sim.spares : "0");
	}
	sim_json_policy_settings(&j, &o->sim);
	bench_json_arr(&j, "cells");
	for (int c = 0; c < ncells; c++) {
		const struct cmp_cell *cell = &cells[c];
		bench_json_obj(&j, NULL);
		bench_json_str(&j, "workload", o->wl[cell->wl].name);
		bench_json_str(&j, "fleet", o->fleet[cell->fl]);
		bench_json_str(&j, "queue", sim_queue_names[o->queue[cell->q]]);
		bench_json_int(&j, "seed", (long long)cell->seed);
		bench_json_num(&j, "intensity", cell->intensity); /* bench/compare_merge.py checks it */
		bench_json_num(&j, "queue_empty_share", cell->queue_empty_share);
		bench_json_num(&j, "window_kept", cell->window_kept); /* flagged below 0.5 */
		bench_json_bool(&j, "flagged", cell->flagged);
		bench_json_obj(&j, "policies");
		for (size_t k = 0; k < npol; k++) {
			const struct cmp_cell_pol *p = &cell->pol[k];
			bench_json_obj(&j, sim_policies[pols[k]].name);
			bench_json_num(&j, "effective_gpu_hours", p->eff_gpu_h);
			bench_json_num(&j, "queue_empty_share", p->qempty); /* > 0: flags the cell */
			bench_json_num(&j, "occupancy", p->occupancy);
			bench_json_num(&j, "wait_p50_m", p->wait_p50_m);
			bench_json_num(&j, "wait_p95_m", p->wait_p95_m);
			bench_json_int(&j, "planner_calls", p->planner_calls);
			bench_json_num(&j, "planner_p99_ms", p->planner_p99_ms);
			bench_json_int(&j, "defrag_calls", p->defrag_calls);
			bench_json_num(&j, "defrag_p50_ms", p->defrag_p50_ms);
			bench_json_num(&j, "defrag_p99_ms", p->defrag_p99_ms);
			bench_json_int(&j, "plan_calls", p->plan_calls);
			bench_json_num(&j, "plan_p50_ms", p->plan_p50_ms);
			bench_json_num(&j, "plan_p99_ms", p->plan_p99_ms);
			bench_json_int(&j, "defrag_unpaid", p->defrag_unpaid);
			bench_json_int(&j, "compact_unpaid", p->compact_unpaid);
			bench_json_int(&j, "upgrade_calls", p->upgrade_calls);
			bench_json_int(&j, "upgrade_moves", p->upgrade_moves);
			bench_json_num(&j, "idle_shape_gpu_h", p->idle_shape_gpu_h);
			bench_json_num(&j, "idle_count_gpu_h", p->idle_count_gpu_h);
			bench_json_int(&j, "defrag_moves", p->defrag_moves);
			bench_json_int(&j, "compact_moves", p->compact_moves);
			bench_json_num(&j, "move_cost_gpu_h", p->move_cost_gpu_h);
			bench_json_num(&j, "eff_share", p->eff_share);
			if (o->sim.fail_rate > 0) {
				bench_json_int(&j, "failed_jobs", p->fail_jobs);
				bench_json_int(&j, "repaired_on_spare", p->fail_on_spare);
				bench_json_num(&j, "lost_gpu_hours", p->fail_lost_gpu_h);
				bench_json_num(&j, "restart_gpu_hours", p->fail_restart_gpu_h);
			}
			bench_json_end_obj(&j);
		}
		bench_json_end_obj(&j);
		bench_json_end_obj(&j);
	}
	bench_json_end_arr(&j);
	bench_json_arr(&j, "summary");
	for (int i = 0; i < ngroups; i++) {
		const struct cmp_group *g = &groups[i];
		if (g->nused == 0)
			continue; /* every seed flagged: no headline figure */
		bench_json_obj(&j, NULL);
		bench_json_str(&j, "workload", o->wl[g->wl].name);
		bench_json_str(&j, "fleet", o->fleet[g->fl]);
		bench_json_str(&j, "queue", sim_queue_names[o->queue[g->q]]);
		bench_json_obj(&j, "policies");
		for (size_t k = 0; k < npol; k++) {
			bench_json_obj(&j, sim_policies[pols[k]].name);
			bench_json_num(&j, "mean", g->pol[k].eff_mean);
			bench_json_num(&j, "spread", g->pol[k].eff_spread);
			bench_json_num(&j, "gain", g->pol[k].gain);
			bench_json_num(&j, "gain_spread", g->pol[k].gain_spread);
			bench_json_bool(&j, "gain_real", g->pol[k].gain_real);
			bench_json_num(&j, "gap", g->pol[k].gap);
			bench_json_end_obj(&j);
		}
		bench_json_end_obj(&j);
		bench_json_end_obj(&j);
	}
	bench_json_end_arr(&j);
	bench_json_obj(&j, "overall");
	for (size_t k = 0; k < npol; k++) {
		struct cmp_overall v;
		cmp_overall(groups, ngroups, k, &v);
		bench_json_obj(&j, sim_policies[pols[k]].name);
		bench_json_int(&j, "cells", v.cells);
		bench_json_num(&j, "mean_gain", v.mean_gain);
		bench_json_int(&j, "gains", v.gains);
		bench_json_int(&j, "losses", v.losses);
		bench_json_num(&j, "mean_gap", v.mean_gap);
		bench_json_end_obj(&j);
	}
	bench_json_end_obj(&j);
	bench_json_end_obj(&j);
	if (bench_json_close(&j) != 0)
		bench_die("--json %s: cannot write the file", o->json);
}

static void cmp_csv(const struct cmp_opts *o, const struct cmp_cell *cells, int ncells,
                    const size_t *pols, size_t npol)
{
	FILE *out = fopen(o->csv, "w");
	if (!out)
		bench_die("--csv %s: cannot write the file", o->csv);
	fprintf(out, "workload,fleet,queue,seed,intensity,flagged,queue_empty_share,policy,"
	             "effective_gpu_hours,occupancy,wait_p50_m,wait_p95_m,planner_calls,"
	             "planner_p99_ms,policy_queue_empty_share,window_kept\n");
	for (int c = 0; c < ncells; c++) {
		const struct cmp_cell *cell = &cells[c];
		for (size_t k = 0; k < npol; k++) {
			const struct cmp_cell_pol *p = &cell->pol[k];
			fprintf(out, "%s,%s,%s,%llu,%g,%d,%.5f,%s,%.2f,%.5f,%.3f,%.3f,%ld,%.4f,%.5f,%.4f\n",
			        o->wl[cell->wl].name, o->fleet[cell->fl],
			        sim_queue_names[o->queue[cell->q]], (unsigned long long)cell->seed,
			        cell->intensity, cell->flagged, cell->queue_empty_share,
			        sim_policies[pols[k]].name, p->eff_gpu_h, p->occupancy, p->wait_p50_m,
			        p->wait_p95_m, p->planner_calls, p->planner_p99_ms, p->qempty,
			        cell->window_kept);
		}
	}
	if (fclose(out) != 0)
		bench_die("--csv %s: cannot write the file", o->csv);
}

/* PREFIX-summary.csv (one row per group with an unflagged seed, one gain and one gap column per
 * policy), then gnuplot on bench/compare_plot.gp: PREFIX-gain.png and PREFIX-gap.png. */
static void cmp_plot(const struct cmp_opts *o, const struct cmp_group *groups, int ngroups,
                     const size_t *pols, size_t npol)
{
	char data[1100];
	snprintf(data, sizeof data, "%s-summary.csv", o->plot);
	FILE *out = fopen(data, "w");
	if (!out)
		bench_die("--plot %s: cannot write %s", o->plot, data);
	fprintf(out, "cell");
	for (size_t k = 0; k < npol; k++)
		fprintf(out, ",gain_%s", sim_policies[pols[k]].name);
	for (size_t k = 0; k < npol; k++)
		fprintf(out, ",gap_%s", sim_policies[pols[k]].name);
	fprintf(out, "\n");
	int rows = 0;
	for (int i = 0; i < ngroups; i++) {
		const struct cmp_group *g = &groups[i];
		if (g->nused == 0)
			continue;
		fprintf(out, "%s/%s/%s", o->wl[g->wl].name, o->fleet[g->fl],
		        sim_queue_names[o->queue[g->q]]);
		for (size_t k = 0; k < npol; k++)
			fprintf(out, ",%.3f", g->pol[k].gain * 100);
		for (size_t k = 0; k < npol; k++)
			fprintf(out, ",%.3f", g->pol[k].gap * 100);
		fprintf(out, "\n");
		rows++;
	}
	if (fclose(out) != 0)
		bench_die("--plot %s: cannot write %s", o->plot, data);
	if (rows == 0) {
		fprintf(stderr, "compare: every cell flagged: no plot\n");
		return;
	}
	char cmd[4096];
	snprintf(cmd, sizeof cmd,
	         "gnuplot -e \"data='%s'; out='%s'; npol=%zu\" '%s/compare_plot.gp'", data, o->plot,
	         npol, TP_BENCH_SOURCE_DIR);
	int rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "tp-bench: gnuplot failed (%d): %s\n", rc, cmd);
	else
		fprintf(stderr, "compare: plots written to %s-gain.png and %s-gap.png\n", o->plot,
		        o->plot);
}

static void cmp_usage(FILE *f)
{
	fprintf(f,
	        "usage: tp-bench compare [--quick] [--workloads a,b,...] [--fleets a,b,...]\n"
	        "                        [--queues besteffort,strict,easy] [--seeds N|a,b,...]\n"
	        "                        [--jobs N] [--trace-rows N|all] [--trace FILE]...\n"
	        "                        [--fleet scenario:FILE]... [--policies a,b,...]\n"
	        "                        [--shared DIR] [--starve-h H]\n"
	        "                        [--defrag-max-sims N] [--defrag-max-cands N]\n"
	        "                        [--no-compact] [--compact-moves-h N] [--compact-budget X]\n"
	        "                        [--compact-max-sims N]\n"
	        "                        [--no-pay] [--defrag-every-s S] [--defrag-before-backfill]\n"
	        "                        [--failures RATE [--repair-h H] [--ckpt-every-s S]\n"
	        "                        [--spares K[/LEVEL]]]\n"
	        "                        [--floor-search oldest|every|off] [--floor-ahead]\n"
	        "                        [--fabric-fit X] [--top-floor X] [--no-upgrade]\n"
	        "                        [--no-defrag-floor] [--no-defrag-behind]\n"
	        "                        [--no-pay-slowdown] [--no-defrag-best]\n"
	        "                        [--no-defrag-less-local] [--reserve-busy ours|all|off]\n"
	        "                        [--end-estimates none|exact|over:F] [--no-head-guard]\n"
	        "                        [--json FILE] [--csv FILE] [--plot PREFIX]\n"
	        "  Runs workload x fleet x queue discipline x seed x policy and prints one table per\n"
	        "  workload, fleet and queue: effective GPU-hours (mean and spread over the seeds),\n"
	        "  occupancy, waits, gain over the best peer (kueue-like, slurm-block-like,\n"
	        "  slurm-tree-like; 'gain' or 'loss' only where it exceeds the spreads), gap to ideal.\n"
	        "  Workloads: philly-like, openb-like, llm, tpu (generated), philly, openb, dlrm (the\n"
	        "  traces of SHARED/traces; SHARED defaults to the directory beside the repository),\n"
	        "  trace:FILE. Fleets: nvl72:GPUS, hgx:GPUS, l4:GPUS, mixed:GPUS, scenario:FILE,\n"
	        "  torus:X,Y,Z (give it with --fleet, or as torus:XxYxZ in --fleets). A torus fleet\n"
	        "  runs in a grid of torus fleets only, with the tpu workload (its default there)\n"
	        "  and its own policies: topoplace, topoplace-defrag, first-fit-box,\n"
	        "  slurm-torus-like, ideal (the others cannot place boxes and are left out, named);\n"
	        "  there the gain is over the better of first-fit-box and slurm-torus-like.\n"
	        "  --quick: philly (or philly-like without SHARED), openb-like, llm on nvl72:864,\n"
	        "  hgx:512, l4:576, queues besteffort and easy, seeds 1-3. Without --quick: those\n"
	        "  workloads and the three traces (when present) on nvl72:864, nvl72:10080,\n"
	        "  hgx:4096, l4:2304 and each trace's own size, every queue discipline.\n"
	        "  --trace and --fleet add cells. --trace-rows all: every seed replays the whole\n"
	        "  trace (no spread between seeds). topoplace-defrag also compacts for a fragmented\n"
	        "  oldest job, as tp-bench sim does (on by default but under EASY; --no-compact:\n"
	        "  off; --compact: on under EASY too), and carries out a plan only if it pays\n"
	        "  (tp-bench sim's pay rule; --no-pay: off), under EASY\n"
	        "  after backfill (--defrag-before-backfill: before, the old order). The JSON\n"
	        "  gives per policy defrag_unpaid and compact_unpaid (plans the pay rule refused)\n"
	        "  and idle_shape_gpu_h / idle_count_gpu_h (idle GPU-hours in the window while the\n"
	        "  oldest job waits with enough free GPUs, for shape, or too few, for count),\n"
	        "  defrag_moves, compact_moves and move_cost_gpu_h (jobs moved and their checkpoint\n"
	        "  GPU-hours, over the whole run), eff_share (effective over busy GPU-hours).\n"
	        "  --defrag-every-s, --defrag-max-sims, --defrag-max-cands: as tp-bench sim's (how\n"
	        "  often the defrag hook may run, default 0: each pass; the planner's work budget\n"
	        "  per call); --compact-moves-h, --compact-budget, --compact-max-sims: as tp-bench\n"
	        "  sim's (compaction's budgets).\n"
	        "  --failures, --repair-h, --ckpt-every-s, --spares: node failures in every cell, as\n"
	        "  tp-bench sim models them (off by default; bench/sim_failures.c).\n");
	fputs(SIM_FLOOR_USAGE, f);
	fputs(SIM_DEFRAG_FLOOR_USAGE, f);
	fputs(SIM_RESERVE_USAGE, f);
	fputs(SIM_END_USAGE, f);
	fputs(SIM_GUARD_USAGE, f);
}

int bench_compare_main(int argc, char **argv)
{
	struct cmp_opts o;
	memset(&o, 0, sizeof o);
	o.sim = (struct sim_opts){.fleet = "", .jobs = 0, .load = 1.15, .compress = 1,
	                          .win0_h = -1, .win1_h = -1, .sample_s = 3600, .backfill = 256,
	                          .starve_h = 0, .defrag_every_s = SIM_DEFRAG_EVERY_S, .defrag_max_cost = 0.05,
	                          .defrag_max_sims = SIM_DEFRAG_MAX_SIMS,
	                          .defrag_max_cands = SIM_DEFRAG_MAX_CANDS,
	                          .use_cost = true, .quiet = true, .compact = true,
	                          .compact_moves_h = SIM_COMPACT_MOVES_H,
	                          .compact_budget = SIM_COMPACT_BUDGET,
	                          .compact_max_sims = SIM_COMPACT_MAX_SIMS,
	                          .fabric_fit = SIM_FABRIC_FIT,
	                          .top_floor = SIM_TOP_FLOOR,
	                          .repair_h = SIM_REPAIR_H, .ckpt_every_s = SIM_CKPT_EVERY_S};
	const char *workloads = NULL, *fleets = NULL, *queues = NULL, *seeds = NULL;
	const char *shared = TP_BENCH_SOURCE_DIR "/../../shared";
	const char *extra_traces[CMP_MAX], *extra_fleets[CMP_MAX];
	int ntr = 0, nxf = 0;
	size_t jobs = 0, rows = 0;
	bool rows_all = false;
	static const struct option lopts[] = {
		{"quick", no_argument, NULL, 'q'},          {"workloads", required_argument, NULL, 'w'},
		{"fleets", required_argument, NULL, 'f'},   {"queues", required_argument, NULL, 'Q'},
		{"seeds", required_argument, NULL, 's'},    {"jobs", required_argument, NULL, 'n'},
		{"trace-rows", required_argument, NULL, 'r'},
		{"trace", required_argument, NULL, 't'},    {"fleet", required_argument, NULL, 'F'},
		{"policies", required_argument, NULL, 'p'}, {"shared", required_argument, NULL, 'S'},
		{"starve-h", required_argument, NULL, 'x'}, {"json", required_argument, NULL, 'j'},
		{"csv", required_argument, NULL, 'c'},      {"plot", required_argument, NULL, 'P'},
		{"compact", no_argument, NULL, 'k'},
		{"no-compact", no_argument, NULL, 1001},
		{"no-pay", no_argument, NULL, 1010},
		{"defrag-before-backfill", no_argument, NULL, 1012},
		{"defrag-every-s", required_argument, NULL, 1011},
		{"defrag-max-sims", required_argument, NULL, 'W'},
		{"defrag-max-cands", required_argument, NULL, 'Y'},
		{"compact-moves-h", required_argument, NULL, 'm'},
		{"compact-budget", required_argument, NULL, 'B'},
		{"compact-max-sims", required_argument, NULL, 1015},
		{"failures", required_argument, NULL, 1002},
		{"repair-h", required_argument, NULL, 1003},
		{"ckpt-every-s", required_argument, NULL, 1004},
		{"spares", required_argument, NULL, 1005},
		{"floor-search", required_argument, NULL, 1006},
		{"floor-ahead", no_argument, NULL, 1007},
		{"fabric-fit", required_argument, NULL, 1008},
		{"top-floor", required_argument, NULL, 1013},
		{"no-upgrade", no_argument, NULL, 1014},
		{"no-defrag-floor", no_argument, NULL, 1016},
		{"no-defrag-behind", no_argument, NULL, 1017},
		{"no-pay-slowdown", no_argument, NULL, 1018},
		{"no-defrag-best", no_argument, NULL, 1019},
		{"no-defrag-less-local", no_argument, NULL, 1020},
		{"reserve-busy", required_argument, NULL, 1021},
		{"end-estimates", required_argument, NULL, 1022},
		{"no-head-guard", no_argument, NULL, 1023},
		{"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "h", lopts, NULL)) != -1) {
		switch (ch) {
		case 'q': o.quick = true; break;
		case 'w': workloads = optarg; break;
		case 'f': fleets = optarg; break;
		case 'Q': queues = optarg; break;
		case 's': seeds = optarg; break;
		case 'n': jobs = bench_arg_uint("--jobs", optarg); break;
		case 'r':
			rows_all = !strcmp(optarg, "all");
			rows = rows_all ? 0 : bench_arg_uint("--trace-rows", optarg);
			break;
		case 't':
			if (ntr == CMP_MAX)
				bench_die("--trace: more than %d", CMP_MAX);
			extra_traces[ntr++] = optarg;
			break;
		case 'F':
			if (nxf == CMP_MAX)
				bench_die("--fleet: more than %d", CMP_MAX);
			extra_fleets[nxf++] = optarg;
			break;
		case 'p': o.policies = optarg; break;
		case 'S': shared = optarg; break;
		case 'x': o.sim.starve_h = bench_arg_num("--starve-h", optarg); break;
		case 'k': o.sim.compact = o.sim.compact_easy = true; break;
		case 1001: o.sim.compact = o.sim.compact_easy = false; break;
		case 1010: o.sim.no_pay = true; break;
		case 1012: o.sim.defrag_before_backfill = true; break;
		case 1011: o.sim.defrag_every_s = bench_arg_num("--defrag-every-s", optarg); break;
		case 'W':
			o.sim.defrag_max_sims = bench_arg_u32("--defrag-max-sims", optarg);
			break;
		case 'Y':
			o.sim.defrag_max_cands = bench_arg_u32("--defrag-max-cands", optarg);
			break;
		case 'm': o.sim.compact_moves_h = bench_arg_num("--compact-moves-h", optarg); break;
		case 'B': o.sim.compact_budget = bench_arg_num("--compact-budget", optarg); break;
		case 1015: o.sim.compact_max_sims = bench_arg_u32("--compact-max-sims", optarg); break;
		case 1002: o.sim.fail_rate = bench_arg_num("--failures", optarg); break;
		case 1003: o.sim.repair_h = bench_arg_num("--repair-h", optarg); break;
		case 1004: o.sim.ckpt_every_s = bench_arg_num("--ckpt-every-s", optarg); break;
		case 1005: o.sim.spares = optarg; break;
		case 1006: sim_floor_search_arg(optarg, &o.sim.floor_search); break;
		case 1007: o.sim.floor_ahead = true; break;
		case 1008: o.sim.fabric_fit = sim_fabric_fit_arg(optarg); break;
		case 1013: o.sim.top_floor = sim_top_floor_arg(optarg); break;
		case 1014: o.sim.no_upgrade = true; break;
		case 1016: o.sim.no_defrag_floor = true; break;
		case 1017: o.sim.no_defrag_behind = true; break;
		case 1018: o.sim.no_pay_slowdown = true; break;
		case 1019: o.sim.no_defrag_best = true; break;
		case 1020: o.sim.no_defrag_less_local = true; break;
		case 1021: sim_reserve_busy_arg(optarg, &o.sim.reserve_busy); break;
		case 1022: o.sim.end_over = sim_end_estimates_arg(optarg); break;
		case 1023: o.sim.no_head_guard = true; break;
		case 'j': o.json = optarg; break;
		case 'c': o.csv = optarg; break;
		case 'P': o.plot = optarg; break;
		case 'h': cmp_usage(stdout); return 0;
		default: cmp_usage(stderr); return 2;
		}
	}
	if (optind < argc)
		bench_die("compare: unexpected argument '%s'", argv[optind]);
	if (o.sim.starve_h < 0)
		bench_die("--starve-h: %g is negative (0 turns the rule off)", o.sim.starve_h);
	if (!(o.sim.compact_moves_h >= 0) || !(o.sim.compact_budget >= 0))
		bench_die("--compact-moves-h and --compact-budget must be >= 0");
	if (!(o.sim.defrag_every_s >= 0))
		bench_die("--defrag-every-s: %g is negative", o.sim.defrag_every_s);
	sim_failures_check_opts(&o.sim);
	char philly[1100];
	snprintf(philly, sizeof philly, "%s/philly_pollux.csv", cmp_shared_traces(shared));
	bool have_shared = cmp_file_exists(philly);

	/* workloads */
	size_t gen_jobs = jobs ? jobs : o.quick ? 6000 : 20000;
	size_t trace_rows = rows_all ? 0 : rows ? rows : o.quick ? 6000 : 20000;
	if (workloads) {
		const char *names[CMP_MAX];
		int n = cmp_split("--workloads", workloads, names, CMP_MAX);
		for (int i = 0; i < n; i++)
			cmp_add_workload(&o, names[i], shared, gen_jobs, trace_rows);
	} else {
		cmp_add_workload(&o, have_shared ? "philly" : "philly-like", shared, gen_jobs,
		                 trace_rows);
		cmp_add_workload(&o, "openb-like", shared, gen_jobs, trace_rows);
		cmp_add_workload(&o, "llm", shared, jobs ? jobs : o.quick ? 400 : 4000, trace_rows);
		if (!o.quick && have_shared) {
			cmp_add_workload(&o, "philly-like", shared, gen_jobs, trace_rows);
			cmp_add_workload(&o, "openb", shared, gen_jobs, trace_rows);
			cmp_add_workload(&o, "dlrm", shared, gen_jobs, 0);
		}
	}
	for (int i = 0; i < ntr; i++) {
		char name[1100];
		snprintf(name, sizeof name, "trace:%s", extra_traces[i]);
		cmp_add_workload(&o, name, shared, gen_jobs, trace_rows);
	}
	/* fleets */
	bool only_torus = nxf > 0; /* --fleet torus:... alone: no default fleets beside it */
	for (int i = 0; i < nxf; i++)
		only_torus &= !strncmp(extra_fleets[i], "torus:", 6);
	if (fleets) {
		o.nfl = cmp_split("--fleets", fleets, o.fleet, CMP_MAX);
	} else if (only_torus) {
		o.nfl = 0;
	} else if (o.quick) {
		o.fleet[o.nfl++] = "nvl72:864";
		o.fleet[o.nfl++] = "hgx:512";
		o.fleet[o.nfl++] = "l4:576";
	} else {
		o.fleet[o.nfl++] = "nvl72:864";
		o.fleet[o.nfl++] = "nvl72:10080";
		o.fleet[o.nfl++] = "hgx:4096";
		o.fleet[o.nfl++] = "l4:2304";
		o.fleet[o.nfl++] = "mixed:2304";
		if (have_shared) { /* the traces' own sizes (docs/benchmarks.md) */
			o.fleet[o.nfl++] = "nvl72:2490";
			o.fleet[o.nfl++] = "hgx:6212";
			o.fleet[o.nfl++] = "nvl72:3414";
		}
	}
	for (int i = 0; i < nxf; i++) {
		if (o.nfl == CMP_MAX)
			bench_die("--fleet: more than %d fleets", CMP_MAX);
		o.fleet[o.nfl++] = extra_fleets[i];
	}
	/* a torus fleet has its own workload and policies: not in a grid with tree fleets */
	int ntorus = 0;
	for (int i = 0; i < o.nfl; i++)
		ntorus += !strncmp(o.fleet[i], "torus:", 6);
	if (ntorus && ntorus != o.nfl)
		bench_die("--fleet: run torus fleets in a compare of their own (their workload and "
		          "policies differ from the other fleets')");
	if (ntorus && !workloads) { /* the default workloads have no box shapes */
		o.nwl = 0;
		cmp_add_workload(&o, "tpu", shared, jobs ? jobs : o.quick ? 600 : 2000, trace_rows);
	}
	/* queues */
	if (queues) {
		const char *names[3];
		o.nq = cmp_split("--queues", queues, names, 3);
		for (int i = 0; i < o.nq; i++)
			if (!sim_queue_parse(names[i], &o.queue[i]))
				bench_die("--queues: '%s' is not besteffort, strict or easy", names[i]);
	} else if (o.quick) { /* the peers' defaults: Kueue's BestEffortFIFO, Slurm's EASY */
		o.nq = 2;
		o.queue[0] = SIM_QUEUE_BESTEFFORT;
		o.queue[1] = SIM_QUEUE_EASY;
	} else {
		o.nq = 3;
		o.queue[0] = SIM_QUEUE_BESTEFFORT;
		o.queue[1] = SIM_QUEUE_STRICT;
		o.queue[2] = SIM_QUEUE_EASY;
	}
	/* seeds */
	if (!seeds) {
		o.nseed = 3;
		for (int i = 0; i < 3; i++)
			o.seed[i] = (uint64_t)i + 1;
	} else if (!strchr(seeds, ',')) {
		uint64_t n = bench_arg_uint("--seeds", seeds);
		if (n < 1 || n > CMP_MAX_SEEDS)
			bench_die("--seeds: %llu seeds; give 1 to %d (at least 3 for a spread)",
			          (unsigned long long)n, CMP_MAX_SEEDS);
		o.nseed = (int)n;
		for (int i = 0; i < o.nseed; i++)
			o.seed[i] = (uint64_t)i + 1;
	} else {
		const char *names[CMP_MAX_SEEDS];
		o.nseed = cmp_split("--seeds", seeds, names, CMP_MAX_SEEDS);
		for (int i = 0; i < o.nseed; i++) {
			o.seed[i] = bench_arg_uint("--seeds", names[i]);
			if (o.seed[i] < 1)
				bench_die("--seeds: seed 0 is not allowed (seeds start at 1)");
		}
	}
	size_t pols[16], npol = 0;
	struct sim_fleet f0;
	sim_fleet_build(&f0, o.fleet[0]); /* every fleet of the grid is of its kind */
	for (size_t i = 0; i < sim_npolicies; i++) {
		const char *why;
		if (!bench_list_has(o.policies, sim_policies[i].name))
			continue;
		if (sim_policy_runs_on(&sim_policies[i], &f0, &why))
			pols[npol++] = i;
		else if (o.policies || ntorus) /* not silently */
			printf("policy %s left out on %s: %s\n", sim_policies[i].name,
			       ntorus ? "torus fleets" : "these fleets", why);
	}
	tp_topology_destroy(f0.t);
	sim_torus_fleet_free(&f0);
	if (npol == 0)
		bench_die("--policies: '%s' selects no policy", o.policies);

	cmp_fit_trace_slices(&o);

	/* the grid */
	int ncells = o.nwl * o.nfl * o.nq * o.nseed;
	struct cmp_cell *cells = calloc((size_t)ncells, sizeof *cells);
	if (!cells)
		bench_die("out of memory");
	uint64_t t0 = bench_now_ns();
	int done = 0;
	for (int fl = 0; fl < o.nfl; fl++) {
		struct sim_fleet f;
		sim_fleet_build(&f, o.fleet[fl]);
		for (int wl = 0; wl < o.nwl; wl++) {
			double x = cmp_pick_intensity(&o, &o.wl[wl], &f, o.fleet[fl]);
			for (int s = 0; s < o.nseed; s++) {
				for (int q = 0; q < o.nq; q++) {
					struct cmp_cell *cell =
						&cells[((wl * o.nfl + fl) * o.nq + q) * o.nseed + s];
					cell->wl = wl;
					cell->fl = fl;
					cell->q = q;
					cell->seed = o.seed[s];
					cell->intensity = x;
					uint64_t c0 = bench_now_ns();
					cmp_run_cell(&o, &f, pols, npol, cell);
					done++;
					double el = (double)(bench_now_ns() - t0) * 1e-9;
					bench_progress(true, "compare: %d of %d cells done (%s on %s, %s, seed "
					               "%llu: %.1f s%s); %.0f s elapsed, about %.0f s left",
					               done, ncells, o.wl[wl].name, o.fleet[fl],
					               sim_queue_names[o.queue[q]],
					               (unsigned long long)o.seed[s],
					               (double)(bench_now_ns() - c0) * 1e-9,
					               cell->flagged ? ", flagged" : "", el,
					               el / done * (ncells - done));
				}
			}
		}
		tp_topology_destroy(f.t);
		sim_torus_fleet_free(&f);
	}

	/* tables */
	int ngroups = o.nwl * o.nfl * o.nq;
	struct cmp_group *groups = calloc((size_t)ngroups, sizeof *groups);
	if (!groups)
		bench_die("out of memory");
	printf("tp-bench compare: %d cells (%d workloads x %d fleets x %d queue disciplines x %d "
	       "seeds), %zu policies; libtopoplace %s\n", ncells, o.nwl, o.nfl, o.nq, o.nseed, npol,
	       tp_version_string());
	if (o.sim.fail_rate > 0)
		printf("node failures: %g per GPU-day, repaired after %g h, checkpoints every %g s, "
		       "hot spares %s (topoplace policies; see tp-bench sim)\n", o.sim.fail_rate,
		       o.sim.repair_h, o.sim.ckpt_every_s, o.sim.spares ? o.sim.spares : "none");
	for (int wl = 0; wl < o.nwl; wl++) {
		printf("workload %s: ", o.wl[wl].name);
		struct sim_fleet f;
		sim_fleet_build(&f, o.fleet[0]);
		struct sim_workload w;
		cmp_workload_build(&o.wl[wl], &f, o.seed[0], o.wl[wl].trace ? 1 : 1.15, &w);
		sim_print_mix(stdout, &w);
		sim_workload_free(&w);
		tp_topology_destroy(f.t);
		sim_torus_fleet_free(&f);
	}
	int gi = 0;
	for (int wl = 0; wl < o.nwl; wl++)
		for (int fl = 0; fl < o.nfl; fl++)
			for (int q = 0; q < o.nq; q++, gi++) {
				groups[gi].wl = wl;
				groups[gi].fl = fl;
				groups[gi].q = q;
				cmp_summarise(&o, cells, ncells, pols, npol, &groups[gi]);
				cmp_print_group(&o, &groups[gi], pols, npol);
			}
	cmp_print_overall(groups, ngroups, pols, npol);
	int flagged = 0;
	for (int c = 0; c < ncells; c++)
		flagged += cells[c].flagged;
	printf("\n%d of %d cells flagged (a policy's queue emptied inside the window) and left out "
	       "of every figure above.\neff_GPU_h: effective GPU-hours in the window, mean over the "
	       "unflagged seeds; spread: their standard\ndeviation; gain: over the best of kueue-like, "
	       "slurm-block-like, slurm-tree-like (by mean; on torus fleets\nfirst-fit-box, "
	       "slurm-torus-like), seed by seed, mean and spread; 'gain' or 'loss' only where it\n"
	       "exceeds its spread, '~' otherwise; gap: to ideal; calls, p99_ms: planner calls (all "
	       "seeds) and the\n"
	       "largest per-seed p99 of their wall time; load / compression: the intensity picked so "
	       "that the ideal\nbound's queue never empties in the window.\n", flagged, ncells);
	if (o.json)
		cmp_json(&o, cells, ncells, groups, ngroups, pols, npol);
	if (o.csv)
		cmp_csv(&o, cells, ncells, pols, npol);
	if (o.plot)
		cmp_plot(&o, groups, ngroups, pols, npol);
	free(groups);
	free(cells);
	while (cmp_ncopies > 0)
		free(cmp_copies[--cmp_ncopies]);
	return 0;
}
