// SPDX-License-Identifier: MIT

package topoplace

import (
	"reflect"
	"testing"
)

// fragmentedRacks is two racks of two 2-GPU nodes (a b in r1, c d in r2), one migratable
// device held in each rack: a 4-device rack job is fragmented.
func fragmentedRacks(t *testing.T) (*Topology, *Cluster) {
	t.Helper()
	b, _ := NewTopologyBuilder("rack", "node")
	defer b.Close()
	for i, n := range []string{"a", "b", "c", "d"} {
		must(t, b.AddNode(n, []string{[]string{"r1", "r2"}[i/2]}, 2))
	}
	topo, err := b.Build()
	must(t, err)
	c, _ := NewCluster(topo)
	t.Cleanup(func() { c.Close(); topo.Close() })
	o := DefaultJobOptions()
	o.Migratable, o.CheckpointS = true, 30
	for _, j := range []struct{ id, dev string }{{"x", "a/0"}, {"y", "c/0"}} {
		d, _ := topo.Device(j.dev)
		must(t, c.AssignWith(j.id, []uint32{d}, &o))
	}
	return topo, c
}

func TestPlanBoundsTargetsAndStats(t *testing.T) {
	_, c := fragmentedRacks(t)
	req := Request{ID: "new", Count: 4, Required: "rack", Priority: 5}
	plan, err := c.DefragPlan(req, Policy{NoPreempt: true})
	must(t, err)
	defer plan.Close()
	// One migration of one device at 30 s; a search this small is exact.
	if plan.CostS != 30 || plan.LowerBoundS != plan.CostS || plan.MovedJobCount != 1 {
		t.Fatalf("cost %v, bound %v, moved %d", plan.CostS, plan.LowerBoundS, plan.MovedJobCount)
	}
	if plan.TargetLevel != "rack" || len(plan.Targets) != 1 {
		t.Fatalf("targets %q %v", plan.TargetLevel, plan.Targets)
	}
	if plan.Stats.Evaluated == 0 || plan.Stats.Simulated == 0 || plan.Stats.Budget != BudgetNone {
		t.Fatalf("stats %+v", plan.Stats)
	}
	// Stable targets: asked to keep the other rack, the planner drains that one.
	other := 1 - plan.Targets[0]
	kept, err := c.DefragPlan(req, Policy{NoPreempt: true, PreferLevel: "rack", PreferTargets: []uint32{other}})
	must(t, err)
	defer kept.Close()
	if !reflect.DeepEqual(kept.Targets, []uint32{other}) || kept.CostS != 30 {
		t.Fatalf("kept targets %v at %v s", kept.Targets, kept.CostS)
	}
	_, err = c.DefragPlan(req, Policy{PreferLevel: "row", PreferTargets: []uint32{0}})
	wantErr(t, err, ErrNotFound, "policy.prefer_level", `"row"`)
	// A budget of one candidate stops the search after the first rack: its plan is returned,
	// flagged.
	p1, err := c.DefragPlan(req, Policy{NoPreempt: true, MaxSimulations: 1, MaxCandidates: 1})
	must(t, err)
	defer p1.Close()
	if p1.Stats.Budget != BudgetCandidates || p1.Stats.Evaluated != 1 || p1.CostS != 30 {
		t.Fatalf("budgeted plan at %v s, stats %+v", p1.CostS, p1.Stats)
	}
	if BudgetSimulations.String() != "simulations" {
		t.Fatal("budget names")
	}
}

func TestDefragCompact(t *testing.T) {
	_, c := fragmentedRacks(t)
	if r, _ := c.FragReport(nil); r.Levels[0].FullyFreeCount != 0 {
		t.Fatalf("%d racks free before", r.Levels[0].FullyFreeCount)
	}
	before := c.Fingerprint()
	plan, err := c.DefragCompact("rack", 1, Policy{})
	must(t, err)
	defer plan.Close()
	if c.Fingerprint() != before {
		t.Fatal("planning changed the cluster")
	}
	if len(plan.Steps) != 1 || plan.Steps[0].Action != "migrate" || plan.MovedJobCount != 1 ||
		plan.Targets != nil {
		t.Fatalf("compaction plan %+v", plan)
	}
	for i := range plan.Steps {
		must(t, c.ApplyStep(plan, i))
	}
	if r, _ := c.FragReport(nil); r.Levels[0].FullyFreeCount != 1 {
		t.Fatalf("%d racks free after", r.Levels[0].FullyFreeCount)
	}
	_, err = c.DefragCompact("row", 1, Policy{})
	wantErr(t, err, ErrNotFound, "row")
	_, err = c.DefragCompact("rack", 3, Policy{})
	wantErr(t, err, ErrInvalid, "ndomains 3 is not between 1 and the 2 domains of level rack")
	_, err = c.DefragCompact("rack", 2, Policy{NoMigrate: true, NoPreempt: true})
	wantErr(t, err, ErrNoPlan)
}

func TestPlanAppliesToACopy(t *testing.T) {
	_, c := fragmentedRacks(t)
	req := Request{ID: "new", Count: 4, Required: "rack", Priority: 5}
	plan, err := c.DefragPlan(req, Policy{})
	must(t, err)
	defer plan.Close()
	cp, err := c.Copy()
	must(t, err)
	defer cp.Close()
	for i := range plan.Steps {
		must(t, cp.ApplyStep(plan, i))
	}
	if devs, err := cp.JobDevices("new"); err != nil || len(devs) != 4 {
		t.Fatalf("the copy after the plan: %v %v", devs, err)
	}
	if _, err := c.JobDevices("new"); err == nil {
		t.Fatal("the plan applied to the copy reached the original")
	}
}
