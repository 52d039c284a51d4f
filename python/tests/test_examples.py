"""examples/python/ run on simulated GPUs and say what they measured and chose."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import zeusc_testutil as tu

EXAMPLES = os.path.join(tu.REPO, "examples", "python")


def run_example(name, *args, env=None):
    e = dict(os.environ, PYTHONPATH=tu.PYDIR, ZEUS_GPU_BACKEND="sim", ZEUS_SIM_GPUS="2")
    e.update(env or {})
    return subprocess.run([sys.executable, os.path.join(EXAMPLES, name), *args], env=e, capture_output=True,
                          text=True, timeout=300)


def test_measure_block():
    p = run_example("measure_block.py")
    assert p.returncode == 0, p.stderr
    assert "measuring GPUs [0, 1] on the 'sim' backend" in p.stdout
    epochs = re.findall(r"epoch \d: ([\d.]+) s, ([\d.]+) J", p.stdout)
    total = re.search(r"training: ([\d.]+) s, ([\d.]+) J", p.stdout)
    assert len(epochs) == 2 and total
    # the outer window is the sum of the two epochs it contains
    assert float(total.group(2)) == pytest.approx(sum(float(e) for _, e in epochs), rel=1e-6)


def test_plo_loop_profiles_then_reloads(plo_lib, tmp_path):
    prof = str(tmp_path / "profile.json")
    p = run_example("plo_loop.py", prof)
    assert p.returncode == 0, p.stderr
    assert "power limits to profile (W): [300, 275, 250, 225, 200, 175, 150, 125, 100]" in p.stdout
    rows = re.findall(r"^\s*(\d+) W\s+([\d.]+)\s+([\d.]+)$", p.stdout, re.M)
    assert [int(r[0]) for r in rows] == [300, 275, 250, 225, 200, 175, 150, 125, 100]
    best = re.search(r"optimal power limit: (\d+) W", p.stdout)
    meas = [(int(w), float(e), float(t)) for w, t, e in rows]
    want = tu.optimum_candidates(meas, "zeus_cost", eta=0.5, world_size=2, rel=1e-3)
    assert best and int(best.group(1)) in want
    assert os.path.exists(prof)
    again = run_example("plo_loop.py", prof)
    assert again.returncode == 0, again.stderr
    assert "epoch 0: state DONE" in again.stdout
    assert f"optimal power limit: {best.group(1)} W" in again.stdout


def test_hf_callback_with_the_stand_in_trainer(plo_lib):
    p = run_example("hf_callback.py")
    assert p.returncode == 0, p.stderr
    if "transformers is installed" in p.stdout:
        pytest.skip("transformers is installed: the example only shows the call")
    assert "using zeusc's stand-in Trainer" in p.stdout
    assert "state DONE; measured limits (W): [300, 275, 250, 225, 200, 175, 150, 125, 100]" in p.stdout
    assert re.search(r"optimal power limit: \d+ W", p.stdout)
