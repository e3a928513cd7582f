// SPDX-License-Identifier: MIT

package topoplace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails unless err has the code and its message holds every fragment.
func wantErr(t *testing.T, err error, code error, fragments ...string) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("got %v, want %v", err, code)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Fatalf("%q lacks %q", err.Error(), f)
		}
	}
}

// twoRacks is racks r1, r2 of two 4-GPU nodes each (x1 x2 in r1, x3 x4 in r2), the nodes of
// each rack on one PDU ("power" pdu-a, pdu-b) crosswise: x1 x3 on pdu-a, x2 x4 on pdu-b. The test closes them.
func twoRacks(t *testing.T) (*Topology, *Cluster) {
	t.Helper()
	b, err := NewTopologyBuilder("rack", "node")
	must(t, err)
	defer b.Close()
	for i, n := range []string{"x1", "x2", "x3", "x4"} {
		must(t, b.AddNode(n, []string{[]string{"r1", "r2"}[i/2]}, 4))
		must(t, b.AddFailureDomain("power", []string{"pdu-a", "pdu-b"}[i%2], n, -1))
	}
	topo, err := b.Build()
	must(t, err)
	c, err := NewCluster(topo)
	must(t, err)
	t.Cleanup(func() { c.Close(); topo.Close() })
	return topo, c
}

