/* SPDX-License-Identifier: MIT */
/*
 * Workloads of the simulator: the bundled generator, the CSV trace reader, and the shape every
 * job asks for.
 *
 * The generator needs nothing outside the repository. It has three job mixes (--mix):
 *
 * philly: after the Philly trace (../shared/traces/philly_pollux.csv, 82,247 jobs): GPUs drawn
 *   with the trace's counts (1: 76,627, 2: 1,818, 4: 1,870, 8: 1,643, 12: 7, 16: 199, 24: 7,
 *   32: 67, 64: 6, 128: 3); all training; running time log-normal with the trace's median
 *   (1,144 s) and a sigma of 1.78 (its p90 of 11,266 s), clamped to [60 s, 2 days], times
 *   3.7 for 2 GPUs, 9.4 for 4, 15.6 for 8 and 12 above (the trace's GPU-hours per GPU by size
 *   against 1-GPU jobs': multi-GPU jobs run longer, and jobs of at most 8 GPUs hold ~86% of
 *   the GPU-hours, 1-GPU jobs ~18%, as in the trace).
 * openb: after Alibaba's openb 2023 pod list (7,064 GPU pods): GPUs 1 (6,989), 2 (16), 4 (15),
 *   8 (44), whole GPUs (fractional requests count as one GPU); 1-GPU pods are inference
 *   (latency-sensitive, 57% of the pods) or training (best effort), larger ones training;
 *   running time log-normal, median 492 s, sigma 1.97 (the trace's p90 of 6,131 s), clamped to
 *   [30 s, 2 days], times 2.5 for 2 GPUs, 0.3 for 4 and 4.8 for 8 (from the trace likewise:
 *   1-GPU pods hold ~87% of the GPU-hours).
 * llm (the default): an LLM-heavy NVL72 mix of today, per job:
 *   class:       training 75%, inference 15%, interactive 10%;
 *   training:    GPUs 1 (18%), 2 (5%), 4 (14%), 8 (14%), 16 (10%), 32 (10%), 64 (10%),
 *                72 (6%), 128 (5%), 256 (4%), 512 (3%), 1024 (1%); running time log-normal,
 *                median 1.5 h, sigma 1.0, clamped to [5 min, 48 h] (independent of size);
 *   inference:   replicas of 1 (30%), 2 (20%) or 4 (50%) GPUs, 1 (30%), 2 (30%), 4 (25%) or
 *                8 (15%) replicas; median 4 h, sigma 0.8;
 *   interactive: GPUs 1 (40%), 2 (20%), 4 (30%), 8 (10%); median 30 min, sigma 0.7;
 *   sizes above the fleet are capped to the largest power of two that fits;
 * tpu: box-shaped TPU slices, on torus fleets only (sim_torus.c);
 * Every mix: sizes above the fleet are capped to the largest power of two that fits; arrivals
 * are Poisson, at a rate that offers `load` (default 1.15) times the fleet's GPU hours: rate =
 * load x GPUs / mean(GPUs x running time) of the generated jobs, so the queue stays non-empty
 * and the fleet saturated. Checkpoint and restart cost: sim_checkpoint_s.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

static uint32_t gcd32(uint32_t a, uint32_t b)
{
	while (b) {
		uint32_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

/* The largest divisor of n that is <= cap and a multiple of g (g divides n). */
static uint32_t largest_divisor(uint32_t n, uint32_t cap, uint32_t g)
{
	for (uint32_t s = cap < n ? cap : n; s >= g; s--)
		if (n % s == 0 && s % g == 0)
			return s;
	return g;
}

/*
 * Shapes, from the job's size and class:
 *   - up to a node: one group of all its GPUs, required node;
 *   - up to an NVLink domain (a rack of 72 on NVL72): groups of whole nodes where the size
 *     allows (gcd with the node size), required inside one NVLink domain;
 *   - larger: slices of the largest divisor of the size up to an NVLink domain, each slice in
 *     one NVLink domain, preferred inside one domain of the level above (the block);
 *   - inference: replicas of gcd(size, node) GPUs, each a group inside one node, nothing
 *     asked above the node: every policy gets the same shape, and no peer baseline can ask
 *     for a spread (Kueue has none; the Slurm plugins neither), which this simulator's
 *     effective GPU-hours would not reward either. Spread over racks is measured where it
 *     counts, in the serving simulation (--inference, sim_serving.c: availability);
 *   - interactive jobs are shaped as training (they are never moved).
 */
