# SPDX-License-Identifier: MIT
"""Sizing a model for serving (include/topoplace-sizing.h): the ways to serve it on a fleet's
devices, with the KV-cache room and modelled decode step of each, ranked by a goal.

    >>> import topoplace as tp
    >>> topo = tp.Topology.nvl72(blocks=1, racks_per_block=1)
    >>> llama = tp.Model(params=70.6e9, layers=80, heads=64, kv_heads=8, head_dim=128,
    ...                  hidden=8192)
    >>> best = tp.size_model(topo, llama, context=8192)[0]
    >>> best.model, best.tp, best.gpus
    ('GB200', 1, 1)

The memory model and worked examples are in docs/serving.md.
"""

from dataclasses import dataclass, fields

from . import _defaults, errors
from ._native import ffi, lib

__all__ = ["Model", "SizingOption", "size_model", "place_model", "hbm_gbps", "GOALS",
           "PDInstance", "PDPlaced", "place_pd", "release_pd_failed"]

#: The ranking goals, by their names in Python and in the CLI's JSON.
GOALS = {"fewest_gpus": 0, "most_kv_per_gpu": 1, "best_throughput": 2}
_GOAL_NAME = {code: name for name, code in GOALS.items()}
_MODEL = _defaults.MODEL_DESC
_SIZING = _defaults.SIZING_OPTIONS
_PD = _defaults.PD_REQUEST


@dataclass(frozen=True)
class Model:
    """A transformer model: ``params`` in all (``active_params`` read per token, for a MoE;
    0: all of them), bytes per parameter of the weights (2 fp16, 1 fp8, 0.5 fp4) and per
    KV-cache element, layers, attention heads, key/value heads, head dimension and hidden
    size."""
    params: float
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    hidden: int
    weight_bytes: float = _MODEL["weight_bytes"]
    kv_bytes: float = _MODEL["kv_bytes"]
    active_params: float = _MODEL["active_params"]


@dataclass(frozen=True)
class SizingOption:
    """One way to serve the model (the fields of ``tp_sizing_option``): the device model and
    its memory, tensor and pipeline degrees, replicas and GPUs, the NVLink domain a tensor
    group stays in, weights and KV room per GPU (GB), KV bytes per token per GPU, the tokens and
    sequences one replica holds, the modelled decode step of a full batch (us), the decode
    tokens/s per GPU, and the smallest levels whose domains hold a replica and a tensor group
    (None: larger than a top-level domain)."""
    model: str
    memory_gb: float
    tp: int
    pp: int
    replicas: int
    gpus: int
    nvlink_domain: int
    weights_gb: float
    kv_gb: float
    kv_token_bytes: float
    tokens: float
    sequences: int
    step_us: float
    tokens_per_s_gpu: float
    replica_level: str = None
    tensor_level: str = None

    def as_dict(self):
        """The option as a dict, as the CLI writes it."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


def hbm_gbps(model):
    """The built-in HBM bandwidth of a device model in GB/s, or 0.0 when unknown."""
    return lib.tp_sizing_hbm_gbps(model.encode("utf-8"))


def _number(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise errors.InvalidArgument("%s %r is not a number" % (name, v))
    return float(v)


def _model_c(m):
    d = _defaults.c_init("model_desc")
    for name in ("params", "active_params", "weight_bytes", "kv_bytes"):
        setattr(d, name, _number("model." + name, getattr(m, name)))
    for name in ("layers", "heads", "kv_heads", "head_dim", "hidden"):
        v = getattr(m, name)
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2 ** 32:
            raise errors.InvalidArgument("model.%s %r is not an integer from 0 to 2^32 - 1"
                                         % (name, v))
        setattr(d, name, v)
    return d


def _size(topology, model, context, sequences=_SIZING["sequences"],
          tokens_per_s=_SIZING["tokens_per_s"], goal=_GOAL_NAME[_SIZING["goal"]],
          mem_utilisation=_SIZING["mem_utilisation"], overhead_gb=_SIZING["overhead_gb"],
          max_tp=_SIZING["max_tp"], max_pp=_SIZING["max_pp"],
          cross_domain=_SIZING["cross_domain"], hbm=None):
    """tp_size_model(): the result's handle and its options."""
    if goal not in GOALS:
        raise errors.InvalidArgument("goal %r is not one of %s" % (goal, ", ".join(GOALS)))
    m = _model_c(model)
    o = _defaults.c_init("sizing_options")
    for name, v in (("context", context), ("sequences", sequences), ("max_tp", max_tp),
                    ("max_pp", max_pp)):
        if not isinstance(v, int) or isinstance(v, bool) or not 0 <= v < 2 ** 32:
            raise errors.InvalidArgument("options.%s %r is not an integer from 0 to 2^32 - 1"
                                         % (name, v))
        setattr(o, name, v)
    o.tokens_per_s = _number("options.tokens_per_s", tokens_per_s)
    o.mem_utilisation = _number("options.mem_utilisation", mem_utilisation)
    o.overhead_gb = _number("options.overhead_gb", overhead_gb)
    o.goal = GOALS[goal]
    o.cross_domain = 1 if cross_domain else 0
    keep = []
    if hbm:
        names = [ffi.new("char[]", str(k).encode("utf-8")) for k in hbm]
        arr = ffi.new("const char *[]", names)
        gbps = ffi.new("double[]", [_number("hbm[%r]" % k, v) for k, v in hbm.items()])
        keep += [names, arr, gbps]
        o.hbm_models, o.hbm_gbps, o.nhbm = arr, gbps, len(names)
    out = ffi.new("tp_sizing **")
    rc = lib.tp_size_model(topology._ptr, m, o, out)
    s = ffi.gc(out[0], lib.tp_sizing_destroy) if out[0] != ffi.NULL else None
    if rc < 0:
        msg = ffi.string(lib.tp_sizing_errmsg(s)).decode("utf-8", "replace") if s else None
        errors.check(rc, message=msg)
    return s, [_option(lib.tp_sizing_get(s, i)) for i in range(lib.tp_sizing_count(s))]