func nodesOf(c *Cluster, devs []uint32) []string {
	var out []string
	seen := map[string]bool{}
	for _, d := range devs {
		n := c.Topology().DeviceName(d)
		n = n[:strings.IndexByte(n, '/')]
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func TestFailureDomains(t *testing.T) {
	topo, c := twoRacks(t)
	if got := topo.FailureDomainKinds(); !reflect.DeepEqual(got, []string{"power"}) {
		t.Fatalf("kinds %v", got)
	}
	fds, err := topo.FailureDomains("power")
	must(t, err)
	if !reflect.DeepEqual(fds, []string{"pdu-a", "pdu-b"}) {
		t.Fatalf("domains %v", fds)
	}
	d, _ := topo.Device("x4/3")
	if fd, err := topo.DeviceFailureDomain("power", d); err != nil || fd != "pdu-b" {
		t.Fatalf("x4/3 in %q, %v", fd, err)
	}
	_, err = topo.FailureDomains("cooling")
	wantErr(t, err, ErrNotFound, `"cooling"`)
	_, err = topo.DeviceFailureDomain("power", 99)
	wantErr(t, err, ErrInvalid, "device 99")

	b, _ := NewTopologyBuilder("rack", "node")
	defer b.Close()
	must(t, b.AddNode("y1", []string{"r1"}, 2))
	wantErr(t, b.AddFailureDomain("power", "p", "nope", -1), ErrNotFound, "nope")
	wantErr(t, b.AddFailureDomain("rack", "p", "y1", -1), ErrInvalid, "rack")

	// Spread over the power kind: 4 GPUs (one node's worth) touching both PDUs.
	p, err := c.Place(Request{ID: "s", Count: 4, Spread: &Spread{Level: "power", MinDomains: 2}})
	must(t, err)
	defer p.Close()
	pdus := map[string]bool{}
	for _, d := range p.Devices {
		fd, _ := topo.DeviceFailureDomain("power", d)
		pdus[fd] = true
	}
	if len(pdus) != 2 {
		t.Fatalf("spread over %v", pdus)
	}
	// A cap of 2 devices per power domain leaves room for 4 GPUs only.
	_, err = c.Place(Request{Count: 6, Caps: []DomainCap{{Level: "power", Devices: 2}}})
	wantErr(t, err, ErrInfeasible, "power")
}

func TestSavepoints(t *testing.T) {
	topo, c := twoRacks(t)
	devs, _ := topo.Devices("x1/0", "x1/1")
	must(t, c.Assign("a", devs))
	sp, err := c.Savepoint()
	must(t, err)
	more, _ := topo.Devices("x2/0")
	must(t, c.Assign("b", more))
	must(t, c.Release("a"))
	inner, err := c.Savepoint()
	must(t, err)
	must(t, c.SetDown(more, true))
	must(t, c.Rollback(sp)) // closes inner too
	if got := c.Jobs(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Fatalf("after the rollback: jobs %v", got)
	}
	wantErr(t, c.Rollback(inner), ErrInvalid, "savepoint")
	wantErr(t, c.DiscardSavepoint(sp), ErrInvalid, "savepoint")

	sp, err = c.Savepoint()
	must(t, err)
	must(t, c.Assign("b", more))
	must(t, c.DiscardSavepoint(sp)) // keeps b
	if got := c.Jobs(); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("after the discard: jobs %v", got)
	}
}

func TestJobOptions(t *testing.T) {
	topo, c := twoRacks(t)
	def := DefaultJobOptions()
	if def != (JobOptions{Class: Training, Preemptible: true, CheckpointS: 60}) {
		t.Fatalf("defaults %+v", def)
	}
	devs, _ := topo.Devices("x1/0", "x1/1")
	o := DefaultJobOptions()
	o.Class, o.Priority, o.Tenant, o.Migratable, o.CheckpointS = Inference, 7, "team-a", true, 12.5
	o.Shape = &Request{Count: 2, Required: "node", Tenant: "team-a"}
	must(t, c.AssignWith("svc", devs, &o))
	got, err := c.JobOptions("svc")
	must(t, err)
	if got.Class != Inference || got.Priority != 7 || got.Tenant != "team-a" ||
		!got.Migratable || !got.Preemptible || got.CheckpointS != 12.5 || got.Shape == nil ||
		got.Shape.Count != 2 || got.Shape.Required != "node" {
		t.Fatalf("read back %+v (shape %+v)", got, got.Shape)
	}
	_, err = c.JobOptions("nope")
	wantErr(t, err, ErrNotFound, "nope")
	bad := DefaultJobOptions()
	bad.CheckpointS = -1
	more, _ := topo.Devices("x2/0")
	wantErr(t, c.AssignWith("bad", more, &bad), ErrInvalid, "checkpoint_s")
	if len(c.Jobs()) != 1 {
		t.Fatalf("a refused assign changed the jobs: %v", c.Jobs())
	}

	// CommitWith: the request is kept as the shape when opts gives none.
	p, err := c.Place(Request{ID: "train", Count: 4, Required: "node", Priority: 3})
	must(t, err)
	defer p.Close()
	o2 := DefaultJobOptions()
	o2.Preemptible, o2.Priority = false, 3
	must(t, c.CommitWith(p, &o2))
	got, err = c.JobOptions("train")
	must(t, err)
	if got.Preemptible || got.Shape == nil || got.Shape.Count != 4 || got.Shape.Priority != 3 {
		t.Fatalf("committed job %+v (shape %+v)", got, got.Shape)
	}
}

func TestRequestConstraintFields(t *testing.T) {
	_, c := twoRacks(t)
	// select.nodes: only x3 and x4.
	p, err := c.Place(Request{Count: 8, Select: Select{Nodes: []string{"x4", "x3"}}})
	must(t, err)
	if got := nodesOf(c, p.Devices); len(got) != 2 || got[0] == "x1" || got[1] == "x1" ||
		got[0] == "x2" || got[1] == "x2" {
		t.Fatalf("select.nodes gave %v", got)
	}
	p.Close()
	_, err = c.Place(Request{Count: 1, Select: Select{Nodes: []string{}}})
	wantErr(t, err, ErrInfeasible)
	_, err = c.Place(Request{Count: 1, Select: Select{Model: "B200"}})
	wantErr(t, err, ErrInfeasible, "B200")
	_, err = c.Place(Request{Count: 1, Select: Select{Nodes: []string{"zz"}}})
	wantErr(t, err, ErrNotFound, "zz")

	// exclusive: a job of tenant b keeps tenant a out of its rack.
	p, err = c.Place(Request{ID: "b1", Count: 2, Tenant: "b", Exclusive: "rack"})
	must(t, err)
	must(t, c.Commit(p))
	p.Close()
	rackOfB := nodesOf(c, mustDevs(t, c, "b1"))[0]
	p, err = c.Place(Request{ID: "a1", Count: 8, Tenant: "a"})
	must(t, err)
	for _, n := range nodesOf(c, p.Devices) {
		if (n <= "x2") == (rackOfB <= "x2") {
			t.Fatalf("tenant a got %s in tenant b's exclusive rack (b on %s)", n, rackOfB)
		}
	}
	p.Close()
	// 14 devices are free, but only the 8 outside b1's rack are open to tenant a.
	_, err = c.Place(Request{ID: "a2", Count: 10, Tenant: "a"})
	wantErr(t, err, ErrFragmented, "exclusive job", "b1")

	// colocate: next to b1, inside its rack.
	p, err = c.Place(Request{Count: 2, Tenant: "b", Colocate: &Colocate{Job: "b1", Level: "rack"}})
	must(t, err)
	for _, n := range nodesOf(c, p.Devices) {
		if (n <= "x2") != (rackOfB <= "x2") {
			t.Fatalf("colocated on %s, b1 on %s", n, rackOfB)
		}
	}
	p.Close()
	_, err = c.Place(Request{Count: 2, Colocate: &Colocate{Job: "ghost", Level: "rack"}})
	wantErr(t, err, ErrNotFound, "ghost")

	// caps by groups, balanced, slices, class and priority reach the library.
	_, err = c.Place(Request{Count: 4, GroupSize: 2, Caps: []DomainCap{{Level: "rack", Groups: 1}}})
	wantErr(t, err, ErrFragmented)
	_, err = c.Place(Request{Count: 4, Caps: []DomainCap{{Level: "rack", Devices: 1, Groups: 1}}})
	wantErr(t, err, ErrInvalid, "max_per_domain[0]")
	_, err = c.Place(Request{Count: 3, Balanced: true, Required: "rack", Slices: []Slice{{"node", 2}}})
	wantErr(t, err, ErrInvalid, "slices")
	_, err = c.Place(Request{Count: 2, Class: JobClass(9)})
	wantErr(t, err, ErrInvalid, "request.class 9")

	// comm: a step model whose degrees do not multiply to the count.
	_, err = c.Place(Request{Count: 4, Comm: &StepModel{TP: 2, DP: 3}})
	wantErr(t, err, ErrInvalid, "comm")
	p, err = c.Place(Request{Count: 4, Comm: &StepModel{TP: 4, TPBytes: 1 << 20, TPMsgs: 2}})
	must(t, err)
	p.Close()
}

func mustDevs(t *testing.T, c *Cluster, job string) []uint32 {
	t.Helper()
	d, err := c.JobDevices(job)
	must(t, err)
	return d
}

func TestGPUNICPairs(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "tests", "data", "nvsmi", "8x4090-2nic.txt"))
	must(t, err)
	nt, err := NodeTypeFromNvidiaSmi(string(text))
	must(t, err)
	defer nt.Close()
	b, _ := NewTopologyBuilder("rack", "node")
	defer b.Close()
	must(t, b.AddNodeOfType("w1", []string{"r1"}, nt))
	topo, err := b.Build()
	must(t, err)
	defer topo.Close()
	c, _ := NewCluster(topo)
	defer c.Close()
	p, err := c.Place(Request{Count: 2, GPUNICPairs: true})
	must(t, err)
	p.Close()
	_, err = c.Place(Request{Count: 4, GPUNICPairs: true})
	wantErr(t, err, ErrInfeasible, "gpu_nic_pairs")
}

