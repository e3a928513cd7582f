// SPDX-License-Identifier: MIT

package topoplace

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
)

func fleet(t *testing.T, racks uint) (*Topology, *Cluster) {
	t.Helper()
	topo, err := GenerateNVL72(1, racks)
	must(t, err)
	c, err := NewCluster(topo)
	must(t, err)
	t.Cleanup(func() { c.Close(); topo.Close() })
	return topo, c
}

func TestSparesPolicyAndReplaceUsesThem(t *testing.T) {
	topo, c := fleet(t, 2)
	must(t, c.SetSpares("rack", 2))
	if l, k := c.SparePolicy(); l != "rack" || k != 2 {
		t.Fatalf("policy %q %d", l, k)
	}
	if n, _ := c.SpareCount("rack", 0); c.SpareTotalCount() != 4 || n != 2 {
		t.Fatalf("spares %d, rack 0 %d", c.SpareTotalCount(), n)
	}
	for node, want := range map[string]bool{"block0-rack0-node17": true, "block0-rack0-node16": true,
		"block0-rack0-node15": false} {
		if got, err := c.NodeIsSpare(node); err != nil || got != want {
			t.Fatalf("%s spare %v, %v", node, got, err)
		}
	}
	if c.FreeTotalCount() != 144-16 {
		t.Fatalf("free %d", c.FreeTotalCount())
	}
	if s, job, err := c.DeviceState(4 * 17); err != nil || s != DeviceSpare || job != "" {
		t.Fatalf("device 68: %v %q %v", s, job, err)
	}
	var devs []uint32
	for n := uint32(0); n < 4; n++ {
		devs = append(devs, topo.NodeDevices(n)...)
	}
	o := DefaultJobOptions()
	o.Shape = &Request{Count: 16, GroupSize: 4, Required: "rack"}
	must(t, c.AssignWith("j", devs, &o))
	failed := topo.NodeDevices(2)
	must(t, c.SetDown(failed, true))
	p, err := c.Replace("j", failed)
	must(t, err)
	defer p.Close()
	if len(p.Replaced) != 4 {
		t.Fatalf("replaced %v", p.Replaced)
	}
	for _, r := range p.Replaced {
		if n := topo.DeviceNode(r.Replacement); n != 16 && n != 17 || topo.DeviceNode(r.Failed) != 2 {
			t.Fatalf("%d replaced by %d on node %d: not a spare", r.Failed, r.Replacement, n)
		}
	}
	must(t, c.Commit(p))
	// The policy marks a new spare in rack 0 once one is taken.
	if n, _ := c.SpareCount("rack", 0); n != 2 {
		t.Fatalf("rack 0 has %d spares after the repair", n)
	}
	must(t, c.Check())
	must(t, c.SetSpares("", 0))
	if l, k := c.SparePolicy(); c.SpareTotalCount() != 0 || l != "" || k != 0 {
		t.Fatalf("after clearing: %d spares, policy %q %d", c.SpareTotalCount(), l, k)
	}

	must(t, c.SetNodeSpare("block0-rack1-node5", true))
	if ok, _ := c.NodeIsSpare("block0-rack1-node5"); !ok || c.SpareTotalCount() != 1 {
		t.Fatal("own mark not kept")
	}
	must(t, c.SetNodeSpare("block0-rack1-node5", false))
	err = c.SetNodeSpare("block0-rack0-node0", true)
	wantErr(t, err, ErrExists, "spare.node", "held by job 'j'")
	wantErr(t, c.SetSpares("node", 1), ErrInvalid, "spares.level 2 is not a level above the node")
	wantErr(t, c.SetSpares("rack", 19), ErrInvalid, "spares.k 19 exceeds the 18 nodes of the largest rack")
	wantErr(t, c.SetSpares("row", 1), ErrNotFound, `"row"`)
	wantErr(t, c.SetNodeSpare("zz", true), ErrNotFound, `"zz"`)
}

