# SPDX-License-Identifier: MIT
"""The command-line tool: ``python3 -m topoplace place|frag|replace|defrag|compact|size|pd FILE``,
and ``python3 -m topoplace import hwloc|nvidia-smi FILE`` (:mod:`topoplace.cli_import`).

It reads a scenario-v1 document (shared/spec/scenario-v1.md) from FILE, or standard input for
``-``, validates all of it, drives the C library, and writes one JSON document to standard
output. ``compact --level LEVEL [--domains N]`` (an extension) answers the moves that leave N
domains of LEVEL fully free (``tp_defrag_compact``), under the document's ``policy``.
``--no-less-local`` (defrag, compact) keeps every migrated job at least as local as it sits;
by default the scenario-v1 contract lets a job without a request restart anywhere. Exit
status:

======  ======================================================================================
0       placed / replaced / plan found / frag report / node type imported
1       not placeable (``infeasible``, ``busy``, ``fragmented``), or no plan (``none``)
2       invalid input: ``{"status": "invalid", "message": "request.slices[1].size: ..."}``
3       this build cannot answer (``unsupported``: a library built without its scenario
        importer), or an internal error (``error``); never a traceback (set
        TOPOPLACE_DEBUG=1 to get one on standard error)
======  ======================================================================================

``--format text`` renders the same answer for a person; ``--strict`` also validates the
sections the command does not use (by default they are allowed and ignored). Two bounds keep a
hostile input from holding the machine: ``--max-input-bytes N`` (default 256 MB) refuses a
larger document, and ``--timeout SECONDS`` (default: none) answers exit 2 when the command,
reading its input included (a FIFO without a writer blocks), has not finished in time.
"""

import argparse
import json
import math
import os
import sys
import threading
import time

from . import scenario as sc_mod
from .scenario import InvalidInput

EXIT_OK, EXIT_NOT_PLACED, EXIT_INVALID, EXIT_UNSUPPORTED = 0, 1, 2, 3


class _Answer:
    """What a command answers: the exit status, the JSON document, and what the text renderer
    needs besides it."""

    def __init__(self, code, doc, **ctx):
        self.code = code
        self.doc = doc
        self.ctx = ctx


def _invalid(message):
    return _Answer(EXIT_INVALID, {"status": "invalid", "message": message})


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise _UsageError(message)


def _parser():
    p = _Parser(prog="python3 -m topoplace",
                description="Answer a libtopoplace scenario (scenario-v1): where a job would "
                            "go, how fragmented the cluster is, which devices replace failed "
                            "ones, which moves make a job fit.")
    p.add_argument("command", choices=CLI_COMMANDS, help="the question to answer "
                   "(compact: the moves that free --domains domains of --level; size: the "
                   "ways to serve a model; pd: a prefill/decode service's groups, "
                   "docs/serving.md; import: see "
                   "`python3 -m topoplace import --help`)")
    p.add_argument("file", help="the scenario file, or - for standard input")
    p.add_argument("--no-less-local", dest="less_local", action="store_false",
                   help="defrag, compact: a migrated job never lands less local than it sits "
                        "(by default scenario-v1 plans let a job without a request restart "
                        "on any free devices)")
    p.add_argument("--level", default=None, metavar="LEVEL",
                   help="compact: the level whose domains to free (required)")
    p.add_argument("--domains", type=_positive, default=None, metavar="N",
                   help="compact: how many domains of --level to leave fully free (default 1)")
    p.add_argument("--format", choices=("json", "text", "slurm", "kueue"), default="json",
                   help="json (default): one JSON document; text: a picture for a person; "
                        "slurm / kueue: a placement as sbatch --nodelist and GPU indices, or "
                        "as a Kueue TopologyAssignment (topoplace.importers)")
    p.add_argument("--strict", action="store_true",
                   help="also validate the sections the command does not use")
    p.add_argument("--max-input-bytes", type=_max_bytes, default=sc_mod.MAX_INPUT_BYTES,
                   metavar="N", help="refuse a document larger than N bytes (default %d)"
                   % sc_mod.MAX_INPUT_BYTES)
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="give up (exit 2) when the command takes longer (default: no limit)")
    return p


