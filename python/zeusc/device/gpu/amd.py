"""AMD GPUs (the original's ``zeus.device.gpu.amd``), over libzeus's ``amdsmi`` backend.

libzeus loads ROCm's ``libamd_smi.so`` itself (``ZEUS_AMDSMI_LIBRARY`` names another file), so no
``amdsmi`` Python package is needed. :class:`AMDGPUs` is the original's manager object: per-index
methods as :class:`zeusc.device.gpu.GPUs` has them, in the original's units (mW, mJ, MHz,
degrees Celsius), with the original's conversions done in C (power caps from microwatts, the energy
counter as ticks times its resolution, socket power from watts; see docs/amd.md). :func:`get_gpus`
chooses AMD GPUs by itself where NVML does not load and amdsmi lists GPUs.

With a zeus daemon configured (``ZEUSD_SOCK_PATH`` or ``ZEUSD_HOST_PORT``), :class:`AMDGPUs` holds
:class:`ZeusdAMDGPU` objects, as the original's does: amdsmi reads here, the power cap and clock
locks are set by the daemon (libzeus's ``amdsmi+zeusd`` backend), each GPU matched to the daemon's
by PCI address (docs/amd.md). As the original's, a :class:`ZeusdAMDGPU` checks at construction that
the daemon serves gpu-control to this client (the API group enabled, the token's scope granted):
``ZeusdCapabilityError`` (or ``ZeusdAuthError``) naming the daemon, the GPU and what is missing;
:class:`AMDGPUs` raises it as ``ZeusGPUInitError``. gpu-read is not needed: reads are local.

As the original's, ``reset_gpu_locked_clocks`` and ``reset_memory_locked_clocks`` are refused
(``ZeusGPUNotSupportedError``: AMD frees both clock domains at once); ``reset_locked_clocks`` frees
both. A power cap equal to the current one is not written (libzeus's amdsmi backend skips it).

Differences from the original: the Python ``amdsmi`` package is not imported (``amdsmi`` is not a
name of this module); the energy counter is not checked against power when the GPUs are opened;
MI250 odd chiplets are not detected. A :class:`ZeusdAMDGPU` sends a cap equal to the current one to
the daemon all the same (the original skips the call), so that its lease holds the cap; the
daemon's amdsmi writes nothing then.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from typing import Optional, Sequence

from ... import _lib
from ...exceptions import ZeusError
from . import GPU, GPUs, ZeusGPUInitError, ZeusGPUNotFoundError, ZeusGPUNotSupportedError, _check

_SINGLE_DOMAIN_RESET = ("AMD GPUs cannot reset a single clock domain: amdsmi's reset (performance level auto) "
                        "frees the GFX and memory clocks together. Call reset_locked_clocks to reset both.")


@functools.lru_cache(maxsize=1)
def amdsmi_is_available() -> bool:
    """Whether libzeus's amdsmi backend loads the library and lists at least one GPU (cached, as
    the original's)."""
    from .._devices import Devices
    try:
        dev = Devices(backend="amdsmi", daemon="")
    except ZeusError:
        return False
    try:
        return _lib.lib().zeus_gpu_count(dev._handle()) > 0
    finally:
        dev.close()


_shared: Optional[object] = None


def _amd_devices():
    """The amdsmi device set shared by :class:`AMDGPU` objects made without one."""
    global _shared
    if _shared is None:
        from .._devices import Devices
        try:
            _shared = Devices(backend="amdsmi", daemon="")
        except ZeusError as e:
            raise ZeusGPUInitError(f"amdsmi is not available: {e}") from e
    return _shared