func TestPartitionsInTheAnswer(t *testing.T) {
	topo, c := fleet(t, 2)
	if l, n := c.PartitionPolicy(); l != "" || n != 0 {
		t.Fatalf("policy before %q %d", l, n)
	}
	must(t, c.SetPartitions("rack", 2048))
	if l, n := c.PartitionPolicy(); l != "rack" || n != 2048 {
		t.Fatalf("policy %q %d", l, n)
	}
	p, err := c.Place(Request{ID: "a", Count: 16, Tenant: "ta"})
	must(t, err)
	defer p.Close()
	if len(p.Partitions) != 1 {
		t.Fatalf("partitions %+v", p.Partitions)
	}
	part := p.Partitions[0]
	nodes := nodesOf(c, p.Devices)
	sort.Strings(nodes)
	if part.Channel != 0 || !reflect.DeepEqual(part.Nodes, nodes) || len(nodes) != 4 ||
		!strings.HasPrefix(nodes[0], strings.ReplaceAll(part.Path, "/", "-")+"-") {
		t.Fatalf("partition %+v for nodes %v", part, nodes)
	}
	must(t, c.Commit(p))
	if job, ch, err := c.NodePartition(part.Nodes[0]); err != nil || job != "a" || ch != 0 {
		t.Fatalf("node %s in %q channel %d, %v", part.Nodes[0], job, ch, err)
	}
	q, err := c.Place(Request{ID: "b", Count: 8, Tenant: "ta"})
	must(t, err)
	if len(q.Partitions) != 1 || q.Partitions[0].Channel != 1 {
		t.Fatalf("the second job's partitions %+v", q.Partitions)
	}
	q.Close()
	must(t, c.Release("a"))
	_, _, err = c.NodePartition(part.Nodes[0])
	wantErr(t, err, ErrNotFound, "in no partition")
	must(t, c.Check())
	// One node: no partition.
	one, err := c.Place(Request{Count: 4, Required: "node"})
	must(t, err)
	if one.Partitions != nil {
		t.Fatalf("a one-node job's partitions %+v", one.Partitions)
	}
	one.Close()

	wantErr(t, c.SetPartitions("rack", 0), ErrInvalid, "partitions.channels 0")
	wantErr(t, c.SetPartitions("block", 8), ErrInvalid, "no domain whose fabric is NVLink")
	must(t, c.SetPartitions("", 0))
	if l, _ := c.PartitionPolicy(); l != "" {
		t.Fatalf("partitions still on at %q", l)
	}
	_ = topo
}

func TestPartitionsKeepTenantsApart(t *testing.T) {
	topo, c := fleet(t, 1)
	must(t, c.SetPartitions("rack", 2048))
	ta := DefaultJobOptions()
	ta.Tenant = "ta"
	first6 := append(topo.NodeDevices(0), topo.NodeDevices(1)[:2]...) // node 1 keeps 2 free
	must(t, c.AssignWith("a", first6, &ta))
	for n := uint32(2); n < 18; n++ {
		d := topo.NodeDevices(n)
		if n == 17 {
			d = d[:2]
		}
		must(t, c.AssignWith("f"+topo.NodeName(n), d, &ta))
	}
	p, err := c.Place(Request{ID: "b", Count: 2, Tenant: "tb"})
	must(t, err)
	if got := nodesOf(c, p.Devices); !reflect.DeepEqual(got, []string{"block0-rack0-node17"}) {
		t.Fatalf("tenant tb got %v, not the node outside a's partition", got)
	}
	p.Close()
	must(t, c.AssignWith("g", topo.NodeDevices(17)[2:], &ta))
	_, err = c.Place(Request{ID: "b", Count: 2, Tenant: "tb"})
	wantErr(t, err, ErrFragmented, "NVLink partition rules")
	own, err := c.Place(Request{ID: "a2", Count: 2, Tenant: "ta"})
	must(t, err)
	if got := nodesOf(c, own.Devices); !reflect.DeepEqual(got, []string{"block0-rack0-node1"}) ||
		own.Partitions != nil {
		t.Fatalf("tenant ta got %v, partitions %+v", got, own.Partitions)
	}
	own.Close()
	tb := DefaultJobOptions()
	tb.Tenant = "tb"
	wantErr(t, c.AssignWith("x", topo.NodeDevices(1)[2:3], &tb), ErrBusy,
		"breaks the NVLink partition rules")
}

