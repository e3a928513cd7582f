# SPDX-License-Identifier: MIT
"""NVLink partitions from Python: the policy, the partitions a placement returns, a node in one
partition at a time and tenants kept apart (docs/concepts.md, "NVLink partitions")."""

import pytest


def nvl72(tp, racks=1):
    return tp.Topology.nvl72(1, racks)  # block, rack, node; 18 nodes of 4 GPUs per rack


def test_off_by_default(tp):
    c = tp.Cluster(nvl72(tp))
    assert c.partition_policy is None
    p = c.place(tp.Request(count=16))
    assert p.ok and p.partitions == []
    c.commit(p)
    assert c.node_partition(0) is None


def test_a_placement_returns_its_partition_and_commit_records_it(tp):
    t = nvl72(tp, 2)
    c = tp.Cluster(t)
    c.set_partitions("rack", 2048)
    assert c.partition_policy == ("rack", 2048)
    p = c.place(tp.Request(id="a", count=16, tenant="ta"))
    assert p.ok and len(p.partitions) == 1
    part = p.partitions[0]
    assert part.channel == 0 and sorted(part.nodes) == sorted(p.nodes)
    assert part.domain in p.domains["rack"]
    c.commit(p)
    assert c.node_partition(part.nodes[0]) == ("a", 0)
    q = c.place(tp.Request(id="b", count=8, tenant="ta"))
    assert q.partitions[0].channel == 1
    c.release("a")
    assert c.node_partition(part.nodes[0]) is None
    assert c.check() is True


def test_a_second_tenants_job_never_shares_a_partition(tp):
    t = nvl72(tp)
    c = tp.Cluster(t)
    c.set_partitions("rack", 2048)
    c.assign("a", list(range(6)), tenant="ta")        # nodes 0 and 1: node 1 keeps 2 free
    for n in range(2, 18):
        c.assign("f%d" % n, t.node_devices(n)[: 2 if n == 17 else 4], tenant="ta")
    p = c.place(tp.Request(id="b", count=2, tenant="tb"))
    assert p.ok and set(p.nodes) == {t.node_name(17)}
    c.assign("g", t.node_devices(17)[2:], tenant="ta")
    p = c.place(tp.Request(id="b", count=2, tenant="tb"))
    assert p.status == "fragmented" and "NVLink partition rules" in p.message
    own = c.place(tp.Request(id="a2", count=2, tenant="ta"))
    assert own.ok and set(own.nodes) == {t.node_name(1)} and own.partitions == []
    with pytest.raises(tp.Busy, match="breaks the NVLink partition rules"):
        c.assign("x", t.node_devices(1)[2:3], tenant="tb")


def test_policy_errors(tp):
    c = tp.Cluster(nvl72(tp))
    with pytest.raises(tp.InvalidArgument, match="partitions.channels 0"):
        c.set_partitions("rack", 0)
    with pytest.raises(tp.InvalidArgument, match="no domain whose fabric is NVLink"):
        c.set_partitions("block", 8)
    c.set_partitions("rack", 4)
    c.set_partitions(None)
    assert c.partition_policy is None


# The command-line tool: the extension state.x_partitions and the answer's x_partitions.

NVL = {"version": 1,
       "topology": {"levels": ["block", "rack", "node"],
                    "fabric": {"rack": {"kind": "nvlink", "gbps": 900, "latency_us": 3.4}},
                    "generate": {"counts": [1, 1, 18], "gpus_per_node": 4}},
       "state": {"x_partitions": {"level": "rack", "channels": 4},
                 "jobs": [{"id": "a", "tenant": "ta",
                           "devices": {"block0-rack0-node0": 4, "block0-rack0-node1": 2}}]},
       "request": {"id": "b", "count": 8, "tenant": "ta"}}


def test_cli_answer_has_the_partition(tp, tmp_path):
    from test_cli import run_json
    rc, out = run_json(tmp_path, "place", NVL)
    assert rc == 0, out
    parts = out["placement"]["x_partitions"]
    assert len(parts) == 1 and parts[0]["domain"] == "block0/rack0"
    assert parts[0]["channel"] == 1          # a's partition holds channel 0
    assert sorted(parts[0]["nodes"]) == sorted(out["placement"]["nodes"])
    assert not {"block0-rack0-node0", "block0-rack0-node1"} & set(parts[0]["nodes"])


def test_cli_without_partitions_has_no_key(tp, tmp_path):
    from test_cli import run_json
    import copy
    d = copy.deepcopy(NVL)
    del d["state"]["x_partitions"]
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and "x_partitions" not in out["placement"]


def test_cli_other_tenant_stays_off_the_partition(tp, tmp_path):
    from test_cli import run_json
    import copy
    d = copy.deepcopy(NVL)
    d["request"] = {"id": "c", "count": 2, "tenant": "tb"}
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0
    assert "block0-rack0-node1" not in out["placement"]["nodes"]
    d["state"]["x_partitions"]["channels"] = 1   # one channel, a holds it: busy for 8 GPUs
    d["request"] = {"id": "b", "count": 8, "tenant": "ta"}
    rc, out = run_json(tmp_path, "place", d)
    assert out["status"] == "busy" and "IMEX channels" in out["message"], out
