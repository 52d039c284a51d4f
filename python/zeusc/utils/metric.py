"""Metrics (zeus.utils.metric of the original): the Zeus cost, and the energy and average power of
a power log file."""
from __future__ import annotations

import csv
import datetime as _dt
import numbers
import os
from pathlib import Path
from typing import List, Optional, Tuple

from .. import _lib


class ZeusCostThresholdExceededError(Exception):
    """Training stopped because the next epoch would exceed the cost threshold
    (``ZEUS_COST_THRESH``); raised by ``zeusc.run.ZeusDataLoader.epochs()`` as the original.

    Attributes: time_consumed, energy_consumed, cost, next_cost, cost_thresh.
    """

    def __init__(self, time_consumed: float, energy_consumed: float, cost: float, next_cost: float,
                 cost_thresh: float) -> None:
        super().__init__(time_consumed, energy_consumed, cost, next_cost, cost_thresh)
        self.time_consumed = time_consumed
        self.energy_consumed = energy_consumed
        self.cost = cost
        self.next_cost = next_cost
        self.cost_thresh = cost_thresh

    def __str__(self) -> str:
        return (f"Next expected cost {self.next_cost:.2f} exceeds cost threshold {self.cost_thresh:.2f}! "
                f"Stopping. Saved training results: time={self.time_consumed:.2f}, "
                f"energy={self.energy_consumed:.2f}, cost={self.cost:.2f}")


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: int | float) -> float:
    """The Zeus time-energy cost: ``eta_knob * energy + (1 - eta_knob) * max_power * time``.

    Args:
        energy: energy in J.
        time: time in s.
        eta_knob: 0 <= eta <= 1: how much energy counts against time.
        max_power: the largest power limit (W) of the job (times the GPUs, for several).

    Computed by libzeus (zeus_cost in zeus/plo.h). ValueError for an eta outside [0, 1] (the
    original leaves bound checks to the caller; see python/README), TypeError for a value that is
    not a number.
    """
    for name, v in (("energy", energy), ("time", time), ("eta_knob", eta_knob), ("max_power", max_power)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"zeus_cost: {name} must be a number, got {type(v).__name__}")
    if not 0.0 <= eta_knob <= 1.0:
        raise ValueError(f"zeus_cost: eta_knob {eta_knob} is outside [0, 1]")
    L = _lib.require_plo()
    return L.zeus_cost(float(energy), float(time), float(eta_knob), float(max_power))


def _parse_time(text: str) -> float:
    """Seconds of a ``YYYY-mm-dd HH:MM:SS[.fraction]`` timestamp (as UTC: only differences count),
    keeping every digit of the fraction (the original monitor wrote nanoseconds)."""
    text = text.strip()
    whole, _, frac = text.partition(".")
    t = _dt.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S").replace(tzinfo=_dt.timezone.utc).timestamp()
    return t + (float("0." + frac) if frac else 0.0)


def _read_power_log(logfile) -> Tuple[List[float], List[float]]:
    """(seconds, watts) of a power log (``Time,Power`` with power in mW, as the original Zeus
    monitor wrote it); its last line is left out, as the original does (the monitor may have been
    killed while writing it)."""
    path = os.fspath(logfile)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or [c.strip() for c in rows[0][:2]] != ["Time", "Power"]:
        raise ValueError(f"{path}: expected a power log with the header 'Time,Power' (power in mW)")
    rows = [r for r in rows[1:] if r]
    rows = rows[:-1]  # skipfooter=1
    seconds, watts = [], []
    for i, r in enumerate(rows):
        try:
            seconds.append(_parse_time(r[0]))
            watts.append(float(r[1]) / 1000.0)
        except (ValueError, IndexError):
            raise ValueError(f"{path}: line {i + 2}: expected 'YYYY-mm-dd HH:MM:SS.fraction,<mW>', got "
                             f"{','.join(r)!r}") from None
    return seconds, watts


def _auc(x: List[float], y: List[float]) -> float:
    if len(x) < 2:
        raise ValueError(f"At least 2 points are needed to compute area under curve, but x.shape = {len(x)}")
    return sum(0.5 * (y[i] + y[i - 1]) * (x[i] - x[i - 1]) for i in range(1, len(x)))


def _window(seconds, watts, start: Optional[float], end: Optional[float], wrap: bool):
    first, last = seconds[0], seconds[-1]
    keep = list(range(len(seconds)))
    if start is not None:
        origin = first if (start >= 0.0 or not wrap) else last
        keep = [i for i in keep if seconds[i] >= origin + start]
    if end is not None:
        origin = first if (end >= 0.0 or not wrap) else last
        keep = [i for i in keep if seconds[i] <= origin + end]
    return [seconds[i] for i in keep], [watts[i] for i in keep]


def energy(logfile: Path | str, start: float | None = None, end: float | None = None) -> float:
    """Energy (J) of a power log file between `start` and `end` seconds from the beginning of the
    log (a negative value counts back from its end), by the trapezoidal rule.

    Raises:
        ValueError: a malformed log, or fewer than two samples in the window.
    """
    s, w = _read_power_log(logfile)
    if not s:
        raise ValueError(f"{os.fspath(logfile)}: no power samples")
    s, w = _window(s, w, start, end, wrap=True)
    return _auc(s, w)


def avg_power(logfile: Path | str, start: float | None = None, end: float | None = None) -> float:
    """Average power (W) of a power log file between `start` and `end` seconds from its beginning.

    Raises:
        ValueError: a malformed log, or a window too short (fewer than two samples, or no time).
    """
    s, w = _read_power_log(logfile)
    if not s:
        raise ValueError(f"{os.fspath(logfile)}: no power samples")
    s, w = _window(s, w, start, end, wrap=False)
    area = _auc(s, w)
    span = max(s) - min(s)
    if span <= 0:
        raise ValueError(f"{os.fspath(logfile)}: the window has no duration")
    return area / span


__all__ = ["zeus_cost", "energy", "avg_power", "ZeusCostThresholdExceededError"]