func TestServiceCapsKeepReplicasSpread(t *testing.T) {
	_, c := fleet(t, 4)
	must(t, c.SetServiceCaps("web", &ServiceCaps{Level: "rack", MaxPerDomain: 1}))
	if caps, err := c.ServiceCaps("web"); err != nil || *caps != (ServiceCaps{Level: "rack", MaxPerDomain: 1}) {
		t.Fatalf("caps %+v, %v", caps, err)
	}
	if caps, err := c.ServiceCaps("other"); err != nil || caps != nil {
		t.Fatalf("caps of a service without any %+v, %v", caps, err)
	}
	replica := func(i int) Request {
		return Request{ID: "web-" + string(rune('0'+i)), Count: 8, Required: "rack", Service: "web"}
	}
	for i := 0; i < 4; i++ {
		p, err := c.Place(replica(i))
		must(t, err)
		must(t, c.Commit(p))
		p.Close()
	}
	for r := uint32(0); r < 4; r++ {
		if n, err := c.ServiceReplicas("web", "rack", r); err != nil || n != 1 {
			t.Fatalf("rack %d holds %d replicas, %v", r, n, err)
		}
	}
	if n, _ := c.ServiceReplicas("web", "", 0); n != 4 {
		t.Fatalf("%d replicas in all", n)
	}
	_, err := c.Place(replica(4))
	wantErr(t, err, ErrBusy, "service web keeps out of 4 racks at its cap of 1")
	if o, _ := c.JobOptions("web-0"); o.Shape == nil || o.Shape.Service != "web" {
		t.Fatalf("web-0's shape %+v", o.Shape)
	}
	sp, err := c.Savepoint()
	must(t, err)
	must(t, c.SetServiceCaps("web", nil))
	p, err := c.Place(replica(4))
	must(t, err)
	must(t, c.Commit(p))
	p.Close()
	if n, _ := c.ServiceReplicas("web", "", 0); n != 5 {
		t.Fatalf("%d replicas without caps", n)
	}
	must(t, c.Rollback(sp))
	if caps, _ := c.ServiceCaps("web"); caps == nil || caps.MaxPerDomain != 1 {
		t.Fatalf("the rollback did not put the caps back: %+v", caps)
	}
	if n, _ := c.ServiceReplicas("web", "", 0); n != 4 {
		t.Fatalf("%d replicas after the rollback", n)
	}
	wantErr(t, c.SetServiceCaps("web", &ServiceCaps{Level: "row", MaxPerDomain: 1}), ErrInvalid,
		"caps.level 'row' is not a level")
	wantErr(t, c.SetServiceCaps("web", &ServiceCaps{Level: "rack", MaxPercent: 150}), ErrInvalid,
		"caps.max_percent 150 is not in [0, 100]")
	_, err = c.ServiceReplicas("web", "rack", 9)
	wantErr(t, err, ErrInvalid, "rack 9")
}

// twoTight is twoRacks with x2 and x4 full, x1 holding 2 free devices and x3 3: best fit takes
// x1 (the tightest) for one device required in a node, a mix of 2-device jobs per node x3
// (x1 would lose its one pair, x3 none).
func twoTight(t *testing.T) (*Topology, *Cluster) {
	topo, c := twoRacks(t)
	for job, names := range map[string][]string{"x1": {"x1/0", "x1/1"}, "x2": {"x2/0", "x2/1", "x2/2", "x2/3"},
		"x3": {"x3/0"}, "x4": {"x4/0", "x4/1", "x4/2", "x4/3"}} {
		d, err := topo.Devices(names...)
		must(t, err)
		must(t, c.Assign("held-"+job, d))
	}
	return topo, c
}

