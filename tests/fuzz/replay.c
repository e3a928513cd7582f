/* SPDX-License-Identifier: MIT */
/*
 * Replays saved fuzz inputs without a fuzzing engine: every regular file in each directory
 * given on the command line (in name order, so runs are reproducible) is fed to the target's
 * LLVMFuzzerTestOneInput(), except the known-* reproducers of bugs still open
 * (corpus/README.md), which are counted and named but not run. A file given on the command
 * line is replayed whatever its name, so one known-* input can be tried by hand. A crash or
 * abort fails the test; an empty corpus fails too, so a wrong path cannot pass silently.
 */
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#ifdef FZ_TRACE
#define FZ_TRACE_FILE(name) fprintf(stderr, "== %s\n", name)
#else
#define FZ_TRACE_FILE(name) ((void)0)
#endif

/* Reproducers of open bugs: kept in the corpus, not replayed until renamed fixed-*. */
static bool is_known(const char *name) { return strncmp(name, "known-", 6) == 0; }

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The contents of a file, or NULL. */
static uint8_t *read_all(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	uint8_t *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		uint8_t *more = realloc(buf, cap * 2);
		if (!more) {
			free(buf);
			buf = NULL;
			break;
		}
		buf = more;
		cap *= 2;
	}
	fclose(f);
	*len = n;
	return buf;
}

/* Replay one file; returns 1, or -1 when it cannot be read. */
static long replay_file(const char *path)
{
	size_t len = 0;
	uint8_t *data = read_all(path, &len);
	if (!data) {
		fprintf(stderr, "replay: cannot read %s\n", path);
		return -1;
	}
	FZ_TRACE_FILE(path);
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 1;
}

/* Replay every regular file of one directory but the known-* ones (counted in *known);
 * returns the count, or -1 on an I/O error. */
static long replay_dir(const char *dir, long *known)
{
	DIR *d = opendir(dir);
	if (!d) {
		fprintf(stderr, "replay: cannot open %s\n", dir);
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (e->d_name[0] == '.')
			continue;
		if (is_known(e->d_name)) {
			printf("replay: not replayed (open bug): %s/%s\n", dir, e->d_name);
			++*known;
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **more = realloc(names, cap * sizeof *names);
			if (!more)
				break;
			names = more;
		}
		names[n] = malloc(strlen(dir) + strlen(e->d_name) + 2);
		if (!names[n])
			break;
		sprintf(names[n], "%s/%s", dir, e->d_name);
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof *names, by_name);
	long done = 0;
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			long r = replay_file(names[i]);
			done = r < 0 || done < 0 ? -1 : done + r;
		}
		free(names[i]);
	}
	free(names);
	return done;
}

int main(int argc, char **argv)
{
	long total = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		long known = 0;
		bool file = stat(argv[i], &st) == 0 && S_ISREG(st.st_mode);
		long n = file ? replay_file(argv[i]) : replay_dir(argv[i], &known);
		if (n < 0)
			return 1;
		printf("replay: %ld input(s) from %s", n, argv[i]);
		if (known)
			printf(" (%ld known-* reproducer(s) of open bugs not replayed)", known);
		printf("\n");
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "replay: no input replayed (usage: replay DIR|FILE...)\n");
		return 1;
	}
	return 0;
}
