# SPDX-License-Identifier: MIT
"""The scenario reader: topoplace.scenario on the library's importer (tp_scenario_from_json)."""

import copy
import json
import os
import re

import pytest

from topoplace import scenario
from topoplace.scenario import InvalidInput

BASE = {
    "version": 1,
    "topology": {
        "levels": ["block", "rack", "node"],
        "nodes": [
            {"name": "x1", "path": ["b1", "r1"], "gpus": 4},
            {"name": "x2", "path": ["b1", "r1"], "gpus": 4, "model": "GB200", "perf": 1.1},
            {"name": "x3", "path": ["b1", "r2"], "gpus": 4, "memory_gb": 80},
            {"name": "x4", "path": ["b2", "r3"], "gpus": 8, "perf": [1, 1, 1, 1, 1, 1, 1, 0.9]},
        ],
        "failure_domains": {"power": {"pdu-a": ["x1", "x2"], "pdu-b": ["x3", "x4/0"]}},
    },
    "state": {
        "jobs": [
            {"id": "a", "devices": {"x1": 2}},
            {"id": "b", "class": "inference", "devices": {"x1": [0], "x3": 2},
             "request": {"count": 3, "required": "block"}},
        ],
        "down": ["x4/7"],
        "cordoned": ["x2"],
    },
    "request": {"id": "new", "count": 8, "group": {"size": 4, "level": "node"},
                "required": "block", "slices": [{"level": "rack", "size": 8}],
                "max_per_domain": [{"level": "power", "devices": 8}],
                "spread": {"level": "node", "min_domains": 2},
                "colocate": {"job": "a", "level": "block"}, "exclusive": "rack",
                "select": {"model": "GB200", "min_perf": 0.5, "nodes": ["x1", "x2"]}},
    "policy": {"max_moves": 2, "migrate": False},
    "replace": {"job": "a", "failed": ["x1/1"]},
}


def doc(**changes):
    """BASE with changes: keys are dotted paths (list items as numbers); None deletes."""
    d = copy.deepcopy(BASE)
    for path, value in changes.items():
        keys = path.split("__")
        obj = d
        for k in keys[:-1]:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        last = int(keys[-1]) if isinstance(obj, list) else keys[-1]
        if value is None:
            del obj[last]
        else:
            obj[last] = value
    return d


def devices(sc, job):
    return [sc.topology.device_name(d) for d in sc.cluster.job_devices(job)]


def test_base_document_is_valid_for_every_command():
    for cmd in scenario.COMMANDS:
        sc = scenario.parse(doc(), cmd, strict=True)
        assert sc.levels == ["block", "rack", "node"]
    sc = scenario.parse(doc(), "place")
    assert sc.request.count == 8 and [(x.level, x.size) for x in sc.request.slices] == \
        [("rack", 8)]
    assert [(c.level, c.devices, c.groups) for c in sc.request.max_per_domain] == \
        [("power", 8, 0)]
    assert sc.policy is None and sc.replace is None
    sc = scenario.parse(doc(), "defrag")
    assert (sc.policy.max_moves, sc.policy.migrate, sc.policy.allow_less_local) == \
        (2, False, True)
    sc = scenario.parse(doc(), "replace")
    assert sc.replace == {"job": "a", "failed": [sc.topology.device("x1/1")]}


def test_job_devices_lists_first_then_counts_in_job_order():
    sc = scenario.parse(doc(), "frag")
    assert sc.jobs == ["a", "b"]
    # b's list takes x1/0 first; a's count then takes the lowest indices not held
    assert devices(sc, "b") == ["x1/0", "x3/0", "x3/1"]
    assert devices(sc, "a") == ["x1/1", "x1/2"]
    shape = sc.cluster.job_info("b").shape
    assert shape.count == 3 and shape.id == "b"
    assert sc.cluster.job_info("a").shape is None


def test_job_request_count_defaults_to_devices_held():
    d = doc(state__jobs__1__request={"required": "rack"})
    sc = scenario.parse(d, "frag")
    assert sc.cluster.job_info("b").shape.count == 3


