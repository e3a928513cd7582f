// SPDX-License-Identifier: MIT

package topoplace

/*
#include <stdlib.h>
#include <topoplace-sizing.h>
*/
import "C"

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"unsafe"
)

// Model is a transformer model as sizing needs it (tp_model_desc). Zero WeightBytes and
// KVBytes are 2 (fp16); ActiveParams 0 is Params.
type Model struct {
	Params       float64 // parameters in all (70.6e9 for Llama-3.1-70B)
	ActiveParams float64 // parameters read per token (a MoE's active ones); 0: Params
	WeightBytes  float64 // bytes per parameter: 2 (fp16/bf16), 1 (fp8), 0.5 (fp4); 0: 2
	KVBytes      float64 // bytes per KV-cache element; 0: 2
	Layers       uint32
	Heads        uint32
	KVHeads      uint32 // key/value heads (fewer than Heads with GQA)
	HeadDim      uint32
	Hidden       uint32 // hidden size, the activations exchanged per token
}

// SizeGoal is what the ranking of SizeModel puts first (tp_size_goal).
type SizeGoal int

// The goals.
const (
	FewestGPUs     SizeGoal = C.TP_SIZE_FEWEST_GPUS     // then best throughput per GPU
	MostKVPerGPU   SizeGoal = C.TP_SIZE_MOST_KV_PER_GPU // then fewest GPUs
	BestThroughput SizeGoal = C.TP_SIZE_BEST_THROUGHPUT // decode tokens/s per GPU
)

// SizingOptions are the serving target and the knobs of the memory model
// (tp_sizing_options). Start from DefaultSizingOptions: every field is passed as it is.
type SizingOptions struct {
	Context        uint32  // tokens of one sequence, prompt and output (> 0)
	Sequences      uint32  // concurrent sequences to hold in all (0: one replica)
	TokensPerS     float64 // decode throughput to reach in all (0: no goal)
	Goal           SizeGoal
	MemUtilisation float64 // share of memory the server uses, in (0, 1]
	OverheadGB     float64 // GB per GPU kept for activations and the runtime (>= 0)
	MaxTP          uint32  // largest tensor degree tried (0: 64)
	MaxPP          uint32  // largest pipeline degree tried (0: 1)
	CrossDomain    bool    // a tensor group may leave its NVLink domain
	// HBM gives device models' HBM bandwidth in GB/s, overriding the built-in table
	// (HBMGbps).
	HBM map[string]float64
}

// DefaultSizingOptions are TP_SIZING_OPTIONS_INIT's with the context given: 90% of memory
// usable, 2 GB overhead per GPU, fewest GPUs first.
func DefaultSizingOptions(context uint32) SizingOptions {
	var o C.tp_sizing_options
	C.tp_sizing_options_init(&o, C.TP_SIZING_OPTIONS_VERSION)
	return SizingOptions{Context: context, Goal: SizeGoal(o.goal),
		MemUtilisation: float64(o.mem_utilisation), OverheadGB: float64(o.overhead_gb)}
}

// HBMGbps is the HBM bandwidth of a well-known device model from the library's table (0 when
// it does not know it).
func HBMGbps(model string) float64 {
	cs := C.CString(model)
	defer C.free(unsafe.Pointer(cs))
	return float64(C.tp_sizing_hbm_gbps(cs))
}

// SizingOption is one way to serve the model, copied out of the library.
type SizingOption struct {
	Model         string  // device model
	MemoryGB      float64 // memory of one device
	TP, PP        uint32  // tensor and pipeline degrees
	Replicas      uint32  // replicas needed for the target
	GPUs          uint32  // Replicas x TP x PP
	NVLinkDomain  uint32  // devices of the NVLink domain a tensor group stays in
	WeightsGB     float64 // weights per GPU
	KVGB          float64 // KV-cache room per GPU
	KVTokenBytes  float64 // KV-cache bytes per token per GPU
	Tokens        float64 // tokens of KV cache one replica holds
	Sequences     uint32  // sequences of Context tokens one replica holds
	StepUs        float64 // modelled decode step with every sequence it holds in the batch
	TokensPerSGPU float64 // decode tokens/s per GPU at that batch
	ReplicaLevel  string  // smallest level one of whose domains holds a replica ("": none)
	TensorLevel   string  // the same for a tensor group
}

