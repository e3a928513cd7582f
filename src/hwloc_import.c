/* SPDX-License-Identifier: MIT */
/*
 * hwloc importer: a node type from an hwloc topology (see topoplace-hwloc.h for what is read).
 *
 * Two passes. The scan walks the hwloc tree once, in its order, and records the objects that
 * matter (GPUs, NICs, NVSwitches, the PCIe switches above GPUs and NICs) in arrays indexed by
 * hwloc's logical indexes, so the caller's topology is never written to (no userdata). The
 * build then creates the node type through its public functions; until it succeeds the node
 * type is private, so a failure leaves nothing behind.
 */
#include "topoplace-hwloc.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common.h"

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_VENDOR_AMD 0x1002
#define PCI_CLASS_DISPLAY 0x03      /* base class: display / 3D controllers */
#define PCI_CLASS_DISPLAY_OTHER 0x0380 /* AMD Instinct accelerators (MI50 ... MI250) */
#define PCI_CLASS_ACCEL 0x12        /* base class: processing accelerators (MI300) */
#define PCI_CLASS_NETWORK 0x02      /* base class: network (0x0207 InfiniBand included) */
#define PCI_CLASS_ETHERNET 0x0200
#define PCI_CLASS_INFINIBAND 0x0207
#define PCI_CLASS_BRIDGE_OTHER 0x0680
/*
 * The largest NVLink figure believed, in GB/s one direction between two GPUs (direct links plus
 * the NVSwitch share). NVLink 5 (GB200, 2024) gives a GPU 900 GB/s one direction in all; 10 TB/s
 * leaves ten times that for later generations. A larger figure is a corrupt or mis-scaled
 * matrix (a u64 of 2^64 - 1 MB/s is 1.8e16 GB/s), not a machine: refused.
 */
#define NVLINK_MAX_GBPS 10000.0
#define PCIE_MAX_GBPS 1000.0        /* a link rate above this is not believed (x16 Gen6: 121) */
#define PCIE_LATENCY_US 5.0         /* the latency of a PCIe-only node's fabric (an assumption) */
#define BUSID_LEN 16                /* "dddd:bb:dd.f" and its NUL */
#define XML_MAX_BYTES (1 << 26)     /* 64 MiB: lstopo writes a few MB for the largest machines */

/* What a PCI device is to a node type. */
enum role { ROLE_NONE = 0, ROLE_GPU, ROLE_NIC, ROLE_NVSWITCH };

struct scan {
	const tp_allocator *a;
	hwloc_topology_t topo;
	/* [number of PCI devices] role of each, by logical index */
	unsigned char *pci_role;
	/* [number of bridges] 1 when the bridge heads a kept PCIe switch, then its switch id + 2 */
	int *bridge_sw;
	unsigned npci, nbridge;
	/* the devices of each role, in the topology's order */
	hwloc_obj_t *gpu, *nic, *nvs;
	unsigned ngpu, nnic, nnvs;
	size_t cap_gpu, cap_nic, cap_nvs;
	/* [npci] GPU index of each PCI device, or -1 */
	int *pci_gpu;
	/* kept switches in the topology's order: their bridge and parent switch */
	hwloc_obj_t *sw;
	int *sw_parent;
	unsigned nsw;
};

/* ---- messages --------------------------------------------------------------------------- */

#define fail tp_errbuf_set /* the caller-buffer channel (common.h) */

static void clear_err(char *errbuf, size_t errlen)
{
	if (errbuf && errlen)
		errbuf[0] = '\0';
}

static void busid_of(const struct hwloc_pcidev_attr_s *p, char buf[BUSID_LEN])
{
	snprintf(buf, BUSID_LEN, "%04x:%02x:%02x.%01x", (unsigned)p->domain, (unsigned)p->bus,
	         (unsigned)p->dev, (unsigned)p->func);
}

static void busid(hwloc_obj_t pci, char buf[BUSID_LEN])
{
	busid_of(&pci->attr->pcidev, buf);
}

/* ---- classification --------------------------------------------------------------------- */

static bool is_word(const char *s, const char *w)
{
	return s && strcasecmp(s, w) == 0;
}

/* "nvml3", "cuda0": a name hwloc gives the OS devices of NVIDIA GPUs. */
static bool is_numbered(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);
	return s && strncmp(s, prefix, n) == 0 && s[n] >= '0' && s[n] <= '9';
}

/* An OS device that hwloc's NVML or CUDA backend made for a GPU. */
static bool osdev_is_nvidia_gpu(hwloc_obj_t os)
{
	const char *backend = hwloc_obj_get_info_by_name(os, "Backend");
	return is_word(os->subtype, "NVML") || is_word(os->subtype, "CUDA") ||
	       is_word(backend, "NVML") || is_word(backend, "CUDA") ||
	       is_numbered(os->name, "nvml") || is_numbered(os->name, "cuda");
}

/* An OS device that hwloc's RSMI backend made for an AMD GPU. */
static bool osdev_is_amd_gpu(hwloc_obj_t os)
{
	const char *backend = hwloc_obj_get_info_by_name(os, "Backend");
	return is_word(os->subtype, "RSMI") || is_word(backend, "RSMI") ||
	       is_numbered(os->name, "rsmi");
}

static bool osdev_is_network(hwloc_obj_t os)
{
	return os->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK ||
	       os->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
}

static enum role pci_role(hwloc_obj_t pci)
{
	unsigned cls = pci->attr->pcidev.class_id;
	bool nvidia = pci->attr->pcidev.vendor_id == PCI_VENDOR_NVIDIA;
	bool amd = pci->attr->pcidev.vendor_id == PCI_VENDOR_AMD;
	bool net_os = false;
	for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
		if (c->type != HWLOC_OBJ_OS_DEVICE)
			continue;
		if (osdev_is_nvidia_gpu(c) || osdev_is_amd_gpu(c))
			return ROLE_GPU;
		net_os = net_os || osdev_is_network(c);
	}
	if (nvidia && (cls >> 8) == PCI_CLASS_DISPLAY)
		return ROLE_GPU;
	/* AMD's VGA parts (0x0300, such as the ES1000 of many server boards) are not GPUs here. */
	if (amd && (cls == PCI_CLASS_DISPLAY_OTHER || (cls >> 8) == PCI_CLASS_ACCEL))
		return ROLE_GPU;
	if (is_word(pci->subtype, "NVSwitch") || (nvidia && cls == PCI_CLASS_BRIDGE_OTHER))
		return ROLE_NVSWITCH;
	if ((cls >> 8) == PCI_CLASS_NETWORK || net_os)
		return ROLE_NIC;
	return ROLE_NONE;
}

