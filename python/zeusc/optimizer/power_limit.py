"""Optimizers that select the optimum power limit (zeus.optimizer.power_limit of the original).

:class:`GlobalPowerLimitOptimizer` is libzeus's power-limit optimizer (zeus/plo.h): driven by
the training loop, it profiles each power limit just in time, from the GPUs' maximum down to
their minimum in ``pl_step`` strides, then applies the optimum chosen by a selector
(:class:`Energy`, :class:`Time`, :class:`ZeusCost`, :class:`MaxSlowdownConstraint`, or your own
:class:`OptimumSelector`). :class:`HFGlobalPowerLimitOptimizer` wraps it as a Hugging Face
``TrainerCallback``.

Every decision (states, selection, profile files, restoring GPUs) is made by the C library; this
module converts arguments and results, and hooks torch.distributed in as the C collective when
the program initialised it.
"""
from __future__ import annotations

import abc
import enum
import numbers
import os
import threading
from ctypes import POINTER, byref, c_uint, c_void_p, cast, pointer
from dataclasses import dataclass
from typing import List, Optional

from .. import _lib, _lifetime
from .._closeable import Closeable
from ..callback import Callback
from ..utils.framework import TorchCollective, torch_distributed

# ---- measurements and selectors -----------------------------------------------------------------


@dataclass
class PowerLimitMeasurement:
    """GPU energy and time measured for one power limit.

    Attributes:
        power_limit: the power limit in W.
        energy: energy in J, summed over every GPU (and every rank).
        time: the profiling window's time in s (the largest across ranks).
    """

    power_limit: int
    energy: float
    time: float


def _to_c(measurements) -> "tuple":
    ms = list(measurements)
    arr = (_lib.PloMeasurement * max(len(ms), 1))()
    for i, m in enumerate(ms):
        if isinstance(m, PowerLimitMeasurement):
            pl, e, t = m.power_limit, m.energy, m.time
        else:
            try:
                pl, e, t = m["power_limit"], m["energy"], m["time"]
            except (TypeError, KeyError):
                raise TypeError(f"measurement {i}: expected a PowerLimitMeasurement, got {m!r}") from None
        if isinstance(pl, bool) or not isinstance(pl, numbers.Integral) or not 0 <= pl < 2**32:
            raise ValueError(f"measurement {i}: power_limit {pl!r} is not a non-negative int (W)")
        arr[i].power_limit_w = int(pl)
        arr[i].energy_j = float(e)
        arr[i].time_s = float(t)
    return arr, len(ms)


def _from_c(ptr, n: int) -> List[PowerLimitMeasurement]:
    return [PowerLimitMeasurement(power_limit=ptr[i].power_limit_w, energy=ptr[i].energy_j, time=ptr[i].time_s)
            for i in range(n)]


class OptimumSelector(abc.ABC):
    """Chooses the optimal power limit from the profiled measurements.

    Subclass it and implement :meth:`select` for a selector of your own; the C optimizer calls it
    (through zeus_selector_custom) when profiling ends or a profile file is loaded.
    """

    @abc.abstractmethod
    def select(self, measurements: List[PowerLimitMeasurement]) -> int:
        """The optimal power limit (W): one of the measurements' ``power_limit``."""

    # The zeus_selector the C optimizer uses, and the objects its pointers need alive.
    def _c_selector(self):
        L = _lib.require_plo()
        holder = _CustomSelector(self)
        sel = _lib.Selector()
        _lib.check(L.zeus_selector_custom(byref(sel), holder.cb, None))
        return sel, holder


class _CustomSelector:
    """A Python OptimumSelector behind zeus_selector_fn; remembers the exception it caught."""

    def __init__(self, selector: OptimumSelector):
        self.selector = selector
        self.pending: Optional[BaseException] = None
        self.cb = _lib.SELECTOR_FN(self._call)

    def _call(self, _ctx, m, n, out_w) -> int:
        try:
            chosen = self.selector.select(_from_c(m, n))
            if isinstance(chosen, bool) or not isinstance(chosen, numbers.Integral) or not 0 <= chosen < 2**32:
                raise TypeError(f"{type(self.selector).__name__}.select returned {chosen!r}, expected a power "
                                "limit in W (an int)")
            out_w[0] = int(chosen)
            return _lib.ZEUS_OK
        except BaseException as e:  # noqa: BLE001 - never let an exception cross into C
            self.pending = e
            return _lib.set_errmsg(_lib.ZEUS_EINVAL,
                                   f"{type(self.selector).__name__}.select raised {type(e).__name__}: {e}")

    def take_pending(self):
        e, self.pending = self.pending, None
        return e


