"""Loading libzeus: where it is found, what importing costs, logging."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import zeusc
import zeusc_testutil as tu
from zeusc import _lib


def _built_library():
    p = _lib.library_path()
    assert os.path.isabs(p) and os.path.exists(p)
    return p


def test_version_matches_the_header():
    hdr = open(os.path.join(tu.REPO, "include", "zeus", "version.h")).read()
    parts = [re.search(rf"#define ZEUS_VERSION_{k} (\d+)", hdr).group(1) for k in ("MAJOR", "MINOR", "PATCH")]
    assert zeusc.library_version() == ".".join(parts)
    assert zeusc.__version__ == ".".join(parts)


def test_importing_loads_nothing_and_no_framework():
    code = textwrap.dedent("""
        import sys
        import zeusc, zeusc.monitor, zeusc.device, zeusc.optimizer.power_limit, zeusc.utils.metric
        import zeusc.utils.framework, zeusc.callback, zeusc.exceptions
        from zeusc.optimizer.power_limit import HFGlobalPowerLimitOptimizer
        from zeusc import _lib
        print("loaded:", _lib._lib is not None)
        print("frameworks:", sorted(k for k in ("torch", "jax", "cupy", "transformers", "numpy") if k in sys.modules))
    """)
    p = tu.run_py(code)
    assert p.returncode == 0, p.stderr
    assert "loaded: False" in p.stdout and "frameworks: []" in p.stdout


def test_zeusc_library_must_exist_when_set():
    p = tu.run_py("import zeusc; zeusc.library_path()", env={"ZEUSC_LIBRARY": "/no/such/libzeus.so"})
    assert p.returncode != 0
    assert "ImportError" in p.stderr and "ZEUSC_LIBRARY='/no/such/libzeus.so' does not exist" in p.stderr


def test_zeusc_library_that_is_not_libzeus_is_refused(tmp_path):
    # a real shared library without libzeus's symbols
    p = tu.run_py("import zeusc; zeusc.library_path()", env={"ZEUSC_LIBRARY": tu.fake_nvml_path() or "libm.so.6"})
    assert p.returncode != 0 and "lacks zeus_version" in p.stderr


def test_library_next_to_the_package_is_found_first(tmp_path):
    pkg = tmp_path / "site" / "zeusc"
    shutil.copytree(os.path.join(tu.PYDIR, "zeusc"), pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    shutil.copy(_built_library(), pkg / "libzeus.so")
    code = "import zeusc; print(zeusc.library_path()); print(zeusc.library_version())"
    env = dict(os.environ)
    env.pop("ZEUSC_LIBRARY", None)
    env["PYTHONPATH"] = str(tmp_path / "site")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0] == str(pkg / "libzeus.so")


def test_checkout_build_wins_over_a_stale_copy_next_to_the_package(tmp_path):
    # A checkout whose python/zeusc/ holds an old copy of libzeus (the README once said to copy it
    # there): the build folder's library is loaded, never the copy, which goes stale at every build.
    co = tmp_path / "checkout"
    pkg = co / "python" / "zeusc"
    shutil.copytree(os.path.join(tu.PYDIR, "zeusc"), pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    (co / "CMakeLists.txt").write_text("project(zeus)\n")
    (co / "build").mkdir()
    shutil.copy(_built_library(), co / "build" / "libzeus.so")
    shutil.copy(_built_library(), pkg / "libzeus.so")  # the stale copy
    env = dict(os.environ)
    env.pop("ZEUSC_LIBRARY", None)
    env["PYTHONPATH"] = str(co / "python")
    p = subprocess.run([sys.executable, "-c", "import zeusc; print(zeusc.library_path())"], env=env,
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(co / "build" / "libzeus.so")
    # Without a build, the copy is what there is.
    (co / "build" / "libzeus.so").unlink()
    p = subprocess.run([sys.executable, "-c", "import zeusc; print(zeusc.library_path())"], env=env,
                       capture_output=True, text=True, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(pkg / "libzeus.so")


def test_build_tree_library_is_found_from_a_checkout():
    build = os.path.join(tu.REPO, "build", "libzeus.so")
    if not os.path.exists(build):
        pytest.skip("no build/libzeus.so in this checkout (the build folder has another name)")
    p = tu.run_py("import zeusc; print(zeusc.library_path())", env={"ZEUSC_LIBRARY": None})
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == os.path.realpath(build)


def test_nothing_found_says_where_it_looked(tmp_path):
    pkg = tmp_path / "zeusc"
    shutil.copytree(os.path.join(tu.PYDIR, "zeusc"), pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so*"))
    env = dict(os.environ)
    env.pop("ZEUSC_LIBRARY", None)
    env["PYTHONPATH"] = str(tmp_path)
    env["LD_LIBRARY_PATH"] = ""
    p = subprocess.run([sys.executable, "-c", "import zeusc; zeusc.library_path()"], env=env, capture_output=True,
                       text=True, cwd=str(tmp_path))
    if p.returncode == 0:
        pytest.skip("a libzeus is installed system-wide on this machine")
    assert "cannot find libzeus" in p.stderr and str(pkg / "libzeus.so") in p.stderr and "ZEUSC_LIBRARY" in p.stderr


def test_log_lines_go_to_python_logging():
    code = textwrap.dedent("""
        import logging
        logging.basicConfig(level=logging.DEBUG, format="%(name)s %(levelname)s %(message)s")
        from zeusc.device import Devices
        d = Devices(nvml_library="/nonexistent/libnvidia-ml.so.1")   # automatic choice: falls back to none
        print("backend", d.backend)
    """)
    p = tu.run_py(code, env={"ZEUS_LOG_LEVEL": "debug", "ZEUS_GPU_BACKEND": None})
    assert p.returncode == 0, p.stderr
    assert "backend none" in p.stdout
    assert re.search(r"^zeusc\.device DEBUG .*NVML library '/nonexistent/libnvidia-ml.so.1'", p.stderr, re.M), p.stderr


def test_bad_zeus_log_level_names_the_variable():
    p = tu.run_py("import zeusc; zeusc.library_path()", env={"ZEUS_LOG_LEVEL": "chatty"})
    assert p.returncode != 0 and "ZEUS_LOG_LEVEL" in p.stderr and "chatty" in p.stderr
