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

// JobOptions are a running job's attributes (tp_job_options): what defragmentation may do to
// it and what it costs. Start from DefaultJobOptions; a nil *JobOptions means the defaults.
type JobOptions struct {
	Class       JobClass
	Priority    int      // higher wins
	Tenant      string   // "": "default"
	Preemptible bool     // may be stopped and requeued
	Migratable  bool     // may restart elsewhere from a checkpoint
	CheckpointS float64  // seconds lost when stopped or moved (>= 0)
	Shape       *Request // the job's own request (kept by the cluster), or nil
}

// DefaultJobOptions are TP_JOB_OPTIONS_INIT's: training, priority 0, the default tenant,
// preemptible, not migratable, 60 s lost per stop or move.
func DefaultJobOptions() JobOptions {
	var o C.tp_job_options
	C.tp_job_options_init(&o, C.TP_JOB_OPTIONS_VERSION)
	return JobOptions{Class: JobClass(o.job_class), Priority: int(o.priority),
		Preemptible: o.preemptible != 0, Migratable: o.migratable != 0,
		CheckpointS: float64(o.checkpoint_s)}
}

// withC calls fn with o as C options (nil for a nil o) whose strings live until fn returns.
func (o *JobOptions) withC(fn func(*C.tp_job_options) C.int) C.int {
	if o == nil {
		return fn(nil)
	}
	var m cmem
	defer m.free()
	var co C.tp_job_options
	C.tp_job_options_init(&co, C.TP_JOB_OPTIONS_VERSION)
	co.job_class = C.tp_job_class(o.Class)
	co.priority = C.int(o.Priority)
	co.tenant = m.str(o.Tenant)
	co.preemptible = cbool(o.Preemptible)
	co.migratable = cbool(o.Migratable)
	co.checkpoint_s = C.double(o.CheckpointS)
	if o.Shape != nil {
		shape := (*C.tp_request)(m.alloc(1, unsafe.Sizeof(C.tp_request{})))
		o.Shape.fill(shape, &m)
		co.shape = shape
	}
	return fn(&co)
}

// AssignWith records a running job on devices, in rank order, with its attributes (nil: the
// defaults, as Assign).
func (c *Cluster) AssignWith(job string, devices []uint32, opts *JobOptions) error {
	defer runtime.KeepAlive(c)
	cs := C.CString(job)
	defer C.free(unsafe.Pointer(cs))
	p, n := cdevs(devices)
	return c.err(opts.withC(func(o *C.tp_job_options) C.int {
		return C.tp_cluster_assign(c.p, cs, p, n, o)
	}))
}

// CommitWith applies a placement as Commit does, giving the new job's attributes (nil: class,
// priority and tenant from the request; with opts and a nil Shape the request is still kept
// as the job's shape). Ignored for a replacement.
func (c *Cluster) CommitWith(p *Placement, opts *JobOptions) error {
	defer runtime.KeepAlive(c)
	defer runtime.KeepAlive(p)
	if p == nil || p.p == nil {
		return fail(C.TP_EINVAL, "placement is nil or closed")
	}
	return c.err(opts.withC(func(o *C.tp_job_options) C.int { return C.tp_commit(c.p, p.p, o) }))
}

// JobOptions reads a running job's attributes back (tp_cluster_job_options()); the shape is
// copied.
func (c *Cluster) JobOptions(job string) (JobOptions, error) {
	defer runtime.KeepAlive(c)
	cs := C.CString(job)
	defer C.free(unsafe.Pointer(cs))
	var co C.tp_job_options
	C.tp_job_options_init(&co, C.TP_JOB_OPTIONS_VERSION)
	if rc := C.tp_cluster_job_options(c.p, cs, &co); rc != 0 {
		return JobOptions{}, jobErr(rc, job)
	}
	o := JobOptions{Class: JobClass(co.job_class), Priority: int(co.priority),
		Tenant: gostr(co.tenant), Preemptible: co.preemptible != 0,
		Migratable: co.migratable != 0, CheckpointS: float64(co.checkpoint_s)}
	if co.shape != nil {
		s := requestFromC(co.shape)
		o.Shape = &s
	}
	return o, nil
}

// Jobs are the ids of the running jobs, in the library's order (tp_cluster_job_at()).
func (c *Cluster) Jobs() []string {
	defer runtime.KeepAlive(c)
	n := int(C.tp_cluster_job_count(c.p))
	out := make([]string, n)
	for i := range out {
		out[i] = C.GoString(C.tp_cluster_job_at(c.p, C.size_t(i)))
	}
	return out
}

// Savepoint is the handle of an open savepoint of a Cluster.
type Savepoint uint64

// Savepoint opens a savepoint: every later change can be undone by Rollback. Savepoints nest;
// a handle is never handed out twice.
func (c *Cluster) Savepoint() (Savepoint, error) {
	defer runtime.KeepAlive(c)
	var sp C.size_t
	if rc := C.tp_cluster_savepoint(c.p, &sp); rc != 0 {
		return 0, c.err(rc)
	}
	return Savepoint(sp), nil
}

// Rollback undoes every change since sp and closes it (and every savepoint opened after it).
// A closed or unknown sp is refused with ErrInvalid.
func (c *Cluster) Rollback(sp Savepoint) error {
	defer runtime.KeepAlive(c)
	return c.err(C.tp_cluster_rollback(c.p, C.size_t(sp)))
}

// DiscardSavepoint closes sp (and every later one), keeping the changes.
func (c *Cluster) DiscardSavepoint(sp Savepoint) error {
	defer runtime.KeepAlive(c)
	return c.err(C.tp_cluster_savepoint_discard(c.p, C.size_t(sp)))
}

// jobErr is the error of a read-only job query: such calls leave no message on the cluster
// (it is const to them), so the binding names the job itself.
func jobErr(rc C.int, job string) error {
	if rc == C.TP_ENOTFOUND {
		return fail(rc, fmt.Sprintf("no running job %q", job))
	}
	return fail(rc, fmt.Sprintf("job %q: invalid argument", job))
}
