// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// JobClass is a job's class (tp_job_class): it decides what defragmentation may move.
type JobClass int

// The job classes.
const (
	Training    JobClass = C.TP_CLASS_TRAINING    // batch training (the default)
	Inference   JobClass = C.TP_CLASS_INFERENCE   // serving
	Interactive JobClass = C.TP_CLASS_INTERACTIVE // a person is waiting; never moved unless allowed
)

func (k JobClass) String() string {
	switch k {
	case Training:
		return "training"
	case Inference:
		return "inference"
	case Interactive:
		return "interactive"
	}
	return fmt.Sprintf("JobClass(%d)", int(k))
}

// Slice is one layer of a request's slices: the devices in rank order, cut into runs of Size,
// each inside one domain of Level.
type Slice struct {
	Level string
	Size  uint32
}

// DomainCap is a per-domain cap (the scenario's max_per_domain): at most Devices devices, or
// Groups groups, per domain of Level (a level or a failure-domain kind); exactly one of the
// two is non-zero.
type DomainCap struct {
	Level   string
	Devices uint32
	Groups  uint32
}

// Spread asks the placement to touch at least MinDomains domains of Level (a level or a
// failure-domain kind).
type Spread struct {
	Level      string
	MinDomains uint32
}

// Colocate asks the placement to lie inside one domain of Level that also holds devices of
// the running Job.
type Colocate struct {
	Job   string
	Level string
}

// Select keeps only the devices matching every property given (zero values: any).
type Select struct {
	Model       string   // device model ("H100"); "": any
	MinPerf     float64  // relative speed at least this; 0: any
	MinMemoryGB float64  // memory at least this; 0: any
	Nodes       []string // allow-list of node names; nil: every node
}

// StepModel says how a job communicates (tp_step_model): its parallel degrees and the bytes
// and messages of a training step. A zero TP, PP or DP degree is 1; EP 0 means none.
type StepModel struct {
	TP, PP, DP, EP uint32
	ComputeUs      float64
	TPBytes        float64
	TPMsgs         uint32
	DPBytes        float64
	DPOverlap      float64
	PPBytes        float64
	PPMsgs         uint32
	EPBytes        float64
	EPMsgs         uint32
	// MinEfficiency is the lowest placement efficiency (CostEfficiency) Place may answer for
	// a request whose Comm is this model, in [0, 1]; 0: no floor. When the rules' choice is
	// below it, Place searches the topology's fabric classes for a placement that meets it;
	// without one the answer is an ErrBusy whose message names request.comm.min_efficiency,
	// the floor and the best efficiency reached; a value outside [0, 1] is an ErrInvalid. The
	// cost functions ignore it (tp_step_model.min_efficiency, since 0.4.0).
	MinEfficiency float64
	// NoFloorSearch: Place tests only the rules' choice against MinEfficiency, no search
	// (tp_step_model.no_floor_search, since 0.4.0).
	NoFloorSearch bool
	// FabricFit (0 to 1, 0: off): on a topology of several fabric classes Place first tries
	// the classes on which the job packed reaches FabricFit x its best class efficiency,
	// slowest first (tp_step_model.fabric_fit, since 0.4.0).
	FabricFit float64
}

// Request is what a job asks for: every field of the C tp_request, with the semantics of the
// scenario format's request. Zero values are TP_REQUEST_INIT's defaults.
type Request struct {
	ID         string // job id, used by Commit; "": "new"
	Class      JobClass
	Priority   int    // higher wins (defrag, preemption)
	Tenant     string // "": "default"
	Count      uint32 // devices wanted, all or nothing
	GroupSize  uint32 // devices per group (pod, rank); 0: 1
	GroupLevel string // the level each group lies in; "": the node level
	Required   string // every device in one domain of this level
	Preferred  string // as few domains as possible, from this level up
	Slices     []Slice
	Balanced   bool        // split evenly over the domains it spans
	Caps       []DomainCap // max_per_domain
	Spread     *Spread
	Colocate   *Colocate
	Exclusive  string // the level at which other tenants are kept out
	Select     Select
	// GPUNICPairs: every device a GPU paired with its own nearest NIC.
	GPUNICPairs bool
	Comm        *StepModel // how the job communicates; nil: not said
	// Service names the service the job is a replica of (Cluster.SetServiceCaps); "": none.
	Service string
	// Box asks for a box of a grid level's children (rings and tori); nil: no box.
	Box *Box
	// ExpectedEndS is when the job is expected to end, in seconds on the caller's own clock
	// (its start plus its time limit, say); 0: not known. Of the tightest nodes that hold the
	// job, the one whose jobs end last at or after it, nearest first, wins; best fit breaks
	// ties (tp_request.expected_end_s).
	ExpectedEndS float64
}

