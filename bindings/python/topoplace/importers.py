# SPDX-License-Identifier: MIT
"""Importers of what schedulers print, and answers in their terms.

- :func:`topology_from_slurm`: a :class:`~topoplace.topology.Topology` from Slurm's
  ``topology.conf`` or ``topology.yaml`` (the C importers), with Slurm's warnings.
- ``python3 -m topoplace import slurm --topology FILE [--nodes FILE] [--jobs FILE]
  [--gpus-per-node N]`` and ``import k8s --nodes FILE [--pods FILE] [--topology FILE |
  --levels L1,L2,...]``: a scenario-v1 document on standard output (exit 0), or one JSON error
  object naming the file, the line or JSON path, and why (exit 2). Warnings (what Slurm accepts
  with a warning, nodes left out) go to standard error, one per line.
- :func:`slurm_answer` and :func:`kueue_answer`: a placement as ``sbatch --nodelist`` and GPU
  indices, or as a Kueue TopologyAssignment (``--format slurm`` / ``--format kueue``).

The readers follow the JSON that Slurm and kubectl print; docs/importers.md lists the versions
and what is left out.
"""

import json
import re
import sys

__all__ = ["topology_from_slurm", "hostlist_expand", "hostlist_compress", "ImportError_",
           "slurm_scenario", "k8s_scenario", "slurm_answer", "kueue_answer", "main"]

EXIT_OK, EXIT_INVALID = 0, 2


class ImportError_(Exception):
    """An input the importers refuse: ``file``, ``where`` (``line 3`` or a JSON path such as
    ``nodes[2].gres``) and the reason."""

    def __init__(self, file, where, why):
        super().__init__("%s: %s: %s" % (file, where, why) if where else "%s: %s" % (file, why))
        self.file, self.where, self.why = file, where, why

    def json(self):
        doc = {"status": "invalid", "message": str(self), "file": self.file}
        m = re.match(r"(?:topology '[^']*': )?line (\d+)", self.where or "")
        if m:
            doc["line"] = int(m.group(1))
        elif self.where:
            doc["path"] = self.where
        return doc


# --------------------------------------------------------------------------------------------
# hostlists, as Slurm writes them
# --------------------------------------------------------------------------------------------

def _split_top(expr):
    """Split at commas outside brackets."""
    out, cur, depth = [], "", 0
    for ch in expr:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [s for s in out if s]


def hostlist_expand(expr):
    """``gpu[001-003],x`` -> ``['gpu001', 'gpu002', 'gpu003', 'x']`` (several brackets per
    name, the first varying slowest; zero padding from each range's first number). Raises
    ValueError on a malformed expression."""
    names = []
    for term in _split_top(expr.strip()):
        parts = re.split(r"(\[[^\[\]]*\])", term)
        if any(("[" in p or "]" in p) and not re.fullmatch(r"\[[^\[\]]*\]", p) for p in parts):
            raise ValueError("malformed hostlist %r" % expr)
        seqs = []
        for p in parts:
            if not p.startswith("["):
                seqs.append([p])
                continue
            vals = []
            for r in p[1:-1].split(","):
                m = re.fullmatch(r"(\d+)(?:-(\d+))?", r)
                if not m:
                    raise ValueError("malformed hostlist %r" % expr)
                lo, hi = m.group(1), m.group(2) or m.group(1)
                if int(hi) < int(lo) or int(hi) - int(lo) > 1 << 20:
                    raise ValueError("malformed hostlist %r" % expr)
                vals += ["%0*d" % (len(lo), v) for v in range(int(lo), int(hi) + 1)]
            seqs.append(vals)
        acc = [""]
        for s in seqs:
            acc = [a + b for a in acc for b in s]
        names += acc
    return names


def hostlist_compress(names):
    """The shortest-form hostlist Slurm writes for names in this order: runs of one prefix and
    consecutive numbers of one width in brackets (``gpu[001-004,007],login``). Order is kept:
    a name is only joined with its neighbours, so the list expands back to the same order."""
    out = []
    i = 0
    while i < len(names):
        m = re.fullmatch(r"(.*?)(\d+)", names[i])
        if not m:
            out.append(names[i])
            i += 1
            continue
        prefix, width = m.group(1), len(m.group(2))
        nums = [m.group(2)]
        j = i + 1
        while j < len(names):
            m2 = re.fullmatch(r"(.*?)(\d+)", names[j])
            if not m2 or m2.group(1) != prefix or len(m2.group(2)) != width \
                    or int(m2.group(2)) <= int(nums[-1]):
                break
            nums.append(m2.group(2))
            j += 1
        if len(nums) == 1:
            out.append(names[i])
        else:
            runs, k = [], 0
            while k < len(nums):
                e = k
                while e + 1 < len(nums) and int(nums[e + 1]) == int(nums[e]) + 1:
                    e += 1
                runs.append(nums[k] if e == k else "%s-%s" % (nums[k], nums[e]))
                k = e + 1
            out.append("%s[%s]" % (prefix, ",".join(runs)))
        i = j
    return ",".join(out)


