"""zeusc.device.soc.jetson and the soc_energy of ZeusMonitor's measurements, on a fake sysfs tree
under ZEUS_JETSON_ROOT (the newer kernels' hwmon layout; the C tests cover both layouts)."""
from __future__ import annotations

import os
import platform
import threading
import time

import pytest

from zeusc.device import Devices
from zeusc.device.soc import EmptySoC, ZeusSoCInitError, _reset_soc, get_soc
from zeusc.device.soc.jetson import Jetson, JetsonMeasurement, ZeusJetsonInitError, jetson_is_available
from zeusc.monitor import ZeusMonitor


def _real_jetson() -> bool:
    return platform.machine() == "aarch64" and (
        os.path.exists("/etc/nv_tegra_release") or os.path.exists("/usr/lib/aarch64-linux-gnu/tegra"))


def _write(path, mw: float) -> None:
    """In place at a fixed width (libzeus keeps the file open, as sysfs is read)."""
    with open(path, "r+") as f:
        f.write(f"{mw:012.3f}\n")


@pytest.fixture
def board(tmp_path, monkeypatch):
    """A Jetson with a total rail (power file, 4 W) and a CPU rail (5 V x 300 mA), no GPU rail."""
    hw = tmp_path / "bus" / "i2c" / "drivers" / "ina3221" / "1-0040" / "hwmon" / "hwmon1"
    hw.mkdir(parents=True)
    (hw / "in1_label").write_text("VDD_IN\n")
    (hw / "power1_input").write_text(f"{4000:012.3f}\n")
    (hw / "in2_label").write_text("VDD_CPU_GPU_CV\n")
    (hw / "in2_input").write_text("5000\n")
    (hw / "curr2_input").write_text("300\n")
    monkeypatch.setenv("ZEUS_JETSON_ROOT", str(tmp_path))
    _reset_soc()
    yield hw
    _reset_soc()


def test_off_a_jetson_there_is_no_soc(monkeypatch):
    if _real_jetson():
        pytest.skip("this machine is a Jetson")
    monkeypatch.delenv("ZEUS_JETSON_ROOT", raising=False)
    _reset_soc()
    assert jetson_is_available() is False
    with pytest.raises(ZeusSoCInitError, match="No observable SoC"):
        get_soc()
    with pytest.raises(ZeusJetsonInitError, match="No Jetson processor"):
        Jetson()
    with Devices(backend="none") as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        assert mon.soc_is_present is False
        assert isinstance(mon.soc, EmptySoC)
        mon.begin_window("w", sync_execution=False)
        assert mon.end_window("w", sync_execution=False).soc_energy is None
        mon.close()


def test_jetson_measurement_is_the_originals():
    a = JetsonMeasurement(cpu_energy_mj=5.0, gpu_energy_mj=None, total_energy_mj=20.0)
    b = JetsonMeasurement(cpu_energy_mj=2.0, gpu_energy_mj=None, total_energy_mj=8.0)
    assert a - b == JetsonMeasurement(cpu_energy_mj=3.0, gpu_energy_mj=None, total_energy_mj=12.0)
    with pytest.raises(TypeError):
        a - 1.0
    a.zero_all_fields()
    assert a == JetsonMeasurement(cpu_energy_mj=0.0, gpu_energy_mj=None, total_energy_mj=0.0)


def test_get_soc_is_a_jetson_whose_windows_integrate_the_rails(board):
    soc = get_soc()
    assert isinstance(soc, Jetson) and get_soc() is soc
    assert soc.get_available_metrics() == {"cpu_energy_mj", "total_energy_mj"}
    rails = soc.rail_info()
    assert set(rails) == {"cpu", "total"}
    assert rails["total"]["label"] == "VDD_IN" and rails["total"]["direct"] is True
    assert rails["cpu"]["voltage_path"] == str(board / "in2_input")
    soc.begin_window("w")
    with pytest.raises(KeyError, match="already exists"):
        soc.begin_window("w")
    t0 = time.monotonic()
    time.sleep(0.3)
    m = soc.end_window("w")
    dt = time.monotonic() - t0
    assert m.gpu_energy_mj is None
    assert m.total_energy_mj == pytest.approx(4000 * dt, rel=0.05)   # 4 W, in mJ
    assert m.cpu_energy_mj == pytest.approx(1500 * dt, rel=0.05)     # 5000 mV x 300 mA = 1.5 W
    with pytest.raises(KeyError, match="does not exist"):
        soc.end_window("w")
    soc.beginWindow("x")  # the original's deprecated names
    assert soc.endWindow("x").total_energy_mj >= 0


def test_jetson_with_a_malformed_rail_says_which_file(board):
    (board / "power1_input").write_text("n/a\n")
    with pytest.raises(ZeusJetsonInitError, match=r"power1_input' holds 'n/a': expected a decimal number"):
        get_soc()


def test_zeus_monitor_reports_soc_energy_while_the_power_changes(board):
    with Devices(backend="none") as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[], poll_interval_s=0.01)
        assert mon.soc_is_present is True
        assert isinstance(mon.soc, Jetson)
        mon.begin_window("w", sync_execution=False)
        t0 = time.monotonic()
        time.sleep(0.3)
        _write(board / "power1_input", 8000)  # 4 W -> 8 W
        t1 = time.monotonic()
        time.sleep(0.3)
        m = mon.end_window("w", sync_execution=False)
        t2 = time.monotonic()
        truth = 4000 * (t1 - t0) + 8000 * (t2 - t1)  # mJ
        assert isinstance(m.soc_energy, JetsonMeasurement)
        assert m.soc_energy.gpu_energy_mj is None
        # ends-only readings would give 4 W or 8 W x 0.6 s: 2400 or 4800 mJ against ~3600. The
        # step between two samples costs at most 2 W x their gap (10 ms; 5 % allows a 90 ms
        # stall of the polling thread on a busy machine)
        assert m.soc_energy.total_energy_mj == pytest.approx(truth, rel=0.05)
        assert m.soc_energy.cpu_energy_mj == pytest.approx(1500 * m.time, rel=0.03)
        assert m.total_energy == 0  # the GPUs' only, as the original
        mon.begin_window("c", sync_execution=False)
        c = mon.end_window("c", sync_execution=False, cancel=True)
        assert c.soc_energy == JetsonMeasurement(cpu_energy_mj=0.0, gpu_energy_mj=None, total_energy_mj=0.0)
        mon.close()
