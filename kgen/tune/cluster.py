"""Tune a catalogue over the GPU workers of a Dask cluster (docs/cluster.md).

    from kgen.tune.catalogue import tune_catalogue
    tune_catalogue("matmul", "shapes.txt", cluster="local")              # every GPU of this machine
    tune_catalogue("matmul", "shapes.txt", cluster="tcp://head:8786")    # the workers of a scheduler

One Dask worker per GPU, one thread each. Every problem is one task: the worker tunes it
with autotune (compiling in its own pool of processes, into its node's disk cache) and
returns what it measured, tagged with its device, to this process, which alone writes the
tuning database. Workers never open the database: a task's autotune writes into an
in-memory stand-in (_TaskStore) that travels back with the result.

Device models. The problem key of every result names the device, its arch, nvcc and kgen,
so a winner is only ever compared with candidates timed on the same model. The workers
present at the start are asked for their model; each problem is tuned once per model
(restricted to that model's workers when there are several models), and a problem the
database already holds for a model is not submitted again.

Faults. A task lost with its worker (the process died, the machine went away) is run again
by the scheduler on another worker (at most distributed.scheduler.allowed-failures times);
a task that raised is run again up to `retries` times. A task whose GPU broke its CUDA
context returns what it measured (the culprit recorded as a launch error); this process
stores it, restarts that worker (a broken context cannot be repaired in its process) and
submits the problem again, resuming without the culprit. The run ends with the list of
what was retried and why.

Dask distributed is an optional dependency (pip install 'kgen[cluster]'): this module
imports it only when a cluster is used, and workers need kgen and distributed installed.
What both ways of tuning a catalogue share, CatalogueEntry and runner_from, is here too,
so that kgen.tune.catalogue can use them without Dask.
"""
from __future__ import annotations

import collections
import dataclasses
import importlib
import logging
import math
import multiprocessing
import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Sequence

from .. import __version__
from ..core.spec import Spec
from ..core.spec import family as family_class
from .db import TuneDB, TuneDBError, problem_key
from .device import DeviceInfo, toolchain_version
from .records import ContextLost, TuneError, TuneResult, first_line

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'kgen[cluster]'"
# Events workers send to this process through the scheduler: an attempt starting or
# failing (kept to say at the end what was retried), and a tune's progress (shown live).
TOPIC_ATTEMPTS = "kgen-tune-attempts"
TOPIC_PROGRESS = "kgen-tune-progress"
# Seconds a task on a worker whose CUDA context broke waits to be restarted by the driver
# before it ends its process itself (the scheduler then runs the task elsewhere).
BROKEN_WORKER_WAIT_S = 60.0


class ClusterError(TuneError):
    """The cluster cannot be used as asked (not installed, unreachable, no usable worker)."""


def require_distributed() -> Any:
    """The distributed package, or a ClusterError saying how to install it."""
    try:
        import distributed
    except ImportError as exc:
        raise ClusterError(f"tuning on a cluster needs Dask distributed, which is not installed ({exc}): "
                           f"{INSTALL_HINT}. Without --cluster the catalogue is tuned in this process.") from None
    return distributed


# ---------------------------------------------------------------------------------------
# Runners, on this machine or a worker
# ---------------------------------------------------------------------------------------

def runner_from(runner: Any, seed: int | None = None) -> Any:
    """A Runner from a Runner, a Runner class or function returning one, or None
    (CudaRunner on this process' GPU)."""
    if runner is None:
        from .runners import CudaRunner

        return CudaRunner(seed=seed)
    if not isinstance(runner, type) and hasattr(runner, "verify") and hasattr(runner, "time"):
        return runner
    if callable(runner):  # a function, or a Runner class
        made = runner()
        if not (hasattr(made, "verify") and hasattr(made, "time")):
            raise TuneError(f"the runner function returned {made!r}, which is not a Runner")
        return made
    raise TuneError(f"runner={runner!r} is not allowed: a Runner (with prepare, verify, time and close) or a "
                    "function returning one")


# ---------------------------------------------------------------------------------------
# A local cluster: one worker per GPU
# ---------------------------------------------------------------------------------------

