# SPDX-License-Identifier: MIT
"""The Pythonic layer: objects, queries, exceptions with the library's messages, lifetimes."""

import gc
import itertools

import pytest


def small(tp):
    """2 blocks; b1 has racks r1 (x1, x2) and r2 (x3); b2 has r3 (x4 with 8 GPUs)."""
    return (tp.TopologyBuilder(["block", "rack", "node"])
            .set_fabric("rack", "nvlink", 900, 3.4)
            .add_node("x1", ["b1", "r1"], 4, model="GB200", memory_gb=186)
            .add_node("x2", ["b1", "r1"], 4, perf=[1.0, 1.0, 0.5, 1.0])
            .add_node("x3", ["b1", "r2"], 4)
            .add_node("x4", ["b2", "r3"], 8)
            .add_failure_domain("power", "pdu-a", "x1")
            .add_failure_domain("power", "pdu-a", "x3", 0)
            .build())


# -- topology ---------------------------------------------------------------------------------

def test_version(tp):
    assert tp.version() >= 100 and tp.version_string().count(".") == 2
    assert tp.__version__ == tp.version_string()


def test_builder_and_queries(tp):
    t = small(tp)
    assert t.levels == ("block", "rack", "node") and t.node_level == 2
    assert t.node_count == 4 and t.device_count == 20
    assert t.level("rack") == 1 and t.level(1) == 1
    assert t.domain_count("block") == 2 and t.domain_count("rack") == 3
    r2 = t.domain_by_path("rack", "b1/r2")
    assert t.domain_path("rack", r2) == "b1/r2" and t.domain_name("rack", r2) == "r2"
    assert t.domain_parent("rack", r2) == t.domain_by_path("block", "b1")
    assert t.domain_parent("block", 0) is None
    assert [t.node_name(n) for n in t.domain_nodes("block", t.domain_by_path("block", "b1"))] \
        == ["x1", "x2", "x3"]
    assert len(t.domain_devices("rack", t.domain_by_path("rack", "b1/r1"))) == 8
    assert t.device_name(t.device("x2/3")) == "x2/3"
    assert t.device_index("x4/7") == 7 and t.node_name(t.device_node("x4/7")) == "x4"
    assert t.device_perf("x2/2") == 0.5 and t.device_perf("x2/1") == 1.0
    assert t.node_model("x1") == "GB200" and t.node_model("x3") is None
    assert t.node_memory_gb("x1") == 186
    assert t.common_level("x1/0", "x1/1") == "node"
    assert t.common_level("x1/0", "x2/0") == "rack"
    assert t.common_level("x1/0", "x3/0") == "block"
    assert t.common_level("x1/0", "x4/0") == "cluster"
    assert t.fabric("rack") == tp.Fabric("nvlink", 900, 3.4)
    assert t.fabric("cluster").kind == "ib"
    assert t.fd_kinds == ("power",)
    assert t.fd_name("power", t.device_fd("power", "x1/2")) == "pdu-a"
    assert t.fd_name("power", t.device_fd("power", "x4/0")) == "x4"
    assert t.memory > 0
    assert "nodes=4" in repr(t)


def test_generators(tp):
    t = tp.Topology.nvl72(2, 3)
    assert t.levels == ("block", "rack", "node")
    assert t.node_count == 2 * 3 * 18 and t.device_count == 2 * 3 * 72
    assert t.node_name(0) == "block0-rack0-node0"
    assert t.domain_path("rack", 4) == "block1/rack1"
    assert t.fabric("rack").kind == "nvlink"
    h = tp.Topology.hgx(2, 4)
    assert h.levels == ("su", "node") and h.device_count == 64
    g = tp.Topology.generate(["rack", "node"], [2, 3], 8, model="H100")
    assert g.node_name(5) == "rack1-node2" and g.node_model(5) == "H100"


def test_topology_has_no_public_constructor(tp):
    with pytest.raises(TypeError, match="TopologyBuilder"):
        tp.Topology()


# -- errors -----------------------------------------------------------------------------------

