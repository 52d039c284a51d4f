"""NVIDIA Jetson boards (the original's ``zeus.device.soc.jetson``) over libzeus's zeus/soc.h.

libzeus finds the INA3221 power rails in sysfs as the original does (``ina3221x`` or ``ina3221``
under ``/sys/bus/i2c/drivers``, the older ``rail_name_<N>`` and newer hwmon ``in<N>_label``
layouts, a power file or voltage x current) and names them cpu, gpu and total. Where the original
polls them in a spawned process, a libzeus monitor's polling thread integrates them here.
``ZEUS_JETSON_ROOT`` names a folder that stands for ``/sys`` (and makes any machine a Jetson).
See docs/jetson.md.
"""
from __future__ import annotations

import threading
from ctypes import byref, c_double, c_uint, c_void_p
from dataclasses import asdict, dataclass, fields
from typing import Optional

from ... import _lib
from .common import SoC, SoCMeasurement, ZeusSoCInitError


class ZeusJetsonInitError(ZeusSoCInitError):
    """The Jetson's rails could not be found or read."""


#: The rails in zeus_soc_rail order, with the original's JetsonMeasurement field of each.
RAIL_FIELDS = ("cpu_energy_mj", "gpu_energy_mj", "total_energy_mj")


@dataclass
class JetsonMeasurement(SoCMeasurement):
    """Energy of the Jetson's rails, mJ; None for a rail the board does not have."""

    cpu_energy_mj: Optional[float] = None
    gpu_energy_mj: Optional[float] = None
    total_energy_mj: Optional[float] = None

    def __sub__(self, other: "JetsonMeasurement") -> "JetsonMeasurement":
        if not isinstance(other, type(self)):
            raise TypeError("Subtraction is only supported between Jetson instances.")
        out = self.__class__()
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a is None and b is None:
                continue
            setattr(out, f.name, a - b)
        return out

    @classmethod
    def _from_c(cls, r) -> "JetsonMeasurement":
        """From a zeus_measurement's soc fields (J) of a window."""
        return cls(*(r.soc_energy_j[k] * 1000.0 if r.soc_rail_valid[k] else None
                     for k in range(_lib.ZEUS_SOC_NUM_RAILS)))


def jetson_is_available() -> bool:
    """Whether this machine is a Jetson: Linux on aarch64 with /usr/lib/aarch64-linux-gnu/tegra or
    /etc/nv_tegra_release (the original's test), or ZEUS_JETSON_ROOT set."""
    return bool(_lib.lib().zeus_soc_jetson_available())


class Jetson(SoC):
    """A Jetson's rails, integrated since this object was made (mJ).

    Raises:
        ZeusJetsonInitError: no Jetson here, or no readable rail (the message names the folder
            or file). The original accepts a Jetson without rails and measures nothing on it.
    """

    def __init__(self) -> None:
        if not jetson_is_available():
            raise ZeusJetsonInitError("No Jetson processor was detected on the current device.")
        L = _lib.lib()
        self.measurement_states: dict = {}
        self._lock = threading.Lock()
        self._soc = c_void_p()
        self._mon = c_void_p()
        self._dev = c_void_p()
        self.available_metrics: Optional[set] = None
        rc = L.zeus_soc_open(byref(self._soc))
        if rc:
            raise ZeusJetsonInitError(_lib.errmsg(rc))
        # A monitor of no GPU and no CPU package: its polling thread integrates the rails.
        _lib.check(L.zeus_devices_open(byref(self._dev), byref(_lib.DevicesOpts(backend=b"none"))))
        none = (c_uint * 1)()
        o = _lib.MonitorOpts(devices=self._dev, gpu_indices=none, num_gpu_indices=0, cpu_indices=none,
                             num_cpu_indices=0, poll_interval_s=0.1)
        rc = L.zeus_monitor_open(byref(self._mon), byref(o))
        if rc or not L.zeus_monitor_soc(self._mon):
            msg = _lib.errmsg(rc) if rc else "the Jetson's rails could not be read"
            self.close()
            raise ZeusJetsonInitError(msg)

    def rail_info(self) -> dict:
        """(not in the original) Where each rail is read from: {"cpu"|"gpu"|"total": {"label",
        "direct", "power_path", "voltage_path", "current_path"}} for the rails the board has."""
        L, out = _lib.lib(), {}
        for k in range(_lib.ZEUS_SOC_NUM_RAILS):
            d = _lib.SocRailDescC()
            _lib.check(L.zeus_soc_rail_info(self._soc, k, byref(d)))
            if d.present:
                out[L.zeus_soc_rail_name(k).decode()] = {
                    "label": d.label.decode(), "direct": bool(d.direct), "power_path": d.power_path.decode(),
                    "voltage_path": d.voltage_path.decode(), "current_path": d.current_path.decode()}
        return out

    def get_available_metrics(self) -> set:
        """The JetsonMeasurement fields this board measures ({"total_energy_mj", ...})."""
        if self.available_metrics is None:
            self.available_metrics = {k for k, v in asdict(self.get_total_energy_consumption()).items()
                                      if v is not None}
        return self.available_metrics

    def get_total_energy_consumption(self, timeout: float = 15.0) -> JetsonMeasurement:
        """Each rail's energy since this object was made, mJ (`timeout` is the original's and unused:
        nothing here waits on another process)."""
        L = _lib.lib()
        if not self._mon:
            raise ValueError("this Jetson is closed")
        vals = []
        for k in range(_lib.ZEUS_SOC_NUM_RAILS):
            if not L.zeus_soc_has_rail(self._soc, k):
                vals.append(None)
                continue
            j = c_double()
            _lib.check(L.zeus_monitor_soc_energy_now(self._mon, k, byref(j)))
            vals.append(j.value * 1000.0)
        return JetsonMeasurement(*vals)

    def begin_window(self, key: str, restart: bool = False) -> None:
        with self._lock:
            if key in self.measurement_states and not restart:
                raise KeyError(f"Measurement window '{key}' already exists")
            self.measurement_states[key] = self.get_total_energy_consumption()

    def end_window(self, key: str) -> JetsonMeasurement:
        with self._lock:
            try:
                start = self.measurement_states.pop(key)
            except KeyError:
                raise KeyError(f"Measurement window '{key}' does not exist") from None
        return self.get_total_energy_consumption() - start

    def close(self) -> None:
        """Stops the polling thread and releases the rails. Idempotent."""
        L = _lib.lib()
        if self._mon:
            L.zeus_monitor_close(self._mon)
            self._mon = c_void_p()
        if self._dev:
            L.zeus_devices_close(self._dev)
            self._dev = c_void_p()
        if self._soc:
            L.zeus_soc_close(self._soc)
            self._soc = c_void_p()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


__all__ = ["Jetson", "JetsonMeasurement", "ZeusJetsonInitError", "jetson_is_available"]
