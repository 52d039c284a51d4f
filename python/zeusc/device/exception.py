"""The device exceptions' base classes where the original keeps them (``zeus.device.exception``),
and :class:`ZeusdError`, raised by :class:`zeusc.utils.zeusd.ZeusdClient` when a daemon refuses
a call."""
from __future__ import annotations

from .cpu import ZeusBaseCPUError
from .gpu import ZeusBaseGPUError
from .soc.common import ZeusBaseSoCError


class ZeusdError(ZeusBaseGPUError):
    """A zeus daemon (or zeusd) answered a call with an error; the message has its words."""


__all__ = ["ZeusBaseGPUError", "ZeusBaseCPUError", "ZeusBaseSoCError", "ZeusdError"]
