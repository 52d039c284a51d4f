#!/usr/bin/env python3
"""The Perseus step of scripts/gpu-check.sh: the pipeline frequency optimizer's client (zeusc over
libzeus's zeus_pfo) with pipeline_sim-style instruction hooks, on real GPU work, against a local
`zeus pfo-server`, reporting the energy saved and the slowdown it measured.

    gpu_check_pfo.py --zeus PATH [--gpu N] [--quick]

One pipeline stage on one GPU runs iterations of M microbatches in 1F1B order ("forward" is K
fp16 matrix products, "backward" 2K), with on_instruction_begin/end around each. Twice, each time
against a fresh server on a free loopback port: AllMaxFrequency (every instruction at the
highest clock), then a PointSolution plan with every forward at the supported clock nearest 75 %
of the highest and every backward at the one nearest 87.5 % (the clock changes at every
instruction, as in a Perseus plan). From each run's last completed round: time and energy per
iteration; the energy saved and the slowdown of the plan against the maximum; the clock the
controller put in place; per instruction kind, the planned clock against the achieved time and
energy, and the fraction of instruction time at the planned clock (the controller's accounting,
which counts a lock from its call's start plus the lock latency: docs/perseus-latency.md). Prints one JSON document; exits 0 when every check passed, 1 when one failed, 77 (reason on
stderr) when it cannot run: no zeusc with the Perseus client, no CUDA-enabled torch, or GPUs whose
clock does not move with real time (the fake NVML on its virtual clock).

Sized by time and checked against the counter (issue 35): the counter's tick is measured first
(gpu_check_plo.counter_tick) and an iteration's time from two plain iterations; each round then
has enough iterations to last max(1 s, 10 counter ticks) (at most 10 s; 4 s with --quick). A
thread polls the energy counter through both runs; over the last round of each run, the counter's
energy (interpolated between its ticks at the round's first step begin and last step end) is set
beside the client's iterations x energy per iteration. Checks added: round_ticks (>= 10 counter
ticks inside each run's last round, or a counter that moves at every read), counter_ticks_complete
(the counter changed as many times in each round as the round lasts counter ticks, within 1.5 or
3 %, less the ticks the polling thread could not tell apart while it was descheduled for more than
a tick (counter_ticks_observable; on a loaded 2-core machine a 10 ms counter lost 7 of 132): a
counter that skips a tick loses its energy, and the client, which reads the same counter, would
agree with it), energy_agrees_with_
counter (within 5 %), energy_saved_within_clocks (the energy saved within [0, 100 (1 - (f_lo /
f_max)^3)] % widened by its uncertainty: a lower clock cannot cost more energy for the same work
when time does not grow, and dynamic power falls at most with the cube of the clock) and
energy_saved_meaningful (its uncertainty <= 5 percentage points: each run's energy is as uncertain
as its disagreement with the counter plus half a counter read at each end of the round). When the rounds hold too few ticks, the energies are "not measured" and the
step fails.

ZEUS_GPU_CHECK_PLO_WORK=fake:<busy file>:<seconds> (the tests, against the fake NVML) replaces
the work with holding the busy file, <seconds> per forward and twice that per backward.
"""
import argparse
import json
import os
import subprocess
import sys
import math
import tempfile
import threading
import time

from gpu_check_plo import clock_moves_with_real_time, counter_tick


def skip(why):
    print(f"gpu_check_pfo: skipped: {why}", file=sys.stderr)
    sys.exit(77)


