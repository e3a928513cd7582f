# SPDX-License-Identifier: MIT
"""``python3 -m topoplace size FILE``: the ways to serve a model on a fleet (docs/serving.md).

The document (JSON)::

    {"version": 1,
     "topology": {... as in scenario-v1 ...},
     "model": {"name": "llama-3.1-70b", "params": 70.6e9, "layers": 80, "heads": 64,
               "kv_heads": 8, "head_dim": 128, "hidden": 8192,
               "weights": "fp16", "kv_cache": "fp16", "active_params": 0},
     "serving": {"context": 8192, "sequences": 0, "tokens_per_s": 0, "goal": "fewest_gpus",
                 "mem_utilisation": 0.9, "overhead_gb": 2, "max_tp": 0, "max_pp": 0,
                 "cross_domain": false, "hbm_gbps": {"X1": 4000}, "limit": 0}}

``weights`` and ``kv_cache`` are ``fp16``, ``bf16``, ``fp8``, ``fp4`` or bytes per element;
``model.name`` and everything in ``serving`` but ``context`` are optional. The answer:
``{"status": "ok", "model": name, "options": [{...}, ...]}`` best first (``limit`` > 0 keeps
that many), exit 0; ``{"status": "infeasible", "message": ...}``, exit 1; invalid input as the
other commands give it, exit 2.
"""

import json

from . import scenario as sc_mod
from .scenario import InvalidInput

DTYPES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0, "fp4": 0.5,
          "int4": 0.5}

_MODEL_KEYS = {"name", "params", "active_params", "layers", "heads", "kv_heads", "head_dim",
               "hidden", "weights", "kv_cache"}
_SERVING_KEYS = {"context", "sequences", "tokens_per_s", "goal", "mem_utilisation",
                 "overhead_gb", "max_tp", "max_pp", "cross_domain", "hbm_gbps", "limit"}


def _bad(path, why):
    return InvalidInput(path, why)


def _section(doc, key, allowed, required):
    sec = doc.get(key)
    if not isinstance(sec, dict):
        raise _bad(key, "missing or not an object")
    for k in sec:
        if k not in allowed:
            raise _bad("%s.%s" % (key, k), "unknown key (allowed: %s)"
                       % ", ".join(sorted(allowed)))
    for k in required:
        if k not in sec:
            raise _bad("%s.%s" % (key, k), "missing")
    return sec


def _int(path, v):
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 2 ** 32:
        raise _bad(path, "%s is not an integer from 0 to 2^32 - 1" % json.dumps(v))
    return v