def _str(p):
    return ffi.string(p).decode("utf-8") if p != ffi.NULL else None


def _option(x):
    return SizingOption(
        model=_str(x.model), memory_gb=x.memory_gb, tp=x.tp, pp=x.pp, replicas=x.replicas,
        gpus=x.gpus, nvlink_domain=x.nvlink_domain, weights_gb=x.weights_gb, kv_gb=x.kv_gb,
        kv_token_bytes=x.kv_token_bytes, tokens=x.tokens, sequences=x.sequences,
        step_us=x.step_us, tokens_per_s_gpu=x.tokens_per_s_gpu,
        replica_level=_str(x.replica_level), tensor_level=_str(x.tensor_level))


def size_model(topology, model, context, **kw):
    """The ways to serve ``model`` (a :class:`Model`) on ``topology``, best first, as
    :class:`SizingOption` (see tp_size_model()). Keywords: ``sequences``, ``tokens_per_s``,
    ``goal`` (one of :data:`GOALS`), ``mem_utilisation``, ``overhead_gb``, ``max_tp``,
    ``max_pp``, ``cross_domain`` and ``hbm`` (device model -> HBM GB/s, overriding the built-in
    table). Raises :class:`~topoplace.errors.InvalidArgument` for a bad figure (the message
    names the field) and :class:`~topoplace.errors.Infeasible` when no way exists (the message
    gives each device model's reason)."""
    return _size(topology, model, context, **kw)[1]


def place_model(cluster, model, context, request=None, **kw):
    """Size ``model`` on the cluster's topology, then place the best-ranked option that fits
    now (tp_size_place()): ``request`` (a :class:`~topoplace.Request`, default an empty one)
    gives the id, tenant, spread, caps and the rest; the options set the count, the tensor
    groups and the device model. Returns ``(placement, option, why)``: the
    :class:`~topoplace.Placement` (its status says whether it was placed), the
    :class:`SizingOption` placed (None when none was) and, for each better-ranked option, why
    it was not placed."""
    from .request import Request
    s, opts = _size(cluster.topology, model, context, **kw)
    req = request if request is not None else Request(count=1)
    keep = []
    r = req._to_c(keep)
    out = ffi.new("tp_placement **")
    chosen = ffi.new("size_t *", 2 ** 64 - 1)
    why = ffi.new("char[4096]")
    rc = lib.tp_size_place(cluster._p, s, r, out, chosen, why, len(why))
    pl = cluster._result(rc, out[0])
    lines = [ln for ln in ffi.string(why).decode("utf-8", "replace").split("\n") if ln]
    return pl, (opts[chosen[0]] if rc == 0 else None), lines


# --------------------------------------------------------------------------------------------
# Prefill/decode groups (tp_pd_place)
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PDInstance:
    """One instance :func:`place_pd` placed: its job id, group, whether it is a prefill
    instance, its index among the group's prefill or decode instances, ``pair`` (a decode
    instance: the prefill instance of its group that hands it the KV cache; a prefill instance:
    how many decode instances it serves) and its devices (names, in rank order)."""
    job: str
    group: int
    prefill: bool
    index: int
    pair: int
    devices: tuple


def _opt_bytes(v, what, keep):
    if v is None:
        return ffi.NULL
    if not isinstance(v, str):
        raise errors.InvalidArgument("%s %r is not a string" % (what, v))
    b = ffi.new("char[]", v.encode("utf-8"))
    keep.append(b)
    return b


