"""ctypes binding of zeus/grid.h (the optional component ZEUS_WITH_GRID), shared by
zeusc.monitor.carbon and zeusc.monitor.price. Not API."""
from __future__ import annotations

import ctypes
import math
import json
import sys
import threading
from ctypes import (POINTER, Structure, byref, c_bool, c_char, c_char_p, c_double, c_int, c_size_t,
                    c_uint, c_void_p)

from .. import _lib
from .. import exceptions as _exc
from ..utils.framework import sync_if_loaded

ZEUS_GRID_ELECTRICITYMAPS = 0
ZEUS_GRID_OPENEI = 1
ZEUS_ENOENT = -5  # zeus/error.h


class GridOpts(Structure):
    """zeus_grid_opts."""
    _fields_ = [
        ("provider", c_int),
        ("lat", c_double),
        ("lon", c_double),
        ("url", c_char_p),
        ("api_key", c_char_p),
        ("api_key_file", c_char_p),
        ("timeout_s", c_double),
        ("estimate", c_bool),
        ("emission_factor_type", c_char_p),
        ("label", c_char_p),
        ("sector", c_char_p),
        ("radius", c_uint),
        ("currency", c_char_p),
    ]


class GridMonitorOpts(Structure):
    """zeus_grid_monitor_opts."""
    _fields_ = [
        ("grid", c_void_p),
        ("monitor", c_void_p),
        ("gpu_indices", POINTER(c_uint)),
        ("num_gpu_indices", c_size_t),
        ("cpu_indices", POINTER(c_uint)),
        ("num_cpu_indices", c_size_t),
        ("poll_interval_s", c_double),
        ("max_age_s", c_double),
    ]


class GridMeasurementC(Structure):
    """zeus_grid_measurement."""
    _fields_ = [
        ("energy", _lib.MeasurementC),
        ("valid", c_bool),
        ("gpu", c_double * _lib.ZEUS_MAX_GPUS),
        ("cpu", c_double * _lib.ZEUS_MAX_CPUS),
        ("dram", c_double * _lib.ZEUS_MAX_CPUS),
        ("total", c_double),
        ("num_segments", c_uint),
        ("error_code", c_int),
        ("error", c_char * 512),
    ]


class GridHistoryPoint(Structure):
    """zeus_grid_history_point."""
    _fields_ = [
        ("time_unix_s", c_double),
        ("intensity_g_per_kwh", c_double),
    ]


ZEUS_GRID_HISTORY_MAX = 1024  # zeus/grid.h

_TABLE = {
    "zeus_grid_opts_init": (None, [POINTER(GridOpts)]),
    "zeus_grid_open": (c_int, [POINTER(c_void_p), POINTER(GridOpts)]),
    "zeus_grid_close": (None, [c_void_p]),
    "zeus_grid_unit": (c_char_p, [c_void_p]),
    "zeus_grid_url": (c_char_p, [c_void_p]),
    "zeus_grid_fetch": (c_int, [c_void_p]),
    "zeus_grid_rate": (c_int, [c_void_p, c_double, POINTER(c_double), POINTER(c_double)]),
    "zeus_grid_openei_tables": (c_int, [c_void_p, POINTER(c_double), c_size_t, POINTER(c_size_t),
                                        POINTER((c_int * 24) * 12), POINTER((c_int * 24) * 12)]),
    "zeus_grid_openei_json": (c_int, [c_void_p, POINTER(c_void_p)]),
    "zeus_grid_history": (c_int, [c_void_p, POINTER(GridHistoryPoint), c_size_t, POINTER(c_size_t)]),
    "zeus_free": (None, [c_void_p]),
    "zeus_grid_monitor_opts_init": (None, [POINTER(GridMonitorOpts)]),
    "zeus_grid_monitor_open": (c_int, [POINTER(c_void_p), POINTER(GridMonitorOpts)]),
    "zeus_grid_monitor_close": (None, [c_void_p]),
    "zeus_grid_monitor_begin_window": (c_int, [c_void_p, c_char_p]),
    "zeus_grid_monitor_end_window": (c_int, [c_void_p, c_char_p, POINTER(GridMeasurementC)]),
    "zeus_grid_monitor_rate": (c_int, [c_void_p, POINTER(c_double)]),
}

_bound = None
_bind_lock = threading.Lock()


def lib() -> ctypes.CDLL:
    """libzeus with zeus/grid.h bound, or ZeusUnavailableError when it was built without it."""
    global _bound
    if _bound is not None:
        return _bound
    with _bind_lock:
        L = _lib.lib()
        if not hasattr(L, "zeus_grid_open"):
            raise _exc.ZeusUnavailableError(
                f"carbon and cost windows (zeus/grid.h) not in this libzeus ({_lib.library_path()} exports no "
                "zeus_grid_open): build libzeus with -DZEUS_WITH_GRID=ON (it needs libcurl)")
        for name, (res, args) in _TABLE.items():
            fn = getattr(L, name)
            fn.restype = res
            fn.argtypes = args
        _bound = L
        return L


