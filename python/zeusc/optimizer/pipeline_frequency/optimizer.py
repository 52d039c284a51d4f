"""Pipeline frequency optimizer (zeus.optimizer.pipeline_frequency.optimizer of the original).

:class:`PipelineFrequencyOptimizer` is libzeus's Perseus client (zeus/pfo_client.h): each rank
of a pipeline-parallel job joins the job on the Perseus server (``zeus pfo-server``), receives a
per-instruction SM frequency schedule, and sets the GPU's clock around every instruction through
a controller thread; every ``iters_per_round`` iterations it reports what it measured and fetches
the next schedule. This module converts arguments and results, and plugs torch.distributed in as
the collective (rank 0 broadcasts the job id) and ``torch.cuda.synchronize`` as the
per-instruction synchronisation when the program uses them.
"""
from __future__ import annotations

import numbers
import sys
from ctypes import POINTER, byref, c_char_p, c_uint, c_void_p
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ... import _lib, _lifetime
from ..._closeable import Closeable, call_guarded, guard_methods
from ...callback import Callback
from ...utils.framework import TorchCollective, torch_distributed


@dataclass
class RoundStats:
    """What this rank measured in its last completed profiling round (round -1: none yet)."""

    round: int
    iterations: int
    iter_time: float
    iter_energy: float
    # Issue 25: the fraction of instruction time at the planned clock (the controller's
    # accounting; nan when unknown), instructions begun before their clock, fitted energies.
    planned_clock_fraction: float = float("nan")
    clock_late: int = 0
    energy_fitted: bool = False


def _int(name, v, lo=-(2**31), hi=2**31 - 1):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"PipelineFrequencyOptimizer: {name} must be an int, got {type(v).__name__}")
    if not lo <= v <= hi:
        raise ValueError(f"PipelineFrequencyOptimizer: {name} {v} is out of range ({lo}..{hi})")
    return int(v)


def _opt_str(name, v):
    if v is None:
        return None
    if not isinstance(v, str):
        raise TypeError(f"PipelineFrequencyOptimizer: {name} must be a str, got {type(v).__name__}")
    if "\0" in v:
        raise ValueError(f"PipelineFrequencyOptimizer: {name} contains a NUL character")
    return v.encode()


