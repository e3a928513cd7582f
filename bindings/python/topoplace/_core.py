# SPDX-License-Identifier: MIT
"""What every object family shares: the library handle, the code <-> name tables, string and
array conversion and ownership (:class:`_Owned`). Private: the public names
are re-exported by the package.
"""


from ._native import ffi, lib
from .errors import ClosedError, InvalidArgument

__all__ = ["ffi", "lib", "version", "version_string", "strerror", "err_name", "JOB_CLASSES",
           "LINK_KINDS", "NIC_KINDS", "NONE"]

#: The job classes, as ``Request.job_class`` and ``Cluster.assign(job_class=...)`` take them.
JOB_CLASSES = ("training", "inference", "interactive")
#: The link kinds of a fabric, as ``TopologyBuilder.set_fabric`` takes them.
LINK_KINDS = ("nvlink", "pcie", "ib", "ethernet")
_CLASS_CODE = {"training": lib.TP_CLASS_TRAINING, "inference": lib.TP_CLASS_INFERENCE,
               "interactive": lib.TP_CLASS_INTERACTIVE}
_CLASS_NAME = {v: k for k, v in _CLASS_CODE.items()}
_LINK_CODE = {"nvlink": lib.TP_LINK_NVLINK, "pcie": lib.TP_LINK_PCIE, "ib": lib.TP_LINK_IB,
              "ethernet": lib.TP_LINK_ETHERNET}
_LINK_NAME = {v: k for k, v in _LINK_CODE.items()}
#: The kinds of a NIC, as ``NodeType.set_nic_kind`` takes them.
NIC_KINDS = ("unknown", "rdma", "ethernet")
_NIC_KIND = {"unknown": lib.TP_NIC_UNKNOWN, "rdma": lib.TP_NIC_RDMA,
             "ethernet": lib.TP_NIC_ETHERNET}
_NIC_KIND_NAME = {v: k for k, v in _NIC_KIND.items()}
_DEVICE_STATE = {lib.TP_DEVICE_FREE: "free", lib.TP_DEVICE_HELD: "held",
                 lib.TP_DEVICE_DOWN: "down", lib.TP_DEVICE_CORDONED: "cordoned",
                 lib.TP_DEVICE_SPARE: "spare"}
_STATUS = {0: "ok", lib.TP_EINFEASIBLE: "infeasible", lib.TP_EBUSY: "busy",
           lib.TP_EFRAGMENTED: "fragmented"}
#: ``TP_NONE``: "no such id" in the C API (the Python layer answers None instead).
NONE = lib.TP_NONE


def version():
    """The library's run-time version as ``MAJOR * 10000 + MINOR * 100 + PATCH``."""
    return lib.tp_version()


def version_string():
    """The library's run-time version as a string ("0.3.0")."""
    return _s(lib.tp_version_string())


def strerror(code):
    """The fixed description of an error code."""
    return _s(lib.tp_strerror(code))


def err_name(code):
    """The symbolic name of an error code, without the ``TP_`` prefix ("EINVAL"; "OK" for 0,
    "UNKNOWN" for a code the library does not have; ``tp_err_name``)."""
    return _s(lib.tp_err_name(code))


# -- conversions ------------------------------------------------------------------------------

def _b(s, what="name"):
    """A Python string as a NUL-terminated UTF-8 char array (None stays NULL)."""
    if s is None:
        return ffi.NULL
    if isinstance(s, bytes):
        b = s
    elif isinstance(s, str):
        b = s.encode("utf-8")
    else:
        raise TypeError("%s must be a string, not %s" % (what, type(s).__name__))
    if b"\0" in b:
        raise InvalidArgument("%s %r contains a NUL character" % (what, s))
    return ffi.new("char[]", b)


def _s(p):
    """A C string as a Python string (None for NULL)."""
    return None if p == ffi.NULL else ffi.string(p).decode("utf-8", "replace")


def _keep(keep, x):
    """Append ``x`` to ``keep`` (the buffers a C struct points to) and return it."""
    keep.append(x)
    return x


def _strv(names, keep, what="name"):
    """A ``const char *const *`` array of names, and its length."""
    names = list(names)
    bufs = [_b(n, what) for n in names]
    arr = ffi.new("char *[]", bufs) if bufs else ffi.NULL
    keep.append(bufs)
    keep.append(arr)
    return arr, len(names)


def _coerce(cls, x):
    """``x`` as a ``cls`` dataclass: kept if it is one (or None), else built from a dict
    (keywords) or a tuple (positional)."""
    if x is None or isinstance(x, cls):
        return x
    if isinstance(x, dict):
        return cls(**x)
    return cls(*x)


# -- ownership --------------------------------------------------------------------------------

def _own(ptr, destroy, *keep):
    """Give ``ptr`` to the garbage collector with ``destroy``; ``keep`` (parents' C objects)
    stays alive until ``destroy`` has run, whatever order Python drops things in."""
    def _destroy(p, _keep=keep):
        destroy(p)
    return ffi.gc(ptr, _destroy)


class _Owned:
    """An object that owns one C object; ``close()`` and ``with`` release it."""

    _what = "object"
    _ptr = None

    @property
    def _p(self):
        p = self._ptr
        if p is None:
            raise ClosedError("the %s is closed" % self._what)
        return p

    @property
    def closed(self):
        """Whether :meth:`close` was called (the object can no longer be used)."""
        return self._ptr is None

    def close(self):
        """Give up the C object. It is destroyed now, or when the last object that depends on
        it (a cluster of this topology, a placement of this cluster) is gone."""
        self._ptr = None

    def __enter__(self):
        self._p
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _errmsg(self):
        return ""


