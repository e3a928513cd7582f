// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Copy is an independent copy of the cluster state (tp_cluster_copy()): devices, health,
// spares, jobs, services' caps, partitions and the placement mix; no open savepoint. Read-only
// on c. A placement made on one cannot be committed to the other, but a plan made on either
// may be applied to the other (ApplyStep). The copy shares c's Topology, which must outlive
// it (for a Scenario's cluster: close the copy before the scenario).
func (c *Cluster) Copy() (*Cluster, error) {
	defer runtime.KeepAlive(c)
	var p *C.tp_cluster
	if rc := C.tp_cluster_copy(&p, c.p, nil); rc != 0 {
		return nil, fail(rc, "cannot copy the cluster")
	}
	cp := &Cluster{p: p, topo: c.topo}
	runtime.SetFinalizer(cp, (*Cluster).Close)
	return cp, nil
}

// Fingerprint is a hash of the state (occupancy, health, jobs, services' caps): equal states
// give equal values on every machine.
func (c *Cluster) Fingerprint() uint64 {
	defer runtime.KeepAlive(c)
	return uint64(C.tp_cluster_fingerprint(c.p))
}

// Check recomputes every aggregate and index of the state and compares them with the kept
// ones (tp_cluster_check(), for tests); the error describes the first difference.
func (c *Cluster) Check() error {
	defer runtime.KeepAlive(c)
	var buf [1024]C.char
	return fail(C.tp_cluster_check(c.p, &buf[0], C.size_t(len(buf))), C.GoString(&buf[0]))
}

// FreeCount is the number of free devices (healthy, uncordoned, held by no job, not spares) in
// one domain of a level.
func (c *Cluster) FreeCount(level string, dom uint32) (uint32, error) {
	defer runtime.KeepAlive(c)
	l, err := c.topo.level(level, false)
	if err != nil {
		return 0, err
	}
	return uint32(C.tp_cluster_free_count(c.p, C.unsigned(l), C.uint32_t(dom))), nil
}

// FreeTotalCount is the number of free devices in the cluster.
func (c *Cluster) FreeTotalCount() uint32 {
	defer runtime.KeepAlive(c)
	return uint32(C.tp_cluster_free_total_count(c.p))
}

// DeviceState is what a device is doing (tp_device_state).
type DeviceState int

// The device states.
const (
	DeviceFree     DeviceState = C.TP_DEVICE_FREE
	DeviceHeld     DeviceState = C.TP_DEVICE_HELD
	DeviceDown     DeviceState = C.TP_DEVICE_DOWN
	DeviceCordoned DeviceState = C.TP_DEVICE_CORDONED
	DeviceSpare    DeviceState = C.TP_DEVICE_SPARE
)

func (s DeviceState) String() string {
	switch s {
	case DeviceFree:
		return "free"
	case DeviceHeld:
		return "held"
	case DeviceDown:
		return "down"
	case DeviceCordoned:
		return "cordoned"
	case DeviceSpare:
		return "spare"
	}
	return fmt.Sprintf("DeviceState(%d)", int(s))
}

// DeviceState is a device's state and, when held, the job holding it.
func (c *Cluster) DeviceState(dev uint32) (DeviceState, string, error) {
	defer runtime.KeepAlive(c)
	var job *C.char
	s := C.tp_cluster_device_state(c.p, C.uint32_t(dev), &job)
	if s < 0 {
		return 0, "", fail(s, fmt.Sprintf("device %d is not in the topology (%d devices)", dev,
			c.topo.DeviceCount()))
	}
	return DeviceState(s), gostr(job), nil
}

// ---- hot spares ---------------------------------------------------------------------------

// SetSpares keeps k hot spares (whole free nodes, highest index first) in every domain of
// level, a level above the node (tp_cluster_set_spares()): placement and the planner never
// use them, Replace uses them first, and the library keeps the policy as devices change.
// k 0 clears every mark and the policy (level is then not read).
func (c *Cluster) SetSpares(level string, k uint) error {
	defer runtime.KeepAlive(c)
	var l C.int
	if k > 0 {
		var err error
		if l, err = c.topo.level(level, false); err != nil {
			return err
		}
	}
	return c.err(C.tp_cluster_set_spares(c.p, C.unsigned(l), C.unsigned(k), 0))
}

// SetNodeSpare marks one node a spare (spare true) or clears its mark.
func (c *Cluster) SetNodeSpare(node string, spare bool) error {
	defer runtime.KeepAlive(c)
	n, err := c.topo.Node(node)
	if err != nil {
		return err
	}
	return c.err(C.tp_cluster_set_node_spare(c.p, C.uint32_t(n), cbool(spare)))
}

