// SPDX-License-Identifier: MIT

package topoplace

import (
	"errors"
	"reflect"
	"testing"
)

func TestVersion(t *testing.T) {
	if Version() != 400 || VersionString() != "0.4.0" {
		t.Fatalf("version %d %q", Version(), VersionString())
	}
}

func TestTreeQueries(t *testing.T) {
	topo, c := fleet(t, 2) // block0, racks 0 and 1, 18 nodes of 4 GPUs each
	if kids, err := topo.DomainChildren("block", 0); err != nil || !reflect.DeepEqual(kids, []uint32{0, 1}) {
		t.Fatalf("block 0's racks %v, %v", kids, err)
	}
	if nodes, _ := topo.DomainNodes("rack", 1); len(nodes) != 18 || nodes[0] != 18 {
		t.Fatalf("rack 1's nodes %v", nodes)
	}
	if name, _ := topo.DomainName("rack", 1); name != "rack1" {
		t.Fatalf("rack 1 is %q", name)
	}
	if p, err := topo.DomainParent("rack", 1); err != nil || p != 0 {
		t.Fatalf("rack 1's parent %d, %v", p, err)
	}
	_, err := topo.DomainParent("block", 0)
	wantErr(t, err, ErrInvalid, "no parent")
	if r, _ := topo.NodeDomain(20, "rack"); r != 1 {
		t.Fatalf("node 20 in rack %d", r)
	}
	if n, _ := topo.DomainNVSwitchCount("rack", 0); n != 9 {
		t.Fatalf("rack 0 has %d NVSwitch trays", n)
	}
	if l, _ := topo.CommonLevel(0, 5); l != "rack" {
		t.Fatalf("devices 0 and 5 meet at %q", l)
	}
	if l, _ := topo.CommonLevel(0, 3); l != "node" {
		t.Fatalf("devices 0 and 3 meet at %q", l)
	}
	_, err = topo.CommonLevel(0, 9999)
	wantErr(t, err, ErrInvalid, "9999")
	if topo.DevicePerf(0) != 1 || topo.Memory() == 0 || c.Memory() == 0 {
		t.Fatal("perf or memory")
	}
	_, err = topo.DomainChildren("rack", 7)
	wantErr(t, err, ErrInvalid, "rack 7 is not a domain")

	// The cluster's counts and indexes.
	must(t, c.Assign("a", append(topo.NodeDevices(0), topo.NodeDevices(1)[:3]...)))
	if n, _ := c.FreeNodeCount("rack", 0); n != 16 {
		t.Fatalf("rack 0 has %d free nodes", n)
	}
	if h, _ := c.NodeHistogram("rack", 0); !reflect.DeepEqual(h, []uint32{1, 1, 0, 0, 16}) {
		t.Fatalf("rack 0's histogram %v", h)
	}
	if d, err := c.Tightest("node", 1); err != nil || d != 1 {
		t.Fatalf("the tightest node with a free device: %d, %v", d, err)
	}
	if d, _ := c.Tightest("rack", 72); d != 1 {
		t.Fatalf("the tightest whole rack %d", d)
	}
	_, err = c.Tightest("rack", 100)
	wantErr(t, err, ErrNotFound, "no rack has 100 free devices")
	must(t, c.SetDown(topo.NodeDevices(5)[:1], true))
	must(t, c.SetCordoned(topo.NodeDevices(6), true))
	if c.DownTotalCount() != 1 || c.CordonedTotalCount() != 4 {
		t.Fatalf("down %d, cordoned %d", c.DownTotalCount(), c.CordonedTotalCount())
	}
}