/* RDMA when it has an OpenFabrics OS device (InfiniBand, RoCE, Omni-Path) or is an InfiniBand
 * controller; plain Ethernet when it is an Ethernet controller or has a network interface only. */
static tp_nic_kind nic_kind(hwloc_obj_t pci)
{
	unsigned cls = pci->attr->pcidev.class_id;
	bool net = false;
	for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
		if (c->type != HWLOC_OBJ_OS_DEVICE)
			continue;
		if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS)
			return TP_NIC_RDMA;
		net = net || c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK;
	}
	if (cls == PCI_CLASS_INFINIBAND)
		return TP_NIC_RDMA;
	return cls == PCI_CLASS_ETHERNET || net ? TP_NIC_ETHERNET : TP_NIC_UNKNOWN;
}

/* Package, NUMA node (when the device's CPU-side ancestor covers exactly one) and host bridge of
 * an I/O object, as logical indexes / the NUMA os_index; -1 where there is none. */
static void io_locality(hwloc_topology_t topo, hwloc_obj_t o, int loc[3])
{
	loc[0] = loc[1] = loc[2] = -1;
	hwloc_obj_t cpu = hwloc_get_non_io_ancestor_obj(topo, o);
	for (hwloc_obj_t a = cpu; a; a = a->parent)
		if (a->type == HWLOC_OBJ_PACKAGE && a->logical_index <= INT_MAX) {
			loc[0] = (int)a->logical_index;
			break;
		}
	if (cpu && cpu->nodeset && hwloc_bitmap_weight(cpu->nodeset) == 1) {
		int first = hwloc_bitmap_first(cpu->nodeset);
		loc[1] = first >= 0 ? first : -1;
	}
	hwloc_obj_t host = NULL;
	for (hwloc_obj_t a = o->parent; a && a->type == HWLOC_OBJ_BRIDGE; a = a->parent)
		host = a;
	if (host && host->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST &&
	    host->logical_index <= INT_MAX)
		loc[2] = (int)host->logical_index;
}

/* The name a NIC is known by: OpenFabrics device, else network interface, else bus id. */
static void nic_name(hwloc_obj_t pci, char *buf, size_t len)
{
	const char *net = NULL, *ofed = NULL;
	for (hwloc_obj_t c = pci->io_first_child; c; c = c->next_sibling) {
		if (c->type != HWLOC_OBJ_OS_DEVICE || !c->name || !c->name[0])
			continue;
		if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && !ofed)
			ofed = c->name;
		else if (c->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && !net)
			net = c->name;
	}
	const char *name = ofed ? ofed : net;
	if (name && !tp_name_problem(name, false)) {
		snprintf(buf, len, "%s", name);
		return;
	}
	char id[BUSID_LEN];
	busid(pci, id);
	snprintf(buf, len, "%s", id);
}

/* ---- PCIe switches ---------------------------------------------------------------------- */

static bool is_pci_bridge(hwloc_obj_t o)
{
	return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI;
}

/* PCI-to-PCI bridges from the host bridge down to o, o included. */
static unsigned bridge_count(hwloc_obj_t o)
{
	unsigned n = 0;
	for (; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent)
		if (is_pci_bridge(o))
			n++;
	return n;
}

/* A switch's upstream port: an even count (1 is a root port, odd counts downstream ports). */
static bool heads_switch(hwloc_obj_t o)
{
	if (!is_pci_bridge(o))
		return false;
	unsigned n = bridge_count(o);
	return n >= 2 && n % 2 == 0;
}

/* The switch an object sits behind: its nearest ancestor that heads a switch, or NULL. */
static hwloc_obj_t switch_above(hwloc_obj_t o)
{
	for (o = o->parent; o && o->type == HWLOC_OBJ_BRIDGE; o = o->parent)
		if (heads_switch(o))
			return o;
	return NULL;
}

/* Mark every switch from the one above dev up to the root as kept. */
static void keep_switches_above(struct scan *s, hwloc_obj_t dev)
{
	for (hwloc_obj_t b = switch_above(dev); b; b = switch_above(b)) {
		if (b->logical_index >= s->nbridge || s->bridge_sw[b->logical_index])
			return;
		s->bridge_sw[b->logical_index] = 1;
	}
}

/* ---- the scan --------------------------------------------------------------------------- */

static int push_obj(const tp_allocator *a, hwloc_obj_t **arr, unsigned *n, size_t *cap,
                    hwloc_obj_t o)
{
	if (tp_grow(a, (void **)arr, cap, (size_t)*n + 1, sizeof **arr))
		return TP_ENOMEM;
	(*arr)[(*n)++] = o;
	return 0;
}

/* First pass, in the topology's order: the role of every PCI device. */
static int scan_devices(struct scan *s, hwloc_obj_t o)
{
	int rc = 0;
	if (o->type == HWLOC_OBJ_PCI_DEVICE && o->logical_index < s->npci) {
		enum role r = pci_role(o);
		s->pci_role[o->logical_index] = (unsigned char)r;
		if (r == ROLE_GPU) {
			s->pci_gpu[o->logical_index] = (int)s->ngpu;
			rc = push_obj(s->a, &s->gpu, &s->ngpu, &s->cap_gpu, o);
		} else if (r == ROLE_NIC) {
			rc = push_obj(s->a, &s->nic, &s->nnic, &s->cap_nic, o);
		} else if (r == ROLE_NVSWITCH) {
			rc = push_obj(s->a, &s->nvs, &s->nnvs, &s->cap_nvs, o);
		}
		if (rc)
			return rc;
		if (r == ROLE_GPU || r == ROLE_NIC)
			keep_switches_above(s, o);
	}
	for (hwloc_obj_t c = o->first_child; c && !rc; c = c->next_sibling)
		rc = scan_devices(s, c);
	for (hwloc_obj_t c = o->io_first_child; c && !rc; c = c->next_sibling)
		rc = scan_devices(s, c);
	return rc;
}

