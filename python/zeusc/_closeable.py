"""The context-manager and finaliser protocol every handle-owning class of zeusc shares, and the
guard that makes closing safe while other threads are inside a call.

ctypes releases the GIL around every C call, so without a guard a ``close()`` on one thread could
free the C handle while another thread is inside a call that uses it (a crash, or a corrupted
heap). The guard, per object and without a lock on the call path:

- a call appends its thread's id to ``_holds`` (``list.append`` and ``list.remove`` are atomic),
  checks ``_closing`` (a closed object raises ValueError) and only then reads the handle; on the
  way out it removes its entry, and if the object is closing and no call is left it frees the
  handle (``_run_free``);
- ``close()`` sets ``_closing`` and then waits until the calls of other threads have left (each
  call appended before it looked at ``_closing``, so none can start on the handle after that);
  then it frees the handle once. A call of the closing thread itself still in progress (close from
  a signal handler or a callback inside a call) cannot be waited for: the handle is then freed by
  that call on its way out.
"""
from __future__ import annotations

import functools
import threading
import time

_get_ident = threading.get_ident


class Closeable:
    """``with`` support and a finaliser around the subclass's idempotent ``close()``, and the
    guard (``guarded``, ``_close_guarded``) that makes ``close()`` safe from any thread."""

    def __new__(cls, *args, **kwargs):
        self = super().__new__(cls)
        self._holds = []
        self._closing = False
        self._pending_free = None
        self._free_lock = threading.Lock()
        return self

    def close(self) -> None:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _closed_error(self) -> ValueError:
        return ValueError(f"this {type(self).__name__} is closed")

    def _close_guarded(self, free) -> None:
        """Stops new calls, waits for those of other threads to leave, then runs ``free()`` once
        (at once, or at the end of this thread's own call in progress)."""
        if self._closing:
            return
        self._pending_free = free
        self._closing = True
        me = _get_ident()
        delay = 0.0001
        while True:
            holds = list(self._holds)
            if not holds:
                break
            if all(h == me for h in holds):
                return  # our own call in progress frees it on its way out
            time.sleep(delay)
            delay = min(delay * 2, 0.005)
        self._run_free()

    def _run_free(self) -> None:
        with self._free_lock:
            free, self._pending_free = self._pending_free, None
        if free is not None:
            free()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def call_guarded(owner, fn, *args, **kwargs):
    """Runs ``fn(*args, **kwargs)`` as a call of `owner`'s guard: ValueError when `owner` is
    closed, and `owner`'s handle is not freed while `fn` runs. For methods (``guarded``) and for
    objects that borrow `owner`'s handle (a simulated node borrows its Devices')."""
    me = _get_ident()
    holds = owner._holds
    holds.append(me)
    try:
        if owner._closing:
            raise owner._closed_error()
        return fn(*args, **kwargs)
    finally:
        holds.remove(me)
        if owner._closing and not holds:
            owner._run_free()


def guarded(fn):
    """Runs method `fn` as a call of the guard: it raises ValueError on a closed object and the
    object's handle is not freed while it runs."""

    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        return call_guarded(self, fn, self, *args, **kwargs)

    call.__zeusc_guarded__ = True
    return call


_NOT_GUARDED = {"close", "_handle", "_closed_error", "_close_guarded", "_run_free"}


def guard_methods(*names_left_out):
    """Class decorator: every method defined in the class body (not dunders, not close/stop, not
    `names_left_out`, which guard themselves inline) becomes a guarded call; so do properties'
    getters."""

    def deco(cls):
        skip = _NOT_GUARDED | set(names_left_out)
        for name, v in list(vars(cls).items()):
            if name.startswith("__") or name in skip:
                continue
            if isinstance(v, property) and v.fget is not None:
                setattr(cls, name, property(guarded(v.fget), v.fset, v.fdel, v.__doc__))
            elif callable(v) and not isinstance(v, (staticmethod, classmethod, type)) and \
                    not getattr(v, "__zeusc_guarded__", False):
                setattr(cls, name, guarded(v))
        return cls

    return deco
