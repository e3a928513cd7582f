/* SPDX-License-Identifier: MIT */
/* Helpers shared by the tp-bench subcommands (see bench.h). */
#include "bench.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

uint64_t bench_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- random numbers ------------------------------------------------------------------------ */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15u);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
	return z ^ (z >> 31);
}

void bench_rng_seed(struct bench_rng *r, uint64_t seed)
{
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t bench_rng_next(struct bench_rng *r)
{
	uint64_t *s = r->s;
	uint64_t out = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return out;
}

uint64_t bench_rng_below(struct bench_rng *r, uint64_t n)
{
	if (n <= 1)
		return 0;
	uint64_t limit = UINT64_MAX - UINT64_MAX % n;
	uint64_t x;
	do
		x = bench_rng_next(r);
	while (x >= limit);
	return x % n;
}

double bench_rng_unit(struct bench_rng *r)
{
	return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double bench_rng_normal(struct bench_rng *r)
{
	double u1 = bench_rng_unit(r), u2 = bench_rng_unit(r);
	if (u1 < 1e-300)
		u1 = 1e-300;
	return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

size_t bench_rng_weighted(struct bench_rng *r, const double *w, size_t n)
{
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += w[i];
	double x = bench_rng_unit(r) * sum;
	for (size_t i = 0; i < n; i++) {
		if (x < w[i])
			return i;
		x -= w[i];
	}
	return n - 1;
}

/* ---- statistics ---------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_quantile(double *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof *v, cmp_double);
	size_t k = (size_t)ceil(p * (double)n);
	if (k == 0)
		k = 1;
	if (k > n)
		k = n;
	return v[k - 1];
}

double bench_mean(const double *v, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += v[i];
	return n ? s / (double)n : 0;
}

/* ---- JSON ---------------------------------------------------------------------------------- */

int bench_json_open(struct bench_json *j, const char *path)
{
	memset(j, 0, sizeof *j);
	if (!path)
		return 0;
	j->f = fopen(path, "w");
	return j->f ? 0 : -1;
}

int bench_json_close(struct bench_json *j)
{
	if (!j->f)
		return 0;
	fputc('\n', j->f);
	int rc = fclose(j->f);
	j->f = NULL;
	return rc;
}

static void json_key(struct bench_json *j, const char *key)
{
	if (!j->f)
		return;
	if (j->need_comma[j->depth])
		fputc(',', j->f);
	j->need_comma[j->depth] = true;
	if (j->depth > 0) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	if (key)
		fprintf(j->f, "\"%s\": ", key);
}

static void json_open(struct bench_json *j, const char *key, char c)
{
	json_key(j, key);
	if (j->f)
		fputc(c, j->f);
	j->depth++;
	j->need_comma[j->depth] = false;
}

static void json_close(struct bench_json *j, char c)
{
	bool had = j->need_comma[j->depth];
	j->depth--;
	if (!j->f)
		return;
	if (had) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	fputc(c, j->f);
}

void bench_json_obj(struct bench_json *j, const char *key) { json_open(j, key, '{'); }
void bench_json_arr(struct bench_json *j, const char *key) { json_open(j, key, '['); }
void bench_json_end_obj(struct bench_json *j) { json_close(j, '}'); }
void bench_json_end_arr(struct bench_json *j) { json_close(j, ']'); }

void bench_json_num(struct bench_json *j, const char *key, double v)
{
	json_key(j, key);
	if (!j->f)
		return;
	if (isfinite(v))
		fprintf(j->f, "%.10g", v);
	else
		fputs("null", j->f);
}

void bench_json_int(struct bench_json *j, const char *key, long long v)
{
	json_key(j, key);
	if (j->f)
		fprintf(j->f, "%lld", v);
}

void bench_json_str(struct bench_json *j, const char *key, const char *v)
{
	json_key(j, key);
	if (!j->f)
		return;
	fputc('"', j->f);
	for (const char *p = v; *p; p++) {
		if (*p == '"' || *p == '\\')
			fputc('\\', j->f);
		if ((unsigned char)*p >= 0x20)
			fputc(*p, j->f);
	}
	fputc('"', j->f);
}

void bench_json_bool(struct bench_json *j, const char *key, bool v)
{
	json_key(j, key);
	if (j->f)
		fputs(v ? "true" : "false", j->f);
}

/* ---- fleets -------------------------------------------------------------------------------- */

void bench_nvl72_shape(uint64_t gpus, unsigned *blocks, unsigned *racks_per_block)
{
	uint64_t want = (gpus + NVL72_RACK_GPUS / 2) / NVL72_RACK_GPUS;
	if (want < 1)
		want = 1;
	if (want < 8) {
		*blocks = 1;
		*racks_per_block = (unsigned)want;
		return;
	}
	uint64_t best_err = UINT64_MAX;
	for (unsigned rpb = 16; rpb >= 8; rpb--) {
		uint64_t b = (want + rpb / 2) / rpb;
		if (b < 1)
			b = 1;
		uint64_t racks = b * rpb;
		uint64_t err = racks > want ? racks - want : want - racks;
		if (err < best_err) {
			best_err = err;
			*blocks = (unsigned)b;
			*racks_per_block = rpb;
		}
	}
}

void bench_hgx_shape(uint64_t gpus, unsigned *units, unsigned *nodes_per_unit)
{
	uint64_t per = (uint64_t)HGX_NODE_GPUS * HGX_SU_NODES;
	uint64_t u = (gpus + per / 2) / per;
	if (u >= 1) {
		*units = (unsigned)u;
		*nodes_per_unit = HGX_SU_NODES;
		return;
	}
	*units = 1; /* below one unit: one unit of as many nodes as asked */
	uint64_t n = (gpus + HGX_NODE_GPUS - 1) / HGX_NODE_GPUS;
	*nodes_per_unit = n ? (unsigned)n : 1;
}

/* A node type of 4 GPUs whose nodes use the given fabric (and, for NVLink, that figure between
 * every pair of GPUs). */
static int mixed_type(tp_nodetype **out, tp_link_kind kind, double gbps, double latency_us)
{
	int rc = tp_nodetype_create(out, NVL72_NODE_GPUS, NULL);
	if (!rc)
		rc = tp_nodetype_set_fabric(*out, kind, gbps, latency_us);
	for (unsigned a = 0; !rc && kind == TP_LINK_NVLINK && a < NVL72_NODE_GPUS; a++)
		for (unsigned b = a + 1; !rc && b < NVL72_NODE_GPUS; b++)
			rc = tp_nodetype_set_nvlink(*out, a, b, gbps);
	if (rc) {
		tp_nodetype_destroy(*out);
		*out = NULL;
	}
	return rc;
}

/* Rack r of a mixed block: 0-3 NVL72, 4-5 HGX, 6-7 PCIe-only. */
#define MIXED_RACKS 8u

static int mixed_racks(tp_topology_builder *b, unsigned blocks, const tp_nodetype *hgx,
                       const tp_nodetype *pcie)
{
	int rc = 0;
	for (unsigned bl = 0; !rc && bl < blocks; bl++)
		for (unsigned r = 0; !rc && r < MIXED_RACKS; r++) {
			char block[16], rack[16], name[48];
			snprintf(block, sizeof block, "block%u", bl);
			snprintf(rack, sizeof rack, "%s%u", r < 4 ? "nvl" : r < 6 ? "hgx" : "pcie", r);
			const char *path[2] = {block, rack};
			tp_node_options o = TP_NODE_OPTIONS_INIT;
			o.model = r < 4 ? "GB200" : r < 6 ? "H100" : "L4";
			o.memory_gb = r < 4 ? 186 : r < 6 ? 80 : 24;
			o.type = r < 4 ? NULL : r < 6 ? hgx : pcie;
			for (unsigned n = 0; !rc && n < NVL72_RACK_NODES; n++) {
				snprintf(name, sizeof name, "%s-%s-node%u", block, rack, n);
				rc = tp_topology_builder_add_node(b, name, path, NVL72_NODE_GPUS, &o);
			}
			if (!rc && r < 4) {
				char dom[40];
				snprintf(dom, sizeof dom, "%s/%s", block, rack);
				rc = tp_topology_builder_set_domain_fabric(b, 1, dom, TP_LINK_NVLINK, 900, 3.4);
			}
		}
	return rc;
}

int bench_mixed_fleet(tp_topology **out, uint64_t gpus, unsigned *blocks)
{
	static const char *const levels[] = {"block", "rack", "node"};
	const uint64_t per = (uint64_t)MIXED_RACKS * NVL72_RACK_GPUS;
	*blocks = (unsigned)((gpus + per / 2) / per);
	*blocks = *blocks ? *blocks : 1;
	tp_topology_builder *b = NULL;
	tp_nodetype *hgx = NULL, *pcie = NULL;
	int rc = tp_topology_builder_create(&b, levels, 3, NULL);
	if (!rc)
		rc = mixed_type(&hgx, TP_LINK_NVLINK, 450, 3.0);
	if (!rc)
		rc = mixed_type(&pcie, TP_LINK_PCIE, 32, 5.0);
	/* node level: the GB200 trays' NVLink; racks: InfiniBand unless the rack is an NVL72 */
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 2, TP_LINK_NVLINK, 900, 3.4);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 1, TP_LINK_IB, 50, 10);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, 0, TP_LINK_IB, 50, 14);
	if (!rc)
		rc = tp_topology_builder_set_fabric(b, TP_LEVEL_CLUSTER, TP_LINK_IB, 25, 20);
	if (!rc)
		rc = tp_topology_builder_set_limits(b, TP_LIMIT_MAX_DEVICES, TP_LIMIT_MAX_DEVICES);
	if (!rc)
		rc = mixed_racks(b, *blocks, hgx, pcie);
	if (!rc)
		rc = tp_topology_build(b, out);
	tp_nodetype_destroy(hgx);
	tp_nodetype_destroy(pcie);
	tp_topology_builder_destroy(b);
	return rc;
}