/* Second pass, in the same order: number the kept switches, parents before children. */
static int scan_switches(struct scan *s, hwloc_obj_t o, size_t *cap)
{
	if (o->type == HWLOC_OBJ_BRIDGE && o->logical_index < s->nbridge &&
	    s->bridge_sw[o->logical_index] == 1) {
		hwloc_obj_t up = switch_above(o);
		int parent = up ? s->bridge_sw[up->logical_index] - 2 : -1;
		size_t cap2 = *cap;
		if (tp_grow(s->a, (void **)&s->sw, cap, (size_t)s->nsw + 1, sizeof *s->sw) ||
		    tp_grow(s->a, (void **)&s->sw_parent, &cap2, (size_t)s->nsw + 1, sizeof(int)))
			return TP_ENOMEM;
		*cap = cap2 < *cap ? cap2 : *cap;
		s->sw[s->nsw] = o;
		s->sw_parent[s->nsw] = parent;
		s->bridge_sw[o->logical_index] = (int)s->nsw + 2;
		s->nsw++;
	}
	int rc = 0;
	for (hwloc_obj_t c = o->first_child; c && !rc; c = c->next_sibling)
		rc = scan_switches(s, c, cap);
	for (hwloc_obj_t c = o->io_first_child; c && !rc; c = c->next_sibling)
		rc = scan_switches(s, c, cap);
	return rc;
}

/* The switch id a device sits behind, or -1 for the host bridge. */
static int device_switch(const struct scan *s, hwloc_obj_t dev)
{
	hwloc_obj_t b = switch_above(dev);
	return b ? s->bridge_sw[b->logical_index] - 2 : -1;
}

static void scan_free(struct scan *s)
{
	tp_free(s->a, s->pci_role);
	tp_free(s->a, s->pci_gpu);
	tp_free(s->a, s->bridge_sw);
	tp_free(s->a, s->gpu);
	tp_free(s->a, s->nic);
	tp_free(s->a, s->nvs);
	tp_free(s->a, s->sw);
	tp_free(s->a, s->sw_parent);
}

/* PCI bus-id order (domain, bus, device, function), the order CUDA, NVML and Slurm number GPUs
 * in; hwloc writes the PCI tree by NUMA node, which can differ. */
static int cmp_busid(const void *x, const void *y)
{
	const struct hwloc_pcidev_attr_s *a = &(*(const hwloc_obj_t *)x)->attr->pcidev;
	const struct hwloc_pcidev_attr_s *b = &(*(const hwloc_obj_t *)y)->attr->pcidev;
	uint64_t ka = (uint64_t)a->domain << 24 | (uint64_t)a->bus << 16 | (uint64_t)a->dev << 8 |
	              a->func;
	uint64_t kb = (uint64_t)b->domain << 24 | (uint64_t)b->bus << 16 | (uint64_t)b->dev << 8 |
	              b->func;
	if (ka != kb)
		return ka < kb ? -1 : 1;
	unsigned la = (*(const hwloc_obj_t *)x)->logical_index;
	unsigned lb = (*(const hwloc_obj_t *)y)->logical_index;
	return (la > lb) - (la < lb);
}

static void sort_gpus(struct scan *s)
{
	if (s->ngpu > 1)
		qsort(s->gpu, s->ngpu, sizeof *s->gpu, cmp_busid);
	for (unsigned i = 0; i < s->ngpu; i++)
		s->pci_gpu[s->gpu[i]->logical_index] = (int)i;
}

static int scan_run(struct scan *s)
{
	int np = hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_PCI_DEVICE);
	int nb = hwloc_get_nbobjs_by_type(s->topo, HWLOC_OBJ_BRIDGE);
	s->npci = np > 0 ? (unsigned)np : 0;
	s->nbridge = nb > 0 ? (unsigned)nb : 0;
	s->pci_role = tp_calloc(s->a, s->npci, 1);
	s->pci_gpu = tp_mallocn(s->a, s->npci ? s->npci : 1, sizeof(int));
	s->bridge_sw = tp_calloc(s->a, s->nbridge, sizeof(int));
	if (!s->pci_role || !s->pci_gpu || !s->bridge_sw)
		return TP_ENOMEM;
	for (unsigned i = 0; i < s->npci; i++)
		s->pci_gpu[i] = -1;
	hwloc_obj_t root = hwloc_get_root_obj(s->topo);
	int rc = scan_devices(s, root);
	if (rc)
		return rc;
	sort_gpus(s);
	size_t cap = 0;
	return scan_switches(s, root, &cap);
}

/* ---- NVLink ----------------------------------------------------------------------------- */

/* The GPU an object of the NVLink matrix stands for (an OS device or its PCI device), or -1. */
static int matrix_gpu(const struct scan *s, hwloc_obj_t o)
{
	while (o && o->type == HWLOC_OBJ_OS_DEVICE)
		o = o->parent;
	if (!o || o->type != HWLOC_OBJ_PCI_DEVICE || o->logical_index >= s->npci)
		return -1;
	return s->pci_gpu[o->logical_index];
}

static bool matrix_nvswitch(const struct scan *s, hwloc_obj_t o)
{
	return o && o->type == HWLOC_OBJ_PCI_DEVICE && o->logical_index < s->npci &&
	       s->pci_role[o->logical_index] == ROLE_NVSWITCH;
}

/* How an object of the NVLink matrix is named in a message. */
static void matrix_obj_name(hwloc_obj_t o, char *buf, size_t len)
{
	if (o->type == HWLOC_OBJ_PCI_DEVICE) {
		char id[BUSID_LEN];
		busid(o, id);
		snprintf(buf, len, "PCI %s", id);
	} else {
		snprintf(buf, len, "%s %s", hwloc_obj_type_string(o->type),
		         o->name ? o->name : "(unnamed)");
	}
}

/* GB/s between GPU pairs from the "NVLinkBandwidth" matrix (MB/s) into bw[ngpu * ngpu];
 * *found is false when the topology has no such matrix. A value above NVLINK_MAX_GBPS is
 * TP_EPARSE with the message in errbuf. */
