// SPDX-License-Identifier: MIT

package topoplace

import (
	"fmt"
	"testing"
)

// straddled is two 4-GPU nodes a and b of rack r0 (NVLink inside a node, InfiniBand between
// them) with job x on two GPUs of each, so that any 4 free GPUs straddle the nodes. The test
// closes them.
func straddled(t *testing.T) (*Topology, *Cluster) {
	t.Helper()
	b, err := NewTopologyBuilder("rack", "node")
	must(t, err)
	defer b.Close()
	must(t, b.SetFabric(1, Fabric{LinkNVLink, 900, 3.4}))
	must(t, b.SetFabric(0, Fabric{LinkIB, 50, 10}))
	must(t, b.AddNode("a", []string{"r0"}, 4))
	must(t, b.AddNode("b", []string{"r0"}, 4))
	topo, err := b.Build()
	must(t, err)
	t.Cleanup(func() { topo.Close() })
	c, err := NewCluster(topo)
	must(t, err)
	t.Cleanup(func() { c.Close() })
	held, err := topo.Devices("a/0", "a/1", "b/0", "b/1")
	must(t, err)
	must(t, c.Assign("x", held))
	return topo, c
}

// StepModel.MinEfficiency (tp_step_model.min_efficiency): a floor above what the placement
// reaches is ErrBusy with the library's message, one below it places, the job keeps it, and a
// value outside [0, 1] is ErrInvalid.
func TestStepModelMinEfficiency(t *testing.T) {
	topo, c := straddled(t)
	m := StepModel{TP: 4, PP: 1, DP: 1, ComputeUs: 1e5, TPBytes: 64 << 20, TPMsgs: 128}
	p, err := c.Place(Request{Count: 4, Comm: &m})
	must(t, err)
	eff, err := topo.CostEfficiency(p.Devices, m)
	must(t, err)
	p.Close()
	if !(eff > 0 && eff < 0.5) {
		t.Fatalf("efficiency of 4 GPUs over two nodes %v", eff)
	}

	floor := m
	floor.MinEfficiency = 0.5
	p, err = c.Place(Request{Count: 4, Comm: &floor})
	if p != nil {
		t.Fatalf("placed below the floor: %v", p.DeviceNames())
	}
	wantErr(t, err, ErrBusy, "busy: request.comm.min_efficiency 0.5: the best placement now "+
		fmt.Sprintf("reaches %.3f (step ", eff), "us on the ideal layout)")

	floor.MinEfficiency = eff * 0.99
	p, err = c.Place(Request{ID: "y", Count: 4, Comm: &floor})
	must(t, err)
	if len(p.Devices) != 4 {
		t.Fatalf("placed %v", p.DeviceNames())
	}
	must(t, c.Commit(p))
	p.Close()
	o, err := c.JobOptions("y")
	must(t, err)
	if o.Shape == nil || o.Shape.Comm == nil || *o.Shape.Comm != floor {
		t.Fatalf("the job's step model %+v, want %+v", o.Shape, floor)
	}

	for _, bad := range []float64{1.5, -0.1} {
		floor.MinEfficiency = bad
		_, err = c.Place(Request{Count: 4, Comm: &floor})
		wantErr(t, err, ErrInvalid,
			fmt.Sprintf("request.comm: model.min_efficiency %g is outside [0, 1]", bad))
	}
}

// The scenario key request.x_comm.min_efficiency reaches StepModel.MinEfficiency.
func TestScenarioMinEfficiency(t *testing.T) {
	doc := `{"version": 1, "topology": {"levels": ["rack", "node"], "fabric": {
	  "node": {"kind": "nvlink", "gbps": 900, "latency_us": 3.4},
	  "rack": {"kind": "ib", "gbps": 50, "latency_us": 10}},
	  "nodes": [{"name": "a", "path": ["r0"], "gpus": 4},
	    {"name": "b", "path": ["r0"], "gpus": 4}]},
	  "state": {"jobs": [{"id": "x", "devices": {"a": 2, "b": 2}}]},
	  "request": {"count": 4, "x_comm": {"tp": 4, "compute_us": 1e5, "tp_bytes": 67108864,
	    "tp_msgs": 128, "min_efficiency": 0.5}}}`
	s, err := ReadScenario(doc, ScenarioPlace, nil)
	must(t, err)
	defer s.Close()
	if s.Request == nil || s.Request.Comm == nil || s.Request.Comm.MinEfficiency != 0.5 {
		t.Fatalf("request %+v", s.Request)
	}
	_, err = s.Cluster().Place(*s.Request)
	wantErr(t, err, ErrBusy,
		"busy: request.comm.min_efficiency 0.5: the best placement now reaches ")
}
