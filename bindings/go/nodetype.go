// SPDX-License-Identifier: MIT

package topoplace

/*
#cgo pkg-config: hwloc
#include <stdlib.h>
#include <topoplace.h>
#include <topoplace-hwloc.h>
#include <topoplace-nvsmi.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// NodeType is the insides of a node (PCIe switches, NICs, NVSwitches, NVLink), read from
// hwloc XML or nvidia-smi topo -m. A node added with it gets a copy.
type NodeType struct {
	p *C.tp_nodetype
}

func wrapNodeType(p *C.tp_nodetype) *NodeType {
	nt := &NodeType{p: p}
	runtime.SetFinalizer(nt, (*NodeType).Close)
	return nt
}

// Close frees the node type. Safe to call twice.
func (nt *NodeType) Close() error {
	if nt != nil && nt.p != nil {
		C.tp_nodetype_destroy(nt.p)
		nt.p = nil
		runtime.SetFinalizer(nt, nil)
	}
	return nil
}

// GPUCount is the node type's number of GPUs.
func (nt *NodeType) GPUCount() int {
	defer runtime.KeepAlive(nt)
	return int(C.tp_nodetype_gpu_count(nt.p))
}

type nodetypeReader func(out **C.tp_nodetype, text *C.char, n C.size_t, err *C.char,
	errlen C.size_t) C.int

func readNodeType(text string, read nodetypeReader) (*NodeType, error) {
	ct := C.CString(text)
	defer C.free(unsafe.Pointer(ct))
	var errbuf [1024]C.char
	var p *C.tp_nodetype
	if rc := read(&p, ct, C.size_t(len(text)), &errbuf[0], C.size_t(len(errbuf))); rc != 0 {
		return nil, fail(rc, C.GoString(&errbuf[0]))
	}
	return wrapNodeType(p), nil
}

// NodeTypeFromHwlocXML reads a node type from hwloc XML (lstopo's, 1.x or 2.x).
func NodeTypeFromHwlocXML(xml string) (*NodeType, error) {
	return readNodeType(xml, func(out **C.tp_nodetype, t *C.char, n C.size_t, e *C.char,
		el C.size_t) C.int {
		return C.tp_nodetype_from_hwloc_xml(out, t, n, nil, e, el)
	})
}

// NodeTypeFromNvidiaSmi reads a node type from the text nvidia-smi topo -m prints.
func NodeTypeFromNvidiaSmi(text string) (*NodeType, error) {
	return readNodeType(text, func(out **C.tp_nodetype, t *C.char, n C.size_t, e *C.char,
		el C.size_t) C.int {
		return C.tp_nodetype_from_nvsmi_topo(out, t, n, nil, nil, e, el)
	})
}

// AddNodeOfType adds a node whose insides are nt (its GPU count is nt's).
func (b *TopologyBuilder) AddNodeOfType(name string, path []string, nt *NodeType) error {
	defer runtime.KeepAlive(b)
	defer runtime.KeepAlive(nt)
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	arr, free := cstrings(path)
	defer free()
	var o C.tp_node_options
	C.tp_node_options_init(&o, C.TP_NODE_OPTIONS_VERSION)
	o._type = nt.p
	return b.err(C.tp_topology_builder_add_node(b.p, cs, arr, C.tp_nodetype_gpu_count(nt.p), &o))
}

// NewNodeType starts a node type by hand: gpus GPUs (1 to 256) with no switches, NICs or
// NVLink figures yet. It stays mutable until given to a node (AddNodeOfType copies it).
func NewNodeType(gpus uint) (*NodeType, error) {
	var p *C.tp_nodetype
	if rc := C.tp_nodetype_create(&p, C.unsigned(gpus), nil); rc != 0 {
		return nil, fail(rc, fmt.Sprintf("node type: gpus %d is not 1 to %d", gpus,
			C.TP_MAX_NODE_DEVICES))
	}
	return wrapNodeType(p), nil
}

func (nt *NodeType) err(rc C.int) error {
	return fail(rc, C.GoString(C.tp_nodetype_errmsg(nt.p)))
}

// closed is the error of a call on a closed node type (the library would get NULL).
func (nt *NodeType) closed() error {
	if nt == nil || nt.p == nil {
		return fail(C.TP_EINVAL, "node type is nil or closed")
	}
	return nil
}

// AddPCIeSwitch adds a PCIe switch below switch parent (-1: the host bridge) and returns its
// index.
func (nt *NodeType) AddPCIeSwitch(parent int) (uint, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	var id C.unsigned
	return uint(id), nt.err(C.tp_nodetype_add_pcie_switch(nt.p, C.int(parent), &id))
}

// SetGPUSwitch puts a GPU behind PCIe switch sw (-1: on the host bridge).
func (nt *NodeType) SetGPUSwitch(gpu uint, sw int) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_gpu_switch(nt.p, C.unsigned(gpu), C.int(sw)))
}

// AddNIC adds a NIC ("mlx5_0") of gbps GB/s behind PCIe switch sw (-1: the host bridge) and
// returns its index.
func (nt *NodeType) AddNIC(name string, sw int, gbps float64) (uint, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var id C.unsigned
	return uint(id), nt.err(C.tp_nodetype_add_nic(nt.p, cs, C.int(sw), C.double(gbps), &id))
}

// AddNVSwitch adds an NVSwitch to the node and returns its index.
func (nt *NodeType) AddNVSwitch(name string) (uint, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var id C.unsigned
	return uint(id), nt.err(C.tp_nodetype_add_nvswitch(nt.p, cs, &id))
}

// SetNVLink sets the NVLink bandwidth between GPUs a and b, GB/s one direction (0: none).
func (nt *NodeType) SetNVLink(a, b uint, gbps float64) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_nvlink(nt.p, C.unsigned(a), C.unsigned(b), C.double(gbps)))
}

// SetFabric sets the fabric inside nodes of this type (tp_nodetype_set_fabric()): it overrides
// the node level's fabric for them, and with it the type's own pair figures apply.
func (nt *NodeType) SetFabric(f Fabric) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_fabric(nt.p, C.tp_link_kind(f.Kind), C.double(f.GBps),
		C.double(f.LatencyUs)))
}

// Fabric is the fabric the type sets for its nodes; ok is false when it sets none (its nodes
// use the node level's).
func (nt *NodeType) Fabric() (f Fabric, ok bool) {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return Fabric{}, false
	}
	var k C.tp_link_kind
	var g, l C.double
	if C.tp_nodetype_fabric(nt.p, &k, &g, &l) != 0 {
		return Fabric{}, false
	}
	return Fabric{LinkKind(k), float64(g), float64(l)}, true
}

// SetGPUPCIeGbps sets a GPU's PCIe link bandwidth, GB/s (0 forgets it).
func (nt *NodeType) SetGPUPCIeGbps(gpu uint, gbps float64) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_gpu_pcie_gbps(nt.p, C.unsigned(gpu), C.double(gbps)))
}

// PairGbps is the bandwidth the cost model gives GPUs a and b from the type's own figures
// (NVLink, else PCIe), 0 when it has none.
func (nt *NodeType) PairGbps(a, b uint) float64 {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return 0
	}
	return float64(C.tp_nodetype_pair_gbps(nt.p, C.unsigned(a), C.unsigned(b)))
}

// NICKind is what a NIC is, for GPU+NIC pairing (tp_nic_kind).
type NICKind int

// The NIC kinds.
const (
	NICUnknown  NICKind = C.TP_NIC_UNKNOWN  // not said
	NICRDMA     NICKind = C.TP_NIC_RDMA     // InfiniBand or RoCE
	NICEthernet NICKind = C.TP_NIC_ETHERNET // plain Ethernet, no RDMA
)

// SetNICKind sets a NIC's kind.
func (nt *NodeType) SetNICKind(nic uint, kind NICKind) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_nic_kind(nt.p, C.unsigned(nic), C.tp_nic_kind(kind)))
}

// NICKind is a NIC's kind.
func (nt *NodeType) NICKind(nic uint) (NICKind, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	k := C.tp_nodetype_nic_kind(nt.p, C.unsigned(nic))
	if k < 0 {
		return 0, nt.noSuch(k, "NIC", nic, nt.NICCount())
	}
	return NICKind(k), nil
}

// noSuch is the error of a read-only query (which leaves no message) for an index out of
// range.
func (nt *NodeType) noSuch(rc C.int, what string, i uint, n int) error {
	return fail(rc, fmt.Sprintf("node type: no %s %d (it has %d)", what, i, n))
}

// Locality says where a GPU or NIC sits outside the PCIe switches: identifiers compared for
// equality only, -1 for unknown.
type Locality struct {
	Package, NUMA, HostBridge int
}

// SetGPULocality says where a GPU sits outside the PCIe switches.
func (nt *NodeType) SetGPULocality(gpu uint, l Locality) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_gpu_locality(nt.p, C.unsigned(gpu), C.int(l.Package),
		C.int(l.NUMA), C.int(l.HostBridge)))
}

// SetNICLocality says where a NIC sits outside the PCIe switches.
func (nt *NodeType) SetNICLocality(nic uint, l Locality) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	return nt.err(C.tp_nodetype_set_nic_locality(nt.p, C.unsigned(nic), C.int(l.Package),
		C.int(l.NUMA), C.int(l.HostBridge)))
}

// SetGPUBusID records a GPU's PCI bus id ("0000:3b:00.0").
func (nt *NodeType) SetGPUBusID(gpu uint, busID string) error {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return err
	}
	cs := C.CString(busID)
	defer C.free(unsafe.Pointer(cs))
	return nt.err(C.tp_nodetype_set_gpu_bus_id(nt.p, C.unsigned(gpu), cs))
}

// GPUBusID is a GPU's PCI bus id ("" when unknown).
func (nt *NodeType) GPUBusID(gpu uint) string {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return ""
	}
	return gostr(C.tp_nodetype_gpu_bus_id(nt.p, C.unsigned(gpu)))
}

// PCIeSwitchCount is the number of PCIe switches.
func (nt *NodeType) PCIeSwitchCount() int {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return 0
	}
	return int(C.tp_nodetype_pcie_switch_count(nt.p))
}

// sw maps TP_NONE (the host bridge) to -1.
func sw(v C.uint32_t) int {
	if v == C.TP_NONE {
		return -1
	}
	return int(v)
}

// PCIeSwitchParent is the parent of a PCIe switch, -1 for the host bridge.
func (nt *NodeType) PCIeSwitchParent(s uint) (int, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	var v C.uint32_t
	if rc := C.tp_nodetype_pcie_switch_parent(nt.p, C.unsigned(s), &v); rc != 0 {
		return 0, nt.noSuch(rc, "PCIe switch", s, nt.PCIeSwitchCount())
	}
	return sw(v), nil
}

// GPUSwitch is the PCIe switch a GPU sits directly behind, -1 for the host bridge.
func (nt *NodeType) GPUSwitch(gpu uint) (int, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	var v C.uint32_t
	if rc := C.tp_nodetype_gpu_switch(nt.p, C.unsigned(gpu), &v); rc != 0 {
		return 0, nt.noSuch(rc, "GPU", gpu, nt.GPUCount())
	}
	return sw(v), nil
}

// NICCount is the number of NICs.
func (nt *NodeType) NICCount() int {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return 0
	}
	return int(C.tp_nodetype_nic_count(nt.p))
}

// NICName is a NIC's name ("" for an unknown NIC).
func (nt *NodeType) NICName(nic uint) string {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return ""
	}
	return gostr(C.tp_nodetype_nic_name(nt.p, C.unsigned(nic)))
}

// NICSwitch is the PCIe switch a NIC sits behind, -1 for the host bridge.
func (nt *NodeType) NICSwitch(nic uint) (int, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	var v C.uint32_t
	if rc := C.tp_nodetype_nic_switch(nt.p, C.unsigned(nic), &v); rc != 0 {
		return 0, nt.noSuch(rc, "NIC", nic, nt.NICCount())
	}
	return sw(v), nil
}

// GPUNearestNIC is the NIC closest to a GPU by the rule GPU+NIC pairs follow; ErrNotFound when
// the node has no NIC.
func (nt *NodeType) GPUNearestNIC(gpu uint) (uint, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	r := C.tp_nodetype_gpu_nearest_nic(nt.p, C.unsigned(gpu))
	switch {
	case r == C.TP_ENOTFOUND:
		return 0, fail(r, "node type: it has no NIC")
	case r < 0:
		return 0, nt.noSuch(r, "GPU", gpu, nt.GPUCount())
	}
	return uint(r), nil
}

// NVSwitchCount is the number of NVSwitches.
func (nt *NodeType) NVSwitchCount() int {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return 0
	}
	return int(C.tp_nodetype_nvswitch_count(nt.p))
}

// NVLinkGbps is the NVLink bandwidth between GPUs a and b (0: none, or out of range).
func (nt *NodeType) NVLinkGbps(a, b uint) float64 {
	defer runtime.KeepAlive(nt)
	if nt.closed() != nil {
		return 0
	}
	return float64(C.tp_nodetype_nvlink_gbps(nt.p, C.unsigned(a), C.unsigned(b)))
}

// PCIeDistance is the number of switch hops between GPUs a and b through their lowest common
// switch.
func (nt *NodeType) PCIeDistance(a, b uint) (int, error) {
	defer runtime.KeepAlive(nt)
	if err := nt.closed(); err != nil {
		return 0, err
	}
	d := C.tp_nodetype_pcie_distance(nt.p, C.unsigned(a), C.unsigned(b))
	if d < 0 {
		return 0, fail(d, fmt.Sprintf("node type: GPU %d or %d is not one of its %d", a, b,
			nt.GPUCount()))
	}
	return int(d), nil
}

// NodeOptions are the attributes of a node (tp_node_options); nil means the defaults.
type NodeOptions struct {
	Model      string    // device model ("H100"); "": none
	MemoryGB   float64   // memory per device; 0: unknown
	Perf       float64   // relative speed of every device; 0: 1.0
	DevicePerf []float64 // one relative speed per device (overrides Perf), or nil
	Type       *NodeType // the node's insides (copied), or nil for plain GPUs
}

// withC calls fn with o as C options (nil for a nil o), its memory alive until fn returns.
func (o *NodeOptions) withC(fn func(*C.tp_node_options) C.int) C.int {
	if o == nil {
		return fn(nil)
	}
	defer runtime.KeepAlive(o.Type)
	var m cmem
	defer m.free()
	var co C.tp_node_options
	C.tp_node_options_init(&co, C.TP_NODE_OPTIONS_VERSION)
	co.model = m.str(o.Model)
	co.memory_gb = C.double(o.MemoryGB)
	if o.Perf != 0 {
		co.perf = C.double(o.Perf)
	}
	if len(o.DevicePerf) > 0 {
		v := unsafe.Slice((*C.double)(m.alloc(uintptr(len(o.DevicePerf)), 8)), len(o.DevicePerf))
		for i, x := range o.DevicePerf {
			v[i] = C.double(x)
		}
		co.device_perf = &v[0]
	}
	if o.Type != nil {
		co._type = o.Type.p
	}
	return fn(&co)
}

// AddNodeWith adds a node with gpus devices below path and attributes opts (a device model
// and memory for select and sizing, speeds, a node type whose GPU count must be gpus).
func (b *TopologyBuilder) AddNodeWith(name string, path []string, gpus uint, opts *NodeOptions) error {
	defer runtime.KeepAlive(b)
	if opts != nil && opts.Type != nil && opts.Type.p == nil {
		return fail(C.TP_EINVAL, "node options: the node type is closed")
	}
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	arr, free := cstrings(path)
	defer free()
	return b.err(opts.withC(func(o *C.tp_node_options) C.int {
		return C.tp_topology_builder_add_node(b.p, cs, arr, C.unsigned(gpus), o)
	}))
}

// GenerateWith adds a regular tree as Generate, every node with the attributes opts.
func (b *TopologyBuilder) GenerateWith(counts []uint, gpusPerNode uint, opts *NodeOptions) error {
	defer runtime.KeepAlive(b)
	if len(counts) == 0 {
		return fail(C.TP_EINVAL, "counts is empty")
	}
	c := make([]C.unsigned, len(counts))
	for i, v := range counts {
		c[i] = C.unsigned(v)
	}
	return b.err(opts.withC(func(o *C.tp_node_options) C.int {
		return C.tp_topology_builder_generate(b.p, &c[0], C.unsigned(gpusPerNode), o)
	}))
}