def test_generated_nodes_are_recognised_without_listing_them():
    d = {"version": 1, "topology": {"levels": ["block", "rack", "node"],
                                    "generate": {"counts": [2, 8, 18], "gpus_per_node": 4}},
         "state": {"jobs": [{"id": "j", "devices": {"block1-rack7-node17": 4}}],
                   "down": ["block0-rack0-node0/3"]}}
    sc = scenario.parse(d, "frag")
    assert sc.topology.node_count == 288 and sc.topology.device_count == 1152
    assert devices(sc, "j")[0] == "block1-rack7-node17/0"
    d["state"]["jobs"][0]["devices"] = {"block2-rack0-node0": 1}
    with pytest.raises(InvalidInput, match=r"state\.jobs\[0\]\.devices\.block2-rack0-node0"):
        scenario.parse(d, "frag")
    d["state"]["jobs"][0]["devices"] = {"block01-rack0-node0": 1}   # not the generated spelling
    with pytest.raises(InvalidInput, match=r"unknown node \"block01-rack0-node0\""):
        scenario.parse(d, "frag")


def test_listed_node_may_not_reuse_a_generated_name():
    d = {"version": 1, "topology": {"levels": ["rack", "node"],
                                    "generate": {"counts": [1, 2], "gpus_per_node": 4},
                                    "nodes": [{"name": "rack0-node1", "path": ["r9"],
                                               "gpus": 1}]}}
    with pytest.raises(InvalidInput, match=r"topology\.nodes\[0\]\.name: duplicate"):
        scenario.parse(d, "frag")