func TestPlacementDomainsFitAndShrink(t *testing.T) {
	topo, c := fleet(t, 2)
	p, err := c.Place(Request{ID: "big", Count: 80, GroupSize: 4})
	must(t, err)
	defer p.Close()
	racks, err := p.Domains("rack")
	must(t, err)
	if len(racks) != 2 || racks[0].Devices+racks[1].Devices != 80 {
		t.Fatalf("racks used %+v", racks)
	}
	must(t, c.Commit(p))
	_, err = c.Place(Request{Count: 72, Required: "rack"})
	var e *Error
	if !errors.As(err, &e) || e.Fit == nil || e.Fit.Needed != 72 || e.Fit.FreeTotal != 64 ||
		e.Fit.Level != "rack" || e.Fit.Best != 64 || e.Shrink != nil {
		t.Fatalf("fit of a rack job that does not fit: %v, %+v", err, e)
	}
	// A job of 2 slices of 4 in a rack; both racks' other nodes are taken, one node dies:
	// the cheapest shrink keeps the other slice.
	c2, _ := NewCluster(topo)
	defer c2.Close()
	o := DefaultJobOptions()
	o.Shape = &Request{Count: 8, Required: "rack", Slices: []Slice{{"node", 4}}}
	job := append(topo.NodeDevices(0), topo.NodeDevices(1)...)
	must(t, c2.AssignWith("j", job, &o))
	for n := uint32(2); n < 36; n++ {
		must(t, c2.Assign("f"+topo.NodeName(n), topo.NodeDevices(n)))
	}
	must(t, c2.SetDown(topo.NodeDevices(1)[:1], true))
	_, err = c2.Replace("j", topo.NodeDevices(1)[:1])
	if !errors.As(err, &e) || e.Shrink == nil || *e.Shrink != (Shrink{Ranks: 4, Units: 1, Of: 2}) {
		t.Fatalf("shrink of an unrepairable job: %v, %+v", err, e)
	}
}

func TestCostModel(t *testing.T) {
	topo, _ := fleet(t, 2)
	m := StepModel{TP: 4, DP: 2, ComputeUs: 1000, TPBytes: 1 << 26, TPMsgs: 2, DPBytes: 1 << 28}
	near8 := append(topo.NodeDevices(0), topo.NodeDevices(1)...)
	far8 := append(topo.NodeDevices(0), topo.NodeDevices(20)...)
	a, err := topo.CostStepUs(near8, m)
	must(t, err)
	b, err := topo.CostStepUs(far8, m)
	must(t, err)
	if a <= 1000 || b <= a {
		t.Fatalf("step %v us in one rack, %v across racks", a, b)
	}
	if e, _ := topo.CostEfficiency(near8, m); e != 1 {
		t.Fatalf("efficiency in one rack %v", e)
	}
	if e, _ := topo.CostEfficiency(far8, m); !(e < 1 && e > 0) || !near(e, a/b) {
		t.Fatalf("efficiency across racks %v (steps %v, %v)", e, a, b)
	}
	_, err = topo.CostStepUs(near8[:6], m)
	wantErr(t, err, ErrInvalid, "6")
}

func TestWriterGuardOption(t *testing.T) {
	topo, _ := fleet(t, 1)
	c, err := NewClusterWith(topo, ClusterOptions{WriterGuard: true})
	must(t, err)
	defer c.Close()
	must(t, c.Assign("a", topo.NodeDevices(0)))
	if c.Jobs()[0] != "a" {
		t.Fatal("the guarded cluster lost the job")
	}
}

func TestDeviceStates(t *testing.T) {
	topo, c := twoRacks(t)
	d, _ := topo.Devices("x1/0", "x1/1", "x1/2")
	must(t, c.Assign("a", d[:1]))
	must(t, c.SetDown(d[1:2], true))
	must(t, c.SetCordoned(d[2:3], true))
	for i, want := range []DeviceState{DeviceHeld, DeviceDown, DeviceCordoned} {
		s, job, err := c.DeviceState(d[i])
		must(t, err)
		if s != want || (job == "a") != (i == 0) {
			t.Fatalf("device %d: %v %q, want %v", d[i], s, job, want)
		}
	}
	if s, _, _ := c.DeviceState(15); s != DeviceFree || s.String() != "free" {
		t.Fatalf("x4/3 is %v", s)
	}
	_, _, err := c.DeviceState(16)
	wantErr(t, err, ErrInvalid, "device 16 is not in the topology (16 devices)")
}