static int nvlink_matrix(const struct scan *s, double *bw, bool *found, char *errbuf,
                         size_t errlen)
{
	unsigned nr = 1;
	struct hwloc_distances_s *d = NULL;
	*found = false;
	if (hwloc_distances_get_by_name(s->topo, "NVLinkBandwidth", &nr, &d, 0) < 0)
		return errno == ENOMEM ? TP_ENOMEM : 0;
	if (nr == 0 || !d)
		return 0;
	*found = true;
	unsigned n = d->nbobjs, g = s->ngpu;
	int *gpu_of = tp_mallocn(s->a, n ? n : 1, sizeof(int));
	double *to_sw = tp_calloc(s->a, g, sizeof(double));
	if (!gpu_of || !to_sw) {
		tp_free(s->a, gpu_of);
		tp_free(s->a, to_sw);
		hwloc_distances_release(s->topo, d);
		return TP_ENOMEM;
	}
	for (unsigned i = 0; i < n; i++)
		gpu_of[i] = matrix_gpu(s, d->objs[i]);
	for (unsigned i = 0; i < n; i++) {
		int x = gpu_of[i];
		if (x < 0)
			continue;
		for (unsigned j = 0; j < n; j++) {
			double v = (double)d->values[(size_t)i * n + j] / 1000.0;
			int y = gpu_of[j];
			if (v > NVLINK_MAX_GBPS) {
				char from[64], to[64];
				matrix_obj_name(d->objs[i], from, sizeof from);
				matrix_obj_name(d->objs[j], to, sizeof to);
				fail(errbuf, errlen, TP_EPARSE,
				     "the NVLinkBandwidth matrix gives %s -> %s %" PRIu64 " MB/s, above "
				     "the %.0f GB/s believed (ten times NVLink 5's 900 GB/s per GPU)",
				     from, to, d->values[(size_t)i * n + j], NVLINK_MAX_GBPS);
				tp_free(s->a, gpu_of);
				tp_free(s->a, to_sw);
				hwloc_distances_release(s->topo, d);
				return TP_EPARSE;
			}
			if (matrix_nvswitch(s, d->objs[j])) {
				to_sw[x] += v;
			} else if (y >= 0 && y != x) {
				double *cell = &bw[(size_t)x * g + (unsigned)y];
				double *mirror = &bw[(size_t)y * g + (unsigned)x];
				if (v > *cell)
					*cell = *mirror = v;
			}
		}
	}
	for (unsigned x = 0; x < g; x++)
		for (unsigned y = 0; y < g; y++)
			if (x != y && to_sw[x] > 0 && to_sw[y] > 0)
				bw[(size_t)x * g + y] += to_sw[x] < to_sw[y] ? to_sw[x] : to_sw[y];
	tp_free(s->a, gpu_of);
	tp_free(s->a, to_sw);
	hwloc_distances_release(s->topo, d);
	return 0;
}

/* ---- building the node type ------------------------------------------------------------- */

/* A failed node-type call: its message, with what was being added, into errbuf. */
static int build_fail(tp_nodetype *nt, int rc, const char *what, char *errbuf, size_t errlen)
{
	if (rc == TP_ENOMEM)
		return fail(errbuf, errlen, rc, "out of memory adding %s", what);
	return fail(errbuf, errlen, rc, "%s: %s", what, tp_nodetype_errmsg(nt));
}

static int build_pcie(const struct scan *s, tp_nodetype *nt, char *errbuf, size_t errlen)
{
	char id[BUSID_LEN], what[64];
	for (unsigned i = 0; i < s->nsw; i++) {
		int rc = tp_nodetype_add_pcie_switch(nt, s->sw_parent[i], NULL);
		if (rc) {
			busid_of(&s->sw[i]->attr->bridge.upstream.pci, id);
			snprintf(what, sizeof what, "the PCIe switch at %s", id);
			return build_fail(nt, rc, what, errbuf, errlen);
		}
	}
	for (unsigned i = 0; i < s->ngpu; i++) {
		int loc[3];
		io_locality(s->topo, s->gpu[i], loc);
		busid(s->gpu[i], id);
		int rc = tp_nodetype_set_gpu_switch(nt, i, device_switch(s, s->gpu[i]));
		if (!rc)
			rc = tp_nodetype_set_gpu_bus_id(nt, i, id);
		if (!rc)
			rc = tp_nodetype_set_gpu_locality(nt, i, loc[0], loc[1], loc[2]);
		/* the link rate hwloc read (GB/s; 0 when the file does not say) prices GPU pairs
		 * that have no NVLink figure (tp_nodetype_pair_gbps) */
		float speed = s->gpu[i]->attr->pcidev.linkspeed;
		if (!rc && speed > 0 && speed < PCIE_MAX_GBPS)
			rc = tp_nodetype_set_gpu_pcie_gbps(nt, i, speed);
		if (rc) {
			busid(s->gpu[i], id);
			snprintf(what, sizeof what, "GPU %u (%s)", i, id);
			return build_fail(nt, rc, what, errbuf, errlen);
		}
	}
	return 0;
}

static int build_devices(const struct scan *s, tp_nodetype *nt, char *errbuf, size_t errlen)
{
	char name[TP_MAX_NAME + 1], what[TP_MAX_NAME + 32];
	for (unsigned i = 0; i < s->nnic; i++) {
		nic_name(s->nic[i], name, sizeof name);
		int loc[3];
		io_locality(s->topo, s->nic[i], loc);
		int rc = tp_nodetype_add_nic(nt, name, device_switch(s, s->nic[i]), 0.0, NULL);
		if (!rc)
			rc = tp_nodetype_set_nic_kind(nt, i, nic_kind(s->nic[i]));
		if (!rc)
			rc = tp_nodetype_set_nic_locality(nt, i, loc[0], loc[1], loc[2]);
		if (rc) {
			snprintf(what, sizeof what, "NIC %s", name);
			return build_fail(nt, rc, what, errbuf, errlen);
		}
	}
	for (unsigned i = 0; i < s->nnvs; i++) {
		busid(s->nvs[i], name);
		int rc = tp_nodetype_add_nvswitch(nt, name, NULL);
		if (rc) {
			snprintf(what, sizeof what, "NVSwitch %s", name);
			return build_fail(nt, rc, what, errbuf, errlen);
		}
	}
	return 0;
}

