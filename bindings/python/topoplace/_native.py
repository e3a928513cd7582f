# SPDX-License-Identifier: MIT
"""The compiled cffi module (``_topoplace_cffi``, built by meson from include/topoplace*.h)."""

try:
    from ._topoplace_cffi import ffi, lib
except ImportError as e:       # pragma: no cover - depends on the build
    raise ImportError(
        "topoplace: the compiled module _topoplace_cffi is missing or cannot load "
        "libtopoplace (%s). Build with meson and use `meson devenv -C BUILDDIR`, or install "
        "with `meson install`." % e) from e

__all__ = ["ffi", "lib", "has", "LEFT_OUT"]

#: Declarations cffi cannot express (they name another library's types, such as hwloc's
#: hwloc_topology_t); Python uses the buffer-based alternatives.
LEFT_OUT = tuple(ffi.string(lib.tp__binding_left_out).decode("ascii").split())


def has(name):
    """Whether the compiled module offers the function ``name``: false only for an optional
    part the library was configured without (the scenario importer, without jansson). The
    module is generated from the headers of the library it links, so every other declared
    function is there; nothing asks this for a core call."""
    return hasattr(lib, name)
