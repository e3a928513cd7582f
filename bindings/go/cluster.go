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
	// DecidedBy is the rule that decided the outermost choice among candidate domains.
	DecidedBy Rule
	// StepCommUs is the modelled time of one ring all-reduce of 1 GiB over the devices, µs.
	StepCommUs float64
	// Partitions are the NVLink partitions the placement needs (Cluster.SetPartitions), in
	// domain order; nil with partitions off or on one node.
	Partitions []Partition
	// Replaced pairs each failed device of a replacement with its replacement (Replace).
	Replaced []Replacement
}

func wrapPlacement(c *Cluster, p *C.tp_placement, rc C.int) (*Placement, error) {
	if p == nil {
		return nil, fail(rc, C.GoString(C.tp_cluster_errmsg(c.p)))
	}
	pl := &Placement{p: p, c: c, Job: C.GoString(C.tp_placement_job(p))}
	runtime.SetFinalizer(pl, (*Placement).Close)
	if rc != 0 {
		err := c.placementErr(p, rc)
		pl.Close()
		return nil, err
	}
	var n C.size_t
	d := C.tp_placement_devices(p, &n)
	pl.Devices = append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(d)), int(n))...)
	pl.readExtras()
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
	// LowerBoundS is a lower bound on the cost of every plan for the request under the policy
	// (tp_plan_lower_bound_s()): CostS itself when the search was exact.
	LowerBoundS float64
	// TargetLevel and Targets are the domains the plan drains (tp_plan_targets()): pass them
	// back as Policy.PreferLevel and PreferTargets to keep them on a later call. Empty for a
	// request without a required level, and for a compaction plan.
	TargetLevel string
	Targets     []uint32
	// Stats is the work the planning call did.
	Stats DefragStats
	p     *C.tp_plan // the library's plan, for ApplyStep; freed by Close
}

// DefragBudget is the part of the planner's work budget that stopped a search early.
type DefragBudget int

// The budgets.
const (
	BudgetNone        DefragBudget = C.TP_BUDGET_NONE        // the search ran to its end
	BudgetCandidates  DefragBudget = C.TP_BUDGET_CANDIDATES  // Policy.MaxCandidates
	BudgetSimulations DefragBudget = C.TP_BUDGET_SIMULATIONS // Policy.MaxSimulations
	BudgetTime        DefragBudget = C.TP_BUDGET_TIME        // Policy.MaxTimeUs
)

func (b DefragBudget) String() string {
	switch b {
	case BudgetNone:
		return "none"
	case BudgetCandidates:
		return "candidates"
	case BudgetSimulations:
		return "simulations"
	case BudgetTime:
		return "time"
	}
	return fmt.Sprintf("DefragBudget(%d)", int(b))
}

// DefragStats is the work one planning call did (tp_plan_stats()).
type DefragStats struct {
	Scanned   uint64       // reads of a candidate domain's devices
	Evaluated uint64       // candidate domains searched
	Simulated uint64       // job sets simulated
	Budget    DefragBudget // what stopped the search early (BudgetNone: nothing)
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
	// The work budget: candidate domains searched and job sets simulated per call (0: the
	// library's defaults, 4096 and 512; math.MaxUint32: no limit) and a wall-clock limit in
	// microseconds (0: none; answers then depend on the machine). When it runs out the best
	// plan found is returned (Plan.Stats.Budget says so), or ErrNoPlan naming the field.
	MaxCandidates  uint32
	MaxSimulations uint32
	MaxTimeUs      uint64
	// PreferLevel and PreferTargets are stable targets: the domains an earlier plan drained
	// (Plan.TargetLevel, Plan.Targets). A plan landing there is kept while one exists.
	PreferLevel   string
	PreferTargets []uint32
}

// withC calls fn with the policy as a C tp_defrag_policy (its targets in C memory until fn
// returns); an unknown PreferLevel is refused.
func (pol *Policy) withC(t *Topology, fn func(*C.tp_defrag_policy) C.int) (C.int, error) {
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
	cp.allow_interactive = cbool(pol.AllowInteractive)
	cp.allow_less_local = cbool(pol.AllowLessLocal)
	if pol.MaxCandidates > 0 {
		cp.max_candidates = C.uint32_t(pol.MaxCandidates)
	}
	if pol.MaxSimulations > 0 {
		cp.max_simulations = C.uint32_t(pol.MaxSimulations)
	}
	cp.max_time_us = C.uint64_t(pol.MaxTimeUs)
	var m cmem
	defer m.free()
	if len(pol.PreferTargets) > 0 {
		l, err := t.level(pol.PreferLevel, false)
		if err != nil {
			return 0, fail(C.TP_ENOTFOUND, fmt.Sprintf("policy.prefer_level: no level named %q",
				pol.PreferLevel))
		}
		cp.prefer_level = C.unsigned(l)
		v := unsafe.Slice((*C.uint32_t)(m.alloc(uintptr(len(pol.PreferTargets)), 4)),
			len(pol.PreferTargets))
		for i, d := range pol.PreferTargets {
			v[i] = C.uint32_t(d)
		}
		cp.prefer_targets, cp.nprefer_targets = &v[0], C.size_t(len(v))
	}
	return fn(&cp), nil
}

// DefragPlan plans the moves that make the request placeable (tp_defrag_plan(): the cluster
// is the same afterwards); apply the steps with the scheduler's own actions.
func (c *Cluster) DefragPlan(r Request, pol Policy) (*Plan, error) {
	defer runtime.KeepAlive(c)
	var p *C.tp_plan
	rc, err := pol.withC(c.topo, func(cp *C.tp_defrag_policy) C.int {
		return r.withC(func(req *C.tp_request) C.int { return C.tp_defrag_plan(c.p, req, cp, &p) })
	})
	if err != nil {
		return nil, err
	}
	return c.wrapPlan(p, rc)
}

// DefragCompact plans the moves that leave ndomains domains of level fully free (compaction,
// tp_defrag_compact()): racks ready before a big job arrives. The cluster is the same
// afterwards; the plan has no place step (priorities are compared with 0).
func (c *Cluster) DefragCompact(level string, ndomains uint32, pol Policy) (*Plan, error) {
	defer runtime.KeepAlive(c)
	cs := C.CString(level)
	defer C.free(unsafe.Pointer(cs))
	var p *C.tp_plan
	rc, err := pol.withC(c.topo, func(cp *C.tp_defrag_policy) C.int {
		return C.tp_defrag_compact(c.p, cs, C.uint32_t(ndomains), cp, &p)
	})
	if err != nil {
		return nil, err
	}
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
		LowerBoundS: float64(C.tp_plan_lower_bound_s(p)), p: p}
	var level C.unsigned
	var doms *C.uint32_t
	var n C.size_t
	if C.tp_plan_targets(p, &level, &doms, &n) == 0 && n > 0 {
		plan.TargetLevel = C.GoString(C.tp_topology_level_name(c.topo.p, level))
		plan.Targets = append([]uint32(nil), unsafe.Slice((*uint32)(unsafe.Pointer(doms)), int(n))...)
	}
	var st C.tp_defrag_stats
	C.tp_defrag_stats_init(&st, C.TP_DEFRAG_STATS_VERSION)
	if C.tp_plan_stats(p, &st) == 0 {
		plan.Stats = DefragStats{uint64(st.scanned), uint64(st.evaluated), uint64(st.simulated),
			DefragBudget(st.budget)}
	}
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
