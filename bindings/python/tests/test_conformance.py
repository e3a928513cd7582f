# SPDX-License-Identifier: MIT
"""Every case of shared/spec/examples through the spec's own checker (meson runs the same as
the 'conformance' suite; the 'python' suite leaves this file out)."""

import os
import shlex
import subprocess
import sys

import pytest

from conftest import EXAMPLES, SPEC, python

CHECKER = os.path.join(SPEC, "conformance.py")

pytestmark = pytest.mark.skipif(not os.path.isfile(CHECKER), reason="../shared not found")


def _cases():
    if not os.path.isdir(EXAMPLES):
        return []
    return sorted(f[:-len(".expect.json")] for f in os.listdir(EXAMPLES)
                  if f.endswith(".expect.json"))


def test_cases_are_well_formed():
    p = subprocess.run([sys.executable, CHECKER, "--selftest", EXAMPLES],
                       stdout=subprocess.PIPE, universal_newlines=True)
    assert p.returncode == 0, p.stdout


@pytest.mark.parametrize("case", _cases())
def test_case(tp, tmp_path, case):
    # the checker runs every case of a folder: give it a folder with just this one
    for suffix in (".json", ".expect.json"):
        os.symlink(os.path.join(EXAMPLES, case + suffix), str(tmp_path / (case + suffix)))
    cli = "%s -m topoplace" % shlex.quote(python())
    p = subprocess.run([sys.executable, CHECKER, cli, str(tmp_path)],
                       stdout=subprocess.PIPE, universal_newlines=True)
    assert p.returncode == 0, p.stdout
