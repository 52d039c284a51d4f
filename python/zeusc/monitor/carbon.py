"""Measurement windows in grams of CO2eq (the original's zeus.monitor.carbon).

:class:`CarbonEmissionMonitor` measures windows as :class:`zeusc.monitor.ZeusMonitor` does, and
multiplies their energy by the grid's carbon intensity from :class:`ElectrictyMapsClient` (the
original's spelling; :class:`ElectricityMapsClient` is the same class). The work is libzeus's
(zeus/grid.h): a thread fetches the intensity every ``poll_interval_s`` and splits each open
window's energy at every fetch, so an intensity that changes during a window is followed.
``get_recent_carbon_intensity`` asks for the last 24 hours (GET /v3/carbon-intensity/history).

Where the original's background process died silently when the service failed (and end_window
then waited forever), a window whose intensity could not be had raises
:class:`ZeusCarbonIntensityHTTPError` or :class:`ZeusCarbonIntensityNotFoundError` from
``end_window``, with the window's energy in the exception's ``measurement``.

The service's base URL: the client's ``url``, else ``ZEUS_ELECTRICITYMAPS_URL``, else
https://api.electricitymap.org. Its API key: ``api_key``, ``api_key_file``, else
``ZEUS_ELECTRICITYMAPS_API_KEY`` or the file named by ``ZEUS_ELECTRICITYMAPS_API_KEY_FILE``; it
is never logged nor put in an error.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Literal

from ..exceptions import ZeusError
from . import _grid
from .energy import ZeusMonitor

ZeusBaseError = ZeusError


class ZeusCarbonIntensityHTTPError(ZeusBaseError):
    """The carbon intensity provider could not be asked, or answered an error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: (not in the original) on end_window: the window's time and energy, without emissions.
        self.measurement: CarbonEmissionMeasurement | None = None


class ZeusCarbonIntensityNotFoundError(ZeusBaseError):
    """The provider's answer holds no carbon intensity."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        #: (not in the original) on end_window: the window's time and energy, without emissions.
        self.measurement: CarbonEmissionMeasurement | None = None


class CarbonIntensityProvider(abc.ABC):
    """A source of the grid's carbon intensity at a place (gCO2eq/kWh)."""

    @abc.abstractmethod
    def get_current_carbon_intensity(self) -> float:
        """The current carbon intensity."""

    @abc.abstractmethod
    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """The intensity of recent hours, by time."""

    @property
    @abc.abstractmethod
    def update_period(self) -> timedelta:
        """How long one value holds."""

    @property
    @abc.abstractmethod
    def history_length(self) -> int:
        """How many values get_recent_carbon_intensity gives."""


class ElectrictyMapsClient(_grid.Provider, CarbonIntensityProvider):
    """The carbon intensity from ElectricityMaps (https://www.electricitymaps.com/).

    Args:
        location: (latitude, longitude) in degrees.
        estimate: accept estimated values where no measured one is available.
        emission_factor_type: "direct" or "lifecycle".
        url: (not in the original) the service's base URL (a proxy, a mirror, a test server).
        api_key, api_key_file: (not in the original) the API key, or a file holding it.
        timeout_s: (not in the original) the limit of one request.

    Attributes ``lat``, ``long``, ``estimate`` and ``emission_factor_type`` may be changed; the
    next request uses them.
    """

    def __init__(self, location: tuple[float, float], estimate: bool = False,
                 emission_factor_type: Literal["direct", "lifecycle"] = "direct", *, url: str | None = None,
                 api_key: str | None = None, api_key_file: str | None = None, timeout_s: float = 10.0) -> None:
        self.lat, self.long = location
        self.estimate = estimate
        self.emission_factor_type = emission_factor_type
        self._url = url
        self._api_key = api_key
        self._api_key_file = api_key_file
        self.timeout_s = timeout_s

    def __repr__(self) -> str:  # no key in it
        return (f"ElectrictyMapsClient(location=({self.lat}, {self.long}), estimate={self.estimate}, "
                f"emission_factor_type={self.emission_factor_type!r})")

    def _grid_opts(self) -> tuple:
        return (_grid.ZEUS_GRID_ELECTRICITYMAPS, float(self.lat), float(self.long), self._url, self._api_key,
                self._api_key_file, float(self.timeout_s), bool(self.estimate), self.emission_factor_type, None,
                None, 0, None)

    def get_current_carbon_intensity(self) -> float:
        """Asks the service for the place's latest carbon intensity (gCO2eq/kWh).

        Raises:
            ZeusCarbonIntensityHTTPError: no connection, no answer in time, an HTTP error, an
                answer that is not JSON.
            ZeusCarbonIntensityNotFoundError: the answer has no carbonIntensity (no recent
                value for the place; ``estimate=True`` may give one).
        """
        import ctypes
        h = self._fetch(ZeusCarbonIntensityHTTPError, ZeusCarbonIntensityNotFoundError)
        v = ctypes.c_double()
        _grid.lib().zeus_grid_rate(h, 0.0, ctypes.byref(v), None)
        return v.value

    def get_recent_carbon_intensity(self) -> dict[datetime, float]:
        """Asks the service for the place's carbon intensity of the last 24 hours (gCO2eq/kWh).

        Returns:
            The start of each hour (a datetime in UTC) -> its intensity, in the service's order
            (oldest first); ``history_length`` entries, each holding for ``update_period``; None
            for an hour the service has no value for (its null), as the original gives it.

        Raises:
            ZeusCarbonIntensityHTTPError: no connection, no answer in time, an HTTP error, an
                answer that is not JSON.
            ZeusCarbonIntensityNotFoundError: the answer has no history, or an entry of it has no
                ``datetime`` (ISO 8601) or a ``carbonIntensity`` that is neither a number nor null (the
                message names it).
            zeusc.exceptions.ZeusUnavailableError: (not in the original) libzeus was built
                without ZEUS_WITH_GRID.
        """
        return {datetime.fromtimestamp(t, timezone.utc): v
                for t, v in self._history(ZeusCarbonIntensityHTTPError, ZeusCarbonIntensityNotFoundError)}

    @property
    def update_period(self) -> timedelta:
        """One hour: ElectricityMaps' values are hourly."""
        return timedelta(hours=1)

    @property
    def history_length(self) -> int:
        """24, as the original."""
        return 24


