/* SPDX-License-Identifier: MIT */
/*
 * tp-bench sim's output: the table on stdout, the JSON document, the CSV of the samples and
 * the gnuplot plots (sim.c runs the policies; this file writes what they gave).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

#ifndef TP_BENCH_SOURCE_DIR
#define TP_BENCH_SOURCE_DIR "bench"
#endif

static const char *sim_fleet_kind_name(const struct sim_fleet *f)
{
	return f->kind == FLEET_NVL72 ? "nvl72" : f->kind == FLEET_HGX ? "hgx"
	       : f->kind == FLEET_L4 ? "l4" : f->kind == FLEET_MIXED ? "mixed"
	       : f->kind == FLEET_TORUS ? "torus" : "scenario";
}

void sim_print(const struct sim_opts *o, const struct sim_fleet *f, const struct sim_workload *w,
               double w0, double w1, const struct sim_result *res, size_t n)
{
	printf("fleet: %s, %u GPUs (%u x %u), efficiency model: %s\n", sim_fleet_kind_name(f),
	       f->gpus, f->top, f->per_top,
	       o->use_cost ? "cost model (tp_cost_efficiency)" : "stand-in (sim_policy.c)");
	printf("workload: %s\n", w->source);
	printf("queue: %s%s; window: %.1f h to %.1f h\n\n", sim_queue_names[o->queue],
	       o->starve_h > 0 ? " with the starvation rule" : "", w0 / 3600, w1 / 3600);
	printf("%-17s %6s %9s %6s %6s %6s %8s %8s %8s %6s %6s %6s\n", "policy", "occup", "eff_GPU_h",
	       "effic", "full%", "fullG%", "wait_m", "p95w_m", "mkspan_h", "fragNV", "qempt%",
	       "wall_s");
	for (size_t i = 0; i < n; i++) {
		const struct sim_result *r = &res[i];
		printf("%-17s %5.1f%% %9.0f %6.3f %5.1f%% %5.1f%% %8.1f %8.1f %8.1f %6.3f %5.1f%% "
		       "%6.1f\n",
		       r->pol->name, r->occupancy * 100, r->eff_gpu_h, r->eff_share,
		       r->full_locality_share * 100, r->full_locality_gpu_share * 100,
		       r->mean_wait_s / 60, r->p95_wait_s / 60, r->makespan_s / 3600, r->frag_nv_mean,
		       w1 > w0 ? r->queue_empty_s / (w1 - w0) * 100 : 0, r->wall_s);
	}
	for (size_t i = 0; i < n; i++)
		if (res[i].pol->defrag)
			printf("%s: %ld planner calls (mean %.1f ms), %ld plans refused (a moved job "
			       "would lose efficiency), %ld and %ld by the pay rule (defrag, compaction), "
			       "%ld jobs moved, cost %.0f GPU-seconds of checkpoints\n", res[i].pol->name,
			       res[i].defrag_calls, res[i].defrag_us_mean / 1000, res[i].defrag_refused,
			       res[i].defrag_unpaid, res[i].compact_unpaid, res[i].defrag_moves,
			       res[i].defrag_cost_s);
	for (size_t i = 0; i < n; i++)
		if (res[i].pol->defrag && !o->no_upgrade && f->kind != FLEET_TORUS)
			printf("%s: locality upgrade: %ld planner calls besides those, %ld of the jobs "
			       "moved, %.0f GPU-seconds of the cost\n", res[i].pol->name,
			       res[i].upgrade_calls, res[i].upgrade_moves, res[i].upgrade_cost_s);
	if (f->kind == FLEET_TORUS) {
		printf("\ntorus %ux%ux%u (%u chips; GPUs above are chips): mean over the window's samples\n",
		       f->dims[0], f->dims[1], f->dims[2], f->gpus);
		printf("%-17s %10s %10s %10s %12s\n", "policy", "box_chips", "box/free", "fragments",
		       "boxes_ok");
		for (size_t i = 0; i < n; i++) {
			const struct sim_result *r = &res[i];
			if (!r->pol->uses_cluster) {
				printf("%-17s %10s %10s %10s %12s\n", r->pol->name, "-", "-", "-",
				       "(no chips)");
				continue;
			}
			printf("%-17s %10.1f %9.1f%% %10.1f %5ld of %-5zu\n", r->pol->name,
			       r->box_free_mean, r->box_free_share_mean * 100, r->fragments_mean,
			       r->box_checked, r->started);
		}
		printf("box_chips = chips of the largest wholly free box (tp_frag_largest_box); box/free "
		       "= that as a share of the\nfree chips; fragments = connected sets of free chips "
		       "(tp_frag_grid_fragment_count); boxes_ok = placements\nchecked to be the job's "
		       "box, of the jobs started.\n");
	}
	printf("\noccup = busy GPU share in the window; eff_GPU_h = effective GPU-hours in the window"
	       "; effic = eff_GPU_h / busy GPU-hours;\nfull%% / fullG%% = jobs / GPU-hours at full "
	       "locality; wait = queueing delay (mean, p95) in minutes; fragNV = mean share\nof free "
	       "GPUs outside fully free NVLink domains in the window; qempt = share of the window "
	       "with an empty queue.\n");
}

void sim_json_policy_settings(struct bench_json *j, const struct sim_opts *o)
{
	bench_json_obj(j, "policy_settings");
	bench_json_num(j, "defrag_every_s", o->defrag_every_s);
	bench_json_num(j, "defrag_max_cost", o->defrag_max_cost);
	bench_json_int(j, "defrag_max_sims", o->defrag_max_sims);
	bench_json_int(j, "defrag_max_cands", o->defrag_max_cands);
	bench_json_bool(j, "defrag_before_backfill", o->defrag_before_backfill);
	bench_json_bool(j, "compact", o->compact);
	bench_json_bool(j, "compact_easy", o->compact_easy);
	bench_json_num(j, "compact_moves_h", o->compact_moves_h);
	bench_json_num(j, "compact_budget", o->compact_budget);
	bench_json_int(j, "compact_max_sims", o->compact_max_sims);
	bench_json_bool(j, "pay_rule", !o->no_pay);
	bench_json_str(j, "floor_search", sim_floor_search_name(o->floor_search));
	bench_json_bool(j, "floor_ahead", o->floor_ahead);
	bench_json_num(j, "fabric_fit", o->fabric_fit);
	bench_json_num(j, "top_floor", o->top_floor);
	bench_json_bool(j, "upgrade", !o->no_upgrade);
	bench_json_bool(j, "defrag_floor", !o->no_defrag_floor);
	bench_json_bool(j, "defrag_behind", !o->no_defrag_behind);
	bench_json_bool(j, "head_guard", !o->no_head_guard);
	bench_json_bool(j, "pay_slowdown", !o->no_pay && !o->no_pay_slowdown);
	bench_json_bool(j, "defrag_best", !o->no_defrag_best); /* never under strict */
	bench_json_bool(j, "defrag_less_local", /* only where the NVLink domain holds nodes */
	                !o->no_defrag_less_local);
	bench_json_str(j, "reserve_busy", sim_reserve_busy_name(o->reserve_busy));
	char eb[32];
	bench_json_str(j, "end_estimates", sim_end_estimates_name(o->end_over, eb));
	bench_json_end_obj(j);
}

