// SPDX-License-Identifier: MIT

package topoplace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestTorusAndRingGenerators(t *testing.T) {
	topo, err := GenerateTorus(2, Grid{Dims: []uint32{4, 4, 2}})
	must(t, err)
	defer topo.Close()
	if !reflect.DeepEqual(topo.Levels(), []string{"pod", "chip"}) || topo.DeviceCount() != 64 {
		t.Fatalf("levels %v, %d devices", topo.Levels(), topo.DeviceCount())
	}
	g, ok, err := topo.Grid("pod")
	must(t, err)
	if !ok || !reflect.DeepEqual(g, Grid{Dims: []uint32{4, 4, 2}, Wrap: []bool{true, true, true}}) {
		t.Fatalf("pod grid %+v %v", g, ok)
	}
	if _, ok, _ := topo.Grid("chip"); ok {
		t.Fatal("the chip level is a grid")
	}
	n, _ := topo.Node("pod1-chip17") // 17 = 1 + 4 * (0 + 4 * 1)
	if c, err := topo.Coords("chip", n); err != nil || !reflect.DeepEqual(c, []uint32{1, 0, 1}) {
		t.Fatalf("pod1-chip17 at %v, %v", c, err)
	}
	if ch, err := topo.GridChild("pod", 1, []uint32{1, 0, 1}); err != nil || ch != n {
		t.Fatalf("pod 1 at (1,0,1): %d, %v (want %d)", ch, err, n)
	}
	_, err = topo.GridChild("pod", 0, []uint32{4, 0, 0})
	wantErr(t, err, ErrInvalid, "no child at [4 0 0]")
	_, err = topo.Coords("pod", 0)
	wantErr(t, err, ErrNotFound, "no parent grid")

	mesh, err := GenerateTorus(1, Grid{Dims: []uint32{3, 3}, Wrap: []bool{false, false}})
	must(t, err)
	defer mesh.Close()
	if g, _, _ := mesh.Grid("pod"); !reflect.DeepEqual(g.Wrap, []bool{false, false}) {
		t.Fatalf("mesh wraps %v", g.Wrap)
	}
	_, err = GenerateTorus(1, Grid{Dims: []uint32{2, 2, 2, 2}})
	wantErr(t, err, ErrInvalid, "grid.dims has 4")
	_, err = GenerateTorus(1, Grid{Dims: []uint32{2, 2}, Wrap: []bool{true}})
	wantErr(t, err, ErrInvalid, "grid.wrap has 1")

	ring, err := GenerateRing(2, 8, 4)
	must(t, err)
	defer ring.Close()
	if g, ok, _ := ring.Grid("ring"); !ok || !reflect.DeepEqual(g, Grid{Dims: []uint32{8}, Wrap: []bool{true}}) {
		t.Fatalf("ring grid %+v", g)
	}
	n, _ = ring.Node("ring1-node3")
	if c, _ := ring.Coords("node", n); !reflect.DeepEqual(c, []uint32{3}) {
		t.Fatalf("ring1-node3 at %v", c)
	}
	_, err = GenerateRing(1, 0, 4)
	wantErr(t, err, ErrInvalid, "ring(1, 0, 4)")
}

// A builder's ring of six nodes whose middle is taken: an arc of two fits only across the
// seam, n5 then n0.
func TestBuilderGridAndAWrappingArc(t *testing.T) {
	b, err := NewTopologyBuilder("ring", "node")
	must(t, err)
	defer b.Close()
	must(t, b.SetGrid(0, Grid{Dims: []uint32{6}}))
	names := []string{"n0", "n1", "n2", "n3", "n4", "n5"}
	for i, n := range names {
		must(t, b.AddNode(n, []string{"r0"}, 2))
		must(t, b.SetCoords(1, n, []uint32{uint32(i)}))
	}
	wantErr(t, b.SetCoords(1, "n0", []uint32{6}), ErrInvalid, "6")
	wantErr(t, b.SetCoords(1, "n9", []uint32{1}), ErrNotFound, "n9")
	wantErr(t, b.SetGrid(1, Grid{Dims: []uint32{2}}), ErrInvalid, "1")
	topo, err := b.Build()
	must(t, err)
	defer topo.Close()
	c, _ := NewCluster(topo)
	defer c.Close()
	mid, _ := topo.Devices("n1/0", "n1/1", "n2/0", "n2/1", "n3/0", "n3/1", "n4/0", "n4/1")
	must(t, c.Assign("mid", mid))
	_, err = c.Place(Request{Count: 4, Box: &Box{Level: "ring", Extents: [3]uint32{2}}})
	wantErr(t, err, ErrFragmented, "no 2x1x1 box")
	p, err := c.Place(Request{ID: "arc", Count: 4, Box: &Box{Level: "ring", Extents: [3]uint32{2}, Wrap: true}})
	must(t, err)
	defer p.Close()
	if got := p.DeviceNames(); !reflect.DeepEqual(got, []string{"n5/0", "n5/1", "n0/0", "n0/1"}) {
		t.Fatalf("the arc %v", got)
	}
	must(t, c.Commit(p))
	o, err := c.JobOptions("arc")
	must(t, err)
	if o.Shape == nil || !reflect.DeepEqual(o.Shape.Box, &Box{"ring", [3]uint32{2, 0, 0}, true, false}) {
		t.Fatalf("the arc's recorded shape %+v", o.Shape)
	}
	// Replace refuses a box job: a replacement would break the box.
	d, _ := topo.Device("n5/0")
	_, err = c.Replace("arc", []uint32{d})
	wantErr(t, err, ErrInvalid, "box")
}