func TestPlaceMixDecides(t *testing.T) {
	_, c := twoTight(t)
	node := func() (string, Rule) {
		p, err := c.Place(Request{Count: 1, Required: "node"})
		must(t, err)
		defer p.Close()
		return nodesOf(c, p.Devices)[0], p.DecidedBy
	}
	if n, _ := node(); n != "x1" {
		t.Fatalf("best fit took %s", n)
	}
	must(t, c.SetPlaceMix([]JobShape{{Devices: 2, Level: "node", Weight: 1}}))
	if n, rule := node(); n != "x3" || rule != RuleFit {
		t.Fatalf("the mix took %s, decided by %v", n, rule)
	}
	must(t, c.SetPlaceMix([]JobShape{})) // no mix: best fit again
	if n, _ := node(); n != "x1" {
		t.Fatalf("without a mix: %s", n)
	}
	must(t, c.SetPlaceMix(nil)) // the default mix
	wantErr(t, c.SetPlaceMix([]JobShape{{Devices: 2, Level: "node", Weight: -1}}), ErrInvalid, "weight")
	wantErr(t, c.SetPlaceMix([]JobShape{{Devices: 2, Level: "row", Weight: 1}}), ErrNotFound, "row")
	if RuleFit.String() != "fit" || Rule(42).String() != "Rule(42)" {
		t.Fatal("rule names")
	}
}

func TestCopy(t *testing.T) {
	topo, c := twoRacks(t)
	d, _ := topo.Devices("x1/0", "x1/1")
	must(t, c.Assign("a", d))
	must(t, c.SetServiceCaps("web", &ServiceCaps{Level: "rack", MaxPerDomain: 1}))
	cp, err := c.Copy()
	must(t, err)
	defer cp.Close()
	if cp.Fingerprint() != c.Fingerprint() || !reflect.DeepEqual(cp.Jobs(), []string{"a"}) {
		t.Fatalf("copy %x jobs %v, original %x", cp.Fingerprint(), cp.Jobs(), c.Fingerprint())
	}
	must(t, cp.Release("a"))
	if !reflect.DeepEqual(c.Jobs(), []string{"a"}) || cp.Fingerprint() == c.Fingerprint() {
		t.Fatal("a change of the copy reached the original")
	}
	// A placement made on the original is not the copy's to commit.
	p, err := c.Place(Request{ID: "b", Count: 2})
	must(t, err)
	defer p.Close()
	wantErr(t, cp.Commit(p), ErrInvalid)
	must(t, cp.Check())
}

// Caps over a failure-domain kind: one replica per power feed, whatever the racks.
func TestServiceCapsOverPowerFeeds(t *testing.T) {
	_, c := twoRacks(t)
	must(t, c.SetServiceCaps("web", &ServiceCaps{FDKind: "power", FDMaxPerDomain: 1}))
	if caps, err := c.ServiceCaps("web"); err != nil || *caps != (ServiceCaps{FDKind: "power", FDMaxPerDomain: 1}) {
		t.Fatalf("caps %+v, %v", caps, err)
	}
	feeds := map[string]bool{}
	for i := 0; i < 2; i++ {
		p, err := c.Place(Request{ID: fmt.Sprintf("web-%d", i), Count: 4, Required: "node", Service: "web"})
		must(t, err)
		must(t, c.Commit(p))
		fd, err := c.Topology().DeviceFailureDomain("power", p.Devices[0])
		must(t, err)
		feeds[fd] = true
		p.Close()
	}
	if len(feeds) != 2 {
		t.Fatalf("two replicas on feeds %v, not one each", feeds)
	}
	for _, fd := range []string{"pdu-a", "pdu-b"} {
		if n, err := c.ServiceFDReplicas("web", "power", fd); err != nil || n != 1 {
			t.Fatalf("%s holds %d replicas, %v", fd, n, err)
		}
	}
	_, err := c.Place(Request{ID: "web-2", Count: 4, Required: "node", Service: "web"})
	wantErr(t, err, ErrBusy, "service web keeps out of power 'pdu-a' and 1 more at its cap of 1")
	_, err = c.ServiceFDReplicas("web", "power", "pdu-z")
	wantErr(t, err, ErrNotFound, "pdu-z")
	wantErr(t, c.SetServiceCaps("web", &ServiceCaps{FDKind: "cooling", FDMaxPerDomain: 1}), ErrInvalid,
		"cooling")
}
