/* SPDX-License-Identifier: MIT */
/*
 * The reference model of the fuzz targets (refmodel.h). Every figure is recounted by walking
 * devices, never kept incrementally: slow on purpose, so that it is easy to believe.
 */
#include "refmodel.h"

#include "testutil.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fz_fail(const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s:%d: fuzz check failed: ", file, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	abort();
}

/* ---- the allocator under test ------------------------------------------------------------- */

size_t fz_big_alloc;

static bool too_big(size_t n, size_t size)
{
	if (size && n > FZ_MAX_ALLOC / size) {
		fz_big_alloc = n * size > fz_big_alloc ? n * size : fz_big_alloc;
		if (n > SIZE_MAX / size)
			fz_big_alloc = SIZE_MAX;
		return true;
	}
	return false;
}

static void *fz_malloc(void *ud, size_t size)
{
	return too_big(1, size) ? NULL : tp_test_allocator.malloc(ud, size);
}

static void *fz_calloc(void *ud, size_t n, size_t size)
{
	return too_big(n, size) ? NULL : tp_test_allocator.calloc(ud, n, size);
}

static void *fz_realloc(void *ud, void *p, size_t size)
{
	return too_big(1, size) ? NULL : tp_test_allocator.realloc(ud, p, size);
}

static void fz_freefn(void *ud, void *p) { tp_test_allocator.free(ud, p); }

const tp_allocator fz_allocator = {fz_malloc, fz_calloc, fz_realloc, fz_freefn, NULL};

/* The model's own memory comes from the C library: it is not what is being counted. */
static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p)
		abort();
	return p;
}

bool fz_code_defined(int code)
{
	return code <= 0 && code >= TP_ECORRUPT;
}

/* ---- the model ------------------------------------------------------------------------------- */

void ref_init(struct ref_model *m, uint32_t ndev)
{
	m->ndev = ndev;
	m->down = xcalloc(ndev, sizeof *m->down);
	m->cordoned = xcalloc(ndev, sizeof *m->cordoned);
	m->holder = xcalloc(ndev, sizeof *m->holder);
	for (uint32_t d = 0; d < ndev; d++)
		m->holder[d] = -1;
	m->jobs = NULL;
	m->njobs = 0;
}

void ref_free(struct ref_model *m)
{
	for (size_t j = 0; j < m->njobs; j++) {
		free(m->jobs[j].devs);
		free(m->jobs[j].nic);
	}
	free(m->jobs);
	free(m->down);
	free(m->cordoned);
	free(m->holder);
	memset(m, 0, sizeof *m);
}

void ref_copy(struct ref_model *dst, const struct ref_model *src)
{
	ref_init(dst, src->ndev);
	memcpy(dst->down, src->down, src->ndev * sizeof *src->down);
	memcpy(dst->cordoned, src->cordoned, src->ndev * sizeof *src->cordoned);
	memcpy(dst->holder, src->holder, src->ndev * sizeof *src->holder);
	dst->jobs = xcalloc(src->njobs, sizeof *dst->jobs);
	dst->njobs = src->njobs;
	for (size_t j = 0; j < src->njobs; j++) {
		dst->jobs[j] = src->jobs[j];
		dst->jobs[j].devs = xcalloc(src->jobs[j].ndev, sizeof(uint32_t));
		memcpy(dst->jobs[j].devs, src->jobs[j].devs, src->jobs[j].ndev * sizeof(uint32_t));
		if (src->jobs[j].nic) {
			dst->jobs[j].nic = xcalloc(src->jobs[j].ndev, sizeof(int16_t));
			memcpy(dst->jobs[j].nic, src->jobs[j].nic, src->jobs[j].ndev * sizeof(int16_t));
		}
	}
}

bool ref_equal(const struct ref_model *a, const struct ref_model *b)
{
	if (a->ndev != b->ndev || a->njobs != b->njobs)
		return false;
	for (uint32_t d = 0; d < a->ndev; d++)
		if (a->down[d] != b->down[d] || a->cordoned[d] != b->cordoned[d] ||
		    a->holder[d] != b->holder[d])
			return false;
	for (size_t j = 0; j < a->njobs; j++) {
		const struct ref_job *x = &a->jobs[j], *y = &b->jobs[j];
		if (strcmp(x->id, y->id) || strcmp(x->tenant, y->tenant) || x->ndev != y->ndev ||
		    memcmp(x->devs, y->devs, x->ndev * sizeof(uint32_t)) || !x->nic != !y->nic ||
		    (x->nic && memcmp(x->nic, y->nic, x->ndev * sizeof(int16_t))))
			return false;
	}
	return true;
}

int ref_job_find(const struct ref_model *m, const char *id)
{
	if (!id)
		return -1;
	for (size_t j = 0; j < m->njobs; j++)
		if (strcmp(m->jobs[j].id, id) == 0)
			return (int)j;
	return -1;
}

bool ref_dev_free(const struct ref_model *m, uint32_t dev)
{
	return !m->down[dev] && !m->cordoned[dev] && m->holder[dev] < 0;
}