def test_builder_errors_carry_the_library_message(tp):
    b = tp.TopologyBuilder(["rack", "node"]).add_node("x1", ["r1"], 4)
    with pytest.raises(tp.AlreadyExists) as e:
        b.add_node("x1", ["r2"], 4)
    assert "x1" in str(e.value) and e.value.code == tp.AlreadyExists.code
    with pytest.raises(tp.InvalidArgument) as e:
        b.add_node("x/2", ["r1"], 4)
    assert isinstance(e.value, ValueError) and isinstance(e.value, tp.TopoplaceError)
    assert "'/'" in str(e.value)           # the library's own message
    with pytest.raises(tp.InvalidArgument):
        b.add_node("x9", ["r1"], 0)
    with pytest.raises(tp.NotFound):
        b.add_failure_domain("power", "p", "nope")
    # a failed call leaves the builder unchanged
    assert b.build().node_count == 1


def test_bad_levels(tp):
    with pytest.raises(tp.InvalidArgument, match="cluster"):
        tp.TopologyBuilder(["cluster", "node"])
    with pytest.raises(tp.TopoplaceError):
        tp.TopologyBuilder(["l%d" % i for i in range(9)])


def test_lookup_errors(tp):
    t = small(tp)
    with pytest.raises(tp.NotFound, match="nope"):
        t.node("nope")
    with pytest.raises(tp.NotFound):
        t.level("pod")
    with pytest.raises(LookupError):
        t.device("x1/9")
    with pytest.raises(tp.NotFound):
        t.domain_by_path("rack", "b1/r9")


def test_check_maps_every_code(tp):
    from topoplace import errors
    for cls in (tp.InvalidArgument, tp.OutOfMemory, tp.NotFound, tp.AlreadyExists,
                tp.Infeasible, tp.Busy, tp.Fragmented, tp.NoPlan, tp.ParseError,
                tp.LimitExceeded, tp.Corrupt):
        with pytest.raises(cls) as e:
            errors.check(cls.code, None, "msg %s" % cls.name)
        assert str(e.value) == "msg %s" % cls.name
        assert tp.strerror(cls.code) != "unknown error"
    with pytest.raises(tp.TopoplaceError) as e:
        errors.check(-999)
    assert e.value.code == -999
    assert errors.check(0) == 0 and errors.check(7) == 7


# -- cluster ----------------------------------------------------------------------------------

def test_cluster_state(tp):
    t = small(tp)
    c = tp.Cluster(t)
    assert c.topology is t and c.free_total_count == 20
    fp0 = c.fingerprint
    c.assign("a", ["x1/0", "x1/1"], job_class="inference", priority=3, tenant="t1",
             migratable=True, checkpoint_s=30,
             shape=tp.Request(count=2, required="rack"))
    assert c.jobs == ["a"] and c.free_total_count == 18
    assert c.job_device_names("a") == ["x1/0", "x1/1"]
    info = c.job_info("a")
    assert (info.job_class, info.priority, info.tenant, info.migratable, info.checkpoint_s) \
        == ("inference", 3, "t1", True, 30)
    assert info.shape.count == 2 and info.shape.required == "rack"
    assert c.device_state("x1/0") == ("held", "a")
    assert c.free_count("rack", "b1/r1") == 6 and c.free_node_count("rack", "b1/r1") == 1
    c.set_down(["x4/7"])
    c.set_cordoned(["x3"])
    assert c.down_total_count == 1 and c.cordoned_total_count == 4 and c.free_total_count == 13
    assert c.device_down("x4/7") and c.device_cordoned("x3/2")
    assert c.device_state("x3/0") == ("cordoned", None)
    assert c.tightest("node", 2) == t.node("x1")
    assert c.tightest("node", 9) is None
    assert c.node_histogram("block", "b1")[2] == 1
    assert c.check() is True
    assert c.fingerprint != fp0
    c.release("a")
    c.set_down(["x4/7"], down=False)
    c.set_cordoned(["x3"], cordoned=False)
    assert c.fingerprint == fp0 and c.jobs == []