// Sizing is the ranked answer of SizeModel: Options, best first. It keeps the library's
// result for PlaceSizing; Close frees it (the Go fields stay readable).
type Sizing struct {
	Options []SizingOption
	p       *C.tp_sizing
	topo    *Topology
}

// Close frees the library's result. Safe to call twice; after it PlaceSizing refuses it.
func (s *Sizing) Close() error {
	if s != nil && s.p != nil {
		C.tp_sizing_destroy(s.p)
		s.p = nil
		runtime.SetFinalizer(s, nil)
	}
	return nil
}

// SizeModel lists and ranks the ways to serve m on the devices of t (tp_size_model()): every
// device model with a known memory, tensor and pipeline degree that holds a sequence of
// o.Context tokens, with the memory left for the KV cache, the sequences held and the
// modelled decode step (docs/serving.md gives the memory model). Not for a scheduler's
// per-request path: call it when a service is defined and keep the answer. A figure out of
// range is ErrInvalid naming the field; no option is ErrInfeasible with each model's reason.
func SizeModel(t *Topology, m Model, o SizingOptions) (*Sizing, error) {
	defer runtime.KeepAlive(t)
	var cm C.tp_model_desc
	C.tp_model_desc_init(&cm, C.TP_MODEL_DESC_VERSION)
	cm.params, cm.active_params = C.double(m.Params), C.double(m.ActiveParams)
	if m.WeightBytes != 0 {
		cm.weight_bytes = C.double(m.WeightBytes)
	}
	if m.KVBytes != 0 {
		cm.kv_bytes = C.double(m.KVBytes)
	}
	cm.layers, cm.heads, cm.kv_heads = C.unsigned(m.Layers), C.unsigned(m.Heads), C.unsigned(m.KVHeads)
	cm.head_dim, cm.hidden = C.unsigned(m.HeadDim), C.unsigned(m.Hidden)

	var mem cmem
	defer mem.free()
	var co C.tp_sizing_options
	C.tp_sizing_options_init(&co, C.TP_SIZING_OPTIONS_VERSION)
	co.context, co.sequences = C.unsigned(o.Context), C.unsigned(o.Sequences)
	co.tokens_per_s, co.goal = C.double(o.TokensPerS), C.tp_size_goal(o.Goal)
	co.mem_utilisation, co.overhead_gb = C.double(o.MemUtilisation), C.double(o.OverheadGB)
	co.max_tp, co.max_pp = C.unsigned(o.MaxTP), C.unsigned(o.MaxPP)
	co.cross_domain = cbool(o.CrossDomain)
	if n := len(o.HBM); n > 0 {
		names := make([]string, 0, n)
		for k := range o.HBM {
			names = append(names, k)
		}
		sort.Strings(names) // a map's order is random; the library's answer must not be
		models := unsafe.Slice((**C.char)(mem.alloc(uintptr(n), unsafe.Sizeof((*C.char)(nil)))), n)
		gbps := unsafe.Slice((*C.double)(mem.alloc(uintptr(n), 8)), n)
		for i, k := range names {
			models[i], gbps[i] = mem.str(k), C.double(o.HBM[k])
		}
		co.hbm_models, co.hbm_gbps, co.nhbm = &models[0], &gbps[0], C.size_t(n)
	}
	var p *C.tp_sizing
	rc := C.tp_size_model(t.p, &cm, &co, &p)
	if rc != 0 {
		msg := "cannot size the model"
		if p != nil {
			msg = C.GoString(C.tp_sizing_errmsg(p))
			C.tp_sizing_destroy(p)
		}
		return nil, fail(rc, msg)
	}
	s := &Sizing{p: p, topo: t}
	runtime.SetFinalizer(s, (*Sizing).Close)
	for i := C.size_t(0); i < C.tp_sizing_count(p); i++ {
		g := C.tp_sizing_get(p, i)
		s.Options = append(s.Options, SizingOption{Model: gostr(g.model),
			MemoryGB: float64(g.memory_gb), TP: uint32(g.tp), PP: uint32(g.pp),
			Replicas: uint32(g.replicas), GPUs: uint32(g.gpus),
			NVLinkDomain: uint32(g.nvlink_domain), WeightsGB: float64(g.weights_gb),
			KVGB: float64(g.kv_gb), KVTokenBytes: float64(g.kv_token_bytes),
			Tokens: float64(g.tokens), Sequences: uint32(g.sequences),
			StepUs: float64(g.step_us), TokensPerSGPU: float64(g.tokens_per_s_gpu),
			ReplicaLevel: gostr(g.replica_level), TensorLevel: gostr(g.tensor_level)})
	}
	return s, nil
}

