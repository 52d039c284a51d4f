"""zeus bso-server and zeusc's BatchSizeOptimizer (zeusc.optimizer.batch_size.client) together,
on SQLite and on a real PostgreSQL server the tests start themselves (scripts/pg-temp.sh; the
PostgreSQL cases skip with the reason when it cannot start). The same suite for both: the
protocol route by route, bad input, the optimizer's decisions for a seeded job equal to
src/bso's zeus_bso (called through ctypes), a training script driven through the client, a
bounded load test (concurrent clients on several jobs: no trial lost or duplicated), and, on
PostgreSQL, the database going away (503) and coming back.
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

import zeusc_testutil as tu

CLI = os.environ.get("ZEUSC_TEST_ZEUS_CLI") or os.path.join(tu.REPO, "build", "zeus")
PG_TEMP = os.path.join(tu.REPO, "scripts", "pg-temp.sh")


# ---- servers and databases -------------------------------------------------------------------

class PG:
    """A throwaway PostgreSQL server (scripts/pg-temp.sh) in a temporary folder."""

    def __init__(self, tmp):
        self.dir = str(tmp)
        self.proc = subprocess.run([PG_TEMP, "start", self.dir], capture_output=True, text=True, timeout=120)
        if self.proc.returncode != 0:
            raise RuntimeError(self.proc.stderr.strip() or self.proc.stdout.strip())
        self.url = self.proc.stdout.strip().splitlines()[-1]

    def ctl(self, what):
        r = subprocess.run([PG_TEMP, what, self.dir], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr

    def stop(self):
        subprocess.run([PG_TEMP, "stop", self.dir], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def pg(tmp_path_factory):
    if not os.path.exists(PG_TEMP):
        pytest.skip("scripts/pg-temp.sh is missing")
    try:
        p = PG(tmp_path_factory.mktemp("pg"))
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"cannot start a throwaway PostgreSQL (Debian's postgresql package; scripts/pg-temp.sh): {e}")
    yield p
    p.stop()


class Server:
    def __init__(self, tmp, database, *args):
        if not os.path.exists(CLI):
            pytest.skip("the zeus CLI (build/zeus) is not built; set ZEUSC_TEST_ZEUS_CLI")
        self.out = tmp / "bso.out"
        self.err = tmp / "bso.err"
        self.proc = subprocess.Popen([CLI, "bso-server", "--port", "0", "--log-level", "warn", "--database", database,
                                      *args], stdout=open(self.out, "w"), stderr=open(self.err, "w"))
        for _ in range(400):
            text = self.out.read_text() if self.out.exists() else ""
            if "port" in text:
                self.url = "http://127.0.0.1:" + text.split()[-1]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.025)
        self.stop()
        err = self.err.read_text()
        if "built without PostgreSQL support" in err:
            pytest.skip("this libzeus has no PostgreSQL support (ZEUS_WITH_STORE_PG=OFF)")
        raise AssertionError(f"zeus bso-server did not start: {err}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


BACKENDS = ["sqlite", "postgresql"]


@pytest.fixture(params=BACKENDS)
def database(request, tmp_path):
    if request.param == "sqlite":
        return "sqlite://" + str(tmp_path / "bso.db")
    p = request.getfixturevalue("pg")
    # A database per test: create it through the server's own schema (a fresh database name).
    name = "t" + str(abs(hash(request.node.nodeid)) % 10**12)
    r = subprocess.run([PG_TEMP, "createdb", p.dir, name], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return p.url.replace("/postgres?", f"/{name}?")


@pytest.fixture
def server(database, tmp_path):
    started = []

    def start(*args):
        s = Server(tmp_path, database, *args)
        started.append(s)
        return s
    yield start
    for s in started:
        s.stop()


def db_rows(database, sql):
    """Rows of a query on the server's database (checks of its history), as lists of strings."""
    if database.startswith("sqlite://"):
        import sqlite3
        con = sqlite3.connect(database[len("sqlite://"):])
        try:
            return [[None if v is None else str(v) for v in r] for r in con.execute(sql).fetchall()]
        finally:
            con.close()
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "ASAN_OPTIONS")}
    out = subprocess.run(["psql", "-X", "-tA", "-F", "|", database, "-c", sql], capture_output=True, text=True,
                         timeout=60, env=env, check=True).stdout
    return [line.split("|") for line in out.splitlines() if line]


