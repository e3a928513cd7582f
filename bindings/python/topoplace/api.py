# SPDX-License-Identifier: MIT
"""The Pythonic layer over the C API (include/topoplace.h).

Objects own their C counterparts through ``ffi.gc``: a C object is destroyed when the last
Python reference to it goes, and a child keeps its parent's C object alive (a cluster its
topology, a placement its cluster), so dropping objects in any order is safe. ``close()`` (or
leaving a ``with`` block) gives up the object at once; using it afterwards raises
:class:`~topoplace.errors.ClosedError`.

Threads: a :class:`Topology` is read-only and may be shared; a :class:`Cluster` has one writer
at a time (:meth:`Cluster.place` and the queries only read), as in C.
"""

import math
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Dict, List, Optional

from ._native import ffi, lib, has
from .errors import (ClosedError, InvalidArgument, NotFound, TopoplaceError, check,
                     error_class)

__all__ = ["version", "version_string", "strerror", "NodeType", "TopologyBuilder", "Topology",
           "Fabric", "Cluster", "Savepoint", "JobInfo", "Slice", "DomainCap", "Spread",
           "Colocate", "Select", "Request", "Fit", "Placement", "LevelFrag", "FragReport",
           "JobShape", "DefragPolicy", "Plan", "PlanStep", "place", "commit", "replace",
           "JOB_CLASSES", "LINK_KINDS"]

JOB_CLASSES = ("training", "inference", "interactive")
LINK_KINDS = ("nvlink", "pcie", "ib", "ethernet")
_CLASS_CODE = {"training": lib.TP_CLASS_TRAINING, "inference": lib.TP_CLASS_INFERENCE,
               "interactive": lib.TP_CLASS_INTERACTIVE}
_CLASS_NAME = {v: k for k, v in _CLASS_CODE.items()}
_LINK_CODE = {"nvlink": lib.TP_LINK_NVLINK, "pcie": lib.TP_LINK_PCIE, "ib": lib.TP_LINK_IB,
              "ethernet": lib.TP_LINK_ETHERNET}
_LINK_NAME = {v: k for k, v in _LINK_CODE.items()}
_DEVICE_STATE = {lib.TP_DEVICE_FREE: "free", lib.TP_DEVICE_HELD: "held",
                 lib.TP_DEVICE_DOWN: "down", lib.TP_DEVICE_CORDONED: "cordoned"}
_STATUS = {0: "ok", lib.TP_EINFEASIBLE: "infeasible", lib.TP_EBUSY: "busy",
           lib.TP_EFRAGMENTED: "fragmented"}
