"""Shared fixtures of the zeusc test suite.

Run by `make check` (CTest entry python.pytest) as `/usr/bin/python3 -m pytest python/tests` with:
  ZEUSC_LIBRARY         the freshly built libzeus.so
  ZEUSC_TEST_FAKE_NVML  the fake libnvidia-ml.so.1 built from the simulated GPU
  ZEUS_DATA_DIR         (optional) the measured data folder, default ../shared/data
Run by hand from a checkout, the defaults are build/libzeus.so and build/fake_nvml/.

No test touches a real GPU: the process's default device set is forced to simulated GPUs, and
the NVML tests load the fake library explicitly.
"""
from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYDIR)

if PYDIR not in sys.path:
    sys.path.insert(0, PYDIR)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# Before zeusc loads anything: any default device set is simulated, every GPU visible.
os.environ["ZEUS_GPU_BACKEND"] = "sim"
os.environ.pop("CUDA_VISIBLE_DEVICES", None)
for _k in [k for k in os.environ if k.startswith(("ZEUS_SIM_", "FAKE_NVML_"))]:
    del os.environ[_k]

import zeusc_testutil as tu  # noqa: E402


@pytest.fixture(scope="session")
def lib():
    from zeusc import _lib
    return _lib.lib()


@pytest.fixture
def plo_lib(lib):
    """The library, or a skip when it lacks the power-limit optimizer."""
    if not hasattr(lib, "zeus_plo_open"):
        pytest.skip(tu.PLO_MISSING)
    return lib


@pytest.fixture
def fake(monkeypatch):
    """The fake NVML (skips when it was not built); its settings are cleared for the test."""
    path = tu.fake_nvml_path()
    if not path:
        pytest.skip("the fake NVML (build/fake_nvml/libnvidia-ml.so.1) is not built; set ZEUSC_TEST_FAKE_NVML")
    for k in [k for k in os.environ if k.startswith(("ZEUS_SIM_", "FAKE_NVML_"))]:
        monkeypatch.delenv(k)
    return tu.FakeNvml(path)


@pytest.fixture
def sim_env(monkeypatch):
    """Sets ZEUS_SIM_* settings for simulated GPUs opened during the test (and clears others)."""
    for k in [k for k in os.environ if k.startswith("ZEUS_SIM_")]:
        monkeypatch.delenv(k)

    def set_(**kw):
        for k, v in kw.items():
            monkeypatch.setenv("ZEUS_SIM_" + k.upper(), str(v))
    return set_


@pytest.fixture
def data_dir():
    d = tu.data_dir()
    if not d:
        pytest.skip("the measured data folder ../shared/data is absent (set ZEUS_DATA_DIR to its path)")
    return d


@pytest.fixture
def plo_profiles(data_dir):
    files = tu.plo_profile_files(data_dir)
    if not files:
        pytest.skip(f"no power-limit profiles in {data_dir}/plo-profiles")
    return files
