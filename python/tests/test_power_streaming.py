"""zeusc.monitor.power_streaming.PowerStreamingClient and zeusc.utils.zeusd against real
`zeus daemon serve` (fake NVML, two simulated GPUs made busy so that their power moves): a Unix
socket daemon with two fake RAPL packages, a TCP daemon on port 0 with JWT tokens, one daemon
killed and restarted while the other streams on. The h100 profile adds its noise to each reading,
so that every GPU sends an event every ~100 ms."""
from __future__ import annotations

import asyncio
import base64
import os
import signal
import subprocess
import time

import pytest

import zeusc_testutil as tu
from zeusc.device.exception import ZeusdError
from zeusc.monitor.power_streaming import CpuPowerReading, PowerStreamingClient
from zeusc.utils.zeusd import (ZeusdAuthError, ZeusdCapabilityError, ZeusdClient, ZeusdConfig, ZeusdConnectionError,
                               require_capabilities)

TOKEN_USER = "carol"


def _cli():
    p = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    if not os.path.exists(p):
        pytest.skip("the zeus CLI (build/zeus) is not built; set ZEUSC_TEST_ZEUS_CLI")
    if subprocess.run([p, "daemon", "--help"], capture_output=True).returncode != 0:
        pytest.skip("this zeus was built without the daemon (ZEUS_WITH_DAEMON=OFF)")
    return p


def _fake_rapl(root):
    """Two packages whose counters stand still: 0 with a DRAM zone, 1 without."""
    for zone, name in (("intel-rapl:0", "package-0"), ("intel-rapl:0:0", "dram"), ("intel-rapl:1", "package-1")):
        (root / zone).mkdir(parents=True)
        (root / zone / "energy_uj").write_text("1000\n")
        (root / zone / "name").write_text(name + "\n")
        (root / zone / "max_energy_range_uj").write_text("262143328850\n")


class Daemon:
    def __init__(self, tmp_path, name, args, env=None):
        fake = tu.fake_nvml_path()
        if not fake:
            pytest.skip("the fake NVML is not built; set ZEUSC_TEST_FAKE_NVML")
        self.tmp, self.name, self.args = tmp_path, name, args
        (tmp_path / "busy").write_text("")
        self.env = dict(os.environ, ZEUS_NVML_LIBRARY=fake, ZEUS_SIM_GPUS="2", FAKE_NVML_BUSY_FILE=str(tmp_path / "busy"),
                        ZEUS_SIM_HARDWARE="h100", ZEUS_SIM_CLOCK="wall",
                        **(env or {}))
        for k in ("ZEUS_GPU_BACKEND", "ZEUSD_SOCK_PATH", "ZEUSD_HOST_PORT", "ZEUSD_TOKEN"):
            self.env.pop(k, None)
        self.start()

    def start(self):
        self.err = self.tmp / f"{self.name}.err"
        self.errf = open(self.err, "w")
        self.proc = subprocess.Popen([_cli(), "daemon", "serve", "--no-state-file", "--log-level", "info", *self.args],
                                     env=self.env, stderr=self.errf)
        deadline = time.time() + 10
        while "ready" not in self.err.read_text():
            assert self.proc.poll() is None and time.time() < deadline, self.err.read_text()
            time.sleep(0.05)
        self.port = None
        for line in self.err.read_text().splitlines():
            if "TCP port" in line:
                self.port = int(line.rsplit(" ", 1)[1])

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.errf.close()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.errf.close()


@pytest.fixture
def uds_daemon(tmp_path):
    _fake_rapl(tmp_path / "powercap")
    d = Daemon(tmp_path, "uds", ["--socket-path", str(tmp_path / "a.sock")], {"ZEUS_RAPL_ROOT": str(tmp_path / "powercap")})
    d.sock = str(tmp_path / "a.sock")
    yield d
    d.stop()


