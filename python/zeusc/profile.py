"""Thermally stable energy profiling: how long to measure, and how long to let the GPU cool first,
for a workload's energy per iteration to repeat.

The original's ``zeus.profile`` (ml-energy/zeus master, August 2026), with its names, arguments,
defaults and results, over zeusc's :class:`~zeusc.monitor.ZeusMonitor` (whose windows are exact
below the energy counter's tick, so short measurement durations are not penalised by the counter).

One *trial* idles for ``cooldown_duration`` seconds, runs ``num_warmup_iterations`` iterations
(or, in :func:`measure`, ``warmup_settle_duration`` seconds of them), then measures
``ceil(measurement_duration / iteration_duration)`` iterations in one window::

    |-- cooldown (idle) --|-- warm-up --|-- iter iter ... iter --|
                                        |<- energy_per_iter  ->|

A *sweep* repeats ``num_trials`` trials at each value of one duration while the other stays fixed,
after ``num_warmup_trials`` throw-away trials (no cooldown, no warm-up) that bring the GPU to its
working temperature. A value is *valid* when the sample standard deviation of energy per
iteration across its trials is below ``trial_stddev_threshold`` joules.

- :func:`profile_measurement_duration`: cooldown fixed, measurement durations swept;
- :func:`profile_cooldown_duration`: measurement fixed, cooldown durations swept;
- :func:`profile_parameters`: both, the fixed value of each being the other range's maximum;
- :func:`measure`: one trial with durations chosen.

In a distributed job every rank profiles its own GPU with its own monitor; energy is summed over
ranks, time is the slowest rank's, temperature the mean (``zeusc.utils.framework.all_reduce``);
rank 0 alone logs. Unlike the original, a single process needs no framework: without
torch.distributed nothing is reduced, and the workload is synchronised (as zeusc's monitor does)
only through a framework the program imported.
"""
from __future__ import annotations

import logging
import math
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable, List, Literal, Optional, Tuple

from .utils.framework import all_reduce, get_rank, get_world_size, sync_if_loaded, torch_distributed

logger = logging.getLogger(__name__)

__all__ = ["TrialResult", "SweepResult", "SweepReport", "profile_parameters", "profile_measurement_duration",
           "profile_cooldown_duration", "measure"]

_WINDOW = "__zeus_profile_run_trial"


def _default_range() -> List[float]:
    return [float(s) for s in range(1, 11)]


def _rank_zero() -> bool:
    return get_rank() == 0


@dataclass
class TrialResult:
    """One trial: energy_per_iter (J), time_per_iter (s), total_energy (J) and total_time (s) of
    the measured window, iterations in it, and the mean GPU temperature (°C) just before and just
    after it."""

    energy_per_iter: float
    time_per_iter: float
    total_energy: float
    total_time: float
    iterations: int
    temperature_before: float
    temperature_after: float


@dataclass
class SweepResult:
    """One value of a sweep: the two durations used (s), its trials, the mean and sample standard
    deviation of energy per iteration (J), the trials' mean temperatures (°C), total time (s) and
    total energy (J), and is_valid (energy_std < trial_stddev_threshold)."""

    measurement_duration: float
    cooldown_duration: float
    trials: List[TrialResult]
    energy_mean: float
    energy_std: float
    avg_temperature_before: float
    avg_temperature_after: float
    avg_total_time: float
    avg_total_energy: float
    is_valid: bool

    def __str__(self) -> str:
        verdict = "VALID" if self.is_valid else "INVALID"
        return (f"measurement={self.measurement_duration:.1f} s  cooldown={self.cooldown_duration:.1f} s  "
                f"mean={self.energy_mean:.4f} J  std={self.energy_std:.4f} J  "
                f"temp_before={self.avg_temperature_before:.1f} \u00b0C  "
                f"temp_after={self.avg_temperature_after:.1f} \u00b0C  [{verdict}]")