def _index_list(text):
    """``0-1,3`` -> [0, 1, 3]."""
    out = []
    for r in text.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", r.strip())
        if not m:
            raise ValueError(text)
        out += range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1)
    return out


# --------------------------------------------------------------------------------------------
# Slurm topology through the C importers
# --------------------------------------------------------------------------------------------

def looks_like_yaml(text):
    for line in text.splitlines():
        s = line.strip()
        if s and not s.startswith("#"):
            return s.startswith("---") or s.startswith("- topology:") or \
                s.startswith("topology:")
    return False


def topology_from_slurm(text, gpus_per_node=1, format=None, topology=None):
    """A Topology from the text of a Slurm ``topology.conf`` (``format="conf"``) or
    ``topology.yaml`` (``"yaml"``; None: detected from the text), every node with
    ``gpus_per_node`` GPUs; ``topology`` names the topology of a YAML file to read (default: its
    ``cluster_default`` one). Returns ``(topology, warnings)``, the warnings a list of strings
    ("line 3: switch 'l' has several parents ..."). Raises :class:`~topoplace.errors.ParseError`
    (its message names the line) and the other errors of the C importers."""
    from . import _defaults
    from ._core import _own, ffi, lib
    from .errors import check
    from .topology import Topology
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if format is None:
        format = "yaml" if looks_like_yaml(text) else "conf"
    if format not in ("conf", "yaml"):
        raise ValueError("format %r is not 'conf' or 'yaml'" % (format,))
    data = text.encode("utf-8")
    opts = _defaults.c_init("slurm_options")
    warn = ffi.new("char[]", 1 << 16)
    opts.warnbuf = warn
    opts.warnlen = 1 << 16
    name = ffi.new("char[]", topology.encode("utf-8")) if topology is not None else ffi.NULL
    opts.topology = name
    out = ffi.new("tp_topology_builder **")
    err = ffi.new("char[]", 1024)
    fn = lib.tp_topology_builder_from_slurm_yaml if format == "yaml" else \
        lib.tp_topology_builder_from_slurm_ext
    rc = fn(out, data, len(data), gpus_per_node, ffi.NULL, opts, err, 1024)
    check(rc, None, ffi.string(err).decode("utf-8", "replace"))
    b = _own(out[0], lib.tp_topology_builder_destroy)
    tout = ffi.new("tp_topology **")
    check(lib.tp_topology_build(b, tout), None,
          ffi.string(lib.tp_topology_builder_errmsg(b)).decode("utf-8", "replace"))
    warnings = [w for w in ffi.string(warn).decode("utf-8", "replace").split("\n") if w]
    return Topology._wrap(_own(tout[0], lib.tp_topology_destroy)), warnings


def _topology_nodes(topo):
    """(name, path) of every node of a topology, in its order."""
    out = []
    for n in range(topo.node_count):
        lv = topo.node_level
        path = [topo.domain_name(l, topo.node_domain(n, l)) for l in range(lv)]
        out.append((topo.node_name(n), path))
    return out


# --------------------------------------------------------------------------------------------
# Slurm state: scontrol show nodes --json / sinfo --json, squeue --json / scontrol show jobs
# --------------------------------------------------------------------------------------------

# Node states (base and flags) as Slurm names them; DOWN, FAIL, FUTURE and NOT_RESPONDING make a
# node down, DRAIN / DRAINING / DRAINED / MAINTENANCE / REBOOT_* / POWER* cordoned.
_DOWN = {"DOWN", "FAIL", "FAILING", "FUTURE", "NOT_RESPONDING", "UNKNOWN"}
_CORDON = {"DRAIN", "DRAINING", "DRAINED", "MAINTENANCE", "RESERVED", "REBOOT_REQUESTED",
           "REBOOT_ISSUED", "POWER_DOWN", "POWERING_DOWN", "POWERED_DOWN", "POWERING_UP",
           "PLANNED"}