static int build_nvlink(const struct scan *s, tp_nodetype *nt, char *errbuf, size_t errlen)
{
	unsigned g = s->ngpu;
	double *bw = tp_calloc(s->a, (size_t)g * g, sizeof(double));
	if (!bw)
		return fail(errbuf, errlen, TP_ENOMEM, "out of memory reading the NVLink matrix");
	bool found = false;
	int rc = nvlink_matrix(s, bw, &found, errbuf, errlen);
	if (rc) {
		tp_free(s->a, bw);
		return rc == TP_EPARSE
		               ? rc
		               : fail(errbuf, errlen, rc, "out of memory reading the NVLink matrix");
	}
	for (unsigned x = 0; x < g && !rc; x++) {
		for (unsigned y = x + 1; y < g && !rc; y++) {
			double v = bw[(size_t)x * g + y];
			if (v > NVLINK_MAX_GBPS) {
				tp_free(s->a, bw);
				return fail(errbuf, errlen, TP_EPARSE,
				            "the NVLinkBandwidth matrix gives GPUs %u and %u %.0f GB/s "
				            "(direct links plus NVSwitches), above the %.0f GB/s believed",
				            x, y, v, NVLINK_MAX_GBPS);
			}
			if (v > 0)
				rc = tp_nodetype_set_nvlink(nt, x, y, v);
		}
	}
	tp_free(s->a, bw);
	return rc ? build_fail(nt, rc, "the NVLink matrix", errbuf, errlen) : 0;
}

/* A node whose GPUs share no NVLink but whose PCIe link rates are known is a PCIe-only node:
 * its fabric is PCIe at the slowest pair's figure, so that the node level's NVLink default never
 * prices it (docs/cost-model.md). */
static int build_pcie_fabric(tp_nodetype *nt, char *errbuf, size_t errlen)
{
	unsigned g = tp_nodetype_gpu_count(nt);
	double slowest = 0.0;
	for (unsigned x = 0; x < g; x++)
		for (unsigned y = x + 1; y < g; y++) {
			double v = tp_nodetype_pair_gbps(nt, x, y);
			if (v <= 0 || tp_nodetype_nvlink_gbps(nt, x, y) > 0)
				return 0; /* a rate is missing, or the node has NVLink */
			slowest = slowest == 0.0 || v < slowest ? v : slowest;
		}
	if (slowest <= 0)
		return 0; /* one GPU: nothing travels inside the node */
	int rc = tp_nodetype_set_fabric(nt, TP_LINK_PCIE, slowest, PCIE_LATENCY_US);
	return rc ? build_fail(nt, rc, "the PCIe fabric", errbuf, errlen) : 0;
}

static int build(const struct scan *s, tp_nodetype **out, const tp_allocator *alloc,
                 char *errbuf, size_t errlen)
{
	tp_nodetype *nt = NULL;
	int rc = tp_nodetype_create(&nt, s->ngpu, alloc);
	if (rc)
		return fail(errbuf, errlen, rc, "out of memory creating a node type of %u GPUs",
		            s->ngpu);
	rc = build_pcie(s, nt, errbuf, errlen);
	if (!rc)
		rc = build_devices(s, nt, errbuf, errlen);
	if (!rc)
		rc = build_nvlink(s, nt, errbuf, errlen);
	if (!rc)
		rc = build_pcie_fabric(nt, errbuf, errlen);
	if (rc) {
		tp_nodetype_destroy(nt);
		return rc;
	}
	*out = nt;
	return 0;
}

/* ---- public entry points ---------------------------------------------------------------- */

int tp_nodetype_from_hwloc(tp_nodetype **out, hwloc_topology_t topo, const tp_allocator *alloc,
                           char *errbuf, size_t errlen)
{
	clear_err(errbuf, errlen);
	if (!out)
		return fail(errbuf, errlen, TP_EINVAL, "out is NULL");
	*out = NULL;
	if (!topo)
		return fail(errbuf, errlen, TP_EINVAL, "topo is NULL");
	if (!tp_alloc_valid(alloc))
		return fail(errbuf, errlen, TP_EINVAL, "alloc lacks a function");
	tp_allocator a = tp_alloc_resolve(alloc);
	struct scan s = {.a = &a, .topo = topo};
	int rc = scan_run(&s);
	if (rc) {
		scan_free(&s);
		return fail(errbuf, errlen, rc, "out of memory scanning the hwloc topology");
	}
	if (s.ngpu == 0) {
		rc = fail(errbuf, errlen, TP_ENOTFOUND,
		          "the hwloc topology has no GPU, NVIDIA or AMD (%u PCI devices, %u NICs; "
		          "was it loaded with I/O objects kept?)",
		          s.npci, s.nnic);
	} else if (s.ngpu > TP_MAX_NODE_DEVICES) {
		rc = fail(errbuf, errlen, TP_ELIMIT, "the hwloc topology has %u GPUs (at most %d)",
		          s.ngpu, TP_MAX_NODE_DEVICES);
	} else {
		rc = build(&s, out, alloc, errbuf, errlen);
	}
	scan_free(&s);
	return rc;
}

/* ---- checks before hwloc sees the buffer ----------------------------------------------- */

/*
 * hwloc 2.9's own XML parser (used when hwloc is built without libxml2, as Debian's is) and its
 * importer trust their input: fuzzing found NULL dereferences and assertion failures for a
 * <topology ...> tag without '>', an object of a CPU or memory type without one of its four
 * cpusets/nodesets, and a malformed set ("0xf...f,"). hwloc_topology_load() also prints
 * "hwloc: Topology does not contain any NUMA node (PU), aborting!" to stderr. The checks below
 * turn those inputs away first. The buffer they get is NUL-terminated.
 */

/* Whether the line at p is exactly `line` (then LF or CR-LF); *next is the line after. */
static bool is_line(const char *p, const char *line, const char **next)
{
	size_t n = strlen(line);
	if (strncmp(p, line, n))
		return false;
	p += n;
	p += *p == '\r';
	if (*p != '\n')
		return false;
	*next = p + 1;
	return true;
}

