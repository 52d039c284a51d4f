"""Compatibility: the rest of the original's public surface, written from its documentation.

The power-limit optimizer's constructor and attributes (state classes, pl_step in mW, the
default selector, profile_path a Path, the optimum kept applied by an unassigned optimizer until
exit, the maximum set at construction), HFGlobalPowerLimitOptimizer's signature,
PowerLimitMeasurement's validation, ZeusMonitor's attributes and cancel/reset semantics, the new
modules (PowerMonitor, TemperatureMonitor, utils.metric, utils.framework, device, the python -m
entry points).
"""
from __future__ import annotations

import gc
import inspect
import json
import math
import os
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

import zeusc_testutil as tu
from zeusc.device import Devices
from zeusc.monitor import Measurement, PowerMonitor, TemperatureMonitor, ZeusMonitor
from zeusc.monitor.power import PowerDomain


# ---- the power-limit optimizer ---------------------------------------------------------------------

@pytest.fixture
def two_fake_gpus(fake, monkeypatch, tmp_path):
    monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    log = str(tmp_path / "nvml.log")
    monkeypatch.setenv("FAKE_NVML_LOG", log)
    dev = fake.devices(all_devices=True)
    yield dev, log
    dev.close()


def test_hf_optimizer_has_the_same_signature(plo_lib):
    from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, HFGlobalPowerLimitOptimizer
    g = inspect.signature(GlobalPowerLimitOptimizer.__init__)
    assert g == inspect.signature(HFGlobalPowerLimitOptimizer.__init__)
    # The original's parameters, in its order, then (issue 37, not in the original) two keyword-only
    # ones that leave every call of the original's working as before.
    assert list(g.parameters) == ["self", "monitor", "optimum_selector", "wait_steps", "warmup_steps",
                                  "profile_steps", "pl_step", "profile_path", "confidence", "max_profile_steps"]
    assert [p.default for p in list(g.parameters.values())[2:]] == [None, 1, 10, 40, 25, None, None, None]
    assert [p.kind for p in list(g.parameters.values())[8:]] == [inspect.Parameter.KEYWORD_ONLY] * 2


def test_constructor_attributes_are_the_originals(plo_lib, two_fake_gpus, tmp_path):
    from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, Ready, ZeusCost
    dev, log = two_fake_gpus
    mon = ZeusMonitor(devices=dev, cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(mon, profile_path=str(tmp_path / "p.json"))
    assert plo.pl_step == 25000  # mW, as the original keeps it
    assert isinstance(plo.profile_path, Path)
    assert isinstance(plo.optimum_selector, ZeusCost)
    assert (plo.optimum_selector.eta_knob, plo.optimum_selector.world_size) == (0.5, 2)
    assert (plo.warmup_steps, plo.profile_steps) == (10, 40)
    assert plo.power_limits == list(range(300000, 99999, -25000))
    assert plo.current_power_limit == 300000
    assert plo.measurements == []
    assert plo.state == Ready(next_power_limit=300000, steps=2)
    # the maximum was set on every GPU at construction; the GPUs were there already, so NVML was
    # asked to write nothing (as the original's NVML class)
    assert tu.read_setter_log(log) == []
    plo.close()
    mon.close()


def test_state_classes_follow_the_run(plo_lib, two_fake_gpus):
    from zeusc.optimizer.power_limit import Done, GlobalPowerLimitOptimizer, Profiling, Ready, Warmup
    dev, _ = two_fake_gpus
    mon = ZeusMonitor(devices=dev, cpu_indices=[])
    plo = GlobalPowerLimitOptimizer(mon, wait_steps=1, warmup_steps=2, profile_steps=3, pl_step=100)
    seen = []
    for _ in range(30):
        plo.on_step_begin()
        dev.sim_node().idle(0.1) if dev.backend == "sim" else None
        seen.append(plo.state)
    assert seen[0] == Ready(next_power_limit=300000, steps=1)
    assert seen[1] == Warmup(current_power_limit=300000, steps=2)
    assert seen[3] == Profiling(current_power_limit=300000, steps=3)
    assert seen[6] == Warmup(current_power_limit=200000, steps=2)
    assert isinstance(seen[-1], Done) and seen[-1].optimal_power_limit in (300000, 200000, 100000)
    assert [s.name for s in seen[:4]] == ["READY", "WARMUP", "WARMUP", "PROFILING"]
    plo.close()
    mon.close()


def test_unassigned_optimizer_keeps_the_loaded_optimum_until_exit(plo_lib, fake, tmp_path, plo_profiles):
    """GlobalPowerLimitOptimizer(monitor, profile_path=saved) with no reference kept: the optimum
    stays on the GPUs through garbage collection; at exit the GPUs get their limits back."""
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"measurements": [
        {"power_limit": 300, "energy": 1000.0, "time": 10.0}, {"power_limit": 175, "energy": 600.0, "time": 12.0},
        {"power_limit": 100, "energy": 900.0, "time": 30.0}]}))
    log = tmp_path / "nvml.log"
    code = textwrap.dedent(f"""
        import gc
        import zeusc_testutil as tu
        from zeusc.monitor import ZeusMonitor
        from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, Energy
        fake = tu.FakeNvml(tu.fake_nvml_path())
        dev = fake.devices(all_devices=True)
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        GlobalPowerLimitOptimizer(mon, Energy(), profile_path={str(profile)!r})
        gc.collect()
        print("limits", [dev.get_power_limit(g) for g in range(dev.gpu_count())], flush=True)
    """)
    p = tu.run_py(code, env={"ZEUS_SIM_GPUS": "2", "FAKE_NVML_LOG": str(log), "ZEUSC_TEST_FAKE_NVML": fake.path})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "limits [175000, 175000]" in p.stdout
    # and at exit the limits from before (the maximum) came back
    calls = tu.read_setter_log(str(log))
    assert calls[:2] == [(0, 175000), (1, 175000)]
    assert calls[-2:] == [(0, 300000), (1, 300000)]


