# SPDX-License-Identifier: MIT
"""The request family: :class:`Request` (``tp_request``) and its nested parts :class:`Slice`,
:class:`DomainCap`, :class:`Spread`, :class:`Colocate` and :class:`Select`.

The defaults of the fields are those of ``TP_REQUEST_INIT`` (see :mod:`topoplace._defaults`).
"""

from dataclasses import dataclass, field
from typing import List, Optional

from . import _defaults
from ._core import _CLASS_CODE, _CLASS_NAME, JOB_CLASSES, _b, _coerce, _keep, _s, _strv, ffi
from .errors import InvalidArgument

__all__ = ["Slice", "DomainCap", "Spread", "Colocate", "Select", "Box", "Request"]

_REQ = _defaults.REQUEST
_COMM_FIELDS = ("tp", "pp", "dp", "ep", "compute_us", "tp_bytes", "tp_msgs", "dp_bytes",
                "dp_overlap", "pp_bytes", "pp_msgs", "ep_bytes", "ep_msgs", "min_efficiency",
                "no_floor_search", "fabric_fit")
_SEL = _defaults.SELECT


@dataclass
class Slice:
    """The devices, in rank order, cut into runs of ``size``, each inside one ``level``."""
    level: str
    size: int


@dataclass
class DomainCap:
    """At most ``devices`` devices, or ``groups`` groups, per domain of ``level`` (a level or a
    failure-domain kind); exactly one of the two is non-zero."""
    level: str
    devices: int = 0
    groups: int = 0


@dataclass
class Spread:
    """Touch at least ``min_domains`` domains of ``level`` (a level or failure-domain kind)."""
    level: str
    min_domains: int


@dataclass
class Colocate:
    """Lie inside one domain of ``level`` that also holds devices of the running ``job``."""
    job: str
    level: str


@dataclass
class Select:
    """Only devices matching every given property."""
    model: Optional[str] = _SEL["model"]
    min_perf: float = _SEL["min_perf"]
    min_memory_gb: float = _SEL["min_memory_gb"]
    nodes: Optional[List[str]] = None


@dataclass
class Box:
    """A box of children of one domain of the grid level ``level`` (a ring's arc, a torus's
    block): ``shape`` one extent per axis (``(4,)`` on a ring, ``(2, 2, 4)`` on a 3-D torus);
    ``wrap``: it may cross the seam of a wrapping axis; ``rotate``: any order of the extents.
    The request's ``count`` must be its cells times the devices of one child."""
    level: str
    shape: tuple
    wrap: bool = False
    rotate: bool = False


