"""Metrics (zeus.utils.metric of the original)."""
from __future__ import annotations

import numbers

from .. import _lib


def zeus_cost(energy: float, time: float, eta_knob: float, max_power: float) -> float:
    """The Zeus time-energy cost: ``eta_knob * energy + (1 - eta_knob) * max_power * time``.

    Args:
        energy: energy in J.
        time: time in s.
        eta_knob: 0 <= eta <= 1: how much energy counts against time.
        max_power: the largest power limit (W) of the job (times the GPUs, for several).

    Computed by libzeus (zeus_cost in zeus/plo.h). ValueError for an eta outside [0, 1],
    TypeError for a value that is not a number.
    """
    for name, v in (("energy", energy), ("time", time), ("eta_knob", eta_knob), ("max_power", max_power)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"zeus_cost: {name} must be a number, got {type(v).__name__}")
    if not 0.0 <= eta_knob <= 1.0:
        raise ValueError(f"zeus_cost: eta_knob {eta_knob} is outside [0, 1]")
    L = _lib.require_plo()
    return L.zeus_cost(float(energy), float(time), float(eta_knob), float(max_power))


__all__ = ["zeus_cost"]