def _s(v) -> bytes | None:
    return None if v is None else str(v).encode()


class Provider:
    """A C zeus_grid built from the Python client's attributes, rebuilt when they change (the
    original's clients read their attributes at each request)."""

    def _grid_opts(self) -> tuple:  # pragma: no cover - overridden
        raise NotImplementedError

    def _handle(self) -> c_void_p:
        spec = self._grid_opts()
        cached = getattr(self, "_grid_cache", None)
        if cached is not None and cached[0] == spec:
            return cached[1]
        L = lib()
        o = GridOpts()
        L.zeus_grid_opts_init(byref(o))
        (o.provider, o.lat, o.lon, url, key, key_file, o.timeout_s, o.estimate, ft, label, sector, o.radius,
         currency) = spec
        keep = [_s(url), _s(key), _s(key_file), _s(ft), _s(label), _s(sector), _s(currency)]
        o.url, o.api_key, o.api_key_file, o.emission_factor_type, o.label, o.sector, o.currency = keep
        h = c_void_p()
        _lib.check(L.zeus_grid_open(byref(h), byref(o)))
        if cached is not None:  # a monitor may still use it: freed with the client
            self.__dict__.setdefault("_grid_retired", []).append(cached[1])
        self._grid_cache = (spec, h)
        return h

    def _release(self) -> None:
        cached = getattr(self, "_grid_cache", None)
        handles = self.__dict__.pop("_grid_retired", [])
        if cached is not None:
            self._grid_cache = None
            handles.append(cached[1])
        for h in handles:
            lib().zeus_grid_close(h)

    def __del__(self):
        try:
            self._release()
        except Exception:
            pass

    @property
    def url(self) -> str:
        """The base URL requests go to."""
        return lib().zeus_grid_url(self._handle()).decode()

    def _fetch(self, http_error, not_found) -> c_void_p:
        if not (-90 <= float(self.lat) <= 90 and -180 <= float(self.long) <= 180):
            raise not_found(f"nothing at lat, lon [{self.lat}, {self.long}]: not a latitude in [-90, 90] and a "
                            "longitude in [-180, 180]")
        h = self._handle()
        L = lib()
        rc = L.zeus_grid_fetch(h)
        if rc:
            msg = _lib.errmsg(rc)
            if rc == ZEUS_ENOENT:
                raise not_found(msg)
            raise http_error(msg)
        return h


    def _history(self, http_error, not_found) -> list[tuple[float, float]]:
        """(unix time in s, gCO2eq/kWh) of each hour the service gave, in its order."""
        if not (-90 <= float(self.lat) <= 90 and -180 <= float(self.long) <= 180):
            raise not_found(f"nothing at lat, lon [{self.lat}, {self.long}]: not a latitude in [-90, 90] and a "
                            "longitude in [-180, 180]")
        h = self._handle()
        L = lib()
        points = (GridHistoryPoint * ZEUS_GRID_HISTORY_MAX)()
        n = c_size_t()
        rc = L.zeus_grid_history(h, points, ZEUS_GRID_HISTORY_MAX, byref(n))
        if rc:
            msg = _lib.errmsg(rc)
            if rc == ZEUS_ENOENT:
                raise not_found(msg)
            raise http_error(msg)
        # NaN: the service had no value for that hour (null), passed on as None as the original does
        return [(points[i].time_unix_s, None if math.isnan(points[i].intensity_g_per_kwh) else
                 points[i].intensity_g_per_kwh) for i in range(n.value)]


def openei_tables(h, not_found) -> dict:
    """The rate's tables as the last fetch found them (the original's dict)."""
    L = lib()
    p = c_void_p()
    rc = L.zeus_grid_openei_json(h, byref(p))
    if rc:
        raise not_found(_lib.errmsg(rc))
    try:
        text = ctypes.string_at(p.value).decode()
    finally:
        L.zeus_free(p)
    d = json.loads(text)
    return {k: d[k] for k in ("energy_rate_structure", "energy_weekday_schedule", "energy_weekend_schedule")}