void sim_job_shape(const struct sim_fleet *f, struct sim_job *j)
{
	struct sim_shape *s = &j->shape;
	uint32_t n = j->gpus;
	*s = (struct sim_shape){.group = 1, .required = -1, .preferred = -1, .slice_level = -1};
	unsigned kind;
	if (j->cls == TP_CLASS_INFERENCE) {
		s->group = gcd32(n, f->node_gpus);
		kind = 0;
	} else if (n <= f->node_gpus) {
		s->group = n;
		s->required = (int)f->node_level;
		kind = 1;
	} else if (n <= f->nv_gpus) {
		s->group = gcd32(n, f->node_gpus);
		s->required = (int)f->nv_level;
		kind = 2;
	} else {
		s->group = gcd32(n, f->node_gpus);
		s->slice_level = (int)f->nv_level;
		s->slice_size = largest_divisor(n, f->nv_gpus, s->group);
		if (f->nv_level > 0)
			s->preferred = (int)f->nv_level - 1;
		kind = 3;
	}
	/* Jobs of one size and class have one shape; interactive shares training's. */
	j->shape_key = (uint16_t)(kind * 4096 + (n < 4096 ? n : 4095));
}

/*
 * What moving a running job costs (seconds during which it holds GPUs and does no useful
 * work): a restart of 60 s (stop, reschedule, start the processes, join the collectives) plus
 * writing and reading back its state, 16 GB per GPU (weights, optimizer shards) at the 100 GB/s
 * a job gets from shared storage, 0.32 s per GPU: 60 s for 1 GPU, 83 s for 72, 388 s for 1,024.
 * Inference replicas restart in 30 s and reload 16 GB of weights per GPU (0.16 s per GPU).
 * Interactive jobs are never moved (0).
 */
double sim_checkpoint_s(uint32_t gpus, tp_job_class cls)
{
	if (cls == TP_CLASS_INTERACTIVE)
		return 0;
	if (cls == TP_CLASS_INFERENCE)
		return 30 + 0.16 * gpus;
	return 60 + 0.32 * gpus;
}

const char *const sim_mix_names[4] = {"llm", "philly", "openb", "tpu"};

bool sim_mix_parse(const char *name, enum sim_mix *m)
{
	for (int i = 0; i < 4; i++)
		if (!strcmp(name, sim_mix_names[i])) {
			*m = (enum sim_mix)i;
			return true;
		}
	return false;
}

static double lognormal(struct bench_rng *r, double median, double sigma, double lo, double hi)
{
	double v = median * exp(sigma * bench_rng_normal(r));
	return v < lo ? lo : v > hi ? hi : v;
}

static uint32_t cap_pow2(uint32_t n, uint32_t limit)
{
	if (n <= limit)
		return n;
	uint32_t p = 1;
	while (p * 2 <= limit)
		p *= 2;
	return p;
}

