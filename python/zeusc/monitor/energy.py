"""Time and energy of named measurement windows (zeus.monitor.energy of the original)."""
from __future__ import annotations

import os
import struct
import sys
import threading
import time as _time
import warnings
import weakref
from collections.abc import Mapping
from ctypes import byref, c_uint, c_void_p, create_string_buffer
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Dict, Iterator, List, Literal, Optional

from .. import _lib
from .._closeable import Closeable, _get_ident, guard_methods
from ..exceptions import ZeusValueError
from ..utils.framework import check_framework, sync_if_loaded

_byref = byref
_modules = sys.modules

#: The warning of a window whose GPU energy came out as zero (the original's text).
ZERO_ENERGY_WARNING = (
    "The energy consumption of one or more GPUs was measured as zero. This means that the time duration of the "
    "measurement window was shorter than the GPU's energy counter update period. Consider turning on the "
    "`approx_instant_energy` option in `ZeusMonitor`, which approximates the energy consumption of a short time "
    "window as instant power draw x window duration.")


@dataclass
class Measurement:
    """What one window measured.

    Attributes:
        time: the window's length in s.
        gpu_energy: GPU index -> energy in J (indices as the framework numbers the GPUs, after
            ``CUDA_VISIBLE_DEVICES``).
        cpu_energy: CPU package index -> package energy in J; None when no CPU is measured.
        dram_energy: CPU package index -> DRAM energy in J, for packages that have a DRAM zone;
            None when none has.
        soc_energy: on an NVIDIA Jetson, its rails' energy as a
            :class:`~zeusc.device.soc.jetson.JetsonMeasurement` (cpu_energy_mj, gpu_energy_mj,
            total_energy_mj: mJ, as the original's; None for a rail the board lacks); None
            elsewhere.
    """

    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None
    soc_energy: Optional[object] = None

    @cached_property
    def total_energy(self) -> float:
        """The GPUs' energy in J (CPU and DRAM not included, as the original)."""
        return sum(self.gpu_energy.values())


@dataclass
class MeasurementState:
    """The readings an open window began with (``ZeusMonitor.measurement_states[key]``).

    Attributes:
        time: when the window began, in seconds since the Unix epoch.
        gpu_energy: GPU index -> the GPU's energy counter at the start, in J, for GPUs that have
            one (GPUs measured by power polling are left out, as the original).
        cpu_energy: package index -> the package's counter at the start, in J; None without CPUs.
        dram_energy: package index -> the DRAM counter at the start, in J, for packages with a
            DRAM zone; None when none has.
    """

    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None

    @cached_property
    def total_energy(self) -> float:
        """The GPUs' readings summed, in J."""
        return sum(self.gpu_energy.values())


def _index_list(what: str, values) -> List[int]:
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"{what} must be a list of non-negative ints, got {type(values).__name__}") from None
    for v in items:
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError(f"{what}: {v!r} is not an int")
        if not 0 <= v < 2**32:
            raise ValueError(f"{what}: {v} is not a valid index (expected a non-negative int)")
    return items


_GPU_OFF = _lib.MeasurementC.gpu_energy_j.offset

# Where the thing not found is a window or an index, the original raised ValueError.
_NOT_FOUND_IS_VALUE = {-5: ZeusValueError}
_EEXIST = -6
_ENOENT = -5

# Every open monitor, closed at exit before libzeus's own exit handlers run.
_live = weakref.WeakSet()


class _WindowStates(Mapping):
    """``ZeusMonitor.measurement_states``: a live, read-only view of the open windows, in the
    order they were begun; each lookup reads libzeus and gives a fresh MeasurementState."""

    def __init__(self, monitor: "ZeusMonitor") -> None:
        self._m = monitor

    def __getitem__(self, key: str) -> MeasurementState:
        m = self._m
        if not isinstance(key, str):
            raise KeyError(key)
        r = _lib.MeasurementC()
        rc = _lib.lib().zeus_monitor_window_state(m._handle(), key.encode(), byref(r))
        if rc == _ENOENT:
            raise KeyError(key)
        _lib.check(rc)
        return m._state_of(r)

    def __contains__(self, key) -> bool:
        return isinstance(key, str) and bool(_lib.lib().zeus_monitor_is_open(self._m._handle(), key.encode()))

    def __iter__(self) -> Iterator[str]:
        L = _lib.lib()
        h = self._m._handle()
        keys = []
        buf = create_string_buffer(256)
        for i in range(L.zeus_monitor_num_windows(h)):
            while True:
                rc = L.zeus_monitor_window_key(h, i, buf, len(buf))
                if rc == -7:  # ERANGE: a longer key
                    buf = create_string_buffer(len(buf) * 4)
                    continue
                break
            if rc == 0:
                keys.append(buf.value.decode())
        return iter(keys)

    def __len__(self) -> int:
        return int(_lib.lib().zeus_monitor_num_windows(self._m._handle()))

    def __repr__(self) -> str:
        return f"measurement_states({dict(self)!r})"


