# SPDX-License-Identifier: MIT
"""Fabrics per domain and per node type, and the PCIe figures of GPU pairs, from Python."""

import pytest


def mixed(tp):
    """Rack r0 on its own NVLink, rack r1 on the level's InfiniBand, each of 2 nodes x 4."""
    b = tp.TopologyBuilder(["rack", "node"])
    for r in ("r0", "r1"):
        for i in range(2):
            b.add_node("%s-n%d" % (r, i), [r], 4)
    return b.set_domain_fabric("rack", "r0", "nvlink", 900, 2.0).build()


def test_domain_fabric_overrides_the_level(tp):
    t = mixed(tp)
    assert t.domain_fabric("rack", 0) == tp.Fabric("nvlink", 900, 2.0)
    assert t.domain_fabric("rack", 1) == t.fabric("rack") == tp.Fabric("ib", 50, 14)
    assert t.domain_fabric("cluster", 0) == t.fabric("cluster")
    with pytest.raises(tp.InvalidArgument):
        t.domain_fabric("rack", 2)


def test_set_domain_fabric_errors(tp):
    b = tp.TopologyBuilder(["block", "rack", "node"]).add_node("x", ["b0", "r0"], 4)
    b.set_domain_fabric("rack", ["b0", "r0"], "ib", 5, 1)       # a path as names
    with pytest.raises(tp.NotFound, match="domain fabric: no rack b0/r9"):
        b.set_domain_fabric("rack", "b0/r9", "ib", 5, 1)
    with pytest.raises(tp.InvalidArgument, match="gbps 0 is not a number > 0"):
        b.set_domain_fabric("rack", "b0/r0", "ib", 0, 1)
    with pytest.raises(tp.InvalidArgument, match="unknown link kind 'myrinet'"):
        b.set_domain_fabric("rack", "b0/r0", "myrinet", 5, 1)
    t = b.build()
    assert t.domain_fabric("rack", 0) == tp.Fabric("ib", 5, 1)


def test_node_type_fabric_and_pair_figures(tp):
    nt = tp.NodeType(4)
    assert nt.fabric is None
    for g in range(4):
        nt.set_gpu_pcie_gbps(g, 16)
    nt.set_nvlink(0, 1, 40)
    assert nt.pair_gbps(0, 1) == 40
    assert nt.pair_gbps(1, 2) == 16
    assert nt.pair_gbps(2, 2) == 0
    nt.set_fabric("pcie", 16, 5)
    assert nt.fabric == tp.Fabric("pcie", 16, 5)
    with pytest.raises(tp.InvalidArgument, match="node type fabric gbps -1"):
        nt.set_fabric("pcie", -1, 5)
    with pytest.raises(tp.InvalidArgument, match="GPU 9 does not exist"):
        nt.set_gpu_pcie_gbps(9, 16)
    t = tp.TopologyBuilder(["rack", "node"]).add_node("x", ["r0"], 4, node_type=nt).build()
    assert t.domain_fabric("node", 0) == tp.Fabric("pcie", 16, 5)
