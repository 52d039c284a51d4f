"""Talking to a zeus daemon or the original zeusd (``zeus.utils.zeusd`` of the original).

:class:`ZeusdConfig` says where a daemon is (a Unix socket or ``host:port``) and which token to
send; :class:`ZeusdClient` asks it what it has (``/discover``, ``/auth/whoami``) and calls its
routes. :class:`zeusc.monitor.power_streaming.PowerStreamingClient` is configured with a list of
:class:`ZeusdConfig`.

The original speaks HTTP through ``httpx``; zeusc needs no third-party package, so
:meth:`ZeusdConfig.make_client` returns a small client over the standard library's
``http.client`` with the subset of ``httpx.Client`` that :class:`ZeusdClient` uses (``get`` and
``post`` with ``params``; responses with ``status_code``, ``text`` and ``json()``). A test may
replace ``make_client`` with one that returns an ``httpx.Client``, as the original's tests do.

The token is sent as ``Authorization: Bearer``; it never appears in a message, a log line or the
``repr`` of a config.
"""
from __future__ import annotations

import dataclasses
import http.client
import json
import logging
import os
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..exceptions import ZeusError

logger = logging.getLogger(__name__)

_TIMEOUT_S = 10.0


class ZeusdConnectionError(ZeusError):
    """Cannot reach the Zeusd daemon."""


class ZeusdAuthError(ZeusError):
    """Authentication or authorization failure."""


class ZeusdCapabilityError(ZeusError):
    """Requested capabilities exceed what the daemon offers."""


@dataclass(frozen=True)
class GpuInfo:
    """A GPU the daemon serves: its index, model name, PCI address, and whether
    ``/gpu/get_cumulative_energy`` is trustworthy for it."""

    id: int
    name: str
    pci_address: str
    cumulative_energy_available: bool


@dataclass(frozen=True)
class CpuInfo:
    """A CPU package the daemon serves (its RAPL package index) and whether it has a DRAM zone."""

    id: int
    dram_available: bool


@dataclass(frozen=True)
class GpuPowerSnapshot:
    """``/gpu/get_power``: the daemon's Unix time in ms and each GPU's power in mW."""

    timestamp_ms: int
    power_mw: Dict[int, int]


@dataclass(frozen=True)
class CpuDramPower:
    """One package's power in mW, and its DRAM's (None without a DRAM zone)."""

    cpu_mw: int
    dram_mw: Optional[int]


@dataclass(frozen=True)
class CpuPowerSnapshot:
    """``/cpu/get_power``: the daemon's Unix time in ms and each package's power."""

    timestamp_ms: int
    power_mw: Dict[int, CpuDramPower]


@dataclass(frozen=True)
class CpuEnergyResult:
    """One package's cumulative energy in µJ (None where not asked for or not available)."""

    cpu_energy_uj: Optional[int]
    dram_energy_uj: Optional[int]


# ---- a small HTTP client (the part of httpx.Client that ZeusdClient uses) ------------------------


class _Response:
    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self.content = body

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.content)


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self._path)
        except OSError:
            s.close()
            raise
        self.sock = s


class _HttpClient:
    """One request per connection; errors are OSError (ConnectionError, TimeoutError, ...)."""

    def __init__(self, socket_path: Optional[str], headers: Dict[str, str]) -> None:
        self._socket_path = socket_path
        self._headers = dict(headers)

    def request(self, method: str, url: str, params: Optional[Dict[str, str]] = None) -> _Response:
        u = urllib.parse.urlsplit(url)
        target = u.path or "/"
        query = u.query
        if params:
            extra = urllib.parse.urlencode(params, safe=",")
            query = f"{query}&{extra}" if query else extra
        if query:
            target += "?" + query
        if self._socket_path is not None:
            conn: http.client.HTTPConnection = _UnixConnection(self._socket_path, _TIMEOUT_S)
        else:
            conn = http.client.HTTPConnection(u.hostname or "localhost", u.port or 80, timeout=_TIMEOUT_S)
        try:
            conn.request(method, target, headers=self._headers)
            r = conn.getresponse()
            return _Response(r.status, r.read())
        finally:
            conn.close()

    def get(self, url: str, params: Optional[Dict[str, str]] = None) -> _Response:
        return self.request("GET", url, params)

    def post(self, url: str, params: Optional[Dict[str, str]] = None) -> _Response:
        return self.request("POST", url, params)

    def close(self) -> None:
        pass

    def __enter__(self) -> "_HttpClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _request_errors():
    """The exceptions a request may raise: OSError, and httpx's when a test put httpx in."""
    errs: Tuple[type, ...] = (OSError, http.client.HTTPException)
    try:  # pragma: no cover - only where httpx is installed
        import httpx  # noqa: PLC0415

        errs = errs + (httpx.RequestError,)
    except ImportError:
        pass
    return errs


