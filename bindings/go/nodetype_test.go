// SPDX-License-Identifier: MIT

package topoplace

import (
	"errors"
	"reflect"
	"testing"
)

// handNode is a node type of 4 GPUs built by hand: two PCIe switches below the host bridge,
// GPUs 0 and 1 behind the first, 2 and 3 behind the second, an RDMA NIC behind each switch
// and a management port on the host bridge; NVLink 300 GB/s between GPUs 0 and 1.
func handNode(t *testing.T) *NodeType {
	t.Helper()
	nt, err := NewNodeType(4)
	must(t, err)
	t.Cleanup(func() { nt.Close() })
	s0, err := nt.AddPCIeSwitch(-1)
	must(t, err)
	s1, err := nt.AddPCIeSwitch(-1)
	must(t, err)
	for g := uint(0); g < 4; g++ {
		must(t, nt.SetGPUSwitch(g, int([]uint{s0, s1}[g/2])))
	}
	n0, err := nt.AddNIC("mlx5_0", int(s0), 50)
	must(t, err)
	n1, err := nt.AddNIC("mlx5_1", int(s1), 50)
	must(t, err)
	mgmt, err := nt.AddNIC("eno1", -1, 0.125)
	must(t, err)
	must(t, nt.SetNICKind(n0, NICRDMA))
	must(t, nt.SetNICKind(n1, NICRDMA))
	must(t, nt.SetNICKind(mgmt, NICEthernet))
	must(t, nt.SetNVLink(0, 1, 300))
	return nt
}

func TestNodeTypeByHand(t *testing.T) {
	nt := handNode(t)
	if nt.GPUCount() != 4 || nt.PCIeSwitchCount() != 2 || nt.NICCount() != 3 || nt.NVSwitchCount() != 0 {
		t.Fatalf("counts %d %d %d %d", nt.GPUCount(), nt.PCIeSwitchCount(), nt.NICCount(),
			nt.NVSwitchCount())
	}
	if p, err := nt.PCIeSwitchParent(1); err != nil || p != -1 {
		t.Fatalf("switch 1's parent %d, %v", p, err)
	}
	if s, err := nt.GPUSwitch(3); err != nil || s != 1 {
		t.Fatalf("GPU 3 behind %d, %v", s, err)
	}
	if s, err := nt.NICSwitch(2); err != nil || s != -1 || nt.NICName(2) != "eno1" {
		t.Fatalf("NIC 2 %q behind %d, %v", nt.NICName(2), s, err)
	}
	// Each GPU's nearest NIC is the RDMA NIC of its own switch.
	for g, want := range []uint{0, 0, 1, 1} {
		if n, err := nt.GPUNearestNIC(uint(g)); err != nil || n != want {
			t.Fatalf("GPU %d: nearest NIC %d, %v (want %d)", g, n, err, want)
		}
	}
	if k, err := nt.NICKind(2); err != nil || k != NICEthernet {
		t.Fatalf("NIC 2 kind %v, %v", k, err)
	}
	// Two GPUs of one switch are a hop each from it; across switches they meet at the host
	// bridge, two hops each.
	if d, _ := nt.PCIeDistance(0, 1); d != 2 {
		t.Fatalf("PCIe distance 0-1: %d", d)
	}
	if d, _ := nt.PCIeDistance(0, 2); d != 4 {
		t.Fatalf("PCIe distance 0-2: %d", d)
	}
	if nt.NVLinkGbps(1, 0) != 300 || nt.NVLinkGbps(0, 2) != 0 || nt.PairGbps(0, 1) != 300 {
		t.Fatalf("NVLink %v %v, pair %v", nt.NVLinkGbps(1, 0), nt.NVLinkGbps(0, 2), nt.PairGbps(0, 1))
	}
	// PCIe figures give a pair without NVLink a bandwidth: the smaller link, halved across
	// packages.
	must(t, nt.SetGPUPCIeGbps(0, 32))
	must(t, nt.SetGPUPCIeGbps(2, 64))
	must(t, nt.SetGPULocality(0, Locality{0, 0, 0}))
	must(t, nt.SetGPULocality(2, Locality{1, 1, 1}))
	must(t, nt.SetNICLocality(2, Locality{0, 0, 0}))
	if g := nt.PairGbps(0, 2); g != 32 && g != 16 {
		t.Fatalf("pair 0-2 on PCIe: %v", g)
	}
	must(t, nt.SetGPUBusID(1, "0000:3b:00.0"))
	if nt.GPUBusID(1) != "0000:3b:00.0" || nt.GPUBusID(0) != "" {
		t.Fatalf("bus ids %q %q", nt.GPUBusID(1), nt.GPUBusID(0))
	}
	if _, ok := nt.Fabric(); ok {
		t.Fatal("a fabric before SetFabric")
	}
	must(t, nt.SetFabric(Fabric{LinkPCIe, 32, 1.5}))
	if f, ok := nt.Fabric(); !ok || f != (Fabric{LinkPCIe, 32, 1.5}) {
		t.Fatalf("fabric %+v %v", f, ok)
	}
	if _, err := nt.AddNVSwitch("nvs0"); err != nil || nt.NVSwitchCount() != 1 {
		t.Fatalf("NVSwitch: %v", err)
	}

	// Refusals carry the node type's message.
	wantErr(t, nt.SetNVLink(1, 1, 100), ErrInvalid, "NVLink 1-1", "itself")
	_, err := nt.AddNIC("mlx5_9", 7, 50)
	wantErr(t, err, ErrInvalid, "7")
	wantErr(t, nt.SetGPUSwitch(9, 0), ErrInvalid, "9")
	wantErr(t, nt.SetNICKind(0, NICKind(7)), ErrInvalid, "7")
	wantErr(t, nt.SetGPUBusID(0, "a/b"), ErrInvalid, "bus")
	wantErr(t, nt.SetFabric(Fabric{LinkIB, -1, 0}), ErrInvalid, "-1")
	_, err = nt.GPUSwitch(9)
	wantErr(t, err, ErrNotFound, "no GPU 9")
	_, err = nt.NICKind(5)
	wantErr(t, err, ErrNotFound, "no NIC 5")
	_, err = NewNodeType(0)
	wantErr(t, err, ErrInvalid, "gpus 0")
	bare, _ := NewNodeType(2)
	_, err = bare.GPUNearestNIC(0)
	wantErr(t, err, ErrNotFound, "no NIC")
	bare.Close()
	wantErr(t, bare.SetNVLink(0, 1, 1), ErrInvalid, "closed")
	if bare.GPUCount() != 0 && bare.NICCount() != 0 {
		t.Fatal("a closed node type answers")
	}
}

