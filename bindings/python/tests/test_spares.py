# SPDX-License-Identifier: MIT
"""Hot spares from Python: the policy, a caller's own marks, placement leaving them alone and
replace using them first."""

import pytest


def nvl72(tp):
    return tp.Topology.nvl72(1, 2)  # block, rack, node; 18 nodes of 4 GPUs per rack


def test_policy_marks_and_replace_uses_a_spare(tp):
    t = nvl72(tp)
    c = tp.Cluster(t)
    c.set_spares("rack", 2)
    assert c.spare_policy == (1, 2)
    assert c.spare_count() == 4 and c.spare_count("rack", 0) == 2
    assert c.node_is_spare(17) and c.node_is_spare(16) and not c.node_is_spare(15)
    assert c.free_total_count == 144 - 16
    assert c.device_state(4 * 17) == ("spare", None)
    devs = [d for n in range(4) for d in t.node_devices(n)]
    c.assign("j", devs, shape=tp.Request(count=16, group_size=4, required="rack"))
    failed = t.node_devices(2)
    c.set_down(failed)
    p = c.replace("j", failed)
    new = [d for d in p.device_ids if d not in devs]
    assert {t.device_node(d) for d in new} <= {16, 17}
    c.commit(p)
    assert c.spare_count("rack", 0) == 2 and c.check() is True
    c.set_spares("rack", 0)
    assert c.spare_count() == 0 and c.spare_policy[1] == 0


def test_own_marks_and_errors(tp):
    c = tp.Cluster(nvl72(tp))
    c.set_node_spare(5)
    assert c.node_is_spare(5) and c.spare_count() == 1
    c.set_node_spare(5, False)
    assert not c.node_is_spare(5)
    c.assign("a", [0])
    with pytest.raises(tp.AlreadyExists) as e:
        c.set_node_spare(0)
    assert "spare.node" in str(e.value) and "held by job 'a'" in str(e.value)
    with pytest.raises(tp.InvalidArgument) as e:
        c.set_spares("node", 1)
    assert "spares.level 2 is not a level above the node" in str(e.value)
    with pytest.raises(tp.InvalidArgument) as e:
        c.set_spares("rack", 19)
    assert "spares.k 19 exceeds the 18 nodes of the largest rack" in str(e.value)
