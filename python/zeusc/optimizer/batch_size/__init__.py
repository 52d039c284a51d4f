"""Batch size optimizer client (zeus.optimizer.batch_size of the original).

:class:`~zeusc.optimizer.batch_size.client.BatchSizeOptimizer` talks to ``zeus bso-server`` (or
the original's server) over HTTP with the standard library only: a training script asks it for
a batch size, reports each epoch's time, energy and validation metric, and learns when to stop.
See docs/bso-server.md.
"""
from .common import JobSpec  # noqa: F401
