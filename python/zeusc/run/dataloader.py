"""The training side of `zeus run` in Python: the original's ZeusDataLoader over libzeus's zeus_job.

A training script run by ``zeus run`` (the recurring-job driver, the original's ZeusMaster) reads
its knobs from ``ZEUS_*`` environment variables, profiles the GPUs' power limits during its first
epoch, stops early when the next epoch would push the cost past ``ZEUS_COST_THRESH``, and writes
its result to ``$ZEUS_LOG_DIR/$ZEUS_JOB_ID+bs<b>.train.json``. All of that is libzeus's
``zeus_job`` (zeus/bso.h); this module drives it from Python iteration:

    from zeusc.run import ZeusDataLoader

    train_loader = ZeusDataLoader(train_set, batch_size=256, max_epochs=100)  # the train loader
    eval_loader = ZeusDataLoader(eval_set, batch_size=256)                    # max_epochs omitted
    for epoch in train_loader.epochs():
        for batch in train_loader:
            ...  # learn
        for batch in eval_loader:
            ...  # evaluate
        train_loader.report_metric(accuracy, higher_is_better=True)

With PyTorch imported by the program, ZeusDataLoader is a ``torch.utils.data.DataLoader`` (every
DataLoader argument works); without it, a plain loader that yields lists of ``batch_size``
items of a sequence (or the batches of any iterable given as ``batches=``).

Lower level: :class:`ZeusJob` exposes the same protocol as explicit hooks for loops that do not
iterate a DataLoader.
"""
from __future__ import annotations

import abc
import ctypes
import math
import sys
import threading
from ctypes import byref, c_bool, c_long, c_void_p
from typing import Iterable, Iterator, Optional

from .. import _lib, _lifetime
from .._closeable import Closeable, guard_methods
from ..utils.framework import TorchCollective, torch_distributed
from ..utils.metric import ZeusCostThresholdExceededError


@guard_methods("_raise")
class ZeusJob(Closeable):
    """One run of a recurring job (libzeus's zeus_job): the ZEUS_* protocol as explicit hooks.

    Args:
        batch_size: this process's batch size.
        max_epochs: the most epochs to run.
        steps_per_epoch: training steps of one epoch.
        eval_steps_per_epoch: evaluation steps of one epoch (predicts the first epoch's cost).
        monitor: a :class:`zeusc.monitor.ZeusMonitor` over this process's GPUs; None: every
            visible GPU.
        pl_step: the power-limit stride in W (default 25).

    Raises:
        ValueError: a ZEUS_* variable or argument out of range (named), a malformed power profile.
        RuntimeError: no GPU to measure, device errors.
    """

    def __init__(self, batch_size: int, max_epochs: int, steps_per_epoch: int, eval_steps_per_epoch: int = 0,
                 monitor=None, pl_step: int = 25) -> None:
        self._h = c_void_p()
        L = _lib.lib()
        if not hasattr(L, "zeus_job_open"):
            raise _lib._exc.ZeusUnavailableError("zeus_job (the training side of zeus run) not in this libzeus")
        o = _lib.JobOpts()
        o.batch_size = int(batch_size)
        o.max_epochs = int(max_epochs)
        o.steps_per_epoch = int(steps_per_epoch)
        o.eval_steps_per_epoch = int(eval_steps_per_epoch)
        o.pl_step_w = int(pl_step)
        self.monitor = monitor
        if monitor is not None:
            o.monitor = monitor._handle()
        self._collective = None
        if torch_distributed() is not None:
            self._collective = TorchCollective()
            o.collective = ctypes.addressof(self._collective.struct)
        o.no_signal_handlers = True  # Python keeps its signals; see zeusc._lifetime
        self._opts = o
        rc = L.zeus_job_open(byref(self._h), byref(o))
        if rc:
            self._h = c_void_p()
            self._raise(rc)
        self._lib = L
        _lifetime.register(self)
        if monitor is not None:
            monitor._dependents.add(self)

    def _raise(self, rc: int):
        err = _lib.error(rc)
        pending = self._collective.take_pending() if self._collective is not None else None
        if pending is not None:
            raise pending from err
        raise err

    def _call(self, name: str, *args) -> None:
        rc = getattr(self._lib, name)(self._h, *args)
        if rc:
            self._raise(rc)

    def next_epoch(self) -> Optional[int]:
        """The 0-based index of the epoch to run, or None when training should stop (the target
        was reached, max_epochs ran, or the next epoch would reach the cost threshold); on
        stopping, rank 0 writes the result file."""
        more, epoch = c_bool(), c_long()
        self._call("zeus_job_next_epoch", byref(more), byref(epoch))
        return epoch.value if more.value else None

    def train_begin(self) -> None:
        self._call("zeus_job_train_begin")

    def train_step_begin(self) -> None:
        self._call("zeus_job_train_step_begin")

    def train_step_end(self) -> None:
        self._call("zeus_job_train_step_end")

    def train_end(self) -> None:
        self._call("zeus_job_train_end")

    def eval_begin(self) -> None:
        self._call("zeus_job_eval_begin")

    def eval_step_begin(self) -> None:
        self._call("zeus_job_eval_step_begin")

    def eval_step_end(self) -> None:
        self._call("zeus_job_eval_step_end")

    def eval_end(self) -> None:
        self._call("zeus_job_eval_end")

    def report_metric(self, metric: float, higher_is_better: bool) -> None:
        """Reports the epoch's validation metric (all-reduced across ranks first, if several)."""
        self._call("zeus_job_report_metric", float(metric), bool(higher_is_better))

    def info(self) -> dict:
        """What the job knows: settings, paths, energy, time and cost so far, the optimal limit."""
        i = _lib.JobInfo()
        self._lib.zeus_job_get_info(self._h, byref(i))
        out = {}
        for name, _ in _lib.JobInfo._fields_:
            v = getattr(i, name)
            out[name] = v.decode() if isinstance(v, bytes) else v
        return out

    def close(self) -> None:
        """Puts back the power limits the job changed and frees it. Idempotent."""
        h = self._h
        if h and not self._closing:
            def free():
                self._h = c_void_p()
                self._lib.zeus_job_close(h)

            # Calls of other threads in progress finish first; later ones raise ValueError.
            self._close_guarded(free)
        _lifetime.unregister(self)