func TestHandBuiltNodeTypeInPlacement(t *testing.T) {
	nt := handNode(t)
	b, err := NewTopologyBuilder("rack", "node")
	must(t, err)
	defer b.Close()
	must(t, b.AddNodeWith("n0", []string{"r0"}, 4, &NodeOptions{Model: "H100", MemoryGB: 80, Type: nt}))
	must(t, b.AddNodeWith("p0", []string{"r0"}, 2, &NodeOptions{Model: "L4", MemoryGB: 24,
		DevicePerf: []float64{0.5, 0.25}}))
	wantErr(t, b.AddNodeWith("n1", []string{"r0"}, 2, &NodeOptions{Type: nt}), ErrInvalid, "n1")
	topo, err := b.Build()
	must(t, err)
	defer topo.Close()
	n0, _ := topo.Node("n0")
	p0, _ := topo.Node("p0")
	if topo.NodeModel(n0) != "H100" || topo.NodeMemoryGB(n0) != 80 || topo.NodeModel(p0) != "L4" {
		t.Fatalf("models %q %v %q", topo.NodeModel(n0), topo.NodeMemoryGB(n0), topo.NodeModel(p0))
	}
	if got := topo.NodeDevices(p0); !reflect.DeepEqual(got, []uint32{4, 5}) {
		t.Fatalf("p0's devices %v", got)
	}
	c, _ := NewCluster(topo)
	defer c.Close()
	// GPU+NIC pairs: the node type's two RDMA NICs pair two GPUs, one behind each switch.
	p, err := c.Place(Request{ID: "pairs", Count: 2, GPUNICPairs: true})
	must(t, err)
	defer p.Close()
	nics := map[uint]bool{}
	for i := range p.Devices {
		n, err := p.NIC(i)
		must(t, err)
		nics[n] = true
	}
	if !reflect.DeepEqual(nics, map[uint]bool{0: true, 1: true}) {
		t.Fatalf("paired NICs %v for devices %v", nics, p.DeviceNames())
	}
	_, err = c.Place(Request{Count: 3, GPUNICPairs: true})
	wantErr(t, err, ErrInfeasible, "gpu_nic_pairs")
	q, err := c.Place(Request{Count: 1, Select: Select{Model: "L4"}})
	must(t, err)
	defer q.Close()
	if _, err := q.NIC(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a NIC for a request without pairs: %v", err)
	}
	if topo.NodeName(topo.DeviceNode(q.Devices[0])) != "p0" {
		t.Fatalf("select.model L4 gave %v", q.DeviceNames())
	}
}