int bench_parse_sizes(const char *s, uint64_t *out, int max)
{
	int n = 0;
	const char *p = s;
	while (*p) {
		char *end;
		errno = 0;
		double v = strtod(p, &end);
		if (end == p || errno || v < 1 || v > 4e9 || n >= max)
			return -1;
		out[n++] = (uint64_t)llround(v);
		if (*end == ',')
			end++;
		else if (*end)
			return -1;
		p = end;
	}
	return n;
}

uint64_t bench_arg_uint(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (end == s || *end || errno || *s == '-')
		bench_die("%s: '%s' is not a whole number >= 0", opt, s);
	return (uint64_t)v;
}

unsigned bench_arg_u32(const char *opt, const char *s)
{
	uint64_t v = bench_arg_uint(opt, s);
	if (v > UINT32_MAX)
		bench_die("%s: '%s' is above %u", opt, s, (unsigned)UINT32_MAX);
	return (unsigned)v;
}

double bench_arg_num(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v))
		bench_die("%s: '%s' is not a finite number", opt, s);
	return v;
}

/* ---- occupancy fill ------------------------------------------------------------------------ */

unsigned bench_node_free_devices(const tp_cluster *c, uint32_t node, uint32_t *out,
                                 unsigned max)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t first, n;
	if (tp_topology_domain_devices(t, tp_topology_level_count(t) - 1, node, &first, &n) < 0)
		return 0;
	unsigned k = 0;
	for (uint32_t d = first; d < first + n && k < max; d++)
		if (tp_cluster_device_state(c, d, NULL) == TP_DEVICE_FREE)
			out[k++] = d;
	return k;
}

