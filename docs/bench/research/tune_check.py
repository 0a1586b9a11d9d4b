"""Re-time a guided tune's pick beside an exhaustive tune's leaders, interleaved, in one process.

Two tunes of one problem each settle their winner with their own samples; screening times of
other candidates are a few samples each. This script takes the guided result's best and the
exhaustive result's best few, verifies each against float64 (NaN-poisoned output) and times
them interleaved on the GPU (CudaRunner: L2 flushed before each sample), so the gap between
the guided pick and the exhaustive best is measured under the same conditions.

    python3 docs/bench/research/tune_check.py GUIDED.json EXHAUSTIVE.json [--top 3] [--samples 60]
"""
import argparse
import json
import statistics
import sys

from kgen.core.spec import families, spec_from_dict
from kgen.tune.runners import CudaRunner


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("guided")
    p.add_argument("exhaustive")
    p.add_argument("--top", type=int, default=3)
    p.add_argument("--samples", type=int, default=60)
    args = p.parse_args(argv)
    g, x = (json.load(open(f)) for f in (args.guided, args.exhaustive))
    if g["problem"] != x["problem"] or g["family"] != x["family"]:
        raise SystemExit("the two results are for different problems")
    cls = families()[g["family"]]

    def spec(s):
        return spec_from_dict(json.loads(s) if isinstance(s, str) else s)

    ranked = sorted((r for r in x["records"] if r["status"] == "ok"), key=lambda r: r["median_ms"])
    picks = [("guided pick", spec(g["best"]))]
    for n, r in enumerate(ranked[: args.top]):
        s = spec_from_dict(r["spec"])
        if s.key != picks[0][1].key:
            picks.append((f"exhaustive #{n + 1}", s))
    runner = CudaRunner(seed=1)
    runner.prepare(cls, g["problem"], g.get("dtype", "float32"), 1)
    try:
        for name, s in picks:
            err, tol, bad = runner.verify(s)
            if bad or not err <= tol:
                raise SystemExit(f"{name} is wrong: error {err:.3e} (tolerance {tol:.3e}), {bad} not finite")
        times = runner.time([s for _, s in picks], args.samples, warmup=2)
    finally:
        runner.close()
    med = [statistics.median(t) for t in times]
    best = min(med[1:]) if len(med) > 1 else med[0]
    out = {"problem": g["problem"], "device": runner.device.name, "samples": args.samples,
           "rows": [{"name": n, "spec": s.to_json(), "median_ms": m} for (n, s), m in zip(picks, med)],
           "guided_over_exhaustive_best": med[0] / best}
    for (n, _), m in zip(picks, med):
        print(f"{n:15s} {m:.4f} ms")
    print(f"guided pick / exhaustive best = {med[0] / best:.4f} ({g['problem']}, {runner.device.name})")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