func TestFragReport(t *testing.T) {
	topo, c := twoRacks(t)
	devs, _ := topo.Devices("x1/0", "x3/0")
	must(t, c.Assign("a", devs))
	down, _ := topo.Devices("x2/0")
	must(t, c.SetDown(down, true))
	cord, _ := topo.Devices("x4/0", "x4/1")
	must(t, c.SetCordoned(cord, true))
	r, err := c.FragReport([]JobShape{{Devices: 4, Level: "node", Weight: 1}})
	must(t, err)
	if r.DownCount != 1 || r.CordonedCount != 2 || len(r.Levels) != 2 {
		t.Fatalf("report %+v", r)
	}
	// Every node has a used, down or cordoned device: no 4-GPU job fits; all free devices
	// are lost to the mix.
	if r.Workload != 1 || r.Levels[1].FullyFreeCount != 0 || r.Levels[1].FreeCount != 11 {
		t.Fatalf("workload %v, node level %+v", r.Workload, r.Levels[1])
	}
	lv, err := c.Frag()
	must(t, err)
	if lv[0].Level != "rack" || lv[0].DomainCount != 2 {
		t.Fatalf("default report %+v", lv)
	}
	_, err = c.FragReport([]JobShape{{Devices: 4, Level: "node", Weight: -1}})
	wantErr(t, err, ErrInvalid, "mix[0].weight")
}

