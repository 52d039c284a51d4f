"""Compatibility: the power-limit optimizer as the original's documentation and tests describe it.

Written from the original's public behaviour (zeus.optimizer.power_limit and its test of the
optimizer): a training loop replayed through ``ReplayZeusMonitor`` from every measured profile of
``../shared/data/plo-profiles`` (each row one 40-step window at one limit), for every eta and four
epoch lengths (never interrupted; interrupted in a warm-up; in a profiling window; on the last
profiling step of every limit). The GPUs are the fake NVML's, whose power-limit range is the
profile's; its setter log gives the exact sequence of ``nvmlDeviceSetPowerManagementLimit`` calls,
which must be the one the original's reasoning predicts: one call per GPU for each limit set in
turn, the maximum after every interrupted attempt (which is then retried), the optimum at the end
unless already set. Then: the optimum of every selector from the saved profile, and a reload that
sets the optimum at once.
"""
from __future__ import annotations

import csv
import os

import pytest

import zeusc_testutil as tu
from zeusc.optimizer.power_limit import (Done, Energy, GlobalPowerLimitOptimizer, MaxSlowdownConstraint, Ready,
                                         Time, ZeusCost)
from zeusc.utils.metric import zeus_cost
from zeusc.utils.testing import ReplayZeusMonitor

ETAS = (0.0, 0.25, 0.5, 0.75, 1.0)
INTERRUPTS = (0, 1, 2, "every time")
FACTORS = (1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 100.0)


def _profiles():
    d = tu.data_dir()
    return tu.plo_profile_files(d) if d else []


class LogOptima:
    """The optimum of each selector, computed from a profile CSV as the original's test does: the
    first row with the least key (rows are in profiling order, the highest limit first)."""

    def __init__(self, path: str) -> None:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        cols = [c for c in rows[0] if c.startswith("gpu") and c.endswith("_energy")]
        self.gpu_indices = [int(c[3:].split("_")[0]) for c in cols]
        self.rows = [(int(r["window_name"].split("_")[-1]), sum(float(r[c]) for c in cols),
                      float(r["elapsed_time"])) for r in rows]
        self.power_limits = [w for w, _, _ in self.rows]

    def _first_min(self, key) -> int:
        best = None
        for w, e, t in self.rows:
            k = key(w, e, t)
            if best is None or k < best[0]:
                best = (k, w)
        return best[1]

    def zeus_cost(self, eta: float) -> int:
        max_power = max(self.power_limits) * len(self.gpu_indices)
        return self._first_min(lambda w, e, t: zeus_cost(e, t, eta, max_power))

    def energy(self) -> int:
        return self._first_min(lambda w, e, t: e)

    def time(self) -> int:
        return self._first_min(lambda w, e, t: t)

    def max_slowdown(self, factor: float) -> int:
        fastest = [t for w, e, t in self.rows if w == max(self.power_limits)][0]
        return min(w for w, e, t in self.rows if t <= fastest * factor)


def epochs_for(interrupts, nlimits):
    """(steps per epoch, epochs, limits profiled per epoch) of the original's four cases (with
    one wait step, 10 warm-up and 40 profiling steps per limit)."""
    if interrupts == 0:
        per = nlimits
        return 50 * per + 10, 3, per
    if interrupts == 1:  # the epoch ends in a warm-up
        per = nlimits // 2
        return 50 * per + 5, 4, per
    if interrupts == 2:  # the epoch ends in a profiling window
        per = nlimits // 3
        return 50 * per + 15, 5, per
    per = 1  # every limit is interrupted on its last profiling step, once
    return 50 * per + 50, nlimits + 2, per


def expected_limit_sequence(limits, per_epoch, optimum):
    """The limits set, in order: each epoch sets up to per_epoch + 1 limits; when the list is not
    exhausted the last one is interrupted, the maximum goes back on, and that limit is retried
    first in the next epoch; the optimum is set at the end unless it is the last limit set."""
    todo = sorted(limits, reverse=True)
    seq = []
    last = None
    while todo:
        for _ in range(per_epoch + 1):
            if not todo:
                break
            last = todo.pop(0)
            seq.append(last)
        else:
            seq.append(max(limits))
            todo.insert(0, last)
    if last != optimum:
        seq.append(optimum)
    return seq


def training_loop(plo, steps_per_epoch, epochs, wait_steps=0):
    for epoch in range(epochs):
        plo.on_epoch_begin()
        for step in range(steps_per_epoch):
            plo.on_step_begin()
            if wait_steps > 0 and epoch == 0 and step < wait_steps:
                assert isinstance(plo.state, Ready)
            plo.on_step_end()
        plo.on_epoch_end()


