# SPDX-License-Identifier: MIT
"""`python3 -m topoplace import slurm` and Topology.from_slurm: topology.conf and topology.yaml,
nodes and jobs in the JSON Slurm 23.11 prints (tests/data/slurm, written after Slurm's REST API
reference), every refusal as one JSON object naming the file and the line or JSON path. The
round trip through a real slurmctld is tests/slurmctld/roundtrip.py (suite slurmctld)."""

import json
import os
import subprocess

import pytest

from conftest import HERE, python

DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "data", "slurm"))


def imp(*args):
    p = subprocess.run([python(), "-m", "topoplace", "import"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, json.loads(p.stdout), p.stderr


def d(name):
    return os.path.join(DATA, name)


def test_topology_conf_nodes_and_jobs_make_a_scenario(tp, tmp_path):
    code, doc, err = imp("slurm", "--topology", d("h100-tree.conf"), "--nodes",
                         d("scontrol-nodes-v0.0.40.json"), "--jobs", d("squeue-v0.0.40.json"))
    assert code == 0, doc
    topo = doc["topology"]
    assert topo["levels"] == ["switch1", "switch0", "node"]
    assert [n["name"] for n in topo["nodes"]] == ["gpu%03d" % i for i in range(1, 9)]
    assert topo["nodes"][4] == {"name": "gpu005", "path": ["spine", "leaf1"], "gpus": 8}
    st = doc["state"]
    assert st["down"] == ["gpu004"]                       # DOWN+NOT_RESPONDING
    assert st["cordoned"] == ["gpu003", "gpu007"]          # DRAIN; MAINTENANCE+RESERVED
    assert st["jobs"] == [
        {"id": "4101", "devices": {"gpu005": list(range(8)), "gpu006": list(range(8))}},
        {"id": "4102", "devices": {"gpu002": [0, 1, 2, 3]}}]   # CPU-only and pending left out
    assert "login1" in err and "left out" in err           # a node in no switch: warned
    # the scenario is one the CLI answers: 16 + 4 GPUs held, gpu004 down, 2 nodes cordoned
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    p = subprocess.run([python(), "-m", "topoplace", "frag", str(path)],
                       stdout=subprocess.PIPE, universal_newlines=True)
    frag = json.loads(p.stdout)
    assert p.returncode == 0 and frag["down"] == 8 and frag["cordoned"] == 16
    assert frag["free"] == 64 - 8 - 16 - 20


def test_topology_yaml_by_name_and_gpus_per_node(tp):
    code, doc, _ = imp("slurm", "--topology", d("topology-three.yaml"), "--topology-name",
                       "racks", "--gpus-per-node", "4")
    assert code == 0, doc
    assert doc["topology"]["levels"] == ["agg16", "block", "node"]
    assert doc["topology"]["nodes"][0] == {"name": "gx01", "path": ["r[1-4]", "r1"], "gpus": 4}
    assert "state" not in doc


def test_warnings_go_to_stderr(tp, tmp_path):
    conf = tmp_path / "fat.conf"
    conf.write_text("SwitchName=l0 Nodes=n[1-2]\nSwitchName=l1 Nodes=n[3-4]\n"
                    "SwitchName=sp0 Switches=l[0-1]\nSwitchName=sp1 Switches=l[0-1]\n")
    code, doc, err = imp("slurm", "--topology", str(conf), "--gpus-per-node", "8")
    assert code == 0
    assert err.splitlines() == [
        "warning: line 4: switch 'l0' has several parents: 'sp0' (line 3) and 'sp1'; kept "
        "below 'sp0'",
        "warning: line 4: switch 'l1' has several parents: 'sp0' (line 3) and 'sp1'; kept "
        "below 'sp0'"]


@pytest.mark.parametrize("files, expect", [
    ({"t.conf": "SwitchName=a Nodes=n1\nSwitchName=b Switches=z\n"},
     {"line": 2, "message": "t.conf: line 2: switch 'b' lists unknown switch 'z'"}),
    ({"t.yaml": "- topology: a\n  flat: true\n"},
     {"line": 2, "message": "t.yaml: line 2: topology 'a' is flat (topology/flat): it lists no "
                            "switches or blocks, so there is nothing to import"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "n.json": '{"nodes": [{"name": "n1", "state": '
                                                      '["WEIRD"], "gres": "gpu:4"}]}'},
     {"path": "nodes[0].state", "message": "n.json: nodes[0].state: 'weird' is not a Slurm "
                                           "node state"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "n.json": '{"nodes": [{"name": "n1", "state": '
                                                      '"idle", "gres": "gpu:x:y:z"}]}'},
     {"path": "nodes[0].gres", "message": "n.json: nodes[0].gres: 'gpu:x:y:z' is not a GRES "
                                          "string such as 'gpu:a100:4(S:0-1)'"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "n.json": '{"nodes": [\n{"name": "n1",}]}'},
     {"line": 2, "message": "n.json: line 2: not valid JSON: Expecting property name enclosed "
                            "in double quotes"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "n.json": '{"node": []}'},
     {"path": "nodes", "message": "n.json: nodes: expected the 'nodes' list that scontrol show "
                                  "nodes --json and sinfo --json print"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "n.json": '{"nodes": [{"name": "n1", "state": '
                                                      '"idle", "gres": ""}]}'},
     {"path": "n1", "message": "n.json: n1: node 'n1' has no GPU GRES and no --gpus-per-node "
                               "was given"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "j.json": '{"jobs": [{"job_id": 7, "job_state": '
                                                     '"RUNNING", "nodes": "n9", "gres_detail": '
                                                     '["gpu:1(IDX:0)"]}]}'},
     {"path": "jobs[0].nodes", "message": "j.json: jobs[0].nodes: job 7 runs on node 'n9', "
                                          "which is not in the topology"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "j.json": '{"jobs": [{"job_id": 7, "job_state": '
                                                     '"RUNNING", "nodes": "n1", "gres_detail": '
                                                     '["gpu:1(IDX:5)"]}]}'},
     {"path": "jobs[0].gres_detail", "message": "j.json: jobs[0].gres_detail: job 7 holds GPU 5 "
                                                "of node 'n1', which has 4"}),
    ({"t.conf": "SwitchName=a Nodes=n1\n", "j.json": '{"jobs": [{"job_id": 7, "job_state": '
                                                     '"RUNNING", "nodes": "n1", "gres_detail": '
                                                     '["gpu:1(IDX:0)", "gpu:1(IDX:1)"]}]}'},
     {"path": "jobs[0].gres_detail", "message": "j.json: jobs[0].gres_detail: 2 entries for 1 "
                                                "nodes"}),
])
def test_refusals_name_file_line_or_path(tp, tmp_path, files, expect):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    args = ["slurm"]
    for name in files:
        flag = {"c": "--topology", "l": "--topology", "n": "--nodes", "j": "--jobs"}
        args += [flag["c" if name.startswith("t.") else name[0]], str(tmp_path / name)]
    if "j.json" in files:
        args += ["--gpus-per-node", "4"]
    code, doc, _ = imp(*args)
    assert code == 2
    assert doc["status"] == "invalid"
    msg = doc["message"].replace(str(tmp_path) + os.sep, "")
    assert msg == expect["message"]
    assert doc.get("line") == expect.get("line") and doc.get("path") == expect.get("path")
    assert doc["file"].endswith(next(n for n in files if msg.startswith(n)))


def test_usage_and_unreadable_file(tp, tmp_path):
    code, doc, _ = imp("slurm")
    assert code == 2 and "the following arguments are required: --topology" in doc["message"]
    code, doc, _ = imp("slurm", "--topology", str(tmp_path / "none.conf"))
    assert code == 2 and doc["message"].endswith("none.conf: cannot read the topology file: "
                                                 "No such file or directory")


def test_topology_from_slurm_detects_yaml(tp):
    with open(d("topology-fattree.yaml")) as f:
        t, warnings = tp.Topology.from_slurm(f.read(), gpus_per_node=8)
    assert t.levels == ("switch1", "switch0", "node") and t.device_count == 64
    assert warnings == []
    t, _ = tp.Topology.from_slurm(open(d("topology-fattree.yaml")).read(), 2, topology="nvl")
    assert t.levels == ("agg4", "block", "node")
    with pytest.raises(tp.ParseError, match="looks like a topology.yaml"):
        tp.Topology.from_slurm(open(d("topology-fattree.yaml")).read(), 2, format="conf")


def test_hostlists_round_trip():
    from topoplace.importers import hostlist_compress, hostlist_expand
    names = ["gpu001", "gpu002", "gpu003", "gpu007", "login", "r1n01", "r1n02", "x9", "x10"]
    hl = hostlist_compress(names)
    assert hl == "gpu[001-003,007],login,r1n[01-02],x9,x10"
    assert hostlist_expand(hl) == names
    assert hostlist_expand("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    with pytest.raises(ValueError):
        hostlist_expand("n[3-1]")


def test_round_trip_import_place_format_slurm(tp, tmp_path):
    """import slurm, place, --format slurm: the hostlist expands to imported nodes, the GPU
    indices are the json answer's devices in rank order, and none is held by a job."""
    code, doc, _ = imp("slurm", "--topology", d("h100-tree.conf"), "--nodes",
                       d("scontrol-nodes-v0.0.40.json"), "--jobs", d("squeue-v0.0.40.json"))
    assert code == 0
    # 12 GPUs in pods of 4 in one leaf switch: only leaf0 has them free (gpu001's 8 and the
    # 4 that job 4102 leaves on gpu002; gpu003 is cordoned, gpu004 down; leaf1 has gpu008 only)
    doc["request"] = {"id": "new", "count": 12, "group": {"size": 4}, "required": "switch0"}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    out = {}
    for fmt in ("json", "slurm"):
        p = subprocess.run([python(), "-m", "topoplace", "place", str(path), "--format", fmt],
                           stdout=subprocess.PIPE, universal_newlines=True)
        assert p.returncode == 0, p.stdout
        out[fmt] = json.loads(p.stdout)
    from topoplace.importers import hostlist_expand
    ans = out["slurm"]
    nodes = hostlist_expand(ans["nodelist"])
    imported = {n["name"]: n for n in doc["topology"]["nodes"]}
    assert set(nodes) <= set(imported) and sorted(nodes) == ["gpu001", "gpu002"]
    assert ans["sbatch"] == "--nodelist=%s --nodes=2" % ans["nodelist"]
    assert sorted(ans["gpus"]["gpu002"].split(",")) == ["4", "5", "6", "7"]
    held = {(n, i) for j in doc["state"]["jobs"] for n, ix in j["devices"].items() for i in ix}
    got = [(n, int(i)) for n in nodes for i in ans["gpus"][n].split(",")]
    assert not set(got) & held
    assert not set(nodes) & set(doc["state"]["down"] + doc["state"]["cordoned"])
    assert ["%s/%d" % g for g in got] == out["json"]["placement"]["devices"]
    leaf = {imported[n]["path"][1] for n in nodes}
    assert len(leaf) == 1                                  # required: one leaf switch