static const uint32_t gen_train_sizes[] = {1, 2, 4, 8, 16, 32, 64, 72, 128, 256, 512, 1024};
static const double gen_train_w[] = {18, 5, 14, 14, 10, 10, 10, 6, 5, 4, 3, 1};
static const uint32_t gen_rep_sizes[] = {1, 2, 4};
static const double gen_rep_w[] = {30, 20, 50};
static const uint32_t gen_rep_counts[] = {1, 2, 4, 8};
static const double gen_rep_count_w[] = {30, 30, 25, 15};
static const uint32_t gen_inter_sizes[] = {1, 2, 4, 8};
static const double gen_inter_w[] = {40, 20, 30, 10};
static const double gen_class_w[] = {75, 15, 10};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static void gen_one(struct bench_rng *r, const struct sim_fleet *f, struct sim_job *j)
{
	memset(j, 0, sizeof *j);
	size_t cls = bench_rng_weighted(r, gen_class_w, NELEM(gen_class_w));
	if (cls == 0) {
		j->cls = TP_CLASS_TRAINING;
		j->gpus = gen_train_sizes[bench_rng_weighted(r, gen_train_w, NELEM(gen_train_w))];
		j->duration_s = lognormal(r, 5400, 1.0, 300, 48 * 3600);
	} else if (cls == 1) {
		j->cls = TP_CLASS_INFERENCE;
		uint32_t rs = gen_rep_sizes[bench_rng_weighted(r, gen_rep_w, NELEM(gen_rep_w))];
		uint32_t rc = gen_rep_counts[bench_rng_weighted(r, gen_rep_count_w,
		                                                NELEM(gen_rep_count_w))];
		j->gpus = rs * rc;
		j->duration_s = lognormal(r, 4 * 3600, 0.8, 300, 48 * 3600);
	} else {
		j->cls = TP_CLASS_INTERACTIVE;
		j->gpus = gen_inter_sizes[bench_rng_weighted(r, gen_inter_w, NELEM(gen_inter_w))];
		j->duration_s = lognormal(r, 1800, 0.7, 120, 8 * 3600);
	}
}

static const uint32_t philly_sizes[] = {1, 2, 4, 8, 12, 16, 24, 32, 64, 128};
static const double philly_w[] = {76627, 1818, 1870, 1643, 7, 199, 7, 67, 6, 3};
/* Running time against a 1-GPU job's, from the trace's GPU-hours per GPU by size. */
static const double philly_scale[] = {1, 3.7, 9.4, 15.6, 12, 12, 12, 12, 12, 12};

static void gen_philly(struct bench_rng *r, struct sim_job *j)
{
	memset(j, 0, sizeof *j);
	j->cls = TP_CLASS_TRAINING;
	size_t k = bench_rng_weighted(r, philly_w, NELEM(philly_w));
	j->gpus = philly_sizes[k];
	j->duration_s = lognormal(r, 1144, 1.78, 60, 2 * 86400) * philly_scale[k];
}

static const uint32_t openb_sizes[] = {1, 2, 4, 8};
static const double openb_w[] = {6989, 16, 15, 44};
static const double openb_scale[] = {1, 2.5, 0.3, 4.8}; /* as philly_scale, from openb */

static void gen_openb(struct bench_rng *r, struct sim_job *j)
{
	memset(j, 0, sizeof *j);
	size_t k = bench_rng_weighted(r, openb_w, NELEM(openb_w));
	j->gpus = openb_sizes[k];
	j->cls = j->gpus == 1 && bench_rng_unit(r) < 0.57 ? TP_CLASS_INFERENCE : TP_CLASS_TRAINING;
	j->duration_s = lognormal(r, 492, 1.97, 30, 2 * 86400) * openb_scale[k];
}

static void gen_job(struct bench_rng *r, const struct sim_fleet *f, enum sim_mix mix,
                    struct sim_job *j)
{
	if (mix == SIM_MIX_TPU) { /* box-shaped slices (sim_torus.c) */
		sim_torus_gen_job(r, f, j);
		return;
	}
	if (mix == SIM_MIX_PHILLY)
		gen_philly(r, j);
	else if (mix == SIM_MIX_OPENB)
		gen_openb(r, j);
	else
		gen_one(r, f, j);
	j->gpus = cap_pow2(j->gpus, f->gpus);
	j->checkpoint_s = sim_checkpoint_s(j->gpus, j->cls);
	sim_job_shape(f, j);
}

