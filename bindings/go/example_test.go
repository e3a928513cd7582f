// SPDX-License-Identifier: MIT

package topoplace_test

import (
	"errors"
	"fmt"

	"topoplace"
)

// The shape a Kubernetes scheduler plugin (a Kueue or scheduler-framework PreFilter/Reserve
// pair) would call the library in: the plugin keeps one Cluster per snapshot, asks Place for
// a PodSet's GPUs (a group per pod), tells "wait" from "defragment" from "never" by the error
// code, and Commits only once it reserves.
func Example_schedulerPlugin() {
	topo, _ := topoplace.GenerateNVL72(1, 2) // 2 racks x 18 nodes x 4 GPUs
	defer topo.Close()
	c, _ := topoplace.NewCluster(topo)
	defer c.Close()

	podset := topoplace.Request{ID: "team-a/train", Count: 32, GroupSize: 4, Required: "rack"}
	p, err := c.Place(podset) // PreFilter: read-only
	switch {
	case errors.Is(err, topoplace.ErrBusy):
		fmt.Println("requeue: wait for capacity")
	case errors.Is(err, topoplace.ErrFragmented):
		fmt.Println("ask for a defragmentation plan")
	case errors.Is(err, topoplace.ErrInfeasible):
		fmt.Println("reject: never fits")
	case err != nil:
		fmt.Println("invalid PodSet:", err)
	default:
		defer p.Close()
		names := p.DeviceNames()
		fmt.Println(len(names), "GPUs, first pod on", names[0][:len(names[0])-2])
		fmt.Println("reserve:", c.Commit(p)) // Reserve: the cluster changes
	}
	// Output:
	// 32 GPUs, first pod on block0-rack0-node10
	// reserve: <nil>
}
