"""Tune a catalogue: every problem a program runs, one after another, each stored as it finishes.

    from kgen.tune.catalogue import tune_catalogue
    result = tune_catalogue("matmul", ["4096x4096x4096", "8192x1024x1024"], dtype="float32")
    result = tune_catalogue("matmul", "shapes.txt")                  # a file: one problem a line
    result = tune_catalogue("matmul", "shapes.txt", cluster="local")  # one worker per GPU
    print(result.table())

Each problem is tuned by kgen.tune.tuner.autotune and stored in the tuning database as soon
as it is done. A problem the database already holds for this device is skipped, so a run
that was interrupted resumes where it stopped (the problem it was tuning resumes from the
candidates already measured). Kernels do not depend on the shape: a candidate compiled for
one problem is taken from the disk cache for the next, so later problems compile only the
candidates no earlier one tried.

With cluster=..., the problems are spread over the GPU workers of a Dask cluster
(kgen.tune.cluster); this process alone writes the database.

A catalogue file has one problem a line; '#' starts a comment:

    4096x4096x4096            matmul: MxNxK
    268435456 sum             reduce: LENGTH [OP]  (OP defaults to `op`, "dot")
    {"M": 100, "N": 100, "K": 100}    any family: the problem as a JSON object
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from ..core.spec import Spec, SpecError
from ..core.spec import family as family_class
from .cluster import CatalogueEntry, runner_from
from .records import TuneError, _field_text, _varying_fields, first_line


class CatalogueError(TuneError):
    """A catalogue that cannot be read or tuned as given (the message names the line)."""


# ---------------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------------

def _family(family: type[Spec] | str) -> type[Spec]:
    from .. import ops  # noqa: F401 - registers kgen's families

    try:
        return family_class(family)
    except SpecError as exc:
        raise CatalogueError(str(exc)) from None


def problem_label(cls: type[Spec], problem: dict[str, Any]) -> str:
    """A short name for a problem: 4096x4096x4096 for matmul, "dot 268435456" for reduce."""
    if cls.kernel == "matmul" and set(problem) == {"M", "N", "K"}:
        return f"{problem['M']}x{problem['N']}x{problem['K']}"
    if cls.kernel == "reduce" and set(problem) == {"n", "op"}:
        return f"{problem['op']} {problem['n']}"
    return json.dumps(problem, sort_keys=True, separators=(",", ":"))


def _forms(cls: type[Spec]) -> str:
    if cls.kernel == "matmul":
        return "MxNxK (e.g. 4096x4096x4096) or a JSON object"
    if cls.kernel == "reduce":
        return "LENGTH [OP] (e.g. 268435456 sum) or a JSON object"
    return 'a JSON object (e.g. {"n": 1024})'


def parse_problem(text: str, family: type[Spec] | str, *, op: str = "dot") -> dict[str, Any]:
    """One problem from one line of a catalogue, normalised by its family (ValueError naming
    what is wrong and the allowed forms)."""
    cls = _family(family)
    t = text.strip()
    problem: Any
    if t.startswith("{"):
        try:
            problem = json.loads(t)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"{t!r} is not a valid JSON object ({exc})") from None
        if not isinstance(problem, dict):
            raise ValueError(f"{t!r} is not a JSON object")
    elif cls.kernel == "matmul":
        parts = t.lower().replace("*", "x").split("x")
        if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
            raise ValueError(f"{t!r} is not allowed: use {_forms(cls)}")
        problem = dict(zip("MNK", (int(p) for p in parts)))
    elif cls.kernel == "reduce":
        words = t.split()
        if not 1 <= len(words) <= 2 or not words[0].isdigit():
            raise ValueError(f"{t!r} is not allowed: use {_forms(cls)}")
        problem = {"n": int(words[0]), "op": words[1] if len(words) == 2 else op}
    else:
        raise ValueError(f"{t!r} is not allowed: the {cls.kernel} family takes {_forms(cls)}")
    return cls.normalize_problem(problem)


def read_problems(source: str | os.PathLike | Iterable[str | dict[str, Any]], family: type[Spec] | str, *,
                  op: str = "dot") -> list[dict[str, Any]]:
    """The problems of a catalogue: a file (a str or path) or an iterable of lines or problem
    dicts. Blank lines and '#' comments are skipped; a problem given twice is tuned once."""
    cls = _family(family)
    where = "problem"
    items: Iterable[str | dict[str, Any]]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            items = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            raise CatalogueError(f"the catalogue {path} does not exist (give a file with one problem a line: "
                                 f"{_forms(cls)})") from None
        except IsADirectoryError:
            raise CatalogueError(f"the catalogue {path} is a folder; give a file with one problem a line") from None
        except UnicodeDecodeError:
            raise CatalogueError(f"the catalogue {path} is not UTF-8 text") from None
        except OSError as exc:
            raise CatalogueError(f"cannot read the catalogue {path}: {exc.strerror or exc}") from None
        where = f"{path}, line"
    else:
        items = source
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, item in enumerate(items, 1):
        try:
            if isinstance(item, dict):
                problem = cls.normalize_problem(item)
            elif isinstance(item, str):
                text = item.split("#", 1)[0].strip()
                if not text:
                    continue
                problem = parse_problem(text, cls, op=op)
            else:
                raise ValueError(f"{item!r} is neither a line of text nor a problem dict")
        except ValueError as exc:
            raise CatalogueError(f"{where} {number}: {exc}") from None
        canonical = json.dumps(problem, sort_keys=True)
        if canonical not in seen:
            seen.add(canonical)
            out.append(problem)
    if not out:
        raise CatalogueError(f"the catalogue holds no problem (one a line: {_forms(cls)})")
    return out


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class CatalogueResult:
    """What a catalogue run did: one entry per problem (per device model on a cluster)."""

    family: str
    dtype: str
    entries: list[CatalogueEntry]
    elapsed_s: float
    where: str = "in this process"  # or "on" the cluster it ran on
    notes: list[str] = dataclasses.field(default_factory=list)

    def with_status(self, status: str) -> list[CatalogueEntry]:
        return [e for e in self.entries if e.status == status]

    @property
    def retried(self) -> list[CatalogueEntry]:
        return [e for e in self.entries if e.retries]

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "dtype": self.dtype, "elapsed_s": self.elapsed_s, "where": self.where,
                "notes": list(self.notes), "entries": [e.to_dict() for e in self.entries]}

    def table(self) -> str:
        """One line per problem (status, best time, rate, device, worker, seconds, winner),
        then what was retried or failed, then the totals."""
        cls = _family(self.family)
        # The winner by the fields the search varied (over every candidate of every problem).
        searched = {r.spec.key: r.spec for e in self.entries if e.result is not None for r in e.result.records}
        winners = [e.result.best for e in self.entries if e.result is not None and e.result.best is not None]
        varying = _varying_fields(list(searched.values()) + winners)
        show_worker = any(e.worker for e in self.entries)
        width = max([len("problem")] + [len(e.label) for e in self.entries])
        head = f"{'#':>3}  {'problem':<{width}}  {'status':<11} {'best ms':>9} {'rate':>14}  {'device':<24}"
        head += f" {'worker':<10}" if show_worker else ""
        head += f" {'s':>7}  winner"
        lines = [head]
        for i, e in enumerate(self.entries, 1):
            r = e.result
            best = f"{r.best_ms:.4f}" if r is not None and r.best_ms else "-"
            rate = _rate(cls, e.problem, self.dtype, r.best_ms) if r is not None and r.best_ms else "-"
            device = (e.device or "-")[:24]
            if r is not None and r.best is not None:
                spec = "  ".join(_field_text(r.best, f) for f in varying) if varying else r.best.to_json()
                if not r.decided:
                    spec += "  (top two within noise)"
            elif e.status == "compiled" and r is not None:
                spec = f"{r.counts.get('candidates', 0)} candidates, {len(r.by_status('compiled'))} compiled"
            else:
                spec = e.error or "-"
            line = f"{i:>3}  {e.label:<{width}}  {e.status:<11} {best:>9} {rate:>14}  {device:<24}"
            line += f" {(e.worker or '-')[:10]:<10}" if show_worker else ""
            line += f" {e.elapsed_s:>7.1f}  {spec}"
            lines.append(line)
        for e in self.retried:
            lines.append(f"retried: {e.label} ({e.attempts} attempts): " + "; ".join(e.retries))
        for e in self.with_status("failed"):
            lines.append(f"failed: {e.label}: {e.error}")
        lines.extend(self.notes)
        counts = ", ".join(f"{len(self.with_status(s))} {s}" for s in ("tuned", "in database", "compiled", "failed")
                           if self.with_status(s))
        lines.append(f"{len(self.entries)} problem(s) in {self.elapsed_s:.1f} s {self.where}: {counts}")
        return "\n".join(lines)


def _rate(cls: type[Spec], problem: dict[str, Any], dtype: str, ms: float) -> str:
    try:
        work = cls.work(problem, dtype)
    except Exception:  # noqa: BLE001 - a family without a work model shows no rate
        return "-"
    s = ms / 1e3
    if work.get("flops", 0) >= work.get("bytes", 0):
        return f"{work['flops'] / s / 1e12:.2f} TFLOP/s"
    return f"{work['bytes'] / s / 1e9:.0f} GB/s"


# ---------------------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------------------

BAR_FORMAT = "{desc} {n_fmt}/{total_fmt} |{bar}| {elapsed}<{remaining}{postfix}"


class CatalogueProgress:
    """One bar for the whole catalogue on a terminal, its postfix saying what runs where
    (the problem being tuned and how far; on a cluster, one part per worker). Elsewhere
    (a log, a pipe) one line per finished problem."""

    def __init__(self, total: int, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.total = total
        self.done = 0
        self.t0 = time.perf_counter()
        self.status: dict[str, str] = {}
        self._bar: Any = None
        if self.tty:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc="catalogue", file=self.stream, dynamic_ncols=True, leave=True,
                             mininterval=0.2, bar_format=BAR_FORMAT)

    def set_total(self, total: int) -> None:
        """The number of problems to finish (on a cluster of several device models, one per
        problem and model)."""
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            self._bar.refresh()

    def show(self, status: dict[str, str]) -> None:
        """What each worker (or this process) is doing now, by its name."""
        self.status = dict(status)
        if self._bar is not None:
            self._bar.set_postfix_str(self._fit(), refresh=True)

    def _fit(self) -> str:
        # Workers named by number (a LocalCluster's) read as "worker 0"; the others by name (gpu0).
        text = "; ".join(f"{'worker ' + k if k.isdigit() else k}: {v}" if k else v
                         for k, v in sorted(self.status.items()))
        columns = shutil.get_terminal_size((100, 24)).columns
        room = max(columns - 50 - 2 * len(str(self.total)), 10)
        return text if len(text) <= room else text[: room - 3] + "..."

    def finished(self, entry: CatalogueEntry) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(1)
            return
        from tqdm import tqdm

        r = entry.result
        if r is not None and r.best_ms:
            what = f", {r.best_ms:.4f} ms"
        elif entry.status == "compiled" and r is not None:
            what = f", {len(r.by_status('compiled'))} candidates compiled"
        else:
            what = f": {entry.error}" if entry.error else ""
        where = f" on {entry.worker}" if entry.worker else ""
        post = f", {entry.label}: {entry.status}{where}{what}"
        self.stream.write(tqdm.format_meter(self.done, self.total, time.perf_counter() - self.t0,
                                            prefix="catalogue", postfix=post[2:], bar_format=BAR_FORMAT) + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str("", refresh=False)
            self._bar.close()
            self._bar = None


def inner_status(label: str, ev: dict[str, Any]) -> str:
    """What one tune is doing, from one of autotune's progress events."""
    best = ev.get("best_ms")
    best_text = f", best {best:.4f} ms" if isinstance(best, (int, float)) and math.isfinite(best) else ""
    if ev.get("phase") == "leaders":
        return f"{label} re-timing {ev.get('leaders', 0)} leaders{best_text}"
    return f"{label} {ev.get('done', 0)}/{ev.get('target', 0)}{best_text}"


