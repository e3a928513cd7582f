# SPDX-License-Identifier: MIT
"""The scenario format, version 1 (shared/spec/scenario-v1.md): parse and validate a document.

This module is pure Python and does not need the C library: it checks the whole document and
turns it into plain data (:class:`Scenario`); :mod:`topoplace.cli` then drives the C API with it.
Every problem raises :class:`InvalidInput`, whose message names the offending field as a dotted
path with ``[i]`` for list items (``request.slices[1].size``, ``topology.nodes[3].name``) and
says why. Where two fields contradict each other, the one that is wrong relative to the other is
named: ``request.count`` when it is not a multiple of the group size, the inner slice's ``size``,
the second occurrence of a duplicate name, the second job that claims a held device.
"""

import json
import math
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple, Union

__all__ = ["InvalidInput", "Scenario", "NodeSpec", "JobSpec", "parse", "load", "COMMANDS",
           "USES"]

COMMANDS = ("place", "defrag", "frag", "replace")

TOP_KEYS = ("version", "topology", "state", "request", "policy", "replace")
TOPOLOGY_KEYS = ("levels", "fabric", "nodes", "generate", "failure_domains")
FABRIC_KEYS = ("kind", "gbps", "latency_us")
FABRIC_KINDS = ("nvlink", "pcie", "ib", "ethernet")
NODE_KEYS = ("name", "path", "gpus", "model", "memory_gb", "perf", "hwloc")
GENERATE_KEYS = ("counts", "gpus_per_node", "model", "memory_gb", "perf")
STATE_KEYS = ("jobs", "down", "cordoned")
JOB_KEYS = ("id", "class", "priority", "tenant", "preemptible", "migratable", "checkpoint_s",
            "devices", "request")
CLASSES = ("training", "inference", "interactive")
REQUEST_KEYS = ("id", "class", "priority", "tenant", "count", "group", "required", "preferred",
                "slices", "balanced", "max_per_domain", "spread", "colocate", "exclusive",
                "select", "x_gpu_nic_pairs")
# Extensions of this tool to scenario-v1 (docs/python.md): keys that start with "x_". A document
# without them is read exactly as the specification says.
GROUP_KEYS = ("size", "level")
SLICE_KEYS = ("level", "size")
CAP_KEYS = ("level", "devices", "groups")
SPREAD_KEYS = ("level", "min_domains")
COLOCATE_KEYS = ("job", "level")
SELECT_KEYS = ("model", "min_perf", "min_memory_gb", "nodes")
POLICY_KEYS = ("migrate", "preempt", "allow_interactive", "max_moves", "max_cost_s",
               "min_priority_gap")
REPLACE_KEYS = ("job", "failed")

# The sections each command reads. The spec's examples (README, reading 7) read the others as
# "allowed, neither validated nor applied"; --strict validates them as well.
USES = {"place": ("state", "request"), "defrag": ("state", "request", "policy"),
        "frag": ("state",), "replace": ("state", "replace")}

# Limits of the C library (topoplace.h); checked here so that the message names the field.
MAX_LEVELS = 8
MAX_NODE_DEVICES = 256
MAX_NAME = 255
U32_MAX = 2 ** 32 - 1
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1
# Most devices a scenario may describe: the library's limit (2^31 devices) is far beyond what a
# JSON scenario can usefully hold; this keeps a typo in `generate` from eating the machine.
MAX_DEVICES = 2 ** 24

# Fabric defaults of the spec (and of tp_topology_builder_create): kind, GB/s, latency in us.
FABRIC_DEFAULT_NODE = ("nvlink", 900.0, 3.4)
FABRIC_DEFAULT_LEVEL = ("ib", 50.0, 14.0)
FABRIC_DEFAULT_CLUSTER = ("ib", 25.0, 20.0)

POLICY_DEFAULTS = {"migrate": True, "preempt": True, "allow_interactive": False,
                   "max_moves": None, "max_cost_s": None, "min_priority_gap": 1}


class InvalidInput(Exception):
    """The document is not a valid scenario. ``path`` is the offending field ("" for the whole
    document); ``reason`` says why; ``str()`` gives ``"path: reason"``."""

    def __init__(self, path, reason):
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self):
        return "%s: %s" % (self.path, self.reason) if self.path else self.reason


def _fail(path, reason):
    raise InvalidInput(path, reason)


# --------------------------------------------------------------------------------------------
# JSON reading: duplicate keys and NaN/Infinity are errors (a typo must not change the answer)
# --------------------------------------------------------------------------------------------

class _Obj(dict):
    """A JSON object that remembers keys given twice (json keeps only the last value)."""
    __slots__ = ("dups",)


def _pairs(pairs):
    obj = _Obj()
    obj.dups = []
    for k, v in pairs:
        if k in obj and k not in obj.dups:
            obj.dups.append(k)
        obj[k] = v
    return obj


def _no_constant(name):
    raise ValueError("%s is not a JSON number" % name)


def parse_json(text):
    """Parse JSON text; raises InvalidInput (no path) when it is not JSON."""
    try:
        return json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant)
    except RecursionError:
        _fail("", "the document is nested too deeply")
    except ValueError as e:
        _fail("", "not a valid JSON document: %s" % e)


# --------------------------------------------------------------------------------------------
# Small checks; each names the field and raises at the first problem
# --------------------------------------------------------------------------------------------