# ---- the shared state of the train and eval loaders (the original's ClassVars) --------------------

class _Shared:
    lock = threading.Lock()
    train: Optional["_ZeusLoaderMixin"] = None
    eval: Optional["_ZeusLoaderMixin"] = None
    eval_num_samples: int = 0


class _ZeusLoaderMixin:
    """The ZeusDataLoader protocol over an underlying iterable of batches."""

    def _zeus_setup(self, batch_size: int, max_epochs: int, distributed, monitor, pl_step: int) -> None:
        self.split = "train" if max_epochs != -1 else "eval"
        self.max_epochs = max_epochs
        self.distributed = distributed
        self.world_size, self.rank = 1, 0
        if distributed == "dp":
            dist = torch_distributed()
            if dist is None:
                raise RuntimeError("Default process group has not been initialized, please make sure to call "
                                   "`init_process_group` before you instantiate `ZeusDataLoader`.")
            self.world_size, self.rank = int(dist.get_world_size()), int(dist.get_rank())
        elif distributed is not None:
            raise ValueError('`distributed` currently only accepts `"dp"` or `None`.')
        self._zeus_monitor = monitor
        self._pl_step = pl_step
        self._job: Optional[ZeusJob] = None
        self._it = None
        self._in_step = False
        self._in_phase = False
        self.epoch_num = 0
        self.sample_num = 0
        with _Shared.lock:
            if self._is_train:
                if _Shared.train is not None and _Shared.train._job is not None and _Shared.train._job._h:
                    raise ValueError("Specify max_epochs only to the train dataloader.")
                _Shared.train = self
                _Shared.eval_num_samples = 0
            else:
                _Shared.eval_num_samples = self._zeus_len()
        self.train_batch_size = batch_size * self.world_size

    @property
    def _is_train(self) -> bool:
        return self.split == "train"

    # ---- the training loop's protocol -----------------------------------------------------------

    def _ensure_job(self) -> ZeusJob:
        if self._job is None:
            monitor = self._zeus_monitor
            if monitor is None:
                from ..monitor import ZeusMonitor
                # One GPU per process, as the original: this rank's CUDA device, else GPU 0.
                index = 0
                torch = sys.modules.get("torch")
                if self.distributed == "dp" and torch is not None and torch.cuda.is_available():
                    index = torch.cuda.current_device()
                monitor = self._zeus_monitor = ZeusMonitor(gpu_indices=[index], cpu_indices=[])
            self._job = ZeusJob(self._zeus_bs, self.max_epochs, max(1, self._zeus_len()),
                                _Shared.eval_num_samples, monitor=monitor, pl_step=self._pl_step)
        return self._job

    @property
    def job(self) -> ZeusJob:
        """(not in the original) The libzeus job behind the train loader (opened on first use)."""
        if not self._is_train:
            raise RuntimeError("Use job on the train dataloader.")
        return self._ensure_job()

    def epochs(self) -> Iterator[int]:
        """Yields epoch numbers from 0 until training should stop: the target metric was reached,
        max_epochs ran, or the next epoch would reach ZEUS_COST_THRESH. On stopping, the result
        file is written (rank 0).

        Raises:
            ZeusCostThresholdExceededError: (rank 0) the predicted cost after the next epoch
                reaches the threshold, as the original; the result file is written first.
        """
        if not self._is_train:
            raise RuntimeError("Use epochs() on the train dataloader.")
        job = self._ensure_job()
        while True:
            self._finish_phase()
            _eval_loader_finish()
            epoch = job.next_epoch()
            if epoch is None:
                info = job.info()
                if info["stopped_by_cost"] and self.rank == 0:
                    raise ZeusCostThresholdExceededError(info["time_s"], info["energy_j"], info["cost"],
                                                         info["predicted_cost"], info["cost_threshold"])
                return
            self.epoch_num = epoch
            yield epoch

    def report_metric(self, metric: float, higher_is_better: bool) -> None:
        """Reports the epoch's validation metric (all-reduce it across ranks first)."""
        if not self._is_train:
            raise AssertionError("Use report_metric on the train dataloader.")
        self._ensure_job().report_metric(metric, higher_is_better)

    @property
    def target_metric_reached(self) -> bool:
        return bool(self._job is not None and self._job.info()["reached"])

    def _job_for_phase(self) -> Optional[ZeusJob]:
        if self._is_train:
            return self._ensure_job()
        train = _Shared.train
        if train is None or train._job is None or not train._job._h:
            return None  # an eval loader used outside zeus_job's epochs: plain iteration
        return train._job

    def _finish_phase(self) -> None:
        """Ends the phase a loop left early (break out of the batches)."""
        if not self._in_phase:
            return
        job = self._job_for_phase()
        self._in_phase = False
        if job is None:
            return
        if self._in_step:
            self._in_step = False
            (job.train_step_end if self._is_train else job.eval_step_end)()
        (job.train_end if self._is_train else job.eval_end)()

    def __iter__(self):
        job = self._job_for_phase()
        self._finish_phase()
        if self._is_train:
            _eval_loader_finish()
        if job is not None:
            if self._is_train:
                job.train_begin()
            else:
                train = _Shared.train
                if train is not None:
                    train._finish_phase()
                job.eval_begin()
            self._in_phase = True
        self.sample_num = 0
        self._it = iter(self._zeus_batches())
        if not self._is_train:
            _Shared.eval = self
        return self

    def __next__(self):
        job = self._job_for_phase() if self._in_phase else None
        if job is not None and self._in_step:
            self._in_step = False
            (job.train_step_end if self._is_train else job.eval_step_end)()
        try:
            batch = next(self._it)
        except StopIteration:
            if job is not None:
                self._in_phase = False
                (job.train_end if self._is_train else job.eval_end)()
            raise
        self.sample_num += 1
        if job is not None:
            (job.train_step_begin if self._is_train else job.eval_step_begin)()
            self._in_step = True
        return batch

    def close(self) -> None:
        """(not in the original) Ends the job: GPUs get back their limits. The train loader's job
        is also closed at exit."""
        if self._job is not None:
            self._job.close()


