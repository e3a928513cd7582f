# SPDX-License-Identifier: MIT
"""The cluster family: :class:`Cluster` (the mutable state of a topology: running jobs, down and
cordoned devices) with placement, replacement, fragmentation and defragmentation, its
:class:`Savepoint` and :class:`JobInfo`, and the module-level :func:`place`, :func:`commit`
and :func:`replace`.

A :class:`Cluster` has one writer at a time (:meth:`Cluster.place`, :meth:`Cluster.frag` and
the queries only read), as in C. The keyword defaults of the job options are those of
``TP_JOB_OPTIONS_INIT`` (see :mod:`topoplace._defaults`).
"""

from dataclasses import dataclass
from typing import Optional

from . import _defaults
from ._core import (_CLASS_CODE, _CLASS_NAME, _DEVICE_STATE, _STATUS, JOB_CLASSES, _b,
                    _keep, _own, _Owned, _s, ffi, lib, strerror)
from .defrag import DefragPolicy, Plan, _frag_report, _read_plan
from .errors import InvalidArgument, check, error_class
from .placement import Placement, _read_placement
from .request import Request
from .topology import Topology

__all__ = ["Cluster", "Savepoint", "JobInfo", "place", "commit", "replace"]

_JOB = _defaults.JOB_OPTIONS