// cmem collects C allocations made for one call and frees them together.
type cmem struct{ ps []unsafe.Pointer }

func (m *cmem) str(s string) *C.char {
	p := cstr(s)
	if p != nil {
		m.ps = append(m.ps, unsafe.Pointer(p))
	}
	return p
}

func (m *cmem) alloc(n, size uintptr) unsafe.Pointer {
	p := C.calloc(C.size_t(n), C.size_t(size))
	m.ps = append(m.ps, p)
	return p
}

func (m *cmem) free() {
	for _, p := range m.ps {
		C.free(p)
	}
	m.ps = nil
}

// fill writes r into req, its strings and arrays in m.
func (r *Request) fill(req *C.tp_request, m *cmem) {
	C.tp_request_init(req, C.TP_REQUEST_VERSION)
	req.id = m.str(r.ID)
	req.job_class = C.tp_job_class(r.Class)
	req.priority = C.int(r.Priority)
	req.tenant = m.str(r.Tenant)
	req.count = C.uint32_t(r.Count)
	req.group_size = C.uint32_t(r.GroupSize)
	req.group_level = m.str(r.GroupLevel)
	req.required = m.str(r.Required)
	req.preferred = m.str(r.Preferred)
	req.balanced = cbool(r.Balanced)
	if len(r.Slices) > 0 {
		v := unsafe.Slice((*C.tp_slice)(m.alloc(uintptr(len(r.Slices)),
			unsafe.Sizeof(C.tp_slice{}))), len(r.Slices))
		for i, s := range r.Slices {
			v[i].level = m.str(s.Level)
			v[i].size = C.uint32_t(s.Size)
		}
		req.slices, req.nslices = &v[0], C.size_t(len(v))
	}
	if len(r.Caps) > 0 {
		v := unsafe.Slice((*C.tp_domain_cap)(m.alloc(uintptr(len(r.Caps)),
			unsafe.Sizeof(C.tp_domain_cap{}))), len(r.Caps))
		for i, c := range r.Caps {
			v[i].level = m.str(c.Level)
			v[i].devices = C.uint32_t(c.Devices)
			v[i].groups = C.uint32_t(c.Groups)
		}
		req.caps, req.ncaps = &v[0], C.size_t(len(v))
	}
	if r.Spread != nil {
		req.spread_level = m.str(r.Spread.Level)
		req.spread_min_domains = C.uint32_t(r.Spread.MinDomains)
	}
	if r.Colocate != nil {
		req.colocate_job = m.str(r.Colocate.Job)
		req.colocate_level = m.str(r.Colocate.Level)
	}
	req.exclusive = m.str(r.Exclusive)
	req.select_model = m.str(r.Select.Model)
	req.select_min_perf = C.double(r.Select.MinPerf)
	req.select_min_memory_gb = C.double(r.Select.MinMemoryGB)
	if r.Select.Nodes != nil {
		// An empty allow-list is kept as one (it allows no node), not as "every node".
		n := len(r.Select.Nodes)
		v := unsafe.Slice((**C.char)(m.alloc(uintptr(n+1), unsafe.Sizeof((*C.char)(nil)))), n+1)
		for i, s := range r.Select.Nodes {
			v[i] = C.CString(s)
			m.ps = append(m.ps, unsafe.Pointer(v[i]))
		}
		req.select_nodes, req.nselect_nodes = &v[0], C.size_t(n)
	}
	req.gpu_nic_pairs = cbool(r.GPUNICPairs)
	if r.Comm != nil {
		cm := (*C.tp_step_model)(m.alloc(1, unsafe.Sizeof(C.tp_step_model{})))
		r.Comm.fill(cm)
		req.comm = cm
	}
	req.service = m.str(r.Service)
	if r.Box != nil {
		req.box_level = m.str(r.Box.Level)
		for i, e := range r.Box.Extents {
			req.box[i] = C.uint32_t(e)
		}
		req.box_wrap = cbool(r.Box.Wrap)
		req.box_rotate = cbool(r.Box.Rotate)
	}
	req.expected_end_s = C.double(r.ExpectedEndS)
}

func degree(d uint32) C.unsigned {
	if d == 0 {
		return 1
	}
	return C.unsigned(d)
}