def _num(path, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _bad(path, "%s is not a number" % json.dumps(v))
    return float(v)


def _dtype(path, v):
    if isinstance(v, str):
        if v.lower() not in DTYPES:
            raise _bad(path, "%r is not one of %s or a number of bytes"
                       % (v, ", ".join(DTYPES)))
        return DTYPES[v.lower()]
    return _num(path, v)


def parse(doc):
    """The model, the keyword arguments of size_model() and the limit, from a document."""
    from .sizing import GOALS, Model
    if not isinstance(doc, dict):
        raise _bad("(document)", "not a JSON object")
    for k in doc:
        if k not in ("version", "topology", "model", "serving"):
            raise _bad(k, "unknown key (allowed: version, topology, model, serving)")
    m = _section(doc, "model", _MODEL_KEYS,
                 ("params", "layers", "heads", "kv_heads", "head_dim", "hidden"))
    s = _section(doc, "serving", _SERVING_KEYS, ("context",))
    name = m.get("name", "")
    if not isinstance(name, str):
        raise _bad("model.name", "%s is not a string" % json.dumps(name))
    model = Model(params=_num("model.params", m["params"]),
                  active_params=_num("model.active_params", m.get("active_params", 0)),
                  weight_bytes=_dtype("model.weights", m.get("weights", "fp16")),
                  kv_bytes=_dtype("model.kv_cache", m.get("kv_cache", "fp16")),
                  **{k: _int("model." + k, m[k])
                     for k in ("layers", "heads", "kv_heads", "head_dim", "hidden")})
    goal = s.get("goal", "fewest_gpus")
    if goal not in GOALS:
        raise _bad("serving.goal", "%s is not one of %s" % (json.dumps(goal), ", ".join(GOALS)))
    hbm = s.get("hbm_gbps", {})
    if not isinstance(hbm, dict):
        raise _bad("serving.hbm_gbps", "not an object of device model: GB/s")
    cross = s.get("cross_domain", False)
    if not isinstance(cross, bool):
        raise _bad("serving.cross_domain", "%s is not true or false" % json.dumps(cross))
    kw = {"context": _int("serving.context", s["context"]),
          "sequences": _int("serving.sequences", s.get("sequences", 0)),
          "tokens_per_s": _num("serving.tokens_per_s", s.get("tokens_per_s", 0)),
          "goal": goal,
          "mem_utilisation": _num("serving.mem_utilisation", s.get("mem_utilisation", 0.9)),
          "overhead_gb": _num("serving.overhead_gb", s.get("overhead_gb", 2.0)),
          "max_tp": _int("serving.max_tp", s.get("max_tp", 0)),
          "max_pp": _int("serving.max_pp", s.get("max_pp", 0)),
          "cross_domain": cross,
          "hbm": {k: _num("serving.hbm_gbps.%s" % k, v) for k, v in hbm.items()}}
    return name, model, kw, _int("serving.limit", s.get("limit", 0))


# The keys of a scenario-v1 document that carries the serving sections as extension keys.
SCENARIO_KEYS = ("version", "topology", "state", "request", "policy", "replace", "x_sizing",
                 "x_pd")


def from_extension(doc, key, sections):
    """A document in a command's own shape from a scenario-v1 document that carries it under
    the extension key ``key`` (``x_sizing``: ``model`` and ``serving``; ``x_pd``: the
    ``service``), or ``doc`` unchanged when it has no such key. A message about a field of the
    section names it under ``key``; the scenario's other keys are the importer's to check."""
    if not isinstance(doc, dict) or key not in doc:
        return doc, None
    for k in doc:
        if k not in SCENARIO_KEYS:
            raise _bad(k, "unknown key (allowed: %s)" % ", ".join(SCENARIO_KEYS))
    ext = doc[key]
    if not isinstance(ext, dict):
        raise _bad(key, "not an object")
    keep = ("version", "topology", "state") if sections is None else ("version", "topology")
    out = {k: doc[k] for k in keep if k in doc}
    if sections is None:
        out["service"] = ext
    else:
        for k in ext:
            if k not in sections:
                raise _bad("%s.%s" % (key, k), "unknown key (allowed: %s)"
                           % ", ".join(sections))
        out.update(ext)
    return out, key


def renamed(e, key, section, keep=True):
    """An InvalidInput about ``section``'s fields, named under the extension key: inside it
    (``keep``: ``x_sizing.model.params``) or as it (``x_pd.groups`` for ``service.groups``)."""
    if key and (e.path == section or e.path.startswith(section + ".")):
        return InvalidInput(key + "." + e.path if keep else key + e.path[len(section):],
                            e.reason)
    return e


def read_document(path, stdin=None, max_bytes=sc_mod.MAX_INPUT_BYTES):
    """A JSON document from a file (or standard input for ``-``) and its folder; invalid input
    when it is not JSON (the size and pd commands)."""
    text, base_dir = sc_mod.read_input(path, stdin, max_bytes)
    try:
        return json.loads(text), base_dir
    except ValueError as e:
        raise _bad("(document)", "not JSON: %s" % e)


def run(path, stdin=None, max_bytes=sc_mod.MAX_INPUT_BYTES):
    """Answer the size command: (exit status, JSON document)."""
    from . import errors
    from .sizing import size_model
    doc, base_dir = read_document(path, stdin, max_bytes)
    doc, ext = from_extension(doc, "x_sizing", ("model", "serving"))
    try:
        name, model, kw, limit = parse(doc)
    except InvalidInput as e:
        raise renamed(renamed(e, ext, "model"), ext, "serving")
    sc = sc_mod.parse({"version": doc.get("version", 1), "topology": doc.get("topology")},
                      "frag", base_dir)
    try:
        opts = size_model(sc.topology, model, **kw)
    except errors.Infeasible as e:
        return 1, {"status": "infeasible", "message": str(e)}
    except errors.InvalidArgument as e:
        msg = str(e)
        if msg.startswith("options."):
            msg = "serving." + msg[len("options."):]
        raise InvalidInput("", msg)
    if limit:
        opts = opts[:limit]
    return 0, {"status": "ok", "model": name, "options": [o.as_dict() for o in opts]}


def render(doc):
    """The answer as a table for a person."""
    if doc.get("status") != "ok":
        return "%s: %s" % (doc.get("status"), doc.get("message", ""))
    rows = [("device", "tp", "pp", "replicas", "GPUs", "weights GB", "KV GB", "tokens",
             "seqs", "step ms", "tok/s/GPU")]
    for o in doc["options"]:
        rows.append((o["model"], str(o["tp"]), str(o["pp"]), str(o["replicas"]),
                     str(o["gpus"]), "%.2f" % o["weights_gb"], "%.2f" % o["kv_gb"],
                     "%.0f" % o["tokens"], str(o["sequences"]), "%.2f" % (o["step_us"] / 1e3),
                     "%.0f" % o["tokens_per_s_gpu"]))
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    head = "%s: %d way%s to serve it, best first" % (doc.get("model") or "the model",
                                                     len(doc["options"]),
                                                     "" if len(doc["options"]) == 1 else "s")
    return "\n".join([head] + ["  " + "  ".join(c.rjust(w) for c, w in zip(r, width))
                               for r in rows])