# ---- configuration -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ZeusdConfig:
    """Where a daemon is and how to authenticate: build with :meth:`tcp`, :meth:`uds` or
    :meth:`from_env`.

    Attributes:
        host_port: ``host:port`` (TCP), or None.
        socket_path: the Unix socket's path, or None.
        token: the bearer token (a JWT of ``zeus daemon token issue``), or None.
        gpu_indices: the GPUs :class:`PowerStreamingClient` streams: None all, ``[]`` none.
        cpu_indices: the same for CPU packages. Both are ignored by :class:`ZeusdClient`.
    """

    host_port: Optional[str] = None
    socket_path: Optional[str] = None
    token: Optional[str] = dataclasses.field(default=None, repr=False)
    gpu_indices: Optional[List[int]] = None
    cpu_indices: Optional[List[int]] = None

    @classmethod
    def tcp(cls, host: str, port: int, *, token: Optional[str] = None, gpu_indices: Optional[List[int]] = None,
            cpu_indices: Optional[List[int]] = None) -> "ZeusdConfig":
        """A daemon at ``host:port`` over TCP."""
        return cls(host_port=f"{host}:{port}", token=token, gpu_indices=gpu_indices, cpu_indices=cpu_indices)

    @classmethod
    def uds(cls, socket_path: str, *, token: Optional[str] = None, gpu_indices: Optional[List[int]] = None,
            cpu_indices: Optional[List[int]] = None) -> "ZeusdConfig":
        """A daemon on the Unix socket ``socket_path``."""
        return cls(socket_path=socket_path, token=token, gpu_indices=gpu_indices, cpu_indices=cpu_indices)

    @classmethod
    def from_env(cls) -> Optional["ZeusdConfig"]:
        """``ZEUSD_SOCK_PATH`` (a Unix socket) if set, else ``ZEUSD_HOST_PORT`` (``host:port``), with
        ``ZEUSD_TOKEN`` as token; None when neither is set."""
        token = os.environ.get("ZEUSD_TOKEN")
        sock = os.environ.get("ZEUSD_SOCK_PATH")
        if sock is not None:
            return cls.uds(socket_path=sock, token=token)
        host_port = os.environ.get("ZEUSD_HOST_PORT")
        if host_port is not None:
            return cls(host_port=host_port, token=token)
        return None

    @property
    def _is_uds(self) -> bool:
        return self.socket_path is not None

    def _auth_headers(self) -> Dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def make_client(self):
        """An HTTP client for this daemon (see the module's docstring), sending the token."""
        return _HttpClient(self.socket_path, self._auth_headers())

    def url(self, path: str) -> str:
        """The URL of ``path`` on this daemon (``http://localhost`` for a Unix socket)."""
        if self._is_uds:
            return f"http://localhost{path}"
        return f"http://{self.host_port}{path}"

    @property
    def endpoint(self) -> str:
        """The daemon's name: its socket path, or ``host:port``."""
        if self.socket_path is not None:
            return self.socket_path
        if self.host_port is not None:
            return self.host_port
        raise ValueError("ZeusdConfig has neither socket_path nor host_port set.")

    @property
    def _stream_address(self) -> str:
        """The address zeus/power_stream.h takes."""
        return f"unix:{self.socket_path}" if self._is_uds else f"tcp:{self.host_port}"


def _ids(ids) -> str:
    return ",".join(str(int(i)) for i in ids)


