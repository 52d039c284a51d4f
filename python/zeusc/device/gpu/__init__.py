"""GPUs as the original's ``zeus.device.gpu`` presents them, over libzeus's device layer.

:func:`get_gpus` returns the process's GPUs (libzeus's default device set: NVIDIA GPUs through
NVML, or simulated ones with ``ZEUS_GPU_BACKEND=sim``) as a :class:`GPUs` object whose methods
take a GPU index, as the original's ``NVIDIAGPUs``: ``get_power_management_limit_constraints``,
``set_power_management_limit``, ``get_total_energy_consumption``, ... Indices honour
``CUDA_VISIBLE_DEVICES``. Units: mW, mJ, MHz, degrees Celsius. The original's camelCase names
(``getPowerManagementLimitConstraints``) still work and warn (DeprecationWarning), as there.

Failures raise the original's exception classes (``ZeusGPUNotSupportedError``,
``ZeusGPUNoPermissionError``, ...), each also a :class:`zeusc.ZeusError` carrying libzeus's
message and code.
"""
from __future__ import annotations

import abc
import ctypes
import functools
import threading
import warnings
from ctypes import byref, c_bool, c_size_t, c_uint, c_uint64
from typing import List, Optional, Sequence, Tuple

from ... import _lib
from ...exceptions import ZeusError

# ---- exceptions (the original's names) ------------------------------------------------------------


class ZeusBaseGPUError(ZeusError):
    """Base class of every GPU error."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class ZeusGPUInitError(ZeusBaseGPUError):
    """The GPU library could not be initialised (no GPU backend)."""


class ZeusGPUInvalidArgError(ZeusBaseGPUError):
    """An argument the GPU library refused."""


class ZeusGPUNotSupportedError(ZeusBaseGPUError):
    """The GPU cannot do this."""


class ZeusGPUNoPermissionError(ZeusBaseGPUError):
    """The operation needs root or CAP_SYS_ADMIN."""


class ZeusGPUAlreadyInitializedError(ZeusBaseGPUError):
    """The GPU library was initialised already."""


class ZeusGPUNotFoundError(ZeusBaseGPUError):
    """No such GPU."""


class ZeusGPUInsufficientSizeError(ZeusBaseGPUError):
    """A buffer was too small."""


class ZeusGPUInsufficientPowerError(ZeusBaseGPUError):
    """The GPU's power supply is insufficient."""


class ZeusGPUDriverNotLoadedError(ZeusBaseGPUError):
    """The GPU driver is not loaded."""


class ZeusGPUTimeoutError(ZeusBaseGPUError):
    """The GPU library timed out."""


class ZeusGPUIRQError(ZeusBaseGPUError):
    """An interrupt problem."""


class ZeusGPULibraryNotFoundError(ZeusBaseGPUError):
    """The vendor library is missing or unusable."""


class ZeusGPUFunctionNotFoundError(ZeusBaseGPUError):
    """The vendor library lacks a function."""


class ZeusGPUCorruptedInfoROMError(ZeusBaseGPUError):
    """The GPU's info ROM is corrupted."""


class ZeusGPULostError(ZeusBaseGPUError):
    """The GPU fell off the bus."""


class ZeusGPUResetRequiredError(ZeusBaseGPUError):
    """The GPU needs a reset."""


class ZeusGPUOperatingSystemError(ZeusBaseGPUError):
    """The operating system refused."""


class ZeusGPULibRMVersionMismatchError(ZeusBaseGPUError):
    """The library and the kernel module differ in version."""


class ZeusGPUMemoryError(ZeusBaseGPUError):
    """Out of memory."""


class ZeusGPUUnknownError(ZeusBaseGPUError):
    """Any other GPU failure."""


class ZeusGPUHeterogeneousError(ZeusBaseGPUError):
    """GPUs of different models where one model was required."""


