# SPDX-License-Identifier: MIT
"""The answers of `tp-bench place` are those of the solver before its speed work (suite `bench`).

usage: check_place_answers.py TP_BENCH

`tp-bench place` reports a checksum (FNV-1a) of every `tp_place` answer it times: the status and
the devices in rank order, call after call over its churning states. The latency work of issue 14
item 6 (src/place_dual.c, src/place_table.c) must not change any answer, so the checksums on
fixed seeds are those the solver gave at commit d429c9c, before that work (both mixes, a fleet of
~10k GPUs, where every request kind is answered and the wide ones go through the top-level dual,
and one of ~100k). The run is repeated to show it is deterministic, and another seed must give
another checksum, so the figure does depend on the answers.

`--calls FILE` writes every timed call as a CSV line: one per call, in call order, cycling the
request mix, with after_baseline 1 exactly for the calls right after a baseline call.

A change that is meant to change answers (a new choice rule) updates EXPECTED here, saying why
in its commit.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

# (GPUs, mix) -> checksum, `--requests 1800 --baseline-requests 0 --seed 1`. The speed work was
# checked against commit d429c9c (5ad173428033629f, 716ce53eef6eb70f, 4a9d084b442b2b69,
# f7dac903d9f3b549); these are the answers after the choice rule of session 6 (branch llm:
# the tightest rack for a single-domain request, the tightest of equal children), whose
# simulator figures the merged tree reproduces exactly.
EXPECTED = {
    (10000, "off"): "92d4c2bca79ff4ef",
    (10000, "on"): "1dcd4cce5e7eba47",
    (100000, "off"): "b03b2c7a18aa917d",
    (100000, "on"): "caba80bb2d0b7e61",
}

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def answers(tmp, gpus, mix, seed=1, ends="off", result=None):
    out = os.path.join(tmp, f"place-{gpus}-{mix}-{seed}-{ends}.json")
    args = [TP_BENCH, "place", "--sizes", str(gpus), "--requests", "1800",
            "--baseline-requests", "0", "--mix", mix, "--seed", str(seed), "--ends", ends,
            "--json", out]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {p.returncode}: {p.stderr}")
    with open(out) as f:
        r = json.load(f)["results"][0]
    check(r["requests"] == 1800, f"place {gpus} mix {mix}: {r['requests']} calls, not 1800")
    check(f"checksum (FNV-1a): {r['answers_fnv1a']}" in p.stdout,
          f"place {gpus} mix {mix}: the printed checksum is not the JSON's")
    if result is not None:
        result.update(r)
    return r["answers_fnv1a"]


def calls_csv(tmp):
    out = os.path.join(tmp, "calls.csv")
    args = [TP_BENCH, "place", "--sizes", "10000", "--requests", "36", "--baseline-requests",
            "5", "--calls", out]
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {p.returncode}: {p.stderr}")
    with open(out) as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == 36, f"--calls: {len(rows)} lines, not 36")
    check(rows and list(rows[0]) == ["gpus", "count", "group", "kind", "after_baseline",
                                     "wall_us", "cpu_us"], "--calls: unexpected columns")
    after = [i for i, r in enumerate(rows) if r["after_baseline"] == "1"]
    check(after == [1, 2, 3, 4, 5], f"--calls: after_baseline on calls {after}, not 1 to 5")
    check(all(r["count"] == rows[i % 18]["count"] and r["kind"] == rows[i % 18]["kind"]
              for i, r in enumerate(rows)), "--calls: the calls do not cycle the mix of 18")
    check(rows[0]["count"] == "1" and rows[17]["count"] == "1024",
          "--calls: the mix does not run from 1 to 1024 GPUs")
    check(all(float(r["wall_us"]) > 0 and float(r["cpu_us"]) > 0 for r in rows),
          "--calls: a call without a time")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        calls_csv(tmp)
        for (gpus, mix), want in EXPECTED.items():
            got = answers(tmp, gpus, mix)
            check(got == want, f"place {gpus} GPUs mix {mix}: answers checksum {got}, expected "
                  f"{want} (the answers of tp_place changed)")
        check(answers(tmp, 10000, "off") == EXPECTED[(10000, "off")],
              "place 10000 mix off: a second run gave other answers")
        check(answers(tmp, 10000, "off", seed=2) != EXPECTED[(10000, "off")],
              "place 10000 mix off: seed 2 gave the checksum of seed 1")
        # --ends on: every job and request has an expected end and the required requests of
        # up to 4 GPUs require their node, so the end rule decides ties: other answers, the
        # same on a second run
        r = {}
        on = answers(tmp, 10000, "off", ends="on", result=r)
        check(on != EXPECTED[(10000, "off")], "place --ends on: the answers without ends")
        check(answers(tmp, 10000, "off", ends="on") == on,
              "place --ends on: a second run gave other answers")
        kinds = [m["kind"] for m in r["mix"] if m["count"] <= 4]
        check(kinds.count("required-node") == 2,
              f"place --ends on: the small required templates are {kinds}")
    if failures:
        sys.exit(f"{len(failures)} check(s) failed")
    print("ok: tp_place answers unchanged on", len(EXPECTED), "runs")


if __name__ == "__main__":
    TP_BENCH = sys.argv[1]
    main()
