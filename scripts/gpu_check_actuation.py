#!/usr/bin/env python3
"""The actuation-latency step of scripts/gpu-check.sh (issue 24): how long a setting takes to
show in the work itself, not in the read-back (which moves on the sensor's ~100 ms tick).

    gpu_check_actuation.py [--gpu N] [--quick]

A queue of identical fp16 matrix products, each timed with CUDA events, is started after an
event recorded on an idle GPU at a known host time; ~100 ms into it the host changes a setting
(the SM clock locked to the middle supported clock and back; the power limit to the minimum and
back) and times the call. The effect is the first kernel from which three in a row take more than
10 % longer (or shorter) than before the call; its start, on the host's time line, less the
call's start, is the effect latency. Prints one JSON document on stdout (per change: the call's
return time and the effect latency, median, min, max); exits 0 when every kind of change showed
in the work and the settings are back, 1 otherwise, 77 (reason on stderr) when it cannot run (no
zeusc, no CUDA-enabled torch). Needs root or CAP_SYS_ADMIN to change settings.
"""
import argparse
import json
import statistics
import sys
import time


def skip(why):
    print(f"gpu_check_actuation: skipped: {why}", file=sys.stderr)
    sys.exit(77)


def measure(torch, dev, a, b, n_kernels, change):
    """Runs one timed queue with `change()` called ~100 ms in; returns (call_s, effect_s or None)."""
    torch.cuda.synchronize(dev)
    e0 = torch.cuda.Event(enable_timing=True)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n_kernels)]
    h0 = time.perf_counter()
    e0.record()
    for s, e in ev:
        s.record()
        a @ b
        e.record()
    time.sleep(max(0.0, 0.1 - (time.perf_counter() - h0)))
    hc = time.perf_counter()
    change()
    hr = time.perf_counter()
    torch.cuda.synchronize(dev)
    call_at = hc - h0
    starts = [e0.elapsed_time(s) / 1000 for s, _ in ev]
    durs = [s.elapsed_time(e) / 1000 for s, e in ev]
    before = [d for st, d in zip(starts, durs) if st < call_at]
    if len(before) < 5:
        return hr - hc, None
    base = statistics.median(before[len(before) // 2:])
    for i, st in enumerate(starts):
        if st < call_at or i + 3 > len(durs):
            continue
        if all(abs(durs[j] / base - 1) > 0.10 for j in range(i, i + 3)):
            return hr - hc, st - call_at
    return hr - hc, None


def summary(vals):
    v = [x for x in vals if x is not None]
    if not v:
        return {"median_s": None, "min_s": None, "max_s": None, "n": 0}
    return {"median_s": statistics.median(v), "min_s": min(v), "max_s": max(v), "n": len(v)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", type=int, default=0, help="the GPU (default 0)")
    ap.add_argument("--quick", action="store_true", help="fewer changes")
    args = ap.parse_args()
    try:
        from zeusc.device import get_gpus
    except Exception as e:  # noqa: BLE001
        skip(f"the zeusc binding does not import ({e.__class__.__name__}: {e})")
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        skip(f"torch does not import ({e.__class__.__name__}: {e}); timing the work needs CUDA kernels")
    if not torch.cuda.is_available():
        skip("torch imports but sees no CUDA GPU")
    gpu = get_gpus().gpus[args.gpu]
    dev = torch.device(f"cuda:{args.gpu}")
    n = 4096 if args.quick else 8192
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)
    for _ in range(20):
        a @ b
    torch.cuda.synchronize(dev)
    t = time.perf_counter()
    for _ in range(20):
        a @ b
    torch.cuda.synchronize(dev)
    per = (time.perf_counter() - t) / 20
    n_kernels = max(50, int(0.4 / per))  # ~400 ms of work
    repeats = 2 if args.quick else 6
    limit_before = gpu.get_power_management_limit()
    lo_mw, hi_mw = gpu.get_power_management_limit_constraints()
    clocks = sorted(gpu.get_supported_graphics_clocks())
    mid = clocks[len(clocks) // 2]
    doc = {"gpu": args.gpu, "work": f"torch {torch.__version__}: fp16 {n}x{n} matrix products, {per * 1e3:.2f} ms each",
           "kernels_per_queue": n_kernels, "changes": {}}
    checks = {}
    try:
        kinds = {
            "sm_clock_lock": (lambda: gpu.set_gpu_locked_clocks(mid, mid), lambda: gpu.reset_gpu_locked_clocks()),
            "power_limit": (lambda: gpu.set_power_management_limit(lo_mw), lambda: gpu.set_power_management_limit(hi_mw)),
        }
        for name, (down, up) in kinds.items():
            res = {"down": [], "up": []}
            for _ in range(repeats):
                for way, fn in (("down", down), ("up", up)):
                    try:
                        res[way].append(measure(torch, dev, a, b, n_kernels, fn))
                    except Exception as e:  # noqa: BLE001 - a refused setting is reported
                        res[way].append((None, None))
                        doc.setdefault("errors", []).append(f"{name} {way}: {e}")
                    time.sleep(0.3)
            out = {}
            for way in ("down", "up"):
                out[way] = {"call": summary([c for c, _ in res[way]]), "work_effect": summary([e for _, e in res[way]])}
            doc["changes"][name] = out
            checks[f"{name}_seen_in_work"] = out["down"]["work_effect"]["n"] > 0
    finally:
        try:
            gpu.reset_gpu_locked_clocks()
        except Exception:  # noqa: BLE001
            pass
        gpu.set_power_management_limit(limit_before)
    checks["restored"] = gpu.get_power_management_limit() == limit_before
    doc["checks"] = checks
    doc["ok"] = all(checks.values())
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")

    def ms(v):
        return "n/a" if v is None else f"{v * 1e3:.1f} ms"
    parts = [f"{k}: call {ms(v['down']['call']['median_s'])}, in the work after {ms(v['down']['work_effect']['median_s'])}"
             for k, v in doc["changes"].items()]
    print(f"gpu_check_actuation: {'; '.join(parts)}; "
          f"{'every check passed' if doc['ok'] else 'FAILED: ' + ', '.join(k for k, v in checks.items() if not v)}",
          file=sys.stderr)
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
