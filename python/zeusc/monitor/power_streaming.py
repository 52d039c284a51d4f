"""The GPU and CPU power of many nodes, streamed from their daemons (``zeus.monitor.power_streaming``
of the original).

:class:`PowerStreamingClient` follows ``/gpu/stream_power`` and ``/cpu/stream_power`` of each
:class:`~zeusc.utils.zeusd.ZeusdConfig` given (a zeus daemon or the original zeusd, on a Unix
socket or TCP, with a token) and keeps the latest reading of every device::

    from zeusc.utils.zeusd import ZeusdConfig
    from zeusc.monitor.power_streaming import PowerStreamingClient

    client = PowerStreamingClient(servers=[ZeusdConfig.uds("/run/zeusd/zeusd.sock"),
                                           ZeusdConfig.tcp("node2", 4938, gpu_indices=[0, 1])])
    client.get_power()          # {"/run/zeusd/zeusd.sock": PowerReadings(...), "node2:4938": ...}
    for readings in client:     # a snapshot at each event; `async for` works too
        ...
    client.stop()

The streams are followed by libzeus (``zeus/power_stream.h``): one thread for every connection,
bounded memory, a connection that fails, stalls or sends garbage made again with a delay that
starts at ``reconnect_delay_s`` and doubles up to 30 s, without holding up the other nodes. A
thread of this object moves each event into the readings that :meth:`get_power` returns.

As in the original, a node is named by its socket path or ``host:port``; timestamps are the
daemon's, moved by the offset of its clock from this machine's (measured with ``GET /time`` each
time a stream connects); construction asks each daemon what it has (``/discover``) and raises
``ZeusdConnectionError`` when one cannot be reached.
"""
from __future__ import annotations

import asyncio
import ctypes
import logging
import math
import threading
import typing
from collections.abc import AsyncIterator, Iterator, Sequence
from ctypes import byref
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set

from .. import _lib
from ..utils.zeusd import ZeusdCapabilityError, ZeusdClient, ZeusdConfig

logger = logging.getLogger(__name__)

_V = typing.TypeVar("_V")


@dataclass
class CpuPowerReading:
    """One CPU package's power in W, and its DRAM's (None without a DRAM zone)."""

    cpu_w: float = 0.0
    dram_w: Optional[float] = None


@dataclass
class PowerReadings:
    """The latest readings of one node.

    Attributes:
        timestamp_s: the newest reading's Unix time in s (the node's clock, aligned to ours).
        gpu_power_w: power in W by GPU index.
        cpu_power_w: :class:`CpuPowerReading` by CPU package index.
    """

    timestamp_s: float = 0.0
    gpu_power_w: Dict[int, float] = field(default_factory=dict)
    cpu_power_w: Dict[int, CpuPowerReading] = field(default_factory=dict)


