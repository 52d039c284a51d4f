"""Framework integration: synchronising GPU work, and multi-process agreement.

The binding never imports a framework on its own. A framework that the program has not
imported has no GPU work in flight and no process group, so the checks here look only at
``sys.modules``: synchronisation and torch.distributed are used exactly when the program uses
them, at no import cost otherwise.
"""
from __future__ import annotations

import ctypes
import importlib
import importlib.util
import sys
from typing import Iterable, List, Union

from .. import _lib

FRAMEWORKS = ("torch", "jax", "cupy")


def check_framework(sync_with) -> str:
    """Validates a sync_execution_with value."""
    if sync_with not in FRAMEWORKS:
        raise ValueError(f"sync_execution_with must be one of {', '.join(FRAMEWORKS)}; got {sync_with!r}")
    return sync_with


def _sync_torch(torch, gpu_devices) -> bool:
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available():
        for index in gpu_devices:
            cuda.synchronize(index)
        return True
    backends = getattr(torch, "backends", None)
    mps = getattr(backends, "mps", None) if backends is not None else None
    if mps is not None and mps.is_available():
        torch.mps.synchronize()
        return True
    return False


def _sync_jax(jax, gpu_devices) -> bool:
    gpus = jax.devices("gpu")
    futures = [jax.device_put(0.0, device=gpus[index]) + 0 for index in gpu_devices]
    jax.block_until_ready(futures)
    return True


def _sync_cupy(cupy, gpu_devices) -> bool:
    for index in gpu_devices:
        cupy.cuda.Device(index).synchronize()
    return True


_SYNC = {"torch": _sync_torch, "jax": _sync_jax, "cupy": _sync_cupy}


def sync_if_loaded(gpu_devices: Iterable[int], sync_with: str) -> bool:
    """Waits for the GPU work the program queued through `sync_with`, if the program has imported
    that framework (``sys.modules``); returns whether it synchronised. Never imports anything."""
    mod = sys.modules.get(sync_with)
    if mod is None:
        return False
    return _SYNC[sync_with](mod, gpu_devices)


def sync_execution(gpu_devices: Iterable[int], sync_with: str = "torch") -> None:
    """The original's ``zeus.utils.framework.sync_execution``: waits for the GPU work queued
    through `sync_with` on each GPU. Imports the framework if needed; RuntimeError when it is
    not installed or has no GPU to wait for."""
    check_framework(sync_with)
    try:
        mod = sys.modules.get(sync_with) or importlib.import_module(sync_with)
    except ImportError:
        raise RuntimeError(f"sync_execution: {sync_with} is not installed") from None
    if not _SYNC[sync_with](mod, list(gpu_devices)):
        raise RuntimeError(f"sync_execution: {sync_with} has no GPU to synchronise")


# ---- the original's availability checks and distributed helpers ------------------------------------


