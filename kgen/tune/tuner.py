"""The autotuner: search a family's spec space for one problem, fast, trustworthy, remembered.

    result = kgen.autotune(kgen.Matmul, problem={"M": 4096, "N": 4096, "K": 4096}, dtype="float32",
                           strategy="guided")
    result.best, result.best_ms, result.records, print(result.table())

The tuner knows families only through the interface in kgen.core.spec (search_space,
prune_reason, make_inputs, reference_output, tolerance_for, ...). A run:

 1. enumerates the space and prunes it before compiling (the family's prune_reason
    against the device's limits);
 2. compiles the candidates in a process pool (nvcc needs no GPU; the cubins land in
    the shared disk cache, where the GPU process finds them), while the main process
    verifies and times the ones already compiled;
 3. prunes again on ptxas' report (spills, registers that would cap occupancy or
    make the launch fail);
 4. verifies each candidate on random data against the float64 reference, with the
    output poisoned by NaN before the launch; a failure is recorded with its reason
    and the run goes on;
 5. screens each survivor with a few CUDA-event samples (L2 flushed before each);
 6. re-times the leaders interleaved (every round runs each leader once, in a
    shuffled order, so drift in clocks or temperature cannot favour one) until the
    winner is separated from the runner-up by more than the noise, or a cap is hit
    (the result then says the top two are tied);
 7. writes every record as it goes, and the result at the end, to the tuning
    database (kgen.tune.db), so a second run returns at once and an interrupted
    run resumes.

Strategies: "exhaustive" (every candidate), "random" (a uniform sample), and
"guided" (a space-filling start, then batches picked by a quadratic model of
log(time) fitted on the fly, half of each batch near the current leaders).
"""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from .. import __version__
from .. import ops as _families  # noqa: F401 - registers every family
from ..core.spec import Spec, families, spec_from_json

STRATEGIES = ("exhaustive", "random", "guided")
# The guided strategy evaluates batches of up to GUIDED_BATCH candidates (compiled in parallel)
# and stops after GUIDED_PATIENCE batches in a row that did not improve the best by 0.5%.
# Replayed on recorded exhaustive tunes of an H200 (scripts/guided_replay.py), where two
# basins of 3000x5000x700 lie 3% apart, patience 6 settled in the wrong one for 7 seeds of
# 20; patience 24 with spread guesses for none of 60 over three recordings, launching 15-20%
# of the space on average.
GUIDED_BATCH = 16
GUIDED_PATIENCE = 24
# The space-filling start covers GUIDED_START_BATCHES batches (at most a third of the budget);
# later batches give GUIDED_NEAR_SHARE of their places to neighbours of the leaders and the
# rest to the model's best guesses anywhere.
GUIDED_START_BATCHES = 3
GUIDED_NEAR_SHARE = 0.5
# The model's guesses in one batch differ pairwise in more than GUIDED_SPREAD fields.
GUIDED_SPREAD = 2
STATUSES = ("ok", "pruned", "compile-error", "launch-error", "wrong-result", "compiled")

# Limits of each architecture, for --dry-run without a GPU. With a GPU the tuner asks the
# device instead. Shared memory is the per-block opt-in maximum.
ARCH_LIMITS: dict[str, dict[str, int]] = {
    "sm_80": {"max_threads_per_block": 1024, "max_shared_per_block_optin": 166912, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 2048, "multiprocessors": 108,
              "l2_bytes": 40 << 20},
    "sm_86": {"max_threads_per_block": 1024, "max_shared_per_block_optin": 101376, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 1536, "multiprocessors": 84,
              "l2_bytes": 6 << 20},
    "sm_89": {"max_threads_per_block": 1024, "max_shared_per_block_optin": 101376, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 1536, "multiprocessors": 128,
              "l2_bytes": 72 << 20},
    "sm_90": {"max_threads_per_block": 1024, "max_shared_per_block_optin": 232448, "registers_per_sm": 65536,
              "registers_per_block": 65536, "max_threads_per_sm": 2048, "multiprocessors": 132,
              "l2_bytes": 50 << 20},
    "sm_100": {"max_threads_per_block": 1024, "max_shared_per_block_optin": 232448, "registers_per_sm": 65536,
               "registers_per_block": 65536, "max_threads_per_sm": 2048, "multiprocessors": 148,
               "l2_bytes": 126 << 20},
}


class TuneError(ValueError):
    """The tuning request cannot be carried out (unknown family, strategy, empty space...)."""


class LaunchFailure(RuntimeError):
    """A candidate could not be loaded or launched; the run goes on without it."""


class ContextLost(LaunchFailure):
    """A candidate broke the CUDA context (e.g. an illegal address): nothing more can run."""


# ---------------------------------------------------------------------------------------
# Records and results
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Record:
    """What the tuner learnt about one candidate."""

    spec: Spec
    status: str
    median_ms: float | None = None
    iqr_ms: float | None = None
    samples: int = 0
    resources: dict[str, dict[str, int]] | None = None
    reason: str | None = None
    origin: str = "run"  # "run": measured now; "db": resumed from the tuning database

    @property
    def spread(self) -> float | None:
        """Relative spread of the timings (IQR over median)."""
        if self.median_ms is None or self.iqr_ms is None or self.median_ms <= 0:
            return None
        return self.iqr_ms / self.median_ms

    def to_row(self) -> dict[str, Any]:
        return {"spec_key": self.spec.key, "spec": self.spec.to_json(), "status": self.status,
                "median_ms": self.median_ms, "iqr_ms": self.iqr_ms, "samples": self.samples,
                "resources": self.resources, "reason": self.reason}

    def to_dict(self) -> dict[str, Any]:
        out = self.to_row()
        out["spec"] = self.spec.to_dict()
        out["origin"] = self.origin
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any], origin: str = "db") -> "Record":
        return cls(spec=spec_from_json(row["spec"]), status=row["status"], median_ms=row.get("median_ms"),
                   iqr_ms=row.get("iqr_ms"), samples=row.get("samples") or 0, resources=row.get("resources"),
                   reason=row.get("reason"), origin=origin)


