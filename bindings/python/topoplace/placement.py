# SPDX-License-Identifier: MIT
"""The placement family: :class:`Placement` (the answer of :meth:`Cluster.place` and
:meth:`Cluster.replace`, read out of ``tp_placement`` at once) and :class:`Fit`.
"""

from dataclasses import dataclass, field
from typing import Dict, List, Optional

from . import _defaults
from ._core import _STATUS, _own, _Owned, _s, ffi, lib
from .errors import check, error_class

__all__ = ["Fit", "Partition", "Placement"]


@dataclass
class Fit:
    """Why a request could not be placed, in figures (``tp_fit``)."""
    needed: int
    free_total: int
    level: str
    best: int


#: ``tp_rule`` by value: the names :attr:`Placement.decided_by` takes.
DECIDED_BY = ("none", "locality", "balance", "fit", "step", "tie", "end")


@dataclass
class Partition:
    """An NVLink partition a placement needs (``tp_placement_partition``): the NVLink domain
    (its path at the partition level), the channel of its pool, and the nodes that form it."""
    domain: str
    channel: int
    nodes: List[str]


@dataclass
class Placement:
    """The answer to a request (``tp_placement``), read out at once.

    ``status`` is "ok", "infeasible", "busy" or "fragmented". On success ``devices`` holds the
    device names in rank order and ``domains`` maps every level (the node level included) to
    the domains used (by path) and their device counts, in first-rank order. Otherwise
    ``message`` says why and ``fit`` gives the figures. A replacement also fills ``replaced``
    (failed device -> its replacement). With NVLink partitions on
    (:meth:`Cluster.set_partitions`), ``partitions`` lists the :class:`Partition` s it needs,
    in domain order. For a request with ``gpu_nic_pairs``, ``nics`` holds
    the name of the NIC paired with each rank (``tp_placement_nic``; None for a device of a
    replaced job that has none). ``decided_by`` names the rule of the objective that decided
    the outermost choice among candidate domains (``tp_placement_decided_by``): one of
    :data:`DECIDED_BY` ("none", "locality", "balance", "fit", "step", "tie", "end"). Pass it to
    :meth:`Cluster.commit` to apply it.
    """
    status: str
    code: int
    job: str
    message: str = ""
    devices: List[str] = field(default_factory=list)
    device_ids: List[int] = field(default_factory=list)
    domains: Dict[str, Dict[str, int]] = field(default_factory=dict)
    step_comm_us: float = 0.0
    fit: Optional[Fit] = None
    replaced: Dict[str, str] = field(default_factory=dict)
    nics: List[Optional[str]] = field(default_factory=list)
    partitions: List[Partition] = field(default_factory=list)
    decided_by: str = "none"
    _handle: object = field(default=None, repr=False, compare=False)
    _node_level: str = field(default="", repr=False, compare=False)

    @property
    def ok(self):
        """Whether the request was placed (``status == "ok"``)."""
        return self.code == 0

    @property
    def nodes(self):
        """Node name -> devices used on it (first-rank order)."""
        return dict(self.domains.get(self._node_level, {})) if self.domains else {}

    @property
    def levels_spanned(self):
        """Level name -> number of domains of that level used."""
        return {lv: len(d) for lv, d in self.domains.items()}

    def raise_for_status(self):
        """Raise :class:`Infeasible`, :class:`Busy` or :class:`Fragmented` unless placed."""
        if self.code < 0:
            raise error_class(self.code)(self.message)
        return self

    @property
    def closed(self):
        """Whether the C result was released (by :meth:`close`, or never held: a plan's
        placement); such a placement can no longer be committed."""
        return self._handle is None

    def close(self):
        """Release the C result (a closed placement can no longer be committed)."""
        self._handle = None


class _Result(_Owned):
    """The owned ``tp_placement`` behind a :class:`Placement`, tied to its cluster."""
    _what = "placement"

    def __init__(self, ptr, cluster):
        self._ptr = _own(ptr, lib.tp_placement_destroy, cluster._p)
        self.cluster = cluster


