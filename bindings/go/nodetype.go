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