/*
 * Skip the "<?xml" and "<!DOCTYPE" lines as hwloc does; NULL when a line does not end. hwloc
 * passes any DOCTYPE line on (to libxml2 when it is built with it, which may then read an
 * internal subset or fetch a SYSTEM id): only the two hwloc writes are accepted, else *why.
 */
static const char *skip_headers(const char *p, const char **why)
{
	while (!strncmp(p, "<?xml ", 6) || !strncmp(p, "<!DOCTYPE", 9)) {
		if (p[2] == 'D') {
			const char *next;
			if (!is_line(p, "<!DOCTYPE topology SYSTEM \"hwloc.dtd\">", &next) &&
			    !is_line(p, "<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">", &next)) {
				*why = "a DOCTYPE other than the one hwloc writes (<!DOCTYPE topology SYSTEM "
				       "\"hwloc.dtd\"> or \"hwloc2.dtd\">, alone on its line)";
				return NULL;
			}
			p = next;
			continue;
		}
		p = strchr(p, '\n');
		if (!p)
			return NULL;
		p++;
	}
	return p;
}

/* What a buffer that is not hwloc XML looks like, for the message; NULL: nothing known. */
static const char *looks_like(const char *buf)
{
	const char *p = buf;
	if (!strncmp(p, "\xef\xbb\xbf", 3))
		p += 3; /* a UTF-8 byte-order mark */
	p += strspn(p, " \t\r\n");
	if (!strncmp(p, "<?xml ", 6) && strchr(p, '\n'))
		p = strchr(p, '\n') + strspn(strchr(p, '\n'), " \t\r\n");
	if (!strncmp(p, "<system", 7) && (p[7] == ' ' || p[7] == '>'))
		return "it looks like NCCL's topology XML (a <system> root, as NCCL_TOPO_DUMP_FILE "
		       "writes), not hwloc XML (a <topology> root, as lstopo writes)";
	if (!strncmp(p, "<topology version=\"3.", 21))
		return "hwloc 3.x XML (<topology version=\"3.x\">, as hwloc 3's lstopo writes), which "
		       "hwloc 2.9 does not read either: export it with an hwloc 2.x lstopo";
	if (!strncmp(p, "<topology version=\"", 19))
		return "a <topology version=...> other than hwloc writes (1.x writes <topology>, 2.x "
		       "<topology version=\"2.0\">; hwloc 2.9 reads no later version)";
	if (!strncmp(p, "<root>", 6))
		return "hwloc 0.9 XML (a <root> root), which is not read: export it again with "
		       "lstopo 1.x or later";
	if (!strncmp(p, "<!DOCTYPE", 9))
		return NULL;
	if (*p == '<')
		return "XML whose root element is not <topology>: not hwloc XML";
	if (*p == '{' || *p == '[')
		return "it looks like JSON, not hwloc XML (lstopo writes hwloc XML: "
		       "lstopo file.xml)";
	if (!strncmp(p, "---", 3) || strstr(p, ":\n") || strstr(p, ": "))
		if (!strstr(p, "GPU0") && !strstr(p, "SwitchName") && !strstr(p, "BlockName"))
			return "it looks like YAML, not hwloc XML (lstopo writes hwloc XML: lstopo "
			       "file.xml)";
	if (strstr(p, "GPU0") && (strstr(p, "Legend") || strstr(p, " X ")))
		return "it looks like nvidia-smi topo -m output, not hwloc XML (read it with "
		       "tp_nodetype_from_nvsmi_topo())";
	if (strstr(p, "SwitchName=") || strstr(p, "BlockName="))
		return "it looks like a Slurm topology.conf, not hwloc XML (read it with "
		       "tp_topology_builder_from_slurm())";
	return NULL;
}

/* One word of an hwloc set: empty, or "0x" and 1 to 8 hex digits; returns its end or NULL. */
static const char *set_word(const char *p, const char *end)
{
	if (p == end || *p == ',')
		return p;
	if (end - p < 3 || p[0] != '0' || p[1] != 'x')
		return NULL;
	const char *q = p + 2;
	while (q < end && q - p < 10 && *q && strchr("0123456789abcdefABCDEF", *q))
		q++;
	return q > p + 2 && (q == end || *q == ',') ? q : NULL;
}

/* A set as hwloc writes it: "0xf...f", or "[0xf...f,]0x1234abcd[,[0x...]]...". */
static bool set_valid(const char *p, const char *end)
{
	static const char full[] = "0xf...f";
	size_t nf = sizeof full - 1;
	if ((size_t)(end - p) >= nf && !strncmp(p, full, nf)) {
		if (p + nf == end)
			return true;
		if (p[nf] != ',')
			return false;
		p += nf + 1;
	}
	if (p == end || *p == ',')
		return false; /* hwloc counts the words after the first character */
	for (;;) {
		p = set_word(p, end);
		if (!p)
			return false;
		if (p == end)
			return true;
		p++;
	}
}

/* Whether the '&' at a starts an entity hwloc's parser knows (it stops at any other). */
static bool known_entity(const char *a, const char *end)
{
	static const char *const ent[] = {"&#10;", "&#13;", "&#9;", "&quot;", "&lt;", "&gt;",
	                                  "&amp;"};
	for (size_t i = 0; i < sizeof ent / sizeof ent[0]; i++)
		if ((size_t)(end - a) >= strlen(ent[i]) && !strncmp(a, ent[i], strlen(ent[i])))
			return true;
	return false;
}

/*
 * The next attribute of a tag's attribute text [*p, end), read as hwloc's parser reads it
 * (name of [a-z_], '=', a double-quoted value): 1 with its bounds (*p advanced), 0 at the end
 * of the tag, -1 when malformed (where hwloc silently stops reading the tag's attributes).
 */
static int next_attr(const char **p, const char *end, const char **name, size_t *nlen,
                     const char **v, const char **vend)
{
	const char *q = *p;
	while (q < end && (*q == ' ' || *q == '\t' || *q == '\n'))
		q++;
	if (q == end || (q + 1 == end && *q == '/'))
		return 0;
	const char *n = q;
	while (q < end && ((*q >= 'a' && *q <= 'z') || *q == '_'))
		q++;
	if (q == n || end - q < 2 || q[0] != '=' || q[1] != '"')
		return -1;
	*name = n;
	*nlen = (size_t)(q - n);
	*v = q + 2;
	*vend = memchr(*v, '"', (size_t)(end - *v));
	if (!*vend)
		return -1;
	for (const char *a = *v; a < *vend; a++)
		if (*a == '&' && !known_entity(a, *vend))
			return -1;
	*p = *vend + 1;
	return 1;
}

/* The value of attribute `name` in attribute text [p, end): false when absent. */
static bool tag_attr(const char *p, const char *end, const char *name, const char **v,
                     const char **vend)
{
	const char *n;
	size_t nlen;
	while (next_attr(&p, end, &n, &nlen, v, vend) == 1)
		if (nlen == strlen(name) && !strncmp(n, name, nlen))
			return true;
	return false;
}

static bool is_type(const char *v, const char *vend, const char *type)
{
	return (size_t)(vend - v) == strlen(type) && !strncmp(v, type, strlen(type));
}

/* Object types that hwloc gives cpusets and nodesets: every type but I/O and Misc. */
static bool type_has_sets(const char *v, const char *vend)
{
	return !is_type(v, vend, "Bridge") && !is_type(v, vend, "PCIDev") &&
	       !is_type(v, vend, "OSDev") && !is_type(v, vend, "Misc");
}

/* hwloc 1.0 wrote no nodesets (hwloc 2 adds them to such a 1.x topology): no_nodesets (a 1.x
 * root without one) lets every object go without; every set given must be well-formed. */
static const char *check_object_tag(const char *tag, const char *end, bool root,
                                    bool no_nodesets)
{
	static const char *const sets[] = {"cpuset", "complete_cpuset", "nodeset",
	                                   "complete_nodeset", "allowed_cpuset", "allowed_nodeset"};
	const char *v, *vend, *n, *p = tag;
	size_t nlen;
	int r;
	while ((r = next_attr(&p, end, &n, &nlen, &v, &vend)) == 1)
		;
	if (r < 0)
		return "a malformed attribute";
	if (!tag_attr(tag, end, "type", &v, &vend))
		return "an object without a type";
	if (!type_has_sets(v, vend))
		return NULL;
	if (is_type(v, vend, "PU") || is_type(v, vend, "NUMANode")) {
		/* hwloc sets bit os_index in a set: a missing (UINT_MAX) or huge one costs it up to
		 * 512 MB. hwloc writes it for both types. */
		const char *t = v, *tend = vend;
		if (!tag_attr(tag, end, "os_index", &v, &vend) || vend == v || vend - v > 7 ||
		    strspn(v, "0123456789") < (size_t)(vend - v) || strtoul(v, NULL, 10) > (1ul << 20))
			return "a PU or NUMANode without an os_index up to 2^20";
		v = t;
		vend = tend;
	}
	for (size_t i = 0; i < (root ? 6u : 4u); i++) {
		bool nodeset = strstr(sets[i], "nodeset") != NULL;
		if (!tag_attr(tag, end, sets[i], &v, &vend)) {
			if (no_nodesets && nodeset)
				continue;
			return "an object without one of its cpusets or nodesets";
		}
		if (!set_valid(v, vend))
			return "a malformed cpuset or nodeset";
	}
	return NULL;
}

/*
 * Well-formedness, before anything else: hwloc's parser is recursive and trusts nesting and
 * quoting, so the buffer must be XML of the shape hwloc writes. Elements `<name attr="v" ...>`
 * or `<name .../>` with names of [A-Za-z0-9_] and attributes as next_attr() reads them; every
 * element closed by `</name>` in order; at most XML_MAX_DEPTH elements open at once; text
 * (distance values) without '>', control characters other than tab, CR and LF, or an unknown
 * entity; one root, `<topology>`, and nothing but white space after it. Comments, CDATA and
 * processing instructions (other than the header lines skipped before) are refused: hwloc
 * never writes them.
 */
#define XML_MAX_DEPTH 128

struct xml_elem {
	const char *name;
	size_t len;
};

static bool is_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_';
}

