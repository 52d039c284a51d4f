"""zeusc: the Zeus Python API over libzeus, the C implementation of Zeus.

Switch from the original package by changing the import::

    from zeusc.monitor import ZeusMonitor
    from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer

Importing zeusc loads nothing: libzeus is loaded on first use (see :func:`library_path` for
where it is found), and no machine-learning framework is ever imported by the binding itself.
"""
from __future__ import annotations

from . import exceptions
from .exceptions import ZeusError

__version__ = "0.1.0"


def library_path() -> str:
    """The path of the libzeus the binding loaded (loading it if needed)."""
    from . import _lib
    return _lib.library_path()


def library_version() -> str:
    """The version of the loaded libzeus, "MAJOR.MINOR.PATCH"."""
    from . import _lib
    return _lib.lib().zeus_version().decode()


def set_log_level(level) -> None:
    """libzeus's log level: "error", "warn" (the default, or ZEUS_LOG_LEVEL), "info", "debug",
    "off", or 0-3. Its lines go to the Python loggers "zeusc.<module>"."""
    from . import _lib
    _lib.set_log_level(level)


__all__ = ["ZeusError", "exceptions", "library_path", "library_version", "set_log_level", "__version__"]
