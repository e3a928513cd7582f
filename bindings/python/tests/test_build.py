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


def test_the_library_exports_every_declared_function(tp):
    """Fails while the library is behind its header (the binding then leaves functions out:
    place, replace, defrag and the importers when they are not built yet)."""
    from topoplace import _native
    assert _native.MISSING == (), "libtopoplace does not export: %s" % ", ".join(
        _native.MISSING)


def test_constants_come_from_the_header(tp):
    from topoplace._native import lib
    assert lib.TP_MAX_LEVELS == 8 and lib.TP_LEVEL_CLUSTER == -1
    assert lib.TP_NONE == 2 ** 32 - 1 and lib.TP_EINVAL == -1 and lib.TP_ECORRUPT == -11
    assert tp.InvalidArgument.code == lib.TP_EINVAL


def test_gen_cdef_gives_every_init_macro_a_function(tmp_path):
    """Each TP_<NAME>_INIT of a struct becomes tp__init_<name>(): the Python defaults come
    from the header's initialisers, not from numbers typed again."""
    pytest.importorskip("cffi")
    inc = version_header(tmp_path)
    out = tmp_path / "x.cdef"
    csrc = tmp_path / "x.c"
    subprocess.check_call([sys.executable, os.path.join(PKG_SRC, "gen_cdef.py"),
                           "-I", os.path.join(ROOT, "include"), "-I", str(inc),
                           "--cdef", str(out), "--csource", str(csrc), HEADER])
    cdef, code = out.read_text(), csrc.read_text()
    inits = re.findall(r"^\s*#\s*define\s+TP_(\w+)_INIT\b", open(HEADER).read(), re.M)
    assert {"REQUEST", "JOB_OPTIONS", "NODE_OPTIONS", "DEFRAG_POLICY"} <= set(inits)
    for name in (n.lower() for n in inits):
        assert "void tp__init_%s(tp_%s *out);" % (name, name) in cdef
        assert "const tp_%s init = TP_%s_INIT;" % (name, name.upper()) in code


def test_init_functions_store_the_header_initialisers(tp):
    from topoplace._native import ffi, lib
    p = ffi.new("tp_defrag_policy *")
    lib.tp__init_defrag_policy(p)
    assert (p.version, p.migrate, p.preempt, p.allow_interactive, p.max_moves, p.max_cost_s,
            p.min_priority_gap, p.allow_less_local) == (
                lib.TP_DEFRAG_POLICY_VERSION, 1, 1, 0, 2 ** 32 - 1, -1.0, 1, 0)
    r = ffi.new("tp_request *")
    lib.tp__init_request(r)
    assert r.version == lib.TP_REQUEST_VERSION and r.count == 0 and r.id == ffi.NULL
    j = ffi.new("tp_job_options *")
    lib.tp__init_job_options(j)
    assert j.version == lib.TP_JOB_OPTIONS_VERSION and j.checkpoint_s == 60.0
