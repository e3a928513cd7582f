# SPDX-License-Identifier: MIT
"""The CLI's plans (issue 15 item 7): `compact`, `--no-less-local`, and the text output of
defrag and compact plans (from -> to for each step, migrants and victims in the picture)."""

import io
import json

import pytest


# slurm-s01 of shared/spec/examples (SchedMD's test_150_1 shape), copied so that this test
# runs without ../shared: J2 must stay in one block, so the only plan migrates J1 (no request:
# it may land less local) so that one of its nodes lands on node8.
S01 = {
    "version": 1,
    "topology": {"levels": ["agg", "block", "node"],
                 "nodes": [{"name": "node%d" % i, "path": ["a1", "b1" if i <= 4 else "b2"],
                            "gpus": 4} for i in range(1, 9)]},
    "state": {"jobs": [
        {"id": "J1", "class": "training", "migratable": True,
         "devices": {"node1": 4, "node2": 4}},
        {"id": "J2", "class": "training", "migratable": True,
         "devices": {"node5": 4, "node6": 4, "node7": 4},
         "request": {"count": 12, "group": {"size": 4, "level": "node"}, "required": "block"}}]},
    "request": {"id": "J3", "priority": 1, "count": 12, "group": {"size": 4, "level": "node"},
                "required": "block"},
    "policy": {"migrate": True, "preempt": False, "allow_interactive": False, "max_moves": 1,
               "max_cost_s": 3600, "min_priority_gap": 1},
}

# Two racks of four 4-GPU nodes: a (4 devices, rack0) and b (2, rack1) may migrate, c (4,
# rack1) may be preempted.
TWO_RACKS = {
    "version": 1,
    "topology": {"levels": ["rack", "node"], "generate": {"counts": [2, 4], "gpus_per_node": 4}},
    "state": {"jobs": [
        {"id": "a", "migratable": True, "checkpoint_s": 60, "devices": {"rack0-node0": 4}},
        {"id": "b", "migratable": True, "checkpoint_s": 60, "devices": {"rack1-node1": 2}},
        {"id": "c", "preemptible": True, "priority": -5, "devices": {"rack1-node2": 4}}]},
    "policy": {"max_moves": 3},
}


def cli(tmp_path, *args, document=None):
    from topoplace import cli as cli_mod
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(document))
    out = io.StringIO()
    argv = [args[0], str(path)] + list(args[1:])
    rc = cli_mod.main(argv, stdout=out)
    text = out.getvalue()
    return rc, (text if "text" in args else json.loads(text))


def test_defrag_keeps_the_contract_and_no_less_local_turns_it_off(tp, tmp_path):
    rc, out = cli(tmp_path, "defrag", document=S01)
    assert rc == 0 and [(s["action"], s["job"]) for s in out["plan"]["steps"]] == \
        [("migrate", "J1"), ("place", "J3")]
    assert out["plan"]["cost_s"] == 480
    rc, out = cli(tmp_path, "defrag", "--no-less-local", document=S01)
    assert (rc, out) == (1, {"status": "none", "message":
                             "block a1/b1 would need job J1 moved, but no free devices keep it "
                             "as local as it sits (domains it spans: agg 1, block 1, node 2) "
                             "and it may not be preempted"})


def test_python_policy_allow_less_local(tp):
    """The same choice through the Python API, on the same cluster."""
    from topoplace import scenario
    sc = scenario.parse(S01, "defrag")
    assert sc.policy.allow_less_local is True
    assert sc.cluster.defrag_plan(sc.request, sc.policy).ok
    sc.policy.allow_less_local = False
    plan = sc.cluster.defrag_plan(sc.request, sc.policy)
    assert plan.status == "none" and "as local as it sits" in plan.message


def test_compact_frees_a_rack(tp, tmp_path):
    rc, out = cli(tmp_path, "compact", "--level", "rack", document=TWO_RACKS)
    assert rc == 0, out
    plan = out["plan"]
    # rack0 holds only a (4 devices), rack1 has room for it: one migration, 60 s x 4
    assert [(s["action"], s["job"]) for s in plan["steps"]] == [("migrate", "a")]
    step = plan["steps"][0]
    assert step["from"] == ["rack0-node0/%d" % i for i in range(4)]
    held = {"rack1-node1/0", "rack1-node1/1"} | {"rack1-node2/%d" % i for i in range(4)}
    assert len(step["to"]) == 4 and all(d.startswith("rack1-") for d in step["to"])
    assert not held & set(step["to"])
    assert (plan["moved_jobs"], plan["moved_devices"], plan["cost_s"]) == (1, 4, 240)
    assert out["free_domains"] == {"rack": ["rack0"]}
    # already free: no step
    rc, out = cli(tmp_path, "compact", "--level", "node", "--domains", "3", document=TWO_RACKS)
    assert rc == 0 and out["plan"]["steps"] == [] and len(out["free_domains"]["node"]) == 5


