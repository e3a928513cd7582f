# SPDX-License-Identifier: MIT
"""`python3 -m topoplace import k8s`: nodes, pods and a Kueue Topology in the shape kubectl
prints (tests/data/k8s), the levels from the Topology's order or --levels, GPU pods grouped by
their JobSet, LeaderWorkerSet or Job, and refusals naming the file and the JSON path."""

import json
import os
import subprocess

import pytest

from conftest import HERE, python

DATA = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "data", "k8s"))


def d(name):
    return os.path.join(DATA, name)


def imp(*args):
    p = subprocess.run([python(), "-m", "topoplace", "import", "k8s"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    return p.returncode, json.loads(p.stdout), p.stderr


def test_nodes_pods_and_kueue_topology(tp, tmp_path):
    code, doc, err = imp("--nodes", d("nodes.json"), "--pods", d("pods.json"), "--topology",
                         d("kueue-topology.json"))
    assert code == 0, doc
    topo = doc["topology"]
    assert topo["levels"] == ["cloud.google.com:gce-topology-block",
                              "cloud.google.com:gce-topology-subblock", "node"]
    assert [(n["name"], n["path"], n["gpus"]) for n in topo["nodes"]] == [
        ("gke-a3-%d" % i, ["blk-a" if i < 4 else "blk-b", "sb-%d" % (1 + i // 2)], 8)
        for i in range(6)]
    st = doc["state"]
    assert st["down"] == ["gke-a3-3"]                       # Ready Unknown
    assert st["cordoned"] == ["gke-a3-2", "gke-a3-4"]       # unschedulable; maintenance taint
    assert st["jobs"] == [
        {"id": "inf/lws/serve", "devices": {"gke-a3-5": 6}},
        {"id": "ml/job/eval", "devices": {"gke-a3-4": 2}},
        {"id": "ml/jobset/train", "devices": {"gke-a3-0": 8, "gke-a3-1": 8}}]
    assert "gke-cpu-0" in err                                 # no GPU: left out, warned
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    p = subprocess.run([python(), "-m", "topoplace", "frag", str(path)],
                       stdout=subprocess.PIPE, universal_newlines=True)
    frag = json.loads(p.stdout)
    assert p.returncode == 0
    assert (frag["down"], frag["cordoned"], frag["free"]) == (8, 16, 48 - 8 - 16 - 16 - 6)


def test_levels_flag_and_group_label(tp):
    code, doc, _ = imp("--nodes", d("nodes.json"), "--pods", d("pods.json"), "--levels",
                       "cloud.google.com/gce-topology-block", "--group-label",
                       "kueue.x-k8s.io/queue-name")
    assert code == 0, doc
    assert doc["topology"]["levels"] == ["cloud.google.com:gce-topology-block", "node"]
    # only the JobSet's pods carry the label; the others are one job per pod
    ids = [j["id"] for j in doc["state"]["jobs"]]
    assert ids == ["inf/pod/serve-0", "inf/pod/serve-0-1", "ml/lq", "ml/pod/eval-x7k2p"]


def test_missing_level_label_leaves_a_node_out(tp):
    code, doc, err = imp("--nodes", d("nodes.json"), "--levels", "example.com/rack")
    assert code == 2
    assert doc["message"].endswith(
        "nodes.json: items: no node has allocatable nvidia.com/gpu and every level label (the "
        "first: node 'gke-a3-0' has no label example.com/rack; left out (Kueue leaves it out of "
        "the topology too))")


@pytest.mark.parametrize("name, text, flag, expect", [
    ("n.json", '{"items": [{"metadata": {"name": "a", "labels": {"r": "x"}}, "status": '
               '{"allocatable": {"nvidia.com/gpu": "8x"}}}]}', "--nodes",
     ("items[0].status.allocatable[\"nvidia.com/gpu\"]", "\"8x\" is not a whole number of "
                                                          "devices")),
    ("n.json", '{"kind": "NodeList"}', "--nodes",
     ("items", "expected the 'items' list of kubectl get nodes -o json")),
    ("t.json", '{"kind": "Topology", "spec": {"levels": [{"nodeLabel": ""}]}}', "--topology",
     ("spec.levels[0].nodeLabel", "expected a label key")),
    ("t.json", '{"kind": "ClusterQueue"}', "--topology",
     ("kind", "expected a Kueue Topology object (kind: Topology)")),
    ("p.json", '{"items": [{"metadata": {"name": "p"}, "spec": {"nodeName": "nowhere", '
               '"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]}, "status": '
               '{"phase": "Running"}}]}', "--pods",
     ("items[0].spec.nodeName", "pod 'p' is bound to node 'nowhere', which is not among the "
                                "imported GPU nodes")),
    ("p.json", '{"items": [{"metadata": {"name": "p"}, "spec": {"nodeName": "gke-a3-0", '
               '"containers": [{"resources": {"limits": {"nvidia.com/gpu": 9}}}]}, "status": '
               '{"phase": "Running"}}]}', "--pods",
     ("items[0]", "the pods on node 'gke-a3-0' request more than its 8 allocatable "
                  "nvidia.com/gpu")),
])
def test_refusals_name_file_and_path(tp, tmp_path, name, text, flag, expect):
    (tmp_path / name).write_text(text)
    args = {"--nodes": ["--nodes", str(tmp_path / name), "--levels", "r"],
            "--topology": ["--nodes", d("nodes.json"), "--topology", str(tmp_path / name)],
            "--pods": ["--nodes", d("nodes.json"), "--pods", str(tmp_path / name), "--levels",
                       "cloud.google.com/gce-topology-block"]}[flag]
    code, doc, _ = imp(*args)
    assert code == 2 and doc["status"] == "invalid"
    assert doc["path"] == expect[0]
    assert doc["message"] == "%s: %s: %s" % (str(tmp_path / name), expect[0], expect[1])


def test_round_trip_import_place_format_kueue(tp, tmp_path):
    """import k8s, place, --format kueue: the TopologyAssignment's levels are the Kueue
    Topology's node labels, every domain's values are the labels of a real node, the pod counts
    add up to count / group size, and each pod's node selector matches its node's labels."""
    code, doc, _ = imp("--nodes", d("nodes.json"), "--pods", d("pods.json"), "--topology",
                       d("kueue-topology.json"))
    assert code == 0
    doc["state"].pop("cordoned")
    doc["request"] = {"id": "new", "count": 8, "group": {"size": 2},
                      "required": "cloud.google.com:gce-topology-block"}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    out = {}
    for fmt in ("json", "kueue"):
        p = subprocess.run([python(), "-m", "topoplace", "place", str(path), "--format", fmt],
                           stdout=subprocess.PIPE, universal_newlines=True)
        assert p.returncode == 0, p.stdout
        out[fmt] = json.loads(p.stdout)
    ta = out["kueue"]["topologyAssignment"]
    kueue = json.load(open(d("kueue-topology.json")))
    assert ta["levels"] == [lv["nodeLabel"] for lv in kueue["spec"]["levels"]]
    labels = {n["metadata"]["name"]: n["metadata"]["labels"]
              for n in json.load(open(d("nodes.json")))["items"]}
    for dom in ta["domains"]:
        node = dom["values"][-1]
        assert dom["values"] == [labels[node][k] for k in ta["levels"]]
    assert sum(dom["count"] for dom in ta["domains"]) == 8 // 2
    assert len({dom["values"][0] for dom in ta["domains"]}) == 1     # one block
    sel = out["kueue"]["podNodeSelectors"]
    assert len(sel) == 4 and all(labels[s["kubernetes.io/hostname"]][k] == v
                                 for s in sel for k, v in s.items())
    # the same nodes as the json answer, in rank order, 2 devices a pod
    nodes = [dev.rsplit("/", 1)[0] for dev in out["json"]["placement"]["devices"]]
    assert [s["kubernetes.io/hostname"] for s in sel] == nodes[::2]