int sim_workload_generate(struct sim_workload *w, const struct sim_fleet *f, enum sim_mix mix,
                          size_t njobs, double load, uint64_t seed)
{
	memset(w, 0, sizeof *w);
	if ((f->kind == FLEET_TORUS) != (mix == SIM_MIX_TPU))
		bench_die("the %s mix %s", sim_mix_names[mix], mix == SIM_MIX_TPU
		          ? "asks for boxes of chips: it runs on torus:X,Y,Z fleets only"
		          : "has no box shapes: a torus fleet takes the tpu mix (--mix tpu)");
	w->jobs = calloc(njobs ? njobs : 1, sizeof *w->jobs);
	if (!w->jobs)
		return TP_ENOMEM;
	struct bench_rng r;
	bench_rng_seed(&r, seed);
	double work = 0;
	for (size_t i = 0; i < njobs; i++) {
		gen_job(&r, f, mix, &w->jobs[i]);
		work += w->jobs[i].gpus * w->jobs[i].duration_s;
	}
	double rate = load * f->gpus / (work / (double)njobs); /* jobs per second */
	double t = 0;
	for (size_t i = 0; i < njobs; i++) {
		w->jobs[i].submit_s = floor(t);
		t += -log(1.0 - bench_rng_unit(&r)) / rate;
	}
	w->n = njobs;
	snprintf(w->source, sizeof w->source,
	         "generator (%s mix): %zu jobs, load %.2f, seed %llu, one arrival per %.1f s",
	         sim_mix_names[mix], njobs, load,
	         (unsigned long long)seed, 1.0 / rate);
	return 0;
}

static tp_job_class kind_class(const char *kind)
{
	if (!strcmp(kind, "inference") || !strcmp(kind, "LS") || !strcmp(kind, "serving"))
		return TP_CLASS_INFERENCE;
	if (!strcmp(kind, "interactive"))
		return TP_CLASS_INTERACTIVE;
	return TP_CLASS_TRAINING;
}

/* Split one CSV line in place (no quoting: the traces have none). */
static int csv_split(char *line, char **fields, int max)
{
	int n = 0;
	char *p = line;
	while (n < max) {
		fields[n++] = p;
		char *comma = strchr(p, ',');
		if (!comma)
			break;
		*comma = '\0';
		p = comma + 1;
	}
	char *nl = strpbrk(fields[n - 1], "\r\n");
	if (nl)
		*nl = '\0';
	return n;
}

/* A whole CSV field as a finite number (surrounding blanks allowed). */
static bool csv_num(const char *field, double *out)
{
	char *end;
	errno = 0;
	*out = strtod(field, &end);
	while (*end == ' ' || *end == '\t')
		end++;
	return end != field && !*end && !errno && isfinite(*out);
}