func (s *StepModel) fill(m *C.tp_step_model) {
	C.tp_step_model_init(m, C.TP_STEP_MODEL_VERSION)
	m.tp, m.pp, m.dp, m.ep = degree(s.TP), degree(s.PP), degree(s.DP), C.unsigned(s.EP)
	m.compute_us = C.double(s.ComputeUs)
	m.tp_bytes, m.tp_msgs = C.double(s.TPBytes), C.unsigned(s.TPMsgs)
	m.dp_bytes, m.dp_overlap = C.double(s.DPBytes), C.double(s.DPOverlap)
	m.pp_bytes, m.pp_msgs = C.double(s.PPBytes), C.unsigned(s.PPMsgs)
	m.ep_bytes, m.ep_msgs = C.double(s.EPBytes), C.unsigned(s.EPMsgs)
	m.min_efficiency = C.double(s.MinEfficiency)
	m.fabric_fit = C.double(s.FabricFit)
	m.no_floor_search = 0
	if s.NoFloorSearch {
		m.no_floor_search = 1
	}
}

// withC calls fn with the request as a C tp_request whose strings and arrays live in C memory
// until fn returns.
func (r *Request) withC(fn func(*C.tp_request) C.int) C.int {
	var m cmem
	defer m.free()
	var req C.tp_request
	r.fill(&req, &m)
	return fn(&req)
}

// gostr is C.GoString that maps NULL to "" (the library's "not given").
func gostr(p *C.char) string {
	if p == nil {
		return ""
	}
	return C.GoString(p)
}

// requestFromC copies a request the library owns (a scenario's, a job's shape) into Go.
func requestFromC(q *C.tp_request) Request {
	r := Request{ID: gostr(q.id), Class: JobClass(q.job_class), Priority: int(q.priority),
		Tenant: gostr(q.tenant), Count: uint32(q.count), GroupSize: uint32(q.group_size),
		GroupLevel: gostr(q.group_level), Required: gostr(q.required),
		Preferred: gostr(q.preferred), Balanced: q.balanced != 0,
		Exclusive: gostr(q.exclusive), GPUNICPairs: q.gpu_nic_pairs != 0,
		Service: gostr(q.service), ExpectedEndS: float64(q.expected_end_s)}
	if q.box_level != nil {
		r.Box = &Box{Level: gostr(q.box_level), Wrap: q.box_wrap != 0, Rotate: q.box_rotate != 0}
		for i := range r.Box.Extents {
			r.Box.Extents[i] = uint32(q.box[i])
		}
	}
	if q.nslices > 0 {
		for _, s := range unsafe.Slice(q.slices, int(q.nslices)) {
			r.Slices = append(r.Slices, Slice{gostr(s.level), uint32(s.size)})
		}
	}
	if q.ncaps > 0 {
		for _, c := range unsafe.Slice(q.caps, int(q.ncaps)) {
			r.Caps = append(r.Caps, DomainCap{gostr(c.level), uint32(c.devices), uint32(c.groups)})
		}
	}
	if q.spread_level != nil {
		r.Spread = &Spread{gostr(q.spread_level), uint32(q.spread_min_domains)}
	}
	if q.colocate_job != nil || q.colocate_level != nil {
		r.Colocate = &Colocate{gostr(q.colocate_job), gostr(q.colocate_level)}
	}
	r.Select = Select{Model: gostr(q.select_model), MinPerf: float64(q.select_min_perf),
		MinMemoryGB: float64(q.select_min_memory_gb)}
	if q.select_nodes != nil {
		r.Select.Nodes = []string{}
		for _, s := range unsafe.Slice(q.select_nodes, int(q.nselect_nodes)) {
			r.Select.Nodes = append(r.Select.Nodes, gostr(s))
		}
	}
	if q.comm != nil {
		m := q.comm
		r.Comm = &StepModel{TP: uint32(m.tp), PP: uint32(m.pp), DP: uint32(m.dp),
			EP: uint32(m.ep), ComputeUs: float64(m.compute_us), TPBytes: float64(m.tp_bytes),
			TPMsgs: uint32(m.tp_msgs), DPBytes: float64(m.dp_bytes),
			DPOverlap: float64(m.dp_overlap), PPBytes: float64(m.pp_bytes),
			PPMsgs: uint32(m.pp_msgs), EPBytes: float64(m.ep_bytes), EPMsgs: uint32(m.ep_msgs),
			MinEfficiency: float64(m.min_efficiency), NoFloorSearch: m.no_floor_search != 0,
			FabricFit: float64(m.fabric_fit)}
	}
	return r
}