/* A job id the library accepts: non-empty, at most TP_MAX_NAME bytes, no control character. */
static bool ref_id_valid(const char *id)
{
	if (!id || !*id || strlen(id) > TP_MAX_NAME)
		return false;
	for (const unsigned char *s = (const unsigned char *)id; *s; s++)
		if (*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

unsigned ref_assign_errors(const struct ref_model *m, const char *id, const uint32_t *devs,
                           size_t n)
{
	unsigned e = 0;
	if (!ref_id_valid(id) || n == 0 || !devs)
		e |= REF_BIT(TP_EINVAL);
	else if (ref_job_find(m, id) >= 0)
		e |= REF_BIT(TP_EEXIST);
	for (size_t i = 0; devs && i < n; i++) {
		if (devs[i] >= m->ndev) {
			e |= REF_BIT(TP_EINVAL);
			continue;
		}
		for (size_t k = 0; k < i; k++)
			if (devs[k] == devs[i])
				e |= REF_BIT(TP_EINVAL);
		if (m->holder[devs[i]] >= 0)
			e |= REF_BIT(TP_EEXIST);
	}
	return e;
}

void ref_assign(struct ref_model *m, const char *id, const char *tenant, const uint32_t *devs,
                size_t n)
{
	struct ref_job *more = realloc(m->jobs, (m->njobs + 1) * sizeof *m->jobs);
	if (!more)
		abort();
	m->jobs = more;
	struct ref_job *j = &m->jobs[m->njobs];
	memset(j, 0, sizeof *j);
	snprintf(j->id, sizeof j->id, "%s", id);
	snprintf(j->tenant, sizeof j->tenant, "%s", tenant ? tenant : "default");
	j->devs = xcalloc(n, sizeof(uint32_t));
	memcpy(j->devs, devs, n * sizeof(uint32_t));
	j->ndev = (uint32_t)n;
	for (size_t i = 0; i < n; i++)
		m->holder[devs[i]] = (int32_t)m->njobs;
	m->njobs++;
}

void ref_release(struct ref_model *m, int j)
{
	struct ref_job *job = &m->jobs[j];
	for (uint32_t i = 0; i < job->ndev; i++)
		m->holder[job->devs[i]] = -1;
	free(job->devs);
	free(job->nic);
	size_t last = m->njobs - 1;
	if ((size_t)j != last) {
		m->jobs[j] = m->jobs[last];
		for (uint32_t i = 0; i < m->jobs[j].ndev; i++)
			m->holder[m->jobs[j].devs[i]] = j;
	}
	m->njobs--;
}

void ref_rebind(struct ref_model *m, int j, const uint32_t *devs, size_t n)
{
	struct ref_job *job = &m->jobs[j];
	for (uint32_t i = 0; i < job->ndev; i++)
		m->holder[job->devs[i]] = -1;
	free(job->devs);
	job->devs = xcalloc(n, sizeof(uint32_t));
	memcpy(job->devs, devs, n * sizeof(uint32_t));
	job->ndev = (uint32_t)n;
	for (size_t i = 0; i < n; i++)
		m->holder[devs[i]] = j;
	if (job->nic) /* until the caller knows better */
		ref_set_nics(m, j, NULL);
}

void ref_set_nics(struct ref_model *m, int j, const tp_placement *p)
{
	struct ref_job *job = &m->jobs[j];
	free(job->nic);
	job->nic = xcalloc(job->ndev, sizeof(int16_t));
	for (uint32_t i = 0; i < job->ndev; i++) {
		int k = p ? tp_placement_nic(p, i) : REF_NIC_UNKNOWN;
		job->nic[i] = (int16_t)(k >= 0 || k == REF_NIC_UNKNOWN ? k : -1);
	}
}

bool ref_shape_pairs(const tp_request *shape)
{
	return shape && shape->version >= 2 && shape->gpu_nic_pairs != 0;
}

const char *ref_nics_problem(const struct ref_model *m, const tp_topology *t,
                             const tp_placement *p, int self)
{
	static char why[256];
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++) {
		int k = tp_placement_nic(p, i);
		uint32_t node = tp_topology_device_node(t, devs[i]);
		if (self >= 0 && m->jobs[self].nic && i < m->jobs[self].ndev &&
		    m->jobs[self].devs[i] == devs[i] && m->jobs[self].nic[i] >= 0 &&
		    m->jobs[self].nic[i] != k) {
			snprintf(why, sizeof why, "rank %zu keeps device %u but NIC %d became %d", i,
			         devs[i], m->jobs[self].nic[i], k);
			return why;
		}
		for (size_t j = 0; k >= 0 && j < m->njobs; j++) {
			const struct ref_job *o = &m->jobs[j];
			for (uint32_t r = 0; (int)j != self && o->nic && r < o->ndev; r++)
				if (o->nic[r] == k && tp_topology_device_node(t, o->devs[r]) == node) {
					snprintf(why, sizeof why, "rank %zu (device %u) gets NIC %d of node %u, "
					         "which job '%.64s' holds (its rank %u)", i, devs[i], k, node, o->id,
					         r);
					return why;
				}
		}
	}
	return NULL;
}

void ref_set_health(struct ref_model *m, const uint32_t *devs, size_t n, bool cordon, bool on)
{
	for (size_t i = 0; i < n; i++)
		(cordon ? m->cordoned : m->down)[devs[i]] = on;
}

/* ---- recounting -------------------------------------------------------------------------------*/

static uint32_t recount_free(const struct ref_model *m, uint32_t first, uint32_t n)
{
	uint32_t k = 0;
	for (uint32_t d = first; d < first + n; d++)
		k += ref_dev_free(m, d);
	return k;
}

static uint32_t node_free(const struct ref_model *m, const tp_topology *t, uint32_t node)
{
	uint32_t first, n;
	unsigned nl = tp_topology_level_count(t) - 1;
	FZ_CHECK(tp_topology_domain_devices(t, nl, node, &first, &n) == 0, "node %u", node);
	return recount_free(m, first, n);
}

static uint32_t node_size(const tp_topology *t, uint32_t node)
{
	uint32_t first, n;
	unsigned nl = tp_topology_level_count(t) - 1;
	FZ_CHECK(tp_topology_domain_devices(t, nl, node, &first, &n) == 0, "node %u", node);
	return n;
}

static void compare_devices(const struct ref_model *m, const tp_cluster *c)
{
	uint32_t nfree = 0, ndown = 0, ncord = 0;
	for (uint32_t d = 0; d < m->ndev; d++) {
		const char *job = NULL;
		int st = tp_cluster_device_state(c, d, &job);
		int want = m->holder[d] >= 0 ? TP_DEVICE_HELD
		           : m->down[d]      ? TP_DEVICE_DOWN
		           : m->cordoned[d]  ? TP_DEVICE_CORDONED
		                             : TP_DEVICE_FREE;
		FZ_CHECK(st == want, "device %u: state %d, model says %d", d, st, want);
		if (want == TP_DEVICE_HELD)
			FZ_CHECK(job && strcmp(job, m->jobs[m->holder[d]].id) == 0,
			         "device %u held by '%s', model says '%s'", d, job ? job : "(null)",
			         m->jobs[m->holder[d]].id);
		else
			FZ_CHECK(job == NULL, "device %u: a free device names job '%s'", d, job);
		FZ_CHECK(tp_cluster_device_down(c, d) == m->down[d], "device %u down flag", d);
		FZ_CHECK(tp_cluster_device_cordoned(c, d) == m->cordoned[d], "device %u cordon flag",
		         d);
		nfree += ref_dev_free(m, d);
		ndown += m->down[d];
		ncord += m->cordoned[d] && !m->down[d];
	}
	FZ_CHECK(tp_cluster_free_total_count(c) == nfree, "free_total %u, recount %u",
	         tp_cluster_free_total_count(c), nfree);
	FZ_CHECK(tp_cluster_down_total_count(c) == ndown, "down_total %u, recount %u",
	         tp_cluster_down_total_count(c), ndown);
	FZ_CHECK(tp_cluster_cordoned_total_count(c) == ncord, "cordoned_total %u, recount %u",
	         tp_cluster_cordoned_total_count(c), ncord);
	FZ_CHECK(tp_cluster_device_state(c, m->ndev, NULL) == TP_EINVAL, "state of a bad device");
}

/* Every job of the model, in the model's slot order, with its devices in rank order; and no
 * device in two jobs' lists. */
static void compare_jobs(const struct ref_model *m, const tp_cluster *c)
{
	FZ_CHECK(tp_cluster_job_count(c) == m->njobs, "job_count %zu, model %zu",
	         tp_cluster_job_count(c), m->njobs);
	uint8_t *seen = xcalloc(m->ndev, 1);
	for (size_t j = 0; j < m->njobs; j++) {
		const struct ref_job *rj = &m->jobs[j];
		const char *id = tp_cluster_job_at(c, j);
		FZ_CHECK(id && strcmp(id, rj->id) == 0, "job_at(%zu) '%s', model '%s'", j,
		         id ? id : "(null)", rj->id);
		const uint32_t *devs = NULL;
		size_t n = 0;
		FZ_CHECK(tp_cluster_job_devices(c, rj->id, &devs, &n) == 0, "job '%s' devices", rj->id);
		FZ_CHECK(n == rj->ndev && !memcmp(devs, rj->devs, n * sizeof *devs),
		         "job '%s': %zu devices, model %u (or a different order)", rj->id, n,
		         rj->ndev);
		for (size_t i = 0; i < n; i++) {
			FZ_CHECK(devs[i] < m->ndev && !seen[devs[i]], "device %u held twice", devs[i]);
			seen[devs[i]] = 1;
		}
		tp_job_options o = {.version = TP_JOB_OPTIONS_VERSION};
		FZ_CHECK(tp_cluster_job_options(c, rj->id, &o) == 0, "job '%s' options", rj->id);
		FZ_CHECK(o.tenant && strcmp(o.tenant, rj->tenant) == 0, "job '%s' tenant '%s', "
		         "model '%s'", rj->id, o.tenant ? o.tenant : "(null)", rj->tenant);
	}
	FZ_CHECK(tp_cluster_job_at(c, m->njobs) == NULL, "job_at past the end");
	free(seen);
}

/* The tightest domain of level l with at least k free: fewest free, lowest index on ties. */
static int ref_tightest(const uint32_t *freec, uint32_t ndom, uint32_t k, uint32_t *dom)
{
	uint32_t best = UINT32_MAX;
	for (uint32_t d = 0; d < ndom; d++)
		if (freec[d] >= k && (best == UINT32_MAX || freec[d] < freec[best]))
			best = d;
	if (best == UINT32_MAX)
		return TP_ENOTFOUND;
	*dom = best;
	return 0;
}

static void compare_level(const struct ref_model *m, const tp_cluster *c, unsigned l,
                          uint32_t hsize)
{
	const tp_topology *t = tp_cluster_topology(c);
	uint32_t ndom = tp_topology_domain_count(t, l);
	uint32_t *freec = xcalloc(ndom, sizeof *freec);
	uint32_t *hist = xcalloc(hsize, sizeof *hist), *want = xcalloc(hsize, sizeof *want);
	uint32_t maxfree = 0;
	for (uint32_t d = 0; d < ndom; d++) {
		uint32_t first, n, nfirst, nn;
		FZ_CHECK(tp_topology_domain_devices(t, l, d, &first, &n) == 0, "level %u dom %u", l, d);
		FZ_CHECK(tp_topology_domain_nodes(t, l, d, &nfirst, &nn) == 0, "level %u dom %u", l,
		         d);
		freec[d] = recount_free(m, first, n);
		if (freec[d] > maxfree)
			maxfree = freec[d];
		FZ_CHECK(tp_cluster_free_count(c, l, d) == freec[d], "free(level %u, dom %u) %u, recount %u",
		         l, d, tp_cluster_free_count(c, l, d), freec[d]);
		uint32_t fullnodes = 0, top = 0;
		memset(want, 0, hsize * sizeof *want);
		for (uint32_t node = nfirst; node < nfirst + nn; node++) {
			uint32_t f = node_free(m, t, node);
			fullnodes += f == node_size(t, node);
			if (f < hsize)
				want[f]++;
			if (f > top)
				top = f;
		}
		FZ_CHECK(tp_cluster_free_node_count(c, l, d) == fullnodes,
		         "free_nodes(level %u, dom %u) %u, recount %u", l, d,
		         tp_cluster_free_node_count(c, l, d), fullnodes);
		int rc = tp_cluster_node_histogram(c, l, d, hist, hsize);
		FZ_CHECK(rc == (int)top, "histogram(level %u, dom %u) returned %d, recount %u", l, d,
		         rc, top);
		for (uint32_t k = 0; k < hsize; k++)
			FZ_CHECK(hist[k] == want[k], "histogram(level %u, dom %u)[%u] %u, recount %u", l,
			         d, k, hist[k], want[k]);
	}
	FZ_CHECK(tp_cluster_free_count(c, l, ndom) == 0 && tp_cluster_free_node_count(c, l, ndom) == 0,
	         "a bad domain has free devices");
	static const uint32_t ks[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 32, 36, 64, 72};
	for (size_t i = 0; i < sizeof ks / sizeof ks[0] + 2; i++) {
		uint32_t k = i < sizeof ks / sizeof ks[0] ? ks[i] : maxfree + (uint32_t)(i & 1);
		if (k == 0)
			continue;
		uint32_t got = TP_NONE, exp = TP_NONE;
		int rc = tp_cluster_tightest(c, l, k, &got);
		int erc = ref_tightest(freec, ndom, k, &exp);
		FZ_CHECK(rc == erc && (rc || got == exp),
		         "tightest(level %u, %u): %d dom %u, recount %d dom %u", l, k, rc, got, erc,
		         exp);
	}
	uint32_t dummy;
	FZ_CHECK(tp_cluster_tightest(c, l, 0, &dummy) == TP_EINVAL, "tightest with min_free 0");
	free(freec);
	free(hist);
	free(want);
}

void ref_compare(const struct ref_model *m, const tp_cluster *c)
{
	char buf[256] = "";
	int rc = tp_cluster_check(c, buf, sizeof buf);
	FZ_CHECK(rc == 0, "tp_cluster_check: %s (%s)", tp_err_name(rc), buf);
	const tp_topology *t = tp_cluster_topology(c);
	FZ_CHECK(tp_topology_device_count(t) == m->ndev, "device count");
	compare_devices(m, c);
	compare_jobs(m, c);
	unsigned nl = tp_topology_level_count(t);
	uint32_t hsize = 0;
	for (uint32_t node = 0; node < tp_topology_node_count(t); node++)
		if (node_size(t, node) + 2 > hsize)
			hsize = node_size(t, node) + 2;
	for (unsigned l = 0; l < nl; l++)
		compare_level(m, c, l, hsize);
	FZ_CHECK(tp_cluster_free_count(c, nl, 0) == 0, "a bad level has free devices");
}

/* ---- fragmentation ----------------------------------------------------------------------------*/

static uint32_t max_domain_devices(const tp_topology *t, unsigned l)
{
	uint32_t best = 0, first, n;
	for (uint32_t d = 0; d < tp_topology_domain_count(t, l); d++)
		if (tp_topology_domain_devices(t, l, d, &first, &n) == 0 && n > best)
			best = n;
	return best;
}

static bool close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

void ref_compare_frag(const struct ref_model *m, const tp_cluster *c, const tp_frag *f,
                      const tp_job_shape *mix, size_t nmix)
{
	const tp_topology *t = tp_cluster_topology(c);
	unsigned nl = tp_topology_level_count(t);
	uint32_t nfree = 0, ndown = 0, ncord = 0;
	for (uint32_t d = 0; d < m->ndev; d++) {
		nfree += ref_dev_free(m, d);
		ndown += m->down[d];
		ncord += m->cordoned[d] && !m->down[d];
	}
	FZ_CHECK(tp_frag_down_count(f) == ndown && tp_frag_cordoned_count(f) == ncord,
	         "frag down/cordoned");
	for (unsigned l = 0; l < nl; l++) {
		uint32_t ndom = tp_topology_domain_count(t, l), fully = 0, largest = 0;
		uint64_t in_fully = 0;
		for (uint32_t d = 0; d < ndom; d++) {
			uint32_t first, n;
			tp_topology_domain_devices(t, l, d, &first, &n);
			uint32_t fr = recount_free(m, first, n);
			if (fr > largest)
				largest = fr;
			if (fr && fr == n) {
				fully++;
				in_fully += fr;
			}
		}
		double frag = nfree ? (double)(nfree - in_fully) / nfree : 0.0;
		FZ_CHECK(tp_frag_domain_count(f, l) == ndom, "frag level %u domains", l);
		FZ_CHECK(tp_frag_free_count(f, l) == nfree, "frag level %u free %u, recount %u", l,
		         tp_frag_free_count(f, l), nfree);
		FZ_CHECK(tp_frag_fully_free_count(f, l) == fully,
		         "frag level %u fully_free %u, recount %u",
		         l, tp_frag_fully_free_count(f, l), fully);
		FZ_CHECK(tp_frag_largest_free_count(f, l) == largest,
		         "frag level %u largest %u, recount %u",
		         l, tp_frag_largest_free_count(f, l), largest);
		FZ_CHECK(close_to(tp_frag_fragmentation(f, l), frag),
		         "frag level %u fragmentation %g, recount %g", l, tp_frag_fragmentation(f, l),
		         frag);
	}
	FZ_CHECK(tp_frag_domain_count(f, nl) == 0, "frag of a bad level");
	/* The workload figure: the documented formula, with the default mix spelled out. */
	tp_job_shape dflt[4];
	if (!mix) {
		unsigned low = nl >= 2 ? nl - 2 : 0;
		uint32_t node = max_domain_devices(t, nl - 1), dom = max_domain_devices(t, low);
		const char *ln = tp_topology_level_name(t, nl - 1), *lo = tp_topology_level_name(t, low);
		dflt[0] = (tp_job_shape){1, ln, 1.0};
		dflt[1] = (tp_job_shape){node, ln, 1.0};
		dflt[2] = (tp_job_shape){dom / 2 ? dom / 2 : 1, lo, 1.0};
		dflt[3] = (tp_job_shape){dom, lo, 1.0};
		mix = dflt;
		nmix = 4;
	}
	double wsum = 0, usable = 0;
	for (size_t i = 0; i < nmix; i++) {
		int l = tp_topology_level_by_name(t, mix[i].level);
		FZ_CHECK(l >= 0, "mix level");
		uint64_t u = 0;
		for (uint32_t d = 0; d < tp_topology_domain_count(t, (unsigned)l); d++) {
			uint32_t first, n;
			tp_topology_domain_devices(t, (unsigned)l, d, &first, &n);
			uint32_t fr = recount_free(m, first, n);
			u += (uint64_t)(fr / mix[i].devices) * mix[i].devices;
		}
		wsum += mix[i].weight;
		usable += mix[i].weight * (double)u;
	}
	double w = nfree ? 1.0 - usable / (wsum * nfree) : 0.0;
	if (w < 0)
		w = 0;
	double got = tp_frag_workload(f);
	FZ_CHECK(got >= 0 && got <= 1 && fabs(got - w) <= 1e-9, "frag workload %.17g, recount %.17g",
	         got, w);
}

/* ---- wide numbers ---------------------------------------------------------------------------- */

uint32_t fz_wide_escape(struct fz_in *in, uint8_t v)
{
	uint32_t x = 0;
	switch (v - FZ_ESCAPE) {
	case 0: return 0;
	case 1: return 1;
	case 2: return UINT32_MAX;
	case 3: return UINT32_MAX - 1;
	case 4: return INT32_MAX;
	case 5: return (uint32_t)INT32_MAX + 1;
	case 6: return (uint32_t)1 << (8 + fz_u8(in) % 24);
	default:
		for (unsigned i = 0; i < 4; i++)
			x |= (uint32_t)fz_u8(in) << (8 * i);
		return x;
	}
}

int fz_wide_int(struct fz_in *in)
{
	int v = (int)(int8_t)fz_u8(in);
	if (v == 127 || v == -128)
		FZ_TRACE_ESCAPE(in, (uint8_t)v, 0);
	return v == 127 ? INT_MAX : v == -128 ? INT_MIN : v;
}

double fz_wide_double(struct fz_in *in, const double *table, uint32_t n)
{
	static const double ends[] = {0.0, -0.0, DBL_MIN, 1e12, 1e300, DBL_MAX, 1.0, 2.0};
	uint8_t v = fz_u8(in);
	if (v < FZ_ESCAPE)
		return table[v % n];
	FZ_TRACE_ESCAPE(in, v, n);
	return ends[v - FZ_ESCAPE];
}

/* ---- requests -------------------------------------------------------------------------------- */

static const char *const bad_names[] = {"nosuch", "", "cluster", "a/b"};

/* A level name (mostly), a failure-domain kind, or a name that is not a level. */
static const char *pick_level(struct fz_in *in, const tp_topology *t, bool fd_ok)
{
	unsigned nl = tp_topology_level_count(t), nk = tp_topology_fd_kind_count(t);
	uint8_t v = fz_u8(in);
	if (v < 200)
		return tp_topology_level_name(t, v % nl);
	if (v < 225 && fd_ok && nk)
		return tp_topology_fd_kind_name(t, v % nk);
	if (v < 250)
		return bad_names[v % 4];
	return NULL;
}

static uint32_t pick_count(struct fz_in *in, const tp_topology *t)
{
	uint32_t ndev = tp_topology_device_count(t);
	switch (fz_u8(in) % 8) {
	case 0: return 1;
	case 1: return 1 + fz_wide(in, 8); /* the escapes: 1, 2, 0 (wrapped), ... */
	case 2: return 1 + fz_below(in, ndev + 1);
	case 3: return 4 * (1 + fz_below(in, 8));
	case 4: return ndev;
	case 5: return ndev + 1;
	case 6:
		if (fz_u8(in) & 1)
			return 0;
		return UINT32_MAX - fz_u8(in);
	default: return 2 * (1 + fz_below(in, 16));
	}
}

static const char *pick_string(struct fz_in *in, const char *const *pool, size_t n,
                               char *longname)
{
	uint8_t v = fz_u8(in);
	if (v == 255) {
		memset(longname, 'x', REF_MAX_ID);
		longname[REF_MAX_ID] = '\0';
		return longname;
	}
	if (v == 254)
		return "bad\ttab";
	if (v == 253)
		return "";
	return pool[v % n];
}

void fz_decode_request(struct fz_in *in, const tp_topology *t, const char *running,
                       struct fz_request *out)
{
	tp_request init = TP_REQUEST_INIT;
	memset(out, 0, sizeof *out);
	out->r = init;
	tp_request *r = &out->r;
	uint32_t flags = fz_u16(in);
	static const char *const ids[] = {"new", "j1", "j2", NULL};
	static const char *const tenants[] = {NULL, "t1", "t2", "default"};
	static const char *const models[] = {"GB200", "H100", "nomodel"};
	static const double perfs[] = {0.0, 0.5, 0.9, 1.0, 1.5, -1.0};
	static const double mems[] = {0.0, 40.0, 80.0, 186.0, 1000.0, -5.0};
	r->count = pick_count(in, t);
	if (flags & 0x1)
		r->id = pick_string(in, ids, 4, out->longname);
	if (flags & 0x2)
		r->tenant = pick_string(in, tenants, 4, out->longname);
	if (flags & 0x4) {
		static const uint32_t gs[] = {0, 1, 2, 4, 8, 3};
		r->group_size = fz_wide_pick(in, gs, 6);
		if (fz_u8(in) & 1)
			r->group_level = pick_level(in, t, false);
	}
	if (flags & 0x8)
		r->required = pick_level(in, t, false);
	if (flags & 0x10)
		r->preferred = pick_level(in, t, false);
	if (flags & 0x20) {
		r->nslices = 1 + fz_below(in, 3);
		for (size_t i = 0; i < r->nslices; i++) {
			static const uint32_t sizes[] = {1, 2, 4, 8, 16, 0, 3, 72};
			out->slices[i].level = pick_level(in, t, false);
			out->slices[i].size = fz_wide_pick(in, sizes, 8);
		}
		r->slices = fz_u8(in) == 255 ? NULL : out->slices;
	}
	if (flags & 0x40)
		r->balanced = 1;
	if (flags & 0x80) {
		r->ncaps = 1 + fz_below(in, 2);
		for (size_t i = 0; i < r->ncaps; i++) {
			uint8_t v = fz_u8(in);
			out->caps[i].level = pick_level(in, t, true);
			out->caps[i].devices = v & 1 ? 1 + (uint32_t)(v >> 4) : 0;
			out->caps[i].groups = v & 2 ? 1 + (uint32_t)(v >> 5) : 0;
			/* the largest of each stands for a value over the whole range */
			if (out->caps[i].devices == 16)
				FZ_TRACE_LINE("  escape %zu from the end: insert 16\n", in->n + 1);
			if (out->caps[i].groups == 8)
				FZ_TRACE_LINE("  escape %zu from the end: insert 8%s\n", in->n + 1,
				              out->caps[i].devices == 16 ? " after" : "");
			if (out->caps[i].devices == 16)
				out->caps[i].devices = fz_wide(in, 256);
			if (out->caps[i].groups == 8)
				out->caps[i].groups = fz_wide(in, 256);
		}
		r->caps = out->caps;
	}
	if (flags & 0x100) {
		r->spread_level = pick_level(in, t, true);
		r->spread_min_domains = fz_wide(in, 5);
	}
	if (flags & 0x200) {
		uint8_t v = fz_u8(in);
		r->colocate_job = v % 4 == 0 ? "nojob" : v % 4 == 1 ? NULL : running;
		r->colocate_level = v & 4 ? NULL : pick_level(in, t, false);
	}
	if (flags & 0x400)
		r->exclusive = pick_level(in, t, false);
	if (flags & 0x800) {
		uint8_t v = fz_u8(in);
		if (v & 1)
			r->select_model = models[(v >> 1) % 3];
		if (v & 8)
			r->select_min_perf = fz_wide_double(in, perfs, 6);
		if (v & 16)
			r->select_min_memory_gb = fz_wide_double(in, mems, 6);
		if (v & 32) {
			uint32_t nn = tp_topology_node_count(t);
			r->nselect_nodes = 1 + fz_below(in, 4);
			for (size_t i = 0; i < r->nselect_nodes; i++) {
				uint8_t w = fz_u8(in);
				out->nodes[i] = w == 255 ? NULL : w == 254 ? "nosuch"
				                                 : tp_topology_node_name(t, w % nn);
			}
			r->select_nodes = fz_u8(in) == 255 ? NULL : out->nodes;
		}
	}
	if (flags & 0x1000) {
		uint8_t v = fz_u8(in);
		/* 3 and INT_MAX are not classes */
		if (v == 255)
			FZ_TRACE_ESCAPE(in, v, 4);
		r->job_class = v == 255 ? (tp_job_class)INT_MAX : (tp_job_class)(v % 4);
	}
	if (flags & 0x2000)
		r->priority = fz_wide_int(in);
	if (flags & 0x4000) {
		/* the same byte: version 0..2, and from bit 6 gpu_nic_pairs 1 or (invalid) 2 */
		uint8_t v = fz_u8(in);
		r->version = v % 3;
		if (v & 0x40)
			r->gpu_nic_pairs = 1 + (v >> 7);
		if ((v & 0x3f) == 0x3f) { /* a version over the whole range */
			FZ_TRACE_LINE("  escape %zu from the end: insert %u\n", in->n + 1, v % 3);
			r->version = fz_wide(in, 3);
		}
	}
}

void fz_trace_request(const char *what, const tp_request *r)
{
#ifdef FZ_TRACE
#define S(x) ((x) ? (x) : "-")
	fprintf(stderr, "  %s: v%u count %u group %u/%s required %s preferred %s spread %s/%u "
	        "colocate %s/%s exclusive %s class %d priority %d pairs %d perf %g memory %g",
	        what, r->version, r->count, r->group_size, S(r->group_level), S(r->required),
	        S(r->preferred), S(r->spread_level), r->spread_min_domains, S(r->colocate_job),
	        S(r->colocate_level), S(r->exclusive), (int)r->job_class, r->priority,
	        r->gpu_nic_pairs, r->select_min_perf, r->select_min_memory_gb);
	for (size_t i = 0; r->slices && i < r->nslices; i++)
		fprintf(stderr, " slice %s/%u", S(r->slices[i].level), r->slices[i].size);
	for (size_t i = 0; r->caps && i < r->ncaps; i++)
		fprintf(stderr, " cap %s/%u/%u", S(r->caps[i].level), r->caps[i].devices,
		        r->caps[i].groups);
	fputc('\n', stderr);
#undef S
#else
	(void)what;
	(void)r;
#endif
}

bool fz_request_pairs(const tp_request *r)
{
	return r->version >= 2 && r->gpu_nic_pairs == 1;
}

static bool ref_nic_below(const tp_nodetype *nt, unsigned nic, int sw)
{
	for (int s = tp_test_nic_switch(nt, nic); sw >= 0 && s >= 0;
	     s = tp_test_switch_parent(nt, (unsigned)s))
		if (s == sw)
			return true;
	return sw < 0;
}

const char *ref_pairs_problem(const tp_topology *t, const tp_placement *p)
{
	static char why[256];
	size_t n;
	const uint32_t *devs = tp_placement_devices(p, &n);
	for (size_t i = 0; i < n; i++) {
		uint32_t node = tp_topology_device_node(t, devs[i]);
		const tp_nodetype *nt = tp_topology_node_type(t, node);
		int nic = tp_placement_nic(p, i);
		if (!nt || nic < 0 || (unsigned)nic >= tp_nodetype_nic_count(nt)) {
			snprintf(why, sizeof why, "rank %zu (device %u) has NIC %d", i, devs[i], nic);
			return why;
		}
		for (size_t j = 0; j < i; j++)
			if (tp_topology_device_node(t, devs[j]) == node && tp_placement_nic(p, j) == nic) {
				snprintf(why, sizeof why, "ranks %zu and %zu share NIC %d", j, i, nic);
				return why;
			}
		int anchor = -1;
		for (int s = tp_test_gpu_switch(nt, tp_topology_device_index(t, devs[i]));
		     s >= 0 && anchor < 0; s = tp_test_switch_parent(nt, (unsigned)s))
			for (unsigned k = 0; k < tp_nodetype_nic_count(nt) && anchor < 0; k++)
				if (ref_nic_below(nt, k, s))
					anchor = s;
		if (!ref_nic_below(nt, (unsigned)nic, anchor)) {
			snprintf(why, sizeof why, "rank %zu: NIC %d is not below switch %d, the nearest "
			         "with a NIC", i, nic, anchor);
			return why;
		}
	}
	return NULL;
}

bool fz_request_plain(const tp_request *r)
{
	return !fz_request_pairs(r) && r->group_size <= 1 && !r->group_level && !r->required &&
	       !r->preferred &&
	       !r->nslices && !r->ncaps && !r->spread_level && !r->colocate_job &&
	       !r->colocate_level && !r->exclusive;
}

bool ref_dev_matches(const tp_topology *t, const tp_request *r, uint32_t dev)
{
	uint32_t node = tp_topology_device_node(t, dev);
	if (r->select_model) {
		const char *m = tp_topology_node_model(t, node);
		if (!m || strcmp(m, r->select_model))
			return false;
	}
	if (r->select_min_perf > 0 && tp_topology_device_perf(t, dev) < r->select_min_perf)
		return false;
	if (r->select_min_memory_gb > 0 &&
	    tp_topology_node_memory_gb(t, node) < r->select_min_memory_gb)
		return false;
	if (r->nselect_nodes) {
		if (!r->select_nodes)
			return false; /* an invalid request: nothing matches */
		const char *name = tp_topology_node_name(t, node);
		bool listed = false;
		for (size_t i = 0; i < r->nselect_nodes; i++)
			listed |= r->select_nodes[i] && strcmp(r->select_nodes[i], name) == 0;
		if (!listed)
			return false;
	}
	return true;
}

/* The domain of `level` (a tree level >= 0, or a failure-domain kind -(k + 2)) holding dev. */
static uint32_t dom_of(const tp_topology *t, int level, uint32_t dev)
{
	if (level >= 0)
		return tp_topology_node_domain(t, tp_topology_device_node(t, dev), (unsigned)level);
	return tp_topology_device_fd(t, (unsigned)(-level - 2), dev);
}

static uint32_t dom_total(const tp_topology *t, int level)
{
	return level >= 0 ? tp_topology_domain_count(t, (unsigned)level)
	                  : tp_topology_fd_count(t, (unsigned)(-level - 2));
}

/* A level or failure-domain kind by name (as dom_of takes it), or -1. */
static int level_or_kind(const tp_topology *t, const char *name)
{
	int l = tp_topology_level_by_name(t, name);
	if (l >= 0)
		return l;
	int k = tp_topology_fd_kind_by_name(t, name);
	return k >= 0 ? -(k + 2) : -1;
}

static char problem[512];

static bool known(const tp_topology *t, const char *name, bool fd_ok)
{
	if (!name)
		return true;
	return fd_ok ? level_or_kind(t, name) != -1 : tp_topology_level_by_name(t, name) >= 0;
}

/* Every level a successful request names exists (the checker looks them up). */
static bool levels_known(const tp_topology *t, const tp_request *r)
{
	bool ok = known(t, r->group_level, false) && known(t, r->required, false) &&
	          known(t, r->spread_level, true) && known(t, r->exclusive, false) &&
	          (!r->colocate_job || (r->colocate_level && known(t, r->colocate_level, false)));
	for (size_t i = 0; ok && i < r->nslices; i++)
		ok = r->slices && r->slices[i].level && known(t, r->slices[i].level, false) &&
		     r->slices[i].size > 0;
	for (size_t i = 0; ok && i < r->ncaps; i++)
		ok = r->caps && r->caps[i].level && known(t, r->caps[i].level, true);
	return ok && (r->group_size == 0 || r->count % r->group_size == 0);
}

#define PROBLEM(...)                                                                           \
	do {                                                                                       \
		snprintf(problem, sizeof problem, __VA_ARGS__);                                        \
		goto out;                                                                              \
	} while (0)

/* Every run of `size` devices, in rank order, inside one domain of level. */
static bool runs_inside(const tp_topology *t, int level, uint32_t size, const uint32_t *devs,
                        size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (i % size && dom_of(t, level, devs[i]) != dom_of(t, level, devs[i - i % size]))
			return false;
	return true;
}

/* Devices each domain of level holds (counts[dom]) and the number of domains touched. */
static uint32_t count_per_domain(const tp_topology *t, int level, const uint32_t *devs, size_t n,
                                 uint32_t *counts)
{
	uint32_t touched = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t d = dom_of(t, level, devs[i]);
		touched += counts[d]++ == 0;
	}
	return touched;
}

