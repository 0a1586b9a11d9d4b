"""Fit the float64 K-split model (kgen.ops.tensorcore.F64_SPLIT_MODEL, f64_sm_split) on device times
of the 64 x 64 default at splits 1-8 (mma_whole_tiles.py with VARIANTS split_k=1..8), and check it.

  python docs/bench/research/f64_split_model_fit.py FIT.json [FIT2.json ...] [--held HELD.json ...]

The model is kgen's own (f64_split_us; f64_sm_split picks by it) with the constants free: the
busiest SM runs ceil(tiles * s / 132) blocks, three at a time, each K / s + kappa k long at omega
µs a k, a wave of fewer than three slowed by eff[1] or eff[2]; a split adds its
workspace (s * M * N doubles) at us_per_mb µs a MB and the reduce launch (reduce_us). One omega a
product is fitted beside the shared parameters (least squares on log time); the model then runs
with the median omega. It prints the parameters, each product's split by the rule the JSON's spec
had, by the model and the fastest timed, and the model's speed against that rule, first on the
fitted products, then two-fold (each half's fit picking on the other half), then on --held; each
over all products and over those of at least BUSY_TILES tiles, where kgen uses the model.
Needs scipy, and kgen importable (PYTHONPATH=. from the repository root)."""
import argparse
import json
import math

import numpy as np
from scipy.optimize import least_squares

from kgen.ops.tensorcore import F64SplitModel, f64_sm_split, f64_split_us

SMS = 132
BUSY_TILES = 198   # F64_BUSY_TILES_PER_SM (1.5) an SM: where kgen applies the model


def load(paths):
    rows = []
    for path in paths:
        for r in json.load(open(path))["rows"]:
            times = {int(k[1:-3]): v for k, v in r.items() if k[0] == "s" and k.endswith("_us") and k[1:-3].isdigit()}
            if not times:
                continue
            spec = json.loads(r["spec"])
            times.setdefault(spec["split_k"], r["spec_us"])
            M, N, K = r["shape"]
            BM, BN = spec["tile"][:2]
            rows.append(dict(M=M, N=N, K=K, layout=r["layout"], tiles=-(-M // BM) * -(-N // BN),
                             rule=spec["split_k"], times=times))
    return rows


def model_of(params, omega):
    kappa, e1, e2, us_per_mb, reduce_us = params
    return F64SplitModel(omega_us=omega, kappa=kappa, eff=(e1, e2, 1.0), us_per_mb=us_per_mb, reduce_us=reduce_us)


def predict(r, s, params, omega):
    return f64_split_us(r["M"], r["N"], r["K"], r["tiles"], s, SMS, model_of(params, omega))


def fit(rows):
    def residuals(x):
        return [math.log(predict(r, s, x[:5], math.exp(x[5 + i]))) - math.log(t)
                for i, r in enumerate(rows) for s, t in r["times"].items()]
    x0 = [16, 0.6, 0.85, 0.5, 3.0] + [math.log(0.025)] * len(rows)
    lower, upper = [0, 0.2, 0.3, 0, 0] + [-20] * len(rows), [400, 1.5, 1.5, 10, 50] + [20] * len(rows)
    res = least_squares(residuals, x0, bounds=(lower, upper))
    return res.x[:5], float(np.median(np.exp(res.x[5:]))), float(np.sqrt(np.mean(np.square(res.fun))))


def pick(r, params, omega):
    return f64_sm_split(r["M"], r["N"], r["K"], r["tiles"], SMS, model_of(params, omega))


def report(label, rows, params, omega, verbose=True):
    speeds = []
    for r in rows:
        s = pick(r, params, omega)
        timed = s if s in r["times"] else min(r["times"], key=lambda t: abs(t - s))
        best = min(r["times"], key=r["times"].get)
        speeds.append(r["times"][r["rule"]] / r["times"][timed])
        if verbose:
            print(f"  {label} {r['M']}x{r['N']}x{r['K']} {r['layout']} tiles {r['tiles']}: rule {r['rule']} "
                  f"model {s} (timed {timed}) fastest {best}: {speeds[-1]:.3f}x")
    for name, chosen in (("all", speeds), (f"from {BUSY_TILES} tiles", [v for r, v in zip(rows, speeds)
                                                                     if r["tiles"] >= BUSY_TILES])):
        if chosen:
            gm = math.exp(sum(map(math.log, chosen)) / len(chosen))
            print(f"{label}, {name}: the model's split {gm:.3f}x the rule's over {len(chosen)} "
                  f"({min(chosen):.3f}-{max(chosen):.3f}x)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fit", nargs="+")
    ap.add_argument("--held", nargs="*", default=[])
    args = ap.parse_args()
    rows = load(args.fit)
    params, omega, rms = fit(rows)
    print("kappa %.1f eff1 %.3f eff2 %.3f us_per_mb %.3f reduce_us %.2f" % tuple(params),
          f"omega_us {omega:.4f} rms of log time {rms:.3f}")
    report("fit", rows, params, omega)
    if len(args.fit) > 1:
        halves = [load([p]) for p in args.fit]
        for i, half in enumerate(halves):
            p_i, o_i, _ = fit(half)
            others = [r for j, h in enumerate(halves) if j != i for r in h]
            report(f"fit on {args.fit[i]}, picked on the rest", others, p_i, o_i, verbose=False)
    if args.held:
        report("held", load(args.held), params, omega)


if __name__ == "__main__":
    main()
