#!/usr/bin/python3
"""The shared library imports nothing that can take its embedder down: no __assert_fail (a live
assert), no abort, exit or _exit. Reads `nm -D --undefined-only`, as check_abi.py reads the
exports (issue #19 item 11).

usage: check_imports.py NM LIBRARY
"""
import subprocess
import sys

FORBIDDEN = {"__assert_fail", "__assert_perror_fail", "__assert", "abort", "exit", "_exit",
             "_Exit", "quick_exit"}


def imported(nm, lib):
    out = subprocess.run([nm, "-D", "--undefined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if parts:
            names.add(parts[-1].split("@")[0])
    return names


def main(argv):
    nm, lib = argv[1], argv[2]
    have = imported(nm, lib)
    bad = sorted(have & FORBIDDEN)
    for s in bad:
        print(f"not ok - {lib} imports {s}")
    print(f"{len(have)} imports, {len(bad)} forbidden")
    ok = not bad and len(have) > 0
    print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
