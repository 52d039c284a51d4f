"""Optimizers that select the optimum power limit (zeus.optimizer.power_limit of the original).

:class:`GlobalPowerLimitOptimizer` is libzeus's power-limit optimizer (zeus/plo.h): driven by
the training loop, it profiles each power limit just in time, from the GPUs' maximum down to
their minimum in ``pl_step`` strides, then applies the optimum chosen by a selector
(:class:`Energy`, :class:`Time`, :class:`ZeusCost`, :class:`MaxSlowdownConstraint`, or your own
:class:`OptimumSelector`). Its ``state`` is one of the original's state classes
(:class:`Ready`, :class:`Warmup`, :class:`Profiling`, :class:`Done`).
:class:`HFGlobalPowerLimitOptimizer` wraps it as a Hugging Face ``TrainerCallback``.

Every decision (states, selection, profile files, restoring GPUs) is made by the C library; this
module converts arguments and results, and hooks torch.distributed in as the C collective when
the program initialised it.
"""
from __future__ import annotations

import abc
import enum
import logging
import math
import numbers
import os
import threading
from ctypes import POINTER, byref, c_uint, c_void_p, cast, pointer
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

from .. import _lib, _lifetime
from .._closeable import Closeable, _get_ident, guard_methods
from ..callback import Callback
from ..utils.framework import TorchCollective, torch_distributed

if TYPE_CHECKING:  # only for the annotations of the original's signatures
    from ..monitor import ZeusMonitor

logger = logging.getLogger("zeusc.plo")

# ---- the original's small models (pydantic BaseModels there: keyword arguments, positive values) ----