def _job_options(keep, job_class=_JOB["job_class"], priority=_JOB["priority"],
                 tenant=_JOB["tenant"], preemptible=_JOB["preemptible"],
                 migratable=_JOB["migratable"], checkpoint_s=_JOB["checkpoint_s"], shape=None):
    """A ``tp_job_options *`` (from TP_JOB_OPTIONS_INIT), kept alive by ``keep``."""
    if job_class not in _CLASS_CODE:
        raise InvalidArgument("unknown job class %r (one of %s)"
                              % (job_class, ", ".join(JOB_CLASSES)))
    o = _defaults.c_init("job_options")
    keep.append(o)
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

    def __init__(self, topology, writer_guard=False):
        if not isinstance(topology, Topology):
            raise TypeError("Cluster(topology) needs a Topology, not %s"
                            % type(topology).__name__)
        tptr = topology._p
        out = ffi.new("tp_cluster **")
        opts = _defaults.c_init("cluster_options")
        opts.writer_guard = 1 if writer_guard else 0
        check(lib.tp_cluster_create_ext(out, tptr, ffi.NULL, opts), None,
              "cannot create a cluster")
        self._writer_guard = bool(writer_guard)
        self._ptr = _own(out[0], lib.tp_cluster_destroy, tptr)
        self._topology = topology
        # Lookups go through a view that shares the C topology, so that they keep working
        # when the caller closes its Topology object while the cluster lives.
        self._topo = Topology._wrap(tptr)

    @classmethod
    def _wrap(cls, ptr, topology):
        """A Cluster over a ``tp_cluster *`` someone else owns (the scenario importer's):
        ``ptr`` must keep its owner alive (an ``ffi.gc`` pointer)."""
        self = object.__new__(cls)
        self._ptr = ptr
        self._topology = topology
        self._topo = Topology._wrap(topology._p)
        return self

    @property
    def topology(self):
        """The :class:`Topology` the cluster was made from."""
        return self._topology

    @property
    def writer_guard(self):
        """Whether the cluster detects a second writer (``Cluster(t, writer_guard=True)``,
        ``tp_cluster_options.writer_guard``): a writing call made while another one is inside
        raises :class:`Busy`. A debugging aid for a caller's locking, not a lock."""
        return getattr(self, "_writer_guard", False)

    def _errmsg(self):
        return _s(lib.tp_cluster_errmsg(self._p))

    def _ids(self, devices):
        ids = self._topo.devices(devices)
        return ffi.new("uint32_t[]", ids), len(ids)

    # -- writing --------------------------------------------------------------------------
    def assign(self, job, devices, job_class=_JOB["job_class"], priority=_JOB["priority"],
               tenant=_JOB["tenant"], preemptible=_JOB["preemptible"],
               migratable=_JOB["migratable"], checkpoint_s=_JOB["checkpoint_s"], shape=None):
        """Record a running job on explicit devices, in rank order; ``shape`` (a
        :class:`Request`) is the shape defrag keeps when it moves the job."""
        keep = []
        arr, n = self._ids(devices)
        opts = _job_options(keep, job_class, priority, tenant, preemptible, migratable,
                            checkpoint_s, shape)
        check(lib.tp_cluster_assign(self._p, _b(job, "job id"), arr, n, opts), self)

    def release(self, job):
        """Remove a running job; its devices become free (unless down or cordoned)."""
        check(lib.tp_cluster_release(self._p, _b(job, "job id")), self)

    def set_down(self, devices, down=True):
        """Mark devices down (``down=False``: healthy again)."""
        arr, n = self._ids(devices)
        check(lib.tp_cluster_set_down(self._p, arr, n, 1 if down else 0), self)

    def set_cordoned(self, devices, cordoned=True):
        """Cordon devices: no new job lands on them (``cordoned=False``: lift it)."""
        arr, n = self._ids(devices)
        check(lib.tp_cluster_set_cordoned(self._p, arr, n, 1 if cordoned else 0), self)

    def savepoint(self, rollback=False):
        """A :class:`Savepoint` context manager."""
        return Savepoint(self, rollback)

    # -- spares (tp_cluster_set_spares) ----------------------------------------------------
    def set_spares(self, level, k):
        """Keep ``k`` hot spare nodes in every domain of ``level`` (0 clears every mark): the
        last healthy free nodes of each domain, kept up to date as nodes fail, are repaired
        and free; placement never uses them, :meth:`replace` uses them first."""
        check(lib.tp_cluster_set_spares(self._p, self._topo.level(level), k, 0), self)

    def set_node_spare(self, node, spare=True):
        """Mark a node (an id or a name) a spare, or clear its mark."""
        check(lib.tp_cluster_set_node_spare(self._p, self._topo.node(node), 1 if spare else 0),
              self)

    def node_is_spare(self, node):
        """Whether a node (an id or a name) is a spare."""
        return bool(check(lib.tp_cluster_node_is_spare(self._p, self._topo.node(node)), None,
                          "no node %r" % (node,)))

    def spare_count(self, level=None, dom=None):
        """Spare nodes in a domain (an id or a path), or in the cluster without arguments."""
        if level is None:
            return lib.tp_cluster_spare_total_count(self._p)
        return lib.tp_cluster_spare_count(self._p, self._topo.level(level), self._dom(level, dom))

    @property
    def spare_policy(self):
        """``(level, k)`` of the spare policy in force (k = 0: none)."""
        level, k = ffi.new("unsigned *"), ffi.new("unsigned *")
        check(lib.tp_cluster_spare_policy(self._p, level, k), self)
        return level[0], k[0]

    # -- services ---------------------------------------------------------------------------
    def set_service_caps(self, service, level=None, max_per_domain=0, max_percent=0.0,
                         fd_kind=None, fd_max_per_domain=0, fd_max_percent=0.0):
        """Spread caps over a service's replicas (``tp_cluster_set_service_caps``): a new
        replica (a request with ``service``) goes only to a domain of ``level`` holding fewer
        than ``max_per_domain`` of the service's running replicas and, with ``max_percent``,
        no more than max(1, floor(max_percent x (R + 1) / 100)) once it runs; and the same over
        the failure domains of ``fd_kind`` (a name such as ``"power"``) with
        ``fd_max_per_domain`` and ``fd_max_percent``. No level and no kind lift the caps.
        Undone by a savepoint's rollback like any change."""
        if not isinstance(service, str):
            raise InvalidArgument("service %r is not a string" % (service,))
        keep = []
        caps = ffi.NULL
        if level is not None or fd_kind is not None:
            caps = _defaults.c_init("service_caps")
            if level is not None:
                name = level if isinstance(level, str) else \
                    self._topo.levels[self._topo.level(level)]
                caps.level = _keep(keep, _b(name, "caps.level"))
            if fd_kind is not None:
                kind = fd_kind if isinstance(fd_kind, str) else self._topo.fd_kinds[fd_kind]
                caps.fd_kind = _keep(keep, _b(kind, "caps.fd_kind"))
            for prefix, n, pct in (("", max_per_domain, max_percent),
                                   ("fd_", fd_max_per_domain, fd_max_percent)):
                for name, v in (("max_per_domain", n), ("max_percent", pct)):
                    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                        raise InvalidArgument("caps.%s%s %r is not a number >= 0"
                                              % (prefix, name, v))
                if not isinstance(n, int) or n >= 2 ** 32:
                    raise InvalidArgument("caps.%smax_per_domain %r is not an integer below 2^32"
                                          % (prefix, n))
            caps.max_per_domain = max_per_domain
            caps.max_percent = float(max_percent)
            caps.fd_max_per_domain = fd_max_per_domain
            caps.fd_max_percent = float(fd_max_percent)
        check(lib.tp_cluster_set_service_caps(self._p, _b(service, "service"), caps), self)

    def service_caps(self, service):
        """``(level, max_per_domain, max_percent)`` of a service's caps; level None: none."""
        caps = _defaults.c_init("service_caps")
        check(lib.tp_cluster_service_caps(self._p, _b(service, "service"), caps), self)
        lv = None if caps.level == ffi.NULL else ffi.string(caps.level).decode("utf-8")
        return lv, caps.max_per_domain, caps.max_percent

    def service_fd_caps(self, service):
        """``(fd_kind, fd_max_per_domain, fd_max_percent)`` of a service's caps over failure
        domains; fd_kind None: none."""
        caps = _defaults.c_init("service_caps")
        check(lib.tp_cluster_service_caps(self._p, _b(service, "service"), caps), self)
        kind = None if caps.fd_kind == ffi.NULL else ffi.string(caps.fd_kind).decode("utf-8")
        return kind, caps.fd_max_per_domain, caps.fd_max_percent

    def service_fd_replicas(self, service, kind, fd):
        """Running replicas of a service with a device in one failure domain (a kind's name or
        index, and the domain's id: ``Topology.device_fd``)."""
        n = ffi.new("uint32_t *")
        k = self._topo._fd_kind(kind)
        check(lib.tp_cluster_service_fd_replicas(self._p, _b(service, "service"), k, fd, n),
              None, "failure-domain kind %r or domain %r out of range" % (kind, fd))
        return n[0]

    def service_replicas(self, service, level=None, dom=None):
        """Running replicas of a service in one domain (a level and an id or path), or in all
        (no level)."""
        n = ffi.new("uint32_t *")
        if level is None:
            rc = lib.tp_cluster_service_replicas(self._p, _b(service, "service"), 0,
                                                 lib.TP_NONE, n)
        else:
            rc = lib.tp_cluster_service_replicas(self._p, _b(service, "service"),
                                                 self._topo.level(level), self._dom(level, dom),
                                                 n)
        check(rc, self)
        return n[0]
    def set_partitions(self, level, channels=2048):
        """Give jobs NVLink partitions in the NVLink domains of ``level`` (a name or an index;
        None turns them off), each domain with a pool of ``channels`` IMEX channels (Slurm's
        ``imex_channel_count`` default 2048). Only on a cluster that runs no job
        (``tp_cluster_set_partitions``; docs/concepts.md, "NVLink partitions")."""
        lv = -1 if level is None else self._topo.level(level)
        check(lib.tp_cluster_set_partitions(self._p, lv, 0 if level is None else channels), self)

    @property
    def partition_policy(self):
        """``(level name, channels)`` of the partition policy, or None when off."""
        level, ch = ffi.new("int *"), ffi.new("uint32_t *")
        check(lib.tp_cluster_partition_policy(self._p, level, ch), self)
        return None if level[0] < 0 else (self._topo.levels[level[0]], ch[0])

    def node_partition(self, node):
        """``(job, channel)`` of the NVLink partition a node (an id or a name) is in, or None."""
        job, ch = ffi.new("const char **"), ffi.new("uint32_t *")
        rc = lib.tp_cluster_node_partition(self._p, self._topo.node(node), job, ch)
        if rc == lib.TP_ENOTFOUND:
            return None
        check(rc, self)
        return _s(job[0]), ch[0]

    # -- reading --------------------------------------------------------------------------
    def free_count(self, level, dom):
        """Number of free devices (healthy, not cordoned, held by no job) in a domain (an id
        or a path)."""
        return lib.tp_cluster_free_count(self._p, self._topo.level(level), self._dom(level, dom))


    def _dom(self, level, dom):
        if isinstance(dom, str):
            return self._topo.domain_by_path(level, dom)
        return dom

    @property
    def free_total_count(self):
        """Number of free devices in the cluster."""
        return lib.tp_cluster_free_total_count(self._p)

    def free_node_count(self, level, dom):
        """Number of nodes of a domain (an id or a path) whose every device is free."""
        return lib.tp_cluster_free_node_count(self._p, self._topo.level(level), self._dom(level, dom))


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
        """(state, job): state is "free", "held", "down", "cordoned" or "spare"; job the
        holder."""
        job = ffi.new("char **")
        rc = lib.tp_cluster_device_state(self._p, self._topo.device(dev), job)
        check(rc, None, "no device %r" % (dev,))
        return _DEVICE_STATE.get(rc, str(rc)), _s(job[0])

    def device_down(self, dev):
        """Whether a device is down."""
        return bool(check(lib.tp_cluster_device_down(self._p, self._topo.device(dev)), None,
                          "no device %r" % (dev,)))

    def device_cordoned(self, dev):
        """Whether a device is cordoned."""
        return bool(check(lib.tp_cluster_device_cordoned(self._p, self._topo.device(dev)),
                          None, "no device %r" % (dev,)))

    @property
    def down_total_count(self):
        """Number of down devices."""
        return lib.tp_cluster_down_total_count(self._p)

    @property
    def cordoned_total_count(self):
        """Number of cordoned devices."""
        return lib.tp_cluster_cordoned_total_count(self._p)

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
        """A running job's device names (``node/index``), in rank order."""
        return [self._topo.device_name(d) for d in self.job_devices(job)]

    def job_info(self, job):
        """A running job's attributes as a :class:`JobInfo`."""
        o = _defaults.c_init("job_options")
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
        """Bytes of memory the cluster state holds."""
        return lib.tp_cluster_memory(self._p)

    # -- placement ------------------------------------------------------------------------
    def place(self, request):
        """Where would ``request`` go? Returns a :class:`Placement` (its ``status`` says
        whether it was placed); raises :class:`InvalidArgument` / :class:`NotFound` for an
        invalid request and :class:`OutOfMemory`."""
        if not isinstance(request, Request):
            raise TypeError("place() needs a Request, not %s" % type(request).__name__)
        keep = []
        r = request._to_c(keep)
        out = ffi.new("tp_placement **")
        rc = lib.tp_place(self._p, r, out)
        return self._result(rc, out[0])

    def replace(self, job, failed, max_work=None, max_time_us=None):
        """Replacement devices for the failed devices of a running job (ids or names; a node
        name stands for the job's devices on that node).

        ``max_work`` (job ranks visited; None: the library's default, 2^24) and
        ``max_time_us`` (None: no time limit) bound the search (``tp_replace_ext``): when
        either runs out the call raises :class:`LimitExceeded` naming the field, and the
        cluster is unchanged."""
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
        opts = _defaults.c_init("replace_options")
        for name, value in (("max_work", max_work), ("max_time_us", max_time_us)):
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or \
                    not 0 < value < 2 ** 64:
                raise InvalidArgument("replace.%s: %r is not a positive integer below 2^64"
                                      % (name, value))
            setattr(opts, name, value)
        rc = lib.tp_replace_ext(self._p, _b(job, "job id"), arr, len(ids), opts, out)
        return self._result(rc, out[0])

    def copy(self):
        """A copy of the state (``tp_cluster_copy``): same jobs, health, spares and
        fingerprint, an identity of its own (a placement made on one cannot be committed to
        the other) and the same lineage (a plan made on one may be carried out on the
        other). The copy is independent of this cluster afterwards."""
        out = ffi.new("tp_cluster **")
        check(lib.tp_cluster_copy(out, self._p, ffi.NULL), None, "cannot copy the cluster")
        c = object.__new__(Cluster)
        c._writer_guard = getattr(self, "_writer_guard", False)
        c._ptr = _own(out[0], lib.tp_cluster_destroy, self._topology._p)
        c._topology = self._topology
        c._topo = Topology._wrap(self._topology._p)
        return c

    def _result(self, rc, ptr):
        if ptr == ffi.NULL:
            check(rc if rc < 0 else lib.TP_ENOMEM, self)
        pl = _read_placement(self, ptr)
        if rc < 0 and rc not in _STATUS:
            # an invalid request: the result carries the message naming the field
            raise error_class(rc)(pl.message or strerror(rc))
        return pl

    def commit(self, placement, job_class=None, priority=None, tenant=None,
               preemptible=_JOB["preemptible"], migratable=_JOB["migratable"],
               checkpoint_s=_JOB["checkpoint_s"], shape=None):
        """Apply a successful placement: a new job, or a replacement's swap. With no options
        the job takes class, priority and tenant from the request."""
        res = placement._handle if isinstance(placement, Placement) else None
        if res is None:
            raise InvalidArgument("commit() needs an open Placement from place() or replace()")
        if res.cluster is not self:
            raise InvalidArgument("the placement was made on another cluster")
        keep = []
        opts = ffi.NULL
        if job_class is not None or priority is not None or tenant is not None or \
                preemptible != _JOB["preemptible"] or migratable != _JOB["migratable"] or \
                checkpoint_s != _JOB["checkpoint_s"] or shape is not None:
            opts = _job_options(keep, job_class or _JOB["job_class"],
                                _JOB["priority"] if priority is None else priority, tenant,
                                preemptible, migratable, checkpoint_s, shape)
        check(lib.tp_commit(self._p, res._p, opts), self)

    # -- fragmentation and defragmentation ------------------------------------------------
    def frag(self, mix=None):
        """Fragmentation figures of every level (:class:`FragReport`); ``mix`` is a list of
        :class:`JobShape` for the workload figure (None: the library's default mix)."""
        return _frag_report(self, mix)

    def defrag_plan(self, request, policy=None):
        """Which moves make ``request`` placeable within ``policy`` (:class:`DefragPolicy`)?
        Returns a :class:`Plan` (its ``status`` says whether one was found); the cluster is
        left as it was. Raises :class:`InvalidArgument` / :class:`NotFound` for an invalid
        request or policy."""
        if not isinstance(request, Request):
            raise TypeError("defrag_plan() needs a Request, not %s" % type(request).__name__)
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

    def defrag_compact_for(self, level, request, policy=None):
        """Compaction for one waiting ``request``: the moves that free as many whole domains
        of ``level`` as it needs, returned only if it then fits (the plan ends with its place
        step, as :meth:`defrag_plan`'s). Raises :class:`InvalidArgument` /
        :class:`NotFound` for an invalid request, level or policy."""
        if not isinstance(request, Request):
            raise TypeError("defrag_compact_for() needs a Request, not %s"
                            % type(request).__name__)
        keep = []
        r = request._to_c(keep)
        pol = (policy or DefragPolicy())._to_c(keep)
        out = ffi.new("tp_plan **")
        rc = lib.tp_defrag_compact_for(self._p, _b(level, "level"), r, pol, out)
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
        options are the new job's, for the place step (as :meth:`commit`). The plan applies
        to the cluster it was made on and to its copies (:meth:`copy`); the library refuses
        any other cluster."""
        h = plan._handle if isinstance(plan, Plan) else None
        if h is None:
            raise InvalidArgument("apply_step() needs an open Plan from defrag_plan()")
        keep = []
        opts = _job_options(keep, **job_options) if job_options else ffi.NULL
        check(lib.tp_plan_apply_step(self._p, h._p, i, opts), self)

    def __repr__(self):
        if self.closed:
            return "<Cluster closed>"
        return "<Cluster jobs=%d free=%d/%d>" % (lib.tp_cluster_job_count(self._p),
                                                 self.free_total_count, self._topo.device_count)


def place(cluster, request):
    """Module-level form of :meth:`Cluster.place`."""
    return cluster.place(request)


def commit(cluster, placement, **opts):
    """Module-level form of :meth:`Cluster.commit`."""
    return cluster.commit(placement, **opts)


def replace(cluster, job, failed):
    """Module-level form of :meth:`Cluster.replace`."""
    return cluster.replace(job, failed)
