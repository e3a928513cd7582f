# SPDX-License-Identifier: MIT
"""The cost model of a training step (``tp_cost_step_us``, ``tp_cost_efficiency``):
:class:`StepModel` and the functions :func:`step_us` and :func:`efficiency`.

Both only read the topology, so they may run on a shared :class:`~topoplace.Topology` from
several threads. The defaults of :class:`StepModel` are those of ``TP_STEP_MODEL_INIT``.
"""

from dataclasses import dataclass, fields

from . import _defaults
from ._core import ffi, lib, strerror
from .errors import InvalidArgument, check

__all__ = ["StepModel", "step_us", "efficiency"]

_INIT = _defaults.c_init("step_model")


@dataclass
class StepModel:
    """One training step (``tp_step_model``): parallel degrees ``tp`` x ``pp`` x ``dp`` (the
    job's device count), ``ep`` (0 or 1: none; else divides ``dp``), compute time in us on a
    device of relative speed 1, and the bytes and counts of each kind of message per step
    (``dp_overlap``: the share of the gradient all-reduce hidden behind compute).
    ``min_efficiency`` (0 to 1, default 0: none) is the floor a request's ``comm`` puts on
    :meth:`Cluster.place`: when the rules' choice has an :func:`efficiency` below it, the
    fabric classes are searched for a placement that meets it (``no_floor_search`` 1: not),
    and without one the answer is "busy" with a message naming
    ``request.comm.min_efficiency``. ``fabric_fit`` (0 to 1, default 0: off): on a topology
    of several fabric classes, :meth:`Cluster.place` first tries the classes on which the job
    packed reaches ``fabric_fit`` x its best class efficiency, slowest first (best fit over
    fabrics, ``tp_step_model.fabric_fit``). :func:`step_us` and :func:`efficiency` ignore all
    three."""
    tp: int = _INIT.tp
    pp: int = _INIT.pp
    dp: int = _INIT.dp
    ep: int = _INIT.ep
    compute_us: float = _INIT.compute_us
    tp_bytes: float = _INIT.tp_bytes
    tp_msgs: int = _INIT.tp_msgs
    dp_bytes: float = _INIT.dp_bytes
    dp_overlap: float = _INIT.dp_overlap
    pp_bytes: float = _INIT.pp_bytes
    pp_msgs: int = _INIT.pp_msgs
    ep_bytes: float = _INIT.ep_bytes
    ep_msgs: int = _INIT.ep_msgs
    min_efficiency: float = _INIT.min_efficiency
    no_floor_search: int = _INIT.no_floor_search
    fabric_fit: float = _INIT.fabric_fit

    def _to_c(self):
        m = _defaults.c_init("step_model")
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type is int and (isinstance(v, bool) or not isinstance(v, int) or
                                  not 0 <= v <= 0xFFFFFFFF):
                raise InvalidArgument("model.%s %r is not an integer from 0 to %d"
                                      % (f.name, v, 0xFFFFFFFF))
            try:
                setattr(m, f.name, v)
            except TypeError:
                raise InvalidArgument("model.%s %r is not a number" % (f.name, v))
        return m


def _call(fn, topology, devices, model):
    ids = topology.devices(devices)
    arr = ffi.new("uint32_t[]", ids)
    out = ffi.new("double *")
    err = ffi.new("char[]", 512)
    m = model if not isinstance(model, StepModel) else model._to_c()
    rc = fn(out, topology._p, arr, len(ids), m, ffi.NULL, err, 512)
    check(rc, None, ffi.string(err).decode("utf-8", "replace") or strerror(rc))
    return out[0]


def step_us(topology, devices, model):
    """The modelled time in us of one step of ``model`` (a :class:`StepModel`) on
    ``devices`` (ids or names, in rank order) of ``topology``. Raises
    :class:`InvalidArgument` naming the field (degrees that do not multiply to the device
    count, a negative figure, ...)."""
    return _call(lib.tp_cost_step_us, topology, devices, model)


def efficiency(topology, devices, model):
    """The placement efficiency of ``devices`` for ``model``, in (0, 1]: the step time of the
    best packed layout on an empty cluster of the topology over the step time on ``devices``
    (locality only: both at the speed of the slowest device)."""
    return _call(lib.tp_cost_efficiency, topology, devices, model)
