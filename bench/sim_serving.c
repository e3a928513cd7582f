/* SPDX-License-Identifier: MIT */
/*
 * tp-bench sim --inference N: the simulator's inference class. N services arrive (Poisson, the
 * offered GPU load given by --load), each with R replicas of g GPUs, an availability target A
 * (the share of its replicas that must stay up) and a lifetime; half way through its life a
 * service scales out by ceil(R / 2) replicas. Every policy places each replica as one job
 * (class inference); replicas that do not fit wait and are tried again at every event.
 *
 * A service survives a domain's loss when, with every replica that touches the domain gone,
 * at least ceil(A x R) of its R wanted replicas still run. Per policy the run reports the
 * share of service-hours (arrival to departure) during which the service survived the loss of
 * any single rack (the level above the node: rack on NVL72, scalable unit on HGX), and of any
 * single power feed (two adjacent racks share one, a modelling choice: the generated fleets
 * have no power domains, so the run rebuilds the fleet's topology with the feeds declared as
 * failure domains of kind "power", node for node and device for device the same), beside
 * effective GPU-hours (GPUs x hours x placement efficiency). The topoplace policies set the
 * service's caps (tp_cluster_set_service_caps) on the rack level and on the power feeds at
 * max_percent = 100 (1 - A), so that no rack and no feed holds more than the service may
 * lose; the baselines place replicas as the jobs they are. Deterministic for a seed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

struct svc {
	char name[24];
	double arrive_s, depart_s, scale_s;
	uint32_t want;     /* replicas wanted now */
	uint32_t scale_by; /* replicas added at scale_s */
	uint32_t gpus;     /* per replica */
	double target;     /* A */
	uint32_t *rep;     /* [cap] replica ids running */
	uint32_t nrep, cap;
	bool live;
	bool ok_rack, ok_feed; /* survives any one rack / feed loss, as placed now */
};

enum ev_kind { EV_ARRIVE, EV_SCALE, EV_DEPART };

struct sev {
	double t;
	uint32_t svc;
	enum ev_kind kind;
};

struct srun {
	const struct sim_opts *o;
	const struct sim_fleet *f;
	const struct sim_policy *pol;
	struct sim_ctx ctx;
	void *st;
	struct svc *s;
	size_t ns;
	uint32_t next_rep;
	double *rep_eff;   /* [replica id] placement efficiency */
	uint32_t *rack_hits; /* [racks] scratch */
	uint32_t *devs;      /* [gpus] a replica's devices */
	double now;
	double svc_h, up_h, rack_h, feed_h, eff_gpu_h;
	double bound_h; /* service-hours whose target one replica per rack could meet */
	uint64_t placed, refused;
};

static int sev_cmp(const void *a, const void *b)
{
	const struct sev *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	if (x->kind != y->kind)
		return (int)y->kind - (int)x->kind; /* departures first: room before arrivals */
	return (x->svc > y->svc) - (x->svc < y->svc);
}

static void gen_services(struct srun *r)
{
	const struct sim_fleet *f = r->f;
	struct bench_rng rng;
	bench_rng_seed(&rng, r->o->seed ^ 0x5e71ceu);
	static const uint32_t reps[] = {2, 3, 4, 6, 8};
	double life_s = 48 * 3600.0, mean_gpus = 0;
	r->s = calloc(r->ns, sizeof *r->s);
	if (!r->s)
		bench_die("out of memory");
	for (size_t i = 0; i < r->ns; i++) {
		struct svc *s = &r->s[i];
		s->want = reps[bench_rng_below(&rng, 5)];
		s->scale_by = (s->want + 1) / 2;
		uint32_t g = f->node_gpus * (uint32_t)(1 + bench_rng_below(&rng, 2));
		s->gpus = g > f->nv_gpus ? f->nv_gpus : g;
		s->target = bench_rng_below(&rng, 2) ? 0.75 : 0.5;
		s->depart_s = -life_s * log(1.0 - bench_rng_unit(&rng)); /* a lifetime, for now */
		mean_gpus += (double)s->gpus * (s->want + 0.5 * s->scale_by);
		snprintf(s->name, sizeof s->name, "svc%zu", i);
	}
	mean_gpus /= (double)r->ns;
	/* arrivals offering `load` times the fleet: rate x mean GPUs x mean life = load x GPUs */
	double rate = r->o->load * f->gpus / (mean_gpus * life_s), t = 0;
	for (size_t i = 0; i < r->ns; i++) {
		struct svc *s = &r->s[i];
		t += -log(1.0 - bench_rng_unit(&rng)) / rate;
		s->arrive_s = floor(t);
		s->depart_s = s->arrive_s + fmax(3600, floor(s->depart_s));
		s->scale_s = floor(0.5 * (s->arrive_s + s->depart_s));
	}
}

