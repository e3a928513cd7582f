# SPDX-License-Identifier: MIT
"""The layer split by object family: every public name where it was, deprecated aliases that
warn, properties for argument-free getters, option defaults read from the header, and a
docstring on every public class, method and property."""

import dataclasses
import importlib
import inspect
import warnings

import pytest

from test_api import small

FAMILIES = ("topology", "cluster", "request", "placement", "defrag", "cost")


# -- names ------------------------------------------------------------------------------------

def test_every_public_name_is_where_it_was(tp):
    api = importlib.import_module("topoplace.api")
    for name in tp.__all__:
        obj = getattr(tp, name)
        if name in api.__all__:
            assert getattr(api, name) is obj, name
    assert set(api.__all__) <= set(tp.__all__)
    assert api.NONE == 2 ** 32 - 1


def test_each_name_has_one_family(tp):
    """Each public class or function is defined in exactly one module, and topoplace gives
    that same object."""
    seen = {}
    for fam in FAMILIES:
        mod = importlib.import_module("topoplace." + fam)
        for name in mod.__all__:
            assert name not in seen, "%s in %s and %s" % (name, seen.get(name), fam)
            seen[name] = fam
            assert getattr(tp, name) is getattr(mod, name)
            assert getattr(mod, name).__module__ == "topoplace." + fam
    assert {"Topology", "Cluster", "Request", "Placement", "Plan"} <= set(seen)


def test_core_calls_do_not_ask_whether_the_library_has_them(tp, monkeypatch):
    from topoplace import _native
    monkeypatch.setattr(_native, "has", lambda name: False)
    c = tp.Cluster(small(tp))
    p = c.place(tp.Request(count=4, id="n"))
    assert p.ok
    c.commit(p)
    assert c.replace("n", [p.devices[0]]).ok
    assert c.frag().workload is not None
    plan = c.defrag_plan(tp.Request(count=4, id="m"), tp.DefragPolicy(max_moves=0))
    c.apply_step(plan, 0)
    assert c.jobs == ["n", "m"]


# -- no aliases -------------------------------------------------------------------------------

def test_the_old_getter_names_are_gone(tp):
    """0.4.0 removes the 0.3 aliases and renames every count getter with ``_count``."""
    for old in ("free", "free_nodes", "free_total", "down_total", "cordoned_total"):
        assert not hasattr(tp.Cluster, old), old
    assert {"moved_job_count", "moved_device_count"} <= set(tp.Plan.__dataclass_fields__)
    assert "free_count" in tp.LevelFrag.__dataclass_fields__


def test_new_names_do_not_warn(tp):
    c = tp.Cluster(small(tp))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c.free_count("rack", 0)
        c.free_node_count("rack", 0)


# -- properties -------------------------------------------------------------------------------

def test_argument_free_getters_are_read_only_properties(tp):
    t = small(tp)
    b = tp.TopologyBuilder(["rack", "node"])
    c = tp.Cluster(t)
    assert t.levels == ("block", "rack", "node") and b.levels == ("rack", "node")
    assert c.topology is t
    for obj, name in ((t, "levels"), (b, "levels"), (c, "topology"), (t, "node_count"),
                      (t, "device_count"), (t, "fd_kinds"), (t, "memory"), (t, "node_level"),
                      (c, "free_total_count"), (c, "jobs"), (c, "fingerprint"), (c, "memory"),
                      (c, "down_total_count"), (c, "cordoned_total_count"), (c, "closed")):
        assert isinstance(inspect.getattr_static(type(obj), name), property), name
        with pytest.raises(AttributeError):
            setattr(obj, name, None)
    nt = tp.NodeType(4)
    for name in ("gpu_count", "pcie_switch_count", "nic_count", "nvswitch_count", "closed"):
        assert isinstance(inspect.getattr_static(tp.NodeType, name), property), name
    assert (nt.gpu_count, nt.pcie_switch_count, nt.nic_count) == (4, 0, 0)


def test_properties_give_what_the_c_getters_give(tp):
    from topoplace._native import ffi, lib
    t = small(tp)
    c = tp.Cluster(t)
    c.assign("a", ["x1"])
    assert t.levels == tuple(ffi.string(lib.tp_topology_level_name(t._p, i)).decode()
                             for i in range(lib.tp_topology_level_count(t._p)))
    assert t.node_count == lib.tp_topology_node_count(t._p) == 4
    assert c.free_total_count == lib.tp_cluster_free_total_count(c._p) == 16
    assert c.free_count("node", "x2") == lib.tp_cluster_free_count(c._p, 2, t.node("x2")) == 4
    assert c.free_node_count("rack", 0) == lib.tp_cluster_free_node_count(c._p, 1, 0) == 1


def test_placement_and_plan_close(tp):
    c = tp.Cluster(small(tp))
    p = c.place(tp.Request(count=2, id="p"))
    assert not p.closed
    p.close()
    assert p.closed
    with pytest.raises(tp.InvalidArgument, match="open Placement"):
        c.commit(p)
    plan = c.defrag_plan(tp.Request(count=2, id="q"), tp.DefragPolicy(max_moves=0))
    assert plan.ok and not plan.closed and plan.placement.closed    # a plan's is borrowed
    plan.close()
    assert plan.closed and plan.steps                                  # the steps stay
    with pytest.raises(tp.InvalidArgument, match="open Plan"):
        c.apply_step(plan, 0)
    assert c.jobs == []


