"""Systems on a chip (the original's ``zeus.device.soc``: Apple silicon, NVIDIA Jetson).

libzeus measures no SoC, so :func:`get_soc` raises :class:`ZeusSoCInitError`, and
``ZeusMonitor.soc`` is an :class:`EmptySoC` (``soc_is_present`` False), as the original on a
machine without one.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, fields

from ..exceptions import ZeusError


class ZeusBaseSoCError(ZeusError):
    """Base class of every SoC error."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class ZeusSoCInitError(ZeusBaseSoCError):
    """No SoC could be found or initialised."""


@dataclass
class SoCMeasurement(abc.ABC):
    """The energy of an SoC's parts over a window (subclasses name the parts)."""

    def zeroAllFields(self) -> None:  # noqa: N802 - the original's name
        """Sets every field to zero (a cancelled window)."""
        for f in fields(self):
            setattr(self, f.name, 0)


class SoC(abc.ABC):
    """An SoC with measurement windows of its own."""

    @abc.abstractmethod
    def beginWindow(self, key: str) -> None:  # noqa: N802
        """Begins a window."""

    @abc.abstractmethod
    def endWindow(self, key: str) -> SoCMeasurement:  # noqa: N802
        """Ends a window."""


class EmptySoC(SoC):
    """No SoC: windows raise ValueError."""

    def beginWindow(self, key: str) -> None:  # noqa: N802
        raise ValueError("No SoC is available.")

    def endWindow(self, key: str) -> SoCMeasurement:  # noqa: N802
        raise ValueError("No SoC is available.")


def get_soc() -> SoC:
    """libzeus supports no SoC: always raises ZeusSoCInitError."""
    raise ZeusSoCInitError("No SoC is supported by libzeus (Apple silicon and Jetson are not implemented)")


__all__ = ["get_soc", "SoC", "EmptySoC", "SoCMeasurement", "ZeusBaseSoCError", "ZeusSoCInitError"]
