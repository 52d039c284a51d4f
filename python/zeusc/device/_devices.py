"""GPUs behind libzeus's device layer (zeus/device.h), and the simulated GPU (zeus/sim.h).

Not part of the original API: the original reads the process's GPUs implicitly, which
:class:`zeusc.monitor.ZeusMonitor` does too when given no ``devices``. This module is for
programs and tests that want their own device set (another backend, simulated GPUs, the fake
NVML), and for the simulated GPU's controls::

    from zeusc.device import Devices
    with Devices(backend="sim") as dev:          # ZEUS_SIM_* settings, virtual clock by default
        node = dev.sim_node()
        node.work(0, 10)                          # 10 units of work on GPU 0
        print(node.true_energy(0))                # ground truth, J

Units follow the C library: power in mW, energy in J (mJ where the name says so), time in s.
"""
from __future__ import annotations

import ctypes
from ctypes import byref, c_bool, c_double, c_int, c_uint, c_uint64, c_void_p

from .. import _lib
from .._closeable import Closeable, call_guarded, guard_methods


# A GPU index that does not exist is a bad argument (ValueError), as for the monitor.
def _chk(rc):
    if rc < 0:
        from ..exceptions import ZeusValueError
        raise _lib.error(rc, {-5: ZeusValueError})


def _opt_bytes(s):
    return None if s is None else str(s).encode()