NONE = lib.TP_NONE


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def _b(s, what="name"):
    """A Python string as a NUL-terminated UTF-8 char array (None stays NULL)."""
    if s is None:
        return ffi.NULL
    if isinstance(s, bytes):
        b = s
    elif isinstance(s, str):
        b = s.encode("utf-8")
    else:
        raise TypeError("%s must be a string, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise InvalidArgument("%s %r contains a NUL character" % (what, s))
    return ffi.new("char[]", b)


def _s(p):
    """A C string as a Python string (None for NULL)."""
    return None if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def _own(ptr, destroy, *keep):
    """Give ``ptr`` to the garbage collector with ``destroy``; ``keep`` (parents' C objects)
    stays alive until ``destroy`` has run, whatever order Python drops things in."""
    def _destroy(p, _keep=keep):
        destroy(p)
    return ffi.gc(ptr, _destroy)


def version():
    """The library's run-time version as ``MAJOR * 10000 + MINOR * 100 + PATCH``."""
    return lib.tp_version()


def version_string():
    """The library's run-time version as a string ("0.2.0")."""
    return _s(lib.tp_version_string())


def strerror(code):
    """The fixed description of an error code."""
    return _s(lib.tp_strerror(code))


def _need(name, what):
    """Raise a clear error when the library lacks a function (a build behind its header)."""
    if not has(name):
        raise TopoplaceError("%s is not available in this build: libtopoplace does not export "
                             "%s" % (what, name))


class _Owned:
    """An object that owns one C object; ``close()`` and ``with`` release it."""

    _what = "object"
    _ptr = None

    @property
    def _p(self):
        p = self._ptr
        if p is None:
            raise ClosedError("the %s is closed" % self._what)
        return p

    @property
    def closed(self):
        return self._ptr is None

    def close(self):
        """Give up the C object. It is destroyed now, or when the last object that depends on
        it (a cluster of this topology, a placement of this cluster) is gone."""
        self._ptr = None

    def __enter__(self):
        self._p
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _errmsg(self):
        return ""


# --------------------------------------------------------------------------------------------
# node types
# --------------------------------------------------------------------------------------------

class NodeType(_Owned):
    """The insides of a node: PCIe switches, which GPU sits behind which, NICs, NVSwitches and
    NVLink bandwidths (``tp_nodetype``). Mutable until given to a node; the topology copies it.
    """

    _what = "node type"

    def __init__(self, gpus):
        out = ffi.new("tp_nodetype **")
        check(lib.tp_nodetype_create(out, gpus, ffi.NULL), None,
              "cannot create a node type of %r GPUs: %s" % (gpus, strerror(lib.TP_EINVAL)))
        self._ptr = _own(out[0], lib.tp_nodetype_destroy)

    @classmethod
    def from_hwloc_xml(cls, xml):
        """A node type read from an hwloc XML document (bytes or str), as ``lstopo x.xml``
        writes it: its GPUs in file order, PCIe switches, NICs, NVSwitches and NVLink.
        Raises :class:`ParseError` (not hwloc XML), :class:`NotFound` (no NVIDIA GPU),
        :class:`LimitExceeded`; :class:`TopoplaceError` when this build has no importer."""
        if not has("tp_nodetype_from_hwloc_xml"):
            raise TopoplaceError("this build of libtopoplace has no hwloc importer "
                                 "(tp_nodetype_from_hwloc_xml)")
        if isinstance(xml, str):
            xml = xml.encode("utf-8")
        out = ffi.new("tp_nodetype **")
        err = ffi.new("char[]", 512)
        rc = lib.tp_nodetype_from_hwloc_xml(out, xml, len(xml), ffi.NULL, err, 512)
        check(rc, None, ffi.string(err).decode("utf-8", "replace") or strerror(rc))
        self = object.__new__(cls)
        self._ptr = _own(out[0], lib.tp_nodetype_destroy)
        return self

    def _errmsg(self):
        return _s(lib.tp_nodetype_errmsg(self._p))

    def add_pcie_switch(self, parent=-1):
        """Add a PCIe switch below ``parent`` (-1: the host bridge); returns its index."""
        out = ffi.new("unsigned *")
        check(lib.tp_nodetype_add_pcie_switch(self._p, parent, out), self)
        return out[0]

    def set_gpu_switch(self, gpu, switch):
        check(lib.tp_nodetype_set_gpu_switch(self._p, gpu, switch), self)
        return self

    def add_nic(self, name, switch=-1, gbps=0.0):
        out = ffi.new("unsigned *")
        check(lib.tp_nodetype_add_nic(self._p, _b(name), switch, gbps, out), self)
        return out[0]

    def add_nvswitch(self, name):
        out = ffi.new("unsigned *")
        check(lib.tp_nodetype_add_nvswitch(self._p, _b(name), out), self)
        return out[0]

    def set_nvlink(self, a, b, gbps):
        check(lib.tp_nodetype_set_nvlink(self._p, a, b, gbps), self)
        return self

    @property
    def gpu_count(self):
        return lib.tp_nodetype_gpu_count(self._p)

    @property
    def pcie_switch_count(self):
        return lib.tp_nodetype_pcie_switch_count(self._p)

    @property
    def nic_count(self):
        return lib.tp_nodetype_nic_count(self._p)

    @property
    def nvswitch_count(self):
        return lib.tp_nodetype_nvswitch_count(self._p)

    def gpu_switch(self, gpu):
        """The PCIe switch GPU ``gpu`` sits behind (-1: the host bridge)."""
        # tp_nodetype_gpu_switch answers -1 both for the host bridge and TP_EINVAL: check the
        # index here so that the two cannot be confused.
        if not 0 <= gpu < self.gpu_count:
            raise InvalidArgument("unknown GPU %r (the node type has %d)" % (gpu, self.gpu_count))
        return lib.tp_nodetype_gpu_switch(self._p, gpu)

    def nvlink_gbps(self, a, b):
        return lib.tp_nodetype_nvlink_gbps(self._p, a, b)

    def pcie_distance(self, a, b):
        return check(lib.tp_nodetype_pcie_distance(self._p, a, b), None,
                     "unknown GPU %r or %r" % (a, b))


# --------------------------------------------------------------------------------------------
# topology
# --------------------------------------------------------------------------------------------

Fabric = namedtuple("Fabric", "kind gbps latency_us")
Fabric.__doc__ = "The link of a fabric level: kind name, GB/s per device, latency in us."


def _perf_args(perf, keep):
    """(perf, device_perf pointer) of tp_node_options from a number or a per-device list."""
    if perf is None:
        return 1.0, ffi.NULL
    if isinstance(perf, (int, float)):
        return float(perf), ffi.NULL
    arr = ffi.new("double[]", [float(x) for x in perf])
    keep.append(arr)
    return 1.0, arr


def _node_options(model, memory_gb, perf, node_type, keep):
    opts = ffi.new("tp_node_options *")
    opts.version = lib.TP_NODE_OPTIONS_VERSION
    m = _b(model, "model")
    keep.append(m)
    opts.model = m
    opts.memory_gb = float(memory_gb or 0.0)
    opts.perf, opts.device_perf = _perf_args(perf, keep)
    opts.type = node_type._p if node_type is not None else ffi.NULL
    keep.append(opts)
    return opts


def _strv(names, keep, what="name"):
    """A ``const char *const *`` array of names."""
    names = list(names)
    bufs = [_b(n, what) for n in names]
    arr = ffi.new("char *[]", bufs) if bufs else ffi.NULL
    keep.append(bufs)
    keep.append(arr)
    return arr, len(names)


class TopologyBuilder(_Owned):
    """Collects levels, fabrics, nodes and failure domains, then builds a :class:`Topology`.

    Every method returns the builder, so calls chain::

        t = (TopologyBuilder(["rack", "node"])
             .add_node("x1", ["r1"], gpus=8, model="H100")
             .build())
    """

    _what = "topology builder"

    def __init__(self, levels):
        keep = []
        arr, n = _strv(levels, keep, "level name")
        out = ffi.new("tp_topology_builder **")
        rc = lib.tp_topology_builder_create(out, arr, n, ffi.NULL)
        if rc < 0:
            check(rc, None, "levels %r: %s (1 to %d unique, non-empty names without '/', not "
                  "'cluster')" % (list(levels), strerror(rc), lib.TP_MAX_LEVELS))
        self._ptr = _own(out[0], lib.tp_topology_builder_destroy)
        self.levels = tuple(levels)

    def _errmsg(self):
        return _s(lib.tp_topology_builder_errmsg(self._p))

    def _level(self, level):
        if isinstance(level, int):
            return level
        if level == "cluster":
            return lib.TP_LEVEL_CLUSTER
        try:
            return self.levels.index(level)
        except ValueError:
            raise NotFound("unknown level %r (levels: %s)" % (level, ", ".join(self.levels)))

    def set_fabric(self, level, kind, gbps, latency_us):
        """Set the link of a level (a name, an index, or "cluster")."""
        if kind not in _LINK_CODE:
            raise InvalidArgument("unknown link kind %r (one of %s)"
                                  % (kind, ", ".join(LINK_KINDS)))
        check(lib.tp_topology_builder_set_fabric(self._p, self._level(level), _LINK_CODE[kind],
                                                 gbps, latency_us), self)
        return self

    def add_node(self, name, path=(), gpus=1, model=None, memory_gb=0.0, perf=1.0,
                 node_type=None):
        """Add a node: its domain names at every level above the node, its device count and
        attributes (``perf`` a number or one per device)."""
        keep = []
        arr, n = _strv(path, keep, "domain name")
        opts = _node_options(model, memory_gb, perf, node_type, keep)
        check(lib.tp_topology_builder_add_node(self._p, _keep(keep, _b(name)), arr, gpus, opts),
              self)
        return self

    def generate(self, counts, gpus_per_node, model=None, memory_gb=0.0, perf=1.0,
                 node_type=None):
        """Add a regular tree: ``counts[i]`` domains of level i in each domain of level i-1."""
        keep = []
        carr = ffi.new("unsigned[]", list(counts))
        opts = _node_options(model, memory_gb, perf, node_type, keep)
        if len(counts) != len(self.levels):
            raise InvalidArgument("counts: %d values for %d levels" % (len(counts),
                                                                       len(self.levels)))
        check(lib.tp_topology_builder_generate(self._p, carr, gpus_per_node, opts), self)
        return self

    def add_failure_domain(self, kind, domain, node, device=None):
        """Put a node (or one of its devices) in a failure domain of ``kind``."""
        check(lib.tp_topology_builder_add_failure_domain(
            self._p, _b(kind), _b(domain), _b(node), -1 if device is None else device), self)
        return self

    def add_nvswitch(self, level, path, name):
        """Add an NVSwitch to the domain ``path`` of a level above the node."""
        keep = []
        arr, _ = _strv(path, keep, "domain name")
        check(lib.tp_topology_builder_add_nvswitch(self._p, self._level(level), arr, _b(name)),
              self)
        return self

    def build(self):
        """Build the topology (the builder stays usable)."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_build(self._p, out), self)
        return Topology._wrap(_own(out[0], lib.tp_topology_destroy))


def _keep(keep, x):
    keep.append(x)
    return x


class Topology(_Owned):
    """An immutable topology: levels, domains, nodes, devices, fabrics and failure domains.

    Make one with :class:`TopologyBuilder`, :meth:`generate`, :meth:`nvl72` or :meth:`hgx`.
    Levels may be given by name or index everywhere; domains, nodes and devices are dense
    integer ids (tree order), and nodes and devices may also be given by name (``"x3"``,
    ``"x3/1"``).
    """

    _what = "topology"

    def __init__(self, *args, **kwargs):
        raise TypeError("make a Topology with TopologyBuilder(...).build(), "
                        "Topology.generate(), Topology.nvl72() or Topology.hgx()")

    @classmethod
    def _wrap(cls, ptr):
        self = object.__new__(cls)
        self._ptr = ptr
        n = lib.tp_topology_level_count(ptr)
        self.levels = tuple(_s(lib.tp_topology_level_name(ptr, i)) for i in range(n))
        self._paths = {}
        self._node_names = {}
        return self

    @classmethod
    def generate(cls, levels, counts, gpus_per_node, model=None, memory_gb=0.0, perf=1.0):
        """A regular cluster, as the scenario format's ``generate``."""
        return TopologyBuilder(levels).generate(counts, gpus_per_node, model, memory_gb,
                                                perf).build()

    @classmethod
    def nvl72(cls, blocks, racks_per_block):
        """A GB200 NVL72 fleet: levels block, rack, node; 18 nodes x 4 GPUs per rack."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_generate_nvl72(out, blocks, racks_per_block, ffi.NULL), None,
              "nvl72(%r, %r): %s" % (blocks, racks_per_block, "invalid or too large a fleet"))
        return cls._wrap(_own(out[0], lib.tp_topology_destroy))

    @classmethod
    def hgx(cls, units, nodes_per_unit):
        """An HGX fleet: levels su, node; 8-GPU H100 nodes."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_generate_hgx(out, units, nodes_per_unit, ffi.NULL), None,
              "hgx(%r, %r): %s" % (units, nodes_per_unit, "invalid or too large a fleet"))
        return cls._wrap(_own(out[0], lib.tp_topology_destroy))

    # -- levels ---------------------------------------------------------------------------
    @property
    def node_level(self):
        """Index of the node level (the last one)."""
        return len(self.levels) - 1

    def level(self, level):
        """A level's index from its name or index ("cluster" gives TP_LEVEL_CLUSTER)."""
        if isinstance(level, int) and not isinstance(level, bool):
            if level == lib.TP_LEVEL_CLUSTER or 0 <= level < len(self.levels):
                return level
            raise InvalidArgument("level %d out of range (0..%d)" % (level, len(self.levels) - 1))
        if level == "cluster":
            return lib.TP_LEVEL_CLUSTER
        rc = lib.tp_topology_level_by_name(self._p, _b(level, "level"))
        return check(rc, None, "unknown level %r (levels: %s)" % (level, ", ".join(self.levels)))

    def fabric(self, level):
        """The :class:`Fabric` of a level, or of "cluster" (between top-level domains)."""
        kind = ffi.new("tp_link_kind *")
        gbps = ffi.new("double *")
        lat = ffi.new("double *")
        check(lib.tp_topology_fabric(self._p, self.level(level), kind, gbps, lat), None,
              "no fabric for level %r" % (level,))
        return Fabric(_LINK_NAME.get(kind[0], str(kind[0])), gbps[0], lat[0])

    # -- domains --------------------------------------------------------------------------
    def domain_count(self, level):
        return lib.tp_topology_domain_count(self._p, self.level(level))

    def domain_name(self, level, dom):
        return _s(lib.tp_topology_domain_name(self._p, self.level(level), dom))

    def domain_path(self, level, dom):
        """A domain's path ("b1/r3"); the node name at the node level."""
        lv = self.level(level)
        key = (lv, dom)
        path = self._paths.get(key)
        if path is None:
            buf = ffi.new("char[]", 256)
            n = check(lib.tp_topology_domain_path(self._p, lv, dom, buf, 256), None,
                      "no domain %r at level %r" % (dom, level))
            if n >= 256:
                buf = ffi.new("char[]", n + 1)
                lib.tp_topology_domain_path(self._p, lv, dom, buf, n + 1)
            path = ffi.string(buf).decode("utf-8", "replace")
            self._paths[key] = path
        return path

    def domain_by_path(self, level, path):
        out = ffi.new("uint32_t *")
        check(lib.tp_topology_domain_by_path(self._p, self.level(level), _b(path), out), None,
              "no %s domain %r" % (self.levels[self.level(level)], path))
        return out[0]

    def domain_parent(self, level, dom):
        p = lib.tp_topology_domain_parent(self._p, self.level(level), dom)
        return None if p == NONE else p

    def _span(self, fn, level, dom, what):
        first = ffi.new("uint32_t *")
        n = ffi.new("uint32_t *")
        check(fn(self._p, self.level(level), dom, first, n), None,
              "no %s of domain %r at level %r" % (what, dom, level))
        return range(first[0], first[0] + n[0])

    def domain_children(self, level, dom):
        """The children of a domain (domain ids of the next level), as a range."""
        return self._span(lib.tp_topology_domain_children, level, dom, "children")

    def domain_nodes(self, level, dom):
        return self._span(lib.tp_topology_domain_nodes, level, dom, "nodes")

    def domain_devices(self, level, dom):
        return self._span(lib.tp_topology_domain_devices, level, dom, "devices")

    def domain_nvswitch_count(self, level, dom):
        return lib.tp_topology_domain_nvswitch_count(self._p, self.level(level), dom)

    # -- nodes and devices ----------------------------------------------------------------
    @property
    def node_count(self):
        return lib.tp_topology_node_count(self._p)

    @property
    def device_count(self):
        return lib.tp_topology_device_count(self._p)

    def node(self, node):
        """A node id from an id or a name."""
        if isinstance(node, int) and not isinstance(node, bool):
            return node
        out = ffi.new("uint32_t *")
        check(lib.tp_topology_node_by_name(self._p, _b(node, "node name"), out), None,
              "unknown node %r" % (node,))
        return out[0]

    def node_name(self, node):
        name = self._node_names.get(node)
        if name is None:
            name = _s(lib.tp_topology_node_name(self._p, node))
            if name is None:
                raise InvalidArgument("no node %r" % (node,))
            self._node_names[node] = name
        return name

    def node_model(self, node):
        return _s(lib.tp_topology_node_model(self._p, self.node(node)))

    def node_memory_gb(self, node):
        return lib.tp_topology_node_memory_gb(self._p, self.node(node))

    def node_domain(self, node, level):
        d = lib.tp_topology_node_domain(self._p, self.node(node), self.level(level))
        return None if d == NONE else d

    def node_devices(self, node):
        """The device ids of a node, as a range."""
        return self.domain_devices(self.node_level, self.node(node))

    def device(self, dev):
        """A device id from an id or a name ``node/index``."""
        if isinstance(dev, int) and not isinstance(dev, bool):
            return dev
        out = ffi.new("uint32_t *")
        check(lib.tp_topology_device_by_name(self._p, _b(dev, "device name"), out), None,
              "unknown device %r" % (dev,))
        return out[0]

    def devices(self, refs):
        """Device ids from ids, device names, and node names (all the node's devices)."""
        out = []
        for r in refs:
            if isinstance(r, str) and "/" not in r:
                out.extend(self.node_devices(r))
            else:
                out.append(self.device(r))
        return out

    def device_node(self, dev):
        n = lib.tp_topology_device_node(self._p, self.device(dev))
        if n == NONE:
            raise InvalidArgument("no device %r" % (dev,))
        return n

    def device_index(self, dev):
        i = lib.tp_topology_device_index(self._p, self.device(dev))
        if i == NONE:
            raise InvalidArgument("no device %r" % (dev,))
        return i

    def device_name(self, dev):
        """A device's name ``node/index``."""
        return "%s/%d" % (self.node_name(self.device_node(dev)), self.device_index(dev))

    def device_perf(self, dev):
        return lib.tp_topology_device_perf(self._p, self.device(dev))

    def common_level(self, a, b):
        """Name of the smallest level whose one domain holds both devices ("cluster" when
        they are in different top-level domains)."""
        out = ffi.new("int *")
        check(lib.tp_topology_common_level(self._p, self.device(a), self.device(b), out), None,
              "unknown device %r or %r" % (a, b))
        return "cluster" if out[0] == lib.TP_LEVEL_CLUSTER else self.levels[out[0]]

    # -- failure domains ------------------------------------------------------------------
    @property
    def fd_kinds(self):
        return tuple(_s(lib.tp_topology_fd_kind_name(self._p, i))
                     for i in range(lib.tp_topology_fd_kind_count(self._p)))

    def _fd_kind(self, kind):
        if isinstance(kind, int):
            return kind
        return check(lib.tp_topology_fd_kind_by_name(self._p, _b(kind)), None,
                     "unknown failure-domain kind %r" % (kind,))

    def fd_count(self, kind):
        return lib.tp_topology_fd_count(self._p, self._fd_kind(kind))

    def fd_name(self, kind, fd):
        return _s(lib.tp_topology_fd_name(self._p, self._fd_kind(kind), fd))

    def device_fd(self, kind, dev):
        d = lib.tp_topology_device_fd(self._p, self._fd_kind(kind), self.device(dev))
        return None if d == NONE else d

    @property
    def memory(self):
        """Bytes of memory the topology holds."""
        return lib.tp_topology_memory(self._p)

    def __repr__(self):
        if self.closed:
            return "<Topology closed>"
        return "<Topology levels=%s nodes=%d devices=%d>" % (
            "/".join(self.levels), self.node_count, self.device_count)