static bool text_ok(const char *p, const char *end)
{
	for (const char *q = p; q < end; q++) {
		unsigned char c = (unsigned char)*q;
		if (c == '>' || (c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f)
			return false;
		if (c == '&' && !known_entity(q, end))
			return false;
	}
	return true;
}

static bool all_space_n(const char *p, const char *end)
{
	for (; p < end; p++)
		if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
			return false;
	return true;
}

/* NULL when [p ...] (NUL-terminated) is well-formed as above, else what is wrong. */
static const char *xml_not_well_formed(const char *p)
{
	struct xml_elem open[XML_MAX_DEPTH];
	unsigned depth = 0;
	bool root_done = false;
	while (*p) {
		const char *lt = strchr(p, '<');
		const char *stop = lt ? lt : p + strlen(p);
		if (!text_ok(p, stop))
			return "text with '>', a control character or an unknown entity";
		if (!lt) {
			if (depth == 0 && !all_space_n(p, stop))
				return root_done ? "content after the root element" : "text before the root";
			break;
		}
		if (depth == 0 && (root_done || !all_space_n(p, stop)))
			return root_done ? "content after the root element" : "text before the root";
		const char *gt = strchr(lt, '>');
		if (!gt || memchr(lt + 1, '<', (size_t)(gt - lt - 1)))
			return "a tag without its '>' (truncated?)";
		bool closing = lt[1] == '/';
		const char *n = lt + 1 + closing, *q = n;
		while (q < gt && is_name_char(*q))
			q++;
		if (q == n)
			return "a tag without a name (comment, CDATA or processing instruction?)";
		size_t nlen = (size_t)(q - n);
		if (closing) {
			if (q != gt)
				return "a malformed closing tag";
			if (depth == 0 || open[depth - 1].len != nlen ||
			    strncmp(open[depth - 1].name, n, nlen))
				return "a closing tag that does not match the open element";
			if (--depth == 0)
				root_done = true;
		} else {
			if (q < gt && *q != ' ' && *q != '\t' && *q != '\n' && *q != '\r' && *q != '/')
				return "a malformed tag name";
			const char *an, *v, *vend, *a = q;
			size_t alen;
			int r;
			while ((r = next_attr(&a, gt, &an, &alen, &v, &vend)) == 1)
				;
			if (r < 0)
				return "a malformed attribute (not name=\"value\")";
			if (depth == 0 && (root_done || nlen != 8 || strncmp(n, "topology", 8)))
				return "a root element other than one <topology>";
			if (gt[-1] == '/') {
				if (depth == 0)
					root_done = true;
			} else {
				if (depth == XML_MAX_DEPTH)
					return "elements nested more than 128 deep";
				open[depth++] = (struct xml_elem){n, nlen};
			}
		}
		p = gt + 1;
	}
	if (depth)
		return "an element that is never closed (truncated?)";
	return root_done ? NULL : "no root element";
}

/* v1 `<distances nbobjs="N">`: hwloc allocates N * N floats unchecked (the product can wrap);
 * NULL when every N is a decimal up to 4096, else why not. */
static const char *v1_distances_problem(const char *p)
{
	for (p = strstr(p, "<distances "); p; p = strstr(p + 1, "<distances ")) {
		const char *end = strchr(p, '>'), *v, *vend;
		if (!tag_attr(p + 10, end, "nbobjs", &v, &vend))
			continue;
		if (vend == v || vend - v > 4 || strspn(v, "0123456789") < (size_t)(vend - v) ||
		    strtoul(v, NULL, 10) > 4096)
			return "a 1.x <distances> matrix with nbobjs not a number up to 4096";
	}
	return NULL;
}

/* NULL when hwloc may be given the buffer, else what is wrong with it; *v1 tells the version. */
static const char *xml_problem(const char *buf, bool *v1)
{
	const char *why = NULL;
	const char *p = skip_headers(buf, &why);
	if (why)
		return why;
	*v1 = p && !strncmp(p, "<topology>", 10);
	if (!p || (!*v1 && strncmp(p, "<topology version=\"2.", 21))) {
		why = looks_like(p ? p : buf);
		return why ? why
		           : "not an hwloc XML topology (<topology> of hwloc 1.x or <topology "
		             "version=\"2.x\"> of hwloc 2.x, as lstopo writes)";
	}
	why = xml_not_well_formed(p);
	if (!why && *v1)
		why = v1_distances_problem(p);
	if (why)
		return why;
	bool pu = false, numa = false, nodesets = true;
	unsigned roots = 0;
	long depth = 0; /* <object> nesting */
	for (p = strchr(p, '<'); p; p = strchr(p + 1, '<')) {
		const char *end = strchr(p, '>');
		if (!strncmp(p, "</object>", 9) && --depth < 0)
			return "an unmatched </object>";
		if (strncmp(p, "<object ", 8))
			continue;
		if (depth == 0 && ++roots > 1)
			return "more than one top-level object";
		if (depth == 0) {
			const char *v, *vend;
			nodesets = !*v1 || tag_attr(p + 7, end, "nodeset", &v, &vend);
		}
		why = check_object_tag(p + 7, end, depth == 0, !nodesets);
		if (why)
			return why;
		depth += end[-1] != '/';
		const char *v, *vend;
		tag_attr(p + 7, end, "type", &v, &vend);
		pu = pu || is_type(v, vend, "PU");
		numa = numa || is_type(v, vend, "NUMANode");
	}
	if (!pu)
		return "no PU object";
	/* hwloc 1.x writes no NUMANode on a machine with one (hwloc 2 then adds it). */
	return numa || *v1 ? NULL : "no NUMANode object";
}

static int load_xml(hwloc_topology_t topo, const char *copy, size_t len, char *errbuf,
                    size_t errlen)
{
	bool v1 = false;
	const char *why = xml_problem(copy, &v1);
	if (why)
		return fail(errbuf, errlen, TP_EPARSE, "the XML buffer (%zu bytes) is refused: %s", len,
		            why);
	if (hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_ALL) < 0)
		return fail(errbuf, errlen, TP_ENOMEM, "hwloc could not keep I/O objects");
	if (hwloc_topology_set_xmlbuffer(topo, copy, (int)len + 1) < 0 ||
	    hwloc_topology_load(topo) < 0)
		return fail(errbuf, errlen, errno == ENOMEM ? TP_ENOMEM : TP_EPARSE,
		            "hwloc could not parse the XML buffer (%zu bytes): not a valid hwloc "
		            "topology, or truncated",
		            len);
	return 0;
}

