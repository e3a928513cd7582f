/* SPDX-License-Identifier: MIT */
/*
 * The soak: runs a fuzz target (fuzz_api: random topologies, then up to 48 API calls each,
 * every call checked against the reference model, a failed call checked to leave the state
 * unchanged, no leak at the end of an input) on a stream of inputs derived from its corpus for
 * a fixed time or number of inputs, without a fuzzing engine, and reports how much ran and how
 * the process's memory behaved:
 *
 *   soak_api [-s SEED] [-t SECONDS] [-n INPUTS] CORPUS_DIR
 *
 * Each input is a corpus file picked by a seeded xorshift generator, with 1 to 8 random bytes
 * changed and, one time in four, up to 64 random bytes appended (the same seed gives the same
 * inputs). Every 60 s and at the end it prints the inputs run, the API calls they made
 * (fz_soak_ops, counted by the target), and the resident set size (current and peak). A
 * failed check aborts; the input that did it is written to soak-crash-SEED first.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern unsigned long long fz_soak_ops;

#define MAX_SEEDS 4096
#define MAX_INPUT 65536

static uint8_t *seeds[MAX_SEEDS];
static size_t seed_len[MAX_SEEDS], nseeds;
static uint8_t cur[MAX_INPUT + 64];
static size_t cur_len;
static char crash_path[64];

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void on_crash(int sig)
{
	int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd >= 0) {
		ssize_t w = write(fd, cur, cur_len);
		(void)w;
		close(fd);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of dir but the known-* ones, in name order. */
static int load(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return -1;
	char *names[MAX_SEEDS];
	size_t n = 0;
	for (struct dirent *e; (e = readdir(d)) && n < MAX_SEEDS;)
		if (e->d_name[0] != '.' && strncmp(e->d_name, "known-", 6) != 0 &&
		    strcmp(e->d_name, "README.md") != 0)
			names[n++] = strdup(e->d_name);
	closedir(d);
	qsort(names, n, sizeof *names, by_name);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		free(names[i]);
		FILE *f = fopen(path, "rb");
		if (!f)
			continue;
		uint8_t *buf = malloc(MAX_INPUT);
		size_t len = buf ? fread(buf, 1, MAX_INPUT, f) : 0;
		fclose(f);
		if (!buf)
			return -1;
		seeds[nseeds] = buf;
		seed_len[nseeds++] = len;
	}
	return nseeds ? 0 : -1;
}

static void mutate(void)
{
	size_t k = next() % nseeds;
	cur_len = seed_len[k];
	memcpy(cur, seeds[k], cur_len);
	if (next() % 4 == 0)
		for (size_t a = next() % 65; a > 0; a--)
			cur[cur_len++] = (uint8_t)next();
	if (cur_len)
		for (unsigned m = 1 + next() % 8; m > 0; m--)
			cur[next() % cur_len] = (uint8_t)next();
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static long rss_kb(void)
{
	long pages = 0, rss = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f) {
		if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static void report(double t0, unsigned long long inputs)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("soak: %.0f s, %llu inputs, %llu API calls, rss %ld KB (peak %ld KB)\n",
	       now_s() - t0, inputs, fz_soak_ops, rss_kb(), ru.ru_maxrss);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	unsigned long long seed = 1, limit = 0;
	double seconds = 0;
	int opt;
	while ((opt = getopt(argc, argv, "s:t:n:")) != -1) {
		if (opt == 's')
			seed = strtoull(optarg, NULL, 10);
		else if (opt == 't')
			seconds = strtod(optarg, NULL);
		else if (opt == 'n')
			limit = strtoull(optarg, NULL, 10);
		else
			return 2;
	}
	if (optind + 1 != argc || (!seconds && !limit)) {
		fprintf(stderr, "usage: %s [-s SEED] [-t SECONDS] [-n INPUTS] CORPUS_DIR\n", argv[0]);
		return 2;
	}
	if (load(argv[optind])) {
		fprintf(stderr, "soak: no input in %s\n", argv[optind]);
		return 1;
	}
	rng ^= seed * 0x2545f4914f6cdd1du;
	snprintf(crash_path, sizeof crash_path, "soak-crash-%llu", seed);
	signal(SIGABRT, on_crash);
	signal(SIGSEGV, on_crash);
	printf("soak: %zu seeds, seed %llu\n", nseeds, seed);
	double t0 = now_s(), last = t0;
	unsigned long long inputs = 0;
	while ((!limit || inputs < limit) && (!seconds || now_s() - t0 < seconds)) {
		mutate();
		LLVMFuzzerTestOneInput(cur, cur_len);
		inputs++;
		if (now_s() - last >= 60) {
			last = now_s();
			report(t0, inputs);
		}
	}
	report(t0, inputs);
	for (size_t i = 0; i < nseeds; i++)
		free(seeds[i]);
	return 0;
}
