# SPDX-License-Identifier: MIT
"""The Python side of the 0.3.0 C API: the writer guard (tp_cluster_create_ext), the planner's
work budget and tp_plan_stats, the builder's limits and tp_topology_builder_from_slurm_ext,
the nvidia-smi importer, GPU bus ids, NIC kinds and localities."""

import os

import pytest

from conftest import PKG_SRC
from test_cli_import import DGX

DATA = os.path.normpath(os.path.join(PKG_SRC, "..", "..", "tests", "data"))
TREE = "SwitchName=s0 Nodes=n[1-4]\nSwitchName=s1 Nodes=n[5-8]\nSwitchName=top Switches=s[0-1]\n"


# -- cluster options --------------------------------------------------------------------------

def test_writer_guard(tp):
    t = tp.Topology.generate(["rack", "node"], [1, 2], 4)
    assert tp.Cluster(t).writer_guard is False
    c = tp.Cluster(t, writer_guard=True)
    assert c.writer_guard is True
    # one writer at a time: every writing call passes, savepoints included
    with c.savepoint(rollback=True):
        c.assign("a", ["rack0-node0"])
    p = c.place(tp.Request(count=4, id="b"))
    c.commit(p)
    c.set_cordoned(["rack0-node0/0"])
    assert c.jobs == ["b"] and c.device_cordoned("rack0-node0/0")


# -- the planner's work budget and its figures ------------------------------------------------

def six_racks(tp):
    """Six racks of four 4-GPU nodes, two small migratable jobs in each: a whole rack needs a
    migration wherever it goes, so the planner searches several candidates."""
    t = tp.Topology.generate(["rack", "node"], [6, 4], 4)
    c = tp.Cluster(t)
    for r in range(6):
        c.assign("j%d" % r, ["rack%d-node%d/0" % (r, r % 4)], migratable=True)
        c.assign("k%d" % r, ["rack%d-node%d/1" % (r, (r + 1) % 4)], migratable=True)
    return c, tp.Request(count=16, required="rack", id="big")


def test_plan_stats_and_budget(tp):
    c, req = six_racks(tp)
    full = c.defrag_plan(req)
    assert full.ok and full.stats.budget is None
    assert full.stats.evaluated > 1 and full.stats.simulated >= 1 and full.stats.scanned >= 1
    limited = c.defrag_plan(req, tp.DefragPolicy(max_candidates=1))
    # the best plan found within the budget, flagged
    assert limited.ok and limited.stats.budget == "max_candidates"
    assert limited.stats.evaluated == 1
    limited = c.defrag_plan(req, tp.DefragPolicy(max_simulations=1))
    assert limited.ok and limited.stats.budget == "max_simulations"
    assert limited.stats.simulated == 1
    unlimited = c.defrag_plan(req, tp.DefragPolicy(max_candidates=None, max_simulations=None))
    assert unlimited.stats == full.stats and unlimited.cost_s == full.cost_s
    # a request that fits already: the place step, no search
    fits = c.defrag_plan(tp.Request(count=2, id="small"))
    assert fits.ok and fits.stats == tp.DefragStats(0, 0, 0, None)
    # a failed plan has figures too
    none = c.defrag_plan(req, tp.DefragPolicy(migrate=False, preempt=False))
    assert none.status == "none" and none.stats is not None


def test_budget_fields_reach_the_c_struct(tp):
    keep = []
    p = tp.DefragPolicy(max_candidates=None, max_simulations=7, max_time_us=5)._to_c(keep)
    assert (p.max_candidates, p.max_simulations, p.max_time_us) == (0xFFFFFFFF, 7, 5)
    p = tp.DefragPolicy()._to_c(keep)
    assert p.max_time_us == 0


