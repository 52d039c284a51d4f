"""Helpers for the zeusc tests: paths, the fake NVML's controls, the measured profiles, and an
independent model of the power-limit optimizer's state machine (written from zeus/plo.h and the
issue's text, not from the C code) that predicts the power-limit calls a run must make."""
from __future__ import annotations

import csv
import ctypes
import glob
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYDIR)
STAND_IN = os.path.join(HERE, "stand_in")

PLO_MISSING = "C power-limit optimizer not in this libzeus"

# ---- paths ---------------------------------------------------------------------------------------


def fake_nvml_path():
    p = os.environ.get("ZEUSC_TEST_FAKE_NVML") or os.path.join(REPO, "build", "fake_nvml", "libnvidia-ml.so.1")
    return p if os.path.exists(p) else None


def data_dir():
    d = os.environ.get("ZEUS_DATA_DIR") or os.path.join(os.path.dirname(REPO), "shared", "data")
    if not os.path.isdir(d):
        d = os.environ.get("ZEUSC_TEST_DATA_DIR_DEFAULT") or ""
    return d if d and os.path.isdir(d) else None


def plo_profile_files(d):
    return sorted(glob.glob(os.path.join(d, "plo-profiles", "*.csv")))


def run_py(code: str, env=None, timeout=120, cwd=None):
    """Runs `code` in a fresh interpreter (the one running the tests) that imports zeusc from the
    source tree; returns the CompletedProcess."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([PYDIR, HERE] + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else []))
    if env:
        for k, v in env.items():
            if v is None:
                e.pop(k, None)
            else:
                e[k] = v
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


# ---- the fake NVML -------------------------------------------------------------------------------


class FakeNvml:
    """The fake libnvidia-ml.so.1's test helpers. The library is loaded from the same path that
    Devices(backend="nvml", nvml_library=path) dlopens, so both reach the same simulated node."""

    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.fakeNvmlRunWork.argtypes = [ctypes.c_uint, ctypes.c_double]
        L.fakeNvmlRunWork.restype = ctypes.c_int
        L.fakeNvmlIdle.argtypes = [ctypes.c_double]
        L.fakeNvmlIdle.restype = ctypes.c_int
        L.fakeNvmlTrueEnergy.argtypes = [ctypes.c_uint]
        L.fakeNvmlTrueEnergy.restype = ctypes.c_double
        L.zeusSimClockNow.argtypes = []
        L.zeusSimClockNow.restype = ctypes.c_double
        self.has_work_all = hasattr(L, "fakeNvmlRunWorkAll")
        if self.has_work_all:
            L.fakeNvmlRunWorkAll.argtypes = [ctypes.POINTER(ctypes.c_double)]
            L.fakeNvmlRunWorkAll.restype = ctypes.c_int
        self._units = {}

    def devices(self, **kw):
        from zeusc.device import Devices
        return Devices(backend="nvml", nvml_library=self.path, **kw)

    def work(self, gpu, units):
        rc = self.lib.fakeNvmlRunWork(gpu, units)
        assert rc == 0, f"fakeNvmlRunWork -> {rc}"

    def work_all(self, ngpus, units):
        """`units` of work on every GPU at once (data-parallel steps: no GPU idles)."""
        if not self.has_work_all:
            import pytest
            pytest.skip("this fake NVML has no fakeNvmlRunWorkAll")
        arr = self._units.get((ngpus, units))
        if arr is None:
            arr = self._units[(ngpus, units)] = (ctypes.c_double * ngpus)(*([units] * ngpus))
        rc = self.lib.fakeNvmlRunWorkAll(arr)
        assert rc == 0, f"fakeNvmlRunWorkAll -> {rc}"

    def idle(self, s):
        assert self.lib.fakeNvmlIdle(s) == 0

    def true_energy(self, gpu):
        return self.lib.fakeNvmlTrueEnergy(gpu)

    def now(self):
        return self.lib.zeusSimClockNow()


def nvml_writes(limits, initial):
    """The writes NVML sees for a sequence of limits set on a GPU that holds `initial`: the NVML
    backend, as the original's, writes nothing when the GPU already holds the limit asked."""
    out = []
    cur = initial
    for w in limits:
        if w != cur:
            out.append(w)
            cur = w
    return out


