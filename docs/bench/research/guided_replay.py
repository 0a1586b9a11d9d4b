"""Replay the guided strategy, without a GPU, on the times an exhaustive tune recorded.

Each seed runs kgen.autotune(strategy="guided") with a RecordedRunner that answers every
launch with the exhaustive run's median for that spec (times a little noise) and a
compiler that answers with its recorded ptxas resources: everything else (pruning, the
model, batches, convergence, the leaders' re-timing) is the real tuner. It prints, per
seed, how many candidates were launched and how far the pick is from the exhaustive best.

    python3 docs/bench/research/guided_replay.py docs/bench/autotune_3000_exhaustive.json --seeds 40
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

import kgen
from kgen.tune.runners import RecordedRunner
from kgen.core.spec import families, spec_from_dict


def load(path):
    with open(path) as fh:
        d = json.load(fh)
    cls = families()[d["family"]]
    times, resources = {}, {}
    for r in d["records"]:
        spec = spec_from_dict(r["spec"])
        if r["status"] == "ok":
            times[spec.key] = r["median_ms"]
        resources[spec.key] = r.get("resources")
    return cls, d["problem"], d.get("dtype", "float32"), times, resources


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("record", help="JSON of an exhaustive tune (kgen tune ... --json)")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--first-seed", type=int, default=1)
    p.add_argument("--noise", type=float, default=0.002, help="relative noise on each replayed time")
    args = p.parse_args(argv)
    cls, problem, dtype, times, resources = load(args.record)
    best = min(times.values())
    never = 10 * max(times.values())  # failed or pruned in the recorded run: never the winner
    no_report = {"kgen_matmul_vec": {"registers": 64, "shared_bytes": 0, "stack_bytes": 0,
                                     "spill_stores": 0, "spill_loads": 0}}
    rows = []
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        fd, db = tempfile.mkstemp(suffix=".sqlite3")
        os.close(fd)
        try:
            runner = RecordedRunner(lambda s: times.get(s.key, never), noise=args.noise, seed=seed)
            res = kgen.autotune(cls, problem=problem, dtype=dtype, strategy="guided", seed=seed, runner=runner,
                                compiler=lambda s, arch: resources.get(s.key) or no_report, db=db, workers=0)
        finally:
            os.unlink(db)
        launched = len(set(runner.launched))
        ratio = times.get(res.best.key, never) / best
        rows.append((seed, launched, ratio))
        print(f"seed {seed:3d}: launched {launched:4d} of {len(resources)} specs in the space; pick {ratio:.4f}x the best")
    far = [r for r in rows if r[2] > 1.03]
    print(f"{len(far)} of {len(rows)} seeds more than 3% off; launched mean "
          f"{statistics.fmean(r[1] for r in rows):.0f}, max {max(r[1] for r in rows)}; "
          f"worst pick {max(r[2] for r in rows):.4f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