# ---------------------------------------------------------------------------------------
# Tuning
# ---------------------------------------------------------------------------------------

def tune_catalogue(family: type[Spec] | str, problems: str | os.PathLike | Iterable[str | dict[str, Any]],
                   dtype: str = "float32", *, strategy: str = "guided", max_configs: int | None = None,
                   time_budget_s: float | None = None, db: Any = None, force: bool = False, resume: bool = True,
                   runner: Any = None, dry_run: bool = False, arch: str | None = None, workers: int | None = None,
                   seed: int | None = None, compiler: Callable[[Spec, str], dict] | None = None,
                   restrict: Any = None, op: str = "dot", cluster: Any = None, retries: int = 2,
                   progress: bool = True, summary: bool = True, stream: TextIO | None = None,
                   out: TextIO | None = None) -> CatalogueResult:
    """Tune every problem of a catalogue and return a CatalogueResult (see the module docstring).

    problems   a catalogue file (str or path), or an iterable of lines ("4096x4096x4096")
               or problem dicts.
    runner     what verifies and times: a Runner, or a function returning one (default:
               kgen.tune.runners.CudaRunner on this GPU, or on each worker's GPU).
    cluster    None: tune here, one problem after another. "local": one Dask worker per GPU
               of this machine. A scheduler address ("tcp://host:8786"), a scheduler file
               (.json), a distributed.Client or a Dask cluster object: use its workers.
               Needs Dask distributed: pip install 'kgen[cluster]'.
    retries    on a cluster: how many times a problem whose task failed is run again.
    progress   a bar on `stream` (default stderr); summary: print table() to `out`
               (default stdout) at the end.
    The other arguments are autotune's, applied to every problem (db, force and resume
    too: a problem already in the database is skipped unless force=True).
    """
    t0 = time.perf_counter()
    cls = _family(family)
    todo = read_problems(problems, cls, op=op)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise CatalogueError(f"retries={retries!r} is not allowed: 0 or more")
    options = {"strategy": strategy, "max_configs": max_configs, "time_budget_s": time_budget_s, "seed": seed,
               "restrict": restrict}
    bar = CatalogueProgress(len(todo), stream) if progress else None
    try:
        if cluster is not None:
            if dry_run:
                raise CatalogueError("a dry run compiles in this process and launches nothing: leave out cluster= "
                                     "(--cluster) for --dry-run")
            result = _on_cluster(cls, todo, dtype, options, cluster=cluster, db=db, force=force, resume=resume,
                                 runner=runner, workers=workers, compiler=compiler, retries=retries, bar=bar, t0=t0)
        else:
            result = _here(cls, todo, dtype, options, db=db, force=force, resume=resume, runner=runner,
                           dry_run=dry_run, arch=arch, workers=workers, compiler=compiler, bar=bar, t0=t0)
    finally:
        if bar is not None:
            bar.close()
    if summary:
        print(result.table(), file=out or sys.stdout, flush=True)
    return result