const scenarioDoc = `{
  "version": 1,
  "topology": {
    "levels": ["block", "rack", "node"],
    "nodes": [
      {"name": "x3", "path": ["b1", "r1"], "gpus": 1},
      {"name": "x5", "path": ["b1", "r2"], "gpus": 1},
      {"name": "x1", "path": ["b1", "r2"], "gpus": 1},
      {"name": "x6", "path": ["b1", "r2"], "gpus": 1},
      {"name": "x2", "path": ["b2", "r1"], "gpus": 1},
      {"name": "x4", "path": ["b2", "r2"], "gpus": 2}
    ]
  },
  "state": {"jobs": [{"id": "old", "devices": {"x4": [0]}, "migratable": true}]},
  "request": {"id": "new", "count": 2, "required": "rack", "tenant": "t",
              "select": {"nodes": ["x5", "x1", "x6", "x4"]}},
  "replace": {"job": "old", "failed": ["x4/0"]}
}`

func TestScenario(t *testing.T) {
	s, err := ReadScenario(scenarioDoc, ScenarioPlace, nil)
	must(t, err)
	defer s.Close()
	if s.Request == nil || s.Request.Count != 2 || s.Request.Required != "rack" ||
		s.Request.Tenant != "t" || len(s.Request.Select.Nodes) != 4 || s.Policy != nil {
		t.Fatalf("request %+v, policy %+v", s.Request, s.Policy)
	}
	c := s.Cluster()
	if got := c.Jobs(); !reflect.DeepEqual(got, []string{"old"}) {
		t.Fatalf("jobs %v", got)
	}
	p, err := c.Place(*s.Request)
	must(t, err)
	if got := p.DeviceNames(); len(got) != 2 || !strings.HasPrefix(got[0], "x") {
		t.Fatalf("placed %v", got)
	}
	must(t, c.Commit(p))
	p.Close()
	if s.Topology().NodeCount() != 6 {
		t.Fatalf("%d nodes", s.Topology().NodeCount())
	}
	if _, err := s.DefragPlan(); !errors.Is(err, ErrInvalid) {
		t.Fatalf("DefragPlan on a place scenario: %v", err)
	}
	s.Close()
	if c.p != nil || s.Topology().p != nil {
		t.Fatal("the scenario's cluster and topology stay open after Close")
	}

	// The topology command gives the caller the topology, usable after Close.
	s2, err := ReadScenario(scenarioDoc, ScenarioTopology, nil)
	must(t, err)
	topo := s2.Topology()
	s2.Close()
	if s2.Cluster() != nil || topo.DeviceCount() != 7 {
		t.Fatalf("taken topology: %d devices", topo.DeviceCount())
	}
	topo.Close()

	s3, err := ReadScenario(scenarioDoc, ScenarioReplace, nil)
	must(t, err)
	if s3.ReplaceJob != "old" || len(s3.ReplaceFailed) != 1 {
		t.Fatalf("replace %q %v", s3.ReplaceJob, s3.ReplaceFailed)
	}
	s3.Close()

	s4, err := ReadScenario(scenarioDoc, ScenarioDefrag, nil)
	must(t, err)
	defer s4.Close()
	if s4.Policy == nil || s4.Policy.NoMigrate || !s4.Policy.AllowLessLocal {
		t.Fatalf("policy %+v", s4.Policy)
	}
	// The request fits already: the plan is the place step alone.
	pl, err := s4.DefragPlan()
	must(t, err)
	defer pl.Close()
	if len(pl.Steps) != 1 || pl.Steps[0].Action != "place" {
		t.Fatalf("plan %+v", pl.Steps)
	}

	bad := strings.Replace(scenarioDoc, `"name": "x5"`, `"name": "x3"`, 1)
	_, err = ReadScenario(bad, ScenarioTopology, nil)
	wantErr(t, err, ErrParse, "topology.nodes[1].name", "duplicate")
	_, err = ReadScenario("{", ScenarioTopology, nil)
	wantErr(t, err, ErrParse, "not a valid JSON document")
	_, err = ReadScenario(scenarioDoc, ScenarioCommand(42), nil)
	wantErr(t, err, ErrInvalid, "command")
	_, err = ReadScenario(scenarioDoc, ScenarioTopology, &ScenarioOptions{MaxDevices: 3})
	wantErr(t, err, ErrLimit)
}