def _importable(name: str) -> bool:
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def torch_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether PyTorch can be used (the original's check). Imports torch only when the program has
    not but it is installed. RuntimeError when `ensure_available` and it is not installed, or when
    `ensure_cuda` and it has no CUDA."""
    if not _importable("torch"):
        if ensure_available:
            raise RuntimeError("Failed to import Pytorch")
        return False
    torch = sys.modules.get("torch") or importlib.import_module("torch")
    if ensure_cuda and not torch.cuda.is_available():
        raise RuntimeError("PyTorch is available but does not have CUDA support.")
    return True


def jax_is_available(ensure_available: bool = False, ensure_cuda: bool = True) -> bool:
    """Whether JAX can be used (the original's check)."""
    if not _importable("jax"):
        if ensure_available:
            raise RuntimeError("Failed to import JAX")
        return False
    jax = sys.modules.get("jax") or importlib.import_module("jax")
    if ensure_cuda and not jax.devices("gpu"):
        raise RuntimeError("JAX is available but does not have CUDA support.")
    return True


def cupy_is_available(ensure_available: bool = False) -> bool:
    """Whether CuPy can be used (the original's check)."""
    if not _importable("cupy"):
        if ensure_available:
            raise RuntimeError("Failed to import CuPy")
        return False
    return True


def is_distributed() -> bool:
    """Whether this process is one rank of several: torch.distributed is initialised (or JAX
    sees more than one device). RuntimeError("No framework is available.") when neither PyTorch nor
    JAX is installed, as the original. Imports nothing: a process group exists only in a program
    that imported torch."""
    if _importable("torch"):
        return torch_distributed() is not None
    if _importable("jax"):
        jax = sys.modules.get("jax")
        return jax is not None and jax.device_count() > 1
    raise RuntimeError("No framework is available.")


def get_rank() -> int:
    """This process's rank in torch.distributed, 0 when not distributed."""
    dist = torch_distributed()
    return int(dist.get_rank()) if dist is not None else 0


def get_world_size() -> int:
    """The number of ranks in torch.distributed, 1 when not distributed."""
    dist = torch_distributed()
    return int(dist.get_world_size()) if dist is not None else 1


def all_reduce(object: Union[List[int], List[float]], operation: str) -> Union[List[int], List[float]]:
    """Reduces a list of numbers across every rank with "sum" or "max"; returned as is when the
    process is not distributed. RuntimeError("No framework is available.") when neither PyTorch nor
    JAX is installed, as the original; ValueError for another operation."""
    if operation not in ("sum", "max"):
        raise ValueError(f"all_reduce unsupported operation: {operation}")
    if _importable("torch"):
        dist = torch_distributed()
        if dist is None:
            return object
        torch = sys.modules["torch"]
        device = "cpu"
        if str(dist.get_backend()).lower() == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        t = torch.tensor(list(object), dtype=torch.float64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.SUM if operation == "sum" else dist.ReduceOp.MAX)
        return t.cpu().tolist()
    if _importable("jax"):
        jax = sys.modules.get("jax")
        if jax is None or jax.device_count() == 1:
            return object
        raise NotImplementedError("JAX distributed is not supported yet.")
    raise RuntimeError("No framework is available.")


# ---- torch.distributed as a zeus_collective -----------------------------------------------------


def torch_distributed():
    """torch.distributed when the program imported torch and initialised a process group, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist


class TorchCollective:
    """torch.distributed's all-reduce and broadcast as a zeus_collective (zeus/collective.h).

    The C optimizers call the two callbacks on the thread that drives them; every rank makes the
    same calls in the same order. Tensors live on the current CUDA device under NCCL, on the CPU
    otherwise. A failure inside torch becomes the C call's error (ZEUS_EIO with the Python
    exception's text) and is re-raised by the binding as that original exception.

    Keep this object alive for as long as a C object holds :attr:`struct` (its ctypes callbacks
    are referenced from here).
    """

    def __init__(self, dist=None):
        self.dist = dist if dist is not None else torch_distributed()
        if self.dist is None:
            raise RuntimeError("TorchCollective: torch.distributed is not initialised")
        self.torch = sys.modules["torch"]
        self.rank = int(self.dist.get_rank())
        self.world_size = int(self.dist.get_world_size())
        self.pending: BaseException | None = None
        self._allreduce_cb = _lib.ALLREDUCE_FN(self._allreduce)
        self._broadcast_cb = _lib.BROADCAST_FN(self._broadcast)
        self.struct = _lib.Collective(ctx=None, rank=self.rank, world_size=self.world_size,
                                      allreduce=self._allreduce_cb, broadcast=self._broadcast_cb)

    def _device(self):
        backend = str(self.dist.get_backend()).lower()
        if backend == "nccl":
            return self.torch.device("cuda", self.torch.cuda.current_device())
        return "cpu"

    def _fail(self, what: str, e: BaseException) -> int:
        self.pending = e
        return _lib.set_errmsg(_lib.ZEUS_EIO, f"torch.distributed {what} failed: {type(e).__name__}: {e}")

    def _allreduce(self, _ctx, values, n, op) -> int:
        try:
            if op == _lib.ZEUS_REDUCE_SUM:
                rop = self.dist.ReduceOp.SUM
            elif op == _lib.ZEUS_REDUCE_MAX:
                rop = self.dist.ReduceOp.MAX
            else:
                return _lib.set_errmsg(_lib.ZEUS_EINVAL, f"torch.distributed all_reduce: unknown reduce op {op}")
            t = self.torch.tensor([values[i] for i in range(n)], dtype=self.torch.float64,
                                  device=self._device())
            self.dist.all_reduce(t, op=rop)
            out = t.tolist()
            for i in range(n):
                values[i] = float(out[i])
            return _lib.ZEUS_OK
        except BaseException as e:  # noqa: BLE001 - never let an exception cross into C
            return self._fail("all_reduce", e)

    def _broadcast(self, _ctx, buf, length, root) -> int:
        try:
            data = ctypes.string_at(buf, length)
            t = self.torch.tensor(list(data), dtype=self.torch.uint8, device=self._device())
            self.dist.broadcast(t, src=root)
            ctypes.memmove(buf, bytes(t.tolist()), length)
            return _lib.ZEUS_OK
        except BaseException as e:  # noqa: BLE001
            return self._fail("broadcast", e)

    def take_pending(self) -> BaseException | None:
        """The exception a callback caught since the last call, cleared."""
        e, self.pending = self.pending, None
        return e


__all__ = ["sync_execution", "sync_if_loaded", "check_framework", "torch_distributed", "TorchCollective",
           "torch_is_available", "jax_is_available", "cupy_is_available", "is_distributed", "get_rank",
           "get_world_size", "all_reduce"]
