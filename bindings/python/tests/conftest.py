# SPDX-License-Identifier: MIT
"""Shared fixtures. Run through meson (`meson test -C BUILD --suite python`), which puts the
package's source folder and the build's folder on PYTHONPATH; run by hand with
`meson devenv -C BUILD /usr/bin/python3 -m pytest bindings/python/tests`."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_SRC = os.path.dirname(HERE)
# shared/ sits next to the project checkout (../shared from the source tree)
SHARED = os.environ.get("TOPOPLACE_SHARED") or os.path.normpath(
    os.path.join(PKG_SRC, "..", "..", "..", "shared"))
SPEC = os.path.join(SHARED, "spec")
EXAMPLES = os.path.join(SPEC, "examples")

if PKG_SRC not in sys.path:
    sys.path.append(PKG_SRC)        # the pure-Python parts work without a build


def python():
    """The interpreter the CLI runs with (meson passes the one it built for)."""
    return os.environ.get("TOPOPLACE_PYTHON") or sys.executable


@pytest.fixture(scope="session")
def tp():
    """The package with its compiled module; skips when the module is not built."""
    try:
        import topoplace
        topoplace.Topology      # loads the compiled module
    except ImportError as e:
        pytest.skip("the compiled module is not available: %s" % e)
    return topoplace