// PlaceSizing places the best-ranked option of s that fits the cluster now, as one request
// made from tmpl (tp_size_place(): its Count, GroupSize, GroupLevel and Select's model and
// memory are replaced; for a pipeline without slices, a slice per replica is added). It
// returns the placement (Commit it), the rank of the option placed, and for each better-ranked
// option why it was not placed ("#0 H100 tp 8 x pp 1, 8 GPUs: fragmented: ..."). When none
// is placed the error is the best-ranked option's (ErrBusy when any was only busy), chosen is
// -1 and why still lists every option. Read-only on the cluster.
func (c *Cluster) PlaceSizing(s *Sizing, tmpl Request) (p *Placement, chosen int, why []string, err error) {
	defer runtime.KeepAlive(c)
	defer runtime.KeepAlive(s)
	if s == nil || s.p == nil {
		return nil, -1, nil, fail(C.TP_EINVAL, "PlaceSizing: the sizing is nil or closed")
	}
	const whyLen = 1 << 16
	cwhy := (*C.char)(C.malloc(whyLen))
	defer C.free(unsafe.Pointer(cwhy))
	var out *C.tp_placement
	var ch C.size_t
	rc := tmpl.withC(func(req *C.tp_request) C.int {
		return C.tp_size_place(c.p, s.p, req, &out, &ch, cwhy, whyLen)
	})
	for _, w := range strings.Split(C.GoString(cwhy), "\n") {
		if w != "" {
			why = append(why, w)
		}
	}
	if rc != 0 {
		msg := strings.Join(why, "; ")
		if out != nil {
			if m := C.GoString(C.tp_placement_errmsg(out)); m != "" {
				msg = m
			}
			C.tp_placement_destroy(out)
		}
		return nil, -1, why, fail(rc, msg)
	}
	p, err = wrapPlacement(c, out, 0)
	if err != nil {
		return nil, -1, why, err
	}
	return p, int(ch), why, nil
}

// ---- prefill/decode groups ----------------------------------------------------------------

// PDLocalityAuto is the PDRequest.Locality that lets the library choose the level from the
// modelled KV hand-off time.
const PDLocalityAuto = C.TP_PD_LOCALITY_AUTO

// PDRequest is a disaggregated (prefill/decode) service (tp_pd_request): Groups groups of
// Prefill prefill and Decode decode instances, each group in one domain of Locality, the
// groups spread over the domains of SpreadLevel with at most MaxPerDomain in one. Start from
// DefaultPDRequest: every field is passed as it is.
type PDRequest struct {
	Service        string  // the service's id, its jobs' prefix
	Tenant         string  // "": "default"
	Groups         uint32  // groups the service should have in all
	Prefill        uint32  // prefill instances per group
	PrefillDevices uint32  // devices per prefill instance (its tensor degree)
	Decode         uint32  // decode instances per group
	DecodeDevices  uint32  // devices per decode instance
	InstanceLevel  string  // level one instance lies in ("": the node level)
	Locality       string  // level whose one domain holds a group, "" (none) or PDLocalityAuto
	SpreadLevel    string  // level whose domains the groups spread over ("": none)
	MaxPerDomain   uint32  // most groups in one domain of SpreadLevel (0: no cap)
	SelectModel    string  // only devices of this model ("": any)
	KVTokenBytes   float64 // KV-cache bytes of one token, whole model ("auto" needs it)
	PromptTokens   uint32  // tokens a request hands over ("auto" needs it)
	HandoffSlack   float64 // "auto": how much slower a looser locality may be and win
}

// DefaultPDRequest is TP_PD_REQUEST_INIT's for a service: one group of one prefill and one
// decode instance of one device, no locality, no spread, a hand-off slack of 10%.
func DefaultPDRequest(service string) PDRequest {
	var r C.tp_pd_request
	C.tp_pd_request_init(&r, C.TP_PD_REQUEST_VERSION)
	return PDRequest{Service: service, Groups: uint32(r.groups), Prefill: uint32(r.prefill),
		PrefillDevices: uint32(r.prefill_devices), Decode: uint32(r.decode),
		DecodeDevices: uint32(r.decode_devices), HandoffSlack: float64(r.handoff_slack)}
}

