"""Power timelines of GPUs (zeus.monitor.power of the original), sampled by libzeus.

:class:`PowerMonitor` samples every GPU's power in one or more domains (:class:`PowerDomain`:
the instant power, the GPU's own ~1 s average, the memory's average) at ``update_period`` and
keeps the samples in memory; :meth:`~PowerMonitor.get_power_timeline`,
:meth:`~PowerMonitor.get_energy` and :meth:`~PowerMonitor.get_power` query them. The sampling is
a thread of libzeus (zeus/power_monitor.h), not a Python process: no ``if __name__ ==
"__main__"`` guard is needed, and nothing is pickled. Timestamps are seconds since the Unix epoch,
comparable with ``time.time()`` (on the simulated GPU's virtual clock they advance with the
simulated work).

    from zeusc.monitor import PowerMonitor
    pm = PowerMonitor(gpu_indices=[0], update_period=0.1)
    t0 = time.time(); train(); t1 = time.time()
    print(pm.get_energy(t0, t1))                     # {0: joules}
    print(pm.get_power_timeline("device_instant"))    # {0: [(timestamp, watts), ...]}
    pm.stop()
"""
from __future__ import annotations

import enum
import logging
import math
import time as _time
from ctypes import POINTER, byref, c_uint, c_void_p, cast
from dataclasses import dataclass
from typing import Dict, List, Literal, Optional, Tuple

from .. import _lib
from .._closeable import Closeable, guard_methods
from ..exceptions import ZeusNotSupportedError

logger = logging.getLogger("zeusc.monitor.power")


class PowerDomain(enum.Enum):
    """Power measurement domains with different update characteristics."""

    DEVICE_INSTANT = "device_instant"
    DEVICE_AVERAGE = "device_average"
    MEMORY_AVERAGE = "memory_average"


_C_DOMAIN = {PowerDomain.DEVICE_INSTANT: _lib.ZEUS_POWER_INSTANT, PowerDomain.DEVICE_AVERAGE: _lib.ZEUS_POWER_AVERAGE,
             PowerDomain.MEMORY_AVERAGE: _lib.ZEUS_POWER_MEMORY_AVERAGE}


@dataclass
class PowerSample:
    """A single power measurement sample."""

    timestamp: float
    gpu_index: int
    power_mw: float


def _domain(d) -> PowerDomain:
    if isinstance(d, PowerDomain):
        return d
    try:
        return PowerDomain(d)
    except ValueError:
        raise ValueError(f"Unknown power domain {d!r}: expected one of "
                         f"{', '.join(repr(x.value) for x in PowerDomain)}") from None


def _gpu_list(gpu_indices, devices) -> Tuple[List[int], object]:
    from ..device import Devices
    dev = devices if devices is not None else Devices.default()
    n = dev.gpu_count()
    return (list(range(n)) if gpu_indices is None else [int(g) for g in gpu_indices]), dev


def infer_counter_update_period(gpu_indicies: list[int], *, devices=None) -> float:
    """Infers how often the GPUs' power counter updates and returns half the fastest period
    (polling twice per update), at most 0.1 s. Each GPU model is probed once with 1000
    back-to-back readings of its instant power (average power where instant is unsupported)."""
    _, dev = _gpu_list(gpu_indicies, devices)
    from ..device.gpu import GPU, ZeusGPUNotSupportedError
    period = math.inf
    seen = set()
    for index in gpu_indicies:
        gpu = GPU(index, dev)
        model = gpu.get_name()
        if model in seen:
            continue
        seen.add(model)
        detected = _infer_single(gpu, ZeusGPUNotSupportedError)
        logger.info("Counter update period for %s is %.2f s", model, detected)
        period = min(period, detected)
    if not math.isfinite(period):
        period = 0.2
    period /= 2.0
    if period > 0.1:
        logger.warning("Inferred update period (%.2f s) is too long. Using 0.1 s instead.", period)
        period = 0.1
    return period


def _infer_single(gpu, not_supported) -> float:
    read = gpu.get_instant_power_usage
    try:
        read()
    except not_supported:
        read = gpu.get_average_power_usage
        try:
            read()
        except not_supported:
            return 0.2  # halved to 0.1
    samples = [(_time.time(), read()) for _ in range(1000)][10:]
    changed = []
    prev = samples[0][1]
    for t, p in samples:
        if p != prev:
            changed.append(t)
            prev = p
    gaps = [b - a for a, b in zip(changed, changed[1:])]
    return min(gaps) if gaps else 0.1