# Each invalid document, the command, and the path its message must name.
INVALID = [
    (doc(extra=1), "place", "extra: unknown key"),
    (doc(version=2), "place", "version: must be 1"),
    (doc(version=True), "place", "version: must be 1"),
    (doc(version=None), "place", "version: required"),
    (doc(topology=None), "frag", "topology: required"),
    (doc(topology__levles=["a"]), "frag", "topology.levles: unknown key"),
    (doc(topology__levels=["block", "rack", "rack", "node"]), "frag", "topology.levels[2]"),
    (doc(topology__levels=["cluster", "rack", "node"]), "frag", "topology.levels[0]"),
    (doc(topology__levels=[]), "frag", "topology.levels: must not be empty"),
    (doc(topology__levels=["l%d" % i for i in range(9)]), "frag", "topology.levels"),
    (doc(topology__fabric={"rack": {"kind": "infiniband"}}), "frag",
     "topology.fabric.rack.kind"),
    (doc(topology__fabric={"pod": {"kind": "ib"}}), "frag", "topology.fabric.pod"),
    (doc(topology__fabric={"rack": {"gbps": 0}}), "frag", "topology.fabric.rack.gbps"),
    (doc(topology__fabric={"rack": {"gbps": 9, "mtu": 1}}), "frag",
     "topology.fabric.rack.mtu"),
    (doc(topology__nodes__2__name="x1"), "frag", "topology.nodes[2].name"),
    (doc(topology__nodes__1__name="a/b"), "frag", "topology.nodes[1].name"),
    (doc(topology__nodes__1__path=["b1"]), "frag", "topology.nodes[1].path"),
    (doc(topology__nodes__1__path=["b1", "r/1"]), "frag", "topology.nodes[1].path[1]"),
    (doc(topology__nodes__0__gpus=0), "frag", "topology.nodes[0].gpus"),
    (doc(topology__nodes__0__gpus=4.0), "frag", "topology.nodes[0].gpus"),
    (doc(topology__nodes__0__gpus=None), "frag", "topology.nodes[0].gpus: required"),
    (doc(topology__nodes__0__gpus=257), "frag", "topology.nodes[0].gpus"),
    (doc(topology__nodes__3__perf=[1, 1]), "frag", "topology.nodes[3].perf"),
    (doc(topology__nodes__3__perf=[1, 1, 1, 1, 1, 1, 1, -1]), "frag",
     "topology.nodes[3].perf[7]"),
    (doc(topology__nodes__2__memory_gb="80"), "frag", "topology.nodes[2].memory_gb"),
    (doc(topology__nodes__0__color="red"), "frag", "topology.nodes[0].color: unknown key"),
    (doc(topology__nodes=None), "frag", "topology: needs nodes or generate"),
    (doc(topology__generate={"counts": [1, 2], "gpus_per_node": 4}), "frag",
     "topology.generate.counts"),
    (doc(topology__generate={"counts": [1, 1, 2], "gpus_per_node": 0}), "frag",
     "topology.generate.gpus_per_node"),
    (doc(topology__failure_domains={"rack": {"p": ["x1"]}}), "frag",
     "topology.failure_domains.rack"),
    (doc(topology__failure_domains={"power": {"p": ["x1"], "q": ["x2", "x1"]}}), "frag",
     "topology.failure_domains.power.q[1]"),
    (doc(topology__failure_domains={"power": {"p": ["x1"], "q": ["x1/2"]}}), "frag",
     "topology.failure_domains.power.q[0]"),
    (doc(topology__failure_domains={"power": {"p": ["x9"]}}), "frag",
     "topology.failure_domains.power.p[0]"),
    (doc(topology__failure_domains={"power": {"p": ["x1/4"]}}), "frag",
     "topology.failure_domains.power.p[0]"),
    (doc(state__jobs__1__id="a"), "frag", "state.jobs[1].id"),
    (doc(state__jobs__0__class="batch"), "frag", "state.jobs[0].class"),
    (doc(state__jobs__0__priority=1.5), "frag", "state.jobs[0].priority"),
    (doc(state__jobs__0__preemptible="yes"), "frag", "state.jobs[0].preemptible"),
    (doc(state__jobs__0__checkpoint_s=-1), "frag", "state.jobs[0].checkpoint_s"),
    (doc(state__jobs__0__devices={"x9": 1}), "frag", "state.jobs[0].devices.x9"),
    (doc(state__jobs__0__devices={}), "frag", "state.jobs[0].devices"),
    (doc(state__jobs__0__devices={"x1": 5}), "frag", "state.jobs[0].devices.x1"),
    (doc(state__jobs__0__devices={"x1": [4]}), "frag", "state.jobs[0].devices.x1[0]"),
    (doc(state__jobs__0__devices={"x1": [1, 1]}), "frag", "state.jobs[0].devices.x1[1]"),
    (doc(state__jobs__0__devices={"x3": [1, 2, 3]}), "frag", "state.jobs[1].devices.x3"),
    (doc(state__jobs__0__devices={"x1": [0]}), "frag", "state.jobs[1].devices.x1[0]"),
    (doc(state__jobs__0__devices={"x1": 4}), "frag", "state.jobs[0].devices.x1"),
    (doc(state__jobs__1__request={"count": 3, "required": "pod"}), "frag",
     "state.jobs[1].request.required"),
    (doc(state__down=["x1/9"]), "frag", "state.down[0]"),
    (doc(state__cordoned=["x1", "nope"]), "frag", "state.cordoned[1]"),
    (doc(state__drained=[]), "frag", "state.drained: unknown key"),
    (doc(request=None), "place", "request: required by place"),
    (doc(request=None), "defrag", "request: required by defrag"),
    (doc(request__count=10), "place", "request.count"),
    (doc(request__count=0), "place", "request.count"),
    (doc(request__count="8"), "place", "request.count"),
    (doc(request__count=None), "place", "request.count: required"),
    (doc(request__group__sise=4), "place", "request.group.sise: unknown key"),
    (doc(request__group__level="gpu"), "place", "request.group.level"),
    (doc(request__required="pod"), "place", "request.required"),
    (doc(request__preferred="block"), "place", "request.preferred"),
    (doc(request__slices=[{"level": "rack", "size": 12}]), "place", "request.slices[0].size"),
    (doc(request__slices=[{"level": "rack", "size": 8}, {"level": "node", "size": 6}]),
     "place", "request.slices[1].size"),
    (doc(request__count=16, request__slices=[{"level": "rack", "size": 8},
                                             {"level": "node", "size": 16}]),
     "place", "request.slices[1].size"),
    (doc(request__slices=[{"level": "rack", "size": 2}]), "place", "request.slices[0].size"),
    (doc(request__required="rack", request__slices=[{"level": "block", "size": 8}]),
     "place", "request.slices[0].level"),
    (doc(request__slices=[{"level": "node", "size": 8}, {"level": "rack", "size": 4}]),
     "place", "request.slices[1].level"),
    (doc(request__slices=[{"size": 8}]), "place", "request.slices[0].level: required"),
    (doc(request__slices=[]), "place", "request.slices"),
    (doc(request__balanced="yes"), "place", "request.balanced"),
    (doc(request__max_per_domain=[{"level": "rack", "devices": 4, "groups": 1}]), "place",
     "request.max_per_domain[0]"),
    (doc(request__max_per_domain=[{"level": "cooling", "devices": 4}]), "place",
     "request.max_per_domain[0].level"),
    (doc(request__spread={"level": "rack"}), "place", "request.spread.min_domains"),
    (doc(request__colocate={"job": "zz", "level": "block"}), "place", "request.colocate.job"),
    (doc(request__exclusive="power"), "place", "request.exclusive"),
    (doc(request__select={"nodes": ["x1", "x7"]}), "place", "request.select.nodes[1]"),
    (doc(request__select={"min_perf": -1}), "place", "request.select.min_perf"),
    (doc(request__select={"gpu": "H100"}), "place", "request.select.gpu: unknown key"),
    (doc(request__class="batch"), "place", "request.class"),
    (doc(policy__max_moves=-1), "defrag", "policy.max_moves"),
    (doc(policy__migrate=1), "defrag", "policy.migrate"),
    (doc(policy__budget=1), "defrag", "policy.budget: unknown key"),
    (doc(replace=None), "replace", "replace: required by replace"),
    (doc(replace__job="zz"), "replace", "replace.job"),
    (doc(replace__failed=[]), "replace", "replace.failed"),
    (doc(replace__failed=["x1/0", "x1/8"]), "replace", "replace.failed[1]"),
    (doc(topology__nodes__1__name="x\udc80"), "frag", "topology.nodes[1].name"),
    (doc(state__jobs__0__tenant="\udc80"), "frag", "state.jobs[0].tenant"),
    (doc(policy__min_priority_gap=2 ** 31), "defrag", "policy.min_priority_gap"),
    (doc(request__x_service="a/b"), "place", "request.x_service"),
    (doc(state__x_service_caps=[]), "frag", "state.x_service_caps: must be an object"),
    (doc(state__x_service_caps={"web": {"max_per_domain": 1}}), "frag",
     "state.x_service_caps.web.level: missing"),
    (doc(state__x_service_caps={"web": {"level": "rack", "cap": 1}}), "frag",
     "state.x_service_caps.web.cap: unknown key"),
    (doc(state__x_service_caps={"web": {"level": "rack", "max_per_domain": -1}}), "frag",
     "state.x_service_caps.web.max_per_domain"),
    (doc(state__x_service_caps={"web": {"level": "rack", "max_percent": 101}}), "frag",
     "state.x_service_caps: web: caps.max_percent 101 is not in [0, 100]"),
    (doc(state__x_service_caps={"web": {"level": "row", "max_per_domain": 1}}), "frag",
     "state.x_service_caps: web: caps.level 'row' is not a level of the topology"),
    (doc(state__x_partitions={"level": "rack", "chanels": 2}), "place",
     "state.x_partitions.chanels: unknown key"),
    (doc(state__x_partitions={"channels": 2}), "place", "state.x_partitions.level: required"),
    (doc(state__x_partitions={"level": "row"}), "place", "state.x_partitions.level"),
    (doc(state__x_partitions={"level": "rack", "channels": 0}), "place",
     "state.x_partitions.channels"),
    (doc(state__x_partitions={"level": "rack"}), "place", "state.x_partitions"),
    (doc(request__x_comm={"tp": 3}), "place", "request.x_comm.tp"),
    (doc(request__x_comm={"tp": 2, "pp": 3}), "place", "request.x_comm.pp"),
    (doc(request__x_comm={"tp": 2, "dp": 3}), "place", "request.x_comm.dp"),
    (doc(request__x_comm={"ep": 3}), "place", "request.x_comm.ep"),
    (doc(request__x_comm={"dp_overlap": 2}), "place", "request.x_comm.dp_overlap"),
    (doc(state__x_service_caps={"web": {"fd_kind": "cooling", "fd_max_per_domain": 1}}), "frag",
     "state.x_service_caps: web: caps.fd_kind 'cooling' is not a failure-domain kind"),
    (doc(state__x_service_caps={"web": {"fd_kind": 3}}), "frag",
     "state.x_service_caps.web.fd_kind"),
    (doc(request__x_comm={"min_efficiency": 1.5}), "place",
     "request.x_comm.min_efficiency: 1.5 is above 1"),
    (doc(request__x_comm={"min_efficiency": -0.1}), "place",
     "request.x_comm.min_efficiency: must not be negative"),
    (doc(request__x_comm={"min_efficiency": "0.5"}), "place",
     "request.x_comm.min_efficiency: must be a number"),
    (doc(request__x_comm={"fabric_fit": 1.5}), "place",
     "request.x_comm.fabric_fit: 1.5 is above 1"),
    (doc(request__x_comm={"fabric_fit": -0.1}), "place",
     "request.x_comm.fabric_fit: must not be negative"),
    (doc(request__x_expected_end_s=-1), "place",
     "request.x_expected_end_s: must not be negative"),
    (doc(request__x_expected_end_s="soon"), "place",
     "request.x_expected_end_s: must be a number"),
]