class ZeusdClient:
    """A daemon's devices and permissions (asked at construction) and its routes.

    Args:
        config: where the daemon is; None reads the environment (:meth:`ZeusdConfig.from_env`).

    Raises:
        ZeusdConnectionError: no daemon configured, or it cannot be reached, or its
            ``/discover`` is not a current one.
    """

    def __init__(self, config: Optional[ZeusdConfig] = None) -> None:
        if config is None:
            config = ZeusdConfig.from_env()
            if config is None:
                raise ZeusdConnectionError(
                    "No Zeusd connection configured. Set ZEUSD_SOCK_PATH or ZEUSD_HOST_PORT, or pass a ZeusdConfig.")
        self._config = config
        self._client = config.make_client()
        try:
            resp = self._client.get(config.url("/discover"))
        except _request_errors() as e:
            raise ZeusdConnectionError(f"Cannot reach Zeusd at {config.endpoint}: {e}") from e
        if resp.status_code != 200:
            raise ZeusdConnectionError(
                f"Zeusd at {config.endpoint} returned HTTP {resp.status_code} on /discover: {resp.text}")
        data = resp.json()
        try:
            self._gpus = [GpuInfo(id=g["id"], name=g["name"], pci_address=g["pci_address"],
                                  cumulative_energy_available=g["cumulative_energy_available"]) for g in data["gpus"]]
        except KeyError as e:
            raise ZeusdConnectionError(
                f"Zeusd at {config.endpoint} did not report {e} in /discover; the daemon is older than this "
                "version of Zeus. Upgrade zeusd.") from e
        self._cpus = [CpuInfo(id=c["id"], dram_available=c["dram_available"]) for c in data["cpus"]]
        self._enabled_api_groups = set(data["enabled_api_groups"])
        self._auth_required = bool(data["auth_required"])
        self._auth_error: Optional[str] = None
        self._granted_scopes: FrozenSet[str] = frozenset()
        self._whoami_sub: Optional[str] = None
        self._whoami_exp: Optional[int] = None
        if self._auth_required:
            if not config.token:
                self._auth_error = (f"Zeusd at {config.endpoint} requires authentication but no token was "
                                    "provided. Set the ZEUSD_TOKEN environment variable or pass token= in the config.")
            else:
                w = self._client.get(config.url("/auth/whoami"))
                if w.status_code == 401:
                    self._auth_error = f"Token rejected by Zeusd at {config.endpoint}: {w.text}"
                elif w.status_code != 200:
                    self._auth_error = (f"Unexpected response from /auth/whoami at {config.endpoint} "
                                        f"(HTTP {w.status_code}): {w.text}")
                else:
                    who = w.json()
                    self._granted_scopes = frozenset(who.get("scopes", []))
                    self._whoami_sub = who.get("sub")
                    self._whoami_exp = who.get("exp")
                    logger.info("Authenticated with Zeusd at %s as user '%s' (scopes: %s)", config.endpoint,
                                self._whoami_sub, sorted(self._granted_scopes))
            if self._auth_error:
                logger.warning("Auth issue with Zeusd at %s: %s", config.endpoint, self._auth_error)

    # ---- what the daemon has ----

    @property
    def endpoint(self) -> str:
        """The daemon's name: its socket path, or ``host:port``."""
        return self._config.endpoint

    @property
    def gpus(self) -> List[GpuInfo]:
        """The GPUs the daemon serves."""
        return list(self._gpus)

    @property
    def gpu_ids(self) -> List[int]:
        """Their indices."""
        return [g.id for g in self._gpus]

    @property
    def cpus(self) -> List[CpuInfo]:
        """The CPU packages the daemon serves."""
        return list(self._cpus)

    @property
    def cpu_ids(self) -> List[int]:
        """Their RAPL package indices."""
        return [c.id for c in self._cpus]

    @property
    def dram_available(self) -> List[bool]:
        """Whether each package (in ``cpu_ids`` order) has a DRAM zone."""
        return [c.dram_available for c in self._cpus]

    @property
    def auth_required(self) -> bool:
        """Whether the daemon requires a token."""
        return self._auth_required

    @property
    def auth_error(self) -> Optional[str]:
        """Why authentication failed, or None."""
        return self._auth_error

    @property
    def granted_scopes(self) -> FrozenSet[str]:
        """The token's scopes (empty when auth is off or failed)."""
        return self._granted_scopes

    def _can(self, group: str) -> bool:
        if group not in self._enabled_api_groups:
            return False
        return not (self._auth_required and group not in self._granted_scopes)

    @property
    def can_read_gpu(self) -> bool:
        """Whether the GPU read routes (and ``/gpu/stream_power``) are open to this client."""
        return self._can("gpu-read")

    @property
    def can_control_gpu(self) -> bool:
        """Whether the GPU control routes are open to this client."""
        return self._can("gpu-control")

    @property
    def can_read_cpu(self) -> bool:
        """Whether the CPU read routes (and ``/cpu/stream_power``) are open to this client."""
        return self._can("cpu-read")

    # ---- routes ----

    def _call(self, method: str, path: str, params: Dict[str, str], operation: str):
        fn = self._client.get if method == "GET" else self._client.post
        resp = fn(self._config.url(path), params=params)
        if resp.status_code != 200:
            from ..device.exception import ZeusdError  # noqa: PLC0415

            raise ZeusdError(f"Failed to {operation}: {resp.text}")
        return resp.json() if method == "GET" else None

    @staticmethod
    def _opt_ids(name: str, ids) -> Dict[str, str]:
        return {} if ids is None else {name: _ids(ids)}

    def get_gpu_energy(self, gpu_ids: List[int]) -> Dict[int, int]:
        """Cumulative energy of each GPU in mJ."""
        data = self._call("GET", "/gpu/get_cumulative_energy", {"gpu_ids": _ids(gpu_ids)}, "get_gpu_energy")
        return {int(k): v["energy_mj"] for k, v in data.items()}

    def get_gpu_power(self, gpu_ids: Optional[List[int]] = None) -> GpuPowerSnapshot:
        """Instant power of the GPUs (None: all) in mW."""
        data = self._call("GET", "/gpu/get_power", self._opt_ids("gpu_ids", gpu_ids), "get_gpu_power")
        return GpuPowerSnapshot(timestamp_ms=data["timestamp_ms"],
                                power_mw={int(k): v for k, v in data["power_mw"].items()})

    def get_power_limit(self, gpu_ids: Optional[List[int]] = None) -> Dict[int, int]:
        """Each GPU's power limit in mW."""
        data = self._call("GET", "/gpu/get_power_limit", self._opt_ids("gpu_ids", gpu_ids), "get_power_limit")
        return {int(k): v["power_limit_mw"] for k, v in data.items()}

    def get_power_limit_constraints(self, gpu_ids: Optional[List[int]] = None) -> Dict[int, Tuple[int, int]]:
        """Each GPU's ``(min_mw, max_mw)`` power limits."""
        data = self._call("GET", "/gpu/get_power_limit_constraints", self._opt_ids("gpu_ids", gpu_ids),
                          "get_power_limit_constraints")
        return {int(k): (v["min_power_limit_mw"], v["max_power_limit_mw"]) for k, v in data.items()}

    def get_persistence_mode(self, gpu_ids: Optional[List[int]] = None) -> Dict[int, bool]:
        """Whether each GPU is in persistence mode."""
        data = self._call("GET", "/gpu/get_persistence_mode", self._opt_ids("gpu_ids", gpu_ids),
                          "get_persistence_mode")
        return {int(k): v["enabled"] for k, v in data.items()}

    @staticmethod
    def _block(block: bool) -> str:
        return "true" if block else "false"

    def set_power_limit(self, gpu_ids: List[int], power_limit_mw: int, block: bool = True) -> None:
        """Sets the GPUs' power limit (mW)."""
        self._call("POST", "/gpu/set_power_limit", {"gpu_ids": _ids(gpu_ids), "power_limit_mw": str(power_limit_mw),
                                                    "block": self._block(block)}, "set_power_limit")

    def set_persistence_mode(self, gpu_ids: List[int], enabled: bool, block: bool = True) -> None:
        """Turns the GPUs' persistence mode on or off."""
        self._call("POST", "/gpu/set_persistence_mode", {"gpu_ids": _ids(gpu_ids), "enabled": self._block(enabled),
                                                         "block": self._block(block)}, "set_persistence_mode")

    def set_gpu_locked_clocks(self, gpu_ids: List[int], min_clock_mhz: int, max_clock_mhz: int,
                              block: bool = True) -> None:
        """Locks the GPUs' SM clock to [min, max] MHz."""
        self._call("POST", "/gpu/set_gpu_locked_clocks",
                   {"gpu_ids": _ids(gpu_ids), "min_clock_mhz": str(min_clock_mhz), "max_clock_mhz": str(max_clock_mhz),
                    "block": self._block(block)}, "set_gpu_locked_clocks")

    def reset_gpu_locked_clocks(self, gpu_ids: List[int], block: bool = True) -> None:
        """Unlocks the GPUs' SM clock."""
        self._call("POST", "/gpu/reset_gpu_locked_clocks", {"gpu_ids": _ids(gpu_ids), "block": self._block(block)},
                   "reset_gpu_locked_clocks")

    def reset_locked_clocks(self, gpu_ids: List[int], block: bool = True) -> None:
        """Unlocks every clock domain of the GPUs."""
        self._call("POST", "/gpu/reset_locked_clocks", {"gpu_ids": _ids(gpu_ids), "block": self._block(block)},
                   "reset_locked_clocks")

    def set_mem_locked_clocks(self, gpu_ids: List[int], min_clock_mhz: int, max_clock_mhz: int,
                              block: bool = True) -> None:
        """Locks the GPUs' memory clock to [min, max] MHz."""
        self._call("POST", "/gpu/set_mem_locked_clocks",
                   {"gpu_ids": _ids(gpu_ids), "min_clock_mhz": str(min_clock_mhz), "max_clock_mhz": str(max_clock_mhz),
                    "block": self._block(block)}, "set_mem_locked_clocks")

    def reset_mem_locked_clocks(self, gpu_ids: List[int], block: bool = True) -> None:
        """Unlocks the GPUs' memory clock."""
        self._call("POST", "/gpu/reset_mem_locked_clocks", {"gpu_ids": _ids(gpu_ids), "block": self._block(block)},
                   "reset_mem_locked_clocks")

    def get_cpu_energy(self, cpu_ids: Optional[List[int]] = None, cpu: bool = True,
                       dram: bool = True) -> Dict[int, CpuEnergyResult]:
        """Cumulative energy of each package (and its DRAM) in µJ."""
        params = {"cpu": self._block(cpu), "dram": self._block(dram)}
        params.update(self._opt_ids("cpu_ids", cpu_ids))
        data = self._call("GET", "/cpu/get_cumulative_energy", params, "get_cpu_energy")
        return {int(k): CpuEnergyResult(cpu_energy_uj=v.get("cpu_energy_uj"), dram_energy_uj=v.get("dram_energy_uj"))
                for k, v in data.items()}

    def get_cpu_power(self, cpu_ids: Optional[List[int]] = None) -> CpuPowerSnapshot:
        """Power of each package (and its DRAM) in mW."""
        data = self._call("GET", "/cpu/get_power", self._opt_ids("cpu_ids", cpu_ids), "get_cpu_power")
        return CpuPowerSnapshot(timestamp_ms=data["timestamp_ms"],
                                power_mw={int(k): CpuDramPower(cpu_mw=v["cpu_mw"], dram_mw=v.get("dram_mw"))
                                          for k, v in data["power_mw"].items()})

    def get_time(self) -> float:
        """The daemon's Unix time in s."""
        return self._call("GET", "/time", {}, "get_time")["timestamp_ms"] / 1000.0

    def make_client(self):
        """A new HTTP client for this daemon (its transport and token)."""
        return self._config.make_client()

    def url(self, path: str) -> str:
        """The URL of ``path`` on this daemon."""
        return self._config.url(path)