def gpu_ids() -> list[str]:
    """The GPUs of this machine as CUDA_VISIBLE_DEVICES names them (its entries when it is
    set, else 0..count-1). ClusterError when there is none."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None and env.strip():
        ids = [x.strip() for x in env.split(",") if x.strip()]
        if ids and not ids[0].startswith("-"):
            return ids
        raise ClusterError(f"CUDA_VISIBLE_DEVICES={env!r} hides every GPU; a local cluster needs at least one")
    try:
        import pycuda.driver as drv

        drv.init()
        count = drv.Device.count()
    except Exception as exc:  # noqa: BLE001 - no pycuda, no driver: no GPU to give a worker
        raise ClusterError(f"a local cluster runs one worker per GPU, and no GPU was found ({first_line(exc)}). "
                           "Join a cluster of GPU machines with --cluster ADDRESS instead") from None
    if count == 0:
        raise ClusterError("a local cluster runs one worker per GPU, and this machine has none")
    return [str(i) for i in range(count)]


def local_cluster(gpus: Sequence[str | int] | None = None, *, dashboard_address: str | None = None) -> Any:
    """A Dask cluster on this machine with one worker process per GPU, named gpu<ID>, one
    thread each, each seeing only its GPU (CUDA_VISIBLE_DEVICES=<ID>, KGEN_DEVICE=0).

    gpus: the GPU ids (default: every GPU, see gpu_ids()). Workers may start compile
    processes (not daemonic), and the scheduler hands a worker one task at a time."""
    require_distributed()
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    ids = [str(g) for g in gpus] if gpus is not None else gpu_ids()
    if not ids:
        raise ClusterError("a local cluster needs at least one GPU id")
    quiet = logging.WARNING  # the workers' and scheduler's routine INFO lines would bury the progress bar
    workers = {f"gpu{g}": {"cls": Nanny, "options": {"nthreads": 1, "host": "127.0.0.1", "silence_logs": quiet,
                                                     "env": {"CUDA_VISIBLE_DEVICES": g, "KGEN_DEVICE": "0"}}}
               for g in ids}
    # Without a dashboard the scheduler still serves its health and metrics pages: on a free port.
    options = {"host": "127.0.0.1", "dashboard": dashboard_address is not None,
               "dashboard_address": dashboard_address or "127.0.0.1:0"}
    scheduler = {"cls": Scheduler, "options": options}
    with dask.config.set({"distributed.worker.daemon": False, "distributed.scheduler.worker-saturation": 1.0}):
        return SpecCluster(workers=workers, scheduler=scheduler, name="kgen-local", silence_logs=quiet)


def _connect(cluster: Any) -> tuple[Any, list[Any], str]:
    """(client, what to close afterwards, a description) for a cluster= argument."""
    distributed = require_distributed()
    if isinstance(cluster, distributed.Client):
        return cluster, [], f"on the Dask scheduler at {cluster.scheduler.address}"
    if isinstance(cluster, str):
        text = cluster.strip()
        if text == "local":
            made = local_cluster()
            try:
                client = distributed.Client(made)
            except BaseException:
                made.close()
                raise
            return client, [client, made], f"on a local cluster of {len(made.workers)} GPU worker(s)"
        try:
            if text.endswith(".json"):
                if not os.path.isfile(text):
                    raise ClusterError(f"the scheduler file {text} does not exist")
                client = distributed.Client(scheduler_file=text, timeout="30s")
            else:
                client = distributed.Client(text, timeout="30s")
        except ClusterError:
            raise
        except (OSError, TimeoutError, ValueError) as exc:
            raise ClusterError(f"cannot reach the Dask scheduler at {text}: {first_line(exc)}. Give its address "
                               "(tcp://HOST:8786), a scheduler file (.json), or 'local'") from None
        return client, [client], f"on the Dask scheduler at {client.scheduler.address}"
    if hasattr(cluster, "scheduler_address"):
        client = distributed.Client(cluster)
        return client, [client], f"on the Dask scheduler at {cluster.scheduler_address}"
    raise ClusterError(f"cluster={cluster!r} is not allowed: 'local', a scheduler address (tcp://HOST:8786), a "
                       "scheduler file (.json), a distributed.Client or a Dask cluster object")


# ---------------------------------------------------------------------------------------
# What travels between this process and the workers
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class _Job:
    """One problem for one device model, as a task's argument."""

    token: str  # this run's id: events and cached runners are per run
    index: int  # the problem's place in the catalogue
    model: int  # the device model's number in this run
    attempt: int  # 1, then 2, ... when this process resubmits after a broken context
    family: str
    family_module: str
    problem: dict[str, Any]
    label: str
    dtype: str
    options: dict[str, Any]  # autotune's strategy, max_configs, time_budget_s, seed, restrict
    runner: Any
    compiler: Any
    known: dict[str, list[dict[str, Any]]]  # problem key -> candidate rows to resume from
    workers: int | None  # compile processes (None: the share of its host's CPUs)
    compile_workers: dict[str, int]  # host -> compile processes per worker


@dataclasses.dataclass
class _Outcome:
    """What a task returns: everything its autotune wrote, and where it ran."""

    index: int
    model: int
    attempt: int
    key: str
    ident: dict[str, Any]
    candidates: list[dict[str, Any]]
    result_row: dict[str, Any] | None
    result: TuneResult | None
    error: str | None
    context_lost: str | None
    address: str
    worker: str
    pid: int
    elapsed_s: float


