"""zeusc.run: the training side of `zeus run` (the original's ZeusDataLoader) over zeus_job.

In-process runs on the simulated GPU (the process's default device set, virtual clock): the power
profile written in the first epoch and loaded by the next run, the result file, the cost
threshold raising ZeusCostThresholdExceededError, loops that leave a phase early. Then the
example trainee (examples/python/train_zeus_run.py) driven by the real `zeus run`.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

import zeusc_testutil as tu
from zeusc.device import Devices
from zeusc.run import ZeusCostThresholdExceededError, ZeusDataLoader, ZeusJob


@pytest.fixture
def zeus_env(monkeypatch, tmp_path):
    for k in [k for k in os.environ if k.startswith("ZEUS_") and k not in ("ZEUS_GPU_BACKEND", "ZEUS_LOG_LEVEL")]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("ZEUS_TARGET_METRIC", "0.9")
    monkeypatch.setenv("ZEUS_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setenv("ZEUS_JOB_ID", "t")
    monkeypatch.setenv("ZEUS_PROFILE_PARAMS", "2,4")
    return tmp_path / "logs"


def run(bs, epochs, accuracy, samples=400, eval_samples=50, work=1.0, stop_after=None):
    """One training run; returns (epochs seen, the train loader's final info, the eval lengths)."""
    node = Devices.default().sim_node()
    train = ZeusDataLoader(list(range(samples)), batch_size=bs, max_epochs=epochs)
    ev = ZeusDataLoader(list(range(eval_samples)), batch_size=10)
    seen = []
    try:
        for epoch in train.epochs():
            seen.append(epoch)
            for i, batch in enumerate(train):
                assert len(batch) <= bs
                node.work(0, work)
                if stop_after is not None and i + 1 == stop_after:
                    break  # a loop that leaves the epoch early
            for batch in ev:
                node.work(0, 0.5)
            train.report_metric(accuracy(epoch), higher_is_better=True)
        return seen, train.job.info()
    finally:
        train.close()


def test_first_epoch_profiles_and_later_runs_load_the_profile(zeus_env):
    seen, info = run(20, 10, lambda e: 0.5 + 0.1 * e)  # reaches 0.9 in epoch 4 (index 4)
    assert seen == [0, 1, 2, 3, 4]
    assert info["reached"] and info["finished"] and info["epochs"] == 5
    assert info["optimal_power_limit_w"] in range(100, 301, 25)
    power = json.loads((zeus_env / "bs20.power.json").read_text())
    assert sorted(power) == ["eval_power", "eval_throughput", "job_id", "optimal_pl", "train_power",
                             "train_throughput"]
    assert len(power["train_power"]) == 9 and power["optimal_pl"] == info["optimal_power_limit_w"] * 1000
    result = json.loads((zeus_env / "t+bs20.train.json").read_text())
    assert result["reached"] is True and result["num_epochs"] == 5
    assert result["energy"] == pytest.approx(info["energy_j"]) and result["time"] == pytest.approx(info["time_s"])
    # the same batch size again: the profile is loaded, nothing is profiled
    seen, info2 = run(20, 10, lambda e: 0.95)
    assert seen == [0] and not info2["profiling"]
    assert info2["optimal_power_limit_w"] == info["optimal_power_limit_w"]
    # the GPU got its limit back
    assert Devices.default().get_power_limit(0) == 300000


def test_cost_threshold_raises_the_originals_exception(zeus_env, monkeypatch):
    run(20, 3, lambda e: 0.0)  # a profile for batch size 20
    _, info = run(20, 2, lambda e: 0.0)
    per_epoch = info["cost"] / 2
    monkeypatch.setenv("ZEUS_COST_THRESH", repr(2.5 * per_epoch))
    monkeypatch.setenv("ZEUS_JOB_ID", "bounded")
    with pytest.raises(ZeusCostThresholdExceededError) as ei:
        run(20, 10, lambda e: 0.0)
    e = ei.value
    assert e.cost == pytest.approx(2 * per_epoch, rel=1e-3)
    assert e.next_cost == pytest.approx(3 * per_epoch, rel=1e-2) and e.next_cost >= e.cost_thresh
    assert "exceeds cost threshold" in str(e)
    result = json.loads((zeus_env / "bounded+bs20.train.json").read_text())
    assert result["reached"] is False and result["num_epochs"] == 2


def test_a_loop_that_leaves_the_epoch_early_goes_on(zeus_env):
    # 20 steps per epoch but only 14 taken: enough for the scaled profiling windows
    seen, info = run(20, 3, lambda e: 0.5, stop_after=14)
    assert seen == [0, 1, 2] and info["epochs"] == 3 and not info["reached"]


def test_a_second_train_loader_is_refused_while_one_runs(zeus_env):
    train = ZeusDataLoader(list(range(100)), batch_size=10, max_epochs=2)
    it = train.epochs()
    next(it)
    try:
        with pytest.raises(ValueError, match="max_epochs only to the train dataloader"):
            ZeusDataLoader(list(range(100)), batch_size=10, max_epochs=2)
        with pytest.raises(RuntimeError, match="train dataloader"):
            list(ZeusDataLoader(list(range(10)), batch_size=5).epochs())
        with pytest.raises(ValueError, match="distributed"):
            ZeusDataLoader(list(range(10)), batch_size=5, distributed="ddp")
    finally:
        train.close()


def test_plain_loader_batches(zeus_env):
    ev = ZeusDataLoader(list(range(7)), batch_size=3)
    assert len(ev) == 3 and [b for b in ev] == [[0, 1, 2], [3, 4, 5], [6]]
    assert isinstance(ev, ZeusDataLoader)
    ev2 = ZeusDataLoader(list(range(7)), batch_size=3, drop_last=True, collate_fn=sum)
    assert len(ev2) == 2 and list(ev2) == [3, 12]
    with pytest.raises(ValueError, match="batch_size"):
        ZeusDataLoader(list(range(7)), batch_size=0)


def test_zeus_job_hooks_and_bad_settings(zeus_env, monkeypatch):
    monkeypatch.delenv("ZEUS_TARGET_METRIC")
    with pytest.raises(ValueError, match="ZEUS_TARGET_METRIC"):
        ZeusJob(batch_size=8, max_epochs=1, steps_per_epoch=10)
    monkeypatch.setenv("ZEUS_TARGET_METRIC", "0.5")
    monkeypatch.setenv("ZEUS_ETA_KNOB", "2")
    with pytest.raises(ValueError, match="ZEUS_ETA_KNOB"):
        ZeusJob(batch_size=8, max_epochs=1, steps_per_epoch=10)
    monkeypatch.delenv("ZEUS_ETA_KNOB")
    with ZeusJob(batch_size=8, max_epochs=1, steps_per_epoch=12) as job:
        assert job.next_epoch() == 0
        with pytest.raises(RuntimeError, match="train_step_end"):
            job.train_step_end()
        job.train_begin()
        node = Devices.default().sim_node()
        for _ in range(12):
            job.train_step_begin()
            node.work(0, 1.0)
            job.train_step_end()
        job.train_end()
        job.report_metric(0.7, True)
        assert job.next_epoch() is None
        assert job.info()["reached"]


def test_zeus_run_drives_the_example_trainee(tmp_path):
    cli = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    if not os.path.exists(cli):
        pytest.skip("the zeus CLI is not built (set ZEUSC_TEST_ZEUS_CLI)")
    probe = subprocess.run([cli, "run", "--help"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 and "not part of this build" in probe.stderr:
        pytest.skip(f"this zeus has no 'run' (a build without ZEUS_WITH_RUN): {probe.stderr.strip()}")
    env = dict(os.environ)
    env.update({"ZEUS_GPU_BACKEND": "sim", "PYTHONPATH": os.pathsep.join([tu.PYDIR] + sys.path[:0]),
                "ZEUS_LOG_LEVEL": "warn"})
    env.pop("ZEUS_SIM_CLOCK", None)
    script = os.path.join(tu.REPO, "examples", "python", "train_zeus_run.py")
    p = subprocess.run([cli, "run", "--batch-sizes", "32,64,128,256", "--default-bs", "128", "--target-metric", "0.8",
                        "--max-epochs", "40", "--lr", "0.2", "--optimizer", "adam", "--recurrences", "2",
                        "--log-base", str(tmp_path), "--",
                        sys.executable, script, "--bs", "{bs}", "--lr", "{lr}", "--seed", "{seed}",
                        "--epochs", "{epochs}"], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.count("train_zeus_run: reached the target") == 2, p.stdout[-3000:]
    assert "simulated GPU" in p.stdout
    (folder,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    with sqlite3.connect(folder / "state.sqlite") as db:
        rows = db.execute("SELECT batch_size, reached, energy_j, time_s FROM history ORDER BY recurrence").fetchall()
    assert [r[0] for r in rows] == [128, 64] and all(r[1] for r in rows)
    assert all(r[2] > 0 and r[3] > 0 for r in rows)
    profiles = sorted(f.name for f in folder.iterdir() if f.name.endswith(".power.json"))
    assert profiles == ["bs128.power.json", "bs64.power.json"]
