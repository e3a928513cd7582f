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

// Cluster is the mutable state of a Topology: which job holds which device, and the health of
// every device. One writer at a time.
type Cluster struct {
	p        *C.tp_cluster
	topo     *Topology       // kept alive while the cluster lives
	borrowed bool            // owned by a Scenario: Close only detaches
	owner    *scenarioHandle // the owner of a borrowed cluster, kept alive by it
}

// NewCluster makes an empty cluster state on t: every device free and healthy.
func NewCluster(t *Topology) (*Cluster, error) {
	var p *C.tp_cluster
	if rc := C.tp_cluster_create(&p, t.p, nil); rc != 0 {
		return nil, fail(rc, "cannot create a cluster on this topology")
	}
	c := &Cluster{p: p, topo: t}
	runtime.SetFinalizer(c, (*Cluster).Close)
	return c, nil
}

// Close frees the cluster state (one a Scenario owns is only let go). Safe to call twice.
func (c *Cluster) Close() error {
	if c != nil && c.p != nil {
		if !c.borrowed {
			C.tp_cluster_destroy(c.p)
		}
		c.p = nil
		runtime.SetFinalizer(c, nil)
	}
	return nil
}

// Topology is the cluster's topology.
func (c *Cluster) Topology() *Topology { return c.topo }

func (c *Cluster) err(rc C.int) error {
	if rc == 0 {
		return nil
	}
	return fail(rc, C.GoString(C.tp_cluster_errmsg(c.p)))
}

func cdevs(devs []uint32) (*C.uint32_t, C.size_t) {
	if len(devs) == 0 {
		return nil, 0
	}
	return (*C.uint32_t)(unsafe.Pointer(&devs[0])), C.size_t(len(devs))
}

// Assign records a running job on devices, in rank order.
func (c *Cluster) Assign(job string, devices []uint32) error {
	defer runtime.KeepAlive(c)
	cs := C.CString(job)
	defer C.free(unsafe.Pointer(cs))
	p, n := cdevs(devices)
	return c.err(C.tp_cluster_assign(c.p, cs, p, n, nil))
}

// Release removes a running job; its devices become free.
func (c *Cluster) Release(job string) error {
	defer runtime.KeepAlive(c)
	cs := C.CString(job)
	defer C.free(unsafe.Pointer(cs))
	return c.err(C.tp_cluster_release(c.p, cs))
}

// SetDown marks devices down (never allocated) or up again.
func (c *Cluster) SetDown(devices []uint32, down bool) error {
	defer runtime.KeepAlive(c)
	p, n := cdevs(devices)
	return c.err(C.tp_cluster_set_down(c.p, p, n, cbool(down)))
}

// SetCordoned closes devices to new work (running jobs stay), or opens them.
func (c *Cluster) SetCordoned(devices []uint32, cordoned bool) error {
	defer runtime.KeepAlive(c)
	p, n := cdevs(devices)
	return c.err(C.tp_cluster_set_cordoned(c.p, p, n, cbool(cordoned)))
}

func cbool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}

// Placement is the answer of Place or Replace: devices in rank order. Close it when done (or
// Commit it first).
type Placement struct {
	p *C.tp_placement
	c *Cluster
	// Job is the job the placement is for.
	Job string
	// Devices are the device ids in rank order (nil when not placed).
	Devices []uint32
}

func wrapPlacement(c *Cluster, p *C.tp_placement, rc C.int) (*Placement, error) {
	if p == nil {
		return nil, fail(rc, C.GoString(C.tp_cluster_errmsg(c.p)))
	}
	pl := &Placement{p: p, c: c, Job: C.GoString(C.tp_placement_job(p))}
	runtime.SetFinalizer(pl, (*Placement).Close)
	if rc != 0 {
		err := fail(rc, C.GoString(C.tp_placement_errmsg(p)))
		pl.Close()
		return nil, err
	}
	var n C.size_t
	d := C.tp_placement_devices(p, &n)
	pl.Devices = append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(d)), int(n))...)
	return pl, nil
}

