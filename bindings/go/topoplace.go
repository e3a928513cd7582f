// SPDX-License-Identifier: MIT

// Package topoplace is the Go binding of libtopoplace, topology-aware placement of GPU jobs:
// cgo over the public C header, standard library only.
//
// Long-lived library objects (Topology, TopologyBuilder, Cluster, Placement) wrap a C handle;
// call Close when done (a finalizer frees a forgotten one, as a safety net only). Results that
// are plain data (a plan, a fragmentation report, warnings) are copied into Go values, so no
// Go value keeps a C pointer beyond its owner. Every failure is an *Error carrying the
// library's code and the message of the object that failed ("request.slices[0].size: 48 does
// not divide count 512"); errors.Is(err, ErrFragmented) tests the code.
//
// Thread safety follows the library: a Topology is immutable and may be shared; a Cluster has
// one writer at a time.
package topoplace

/*
#cgo LDFLAGS: -ltopoplace
#include <stdlib.h>
#include <topoplace.h>
#include <topoplace-slurm.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// Error is a failure of the library: its code (TP_E*), the code's name and the message.
type Error struct {
	Code    int
	Name    string
	Message string
	// Fit are the figures of a request Place or Replace could not place (ErrInfeasible,
	// ErrBusy, ErrFragmented), nil otherwise.
	Fit *Fit
	// Shrink is, for a Replace that could not repair the job, its cheapest shrink; nil
	// otherwise.
	Shrink *Shrink
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Name + ": " + C.GoString(C.tp_strerror(C.int(e.Code)))
	}
	return e.Name + ": " + e.Message
}

// Is reports whether target is an *Error of the same code (errors.Is(err, ErrBusy)).
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

func code(c C.int) *Error {
	return &Error{Code: int(c), Name: C.GoString(C.tp_err_name(c))}
}

// The library's error codes, for errors.Is.
var (
	ErrInvalid    = code(C.TP_EINVAL)
	ErrNoMemory   = code(C.TP_ENOMEM)
	ErrNotFound   = code(C.TP_ENOTFOUND)
	ErrExists     = code(C.TP_EEXIST)
	ErrInfeasible = code(C.TP_EINFEASIBLE)
	ErrBusy       = code(C.TP_EBUSY)
	ErrFragmented = code(C.TP_EFRAGMENTED)
	ErrNoPlan     = code(C.TP_ENOPLAN)
	ErrParse      = code(C.TP_EPARSE)
	ErrLimit      = code(C.TP_ELIMIT)
)

func fail(rc C.int, msg string) error {
	if rc == 0 {
		return nil
	}
	e := code(rc)
	e.Message = msg
	return e
}

// cstrings copies ss into C memory; free releases it.
func cstrings(ss []string) (arr **C.char, free func()) {
	if len(ss) == 0 {
		return nil, func() {}
	}
	p := C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof((*C.char)(nil))))
	v := unsafe.Slice((**C.char)(p), len(ss))
	for i, s := range ss {
		v[i] = C.CString(s)
	}
	return (**C.char)(p), func() {
		for i := range v {
			C.free(unsafe.Pointer(v[i]))
		}
		C.free(p)
	}
}

// cstr is C.CString that maps "" to NULL (the library's "not given").
func cstr(s string) *C.char {
	if s == "" {
		return nil
	}
	return C.CString(s)
}

// ---- topology -----------------------------------------------------------------------------

// Topology is an immutable cluster tree: levels (outermost first, the node level last),
// domains, nodes and devices. Devices are identified by id (0 .. DeviceCount()-1) or by name
// ("node/index").
type Topology struct {
	p        *C.tp_topology
	borrowed bool            // owned by a Scenario: Close only detaches
	owner    *scenarioHandle // the owner of a borrowed topology, kept alive by it
}

func wrapTopology(p *C.tp_topology) *Topology {
	t := &Topology{p: p}
	runtime.SetFinalizer(t, (*Topology).Close)
	return t
}

// Close frees the topology (one a Scenario owns is only let go); it must outlive every Cluster
// made on it. Safe to call twice.
func (t *Topology) Close() error {
	if t != nil && t.p != nil {
		if !t.borrowed {
			C.tp_topology_destroy(t.p)
		}
		t.p = nil
		runtime.SetFinalizer(t, nil)
	}
	return nil
}

// GenerateNVL72 builds a GB200 NVL72 fleet: levels block, rack, node; 18 nodes of 4 GPUs per
// rack.
func GenerateNVL72(blocks, racksPerBlock uint) (*Topology, error) {
	var p *C.tp_topology
	rc := C.tp_topology_generate_nvl72(&p, C.unsigned(blocks), C.unsigned(racksPerBlock), nil)
	if rc != 0 {
		return nil, fail(rc, fmt.Sprintf("nvl72(%d, %d): invalid or too large a fleet", blocks,
			racksPerBlock))
	}
	return wrapTopology(p), nil
}

// Levels are the level names, outermost first.
func (t *Topology) Levels() []string {
	n := int(C.tp_topology_level_count(t.p))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.tp_topology_level_name(t.p, C.unsigned(i)))
	}
	runtime.KeepAlive(t)
	return out
}

// NodeCount is the number of nodes.
func (t *Topology) NodeCount() int {
	defer runtime.KeepAlive(t)
	return int(C.tp_topology_node_count(t.p))
}

// DeviceCount is the number of devices.
func (t *Topology) DeviceCount() int {
	defer runtime.KeepAlive(t)
	return int(C.tp_topology_device_count(t.p))
}

// DeviceName is a device's name, "node/index".
func (t *Topology) DeviceName(dev uint32) string {
	defer runtime.KeepAlive(t)
	node := C.tp_topology_device_node(t.p, C.uint32_t(dev))
	return fmt.Sprintf("%s/%d", C.GoString(C.tp_topology_node_name(t.p, node)),
		uint32(C.tp_topology_device_index(t.p, C.uint32_t(dev))))
}

// Device finds a device by name ("x3/1").
func (t *Topology) Device(name string) (uint32, error) {
	defer runtime.KeepAlive(t)
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var dev C.uint32_t
	rc := C.tp_topology_device_by_name(t.p, cs, &dev)
	return uint32(dev), fail(rc, fmt.Sprintf("no device named %q", name))
}

// Devices finds devices by name.
func (t *Topology) Devices(names ...string) ([]uint32, error) {
	out := make([]uint32, len(names))
	for i, n := range names {
		d, err := t.Device(n)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	return out, nil
}

// TopologyBuilder collects levels and nodes, then builds a Topology.
type TopologyBuilder struct {
	p *C.tp_topology_builder
}

func wrapBuilder(p *C.tp_topology_builder) *TopologyBuilder {
	b := &TopologyBuilder{p: p}
	runtime.SetFinalizer(b, (*TopologyBuilder).Close)
	return b
}

// NewTopologyBuilder starts a topology with these levels, outermost first (the last is the
// node level).
func NewTopologyBuilder(levels ...string) (*TopologyBuilder, error) {
	arr, free := cstrings(levels)
	defer free()
	var p *C.tp_topology_builder
	rc := C.tp_topology_builder_create(&p, arr, C.unsigned(len(levels)), nil)
	if rc != 0 {
		return nil, fail(rc, fmt.Sprintf("levels %q: invalid (1 to %d unique names, no '/', "+
			"not \"cluster\")", levels, C.TP_MAX_LEVELS))
	}
	return wrapBuilder(p), nil
}

// Close frees the builder. Safe to call twice.
func (b *TopologyBuilder) Close() error {
	if b != nil && b.p != nil {
		C.tp_topology_builder_destroy(b.p)
		b.p = nil
		runtime.SetFinalizer(b, nil)
	}
	return nil
}

func (b *TopologyBuilder) err(rc C.int) error {
	return fail(rc, C.GoString(C.tp_topology_builder_errmsg(b.p)))
}

// AddNode adds a node with gpus devices below path (one domain name per level above the
// node).
func (b *TopologyBuilder) AddNode(name string, path []string, gpus uint) error {
	defer runtime.KeepAlive(b)
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	arr, free := cstrings(path)
	defer free()
	return b.err(C.tp_topology_builder_add_node(b.p, cs, arr, C.unsigned(gpus), nil))
}

// Generate adds a regular tree: counts[i] domains of level i in each domain of level i-1.
func (b *TopologyBuilder) Generate(counts []uint, gpusPerNode uint) error {
	defer runtime.KeepAlive(b)
	if len(counts) == 0 {
		return fail(C.TP_EINVAL, "counts is empty")
	}
	c := make([]C.unsigned, len(counts))
	for i, v := range counts {
		c[i] = C.unsigned(v)
	}
	return b.err(C.tp_topology_builder_generate(b.p, &c[0], C.unsigned(gpusPerNode), nil))
}

// Build makes the Topology; the builder may be closed afterwards.
func (b *TopologyBuilder) Build() (*Topology, error) {
	defer runtime.KeepAlive(b)
	var p *C.tp_topology
	if rc := C.tp_topology_build(b.p, &p); rc != 0 {
		return nil, b.err(rc)
	}
	return wrapTopology(p), nil
}