# --------------------------------------------------------------------------------------------
# requests
# --------------------------------------------------------------------------------------------

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
    model: Optional[str] = None
    min_perf: float = 0.0
    min_memory_gb: float = 0.0
    nodes: Optional[List[str]] = None


def _coerce(cls, x):
    if x is None or isinstance(x, cls):
        return x
    if isinstance(x, dict):
        return cls(**x)
    return cls(*x)


@dataclass
class Request:
    """What a job asks for (``tp_request``); the semantics of the scenario format's
    ``request``. Nested parts may be given as dataclasses, dicts or tuples
    (``slices=[("rack", 64)]``)."""
    count: int
    id: Optional[str] = None
    job_class: str = "training"
    priority: int = 0
    tenant: Optional[str] = None
    group_size: int = 1
    group_level: Optional[str] = None
    required: Optional[str] = None
    preferred: Optional[str] = None
    slices: List[Slice] = field(default_factory=list)
    balanced: bool = False
    max_per_domain: List[DomainCap] = field(default_factory=list)
    spread: Optional[Spread] = None
    colocate: Optional[Colocate] = None
    exclusive: Optional[str] = None
    select: Optional[Select] = None
    #: every device a GPU paired with a distinct nearest NIC of its node (``gpu_nic_pairs``)
    gpu_nic_pairs: bool = False

    def __post_init__(self):
        self.slices = [_coerce(Slice, s) for s in self.slices]
        self.max_per_domain = [_coerce(DomainCap, c) for c in self.max_per_domain]
        self.spread = _coerce(Spread, self.spread)
        self.colocate = _coerce(Colocate, self.colocate)
        self.select = _coerce(Select, self.select)
        if self.job_class not in _CLASS_CODE:
            raise InvalidArgument("request.class: unknown class %r (one of %s)"
                                  % (self.job_class, ", ".join(JOB_CLASSES)))

    def _to_c(self, keep):
        """A ``tp_request *``; every buffer it points to is appended to ``keep``."""
        r = ffi.new("tp_request *")
        keep.append(r)
        r.version = lib.TP_REQUEST_VERSION

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
            exclusive=_s(r.exclusive), select=sel, gpu_nic_pairs=bool(r.gpu_nic_pairs))