@guard_methods("_depend", "_undepend")
class Devices(Closeable):
    """A set of GPUs from one backend (zeus_devices_open).

    Args:
        backend: "nvml", "amdsmi", "sim", "none" or "zeusd"; None: ZEUS_GPU_BACKEND, else nvml when
            it loads, else zeusd when a daemon is configured, else amdsmi when it loads and lists
            GPUs, else none.
        nvml_library: the NVML library to load; None: ZEUS_NVML_LIBRARY, else libnvidia-ml.so.1.
        visible_devices: a CUDA_VISIBLE_DEVICES value to apply; None: the environment's.
        all_devices: ignore CUDA_VISIBLE_DEVICES.
        keep_settings_on_close: do not put back changed settings when closed.
        daemon: the zeus daemon (or zeusd) to send settings to: None: ZEUSD_SOCK_PATH, else
            ZEUSD_HOST_PORT, else none; "": never; "unix:PATH" or "tcp:HOST:PORT". Through a daemon
            nothing here needs root, and the daemon gives the settings back if this process dies.
        daemon_override: take over settings another client of the daemon holds (otherwise
            :class:`~zeusc.exceptions.ZeusRuntimeError` naming the holder).
        daemon_token: the bearer token to send to the daemon (a ``zeus daemon token issue`` JWT):
            None: ``ZEUSD_TOKEN`` (unset or empty: none); "": none, whatever the environment says.

    Settings changed through the handle (power limits, persistence mode) are put back when it
    is closed (:meth:`close`, the end of a ``with`` block, or garbage collection).
    """

    def __init__(self, backend=None, nvml_library=None, visible_devices=None, all_devices=False,
                 keep_settings_on_close=False, daemon=None, daemon_override=False, daemon_token=None):
        L = _lib.lib()
        self._h = c_void_p()
        o = _lib.DevicesOpts(backend=_opt_bytes(backend), nvml_library=_opt_bytes(nvml_library),
                             visible_devices=_opt_bytes(visible_devices), all_devices=bool(all_devices),
                             keep_settings_on_close=bool(keep_settings_on_close), daemon=_opt_bytes(daemon),
                             daemon_override=bool(daemon_override), daemon_token=_opt_bytes(daemon_token))
        _lib.check(L.zeus_devices_open(byref(self._h), byref(o)))
        self._owned = True
        self._daemon_spec = daemon   # the daemon named at open (None: the environment's), for zeusd checks
        self._daemon_token = daemon_token   # and its token (None: the environment's); never shown
        # Objects whose threads read this handle (monitors, optimizers), held strongly: the garbage
        # collector clears weak references before it runs finalizers, so with a WeakSet a handle
        # and its dependents collected together could be freed while a dependent's thread still
        # used it. Each dependent leaves the set when it closes (_undepend).
        self._dependents = set()

    @classmethod
    def default(cls) -> "Devices":
        """The process-wide device set (zeus_devices_default), shared with monitors opened
        without ``devices``; closing this object does not close it."""
        L = _lib.lib()
        self = cls.__new__(cls)
        self._h = c_void_p()
        _lib.check(L.zeus_devices_default(byref(self._h)))
        self._owned = False
        self._dependents = set()
        return self

    @classmethod
    def _borrow(cls, handle) -> "Devices":
        self = cls.__new__(cls)
        self._h = c_void_p(handle)
        self._owned = False
        self._dependents = set()
        return self

    def _handle(self):
        if not self._h:
            raise ValueError("this Devices handle is closed")
        return self._h

    def _depend(self, obj) -> None:
        """Closing this handle closes `obj` first (a monitor or optimizer that reads it)."""
        self._dependents.add(obj)

    def _undepend(self, obj) -> None:
        """`obj` is closed: it no longer holds this handle."""
        deps = getattr(self, "_dependents", None)
        if deps is not None:
            deps.discard(obj)

    def close(self) -> None:
        """Restores changed settings (unless keep_settings_on_close) and releases the handle.
        Monitors reading it (and their optimizers) are closed first. Idempotent."""
        for dep in list(getattr(self, "_dependents", ())):
            dep.close()
        h = getattr(self, "_h", None)
        if not h:
            return
        owned = getattr(self, "_owned", False)

        def free():
            if owned:
                _lib.lib().zeus_devices_close(h)
            self._h = c_void_p()

        # Calls of other threads in progress finish first; later ones raise ValueError.
        self._close_guarded(free)

    @property
    def backend(self) -> str:
        """ "nvml", "sim" or "none"."""
        return _lib.lib().zeus_devices_backend(self._handle()).decode()

    def now(self) -> float:
        """Seconds on the backend's clock (the simulated clock on "sim")."""
        return _lib.lib().zeus_devices_now(self._handle())

    def gpu_count(self) -> int:
        """Number of visible GPUs."""
        return _lib.lib().zeus_gpu_count(self._handle())

    def _gpu(self, gpu) -> int:
        if isinstance(gpu, bool) or not isinstance(gpu, int):
            raise TypeError(f"GPU index must be an int, got {type(gpu).__name__}")
        if gpu < 0:
            raise ValueError(f"GPU index {gpu} is negative")
        return gpu

    def name(self, gpu: int) -> str:
        buf = ctypes.create_string_buffer(_lib.ZEUS_NAME_LEN)
        _chk(_lib.lib().zeus_gpu_name(self._handle(), self._gpu(gpu), buf, len(buf)))
        return buf.value.decode()

    def uuid(self, gpu: int) -> str:
        buf = ctypes.create_string_buffer(_lib.ZEUS_NAME_LEN)
        _chk(_lib.lib().zeus_gpu_uuid(self._handle(), self._gpu(gpu), buf, len(buf)))
        return buf.value.decode()

    def power_limit_constraints(self, gpu: int) -> tuple:
        """(min_mw, max_mw, default_mw)."""
        lo, hi, de = c_uint(), c_uint(), c_uint()
        _chk(_lib.lib().zeus_gpu_power_limit_constraints(self._handle(), self._gpu(gpu), byref(lo),
                                                               byref(hi), byref(de)))
        return lo.value, hi.value, de.value

    def get_power_limit(self, gpu: int) -> int:
        """The power limit in mW."""
        v = c_uint()
        _chk(_lib.lib().zeus_gpu_get_power_limit(self._handle(), self._gpu(gpu), byref(v)))
        return v.value

    def set_power_limit(self, gpu: int, mw: int) -> None:
        """Sets the power limit (mW); ValueError outside the constraints, PermissionError without
        the privilege."""
        if isinstance(mw, bool) or not isinstance(mw, int):
            raise TypeError(f"power limit must be an int in mW, got {type(mw).__name__}")
        if not 0 <= mw < 2**32:
            raise ValueError(f"power limit {mw} mW is outside [0, 2^32)")
        _chk(_lib.lib().zeus_gpu_set_power_limit(self._handle(), self._gpu(gpu), mw))

    def get_persistence_mode(self, gpu: int) -> bool:
        v = c_bool()
        _chk(_lib.lib().zeus_gpu_get_persistence_mode(self._handle(), self._gpu(gpu), byref(v)))
        return v.value

    def total_energy_mj(self, gpu: int) -> int:
        """The GPU's energy counter in mJ (NotImplementedError without one)."""
        v = c_uint64()
        _chk(_lib.lib().zeus_gpu_total_energy(self._handle(), self._gpu(gpu), byref(v)))
        return v.value

    def instant_power_mw(self, gpu: int) -> int:
        v = c_uint()
        _chk(_lib.lib().zeus_gpu_instant_power(self._handle(), self._gpu(gpu), byref(v)))
        return v.value

    def power_scope(self, gpu: int) -> str:
        """What the GPU's power and energy readings cover: "gpu", or "module" where NVML gives only
        the superchip module's (Grace Hopper: CPU + memory + GPU; docs/grace-hopper.md)."""
        v = c_int()
        _chk(_lib.lib().zeus_gpu_power_scope(self._handle(), self._gpu(gpu), byref(v)))
        return _lib.lib().zeus_power_scope_name(v.value).decode()

    def restore(self) -> None:
        """Puts back every setting changed through this handle (zeus_devices_restore)."""
        _lib.check(_lib.lib().zeus_devices_restore(self._handle()))

    def sim_node(self) -> "SimNode":
        """The simulated node behind a "sim" handle (ValueError for other backends)."""
        n = _lib.lib().zeus_devices_sim_node(self._handle())
        if not n:
            raise ValueError(f"backend {self.backend!r} has no simulated node (use backend='sim')")
        return SimNode(n, self)


