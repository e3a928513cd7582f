# SPDX-License-Identifier: MIT
"""The Python tutorial (docs/python.md) runs as written: its ``python`` blocks in order, in one
namespace. A comment line right after a ``print(...)`` line is the output the tutorial shows;
one right after another one-line statement, ``# topoplace.errors.Class: message``, is the
exception that statement raises."""

import contextlib
import io
import os
import re

from conftest import PKG_SRC

DOC = os.path.join(os.path.dirname(os.path.dirname(PKG_SRC)), "docs", "python.md")
RAISES = re.compile(r"^# (topoplace\.\w+\.\w+): (.*)$")


def blocks():
    """The ``python`` code blocks of the tutorial, in order."""
    return re.findall(r"^```python\n(.*?)^```", open(DOC).read(), re.S | re.M)


def run_raising(lines, ns):
    """Run each statement followed by a ``# topoplace.errors.X: message`` line; check both."""
    for src, shown in zip(lines, lines[1:]):
        m = RAISES.match(shown.strip())
        if not m:
            continue
        try:
            exec(src, ns)
        except Exception as e:                # noqa: BLE001 - the class is checked below
            got = "%s.%s" % (type(e).__module__, type(e).__name__), str(e)
        else:
            got = None
        assert got == (m.group(1), m.group(2)), src


def test_the_tutorial_runs_as_written(tp):
    found = blocks()
    assert len(found) >= 4, "docs/python.md lost its examples"
    ns = {}
    for block in found:
        lines = block.splitlines()
        if any(RAISES.match(line.strip()) for line in lines):
            run_raising(lines, ns)
            continue
        shown = [line.strip()[2:] for prev, line in zip(lines, lines[1:])
                 if line.strip().startswith("# ") and "print(" in prev]
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.replace("    ...", "    pass"), DOC, "exec"), ns)
        assert out.getvalue().splitlines() == shown
