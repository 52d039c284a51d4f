"""zeusc.optimizer.pipeline_frequency.PipelineFrequencyOptimizer over libzeus's Perseus client,
against a real `zeus pfo-server` on loopback and fake-NVML GPUs. Skips with "C Perseus client
(zeus/pfo_client.h) not in this libzeus" when the loaded library lacks it."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import types

import pytest

import zeusc_testutil as tu
from zeusc import _lib

SET_CLOCKS = "nvmlDeviceSetGpuLockedClocks"


@pytest.fixture
def pfo_lib(lib):
    if not hasattr(lib, "zeus_pfo_optimizer_open"):
        pytest.skip(_lib.PFO_MISSING)
    return lib


def _cli():
    p = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
    return p if os.path.exists(p) else None


class Server:
    def __init__(self, tmp_path, *args):
        cli = _cli()
        if not cli:
            pytest.skip("the zeus CLI (build/zeus) is not built; set ZEUSC_TEST_ZEUS_CLI")
        self.out = tmp_path / "srv.out"
        self.err = tmp_path / "srv.err"
        self.proc = subprocess.Popen([cli, "pfo-server", "--port", "0", "--log-level", "warn", *args],
                                     stdout=open(self.out, "w"), stderr=open(self.err, "w"))
        for _ in range(200):
            text = self.out.read_text() if self.out.exists() else ""
            if "port" in text:
                self.url = "http://127.0.0.1:" + text.split()[-1]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.025)
        self.stop()
        raise AssertionError(f"zeus pfo-server did not start: {self.err.read_text()}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture
def server(pfo_lib, tmp_path):
    started = []

    def start(*args):
        s = Server(tmp_path, *args)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


@pytest.fixture
def gpus(fake, monkeypatch, tmp_path):
    log = str(tmp_path / "nvml.log")
    monkeypatch.setenv("FAKE_NVML_LOG", log)
    monkeypatch.setenv("ZEUS_PFO_RETRIES", "1")
    monkeypatch.setenv("ZEUS_PFO_RETRY_BACKOFF", "0.05")
    monkeypatch.setenv("ZEUS_PFO_SCHEDULE_TIMEOUT", "60")

    def open_(n=1):
        monkeypatch.setenv("ZEUS_SIM_GPUS", str(n))
        return fake.devices(all_devices=True)
    open_.log = log
    return open_


def clock_calls(log):
    return tu.read_setter_log(log, SET_CLOCKS)


def one_rank(url, dev, **kw):
    from zeusc.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
    kw.setdefault("pipe_schedule", ["forward", "backward"])
    kw.setdefault("iters_per_round", 2)
    return PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, url, devices=dev, **kw)


def run_iteration(opt, fake, gpu=0, order=("forward", "backward"), units=None):
    units = units or {"forward": 1.0, "backward": 2.0}
    opt.on_step_begin()
    for name in order:
        opt.on_instruction_begin(name)
        opt.wait_for_clock(10)  # simulated work takes no real time: let the clock change land first
        fake.work(gpu, units[name])
        opt.on_instruction_end(name)
    opt.on_step_end()


def test_all_max_frequency_locks_the_top_clock_and_measures_rounds(server, gpus, fake):
    srv = server("--scheduler", "AllMaxFrequency")
    dev = gpus()
    opt = one_rank(srv.url, dev, job_metadata="py test")
    assert "+dp1+pp1+tp1+AllMaxFrequency+py_test" in opt.job_id
    top = opt.frequencies[0]
    assert opt.frequencies == sorted(opt.frequencies, reverse=True)
    assert opt.schedule == [("forward", top), ("backward", top)]
    # the original's public attributes
    assert (opt.rank, opt.dp_rank, opt.pp_rank, opt.tp_rank, opt.device_id) == (0, 0, 0, 0, 0)
    assert (opt.dp_degree, opt.pp_degree, opt.tp_degree, opt.world_size) == (1, 1, 1, 1)
    assert opt.server_url == srv.url and opt.job_metadata == "py test"
    assert opt.freq_schedule == opt.schedule and list(opt.freq_schedule_iter) == opt.schedule
    assert opt.frequency_controller.current_frequency == top
    assert opt.last_round.round == -1
    for _ in range(4):
        run_iteration(opt, fake)
    r = opt.last_round
    assert (r.round, r.iterations) == (1, 2)
    # 3 units of work at the top clock: the simulated GPU's 0.05 s per unit
    assert r.iter_time == pytest.approx(0.15, rel=1e-6)
    assert r.iter_energy > 0
    assert opt.current_frequency == top and not opt.detached
    assert clock_calls(gpus.log) == [(0, top)]  # locked once at start, never changed
    opt.close()
    lines = open(gpus.log).read()
    assert "nvmlDeviceResetGpuLockedClocks 0 -> 0" in lines
    opt.close()
    with pytest.raises(ValueError, match="closed"):
        opt.on_step_begin()
    dev.close()


def test_point_solution_sets_each_instructions_frequency(server, gpus, fake, tmp_path):
    plan = tmp_path / "freqs_pipeline_00001.py"
    plan.write_text('[[("forward", 1200), ("backward", 1500), ("forward", 990), ("backward", 1740)]]\n')
    srv = server("--scheduler", "PointSolution", "--scheduler-args", json.dumps({"solution_path": str(plan)}))
    dev = gpus()
    order = ("forward", "backward", "forward", "backward")
    opt = one_rank(srv.url, dev, pipe_schedule=list(order))
    assert opt.schedule == [("forward", 1200), ("backward", 1500), ("forward", 990), ("backward", 1740)]
    for _ in range(2):
        run_iteration(opt, fake, order=order)
    calls = [mhz for _, mhz in clock_calls(gpus.log)]
    assert calls[0] == opt.frequencies[0]  # the start-up lock
    assert calls[1:] == [1200, 1500, 990, 1740] * 2
    # slower clocks than the top one: the iteration takes longer than 6 units at full speed
    assert opt.last_round.iter_time > 6 * 0.05
    opt.close()
    dev.close()


def test_hook_errors_are_value_and_runtime_errors(server, gpus, fake):
    srv = server("--scheduler", "AllMaxFrequency")
    dev = gpus()
    opt = one_rank(srv.url, dev)
    opt.on_step_begin()
    with pytest.raises(ValueError, match="expects 'forward' as instruction 1 of 2") as ei:
        opt.on_instruction_begin("backward")
    assert ei.value.errname == "ZEUS_EINVAL"
    opt.on_step_end()  # a failed iteration is dropped, not measured
    opt.on_step_begin()
    opt.on_instruction_begin("forward")
    opt.on_instruction_end("forward")
    with pytest.raises(RuntimeError, match="next expected is 'backward'") as ei:
        opt.on_step_end()
    assert ei.value.errname == "ZEUS_ESTATE"
    with pytest.raises(TypeError):
        opt.on_instruction_begin(3)
    with pytest.raises(ValueError, match="non-empty"):
        opt.on_instruction_begin("")
    opt.close()
    dev.close()


def test_close_while_another_thread_drives_it(server, gpus, fake):
    """close() on one thread while another runs iterations (rounds reported to the server among
    them): the call in progress finishes, the next raises ValueError ("closed"), nothing crashes.
    Before the guard close() freed the optimizer under a hook that had released the GIL."""
    srv = server("--scheduler", "AllMaxFrequency")
    dev = gpus()
    for k in range(30):
        opt = one_rank(srv.url, dev)
        errs, done = [], []
        running = threading.Event()

        def drive():
            try:
                while True:
                    opt.on_step_begin()
                    for name in ("forward", "backward"):
                        opt.on_instruction_begin(name)
                        fake.work(0, 0.01)
                        opt.on_instruction_end(name)
                    opt.on_step_end()
                    opt.last_round, opt.detached, opt.frequency_controller.current_frequency
                    done.append(1)
                    running.set()
            except ValueError as e:
                if "closed" not in str(e):
                    errs.append(repr(e))
            except Exception as e:  # noqa: BLE001
                errs.append(repr(e))

        t = threading.Thread(target=drive)
        t.start()
        assert running.wait(30)
        time.sleep(0.0005 * (k % 7))
        opt.close()
        t.join(30)
        assert not t.is_alive(), "a hook did not return after close()"
        assert not errs, errs
        with pytest.raises(ValueError, match="closed"):
            opt.on_instruction_begin("forward")
        with pytest.raises(ValueError, match="closed"):
            opt.on_step_end()
    dev.close()


def test_bad_arguments_and_an_unreachable_server(pfo_lib, gpus):
    from zeusc.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
    dev = gpus()
    with pytest.raises(ValueError, match="world_size"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 2, 1, 3, "http://127.0.0.1:9", devices=dev)
    with pytest.raises(TypeError):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1.0, "http://127.0.0.1:9", devices=dev)
    with pytest.raises(TypeError):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, None, devices=dev)
    with pytest.raises(ValueError, match="iters_per_round"):
        one_rank("http://127.0.0.1:9", dev, iters_per_round=0)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(ConnectionError, match="is the server running") as ei:
        one_rank(f"http://127.0.0.1:{port}", dev, retries=0, connect_timeout=1)
    assert ei.value.errname == "ZEUS_ENET"
    # nothing stays changed on the GPU after a failed start
    assert dev.get_power_limit(0) == dev.power_limit_constraints(0)[2]
    dev.close()


def test_missing_client_says_so(monkeypatch):
    from zeusc.optimizer.pipeline_frequency import PipelineFrequencyOptimizer

    class NoPfo:
        def __getattr__(self, name):
            if name.startswith("zeus_pfo_"):
                raise AttributeError(name)
            return getattr(_lib.lib(), name)
    monkeypatch.setattr(_lib, "_lib", NoPfo())
    with pytest.raises(RuntimeError, match="C Perseus client .zeus/pfo_client.h. not in this libzeus"):
        PipelineFrequencyOptimizer(0, 0, 0, 0, 0, 1, 1, 1, 1, "http://127.0.0.1:9")


def test_torch_synchronize_before_each_instruction(server, gpus, fake, monkeypatch):
    srv = server("--scheduler", "AllMaxFrequency")
    dev = gpus(2)
    calls = []
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: True, synchronize=lambda d=None: calls.append(d))
    monkeypatch.setitem(sys.modules, "torch", torch)
    from zeusc.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
    opt = PipelineFrequencyOptimizer(0, 0, 0, 0, 1, 1, 1, 1, 1, srv.url, devices=dev,
                                     pipe_schedule=["forward", "backward"], iters_per_round=1)
    run_iteration(opt, fake, gpu=1)
    assert calls == [1, 1]
    torch.cuda.synchronize = lambda d=None: (_ for _ in ()).throw(RuntimeError("CUDA error: device lost"))
    opt.on_step_begin()
    with pytest.raises(RuntimeError, match="device lost"):
        opt.on_instruction_begin("forward")
    opt.close()
    dev.close()


class _ThreadDist:
    """A stand-in torch.distributed for ranks that are threads: each thread's rank comes from a
    thread-local, and all_reduce/broadcast meet at a barrier."""

    def __init__(self, world):
        self.world = world
        self.local = threading.local()
        self.barrier = threading.Barrier(world)
        self.slots = [None] * world
        self.ReduceOp = types.SimpleNamespace(SUM="SUM", MAX="MAX")
        self.calls = []

    def is_available(self):
        return True

    def is_initialized(self):
        return True

    def get_rank(self):
        return self.local.rank

    def get_world_size(self):
        return self.world

    def get_backend(self):
        return "gloo"

    def _exchange(self, values):
        r = self.local.rank
        self.slots[r] = list(values)
        self.barrier.wait()
        got = [list(s) for s in self.slots]
        self.barrier.wait()
        return got

    def all_reduce(self, t, op):
        self.calls.append(("all_reduce", self.local.rank, op))
        got = self._exchange(t.values)
        t.values = [sum(col) if op == "SUM" else max(col) for col in zip(*got)]

    def broadcast(self, t, src):
        self.calls.append(("broadcast", self.local.rank, src))
        got = self._exchange(t.values)
        t.values = got[src]


def test_two_ranks_agree_on_the_job_through_torch_distributed(server, gpus, fake, monkeypatch):
    from test_collective import _Tensor
    srv = server("--scheduler", "AllMaxFrequency")
    dev = gpus(2)
    dist = _ThreadDist(2)
    torch = types.ModuleType("torch")
    torch.float64, torch.uint8 = "float64", "uint8"
    torch.tensor = lambda values, dtype=None, device=None: _Tensor(values, dtype, device)
    torch.cuda = types.SimpleNamespace(is_available=lambda: False)
    torch.distributed = dist
    monkeypatch.setitem(sys.modules, "torch", torch)
    from zeusc.optimizer.pipeline_frequency import PipelineFrequencyOptimizer
    results, errors = {}, []

    def rank(r):
        try:
            dist.local.rank = r
            opt = PipelineFrequencyOptimizer(r, 0, r, 0, r, 1, 2, 1, 2, srv.url, devices=dev,
                                             pipe_schedule=["forward", "backward"], iters_per_round=2)
            for _ in range(4):
                opt.on_step_begin()
                for name in ("forward", "backward"):
                    opt.on_instruction_begin(name)
                    opt.on_instruction_end(name)
                opt.on_step_end()
            results[r] = (opt.job_id, opt.schedule, opt.last_round.round)
            opt.close()
        except Exception as e:  # noqa: BLE001
            errors.append(e)
            dist.barrier.abort()
    ts = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    assert results[0][0] == results[1][0] and "+dp1+pp2+tp1+" in results[0][0]
    assert results[0][2] == results[1][2] == 1
    assert ("broadcast", 1, 0) in dist.calls  # rank 1 received the job id from rank 0
    dev.close()
