"""Windows as Prometheus metrics pushed to a Pushgateway: the original's ``zeus.metric``.

Three classes with the original's names, arguments and metric names, each measuring named
windows and pushing to a Prometheus Pushgateway under a job (and, an addition, grouping labels):

- :class:`EnergyHistogram`: ``end_window`` observes the window's energy per GPU, CPU package and
  DRAM zone into histograms ``energy_monitor_{gpu,cpu,dram}_energy_joules{window,index}`` and its
  duration into ``energy_monitor_window_duration_seconds{window}`` (ours), then pushes.
- :class:`EnergyCumulativeCounter`: while a window is open, every ``update_period`` seconds the
  energy used since the last update is added to ``energy_monitor_{gpu,cpu,dram}_energy_joules_total``
  and pushed; ``end_window`` adds the last partial period and pushes.
- :class:`PowerGauge`: while a window is open, every ``update_period`` seconds each GPU's power
  is set into ``power_monitor_gpu_power_watts{window,index}`` and pushed.

The work is libzeus's (zeus/metric.h): measuring, the text format and the HTTP push (libcurl),
counters and gauges in a thread of the library rather than a spawned Python process each. The
``prometheus_client`` package is not needed. Differences from the original, and why:

- ``grouping_key`` (a dict of label names to values) is added to every series through the push
  URL, so that several processes can push under one job without overwriting each other (give
  each its own ``instance`` or ``rank``).
- Pushes are HTTP POSTs: a histogram and a gauge pushed under the same job and grouping key stay
  side by side (the original's PUT made each push delete the other's metrics). Counters end in
  ``_total``, so that they never collide with the histograms of the same name.
- A push that fails keeps the values for the next push. ``EnergyHistogram.end_window`` raises it
  (:class:`zeusc.exceptions.ZeusConnectionError`, ``ZeusTimeoutError``, or ``ZeusRuntimeError``
  for an HTTP error) after the window was recorded, as the original's ``push_to_gateway``
  raises; the counter's and gauge's updates log failures to the ``zeusc.metric`` logger and
  carry on, as the original's processes print them.
"""
from __future__ import annotations

import abc
import warnings
from ctypes import byref, c_char_p, c_double, c_uint, c_void_p, string_at
from typing import Dict, Mapping, Optional, Sequence

from . import _lib
from ._closeable import Closeable, guard_methods
from .exceptions import ZeusValueError
from .monitor.energy import ZeusMonitor

_DEF_GPU = (50.0, 100.0, 200.0, 500.0, 1000.0)
_DEF_CPU = (10.0, 50.0, 100.0, 500.0, 1000.0)
_DEF_DRAM = (5.0, 10.0, 20.0, 50.0, 150.0)


