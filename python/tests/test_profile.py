"""zeusc.profile (the original's zeus.profile: thermally stable profiling) on a simulated GPU on
the wall clock: how many times the workload runs in each phase, energy per iteration against the
simulator's ground truth, the sweeps' shapes and verdicts, and the die cooling down between trials.
The tests that check measured energy run on the ideal simulated GPU and on the measured h100 and
h200 models (docs/sim.md), where the monitor's tick followers estimate each window."""
from __future__ import annotations

import math
import statistics
import time

import pytest

from zeusc import profile
from zeusc.device import Devices
from zeusc.monitor import ZeusMonitor

UNITS = 0.1  # one iteration: 5 ms of full work on the simulated GPU

# How far a profiled window's energy may be from the truth (a fraction of it): the ideal GPU's
# counter is read at both bounds (exact, to its mJ); on h100 and h200 the tick followers' target
# for windows of 50 ms to 1 s at a steady load is 2 % at worst (test_window_phase.c,
# test_monitor_h100.py).
MODEL_ERR = {"ideal": 0.001, "h100": 0.02, "h200": 0.02}
HARDWARE = ["ideal", "h100", "h200"]


class TruthMonitor:
    """The ZeusMonitor handed to zeusc.profile, recording the simulated GPU's true energy at each
    window's bounds (the mean of the truth just before and just after each bound call)."""

    def __init__(self, monitor, node):
        self._monitor, self._node = monitor, node
        self.truths = []  # (key, true energy in J) of each window ended, in order

    def __getattr__(self, name):
        return getattr(self._monitor, name)

    def begin_window(self, key, sync_execution=True):
        a = self._node.true_energy(0)
        self._monitor.begin_window(key, sync_execution=sync_execution)
        self._begin = (a + self._node.true_energy(0)) / 2

    def end_window(self, key, sync_execution=True, cancel=False):
        a = self._node.true_energy(0)
        m = self._monitor.end_window(key, sync_execution=sync_execution, cancel=cancel)
        if not cancel:
            self.truths.append((key, (a + self._node.true_energy(0)) / 2 - self._begin))
        return m


@pytest.fixture
def gpu(sim_env, monkeypatch, request):
    hardware = getattr(request, "param", "ideal")
    monkeypatch.delenv("ZEUS_MONITOR_ENERGY", raising=False)
    if hardware == "ideal":
        sim_env(gpus=1, clock="wall")
    else:
        sim_env(gpus=1, clock="wall", hardware=hardware)
    d = Devices(backend="sim", all_devices=True)
    mon = ZeusMonitor(devices=d, gpu_indices=[0], cpu_indices=[])
    assert mon.energy_sources == {0: "raw" if hardware == "ideal" else "sampled"}
    node = d.sim_node()
    if hardware != "ideal":
        # On the models the GPU stays loaded between iterations, as a real one does while the
        # framework queues the next step's kernels, and the followers see a few ticks of that load
        # first (as test_monitor_h100.py). Idle gaps between iterations are a case of their own:
        # a power tick that samples a gap is extrapolated to the window's end.
        node.set_load(0, True)
        time.sleep(0.3)
    calls = []

    def step():
        t0 = time.monotonic()
        calls.append(node.work(0, UNITS))
        step.stamps.append((t0, time.monotonic()))

    step.stamps = []  # each call's (start, end) on the clock zeusc.profile times with

    yield TruthMonitor(mon, node), node, step, calls
    mon.close()
    d.close()


@pytest.mark.parametrize("gpu", HARDWARE, indirect=True)
def test_measure_energy_per_iteration_is_the_ground_truth(gpu, request):
    hardware = request.node.callspec.params["gpu"]
    mon, node, step, calls = gpu
    e0, n0 = node.true_energy(0), node.now()
    node.work(0, UNITS * 20)
    truth = (node.true_energy(0) - e0) / 20  # J per iteration, back to back
    busy_w = 20 * truth / (node.now() - n0)
    r = profile.measure(step, mon, measurement_duration=0.2, cooldown_duration=0.0, num_warmup_iterations=2,
                        num_calibration_iterations=5)
    assert isinstance(r, profile.TrialResult)
    # Calibration (2 + 5), warm-up (2), then the measured iterations.
    assert len(calls) == 2 + 5 + 2 + r.iterations
    # As many iterations as fill 0.2 s at the calibrated pace: the 5 calibration calls' own span
    # (a busy machine slows the iterations; the count follows it), and never more than 5 ms
    # iterations give (the simulated work's own length).
    cal = (step.stamps[6][1] - step.stamps[2][0]) / 5
    assert math.ceil(0.2 / cal) - 1 <= r.iterations <= math.ceil(0.2 / cal)
    assert r.iterations <= math.ceil(0.2 / 0.005)
    # The measured window against the truth over its own bounds.
    [(_, window_truth)] = mon.truths
    print(f"{hardware}: {r.total_energy:.3f} J measured, {window_truth:.3f} J true "
          f"({(r.total_energy - window_truth) / window_truth:+.3%}); per iteration {r.energy_per_iter:.4f} J, "
          f"back to back {truth:.4f} J")
    assert r.total_energy == pytest.approx(window_truth, rel=MODEL_ERR[hardware], abs=0.002)
    if hardware == "ideal":  # the GPU idles between iterations
        assert r.energy_per_iter == pytest.approx(truth, rel=0.05)
    else:  # loaded between iterations too: the working power over each iteration's time
        assert r.energy_per_iter == pytest.approx(busy_w * r.time_per_iter, rel=0.02)
    assert r.total_energy == pytest.approx(r.energy_per_iter * r.iterations)
    # The window's time is the measured iterations' span (and the bounds' calls), each iteration
    # at least the 5 ms the simulated work lasts.
    span = step.stamps[-1][1] - step.stamps[9][0]
    assert span - 0.001 <= r.total_time <= span * 1.05 + 0.005
    assert r.time_per_iter >= 0.005 * 0.99
    assert r.total_time == pytest.approx(r.time_per_iter * r.iterations)
    assert 25 <= r.temperature_before <= 95 and 25 <= r.temperature_after <= 95


