# SPDX-License-Identifier: MIT
"""The option defaults of the Python layer, in one place, read from the C header.

Each options struct ``tp_<name>`` of the public headers has an init function,
``tp_<name>_init(ptr, TP_<NAME>_VERSION)``, which stores its ``TP_<NAME>_INIT`` defaults:
:func:`c_init` returns a struct filled by it, and every ``_to_c`` starts from one. The tables below are the same values in Python terms (``None``
for NULL and "no limit", ``bool`` for flags, class names for classes), and the dataclasses and
keyword defaults of the package take their defaults from them. Each table is read-only.

The Python defaults therefore follow the header: a new default in C needs no change here,
and a new field one line in its table.
"""

from types import MappingProxyType

from ._core import _CLASS_NAME, _s, ffi, lib

__all__ = ["c_init", "NODE_OPTIONS", "JOB_OPTIONS", "REQUEST", "SELECT", "DEFRAG_POLICY",
           "MODEL_DESC", "SIZING_OPTIONS", "PD_REQUEST"]


def c_init(struct):
    """A new ``tp_<struct> *`` (cffi owned) filled by the library's ``tp_<struct>_init()`` with
    the header's ``TP_<STRUCT>_VERSION``: ``c_init("defrag_policy")``."""
    p = ffi.new("tp_%s *" % struct)
    rc = getattr(lib, "tp_%s_init" % struct)(p, getattr(lib, "TP_%s_VERSION" % struct.upper()))
    if rc != 0:
        raise RuntimeError("tp_%s_init refused its own header's version (%d)" % (struct, rc))
    return p


def _class(code):
    return _CLASS_NAME[code]


def _u32_limit(n):
    """``UINT32_MAX`` means "no limit": None."""
    return None if n == 0xFFFFFFFF else int(n)


def _zero_limit(n):
    """0 means "no limit": None."""
    return int(n) or None


def _negative_limit(x):
    """A negative value means "no limit": None."""
    return None if x < 0 else float(x)


def _group_size(n):
    """``group_size`` 0 means groups of 1."""
    return int(n) or 1


def _read(struct, fields):
    """{Python name: value} from the fields of ``TP_<STRUCT>_INIT``; ``fields`` maps each
    Python name to (C field, conversion)."""
    c = c_init(struct)
    return MappingProxyType({name: conv(getattr(c, cfield))
                             for name, (cfield, conv) in fields.items()})


#: ``TP_NODE_OPTIONS_INIT``: ``TopologyBuilder.add_node`` / ``generate`` keywords.
NODE_OPTIONS = _read("node_options", {
    "model": ("model", _s),
    "memory_gb": ("memory_gb", float),
    "perf": ("perf", float),
})

#: ``TP_JOB_OPTIONS_INIT``: ``Cluster.assign`` / ``commit`` / ``apply_step`` keywords.
JOB_OPTIONS = _read("job_options", {
    "job_class": ("job_class", _class),
    "priority": ("priority", int),
    "tenant": ("tenant", _s),
    "preemptible": ("preemptible", bool),
    "migratable": ("migratable", bool),
    "checkpoint_s": ("checkpoint_s", float),
})

#: ``TP_REQUEST_INIT``: the scalar fields of :class:`~topoplace.Request` (``count`` has no
#: default; the lists are empty and the nested parts None).
REQUEST = _read("request", {
    "id": ("id", _s),
    "job_class": ("job_class", _class),
    "priority": ("priority", int),
    "tenant": ("tenant", _s),
    "group_size": ("group_size", _group_size),
    "group_level": ("group_level", _s),
    "required": ("required", _s),
    "preferred": ("preferred", _s),
    "balanced": ("balanced", bool),
    "exclusive": ("exclusive", _s),
    "gpu_nic_pairs": ("gpu_nic_pairs", bool),
})

#: ``TP_REQUEST_INIT``'s ``select_*`` fields: :class:`~topoplace.Select`.
SELECT = _read("request", {
    "model": ("select_model", _s),
    "min_perf": ("select_min_perf", float),
    "min_memory_gb": ("select_min_memory_gb", float),
})

#: ``TP_DEFRAG_POLICY_INIT``: :class:`~topoplace.DefragPolicy` (None: no limit).
DEFRAG_POLICY = _read("defrag_policy", {
    "migrate": ("migrate", bool),
    "preempt": ("preempt", bool),
    "allow_interactive": ("allow_interactive", bool),
    "max_moves": ("max_moves", _u32_limit),
    "max_cost_s": ("max_cost_s", _negative_limit),
    "min_priority_gap": ("min_priority_gap", int),
    "allow_less_local": ("allow_less_local", bool),
    "max_candidates": ("max_candidates", _u32_limit),
    "max_simulations": ("max_simulations", _u32_limit),
    "max_time_us": ("max_time_us", _zero_limit),
})

#: ``TP_MODEL_DESC_INIT``: the defaults of :class:`~topoplace.Model`.
MODEL_DESC = _read("model_desc", {
    "weight_bytes": ("weight_bytes", float),
    "kv_bytes": ("kv_bytes", float),
    "active_params": ("active_params", float),
})

#: ``TP_SIZING_OPTIONS_INIT``: the keywords of ``size_model`` / ``place_model`` (``goal`` as
#: its ``tp_size_goal`` code).
SIZING_OPTIONS = _read("sizing_options", {
    "sequences": ("sequences", int),
    "tokens_per_s": ("tokens_per_s", float),
    "goal": ("goal", int),
    "mem_utilisation": ("mem_utilisation", float),
    "overhead_gb": ("overhead_gb", float),
    "max_tp": ("max_tp", int),
    "max_pp": ("max_pp", int),
    "cross_domain": ("cross_domain", bool),
})

#: ``TP_PD_REQUEST_INIT``: the keywords of ``place_pd``.
PD_REQUEST = _read("pd_request", {
    "instance_level": ("instance_level", _s),
    "locality": ("locality", _s),
    "spread_level": ("spread_level", _s),
    "max_per_domain": ("max_per_domain", int),
    "tenant": ("tenant", _s),
    "select_model": ("select_model", _s),
    "kv_token_bytes": ("kv_token_bytes", float),
    "prompt_tokens": ("prompt_tokens", int),
    "handoff_slack": ("handoff_slack", float),
})