def test_compact_reads_the_policy_section(tp, tmp_path):
    d = json.loads(json.dumps(TWO_RACKS))
    d["policy"] = {"migrate": False, "preempt": False}
    rc, out = cli(tmp_path, "compact", "--level", "rack", document=d)
    assert rc == 1 and out["status"] == "none" and "rack" in out["message"]
    d["policy"] = {"max_moves": "x"}
    rc, out = cli(tmp_path, "compact", "--level", "rack", document=d)
    assert rc == 2 and out["status"] == "invalid"
    assert out["message"].startswith("policy.max_moves")


@pytest.mark.parametrize("args,message", [
    (("compact",), "usage: compact needs --level LEVEL"),
    (("compact", "--level", "rack", "--domains", "0"),
     "usage: argument --domains: --domains: '0' is not a positive integer"),
    (("place", "--level", "rack"), "usage: --level applies to compact only"),
    (("frag", "--domains", "2"), "usage: --domains applies to compact only"),
    (("defrag", "--domains", "1"), "usage: --domains applies to compact only"),
    (("place", "--no-less-local"), "usage: --no-less-local applies to defrag and compact only"),
    (("compact", "--level", "block"), "--level: unknown level 'block' (levels: rack, node)"),
    (("compact", "--level", "rack", "--domains", "3"),
     "--domains: ndomains 3 is not between 1 and the 2 domains of level rack"),
])
def test_compact_usage_errors(tp, tmp_path, args, message):
    rc, out = cli(tmp_path, *args, document=TWO_RACKS)
    assert rc == 2 and out["status"] == "invalid"
    assert out["message"].split(" (python3 -m topoplace")[0] == message


def test_compact_none_when_impossible(tp, tmp_path):
    rc, out = cli(tmp_path, "compact", "--level", "rack", "--domains", "2", document=TWO_RACKS)
    assert rc == 1 and out["status"] == "none"
    assert out["message"].startswith("only 1 of 2 rack domains can be freed")
    rc, text = cli(tmp_path, "compact", "--level", "rack", "--domains", "2", "--format", "text",
                   document=TWO_RACKS)
    assert rc == 1 and text.startswith("none: only 1 of 2 rack domains")


def picture(text, title):
    """{line name: characters} of the picture under ``title``."""
    lines = text.splitlines()
    i = lines.index(title) + 1
    rows = {}
    for line in lines[i:]:
        if not line.strip():
            break
        if line.startswith("legend:"):
            continue
        name, chars = line.split()
        rows[name] = chars
    return rows


def expected_after(doc, topo_nodes):
    """The after picture as the JSON answer says it must be: N on the new job's nodes, m
    where a migration lands, '.' or '#'/'+' elsewhere (left to the caller: None)."""
    marks = {}
    for st in doc["plan"]["steps"]:
        if st["action"] in ("migrate", "place"):
            for d in st["to"]:
                node = d.split("/")[0]
                if marks.get(node) != "N":
                    marks[node] = "N" if st["action"] == "place" else "m"
    return [marks.get(n) for n in topo_nodes]


def test_defrag_text_shows_from_to_and_marks(tp, tmp_path):
    rc, out = cli(tmp_path, "defrag", document=S01)
    rc2, text = cli(tmp_path, "defrag", "--format", "text", document=S01)
    assert rc == rc2 == 0
    before = picture(text, "before the moves:")
    # J1 leaves node1 and node2 (M); node3, node4 and node8 are free; J2 stays
    assert before == {"a1/b1": "MM..", "a1/b2": "###."}
    after = picture(text, "after the moves:")
    nodes = ["node%d" % i for i in range(1, 9)]
    want = expected_after(out, nodes)
    drawn = after["a1/b1"] + after["a1/b2"]
    for n, w, got in zip(nodes, want, drawn):
        if w is not None:
            assert got == w, (n, text)
        else:
            assert got in ".#+", (n, text)
    migrate = out["plan"]["steps"][0]
    to_nodes = sorted({d.split("/")[0] for d in migrate["to"]})
    line = [ln for ln in text.splitlines() if ln.strip().startswith("migrate")]
    assert len(line) == 1 and "J1 (8 devices): node1/0-3 node2/0-3 -> " in line[0]
    assert all("%s/0-3" % n in line[0].split(" -> ")[1] for n in to_nodes)
    assert "plan: 2 step(s), 1 job(s) moved, 8 device(s), cost 480 s" in text


