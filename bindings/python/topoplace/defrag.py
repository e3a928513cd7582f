# SPDX-License-Identifier: MIT
"""The fragmentation and defragmentation family: :class:`FragReport` and :class:`LevelFrag`
(:meth:`Cluster.frag`), :class:`JobShape` (a job mix), :class:`DefragPolicy` and the plans
:class:`Plan` and :class:`PlanStep` (:meth:`Cluster.defrag_plan`,
:meth:`Cluster.defrag_compact`).

The defaults of :class:`DefragPolicy` are those of ``TP_DEFRAG_POLICY_INIT`` (see
:mod:`topoplace._defaults`).
"""

import math
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from . import _defaults
from ._core import _b, _coerce, _keep, _own, _Owned, _s, ffi, lib, strerror
from .errors import InvalidArgument, check, error_class
from .placement import Placement, _read_placement

__all__ = ["LevelFrag", "FragReport", "JobShape", "DefragPolicy", "PlanStep", "Plan",
           "DefragStats"]

_POLICY = _defaults.DEFRAG_POLICY


@dataclass
class LevelFrag:
    """Fragmentation figures of one level."""
    domain_count: int
    free_count: int
    fully_free_count: int
    largest_free_count: int
    fragmentation: float
    #: grid levels: the largest box of wholly free children in one domain (its extents, or
    #: None on other levels) and the free fragments (``tp_frag_largest_box``,
    #: ``tp_frag_grid_fragment_count``)
    largest_box: Optional[tuple] = None
    grid_fragments: int = 0


@dataclass
class FragReport:
    """Per-level figures (every level, the node level included) and device totals.
    ``workload`` is the share of free devices the job mix cannot use at full locality."""
    levels: Dict[str, LevelFrag]
    free_count: int
    down_count: int
    cordoned_count: int
    workload: Optional[float] = None


@dataclass
class JobShape:
    """One kind of job in a mix for :meth:`Cluster.frag`: ``devices`` devices inside one
    domain of ``level``, with a relative ``weight``."""
    devices: int
    level: str
    weight: float = 1.0


def _frag_report(cluster, mix):
    """The :class:`FragReport` of a cluster (``tp_frag_report``) for a job mix (None: the
    library's default mix)."""
    keep = []
    arr, n = ffi.NULL, 0
    if mix:
        mix = [_coerce(JobShape, m) for m in mix]
        arr = ffi.new("tp_job_shape[]", len(mix))
        for i, m in enumerate(mix):
            arr[i].devices = m.devices
            arr[i].level = _keep(keep, _b(m.level, "mix[%d].level" % i))
            arr[i].weight = m.weight
        n = len(mix)
    out = ffi.new("tp_frag **")
    rc = lib.tp_frag_report(cluster._p, arr, n, out)
    if rc < 0:
        msg = None
        if out[0] != ffi.NULL:
            msg = "frag report: %s" % ffi.string(lib.tp_frag_errmsg(out[0])).decode(
                "utf-8", "replace")
            lib.tp_frag_destroy(out[0])
        check(rc, None, msg or "frag report: %s" % strerror(rc))
    f = ffi.gc(out[0], lib.tp_frag_destroy)
    ext = ffi.new("unsigned[3]")

    def box(lv):
        return tuple(ext) if lib.tp_frag_largest_box(f, lv, ext) else None

    levels = {name: LevelFrag(lib.tp_frag_domain_count(f, lv), lib.tp_frag_free_count(f, lv),
                              lib.tp_frag_fully_free_count(f, lv),
                              lib.tp_frag_largest_free_count(f, lv),
                              lib.tp_frag_fragmentation(f, lv), box(lv),
                              lib.tp_frag_grid_fragment_count(f, lv))
              for lv, name in enumerate(cluster._topo.levels)}
    rep = FragReport(levels, lib.tp_frag_free_count(f, 0), lib.tp_frag_down_count(f),
                     lib.tp_frag_cordoned_count(f), lib.tp_frag_workload(f))
    ffi.release(f)
    return rep


# --------------------------------------------------------------------------------------------
# defragmentation plans
# --------------------------------------------------------------------------------------------