/* The power feeds' failure-domain kind in the rebuilt topology (with_feeds). */
#define FEED_KIND "power"

/* The rack of a device (the base level), or its power feed (two adjacent racks). */
static uint32_t domain_of(const struct sim_fleet *f, uint32_t dev, bool feed)
{
	if (feed)
		return tp_topology_device_fd(f->t, 0, dev);
	return tp_topology_node_domain(f->t, tp_topology_device_node(f->t, dev), f->base_level);
}

/* The fleet's topology again, through the builder (levels, fabrics, the domains' own fabrics,
 * NVSwitches, nodes with their attributes and types, in the same order, so every node and
 * device keeps its id), with each pair of adjacent racks (base-level domains 2k and 2k + 1) on
 * one power feed, a failure domain of kind FEED_KIND. */
static tp_topology *with_feeds(const struct sim_fleet *f)
{
	const tp_topology *t = f->t;
	unsigned nl = f->nlevels;
	tp_topology_builder *b;
	BENCH_CHECK(tp_topology_builder_create(&b, f->level_name, nl, NULL), "builder");
	tp_link_kind kind;
	double gbps, lat;
	for (int l = -1; l < (int)nl; l++) {
		int lv = l < 0 ? TP_LEVEL_CLUSTER : l;
		BENCH_CHECK(tp_topology_fabric(t, lv, &kind, &gbps, &lat), "fabric");
		BENCH_CHECK(tp_topology_builder_set_fabric(b, lv, kind, gbps, lat), "set_fabric");
	}
	uint32_t nn = tp_topology_node_count(t);
	double *perf = malloc(TP_MAX_NODE_DEVICES * sizeof *perf);
	if (!perf)
		bench_die("out of memory");
	for (uint32_t node = 0; node < nn; node++) {
		const char *path[TP_MAX_LEVELS];
		for (unsigned l = 0; l + 1 < nl; l++)
			path[l] = tp_topology_domain_name(t, l, tp_topology_node_domain(t, node, l));
		uint32_t first, n;
		BENCH_CHECK(tp_topology_domain_devices(t, f->node_level, node, &first, &n), "devices");
		tp_node_options o = TP_NODE_OPTIONS_INIT;
		o.model = tp_topology_node_model(t, node);
		o.memory_gb = tp_topology_node_memory_gb(t, node);
		for (uint32_t d = 0; d < n; d++)
			perf[d] = tp_topology_device_perf(t, first + d);
		o.device_perf = perf;
		o.type = tp_topology_node_type(t, node);
		const char *name = tp_topology_node_name(t, node);
		BENCH_CHECK(tp_topology_builder_add_node(b, name, nl > 1 ? path : NULL, n, &o),
		            "add_node");
		char feed[32];
		snprintf(feed, sizeof feed, "feed%u",
		         tp_topology_node_domain(t, node, f->base_level) / 2);
		BENCH_CHECK(tp_topology_builder_add_failure_domain(b, FEED_KIND, feed, name, -1),
		            "add_failure_domain");
	}
	free(perf);
	for (unsigned l = 0; l + 1 < nl; l++)
		for (uint32_t d = 0; d < tp_topology_domain_count(t, l); d++) {
			char path[512];
			BENCH_CHECK(tp_topology_domain_path(t, l, d, path, sizeof path), "path");
			if (tp_topology_domain_fabric(t, (int)l, d, &kind, &gbps, &lat) == 1)
				BENCH_CHECK(tp_topology_builder_set_domain_fabric(b, l, path, kind, gbps, lat),
				            "set_domain_fabric");
			unsigned ns = tp_topology_domain_nvswitch_count(t, l, d);
			const char *names[TP_MAX_LEVELS];
			uint32_t first, n;
			BENCH_CHECK(tp_topology_domain_nodes(t, l, d, &first, &n), "nodes");
			for (unsigned k = 0; k <= l; k++)
				names[k] = tp_topology_domain_name(t, k, tp_topology_node_domain(t, first, k));
			for (unsigned s = 0; s < ns; s++) {
				char sw[32];
				snprintf(sw, sizeof sw, "nvswitch%u", s);
				BENCH_CHECK(tp_topology_builder_add_nvswitch(b, l, names, sw), "nvswitch");
			}
		}
	tp_topology *out;
	BENCH_CHECK(tp_topology_build(b, &out), "build");
	tp_topology_builder_destroy(b);
	if (tp_topology_device_count(out) != f->gpus || tp_topology_node_count(out) != nn)
		bench_die("sim_serving: the fleet rebuilt with feeds differs from the fleet");
	for (uint32_t node = 0; node < nn; node++)
		if (strcmp(tp_topology_node_name(out, node), tp_topology_node_name(t, node)) != 0)
			bench_die("sim_serving: node %u of the rebuilt fleet is %s, not %s", node,
			          tp_topology_node_name(out, node), tp_topology_node_name(t, node));
	return out;
}

