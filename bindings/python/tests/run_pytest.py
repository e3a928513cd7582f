#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run pytest on the given folder for meson: exit 77 (skip) without pytest, and treat "no test
collected" (pytest's exit 5) as a failure that says so, never as a quiet pass."""

import sys

SKIP = 77


def main(argv):
    try:
        import pytest
    except ImportError:
        print("SKIP: pytest is not installed for %s" % sys.executable)
        return SKIP
    # --capture=sys: what C code writes to stderr (a sanitizer report) reaches the log even
    # when it aborts the process
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "-rs", "--capture=sys"] + argv)
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print("FAIL: pytest collected no test from %s (wrong folder, or every file failed to "
              "import?)" % " ".join(argv))
        return 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