@pytest.mark.parametrize("d,cmd,where", INVALID,
                         ids=["%d-%s" % (i, w.split(":")[0]) for i, (_, _, w) in
                              enumerate(INVALID)])
def test_invalid_documents_name_their_field(d, cmd, where):
    with pytest.raises(InvalidInput) as e:
        scenario.parse(d, cmd)
    assert where in str(e.value), str(e.value)
    assert str(e.value).startswith(where.split(":")[0]), str(e.value)


# The command-line table of docs/errors.md: one row per case above, with the tool's whole answer.
ERRORS_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "docs",
                         "errors.md")
CATALOG_ROW = re.compile(r"\| `(\w+)` \| 2 \| (.*) \| `test_scenario\.py` INVALID\[(\d+)\] \|$")


def catalog_rows():
    if not os.path.exists(ERRORS_MD):
        return []
    with open(ERRORS_MD, encoding="utf-8") as f:
        return [m.groups() for m in map(CATALOG_ROW.match, f.read().splitlines()) if m]


@pytest.mark.skipif(not os.path.exists(ERRORS_MD), reason="docs/errors.md is not beside the tests")
def test_catalog_names_every_case_once():
    assert sorted(int(i) for _, _, i in catalog_rows()) == list(range(len(INVALID)))


@pytest.mark.parametrize("cmd,message,i", catalog_rows())
def test_catalog_rows_are_the_real_answers(cmd, message, i):
    d, want_cmd, where = INVALID[int(i)]
    assert cmd == want_cmd
    with pytest.raises(InvalidInput) as e:
        scenario.parse(d, cmd)
    assert str(e.value) == message