int sim_workload_read_csv(struct sim_workload *w, const struct sim_fleet *f, const char *path,
                          size_t limit)
{
	memset(w, 0, sizeof *w);
	if (f->kind == FLEET_TORUS)
		bench_die("--trace %s: a trace has no box shapes; a torus fleet takes the generator's "
		          "tpu mix", path);
	FILE *in = fopen(path, "r");
	if (!in)
		bench_die("--trace %s: %s", path, strerror(errno));
	char line[4096];
	char *fields[16];
	if (!fgets(line, sizeof line, in))
		bench_die("--trace %s: empty file", path);
	int nf = csv_split(line, fields, 16);
	int col_submit = -1, col_dur = -1, col_gpus = -1, col_kind = -1;
	for (int i = 0; i < nf; i++) {
		if (!strcmp(fields[i], "submit_s"))
			col_submit = i;
		else if (!strcmp(fields[i], "duration_s"))
			col_dur = i;
		else if (!strcmp(fields[i], "num_gpus"))
			col_gpus = i;
		else if (!strcmp(fields[i], "kind"))
			col_kind = i;
	}
	if (col_submit < 0 || col_dur < 0 || col_gpus < 0)
		bench_die("--trace %s: the header needs submit_s,duration_s,num_gpus", path);
	size_t cap = 1024;
	w->jobs = malloc(cap * sizeof *w->jobs);
	size_t lineno = 1;
	double last = -1;
	while (fgets(line, sizeof line, in) && (!limit || w->n < limit)) {
		lineno++;
		nf = csv_split(line, fields, 16);
		if (nf <= col_submit || nf <= col_dur || nf <= col_gpus)
			bench_die("%s:%zu: too few columns", path, lineno);
		struct sim_job j;
		memset(&j, 0, sizeof j);
		double g;
		if (!csv_num(fields[col_submit], &j.submit_s) || !(j.submit_s >= 0))
			bench_die("%s:%zu: submit_s '%s' is not a number >= 0", path, lineno,
			          fields[col_submit]);
		if (!csv_num(fields[col_dur], &j.duration_s) || !(j.duration_s >= 0))
			bench_die("%s:%zu: duration_s '%s' is not a number >= 0", path, lineno,
			          fields[col_dur]);
		if (!csv_num(fields[col_gpus], &g) || !(g >= 1) || g > 1e7 || g != floor(g))
			bench_die("%s:%zu: num_gpus '%s' is not a whole number in 1..10000000", path,
			          lineno, fields[col_gpus]);
		if (j.submit_s < last)
			bench_die("%s:%zu: rows must be sorted by submit_s", path, lineno);
		last = j.submit_s;
		j.gpus = (uint32_t)g;
		if (j.duration_s < 1)
			j.duration_s = 1; /* a zero-length job still passes through the scheduler */
		j.cls = col_kind >= 0 && nf > col_kind ? kind_class(fields[col_kind])
		                                       : TP_CLASS_TRAINING;
		j.checkpoint_s = sim_checkpoint_s(j.gpus, j.cls);
		if (j.gpus > f->gpus) {
			w->dropped++;
			continue;
		}
		sim_job_shape(f, &j);
		if (w->n == cap) {
			cap *= 2;
			w->jobs = realloc(w->jobs, cap * sizeof *w->jobs);
		}
		if (!w->jobs)
			bench_die("out of memory");
		w->jobs[w->n++] = j;
	}
	fclose(in);
	const char *base = strrchr(path, '/');
	snprintf(w->source, sizeof w->source, "trace %s: %zu jobs (%zu larger than the fleet "
	         "skipped)", base ? base + 1 : path, w->n, w->dropped);
	return 0;
}

const char *const sim_size_class_names[SIM_SIZE_CLASSES] = {
	"1", "2", "3-4", "5-8", "9-72", "73-127", "128-1023", "1024+"};

static int size_class(uint32_t g)
{
	return g <= 1 ? 0 : g == 2 ? 1 : g <= 4 ? 2 : g <= 8 ? 3 : g <= 72 ? 4 : g <= 127 ? 5
	       : g <= 1023 ? 6 : 7;
}

void sim_size_shares(const struct sim_workload *w, double *jobs, double *gpuh)
{
	double tj = 0, tg = 0;
	for (int k = 0; k < SIM_SIZE_CLASSES; k++)
		jobs[k] = gpuh[k] = 0;
	for (size_t i = 0; i < w->n; i++) {
		int k = size_class(w->jobs[i].gpus);
		double g = (double)w->jobs[i].gpus * w->jobs[i].duration_s;
		jobs[k] += 1;
		gpuh[k] += g;
		tj += 1;
		tg += g;
	}
	for (int k = 0; k < SIM_SIZE_CLASSES; k++) {
		jobs[k] = tj > 0 ? jobs[k] / tj : 0;
		gpuh[k] = tg > 0 ? gpuh[k] / tg : 0;
	}
}

void sim_print_mix(FILE *out, const struct sim_workload *w)
{
	double jobs[SIM_SIZE_CLASSES], gpuh[SIM_SIZE_CLASSES];
	sim_size_shares(w, jobs, gpuh);
	fprintf(out, "job sizes (GPUs: share of jobs / of GPU-hours):");
	for (int k = 0; k < SIM_SIZE_CLASSES; k++)
		if (jobs[k] > 0)
			fprintf(out, " %s: %.1f%% / %.1f%%;", sim_size_class_names[k], jobs[k] * 100,
			        gpuh[k] * 100);
	fputc('\n', out);
}

void sim_workload_free(struct sim_workload *w)
{
	free(w->jobs);
	w->jobs = NULL;
	w->n = 0;
}
