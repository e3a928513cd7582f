// SPDX-License-Identifier: MIT

package topoplace_test

import (
	"errors"
	"fmt"
	"strings"

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

// A TPU-pod-like 4x4x4 torus: a job takes a 2x2x2 cube of chips (ranks in snake order, so
// consecutive ranks are neighbours), and the fragmentation report gives the largest box still
// free. A caller keeps GKE-style slice shapes this way.
func Example_torusBox() {
	topo, _ := topoplace.GenerateTorus(1, topoplace.Grid{Dims: []uint32{4, 4, 4}})
	defer topo.Close()
	c, _ := topoplace.NewCluster(topo)
	defer c.Close()

	p, err := c.Place(topoplace.Request{ID: "cube", Count: 8,
		Box: &topoplace.Box{Level: "pod", Extents: [3]uint32{2, 2, 2}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	var cells []string
	for _, d := range p.Devices {
		xyz, _ := topo.Coords("chip", topo.DeviceNode(d))
		cells = append(cells, fmt.Sprint(xyz))
	}
	fmt.Println(strings.Join(cells, " "))
	c.Commit(p)
	r, _ := c.FragReport(nil)
	fmt.Println("largest free box:", r.Levels[0].LargestBox, "fragments:", r.Levels[0].GridFragmentCount)
	// Output:
	// [0 0 0] [1 0 0] [1 1 0] [0 1 0] [0 1 1] [1 1 1] [1 0 1] [0 0 1]
	// largest free box: [2 4 4] fragments: 1
}

// A disaggregated service on four NVL72 racks: each group (2 prefill instances of 4 GPUs, 4
// decode instances of 8) stays in one rack, at most one group a rack, and the answer pairs
// each decoder with the prefill instance that hands it the KV cache, for the router. Scaling
// to 3 groups places only the new one.
func Example_prefillDecode() {
	topo, _ := topoplace.GenerateNVL72(1, 4)
	defer topo.Close()
	c, _ := topoplace.NewCluster(topo)
	defer c.Close()

	svc := topoplace.DefaultPDRequest("chat")
	svc.Groups, svc.Prefill, svc.PrefillDevices, svc.Decode, svc.DecodeDevices = 2, 2, 4, 4, 8
	svc.InstanceLevel, svc.Locality, svc.SpreadLevel, svc.MaxPerDomain = "rack", "rack", "rack", 1
	show := func(res *topoplace.PDResult) {
		for _, in := range res.Instances {
			rack := topo.DeviceName(in.Devices[0])[:12]
			if in.Prefill {
				fmt.Printf("%s on %s serves %d decoders\n", in.Job, rack, in.Pair)
			} else {
				fmt.Printf("%s on %s takes the KV cache of p%d\n", in.Job, rack, in.Pair)
			}
		}
	}
	res, err := c.PlacePD(svc)
	if err != nil {
		fmt.Println(err)
		return
	}
	show(res)
	svc.Groups = 3
	res, _ = c.PlacePD(svc)
	fmt.Println("scaled out:", len(res.Instances), "new instances, group", res.Instances[0].Group)
	// Output:
	// chat/g0/p0 on block0-rack0 serves 2 decoders
	// chat/g0/p1 on block0-rack0 serves 2 decoders
	// chat/g0/d0 on block0-rack0 takes the KV cache of p0
	// chat/g0/d1 on block0-rack0 takes the KV cache of p1
	// chat/g0/d2 on block0-rack0 takes the KV cache of p0
	// chat/g0/d3 on block0-rack0 takes the KV cache of p1
	// chat/g1/p0 on block0-rack1 serves 2 decoders
	// chat/g1/p1 on block0-rack1 serves 2 decoders
	// chat/g1/d0 on block0-rack1 takes the KV cache of p0
	// chat/g1/d1 on block0-rack1 takes the KV cache of p1
	// chat/g1/d2 on block0-rack1 takes the KV cache of p0
	// chat/g1/d3 on block0-rack1 takes the KV cache of p1
	// scaled out: 6 new instances, group 2
}
