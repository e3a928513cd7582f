#!/usr/bin/python3
"""compare_merge.py: one grid out of several `tp-bench compare --json` files.

usage: compare_merge.py [--md] [--json OUT] FILE...

The full grid is too long for one run on a small machine, so it is run in parts (one
`tp-bench compare` per fleet, say) and the policies one changes are rerun alone
(`--policies topoplace`). This script puts the parts back together and computes what one
`tp-bench compare` over the whole grid would print: per workload, fleet and queue discipline,
each policy's gain over the best peer (the best mean of kueue-like, slurm-block-like,
slurm-tree-like; on torus fleets of first-fit-box, slurm-torus-like) seed by seed, its mean,
its spread and its label; then the whole grid's mean gain per policy and its gain and loss
counts. The rules are bench/compare.c's (cmp_group, cmp_overall), so on the files of one run
it gives that run's `summary` and `overall` (tests/check_bench.py checks it).

Merging: a cell is (workload, fleet, queue, seed). A later FILE overrides an earlier one policy
by policy, so `compare_merge.py peers.json ours.json` takes ours.json's topoplace over
peers.json's. A seed is flagged, as compare flags it, when its window is too short or the
queue of a policy the merge keeps empties inside it: files from compare since session 32 say
which (the cell's `window_kept`, each policy's `queue_empty_share`), so a policy a later file
replaces takes its queue's flag with it; for an older file (or a flag its figures do not
explain) the file's flag stands, whichever policy raised it. Every FILE giving a cell must have run it
at the same intensity (the load or compression the grid picked), or the figures would not be of
one workload: such input is refused, naming the files, the cell and both intensities. A group
(workload, fleet, queue) whose unflagged seeds lack a policy in some seed has no figure for it.

--md prints the per-group table as Markdown; --json OUT writes {"bench": "compare-merge",
"inputs", "summary", "overall"} with compare's summary and overall fields; a summary entry also
has "seeds" (the unflagged seeds used) and "best" (the best peer, null when no peer ran).
Exit status: 0, or 2 on bad input (nothing written).
"""
import json
import math
import sys

PEERS = ("kueue-like", "slurm-block-like", "slurm-tree-like", "first-fit-box",
         "slurm-torus-like")


class Bad(Exception):
    pass