func TestFabrics(t *testing.T) {
	b, err := NewTopologyBuilder("rack", "node")
	must(t, err)
	defer b.Close()
	for i, n := range []string{"x1", "x2", "x3", "x4"} {
		must(t, b.AddNode(n, []string{[]string{"r1", "r2"}[i/2]}, 4))
	}
	must(t, b.SetFabric(0, Fabric{LinkEthernet, 25, 8}))
	must(t, b.SetFabric(LevelCluster, Fabric{LinkIB, 12.5, 20}))
	must(t, b.SetDomainFabric(0, "r2", Fabric{LinkNVLink, 900, 3.4}))
	must(t, b.AddNVSwitch(0, []string{"r2"}, "tray0"))
	wantErr(t, b.SetDomainFabric(0, "r9", Fabric{LinkNVLink, 900, 3.4}), ErrNotFound, "r9")
	wantErr(t, b.SetFabric(5, Fabric{LinkIB, 1, 1}), ErrInvalid, "5")
	wantErr(t, b.SetLimits(3, 100), ErrInvalid, "3")
	topo, err := b.Build()
	must(t, err)
	defer topo.Close()
	if f, err := topo.Fabric("rack"); err != nil || f != (Fabric{LinkEthernet, 25, 8}) {
		t.Fatalf("rack fabric %+v %v", f, err)
	}
	if f, err := topo.Fabric("cluster"); err != nil || f.Kind != LinkIB || f.GBps != 12.5 {
		t.Fatalf("cluster fabric %+v %v", f, err)
	}
	r2, err := topo.Domain("rack", "r2")
	must(t, err)
	if f, own, err := topo.DomainFabric("rack", r2); err != nil || !own || f.Kind != LinkNVLink || f.GBps != 900 {
		t.Fatalf("r2's fabric %+v own %v, %v", f, own, err)
	}
	if f, own, err := topo.DomainFabric("rack", 0); err != nil || own || f.Kind != LinkEthernet {
		t.Fatalf("r1's fabric %+v own %v, %v", f, own, err)
	}
	if LinkNVLink.String() != "nvlink" || LinkKind(9).String() != "LinkKind(9)" {
		t.Fatal("link kind names")
	}
	_, err = topo.Fabric("row")
	wantErr(t, err, ErrNotFound, `"row"`)
	_, _, err = topo.DomainFabric("rack", 9)
	wantErr(t, err, ErrInvalid, "rack 9")
	if n, _ := topo.DomainCount("rack"); n != 2 {
		t.Fatalf("racks %d", n)
	}
	if p, _ := topo.DomainPath("node", 3); p != "x4" {
		t.Fatalf("node 3's path %q", p)
	}
	if n, _ := topo.DomainNVSwitchCount("rack", r2); n != 1 {
		t.Fatalf("r2 has %d NVSwitches", n)
	}

	// GenerateWith gives every node the options; SetLimits caps the builder.
	g, _ := NewTopologyBuilder("rack", "node")
	defer g.Close()
	must(t, g.SetLimits(16, 4))
	must(t, g.GenerateWith([]uint{2, 2}, 4, &NodeOptions{Model: "B200", MemoryGB: 180, Perf: 2}))
	wantErr(t, g.AddNode("extra", []string{"rack0"}, 4), ErrLimit, "more than max_nodes 4")
	gt, err := g.Build()
	must(t, err)
	defer gt.Close()
	if gt.NodeModel(3) != "B200" || gt.NodeMemoryGB(3) != 180 || gt.DevicePerf(15) != 2 ||
		gt.NodeName(3) != "rack1-node1" {
		t.Fatalf("generated node 3: %q %v %v %q", gt.NodeModel(3), gt.NodeMemoryGB(3),
			gt.DevicePerf(15), gt.NodeName(3))
	}
	hgx, err := GenerateHGX(1, 2)
	must(t, err)
	defer hgx.Close()
	if hgx.DeviceCount() != 16 || !reflect.DeepEqual(hgx.Levels(), []string{"su", "node"}) {
		t.Fatalf("hgx %d devices, levels %v", hgx.DeviceCount(), hgx.Levels())
	}
}