// Close frees the placement. Safe to call twice.
func (p *Placement) Close() error {
	if p != nil && p.p != nil {
		C.tp_placement_destroy(p.p)
		p.p = nil
		runtime.SetFinalizer(p, nil)
	}
	return nil
}

// DeviceNames are the placement's devices by name, in rank order.
func (p *Placement) DeviceNames() []string {
	out := make([]string, len(p.Devices))
	for i, d := range p.Devices {
		out[i] = p.c.topo.DeviceName(d)
	}
	return out
}

// Place answers where the request would go, without changing the cluster. A request that
// cannot be placed returns an *Error with code ErrInfeasible, ErrBusy or ErrFragmented and the
// library's explanation.
func (c *Cluster) Place(r Request) (*Placement, error) {
	defer runtime.KeepAlive(c)
	var p *C.tp_placement
	rc := r.withC(func(req *C.tp_request) C.int { return C.tp_place(c.p, req, &p) })
	return wrapPlacement(c, p, rc)
}

// Replace finds replacements for the failed devices of a running job (read-only); Commit
// applies them. It runs within the library's default work budget (ReplaceWithBudget).
func (c *Cluster) Replace(job string, failed []uint32) (*Placement, error) {
	return c.ReplaceWithBudget(job, failed, 0, 0)
}

// ReplaceWithBudget is Replace with a work budget (tp_replace_ext): at most maxWork job ranks
// read setting up sub-requests (0: the library's default, 2^24; math.MaxUint64: no limit) and
// at most maxTimeUs microseconds (0: no limit). When either runs out the error's code is
// ErrLimit and the cluster is unchanged.
func (c *Cluster) ReplaceWithBudget(job string, failed []uint32, maxWork, maxTimeUs uint64) (*Placement, error) {
	defer runtime.KeepAlive(c)
	cs := C.CString(job)
	defer C.free(unsafe.Pointer(cs))
	var o C.tp_replace_options
	C.tp_replace_options_init(&o, C.TP_REPLACE_OPTIONS_VERSION)
	o.max_work = C.uint64_t(maxWork)
	o.max_time_us = C.uint64_t(maxTimeUs)
	var p *C.tp_placement
	fp, n := cdevs(failed)
	rc := C.tp_replace_ext(c.p, cs, fp, n, &o, &p)
	return wrapPlacement(c, p, rc)
}

// Commit applies a placement made on this cluster (unchanged since): a new job, or a job's
// replacements.
func (c *Cluster) Commit(p *Placement) error {
	defer runtime.KeepAlive(c)
	defer runtime.KeepAlive(p)
	if p == nil || p.p == nil {
		return fail(C.TP_EINVAL, "placement is nil or closed")
	}
	return c.err(C.tp_commit(c.p, p.p, nil))
}

// Step is one step of a defragmentation plan.
type Step struct {
	Action string // "migrate", "preempt" or "place"
	Job    string
	From   []uint32
	To     []uint32
}

// Plan is a defragmentation plan, copied out of the library.
type Plan struct {
	Steps            []Step
	MovedJobCount    uint32
	MovedDeviceCount uint32
	CostS            float64
	p                *C.tp_plan // the library's plan, for ApplyStep; freed by Close
}

// Close frees the library's copy of the plan (the Go fields stay readable). Safe to call
// twice; after it ApplyStep refuses the plan.
func (pl *Plan) Close() error {
	if pl != nil && pl.p != nil {
		C.tp_plan_destroy(pl.p)
		pl.p = nil
		runtime.SetFinalizer(pl, nil)
	}
	return nil
}

// JobDevices are the devices a running job holds, in rank order (tp_cluster_job_devices()).
func (c *Cluster) JobDevices(job string) ([]uint32, error) {
	defer runtime.KeepAlive(c)
	cj := C.CString(job)
	defer C.free(unsafe.Pointer(cj))
	var devs *C.uint32_t
	var n C.size_t
	if rc := C.tp_cluster_job_devices(c.p, cj, &devs, &n); rc != 0 {
		return nil, jobErr(rc, job)
	}
	return append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(devs)), int(n))...), nil
}