def test_cluster_errors_carry_the_message(tp):
    c = tp.Cluster(small(tp))
    c.assign("a", ["x1/0"])
    with pytest.raises(tp.AlreadyExists) as e:
        c.assign("b", ["x1/1", "x1/0"])
    assert "x1/0" in str(e.value) or "a" in str(e.value)
    assert c.jobs == ["a"]               # unchanged
    with pytest.raises(tp.NotFound):
        c.release("zz")
    with pytest.raises(tp.InvalidArgument):
        c.assign("c", ["x2/0"], job_class="batch")


def test_savepoints(tp):
    c = tp.Cluster(small(tp))
    fp = c.fingerprint
    with c.savepoint(rollback=True):
        c.assign("a", ["x1"])
        assert c.free_total_count == 16
    assert c.fingerprint == fp and c.jobs == []
    with pytest.raises(RuntimeError):
        with c.savepoint():
            c.assign("a", ["x1"])
            raise RuntimeError("undo")
    assert c.fingerprint == fp
    with c.savepoint() as sp:
        c.assign("a", ["x1"])
    assert c.jobs == ["a"]
    with c.savepoint() as sp:
        c.release("a")
        sp.rollback()
        assert c.jobs == ["a"]


def test_frag_report(tp):
    c = tp.Cluster(small(tp))
    c.assign("a", ["x1"])
    c.assign("b", ["x3/0", "x3/1"])
    f = c.frag()
    assert f.free_count == 14 and f.down_count == 0
    node = f.levels["node"]
    assert (node.domain_count, node.free_count, node.fully_free_count,
            node.largest_free_count) == (4, 14, 2, 8)
    assert node.fragmentation == pytest.approx(2 / 14)
    assert f.levels["block"].fully_free_count == 1 and f.levels["block"].fragmentation == \
        pytest.approx(6 / 14)


# -- requests and placements --------------------------------------------------------------------

def test_request_dataclass_coerces_parts(tp):
    r = tp.Request(count=8, slices=[("rack", 4)], max_per_domain=[{"level": "rack",
                                                                   "devices": 4}],
                   spread=("rack", 2), colocate=("a", "block"), select={"model": "GB200"})
    assert r.slices == [tp.Slice("rack", 4)] and r.max_per_domain[0].devices == 4
    assert r.spread.min_domains == 2 and r.colocate.job == "a"
    assert r.select.model == "GB200"
    with pytest.raises(tp.InvalidArgument):
        tp.Request(count=1, job_class="batch")


def test_place_and_commit(tp):
    t = tp.Topology.nvl72(2, 8)
    c = tp.Cluster(t)
    p = c.place(tp.Request(count=8, id="j", group_size=4, required="rack"))
    assert p.ok and p.status == "ok" and p.job == "j" and len(p.devices) == 8
    assert sum(p.nodes.values()) == 8 and len(p.domains["rack"]) == 1
    assert p.levels_spanned["node"] == 2
    assert p.step_comm_us > 0
    c.commit(p)
    assert c.jobs == ["j"] and c.job_device_names("j") == p.devices
    with pytest.raises(tp.TopoplaceError):
        c.commit(p)                      # the cluster changed since


def test_not_placeable_results(tp):
    c = tp.Cluster(small(tp))
    p = c.place(tp.Request(count=100))
    assert not p.ok and p.status in ("infeasible", "busy") and p.message
    assert p.fit.needed == 100 and p.fit.level == "block"
    with pytest.raises((tp.Infeasible, tp.Busy)):
        p.raise_for_status()


def test_invalid_request_raises_with_the_field(tp):
    c = tp.Cluster(small(tp))
    with pytest.raises(tp.InvalidArgument) as e:
        c.place(tp.Request(count=8, group_size=4, slices=[("rack", 6)]))
    assert "slices[0].size" in str(e.value)
    with pytest.raises((tp.NotFound, tp.InvalidArgument)) as e:
        c.place(tp.Request(count=2, required="pod"))
    assert "pod" in str(e.value)


def dgx2_like(tp):
    """16 GPUs under 8 leaf PCIe switches (2 each, 2 leaves per top switch), one NIC per leaf."""
    nt = tp.NodeType(16)
    for top in range(4):
        t = nt.add_pcie_switch()
        for half in range(2):
            leaf = nt.add_pcie_switch(t)
            k = 2 * top + half
            nt.set_gpu_switch(2 * k, leaf).set_gpu_switch(2 * k + 1, leaf)
            nt.add_nic("mlx5_%d" % k, leaf, 25.0)
    return nt