def call(url, method, path, body=None, token=None):
    data = (body if isinstance(body, str) else json.dumps(body)).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def job(**kw):
    j = {"job_id": None, "job_id_prefix": "mnist", "batch_sizes": [32, 64, 128, 256, 512], "default_batch_size": 128,
         "eta_knob": 0.5, "beta_knob": 2.0, "target_metric": 0.5, "higher_is_better_metric": True, "max_epochs": 10,
         "num_pruning_rounds": 2, "window_size": 0, "mab_prior_mean": 0.0, "mab_prior_precision": 0.0,
         "mab_num_explorations": 2, "mab_seed": 7, "max_power": 300.0, "number_of_gpus": 1, "gpu_model": "A100"}
    j.update(kw)
    return j


# ---- the protocol, route by route ------------------------------------------------------------

def test_register_same_and_different(server):
    s = server()
    st, created = call(s.url, "POST", "/jobs", job())
    assert st == 201 and created["job_id"].startswith("mnist-") and len(created["job_id"]) > len("mnist-") + 20
    st, again = call(s.url, "POST", "/jobs", created)
    assert st == 200 and again == created
    st, body = call(s.url, "POST", "/jobs", dict(created, eta_knob=0.7))
    assert st == 409 and "doesn't match" in body["message"]
    st, named = call(s.url, "POST", "/jobs", job(job_id="mnist-fixed", batch_sizes=[512, 32, 256, 64, 128]))
    assert st == 201 and named["batch_sizes"] == [32, 64, 128, 256, 512]


def test_trial_lifecycle(server):
    s = server()
    _, j = call(s.url, "POST", "/jobs", job(job_id="mnist-a"))
    st, t = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-a")
    assert st == 200 and t == {"job_id": "mnist-a", "batch_size": 128, "trial_number": 1}
    res = dict(t, time=10.0, energy=1000.0, metric=0.1, current_epoch=1)
    st, r = call(s.url, "POST", "/report", res)
    assert st == 200 and r == {"stop_train": False, "converged": False, "message": "Stop condition not met, keep training"}
    st, r = call(s.url, "POST", "/report", dict(res, metric=0.9, current_epoch=2, time=20.0, energy=2000.0))
    assert st == 200 and r["stop_train"] and r["converged"] and r["message"] == "Train succeeded"
    st, r = call(s.url, "POST", "/report", dict(res, metric=0.9, current_epoch=2))
    assert st == 200 and r["stop_train"] and "already reported" in r["message"]
    st, r = call(s.url, "PATCH", "/trials", t)
    assert st == 200 and r is None
    # Pruning goes downwards from the default.
    st, t2 = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-a")
    assert st == 200 and t2["batch_size"] == 64 and t2["trial_number"] == 2
    # A trial ended without a result: its report is refused.
    assert call(s.url, "PATCH", "/trials", t2)[0] == 200
    st, r = call(s.url, "POST", "/report", dict(t2, time=1.0, energy=1.0, metric=0.9, current_epoch=1))
    assert st == 400 and "refused" in r["message"]
    st, r = call(s.url, "DELETE", "/jobs?job_id=mnist-a")
    assert st == 200
    st, r = call(s.url, "DELETE", "/jobs?job_id=mnist-a")
    assert st == 404 and r["message"] == "No job was deleted."
    st, r = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-a")
    assert st == 400 and "Unknown job" in r["message"]


def test_early_stop_on_cost(server):
    s = server()
    call(s.url, "POST", "/jobs", job(job_id="mnist-b", beta_knob=1.5))
    t = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-b")[1]
    call(s.url, "POST", "/report", dict(t, time=10.0, energy=1000.0, metric=0.9, current_epoch=1))
    t = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-b")[1]
    st, r = call(s.url, "POST", "/report", dict(t, time=100.0, energy=10000.0, metric=0.1, current_epoch=1))
    assert st == 200 and r["stop_train"] and not r["converged"] and "cost upper bound" in r["message"]


@pytest.mark.parametrize("body,field", [
    ({"job_id_prefix": "x"}, "batch_sizes"),
    (job(batch_sizes="nope"), "batch_sizes"),
    (job(batch_sizes=[]), "batch_sizes"),
    (job(default_batch_size=100), "default_batch_size"),
    (job(eta_knob=1.5), "eta_knob"),
    (job(beta_knob=-1), "beta_knob"),
    (job(max_epochs=0), "max_epochs"),
    (job(max_power="high"), "max_power"),
    (job(job_id="other-1"), "job_id"),
    (job(higher_is_better_metric="yes"), "higher_is_better_metric"),
    (job(gpu_model=""), "gpu_model"),
])
def test_bad_jobs_name_the_field(server, body, field):
    s = server()
    st, r = call(s.url, "POST", "/jobs", body)
    assert st == 422, r
    assert r["detail"][0]["loc"] == ["body", field], r