/* The mix of the fill: job sizes in GPUs and their weights (share of jobs). */
static const uint32_t fill_sizes[] = {1, 2, 4, 8, 16, 32, 64, 72, 128, 256, 512, 1024};
static const double fill_weights[] = {24, 6, 20, 14, 9, 8, 7, 5, 3, 2, 1.3, 0.7};
#define FILL_NSIZES (sizeof fill_sizes / sizeof fill_sizes[0])

/* A random node (not in a reserved rack) with at least k free devices, or TP_NONE. Random
 * probes first, then a scan from a random start, so that a full cluster ends the search. */
static uint32_t fill_pick_node(const tp_cluster *c, struct bench_rng *rng, const bool *reserved,
                               unsigned k)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t nn = tp_topology_node_count(t);
	for (int probe = 0; probe < 64; probe++) {
		uint32_t n = (uint32_t)bench_rng_below(rng, nn);
		if (!reserved[tp_topology_node_domain(t, n, NVL_RACK)] &&
		    tp_cluster_free_count(c, NVL_NODE, n) >= k)
			return n;
	}
	uint32_t start = (uint32_t)bench_rng_below(rng, nn);
	for (uint32_t i = 0; i < nn; i++) {
		uint32_t n = (start + i) % nn;
		if (!reserved[tp_topology_node_domain(t, n, NVL_RACK)] &&
		    tp_cluster_free_count(c, NVL_NODE, n) >= k)
			return n;
	}
	return TP_NONE;
}