func TestBoxRotationErrorsAndLargestBox(t *testing.T) {
	topo, err := GenerateTorus(1, Grid{Dims: []uint32{4, 2}, Wrap: []bool{false, false}})
	must(t, err)
	defer topo.Close()
	c, _ := NewCluster(topo)
	defer c.Close()
	_, err = c.Place(Request{Count: 4, Box: &Box{Level: "pod", Extents: [3]uint32{1, 4}}})
	wantErr(t, err, ErrInfeasible, "no pod has a 1x4x1 box")
	p, err := c.Place(Request{Count: 4, Box: &Box{Level: "pod", Extents: [3]uint32{1, 4}, Rotate: true}})
	must(t, err)
	if len(p.Devices) != 4 {
		t.Fatalf("rotated box %v", p.DeviceNames())
	}
	p.Close()
	_, err = c.Place(Request{Count: 3, Box: &Box{Level: "pod", Extents: [3]uint32{2, 2}}})
	wantErr(t, err, ErrInvalid, "request.count 3 is not the box's 4 devices")
	_, err = c.Place(Request{Count: 4, GroupSize: 2, Box: &Box{Level: "pod", Extents: [3]uint32{2, 2}}})
	wantErr(t, err, ErrInvalid, "box")

	mesh, err := GenerateTorus(1, Grid{Dims: []uint32{4, 4}, Wrap: []bool{false, false}})
	must(t, err)
	defer mesh.Close()
	mc, _ := NewCluster(mesh)
	defer mc.Close()
	x, _ := mesh.Device("pod0-chip5/0") // (1, 1)
	must(t, mc.Assign("x", []uint32{x}))
	r, err := mc.FragReport(nil)
	must(t, err)
	pod, chip := r.Levels[0], r.Levels[1]
	// 4x2 and 2x4 tie; the smaller x extent first.
	if !reflect.DeepEqual(pod.LargestBox, []uint32{2, 4}) || pod.GridFragmentCount != 1 {
		t.Fatalf("pod: largest box %v, fragments %d", pod.LargestBox, pod.GridFragmentCount)
	}
	if chip.LargestBox != nil || chip.GridFragmentCount != 0 {
		t.Fatalf("chip: largest box %v, fragments %d", chip.LargestBox, chip.GridFragmentCount)
	}
	// Taking the middle column splits the free space in two.
	col, _ := mesh.Devices("pod0-chip1/0", "pod0-chip9/0", "pod0-chip13/0")
	must(t, mc.Assign("col", col))
	r, _ = mc.FragReport(nil)
	if r.Levels[0].GridFragmentCount != 2 || !reflect.DeepEqual(r.Levels[0].LargestBox, []uint32{2, 4}) {
		t.Fatalf("after the column: %d fragments, largest %v", r.Levels[0].GridFragmentCount,
			r.Levels[0].LargestBox)
	}
}

// The scenario importer reads the extension keys: topology.x_grid and request.x_box (the
// arc across the seam), state.x_service_caps and request.x_service.
func TestScenarioExtensions(t *testing.T) {
	read := func(parts ...string) string {
		b, err := os.ReadFile(filepath.Join(append([]string{"..", "..", "tests", "data"}, parts...)...))
		must(t, err)
		return string(b)
	}
	s, err := ReadScenario(read("scenarios", "ring-arc.json"), ScenarioPlace, nil)
	must(t, err)
	defer s.Close()
	if s.Request == nil || !reflect.DeepEqual(s.Request.Box, &Box{"ring", [3]uint32{2, 0, 0}, true, false}) {
		t.Fatalf("the document's request %+v", s.Request)
	}
	p, err := s.Cluster().Place(*s.Request)
	must(t, err)
	defer p.Close()
	if got := p.DeviceNames(); !reflect.DeepEqual(got, []string{"n5/0", "n5/1", "n0/0", "n0/1"}) {
		t.Fatalf("the arc %v", got)
	}

	svc, err := ReadScenario(read("serving", "chat-scenario.json"), ScenarioPlace, nil)
	must(t, err)
	defer svc.Close()
	c := svc.Cluster()
	if caps, _ := c.ServiceCaps("web"); caps == nil || *caps != (ServiceCaps{Level: "rack", MaxPerDomain: 1}) {
		t.Fatalf("the document's caps %+v", caps)
	}
	if svc.Request.Service != "web" {
		t.Fatalf("the document's request %+v", svc.Request)
	}
	q, err := c.Place(*svc.Request)
	must(t, err)
	defer q.Close()
	if got := nodesOf(c, q.Devices); !strings.HasPrefix(got[0], "block0-rack2-") {
		t.Fatalf("web-2 on %v, not the rack web-0 and web-1 leave", got)
	}
}
