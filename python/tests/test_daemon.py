"""zeusc through a zeus daemon, and the daemon's wire format as the original Python package uses it.

A `zeus daemon serve` runs over the fake NVML (two simulated GPUs) on a Unix socket; its setter log
shows what it did. The zeusc process gets ZEUSD_SOCK_PATH, and its own NVML setters are made to
fail with NO_PERMISSION, as for an unprivileged user: everything it changes goes through the daemon.
The original package's calls (zeus.utils.zeusd.ZeusdClient, the older ZeusdNVIDIAGPU form, the
PowerStreamingClient's SSE parsing) are made here with http.client, request for request.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import time

import pytest

import zeusc_testutil as tu


def _cli():
    p = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    if not os.path.exists(p):
        pytest.skip("the zeus CLI (build/zeus) is not built; set ZEUSC_TEST_ZEUS_CLI")
    if subprocess.run([p, "daemon", "--help"], capture_output=True).returncode != 0:
        pytest.skip("this zeus was built without the daemon (ZEUS_WITH_DAEMON=OFF)")
    return p


class Uds(http.client.HTTPConnection):
    """httpx.HTTPTransport(uds=...) as the original client opens it: HTTP over a Unix socket."""

    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def _serve(tmp_path, extra_env=None, args=()):
    fake = tu.fake_nvml_path()
    if not fake:
        pytest.skip("the fake NVML is not built; set ZEUSC_TEST_FAKE_NVML")
    sock = str(tmp_path / "zeusd.sock")
    log = tmp_path / "nvml.log"
    # FAKE_NVML_BUSY_FILE: every GPU is busy while that file exists (the stream tests make power move).
    env = dict(os.environ, ZEUS_NVML_LIBRARY=fake, ZEUS_SIM_GPUS="2", FAKE_NVML_LOG=str(log),
               FAKE_NVML_BUSY_FILE=str(tmp_path / "busy"), **(extra_env or {}))
    env.pop("ZEUS_GPU_BACKEND", None)
    errf = open(tmp_path / "daemon.err", "w")
    p = subprocess.Popen([_cli(), "daemon", "serve", "--socket-path", sock, "--no-state-file", "--log-level", "info",
                          *args], env=env, stderr=errf)
    deadline = time.time() + 10
    while time.time() < deadline and "ready" not in (tmp_path / "daemon.err").read_text():
        assert p.poll() is None, (tmp_path / "daemon.err").read_text()
        time.sleep(0.05)
    yield {"sock": sock, "log": log, "fake": fake, "proc": p, "err": tmp_path / "daemon.err",
           "busy": tmp_path / "busy"}
    p.terminate()
    p.wait(10)
    errf.close()


@pytest.fixture
def daemon(tmp_path):
    yield from _serve(tmp_path)


def _fake_rapl(root):
    """Two CPU packages in a fake powercap tree: 0 with a DRAM zone, 1 without."""
    for zone, energy, name in (("intel-rapl:0", 123456789, "package-0"), ("intel-rapl:0:0", 5555, "dram"),
                               ("intel-rapl:1", 42000, "package-1")):
        (root / zone).mkdir(parents=True)
        (root / zone / "energy_uj").write_text(f"{energy}\n")
        (root / zone / "name").write_text(name + "\n")
        (root / zone / "max_energy_range_uj").write_text("262143328850\n")


@pytest.fixture
def daemon_rapl(tmp_path):
    _fake_rapl(tmp_path / "powercap")
    yield from _serve(tmp_path, {"ZEUS_RAPL_ROOT": str(tmp_path / "powercap")})


@pytest.fixture
def daemon_read_only(tmp_path):
    """A daemon serving the read groups only, as for monitoring: no gpu-control."""
    yield from _serve(tmp_path, args=("--enable", "gpu-read,cpu-read"))


def _req(sock, method, url, body=None, headers=None):
    c = Uds(sock)
    c.request(method, url, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read().decode()
    c.close()
    return r.status, data


def _setter_lines(log):
    return log.read_text().splitlines() if log.exists() else []


def _client_env(daemon, tmp_path):
    return {"ZEUSD_SOCK_PATH": daemon["sock"], "ZEUS_GPU_BACKEND": None, "ZEUS_NVML_LIBRARY": daemon["fake"],
            "ZEUS_SIM_GPUS": "2", "ZEUS_SIM_CLOCK": "wall", "FAKE_NVML_LOG": str(tmp_path / "client-nvml.log"),
            "FAKE_NVML_INJECT": "nvmlDeviceSetPowerManagementLimit:NO_PERMISSION"}


PLO_SCRIPT = r"""
import os
import time
# The steps below sleep in real time, so they jitter and robust profiling would measure some limits
# again (docs/plo.md); this test checks the daemon's wiring on the original's sequence of changes.
os.environ["ZEUS_PLO_PROFILING"] = "original"
from zeusc.device import Devices
from zeusc.monitor import ZeusMonitor
from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, Energy
with Devices() as d:
    print("backend", d.backend)
