# SPDX-License-Identifier: MIT
"""#19's command-line reproducers, as the issue gives them, still give the documented answer:
a placement status and exit 1 (not a crash, exit 139), within 1 GB of address space (the
table the spread used to size took up to 15.6 GB). Under AddressSanitizer, whose shadow memory
needs terabytes of address space, the bound is the child's peak resident memory instead. The
C-level reproducers are covered by the unit tests the closing note of #19 lists."""

import json
import os
import resource
import subprocess

import pytest

from conftest import python


ASAN = "asan" in os.environ.get("LD_PRELOAD", "")


def _one_gb():
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _place(tmp_path, min_domains):
    doc = {"version": 1,
           "topology": {"levels": ["rack", "node"],
                        "generate": {"counts": [2, 2], "gpus_per_node": 4}},
           "request": {"count": 4, "spread": {"level": "rack", "min_domains": min_domains}}}
    f = tmp_path / "spread.json"
    f.write_text(json.dumps(doc))
    return subprocess.run([python(), "-m", "topoplace", "place", str(f)], capture_output=True,
                          text=True, preexec_fn=None if ASAN else _one_gb, timeout=120)


@pytest.mark.parametrize("min_domains", [4294967295, 10 ** 6, 10 ** 7, 10 ** 8])
def test_spread_over_more_domains_than_exist_is_infeasible(tp, tmp_path, min_domains):
    p = _place(tmp_path, min_domains)
    assert p.returncode == 1, p.stdout + p.stderr
    out = json.loads(p.stdout)
    assert out["status"] == "infeasible", out
    if ASAN:  # the largest resident set of any child so far, in KB
        assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < (1 << 20)
