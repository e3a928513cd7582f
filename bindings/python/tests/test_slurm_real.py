# SPDX-License-Identifier: MIT
"""Real Slurm topology files (tests/data/slurm/real: Slurm's docs and test suite, NVIDIA
topograph's expected outputs), each imported or refused as its README's table says. A file that
Slurm accepts is never refused with a generic syntax error: the refusal names the feature that
is not supported here."""

import os
import re

import pytest

from conftest import HERE

REAL = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "data", "slurm", "real"))

# What a refusal of a file Slurm accepts may say: the unsupported feature, by name.
UNSUPPORTED = ("recognised but not yet supported", "is flat (topology/flat)",
               "every switch is empty", "no block has nodes")
GENERIC = ("expected Key=Value", "not valid YAML", "unknown key")


def table():
    """(file, slurm, result) of every row of the README's table."""
    rows = []
    with open(os.path.join(REAL, "README.md"), encoding="utf-8") as f:
        for line in f:
            m = re.match(r"\| `([^`]+)` \|.*\| (accepts|refuses) \| (.*) \|$", line.rstrip("\n"))
            if m:
                rows.append((m.group(1), m.group(2), m.group(3).replace("\\|", "|")))
    return rows


ROWS = table()


def test_the_table_lists_every_file_once():
    files = sorted(f for f in os.listdir(REAL)
                   if f.endswith((".conf", ".yaml")))
    listed = [r[0] for r in ROWS]
    assert len(listed) == len(set(listed))
    assert sorted(listed) == files
    assert len(files) >= 100


def test_the_counts_are_the_ones_reported():
    imported = sum(r[2].startswith("imported") for r in ROWS)
    unsupported = sum(r[1] == "accepts" and r[2].startswith("refused") for r in ROWS)
    slurm_bad = sum(r[1] == "refuses" for r in ROWS)
    assert (imported, unsupported, slurm_bad) == (80, 18, 21)


@pytest.mark.parametrize("name,slurm,result", ROWS, ids=[r[0] for r in ROWS])
def test_real_file(tp, name, slurm, result):
    from topoplace.importers import topology_from_slurm
    with open(os.path.join(REAL, name), encoding="utf-8") as f:
        text = f.read()
    if result.startswith("imported"):
        topo, warnings = topology_from_slurm(text, 1)
        assert topo.node_count > 0
        m = re.search(r"\((\d+) warnings?\)", result)
        assert len(warnings) == (int(m.group(1)) if m else 0), warnings
        return
    assert slurm == "refuses" or any(u in result for u in UNSUPPORTED), result
    with pytest.raises(tp.ParseError) as e:
        topology_from_slurm(text, 1)
    msg = str(e.value)
    assert result[len("refused: "):] in re.sub(r"line \d+: ", "", msg), msg
    assert not any(g in msg for g in GENERIC), msg