def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _join(path, key):
    return "%s.%s" % (path, key) if path else key


def _obj(x, path, allowed):
    """x must be an object whose keys are all allowed, each given once."""
    if not isinstance(x, dict):
        _fail(path, "must be an object, not %s" % _kind(x))
    for k in x:
        if k not in allowed:
            hint = _close_match(k, allowed)
            _fail(_join(path, k), "unknown key%s (allowed: %s)"
                  % (" (did you mean %r?)" % hint if hint else "", ", ".join(allowed)))
    for k in getattr(x, "dups", ()):
        _fail(_join(path, k), "given twice in one object")
    return x


def _close_match(word, choices):
    import difflib
    m = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return m[0] if m else None


def _kind(x):
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "a boolean"
    if isinstance(x, (int, float)):
        return "a number"
    if isinstance(x, str):
        return "a string"
    if isinstance(x, list):
        return "a list"
    return "an object"


def _list(x, path, nonempty=False):
    if not isinstance(x, list):
        _fail(path, "must be a list, not %s" % _kind(x))
    if nonempty and not x:
        _fail(path, "must not be empty")
    return x


def _bool(x, path):
    if not isinstance(x, bool):
        _fail(path, "must be true or false, not %s" % _kind(x))
    return x


def _int(x, path, lo=None, hi=None, what="an integer"):
    if not _is_int(x):
        _fail(path, "must be %s, not %s" % (what, _show(x)))
    if lo is not None and x < lo:
        _fail(path, "%d is below %d" % (x, lo) if lo != 1 else "must be at least 1, not %d" % x)
    if hi is not None and x > hi:
        _fail(path, "%d is above the limit %d" % (x, hi))
    return x


def _num(x, path, positive=False, nonneg=False):
    if not _is_num(x):
        _fail(path, "must be a number, not %s" % _show(x))
    if positive and x <= 0:
        _fail(path, "must be positive, not %s" % _show(x))
    if nonneg and x < 0:
        _fail(path, "must not be negative (%s)" % _show(x))
    return x


def _show(x):
    if isinstance(x, (dict, list)):
        return _kind(x)
    try:
        s = json.dumps(x)
    except (TypeError, ValueError):
        s = repr(x)
    return s if len(s) <= 60 else s[:57] + "..."


def _name(x, path, what="name", slash_ok=False):
    """A name the C library accepts: a non-empty string of at most 255 bytes, no control
    characters, and (unless slash_ok) no '/'."""
    if not isinstance(x, str):
        _fail(path, "%s must be a string, not %s" % (what, _show(x)))
    if not x:
        _fail(path, "%s must not be empty" % what)
    if _has_surrogate(x):
        _fail(path, "%s %s holds a lone surrogate (\\u%04x), which is not a character"
              % (what, _show(x), _first_surrogate(x)))
    if len(x.encode("utf-8")) > MAX_NAME:
        _fail(path, "%s is longer than %d bytes" % (what, MAX_NAME))
    if any(ord(c) < 32 or ord(c) == 127 for c in x):
        _fail(path, "%s %s contains a control character" % (what, _show(x)))
    if not slash_ok and "/" in x:
        _fail(path, "%s %s contains '/'" % (what, _show(x)))
    return x


def _first_surrogate(x):
    return next(ord(c) for c in x if 0xD800 <= ord(c) <= 0xDFFF)


def _has_surrogate(x):
    """JSON lets a string hold "\\udc80", a half of a UTF-16 pair that UTF-8 cannot encode."""
    return any(0xD800 <= ord(c) <= 0xDFFF for c in x)


# --------------------------------------------------------------------------------------------
# The validated scenario
# --------------------------------------------------------------------------------------------

@dataclass
class NodeSpec:
    """A node listed in ``topology.nodes`` (generated nodes are not materialised)."""
    name: str
    path: Tuple[str, ...]
    gpus: int
    model: Optional[str] = None
    memory_gb: float = 0.0
    perf: Union[float, List[float]] = 1.0
    where: str = ""              # its JSON path, for messages
    node_type: object = None     # what the hwloc loader made of the node's `hwloc` file


@dataclass
class JobSpec:
    """A running job of ``state.jobs``, its devices resolved in rank order."""
    id: str
    job_class: str = "training"
    priority: int = 0
    tenant: str = "default"
    preemptible: bool = True
    migratable: bool = False
    checkpoint_s: float = 60.0
    devices: List[Tuple[str, int]] = field(default_factory=list)   # (node, index), rank order
    request: Optional[dict] = None   # normalised request dict (see _request), or None
    where: str = ""


@dataclass
class Scenario:
    """A validated scenario-v1 document, in plain data.

    Requests are normalised dicts with every field present (see :func:`_request`); devices are
    ``(node, index)`` pairs.
    """
    command: str
    base_dir: str
    levels: List[str]
    fabric: Dict[str, Tuple[str, float, float]]      # level or "cluster" -> (kind, gbps, latency)
    generate: Optional[dict]          # counts, gpus_per_node, model, memory_gb, perf
    nodes: List[NodeSpec]
    failure_domains: List[Tuple[str, str, str, int]]  # (kind, domain, node, device or -1)
    fd_kinds: List[str]
    jobs: List[JobSpec]
    down: List[Tuple[str, Optional[int]]]
    cordoned: List[Tuple[str, Optional[int]]]
    request: Optional[dict]
    policy: Optional[dict]
    replace: Optional[dict]                           # {"job": id, "failed": [(node, idx|None)]}
    _index: "NodeIndex" = field(default=None, repr=False)

    def node_gpus(self, name):
        """Devices of a node by name, or None for an unknown name."""
        return self._index.gpus(name)

    def has_node(self, name):
        return self._index.gpus(name) is not None

    def device_count(self):
        return self._index.device_count

    def node_count(self):
        return self._index.node_count

    def job(self, jid):
        for j in self.jobs:
            if j.id == jid:
                return j
        return None


