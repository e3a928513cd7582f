#!/usr/bin/python3
"""The shared library exports exactly the functions its public headers declare with TP_API.

usage: check_abi.py NM LIBRARY HEADER...
"""
import re
import subprocess
import sys

DECL = re.compile(r"TP_API\b[^;{]*?\b(tp_[a-z0-9_]+)\s*\(", re.S)


def declared(headers):
    names = set()
    for h in headers:
        with open(h) as f:
            text = f.read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        names.update(DECL.findall(text))
    return names


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    syms = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "TtDdBbRrVvWwi":
            syms.add(parts[2].split("@")[0])
    return syms


def main(argv):
    nm, lib, headers = argv[1], argv[2], argv[3:]
    want = declared(headers)
    have = exported(nm, lib)
    ignore = {"_init", "_fini", "__bss_start", "_edata", "_end"}
    have -= ignore
    extra = sorted(have - want)
    missing = sorted(want - have)
    for s in extra:
        print(f"not ok - exported but not declared: {s}")
    for s in missing:
        print(f"not ok - declared but not exported: {s}")
    print(f"{len(want)} declared, {len(have)} exported")
    ok = not extra and not missing
    print(f"{1 if ok else 0} passed, {0 if ok else 1} failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