@guard_methods()
class _Timelines(Closeable):
    """A libzeus power monitor (zeus_power_monitor) and the conversions both monitors share."""

    def _open(self, gpu_indices, devices, domains: int, period: float, temperature_period: float,
              max_samples: Optional[int]) -> None:
        self._pm = c_void_p()
        L = _lib.lib()
        o = _lib.PowerMonitorOpts()
        self._devices = devices
        if devices is not None:
            o.devices = devices._handle()
        if gpu_indices is not None:
            arr = (c_uint * max(len(gpu_indices), 1))(*gpu_indices)
            self._keep = arr
            o.gpu_indices = arr
            o.num_gpu_indices = len(gpu_indices)
        o.domains = domains
        o.period_s = period
        o.temperature_period_s = temperature_period
        if max_samples is not None:
            if isinstance(max_samples, bool) or not isinstance(max_samples, int) or max_samples < 2:
                raise ValueError(f"max_samples_per_gpu must be an int >= 2 or None, got {max_samples!r}")
            o.max_samples = max_samples
        o.dedup = True
        o.epoch_time = True
        _lib.check(L.zeus_power_monitor_open(byref(self._pm), byref(o)), {-5: _value_error_class()})
        self._lib = L
        n = L.zeus_power_monitor_num_gpus(self._pm)
        self.gpu_indices = [L.zeus_power_monitor_gpu_index(self._pm, k) for k in range(n)]
        if devices is not None:
            # The sampling thread reads the handle: closing the Devices closes this first.
            devices._depend(self)
            self._deps_owner = devices

    def _handle(self):
        if not self._pm:
            raise ValueError(f"this {type(self).__name__} is closed")
        return self._pm

    def stop(self) -> None:
        """Stops sampling; the samples so far stay queryable. Idempotent."""
        if self._pm:
            self._lib.zeus_power_monitor_stop(self._pm)

    def close(self) -> None:
        """(not in the original) Stops sampling and frees the samples. Idempotent."""
        pm = getattr(self, "_pm", None)
        if pm:
            def free():
                self._pm = c_void_p()
                self._lib.zeus_power_monitor_close(pm)

            # Calls of other threads in progress finish first; later ones raise ValueError.
            self._close_guarded(free)
        owner = getattr(self, "_deps_owner", None)
        if owner is not None:
            owner._undepend(self)

    def sample(self) -> None:
        """(not in the original) Takes one sample of everything now (for simulated clocks)."""
        _lib.check(self._lib.zeus_power_monitor_sample(self._handle()))

    def now(self) -> float:
        """(not in the original) Now on the monitor's time base (seconds since the epoch)."""
        return self._lib.zeus_power_monitor_now(self._handle())

    def _series(self, fn, sample_type, value_field, gpu: int, start, end, scale) -> List[tuple]:
        ptr = POINTER(sample_type)()
        n = _lib.c_size_t()
        lo = -math.inf if start is None else float(start)
        hi = math.inf if end is None else float(end)
        _lib.check(fn(gpu, lo, hi, byref(ptr), byref(n)))
        try:
            out = []
            prev = None
            for i in range(n.value):
                v = getattr(ptr[i], value_field)
                if v == prev:  # the end of a run of equal readings: the original keeps changes only
                    continue
                prev = v
                out.append((ptr[i].time_s, v / scale if scale != 1 else v))
            return out
        finally:
            if ptr:
                _lib.c_free(cast(ptr, c_void_p))


def _value_error_class():
    from ..exceptions import ZeusValueError
    return ZeusValueError


