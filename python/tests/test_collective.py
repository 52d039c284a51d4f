"""torch.distributed as libzeus's collective (zeus/collective.h).

Without torch on the machine, a stand-in torch module (below) plays a second rank: its
all_reduce adds or maxes in that rank's values, its broadcast hands out that rank's bytes. The
C helpers zeus_collective_allreduce/broadcast and the power-limit optimizer call the binding's
callbacks through it. With torch installed, the last test runs two real processes over gloo.
"""
from __future__ import annotations

import ctypes
import os
import sys
import textwrap
import types

import pytest

import zeusc_testutil as tu
from zeusc import _lib
from zeusc.utils.framework import TorchCollective, torch_distributed


class _Tensor:
    def __init__(self, values, dtype, device):
        self.values, self.dtype, self.device = list(values), dtype, device

    def tolist(self):
        return list(self.values)


def make_torch(world_size=2, rank=0, other=None, fail=None, backend="gloo"):
    """A stand-in torch whose distributed group has a second rank contributing `other(values)`."""
    calls = []
    torch = types.ModuleType("torch")
    torch.float64, torch.uint8 = "float64", "uint8"
    torch.tensor = lambda values, dtype=None, device=None: _Tensor(values, dtype, device)
    torch.device = lambda kind, index=None: f"{kind}:{index}"
    torch.cuda = types.SimpleNamespace(current_device=lambda: 3, is_available=lambda: False)
    dist = types.ModuleType("torch.distributed")
    dist.ReduceOp = types.SimpleNamespace(SUM="SUM", MAX="MAX")
    dist.is_available = lambda: True
    dist.is_initialized = lambda: True
    dist.get_rank = lambda: rank
    dist.get_world_size = lambda: world_size
    dist.get_backend = lambda: backend

    def all_reduce(t, op):
        calls.append(("all_reduce", op, list(t.values), t.dtype, t.device))
        if fail:
            raise fail
        theirs = other(t.values) if other else t.values
        t.values = [a + b if op == "SUM" else max(a, b) for a, b in zip(t.values, theirs)]

    def broadcast(t, src):
        calls.append(("broadcast", src, bytes(t.values), t.dtype, t.device))
        if fail:
            raise fail
        if src != rank:
            t.values = list(b"from rank %d" % src)[: len(t.values)] + [0] * max(0, len(t.values) - 11)
    dist.all_reduce, dist.broadcast = all_reduce, broadcast
    torch.distributed = dist
    return torch, calls


@pytest.fixture
def stand_in(monkeypatch):
    def install(**kw):
        torch, calls = make_torch(**kw)
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setitem(sys.modules, "torch.distributed", torch.distributed)
        return calls
    return install


def test_no_collective_without_torch_or_without_a_process_group(monkeypatch):
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    assert torch_distributed() is None
    torch, _ = make_torch()
    torch.distributed.is_initialized = lambda: False
    monkeypatch.setitem(sys.modules, "torch", torch)
    assert torch_distributed() is None
    with pytest.raises(RuntimeError, match="not initialised"):
        TorchCollective()


def test_allreduce_sum_and_max_through_the_c_helpers(lib, stand_in):
    calls = stand_in(other=lambda v: [x * 10 for x in v])
    c = TorchCollective()
    assert (c.rank, c.world_size) == (0, 2)
    assert lib.zeus_collective_check(ctypes.byref(c.struct)) == 0
    vals = (ctypes.c_double * 3)(1.0, 2.5, -4.0)
    assert lib.zeus_collective_allreduce(ctypes.byref(c.struct), vals, 3, _lib.ZEUS_REDUCE_SUM) == 0
    assert list(vals) == [11.0, 27.5, -44.0]
    assert lib.zeus_collective_allreduce(ctypes.byref(c.struct), vals, 3, _lib.ZEUS_REDUCE_MAX) == 0
    assert list(vals) == [110.0, 275.0, -44.0]
    assert [x[:2] for x in calls] == [("all_reduce", "SUM"), ("all_reduce", "MAX")]
    assert calls[0][3:] == ("float64", "cpu")


def test_nccl_tensors_live_on_the_current_cuda_device(lib, stand_in):
    calls = stand_in(backend="nccl")
    c = TorchCollective()
    vals = (ctypes.c_double * 1)(1.0)
    assert lib.zeus_collective_allreduce(ctypes.byref(c.struct), vals, 1, _lib.ZEUS_REDUCE_SUM) == 0
    assert calls[0][4] == "cuda:3"