// ApplyStep carries out step i of the plan on the cluster (tp_plan_apply_step()): a migration
// moves the job to its new devices, a preemption releases it, the place step commits the
// request. Steps go in order (step 0 may always start over); a step the cluster no longer
// matches is refused with the device or job it names, and the cluster is then unchanged.
func (c *Cluster) ApplyStep(pl *Plan, i int) error {
	defer runtime.KeepAlive(c)
	defer runtime.KeepAlive(pl)
	if pl == nil || pl.p == nil {
		return fail(C.int(C.TP_EINVAL), "ApplyStep: the plan is nil or closed")
	}
	if i < 0 || i >= len(pl.Steps) {
		return fail(C.int(C.TP_EINVAL), fmt.Sprintf("ApplyStep: step %d is out of range: the plan has %d", i, len(pl.Steps)))
	}
	return c.err(C.tp_plan_apply_step(c.p, pl.p, C.size_t(i), nil))
}

// Policy bounds a defragmentation plan (the library's defaults when zero, except as noted).
type Policy struct {
	NoMigrate bool    // forbid migrations
	NoPreempt bool    // forbid preemptions
	MaxMoves  uint32  // most jobs moved; 0: no limit
	MaxCostS  float64 // most checkpoint-seconds; 0: no limit
	// AllowInteractive lets interactive jobs be touched (an administrator's choice).
	AllowInteractive bool
	// AllowLessLocal lets a migrated job land less local than it sits.
	AllowLessLocal bool
}

// DefragPlan plans the moves that make the request placeable (tp_defrag_plan(): the cluster
// is the same afterwards); apply the steps with the scheduler's own actions.
func (c *Cluster) DefragPlan(r Request, pol Policy) (*Plan, error) {
	defer runtime.KeepAlive(c)
	var cp C.tp_defrag_policy
	C.tp_defrag_policy_init(&cp, C.TP_DEFRAG_POLICY_VERSION)
	cp.migrate = cbool(!pol.NoMigrate)
	cp.preempt = cbool(!pol.NoPreempt)
	if pol.MaxMoves > 0 {
		cp.max_moves = C.uint32_t(pol.MaxMoves)
	}
	if pol.MaxCostS > 0 {
		cp.max_cost_s = C.double(pol.MaxCostS)
	}
	if pol.AllowInteractive {
		cp.allow_interactive = 1
	}
	if pol.AllowLessLocal {
		cp.allow_less_local = 1
	}
	var p *C.tp_plan
	rc := r.withC(func(req *C.tp_request) C.int { return C.tp_defrag_plan(c.p, req, &cp, &p) })
	return c.wrapPlan(p, rc)
}

// wrapPlan copies a plan the library made (or its failure) into Go.
func (c *Cluster) wrapPlan(p *C.tp_plan, rc C.int) (*Plan, error) {
	if p == nil {
		return nil, c.err(rc)
	}
	if rc != 0 {
		defer C.tp_plan_destroy(p)
		return nil, fail(rc, C.GoString(C.tp_plan_errmsg(p)))
	}
	plan := &Plan{MovedJobCount: uint32(C.tp_plan_moved_job_count(p)),
		MovedDeviceCount: uint32(C.tp_plan_moved_device_count(p)), CostS: float64(C.tp_plan_cost_s(p)),
		p: p}
	runtime.SetFinalizer(plan, (*Plan).Close)
	for i := C.size_t(0); i < C.tp_plan_step_count(p); i++ {
		var act C.tp_step_action
		var job *C.char
		var from, to *C.uint32_t
		var nfrom, nto C.size_t
		C.tp_plan_step(p, i, &act, &job, &from, &nfrom, &to, &nto)
		s := Step{Action: [...]string{"migrate", "preempt", "place"}[act], Job: C.GoString(job)}
		s.From = append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(from)), int(nfrom))...)
		s.To = append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(to)), int(nto))...)
		plan.Steps = append(plan.Steps, s)
	}
	return plan, nil
}
