// SPDX-License-Identifier: MIT

package topoplace

import (
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
)

var llama70B = Model{Params: 70.6e9, Layers: 80, Heads: 64, KVHeads: 8, HeadDim: 128, Hidden: 8192}

// h100Fleet is one rack of nodes of gpus H100s of 80 GB each, named h0, h1, ...
func h100Fleet(t *testing.T, nodes, gpus uint) *Topology {
	t.Helper()
	b, err := NewTopologyBuilder("rack", "node")
	must(t, err)
	defer b.Close()
	for i := uint(0); i < nodes; i++ {
		must(t, b.AddNodeWith("h"+string(rune('0'+i)), []string{"r0"}, gpus,
			&NodeOptions{Model: "H100", MemoryGB: 80}))
	}
	topo, err := b.Build()
	must(t, err)
	t.Cleanup(func() { topo.Close() })
	return topo
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6*math.Max(1, math.Abs(b)) }

// The hand computation of docs/serving.md: 70B in fp16 needs 141.2 GB of weights; at tp 4 a
// GPU of 80 GB x 0.9 - 2 GB = 70 GB usable holds 35.3 GB of them and leaves 34.7 GB for the KV
// cache, 81920 bytes a token (2 x 80 layers x 2 KV heads x 128 x 2 bytes).
func TestSizeModel(t *testing.T) {
	topo := h100Fleet(t, 2, 8)
	s, err := SizeModel(topo, llama70B, DefaultSizingOptions(8192))
	must(t, err)
	defer s.Close()
	var shapes [][2]uint32
	for _, o := range s.Options {
		shapes = append(shapes, [2]uint32{o.TP, o.GPUs})
	}
	if !reflect.DeepEqual(shapes, [][2]uint32{{4, 4}, {8, 8}}) {
		t.Fatalf("options (tp, gpus) %v", shapes)
	}
	a, b := s.Options[0], s.Options[1]
	if a.Model != "H100" || a.NVLinkDomain != 8 || a.PP != 1 || a.Replicas != 1 ||
		!near(a.WeightsGB, 35.3) || !near(a.KVGB, 34.7) || a.TensorLevel != "node" {
		t.Fatalf("tp 4: %+v", a)
	}
	if a.KVTokenBytes != 81920 || a.Tokens != 423583 || a.Sequences != 51 {
		t.Fatalf("tp 4 holds %v B/token, %v tokens, %d sequences", a.KVTokenBytes, a.Tokens, a.Sequences)
	}
	if b.KVTokenBytes != 40960 || b.Tokens != 1278076 || b.Sequences != 156 {
		t.Fatalf("tp 8 holds %v B/token, %v tokens, %d sequences", b.KVTokenBytes, b.Tokens, b.Sequences)
	}
	if !near(a.TokensPerSGPU, float64(a.Sequences)/(a.StepUs*1e-6)/float64(a.TP)) {
		t.Fatalf("tokens/s per GPU %v for a step of %v us", a.TokensPerSGPU, a.StepUs)
	}

	o := DefaultSizingOptions(8192)
	o.Goal = MostKVPerGPU
	kv, err := SizeModel(topo, llama70B, o)
	must(t, err)
	defer kv.Close()
	if kv.Options[0].TP != 8 {
		t.Fatalf("most KV per GPU ranks tp %d first", kv.Options[0].TP)
	}
	// 100 sequences: tp 8 holds 156 in one replica, tp 4 needs two of 51.
	o = DefaultSizingOptions(8192)
	o.Sequences = 100
	hundred, err := SizeModel(topo, llama70B, o)
	must(t, err)
	defer hundred.Close()
	if r := hundred.Options; len(r) != 2 || r[0].Replicas != 1 || r[0].TP != 8 || r[1].Replicas != 2 || r[1].GPUs != 8 {
		t.Fatalf("100 sequences: %+v", r)
	}
}

