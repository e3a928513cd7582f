// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace-slurm.h>
*/
import "C"

import (
	"strings"
	"unsafe"
)

// SlurmOptions of the Slurm importers: Topology names the topology of a topology.yaml to read
// ("": its cluster_default one); MaxNodes and MaxDevices are budgets (0: the defaults).
type SlurmOptions struct {
	Topology   string
	MaxNodes   uint32
	MaxDevices uint32
}

// FromSlurm starts a TopologyBuilder from the text of a Slurm topology.conf, or of a
// topology.yaml when yaml is true, every node with gpusPerNode devices. It returns the
// warnings Slurm would log (one string each, naming the line) with the builder.
func FromSlurm(text string, gpusPerNode uint, yaml bool, opts *SlurmOptions) (*TopologyBuilder,
	[]string, error) {
	var o C.tp_slurm_options
	C.tp_slurm_options_init(&o, C.TP_SLURM_OPTIONS_VERSION)
	const warnLen = 1 << 16
	warn := (*C.char)(C.malloc(warnLen))
	defer C.free(unsafe.Pointer(warn))
	o.warnbuf = warn
	o.warnlen = warnLen
	if opts != nil {
		o.max_nodes = C.uint32_t(opts.MaxNodes)
		o.max_devices = C.uint32_t(opts.MaxDevices)
		o.topology = cstr(opts.Topology)
		defer C.free(unsafe.Pointer(o.topology))
	}
	ctext := C.CString(text)
	defer C.free(unsafe.Pointer(ctext))
	var errbuf [1024]C.char
	var p *C.tp_topology_builder
	var rc C.int
	if yaml {
		rc = C.tp_topology_builder_from_slurm_yaml(&p, ctext, C.size_t(len(text)),
			C.unsigned(gpusPerNode), nil, &o, &errbuf[0], C.size_t(len(errbuf)))
	} else {
		rc = C.tp_topology_builder_from_slurm_ext(&p, ctext, C.size_t(len(text)),
			C.unsigned(gpusPerNode), nil, &o, &errbuf[0], C.size_t(len(errbuf)))
	}
	var warnings []string
	for _, w := range strings.Split(C.GoString(warn), "\n") {
		if w != "" {
			warnings = append(warnings, w)
		}
	}
	if rc != 0 {
		return nil, warnings, fail(rc, C.GoString(&errbuf[0]))
	}
	return wrapBuilder(p), warnings, nil
}