@dataclass
class SweepReport:
    """A whole sweep: sweep_param (name, the values swept), fixed_param (name, its value) and one
    :class:`SweepResult` per value swept, in order."""

    sweep_param: Tuple[str, List[float]]
    fixed_param: Tuple[str, float]
    entries: List[SweepResult]

    def __str__(self) -> str:
        swept, _ = self.sweep_param
        fixed, value = self.fixed_param
        heads = [f"{swept}={getattr(e, swept):.1f} s" for e in self.entries]
        width = max((len(h) for h in heads), default=0)
        out = [f"Sweep {swept} (fixed {fixed}={value:.1f} s):"]
        for head, e in zip(heads, self.entries):
            out.append(f"  {head:<{width}}  mean={e.energy_mean:.4f} J  std={e.energy_std:.4f} J  "
                       f"temp_before={e.avg_temperature_before:.1f} \u00b0C  "
                       f"temp_after={e.avg_temperature_after:.1f} \u00b0C  [{'VALID' if e.is_valid else 'INVALID'}]")
        return "\n".join(out)


def _reduce(values: List[float], operation: str) -> List[float]:
    # Across ranks when torch.distributed runs; as they are otherwise, framework or not (the
    # original's all_reduce raises where neither PyTorch nor JAX is installed).
    return all_reduce(values, operation) if torch_distributed() is not None else values


def _sync(monitor) -> None:
    # As zeusc's monitor does: wait for the framework's queued GPU work when the framework is
    # loaded (a process that never imported it queued nothing through it). The original calls
    # sync_execution, which raises where torch is not installed.
    sync_if_loaded(monitor.gpu_indices, monitor.sync_with)


def _calibrate(target_function: Callable[[], Any], monitor, warmup: int, calibration: int) -> float:
    """Seconds per iteration: `calibration` iterations timed after `warmup` untimed ones (the
    slowest rank's figure)."""
    if calibration < 1:
        raise ValueError(f"num_calibration_iterations must be at least 1, not {calibration}")
    for _ in range(warmup):
        target_function()
    _sync(monitor)
    t0 = time.monotonic()
    for _ in range(calibration):
        target_function()
    _sync(monitor)
    per_iter = (time.monotonic() - t0) / calibration
    [per_iter] = _reduce([per_iter], "max")
    logger.info("Calibrated iteration duration: %.3f ms", per_iter * 1000)
    return per_iter


def _mean_temperature(monitor) -> float:
    if not monitor.gpu_indices:
        raise ValueError("the ZeusMonitor measures no GPU: thermally stable profiling needs one")
    gpus = monitor.gpus
    return sum(gpus.get_gpu_temperature(i) for i in monitor.gpu_indices) / len(monitor.gpu_indices)


def _trial(target_function, monitor, cooldown_duration: float, measurement_duration: float,
           warmup_iterations: int, iteration_duration: float) -> TrialResult:
    if not iteration_duration > 0:
        raise ValueError(f"iteration_duration must be seconds > 0, not {iteration_duration!r} (did the target "
                         "function take no measurable time?)")
    iterations = max(1, math.ceil(measurement_duration / iteration_duration))
    if cooldown_duration > 0:
        time.sleep(cooldown_duration)
    for _ in range(warmup_iterations):
        target_function()
    _sync(monitor)
    before = _mean_temperature(monitor)
    monitor.begin_window(_WINDOW, sync_execution=False)
    try:
        for _ in range(iterations):
            target_function()
    except BaseException:
        monitor.end_window(_WINDOW, cancel=True)
        raise
    m = monitor.end_window(_WINDOW)
    after = _mean_temperature(monitor)
    [energy] = _reduce([m.total_energy], "sum")
    [elapsed] = _reduce([m.time], "max")
    [before_sum, after_sum] = _reduce([before, after], "sum")
    ranks = get_world_size()
    return TrialResult(energy_per_iter=energy / iterations, time_per_iter=elapsed / iterations,
                       total_energy=energy, total_time=elapsed, iterations=iterations,
                       temperature_before=before_sum / ranks, temperature_after=after_sum / ranks)


