"""zeusc.metric (the original's zeus.metric) without a Pushgateway: what a push would send, the
push URL, argument checks, and failed pushes that keep the values. Pushing to a real Pushgateway
is tests/e2e/pushgateway.sh. Windows that must last real time run in a fresh interpreter whose
simulated GPUs follow the wall clock (the session's default GPUs are on a virtual clock)."""
from __future__ import annotations

import json

import pytest

import zeusc_testutil as tu
from zeusc import _lib

DEAD = "http://127.0.0.1:1"  # nothing listens there: pushes fail at once

pytestmark = pytest.mark.skipif(not _lib.has("zeus_metric_open"), reason=_lib.METRIC_MISSING)

WALL = {"ZEUS_GPU_BACKEND": "sim", "ZEUS_SIM_CLOCK": "wall", "ZEUS_SIM_GPUS": "2",
        "ZEUS_RAPL_ROOT": "/nonexistent-rapl-root"}


def _run(code: str) -> dict:
    p = tu.run_py("import json, time, warnings\nimport zeusc.metric as zm\nfrom zeusc import exceptions as ex\n"
                  + code, env=WALL, timeout=120)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def _value(text: str, prefix: str) -> float:
    for line in text.splitlines():
        if line.startswith(prefix + " "):
            return float(line.split()[-1])
    raise AssertionError(f"no series {prefix} in:\n{text}")


def test_histogram_records_the_window_even_when_the_push_fails():
    out = _run("""
h = zm.EnergyHistogram([], None, "http://127.0.0.1:1", "job1", gpu_bucket_range=[1, 5, 1000])
h.begin_window("step")
time.sleep(0.3)
try:
    h.end_window("step")
    err = None
except ex.ZeusConnectionError as e:
    err = str(e)
try:
    h.end_window("step")
    again = None
except ValueError as e:
    again = str(e)
print(json.dumps({"err": err, "again": again, "text": h.text(), "gpus": h.gpu_indices}))
h.close()
""")
    assert "Pushgateway http://127.0.0.1:1" in out["err"]
    assert "No active EnergyHistogram window found for 'step'" in out["again"]
    assert out["gpus"] == [0, 1]
    t = out["text"]
    for g in (0, 1):
        # The simulated GPU idles at 30 W: about 9 J in 0.3 s (more on a loaded machine).
        e = _value(t, f'energy_monitor_gpu_energy_joules_sum{{window="step",index="{g}"}}')
        assert 0.28 * 30 <= e <= 5 * 30, e
        assert _value(t, f'energy_monitor_gpu_energy_joules_count{{window="step",index="{g}"}}') == 1
        assert _value(t, f'energy_monitor_gpu_energy_joules_bucket{{window="step",index="{g}",le="5"}}') == 0
        assert _value(t, f'energy_monitor_gpu_energy_joules_bucket{{window="step",index="{g}",le="1000"}}') == 1
    d = _value(t, 'energy_monitor_window_duration_seconds_sum{window="step"}')
    assert 0.28 <= d <= 5, d


def test_counter_and_gauge_update_while_the_window_is_open():
    out = _run("""
c = zm.EnergyCumulativeCounter([], [1], 0.05, "127.0.0.1:1", "job1")
g = zm.PowerGauge([0], 0.05, "127.0.0.1:1", "job1")
c.begin_window("train")
g.begin_window("train")
time.sleep(0.3)
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    c.end_window("train")
g.end_window("train")
print(json.dumps({"warn": [str(x.message) for x in w], "c": c.text(), "g": g.text()}))
c.close(); g.close()
""")
    assert any("pushing window 'train' failed" in m for m in out["warn"]), out["warn"]
    e = _value(out["c"], 'energy_monitor_gpu_energy_joules_total{window="train",index="1"}')
    assert 0.25 * 30 <= e <= 5 * 30, e
    assert "index=\"0\"" not in out["c"]
    assert "# TYPE energy_monitor_gpu_energy_joules_total counter" in out["c"]
    assert _value(out["g"], 'power_monitor_gpu_power_watts{window="train",index="0"}') == 30.0
    assert "# TYPE power_monitor_gpu_power_watts gauge" in out["g"]


def test_push_url_job_and_grouping_key():
    from zeusc.metric import PowerGauge
    with PowerGauge(None, 1, "127.0.0.1:9091", "my job", grouping_key={"instance": "n1", "path": "a/b"}) as g:
        assert g.push_url() == "http://127.0.0.1:9091/metrics/job@base64/bXkgam9i/instance/n1/path@base64/YS9i"
        assert g.text() == ""  # no window yet
        with pytest.raises(ValueError, match="already exists"):
            g.begin_window("w")
            g.begin_window("w")
        g.end_window("w")


def test_bad_arguments_are_value_errors():
    from zeusc.metric import EnergyCumulativeCounter, EnergyHistogram
    with pytest.raises(ValueError, match="GPU bucket range cannot be empty"):
        EnergyHistogram([], None, DEAD, "j", gpu_bucket_range=[])
    with pytest.raises(ValueError, match="DRAM bucket range cannot be empty"):
        EnergyHistogram([], None, DEAD, "j", dram_bucket_range=[])
    with pytest.raises(ValueError, match="strictly increasing"):
        EnergyHistogram([], None, DEAD, "j", cpu_bucket_range=[10, 5])
    with pytest.raises(ValueError, match="job"):
        EnergyHistogram([], None, DEAD, "")
    with pytest.raises(ValueError, match="reserved"):
        EnergyHistogram([], None, DEAD, "j", grouping_key={"window": "x"})
    with pytest.raises(ValueError, match="update period"):
        EnergyCumulativeCounter([], None, 0.001, DEAD, "j")
    with pytest.raises(ValueError, match="does not exist|not exist|GPU 9"):
        EnergyHistogram([], [9], DEAD, "j")
    h = EnergyHistogram([], None, DEAD, "j")
    with pytest.raises(ValueError, match="No active EnergyHistogram window found for 'nope'"):
        h.end_window("nope")
    with pytest.raises(ValueError, match="window name"):
        h.begin_window("")
    h.close()
    h.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        h.begin_window("x")