func TestSizeModelRefusals(t *testing.T) {
	topo := h100Fleet(t, 2, 8)
	o := DefaultSizingOptions(8192)
	o.MemUtilisation = 1.5
	_, err := SizeModel(topo, llama70B, o)
	wantErr(t, err, ErrInvalid, "options.mem_utilisation 1.5 is outside")
	bad := llama70B
	bad.KVHeads = 6
	_, err = SizeModel(topo, bad, DefaultSizingOptions(8192))
	wantErr(t, err, ErrInvalid, "model.heads 64 is not a multiple of model.kv_heads 6")
	_, err = SizeModel(topo, llama70B, DefaultSizingOptions(0))
	wantErr(t, err, ErrInvalid, "context")
	_, err = SizeModel(h100Fleet(t, 4, 1), llama70B, DefaultSizingOptions(8192))
	wantErr(t, err, ErrInfeasible, "weights need 141.2 GB per GPU at tp 1 x pp 1")

	if HBMGbps("H200") != 4800 || HBMGbps("h100") != 3350 || HBMGbps("nope") != 0 {
		t.Fatalf("HBM table: %v %v %v", HBMGbps("H200"), HBMGbps("h100"), HBMGbps("nope"))
	}
	b, _ := NewTopologyBuilder("node")
	defer b.Close()
	must(t, b.AddNodeWith("x", nil, 8, &NodeOptions{Model: "X1", MemoryGB: 96}))
	x1, err := b.Build()
	must(t, err)
	defer x1.Close()
	_, err = SizeModel(x1, llama70B, DefaultSizingOptions(8192))
	wantErr(t, err, ErrInfeasible, "no HBM bandwidth is known")
	o = DefaultSizingOptions(8192)
	o.HBM = map[string]float64{"X1": 4000, "Y2": 100}
	s, err := SizeModel(x1, llama70B, o)
	must(t, err)
	if len(s.Options) == 0 || s.Options[0].Model != "X1" {
		t.Fatalf("with the HBM figure: %+v", s.Options)
	}
	s.Close()
	s.Close() // twice is safe
	c, _ := NewCluster(x1)
	defer c.Close()
	_, chosen, _, err := c.PlaceSizing(s, Request{ID: "m", Count: 1})
	wantErr(t, err, ErrInvalid, "nil or closed")
	if chosen != -1 {
		t.Fatalf("chosen %d for a closed sizing", chosen)
	}
}

func TestPlaceSizingTakesTheBestOptionThatFits(t *testing.T) {
	topo := h100Fleet(t, 2, 8)
	c, _ := NewCluster(topo)
	defer c.Close()
	for job, node := range map[string]string{"a": "h0", "b": "h1"} {
		d, _ := topo.Devices(node+"/0", node+"/1", node+"/2", node+"/3")
		must(t, c.Assign(job, d))
	}
	o := DefaultSizingOptions(8192)
	o.Goal = MostKVPerGPU
	s, err := SizeModel(topo, llama70B, o)
	must(t, err)
	defer s.Close()
	p, chosen, why, err := c.PlaceSizing(s, Request{ID: "llama", Count: 1, Tenant: "t1"})
	must(t, err)
	defer p.Close()
	if chosen != 1 || s.Options[chosen].TP != 4 || len(p.Devices) != 4 || len(nodesOf(c, p.Devices)) != 1 {
		t.Fatalf("chose #%d, devices %v", chosen, p.DeviceNames())
	}
	if len(why) != 1 || !strings.HasPrefix(why[0], "#0 H100 tp 8 x pp 1, 8 GPUs: fragmented") {
		t.Fatalf("why %q", why)
	}
	must(t, c.Commit(p))
	if o, _ := c.JobOptions("llama"); o.Tenant != "t1" || o.Shape == nil || o.Shape.GroupSize != 4 ||
		o.Shape.Select.Model != "H100" {
		t.Fatalf("the placed job %+v, shape %+v", o, o.Shape)
	}
	d, _ := topo.Devices("h1/4", "h1/5", "h1/6")
	must(t, c.Assign("d", d))
	_, chosen, why, err = c.PlaceSizing(s, Request{ID: "again", Count: 1})
	wantErr(t, err, ErrBusy)
	if chosen != -1 || len(why) != 2 {
		t.Fatalf("none placed: chosen %d, why %q", chosen, why)
	}
}

