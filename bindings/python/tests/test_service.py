# SPDX-License-Identifier: MIT
"""Spread caps over a service's replicas (tp_cluster_set_service_caps, Request.service) from
Python and from scenario-v1 documents with the extension keys (docs/serving.md)."""

import json
import os

import pytest

from test_cli import run_json

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tests", "data", "serving")


def test_service_caps_keep_replicas_spread(tp):
    """At most one replica of a service per rack, counted over its running jobs; the fifth
    replica on four racks is busy and says why; a rollback undoes caps and replicas."""
    topo = tp.Topology.nvl72(blocks=1, racks_per_block=4)
    c = tp.Cluster(topo)
    c.set_service_caps("web", "rack", max_per_domain=1)
    assert c.service_caps("web") == ("rack", 1, 0.0)
    for i in range(4):
        r = tp.Request(count=8, id="web-%d" % i, required="rack", service="web")
        c.commit(c.place(r))
    assert [c.service_replicas("web", "rack", k) for k in range(4)] == [1, 1, 1, 1]
    assert c.service_replicas("web") == 4
    pl = c.place(tp.Request(count=8, id="web-4", required="rack", service="web"))
    assert pl.status == "busy" and "service web keeps out of 4 racks at its cap of 1" \
        in pl.message
    assert c.job_info("web-0").shape.service == "web"
    with c.savepoint(rollback=True):
        c.set_service_caps("web")
        c.commit(c.place(tp.Request(count=8, id="web-4", required="rack", service="web")))
        assert c.service_replicas("web") == 5
    assert c.service_replicas("web") == 4 and c.service_caps("web") == ("rack", 1, 0.0)
    with pytest.raises(tp.InvalidArgument, match="caps.level 'row' is not a level"):
        c.set_service_caps("web", "row", max_per_domain=1)
    with pytest.raises(tp.InvalidArgument, match=r"caps.max_percent 150 is not in \[0, 100\]"):
        c.set_service_caps("web", "rack", max_percent=150)


def _fed_racks(tp):
    """4 racks of 2 nodes of 4 GPUs; racks r0 and r1 on power feed pdu-a, r2 and r3 on pdu-b."""
    b = tp.TopologyBuilder(["rack", "node"])
    for r in range(4):
        for n in range(2):
            b.add_node("r%dn%d" % (r, n), ["r%d" % r], 4)
            b.add_failure_domain("power", "pdu-a" if r < 2 else "pdu-b", "r%dn%d" % (r, n))
    return b.build()


def test_service_caps_over_power_feeds(tp):
    """A cap per power feed (fd_kind): the second replica goes to the other feed though best
    fit would pack it beside the first; a third is busy and the message names the feed."""
    topo = _fed_racks(tp)
    c = tp.Cluster(topo)
    c.set_service_caps("web", "rack", max_per_domain=1, fd_kind="power", fd_max_per_domain=1)
    assert c.service_caps("web") == ("rack", 1, 0.0)
    assert c.service_fd_caps("web") == ("power", 1, 0.0)
    feeds = []
    for i in range(2):
        pl = c.place(tp.Request(count=4, id="web-%d" % i, required="node", service="web"))
        feeds.append(topo.device_fd("power", pl.devices[0]))
        c.commit(pl)
    assert sorted(topo.fd_name("power", f) for f in feeds) == ["pdu-a", "pdu-b"]
    assert [c.service_fd_replicas("web", "power", f) for f in feeds] == [1, 1]
    pl = c.place(tp.Request(count=4, id="web-2", required="node", service="web"))
    assert pl.status == "busy"
    assert "service web keeps out of power 'pdu-a' and 1 more at its cap of 1 replica per " \
        "power" in pl.message
    with c.savepoint(rollback=True):
        c.set_service_caps("web", "rack", max_per_domain=1)
        assert c.service_fd_caps("web") == (None, 0, 0.0)
        c.commit(c.place(tp.Request(count=4, id="web-2", required="node", service="web")))
    assert c.service_fd_caps("web") == ("power", 1, 0.0) and c.service_replicas("web") == 2
    with pytest.raises(tp.InvalidArgument, match="caps.fd_kind 'cooling' is not a "
                       "failure-domain kind"):
        c.set_service_caps("web", fd_kind="cooling", fd_max_per_domain=1)
    with pytest.raises(tp.InvalidArgument, match=r"caps.fd_max_percent 150 is not in"):
        c.set_service_caps("web", fd_kind="power", fd_max_percent=150)
    with pytest.raises(tp.InvalidArgument, match="out of range"):
        c.service_fd_replicas("web", "power", 7)


