"""The float32 wgmma forms with a window's wgmmas in independent accumulator chains (Skinny.wg_chains)
against the spec kgen.matmul runs and the wgmma default (one chain).

Part 1 (edges, EDGES=1): for each spec of EDGE_SPECS (wg_chains 2 and 4, every merge), products at the
edges (N past and short of a block's columns, K short of a k8 step and of a window, K off whole
windows and chunks, the swapped operands, alpha and beta, a pitch that is no multiple of 16 bytes),
both storage orders of the large operand, against float64 on a NaN-poisoned output; any result off
kgen's float32 tolerance is printed and counted.

Part 2 (speed): products drawn at random (env SEED, COUNT; M from ROWS, N and K log-uniform in
1024-16384 as multiples of MULTIPLE, weights of MIN_MB or more, B = W.t() (ORDER=col) or row-major
(ORDER=row)), each way first checked against float64, then device time from a CUDA graph over
operands rotated past L2 (kgen.bench.skinny.time_graph), ROUNDS rounds in turn, the best kept; cuBLAS
through torch (TF32 off) in the same run; bound = bytes over the copy bandwidth of the run. Ways:
"dispatch" (the spec kgen.matmul picks), "wg" (Skinny.wgmma_default_spec) and "wg+<fields>" for each
of VARIANTS (';'-separated 'field=value,...' over the wgmma default). Output:
$OUT/wg_chains_<SEED>_<ORDER>.json."""
import json
import math
import os
import random

import torch

import kgen
from kgen.bench.skinny import Operands, copy_bandwidth, time_graph
from kgen.ops.skinny import Skinny, tolerance
from kgen.tune import dispatch

SEED = int(os.environ.get("SEED", "26001"))
COUNT = int(os.environ.get("COUNT", "8"))
ROWS = tuple(int(v) for v in os.environ.get("ROWS", "7-16").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "64"))
MIN_MB = float(os.environ.get("MIN_MB", "16"))
ROUNDS = int(os.environ.get("ROUNDS", "2"))
VARIANTS = [v for v in os.environ.get("VARIANTS", "wg_chains=2;wg_chains=4").split(";") if v]
ORDER = os.environ.get("ORDER", "col")
EDGES = os.environ.get("EDGES", "1") == "1"
torch.backends.cuda.matmul.allow_tf32 = False


def parse_variant(text):
    kw = {}
    for part in text.split(","):
        k, v = part.split("=")
        kw[k] = v == "True" if v in ("True", "False") else (int(v) if v.lstrip("-").isdigit() else v)
    return kw


def check(kern, A, B, alpha=1.0, beta=0.0, C0=None):
    """Relative error of kern(A, B) (or alpha A B + beta C0) against float64, output poisoned."""
    M, N = A.shape[0], B.shape[1]
    out = torch.full((M, N), float("nan"), device="cuda") if C0 is None else C0.clone()
    ref = A.double() @ B.double()
    if C0 is not None:
        ref = alpha * ref + beta * C0.double()
    kern(A, B, out=out, alpha=alpha, beta=beta)
    torch.cuda.synchronize()
    err = float((out.double() - ref).norm() / ref.norm().clamp_min(1e-300))
    return err if math.isfinite(err) else float("inf")


def edges():
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    bad = total = 0
    cases = [(8, 1000, 1024), (13, 4099, 2048), (16, 128, 31), (9, 129, 4001), (1, 2500, 777), (40, 3000, 1100),
             (7, 65, 12288), (16, 8192, 40), (5, 300, 33000), (3, 700, 5), (11, 1500, 13)]
    specs = [dict(rows=8, threads=256, wg_chains=2), dict(rows=16, threads=128, wg_chains=4),
             dict(rows=16, threads=256, tc_tiles=2, wg_chains=4), dict(rows=8, threads=256, wg_chains=4,
                                                                      merge="single_pass"),
             dict(rows=8, threads=256, wg_chains=2, merge="cluster", k_split=4),
             dict(rows=40, threads=256, warp_cols=1, wg_chains=4, merge="atomic")]
    for kw in specs:
        spec = Skinny(dtype="float32", tensor_cores=True, instruction="wgmma", tc_tiles=kw.pop("tc_tiles", 1),
                      merge=kw.pop("merge", "two_pass"), **kw)
        kern = kgen.build(spec)
        for M, N, K in cases:
            W = torch.randn(N, K, device="cuda", generator=g)
            A = torch.randn(M, K, device="cuda", generator=g)
            C0 = torch.randn(M, N, device="cuda", generator=g)
            Ws = torch.randn(N, K + 3, device="cuda", generator=g)[:, 1:K + 1]   # pitch K + 3, off 16 bytes
            Wr = torch.randn(K, N, device="cuda", generator=g)
            Wrs = torch.randn(K, N + 3, device="cuda", generator=g)[:, 1:N + 1]
            tol = tolerance("float32", K)
            runs = {"W.t()": check(kern, A, W.t()), "row-major": check(kern, A, Wr), "swapped": check(kern, W, A.t()),
                    "alpha/beta": check(kern, A, W.t(), alpha=0.75, beta=-1.5, C0=C0),
                    "odd pitch": check(kern, A, Ws.t()), "odd pitch row-major": check(kern, A, Wrs)}
            plan = kern.bind(A, W.t(), torch.empty(M, N, device="cuda")).plan
            for name, err in runs.items():
                total += 1
                if not err <= tol:
                    bad += 1
                    print(f"  OFF: {spec.to_json()} {M}x{N}x{K} {name} err {err:.2e} tol {tol:.1e}", flush=True)
            print(f"  {M}x{N}x{K} wg_chains={spec.wg_chains} merge={spec.merge} splits={plan.splits} "
                  + " ".join(f"{n} {e:.1e}" for n, e in runs.items()), flush=True)
    print(f"edges: {total} products, {bad} off their tolerance", flush=True)
    return bad