_BY_CODE = {
    -1: ZeusGPUInvalidArgError,       # EINVAL
    -2: ZeusGPUMemoryError,           # ENOMEM
    -3: ZeusGPUNotSupportedError,     # ENOTSUP
    -4: ZeusGPUNoPermissionError,     # EPERM
    -5: ZeusGPUNotFoundError,         # ENOENT
    -7: ZeusGPUInvalidArgError,       # ERANGE
    -11: ZeusGPUUnknownError,         # EDEVICE
    -12: ZeusGPULostError,            # EGPULOST
    -13: ZeusGPULibraryNotFoundError,  # ENOLIB
    -14: ZeusGPUTimeoutError,         # ETIMEDOUT
}


def _check(rc: int) -> None:
    if rc < 0:
        cls = _BY_CODE.get(rc, ZeusGPUUnknownError)
        e = cls(_lib.errmsg(rc))
        e.code = rc
        e.errname = _lib.lib().zeus_errname(rc).decode()
        raise e


# ---- deprecated camelCase aliases ---------------------------------------------------------------------


def _alias(old: str, new: str):
    def alias(self, *args, **kwargs):
        warnings.warn(f"{old} is deprecated, use {new} instead", DeprecationWarning, stacklevel=2)
        return getattr(self, new)(*args, **kwargs)
    alias.__name__ = old
    alias.__doc__ = f"Deprecated alias of :meth:`{new}`."
    return alias


_ALIASES = {
    "getName": "get_name",
    "getPowerManagementLimitConstraints": "get_power_management_limit_constraints",
    "setPowerManagementLimit": "set_power_management_limit",
    "resetPowerManagementLimit": "reset_power_management_limit",
    "setPersistenceMode": "set_persistence_mode",
    "getSupportedMemoryClocks": "get_supported_memory_clocks",
    "setMemoryLockedClocks": "set_memory_locked_clocks",
    "resetMemoryLockedClocks": "reset_memory_locked_clocks",
    "getSupportedGraphicsClocks": "get_supported_graphics_clocks",
    "setGpuLockedClocks": "set_gpu_locked_clocks",
    "resetGpuLockedClocks": "reset_gpu_locked_clocks",
    "getAveragePowerUsage": "get_average_power_usage",
    "getInstantPowerUsage": "get_instant_power_usage",
    "getAverageMemoryPowerUsage": "get_average_memory_power_usage",
    "supportsGetTotalEnergyConsumption": "supports_get_total_energy_consumption",
    "getTotalEnergyConsumption": "get_total_energy_consumption",
    "getGpuTemperature": "get_gpu_temperature",
}


def _add_aliases(cls):
    for old, new in _ALIASES.items():
        if hasattr(cls, new) and old not in cls.__dict__:
            setattr(cls, old, _alias(old, new))
    return cls


# ---- one GPU ----------------------------------------------------------------------------------------