def _max_bytes(text):
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 1:
        raise argparse.ArgumentTypeError("--max-input-bytes: %r is not a positive integer"
                                         % text)
    return n


def _positive(text):
    try:
        n = int(text)
    except ValueError:
        n = -1
    if not 1 <= n <= 0xFFFFFFFF:
        raise argparse.ArgumentTypeError("--domains: %r is not a positive integer" % text)
    return n


def _seconds(text):
    try:
        s = float(text)
    except ValueError:
        s = math.nan
    if not (math.isfinite(s) and s > 0):
        raise argparse.ArgumentTypeError("--timeout: %r is not a positive number of seconds"
                                         % text)
    return s


class _Watchdog:
    """Answers exit 2 and ends the process when the command outlives --timeout.

    A blocked open() of a FIFO or a long library call cannot be interrupted from Python, so a
    timer thread writes the answer and leaves with os._exit. The lock keeps it from writing
    while the command writes its own answer."""

    def __init__(self, seconds, out):
        self.lock = threading.Lock()
        self.seconds = seconds
        self.out = out
        self.timer = None
        if seconds is not None:
            self.timer = threading.Timer(seconds, self._expire)
            self.timer.daemon = True
            self.timer.start()

    def _expire(self):
        if not self.lock.acquire(blocking=False):
            return                      # the answer is being written: let it finish
        doc = {"status": "invalid",
               "message": "timeout: the command did not finish within %g s (--timeout)"
                          % self.seconds}
        try:
            self.out.write(json.dumps(doc, separators=(", ", ": ")) + "\n")
            self.out.flush()
        finally:
            os._exit(EXIT_INVALID)

    def __enter__(self):
        self.lock.acquire()
        if self.timer is not None:
            self.timer.cancel()
        return self

    def __exit__(self, *exc):
        self.lock.release()


def main(argv=None, stdin=None, stdout=None):
    """Run the tool; returns the exit status (see the module's documentation)."""
    argv = sys.argv[1:] if argv is None else argv
    out = stdout if stdout is not None else sys.stdout
    if argv[:1] == ["import"]:
        source = argv[1] if len(argv) > 1 else None
        if source in ("hwloc", "nvidia-smi"):        # node types: cli_import
            return _import_main(argv[1:], stdin, out)
        if source in ("slurm", "k8s"):               # scheduler formats: importers
            from .importers import main as import_main
            return import_main(argv[1:], out)
        if source not in ("-h", "--help"):
            from .cli_import import USAGE, dumps
            out.write(dumps({"status": "invalid", "message": "usage: import takes a format "
                             "first: hwloc, nvidia-smi, slurm or k8s, %s (%s; python3 -m "
                             "topoplace import {slurm|k8s} --help)"
                             % ("not %r" % source if source else "none given", USAGE)}) + "\n")
            out.flush()
            return EXIT_INVALID
        return _import_main(argv[1:], stdin, out)
    fmt = "text" if "--format=text" in argv or _pair(argv, "--format", "text") else "json"
    watchdog = _Watchdog(None, out)
    try:
        args = _parser().parse_args(argv)
        fmt = args.format
        if args.command == "import":
            raise _UsageError("import takes a format first: " + _import_usage())
        if args.command == "compact" and args.level is None:
            raise _UsageError("compact needs --level LEVEL")
        for flag, used in (("--level", args.level is not None),
                           ("--domains", args.domains is not None)):
            if used and args.command != "compact":
                raise _UsageError("%s applies to compact only" % flag)
        if not args.less_local and args.command not in ("defrag", "compact"):
            raise _UsageError("--no-less-local applies to defrag and compact only")
        watchdog = _Watchdog(args.timeout, out)
        answer = run(args.command, args.file, strict=args.strict, stdin=stdin,
                     max_bytes=args.max_input_bytes,
                     options={"less_local": args.less_local, "level": args.level,
                              "domains": args.domains or 1,
                              "deadline": None if args.timeout is None else
                              time.monotonic() + args.timeout})
    except _UsageError as e:
        answer = _invalid("usage: %s (python3 -m topoplace {%s} FILE [--format json|text] "
                          "[--strict] [--max-input-bytes N] [--timeout SECONDS] "
                          "[--no-less-local] [--level LEVEL] [--domains N])"
                          % (e, "|".join(SCENARIO_COMMANDS)))
    except SystemExit as e:          # --help
        return e.code if isinstance(e.code, int) else 0
    except Exception as e:           # a bug: say so in JSON, never as a traceback
        answer = _internal_error(e)
    with watchdog:
        answer = _write(answer, fmt, out)
    return answer.code


