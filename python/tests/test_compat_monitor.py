"""Compatibility: ZeusMonitor as the original's documentation and tests describe it.

Every combination of CUDA_VISIBLE_DEVICES (each non-empty subset of four GPUs, or unset), of
``gpu_indices`` (each non-empty subset of the visible GPUs, or None) and of the GPUs' architecture
(the fake NVML reports Ampere for a GPU with an energy counter and Pascal for one without, which
the monitor measures by sampling its power). Each physical GPU idles at its own power
(30 + 10 x its NVML index W), so the energy a window reports says which GPU was read: the index
mapping is checked, not only the count. Windows run on the fake NVML's virtual clock (ticks of
idle time), so time and energy are exact.

Checked as the original's test does: the monitored indices, the start readings in
``measurement_states``, serial, overlapping and nested windows, the errors for a window begun
twice or ended unknown, the log file (header, one row per ended window, read back by a reader
written the original's way), and a replay of it through ``ReplayZeusMonitor``.
"""
from __future__ import annotations

import itertools
import json
import warnings

import pytest

import zeusc_testutil as tu
from zeusc.monitor import Measurement, ZeusMonitor
from zeusc.utils.testing import ReplayZeusMonitor

NUM_GPUS = 4
PASCAL, AMPERE = "pascal", "ampere"
ARCHS = (PASCAL, AMPERE)
MJ = 0.0011  # the energy counter counts whole mJ


def _subsets(items):
    for k in range(1, len(items) + 1):
        yield from map(list, itertools.combinations(items, k))


def gpu_cases():
    """(CUDA_VISIBLE_DEVICES or None, gpu_indices or None, architecture of each monitored GPU)."""
    for cvd in _subsets(range(NUM_GPUS)):
        for idx in _subsets(range(len(cvd))):
            for archs in itertools.product(ARCHS, repeat=len(idx)):
                yield cvd, idx, list(archs)
        for archs in itertools.product(ARCHS, repeat=len(cvd)):
            yield cvd, None, list(archs)
    for idx in _subsets(range(NUM_GPUS)):
        for archs in itertools.product(ARCHS, repeat=len(idx)):
            yield None, idx, list(archs)
    for archs in itertools.product(ARCHS, repeat=NUM_GPUS):
        yield None, None, list(archs)


def _case_id(case):
    cvd, idx, archs = case
    return f"cvd={'-' if cvd is None else ''.join(map(str, cvd))},idx={'-' if idx is None else ''.join(map(str, idx))}," \
           + "".join(a[0] for a in archs)


def idle_w(nvml_index: int) -> float:
    return 30.0 + 10.0 * nvml_index


def read_log_the_original_way(path):
    """Parses a monitor log as the original's ReplayZeusMonitor reads it."""
    with open(path) as f:
        header = f.readline()
        indices = [int(col.split("_")[0][3:]) for col in header.split(",")[3:] if col]
        rows = []
        for line in f:
            start, name, *nums = line.split(",")
            elapsed, *energies = map(float, nums)
            rows.append((float(start), name, elapsed, dict(zip(indices, energies))))
    return header, indices, rows


