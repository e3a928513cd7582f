// SPDX-License-Identifier: MIT

package topoplace_test

import (
	"errors"
	"fmt"

	"topoplace"
)

// The shape a Kubernetes scheduler plugin (a Kueue or scheduler-framework PreFilter / Reserve
// / Unreserve / PostBind set) would call the library in. The plugin keeps one Cluster per
// snapshot; PreFilter asks Place for a PodSet's GPUs (a group per pod, only on the nodes the
// Filter phase kept, the tenant's namespace); the error code tells "wait" from "defragment"
// from "never". Reserve commits under a savepoint, so that Unreserve (a bind that failed) can
// roll the cluster back exactly, and PostBind keeps the change.
func Example_schedulerPlugin() {
	topo, _ := topoplace.GenerateNVL72(1, 2) // 2 racks x 18 nodes x 4 GPUs
	defer topo.Close()
	c, _ := topoplace.NewCluster(topo)
	defer c.Close()

	feasible := []string{} // what Filter kept: every node but the first of each rack
	for r := 0; r < 2; r++ {
		for n := 1; n < 18; n++ {
			feasible = append(feasible, fmt.Sprintf("block0-rack%d-node%d", r, n))
		}
	}
	podset := topoplace.Request{ID: "team-a/train", Tenant: "team-a", Priority: 10,
		Count: 32, GroupSize: 4, Required: "rack", Select: topoplace.Select{Nodes: feasible}}

	reserve := func(req topoplace.Request, bindFails bool) {
		p, err := c.Place(req) // PreFilter: read-only
		switch {
		case errors.Is(err, topoplace.ErrBusy):
			fmt.Println("requeue: wait for capacity")
			return
		case errors.Is(err, topoplace.ErrFragmented):
			fmt.Println("ask for a defragmentation plan:", err)
			return
		case errors.Is(err, topoplace.ErrInfeasible):
			fmt.Println("reject: never fits")
			return
		case err != nil:
			fmt.Println("invalid PodSet:", err)
			return
		}
		defer p.Close()
		names := p.DeviceNames()
		fmt.Println(len(names), "GPUs, first pod on", names[0][:len(names[0])-2])

		sp, _ := c.Savepoint() // Reserve: the cluster changes, undoably
		opts := topoplace.DefaultJobOptions()
		opts.Tenant, opts.Priority, opts.Migratable, opts.CheckpointS = req.Tenant, req.Priority, true, 120
		if err := c.CommitWith(p, &opts); err != nil {
			fmt.Println("reserve failed:", err)
			c.Rollback(sp)
			return
		}
		if bindFails {
			fmt.Println("unreserve:", c.Rollback(sp), "running:", c.Jobs())
			return
		}
		fmt.Println("bound:", c.DiscardSavepoint(sp), "running:", c.Jobs()) // PostBind
	}
	reserve(podset, true)  // the first bind fails: rolled back
	reserve(podset, false) // the retry binds
	big := podset
	big.ID, big.Count = "team-a/big", 48 // the other rack has 68 feasible GPUs free
	reserve(big, false)
	huge := podset
	huge.ID, huge.Count = "team-a/huge", 72 // a whole rack, but Filter kept 17 of its 18 nodes
	reserve(huge, false)
	// Output:
	// 32 GPUs, first pod on block0-rack0-node1
	// unreserve: <nil> running: []
	// 32 GPUs, first pod on block0-rack0-node1
	// bound: <nil> running: [team-a/train]
	// 48 GPUs, first pod on block0-rack1-node1
	// bound: <nil> running: [team-a/train team-a/big]
	// reject: never fits
}