/* Whether job `slot`'s devices share a domain of `level` with the placement. */
static bool shares_domain(const tp_topology *t, int level, const uint32_t *jdevs, size_t jn,
                          const uint32_t *devs, size_t n)
{
	for (size_t i = 0; i < jn; i++)
		for (size_t k = 0; k < n; k++)
			if (dom_of(t, level, jdevs[i]) == dom_of(t, level, devs[k]))
				return true;
	return false;
}

const char *ref_placement_problem(const tp_cluster *c, const tp_request *r, const char *tenant,
                                  const uint32_t *devs, size_t n, bool contiguous)
{
	const tp_topology *t = tp_cluster_topology(c);
	unsigned nl = tp_topology_level_count(t);
	uint32_t ndev = tp_topology_device_count(t);
	uint32_t *counts = NULL;
	uint8_t *seen = xcalloc(ndev, 1);
	problem[0] = '\0';
	if (!tenant)
		tenant = "default";
	if (n != r->count || !devs)
		PROBLEM("%zu devices for a count of %u", n, r->count);
	for (size_t i = 0; i < n; i++) {
		if (devs[i] >= ndev)
			PROBLEM("device %u out of range", devs[i]);
		if (seen[devs[i]]++)
			PROBLEM("device %u twice", devs[i]);
		if (!ref_dev_matches(t, r, devs[i]))
			PROBLEM("device %u does not match request.select", devs[i]);
	}
	if (!levels_known(t, r))
		PROBLEM("a request naming an unknown level succeeded");
	uint32_t gs = r->group_size ? r->group_size : 1;
	int gl = r->group_level ? tp_topology_level_by_name(t, r->group_level) : (int)nl - 1;
	if (gs > 1 && !runs_inside(t, gl, gs, devs, n))
		PROBLEM("a group of %u crosses a domain of level %d", gs, gl);
	if (r->required) {
		int l = tp_topology_level_by_name(t, r->required);
		if (!runs_inside(t, l, (uint32_t)n, devs, n))
			PROBLEM("the devices span several domains of the required level %d", l);
	}
	for (size_t s = 0; s < r->nslices; s++) {
		int l = tp_topology_level_by_name(t, r->slices[s].level);
		if (!runs_inside(t, l, r->slices[s].size, devs, n))
			PROBLEM("slices[%zu]: a run of %u crosses a domain of level %d", s,
			        r->slices[s].size, l);
	}
	for (size_t k = 0; k < r->ncaps; k++) {
		int l = level_or_kind(t, r->caps[k].level);
		counts = xcalloc(dom_total(t, l) + 1, sizeof *counts);
		count_per_domain(t, l, devs, n, counts);
		for (uint32_t d = 0; d < dom_total(t, l); d++) {
			if (r->caps[k].devices && counts[d] > r->caps[k].devices)
				PROBLEM("caps[%zu]: %u devices in domain %u of %s, cap %u", k, counts[d], d,
				        r->caps[k].level, r->caps[k].devices);
			/* A groups cap is unambiguous where every group lies in one domain. */
			if (r->caps[k].groups && l >= 0 && l <= gl && counts[d] / gs > r->caps[k].groups)
				PROBLEM("caps[%zu]: %u groups in domain %u of %s, cap %u", k, counts[d] / gs,
				        d, r->caps[k].level, r->caps[k].groups);
		}
		free(counts);
		counts = NULL;
	}
	if (r->spread_level) {
		int l = level_or_kind(t, r->spread_level);
		counts = xcalloc(dom_total(t, l) + 1, sizeof *counts);
		uint32_t touched = count_per_domain(t, l, devs, n, counts);
		if (touched < r->spread_min_domains)
			PROBLEM("spread: %u domains of %s, at least %u wanted", touched, r->spread_level,
			        r->spread_min_domains);
		free(counts);
		counts = NULL;
	}
	if (r->colocate_job) {
		int l = tp_topology_level_by_name(t, r->colocate_level);
		const uint32_t *jd;
		size_t jn;
		if (tp_cluster_job_devices(c, r->colocate_job, &jd, &jn) != 0)
			PROBLEM("colocate job '%s' is not running", r->colocate_job);
		if (!runs_inside(t, l, (uint32_t)n, devs, n) || !shares_domain(t, l, jd, jn, devs, 1))
			PROBLEM("not inside one domain of level %d with job '%s'", l, r->colocate_job);
	}
	/* Exclusivity both ways: the request's own level, and every running job's shape. */
	for (size_t j = 0; j < tp_cluster_job_count(c); j++) {
		const char *id = tp_cluster_job_at(c, j);
		tp_job_options o = {.version = TP_JOB_OPTIONS_VERSION};
		const uint32_t *jd;
		size_t jn;
		tp_cluster_job_options(c, id, &o);
		tp_cluster_job_devices(c, id, &jd, &jn);
		if (strcmp(o.tenant, tenant) == 0)
			continue;
		if (r->exclusive) {
			int l = tp_topology_level_by_name(t, r->exclusive);
			if (shares_domain(t, l, jd, jn, devs, n))
				PROBLEM("exclusive %s: a domain used holds job '%s' of tenant '%s'",
				        r->exclusive, id, o.tenant);
		}
		if (o.shape && o.shape->exclusive) {
			int l = tp_topology_level_by_name(t, o.shape->exclusive);
			if (l >= 0 && shares_domain(t, l, jd, jn, devs, n))
				PROBLEM("job '%s' of tenant '%s' keeps others out of its %s", id, o.tenant,
				        o.shape->exclusive);
		}
	}
	if (contiguous) {
		for (unsigned l = 0; l < nl; l++) {
			uint32_t nd = tp_topology_domain_count(t, l);
			uint8_t *done = xcalloc(nd, 1);
			for (size_t i = 0; i < n; i++) {
				uint32_t d = dom_of(t, (int)l, devs[i]);
				if (i && d == dom_of(t, (int)l, devs[i - 1]))
					continue;
				if (done[d]) {
					free(done);
					PROBLEM("rank %zu: domain %u of level %u is not one run of ranks", i, d,
					        l);
				}
				done[d] = 1;
			}
			free(done);
		}
	}
out:
	free(counts);
	free(seen);
	return problem[0] ? problem : NULL;
}