class NodeIndex:
    """Node names to device counts, for listed and generated nodes.

    Generated nodes are never listed one by one: a name is recognised by its shape
    ``<level0><i>-<level1><j>-...`` with every index in range, so a 14,000-rack fleet costs
    nothing to validate.
    """

    def __init__(self, levels, gen):
        self.listed = {}
        self.node_count = 0
        self.device_count = 0
        self._gen = None
        if gen is not None:
            pattern = "-".join("%s(0|[1-9][0-9]*)" % re.escape(lv) for lv in levels)
            self._gen = (re.compile(pattern + r"\Z"), gen["counts"], gen["gpus_per_node"])
            n = 1
            for c in gen["counts"]:
                n *= c
            self.node_count = n
            self.device_count = n * gen["gpus_per_node"]

    def generated(self, name):
        if self._gen is None:
            return False
        rx, counts, _ = self._gen
        m = rx.match(name)
        return bool(m) and all(int(g) < c for g, c in zip(m.groups(), counts))

    def gpus(self, name):
        if not isinstance(name, str):
            return None
        spec = self.listed.get(name)
        if spec is not None:
            return spec.gpus
        if self.generated(name):
            return self._gen[2]
        return None

    def add(self, spec):
        self.listed[spec.name] = spec
        self.node_count += 1
        self.device_count += spec.gpus

    def ref(self, s, path, what="node or device"):
        """A node name or a device `node/index` -> (node, index or None)."""
        if not isinstance(s, str):
            _fail(path, "must be a node or device name, not %s" % _show(s))
        if self.gpus(s) is not None:
            return s, None
        node, sep, idx = s.rpartition("/")
        if sep and self.gpus(node) is not None:
            if re.fullmatch(r"[0-9]+", idx):
                i = int(idx)
                if i < self.gpus(node):
                    return node, i
                _fail(path, "node %s has %d devices, so there is no device %s"
                      % (node, self.gpus(node), s))
            _fail(path, "%s is not a device name (node/index)" % _show(s))
        _fail(path, "unknown %s %s" % (what, _show(s)))


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------

# The most bytes a scenario may have unless the caller says otherwise (`--max-input-bytes`): a
# 14,000-rack fleet listed node by node is about 40 MB, and /dev/zero must not eat the machine.
MAX_INPUT_BYTES = 256 * 1024 * 1024


