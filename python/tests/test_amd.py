"""zeusc.device.gpu.amd (the original's zeus.device.gpu.amd) on the fake libamd_smi.so playing two
MI300X: the original's names, its units (mW, mJ, MHz) after the conversions libzeus makes from
amdsmi's microwatts, watts and counter ticks, and settings put back at close."""
from __future__ import annotations

import os

import pytest

import zeusc_testutil as tu


def fake_amdsmi_path():
    p = os.environ.get("ZEUSC_TEST_FAKE_AMDSMI") or os.path.join(tu.REPO, "build", "fake_amdsmi", "libamd_smi.so")
    return p if os.path.exists(p) else None


@pytest.fixture
def mi300x(monkeypatch, tmp_path):
    path = fake_amdsmi_path()
    if not path:
        pytest.skip("the fake libamd_smi.so is not built")
    log = tmp_path / "amdsmi.log"
    monkeypatch.setenv("ZEUS_AMDSMI_LIBRARY", path)
    monkeypatch.setenv("ZEUS_SIM_HARDWARE", "mi300x")
    monkeypatch.setenv("ZEUS_SIM_GPUS", "2")
    monkeypatch.setenv("ZEUS_SIM_CLOCK", "virtual")
    monkeypatch.setenv("FAKE_AMDSMI_LOG", str(log))
    return log


def test_amd_module_has_the_original_names():
    from zeusc.device.gpu import amd
    for name in ("AMDGPU", "AMDGPUs", "ZeusdAMDGPU", "amdsmi_is_available"):
        assert hasattr(amd, name), name
    assert issubclass(amd.AMDGPUs, __import__("zeusc.device.gpu", fromlist=["GPUs"]).GPUs)


def test_amdgpus_reads_and_sets_an_mi300x_in_the_original_units(mi300x):
    from zeusc.device.gpu import ZeusGPUNotSupportedError
    from zeusc.device.gpu.amd import AMDGPUs
    gpus = AMDGPUs(ensure_homogeneous=True)
    try:
        assert len(gpus) == 2
        assert gpus.get_name(1) == "AMD Instinct MI300X"
        assert gpus.get_power_management_limit_constraints(0) == (400000, 750000)
        assert gpus.get_power_management_limit(0) == 750000
        gpus.set_power_management_limit(0, 500000)
        assert gpus.get_power_management_limit(0) == 500000
        power = gpus.get_instant_power_usage(1)
        assert power % 1000 == 0 and 188000 <= power <= 192000      # whole watts from amdsmi
        assert gpus.get_average_power_usage(1) == 190000
        assert gpus.supports_get_total_energy_consumption(0) is True
        assert isinstance(gpus.get_total_energy_consumption(0), int)
        assert gpus.get_supported_graphics_clocks(0) == [2100, 500]
        assert gpus.get_supported_memory_clocks(0) == [1300]
        gpus.set_gpu_locked_clocks(0, 500, 500)
        gpus.reset_locked_clocks(0)
        with pytest.raises(ZeusGPUNotSupportedError):
            gpus.get_persistence_mode(0)
        with pytest.raises(ZeusGPUNotSupportedError):
            gpus.get_average_memory_power_usage(0)
    finally:
        gpus.close()
    lines = mi300x.read_text().splitlines()
    assert lines[0] == "amdsmi_set_power_cap 0 0 500000000 -> 0"
    assert "amdsmi_set_gpu_clk_range 0 500 500 0 -> 0" in lines
    assert lines[-1] == "amdsmi_set_power_cap 0 0 750000000 -> 0"   # put back at close


def test_power_cap_equal_to_the_current_one_is_not_written(mi300x):
    """The original's test_zeusd_gpu_skips_unchanged_power_limit, here on AMDGPU: a cap equal to
    the current one reaches no amdsmi_set_power_cap."""
    from zeusc.device.gpu.amd import AMDGPUs
    gpus = AMDGPUs()
    try:
        gpus.set_power_management_limit(0, 750000)    # the MI300X's cap now
        gpus.reset_power_management_limit(1)           # already the default
        assert not mi300x.exists() or mi300x.read_text() == ""
        gpus.set_power_management_limit(0, 600000)
        gpus.set_power_management_limit(0, 600000)
    finally:
        gpus.close()
    assert mi300x.read_text().splitlines() == ["amdsmi_set_power_cap 0 0 600000000 -> 0",
                                               "amdsmi_set_power_cap 0 0 750000000 -> 0"]


