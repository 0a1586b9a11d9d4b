"""The autotuner: search a family's spec space for one problem, fast, trustworthy, remembered.

    result = kgen.autotune(kgen.Matmul, problem={"M": 4096, "N": 4096, "K": 4096}, dtype="float32",
                           strategy="guided")
    result.best, result.best_ms, result.records, print(result.table())

The tuner knows families only through the family interface (kgen.core.family). A run:

 1. enumerates the space and prunes it before compiling (the family's prune_reason
    against the device's limits; kgen.tune.device);
 2. compiles the candidates in a process pool (kgen.tune.pool), while this process
    verifies and times the ones already compiled;
 3. prunes again on ptxas' report (kgen.tune.prune);
 4. verifies each candidate on random data against the float64 reference, with the
    output poisoned by NaN before the launch (a runner, kgen.tune.runners); a failure
    is recorded with its reason and the run goes on;
 5. screens each survivor with a few CUDA-event samples (L2 flushed before each);
 6. re-times the leaders interleaved (every round runs each leader once, in a
    shuffled order, so drift in clocks or temperature cannot favour one) until the
    winner is separated from the runner-up by more than the noise (kgen.tune.stats),
    or a cap is hit (the result then says the top two are tied);
 7. writes every record as it goes, and the result at the end, to the tuning
    database (kgen.tune.db), so a second run returns at once and an interrupted
    run resumes.

Strategies: "exhaustive" (every candidate), "random" (a uniform sample), and
"guided" (a space-filling start, then batches picked by a quadratic model of
log(time) fitted on the fly, half of each batch near the current leaders;
kgen.tune.model). A new strategy is a name in STRATEGIES and a method of _Tuner
that evaluates candidates through _run_batch or _evaluate.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import json
import logging
import math
import statistics
import sys
import time
from typing import Any, Callable, Iterable

import numpy as np

from .. import __version__
from ..core.compiler import default_workers
from ..core.spec import Spec, SpecError, spec_from_json
from ..core.spec import family as family_class
from .db import TuneDB, open_db, problem_key
from .device import DeviceInfo, arch_limits, toolchain_version
from .model import (GUIDED_BATCH, GUIDED_CACHED_FIRST_BATCHES, GUIDED_PATIENCE, GUIDED_POOL_BATCH_FROM,
                    GUIDED_PROBE_BATCHES, GUIDED_ROLLING_PATIENCE, GUIDED_START_BATCHES, choose_batch,
                    code_matrix, feature_matrix, maximin, near_leaders)
from .pool import CompilePool
from .prune import ptxas_reason
from .records import ContextLost, LaunchFailure, Record, TuneError, TuneResult, record_order
from .runners import CudaRunner, RecordedRunner, Runner
from .stats import median_iqr, separated, stderr_of_median

logger = logging.getLogger(__name__)

STRATEGIES = ("exhaustive", "random", "guided")


def _family(name_or_cls: type[Spec] | str) -> type[Spec]:
    try:
        return family_class(name_or_cls)
    except SpecError as exc:
        raise TuneError(str(exc)) from None


def identity(cls: type[Spec], problem: dict[str, Any], dtype: str, device: DeviceInfo,
             nvcc: str | None = None) -> dict[str, Any]:
    """What a tuning result is stored under: family, dtype, problem, device, toolchain, kgen version."""
    return {"family": cls.kernel, "dtype": dtype, "problem": problem, "bucket": tuple(cls.bucket(problem)),
            "device": device.name, "arch": device.arch, "nvcc": nvcc if nvcc is not None else toolchain_version(),
            "kgen": __version__}


def autotune(family: type[Spec] | str, problem: dict[str, Any], dtype: str = "float32", *,
             strategy: str = "guided", max_configs: int | None = None, time_budget_s: float | None = None,
             db: Any = None, force: bool = False, resume: bool = True, runner: Runner | None = None,
             dry_run: bool = False, arch: str | None = None, workers: int | None = None,
             seed: int | None = None, progress: Callable[[dict], None] | None = None,
             compiler: Callable[[Spec, str], dict] | None = None, leaders: int = 6, screen_samples: int = 5,
             min_warps: int = 4, save: bool = True,
             restrict: dict[str, Iterable[Any]] | Callable[[Spec], bool] | None = None,
             cached: Callable[[Spec], bool] | None = None) -> TuneResult:
    """Tune `family` for `problem` and return a TuneResult (see the module docstring).

    strategy       "exhaustive", "random" or "guided".
    max_configs    most candidates to verify and time (guided and random default to a
                   third of the pruned space; exhaustive to all of it).
    time_budget_s  stop taking new candidates after this many seconds (leaders are still
                   re-timed).
    db             a kgen.tune.db.TuneDB, a path, None for the default database, or False
                   for none.
    force          tune again even if the database holds a result for this problem.
    resume         reuse the candidate records the database holds for this problem.
    runner         what verifies and times (default: CudaRunner on this GPU).
    dry_run        no GPU: enumerate, prune, compile for `arch` (default sm_90) and
                   report ptxas' resources.
    workers        compile processes (default: one fewer than the CPU count, at least 1; 0 compiles
                   in-process).
    compiler       replaces kgen.core.kernel.compile (spec, arch) -> ptxas resources; runs
                   in-process. For tests.
    restrict       keep only part of the family's space: {field: allowed values} (tuple
                   fields as tuples) or a predicate on the spec. The result is stored
                   under the strategy name with the restriction appended, so it never
                   answers for an unrestricted run.
    cached         which specs cost no compile (guided searches those first): default, the
                   ones whose cubin is in the disk cache; none when `compiler` is given.
                   For replays and tests.
    """
    t0 = time.perf_counter()
    cls = _family(family)
    if strategy not in STRATEGIES:
        raise TuneError(f"strategy={strategy!r} is not allowed: one of {list(STRATEGIES)}")
    if max_configs is not None and (isinstance(max_configs, bool) or not isinstance(max_configs, int)
                                    or max_configs < 1):
        raise TuneError(f"max_configs={max_configs!r} is not allowed: a positive integer or None")
    if time_budget_s is not None and not time_budget_s > 0:
        raise TuneError(f"time_budget_s={time_budget_s!r} is not allowed: a positive number of seconds or None")
    problem = cls.normalize_problem(problem)
    cls.default_spec(problem, dtype)  # a bad dtype fails here, naming the field

    if dry_run:
        from ..core.compiler import check_arch

        arch = check_arch(arch or "sm_90")
        device = DeviceInfo(f"(dry run for {arch})", arch, arch_limits(arch))
        database = None
    else:
        if runner is None:
            runner = CudaRunner(seed=seed)
        device = runner.device
        if arch is None:
            from ..core.kernel import default_arch

            arch = device.arch if isinstance(runner, RecordedRunner) else default_arch()
        database = _open(db)

    ident = identity(cls, problem, dtype, device)
    keep, label = _restriction(cls, restrict)
    stored_strategy = strategy + label
    key = problem_key(cls.kernel, dtype, problem, device.name, device.arch, ident["nvcc"], __version__)
    if database is not None and not force:
        hit = database.result(key, stored_strategy)
        # A run cut short (time budget, broken context) is stored for dispatch, but the
        # next tune resumes it rather than returning it.
        if hit is not None and hit["summary"].get("counts", {}).get("complete", 1):
            logger.info("%s %s %s: the tuning database holds the result", cls.kernel, dtype, problem)
            return _from_db(cls, problem, dtype, device, database, hit, t0)

    tuner = _Tuner(cls, problem, dtype, strategy=strategy, max_configs=max_configs, time_budget_s=time_budget_s,
                   runner=runner, database=database if save else None, key=key, arch=arch, device=device,
                   workers=default_workers() if workers is None else workers, seed=seed,
                   progress=progress,
                   compiler=compiler, leaders=leaders, screen_samples=screen_samples, min_warps=min_warps,
                   dry_run=dry_run, resume=resume and database is not None, t0=t0, keep=keep,
                   cached=cached)
    result = tuner.run()
    logger.info("%s %s %s: best %s (%s ms) after %.1f s; %s", cls.kernel, dtype, problem,
                result.best.to_json() if result.best is not None else None, result.best_ms, result.elapsed_s,
                result.note)
    if database is not None and save and result.best is not None and result.best_ms is not None:
        result.strategy = stored_strategy
        database.put_result(key, stored_strategy, ident, result.best.to_json(), result.best_ms, result.summary())
        # This process' dispatch picks the new result up at once. Dispatch imports the
        # tuner (for tune=True), not the other way round: one that was never imported
        # has memoised nothing.
        dispatch = sys.modules.get(f"{__package__}.dispatch")
        if dispatch is not None:
            dispatch.forget()
    return result


def _restriction(cls: type[Spec], restrict: dict[str, Iterable[Any]] | Callable[[Spec], bool] | None,
                 ) -> tuple[Callable[[Spec], bool] | None, str]:
    """(predicate, label) for a restrict= argument."""
    if restrict is None:
        return None, ""
    if callable(restrict):
        return restrict, f"[where {getattr(restrict, '__name__', 'predicate')}]"
    if not isinstance(restrict, dict):
        raise TuneError(f"restrict must be a dict of field -> allowed values or a predicate, got {restrict!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    allowed = {}
    for field, values in restrict.items():
        if field not in names:
            raise TuneError(f"restrict names {field!r}, which is not a {cls.kernel} field; fields: {sorted(names)}")
        # A list or set holds several allowed values; a tuple does too, except for a tuple
        # field (tile=(128, 128, 8) is one value of tile).
        if isinstance(values, (list, set, frozenset)) or (isinstance(values, tuple)
                                                          and field not in _tuple_fields(cls)):
            vals = list(values)
        else:
            vals = [values]
        allowed[field] = {json.dumps(list(v) if isinstance(v, tuple) else v) for v in vals}

    def keep(spec: Spec) -> bool:
        return all(json.dumps(list(getattr(spec, f)) if isinstance(getattr(spec, f), tuple) else getattr(spec, f))
                   in ok for f, ok in allowed.items())

    label = "[where " + " ".join(f"{f}={'|'.join(sorted(v))}" for f, v in sorted(allowed.items())) + "]"
    return keep, label


def _tuple_fields(cls: type[Spec]) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if isinstance(f.default, tuple)}


def _open(db: Any) -> TuneDB | None:
    if db is False:
        return None
    if isinstance(db, TuneDB):
        return db
    return open_db(db)


def _from_db(cls: type[Spec], problem: dict[str, Any], dtype: str, device: DeviceInfo, database: TuneDB,
             hit: dict[str, Any], t0: float) -> TuneResult:
    records = []
    for row in database.candidates(hit["key"]):
        try:
            records.append(Record.from_row(row))
        except ValueError:
            continue  # a spec this kgen no longer accepts
    records.sort(key=record_order)
    s = hit["summary"]
    return TuneResult(family=cls.kernel, dtype=dtype, problem=problem, strategy=hit["strategy"],
                      best=spec_from_json(hit["best"]), best_ms=hit["best_ms"], best_iqr_ms=s.get("best_iqr_ms"),
                      decided=bool(s.get("decided")), note=s.get("note", ""), records=records,
                      counts=dict(s.get("counts", {})), elapsed_s=time.perf_counter() - t0, device=device.name,
                      arch=device.arch, key=hit["key"], from_db=True)


def _no_spec(_spec: Spec) -> bool:
    return False


def _one_blas_thread() -> Any:
    """numpy's BLAS limited to one thread while the compile pool runs: the model's fits are
    small, and a BLAS that spreads them over every core, which nvcc processes already fill,
    spends seconds a fit spinning (measured on a 16-core H200 host: 67 s of a 91 s tune)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # a dependency; without it the fits are slower under load, not wrong
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