def require_capabilities(client: ZeusdClient, *, read_gpu: bool = False, control_gpu: bool = False,
                         read_cpu: bool = False, gpu_ids: Optional[List[int]] = None,
                         cpu_ids: Optional[List[int]] = None) -> None:
    """Fails at once when the daemon cannot do what the caller needs.

    Raises:
        ZeusdAuthError: the token was missing or refused.
        ZeusdCapabilityError: an API group off, a scope not granted, or device ids missing (all
            the reasons in one message).
    """
    if client.auth_error:
        raise ZeusdAuthError(client.auth_error)
    reasons: List[str] = []
    for wanted, group in ((read_gpu, "gpu-read"), (control_gpu, "gpu-control"), (read_cpu, "cpu-read")):
        if wanted and not client._can(group):
            reasons.append(_capability_reason(client, group))
    for ids, have, kind in ((gpu_ids, client.gpu_ids, "GPU"), (cpu_ids, client.cpu_ids, "CPU")):
        if ids is not None:
            missing = set(ids) - set(have)
            if missing:
                reasons.append(f"{kind} indices {sorted(missing)} not available (available: {sorted(set(have))})")
    if reasons:
        raise ZeusdCapabilityError(f"Zeusd at {client.endpoint}: " + "; ".join(reasons))


def _capability_reason(client: ZeusdClient, scope: str) -> str:
    if scope not in client._enabled_api_groups:
        return f"API group '{scope}' is not enabled on this server"
    if client.auth_required and scope not in client.granted_scopes:
        return f"Token lacks required scope '{scope}' (granted: {sorted(client.granted_scopes)})"
    return f"'{scope}' is not available"


__all__ = ["ZeusdConfig", "ZeusdClient", "ZeusdConnectionError", "ZeusdAuthError", "ZeusdCapabilityError", "GpuInfo",
           "CpuInfo", "GpuPowerSnapshot", "CpuDramPower", "CpuPowerSnapshot", "CpuEnergyResult",
           "require_capabilities"]
