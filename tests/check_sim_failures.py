# SPDX-License-Identifier: MIT
"""tp-bench sim --failures (bench/sim_failures.c) on a small run: off by default (no failure
table), deterministic for a seed, every job a failure hits is either repaired (topoplace) or
requeued (kueue-like requeues them all), hot spares are used when there are some, and a bad
--spares fails with a message.

usage: check_sim_failures.py TP_BENCH
"""
import re
import subprocess
import sys

BASE = ["sim", "--fleet", "nvl72:1440", "--jobs", "400", "--policies", "topoplace,kueue-like"]


def run(tp_bench, *extra, ok=True):
    p = subprocess.run([tp_bench, *BASE, *extra], capture_output=True, text=True)
    if ok and p.returncode != 0:
        sys.exit("tp-bench %s failed: %s" % (" ".join(extra), p.stderr))
    return p


def table(out):
    """policy -> (nodes, jobs, replaced, anew, requeued, spare) from the failure table."""
    rows = {}
    section = out.split("node failures:", 1)
    if len(section) < 2:
        return rows
    for line in section[1].splitlines():
        m = re.match(r"^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s", line)
        if m:
            rows[m.group(1)] = tuple(int(x) for x in m.groups()[1:])
    return rows


def no_wall(out):
    """The output without wall times (the last column of the policy table)."""
    return [re.sub(r"\s+[0-9.]+$", "", l) for l in out.splitlines()]


def main():
    tp_bench = sys.argv[1]
    plain = run(tp_bench).stdout
    assert "node failures:" not in plain, "failures must be off by default"
    args = ("--failures", "0.01", "--spares", "1")
    a, b = run(tp_bench, *args).stdout, run(tp_bench, *args).stdout
    assert no_wall(a) == no_wall(b), "two runs with one seed differ"
    rows = table(a)
    assert set(rows) == {"topoplace", "kueue-like"}, rows
    for name, (nodes, jobs, replaced, anew, requeued, spare) in rows.items():
        assert nodes > 0 and jobs > 0, (name, rows[name])
        assert replaced + requeued == jobs, (name, rows[name])
        assert anew <= replaced and spare <= replaced, (name, rows[name])
    assert rows["kueue-like"][2] == 0 and rows["kueue-like"][4] == rows["kueue-like"][1]
    assert rows["topoplace"][5] > 0, "no repair used a spare: %r" % (rows["topoplace"],)
    no_spares = table(run(tp_bench, "--failures", "0.01").stdout)
    assert no_spares["topoplace"][5] == 0, no_spares
    bad = run(tp_bench, "--failures", "0.01", "--spares", "1/node", ok=False)
    assert bad.returncode != 0 and "not a level above the node" in bad.stderr, bad.stderr
    print("ok: failures off by default, deterministic, every hit job repaired or requeued")


if __name__ == "__main__":
    main()
