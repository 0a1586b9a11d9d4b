"""Replay the guided strategy on recorded exhaustive tunes and count what a run costs:
candidates compiled, candidates launched, and wall time with a simulated compile pool.

Like guided_replay.py (a RecordedRunner answers each launch with the recorded median plus
0.2% noise; the rest is the real tuner), but the compile pool is simulated in threads:
each compile sleeps a time drawn once per spec from a lognormal law (mean --compile-s,
log-sd --compile-sd; a 2-core machine measured 0.46-3.49 s over 16 random matmul specs,
log-sd 0.53), each launch sleeps --launch-s. Wall time then shows what the batch barrier
and the search's length cost, scaled down.

--cached-from OTHER.json first replays a guided tune of the other recording's problem and
counts every spec it compiled as cached for the run on RECORD: what a second shape's tune
costs after a first one.

    python3 docs/bench/research/guided_cost_replay.py docs/bench/autotune_3000_exhaustive.json \\
        --seeds 10 --workers 15 --cached-from docs/bench/autotune_4096_exhaustive.json
"""
import argparse
import concurrent.futures as cf
import hashlib
import math
import os
import statistics
import sys
import tempfile
import threading
import time

import kgen
import kgen.tune.pool as pool_module
import kgen.tune.tuner as tuner_module
from kgen.tune.runners import RecordedRunner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from guided_replay import load  # noqa: E402 - the recording's reader, shared with that replay


class ThreadPool(pool_module.CompilePool):
    """The compile pool with the custom compiler run in `workers` threads (the real pool runs
    a custom compiler in-process)."""

    def __init__(self, arch, workers, compiler=None):
        super().__init__(arch, workers, compiler)
        self._threads = cf.ThreadPoolExecutor(max_workers=workers) if workers else None

    def submit(self, spec):
        fut = self.futures.get(spec.key)
        if fut is not None:
            return fut
        if self._threads is None:
            return super().submit(spec)
        fut = self._threads.submit(self._inline, spec)
        fut.add_done_callback(self._finished)
        self.futures[spec.key] = fut
        return fut

    def shutdown(self):
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)


def seconds_for(key, mean, sd):
    """A lognormal compile time, the same for a spec in every run."""
    u = [int(hashlib.sha256(f"{key}:{i}".encode()).hexdigest()[:12], 16) / 16**12 for i in (0, 1)]
    z = math.sqrt(-2 * math.log(max(u[0], 1e-12))) * math.cos(2 * math.pi * u[1])
    return mean * math.exp(sd * z - sd * sd / 2)


def replay(record, seed, args, cached=frozenset()):
    cls, problem, dtype, times, resources = record
    never = 10 * max(times.values())
    no_report = {"kgen_matmul_vec": {"registers": 64, "shared_bytes": 0, "stack_bytes": 0,
                                     "spill_stores": 0, "spill_loads": 0}}
    compiled, lock = [], threading.Lock()

    def compiler(spec, arch):
        if spec.key not in cached:
            time.sleep(seconds_for(spec.key, args.compile_s, args.compile_sd))
        with lock:
            compiled.append(spec.key)
        return resources.get(spec.key) or no_report

    class SlowRunner(RecordedRunner):
        def verify(self, spec):
            time.sleep(args.launch_s)
            return super().verify(spec)

    fd, db = tempfile.mkstemp(suffix=".sqlite3")
    os.close(fd)
    t0 = time.perf_counter()
    try:
        runner = SlowRunner(lambda s: times.get(s.key, never), noise=args.noise, seed=seed)
        res = kgen.autotune(cls, problem=problem, dtype=dtype, strategy="guided", seed=seed, runner=runner,
                            compiler=compiler, db=db, workers=args.workers,
                            **({"cached": lambda s: s.key in cached} if cached else {}))
    finally:
        os.unlink(db)
    wall = time.perf_counter() - t0
    new = {k for k in compiled if k not in cached}
    return {"launched": len(set(runner.launched)), "compiled": len(set(compiled)), "new": len(new),
            "ratio": times.get(res.best.key, never) / min(times.values()), "wall": wall,
            "compiled_keys": set(compiled), "stopped": res.note}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("record", help="JSON of an exhaustive tune (kgen tune ... --json)")
    p.add_argument("--cached-from", help="another exhaustive tune's JSON: replay it first, its compiles cached")
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--workers", type=int, default=15)
    p.add_argument("--compile-s", type=float, default=0.03, help="mean simulated compile time")
    p.add_argument("--compile-sd", type=float, default=0.53, help="log-sd of the simulated compile time")
    p.add_argument("--launch-s", type=float, default=0.0002, help="simulated time to verify and time one")
    p.add_argument("--noise", type=float, default=0.002)
    p.add_argument("--patience", type=int, help="batches without a gain before stopping (default: the tuner's)")
    args = p.parse_args(argv)
    if args.patience:
        tuner_module.GUIDED_PATIENCE = tuner_module.GUIDED_ROLLING_PATIENCE = args.patience
    pool_module.CompilePool = ThreadPool
    tuner_module.CompilePool = ThreadPool
    record = load(args.record)
    other = load(args.cached_from) if args.cached_from else None
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        cached = frozenset()
        first = None
        if other is not None:
            first = replay(other, seed, args)
            cached = frozenset(first["compiled_keys"])
        r = replay(record, seed, args, cached)
        rows.append(r)
        head = (f"first: {first['compiled']} compiled, {first['wall']:.2f} s; " if first else "")
        print(f"seed {seed:3d}: {head}launched {r['launched']:4d}, compiled {r['compiled']:4d} "
              f"({r['new']} new), wall {r['wall']:.2f} s, pick {r['ratio']:.4f}x the best")
    print(f"mean: launched {statistics.fmean(r['launched'] for r in rows):.0f}, new compiles "
          f"{statistics.fmean(r['new'] for r in rows):.0f}, wall {statistics.fmean(r['wall'] for r in rows):.2f} s; "
          f"{sum(r['ratio'] > 1.03 for r in rows)} of {len(rows)} more than 3% off, "
          f"worst {max(r['ratio'] for r in rows):.4f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