_KNOWN = _DOWN | _CORDON | {"IDLE", "ALLOCATED", "MIXED", "COMPLETING", "CLOUD", "DYNAMIC",
                            "DYNAMIC_FUTURE", "DYNAMIC_NORM", "INVALID_REG", "POWER_UP",
                            "RESUME", "UNDRAIN", "BLOCKED", "END", "INVALID", "REBOOT",
                            "REBOOT_CANCEL", "POWER_DRAIN", "NO_RESPOND", "COMPLETE"}


def _load_json(path, text):
    try:
        return json.loads(text)
    except ValueError as e:
        line = getattr(e, "lineno", None)
        raise ImportError_(path, "line %d" % line if line else "", "not valid JSON: %s"
                           % getattr(e, "msg", str(e)))


def _states(node, where, path):
    """The upper-case state words of a node: 22.05 prints "state": "idle" and
    "state_flags": [...]; 23.02 and later "state": ["IDLE", "DRAIN"]."""
    st = node.get("state", [])
    words = [st] if isinstance(st, str) else st
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ImportError_(path, where + ".state", "expected a string or a list of strings")
    flags = node.get("state_flags", [])
    if not isinstance(flags, list):
        raise ImportError_(path, where + ".state_flags", "expected a list of strings")
    out = set()
    for w in words + flags:
        for part in re.split(r"[+ ]", str(w).upper()):
            part = part.rstrip("*~#!%$@^-")
            if part:
                out.add(part)
    unknown = sorted(out - _KNOWN)
    if unknown:
        raise ImportError_(path, where + ".state", "'%s' is not a Slurm node state"
                           % unknown[0].lower())
    return out


def gres_gpus(gres):
    """GPUs in a Slurm GRES string: ``gpu:4``, ``gpu:a100:8(S:0-1)``, ``gpu:h100:4,nic:1``
    -> 4, 8, 4. None when the string names no GPU; raises ValueError when malformed."""
    total = None
    for item in _split_top(gres.replace("(", "[").replace(")", "]")) if gres else []:
        item = re.sub(r"\[.*\]$", "", item)
        fields = item.split(":")
        if fields[0] != "gpu" and not fields[0].startswith("gres/gpu"):
            continue
        count = fields[-1] if len(fields) > 1 else "1"
        m = re.fullmatch(r"(\d+)([KMG]?)", count)
        if not m:
            if len(fields) == 2:      # gpu:a100 means one a100
                count, m = "1", re.fullmatch(r"(\d+)()", "1")
            else:
                raise ValueError(gres)
        total = (total or 0) + int(m.group(1)) * {"": 1, "K": 1024, "M": 1 << 20,
                                                  "G": 1 << 30}[m.group(2)]
    return total


def read_slurm_nodes(path, text):
    """{name: {"gpus": n or None, "down": bool, "cordoned": bool}} from ``scontrol show nodes
    --json`` (Slurm 23.02+) or ``sinfo --json`` (22.05 and later): a top-level ``nodes``
    list."""
    doc = _load_json(path, text)
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(nodes, list):
        raise ImportError_(path, "nodes", "expected the 'nodes' list that scontrol show nodes "
                           "--json and sinfo --json print")
    out = {}
    for i, n in enumerate(nodes):
        where = "nodes[%d]" % i
        if not isinstance(n, dict) or not isinstance(n.get("name"), str) or not n["name"]:
            raise ImportError_(path, where + ".name", "expected a node name")
        states = _states(n, where, path)
        gres = n.get("gres", "")
        if not isinstance(gres, str):
            raise ImportError_(path, where + ".gres", "expected a GRES string such as 'gpu:4'")
        try:
            gpus = gres_gpus(gres)
        except ValueError:
            raise ImportError_(path, where + ".gres", "'%s' is not a GRES string such as "
                               "'gpu:a100:4(S:0-1)'" % gres)
        if n["name"] in out:
            raise ImportError_(path, where + ".name", "node '%s' is listed twice" % n["name"])
        out[n["name"]] = {"gpus": gpus, "down": bool(states & _DOWN),
                          "cordoned": bool(states & _CORDON) and not states & _DOWN}
    return out


def _job_state(job, where, path):
    st = job.get("job_state")
    words = [st] if isinstance(st, str) else st
    if not isinstance(words, list) or not words or not all(isinstance(w, str) for w in words):
        raise ImportError_(path, where + ".job_state", "expected a job state such as "
                           "'RUNNING'")
    return {w.upper() for w in words}