// PDInstance is one instance a PlacePD call placed and assigned (a running job).
type PDInstance struct {
	Job     string // "<service>/g<k>/p<i>" or "<service>/g<k>/d<j>"
	Group   uint32
	Prefill bool   // a prefill instance; false: a decode instance
	Index   uint32 // among its group's prefill or decode instances
	// Pair: for a decode instance, the prefill instance of its group that hands it the KV
	// cache; for a prefill instance, the number of decode instances it serves.
	Pair    uint32
	Devices []uint32
}

// PDResult is what PlacePD placed: the instances, and the locality they were kept to with its
// modelled KV hand-off (and, for "auto", how it was decided).
type PDResult struct {
	Instances []PDInstance
	Locality  string  // the level a group stays in ("": none)
	HandoffUs float64 // modelled hand-off of one request at that locality, µs
	Decision  string  // "auto": each candidate's figure and the outcome ("" otherwise)
}

// PlacePD places the groups of a prefill/decode service that are missing and assigns their
// instances (tp_pd_place()): scaling out keeps the ratio and the spread, and after a failure
// ReleasePDFailed then PlacePD repairs it. All or nothing: on failure the cluster is unchanged
// and the error names the group and why.
func (c *Cluster) PlacePD(r PDRequest) (*PDResult, error) {
	defer runtime.KeepAlive(c)
	var m cmem
	defer m.free()
	var cr C.tp_pd_request
	C.tp_pd_request_init(&cr, C.TP_PD_REQUEST_VERSION)
	cr.service, cr.tenant = m.str(r.Service), m.str(r.Tenant)
	cr.groups, cr.prefill, cr.prefill_devices = C.unsigned(r.Groups), C.unsigned(r.Prefill),
		C.unsigned(r.PrefillDevices)
	cr.decode, cr.decode_devices = C.unsigned(r.Decode), C.unsigned(r.DecodeDevices)
	cr.instance_level, cr.locality = m.str(r.InstanceLevel), m.str(r.Locality)
	cr.spread_level, cr.max_per_domain = m.str(r.SpreadLevel), C.unsigned(r.MaxPerDomain)
	cr.select_model = m.str(r.SelectModel)
	cr.kv_token_bytes, cr.prompt_tokens = C.double(r.KVTokenBytes), C.unsigned(r.PromptTokens)
	cr.handoff_slack = C.double(r.HandoffSlack)
	var res *C.tp_pd_result
	rc := C.tp_pd_place(c.p, &cr, &res)
	if res == nil {
		return nil, fail(rc, fmt.Sprintf("pd %q: cannot place the service", r.Service))
	}
	defer C.tp_pd_result_destroy(res)
	if rc != 0 {
		return nil, fail(rc, C.GoString(C.tp_pd_result_errmsg(res)))
	}
	var h C.double
	out := &PDResult{Locality: gostr(C.tp_pd_result_locality(res, &h)),
		Decision: gostr(C.tp_pd_result_decision(res))}
	out.HandoffUs = float64(h)
	for i := C.size_t(0); i < C.tp_pd_result_count(res); i++ {
		in := C.tp_pd_result_get(res, i)
		out.Instances = append(out.Instances, PDInstance{Job: gostr(in.job),
			Group: uint32(in.group), Prefill: in.prefill != 0, Index: uint32(in.index),
			Pair: uint32(in.pair), Devices: append([]uint32(nil),
				unsafe.Slice((*uint32)(unsafe.Pointer(in.devices)), int(in.ndevices))...)})
	}
	return out, nil
}

// ReleasePDFailed releases every group (of the service's first groups) with an instance on a
// device that is down, so that PlacePD places it again; it returns how many it released.
func (c *Cluster) ReleasePDFailed(service string, groups uint32) (uint32, error) {
	defer runtime.KeepAlive(c)
	cs := C.CString(service)
	defer C.free(unsafe.Pointer(cs))
	var n C.unsigned
	err := c.err(C.tp_pd_release_failed(c.p, cs, C.unsigned(groups), &n))
	return uint32(n), err
}