class AMDGPU(GPU):
    """One AMD GPU by visible index (the original's ``AMDGPU``)."""

    def __init__(self, gpu_index: int, devices=None) -> None:
        devices = devices if devices is not None else _amd_devices()
        n = _lib.lib().zeus_gpu_count(devices._handle())
        if not 0 <= gpu_index < n:
            # as the original's, at construction, naming the indices there are
            raise ZeusGPUNotFoundError(f"HIP index {gpu_index} is not among the visible AMD GPUs: "
                                       f"HIP indices {list(range(n))}")
        super().__init__(gpu_index, devices)

    def set_persistence_mode(self, enabled: bool, block: bool = True) -> None:
        """AMD GPUs have no persistence mode."""
        raise ZeusGPUNotSupportedError("Persistence mode is not supported on AMD GPUs.")

    def get_persistence_mode(self) -> bool:
        """AMD GPUs have no persistence mode."""
        raise ZeusGPUNotSupportedError("Persistence mode is not supported on AMD GPUs.")

    def reset_gpu_locked_clocks(self, block: bool = True) -> None:
        """Refused, as the original refuses it: AMD has no reset of the GFX clock alone (use
        :meth:`reset_locked_clocks`). Nothing reaches amdsmi or the daemon."""
        raise ZeusGPUNotSupportedError(_SINGLE_DOMAIN_RESET)

    def reset_memory_locked_clocks(self, block: bool = True) -> None:
        """Refused, as the original refuses it: AMD has no reset of the memory clock alone (use
        :meth:`reset_locked_clocks`). Nothing reaches amdsmi or the daemon."""
        raise ZeusGPUNotSupportedError(_SINGLE_DOMAIN_RESET)

    def reset_locked_clocks(self, block: bool = True) -> None:
        """Frees the GFX and memory clocks together (AMD resets every domain at once): libzeus's
        ``zeus_gpu_reset_all_clocks``, one performance-level reset to auto (for a
        :class:`ZeusdAMDGPU`, one ``/gpu/reset_locked_clocks`` request to the daemon)."""
        _check(_lib.lib().zeus_gpu_reset_all_clocks(self._h(), self.gpu_index))

    def get_average_memory_power_usage(self) -> int:
        """amdsmi reports no memory power."""
        raise ZeusGPUNotSupportedError("Average memory power usage is not supported on AMD GPUs.")


def _zeusd_client(spec, token=None):
    """A ``ZeusdClient`` of the daemon a ``Devices`` ``daemon=`` names (None: the environment's), or
    None when none is named, with the token that ``Devices`` sends (its ``daemon_token=``; None:
    ``ZEUSD_TOKEN``; "": none). Its ``/discover`` (and ``/auth/whoami``) are read now."""
    from ...utils.zeusd import ZeusdClient, ZeusdConfig
    if token is None:
        token = os.environ.get("ZEUSD_TOKEN")   # the token libzeus sends too
    token = token or None
    if spec is None:
        config = ZeusdConfig.from_env()
        if config is not None and config.token != token:
            config = dataclasses.replace(config, token=token)
    elif not spec:
        config = None
    else:
        path = spec[len("unix:"):] if spec.startswith("unix:") else spec if spec.startswith("/") else None
        config = (ZeusdConfig.uds(socket_path=path, token=token) if path is not None else
                  ZeusdConfig(host_port=spec[len("tcp:"):] if spec.startswith("tcp:") else spec, token=token))
    return None if config is None else ZeusdClient(config)


def _require_gpu_control(client, gpu_index: int) -> None:
    """The original's ``require_capabilities(client, control_gpu=True)``, the message also naming the
    GPU and why gpu-control is needed."""
    from ...utils.zeusd import ZeusdAuthError, ZeusdCapabilityError, require_capabilities
    try:
        require_capabilities(client, control_gpu=True)
    except (ZeusdAuthError, ZeusdCapabilityError) as e:
        raise type(e)(f"ZeusdAMDGPU {gpu_index} (HIP index) needs the daemon to serve gpu-control to this client "
                      f"(its power cap and clock locks are set there; reads stay local): {e}") from e


def _zeusd_devices(client=None):
    """An ``amdsmi+zeusd`` device set: the daemon of ``client`` (a ``zeusc.utils.zeusd.ZeusdClient``)
    with the client's token ("" when it has none: not ``ZEUSD_TOKEN``, so that every setting is made
    under the identity the client was checked under, as the original's client sends them), else the
    daemon and token the environment names."""
    from .._devices import Devices
    daemon = client._config._stream_address if client is not None else None
    token = (client._config.token or "") if client is not None else None
    try:
        devices = Devices(backend="amdsmi", daemon=daemon, daemon_token=token)
    except ZeusError as e:
        raise ZeusGPUInitError(str(e)) from e
    if devices.backend != "amdsmi+zeusd":
        devices.close()
        raise ZeusGPUInitError("ZeusdAMDGPU needs a zeus daemon: set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, "
                               "or pass a ZeusdClient")
    return devices