def _job_gpus(job, nodes, where, path):
    """{node: [indices] or count} of a running job: ``gres_detail`` (one entry per node, in
    the order of its hostlist: ``gpu:a100:2(IDX:0-1)``), else the GPUs of ``tres_per_node`` /
    ``tres_alloc_str`` (``gres/gpu=8``) split evenly over its nodes."""
    detail = job.get("gres_detail")
    if isinstance(detail, list) and detail:
        if len(detail) != len(nodes):
            raise ImportError_(path, where + ".gres_detail", "%d entries for %d nodes"
                               % (len(detail), len(nodes)))
        out = {}
        for k, (node, d) in enumerate(zip(nodes, detail)):
            m = re.search(r"gpu[^,(]*\((?:[^)]*?)IDX:([0-9,\-]+)", d if isinstance(d, str) else "")
            if m:
                out[node] = _index_list(m.group(1))
            elif isinstance(d, str) and "gpu" not in d:
                continue
            else:
                raise ImportError_(path, "%s.gres_detail[%d]" % (where, k),
                                   "'%s' is not a GRES detail such as 'gpu:a100:2(IDX:0-1)'" % d)
        return out
    for key in ("tres_per_node", "tres_alloc_str"):
        t = job.get(key)
        if isinstance(t, str):
            m = re.search(r"gres/gpu(?::[^=,]+)?[=:](\d+)", t)
            if m:
                n = int(m.group(1))
                per = n if key == "tres_per_node" else n // max(1, len(nodes))
                return {node: per for node in nodes} if per else {}
    return {}


def read_slurm_jobs(path, text):
    """[(job id, {node: indices or count})] of the RUNNING jobs of ``squeue --json`` or
    ``scontrol show jobs --json`` (a top-level ``jobs`` list); jobs without GPUs are left
    out (they hold no device of the scenario)."""
    doc = _load_json(path, text)
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not isinstance(jobs, list):
        raise ImportError_(path, "jobs", "expected the 'jobs' list that squeue --json prints")
    out = []
    for i, j in enumerate(jobs):
        where = "jobs[%d]" % i
        if not isinstance(j, dict):
            raise ImportError_(path, where, "expected a job object")
        if "RUNNING" not in _job_state(j, where, path):
            continue
        jid = j.get("job_id")
        if not isinstance(jid, int) or isinstance(jid, bool):
            raise ImportError_(path, where + ".job_id", "expected a job id number")
        het = j.get("het_job_offset")
        name = "%d+%d" % (j.get("het_job_id"), het) if isinstance(het, int) and \
            j.get("het_job_id") else str(jid)
        if isinstance(j.get("array_task_id"), int) and j.get("array_job_id"):
            name = "%d_%d" % (j["array_job_id"], j["array_task_id"])
        hl = j.get("nodes")
        if not isinstance(hl, str) or not hl:
            raise ImportError_(path, where + ".nodes", "a running job without its hostlist")
        try:
            nodes = hostlist_expand(hl)
        except ValueError as e:
            raise ImportError_(path, where + ".nodes", str(e))
        gpus = _job_gpus(j, nodes, where, path)
        if gpus:
            out.append((name, gpus, where))
    return out