class PDPlaced(list):
    """The :class:`PDInstance` list :func:`place_pd` returns, with the locality the groups were
    kept to (``locality``: a level name, or None for none), the modelled KV hand-off of one
    request there (``handoff_us``, 0 without the hand-off's size) and, for ``locality="auto"``,
    how it was decided (``decision``: each candidate's hand-off and what each try gave)."""
    locality = None
    handoff_us = 0.0
    decision = ""


def place_pd(cluster, service, groups, prefill, decode, instance_level=_PD["instance_level"],
             locality=_PD["locality"], spread_level=_PD["spread_level"],
             max_per_domain=_PD["max_per_domain"], tenant=_PD["tenant"],
             select_model=_PD["select_model"], kv_token_bytes=_PD["kv_token_bytes"],
             prompt_tokens=_PD["prompt_tokens"], handoff_slack=_PD["handoff_slack"]):
    """Place the missing groups of a prefill/decode service and assign them (tp_pd_place()):
    ``groups`` is the number the service should have; ``prefill`` and ``decode`` are
    ``(instances per group, devices per instance)``. ``locality="auto"`` chooses the level from
    the modelled hand-off of ``prompt_tokens`` tokens of ``kv_token_bytes`` each (both needed),
    preferring a looser level within ``handoff_slack`` of the fastest. Returns a
    :class:`PDPlaced` list of the :class:`PDInstance` placed (none when every group existed).
    Raises :class:`~topoplace.errors.InvalidArgument` for a bad figure or level and
    :class:`~topoplace.errors.Busy`, ``Fragmented`` or ``Infeasible`` when a group cannot be
    placed (the cluster is then unchanged)."""
    keep = []
    r = _defaults.c_init("pd_request")
    r.service = _opt_bytes(service, "service", keep)
    r.tenant = _opt_bytes(tenant, "tenant", keep)
    for name, v in (("groups", groups), ("prefill", prefill[0]),
                    ("prefill_devices", prefill[1]), ("decode", decode[0]),
                    ("decode_devices", decode[1]), ("max_per_domain", max_per_domain)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 32:
            raise errors.InvalidArgument("request.%s %r is not an integer from 0 to 2^32 - 1"
                                         % (name, v))
        setattr(r, name, v)
    r.instance_level = _opt_bytes(instance_level, "instance_level", keep)
    r.locality = _opt_bytes(locality, "locality", keep)
    r.spread_level = _opt_bytes(spread_level, "spread_level", keep)
    r.select_model = _opt_bytes(select_model, "select_model", keep)
    for name, v in (("kv_token_bytes", kv_token_bytes), ("handoff_slack", handoff_slack)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise errors.InvalidArgument("request.%s %r is not a number" % (name, v))
        setattr(r, name, float(v))
    if isinstance(prompt_tokens, bool) or not isinstance(prompt_tokens, int) or \
            not 0 <= prompt_tokens < 2 ** 32:
        raise errors.InvalidArgument("request.prompt_tokens %r is not an integer from 0 to "
                                     "2^32 - 1" % (prompt_tokens,))
    r.prompt_tokens = prompt_tokens
    out = ffi.new("tp_pd_result **")
    rc = lib.tp_pd_place(cluster._p, r, out)
    res = ffi.gc(out[0], lib.tp_pd_result_destroy) if out[0] != ffi.NULL else None
    if rc < 0:
        errors.check(rc, message=ffi.string(lib.tp_pd_result_errmsg(res)).decode(
            "utf-8", "replace") if res else None)
    topo = cluster.topology
    placed = PDPlaced()
    us = ffi.new("double *")
    loc = lib.tp_pd_result_locality(res, us)
    placed.locality = None if loc == ffi.NULL else _str(loc)
    placed.handoff_us = us[0]
    placed.decision = _str(lib.tp_pd_result_decision(res))
    for i in range(lib.tp_pd_result_count(res)):
        x = lib.tp_pd_result_get(res, i)
        placed.append(PDInstance(
            job=_str(x.job), group=x.group, prefill=bool(x.prefill), index=x.index,
            pair=x.pair, devices=tuple(topo.device_name(x.devices[k])
                                       for k in range(x.ndevices))))
    return placed


def release_pd_failed(cluster, service, groups):
    """Release every group of the service with an instance on a down device
    (tp_pd_release_failed()), so that :func:`place_pd` places it again; returns how many."""
    n = ffi.new("unsigned *")
    errors.check(lib.tp_pd_release_failed(cluster._p, service.encode("utf-8"), groups, n),
                 cluster)
    return n[0]