def read_input(path_or_dash, stdin=None, max_bytes=MAX_INPUT_BYTES):
    """The text of a scenario file (or of standard input for ``-``) and the folder its relative
    paths start from. Reads at most ``max_bytes`` + 1 bytes: more is invalid input."""
    if path_or_dash == "-":
        import sys
        stream = stdin if stdin is not None else sys.stdin
        what = "standard input"
        try:
            data = getattr(stream, "buffer", stream).read(max_bytes + 1)
        except (OSError, UnicodeDecodeError) as e:
            _fail("", "cannot read standard input: %s" % e)
        base_dir = os.getcwd()
    else:
        what = path_or_dash
        try:
            with open(path_or_dash, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as e:
            _fail("", "cannot read %s: %s" % (path_or_dash, e.strerror or e))
        base_dir = os.path.dirname(os.path.abspath(path_or_dash))
    if len(data) > max_bytes:
        _fail("", "%s is larger than %d bytes, the most a scenario may have "
              "(--max-input-bytes sets it)" % (what, max_bytes))
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            _fail("", "%s is not UTF-8: %s" % (what, e))
    return data, base_dir


def load(path_or_dash, command, strict=False, stdin=None, hwloc=None,
         max_bytes=MAX_INPUT_BYTES):
    """Read a scenario file (or standard input for ``-``) and validate it for ``command``.
    ``hwloc`` is the loader of nodes' hwloc files (see :func:`parse`); a document of more than
    ``max_bytes`` bytes is invalid input."""
    text, base_dir = read_input(path_or_dash, stdin, max_bytes)
    return parse(parse_json(text), command, base_dir=base_dir, strict=strict, hwloc=hwloc)


def parse(doc, command, base_dir=".", strict=False, hwloc=None):
    """Validate a parsed document for ``command`` and return a :class:`Scenario`.

    Sections the command does not use are allowed and ignored; with ``strict`` they are
    validated as well. ``hwloc(xml_bytes, path)`` turns a node's hwloc file into
    ``(gpu_count, node_type)`` or raises ValueError with the reason; without it a node with
    ``hwloc`` is invalid input ("not supported by this build").
    """
    if command not in COMMANDS:
        raise ValueError("unknown command %r" % (command,))
    _obj(doc, "", TOP_KEYS)
    if "version" not in doc:
        _fail("version", "required (must be 1)")
    if not _is_int(doc["version"]) or doc["version"] != 1:
        _fail("version", "must be 1, not %s" % _show(doc["version"]))
    if "topology" not in doc:
        _fail("topology", "required")
    uses = set(TOP_KEYS) if strict else set(USES[command])
    sc = _topology(doc["topology"], command, base_dir, hwloc)
    if "state" in doc and "state" in uses:
        _state(doc["state"], sc)
    if "request" in uses:
        if "request" in doc:
            sc.request = _request(doc["request"], "request", sc, job=None)
        elif command in ("place", "defrag"):
            _fail("request", "required by %s" % command)
    if "policy" in uses and "policy" in doc:
        sc.policy = _policy(doc["policy"])
    elif command == "defrag":
        sc.policy = dict(POLICY_DEFAULTS)
    if "replace" in uses:
        if "replace" in doc:
            sc.replace = _replace(doc["replace"], sc)
        elif command == "replace":
            _fail("replace", "required by replace")
    return sc


# --------------------------------------------------------------------------------------------
# topology
# --------------------------------------------------------------------------------------------

def _topology(topo, command, base_dir, hwloc):
    p = "topology"
    _obj(topo, p, TOPOLOGY_KEYS)
    if "levels" not in topo:
        _fail(p + ".levels", "required")
    levels = _list(topo["levels"], p + ".levels", nonempty=True)
    if len(levels) > MAX_LEVELS:
        _fail(p + ".levels", "%d levels, at most %d are allowed" % (len(levels), MAX_LEVELS))
    seen = set()
    for i, lv in enumerate(levels):
        lp = "%s.levels[%d]" % (p, i)
        _name(lv, lp, "a level name")
        if lv == "cluster":
            _fail(lp, "'cluster' may not be a level name (it names the fabric between "
                      "top-level domains)")
        if lv in seen:
            _fail(lp, "level name %s is used twice" % _show(lv))
        seen.add(lv)
    levels = list(levels)

    fabric = {}
    if "fabric" in topo:
        fab = _obj(topo["fabric"], p + ".fabric", levels + ["cluster"])
        for lv, link in fab.items():
            fp = "%s.fabric.%s" % (p, lv)
            _obj(link, fp, FABRIC_KEYS)
            if lv == "cluster":
                kind, gbps, lat = FABRIC_DEFAULT_CLUSTER
            elif lv == levels[-1]:
                kind, gbps, lat = FABRIC_DEFAULT_NODE
            else:
                kind, gbps, lat = FABRIC_DEFAULT_LEVEL
            if "kind" in link:
                kind = link["kind"]
                if kind not in FABRIC_KINDS:
                    _fail(fp + ".kind", "unknown link kind %s (one of %s)"
                          % (_show(kind), ", ".join(FABRIC_KINDS)))
            if "gbps" in link:
                gbps = _num(link["gbps"], fp + ".gbps", positive=True)
            if "latency_us" in link:
                lat = _num(link["latency_us"], fp + ".latency_us", positive=True)
            fabric[lv] = (kind, float(gbps), float(lat))

    if "nodes" not in topo and "generate" not in topo:
        _fail(p, "needs nodes or generate (or both)")

    gen = None
    if "generate" in topo:
        gen = _generate(topo["generate"], levels)
    index = NodeIndex(levels, gen)

    nodes = []
    hw = _HwlocFiles(hwloc, base_dir)
    if "nodes" in topo:
        for i, n in enumerate(_list(topo["nodes"], p + ".nodes")):
            spec = _node(n, "%s.nodes[%d]" % (p, i), levels, index, hw)
            index.add(spec)
            nodes.append(spec)
            if index.device_count > MAX_DEVICES:
                _fail("%s.nodes[%d]" % (p, i), "the topology has more than %d devices"
                      % MAX_DEVICES)
    if index.node_count == 0:
        _fail(p + ".nodes", "the topology has no node")

    fds, kinds = [], []
    if "failure_domains" in topo:
        fds, kinds = _failure_domains(topo["failure_domains"], levels, index)

    return Scenario(command=command, base_dir=base_dir, levels=levels, fabric=fabric,
                    generate=gen, nodes=nodes, failure_domains=fds, fd_kinds=kinds, jobs=[],
                    down=[], cordoned=[], request=None, policy=None, replace=None, _index=index)


def _attrs(obj, p, gpus):
    """model, memory_gb and perf of a node or of `generate`."""
    model = None
    if "model" in obj:
        model = _name(obj["model"], p + ".model", "a model", slash_ok=True)
    mem = 0.0
    if "memory_gb" in obj:
        mem = float(_num(obj["memory_gb"], p + ".memory_gb", positive=True))
    perf = 1.0
    if "perf" in obj:
        v = obj["perf"]
        if isinstance(v, list):
            if len(v) != gpus:
                _fail(p + ".perf", "has %d values, the node has %d devices (one value per "
                      "device)" % (len(v), gpus))
            perf = [float(_num(x, "%s.perf[%d]" % (p, k), positive=True))
                    for k, x in enumerate(v)]
        elif _is_num(v):
            perf = float(_num(v, p + ".perf", positive=True))
        else:
            _fail(p + ".perf", "must be a positive number or a list with one per device, not %s"
                  % _show(v))
    return model, mem, perf


def _generate(gen, levels):
    p = "topology.generate"
    _obj(gen, p, GENERATE_KEYS)
    if "counts" not in gen:
        _fail(p + ".counts", "required")
    counts = _list(gen["counts"], p + ".counts")
    if len(counts) != len(levels):
        _fail(p + ".counts", "has %d counts, the topology has %d levels (one count per level)"
              % (len(counts), len(levels)))
    total = 1
    for i, c in enumerate(counts):
        _int(c, "%s.counts[%d]" % (p, i), lo=1, what="a positive integer")
        total *= c
        if total > MAX_DEVICES:
            _fail(p + ".counts", "generates more than %d nodes" % MAX_DEVICES)
    if "gpus_per_node" not in gen:
        _fail(p + ".gpus_per_node", "required")
    gpn = _int(gen["gpus_per_node"], p + ".gpus_per_node", lo=1, hi=MAX_NODE_DEVICES,
               what="a positive integer")
    if total * gpn > MAX_DEVICES:
        _fail(p + ".counts", "generates more than %d devices" % MAX_DEVICES)
    model, mem, perf = _attrs(gen, p, gpn)
    return {"counts": list(counts), "gpus_per_node": gpn, "model": model, "memory_gb": mem,
            "perf": perf}


class _HwlocFiles:
    """hwloc files of a scenario, each read and imported once (nodes often share one)."""

    def __init__(self, loader, base_dir):
        self.loader = loader
        self.base_dir = base_dir
        self.done = {}

    def get(self, rel, p):
        if self.loader is None:
            # Hook: without an importer (the library's tp_nodetype_from_hwloc_xml) a scenario
            # that needs one is refused rather than answered without the node's insides.
            _fail(p, "not supported by this build (no hwloc importer)")
        path = rel if os.path.isabs(rel) else os.path.normpath(os.path.join(self.base_dir, rel))
        if path not in self.done:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError as e:
                _fail(p, "cannot read %s (%s)" % (_show(rel), e.strerror or e))
            try:
                self.done[path] = self.loader(data, rel)
            except ValueError as e:
                _fail(p, "%s: %s" % (_show(rel), e))
        return self.done[path]


def _node(n, p, levels, index, hw):
    _obj(n, p, NODE_KEYS)
    if "name" not in n:
        _fail(p + ".name", "required")
    name = _name(n["name"], p + ".name", "a node name")
    if name in index.listed:
        _fail(p + ".name", "duplicate node name %s (also %s)"
              % (_show(name), index.listed[name].where or "listed before"))
    if index.generated(name):
        _fail(p + ".name", "duplicate node name %s (a generated node has it)" % _show(name))
    if "path" not in n:
        if len(levels) > 1:
            _fail(p + ".path", "required: %d domain names (%s)"
                  % (len(levels) - 1, ", ".join(levels[:-1])))
        path = []
    else:
        path = _list(n["path"], p + ".path")
    if len(path) != len(levels) - 1:
        _fail(p + ".path", "has %d names, needs %d (one per level above the node: %s)"
              % (len(path), len(levels) - 1, ", ".join(levels[:-1]) or "none"))
    for k, d in enumerate(path):
        _name(d, "%s.path[%d]" % (p, k), "a domain name")
    node_type = None
    if "hwloc" in n:
        if not isinstance(n["hwloc"], str) or not n["hwloc"] or _has_surrogate(n["hwloc"]):
            _fail(p + ".hwloc", "must be the path of an hwloc XML file")
        found, node_type = hw.get(n["hwloc"], p + ".hwloc")
        if "gpus" in n:
            gpus = _int(n["gpus"], p + ".gpus", lo=1, hi=MAX_NODE_DEVICES,
                        what="a positive integer")
            if gpus != found:
                _fail(p + ".gpus", "%d, but the hwloc file %s has %d GPUs"
                      % (gpus, _show(n["hwloc"]), found))
        gpus = found
    else:
        if "gpus" not in n:
            _fail(p + ".gpus", "required (the node's device count)")
        gpus = _int(n["gpus"], p + ".gpus", lo=1, hi=MAX_NODE_DEVICES,
                    what="a positive integer")
    model, mem, perf = _attrs(n, p, gpus)
    return NodeSpec(name=name, path=tuple(path), gpus=gpus, model=model, memory_gb=mem,
                    perf=perf, where=p, node_type=node_type)


def _failure_domains(fds, levels, index):
    p = "topology.failure_domains"
    if not isinstance(fds, dict):
        _fail(p, "must be an object, not %s" % _kind(fds))
    _obj(fds, p, list(fds))          # duplicate keys
    out, kinds = [], []
    for kind, doms in fds.items():
        kp = "%s.%s" % (p, kind)
        _name(kind, kp, "a failure-domain kind")
        if kind in levels:
            _fail(kp, "a failure-domain kind may not be a level name")
        if kind == "cluster":
            _fail(kp, "'cluster' may not be a failure-domain kind")
        if not isinstance(doms, dict):
            _fail(kp, "must be an object (domain name -> list of nodes or devices), not %s"
                  % _kind(doms))
        _obj(doms, kp, list(doms))
        kinds.append(kind)
        whole = {}        # node -> (domain, path) listed as a whole node
        single = {}       # (node, idx) -> (domain, path)
        per_node = {}     # node -> [(domain, path)] of its listed devices
        for dname, members in doms.items():
            dp = "%s.%s" % (kp, dname)
            _name(dname, dp, "a failure-domain name")
            _list(members, dp)
            for mi, m in enumerate(members):
                mp = "%s[%d]" % (dp, mi)
                node, idx = index.ref(m, mp)
                if idx is None:
                    prev = whole.get(node) or (per_node.get(node) or [None])[0]
                    if prev:
                        _fail(mp, "%s is listed twice under %s (also at %s)"
                              % (node, kind, prev[1]))
                    whole[node] = (dname, mp)
                else:
                    prev = single.get((node, idx)) or whole.get(node)
                    if prev:
                        _fail(mp, "%s/%d is listed twice under %s (also at %s)"
                              % (node, idx, kind, prev[1]))
                    single[(node, idx)] = (dname, mp)
                    per_node.setdefault(node, []).append((dname, mp))
                out.append((kind, dname, node, -1 if idx is None else idx))
    return out, kinds


# --------------------------------------------------------------------------------------------
# state
# --------------------------------------------------------------------------------------------

def _state(state, sc):
    p = "state"
    _obj(state, p, STATE_KEYS)
    for key in ("down", "cordoned"):
        if key in state:
            refs = []
            for i, r in enumerate(_list(state[key], "%s.%s" % (p, key))):
                refs.append(sc._index.ref(r, "%s.%s[%d]" % (p, key, i)))
            setattr(sc, key, refs)
    if "jobs" not in state:
        return
    jobs = _list(state["jobs"], p + ".jobs")
    ids = {}
    specs = []
    raw = []
    for i, j in enumerate(jobs):
        jp = "%s.jobs[%d]" % (p, i)
        _obj(j, jp, JOB_KEYS)
        if "id" not in j:
            _fail(jp + ".id", "required")
        jid = _name(j["id"], jp + ".id", "a job id", slash_ok=True)
        if jid in ids:
            _fail(jp + ".id", "duplicate job id %s (also state.jobs[%d].id)"
                  % (_show(jid), ids[jid]))
        ids[jid] = i
        spec = JobSpec(id=jid, where=jp)
        if "class" in j:
            spec.job_class = _class(j["class"], jp + ".class")
        if "priority" in j:
            spec.priority = _int(j["priority"], jp + ".priority", lo=I32_MIN, hi=I32_MAX)
        if "tenant" in j:
            spec.tenant = _name(j["tenant"], jp + ".tenant", "a tenant", slash_ok=True)
        if "preemptible" in j:
            spec.preemptible = _bool(j["preemptible"], jp + ".preemptible")
        if "migratable" in j:
            spec.migratable = _bool(j["migratable"], jp + ".migratable")
        if "checkpoint_s" in j:
            spec.checkpoint_s = float(_num(j["checkpoint_s"], jp + ".checkpoint_s", nonneg=True))
        if "devices" not in j:
            _fail(jp + ".devices", "required (node name -> device count or list of indices)")
        devs = j["devices"]
        if not isinstance(devs, dict):
            _fail(jp + ".devices", "must be an object (node name -> count or list of indices), "
                  "not %s" % _kind(devs))
        _obj(devs, jp + ".devices", list(devs))
        if not devs:
            _fail(jp + ".devices", "must not be empty")
        for node, v in devs.items():
            dp = "%s.devices.%s" % (jp, node)
            gpus = sc.node_gpus(node)
            if gpus is None:
                _fail(dp, "unknown node %s" % _show(node))
            if isinstance(v, list):
                if not v:
                    _fail(dp, "an empty list of devices")
                seen = set()
                for k, idx in enumerate(v):
                    if not _is_int(idx):
                        _fail("%s[%d]" % (dp, k), "must be a device index, not %s" % _show(idx))
                    if not 0 <= idx < gpus:
                        _fail("%s[%d]" % (dp, k), "device index %d is out of range (node %s "
                              "has %d devices)" % (idx, node, gpus))
                    if idx in seen:
                        _fail("%s[%d]" % (dp, k), "device index %d is listed twice" % idx)
                    seen.add(idx)
            elif _is_int(v):
                if not 1 <= v <= gpus:
                    _fail(dp, "count %d is out of range (node %s has %d devices)"
                          % (v, node, gpus))
            else:
                _fail(dp, "must be a device count or a list of device indices, not %s"
                      % _show(v))
        specs.append(spec)
        raw.append(j)
    sc.jobs = specs
    _resolve_jobs(sc, raw)
    # A job's own request is checked once every job is known (its colocate may name another).
    for spec, j in zip(specs, raw):
        if "request" in j:
            spec.request = _request(j["request"], spec.where + ".request", sc, job=spec)


def _resolve_jobs(sc, raw):
    """Explicit device lists first, then, in job order, counts take the lowest free indices.

    The second job that claims a device already held is the one named.
    """
    held = {}                                   # (node, idx) -> job id
    per = [dict() for _ in raw]                 # job -> node -> [idx]
    for ji, (spec, j) in enumerate(zip(sc.jobs, raw)):
        for node, v in j["devices"].items():
            if isinstance(v, list):
                for k, idx in enumerate(v):
                    if (node, idx) in held:
                        _fail("%s.devices.%s[%d]" % (spec.where, node, k),
                              "device %s/%d is already held by job %s"
                              % (node, idx, held[(node, idx)]))
                    held[(node, idx)] = spec.id
                per[ji][node] = list(v)
    for ji, (spec, j) in enumerate(zip(sc.jobs, raw)):
        for node, v in j["devices"].items():
            if _is_int(v):
                got = [i for i in range(sc.node_gpus(node)) if (node, i) not in held][:v]
                if len(got) < v:
                    holders = sorted({held[(node, i)] for i in range(sc.node_gpus(node))
                                      if (node, i) in held})
                    _fail("%s.devices.%s" % (spec.where, node),
                          "%d devices wanted, only %d of node %s are not already held (by %s)"
                          % (v, len(got), node, ", ".join(holders)))
                for i in got:
                    held[(node, i)] = spec.id
                per[ji][node] = got
    for ji, (spec, j) in enumerate(zip(sc.jobs, raw)):
        spec.devices = [(node, i) for node in j["devices"] for i in per[ji][node]]


def _class(v, p):
    if v not in CLASSES:
        _fail(p, "unknown class %s (one of %s)" % (_show(v), ", ".join(CLASSES)))
    return v


# --------------------------------------------------------------------------------------------
# request
# --------------------------------------------------------------------------------------------

def _request(req, p, sc, job):
    """Validate a request (the top-level one, or a running job's own when ``job`` is given) and
    return it normalised: every key present, levels as names, defaults filled in."""
    _obj(req, p, REQUEST_KEYS)
    levels = sc.levels
    li = {lv: i for i, lv in enumerate(levels)}
    out = {"id": None, "class": "training", "priority": 0, "tenant": None, "count": None,
           "group_size": 1, "group_level": None, "required": None, "preferred": None,
           "slices": [], "balanced": False, "max_per_domain": [], "spread": None,
           "colocate": None, "exclusive": None, "select": None, "x_gpu_nic_pairs": False}
    if job is not None:
        out.update(id=job.id, tenant=job.tenant, priority=job.priority)
        out["class"] = job.job_class
    if "id" in req:
        out["id"] = _name(req["id"], p + ".id", "a job id", slash_ok=True)
    if "class" in req:
        out["class"] = _class(req["class"], p + ".class")
    if "priority" in req:
        out["priority"] = _int(req["priority"], p + ".priority", lo=I32_MIN, hi=I32_MAX)
    if "tenant" in req:
        out["tenant"] = _name(req["tenant"], p + ".tenant", "a tenant", slash_ok=True)
    if job is not None:                  # a job's shape is the job's: its id and tenant win
        out.update(id=job.id, tenant=job.tenant)

    if "count" in req:
        count = _int(req["count"], p + ".count", lo=1, hi=I32_MAX, what="a positive integer")
    elif job is not None:
        count = len(job.devices)         # a running job's shape defaults to what it holds
    else:
        _fail(p + ".count", "required (the number of devices wanted)")
    out["count"] = count

    def level(v, path, fd_ok=False):
        if isinstance(v, str) and (v in li or (fd_ok and v in sc.fd_kinds)):
            return v
        allowed = levels + (sc.fd_kinds if fd_ok else [])
        _fail(path, "unknown level %s (one of %s)" % (_show(v), ", ".join(allowed)))

    gsize, glevel = 1, levels[-1]
    if "group" in req:
        gp = p + ".group"
        g = _obj(req["group"], gp, GROUP_KEYS)
        if "size" in g:
            gsize = _int(g["size"], gp + ".size", lo=1, hi=I32_MAX, what="a positive integer")
        if "level" in g:
            glevel = level(g["level"], gp + ".level")
        out["group_level"] = glevel
    out["group_size"] = gsize
    if count % gsize:
        _fail(p + ".count", "%d is not a multiple of %s.group.size %d" % (count, p, gsize))

    if "required" in req:
        out["required"] = level(req["required"], p + ".required")
    if "preferred" in req:
        out["preferred"] = level(req["preferred"], p + ".preferred")
    if out["required"] and out["preferred"] and li[out["preferred"]] <= li[out["required"]]:
        _fail(p + ".preferred", "%s must be below the required level %s"
              % (_show(out["preferred"]), _show(out["required"])))

    if "slices" in req:
        sl = _list(req["slices"], p + ".slices", nonempty=True)
        prev = None
        for i, s in enumerate(sl):
            sp = "%s.slices[%d]" % (p, i)
            _obj(s, sp, SLICE_KEYS)
            if "level" not in s:
                _fail(sp + ".level", "required")
            if "size" not in s:
                _fail(sp + ".size", "required")
            lv = level(s["level"], sp + ".level")
            size = _int(s["size"], sp + ".size", lo=1, hi=I32_MAX, what="a positive integer")
            if out["required"] and li[lv] < li[out["required"]]:
                _fail(sp + ".level", "%s is above the required level %s"
                      % (_show(lv), _show(out["required"])))
            if li[lv] > li[glevel]:
                _fail(sp + ".level", "%s is below the group level %s" % (_show(lv), _show(glevel)))
            if prev and li[lv] <= li[prev[0]]:
                _fail(sp + ".level", "slice levels must go strictly downwards (%s after %s)"
                      % (_show(lv), _show(prev[0])))
            if count % size:
                _fail(sp + ".size", "%d does not divide count %d" % (size, count))
            if size % gsize:
                _fail(sp + ".size", "%d is not a multiple of the group size %d" % (size, gsize))
            if prev and prev[1] % size:
                _fail(sp + ".size", "%d does not divide the outer slice's size %d"
                      % (size, prev[1]))
            out["slices"].append((lv, size))
            prev = (lv, size)

    if "balanced" in req:
        out["balanced"] = _bool(req["balanced"], p + ".balanced")
    if "x_gpu_nic_pairs" in req:
        out["x_gpu_nic_pairs"] = _bool(req["x_gpu_nic_pairs"], p + ".x_gpu_nic_pairs")

    if "max_per_domain" in req:
        for i, m in enumerate(_list(req["max_per_domain"], p + ".max_per_domain")):
            mp = "%s.max_per_domain[%d]" % (p, i)
            _obj(m, mp, CAP_KEYS)
            if "level" not in m:
                _fail(mp + ".level", "required")
            lv = level(m["level"], mp + ".level", fd_ok=True)
            has = [k for k in ("devices", "groups") if k in m]
            if len(has) != 1:
                _fail(mp, "needs exactly one of devices, groups")
            n = _int(m[has[0]], "%s.%s" % (mp, has[0]), lo=1, hi=U32_MAX,
                     what="a positive integer")
            out["max_per_domain"].append((lv, n if has[0] == "devices" else 0,
                                          n if has[0] == "groups" else 0))

    if "spread" in req:
        sp = p + ".spread"
        s = _obj(req["spread"], sp, SPREAD_KEYS)
        for k in SPREAD_KEYS:
            if k not in s:
                _fail("%s.%s" % (sp, k), "required")
        out["spread"] = (level(s["level"], sp + ".level", fd_ok=True),
                         _int(s["min_domains"], sp + ".min_domains", lo=1, hi=U32_MAX,
                              what="a positive integer"))

    if "colocate" in req:
        cp = p + ".colocate"
        c = _obj(req["colocate"], cp, COLOCATE_KEYS)
        for k in COLOCATE_KEYS:
            if k not in c:
                _fail("%s.%s" % (cp, k), "required")
        jid = _name(c["job"], cp + ".job", "a job id", slash_ok=True)
        if job is None and sc.job(jid) is None:
            _fail(cp + ".job", "no running job %s" % _show(jid))
        if job is not None and jid == job.id:
            _fail(cp + ".job", "a job cannot be colocated with itself")
        out["colocate"] = (jid, level(c["level"], cp + ".level"))

    if "exclusive" in req:
        out["exclusive"] = level(req["exclusive"], p + ".exclusive")

    if "select" in req:
        sp = p + ".select"
        s = _obj(req["select"], sp, SELECT_KEYS)
        sel = {"model": None, "min_perf": 0.0, "min_memory_gb": 0.0, "nodes": None}
        if "model" in s:
            sel["model"] = _name(s["model"], sp + ".model", "a model", slash_ok=True)
        if "min_perf" in s:
            sel["min_perf"] = float(_num(s["min_perf"], sp + ".min_perf", nonneg=True))
        if "min_memory_gb" in s:
            sel["min_memory_gb"] = float(_num(s["min_memory_gb"], sp + ".min_memory_gb",
                                              nonneg=True))
        if "nodes" in s:
            names = _list(s["nodes"], sp + ".nodes")
            if not names:
                _fail(sp + ".nodes", "an empty list allows no node (leave it out to allow all)")
            for i, n in enumerate(names):
                np_ = "%s.nodes[%d]" % (sp, i)
                if not isinstance(n, str):
                    _fail(np_, "must be a node name, not %s" % _show(n))
                if not sc.has_node(n):
                    _fail(np_, "unknown node %s" % _show(n))
            sel["nodes"] = list(dict.fromkeys(names))
        out["select"] = sel
    return out


# --------------------------------------------------------------------------------------------
# policy, replace
# --------------------------------------------------------------------------------------------

def _policy(pol):
    p = "policy"
    _obj(pol, p, POLICY_KEYS)
    out = dict(POLICY_DEFAULTS)
    for k in ("migrate", "preempt", "allow_interactive"):
        if k in pol:
            out[k] = _bool(pol[k], "%s.%s" % (p, k))
    if "max_moves" in pol:
        out["max_moves"] = _int(pol["max_moves"], p + ".max_moves", lo=0, hi=U32_MAX,
                                what="a non-negative integer")
    if "max_cost_s" in pol:
        out["max_cost_s"] = float(_num(pol["max_cost_s"], p + ".max_cost_s", nonneg=True))
    if "min_priority_gap" in pol:
        gap = _num(pol["min_priority_gap"], p + ".min_priority_gap", nonneg=True)
        if gap > I32_MAX:       # the C field is an int; a gap beyond it can never be met anyway
            _fail(p + ".min_priority_gap", "%s is above the limit %d" % (_show(gap), I32_MAX))
        out["min_priority_gap"] = gap
    return out


def _replace(rep, sc):
    p = "replace"
    _obj(rep, p, REPLACE_KEYS)
    if "job" not in rep:
        _fail(p + ".job", "required")
    jid = _name(rep["job"], p + ".job", "a job id", slash_ok=True)
    if sc.job(jid) is None:
        _fail(p + ".job", "no running job %s" % _show(jid))
    if "failed" not in rep:
        _fail(p + ".failed", "required (the failed nodes or devices)")
    failed = []
    for i, r in enumerate(_list(rep["failed"], p + ".failed", nonempty=True)):
        failed.append(sc._index.ref(r, "%s.failed[%d]" % (p, i)))
    return {"job": jid, "failed": failed}