def draw(rng):
    M = int(math.exp(rng.uniform(math.log(ROWS[0]), math.log(ROWS[1] + 1))))
    N, K = (max(MULTIPLE, int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // MULTIPLE * MULTIPLE)
            for _ in range(2))
    return min(max(M, ROWS[0]), ROWS[1]), N, K


def main():
    bad = edges() if EDGES else 0
    rng = random.Random(SEED)
    props = torch.cuda.get_device_properties(0)
    bw = copy_bandwidth(torch, 20)
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.3f} TB/s; variants {VARIANTS}", flush=True)
    rows = []
    while len(rows) < COUNT:
        M, N, K = draw(rng)
        if N * K * 4 < MIN_MB * 1e6:
            continue
        ops = Operands(torch, M, N, K, "float32", ORDER, props.L2_cache_size)
        problem = {"M": M, "N": N, "K": K}
        wg = Skinny.wgmma_default_spec(problem)
        ways = {"dispatch": dispatch.call_spec(ops.A[0], ops.B[0]), "wg": wg}
        for v in VARIANTS:
            try:
                ways["wg+" + v] = wg.replace(**parse_variant(v))
            except ValueError as e:
                print(f"  {v}: not a spec here ({e})", flush=True)
        kerns = {n: kgen.build(s) for n, s in ways.items()}
        bound = (M * K + K * N + M * N) * 4 / bw * 1e6
        row = {"shape": [M, N, K], "order": ORDER, "bound_us": bound,
               "specs": {n: s.to_json() for n, s in ways.items()}, "err": {}, "us": {}, "plan": {}}
        for n, kern in kerns.items():
            err = check(kern, ops.A[0], ops.B[0])
            assert err <= tolerance("float32", K), (M, N, K, n, err)
            row["err"][n] = err
            plan = kern.bind(ops.A[0], ops.B[0], ops.C[0]).plan
            row["plan"][n] = {"form": plan.form, "splits": plan.splits}
        mm = [(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
        for _ in range(ROUNDS):
            for n, kern in kerns.items():
                calls = [(lambda a=a, b=b, c=c, kern=kern: kern(a, b, out=c)) for a, b, c in zip(ops.A, ops.B, ops.C)]
                row["us"].setdefault(n, []).append(time_graph(torch, calls, 15))
            row["us"].setdefault("cuBLAS", []).append(time_graph(torch, mm, 15))
        best = row["best"] = {n: min(v) for n, v in row["us"].items()}
        d = best["dispatch"]
        print(f"{M}x{N}x{K}: bound {bound:.1f} dispatch {d:.1f} ({bound / d:.0%}, {row['plan']['dispatch']['form']}) "
              f"cuBLAS {best['cuBLAS']:.1f} | " + " ".join(
                  f"{n} {best[n]:.1f} ({bound / best[n]:.0%}, x{d / best[n]:.3f}, s{row['plan'][n]['splits']})"
                  for n in kerns if n != "dispatch"), flush=True)
        rows.append(row)
        del ops
        torch.cuda.empty_cache()
    for n in rows[0]["best"]:
        if all(n in r["best"] for r in rows):
            g = math.exp(sum(math.log(r["best"]["dispatch"] / r["best"][n]) for r in rows) / len(rows))
            pb = math.exp(sum(math.log(r["bound_us"] / r["best"][n]) for r in rows) / len(rows))
            lo = min(r["bound_us"] / r["best"][n] for r in rows)
            print(f"{n}: x{g:.3f} over dispatch, {pb:.0%} of the bound (lowest {lo:.0%})", flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), f"wg_chains_{SEED}_{ORDER}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bw": bw, "variants": VARIANTS, "edges_off": bad,
                   "rows": rows}, f)


if __name__ == "__main__":
    main()