@pytest.mark.parametrize("kw, exc", [
    ({"power_limit": -300, "energy": 1.0, "time": 1.0}, ValueError),
    ({"power_limit": 300, "energy": -1.0, "time": 1.0}, ValueError),
    ({"power_limit": 300, "energy": 1.0, "time": 0.0}, ValueError),
    ({"power_limit": 0, "energy": 1.0, "time": 1.0}, ValueError),
    ({"power_limit": 300.5, "energy": 1.0, "time": 1.0}, TypeError),
    ({"power_limit": 300, "energy": "x", "time": 1.0}, TypeError),
])
def test_power_limit_measurement_validates_as_the_original(plo_lib, kw, exc):
    from zeusc.optimizer.power_limit import PowerLimitMeasurement
    with pytest.raises(exc):
        PowerLimitMeasurement(**kw)


def test_power_limit_measurement_takes_keywords_only(plo_lib):
    from zeusc.optimizer.power_limit import PowerLimitMeasurement
    with pytest.raises(TypeError):
        PowerLimitMeasurement(300, 1.0, 1.0)
    m = PowerLimitMeasurement(power_limit=300, energy=1, time=2.5)
    assert (m.power_limit, m.energy, m.time) == (300, 1.0, 2.5)
    assert m == PowerLimitMeasurement(power_limit=300.0, energy=1.0, time=2.5)
    assert m.dict() == {"power_limit": 300, "energy": 1.0, "time": 2.5}


def test_selectors_keep_the_first_of_ties_and_the_originals_messages(plo_lib):
    from zeusc.optimizer.power_limit import (Energy, MaxSlowdownConstraint, PowerLimitMeasurement, Time,
                                             ZeusCost)
    m = [PowerLimitMeasurement(power_limit=w, energy=e, time=t) for w, e, t in
         [(300, 100.0, 1.0), (250, 100.0, 1.0), (200, 90.0, 1.2), (150, 90.0, 1.5)]]
    assert Energy().select(m) == 200           # 200 and 150 tie: the first listed
    assert Time().select(m) == 300             # 300 and 250 tie: the first listed
    assert ZeusCost(1.0).select(m) == 200
    assert MaxSlowdownConstraint(1.0).select(m) == 250  # the lowest qualifying limit
    with pytest.raises(ValueError, match="eta_knob must be between 0 and 1"):
        ZeusCost(1.5)
    with pytest.raises(ValueError, match="world_size must be greater than or equal to 1"):
        ZeusCost(0.5, 0)
    with pytest.raises(ValueError, match="max_slowdown_factor must be greater than or equal to 1.0"):
        MaxSlowdownConstraint(0.5)


def test_optimizer_parameter_errors_are_the_originals(plo_lib, two_fake_gpus):
    from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer
    dev, log = two_fake_gpus
    mon = ZeusMonitor(devices=dev, cpu_indices=[])
    for kw, msg in [({"wait_steps": -1}, "wait_steps must be non-negative."),
                    ({"warmup_steps": -1}, "warmup_steps must be non-negative."),
                    ({"profile_steps": 0}, "profile_steps must be positive."),
                    ({"pl_step": 0}, "pl_step must be positive.")]:
        with pytest.raises(ValueError) as ei:
            GlobalPowerLimitOptimizer(mon, **kw)
        assert str(ei.value) == msg
    assert tu.read_setter_log(log) == []
    mon.close()


