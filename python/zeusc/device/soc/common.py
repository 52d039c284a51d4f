"""What every SoC shares (the original's ``zeus.device.soc.common``): the errors, the measurement
and manager base classes, and :class:`EmptySoC` for machines without one."""
from __future__ import annotations

import abc
from dataclasses import dataclass, fields

from ...exceptions import ZeusError


class ZeusBaseSoCError(ZeusError):
    """Base class of every SoC error."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class ZeusSoCInitError(ZeusBaseSoCError):
    """No SoC could be found or initialised."""


@dataclass
class SoCMeasurement(abc.ABC):
    """The energy of an SoC's parts over a window or since a fixed point, mJ (subclasses name the
    parts: :class:`~zeusc.device.soc.jetson.JetsonMeasurement`)."""

    @abc.abstractmethod
    def __sub__(self, other) -> "SoCMeasurement":
        """The difference, field by field."""

    def zero_all_fields(self) -> None:
        """Sets every measured field to 0.0 and leaves unmeasured ones None (a cancelled window)."""
        for f in fields(self):
            if getattr(self, f.name) is not None:
                setattr(self, f.name, 0.0)

    def zeroAllFields(self) -> None:  # noqa: N802 - the original's deprecated alias
        self.zero_all_fields()


class SoC(abc.ABC):
    """An SoC with measurement windows of its own."""

    @abc.abstractmethod
    def get_available_metrics(self) -> set:
        """The names of the fields this SoC measures."""

    @abc.abstractmethod
    def get_total_energy_consumption(self) -> SoCMeasurement:
        """Energy since a fixed arbitrary point, mJ."""

    @abc.abstractmethod
    def begin_window(self, key: str, restart: bool = False) -> None:
        """Begins window `key` (KeyError when open, unless `restart`)."""

    @abc.abstractmethod
    def end_window(self, key: str) -> SoCMeasurement:
        """Ends window `key` and returns its energy, mJ (KeyError when not open)."""

    # the original's deprecated camelCase names
    def getAvailableMetrics(self) -> set:  # noqa: N802
        return self.get_available_metrics()

    def getTotalEnergyConsumption(self) -> SoCMeasurement:  # noqa: N802
        return self.get_total_energy_consumption()

    def beginWindow(self, key: str, restart: bool = False) -> None:  # noqa: N802
        self.begin_window(key, restart)

    def endWindow(self, key: str) -> SoCMeasurement:  # noqa: N802
        return self.end_window(key)


class EmptySoC(SoC):
    """No SoC: the metrics are none, and everything else raises ValueError."""

    def get_available_metrics(self) -> set:
        return set()

    def get_total_energy_consumption(self) -> SoCMeasurement:
        raise ValueError("No SoC is available.")

    def begin_window(self, key: str, restart: bool = False) -> None:
        raise ValueError("No SoC is available.")

    def end_window(self, key: str) -> SoCMeasurement:
        raise ValueError("No SoC is available.")


__all__ = ["SoC", "EmptySoC", "SoCMeasurement", "ZeusBaseSoCError", "ZeusSoCInitError"]