@guard_methods("on_instruction_begin", "on_instruction_end", "_sync", "_raise", "_instruction")
class PipelineFrequencyOptimizer(Closeable, Callback):
    """Pipeline frequency optimizer: the Perseus client of one rank.

    Args (the original's):
        rank, dp_rank, pp_rank, tp_rank: this process's global rank and its ranks in the data,
            pipeline and tensor parallel groups.
        device_id: the (visible) index of the GPU this rank uses.
        dp_degree, pp_degree, tp_degree, world_size: the job's shape; world_size must be
            dp_degree x pp_degree x tp_degree.
        server_url: the Perseus server, "http://host:port".
        job_metadata: appended to the job id by the server (rank 0).

    Keyword-only extensions (not in the original), each None to keep libzeus's default or its
    ZEUS_PFO_* setting: ``job_id`` (join that job; no broadcast), ``pipe_schedule`` (this rank's
    instruction names of one iteration, in order, sent to the server), ``iters_per_round``,
    ``profile_instructions``, ``devices`` (a :class:`zeusc.device.Devices`), ``retries``,
    ``connect_timeout``, ``request_timeout``, ``schedule_timeout``, ``token``, and
    ``sync_instructions`` (default True: before each instruction, ``torch.cuda.synchronize``
    the rank's GPU when the program has imported torch and CUDA is available).

    With torch.distributed initialised, it is the collective: every rank must construct its
    optimizer (rank 0 registers the job and broadcasts the id); when any rank fails to start,
    every rank raises. Without it, the process is the whole job unless ``job_id`` is given.

    Raises:
        ValueError: a bad argument or setting (named), a schedule that does not fit the GPU.
        ConnectionError / TimeoutError / RuntimeError: the server is unreachable, too slow, or
            answered with an error (its message is included).
        PermissionError: setting GPU clocks needs root or CAP_SYS_ADMIN.
    """

    def __init__(self, rank: int, dp_rank: int, pp_rank: int, tp_rank: int, device_id: int, dp_degree: int,
                 pp_degree: int, tp_degree: int, world_size: int, server_url: str,
                 job_metadata: Optional[str] = None, *, job_id: Optional[str] = None,
                 pipe_schedule: Optional[Sequence[str]] = None, iters_per_round: Optional[int] = None,
                 profile_instructions: Optional[bool] = None, devices=None, retries: Optional[int] = None,
                 connect_timeout: Optional[float] = None, request_timeout: Optional[float] = None,
                 schedule_timeout: Optional[float] = None, token: Optional[str] = None,
                 sync_instructions: bool = True):
        self._h = c_void_p()
        L = _lib.require_pfo()
        o = _lib.PfoOptimizerOpts()
        L.zeus_pfo_optimizer_opts_init(byref(o))
        _lib.check(L.zeus_pfo_optimizer_opts_from_env(byref(o)))
        o.rank, o.dp_rank, o.pp_rank, o.tp_rank = (_int("rank", rank), _int("dp_rank", dp_rank),
                                                   _int("pp_rank", pp_rank), _int("tp_rank", tp_rank))
        o.dp_degree, o.pp_degree, o.tp_degree = (_int("dp_degree", dp_degree), _int("pp_degree", pp_degree),
                                                 _int("tp_degree", tp_degree))
        o.world_size = _int("world_size", world_size)
        self.device_id = o.device_id = _int("device_id", device_id, 0, 2**32 - 1)
        # The original's public attributes.
        self.rank = rank
        self.dp_rank, self.pp_rank, self.tp_rank = dp_rank, pp_rank, tp_rank
        self.dp_degree, self.pp_degree, self.tp_degree = dp_degree, pp_degree, tp_degree
        self.world_size = world_size
        self.server_url = server_url
        self.job_metadata = job_metadata
        # Every pointer in `o` must stay valid while the optimizer lives: keep the objects here.
        self._keep = []

        def text(name, v):
            b = _opt_str(name, v)
            self._keep.append(b)
            return b
        if server_url is None:
            raise TypeError("PipelineFrequencyOptimizer: server_url is required")
        o.server_url = text("server_url", server_url)
        if job_metadata is not None:
            o.job_metadata = text("job_metadata", job_metadata)
        if job_id is not None:
            o.job_id = text("job_id", job_id)
        if token is not None:
            o.token = text("token", token)
        if pipe_schedule is not None:
            names = [text("pipe_schedule entry", n) for n in pipe_schedule]
            arr = (c_char_p * max(len(names), 1))(*names)
            self._keep.append(arr)
            o.pipe_schedule = arr
            o.n_pipe_schedule = len(names)
        if iters_per_round is not None:
            o.iters_per_round = _int("iters_per_round", iters_per_round, -(2**63), 2**63 - 1)
        if profile_instructions is not None:
            o.no_instruction_profiling = not profile_instructions
        if retries is not None:
            o.retries = _int("retries", retries)
        for name, v, field in (("connect_timeout", connect_timeout, "connect_timeout_s"),
                               ("request_timeout", request_timeout, "request_timeout_s"),
                               ("schedule_timeout", schedule_timeout, "schedule_timeout_s")):
            if v is not None:
                if isinstance(v, bool) or not isinstance(v, numbers.Real):
                    raise TypeError(f"PipelineFrequencyOptimizer: {name} must be a number of seconds")
                setattr(o, field, float(v))
        self._devices = devices
        if devices is not None:
            o.devices = devices._handle()
        self._collective = None
        if torch_distributed() is not None:
            self._collective = TorchCollective()
            o.collective = POINTER(_lib.Collective)(self._collective.struct)
        self._sync_error = None
        self._sync_cb = None
        if sync_instructions:
            self._sync_cb = _lib.SYNC_FN(self._sync)
            o.sync = self._sync_cb
        o.no_signal_handlers = True  # signals stay Python's; see zeusc._lifetime
        self._opts = o

        rc = L.zeus_pfo_optimizer_open(byref(self._h), byref(o))
        if rc:
            self._h = c_void_p()
            self._raise(rc)
        _lifetime.register(self)
        if devices is not None:
            devices._depend(self)
        self._lib = L
        self._begin = L.zeus_pfo_on_instruction_begin
        self._end = L.zeus_pfo_on_instruction_end

    # ---- hooks --------------------------------------------------------------------------------

    def on_step_begin(self) -> None:
        """Mark the beginning of an iteration: the schedule fetched last takes effect."""
        rc = self._lib.zeus_pfo_on_step_begin(self._handle())
        if rc:
            self._raise(rc)

    def on_step_end(self) -> None:
        """Mark the end of an iteration; every iters_per_round iterations the round's results go
        to the server and the next schedule comes back (a barrier between the ranks)."""
        rc = self._lib.zeus_pfo_on_step_end(self._handle())
        if rc:
            self._raise(rc)

    def on_instruction_begin(self, name: str) -> None:
        """Mark the beginning of instruction `name` ("forward", "backward", ...): the next
        frequency of the schedule is set. ValueError when `name` is not the next instruction."""
        self._instruction(self._begin, _name(name))

    def on_instruction_end(self, name: str) -> None:
        """Mark the end of instruction `name`."""
        self._instruction(self._end, _name(name))

    def _instruction(self, fn, name: bytes) -> None:
        rc = call_guarded(self, fn, self._h, name)  # the handle is used only if not closing
        if rc:
            self._raise(rc)

    # ---- what it knows ----------------------------------------------------------------------------

    @property
    def job_id(self) -> str:
        return self._lib.zeus_pfo_job_id(self._handle()).decode()

    @property
    def schedule(self) -> List[Tuple[str, int]]:
        """The frequency schedule in effect: (instruction, MHz) per instruction of one iteration."""
        s = self._lib.zeus_pfo_current_schedule(self._handle())
        if not s:
            return []
        sch = s.contents
        return [(sch.frequencies[i].instruction.decode(), sch.frequencies[i].frequency_mhz)
                for i in range(sch.n_frequencies)]

    @property
    def freq_schedule(self) -> List[Tuple[str, int]]:
        """The original's name of :attr:`schedule`: (instruction, MHz) of one iteration."""
        return self.schedule

    @property
    def freq_schedule_iter(self):
        """An iterator over :attr:`freq_schedule` (the original's; libzeus keeps its own position)."""
        return iter(self.schedule)

    @property
    def frequency_controller(self) -> "FrequencyController":
        """The controller that sets this rank's GPU clock asynchronously (the original's)."""
        return FrequencyController(self)

    @property
    def detached(self) -> bool:
        """Whether a server error has detached the optimizer (it then keeps its last schedule)."""
        return bool(self._lib.zeus_pfo_detached(self._handle()))

    @property
    def last_round(self) -> RoundStats:
        r = _lib.PfoRoundStats()
        self._lib.zeus_pfo_last_round(self._handle(), byref(r))
        return RoundStats(r.round, r.iterations, r.iter_time_s, r.iter_energy_j, r.planned_clock_fraction,
                          r.clock_late, bool(r.energy_fitted))

    @property
    def last_round_classes(self) -> List[dict]:
        """Per (instruction kind, planned clock) of the last completed round: count, mean time and
        energy, fraction of the time at the planned clock."""
        n = self._lib.zeus_pfo_last_round_classes(self._handle(), None, 0)
        arr = (_lib.PfoClassStats * max(n, 1))()
        n = self._lib.zeus_pfo_last_round_classes(self._handle(), arr, n)
        return [{"instruction": c.instruction.decode(), "planned_mhz": c.planned_mhz, "count": c.count,
                 "mean_time_s": c.mean_time_s, "mean_energy_j": c.mean_energy_j,
                 "planned_clock_fraction": c.planned_clock_fraction} for c in arr[:n]]

    @property
    def frequencies(self) -> List[int]:
        """The SM frequencies (MHz) the GPU supports at its highest memory clock, highest first."""
        c = self._lib.zeus_pfo_optimizer_controller(self._handle())
        ptr = POINTER(c_uint)()
        n = self._lib.zeus_pfo_controller_frequencies(c, byref(ptr))
        return [ptr[i] for i in range(n)]

    @property
    def current_frequency(self) -> int:
        """The SM clock (MHz) the controller last put in place."""
        return self._lib.zeus_pfo_controller_current_mhz(self._lib.zeus_pfo_optimizer_controller(self._handle()))

    def wait_for_clock(self, timeout: float = 0.0) -> None:
        """Waits until the frequency asked for last is in place (simulations need this; training
        code does not). TimeoutError after `timeout` s (0: no limit)."""
        c = self._lib.zeus_pfo_optimizer_controller(self._handle())
        _lib.check(self._lib.zeus_pfo_controller_wait(c, float(timeout)))

    # ---- lifetime -----------------------------------------------------------------------------

    def _sync(self, _ctx) -> int:
        torch = sys.modules.get("torch")
        if torch is None:
            return _lib.ZEUS_OK
        try:
            if torch.cuda.is_available():
                torch.cuda.synchronize(self.device_id)
            return _lib.ZEUS_OK
        except BaseException as e:  # noqa: BLE001 - never let an exception cross into C
            self._sync_error = e
            return _lib.set_errmsg(_lib.ZEUS_EIO, f"torch.cuda.synchronize({self.device_id}) failed: "
                                                  f"{type(e).__name__}: {e}")

    def _handle(self):
        if not self._h:
            raise ValueError("this PipelineFrequencyOptimizer is closed")
        return self._h

    def _raise(self, rc: int):
        err = _lib.error(rc)
        pending, self._sync_error = self._sync_error, None
        if pending is None and self._collective is not None:
            pending = self._collective.take_pending()
        if pending is not None:
            raise pending from err
        raise err

    def close(self) -> None:
        """Stops the frequency controller (locked clocks reset, power limit restored) and frees
        the optimizer; the round in progress is not reported. Idempotent."""
        h = self._h
        if h and not self._closing:
            def free():
                self._h = c_void_p()
                self._begin = self._end = _closed
                self._lib.zeus_pfo_optimizer_close(h)

            # Calls of other threads in progress (a round's report, a wait for the clock) finish
            # first; later ones raise ValueError.
            self._close_guarded(free)
        if getattr(self, "_devices", None) is not None:
            self._devices._undepend(self)
        _lifetime.unregister(self)


