"""Closing a zeusc object on one thread while other threads are inside calls on it (issue 26,
item 4): the calls in progress finish, later ones raise ValueError, nothing crashes. Before the
guard (zeusc/_closeable.py) close() freed the C handle under a call that had released the GIL:
SIGSEGV or "free(): corrupted unsorted chunks". Each scenario runs in a child process, so that a
crash is a failed test naming the object rather than the end of the test run."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PYDIR = os.path.dirname(HERE)

# A child: N threads call `call(obj)` in a loop; the main thread closes `obj` while they run.
# Prints "ok <calls> <closed-errors>" when every thread ended with ValueError and no other error.
CHILD = textwrap.dedent("""
    import os, sys, threading, time
    sys.path.insert(0, {pydir!r})
    os.environ["ZEUS_GPU_BACKEND"] = "sim"
    from zeusc.device import Devices
    from zeusc.monitor import ZeusMonitor, PowerMonitor

    def run(make, call, rounds=30, threads=4):
        calls = closed = 0
        for _ in range(rounds):
            obj = make()
            errs, counts, start = [], [0] * threads, threading.Barrier(threads + 1)

            def worker(i):
                start.wait()
                try:
                    while True:
                        call(obj, i)
                        counts[i] += 1
                except ValueError as e:
                    if "closed" not in str(e):
                        errs.append(repr(e))
                except Exception as e:  # noqa: BLE001
                    errs.append(repr(e))

            ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
            for t in ts:
                t.start()
            start.wait()
            time.sleep(0.002)
            obj.close()
            for t in ts:
                t.join(10)
                assert not t.is_alive(), "a call did not return after close()"
            assert not errs, errs
            calls += sum(counts)
            closed += threads
        print("ok", calls, closed, rounds * threads)

    which = sys.argv[1]
    if which == "Devices":
        run(lambda: Devices(backend="sim", all_devices=True),
            lambda d, i: (d.get_power_limit(0), d.total_energy_mj(i % d.gpu_count()), d.name(0)))
    elif which == "ZeusMonitor":
        def make():
            return ZeusMonitor(gpu_indices=[0, 1], devices=Devices(backend="sim", all_devices=True))

        def call(m, i):
            k = "w%d" % i
            m.begin_window(k, sync_execution=False)
            m.end_window(k, sync_execution=False)
        run(make, call)
    elif which == "SimNode":
        # Calls on the node the Devices lends while the Devices closes (the node's GPUs go with it).
        def make():
            d = Devices(backend="sim", all_devices=True)
            n = d.sim_node()
            n.close = d.close
            return n
        run(make, lambda n, i: (n.work(i % 2, 0.01), n.now(), n.true_energy(0), n.idle(0.001)))
    elif which == "GlobalPowerLimitOptimizer":
        # One thread drives the optimizer (as a training loop does) while another closes it.
        from zeusc.optimizer.power_limit import GlobalPowerLimitOptimizer

        def make():
            m = ZeusMonitor(gpu_indices=[0, 1], devices=Devices(backend="sim", all_devices=True))
            return GlobalPowerLimitOptimizer(m, warmup_steps=1, profile_steps=10**6)

        run(make, lambda o, i: (o.on_step_begin(), o.on_step_end(), o.state, o.measurements,
                                o.current_power_limit), rounds=200, threads=1)
    elif which == "ZeusJob":
        # One thread runs the job's training steps (profiling power limits) while another closes it.
        import tempfile
        from zeusc.run import ZeusJob
        logs = tempfile.mkdtemp()
        os.environ.update(ZEUS_LOG_DIR=logs, ZEUS_JOB_ID="close", ZEUS_TARGET_METRIC="0.9",
                          ZEUS_PROFILE_PARAMS="2,4")

        def make():
            d = Devices(backend="sim", all_devices=True)
            j = ZeusJob(batch_size=8, max_epochs=1, steps_per_epoch=10**6,
                        monitor=ZeusMonitor(gpu_indices=[0, 1], devices=d))
            j.node = d.sim_node()
            j.next_epoch()
            j.train_begin()
            return j

        run(make, lambda j, i: (j.train_step_begin(), j.node.work_all([0.01, 0.01]), j.train_step_end(), j.info()),
            rounds=100, threads=1)
    elif which == "EnergyHistogram":
        # Every end_window pushes: to a Pushgateway stand-in on a loopback port.
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from zeusc.metric import EnergyHistogram

        class Gateway(BaseHTTPRequestHandler):
            def do_PUT(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(200)
                self.end_headers()
            do_POST = do_PUT

            def log_message(self, *a):
                pass

        gw = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
        threading.Thread(target=gw.serve_forever, daemon=True).start()
        url = "127.0.0.1:%d" % gw.server_address[1]

        def call(h, i):
            k = "w%d" % i
            h.begin_window(k, sync_execution=False)
            h.end_window(k, sync_execution=False)
            h.text()
        run(lambda: EnergyHistogram(cpu_indices=[], gpu_indices=[0, 1], pushgateway_url=url, job="close-test"), call,
            rounds=10)
        gw.shutdown()
    elif which == "PowerMonitor":
        run(lambda: PowerMonitor(gpu_indices=[0], update_period=0.01, devices=Devices(backend="sim", all_devices=True)),
            lambda p, i: (p.get_power(), p.get_all_power_timelines(), p.stats()), rounds=300)
""")


# What a scenario needs from libzeus (a build configured without it skips the scenario).
NEEDS = {"GlobalPowerLimitOptimizer": ("zeus_plo_open", "PLO_MISSING"),
         "EnergyHistogram": ("zeus_metric_open", "METRIC_MISSING"),
         "ZeusJob": ("zeus_job_open", None)}


@pytest.mark.parametrize("which", ["Devices", "ZeusMonitor", "PowerMonitor", "SimNode", "GlobalPowerLimitOptimizer",
                                   "EnergyHistogram", "ZeusJob"])
def test_close_while_other_threads_call(which, tmp_path):
    from zeusc import _lib
    if which in NEEDS:
        sym, why = NEEDS[which]
        if not hasattr(_lib.lib(), sym):
            pytest.skip(getattr(_lib, why) if why else f"{sym} not in this libzeus")
    script = tmp_path / "child.py"
    script.write_text(CHILD.format(pydir=PYDIR))
    env = dict(os.environ, ZEUS_SIM_GPUS="2")
    p = subprocess.run([sys.executable, str(script), which], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, f"{which}: exit {p.returncode} (a negative one is the signal)\n{p.stdout}\n{p.stderr[-3000:]}"
    words = p.stdout.split()
    assert words[:1] == ["ok"], p.stdout + p.stderr
    assert int(words[2]) == int(words[3])  # every thread of every round ended with "closed"


def test_close_from_inside_a_call_of_the_same_thread_does_not_hang():
    """close() on the thread that is inside a call (a signal handler, a callback) cannot wait for
    that call: the handle is freed when the call returns."""
    from zeusc.device import Devices
    d = Devices(backend="sim", all_devices=True)
    holds = d._holds
    holds.append(__import__("threading").get_ident())  # as a call of this thread in progress
    d.close()  # returns at once
    assert d._h  # not freed yet: the "call" still uses it
    holds.remove(__import__("threading").get_ident())
    d._run_free()  # what the call does on its way out
    assert not d._h
    with pytest.raises(ValueError, match="closed"):
        d.gpu_count()


def test_a_handle_collected_with_its_monitor_is_freed_after_the_monitor(monkeypatch):
    """A Devices and a PowerMonitor reading it (a sampling thread) that only the garbage collector
    frees, together: the monitor is closed before the handle it reads. The collector clears weak
    references before it runs finalizers, so with the dependents held weakly the handle could be
    freed first, under the monitor's (or a Perseus controller's) thread: a use after free that
    ASan showed in the pytest run."""
    import gc

    from zeusc import _lib
    from zeusc.device import Devices
    from zeusc.monitor import PowerMonitor

    L = _lib.lib()
    order = []
    real_dev, real_pm = L.zeus_devices_close, L.zeus_power_monitor_close
    monkeypatch.setattr(L, "zeus_devices_close", lambda h: (order.append("devices"), real_dev(h))[1])
    monkeypatch.setattr(L, "zeus_power_monitor_close", lambda h: (order.append("monitor"), real_pm(h))[1])
    gc.collect()
    for _ in range(10):
        d = Devices(backend="sim", all_devices=True)
        pm = PowerMonitor(gpu_indices=[0], update_period=0.01, devices=d)
        d.cycle, pm.cycle = d, pm  # garbage that only the collector frees, both at once
        del d, pm
        gc.collect()
    assert order == ["monitor", "devices"] * 10