# ---- ZeusMonitor ---------------------------------------------------------------------------------------

def _rapl_tree(root: Path, packages=2):
    for p in range(packages):
        z = root / f"intel-rapl:{p}"
        z.mkdir(parents=True)
        (z / "name").write_text(f"package-{p}\n")
        (z / "energy_uj").write_text(str(1_000_000 * (p + 1)) + "\n")
        (z / "max_energy_range_uj").write_text("262143328850\n")
        if p == 0:
            d = root / f"intel-rapl:{p}:0"
            d.mkdir()
            (d / "name").write_text("dram\n")
            (d / "energy_uj").write_text("5000000\n")
            (d / "max_energy_range_uj").write_text("65712999613\n")


def test_measurement_total_energy_is_gpu_only_and_cancel_gives_empty_cpu(sim_env, monkeypatch, tmp_path):
    root = tmp_path / "rapl"
    _rapl_tree(root)
    monkeypatch.setenv("ZEUS_RAPL_ROOT", str(root))
    sim_env(gpus=1, clock="virtual")
    with Devices(backend="sim", all_devices=True) as dev:
        node = dev.sim_node()
        mon = ZeusMonitor(devices=dev, cpu_indices=[0, 1])
        assert len(mon.cpus) >= 2
        mon.begin_window("w", sync_execution=False)
        st = mon.measurement_states["w"]
        assert st.cpu_energy == {0: pytest.approx(1.0), 1: pytest.approx(2.0)}
        assert st.dram_energy == {0: pytest.approx(5.0)}
        node.idle(1.0)
        (root / "intel-rapl:0" / "energy_uj").write_text("4000000\n")  # +3 J on package 0
        m = mon.end_window("w", sync_execution=False)
        assert m.cpu_energy == {0: pytest.approx(3.0), 1: pytest.approx(0.0)}
        assert m.dram_energy == {0: pytest.approx(0.0)}
        assert m.total_energy == pytest.approx(sum(m.gpu_energy.values()))  # GPUs only
        assert m.soc_energy is None
        mon.begin_window("c", sync_execution=False)
        c = mon.end_window("c", sync_execution=False, cancel=True)
        assert c == Measurement(time=0.0, gpu_energy={0: 0.0}, cpu_energy={0: 0.0, 1: 0.0})
        mon.close()
        none = ZeusMonitor(devices=dev, cpu_indices=[])
        none.begin_window("c", sync_execution=False)
        assert none.end_window("c", sync_execution=False, cancel=True).cpu_energy == {}
        none.close()


def test_monitor_attributes_reset_windows_and_log_truncation(sim_env, tmp_path):
    sim_env(gpus=2, clock="virtual")
    log = tmp_path / "sub" / "log.csv"
    with Devices(backend="sim", all_devices=True) as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[], log_file=log)
        assert len(mon.gpus) == 2 and mon.gpus.get_name(0).startswith("Zeus Simulated GPU")
        assert mon.soc_is_present is False
        with pytest.raises(ValueError):
            mon.soc.beginWindow("x")
        for k in ("a", "b", "c"):
            mon.begin_window(k, sync_execution=False)
        assert list(mon.measurement_states) == ["a", "b", "c"]
        mon.reset_windows()
        assert len(mon.measurement_states) == 0
        with pytest.raises(ValueError, match="does not exist"):
            mon.end_window("a", sync_execution=False)
        mon.begin_window("a", sync_execution=False)
        mon.end_window("a", sync_execution=False)
        before = time.time()
        mon.close()
        assert len(log.read_text().splitlines()) == 2
        # a second monitor on the same file starts it over (truncates), as the original
        mon2 = ZeusMonitor(devices=dev, cpu_indices=[], log_file=log)
        mon2.close()
        assert log.read_text().splitlines() == ["start_time,window_name,elapsed_time,gpu0_energy,gpu1_energy"]
        assert abs(before - time.time()) < 60


# ---- power and temperature timelines -----------------------------------------------------------------