def restore_all() -> None:
    """Restores the GPUs of every open device handle (zeus_devices_restore_all)."""
    _lib.lib().zeus_devices_restore_all()


class SimNode:
    """The simulated GPUs of a "sim" device set (borrowed from it: valid while it is open).

    GPU numbers here are the node's own; on a handle that honours CUDA_VISIBLE_DEVICES they
    can differ from visible indices (see :meth:`node_index`).
    """

    def __init__(self, handle, devices: Devices):
        self._n = c_void_p(handle)
        self._devices = devices  # keeps the handle (and so the node) alive

    def _call(self, fn, *args):
        """fn(node, *args) as a call of the Devices' guard: the node lives as long as the handle,
        so closing the Devices on another thread waits for it (and later calls raise ValueError)."""
        return call_guarded(self._devices, fn, self._n, *args)

    def node_index(self, gpu: int) -> int:
        """The node GPU behind visible index `gpu`."""
        out = c_uint()
        d = self._devices
        _chk(call_guarded(d, _lib.lib().zeus_devices_sim_index, d._h, gpu, byref(out)))
        return out.value

    def gpu_count(self) -> int:
        return self._call(_lib.lib().zeus_sim_node_gpu_count)

    def now(self) -> float:
        """The node's clock in s."""
        return self._call(_lib.lib().zeus_sim_now)

    def work(self, gpu: int, units: float) -> float:
        """Runs `units` of work on one GPU (the others idle); returns the seconds it took."""
        el = c_double()
        _lib.check(self._call(_lib.lib().zeus_sim_work, gpu, float(units), byref(el)))
        return el.value

    def work_all(self, units) -> float:
        """Runs units[i] of work on every GPU i at once; returns the seconds the longest took."""
        n = self.gpu_count()
        vals = list(units)
        if len(vals) != n:
            raise ValueError(f"work_all: {len(vals)} values given for {n} simulated GPUs")
        arr = (c_double * max(n, 1))(*vals)
        el = c_double()
        _lib.check(self._call(_lib.lib().zeus_sim_work_all, arr, byref(el)))
        return el.value

    def idle(self, seconds: float) -> None:
        """Lets every GPU idle for `seconds`."""
        _lib.check(self._call(_lib.lib().zeus_sim_idle, float(seconds)))

    def set_load(self, gpu: int, busy: bool) -> None:
        """Marks GPU `gpu` kept busy (or not) by a load outside the simulation: between pieces of
        work it draws the working power of its knobs instead of idle power."""
        _lib.check(self._call(_lib.lib().zeus_sim_gpu_set_load, gpu, bool(busy)))

    def true_energy(self, gpu: int) -> float:
        """Ground truth: the exact energy (J) GPU `gpu` used since the node opened."""
        j = c_double()
        _lib.check(self._call(_lib.lib().zeus_sim_true_energy, gpu, byref(j)))
        return j.value


__all__ = ["Devices", "SimNode", "restore_all"]