monitor = ZeusMonitor(gpu_indices=[0])
plo = GlobalPowerLimitOptimizer(monitor, Energy(), warmup_steps=1, profile_steps=2)
for epoch in range(3):
    plo.on_epoch_begin()
    for _ in range(40):
        plo.on_step_begin(); time.sleep(0.002); plo.on_step_end()
    plo.on_epoch_end()
print("state", plo.state.name, "optimal", plo.optimal_power_limit)
plo.close()
"""


def test_zeusc_power_limit_optimizer_runs_through_the_daemon(daemon, tmp_path):
    r = tu.run_py(PLO_SCRIPT, env=_client_env(daemon, tmp_path))
    assert r.returncode == 0, r.stderr
    assert "backend nvml+zeusd" in r.stdout
    assert "state DONE" in r.stdout, r.stdout
    optimal = int(r.stdout.split("optimal ")[1].split()[0])
    limits = [int(line.split()[2]) for line in _setter_lines(daemon["log"])
              if line.startswith("nvmlDeviceSetPowerManagementLimit 0 ")]
    # The first change at open sets the maximum (300 W) on the GPU, as the original does, which
    # NVML is not asked to write since the GPU holds it (as the original's NVML class); then every
    # limit is profiled.
    assert limits[:8] == [275000, 250000, 225000, 200000, 175000, 150000, 125000, 100000], limits
    # The optimum is applied (no call when it is the 100 W profiled last), then 300 W given back
    # (no call when the optimum is 300 W).
    assert limits[8:] == ([optimal] if optimal != 100000 else []) + ([300000] if optimal != 300000 else []), limits
    assert not (tmp_path / "client-nvml.log").exists(), "zeusc called an NVML setter itself"


def test_zeusc_setting_held_by_another_client_raises_naming_it(daemon, tmp_path, monkeypatch):
    from zeusc.device import Devices
    from zeusc.exceptions import ZeusRuntimeError
    for k, v in _client_env(daemon, tmp_path).items():
        if v is None:
            monkeypatch.delenv(k, raising=False)
        else:
            monkeypatch.setenv(k, v)
    holder = subprocess.Popen([os.path.join(os.path.dirname(_cli()), "tests", "daemon_test_client"), "hold", "1", "180000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held", holder.stderr.read()
        with Devices(daemon="unix:" + daemon["sock"]) as d:
            with pytest.raises(ZeusRuntimeError, match=f"held by L[0-9]+: lease of pid {holder.pid}"):
                d.set_power_limit(1, 150000)
        with Devices(daemon="unix:" + daemon["sock"], daemon_override=True) as d:
            d.set_power_limit(1, 150000)
            assert d.get_power_limit(1) == 150000
        # Closed: the holder's value is back.
        with Devices(daemon="unix:" + daemon["sock"]) as d:
            assert d.get_power_limit(1) == 180000
    finally:
        holder.kill()
        holder.wait()
    deadline = time.time() + 1.0
    while "nvmlDeviceSetPowerManagementLimit 1 300000 -> 0" not in _setter_lines(daemon["log"]):
        assert time.time() < deadline, "GPU 1 not given back within 1 s of SIGKILL"
        time.sleep(0.01)


GET_GPUS_SCRIPT = r"""
import os
from zeusc.device.gpu import ZeusGPUInitError, get_gpus
from zeusc.utils.zeusd import ZeusdCapabilityError
try:
    gpus = get_gpus()
