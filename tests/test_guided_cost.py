"""CPU tests of what a guided tune costs: candidates that are compiled already are searched
first, compile slots are refilled as they free up, and candidates ptxas would reject are
skipped once its verdicts are predictable. Times come from a RecordedRunner; compiles from a
stand-in (in threads where a test needs a pool), or from the real nvcc where marked."""
from __future__ import annotations

import concurrent.futures as cf
import hashlib
import threading
import time

import numpy as np

import kgen
import kgen.tune.tuner as tuner_module
from kgen.core.compiler import clear_memory_cache, is_cached
from kgen.core.kernel import is_compiled
from kgen.core.render import render
from kgen.tune.model import GUIDED_PROBE_BATCHES, likely_rejected
from kgen.tune.pool import CompilePool
from kgen.tune.runners import RecordedRunner
from kgen.tune.tuner import autotune

P = {"M": 3000, "N": 5000, "K": 700}


def _jitter(spec) -> float:
    return int(hashlib.md5(spec.key.encode()).hexdigest()[:8], 16) / 2 ** 32


def smooth(spec) -> float:
    """A made-up landscape: best near 128x128 tiles with 8x8 thread tiles."""
    BM, BN, BK = spec.tile
    TM, TN = spec.thread_tile
    return (1.0 + 0.4 * abs(np.log2(BM / 128)) + 0.4 * abs(np.log2(BN / 128)) + 0.2 * abs(np.log2(TM / 8))
            + 0.2 * abs(np.log2(TN / 8)) + 0.1 * abs(np.log2(BK / 16))) * (1 + 0.05 * _jitter(spec))


def report(spec, arch):
    return {"kgen_matmul": {"registers": 64, "shared_bytes": 0, "stack_bytes": 0, "spill_stores": 0,
                            "spill_loads": 0}}


def test_a_cubin_counts_as_cached_only_once_compiled_for_that_arch(tmp_path, monkeypatch):
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path))
    clear_memory_cache()
    spec = kgen.Matmul()
    assert not is_compiled(spec, "sm_90")
    kgen.compile(spec, "sm_90")
    assert is_compiled(spec, "sm_90")
    clear_memory_cache()  # the disk cache alone answers
    assert is_compiled(spec, "sm_90")
    assert not is_compiled(spec, "sm_80")
    assert not is_cached(render(spec) + "\n// another source", "sm_90", spec.compile_options())


def _guided(db, cached, times=smooth, seed=3):
    compiled = []
    runner = RecordedRunner(times, noise=0.002, seed=seed)
    result = autotune(kgen.Matmul, P, "float32", strategy="guided", runner=runner, db=str(db), seed=seed,
                      compiler=lambda s, a: compiled.append(s.key) or report(s, a), workers=0,
                      cached=lambda s: s.key in cached)
    return result, compiled, runner


def _space():
    limits = kgen.tune.device.arch_limits("sm_90")
    return [s for s in kgen.Matmul.search_space(P, "float32") if not s.prune_reason(P, limits)]


def test_a_second_shape_searches_the_compiled_candidates_first_then_briefly_the_rest(tmp_path):
    space = _space()
    # Earlier tunes compiled the 64- and 128-row tiles; the landscape's best is among them.
    cached = {s.key for s in space if s.tile[0] in (64, 128)}
    assert 100 < len(cached) < len(space)
    result, compiled, runner = _guided(tmp_path / "a.sqlite3", cached)
    new = [k for k in compiled if k not in cached]
    # After the compiled ones, GUIDED_PROBE_BATCHES batches (16 here) of the rest and the
    # shipped model's guesses, unless one of them gains.
    assert 0 < len(new) <= GUIDED_PROBE_BATCHES * 16 + 8
    assert result.counts["cached_at_start"] == len(cached)
    assert f"{len(cached)} compiled ones searched first, then" in result.note
    first_new = min(compiled.index(k) for k in new)
    assert first_new > 100 and all(k in cached for k in compiled[:first_new])
    best = min(smooth(s) for s in space)
    assert smooth(result.best) <= best * 1.03


def test_a_gain_past_the_compiled_candidates_opens_the_whole_search(tmp_path):
    space = _space()
    cached = {s.key for s in space if s.tile[0] == 32}

    def far_better_elsewhere(spec):  # the uncompiled part is twice as fast
        return smooth(spec) * (1.0 if spec.tile[0] == 32 else 0.5)

    result, compiled, runner = _guided(tmp_path / "b.sqlite3", cached, far_better_elsewhere)
    assert result.best.tile[0] != 32
    assert sum(1 for k in compiled if k not in cached) > GUIDED_PROBE_BATCHES * 16 + 8  # the patience grew back
    best = min(far_better_elsewhere(s) for s in space)
    assert far_better_elsewhere(result.best) <= best * 1.03


