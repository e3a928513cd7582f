# SPDX-License-Identifier: MIT
"""The scenario format, version 1 (shared/spec/scenario-v1.md): read a document with the
library's importer (include/topoplace-scenario.h).

What is Python's to do stays here: reading the file (with a size bound), reading the hwloc files
a document names (relative to its folder), and handing the text to ``tp_scenario_from_json``,
which validates the whole document and builds the topology, the cluster state and the
command's request, policy or replace section. Every problem raises :class:`InvalidInput`, whose
message is the importer's: the offending field as a dotted path with ``[i]`` for list items
(``request.slices[1].size``, ``topology.nodes[3].name``), then why.
"""

import json
import os

__all__ = ["InvalidInput", "Scenario", "parse", "load", "read_input", "COMMANDS", "USES",
           "MAX_INPUT_BYTES"]

COMMANDS = ("place", "defrag", "frag", "replace")

# The sections each command reads. The spec's examples (README, reading 7) read the others as
# "allowed, neither validated nor applied"; --strict validates them as well.
USES = {"place": ("state", "request"), "defrag": ("state", "request", "policy"),
        "frag": ("state",), "replace": ("state", "replace")}

# The most bytes a scenario may have unless the caller says otherwise (`--max-input-bytes`): a
# 14,000-rack fleet listed node by node is about 40 MB, and /dev/zero must not eat the machine.
MAX_INPUT_BYTES = 256 * 1024 * 1024


class InvalidInput(Exception):
    """The document is not a valid scenario. ``path`` is the offending field ("" for the whole
    document, or when the importer's message says it); ``reason`` says why; ``str()`` gives
    ``"path: reason"``."""

    def __init__(self, path, reason):
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self):
        return "%s: %s" % (self.path, self.reason) if self.path else self.reason


def _fail(path, reason):
    raise InvalidInput(path, reason)


# --------------------------------------------------------------------------------------------
# Reading the input
# --------------------------------------------------------------------------------------------

def read_input(path_or_dash, stdin=None, max_bytes=MAX_INPUT_BYTES):
    """The bytes of a scenario file (or of standard input for ``-``) and the folder its
    relative paths start from. Reads at most ``max_bytes`` + 1 bytes: more is invalid input."""
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
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    else:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as e:
            _fail("", "%s is not UTF-8: %s" % (what, e))
    return data, base_dir


# --------------------------------------------------------------------------------------------
# The imported scenario
# --------------------------------------------------------------------------------------------

class Scenario:
    """A scenario the library imported for ``command``: its :class:`~topoplace.api.Topology`,
    :class:`~topoplace.api.Cluster` (jobs, down and cordoned devices), and the command's
    question: ``request`` (an :class:`~topoplace.api.Request`, place and defrag), ``policy``
    (an :class:`~topoplace.api.DefragPolicy`, defrag), ``replace`` (``{"job": id, "failed":
    [device ids]}``, replace). The C objects belong to the importer's ``tp_scenario``, which
    lives as long as any of them."""

    def __init__(self, handle, command, base_dir):
        from . import api
        from ._native import ffi, lib
        self.command = command
        self.base_dir = base_dir

        def borrowed(ptr):         # keeps the tp_scenario alive as long as the pointer
            return ffi.gc(ptr, lambda p, _h=handle: None)
        self.topology = api.Topology._wrap(borrowed(lib.tp_scenario_topology(handle)))
        self.levels = list(self.topology.levels)
        self.cluster = api.Cluster._wrap(borrowed(lib.tp_scenario_cluster(handle)),
                                         self.topology)
        self.request = api.Request._from_c(lib.tp_scenario_request(handle))
        self.policy = None
        p = lib.tp_scenario_policy(handle)
        if p != ffi.NULL:
            self.policy = api.DefragPolicy(
                bool(p.migrate), bool(p.preempt), bool(p.allow_interactive),
                None if p.max_moves == 0xFFFFFFFF else p.max_moves,
                None if p.max_cost_s < 0 else p.max_cost_s, p.min_priority_gap,
                allow_less_local=bool(p.allow_less_local))
        self.replace = None
        job = lib.tp_scenario_replace_job(handle)
        if job != ffi.NULL:
            devs = ffi.new("const uint32_t **")
            n = ffi.new("size_t *")
            lib.tp_scenario_replace_failed(handle, devs, n)
            self.replace = {"job": ffi.string(job).decode("utf-8"),
                            "failed": [devs[0][i] for i in range(n[0])]}

    @property
    def jobs(self):
        """The running jobs' ids, in the document's order."""
        return list(self.cluster.jobs)


_COMMAND_CODE = {"place": 1, "defrag": 2, "frag": 3, "replace": 4}


def import_text(text, command, base_dir=".", strict=False, files=True):
    """Import the bytes of a scenario-v1 document for ``command``. With ``files`` the hwloc
    files a document names are read relative to ``base_dir``; without, a node with ``hwloc`` is
    invalid input. Raises InvalidInput with the importer's message."""
    if command not in COMMANDS:
        raise ValueError("unknown command %r" % (command,))
    from . import _defaults
    from ._native import ffi, lib
    keep = []

    def read(ud, cpath, data, length, why, whylen):
        rel = ffi.string(cpath).decode("utf-8", "surrogateescape")
        path = rel if os.path.isabs(rel) else os.path.normpath(os.path.join(base_dir, rel))
        try:
            with open(path, "rb") as f:
                buf = f.read()
        except OSError as e:
            msg = str(e.strerror or e).encode("utf-8", "replace")[:max(whylen - 1, 0)]
            ffi.memmove(why, msg + b"\0", len(msg) + 1)
            return -1
        cbuf = ffi.from_buffer(buf)
        keep.append((buf, cbuf))
        data[0] = cbuf
        length[0] = len(buf)
        return 0

    opts = _defaults.c_init("scenario_options")
    opts.command = _COMMAND_CODE[command]
    opts.strict = 1 if strict else 0
    cb = ffi.callback("tp_scenario_read_fn", read) if files else ffi.NULL
    opts.read_file = cb
    out = ffi.new("tp_scenario **")
    err = ffi.new("char[1024]")
    rc = lib.tp_scenario_from_json(out, text, len(text), opts, err, len(err))
    if rc < 0:
        msg = ffi.string(err).decode("utf-8", "replace")
        if rc == lib.TP_ENOMEM:
            raise MemoryError(msg)
        raise InvalidInput("", msg)
    return Scenario(ffi.gc(out[0], lib.tp_scenario_destroy), command, base_dir)


def parse(doc, command, base_dir=".", strict=False, files=True):
    """Import a document already parsed by :mod:`json` (a dict) for ``command``."""
    return import_text(json.dumps(doc).encode("utf-8"), command, base_dir, strict, files)


def load(path_or_dash, command, strict=False, stdin=None, max_bytes=MAX_INPUT_BYTES):
    """Read a scenario file (or standard input for ``-``) and import it for ``command``; a
    document of more than ``max_bytes`` bytes is invalid input."""
    text, base_dir = read_input(path_or_dash, stdin, max_bytes)
    return import_text(text, command, base_dir, strict)
