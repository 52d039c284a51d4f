"""ZeusMonitor on simulated GPUs that behave like the measured H100 (ZEUS_SIM_HARDWARE=h100:
100 ms sensor tick, 3.3 ms counter reads), on the wall clock, against the simulated ground truth:
the sampled energy source keeps a window pair within 15 us and short windows accurate; the raw
counter (the original's way) costs 6.6 ms a pair and reads 0 J for a 50 ms window."""
import statistics
import time
import warnings

import pytest

from zeusc.monitor import ZeusMonitor


def _loaded_gpu(sim_env, monkeypatch, hardware):
    from zeusc.device import Devices
    monkeypatch.delenv("ZEUS_MONITOR_ENERGY", raising=False)
    sim_env(gpus=1, clock="wall", hardware=hardware)
    dev = Devices(backend="sim", all_devices=True)
    node = dev.sim_node()
    node.set_load(0, True)  # a steady full load: 290 W (h200: 440 W)
    return dev, node


@pytest.fixture
def h100(sim_env, monkeypatch):
    dev, node = _loaded_gpu(sim_env, monkeypatch, "h100")
    yield dev, node
    dev.close()


@pytest.fixture
def h200(sim_env, monkeypatch):
    dev, node = _loaded_gpu(sim_env, monkeypatch, "h200")
    yield dev, node
    dev.close()


def _windows(monitor, node, n, length):
    errs = []
    for k in range(n):
        time.sleep(0.0173 * (k % 6))
        # The truth over the window's own bounds: the load is steady, so the exact mean power over
        # a stretch around the window times the window's length (reading the truth right before
        # and after the bounds would count the test's own scheduling delays as errors).
        n0, e0 = node.now(), node.true_energy(0)
        monitor.begin_window("w", sync_execution=False)
        time.sleep(length)
        m = monitor.end_window("w", sync_execution=False)
        e1, n1 = node.true_energy(0), node.now()
        want = (e1 - e0) / (n1 - n0) * m.time
        errs.append(abs(m.gpu_energy[0] - want) / want)
    return sorted(errs)


def _windows_meet(monitor, node, n, length, median_max, worst_max):
    """_windows, measured once more when the first set misses a target: a tick follower starved
    of the CPU by a brief burst of load on a shared test machine misses a tick or two, and a wrong
    estimate misses in both sets. The errors of the set that decided."""
    for attempt in range(2):
        errs = _windows(monitor, node, n, length)
        if statistics.median(errs) <= median_max and errs[-1] <= worst_max:
            break
        print(f"{length * 1000:.0f} ms windows, set {attempt + 1}: median {statistics.median(errs):.3%} "
              f"worst {errs[-1]:.3%}")
    return errs


def test_h200_two_clocks_pair_cost_and_200ms_windows(h200):
    """Issue 35: on the H200 the power ticks on its own ~101.6 ms clock beside the counter's
    100.0 ms; through zeusc a pair still costs microseconds and 200 ms windows, across the phase
    the clocks slide through, are within 0.5 % median and 2 % worst."""
    dev, node = h200
    mon = ZeusMonitor(cpu_indices=[], devices=dev)
    assert mon.energy_sources == {0: "sampled"}
    time.sleep(0.6)
    pairs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # back-to-back pairs are empty windows
        for _ in range(300):
            c0 = time.perf_counter()
            mon.begin_window("p", sync_execution=False)
            mon.end_window("p", sync_execution=False)
            pairs.append(time.perf_counter() - c0)
    pair = statistics.median(pairs)
    errs = _windows_meet(mon, node, 16, 0.2, 0.005, 0.02)
    print(f"zeusc sampled on h200: pair {pair * 1e6:.2f} us; 200 ms windows median {statistics.median(errs):.3%} "
          f"worst {errs[-1]:.3%}")
    assert pair <= 15e-6
    assert statistics.median(errs) <= 0.005 and errs[-1] <= 0.02
    mon.close()


def test_sampled_windows_cost_microseconds_and_meet_the_error_targets(h100):
    dev, node = h100
    mon = ZeusMonitor(cpu_indices=[], devices=dev)
    assert mon.energy_sources == {0: "sampled"}
    time.sleep(0.5)
    pairs = []
    for _ in range(300):
        c0 = time.perf_counter()
        mon.begin_window("p", sync_execution=False)
        mon.end_window("p", sync_execution=False)
        pairs.append(time.perf_counter() - c0)
    pair = statistics.median(pairs)
    errs = _windows_meet(mon, node, 12, 0.05, 0.015, 0.05)
    print(f"zeusc sampled: pair {pair * 1e6:.2f} us; 50 ms windows median {statistics.median(errs):.3%} "
          f"worst {errs[-1]:.3%}")
    assert pair <= 15e-6
    assert statistics.median(errs) <= 0.015 and errs[-1] <= 0.05
    mon.begin_window("d", sync_execution=False)
    time.sleep(0.2)
    m, detail = mon.end_window_detail("d", sync_execution=False)
    assert detail[0]["source"] == "sampled"
    assert detail[0]["corrected_energy_j"] == m.gpu_energy[0]
    assert 0 < detail[0]["error_bound_j"] < 0.5 * m.gpu_energy[0]  # an estimate; larger on a starved CPU
    assert mon.sampler_cpu_s() > 0
    mon.close()


def test_raw_source_is_the_originals_counter_difference(h100):
    dev, node = h100
    mon = ZeusMonitor(cpu_indices=[], devices=dev, energy_source="raw")
    assert mon.energy_sources == {0: "raw"}
    c0 = time.perf_counter()
    mon.begin_window("p", sync_execution=False)
    with pytest.warns(UserWarning):  # some of these read 0 J
        errs = _windows(mon, node, 6, 0.05)
    mon.end_window("p", sync_execution=False)
    assert errs[-1] > 0.5
    c1 = time.perf_counter()
    mon.begin_window("q", sync_execution=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the counter may not have moved
        mon.end_window("q", sync_execution=False)
    assert time.perf_counter() - c1 >= 6.6e-3
    assert c1 > c0
    mon.close()
    with pytest.raises(ValueError, match="energy_source"):
        ZeusMonitor(cpu_indices=[], devices=dev, energy_source="fast")
