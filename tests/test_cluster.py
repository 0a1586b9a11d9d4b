"""CPU tests of catalogue tuning on a Dask cluster (kgen.tune.cluster).

Two worker processes on this machine stand in for two GPUs: a RecordedRunner verifies and
times (a few milliseconds per candidate, so that tasks overlap), a stand-in compiler
replaces nvcc. Everything else runs for real: the scheduler, the worker processes, task
retries, killed processes, worker restarts, the tuning database written by this process.
The runner classes live at module level so that the workers can unpickle them.
"""
from __future__ import annotations

import functools
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

distributed = pytest.importorskip("distributed", reason="Dask distributed is not installed (pip install "
                                  "'kgen[cluster]'; CI installs it with the dev extra)")

from kgen.tune.catalogue import tune_catalogue  # noqa: E402
from kgen.tune.cluster import _TaskStore, local_cluster  # noqa: E402
from kgen.tune.db import TuneDBError  # noqa: E402
from kgen.tune.device import DeviceInfo, arch_limits  # noqa: E402
from kgen.tune.records import ContextLost  # noqa: E402
from kgen.tune.runners import RecordedRunner  # noqa: E402
from stand_ins import SMALL, fake_resources, landscape, stand_in_nvcc  # noqa: E402

SHAPES = ["4096x4096x4096", "2048x4096x1024", "1024x1024x4096", "3000x2000x1000", "512x8192x512", "8192x512x2048"]
H200 = DeviceInfo("Recorded H200", "sm_90", arch_limits("sm_90"))


class SlowRunner(RecordedRunner):
    """Recorded times, with a few milliseconds per launch so that a task lasts long enough
    for the other worker to take the next one."""

    def __init__(self, device=H200):
        super().__init__(landscape, device=device)

    def verify(self, spec):
        time.sleep(0.005)
        return super().verify(spec)