@pytest.mark.parametrize("field,value,message", [
    ("max_candidates", 0, "policy.max_candidates: 0 is not an integer from 1 to 4294967294 "
                          "(None: no limit)"),
    ("max_simulations", 2 ** 32, "policy.max_simulations: 4294967296 is not an integer from 1 "
                                 "to 4294967294 (None: no limit)"),
    ("max_simulations", 1.5, "policy.max_simulations: 1.5 is not an integer from 1 to "
                             "4294967294 (None: no limit)"),
    ("max_time_us", 0, "policy.max_time_us: 0 is not a positive integer of at most 64 bits "
                       "(None: no limit)"),
])
def test_bad_budgets(tp, field, value, message):
    c, req = six_racks(tp)
    fp = c.fingerprint
    with pytest.raises(tp.InvalidArgument) as e:
        c.defrag_plan(req, tp.DefragPolicy(**{field: value}))
    assert str(e.value) == message and c.fingerprint == fp


# -- builder limits and the Slurm importer's budgets ------------------------------------------

def test_builder_limits(tp):
    b = tp.TopologyBuilder(["rack", "node"]).set_limits(8, 2)
    b.add_node("a", ["r"], gpus=4).add_node("b", ["r"], gpus=4)
    with pytest.raises(tp.LimitExceeded) as e:
        b.add_node("c", ["r"], gpus=4)
    assert str(e.value) == ("node c: the topology would have 3 nodes, more than max_nodes 2 "
                            "(raise it with tp_topology_builder_set_limits)")
    assert b.build().node_count == 2              # the failed add left the builder as it was
    with pytest.raises(tp.InvalidArgument) as e:
        b.set_limits(4, 4)
    assert str(e.value) == ("the builder already holds 2 nodes and 8 devices, more than "
                            "max_nodes 4 or max_devices 4")
    with pytest.raises(tp.InvalidArgument) as e:
        b.set_limits(0, 4)
    assert str(e.value) == "max_devices 0 is not a positive integer of at most 32 bits"
    b.set_limits(12, 3).add_node("c", ["r"], gpus=4)
    assert b.build().device_count == 12


def test_from_slurm(tp):
    b = tp.TopologyBuilder.from_slurm(TREE, 4)
    assert b.levels == ("switch1", "switch0", "node")
    b.set_fabric("switch0", "ib", 50.0, 2.0)       # levels by name work on such a builder
    t = b.build()
    assert (t.node_count, t.device_count, t.domain_path(1, 1)) == (8, 32, "top/s1")
    assert t.fabric("switch0").gbps == 50.0


@pytest.mark.parametrize("conf,kw,cls,message", [
    (TREE, {"max_nodes": 5}, "LimitExceeded",
     "line 2: more than 5 nodes, the budget tp_slurm_options.max_nodes"),
    (TREE, {"max_devices": 12}, "LimitExceeded",
     "line 1: 4 nodes of 4 GPUs are 16 devices, more than the budget "
     "tp_slurm_options.max_devices 12"),
    ("Foo=bar\n", {}, "ParseError",
     "line 1: unknown key 'Foo' (expected SwitchName, BlockName, BlockSizes, BlockLevels, "
     "AllowGaps or RingName)"),
    (TREE, {"max_nodes": -1}, "InvalidArgument",
     "max_nodes -1 is not a positive integer of at most 32 bits"),
])
def test_from_slurm_errors(tp, conf, kw, cls, message):
    with pytest.raises(getattr(tp, cls)) as e:
        tp.TopologyBuilder.from_slurm(conf, 4, **kw)
    assert str(e.value) == message


def test_from_slurm_budget_stays_with_the_builder(tp):
    b = tp.TopologyBuilder.from_slurm(TREE, 4, max_nodes=8)
    with pytest.raises(tp.LimitExceeded) as e:
        b.add_node("n9", ["top", "s1"], gpus=4)
    assert "more than max_nodes 8" in str(e.value)


# -- node types: nvidia-smi, bus ids, NIC kinds and localities --------------------------------

