"""Exceptions raised by zeusc.

Every failure of the C library becomes the natural Python exception, carrying the library's
message (which names the file, GPU, window or parameter and what was expected):

========================================  ===========================================
C status                                  raised
========================================  ===========================================
ZEUS_EINVAL, ZEUS_ERANGE, ZEUS_EEXIST,    :class:`ZeusValueError` (a ``ValueError``)
ZEUS_EPARSE
ZEUS_ENOENT                               :class:`ZeusFileNotFoundError` (a ``FileNotFoundError``);
                                          a ``ValueError`` where the thing not found is a window
                                          or a GPU index, as in the original
ZEUS_EPERM                                :class:`ZeusPermissionError` (a ``PermissionError``)
ZEUS_EIO                                  :class:`ZeusOSError` (an ``OSError``)
ZEUS_ENOTSUP                              :class:`ZeusNotSupportedError` (a ``NotImplementedError``)
ZEUS_ENOMEM                               :class:`ZeusMemoryError` (a ``MemoryError``)
ZEUS_ETIMEDOUT                            :class:`ZeusTimeoutError` (a ``TimeoutError``)
ZEUS_ENET                                 :class:`ZeusConnectionError` (a ``ConnectionError``)
anything else (device errors, lost GPU,   :class:`ZeusRuntimeError` (a ``RuntimeError``)
state errors, ZEUS_EBUSY: a setting
another client of a zeus daemon holds)
========================================  ===========================================

Each carries ``code`` (the negative C status) and ``errname`` (``"ZEUS_EINVAL"``), and derives from
:class:`ZeusError`, so ``except zeusc.ZeusError`` catches every library failure.
"""
from __future__ import annotations


class ZeusError(Exception):
    """Base of every exception that carries a libzeus status code."""

    code: int = 0
    errname: str = ""


class ZeusValueError(ZeusError, ValueError):
    """A bad argument, option, file content or state request (ZEUS_EINVAL, ERANGE, EEXIST, EPARSE)."""


class ZeusFileNotFoundError(ZeusError, FileNotFoundError):
    """Something named does not exist (ZEUS_ENOENT)."""


class ZeusPermissionError(ZeusError, PermissionError):
    """The device or file refused the operation (ZEUS_EPERM), e.g. setting a power limit without root."""


class ZeusOSError(ZeusError, OSError):
    """An input/output error (ZEUS_EIO)."""


class ZeusNotSupportedError(ZeusError, NotImplementedError):
    """The device cannot do this (ZEUS_ENOTSUP)."""


class ZeusMemoryError(ZeusError, MemoryError):
    """Out of memory (ZEUS_ENOMEM)."""


class ZeusTimeoutError(ZeusError, TimeoutError):
    """Timed out (ZEUS_ETIMEDOUT)."""


class ZeusConnectionError(ZeusError, ConnectionError):
    """A network error (ZEUS_ENET)."""


class ZeusRuntimeError(ZeusError, RuntimeError):
    """Any other library failure: device errors, a lost GPU, an operation in the wrong state."""


class ZeusUnavailableError(ZeusRuntimeError):
    """The loaded libzeus lacks the part of the C library this call needs."""


_BY_CODE = {
    -1: ZeusValueError,         # EINVAL
    -2: ZeusMemoryError,        # ENOMEM
    -3: ZeusNotSupportedError,  # ENOTSUP
    -4: ZeusPermissionError,    # EPERM
    -5: ZeusFileNotFoundError,  # ENOENT
    -6: ZeusValueError,         # EEXIST
    -7: ZeusValueError,         # ERANGE
    -8: ZeusValueError,         # EPARSE
    -9: ZeusOSError,            # EIO
    -14: ZeusTimeoutError,      # ETIMEDOUT
    -15: ZeusConnectionError,   # ENET
}


def class_for(code: int) -> type:
    """The exception class for a negative C status code."""
    return _BY_CODE.get(code, ZeusRuntimeError)


__all__ = [
    "ZeusError", "ZeusValueError", "ZeusFileNotFoundError", "ZeusPermissionError", "ZeusOSError",
    "ZeusNotSupportedError", "ZeusMemoryError", "ZeusTimeoutError", "ZeusConnectionError",
    "ZeusRuntimeError", "ZeusUnavailableError", "class_for",
]
