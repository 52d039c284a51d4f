"""zeusc.optimizer.power_limit over libzeus's power-limit optimizer, through the fake NVML.

The replay scenarios of the optimizer's issue, driven from Python: for every measured profile
in ../shared/data/plo-profiles, every eta in {0, 0.25, 0.5, 0.75, 1} and four epoch-end
patterns, the exact set-power-limit calls seen in the fake NVML's log and the final limit must
equal what this file predicts on its own (zeusc_testutil.PloModel from the specification, the
optimum computed from the CSV). Every test here skips with "C power-limit optimizer not in this
libzeus" when the loaded library lacks zeus/plo.h's functions.
"""
from __future__ import annotations

import json
import math
import os
import signal
import textwrap

import pytest

import zeusc_testutil as tu
from zeusc.monitor import ZeusMonitor
from zeusc.optimizer import power_limit as pl
from zeusc.optimizer.power_limit import (Done, Energy, GlobalPowerLimitOptimizer, MaxSlowdownConstraint, OptimumSelector,
                                         PLOState, PowerLimitMeasurement, Time, ZeusCost)
from zeusc.utils.metric import zeus_cost

ETAS = (0.0, 0.25, 0.5, 0.75, 1.0)
FACTORS = (1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 5.0, 100.0)
WAIT, WARMUP, PROFILE = 1, 10, 40
SET_PL = "nvmlDeviceSetPowerManagementLimit"


def _profiles():
    d = tu.data_dir()
    return tu.plo_profile_files(d) if d else []