class ZeusdAMDGPU(AMDGPU):
    """An AMD GPU whose power cap and clock locks are set by a zeus daemon (the original's
    ``ZeusdAMDGPU``): reads stay local to amdsmi, which needs no privilege.

    Args:
        gpu_index: the GPU's HIP index.
        client: a ``zeusc.utils.zeusd.ZeusdClient`` naming the daemon; None: the daemon of
            ``ZEUSD_SOCK_PATH`` / ``ZEUSD_HOST_PORT``.
        devices: (not in the original) an ``amdsmi+zeusd`` ``zeusc.device.Devices`` to use.

    Raises:
        ZeusdCapabilityError: the daemon does not serve gpu-control to this client (the API group is
            off, or the token lacks the scope), as the original's; the message names the daemon,
            the GPU and what is missing.
        ZeusdAuthError: the daemon requires a token and none was given, or it was refused.
        ZeusGPUInitError: no daemon configured or reachable, or the GPU's PCI address is on none of
            the daemon's GPUs or on more than one (the message names it and the daemon's GPUs).
    """

    def __init__(self, gpu_index: int, client=None, devices=None) -> None:
        if client is None:
            try:
                client = _zeusd_client(getattr(devices, "_daemon_spec", None), getattr(devices, "_daemon_token", None))
            except ZeusError as e:   # ZeusdConnectionError: not reachable, or not a current daemon
                raise ZeusGPUInitError(f"ZeusdAMDGPU {gpu_index}: {e}") from e
            if client is None:
                raise ZeusGPUInitError("ZeusdAMDGPU needs a zeus daemon: set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, "
                                       "or pass a ZeusdClient")
        # as the original's, before any setting: reads are local, so gpu-control is all it needs
        _require_gpu_control(client, gpu_index)
        super().__init__(gpu_index, devices if devices is not None else _zeusd_devices(client))
        self._client = client

    @property
    def supports_nonblocking_setters(self) -> bool:
        """The daemon's setters can return before the change is made, as the original says."""
        return True


class AMDGPUs(GPUs):
    """The AMD GPUs of this machine (the original's ``AMDGPUs``), indices honouring
    ``HIP_VISIBLE_DEVICES``, else ``CUDA_VISIBLE_DEVICES``.

    Args:
        ensure_homogeneous: raise ``ZeusGPUHeterogeneousError`` when the GPUs are of different
            models.
        devices: (not in the original) a ``zeusc.device.Devices(backend="amdsmi")`` to use; None
            opens one.

    With ``ZEUSD_SOCK_PATH`` or ``ZEUSD_HOST_PORT`` set, the GPUs are :class:`ZeusdAMDGPU`.

    Raises:
        ZeusGPUInitError: the amdsmi library does not load or initialise, a GPU cannot be matched to
            the daemon's, or the daemon does not serve gpu-control to this client (the message says
            why, as the original's).
    """

    def __init__(self, ensure_homogeneous: bool = False, devices=None) -> None:
        opened = devices is None
        if opened:
            from .._devices import Devices
            try:
                devices = Devices(backend="amdsmi")
            except ZeusError as e:
                raise ZeusGPUInitError(f"amdsmi is not available: {e}") from e
        self.devices = devices
        n = _lib.lib().zeus_gpu_count(devices._handle())
        if devices.backend == "amdsmi+zeusd":
            # one client for all, as the original's; its failures are ZeusGPUInitError there too
            try:
                client = _zeusd_client(getattr(devices, "_daemon_spec", None), getattr(devices, "_daemon_token", None))
                self._gpus = [ZeusdAMDGPU(i, client=client, devices=devices) for i in range(n)]
            except ZeusError as e:
                if opened:
                    devices.close()
                if isinstance(e, ZeusGPUInitError):
                    raise
                raise ZeusGPUInitError(str(e)) from e
        else:
            self._gpus = [AMDGPU(i, devices=devices) for i in range(n)]
        if ensure_homogeneous:
            self._ensure_homogeneous()

    def reset_locked_clocks(self, gpu_index: int, block: bool = True) -> None:
        """Frees GPU ``gpu_index``'s GFX and memory clocks together."""
        self._gpus[gpu_index].reset_locked_clocks(block)

    @property
    def gpus(self) -> Sequence[AMDGPU]:
        """The AMD GPUs tracked."""
        return self._gpus

    def close(self) -> None:
        """(not in the original) Puts back changed settings and releases the device set."""
        self.devices.close()


__all__ = ["amdsmi_is_available", "AMDGPU", "ZeusdAMDGPU", "AMDGPUs"]
