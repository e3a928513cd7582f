# SPDX-License-Identifier: MIT
"""tp-bench sim --inference (bench/sim_serving.c) on a small run: deterministic for a seed,
every policy reports every column with shares in [0, 100], no share above the bound, and
topoplace (whose caps keep a service's replicas spread over racks) survives a rack loss for a
larger share of service-hours than the packing baselines.

usage: check_sim_serving.py TP_BENCH
"""
import re
import subprocess
import sys

BASE = ["sim", "--fleet", "nvl72:1440", "--inference", "120", "--load", "0.8"]
ROW = re.compile(r"^(\S+)\s+(\d+)\s+([0-9.]+)%\s+([0-9.]+)%\s+([0-9.]+)%\s+(\d+)\s+(\d+)$")


def run(tp_bench, *extra):
    p = subprocess.run([tp_bench, *BASE, *extra], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("tp-bench %s failed: %s" % (" ".join(BASE + list(extra)), p.stderr))
    return p.stdout


def rows(out):
    got = {}
    for line in out.splitlines():
        m = ROW.match(line)
        if m:
            got[m.group(1)] = [float(x) for x in m.groups()[1:]]
    bound = float(re.search(r"; ([0-9.]+)% of the service-hours", out).group(1))
    return got, bound


def main(argv):
    tp_bench = argv[1]
    out = run(tp_bench)
    if out != run(tp_bench):
        sys.exit("two runs with the same seed differ")
    got, bound = rows(out)
    want = {"random", "first-fit", "kueue-like", "slurm-block-like", "slurm-tree-like",
            "topoplace", "topoplace-defrag"}
    if set(got) != want:
        sys.exit("policies %s, expected %s:\n%s" % (sorted(got), sorted(want), out))
    for name, (svc_h, up, rack, feed, eff, _) in got.items():
        if not (svc_h > 0 and eff > 0 and all(0 <= x <= 100 for x in (up, rack, feed))):
            sys.exit("%s: a figure out of range: %s" % (name, got[name]))
        if rack > bound + 1e-9 or feed > rack + 1e-9:
            sys.exit("%s: rack-safe %.1f%% above the bound %.1f%% or below feed-safe %.1f%%"
                     % (name, rack, bound, feed))
    tp = got["topoplace"][2]
    for base in ("first-fit", "kueue-like", "slurm-block-like", "slurm-tree-like"):
        if not tp > got[base][2]:
            sys.exit("topoplace rack-safe %.1f%% is not above %s's %.1f%%\n%s"
                     % (tp, base, got[base][2], out))
    if run(tp_bench, "--seed", "2") == out:
        sys.exit("another seed gives the same run")
    print("1..1\nok 1 - sim --inference: deterministic, in range, topoplace spreads replicas")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