@dataclass
class DefragPolicy:
    """What a plan may do (``tp_defrag_policy``); None means no limit."""
    migrate: bool = _POLICY["migrate"]
    preempt: bool = _POLICY["preempt"]
    allow_interactive: bool = _POLICY["allow_interactive"]
    max_moves: Optional[int] = _POLICY["max_moves"]
    max_cost_s: Optional[float] = _POLICY["max_cost_s"]
    min_priority_gap: int = _POLICY["min_priority_gap"]
    #: a migrated job may land less local than it sits (False: never; see docs/defrag.md)
    allow_less_local: bool = _POLICY["allow_less_local"]
    #: the work budget (see :class:`DefragStats`): candidate domains searched and job sets
    #: simulated per call, at most (None: no limit), and a wall-clock limit in microseconds
    #: (None: none; it makes answers depend on the machine)
    max_candidates: Optional[int] = _POLICY["max_candidates"]
    max_simulations: Optional[int] = _POLICY["max_simulations"]
    max_time_us: Optional[int] = _POLICY["max_time_us"]
    #: stable targets: (level index, [domain ids]) of an earlier :attr:`Plan.targets`; the
    #: planner keeps them unless impossible (policy version 4). Set it on an instance
    #: (``policy.prefer_targets = plan.targets``): it is not a field of the table of defaults.
    prefer_targets = None

    def _to_c(self, keep):
        """A ``tp_defrag_policy *`` (from TP_DEFRAG_POLICY_INIT), kept alive by ``keep``."""
        p = _defaults.c_init("defrag_policy")
        keep.append(p)
        p.migrate = 1 if self.migrate else 0
        p.preempt = 1 if self.preempt else 0
        p.allow_interactive = 1 if self.allow_interactive else 0
        p.max_moves = 0xFFFFFFFF if self.max_moves is None else self.max_moves
        p.max_cost_s = -1.0 if self.max_cost_s is None else float(self.max_cost_s)
        # priorities are integers, so a fractional gap means the next integer
        p.min_priority_gap = int(math.ceil(self.min_priority_gap))
        p.allow_less_local = 1 if self.allow_less_local else 0
        # 0 would mean the library's default: "no limit" is UINT32_MAX, and a budget of 0
        # is refused here rather than read as the default
        for name in ("max_candidates", "max_simulations"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or
                                  not 0 < v < 0xFFFFFFFF):
                raise InvalidArgument("policy.%s: %r is not an integer from 1 to %d (None: no "
                                      "limit)" % (name, v, 0xFFFFFFFE))
            setattr(p, name, 0xFFFFFFFF if v is None else v)
        t = self.max_time_us
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or
                              not 0 < t < 2 ** 64):
            raise InvalidArgument("policy.max_time_us: %r is not a positive integer of at most "
                                  "64 bits (None: no limit)" % (t,))
        p.max_time_us = 0 if t is None else t
        if getattr(self, "prefer_targets", None):
            level, doms = self.prefer_targets
            arr = ffi.new("uint32_t[]", list(doms))
            keep.append(arr)
            p.prefer_level = level
            p.prefer_targets = arr
            p.nprefer_targets = len(doms)
        return p


_BUDGET = {lib.TP_BUDGET_NONE: None, lib.TP_BUDGET_CANDIDATES: "max_candidates",
           lib.TP_BUDGET_SIMULATIONS: "max_simulations", lib.TP_BUDGET_TIME: "max_time_us"}


@dataclass
class DefragStats:
    """The work the planning call behind a :class:`Plan` did (``tp_plan_stats``): reads of
    candidate domains (``scanned``), candidate domains searched (``evaluated``), job sets
    simulated (``simulated``), and ``budget``, the :class:`DefragPolicy` field whose limit
    stopped the search early ("max_candidates", "max_simulations", "max_time_us"), or None
    when it ran to its end."""
    scanned: int
    evaluated: int
    simulated: int
    budget: Optional[str]


_ACTION = {lib.TP_STEP_MIGRATE: "migrate", lib.TP_STEP_PREEMPT: "preempt",
           lib.TP_STEP_PLACE: "place"}


@dataclass
class PlanStep:
    """One step of a :class:`Plan`: "migrate" (from -> to), "preempt" (from) or "place"
    (to); devices by name, and by id in ``from_ids`` / ``to_ids``."""
    action: str
    job: str
    from_devices: List[str] = field(default_factory=list)
    to_devices: List[str] = field(default_factory=list)
    from_ids: List[int] = field(default_factory=list)
    to_ids: List[int] = field(default_factory=list)


