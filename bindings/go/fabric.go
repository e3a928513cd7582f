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

// LinkKind is the kind of link a fabric uses (tp_link_kind).
type LinkKind int

// The link kinds.
const (
	LinkNVLink   LinkKind = C.TP_LINK_NVLINK
	LinkPCIe     LinkKind = C.TP_LINK_PCIE
	LinkIB       LinkKind = C.TP_LINK_IB
	LinkEthernet LinkKind = C.TP_LINK_ETHERNET
)

func (k LinkKind) String() string {
	switch k {
	case LinkNVLink:
		return "nvlink"
	case LinkPCIe:
		return "pcie"
	case LinkIB:
		return "ib"
	case LinkEthernet:
		return "ethernet"
	}
	return fmt.Sprintf("LinkKind(%d)", int(k))
}

// Fabric is a link: its kind, GB/s per device one direction, and latency in microseconds.
type Fabric struct {
	Kind      LinkKind
	GBps      float64
	LatencyUs float64
}

// LevelCluster is the builder's level index of the fabric between top-level domains
// (TP_LEVEL_CLUSTER); Topology.Fabric calls it "cluster".
const LevelCluster = C.TP_LEVEL_CLUSTER

// SetFabric sets the fabric of a level (an index, 0 outermost, or LevelCluster): the link two
// devices use when the smallest domain holding both is a domain of that level.
func (b *TopologyBuilder) SetFabric(level int, f Fabric) error {
	defer runtime.KeepAlive(b)
	return b.err(C.tp_topology_builder_set_fabric(b.p, C.int(level), C.tp_link_kind(f.Kind),
		C.double(f.GBps), C.double(f.LatencyUs)))
}

// SetDomainFabric sets the fabric of one domain above the node (path "block0/rack3", its
// nodes already added), overriding its level's: NVL72 racks (NVLink) beside HGX racks
// (InfiniBand) in one fleet.
func (b *TopologyBuilder) SetDomainFabric(level uint, path string, f Fabric) error {
	defer runtime.KeepAlive(b)
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return b.err(C.tp_topology_builder_set_domain_fabric(b.p, C.unsigned(level), cs,
		C.tp_link_kind(f.Kind), C.double(f.GBps), C.double(f.LatencyUs)))
}

// AddNVSwitch adds an NVSwitch (tray) named name to the domain of level at path (one name per
// level from the top down to it).
func (b *TopologyBuilder) AddNVSwitch(level uint, path []string, name string) error {
	defer runtime.KeepAlive(b)
	arr, free := cstrings(path)
	defer free()
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return b.err(C.tp_topology_builder_add_nvswitch(b.p, C.unsigned(level), arr, cs))
}

// SetLimits sets the builder's budgets of devices and nodes (defaults 2^24 and 2^22).
func (b *TopologyBuilder) SetLimits(maxDevices, maxNodes uint32) error {
	defer runtime.KeepAlive(b)
	return b.err(C.tp_topology_builder_set_limits(b.p, C.uint32_t(maxDevices),
		C.uint32_t(maxNodes)))
}

// GenerateHGX builds an HGX fleet: levels su, node; 8-GPU H100 nodes of 80 GB.
func GenerateHGX(units, nodesPerUnit uint) (*Topology, error) {
	var p *C.tp_topology
	if rc := C.tp_topology_generate_hgx(&p, C.unsigned(units), C.unsigned(nodesPerUnit), nil); rc != 0 {
		return nil, fail(rc, fmt.Sprintf("hgx(%d, %d): invalid or too large a fleet", units,
			nodesPerUnit))
	}
	return wrapTopology(p), nil
}

// level is the index of a level by name; "cluster" is LevelCluster when cluster is true.
func (t *Topology) level(name string, cluster bool) (C.int, error) {
	if cluster && name == "cluster" {
		return C.TP_LEVEL_CLUSTER, nil
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	l := C.tp_topology_level_by_name(t.p, cs)
	if l < 0 {
		return 0, fail(l, fmt.Sprintf("no level named %q (levels %q)", name, t.Levels()))
	}
	return l, nil
}

// LevelIndex is the index of a level (0 outermost).
func (t *Topology) LevelIndex(name string) (int, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(name, false)
	return int(l), err
}

// Fabric is the fabric of a level ("cluster": between top-level domains).
func (t *Topology) Fabric(level string) (Fabric, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, true)
	if err != nil {
		return Fabric{}, err
	}
	var k C.tp_link_kind
	var g, lat C.double
	if rc := C.tp_topology_fabric(t.p, l, &k, &g, &lat); rc != 0 {
		return Fabric{}, fail(rc, fmt.Sprintf("level %q has no fabric", level))
	}
	return Fabric{LinkKind(k), float64(g), float64(lat)}, nil
}