@dataclasses.dataclass
class TuneResult:
    """The outcome of a tuning run (or of a database hit: from_db=True).

    best / best_ms: the winning spec and its median time (None in a dry run).
    decided: True when the winner's lead over the runner-up is larger than the noise.
    note: one line saying how the winner was decided.
    records: one Record per candidate, best first.
    counts: how many candidates were in the space, pruned, compiled, failed, timed.
    """

    family: str
    dtype: str
    problem: dict[str, Any]
    strategy: str
    best: Spec | None
    best_ms: float | None
    best_iqr_ms: float | None
    decided: bool
    note: str
    records: list[Record]
    counts: dict[str, int]
    elapsed_s: float
    device: str
    arch: str
    key: str = ""
    from_db: bool = False

    def top(self, n: int = 10) -> list[Record]:
        return [r for r in self.records if r.status == "ok"][:n]

    def by_status(self, status: str) -> list[Record]:
        return [r for r in self.records if r.status == status]

    def summary(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "best_iqr_ms": self.best_iqr_ms, "decided": self.decided,
                "note": self.note, "counts": self.counts, "elapsed_s": self.elapsed_s}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "dtype": self.dtype, "problem": self.problem, "device": self.device,
                "arch": self.arch, "key": self.key, "from_db": self.from_db,
                "best": self.best.to_dict() if self.best is not None else None, "best_ms": self.best_ms,
                **self.summary(), "records": [r.to_dict() for r in self.records]}

    def table(self, n: int = 10) -> str:
        """The top `n` candidates, then one line per failure kind, as plain text."""
        varying = _varying_fields([r.spec for r in self.records]) or ["(spec)"]
        head = f"{'#':>3} {'median ms':>10} {'spread':>7} {'n':>3} {'regs':>5} {'smem B':>7}  " + "  ".join(varying)
        lines = [head]
        for i, r in enumerate(self.top(n), 1):
            regs, smem = _resource_summary(r.resources)
            vals = "  ".join(_field_text(r.spec, f) for f in varying)
            spread = f"{100 * r.spread:.1f}%" if r.spread is not None else "-"
            lines.append(f"{i:>3} {r.median_ms:>10.4f} {spread:>7} {r.samples:>3} {regs:>5} {smem:>7}  {vals}")
        for status in ("pruned", "compile-error", "launch-error", "wrong-result"):
            bad = self.by_status(status)
            if bad:
                reasons: dict[str, int] = {}
                for r in bad:
                    reasons[_reason_kind(r.reason)] = reasons.get(_reason_kind(r.reason), 0) + 1
                common = "; ".join(f"{k} ({v})" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
                lines.append(f"{status}: {len(bad)}  e.g. {common}")
        return "\n".join(lines)


def _reason_kind(reason: str | None) -> str:
    """A reason with its numbers blanked, so that similar failures are counted together."""
    if not reason:
        return "no reason given"
    import re

    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", reason.splitlines()[0])[:90]


def _resource_summary(resources: dict | None) -> tuple[str, str]:
    if not resources:
        return "-", "-"
    regs = max(v.get("registers", 0) for v in resources.values())
    smem = max(v.get("shared_bytes", 0) for v in resources.values())
    return str(regs), str(smem)


def _leaves(spec: Spec) -> list[tuple[str, Any]]:
    """The spec's fields flattened: tuples become name[i]."""
    out = []
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        if isinstance(v, tuple):
            out.extend((f"{f.name}[{i}]", x) for i, x in enumerate(v))
        else:
            out.append((f.name, v))
    return out


def _varying_fields(specs: Sequence[Spec]) -> list[str]:
    if not specs:
        return []
    names = [f.name for f in dataclasses.fields(specs[0])]
    return [n for n in names if len({json.dumps(getattr(s, n, None)) for s in specs}) > 1]


def _field_text(spec: Spec, name: str) -> str:
    v = getattr(spec, name, None)
    if isinstance(v, tuple):
        return f"{name}={'x'.join(str(x) for x in v)}"
    return f"{name}={v}"


# ---------------------------------------------------------------------------------------
# Device description and runners (the part that touches the GPU, pluggable for tests)
# ---------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    name: str
    arch: str
    limits: dict[str, int]


def arch_limits(arch: str) -> dict[str, int]:
    """Device limits for `arch` without a GPU (sm_90's for an architecture not in the table)."""
    base = arch.rstrip("af")
    return dict(ARCH_LIMITS.get(base, ARCH_LIMITS["sm_90"]))


def cuda_device_info() -> DeviceInfo:
    """Name, arch and limits of the GPU. Makes no context current (creating one costs a few
    hundred milliseconds, too much for a tuning-database hit or a dispatch lookup)."""
    from ..core import runtime

    dev = runtime.device()
    import pycuda.driver as drv

    a = drv.device_attribute
    limits = dict(runtime.device_limits())
    limits.update(registers_per_sm=dev.get_attribute(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
                  registers_per_block=dev.get_attribute(a.MAX_REGISTERS_PER_BLOCK),
                  max_threads_per_sm=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR))
    return DeviceInfo(dev.name(), runtime.device_arch(), limits)


class CudaRunner:
    """Verifies and times candidates on the current GPU.

    prepare() makes one set of random inputs for the problem, its float64 reference and
    a NaN-poisoned output buffer; verify() launches a candidate once and measures its
    relative error; time() takes CUDA-event samples of several candidates interleaved.
    """

    def __init__(self, flush_l2: bool = True, seed: int | None = None):
        self.device = cuda_device_info()
        self.flush_l2 = flush_l2
        self._rng = np.random.default_rng(seed)
        self._inputs: dict[tuple, list] = {}
        self._flusher = None

    def prepare(self, cls: type[Spec], problem: dict[str, Any], dtype: str, seed: int | None = None) -> None:
        from pycuda import gpuarray

        from ..core import runtime
        from ..core.timing import L2Flusher

        runtime.driver()
        rng = np.random.default_rng(seed)
        self.cls, self.problem, self.dtype = cls, problem, dtype
        self._host = tuple(np.ascontiguousarray(a) for a in cls.make_inputs(problem, dtype, rng))
        ref = np.asarray(cls.reference_output(problem, self._host), dtype=np.float64)
        self._ref = ref
        norm = float(np.linalg.norm(ref.ravel()))
        self._ref_norm = norm if norm > 0 else 1.0
        self._inputs = {}
        shape = tuple(cls.output_shape(problem)) or (1,)  # a 0-d result lives in a 1-element buffer
        self._out = gpuarray.empty(shape, np.dtype(dtype))
        self._poison = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(np.dtype(dtype)).min
        self._sumsq = None
        if ref.size >= (1 << 16) and np.dtype(dtype).kind == "f":
            # Copying a large output back and comparing on the CPU would cost more than the
            # kernel: compare on the GPU, in float64, against the reference uploaded once.
            try:
                from pycuda.reduction import ReductionKernel

                ctype = "float" if np.dtype(dtype) == np.float32 else "double"
                self._sumsq = ReductionKernel(np.float64, neutral="0", reduce_expr="a+b",
                                              map_expr="((double)x[i] - y[i]) * ((double)x[i] - y[i])",
                                              arguments=f"const {ctype} *x, const double *y")
                self._ref_gpu = gpuarray.to_gpu(np.ascontiguousarray(ref.ravel()))
                self._sumsq(self._out.reshape(-1), self._ref_gpu).get()  # compile it now, not in the first check
            except Exception:  # noqa: BLE001 - fall back to comparing on the host
                self._sumsq = None
        if self.flush_l2 and self._flusher is None:
            self._flusher = L2Flusher()

    def _device_inputs(self, spec: Spec) -> list:
        # Specs with layout fields (matmul's layout_a / layout_b) read their operands in
        # that storage order, so each layout combination gets its own copy.
        layouts = tuple(getattr(spec, f"layout_{c}", "row") for c in "ab")
        got = self._inputs.get(layouts)
        if got is None:
            from pycuda import gpuarray

            got = []
            for i, a in enumerate(self._host):
                if a.ndim == 2 and i < 2 and layouts[i] == "col":
                    a = np.asfortranarray(a)
                got.append(gpuarray.to_gpu(a))
            self._inputs[layouts] = got
        return got

    def _call(self, spec: Spec) -> Callable[[], object]:
        from ..core.kernel import build

        try:
            k = build(spec)
        except Exception as exc:  # noqa: BLE001 - any load failure is this candidate's failure
            raise LaunchFailure(f"could not load: {_first_line(exc)}") from None
        ins, out = self._device_inputs(spec), self._out
        return lambda: k(*ins, out=out)

    def _check_context(self) -> None:
        from ..core import runtime

        try:
            runtime.driver().Context.synchronize()
        except Exception as exc:  # noqa: BLE001
            raise ContextLost(f"the CUDA context is broken: {_first_line(exc)}") from None

    def verify(self, spec: Spec) -> tuple[float, float, int]:
        """(relative error, tolerance, count of non-finite outputs) of one launch."""
        from ..core import runtime

        call = self._call(spec)
        self._out.fill(self._poison)
        try:
            call()
            runtime.driver().Context.synchronize()
        except Exception as exc:  # noqa: BLE001
            self._check_context()
            raise LaunchFailure(f"launch failed: {_first_line(exc)}") from None
        tol = float(spec.tolerance_for(self.problem, self._host))
        if self._sumsq is not None:
            sq = float(self._sumsq(self._out.reshape(-1), self._ref_gpu).get())
            if math.isfinite(sq):
                return math.sqrt(sq) / self._ref_norm, tol, 0
        got = self._out.get().reshape(self._ref.shape) if self._ref.shape else self._out.get().reshape(())
        got64 = got.astype(np.float64)
        bad = int(np.size(got64) - np.count_nonzero(np.isfinite(got64)))
        err = float(np.linalg.norm((got64 - self._ref).ravel())) / self._ref_norm if not bad else math.inf
        return err, tol, bad

    def time(self, specs: Sequence[Spec], samples: int, warmup: int = 1) -> list[list[float]]:
        """`samples` milliseconds per spec, taken in rounds; each round runs every spec once,
        in a fresh random order, with the L2 flushed before each launch."""
        from ..core import runtime

        drv = runtime.driver()
        calls = [self._call(s) for s in specs]
        try:
            for c in calls:
                for _ in range(warmup):
                    c()
            drv.Context.synchronize()
            events = [(drv.Event(), drv.Event()) for _ in calls]
            out: list[list[float]] = [[] for _ in calls]
            for _ in range(samples):
                order = self._rng.permutation(len(calls))
                for i in order:
                    if self._flusher is not None:
                        self._flusher()
                    start, stop = events[i]
                    start.record()
                    calls[i]()
                    stop.record()
                events[order[-1]][1].synchronize()
                drv.Context.synchronize()
                for i in range(len(calls)):
                    out[i].append(events[i][1].time_since(events[i][0]))
        except Exception as exc:  # noqa: BLE001
            self._check_context()
            raise LaunchFailure(f"timing failed: {_first_line(exc)}") from None
        return out

    def close(self) -> None:
        self._inputs = {}


class RecordedRunner:
    """A runner without a GPU, for tests and demonstrations: times come from a table or a
    function of the spec (plus optional multiplicative noise), and chosen specs fail to
    launch or return wrong results. Everything else in the tuner runs for real."""

    def __init__(self, times: Callable[[Spec], float] | dict[str, float], *,
                 device: DeviceInfo | None = None, noise: float = 0.0,
                 wrong: Callable[[Spec], bool] | None = None, launch_error: Callable[[Spec], bool] | None = None,
                 seed: int = 0):
        self.device = device or DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
        self._times = times
        self._noise = noise
        self._wrong = wrong or (lambda s: False)
        self._launch_error = launch_error or (lambda s: False)
        self._rng = np.random.default_rng(seed)
        self.launched: list[str] = []  # spec keys, in the order they were verified

    def prepare(self, cls, problem, dtype, seed=None) -> None:
        self.problem = problem

    def _ms(self, spec: Spec) -> float:
        t = self._times(spec) if callable(self._times) else self._times[spec.key]
        return float(t) * (1.0 + self._noise * float(self._rng.standard_normal()))

    def verify(self, spec: Spec) -> tuple[float, float, int]:
        self.launched.append(spec.key)
        if self._launch_error(spec):
            raise LaunchFailure("launch failed: too many resources requested for launch (recorded)")
        if self._wrong(spec):
            return 0.5, 1e-4, 0
        return 1e-7, 1e-4, 0

    def time(self, specs, samples, warmup=1) -> list[list[float]]:
        return [[self._ms(s) for _ in range(samples)] for s in specs]

    def close(self) -> None:
        pass


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


# ---------------------------------------------------------------------------------------
# Compilation: a process pool of render+nvcc workers
# ---------------------------------------------------------------------------------------

def _compile_worker(spec_json: str, arch: str) -> tuple[dict | None, str | None, float]:
    """Runs in a pool process: render and compile one spec (the cubin goes to the disk
    cache). Returns (ptxas resources, None) or (None, why it failed), and the seconds."""
    t0 = time.perf_counter()
    try:
        from .. import ops  # noqa: F401 - a fresh process registers the families before reading a spec
        from ..core.kernel import compile as kcompile

        compiled = kcompile(spec_from_json(spec_json), arch)
        return compiled.resources, None, time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - every failure becomes this candidate's record
        return None, _compile_reason(exc), time.perf_counter() - t0


def _compile_reason(exc: BaseException) -> str:
    from ..core.compiler import CompileError

    if isinstance(exc, CompileError):
        errors = [ln.strip() for ln in exc.output.splitlines() if "error" in ln.lower()]
        detail = "; ".join(errors[:3]) if errors else exc.output.strip().splitlines()[-1:] or [""]
        if isinstance(detail, list):
            detail = detail[0]
        return f"{exc.summary}: {detail}"[:600]
    return f"{type(exc).__name__}: {_first_line(exc)}"


class _Compiler:
    """Hands out compile futures; a pool of `workers` processes, or in-process when 0."""

    def __init__(self, arch: str, workers: int, compiler: Callable[[Spec, str], dict] | None):
        self.arch = arch
        self.workers = workers
        self.custom = compiler
        self._pool: cf.ProcessPoolExecutor | None = None
        self.futures: dict[str, cf.Future] = {}
        self.done = 0  # compiles finished (a counter: scanning the futures would cost O(n) per update)

    def _finished(self, _fut) -> None:
        self.done += 1

    def submit(self, spec: Spec) -> cf.Future:
        fut = self.futures.get(spec.key)
        if fut is not None:
            return fut
        if self.custom is not None or self.workers == 0:
            fut = cf.Future()
            fut.set_result(self._inline(spec))
            self.done += 1
        else:
            try:
                if self._pool is None:
                    # spawn: the parent holds a CUDA context, which a forked child must not inherit.
                    ctx = multiprocessing.get_context("spawn")
                    self._pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=ctx)
                fut = self._pool.submit(_compile_worker, spec.to_json(), self.arch)
                fut.add_done_callback(self._finished)
            except Exception as exc:  # noqa: BLE001 - BrokenProcessPool, or no processes allowed here
                self._give_up_pool(exc)
                return self.submit(spec)
        self.futures[spec.key] = fut
        return fut

    def _inline(self, spec: Spec) -> tuple[dict | None, str | None, float]:
        t0 = time.perf_counter()
        try:
            if self.custom is not None:
                return self.custom(spec, self.arch), None, time.perf_counter() - t0
            from ..core.kernel import compile as kcompile

            return kcompile(spec, self.arch).resources, None, time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001
            return None, _compile_reason(exc), time.perf_counter() - t0

    def _give_up_pool(self, exc: BaseException) -> None:
        """A pool that cannot start or broke (a worker killed, a __main__ the children
        cannot import): compile the rest in this process, slower but complete."""
        import warnings

        warnings.warn(f"kgen autotune: the compile pool failed ({_first_line(exc)}); compiling in this process",
                      RuntimeWarning, stacklevel=4)
        self.workers = 0
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        # Futures lost with the pool are compiled again, in-process, when asked for.
        self.futures = {k: f for k, f in self.futures.items() if f.done() and f.exception() is None}

    def result(self, spec: Spec) -> tuple[dict | None, str | None, float]:
        try:
            return self.submit(spec).result()
        except cf.process.BrokenProcessPool as exc:
            self._give_up_pool(exc)
            return self.submit(spec).result()
        except Exception as exc:  # noqa: BLE001 - anything else fails this candidate only
            return None, f"compile worker failed: {_first_line(exc)}", 0.0

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def ptxas_reason(spec: Spec, resources: dict | None, limits: dict[str, int], min_warps: int = 4,
                 max_spill_bytes: int = 128) -> str | None:
    """Why ptxas' report rules a compiled candidate out, or None.

    Spills put accumulators in local memory: a candidate is out when an entry point spills
    more than `max_spill_bytes`, or when every entry point spills. (A few bytes spilled by
    one entry point are let through: a cubin can hold a fallback path, such as matmul's
    element-load kernel next to its vector-load one, that the problem never runs.)
    A block whose registers exceed the SM's cannot launch at all; one that leaves fewer
    than `min_warps` warps resident per SM cannot hide memory latency. The block size comes
    from the spec's `threads` or `block_size` (no occupancy check for a family with neither).
    """
    if not resources:
        return None
    spilling = {name: r for name, r in resources.items() if r.get("spill_stores", 0) or r.get("spill_loads", 0)}
    for name, r in sorted(spilling.items()):
        if (max(r.get("spill_stores", 0), r.get("spill_loads", 0)) > max_spill_bytes
                or len(spilling) == len(resources)):
            return (f"ptxas: {name} spills {r.get('spill_stores', 0)} bytes to local memory "
                    f"({r.get('registers', 0)} registers)")
    threads = getattr(spec, "threads", None) or getattr(spec, "block_size", None)
    if not isinstance(threads, int) or threads <= 0:
        return None
    per_sm = limits.get("registers_per_sm", 65536)
    per_block = limits.get("registers_per_block", per_sm)
    warps = -(-threads // 32)
    for name, r in sorted(resources.items()):
        regs = r.get("registers", 0)
        if not regs:
            continue
        # Registers are handed out per warp in chunks of 256.
        per_warp = -(-(regs * 32) // 256) * 256
        if per_warp * warps > per_block:
            return (f"ptxas: {name} needs {regs} registers x {threads} threads = {per_warp * warps} per block; "
                    f"the device allows {per_block} (the launch would fail)")
        blocks = per_sm // (per_warp * warps)
        if blocks * warps < min_warps:
            return (f"ptxas: {regs} registers per thread cap occupancy at {blocks * warps} warps per SM "
                    f"(below {min_warps})")
    return None


# ---------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------

def _stats(samples: Sequence[float]) -> tuple[float, float]:
    s = sorted(samples)
    med = statistics.median(s)
    if len(s) >= 4:
        q = statistics.quantiles(s, n=4)
        return med, q[2] - q[0]
    return med, (s[-1] - s[0]) if len(s) > 1 else 0.0


def _stderr_of_median(samples: Sequence[float]) -> float:
    """Standard error of a median, from the IQR (robust to the odd slow sample)."""
    _, iqr = _stats(samples)
    sigma = iqr / 1.349
    return 1.2533 * sigma / math.sqrt(max(len(samples), 1))


def separated(a: Sequence[float], b: Sequence[float], z: float = 3.0) -> bool:
    """True when the medians of a and b differ by more than z standard errors."""
    ma, mb = statistics.median(a), statistics.median(b)
    se = math.hypot(_stderr_of_median(a), _stderr_of_median(b))
    return abs(mb - ma) > z * max(se, 1e-6 * max(ma, mb))


# ---------------------------------------------------------------------------------------
# The guided strategy's model
# ---------------------------------------------------------------------------------------

def _feature_matrix(specs: Sequence[Spec]) -> np.ndarray:
    """Standardised numeric features of the specs: log2 of integer fields, 0/1 for
    booleans, one-hot for strings; fields that never vary are dropped."""
    rows = [_leaves(s) for s in specs]
    names = [n for n, _ in rows[0]]
    cols = []
    for j, name in enumerate(names):
        vals = [r[j][1] for r in rows]
        if all(isinstance(v, bool) for v in vals):
            cols.append([float(v) for v in vals])
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            shift = 1.0 if min(vals) <= 0 else 0.0
            cols.append([math.log2(max(v + shift, 1e-9)) for v in vals])
        else:
            for cat in sorted({json.dumps(v) for v in vals}):
                cols.append([1.0 if json.dumps(v) == cat else 0.0 for v in vals])
    X = np.array(cols, dtype=np.float64).T if cols else np.zeros((len(specs), 0))
    keep = X.std(axis=0) > 1e-12
    X = X[:, keep]
    if X.shape[1]:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X


def _code_matrix(specs: Sequence[Spec]) -> np.ndarray:
    """The specs' flattened field values as integer codes, one column per field."""
    rows = [[json.dumps(v) for _, v in _leaves(s)] for s in specs]
    cols = list(zip(*rows)) if rows else []
    codes = []
    for col in cols:
        lookup = {v: n for n, v in enumerate(sorted(set(col)))}
        codes.append([lookup[v] for v in col])
    return np.array(codes, dtype=np.int64).T if codes else np.zeros((len(specs), 0), dtype=np.int64)


def _quadratic(X: np.ndarray) -> np.ndarray:
    n, d = X.shape
    cols = [np.ones(n)] + [X[:, i] for i in range(d)]
    cols += [X[:, i] * X[:, j] for i in range(d) for j in range(i, d)]
    return np.stack(cols, axis=1)


def _fit_predict(X: np.ndarray, known: Sequence[int], y: Sequence[float], ridge: float = 1.0) -> np.ndarray:
    """Ridge regression of y on quadratic features of X[known]; predictions for every row."""
    Q = _quadratic(X)
    A = Q[list(known)]
    reg = ridge * np.eye(Q.shape[1])
    reg[0, 0] = 0.0  # the intercept is not shrunk
    w = np.linalg.solve(A.T @ A + reg, A.T @ np.asarray(y, dtype=np.float64))
    return Q @ w


def _maximin(X: np.ndarray, pool: Sequence[int], count: int, start: Sequence[int], rng) -> list[int]:
    """Pick `count` rows of `pool` far from each other (and from `start`): a space-filling start."""
    chosen: list[int] = []
    pool = list(pool)
    if not pool or count <= 0:
        return chosen
    ref = list(start)
    if not ref:
        first = pool[int(rng.integers(len(pool)))]
        chosen.append(first)
        ref.append(first)
    dist = np.min(np.linalg.norm(X[pool][:, None, :] - X[ref][None, :, :], axis=2), axis=1)
    for c in chosen:
        dist[pool.index(c)] = -1.0
    while len(chosen) < count:
        i = int(np.argmax(dist))
        if dist[i] < 0:
            break
        chosen.append(pool[i])
        dist = np.minimum(dist, np.linalg.norm(X[pool] - X[pool[i]], axis=1))
        dist[i] = -1.0
    return chosen


# ---------------------------------------------------------------------------------------
# The tuner
# ---------------------------------------------------------------------------------------

def _family(family: type[Spec] | str) -> type[Spec]:
    if isinstance(family, str):
        fams = families()
        if family not in fams:
            raise TuneError(f"family={family!r} is not a known kernel family; allowed: {sorted(fams)}")
        return fams[family]
    if isinstance(family, type) and issubclass(family, Spec) and family.kernel:
        return family
    raise TuneError(f"family must be a spec class such as kgen.Matmul or a family name, got {family!r}")


def toolchain_version() -> str:
    from ..core.compiler import ToolchainError, nvcc_version

    try:
        return nvcc_version()
    except ToolchainError:
        return "no nvcc"


def identity(cls: type[Spec], problem: dict[str, Any], dtype: str, device: DeviceInfo,
             nvcc: str | None = None) -> dict[str, Any]:
    return {"family": cls.kernel, "dtype": dtype, "problem": problem, "bucket": tuple(cls.bucket(problem)),
            "device": device.name, "arch": device.arch, "nvcc": nvcc if nvcc is not None else toolchain_version(),
            "kgen": __version__}


def autotune(family: type[Spec] | str, problem: dict[str, Any], dtype: str = "float32", *,
             strategy: str = "guided", max_configs: int | None = None, time_budget_s: float | None = None,
             db: Any = None, force: bool = False, resume: bool = True, runner: Any = None,
             dry_run: bool = False, arch: str | None = None, workers: int | None = None,
             seed: int | None = None, progress: Callable[[dict], None] | None = None,
             compiler: Callable[[Spec, str], dict] | None = None, leaders: int = 6, screen_samples: int = 5,
             min_warps: int = 4, save: bool = True,
             restrict: dict[str, Iterable[Any]] | Callable[[Spec], bool] | None = None) -> TuneResult:
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
    workers        compile processes (default: the CPU count; 0 compiles in-process).
    compiler       replaces kgen.core.kernel.compile (spec, arch) -> ptxas resources; runs
                   in-process. For tests.
    restrict       keep only part of the family's space: {field: allowed values} (tuple
                   fields as tuples) or a predicate on the spec. The result is stored
                   under the strategy name with the restriction appended, so it never
                   answers for an unrestricted run.
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
    from .db import problem_key

    keep, label = _restriction(cls, restrict)
    stored_strategy = strategy + label
    key = problem_key(cls.kernel, dtype, problem, device.name, device.arch, ident["nvcc"], __version__)
    if database is not None and not force:
        hit = database.result(key, stored_strategy)
        # A run cut short (time budget, broken context) is stored for dispatch, but the
        # next tune resumes it rather than returning it.
        if hit is not None and hit["summary"].get("counts", {}).get("complete", 1):
            return _from_db(cls, problem, dtype, device, database, hit, t0)

    tuner = _Tuner(cls, problem, dtype, strategy=strategy, max_configs=max_configs, time_budget_s=time_budget_s,
                   runner=runner, database=database if save else None, key=key, arch=arch, device=device,
                   workers=max(1, (os.cpu_count() or 2) - 1) if workers is None else workers, seed=seed, progress=progress,
                   compiler=compiler, leaders=leaders, screen_samples=screen_samples, min_warps=min_warps,
                   dry_run=dry_run, resume=resume and database is not None, t0=t0, keep=keep)
    result = tuner.run()
    if database is not None and save and result.best is not None:
        result.strategy = stored_strategy
        database.put_result(key, stored_strategy, ident, result.best.to_json(), result.best_ms, result.summary())
        from . import dispatch

        dispatch.forget()  # this process' dispatch picks the new result up at once
    return result


def _restriction(cls, restrict) -> tuple[Callable[[Spec], bool] | None, str]:
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


def _tuple_fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls) if isinstance(f.default, tuple)}