def slurm_scenario(topology_file, topology_text, nodes=None, jobs=None, gpus_per_node=None,
                   topology_name=None):
    """A scenario-v1 document (a dict) and the warnings, from the texts of a Slurm topology
    file, ``scontrol show nodes --json`` (optional: ``(file, text)``) and ``squeue --json``
    (optional: ``(file, text)``). A node's GPUs are its GRES count, else ``gpus_per_node``."""
    from . import errors
    try:
        topo, warnings = topology_from_slurm(topology_text, 1, topology=topology_name)
    except errors.TopoplaceError as e:
        m = re.match(r"((?:topology '[^']*': )?line \d+): (.*)", str(e), re.S)
        raise ImportError_(topology_file, m.group(1) if m else "", m.group(2) if m else str(e))
    state = read_slurm_nodes(*nodes) if nodes else {}
    doc_nodes, down, cordoned = [], [], []
    for name, path in _topology_nodes(topo):
        info = state.get(name)
        if info is None and nodes:
            warnings.append("%s: node '%s' of the topology is not in %s; it gets %s GPUs"
                            % (topology_file, name, nodes[0], gpus_per_node))
        g = info["gpus"] if info and info["gpus"] else gpus_per_node
        if not g:
            raise ImportError_(nodes[0] if info else topology_file, name,
                               "node '%s' has no GPU GRES and no --gpus-per-node was given"
                               % name)
        doc_nodes.append({"name": name, "path": path, "gpus": g})
        if info and info["down"]:
            down.append(name)
        elif info and info["cordoned"]:
            cordoned.append(name)
    known = {n["name"]: n["gpus"] for n in doc_nodes}
    for name in state:
        if name not in known:
            warnings.append("%s: node '%s' is in no switch or block of %s; left out"
                            % (nodes[0], name, topology_file))
    doc_jobs = []
    for jid, gpus, where in (read_slurm_jobs(*jobs) if jobs else []):
        devs = {}
        for node, g in gpus.items():
            if node not in known:
                raise ImportError_(jobs[0], where + ".nodes", "job %s runs on node '%s', "
                                   "which is not in the topology" % (jid, node))
            if isinstance(g, list) and any(i >= known[node] for i in g):
                raise ImportError_(jobs[0], where + ".gres_detail", "job %s holds GPU %d of "
                                   "node '%s', which has %d" % (jid, max(g), node, known[node]))
            devs[node] = g if isinstance(g, list) else min(g, known[node])
        doc_jobs.append({"id": jid, "devices": devs})
    doc = {"version": 1, "topology": {"levels": list(topo.levels), "nodes": doc_nodes}}
    st = {k: v for k, v in (("jobs", doc_jobs), ("down", down), ("cordoned", cordoned)) if v}
    if st:
        doc["state"] = st
    return doc, warnings


# --------------------------------------------------------------------------------------------
# the command line: python3 -m topoplace import slurm|k8s ...
# --------------------------------------------------------------------------------------------

def _read(path, what):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ImportError_(path, "", "cannot read the %s file: %s" % (what, e.strerror or e))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ImportError_(path, "line %d" % line, "not UTF-8 text")


def _import_parser():
    import argparse

    class P(argparse.ArgumentParser):
        def error(self, message):
            raise ImportError_("(command line)", "", "usage: %s" % message)

    p = P(prog="python3 -m topoplace import",
          description="Turn what a scheduler prints into a scenario-v1 document.")
    sub = p.add_subparsers(dest="source", required=True)
    s = sub.add_parser("slurm", help="topology.conf / topology.yaml, scontrol show nodes "
                       "--json, squeue --json")
    s.add_argument("--topology", required=True, metavar="FILE",
                   help="topology.conf or topology.yaml")
    s.add_argument("--topology-name", metavar="NAME",
                   help="the topology of a topology.yaml to read (default: cluster_default)")
    s.add_argument("--nodes", metavar="FILE", help="scontrol show nodes --json or sinfo --json")
    s.add_argument("--jobs", metavar="FILE", help="squeue --json or scontrol show jobs --json")
    s.add_argument("--gpus-per-node", type=int, metavar="N",
                   help="GPUs of a node whose GRES does not say")
    k = sub.add_parser("k8s", help="kubectl get nodes -o json, kubectl get pods -A -o json, "
                       "a Kueue Topology")
    k.add_argument("--nodes", required=True, metavar="FILE", help="kubectl get nodes -o json")
    k.add_argument("--pods", metavar="FILE", help="kubectl get pods -A -o json")
    g = k.add_mutually_exclusive_group(required=True)
    g.add_argument("--topology", metavar="FILE", help="a Kueue Topology object (JSON)")
    g.add_argument("--levels", metavar="L1,L2,...", help="node label keys, outermost first")
    k.add_argument("--group-label", metavar="KEY",
                   help="group pods into jobs by this label (default: their owner)")
    return p


def run_import(argv, warn=None):
    """``import`` with argv (after ``import``): returns (exit status, document)."""
    warn = warn if warn is not None else sys.stderr
    try:
        a = _import_parser().parse_args(argv)
        if a.source == "slurm":
            if a.gpus_per_node is not None and not 1 <= a.gpus_per_node <= 256:
                raise ImportError_("(command line)", "--gpus-per-node",
                                   "%d is not in 1..256" % a.gpus_per_node)
            nodes = (a.nodes, _read(a.nodes, "nodes")) if a.nodes else None
            jobs = (a.jobs, _read(a.jobs, "jobs")) if a.jobs else None
            doc, warnings = slurm_scenario(a.topology, _read(a.topology, "topology"), nodes,
                                           jobs, a.gpus_per_node, a.topology_name)
        else:
            doc, warnings = k8s_scenario(
                (a.nodes, _read(a.nodes, "nodes")),
                (a.pods, _read(a.pods, "pods")) if a.pods else None,
                (a.topology, _read(a.topology, "Kueue Topology")) if a.topology else None,
                a.levels.split(",") if a.levels else None, a.group_label)
    except ImportError_ as e:
        return EXIT_INVALID, e.json()
    for w in warnings:
        warn.write("warning: %s\n" % w)
    return EXIT_OK, doc