// NodeIsSpare says whether a node is a spare.
func (c *Cluster) NodeIsSpare(node string) (bool, error) {
	defer runtime.KeepAlive(c)
	n, err := c.topo.Node(node)
	if err != nil {
		return false, err
	}
	return C.tp_cluster_node_is_spare(c.p, C.uint32_t(n)) == 1, nil
}

// SpareCount is the number of spare nodes in one domain of a level.
func (c *Cluster) SpareCount(level string, dom uint32) (uint32, error) {
	defer runtime.KeepAlive(c)
	l, err := c.topo.level(level, false)
	if err != nil {
		return 0, err
	}
	return uint32(C.tp_cluster_spare_count(c.p, C.unsigned(l), C.uint32_t(dom))), nil
}

// SpareTotalCount is the number of spare nodes in the cluster.
func (c *Cluster) SpareTotalCount() uint32 {
	defer runtime.KeepAlive(c)
	return uint32(C.tp_cluster_spare_total_count(c.p))
}

// SparePolicy is the spare policy in force: its level and spares per domain ("", 0: none).
func (c *Cluster) SparePolicy() (level string, k uint) {
	defer runtime.KeepAlive(c)
	var l, n C.unsigned
	C.tp_cluster_spare_policy(c.p, &l, &n)
	if n == 0 {
		return "", 0
	}
	return C.GoString(C.tp_topology_level_name(c.topo.p, l)), uint(n)
}

// ---- NVLink partitions --------------------------------------------------------------------

// SetPartitions gives jobs NVLink partitions (IMEX domains) in the domains of level whose
// fabric is NVLink, each domain with a pool of channels (Slurm's imex_channel_count, 2048 by
// default there); level "" turns them off. The cluster must run no job and have no open
// savepoint. A placement's Partitions then say which it needs.
func (c *Cluster) SetPartitions(level string, channels uint32) error {
	defer runtime.KeepAlive(c)
	l := C.int(-1)
	if level != "" {
		var err error
		if l, err = c.topo.level(level, false); err != nil {
			return err
		}
	}
	return c.err(C.tp_cluster_set_partitions(c.p, l, C.uint32_t(channels)))
}

// PartitionPolicy is the partition level and channels per domain ("", 0: off).
func (c *Cluster) PartitionPolicy() (level string, channels uint32) {
	defer runtime.KeepAlive(c)
	var l C.int
	var n C.uint32_t
	if C.tp_cluster_partition_policy(c.p, &l, &n) != 0 || l < 0 {
		return "", 0
	}
	return C.GoString(C.tp_topology_level_name(c.topo.p, C.unsigned(l))), uint32(n)
}

// NodePartition is the partition a node is in: the running job holding it and its channel;
// ErrNotFound when it is in none.
func (c *Cluster) NodePartition(node string) (job string, channel uint32, err error) {
	defer runtime.KeepAlive(c)
	n, err := c.topo.Node(node)
	if err != nil {
		return "", 0, err
	}
	var j *C.char
	var ch C.uint32_t
	if rc := C.tp_cluster_node_partition(c.p, C.uint32_t(n), &j, &ch); rc != 0 {
		return "", 0, fail(rc, fmt.Sprintf("node %q is in no partition", node))
	}
	return gostr(j), uint32(ch), nil
}

// Partition is an NVLink partition a placement needs: the NVLink domain (its index and path
// at the partition level), the channel of the domain's pool, and the nodes that form it.
type Partition struct {
	Domain  uint32
	Path    string
	Channel uint32
	Nodes   []string
}

func (c *Cluster) partitions(p *C.tp_placement) []Partition {
	n := C.tp_placement_partition_count(p)
	if n == 0 {
		return nil
	}
	var level C.int
	C.tp_cluster_partition_policy(c.p, &level, nil)
	out := make([]Partition, 0, int(n))
	for i := C.size_t(0); i < n; i++ {
		var dom, ch C.uint32_t
		var nodes *C.uint32_t
		var nn C.size_t
		if C.tp_placement_partition(p, i, &dom, &ch, &nodes, &nn) != 0 {
			break
		}
		pt := Partition{Domain: uint32(dom), Channel: uint32(ch)}
		if level >= 0 {
			pt.Path, _ = c.topo.domainPath(C.unsigned(level), uint32(dom))
		}
		for _, nd := range unsafe.Slice((*uint32)(unsafe.Pointer(nodes)), int(nn)) {
			pt.Nodes = append(pt.Nodes, c.topo.NodeName(nd))
		}
		out = append(out, pt)
	}
	return out
}

// ---- services -----------------------------------------------------------------------------