func TestScenarioHwlocNodeIsRefusedWithTheReason(t *testing.T) {
	doc := strings.Replace(scenarioDoc, `{"name": "x3", "path": ["b1", "r1"], "gpus": 1}`,
		`{"name": "x3", "path": ["b1", "r1"], "hwloc": "x3.xml"}`, 1)
	_, err := ReadScenario(doc, ScenarioTopology, nil)
	wantErr(t, err, ErrParse, "topology.nodes[0]", "not supported")
}

// A scenario's cluster keeps the scenario's C objects alive when the Scenario itself is no
// longer reachable (the finalizer must not free what the cluster borrows).
func TestScenarioClusterOutlivesTheDroppedScenario(t *testing.T) {
	c := func() *Cluster {
		s, err := ReadScenario(scenarioDoc, ScenarioPlace, nil)
		must(t, err)
		return s.Cluster()
	}()
	for i := 0; i < 3; i++ {
		runtime.GC()
	}
	if got := c.Jobs(); !reflect.DeepEqual(got, []string{"old"}) {
		t.Fatalf("jobs %v", got)
	}
	p, err := c.Place(Request{Count: 2, Required: "rack"})
	must(t, err)
	p.Close()
}

// ExpectedEndS: of the tightest nodes that hold the job (here as tight as each other), the one
// whose jobs end last at or after the job's own end, nearest first, wins; a job's end is its
// shape's.
func TestExpectedEnd(t *testing.T) {
	b, err := NewTopologyBuilder("su", "node")
	must(t, err)
	defer b.Close()
	must(t, b.Generate([]uint{1, 3}, 8))
	topo, err := b.Build()
	must(t, err)
	defer topo.Close()
	c, err := NewCluster(topo)
	must(t, err)
	defer c.Close()
	for n, end := range []float64{100, 300, 200} {
		var names []string
		for g := 0; g < 4; g++ {
			names = append(names, topo.DeviceName(uint32(8*n+g)))
		}
		devs, err := topo.Devices(names...)
		must(t, err)
		o := DefaultJobOptions()
		o.Shape = &Request{Count: 4, ExpectedEndS: end}
		must(t, c.AssignWith("j"+string(rune('0'+n)), devs, &o))
	}
	p, err := c.Place(Request{Count: 2, Required: "node", ExpectedEndS: 150})
	must(t, err)
	defer p.Close()
	if p.Devices[0]/8 != 2 || p.DecidedBy != RuleEnd || p.DecidedBy.String() != "end" {
		t.Fatalf("devices %v decided by %v, want node 2 by end", p.Devices, p.DecidedBy)
	}
	got, err := c.JobOptions("j1")
	must(t, err)
	if got.Shape == nil || got.Shape.ExpectedEndS != 300 {
		t.Fatalf("shape %+v", got.Shape)
	}
	_, err = c.Place(Request{Count: 1, ExpectedEndS: -1})
	wantErr(t, err, ErrInvalid, "request.expected_end_s -1 is not a finite time >= 0")
}