def test_bad_requests(server):
    s = server()
    call(s.url, "POST", "/jobs", job(job_id="mnist-c"))
    st, r = call(s.url, "POST", "/jobs", "{not json")
    assert st == 422 and "JSON" in r["detail"][0]["msg"]
    st, r = call(s.url, "POST", "/report", {"job_id": "mnist-c", "batch_size": "a"})
    assert st == 422 and r["detail"][0]["loc"] == ["body", "batch_size"]
    st, r = call(s.url, "POST", "/report", {"job_id": "mnist-c", "batch_size": 128, "trial_number": 1, "time": 1,
                                            "energy": -1, "metric": 0, "current_epoch": 1})
    assert st == 422 and r["detail"][0]["loc"] == ["body", "energy"]
    st, r = call(s.url, "POST", "/report", {"job_id": "mnist-c", "batch_size": 128, "trial_number": 99, "time": 1,
                                            "energy": 1, "metric": 0, "current_epoch": 1})
    assert st == 400 and "Unknown trial" in r["message"]
    st, r = call(s.url, "POST", "/report", {"job_id": "nope", "batch_size": 128, "trial_number": 1, "time": 1,
                                            "energy": 1, "metric": 0, "current_epoch": 1})
    assert st == 400 and "Unknown job" in r["message"]
    st, r = call(s.url, "PATCH", "/trials", {"job_id": "mnist-c", "batch_size": 128, "trial_number": 5})
    assert st == 404
    st, r = call(s.url, "GET", "/jobs/batch_size")
    assert st == 422 and r["detail"][0]["loc"] == ["query", "job_id"]
    assert call(s.url, "GET", "/jobs")[0] == 405
    assert call(s.url, "GET", "/nothing")[0] == 404
    st, r = call(s.url, "POST", "/jobs", "x" * 70000)
    assert st == 413


def test_bearer_token(server, tmp_path):
    tok = tmp_path / "tok"
    tok.write_text("s3cret\n")
    os.chmod(tok, 0o600)
    s = server("--token-file", str(tok))
    assert call(s.url, "POST", "/jobs", job())[0] == 401
    assert call(s.url, "POST", "/jobs", job(), token="wrong")[0] == 401
    assert call(s.url, "POST", "/jobs", job(), token="s3cret")[0] == 201


# ---- the optimizer's decisions equal src/bso's ----------------------------------------------

class _BsoOpts(ctypes.Structure):
    _fields_ = [("prior_mean", ctypes.c_double), ("prior_precision", ctypes.c_double),
                ("window_size", ctypes.c_long), ("num_pruning_rounds", ctypes.c_long),
                ("concurrency", ctypes.c_bool), ("seed", ctypes.c_uint64)]


class Reference:
    """src/bso's zeus_bso through ctypes."""

    def __init__(self, lib, bs, default, seed, window):
        self.lib = lib
        lib.zeus_bso_open.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_long), ctypes.c_size_t,
                                      ctypes.c_long, ctypes.POINTER(_BsoOpts)]
        lib.zeus_bso_predict.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)]
        lib.zeus_bso_observe.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_double, ctypes.c_bool]
        lib.zeus_bso_close.argtypes = [ctypes.c_void_p]
        o = _BsoOpts()
        lib.zeus_bso_opts_init(ctypes.byref(o))
        o.seed = seed
        o.window_size = window
        arr = (ctypes.c_long * len(bs))(*bs)
        self.h = ctypes.c_void_p()
        assert lib.zeus_bso_open(ctypes.byref(self.h), arr, len(bs), default, ctypes.byref(o)) == 0

    def predict(self):
        v = ctypes.c_long()
        assert self.lib.zeus_bso_predict(self.h, ctypes.byref(v)) == 0
        return v.value

    def observe(self, bs, cost, reached):
        assert self.lib.zeus_bso_observe(self.h, bs, cost, reached) == 0

    def close(self):
        self.lib.zeus_bso_close(self.h)


def _outcome(bs, k):
    """A deterministic epoch outcome per batch size and trial: (time, energy, reached)."""
    time_s = 50.0 + 3000.0 / bs + (k * 7919 % 13)
    energy = time_s * (150.0 + bs * 0.1)
    return time_s, energy, bs != 512