def main(argv, stdout=None):
    """``python3 -m topoplace import ...``: prints one JSON document; returns the status."""
    out = stdout if stdout is not None else sys.stdout
    code, doc = run_import(argv)
    out.write(json.dumps(doc) + "\n")
    out.flush()
    return code


# --------------------------------------------------------------------------------------------
# Kubernetes: kubectl get nodes -o json, kubectl get pods -A -o json, a Kueue Topology
# --------------------------------------------------------------------------------------------

HOSTNAME_LABEL = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
# Taints that only keep non-GPU pods off GPU nodes (the GPU operator's and the cloud
# providers' convention): not a cordon.
GPU_TAINTS = {"nvidia.com/gpu", "amd.com/gpu"}
# Pod labels that name the job a pod belongs to, most specific first.
GROUP_LABELS = (("jobset.sigs.k8s.io/jobset-name", "jobset"),
                ("leaderworkerset.sigs.k8s.io/name", "lws"),
                ("batch.kubernetes.io/job-name", "job"),
                ("job-name", "job"))


def _items(path, doc, kind):
    items = doc.get("items") if isinstance(doc, dict) else None
    if not isinstance(items, list):
        raise ImportError_(path, "items", "expected the 'items' list of kubectl get %s -o json"
                           % kind)
    return items


def _quantity(text, path, where):
    """A Kubernetes quantity of whole devices ("8", 8)."""
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    if isinstance(text, str) and re.fullmatch(r"\d+", text):
        return int(text)
    raise ImportError_(path, where, "%s is not a whole number of devices" % json.dumps(text))


def read_kueue_levels(path, text):
    """The node labels of a Kueue Topology object, outermost first."""
    doc = _load_json(path, text)
    if not isinstance(doc, dict) or doc.get("kind") != "Topology":
        raise ImportError_(path, "kind", "expected a Kueue Topology object (kind: Topology)")
    levels = doc.get("spec", {}).get("levels") if isinstance(doc.get("spec"), dict) else None
    if not isinstance(levels, list) or not levels:
        raise ImportError_(path, "spec.levels", "expected a non-empty list of levels")
    out = []
    for i, lv in enumerate(levels):
        lab = lv.get("nodeLabel") if isinstance(lv, dict) else None
        if not isinstance(lab, str) or not lab:
            raise ImportError_(path, "spec.levels[%d].nodeLabel" % i, "expected a label key")
        out.append(lab)
    return out


def level_name(label):
    """The scenario level of a node label key: the key with its '/' as ':' (a character no
    label key holds, so :func:`label_key` undoes it): ``cloud.google.com:gce-topology-block``."""
    return label.replace("/", ":")


def label_key(level):
    """The node label key of a level made by :func:`level_name`."""
    return level.replace(":", "/")


def _node_state(n, path, where):
    spec, status = n.get("spec") or {}, n.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if isinstance(c, dict)
             and c.get("type") == "Ready"]
    down = not ready or ready[0].get("status") != "True"
    taints = [t for t in spec.get("taints") or [] if isinstance(t, dict)]
    cordon = spec.get("unschedulable") is True or any(
        t.get("effect") in ("NoSchedule", "NoExecute") and t.get("key") not in GPU_TAINTS
        for t in taints)
    return down, cordon


