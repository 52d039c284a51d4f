"""Devices (zeus.device of the original): GPUs, CPU packages and SoCs, over libzeus's device layer.

The original's entry points:

- :func:`get_gpus` (``zeusc.device.gpu``): the process's GPUs with the original's per-index
  methods (``get_power_management_limit_constraints(i)``, ``get_total_energy_consumption(i)``...);
- :func:`get_cpus` (``zeusc.device.cpu``): the readable RAPL packages;
- :func:`get_soc` (``zeusc.device.soc``): the NVIDIA Jetson's power rails (``zeusc.device.soc.jetson``),
  or ``ZeusSoCInitError`` where there is no SoC.

Not in the original: :class:`Devices`, a device set of a chosen backend (``nvml``, ``sim``,
``none``) that a :class:`~zeusc.monitor.ZeusMonitor` can be given instead of the process's
default GPUs, and :class:`SimNode` to drive simulated GPUs::

    from zeusc.device import Devices
    with Devices(backend="sim") as dev:          # ZEUS_SIM_* settings, virtual clock by default
        node = dev.sim_node()
        node.work(0, 10)                          # 10 units of work on GPU 0
        print(node.true_energy(0))                # ground truth, J

Units follow the C library: power in mW, energy in J (mJ where the name says so), time in s.
"""
from ._devices import Devices, SimNode, restore_all
from .cpu import get_cpus
from .gpu import (ZeusGPUAlreadyInitializedError, ZeusGPUCorruptedInfoROMError, ZeusGPUDriverNotLoadedError,
                  ZeusGPUFunctionNotFoundError, ZeusGPUInitError, ZeusGPUInsufficientPowerError,
                  ZeusGPUInsufficientSizeError, ZeusGPUInvalidArgError, ZeusGPUIRQError,
                  ZeusGPULibraryNotFoundError, ZeusGPULibRMVersionMismatchError, ZeusGPULostError,
                  ZeusGPUMemoryError, ZeusGPUNoPermissionError, ZeusGPUNotFoundError, ZeusGPUNotSupportedError,
                  ZeusGPUOperatingSystemError, ZeusGPUResetRequiredError, ZeusGPUTimeoutError,
                  ZeusGPUUnknownError, get_gpus)
from .soc import get_soc

__all__ = [
    "Devices", "SimNode", "restore_all", "get_gpus", "get_cpus", "get_soc", "ZeusGPUInitError",
    "ZeusGPUInvalidArgError", "ZeusGPUNotSupportedError", "ZeusGPUNoPermissionError", "ZeusGPUAlreadyInitializedError",
    "ZeusGPUNotFoundError", "ZeusGPUInsufficientSizeError", "ZeusGPUInsufficientPowerError",
    "ZeusGPUDriverNotLoadedError", "ZeusGPUTimeoutError", "ZeusGPUIRQError", "ZeusGPULibraryNotFoundError",
    "ZeusGPUFunctionNotFoundError", "ZeusGPUCorruptedInfoROMError", "ZeusGPULostError", "ZeusGPUResetRequiredError",
    "ZeusGPUOperatingSystemError", "ZeusGPULibRMVersionMismatchError", "ZeusGPUMemoryError", "ZeusGPUUnknownError",
]