def test_warmup_settle_duration_sets_the_warmup_iterations(gpu):
    mon, _, step, calls = gpu
    r = profile.measure(step, mon, measurement_duration=0.05, cooldown_duration=0.0, num_warmup_iterations=3,
                        num_calibration_iterations=4, warmup_settle_duration=0.1)
    warmup = len(calls) - 3 - 4 - r.iterations
    # 0.1 s of iterations at the calibrated pace (the 4 calibration calls' span), not 3.
    cal = (step.stamps[6][1] - step.stamps[3][0]) / 4
    assert math.ceil(0.1 / cal) - 1 <= warmup <= math.ceil(0.1 / cal) and warmup > 3
    with pytest.raises(ValueError, match="warmup_settle_duration must be non-negative"):
        profile.measure(step, mon, 0.05, 0.0, warmup_settle_duration=-1)


@pytest.mark.parametrize("gpu", HARDWARE, indirect=True)
def test_measurement_sweep_runs_what_the_original_runs(gpu, request):
    hardware = request.node.callspec.params["gpu"]
    mon, _, step, calls = gpu
    rep = profile.profile_measurement_duration(step, mon, measurement_duration_search_range=[0.02, 0.04],
                                               cooldown_duration=0.0, num_trials=3, num_warmup_trials=1,
                                               num_warmup_iterations=2, iteration_duration=0.01,
                                               trial_stddev_threshold=1e9)
    # No calibration (iteration_duration given); 1 warm-up trial of the longest duration (4
    # iterations, no warm-up iterations); then 3 trials x (2 + 2) and 3 trials x (2 + 4).
    assert len(calls) == 4 + 3 * (2 + 2) + 3 * (2 + 4)
    assert rep.sweep_param == ("measurement_duration", [0.02, 0.04])
    assert rep.fixed_param == ("cooldown_duration", 0.0)
    assert [e.measurement_duration for e in rep.entries] == [0.02, 0.04]
    assert [e.cooldown_duration for e in rep.entries] == [0.0, 0.0]
    for e, n in zip(rep.entries, (2, 4)):
        assert len(e.trials) == 3 and all(t.iterations == n for t in e.trials)
        per_iter = [t.energy_per_iter for t in e.trials]
        assert e.energy_mean == pytest.approx(statistics.mean(per_iter))
        assert e.energy_std == pytest.approx(statistics.stdev(per_iter))
        assert e.avg_total_energy == pytest.approx(statistics.mean(t.total_energy for t in e.trials))
        assert e.is_valid
        assert "[VALID]" in str(e) and "measurement=0.0 s" in str(e)
    # Every trial's energy (20 and 40 ms windows) against the truth over its window, after the
    # warm-up trial's.
    trials = [t for e in rep.entries for t in e.trials]
    assert len(mon.truths) == 1 + len(trials)
    for t, (_, truth) in zip(trials, mon.truths[1:]):
        print(f"{hardware}: {t.iterations} iterations, {t.total_energy:.3f} J measured, {truth:.3f} J true "
              f"({(t.total_energy - truth) / truth:+.3%})")
        assert t.total_energy == pytest.approx(truth, rel=MODEL_ERR[hardware], abs=0.002)
    text = str(rep)
    assert text.splitlines()[0] == "Sweep measurement_duration (fixed cooldown_duration=0.0 s):"
    assert len(text.splitlines()) == 3
    # The verdict is the threshold against the spread: with none allowed, nothing is valid.
    rep0 = profile.profile_measurement_duration(step, mon, [0.02], cooldown_duration=0.0, num_trials=2,
                                                num_warmup_trials=0, num_warmup_iterations=0,
                                                iteration_duration=0.01, trial_stddev_threshold=0.0)
    assert not rep0.entries[0].is_valid and "[INVALID]" in str(rep0)