/* Whether the service keeps ceil(A x want) replicas when the worst domain goes: per rack
 * (feed = false) or per feed (racks 2k and 2k + 1, the failure domains of FEED_KIND). */
static bool survives(struct srun *r, const struct svc *s, bool feed)
{
	uint32_t nr = feed ? tp_topology_fd_count(r->f->t, 0)
	                   : tp_topology_domain_count(r->f->t, r->f->base_level);
	uint32_t need = (uint32_t)ceil(s->target * s->want - 1e-9), worst = 0;
	memset(r->rack_hits, 0, nr * sizeof *r->rack_hits);
	for (uint32_t k = 0; k < s->nrep; k++) {
		char id[32];
		snprintf(id, sizeof id, "%s/r%u", s->name, s->rep[k]);
		const uint32_t *devs;
		size_t n;
		if (tp_cluster_job_devices(r->ctx.c, id, &devs, &n))
			bench_die("sim_serving: replica %s is not running", id);
		uint32_t last = UINT32_MAX;
		for (size_t d = 0; d < n; d++) { /* count the replica once in each domain it touches */
			uint32_t dom = domain_of(r->f, devs[d], feed);
			bool seen = dom == last;
			for (size_t e = 0; e < d && !seen; e++)
				seen = domain_of(r->f, devs[e], feed) == dom;
			if (!seen && ++r->rack_hits[dom] > worst)
				worst = r->rack_hits[dom];
			last = dom;
		}
	}
	return s->nrep >= need && s->nrep - worst >= need;
}

static void judge(struct srun *r, struct svc *s)
{
	s->ok_rack = survives(r, s, false);
	s->ok_feed = survives(r, s, true);
}

/* Place one replica of s: true when it runs. */
static bool place_replica(struct srun *r, struct svc *s)
{
	struct sim_job j;
	memset(&j, 0, sizeof j);
	j.gpus = s->gpus;
	j.cls = TP_CLASS_INFERENCE;
	j.duration_s = s->depart_s - r->now;
	j.service = strncmp(r->pol->name, "topoplace", 9) == 0 ? s->name : NULL;
	sim_job_shape(r->f, &j);
	uint32_t id = r->next_rep;
	uint32_t *devs = r->devs;
	int rc = r->pol->place(r->st, &r->ctx, &j, id, devs);
	if (rc < 0) {
		r->refused++;
		return false;
	}
	char name[32];
	snprintf(name, sizeof name, "%s/r%u", s->name, id);
	tp_slice sl;
	char rid[24];
	tp_request shape = sim_tp_request(r->f, &j, id, &sl, rid);
	shape.service = s->name; /* counted for every policy; only topoplace asks for caps */
	tp_job_options o = TP_JOB_OPTIONS_INIT;
	o.job_class = TP_CLASS_INFERENCE;
	o.shape = &shape;
	BENCH_CHECK(tp_cluster_assign(r->ctx.c, name, devs, j.gpus, &o), "tp_cluster_assign");
	if (s->nrep == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 8;
		s->rep = realloc(s->rep, s->cap * sizeof *s->rep);
		if (!s->rep)
			bench_die("out of memory");
	}
	s->rep[s->nrep++] = id;
	r->rep_eff[id] = sim_efficiency(r->f, &j, devs, r->o->use_cost);
	r->next_rep++;
	r->placed++;
	return true;
}

