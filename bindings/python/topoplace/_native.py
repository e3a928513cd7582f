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
#: the binding leaves them out. Empty in a complete build.
MISSING = tuple(ffi.string(lib.tp__binding_missing).decode("ascii").split())
#: Declarations cffi cannot express (they name another library's types, such as hwloc's
#: hwloc_topology_t); Python uses the buffer-based alternatives.
LEFT_OUT = tuple(ffi.string(lib.tp__binding_left_out).decode("ascii").split())


def has(name):
    """Whether the library offers ``name`` (the hwloc importer, the defrag planner...): parts
    of the API that land later are used when present."""
    return hasattr(lib, name)
