# SPDX-License-Identifier: MIT
"""The simulator on the real traces of ../shared/traces (suite `shared`).

usage: check_bench_traces.py TP_BENCH SHARED_DIR

Replays the first rows of each job trace on a small NVL72 fleet under the topology-aware
policies and first-fit, and checks that every row was read, jobs ran, and topoplace kept full
locality. Exits 77 (meson: skipped) and says so when ../shared/traces is absent.
"""
import json
import os
import subprocess
import sys
import tempfile

TRACES = [("philly_pollux.csv", 4000, 48), ("alibaba_openb2023.csv", 3000, 1),
          ("alibaba_dlrm2025_gpu.csv", 0, 1)]  # 0: every row (its first 3,000 all arrive at 0)


def main():
    tp_bench, shared = sys.argv[1], sys.argv[2]
    tdir = os.path.join(shared, "traces")
    if not os.path.isdir(tdir):
        print(f"SKIPPED: {tdir} is absent; the real-trace replays did not run")
        return 77
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, limit, compress in TRACES:
            path = os.path.join(tdir, name)
            out = os.path.join(tmp, name + ".json")
            p = subprocess.run([tp_bench, "sim", "--trace", path, "--limit", str(limit),
                                "--compress", str(compress), "--fleet", "nvl72:2000",
                                "--policies", "first-fit,kueue-like,topoplace,topoplace-defrag",
                                "--json", out], capture_output=True, text=True)
            if p.returncode != 0:
                print(f"FAIL: {name}: exit {p.returncode}: {p.stderr}")
                failures += 1
                continue
            d = json.load(open(out))
            pol = d["policies"]
            jobs = d["workload"].get("jobs", 0)
            ok = (jobs == limit or (limit == 0 and jobs > 0)) and all(
                pol[x]["jobs_started"] > 0 and pol[x]["effective_gpu_hours"] > 0 for x in pol)
            ok = ok and pol["topoplace"]["full_locality_share"] == 1
            print(("ok  " if ok else "FAIL") + f" {name}: {jobs} jobs read; effective GPU-h " +
                  ", ".join(f"{x} {pol[x]['effective_gpu_hours']:.0f}" for x in sorted(pol)))
            failures += not ok
        failures += check_short_trace_slices(tp_bench, shared)
    return 1 if failures else 0


def check_short_trace_slices(tp_bench, shared):
    """openb has about 7,000 rows: `compare` with 20,000 rows per seed (its default) must give
    seeds 1-3 disjoint slices of a quarter of the trace each and say so, not stop."""
    p = subprocess.run([tp_bench, "compare", "--workloads", "openb", "--fleets", "hgx:512",
                        "--queues", "besteffort", "--seeds", "3", "--shared", shared,
                        "--policies", "kueue-like,ideal"], capture_output=True, text=True)
    rows = sum(1 for _ in open(os.path.join(shared, "traces", "alibaba_openb2023.csv"))) - 1
    want = f"{rows // 4} trace rows per seed (the trace is too short for 20000)"
    ok = p.returncode == 0 and want in p.stdout and "rows per seed instead of 20000" in p.stderr
    print(("ok  " if ok else "FAIL") + f" compare on openb ({rows} rows): '{want}'" +
          ("" if ok else f": exit {p.returncode}: {p.stderr[-500:]}"))
    return not ok


if __name__ == "__main__":
    sys.exit(main())