void sim_json(const struct sim_opts *o, const struct sim_fleet *f, const struct sim_workload *w,
              double w0, double w1, const struct sim_result *res, size_t n)
{
	struct bench_json j;
	if (bench_json_open(&j, o->json) < 0)
		bench_die("cannot write %s", o->json);
	bench_json_obj(&j, NULL);
	bench_json_str(&j, "bench", "sim");
	bench_json_str(&j, "library_version", tp_version_string());
	bench_json_num(&j, "loadavg_1min_at_end", bench_loadavg());
	bench_json_obj(&j, "fleet");
	bench_json_str(&j, "kind", sim_fleet_kind_name(f));
	bench_json_str(&j, "spec", o->fleet);
	bench_json_int(&j, "levels", f->nlevels);
	bench_json_str(&j, "nvlink_level", f->level_name[f->nv_level]);
	bench_json_int(&j, "node_gpus", f->node_gpus);
	bench_json_int(&j, "gpus", f->gpus);
	bench_json_int(&j, "top_domains", f->top);
	bench_json_int(&j, "per_top", f->per_top);
	if (f->kind == FLEET_TORUS) {
		bench_json_arr(&j, "torus_dims");
		for (int a = 0; a < 3; a++)
			bench_json_int(&j, NULL, f->dims[a]);
		bench_json_end_arr(&j);
	}
	bench_json_end_obj(&j);
	bench_json_obj(&j, "workload");
	bench_json_str(&j, "source", w->source);
	bench_json_int(&j, "jobs", (long long)w->n);
	bench_json_int(&j, "dropped_larger_than_fleet", (long long)w->dropped);
	bench_json_int(&j, "seed", (long long)o->seed);
	bench_json_end_obj(&j);
	bench_json_num(&j, "window_start_s", w0);
	bench_json_num(&j, "window_end_s", w1);
	bench_json_str(&j, "efficiency_model", o->use_cost ? "cost" : "standin");
	bench_json_str(&j, "queue", sim_queue_names[o->queue]);
	bench_json_int(&j, "backfill", (long long)o->backfill);
	bench_json_num(&j, "starve_h", o->starve_h);
	bench_json_num(&j, "defrag_every_s", o->defrag_every_s);
	bench_json_num(&j, "defrag_max_cost", o->defrag_max_cost);
	bench_json_int(&j, "defrag_max_sims", o->defrag_max_sims);
	bench_json_int(&j, "defrag_max_cands", o->defrag_max_cands);
	sim_json_policy_settings(&j, o);
	bench_json_obj(&j, "policies");
	for (size_t i = 0; i < n; i++) {
		const struct sim_result *r = &res[i];
		bench_json_obj(&j, r->pol->name);
		bench_json_num(&j, "occupancy", r->occupancy);
		bench_json_num(&j, "occupancy_whole_run", r->occupancy_all);
		bench_json_num(&j, "effective_gpu_hours", r->eff_gpu_h);
		bench_json_num(&j, "effective_share", r->eff_share);
		bench_json_num(&j, "full_locality_share", r->full_locality_share);
		bench_json_num(&j, "full_locality_gpu_hours_share", r->full_locality_gpu_share);
		bench_json_num(&j, "mean_efficiency", r->mean_eff);
		bench_json_num(&j, "mean_wait_s", r->mean_wait_s);
		bench_json_num(&j, "p95_wait_s", r->p95_wait_s);
		bench_json_num(&j, "p50_wait_s", r->wait_p50_s);
		bench_json_num(&j, "queue_empty_share", w1 > w0 ? r->queue_empty_s / (w1 - w0) : 0);
		bench_json_int(&j, "planner_calls", (long long)r->nplanner);
		bench_json_num(&j, "planner_p99_ms", r->planner_p99_ms);
		bench_json_num(&j, "max_wait_s", r->max_wait_s);
		bench_json_num(&j, "makespan_s", r->makespan_s);
		bench_json_num(&j, "frag_nvlink_mean", r->frag_nv_mean);
		bench_json_num(&j, "frag_node_mean", r->frag_node_mean);
		if (f->kind == FLEET_TORUS) {
			bench_json_num(&j, "largest_free_box_mean", r->box_free_mean);
			bench_json_num(&j, "largest_free_box_share_mean", r->box_free_share_mean);
			bench_json_num(&j, "free_fragments_mean", r->fragments_mean);
			bench_json_int(&j, "placements_checked_boxes", r->box_checked);
		}
		bench_json_num(&j, "queue_empty_s_in_window", r->queue_empty_s);
		bench_json_int(&j, "jobs_started", (long long)r->started);
		bench_json_int(&j, "jobs_rejected", (long long)r->rejected);
		bench_json_int(&j, "defrag_moves", r->defrag_moves);
		bench_json_num(&j, "defrag_cost_s", r->defrag_cost_s);
		bench_json_int(&j, "defrag_calls", r->defrag_calls);
		bench_json_int(&j, "defrag_refused", r->defrag_refused);
		bench_json_int(&j, "defrag_unpaid", r->defrag_unpaid);
		bench_json_int(&j, "compact_unpaid", r->compact_unpaid);
		bench_json_int(&j, "upgrade_calls", r->upgrade_calls);
		bench_json_int(&j, "upgrade_moves", r->upgrade_moves);
		bench_json_num(&j, "upgrade_cost_s", r->upgrade_cost_s);
		bench_json_num(&j, "idle_shape_gpu_h", r->idle_shape_gpu_h);
		bench_json_num(&j, "idle_count_gpu_h", r->idle_count_gpu_h);
		bench_json_int(&j, "compact_calls", r->compact_calls);
		bench_json_int(&j, "compact_refused", r->compact_refused);
		bench_json_int(&j, "compact_plans", r->compact_plans);
		bench_json_int(&j, "compact_head_started", r->compact_head_started);
		bench_json_int(&j, "compact_moves", r->compact_moves);
		bench_json_num(&j, "compact_cost_s", r->compact_cost_s);
		bench_json_num(&j, "defrag_us_mean", r->defrag_us_mean);
		bench_json_int(&j, "easy_reservation_calls", r->resv_calls);
		bench_json_int(&j, "easy_backfill_refused", r->resv_refused);
		bench_json_int(&j, "easy_backfill_elsewhere", r->resv_elsewhere);
		bench_json_int(&j, "easy_reservations_on_busy", r->resv_busy);
		bench_json_int(&j, "head_guard_passes", r->guard_passes);
		bench_json_int(&j, "head_guard_moved", r->guard_moved);
		bench_json_int(&j, "place_calls", r->place_calls);
		bench_json_num(&j, "place_us_mean", r->place_us_mean);
		bench_json_num(&j, "wall_s", r->wall_s);
		bench_json_end_obj(&j);
	}
	bench_json_end_obj(&j);
	bench_json_end_obj(&j);
	if (bench_json_close(&j) != 0)
		bench_die("cannot write %s", o->json);
}