static void fill(struct srun *r, struct svc *s)
{
	while (s->live && s->nrep < s->want && place_replica(r, s))
		;
	judge(r, s);
}

static void advance(struct srun *r, double t)
{
	double dt = (t - r->now) / 3600.0;
	if (dt <= 0)
		return;
	for (size_t i = 0; i < r->ns; i++) {
		const struct svc *s = &r->s[i];
		if (!s->live)
			continue;
		r->svc_h += dt;
		r->bound_h += s->want - 1 >= (uint32_t)ceil(s->target * s->want - 1e-9) ? dt : 0;
		r->up_h += s->nrep >= (uint32_t)ceil(s->target * s->want - 1e-9) ? dt : 0;
		r->rack_h += s->ok_rack ? dt : 0;
		r->feed_h += s->ok_feed ? dt : 0;
		for (uint32_t k = 0; k < s->nrep; k++)
			r->eff_gpu_h += s->gpus * r->rep_eff[s->rep[k]] * dt;
	}
	r->now = t;
}

static void depart(struct srun *r, struct svc *s)
{
	for (uint32_t k = 0; k < s->nrep; k++) {
		char name[32];
		snprintf(name, sizeof name, "%s/r%u", s->name, s->rep[k]);
		BENCH_CHECK(tp_cluster_release(r->ctx.c, name), "tp_cluster_release");
	}
	s->nrep = 0;
	s->live = false;
}

/* The service's caps: on the rack level at most 100 (1 - A) percent of its replicas; on the
 * power feeds at most the replicas it may lose, floor((1 - A) x want), or where the feeds are
 * too few for that (want > feeds x that), as evenly as they allow, ceil(want / feeds): a share
 * cap could not let the service grow past one replica per feed there (max(1, floor(x (R + 1) /
 * 100)) stays 1 while R + 1 < 200 / x), and no placement on so few feeds survives a feed loss
 * anyway. Set again when the service scales out. */
static void set_caps(struct srun *r, const struct svc *s)
{
	tp_service_caps c = TP_SERVICE_CAPS_INIT;
	c.level = r->f->level_name[r->f->base_level];
	c.max_percent = 100.0 * (1.0 - s->target);
	c.fd_kind = FEED_KIND;
	uint32_t feeds = tp_topology_fd_count(r->f->t, 0);
	uint32_t lose = (uint32_t)floor((1.0 - s->target) * s->want + 1e-9);
	uint32_t even = (s->want + feeds - 1) / feeds;
	c.fd_max_per_domain = lose > even ? lose : even;
	c.fd_max_per_domain = c.fd_max_per_domain ? c.fd_max_per_domain : 1;
	BENCH_CHECK(tp_cluster_set_service_caps(r->ctx.c, s->name, &c), "caps");
}

static void run_policy(struct srun *r, const struct sev *ev, size_t nev)
{
	BENCH_CHECK(tp_cluster_create(&r->ctx.c, r->f->t, NULL), "tp_cluster_create");
	r->ctx.f = r->f;
	bench_rng_seed(&r->ctx.rng, r->o->seed ^ 0x5151u);
	r->st = r->pol->create(&r->ctx);
	bool caps = strncmp(r->pol->name, "topoplace", 9) == 0;
	for (size_t i = 0; i < nev; i++) {
		advance(r, ev[i].t);
		struct svc *s = &r->s[ev[i].svc];
		if (ev[i].kind == EV_ARRIVE) {
			s->live = true;
			if (caps)
				set_caps(r, s);
		} else if (ev[i].kind == EV_SCALE && s->live) {
			s->want += s->scale_by;
			if (caps)
				set_caps(r, s);
		} else if (ev[i].kind == EV_DEPART) {
			depart(r, s);
		}
		if (s->live)
			fill(r, s);
		/* waiting replicas of the oldest services get the room first (64 at most a step) */
		for (size_t k = 0, tried = 0; k < r->ns && tried < 64; k++)
			if (r->s[k].live && r->s[k].nrep < r->s[k].want) {
				fill(r, &r->s[k]);
				tried++;
			}
	}
	char buf[256];
	if (tp_cluster_check(r->ctx.c, buf, sizeof buf) < 0)
		bench_die("tp_cluster_check after policy %s: %s", r->pol->name, buf);
	r->pol->destroy(r->st);
	tp_cluster_destroy(r->ctx.c);
	r->ctx.c = NULL;
}