// A prefill/decode service on 8 NVL72 racks: groups of 2 prefill instances of 4 GPUs and 4
// decode instances of 8, one group per rack; scaled from 4 to 6 groups, then repaired after
// a rack goes down (docs/serving.md).
func TestPlacePDSpreadsScalesAndRepairs(t *testing.T) {
	topo, c := fleet(t, 8)
	r := DefaultPDRequest("chat")
	r.Tenant, r.Groups = "t1", 4
	r.Prefill, r.PrefillDevices, r.Decode, r.DecodeDevices = 2, 4, 4, 8
	r.InstanceLevel, r.Locality, r.SpreadLevel, r.MaxPerDomain = "rack", "rack", "rack", 1
	rackOf := func(d uint32) string {
		n := topo.DeviceName(d)
		return n[:strings.Index(n, "-node")]
	}
	groupRacks := func() map[string]string { // group -> its one rack
		out := map[string]string{}
		for _, job := range c.Jobs() {
			g := strings.Split(job, "/")[1]
			devs, _ := c.JobDevices(job)
			for _, d := range devs {
				if rk, ok := out[g]; ok && rk != rackOf(d) {
					t.Fatalf("group %s spans %s and %s", g, rk, rackOf(d))
				}
				out[g] = rackOf(d)
			}
		}
		racks := map[string]bool{}
		for _, rk := range out {
			if racks[rk] {
				t.Fatalf("two groups in rack %s: %v", rk, out)
			}
			racks[rk] = true
		}
		return out
	}

	res, err := c.PlacePD(r)
	must(t, err)
	if len(res.Instances) != 24 || len(groupRacks()) != 4 || res.Locality != "rack" {
		t.Fatalf("%d instances, racks %v, locality %q", len(res.Instances), groupRacks(), res.Locality)
	}
	var pairs []int
	for _, in := range res.Instances {
		switch {
		case in.Prefill && in.Pair != 2:
			t.Fatalf("prefill %s serves %d decoders", in.Job, in.Pair)
		case !in.Prefill:
			pairs = append(pairs, int(in.Pair))
		}
		if want := map[bool]int{true: 4, false: 8}[in.Prefill]; len(in.Devices) != want {
			t.Fatalf("%s has %d devices", in.Job, len(in.Devices))
		}
	}
	sort.Ints(pairs)
	if !reflect.DeepEqual(pairs, []int{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}) {
		t.Fatalf("decode pairs %v", pairs)
	}
	if again, err := c.PlacePD(r); err != nil || len(again.Instances) != 0 {
		t.Fatalf("every group exists: %v %v", again, err)
	}
	r.Groups = 6
	res, err = c.PlacePD(r)
	must(t, err)
	if len(res.Instances) != 12 || len(groupRacks()) != 6 {
		t.Fatalf("scaled out: %d instances, racks %v", len(res.Instances), groupRacks())
	}
	// Rack of g1 goes down; its group is released and placed again elsewhere.
	hit, _ := c.JobDevices("chat/g1/p0")
	lost := rackOf(hit[0])
	var down []uint32
	for d := uint32(0); d < uint32(topo.DeviceCount()); d++ {
		if rackOf(d) == lost {
			down = append(down, d)
		}
	}
	must(t, c.SetDown(down, true))
	n, err := c.ReleasePDFailed("chat", 6)
	must(t, err)
	if n != 1 {
		t.Fatalf("released %d groups", n)
	}
	res, err = c.PlacePD(r)
	must(t, err)
	racks := groupRacks()
	if len(res.Instances) != 6 || res.Instances[0].Group != 1 || racks["g1"] == lost || len(racks) != 6 {
		t.Fatalf("repair: %d instances, racks %v (lost %s)", len(res.Instances), racks, lost)
	}
	// 9 groups do not fit the healthy racks: nothing of the call stays.
	jobs := len(c.Jobs())
	r.Groups = 9
	_, err = c.PlacePD(r)
	wantErr(t, err, ErrInfeasible, "group 7 of service chat fits no rack")
	if len(c.Jobs()) != jobs {
		t.Fatalf("a failed call left %d jobs (was %d)", len(c.Jobs()), jobs)
	}
	r.Groups, r.Locality = 6, "row"
	_, err = c.PlacePD(r)
	wantErr(t, err, ErrInvalid, "request.locality 'row' is not a level")
	_, err = c.PlacePD(PDRequest{Groups: 1})
	wantErr(t, err, ErrInvalid, "service")
}

// "auto" locality chooses the level from the modelled KV hand-off and says how.
func TestPlacePDAutoLocality(t *testing.T) {
	_, c := fleet(t, 2)
	r := DefaultPDRequest("auto")
	r.Prefill, r.PrefillDevices, r.Decode, r.DecodeDevices = 1, 4, 1, 4
	r.Locality, r.KVTokenBytes, r.PromptTokens = PDLocalityAuto, 327680, 4096
	res, err := c.PlacePD(r)
	must(t, err)
	// The rack's NVLink: 3.4 us + 327680 B x 4096 tokens / (900 GB/s x 4 devices) = 376.2 us;
	// InfiniBand across racks is far slower.
	want := 3.4 + 327680.0*4096/(900e3*4)
	if res.Locality != "rack" || math.Abs(res.HandoffUs-want) > 0.05 || !strings.HasPrefix(res.Decision, "auto: g0: rack 376.2 us, none ") ||
		!strings.Contains(res.Decision, "tried "+res.Locality+": placed") {
		t.Fatalf("locality %q, hand-off %v us, decision %q", res.Locality, res.HandoffUs, res.Decision)
	}
	r.PromptTokens = 0
	r.Service = "auto2"
	_, err = c.PlacePD(r)
	wantErr(t, err, ErrInvalid, "prompt_tokens")
}
