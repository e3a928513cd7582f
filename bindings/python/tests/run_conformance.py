#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run shared/spec/conformance.py on its examples against `python3 -m topoplace` (this very
interpreter), for meson's 'conformance' suite. Exit 77 (skip) when the shared folder is absent.

    run_conformance.py SHARED_SPEC_DIR [MORE_CASE_DIRS...]
"""

import os
import shlex
import subprocess
import sys

SKIP = 77


def main(argv):
    spec = os.path.abspath(argv[0]) if argv else ""
    checker = os.path.join(spec, "conformance.py")
    if not os.path.isfile(checker):
        print("SKIP: ../shared not found (no %s)" % checker)
        return SKIP
    dirs = [os.path.join(spec, "examples")] + argv[1:]
    cli = "%s -m topoplace" % shlex.quote(sys.executable)
    return subprocess.call([sys.executable, checker, cli] + dirs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