class _StopTuning(Exception):
    """Raised inside a run to stop taking candidates (the CUDA context broke)."""


class _Tuner:
    """One tuning run: the space, its records, the compile pool and the strategy's loop."""

    def __init__(self, cls: type[Spec], problem: dict[str, Any], dtype: str, *, strategy: str,
                 max_configs: int | None, time_budget_s: float | None, runner: Runner | None,
                 database: TuneDB | None, key: str, arch: str, device: DeviceInfo, workers: int, seed: int | None,
                 progress: Callable[[dict], None] | None, compiler: Callable[[Spec, str], dict] | None, leaders: int,
                 screen_samples: int, min_warps: int, dry_run: bool, resume: bool, t0: float,
                 keep: Callable[[Spec], bool] | None = None, cached: Callable[[Spec], bool] | None = None) -> None:
        self.cls, self.problem, self.dtype = cls, problem, dtype
        self.strategy, self.max_configs, self.time_budget_s = strategy, max_configs, time_budget_s
        self.runner, self.db, self.key, self.arch, self.device = runner, database, key, arch, device
        self.limits = device.limits
        self.progress = progress
        self.leaders, self.screen_samples, self.min_warps = leaders, max(2, screen_samples), min_warps
        self.dry_run, self.resume, self.t0 = dry_run, resume, t0
        self.keep = keep
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.compiles = CompilePool(arch, workers, compiler)
        if cached is None:
            cached = _no_spec if compiler is not None or dry_run else self._in_disk_cache
        self.cached = cached
        self.records: dict[str, Record] = {}
        self.counts = {"space": 0, "pruned_before_compile": 0, "candidates": 0, "pruned_by_ptxas": 0,
                       "compile_errors": 0, "launched": 0, "wrong_results": 0, "launch_errors": 0, "timed": 0,
                       "resumed": 0}
        self.best_ms = math.inf
        self.target = 0
        self.stopped = ""
        self.complete = True  # False when a time budget or a broken context cut the run short
        self.lost_context = False
        self.evaluated = 0  # candidates compiled and judged in this run
        # Where a guided run's time goes (logged at the end): nvcc time summed over workers,
        # this process waiting for a compile, choosing candidates, verifying and timing.
        self.seconds = {"compiling": 0.0, "waiting": 0.0, "choosing": 0.0, "launching": 0.0}

    # -- bookkeeping ----------------------------------------------------------------------
    @property
    def live_runner(self) -> Runner:
        """The runner; a dry run has none because it launches nothing."""
        if self.runner is None:
            raise TuneError("a dry run launches nothing: no runner to verify or time with")
        return self.runner

    def _emit(self, phase: str, **info: Any) -> None:
        if self.progress is not None:
            self.progress({"phase": phase, "done": self.evaluated, "target": self.target, "best_ms": self.best_ms,
                           "compiled": self.compiles.done, "submitted": len(self.compiles.futures),
                           "launched": self.counts["launched"], **info})

    def _record(self, rec: Record) -> Record:
        self.records[rec.spec.key] = rec
        logger.debug("%s %s: %s", rec.status, rec.spec.to_json(),
                     f"{rec.median_ms:.4f} ms" if rec.median_ms is not None else rec.reason)
        if rec.status == "ok" and rec.median_ms is not None:
            self.best_ms = min(self.best_ms, rec.median_ms)
        if self.db is not None and rec.origin == "run" and rec.status != "compiled":
            if not (rec.status == "pruned" and not (rec.reason or "").startswith("ptxas")):
                self.db.put_candidates(self.key, [rec.to_row()])
        return rec

    def _over_budget(self) -> bool:
        # Never before one candidate was timed: a run always has an answer.
        return (self.time_budget_s is not None and self.best_ms < math.inf
                and time.perf_counter() - self.t0 > self.time_budget_s)

    # -- the run --------------------------------------------------------------------------
    def run(self) -> TuneResult:
        space, seen = [], set()
        for spec in self.cls.search_space(self.problem, self.dtype):
            if self.keep is not None and not self.keep(spec):
                continue
            if spec.key not in seen:
                seen.add(spec.key)
                space.append(spec)
        self.counts["space"] = len(space)
        survivors = []
        for spec in space:
            why = spec.prune_reason(self.problem, self.limits)
            if why:
                self.records[spec.key] = Record(spec, "pruned", reason=why)
                self.counts["pruned_before_compile"] += 1
            else:
                survivors.append(spec)
        self.counts["candidates"] = len(survivors)
        if not survivors:
            raise TuneError(f"no candidate of the {self.cls.kernel} space survives pruning for {self.problem} "
                            f"({len(space)} in the space)")
        if self.resume and self.db is not None:
            by_key = {s.key: s for s in survivors}
            for row in self.db.candidates(self.key):
                if row["spec_key"] in by_key:
                    try:
                        rec = Record.from_row(row)
                    except ValueError:
                        continue
                    self._record(rec)
                    self.counts["resumed"] += 1
                    self._count(rec)
        if not self.dry_run:
            self.live_runner.prepare(self.cls, self.problem, self.dtype, self.seed)
        try:
            if self.strategy == "guided" and not self.dry_run:
                with _one_blas_thread():
                    self._guided(survivors)
            else:
                self._sweep(survivors)
        except _StopTuning:
            pass
        finally:
            self.compiles.shutdown()
        decided, note, best, best_ms, best_iqr = True, "", None, None, None
        if not self.dry_run:
            best, best_ms, best_iqr, decided, note = self._settle()
            self.live_runner.close()
        else:
            note = f"dry run for {self.arch}: nothing was launched"
        if self.stopped:
            note = f"{note}; {self.stopped}" if note else self.stopped
        records = sorted(self.records.values(), key=record_order)
        self.counts["timed"] = sum(1 for r in records if r.status == "ok")
        self.counts["complete"] = int(self.complete)
        return TuneResult(family=self.cls.kernel, dtype=self.dtype, problem=self.problem, strategy=self.strategy,
                          best=best, best_ms=best_ms, best_iqr_ms=best_iqr, decided=decided, note=note,
                          records=records, counts=dict(self.counts), elapsed_s=time.perf_counter() - self.t0,
                          device=self.device.name, arch=self.arch, key=self.key)

    def _count(self, rec: Record) -> None:
        c = self.counts
        if rec.status == "compile-error":
            c["compile_errors"] += 1
        elif rec.status == "pruned":
            c["pruned_by_ptxas"] += 1
        elif rec.status in ("ok", "wrong-result", "launch-error"):
            c["launched"] += 1
            c["wrong_results"] += rec.status == "wrong-result"
            c["launch_errors"] += rec.status == "launch-error"

    def _budget(self, n: int) -> int:
        if self.max_configs is not None:
            return min(self.max_configs, n)
        if self.strategy == "exhaustive" or self.dry_run and self.strategy == "guided":
            return n
        return max(1, n // 3)

    def _sweep(self, survivors: list[Spec]) -> None:
        """exhaustive and random: compile the chosen ones in the pool, evaluate as they come."""
        todo = [s for s in survivors if s.key not in self.records]
        budget = self._budget(len(survivors)) - (len(survivors) - len(todo))
        if self.strategy == "random":
            idx = self.rng.permutation(len(todo))[: max(budget, 0)]
            todo = [todo[i] for i in sorted(idx)]
        elif budget < len(todo):
            todo = todo[: max(budget, 0)]
            self.stopped = f"max_configs={self.max_configs} left {len(survivors) - budget} candidates untried"
        self.target = len(todo)
        futures = {self.compiles.submit(s): s for s in todo}
        self._emit("compile")
        for fut in cf.as_completed(futures):
            if self._over_budget():
                left = sum(1 for f in futures if futures[f].key not in self.records)
                self.stopped = f"time budget of {self.time_budget_s:g} s left {left} candidates untried"
                self.complete = False
                break
            self._evaluate(futures[fut])

    def _evaluate(self, spec: Spec) -> Record:
        resources, err, seconds = self.compiles.result(spec)
        self.seconds["compiling"] += seconds
        if err is not None:
            rec = Record(spec, "compile-error", reason=err)
        else:
            why = ptxas_reason(spec, resources, self.limits, self.min_warps)
            if why:
                rec = Record(spec, "pruned", resources=resources, reason=why)
            elif self.dry_run:
                rec = Record(spec, "compiled", resources=resources)
            else:
                rec = self._launch(spec, resources)
        self._count(rec)
        self._record(rec)
        self.evaluated += 1
        self._emit("evaluate", status=rec.status)
        if self.lost_context:
            self.complete = False
            self.stopped = f"stopped: {rec.reason}; run again to resume without this candidate"
            raise _StopTuning
        return rec

    def _launch(self, spec: Spec, resources: dict | None) -> Record:
        try:
            error, tol, bad = self.live_runner.verify(spec)
        except ContextLost as exc:
            self.lost_context = True
            return Record(spec, "launch-error", resources=resources, reason=str(exc))
        except LaunchFailure as exc:
            return Record(spec, "launch-error", resources=resources, reason=str(exc))
        if bad:
            return Record(spec, "wrong-result", resources=resources,
                          reason=f"{bad} output element(s) not finite (NaN-poisoned output not fully written?)")
        if not error <= tol:
            return Record(spec, "wrong-result", resources=resources,
                          reason=f"relative error {error:.3e} exceeds the tolerance {tol:.3e}")
        try:
            # The verifying launch already loaded the module and warmed the kernel up.
            samples = self.live_runner.time([spec], 1, warmup=0)[0]
            if samples[0] > 1.25 * self.best_ms:
                # Far behind the leader: one more sample guards against a hiccup, and if it
                # stays behind its place is settled without spending more GPU time on it.
                samples += self.live_runner.time([spec], 1, warmup=0)[0]
            if min(samples) <= 1.25 * self.best_ms:
                samples += self.live_runner.time([spec], self.screen_samples - len(samples), warmup=0)[0]
        except ContextLost as exc:
            self.lost_context = True
            return Record(spec, "launch-error", resources=resources, reason=str(exc))
        except LaunchFailure as exc:
            return Record(spec, "launch-error", resources=resources, reason=str(exc))
        med, iqr = median_iqr(samples)
        return Record(spec, "ok", median_ms=med, iqr_ms=iqr, samples=len(samples), resources=resources)

    # -- guided ---------------------------------------------------------------------------
    def _warm_start_keys(self, count: int = 4) -> list[str]:
        """Keys of the specs the shipped defaults predict fastest for this problem (none
        when no table covers the family, dtype and device)."""
        from . import defaults

        try:
            op = self.problem.get("op") if self.cls.kernel == "reduce" else None
            table = defaults.table_for(self.cls.kernel, self.dtype, self.device.name, self.device.arch, op)
            if table is None:
                return []
            ranked = sorted(zip(table.predict(self.problem), range(len(table.specs))))
            return [table.specs[j].key for _, j in ranked[:count]]
        except Exception:  # noqa: BLE001 - a damaged table only loses the warm start
            logger.debug("no warm start from the shipped defaults", exc_info=True)
            return []

    def _in_disk_cache(self, spec: Spec) -> bool:
        from ..core.kernel import is_compiled

        try:
            return is_compiled(spec, self.arch)
        except Exception:  # noqa: BLE001 - a spec that cannot render is simply not cached
            return False

    def _guided(self, survivors: list[Spec]) -> None:
        n = len(survivors)
        budget = self._budget(n)
        self.target = budget
        X = feature_matrix(survivors)
        codes = code_matrix(survivors)
        keys = [s.key for s in survivors]  # spec.key hashes the JSON each time: compute once
        index = {k: i for i, k in enumerate(keys)}
        # A batch is as many candidates as compile at once where there are many workers.
        workers = self.compiles.workers
        batch = max(4, min(workers if workers >= GUIDED_POOL_BATCH_FROM else GUIDED_BATCH, budget // 4))
        # A spec's cubin does not depend on the shape: where earlier tunes left enough of the
        # space compiled, search that part first (it costs GPU time only), then go on over the
        # whole space with a short patience, which a gain there lengthens again.
        compiled = {i for i, s in enumerate(survivors) if keys[i] not in self.records and self.cached(s)}
        self.counts["cached_at_start"] = len(compiled)
        cached_only = len(compiled) >= GUIDED_CACHED_FIRST_BATCHES * batch
        inflight: dict[cf.Future, int] = {}

        def launched() -> int:
            return sum(1 for k in keys if k in self.records
                       and self.records[k].status in ("ok", "wrong-result", "launch-error"))

        def untried() -> list[int]:
            busy = set(inflight.values())
            return [i for i, k in enumerate(keys) if k not in self.records and i not in busy
                    and (not cached_only or i in compiled)]

        # Start: the shipped model's best guesses for this problem and the family's default
        # (sound anchors), plus a space-filling sample.
        anchors = [index[k] for k in self._warm_start_keys() if k in index and k not in self.records]
        default = self.cls.default_spec(self.problem, self.dtype)
        if default.key in index and default.key not in self.records and index[default.key] not in anchors:
            anchors.append(index[default.key])
        start = [i for i in anchors if not cached_only or i in compiled]
        known = [index[k] for k in self.records if k in index]
        n0 = min(max(batch, min(budget // 3, GUIDED_START_BATCHES * batch)), budget) - launched()
        start += maximin(X, [i for i in untried() if i not in start], n0 - len(start), known + start, self.rng)
        self._run_batch([survivors[i] for i in start])
        best_seen, since_gain = self.best_ms, 0
        first = launched()
        # Candidates are chosen as compile slots free up (a few at a time, never waiting for
        # a whole batch's slowest nvcc); in-process compiles keep whole batches.
        rolling = workers >= GUIDED_POOL_BATCH_FROM
        window = workers if rolling else batch
        refill = max(1, window // 4) if rolling else window
        patience = GUIDED_ROLLING_PATIENCE if rolling else GUIDED_PATIENCE
        converged = False
        opened_at: int | None = None  # self.evaluated when a search among compiled ones opened up
        while not self._over_budget():
            room = min(window - len(inflight), budget - launched() - len(inflight))
            if not converged and (room >= refill or (room > 0 and not inflight)):
                pool = untried()
                if not pool and cached_only and not inflight:
                    converged = True  # every compiled candidate tried: open the space below
                elif pool:
                    t = time.perf_counter()
                    ok = [(index[k], r.median_ms) for k, r in self.records.items()
                          if k in index and r.status == "ok" and r.median_ms]
                    if len(ok) < 3:
                        pick = maximin(X, pool, room, [i for i, _ in ok] + list(inflight.values()), self.rng)
                    else:
                        pick = choose_batch(X, codes, ok, pool, room, self._rejected(index))
                    for i in pick:
                        inflight[self.compiles.submit(survivors[i])] = i
                    self.seconds["choosing"] += time.perf_counter() - t
            if inflight:
                t = time.perf_counter()
                done, _ = cf.wait(list(inflight), return_when=cf.FIRST_COMPLETED)
                self.seconds["waiting"] += time.perf_counter() - t
                for fut in done:
                    t = time.perf_counter()
                    self._evaluate(survivors[inflight.pop(fut)])
                    self.seconds["launching"] += time.perf_counter() - t
                    since_gain += 1
                    if self.best_ms < best_seen * 0.995:
                        since_gain, best_seen = 0, self.best_ms
            elif not converged:
                break  # nothing left to try within the budget
            # Converged: `patience` batches' worth of candidates in a row without a gain
            # beyond the timing noise (0.5%), or no untried near neighbour of the leaders
            # left after three.
            if not converged and launched() - first >= 4 * batch:
                ok = [(index[k], r.median_ms) for k, r in self.records.items()
                      if k in index and r.status == "ok" and r.median_ms]
                converged = since_gain >= patience * batch or (
                    since_gain >= 3 * batch and not near_leaders(X, ok, untried(), 3, 4))
            if converged and not inflight:
                if not cached_only:
                    self.stopped = f"guided search converged after launching {launched()} of {n} candidates"
                    if opened_at is not None:
                        self.stopped += (f" ({len(compiled)} compiled ones searched first, then "
                                         f"{self.evaluated - opened_at} more over the whole space)")
                    break
                # Converged among the compiled candidates: go on over the whole space with
                # GUIDED_PROBE_BATCHES batches' worth of patience left (a gain there restores
                # it all), the shipped model's guesses first.
                cached_only, converged, opened_at = False, False, self.evaluated
                since_gain = max(0, patience - GUIDED_PROBE_BATCHES) * batch
                for i in [i for i in anchors if keys[i] not in self.records][:window]:
                    inflight[self.compiles.submit(survivors[i])] = i
        if self._over_budget():
            self.stopped = f"time budget of {self.time_budget_s:g} s reached"
            self.complete = False
        logger.info("guided search: %s", ", ".join(f"{v:.1f} s {k}" for k, v in self.seconds.items()))

    def _rejected(self, index: dict[str, int]) -> list[int]:
        """Rows ptxas rejected or nvcc failed on (what the spec alone decides)."""
        return [index[k] for k, r in self.records.items() if k in index and (
            r.status == "compile-error" or r.status == "pruned" and (r.reason or "").startswith("ptxas"))]

    def _run_batch(self, specs: list[Spec]) -> None:
        futures = {self.compiles.submit(s): s for s in specs}
        for fut in cf.as_completed(futures):
            self._evaluate(futures[fut])

    # -- deciding the winner --------------------------------------------------------------
    def _settle(self) -> tuple[Spec | None, float | None, float | None, bool, str]:
        ok = sorted((r for r in self.records.values() if r.status == "ok" and r.median_ms is not None),
                    key=record_order)
        if not ok:
            failed = {s: sum(1 for r in self.records.values() if r.status == s)
                      for s in ("compile-error", "launch-error", "wrong-result", "pruned")}
            if self.lost_context:
                return None, None, None, False, "no candidate was timed before the CUDA context broke"
            raise TuneError(f"no candidate of {self.cls.kernel} {self.problem} passed: {failed}")
        if self.lost_context:
            best = ok[0]
            return best.spec, best.median_ms, best.iqr_ms, False, "screening times only (the CUDA context broke)"
        contenders = ok[: max(1, self.leaders)]
        self._emit("leaders", leaders=len(contenders))
        samples: dict[str, list[float]] = {r.spec.key: [] for r in contenders}
        alive = list(contenders)
        rounds, per_round, cap = 0, 5, 60
        decided = len(alive) == 1
        while len(alive) > 1 and rounds * per_round < cap:
            try:
                got = self.live_runner.time([r.spec for r in alive], per_round, warmup=1 if rounds == 0 else 0)
            except LaunchFailure as exc:
                self.stopped = f"leader re-timing failed ({exc}); screening times used"
                break
            rounds += 1
            for r, s in zip(alive, got):
                samples[r.spec.key].extend(s)
            if rounds * per_round < 10:
                continue
            alive.sort(key=lambda r: statistics.median(samples[r.spec.key]))
            lead = samples[alive[0].spec.key]
            # Drop every contender the leader is clearly ahead of; stop when one is left.
            alive = [alive[0]] + [r for r in alive[1:] if not separated(lead, samples[r.spec.key])]
            decided = len(alive) == 1
        timed = [r for r in contenders if samples[r.spec.key]]
        for r in timed:
            med, iqr = median_iqr(samples[r.spec.key])
            r.median_ms, r.iqr_ms, r.samples = med, iqr, r.samples + len(samples[r.spec.key])
            r.origin = "run"
            self._record(r)
        if not timed:
            best = ok[0]
            return best.spec, best.median_ms, best.iqr_ms, len(ok) == 1, "a single candidate was timed"
        timed.sort(key=record_order)
        best = timed[0]
        if len(timed) == 1:
            note = "one candidate passed; nothing to compare"
        else:
            second = timed[1]
            a, b = samples[best.spec.key], samples[second.spec.key]
            first_ms, second_ms = median_iqr(a)[0], median_iqr(b)[0]
            gap = 100 * (second_ms / first_ms - 1)
            noise = 100 * 3 * math.hypot(stderr_of_median(a), stderr_of_median(b)) / first_ms
            if decided:
                note = (f"winner ahead of the runner-up by {gap:.2f}% (noise +-{noise:.2f}%, "
                        f"{len(a)} interleaved samples each)")
            else:
                note = (f"top two within noise after {len(a)} interleaved samples: {first_ms:.4f} vs "
                        f"{second_ms:.4f} ms ({gap:.2f}% apart, noise +-{noise:.2f}%); "
                        "picked the lower median")
        return best.spec, best.median_ms, best.iqr_ms, decided, note