def _import_usage():
    from .cli_import import USAGE
    return USAGE


def _import_main(argv, stdin, out):
    """``import hwloc|nvidia-smi FILE``: the node type as JSON (cli_import)."""
    from . import cli_import
    try:
        args = cli_import.parser(_Parser, _max_bytes).parse_args(argv)
        code, doc = cli_import.run(args, stdin)
    except _UsageError as e:
        code, doc = EXIT_INVALID, {"status": "invalid",
                                   "message": "usage: %s (%s)" % (e, cli_import.USAGE)}
    except SystemExit as e:          # --help
        return e.code if isinstance(e.code, int) else 0
    except Exception as e:           # a bug: say so in JSON, never as a traceback
        a = _internal_error(e)
        code, doc = a.code, a.doc
    try:
        out.write(cli_import.dumps(doc) + "\n")
        out.flush()
    except BrokenPipeError:
        pass
    return code


def _write(answer, fmt, out):
    if fmt in ("slurm", "kueue") and answer.doc.get("status") == "ok":
        from .importers import scheduler_answer
        answer = scheduler_answer(answer, fmt, _internal_error)
    try:
        if fmt == "text":
            from .text import render
            try:
                text = render(answer)
            except Exception as e:
                answer = _internal_error(e)
                text = json.dumps(answer.doc)
            out.write(text.rstrip("\n") + "\n")
        else:
            out.write(json.dumps(answer.doc, indent=None, separators=(", ", ": ")) + "\n")
        out.flush()
    except BrokenPipeError:
        pass
    return answer


def _pair(argv, flag, value):
    return any(a == flag and b == value for a, b in zip(argv, argv[1:]))


def _internal_error(e):
    import traceback
    if os.environ.get("TOPOPLACE_DEBUG"):
        traceback.print_exc(file=sys.stderr)
    tb = traceback.extract_tb(e.__traceback__)
    where = ("%s:%d" % (os.path.basename(tb[-1].filename), tb[-1].lineno)) if tb else "?"
    return _Answer(EXIT_UNSUPPORTED, {
        "status": "error",
        "message": "internal error (%s at %s): %s; please report it with the scenario "
                   "(TOPOPLACE_DEBUG=1 prints the traceback)" % (type(e).__name__, where, e)})