def test_broadcast_copies_the_roots_bytes(lib, stand_in):
    calls = stand_in(rank=1)
    c = TorchCollective()
    buf = ctypes.create_string_buffer(b"mine, rank 1....", 16)
    assert lib.zeus_collective_broadcast(ctypes.byref(c.struct), buf, 16, 0) == 0
    assert buf.raw == b"from rank 0" + bytes(5)
    assert calls[0][:3] == ("broadcast", 0, b"mine, rank 1....")
    # the root keeps its bytes
    buf = ctypes.create_string_buffer(b"abc", 3)
    assert lib.zeus_collective_broadcast(ctypes.byref(c.struct), buf, 3, 1) == 0
    assert buf.raw == b"abc"


def test_a_failure_in_torch_becomes_the_c_error(lib, stand_in):
    stand_in(fail=RuntimeError("NCCL timeout on rank 1"))
    c = TorchCollective()
    vals = (ctypes.c_double * 1)(1.0)
    rc = lib.zeus_collective_allreduce(ctypes.byref(c.struct), vals, 1, _lib.ZEUS_REDUCE_SUM)
    assert rc == _lib.ZEUS_EIO
    assert "torch.distributed all_reduce failed: RuntimeError: NCCL timeout on rank 1" in lib.zeus_errmsg().decode()
    assert isinstance(c.take_pending(), RuntimeError) and c.take_pending() is None


def test_optimizer_sums_energy_and_maxes_time_across_ranks(plo_lib, fake, monkeypatch, tmp_path, plo_profiles, stand_in):
    """The optimizer picks up torch.distributed by itself. The stand-in's other rank is this
    rank's twin (same GPUs, same measurements), so every energy is summed to twice this rank's
    and every time maxed to this rank's."""
    prof = tu.Profile(plo_profiles[0])
    monkeypatch.setenv("ZEUS_SIM_MODEL_FILE", prof.path)
    monkeypatch.setenv("ZEUS_SIM_UNITS_PER_ROW", "40")
    calls = stand_in(other=lambda v: list(v))
    from zeusc.monitor import ZeusMonitor
    from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer, PLOState
    with fake.devices(all_devices=True) as dev:
        mon = ZeusMonitor(devices=dev, cpu_indices=[])
        opt = GlobalPowerLimitOptimizer(mon, warmup_steps=2)
        assert opt._collective is not None
        for _ in range(20000):
            if opt.state_kind == PLOState.DONE:
                break
            opt.on_step_begin()
            fake.work_all(prof.ngpus, 1.0)
        assert opt.state_kind == PLOState.DONE
        ops = {c[1] for c in calls if c[0] == "all_reduce"}
        assert "SUM" in ops and "MAX" in ops
        for m, (w, e, t) in zip(opt.measurements, prof.measurements()):
            assert m.power_limit == w
            assert m.energy == pytest.approx(2 * e, abs=0.01)
            assert m.time == pytest.approx(t, rel=1e-9)
        # the default ZeusCost(0.5) counts the GPUs of both ranks: 2 x energy, 2 x max power
        want = tu.optimum_candidates([(w, 2 * e, t) for w, e, t in prof.measurements()], "zeus_cost", eta=0.5,
                                     world_size=2 * prof.ngpus)
        assert opt.optimal_power_limit // 1000 in want
        opt.close()
        mon.close()


@pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="torch is not installed on this machine")
def test_two_real_torch_processes_agree(tmp_path):
    code = textwrap.dedent("""
        import ctypes, os, sys
        import torch, torch.distributed as dist
        import torch.multiprocessing as mp

        def run(rank, path):
            dist.init_process_group("gloo", init_method="file://" + path, rank=rank, world_size=2)
            from zeusc import _lib
            from zeusc.utils.framework import TorchCollective
            c = TorchCollective()
            L = _lib.lib()
            v = (ctypes.c_double * 2)(rank + 1.0, 10.0 * rank)
            assert L.zeus_collective_allreduce(ctypes.byref(c.struct), v, 2, 0) == 0, L.zeus_errmsg()
            assert list(v) == [3.0, 10.0], list(v)
            v = (ctypes.c_double * 2)(rank + 1.0, -rank)
            assert L.zeus_collective_allreduce(ctypes.byref(c.struct), v, 2, 1) == 0
            assert list(v) == [2.0, 0.0], list(v)
            b = ctypes.create_string_buffer(b"rank%d" % rank, 5)
            assert L.zeus_collective_broadcast(ctypes.byref(c.struct), b, 5, 1) == 0
            assert b.raw == b"rank1"
            dist.destroy_process_group()

        if __name__ == "__main__":
            mp.spawn(run, args=(sys.argv[1],), nprocs=2)
            print("agreed")
    """)
    script = tmp_path / "two.py"
    script.write_text(code)
    import subprocess
    env = dict(os.environ, PYTHONPATH=tu.PYDIR)
    p = subprocess.run([sys.executable, str(script), str(tmp_path / "rendezvous")], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and "agreed" in p.stdout, p.stdout + p.stderr