@pytest.mark.parametrize("case", list(gpu_cases()), ids=_case_id)
def test_monitor(fake, monkeypatch, tmp_path, case):
    cvd, gpu_indices, archs = case
    if cvd is None:
        torch_idx = list(range(NUM_GPUS)) if gpu_indices is None else gpu_indices
        nvml_idx = list(torch_idx)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(map(str, cvd)))
        torch_idx = list(range(len(cvd))) if gpu_indices is None else gpu_indices
        nvml_idx = [cvd[i] for i in torch_idx]
    arch_of_nvml = {n: AMPERE for n in range(NUM_GPUS)}
    arch_of_nvml.update(zip(nvml_idx, archs))
    model = tmp_path / "gpus.json"
    model.write_text(json.dumps({"gpus": [{"model": "dvfs", "idle_power_w": idle_w(n),
                                           "energy_counter": arch_of_nvml[n] == AMPERE}
                                          for n in range(NUM_GPUS)]}))
    monkeypatch.setenv("ZEUS_SIM_MODEL_FILE", str(model))
    monkeypatch.setenv("ZEUS_SIM_CLOCK", "virtual")
    old = {t: arch_of_nvml[n] == PASCAL for t, n in zip(torch_idx, nvml_idx)}
    watts = {t: idle_w(n) for t, n in zip(torch_idx, nvml_idx)}

    dev = fake.devices()
    log = tmp_path / "log.csv"
    try:
        monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=[], log_file=log, devices=dev)
        assert monitor.gpu_indices == torch_idx
        assert [monitor.gpus.supports_get_total_energy_consumption(t) for t in torch_idx] == \
               [not old[t] for t in torch_idx]
        assert ReplayZeusMonitor(gpu_indices=None, log_file=log).gpu_indices == torch_idx

        clock = [0.0]  # virtual seconds since the monitor opened

        def tick(n=1):
            for _ in range(n):
                fake.idle(1.0)
                clock[0] += 1.0

        begun = {}

        def begin(name):
            monitor.begin_window(name, sync_execution=False)
            st = monitor.measurement_states[name]
            begun[name] = clock[0]
            assert st.time == pytest.approx(monitor._wall0 + clock[0], abs=1e-6)
            assert set(st.gpu_energy) == {t for t in torch_idx if not old[t]}
            for t, n in zip(torch_idx, nvml_idx):
                if not old[t]:
                    assert st.gpu_energy[t] == pytest.approx(fake.true_energy(n), abs=MJ)
            assert st.cpu_energy is None and st.dram_energy is None

        def end(name, elapsed):
            m = monitor.end_window(name, sync_execution=False)
            assert name not in monitor.measurement_states
            assert isinstance(m, Measurement)
            assert m.time == pytest.approx(elapsed, abs=1e-9)
            assert list(m.gpu_energy) == torch_idx
            for t in torch_idx:  # idle power of the right physical GPU, times the window
                assert m.gpu_energy[t] == pytest.approx(watts[t] * elapsed, abs=MJ if not old[t] else 1e-6)
            assert m.total_energy == pytest.approx(sum(m.gpu_energy.values()))
            assert m.cpu_energy is None and m.dram_energy is None and m.soc_energy is None
            return m

        results = {}
        # serial windows
        begin("window1")
        tick()
        with pytest.raises(ValueError, match="already exists"):
            monitor.begin_window("window1", sync_execution=False)
        results["window1"] = end("window1", 1)
        tick(2)
        begin("window2")
        tick(3)
        results["window2"] = end("window2", 3)
        with pytest.raises(ValueError, match="does not exist"):
            monitor.end_window("window2", sync_execution=False)
        with pytest.raises(ValueError, match="does not exist"):
            monitor.end_window("window3", sync_execution=False)
        # overlapping windows
        begin("window3")
        tick()
        begin("window4")
        tick(2)
        results["window3"] = end("window3", 3)
        tick(3)
        results["window4"] = end("window4", 5)
        # nested windows
        begin("window5")
        begin("window6")
        tick(2)
        results["window6"] = end("window6", 2)
        tick(3)
        results["window5"] = end("window5", 5)
        assert len(monitor.measurement_states) == 0

        # the log file, read back the original's way
        header, indices, rows = read_log_the_original_way(log)
        assert header == "start_time,window_name,elapsed_time," + ",".join(f"gpu{t}_energy" for t in torch_idx) + "\n"
        assert indices == torch_idx
        order = ["window1", "window2", "window3", "window4", "window6", "window5"]
        assert [r[1] for r in rows] == order
        for start, name, elapsed, energy in rows:
            assert start == pytest.approx(monitor._wall0 + begun[name], abs=1e-6)  # epoch seconds
            assert elapsed == results[name].time
            assert energy == results[name].gpu_energy
        monitor.close()

        # replaying the log gives the same measurements
        replay = ReplayZeusMonitor(gpu_indices=None, log_file=log)
        replay.begin_window("window1", sync_execution=False)
        with pytest.raises(RuntimeError, match="is already ongoing"):
            replay.begin_window("window1", sync_execution=False)
        assert replay.end_window("window1", sync_execution=False) == Measurement(
            time=results["window1"].time, gpu_energy=results["window1"].gpu_energy)
        with pytest.raises(RuntimeError, match="is not ongoing"):
            replay.end_window("window2", sync_execution=False)
        for name in order[1:]:
            replay.begin_window(name, sync_execution=False)
        for name in order[1:]:
            m = replay.end_window(name, sync_execution=False)
            assert (m.time, m.gpu_energy) == (results[name].time, results[name].gpu_energy)
        with pytest.raises(RuntimeError, match="No more lines"):
            replay.begin_window("extra", sync_execution=False)
            replay.end_window("extra", sync_execution=False)
        replay.close()
    finally:
        dev.close()


def test_zero_energy_warns_as_the_original(fake, monkeypatch, tmp_path):
    """A window whose counter did not move warns (warnings.warn, the original's text) and reports
    0 J; with approx_instant_energy it is estimated instead, without a warning."""
    monkeypatch.setenv("ZEUS_SIM_GPUS", "1")
    monkeypatch.setenv("ZEUS_SIM_COUNTER_PERIOD_MS", "1000")
    with fake.devices(all_devices=True) as dev:
        fake.idle(5.0)
        plain = ZeusMonitor(cpu_indices=[], devices=dev)
        approx = ZeusMonitor(cpu_indices=[], devices=dev, approx_instant_energy=True)
        fake.idle(0.01)
        plain.begin_window("window0", sync_execution=False)
        approx.begin_window("window0", sync_execution=False)
        fake.idle(0.1)
        with pytest.warns(UserWarning, match="The energy consumption of one or more GPUs was measured as zero"):
            m = plain.end_window("window0", sync_execution=False)
        assert all(v == 0.0 for v in m.gpu_energy.values())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            a = approx.end_window("window0", sync_execution=False)
        assert a.gpu_energy[0] == pytest.approx(30.0 * 0.1, rel=1e-6)
        plain.close()
        approx.close()


def test_begin_window_restart(sim_env):
    """restart=True starts an open window over with fresh readings; on a closed key it begins."""
    from zeusc.device import Devices
    sim_env(gpus=1, clock="virtual")
    with Devices(backend="sim", all_devices=True) as dev:
        node = dev.sim_node()
        monitor = ZeusMonitor(gpu_indices=[0], cpu_indices=[], devices=dev)
        monitor.begin_window("w", sync_execution=False)
        assert "w" in monitor.measurement_states
        with pytest.raises(ValueError, match="already exists"):
            monitor.begin_window("w", sync_execution=False)
        old_state = monitor.measurement_states["w"]
        node.idle(1.0)
        monitor.begin_window("w", sync_execution=False, restart=True)
        new_state = monitor.measurement_states["w"]
        assert new_state is not old_state
        assert new_state.time > old_state.time
        node.idle(0.5)
        m = monitor.end_window("w", sync_execution=False)
        assert m.time == pytest.approx(0.5)
        assert "w" not in monitor.measurement_states
        monitor.begin_window("w2", sync_execution=False, restart=True)
        assert "w2" in monitor.measurement_states
        monitor.end_window("w2", sync_execution=False)
        monitor.close()