// ServiceCaps spread a service's replicas over the domains of Level: at most MaxPerDomain
// replicas with a device in one domain (0: no limit) and at most MaxPercent percent of them
// (0: no limit; a new replica may go where r of R replicas are when r + 1 <=
// max(1, floor(MaxPercent x (R + 1) / 100))).
//
// FDKind, FDMaxPerDomain and FDMaxPercent cap them in the same way over the failure domains of
// one kind (power feeds, switch trays; Topology.FailureDomainKinds, one of the first eight);
// FDKind "" sets no such caps. A replica goes only where both kinds of caps leave room. Level
// "" sets no caps over the tree.
type ServiceCaps struct {
	Level          string
	MaxPerDomain   uint32
	MaxPercent     float64
	FDKind         string
	FDMaxPerDomain uint32
	FDMaxPercent   float64
}

// SetServiceCaps sets (or, with nil, lifts) the spread caps of a service: its replicas (the
// running jobs whose request names it in Service) placed or repaired from now on keep to
// them. The caps are part of the state (savepoints undo them).
func (c *Cluster) SetServiceCaps(service string, caps *ServiceCaps) error {
	defer runtime.KeepAlive(c)
	var m cmem
	defer m.free()
	cs := C.CString(service)
	defer C.free(unsafe.Pointer(cs))
	if caps == nil {
		return c.err(C.tp_cluster_set_service_caps(c.p, cs, nil))
	}
	var cc C.tp_service_caps
	C.tp_service_caps_init(&cc, C.TP_SERVICE_CAPS_VERSION)
	if caps.Level != "" {
		cc.level = m.str(caps.Level)
	}
	cc.max_per_domain = C.uint32_t(caps.MaxPerDomain)
	cc.max_percent = C.double(caps.MaxPercent)
	if caps.FDKind != "" {
		cc.fd_kind = m.str(caps.FDKind)
	}
	cc.fd_max_per_domain = C.uint32_t(caps.FDMaxPerDomain)
	cc.fd_max_percent = C.double(caps.FDMaxPercent)
	return c.err(C.tp_cluster_set_service_caps(c.p, cs, &cc))
}

// ServiceCaps are a service's caps, nil when it has none.
func (c *Cluster) ServiceCaps(service string) (*ServiceCaps, error) {
	defer runtime.KeepAlive(c)
	cs := C.CString(service)
	defer C.free(unsafe.Pointer(cs))
	var cc C.tp_service_caps
	C.tp_service_caps_init(&cc, C.TP_SERVICE_CAPS_VERSION)
	if rc := C.tp_cluster_service_caps(c.p, cs, &cc); rc != 0 {
		return nil, fail(rc, fmt.Sprintf("service %q: invalid name", service))
	}
	if cc.level == nil && cc.fd_kind == nil {
		return nil, nil
	}
	out := &ServiceCaps{MaxPerDomain: uint32(cc.max_per_domain), MaxPercent: float64(cc.max_percent),
		FDMaxPerDomain: uint32(cc.fd_max_per_domain), FDMaxPercent: float64(cc.fd_max_percent)}
	if cc.level != nil {
		out.Level = C.GoString(cc.level)
	}
	if cc.fd_kind != nil {
		out.FDKind = C.GoString(cc.fd_kind)
	}
	return out, nil
}

// ServiceFDReplicas is how many running replicas of a service have a device in the failure
// domain fd (a name of Topology.FailureDomains) of a kind; counted for the first eight kinds
// whether or not caps are set.
func (c *Cluster) ServiceFDReplicas(service, kind, fd string) (uint32, error) {
	defer runtime.KeepAlive(c)
	k, err := c.topo.fdKind(kind)
	if err != nil {
		return 0, err
	}
	names, err := c.topo.FailureDomains(kind)
	if err != nil {
		return 0, err
	}
	dom := -1
	for i, n := range names {
		if n == fd {
			dom = i
			break
		}
	}
	if dom < 0 {
		return 0, fail(C.TP_ENOTFOUND, fmt.Sprintf("no %s failure domain named %q", kind, fd))
	}
	cs := C.CString(service)
	defer C.free(unsafe.Pointer(cs))
	var n C.uint32_t
	if rc := C.tp_cluster_service_fd_replicas(c.p, cs, k, C.uint32_t(dom), &n); rc != 0 {
		return 0, fail(rc, fmt.Sprintf("service %q: failure-domain kind %q is past the first %d",
			service, kind, C.TP_SERVICE_FD_KINDS))
	}
	return uint32(n), nil
}

// ServiceReplicas is how many running replicas of a service have a device in one domain of a
// level, or, with level "", in the whole cluster (dom is then not read).
func (c *Cluster) ServiceReplicas(service, level string, dom uint32) (uint32, error) {
	defer runtime.KeepAlive(c)
	var l C.int
	d := C.uint32_t(C.TP_NONE)
	if level != "" {
		var err error
		if l, err = c.topo.level(level, false); err != nil {
			return 0, err
		}
		d = C.uint32_t(dom)
	}
	cs := C.CString(service)
	defer C.free(unsafe.Pointer(cs))
	var n C.uint32_t
	if rc := C.tp_cluster_service_replicas(c.p, cs, C.unsigned(l), d, &n); rc != 0 {
		return 0, fail(rc, fmt.Sprintf("service %q: %s %d is not a domain of the topology",
			service, level, dom))
	}
	return uint32(n), nil
}