/* A random unreserved rack not yet in used[0..nused) with at least k wholly free nodes. */
static uint32_t fill_pick_rack(const tp_cluster *c, struct bench_rng *rng, const bool *reserved,
                               unsigned k, const uint32_t *used, unsigned nused)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t nr = tp_topology_domain_count(t, NVL_RACK);
	uint32_t start = (uint32_t)bench_rng_below(rng, nr);
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t r = (start + i) % nr;
		if (reserved[r] || tp_cluster_free_node_count(c, NVL_RACK, r) < k)
			continue;
		bool taken = false;
		for (unsigned u = 0; u < nused; u++)
			taken |= used[u] == r;
		if (!taken)
			return r;
	}
	return TP_NONE;
}

/* Append k wholly free nodes of rack r (from a random offset) to devs. */
static size_t fill_take_nodes(const tp_cluster *c, struct bench_rng *rng, uint32_t r, unsigned k,
                              uint32_t *devs, size_t ndev)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t first, n;
	tp_topology_domain_nodes(t, NVL_RACK, r, &first, &n);
	uint32_t off = (uint32_t)bench_rng_below(rng, n);
	for (uint32_t i = 0; i < n && k > 0; i++) {
		uint32_t node = first + (off + i) % n;
		if (tp_cluster_free_count(c, NVL_NODE, node) != NVL72_NODE_GPUS)
			continue;
		ndev += bench_node_free_devices(c, node, devs + ndev, NVL72_NODE_GPUS);
		k--;
	}
	return ndev;
}

/* Devices for one job of `size` GPUs at a random free position; 0 when none was found. */
static size_t fill_job_devices(const tp_cluster *c, struct bench_rng *rng, const bool *reserved,
                               uint32_t size, uint32_t *devs)
{
	if (size <= NVL72_NODE_GPUS) {
		uint32_t node = fill_pick_node(c, rng, reserved, size);
		if (node == TP_NONE)
			return 0;
		return bench_node_free_devices(c, node, devs, size);
	}
	if (size <= NVL72_RACK_GPUS) {
		unsigned k = size / NVL72_NODE_GPUS;
		uint32_t r = fill_pick_rack(c, rng, reserved, k, NULL, 0);
		return r == TP_NONE ? 0 : fill_take_nodes(c, rng, r, k, devs, 0);
	}
	unsigned nracks = size / 64, per = 64 / NVL72_NODE_GPUS;
	uint32_t used[16];
	size_t ndev = 0;
	for (unsigned i = 0; i < nracks; i++) {
		used[i] = fill_pick_rack(c, rng, reserved, per, used, i);
		if (used[i] == TP_NONE)
			return 0;
	}
	for (unsigned i = 0; i < nracks; i++)
		ndev = fill_take_nodes(c, rng, used[i], per, devs, ndev);
	return ndev;
}

void bench_fill_init(struct bench_fill *f, const tp_cluster *c, struct bench_rng *rng,
                     double reserve)
{
	const tp_topology *t = tp_cluster_topology(c);
	f->nracks = tp_topology_domain_count(t, NVL_RACK);
	f->reserved = calloc(f->nracks, sizeof *f->reserved);
	f->devs = malloc(1024 * sizeof *f->devs);
	f->next_id = 0;
	f->ends = false;
	if (!f->reserved || !f->devs)
		bench_die("out of memory");
	uint32_t nres = (uint32_t)(reserve * f->nracks);
	if (reserve > 0 && nres < 4)
		nres = f->nracks >= 8 ? 4 : 0;
	for (uint32_t i = 0; i < nres;) {
		uint32_t r = (uint32_t)bench_rng_below(rng, f->nracks);
		if (!f->reserved[r]) {
			f->reserved[r] = true;
			i++;
		}
	}
}

long bench_fill_to(struct bench_fill *f, tp_cluster *c, struct bench_rng *rng, double target)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint64_t total = tp_topology_device_count(t);
	uint64_t want = (uint64_t)(target * (double)total);
	long jobs = 0;
	int misses = 0;
	char id[32];
	while (total - tp_cluster_free_total_count(c) < want && misses < 1000) {
		uint32_t size = fill_sizes[bench_rng_weighted(rng, fill_weights, FILL_NSIZES)];
		size_t n = fill_job_devices(c, rng, f->reserved, size, f->devs);
		if (n < size) {
			misses++; /* no room for this size any more: another size may fit */
			continue;
		}
		snprintf(id, sizeof id, "fill-%ld", f->next_id++);
		tp_request shape = TP_REQUEST_INIT;
		shape.count = size;
		shape.expected_end_s = f->ends ? 1.0 + (double)bench_rng_below(rng, 1000000) : 0;
		tp_job_options o = TP_JOB_OPTIONS_INIT;
		o.shape = &shape;
		int rc = tp_cluster_assign(c, id, f->devs, size, f->ends ? &o : NULL);
		if (rc < 0)
			return rc;
		jobs++;
	}
	return jobs;
}