@dataclass
class Request:
    """What a job asks for (``tp_request``); the semantics of the scenario format's
    ``request``. Nested parts may be given as dataclasses, dicts or tuples
    (``slices=[("rack", 64)]``)."""
    count: int
    id: Optional[str] = _REQ["id"]
    job_class: str = _REQ["job_class"]
    priority: int = _REQ["priority"]
    tenant: Optional[str] = _REQ["tenant"]
    group_size: int = _REQ["group_size"]
    group_level: Optional[str] = _REQ["group_level"]
    required: Optional[str] = _REQ["required"]
    preferred: Optional[str] = _REQ["preferred"]
    slices: List[Slice] = field(default_factory=list)
    balanced: bool = _REQ["balanced"]
    max_per_domain: List[DomainCap] = field(default_factory=list)
    spread: Optional[Spread] = None
    colocate: Optional[Colocate] = None
    exclusive: Optional[str] = _REQ["exclusive"]
    select: Optional[Select] = None
    #: every device a GPU paired with a distinct nearest NIC of its node (``gpu_nic_pairs``)
    gpu_nic_pairs: bool = _REQ["gpu_nic_pairs"]
    #: how the job communicates (``comm``, a ``tp_step_model``): a dict of its fields (tp, pp,
    #: dp, ep, compute_us, tp_bytes, tp_msgs, dp_bytes, dp_overlap, pp_bytes, pp_msgs,
    #: ep_bytes, ep_msgs, min_efficiency, no_floor_search, fabric_fit; the others keep
    #: ``TP_STEP_MODEL_INIT``), or None. Rule 4: the modelled step time breaks the ties every
    #: earlier rule leaves; with ``min_efficiency`` > 0, when the rules' choice is modelled
    #: below that efficiency, the fabric classes are searched for a placement that meets it
    #: (not with ``no_floor_search`` 1) and, with none, the answer is "busy"; with
    #: ``fabric_fit`` > 0 the slowest fabric class that serves the job nearly as well as the
    #: best is tried first (``tp_step_model.fabric_fit``).
    comm: Optional[dict] = None
    #: the service this job is a replica of (``service``): placement keeps it to the service's
    #: spread caps (:meth:`Cluster.set_service_caps`), and once committed it counts as one
    service: Optional[str] = None
    #: a box of a grid level's children (``box_level``, ``box``, ``box_wrap``,
    #: ``box_rotate``), or None
    box: Optional[Box] = None
    #: when the job is expected to end, in seconds on the caller's own clock (its start plus
    #: its time limit, say; ``expected_end_s``), or 0: not known. Of the tightest nodes that
    #: hold the job, the one whose running jobs end last at or after it, nearest first, wins;
    #: best fit breaks ties.
    expected_end_s: float = 0.0

    def __post_init__(self):
        self.slices = [_coerce(Slice, s) for s in self.slices]
        self.max_per_domain = [_coerce(DomainCap, c) for c in self.max_per_domain]
        self.spread = _coerce(Spread, self.spread)
        self.colocate = _coerce(Colocate, self.colocate)
        self.select = _coerce(Select, self.select)
        self.box = _coerce(Box, self.box)
        if self.job_class not in _CLASS_CODE:
            raise InvalidArgument("request.class: unknown class %r (one of %s)"
                                  % (self.job_class, ", ".join(JOB_CLASSES)))

    def _to_c(self, keep):
        """A ``tp_request *``; every buffer it points to is appended to ``keep``."""
        r = _defaults.c_init("request")
        keep.append(r)

        def s(x, what):
            return _keep(keep, _b(x, what))

        r.id = s(self.id, "request.id")
        r.job_class = _CLASS_CODE[self.job_class]
        r.priority = self.priority
        r.tenant = s(self.tenant, "request.tenant")
        if not isinstance(self.count, int) or self.count < 1:
            raise InvalidArgument("request.count: must be a positive integer, not %r"
                                  % (self.count,))
        r.count = self.count
        r.group_size = self.group_size or 0
        r.group_level = s(self.group_level, "request.group.level")
        r.required = s(self.required, "request.required")
        r.preferred = s(self.preferred, "request.preferred")
        if self.slices:
            arr = ffi.new("tp_slice[]", len(self.slices))
            keep.append(arr)
            for i, sl in enumerate(self.slices):
                arr[i].level = s(sl.level, "request.slices[%d].level" % i)
                arr[i].size = sl.size
            r.slices, r.nslices = arr, len(self.slices)
        r.balanced = 1 if self.balanced else 0
        if self.max_per_domain:
            arr = ffi.new("tp_domain_cap[]", len(self.max_per_domain))
            keep.append(arr)
            for i, c in enumerate(self.max_per_domain):
                arr[i].level = s(c.level, "request.max_per_domain[%d].level" % i)
                arr[i].devices = c.devices or 0
                arr[i].groups = c.groups or 0
            r.caps, r.ncaps = arr, len(self.max_per_domain)
        if self.spread is not None:
            r.spread_level = s(self.spread.level, "request.spread.level")
            r.spread_min_domains = self.spread.min_domains
        if self.colocate is not None:
            r.colocate_job = s(self.colocate.job, "request.colocate.job")
            r.colocate_level = s(self.colocate.level, "request.colocate.level")
        r.exclusive = s(self.exclusive, "request.exclusive")
        if self.select is not None:
            sel = self.select
            r.select_model = s(sel.model, "request.select.model")
            r.select_min_perf = sel.min_perf or 0.0
            r.select_min_memory_gb = sel.min_memory_gb or 0.0
            if sel.nodes is not None:
                arr, n = _strv(sel.nodes, keep, "request.select.nodes")
                r.select_nodes, r.nselect_nodes = arr, n
        if not isinstance(self.gpu_nic_pairs, bool):
            raise InvalidArgument("request.gpu_nic_pairs: must be true or false, not %r"
                                  % (self.gpu_nic_pairs,))
        r.gpu_nic_pairs = 1 if self.gpu_nic_pairs else 0
        if self.comm is not None:
            m = _defaults.c_init("step_model")
            keep.append(m)
            for k in _COMM_FIELDS:
                if k in self.comm:
                    setattr(m, k, self.comm[k])
            r.comm = m
        r.service = s(self.service, "request.service")
        if self.box is not None:
            shape = tuple(self.box.shape)
            if not 1 <= len(shape) <= 3 or not all(isinstance(e, int) and e >= 0 for e in shape):
                raise InvalidArgument("request.box.shape: 1 to 3 extents >= 0, not %r"
                                      % (self.box.shape,))
            r.box_level = s(self.box.level, "request.box.level")
            for i, e in enumerate(shape):
                r.box[i] = e
            r.box_wrap = 1 if self.box.wrap else 0
            r.box_rotate = 1 if self.box.rotate else 0
        if isinstance(self.expected_end_s, bool) or not isinstance(self.expected_end_s,
                                                                     (int, float)):
            raise InvalidArgument("request.expected_end_s: must be a number, not %r"
                                  % (self.expected_end_s,))
        r.expected_end_s = self.expected_end_s
        return r

    @classmethod
    def _from_c(cls, r):
        """A Request from a ``tp_request *`` (a running job's shape)."""
        if r == ffi.NULL:
            return None
        sel = None
        if (r.select_model != ffi.NULL or r.select_min_perf or r.select_min_memory_gb
                or r.nselect_nodes):
            sel = Select(_s(r.select_model), r.select_min_perf, r.select_min_memory_gb,
                         [_s(r.select_nodes[i]) for i in range(r.nselect_nodes)]
                         if r.select_nodes != ffi.NULL else None)
        return cls(
            count=r.count, id=_s(r.id), job_class=_CLASS_NAME.get(r.job_class, "training"),
            priority=r.priority, tenant=_s(r.tenant), group_size=r.group_size or 1,
            group_level=_s(r.group_level), required=_s(r.required), preferred=_s(r.preferred),
            slices=[Slice(_s(r.slices[i].level), r.slices[i].size) for i in range(r.nslices)],
            balanced=bool(r.balanced),
            max_per_domain=[DomainCap(_s(r.caps[i].level), r.caps[i].devices, r.caps[i].groups)
                            for i in range(r.ncaps)],
            spread=Spread(_s(r.spread_level), r.spread_min_domains)
            if r.spread_level != ffi.NULL else None,
            colocate=Colocate(_s(r.colocate_job), _s(r.colocate_level))
            if r.colocate_job != ffi.NULL else None,
            exclusive=_s(r.exclusive), select=sel, gpu_nic_pairs=bool(r.gpu_nic_pairs),
            comm={k: getattr(r.comm, k) for k in _COMM_FIELDS} if r.comm != ffi.NULL else None,
            service=_s(r.service),
            box=Box(_s(r.box_level), tuple(r.box[i] for i in range(3)), bool(r.box_wrap),
                    bool(r.box_rotate)) if r.box_level != ffi.NULL else None,
            expected_end_s=r.expected_end_s)
