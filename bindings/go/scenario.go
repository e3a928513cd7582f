// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace-scenario.h>
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// ScenarioCommand says what a scenario-v1 document is read for: which sections are
// validated and built.
type ScenarioCommand int

// The scenario commands (tp_scenario_command).
const (
	ScenarioTopology ScenarioCommand = C.TP_SCENARIO_TOPOLOGY // the topology only
	ScenarioPlace    ScenarioCommand = C.TP_SCENARIO_PLACE    // the state and the request
	ScenarioDefrag   ScenarioCommand = C.TP_SCENARIO_DEFRAG   // state, request and policy
	ScenarioFrag     ScenarioCommand = C.TP_SCENARIO_FRAG     // the state
	ScenarioReplace  ScenarioCommand = C.TP_SCENARIO_REPLACE  // the state and the replace section
)

// ScenarioOptions of ReadScenario (zero values: the defaults).
type ScenarioOptions struct {
	// Strict also validates the sections the command does not use (never built).
	Strict bool
	// MaxDevices is the most devices the topology may have (0: 2^24).
	MaxDevices uint32
}

// Scenario is an imported scenario-v1 document (tp_scenario_from_json()): its topology,
// cluster state and question. The document's nodes may not name hwloc files (this binding
// gives the importer no file reader; such a node is refused with the reason).
type Scenario struct {
	h       *scenarioHandle
	p       *C.tp_scenario
	topo    *Topology
	cluster *Cluster
	// Request is the document's request (place, defrag), copied; nil when the command has
	// none.
	Request *Request
	// Policy is the document's defrag policy (defrag), copied; nil otherwise. DefragPlan
	// uses the document's own, every field of it.
	Policy *Policy
	// ReplaceJob and ReplaceFailed are the replace section's job and failed devices.
	ReplaceJob    string
	ReplaceFailed []uint32
}

// ReadScenario reads a scenario-v1 document for a command. A document that is not a valid
// scenario is an ErrParse whose message is the command-line tool's: the field's dotted path,
// then why ("topology.nodes[2].name: duplicate node name \"x1\" (also topology.nodes[0])").
// For ScenarioTopology the topology is the caller's (it stays usable after Close); for the
// other commands the Scenario owns its Topology and Cluster, and Close frees them.
func ReadScenario(json string, cmd ScenarioCommand, opts *ScenarioOptions) (*Scenario, error) {
	var o C.tp_scenario_options
	C.tp_scenario_options_init(&o, C.TP_SCENARIO_OPTIONS_VERSION)
	o.command = C.tp_scenario_command(cmd)
	if opts != nil {
		o.strict = cbool(opts.Strict)
		o.max_devices = C.uint32_t(opts.MaxDevices)
	}
	cj := C.CString(json)
	defer C.free(unsafe.Pointer(cj))
	var errbuf [1024]C.char
	var p *C.tp_scenario
	rc := C.tp_scenario_from_json(&p, cj, C.size_t(len(json)), &o, &errbuf[0],
		C.size_t(len(errbuf)))
	if rc != 0 {
		return nil, fail(rc, C.GoString(&errbuf[0]))
	}
	h := &scenarioHandle{p: p}
	runtime.SetFinalizer(h, (*scenarioHandle).close)
	s := &Scenario{h: h, p: p}
	if cmd == ScenarioTopology {
		var t *C.tp_topology
		if rc := C.tp_scenario_topology_take(p, &t); rc != 0 {
			s.Close()
			return nil, fail(rc, "the scenario's topology cannot be taken")
		}
		s.topo = wrapTopology(t)
	} else {
		s.topo = &Topology{p: C.tp_scenario_topology(p), borrowed: true, owner: h}
		s.cluster = &Cluster{p: C.tp_scenario_cluster(p), topo: s.topo, borrowed: true,
			owner: h}
	}
	s.copyQuestion()
	return s, nil
}

func (s *Scenario) copyQuestion() {
	if r := C.tp_scenario_request(s.p); r != nil {
		req := requestFromC(r)
		s.Request = &req
	}
	if pol := C.tp_scenario_policy(s.p); pol != nil {
		s.Policy = &Policy{NoMigrate: pol.migrate == 0, NoPreempt: pol.preempt == 0,
			AllowInteractive: pol.allow_interactive != 0, AllowLessLocal: pol.allow_less_local != 0}
		if pol.max_moves != C.UINT32_MAX {
			s.Policy.MaxMoves = uint32(pol.max_moves)
		}
		if pol.max_cost_s >= 0 {
			s.Policy.MaxCostS = float64(pol.max_cost_s)
		}
		s.Policy.MaxCandidates = uint32(pol.max_candidates)
		s.Policy.MaxSimulations = uint32(pol.max_simulations)
		s.Policy.MaxTimeUs = uint64(pol.max_time_us)
		if pol.nprefer_targets > 0 {
			s.Policy.PreferLevel = C.GoString(C.tp_topology_level_name(s.topo.p, pol.prefer_level))
			s.Policy.PreferTargets = append([]uint32(nil), unsafe.Slice(
				(*uint32)(unsafe.Pointer(pol.prefer_targets)), int(pol.nprefer_targets))...)
		}
	}
	if j := C.tp_scenario_replace_job(s.p); j != nil {
		s.ReplaceJob = C.GoString(j)
		var devs *C.uint32_t
		var n C.size_t
		if C.tp_scenario_replace_failed(s.p, &devs, &n) == 0 && n > 0 {
			s.ReplaceFailed = append([]uint32(nil),
				unsafe.Slice((*uint32)(unsafe.Pointer(devs)), int(n))...)
		}
	}
}

// Close frees the scenario and what it owns; its Topology and Cluster (not a taken topology)
// become closed. Safe to call twice.
func (s *Scenario) Close() error {
	if s != nil && s.p != nil {
		if s.cluster != nil {
			s.cluster.Close()
		}
		if s.topo != nil && s.topo.borrowed {
			s.topo.Close()
		}
		s.h.close()
		s.p = nil
	}
	return nil
}

// scenarioHandle owns the C scenario. The Scenario and the Topology and Cluster it lends out
// point to it, so it (and what they borrow) lives while any of them is reachable; it points to
// none of them, so its finalizer, the safety net, is not held up by a cycle.
type scenarioHandle struct{ p *C.tp_scenario }

func (h *scenarioHandle) close() {
	if h.p != nil {
		C.tp_scenario_destroy(h.p)
		h.p = nil
		runtime.SetFinalizer(h, nil)
	}
}

// Topology is the scenario's topology.
func (s *Scenario) Topology() *Topology { return s.topo }

// Cluster is the scenario's cluster state (nil for ScenarioTopology); the caller may change
// it, one writer at a time.
func (s *Scenario) Cluster() *Cluster { return s.cluster }

// DefragPlan plans the document's request under the document's own policy (defrag).
func (s *Scenario) DefragPlan() (*Plan, error) {
	defer runtime.KeepAlive(s)
	r, pol := C.tp_scenario_request(s.p), C.tp_scenario_policy(s.p)
	if s.cluster == nil || r == nil || pol == nil {
		return nil, fail(C.TP_EINVAL, "DefragPlan: the scenario was not read for ScenarioDefrag")
	}
	var p *C.tp_plan
	rc := C.tp_defrag_plan(s.cluster.p, r, pol, &p)
	return s.cluster.wrapPlan(p, rc)
}
