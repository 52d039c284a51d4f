"""Systems on a chip (the original's ``zeus.device.soc``).

:func:`get_soc` returns the one SoC manager of this process: a
:class:`~zeusc.device.soc.jetson.Jetson` on an NVIDIA Jetson (zeus/soc.h; ``ZEUS_JETSON_ROOT``
makes any machine one, for tests), else it raises :class:`ZeusSoCInitError`. Apple silicon is
not supported (it needs macOS).
"""
from __future__ import annotations

import threading
from typing import Optional

from .common import EmptySoC, SoC, SoCMeasurement, ZeusBaseSoCError, ZeusSoCInitError
from .jetson import Jetson, JetsonMeasurement, ZeusJetsonInitError, jetson_is_available

_soc: Optional[SoC] = None
_soc_lock = threading.Lock()


def get_soc() -> SoC:
    """The process's SoC manager, made on first use (a singleton, as the original's).

    Raises:
        ZeusSoCInitError: no SoC here (:class:`ZeusJetsonInitError`, a subclass, with the reason
            when this is a Jetson whose rails cannot be read).
    """
    global _soc
    with _soc_lock:
        if _soc is not None:
            return _soc
        if jetson_is_available():
            _soc = Jetson()  # raises ZeusJetsonInitError (a ZeusSoCInitError) with the reason
            return _soc
        raise ZeusSoCInitError("No observable SoC was found on the current machine.")


def _reset_soc() -> None:
    """(tests) Forgets the singleton, so that the next get_soc() looks again."""
    global _soc
    with _soc_lock:
        if _soc is not None and hasattr(_soc, "close"):
            _soc.close()
        _soc = None


__all__ = ["get_soc", "SoC", "EmptySoC", "SoCMeasurement", "ZeusBaseSoCError", "ZeusSoCInitError", "Jetson",
           "JetsonMeasurement", "ZeusJetsonInitError", "jetson_is_available"]