@pytest.fixture
def tcp_daemon(tmp_path):
    key = tmp_path / "key"
    key.write_text(base64.b64encode(os.urandom(32)).decode())
    key.chmod(0o600)
    tok = subprocess.run([_cli(), "daemon", "token", "issue", "--signing-key-path", str(key), "--user", TOKEN_USER,
                          "--scope", "gpu-read", "--expires", "1h"], capture_output=True, text=True, check=True)
    d = Daemon(tmp_path, "tcp", ["--mode", "tcp", "--tcp-bind-address", "127.0.0.1:0", "--signing-key-path", str(key)])
    d.token = tok.stdout.strip()
    yield d
    d.stop()


def _wait_for(client, pred, timeout=5.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        snap = client.get_power()
        if pred(snap):
            return snap
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {client.get_power()}")


def test_two_daemons_uds_and_tcp_with_token_stream_into_one_snapshot(uds_daemon, tcp_daemon):
    a, b = uds_daemon.sock, f"127.0.0.1:{tcp_daemon.port}"
    client = PowerStreamingClient(servers=[ZeusdConfig.uds(a),
                                           ZeusdConfig.tcp("127.0.0.1", tcp_daemon.port, token=tcp_daemon.token,
                                                           gpu_indices=[1])])
    try:
        snap = _wait_for(client, lambda s: a in s and b in s and len(s[a].gpu_power_w) == 2 and len(s[a].cpu_power_w) == 2
                         and 1 in s[b].gpu_power_w)
        assert set(snap) == {a, b}
        assert sorted(snap[b].gpu_power_w) == [1]  # gpu_indices=[1]
        # the daemon's own reading: the busy simulated GPU draws far more than idle (30 W)
        direct = ZeusdClient(ZeusdConfig.uds(a)).get_gpu_power()
        for g in (0, 1):
            assert snap[a].gpu_power_w[g] > 60
            assert abs(snap[a].gpu_power_w[g] - direct.power_mw[g] / 1000) < 0.2 * direct.power_mw[g] / 1000
        # RAPL counters standing still: 0 W, package 0 with DRAM, package 1 without
        assert snap[a].cpu_power_w == {0: CpuPowerReading(cpu_w=0.0, dram_w=0.0), 1: CpuPowerReading(cpu_w=0.0, dram_w=None)}
        # timestamps on this machine's clock
        for r in snap.values():
            assert abs(r.timestamp_s - time.time()) < 2.0
        # the blocking iterator yields fresh snapshots
        n = 0
        for s in client:
            n += 1
            if n == 3:
                break
        assert n == 3
        # the token reached the daemon (the stream answered 200 with it), and shows nowhere
        assert tcp_daemon.token not in repr(ZeusdConfig.tcp("h", 1, token=tcp_daemon.token))
    finally:
        t0 = time.time()
        client.stop()
        assert time.time() - t0 < 2.0
    assert tcp_daemon.token not in tcp_daemon.err.read_text()


def test_a_killed_daemon_resumes_after_restart_while_the_other_streams_on(tmp_path, uds_daemon):
    other = Daemon(tmp_path, "other", ["--socket-path", str(tmp_path / "b.sock")])
    b = str(tmp_path / "b.sock")
    a = uds_daemon.sock
    client = PowerStreamingClient(servers=[ZeusdConfig.uds(a, cpu_indices=[]), ZeusdConfig.uds(b)],
                                  reconnect_delay_s=0.1)
    try:
        _wait_for(client, lambda s: a in s and b in s)
        uds_daemon.kill()
        t_kill = time.time()
        time.sleep(1.0)
        snap = client.get_power()
        assert snap[a].timestamp_s < t_kill + 0.2  # nothing new from the dead one
        assert snap[b].timestamp_s > t_kill + 0.5  # the other never stopped
        uds_daemon.start()
        t_restart = time.time()
        snap = _wait_for(client, lambda s: s[a].timestamp_s > t_restart, timeout=5.0)
        assert sorted(snap[a].gpu_power_w) == [0, 1]
        assert snap[a].cpu_power_w == {}  # cpu_indices=[]
    finally:
        client.stop()
        other.stop()


def test_async_iterator_yields_and_stops(uds_daemon):
    client = PowerStreamingClient(servers=[ZeusdConfig.uds(uds_daemon.sock)])

    async def consume():
        got = []
        async for s in client:
            got.append(s)
            if len(got) == 2:
                client.stop()
        return got

    got = asyncio.run(asyncio.wait_for(consume(), 10))
    assert len(got) >= 2 and uds_daemon.sock in got[-1]


def test_explicit_indices_must_exist_and_endpoints_differ(uds_daemon):
    with pytest.raises(ValueError, match=r"GPU indices \[5\] requested for .* but only \[0, 1\] are available"):
        PowerStreamingClient(servers=[ZeusdConfig.uds(uds_daemon.sock, gpu_indices=[0, 5])])
    with pytest.raises(ValueError, match="Duplicate server endpoints"):
        PowerStreamingClient(servers=[ZeusdConfig.uds(uds_daemon.sock), ZeusdConfig.uds(uds_daemon.sock)])
    with pytest.raises(ZeusdConnectionError, match="Cannot reach Zeusd at /nonexistent.sock"):
        PowerStreamingClient(servers=[ZeusdConfig.uds("/nonexistent.sock")])


def test_token_without_scope_skips_or_refuses_the_stream(tcp_daemon):
    port = tcp_daemon.port
    # no token: GPUs asked for explicitly are refused, naming the scope
    with pytest.raises(ZeusdCapabilityError, match="lacks required scope 'gpu-read'"):
        PowerStreamingClient(servers=[ZeusdConfig.tcp("127.0.0.1", port, gpu_indices=[0])])
    # no token: nothing readable, nothing streamed (the original's behaviour), and no error
    client = PowerStreamingClient(servers=[ZeusdConfig.tcp("127.0.0.1", port)])
    time.sleep(0.3)
    assert client.get_power() == {}
    client.stop()


def test_zeusd_client_reads_and_controls_the_daemon(uds_daemon, tcp_daemon, monkeypatch):
    c = ZeusdClient(ZeusdConfig.uds(uds_daemon.sock))
    assert c.endpoint == uds_daemon.sock
    assert c.gpu_ids == [0, 1] and c.cpu_ids == [0, 1] and c.dram_available == [True, False]
    assert c.can_read_gpu and c.can_control_gpu and c.can_read_cpu and not c.auth_required
    assert abs(c.get_time() - time.time()) < 1.0
    c.set_power_limit([1], 200000)
    assert c.get_power_limit([0, 1])[1] == 200000
    lo, hi = c.get_power_limit_constraints([0])[0]
    assert lo < hi
    with pytest.raises(ZeusdError, match="set_power_limit"):
        c.set_power_limit([0], 1)
    cpu = c.get_cpu_power()
    assert cpu.power_mw[1].dram_mw is None
    assert set(c.get_gpu_energy([0, 1])) == {0, 1}
    # from the environment, as the original
    monkeypatch.setenv("ZEUSD_SOCK_PATH", uds_daemon.sock)
    monkeypatch.setenv("ZEUSD_TOKEN", "t0k")
    cfg = ZeusdConfig.from_env()
    assert cfg.socket_path == uds_daemon.sock and cfg.token == "t0k"
    assert ZeusdClient().gpu_ids == [0, 1]
    monkeypatch.delenv("ZEUSD_SOCK_PATH")
    monkeypatch.setenv("ZEUSD_HOST_PORT", f"127.0.0.1:{tcp_daemon.port}")
    assert ZeusdConfig.from_env().host_port == f"127.0.0.1:{tcp_daemon.port}"
    # the TCP daemon wants a token: whoami gives its scopes
    t = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", tcp_daemon.port, token=tcp_daemon.token))
    assert t.auth_required and t.granted_scopes == frozenset({"gpu-read"})
    assert t.can_read_gpu and not t.can_control_gpu
    require_capabilities(t, read_gpu=True, gpu_ids=[0])
    with pytest.raises(ZeusdCapabilityError, match="lacks required scope 'gpu-control'"):
        require_capabilities(t, control_gpu=True)
    anon = ZeusdClient(ZeusdConfig.tcp("127.0.0.1", tcp_daemon.port))
    with pytest.raises(ZeusdAuthError, match="no token was provided"):
        require_capabilities(anon, read_gpu=True)
