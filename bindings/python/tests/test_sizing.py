# SPDX-License-Identifier: MIT
"""Sizing a model for serving, from Python and from the CLI (docs/serving.md): the figures are
the hand computations of the docs."""

import json
import os

import pytest

from test_cli import run, run_json

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "data", "sizing")

LLAMA = dict(params=70.6e9, layers=80, heads=64, kv_heads=8, head_dim=128, hidden=8192)


def h100_fleet(tp, nodes=2, gpus=8):
    b = tp.TopologyBuilder(["rack", "node"])
    for i in range(nodes):
        b.add_node("h%d" % i, ["r0"], gpus, model="H100", memory_gb=80)
    return b.build()


def test_llama70b_on_two_hgx_nodes(tp):
    opts = tp.size_model(h100_fleet(tp), tp.Model(**LLAMA), context=8192)
    assert [(o.tp, o.gpus) for o in opts] == [(4, 4), (8, 8)]
    a, b = opts
    assert a.model == "H100" and a.nvlink_domain == 8
    assert a.weights_gb == pytest.approx(35.3)
    assert a.kv_gb == pytest.approx(34.7)
    assert (a.kv_token_bytes, a.tokens, a.sequences) == (81920.0, 423583.0, 51)
    assert (b.kv_token_bytes, b.tokens, b.sequences) == (40960.0, 1278076.0, 156)
    assert a.tokens_per_s_gpu == pytest.approx(a.sequences / (a.step_us * 1e-6) / a.tp)


def test_goals_rank_differently(tp):
    topo, m = h100_fleet(tp), tp.Model(**LLAMA)
    assert tp.size_model(topo, m, context=8192, goal="most_kv_per_gpu")[0].tp == 8
    assert tp.size_model(topo, m, context=8192, goal="fewest_gpus")[0].tp == 4
    with pytest.raises(tp.InvalidArgument, match="goal 'cheapest' is not one of"):
        tp.size_model(topo, m, context=8192, goal="cheapest")


def test_errors_name_the_field(tp):
    topo = h100_fleet(tp)
    with pytest.raises(tp.InvalidArgument, match=r"options.mem_utilisation 1.5 is outside"):
        tp.size_model(topo, tp.Model(**LLAMA), context=8192, mem_utilisation=1.5)
    with pytest.raises(tp.InvalidArgument, match=r"model.heads 64 is not a multiple of "
                                                 r"model.kv_heads 6"):
        tp.size_model(topo, tp.Model(**dict(LLAMA, kv_heads=6)), context=8192)
    with pytest.raises(tp.InvalidArgument, match=r"model.layers 'x' is not an integer"):
        tp.size_model(topo, tp.Model(**dict(LLAMA, layers="x")), context=8192)
    with pytest.raises(tp.InvalidArgument, match=r"options.context -1 is not an integer"):
        tp.size_model(topo, tp.Model(**LLAMA), context=-1)
    with pytest.raises(tp.Infeasible, match=r"weights need 141.2 GB per GPU at tp 1 x pp 1"):
        tp.size_model(h100_fleet(tp, 4, 1), tp.Model(**LLAMA), context=8192)


def test_hbm_table_and_override(tp):
    assert tp.hbm_gbps("H200") == 4800.0
    assert tp.hbm_gbps("nope") == 0.0
    b = tp.TopologyBuilder(["node"])
    b.add_node("x", (), 8, model="X1", memory_gb=96)
    topo = b.build()
    with pytest.raises(tp.Infeasible, match="no HBM bandwidth is known"):
        tp.size_model(topo, tp.Model(**LLAMA), context=8192)
    assert tp.size_model(topo, tp.Model(**LLAMA), context=8192, hbm={"X1": 4000})


def test_cli_size(tp, tmp_path):
    with open(os.path.join(DATA, "llama70b-h100-gb200.json")) as f:
        document = f.read()
    rc, out = run_json(tmp_path, "size", document)
    assert rc == 0, out
    assert out["model"] == "llama-3.1-70b"
    # 100 sequences: tp 8 holds 156 in one replica, tp 4 needs two of 51: 8 GPUs each.
    assert [(o["tp"], o["replicas"], o["gpus"]) for o in out["options"]] == [(8, 1, 8),
                                                                              (4, 2, 8)]
    p = run(tmp_path, "size", document, "--format", "text")
    assert p.returncode == 0
    assert "2 ways to serve it" in p.stdout and "1278076" in p.stdout


@pytest.mark.parametrize("change, where", [
    (lambda d: d["model"].pop("layers"), "model.layers: missing"),
    (lambda d: d["model"].update(weights="fp7"), "model.weights: 'fp7' is not one of"),
    (lambda d: d["serving"].update(goal=3), "serving.goal: 3 is not one of"),
    (lambda d: d["serving"].update(cross_domain="yes"), "serving.cross_domain"),
    (lambda d: d["serving"].update(mem_utilisation=0), "serving.mem_utilisation 0 is outside"),
    (lambda d: d.update(extra=1), "extra: unknown key"),
    (lambda d: d["topology"].update(levels=[]), "topology.levels"),
])
def test_cli_size_invalid(tp, tmp_path, change, where):
    with open(os.path.join(DATA, "llama70b-h100-gb200.json")) as f:
        d = json.load(f)
    change(d)
    rc, out = run_json(tmp_path, "size", d)
    assert rc == 2, out
    assert out["status"] == "invalid" and where in out["message"], out