def test_single_clock_domain_resets_are_refused_without_an_amdsmi_call(mi300x):
    """The original's test_local_gpu_rejects_single_domain_clock_resets: AMD frees both clock
    domains at once, so resetting one alone is refused before any amdsmi call; reset_locked_clocks
    frees both."""
    from zeusc.device.gpu import ZeusGPUNotSupportedError
    from zeusc.device.gpu.amd import AMDGPUs
    gpus = AMDGPUs()
    try:
        gpus.set_gpu_locked_clocks(0, 1000, 1200)
        gpus.set_memory_locked_clocks(0, 900, 900)
        for reset in (gpus.gpus[0].reset_gpu_locked_clocks, gpus.gpus[0].reset_memory_locked_clocks,
                      lambda: gpus.reset_gpu_locked_clocks(0), lambda: gpus.reset_memory_locked_clocks(0)):
            with pytest.raises(ZeusGPUNotSupportedError, match="cannot reset a single clock domain"):
                reset()
        assert mi300x.read_text().splitlines() == ["amdsmi_set_gpu_clk_range 0 1000 1200 0 -> 0",
                                                   "amdsmi_set_gpu_clk_range 0 900 900 4 -> 0"]
        gpus.reset_locked_clocks(0)
    finally:
        gpus.close()
    # libzeus's zeus_gpu_reset_all_clocks: one performance-level reset frees both domains (no lock put
    # back between two resets); nothing left for the close
    assert mi300x.read_text().splitlines()[2:] == ["amdsmi_set_gpu_perf_level 0 0 -> 0"]


def test_amdgpu_of_a_hip_index_not_there_names_the_indices_there(mi300x, monkeypatch):
    """The original's test_get_handle_raises_for_missing_hip_index: the error names the index and
    the HIP indices there are (counted among the visible GPUs)."""
    from zeusc.device.gpu import ZeusGPUNotFoundError
    from zeusc.device.gpu.amd import AMDGPU
    from zeusc.device import Devices
    monkeypatch.setenv("ZEUS_SIM_GPUS", "3")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "0,2")
    devices = Devices(backend="amdsmi", daemon="")
    try:
        assert AMDGPU(1, devices=devices).get_power_management_limit() == 750000
        for index in (7, 2, -1):
            with pytest.raises(ZeusGPUNotFoundError) as e:
                AMDGPU(index, devices=devices)
            assert f"HIP index {index}" in str(e.value) and "[0, 1]" in str(e.value)
    finally:
        devices.close()