def _job_options(keep, job_class="training", priority=0, tenant=None, preemptible=True,
                 migratable=False, checkpoint_s=60.0, shape=None):
    if job_class not in _CLASS_CODE:
        raise InvalidArgument("unknown job class %r (one of %s)"
                              % (job_class, ", ".join(JOB_CLASSES)))
    o = ffi.new("tp_job_options *")
    keep.append(o)
    o.version = lib.TP_JOB_OPTIONS_VERSION
    o.job_class = _CLASS_CODE[job_class]
    o.priority = priority
    o.tenant = _keep(keep, _b(tenant, "tenant"))
    o.preemptible = 1 if preemptible else 0
    o.migratable = 1 if migratable else 0
    o.checkpoint_s = checkpoint_s
    o.shape = shape._to_c(keep) if shape is not None else ffi.NULL
    return o


@dataclass
class JobInfo:
    """A running job's attributes (``tp_job_options``)."""
    id: str
    job_class: str
    priority: int
    tenant: str
    preemptible: bool
    migratable: bool
    checkpoint_s: float
    shape: Optional[Request]


# --------------------------------------------------------------------------------------------
# placements
# --------------------------------------------------------------------------------------------

@dataclass
class Fit:
    """Why a request could not be placed, in figures (``tp_fit``)."""
    needed: int
    free_total: int
    level: str
    best: int


