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

// AddFailureDomain puts a node's device (or, with device -1, the whole node) into the domain
// named domain of the failure-domain kind ("power", "pdu-a"). The node must already be added.
func (b *TopologyBuilder) AddFailureDomain(kind, domain, node string, device int) error {
	defer runtime.KeepAlive(b)
	var m cmem
	defer m.free()
	return b.err(C.tp_topology_builder_add_failure_domain(b.p, m.str(kind), m.str(domain),
		m.str(node), C.int(device)))
}

// FailureDomainKinds are the topology's failure-domain kinds, in the order they were added.
func (t *Topology) FailureDomainKinds() []string {
	defer runtime.KeepAlive(t)
	out := make([]string, int(C.tp_topology_fd_kind_count(t.p)))
	for i := range out {
		out[i] = C.GoString(C.tp_topology_fd_kind_name(t.p, C.unsigned(i)))
	}
	return out
}

func (t *Topology) fdKind(kind string) (C.unsigned, error) {
	cs := C.CString(kind)
	defer C.free(unsafe.Pointer(cs))
	k := C.tp_topology_fd_kind_by_name(t.p, cs)
	if k < 0 {
		return 0, fail(k, fmt.Sprintf("no failure-domain kind named %q", kind))
	}
	return C.unsigned(k), nil
}

// FailureDomains are the names of the domains of a kind, implicit one-member domains
// included (a node's or a device's own name).
func (t *Topology) FailureDomains(kind string) ([]string, error) {
	defer runtime.KeepAlive(t)
	k, err := t.fdKind(kind)
	if err != nil {
		return nil, err
	}
	out := make([]string, int(C.tp_topology_fd_count(t.p, k)))
	for i := range out {
		out[i] = C.GoString(C.tp_topology_fd_name(t.p, k, C.uint32_t(i)))
	}
	return out, nil
}

// DeviceFailureDomain is the name of the domain of a kind that holds a device.
func (t *Topology) DeviceFailureDomain(kind string, dev uint32) (string, error) {
	defer runtime.KeepAlive(t)
	k, err := t.fdKind(kind)
	if err != nil {
		return "", err
	}
	fd := C.tp_topology_device_fd(t.p, k, C.uint32_t(dev))
	if fd == C.TP_NONE {
		return "", fail(C.TP_EINVAL, fmt.Sprintf("device %d is not in the topology (%d devices)",
			dev, t.DeviceCount()))
	}
	return C.GoString(C.tp_topology_fd_name(t.p, k, fd)), nil
}