def test_cli_size_infeasible(tp, tmp_path):
    with open(os.path.join(DATA, "llama70b-h100-gb200.json")) as f:
        d = json.load(f)
    d["serving"]["sequences"] = 10000
    rc, out = run_json(tmp_path, "size", d)
    assert rc == 1 and out["status"] == "infeasible"
    assert "the fleet has 16" in out["message"]


def test_place_model_takes_the_best_option_that_fits(tp):
    topo = h100_fleet(tp)
    c = tp.Cluster(topo)
    c.assign("a", ["h0/%d" % i for i in range(4)])
    c.assign("b", ["h1/%d" % i for i in range(4)])
    pl, opt, why = tp.place_model(c, tp.Model(**LLAMA), 8192, tp.Request(count=1, id="llama"),
                                  goal="most_kv_per_gpu")
    assert pl.status == "ok" and opt.tp == 4 and len(pl.devices) == 4
    assert len({d.split("/")[0] for d in pl.devices}) == 1
    assert len(why) == 1 and why[0].startswith("#0 H100 tp 8 x pp 1, 8 GPUs: fragmented")
    c.assign("c", ["h0/%d" % i for i in range(4, 8)])
    c.assign("d", ["h1/%d" % i for i in range(4, 7)])
    pl, opt, why = tp.place_model(c, tp.Model(**LLAMA), 8192)
    assert pl.status == "busy" and opt is None and len(why) == 2


def test_place_pd_spreads_scales_and_repairs(tp):
    topo = tp.Topology.nvl72(blocks=1, racks_per_block=8)
    c = tp.Cluster(topo)
    kw = dict(prefill=(2, 4), decode=(4, 8), instance_level="rack", locality="rack",
              spread_level="rack", max_per_domain=1, tenant="t1")

    def racks():
        by_group = {}
        for job in c.jobs:
            g = job.split("/")[1]
            rack = {"/".join(topo.device_name(d).split("-")[:2]) for d in c.job_devices(job)}
            by_group.setdefault(g, set()).update(rack)
        assert all(len(r) == 1 for r in by_group.values()), by_group
        return [next(iter(r)) for r in by_group.values()]

    placed = tp.place_pd(c, "chat", 4, **kw)
    assert len(placed) == 24 and len(set(racks())) == 4
    pairs = [p.pair for p in placed if not p.prefill]
    assert sorted(pairs) == [0] * 8 + [1] * 8
    assert all(p.pair == 2 for p in placed if p.prefill)
    assert tp.place_pd(c, "chat", 4, **kw) == []
    assert len(tp.place_pd(c, "chat", 6, **kw)) == 12 and len(set(racks())) == 6
    hit = c.job_devices("chat/g1/p0")[0]
    rack = "-".join(topo.device_name(hit).split("-")[:2])
    c.set_down([d for d in range(topo.device_count)
                if topo.device_name(d).startswith(rack + "-")])
    assert tp.release_pd_failed(c, "chat", 6) == 1
    again = tp.place_pd(c, "chat", 6, **kw)
    assert {p.group for p in again} == {1} and len(set(racks())) == 6
    # 9 groups: g6 fits the last empty healthy rack, g7 only the rack that is down; nothing
    # of the call stays
    jobs = sorted(c.jobs)
    with pytest.raises(tp.Infeasible, match=r"group 7 of service chat fits no rack \(1 tried; "
                                            r"the last, block0/rack1: prefill: infeasible"):
        tp.place_pd(c, "chat", 9, **kw)
    assert sorted(c.jobs) == jobs
    with pytest.raises(tp.InvalidArgument, match="request.locality 'row' is not a level"):
        tp.place_pd(c, "chat", 6, **dict(kw, locality="row"))


def _state_of(placed, base_jobs):
    jobs = list(base_jobs)
    for p in placed:
        by_node = {}
        for d in p["devices"]:
            node, idx = d.split("/")
            by_node.setdefault(node, []).append(int(idx))
        jobs.append({"id": p["job"], "devices": by_node})
    return jobs