@guard_methods("begin_window", "end_window", "_end_failed", "_log_row")
class ZeusMonitor(Closeable):
    """Measures the time and energy of named windows on GPUs (and CPU packages).

    The original's ``zeus.monitor.ZeusMonitor`` over libzeus's monitor (zeus/monitor.h). Windows
    may overlap and nest; each is begun and ended (or cancelled) by name::

        monitor = ZeusMonitor(gpu_indices=[0])
        monitor.begin_window("training")
        train()
        m = monitor.end_window("training")
        print(m.time, m.total_energy)

    GPUs with an energy counter (Volta and newer) are read through it; older ones are measured
    by a libzeus thread that samples their power and integrates it (the original spawned a
    Python process for that).

    Args:
        gpu_indices: GPU indices to measure, as CUDA numbers them under CUDA_VISIBLE_DEVICES.
            None: every visible GPU; []: none.
        cpu_indices: CPU packages to measure (RAPL). None: every readable package (none where
            the machine exposes no RAPL counter).
        approx_instant_energy: when a GPU's energy counter did not move during a window (too
            short for its update period), report instant power x time instead of 0 J.
        log_file: write one CSV row per ended window (``start_time,window_name,elapsed_time,
            gpu<i>_energy...``; start_time in seconds since the epoch). The file is truncated and
            its folder created, as the original.
        sync_execution_with: "torch", "jax" or "cupy": the framework whose queued GPU work the
            window bounds wait for (when the program has imported it; see zeusc.utils.framework).
        devices: (not in the original) a :class:`zeusc.device.Devices` to read instead of the
            process's default GPUs; it must stay open as long as the monitor.
        poll_interval_s, force_power_polling: (not in the original) power sampling for GPUs
            without an energy counter; see zeus_monitor_opts.
        energy_source: (not in the original) "auto" (default; ZEUS_MONITOR_ENERGY when set),
            "raw" or "sampled": where a GPU's counter is slow to read and ticks coarsely (an H100:
            3.3 ms a read, a 100 ms tick), "sampled" follows the ticks on a libzeus thread so that
            a window bound reads no device and a short window stays accurate; "raw" is the
            original's counter difference. "auto" samples GPUs whose counter read is slow. See
            docs/real-gpus.md.

    Attributes:
        gpu_indices, cpu_indices: what is measured.
        energy_sources: per measured GPU, "raw", "sampled" or "polled".
        gpus, cpus, soc: the device objects (``zeusc.device``), as the original's.
        measurement_states: the open windows' start readings (a live read-only mapping).

    Raises:
        ValueError: a GPU or CPU index that does not exist or is given twice, a bad option.
        OSError: the log file cannot be opened.
    """

    def __init__(self, gpu_indices: list[int] | None = None, cpu_indices: list[int] | None = None,
                 approx_instant_energy: bool = False, log_file: str | Path | None = None,
                 sync_execution_with: Literal["torch", "jax"] = "torch", *, devices=None,
                 poll_interval_s: float = 0.0, force_power_polling: bool = False,
                 energy_source: Literal["auto", "raw", "sampled"] = "auto") -> None:
        self._h = c_void_p()  # first, so that close() works whatever fails below
        self._log_f = None
        L = _lib.lib()
        self.sync_with = check_framework(sync_execution_with)
        self.approx_instant_energy = bool(approx_instant_energy)
        self._devices = devices
        self._lock = threading.Lock()
        self._dependents = weakref.WeakSet()  # optimizers built on this monitor
        self._end_hook = None  # a ctypes callback a subclass installs (see zeusc.utils.testing)

        o = _lib.MonitorOpts()
        if devices is not None:
            o.devices = devices._handle()
        keep = []
        if gpu_indices is not None:
            g = _index_list("gpu_indices", gpu_indices)
            arr = (c_uint * max(len(g), 1))(*g)
            keep.append(arr)
            o.gpu_indices = arr
            o.num_gpu_indices = len(g)
        if cpu_indices is not None:
            c = _index_list("cpu_indices", cpu_indices)
            arr = (c_uint * max(len(c), 1))(*c)
            keep.append(arr)
            o.cpu_indices = arr
            o.num_cpu_indices = len(c)
        o.approx_instant_energy = self.approx_instant_energy
        o.poll_interval_s = float(poll_interval_s)
        o.force_power_polling = bool(force_power_polling)
        o.no_short_window_warning = True  # reported with warnings.warn below, as the original
        if energy_source not in ("auto", "raw", "sampled"):
            raise ValueError(f"energy_source must be 'auto', 'raw' or 'sampled', got {energy_source!r}")
        o.energy_source = _lib.ENERGY_SOURCES[energy_source]
        self._configure(o)
        _lib.check(L.zeus_monitor_open(byref(self._h), byref(o)), _NOT_FOUND_IS_VALUE)
        _live.add(self)
        if devices is not None:
            devices._depend(self)
            self._deps_owner = devices

        #: Whether the monitor measures an SoC's rails (a Jetson), as the original's attribute.
        self.soc_is_present: bool = bool(L.zeus_monitor_soc(self._h))
        n = L.zeus_monitor_num_gpus(self._h)
        #: The GPU indices measured (visible indices).
        self.gpu_indices: List[int] = [L.zeus_monitor_gpu_index(self._h, k) for k in range(n)]
        self._polled = {self.gpu_indices[k] for k in range(n) if L.zeus_monitor_gpu_polled(self._h, k)}
        names = {v: k for k, v in _lib.ENERGY_SOURCES.items()}
        #: Per measured GPU, where its energy comes from: "raw", "sampled" or "polled".
        self.energy_sources: Dict[int, str] = {
            self.gpu_indices[k]: names.get(L.zeus_monitor_gpu_energy_source(self._h, k), "raw") for k in range(n)}
        ncpu = L.zeus_monitor_num_cpus(self._h)
        #: The CPU package indices measured.
        self.cpu_indices: List[int] = list(cpu_indices) if cpu_indices is not None else list(range(ncpu))

        # The epoch time base of measurement_states and the log file: the wall clock now, and
        # the monitor's clock (the backend's) now.
        dev_h = L.zeus_monitor_devices(self._h)
        self._dev0 = L.zeus_devices_now(dev_h)
        self._wall0 = _time.time()

        self.log_file = None
        if log_file is not None:
            path = os.fspath(log_file)
            folder = os.path.dirname(path)
            if folder:
                os.makedirs(folder, exist_ok=True)
            try:
                self._log_f = open(path, "w")
            except OSError as e:
                self.close()
                raise type(e)(e.errno, f"ZeusMonitor: cannot open the log file: {e.strerror}", path) from e
            self.log_file = self._log_f
            self._log_f.write("start_time,window_name,elapsed_time,"
                              + ",".join(f"gpu{i}_energy" for i in self.gpu_indices) + "\n")
            self._log_f.flush()

        # Bound once: the per-window path is a handful of attribute loads and one C call each.
        self._begin = L.zeus_monitor_begin_window
        self._end = L.zeus_monitor_end_window
        self._unpack_gpu = struct.Struct(f"{n}d").unpack_from
        self._tls = threading.local()
        self._warn_zero = not self.approx_instant_energy

    def _configure(self, opts) -> None:
        """Hook for subclasses to adjust the C options before the monitor opens."""

    # ---- the original's device attributes ------------------------------------------------------

    @cached_property
    def gpus(self):
        """The GPUs (``zeusc.device.gpu.GPUs``) the monitor reads, by visible index."""
        from ..device.gpu import LibzeusGPUs
        return LibzeusGPUs(self.devices)

    @cached_property
    def cpus(self):
        """The CPU packages (``zeusc.device.cpu.CPUs``); EmptyCPUs where none is readable."""
        from ..device.cpu import EmptyCPUs, ZeusCPUInitError, get_cpus
        try:
            return get_cpus()
        except ZeusCPUInitError:
            return EmptyCPUs()

    @cached_property
    def soc(self):
        """The SoC (``zeusc.device.soc.get_soc()``: a Jetson) where the monitor measures one, else
        EmptySoC. The windows' soc_energy comes from the monitor itself, not from this object."""
        from ..device.soc import EmptySoC, ZeusSoCInitError, get_soc
        if self.soc_is_present:
            try:
                return get_soc()
            except ZeusSoCInitError:
                pass
        return EmptySoC()

    def _soc_energy(self, r, cancel: bool = False):
        if not self.soc_is_present:
            return None
        from ..device.soc.jetson import JetsonMeasurement
        m = JetsonMeasurement._from_c(r)
        if cancel:
            m.zero_all_fields()
        return m

    @property
    def measurement_states(self) -> Mapping:
        """Open windows -> :class:`MeasurementState` (their start readings), in begin order."""
        return _WindowStates(self)

    def _epoch(self, t_dev: float) -> float:
        return self._wall0 + (t_dev - self._dev0)

    def _state_of(self, r) -> MeasurementState:
        gpu = {self.gpu_indices[k]: r.gpu_energy_j[k] for k in range(r.num_gpus)
               if self.gpu_indices[k] not in self._polled}
        nc = r.num_cpus
        cpu = {r.cpu_indices[k]: r.cpu_energy_j[k] for k in range(nc)}
        dram = {r.cpu_indices[k]: r.dram_energy_j[k] for k in range(nc) if r.dram_valid[k]}
        return MeasurementState(time=self._epoch(r.start_time_s), gpu_energy=gpu, cpu_energy=cpu or None,
                                dram_energy=dram or None)

    # ---- windows ----------------------------------------------------------------------------

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Begins window `key`.

        Args:
            key: the window's name (a non-empty string).
            sync_execution: first wait for GPU work queued through ``sync_execution_with``.
            restart: begin an open window again (start it over) instead of raising.

        Raises:
            ValueError: the window is open already (and not `restart`), or the key is empty.
        """
        if sync_execution and self.sync_with in _modules and self.gpu_indices:
            sync_if_loaded(self.gpu_indices, self.sync_with)
        if key.__class__ is not str or not key or "\0" in key:
            _key(key)
        me = _get_ident()
        holds = self._holds
        holds.append(me)  # the guard (zeusc/_closeable.py): close() waits for this call
        try:
            if self._closing:
                _closed()
            rc = self._begin(self._h, key.encode(), restart)
        finally:
            holds.remove(me)
            if self._closing and not holds:
                self._run_free()
        if rc:
            if rc == _EEXIST:
                raise _value_error(rc, f"Measurement window '{key}' already exists")
            _lib.check(rc, _NOT_FOUND_IS_VALUE)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """Ends window `key` and returns what it measured.

        Args:
            key: the window's name.
            sync_execution: first wait for GPU work queued through ``sync_execution_with``.
            cancel: discard the window: nothing is measured or logged, and the Measurement
                returned is all zeros (as in the original).

        Raises:
            ValueError: no window named `key` is open.
        """
        if sync_execution and self.sync_with in _modules and self.gpu_indices:
            sync_if_loaded(self.gpu_indices, self.sync_with)
        if key.__class__ is not str or not key or "\0" in key:
            _key(key)
        try:
            r, rref = self._tls.m
        except AttributeError:
            r = _lib.MeasurementC()
            rref = _byref(r)
            self._tls.m = (r, rref)
        me = _get_ident()
        holds = self._holds
        holds.append(me)
        try:
            if self._closing:
                _closed()
            rc = self._end(self._h, key.encode(), cancel, rref)
        finally:
            holds.remove(me)
            if self._closing and not holds:
                self._run_free()
        if rc:
            self._end_failed(rc, key)
        if cancel:
            return Measurement(0.0, {g: 0.0 for g in self.gpu_indices}, {c: 0.0 for c in self.cpu_indices},
                               soc_energy=self._soc_energy(r, cancel=True))
        # The C measurement lists exactly the monitor's GPUs, in the order of self.gpu_indices.
        energies = self._unpack_gpu(r, _GPU_OFF)
        gpu = dict(zip(self.gpu_indices, energies))
        if self._warn_zero and 0.0 in energies and r.time_s > 0:
            warnings.warn(ZERO_ENERGY_WARNING, stacklevel=2)
        if self._log_f is not None:
            self._log_row(key, r, energies)
        nc = r.num_cpus
        if nc:
            idx = r.cpu_indices[:nc]
            cpu = dict(zip(idx, r.cpu_energy_j[:nc]))
            valid = r.dram_valid[:nc]
            dram_e = r.dram_energy_j[:nc]
            dram = {idx[k]: dram_e[k] for k in range(nc) if valid[k]}
            return Measurement(r.time_s, gpu, cpu, dram or None, self._soc_energy(r))
        return Measurement(r.time_s, gpu, soc_energy=self._soc_energy(r))

    def end_window_detail(self, key: str, sync_execution: bool = True):
        """(not in the original) Ends window `key` as end_window and also returns, per GPU, how
        its energy was found: ``{gpu: {"source": "raw"|"sampled"|"polled", "raw_energy_j": the
        counter's difference, "corrected_energy_j": the figure in the Measurement,
        "error_bound_j": an estimate of its error bound (0 unless sampled)}}``.

        Returns:
            (Measurement, dict)
        """
        if sync_execution and self.sync_with in _modules and self.gpu_indices:
            sync_if_loaded(self.gpu_indices, self.sync_with)
        r = _lib.MeasurementC()
        d = _lib.WindowDetailC()
        rc = _lib.lib().zeus_monitor_end_window_detail(self._handle(), _key(key), False, _byref(r), _byref(d))
        if rc:
            self._end_failed(rc, key)
        names = {v: k for k, v in _lib.ENERGY_SOURCES.items()}
        n = len(self.gpu_indices)
        energies = list(r.gpu_energy_j[:n])
        if self._log_f is not None:
            self._log_row(key, r, energies)
        detail = {self.gpu_indices[k]: {"source": names.get(d.source[k], "raw"), "raw_energy_j": d.raw_energy_j[k],
                                        "corrected_energy_j": d.corrected_energy_j[k],
                                        "error_bound_j": d.error_bound_j[k]} for k in range(n)}
        gpu = dict(zip(self.gpu_indices, energies))
        nc = r.num_cpus
        if nc:
            idx = r.cpu_indices[:nc]
            return Measurement(r.time_s, gpu, dict(zip(idx, r.cpu_energy_j[:nc])),
                               soc_energy=self._soc_energy(r)), detail
        return Measurement(r.time_s, gpu, soc_energy=self._soc_energy(r)), detail

    def sampler_cpu_s(self) -> float:
        """(not in the original) CPU seconds the monitor's tick followers have used (0 without)."""
        return float(_lib.lib().zeus_monitor_sampler_cpu_s(self._handle()))

    def _end_failed(self, rc: int, key: str):
        if rc == _ENOENT:
            raise _value_error(rc, f"Measurement window '{key}' does not exist")
        _lib.check(rc, _NOT_FOUND_IS_VALUE)

    def _log_row(self, key: str, r, energies) -> None:
        f = self._log_f
        f.write(f"{self._epoch(r.start_time_s)},{key},{r.time_s}," + ",".join(str(e) for e in energies) + "\n")
        f.flush()

    def reset_windows(self) -> None:
        """Discards every open window (as cancelling each)."""
        _lib.lib().zeus_monitor_reset_windows(self._handle())

    def is_window_open(self, key: str) -> bool:
        """(not in the original) Whether window `key` is open."""
        return bool(_lib.lib().zeus_monitor_is_open(self._handle(), _key(key)))

    # ---- lifetime ---------------------------------------------------------------------------

    def _handle(self):
        h = self._h
        if not h:
            raise ValueError("this ZeusMonitor is closed")
        return h

    @property
    def devices(self):
        """The :class:`zeusc.device.Devices` the monitor reads (borrowed)."""
        from ..device import Devices
        if self._devices is not None:
            return self._devices
        return Devices._borrow(_lib.lib().zeus_monitor_devices(self._handle()))

    def close(self) -> None:
        """(not in the original) Closes the monitor; optimizers built on it are closed first
        (putting their GPUs back). Open windows are discarded. Idempotent."""
        with self._lock:
            for dep in list(self._dependents):
                dep.close()
            if self._h and not self._closing:
                h = self._h

                def free():
                    _lib.lib().zeus_monitor_close(h)
                    self._h = c_void_p()
                    self._begin = self._end = _closed

                # Calls of other threads in progress finish first; later ones raise ValueError.
                self._close_guarded(free)
            if self._log_f is not None:
                try:
                    self._log_f.close()
                except OSError:
                    pass
                self._log_f = None
        owner = getattr(self, "_deps_owner", None)
        if owner is not None:
            owner._undepend(self)
        _live.discard(self)


def _value_error(rc: int, message: str) -> ZeusValueError:
    e = ZeusValueError(f"{message} ({_lib.errmsg(rc)})")
    e.code = rc
    e.errname = _lib.lib().zeus_errname(rc).decode()
    return e


def _closed(*_args):
    raise ValueError("this ZeusMonitor is closed")


def _key(key) -> bytes:
    if not isinstance(key, str):
        raise TypeError(f"window key must be a str, got {type(key).__name__}")
    if not key or "\0" in key:
        raise ValueError(f"window key must be a non-empty string without NUL characters, got {key!r}")
    return key.encode()


def _close_all() -> None:
    for m in list(_live):
        try:
            m.close()
        except Exception:
            pass


import atexit  # noqa: E402

atexit.register(_close_all)

__all__ = ["ZeusMonitor", "Measurement", "MeasurementState", "ZERO_ENERGY_WARNING"]