def read_k8s_nodes(path, text, labels):
    """[(name, [label values of the levels above the node], gpus, down, cordoned)] and the
    warnings, from kubectl get nodes -o json."""
    items = _items(path, _load_json(path, text), "nodes")
    host_last = labels and labels[-1] == HOSTNAME_LABEL
    above = labels[:-1] if host_last else labels
    out, warnings, seen = [], [], set()
    for i, n in enumerate(items):
        where = "items[%d]" % i
        meta = n.get("metadata") if isinstance(n, dict) else None
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str) or not name:
            raise ImportError_(path, where + ".metadata.name", "expected a node name")
        if name in seen:
            raise ImportError_(path, where + ".metadata.name", "node '%s' is listed twice" % name)
        seen.add(name)
        lab = meta.get("labels") or {}
        alloc = (n.get("status") or {}).get("allocatable") or {}
        gpus = _quantity(alloc.get(GPU_RESOURCE, "0"), path,
                         where + ".status.allocatable[\"%s\"]" % GPU_RESOURCE)
        if gpus == 0:
            warnings.append("%s: node '%s' has no allocatable %s; left out" % (path, name,
                                                                                GPU_RESOURCE))
            continue
        missing = [k for k in above if not isinstance(lab.get(k), str) or not lab.get(k)]
        if missing:
            warnings.append("%s: node '%s' has no label %s; left out (Kueue leaves it out of "
                            "the topology too)" % (path, name, missing[0]))
            continue
        bad = [lab[k] for k in above if "/" in lab[k]]
        if bad:
            raise ImportError_(path, where + ".metadata.labels", "label value '%s' holds a '/'"
                               % bad[0])
        down, cordon = _node_state(n, path, where)
        out.append((name, [lab[k] for k in above], gpus, down, cordon and not down))
    return out, warnings


def _pod_gpus(pod, path, where):
    total = 0
    for kind in ("initContainers", "containers"):
        for k, c in enumerate((pod.get("spec") or {}).get(kind) or []):
            res = (c or {}).get("resources") or {}
            v = (res.get("limits") or {}).get(GPU_RESOURCE,
                                                 (res.get("requests") or {}).get(GPU_RESOURCE, 0))
            g = _quantity(v, path, "%s.spec.%s[%d].resources" % (where, kind, k))
            total = max(total, g) if kind == "initContainers" else total + g
    return total


def _pod_group(pod, group_label):
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    lab = meta.get("labels") or {}
    if group_label:
        if lab.get(group_label):
            return "%s/%s" % (ns, lab[group_label])
    else:
        for key, kind in GROUP_LABELS:
            if lab.get(key):
                return "%s/%s/%s" % (ns, kind, lab[key])
        owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
        if owners and owners[0].get("name"):
            return "%s/%s/%s" % (ns, str(owners[0].get("kind", "owner")).lower(),
                                 owners[0]["name"])
    return "%s/pod/%s" % (ns, meta.get("name"))


def read_k8s_pods(path, text, group_label, gpus_of):
    """{job id: {node: GPU count}} of the bound, unfinished pods that request GPUs."""
    jobs = {}
    for i, p in enumerate(_items(path, _load_json(path, text), "pods")):
        where = "items[%d]" % i
        if not isinstance(p, dict):
            raise ImportError_(path, where, "expected a pod object")
        node = (p.get("spec") or {}).get("nodeName")
        phase = (p.get("status") or {}).get("phase")
        if not node or phase in ("Succeeded", "Failed"):
            continue
        g = _pod_gpus(p, path, where)
        if not g:
            continue
        if node not in gpus_of:
            raise ImportError_(path, where + ".spec.nodeName", "pod '%s' is bound to node '%s', "
                               "which is not among the imported GPU nodes"
                               % ((p.get("metadata") or {}).get("name"), node))
        job = jobs.setdefault(_pod_group(p, group_label), {})
        job[node] = job.get(node, 0) + g
        if sum(j.get(node, 0) for j in jobs.values()) > gpus_of[node]:
            raise ImportError_(path, where, "the pods on node '%s' request more than its %d "
                               "allocatable %s" % (node, gpus_of[node], GPU_RESOURCE))
    return jobs