def test_too_few_compiled_candidates_do_not_narrow_the_search(tmp_path):
    space = _space()
    cached = {s.key for s in space[:10]}
    result, compiled, _ = _guided(tmp_path / "c.sqlite3", cached)
    assert result.counts["cached_at_start"] == 10
    assert "converged after launching" in result.note
    assert "searched first" not in result.note


class _ThreadPool(CompilePool):
    """The compile pool with the stand-in compiler in threads, each compile taking 60-180 ms
    (so that completions come out of order), counting how many are open at each submit."""

    def __init__(self, arch, workers, compiler=None):
        super().__init__(arch, workers, compiler)
        self._threads = cf.ThreadPoolExecutor(max_workers=workers)
        self.lock = threading.Lock()
        self.open = 0
        self.opens = []  # compiles submitted and not finished, at each submit

    def submit(self, spec):
        fut = self.futures.get(spec.key)
        if fut is not None:
            return fut
        with self.lock:
            self.open += 1
            self.opens.append(self.open)

        def work():
            time.sleep(0.06 + 0.12 * _jitter(spec))  # long next to choosing a candidate (ms)
            return self._inline(spec)

        fut = self._threads.submit(work)

        def closed(_f):
            with self.lock:
                self.open -= 1
            self._finished(_f)

        fut.add_done_callback(closed)
        self.futures[spec.key] = fut
        return fut

    def shutdown(self):
        self._threads.shutdown(wait=True)


def test_a_pool_of_workers_gets_new_candidates_as_slots_free_up(tmp_path, monkeypatch):
    pools = []

    def make(arch, workers, compiler=None):
        pools.append(_ThreadPool(arch, workers, compiler))
        return pools[-1]

    monkeypatch.setattr(tuner_module, "CompilePool", make)
    runner = RecordedRunner(smooth, noise=0.002, seed=1)
    result = autotune(kgen.Matmul, P, "float32", strategy="guided", runner=runner, db=str(tmp_path / "d.sqlite3"),
                      seed=1, compiler=report, workers=12)
    pool = pools[0]
    # The start (three batches of 12) is queued at once; after it, candidates are chosen as
    # slots free up: the pool stays near full and is never over-filled.
    later = pool.opens[36:]
    assert len(later) > 50
    assert max(later) <= 12
    assert np.median(later) >= 9
    assert "converged" in result.note
    space = _space()
    assert len(runner.launched) < len(space) // 3
    assert smooth(result.best) <= min(smooth(s) for s in space) * 1.03


def test_candidates_like_those_ptxas_rejected_are_predicted_rejected():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    bad = X[:, 0] + 0.5 * X[:, 1] > 0.8  # what ptxas rejects: a region of the feature space
    seen = list(range(200))
    ok = [i for i in seen if not bad[i]]
    rejected = [i for i in seen if bad[i]]
    pool = list(range(200, 400))
    flagged = likely_rejected(X, ok, rejected, pool)
    truly = {i for i in pool if bad[i]}
    assert len(flagged & truly) >= 0.7 * len(truly)
    assert len(flagged - truly) <= 0.05 * (len(pool) - len(truly))
    # Too few verdicts so far: nothing is skipped.
    assert likely_rejected(X, ok[:5], rejected[:3], pool) == set()


def test_the_guided_search_with_everything_compiled_compiles_nothing_new(tmp_path):
    space = _space()
    cached = {s.key for s in space}
    result, compiled, _ = _guided(tmp_path / "e.sqlite3", cached)
    assert all(k in cached for k in compiled)
    assert f"{len(cached)} compiled ones searched first" in result.note


def test_the_model_fits_run_on_one_blas_thread_during_a_guided_search(tmp_path):
    """The compile pool fills every core; a multi-threaded BLAS under the model's small fits
    then spins for seconds a fit. The guided search limits it to one thread."""
    threadpoolctl = __import__("pytest").importorskip("threadpoolctl")
    seen = []

    class Watching(RecordedRunner):
        def verify(self, spec):
            seen.append([i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"])
            return super().verify(spec)

    np.ones((64, 64)) @ np.ones((64, 64))  # BLAS loaded
    assert any(i["user_api"] == "blas" for i in threadpoolctl.threadpool_info())
    autotune(kgen.Matmul, P, "float32", strategy="guided", runner=Watching(smooth, seed=2), db=str(tmp_path / "f.db"),
             seed=2, compiler=report, workers=0, max_configs=40)
    assert seen and all(threads and all(t == 1 for t in threads) for threads in seen)
