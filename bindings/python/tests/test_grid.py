# SPDX-License-Identifier: MIT
"""Rings and tori in Python (issue #18): generators, a builder's grid and coordinates, box
requests (wrap, rotation, failures naming request.box), a box job's recorded shape, the
fragmentation report's largest free box, and a Slurm RingName file."""

import copy
import json
import os

import pytest


def test_torus_generator_and_queries(tp):
    t = tp.Topology.torus(2, (4, 4, 2))
    assert t.levels == ("pod", "chip")
    assert t.grid("pod") == ((4, 4, 2), (0, 1, 2))
    assert t.grid("chip") is None
    node = t.node("pod1-chip17")
    assert t.coords("chip", node) == (1, 0, 1)
    mesh = tp.Topology.torus(1, (3, 3), wrap=())
    assert mesh.grid(0) == ((3, 3), ())


def test_builder_grid_and_a_wrapping_arc(tp):
    b = tp.TopologyBuilder(["ring", "node"]).set_grid("ring", [6])
    for i in range(6):
        b.add_node("n%d" % i, ["r0"], gpus=2).set_coords("node", "n%d" % i, [i])
    t = b.build()
    c = tp.Cluster(t)
    c.assign("mid", ["n1", "n2", "n3", "n4"])
    p = c.place(tp.Request(count=4, box=tp.Box("ring", (2,))))
    assert p.status == "fragmented" and "no 2x1x1 box" in p.message
    p = c.place(tp.Request(count=4, id="arc", box=("ring", (2,), True)))
    assert [t.node_name(t.device_node(d)) for d in p.devices][::2] == ["n5", "n0"]
    c.commit(p)
    shape = c.job_info("arc").shape
    assert shape.box == tp.Box("ring", (2, 0, 0), True, False)  # as the request gave it


def test_box_rotation_and_errors(tp):
    t = tp.Topology.torus(1, (4, 2), wrap=())
    c = tp.Cluster(t)
    p = c.place(tp.Request(count=4, box=tp.Box("pod", (1, 4))))
    assert p.status == "infeasible" and "no pod has a 1x4x1 box" in p.message
    p = c.place(tp.Request(count=4, box=tp.Box("pod", (1, 4), rotate=True)))
    assert len(p.devices) == 4
    with pytest.raises(tp.InvalidArgument, match="request.count 3 is not the box's 4 devices"):
        c.place(tp.Request(count=3, box=tp.Box("pod", (2, 2))))
    with pytest.raises(tp.InvalidArgument, match="request.box.shape"):
        tp.Request(count=1, box=tp.Box("pod", (1, 1, 1, 1)))._to_c([])


def test_frag_report_largest_box(tp):
    t = tp.Topology.torus(1, (4, 4), wrap=())
    c = tp.Cluster(t)
    c.assign("x", ["pod0-chip5"])   # (1, 1)
    rep = c.frag()
    assert rep.levels["pod"].largest_box == (2, 4, 1)  # 4x2 ties; the smaller x extent first
    assert rep.levels["pod"].grid_fragments == 1
    assert rep.levels["chip"].largest_box is None


def test_slurm_ring_file(tp):
    t, warnings = tp.Topology.from_slurm("RingName=ring0 Nodes=node[01-08]\n"
                                         "RingName=ring1 Nodes=node[09-16]\n", 4)
    assert warnings == []
    assert t.levels == ("ring", "node") and t.grid("ring") == ((8,), (0,))
    assert t.coords("node", t.node("node12")) == (3,)


SCENARIO = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "data",
                        "scenarios", "ring-arc.json")


def test_scenario_extensions(tp, tmp_path):
    """topology.x_grid and request.x_box (CLI extensions of scenario-v1): the arc n5 n0
    across the seam of a six-node ring whose middle is taken; each malformed value is named."""
    from test_cli import run_json
    with open(SCENARIO) as f:
        d = json.load(f)
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0, out
    assert out["placement"]["devices"] == ["n5/0", "n5/1", "n0/0", "n0/1"]
    bad = [(("request", "x_box", "wrap"), 3, "request.x_box.wrap: must be true or false"),
           (("request", "x_box", "shape"), [1, 1, 1, 1], "request.x_box.shape: has 4 values"),
           (("request", "x_box", "level"), 7, "request.x_box.level: must be a level name"),
           (("topology", "x_grid", "ring", "dims"), [6, 0],
            "topology.x_grid.ring.dims[1]: must be at least 1"),
           (("topology", "x_grid", "ring", "wrap"), [1],
            "topology.x_grid.ring.wrap[0]: 1 is above the limit 0"),
           (("topology", "x_grid", "ring", "coords", "n9"), [1],
            "topology.x_grid.ring.coords.n9: coords: no node n9")]
    for path, value, message in bad:
        e = copy.deepcopy(d)
        obj = e
        for k in path[:-1]:
            obj = obj[k]
        obj[path[-1]] = value
        rc, out = run_json(tmp_path, "place", e)
        assert rc == 2 and out["message"].startswith(message), (path, out)
