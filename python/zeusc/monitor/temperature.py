"""GPU temperature over time (zeus.monitor.temperature of the original), sampled by libzeus.

:class:`TemperatureMonitor` samples every GPU's temperature at ``update_period`` in a libzeus
thread (zeus/power_monitor.h with no power domain) and keeps the samples where it changed.
Timestamps are seconds since the Unix epoch, as ``time.time()``.
"""
from __future__ import annotations

import logging
import math
from ctypes import byref, c_void_p
from dataclasses import dataclass

from .. import _lib
from .power import _gpu_list, _Timelines
from .._closeable import guard_methods

logger = logging.getLogger("zeusc.monitor.temperature")


@dataclass
class TemperatureSample:
    """A single temperature measurement sample."""

    timestamp: float
    gpu_index: int
    temperature_c: int


@guard_methods()
class TemperatureMonitor(_Timelines):
    """Monitors GPU temperature over time.

    Args:
        gpu_indices: the GPUs to sample (visible indices); None: every GPU; [] is a ValueError.
        update_period: sampling period in s (default 1: temperature moves slowly).
        max_samples_per_gpu: samples kept per GPU (None: libzeus's default bound).
        devices: (not in the original) a :class:`zeusc.device.Devices` to read instead of the
            process's default GPUs.
    """

    def __init__(self, gpu_indices: list[int] | None = None, update_period: float = 1.0,
                 max_samples_per_gpu: int | None = None, *, devices=None) -> None:
        self._pm = c_void_p()
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        gpus, _dev = _gpu_list(gpu_indices, devices)
        if not gpus:
            raise ValueError("At least one GPU index must be specified")
        self.update_period = float(update_period)
        self._open(gpu_indices, devices, _lib.ZEUS_POWER_MONITOR_NO_POWER, 0.0, self.update_period,
                   max_samples_per_gpu)
        logger.info("Monitoring temperature of GPUs %s", self.gpu_indices)

    def get_temperature_timeline(self, gpu_index: int | None = None, start_time: float | None = None,
                                 end_time: float | None = None) -> dict[int, list[tuple[float, int]]]:
        """GPU index -> [(timestamp, degrees Celsius)], the samples where the temperature changed,
        in [start_time, end_time] (None: unbounded)."""
        h = self._handle()
        targets = [gpu_index] if gpu_index is not None else self.gpu_indices
        out = {}
        for g in targets:
            if g not in self.gpu_indices:
                continue
            out[g] = self._series(lambda gpu, lo, hi, p, n: self._lib.zeus_power_monitor_temperature_timeline(
                h, gpu, lo, hi, p, n), _lib.TemperatureSampleC, "celsius", g, start_time, end_time, 1)
        return out

    def get_temperature(self, time: float | None = None) -> dict[int, int] | None:
        """Each GPU's temperature at the sample nearest to `time` (None: the latest); None when a
        GPU has no sample yet."""
        h = self._handle()
        t = math.nan if time is None else float(time)
        s = _lib.TemperatureSampleC()
        out = {}
        for g in self.gpu_indices:
            rc = self._lib.zeus_power_monitor_temperature_at(h, g, t, byref(s))
            if rc == -5:
                return None
            _lib.check(rc)
            out[g] = int(s.celsius)
        return out


__all__ = ["TemperatureMonitor", "TemperatureSample"]
