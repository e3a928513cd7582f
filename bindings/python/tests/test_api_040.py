# SPDX-License-Identifier: MIT
"""The Python side of the 0.4.0 reliability API: the work budget of tp_replace_ext and
tp_cluster_copy (a plan applies to copies of its cluster, never to an unrelated one)."""

import pytest


def hostile(tp, nodes=16):
    """A job on GPUs 0-3 of every 8-GPU node in groups of 2 inside a node, one GPU of each
    group failed: one sub-request per failure, each reading the whole job."""
    t = tp.Topology.generate(["su", "node"], [1, nodes], 8)
    c = tp.Cluster(t)
    devs = ["su0-node%d/%d" % (n, g) for n in range(nodes) for g in range(4)]
    c.assign("big", devs, shape=tp.Request(count=len(devs), group_size=2, group_level="node"))
    return c, devs[::2]


def test_replace_budget(tp):
    c, failed = hostile(tp)
    fp = c.fingerprint
    ok = c.replace("big", failed)
    assert ok.ok and len(ok.replaced) == len(failed)
    # 64 ranks per sub-request: room for 3 of the 32
    with pytest.raises(tp.LimitExceeded, match=r"after 3 of 32 sub-requests .*opts.max_work 200"):
        c.replace("big", failed, max_work=200)
    with pytest.raises(tp.LimitExceeded, match=r"opts.max_time_us 1\)"):
        c.replace("big", failed, max_work=2 ** 64 - 1, max_time_us=1)
    assert c.fingerprint == fp
    assert c.replace("big", failed, max_work=64 * 32).device_ids == ok.device_ids
    for bad in (0, -1, 2 ** 64, 1.5, True):
        with pytest.raises(tp.InvalidArgument, match="replace.max_work"):
            c.replace("big", failed, max_work=bad)


def test_copy_keeps_state_and_lineage(tp):
    t = tp.Topology.generate(["rack", "node"], [1, 2], 8)
    c = tp.Cluster(t)
    c.assign("j0", ["rack0-node0/0", "rack0-node0/1"], migratable=True)
    c.assign("j1", ["rack0-node1/0", "rack0-node1/1"], migratable=True)
    d = c.copy()
    assert d.fingerprint == c.fingerprint and d.jobs == c.jobs and d.check()
    plan = c.defrag_plan(tp.Request(count=8, required="node", id="whole"))
    assert plan.ok and len(plan.steps) == 2
    # the same state built on its own is another cluster: refused
    other = tp.Cluster(t)
    other.assign("j0", ["rack0-node0/0", "rack0-node0/1"], migratable=True)
    other.assign("j1", ["rack0-node1/0", "rack0-node1/1"], migratable=True)
    assert other.fingerprint == c.fingerprint
    with pytest.raises(tp.InvalidArgument, match="the plan was made on another cluster"):
        other.apply_step(plan, 0)
    for i in range(len(plan.steps)):
        d.apply_step(plan, i)
    assert "whole" in d.jobs and "whole" not in c.jobs
    # a placement made on the source cannot be committed to the copy
    e = c.copy()
    p = c.place(tp.Request(count=2, id="p"))
    with pytest.raises(tp.InvalidArgument, match="the placement was made on another cluster"):
        e.commit(p)