def make_work(gpu, quick):
    spec = os.environ.get("ZEUS_GPU_CHECK_PLO_WORK", "")
    if spec.startswith("fake:"):
        _, busy, secs = spec.split(":", 2)
        secs = float(secs)
        open(busy, "w").close()

        def done():
            try:
                os.unlink(busy)
            except FileNotFoundError:
                pass

        return ("fake (the fake GPU's busy file held, fixed time per instruction)",
                {"forward": lambda: time.sleep(secs), "backward": lambda: time.sleep(2 * secs)}, done)
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        skip(f"torch does not import ({e.__class__.__name__}: {e}); the Perseus step needs real GPU work")
    if not torch.cuda.is_available():
        skip("torch imports but sees no CUDA GPU")
    n, k = (2048, 4) if quick else (4096, 8)
    dev = torch.device(f"cuda:{gpu}")
    a = torch.randn(n, n, device=dev, dtype=torch.float16)
    b = torch.randn(n, n, device=dev, dtype=torch.float16)

    def run(times):
        def f():
            for _ in range(times):
                a @ b
            torch.cuda.synchronize(dev)
        return f

    return (f"torch {torch.__version__}: forward {k}, backward {2 * k} fp16 {n}x{n} matrix products",
            {"forward": run(k), "backward": run(2 * k)}, lambda: None)


