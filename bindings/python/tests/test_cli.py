# SPDX-License-Identifier: MIT
"""The command-line tool as a user runs it: one JSON document on stdout, the exit status of the
spec, never a traceback."""

import json
import os
import subprocess

import pytest

from conftest import python
from test_scenario import INVALID, doc


def run(tmp_path, command, document, *extra, stdin=None):
    if document is not None:
        path = tmp_path / "scenario.json"
        path.write_text(document if isinstance(document, str) else json.dumps(document))
        arg = str(path)
    else:
        arg = "-"
    env = dict(os.environ)
    p = subprocess.run([python(), "-m", "topoplace", command, arg] + list(extra),
                       input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=env, timeout=60)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def run_json(tmp_path, command, document, *extra, stdin=None):
    p = run(tmp_path, command, document, *extra, stdin=stdin)
    out = json.loads(p.stdout)          # exactly one JSON document
    assert isinstance(out, dict)
    return p.returncode, out


@pytest.mark.parametrize("i", range(0, len(INVALID), 4))
def test_invalid_documents(tp, tmp_path, i):
    d, cmd, where = INVALID[i]
    rc, out = run_json(tmp_path, cmd, d)
    assert rc == 2 and out["status"] == "invalid"
    assert out["message"].startswith(where.split(":")[0]), out["message"]


@pytest.mark.parametrize("text,fragment", [
    ("{", "not a valid JSON document"),
    ("", "not a valid JSON document"),
    ("[1]", "must be an object"),
    ('{"version": 1, "topology": {"levels": ["node"], "nodes": []}}', "topology.nodes"),
])
def test_malformed_input(tp, tmp_path, text, fragment):
    rc, out = run_json(tmp_path, "frag", text)
    assert rc == 2 and out["status"] == "invalid" and fragment in out["message"]