def test_from_nvidia_smi(tp):
    nt = tp.NodeType.from_nvidia_smi(DGX)
    assert (nt.gpu_count, nt.nic_count, nt.pcie_switch_count) == (4, 2, 2)
    assert nt.nvlink_gbps(0, 3) == 300.0
    assert [nt.nic_name(i) for i in range(2)] == ["mlx5_0", "mlx5_1"]
    assert [nt.nic_kind(i) for i in range(2)] == ["rdma", "rdma"]
    assert [nt.gpu_nearest_nic(g) for g in range(4)] == [0, 0, 1, 1]
    assert tp.NodeType.from_nvidia_smi(DGX.encode(), nvlink_link_gbps=50).nvlink_gbps(0, 1) \
        == 600.0
    with pytest.raises(tp.ParseError) as e:
        tp.NodeType.from_nvidia_smi(DGX.replace("NV12\tPIX", "NVX\tPIX", 1))
    assert str(e.value) == ("line 2, column 20: 'NVX' is not a topology entry (X, NV#, PIX, "
                            "PXB, PHB, NODE, SYS)")
    with pytest.raises(tp.InvalidArgument) as e:
        tp.NodeType.from_nvidia_smi(DGX, nvlink_link_gbps=0)
    assert str(e.value) == "opts.nvlink_link_gbps 0 is not a number > 0 and up to 156.25"


def test_bus_ids_kinds_and_nearest_nic(tp):
    with open(os.path.join(DATA, "two-switch-nics.xml"), "rb") as f:
        nt = tp.NodeType.from_hwloc_xml(f.read())
    assert [nt.gpu_bus_id(g) for g in range(4)] == ["0000:03:00.0", "0000:04:00.0",
                                                    "0000:0a:00.0", "0000:0b:00.0"]
    assert [nt.nic_kind(i) for i in range(2)] == ["rdma", "ethernet"]
    assert [nt.nic_switch(i) for i in range(2)] == [0, -1]
    assert [nt.pcie_switch_parent(s) for s in range(2)] == [-1, -1]
    assert nt.gpu_nearest_nic(2) == 0          # RDMA before the Ethernet port on the bridge


def test_hand_made_node_type(tp):
    nt = tp.NodeType(2)
    assert nt.gpu_bus_id(0) is None and nt.gpu_nearest_nic(0) is None
    nt.set_gpu_bus_id(1, "0000:41:00.0")
    assert nt.gpu_bus_id(1) == "0000:41:00.0"
    eth = nt.add_nic("eth0")
    ib = nt.add_nic("ib0")
    assert nt.nic_kind(eth) == "unknown"
    # kinds: the RDMA NIC wins over the Ethernet port, whatever the index
    nt.set_nic_kind(eth, "ethernet").set_nic_kind(ib, "rdma")
    assert nt.gpu_nearest_nic(0) == ib
    # localities break ties between NICs of one kind on the host bridges
    ib1 = nt.add_nic("ib1")
    nt.set_nic_kind(ib1, "rdma")
    nt.set_nic_locality(ib, package=0).set_nic_locality(ib1, package=1)
    nt.set_gpu_locality(0, package=0).set_gpu_locality(1, package=1)
    assert [nt.gpu_nearest_nic(0), nt.gpu_nearest_nic(1)] == [ib, ib1]


@pytest.mark.parametrize("call,cls,message", [
    (lambda nt: nt.gpu_bus_id(5), "InvalidArgument", "unknown GPU 5 (the node type has 2)"),
    (lambda nt: nt.nic_name(0), "InvalidArgument", "unknown NIC 0 (the node type has 0)"),
    (lambda nt: nt.pcie_switch_parent(0), "InvalidArgument",
     "unknown PCIe switch 0 (the node type has 0)"),
    (lambda nt: nt.set_nic_kind(0, "infiniband"), "InvalidArgument",
     "unknown NIC kind 'infiniband' (one of unknown, rdma, ethernet)"),
])
def test_node_type_errors(tp, call, cls, message):
    nt = tp.NodeType(2)
    with pytest.raises(getattr(tp, cls)) as e:
        call(nt)
    assert str(e.value) == message


def test_node_type_errors_from_the_library(tp):
    nt = tp.NodeType(2)
    for call, message in ((lambda: nt.set_gpu_bus_id(0, "a/b"), "GPU 0: bus id contains '/'"),
                          (lambda: nt.set_gpu_bus_id(0, ""), "GPU 0: bus id is empty"),
                          (lambda: nt.set_gpu_locality(0, package=-2),
                           "GPU 0: locality (-2, -1, -1) has a value below -1"),
                          (lambda: nt.set_nic_locality(3, package=0),
                           "NIC 3 does not exist (0 NICs)")):
        with pytest.raises(tp.InvalidArgument) as e:
            call()
        assert str(e.value) == message         # the node type's message
    assert nt.gpu_bus_id(0) is None            # the failed calls changed nothing


