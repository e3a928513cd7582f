// SPDX-License-Identifier: MIT

package topoplace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func nvl72(t *testing.T) (*Topology, *Cluster) {
	t.Helper()
	topo, err := GenerateNVL72(1, 2)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewCluster(topo)
	if err != nil {
		t.Fatal(err)
	}
	return topo, c
}

func TestGenerateAndBuild(t *testing.T) {
	topo, c := nvl72(t)
	defer topo.Close()
	defer c.Close()
	if got := topo.Levels(); !reflect.DeepEqual(got, []string{"block", "rack", "node"}) {
		t.Fatalf("levels %v", got)
	}
	if topo.NodeCount() != 36 || topo.DeviceCount() != 144 {
		t.Fatalf("%d nodes, %d devices", topo.NodeCount(), topo.DeviceCount())
	}
	b, err := NewTopologyBuilder("rack", "node")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.AddNode("x1", []string{"r1"}, 4); err != nil {
		t.Fatal(err)
	}
	err = b.AddNode("x1", []string{"r2"}, 4)
	if !errors.Is(err, ErrExists) || !strings.Contains(err.Error(), "x1") {
		t.Fatalf("a node added twice: %v", err)
	}
	if err := b.Generate([]uint{2, 3}, 8); err != nil {
		t.Fatal(err)
	}
	t2, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	if t2.DeviceCount() != 4+6*8 {
		t.Fatalf("%d devices", t2.DeviceCount())
	}
	if _, err := NewTopologyBuilder(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("no level: %v", err)
	}
}