void sim_csv(const struct sim_opts *o, const struct sim_fleet *f, const struct sim_result *res,
             size_t n)
{
	FILE *out = fopen(o->csv, "w");
	if (!out)
		bench_die("cannot write %s", o->csv);
	bool torus = f->kind == FLEET_TORUS;
	fprintf(out, "policy,t_h,busy_gpus,occupancy,effective_gpus,queued,running,frag_nvlink,"
	             "frag_node%s\n", torus ? ",largest_free_box,free_fragments" : "");
	for (size_t i = 0; i < n; i++) {
		for (size_t k = 0; k < res[i].nsamples; k++) {
			const struct sim_sample *s = &res[i].samples[k];
			fprintf(out, "%s,%.4f,%u,%.5f,%.2f,%u,%u,%.5f,%.5f", res[i].pol->name, s->t / 3600,
			        s->busy, (double)s->busy / f->gpus, s->eff_busy, s->queued, s->running,
			        s->frag_nv, s->frag_node);
			if (torus)
				fprintf(out, ",%u,%u", s->box_free, s->fragments);
			fputc('\n', out);
		}
	}
	if (fclose(out) != 0)
		bench_die("cannot write %s", o->csv);
}

/* The data of the per-policy plots, beside them: PREFIX-waits.csv (the delay distribution)
 * and PREFIX-gains.csv (effective GPU-hours, and their ratio to first-fit's when it ran, else
 * to the first policy's). */