#: The correctly spelled name of :class:`ElectrictyMapsClient`.
ElectricityMapsClient = ElectrictyMapsClient


@dataclass
class CarbonEmissionMeasurement:
    """What one window measured.

    Attributes:
        time: the window's length in s.
        gpu_energy: GPU index -> J.
        gpu_carbon_emission: GPU index -> gCO2eq.
        cpu_energy, cpu_carbon_emission: CPU package index -> J, gCO2eq (None without CPUs).
        dram_energy, dram_carbon_emission: CPU package index -> J, gCO2eq of its DRAM zone (None
            without one).
    """

    time: float
    gpu_energy: dict[int, float]
    gpu_carbon_emission: dict[int, float]
    cpu_energy: dict[int, float] | None = None
    cpu_carbon_emission: dict[int, float] | None = None
    dram_energy: dict[int, float] | None = None
    dram_carbon_emission: dict[int, float] | None = None


class CarbonEmissionMonitor(_grid.GridWindows):
    """Measures the time, energy and carbon emission of named windows.

    Args:
        carbon_intensity_provider: an :class:`ElectrictyMapsClient`.
        gpu_indices, cpu_indices, sync_execution_with: as :class:`zeusc.monitor.ZeusMonitor`.
        poll_interval_s: (not in the original) seconds between fetches of the intensity; each
            open window's energy is split at every fetch (the original split it hourly).
        max_age_s: (not in the original) an intensity older than this is not used (0: an hour,
            ElectricityMaps' update period); a window that needed one raises from end_window.

    Windows may overlap, as ZeusMonitor's. A thread of libzeus (no process is spawned) fetches
    the intensity from the monitor's creation until :meth:`close`.
    """

    _what = "carbon emission"

    def __init__(self, carbon_intensity_provider: CarbonIntensityProvider, gpu_indices: list[int] | None = None,
                 cpu_indices: list[int] | None = None, sync_execution_with: Literal["torch", "jax", "cupy"] = "torch",
                 *, poll_interval_s: float = 60.0, max_age_s: float = 0.0) -> None:
        self.carbon_intensity_provider = carbon_intensity_provider
        self._open(carbon_intensity_provider, "carbon_intensity_provider must be an ElectrictyMapsClient",
                   "CarbonEmissionMonitor", gpu_indices, cpu_indices, sync_execution_with, poll_interval_s, max_age_s)

    def end_window(self, key: str, sync_execution: bool = True) -> CarbonEmissionMeasurement:
        """Ends window `key` and returns its time, energy and carbon emission.

        Raises:
            ValueError: no window named `key` is open.
            ZeusCarbonIntensityHTTPError, ZeusCarbonIntensityNotFoundError: the intensity was
                missing for part of the window; the exception's ``measurement`` has the energy.
        """
        return self._end(key, sync_execution)

    def _measurement(self, t, ge, ce, de, gx, cx, dx) -> CarbonEmissionMeasurement:
        return CarbonEmissionMeasurement(time=t, gpu_energy=ge, cpu_energy=ce, dram_energy=de, gpu_carbon_emission=gx,
                                         cpu_carbon_emission=cx, dram_carbon_emission=dx)

    def _errors(self):
        return ZeusCarbonIntensityNotFoundError, ZeusCarbonIntensityHTTPError


__all__ = ["CarbonEmissionMonitor", "CarbonEmissionMeasurement", "CarbonIntensityProvider", "ElectrictyMapsClient",
           "ElectricityMapsClient", "ZeusCarbonIntensityHTTPError", "ZeusCarbonIntensityNotFoundError"]