class PowerStreamingClient:
    """Streams the power of several daemons; see the module's docstring.

    Args:
        servers: the daemons, each with the GPUs and CPUs to stream (``gpu_indices`` /
            ``cpu_indices``: None every one the daemon has and the token may read, ``[]`` none, a
            list exactly those, which must exist and be readable).
        reconnect_delay_s: the first delay before a lost stream is made again (doubling at each
            failure in a row, up to 30 s or this value when larger).

    Raises:
        ValueError: two servers name the same endpoint, or indices asked for that a daemon lacks.
        ZeusdConnectionError: a daemon cannot be reached.
        ZeusdCapabilityError: indices asked for explicitly that the token may not read.
    """

    def __init__(self, servers: Sequence[ZeusdConfig], reconnect_delay_s: float = 1.0) -> None:
        self._servers = list(servers)
        self._reconnect_delay = reconnect_delay_s
        endpoints = [s.endpoint for s in self._servers]
        dup = sorted({e for e in endpoints if endpoints.count(e) > 1})
        if dup:
            raise ValueError(f"Duplicate server endpoints: {dup}")
        self._lock = threading.Lock()
        self._condition = threading.Condition(self._lock)
        self._readings: Dict[str, PowerReadings] = {}
        self._clock_offsets: Dict[str, float] = {}
        self._daemon_clients: Dict[str, ZeusdClient] = {}
        self._threads: List[threading.Thread] = []
        self._stop_event = threading.Event()
        self._handle = None
        self._endpoints: List[str] = []

        streamed = []
        for server in self._servers:
            gpu, cpu = self._init_server(server)
            if not gpu and not cpu:
                continue
            streamed.append((server, gpu, cpu))
        if not streamed:
            logger.warning("No GPU or CPU power streaming threads were started. "
                           "Check that the zeusd endpoints have the expected devices available.")
            return
        self._open(streamed)

    # ---- the C client and the thread that moves its events here ----

    def _open(self, streamed) -> None:
        L = _lib.lib()
        keep = []  # the bytes objects the C structs point at, alive until open returns

        def b(s: Optional[str]):
            if s is None:
                return None
            v = s.encode()
            keep.append(v)
            return v

        def ids(on: bool, indices) -> Optional[str]:
            if not on:
                return ""
            return None if indices is None else ",".join(str(int(i)) for i in indices)

        arr = (_lib.PowerStreamServerC * len(streamed))()
        for k, (server, gpu, cpu) in enumerate(streamed):
            arr[k].address = b(server._stream_address)
            arr[k].token = b(server.token or None)
            arr[k].gpu_ids = b(ids(gpu, server.gpu_indices))
            arr[k].cpu_ids = b(ids(cpu, server.cpu_indices))
            self._endpoints.append(server.endpoint)
        o = _lib.PowerStreamOptsC()
        L.zeus_power_stream_opts_init(byref(o))
        o.servers = arr
        o.num_servers = len(streamed)
        o.reconnect_delay_s = self._reconnect_delay
        o.max_reconnect_delay_s = max(30.0, self._reconnect_delay)
        o.queue_max = 65536
        h = ctypes.c_void_p()
        _lib.check(L.zeus_power_stream_open(byref(h), byref(o)))
        del keep
        self._handle = h
        t = threading.Thread(target=self._pump, name="power-stream", daemon=True)
        t.start()
        self._threads.append(t)
        for e in self._endpoints:
            logger.info("Streaming power from %s", e)

    def _pump(self) -> None:
        L = _lib.lib()
        ev = _lib.PowerStreamEventC()
        st = _lib.PowerStreamStatusC()
        h = self._handle
        while not self._stop_event.is_set():
            if L.zeus_power_stream_next(h, 0.2, byref(ev)) != 0:
                continue
            endpoint = self._endpoints[ev.server]
            if endpoint not in self._clock_offsets and L.zeus_power_stream_server_status(h, ev.server, byref(st)) == 0:
                self._clock_offsets[endpoint] = st.clock_offset_s
            if ev.kind == _lib.ZEUS_POWER_STREAM_GPU:
                self._store_reading(endpoint, ev.timestamp_s, lambda r: r.gpu_power_w, int(ev.device), ev.power_w)
            else:
                dram = None if math.isnan(ev.dram_w) else ev.dram_w
                self._store_reading(endpoint, ev.timestamp_s, lambda r: r.cpu_power_w, int(ev.device),
                                    CpuPowerReading(cpu_w=ev.power_w, dram_w=dram))

    def stop(self) -> None:
        """Stops streaming (every connection closed) and wakes any blocked iterator."""
        self._stop_event.set()
        with self._condition:
            self._condition.notify_all()
        for t in self._threads:
            t.join(timeout=5.0)
        self._threads.clear()
        h, self._handle = getattr(self, "_handle", None), None
        if h:
            _lib.lib().zeus_power_stream_close(h)
        logger.info("All power streaming threads stopped")

    def __del__(self) -> None:
        try:
            if getattr(self, "_handle", None):
                self.stop()
        except Exception:  # noqa: BLE001 - never raise at collection
            pass

    # ---- readings ----

    def get_power(self) -> Dict[str, PowerReadings]:
        """The latest readings of every node that sent any, by node name (a copy)."""
        with self._lock:
            return {k: PowerReadings(timestamp_s=v.timestamp_s, gpu_power_w=dict(v.gpu_power_w),
                                     cpu_power_w={i: CpuPowerReading(cpu_w=r.cpu_w, dram_w=r.dram_w)
                                                  for i, r in v.cpu_power_w.items()})
                    for k, v in self._readings.items()}

    def __iter__(self) -> Iterator[Dict[str, PowerReadings]]:
        """A snapshot (as :meth:`get_power`) each time readings arrive; ends at :meth:`stop`."""
        while not self._stop_event.is_set():
            with self._condition:
                woke = self._condition.wait(timeout=1.0)
            if self._stop_event.is_set():
                break
            if woke:
                yield self.get_power()

    async def __aiter__(self) -> AsyncIterator[Dict[str, PowerReadings]]:
        """The same as ``__iter__`` without blocking the event loop (the waits run in its
        executor)."""
        loop = asyncio.get_running_loop()
        while not self._stop_event.is_set():
            woke = await loop.run_in_executor(None, self._wait_for_update)
            if self._stop_event.is_set():
                break
            if woke:
                yield self.get_power()

    def _wait_for_update(self) -> bool:
        with self._condition:
            return self._condition.wait(timeout=1.0)

    def _store_reading(self, endpoint: str, timestamp_s: float, device_dict: Callable[[PowerReadings], Dict[int, _V]],
                       device_id: int, value: _V) -> None:
        with self._condition:
            r = self._readings.get(endpoint)
            if r is None:
                r = self._readings[endpoint] = PowerReadings(timestamp_s=timestamp_s)
            else:
                r.timestamp_s = max(r.timestamp_s, timestamp_s)
            device_dict(r)[device_id] = value
            self._condition.notify_all()

    # ---- parsing an event's text (the C parser; the stream itself is parsed in C) ----

    def _parse(self, event_text: str, endpoint: str, kind: int, label: str):
        ev = _lib.PowerStreamEventC()
        raw = event_text.encode()
        rc = _lib.lib().zeus_power_stream_parse_event(raw, len(raw), kind, byref(ev))
        if rc < 0:
            logger.warning("Malformed %s SSE event from %s: %s (%s)", label, endpoint, event_text.strip()[:100],
                           _lib.errmsg(rc))
            return None
        if rc == 0:
            return None
        ev.timestamp_s += self._clock_offsets.get(endpoint, 0.0)
        return ev

    def _process_gpu_event(self, event_text: str, endpoint: str) -> None:
        """Stores the reading of one GPU event's text (``data: {"timestamp_ms", "gpu_id", "power_mw"}``)."""
        ev = self._parse(event_text, endpoint, _lib.ZEUS_POWER_STREAM_GPU, "GPU")
        if ev is not None:
            self._store_reading(endpoint, ev.timestamp_s, lambda r: r.gpu_power_w, int(ev.device), ev.power_w)

    def _process_cpu_event(self, event_text: str, endpoint: str) -> None:
        """Stores the reading of one CPU event's text (``{"timestamp_ms", "cpu_id", "cpu_mw", "dram_mw"}``)."""
        ev = self._parse(event_text, endpoint, _lib.ZEUS_POWER_STREAM_CPU, "CPU")
        if ev is not None:
            dram = None if math.isnan(ev.dram_w) else ev.dram_w
            self._store_reading(endpoint, ev.timestamp_s, lambda r: r.cpu_power_w, int(ev.device),
                                CpuPowerReading(cpu_w=ev.power_w, dram_w=dram))

    # ---- what to stream from each daemon ----

    def _init_server(self, server: ZeusdConfig):
        client = ZeusdClient(server)
        self._daemon_clients[server.endpoint] = client
        gpu = self._resolve_streaming(server.gpu_indices, set(client.gpu_ids), client.can_read_gpu, "gpu-read", "GPU",
                                      server.endpoint)
        cpu = self._resolve_streaming(server.cpu_indices, set(client.cpu_ids), client.can_read_cpu, "cpu-read", "CPU",
                                      server.endpoint)
        return gpu, cpu

    @staticmethod
    def _resolve_streaming(user_indices, available_ids: Set[int], has_permission: bool, scope_name: str,
                           device_type: str, endpoint: str) -> bool:
        """Whether to stream one kind of device of a daemon: None asks for all (none there, or no
        permission: skipped quietly), ``[]`` for none, a list for exactly those (an error when
        one is missing or not readable)."""
        if user_indices is not None:
            if not user_indices:
                return False
            missing = set(user_indices) - available_ids
            if missing:
                raise ValueError(f"{device_type} indices {sorted(missing)} requested for {endpoint} but only "
                                 f"{sorted(available_ids)} are available")
            if not has_permission:
                raise ZeusdCapabilityError(f"Token for {endpoint} lacks required scope '{scope_name}' (explicitly "
                                           f"requested {device_type.lower()}_indices={user_indices})")
            return True
        if not available_ids:
            logger.info("No %ss available on %s; skipping %s power streaming", device_type, endpoint, device_type)
            return False
        if not has_permission:
            logger.info("Token for %s lacks '%s' scope; skipping %s streaming", endpoint, scope_name, device_type)
            return False
        return True


__all__ = ["PowerStreamingClient", "PowerReadings", "CpuPowerReading"]
