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
    assert (imported, unsupported, slurm_bad) == (82, 16, 21)


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


def _yaml_topologies(text):
    """The names of a topology.yaml's topologies (its `- topology: NAME` items)."""
    return re.findall(r"^\s*-\s*topology:\s*['\"]?([^'\"\s#]+)", text, re.M)


ACCEPTED_YAML = [r[0] for r in ROWS if r[0].endswith(".yaml") and r[1] == "accepts"]


@pytest.mark.parametrize("name", ACCEPTED_YAML)
def test_every_topology_of_a_yaml_file(tp, name):
    """Each topology of a file Slurm accepts, read by name, is imported or refused naming the
    feature (not only the cluster_default one the table checks)."""
    from topoplace.importers import topology_from_slurm
    with open(os.path.join(REAL, name), encoding="utf-8") as f:
        text = f.read()
    names = _yaml_topologies(text)
    assert names
    for topo in names:
        try:
            topology_from_slurm(text, 1, topology=topo)
        except tp.ParseError as e:
            assert any(u in str(e) for u in UNSUPPORTED), (topo, str(e))
            assert ("'%s'" % topo) in str(e)


def test_the_yaml_files_hold_the_topologies_counted(tp):
    """51 topologies in the YAML files Slurm accepts: 22 imported, 29 refused by feature."""
    from topoplace.importers import topology_from_slurm
    imported = refused = 0
    for name in ACCEPTED_YAML:
        with open(os.path.join(REAL, name), encoding="utf-8") as f:
            text = f.read()
        for topo in _yaml_topologies(text):
            try:
                topology_from_slurm(text, 1, topology=topo)
                imported += 1
            except tp.ParseError:
                refused += 1
    assert (imported, refused) == (22, 29)
