// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace.h>
#include <topoplace-nvsmi.h>
*/
import "C"

import (
	"fmt"
	"runtime"
)

// Version is the library's version number, major * 10000 + minor * 100 + patch
// (tp_version()), and VersionString its text ("0.4.0").
func Version() uint { return uint(C.tp_version()) }

// VersionString is the library's version as text ("0.4.0").
func VersionString() string { return C.GoString(C.tp_version_string()) }

// ---- the tree -----------------------------------------------------------------------------

func (t *Topology) badDomain(l C.int, dom uint32) error {
	return fail(C.TP_EINVAL, fmt.Sprintf("%s %d is not a domain of the topology",
		C.GoString(C.tp_topology_level_name(t.p, C.unsigned(l))), dom))
}

// DomainName is a domain's own name (a node's name at the node level).
func (t *Topology) DomainName(level string, dom uint32) (string, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return "", err
	}
	s := C.tp_topology_domain_name(t.p, C.unsigned(l), C.uint32_t(dom))
	if s == nil {
		return "", t.badDomain(l, dom)
	}
	return C.GoString(s), nil
}

// DomainParent is the parent (a domain of the level above) of a domain of level; ErrInvalid
// at the top level.
func (t *Topology) DomainParent(level string, dom uint32) (uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return 0, err
	}
	p := C.tp_topology_domain_parent(t.p, C.unsigned(l), C.uint32_t(dom))
	if p == C.TP_NONE {
		return 0, fail(C.TP_EINVAL, fmt.Sprintf("%s %d has no parent", level, dom))
	}
	return uint32(p), nil
}

// span is a range of ids, first .. first+n-1, as a slice.
func span(first, n C.uint32_t) []uint32 {
	out := make([]uint32, int(n))
	for i := range out {
		out[i] = uint32(first) + uint32(i)
	}
	return out
}

// DomainChildren are the children (domains of the level below) of a domain above the node.
func (t *Topology) DomainChildren(level string, dom uint32) ([]uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return nil, err
	}
	var first, n C.uint32_t
	if C.tp_topology_domain_children(t.p, C.unsigned(l), C.uint32_t(dom), &first, &n) != 0 {
		return nil, t.badDomain(l, dom)
	}
	return span(first, n), nil
}

// DomainNodes are the nodes of a domain, in tree order.
func (t *Topology) DomainNodes(level string, dom uint32) ([]uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return nil, err
	}
	var first, n C.uint32_t
	if C.tp_topology_domain_nodes(t.p, C.unsigned(l), C.uint32_t(dom), &first, &n) != 0 {
		return nil, t.badDomain(l, dom)
	}
	return span(first, n), nil
}

// NodeDomain is the domain of level that holds a node.
func (t *Topology) NodeDomain(node uint32, level string) (uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return 0, err
	}
	d := C.tp_topology_node_domain(t.p, C.uint32_t(node), C.unsigned(l))
	if d == C.TP_NONE {
		return 0, fail(C.TP_EINVAL, fmt.Sprintf("node %d is not in the topology", node))
	}
	return uint32(d), nil
}

// DomainNVSwitchCount is the number of NVSwitches added to a domain above the node.
func (t *Topology) DomainNVSwitchCount(level string, dom uint32) (int, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return 0, err
	}
	return int(C.tp_topology_domain_nvswitch_count(t.p, C.unsigned(l), C.uint32_t(dom))), nil
}

// DevicePerf is a device's relative speed (1.0 nominal; 0 for a bad id).
func (t *Topology) DevicePerf(dev uint32) float64 {
	defer runtime.KeepAlive(t)
	return float64(C.tp_topology_device_perf(t.p, C.uint32_t(dev)))
}

// CommonLevel is the smallest level one of whose domains holds both devices ("cluster" when
// they are in different top-level domains).
func (t *Topology) CommonLevel(a, b uint32) (string, error) {
	defer runtime.KeepAlive(t)
	var l C.int
	if rc := C.tp_topology_common_level(t.p, C.uint32_t(a), C.uint32_t(b), &l); rc != 0 {
		return "", fail(rc, fmt.Sprintf("device %d or %d is not in the topology (%d devices)", a,
			b, t.DeviceCount()))
	}
	if l == C.TP_LEVEL_CLUSTER {
		return "cluster", nil
	}
	return C.GoString(C.tp_topology_level_name(t.p, C.unsigned(l))), nil
}

