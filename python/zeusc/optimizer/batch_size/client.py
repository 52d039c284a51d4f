"""Batch size optimizer client (zeus.optimizer.batch_size.client of the original).

:class:`BatchSizeOptimizer` has the original's constructor, methods, attributes and errors, and
speaks its HTTP protocol to ``zeus bso-server`` (or the original's server) with ``urllib`` only.
Where the server requires a bearer token, set ``ZEUS_BSO_TOKEN`` (or ``ZEUS_BSO_TOKEN_FILE``).
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Optional

from ...callback import Callback
from .common import (GET_NEXT_BATCH_SIZE_URL, REGISTER_JOB_URL, REPORT_END_URL, REPORT_RESULT_URL, CreatedJob,
                     JobSpec, JobSpecFromClient, ReportResponse, TrainingResult, TrialId)
from .exceptions import (ZeusBSOBadOperationError, ZeusBSOConfigError, ZeusBSOOperationOrderError,
                         ZeusBSORuntimError, ZeusBSOTrainFailError)

logger = logging.getLogger(__name__)

_TIMEOUT_S = float(os.environ.get("ZEUS_BSO_TIMEOUT", "60"))


class _Response:
    def __init__(self, status_code: int, text: str) -> None:
        self.status_code = status_code
        self.text = text

    def json(self) -> Any:
        return json.loads(self.text)


def _token() -> Optional[str]:
    t = os.environ.get("ZEUS_BSO_TOKEN")
    if t:
        return t
    f = os.environ.get("ZEUS_BSO_TOKEN_FILE")
    if f:
        with open(f, encoding="utf-8") as fh:
            return fh.readline().strip() or None
    return None


def _request(method: str, url: str, body: Optional[str] = None, params: Optional[dict] = None) -> _Response:
    if params:
        url += "?" + urllib.parse.urlencode(params)
    data = body.encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    tok = _token()
    if tok:
        req.add_header("Authorization", "Bearer " + tok)
    try:
        with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as r:
            return _Response(r.status, r.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as e:
        return _Response(e.code, e.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError) as e:
        raise ZeusBSORuntimError(f"Cannot reach the Zeus batch size optimizer server at {url}: {e}") from e


def _gpu_config(monitor) -> dict:
    from ...device import get_gpus
    try:
        gpus = get_gpus(ensure_homogeneous=True)
    except Exception as e:  # noqa: BLE001 - the original turns every GPU problem into a config error
        raise ZeusBSOConfigError(f"Cannot use the GPUs: {e}") from e
    if len(gpus) == 0:
        raise ZeusBSOConfigError("No GPUs detected.")
    n = len(monitor.gpu_indices)
    return {"max_power": gpus.get_power_management_limit_constraints(0)[1] // 1000 * n, "number_of_gpus": n,
            "gpu_model": gpus.get_name(0)}


class BatchSizeOptimizer(Callback):
    """Batch size optimizer client that talks to the server.

    Call in order inside the training script: ``get_batch_size`` at the beginning,
    ``on_train_begin`` before the first epoch, ``on_evaluate(metric)`` after each epoch. One
    optimizer per training session of the job; the GPUs (homogeneous) are those of ``monitor``.

    Args:
        monitor: a ``ZeusMonitor`` measuring all and only the GPUs used for training.
        server_url: the server's URL, e.g. ``http://127.0.0.1:7788``.
        job: a :class:`~zeusc.optimizer.batch_size.common.JobSpec` (or the original's JobSpec, or
            a dict of its fields).
        rank: only rank 0 may ask for a batch size.
    """

    def __init__(self, monitor, server_url: str, job, rank: int = 0) -> None:
        self.monitor = monitor
        self.server_url = server_url.rstrip("/")
        self.cur_epoch = 0
        self.running_time = 0.0
        self.consumed_energy = 0.0
        self.training_finished = False
        self.trial_number = 0
        self.rank = rank
        spec = JobSpec.parse_obj(job)
        self.job_spec = JobSpecFromClient(**spec.dict(), **_gpu_config(monitor))
        self.current_batch_size = 0
        res = _request("POST", self.server_url + REGISTER_JOB_URL, self.job_spec.json())
        self._handle_response(res)
        self.job = CreatedJob.parse_obj(res.json())
        logger.critical("Job is registered with job_id: \x1b[31;1m%s\x1b[0m", self.job.job_id)
        logger.info("Job is registered: %s", str(self.job))

    def get_batch_size(self) -> int:
        """The batch size to train with (asked of the server once per session)."""
        if self.rank != 0:
            raise ZeusBSOBadOperationError("Only rank 0 gpu can ask for a batch size.")
        if self.current_batch_size != 0:
            return self.current_batch_size
        self.cur_epoch = 0
        res = _request("GET", self.server_url + GET_NEXT_BATCH_SIZE_URL, params={"job_id": self.job.job_id})
        self._handle_response(res)
        trial_id = TrialId.parse_obj(res.json())
        if trial_id.batch_size not in self.job.batch_sizes:
            raise ZeusBSORuntimError(f"Zeus server returned a strange batch_size: {trial_id.batch_size}")
        self.current_batch_size = trial_id.batch_size
        self.trial_number = trial_id.trial_number
        logger.info("[BatchSizeOptimizer] Chosen batch size: %s", trial_id.batch_size)
        url = self.server_url + REPORT_END_URL
        body = trial_id.json()

        def report_end() -> None:
            try:
                _request("PATCH", url, body)
            except ZeusBSORuntimError as e:  # the process is exiting: say so, do not raise
                logger.warning("Could not end trial %d: %s", trial_id.trial_number, e)

        atexit.register(report_end)
        return trial_id.batch_size

    def on_train_begin(self) -> None:
        """Start the monitor window and mark training as started."""
        self.training_finished = False
        self.monitor.begin_window("BatciSizeOptimizerClient")

    def on_evaluate(self, metric: float) -> None:
        """Report this epoch's metric; raises ZeusBSOTrainFailError when training must stop
        without having reached the target (max_epochs, or the cost passed beta_knob times the
        least cost seen)."""
        if self.current_batch_size == 0:
            raise ZeusBSOOperationOrderError("Call get_batch_size to set the batch size first")
        if self.training_finished:
            return
        self.cur_epoch += 1
        measurement = self.monitor.end_window("BatciSizeOptimizerClient")
        self.running_time += measurement.time
        self.consumed_energy += measurement.total_energy
        result = TrainingResult(job_id=self.job.job_id, batch_size=self.current_batch_size,
                                trial_number=self.trial_number, time=self.running_time,
                                energy=self.consumed_energy, metric=metric, current_epoch=self.cur_epoch)
        res = _request("POST", self.server_url + REPORT_RESULT_URL, result.json())
        self._handle_response(res)
        parsed = ReportResponse.parse_obj(res.json())
        if not parsed.stop_train:
            self.monitor.begin_window("BatciSizeOptimizerClient")
        else:
            self.training_finished = True
            if not parsed.converged:
                raise ZeusBSOTrainFailError(f"Train failed: {parsed.message} This batch size will not be selected "
                                            "again. Please re-launch the training")

    def _handle_response(self, res) -> None:
        if not (200 <= (code := res.status_code) < 300):
            raise ZeusBSORuntimError(f"Zeus server returned status code {code}: {res.text}")


__all__ = ["BatchSizeOptimizer"]
