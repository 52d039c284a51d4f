"""Test utilities (zeus.utils.testing of the original): a monitor that replays recorded windows.

:class:`ReplayZeusMonitor` reads a ``ZeusMonitor`` log file (``start_time,window_name,
elapsed_time,gpu<i>_energy...``) and answers every ended window with the next row, so a training
loop (and a power-limit optimizer) can be fast-forwarded through measurements recorded before.
Given to :class:`~zeusc.optimizer.power_limit.GlobalPowerLimitOptimizer`, it replays the windows
that libzeus's optimizer ends too: the monitor then opens a libzeus monitor over the same GPU
indices (the process's default GPUs, or ``devices=``), whose window ends take their time and
energy from the log, while the optimizer sets power limits on those GPUs.
"""
from __future__ import annotations

import logging
import threading
import weakref
from pathlib import Path
from typing import List, Optional

from .. import _lib
from ..monitor.energy import Measurement, ZeusMonitor
from .framework import sync_execution as sync_execution_fn

logger = logging.getLogger("zeusc.utils.testing")


class _HookedMonitor(ZeusMonitor):
    """A libzeus monitor whose window ends are answered by a replay."""

    def __init__(self, replay: "ReplayZeusMonitor", **kw) -> None:
        self._replay_ref = replay
        self._cb = _lib.END_HOOK_FN(replay._c_hook)
        super().__init__(**kw)

    def _configure(self, opts) -> None:
        opts.end_hook = self._cb


class ReplayZeusMonitor(ZeusMonitor):
    """A ZeusMonitor that replays windows recorded by a real monitor (for tests).

    Each ``end_window`` (not cancelled) returns the next row of the log file; a cancelled window
    consumes no row. With concurrent windows, the rows must be in the order of the
    ``end_window`` calls.

    Args:
        gpu_indices: the GPUs of the log; None: inferred from its header. CUDA_VISIBLE_DEVICES
            is not applied.
        approx_instant_energy: not used.
        log_file: the CSV to replay; None is a ValueError.
        ignore_sync_execution: do not synchronise the framework at window bounds.
        match_window_name: check that each row's window name is the window being ended.
        devices: (not in the original) the :class:`zeusc.device.Devices` whose GPUs a power-limit
            optimizer driven by this monitor changes; None: the process's default GPUs.

    Raises (from the windows, as the original): RuntimeError for a window begun twice, ended
    without being begun, a row of another window, a malformed row, or no rows left.
    """

    def __init__(self, gpu_indices: list[int] | None = None, approx_instant_energy: bool = False,
                 log_file: str | Path | None = None, ignore_sync_execution: bool = False,
                 match_window_name: bool = True, *, devices=None) -> None:
        # ZeusMonitor.__init__ is not called: nothing is measured until an optimizer asks.
        self._h = None
        self._inner: Optional[_HookedMonitor] = None
        self._log_f = None
        self._lock = threading.Lock()
        self._dependents = weakref.WeakSet()
        self._devices = devices
        self._pending: Optional[BaseException] = None
        if log_file is None:
            raise ValueError("`log_file` cannot be `None` for `ReplayZeusMonitor`.")
        self.approx_instant_energy = approx_instant_energy
        self.log_file = open(log_file)
        self.ignore_sync_execution = ignore_sync_execution
        self.match_window_name = match_window_name
        self.sync_with = "torch"
        header = self.log_file.readline()
        if gpu_indices is None:
            gpu_indices = [int(col.split("_")[0][3:]) for col in header.strip().split(",")[3:] if col]
        self.nvml_gpu_indices = self.gpu_indices = list(gpu_indices)
        self.cpu_indices: List[int] = []
        self.ongoing_windows: List[str] = []
        self._replay = self
        logger.info("Replaying from '%s' with GPU indices %s", log_file, self.gpu_indices)

    # ---- the original's window semantics ------------------------------------------------------

    def begin_window(self, key: str, sync_execution: bool = True, restart: bool = False) -> None:
        """Begins window `key` (only remembered). RuntimeError when it is ongoing already."""
        if key in self.ongoing_windows:
            if not restart:
                raise RuntimeError(f"Window {key} is already ongoing.")
        else:
            self.ongoing_windows.append(key)
        if not self.ignore_sync_execution and sync_execution:
            sync_execution_fn(self.gpu_indices)

    def end_window(self, key: str, sync_execution: bool = True, cancel: bool = False) -> Measurement:
        """Ends window `key` with the next row of the log (cancelled: zeros, no row consumed)."""
        try:
            self.ongoing_windows.remove(key)
        except ValueError:
            raise RuntimeError(f"Window {key} is not ongoing.") from None
        if not self.ignore_sync_execution and sync_execution:
            sync_execution_fn(self.gpu_indices)
        if cancel:
            return Measurement(time=0.0, gpu_energy={g: 0.0 for g in self.gpu_indices})
        return self._next_row(key)

    def _next_row(self, key: str) -> Measurement:
        line = self.log_file.readline()
        if not line:
            raise RuntimeError("No more lines in the log file.")
        _, window_name, *nums = line.rstrip("\n").split(",")
        if self.match_window_name and window_name != key:
            raise RuntimeError(f"Was expecting {window_name}, not {key}.")
        if len(nums) != len(self.gpu_indices) + 1:
            raise RuntimeError(f"Line has unexpected number of energy measurements: {line}")
        elapsed, *energies = map(float, nums)
        return Measurement(time=elapsed, gpu_energy=dict(zip(self.gpu_indices, energies)))

    @property
    def measurement_states(self):
        """The ongoing windows (names only: a replay has no start readings)."""
        return {k: None for k in self.ongoing_windows}

    def reset_windows(self) -> None:
        self.ongoing_windows.clear()
        if self._inner is not None:
            self._inner.reset_windows()

    # ---- libzeus side, for the power-limit optimizer ------------------------------------------

    def _c_hook(self, _ctx, key, m) -> int:
        try:
            r = self._next_row(key.decode())
            mc = m.contents
            mc.time_s = r.time
            for k, g in enumerate(self.gpu_indices):
                mc.gpu_energy_j[k] = r.gpu_energy[g]
            mc.total_energy_j = sum(r.gpu_energy.values())
            return _lib.ZEUS_OK
        except BaseException as e:  # noqa: BLE001 - never let an exception cross into C
            self._pending = e
            return _lib.set_errmsg(_lib.ZEUS_EIO, f"ReplayZeusMonitor: {type(e).__name__}: {e}")

    def take_pending(self) -> Optional[BaseException]:
        e, self._pending = self._pending, None
        return e

    def _handle(self):
        with self._lock:
            if self._inner is None:
                if self.log_file is None or self.log_file.closed:
                    raise ValueError("this ReplayZeusMonitor is closed")
                self._inner = _HookedMonitor(self, gpu_indices=self.gpu_indices, cpu_indices=[],
                                             devices=self._devices)
            return self._inner._handle()

    @property
    def devices(self):
        from ..device import Devices
        if self._devices is not None:
            return self._devices
        return Devices.default()

    def close(self) -> None:
        """Closes the optimizers built on it, the libzeus monitor and the log. Idempotent."""
        for dep in list(self._dependents):
            dep.close()
        if self._inner is not None:
            self._inner.close()
            self._inner = None
        if self.log_file is not None and not self.log_file.closed:
            self.log_file.close()


__all__ = ["ReplayZeusMonitor"]
