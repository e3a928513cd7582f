# SPDX-License-Identifier: MIT
"""Exceptions: one class per ``tp_error`` code, and :func:`check` that raises them.

Every exception carries the code (``.code``), its symbolic name (``.name``, "EINVAL") and the
message of the object that failed (the C library names the item and the reason).
"""

__all__ = ["TopoplaceError", "InvalidArgument", "OutOfMemory", "NotFound", "AlreadyExists",
           "Infeasible", "Busy", "Fragmented", "NoPlan", "ParseError", "LimitExceeded",
           "Corrupt", "InternalError", "ClosedError", "check", "error_class"]


class TopoplaceError(Exception):
    """Base of every error the library reports."""

    #: the ``tp_error`` code of the class (negative); 0 for errors of the binding itself
    code = 0
    name = "ERROR"

    def __init__(self, message="", code=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code

    def __str__(self):
        return self.message or self.name


class InvalidArgument(TopoplaceError, ValueError):
    """TP_EINVAL: an argument is invalid; the message names the field."""
    code, name = -1, "EINVAL"


class OutOfMemory(TopoplaceError, MemoryError):
    """TP_ENOMEM: an allocation failed; the object is unchanged."""
    code, name = -2, "ENOMEM"


class NotFound(TopoplaceError, LookupError):
    """TP_ENOTFOUND: a named node, device, level, job or domain does not exist."""
    code, name = -3, "ENOTFOUND"


class AlreadyExists(TopoplaceError):
    """TP_EEXIST: a name is used twice, or a device is already held."""
    code, name = -4, "EEXIST"


class Infeasible(TopoplaceError):
    """TP_EINFEASIBLE: the request can never be placed on this cluster."""
    code, name = -5, "EINFEASIBLE"


class Busy(TopoplaceError):
    """TP_EBUSY: fewer matching devices are free than the request needs."""
    code, name = -6, "EBUSY"


class Fragmented(TopoplaceError):
    """TP_EFRAGMENTED: enough devices are free, but not where the request needs them."""
    code, name = -7, "EFRAGMENTED"


class NoPlan(TopoplaceError):
    """TP_ENOPLAN: no defrag plan within the policy."""
    code, name = -8, "ENOPLAN"


class ParseError(TopoplaceError, ValueError):
    """TP_EPARSE: an input buffer (hwloc XML, topology.conf) could not be parsed."""
    code, name = -9, "EPARSE"


class LimitExceeded(TopoplaceError):
    """TP_ELIMIT: a size limit of the library was exceeded."""
    code, name = -10, "ELIMIT"


class Corrupt(TopoplaceError):
    """TP_ECORRUPT: an internal consistency check failed (a bug in the library)."""
    code, name = -11, "ECORRUPT"


class InternalError(TopoplaceError, RuntimeError):
    """TP_EINTERNAL: the library found its own state inconsistent (a bug); nothing changed."""
    code, name = -12, "EINTERNAL"


class ClosedError(TopoplaceError, ValueError):
    """The Python object was closed; its C object may already be gone."""
    name = "CLOSED"


_CLASSES = {}


def _register():
    # The codes come from the header through the generated cdef, not from the numbers above:
    # the class attributes are only the documented values, checked against lib at import.
    try:
        from ._native import lib
    except ImportError:
        for cls in (InvalidArgument, OutOfMemory, NotFound, AlreadyExists, Infeasible, Busy,
                    Fragmented, NoPlan, ParseError, LimitExceeded, Corrupt, InternalError):
            _CLASSES[cls.code] = cls
        return
    for cls in (InvalidArgument, OutOfMemory, NotFound, AlreadyExists, Infeasible, Busy,
                Fragmented, NoPlan, ParseError, LimitExceeded, Corrupt, InternalError):
        cls.code = getattr(lib, "TP_" + cls.name)
        _CLASSES[cls.code] = cls


_register()


def error_class(code):
    """The exception class of a ``tp_error`` code (TopoplaceError for an unknown one)."""
    return _CLASSES.get(code, TopoplaceError)


def check(rc, obj=None, message=None):
    """Return ``rc`` when it is not negative; else raise the exception class of the code.

    The message is ``message`` when given, else the failing object's message (``obj`` is a
    wrapper with an ``_errmsg()`` method, or None), else the code's fixed description.
    """
    if rc >= 0:
        return rc
    msg = message
    if msg is None and obj is not None:
        try:
            msg = obj._errmsg()
        except Exception:           # a closed object has no message to give
            msg = None
    if not msg:
        try:
            from ._native import ffi, lib
            msg = ffi.string(lib.tp_strerror(rc)).decode("utf-8", "replace")
        except ImportError:
            msg = "error %d" % rc
    cls = error_class(rc)
    if cls is TopoplaceError:
        raise TopoplaceError(msg, rc)
    raise cls(msg)
