# SPDX-License-Identifier: MIT
"""``python3 -m topoplace pd FILE``: place a prefill/decode service's missing groups
(docs/serving.md, tp_pd_place()).

The document (JSON)::

    {"version": 1,
     "topology": {... as in scenario-v1 ...},
     "state": {... as in scenario-v1: running jobs, down and cordoned devices ...},
     "service": {"name": "chat", "groups": 4, "prefill": {"instances": 2, "devices": 4},
                 "decode": {"instances": 4, "devices": 8}, "instance_level": "rack",
                 "locality": "rack", "spread_level": "rack", "max_per_domain": 1,
                 "tenant": "t1", "select_model": null, "repair": false,
                 "kv_token_bytes": 327680, "prompt_tokens": 8192, "handoff_slack": 0.1}}

``"locality": "auto"`` chooses the level from the modelled KV hand-off of ``prompt_tokens``
tokens of ``kv_token_bytes`` bytes (docs/serving.md, "auto locality").

The service's groups already running are the state's jobs named ``<name>/g<k>/p<i>`` and
``<name>/g<k>/d<j>``. With ``repair`` the groups with an instance on a down device are released
first and placed again. The answer: ``{"status": "ok", "service": name, "released": n,
"locality": level or null, "handoff_us": x, "decision": text,
"placed": [{"job", "group", "role", "index", "pair", "devices"}, ...]}``, exit 0; a group that
cannot be placed: ``{"status": "busy" | "fragmented" | "infeasible", "message": ...}``, exit 1,
nothing placed; invalid input, exit 2.
"""

import json

from . import scenario as sc_mod
from .scenario import InvalidInput

_SERVICE_KEYS = {"name", "groups", "prefill", "decode", "instance_level", "locality",
                 "spread_level", "max_per_domain", "tenant", "select_model", "repair",
                 "kv_token_bytes", "prompt_tokens", "handoff_slack"}


def _bad(path, why):
    return InvalidInput(path, why)


def _int(path, v, low=0):
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v < 2 ** 32:
        raise _bad(path, "%s is not an integer from %d to 2^32 - 1" % (json.dumps(v), low))
    return v


def _opt_str(path, v):
    if v is not None and not isinstance(v, str):
        raise _bad(path, "%s is not a string or null" % json.dumps(v))
    return v


def _side(sec, key):
    s = sec.get(key)
    if not isinstance(s, dict):
        raise _bad("service.%s" % key, "missing or not an object {\"instances\": n, "
                   "\"devices\": n}")
    for k in s:
        if k not in ("instances", "devices"):
            raise _bad("service.%s.%s" % (key, k), "unknown key (allowed: devices, instances)")
    for k in ("instances", "devices"):
        if k not in s:
            raise _bad("service.%s.%s" % (key, k), "missing")
    return (_int("service.%s.instances" % key, s["instances"], 1),
            _int("service.%s.devices" % key, s["devices"], 1))


def parse(doc):
    """The keyword arguments of place_pd() and the repair flag, from a document."""
    if not isinstance(doc, dict):
        raise _bad("(document)", "not a JSON object")
    for k in doc:
        if k not in ("version", "topology", "state", "service"):
            raise _bad(k, "unknown key (allowed: version, topology, state, service)")
    sec = doc.get("service")
    if not isinstance(sec, dict):
        raise _bad("service", "missing or not an object")
    for k in sec:
        if k not in _SERVICE_KEYS:
            raise _bad("service.%s" % k, "unknown key (allowed: %s)"
                       % ", ".join(sorted(_SERVICE_KEYS)))
    for k in ("name", "groups", "prefill", "decode"):
        if k not in sec:
            raise _bad("service.%s" % k, "missing")
    if not isinstance(sec["name"], str) or not sec["name"]:
        raise _bad("service.name", "%s is not a non-empty string" % json.dumps(sec["name"]))
    repair = sec.get("repair", False)
    if not isinstance(repair, bool):
        raise _bad("service.repair", "%s is not true or false" % json.dumps(repair))
    kw = {"service": sec["name"], "groups": _int("service.groups", sec["groups"], 1),
          "prefill": _side(sec, "prefill"), "decode": _side(sec, "decode"),
          "max_per_domain": _int("service.max_per_domain", sec.get("max_per_domain", 0))}
    for k in ("instance_level", "locality", "spread_level", "tenant", "select_model"):
        kw[k] = _opt_str("service." + k, sec.get(k))
    kw["prompt_tokens"] = _int("service.prompt_tokens", sec.get("prompt_tokens", 0))
    for k, default in (("kv_token_bytes", 0.0), ("handoff_slack", 0.1)):
        v = sec.get(k, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise _bad("service." + k, "%s is not a number >= 0" % json.dumps(v))
        kw[k] = float(v)
    return kw, repair


def run(path, stdin=None, max_bytes=sc_mod.MAX_INPUT_BYTES):
    """Answer the pd command: (exit status, JSON document)."""
    from . import errors
    from .size_cli import from_extension, read_document, renamed
    from .sizing import place_pd, release_pd_failed
    doc, base_dir = read_document(path, stdin, max_bytes)
    doc, ext = from_extension(doc, "x_pd", None)
    try:
        kw, repair = parse(doc)
    except InvalidInput as e:
        raise renamed(e, ext, "service", keep=False)
    scen = {k: doc[k] for k in ("version", "topology", "state") if k in doc}
    sc = sc_mod.parse(scen, "frag", base_dir)
    released = 0
    try:
        if repair:
            released = release_pd_failed(sc.cluster, kw["service"], kw["groups"])
        placed = place_pd(sc.cluster, **kw)
    except (errors.Busy, errors.Fragmented, errors.Infeasible) as e:
        return 1, {"status": {-5: "infeasible", -6: "busy", -7: "fragmented"}[e.code],
                   "message": str(e)}
    except errors.InvalidArgument as e:
        raise InvalidInput("", "service: %s" % e)
    return 0, {"status": "ok", "service": kw["service"], "released": released,
               "locality": placed.locality, "handoff_us": round(placed.handoff_us, 1),
               "decision": placed.decision,
               "placed": [{"job": p.job, "group": p.group,
                           "role": "prefill" if p.prefill else "decode", "index": p.index,
                           "pair": p.pair, "devices": list(p.devices)} for p in placed]}


def render(doc):
    """The answer for a person: one line per instance, decode instances with their prefill."""
    if doc.get("status") != "ok":
        return "%s: %s" % (doc.get("status"), doc.get("message", ""))
    lines = ["service %s: %d instance(s) placed%s" % (
        doc["service"], len(doc["placed"]),
        ", %d group(s) released for repair" % doc["released"] if doc["released"] else "")]
    if doc.get("decision"):
        lines.append("  %s" % doc["decision"])
    for p in doc["placed"]:
        devs = p["devices"]
        span = devs[0] if len(devs) == 1 else "%s .. %s" % (devs[0], devs[-1])
        role = ("prefill, serves %d" % p["pair"] if p["role"] == "prefill"
                else "decode, KV from p%d" % p["pair"])
        lines.append("  %-20s %-22s %d devices: %s" % (p["job"], role, len(devs), span))
    return "\n".join(lines)