def start_server(zeus, scheduler, args, dump):
    cmd = [zeus, "pfo-server", "--port", "0", "--log-level", "warn", "--scheduler", scheduler,
           "--dump-dir", dump]
    if args:
        cmd += ["--scheduler-args", json.dumps(args)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()  # "... port N"
    if not line or "port" not in line:
        p.kill()
        raise RuntimeError(f"zeus pfo-server did not start: {line!r} {p.stderr.read()[-500:]}")
    return p, "http://127.0.0.1:" + line.split()[-1]


def stop_server(p):
    p.terminate()
    try:
        p.wait(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class CounterThread:
    """Polls the energy counter back to back on a thread; keeps (time, J) of every change (a
    tick, placed halfway between the two reads) and of the first read, and the stretches between
    two reads longer than 1 ms (a poller descheduled on a busy machine: it can see one change in
    such a stretch, however many ticks it held)."""

    LONG_GAP_S = 0.001

    def __init__(self, gpu):
        self.gpu, self.ticks, self.stop, self.gaps = gpu, [], threading.Event(), []
        self.long_gaps = []
        self.t = threading.Thread(target=self._run, daemon=True)
        self.t.start()

    def _run(self):
        prev = None
        while not self.stop.is_set():
            a = time.perf_counter()
            e = self.gpu.get_total_energy_consumption() / 1000.0
            mid = (a + time.perf_counter()) / 2
            if prev is not None and len(self.gaps) < 10000:
                self.gaps.append(mid - prev[0])
            if prev is not None and mid - prev[0] > self.LONG_GAP_S and len(self.long_gaps) < 200000:
                self.long_gaps.append((prev[0], mid))
            if prev is None:
                self.ticks.append((mid, e))
            elif e != prev[1]:
                self.ticks.append(((prev[0] + mid) / 2, e))
            prev = (mid, e)

    def close(self, after=None, wait_s=0.0):
        """Stops polling once a tick later than `after` is seen (or wait_s has passed)."""
        end = time.perf_counter() + wait_s
        while after is not None and time.perf_counter() < end and not (self.ticks and self.ticks[-1][0] > after):
            time.sleep(0.005)
        self.stop.set()
        self.t.join()

    def read_gap(self):
        g = sorted(self.gaps)
        return g[len(g) // 2] if g else 0.0

    def energy(self, t0, t1):
        """(counter energy between t0 and t1, interpolated between ticks; ticks inside) or (None, n)."""
        tk = self.ticks

        def at(t):
            for k in range(len(tk) - 1):
                if tk[k][0] <= t <= tk[k + 1][0]:
                    (a, ea), (b, eb) = tk[k], tk[k + 1]
                    return ea + (eb - ea) * (t - a) / (b - a) if b > a else ea
            return None

        inside = sum(1 for t, _ in tk[1:] if t0 <= t <= t1)
        e0, e1 = at(t0), at(t1)
        return (e1 - e0 if e0 is not None and e1 is not None else None), inside

    def observable(self, t0, t1, tick_s):
        """How many changes a counter that moves every tick_s shows this poller between t0 and t1:
        the span's ticks, less what the poller's long stretches hid (a stretch of g seconds shows at
        most one change of its g / tick_s ticks). A counter that hides changes itself
        (FAKE_NVML_LIE=counter_skips_tick) shows fewer still."""
        hidden = 0.0
        for a, b in self.long_gaps:
            g = min(b, t1) - max(a, t0)
            if g > tick_s:
                hidden += g / tick_s - 1
        return (t1 - t0) / tick_s - hidden


def run_job(PFO, url, gpu, order, work, rounds, per_round, counter=None):
    opt = PFO(rank=0, dp_rank=0, pp_rank=0, tp_rank=0, device_id=gpu, dp_degree=1, pp_degree=1, tp_degree=1,
              world_size=1, server_url=url, pipe_schedule=order, iters_per_round=per_round,
              schedule_timeout=60)
    seen = set()
    begins, ends = [], []
    try:
        for _ in range(rounds * per_round):
            begins.append(time.perf_counter())
            opt.on_step_begin()
            for name in order:
                opt.on_instruction_begin(name)
                work[name]()
                opt.on_instruction_end(name)
                seen.add(opt.current_frequency)
            ends.append(time.perf_counter())  # before on_step_end: a round's last one talks to the server
            opt.on_step_end()
        r = opt.last_round
        last = slice((rounds - 1) * per_round, rounds * per_round)
        span = (begins[last][0], ends[last][-1])
        # The controller sets clocks from its own thread; what it put in place last, once settled.
        try:
            opt.wait_for_clock(timeout=10)
        except Exception:  # noqa: BLE001 - reported through clock_at_end_mhz
            pass
        at_end = opt.current_frequency
        return {"clock_at_end_mhz": at_end, "job_id": opt.job_id, "round": r.round, "iterations": r.iterations,
                "iter_time_s": r.iter_time, "iter_energy_j": r.iter_energy,
                "planned_clock_fraction": r.planned_clock_fraction if r.planned_clock_fraction == r.planned_clock_fraction
                else None, "clock_late": r.clock_late, "energy_fitted": r.energy_fitted,
                "per_kind": [{k: (None if isinstance(v, float) and v != v else v) for k, v in c.items()}
                             for c in opt.last_round_classes],
                "schedule_mhz": sorted({f for _, f in opt.schedule}),
                "clocks_set_mhz": sorted(seen), "highest_mhz": opt.frequencies[0], "detached": opt.detached,
                "round_s": span[1] - span[0], "_span": span, "_frequencies": opt.frequencies}
    finally:
        opt.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zeus", required=True, help="the zeus binary (for zeus pfo-server)")
    ap.add_argument("--gpu", type=int, default=0, help="the GPU of the one pipeline stage")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    args = ap.parse_args()
    try:
        from zeusc.optimizer.pipeline_frequency import PipelineFrequencyOptimizer as PFO
        from zeusc import _lib
        _lib.require_pfo()
    except Exception as e:  # noqa: BLE001
        skip(f"the zeusc binding or its Perseus client is not there ({e.__class__.__name__}: {e})")
    if subprocess.run([args.zeus, "pfo-server", "--help"], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL).returncode != 0:
        skip(f"{args.zeus} has no pfo-server command (built without the Perseus server component)")
    from zeusc.device import get_gpus
    gpu = get_gpus().gpus[args.gpu]
    real, rate = clock_moves_with_real_time(get_gpus().devices)
    if not real:
        skip(f"the GPUs' clock does not move with real time (it moved {rate:.3f} s per second: the fake NVML on its "
             "virtual clock; ZEUS_SIM_CLOCK=wall runs this step): work done in real time would measure nothing real")
    what, work, done = make_work(args.gpu, args.quick)
    m = 4
    order = []
    for _ in range(m):
        order += ["forward", "backward"]
    tick_s = counter_tick(gpu, 2.5)
    for name in order:  # a first iteration (warm-up), then one timed
        work[name]()
    t0 = time.perf_counter()
    for name in order:
        work[name]()
    iter_s = max(time.perf_counter() - t0, 1e-4)
    round_s = min(4.0 if args.quick else 10.0, max(1.0, 10 * tick_s))
    rounds = 2 if args.quick else 3
    per_round = max(2, math.ceil(round_s / iter_s))
    doc = {"work": what, "gpu": args.gpu, "microbatches": m, "rounds": rounds, "iters_per_round": per_round,
           "counter_tick_s": tick_s, "iteration_s_measured": iter_s, "round_s_planned": per_round * iter_s}
    checks = {}
    tmp = tempfile.mkdtemp(prefix="gpu-check-pfo.")
    counter = CounterThread(gpu)
    try:
        srv, url = start_server(args.zeus, "AllMaxFrequency", None, os.path.join(tmp, "dump"))
        try:
            base = run_job(PFO, url, args.gpu, order, work, rounds, per_round)
        finally:
            stop_server(srv)
        freqs = base.pop("_frequencies")
        target = min(freqs, key=lambda f: abs(f - 0.75 * freqs[0]))
        target_b = min((f for f in freqs if f != target), key=lambda f: abs(f - 0.875 * freqs[0]))
        clock_of = {"forward": target, "backward": target_b}
        plan = os.path.join(tmp, "plan.py")
        with open(plan, "w") as f:
            f.write("[\n  [" + ", ".join('("%s", %d)' % (i, clock_of[i]) for i in order) + "],\n]\n")
        srv, url = start_server(args.zeus, "PointSolution", {"solution_path": plan}, os.path.join(tmp, "dump"))
        try:
            planned = run_job(PFO, url, args.gpu, order, work, rounds, per_round)
            planned.pop("_frequencies")
        finally:
            stop_server(srv)
    finally:
        last_end = planned["_span"][1] if "planned" in locals() else None
        counter.close(after=last_end, wait_s=3 * tick_s + 0.5)
        done()
    # Each run's last round against the counter.
    ticks_needed = 10
    for run in (base, planned):
        a, b = run.pop("_span")
        e, inside = counter.energy(a, b)
        run["counter_ticks_in_round"] = inside
        run["counter_ticks_expected"] = run["round_s"] / tick_s if tick_s > 0 else None
        # what this poller could see of them (on a busy machine it is descheduled now and then)
        run["counter_ticks_observable"] = counter.observable(a, b, tick_s) if tick_s > 0 else None
        run["counter_energy_j"] = e
        claimed = run["iter_energy_j"] * run["iterations"]
        run["client_energy_j"] = claimed
        run["energy_vs_counter_pct"] = 100 * (claimed / e - 1) if e else None
        # The counter is the reference: the client's figure is as uncertain as its disagreement with
        # it, plus where the counter's ticks are known in time (half a read at each end of the round).
        run["energy_uncertainty_pct"] = (abs(run["energy_vs_counter_pct"]) + 100 * counter.read_gap() / run["round_s"]
                                         if run["energy_vs_counter_pct"] is not None and run["round_s"] > 0 else None)
    doc["all_max_frequency"] = base
    doc["plan_mhz"] = target
    doc["plan_mhz_per_kind"] = clock_of
    doc["plan"] = planned
    t0, e0, t1, e1 = base["iter_time_s"], base["iter_energy_j"], planned["iter_time_s"], planned["iter_energy_j"]
    doc["energy_saved_pct"] = 100 * (1 - e1 / e0) if e0 > 0 else None
    doc["slowdown"] = t1 / t0 if t0 > 0 else None
    checks["rounds_completed"] = base["round"] == rounds - 1 and planned["round"] == rounds - 1
    # clocks_set_mhz: the clocks seen in place after each instruction; the controller works
    # asynchronously, so the first instructions of a run may still see the clock of before.
    checks["max_schedule_served"] = base["schedule_mhz"] == [freqs[0]] and base["clock_at_end_mhz"] == freqs[0]
    checks["plan_applied"] = (planned["schedule_mhz"] == sorted({target, target_b})
                              and planned["clock_at_end_mhz"] in (target, target_b) and target in planned["clocks_set_mhz"])
    kinds = {c["instruction"]: c for c in planned["per_kind"]}
    checks["per_kind_reported"] = (set(kinds) == {"forward", "backward"}
                                   and all(kinds[k]["planned_mhz"] == clock_of[k] and kinds[k]["count"] > 0
                                           and kinds[k]["mean_time_s"] > 0 for k in kinds))
    checks["energy_measured"] = e0 > 0 and e1 > 0
    continuous = tick_s == 0.0
    checks["round_ticks"] = all(continuous or r["counter_ticks_in_round"] >= ticks_needed for r in (base, planned))
    # A busy GPU's counter moves at every tick of its period: a round that saw fewer changes than
    # its length in ticks (beyond one and a half ticks of where the round's ends fall, or 3 % on
    # long rounds) lost the energy of the ticks it did not show. The client's energy comes from the
    # same counter, so energy_agrees_with_counter cannot see that; this check does.
    checks["counter_ticks_complete"] = all(continuous or r["counter_ticks_in_round"] >= r["counter_ticks_observable"]
                                           - max(1.5, 0.03 * r["counter_ticks_observable"]) for r in (base, planned))
    checks["energy_agrees_with_counter"] = all(r["energy_vs_counter_pct"] is not None and abs(r["energy_vs_counter_pct"]) <= 5
                                               for r in (base, planned))
    u = None
    if e0 > 0 and base["energy_uncertainty_pct"] is not None and planned["energy_uncertainty_pct"] is not None:
        u = (e1 / e0) * math.hypot(base["energy_uncertainty_pct"], planned["energy_uncertainty_pct"])
    doc["energy_saved_uncertainty_pct"] = u
    f_lo = min(target, target_b)
    doc["energy_saved_max_pct"] = 100 * (1 - (f_lo / freqs[0]) ** 3)
    saved = doc["energy_saved_pct"]
    checks["energy_saved_within_clocks"] = (saved is not None and u is not None and
                                            -u <= saved <= doc["energy_saved_max_pct"] + u)
    checks["energy_saved_meaningful"] = u is not None and u <= 5.0
    measured = checks["round_ticks"] and checks["counter_ticks_complete"] and checks["energy_measured"] and checks["energy_saved_meaningful"]
    if not measured:
        doc["energy_saved_note"] = (f"not measured: the rounds held fewer than {ticks_needed} counter ticks, the "
                                    "counter missed ticks, no energy, or an uncertainty above 5 percentage points")
    checks["stayed_attached"] = not base["detached"] and not planned["detached"]
    doc["checks"] = checks
    doc["ok"] = all(checks.values())
    json.dump(doc, sys.stdout, indent=2, allow_nan=False)
    sys.stdout.write("\n")
    fmt = lambda v, f: "n/a" if v is None else format(v, f)  # noqa: E731
    for c in planned["per_kind"]:
        print(f"gpu_check_pfo: {c['instruction']} planned {c['planned_mhz']} MHz: {c['mean_time_s'] * 1e3:.2f} ms, "
              f"{c['mean_energy_j']:.3f} J, {fmt(c['planned_clock_fraction'] and 100 * c['planned_clock_fraction'], '.1f')} % of its time at the planned "
              f"clock", file=sys.stderr)
    saved_txt = (f"{fmt(doc['energy_saved_pct'], '.1f')} +- {fmt(u, '.1f')} %" if measured else "not measured")
    print(f"gpu_check_pfo: rounds of {per_round} iterations ({base['round_s']:.2f} s, "
          f"{base['counter_ticks_in_round']} counter ticks); per iteration {fmt(e0, '.3f')} J at the highest clock, "
          f"{fmt(e1, '.3f')} J at the plan (counter: {fmt(base['energy_vs_counter_pct'], '+.1f')} / "
          f"{fmt(planned['energy_vs_counter_pct'], '+.1f')} %)", file=sys.stderr)
    print(f"gpu_check_pfo: forward at {target} MHz, backward at {target_b} MHz against {freqs[0]} MHz: energy saved "
          f"{saved_txt}, slowdown {fmt(doc['slowdown'], '.3f')}; "
          f"{'every check passed' if doc['ok'] else 'FAILED: ' + ', '.join(k for k, v in checks.items() if not v)}",
          file=sys.stderr)
    return 0 if doc["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
