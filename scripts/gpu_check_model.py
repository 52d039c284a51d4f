#!/usr/bin/env python3
"""Writes the hardware model gpu-check measured (issue 35, item 5) as DIR/hardware-model.json: a
JSON object that ZEUS_SIM_HARDWARE=FILE loads, so the tests can run against this GPU's physics.

    gpu_check_model.py DIR [--gpu N]

Each key comes from the step that measured it, for the first GPU checked; a key no step measured
is left out (the loader takes its default):
  name                                   probe: the GPU's name
  energy_read_s, power_read_s, average_power_read_s, clock_read_s, power_limit_read_s
                                         probe: the median cost of each reading
  min/max/default_power_limit_w          probe: the power-limit constraints
  min/max_clock_mhz, clock_step_mhz, mem_clock_mhz   probe: the supported clocks
  idle_power_w                           probe: the instant power read before the load started
                                         (not where it is a superchip module's: module_power_w)
  tick_s, tick_jitter_s                  window-accuracy: the counter's period and jitter (else
                                         check: the counter's update period, without jitter)
  power_at_ticks, power_tick_s, power_tick_jitter_s, power_phase_s, power_noise
                                         window-accuracy: whether the power readings tick at all,
                                         and where they tick on a clock of their own: its period,
                                         jitter, its phase after a counter tick at the start; the
                                         readings' spread under the steady load
  clock_lock_call_s                      clock-latency: the median call time
  clock_lock_effect_s, power_limit_call_s, power_limit_down_effect_s, power_limit_up_effect_s
                                         actuation-latency: call times and effects seen in the work
Prints the model on stdout and the keys left out on stderr.
"""
import argparse
import json
import os
import sys


def load(d, name):
    try:
        with open(os.path.join(d, name + ".json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--gpu", type=int, default=0)
    args = ap.parse_args()
    m = {}
    probe = load(args.dir, "probe")
    g = None
    if probe:
        g = next((x for x in probe.get("gpus", []) if x.get("index") == args.gpu), None)
    if g:
        m["name"] = g.get("name")
        calls = {c["call"]: c for c in g.get("calls", []) if c.get("status") == "ok"}
        for key, call in (("energy_read_s", "total_energy"), ("power_read_s", "power_instant"),
                          ("average_power_read_s", "power_average"), ("clock_read_s", "current_clocks"),
                          ("power_limit_read_s", "power_limit")):
            if call in calls and calls[call].get("median_latency_s") is not None:
                m[key] = calls[call]["median_latency_s"]
        for key, src in (("min_power_limit_w", "power_limit_min_w"), ("max_power_limit_w", "power_limit_max_w"),
                         ("default_power_limit_w", "power_limit_default_w")):
            if g.get(src) is not None:
                m[key] = g[src]
        clocks = sorted(g.get("graphics_clocks_mhz") or [])
        if clocks:
            m["min_clock_mhz"], m["max_clock_mhz"] = clocks[0], clocks[-1]
            steps = sorted(b - a for a, b in zip(clocks, clocks[1:]) if b > a)
            if steps:
                m["clock_step_mhz"] = steps[len(steps) // 2]
        if g.get("memory_clocks_mhz"):
            m["mem_clock_mhz"] = max(g["memory_clocks_mhz"])
        # A Grace Hopper module's power (module_power_w) is CPU + memory + GPU, not the GPU's idle
        # power: left out (the loader's default), as the other keys no step measured.
        pw = calls.get("power_instant", {}).get("value") or {}
        if pw.get("power_w") is not None:
            m["idle_power_w"] = pw["power_w"]
    win = load(args.dir, "window-accuracy")
    check = load(args.dir, "check")
    c = win.get("counter") if win else None
    if c:
        m["tick_s"], m["tick_jitter_s"] = c["period_s"], c["jitter_s"]
    elif check:
        cg = next((x for x in check.get("gpus", []) if x.get("index") == args.gpu), None)
        period = cg and (cg.get("counter") or {}).get("update_period_s")
        if period:
            m["tick_s"] = period
    p = win.get("power") if win else None
    ph = win.get("phase") if win else None
    # power_at_ticks: the power readings hold their value between ticks (the loader's sense); on
    # a clock of their own (power_tick_s, power_tick_jitter_s, power_phase_s) unless they tick
    # with the counter. A power that never changed (an idle ideal GPU) tells nothing: left out.
    if p and p.get("continuous") is True:
        m["power_at_ticks"] = False
    elif p and p.get("continuous") is False:
        m["power_at_ticks"] = True
        if ph and not ph["power_with_counter"]:
            m["power_tick_s"] = ph["power_period_s"]
            m["power_tick_jitter_s"] = p["jitter_s"]
            m["power_phase_s"] = ph["phase_s"]
        if win.get("power_noise") is not None:
            m["power_noise"] = win["power_noise"]
    lat = load(args.dir, "clock-latency")
    lg = lat and next((x for x in lat.get("gpus", []) if x.get("index") == args.gpu), None)
    if lg and lg.get("median_call_s") is not None:
        m["clock_lock_call_s"] = lg["median_call_s"]
    act = load(args.dir, "actuation-latency")
    ch = (act or {}).get("changes") or {}
    sm, pl = ch.get("sm_clock_lock") or {}, ch.get("power_limit") or {}
    for key, v in (("clock_lock_effect_s", ((sm.get("down") or {}).get("work_effect") or {}).get("median_s")),
                   ("power_limit_call_s", ((pl.get("down") or {}).get("call") or {}).get("median_s")),
                   ("power_limit_down_effect_s", ((pl.get("down") or {}).get("work_effect") or {}).get("median_s")),
                   ("power_limit_up_effect_s", ((pl.get("up") or {}).get("work_effect") or {}).get("median_s"))):
        if v is not None:
            m[key] = v
    m = {k: v for k, v in m.items() if v is not None}
    out = os.path.join(args.dir, "hardware-model.json")
    tmp = out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(m, f, indent=2, allow_nan=False)
        f.write("\n")
    os.replace(tmp, out)
    every = ["name", "tick_s", "tick_jitter_s", "power_tick_s", "power_tick_jitter_s", "power_phase_s",
             "power_at_ticks", "power_noise", "energy_read_s", "power_read_s", "average_power_read_s", "clock_read_s",
             "power_limit_read_s", "clock_lock_call_s", "clock_lock_effect_s", "power_limit_call_s",
             "power_limit_down_effect_s", "power_limit_up_effect_s", "min_power_limit_w", "max_power_limit_w",
             "default_power_limit_w", "min_clock_mhz", "max_clock_mhz", "clock_step_mhz", "mem_clock_mhz",
             "idle_power_w"]
    missing = [k for k in every if k not in m]
    json.dump(m, sys.stdout, indent=2)
    sys.stdout.write("\n")
    print(f"gpu_check_model: {out}: {len(m)} keys" + (f"; not measured: {', '.join(missing)}" if missing else ""),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