@_add_aliases
class GPU:
    """One GPU of a device set, by visible index (the original's ``NVIDIAGPU``)."""

    def __init__(self, gpu_index: int, devices=None) -> None:
        self.gpu_index = gpu_index
        self._devices = devices

    def _h(self):
        return self._devices._handle()

    @property
    def supports_nonblocking_setters(self) -> bool:
        """libzeus's setters are blocking."""
        return False

    def get_name(self) -> str:
        """The GPU's model name."""
        buf = ctypes.create_string_buffer(_lib.ZEUS_NAME_LEN)
        _check(_lib.lib().zeus_gpu_name(self._h(), self.gpu_index, buf, len(buf)))
        return buf.value.decode()

    def get_uuid(self) -> str:
        """(not in the original) The GPU's UUID, "GPU-..."."""
        buf = ctypes.create_string_buffer(_lib.ZEUS_NAME_LEN)
        _check(_lib.lib().zeus_gpu_uuid(self._h(), self.gpu_index, buf, len(buf)))
        return buf.value.decode()

    def get_power_management_limit_constraints(self) -> Tuple[int, int]:
        """(minimum, maximum) power limit, mW."""
        lo, hi, de = c_uint(), c_uint(), c_uint()
        _check(_lib.lib().zeus_gpu_power_limit_constraints(self._h(), self.gpu_index, byref(lo), byref(hi),
                                                           byref(de)))
        return lo.value, hi.value

    def get_power_management_limit(self) -> int:
        """The power limit, mW."""
        v = c_uint()
        _check(_lib.lib().zeus_gpu_get_power_limit(self._h(), self.gpu_index, byref(v)))
        return v.value

    def set_power_management_limit(self, power_limit_mw: int, block: bool = True) -> None:
        """Sets the power limit (mW); libzeus records the earlier limit and puts it back when the
        device set closes."""
        _check(_lib.lib().zeus_gpu_set_power_limit(self._h(), self.gpu_index, int(power_limit_mw)))

    def reset_power_management_limit(self, block: bool = True) -> None:
        """Sets the power limit back to the GPU's default."""
        lo, hi, de = c_uint(), c_uint(), c_uint()
        _check(_lib.lib().zeus_gpu_power_limit_constraints(self._h(), self.gpu_index, byref(lo), byref(hi),
                                                           byref(de)))
        _check(_lib.lib().zeus_gpu_set_power_limit(self._h(), self.gpu_index, de.value))

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        _check(_lib.lib().zeus_gpu_set_persistence_mode(self._h(), self.gpu_index, bool(enabled)))

    def get_persistence_mode(self) -> bool:
        v = c_bool()
        _check(_lib.lib().zeus_gpu_get_persistence_mode(self._h(), self.gpu_index, byref(v)))
        return v.value

    def _clock_list(self, fn, *args) -> List[int]:
        n = c_size_t(256)
        while True:
            arr = (c_uint * n.value)()
            rc = fn(self._h(), self.gpu_index, *args, arr, byref(n))
            if rc == -7 and n.value > len(arr):  # ERANGE: n says how many are needed
                continue
            _check(rc)
            return list(arr[:n.value])

    def get_supported_memory_clocks(self) -> List[int]:
        """Supported memory clocks, MHz, highest first."""
        return self._clock_list(_lib.lib().zeus_gpu_supported_memory_clocks)

    def get_supported_graphics_clocks(self, memory_clock_mhz: Optional[int] = None) -> List[int]:
        """Supported SM clocks at a memory clock (default: the highest), MHz, highest first."""
        if memory_clock_mhz is None:
            memory_clock_mhz = max(self.get_supported_memory_clocks())
        return self._clock_list(_lib.lib().zeus_gpu_supported_graphics_clocks, c_uint(int(memory_clock_mhz)))

    def set_memory_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        _check(_lib.lib().zeus_gpu_set_memory_locked_clocks(self._h(), self.gpu_index, int(min_clock_mhz),
                                                            int(max_clock_mhz)))

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        _check(_lib.lib().zeus_gpu_reset_memory_locked_clocks(self._h(), self.gpu_index))

    def set_gpu_locked_clocks(self, min_clock_mhz: int, max_clock_mhz: int, block: bool = True) -> None:
        _check(_lib.lib().zeus_gpu_set_locked_clocks(self._h(), self.gpu_index, int(min_clock_mhz),
                                                     int(max_clock_mhz)))

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        _check(_lib.lib().zeus_gpu_reset_locked_clocks(self._h(), self.gpu_index))

    def _power(self, domain: int) -> int:
        v = c_uint()
        _check(_lib.lib().zeus_gpu_power(self._h(), self.gpu_index, domain, byref(v)))
        return v.value

    def get_instant_power_usage(self) -> int:
        """Power draw now, mW."""
        return self._power(_lib.ZEUS_POWER_INSTANT)

    def get_average_power_usage(self) -> int:
        """Power averaged over the GPU's own window (about 1 s), mW."""
        return self._power(_lib.ZEUS_POWER_AVERAGE)

    def get_average_memory_power_usage(self) -> int:
        """The memory's average power, mW (ZeusGPUNotSupportedError where the GPU cannot say)."""
        return self._power(_lib.ZEUS_POWER_MEMORY_AVERAGE)

    def supports_get_total_energy_consumption(self) -> bool:
        """Whether the GPU has a total-energy counter (Volta and newer)."""
        v = c_bool()
        _check(_lib.lib().zeus_gpu_energy_counter_supported(self._h(), self.gpu_index, byref(v)))
        return v.value

    def get_total_energy_consumption(self) -> int:
        """Energy since the driver loaded, mJ."""
        v = c_uint64()
        _check(_lib.lib().zeus_gpu_total_energy(self._h(), self.gpu_index, byref(v)))
        return v.value

    def get_gpu_temperature(self) -> int:
        """Die temperature, degrees Celsius."""
        v = c_uint()
        _check(_lib.lib().zeus_gpu_temperature(self._h(), self.gpu_index, byref(v)))
        return v.value

    def get_architecture(self) -> int:
        """(not in the original's GPU class) NVML's architecture number (4 Pascal, 7 Ampere, ...)."""
        v = c_uint()
        _check(_lib.lib().zeus_gpu_architecture(self._h(), self.gpu_index, byref(v)))
        return v.value