static void sim_plot_data(const char *prefix, const struct sim_result *res, size_t n,
                          char *waits, char *gains, size_t len)
{
	snprintf(waits, len, "%s-waits.csv", prefix);
	snprintf(gains, len, "%s-gains.csv", prefix);
	FILE *out = fopen(waits, "w");
	if (!out)
		bench_die("cannot write %s", waits);
	fprintf(out, "policy,jobs_share,wait_h\n");
	for (size_t i = 0; i < n; i++)
		for (int q = 0; q <= 100; q++)
			fprintf(out, "%s,%.2f,%.4f\n", res[i].pol->name, q / 100.0,
			        res[i].wait_pct[q] / 3600);
	if (fclose(out) != 0)
		bench_die("cannot write %s", waits);
	const struct sim_result *base = &res[0];
	for (size_t i = 0; i < n; i++)
		if (!strcmp(res[i].pol->name, "first-fit"))
			base = &res[i];
	out = fopen(gains, "w");
	if (!out)
		bench_die("cannot write %s", gains);
	fprintf(out, "policy,effective_gpu_hours,vs_%s,occupancy\n", base->pol->name);
	for (size_t i = 0; i < n; i++)
		fprintf(out, "%s,%.0f,%.4f,%.4f\n", res[i].pol->name, res[i].eff_gpu_h,
		        base->eff_gpu_h > 0 ? res[i].eff_gpu_h / base->eff_gpu_h : 0,
		        res[i].occupancy);
	if (fclose(out) != 0)
		bench_die("cannot write %s", gains);
}

void sim_plot(const struct sim_opts *o, const struct sim_result *res, size_t n)
{
	char names[512] = "", waits[1024], gains[1024];
	for (size_t i = 0; i < n; i++) {
		strncat(names, res[i].pol->name, sizeof names - strlen(names) - 2);
		strncat(names, " ", sizeof names - strlen(names) - 1);
	}
	sim_plot_data(o->plot, res, n, waits, gains, sizeof waits);
	char cmd[4096];
	snprintf(cmd, sizeof cmd,
	         "gnuplot -e \"csv='%s'; out='%s'; policies='%s'; waits='%s'; gains='%s'\" "
	         "'%s/sim_plot.gp'",
	         o->csv, o->plot, names, waits, gains, TP_BENCH_SOURCE_DIR);
	int rc = system(cmd);
	if (rc != 0)
		fprintf(stderr, "tp-bench: gnuplot failed (%d): %s\n", rc, cmd);
	else
		fprintf(stderr, "sim: plots written to %s-*.png (or .svg)\n", o->plot);
}
