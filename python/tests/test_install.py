"""`pip install ./python` works offline (our own standard-library build backend: pip's isolated
build needs nothing from an index): into a --target folder with the system Python, and into a
bare virtual environment; the installed package finds a libzeus copied next to it, or the one
ZEUSC_LIBRARY names. The wheel the backend writes is checked file by file."""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile

import pytest

import zeusc_testutil as tu
from zeusc import _lib

pytestmark = pytest.mark.skipif(bool(os.environ.get("ZEUSC_TEST_SANITIZED")),
                                reason="installing is tested in the normal build, not under the sanitizers")

CHECK = textwrap.dedent("""
    import sys, zeusc
    import zeusc.optimizer.power_limit, zeusc.optimizer.pipeline_frequency, zeusc.utils.metric, zeusc.device
    from zeusc.monitor import ZeusMonitor
    m = ZeusMonitor()
    m.begin_window("w"); r = m.end_window("w")
    print(zeusc.__file__)
    print(zeusc.library_path())
    print(sorted(r.gpu_energy))
""")


def _pip_ok(python):
    return subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def _source_copy(tmp_path, bundle_library):
    src = tmp_path / "src"
    shutil.copytree(tu.PYDIR, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "build", "*.egg-info",
                                                                  "libzeus.so*"))
    if bundle_library:
        shutil.copy(_lib.library_path(), src / "zeusc" / "libzeus.so")
    return src


def _env(**kw):
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ZEUSC_LIBRARY")}
    e.update({"ZEUS_GPU_BACKEND": "sim", "ZEUS_SIM_GPUS": "2", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    e.update(kw)
    return e


def test_pip_install_target_with_the_library_bundled(tmp_path):
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    if not _pip_ok(python):
        pytest.skip(f"{python} has no pip (Debian: python3-pip)")
    src = _source_copy(tmp_path, bundle_library=True)
    site = tmp_path / "site"
    p = subprocess.run([python, "-m", "pip", "install", "--no-index", "--no-deps",
                        "--target", str(site), str(src)], capture_output=True, text=True, env=_env(), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (site / "zeusc" / "libzeus.so").exists()
    assert not (site / "zeusc" / "tests").exists()
    p = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, env=_env(PYTHONPATH=str(site)),
                       cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(str(site / "zeusc"))
    assert lines[1] == str(site / "zeusc" / "libzeus.so")  # found next to the package
    assert lines[2] == "[0, 1]"


def test_pip_install_into_a_venv_with_zeusc_library(tmp_path):
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    venv = tmp_path / "venv"
    # A bare venv: no setuptools or wheel is needed to build the package, and no index is reached.
    p = subprocess.run([python, "-m", "venv", str(venv)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot create a venv (Debian: python3-venv): {p.stderr.strip()[-200:]}")
    vpy = str(venv / "bin" / "python")
    if not _pip_ok(vpy):
        pytest.skip("the venv has no pip")
    src = _source_copy(tmp_path, bundle_library=False)
    p = subprocess.run([vpy, "-m", "pip", "install", "--no-index", str(src)],
                       capture_output=True, text=True, env=_env(), timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([vpy, "-c", CHECK], capture_output=True, text=True,
                       env=_env(ZEUSC_LIBRARY=_lib.library_path()), cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith(str(venv))
    assert lines[1] == _lib.library_path()
    # without ZEUSC_LIBRARY and with no copy next to the package, the error says what to do
    p = subprocess.run([vpy, "-c", "import zeusc; zeusc.library_path()"], capture_output=True, text=True,
                       env=_env(LD_LIBRARY_PATH=""), cwd=str(tmp_path))
    if p.returncode != 0:
        assert "cannot find libzeus" in p.stderr and "ZEUSC_LIBRARY" in p.stderr


def _backend():
    spec = importlib.util.spec_from_file_location("zeusc_build", os.path.join(tu.PYDIR, "_build", "zeusc_build.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("bundle_library", [False, True])
def test_wheel_is_complete_and_its_record_matches(tmp_path, bundle_library, monkeypatch):
    src = _source_copy(tmp_path, bundle_library=bundle_library)
    backend = _backend()
    monkeypatch.setattr(backend, "ROOT", str(src))
    assert backend.get_requires_for_build_wheel() == []
    name = backend.build_wheel(str(tmp_path))
    if bundle_library:
        assert "-py3-none-linux" in name  # a libzeus inside: not a pure-Python wheel
    else:
        assert name == "zeusc-" + backend._project()["version"] + "-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / name) as z:
        names = z.namelist()
        info = [n for n in names if n.endswith(".dist-info/RECORD")][0].rsplit("/", 1)[0]
        record = z.read(info + "/RECORD").decode().splitlines()
        listed = {}
        for line in record:
            path, digest, size = line.rsplit(",", 2)
            listed[path] = (digest, size)
        assert set(listed) == set(names)  # every file listed, nothing else
        for path, (digest, size) in listed.items():
            if path.endswith("/RECORD"):
                assert digest == "" and size == ""
                continue
            data = z.read(path)
            want = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == "sha256=" + want and int(size) == len(data), path
        meta = z.read(info + "/METADATA").decode()
        assert "Name: zeusc" in meta and "Requires-Python: >=3.8" in meta
        wheel = z.read(info + "/WHEEL").decode()
        assert ("Root-Is-Purelib: false" in wheel) == bundle_library
    assert "zeusc/optimizer/power_limit.py" in names or any(n.startswith("zeusc/optimizer/power_limit") for n in names)
    assert ("zeusc/libzeus.so" in names) == bundle_library
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


def test_wheel_bundles_the_library_named_by_zeusc_bundle_library(tmp_path, monkeypatch):
    # ZEUSC_BUNDLE_LIBRARY puts a libzeus into the wheel without copying anything into the source.
    src = _source_copy(tmp_path, bundle_library=False)
    backend = _backend()
    monkeypatch.setattr(backend, "ROOT", str(src))
    monkeypatch.setenv("ZEUSC_BUNDLE_LIBRARY", _lib.library_path())
    name = backend.build_wheel(str(tmp_path))
    assert "-py3-none-linux" in name
    with zipfile.ZipFile(tmp_path / name) as z:
        assert z.read("zeusc/libzeus.so") == open(_lib.library_path(), "rb").read()
        assert "Root-Is-Purelib: false" in z.read([n for n in z.namelist() if n.endswith("/WHEEL")][0]).decode()
    assert not any(p.name.startswith("libzeus") for p in (src / "zeusc").iterdir())
    monkeypatch.setenv("ZEUSC_BUNDLE_LIBRARY", str(tmp_path / "missing" / "libzeus.so"))
    with pytest.raises(RuntimeError, match="ZEUSC_BUNDLE_LIBRARY=.*is not a file"):
        backend.build_wheel(str(tmp_path))