def stats(v):
    """Mean and sample standard deviation, as bench/compare.c's cmp_stats."""
    n = len(v)
    mean = sum(v) / n if n else 0.0
    spread = math.sqrt(sum((x - mean) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    return mean, spread


def read_compare(path):
    """The document of a `tp-bench compare --json` file, its "cells" a list (bench/compare_ab.py
    reads them too)."""
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise Bad(f"{path}: cannot read it as JSON: {e}")
    if not isinstance(doc, dict) or doc.get("bench") != "compare":
        raise Bad(f"{path}: not the JSON of `tp-bench compare` (no \"bench\": \"compare\")")
    if not isinstance(doc.get("cells"), list):
        raise Bad(f"{path}: no \"cells\" list")
    return doc


def load(paths):
    cells = {}   # (workload, fleet, queue, seed) -> dict
    order = []   # groups in the order first seen
    policies = []
    for path in paths:
        doc = read_compare(path)
        for i, c in enumerate(doc["cells"]):
            try:
                key = (c["workload"], c["fleet"], c["queue"], int(c["seed"]))
                pols = c["policies"]
                flagged = bool(c["flagged"])
            except (KeyError, TypeError, ValueError):
                raise Bad(f"{path}: cells[{i}] lacks workload, fleet, queue, seed, flagged "
                          "or policies")
            intensity = c.get("intensity")
            cell = cells.get(key)
            if cell is None:
                cell = cells[key] = {"policies": {}, "flagged": False, "intensity": None,
                                     "short_window": False, "emptied": {}}
                if key[:3] not in order:
                    order.append(key[:3])
            if intensity is not None:
                if cell["intensity"] is not None and cell["intensity"][0] != intensity:
                    raise Bad(f"{path}: {key[0]} on {key[1]}, queue {key[2]}, seed {key[3]} ran "
                              f"at intensity {intensity}, {cell['intensity'][1]} at "
                              f"{cell['intensity'][0]}: not the same workload")
                cell["intensity"] = (intensity, path)
            # Why the cell is flagged, where the file says (compare's JSON since session 32:
            # the window and each policy's queue): then a policy a later file replaces takes
            # its queue's flag with it. A flag the file does not explain so is kept.
            exact = isinstance(c.get("window_kept"), (int, float)) and all(
                isinstance(m, dict) and isinstance(m.get("queue_empty_share"), (int, float))
                for m in pols.values())
            if exact:
                cell["short_window"] |= c["window_kept"] < 0.5
                explained = c["window_kept"] < 0.5 or any(
                    m["queue_empty_share"] > 0 for m in pols.values())
                cell["flagged"] |= flagged and not explained
            else:
                cell["flagged"] |= flagged
            for name, m in pols.items():
                v = m.get("effective_gpu_hours") if isinstance(m, dict) else None
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise Bad(f"{path}: cells[{i}] policy {name}: effective_gpu_hours is "
                              f"{v!r}, not a number")
                cell["policies"][name] = v
                if exact:
                    cell["emptied"][name] = m["queue_empty_share"] > 0
                else:
                    cell["emptied"].pop(name, None)  # the file's flag stands for it
                if name not in policies:
                    policies.append(name)
    for cell in cells.values():
        cell["flagged"] |= cell["short_window"] or any(cell["emptied"].values())
    return cells, order, policies


def group(cells, key, policies):
    """compare.c's cmp_group for one workload, fleet and queue: None when no seed is used."""
    seeds = sorted(s for (w, f, q, s) in cells if (w, f, q) == key)
    used = [cells[key + (s,)] for s in seeds if not cells[key + (s,)]["flagged"]]
    if not used:
        return None
    out = {"workload": key[0], "fleet": key[1], "queue": key[2], "seeds": len(used),
           "policies": {}}
    mean = {}
    for name in policies:
        if all(name in c["policies"] for c in used):
            mean[name] = stats([c["policies"][name] for c in used])
    peers = [p for p in PEERS if p in mean]
    best = max(peers, key=lambda p: mean[p][0]) if peers else None  # a tie: PEERS' order
    out["best"] = best
    ideal = mean.get("ideal")
    for name in policies:
        if name not in mean:
            continue
        r = [c["policies"][name] / c["policies"][best] - 1
             for c in used if best and c["policies"][best] > 0]
        gain, spread = stats(r) if r else (math.nan, math.nan)
        real = len(r) > 1 and abs(gain) > spread and name != best
        gap = 1 - mean[name][0] / ideal[0] if ideal and ideal[0] > 0 else math.nan
        out["policies"][name] = {"mean": mean[name][0], "spread": mean[name][1],
                                 "gain": gain, "gain_spread": spread, "gain_real": real,
                                 "gap": gap}
    return out


def overall(summary, name):
    cells = gains = losses = ngap = 0
    gain = gap = 0.0
    for g in summary:
        p = g["policies"].get(name)
        if p is None or math.isnan(p["gain"]):
            continue
        cells += 1
        gain += p["gain"]
        if p["gain_real"]:
            if p["gain"] > 0:
                gains += 1
            else:
                losses += 1
        if not math.isnan(p["gap"]):
            gap += p["gap"]
            ngap += 1
    return {"cells": cells, "mean_gain": gain / cells if cells else math.nan, "gains": gains,
            "losses": losses, "mean_gap": gap / ngap if ngap else math.nan}


def label(p):
    if math.isnan(p["gain"]):
        return ""
    if not p["gain_real"]:
        return "~"
    return "gain" if p["gain"] > 0 else "loss"


def pct(x):
    return "-" if x is None or math.isnan(x) else "%+.2f%%" % (100 * x)


def report(summary, policies, files, md):
    ours = [p for p in policies if p not in PEERS and p != "ideal"]
    lone = [g for g in summary if not g["best"]]
    print(f"compare_merge: {len(files)} file(s), {len(summary)} cells (workload, fleet, queue) "
          f"with an unflagged seed, {len(summary) - len(lone)} of them with a peer to compare "
          "with")
    if md:
        print("| workload | fleet | queue | seeds | best peer | " +
              " | ".join(ours) + " |")
        print("|---" * (5 + len(ours)) + "|")
    for g in summary:
        if not g["best"]:
            print(f"{g['workload']} on {g['fleet']}, queue {g['queue']}: no peer in the files, "
                  "no gain")
            continue
        cols = []
        for name in ours:
            p = g["policies"].get(name)
            if p is None or math.isnan(p["gain"]):
                cols.append("-")  # not in every unflagged seed, or no peer to compare with
            else:
                cols.append("%s ± %.2f %s" % (pct(p["gain"]), 100 * p["gain_spread"], label(p)))
        if md:
            print(f"| {g['workload']} | {g['fleet']} | {g['queue']} | {g['seeds']} | "
                  f"{g['best'] or '-'} | " + " | ".join(cols) + " |")
        else:
            print(f"{g['workload']:<12} {g['fleet']:<12} {g['queue']:<10} {g['seeds']} "
                  f"{g['best'] or '-':<17} " + "   ".join(
                      f"{n} {c}" for n, c in zip(ours, cols)))
    print("\n== the whole grid: per policy, the mean over the cells of its gain over the best "
          "peer")
    print("%-17s %6s %10s %6s %6s %6s %9s" % ("policy", "cells", "mean_gain", "gain", "loss",
                                             "level", "mean_gap"))
    for name in policies:
        v = overall(summary, name)
        if v["cells"] == 0:
            continue
        print("%-17s %6d %10s %6d %6d %6d %9s" % (
            name, v["cells"], pct(v["mean_gain"]), v["gains"], v["losses"],
            v["cells"] - v["gains"] - v["losses"],
            "-" if math.isnan(v["mean_gap"]) else "%.2f%%" % (100 * v["mean_gap"])))


def nan_to_none(x):
    if isinstance(x, float) and math.isnan(x):
        return None
    if isinstance(x, dict):
        return {k: nan_to_none(v) for k, v in x.items()}
    if isinstance(x, list):
        return [nan_to_none(v) for v in x]
    return x


def main(argv):
    md, out, files = False, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--md":
            md = True
        elif a == "--json":
            if i + 1 == len(argv):
                raise Bad("--json: needs a file name")
            out = argv[i + 1]
            i += 1
        elif a.startswith("-"):
            raise Bad(f"unknown option '{a}' (--md, --json OUT)")
        else:
            files.append(a)
        i += 1
    if not files:
        raise Bad("no input: give the JSON files of `tp-bench compare --json`")
    cells, order, policies = load(files)
    summary = [g for g in (group(cells, k, policies) for k in order) if g]
    if not summary:
        raise Bad("every cell of the input is flagged: no figure")
    report(summary, policies, files, md)
    if out:
        doc = {"bench": "compare-merge", "inputs": files,
               "summary": summary,
               "overall": {n: overall(summary, n) for n in policies}}
        with open(out, "w") as f:
            json.dump(nan_to_none(doc), f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Bad as e:
        print(f"compare_merge: {e}", file=sys.stderr)
        sys.exit(2)