def _nic_name(topo, dev, nic):
    """The name of NIC ``nic`` of the node type of device ``dev``'s node (None when < 0)."""
    if nic < 0:
        return None
    nt = lib.tp_topology_node_type(topo._p, lib.tp_topology_device_node(topo._p, dev))
    return _s(lib.tp_nodetype_nic_name(nt, nic)) if nt != ffi.NULL else None


def _read_partitions(cluster, p):
    """The :class:`Partition` s of a successful ``tp_placement *``."""
    t = cluster._topo
    level = ffi.new("int *")
    check(lib.tp_cluster_partition_policy(cluster._p, level, ffi.NULL), cluster)
    out = []
    dom, ch = ffi.new("uint32_t *"), ffi.new("uint32_t *")
    nodes, n = ffi.new("const uint32_t **"), ffi.new("size_t *")
    for i in range(lib.tp_placement_partition_count(p)):
        check(lib.tp_placement_partition(p, i, dom, ch, nodes, n), None,
              "tp_placement_partition(%d) failed" % i)
        out.append(Partition(domain=t.domain_path(level[0], dom[0]), channel=ch[0],
                             nodes=[t.node_name(nodes[0][k]) for k in range(n[0])]))
    return out


def _read_placement(cluster, ptr, borrowed_from=None):
    """A :class:`Placement` from a ``tp_placement *``: owned (a result of tp_place or
    tp_replace), or borrowed from a plan (read at once; it cannot be committed)."""
    if borrowed_from is None:
        res = _Result(ptr, cluster)
        p = res._p
    else:
        res, p = None, ptr
    t = cluster._topo
    code = lib.tp_placement_status(p)
    status = _STATUS.get(code, error_class(code).name.lower())
    pl = Placement(status=status, code=code, job=_s(lib.tp_placement_job(p)) or "",
                   message=_s(lib.tp_placement_errmsg(p)) or "", _handle=res,
                   _node_level=t.levels[-1])
    if code == 0:
        n = ffi.new("size_t *")
        devs = lib.tp_placement_devices(p, n)
        pl.device_ids = [devs[i] for i in range(n[0])]
        pl.devices = [t.device_name(d) for d in pl.device_ids]
        dom = ffi.new("uint32_t *")
        cnt = ffi.new("uint32_t *")
        for lv, name in enumerate(t.levels):
            m = {}
            for i in range(lib.tp_placement_domain_count(p, lv)):
                check(lib.tp_placement_domain_at(p, lv, i, dom, cnt), None,
                      "tp_placement_domain_at(%s, %d) failed" % (name, i))
                m[t.domain_path(lv, dom[0])] = cnt[0]
            pl.domains[name] = m
        pl.step_comm_us = lib.tp_placement_step_comm_us(p)
        rule = lib.tp_placement_decided_by(p)
        pl.decided_by = DECIDED_BY[rule] if 0 <= rule < len(DECIDED_BY) else str(rule)
        nic = [lib.tp_placement_nic(p, i) for i in range(len(pl.device_ids))]
        if any(x >= 0 for x in nic):  # a request with gpu_nic_pairs
            pl.nics = [_nic_name(t, d, x) for d, x in zip(pl.device_ids, nic)]
        pl.partitions = _read_partitions(cluster, p)
        failed = ffi.new("uint32_t *")
        repl = ffi.new("uint32_t *")
        i = 0
        while lib.tp_placement_replaced(p, i, failed, repl) == 0:
            pl.replaced[t.device_name(failed[0])] = t.device_name(repl[0])
            i += 1
    else:
        fit = _defaults.c_init("fit")
        if lib.tp_placement_fit(p, fit) == 0:
            lvl = fit.level
            pl.fit = Fit(fit.needed, fit.free_total,
                         t.levels[lvl] if 0 <= lvl < len(t.levels) else "cluster", fit.best)
    return pl