def test_unused_sections_are_ignored_unless_strict():
    d = doc(policy__budget=1, replace__job="zz")
    scenario.parse(d, "place")                    # reading 7 of the spec's examples
    with pytest.raises(InvalidInput, match="policy.budget"):
        scenario.parse(d, "place", strict=True)


def test_json_level_problems():
    def imp(text):
        return scenario.import_text(text.encode("utf-8"), "frag")
    with pytest.raises(InvalidInput, match="not a valid JSON document"):
        imp("{")
    with pytest.raises(InvalidInput, match="not a valid JSON document"):
        imp('{"a": NaN}')
    with pytest.raises(InvalidInput, match="not a valid JSON document: duplicate object key "
                                           "near '\"version\"'"):
        imp('{"version": 1, "version": 1, "topology": {}}')
    with pytest.raises(InvalidInput, match="duplicate object key near '\"request\"'"):
        imp(json.dumps(doc())[:-1] + ', "request": {"count": 4}}')


def test_top_level_must_be_an_object():
    with pytest.raises(InvalidInput, match="must be an object"):
        scenario.parse([1, 2], "place")


def test_typo_gets_a_suggestion():
    with pytest.raises(InvalidInput, match="did you mean 'preferred'"):
        scenario.parse(doc(request__prefered="rack"), "place")


def test_load_reads_files_and_reports_unreadable_ones(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(doc()))
    assert scenario.load(str(p), "frag").base_dir == str(tmp_path)
    with pytest.raises(InvalidInput, match="cannot read"):
        scenario.load(str(tmp_path / "missing.json"), "frag")
    p.write_bytes(b"\xff\xfe")
    with pytest.raises(InvalidInput, match="not UTF-8"):
        scenario.load(str(p), "frag")


def test_hwloc_files_are_read_beside_the_scenario(tmp_path):
    d = doc(topology__nodes__0__hwloc="dgx.xml")
    with pytest.raises(InvalidInput, match=r"topology\.nodes\[0\]\.hwloc: not supported"):
        scenario.parse(d, "frag", base_dir=str(tmp_path), files=False)
    with pytest.raises(InvalidInput, match=r"topology\.nodes\[0\]\.hwloc: cannot read "
                                           r"\"dgx.xml\" \(No such file or directory\)"):
        scenario.parse(d, "frag", base_dir=str(tmp_path))
    (tmp_path / "dgx.xml").write_text("<topology/>")
    with pytest.raises(InvalidInput, match=r"topology\.nodes\[0\]\.hwloc: \"dgx.xml\": "):
        scenario.parse(d, "frag", base_dir=str(tmp_path))