@dataclasses.dataclass
class CatalogueEntry:
    """One problem of a catalogue (on one device model), as the run ended for it.

    status: "tuned" (measured now), "in database" (skipped: stored by an earlier run),
    "compiled" (a dry run) or "failed" (error says why).
    worker: the cluster worker that tuned it (None in this process).
    attempts: how many times it was started; retries: one line per attempt that was lost
    and why (a worker that died, a GPU whose context broke).
    index: its place in the catalogue; model: on a cluster, the number of its device model.
    """

    problem: dict[str, Any]
    label: str
    status: str
    result: TuneResult | None = None
    error: str | None = None
    device: str = ""
    arch: str = ""
    worker: str | None = None
    attempts: int = 1
    retries: list[str] = dataclasses.field(default_factory=list)
    elapsed_s: float = 0.0
    index: int = 0
    model: int = 0

    def to_dict(self) -> dict[str, Any]:
        r = self.result
        return {"problem": self.problem, "label": self.label, "status": self.status, "error": self.error,
                "device": self.device, "arch": self.arch, "worker": self.worker, "attempts": self.attempts,
                "retries": list(self.retries), "elapsed_s": self.elapsed_s,
                "best": r.best.to_dict() if r is not None and r.best is not None else None,
                "best_ms": r.best_ms if r is not None else None, "decided": r.decided if r is not None else None,
                "note": r.note if r is not None else None, "counts": dict(r.counts) if r is not None else None}


@dataclasses.dataclass
class ClusterRun:
    entries: list[CatalogueEntry]
    where: str
    notes: list[str]


class _TaskStore(TuneDB):
    """The tuning database as a task sees it: the candidate rows this process sent (to
    resume from) and what the task's autotune writes, all in memory. It never opens a
    file; what was written goes back to the driver with the task's result."""

    def __init__(self, known: dict[str, list[dict[str, Any]]]):
        super().__init__(Path("(in memory, on a cluster worker)"), read_only=False, timeout=0.0)
        self.known = {k: {r["spec_key"]: dict(r) for r in rows} for k, rows in known.items()}
        self.written: dict[str, dict[str, dict[str, Any]]] = {}
        self.result_row: dict[str, Any] | None = None

    def _connection(self) -> Any:
        raise TuneDBError("a cluster task keeps its results in memory and opens no database file", self.path)

    def candidates(self, key: str) -> list[dict[str, Any]]:
        rows = dict(self.known.get(key, {}))
        rows.update(self.written.get(key, {}))
        return list(rows.values())

    def put_candidates(self, key: str, rows: list[dict[str, Any]]) -> None:
        self.written.setdefault(key, {}).update({r["spec_key"]: dict(r) for r in rows})

    def result(self, key: str, strategy: str | None = None) -> dict[str, Any] | None:
        return None  # the driver submits only problems it holds no finished result for

    def put_result(self, key: str, strategy: str, ident: dict[str, Any], best_json: str, best_ms: float,
                   summary: dict[str, Any]) -> None:
        self.result_row = {"key": key, "strategy": strategy, "ident": dict(ident), "best_json": best_json,
                           "best_ms": best_ms, "summary": summary}

    def results_for_device(self, family: str, dtype: str, device: str, arch: str) -> list[dict[str, Any]]:
        return []

    def all_results(self) -> list[dict[str, Any]]:
        return []

    def forget(self, key: str) -> None:
        self.known.pop(key, None)
        self.written.pop(key, None)

    def close(self) -> None:
        pass


class _Watched:
    """A runner that notes when the device broke (ContextLost), so that its worker can be
    replaced: a broken CUDA context stays broken for the whole process."""

    def __init__(self, runner: Any):
        self.runner = runner
        self.device = runner.device
        self.lost: str | None = None

    def prepare(self, cls: type[Spec], problem: dict[str, Any], dtype: str, seed: int | None = None) -> None:
        self.runner.prepare(cls, problem, dtype, seed)

    def verify(self, spec: Spec) -> tuple[float, float, int]:
        try:
            return self.runner.verify(spec)
        except ContextLost as exc:
            self.lost = first_line(exc)
            raise

    def time(self, specs: Sequence[Spec], samples: int, warmup: int = 1) -> list[list[float]]:
        try:
            return self.runner.time(specs, samples, warmup)
        except ContextLost as exc:
            self.lost = first_line(exc)
            raise

    def close(self) -> None:
        self.runner.close()


# ---------------------------------------------------------------------------------------
# On a worker
# ---------------------------------------------------------------------------------------

_process: dict[str, Any] = {"token": None, "runner": None, "broken": None}
_runner_lock = threading.Lock()
# The tunes of one worker process share its GPU: one at a time, however many threads it has.
_gpu_lock = threading.Lock()


def _runner_for(job: _Job) -> Any:
    """This process' runner for the run (made once per run: a CUDA runner holds a context)."""
    with _runner_lock:
        if _process["token"] != job.token or _process["runner"] is None:
            _process["runner"] = runner_from(job.runner, job.options.get("seed"))
            _process["token"] = job.token
        return _process["runner"]