def run(command, path, strict=False, stdin=None, max_bytes=sc_mod.MAX_INPUT_BYTES,
        options=None):
    """Answer ``command`` for the scenario in ``path`` (``-``: standard input), which may hold
    at most ``max_bytes`` bytes. ``options``: ``less_local`` (False: ``--no-less-local``),
    and compact's ``level`` and ``domains``."""
    opts = {"less_local": True, "level": None, "domains": 1}
    opts.update(options or {})
    try:
        from . import api  # noqa: F401  (the compiled module: fail here, with a clear message)
    except ImportError as e:
        return _Answer(EXIT_UNSUPPORTED, {"status": "error", "message": str(e)})
    from . import _native
    if not _native.has("tp_scenario_from_json"):
        return _Answer(EXIT_UNSUPPORTED, {
            "status": "unsupported",
            "message": "this build cannot read scenarios: libtopoplace was built without its "
                       "scenario importer (jansson was not found)"}, command=command)
    if command in ("size", "pd"):
        from . import pd_cli, size_cli
        mod = size_cli if command == "size" else pd_cli
        try:
            code, doc = mod.run(path, stdin=stdin, max_bytes=max_bytes)
        except InvalidInput as e:
            return _invalid(str(e))
        return _Answer(code, doc, command=command, render=mod.render)
    try:
        if command == "compact":
            sc = _load_compact(path, strict, stdin, max_bytes)
        else:
            sc = sc_mod.load(path, command, strict=strict, stdin=stdin, max_bytes=max_bytes)
    except InvalidInput as e:
        return _invalid(str(e))
    topo, cluster = sc.topology, sc.cluster
    if sc.policy is not None and not opts["less_local"]:
        sc.policy.allow_less_local = False
    if command == "compact":
        return _compact(sc, topo, cluster, opts["level"], opts["domains"])
    if command == "replace":
        return _replace(sc, topo, cluster, opts.get("deadline"))
    return COMMANDS[command](sc, topo, cluster)


def _load_compact(path, strict, stdin, max_bytes):
    """The scenario of ``compact``: its topology and state (read as for frag) and its
    ``policy`` section (the defrag policy, read by the importer from a document that holds
    only it; absent: the defaults, as for defrag)."""
    text, base_dir = sc_mod.read_input(path, stdin, max_bytes)
    sc = sc_mod.import_text(text, "frag", base_dir, strict)
    doc = json.loads(text.decode("utf-8"))     # valid JSON: the importer read it
    only_policy = {"version": 1,
                   "topology": {"levels": ["node"],
                                "generate": {"counts": [1], "gpus_per_node": 1}},
                   "request": {"count": 1}}
    if "policy" in doc:
        only_policy["policy"] = doc["policy"]
    sc.policy = sc_mod.parse(only_policy, "defrag", base_dir, files=False).policy
    return sc


def _lib_error(where, e):
    """An error the library found in an item the importer let through, as invalid input."""
    from . import errors
    if isinstance(e, (errors.OutOfMemory, errors.Corrupt)):
        raise e
    msg = str(e)
    if where and not msg.startswith(where):
        msg = "%s: %s" % (where, msg)
    raise InvalidInput("", msg)


# --------------------------------------------------------------------------------------------
# answers
# --------------------------------------------------------------------------------------------

def placement_json(topo, pl):
    """The ``placement`` object of the output: devices in rank order, nodes, and the domains of
    every level above the node keyed by path."""
    node_level = topo.levels[-1]
    out = {"devices": list(pl.devices),
           "nodes": dict(pl.domains.get(node_level, {})),
           "domains": {lv: dict(pl.domains.get(lv, {})) for lv in topo.levels[:-1]}}
    if pl.nics:  # extension: only for a request with x_gpu_nic_pairs
        out["x_nics"] = list(pl.nics)
    if pl.partitions:  # extension: only with state.x_partitions, for a multi-node answer
        out["x_partitions"] = [{"domain": p.domain, "channel": p.channel, "nodes": p.nodes}
                               for p in pl.partitions]
    return out


def score_json(topo, pl, comm=None):
    """The ``score`` object: the modelled ring all-reduce, the domains spanned per level, which
    rule of the objective decided (``decided_by``: the spec lets ``score`` carry more keys) and,
    for a request with
    ``x_comm``, the modelled step time of that model on the placement (``x_step_us``)."""
    out = {"step_comm_us": pl.step_comm_us,
           "levels_spanned": {lv: len(pl.domains.get(lv, {})) for lv in topo.levels},
           "decided_by": pl.decided_by}
    if comm is not None:
        from . import cost
        out["x_step_us"] = cost.step_us(topo, pl.device_ids, cost.StepModel(**comm))
    return out