@pytest.mark.parametrize("window", [0, 3])
def test_decisions_equal_src_bso(server, lib, window):
    s = server()
    bs_list = [32, 64, 128, 256, 512]
    call(s.url, "POST", "/jobs", job(job_id="mnist-eq", beta_knob=None, mab_seed=12345, window_size=window,
                                     max_epochs=1))
    ref = Reference(lib, bs_list, 128, 12345, window)
    try:
        for k in range(40):
            st, t = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-eq")
            assert st == 200, t
            want = ref.predict()
            assert t["batch_size"] == want, f"trial {k + 1}: server {t['batch_size']}, src/bso {want}"
            time_s, energy, reached = _outcome(want, k)
            st, r = call(s.url, "POST", "/report", dict(t, time=time_s, energy=energy, metric=0.9 if reached else 0.1,
                                                        current_epoch=1))
            assert st == 200 and r["stop_train"]
            ref.observe(want, 0.5 * energy + 0.5 * 300.0 * time_s, reached)
    finally:
        ref.close()


# ---- a training script through zeusc's client -----------------------------------------------

class FakeMeasurement:
    def __init__(self, t, e):
        self.time = t
        self.total_energy = e


class FakeMonitor:
    """Stands in for ZeusMonitor: each window is one epoch of a model whose cost grows with the
    batch size, and whose metric reaches the target except at the largest batch size."""

    gpu_indices = [0]

    def __init__(self):
        self.bs = 0

    def begin_window(self, name):
        self.open = name

    def end_window(self, name):
        assert name == self.open
        return FakeMeasurement(10.0 + self.bs / 64, (10.0 + self.bs / 64) * 200)


def test_training_script_through_the_client(server, lib, monkeypatch):
    import zeusc.optimizer.batch_size.client as client_mod
    from zeusc.optimizer.batch_size.client import BatchSizeOptimizer
    from zeusc.optimizer.batch_size.common import JobSpec
    from zeusc.optimizer.batch_size.exceptions import ZeusBSOBadOperationError, ZeusBSOTrainFailError, ZeusBSORuntimError
    s = server()
    spec = JobSpec(job_id="mnist-script", job_id_prefix="mnist", batch_sizes=[32, 64, 128, 256, 512],
                   default_batch_size=128, max_epochs=5, mab_seed=3, beta_knob=None)
    at_exit = []
    monkeypatch.setattr(client_mod.atexit, "register", at_exit.append)
    chosen = []
    for session in range(14):
        mon = FakeMonitor()
        bso = BatchSizeOptimizer(mon, s.url, spec)
        assert bso.job.job_id == "mnist-script" and bso.job.max_power > 0
        bs = bso.get_batch_size()
        assert bso.get_batch_size() == bs
        chosen.append(bs)
        mon.bs = bs
        bso.on_train_begin()
        try:
            for epoch in range(10):
                bso.on_evaluate(0.2 if epoch < 2 or bs == 512 else 0.8)
                if bso.training_finished:
                    break
        except ZeusBSOTrainFailError as e:
            assert bs == 512 and "max_epoch" in str(e)
        assert bso.training_finished
        at_exit.pop()()  # what the process would run at exit: PATCH /trials
    # Pruning: down from 128 to 32, up to 512 (fails), then round two from the cheapest (32).
    assert chosen[:5] == [128, 64, 32, 256, 512], chosen
    assert set(chosen[5:]) <= {32, 64, 128, 256}
    # A session that dies before reporting: its trial ends failed at exit and its report is refused.
    bso = BatchSizeOptimizer(FakeMonitor(), s.url, spec)
    bs = bso.get_batch_size()
    at_exit.pop()()
    st, r = call(s.url, "POST", "/report", {"job_id": "mnist-script", "batch_size": bs, "trial_number": bso.trial_number,
                                            "time": 1, "energy": 1, "metric": 1, "current_epoch": 1})
    assert st == 400 and "refused" in r["message"]
    with pytest.raises(ZeusBSOBadOperationError):
        BatchSizeOptimizer(FakeMonitor(), s.url, spec, rank=1).get_batch_size()
    with pytest.raises(ZeusBSORuntimError, match="409"):
        BatchSizeOptimizer(FakeMonitor(), s.url, JobSpec(**dict(spec.dict(), eta_knob=0.9)))


# ---- many clients at once ---------------------------------------------------------------------

N_CLIENTS = int(os.environ.get("ZEUS_BSO_TEST_CLIENTS", "64"))
N_TRIALS = int(os.environ.get("ZEUS_BSO_TEST_TRIALS", "100"))
N_JOBS = 8