// Memory is the bytes of memory the topology holds.
func (t *Topology) Memory() uint64 {
	defer runtime.KeepAlive(t)
	return uint64(C.tp_topology_memory(t.p))
}

// ---- the cluster --------------------------------------------------------------------------

// ClusterOptions of NewClusterWith (tp_cluster_options).
type ClusterOptions struct {
	// WriterGuard detects a second writer: a writing call made while another is inside
	// fails with ErrBusy (a debugging aid for the caller's locking, not a lock).
	WriterGuard bool
}

// NewClusterWith makes an empty cluster state on t with options.
func NewClusterWith(t *Topology, opts ClusterOptions) (*Cluster, error) {
	defer runtime.KeepAlive(t)
	var o C.tp_cluster_options
	C.tp_cluster_options_init(&o, C.TP_CLUSTER_OPTIONS_VERSION)
	o.writer_guard = cbool(opts.WriterGuard)
	var p *C.tp_cluster
	if rc := C.tp_cluster_create_ext(&p, t.p, nil, &o); rc != 0 {
		return nil, fail(rc, "cannot create a cluster on this topology")
	}
	c := &Cluster{p: p, topo: t}
	runtime.SetFinalizer(c, (*Cluster).Close)
	return c, nil
}

// FreeNodeCount is the number of nodes of a domain whose every device is free.
func (c *Cluster) FreeNodeCount(level string, dom uint32) (uint32, error) {
	defer runtime.KeepAlive(c)
	l, err := c.topo.level(level, false)
	if err != nil {
		return 0, err
	}
	return uint32(C.tp_cluster_free_node_count(c.p, C.unsigned(l), C.uint32_t(dom))), nil
}

// NodeHistogram is the histogram of free devices per node in a domain: hist[k] nodes have
// exactly k free devices, k from 0 to the most devices of a node.
func (c *Cluster) NodeHistogram(level string, dom uint32) ([]uint32, error) {
	defer runtime.KeepAlive(c)
	l, err := c.topo.level(level, false)
	if err != nil {
		return nil, err
	}
	hist := make([]C.uint32_t, C.TP_MAX_NODE_DEVICES+1)
	top := C.tp_cluster_node_histogram(c.p, C.unsigned(l), C.uint32_t(dom), &hist[0], C.size_t(len(hist)))
	if top < 0 {
		return nil, c.topo.badDomain(l, dom)
	}
	out := make([]uint32, int(top)+1)
	for i := range out {
		out[i] = uint32(hist[i])
	}
	return out, nil
}

// Tightest is the domain of level with the fewest free devices among those with at least
// minFree (the lowest index on ties), from the cluster's index; ErrNotFound when none has.
func (c *Cluster) Tightest(level string, minFree uint32) (uint32, error) {
	defer runtime.KeepAlive(c)
	l, err := c.topo.level(level, false)
	if err != nil {
		return 0, err
	}
	var d C.uint32_t
	if rc := C.tp_cluster_tightest(c.p, C.unsigned(l), C.uint32_t(minFree), &d); rc != 0 {
		return 0, fail(rc, fmt.Sprintf("no %s has %d free devices", level, minFree))
	}
	return uint32(d), nil
}

// DownTotalCount is the number of devices down; CordonedTotalCount of those cordoned and not
// down.
func (c *Cluster) DownTotalCount() uint32 {
	defer runtime.KeepAlive(c)
	return uint32(C.tp_cluster_down_total_count(c.p))
}

// CordonedTotalCount is the number of devices cordoned and not down.
func (c *Cluster) CordonedTotalCount() uint32 {
	defer runtime.KeepAlive(c)
	return uint32(C.tp_cluster_cordoned_total_count(c.p))
}

// Memory is the bytes of memory the cluster state holds (its topology excluded).
func (c *Cluster) Memory() uint64 {
	defer runtime.KeepAlive(c)
	return uint64(C.tp_cluster_memory(c.p))
}

// ---- what a placement uses, and why one failed --------------------------------------------

// DomainUse is a domain a placement uses and how many of its devices are there.
type DomainUse struct {
	Domain  uint32
	Devices uint32
}

// Domains are the domains of a level the placement uses, in first-rank order.
func (pl *Placement) Domains(level string) ([]DomainUse, error) {
	defer runtime.KeepAlive(pl)
	if pl == nil || pl.p == nil {
		return nil, fail(C.TP_EINVAL, "placement is nil or closed")
	}
	l, err := pl.c.topo.level(level, false)
	if err != nil {
		return nil, err
	}
	n := C.tp_placement_domain_count(pl.p, C.unsigned(l))
	out := make([]DomainUse, 0, int(n))
	for i := C.uint32_t(0); i < n; i++ {
		var d, k C.uint32_t
		C.tp_placement_domain_at(pl.p, C.unsigned(l), i, &d, &k)
		out = append(out, DomainUse{uint32(d), uint32(k)})
	}
	return out, nil
}