void bench_fill_fini(struct bench_fill *f)
{
	free(f->reserved);
	free(f->devs);
	f->reserved = NULL;
	f->devs = NULL;
}

double bench_loadavg(void)
{
	FILE *f = fopen("/proc/loadavg", "r");
	double v = -1;
	if (!f)
		return -1;
	if (fscanf(f, "%lf", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* ---- messages ------------------------------------------------------------------------------ */

bool bench_stderr_tty(void)
{
	return isatty(STDERR_FILENO);
}

void bench_progress(bool done, const char *fmt, ...)
{
	bool tty = isatty(STDERR_FILENO);
	if (!tty && !done)
		return; /* a log file gets the final lines only */
	va_list ap;
	va_start(ap, fmt);
	if (tty)
		fputs("\r\033[K", stderr);
	vfprintf(stderr, fmt, ap);
	if (done)
		fputc('\n', stderr);
	fflush(stderr);
	va_end(ap);
}

void bench_die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tp-bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

/* ---- scenario fleets (--fleet scenario:FILE) ---------------------------------------------- */

#ifdef TP_BENCH_SCENARIO
#include "topoplace-scenario.h"

/* The whole of a file into a malloc'ed buffer, or NULL with errno set. */
static char *bench_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		n += fread(buf + n, 1, cap - n, f);
		if (n < cap)
			break;
		char *bigger = realloc(buf, cap *= 2);
		if (!bigger)
			free(buf);
		buf = bigger;
	}
	int saved = buf ? 0 : ENOMEM;
	if (buf && ferror(f)) { /* a directory: fopen() succeeds, reading fails with EISDIR */
		saved = errno ? errno : EIO;
		free(buf);
		buf = NULL;
	}
	fclose(f);
	errno = saved;
	*len = n;
	return buf;
}

/* A node's hwloc file, relative to the scenario's folder; kept until the import returns. */
struct bench_files {
	const char *dir;
	char *bufs[64];
	size_t n;
};

static int bench_read_hwloc(void *ud, const char *path, const void **data, size_t *len,
                            char *why, size_t whylen)
{
	struct bench_files *fs = ud;
	char full[4096];
	snprintf(full, sizeof full, "%s%s%s", path[0] == '/' ? "" : fs->dir,
	         path[0] == '/' ? "" : "/", path);
	if (fs->n == sizeof fs->bufs / sizeof *fs->bufs) {
		snprintf(why, whylen, "more than %zu hwloc files", fs->n);
		return -1;
	}
	char *buf = bench_read_file(full, len);
	if (!buf) {
		snprintf(why, whylen, "%s", strerror(errno));
		return -1;
	}
	fs->bufs[fs->n++] = buf;
	*data = buf;
	return 0;
}
#endif

tp_topology *bench_scenario_topology(const char *path, char *err, size_t errlen)
{
#ifdef TP_BENCH_SCENARIO
	size_t len;
	char *text = bench_read_file(path, &len);
	if (!text) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		return NULL;
	}
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir] = '\0'; /* "/x.json" keeps "/" */
	else
		snprintf(dir, sizeof dir, ".");
	struct bench_files fs = {.dir = dir};
	tp_scenario_options o = TP_SCENARIO_OPTIONS_INIT;
	o.read_file = bench_read_hwloc;
	o.ud = &fs;
	tp_scenario *s = NULL;
	tp_topology *t = NULL;
	if (tp_scenario_from_json(&s, text, len, &o, err, errlen) == 0)
		tp_scenario_topology_take(s, &t);
	tp_scenario_destroy(s);
	for (size_t i = 0; i < fs.n; i++)
		free(fs.bufs[i]);
	free(text);
	return t;
#else
	(void)path;
	snprintf(err, errlen, "this build has no scenario importer (jansson was not found)");
	return NULL;
#endif
}

bool bench_list_has(const char *list, const char *name)
{
	if (!list)
		return true;
	size_t len = strlen(name);
	for (const char *p = list; *p;) {
		const char *e = strchr(p, ',');
		size_t l = e ? (size_t)(e - p) : strlen(p);
		if (l == len && !strncmp(p, name, len))
			return true;
		p += l + (e ? 1 : 0);
	}
	return false;
}