def test_concurrent_clients_lose_and_duplicate_nothing(server, database):
    s = server("--threads", "8")
    for j in range(N_JOBS):
        assert call(s.url, "POST", "/jobs", job(job_id=f"mnist-load{j}", max_epochs=1, beta_knob=None))[0] == 201
    got = [[] for _ in range(N_CLIENTS)]
    errors = []

    def client(c):
        jid = f"mnist-load{c % N_JOBS}"
        try:
            for k in range(N_TRIALS):
                st, t = call(s.url, "GET", f"/jobs/batch_size?job_id={jid}")
                assert st == 200, t
                st, r = call(s.url, "POST", "/report", dict(t, time=1.0 + t["batch_size"] / 100, energy=100.0,
                                                            metric=0.9, current_epoch=1))
                assert st == 200 and r["stop_train"] and "already" not in r["message"], r
                got[c].append((t["job_id"], t["trial_number"]))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(N_CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors[:3]
    trials = [x for g in got for x in g]
    assert len(trials) == N_CLIENTS * N_TRIALS
    assert len(set(trials)) == len(trials), "a trial number was handed out twice"
    per_job = {}
    for jid, n in trials:
        per_job.setdefault(jid, []).append(n)
    for jid, ns in per_job.items():
        # Trial numbers of each job are exactly 1..N: none lost, none skipped.
        assert sorted(ns) == list(range(1, len(ns) + 1)), jid
        # Every trial was reported once: a second report says so.
        st, r = call(s.url, "POST", "/report", {"job_id": jid, "batch_size": 1, "trial_number": ns[0], "time": 1,
                                                "energy": 1, "metric": 1, "current_epoch": 1})
        assert st == 400
    # The stored history: every trial of every job succeeded exactly once, and each job's least
    # cost is the least of its trials' costs (eta 0.5, 300 W).
    rows = db_rows(database, "SELECT job_id, count(*), sum(CASE WHEN status = 1 THEN 1 ELSE 0 END), "
                             "min(0.5 * energy_j + 0.5 * 300.0 * time_s) FROM bso_trial GROUP BY job_id ORDER BY job_id")
    assert len(rows) == N_JOBS
    mins = dict((r[0], float(r[1]) if r[1] is not None else None)
                for r in db_rows(database, "SELECT job_id, min_cost FROM bso_job"))
    for jid, n, ok, least in rows:
        assert int(n) == len(per_job[jid]) and int(ok) == int(n), (jid, n, ok)
        assert math.isclose(mins[jid], float(least), rel_tol=1e-9), (jid, mins[jid], least)


# ---- the database going away ------------------------------------------------------------------

def test_database_goes_away_and_comes_back(request, tmp_path):
    p = request.getfixturevalue("pg")
    r = subprocess.run([PG_TEMP, "createdb", p.dir, "away"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = Server(tmp_path, p.url.replace("/postgres?", "/away?"))
    try:
        assert call(s.url, "POST", "/jobs", job(job_id="mnist-away"))[0] == 201
        assert call(s.url, "GET", "/jobs/batch_size?job_id=mnist-away")[0] == 200
        p.ctl("pause")
        try:
            st, r = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-away")
            assert st == 503 and "database is unavailable" in r["message"], r
            st, r = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-away")
            assert st == 503
        finally:
            p.ctl("resume")
        for _ in range(100):
            st, r = call(s.url, "GET", "/jobs/batch_size?job_id=mnist-away")
            if st == 200:
                break
            time.sleep(0.1)
        assert st == 200 and r["trial_number"] == 2, r
    finally:
        s.stop()


def test_two_servers_share_one_database(server):
    """Two server processes ("nodes") on one database: requests of the same jobs through both
    interleave, and still no trial is lost or handed out twice."""
    servers = [server("--threads", "4"), server("--threads", "4")]
    jobs = 4
    for j in range(jobs):
        assert call(servers[j % 2].url, "POST", "/jobs", job(job_id=f"mnist-two{j}", max_epochs=1, beta_knob=None))[0] == 201
        # The other server sees the registration.
        assert call(servers[(j + 1) % 2].url, "POST", "/jobs", job(job_id=f"mnist-two{j}", max_epochs=1,
                                                                  beta_knob=None))[0] == 200
    got, errors = [], []
    lock = threading.Lock()

    def client(c):
        try:
            for k in range(30):
                s = servers[(c + k) % 2]
                st, t = call(s.url, "GET", f"/jobs/batch_size?job_id=mnist-two{c % jobs}")
                assert st == 200, t
                st, r = call(servers[(c + k + 1) % 2].url, "POST", "/report",
                             dict(t, time=1.0 + t["batch_size"] / 100, energy=100.0, metric=0.9, current_epoch=1))
                assert st == 200 and "already" not in r["message"], r
                with lock:
                    got.append((t["job_id"], t["trial_number"]))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors[:3]
    assert len(got) == 16 * 30 and len(set(got)) == len(got)
    for j in range(jobs):
        ns = sorted(n for jid, n in got if jid == f"mnist-two{j}")
        assert ns == list(range(1, len(ns) + 1))
