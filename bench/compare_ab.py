#!/usr/bin/python3
"""compare_ab.py: one policy's figures from two builds (or two settings), seed by seed.

usage: compare_ab.py [--policy NAME] [--all-seeds] [--json OUT] BEFORE.json AFTER.json

BEFORE and AFTER are the JSON of `tp-bench compare --json` run with the same grid and seeds,
by the build (or the options) before and after a change; usually with `--policies NAME` alone
and many seeds (`--seeds 1,2,...,12`), since a change to one policy does not need the peers
again. Per cell (workload, fleet, queue) it prints the policy's effective GPU-hours after
over before, seed by seed: the mean relative change, its standard error (the seeds' spread
over the square root of their number), and how many seeds gained and lost. Pairing by seed
removes most of the seed-to-seed spread of a cell, which the gain over the best peer (a ratio
of two policies' figures) keeps.

By default a seed that either run flags (a queue emptied inside the window) is left out, as
`tp-bench compare` leaves it out; --all-seeds keeps it (both runs replay the same jobs at the
same intensity, so the pair still compares the same demand). Both files must give each cell
they share at the same intensity; a cell only one of them has is named and skipped.

--policy NAME: the policy compared (default topoplace). --json OUT writes {"bench":
"compare-ab", "before", "after", "policy", "cells": [{"workload", "fleet", "queue", "seeds",
"mean", "stderr", "gains", "losses"}], "mean"} (relative changes, not percent). Exit status: 0,
or 2 on bad input (the file, cell and reason named; nothing written).
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_merge import Bad, read_compare, stats  # noqa: E402  (beside this script)


def load(path, policy):
    doc = read_compare(path)
    cells = {}
    for i, c in enumerate(doc["cells"]):
        try:
            key = (c["workload"], c["fleet"], c["queue"], c["seed"])
            m = c["policies"][policy]
            eff = m["effective_gpu_hours"]
            inten = c["intensity"]
            flagged = bool(c["flagged"])
        except (KeyError, TypeError):
            raise Bad(f"{path}: cells[{i}] has no {policy} figures (run it with --policies "
                      f"{policy}), or lacks workload, fleet, queue, seed, intensity or flagged")
        if not isinstance(eff, (int, float)) or isinstance(eff, bool) or not eff >= 0:
            raise Bad(f"{path}: cells[{i}] policy {policy}: effective_gpu_hours {eff!r} is "
                      f"not a number >= 0")
        cells[key] = (eff, inten, flagged)
    if not cells:
        raise Bad(f"{path}: no cell")
    return cells


def main(argv):
    policy, all_seeds, out, files = "topoplace", False, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--policy", "--json"):
            if i + 1 == len(argv):
                raise Bad(f"{a}: needs a value")
            if a == "--policy":
                policy = argv[i + 1]
            else:
                out = argv[i + 1]
            i += 1
        elif a == "--all-seeds":
            all_seeds = True
        elif a.startswith("-"):
            raise Bad(f"unknown option '{a}' (--policy NAME, --all-seeds, --json OUT)")
        else:
            files.append(a)
        i += 1
    if len(files) != 2:
        raise Bad("give two files: BEFORE.json AFTER.json")
    before, after = load(files[0], policy), load(files[1], policy)
    groups, only = {}, {}
    for path, mine, other in ((files[0], before, after), (files[1], after, before)):
        for key in mine:
            if key not in other:
                only.setdefault((key[:3], path), []).append(key[3])
    for (cell, path), seeds in only.items():
        print(f"compare_ab: {cell[0]} on {cell[1]}, {cell[2]}: seed(s) "
              f"{','.join(map(str, sorted(seeds)))} only in {path}: left out", file=sys.stderr)
    if not any(key in after for key in before):
        raise Bad(f"{files[0]} and {files[1]} share no cell (workload, fleet, queue, seed)")
    for key in before:
        if key not in after:
            continue
        (b, bi, bf), (a, ai, af) = before[key], after[key]
        if bi != ai:
            raise Bad(f"{key[0]} on {key[1]}, {key[2]}, seed {key[3]}: intensity {bi} in "
                      f"{files[0]} but {ai} in {files[1]} (not the same workload)")
        groups.setdefault(key[:3], [])
        if (all_seeds or not (bf or af)) and b > 0:  # 0: a flagged seed's empty window
            groups[key[:3]].append(a / b - 1)
    rows = []
    print(f"compare_ab: {policy}, {files[1]} over {files[0]}, seed by seed"
          f"{' (flagged seeds kept)' if all_seeds else ''}")
    print(f"{'workload':<12} {'fleet':<12} {'queue':<10} seeds    change   stderr  gains losses")
    for key, v in groups.items():
        n = len(v)
        if n == 0:
            print(f"{key[0]:<12} {key[1]:<12} {key[2]:<10}     0  (every seed flagged)")
            continue
        mean, spread = stats(v)
        se = spread / math.sqrt(n)
        gains, losses = sum(1 for x in v if x > 0), sum(1 for x in v if x < 0)
        rows.append({"workload": key[0], "fleet": key[1], "queue": key[2], "seeds": n,
                     "mean": mean, "stderr": se, "gains": gains, "losses": losses})
        print(f"{key[0]:<12} {key[1]:<12} {key[2]:<10} {n:5d} {100 * mean:+8.2f}% "
              f"{100 * se:7.2f}  {gains:5d} {losses:6d}")
    if not rows:
        raise Bad("no cell with an unflagged seed in both files (--all-seeds keeps them)")
    overall = sum(r["mean"] for r in rows) / len(rows)
    print(f"mean over the {len(rows)} cells: {100 * overall:+.3f}%")
    if out:
        with open(out, "w") as f:
            json.dump({"bench": "compare-ab", "before": files[0], "after": files[1],
                       "policy": policy, "cells": rows, "mean": overall}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Bad as e:
        print(f"compare_ab: {e}", file=sys.stderr)
        sys.exit(2)