class _CSelector(OptimumSelector):
    """A selector built into libzeus (zeus_selector_*)."""

    _sel: _lib.Selector

    def select(self, measurements: List[PowerLimitMeasurement]) -> int:
        """The optimal power limit (W) for these measurements (zeus_selector_select; ties go to
        the lower limit). ValueError for an empty list."""
        L = _lib.require_plo()
        arr, n = _to_c(measurements)
        if n == 0:
            raise ValueError(f"{type(self).__name__}.select: no measurements to select from")
        out = c_uint()
        _lib.check(L.zeus_selector_select(byref(self._sel), arr, n, byref(out)))
        return out.value

    def _c_selector(self):
        return self._sel, None


def _number(cls_name: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{cls_name}: {name} must be a number, got {type(v).__name__}")
    return float(v)


class Energy(_CSelector):
    """Selects the power limit that minimizes energy consumption."""

    def __init__(self):
        self._sel = _lib.Selector()
        _lib.check(_lib.require_plo().zeus_selector_energy(byref(self._sel)))


class Time(_CSelector):
    """Selects the power limit that minimizes training time (which, with noisy measurements,
    need not be the maximum)."""

    def __init__(self):
        self._sel = _lib.Selector()
        _lib.check(_lib.require_plo().zeus_selector_time(byref(self._sel)))


class ZeusCost(_CSelector):
    """Selects the power limit that minimizes the Zeus time-energy cost
    ``eta * energy + (1 - eta) * max_power * time``, where max_power is the largest profiled limit
    times ``world_size``.

    Args:
        eta_knob: 0 <= eta <= 1.
        world_size: the number of GPUs of the training job (>= 1).

    Raises:
        ValueError: a parameter out of range (the message names it, its value and the range).
    """

    def __init__(self, eta_knob: float, world_size: int = 1):
        self.eta_knob = _number("ZeusCost", "eta_knob", eta_knob)
        if isinstance(world_size, bool) or not isinstance(world_size, numbers.Integral):
            raise TypeError(f"ZeusCost: world_size must be an int, got {type(world_size).__name__}")
        if not 0 <= world_size < 2**32:
            raise ValueError(f"ZeusCost: world_size {world_size} is out of range (expected >= 1)")
        self.world_size = int(world_size)
        self._sel = _lib.Selector()
        _lib.check(_lib.require_plo().zeus_selector_zeus_cost(byref(self._sel), self.eta_knob, self.world_size))


class MaxSlowdownConstraint(_CSelector):
    """Selects the lowest power limit whose time is at most ``factor`` times the time at the
    largest limit.

    Args:
        factor: the largest slowdown allowed, >= 1.

    Raises:
        ValueError: a factor below 1 (or not finite).
    """

    def __init__(self, factor: float):
        self.factor = _number("MaxSlowdownConstraint", "factor", factor)
        self._sel = _lib.Selector()
        _lib.check(_lib.require_plo().zeus_selector_max_slowdown(byref(self._sel), self.factor))


# ---- profile files ------------------------------------------------------------------------------


def load_profile(path) -> List[PowerLimitMeasurement]:
    """(not in the original) Reads a profile file (``{"measurements": [{"power_limit", "energy",
    "time"}, ...]}``). FileNotFoundError when missing, ValueError naming the file and the problem
    when malformed."""
    L = _lib.require_plo()
    ptr = POINTER(_lib.PloMeasurement)()
    n = _lib.c_size_t()
    _lib.check(L.zeus_plo_profile_load(_lib.fs_bytes(path), byref(ptr), byref(n)))
    try:
        return _from_c(ptr, n.value)
    finally:
        _lib.c_free(cast(ptr, c_void_p))


def save_profile(path, measurements) -> None:
    """(not in the original) Writes a profile file atomically (temporary file, fsync, rename)."""
    L = _lib.require_plo()
    arr, n = _to_c(measurements)
    _lib.check(L.zeus_plo_profile_save(_lib.fs_bytes(path), arr, n))


# ---- the optimizer ------------------------------------------------------------------------------


class PLOState(enum.IntEnum):
    """The optimizer's state (zeus_plo_state)."""

    READY = _lib.ZEUS_PLO_READY
    WARMUP = _lib.ZEUS_PLO_WARMUP
    PROFILING = _lib.ZEUS_PLO_PROFILING
    DONE = _lib.ZEUS_PLO_DONE


_DONE = _lib.ZEUS_PLO_DONE


def _int_arg(name: str, v, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"GlobalPowerLimitOptimizer: {name} must be an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"GlobalPowerLimitOptimizer: {name} {v} is out of range (expected {lo}..{hi})")
    return int(v)


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class GlobalPowerLimitOptimizer(Closeable, Callback):
    """Optimizer for the power limit knob: profiles every power limit just in time during
    training and applies the optimum (libzeus's zeus_plo).

    States: Ready -> Warmup after ``wait_steps + 1`` step begins; Warmup -> Profiling after
    ``warmup_steps`` more (0: straight to profiling); Profiling ends after ``profile_steps`` with
    one measurement, then Warmup at the next limit or Done, where the optimum is applied. An
    epoch ending during Warmup or Profiling cancels the window, puts the maximum limit back and
    retries the same limit. GPUs get back the limits they had before when the optimizer is
    closed, at exit, and on SIGTERM.

    Args:
        monitor: the :class:`zeusc.monitor.ZeusMonitor` whose GPUs to optimize (its
            ``gpu_indices``); it must stay open while the optimizer is.
        optimum_selector: None: ``ZeusCost(eta_knob=0.5, world_size=<GPUs of every rank>)``.
        wait_steps: steps to let pass before anything (>= 0).
        warmup_steps: warm-up steps at each limit (>= 0).
        profile_steps: measured steps at each limit (> 0).
        pl_step: the stride between power limits, W (> 0).
        profile_path: an existing file: load it and apply its optimum at once, profiling
            nothing; a missing file: profile, then write it (atomically); None: no file.

    Raises:
        ValueError: a parameter out of range, GPUs whose power-limit ranges differ, a malformed
            profile file (the message names the file and what is wrong).
        PermissionError: the GPUs refuse the change (needs root or CAP_SYS_ADMIN on NVIDIA).
        RuntimeError: the loaded libzeus has no power-limit optimizer, or a device error.
    """

    def __init__(self, monitor, optimum_selector: Optional[OptimumSelector] = None, wait_steps: int = 1,
                 warmup_steps: int = 10, profile_steps: int = 40, pl_step: int = 25, profile_path=None):
        self._h = c_void_p()  # first, so that close() works whatever fails below
        self._done = False
        L = _lib.require_plo()
        self.monitor = monitor
        self.wait_steps = _int_arg("wait_steps", wait_steps, _LONG_MIN, _LONG_MAX)
        self.warmup_steps = _int_arg("warmup_steps", warmup_steps, _LONG_MIN, _LONG_MAX)
        self.profile_steps = _int_arg("profile_steps", profile_steps, _LONG_MIN, _LONG_MAX)
        if isinstance(pl_step, bool) or not isinstance(pl_step, numbers.Integral):
            raise TypeError(f"GlobalPowerLimitOptimizer: pl_step must be an int (W), got {type(pl_step).__name__}")
        if not 0 < pl_step < 2**32:
            raise ValueError(f"GlobalPowerLimitOptimizer: pl_step {pl_step} W is out of range (expected > 0)")
        self.pl_step = int(pl_step)
        self.profile_path = None if profile_path is None else os.fspath(profile_path)
        if optimum_selector is not None and not isinstance(optimum_selector, OptimumSelector):
            raise TypeError("GlobalPowerLimitOptimizer: optimum_selector must be an OptimumSelector, got "
                            f"{type(optimum_selector).__name__}")
        self.optimum_selector = optimum_selector

        o = _lib.PloOpts()
        L.zeus_plo_opts_init(byref(o))
        # Everything a pointer in `o` refers to is kept on self: the C optimizer borrows the
        # collective and may call the selector's callback at any hook.
        self._selector_holder = None
        if optimum_selector is not None:
            self._sel, self._selector_holder = optimum_selector._c_selector()
            o.selector = pointer(self._sel)
        o.wait_steps = self.wait_steps
        o.warmup_steps = self.warmup_steps
        o.profile_steps = self.profile_steps
        o.pl_step_w = self.pl_step
        if self.profile_path is not None:
            self._path_bytes = _lib.fs_bytes(self.profile_path)
            o.profile_path = self._path_bytes
        self._collective = None
        if torch_distributed() is not None:
            self._collective = TorchCollective()
            o.collective = pointer(self._collective.struct)
        # Signals stay Python's: SIGINT raises KeyboardInterrupt, SIGTERM is handled below.
        o.no_signal_handlers = True
        self._opts = o

        mon_h = monitor._handle()
        rc = L.zeus_plo_open(byref(self._h), mon_h, byref(o))
        if rc:
            self._h = c_void_p()
            self._raise(rc)
        _lifetime.register(self)
        monitor._dependents.add(self)

        self._lib = L
        self._c_step_begin = L.zeus_plo_on_step_begin
        self._c_get_state = L.zeus_plo_get_state
        self._done = self._c_get_state(self._h) == _DONE

    # ---- hooks ----------------------------------------------------------------------------

    def on_step_begin(self) -> None:
        """Mark the beginning of a training step."""
        if self._done:
            return
        h = self._h
        rc = self._c_step_begin(h)
        if rc:
            self._raise(rc)
        if self._c_get_state(h) == _DONE:
            self._done = True

    def on_step_end(self) -> None:
        """Mark the end of a training step (nothing to do; here so a loop can call all four)."""
        if self._done:
            return
        rc = self._lib.zeus_plo_on_step_end(self._handle())
        if rc:
            self._raise(rc)

    def on_epoch_begin(self) -> None:
        """Mark the beginning of an epoch (nothing to do)."""
        if self._done:
            return
        rc = self._lib.zeus_plo_on_epoch_begin(self._handle())
        if rc:
            self._raise(rc)

    def on_epoch_end(self) -> None:
        """Mark the end of a training epoch: an unfinished warm-up or profiling window is
        cancelled and retried."""
        if self._done:
            return
        h = self._handle()
        rc = self._lib.zeus_plo_on_epoch_end(h)
        if rc:
            self._raise(rc)
        if self._c_get_state(h) == _DONE:
            self._done = True

    # ---- what it knows ----------------------------------------------------------------------

    @property
    def state(self) -> PLOState:
        """READY, WARMUP, PROFILING or DONE."""
        return PLOState(self._lib.zeus_plo_get_state(self._handle()))

    @property
    def power_limits(self) -> List[int]:
        """The power limits to explore, in mW, largest first (as the original's ``power_limits``)."""
        ptr = POINTER(c_uint)()
        n = self._lib.zeus_plo_power_limits(self._handle(), byref(ptr))
        return [ptr[i] * 1000 for i in range(n)]

    @property
    def current_power_limit(self) -> int:
        """The limit being profiled or applied now, in mW."""
        return self._lib.zeus_plo_current_power_limit_w(self._handle()) * 1000

    @property
    def optimal_power_limit(self) -> Optional[int]:
        """The chosen limit in mW once Done, else None."""
        w = self._lib.zeus_plo_optimal_power_limit_w(self._handle())
        return w * 1000 if w else None

    @property
    def measurements(self) -> List[PowerLimitMeasurement]:
        """The measurements so far, one per profiled limit."""
        ptr = POINTER(_lib.PloMeasurement)()
        n = self._lib.zeus_plo_measurements(self._handle(), byref(ptr))
        return _from_c(ptr, n)

    # ---- lifetime ---------------------------------------------------------------------------

    def _handle(self):
        if not self._h:
            raise ValueError("this GlobalPowerLimitOptimizer is closed")
        return self._h

    def _raise(self, rc: int):
        err = _lib.error(rc)
        for holder in (self._selector_holder, self._collective):
            pending = holder.take_pending() if holder is not None else None
            if pending is not None:
                raise pending from err
        raise err

    def close(self) -> None:
        """Puts back the limit every GPU had before the optimizer first changed it, and frees
        the optimizer (zeus_plo_close). Idempotent; later hook calls raise ValueError."""
        h = self._h
        if h:
            self._h = c_void_p()
            self._done = False
            self._c_step_begin = self._c_get_state = _closed
            self._lib.zeus_plo_close(h)
        _lifetime.unregister(self)


def _closed(*_args):
    raise ValueError("this GlobalPowerLimitOptimizer is closed")


# ---- Hugging Face -------------------------------------------------------------------------------

_hf_lock = threading.Lock()
_hf_class = None


def _hf_real_class():
    """The TrainerCallback subclass, built on first construction so that importing this module
    never imports transformers."""
    global _hf_class
    with _hf_lock:
        if _hf_class is not None:
            return _hf_class
        try:
            from transformers import TrainerCallback
        except ImportError as e:
            raise ImportError(
                "HFGlobalPowerLimitOptimizer needs the Hugging Face transformers package "
                f"(pip install transformers): {e}") from e

        class _HFGlobalPowerLimitOptimizer(HFGlobalPowerLimitOptimizer, TrainerCallback):
            __doc__ = HFGlobalPowerLimitOptimizer.__doc__

            def __init__(self, monitor, optimum_selector=None, wait_steps=1, warmup_steps=10,
                         profile_steps=40, pl_step=25, profile_path=None):
                self.optimizer = GlobalPowerLimitOptimizer(
                    monitor=monitor, optimum_selector=optimum_selector, wait_steps=wait_steps,
                    warmup_steps=warmup_steps, profile_steps=profile_steps, pl_step=pl_step,
                    profile_path=profile_path)

            def on_epoch_end(self, args, state, control, model=None, **kwargs):
                """Mark the end of a training epoch."""
                self.optimizer.on_epoch_end()

            def on_step_begin(self, args, state, control, model=None, **kwargs):
                """Mark the beginning of a training step."""
                self.optimizer.on_step_begin()

        _HFGlobalPowerLimitOptimizer.__name__ = "HFGlobalPowerLimitOptimizer"
        _HFGlobalPowerLimitOptimizer.__qualname__ = "HFGlobalPowerLimitOptimizer"
        _hf_class = _HFGlobalPowerLimitOptimizer
        return _hf_class


class HFGlobalPowerLimitOptimizer:
    """[Wrapped for Hugging Face Trainer Callback] Optimizer for the power limit knob.

    A ``transformers.TrainerCallback`` that drives a :class:`GlobalPowerLimitOptimizer` (same
    arguments) from the Trainer's ``on_step_begin`` and ``on_epoch_end`` events::

        trainer = Trainer(..., callbacks=[HFGlobalPowerLimitOptimizer(monitor)])

    The instance is a ``TrainerCallback`` (and an ``HFGlobalPowerLimitOptimizer``); its
    ``optimizer`` attribute is the GlobalPowerLimitOptimizer. transformers is imported when the
    first one is constructed; without it, construction raises ImportError saying so.
    """

    def __new__(cls, *args, **kwargs):
        if cls is HFGlobalPowerLimitOptimizer:
            cls = _hf_real_class()
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):  # replaced by the real class's __init__
        raise TypeError("HFGlobalPowerLimitOptimizer cannot be initialised directly")


# When __new__ returns an instance of the subclass, Python calls the subclass's __init__.

__all__ = [
    "OptimumSelector", "Energy", "Time", "ZeusCost", "MaxSlowdownConstraint", "PowerLimitMeasurement",
    "GlobalPowerLimitOptimizer", "HFGlobalPowerLimitOptimizer", "PLOState", "load_profile", "save_profile",
]