def test_missing_file_and_bad_usage(tp, tmp_path):
    p = subprocess.run([python(), "-m", "topoplace", "frag", str(tmp_path / "nope.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    out = json.loads(p.stdout)
    assert p.returncode == 2 and "cannot read" in out["message"]
    p = subprocess.run([python(), "-m", "topoplace", "plaec", "x.json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    out = json.loads(p.stdout)
    assert p.returncode == 2 and out["status"] == "invalid" and "usage" in out["message"]
    assert "Traceback" not in p.stderr


def test_stdin(tp, tmp_path):
    rc, out = run_json(tmp_path, "frag", None, stdin=json.dumps(doc()))
    assert rc == 0 and out["status"] == "ok"


def test_frag_output(tp, tmp_path):
    rc, out = run_json(tmp_path, "frag", doc())
    assert rc == 0
    assert set(out) == {"status", "levels", "free", "down", "cordoned"}
    assert list(out["levels"]) == ["block", "rack", "node"]
    # 20 devices: a holds x1/1-2, b x1/0 + x3/0-1, x4/7 down, x2 cordoned
    assert (out["free"], out["down"], out["cordoned"]) == (20 - 5 - 1 - 4, 1, 4)
    node = out["levels"]["node"]
    assert node["domains"] == 4 and node["fully_free"] == 0 and node["largest_free"] == 7


def test_text_format(tp, tmp_path):
    p = run(tmp_path, "frag", doc(), "--format", "text")
    assert p.returncode == 0 and "fragmentation" in p.stdout and "devices:" in p.stdout
    p = run(tmp_path, "place", doc(request__count=10), "--format", "text")
    assert p.returncode == 2 and p.stdout.startswith("invalid input: request.count")


def test_place_output(tp, tmp_path):
    d = doc()
    del d["request"]["colocate"], d["request"]["select"], d["request"]["exclusive"]
    rc, out = run_json(tmp_path, "place", d)
    assert rc in (0, 1), out
    if rc == 0:
        pl = out["placement"]
        assert out["status"] == "ok" and out["job"] == "new" and len(pl["devices"]) == 8
        assert sum(pl["nodes"].values()) == 8
        assert set(pl["domains"]) == {"block", "rack"}
        assert set(out["score"]["levels_spanned"]) == {"block", "rack", "node"}
    else:
        assert set(out) == {"status", "message", "fit"}
    p = run(tmp_path, "place", d, "--format", "text")
    assert p.returncode == rc and "legend" in p.stdout


def test_not_placeable(tp, tmp_path):
    rc, out = run_json(tmp_path, "place", doc(request={"count": 1000}))
    assert rc == 1 and out["status"] in ("infeasible", "busy")
    assert out["fit"]["needed"] == 1000 and out["fit"]["level"] == "block"


def test_defrag(tp, tmp_path):
    d = doc(request={"id": "n", "count": 4})
    rc, out = run_json(tmp_path, "defrag", d)
    # it fits already: the plan is the single place step, cost 0
    assert rc == 0 and out["status"] == "ok", out
    steps = out["plan"]["steps"]
    assert [s["action"] for s in steps] == ["place"] and steps[0]["job"] == "n"
    assert steps[0]["to"] == out["placement"]["devices"]
    assert (out["plan"]["moved_jobs"], out["plan"]["moved_devices"], out["plan"]["cost_s"]) \
        == (0, 0, 0)
    rc, out = run_json(tmp_path, "defrag", doc(request={"count": 1000}))
    assert rc == 1 and out["status"] == "none" and out["message"]


def test_hwloc_nodes(tp, tmp_path):
    from conftest import SHARED
    d = doc(topology__nodes__0__hwloc="dgx2.xml")
    del d["topology"]["nodes"][0]["gpus"]
    rc, out = run_json(tmp_path, "frag", d)
    assert rc == 2 and out["message"].startswith("topology.nodes[0].hwloc: cannot read")
    xml = os.path.join(SHARED, "hwloc", "nvidiaDGX2.xml")
    if not os.path.isfile(xml):
        pytest.skip("../shared not found")
    os.symlink(xml, str(tmp_path / "dgx2.xml"))
    # the DGX-2 has 16 GPUs; x1's jobs sit on devices 0-2 and the failure domain lists x1
    rc, out = run_json(tmp_path, "place", doc(topology__nodes__0__hwloc="dgx2.xml",
                                              topology__nodes__0__gpus=16,
                                              request={"count": 2, "select": {"nodes": ["x1"]}}))
    assert rc == 0, out
    assert all(dv.startswith("x1/") for dv in out["placement"]["devices"])
    rc, out = run_json(tmp_path, "frag", doc(topology__nodes__0__hwloc="dgx2.xml",
                                             topology__nodes__0__gpus=8))
    assert rc == 2 and out["message"].startswith("topology.nodes[0].gpus: 8, but the hwloc")


def test_gpu_nic_pairs_extension(tp, tmp_path):
    """x_gpu_nic_pairs (a CLI extension of scenario-v1): on tests/data/two-switch-nics.xml,
    every GPU pairs with the RDMA NIC mlx5_0 (a plain Ethernet port such as eth0 is never
    paired while the node has an RDMA NIC): one GPU per node, so two nodes."""
    xml = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "data",
                       "two-switch-nics.xml")
    os.symlink(os.path.abspath(xml), str(tmp_path / "n.xml"))
    d = {"version": 1,
         "topology": {"levels": ["rack", "node"],
                      "nodes": [{"name": "n0", "path": ["r0"], "hwloc": "n.xml"},
                                {"name": "n1", "path": ["r0"], "hwloc": "n.xml"}]},
         "request": {"count": 2, "x_gpu_nic_pairs": True}}
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0, out
    assert out["placement"]["devices"] == ["n0/0", "n1/0"]
    assert out["placement"]["x_nics"] == ["mlx5_0", "mlx5_0"]
    d["request"]["count"] = 3
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 1 and out["status"] == "infeasible"
    assert "request.gpu_nic_pairs" in out["message"]
    d["request"]["x_gpu_nic_pairs"] = False  # without pairs: any 3 GPUs, no x_nics
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and "x_nics" not in out["placement"]
    d["request"]["x_gpu_nic_pairs"] = "yes"
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 2 and out["message"].startswith("request.x_gpu_nic_pairs")


# Bounds on the input (issue 19 item 7): none of these may end as exit 3 or hang.

def run_in_process(tmp_path, command, document, *extra):
    """cli.main() in this process (no interpreter start-up): the exit status and the answer."""
    import io
    from topoplace import cli
    path = tmp_path / "scenario.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    out = io.StringIO()
    rc = cli.main([command, str(path)] + list(extra), stdout=out)
    return rc, json.loads(out.getvalue())


def test_input_larger_than_the_limit_is_refused(tp):
    p = subprocess.run([python(), "-m", "topoplace", "place", "/dev/zero",
                        "--max-input-bytes", "4096"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=60)
    out = json.loads(p.stdout)
    assert p.returncode == 2 and out["status"] == "invalid"
    assert out["message"] == ("/dev/zero is larger than 4096 bytes, the most a scenario may "
                              "have (--max-input-bytes sets it)")


def test_input_limit_applies_to_stdin_and_is_a_bound_not_a_target(tp, tmp_path):
    text = json.dumps(doc())
    p = run(tmp_path, "frag", None, "--max-input-bytes", str(len(text) - 1), stdin=text)
    out = json.loads(p.stdout)
    assert p.returncode == 2 and out["message"].startswith("standard input is larger than")
    rc, out = run_json(tmp_path, "frag", None, "--max-input-bytes", str(len(text)), stdin=text)
    assert rc == 0 and out["status"] == "ok"


@pytest.mark.parametrize("flag,value", [("--max-input-bytes", "0"), ("--max-input-bytes", "x"),
                                        ("--timeout", "0"), ("--timeout", "nan"),
                                        ("--timeout", "-1")])
def test_bad_bounds_are_usage_errors(tp, tmp_path, flag, value):
    rc, out = run_in_process(tmp_path, "frag", doc(), flag, value)
    assert rc == 2 and out["status"] == "invalid"
    assert out["message"].startswith("usage: argument %s: %s: %r" % (flag, flag, value))


def test_timeout_ends_a_read_that_never_finishes(tp, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(str(fifo))                 # no writer: open() blocks for ever
    p = subprocess.run([python(), "-m", "topoplace", "place", str(fifo), "--timeout", "0.5"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=60)
    out = json.loads(p.stdout)
    assert p.returncode == 2 and out == {
        "status": "invalid",
        "message": "timeout: the command did not finish within 0.5 s (--timeout)"}


def test_timeout_does_not_touch_a_command_that_finishes(tp, tmp_path):
    rc, out = run_in_process(tmp_path, "frag", doc(), "--timeout", "60")
    assert rc == 0 and out["status"] == "ok"


@pytest.mark.parametrize("change,cmd,message", [
    ({"topology__nodes__1__name": "x\udc80"}, "frag",
     'topology.nodes[1].name: a node name "x\\udc80" holds a lone surrogate (\\udc80), '
     'which is not a character'),
    ({"request__id": "\udc80"}, "place",
     'request.id: a job id "\\udc80" holds a lone surrogate (\\udc80), which is not a '
     'character'),
    ({"policy__min_priority_gap": 2 ** 31}, "defrag",
     "policy.min_priority_gap: 2147483648 is above the limit 2147483647"),
])
def test_values_the_library_cannot_take_are_invalid_input_not_internal_errors(
        tp, tmp_path, change, cmd, message):
    rc, out = run_in_process(tmp_path, cmd, json.dumps(doc(**change)))
    assert (rc, out) == (2, {"status": "invalid", "message": message})


def test_a_build_without_the_importer_says_so(tp, monkeypatch, tmp_path):
    import io
    from topoplace import _native, cli
    real = _native.has
    monkeypatch.setattr(_native, "has", lambda n: n != "tp_scenario_from_json" and real(n))
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc()))
    out = io.StringIO()
    assert cli.main(["frag", str(p)], stdout=out) == 3
    answer = json.loads(out.getvalue())
    assert answer["status"] == "unsupported" and "scenario importer" in answer["message"]


def _two_racks(rack_fabric):
    """Two racks of two 4-GPU nodes; rack r1 with a fabric of its own (x_domain_fabric)."""
    return {"version": 1,
            "topology": {"levels": ["rack", "node"],
                         "fabric": {"rack": {"kind": "ethernet", "gbps": 25, "latency_us": 10}},
                         "x_domain_fabric": {"rack": {"r1": rack_fabric}},
                         "nodes": [{"name": "x%d" % i, "path": ["r%d" % (i // 2)], "gpus": 4}
                                   for i in range(4)]},
            "request": {"count": 8, "required": "rack"}}


def test_score_says_which_rule_decided(tp, tmp_path):
    fast = {"kind": "nvlink", "gbps": 400, "latency_us": 1}
    d = _two_racks(fast)
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0, out
    # both racks empty: a tie on every rule, the lowest index (r0) wins
    assert out["score"]["decided_by"] == "tie" and "x_step_us" not in out["score"]
    assert out["placement"]["domains"]["rack"] == {"r0": 8}
    # with x_comm the modelled step time decides: r1's own fabric is faster
    d["request"]["x_comm"] = {"tp": 8, "tp_bytes": 64 << 20, "tp_msgs": 16}
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0, out
    assert out["score"]["decided_by"] == "step"
    assert out["placement"]["domains"]["rack"] == {"r1": 8}
    assert out["score"]["x_step_us"] > 0
    # the same fabric on both racks: the step times tie too
    d = _two_racks({"kind": "ethernet", "gbps": 25, "latency_us": 10})
    d["request"]["x_comm"] = {"tp": 8, "tp_bytes": 64 << 20, "tp_msgs": 16}
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and out["score"]["decided_by"] == "tie", out
    # one GPU held in r0: it cannot hold 8 any more, only r1 can, and nothing was compared
    d["state"] = {"jobs": [{"id": "a", "devices": {"x0": 1}}]}
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and out["score"]["decided_by"] == "none", out


def _straddled_pair():
    """Two 4-GPU nodes of one rack (NVLink inside a node, InfiniBand between them) with two
    GPUs of each held, and a request for 4 tensor-parallel GPUs: any 4 free ones straddle the
    nodes, far below the efficiency of one node."""
    return {"version": 1,
            "topology": {"levels": ["rack", "node"],
                         "fabric": {"node": {"kind": "nvlink", "gbps": 900, "latency_us": 3.4},
                                    "rack": {"kind": "ib", "gbps": 50, "latency_us": 10}},
                         "nodes": [{"name": n, "path": ["r0"], "gpus": 4} for n in "ab"]},
            "state": {"jobs": [{"id": "x", "devices": {"a": 2, "b": 2}}]},
            "request": {"count": 4, "x_comm": {"tp": 4, "compute_us": 1e5,
                                               "tp_bytes": 64 << 20, "tp_msgs": 128}}}


def test_x_comm_min_efficiency_is_a_floor(tp, tmp_path):
    from topoplace import scenario
    d = _straddled_pair()
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0, out
    # the efficiency of that answer, from the library's cost model
    sc = scenario.parse(d, "place")
    eff = tp.efficiency(sc.topology, out["placement"]["devices"],
                        tp.StepModel(**d["request"]["x_comm"]))
    assert eff < 0.5
    # a floor above it: busy (exit 1), the library's message with the figure reached
    d["request"]["x_comm"]["min_efficiency"] = 0.5
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 1 and out["status"] == "busy", out
    assert out["message"].startswith("busy: request.comm.min_efficiency 0.5: the best placement "
                                     "now reaches %.3f (step " % eff), out["message"]
    # a floor below it: placed, and the step time is the model's
    d["request"]["x_comm"]["min_efficiency"] = round(eff * 0.99, 6)
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and out["status"] == "ok", out
    assert out["score"]["x_step_us"] > 0
    # once a node is free the job keeps to it, at full efficiency
    d["request"]["x_comm"]["min_efficiency"] = 1
    d["state"]["jobs"] = []
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and list(out["placement"]["nodes"]) in (["a"], ["b"]), out
    # a value outside [0, 1] is invalid input naming the field, the value and why
    d["request"]["x_comm"]["min_efficiency"] = 1.5
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 2 and out == {"status": "invalid", "message":
                               "request.x_comm.min_efficiency: 1.5 is above 1 (the lowest "
                               "placement efficiency the job accepts, from 0 to 1)"}, out