def _summarise(measurement_duration: float, cooldown_duration: float, trials: List[TrialResult],
               threshold: float) -> SweepResult:
    per_iter = [t.energy_per_iter for t in trials]
    n = len(trials)
    std = statistics.stdev(per_iter) if n >= 2 else 0.0
    return SweepResult(
        measurement_duration=measurement_duration, cooldown_duration=cooldown_duration, trials=trials,
        energy_mean=statistics.mean(per_iter), energy_std=std,
        avg_temperature_before=sum(t.temperature_before for t in trials) / n,
        avg_temperature_after=sum(t.temperature_after for t in trials) / n,
        avg_total_time=sum(t.total_time for t in trials) / n,
        avg_total_energy=sum(t.total_energy for t in trials) / n,
        is_valid=std < threshold)


def _check_sweep_args(values: List[float], fixed: float, num_trials: int, num_warmup_trials: int) -> None:
    if not values:
        raise ValueError("the search range is empty: give at least one duration in seconds")
    for v in list(values) + [fixed]:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or v < 0:
            raise ValueError(f"durations are seconds >= 0, not {v!r}")
    if num_trials < 1:
        raise ValueError(f"num_trials must be at least 1, not {num_trials}")
    if num_warmup_trials < 0:
        raise ValueError(f"num_warmup_trials must be >= 0, not {num_warmup_trials}")


def _sweep(target_function, monitor, values: List[float], fixed: float,
           kind: Literal["cooldown_duration", "measurement_duration"], num_trials: int, num_warmup_trials: int,
           threshold: float, warmup_iterations: int, iteration_duration: float) -> SweepReport:
    cooling = kind == "cooldown_duration"
    if num_warmup_trials > 0 and _rank_zero():
        logger.info("Running %d warmup trial(s)", num_warmup_trials)
    for i in range(num_warmup_trials):
        # Throw-away trials heat the GPU: no cooldown, no warm-up, the longest measurement.
        _trial(target_function, monitor, 0.0, fixed if cooling else max(values), 0, iteration_duration)
        if _rank_zero():
            logger.info("Warmup trial %d/%d done", i + 1, num_warmup_trials)
    entries = []
    for v in values:
        cooldown, measurement = (v, fixed) if cooling else (fixed, v)
        if _rank_zero():
            logger.info("Starting %s=%.1f s  [%d trials]", kind, v, num_trials)
        trials = []
        for k in range(num_trials):
            trials.append(_trial(target_function, monitor, cooldown, measurement, warmup_iterations,
                                 iteration_duration))
            if _rank_zero():
                logger.info("Trial %d/%d done", k + 1, num_trials)
        entries.append(_summarise(measurement, cooldown, trials, threshold))
    other = "measurement_duration" if cooling else "cooldown_duration"
    return SweepReport(sweep_param=(kind, list(values)), fixed_param=(other, fixed), entries=entries)


def _profile(kind: Literal["cooldown_duration", "measurement_duration"], target_function, monitor, values, fixed,
             num_trials, num_warmup_trials, threshold, warmup_iterations, calibration_iterations,
             iteration_duration) -> SweepReport:
    values = list(values or _default_range())
    _check_sweep_args(values, fixed, num_trials, num_warmup_trials)
    if iteration_duration is None:
        iteration_duration = _calibrate(target_function, monitor, warmup_iterations, calibration_iterations)
    other = "measurement" if kind == "cooldown_duration" else "cooldown"
    if _rank_zero():
        logger.info("Sweeping %s (%s fixed at %.1f s)", kind, other, fixed)
    report = _sweep(target_function, monitor, values, fixed, kind, num_trials, num_warmup_trials, threshold,
                    warmup_iterations, iteration_duration)
    if _rank_zero():
        logger.info("%s", report)
    return report