class FrequencyController:
    """The frequency controller of a PipelineFrequencyOptimizer (libzeus's zeus_pfo_controller): a
    thread that sets the GPU's SM clock asynchronously. Borrowed from the optimizer."""

    def __init__(self, optimizer: PipelineFrequencyOptimizer) -> None:
        self._opt = optimizer

    def _call(self, fn, *args):
        """fn(controller, *args) as a call of the optimizer's guard (the controller is the
        optimizer's: closing it on another thread waits for the call)."""
        o = self._opt
        return call_guarded(o, lambda: fn(o._lib.zeus_pfo_optimizer_controller(o._handle()), *args))

    def set_frequency(self, frequency: int) -> None:
        """Asks for SM clock `frequency` (MHz); the controller thread applies it."""
        f = _int("frequency", frequency, 0, 2**32 - 1)
        _lib.check(self._call(self._opt._lib.zeus_pfo_controller_set_frequency, f))

    @property
    def current_frequency(self) -> int:
        """The SM clock (MHz) the controller last put in place."""
        return self._call(self._opt._lib.zeus_pfo_controller_current_mhz)


def _closed(*_args):
    raise ValueError("this PipelineFrequencyOptimizer is closed")


def _name(name) -> bytes:
    if name.__class__ is not str:
        raise TypeError(f"instruction name must be a str, got {type(name).__name__}")
    if not name or "\0" in name:
        raise ValueError(f"instruction name must be a non-empty string without NUL characters, got {name!r}")
    return name.encode()


__all__ = ["PipelineFrequencyOptimizer", "RoundStats", "FrequencyController"]
