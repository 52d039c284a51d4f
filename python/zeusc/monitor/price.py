"""Measurement windows in money (the original's zeus.monitor.price).

:class:`EnergyCostMonitor` measures windows as :class:`zeusc.monitor.ZeusMonitor` does, and
multiplies their energy by the price per kWh of a utility rate from :class:`OpenEIClient` (the
OpenEI Utility Rate Database): as the original, the price at a time is the first tier's rate of
the period that the rate's weekday or weekend schedule gives for that time's month and hour
(UTC). The work is libzeus's (zeus/grid.h): a thread fetches the rate every ``poll_interval_s``
and splits each open window's energy at every fetch, each part priced at its own hour.

A window whose price could not be had raises :class:`ZeusElectricityPriceHTTPError` or
:class:`ZeusElectricityPriceNotFoundError` from ``end_window``, with the window's energy in the
exception's ``measurement`` (the original's background process died and end_window waited).

The service's base URL: the client's ``url``, else ``ZEUS_OPENEI_URL``, else
https://api.openei.org. Its API key (required: https://openei.org/services/api/signup):
``api_key``, ``api_key_file``, else ``ZEUS_OPENEI_API_KEY`` or the file named by
``ZEUS_OPENEI_API_KEY_FILE``; it is never logged nor put in an error.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..exceptions import ZeusError
from . import _grid
from .energy import ZeusMonitor

ZeusBaseError = ZeusError


def get_time_info() -> tuple[str, str, int]:
    """The month's name, "Weekend" or "Weekday", and the hour, of the local time now."""
    now = datetime.now()
    return now.strftime("%B"), "Weekend" if now.weekday() >= 5 else "Weekday", now.hour


class ZeusElectricityPriceHTTPError(ZeusBaseError):
    """The electricity price provider could not be asked, or answered an error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: (not in the original) on end_window: the window's time and energy, without costs.
        self.measurement: EnergyCostMeasurement | None = None


class ZeusElectricityPriceNotFoundError(ZeusBaseError):
    """The provider's answer holds no usable rate."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: (not in the original) on end_window: the window's time and energy, without costs.
        self.measurement: EnergyCostMeasurement | None = None


class ElectricityPriceProvider(abc.ABC):
    """A source of electricity prices."""

    @abc.abstractmethod
    def get_current_electricity_prices(self) -> dict[str, list]:
        """The rate's tables."""


class OpenEIClient(_grid.Provider, ElectricityPriceProvider):
    """Utility rates from the OpenEI Utility Rate Database.

    Args:
        location: (latitude, longitude) in degrees.
        label: the rate's label (its identifier in the database).
        sector: "Residential", "Commercial", "Industrial" or "Lighting".
        radius: search radius in miles around the place.
        url: (not in the original) the service's base URL (a proxy, a mirror, a test server).
        api_key, api_key_file: (not in the original) the API key, or a file holding it.
        currency: (not in the original) the rates' currency, "USD" by default.
        timeout_s: (not in the original) the limit of one request.
    """

    def __init__(self, location: tuple[float, float], label: str,
                 sector: Literal["Residential", "Commercial", "Industrial", "Lighting"] = "Residential",
                 radius: int = 0, *, url: str | None = None, api_key: str | None = None,
                 api_key_file: str | None = None, currency: str = "USD", timeout_s: float = 10.0) -> None:
        self.lat, self.long = location
        self.label = label
        self.sector = sector
        self.radius = radius
        self.currency = currency
        self._url = url
        self._api_key = api_key
        self._api_key_file = api_key_file
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # no key in it
        return f"OpenEIClient(location=({self.lat}, {self.long}), label={self.label!r}, sector={self.sector!r})"

    def _grid_opts(self) -> tuple:
        return (_grid.ZEUS_GRID_OPENEI, float(self.lat), float(self.long), self._url, self._api_key,
                self._api_key_file, float(self.timeout_s), False, None, self.label, self.sector, int(self.radius),
                self.currency)

    def search_json(self, data, key_name, target_value, return_value):
        """Every value of field `return_value` (None where absent) of the objects in `data`, at any
        depth, whose field `key_name` equals `target_value`, as the original's helper."""
        results = []
        if isinstance(data, dict):
            for key, val in data.items():
                if key == key_name and val == target_value:
                    results.append(data.get(return_value))
                results.extend(self.search_json(val, key_name, target_value, return_value))
        elif isinstance(data, list):
            for item in data:
                results.extend(self.search_json(item, key_name, target_value, return_value))
        return results

    def get_current_electricity_prices(self) -> dict[str, list]:
        """Asks the service for the rate and returns its tables: ``energy_rate_structure`` (per
        period, its first tier ``[{"rate": price per kWh}]``), ``energy_weekday_schedule`` and
        ``energy_weekend_schedule`` (12 months x 24 hours of period numbers).

        Raises:
            ZeusElectricityPriceHTTPError: no connection, no answer in time, an HTTP error, an
                answer that is not JSON.
            ZeusElectricityPriceNotFoundError: no rate at the place, none with the label, or
                incomplete tables.
        """
        h = self._fetch(ZeusElectricityPriceHTTPError, ZeusElectricityPriceNotFoundError)
        return _grid.openei_tables(h, ZeusElectricityPriceNotFoundError)