def _event(kind: str, job: _Job, **info: Any) -> None:
    from distributed import get_worker

    worker = get_worker()
    info.update(kind=kind, token=job.token, index=job.index, model=job.model, attempt=job.attempt,
                label=job.label, name=str(worker.name), address=worker.address, pid=os.getpid())
    worker.log_event(TOPIC_PROGRESS if kind == "progress" else TOPIC_ATTEMPTS, info)


def _probe(job: _Job) -> dict[str, Any]:
    """Run on every worker at the start: its device model, CPUs and whether it can tune."""
    try:
        importlib.import_module("kgen.ops")
        importlib.import_module(job.family_module)
        runner = _runner_for(job)
        nvcc = toolchain_version()
        if nvcc == "no nvcc" and job.compiler is None:
            raise TuneError("nvcc is not on this worker's PATH; install the CUDA toolkit there")
        return {"device": runner.device.name, "arch": runner.device.arch, "nvcc": nvcc, "kgen": __version__,
                "cpus": _usable_cpus(), "machine_cpus": os.cpu_count() or 1,
                "daemon": bool(multiprocessing.current_process().daemon),
                "pid": os.getpid(), "visible": os.environ.get("CUDA_VISIBLE_DEVICES")}
    except Exception as exc:  # noqa: BLE001 - reported per worker by the driver
        return {"error": f"{type(exc).__name__}: {first_line(exc)}"}