def _eval_loader_finish() -> None:
    """Ends an evaluation phase the loop left early."""
    ev = _Shared.eval
    if ev is not None:
        ev._finish_phase()


class _PlainZeusDataLoader(_ZeusLoaderMixin):
    """ZeusDataLoader without PyTorch: batches of ``batch_size`` items of a sequence (the last one
    shorter unless ``drop_last``), or the batches of ``batches``."""

    def __init__(self, dataset=None, *, batch_size: int, max_epochs: int = -1, distributed=None, shuffle=False,
                 drop_last: bool = False, collate_fn=None, batches: Optional[Iterable] = None, monitor=None,
                 pl_step: int = 25, seed: Optional[int] = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if (dataset is None) == (batches is None):
            raise ValueError("give a dataset (a sequence) or batches (an iterable of batches), not both")
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.shuffle = shuffle
        self.collate_fn = collate_fn
        self._batches = batches
        self._seed = seed
        self._epoch_shuffles = 0
        self._zeus_bs = batch_size
        self._zeus_setup(batch_size, max_epochs, distributed, monitor, pl_step)

    def _zeus_len(self) -> int:
        if self._batches is not None:
            return len(self._batches)  # type: ignore[arg-type]
        n = len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def __len__(self) -> int:
        return self._zeus_len()

    def _zeus_batches(self):
        if self._batches is not None:
            return iter(self._batches)
        order = list(range(len(self.dataset)))
        if self.shuffle:
            import random
            rng = random.Random(None if self._seed is None else self._seed + self._epoch_shuffles)
            self._epoch_shuffles += 1
            rng.shuffle(order)
        return self._gen(order)

    def _gen(self, order):
        bs = self.batch_size
        for i in range(0, len(order), bs):
            idx = order[i:i + bs]
            if len(idx) < bs and self.drop_last:
                return
            items = [self.dataset[j] for j in idx]
            yield self.collate_fn(items) if self.collate_fn is not None else items


_torch_class = None
_torch_lock = threading.Lock()


def _torch_loader_class():
    """ZeusDataLoader as a torch DataLoader subclass, built when first needed."""
    global _torch_class
    with _torch_lock:
        if _torch_class is not None:
            return _torch_class
        from torch.utils.data import DataLoader

        class _TorchZeusDataLoader(_ZeusLoaderMixin, DataLoader):
            def __init__(self, *args, batch_size: int, max_epochs: int = -1, distributed=None, monitor=None,
                         pl_step: int = 25, **kwargs) -> None:
                DataLoader.__init__(self, *args, batch_size=batch_size, **kwargs)
                self._zeus_bs = batch_size
                self._zeus_setup(batch_size, max_epochs, distributed, monitor, pl_step)

            def _zeus_len(self) -> int:
                return DataLoader.__len__(self)

            def _zeus_batches(self):
                return DataLoader.__iter__(self)

            def __iter__(self):
                return _ZeusLoaderMixin.__iter__(self)

            def __len__(self) -> int:
                return DataLoader.__len__(self)

        _TorchZeusDataLoader.__name__ = _TorchZeusDataLoader.__qualname__ = "ZeusDataLoader"
        _torch_class = _TorchZeusDataLoader
        return _torch_class


class ZeusDataLoader(metaclass=abc.ABCMeta):
    """Profiles and optimizes the GPU power limit from the training loop, and follows `zeus run`'s
    ZEUS_* protocol (the original's ``zeus.run.ZeusDataLoader``).

    The loader created with ``max_epochs`` is the train loader; the other (``max_epochs``
    omitted) is the eval loader. Iterate the train loader's :meth:`epochs`, each epoch its batches
    and then the eval loader's, and report the validation metric with :meth:`report_metric`.

    Environment (set by ``zeus run``): ``ZEUS_TARGET_METRIC`` (required), ``ZEUS_LOG_DIR``
    (``zeus_log``), ``ZEUS_JOB_ID`` (``zeus``), ``ZEUS_COST_THRESH`` (``inf``), ``ZEUS_ETA_KNOB``
    (0.5), ``ZEUS_PROFILE_PARAMS`` (``10,40``), ``ZEUS_USE_OPTIMAL_PL`` (true).

    Args:
        *args, **kwargs: the DataLoader's (with PyTorch imported), else ``dataset`` (a sequence)
            or ``batches=`` (an iterable of batches), ``shuffle``, ``drop_last``, ``collate_fn``.
        batch_size: the batch size (per process).
        max_epochs: the most epochs; give it to the train loader only.
        distributed: None (one process) or "dp" (data parallel, torch.distributed initialised).
        monitor: (not in the original) the ZeusMonitor to measure; None: this process's GPU.
        pl_step: (not in the original) the power-limit stride, W.

    Raises:
        ValueError: ``max_epochs`` given to a second loader, a bad ``distributed``, a ZEUS_*
            variable out of range (when the first epoch is asked for).
        ZeusCostThresholdExceededError: from :meth:`epochs`, as the original.
    """

    def __new__(cls, *args, **kwargs):
        if cls is ZeusDataLoader:
            if "torch" in sys.modules and "batches" not in kwargs:
                return _torch_loader_class()(*args, **kwargs)
            return _PlainZeusDataLoader(*args, **kwargs)
        return object.__new__(cls)  # pragma: no cover


ZeusDataLoader.register(_ZeusLoaderMixin)

__all__ = ["ZeusDataLoader", "ZeusJob", "ZeusCostThresholdExceededError"]