class Replay:
    """One simulated training run on fake-NVML GPUs whose table model is a profile CSV."""

    def __init__(self, fake, monkeypatch, tmp_path, profile: tu.Profile, initial_w=None):
        self.fake = fake
        self.profile = profile
        self.log = str(tmp_path / "nvml.log")
        monkeypatch.setenv("ZEUS_SIM_MODEL_FILE", profile.path)
        monkeypatch.setenv("ZEUS_SIM_UNITS_PER_ROW", str(PROFILE))  # one window = one CSV row
        monkeypatch.setenv("FAKE_NVML_LOG", self.log)
        self.dev = fake.devices(all_devices=True)
        self.n = self.dev.gpu_count()
        assert self.n == profile.ngpus
        if initial_w is not None:
            # Set through a second handle that keeps its change, so the optimizer's device set
            # sees initial_w as the limit the GPUs had before it.
            with fake.devices(all_devices=True, keep_settings_on_close=True) as other:
                for g in range(self.n):
                    other.set_power_limit(g, initial_w * 1000)
        self.initial_w = self.dev.get_power_limit(0) // 1000
        self.monitor = ZeusMonitor(devices=self.dev, cpu_indices=[])
        self.skip_lines = len(tu.read_setter_log(self.log))

    def calls(self):
        return tu.read_setter_log(self.log)[self.skip_lines:]

    def drive(self, opt, events):
        """Runs the hooks; returns the (state, GPU 0's limit in W) after every event."""
        trace = []
        for ev in events:
            if ev == "s":
                opt.on_step_begin()
                self.fake.work_all(self.n, 1.0)
                opt.on_step_end()
            else:
                opt.on_epoch_end()
                opt.on_epoch_begin()
            trace.append((opt.state.name.lower(), self.dev.get_power_limit(0) // 1000))
        return trace

    def limits(self):
        return [self.dev.get_power_limit(g) // 1000 for g in range(self.n)]

    def close(self):
        self.monitor.close()
        self.dev.close()


def expand(calls_w, n):
    return [(g, w * 1000) for w in calls_w for g in range(n)]


def check_measurements(got, profile: tu.Profile):
    want = profile.measurements()
    assert [m.power_limit for m in got] == [w for w, _, _ in want]
    for m, (w, e, t) in zip(got, want):
        # The energy counter counts whole mJ on each GPU.
        assert abs(m.energy - e) <= 0.0011 * profile.ngpus, (w, m.energy, e)
        assert math.isclose(m.time, t, rel_tol=1e-9), (w, m.time, t)


# ---- the replay matrix ------------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", tu.PATTERNS)
@pytest.mark.parametrize("eta", ETAS)
@pytest.mark.parametrize("csv_path", _profiles() or [None], ids=lambda p: os.path.basename(p) if p else "no-data")
def test_replay_calls_and_optimum(plo_lib, fake, monkeypatch, tmp_path, csv_path, eta, pattern):
    if csv_path is None:
        pytest.skip("the measured data folder ../shared/data is absent (set ZEUS_DATA_DIR to its path)")
    prof = tu.Profile(csv_path)
    r = Replay(fake, monkeypatch, tmp_path, prof)
    try:
        want = tu.optimum_candidates(prof.measurements(), "zeus_cost", eta=eta, world_size=prof.ngpus)
        assert len(want) == 1, f"{prof.name}: near-tie at eta {eta}: {want}"
        optimum = want.pop()
        opt = GlobalPowerLimitOptimizer(r.monitor, ZeusCost(eta, world_size=prof.ngpus), wait_steps=WAIT,
                                        warmup_steps=WARMUP, profile_steps=PROFILE, pl_step=25)
        assert opt.power_limits == [w * 1000 for w in prof.limits]
        assert min(opt.power_limits) >= r.dev.power_limit_constraints(0)[0]
        events = tu.make_events(pattern, prof.limits, WAIT, WARMUP, PROFILE)
        model = tu.expected_run(events, prof.limits, r.initial_w, WAIT, WARMUP, PROFILE, optimum)
        trace = r.drive(opt, events)

        assert r.calls() == expand(model.calls, r.n)
        # step by step: the same state and the same limit on the GPU after every hook
        assert trace == model.trace
        assert opt.state_kind == PLOState.DONE
        assert opt.optimal_power_limit == optimum * 1000
        assert opt.current_power_limit == optimum * 1000
        assert r.limits() == [optimum] * r.n
        check_measurements(opt.measurements, prof)
        for m in opt.measurements:
            assert m.power_limit >= prof.limits[-1]

        before = len(r.calls())
        opt.close()
        restored = r.calls()[before:]
        assert restored == ([] if optimum == r.initial_w else expand([r.initial_w], r.n))
        assert r.limits() == [r.initial_w] * r.n
        opt.close()  # idempotent
    finally:
        r.close()


def test_replay_from_a_lower_limit_sets_the_maximum_first_and_restores(plo_lib, fake, monkeypatch, tmp_path,
                                                                          plo_profiles):
    prof = tu.Profile(plo_profiles[0])
    start = prof.limits[-2]
    r = Replay(fake, monkeypatch, tmp_path, prof, initial_w=start)
    try:
        assert r.initial_w == start
        opt = GlobalPowerLimitOptimizer(r.monitor, Energy(), wait_steps=0, warmup_steps=0, profile_steps=PROFILE)
        # The maximum goes on at start (a change here, since the GPU was lower).
        assert r.calls() == expand([prof.limits[0]], r.n)
        optimum = tu.optimum_candidates(prof.measurements(), "energy").pop()
        events = tu.make_events("profiling", prof.limits, 0, 0, PROFILE)
        model = tu.expected_run(events, prof.limits, start, 0, 0, PROFILE, optimum)
        assert r.drive(opt, events) == model.trace
        assert r.calls() == expand(model.calls, r.n)
        check_measurements(opt.measurements, prof)
        opt.close()
        assert r.limits() == [start] * r.n
        assert r.calls()[-r.n:] == expand([start], r.n)
    finally:
        r.close()


def test_warmup_zero_profiles_from_the_step_that_sets_the_limit(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    prof = tu.Profile(plo_profiles[0])
    r = Replay(fake, monkeypatch, tmp_path, prof)
    try:
        opt = GlobalPowerLimitOptimizer(r.monitor, Time(), wait_steps=2, warmup_steps=0, profile_steps=PROFILE)
        steps = 0
        while opt.state_kind != PLOState.DONE:
            opt.on_step_begin()
            r.fake.work_all(r.n, 1.0)
            steps += 1
            assert steps < 10000
        # wait_steps + 1 step begins, then exactly profile_steps per limit, no warm-up.
        assert steps == 2 + 1 + PROFILE * len(prof.limits)
        check_measurements(opt.measurements, prof)
        assert opt.optimal_power_limit == tu.optimum_candidates(prof.measurements(), "time").pop() * 1000
        opt.close()
    finally:
        r.close()


def test_profile_file_is_saved_and_reloaded_with_every_selector(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    for path in plo_profiles:
        prof = tu.Profile(path)
        sub = tmp_path / prof.name.replace(",", "_")
        sub.mkdir()
        saved = str(sub / "profile.json")
        r = Replay(fake, monkeypatch, sub, prof)
        try:
            opt = GlobalPowerLimitOptimizer(r.monitor, ZeusCost(0.5, prof.ngpus), profile_path=saved)
            assert not os.path.exists(saved)
            r.drive(opt, tu.make_events("never", prof.limits, WAIT, WARMUP, PROFILE))
            assert opt.state_kind == PLOState.DONE
            opt.close()
            with open(saved) as f:
                doc = json.load(f)
            assert sorted(doc) == ["measurements"]
            assert [sorted(m) for m in doc["measurements"]] == [["energy", "power_limit", "time"]] * len(prof.limits)
            check_measurements([PowerLimitMeasurement(**m) for m in doc["measurements"]], prof)
            check_measurements(pl.load_profile(saved), prof)

            meas = prof.measurements()
            cases = [(Energy(), tu.optimum_candidates(meas, "energy")),
                     (Time(), tu.optimum_candidates(meas, "time"))]
            cases += [(MaxSlowdownConstraint(f), tu.optimum_candidates(meas, "max_slowdown", factor=f))
                      for f in FACTORS]
            cases += [(ZeusCost(eta, prof.ngpus), tu.optimum_candidates(meas, "zeus_cost", eta=eta,
                                                                        world_size=prof.ngpus)) for eta in ETAS]
            for sel, want in cases:
                assert len(want) == 1, (prof.name, sel, want)
                before = len(r.calls())
                opt = GlobalPowerLimitOptimizer(r.monitor, sel, profile_path=saved)
                # Done at once, with the optimum applied and nothing profiled.
                assert opt.state_kind == PLOState.DONE, sel
                assert opt.optimal_power_limit // 1000 in want, (prof.name, type(sel).__name__, vars(sel))
                assert r.limits() == [opt.optimal_power_limit // 1000] * r.n
                applied = r.calls()[before:]
                w = opt.optimal_power_limit // 1000
                # set at construction on every GPU, as the original; NVML writes only a change
                assert applied == expand(tu.nvml_writes([w], r.initial_w), r.n)
                opt.on_step_begin()
                opt.on_epoch_end()
                assert r.calls()[before:] == applied  # Done does nothing
                # the selector's own select() agrees with the optimizer
                assert sel.select(pl.load_profile(saved)) == w
                opt.close()
                assert r.limits() == [r.initial_w] * r.n
        finally:
            r.close()


def test_done_reports_contenders_and_confidence(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    """Issue 37: Done carries the limits the choice could not tell apart and the confidence it
    reached: noiseless steps 1.0 and none (and the original's file exactly); 5 % seeded jitter a
    confidence below 1 with the file's "decision" saying the same; the original's profiling none."""
    import random

    prof = tu.Profile(plo_profiles[0])
    for mode, jitter in (("robust", 0.0), ("robust", 0.05), ("original", 0.05)):
        sub = tmp_path / f"{mode}-{jitter}"
        sub.mkdir()
        saved = str(sub / "profile.json")
        monkeypatch.setenv("ZEUS_PLO_PROFILING", mode)
        r = Replay(fake, monkeypatch, sub, prof)
        rng = random.Random(7)
        try:
            opt = GlobalPowerLimitOptimizer(r.monitor, Time(), wait_steps=1, warmup_steps=3, profile_steps=10,
                                            profile_path=saved)
            for _ in range(2000):
                if opt.state_kind == PLOState.DONE:
                    break
                opt.on_step_begin()
                r.fake.work_all(r.n, round(1.0 + jitter * rng.gauss(0, 1), 3))
                opt.on_step_end()
            done = opt.state
            assert isinstance(done, Done)
            assert done == Done(optimal_power_limit=done.optimal_power_limit)  # equality as the original's
            with open(saved) as f:
                doc = json.load(f)
            limits_mw = opt.power_limits
            if mode == "original":
                assert done.confidence is None and done.contenders == []
                assert sorted(doc) == ["measurements"]
            elif jitter == 0:
                assert done.confidence == 1.0 and done.contenders == []
                assert sorted(doc) == ["measurements"]
            else:
                assert 0 <= done.confidence < 1
                assert all(c in limits_mw and c != done.optimal_power_limit for c in done.contenders)
                assert doc["decision"]["optimal_power_limit_w"] * 1000 == done.optimal_power_limit
                assert [c * 1000 for c in doc["decision"]["contenders_w"]] == done.contenders
                assert math.isclose(doc["decision"]["confidence"], done.confidence, rel_tol=1e-9)
            assert opt.confidence == done.confidence and opt.contenders == done.contenders
            opt.close()
            if mode == "robust" and jitter:
                # Loaded with the same selector, the file's report is told again.
                again = GlobalPowerLimitOptimizer(r.monitor, Time(), profile_path=saved)
                assert again.state.optimal_power_limit == done.optimal_power_limit
                assert again.state.contenders == done.contenders
                assert math.isclose(again.state.confidence, done.confidence, rel_tol=1e-9)
                again.close()
        finally:
            r.close()


def test_confidence_mode_keyword_measures_until_settled(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    """Issue 37: confidence=0.95 (a keyword of GlobalPowerLimitOptimizer) measures until the choice
    is settled at that confidence (not the default's 1.5x budget) on seeded jitter; bad values are
    ValueErrors."""
    import random

    prof = tu.Profile(plo_profiles[0])
    steps = {}
    for conf in (None, 0.95):
        sub = tmp_path / f"c{conf}"
        sub.mkdir()
        r = Replay(fake, monkeypatch, sub, prof)
        rng = random.Random(3)
        try:
            opt = GlobalPowerLimitOptimizer(r.monitor, Time(), wait_steps=1, warmup_steps=3, profile_steps=10,
                                            confidence=conf, max_profile_steps=2000 if conf else None)
            n = 0
            while opt.state_kind != PLOState.DONE and n < 3000:
                opt.on_step_begin()
                r.fake.work_all(r.n, round(1.0 + 0.05 * rng.gauss(0, 1), 3))
                opt.on_step_end()
                n += 1
            assert opt.state_kind == PLOState.DONE
            steps[conf] = n
            assert opt.confidence is not None
            if conf:
                assert opt.confidence_target == 0.95
                assert opt.confidence >= 0.95  # settled well before the cap of 2000 steps
            opt.close()
        finally:
            r.close()
    assert steps[0.95] != steps[None]  # the mode decided when to stop, not the 1.5x budget
    two = tu.Profile(plo_profiles[0])
    r = Replay(fake, monkeypatch, tmp_path, two)
    try:
        for bad in (0, 1, 1.5, -0.1):
            with pytest.raises(ValueError, match="confidence"):
                GlobalPowerLimitOptimizer(r.monitor, Time(), confidence=bad)
        with pytest.raises(ValueError, match="max_profile_steps"):
            GlobalPowerLimitOptimizer(r.monitor, Time(), confidence=0.9, max_profile_steps=-1)
    finally:
        r.close()


# ---- selectors and zeus_cost --------------------------------------------------------------------


def test_selectors_choose_as_specified(plo_lib):
    meas = [PowerLimitMeasurement(power_limit=300, energy=100.0, time=10.0), PowerLimitMeasurement(power_limit=250, energy=80.0, time=10.5),
            PowerLimitMeasurement(power_limit=200, energy=70.0, time=12.0), PowerLimitMeasurement(power_limit=150, energy=75.0, time=16.0)]
    assert Energy().select(meas) == 200
    assert Time().select(meas) == 300
    assert MaxSlowdownConstraint(1.0).select(meas) == 300
    assert MaxSlowdownConstraint(1.05).select(meas) == 250
    assert MaxSlowdownConstraint(1.2).select(meas) == 200
    assert MaxSlowdownConstraint(100).select(meas) == 150
    # eta = 1 is energy, eta = 0 is time; max_power = 300 W x world_size
    assert ZeusCost(1.0).select(meas) == 200
    assert ZeusCost(0.0).select(meas) == 300
    costs = {m.power_limit: 0.5 * m.energy + 0.5 * 300 * 2 * m.time for m in meas}
    assert ZeusCost(0.5, world_size=2).select(meas) == min(costs, key=costs.get)
    # ties go to the measurement listed first, as the original's min()
    tie = [PowerLimitMeasurement(power_limit=300, energy=50.0, time=1.0),
           PowerLimitMeasurement(power_limit=200, energy=50.0, time=2.0)]
    assert Energy().select(tie) == 300
    assert Energy().select(tie[::-1]) == 200
    # dicts in the profile file's shape are accepted too
    assert Energy().select([{"power_limit": 300, "energy": 5, "time": 1},
                            {"power_limit": 100, "energy": 9, "time": 3}]) == 300
    with pytest.raises(ValueError, match="no measurements"):
        Energy().select([])


@pytest.mark.parametrize("make, needle", [
    (lambda: ZeusCost(-0.1), "eta"), (lambda: ZeusCost(1.01), "eta"), (lambda: ZeusCost(float("nan")), "eta"),
    (lambda: ZeusCost(0.5, world_size=0), "world_size"), (lambda: MaxSlowdownConstraint(0.99), "factor"),
    (lambda: MaxSlowdownConstraint(float("nan")), "factor"), (lambda: ZeusCost(0.5, world_size=-1), "world_size"),
])
def test_selector_parameters_out_of_range_are_value_errors(plo_lib, make, needle):
    with pytest.raises(ValueError, match=needle) as ei:
        make()
    assert "range" in str(ei.value) or "expected" in str(ei.value)


def test_selector_parameter_types_are_checked(plo_lib):
    with pytest.raises(TypeError):
        ZeusCost("0.5")
    with pytest.raises(TypeError):
        ZeusCost(0.5, world_size=1.5)
    with pytest.raises(TypeError):
        MaxSlowdownConstraint(None)


def test_zeus_cost_matches_the_formula(plo_lib):
    assert zeus_cost(100.0, 2.0, 0.5, 300) == pytest.approx(0.5 * 100 + 0.5 * 300 * 2)
    assert zeus_cost(100.0, 2.0, 1.0, 300) == pytest.approx(100.0)
    assert zeus_cost(100.0, 2.0, 0.0, 300) == pytest.approx(600.0)
    with pytest.raises(ValueError, match="eta_knob"):
        zeus_cost(1, 1, 1.5, 300)
    with pytest.raises(ValueError, match="eta_knob"):
        zeus_cost(1, 1, -0.5, 300)
    with pytest.raises(TypeError):
        zeus_cost("1", 1, 0.5, 300)


# ---- bad input ------------------------------------------------------------------------------------


@pytest.fixture
def two_gpus(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    monkeypatch.setenv("FAKE_NVML_LOG", str(tmp_path / "nvml.log"))
    dev = fake.devices(all_devices=True)
    mon = ZeusMonitor(devices=dev, cpu_indices=[])
    yield dev, mon, str(tmp_path / "nvml.log")
    mon.close()
    dev.close()


@pytest.mark.parametrize("kw, needle", [
    ({"wait_steps": -1}, "wait_steps"), ({"warmup_steps": -1}, "warmup_steps"),
    ({"profile_steps": 0}, "profile_steps"), ({"profile_steps": -3}, "profile_steps"),
    ({"pl_step": 0}, "pl_step"), ({"pl_step": -25}, "pl_step"), ({"pl_step": 10**7}, "pl_step"),
])
def test_bad_steps_are_value_errors_naming_the_parameter(plo_lib, two_gpus, kw, needle):
    dev, mon, log = two_gpus
    with pytest.raises(ValueError, match=needle):
        GlobalPowerLimitOptimizer(mon, **kw)
    assert tu.read_setter_log(log) == []  # nothing was touched


@pytest.mark.parametrize("kw", [{"wait_steps": 1.5}, {"warmup_steps": "10"}, {"profile_steps": None},
                                {"pl_step": 2.5}, {"wait_steps": True}])
def test_step_types_are_checked(plo_lib, two_gpus, kw):
    with pytest.raises(TypeError):
        GlobalPowerLimitOptimizer(two_gpus[1], **kw)


def test_selector_must_be_an_optimum_selector(plo_lib, two_gpus):
    with pytest.raises(TypeError, match="OptimumSelector"):
        GlobalPowerLimitOptimizer(two_gpus[1], optimum_selector="energy")


def test_non_uniform_power_limit_ranges_are_an_error(plo_lib, fake, monkeypatch, tmp_path):
    model = tmp_path / "two.json"
    model.write_text(json.dumps({"gpus": [{"model": "dvfs", "min_power_limit_w": 100, "max_power_limit_w": 300},
                                          {"model": "dvfs", "min_power_limit_w": 150, "max_power_limit_w": 300}]}))
    monkeypatch.setenv("ZEUS_SIM_MODEL_FILE", str(model))
    with fake.devices(all_devices=True) as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        with pytest.raises(ValueError, match="range"):
            GlobalPowerLimitOptimizer(mon)
        # the GPUs that agree are fine
        GlobalPowerLimitOptimizer(ZeusMonitor(devices=dev, gpu_indices=[1], cpu_indices=[])).close()
        mon.close()


@pytest.mark.parametrize("content, needle", [
    ("", "empty"),
    ('{"measurements": [', "profile"),
    ("[1, 2]", "object"),
    ('{"other": []}', "measurements"),
    ('{"measurements": []}', "empty"),
    ('{"measurements": [{"power_limit": 300, "energy": 1.0}]}', "time"),
    ('{"measurements": [{"power_limit": "300", "energy": 1.0, "time": 2.0}]}', "power_limit"),
    ('{"measurements": [{"power_limit": 300, "energy": -1.0, "time": 2.0}]}', "energy"),
])
def test_corrupt_profile_files_are_value_errors_and_never_overwritten(plo_lib, two_gpus, tmp_path, content, needle):
    dev, mon, log = two_gpus
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=needle) as ei:
        GlobalPowerLimitOptimizer(mon, profile_path=path)
    assert str(path) in str(ei.value)
    with pytest.raises(ValueError):
        pl.load_profile(path)
    assert path.read_text() == content
    assert tu.read_setter_log(log) == []


def test_missing_profile_file_is_file_not_found_for_load_profile(plo_lib, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.json"):
        pl.load_profile(tmp_path / "nope.json")


def test_save_profile_round_trips_and_rejects_nothing_to_save(plo_lib, tmp_path):
    m = [PowerLimitMeasurement(power_limit=300, energy=10.5, time=1.25), PowerLimitMeasurement(power_limit=275, energy=9.0, time=1.5)]
    pl.save_profile(tmp_path / "p.json", m)
    assert pl.load_profile(tmp_path / "p.json") == m
    with pytest.raises(ValueError):
        pl.save_profile(tmp_path / "q.json", [])
    assert not (tmp_path / "q.json").exists()


def test_permission_error_when_the_gpu_refuses(plo_lib, fake, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_NVML_INJECT",
                       "nvmlDeviceSetPowerManagementLimit:NO_PERMISSION;nvmlDeviceSetPersistenceMode:NO_PERMISSION")
    with fake.devices(all_devices=True) as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        # The maximum is set at construction (as the original), though NVML writes nothing for it on
        # a GPU already there, as the original's NVML class; persistence mode goes on there too, so
        # the refusal surfaces at once.
        with pytest.raises(PermissionError, match="(?i)permission|root|CAP_SYS_ADMIN"):
            GlobalPowerLimitOptimizer(mon, wait_steps=0, warmup_steps=0)
        mon.close()


def test_persistence_mode_is_on_while_optimizing(plo_lib, two_gpus):
    dev, mon, _ = two_gpus
    opt = GlobalPowerLimitOptimizer(mon)
    assert all(dev.get_persistence_mode(g) for g in range(dev.gpu_count()))
    opt.close()


def test_closed_optimizer_and_closed_monitor(plo_lib, two_gpus):
    dev, mon, _ = two_gpus
    opt = GlobalPowerLimitOptimizer(mon)
    opt.close()
    with pytest.raises(ValueError, match="closed"):
        opt.on_step_begin()
    with pytest.raises(ValueError, match="closed"):
        opt.on_epoch_end()
    with pytest.raises(ValueError, match="closed"):
        opt.state
    opt2 = GlobalPowerLimitOptimizer(mon)
    mon2 = opt2.monitor
    mon2.close()  # closes the optimizer first
    with pytest.raises(ValueError, match="closed"):
        opt2.on_step_begin()
    with pytest.raises(ValueError, match="closed"):
        GlobalPowerLimitOptimizer(mon2)


# ---- a selector written in Python ------------------------------------------------------------------


class Slowest(OptimumSelector):
    def __init__(self):
        self.seen = None

    def select(self, measurements):
        self.seen = list(measurements)
        return min(m.power_limit for m in measurements)


class Broken(OptimumSelector):
    def select(self, measurements):
        raise KeyError("no such thing")


class NotALimit(OptimumSelector):
    def select(self, measurements):
        return 123


def _run_to_done(opt, fake, n, limit=20000):
    for _ in range(limit):
        if opt.state_kind == PLOState.DONE:
            return
        opt.on_step_begin()
        fake.work_all(n, 1.0)
    raise AssertionError("the optimizer never finished")


def test_python_selector_is_called_with_the_measurements(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    prof = tu.Profile(plo_profiles[0])
    r = Replay(fake, monkeypatch, tmp_path, prof)
    try:
        sel = Slowest()
        opt = GlobalPowerLimitOptimizer(r.monitor, sel, warmup_steps=2)
        _run_to_done(opt, fake, r.n)
        assert opt.optimal_power_limit == prof.limits[-1] * 1000
        check_measurements(sel.seen, prof)
        opt.close()
    finally:
        r.close()


@pytest.mark.parametrize("sel, exc, needle", [(Broken(), KeyError, "no such thing"), (NotALimit(), ValueError, "123")])
def test_python_selector_failures_surface(plo_lib, fake, monkeypatch, tmp_path, plo_profiles, sel, exc, needle):
    prof = tu.Profile(plo_profiles[0])
    r = Replay(fake, monkeypatch, tmp_path, prof)
    try:
        opt = GlobalPowerLimitOptimizer(r.monitor, sel, warmup_steps=0)
        with pytest.raises(exc, match=needle):
            _run_to_done(opt, fake, r.n)
        opt.close()
        assert r.limits() == [r.initial_w] * r.n
    finally:
        r.close()


# ---- the Done fast path ---------------------------------------------------------------------------


def test_done_returns_without_calling_c(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    prof = tu.Profile(plo_profiles[0])
    r = Replay(fake, monkeypatch, tmp_path, prof)
    try:
        opt = GlobalPowerLimitOptimizer(r.monitor, Energy(), warmup_steps=0, profile_steps=PROFILE)
        _run_to_done(opt, fake, r.n)

        def boom(*_):
            raise AssertionError("crossed into C in Done")
        opt._c_step_begin = opt._c_get_state = boom
        monkeypatch.setattr(opt, "_lib", None)
        for _ in range(10):
            opt.on_step_begin()
            opt.on_step_end()
            opt.on_epoch_end()
            opt.on_epoch_begin()
        monkeypatch.undo()
        opt.close()
    finally:
        r.close()


# ---- signals and exit ---------------------------------------------------------------------------


_CHILD = textwrap.dedent("""
    import os, signal, sys
    import zeusc_testutil as tu
    from zeusc.device import Devices
    from zeusc.monitor import ZeusMonitor
    from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, PLOState
    fake = tu.FakeNvml(tu.fake_nvml_path())
    dev = fake.devices(all_devices=True)  # first: the fake's node lives while a handle is open
    n = dev.gpu_count()
    with fake.devices(all_devices=True, keep_settings_on_close=True) as other:
        for g in range(n):
            other.set_power_limit(g, 175000)
    mon = ZeusMonitor(devices=dev, cpu_indices=[])
    opt = GlobalPowerLimitOptimizer(mon, wait_steps=0, warmup_steps=1, profile_steps=5)
    seen = set()
    for step in range(10000):
        opt.on_step_begin()
        fake.work_all(n, 1.0)
        if opt.state_kind == PLOState.PROFILING:
            seen.add(opt.current_power_limit)
        if len(seen) == 3 and opt.state_kind == PLOState.PROFILING:
            print("limit", opt.current_power_limit, flush=True)
            MODE
    print("not interrupted", flush=True)
""")


@pytest.mark.parametrize("mode, action, rc", [
    ("sigterm", "os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM),
    ("keyboard", "raise KeyboardInterrupt", -signal.SIGINT),  # Python re-raises SIGINT at exit
    ("exit", "sys.exit(3)", 3),
])
def test_interrupted_run_puts_the_gpus_back(plo_lib, fake, tmp_path, plo_profiles, mode, action, rc):
    prof = tu.Profile(plo_profiles[-1])
    log = str(tmp_path / "nvml.log")
    code = _CHILD.replace("MODE", action)
    p = tu.run_py(code, env={"ZEUS_SIM_MODEL_FILE": prof.path, "FAKE_NVML_LOG": log,
                             "ZEUSC_TEST_FAKE_NVML": fake.path})
    assert p.returncode == rc, p.stdout + p.stderr
    assert "limit" in p.stdout and "not interrupted" not in p.stdout, p.stdout + p.stderr
    calls = tu.read_setter_log(log)
    changed = {mw for _, mw in calls} - {175000}
    assert len(changed) >= 3, calls  # the optimizer did move the limits
    last = {}
    for g, mw in calls:
        last[g] = mw
    assert last == {g: 175000 for g in range(prof.ngpus)}, calls[-6:]


def test_program_sigterm_handler_is_left_alone(plo_lib, fake, tmp_path, plo_profiles):
    prof = tu.Profile(plo_profiles[0])
    code = textwrap.dedent("""
        import signal
        import zeusc_testutil as tu
        from zeusc.monitor import ZeusMonitor
        from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer
        def mine(s, f): pass
        signal.signal(signal.SIGTERM, mine)
        fake = tu.FakeNvml(tu.fake_nvml_path())
        dev = fake.devices(all_devices=True)
        opt = GlobalPowerLimitOptimizer(ZeusMonitor(devices=dev, cpu_indices=[]))
        assert signal.getsignal(signal.SIGTERM) is mine
        print("ok")
    """)
    p = tu.run_py(code, env={"ZEUS_SIM_MODEL_FILE": prof.path, "ZEUSC_TEST_FAKE_NVML": fake.path})
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr


def test_few_limits_time_measures_the_first_windows_limit_again(plo_lib, fake, monkeypatch, tmp_path, plo_profiles):
    """Issue 37's black-box hole: on a GPU with few limits (bert's A40 profile cut to 250-100 W, 7
    limits like a V100), wait 1, warm-up 3, profile 10, steps with 5 % seeded jitter, the first
    window 5 % slow and 2 % drift over the sweep, the Time selector's best limit (250 W, 3.2 % ahead
    of 225 W) is the first window's. Within the 1.5x budget no palindrome fits, and before the fix
    nothing was measured again, so the slow first window chose 225 W in nearly every run. The
    default now measures the two that decide once more: right in >= 9 of 10 seeds, within 1.5x the
    original's steps; the original's profiling is right in at most 3 (the bench: 59/60 and 11/60)."""
    import random

    src = next((p for p in plo_profiles if os.path.basename(p).startswith("A40+bert-base-uncased")), None)
    if src is None:
        pytest.skip("no A40 bert-base-uncased profile in plo-profiles")
    import csv

    cut = tmp_path / "bert-7-limits.csv"
    with open(src, newline="") as f, open(cut, "w", newline="") as g:
        rd = csv.DictReader(f)
        wr = csv.DictWriter(g, fieldnames=rd.fieldnames)
        wr.writeheader()
        for row in rd:
            if 100 <= int(row["window_name"].rsplit("_", 1)[1]) <= 250:
                wr.writerow(row)
    prof = tu.Profile(str(cut))
    assert prof.limits == [250, 225, 200, 175, 150, 125, 100]
    times = {w: t for (w, _e, t) in prof.measurements()}
    assert min(times, key=times.get) == 250 and times[225] / times[250] - 1 > 0.03
    original_steps = 1 + 1 + 7 * (3 + 10)
    right = {}
    for mode in ("robust", "original"):
        monkeypatch.setenv("ZEUS_PLO_PROFILING", mode)
        right[mode] = 0
        for seed in range(10):
            sub = tmp_path / f"{mode}-{seed}"
            sub.mkdir()
            r = Replay(fake, monkeypatch, sub, prof)
            rng = random.Random(seed)
            try:
                opt = GlobalPowerLimitOptimizer(r.monitor, Time(), wait_steps=1, warmup_steps=3, profile_steps=10,
                                                profile_path=str(sub / "profile.json"))
                step = 0
                while opt.state_kind != PLOState.DONE and step < 1000:
                    opt.on_step_begin()
                    first = opt.state_kind == PLOState.PROFILING and not opt.measurements
                    f = 1.0 + 0.05 * rng.gauss(0, 1)
                    f *= 1.05 if first else 1.0
                    f *= 1.0 + 0.02 * min(1.0, step / original_steps)
                    r.fake.work_all(r.n, round(f, 4))
                    opt.on_step_end()
                    step += 1
                assert opt.state_kind == PLOState.DONE
                if mode == "robust":
                    assert step <= 1.5 * original_steps + 1, step
                else:
                    assert step <= original_steps + 1, step
                right[mode] += opt.optimal_power_limit // 1000 == 250
                opt.close()
            finally:
                r.close()
    print(f"few limits, Time: robust {right['robust']}/10, original {right['original']}/10 right")
    assert right["robust"] >= 9, right
    assert right["original"] <= 3, right
