# SPDX-License-Identifier: MIT
"""The generated binding: the cdef comes from the header and covers all of it."""

import os
import re
import subprocess
import sys

import pytest

from conftest import PKG_SRC

ROOT = os.path.dirname(os.path.dirname(PKG_SRC))
HEADER = os.path.join(ROOT, "include", "topoplace.h")


def version_header(tmp_path):
    """A folder with a topoplace-version.h made from its template (as meson makes it)."""
    inc = tmp_path / "include"
    inc.mkdir()
    tmpl = open(os.path.join(ROOT, "include", "topoplace-version.h.in")).read()
    for k, v in (("TP_VERSION_MAJOR", "0"), ("TP_VERSION_MINOR", "1"),
                 ("TP_VERSION_PATCH", "0"), ("TP_VERSION", "0.1.0")):
        tmpl = tmpl.replace("@%s@" % k, v)
    (inc / "topoplace-version.h").write_text(tmpl)
    return inc


def test_gen_cdef_turns_defines_and_enums_into_dots(tmp_path):
    pytest.importorskip("cffi")
    inc = version_header(tmp_path)
    out = tmp_path / "x.cdef"
    subprocess.check_call([sys.executable, os.path.join(PKG_SRC, "gen_cdef.py"),
                           "-I", os.path.join(ROOT, "include"), "-I", str(inc),
                           "--cdef", str(out), HEADER])
    cdef = out.read_text()
    for name in ("TP_MAX_LEVELS", "TP_MAX_NODE_DEVICES", "TP_LEVEL_CLUSTER", "TP_NONE",
                 "TP_REQUEST_VERSION", "TP_VERSION_NUMBER"):
        assert "#define %s ..." % name in cdef
    assert re.search(r"TP_EINVAL,\s", cdef) and "= -1" not in cdef
    # every function of the header is declared
    declared = set(re.findall(r"\b(tp_\w+)\s*\(", open(HEADER).read()))
    assert declared and all(re.search(r"\b%s\s*\(" % f, cdef) for f in declared)


def test_every_declared_function_is_bound(tp):
    """No run-time scaffolding: every function of topoplace.h is in the module, except what
    cffi cannot express (LEFT_OUT), and nothing reports functions missing from the library."""
    from topoplace import _native
    declared = set(re.findall(r"TP_API\b[^;{]*?\b(tp_[a-z0-9_]+)\s*\(",
                              re.sub(r"/\*.*?\*/", "", open(HEADER).read(), flags=re.S), re.S))
    assert len(declared) > 150
    unbound = sorted(f for f in declared if not hasattr(_native.lib, f)
                     and f not in _native.LEFT_OUT)
    assert unbound == []
    assert not hasattr(_native, "MISSING") and not hasattr(_native.lib, "tp__binding_missing")


def test_constants_come_from_the_header(tp):
    from topoplace._native import lib
    assert lib.TP_MAX_LEVELS == 8 and lib.TP_LEVEL_CLUSTER == -1
    assert lib.TP_NONE == 2 ** 32 - 1 and lib.TP_EINVAL == -1 and lib.TP_ECORRUPT == -11
    assert tp.InvalidArgument.code == lib.TP_EINVAL


def init_structs():
    """Names ("request") of the structs with a TP_<NAME>_INIT initialiser in any public
    header."""
    names = []
    for h in sorted(os.listdir(os.path.join(ROOT, "include"))):
        if h.endswith(".h"):
            text = open(os.path.join(ROOT, "include", h)).read()
            names += [n.lower() for n in re.findall(r"^\s*#\s*define\s+TP_(\w+)_INIT\b", text,
                                                    re.M)]
    return names


def test_every_init_macro_has_an_init_function(tp):
    """Each TP_<NAME>_INIT has tp_<name>_init(ptr, version), and the Python layer reads its
    defaults through it (no initialiser is stored by generated code)."""
    from topoplace import _defaults
    from topoplace._native import ffi, lib
    names = init_structs()
    assert {"request", "job_options", "node_options", "cluster_options", "fit",
            "defrag_policy", "defrag_stats", "slurm_options", "nvsmi_options", "pd_request",
            "step_model", "sizing_options", "scenario_options", "model_desc"} <= set(names)
    for name in names:
        version = getattr(lib, "TP_%s_VERSION" % name.upper())
        p = _defaults.c_init(name)
        assert p.version == version, name
        q = ffi.new("tp_%s *" % name)
        q.version = 12345
        assert getattr(lib, "tp_%s_init" % name)(q, version + 1) == lib.TP_EINVAL, name
        assert getattr(lib, "tp_%s_init" % name)(q, 0) == lib.TP_EINVAL, name
        assert q.version == 12345, name
        assert getattr(lib, "tp_%s_init" % name)(ffi.NULL, version) == lib.TP_EINVAL, name
    assert not hasattr(lib, "tp__init_request")


def test_init_functions_give_the_header_defaults(tp):
    from topoplace import _defaults
    from topoplace._native import ffi, lib
    p = _defaults.c_init("defrag_policy")
    assert (p.version, p.migrate, p.preempt, p.allow_interactive, p.max_moves, p.max_cost_s,
            p.min_priority_gap, p.allow_less_local) == (
                lib.TP_DEFRAG_POLICY_VERSION, 1, 1, 0, 2 ** 32 - 1, -1.0, 1, 0)
    r = _defaults.c_init("request")
    assert r.version == lib.TP_REQUEST_VERSION and r.count == 0 and r.id == ffi.NULL
    j = _defaults.c_init("job_options")
    assert j.version == lib.TP_JOB_OPTIONS_VERSION and j.checkpoint_s == 60.0
    assert _defaults.SIZING_OPTIONS["mem_utilisation"] == 0.9
    assert _defaults.MODEL_DESC["weight_bytes"] == 2.0