def test_amdsmi_is_available_says_whether_the_library_lists_gpus(mi300x):
    code = ("from zeusc.device.gpu.amd import amdsmi_is_available, AMDGPUs\n"
            "from zeusc.device.gpu import ZeusGPUInitError\n"
            "print(amdsmi_is_available())\n"
            "try:\n    AMDGPUs()\nexcept ZeusGPUInitError as e:\n    print('init error:', e)\n")
    p = tu.run_py(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["True"], p.stdout
    p = tu.run_py(code, env={"ZEUS_AMDSMI_LIBRARY": "/nonexistent/libamd_smi.so"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.splitlines()
    assert out[0] == "False", p.stdout
    assert out[1].startswith("init error:") and "cannot load the amdsmi library '/nonexistent/libamd_smi.so'" in out[1]


ZEUSD_AMD_SCRIPT = r"""
from zeusc.device.gpu.amd import AMDGPUs, ZeusdAMDGPU
gpus = AMDGPUs()
assert all(isinstance(g, ZeusdAMDGPU) for g in gpus.gpus), gpus.gpus
assert gpus.devices.backend == "amdsmi+zeusd", gpus.devices.backend
gpus.set_power_management_limit(0, 450000)
assert gpus.get_power_management_limit(0) == 450000
gpus.set_gpu_locked_clocks(0, 1200, 1200)
gpus.close()
print("done")
"""


def run_with_a_daemon(tmp_path, script, *daemon_args, env=None):
    """Runs `script` in a zeusc client process (HIP order by KFD nodes 2,1: its HIP 0 is amd-smi's
    GPU 1) against a `zeus daemon serve` on the fake amdsmi (amd-smi's order, logging to the
    fixture's log), and stops the daemon."""
    import subprocess
    import time
    cli = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    if not os.path.exists(cli) or subprocess.run([cli, "daemon", "--help"], capture_output=True).returncode != 0:
        pytest.skip("the zeus CLI with the daemon is not built; set ZEUSC_TEST_ZEUS_CLI")
    sock = str(tmp_path / "zeusd.sock")
    denv = dict(os.environ, ZEUS_GPU_BACKEND="amdsmi", ZEUS_SIM_CLOCK="wall")
    denv.pop("ZEUSD_SOCK_PATH", None)
    denv.pop("ZEUSD_HOST_PORT", None)
    errf = open(tmp_path / "daemon.err", "w")
    p = subprocess.Popen([cli, "daemon", "serve", "--socket-path", sock, "--no-state-file", "--log-level", "info",
                          *daemon_args], env=denv, stderr=errf)
    try:
        deadline = time.time() + 10
        while time.time() < deadline and "ready" not in (tmp_path / "daemon.err").read_text():
            assert p.poll() is None, (tmp_path / "daemon.err").read_text()
            time.sleep(0.05)
        r = tu.run_py(script, env={"ZEUSD_SOCK_PATH": sock, "ZEUS_GPU_BACKEND": None,
                                   "ZEUS_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1",
                                   "FAKE_AMDSMI_KFD_NODES": "2,1", "ZEUS_SIM_CLOCK": "wall",
                                   "FAKE_AMDSMI_LOG": str(tmp_path / "client.log"), **(env or {})})
        assert r.returncode == 0 and "done" in r.stdout, r.stderr
    finally:
        p.terminate()
        p.wait(10)
        errf.close()
    assert not (tmp_path / "client.log").exists() or (tmp_path / "client.log").read_text() == ""


def test_zeusd_amdgpu_sets_through_the_daemon_on_the_gpu_at_the_same_pci_address(mi300x, tmp_path):
    """A `zeus daemon serve` on the fake amdsmi (amd-smi's order) and a zeusc client whose HIP order
    differs (KFD nodes 2,1: HIP 0 is amd-smi's GPU 1): AMDGPUs holds ZeusdAMDGPU objects, and the cap
    and clock lock of GPU 0 are made, and given back, by the daemon on its GPU 1."""
    run_with_a_daemon(tmp_path, ZEUSD_AMD_SCRIPT)
    assert mi300x.read_text().splitlines() == [
        "amdsmi_set_power_cap 1 0 450000000 -> 0",
        "amdsmi_set_gpu_clk_range 1 1200 1200 0 -> 0",
        "amdsmi_set_power_cap 1 0 750000000 -> 0",
        "amdsmi_set_gpu_perf_level 1 0 -> 0",
    ]


ZEUSD_AMD_CONTROL_ONLY_SCRIPT = r"""
import os
from zeusc.device.gpu import ZeusGPUNotSupportedError
from zeusc.device.gpu.amd import AMDGPUs, ZeusdAMDGPU
daemon_log = lambda: open(os.environ["DAEMON_LOG"]).read().splitlines() if os.path.exists(os.environ["DAEMON_LOG"]) else []
gpus = AMDGPUs()
assert all(isinstance(g, ZeusdAMDGPU) for g in gpus.gpus), gpus.gpus
gpu = gpus.gpus[0]
gpu.set_power_management_limit(750000)        # the current cap: the daemon's amdsmi writes nothing
assert daemon_log() == [], daemon_log()
gpu.set_gpu_locked_clocks(1000, 1200)
gpu.set_memory_locked_clocks(900, 900)
for reset in (gpu.reset_gpu_locked_clocks, gpu.reset_memory_locked_clocks):
    try:
        reset()
        raise SystemExit("a single-domain reset was not refused")
    except ZeusGPUNotSupportedError as e:
        assert "cannot reset a single clock domain" in str(e), e
assert daemon_log() == ["amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0", "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0"], daemon_log()
gpu.reset_locked_clocks()
gpu.set_power_management_limit(450000)
# read here, from this process's amdsmi (the double's copy is an engine of its own, still at 750 W)
assert gpu.get_power_management_limit() == 750000
assert gpu.get_instant_power_usage() > 0 and gpu.get_total_energy_consumption() >= 0
gpus.close()
print("done")
"""


def test_zeusd_amdgpu_with_a_control_only_daemon(mi300x, tmp_path):
    """The original's ZeusdAMDGPU tests of a control-only daemon, of single-domain resets refused
    without a daemon call, of the full reset relayed to the daemon, and of the unchanged cap: a
    daemon serving only gpu-control; readings stay here; every setting is made by the daemon on its
    GPU 1 (the client's HIP 0), and given back when the client closes; the client's amdsmi writes
    nothing."""
    run_with_a_daemon(tmp_path, ZEUSD_AMD_CONTROL_ONLY_SCRIPT, "--enable", "gpu-control",
                      env={"DAEMON_LOG": str(mi300x)})
    assert mi300x.read_text().splitlines() == [
        "amdsmi_set_gpu_clk_range 1 1000 1200 0 -> 0",
        "amdsmi_set_gpu_clk_range 1 900 900 4 -> 0",
        "amdsmi_set_gpu_perf_level 1 0 -> 0",          # reset_locked_clocks: one request, and the
                                                       # daemon's one reset of both locks
        "amdsmi_set_power_cap 1 0 450000000 -> 0",
        "amdsmi_set_power_cap 1 0 750000000 -> 0",     # given back at close
    ]


def test_zeusd_amdgpu_without_a_daemon_says_how_to_name_one(mi300x, monkeypatch):
    from zeusc.device.gpu import ZeusGPUInitError
    from zeusc.device.gpu.amd import ZeusdAMDGPU
    monkeypatch.delenv("ZEUSD_SOCK_PATH", raising=False)
    monkeypatch.delenv("ZEUSD_HOST_PORT", raising=False)
    with pytest.raises(ZeusGPUInitError, match="ZEUSD_SOCK_PATH"):
        ZeusdAMDGPU(0)


def _cli_or_skip():
    import subprocess
    cli = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    if not os.path.exists(cli) or subprocess.run([cli, "daemon", "--help"], capture_output=True).returncode != 0:
        pytest.skip("the zeus CLI with the daemon is not built; set ZEUSC_TEST_ZEUS_CLI")
    return cli


def _signing_key_and_token(tmp_path, scopes, user="carol"):
    """A signing key for `zeus daemon serve --signing-key-path` (made on first call in `tmp_path`)
    and a token of `scopes` for `user` under it."""
    import base64
    import subprocess
    key = tmp_path / "signing.key"
    if not key.exists():
        key.write_bytes(base64.b64encode(os.urandom(32)) + b"\n")
        key.chmod(0o600)
    p = subprocess.run([_cli_or_skip(), "daemon", "token", "issue", "--signing-key-path", str(key), "--user", user,
                        "--scope", scopes, "--expires", "1h"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return str(key), p.stdout.strip()


ZEUSD_AMD_NO_CONTROL_SCRIPT = r"""
import os
from zeusc.device.gpu import ZeusGPUInitError
from zeusc.device.gpu.amd import AMDGPUs, ZeusdAMDGPU
from zeusc.utils.zeusd import ZeusdCapabilityError
sock, missing = os.environ["ZEUSD_SOCK_PATH"], os.environ["MISSING"]
try:
    ZeusdAMDGPU(0)
    raise SystemExit("ZeusdAMDGPU was made without gpu-control")
except ZeusdCapabilityError as e:
    assert f"Zeusd at {sock}" in str(e) and "ZeusdAMDGPU 0" in str(e) and "gpu-control" in str(e), e
    assert missing in str(e), e
try:
    AMDGPUs()
    raise SystemExit("AMDGPUs was made without gpu-control")
except ZeusGPUInitError as e:
    assert f"Zeusd at {sock}" in str(e) and missing in str(e), e
    assert isinstance(e.__cause__, ZeusdCapabilityError), repr(e.__cause__)
print("done")
"""


def test_zeusd_amdgpu_of_a_daemon_without_gpu_control_fails_at_construction(mi300x, tmp_path):
    """The original's ZeusdAMDGPU checks the daemon's capabilities when made
    (require_capabilities(client, control_gpu=True)): a daemon serving gpu-read only is a
    ZeusdCapabilityError naming the daemon's socket, the GPU and the group missing, before any
    setting; AMDGPUs raises it as ZeusGPUInitError. Nothing is written anywhere."""
    run_with_a_daemon(tmp_path, ZEUSD_AMD_NO_CONTROL_SCRIPT, "--enable", "gpu-read",
                      env={"MISSING": "API group 'gpu-control' is not enabled on this server"})
    assert not mi300x.exists() or mi300x.read_text() == ""


def test_zeusd_amdgpu_with_a_token_without_the_gpu_control_scope_fails_at_construction(mi300x, tmp_path):
    """The same for a daemon with tokens and a token of scope gpu-read only: the error names the
    scope missing and the scopes granted."""
    key, token = _signing_key_and_token(tmp_path, "gpu-read")
    run_with_a_daemon(tmp_path, ZEUSD_AMD_NO_CONTROL_SCRIPT, "--signing-key-path", key,
                      env={"ZEUSD_TOKEN": token,
                           "MISSING": "Token lacks required scope 'gpu-control' (granted: ['gpu-read'])"})
    assert not mi300x.exists() or mi300x.read_text() == ""


ZEUSD_AMD_CONTROL_TOKEN_SCRIPT = r"""
from zeusc.device.gpu.amd import AMDGPUs, ZeusdAMDGPU
gpus = AMDGPUs()
assert all(isinstance(g, ZeusdAMDGPU) for g in gpus.gpus), gpus.gpus
gpus.set_power_management_limit(0, 450000)     # its read of the cap first is made here, not by the daemon
assert gpus.get_power_management_limit(0) == 750000   # this process's amdsmi (the daemon's is another)
gpus.set_gpu_locked_clocks(0, 1200, 1200)
gpus.close()
print("done")
"""


def test_zeusd_amdgpu_sets_a_cap_with_a_control_only_token(mi300x, tmp_path):
    """amdsmi+zeusd with a token of scope gpu-control only (the daemon serving gpu-read to others):
    reads are local, so the cap is set; libzeus does not ask the daemon for the cap it reads before
    changing it (a 403 there failed the set)."""
    key, token = _signing_key_and_token(tmp_path, "gpu-control")
    run_with_a_daemon(tmp_path, ZEUSD_AMD_CONTROL_TOKEN_SCRIPT, "--signing-key-path", key,
                      env={"ZEUSD_TOKEN": token})
    assert mi300x.read_text().splitlines() == [
        "amdsmi_set_power_cap 1 0 450000000 -> 0",
        "amdsmi_set_gpu_clk_range 1 1200 1200 0 -> 0",
        "amdsmi_set_power_cap 1 0 750000000 -> 0",
        "amdsmi_set_gpu_perf_level 1 0 -> 0",
    ]


ZEUSD_AMD_CLIENT_TOKEN_SCRIPT = r"""
import os
from zeusc.device.gpu.amd import ZeusdAMDGPU
from zeusc.utils.zeusd import ZeusdClient, ZeusdConfig
token = os.environ.pop("CLIENT_TOKEN")
client = ZeusdClient(ZeusdConfig.uds(os.environ["ZEUSD_SOCK_PATH"], token=token))
assert client.can_control_gpu, client.auth_error
gpu = ZeusdAMDGPU(0, client=client)
gpu.set_power_management_limit(450000)
gpu.set_gpu_locked_clocks(1200, 1200)
gpu._devices.close()
print("done")
"""


def _run_with_the_clients_token(mi300x, tmp_path, env_token):
    """ZeusdAMDGPU(0, client=c) on a daemon that requires tokens, c's ZeusdConfig carrying a
    gpu-control token of its own and ZEUSD_TOKEN holding `env_token` (None: unset): the cap and the
    clock lock are made by the daemon, and given back at close."""
    key, token = _signing_key_and_token(tmp_path, "gpu-control,gpu-read")
    env = {"CLIENT_TOKEN": token, "ZEUSD_TOKEN": None}
    if env_token is not None:
        env["ZEUSD_TOKEN"] = env_token(key)
    run_with_a_daemon(tmp_path, ZEUSD_AMD_CLIENT_TOKEN_SCRIPT, "--signing-key-path", key, env=env)
    assert mi300x.read_text().splitlines() == [
        "amdsmi_set_power_cap 1 0 450000000 -> 0",
        "amdsmi_set_gpu_clk_range 1 1200 1200 0 -> 0",
        "amdsmi_set_power_cap 1 0 750000000 -> 0",
        "amdsmi_set_gpu_perf_level 1 0 -> 0",
    ]


def test_zeusd_amdgpu_sends_its_clients_token_without_zeusd_token(mi300x, tmp_path):
    """The original's ZeusdAMDGPU sends every setting through its client, with the client's token:
    a client made with a token, and no ZEUSD_TOKEN in the environment, sets the cap (libzeus's
    device set sent none: 401 at the first setting, after the construction check had passed)."""
    _run_with_the_clients_token(mi300x, tmp_path, None)


def test_zeusd_amdgpu_clients_token_wins_over_another_in_zeusd_token(mi300x, tmp_path):
    """The same with ZEUSD_TOKEN holding another valid token (another user's, of scope gpu-read
    only): the settings are made under the client's identity, not refused (403) under the
    environment's."""
    _run_with_the_clients_token(mi300x, tmp_path, lambda key: _signing_key_and_token(tmp_path, "gpu-read", "dave")[1])