def test_gpu_nic_pairs(tp):
    nt = dgx2_like(tp)
    t = (tp.TopologyBuilder(["rack", "node"])
         .add_node("d0", ["r0"], 16, node_type=nt)
         .add_node("d1", ["r0"], 16, node_type=nt)
         .add_node("plain", ["r1"], 16)
         .build())
    c = tp.Cluster(t)
    p = c.place(tp.Request(count=8, required="node", gpu_nic_pairs=True))
    assert p.ok, p.message
    assert p.nics == ["mlx5_%d" % k for k in range(8)]
    assert [int(d.split("/")[1]) // 2 for d in p.devices] == list(range(8))
    assert c.place(tp.Request(count=8, required="node")).nics == []
    bad = c.place(tp.Request(count=9, required="node", gpu_nic_pairs=True))
    assert bad.status == "infeasible" and "request.gpu_nic_pairs" in bad.message
    assert c.place(tp.Request(count=17, gpu_nic_pairs=True)).status == "infeasible"
    assert c.place(tp.Request(count=9, required="node")).ok  # without pairs it fits
    c.commit(p)
    assert c.job_info(p.job).shape.gpu_nic_pairs is True
    r = c.replace(p.job, [p.devices[3]])
    assert r.ok and r.nics == p.nics  # the replacement takes the NIC its GPU left
    with pytest.raises(tp.InvalidArgument) as e:
        c.place(tp.Request(count=1, gpu_nic_pairs=2))
    assert "request.gpu_nic_pairs" in str(e.value)


def test_comm_breaks_ties_by_step_time(tp):
    types = []
    for gbps in (50.0, 900.0):
        nt = tp.NodeType(4)
        for a in range(4):
            for b in range(a + 1, 4):
                nt.set_nvlink(a, b, gbps)
        types.append(nt)
    t = (tp.TopologyBuilder(["rack", "node"])
         .add_node("slow", ["r0"], 4, node_type=types[0])
         .add_node("fast", ["r0"], 4, node_type=types[1])
         .build())
    c = tp.Cluster(t)
    comm = {"tp": 2, "tp_bytes": 64 * 2**20, "tp_msgs": 128}
    assert c.place(tp.Request(count=2, required="node")).devices[0].startswith("slow/")
    p = c.place(tp.Request(count=2, required="node", comm=comm))
    assert p.ok and p.devices[0].startswith("fast/"), p.devices
    c.commit(p)
    shape = c.job_info(p.job).shape
    assert shape.comm["tp"] == 2 and shape.comm["tp_msgs"] == 128
    with pytest.raises(tp.InvalidArgument) as e:
        c.place(tp.Request(count=2, required="node", comm={"tp": 3}))
    assert "request.comm: model.tp 3" in str(e.value)


def test_comm_efficiency_floor_answers_busy(tp):
    # two 4-GPU nodes of one rack: NVLink inside a node, InfiniBand between them
    t = (tp.TopologyBuilder(["rack", "node"])
         .set_fabric("node", "nvlink", 900, 3.4)
         .set_fabric("rack", "ib", 50, 10)
         .add_node("a", ["r0"], 4)
         .add_node("b", ["r0"], 4)
         .build())
    c = tp.Cluster(t)
    c.assign("x", ["a/0", "a/1", "b/0", "b/1"])   # any 4 free GPUs straddle the nodes
    comm = {"tp": 4, "compute_us": 1e5, "tp_bytes": 64 * 2**20, "tp_msgs": 128}
    p = c.place(tp.Request(count=4, comm=comm))
    assert p.ok
    eff = tp.efficiency(t, p.devices, tp.StepModel(**comm))
    assert eff < 0.5
    p = c.place(tp.Request(count=4, comm=dict(comm, min_efficiency=0.5)))
    assert p.status == "busy" and not p.devices
    assert p.message.startswith("busy: request.comm.min_efficiency 0.5: the best placement "
                                "now reaches %.3f" % eff), p.message
    assert p.message.endswith("; the topology has one fabric class"), p.message
    p = c.place(tp.Request(count=4, comm=dict(comm, min_efficiency=0.5, no_floor_search=1)))
    assert p.status == "busy"
    assert p.message.endswith("; not searched further (request.comm.no_floor_search)"), p.message
    assert tp.StepModel().no_floor_search == 0
    c.release("x")
    p = c.place(tp.Request(count=4, comm=dict(comm, min_efficiency=1.0)))
    assert p.ok and len({d.split("/")[0] for d in p.devices}) == 1, p.devices
    c.commit(p)
    assert c.job_info(p.job).shape.comm["min_efficiency"] == 1.0
    with pytest.raises(tp.InvalidArgument) as e:
        c.place(tp.Request(count=4, comm=dict(comm, min_efficiency=2.0)))
    assert "request.comm: model.min_efficiency 2 is outside [0, 1]" in str(e.value)
    with pytest.raises(tp.InvalidArgument) as e:
        tp.StepModel(min_efficiency="x")._to_c()
    assert str(e.value) == "model.min_efficiency 'x' is not a number"


def test_replace(tp):
    c = tp.Cluster(small(tp))
    c.assign("a", ["x1/0", "x1/1"])
    p = c.replace("a", ["x1/1"])
    assert p.ok and list(p.replaced) == ["x1/1"]
    assert p.devices[0] == "x1/0" and p.devices[1] == p.replaced["x1/1"]
    c.commit(p)
    assert c.job_device_names("a") == p.devices


def test_defrag_plan_when_it_fits_already(tp):
    c = tp.Cluster(small(tp))
    fp = c.fingerprint
    plan = c.defrag_plan(tp.Request(count=4, id="n"), tp.DefragPolicy(max_moves=0))
    assert plan.ok and [s.action for s in plan.steps] == ["place"]
    assert plan.cost_s == 0 and plan.placement.devices == plan.steps[0].to_devices
    assert c.fingerprint == fp
    c.apply_step(plan, 0)
    assert c.jobs == ["n"]


def test_defrag_keeps_migrants_local_unless_allowed(tp):
    c = tp.Cluster(small(tp))
    c.assign("a", ["x1/0", "x1/1"], migratable=True, preemptible=False, checkpoint_s=10)
    c.assign("b", ["x2/%d" % i for i in range(4)], preemptible=False)
    c.assign("c", ["x3/0", "x3/1", "x3/2"], preemptible=False)
    c.assign("d", ["x4/%d" % i for i in range(7)], preemptible=False)
    req = tp.Request(count=4, required="node", id="n")
    fp = c.fingerprint
    # a's only new home is x3/3 + x4/7: two nodes, racks and blocks instead of one
    plan = c.defrag_plan(req, tp.DefragPolicy())
    assert not plan.ok and plan.status == "none"
    assert "job a moved, but no free devices keep it as local as it sits" in plan.message
    plan = c.defrag_plan(req, tp.DefragPolicy(allow_less_local=True))
    assert plan.ok and [s.action for s in plan.steps] == ["migrate", "place"]
    assert sorted(plan.steps[0].to_devices) == ["x3/3", "x4/7"]
    assert c.fingerprint == fp


def test_defrag_compact_for_frees_the_rack_a_request_needs(tp):
    c = tp.Cluster(small(tp))
    c.assign("a", ["x3/0", "x3/1"], migratable=True, preemptible=False, checkpoint_s=10)
    c.assign("b", ["x1/0", "x1/1"], migratable=True, preemptible=False, checkpoint_s=10)
    c.assign("c", ["x4/0"], preemptible=False)
    req = tp.Request(count=8, required="rack", id="n")
    fp = c.fingerprint
    # no rack has 8 free GPUs; r1 (b's) is the cheapest to empty that then holds the request
    plan = c.defrag_compact_for("rack", req)
    assert plan.ok and [s.action for s in plan.steps] == ["migrate", "place"]
    assert plan.steps[0].job == "b" and sorted(plan.steps[0].to_devices) == ["x3/2", "x3/3"]
    assert sorted(plan.steps[1].to_devices) == sorted(
        ["x1/%d" % i for i in range(4)] + ["x2/%d" % i for i in range(4)])
    assert c.fingerprint == fp
    for i in range(len(plan.steps)):
        c.apply_step(plan, i)
    assert sorted(c.jobs) == ["a", "b", "c", "n"]
    # a request that fits already: the place step alone
    plan = c.defrag_compact_for("rack", tp.Request(count=1, id="m"))
    assert plan.ok and [s.action for s in plan.steps] == ["place"]
    with pytest.raises(tp.NotFound) as e:
        c.defrag_compact_for("shelf", req)
    assert "level 'shelf' is not a level of the topology" in str(e.value)


# -- lifetimes --------------------------------------------------------------------------------

def _objects(tp, with_placement):
    t = small(tp)
    c = tp.Cluster(t)
    c.assign("a", ["x1/0"])
    objs = {"t": t, "c": c, "b": tp.TopologyBuilder(["node"]).add_node("n", [], 1)}
    if with_placement:
        objs["p"] = c.place(tp.Request(count=2))
    return objs


@pytest.mark.parametrize("order", list(itertools.permutations("tcb")))
def test_drop_in_any_order(tp, order):
    objs = _objects(tp, False)
    for k in order:
        del objs[k]
        gc.collect()


def test_drop_placement_in_any_order(tp):
    for order in itertools.permutations("tcpb"):
        objs = _objects(tp, True)
        for k in order:
            del objs[k]
            gc.collect()


def test_closing_a_parent_keeps_its_children_working(tp):
    t = small(tp)
    c = tp.Cluster(t)
    t.close()
    assert t.closed
    with pytest.raises(tp.ClosedError):
        t.node_count
    c.assign("a", ["x1/0"])             # the cluster keeps the C topology alive
    assert c.job_device_names("a") == ["x1/0"]
    del t
    gc.collect()
    assert c.free_total_count == 19


def test_use_after_close_raises(tp):
    c = tp.Cluster(small(tp))
    with c:
        c.assign("a", ["x1/0"])
    assert c.closed
    for call in (lambda: c.free_total_count, lambda: c.assign("b", ["x2/0"]), lambda: c.jobs,
                 lambda: c.frag(), lambda: c.savepoint().__enter__()):
        with pytest.raises(tp.ClosedError, match="cluster is closed"):
            call()
    c.close()                           # closing twice is fine
    b = tp.TopologyBuilder(["node"])
    b.close()
    with pytest.raises(tp.ClosedError):
        b.add_node("n", [], 1)
    t = small(tp)
    t.close()
    with pytest.raises(tp.ClosedError, match="topology is closed"):
        tp.Cluster(t)


def test_cycles_are_collected_without_crashing(tp):
    t = small(tp)
    c = tp.Cluster(t)
    c.me = c                            # a cycle through the cluster
    t.friend = c                        # and one through the topology
    del t, c
    gc.collect()


def test_comm_fabric_fit(tp):
    # two racks of one 4-GPU node each: r0 joined by NVLink, r1 by InfiniBand (two fabric
    # classes); a 1-GPU job takes the tighter node without fabric_fit, the slower fabric with it
    t = (tp.TopologyBuilder(["rack", "node"])
         .set_fabric("node", "nvlink", 900, 3.4)
         .set_fabric("rack", "ib", 50, 10)
         .add_node("a", ["r0"], 4)
         .add_node("b", ["r1"], 4)
         .set_domain_fabric("rack", "r0", "nvlink", 900, 3.4)
         .build())
    c = tp.Cluster(t)
    c.assign("x", ["a/0", "a/1", "a/2"])
    comm = {"compute_us": 1e5}
    p = c.place(tp.Request(count=1, comm=comm))
    assert p.ok and p.devices == ["a/3"], p.devices
    p = c.place(tp.Request(count=1, comm=dict(comm, fabric_fit=0.9)))
    assert p.ok and p.devices[0].startswith("b/"), p.devices
    assert tp.StepModel().fabric_fit == 0.0
    with pytest.raises(tp.InvalidArgument) as e:
        c.place(tp.Request(count=1, comm=dict(comm, fabric_fit=1.5)))
    assert "request.comm: model.fabric_fit 1.5 is outside [0, 1]" in str(e.value)
