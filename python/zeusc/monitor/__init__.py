"""Time, energy, power and temperature monitors (zeus.monitor of the original).

The main class is :class:`ZeusMonitor` (measurement windows); :class:`PowerMonitor` and
:class:`TemperatureMonitor` keep timelines sampled by libzeus. ``python -m zeusc.monitor``
measures the energy or the power of a command.
"""
from .energy import Measurement, MeasurementState, ZeusMonitor
from .power import PowerDomain, PowerMonitor
from .temperature import TemperatureMonitor

__all__ = ["ZeusMonitor", "Measurement", "MeasurementState", "PowerMonitor", "PowerDomain", "TemperatureMonitor"]