class Metric(abc.ABC):
    """The original's interface of every metric: named windows."""

    @abc.abstractmethod
    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        """Begins window `name`."""

    @abc.abstractmethod
    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Ends window `name` and reports it."""


def _url(url: str) -> str:
    if not isinstance(url, str) or not url:
        raise ValueError("pushgateway_url: expected a URL such as 'http://127.0.0.1:9091'")
    # prometheus_client accepts "host:port" and adds http://; so do we.
    return url if "://" in url else "http://" + url


def _buckets(what: str, b: Optional[Sequence[float]]):
    if b is None:
        return None
    vals = [float(x) for x in b]
    if not vals:
        raise ValueError(f"{what} bucket range cannot be empty. Please provide a valid range or omit the "
                         "argument to use defaults.")
    # Unsorted bounds: libzeus refuses them (ValueError), as prometheus_client does.
    return (c_double * len(vals))(*vals), len(vals)


@guard_methods("_sync")
class _PushMetric(Metric, Closeable):
    """What the three classes share: a ZeusMonitor and a zeus_metric handle on it."""

    _kind = -1

    def __init__(self, cpu_indices, gpu_indices, pushgateway_url: str, job: str, *,
                 update_period: float = 0.0, grouping_key: Optional[Mapping[str, str]] = None,
                 timeout: float = 5.0, buckets: Optional[dict] = None) -> None:
        self._h = c_void_p()
        self._monitor: Optional[ZeusMonitor] = None
        L = _lib.require_metric()
        if not isinstance(job, str) or not job:
            raise ValueError("job: expected a non-empty name")
        self.pushgateway_url = pushgateway_url
        self.job = job
        self.grouping_key: Dict[str, str] = {str(k): str(v) for k, v in (grouping_key or {}).items()}
        self._monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices)
        self.gpu_indices = list(self._monitor.gpu_indices)
        self.cpu_indices = list(self._monitor.cpu_indices)
        o = _lib.MetricOpts()
        L.zeus_metric_opts_init(byref(o))
        keep = []
        o.url = _url(pushgateway_url).encode()
        o.job = job.encode()
        if self.grouping_key:
            names = (c_char_p * len(self.grouping_key))(*[k.encode() for k in self.grouping_key])
            values = (c_char_p * len(self.grouping_key))(*[v.encode() for v in self.grouping_key.values()])
            keep += [names, values]
            o.label_names, o.label_values, o.num_labels = names, values, len(self.grouping_key)
        o.monitor = self._monitor._handle()
        for field, b in (buckets or {}).items():
            if b is not None:
                arr, n = b
                keep.append(arr)
                setattr(o, field, arr)
                setattr(o, "num_" + field.rsplit("_", 1)[0], n)
        o.update_period_s = float(update_period)
        o.timeout_s = float(timeout)
        rc = L.zeus_metric_open(byref(self._h), self._kind, byref(o))
        if rc:
            self._monitor.close()
            _lib.check(rc, {_lib.ZEUS_EINVAL: ZeusValueError})

    def _handle(self):
        if not self._h:
            raise ValueError(f"{type(self).__name__} is closed")
        return self._h

    def _sync(self, sync_execution: bool) -> None:
        if sync_execution and self.gpu_indices and self._monitor is not None:
            from .utils.framework import sync_if_loaded
            sync_if_loaded(self.gpu_indices, self._monitor.sync_with)

    def begin_window(self, name: str, sync_execution: bool = True) -> None:
        self._sync(sync_execution)
        rc = _lib.lib().zeus_metric_begin_window(self._handle(), _name(name))
        if rc == -6:  # ZEUS_EEXIST
            raise ZeusValueError(f"{type(self).__name__} window '{name}' already exists.")
        _lib.check(rc, {_lib.ZEUS_EINVAL: ZeusValueError})

    def _end(self, name: str, sync_execution: bool) -> int:
        self._sync(sync_execution)
        rc = _lib.lib().zeus_metric_end_window(self._handle(), _name(name))
        if rc == -5:  # ZEUS_ENOENT
            raise ZeusValueError(f"No active {type(self).__name__} window found for '{name}'.")
        return rc

    def push(self) -> None:
        """(not in the original) Pushes every value held now."""
        _lib.check(_lib.lib().zeus_metric_push(self._handle()))

    def text(self) -> str:
        """(not in the original) What a push sends now, in the Prometheus text format."""
        p = c_void_p()
        _lib.check(_lib.lib().zeus_metric_text(self._handle(), byref(p)))
        try:
            return string_at(p).decode()
        finally:
            _lib.c_free(p)

    def push_url(self) -> str:
        """(not in the original) The URL pushes go to (job and grouping key in its path)."""
        p = c_void_p()
        _lib.check(_lib.lib().zeus_metric_push_url(self._handle(), byref(p)))
        try:
            return string_at(p).decode()
        finally:
            _lib.c_free(p)

    def close(self) -> None:
        """Stops the updates of windows left open (no last push) and releases the handle and
        its monitor. Idempotent."""
        h = getattr(self, "_h", None)
        if not h:  # never opened: only the monitor, if made, to close
            m, self._monitor = getattr(self, "_monitor", None), None
            if m is not None:
                m.close()
            return
        if self._closing:
            return

        def free():
            _lib.lib().zeus_metric_close(h)
            self._h = c_void_p()
            m, self._monitor = self._monitor, None
            if m is not None:
                m.close()

        # Calls of other threads in progress (a push among them) finish first; later ones raise
        # ValueError.
        self._close_guarded(free)


def _name(name) -> bytes:
    if not isinstance(name, str) or not name or "\0" in name:
        raise ValueError(f"window name: expected a non-empty string, got {name!r}")
    return name.encode()


class EnergyHistogram(_PushMetric):
    """Energy of each window as Prometheus histograms (the original's ``EnergyHistogram``).

    Args:
        cpu_indices: CPU packages to measure (None: every readable one; [] none).
        gpu_indices: GPUs to measure (None: every visible one).
        pushgateway_url: the Pushgateway ("http://127.0.0.1:9091" or "127.0.0.1:9091").
        job: the job every series is pushed under.
        gpu_bucket_range, cpu_bucket_range, dram_bucket_range: histogram bucket bounds in J.
        grouping_key: (ours) labels added to every series, e.g. {"instance": "node3"}.
        time_bucket_range: (ours) bucket bounds in s of the window-duration histogram (None: 0.1 s
            to 1 h).
        timeout: (ours) seconds one push may take.

    Raises:
        ValueError: an empty bucket range, a bad URL, job or label.
    """

    _kind = _lib.ZEUS_METRIC_ENERGY_HISTOGRAM

    def __init__(self, cpu_indices: Optional[list], gpu_indices: Optional[list], pushgateway_url: str, job: str,
                 gpu_bucket_range: Sequence[float] = _DEF_GPU, cpu_bucket_range: Sequence[float] = _DEF_CPU,
                 dram_bucket_range: Sequence[float] = _DEF_DRAM, *, grouping_key: Optional[Mapping[str, str]] = None,
                 time_bucket_range: Optional[Sequence[float]] = None, timeout: float = 5.0) -> None:
        if not gpu_bucket_range:
            raise ValueError("GPU bucket range cannot be empty. Please provide a valid range or omit the argument "
                             "to use defaults.")
        if not cpu_bucket_range:
            raise ValueError("CPU bucket range cannot be empty. Please provide a valid range or omit the argument "
                             "to use defaults.")
        if not dram_bucket_range:
            raise ValueError("DRAM bucket range cannot be empty. Please provide a valid range or omit the argument "
                             "to use defaults.")
        self.gpu_bucket_range = list(gpu_bucket_range)
        self.cpu_bucket_range = list(cpu_bucket_range)
        self.dram_bucket_range = list(dram_bucket_range)
        b = {"gpu_buckets_j": _buckets("GPU", gpu_bucket_range), "cpu_buckets_j": _buckets("CPU", cpu_bucket_range),
             "dram_buckets_j": _buckets("DRAM", dram_bucket_range),
             "time_buckets_s": _buckets("Time", time_bucket_range)}
        super().__init__(cpu_indices, gpu_indices, pushgateway_url, job, grouping_key=grouping_key,
                         timeout=timeout, buckets=b)
        self.max_gpu_bucket, self.min_gpu_bucket = max(self.gpu_bucket_range), min(self.gpu_bucket_range)
        self.max_cpu_bucket, self.min_cpu_bucket = max(self.cpu_bucket_range), min(self.cpu_bucket_range)
        self.max_dram_bucket, self.min_dram_bucket = max(self.dram_bucket_range), min(self.dram_bucket_range)

    def end_window(self, name: str, sync_execution: bool = True) -> None:
        """Ends window `name`, observes its energies and duration, and pushes. A failed push
        raises after the window was recorded (its values go with the next push)."""
        _lib.check(self._end(name, sync_execution))


class EnergyCumulativeCounter(_PushMetric):
    """Energy over time as Prometheus counters (the original's ``EnergyCumulativeCounter``).

    Args:
        cpu_indices, gpu_indices: what to measure (as :class:`EnergyHistogram`).
        update_period: seconds between updates (and pushes) while a window is open.
        pushgateway_url, job: where and under which job to push.
        grouping_key, timeout: (ours) as :class:`EnergyHistogram`.
    """

    _kind = _lib.ZEUS_METRIC_ENERGY_COUNTER

    def __init__(self, cpu_indices: Optional[list], gpu_indices: Optional[list], update_period: float,
                 pushgateway_url: str, job: str, *, grouping_key: Optional[Mapping[str, str]] = None,
                 timeout: float = 5.0) -> None:
        self.update_period = update_period
        super().__init__(cpu_indices, gpu_indices, pushgateway_url, job, update_period=float(update_period),
                         grouping_key=grouping_key, timeout=timeout)

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        super().begin_window(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Ends window `name`: adds the last partial period and pushes; a failed push is a
        warning (the original's process printed it)."""
        rc = self._end(name, sync_execution)
        if rc:
            e = _lib.error(rc)
            if rc in (-15, -14, -16):  # ENET, ETIMEDOUT, EHTTP
                warnings.warn(f"EnergyCumulativeCounter: pushing window '{name}' failed: {e}", stacklevel=2)
            else:
                raise e


class PowerGauge(_PushMetric):
    """GPU power as a Prometheus gauge (the original's ``PowerGauge``).

    Args:
        gpu_indices: GPUs to read (None: every visible one).
        update_period: seconds between updates (and pushes) while a window is open.
        pushgateway_url, job: where and under which job to push.
        grouping_key, timeout: (ours) as :class:`EnergyHistogram`.
    """

    _kind = _lib.ZEUS_METRIC_POWER_GAUGE

    def __init__(self, gpu_indices: Optional[list], update_period: float, pushgateway_url: str, job: str, *,
                 grouping_key: Optional[Mapping[str, str]] = None, timeout: float = 5.0) -> None:
        self.update_period = update_period
        super().__init__([], gpu_indices, pushgateway_url, job, update_period=float(update_period),
                         grouping_key=grouping_key, timeout=timeout)

    def begin_window(self, name: str, sync_execution: bool = False) -> None:
        super().begin_window(name, sync_execution)

    def end_window(self, name: str, sync_execution: bool = False) -> None:
        """Stops updating window `name` (its last value stays on the gateway)."""
        _lib.check(self._end(name, sync_execution))


__all__ = ["Metric", "EnergyHistogram", "EnergyCumulativeCounter", "PowerGauge"]