@guard_methods("measurement_domains")
class PowerMonitor(_Timelines):
    """Monitors GPU power in several domains over time, sampled by a libzeus thread.

    Args:
        gpu_indices: the GPUs to sample (visible indices); None: every GPU. An empty list is a
            ValueError, as the original.
        update_period: sampling period in s; None: inferred from how fast the power counter moves
            (:func:`infer_counter_update_period`).
        max_samples_per_gpu: samples kept per GPU and domain (None: libzeus's default bound,
            about 29 hours at 10 Hz; the oldest are dropped beyond it).
        power_domains: (not in the original) the domains to sample; None: every domain all the
            GPUs can read.
        devices: (not in the original) a :class:`zeusc.device.Devices` to read instead of the
            process's default GPUs.

    Attributes:
        gpu_indices, update_period, supported_domains (the sampled :class:`PowerDomain` list;
        also under the original's name, measurement_domains).
    """

    def __init__(self, gpu_indices: list[int] | None = None, update_period: float | None = None,
                 max_samples_per_gpu: int | None = None, power_domains=None, *, devices=None) -> None:
        self._pm = c_void_p()
        if gpu_indices is not None and not gpu_indices:
            raise ValueError("`gpu_indices` must be either `None` or non-empty")
        gpus, dev = _gpu_list(gpu_indices, devices)
        if not gpus:
            raise ValueError("At least one GPU index must be specified")
        if update_period is None:
            update_period = infer_counter_update_period(gpus, devices=dev)
        elif update_period < 0.05:
            logger.warning("An update period of %g might be too fast, which may lead to unexpected errors (e.g., "
                           "NotSupported) and/or zero values being returned. If you see these, consider increasing "
                           "to >= 0.05.", update_period)
        mask = 0
        if power_domains is not None:
            for d in power_domains:
                mask |= 1 << _C_DOMAIN[_domain(d)]
            if not mask:
                raise ValueError("`power_domains` must be either `None` or non-empty")
        self.update_period = float(update_period)
        try:
            self._open(gpu_indices, devices, mask, self.update_period, 0.0, max_samples_per_gpu)
        except ZeusNotSupportedError as e:
            if power_domains is None:
                raise
            # The original refuses a requested domain the GPUs cannot read with a ValueError.
            names = [_domain(d).value for d in power_domains]
            raise ValueError(f"Requested power domains {names} are not all supported by the current GPUs: {e}") from e
        mask = self._lib.zeus_power_monitor_domains(self._pm)
        self.supported_domains: List[PowerDomain] = [d for d in PowerDomain if mask & (1 << _C_DOMAIN[d])]
        logger.info("Monitoring power of GPUs %s in domains %s", self.gpu_indices,
                    [d.value for d in self.supported_domains])

    @property
    def measurement_domains(self) -> List[PowerDomain]:
        """The original's name for the sampled domains (supported_domains)."""
        return self.supported_domains

    def get_power_timeline(
        self,
        power_domain: PowerDomain | Literal["device_instant", "device_average", "memory_average"],
        gpu_index: int | None = None,
        start_time: float | None = None,
        end_time: float | None = None,
    ) -> dict[int, list[tuple[float, float]]]:
        """The power timeline of one domain: GPU index -> [(timestamp, watts)], the samples where
        the power changed, in [start_time, end_time] (None: unbounded).

        Raises:
            ValueError: the domain is not sampled (not supported by the GPUs).
        """
        d = _domain(power_domain)
        if d not in self.supported_domains:
            raise ValueError(f"Power domain {d.value} is not supported by the current GPUs.")
        h = self._handle()
        targets = [gpu_index] if gpu_index is not None else self.gpu_indices
        out = {}
        for g in targets:
            if g not in self.gpu_indices:
                continue
            out[g] = self._series(lambda gpu, lo, hi, p, n: self._lib.zeus_power_monitor_timeline(
                h, _C_DOMAIN[d], gpu, lo, hi, p, n), _lib.PowerSampleC, "power_mw", g, start_time, end_time, 1000.0)
        return out

    def get_all_power_timelines(self, gpu_index: int | None = None, start_time: float | None = None,
                                end_time: float | None = None) -> dict[str, dict[int, list[tuple[float, float]]]]:
        """Every sampled domain's timeline: {domain value: {GPU index: [(timestamp, watts)]}}."""
        return {d.value: self.get_power_timeline(d, gpu_index, start_time, end_time) for d in self.supported_domains}

    def _energy_domain(self, power_domain) -> PowerDomain:
        if power_domain is not None:
            d = _domain(power_domain)
            if d not in self.supported_domains:
                raise ValueError(f"Power domain {d.value} is not being monitored")
            return d
        for d in (PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE):
            if d in self.supported_domains:
                return d
        raise ValueError("Neither device_instant nor device_average power is being monitored; pass power_domain")

    def get_energy(self, start_time: float, end_time: float, power_domain=None) -> dict[int, float] | None:
        """Energy (J) each GPU used between two times (seconds since the epoch, as ``time.time()``):
        the integral of the sampled power, interpolated at the bounds. None when no sample lies in
        or around the range for any GPU. Instant power by default, else average power."""
        d = self._energy_domain(power_domain)
        h = self._handle()
        out = {}
        e = _lib.PowerEnergyC()
        for g in self.gpu_indices:
            rc = self._lib.zeus_power_monitor_energy(h, _C_DOMAIN[d], g, float(start_time), float(end_time), byref(e))
            if rc == -5:  # ENOENT: nothing to integrate
                out[g] = None
                continue
            _lib.check(rc)
            out[g] = e.energy_j
        if all(v is None for v in out.values()):
            return None
        return {g: (0.0 if v is None else v) for g, v in out.items()}

    def get_power(self, time: float | None = None, power_domain=PowerDomain.DEVICE_INSTANT) -> dict[int, float] | None:
        """Each GPU's power (W) at the sample nearest to `time` (None: the latest); None when a
        GPU has no sample yet.

        Raises:
            ValueError: the domain is not being monitored.
        """
        d = _domain(power_domain)
        if d not in self.supported_domains:
            raise ValueError(f"Power domain {d.value} is not being monitored")
        h = self._handle()
        t = math.nan if time is None else float(time)
        s = _lib.PowerSampleC()
        out = {}
        for g in self.gpu_indices:
            rc = self._lib.zeus_power_monitor_power_at(h, _C_DOMAIN[d], g, t, byref(s))
            if rc == -5:
                return None
            _lib.check(rc)
            out[g] = s.power_mw / 1000.0
        return out

    def stats(self) -> dict:
        """(not in the original) Counters: polls, failed readings, 0 mW readings skipped, samples
        dropped from full series."""
        st = _lib.PowerMonitorStatsC()
        self._lib.zeus_power_monitor_get_stats(self._handle(), byref(st))
        return {"polls": st.polls, "errors": st.errors, "zero_readings": st.zero_readings, "dropped": st.dropped}


__all__ = ["PowerMonitor", "PowerDomain", "PowerSample", "infer_counter_update_period"]
