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
    for name in ("AMDGPU", "AMDGPUs", "ZeusdAMDGPU", "amdsmi_is_available"):
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


ZEUSD_AMD_SCRIPT = r"""
from zeusc.device.gpu.amd import AMDGPUs, ZeusdAMDGPU
gpus = AMDGPUs()
assert all(isinstance(g, ZeusdAMDGPU) for g in gpus.gpus), gpus.gpus
assert gpus.devices.backend == "amdsmi+zeusd", gpus.devices.backend
gpus.set_power_management_limit(0, 450000)
assert gpus.get_power_management_limit(0) == 450000
gpus.set_gpu_locked_clocks(0, 1200, 1200)
gpus.close()
print("done")
"""


def test_zeusd_amdgpu_sets_through_the_daemon_on_the_gpu_at_the_same_pci_address(mi300x, tmp_path):
    """A `zeus daemon serve` on the fake amdsmi (amd-smi's order) and a zeusc client whose HIP order
    differs (KFD nodes 2,1: HIP 0 is amd-smi's GPU 1): AMDGPUs holds ZeusdAMDGPU objects, and the cap
    and clock lock of GPU 0 are made, and given back, by the daemon on its GPU 1."""
    import subprocess
    import time
    cli = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    if not os.path.exists(cli) or subprocess.run([cli, "daemon", "--help"], capture_output=True).returncode != 0:
        pytest.skip("the zeus CLI with the daemon is not built; set ZEUSC_TEST_ZEUS_CLI")
    sock = str(tmp_path / "zeusd.sock")
    env = dict(os.environ, ZEUS_GPU_BACKEND="amdsmi", ZEUS_SIM_CLOCK="wall")
    env.pop("ZEUSD_SOCK_PATH", None)
    env.pop("ZEUSD_HOST_PORT", None)
    errf = open(tmp_path / "daemon.err", "w")
    p = subprocess.Popen([cli, "daemon", "serve", "--socket-path", sock, "--no-state-file", "--log-level", "info"],
                         env=env, stderr=errf)
    try:
        deadline = time.time() + 10
        while time.time() < deadline and "ready" not in (tmp_path / "daemon.err").read_text():
            assert p.poll() is None, (tmp_path / "daemon.err").read_text()
            time.sleep(0.05)
        r = tu.run_py(ZEUSD_AMD_SCRIPT, env={"ZEUSD_SOCK_PATH": sock, "ZEUS_GPU_BACKEND": None,
                                             "ZEUS_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1",
                                             "FAKE_AMDSMI_KFD_NODES": "2,1", "ZEUS_SIM_CLOCK": "wall",
                                             "FAKE_AMDSMI_LOG": str(tmp_path / "client.log")})
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
    finally:
        p.terminate()
        p.wait(10)
        errf.close()
    assert mi300x.read_text().splitlines() == [
        "amdsmi_set_power_cap 1 0 450000000 -> 0",
        "amdsmi_set_gpu_clk_range 1 1200 1200 0 -> 0",
        "amdsmi_set_power_cap 1 0 750000000 -> 0",
        "amdsmi_set_gpu_perf_level 1 0 -> 0",
    ]
    assert not (tmp_path / "client.log").exists() or (tmp_path / "client.log").read_text() == ""


def test_zeusd_amdgpu_without_a_daemon_says_how_to_name_one(mi300x, monkeypatch):
    from zeusc.device.gpu import ZeusGPUInitError
    from zeusc.device.gpu.amd import ZeusdAMDGPU
    monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    with pytest.raises(ZeusGPUInitError, match="ZEUSD_SOCK_PATH"):
        ZeusdAMDGPU(0)