def test_power_monitor_timelines_energy_and_power(sim_env):
    sim_env(gpus=2, clock="wall")
    with Devices(backend="sim", all_devices=True) as dev:
        node = dev.sim_node()
        pm = PowerMonitor(update_period=0.01, devices=dev)
        assert pm.gpu_indices == [0, 1]
        assert pm.supported_domains == [PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE]
        t0 = time.time()
        e0 = node.true_energy(0)
        node.work(0, 4)  # ~0.2 s of work on GPU 0
        node.idle(0.1)
        t1 = time.time()
        e1 = node.true_energy(0)
        time.sleep(0.03)
        energy = pm.get_energy(t0, t1)
        assert set(energy) == {0, 1}
        assert energy[0] == pytest.approx(e1 - e0, rel=0.1)
        assert energy[1] == pytest.approx(30.0 * (t1 - t0), rel=0.1)  # idle all along
        tl = pm.get_power_timeline("device_instant", gpu_index=0)
        assert list(tl) == [0]
        values = [w for _, w in tl[0]]
        assert max(values) > 100 and values[0] == 30.0
        assert all(a != b for a, b in zip(values, values[1:]))  # changes only, as the original
        assert all(t1 >= t0 for (t0, _), (t1, _) in zip(tl[0], tl[0][1:]))
        assert set(pm.get_all_power_timelines()) == {"device_instant", "device_average"}
        assert pm.get_power() == {0: 30.0, 1: 30.0}
        assert pm.get_power(time=t0 - 100)[0] == 30.0
        with pytest.raises(ValueError, match="memory_average is not supported"):
            pm.get_power_timeline("memory_average")
        with pytest.raises(ValueError, match="memory_average is not being monitored"):
            pm.get_power(power_domain="memory_average")
        assert pm.get_energy(t1 + 1000, t1 + 2000) is None
        pm.stop()
        n = len(pm.get_power_timeline(PowerDomain.DEVICE_AVERAGE)[0])
        time.sleep(0.05)
        assert len(pm.get_power_timeline(PowerDomain.DEVICE_AVERAGE)[0]) == n  # stopped
        with pytest.raises(ValueError, match="must be either `None` or non-empty"):
            PowerMonitor(gpu_indices=[], devices=dev)
        pm.close()


def test_closing_devices_first_stops_the_sampling_threads(sim_env):
    # A failed assertion inside `with Devices(...)` leaves the monitors open when the handle
    # closes; their C threads must be stopped first, not left reading a freed handle.
    sim_env(gpus=2, clock="wall")
    dev = Devices(backend="sim", all_devices=True)
    pm = PowerMonitor(update_period=0.001, devices=dev)
    tm = TemperatureMonitor(update_period=0.001, devices=dev)
    time.sleep(0.02)
    dev.close()
    with pytest.raises(ValueError, match="PowerMonitor is closed"):
        pm.sample()
    with pytest.raises(ValueError, match="TemperatureMonitor is closed"):
        tm.sample()
    time.sleep(0.02)  # a thread still reading the freed handle would fault here (or under ASan)
    pm.close()
    tm.close()


def test_temperature_monitor(sim_env):
    sim_env(gpus=1, clock="wall")
    with Devices(backend="sim", all_devices=True) as dev:
        node = dev.sim_node()
        tm = TemperatureMonitor(update_period=0.05, devices=dev)
        node.work(0, 20)  # ~1 s at full power: the die heats up
        time.sleep(0.1)
        now = tm.get_temperature()[0]  # before the timeline: a sample may land between the two
        tl = tm.get_temperature_timeline()
        temps = [c for _, c in tl[0]]
        assert temps[0] == 35 and max(temps) > 60
        assert all(isinstance(c, int) for c in temps)
        assert now in temps[-2:]
        tm.stop()
        tm.close()


# ---- utils -----------------------------------------------------------------------------------------------

def test_metric_energy_and_avg_power_of_a_power_log(tmp_path):
    from zeusc.utils.metric import avg_power, energy
    log = tmp_path / "power.csv"
    # 100 W for 2 s then 200 W for 2 s, every 0.5 s; the last line is left out as the original's footer
    lines = ["Time,Power"]
    for i in range(10):
        w = 100000 if i <= 4 else 200000
        lines.append(f"2022-07-13 02:07:{30 + i * 0.5:09.6f}123,{w}")
    log.write_text("\n".join(lines) + "\n")
    # rows at 0, 0.5, ..., 4.0 s (the 9 kept): trapezoids
    want = 100 * 2.0 + 0.5 * (100 + 200) * 0.5 + 200 * 1.5
    assert energy(log) == pytest.approx(want)
    assert avg_power(log) == pytest.approx(want / 4.0)
    assert energy(log, start=2.5) == pytest.approx(200 * 1.5)
    assert energy(log, start=-1.0) == pytest.approx(200 * 1.0)  # from the end
    assert avg_power(log, end=2.0) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="At least 2 points"):
        energy(log, start=3.9)
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="Time,Power"):
        energy(bad)