def _positive_int(cls: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or (isinstance(v, float) and not v.is_integer()):
        raise TypeError(f"{cls}: {name} must be an int, got {v!r}")
    if not v > 0:
        raise ValueError(f"{cls}: {name} must be a positive int, got {v!r}")
    return int(v)


def _positive_float(cls: str, name: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{cls}: {name} must be a number, got {v!r}")
    if not (v > 0 and math.isfinite(v)):
        raise ValueError(f"{cls}: {name} must be a positive number, got {v!r}")
    return float(v)


class _Model:
    """Keyword-only construction with validation, equality by fields, a readable repr."""

    __slots__ = ()
    _fields: tuple = ()

    def __eq__(self, other):
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    def __hash__(self):
        return hash((type(self).__name__,) + tuple(getattr(self, f) for f in self._fields))

    def __repr__(self):
        return f"{type(self).__name__}(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields) + ")"

    def dict(self) -> dict:
        """The fields as a dict (pydantic's ``.dict()`` in the original)."""
        return {f: getattr(self, f) for f in self._fields}

    @classmethod
    def _trusted(cls, **kw):
        """An instance from values libzeus produced, not validated again."""
        obj = object.__new__(cls)
        for k, v in kw.items():
            object.__setattr__(obj, k, v)
        return obj


class PowerLimitMeasurement(_Model):
    """GPU energy and time measured for one power limit (W): keyword arguments, each positive
    (the original's pydantic model: ``PowerLimitMeasurement(power_limit=300, energy=..., time=...)``).

    Attributes:
        power_limit: the power limit in W.
        energy: energy in J, summed over every GPU (and every rank).
        time: the profiling window's time in s (the largest across ranks).
    """

    __slots__ = ("power_limit", "energy", "time")
    _fields = __slots__

    def __init__(self, *, power_limit: int, energy: float, time: float) -> None:
        self.power_limit = _positive_int("PowerLimitMeasurement", "power_limit", power_limit)
        self.energy = _positive_float("PowerLimitMeasurement", "energy", energy)
        self.time = _positive_float("PowerLimitMeasurement", "time", time)


class Ready(_Model):
    """Ready to measure ``next_power_limit`` (mW); it starts after ``steps`` more step begins."""

    __slots__ = ("next_power_limit", "steps")
    _fields = __slots__
    name = "READY"

    def __init__(self, *, next_power_limit: int, steps: int) -> None:
        self.next_power_limit = _positive_int("Ready", "next_power_limit", next_power_limit)
        self.steps = _positive_int("Ready", "steps", steps)


class _AtLimitFor(_Model):
    """A state at ``current_power_limit`` (mW) that lasts ``steps`` more step begins."""

    __slots__ = ("current_power_limit", "steps")
    _fields = __slots__

    def __init__(self, *, current_power_limit: int, steps: int) -> None:
        cls = type(self).__name__
        self.current_power_limit = _positive_int(cls, "current_power_limit", current_power_limit)
        self.steps = _positive_int(cls, "steps", steps)


class Warmup(_AtLimitFor):
    """Warming up at ``current_power_limit`` (mW); profiling starts after ``steps`` more step begins."""

    __slots__ = ()
    name = "WARMUP"


class Profiling(_AtLimitFor):
    """Profiling ``current_power_limit`` (mW); the window ends after ``steps`` more step begins."""

    __slots__ = ()
    name = "PROFILING"


class Done(_Model):
    """Every limit is measured and ``optimal_power_limit`` (mW) is applied.

    (not in the original) ``contenders``: the limits (mW) the choice could not tell apart from it
    (within the measured noise), ``confidence``: the confidence it reached that it is within the
    selector's tolerance of the best (None when unknown: ``ZEUS_PLO_PROFILING=original``, a
    profile file without a recorded decision). Neither takes part in equality or the repr, which
    stay the original's.
    """

    __slots__ = ("optimal_power_limit", "contenders", "confidence")
    _fields = ("optimal_power_limit",)
    name = "DONE"

    def __init__(self, *, optimal_power_limit: int, contenders=(), confidence=None) -> None:
        self.optimal_power_limit = _positive_int("Done", "optimal_power_limit", optimal_power_limit)
        self.contenders = [_positive_int("Done", "contenders", c) for c in contenders]
        self.confidence = None if confidence is None else _number("Done", "confidence", confidence)


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
    return [PowerLimitMeasurement._trusted(power_limit=ptr[i].power_limit_w, energy=ptr[i].energy_j,
                                           time=ptr[i].time_s) for i in range(n)]


# ---- selectors ------------------------------------------------------------------------------------


class OptimumSelector(abc.ABC):
    """Chooses the optimal power limit from the profiled measurements.

    Subclass it and implement :meth:`select` for a selector of your own; the C optimizer calls it
    (through zeus_selector_custom) when profiling ends or a profile file is loaded.
    """

    @abc.abstractmethod
    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        """Select the optimal power limit (W) from measurements."""

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

    def select(self, measurements: list[PowerLimitMeasurement]) -> int:
        """Select the optimal power limit (W) from measurements (zeus_selector_select: ties go to
        the measurement listed first, as the original's ``min()``). ValueError for an empty list."""
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

    def __init__(self) -> None:
        self._sel = _lib.Selector()
        _lib.check(_lib.require_plo().zeus_selector_energy(byref(self._sel)))


class Time(_CSelector):
    """Selects the power limit that minimizes training time (which, with noisy measurements,
    need not be the maximum)."""

    def __init__(self) -> None:
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
        ValueError: a parameter out of range (the original's message, then libzeus's).
    """

    def __init__(self, eta_knob: float, world_size: int = 1) -> None:
        self.eta_knob = _number("ZeusCost", "eta_knob", eta_knob)
        if isinstance(world_size, bool) or not isinstance(world_size, numbers.Integral):
            raise TypeError(f"ZeusCost: world_size must be an int, got {type(world_size).__name__}")
        if not 0.0 <= self.eta_knob <= 1.0:
            raise ValueError("eta_knob must be between 0 and 1, inclusive both sides "
                             f"(ZeusCost: eta_knob {eta_knob} is outside the allowed range [0, 1])")
        if world_size < 1 or world_size >= 2**32:
            raise ValueError("world_size must be greater than or equal to 1 "
                             f"(ZeusCost: world_size {world_size} is outside the allowed range, expected >= 1)")
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

    def __init__(self, factor: float) -> None:
        self.factor = _number("MaxSlowdownConstraint", "factor", factor)
        if not (self.factor >= 1.0 and math.isfinite(self.factor)):
            raise ValueError(f"max_slowdown_factor must be greater than or equal to 1.0. Got {factor} "
                             "(MaxSlowdownConstraint: factor outside the allowed range [1, inf))")
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
    """(not in the original) The optimizer's state as a number (zeus_plo_state);
    ``GlobalPowerLimitOptimizer.state_kind``."""

    READY = _lib.ZEUS_PLO_READY
    WARMUP = _lib.ZEUS_PLO_WARMUP
    PROFILING = _lib.ZEUS_PLO_PROFILING
    DONE = _lib.ZEUS_PLO_DONE


_DONE = _lib.ZEUS_PLO_DONE


def _int_arg(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"GlobalPowerLimitOptimizer: {name} must be an int, got {type(v).__name__}")
    return int(v)


_LONG_MAX = 2**63 - 1


@guard_methods("on_step_begin", "_raise")
class GlobalPowerLimitOptimizer(Closeable, Callback):
    """Optimizer for the power limit knob: profiles every power limit just in time during
    training and applies the optimum (libzeus's zeus_plo).

    States: Ready -> Warmup after ``wait_steps + 1`` step begins; Warmup -> Profiling after
    ``warmup_steps`` more (0: straight to profiling); Profiling ends after ``profile_steps`` with
    one measurement, then Warmup at the next limit or Done, where the optimum is applied. An
    epoch ending during Warmup or Profiling cancels the window, puts the maximum limit back and
    retries the same limit. At construction every GPU is set to the maximum limit (from a profile
    file: the optimum). The optimizer stays alive (and its optimum applied) until the process
    exits, even when the program keeps no reference to it, as the original; GPUs get back the
    limits they had before at exit, on SIGTERM, or on :meth:`close`.

    Usage with distributed data parallelism: each process monitors its own GPU
    (``ZeusMonitor(gpu_indices=[local_rank])``); with torch.distributed initialised, energy is
    summed and time maxed across ranks, and every rank applies the same optimum.

    Args:
        monitor: the :class:`zeusc.monitor.ZeusMonitor` whose GPUs to optimize (its
            ``gpu_indices``); it must stay open while the optimizer is.
        optimum_selector: None: ``ZeusCost(eta_knob=0.5, world_size=len(monitor.gpu_indices))``.
        wait_steps: steps to let pass before anything (>= 0).
        warmup_steps: warm-up steps at each limit (>= 0).
        profile_steps: measured steps at each limit (> 0).
        pl_step: the stride between power limits, W (> 0); kept in mW in ``self.pl_step``.
        profile_path: an existing file: load it and apply its optimum at once, profiling
            nothing; a missing file: profile, then write it (atomically); None: no file.
        confidence: (not in the original; keyword only) the confidence mode, in (0, 1), e.g.
            0.95: after the sweep the limits that could still be the best are measured again in
            interleaved rounds until the choice is within the selector's tolerance at this
            confidence (looked at each time the steps have doubled, the error spent over the
            looks), or the cap comes (then the choice if at this confidence, else the higher of
            the contenders). None: off unless ZEUS_PLO_CONFIDENCE is set.
        max_profile_steps: (keyword only) the confidence mode's cap in steps since construction;
            None or 0: the end of the epoch in which the sweep ends.

    Raises:
        ValueError: a parameter out of range, GPUs whose power-limit ranges differ, a malformed
            profile file (the message names the file and what is wrong).
        PermissionError: the GPUs refuse the change (needs root or CAP_SYS_ADMIN on NVIDIA).
        RuntimeError: the loaded libzeus has no power-limit optimizer, or a device error.
    """

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
        *,
        confidence: float | None = None,
        max_profile_steps: int | None = None,
    ) -> None:
        self._h = c_void_p()  # first, so that close() works whatever fails below
        self._done = False
        L = _lib.require_plo()
        wait_steps = _int_arg("wait_steps", wait_steps)
        warmup_steps = _int_arg("warmup_steps", warmup_steps)
        profile_steps = _int_arg("profile_steps", profile_steps)
        pl_step = _int_arg("pl_step", pl_step)
        # The original's checks and messages, then our ranges.
        if wait_steps < 0:
            raise ValueError("wait_steps must be non-negative.")
        if warmup_steps < 0:
            raise ValueError("warmup_steps must be non-negative.")
        if profile_steps <= 0:
            raise ValueError("profile_steps must be positive.")
        if pl_step <= 0:
            raise ValueError("pl_step must be positive.")
        for name, v in (("wait_steps", wait_steps), ("warmup_steps", warmup_steps), ("profile_steps", profile_steps)):
            if v > _LONG_MAX:
                raise ValueError(f"GlobalPowerLimitOptimizer: {name} {v} is out of range (expected 0..{_LONG_MAX})")
        if pl_step * 1000 >= 2**32:
            raise ValueError(f"GlobalPowerLimitOptimizer: pl_step {pl_step} W is out of range (expected < 4294967 W)")
        # (not in the original) The confidence mode (issue 37; docs/plo.md).
        if confidence is not None:
            confidence = _number("GlobalPowerLimitOptimizer", "confidence", confidence)
            if not 0 < confidence < 1:
                raise ValueError(f"GlobalPowerLimitOptimizer: confidence {confidence} is outside the allowed range "
                                 "(0, 1)")
        if max_profile_steps is not None:
            max_profile_steps = _int_arg("max_profile_steps", max_profile_steps)
            if not 0 <= max_profile_steps <= _LONG_MAX:
                raise ValueError(f"GlobalPowerLimitOptimizer: max_profile_steps {max_profile_steps} is outside the "
                                 f"allowed range [0, {_LONG_MAX}]")
        if optimum_selector is not None and not isinstance(optimum_selector, OptimumSelector):
            raise TypeError("GlobalPowerLimitOptimizer: optimum_selector must be an OptimumSelector, got "
                            f"{type(optimum_selector).__name__}")

        self.monitor = monitor
        self.optimum_selector = optimum_selector or ZeusCost(eta_knob=0.5, world_size=max(1, len(monitor.gpu_indices)))
        self.wait_steps = wait_steps
        self.warmup_steps = warmup_steps
        self.profile_steps = profile_steps
        self.pl_step = pl_step * 1000  # mW, as the original keeps it
        self.profile_path = Path(profile_path) if isinstance(profile_path, str) else profile_path
        self.logger = logger

        o = _lib.PloOpts()
        L.zeus_plo_opts_init(byref(o))
        # Everything a pointer in `o` refers to is kept on self: the C optimizer borrows the
        # collective and may call the selector's callback at any hook.
        self._sel, self._selector_holder = self.optimum_selector._c_selector()
        o.selector = pointer(self._sel)
        o.wait_steps = wait_steps
        o.warmup_steps = warmup_steps
        o.profile_steps = profile_steps
        o.pl_step_w = pl_step
        if confidence is not None:
            o.confidence = confidence
        if max_profile_steps is not None:
            o.max_profile_steps = max_profile_steps
        self.confidence_target = confidence
        if self.profile_path is not None:
            self._path_bytes = _lib.fs_bytes(self.profile_path)
            o.profile_path = self._path_bytes
        self._collective = None
        if torch_distributed() is not None:
            self._collective = TorchCollective()
            o.collective = pointer(self._collective.struct)
            if len(monitor.gpu_indices) > 1:
                logger.warning("Distributed training is enabled with %d GPUs monitored. For distributed training, "
                               "it is recommended to monitor only one GPU per ZeusMonitor, since "
                               "GlobalPowerLimitOptimizer all-reduces across ranks itself.", len(monitor.gpu_indices))
        # Signals stay Python's: SIGINT raises KeyboardInterrupt, SIGTERM is handled by _lifetime.
        o.no_signal_handlers = True
        self._opts = o

        mon_h = monitor._handle()
        rc = L.zeus_plo_open(byref(self._h), mon_h, byref(o))
        if rc:
            self._h = c_void_p()
            self._raise(rc)
        # Kept alive until exit (or close()), as the original's atexit hook kept it.
        _lifetime.register(self, strong=True)
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
        me = _get_ident()
        holds = self._holds
        holds.append(me)  # the guard (zeusc/_closeable.py), inline on the hot path
        try:
            if self._closing:
                _closed()
            h = self._h
            rc = self._c_step_begin(h)
            if rc:
                self._raise(rc)
            if self._c_get_state(h) == _DONE:
                self._done = True
        finally:
            holds.remove(me)
            if self._closing and not holds:
                self._run_free()

    def on_step_end(self) -> None:
        """Mark the end of a training step (nothing to do; here so a loop can call all four)."""
        if self._done:
            return
        rc = self._lib.zeus_plo_on_step_end(self._handle())
        if rc:
            self._raise(rc)

    def set_epoch_steps(self, steps: int) -> None:
        """(zeusc) Say how many steps an epoch has: robust profiling then lengthens windows shorter
        than 1 s where the first epoch holds the longer sweep (see python/README.md). 0: unknown."""
        if self._done or not _lib.has("zeus_plo_set_epoch_steps"):
            return
        rc = self._lib.zeus_plo_set_epoch_steps(self._handle(), int(steps))
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
    def state(self):
        """The state: :class:`Ready`, :class:`Warmup`, :class:`Profiling` or :class:`Done` (a fresh
        object describing the state now)."""
        L = self._lib
        h = self._handle()
        st = L.zeus_plo_get_state(h)
        if st == _DONE:
            return Done._trusted(optimal_power_limit=L.zeus_plo_optimal_power_limit_w(h) * 1000,
                                 contenders=self.contenders, confidence=self.confidence)
        steps = int(L.zeus_plo_steps_left(h))
        if st == _lib.ZEUS_PLO_READY:
            nxt = L.zeus_plo_next_power_limit_w(h) or L.zeus_plo_current_power_limit_w(h)
            return Ready._trusted(next_power_limit=nxt * 1000, steps=steps)
        cls = Warmup if st == _lib.ZEUS_PLO_WARMUP else Profiling
        return cls._trusted(current_power_limit=L.zeus_plo_current_power_limit_w(h) * 1000, steps=steps)

    @property
    def state_kind(self) -> PLOState:
        """(not in the original) READY, WARMUP, PROFILING or DONE as a :class:`PLOState`."""
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
        """(not in the original; ``state.optimal_power_limit`` there) The chosen limit in mW once
        Done, else None."""
        w = self._lib.zeus_plo_optimal_power_limit_w(self._handle())
        return w * 1000 if w else None

    @property
    def contenders(self) -> List[int]:
        """(not in the original) Once Done, the limits in mW that the choice could not tell apart
        from it: within the measured noise (two standard errors of a difference, from the step
        spread and the energy counter's tick error). Empty before Done or when unknown."""
        if not _lib.has("zeus_plo_contenders"):
            return []
        ptr = POINTER(c_uint)()
        n = self._lib.zeus_plo_contenders(self._handle(), byref(ptr))
        return [ptr[i] * 1000 for i in range(n)]

    @property
    def confidence(self) -> Optional[float]:
        """(not in the original) Once Done, the confidence the choice reached that it is within
        the selector's tolerance of the best (1 % of the cost, energy or time; MaxSlowdownConstraint:
        the factor + 0.5 %); 1.0 for noiseless measurements; None before Done or when unknown."""
        if not _lib.has("zeus_plo_confidence"):
            return None
        c = self._lib.zeus_plo_confidence(self._handle())
        return None if math.isnan(c) else float(c)

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
        holders = (self._selector_holder, self._collective, getattr(self.monitor, "_replay", None))
        for holder in holders:
            pending = holder.take_pending() if holder is not None else None
            if pending is not None:
                raise pending from err
        raise err

    def close(self) -> None:
        """(not in the original) Puts back the limit every GPU had before the optimizer first
        changed it, and frees the optimizer (zeus_plo_close). Idempotent; later hook calls raise
        ValueError."""
        h = self._h
        if h and not self._closing:
            self._done = False  # later hooks reach the guard, which raises

            def free():
                self._h = c_void_p()
                self._done = False
                self._c_step_begin = self._c_get_state = _closed
                self._lib.zeus_plo_close(h)

            # Calls of other threads in progress finish first; later ones raise ValueError.
            self._close_guarded(free)
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
            raise ImportError("The transformers package is not installed. Please install it to use the "
                              f"HFGlobalPowerLimitOptimizer ({e}).") from e

        class _HFGlobalPowerLimitOptimizer(HFGlobalPowerLimitOptimizer, TrainerCallback):
            __doc__ = HFGlobalPowerLimitOptimizer.__doc__

        _HFGlobalPowerLimitOptimizer.__name__ = "HFGlobalPowerLimitOptimizer"
        _HFGlobalPowerLimitOptimizer.__qualname__ = "HFGlobalPowerLimitOptimizer"
        _HFGlobalPowerLimitOptimizer.__module__ = __name__
        _hf_class = _HFGlobalPowerLimitOptimizer
        return _hf_class


class HFGlobalPowerLimitOptimizer:
    """[Wrapped for Hugging Face Trainer Callback] Optimizer for the power limit knob.

    A ``transformers.TrainerCallback`` that drives a :class:`GlobalPowerLimitOptimizer` (same
    arguments, same signature) from the Trainer's ``on_step_begin`` and ``on_epoch_end`` events::

        trainer = Trainer(..., callbacks=[HFGlobalPowerLimitOptimizer(monitor)])

    The instance is a ``TrainerCallback`` (and an ``HFGlobalPowerLimitOptimizer``); its
    ``optimizer`` attribute is the GlobalPowerLimitOptimizer. transformers is imported when the
    first one is constructed; without it, construction raises ImportError saying so.
    """

    def __new__(cls, *args, **kwargs):
        if cls is HFGlobalPowerLimitOptimizer:
            cls = _hf_real_class()
        return object.__new__(cls)

    def __init__(
        self,
        monitor: ZeusMonitor,
        optimum_selector: OptimumSelector | None = None,
        wait_steps: int = 1,
        warmup_steps: int = 10,
        profile_steps: int = 40,
        pl_step: int = 25,
        profile_path: str | Path | None = None,
        *,
        confidence: float | None = None,
        max_profile_steps: int | None = None,
    ) -> None:
        self.optimizer = GlobalPowerLimitOptimizer(
            monitor=monitor,
            optimum_selector=optimum_selector,
            wait_steps=wait_steps,
            warmup_steps=warmup_steps,
            profile_steps=profile_steps,
            pl_step=pl_step,
            profile_path=profile_path,
            confidence=confidence,
            max_profile_steps=max_profile_steps,
        )

    def on_train_begin(self, args, state, control, model=None, **kwargs) -> None:
        """Tell the optimizer the epoch's length in steps, where the Trainer knows it."""
        max_steps = getattr(state, "max_steps", 0) or 0
        epochs = getattr(state, "num_train_epochs", 0) or getattr(args, "num_train_epochs", 0) or 0
        set_epoch_steps = getattr(self.optimizer, "set_epoch_steps", None)
        if max_steps > 0 and epochs > 0 and set_epoch_steps is not None:
            set_epoch_steps(int(max_steps // math.ceil(epochs)))

    def on_epoch_end(self, args, state, control, model=None, **kwargs) -> None:
        """Mark the end of a training epoch."""
        self.optimizer.on_epoch_end()

    def on_step_begin(self, args, state, control, model=None, **kwargs) -> None:
        """Mark the beginning of a training step."""
        self.optimizer.on_step_begin()


__all__ = [
    "OptimumSelector", "Energy", "Time", "ZeusCost", "MaxSlowdownConstraint", "PowerLimitMeasurement",
    "GlobalPowerLimitOptimizer", "HFGlobalPowerLimitOptimizer", "Ready", "Warmup", "Profiling", "Done", "PLOState",
    "load_profile", "save_profile",
]