def k8s_scenario(nodes, pods=None, kueue=None, levels=None, group_label=None):
    """A scenario-v1 document and the warnings, from ``(file, text)`` of kubectl get nodes -o
    json, optionally of kubectl get pods -A -o json, and the levels: a Kueue Topology
    ``(file, text)`` or a list of node label keys, outermost first."""
    labels = read_kueue_levels(*kueue) if kueue else [s.strip() for s in levels if s.strip()]
    if not labels:
        raise ImportError_("(command line)", "--levels", "no level given")
    if len(set(labels)) != len(labels):
        raise ImportError_(kueue[0] if kueue else "(command line)",
                           "spec.levels" if kueue else "--levels", "a label is given twice")
    found, warnings = read_k8s_nodes(nodes[0], nodes[1], labels)
    if not found:
        raise ImportError_(nodes[0], "items", "no node has allocatable %s and every level "
                           "label%s" % (GPU_RESOURCE, " (the first: %s)" % warnings[0].split(
                               ": ", 1)[1] if warnings else ""))
    above = labels[:-1] if labels[-1] == HOSTNAME_LABEL else labels
    names = [level_name(lab) for lab in above] + ["node"]
    if any(n in ("node", "cluster") for n in names[:-1]):
        raise ImportError_(kueue[0] if kueue else "(command line)", "spec.levels" if kueue
                           else "--levels", "a level label may not be named node or cluster")
    doc_nodes = [{"name": n, "path": p, "gpus": g} for n, p, g, _, _ in found]
    doc = {"version": 1, "topology": {"levels": names, "nodes": doc_nodes}}
    st = {}
    down = [n for n, _, _, dn, _ in found if dn]
    cordoned = [n for n, _, _, _, c in found if c]
    if pods:
        jobs = read_k8s_pods(pods[0], pods[1], group_label, {n: g for n, _, g, _, _ in found})
        if jobs:
            st["jobs"] = [{"id": j, "devices": d} for j, d in sorted(jobs.items())]
    if down:
        st["down"] = down
    if cordoned:
        st["cordoned"] = cordoned
    if st:
        doc["state"] = st
    return doc, warnings


# --------------------------------------------------------------------------------------------
# answers in the scheduler's terms: --format slurm, --format kueue
# --------------------------------------------------------------------------------------------

def _by_node(devices):
    """[(node, [indices in rank order])] in the order the nodes first appear in rank order."""
    order, idx = [], {}
    for dev in devices:
        node, i = dev.rsplit("/", 1)
        if node not in idx:
            idx[node] = []
            order.append(node)
        idx[node].append(int(i))
    return [(n, idx[n]) for n in order]


def slurm_answer(doc):
    """A placed answer (``place``, ``replace``, ``defrag``) as Slurm takes it: the compressed
    hostlist for ``sbatch --nodelist``, and per node the GPU indices in rank order, the
    ``CUDA_VISIBLE_DEVICES`` of the job's tasks there. Other answers are returned as they
    are."""
    pl = doc.get("placement") if doc.get("status") == "ok" else None
    if not pl:
        return doc
    nodes = _by_node(pl["devices"])
    return {"status": "ok", "job": doc.get("job"),
            "nodelist": hostlist_compress([n for n, _ in nodes]),
            "sbatch": "--nodelist=%s --nodes=%d" % (hostlist_compress([n for n, _ in nodes]),
                                                    len(nodes)),
            "gpus": {n: ",".join(str(i) for i in ix) for n, ix in nodes}}


def kueue_answer(doc, topo, pod_size):
    """A placed answer as Kueue's TopologyAssignment: ``levels`` (node label keys, outermost
    first: a level imported from a label is that label, the node level is
    ``kubernetes.io/hostname``) and ``domains`` (the values of every level for each node used,
    in rank order, with its pod count: devices / ``pod_size``, the request's group size), and
    each pod's node selector in rank order."""
    pl = doc.get("placement") if doc.get("status") == "ok" else None
    if not pl:
        return doc
    levels = [label_key(lv) for lv in topo.levels[:-1]] + [HOSTNAME_LABEL]
    domains, selectors = [], []
    for node, ix in _by_node(pl["devices"]):
        n = topo.node(node)
        values = [topo.domain_name(lv, topo.node_domain(n, lv))
                  for lv in range(len(topo.levels) - 1)] + [node]
        pods, rest = divmod(len(ix), pod_size)
        if rest:
            raise ValueError("node %s holds %d devices, not whole pods of %d"
                             % (node, len(ix), pod_size))
        domains.append({"values": values, "count": pods})
        selectors += [dict(zip(levels, values))] * pods
    return {"status": "ok", "job": doc.get("job"),
            "topologyAssignment": {"levels": levels, "domains": domains},
            "podNodeSelectors": selectors}


def scheduler_answer(answer, fmt, on_error):
    """The CLI's answer rewritten for ``--format slurm|kueue`` (the same object, its document
    replaced); a failure becomes ``on_error(exception)``."""
    try:
        if fmt == "slurm":
            answer.doc = slurm_answer(answer.doc)
        else:
            req = answer.ctx.get("request")
            answer.doc = kueue_answer(answer.doc, answer.ctx["topo"],
                                      getattr(req, "group_size", 1) or 1)
    except Exception as e:   # a bug: reported as the CLI reports one
        return on_error(e)
    return answer