# -- defaults ---------------------------------------------------------------------------------

def test_defaults_are_the_header_initialisers(tp):
    from topoplace import _defaults
    from topoplace._native import lib
    pol = _defaults.c_init("defrag_policy")
    assert pol.version == lib.TP_DEFRAG_POLICY_VERSION
    assert dict(_defaults.DEFRAG_POLICY) == {
        "migrate": True, "preempt": True, "allow_interactive": False, "max_moves": None,
        "max_cost_s": None, "min_priority_gap": 1, "allow_less_local": False,
        "max_candidates": lib.TP_DEFRAG_MAX_CANDIDATES,
        "max_simulations": lib.TP_DEFRAG_MAX_SIMULATIONS, "max_time_us": None}
    assert dict(_defaults.JOB_OPTIONS) == {
        "job_class": "training", "priority": 0, "tenant": None, "preemptible": True,
        "migratable": False, "checkpoint_s": 60.0}
    assert dict(_defaults.NODE_OPTIONS) == {"model": None, "memory_gb": 0.0, "perf": 1.0}
    assert dict(_defaults.SELECT) == {"model": None, "min_perf": 0.0, "min_memory_gb": 0.0}
    assert _defaults.REQUEST["group_size"] == 1 and _defaults.REQUEST["job_class"] == "training"
    with pytest.raises(TypeError):
        _defaults.JOB_OPTIONS["priority"] = 5           # read-only


def test_dataclasses_and_keywords_take_the_table(tp):
    from topoplace import _defaults
    fields = {f.name: f.default for f in dataclasses.fields(tp.Request)}
    for k, v in _defaults.REQUEST.items():
        assert fields[k] == v, k
    fields = {f.name: f.default for f in dataclasses.fields(tp.DefragPolicy)}
    assert fields == dict(_defaults.DEFRAG_POLICY)
    fields = {f.name: f.default for f in dataclasses.fields(tp.Select)}
    assert {k: fields[k] for k in _defaults.SELECT} == dict(_defaults.SELECT)
    sig = inspect.signature(tp.Cluster.assign).parameters
    for k, v in _defaults.JOB_OPTIONS.items():
        assert sig[k].default == v, k
    for fn in (tp.TopologyBuilder.add_node, tp.TopologyBuilder.generate, tp.Topology.generate):
        sig = inspect.signature(fn).parameters
        for k, v in _defaults.NODE_OPTIONS.items():
            assert sig[k].default == v, (fn, k)


def _fields(cdata):
    ffi = importlib.import_module("topoplace._native").ffi

    def value(name, f):  # arrays (tp_request.box) compare by their elements
        v = getattr(cdata, name)
        return list(v) if f.type.kind == "array" else v
    return {name: value(name, f) for name, f in ffi.typeof(cdata).item.fields}


def test_default_objects_give_the_c_initialisers(tp):
    """A default DefragPolicy is TP_DEFRAG_POLICY_INIT field for field; a default Request
    is TP_REQUEST_INIT but for its count."""
    from topoplace import _defaults
    keep = []
    assert _fields(tp.DefragPolicy()._to_c(keep)) == _fields(_defaults.c_init("defrag_policy"))
    got = _fields(tp.Request(count=3)._to_c(keep))
    want = _fields(_defaults.c_init("request"))
    assert got.pop("count") == 3 and want.pop("count") == 0
    assert got.pop("group_size") == 1 and want.pop("group_size") == 0   # 0 means 1
    assert got == want


def test_commit_without_options_takes_the_request(tp):
    c = tp.Cluster(small(tp))
    p = c.place(tp.Request(count=2, id="j", job_class="inference", priority=4, tenant="t"))
    c.commit(p)
    info = c.job_info("j")
    assert (info.job_class, info.priority, info.tenant, info.checkpoint_s) == \
        ("inference", 4, "t", 60.0)
    p = c.place(tp.Request(count=2, id="k", job_class="inference", priority=4))
    c.commit(p, checkpoint_s=5)
    info = c.job_info("k")
    assert (info.job_class, info.priority, info.checkpoint_s) == ("training", 0, 5.0)


# -- docstrings -------------------------------------------------------------------------------

def _public_members(cls):
    for name, member in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(member, (property, classmethod, staticmethod)) or callable(member):
            yield name, member


def test_every_public_class_and_method_has_a_docstring(tp):
    missing = []
    for name in tp.__all__:
        obj = getattr(tp, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if inspect.isclass(obj) and obj.__module__.startswith("topoplace."):
            for mname, member in _public_members(obj):
                fn = member.fget if isinstance(member, property) else \
                    getattr(member, "__func__", member)
                if not (fn.__doc__ or "").strip():
                    missing.append("%s.%s" % (name, mname))
    assert missing == []
    for fam in FAMILIES + ("_core", "_defaults", "api"):
        assert importlib.import_module("topoplace." + fam).__doc__