// Fit are the figures of a request that could not be placed (Error.Fit): the devices
// needed, the free devices that match, and the most one domain of Level takes now.
type Fit struct {
	Needed    uint32
	FreeTotal uint32
	Level     string
	Best      uint32
}

// Shrink is the cheapest shrink of a job Replace could not repair (Error.Shrink): the ranks
// it keeps and the whole slices (groups, devices) it keeps of Of; the error's message names
// the jobs whose eviction would make room instead.
type Shrink struct {
	Ranks, Units, Of uint32
}

// placementErr is the error of a failed placement with its fit and shrink figures.
func (c *Cluster) placementErr(p *C.tp_placement, rc C.int) error {
	e := code(rc)
	e.Message = C.GoString(C.tp_placement_errmsg(p))
	var f C.tp_fit
	C.tp_fit_init(&f, C.TP_FIT_VERSION)
	if C.tp_placement_fit(p, &f) == 0 {
		e.Fit = &Fit{Needed: uint32(f.needed), FreeTotal: uint32(f.free_total), Best: uint32(f.best)}
		if f.level >= 0 {
			e.Fit.Level = C.GoString(C.tp_topology_level_name(c.topo.p, C.unsigned(f.level)))
		}
	}
	var r, u, of C.uint32_t
	if C.tp_placement_repair_shrink(p, &r, &u, &of) == 0 {
		e.Shrink = &Shrink{uint32(r), uint32(u), uint32(of)}
	}
	return e
}

// ---- the cost model -----------------------------------------------------------------------

// costCall runs a cost-model call on devs for m, with its error buffer.
func costCall(t *Topology, devs []uint32, m StepModel, fn func(*C.double, *C.uint32_t, C.size_t,
	*C.tp_step_model, *C.char, C.size_t) C.int) (float64, error) {
	defer runtime.KeepAlive(t)
	var cm C.tp_step_model
	m.fill(&cm)
	p, n := cdevs(devs)
	var errbuf [1024]C.char
	var out C.double
	if rc := fn(&out, p, n, &cm, &errbuf[0], C.size_t(len(errbuf))); rc != 0 {
		return 0, fail(rc, C.GoString(&errbuf[0]))
	}
	return float64(out), nil
}

// CostStepUs is the modelled time of one training step of m laid out on devs, in rank order
// (tp_cost_step_us(), docs/cost-model.md), in microseconds.
func (t *Topology) CostStepUs(devs []uint32, m StepModel) (float64, error) {
	return costCall(t, devs, m, func(o *C.double, d *C.uint32_t, n C.size_t, cm *C.tp_step_model,
		e *C.char, el C.size_t) C.int {
		return C.tp_cost_step_us(o, t.p, d, n, cm, nil, e, el)
	})
}

// CostEfficiency is the placement efficiency of devs for m, in (0, 1]: the step time of the
// best packed layout on an empty cluster over the step time on devs.
func (t *Topology) CostEfficiency(devs []uint32, m StepModel) (float64, error) {
	return costCall(t, devs, m, func(o *C.double, d *C.uint32_t, n C.size_t, cm *C.tp_step_model,
		e *C.char, el C.size_t) C.int {
		return C.tp_cost_efficiency(o, t.p, d, n, cm, nil, e, el)
	})
}

// NodeTypeFromNvidiaSmiWith reads a node type from nvidia-smi topo -m as NodeTypeFromNvidiaSmi,
// with linkGbps GB/s per NVLink (NV# is # links; 25 for NVLink 2 to 4, 50 for NVLink 5).
func NodeTypeFromNvidiaSmiWith(text string, linkGbps float64) (*NodeType, error) {
	return readNodeType(text, func(out **C.tp_nodetype, tx *C.char, n C.size_t, e *C.char,
		el C.size_t) C.int {
		var o C.tp_nvsmi_options
		C.tp_nvsmi_options_init(&o, C.TP_NVSMI_OPTIONS_VERSION)
		o.nvlink_link_gbps = C.double(linkGbps)
		return C.tp_nodetype_from_nvsmi_topo(out, tx, n, &o, nil, e, el)
	})
}
