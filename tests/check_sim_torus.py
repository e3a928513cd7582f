# SPDX-License-Identifier: MIT
"""tp-bench sim and compare on a torus fleet (--fleet torus:X,Y,Z, bench/sim_torus.c), on a
small 8x8x8 torus:

- the torus policies run (topoplace, topoplace-defrag, first-fit-box, slurm-torus-like,
  ideal) and every other one is left out with its reason printed, not silently;
- every placement of every policy is the job's box: the simulator checks each one
  (sim_torus_is_box) and dies otherwise, and reports the count, which must be every job
  started;
- occupancy and the largest free box's share of the free chips lie in [0, 1], and the largest
  free box is never larger than the torus;
- two runs with one seed agree on every figure but wall times;
- first-fit-box differs from topoplace where it should: topoplace keeps the free space in
  fewer fragments (its objective), and the two do not place alike;
- the samples' CSV has the torus columns; a wrong mix, a trace or a bad spec fails with a
  message; tp-bench compare runs the torus in a grid of its own with the same policies.

usage: check_sim_torus.py TP_BENCH
"""
import json
import os
import subprocess
import sys
import tempfile

TORUS = ["first-fit-box", "slurm-torus-like", "topoplace", "topoplace-defrag", "ideal"]
LEFT_OUT = ["random", "first-fit", "kueue-like", "slurm-block-like", "slurm-tree-like"]
WALL = {"wall_s", "place_us_mean", "defrag_us_mean", "loadavg_1min_at_end", "planner_p99_ms"}
BASE = ["sim", "--fleet", "torus:8,8,8", "--jobs", "300"]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(tp_bench, args, ok=True):
    p = subprocess.run([tp_bench, *args], capture_output=True, text=True)
    if ok and p.returncode != 0:
        sys.exit("tp-bench %s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr))
    return p


def sim(tp_bench, tmp, name, *extra):
    out = os.path.join(tmp, name)
    p = run(tp_bench, BASE + list(extra) + ["--json", out])
    with open(out) as f:
        return json.load(f), p.stdout


def strip_wall(d):
    if isinstance(d, dict):
        return {k: strip_wall(v) for k, v in d.items() if k not in WALL}
    return d


def check_run(d, text, label):
    pol = d["policies"]
    check(sorted(pol) == sorted(TORUS), f"{label}: policies {sorted(pol)}")
    for name in LEFT_OUT:
        check(f"policy {name} left out on torus:8,8,8: it places groups inside the nodes" in text,
              f"{label}: {name} is not named as left out")
    check(d["fleet"]["kind"] == "torus" and d["fleet"]["torus_dims"] == [8, 8, 8] and
          d["fleet"]["gpus"] == 512, f"{label}: fleet {d['fleet']}")
    for name, m in pol.items():
        check(0 <= m["occupancy"] <= 1 + 1e-9, f"{label}: {name} occupancy {m['occupancy']}")
        check(m["jobs_started"] > 0, f"{label}: {name} started no job")
        if name == "ideal":
            continue
        check(m["placements_checked_boxes"] == m["jobs_started"],
              f"{label}: {name} checked {m['placements_checked_boxes']} boxes of "
              f"{m['jobs_started']} jobs")
        check(0 <= m["largest_free_box_share_mean"] <= 1,
              f"{label}: {name} box share {m['largest_free_box_share_mean']}")
        check(0 < m["largest_free_box_mean"] <= 512,
              f"{label}: {name} largest free box {m['largest_free_box_mean']}")
        check(m["free_fragments_mean"] >= 0, f"{label}: {name} fragments")
    ideal = pol["ideal"]["effective_gpu_hours"]
    for name in TORUS:
        check(pol[name]["effective_gpu_hours"] <= ideal * 1.0001,
              f"{label}: {name} beats the ideal bound")


def main():
    tp_bench = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for q in ("besteffort", "easy"):
            a, text = sim(tp_bench, tmp, f"a-{q}.json", "--queue", q)
            b, _ = sim(tp_bench, tmp, f"b-{q}.json", "--queue", q)
            check_run(a, text, f"sim --queue {q}")
            check(strip_wall(a) == strip_wall(b), f"sim --queue {q}: two runs with one seed differ")
            ff, tp = a["policies"]["first-fit-box"], a["policies"]["topoplace"]
            check(tp["free_fragments_mean"] < ff["free_fragments_mean"],
                  f"sim --queue {q}: topoplace leaves {tp['free_fragments_mean']} free fragments, "
                  f"first-fit-box {ff['free_fragments_mean']}")
            check(strip_wall(tp) != strip_wall(ff), f"sim --queue {q}: topoplace = first-fit-box")
        csv = os.path.join(tmp, "series.csv")
        run(tp_bench, BASE + ["--policies", "topoplace,slurm-torus-like", "--csv", csv])
        with open(csv) as f:
            rows = f.read().splitlines()
        check(rows[0].endswith(",largest_free_box,free_fragments"), f"csv header {rows[0]}")
        check(all(len(r.split(",")) == 11 for r in rows[1:]) and len(rows) > 10,
              "csv: rows without the torus columns")
        for args, msg in (
                (BASE + ["--mix", "llm"], "a torus fleet takes the tpu mix"),
                (["sim", "--fleet", "nvl72:576", "--jobs", "50", "--mix", "tpu"],
                 "runs on torus:X,Y,Z fleets only"),
                (["sim", "--fleet", "torus:8,8"], "expected torus:X,Y,Z"),
                (["sim", "--fleet", "torus:0,4,4"], "each extent must be >= 1"),
                (BASE + ["--inference", "4"], "not on a torus fleet")):
            p = run(tp_bench, args, ok=False)
            check(p.returncode != 0 and msg in p.stderr,
                  f"{' '.join(args)}: exit {p.returncode}, {p.stderr.strip()!r}")
        out = os.path.join(tmp, "cmp.json")
        p = run(tp_bench, ["compare", "--fleet", "torus:8x8x8", "--jobs", "200", "--seeds", "2",
                           "--queues", "besteffort", "--json", out])
        with open(out) as f:
            d = json.load(f)
        for cell in d["cells"]:
            check(sorted(cell["policies"]) == sorted(TORUS) and cell["workload"] == "tpu",
                  f"compare: cell {cell['workload']} policies {sorted(cell['policies'])}")
        check("== tpu on torus:8x8x8, queue besteffort" in p.stdout, "compare: no torus table")
        p = run(tp_bench, ["compare", "--fleet", "torus:8,8,8", "--fleets", "nvl72:576"], ok=False)
        check(p.returncode != 0 and "compare of their own" in p.stderr,
              f"compare with a torus and a tree fleet: {p.stderr.strip()!r}")
    if failures:
        sys.exit("%d checks failed" % len(failures))
    print("ok: torus policies place boxes only, deterministic, occupancy in range, "
          "topoplace leaves fewer fragments than first-fit-box")


if __name__ == "__main__":
    main()