def test_cli_pd_places_then_repairs(tp, tmp_path):
    with open(os.path.join(DATA, "..", "serving", "chat-nvl72.json")) as f:
        d = json.load(f)
    rc, out = run_json(tmp_path, "pd", d)
    assert rc == 0, out
    assert len(out["placed"]) == 24 and out["released"] == 0
    racks = {p["group"]: {x.split("-node")[0] for x in p["devices"]} for p in out["placed"]}
    assert all(len(r) == 1 for r in racks.values()) and len({min(r) for r in racks.values()}) == 4
    assert [p["pair"] for p in out["placed"] if p["role"] == "decode"][:4] == [0, 1, 0, 1]
    # the state as it then is, rack 1 down: repair moves group 1 to a rack it does not use
    d["state"] = {"jobs": _state_of(out["placed"], d["state"]["jobs"]),
                  "down": ["block0-rack1-node%d" % i for i in range(18)]}
    d["service"]["repair"] = True
    rc, out2 = run_json(tmp_path, "pd", d)
    assert rc == 0, out2
    assert out2["released"] == 1 and {p["group"] for p in out2["placed"]} == {1}
    assert all("rack1-" not in x and "rack0-" not in x and "rack2-" not in x
               and "rack3-" not in x for p in out2["placed"] for x in p["devices"])
    p = run(tmp_path, "pd", d, "--format", "text")
    assert p.returncode == 0 and "1 group(s) released for repair" in p.stdout


@pytest.mark.parametrize("change, where", [
    (lambda d: d["service"].pop("groups"), "service.groups: missing"),
    (lambda d: d["service"].update(prefill={"instances": 0, "devices": 4}),
     "service.prefill.instances: 0 is not an integer from 1"),
    (lambda d: d["service"].update(locality="row"),
     "service: request.locality 'row' is not a level of the topology"),
    (lambda d: d["service"].update(repair="yes"), "service.repair: \"yes\" is not true or false"),
    (lambda d: d.update(request={}), "request: unknown key"),
])
def test_cli_pd_invalid(tp, tmp_path, change, where):
    with open(os.path.join(DATA, "..", "serving", "chat-nvl72.json")) as f:
        d = json.load(f)
    change(d)
    rc, out = run_json(tmp_path, "pd", d)
    assert rc == 2 and where in out["message"], out


def test_cli_pd_not_placed(tp, tmp_path):
    with open(os.path.join(DATA, "..", "serving", "chat-nvl72.json")) as f:
        d = json.load(f)
    d["service"]["groups"] = 9
    rc, out = run_json(tmp_path, "pd", d)
    assert rc == 1 and out["status"] == "busy", out
    assert "every rack holds 1 groups of service chat" in out["message"]


LLAMA_KV_TOKEN = 2 * 80 * 8 * 128 * 2  # bytes of KV cache a token, Llama-3.1-70B in fp16


def test_place_pd_auto_locality(tp):
    """auto keeps the groups in a rack on NVL72 (NVLink 900 GB/s against 50 between racks),
    and falls back to no locality when a slower rack fabric makes packing pointless."""
    topo = tp.Topology.nvl72(blocks=1, racks_per_block=2)
    c = tp.Cluster(topo)
    kw = dict(prefill=(2, 4), decode=(4, 8), instance_level="rack", locality="auto",
              kv_token_bytes=LLAMA_KV_TOKEN, prompt_tokens=8192)
    placed = tp.place_pd(c, "chat", 2, **kw)
    assert placed.locality == "rack" and len(placed) == 12
    assert placed.handoff_us == pytest.approx(3.4 + 8192 * LLAMA_KV_TOKEN / (900e3 * 4))
    assert placed.decision.startswith("auto: g0: rack 749.1 us, none 13435.8 us")
    assert placed.decision.endswith("tried rack: placed")
    b = tp.TopologyBuilder(["rack", "node"])
    for r in range(2):
        for n in range(4):
            b.add_node("r%dn%d" % (r, n), ["r%d" % r], 4)
    b.set_fabric("rack", "nvlink", 40, 5)
    b.set_fabric("cluster", "ib", 50, 5)
    slow = tp.Cluster(b.build())
    placed = tp.place_pd(slow, "chat", 1, prefill=(1, 4), decode=(1, 4), locality="auto",
                         kv_token_bytes=LLAMA_KV_TOKEN, prompt_tokens=8192)
    assert placed.locality is None
    assert placed.decision == "auto: g0: none 13426.8 us, rack 16782.2 us; tried none: placed"
    with pytest.raises(tp.InvalidArgument, match="request.locality 'auto' needs the "
                                                 "hand-off's size"):
        tp.place_pd(c, "x", 1, prefill=(1, 1), decode=(1, 1), locality="auto")
    with pytest.raises(tp.InvalidArgument, match="request.prompt_tokens -1 is not"):
        tp.place_pd(c, "x", 1, prefill=(1, 1), decode=(1, 1), prompt_tokens=-1)


def test_cli_pd_auto(tp, tmp_path):
    with open(os.path.join(DATA, "..", "serving", "chat-nvl72.json")) as f:
        d = json.load(f)
    d["service"].update(locality="auto", kv_token_bytes=LLAMA_KV_TOKEN, prompt_tokens=8192)
    rc, out = run_json(tmp_path, "pd", d)
    assert rc == 0, out
    assert out["locality"] == "rack" and out["handoff_us"] == 749.1
    assert out["decision"].startswith("auto: g0 in block0/rack0: rack 749.1 us")
    d["service"]["handoff_slack"] = -1
    rc, out = run_json(tmp_path, "pd", d)
    assert rc == 2 and "service.handoff_slack: -1 is not a number >= 0" in out["message"]

