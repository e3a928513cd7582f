# SPDX-License-Identifier: MIT
"""Every `python3 -m topoplace` command in docs/serving.md runs, from the source tree, and its
answer is the text the page shows after it (a line `...` in the page stands for any lines):
the tutorial and the examples cannot drift from what the tool does."""

import os
import re
import shlex
import subprocess

import pytest

from test_cli import python

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
PAGE = os.path.join(ROOT, "docs", "serving.md")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)


def examples():
    """(command, the expected text or None) for each command of the page's sh blocks; the
    expected text is the plain block right after a block of one command."""
    if not os.path.exists(PAGE):
        return []
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    blocks = [(m.group(1), m.group(2), m.start(), m.end()) for m in FENCE.finditer(text)]
    out = []
    for i, (lang, body, _, end) in enumerate(blocks):
        if lang != "sh":
            continue
        cmds = [l for l in body.splitlines() if l.startswith("python3 -m topoplace")]
        nxt = blocks[i + 1] if i + 1 < len(blocks) else None
        want = None
        if len(cmds) == 1 and nxt and nxt[0] == "" and not text[end:nxt[2]].strip():
            want = nxt[1]
        out.extend((c, want if len(cmds) == 1 else None) for c in cmds)
    return out


def matches(got, want):
    """Whether the lines of `got` are those of `want`, a `...` line matching any run."""
    g, w = got.rstrip("\n").split("\n"), want.rstrip("\n").split("\n")

    def at(i, j):
        if j == len(w):
            return i == len(g)
        if w[j].strip() == "...":
            return any(at(k, j + 1) for k in range(i, len(g) + 1))
        return i < len(g) and g[i] == w[j] and at(i + 1, j + 1)
    return at(0, 0)


def test_the_page_has_its_tutorial():
    cmds = [c for c, _ in examples()]
    for f in ("size-llama", "size-moe", "pd-place", "pd-scale", "pd-lose-rack"):
        assert any("tutorial/%s.json" % f in c for c in cmds), f


@pytest.mark.parametrize("cmd, want", examples(), ids=[c for c, _ in examples()])
def test_command_answers_as_the_page_says(tp, cmd, want):
    argv = shlex.split(cmd)
    p = subprocess.run([python()] + argv[1:], cwd=ROOT, capture_output=True, text=True,
                       env=dict(os.environ), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    if want is not None:
        assert matches(p.stdout, want), "%s printed:\n%s\nthe page says:\n%s" % (
            cmd, p.stdout, want)