def _here(cls: type[Spec], todo: list[dict[str, Any]], dtype: str, options: dict[str, Any], *, db: Any,
          force: bool, resume: bool, runner: Any, dry_run: bool, arch: str | None, workers: int | None,
          compiler: Callable[[Spec, str], dict] | None, bar: CatalogueProgress | None,
          t0: float) -> CatalogueResult:
    """One problem after another in this process, with one runner (one CUDA context) for all."""
    from . import tuner
    from .db import TuneDB, open_db

    live = None if dry_run else runner_from(runner, options["seed"])
    database = None if dry_run or db is False else (db if isinstance(db, TuneDB) else open_db(db))
    entries: list[CatalogueEntry] = []
    for index, problem in enumerate(todo):
        label = problem_label(cls, problem)
        started = time.perf_counter()
        if bar is not None:
            bar.show({"": f"{label} starting"})

        def report(ev: dict[str, Any], label: str = label) -> None:
            if bar is not None:
                bar.show({"": inner_status(label, ev)})

        try:
            res = tuner.autotune(cls, problem, dtype, **options, db=database if database is not None else False,
                                 force=force, resume=resume, runner=live, dry_run=dry_run, arch=arch,
                                 workers=workers, compiler=compiler, progress=report)
        except KeyboardInterrupt:
            done = sum(e.status in ("tuned", "in database") for e in entries)
            print(f"kgen: the catalogue was interrupted at {label}; {done} of {len(todo)} problem(s) are in the "
                  "tuning database. Run it again to resume.", file=sys.stderr)
            raise
        except TuneError as exc:
            entry = CatalogueEntry(problem, label, "failed", error=first_line(exc), index=index,
                                   elapsed_s=time.perf_counter() - started)
        else:
            status = "compiled" if dry_run else "in database" if res.from_db else "tuned"
            entry = CatalogueEntry(problem, label, status, result=res, device=res.device, arch=res.arch, index=index,
                                   elapsed_s=time.perf_counter() - started)
        entries.append(entry)
        if bar is not None:
            bar.finished(entry)
    return CatalogueResult(cls.kernel, dtype, entries, time.perf_counter() - t0)