@dataclass
class EnergyCostMeasurement:
    """What one window measured.

    Attributes:
        time: the window's length in s.
        gpu_energy: GPU index -> J.
        gpu_energy_cost: GPU index -> cost in the rate's currency.
        cpu_energy, cpu_energy_cost: CPU package index -> J, cost (None without CPUs).
        dram_energy, dram_energy_cost: CPU package index -> J, cost of its DRAM zone (None
            without one).
    """

    time: float
    gpu_energy: dict[int, float]
    gpu_energy_cost: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_energy_cost: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_energy_cost: dict[int, float] | None = None


class EnergyCostMonitor(_grid.GridWindows):
    """Measures the time, energy and energy cost of named windows.

    Args:
        electricity_price_provider: an :class:`OpenEIClient`.
        gpu_indices, cpu_indices, sync_execution_with: as :class:`zeusc.monitor.ZeusMonitor`.
        poll_interval_s: (not in the original) seconds between fetches of the rate; each open
            window's energy is split at every fetch and priced at that time's hour.
        max_age_s: (not in the original) rate tables older than this are not used (0: no
            limit, since a rate's tables hold for every hour).
    """

    _what = "energy cost"

    def __init__(self, electricity_price_provider: ElectricityPriceProvider, gpu_indices: list[int] | None = None,
                 cpu_indices: list[int] | None = None, sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
                 *, poll_interval_s: float = 60.0, max_age_s: float = 0.0) -> None:
        self.electricity_price_provider = electricity_price_provider
        self._open(electricity_price_provider, "electricity_price_provider must be an OpenEIClient",
                   "EnergyCostMonitor", gpu_indices, cpu_indices, sync_execution_with, poll_interval_s, max_age_s,
                   approx_instant_energy=True)

    def end_window(self, key: str, sync_execution: bool = True) -> EnergyCostMeasurement:
        """Ends window `key` and returns its time, energy and energy cost.

        Raises:
            ValueError: no window named `key` is open.
            ZeusElectricityPriceHTTPError, ZeusElectricityPriceNotFoundError: the price was
                missing for part of the window; the exception's ``measurement`` has the energy.
        """
        return self._end(key, sync_execution)

    def _measurement(self, t, ge, ce, de, gx, cx, dx) -> EnergyCostMeasurement:
        return EnergyCostMeasurement(time=t, gpu_energy=ge, cpu_energy=ce, dram_energy=de, gpu_energy_cost=gx,
                                     cpu_energy_cost=cx, dram_energy_cost=dx)

    def _errors(self):
        return ZeusElectricityPriceNotFoundError, ZeusElectricityPriceHTTPError


__all__ = ["EnergyCostMonitor", "EnergyCostMeasurement", "ElectricityPriceProvider", "OpenEIClient",
           "ZeusElectricityPriceHTTPError", "ZeusElectricityPriceNotFoundError", "get_time_info"]