def test_defrag_text_marks_victims(tp, tmp_path):
    """A preemption: the victim's node is V before, the new job's nodes N after."""
    d = {"version": 1,
         "topology": {"levels": ["rack", "node"],
                      "generate": {"counts": [1, 2], "gpus_per_node": 4}},
         "state": {"jobs": [{"id": "low", "preemptible": True, "priority": 0,
                             "devices": {"rack0-node0": 4}}]},
         "request": {"id": "hi", "priority": 5, "count": 8, "required": "rack"},
         "policy": {"migrate": False}}
    rc, out = cli(tmp_path, "defrag", document=d)
    assert rc == 0 and [(s["action"], s["job"]) for s in out["plan"]["steps"]] == \
        [("preempt", "low"), ("place", "hi")]
    rc, text = cli(tmp_path, "defrag", "--format", "text", document=d)
    assert picture(text, "before the moves:") == {"rack0": "V."}
    assert picture(text, "after the moves:") == {"rack0": "NN"}
    assert "  preempt  low (4 devices): rack0-node0/0-3 (stopped)" in text.splitlines()
    assert "  place    hi (8 devices): -> rack0-node0/0-3 rack0-node1/0-3" in text.splitlines()


def test_compact_text(tp, tmp_path):
    rc, out = cli(tmp_path, "compact", "--level", "rack", document=TWO_RACKS)
    rc2, text = cli(tmp_path, "compact", "--level", "rack", "--format", "text",
                    document=TWO_RACKS)
    assert rc == rc2 == 0
    assert text.splitlines()[0] == "compact: 1 rack fully free after the plan: rack0"
    assert picture(text, "before the moves:") == {"rack0": "M...", "rack1": ".+#."}
    after = picture(text, "after the moves:")
    assert after["rack0"] == "...."
    landed = {d.split("/")[0] for d in out["plan"]["steps"][0]["to"]}
    assert [c for n, c in zip(["rack1-node%d" % i for i in range(4)], after["rack1"])
            if n in landed] == ["m"] * len(landed)
    assert "  migrate  a (4 devices): rack0-node0/0-3 -> " in text


def test_drawing_a_plan_leaves_the_state_as_it_was(tp, tmp_path):
    """The after picture and free_domains carry the plan out on a savepoint and roll back."""
    from topoplace import cli as cli_mod
    from topoplace.text import render
    path = tmp_path / "s.json"
    path.write_text(json.dumps(TWO_RACKS))
    answer = cli_mod.run("compact", str(path), options={"level": "rack", "domains": 1})
    cluster = answer.ctx["cluster"]
    fp, jobs = cluster.fingerprint, {j: cluster.job_device_names(j) for j in cluster.jobs}
    from topoplace import scenario
    assert fp == scenario.parse(TWO_RACKS, "frag").cluster.fingerprint
    assert "after the moves:" in render(answer)
    assert cluster.fingerprint == fp
    assert {j: cluster.job_device_names(j) for j in cluster.jobs} == jobs
    # and the plan still applies from step 0
    cluster.apply_step(answer.ctx["plan"], 0)
    assert cluster.job_device_names("a") == answer.doc["plan"]["steps"][0]["to"]


def test_devices_text():
    from topoplace.text import devices_text
    assert devices_text(["x1/0", "x1/1", "x1/2", "x2/0", "x2/2", "x2/3", "x1/5"]) == \
        "x1/0-2 x2/0,2-3 x1/5"
    assert devices_text([]) == ""
    many = ["n%d/%d" % (n, i) for n in range(20) for i in range(4)]
    assert devices_text(many) == ("n0/0-3 n1/0-3 n2/0-3 n3/0-3 n4/0-3 n5/0-3 ... and 14 more "
                                  "node runs")
    assert devices_text(many[:48]) == " ".join("n%d/0-3" % n for n in range(12))