@pytest.fixture
def replay_env(fake, monkeypatch, tmp_path):
    """Fake-NVML GPUs whose power-limit range and count are those of a profile; the setter log."""
    log = str(tmp_path / "nvml.log")

    def make(profile_path):
        monkeypatch.setenv("ZEUS_SIM_MODEL_FILE", profile_path)
        monkeypatch.setenv("FAKE_NVML_LOG", log)
        return fake.devices(all_devices=True)
    make.log = log
    return make


@pytest.mark.parametrize("num_interrupts", INTERRUPTS, ids=str)
@pytest.mark.parametrize("eta_knob", ETAS)
@pytest.mark.parametrize("profile", _profiles() or [None], ids=lambda p: os.path.basename(p) if p else "no-data")
def test_power_limit_optimizer(plo_lib, replay_env, tmp_path, profile, eta_knob, num_interrupts):
    if profile is None:
        pytest.skip("the measured data folder ../shared/data is absent (set ZEUS_DATA_DIR to its path)")
    log = LogOptima(profile)
    dev = replay_env(profile)
    try:
        monitor = ReplayZeusMonitor(log_file=profile, ignore_sync_execution=True, match_window_name=False,
                                    devices=dev)
        assert monitor.gpu_indices == log.gpu_indices
        saved = tmp_path / "power_limit_optimizer.json"

        # JIT profiling
        plo = GlobalPowerLimitOptimizer(monitor, optimum_selector=ZeusCost(eta_knob=eta_knob,
                                                                           world_size=len(monitor.gpu_indices)),
                                        wait_steps=1, warmup_steps=10, profile_steps=40, pl_step=25,
                                        profile_path=saved)
        assert plo.power_limits == [w * 1000 for w in sorted(log.power_limits, reverse=True)]
        steps, epochs, per_epoch = epochs_for(num_interrupts, len(log.power_limits))
        training_loop(plo, steps, epochs, wait_steps=1)
        optimum = log.zeus_cost(eta_knob)
        assert isinstance(plo.state, Done)
        assert plo.state.optimal_power_limit == optimum * 1000
        # The GPUs start at the maximum, so the optimizer's first set (the maximum) writes nothing.
        want = [(g, w * 1000)
                for w in tu.nvml_writes(expected_limit_sequence(log.power_limits, per_epoch, optimum),
                                        max(log.power_limits))
                for g in sorted(monitor.gpu_indices)]
        assert tu.read_setter_log(replay_env.log) == want
        assert saved.exists()

        # the optimum of each selector, from the saved profile
        for sel, w in ([(Energy(), log.energy()), (Time(), log.time())]
                       + [(MaxSlowdownConstraint(factor=f), log.max_slowdown(f)) for f in FACTORS]):
            temp = GlobalPowerLimitOptimizer(monitor, optimum_selector=sel, profile_path=saved)
            assert isinstance(temp.state, Done)
            assert temp.state.optimal_power_limit == w * 1000, (type(sel).__name__, vars(sel))
            temp.close()

        # loading the saved profile sets the optimum on every GPU at once, and nothing else; the
        # GPUs hold another limit first, since NVML writes nothing for the limit a GPU holds
        other = max(log.power_limits) if optimum != max(log.power_limits) else min(log.power_limits)
        for g in sorted(monitor.gpu_indices):
            dev.set_power_limit(g, other * 1000)
        before = len(tu.read_setter_log(replay_env.log))
        plo2 = GlobalPowerLimitOptimizer(monitor, optimum_selector=ZeusCost(eta_knob=eta_knob,
                                                                            world_size=len(monitor.gpu_indices)),
                                         warmup_steps=10, profile_steps=40, pl_step=25, profile_path=saved)
        training_loop(plo2, steps, 1)
        assert tu.read_setter_log(replay_env.log)[before:] == [(g, optimum * 1000)
                                                               for g in sorted(monitor.gpu_indices)]
        monitor.close()
    finally:
        dev.close()


def test_replay_window_names_are_checked_when_asked(plo_lib, replay_env, plo_profiles):
    """With match_window_name (the default), a row of another window stops the run with the
    replay's RuntimeError, raised from the optimizer's hook."""
    profile = plo_profiles[0]
    dev = replay_env(profile)
    try:
        with open(profile) as f:
            f.readline()
            first = f.readline().split(",")[1]
        monitor = ReplayZeusMonitor(log_file=profile, ignore_sync_execution=True, devices=dev)
        plo = GlobalPowerLimitOptimizer(monitor, wait_steps=0, warmup_steps=0, profile_steps=2)
        plo.on_step_begin()  # the first window begins at the maximum limit
        plo.on_step_begin()
        if first == "__GlobalPowerLimitOptimizer_" + str(plo.power_limits[0] // 1000):
            plo.on_step_begin()  # the recorded names are the optimizer's own: the replay goes on
            assert plo.measurements[0].power_limit == plo.power_limits[0] // 1000
        else:
            with pytest.raises(RuntimeError, match=f"Was expecting {first}"):
                plo.on_step_begin()
        monitor.close()
    finally:
        dev.close()
