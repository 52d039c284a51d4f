"""What the binding puts back when the program ends: optimizers that changed GPU settings are
closed (restoring them) at exit and on SIGTERM.

The C library can install SIGINT/SIGTERM handlers of its own; the binding asks it not to
(no_signal_handlers) so that Python keeps its signal semantics: SIGINT stays KeyboardInterrupt
(the settings are put back when the program exits), and SIGTERM, when the program has no handler
of its own, closes every live optimizer, restores every open device handle
(zeus_devices_restore_all) and then terminates the process by SIGTERM as it would have.
"""
from __future__ import annotations

import atexit
import os
import signal
import threading
import weakref

from . import _lib

_live = weakref.WeakSet()
_kept = {}  # id -> object: kept alive until closed or exit (the power-limit optimizer)
_lock = threading.Lock()
_sigterm_installed = False


def register(obj, strong: bool = False) -> None:
    """Closes `obj` (its close()) at exit and on SIGTERM while it is alive. With `strong`, the
    registry keeps it alive until it is unregistered (its close()) or the process exits, as the
    original's atexit hook kept the power-limit optimizer (and its optimum) alive."""
    if strong:
        _kept[id(obj)] = obj
    else:
        _live.add(obj)
    _install_sigterm()


def unregister(obj) -> None:
    _live.discard(obj)
    _kept.pop(id(obj), None)


def close_all() -> None:
    for obj in list(_kept.values()) + list(_live):
        try:
            obj.close()
        except Exception:
            pass


atexit.register(close_all)


def _on_sigterm(signum, frame):
    close_all()
    try:
        _lib.lib().zeus_devices_restore_all()
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _install_sigterm() -> None:
    global _sigterm_installed
    with _lock:
        if _sigterm_installed or threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
                return  # the program handles SIGTERM itself
            signal.signal(signal.SIGTERM, _on_sigterm)
            _sigterm_installed = True
        except ValueError:  # not the main interpreter
            pass