def not_placed_json(pl):
    fit = pl.fit
    return {"status": pl.status, "message": pl.message,
            "fit": {"needed": fit.needed, "free_total": fit.free_total, "level": fit.level,
                    "best": fit.best} if fit else None}


def _place(sc, topo, cluster):
    from . import errors
    req = sc.request
    try:
        pl = cluster.place(req)
    except (errors.InvalidArgument, errors.NotFound) as e:
        return _invalid(str(e) if str(e).startswith("request") else "request: %s" % e)
    if not pl.ok:
        return _Answer(EXIT_NOT_PLACED, not_placed_json(pl), topo=topo, cluster=cluster,
                       placement=pl, command="place")
    doc = {"status": "ok", "job": pl.job, "placement": placement_json(topo, pl),
           "score": score_json(topo, pl, req.comm)}
    return _Answer(EXIT_OK, doc, topo=topo, cluster=cluster, placement=pl, command="place",
                   request=req)


def _replace(sc, topo, cluster, deadline=None):
    """The replace command. With --timeout, ``deadline`` (time.monotonic()) also bounds the
    library's search (tp_replace_options.max_time_us: 90% of the time left, so that a long
    search ends with its own message, exit 2, before the watchdog's)."""
    from . import api, errors
    rep = sc.replace
    job = _Job(rep["job"])
    failed = set(rep["failed"])
    held = list(cluster.job_devices(job.id))
    job_failed = [d for d in held if d in failed]
    # Every failed device is treated as down, so that no replacement lands on one.
    try:
        cluster.set_down(sorted(failed))
    except errors.TopoplaceError as e:
        _lib_error("replace.failed", e)
    if not job_failed:
        # Nothing of the job failed: it keeps its devices (tp_replace wants at least one).
        pl = api.Placement(status="ok", code=0, job=job.id, device_ids=held,
                           devices=[topo.device_name(d) for d in held],
                           domains=_domains_of(topo, held), _node_level=topo.levels[-1])
        doc = {"status": "ok", "job": job.id, "placement": placement_json(topo, pl),
               "score": {"levels_spanned": {lv: len(pl.domains[lv]) for lv in topo.levels}},
               "replaced": {}}
        return _Answer(EXIT_OK, doc, topo=topo, cluster=cluster, placement=pl,
                       command="replace", job=job.id)
    try:
        pl = cluster.replace(job.id, job_failed,
                             max_time_us=None if deadline is None else
                             max(1, int((deadline - time.monotonic()) * 0.9e6)))
    except (errors.InvalidArgument, errors.NotFound, errors.LimitExceeded) as e:
        return _invalid("replace: %s" % e)
    if not pl.ok:
        return _Answer(EXIT_NOT_PLACED, not_placed_json(pl), topo=topo, cluster=cluster,
                       placement=pl, command="replace", job=job.id)
    doc = {"status": "ok", "job": pl.job, "placement": placement_json(topo, pl),
           "score": score_json(topo, pl), "replaced": dict(pl.replaced)}
    return _Answer(EXIT_OK, doc, topo=topo, cluster=cluster, placement=pl, command="replace",
                   job=job.id)


class _Job:
    def __init__(self, jid):
        self.id = jid


def _domains_of(topo, devices):
    """Level name -> domain path -> devices, in first-rank order."""
    out = {lv: {} for lv in topo.levels}
    for d in devices:
        node = topo.device_node(d)
        for i, lv in enumerate(topo.levels):
            path = topo.domain_path(i, topo.node_domain(node, i))
            out[lv][path] = out[lv].get(path, 0) + 1
    return out


def _frag(sc, topo, cluster):
    rep = cluster.frag()
    doc = {"status": "ok",
           "levels": {lv: {"domains": f.domain_count, "free": f.free_count,
                           "fully_free": f.fully_free_count,
                           "largest_free": f.largest_free_count,
                           "fragmentation": f.fragmentation}
                      for lv, f in rep.levels.items()},
           "free": rep.free_count, "down": rep.down_count, "cordoned": rep.cordoned_count}
    return _Answer(EXIT_OK, doc, topo=topo, cluster=cluster, command="frag")


