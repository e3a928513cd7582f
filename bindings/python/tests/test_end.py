# SPDX-License-Identifier: MIT
"""Request.expected_end_s (tp_request.expected_end_s, version 6): of the tightest nodes that
hold the job (here as tight as each other), the node whose running jobs end last at or after the
job's own end, nearest first, wins; a running job's end is its shape's."""

import json
import subprocess

import pytest

from conftest import python


def three_nodes(tp):
    """Nodes 0, 1, 2 with 4 of 8 GPUs held by jobs that end at 100, 300 and 200."""
    t = tp.Topology.generate(["su", "node"], [1, 3], 8)
    c = tp.Cluster(t)
    for n, end in enumerate((100, 300, 200)):
        devs = ["su0-node%d/%d" % (n, g) for g in range(4)]
        c.assign("j%d" % n, devs, shape=tp.Request(count=4, expected_end_s=end))
    return c


def node_of(p):
    nodes = {d.split("/")[0] for d in p.devices}
    assert len(nodes) == 1, p.devices
    return nodes.pop()


def test_expected_end_decides_ties(tp):
    c = three_nodes(tp)
    assert c.job_info("j1").shape.expected_end_s == 300
    p = c.place(tp.Request(count=2, required="node", expected_end_s=150))
    assert node_of(p) == "su0-node2" and p.decided_by == "end"
    assert node_of(c.place(tp.Request(count=2, required="node", expected_end_s=400))) == \
        "su0-node1"
    p = c.place(tp.Request(count=2, required="node"))
    assert node_of(p) == "su0-node0" and p.decided_by == "tie"


def test_bad_expected_end_is_refused(tp):
    c = three_nodes(tp)
    fp = c.fingerprint
    with pytest.raises(tp.InvalidArgument,
                       match=r"request.expected_end_s -1 is not a finite time >= 0"):
        c.place(tp.Request(count=1, expected_end_s=-1))
    with pytest.raises(tp.InvalidArgument, match=r"request.expected_end_s: must be a number"):
        c.place(tp.Request(count=1, expected_end_s="soon"))
    with pytest.raises(tp.InvalidArgument, match=r"shape.expected_end_s inf is not a finite"):
        c.assign("x", ["su0-node0/7"], shape=tp.Request(count=1, expected_end_s=float("inf")))
    assert c.fingerprint == fp and "x" not in c.jobs


def test_cli_reads_x_expected_end_s(tp, tmp_path):
    """The scenario extension request.x_expected_end_s, for the request and for a running job's
    own request; score.decided_by says "end"."""
    jobs = [{"id": "j%d" % n, "devices": {"su0-node%d" % n: 4},
             "request": {"count": 4, "x_expected_end_s": end}}
            for n, end in enumerate((100, 300, 200))]
    d = {"version": 1,
         "topology": {"levels": ["su", "node"], "generate": {"counts": [1, 3], "gpus_per_node": 8}},
         "state": {"jobs": jobs},
         "request": {"count": 2, "required": "node", "x_expected_end_s": 150}}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(d))
    p = subprocess.run([python(), "-m", "topoplace", "place", str(path)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out["score"]["decided_by"] == "end", out
    assert all(x.startswith("su0-node2/") for x in out["placement"]["devices"]), out