def _usable_cpus() -> int:
    """The CPUs this process may run on (a batch job's allocation, not the whole machine's)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _compile_processes(probes: list[dict[str, Any]]) -> int:
    """Compile processes for each worker of one machine: all the CPUs a worker may use but
    one when it has an allocation of its own (a batch job's), else its share of the machine's."""
    if any(p["cpus"] < p["machine_cpus"] for p in probes):
        return max(1, min(p["cpus"] for p in probes) - 1)
    return max(1, probes[0]["machine_cpus"] // len(probes) - 1)


def _tune_task(job: _Job) -> _Outcome:
    """A task: tune one problem on this worker's GPU and return what was measured."""
    with _gpu_lock:
        if _process["broken"]:
            _leave(_process["broken"])
        _event("start", job)
        try:
            return _tune(job)
        except Exception as exc:
            _event("error", job, error=f"{type(exc).__name__}: {first_line(exc)}")
            raise


def _leave(why: str) -> None:
    """This process' CUDA context broke in an earlier task: wait for the driver to restart
    the worker, and end the process if it does not (the task then runs elsewhere)."""
    logger.warning("kgen: this worker's CUDA context is broken (%s); waiting to be restarted", why)
    deadline = time.monotonic() + BROKEN_WORKER_WAIT_S
    while time.monotonic() < deadline:
        time.sleep(0.5)
    os._exit(70)


def _tune(job: _Job) -> _Outcome:
    from distributed import get_worker
    from distributed.comm import get_address_host

    from .runners import RecordedRunner
    from .tuner import autotune, identity

    importlib.import_module("kgen.ops")
    importlib.import_module(job.family_module)
    worker = get_worker()
    cls = family_class(job.family)
    runner = _runner_for(job)
    watched = _Watched(runner)
    store = _TaskStore(job.known)
    host = get_address_host(worker.address)
    compile_workers = job.workers if job.workers is not None else job.compile_workers.get(
        host, max(1, _usable_cpus() - 1))
    if multiprocessing.current_process().daemon:
        compile_workers = 0  # a daemonic process may not start the compile pool's processes
    last = [-math.inf]

    def progress(ev: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - last[0] >= 1.0 or ev.get("phase") != "evaluate":
            last[0] = now
            best = ev.get("best_ms")
            _event("progress", job, phase=ev.get("phase"), done=ev.get("done", 0), target=ev.get("target", 0),
                   leaders=ev.get("leaders", 0),
                   best_ms=best if isinstance(best, (int, float)) and math.isfinite(best) else None)

    t0 = time.perf_counter()
    result: TuneResult | None = None
    error = None
    try:
        result = autotune(cls, job.problem, job.dtype, **job.options, db=store, force=True, resume=True,
                          runner=watched, arch=runner.device.arch if isinstance(runner, RecordedRunner) else None,
                          workers=compile_workers, compiler=job.compiler, progress=progress)
    except TuneError as exc:  # no candidate passed: the same on every worker, not worth a retry
        error = first_line(exc)
    if watched.lost:
        _process["broken"] = watched.lost
    problem = cls.normalize_problem(job.problem)
    ident = identity(cls, problem, job.dtype, runner.device)
    key = problem_key(cls.kernel, job.dtype, problem, ident["device"], ident["arch"], ident["nvcc"], ident["kgen"])
    rows = [row for k, written in store.written.items() if k == key for row in written.values()]
    return _Outcome(index=job.index, model=job.model, attempt=job.attempt, key=key, ident=ident, candidates=rows,
                    result_row=store.result_row, result=result, error=error, context_lost=watched.lost,
                    address=worker.address, worker=str(worker.name), pid=os.getpid(),
                    elapsed_s=time.perf_counter() - t0)


# ---------------------------------------------------------------------------------------
# The driver
# ---------------------------------------------------------------------------------------

def _model_of(info: dict[str, Any]) -> tuple[str, str, str, str]:
    return (info["device"], info["arch"], info["nvcc"], info["kgen"])


def _complete(hit: dict[str, Any] | None) -> bool:
    """A stored result the tuner would return as is (a run cut short is resumed instead)."""
    return hit is not None and bool(hit["summary"].get("counts", {}).get("complete", 1))


def run_catalogue(cls: type[Spec], problems: list[dict[str, Any]], dtype: str, options: dict[str, Any], *,
                  cluster: Any, database: TuneDB, force: bool, resume: bool, runner: Any, workers: int | None,
                  compiler: Any, retries: int, label: Callable[[dict[str, Any]], str],
                  on_status: Callable[[dict[str, str]], None], on_done: Callable[[CatalogueEntry], None],
                  on_total: Callable[[int], None] | None = None, worker_timeout_s: float = 300.0) -> ClusterRun:
    """Tune `problems` on the workers of `cluster` (see the module docstring), writing each
    result to `database` as it arrives. on_status gets {worker: what it does} every half
    second; on_done gets each problem's CatalogueEntry as it ends."""
    require_distributed()
    import dask

    client, owned, where = _connect(cluster)
    try:
        # Workers this process starts or restarts (a local cluster's) may start compile processes.
        with dask.config.set({"distributed.worker.daemon": False}):
            return _Driver(client, where, cls, problems, dtype, options, database=database, force=force,
                           resume=resume, runner=runner, workers=workers, compiler=compiler, retries=retries,
                           label=label, on_status=on_status, on_done=on_done, on_total=on_total,
                           worker_timeout_s=worker_timeout_s).run()
    finally:
        for thing in owned:
            try:
                thing.close()
            except Exception:  # noqa: BLE001 - closing is best effort; the results are stored
                logger.debug("closing %r failed", thing, exc_info=True)


class _Driver:
    """One catalogue run on a cluster: probe the workers, submit what the database lacks,
    store what comes back, resubmit what a broken GPU lost, report.

    Targets: the device models of the workers present at the start. With one model, tasks
    may run on any worker (workers that join later take part). With several, each task is
    restricted to the workers of its model, by address; a worker that joins later (a
    restarted one has a new address) is asked for its model, and tasks whose workers are
    all gone are submitted again to the ones now there."""

    def __init__(self, client: Any, where: str, cls: type[Spec], problems: list[dict[str, Any]], dtype: str,
                 options: dict[str, Any], *, database: TuneDB, force: bool, resume: bool, runner: Any,
                 workers: int | None, compiler: Any, retries: int, label: Callable[[dict[str, Any]], str],
                 on_status: Callable[[dict[str, str]], None], on_done: Callable[[CatalogueEntry], None],
                 on_total: Callable[[int], None] | None, worker_timeout_s: float):
        from .tuner import _restriction

        self.client, self.where, self.cls, self.problems, self.dtype = client, where, cls, problems, dtype
        self.options, self.db, self.force, self.resume = options, database, force, resume
        self.runner, self.workers, self.compiler, self.retries = runner, workers, compiler, retries
        self.label, self.on_status, self.on_done, self.on_total = label, on_status, on_done, on_total
        self.worker_timeout_s = worker_timeout_s
        self.stored_strategy = options["strategy"] + _restriction(cls, options.get("restrict"))[1]
        self.token = uuid.uuid4().hex
        self.notes: list[str] = []
        self.reports: list[CatalogueEntry] = []
        self.models: list[tuple[str, str, str, str]] = []  # (device, arch, nvcc, kgen) of each target
        self.worker_model: dict[str, int | None] = {}  # address -> target model (None: not a target)
        self.names: dict[str, str] = {}  # address -> worker name
        self.compile_workers: dict[str, int] = {}  # host -> compile processes per worker
        self.restrict = False
        # key -> (future, job, addresses it is restricted to or None)
        self.pending: dict[str, tuple[Any, _Job, list[str] | None]] = {}
        self.history: dict[tuple[int, int], list[str]] = collections.defaultdict(list)  # resubmissions, why
        # (problem, model, attempt) -> (address, pid) of the start that returned an outcome
        self.completed: dict[tuple[int, int, int], tuple[str, int]] = {}
        self.rerouted: dict[tuple[int, int], int] = collections.defaultdict(int)
        self.submitted = 0
        self.status: dict[str, str] = {}
        self.lock = threading.Lock()
        self.stranded_since: dict[int, float] = {}  # model -> when its last worker was seen gone

    # -- workers ----------------------------------------------------------------------------
    def _job(self, index: int, model: int, attempt: int, known: dict[str, list[dict[str, Any]]]) -> _Job:
        problem = self.problems[index]
        return _Job(token=self.token, index=index, model=model, attempt=attempt, family=self.cls.kernel,
                    family_module=self.cls.__module__, problem=problem, label=self.label(problem), dtype=self.dtype,
                    options=dict(self.options), runner=self.runner, compiler=self.compiler, known=known,
                    workers=self.workers, compile_workers=self.compile_workers)

    def _alive(self) -> dict[str, dict[str, Any]]:
        return dict(self.client.scheduler_info(n_workers=-1)["workers"])

    def _probe(self, addresses: list[str], first: bool) -> None:
        """Ask workers for their device model; the first time, the models found become the
        run's targets and a worker that cannot tune is an error."""
        from distributed.comm import get_address_host

        answers = self.client.run(_probe, self._job(0, -1, 0, {}), workers=addresses, on_error="return")
        probes: dict[str, dict[str, Any]] = {
            a: p if isinstance(p, dict) else {"error": f"{type(p).__name__}: {first_line(p)}"}
            for a, p in answers.items()}
        if first:
            self.models = sorted({_model_of(p) for p in probes.values() if not p.get("error")})
        info = self._alive()
        failed = {}
        for address, p in sorted(probes.items()):
            name = str(info.get(address, {}).get("name", address))
            self.names[address] = name
            if p.get("error"):
                failed[name] = p["error"]
                self.worker_model[address] = None
                continue
            model = _model_of(p)
            self.worker_model[address] = self.models.index(model) if model in self.models else None
            if self.worker_model[address] is None:
                self.notes.append(f"note: worker {name} joined with {model[0]} ({model[1]}), which this run does "
                                  "not target; it may tune problems for its own device")
            host = get_address_host(address)
            self.compile_workers[host] = _compile_processes([q for a, q in probes.items() if not q.get("error")
                                                             and get_address_host(a) == host])
            if first and info.get(address, {}).get("nthreads", 1) > 1:
                self.notes.append(f"note: worker {name} has several threads; its tunes run one at a time (they "
                                  "share a GPU): start one worker per GPU with --nthreads 1")
            if first and p["daemon"] and self.workers != 0 and self.compiler is None:
                self.notes.append(f"note: worker {name} is a daemonic process, which cannot start compile "
                                  "processes: start workers with DASK_DISTRIBUTED__WORKER__DAEMON=False")
        if failed:
            text = "; ".join(f"worker {n}: {e}" for n, e in sorted(failed.items()))
            if first:
                raise ClusterError(f"these workers cannot tune: {text}. Every worker needs kgen, nvcc and a GPU "
                                   "(one worker per GPU)")
            self.notes.append(f"note: workers that joined later cannot tune: {text}")

    def _start(self) -> None:
        try:
            self.client.wait_for_workers(1, timeout=self.worker_timeout_s)
        except TimeoutError:
            raise ClusterError(f"no worker joined the cluster ({self.where}) within "
                               f"{self.worker_timeout_s:g} s") from None
        self._probe(sorted(self._alive()), first=True)
        self.restrict = len(self.models) > 1
        if self.restrict:
            self.notes.append("device models: " + "; ".join(f"{m[0]} ({m[1]})" for m in self.models)
                              + ": each problem is tuned once per model")

    def _addresses(self, model: int) -> list[str]:
        return sorted(a for a, m in self.worker_model.items() if m == model)

    def _refresh(self, now: float) -> None:
        """Follow the workers: ask new ones for their model, forget the gone ones, and send
        a restricted task whose workers all left to the ones of its model now there."""
        alive = self._alive()
        new = [a for a in alive if a not in self.worker_model]
        for gone in [a for a in self.worker_model if a not in alive]:
            del self.worker_model[gone]
        if new:
            self._probe(new, first=False)
        names = {str(w.get("name")) for w in alive.values()}
        with self.lock:
            for name in [n for n in self.status if n not in names]:
                del self.status[name]
        for key, (fut, job, addresses) in list(self.pending.items()):
            if addresses is None or any(a in alive for a in addresses):
                self.stranded_since.pop(job.model, None)
                continue
            if self._addresses(job.model):
                del self.pending[key]
                fut.cancel()
                self._submit(job, restricted=True)
            elif now - self.stranded_since.setdefault(job.model, now) > self.worker_timeout_s:
                del self.pending[key]
                fut.cancel()
                self._fail(job, f"no worker with {self.models[job.model][0]} was left for "
                                f"{self.worker_timeout_s:g} s")
        if not alive:
            for key, (fut, job, _) in list(self.pending.items()):
                if now - self.stranded_since.setdefault(-1, now) > self.worker_timeout_s:
                    del self.pending[key]
                    fut.cancel()
                    self._fail(job, f"no worker was left for {self.worker_timeout_s:g} s")
        else:
            self.stranded_since.pop(-1, None)

    # -- the database -------------------------------------------------------------------------
    def _key(self, index: int, model: int) -> str:
        device, arch, nvcc, kgen = self.models[model]
        return problem_key(self.cls.kernel, self.dtype, self.problems[index], device, arch, nvcc, kgen)

    def _known(self, index: int, model: int) -> dict[str, list[dict[str, Any]]]:
        if not self.resume:
            return {}
        key = self._key(index, model)
        return {key: self.db.candidates(key)}

    def _entry(self, index: int, model: int, status: str, **fields: Any) -> CatalogueEntry:
        problem = self.problems[index]
        return CatalogueEntry(problem, self.label(problem), status, index=index, model=model, **fields)

    def _stored(self, index: int, model: int) -> CatalogueEntry | None:
        from .tuner import _from_db

        if self.force:
            return None
        hit = self.db.result(self._key(index, model), self.stored_strategy)
        if hit is None or not _complete(hit):
            return None
        device, arch = self.models[model][:2]
        result = _from_db(self.cls, self.problems[index], self.dtype, DeviceInfo(device, arch, {}), self.db, hit,
                          time.perf_counter())
        return self._entry(index, model, "in database", result=result, device=device, arch=arch, attempts=0)

    def _store(self, outcome: _Outcome) -> None:
        """Write what a task measured, in this process only."""
        if outcome.candidates:
            self.db.put_candidates(outcome.key, outcome.candidates)
        row = outcome.result_row
        if row is not None:
            self.db.put_result(row["key"], row["strategy"], row["ident"], row["best_json"], row["best_ms"],
                               row["summary"])
            dispatch = sys.modules.get(f"{__package__}.dispatch")
            if dispatch is not None:
                dispatch.forget()

    # -- tasks -------------------------------------------------------------------------------
    def _submit(self, job: _Job, restricted: bool = False) -> None:
        addresses = self._addresses(job.model) if self.restrict or restricted else None
        self.submitted += 1
        fut = self.client.submit(_tune_task, job, key=f"kgen-tune-{self.token[:8]}-{job.index}-{job.model}-"
                                 f"{job.attempt}-{self.submitted}", pure=False, retries=self.retries,
                                 workers=addresses or None, allow_other_workers=False)
        self.pending[fut.key] = (fut, job, addresses)
        self.ac.add(fut)

    def _handle(self, fut: Any, value: Any, job: _Job, addresses: list[str] | None) -> None:
        """One task ended: `value` is its outcome (fetched as soon as it finished, so that a
        worker dying next loses nothing), or its exception."""
        slot = (job.index, job.model)
        if fut.status in ("pending", "lost") or (fut.status == "finished" and not isinstance(value, _Outcome)):
            # Finished, then its result was lost with its worker before it was fetched: the
            # scheduler computes it again.
            self.pending[fut.key] = (fut, job, addresses)
            self.ac.add(fut)
            return
        if fut.status != "finished":
            exc = value if isinstance(value, BaseException) else None
            why = f"{type(exc).__name__}: {first_line(exc)}" if exc is not None else f"the task was {fut.status}"
            if type(exc).__name__ == "KilledWorker":
                why = f"lost with its worker every time it ran ({why})"
            fut.release()
            self._fail(job, why)
            return
        outcome: _Outcome = value
        fut.release()
        self.completed[(job.index, job.model, job.attempt)] = (outcome.address, outcome.pid)
        self._store(outcome)
        with self.lock:
            self.status.pop(outcome.worker, None)
        if outcome.context_lost:
            self.history[slot].append(f"the CUDA context on worker {outcome.worker} broke ({outcome.context_lost}); "
                                      "the worker was restarted")
            self._restart(outcome.address)
            if job.attempt <= self.retries:
                self._submit(self._job(job.index, job.model, job.attempt + 1, self._known(*slot)))
                return
        elif _model_of(outcome.ident) != self.models[job.model]:
            # A worker of another model (one that joined later) took it: its result is stored
            # under its own device, and the problem goes to a worker of the model it is for.
            self._finish(self._report(outcome, job, outcome.ident["device"], outcome.ident["arch"]))
            self.rerouted[slot] += 1
            self._refresh(time.monotonic())
            if self.rerouted[slot] <= 3 and self._addresses(job.model):
                self._submit(self._job(job.index, job.model, job.attempt + 1, self._known(*slot)), restricted=True)
            else:
                self._fail(job, f"no worker with {self.models[job.model][0]} took it")
            return
        self._finish(self._report(outcome, job, *self.models[job.model][:2]))

    def _report(self, outcome: _Outcome, job: _Job, device: str, arch: str) -> CatalogueEntry:
        status = "failed" if outcome.error or outcome.result is None else "tuned"
        error = outcome.error
        if outcome.context_lost:
            status, error = "failed", f"the CUDA context broke on every attempt; the last time: {outcome.context_lost}"
        return self._entry(job.index, job.model, status, result=outcome.result, error=error, device=device,
                           arch=arch, worker=outcome.worker, elapsed_s=outcome.elapsed_s)

    def _fail(self, job: _Job, why: str) -> None:
        device, arch = self.models[job.model][:2]
        self._finish(self._entry(job.index, job.model, "failed", error=why, device=device, arch=arch))

    def _restart(self, address: str) -> None:
        try:
            self.client.restart_workers([address], timeout=120, raise_for_error=False)
        except Exception as exc:  # noqa: BLE001 - a worker without a nanny ends itself instead
            logger.warning("could not restart worker %s (%s); it ends its process itself", address,
                           first_line(exc))

    def _finish(self, report: CatalogueEntry) -> None:
        self.reports.append(report)
        self.on_done(report)

    # -- events -------------------------------------------------------------------------------
    def _on_event(self, event: Any) -> None:
        msg = event[1] if isinstance(event, tuple) else event
        if not isinstance(msg, dict) or msg.get("token") != self.token:
            return
        with self.lock:
            name = msg["name"]
            if msg["kind"] == "start":
                self.status[name] = f"{msg['label']} starting"
            elif msg["kind"] == "progress":
                best = msg.get("best_ms")
                text = f", best {best:.4f} ms" if best is not None else ""
                if msg.get("phase") == "leaders":
                    self.status[name] = f"{msg['label']} re-timing {msg.get('leaders', 0)} leaders{text}"
                else:
                    self.status[name] = f"{msg['label']} {msg.get('done', 0)}/{msg.get('target', 0)}{text}"

    def _attempt_events(self) -> dict[tuple[int, int, int], list[dict[str, Any]]]:
        """Every start and error event of this run, by (problem, model, attempt)."""
        out: dict[tuple[int, int, int], list[dict[str, Any]]] = collections.defaultdict(list)
        for event in self.client.get_events(TOPIC_ATTEMPTS):
            msg = event[1] if isinstance(event, tuple) else event
            if isinstance(msg, dict) and msg.get("token") == self.token and msg.get("kind") in ("start", "error"):
                out[(msg["index"], msg["model"], msg["attempt"])].append(msg)
        return out

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> ClusterRun:
        from distributed import as_completed

        self._start()
        slots = [(i, m) for i in range(len(self.problems)) for m in range(len(self.models))]
        if self.on_total is not None:
            self.on_total(len(slots))
        self.ac = as_completed(with_results=True, raise_errors=False)
        for topic in (TOPIC_ATTEMPTS, TOPIC_PROGRESS):
            self.client.subscribe_topic(topic, self._on_event)
        try:
            for index, model in slots:
                stored = self._stored(index, model)
                if stored is not None:
                    self._finish(stored)
                else:
                    self._submit(self._job(index, model, 1, self._known(index, model)))
            self._loop()
        except BaseException:
            self.client.cancel([f for f, _, _ in self.pending.values()])
            raise
        finally:
            for topic in (TOPIC_ATTEMPTS, TOPIC_PROGRESS):
                try:
                    self.client.unsubscribe_topic(topic)
                except Exception:  # noqa: BLE001 - the client may be closing
                    pass
        self._explain_retries()
        return ClusterRun(self.reports, self.where, self.notes)

    def _loop(self) -> None:
        last_check = time.monotonic()
        while self.pending:
            for fut, value in self.ac.next_batch(block=False) if self.ac.has_ready() else []:
                entry = self.pending.pop(fut.key, None)
                if entry is not None:  # None: cancelled and submitted again
                    self._handle(fut, value, entry[1], entry[2])
            now = time.monotonic()
            if now - last_check >= 2.0:
                last_check = now
                self._refresh(now)
            with self.lock:
                status = dict(self.status)
            self.on_status(status)
            if self.pending and not self.ac.has_ready():
                time.sleep(0.2)

    def _explain_retries(self) -> None:
        """Fill in each report's attempts and retries: from the workers' start and error
        events, a start that returned no outcome was lost with its worker or raised; and the
        resubmissions this process made after a broken CUDA context."""
        events = self._attempt_events()
        for report in self.reports:
            if report.status == "in database":
                continue
            lines, starts = [], 0
            for (index, model, attempt), evs in sorted(events.items()):
                if (index, model) != (report.index, report.model):
                    continue
                errors: dict[tuple[str, int], list[str]] = collections.defaultdict(list)
                for e in evs:
                    if e["kind"] == "error":
                        errors[(e["address"], e["pid"])].append(e["error"])
                begun = [e for e in evs if e["kind"] == "start"]
                starts += len(begun)
                done = self.completed.get((index, model, attempt))
                last = max((i for i, e in enumerate(begun) if (e["address"], e["pid"]) == done), default=None)
                for i, e in enumerate(begun):
                    if i == last:
                        continue
                    raised = errors.get((e["address"], e["pid"]))
                    if raised:
                        lines.append(f"raised on worker {e['name']} ({raised.pop(0)}) and ran again")
                    else:
                        lines.append(f"lost with worker {e['name']} (its process {e['pid']} ended)")
            lines.extend(self.history.get((report.index, report.model), []))
            report.attempts = starts or (1 if report.worker else 0)
            report.retries = lines
