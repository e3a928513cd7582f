# SPDX-License-Identifier: MIT
"""The compiled cffi module (``_topoplace_cffi``, built by meson from include/topoplace*.h)."""

try:
    from ._topoplace_cffi import ffi, lib
except ImportError as e:       # pragma: no cover - depends on the build
    raise ImportError(
        "topoplace: the compiled module _topoplace_cffi is missing or cannot load "
        "libtopoplace (%s). Build with meson and use `meson devenv -C BUILDDIR`, or install "
        "with `meson install`." % e) from e

__all__ = ["ffi", "lib", "has", "MISSING", "LEFT_OUT"]

#: Functions the headers declare but the library the module was built against does not export:
#: the binding leaves them out. A diagnostic, empty in a complete build (a test checks it): the
#: Python layer calls the core functions without asking.
MISSING = tuple(ffi.string(lib.tp__binding_missing).decode("ascii").split())
#: Declarations cffi cannot express (they name another library's types, such as hwloc's
#: hwloc_topology_t); Python uses the buffer-based alternatives.
LEFT_OUT = tuple(ffi.string(lib.tp__binding_left_out).decode("ascii").split())


def has(name):
    """Whether the compiled module offers the function ``name``. The Python layer does not
    ask this for the core calls, which the library always has; it is for callers that want to
    probe a part of the API added later than the build they run on."""
    return hasattr(lib, name)
