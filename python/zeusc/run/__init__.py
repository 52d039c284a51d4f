"""The training side of recurring jobs (zeus.run of the original): :class:`ZeusDataLoader`, the
ZEUS_* protocol that `zeus run` drives, over libzeus's zeus_job; :class:`ZeusJob` for loops
without a DataLoader. The driver itself is the ``zeus run`` command (docs/bso.md)."""
from ..utils.metric import ZeusCostThresholdExceededError
from .dataloader import ZeusDataLoader, ZeusJob

__all__ = ["ZeusDataLoader", "ZeusJob", "ZeusCostThresholdExceededError"]