class KillsItsWorker(SlowRunner):
    """Ends its own worker process (SIGKILL, as the kernel's OOM killer would) when it starts
    tuning `victim` for the first time; the marker file says it already did."""

    def __init__(self, marker, victim):
        super().__init__()
        self.marker, self.victim = marker, victim

    def prepare(self, cls, problem, dtype, seed=None):
        if problem == self.victim and not os.path.exists(self.marker):
            with open(self.marker, "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(0.5)  # a little into the tune: the previous task's result is long fetched
            os.kill(os.getpid(), signal.SIGKILL)
        super().prepare(cls, problem, dtype, seed)


class BreaksItsContext(SlowRunner):
    """The fifth candidate launched for `victim` breaks the 'CUDA context' (as an illegal
    address would), once."""

    def __init__(self, marker, victim):
        super().__init__()
        self.marker, self.victim = marker, victim

    def prepare(self, cls, problem, dtype, seed=None):
        self.problem, self.count = problem, 0
        super().prepare(cls, problem, dtype, seed)

    def verify(self, spec):
        self.count += 1
        if self.problem == self.victim and self.count == 5 and not os.path.exists(self.marker):
            with open(self.marker, "w") as fh:
                fh.write(spec.key)
            raise ContextLost("the CUDA context is broken: an illegal memory access was encountered (recorded)")
        return super().verify(spec)


def per_gpu_runner():
    """A runner whose device depends on the GPU its worker was given: two device models."""
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    name, arch = {"0": ("Recorded A100", "sm_80"), "1": ("Recorded H100", "sm_90")}[gpu]
    return SlowRunner(DeviceInfo(name, arch, arch_limits(arch)))


def no_sqlite():
    """Installed on every worker: any SQLite connection made there fails."""
    import sqlite3 as module

    def refuse(*args, **kwargs):
        raise RuntimeError("a worker opened SQLite")

    module.connect = refuse
    return True


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as c:
        yield c


@pytest.fixture
def client(cluster):
    with distributed.Client(cluster) as c:
        c.wait_for_workers(2, timeout=60)  # a worker killed by an earlier test is back
        assert all(c.run(no_sqlite).values())
        yield c


def tune(client, problems, db, runner=SlowRunner, **kw):
    kw.setdefault("restrict", SMALL)
    kw.setdefault("strategy", "exhaustive")
    return tune_catalogue("matmul", problems, "float32", db=str(db), runner=runner, compiler=fake_resources,
                          cluster=client, progress=False, summary=False, **kw)


def rows(db) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT key, strategy, problem, device, arch FROM results").fetchall()


def test_tasks_spread_over_both_workers_and_results_carry_their_device(client, tmp_path):
    db = tmp_path / "tune.sqlite3"
    result = tune(client, SHAPES, db)
    assert [e.status for e in result.entries] == ["tuned"] * len(SHAPES)
    assert {e.worker for e in result.entries} == {"0", "1"}  # both workers took problems
    assert {e.device for e in result.entries} == {"Recorded H200"}
    assert all(e.result.device == "Recorded H200" and e.attempts == 1 and not e.retries for e in result.entries)
    stored = rows(db)
    assert len(stored) == len(SHAPES) == len({r[0] for r in stored})  # one row per problem
    assert {r[3] for r in stored} == {"Recorded H200"}
    # The winners are the ones a single process finds: the same landscape, the same space.
    here = tune_catalogue("matmul", SHAPES[:1], db=False, runner=SlowRunner(), compiler=fake_resources,
                          restrict=SMALL, strategy="exhaustive", progress=False, summary=False)
    assert result.entries[0].result.best == here.entries[0].result.best


def test_a_killed_worker_loses_only_its_task_which_runs_again(client, tmp_path):
    db = tmp_path / "tune.sqlite3"
    victim = {"M": 1024, "N": 1024, "K": 4096}
    runner = functools.partial(KillsItsWorker, str(tmp_path / "killed"), victim)
    result = tune(client, SHAPES, db, runner=runner)
    assert (tmp_path / "killed").exists()
    assert [e.status for e in result.entries] == ["tuned"] * len(SHAPES)
    lost = result.entries[2]
    assert lost.problem == victim and lost.attempts == 2
    assert len(lost.retries) == 1 and lost.retries[0].startswith("lost with worker ")
    others = [(e.label, e.attempts, e.retries) for e in result.entries if e is not lost]
    assert all(attempts == 1 and not retries for _, attempts, retries in others), others
    assert "retried: 1024x1024x4096 (2 attempts): lost with worker" in result.table()
    stored = rows(db)
    assert len(stored) == len(SHAPES) == len({r[2] for r in stored})  # nothing lost, nothing twice
    with sqlite3.connect(db) as con:
        per_key = con.execute("SELECT COUNT(*), COUNT(DISTINCT spec_key) FROM candidates GROUP BY key").fetchall()
    every = result.entries[0].result.counts["candidates"]
    assert len(per_key) == len(SHAPES) and all(n == distinct == every for n, distinct in per_key)


def test_an_interrupted_run_resumes_with_only_the_rest(client, tmp_path, monkeypatch):
    from kgen.tune import catalogue

    db = tmp_path / "tune.sqlite3"
    finished = catalogue.CatalogueProgress.finished
    seen = []

    def interrupt_after_two(self, entry):
        finished(self, entry)
        seen.append(entry.label)
        if len(seen) == 2:
            raise KeyboardInterrupt  # Ctrl-C in the driver, with tasks still running

    monkeypatch.setattr(catalogue.CatalogueProgress, "finished", interrupt_after_two)
    with pytest.raises(KeyboardInterrupt):
        tune_catalogue("matmul", SHAPES, db=str(db), runner=SlowRunner, compiler=fake_resources, restrict=SMALL,
                       strategy="exhaustive", cluster=client, progress=True, summary=False)
    monkeypatch.undo()
    done = {r[2] for r in rows(db)}
    assert len(done) >= 2
    again = tune(client, SHAPES, db)
    skipped = [e for e in again.entries if e.status == "in database"]
    tuned = [e for e in again.entries if e.status == "tuned"]
    assert len(skipped) == len(done) and len(tuned) == len(SHAPES) - len(done)
    assert all(e.attempts == 0 and e.worker is None for e in skipped)
    assert len(rows(db)) == len(SHAPES)


def test_a_broken_cuda_context_restarts_the_worker_and_resumes_without_the_culprit(client, tmp_path):
    db = tmp_path / "tune.sqlite3"
    victim = {"M": 3000, "N": 2000, "K": 1000}
    marker = tmp_path / "broken"
    runner = functools.partial(BreaksItsContext, str(marker), victim)
    result = tune(client, SHAPES[2:5], db, runner=runner)
    assert [e.status for e in result.entries] == ["tuned"] * 3
    broken = result.entries[1]
    assert broken.problem == victim and broken.attempts == 2
    assert broken.retries and "the CUDA context on worker" in broken.retries[-1]
    culprit = marker.read_text()
    records = {r.spec.key: r for r in broken.result.records}
    assert records[culprit].status == "launch-error" and "illegal memory access" in records[culprit].reason
    assert broken.result.counts["resumed"] == 5  # the second attempt went on from the first one's records
    assert len(rows(db)) == 3


def test_workers_never_open_the_tuning_database():
    store = _TaskStore({"k": [{"spec_key": "a", "spec": "{}", "status": "ok"}]})
    with pytest.raises(TuneDBError, match="opens no database file"):
        store._connection()
    store.put_candidates("k", [{"spec_key": "b", "spec": "{}", "status": "pruned"}])
    assert {r["spec_key"] for r in store.candidates("k")} == {"a", "b"}
    assert store.result("k", "guided") is None


def test_one_worker_per_gpu_each_pinned_and_winners_kept_per_device_model(tmp_path):
    db = tmp_path / "tune.sqlite3"
    with local_cluster(["0", "1"]) as cluster, distributed.Client(cluster) as client:
        seen = client.run(lambda: (os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("KGEN_DEVICE")))
        names = {w["name"]: (w["nthreads"], seen[a]) for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}
        assert names == {"gpu0": (1, ("0", "0")), "gpu1": (1, ("1", "0"))}
        result = tune(client, SHAPES[:2], db, runner=per_gpu_runner)
        again = tune(client, SHAPES[:3], db, runner=per_gpu_runner)
    print(result.table())    # Each problem once per device model, each on the worker that has that model.
    assert sorted((e.label, e.device, e.worker, e.status) for e in result.entries) == [
        ("2048x4096x1024", "Recorded A100", "gpu0", "tuned"), ("2048x4096x1024", "Recorded H100", "gpu1", "tuned"),
        ("4096x4096x4096", "Recorded A100", "gpu0", "tuned"), ("4096x4096x4096", "Recorded H100", "gpu1", "tuned")]
    assert [e.status for e in again.entries] == ["in database"] * 4 + ["tuned"] * 2
    stored = rows(db)
    assert len(stored) == 6 and {(r[3], r[4]) for r in stored} == {("Recorded A100", "sm_80"),
                                                                   ("Recorded H100", "sm_90")}
    assert any("device models: Recorded A100 (sm_80); Recorded H100 (sm_90)" in n for n in result.notes)


def test_workers_share_their_machine_s_kernel_cache_each_spec_compiles_once(tmp_path, monkeypatch):
    # The real compile path on the workers (a compile process pool each, the disk cache), with
    # a stand-in nvcc: two workers racing through four problems of the same space.
    compiles = stand_in_nvcc(tmp_path, monkeypatch)
    db = tmp_path / "tune.sqlite3"
    with local_cluster(["0", "1"]) as cluster, distributed.Client(cluster) as client:
        result = tune_catalogue("matmul", SHAPES[:4], db=str(db), runner=SlowRunner, restrict=SMALL,
                                strategy="exhaustive", cluster=client, workers=1, progress=False, summary=False)
    assert [e.status for e in result.entries] == ["tuned"] * 4 and {e.worker for e in result.entries} == {"gpu0",
                                                                                                      "gpu1"}
    specs = {r.spec.key for e in result.entries for r in e.result.records}
    assert len(specs) == result.entries[0].result.counts["candidates"] == compiles()


def test_compile_processes_are_a_share_of_the_machine_or_the_job_s_allocation():
    from kgen.tune.cluster import _compile_processes

    machine = [{"cpus": 16, "machine_cpus": 16}] * 2  # two workers of a local cluster
    assert _compile_processes(machine) == 7
    batch_jobs = [{"cpus": 8, "machine_cpus": 64}] * 4  # four SLURM jobs of 8 CPUs on one node
    assert _compile_processes(batch_jobs) == 7
    assert _compile_processes([{"cpus": 1, "machine_cpus": 1}]) == 1


def test_a_local_cluster_without_gpus_is_one_line_naming_what_to_do(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("64x64x64\n")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="-1")
    proc = subprocess.run([sys.executable, "-m", "kgen", "tune", "matmul", "--shapes", str(shapes), "--cluster"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2
    assert proc.stderr == ("kgen: error: CUDA_VISIBLE_DEVICES='-1' hides every GPU; a local cluster needs at least "
                           "one\n")
    proc = subprocess.run([sys.executable, "-m", "kgen", "tune", "matmul", "--shapes", str(shapes), "--cluster",
                           "--dry-run"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "leave out --cluster" in proc.stderr
