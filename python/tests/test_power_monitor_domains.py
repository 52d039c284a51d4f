"""PowerMonitor.get_energy's choice of power domain, as the original's zeus/monitor/power.py makes
it: device instant power when it is monitored, else device average power, else a ValueError
("Neither ..."); an explicit domain that is not monitored is a ValueError too. On simulated GPUs on
the wall clock, whose average power is the mean of the last second (docs/sim.md): right after a
step in the load the two domains' integrals differ by far, so which one was integrated shows."""
from __future__ import annotations

import time

import pytest

from zeusc.device import Devices
from zeusc.monitor.power import PowerDomain, PowerMonitor


@pytest.fixture
def stepped(sim_env):
    """A GPU idle for a while, then loaded for 0.3 s, sampled meanwhile by a monitor of both device
    domains and one of average power only; yields (both, average_only, t0, t1, true energy)."""
    sim_env(gpus=1, clock="wall")
    dev = Devices(backend="sim", all_devices=True)
    node = dev.sim_node()
    both = PowerMonitor(update_period=0.01, devices=dev)
    average = PowerMonitor(update_period=0.01, devices=dev, power_domains=["device_average"])
    time.sleep(0.3)
    t0, e0 = time.time(), node.true_energy(0)
    node.set_load(0, True)
    time.sleep(0.3)
    t1, e1 = time.time(), node.true_energy(0)
    node.set_load(0, False)
    time.sleep(0.05)  # samples on both sides of t1
    yield both, average, t0, t1, e1 - e0
    both.close()
    average.close()
    dev.close()


def test_get_energy_prefers_device_instant_power(stepped):
    both, _, t0, t1, truth = stepped
    assert both.supported_domains == [PowerDomain.DEVICE_INSTANT, PowerDomain.DEVICE_AVERAGE]
    assert both.measurement_domains == both.supported_domains  # the original's name
    instant = both.get_energy(t0, t1, power_domain="device_instant")
    average = both.get_energy(t0, t1, power_domain=PowerDomain.DEVICE_AVERAGE)
    print(f"truth {truth:.2f} J; instant {instant[0]:.2f} J, average {average[0]:.2f} J")
    # The instant power follows the step; the last second's mean lags far behind it.
    assert instant[0] == pytest.approx(truth, rel=0.1)
    assert average[0] < 0.75 * truth
    assert both.get_energy(t0, t1) == instant


def test_get_energy_falls_back_to_device_average_power(stepped):
    both, average_only, t0, t1, truth = stepped
    assert average_only.supported_domains == [PowerDomain.DEVICE_AVERAGE]
    assert average_only.measurement_domains == [PowerDomain.DEVICE_AVERAGE]
    default = average_only.get_energy(t0, t1)
    assert default == average_only.get_energy(t0, t1, power_domain="device_average")
    # It is the average power's integral (as the other monitor sampled it), not the instant's.
    assert default[0] == pytest.approx(both.get_energy(t0, t1, power_domain="device_average")[0], rel=0.1)
    assert default[0] < 0.75 * both.get_energy(t0, t1, power_domain="device_instant")[0]
    with pytest.raises(ValueError, match="device_instant is not being monitored"):
        average_only.get_energy(t0, t1, power_domain="device_instant")


def test_get_energy_without_either_device_domain_raises(stepped):
    _, average_only, t0, t1, _ = stepped
    # No simulated or faked GPU reads memory power alone, so the monitor is told it samples only
    # that domain, as the original's own test builds one.
    average_only.supported_domains = [PowerDomain.MEMORY_AVERAGE]
    with pytest.raises(ValueError, match="Neither device_instant nor device_average power is being monitored"):
        average_only.get_energy(t0, t1)
    with pytest.raises(ValueError, match="device_average is not being monitored"):
        average_only.get_energy(t0, t1, power_domain="device_average")


def test_power_domains_is_the_fourth_positional_argument_and_checked_as_the_originals(sim_env):
    """As the original's PowerMonitor(gpu_indices, update_period, max_samples_per_gpu,
    power_domains): the fourth positional argument; an empty list, or a domain the GPUs cannot read
    (no simulated GPU reads memory power), is a ValueError naming it."""
    sim_env(gpus=1, clock="wall")
    dev = Devices(backend="sim", all_devices=True)
    try:
        pm = PowerMonitor(None, 0.01, None, ["device_average"], devices=dev)
        try:
            assert pm.measurement_domains == [PowerDomain.DEVICE_AVERAGE]
        finally:
            pm.close()
        with pytest.raises(ValueError, match="must be either `None` or non-empty"):
            PowerMonitor(None, 0.01, None, [], devices=dev)
        with pytest.raises(ValueError, match=r"\['memory_average'\] are not all supported"):
            PowerMonitor(None, 0.01, None, ["memory_average"], devices=dev)
    finally:
        dev.close()