@dataclass
class Placement:
    """The answer to a request (``tp_placement``), read out at once.

    ``status`` is "ok", "infeasible", "busy" or "fragmented". On success ``devices`` holds the
    device names in rank order and ``domains`` maps every level (the node level included) to
    the domains used (by path) and their device counts, in first-rank order. Otherwise
    ``message`` says why and ``fit`` gives the figures. A replacement also fills ``replaced``
    (failed device -> its replacement). For a request with ``gpu_nic_pairs``, ``nics`` holds
    the name of the NIC paired with each rank (``tp_placement_nic``; None for a device of a
    replaced job that has none). Pass it to :meth:`Cluster.commit` to apply it.
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
    _handle: object = field(default=None, repr=False, compare=False)
    _node_level: str = field(default="", repr=False, compare=False)

    @property
    def ok(self):
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
        nic = [lib.tp_placement_nic(p, i) for i in range(len(pl.device_ids))]
        if any(x >= 0 for x in nic):  # a request with gpu_nic_pairs
            pl.nics = [_nic_name(t, d, x) for d, x in zip(pl.device_ids, nic)]
        failed = ffi.new("uint32_t *")
        repl = ffi.new("uint32_t *")
        i = 0
        while lib.tp_placement_replaced(p, i, failed, repl) == 0:
            pl.replaced[t.device_name(failed[0])] = t.device_name(repl[0])
            i += 1
    else:
        fit = ffi.new("tp_fit *")
        if lib.tp_placement_fit(p, fit) == 0:
            lvl = fit.level
            pl.fit = Fit(fit.needed, fit.free_total,
                         t.levels[lvl] if 0 <= lvl < len(t.levels) else "cluster", fit.best)
    return pl


# --------------------------------------------------------------------------------------------
# fragmentation report
# --------------------------------------------------------------------------------------------

@dataclass
class LevelFrag:
    """Fragmentation figures of one level."""
    domains: int
    free: int
    fully_free: int
    largest_free: int
    fragmentation: float


@dataclass
class FragReport:
    """Per-level figures (every level, the node level included) and device totals.
    ``workload`` is the share of free devices the job mix cannot use at full locality (None
    when the library has no tp_frag_report)."""
    levels: Dict[str, LevelFrag]
    free: int
    down: int
    cordoned: int
    workload: Optional[float] = None


@dataclass
class JobShape:
    """One kind of job in a mix for :meth:`Cluster.frag`: ``devices`` devices inside one
    domain of ``level``, with a relative ``weight``."""
    devices: int
    level: str
    weight: float = 1.0


# --------------------------------------------------------------------------------------------
# defragmentation plans
# --------------------------------------------------------------------------------------------

@dataclass
class DefragPolicy:
    """What a plan may do (``tp_defrag_policy``); None means no limit."""
    migrate: bool = True
    preempt: bool = True
    allow_interactive: bool = False
    max_moves: Optional[int] = None
    max_cost_s: Optional[float] = None
    min_priority_gap: int = 1
    #: a migrated job may land less local than it sits (False: never; see docs/defrag.md)
    allow_less_local: bool = False

    def _to_c(self, keep):
        p = ffi.new("tp_defrag_policy *")
        keep.append(p)
        p.version = lib.TP_DEFRAG_POLICY_VERSION
        p.migrate = 1 if self.migrate else 0
        p.preempt = 1 if self.preempt else 0
        p.allow_interactive = 1 if self.allow_interactive else 0
        p.max_moves = 0xFFFFFFFF if self.max_moves is None else self.max_moves
        p.max_cost_s = -1.0 if self.max_cost_s is None else float(self.max_cost_s)
        # priorities are integers, so a fractional gap means the next integer
        p.min_priority_gap = int(math.ceil(self.min_priority_gap))
        p.allow_less_local = 1 if self.allow_less_local else 0
        return p


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
    moved_jobs: int = 0
    moved_devices: int = 0
    cost_s: float = 0.0
    placement: Optional["Placement"] = None
    _handle: object = field(default=None, repr=False, compare=False)

    @property
    def ok(self):
        return self.code == 0


class _PlanHandle(_Owned):
    _what = "plan"

    def __init__(self, ptr, cluster):
        self._ptr = _own(ptr, lib.tp_plan_destroy, cluster._p)
        self.cluster = cluster


def _read_plan(cluster, ptr):
    h = _PlanHandle(ptr, cluster)
    p = h._p
    t = cluster._topo
    code = lib.tp_plan_status(p)
    status = {0: "ok", lib.TP_ENOPLAN: "none",
              lib.TP_EINFEASIBLE: "infeasible"}.get(code, error_class(code).name.lower())
    plan = Plan(status=status, code=code, message=_s(lib.tp_plan_errmsg(p)) or "", _handle=h)
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
    plan.moved_jobs = lib.tp_plan_moved_jobs(p)
    plan.moved_devices = lib.tp_plan_moved_devices(p)
    plan.cost_s = lib.tp_plan_cost_s(p)
    pp = lib.tp_plan_placement(p)
    if pp != ffi.NULL:
        plan.placement = _read_placement(cluster, pp, borrowed_from=h)
    return plan


# --------------------------------------------------------------------------------------------
# cluster
# --------------------------------------------------------------------------------------------

class Savepoint:
    """A savepoint of a :class:`Cluster`, as a context manager.

    ``with cluster.savepoint() as sp:`` keeps the changes made in the block when it ends
    normally and rolls them back when it raises; ``savepoint(rollback=True)`` always rolls back
    (try moves, look, undo). :meth:`rollback` and :meth:`keep` end it early.
    """

    def __init__(self, cluster, rollback=False):
        self._cluster = cluster
        self._always_rollback = rollback
        self._sp = None

    def __enter__(self):
        sp = ffi.new("size_t *")
        check(lib.tp_cluster_savepoint(self._cluster._p, sp), self._cluster)
        self._sp = sp[0]
        return self

    def rollback(self):
        """Undo every change since the savepoint and close it."""
        if self._sp is not None:
            sp, self._sp = self._sp, None
            check(lib.tp_cluster_rollback(self._cluster._p, sp), self._cluster)

    def keep(self):
        """Close the savepoint, keeping the changes."""
        if self._sp is not None:
            sp, self._sp = self._sp, None
            check(lib.tp_cluster_savepoint_discard(self._cluster._p, sp), self._cluster)

    def __exit__(self, exc_type, exc, tb):
        if self._cluster.closed:
            self._sp = None
        elif exc_type is not None or self._always_rollback:
            self.rollback()
        else:
            self.keep()
        return False


class Cluster(_Owned):
    """The mutable state of a topology: which device is free, held, down or cordoned.

    Devices may be given as ids, ``"node/index"`` names, or node names (all the node's
    devices) wherever a list of devices is taken.
    """

    _what = "cluster"

    def __init__(self, topology):
        if not isinstance(topology, Topology):
            raise TypeError("Cluster(topology) needs a Topology, not %s"
                            % type(topology).__name__)
        tptr = topology._p
        out = ffi.new("tp_cluster **")
        check(lib.tp_cluster_create(out, tptr, ffi.NULL), None, "cannot create a cluster")
        self._ptr = _own(out[0], lib.tp_cluster_destroy, tptr)
        self.topology = topology
        # Lookups go through a view that shares the C topology, so that they keep working
        # when the caller closes its Topology object while the cluster lives.
        self._topo = Topology._wrap(tptr)

    @classmethod
    def _wrap(cls, ptr, topology):
        """A Cluster over a ``tp_cluster *`` someone else owns (the scenario importer's):
        ``ptr`` must keep its owner alive (an ``ffi.gc`` pointer)."""
        self = object.__new__(cls)
        self._ptr = ptr
        self.topology = topology
        self._topo = Topology._wrap(topology._p)
        return self

    def _errmsg(self):
        return _s(lib.tp_cluster_errmsg(self._p))

    def _ids(self, devices):
        ids = self._topo.devices(devices)
        return ffi.new("uint32_t[]", ids), len(ids)

    # -- writing --------------------------------------------------------------------------
    def assign(self, job, devices, job_class="training", priority=0, tenant=None,
               preemptible=True, migratable=False, checkpoint_s=60.0, shape=None):
        """Record a running job on explicit devices, in rank order."""
        keep = []
        arr, n = self._ids(devices)
        opts = _job_options(keep, job_class, priority, tenant, preemptible, migratable,
                            checkpoint_s, shape)
        check(lib.tp_cluster_assign(self._p, _b(job, "job id"), arr, n, opts), self)

    def release(self, job):
        """Remove a running job; its devices become free (unless down or cordoned)."""
        check(lib.tp_cluster_release(self._p, _b(job, "job id")), self)

    def set_down(self, devices, down=True):
        arr, n = self._ids(devices)
        check(lib.tp_cluster_set_down(self._p, arr, n, 1 if down else 0), self)

    def set_cordoned(self, devices, cordoned=True):
        arr, n = self._ids(devices)
        check(lib.tp_cluster_set_cordoned(self._p, arr, n, 1 if cordoned else 0), self)

    def savepoint(self, rollback=False):
        """A :class:`Savepoint` context manager."""
        return Savepoint(self, rollback)

    # -- reading --------------------------------------------------------------------------
    def free(self, level, dom):
        """Free devices (healthy, not cordoned, held by no job) in a domain."""
        return lib.tp_cluster_free(self._p, self._topo.level(level), self._dom(level, dom))

    def _dom(self, level, dom):
        if isinstance(dom, str):
            return self._topo.domain_by_path(level, dom)
        return dom

    @property
    def free_total(self):
        return lib.tp_cluster_free_total(self._p)

    def free_nodes(self, level, dom):
        """Nodes of a domain whose every device is free."""
        return lib.tp_cluster_free_nodes(self._p, self._topo.level(level), self._dom(level, dom))

    def node_histogram(self, level, dom, n=None):
        """``hist[k]`` = nodes of the domain with exactly ``k`` free devices."""
        if n is None:
            n = lib.TP_MAX_NODE_DEVICES + 1
        hist = ffi.new("uint32_t[]", n)
        top = check(lib.tp_cluster_node_histogram(self._p, self._topo.level(level),
                                                  self._dom(level, dom), hist, n), None,
                    "no domain %r at level %r" % (dom, level))
        return [hist[i] for i in range(min(n, top + 1))]

    def tightest(self, level, min_free):
        """The domain of ``level`` with the fewest free devices but at least ``min_free``, or
        None."""
        out = ffi.new("uint32_t *")
        rc = lib.tp_cluster_tightest(self._p, self._topo.level(level), min_free, out)
        if rc == lib.TP_ENOTFOUND:
            return None
        check(rc, None, "tightest(%r, %r): invalid argument" % (level, min_free))
        return out[0]

    def device_state(self, dev):
        """(state, job): state is "free", "held", "down" or "cordoned"; job the holder."""
        job = ffi.new("char **")
        rc = lib.tp_cluster_device_state(self._p, self._topo.device(dev), job)
        check(rc, None, "no device %r" % (dev,))
        return _DEVICE_STATE.get(rc, str(rc)), _s(job[0])

    def device_down(self, dev):
        return bool(check(lib.tp_cluster_device_down(self._p, self._topo.device(dev)), None,
                          "no device %r" % (dev,)))

    def device_cordoned(self, dev):
        return bool(check(lib.tp_cluster_device_cordoned(self._p, self._topo.device(dev)),
                          None, "no device %r" % (dev,)))

    @property
    def down_total(self):
        return lib.tp_cluster_down_total(self._p)

    @property
    def cordoned_total(self):
        return lib.tp_cluster_cordoned_total(self._p)

    @property
    def jobs(self):
        """Ids of the running jobs."""
        p = self._p
        return [_s(lib.tp_cluster_job_at(p, i)) for i in range(lib.tp_cluster_job_count(p))]

    def job_devices(self, job):
        """A running job's device ids, in rank order."""
        devs = ffi.new("uint32_t **")
        n = ffi.new("size_t *")
        check(lib.tp_cluster_job_devices(self._p, _b(job, "job id"), devs, n), None,
              "no running job %r" % (job,))
        return [devs[0][i] for i in range(n[0])]

    def job_device_names(self, job):
        return [self._topo.device_name(d) for d in self.job_devices(job)]

    def job_info(self, job):
        """A running job's attributes as a :class:`JobInfo`."""
        o = ffi.new("tp_job_options *")
        o.version = lib.TP_JOB_OPTIONS_VERSION
        check(lib.tp_cluster_job_options(self._p, _b(job, "job id"), o), None,
              "no running job %r" % (job,))
        return JobInfo(job, _CLASS_NAME.get(o.job_class, "training"), o.priority,
                       _s(o.tenant) or "default", bool(o.preemptible), bool(o.migratable),
                       o.checkpoint_s, Request._from_c(o.shape))

    @property
    def fingerprint(self):
        """A 64-bit fingerprint of the state (equal states, equal values)."""
        return lib.tp_cluster_fingerprint(self._p)

    def check(self):
        """Recompute every aggregate and compare; raises :class:`Corrupt` on a difference."""
        buf = ffi.new("char[]", 512)
        rc = lib.tp_cluster_check(self._p, buf, 512)
        if rc < 0:
            check(rc, None, ffi.string(buf).decode("utf-8", "replace") or strerror(rc))
        return True

    @property
    def memory(self):
        return lib.tp_cluster_memory(self._p)

    # -- placement ------------------------------------------------------------------------
    def place(self, request):
        """Where would ``request`` go? Returns a :class:`Placement` (its ``status`` says
        whether it was placed); raises :class:`InvalidArgument` / :class:`NotFound` for an
        invalid request and :class:`OutOfMemory`."""
        if not isinstance(request, Request):
            raise TypeError("place() needs a Request, not %s" % type(request).__name__)
        _need("tp_place", "place")
        keep = []
        r = request._to_c(keep)
        out = ffi.new("tp_placement **")
        rc = lib.tp_place(self._p, r, out)
        return self._result(rc, out[0])

    def replace(self, job, failed):
        """Replacement devices for the failed devices of a running job (ids or names; a node
        name stands for the job's devices on that node)."""
        _need("tp_replace", "replace")
        held = self.job_devices(job)
        ids = []
        for f in failed:
            if isinstance(f, str) and "/" not in f:
                node_devs = set(self._topo.node_devices(f))
                ids.extend(d for d in held if d in node_devs)
            else:
                ids.append(self._topo.device(f))
        arr = ffi.new("uint32_t[]", ids)
        out = ffi.new("tp_placement **")
        rc = lib.tp_replace(self._p, _b(job, "job id"), arr, len(ids), out)
        return self._result(rc, out[0])

    def _result(self, rc, ptr):
        if ptr == ffi.NULL:
            check(rc if rc < 0 else lib.TP_ENOMEM, self)
        pl = _read_placement(self, ptr)
        if rc < 0 and rc not in _STATUS:
            # an invalid request: the result carries the message naming the field
            raise error_class(rc)(pl.message or strerror(rc))
        return pl

    def commit(self, placement, job_class=None, priority=None, tenant=None, preemptible=True,
               migratable=False, checkpoint_s=60.0, shape=None):
        """Apply a successful placement: a new job, or a replacement's swap. With no options
        the job takes class, priority and tenant from the request."""
        _need("tp_commit", "commit")
        res = placement._handle if isinstance(placement, Placement) else None
        if res is None:
            raise InvalidArgument("commit() needs an open Placement from place() or replace()")
        if res.cluster is not self:
            raise InvalidArgument("the placement was made on another cluster")
        keep = []
        opts = ffi.NULL
        if job_class is not None or priority is not None or tenant is not None or \
                not preemptible or migratable or checkpoint_s != 60.0 or shape is not None:
            opts = _job_options(keep, job_class or "training", priority or 0, tenant,
                                preemptible, migratable, checkpoint_s, shape)
        check(lib.tp_commit(self._p, res._p, opts), self)

    # -- fragmentation and defragmentation ------------------------------------------------
    def frag(self, mix=None):
        """Fragmentation figures of every level (:class:`FragReport`); ``mix`` is a list of
        :class:`JobShape` for the workload figure (None: the library's default mix)."""
        if not has("tp_frag_report"):
            return self._frag_fallback()
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
        rc = lib.tp_frag_report(self._p, arr, n, out)
        check(rc, None, "frag report: %s (mix shapes need devices >= 1, a weight > 0 and a "
                        "known level)" % strerror(rc))
        f = ffi.gc(out[0], lib.tp_frag_destroy)
        levels = {name: LevelFrag(lib.tp_frag_domains(f, lv), lib.tp_frag_free(f, lv),
                                  lib.tp_frag_fully_free(f, lv), lib.tp_frag_largest_free(f, lv),
                                  lib.tp_frag_fragmentation(f, lv))
                  for lv, name in enumerate(self._topo.levels)}
        rep = FragReport(levels, lib.tp_frag_free(f, 0), lib.tp_frag_down(f),
                         lib.tp_frag_cordoned(f), lib.tp_frag_workload(f))
        ffi.release(f)
        return rep

    def _frag_fallback(self):
        """The per-level figures from the public per-domain queries, for a library without
        tp_frag_report (no workload figure). O(domains), as the report itself."""
        t = self._topo
        p = self._p
        levels = {}
        for lv, name in enumerate(t.levels):
            n = t.domain_count(lv)
            free = fully = largest = in_fully = 0
            for d in range(n):
                f = lib.tp_cluster_free(p, lv, d)
                size = len(t.domain_devices(lv, d))
                free += f
                largest = max(largest, f)
                if f == size:
                    fully += 1
                    in_fully += f
            frag = (free - in_fully) / free if free else 0.0
            levels[name] = LevelFrag(n, free, fully, largest, frag)
        return FragReport(levels, self.free_total, self.down_total, self.cordoned_total)

    def defrag_plan(self, request, policy=None):
        """Which moves make ``request`` placeable within ``policy`` (:class:`DefragPolicy`)?
        Returns a :class:`Plan` (its ``status`` says whether one was found); the cluster is
        left as it was. Raises :class:`InvalidArgument` / :class:`NotFound` for an invalid
        request or policy."""
        if not isinstance(request, Request):
            raise TypeError("defrag_plan() needs a Request, not %s" % type(request).__name__)
        _need("tp_defrag_plan", "defrag")
        keep = []
        r = request._to_c(keep)
        pol = (policy or DefragPolicy())._to_c(keep)
        out = ffi.new("tp_plan **")
        rc = lib.tp_defrag_plan(self._p, r, pol, out)
        return self._plan(rc, out[0])

    def defrag_compact(self, level, ndomains, policy=None):
        """The moves that leave ``ndomains`` domains of ``level`` fully free (a plan with no
        place step)."""
        keep = []
        pol = (policy or DefragPolicy())._to_c(keep)
        out = ffi.new("tp_plan **")
        rc = lib.tp_defrag_compact(self._p, _b(level, "level"), ndomains, pol, out)
        return self._plan(rc, out[0])

    def _plan(self, rc, ptr):
        if ptr == ffi.NULL:
            check(rc if rc < 0 else lib.TP_ENOMEM, self)
        plan = _read_plan(self, ptr)
        if rc in (lib.TP_EINVAL, lib.TP_ENOTFOUND):
            raise error_class(rc)(plan.message or strerror(rc))
        return plan

    def apply_step(self, plan, i, **job_options):
        """Carry out step ``i`` of ``plan`` on the cluster's records (steps in order); the
        options are the new job's, for the place step (as :meth:`commit`)."""
        _need("tp_plan_apply_step", "apply_step")
        h = plan._handle if isinstance(plan, Plan) else None
        if h is None:
            raise InvalidArgument("apply_step() needs an open Plan from defrag_plan()")
        if h.cluster is not self:
            raise InvalidArgument("the plan was made on another cluster")
        keep = []
        opts = _job_options(keep, **job_options) if job_options else ffi.NULL
        check(lib.tp_plan_apply_step(self._p, h._p, i, opts), self)

    def __repr__(self):
        if self.closed:
            return "<Cluster closed>"
        return "<Cluster jobs=%d free=%d/%d>" % (lib.tp_cluster_job_count(self._p),
                                                 self.free_total, self._topo.device_count)


def place(cluster, request):
    """Module-level form of :meth:`Cluster.place`."""
    return cluster.place(request)


def commit(cluster, placement, **opts):
    """Module-level form of :meth:`Cluster.commit`."""
    return cluster.commit(placement, **opts)


def replace(cluster, job, failed):
    """Module-level form of :meth:`Cluster.replace`."""
    return cluster.replace(job, failed)
