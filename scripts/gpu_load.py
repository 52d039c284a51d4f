#!/usr/bin/env python3
"""A GPU load for scripts/gpu-check.sh when nvcc is absent: fp16 matrix products on every
visible CUDA GPU for SECONDS (default 60), or until SIGTERM/SIGINT.

    gpu_load.py [SECONDS]
"""
import signal
import sys
import time

import torch

stop = False


def on_stop(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_stop)
signal.signal(signal.SIGINT, on_stop)
seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 60.0
mats = []
for d in range(torch.cuda.device_count()):
    dev = torch.device(f"cuda:{d}")
    mats.append((dev, torch.randn(4096, 4096, device=dev, dtype=torch.float16),
                 torch.randn(4096, 4096, device=dev, dtype=torch.float16)))
if not mats:
    sys.exit("gpu_load.py: torch sees no CUDA GPU")
t0 = time.monotonic()
while not stop and time.monotonic() - t0 < seconds:
    for _, a, b in mats:
        for _ in range(4):
            a @ b
    for dev, _, _ in mats:
        torch.cuda.synchronize(dev)
