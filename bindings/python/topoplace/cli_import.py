# SPDX-License-Identifier: MIT
"""``python3 -m topoplace import hwloc FILE`` and ``import nvidia-smi FILE``: a node type read
by the library's importers, printed as JSON.

The output is :meth:`topoplace.NodeType.to_dict`::

    {"gpus": [{"index": 0, "bus_id": "0000:3b:00.0", "pcie_switch": 0,
               "nearest_nic": "mlx5_0", "nvlink": {"1": 300.0}}, ...],
     "nics": [{"name": "mlx5_0", "pcie_switch": 0}, ...],
     "pcie_switches": [{"parent": null}, ...],
     "nvswitches": 6}

with exit status 0. A file that cannot be read or that the importer refuses gives one JSON
object ``{"status": "invalid", "message": "FILE: why"}`` on standard output and exit 2, as the
scenario commands answer invalid input; the message names the file and gives the importer's
reason (which names the line or element).
"""

import argparse
import json

#: The formats ``import`` reads, and the NodeType constructor of each.
FORMATS = ("hwloc", "nvidia-smi")
#: The most bytes an input file may have (the nvidia-smi importer's own limit is 2^20; a
#: large machine's hwloc XML is a few MB).
MAX_FILE_BYTES = 64 * 1024 * 1024

USAGE = ("python3 -m topoplace import {hwloc|nvidia-smi} FILE [--nvlink-gbps GBPS] "
         "[--max-input-bytes N]")


class ImportFailed(Exception):
    """An import that failed: the message names the file and why."""


def parser(error_class, max_bytes_type):
    """The argument parser of ``import`` (``error_class`` raises on a usage error)."""
    p = error_class(prog="python3 -m topoplace import",
                    description="Print the node type the library reads from an hwloc XML "
                                "export (lstopo FILE.xml) or from `nvidia-smi topo -m`, as "
                                "JSON.")
    p.add_argument("format", choices=FORMATS, help="the format of FILE")
    p.add_argument("file", help="the file, or - for standard input")
    p.add_argument("--nvlink-gbps", type=_gbps, default=None, metavar="GBPS",
                   help="nvidia-smi: GB/s one direction of one NVLink (NV# is # times it; "
                        "default 25, NVLink 2 to 4; 50 for NVLink 5)")
    p.add_argument("--max-input-bytes", type=max_bytes_type, default=MAX_FILE_BYTES,
                   metavar="N", help="refuse a file larger than N bytes (default %d)"
                   % MAX_FILE_BYTES)
    return p


def _gbps(text):
    import math
    try:
        x = float(text)
    except ValueError:
        x = math.nan
    if not (math.isfinite(x) and x > 0):
        raise argparse.ArgumentTypeError("--nvlink-gbps: %r is not a positive number" % text)
    return x


def _read(path, stdin, max_bytes):
    what = "standard input" if path == "-" else path
    try:
        if path == "-":
            import sys
            stream = stdin if stdin is not None else sys.stdin
            data = getattr(stream, "buffer", stream).read(max_bytes + 1)
            if isinstance(data, str):
                data = data.encode("utf-8", "surrogateescape")
        else:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
    except OSError as e:
        raise ImportFailed("%s: cannot read it: %s" % (what, e.strerror or e))
    if len(data) > max_bytes:
        raise ImportFailed("%s: larger than %d bytes, the most an import reads "
                           "(--max-input-bytes sets it)" % (what, max_bytes))
    return what, data


def node_type(fmt, path, nvlink_gbps=None, stdin=None, max_bytes=MAX_FILE_BYTES):
    """The :class:`~topoplace.NodeType` of a file (``-``: standard input) in ``fmt``; raises
    :class:`ImportFailed` naming the file and why."""
    from . import errors
    from .topology import NodeType
    if fmt == "hwloc" and nvlink_gbps is not None:
        raise ImportFailed("--nvlink-gbps applies to nvidia-smi only (hwloc XML gives the "
                           "NVLink bandwidths)")
    what, data = _read(path, stdin, max_bytes)
    if not data:
        raise ImportFailed("%s: the file is empty (expected %s)"
                           % (what, "an hwloc XML topology" if fmt == "hwloc"
                              else "the output of `nvidia-smi topo -m`"))
    try:
        if fmt == "hwloc":
            return NodeType.from_hwloc_xml(data)
        return NodeType.from_nvidia_smi(data, nvlink_gbps)
    except (errors.OutOfMemory, errors.Corrupt, errors.InternalError):
        raise
    except errors.InvalidArgument as e:
        if nvlink_gbps is None:
            raise ImportFailed("%s: %s" % (what, e))
        # the one argument the library checks: the link bandwidth
        raise ImportFailed("--nvlink-gbps %g: %s" % (nvlink_gbps, e))
    except errors.TopoplaceError as e:
        raise ImportFailed("%s: %s" % (what, e))


def run(args, stdin=None):
    """(exit status, JSON document) of ``import`` for parsed ``args``."""
    try:
        from . import api  # noqa: F401  (the compiled module: fail here, with a clear message)
    except ImportError as e:
        return 3, {"status": "error", "message": str(e)}
    try:
        nt = node_type(args.format, args.file, args.nvlink_gbps, stdin, args.max_input_bytes)
    except ImportFailed as e:
        return 2, {"status": "invalid", "message": str(e)}
    return 0, nt.to_dict()


def dumps(doc):
    """The CLI's one-line JSON."""
    return json.dumps(doc, indent=None, separators=(", ", ": "))
