"""The compile pool: render and nvcc candidates in worker processes while the tuner's own
process verifies and times the ones already compiled. nvcc needs no GPU; the cubins land
in the shared disk cache (kgen.core.cache), where the GPU process finds them."""
from __future__ import annotations

import concurrent.futures as cf
import importlib
import logging
import multiprocessing
import sys
import time
from typing import Callable

from ..core.spec import Spec, spec_from_json
from .records import first_line

logger = logging.getLogger(__name__)

# (ptxas resources per entry point, or None; why the compile failed, or None; seconds taken)
CompileOutcome = tuple[dict[str, dict[str, int]] | None, str | None, float]


def _compile_worker(spec_json: str, arch: str, family_module: str) -> CompileOutcome:
    """Runs in a pool process: render and compile one spec (the cubin goes to the disk
    cache). Returns (ptxas resources, None) or (None, why it failed), and the seconds."""
    t0 = time.perf_counter()
    try:
        # A fresh process knows no family yet: kgen's own register on importing kgen.ops,
        # one defined elsewhere on importing the module that defines it.
        importlib.import_module("kgen.ops")
        importlib.import_module(family_module)
        from ..core.kernel import compile as kcompile

        compiled = kcompile(spec_from_json(spec_json), arch)
        return compiled.resources, None, time.perf_counter() - t0
    except Exception as exc:  # noqa: BLE001 - every failure becomes this candidate's record
        return None, compile_reason(exc), time.perf_counter() - t0


def compile_reason(exc: BaseException) -> str:
    """One line (at most 600 characters) saying why a candidate did not compile."""
    from ..core.compiler import CompileError

    if isinstance(exc, CompileError):
        errors = [ln.strip() for ln in exc.output.splitlines() if "error" in ln.lower()]
        if errors:
            detail = "; ".join(errors[:3])
        else:
            lines = exc.output.strip().splitlines()
            detail = lines[-1] if lines else ""
        return f"{exc.summary}: {detail}"[:600]
    return f"{type(exc).__name__}: {first_line(exc)}"


# Why a worker stops: spawned workers import the caller's script (as multiprocessing does), and
# one whose top level tunes would start a second search of its own.
MAIN_GUARD = ("kgen's compile worker imported your script (__main__) and reached a tuning call at its top level. "
              "Put the code that tunes under `if __name__ == \"__main__\":` (compile workers are started as "
              "multiprocessing's spawn starts them); the tuning goes on in the main process")


def _main_is_a_file() -> bool:
    """Whether the main module is a file (a script, or a module run with -m), which spawned
    workers import again; the interactive interpreter or `python -c` has none."""
    return bool(getattr(sys.modules.get("__main__"), "__file__", None))


class CompilePool:
    """Hands out compile futures, one per spec: a pool of `workers` processes, or
    in-process when `workers` is 0 or a `compiler` function replaces nvcc (tests)."""

    def __init__(self, arch: str, workers: int, compiler: Callable[[Spec, str], dict] | None = None):
        self.arch = arch
        self.workers = workers
        self.custom = compiler
        self._pool: cf.ProcessPoolExecutor | None = None
        self.futures: dict[str, cf.Future] = {}
        self.done = 0  # compiles finished (a counter: scanning the futures would cost O(n) per update)

    def _finished(self, _fut: cf.Future) -> None:
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
                fut = self._pool.submit(_compile_worker, spec.to_json(), self.arch, type(spec).__module__)
                fut.add_done_callback(self._finished)
            except Exception as exc:  # noqa: BLE001 - BrokenProcessPool, or no processes allowed here
                if getattr(multiprocessing.current_process(), "_inheriting", False):
                    # This is a pool worker of the caller's own pool, importing a script that tunes
                    # at its top level: tuning here too would run the whole search twice.
                    raise RuntimeError(MAIN_GUARD) from None
                self._give_up_pool(exc)
                return self.submit(spec)
        self.futures[spec.key] = fut
        return fut

    def _inline(self, spec: Spec) -> CompileOutcome:
        t0 = time.perf_counter()
        try:
            if self.custom is not None:
                return self.custom(spec, self.arch), None, time.perf_counter() - t0
            from ..core.kernel import compile as kcompile

            return kcompile(spec, self.arch).resources, None, time.perf_counter() - t0
        except Exception as exc:  # noqa: BLE001
            return None, compile_reason(exc), time.perf_counter() - t0

    def _give_up_pool(self, exc: BaseException) -> None:
        """A pool that cannot start or broke (a worker killed, a __main__ the children
        cannot import): compile the rest in this process, slower but complete."""
        logger.warning("the compile pool failed (%s); compiling in this process%s", first_line(exc),
                       "" if not _main_is_a_file() else
                       " (if your script tunes at its top level, put that under `if __name__ == \"__main__\":`)")
        self.workers = 0
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        # Futures lost with the pool are compiled again, in-process, when asked for.
        self.futures = {k: f for k, f in self.futures.items() if f.done() and f.exception() is None}

    def result(self, spec: Spec) -> CompileOutcome:
        try:
            return self.submit(spec).result()
        except cf.process.BrokenProcessPool as exc:
            self._give_up_pool(exc)
            return self.submit(spec).result()
        except Exception as exc:  # noqa: BLE001 - anything else fails this candidate only
            return None, f"compile worker failed: {first_line(exc)}", 0.0

    def shutdown(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

