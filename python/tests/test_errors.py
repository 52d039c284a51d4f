"""Every C failure reaches Python as the natural exception carrying the C library's message:
driven through real failing calls (the fake NVML's error injection, bad settings, bad files)."""
from __future__ import annotations

import pytest

import zeusc
from zeusc.device import Devices
from zeusc.monitor import ZeusMonitor


def test_bad_log_level_is_a_value_error_with_the_c_message():
    with pytest.raises(ValueError, match="log level 'loud' is not one of error, warn, info, debug, off") as ei:
        zeusc.set_log_level("loud")
    assert isinstance(ei.value, zeusc.ZeusError) and ei.value.errname == "ZEUS_EINVAL" and ei.value.code == -1
    zeusc.set_log_level("warn")


def test_no_permission_is_a_permission_error(fake, monkeypatch):
    monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    monkeypatch.setenv("FAKE_NVML_INJECT", "nvmlDeviceSetPowerManagementLimit:NO_PERMISSION:1")
    with fake.devices(all_devices=True) as dev:
        monkeypatch.delenv("FAKE_NVML_INJECT")
        dev.set_power_limit(0, 200000)  # GPU 0 is not injected
        with pytest.raises(PermissionError, match="GPU 1") as ei:
            dev.set_power_limit(1, 200000)
        assert "root" in str(ei.value) or "CAP_SYS_ADMIN" in str(ei.value)
        assert ei.value.errname == "ZEUS_EPERM"


def test_power_limit_out_of_range_is_a_value_error(fake):
    with fake.devices(all_devices=True) as dev:
        lo, hi, _ = dev.power_limit_constraints(0)
        with pytest.raises(ValueError, match=str(hi + 1000)):
            dev.set_power_limit(0, hi + 1000)
        with pytest.raises(ValueError):
            dev.set_power_limit(0, -5)
        with pytest.raises(TypeError):
            dev.set_power_limit(0, 2.5)


def test_missing_counter_is_not_implemented_error(fake, monkeypatch):
    monkeypatch.setenv("ZEUS_SIM_ENERGY_COUNTER", "0")
    with fake.devices(all_devices=True) as dev:
        with pytest.raises(NotImplementedError) as ei:
            dev.total_energy_mj(0)
        assert ei.value.errname == "ZEUS_ENOTSUP"


def test_lost_gpu_is_a_runtime_error(fake, monkeypatch):
    monkeypatch.setenv("FAKE_NVML_INJECT", "nvmlDeviceGetTotalEnergyConsumption:GPU_IS_LOST:0:1")
    with fake.devices(all_devices=True) as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        with pytest.raises(RuntimeError, match="(?i)lost") as ei:
            mon.begin_window("w")
            mon.end_window("w")
        assert ei.value.errname == "ZEUS_EGPULOST"
        mon.close()


def test_unknown_gpu_index_and_bad_backend(fake):
    with fake.devices(all_devices=True) as dev:
        with pytest.raises(ValueError, match="GPU 9"):
            dev.get_power_limit(9)
    with pytest.raises(ValueError, match="banana"):
        Devices(backend="banana")
    with pytest.raises(RuntimeError, match="nope"):  # ZEUS_ENOLIB
        Devices(backend="nvml", nvml_library="/nope/libnvidia-ml.so.1")


def test_bad_sim_setting_names_the_variable(sim_env):
    sim_env(gpus="many")
    with pytest.raises(ValueError, match="ZEUS_SIM_GPUS"):
        Devices(backend="sim")


def test_sim_node_only_on_the_sim_backend(fake, sim_env):
    with fake.devices(all_devices=True) as dev:
        with pytest.raises(ValueError, match="nvml"):
            dev.sim_node()
    with Devices(backend="sim") as dev:
        node = dev.sim_node()
        with pytest.raises(ValueError, match="2 values given for 1"):
            node.work_all([1, 2])
    with pytest.raises(ValueError, match="closed"):
        node.now()
