"""``python -m zeusc.show_env``: what zeusc sees on this machine (the original's environment check).

Prints the Python and package versions, the libzeus loaded, the frameworks installed, the GPU
backend with each GPU (name, architecture, energy counter, power-limit range, power domains), the
CPU packages with RAPL counters, and whether an SoC is measured. Exits with 0; a part that fails
is reported in its place.
"""
from __future__ import annotations

import importlib.util
import platform
import sys


def _try(fn, default="unavailable"):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - a report, not a check
        return f"{default} ({type(e).__name__}: {e})"


def show_env(out=None) -> None:
    """Prints the report to `out` (default stdout)."""
    out = out or sys.stdout
    import zeusc
    from zeusc import _lib

    def p(*a):
        print(*a, file=out)

    p("Python:", platform.python_version(), f"({sys.executable})")
    p("zeusc:", zeusc.__version__)
    p("libzeus:", _try(zeusc.library_version), "at", _try(zeusc.library_path))
    p("\nFrameworks (installed; zeusc imports none itself):")
    for name in ("torch", "jax", "cupy", "transformers"):
        p(f"  {name}:", "installed" if importlib.util.find_spec(name) else "not installed")

    p("\nGPUs:")
    from zeusc.device.gpu import ZeusGPUInitError, ZeusGPUNotSupportedError, get_gpus
    try:
        gpus = get_gpus()
    except ZeusGPUInitError as e:
        p("  none:", e)
    else:
        p("  backend:", gpus.backend)
        import ctypes
        L = _lib.lib()
        h = gpus.devices._handle()
        for fn, label in (("zeus_devices_driver_version", "driver"), ("zeus_devices_library_version", "library")):
            buf = ctypes.create_string_buffer(128)
            rc = getattr(L, fn)(h, buf, len(buf))
            p(f"  {label} version:", buf.value.decode() if rc == 0 else "unknown")
        for i, g in enumerate(gpus.gpus):
            arch = _try(lambda: L.zeus_gpu_architecture_name(g.get_architecture()).decode())
            p(f"  GPU {i}: {_try(g.get_name)} ({arch})")
            p(f"    energy counter: {_try(g.supports_get_total_energy_consumption)}")
            p(f"    power limit range (mW): {_try(g.get_power_management_limit_constraints)}, "
              f"now {_try(g.get_power_management_limit)}")
            domains = []
            for name, read in (("instant", g.get_instant_power_usage), ("average", g.get_average_power_usage),
                               ("memory average", g.get_average_memory_power_usage)):
                try:
                    domains.append(f"{name} {read()} mW")
                except ZeusGPUNotSupportedError:
                    domains.append(f"{name} not supported")
                except Exception as e:  # noqa: BLE001
                    domains.append(f"{name} failed ({e})")
            p("    power:", ", ".join(domains))
            p(f"    temperature (C): {_try(g.get_gpu_temperature)}")

    p("\nCPUs (RAPL):")
    from zeusc.device.cpu import ZeusCPUInitError, get_cpus
    try:
        cpus = get_cpus()
        for i, c in enumerate(cpus.cpus):
            p(f"  package {i}: DRAM zone {_try(c.supports_get_dram_energy_consumption)}")
    except ZeusCPUInitError as e:
        p("  none:", e)
    p("\nSoC: none (libzeus measures no SoC)")


if __name__ == "__main__":
    show_env()
