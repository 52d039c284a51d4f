"""zeusc.device.gpu.amd (the original's zeus.device.gpu.amd) on the fake libamd_smi.so playing two
MI300X: the original's names, its units (mW, mJ, MHz) after the conversions libzeus makes from
amdsmi's microwatts, watts and counter ticks, and settings put back at close."""
from __future__ import annotations

import os

import pytest

import zeusc_testutil as tu


def fake_amdsmi_path():
    p = os.environ.get("ZEUSC_TEST_FAKE_AMDSMI") or os.path.join(tu.REPO, "build", "fake_amdsmi", "libamd_smi.so")
    return p if os.path.exists(p) else None


@pytest.fixture
def mi300x(monkeypatch, tmp_path):
    path = fake_amdsmi_path()
    if not path:
        pytest.skip("the fake libamd_smi.so is not built")
    log = tmp_path / "amdsmi.log"
    monkeypatch.setenv("ZEUS_AMDSMI_LIBRARY", path)
    monkeypatch.setenv("ZEUS_SIM_HARDWARE", "mi300x")
    monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    monkeypatch.setenv("ZEUS_SIM_CLOCK", "virtual")
    monkeypatch.setenv("FAKE_AMDSMI_LOG", str(log))
    return log


def test_amd_module_has_the_original_names():
    from zeusc.device.gpu import amd
    for name in ("AMDGPU", "AMDGPUs", "amdsmi_is_available"):
        assert hasattr(amd, name), name
    assert issubclass(amd.AMDGPUs, __import__("zeusc.device.gpu", fromlist=["GPUs"]).GPUs)


def test_amdgpus_reads_and_sets_an_mi300x_in_the_original_units(mi300x):
    from zeusc.device.gpu import ZeusGPUNotSupportedError
    from zeusc.device.gpu.amd import AMDGPUs
    gpus = AMDGPUs(ensure_homogeneous=True)
    try:
        assert len(gpus) == 2
        assert gpus.get_name(1) == "AMD Instinct MI300X"
        assert gpus.get_power_management_limit_constraints(0) == (400000, 750000)
        assert gpus.get_power_management_limit(0) == 750000
        gpus.set_power_management_limit(0, 500000)
        assert gpus.get_power_management_limit(0) == 500000
        power = gpus.get_instant_power_usage(1)
        assert power % 1000 == 0 and 188000 <= power <= 192000      # whole watts from amdsmi
        assert gpus.get_average_power_usage(1) == 190000
        assert gpus.supports_get_total_energy_consumption(0) is True
        assert isinstance(gpus.get_total_energy_consumption(0), int)
        assert gpus.get_supported_graphics_clocks(0) == [2100, 500]
        assert gpus.get_supported_memory_clocks(0) == [1300]
        gpus.set_gpu_locked_clocks(0, 500, 500)
        gpus.reset_locked_clocks(0)
        with pytest.raises(ZeusGPUNotSupportedError):
            gpus.get_persistence_mode(0)
        with pytest.raises(ZeusGPUNotSupportedError):
            gpus.get_average_memory_power_usage(0)
    finally:
        gpus.close()
    lines = mi300x.read_text().splitlines()
    assert lines[0] == "amdsmi_set_power_cap 0 0 500000000 -> 0"
    assert "amdsmi_set_gpu_clk_range 0 500 500 0 -> 0" in lines
    assert lines[-1] == "amdsmi_set_power_cap 0 0 750000000 -> 0"   # put back at close


def test_amdsmi_is_available_says_whether_the_library_lists_gpus(mi300x):
    code = ("from zeusc.device.gpu.amd import amdsmi_is_available, AMDGPUs\n"
            "from zeusc.device.gpu import ZeusGPUInitError\n"
            "print(amdsmi_is_available())\n"
            "try:\n    AMDGPUs()\nexcept ZeusGPUInitError as e:\n    print('init error:', e)\n")
    p = tu.run_py(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["True"], p.stdout
    p = tu.run_py(code, env={"ZEUS_AMDSMI_LIBRARY": "/nonexistent/libamd_smi.so"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == "False", p.stdout
    assert out[1].startswith("init error:") and "cannot load the amdsmi library '/nonexistent/libamd_smi.so'" in out[1]