# ---- a set of GPUs ---------------------------------------------------------------------------------


def _per_gpu(name: str):
    def method(self, gpu_index: int, *args, **kwargs):
        return getattr(self.gpus[gpu_index], name)(*args, **kwargs)
    method.__name__ = name
    method.__doc__ = getattr(GPU, name).__doc__
    return method


class GPUs(abc.ABC):
    """A collection of :class:`GPU` objects whose methods take the GPU index first (the original's
    ``GPUs``)."""

    @property
    @abc.abstractmethod
    def gpus(self) -> Sequence[GPU]:
        """The GPUs tracked."""

    def __len__(self) -> int:
        return len(self.gpus)

    def _ensure_homogeneous(self) -> None:
        names = [g.get_name() for g in self.gpus]
        if len(set(names)) > 1:
            raise ZeusGPUHeterogeneousError(f"Heterogeneous GPUs found: {names}")

    get_name = _per_gpu("get_name")
    get_power_management_limit_constraints = _per_gpu("get_power_management_limit_constraints")
    get_power_management_limit = _per_gpu("get_power_management_limit")
    set_power_management_limit = _per_gpu("set_power_management_limit")
    reset_power_management_limit = _per_gpu("reset_power_management_limit")
    set_persistence_mode = _per_gpu("set_persistence_mode")
    get_persistence_mode = _per_gpu("get_persistence_mode")
    get_supported_memory_clocks = _per_gpu("get_supported_memory_clocks")
    set_memory_locked_clocks = _per_gpu("set_memory_locked_clocks")
    reset_memory_locked_clocks = _per_gpu("reset_memory_locked_clocks")
    get_supported_graphics_clocks = _per_gpu("get_supported_graphics_clocks")
    set_gpu_locked_clocks = _per_gpu("set_gpu_locked_clocks")
    reset_gpu_locked_clocks = _per_gpu("reset_gpu_locked_clocks")
    get_average_power_usage = _per_gpu("get_average_power_usage")
    get_instant_power_usage = _per_gpu("get_instant_power_usage")
    get_average_memory_power_usage = _per_gpu("get_average_memory_power_usage")
    supports_get_total_energy_consumption = _per_gpu("supports_get_total_energy_consumption")
    get_total_energy_consumption = _per_gpu("get_total_energy_consumption")
    get_gpu_temperature = _per_gpu("get_gpu_temperature")


_add_aliases(GPUs)


class LibzeusGPUs(GPUs):
    """The GPUs of a libzeus device set (``zeusc.device.Devices``): NVIDIA GPUs through NVML, or
    simulated GPUs. What :func:`get_gpus` returns."""

    def __init__(self, devices=None, ensure_homogeneous: bool = False) -> None:
        from .._devices import Devices
        self.devices = devices if devices is not None else Devices.default()
        n = _lib.lib().zeus_gpu_count(self.devices._handle())
        self._gpus = [GPU(i, self.devices) for i in range(n)]
        if ensure_homogeneous:
            self._ensure_homogeneous()

    @property
    def gpus(self) -> Sequence[GPU]:
        return self._gpus

    @property
    def backend(self) -> str:
        """(not in the original) "nvml", "sim" or "none"."""
        return self.devices.backend


class EmptyGPUs(GPUs):
    """No GPU: every per-GPU call raises ValueError, as the original's."""

    @property
    def gpus(self) -> Sequence[GPU]:
        return []

    def __len__(self) -> int:
        return 0

    def _ensure_homogeneous(self) -> None:
        raise ValueError("No GPUs available to ensure homogeneity.")

    def __getattribute__(self, name):
        attr = object.__getattribute__(self, name)
        if name in _PER_GPU_NAMES:
            def unavailable(*_args, **_kwargs):
                raise ValueError("No GPUs available.")
            return unavailable
        return attr