def _scenario():
    with open(os.path.join(DATA, "chat-scenario.json")) as f:
        return json.load(f)


def test_scenario_extension_keys_place_size_and_pd(tp, tmp_path):
    """One scenario-v1 document: `place` keeps web-2 out of the racks web-0 and web-1 hold
    (state.x_service_caps, request.x_service); `size` reads x_sizing; `pd` reads x_pd."""
    d = _scenario()
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0, out
    racks = {x.split("-node")[0] for x in out["placement"]["devices"]}
    assert racks == {"block0-rack2"}, out
    # the fourth replica: rack 3; a fifth: busy, naming the cap
    d["state"]["jobs"].append({"id": "web-2", "class": "inference",
                               "devices": {"block0-rack2-node0": 4, "block0-rack2-node1": 4},
                               "request": {"count": 8, "required": "rack",
                                           "x_service": "web"}})
    d["request"]["id"] = "web-3"
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and {x.split("-node")[0] for x in out["placement"]["devices"]} == {"block0-rack3"}
    d["state"]["jobs"].append({"id": "web-3", "class": "inference",
                               "devices": {"block0-rack3-node0": 4, "block0-rack3-node1": 4},
                               "request": {"count": 8, "required": "rack",
                                           "x_service": "web"}})
    d["request"]["id"] = "web-4"
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 1 and out["status"] == "busy", out
    assert "service web keeps out of 4 racks at its cap of 1 replica per rack" in out["message"]
    rc, out = run_json(tmp_path, "size", _scenario())
    assert rc == 0 and len(out["options"]) == 3 and out["options"][0]["model"] == "GB200"
    rc, out = run_json(tmp_path, "pd", _scenario())
    assert rc == 0 and out["locality"] == "rack" and len(out["placed"]) == 12, out


def test_scenario_caps_over_power_feeds(tp, tmp_path):
    """state.x_service_caps with fd_kind: the scenario's failure domains (two feeds, each two
    racks of one node) are what the caps count; the request leaves the feed web-0 holds though
    rack r1 beside it is free."""
    nodes = [{"name": "x%d" % r, "path": ["r%d" % r], "gpus": 4} for r in range(4)]
    d = {"version": 1,
         "topology": {"levels": ["rack", "node"], "nodes": nodes,
                      "failure_domains": {"power": {"pdu-a": ["x0", "x1"],
                                                    "pdu-b": ["x2", "x3"]}}},
         "state": {"x_service_caps": {"web": {"fd_kind": "power", "fd_max_per_domain": 1}},
                   "jobs": [{"id": "web-0", "class": "inference", "devices": {"x0": 4},
                             "request": {"count": 4, "x_service": "web"}}]},
         "request": {"id": "web-1", "count": 4, "x_service": "web"}}
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 0 and {x.split("/")[0] for x in out["placement"]["devices"]} <= {"x2", "x3"}, out
    del d["state"]["x_service_caps"]["web"]["fd_kind"]
    d["state"]["x_service_caps"]["web"]["level"] = "rack"
    rc, out = run_json(tmp_path, "place", d)
    assert rc == 2 and "caps.fd_kind is NULL but caps.fd_max_per_domain is set" \
        in out["message"], out


@pytest.mark.parametrize("key, change, where", [
    ("x_sizing", lambda x: x["model"].pop("layers"), "x_sizing.model.layers: missing"),
    ("x_sizing", lambda x: x.update(extra=1), "x_sizing.extra: unknown key"),
    ("x_pd", lambda x: x.pop("groups"), "x_pd.groups: missing"),
])
def test_scenario_extension_sections_name_their_fields(tp, tmp_path, key, change, where):
    d = _scenario()
    change(d[key])
    rc, out = run_json(tmp_path, "size" if key == "x_sizing" else "pd", d)
    assert rc == 2 and out["message"].startswith(where), out