def test_framework_helpers_without_frameworks(monkeypatch):
    from zeusc.utils import framework
    if framework._importable("torch") or framework._importable("jax"):
        pytest.skip("a framework is installed here: the no-framework paths do not apply")
    with pytest.raises(RuntimeError, match="No framework is available"):
        framework.all_reduce([1.0], "sum")
    with pytest.raises(RuntimeError, match="No framework is available"):
        framework.is_distributed()
    assert framework.get_rank() == 0 and framework.get_world_size() == 1
    assert framework.torch_is_available() is False
    with pytest.raises(RuntimeError, match="Failed to import Pytorch"):
        framework.torch_is_available(ensure_available=True)


def test_framework_helpers_with_a_stand_in_torch(monkeypatch):
    from zeusc.utils import framework
    calls = []
    torch = types.ModuleType("torch")
    torch.float64 = "float64"

    class T:
        def __init__(self, v, dtype=None, device=None):
            self.v = list(v)

        def cpu(self):
            return self

        def tolist(self):
            return list(self.v)
    torch.tensor = T
    dist = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True, get_rank=lambda: 1,
                                 get_world_size=lambda: 3, get_backend=lambda: "gloo",
                                 ReduceOp=types.SimpleNamespace(SUM="SUM", MAX="MAX"))

    def all_reduce(t, op):
        calls.append(op)
        t.v = [x * 3 if op == "SUM" else x + 1 for x in t.v]
    dist.all_reduce = all_reduce
    torch.distributed = dist
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert framework.is_distributed() is True
    assert (framework.get_rank(), framework.get_world_size()) == (1, 3)
    assert framework.all_reduce([1.0, 2.0], "sum") == [3.0, 6.0]
    assert framework.all_reduce([1.0], "max") == [2.0]
    assert calls == ["SUM", "MAX"]
    with pytest.raises(ValueError):
        framework.all_reduce([1.0], "mean")


def test_device_get_gpus_through_the_fake_nvml(fake, monkeypatch):
    from zeusc.device.gpu import LibzeusGPUs, ZeusGPUNotSupportedError
    monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    with fake.devices(all_devices=True) as dev:
        gpus = LibzeusGPUs(dev)
        assert len(gpus) == 2
        assert gpus.get_power_management_limit_constraints(1) == (100000, 300000)
        gpus.set_power_management_limit(1, 200000)
        assert gpus.get_power_management_limit(1) == 200000
        assert gpus.supports_get_total_energy_consumption(0) is True
        assert gpus.get_total_energy_consumption(0) >= 0
        assert gpus.get_instant_power_usage(0) == 30000
        with pytest.raises(ZeusGPUNotSupportedError):
            gpus.get_average_memory_power_usage(0)
        assert gpus.get_gpu_temperature(0) == 35
        assert gpus.get_supported_graphics_clocks(0)[0] >= gpus.get_supported_graphics_clocks(0)[-1]
        with pytest.warns(DeprecationWarning, match="getPowerManagementLimitConstraints"):
            assert gpus.getPowerManagementLimitConstraints(0) == (100000, 300000)
        gpus._ensure_homogeneous()


# ---- python -m entry points -----------------------------------------------------------------------------

def test_python_m_show_env_and_monitor_energy():
    p = tu.run_py("import runpy; runpy.run_module('zeusc.show_env', run_name='__main__')",
                  env={"ZEUS_GPU_BACKEND": "sim", "ZEUS_SIM_GPUS": "2"})
    assert p.returncode == 0, p.stderr
    assert "backend: sim" in p.stdout and "GPU 1: Zeus Simulated GPU" in p.stdout
    p = tu.run_py("import sys, runpy; sys.argv = ['x', 'energy', '--', sys.executable, '-c', "
                  "'import time; print(\\'child out\\'); time.sleep(0.2); raise SystemExit(3)']; "
                  "runpy.run_module('zeusc.monitor', run_name='__main__')",
                  env={"ZEUS_GPU_BACKEND": "sim", "ZEUS_SIM_GPUS": "1", "ZEUS_SIM_CLOCK": None})
    assert p.returncode == 3, p.stdout + p.stderr  # the command's status
    assert p.stdout == "child out\n", p.stdout  # stdout is the command's alone; the report is on stderr
    assert "Measurement(time=" in p.stderr
    t = float(p.stderr.split("time=")[1].split(",")[0])
    e = float(p.stderr.split("{0: ")[1].split("}")[0])
    assert t >= 0.2 and e == pytest.approx(30.0 * t, rel=0.05)  # wall clock: an idle GPU for the command