def _open(db: Any):
    from .db import TuneDB, open_db

    if db is False:
        return None
    if isinstance(db, TuneDB):
        return db
    return open_db(db)


def _from_db(cls, problem, dtype, device, database, hit, t0) -> TuneResult:
    records = []
    for row in database.candidates(hit["key"]):
        try:
            records.append(Record.from_row(row))
        except ValueError:
            continue  # a spec this kgen no longer accepts
    records.sort(key=_order)
    s = hit["summary"]
    return TuneResult(family=cls.kernel, dtype=dtype, problem=problem, strategy=hit["strategy"],
                      best=spec_from_json(hit["best"]), best_ms=hit["best_ms"], best_iqr_ms=s.get("best_iqr_ms"),
                      decided=bool(s.get("decided")), note=s.get("note", ""), records=records,
                      counts=dict(s.get("counts", {})), elapsed_s=time.perf_counter() - t0, device=device.name,
                      arch=device.arch, key=hit["key"], from_db=True)


_STATUS_ORDER = {"ok": 0, "compiled": 1, "wrong-result": 2, "launch-error": 3, "compile-error": 4, "pruned": 5}


def _order(r: Record) -> tuple:
    return (_STATUS_ORDER.get(r.status, 9), r.median_ms if r.median_ms is not None else math.inf)


