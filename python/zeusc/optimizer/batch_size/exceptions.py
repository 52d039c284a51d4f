"""Exceptions of the batch size optimizer client (the original's names)."""
from ...exceptions import ZeusError


class ZeusBSORuntimError(ZeusError):
    """The server failed to process a request (its status and message are in the text)."""


class ZeusBSOTrainFailError(ZeusError):
    """Training failed for the chosen batch size (it will not be chosen again)."""


class ZeusBSOConfigError(ZeusError):
    """The training's configuration does not meet the requirements (e.g. no or mixed GPUs)."""


class ZeusBSOOperationOrderError(ZeusError):
    """The methods of BatchSizeOptimizer were called in the wrong order."""


class ZeusBSOBadOperationError(ZeusError):
    """An operation was used the wrong way (e.g. a batch size asked for on rank 1)."""