// ---- the placement mix --------------------------------------------------------------------

// cmix copies a job mix into m: nil for an empty mix unless keep, then a non-NULL pointer.
func cmix(mix []JobShape, m *cmem, keep bool) *C.tp_job_shape {
	if len(mix) == 0 {
		if keep {
			return (*C.tp_job_shape)(m.alloc(1, unsafe.Sizeof(C.tp_job_shape{})))
		}
		return nil
	}
	v := unsafe.Slice((*C.tp_job_shape)(m.alloc(uintptr(len(mix)),
		unsafe.Sizeof(C.tp_job_shape{}))), len(mix))
	for i, s := range mix {
		v[i].devices = C.uint32_t(s.Devices)
		v[i].level = m.str(s.Level)
		v[i].weight = C.double(s.Weight)
	}
	return &v[0]
}

// SetPlaceMix sets the job mix placement protects (tp_cluster_set_place_mix()): among
// placements equal on locality and balance, Place and Replace prefer the one that least lowers
// what the mix could use at full locality. nil: the default mix of the fragmentation report;
// an empty non-nil slice: no mix (best fit alone, as a new cluster has). At most 16 shapes.
func (c *Cluster) SetPlaceMix(mix []JobShape) error {
	defer runtime.KeepAlive(c)
	var m cmem
	defer m.free()
	return c.err(C.tp_cluster_set_place_mix(c.p, cmix(mix, &m, mix != nil), C.size_t(len(mix))))
}

// ---- what a placement says besides its devices --------------------------------------------

// Rule is the rule of the objective that decided a placement's outermost choice among
// candidate domains (tp_rule).
type Rule int

// The rules.
const (
	RuleNone     Rule = C.TP_RULE_NONE     // no choice among candidates was made
	RuleLocality Rule = C.TP_RULE_LOCALITY // the others would use more domains
	RuleBalance  Rule = C.TP_RULE_BALANCE  // balanced: a larger smallest share
	RuleFit      Rule = C.TP_RULE_FIT      // the placement mix's loss, then best fit
	RuleStep     Rule = C.TP_RULE_STEP     // the modelled step time (comm)
	RuleTie      Rule = C.TP_RULE_TIE      // tied on every rule: the lowest index
	RuleEnd      Rule = C.TP_RULE_END      // the running jobs' expected ends (ExpectedEndS)
)

func (r Rule) String() string {
	switch r {
	case RuleNone:
		return "none"
	case RuleLocality:
		return "locality"
	case RuleBalance:
		return "balance"
	case RuleFit:
		return "fit"
	case RuleStep:
		return "step"
	case RuleTie:
		return "tie"
	case RuleEnd:
		return "end"
	}
	return fmt.Sprintf("Rule(%d)", int(r))
}

// Replacement is one failed device of a replaced job and the device that takes its rank.
type Replacement struct {
	Failed, Replacement uint32
}

// readExtras copies what a successful placement says besides its devices.
func (pl *Placement) readExtras() {
	p := pl.p
	pl.DecidedBy = Rule(C.tp_placement_decided_by(p))
	pl.StepCommUs = float64(C.tp_placement_step_comm_us(p))
	pl.Partitions = pl.c.partitions(p)
	for i := C.size_t(0); ; i++ {
		var f, r C.uint32_t
		if C.tp_placement_replaced(p, i, &f, &r) != 0 {
			break
		}
		pl.Replaced = append(pl.Replaced, Replacement{uint32(f), uint32(r)})
	}
}

// NIC is the NIC (an index in the node type of the device's node) paired with the device of
// rank i, for a request with GPUNICPairs; ErrNotFound when the request asked for no pairs.
func (pl *Placement) NIC(i int) (uint, error) {
	defer runtime.KeepAlive(pl)
	if pl == nil || pl.p == nil {
		return 0, fail(C.TP_EINVAL, "placement is nil or closed")
	}
	if i < 0 || i >= len(pl.Devices) {
		return 0, fail(C.TP_EINVAL, fmt.Sprintf("rank %d is out of range: the placement has %d",
			i, len(pl.Devices)))
	}
	r := C.tp_placement_nic(pl.p, C.size_t(i))
	if r < 0 {
		return 0, fail(r, fmt.Sprintf("rank %d has no paired NIC", i))
	}
	return uint(r), nil
}