def _on_cluster(cls: type[Spec], todo: list[dict[str, Any]], dtype: str, options: dict[str, Any], *,
                cluster: Any, db: Any, force: bool, resume: bool, runner: Any, workers: int | None,
                compiler: Callable[[Spec, str], dict] | None, retries: int, bar: CatalogueProgress | None,
                t0: float) -> CatalogueResult:
    from . import cluster as dask_cluster
    from .db import TuneDB, open_db

    if db is False:
        raise CatalogueError("a cluster run keeps its results in the tuning database: db=False is not allowed")
    database = db if isinstance(db, TuneDB) else open_db(db)
    stored = []

    def finished(entry: CatalogueEntry) -> None:
        if entry.status in ("tuned", "in database"):
            stored.append(entry.label)
        if bar is not None:
            bar.finished(entry)

    def show(status: dict[str, str]) -> None:
        if bar is not None:
            bar.show(status)

    def total(count: int) -> None:
        if bar is not None:
            bar.set_total(count)

    try:
        run = dask_cluster.run_catalogue(cls, todo, dtype, options, cluster=cluster, database=database,
                                         force=force, resume=resume, runner=runner, workers=workers,
                                         compiler=compiler, retries=retries, label=lambda p: problem_label(cls, p),
                                         on_status=show, on_done=finished, on_total=total)
    except KeyboardInterrupt:
        print(f"kgen: the catalogue was interrupted; {len(stored)} problem(s) are in the tuning database. Run it "
              "again to resume.", file=sys.stderr)
        raise
    # Catalogue order; the attempts and retries are known once every task has ended.
    entries = sorted(run.entries, key=lambda e: (e.index, e.device))
    return CatalogueResult(cls.kernel, dtype, entries, time.perf_counter() - t0, where=run.where, notes=run.notes)
