"""A self-contained PEP 517 build backend for zeusc.

zeusc is pure Python (ctypes over libzeus), so building it only means zipping files. Doing that
here, with the standard library alone, lets ``pip install ./python`` work offline: pip's isolated
build environment needs nothing from an index (``requires = []`` in pyproject.toml), on any
machine, with or without setuptools.

Wheel layout (PEP 427): the ``zeusc`` package, then ``zeusc-<version>.dist-info`` with METADATA
(core metadata 2.1), WHEEL and RECORD (sha256 of every file). ``ZEUSC_BUNDLE_LIBRARY`` names a
libzeus to ship in the wheel as ``zeusc/libzeus.so`` (``ZEUSC_BUNDLE_LIBRARY=build/libzeus.so pip
install ./python``: nothing is copied into the source tree); a libzeus already copied into
``zeusc/`` is shipped too. Either way the wheel is then tagged for this platform instead of
``py3-none-any``.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAME = "zeusc"


def _project():
    """The [project] table of pyproject.toml (tomllib where Python has it, else a small reader
    for the flat string fields we use)."""
    path = os.path.join(ROOT, "pyproject.toml")
    with open(path, "rb") as f:
        data = f.read()
    try:
        import tomllib  # Python >= 3.11
        return tomllib.loads(data.decode("utf-8"))["project"]
    except ImportError:
        text = data.decode("utf-8")
        section = re.search(r"^\[project\]\s*$(.*?)(?=^\[)", text, re.S | re.M)
        if not section:
            raise RuntimeError(f"{path}: no [project] table")
        fields = dict(re.findall(r'^(\w[\w-]*)\s*=\s*"([^"]*)"\s*$', section.group(1), re.M))
        return fields


def _metadata():
    p = _project()
    for key in ("name", "version"):
        if key not in p:
            raise RuntimeError(f"pyproject.toml: [project] lacks '{key}'")
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}"]
    if p.get("description"):
        lines.append(f"Summary: {p['description']}")
    if p.get("requires-python"):
        lines.append(f"Requires-Python: {p['requires-python']}")
    for extra, reqs in (p.get("optional-dependencies") or {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f'Requires-Dist: {r}; extra == "{extra}"' for r in reqs]
    body = ""
    readme = os.path.join(ROOT, "README.md")
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return p["name"], p["version"], "\n".join(lines) + "\n" + body


BUNDLE_ENV = "ZEUSC_BUNDLE_LIBRARY"


def _package_files():
    """(archive name, path) of every file of the package: sources and a bundled libzeus
    (ZEUSC_BUNDLE_LIBRARY, else a copy in zeusc/); no caches or tests."""
    bundle = os.environ.get(BUNDLE_ENV)
    if bundle and not os.path.isfile(bundle):
        raise RuntimeError(f"{BUNDLE_ENV}={bundle!r} is not a file (build libzeus first: make build)")
    out = []
    base = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, fn)
            out.append((os.path.relpath(path, ROOT).replace(os.sep, "/"), path))
    if bundle:
        out = [(n, p) for n, p in out if not re.search(r"^zeusc/libzeus\.so(\.|$)", n)]
        out.append((f"{NAME}/libzeus.so", os.path.realpath(bundle)))
    return out


def _tag(files):
    if any(re.search(r"\.so(\.|$)", name) for name, _ in files):
        plat = re.sub(r"[^A-Za-z0-9]", "_", sysconfig.get_platform())
        return f"py3-none-{plat}", False
    return "py3-none-any", True


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _dist_info(version):
    return f"{NAME}-{version}.dist-info"


# ---- PEP 517 hooks ----------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _, version, meta = _metadata()
    d = os.path.join(metadata_directory, _dist_info(version))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(meta)
    return os.path.basename(d)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _, version, meta = _metadata()
    files = _package_files()
    tag, purelib = _tag(files)
    info = _dist_info(version)
    wheel_name = f"{NAME}-{version}-{tag}.whl"
    record = []
    tmp = os.path.join(wheel_directory, wheel_name + ".part")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name, data, mode=0o644):
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
            record.append(_record_line(name, data))

        for name, path in files:
            with open(path, "rb") as f:
                add(name, f.read(), 0o755 if os.access(path, os.X_OK) else 0o644)
        add(f"{info}/METADATA", meta.encode("utf-8"))
        add(f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: zeusc_build\n"
                              f"Root-Is-Purelib: {'true' if purelib else 'false'}\nTag: {tag}\n").encode())
        record.append(f"{info}/RECORD,,")
        zi = zipfile.ZipInfo(f"{info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        zi.external_attr = (0o100644) << 16
        z.writestr(zi, "\n".join(record) + "\n")
    os.replace(tmp, os.path.join(wheel_directory, wheel_name))  # never a half-written wheel
    return wheel_name


def build_sdist(sdist_directory, config_settings=None):
    _, version, meta = _metadata()
    base = f"{NAME}-{version}"
    names = [n for n, _ in _package_files() if not re.search(r"\.so(\.|$)", n)]
    names += ["pyproject.toml", "README.md", "_build/zeusc_build.py"]
    tmp = os.path.join(sdist_directory, base + ".tar.gz.part")
    with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as t:
        for n in names:
            path = os.path.join(ROOT, n)
            if os.path.exists(path):
                t.add(path, arcname=f"{base}/{n}", recursive=False)
        data = meta.encode("utf-8")
        ti = tarfile.TarInfo(f"{base}/PKG-INFO")
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    os.replace(tmp, os.path.join(sdist_directory, base + ".tar.gz"))
    return base + ".tar.gz"