_PER_GPU_NAMES = {n for n, v in vars(GPUs).items() if callable(v) and not n.startswith("_")} | set(_ALIASES)

_lock = threading.Lock()
_gpus: Optional[LibzeusGPUs] = None


def get_gpus(ensure_homogeneous: bool = False) -> GPUs:
    """The process's GPUs (libzeus's default device set), created on first call.

    With a daemon configured (``nvml+zeusd`` or ``amdsmi+zeusd``: settings made by the daemon, the
    original's ``ZeusdNVIDIAGPU`` / ``ZeusdAMDGPU``), the daemon must serve gpu-control to this
    process, checked here as the original's ``NVIDIAGPUs`` checks it.

    Raises:
        ZeusGPUInitError: there is no GPU backend (``ZEUS_GPU_BACKEND`` is ``none``, or NVML does not
            load); ``ZeusMonitor`` then measures no GPU, as the original. Or the daemon configured
            does not serve gpu-control to this process (the API group off, the token missing,
            refused or without the scope; the message names the daemon and what is missing).
        ZeusGPUHeterogeneousError: ``ensure_homogeneous`` and the GPUs are of different models.
    """
    global _gpus
    with _lock:
        if _gpus is None:
            from .._devices import Devices
            try:
                dev = Devices.default()
            except ZeusError as e:
                raise ZeusGPUInitError(f"No GPU backend is available: {e}") from e
            if dev.backend == "none":
                raise ZeusGPUInitError("No GPU backend is available (ZEUS_GPU_BACKEND=none, or NVML did not load; "
                                       "ZEUS_GPU_BACKEND=sim simulates GPUs)")
            if dev.backend in ("nvml+zeusd", "amdsmi+zeusd"):
                _require_daemon_gpu_control(dev.backend)
            _gpus = LibzeusGPUs(dev)
    if ensure_homogeneous:
        _gpus._ensure_homogeneous()
    return _gpus


def _require_daemon_gpu_control(backend: str) -> None:
    """The original's ``require_capabilities(client, control_gpu=True)`` of each ``ZeusdNVIDIAGPU``
    (``ZeusdAMDGPU``), on the daemon of the environment, raised as its ``NVIDIAGPUs`` raises it."""
    from ...utils.zeusd import ZeusdClient, require_capabilities
    try:
        require_capabilities(ZeusdClient(), control_gpu=True)
    except ZeusError as e:   # ZeusdConnectionError, ZeusdAuthError, ZeusdCapabilityError
        raise ZeusGPUInitError(f"The GPUs' settings are made by the zeus daemon ({backend}; reads stay local), "
                               f"which must serve gpu-control to this process: {e}") from e


@functools.lru_cache(maxsize=None)
def _arch_name(arch: int) -> str:
    return _lib.lib().zeus_gpu_architecture_name(arch).decode()


__all__ = [
    "get_gpus", "GPU", "GPUs", "LibzeusGPUs", "EmptyGPUs", "ZeusBaseGPUError", "ZeusGPUInitError",
    "ZeusGPUInvalidArgError", "ZeusGPUNotSupportedError", "ZeusGPUNoPermissionError", "ZeusGPUAlreadyInitializedError",
    "ZeusGPUNotFoundError", "ZeusGPUInsufficientSizeError", "ZeusGPUInsufficientPowerError",
    "ZeusGPUDriverNotLoadedError", "ZeusGPUTimeoutError", "ZeusGPUIRQError", "ZeusGPULibraryNotFoundError",
    "ZeusGPUFunctionNotFoundError", "ZeusGPUCorruptedInfoROMError", "ZeusGPULostError", "ZeusGPUResetRequiredError",
    "ZeusGPUOperatingSystemError", "ZeusGPULibRMVersionMismatchError", "ZeusGPUMemoryError", "ZeusGPUUnknownError",
    "ZeusGPUHeterogeneousError",
]
