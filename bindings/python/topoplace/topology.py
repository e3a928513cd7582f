# SPDX-License-Identifier: MIT
"""The topology family: :class:`NodeType` (a node's insides), :class:`TopologyBuilder` and the
immutable :class:`Topology` with its queries, and :class:`Fabric`.

A :class:`Topology` is read-only and may be shared by threads, as in C.
"""

from collections import namedtuple

from . import _defaults
from ._core import (_LINK_CODE, _LINK_NAME, _NIC_KIND, _NIC_KIND_NAME, LINK_KINDS,
                    NIC_KINDS, NONE, _b, _keep, _own, _Owned, _s, _strv, ffi, lib, strerror)
from .errors import InvalidArgument, NotFound, check

__all__ = ["NodeType", "Fabric", "TopologyBuilder", "Topology"]

_NODE = _defaults.NODE_OPTIONS


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
        :class:`LimitExceeded`."""
        if isinstance(xml, str):
            xml = xml.encode("utf-8")
        out = ffi.new("tp_nodetype **")
        err = ffi.new("char[]", 512)
        rc = lib.tp_nodetype_from_hwloc_xml(out, xml, len(xml), ffi.NULL, err, 512)
        check(rc, None, ffi.string(err).decode("utf-8", "replace") or strerror(rc))
        self = object.__new__(cls)
        self._ptr = _own(out[0], lib.tp_nodetype_destroy)
        return self

    @classmethod
    def from_nvidia_smi(cls, text, nvlink_link_gbps=None):
        """A node type read from the matrix ``nvidia-smi topo -m`` prints (bytes or str): its
        GPUs in column order (CUDA's order), PCIe switches from PIX/PXB, NICs (RDMA), NUMA and
        host-bridge locality, and NVLink (``NV#`` gives # times ``nvlink_link_gbps``, default
        ``TP_NVSMI_DEFAULT_LINK_GBPS``, 25 GB/s). Raises :class:`ParseError` (the message
        names the line and column), :class:`LimitExceeded`, :class:`InvalidArgument` (a bad
        ``nvlink_link_gbps``)."""
        if isinstance(text, str):
            text = text.encode("utf-8")
        opts = _defaults.c_init("nvsmi_options")
        if nvlink_link_gbps is not None:
            opts.nvlink_link_gbps = float(nvlink_link_gbps)
        out = ffi.new("tp_nodetype **")
        err = ffi.new("char[]", 512)
        rc = lib.tp_nodetype_from_nvsmi_topo(out, text, len(text), opts, ffi.NULL, err, 512)
        check(rc, None, ffi.string(err).decode("utf-8", "replace") or strerror(rc))
        self = object.__new__(cls)
        self._ptr = _own(out[0], lib.tp_nodetype_destroy)
        return self

    def _errmsg(self):
        return _s(lib.tp_nodetype_errmsg(self._p))

    def _index(self, what, i, count):
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < count:
            raise InvalidArgument("unknown %s %r (the node type has %d)" % (what, i, count))
        return i

    def add_pcie_switch(self, parent=-1):
        """Add a PCIe switch below ``parent`` (-1: the host bridge); returns its index."""
        out = ffi.new("unsigned *")
        check(lib.tp_nodetype_add_pcie_switch(self._p, parent, out), self)
        return out[0]

    def set_gpu_switch(self, gpu, switch):
        """Put GPU ``gpu`` behind PCIe switch ``switch`` (-1: the host bridge); returns the
        node type."""
        check(lib.tp_nodetype_set_gpu_switch(self._p, gpu, switch), self)
        return self

    def add_nic(self, name, switch=-1, gbps=0.0):
        """Add a NIC named ``name`` behind PCIe switch ``switch`` (-1: the host bridge), of
        ``gbps`` GB/s one direction; returns its index."""
        out = ffi.new("unsigned *")
        check(lib.tp_nodetype_add_nic(self._p, _b(name), switch, gbps, out), self)
        return out[0]

    def add_nvswitch(self, name):
        """Add an NVSwitch named ``name`` inside the node; returns its index."""
        out = ffi.new("unsigned *")
        check(lib.tp_nodetype_add_nvswitch(self._p, _b(name), out), self)
        return out[0]

    def set_nvlink(self, a, b, gbps):
        """Set the NVLink bandwidth between GPUs ``a`` and ``b`` (GB/s one direction, 0: no
        NVLink); returns the node type."""
        check(lib.tp_nodetype_set_nvlink(self._p, a, b, gbps), self)
        return self

    def set_fabric(self, kind, gbps, latency_us):
        """Set the fabric inside nodes of this type (kind name, GB/s, latency in us): it
        overrides the node level's, even one the caller set (``tp_nodetype_set_fabric``);
        returns the node type."""
        check(lib.tp_nodetype_set_fabric(self._p, _link_code(kind), gbps, latency_us), self)
        return self

    @property
    def fabric(self):
        """The :class:`Fabric` the node type sets for its nodes, or None (they use the node
        level's)."""
        kind = ffi.new("tp_link_kind *")
        gbps = ffi.new("double *")
        lat = ffi.new("double *")
        rc = lib.tp_nodetype_fabric(self._p, kind, gbps, lat)
        if rc == lib.TP_ENOTFOUND:
            return None
        check(rc, self)
        return Fabric(_LINK_NAME.get(kind[0], str(kind[0])), gbps[0], lat[0])

    def set_gpu_pcie_gbps(self, gpu, gbps):
        """Set GPU ``gpu``'s PCIe link bandwidth (GB/s one direction, 0 to forget it), which
        prices its pairs without NVLink; returns the node type."""
        check(lib.tp_nodetype_set_gpu_pcie_gbps(self._p, gpu, gbps), self)
        return self

    def pair_gbps(self, a, b):
        """The GB/s the cost model gives GPUs ``a`` and ``b`` from the type's own figures:
        NVLink, else PCIe (half across packages), else 0 (as ``tp_nodetype_pair_gbps``)."""
        return lib.tp_nodetype_pair_gbps(self._p, a, b)

    @property
    def gpu_count(self):
        """Number of GPUs of the node type."""
        return lib.tp_nodetype_gpu_count(self._p)

    @property
    def pcie_switch_count(self):
        """Number of PCIe switches of the node type."""
        return lib.tp_nodetype_pcie_switch_count(self._p)

    @property
    def nic_count(self):
        """Number of NICs of the node type."""
        return lib.tp_nodetype_nic_count(self._p)

    @property
    def nvswitch_count(self):
        """Number of NVSwitches of the node type."""
        return lib.tp_nodetype_nvswitch_count(self._p)

    def _switch(self, fn, what, i, n):
        """A switch query's answer: the switch, -1 for the host bridge (TP_NONE in C)."""
        if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < n:
            raise InvalidArgument("unknown %s %r (the node type has %d)" % (what, i, n))
        out = ffi.new("uint32_t *")
        check(fn(self._p, i, out), self)
        return -1 if out[0] == NONE else out[0]

    def gpu_switch(self, gpu):
        """The PCIe switch GPU ``gpu`` sits behind (-1: the host bridge)."""
        return self._switch(lib.tp_nodetype_gpu_switch, "GPU", gpu, self.gpu_count)

    def nvlink_gbps(self, a, b):
        """The NVLink bandwidth between GPUs ``a`` and ``b`` in GB/s one direction (0: no
        NVLink, or an unknown GPU)."""
        return lib.tp_nodetype_nvlink_gbps(self._p, a, b)

    def gpu_bus_id(self, gpu):
        """The PCI bus id of a GPU ("0000:3b:00.0"), or None when unknown. The importers
        number GPUs in bus-id order, so GPU ``i`` is CUDA device ``i``."""
        return _s(lib.tp_nodetype_gpu_bus_id(self._p, self._index("GPU", gpu, self.gpu_count)))

    def set_gpu_bus_id(self, gpu, bus_id):
        """Record the PCI bus id of a GPU (1 to 31 printable bytes, no '/'); returns the node
        type."""
        check(lib.tp_nodetype_set_gpu_bus_id(self._p, gpu, _b(bus_id, "bus_id")), self)
        return self

    def pcie_switch_parent(self, switch):
        """The parent of a PCIe switch (-1: the host bridge)."""
        return self._switch(lib.tp_nodetype_pcie_switch_parent, "PCIe switch", switch,
                            self.pcie_switch_count)

    def nic_name(self, nic):
        """The name of a NIC ("mlx5_0")."""
        return _s(lib.tp_nodetype_nic_name(self._p, self._index("NIC", nic, self.nic_count)))

    def nic_switch(self, nic):
        """The PCIe switch a NIC sits behind (-1: the host bridge)."""
        return self._switch(lib.tp_nodetype_nic_switch, "NIC", nic, self.nic_count)

    def nic_kind(self, nic):
        """The kind of a NIC: "unknown", "rdma" or "ethernet"."""
        k = lib.tp_nodetype_nic_kind(self._p, self._index("NIC", nic, self.nic_count))
        return _NIC_KIND_NAME.get(k, str(k))

    def set_nic_kind(self, nic, kind):
        """Set the kind of a NIC ("unknown", "rdma", "ethernet"), read by the pairing rule;
        returns the node type."""
        if kind not in _NIC_KIND:
            raise InvalidArgument("unknown NIC kind %r (one of %s)"
                                  % (kind, ", ".join(NIC_KINDS)))
        check(lib.tp_nodetype_set_nic_kind(self._p, nic, _NIC_KIND[kind]), self)
        return self

    def set_gpu_locality(self, gpu, package=-1, numa=-1, host_bridge=-1):
        """Say where a GPU sits outside the PCIe switches (ids compared for equality, -1:
        unknown); returns the node type."""
        check(lib.tp_nodetype_set_gpu_locality(self._p, gpu, package, numa, host_bridge), self)
        return self

    def set_nic_locality(self, nic, package=-1, numa=-1, host_bridge=-1):
        """Say where a NIC sits outside the PCIe switches, as :meth:`set_gpu_locality`;
        returns the node type."""
        check(lib.tp_nodetype_set_nic_locality(self._p, nic, package, numa, host_bridge), self)
        return self

    def gpu_nearest_nic(self, gpu):
        """The index of the NIC closest to a GPU by the pairing rule (RDMA first, then PCIe
        hops, then host bridge, NUMA node, package; the lowest index on ties), or None when
        the node has no NIC."""
        rc = lib.tp_nodetype_gpu_nearest_nic(self._p, self._index("GPU", gpu, self.gpu_count))
        if rc == lib.TP_ENOTFOUND:
            return None
        return check(rc, None, "unknown GPU %r" % (gpu,))

    def to_dict(self):
        """The node type as data, in the shape ``python3 -m topoplace import hwloc`` prints:
        ``{"gpus": [{"index", "bus_id", "pcie_switch", "nearest_nic", "nvlink"}], "nics":
        [{"name", "pcie_switch"}], "pcie_switches": [{"parent"}], "nvswitches": n}``, with
        None for the host bridge, an unknown bus id or no NIC, and ``nvlink`` mapping each
        other GPU's index (a string) to GB/s where there is NVLink."""
        def sw(s):
            return None if s < 0 else s
        n = self.gpu_count
        gpus = []
        for i in range(n):
            nic = self.gpu_nearest_nic(i)
            gpus.append({"index": i, "bus_id": self.gpu_bus_id(i),
                         "pcie_switch": sw(self.gpu_switch(i)),
                         "nearest_nic": None if nic is None else self.nic_name(nic),
                         "nvlink": {str(j): self.nvlink_gbps(i, j) for j in range(n)
                                    if j != i and self.nvlink_gbps(i, j) > 0}})
        return {"gpus": gpus,
                "nics": [{"name": self.nic_name(k), "pcie_switch": sw(self.nic_switch(k))}
                         for k in range(self.nic_count)],
                "pcie_switches": [{"parent": sw(self.pcie_switch_parent(s))}
                                  for s in range(self.pcie_switch_count)],
                "nvswitches": self.nvswitch_count}

    def pcie_distance(self, a, b):
        """How far apart GPUs ``a`` and ``b`` are on PCIe, in switch hops (as
        ``tp_nodetype_pcie_distance``); raises :class:`InvalidArgument` for an unknown GPU."""
        return check(lib.tp_nodetype_pcie_distance(self._p, a, b), None,
                     "unknown GPU %r or %r" % (a, b))


Fabric = namedtuple("Fabric", "kind gbps latency_us")
Fabric.__doc__ = "The link of a fabric level: kind name, GB/s per device, latency in us."


def _limit(n, what):
    """A uint32_t budget (None: 0, the default) for the C API; Python checks the type and
    sign, the library the range."""
    if n is None:
        return 0
    if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 0xFFFFFFFF:
        raise InvalidArgument("%s %r is not a positive integer of at most 32 bits" % (what, n))
    return n


def _link_code(kind):
    if kind not in _LINK_CODE:
        raise InvalidArgument("unknown link kind %r (one of %s)" % (kind, ", ".join(LINK_KINDS)))
    return _LINK_CODE[kind]


def _perf_args(perf, keep):
    """(perf, device_perf pointer) of tp_node_options from a number or a per-device list."""
    if perf is None:
        return _NODE["perf"], ffi.NULL
    if isinstance(perf, (int, float)):
        return float(perf), ffi.NULL
    arr = ffi.new("double[]", [float(x) for x in perf])
    keep.append(arr)
    return _NODE["perf"], arr


def _node_options(model, memory_gb, perf, node_type, keep):
    """A ``tp_node_options *`` from TP_NODE_OPTIONS_INIT and the given attributes."""
    opts = _defaults.c_init("node_options")
    m = _b(model, "model")
    keep.append(m)
    opts.model = m
    opts.memory_gb = float(memory_gb or _NODE["memory_gb"])
    opts.perf, opts.device_perf = _perf_args(perf, keep)
    opts.type = node_type._p if node_type is not None else ffi.NULL
    keep.append(opts)
    return opts


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
        self._levels = tuple(levels)

    @classmethod
    def from_slurm(cls, conf, gpus_per_node, max_devices=None, max_nodes=None):
        """A builder started from the text of a Slurm ``topology.conf`` (tree or block
        plugin; bytes or str), every node with ``gpus_per_node`` devices. ``max_devices`` and
        ``max_nodes`` bound the import while it reads (None: ``TP_DEFAULT_MAX_DEVICES`` and
        ``TP_DEFAULT_MAX_NODES``), and the builder keeps them. Raises :class:`ParseError`
        (the message names the line), :class:`LimitExceeded` (past a budget),
        :class:`InvalidArgument`."""
        if isinstance(conf, str):
            conf = conf.encode("utf-8")
        opts = _defaults.c_init("slurm_options")
        opts.max_devices = _limit(max_devices, "max_devices")
        opts.max_nodes = _limit(max_nodes, "max_nodes")
        out = ffi.new("tp_topology_builder **")
        err = ffi.new("char[]", 512)
        rc = lib.tp_topology_builder_from_slurm_ext(out, conf, len(conf), gpus_per_node,
                                                    ffi.NULL, opts, err, 512)
        check(rc, None, ffi.string(err).decode("utf-8", "replace") or strerror(rc))
        self = object.__new__(cls)
        self._ptr = _own(out[0], lib.tp_topology_builder_destroy)
        self._levels = None         # the C builder has no getter: read from a build
        return self

    @property
    def levels(self):
        """The level names, outermost first (a tuple)."""
        if self._levels is None:
            self._levels = self.build().levels
        return self._levels

    def set_limits(self, max_devices, max_nodes):
        """Set the most devices and nodes the topology may have (1 to
        ``TP_LIMIT_MAX_DEVICES``, at least what the builder holds); adding past either raises
        :class:`LimitExceeded`. Returns the builder."""
        check(lib.tp_topology_builder_set_limits(self._p, _limit(max_devices, "max_devices"),
                                                 _limit(max_nodes, "max_nodes")), self)
        return self

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
        check(lib.tp_topology_builder_set_fabric(self._p, self._level(level), _link_code(kind),
                                                 gbps, latency_us), self)
        return self

    def set_domain_fabric(self, level, path, kind, gbps, latency_us):
        """Set the link of one domain above the node (``path`` "b0/r3" or its names), which
        overrides its level's for traffic inside it (``tp_topology_builder_set_domain_fabric``);
        raises :class:`NotFound` when no node of that domain was added yet."""
        if not isinstance(path, str):
            path = "/".join(path)
        check(lib.tp_topology_builder_set_domain_fabric(self._p, self._level(level), _b(path),
                                                        _link_code(kind), gbps, latency_us),
              self)
        return self

    def add_node(self, name, path=(), gpus=1, model=_NODE["model"],
                 memory_gb=_NODE["memory_gb"], perf=_NODE["perf"], node_type=None):
        """Add a node: its domain names at every level above the node, its device count and
        attributes (``perf`` a number or one per device)."""
        keep = []
        arr, n = _strv(path, keep, "domain name")
        opts = _node_options(model, memory_gb, perf, node_type, keep)
        check(lib.tp_topology_builder_add_node(self._p, _keep(keep, _b(name)), arr, gpus, opts),
              self)
        return self

    def generate(self, counts, gpus_per_node, model=_NODE["model"],
                 memory_gb=_NODE["memory_gb"], perf=_NODE["perf"], node_type=None):
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

    def set_grid(self, level, dims, wrap=None):
        """Arrange every domain of ``level``'s children on a grid of extents ``dims`` (one to
        three), wrapping along the axes listed in ``wrap`` (default: every axis, a ring or a
        torus; ``()`` for a mesh) (``tp_topology_builder_set_grid``)."""
        dims = list(dims)
        axes = range(len(dims)) if wrap is None else wrap
        bits = 0
        for a in axes:
            bits |= 1 << a
        check(lib.tp_topology_builder_set_grid(self._p, self._level(level),
                                               ffi.new("unsigned[]", dims or [0]), len(dims),
                                               bits), self)
        return self

    def set_coords(self, level, path, coords):
        """Put a child of a grid domain (``path``, or the node's name at the node level) at
        ``coords`` (``tp_topology_builder_set_coords``)."""
        if not isinstance(path, str):
            path = "/".join(path)
        c = list(coords) + [0] * (3 - len(coords))
        check(lib.tp_topology_builder_set_coords(self._p, self._level(level), _b(path),
                                                 ffi.new("unsigned[3]", c[:3])), self)
        return self

    def build(self):
        """Build the topology (the builder stays usable)."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_build(self._p, out), self)
        return Topology._wrap(_own(out[0], lib.tp_topology_destroy))


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
        self._levels = tuple(_s(lib.tp_topology_level_name(ptr, i)) for i in range(n))
        self._paths = {}
        self._node_names = {}
        return self

    @classmethod
    def generate(cls, levels, counts, gpus_per_node, model=_NODE["model"],
                 memory_gb=_NODE["memory_gb"], perf=_NODE["perf"]):
        """A regular cluster, as the scenario format's ``generate``."""
        return TopologyBuilder(levels).generate(counts, gpus_per_node, model, memory_gb,
                                                perf).build()

    @classmethod
    def from_slurm(cls, text, gpus_per_node=1, format=None, topology=None):
        """A topology from a Slurm topology.conf or topology.yaml (detected, or ``format``
        "conf" / "yaml"): returns ``(topology, warnings)``; see
        :func:`topoplace.importers.topology_from_slurm`."""
        from .importers import topology_from_slurm
        return topology_from_slurm(text, gpus_per_node, format, topology)

    @classmethod
    def nvl72(cls, blocks, racks_per_block):
        """A GB200 NVL72 fleet: levels block, rack, node; 18 nodes x 4 GPUs per rack."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_generate_nvl72(out, blocks, racks_per_block, ffi.NULL), None,
              "nvl72(%r, %r): %s" % (blocks, racks_per_block, "invalid or too large a fleet"))
        return cls._wrap(_own(out[0], lib.tp_topology_destroy))

    @classmethod
    def torus(cls, pods, dims, wrap=None):
        """TPU-pod-like tori: levels pod, chip; ``pods`` grids of extents ``dims``, wrapping
        on the axes in ``wrap`` (default every one), a one-device chip per cell
        (``tp_topology_generate_torus``)."""
        dims = list(dims)
        axes = range(len(dims)) if wrap is None else wrap
        bits = sum(1 << a for a in set(axes))
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_generate_torus(out, pods, ffi.new("unsigned[]", dims or [0]),
                                             len(dims), bits, ffi.NULL), None,
              "torus(%r, %r): %s" % (pods, dims, "invalid or too large a grid"))
        return cls._wrap(_own(out[0], lib.tp_topology_destroy))

    @classmethod
    def ring(cls, rings, nodes_per_ring, gpus_per_node):
        """Rings of nodes, as Slurm's topology/ring: levels ring, node
        (``tp_topology_generate_ring``)."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_generate_ring(out, rings, nodes_per_ring, gpus_per_node,
                                            ffi.NULL), None,
              "ring(%r, %r, %r): %s" % (rings, nodes_per_ring, gpus_per_node,
                                        "invalid or too large a fleet"))
        return cls._wrap(_own(out[0], lib.tp_topology_destroy))

    def grid(self, level):
        """The grid of a level as ``(dims, wrap_axes)``, or None when it is no grid."""
        dims, nd, wrap = ffi.new("unsigned[3]"), ffi.new("unsigned *"), ffi.new("unsigned *")
        rc = lib.tp_topology_grid(self._p, self.level(level), dims, nd, wrap)
        if rc == lib.TP_ENOTFOUND:
            return None
        check(rc, None, "grid(%r): no such level" % (level,))
        return (tuple(dims[i] for i in range(nd[0])),
                tuple(i for i in range(nd[0]) if wrap[0] >> i & 1))

    def coords(self, level, dom):
        """The coordinates of a child of a grid domain (a domain of ``level``)."""
        out = ffi.new("unsigned[3]")
        lv = self.level(level)
        check(lib.tp_topology_domain_coords(self._p, lv, dom, out), None,
              "coords(%r, %r): no such domain, or its parent level is no grid" % (level, dom))
        nd = len(self.grid(lv - 1)[0])
        return tuple(out[i] for i in range(nd))

    @classmethod
    def hgx(cls, units, nodes_per_unit):
        """An HGX fleet: levels su, node; 8-GPU H100 nodes."""
        out = ffi.new("tp_topology **")
        check(lib.tp_topology_generate_hgx(out, units, nodes_per_unit, ffi.NULL), None,
              "hgx(%r, %r): %s" % (units, nodes_per_unit, "invalid or too large a fleet"))
        return cls._wrap(_own(out[0], lib.tp_topology_destroy))

    # -- levels ---------------------------------------------------------------------------
    @property
    def levels(self):
        """The level names, outermost first (a tuple; the last is the node level)."""
        return self._levels

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

    def domain_fabric(self, level, dom):
        """The :class:`Fabric` joining the children of domain ``dom`` of ``level``: its own,
        at the node level its node type's, else the level's (``tp_topology_domain_fabric``)."""
        kind = ffi.new("tp_link_kind *")
        gbps = ffi.new("double *")
        lat = ffi.new("double *")
        check(lib.tp_topology_domain_fabric(self._p, self.level(level), dom, kind, gbps, lat),
              None, "no domain %r at level %r" % (dom, level))
        return Fabric(_LINK_NAME.get(kind[0], str(kind[0])), gbps[0], lat[0])

    # -- domains --------------------------------------------------------------------------
    def domain_count(self, level):
        """Number of domains of a level."""
        return lib.tp_topology_domain_count(self._p, self.level(level))

    def domain_name(self, level, dom):
        """A domain's own name ("r3"; see :meth:`domain_path`)."""
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
        """A domain's id from its path ("b1/r3"); raises :class:`NotFound`."""
        out = ffi.new("uint32_t *")
        check(lib.tp_topology_domain_by_path(self._p, self.level(level), _b(path), out), None,
              "no %s domain %r" % (self.levels[self.level(level)], path))
        return out[0]

    def domain_parent(self, level, dom):
        """The id of a domain's parent at the level above, or None at the top level."""
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
        """The node ids of a domain, as a range."""
        return self._span(lib.tp_topology_domain_nodes, level, dom, "nodes")

    def domain_devices(self, level, dom):
        """The device ids of a domain, as a range."""
        return self._span(lib.tp_topology_domain_devices, level, dom, "devices")

    def domain_nvswitch_count(self, level, dom):
        """Number of NVSwitches of a domain."""
        return lib.tp_topology_domain_nvswitch_count(self._p, self.level(level), dom)

    # -- nodes and devices ----------------------------------------------------------------
    @property
    def node_count(self):
        """Number of nodes."""
        return lib.tp_topology_node_count(self._p)

    @property
    def device_count(self):
        """Number of devices."""
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
        """A node's name from its id."""
        name = self._node_names.get(node)
        if name is None:
            name = _s(lib.tp_topology_node_name(self._p, node))
            if name is None:
                raise InvalidArgument("no node %r" % (node,))
            self._node_names[node] = name
        return name

    def node_model(self, node):
        """A node's device model, or None."""
        return _s(lib.tp_topology_node_model(self._p, self.node(node)))

    def node_memory_gb(self, node):
        """A node's memory per device in GB (0: unknown)."""
        return lib.tp_topology_node_memory_gb(self._p, self.node(node))

    def node_domain(self, node, level):
        """The id of the domain of ``level`` that holds a node, or None ("cluster")."""
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
        """The node id of a device."""
        n = lib.tp_topology_device_node(self._p, self.device(dev))
        if n == NONE:
            raise InvalidArgument("no device %r" % (dev,))
        return n

    def device_index(self, dev):
        """A device's index inside its node."""
        i = lib.tp_topology_device_index(self._p, self.device(dev))
        if i == NONE:
            raise InvalidArgument("no device %r" % (dev,))
        return i

    def device_name(self, dev):
        """A device's name ``node/index``."""
        return "%s/%d" % (self.node_name(self.device_node(dev)), self.device_index(dev))

    def device_perf(self, dev):
        """A device's relative speed (1.0 nominal)."""
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
        """The failure-domain kinds by index (a tuple of names)."""
        return tuple(_s(lib.tp_topology_fd_kind_name(self._p, i))
                     for i in range(lib.tp_topology_fd_kind_count(self._p)))

    def _fd_kind(self, kind):
        if isinstance(kind, int):
            return kind
        return check(lib.tp_topology_fd_kind_by_name(self._p, _b(kind)), None,
                     "unknown failure-domain kind %r" % (kind,))

    def fd_count(self, kind):
        """Number of failure domains of a kind (a name or an index)."""
        return lib.tp_topology_fd_count(self._p, self._fd_kind(kind))

    def fd_name(self, kind, fd):
        """A failure domain's name from its kind and id."""
        return _s(lib.tp_topology_fd_name(self._p, self._fd_kind(kind), fd))

    def device_fd(self, kind, dev):
        """The id of the failure domain of ``kind`` that holds a device, or None."""
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
