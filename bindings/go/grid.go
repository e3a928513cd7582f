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

// Grid is how the domains of a grid level hold their children: a ring (one wrapping axis), a
// 2-D or 3-D torus (every axis wraps) or a mesh (none wraps), of extents Dims (1 to 3 of
// them). Wrap says, per axis, whether it wraps around; nil means every axis does (a torus, or
// a ring).
type Grid struct {
	Dims []uint32
	Wrap []bool
}

// bits is the grid in C form: extents and wrap bits.
func (g Grid) bits() ([C.TP_GRID_MAX_DIMS]C.unsigned, C.unsigned, C.unsigned, error) {
	var dims [C.TP_GRID_MAX_DIMS]C.unsigned
	if len(g.Dims) == 0 || len(g.Dims) > C.TP_GRID_MAX_DIMS {
		return dims, 0, 0, fail(C.TP_EINVAL, fmt.Sprintf("grid.dims has %d extents: 1 to %d",
			len(g.Dims), C.TP_GRID_MAX_DIMS))
	}
	if g.Wrap != nil && len(g.Wrap) != len(g.Dims) {
		return dims, 0, 0, fail(C.TP_EINVAL, fmt.Sprintf("grid.wrap has %d axes, grid.dims %d",
			len(g.Wrap), len(g.Dims)))
	}
	var wrap C.unsigned
	for i, d := range g.Dims {
		dims[i] = C.unsigned(d)
		if g.Wrap == nil || g.Wrap[i] {
			wrap |= 1 << i
		}
	}
	return dims, C.unsigned(len(g.Dims)), wrap, nil
}

// SetGrid declares that every domain of level (an index above the node level) holds its
// children on the grid g; give each child its cell with SetCoords.
func (b *TopologyBuilder) SetGrid(level uint, g Grid) error {
	defer runtime.KeepAlive(b)
	dims, n, wrap, err := g.bits()
	if err != nil {
		return err
	}
	return b.err(C.tp_topology_builder_set_grid(b.p, C.unsigned(level), &dims[0], n, wrap))
}

// SetCoords gives a child of a grid domain its coordinates: the child is at level (an index,
// >= 1, whose parent level is a grid) and path ("pod0/cube3", or the node's name at the node
// level).
func (b *TopologyBuilder) SetCoords(level uint, path string, coords []uint32) error {
	defer runtime.KeepAlive(b)
	if len(coords) == 0 || len(coords) > C.TP_GRID_MAX_DIMS {
		return fail(C.TP_EINVAL, fmt.Sprintf("coords of %q: %d values, 1 to %d", path,
			len(coords), C.TP_GRID_MAX_DIMS))
	}
	var c [C.TP_GRID_MAX_DIMS]C.unsigned
	for i, v := range coords {
		c[i] = C.unsigned(v)
	}
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	return b.err(C.tp_topology_builder_set_coords(b.p, C.unsigned(level), cs, &c[0]))
}

// GenerateTorus builds TPU-pod-like tori: levels pod, chip; pods pods, each the grid g with
// one chip (a node of one device, model "TPU") per cell, named pod<p>-chip<i> with
// i = x + dims[0] * (y + dims[1] * z).
func GenerateTorus(pods uint, g Grid) (*Topology, error) {
	dims, n, wrap, err := g.bits()
	if err != nil {
		return nil, err
	}
	var p *C.tp_topology
	if rc := C.tp_topology_generate_torus(&p, C.unsigned(pods), &dims[0], n, wrap, nil); rc != 0 {
		return nil, fail(rc, fmt.Sprintf("torus(%d, %v): invalid or too large a fleet", pods,
			g.Dims))
	}
	return wrapTopology(p), nil
}

// GenerateRing builds rings of nodes, as Slurm's topology/ring: levels ring, node; node i of
// ring r at position i, named ring<r>-node<i>.
func GenerateRing(rings, nodesPerRing, gpusPerNode uint) (*Topology, error) {
	var p *C.tp_topology
	rc := C.tp_topology_generate_ring(&p, C.unsigned(rings), C.unsigned(nodesPerRing),
		C.unsigned(gpusPerNode), nil)
	if rc != 0 {
		return nil, fail(rc, fmt.Sprintf("ring(%d, %d, %d): invalid or too large a fleet",
			rings, nodesPerRing, gpusPerNode))
	}
	return wrapTopology(p), nil
}

// Grid is the grid of a level; ok is false when the level is no grid.
func (t *Topology) Grid(level string) (g Grid, ok bool, err error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return Grid{}, false, err
	}
	var dims [C.TP_GRID_MAX_DIMS]C.unsigned
	var n, wrap C.unsigned
	if C.tp_topology_grid(t.p, C.unsigned(l), &dims[0], &n, &wrap) != 0 {
		return Grid{}, false, nil
	}
	for i := 0; i < int(n); i++ {
		g.Dims = append(g.Dims, uint32(dims[i]))
		g.Wrap = append(g.Wrap, wrap&(1<<i) != 0)
	}
	return g, true, nil
}

// Coords are the coordinates of a child (a domain of level, a node at the node level) in its
// parent's grid, one per axis of the grid.
func (t *Topology) Coords(level string, dom uint32) ([]uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return nil, err
	}
	if l == 0 {
		return nil, fail(C.TP_ENOTFOUND, fmt.Sprintf("level %q has no parent grid", level))
	}
	g, ok, _ := t.Grid(C.GoString(C.tp_topology_level_name(t.p, C.unsigned(l-1))))
	if !ok {
		return nil, fail(C.TP_ENOTFOUND, fmt.Sprintf("the parent level of %q is no grid", level))
	}
	var c [C.TP_GRID_MAX_DIMS]C.unsigned
	if rc := C.tp_topology_domain_coords(t.p, C.unsigned(l), C.uint32_t(dom), &c[0]); rc != 0 {
		return nil, fail(rc, fmt.Sprintf("%s %d is not a domain of the topology", level, dom))
	}
	out := make([]uint32, len(g.Dims))
	for i := range out {
		out[i] = uint32(c[i])
	}
	return out, nil
}

// GridChild is the child of domain dom of a grid level at coords (ErrNotFound for an empty
// cell).
func (t *Topology) GridChild(level string, dom uint32, coords []uint32) (uint32, error) {
	defer runtime.KeepAlive(t)
	l, err := t.level(level, false)
	if err != nil {
		return 0, err
	}
	var c [C.TP_GRID_MAX_DIMS]C.unsigned
	if len(coords) > len(c) {
		return 0, fail(C.TP_EINVAL, fmt.Sprintf("coords %v: more than %d values", coords, len(c)))
	}
	for i, v := range coords {
		c[i] = C.unsigned(v)
	}
	var child C.uint32_t
	if rc := C.tp_topology_grid_child(t.p, C.unsigned(l), C.uint32_t(dom), &c[0], &child); rc != 0 {
		return 0, fail(rc, fmt.Sprintf("%s %d has no child at %v", level, dom, coords))
	}
	return uint32(child), nil
}

// Box asks a request for a box of whole children of one domain of the grid level Level:
// Extents x, y, z (an unused axis 0 or 1; on a ring, an arc of Extents[0] children). Wrap lets
// the box cross the seam of a wrapping axis; Rotate allows any order of the extents. The
// request's Count must be the box's devices.
type Box struct {
	Level   string
	Extents [3]uint32
	Wrap    bool
	Rotate  bool
}