def test_cooldown_lets_the_die_cool(gpu):
    """The simulated die's temperature follows the last second's mean power: a trial after 1.1 s
    of idling starts at idle temperature, one right after another trial starts hot."""
    mon, _, step, _ = gpu
    rep = profile.profile_cooldown_duration(step, mon, cooldown_duration_search_range=[0.0, 1.1],
                                            measurement_duration=0.6, num_trials=2, num_warmup_trials=1,
                                            num_warmup_iterations=0, iteration_duration=0.005)
    assert rep.sweep_param == ("cooldown_duration", [0.0, 1.1])
    assert rep.fixed_param == ("measurement_duration", 0.6)
    hot, cooled = rep.entries
    assert cooled.avg_temperature_before == pytest.approx(35, abs=1)  # idle
    assert hot.avg_temperature_before > cooled.avg_temperature_before + 10
    assert cooled.avg_temperature_after > cooled.avg_temperature_before + 10


def test_profile_parameters_fixes_each_at_the_other_ranges_maximum(gpu):
    mon, _, step, calls = gpu
    m, c = profile.profile_parameters(step, mon, measurement_duration_search_range=[0.01, 0.02],
                                      cooldown_duration_search_range=[0.0, 0.05], num_trials=2, num_warmup_trials=1,
                                      num_warmup_iterations=1, num_calibration_iterations=3)
    assert m.fixed_param == ("cooldown_duration", 0.05)
    assert c.fixed_param == ("measurement_duration", 0.02)
    assert [e.cooldown_duration for e in c.entries] == [0.0, 0.05]
    assert [e.measurement_duration for e in m.entries] == [0.01, 0.02]
    # Calibrated once (1 + 3 calls); warm-up trials only before the first sweep.
    n_m = sum(t.iterations + 1 for e in m.entries for t in e.trials)
    n_c = sum(t.iterations + 1 for e in c.entries for t in e.trials)
    warmup_trial = len(calls) - (1 + 3) - n_m - n_c
    longest = max(t.iterations for t in m.entries[1].trials)
    assert warmup_trial == longest


def test_bad_arguments_and_a_failing_workload(gpu):
    mon, node, step, _ = gpu
    with pytest.raises(ValueError, match="seconds >= 0"):
        profile.profile_cooldown_duration(step, mon, [-1.0], iteration_duration=0.01)
    with pytest.raises(ValueError, match="num_trials"):
        profile.profile_measurement_duration(step, mon, [0.01], num_trials=0, iteration_duration=0.01)
    with pytest.raises(ValueError, match="iteration_duration must be seconds > 0"):
        profile.profile_measurement_duration(step, mon, [0.01], cooldown_duration=0.0, num_warmup_trials=0,
                                             iteration_duration=0.0)

    n = [0]

    def flaky():
        n[0] += 1
        if n[0] == 3:
            raise RuntimeError("out of memory")
        node.work(0, UNITS)

    with pytest.raises(RuntimeError, match="out of memory"):
        profile.profile_measurement_duration(flaky, mon, [0.05], cooldown_duration=0.0, num_warmup_trials=0, num_trials=1,
                                             num_warmup_iterations=0, iteration_duration=0.005)
    # The window the failure interrupted was cancelled, so the next profile runs.
    r = profile.measure(step, mon, 0.02, 0.0, num_warmup_iterations=0, num_calibration_iterations=2)
    assert r.iterations >= 3


def test_the_originals_signatures_and_defaults():
    import inspect

    def sig(f):
        return [(p.name, p.default) for p in inspect.signature(f).parameters.values()]

    E = inspect.Parameter.empty
    common = [("num_trials", 10), ("num_warmup_trials", 2), ("trial_stddev_threshold", 0.01),
              ("num_warmup_iterations", 10), ("num_calibration_iterations", 100)]
    assert sig(profile.profile_measurement_duration) == [
        ("target_function", E), ("zeus_monitor", E), ("measurement_duration_search_range", None),
        ("cooldown_duration", 10.0)] + common + [("iteration_duration", None)]
    assert sig(profile.profile_cooldown_duration) == [
        ("target_function", E), ("zeus_monitor", E), ("cooldown_duration_search_range", None),
        ("measurement_duration", 10.0)] + common + [("iteration_duration", None)]
    assert sig(profile.profile_parameters) == [
        ("target_function", E), ("zeus_monitor", E), ("measurement_duration_search_range", None),
        ("cooldown_duration_search_range", None)] + common
    assert sig(profile.measure) == [
        ("target_function", E), ("zeus_monitor", E), ("measurement_duration", E), ("cooldown_duration", E),
        ("num_warmup_iterations", 10), ("num_calibration_iterations", 100), ("warmup_settle_duration", None)]
    assert [f for f in profile.SweepResult.__dataclass_fields__] == [
        "measurement_duration", "cooldown_duration", "trials", "energy_mean", "energy_std", "avg_temperature_before",
        "avg_temperature_after", "avg_total_time", "avg_total_energy", "is_valid"]
    assert [f for f in profile.TrialResult.__dataclass_fields__] == [
        "energy_per_iter", "time_per_iter", "total_energy", "total_time", "iterations", "temperature_before",
        "temperature_after"]
