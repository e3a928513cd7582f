#!/usr/bin/python3
"""Each public header compiles alone as C11 under -pedantic -Werror, and as C++ (extern "C").

usage: check_headers.py CC CXX INCDIR... -- HEADER...
"""
import os
import subprocess
import sys
import tempfile


def main(argv):
    sep = argv.index("--")
    cc, cxx, incdirs, headers = argv[1], argv[2], argv[3:sep], argv[sep + 1:]
    flags = [f"-I{d}" for d in incdirs]
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for i, header in enumerate(headers):
            name = os.path.basename(header)
            src = os.path.join(tmp, f"h{i}.c")
            with open(src, "w") as f:
                f.write(f'#include "{name}"\n#include "{name}"\nint tp_header_check_{i};\n')
            runs = [[cc, "-std=c11", "-pedantic", "-Wall", "-Wextra", "-Werror",
                     "-fsyntax-only", *flags, src]]
            if cxx:
                runs.append([cxx, "-x", "c++", "-std=c++11", "-pedantic", "-Wall", "-Werror",
                             "-fsyntax-only", *flags, src])
            for cmd in runs:
                r = subprocess.run(cmd, capture_output=True, text=True)
                lang = "C++" if cmd[0] == cxx else "C11"
                if r.returncode:
                    failed += 1
                    print(f"not ok - {name} ({lang})\n{r.stderr}")
                else:
                    print(f"ok - {name} compiles alone ({lang})")
    print(f"{len(headers) * (2 if cxx else 1) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