def _defrag(sc, topo, cluster):
    from . import errors
    req = sc.request
    # scenario-v1 plans predate the library's locality rule: its contract lets a job without a
    # request restart on any free devices (spec/examples slurm-s01 expects exactly that); the
    # importer's policy says so (allow_less_local)
    policy = sc.policy
    try:
        plan = cluster.defrag_plan(req, policy)
    except (errors.InvalidArgument, errors.NotFound) as e:
        msg = str(e)
        return _invalid(msg if msg.startswith(("request", "policy")) else "request: %s" % msg)
    if not plan.ok:
        msg = plan.message
        if plan.status == "infeasible":
            msg = "no plan can exist: the request does not fit even an empty cluster (%s)" % msg
        return _Answer(EXIT_NOT_PLACED, {"status": "none", "message": msg}, topo=topo,
                       cluster=cluster, command="defrag", plan=plan)
    doc = {"status": "ok", "plan": plan_json(plan)}
    pl = plan.placement
    if pl is not None:
        doc["placement"] = placement_json(topo, pl)
        doc["score"] = score_json(topo, pl)
    return _Answer(EXIT_OK, doc, topo=topo, cluster=cluster, placement=pl, command="defrag",
                   plan=plan)


def plan_json(plan):
    """The ``plan`` object of the output: steps (``from`` unless a place step, ``to`` unless
    a preemption), moved jobs and devices, cost."""
    steps = []
    for st in plan.steps:
        step = {"action": st.action, "job": st.job}
        if st.action != "place":
            step["from"] = list(st.from_devices)
        if st.action != "preempt":
            step["to"] = list(st.to_devices)
        steps.append(step)
    cost = plan.cost_s
    return {"steps": steps, "moved_jobs": plan.moved_job_count,
            "moved_devices": plan.moved_device_count,
            "cost_s": int(cost) if float(cost).is_integer() else cost}


def _compact(sc, topo, cluster, level, ndomains):
    """compact: the moves that leave ``ndomains`` domains of ``level`` fully free
    (tp_defrag_compact), and those domains (``free_domains``: every domain of the level fully
    free once the plan is carried out, found by applying it on the state and rolling back)."""
    from . import errors
    if level not in topo.levels:
        return _invalid("--level: unknown level %r (levels: %s)"
                        % (level, ", ".join(topo.levels)))
    try:
        plan = cluster.defrag_compact(level, ndomains, sc.policy)
    except (errors.InvalidArgument, errors.NotFound) as e:
        msg = str(e)
        if msg.startswith("ndomains"):
            return _invalid("--domains: %s" % msg)
        return _invalid(msg if msg.startswith("policy") else "compact: %s" % msg)
    if not plan.ok:
        return _Answer(EXIT_NOT_PLACED, {"status": "none", "message": plan.message},
                       topo=topo, cluster=cluster, command="compact", plan=plan)
    lv = topo.level(level)
    with cluster.savepoint(rollback=True):
        for i in range(len(plan.steps)):
            cluster.apply_step(plan, i)
        freed = [topo.domain_path(lv, d) for d in range(topo.domain_count(lv))
                 if cluster.free_count(lv, d) == len(topo.domain_devices(lv, d))]
    doc = {"status": "ok", "plan": plan_json(plan), "free_domains": {level: freed}}
    return _Answer(EXIT_OK, doc, topo=topo, cluster=cluster, command="compact", plan=plan)


# What each command needs from the library (frag has a fallback in api.Cluster.frag).
#: The commands on a scenario document, and all of them (``import`` reads other formats).
SCENARIO_COMMANDS = sc_mod.COMMANDS + ("compact", "size", "pd")
CLI_COMMANDS = SCENARIO_COMMANDS + ("import",)
COMMANDS = {"place": _place, "replace": _replace, "frag": _frag, "defrag": _defrag}
