/* SPDX-License-Identifier: MIT */
/*
 * Workloads of the simulator: the bundled generator, the CSV trace reader, and the shape every
 * job asks for.
 *
 * The bundled generator (needs nothing outside the repository), per job:
 *   class:       training 75%, inference 15%, interactive 10%;
 *   training:    GPUs 1 (18%), 2 (5%), 4 (14%), 8 (14%), 16 (10%), 32 (10%), 64 (10%),
 *                72 (6%), 128 (5%), 256 (4%), 512 (3%), 1024 (1%); running time log-normal,
 *                median 1.5 h, sigma 1.0, clamped to [5 min, 48 h]; checkpoint 60 s, 120 s
 *                from 64 GPUs up;
 *   inference:   replicas of 1 (30%), 2 (20%) or 4 (50%) GPUs, 1 (30%), 2 (30%), 4 (25%) or
 *                8 (15%) replicas; median 4 h, sigma 0.8; checkpoint 30 s;
 *   interactive: GPUs 1 (40%), 2 (20%), 4 (30%), 8 (10%); median 30 min, sigma 0.7;
 *   sizes above the fleet are capped to the largest power of two that fits;
 *   arrivals:    Poisson, at a rate that offers `load` (default 1.15) times the fleet's GPU
 *                hours: rate = load x GPUs / mean(GPUs x running time) of the generated jobs,
 *                so the queue stays non-empty and the fleet saturated.
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
 *   - inference: replicas of gcd(size, node) GPUs, each a group inside one node, spread over
 *     at least min(replicas, NVLink domains) NVLink domains (HGX: nodes);
 *   - interactive jobs are shaped as training (they are never moved).
 */
void sim_job_shape(const struct sim_fleet *f, struct sim_job *j)
{
	struct sim_shape *s = &j->shape;
	uint32_t n = j->gpus;
	*s = (struct sim_shape){.group = 1, .required = -1, .preferred = -1, .slice_level = -1,
	                        .spread_level = -1};
	uint32_t nv_domains = tp_topology_domain_count(f->t, f->nv_level);
	unsigned kind;
	if (j->cls == TP_CLASS_INFERENCE) {
		s->group = gcd32(n, f->node_gpus);
		uint32_t replicas = n / s->group;
		if (replicas > 1) {
			s->spread_level = (int)f->nv_level;
			s->spread_min = replicas < nv_domains ? replicas : nv_domains;
		}
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
		j->checkpoint_s = j->gpus >= 64 ? 120 : 60;
	} else if (cls == 1) {
		j->cls = TP_CLASS_INFERENCE;
		uint32_t rs = gen_rep_sizes[bench_rng_weighted(r, gen_rep_w, NELEM(gen_rep_w))];
		uint32_t rc = gen_rep_counts[bench_rng_weighted(r, gen_rep_count_w,
		                                                NELEM(gen_rep_count_w))];
		j->gpus = rs * rc;
		j->duration_s = lognormal(r, 4 * 3600, 0.8, 300, 48 * 3600);
		j->checkpoint_s = 30;
	} else {
		j->cls = TP_CLASS_INTERACTIVE;
		j->gpus = gen_inter_sizes[bench_rng_weighted(r, gen_inter_w, NELEM(gen_inter_w))];
		j->duration_s = lognormal(r, 1800, 0.7, 120, 8 * 3600);
		j->checkpoint_s = 0;
	}
	j->gpus = cap_pow2(j->gpus, f->gpus);
	sim_job_shape(f, j);
}

int sim_workload_generate(struct sim_workload *w, const struct sim_fleet *f, size_t njobs,
                          double load, uint64_t seed)
{
	memset(w, 0, sizeof *w);
	w->jobs = calloc(njobs ? njobs : 1, sizeof *w->jobs);
	if (!w->jobs)
		return TP_ENOMEM;
	struct bench_rng r;
	bench_rng_seed(&r, seed);
	double work = 0;
	for (size_t i = 0; i < njobs; i++) {
		gen_one(&r, f, &w->jobs[i]);
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
	         "generator: %zu jobs, load %.2f, seed %llu, one arrival per %.1f s", njobs, load,
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
		j.checkpoint_s = j.cls == TP_CLASS_INTERACTIVE ? 0 : j.gpus >= 64 ? 120 : 60;
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

void sim_workload_free(struct sim_workload *w)
{
	free(w->jobs);
	w->jobs = NULL;
	w->n = 0;
}