def profile_measurement_duration(
    target_function: Callable[[], Any],
    zeus_monitor,
    measurement_duration_search_range: Optional[List[float]] = None,
    cooldown_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
) -> SweepReport:
    """Sweeps the measurement duration with the cooldown fixed.

    Args:
        target_function: one iteration of the workload, called with no arguments.
        zeus_monitor: the :class:`~zeusc.monitor.ZeusMonitor` measuring the GPU(s).
        measurement_duration_search_range: seconds to try (default 1, 2, ..., 10).
        cooldown_duration: idle seconds before every trial.
        num_trials: trials per value.
        num_warmup_trials: throw-away trials before the sweep, to reach working temperature.
        trial_stddev_threshold: the largest standard deviation of energy per iteration (J) of a
            valid value.
        num_warmup_iterations: iterations run (unmeasured) before each measurement.
        num_calibration_iterations: iterations timed to find the iteration's duration.
        iteration_duration: that duration when already known (s); None: calibrate first.
    """
    return _profile("measurement_duration", target_function, zeus_monitor, measurement_duration_search_range,
                    cooldown_duration, num_trials, num_warmup_trials, trial_stddev_threshold, num_warmup_iterations,
                    num_calibration_iterations, iteration_duration)


def profile_cooldown_duration(
    target_function: Callable[[], Any],
    zeus_monitor,
    cooldown_duration_search_range: Optional[List[float]] = None,
    measurement_duration: float = 10.0,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    iteration_duration: Optional[float] = None,
) -> SweepReport:
    """Sweeps the cooldown duration with the measurement duration fixed; the arguments are those
    of :func:`profile_measurement_duration` with the two durations' roles swapped."""
    return _profile("cooldown_duration", target_function, zeus_monitor, cooldown_duration_search_range,
                    measurement_duration, num_trials, num_warmup_trials, trial_stddev_threshold, num_warmup_iterations,
                    num_calibration_iterations, iteration_duration)


def profile_parameters(
    target_function: Callable[[], Any],
    zeus_monitor,
    measurement_duration_search_range: Optional[List[float]] = None,
    cooldown_duration_search_range: Optional[List[float]] = None,
    num_trials: int = 10,
    num_warmup_trials: int = 2,
    trial_stddev_threshold: float = 0.01,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
) -> Tuple[SweepReport, SweepReport]:
    """Both sweeps, calibrating once: first the measurement duration (cooldown fixed at the
    cooldown range's maximum, after the warm-up trials), then the cooldown (measurement fixed at the
    measurement range's maximum, no warm-up trials). Returns (measurement report, cooldown report)."""
    m_values = list(measurement_duration_search_range or _default_range())
    c_values = list(cooldown_duration_search_range or _default_range())
    _check_sweep_args(m_values, 0.0, num_trials, num_warmup_trials)
    _check_sweep_args(c_values, 0.0, num_trials, num_warmup_trials)
    per_iter = _calibrate(target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations)
    measurement = profile_measurement_duration(
        target_function, zeus_monitor, measurement_duration_search_range=m_values, cooldown_duration=max(c_values),
        num_trials=num_trials, num_warmup_trials=num_warmup_trials, trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations, iteration_duration=per_iter)
    cooldown = profile_cooldown_duration(
        target_function, zeus_monitor, cooldown_duration_search_range=c_values, measurement_duration=max(m_values),
        num_trials=num_trials, num_warmup_trials=0, trial_stddev_threshold=trial_stddev_threshold,
        num_warmup_iterations=num_warmup_iterations, iteration_duration=per_iter)
    return measurement, cooldown


def measure(
    target_function: Callable[[], Any],
    zeus_monitor,
    measurement_duration: float,
    cooldown_duration: float,
    num_warmup_iterations: int = 10,
    num_calibration_iterations: int = 100,
    warmup_settle_duration: Optional[float] = None,
) -> TrialResult:
    """One trial with chosen durations (s), after calibrating the iteration's duration.
    warmup_settle_duration: seconds of workload run before the measurement instead of
    num_warmup_iterations (which calibration still uses); it must be >= 0."""
    if warmup_settle_duration is not None and warmup_settle_duration < 0:
        raise ValueError("warmup_settle_duration must be non-negative")
    _check_sweep_args([measurement_duration], cooldown_duration, 1, 0)
    per_iter = _calibrate(target_function, zeus_monitor, num_warmup_iterations, num_calibration_iterations)
    warmup = num_warmup_iterations
    if warmup_settle_duration is not None:
        warmup = max(1, math.ceil(warmup_settle_duration / per_iter)) if per_iter > 0 else 1
    return _trial(target_function, zeus_monitor, cooldown_duration, measurement_duration, warmup, per_iter)