void sim_serving_run(const struct sim_opts *o, const struct sim_fleet *fleet)
{
	struct sim_fleet fed = *fleet; /* the same fleet, with its power feeds declared */
	fed.t = with_feeds(fleet);
	const struct sim_fleet *f = &fed;
	struct srun base;
	memset(&base, 0, sizeof base);
	base.o = o;
	base.f = f;
	base.ns = o->inference;
	gen_services(&base);
	size_t nev = 3 * base.ns, maxrep = 0;
	struct sev *ev = malloc(nev * sizeof *ev);
	if (!ev)
		bench_die("out of memory");
	for (size_t i = 0; i < base.ns; i++) {
		ev[3 * i] = (struct sev){base.s[i].arrive_s, (uint32_t)i, EV_ARRIVE};
		ev[3 * i + 1] = (struct sev){base.s[i].scale_s, (uint32_t)i, EV_SCALE};
		ev[3 * i + 2] = (struct sev){base.s[i].depart_s, (uint32_t)i, EV_DEPART};
		maxrep += base.s[i].want + base.s[i].scale_by;
	}
	qsort(ev, nev, sizeof *ev, sev_cmp);
	double bound = 0;
	printf("inference class: %zu services on %u GPUs (%s, %u power feeds of two racks), offered "
	       "load %.2f, seed %llu; replicas of 1-2 nodes, availability target 50%% or 75%%, "
	       "scale-out at mid-life\n", base.ns, f->gpus, o->fleet, tp_topology_fd_count(f->t, 0),
	       o->load, (unsigned long long)o->seed);
	printf("%-18s %10s %8s %10s %10s %14s %10s\n", "policy", "svc-hours", "up", "rack-safe",
	       "feed-safe", "eff GPU-hours", "refusals");
	for (size_t p = 0; p < sim_npolicies; p++) {
		const struct sim_policy *pol = &sim_policies[p];
		const char *why;
		if (!pol->uses_cluster || !bench_list_has(o->policies, pol->name))
			continue;
		if (!sim_policy_runs_on(pol, f, &why)) { /* the torus baselines: not on this fleet */
			if (o->policies)
				printf("policy %s left out on %s: %s\n", pol->name, o->fleet, why);
			continue;
		}
		struct srun r = base;
		r.pol = pol;
		r.s = calloc(base.ns, sizeof *r.s);
		r.rep_eff = calloc(maxrep ? maxrep : 1, sizeof *r.rep_eff);
		r.rack_hits = calloc(tp_topology_domain_count(f->t, f->base_level) + 1,
		                     sizeof *r.rack_hits);
		r.ctx.scratch = malloc(f->gpus * sizeof *r.ctx.scratch);
		r.devs = malloc(f->gpus * sizeof *r.devs);
		if (!r.s || !r.rep_eff || !r.rack_hits || !r.ctx.scratch || !r.devs)
			bench_die("out of memory");
		memcpy(r.s, base.s, base.ns * sizeof *r.s);
		r.now = ev[0].t;
		run_policy(&r, ev, nev);
		printf("%-18s %10.0f %7.1f%% %9.1f%% %9.1f%% %14.0f %10llu\n", pol->name, r.svc_h,
		       100 * r.up_h / r.svc_h, 100 * r.rack_h / r.svc_h, 100 * r.feed_h / r.svc_h,
		       r.eff_gpu_h, (unsigned long long)r.refused);
		bound = 100 * r.bound_h / r.svc_h;
		for (size_t i = 0; i < r.ns; i++)
			free(r.s[i].rep);
		free(r.s);
		free(r.rep_eff);
		free(r.rack_hits);
		free(r.ctx.scratch);
		free(r.devs);
	}
	printf("(bound: a target is met at all only when want - 1 >= ceil(A x want), one replica "
	       "per domain; %.1f%% of the service-hours)\n", bound);
	free(ev);
	free(base.s);
	tp_topology_destroy(fed.t);
}