def read_setter_log(path, func="nvmlDeviceSetPowerManagementLimit"):
    """[(gpu, value)] of the successful calls of `func` in a FAKE_NVML_LOG file."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] != func:
                continue
            # <func> <gpu> <args...> -> <rc>
            assert parts[-2] == "->", line
            if parts[-1] != "0":
                continue
            out.append((int(parts[1]), int(parts[2])))
    return out


# ---- measured profiles ---------------------------------------------------------------------------


class Profile:
    """One plo-profiles CSV: rows (limit W, energy J summed over GPUs, per-GPU energies, time s)."""

    def __init__(self, path):
        self.path = path
        self.name = os.path.basename(path)
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        cols = [c for c in rows[0] if c.startswith("gpu") and c.endswith("_energy")]
        self.ngpus = len(cols)
        self.rows = []
        for r in rows:
            w = int(r["window_name"].rsplit("_", 1)[1])
            per = [float(r[c]) for c in cols]
            self.rows.append((w, sum(per), per, float(r["elapsed_time"])))
        self.rows.sort(key=lambda x: -x[0])
        self.limits = [r[0] for r in self.rows]

    def measurements(self):
        return [(w, e, t) for (w, e, _per, t) in self.rows]


def optimum_candidates(meas, kind, eta=None, world_size=1, factor=None, rel=1e-7):
    """The limits (W) a selector may choose for measurements [(W, J, s)]: the best one, plus any
    within `rel` of it (a near-tie that the measurement's 1 mJ counter could flip). Written from
    the issue's definitions: Energy = least energy, Time = least time, ZeusCost = least
    eta*E + (1-eta)*max_power*T with max_power = largest limit x world_size, MaxSlowdownConstraint
    = the lowest limit whose time <= factor x the time at the largest limit. Near-ties are all
    returned (a test asserting one optimum checks there is exactly one)."""
    if kind == "energy":
        score = {w: e for w, e, t in meas}
    elif kind == "time":
        score = {w: t for w, e, t in meas}
    elif kind == "zeus_cost":
        max_power = max(w for w, _, _ in meas) * world_size
        score = {w: eta * e + (1 - eta) * max_power * t for w, e, t in meas}
    elif kind == "max_slowdown":
        wmax = max(w for w, _, _ in meas)
        tmax = [t for w, e, t in meas if w == wmax][0]
        bound = factor * tmax
        sure = [w for w, e, t in meas if t <= bound * (1 - rel)]
        maybe = [w for w, e, t in meas if t <= bound * (1 + rel)]
        best = min(sure) if sure else wmax
        return {w for w in maybe if w <= best} | {best}
    else:
        raise ValueError(kind)
    best = min(score.values())
    return {w for w, s in score.items() if s <= best + abs(best) * rel}


# ---- the optimizer's state machine, as specified ----------------------------------------------------


class PloModel:
    """Predicts a run of the power-limit optimizer from its specification.

    zeus/plo.h and issue 3: limits from the maximum down, READY -> WARMUP after wait_steps + 1
    step begins (the limit is set when WARMUP starts); WARMUP -> PROFILING after warmup_steps
    more (0: profiling starts at the same step begin); PROFILING ends after profile_steps with a
    measurement, then WARMUP at the next limit (set at that step begin) or DONE with the optimum
    applied. An epoch ending in WARMUP or PROFILING cancels, puts the maximum back, and retries the
    same limit after the next step begin. The maximum is set on every GPU at construction whatever
    the GPUs hold (the original's current limit starts unknown), but NVML is asked to write it only
    when the GPUs hold another limit (the NVML backend, as the original's, skips a setting equal to
    the current one); after that the device is called only when the limit changes.
    """

    def __init__(self, limits_w, initial_w, wait, warmup, profile, optimum):
        self.limits = list(limits_w)
        self.max = self.limits[0]
        self.cur = initial_w
        self.calls = []
        self.warmup = warmup
        self.profile = profile
        self.optimum = optimum  # the limit DONE applies (W)
        self.state = "ready"
        self.idx = 0
        self.left = wait + 1
        self.measured = []       # limits whose window completed, in order
        self.attempts = {}       # limit -> number of times its window began
        self._set(self.max)

    def _set(self, w):
        if w != self.cur:
            self.calls.append(w)
            self.cur = w

    def _enter(self):
        self._set(self.limits[self.idx])
        if self.warmup == 0:
            self._profile()
        else:
            self.state, self.left = "warmup", self.warmup

    def _profile(self):
        self.state, self.left = "profiling", self.profile
        lim = self.limits[self.idx]
        self.attempts[lim] = self.attempts.get(lim, 0) + 1

    def step_begin(self):
        if self.state == "done":
            return
        self.left -= 1
        if self.left > 0:
            return
        if self.state == "ready":
            self._enter()
        elif self.state == "warmup":
            self._profile()
        elif self.state == "profiling":
            self.measured.append(self.limits[self.idx])
            if self.idx == len(self.limits) - 1:
                self.state = "done"
                self._set(self.optimum)
            else:
                self.idx += 1
                self._enter()

    def epoch_end(self):
        if self.state in ("warmup", "profiling"):
            self.state, self.left = "ready", 1
            self._set(self.max)


PATTERNS = ("never", "warmup", "profiling", "last")


def make_events(pattern, limits, wait, warmup, profile):
    """The hook sequence of one replay: "s" (a step: begin, work, end) and "e" (an epoch end).

    never:     one epoch long enough to profile every limit, then a few more steps.
    warmup:    an epoch ends in the middle of the warm-up of the first, a middle and the last limit.
    profiling: an epoch ends in the middle of the profiling of the first, a middle and the last limit.
    last:      an epoch ends on the last profiling step of every limit (once each; the retry
               completes).
    The model only decides where the epoch ends fall; the expected calls come from running the
    model on the same events."""
    m = PloModel(limits, limits[0], wait, warmup, profile, optimum=limits[-1])
    events = []
    hit = set()
    targets = {0, len(limits) // 2, len(limits) - 1}
    guard = 0
    while m.state != "done":
        guard += 1
        assert guard < 100000, "the model never finished"
        events.append("s")
        m.step_begin()
        lim = m.idx
        if pattern == "warmup" and m.state == "warmup" and warmup >= 2 and m.left == (warmup + 1) // 2 \
                and lim in targets and ("w", lim) not in hit:
            hit.add(("w", lim))
            events.append("e")
            m.epoch_end()
        elif pattern == "profiling" and m.state == "profiling" and profile >= 2 and m.left == (profile + 1) // 2 \
                and lim in targets and ("p", lim) not in hit:
            hit.add(("p", lim))
            events.append("e")
            m.epoch_end()
        elif pattern == "last" and m.state == "profiling" and m.left == 1 and ("l", lim) not in hit:
            hit.add(("l", lim))
            events.append("e")
            m.epoch_end()
    events += ["s"] * 3 + ["e"] + ["s"] * 2 + ["e"]
    if pattern == "warmup" and warmup >= 2:
        assert len(hit) == len(targets)
    if pattern in ("profiling", "last"):
        assert len(hit) == (len(targets) if pattern == "profiling" else len(limits))
    return events


def expected_run(events, limits, initial_w, wait, warmup, profile, optimum):
    """Runs the model over `events`; .calls is the expected limit changes (W) in order, .trace
    the (state, limit in W) after every event."""
    m = PloModel(limits, initial_w, wait, warmup, profile, optimum)
    m.trace = []
    for ev in events:
        if ev == "s":
            m.step_begin()
        else:
            m.epoch_end()
        m.trace.append((m.state, m.cur))
    assert m.state == "done"
    return m
