"""Measuring time and energy (zeus.monitor of the original)."""
from .energy import Measurement, ZeusMonitor

__all__ = ["ZeusMonitor", "Measurement"]