except ZeusGPUInitError as e:
    assert isinstance(e.__cause__, ZeusdCapabilityError), repr(e.__cause__)
    print("init error:", e)
    raise SystemExit(0)
print("backend", gpus.backend)
gpus.set_power_management_limit(0, 200000)
print("set", gpus.get_power_management_limit(0))
"""


def test_get_gpus_through_a_daemon_without_gpu_control_fails_at_once(daemon_read_only, tmp_path):
    """The original's NVIDIAGPUs makes ZeusdNVIDIAGPU objects, which check the daemon's capabilities
    when made (require_capabilities(client, control_gpu=True)), raised as ZeusGPUInitError: so does
    get_gpus over nvml+zeusd, naming the daemon, the backend and the group missing."""
    r = tu.run_py(GET_GPUS_SCRIPT, env=_client_env(daemon_read_only, tmp_path))
    assert r.returncode == 0, r.stderr
    sock = daemon_read_only["sock"]
    assert r.stdout.startswith("init error:"), r.stdout
    for words in (f"Zeusd at {sock}", "nvml+zeusd", "gpu-control", "API group 'gpu-control' is not enabled"):
        assert words in r.stdout, (words, r.stdout)
    assert _setter_lines(daemon_read_only["log"]) == []


def test_get_gpus_through_a_daemon_with_gpu_control_sets_there(daemon, tmp_path):
    r = tu.run_py(GET_GPUS_SCRIPT, env=_client_env(daemon, tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["backend nvml+zeusd", "set 200000"], r.stdout
    assert "nvmlDeviceSetPowerManagementLimit 0 200000 -> 0" in _setter_lines(daemon["log"])


def test_original_zeusd_client_calls_work(daemon):
    s = daemon["sock"]
    # ZeusdClient.__init__: /discover with the keys it reads.
    st, body = _req(s, "GET", "/discover")
    assert st == 200
    d = json.loads(body)
    gpus = [(g["id"], g["name"], g["pci_address"], g["cumulative_energy_available"]) for g in d["gpus"]]
    assert [g[0] for g in gpus] == [0, 1] and gpus[1][2] == "0000:02:00.0" and gpus[0][3] is True
    assert set(d["enabled_api_groups"]) == {"gpu-control", "gpu-read", "cpu-read"} and d["auth_required"] is False
    assert d["gpu_ids"] == [0, 1]  # PowerStreamingClient._discover_server reads these
    # set_power_limit(gpu_ids=[0, 1], power_limit_mw=..., block=True): query parameters on a POST.
    st, body = _req(s, "POST", "/gpu/set_power_limit?gpu_ids=0%2C1&power_limit_mw=210000&block=true")
    assert (st, body) == (200, "")
    st, body = _req(s, "GET", "/gpu/get_power_limit?gpu_ids=0%2C1")
    assert {int(k): v["power_limit_mw"] for k, v in json.loads(body).items()} == {0: 210000, 1: 210000}
    st, body = _req(s, "GET", "/gpu/get_power_limit_constraints")
    assert {int(k): (v["min_power_limit_mw"], v["max_power_limit_mw"]) for k, v in json.loads(body).items()} == \
        {0: (100000, 300000), 1: (100000, 300000)}
    st, body = _req(s, "GET", "/gpu/get_power")
    snap = json.loads(body)
    assert snap["timestamp_ms"] > 0 and {int(k) for k in snap["power_mw"]} == {0, 1}
    st, body = _req(s, "GET", "/gpu/get_cumulative_energy?gpu_ids=1")
    assert st == 200 and json.loads(body)["1"]["energy_mj"] >= 0
    st, body = _req(s, "POST", "/gpu/set_persistence_mode?gpu_ids=1&enabled=true&block=false")
    assert st == 200
    st, body = _req(s, "GET", "/gpu/get_persistence_mode")
    assert {int(k): v["enabled"] for k, v in json.loads(body).items()} == {0: False, 1: True}
    for path in ("set_gpu_locked_clocks?gpu_ids=0&min_clock_mhz=900&max_clock_mhz=1200&block=true",
                 "reset_gpu_locked_clocks?gpu_ids=0&block=true", "reset_locked_clocks?gpu_ids=0%2C1&block=true"):
        assert _req(s, "POST", "/gpu/" + path)[0] == 200, path
    # ZeusdNVIDIAGPU of older packages: the GPU in the path, the fields as a JSON body.
    st, _ = _req(s, "POST", "/gpu/1/set_power_limit", json.dumps({"power_limit_mw": 190000, "block": True}),
                 {"Content-Type": "application/json"})
    assert st == 200
    assert "nvmlDeviceSetPowerManagementLimit 1 190000 -> 0" in _setter_lines(daemon["log"])
    # ZeusdClient._check turns any other status into an error with the body's text.
    st, body = _req(s, "POST", "/gpu/set_power_limit?gpu_ids=0&power_limit_mw=1&block=true")
    assert st == 400 and "outside the allowed range" in body


class OriginalStreamParser:
    """The stream read as the original's PowerStreamingClient reads it (ml-energy/zeus master at
    75a8b939, zeus/monitor/power_streaming.py): the text is cut at blank lines; in each event, every
    line that starts with "data: " is JSON; a GPU event needs gpu_id, power_mw and timestamp_ms, a
    CPU event cpu_id, cpu_mw and timestamp_ms (dram_mw may be null); powers become W, times s. An
    event the original would log as malformed or invalid is kept in `malformed`."""

    def __init__(self, sock, path):
        self.conn = Uds(sock)
        self.conn.request("GET", path)
        self.resp = self.conn.getresponse()
        self.buf = ""
        self.gpu = {}  # id -> [(timestamp_s, W)]
        self.cpu = {}  # id -> [(timestamp_s, cpu W, dram W or None)]
        self.malformed = []
        self.events = 0

    def close(self):
        self.conn.close()

    def _take(self, data):
        if "gpu_id" in data or "cpu_id" not in data:
            ids = (data.get("gpu_id"), data.get("power_mw"), data.get("timestamp_ms"))
            if None in ids:
                self.malformed.append(data)
                return
            self.gpu.setdefault(int(ids[0]), []).append((float(ids[2]) / 1000.0, float(ids[1]) / 1000.0))
        else:
            ids = (data.get("cpu_id"), data.get("cpu_mw"), data.get("timestamp_ms"))
            if None in ids:
                self.malformed.append(data)
                return
            dram = data.get("dram_mw")
            self.cpu.setdefault(int(ids[0]), []).append(
                (float(ids[2]) / 1000.0, float(ids[1]) / 1000.0, None if dram is None else float(dram) / 1000.0))

    def until(self, done, timeout=10.0):
        """Reads events until done(self) holds; fails after timeout seconds."""
        deadline = time.time() + timeout
        while not done(self):
            assert time.time() < deadline, (self.gpu, self.cpu, self.malformed)
            self.buf += self.resp.read1(4096).decode()
            while "\n\n" in self.buf:
                event, self.buf = self.buf.split("\n\n", 1)
                for line in event.strip().split("\n"):
                    if line.startswith("data: "):
                        self.events += 1
                        try:
                            self._take(json.loads(line[len("data: "):]))
                        except (ValueError, TypeError):
                            self.malformed.append(line)


def test_power_streaming_client_parses_the_per_gpu_stream(daemon):
    s = daemon["sock"]
    _, body = _req(s, "GET", "/gpu/get_power")
    idle = {int(k): v / 1000.0 for k, v in json.loads(body)["power_mw"].items()}
    t0 = time.time()
    st = OriginalStreamParser(s, "/gpu/stream_power")
    assert st.resp.status == 200 and st.resp.getheader("Content-Type") == "text/event-stream"
    # Each GPU's reading first, one event each.
    st.until(lambda p: set(p.gpu) == {0, 1})
    assert {g: v[-1][1] for g, v in st.gpu.items()} == idle and st.events == 2
    # Busy GPUs draw more; then GPU 1 at 150 W draws at most that, GPU 0 (300 W) more.
    daemon["busy"].write_text("")
    st.until(lambda p: all(v[-1][1] > idle[g] for g, v in p.gpu.items()))
    assert _req(s, "POST", "/gpu/set_power_limit?gpu_ids=1&power_limit_mw=150000&block=true")[0] == 200
    st.until(lambda p: p.gpu[1][-1][1] <= 150.0)
    st.until(lambda p: p.gpu[0][-1][1] > 150.0)
    daemon["busy"].unlink()
    st.until(lambda p: all(v[-1][1] == idle[g] for g, v in p.gpu.items()))
    st.close()
    assert not st.malformed, st.malformed
    for g, v in st.gpu.items():
        times = [t for t, _ in v]
        assert times == sorted(times) and t0 - 0.01 <= times[0] and times[-1] <= time.time() + 0.01, (g, v)
        # An event only when the reading changed, as zeusd sends them.
        assert all(a[1] != b[1] for a, b in zip(v, v[1:])), (g, v)


def test_stream_gpu_ids_choose_and_unknown_ids_are_400_as_zeusd(daemon):
    s = daemon["sock"]
    st = OriginalStreamParser(s, "/gpu/stream_power?gpu_ids=1")
    st.until(lambda p: 1 in p.gpu)
    daemon["busy"].write_text("")  # both GPUs change; this stream carries GPU 1 alone
    st.until(lambda p: len(p.gpu[1]) >= 2)
    st.close()
    assert set(st.gpu) == {1} and not st.malformed
    st, body = _req(s, "GET", "/gpu/stream_power?gpu_ids=0,3")
    assert (st, json.loads(body)) == (400, {"error": "Unknown GPU indices: [3]. Available: [0, 1]"})
    st, body = _req(s, "GET", "/gpu/stream_power?gpu_ids=")
    assert (st, json.loads(body)) == (400, {"error": "gpu_ids must contain at least one GPU index"})


def test_power_streaming_client_parses_the_per_cpu_stream(daemon_rapl, tmp_path):
    st = OriginalStreamParser(daemon_rapl["sock"], "/cpu/stream_power")
    st.until(lambda p: set(p.cpu) == {0, 1})
    assert [v[-1][1:] for _, v in sorted(st.cpu.items())] == [(0.0, 0.0), (0.0, None)]
    # Package 0 draws 1 J at once (written in place: the daemon keeps the file open); its power
    # shows, then 0 W again once the counter stands still.
    with open(tmp_path / "powercap" / "intel-rapl:0" / "energy_uj", "r+") as f:
        f.write("124456789\n")
    st.until(lambda p: any(r[1] > 0 for r in p.cpu[0]) and p.cpu[0][-1][1] == 0.0)
    st.close()
    assert not st.malformed, st.malformed
    peak = max(r[1] for r in st.cpu[0])
    assert 1.0 <= peak <= 200.0, st.cpu[0]  # 1 J over a period of 5 ms to 1 s (10 Hz: about 10 W)
    assert len(st.cpu[1]) == 1, st.cpu[1]  # package 1 stood still: its first reading only