"""CPU packages (Intel RAPL) as the original's ``zeus.device.cpu`` presents them, over libzeus.

:func:`get_cpus` returns the packages whose RAPL energy counter is readable
(``/sys/class/powercap/intel-rapl:*``, or ``ZEUS_RAPL_ROOT``), each with
``get_total_energy_consumption()`` giving a :class:`CpuDramMeasurement` in mJ (the package, and
its DRAM zone where it has one).
"""
from __future__ import annotations

import abc
import threading
from ctypes import byref, c_bool, c_uint64
from dataclasses import dataclass
from typing import Optional, Sequence

from .. import _lib
from ..exceptions import ZeusError


class ZeusBaseCPUError(ZeusError):
    """Base class of every CPU error."""

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message


class ZeusCPUInitError(ZeusBaseCPUError):
    """No CPU package can be read."""


class ZeusCPUNoPermissionError(ZeusBaseCPUError):
    """Reading RAPL needs root."""


class ZeusCPUNotFoundError(ZeusBaseCPUError):
    """No such CPU package."""


@dataclass
class CpuDramMeasurement:
    """Energy of one package (``cpu_mj``) and of its DRAM zone (``dram_mj``, None without one), mJ.
    Division scales both, so ``m / 1000`` is in J (as the original's ZeusMonitor uses it)."""

    cpu_mj: float
    dram_mj: Optional[float] = None

    def __truediv__(self, factor: float) -> "CpuDramMeasurement":
        return CpuDramMeasurement(self.cpu_mj / factor, None if self.dram_mj is None else self.dram_mj / factor)


class CPU(abc.ABC):
    """One CPU package."""

    def __init__(self, cpu_index: int) -> None:
        self.cpu_index = cpu_index

    @abc.abstractmethod
    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        """Energy counters, mJ."""

    @abc.abstractmethod
    def supports_get_dram_energy_consumption(self) -> bool:
        """Whether the package has a DRAM zone."""


class RAPLCPU(CPU):
    """A package read through libzeus (zeus_cpu_energy)."""

    def _read(self):
        pkg, dram, has = c_uint64(), c_uint64(), c_bool()
        rc = _lib.lib().zeus_cpu_energy(self.cpu_index, byref(pkg), byref(has), byref(dram))
        if rc == -4:
            raise ZeusCPUNoPermissionError(_lib.errmsg(rc))
        if rc == -5:
            raise ZeusCPUNotFoundError(_lib.errmsg(rc))
        _lib.check(rc)
        return pkg.value, has.value, dram.value

    def get_total_energy_consumption(self) -> CpuDramMeasurement:
        pkg, has, dram = self._read()
        return CpuDramMeasurement(float(pkg), float(dram) if has else None)

    def supports_get_dram_energy_consumption(self) -> bool:
        return self._read()[1]


class CPUs(abc.ABC):
    """A collection of :class:`CPU` objects; methods take the package index first."""

    @property
    @abc.abstractmethod
    def cpus(self) -> Sequence[CPU]:
        """The packages tracked."""

    def __len__(self) -> int:
        return len(self.cpus)

    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        return self.cpus[index].get_total_energy_consumption()

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        return self.cpus[index].supports_get_dram_energy_consumption()

    getTotalEnergyConsumption = get_total_energy_consumption  # the original's older name


class RAPLCPUs(CPUs):
    """Every readable RAPL package."""

    def __init__(self) -> None:
        n = _lib.lib().zeus_cpu_count()
        if n == 0:
            raise ZeusCPUInitError("No readable RAPL package (/sys/class/powercap/intel-rapl:*; reading it may need "
                                   "root)")
        self._cpus = [RAPLCPU(i) for i in range(n)]

    @property
    def cpus(self) -> Sequence[CPU]:
        return self._cpus


class EmptyCPUs(CPUs):
    """No CPU package: per-package calls raise ValueError."""

    @property
    def cpus(self) -> Sequence[CPU]:
        return []

    def __len__(self) -> int:
        return 0

    def get_total_energy_consumption(self, index: int) -> CpuDramMeasurement:
        raise ValueError("No CPUs available.")

    def supports_get_dram_energy_consumption(self, index: int) -> bool:
        raise ValueError("No CPUs available.")

    getTotalEnergyConsumption = get_total_energy_consumption


_lock = threading.Lock()
_cpus: Optional[CPUs] = None


def get_cpus() -> CPUs:
    """The readable CPU packages. ZeusCPUInitError when there is none."""
    global _cpus
    with _lock:
        if _cpus is None:
            _cpus = RAPLCPUs()
        return _cpus


__all__ = ["get_cpus", "CPU", "CPUs", "RAPLCPU", "RAPLCPUs", "EmptyCPUs", "CpuDramMeasurement", "ZeusBaseCPUError",
           "ZeusCPUInitError", "ZeusCPUNoPermissionError", "ZeusCPUNotFoundError"]
