// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace.h>
*/
import "C"

import (
	"runtime"
)

// LevelFrag is the fragmentation report of one level.
type LevelFrag struct {
	Level            string
	DomainCount      uint32  // domains of the level
	FreeCount        uint32  // free devices
	FullyFreeCount   uint32  // domains whose every device is free, healthy and uncordoned
	LargestFreeCount uint32  // the most free devices in one domain
	Fragmentation    float64 // the share of free devices not in fully free domains, 0 to 1
	// LargestBox are the extents of the largest box of wholly free children in one domain of
	// a grid level (one per axis of the grid), the biggest box request that fits now; nil
	// when the level is no grid or nothing is wholly free.
	LargestBox []uint32
	// GridFragmentCount is the number of connected sets of wholly free children of a grid
	// level, summed over its domains (0 when it is no grid): what box requests keep low.
	GridFragmentCount uint32
}

// JobShape is one entry of a job mix (tp_job_shape): jobs of Devices devices that should fit
// inside one domain of Level, with a relative Weight (> 0).
type JobShape struct {
	Devices uint32
	Level   string
	Weight  float64
}

// FragReport is the whole fragmentation report (tp_frag_report()), copied out of the library.
type FragReport struct {
	Levels        []LevelFrag
	Workload      float64 // the share of free devices the job mix cannot use at full locality, 0 to 1
	DownCount     uint32  // devices down
	CordonedCount uint32  // devices cordoned and not down
}

// Frag reports the fragmentation of every level for the default job mix.
func (c *Cluster) Frag() ([]LevelFrag, error) {
	r, err := c.FragReport(nil)
	if err != nil {
		return nil, err
	}
	return r.Levels, nil
}

// FragReport reports the fragmentation of every level for a job mix (nil: the default mix),
// with the workload figure and the down and cordoned counts. Read-only on the cluster. A bad
// mix is refused with the report's reason ("mix[0].weight -1 is not a positive finite
// number").
func (c *Cluster) FragReport(mix []JobShape) (*FragReport, error) {
	defer runtime.KeepAlive(c)
	var m cmem
	defer m.free()
	var f *C.tp_frag
	if rc := C.tp_frag_report(c.p, cmix(mix, &m, false), C.size_t(len(mix)), &f); rc != 0 {
		msg := "cannot build the fragmentation report"
		if f != nil {
			msg = C.GoString(C.tp_frag_errmsg(f))
			C.tp_frag_destroy(f)
		}
		return nil, fail(rc, msg)
	}
	defer C.tp_frag_destroy(f)
	levels := c.topo.Levels()
	r := &FragReport{Levels: make([]LevelFrag, len(levels)),
		Workload: float64(C.tp_frag_workload(f)), DownCount: uint32(C.tp_frag_down_count(f)),
		CordonedCount: uint32(C.tp_frag_cordoned_count(f))}
	for i, name := range levels {
		l := C.unsigned(i)
		r.Levels[i] = LevelFrag{name, uint32(C.tp_frag_domain_count(f, l)),
			uint32(C.tp_frag_free_count(f, l)), uint32(C.tp_frag_fully_free_count(f, l)),
			uint32(C.tp_frag_largest_free_count(f, l)), float64(C.tp_frag_fragmentation(f, l)),
			nil, uint32(C.tp_frag_grid_fragment_count(f, l))}
		var ext [C.TP_GRID_MAX_DIMS]C.unsigned
		if C.tp_frag_largest_box(f, l, &ext[0]) > 0 {
			g, _, _ := c.topo.Grid(name)
			for a := range g.Dims {
				r.Levels[i].LargestBox = append(r.Levels[i].LargestBox, uint32(ext[a]))
			}
		}
	}
	return r, nil
}