@dataclass
class Plan:
    """A defragmentation plan (``tp_plan``), read out at once. ``status`` is "ok", "none" (no
    plan within the policy) or "infeasible"; ``placement`` is the request's final placement.
    Carry it out with :meth:`Cluster.apply_step`."""
    status: str
    code: int
    message: str = ""
    steps: List[PlanStep] = field(default_factory=list)
    moved_job_count: int = 0
    moved_device_count: int = 0
    cost_s: float = 0.0
    placement: Optional[Placement] = None
    #: the work the call did (:class:`DefragStats`), whether it found a plan or not
    stats: Optional[DefragStats] = None
    #: ``tp_plan_lower_bound_s``: no plan costs less (the cost itself when the search was exact)
    lower_bound_s: float = 0.0
    #: ``tp_plan_targets``: (level index, [domain ids]) the plan drains, or None
    targets: Optional[tuple] = None
    _handle: object = field(default=None, repr=False, compare=False)

    @property
    def ok(self):
        """Whether a plan was found (``status == "ok"``)."""
        return self.code == 0

    @property
    def closed(self):
        """Whether the C plan was released (:meth:`close`); its steps can no longer be
        applied."""
        return self._handle is None

    def close(self):
        """Release the C plan (a closed plan can no longer be applied); the steps read out
        stay."""
        self._handle = None


class _PlanHandle(_Owned):
    """The owned ``tp_plan`` behind a :class:`Plan`, tied to its cluster."""
    _what = "plan"

    def __init__(self, ptr, cluster):
        self._ptr = _own(ptr, lib.tp_plan_destroy, cluster._p)
        self.cluster = cluster


def _read_plan(cluster, ptr):
    """A :class:`Plan` from a ``tp_plan *`` (owned from now on)."""
    h = _PlanHandle(ptr, cluster)
    p = h._p
    t = cluster._topo
    code = lib.tp_plan_status(p)
    status = {0: "ok", lib.TP_ENOPLAN: "none",
              lib.TP_EINFEASIBLE: "infeasible"}.get(code, error_class(code).name.lower())
    plan = Plan(status=status, code=code, message=_s(lib.tp_plan_errmsg(p)) or "", _handle=h)
    st = _defaults.c_init("defrag_stats")
    check(lib.tp_plan_stats(p, st), None, "tp_plan_stats failed")
    plan.stats = DefragStats(st.scanned, st.evaluated, st.simulated,
                             _BUDGET.get(st.budget, str(st.budget)))
    if code != 0:
        return plan
    action = ffi.new("tp_step_action *")
    job = ffi.new("char **")
    frm = ffi.new("uint32_t **")
    nfrm = ffi.new("size_t *")
    to = ffi.new("uint32_t **")
    nto = ffi.new("size_t *")
    for i in range(lib.tp_plan_step_count(p)):
        check(lib.tp_plan_step(p, i, action, job, frm, nfrm, to, nto), None,
              "tp_plan_step(%d) failed" % i)
        fids = [frm[0][k] for k in range(nfrm[0])]
        tids = [to[0][k] for k in range(nto[0])]
        plan.steps.append(PlanStep(_ACTION.get(action[0], str(action[0])), _s(job[0]) or "",
                                   [t.device_name(d) for d in fids],
                                   [t.device_name(d) for d in tids], fids, tids))
    plan.moved_job_count = lib.tp_plan_moved_job_count(p)
    plan.moved_device_count = lib.tp_plan_moved_device_count(p)
    plan.cost_s = lib.tp_plan_cost_s(p)
    plan.lower_bound_s = lib.tp_plan_lower_bound_s(p)
    tlevel, tdoms, tn = ffi.new("unsigned *"), ffi.new("uint32_t **"), ffi.new("size_t *")
    check(lib.tp_plan_targets(p, tlevel, tdoms, tn), None, "tp_plan_targets failed")
    if tn[0]:
        plan.targets = (tlevel[0], [tdoms[0][k] for k in range(tn[0])])
    pp = lib.tp_plan_placement(p)
    if pp != ffi.NULL:
        plan.placement = _read_placement(cluster, pp, borrowed_from=h)
    return plan
