"""Time and energy of named measurement windows (zeus.monitor.energy of the original)."""
from __future__ import annotations

import os
import struct
import sys
import threading
import weakref
from ctypes import byref, c_uint, c_void_p

_byref = byref
_modules = sys.modules
from dataclasses import dataclass
from typing import Dict, List, Optional

from .. import _lib
from .._closeable import Closeable
from ..exceptions import ZeusValueError
from ..utils.framework import check_framework, sync_if_loaded


@dataclass
class Measurement:
    """What one window measured.

    Attributes:
        time: the window's length in s.
        gpu_energy: GPU index -> energy in J.
        cpu_energy: CPU package index -> package energy in J; None when no CPU is measured.
        dram_energy: CPU package index -> DRAM energy in J, for packages that have a DRAM zone;
            None when no CPU is measured.
    """

    time: float
    gpu_energy: Dict[int, float]
    cpu_energy: Optional[Dict[int, float]] = None
    dram_energy: Optional[Dict[int, float]] = None

    @property
    def total_energy(self) -> float:
        """GPU energy plus CPU package energy (DRAM not included), in J."""
        total = sum(self.gpu_energy.values())
        if self.cpu_energy:
            total += sum(self.cpu_energy.values())
        return total


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

# Every open monitor, closed at exit before libzeus's own exit handlers run.
_live = weakref.WeakSet()


class ZeusMonitor(Closeable):
    """Measures the time and energy of named windows on GPUs (and CPU packages).

    The original's ``zeus.monitor.ZeusMonitor`` over libzeus's monitor (zeus/monitor.h). Windows
    may overlap and nest; each is begun and ended (or cancelled) by name::

        monitor = ZeusMonitor(gpu_indices=[0])
        monitor.begin_window("training")
        train()
        m = monitor.end_window("training")
        print(m.time, m.total_energy)

    Args:
        gpu_indices: GPU indices to measure, as CUDA numbers them under CUDA_VISIBLE_DEVICES.
            None: every visible GPU; []: none.
        cpu_indices: CPU packages to measure (RAPL). None: every readable package (none where
            the machine exposes no RAPL counter).
        approx_instant_energy: when a GPU's energy counter did not move during a window (too
            short for its update period), report instant power x time instead of 0 J.
        log_file: append one CSV row per ended window
            (``start_time,window_name,elapsed_time,gpu<i>_energy...``).
        sync_execution_with: "torch", "jax" or "cupy": the framework whose queued GPU work the
            window bounds wait for (when the program has imported it; see zeusc.utils.framework).
        devices: (not in the original) a :class:`zeusc.device.Devices` to read instead of the
            process's default GPUs; it must stay open as long as the monitor.
        poll_interval_s, force_power_polling: (not in the original) power sampling for GPUs
            without an energy counter; see zeus_monitor_opts.

    Raises:
        ValueError: a GPU or CPU index that does not exist or is given twice, a bad option.
        OSError: the log file cannot be opened.
    """

    def __init__(self, gpu_indices=None, cpu_indices=None, approx_instant_energy: bool = False,
                 log_file=None, sync_execution_with: str = "torch", *, devices=None,
                 poll_interval_s: float = 0.0, force_power_polling: bool = False):
        L = _lib.lib()
        self.sync_with = check_framework(sync_execution_with)
        self.approx_instant_energy = bool(approx_instant_energy)
        self.log_file = None if log_file is None else os.fspath(log_file)
        self._devices = devices
        self._h = c_void_p()
        self._lock = threading.Lock()
        self._dependents = weakref.WeakSet()  # optimizers built on this monitor

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
        if self.log_file is not None:
            o.log_file = _lib.fs_bytes(self.log_file)
        o.poll_interval_s = float(poll_interval_s)
        o.force_power_polling = bool(force_power_polling)
        _lib.check(L.zeus_monitor_open(byref(self._h), byref(o)), _NOT_FOUND_IS_VALUE)
        _live.add(self)
        if devices is not None:
            devices._dependents.add(self)

        n = L.zeus_monitor_num_gpus(self._h)
        #: The GPU indices measured (visible indices).
        self.gpu_indices: List[int] = [L.zeus_monitor_gpu_index(self._h, k) for k in range(n)]
        ncpu = L.zeus_monitor_num_cpus(self._h)
        #: The CPU package indices measured.
        self.cpu_indices: List[int] = list(cpu_indices) if cpu_indices is not None else list(range(ncpu))

        # Bound once: the per-window path is a handful of attribute loads and one C call each.
        self._begin = L.zeus_monitor_begin_window
        self._end = L.zeus_monitor_end_window
        self._unpack_gpu = struct.Struct(f"{n}d").unpack_from
        self._tls = threading.local()

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
        rc = self._begin(self._h, key.encode(), restart)
        if rc:
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
        rc = self._end(self._h, key.encode(), cancel, rref)
        if rc:
            _lib.check(rc, _NOT_FOUND_IS_VALUE)
        if cancel:
            return Measurement(0.0, {g: 0.0 for g in self.gpu_indices},
                               {c: 0.0 for c in self.cpu_indices} if self.cpu_indices else None,
                               {} if self.cpu_indices else None)
        # The C measurement lists exactly the monitor's GPUs, in the order of self.gpu_indices.
        gpu = dict(zip(self.gpu_indices, self._unpack_gpu(r, _GPU_OFF)))
        nc = r.num_cpus
        if nc:
            idx = r.cpu_indices[:nc]
            cpu = dict(zip(idx, r.cpu_energy_j[:nc]))
            valid = r.dram_valid[:nc]
            dram_e = r.dram_energy_j[:nc]
            dram = {idx[k]: dram_e[k] for k in range(nc) if valid[k]}
            return Measurement(r.time_s, gpu, cpu, dram)
        return Measurement(r.time_s, gpu)

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
            if self._h:
                _lib.lib().zeus_monitor_close(self._h)
                self._h = c_void_p()
                self._begin = self._end = _closed
        _live.discard(self)


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

__all__ = ["ZeusMonitor", "Measurement"]