int tp_nodetype_from_hwloc_xml(tp_nodetype **out, const char *xml, size_t len,
                               const tp_allocator *alloc, char *errbuf, size_t errlen)
{
	clear_err(errbuf, errlen);
	if (!out)
		return fail(errbuf, errlen, TP_EINVAL, "out is NULL");
	*out = NULL;
	if (!xml)
		return fail(errbuf, errlen, TP_EINVAL, "xml is NULL");
	if (!tp_alloc_valid(alloc))
		return fail(errbuf, errlen, TP_EINVAL, "alloc lacks a function");
	if (len == 0)
		return fail(errbuf, errlen, TP_EPARSE, "the XML buffer is empty");
	if (len > XML_MAX_BYTES)
		return fail(errbuf, errlen, TP_ELIMIT, "the XML buffer has %zu bytes (at most %d)",
		            len, XML_MAX_BYTES);
	size_t nul = strnlen(xml, len);
	while (len > nul && xml[len - 1] == '\0')
		len--; /* trailing NULs, as from a C string passed with its terminator, are fine */
	if (nul < len)
		return fail(errbuf, errlen, TP_EPARSE,
		            "the XML buffer has a NUL byte at offset %zu, before its end (%zu bytes)",
		            nul, len);
	tp_allocator a = tp_alloc_resolve(alloc);
	char *copy = tp_malloc(&a, len + 1);
	if (!copy)
		return fail(errbuf, errlen, TP_ENOMEM, "out of memory copying the XML buffer");
	memcpy(copy, xml, len);
	copy[len] = '\0';
	hwloc_topology_t topo;
	int rc = 0;
	if (hwloc_topology_init(&topo) < 0) {
		rc = fail(errbuf, errlen, TP_ENOMEM, "hwloc could not create a topology");
	} else {
		rc = load_xml(topo, copy, len, errbuf, errlen);
		if (!rc)
			rc = tp_nodetype_from_hwloc(out, topo, alloc, errbuf, errlen);
		hwloc_topology_destroy(topo);
	}
	tp_free(&a, copy);
	return rc;
}
