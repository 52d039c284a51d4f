"""``python -m zeusc.monitor``: the energy or the power of the GPUs (the original's Zeus Monitor CLI).

    python -m zeusc.monitor energy [--gpu-indices 0 1] [-- COMMAND ...]
        Measures time and energy until COMMAND exits (its exit status is passed on), or, without
        a command, until Ctrl+C, as the original. With a command the measurement is printed on
        standard error, so that standard output stays the command's (the original printed it on
        standard output after the command's own output); without one, on standard output.
    python -m zeusc.monitor power [--gpu-indices 0 1] [--update-period S] [--power-domain D]
                                  [--duration S]
        Prints each GPU's power every period until Ctrl+C (or for --duration seconds), then the
        total time and energy.

On the simulated GPU (``ZEUS_GPU_BACKEND=sim``) this command follows the wall clock unless
``ZEUS_SIM_CLOCK`` says otherwise, as the ``zeus`` CLI does: measuring a real command on a virtual
clock would see no time pass.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from datetime import datetime
from typing import List, Optional


def _names(d: dict) -> dict:
    return {f"GPU{k}": v for k, v in d.items()}


def energy(gpu_indices: list[int] | None = None, command: Optional[List[str]] = None) -> int:
    """Measures the GPUs' time and energy until `command` exits (or, without one, until Ctrl+C);
    prints the Measurement (on stderr when a command ran, else on stdout). Returns the command's exit status (0 without one)."""
    from .energy import ZeusMonitor
    monitor = ZeusMonitor(gpu_indices)
    monitor.begin_window("zeus.monitor.energy")
    rc = 0
    try:
        if command:
            rc = subprocess.call(command)
        else:
            time.sleep(365 * 24 * 60 * 60)  # "forever": until Ctrl+C
    except KeyboardInterrupt:
        pass
    measurement = monitor.end_window("zeus.monitor.energy")
    # One stream, one owner (docs/output.md): a command's stdout is never followed by our report.
    print(measurement, file=sys.stderr if command else sys.stdout, flush=True)
    return rc


def power(gpu_indices: list[int] | None = None, update_period: float = 1.0,
          power_domain: str = "device_instant", duration: Optional[float] = None) -> None:
    """Prints each GPU's power every `update_period` until Ctrl+C (or `duration` seconds), then the
    total time and the energy in `power_domain`."""
    from .power import PowerMonitor
    monitor = PowerMonitor(gpu_indices=gpu_indices, update_period=update_period)
    start = time.time()
    try:
        while duration is None or time.time() - start < duration:
            time.sleep(monitor.update_period)
            p = monitor.get_power(power_domain=power_domain)
            if p is not None:
                print(datetime.now(), _names(p), flush=True)
    except KeyboardInterrupt:
        pass
    end = time.time()
    print("\nTotal time (s):", end - start)
    e = monitor.get_energy(start, end, power_domain=power_domain)
    if e is not None:
        print("Total energy (J):", _names(e))
    monitor.stop()


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = None
    if "--" in argv:
        i = argv.index("--")
        argv, command = argv[:i], argv[i + 1:]
    parser = argparse.ArgumentParser(prog="python -m zeusc.monitor", description="Zeus Monitor CLI (zeusc)")
    sub = parser.add_subparsers(dest="subcommand", required=True)
    ep = sub.add_parser("energy", help="time and energy of the GPUs until COMMAND exits (after --) or Ctrl+C")
    ep.add_argument("--gpu-indices", nargs="+", type=int, help="GPUs to measure (default: all)")
    pp = sub.add_parser("power", help="power of the GPUs every period, and the total energy at the end")
    pp.add_argument("--gpu-indices", nargs="+", type=int, help="GPUs to measure (default: all)")
    pp.add_argument("--update-period", type=float, default=1.0, help="seconds between samples (default 1)")
    pp.add_argument("--power-domain", choices=["device_instant", "device_average", "memory_average"],
                    default="device_instant", help="the power to read (default device_instant)")
    pp.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: Ctrl+C)")
    args = parser.parse_args(argv)
    if args.subcommand == "energy":
        return energy(args.gpu_indices, command)
    if command:
        parser.error("power takes no command")
    power(args.gpu_indices, args.update_period, args.power_domain, args.duration)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("ZEUS_SIM_CLOCK", "wall")
    sys.exit(main())