// DomainFabric is the fabric joining the children of one domain of a level (a node at the
// node level): its own, its node type's, else its level's; own says whether it differs from
// its level's.
func (t *Topology) DomainFabric(level string, dom uint32) (f Fabric, own bool, err error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, true)
	if err != nil {
		return Fabric{}, false, err
	}
	var k C.tp_link_kind
	var g, lat C.double
	rc := C.tp_topology_domain_fabric(t.p, l, C.uint32_t(dom), &k, &g, &lat)
	if rc < 0 {
		return Fabric{}, false, fail(rc, fmt.Sprintf("%s %d is not a domain of the topology",
			level, dom))
	}
	return Fabric{LinkKind(k), float64(g), float64(lat)}, rc == 1, nil
}

// DomainCount is the number of domains of a level (nodes at the node level).
func (t *Topology) DomainCount(level string) (int, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return 0, err
	}
	return int(C.tp_topology_domain_count(t.p, C.unsigned(l))), nil
}

// DomainPath is a domain's path ("block0/rack1"; the node's name at the node level).
func (t *Topology) DomainPath(level string, dom uint32) (string, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return "", err
	}
	return t.domainPath(C.unsigned(l), dom)
}

func (t *Topology) domainPath(l C.unsigned, dom uint32) (string, error) {
	n := C.tp_topology_domain_path(t.p, l, C.uint32_t(dom), nil, 0)
	if n < 0 {
		return "", fail(n, fmt.Sprintf("%s %d is not a domain of the topology",
			C.GoString(C.tp_topology_level_name(t.p, l)), dom))
	}
	buf := make([]C.char, int(n)+1)
	C.tp_topology_domain_path(t.p, l, C.uint32_t(dom), &buf[0], C.size_t(len(buf)))
	return C.GoString(&buf[0]), nil
}

// Domain finds a domain of a level by its path.
func (t *Topology) Domain(level, path string) (uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return 0, err
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	var d C.uint32_t
	if rc := C.tp_topology_domain_by_path(t.p, C.unsigned(l), cs, &d); rc != 0 {
		return 0, fail(rc, fmt.Sprintf("no %s %q", level, path))
	}
	return uint32(d), nil
}

// NodeName is a node's name ("" for a bad id).
func (t *Topology) NodeName(node uint32) string {
	defer runtime.KeepAlive(t)
	return gostr(C.tp_topology_node_name(t.p, C.uint32_t(node)))
}

// Node finds a node by name.
func (t *Topology) Node(name string) (uint32, error) {
	defer runtime.KeepAlive(t)
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var n C.uint32_t
	if rc := C.tp_topology_node_by_name(t.p, cs, &n); rc != 0 {
		return 0, fail(rc, fmt.Sprintf("no node named %q", name))
	}
	return uint32(n), nil
}

// DeviceNode is the node holding a device (TP_NONE, 2^32-1, for a bad id).
func (t *Topology) DeviceNode(dev uint32) uint32 {
	defer runtime.KeepAlive(t)
	return uint32(C.tp_topology_device_node(t.p, C.uint32_t(dev)))
}

// NodeDevices are a node's devices, in index order.
func (t *Topology) NodeDevices(node uint32) []uint32 {
	defer runtime.KeepAlive(t)
	lv := C.tp_topology_level_count(t.p) - 1
	var first, n C.uint32_t
	if C.tp_topology_domain_devices(t.p, lv, C.uint32_t(node), &first, &n) != 0 {
		return nil
	}
	out := make([]uint32, int(n))
	for i := range out {
		out[i] = uint32(first) + uint32(i)
	}
	return out
}

// NodeModel is a node's device model ("" when it has none).
func (t *Topology) NodeModel(node uint32) string {
	defer runtime.KeepAlive(t)
	return gostr(C.tp_topology_node_model(t.p, C.uint32_t(node)))
}

// NodeMemoryGB is the memory per device of a node (0 when unknown).
func (t *Topology) NodeMemoryGB(node uint32) float64 {
	defer runtime.KeepAlive(t)
	return float64(C.tp_topology_node_memory_gb(t.p, C.uint32_t(node)))
}
