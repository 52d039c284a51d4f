"""Models shared with the server (zeus.optimizer.batch_size.common of the original), without
pydantic: plain classes with the same field names, defaults and checks, ``dict()``, ``json()``
and ``parse_obj()``.
"""
from __future__ import annotations

import json
import numbers
from typing import Any, Dict

REGISTER_JOB_URL = "/jobs"
DELETE_JOB_URL = "/jobs"
GET_NEXT_BATCH_SIZE_URL = "/jobs/batch_size"
REPORT_RESULT_URL = "/report"
REPORT_END_URL = "/trials"


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_num(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


class _Model:
    """Fields are (name, kind, default); kind: str, int, float, bool, list_int, opt_* variants."""

    _fields: tuple = ()
    _REQUIRED = object()

    def __init__(self, **kw: Any) -> None:
        names = {f[0] for f in self._fields}
        for name, kind, default in self._fields:
            if name in kw:
                v = kw.pop(name)
            elif default is _Model._REQUIRED:
                raise ValueError(f"{type(self).__name__}: field '{name}' is required")
            else:
                v = list(default) if isinstance(default, list) else default
            setattr(self, name, self._check(name, kind, v))
        # Like pydantic's default: unknown fields are ignored.
        del names
        self._validate()

    def _check(self, name, kind, v):
        opt = kind.startswith("opt_")
        base = kind[4:] if opt else kind
        if v is None:
            if opt:
                return None
            raise ValueError(f"{type(self).__name__}: field '{name}' must not be None")
        if base == "str":
            if not isinstance(v, str):
                raise ValueError(f"{type(self).__name__}: field '{name}' must be a str, got {type(v).__name__}")
            return v
        if base == "int":
            if _is_num(v) and float(v).is_integer():
                return int(v)
            raise ValueError(f"{type(self).__name__}: field '{name}' must be an int, got {v!r}")
        if base == "float":
            if _is_num(v):
                return float(v)
            raise ValueError(f"{type(self).__name__}: field '{name}' must be a number, got {v!r}")
        if base == "bool":
            if isinstance(v, bool):
                return v
            raise ValueError(f"{type(self).__name__}: field '{name}' must be a bool, got {v!r}")
        if base == "list_int":
            if not isinstance(v, (list, tuple)) or not all(_is_int(x) for x in v):
                raise ValueError(f"{type(self).__name__}: field '{name}' must be a list of ints, got {v!r}")
            return [int(x) for x in v]
        raise AssertionError(kind)

    def _validate(self) -> None:
        pass

    def dict(self) -> Dict[str, Any]:
        return {f[0]: (list(getattr(self, f[0])) if isinstance(getattr(self, f[0]), list) else getattr(self, f[0]))
                for f in self._fields}

    def json(self) -> str:
        return json.dumps(self.dict())

    @classmethod
    def parse_obj(cls, obj: Any):
        if isinstance(obj, _Model):
            obj = obj.dict()
        elif not isinstance(obj, dict) and hasattr(obj, "dict"):
            obj = obj.dict()  # a pydantic model of the original
        if not isinstance(obj, dict):
            raise ValueError(f"{cls.__name__}: expected a dict, got {type(obj).__name__}")
        return cls(**obj)

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and self.dict() == other.dict()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.dict().items())})"


R = _Model._REQUIRED

_JOB_PARAMS = (
    ("job_id", "str", R),
    ("job_id_prefix", "str", R),
    ("batch_sizes", "list_int", R),
    ("default_batch_size", "int", R),
    ("eta_knob", "float", 0.5),
    ("beta_knob", "opt_float", 2.0),
    ("target_metric", "float", 0.50),
    ("higher_is_better_metric", "bool", True),
    ("max_epochs", "int", 100),
    ("num_pruning_rounds", "int", 2),
    ("window_size", "int", 0),
    ("mab_prior_mean", "float", 0.0),
    ("mab_prior_precision", "float", 0.0),
    ("mab_num_explorations", "int", 2),
    ("mab_seed", "opt_int", None),
)
_GPU_CONFIG = (("max_power", "float", R), ("number_of_gpus", "int", R), ("gpu_model", "str", R))


class JobParams(_Model):
    """Job parameters (see the original's JobParams for each field's meaning)."""

    _fields = _JOB_PARAMS

    def _validate(self) -> None:
        if not self.batch_sizes:
            raise ValueError(f"Batch Sizes = {self.batch_sizes} is empty")
        self.batch_sizes.sort()
        if self.default_batch_size <= 0:
            raise ValueError("default_batch_size must be > 0")
        if not 0 <= self.eta_knob <= 1:
            raise ValueError("eta_knob should be in range [0,1]")
        if self.beta_knob is not None and self.beta_knob <= 0:
            raise ValueError(f"Invalid beta_knob({self.beta_knob}). To disable early stop, set beta_knob = None "
                             "to disable or positive value.")
        if self.max_epochs <= 0:
            raise ValueError("max_epochs must be > 0")
        if self.num_pruning_rounds < 0 or self.mab_num_explorations < 0:
            raise ValueError("num_pruning_rounds and mab_num_explorations must be >= 0")
        if self.default_batch_size not in self.batch_sizes:
            raise ValueError(f"Default BS({self.default_batch_size}) not in batch_sizes({self.batch_sizes}).")
        if self.job_id is not None and not self.job_id.startswith(self.job_id_prefix):
            raise ValueError(f"Job_id({self.job_id}) does not start with prefix({self.job_id_prefix}).")


class JobSpec(JobParams):
    """What the user gives: job_id is optional (the server then makes one from job_id_prefix)."""

    _fields = (("job_id", "opt_str", None),) + _JOB_PARAMS[1:]


class JobSpecFromClient(JobSpec):
    """JobSpec plus the GPU configuration the client measures."""

    _fields = JobSpec._fields + _GPU_CONFIG

    def _validate(self) -> None:
        super()._validate()
        if self.max_power <= 0 or self.number_of_gpus <= 0:
            raise ValueError("max_power and number_of_gpus must be > 0")
        if not self.gpu_model:
            raise ValueError(f"Invalid gpu_model({self.gpu_model}). Shouldn't be empty.")


class CreatedJob(JobSpecFromClient):
    """The job as the server registered it: job_id is set."""

    _fields = (("job_id", "str", R),) + JobSpecFromClient._fields[1:]


class TrialId(_Model):
    """A trial: the batch size to train with and the trial's number."""

    _fields = (("job_id", "str", R), ("batch_size", "int", R), ("trial_number", "int", R))


class TrainingResult(TrialId):
    """Time and energy so far, the metric after current_epoch."""

    _fields = TrialId._fields + (("time", "float", R), ("energy", "float", R), ("metric", "float", R),
                                 ("current_epoch", "int", R))


class ReportResponse(_Model):
    """The server's decision: stop or keep training, and whether the target was reached."""

    _fields = (("stop_train", "bool", R), ("converged", "bool", R), ("message", "str", R))


__all__ = ["REGISTER_JOB_URL", "DELETE_JOB_URL", "GET_NEXT_BATCH_SIZE_URL", "REPORT_RESULT_URL", "REPORT_END_URL",
           "JobParams", "JobSpec", "JobSpecFromClient", "CreatedJob", "TrialId", "TrainingResult",
           "ReportResponse"]