# -- error names and the cost model -----------------------------------------------------------

def test_err_name(tp):
    assert [tp.err_name(c) for c in (0, -1, -12, -99)] == ["OK", "EINVAL", "EINTERNAL",
                                                            "UNKNOWN"]
    assert all(tp.err_name(cls.code) == cls.name
               for cls in (tp.InvalidArgument, tp.NoPlan, tp.LimitExceeded))


def test_step_model(tp):
    t = tp.Topology.nvl72(1, 2)                # two racks of 72 GPUs, devices 0-71 in rack 0
    # compute only: the step is the compute time, wherever the devices are
    assert tp.step_us(t, [0, 1, 72, 73], tp.StepModel(dp=4, compute_us=1000.0)) == 1000.0
    m = tp.StepModel(tp=4, dp=2, compute_us=1000.0, tp_bytes=1e6, tp_msgs=10, dp_bytes=1e8)
    packed = list(range(8))                     # two nodes of one rack
    split = [0, 1, 72, 73, 4, 5, 6, 7]          # a tensor group across the racks
    assert tp.efficiency(t, packed, m) == 1.0
    assert tp.step_us(t, split, m) > tp.step_us(t, packed, m)
    eff = tp.efficiency(t, split, m)
    assert 0 < eff < 1
    # names work as ids do
    names = [t.device_name(d) for d in split]
    assert tp.step_us(t, names, m) == tp.step_us(t, split, m)
    # the C struct is TP_STEP_MODEL_INIT for a default model
    from topoplace import _defaults
    from test_api_families import _fields
    assert _fields(tp.StepModel()._to_c()) == _fields(_defaults.c_init("step_model"))


@pytest.mark.parametrize("devices,model,message", [
    (range(6), {"tp": 4, "dp": 2}, "model.tp 4 x model.pp 1 x model.dp 2 is not the 6 devices"),
    (range(8), {"tp": -1}, "model.tp -1 is not an integer from 0 to 4294967295"),
    (range(8), {"dp": 8, "compute_us": "x"}, "model.compute_us 'x' is not a number"),
])
def test_step_model_errors(tp, devices, model, message):
    t = tp.Topology.nvl72(1, 1)
    with pytest.raises(tp.InvalidArgument) as e:
        tp.step_us(t, list(devices), tp.StepModel(**model))
    assert str(e.value) == message


def test_writer_guard_catches_a_second_writer(tp):
    """Two threads write one guarded cluster: the one that comes second while the other is
    inside a long planning call (the GIL is released during C calls) gets Busy; the state stays
    consistent. Repeated until it happens, within a deadline (each try is a fresh chance)."""
    import threading
    import time
    t = tp.Topology.nvl72(4, 16)
    c = tp.Cluster(t, writer_guard=True)
    for r in range(64):
        for n in range(0, 18, 3):
            node = t.node_name(r * 18 + n)
            c.assign("j%d-%d" % (r, n), [node + "/0", node + "/1"], migratable=True)
    fp = c.fingerprint
    last = t.device_count - 1
    done, seen = threading.Event(), []

    def second_writer():
        while not done.is_set():
            try:
                c.set_cordoned([last], False)      # a writing call that changes nothing
            except tp.Busy as e:
                seen.append(e)
    th = threading.Thread(target=second_writer)
    th.start()
    try:
        deadline = time.monotonic() + 60
        policy = tp.DefragPolicy(max_candidates=None, max_simulations=None)
        while not seen and time.monotonic() < deadline:
            try:
                c.defrag_compact("rack", 24, policy)
            except tp.Busy:
                pass                              # the other thread was inside: try again
    finally:
        done.set()
        th.join()
    assert seen, "no second writer was caught in 60 s"
    assert c.fingerprint == fp and c.check()