func TestPlaceCommitReleaseAndFrag(t *testing.T) {
	topo, c := nvl72(t)
	defer topo.Close()
	defer c.Close()
	p, err := c.Place(Request{ID: "train", Count: 64, GroupSize: 4, Required: "rack"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Job != "train" || len(p.Devices) != 64 {
		t.Fatalf("placement %s %d", p.Job, len(p.Devices))
	}
	rack := map[string]bool{}
	for _, n := range p.DeviceNames() {
		rack[n[:strings.Index(n, "-node")]] = true // node names are block<b>-rack<r>-node<n>
	}
	if len(rack) != 1 {
		t.Fatalf("required rack, got %v", rack)
	}
	if err := c.Commit(p); err != nil {
		t.Fatal(err)
	}
	frag, err := c.Frag()
	if err != nil {
		t.Fatal(err)
	}
	if frag[2].Level != "node" || frag[2].FreeCount != 144-64 {
		t.Fatalf("frag %+v", frag)
	}
	// a second 64 in one rack fits in the other rack; a third does not fit anywhere
	p2, err := c.Place(Request{ID: "b", Count: 64, Required: "rack"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Commit(p2); err != nil {
		t.Fatal(err)
	}
	p2.Close()
	_, err = c.Place(Request{ID: "c", Count: 64, Required: "rack"})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrBusy) || e.Message == "" {
		t.Fatalf("a third rack-sized job: %v", err)
	}
	if err := c.Release("b"); err != nil {
		t.Fatal(err)
	}
	if err := c.Release("b"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "b") {
		t.Fatalf("released twice: %v", err)
	}
}

func TestRequestErrorsCarryTheFieldAndHealth(t *testing.T) {
	topo, c := nvl72(t)
	defer topo.Close()
	defer c.Close()
	_, err := c.Place(Request{Count: 8, Slices: []Slice{{"rack", 3}}})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "request.slices[0].size") {
		t.Fatalf("bad slice: %v", err)
	}
	devs, err := topo.Devices("block0-rack0-node0/0", "block0-rack0-node0/1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign("j", devs); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign("k", devs[:1]); !errors.Is(err, ErrExists) {
		t.Fatalf("a held device: %v", err)
	}
	if err := c.SetDown([]uint32{1 << 30}, true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("unknown device: %v", err)
	}
	if _, err := topo.Device("nope/0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown name: %v", err)
	}
	// a failed device of job j is replaced on healthy hardware, and Commit applies it
	if err := c.SetDown(devs[1:], true); err != nil {
		t.Fatal(err)
	}
	// one sub-request reads the job's 2 ranks: a budget of 1 stops it, ErrLimit
	if _, err := c.ReplaceWithBudget("j", devs[1:], 1, 0); !errors.Is(err, ErrLimit) ||
		!strings.Contains(err.Error(), "opts.max_work 1 ") {
		t.Fatalf("a budget of 1: %v", err)
	}
	r, err := c.Replace("j", devs[1:])
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if len(r.Devices) != 2 || r.Devices[0] != devs[0] || r.Devices[1] == devs[1] {
		t.Fatalf("replacement %v", r.DeviceNames())
	}
	if err := c.Commit(r); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCordoned(devs[:1], true); err != nil {
		t.Fatal(err)
	}
}

func TestDefragPlan(t *testing.T) {
	b, _ := NewTopologyBuilder("rack", "node")
	defer b.Close()
	for _, n := range []struct{ name, rack string }{{"a", "r1"}, {"b", "r1"}, {"c", "r2"}, {"d", "r2"}} {
		if err := b.AddNode(n.name, []string{n.rack}, 2); err != nil {
			t.Fatal(err)
		}
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	c, _ := NewCluster(topo)
	defer c.Close()
	// one device held in each rack: a 4-device rack job is fragmented
	for _, j := range []struct{ id, dev string }{{"x", "a/0"}, {"y", "c/0"}} {
		d, _ := topo.Device(j.dev)
		if err := c.Assign(j.id, []uint32{d}); err != nil {
			t.Fatal(err)
		}
	}
	req := Request{ID: "new", Count: 4, Required: "rack", Priority: 5}
	if _, err := c.Place(req); !errors.Is(err, ErrFragmented) {
		t.Fatalf("expected fragmented: %v", err)
	}
	plan, err := c.DefragPlan(req, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	last := plan.Steps[len(plan.Steps)-1]
	if last.Action != "place" || last.Job != "new" || len(last.To) != 4 || plan.MovedJobCount != 1 {
		t.Fatalf("plan %+v", plan)
	}
	if _, err := c.DefragPlan(req, Policy{NoMigrate: true, NoPreempt: true}); !errors.Is(err, ErrNoPlan) {
		t.Fatalf("no moves allowed: %v", err)
	}
	// carry the plan out: out of order is refused, in order every step applies
	if err := c.ApplyStep(plan, len(plan.Steps)-1); !errors.Is(err, ErrInvalid) {
		t.Fatalf("last step first: %v", err)
	}
	for i := range plan.Steps {
		if err := c.ApplyStep(plan, i); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if devs, err := c.JobDevices("new"); err != nil || len(devs) != 4 {
		t.Fatalf("the new job after the plan: %v %v", devs, err)
	}
	if err := c.ApplyStep(plan, 99); !errors.Is(err, ErrInvalid) {
		t.Fatalf("step out of range: %v", err)
	}
	plan.Close()
	if err := c.ApplyStep(plan, 0); !errors.Is(err, ErrInvalid) {
		t.Fatalf("closed plan: %v", err)
	}
}

func TestSlurmImporters(t *testing.T) {
	conf := "SwitchName=l0 Nodes=n[1-2]\nSwitchName=l1 Nodes=n[3-4]\n" +
		"SwitchName=sp0 Switches=l[0-1]\nSwitchName=sp1 Switches=l[0-1]\n"
	b, warnings, err := FromSlurm(conf, 8, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(warnings) != 2 || !strings.HasPrefix(warnings[0], "line 4: switch 'l0' has several parents") {
		t.Fatalf("warnings %q", warnings)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	if topo.DeviceCount() != 32 || !reflect.DeepEqual(topo.Levels(), []string{"switch1", "switch0", "node"}) {
		t.Fatalf("%v %d", topo.Levels(), topo.DeviceCount())
	}
	_, _, err = FromSlurm("SwitchName=a Nodes=n1\nSwitchName=b Switches=z\n", 4, false, nil)
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "line 2: switch 'b' lists unknown switch 'z'") {
		t.Fatalf("unknown switch: %v", err)
	}
	yaml, err := os.ReadFile(filepath.Join("..", "..", "tests", "data", "slurm", "topology-three.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b2, _, err := FromSlurm(string(yaml), 4, true, &SlurmOptions{Topology: "racks"})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	t2, err := b2.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer t2.Close()
	if !reflect.DeepEqual(t2.Levels(), []string{"agg16", "block", "node"}) {
		t.Fatalf("%v", t2.Levels())
	}
	_, _, err = FromSlurm(string(yaml), 4, true, &SlurmOptions{Topology: "plain"})
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "topology 'plain' is flat") {
		t.Fatalf("flat: %v", err)
	}
}

func TestNodeTypeImporters(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "tests", "data", "nvsmi", "8x4090-2nic.txt"))
	if err != nil {
		t.Fatal(err)
	}
	nt, err := NodeTypeFromNvidiaSmi(string(text))
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	if nt.GPUCount() != 8 {
		t.Fatalf("%d GPUs", nt.GPUCount())
	}
	b, _ := NewTopologyBuilder("rack", "node")
	defer b.Close()
	if err := b.AddNodeOfType("w1", []string{"r1"}, nt); err != nil {
		t.Fatal(err)
	}
	topo, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	if topo.DeviceCount() != 8 {
		t.Fatalf("%d devices", topo.DeviceCount())
	}
	_, err = NodeTypeFromNvidiaSmi("\tGPU0\tGPU1\nGPU0\t X \tNVX\n")
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad matrix: %v", err)
	}
	_, err = NodeTypeFromHwlocXML("SwitchName=s Nodes=n1\n")
	if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "Slurm topology.conf") {
		t.Fatalf("not hwloc XML: %v", err)
	}
}