class _StopTuning(Exception):
    pass


class _Tuner:
    def __init__(self, cls, problem, dtype, *, strategy, max_configs, time_budget_s, runner, database, key, arch,
                 device, workers, seed, progress, compiler, leaders, screen_samples, min_warps, dry_run, resume,
                 t0, keep=None):
        self.cls, self.problem, self.dtype = cls, problem, dtype
        self.strategy, self.max_configs, self.time_budget_s = strategy, max_configs, time_budget_s
        self.runner, self.db, self.key, self.arch, self.device = runner, database, key, arch, device
        self.limits = device.limits
        self.progress = progress
        self.leaders, self.screen_samples, self.min_warps = leaders, max(2, screen_samples), min_warps
        self.patience = GUIDED_PATIENCE
        self.dry_run, self.resume, self.t0 = dry_run, resume, t0
        self.keep = keep
        self.rng = np.random.default_rng(seed)
        self.seed = seed
        self.compiles = _Compiler(arch, workers, compiler)
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

    # -- bookkeeping ----------------------------------------------------------------------
    def _emit(self, phase: str, **info) -> None:
        if self.progress is not None:
            self.progress({"phase": phase, "done": self.evaluated, "target": self.target, "best_ms": self.best_ms,
                           "compiled": self.compiles.done, "submitted": len(self.compiles.futures),
                           "launched": self.counts["launched"], **info})

    def _record(self, rec: Record) -> Record:
        self.records[rec.spec.key] = rec
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
            self.runner.prepare(self.cls, self.problem, self.dtype, self.seed)
        try:
            if self.strategy == "guided" and not self.dry_run:
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
            self.runner.close()
        else:
            note = f"dry run for {self.arch}: nothing was launched"
        if self.stopped:
            note = f"{note}; {self.stopped}" if note else self.stopped
        records = sorted(self.records.values(), key=_order)
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
        resources, err, _ = self.compiles.result(spec)
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
            error, tol, bad = self.runner.verify(spec)
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
            samples = self.runner.time([spec], 1, warmup=0)[0]
            if samples[0] > 1.25 * self.best_ms:
                # Far behind the leader: one more sample guards against a hiccup, and if it
                # stays behind its place is settled without spending more GPU time on it.
                samples += self.runner.time([spec], 1, warmup=0)[0]
            if min(samples) <= 1.25 * self.best_ms:
                samples += self.runner.time([spec], self.screen_samples - len(samples), warmup=0)[0]
        except ContextLost as exc:
            self.lost_context = True
            return Record(spec, "launch-error", resources=resources, reason=str(exc))
        except LaunchFailure as exc:
            return Record(spec, "launch-error", resources=resources, reason=str(exc))
        med, iqr = _stats(samples)
        return Record(spec, "ok", median_ms=med, iqr_ms=iqr, samples=len(samples), resources=resources)

    # -- guided ---------------------------------------------------------------------------
    def _guided(self, survivors: list[Spec]) -> None:
        n = len(survivors)
        budget = self._budget(n)
        self.target = budget
        X = _feature_matrix(survivors)
        self._codes = _code_matrix(survivors)
        keys = [s.key for s in survivors]  # spec.key hashes the JSON each time: compute once
        index = {k: i for i, k in enumerate(keys)}
        batch = max(4, min(GUIDED_BATCH, budget // 4))

        def launched() -> int:
            return sum(1 for k in keys if k in self.records
                       and self.records[k].status in ("ok", "wrong-result", "launch-error"))

        def untried() -> list[int]:
            return [i for i, k in enumerate(keys) if k not in self.records]

        # Start: the family's default (a sound spec is a good anchor) plus a space-filling sample.
        start = []
        default = self.cls.default_spec(self.problem, self.dtype)
        if default.key in index and default.key not in self.records:
            start.append(index[default.key])
        known = [index[k] for k in self.records if k in index]
        n0 = min(max(batch, min(budget // 3, GUIDED_START_BATCHES * batch)), budget) - launched()
        start += _maximin(X, [i for i in untried() if i not in start], n0 - len(start), known + start, self.rng)
        self._run_batch([survivors[i] for i in start])
        stale, best_seen = 0, self.best_ms
        first = launched()
        while launched() < budget and not self._over_budget():
            pool = untried()
            if not pool:
                break
            ok = [(index[k], r.median_ms) for k, r in self.records.items()
                  if k in index and r.status == "ok" and r.median_ms]
            if len(ok) < 3:
                pick = _maximin(X, pool, batch, [i for i, _ in ok], self.rng)
            else:
                pick = self._choose(X, ok, pool, min(batch, budget - launched()))
            self._run_batch([survivors[i] for i in pick])
            if self.best_ms < best_seen * 0.995:
                stale, best_seen = 0, self.best_ms
            else:
                stale += 1
            # Converged: `patience` batches in a row without a gain beyond the timing noise
            # (0.5%), or no untried near neighbour of the leaders left after three.
            if launched() - first >= 4 * batch and (stale >= self.patience
                                                     or stale >= 3 and not self._near(X, ok, pool, 3, 4)):
                self.stopped = f"guided search converged after launching {launched()} of {n} candidates"
                break
        if self._over_budget():
            self.stopped = f"time budget of {self.time_budget_s:g} s reached"
            self.complete = False

    def _near(self, X, ok, pool, tops: int, k: int) -> list[int]:
        """Untried rows among the k nearest neighbours of `tops` leaders: the fastest, then
        the good ones (within 10% of it) farthest from the leaders already chosen, so that
        a second basin (say, another tile shape a few % behind) is refined too rather than
        only the neighbourhood of the first."""
        if not pool:
            return []
        ranked = sorted(ok, key=lambda t: t[1])
        good = [i for i, t in ranked if t <= ranked[0][1] * 1.10]
        leaders = [good[0]]
        while len(leaders) < min(tops, len(good)):
            rest = [i for i in good if i not in leaders]
            far = [float(np.min(np.linalg.norm(X[leaders] - X[i], axis=1))) for i in rest]
            leaders.append(rest[int(np.argmax(far))])
        near: list[int] = []
        P = X[pool]
        for i in leaders:
            d = np.linalg.norm(P - X[i], axis=1)
            for j in np.argsort(d, kind="stable")[:k]:
                if pool[j] not in near:
                    near.append(pool[j])
        return near

    def _choose(self, X, ok, pool, count) -> list[int]:
        idx, times = zip(*ok)
        pred = _fit_predict(X, idx, [math.log(t) for t in times])
        by_pred = sorted(pool, key=lambda i: pred[i])
        # Half of the batch near the three leaders (ranked by the model), half the model's
        # best guesses anywhere: local refinement without losing sight of other basins.
        near = sorted(self._near(X, ok, pool, 3, 6), key=lambda i: pred[i])
        pick = near[: max(1, round(count * GUIDED_NEAR_SHARE))]
        # The model's guesses are spread out: each differs from the guesses already in the
        # batch in more than GUIDED_SPREAD fields, so one batch probes several basins (say,
        # two tile shapes a few % apart) instead of one basin's close variants.
        guesses: list[int] = []
        for i in by_pred:
            if len(pick) + len(guesses) >= count:
                break
            if i in pick:
                continue
            if GUIDED_SPREAD and guesses and \
                    np.min((self._codes[guesses] != self._codes[i]).sum(axis=1)) <= GUIDED_SPREAD:
                continue
            guesses.append(i)
        pick += guesses
        for i in by_pred:  # too few distinct guesses: fill up in the model's order
            if len(pick) >= count:
                break
            if i not in pick:
                pick.append(i)
        return pick

    def _run_batch(self, specs: list[Spec]) -> None:
        futures = {self.compiles.submit(s): s for s in specs}
        for fut in cf.as_completed(futures):
            self._evaluate(futures[fut])

    # -- deciding the winner --------------------------------------------------------------
    def _settle(self):
        ok = sorted((r for r in self.records.values() if r.status == "ok" and r.median_ms is not None),
                    key=lambda r: r.median_ms)
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
                got = self.runner.time([r.spec for r in alive], per_round, warmup=1 if rounds == 0 else 0)
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
            med, iqr = _stats(samples[r.spec.key])
            r.median_ms, r.iqr_ms, r.samples = med, iqr, r.samples + len(samples[r.spec.key])
            r.origin = "run"
            self._record(r)
        if not timed:
            best = ok[0]
            return best.spec, best.median_ms, best.iqr_ms, len(ok) == 1, "a single candidate was timed"
        timed.sort(key=lambda r: r.median_ms)
        best = timed[0]
        if len(timed) == 1:
            note = "one candidate passed; nothing to compare"
        else:
            second = timed[1]
            a, b = samples[best.spec.key], samples[second.spec.key]
            gap = 100 * (second.median_ms / best.median_ms - 1)
            noise = 100 * 3 * math.hypot(_stderr_of_median(a), _stderr_of_median(b)) / best.median_ms
            if decided:
                note = (f"winner ahead of the runner-up by {gap:.2f}% (noise +-{noise:.2f}%, "
                        f"{len(a)} interleaved samples each)")
            else:
                note = (f"top two within noise after {len(a)} interleaved samples: {best.median_ms:.4f} vs "
                        f"{second.median_ms:.4f} ms ({gap:.2f}% apart, noise +-{noise:.2f}%); "
                        "picked the lower median")
        return best.spec, best.median_ms, best.iqr_ms, decided, note


# ---------------------------------------------------------------------------------------
# Plot: time per candidate against each parameter that varies
# ---------------------------------------------------------------------------------------

def plot_records(records: Iterable[dict[str, Any] | Record], path: str, title: str = "") -> str:
    """Scatter each timed candidate's median against each varying spec field, one panel
    per field (the winner in red). PNG/PDF through matplotlib; `.svg` works without it."""
    rows = []
    for r in records:
        d = r.to_dict() if isinstance(r, Record) else r
        if d.get("status") == "ok" and d.get("median_ms"):
            spec = d["spec"] if isinstance(d["spec"], dict) else json.loads(d["spec"])
            rows.append((spec, float(d["median_ms"])))
    if not rows:
        raise TuneError("nothing to plot: no candidate was timed")
    fields = [k for k in rows[0][0] if k != "kernel" and len({json.dumps(s.get(k)) for s, _ in rows}) > 1]
    fields = fields or ["kernel"]
    best = min(t for _, t in rows)
    panels = []
    for f in fields:
        labels = sorted({_label(s.get(f)) for s, _ in rows}, key=_label_order)
        pos = {lab: i for i, lab in enumerate(labels)}
        pts = [(pos[_label(s.get(f))], t) for s, t in rows]
        panels.append((f, labels, pts))
    if path.lower().endswith(".svg"):
        _plot_svg(panels, best, path, title)
        return path
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise TuneError(f"writing {path} needs matplotlib (pip install 'kgen[plot]'); "
                        "or give a .svg file name, which needs nothing") from None
    cols = min(3, len(panels))
    nrows = -(-len(panels) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.2 * nrows), squeeze=False)
    jitter = np.random.default_rng(0)
    for ax, (f, labels, pts) in zip(axes.ravel(), panels):
        xs = np.array([x for x, _ in pts], dtype=float) + jitter.uniform(-0.18, 0.18, len(pts))
        ys = np.array([t for _, t in pts])
        win = ys == best
        ax.scatter(xs[~win], ys[~win], s=12, alpha=0.6, color="tab:blue")
        ax.scatter(xs[win], ys[win], s=50, color="tab:red", marker="*", label="winner")
        ax.set_yscale("log")
        ax.set_xticks(range(len(labels)))
        crowded = len(labels) > 10
        ax.set_xticklabels(labels, rotation=90 if crowded else (30 if max(len(lab) for lab in labels) > 4 else 0),
                           fontsize=6 if crowded else 8)
        ax.set_title(f, fontsize=10)
        ax.set_ylabel("median ms")
        ax.grid(True, axis="y", alpha=0.3)
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _label(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "x".join(str(x) for x in v)
    return str(v)


def _label_order(lab: str):
    parts = lab.split("x")
    if all(p.lstrip("-").isdigit() for p in parts):
        return (0, tuple(int(p) for p in parts), "")
    return (1, (), lab)


def _plot_svg(panels, best: float, path: str, title: str) -> None:
    w, h, pad = 320, 240, 40
    cols = min(3, len(panels))
    nrows = -(-len(panels) // cols)
    all_t = [t for _, _, pts in panels for _, t in pts]
    lo, hi = math.log10(min(all_t)), math.log10(max(all_t))
    hi = hi if hi > lo else lo + 1
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{cols * w}" height="{nrows * h + 30}" '
           'font-family="sans-serif" font-size="10">', f'<text x="10" y="18" font-size="13">{_esc(title)}</text>']
    for n, (f, labels, pts) in enumerate(panels):
        ox, oy = (n % cols) * w, 30 + (n // cols) * h
        pw, ph = w - pad - 10, h - pad - 20
        out.append(f'<rect x="{ox + pad}" y="{oy + 10}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        out.append(f'<text x="{ox + pad}" y="{oy + 8}">{_esc(f)} (median ms, log)</text>')
        for k, lab in enumerate(labels):
            x = ox + pad + (k + 0.5) * pw / len(labels)
            out.append(f'<text x="{x:.1f}" y="{oy + 10 + ph + 12}" text-anchor="middle">{_esc(lab)}</text>')
        for frac in (0.0, 0.5, 1.0):
            y = oy + 10 + ph * (1 - frac)
            out.append(f'<text x="{ox + pad - 3}" y="{y:.1f}" text-anchor="end">{10 ** (lo + frac * (hi - lo)):.3g}</text>')
        for x_i, t in pts:
            x = ox + pad + (x_i + 0.5) * pw / len(labels)
            y = oy + 10 + ph * (1 - (math.log10(t) - lo) / (hi - lo))
            color, r = ("red", 4) if t == best else ("steelblue", 2)
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}" fill="{color}" fill-opacity="0.6"/>')
    out.append("</svg>")
    with open(path, "w") as fh:
        fh.write("\n".join(out))


def _esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `kgen tune` or kgen.autotune()")
