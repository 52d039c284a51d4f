"""HFGlobalPowerLimitOptimizer: a transformers.TrainerCallback driving the power-limit optimizer.

tests/stand_in/transformers is a stand-in for transformers (TrainerCallback, TrainingArguments,
and a Trainer that calls the callback events the way transformers' Trainer does). Each test runs
in a fresh interpreter, so that which transformers is importable is under the test's control.
"""
from __future__ import annotations

import json
import os
import textwrap


import zeusc_testutil as tu


def run_with_stand_in(code, **env):
    e = {"PYTHONPATH": os.pathsep.join([tu.STAND_IN, tu.PYDIR, tu.HERE])}
    e.update(env)
    import subprocess
    import sys
    full = dict(os.environ)
    full.update(e)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full, capture_output=True, text=True,
                          timeout=300)


def test_wiring_forwards_the_events_and_arguments():
    """Without the C optimizer: the callback builds a GlobalPowerLimitOptimizer with its arguments
    and forwards on_step_begin and on_epoch_end (and nothing else) from the Trainer."""
    p = run_with_stand_in("""
        import transformers
        assert transformers.IS_ZEUSC_STAND_IN
        from zeusc.optimizer import power_limit as pl
        log = []
        class Recorder:
            def __init__(self, **kw):
                log.append(("init", sorted(kw.items(), key=lambda x: x[0])))
            def on_step_begin(self): log.append("step_begin")
            def on_epoch_end(self): log.append("epoch_end")
            def on_step_end(self): log.append("UNEXPECTED step_end")
            def on_epoch_begin(self): log.append("UNEXPECTED epoch_begin")
        pl.GlobalPowerLimitOptimizer = Recorder
        cb = pl.HFGlobalPowerLimitOptimizer("MON", optimum_selector="SEL", wait_steps=3, warmup_steps=4,
                                            profile_steps=5, pl_step=6, profile_path="p.json", confidence=0.9,
                                            max_profile_steps=7)
        assert isinstance(cb, transformers.TrainerCallback)
        assert isinstance(cb, pl.HFGlobalPowerLimitOptimizer)
        assert type(cb).__name__ == "HFGlobalPowerLimitOptimizer"
        assert isinstance(cb.optimizer, Recorder)
        batches = []
        t = transformers.Trainer(model=batches.append, args=transformers.TrainingArguments(num_train_epochs=2),
                                 train_dataset=range(3), callbacks=[cb])
        t.train()
        print(repr(log))
        print(batches)
    """)
    assert p.returncode == 0, p.stderr
    log = eval(p.stdout.splitlines()[0])
    assert log[0] == ("init", [("confidence", 0.9), ("max_profile_steps", 7), ("monitor", "MON"),
                               ("optimum_selector", "SEL"), ("pl_step", 6),
                               ("profile_path", "p.json"), ("profile_steps", 5), ("wait_steps", 3),
                               ("warmup_steps", 4)])
    assert log[1:] == ["step_begin"] * 3 + ["epoch_end"] + ["step_begin"] * 3 + ["epoch_end"]
    assert p.stdout.splitlines()[1] == "[0, 1, 2, 0, 1, 2]"


def test_without_transformers_construction_raises_import_error():
    code = textwrap.dedent("""
        import sys
        sys.modules["transformers"] = None   # not installed
        from zeusc.optimizer.power_limit import HFGlobalPowerLimitOptimizer   # importing is fine
        try:
            HFGlobalPowerLimitOptimizer(None)
        except ImportError as e:
            print("ImportError:", e)
    """)
    p = tu.run_py(code)
    assert p.returncode == 0, p.stderr
    assert "ImportError: The transformers package is not installed" in p.stdout


def test_trainer_runs_the_real_optimizer_to_its_optimum(plo_lib, fake, tmp_path, plo_profiles):
    # a multi-GPU profile whose optimum is below the maximum, so that the exit's restore shows
    profs = [tu.Profile(f) for f in plo_profiles]
    profs.sort(key=lambda x: (-x.ngpus, x.name))
    prof = next((x for x in profs if tu.optimum_candidates(x.measurements(), "zeus_cost", eta=0.5,
                                                           world_size=x.ngpus) != {x.limits[0]}), profs[0])
    log = str(tmp_path / "nvml.log")
    steps_per_epoch, epochs, K, P = 70, 12, 3, 40
    p = run_with_stand_in(f"""
        import json
        import transformers
        import zeusc_testutil as tu
        from zeusc.monitor import ZeusMonitor
        from zeusc.optimizer.power_limit import HFGlobalPowerLimitOptimizer, ZeusCost
        fake = tu.FakeNvml(tu.fake_nvml_path())
        dev = fake.devices(all_devices=True)
        n = dev.gpu_count()
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        cb = HFGlobalPowerLimitOptimizer(mon, ZeusCost(0.5, n), warmup_steps={K}, profile_steps={P})
        trainer = transformers.Trainer(model=lambda batch: fake.work_all(n, 1.0),
                                       args=transformers.TrainingArguments(num_train_epochs={epochs}),
                                       train_dataset=range({steps_per_epoch}), callbacks=[cb])
        trainer.train()
        opt = cb.optimizer
        print(json.dumps({{"state": opt.state.name, "optimal": opt.optimal_power_limit,
                          "limits": [dev.get_power_limit(g) for g in range(n)],
                          "measured": [m.power_limit for m in opt.measurements]}}))
    """, ZEUS_SIM_MODEL_FILE=prof.path, ZEUS_SIM_UNITS_PER_ROW=str(P), FAKE_NVML_LOG=log,
        ZEUSC_TEST_FAKE_NVML=fake.path)
    assert p.returncode == 0, p.stdout + p.stderr
    got = json.loads(p.stdout.splitlines()[-1])
    optimum = tu.optimum_candidates(prof.measurements(), "zeus_cost", eta=0.5, world_size=prof.ngpus).pop()
    events = (["s"] * steps_per_epoch + ["e"]) * epochs
    model = tu.expected_run(events, prof.limits, prof.limits[0], 1, K, P, optimum)
    assert got["state"] == "DONE"
    assert got["optimal"] == optimum * 1000
    assert got["limits"] == [optimum * 1000] * prof.ngpus
    assert got["measured"] == prof.limits
    calls = tu.read_setter_log(log)
    # at exit the GPUs get their limits back (a call only where the optimum differs)
    restore = [prof.limits[0]] if optimum != prof.limits[0] else []
    want = [(g, w * 1000) for w in model.calls + restore for g in range(prof.ngpus)]
    assert calls == want
    assert any(c > 1 for c in model.attempts.values()), "the epochs should have interrupted some windows"