class GridMonitor:
    """A zeus_grid_monitor on a zeusc ZeusMonitor's C monitor."""

    def __init__(self, provider: Provider, zeus_monitor, poll_interval_s: float, max_age_s: float) -> None:
        self._h = c_void_p()
        L = lib()
        self._provider = provider
        self._monitor = zeus_monitor
        o = GridMonitorOpts()
        L.zeus_grid_monitor_opts_init(byref(o))
        o.grid = provider._handle()
        o.monitor = zeus_monitor._handle()
        o.poll_interval_s = float(poll_interval_s)
        o.max_age_s = float(max_age_s)
        _lib.check(L.zeus_grid_monitor_open(byref(self._h), byref(o)))
        # Closed before the monitor whose windows it uses (ZeusMonitor.close closes dependents).
        zeus_monitor._dependents.add(self)

    def begin(self, key: str) -> None:
        rc = lib().zeus_grid_monitor_begin_window(self._h, key.encode())
        if rc:
            _lib.check(rc, {ZEUS_ENOENT: _exc.ZeusValueError})

    def end(self, key: str) -> GridMeasurementC:
        r = GridMeasurementC()
        rc = lib().zeus_grid_monitor_end_window(self._h, key.encode(), byref(r))
        if rc:
            _lib.check(rc, {ZEUS_ENOENT: _exc.ZeusValueError})
        return r

    def close(self) -> None:
        if self._h:
            h, self._h = self._h, c_void_p()
            lib().zeus_grid_monitor_close(h)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def sync(zeus_monitor) -> None:
    """Waits for the GPU work queued through the monitor's framework, as its window bounds do."""
    if zeus_monitor.sync_with in sys.modules and zeus_monitor.gpu_indices:
        sync_if_loaded(zeus_monitor.gpu_indices, zeus_monitor.sync_with)


def split(r: GridMeasurementC, gpu_indices: list[int]):
    """The window's energy and figures as the original's dicts: (time, gpu_energy, cpu_energy,
    dram_energy, gpu_x, cpu_x, dram_x); the figures' dicts are None when not valid."""
    e = r.energy
    gpu_energy = {gpu_indices[k]: e.gpu_energy_j[k] for k in range(e.num_gpus)}
    nc = e.num_cpus
    cpu_energy = {e.cpu_indices[k]: e.cpu_energy_j[k] for k in range(nc)} or None
    dram_energy = {e.cpu_indices[k]: e.dram_energy_j[k] for k in range(nc) if e.dram_valid[k]} or None
    if not r.valid:
        return e.time_s, gpu_energy, cpu_energy, dram_energy, None, None, None
    gpu_x = {gpu_indices[k]: r.gpu[k] for k in range(e.num_gpus)}
    cpu_x = {e.cpu_indices[k]: r.cpu[k] for k in range(nc)} or None
    dram_x = {e.cpu_indices[k]: r.dram[k] for k in range(nc) if e.dram_valid[k]} or None
    return e.time_s, gpu_energy, cpu_energy, dram_energy, gpu_x, cpu_x, dram_x


class GridWindows:
    """What CarbonEmissionMonitor and EnergyCostMonitor share: a ZeusMonitor, the fetching
    GridMonitor over it, the open windows' keys, and turning a window's C result into the class's
    measurement or its exception. A subclass sets _what ("carbon emission", "energy cost") and
    implements _measurement(time, energies..., figures...) and _errors() -> (not-found class,
    HTTP class)."""

    _what = "figure"

    def _open(self, provider, provider_name: str, owner: str, gpu_indices, cpu_indices, sync_execution_with,
              poll_interval_s: float, max_age_s: float, **monitor_kw) -> None:
        if not isinstance(provider, Provider):
            raise TypeError(f"{owner}: {provider_name}, got {type(provider).__name__}")
        from .energy import ZeusMonitor
        self.zeus_monitor = ZeusMonitor(gpu_indices=gpu_indices, cpu_indices=cpu_indices,
                                        sync_execution_with=sync_execution_with, **monitor_kw)
        self.current_keys: set[str] = set()
        try:
            self._gm = GridMonitor(provider, self.zeus_monitor, poll_interval_s, max_age_s)
        except BaseException:
            self.zeus_monitor.close()
            raise

    def begin_window(self, key: str, sync_execution: bool = True) -> None:
        """Begins window `key`.

        Raises:
            ValueError: the window is open already.
        """
        if key in self.current_keys:
            raise ValueError(f"Measurement window '{key}' already exists")
        if sync_execution:
            sync(self.zeus_monitor)
        self._gm.begin(key)
        self.current_keys.add(key)

    def _end(self, key: str, sync_execution: bool):
        if key not in self.current_keys:
            raise ValueError(f"Measurement window '{key}' does not exist")
        if sync_execution:
            sync(self.zeus_monitor)
        r = self._gm.end(key)
        self.current_keys.discard(key)
        m = self._measurement(*split(r, self.zeus_monitor.gpu_indices))
        if not r.valid:
            not_found, http_error = self._errors()
            e = (not_found if r.error_code == ZEUS_ENOENT else http_error)(
                "%s of window '%s' not measured: %s" % (self._what, key, r.error.decode("utf-8", "replace")))
            e.code = r.error_code
            e.measurement = m
            raise e
        return m

    def close(self) -> None:
        """(not in the original) Stops the fetching thread and the monitor; idempotent."""
        self._gm.close()
        self.zeus_monitor.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
