"""The float32 skinny forms on wgmma against the mma.sync ones, 17-256 rows (sm_90 only).

First correctness: ten awkward shapes (odd N and K, several row tiles, both storage orders
of the weight) x seven variants (threads, tc_tiles, every merge, a fixed K split) x four
placements (plain, odd element offset, alpha/beta, the large operand first), each against the
float64 product, output poisoned with NaN. Then device time of bound launches over rotated
weights (median of 9 batches, cuBLAS SGEMM with TF32 off beside it): the mma.sync default
(`mma`), the wgmma forms with two warpgroups a block (`wg256`) and one (`wg128`), each with one
or two 64-column tiles a warpgroup (`t2`), and `kgen.matmul(x, W, out=C)` back to back
(`public`, host time included). Output: $OUT/$NAME.json (NAME=wg2 by default).
ROWS=..., WEIGHTS=NxK,..., SKIP_CHECK=1 narrow it; below 17 rows the wgmma rows are the
product's rows rounded up to 8."""
import concurrent.futures as cf
import json
import math
import os
import time

import torch

import kgen
from kgen.bench.skinny import time_batched
from kgen.ops.skinny import Skinny, tolerance

OUT = os.environ.get("OUT", ".")


def wg(rows, threads=256, tiles=1, merge="two_pass", k_split=0):
    try:
        return _wg(rows, threads, tiles, merge, k_split)
    except kgen.SpecError:
        return None


def _wg(rows, threads, tiles, merge, k_split):
    return Skinny(dtype="float32", rows=rows, warp_cols=1, lane_vectors=1, threads=threads, vector_bytes=16, loads=4,
                  k_split=k_split, waves=2, merge=merge, tensor_cores=True, tc_tiles=tiles, instruction="wgmma")


def log(*a):
    print(*a, flush=True)


def check(k, M, N, K, order, off=0, alpha=1.0, beta=0.0, swap=False):
    g = torch.Generator(device="cuda").manual_seed(M * 7 + N + K)
    A = torch.randn(M * K + off, device="cuda", generator=g)[off:].view(M, K)
    if order == "row":
        B = torch.randn(K * N + off, device="cuda", generator=g)[off:].view(K, N)
    else:
        B = torch.randn(N * K + off, device="cuda", generator=g)[off:].view(N, K).t()
    if swap:   # large first operand: N x K times K x M
        A, B = B.t(), A.t()
    C0 = torch.randn(A.shape[0], B.shape[1], device="cuda")
    C = C0.clone()
    if beta == 0.0:
        C.fill_(float("nan"))
    k(A, B, out=C, alpha=alpha, beta=beta)
    torch.cuda.synchronize()
    ref = alpha * (A.double() @ B.double()) + beta * C0.double()
    err = float((C.double() - ref).norm() / ref.norm())
    return err, torch.isnan(C).any().item()


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_name()
    log(dev)
    res = {"device": dev, "check": [], "speed": [], "public": []}
    # ---- correctness ----
    cases = [(17, 1031, 1024, "row"), (17, 1031, 1024, "col"), (33, 3001, 1500, "col"), (100, 2172, 4099, "row"),
             (129, 1030, 2049, "col"), (250, 4097, 1111, "row"), (64, 4096, 4096, "col"), (8, 1024, 3000, "row"),
             (128, 1100, 1024, "row"), (200, 5000, 1537, "col")]
    variants = [dict(), dict(threads=128), dict(tiles=2), dict(threads=128, tiles=2), dict(merge="atomic"),
                dict(merge="single_pass"), dict(k_split=3)]
    specs = {}
    for M, N, K, _order in cases:
        rows = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}).rows
        for v in variants:
            if wg(rows, **v):
                specs[(rows, tuple(sorted(v.items())))] = wg(rows, **v)
    t0 = time.time()
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, specs.values()))
    log(f"compiled {len(specs)} in {time.time() - t0:.0f}s")
    bad = 0
    for M, N, K, order in ([] if os.environ.get("SKIP_CHECK") else cases):
        rows = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}).rows
        for v in variants:
            if not wg(rows, **v):
                continue
            k = kgen.build(wg(rows, **v))
            for extra in (dict(), dict(off=1), dict(alpha=0.5, beta=2.0), dict(swap=True)):
                try:
                    err, nan = check(k, M, N, K, order, **extra)
                except Exception as e:  # noqa
                    err, nan = float("inf"), True
                    log("EXC", M, N, K, order, v, extra, repr(e)[:300])
                ok = err <= tolerance("float32", K) and not nan
                bad += not ok
                res["check"].append([M, N, K, order, str(v), str(extra), err, ok])
                if not ok:
                    log("WRONG", M, N, K, order, v, extra, err, nan)
    if res["check"]:
        log(f"correctness: {len(res['check'])} checks, {bad} wrong; max err "
            f"{max(c[6] for c in res['check']):.2e}")
    # ---- speed, bound launches ----
    weights = [(4096, 4096), (11008, 4096), (4096, 11008), (5120, 5120), (14336, 4096), (2172, 8965)]
    if os.environ.get("WEIGHTS"):
        weights = [tuple(int(v) for v in w.split("x")) for w in os.environ["WEIGHTS"].split(",")]
    ROWS = [int(r) for r in os.environ.get("ROWS", "17,24,32,48,64,100,128,200,256").split(",")]
    sp = {}
    for M in ROWS:
        p = {"M": M, "N": 4096, "K": 4096}
        r = Skinny.wgmma_default_spec(p).rows
        r = -(-M // 8) * 8 if M < 17 else r
        sp[M] = {"mma": Skinny.default_spec(p, "float32"), "wg256": wg(r), "wg128": wg(r, 128),
                 "wg256t2": wg(r, tiles=2), "wg128t2": wg(r, 128, tiles=2)}
        sp[M] = {n: s for n, s in sp[M].items() if s}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, [s for d in sp.values() for s in d.values()]))
    for N, K in weights:
        copies = max(2, -(-200_000_000 // (N * K * 4)))
        for order in ("row", "col"):
            Ws = [torch.randn(K, N, device="cuda") if order == "row" else torch.randn(N, K, device="cuda").t()
                  for _ in range(copies)]
            for M in ROWS:
                xs = [torch.randn(M, K, device="cuda") for _ in range(copies)]
                Cs = [torch.empty(M, N, device="cuda") for _ in range(copies)]
                row = {"M": M, "N": N, "K": K, "order": order}
                peer = [lambda i=i, xs=xs, Ws=Ws, Cs=Cs: torch.matmul(xs[i], Ws[i], out=Cs[i]) for i in range(copies)]
                row["cublas"] = time_batched(torch, peer, 9, max(copies, 40))
                for name, spec in sp[M].items():
                    try:
                        k = kgen.build(spec)
                        bound = [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)]
                        row[name] = time_batched(torch, bound, 9, max(copies, 40))
                    except Exception as e:  # noqa
                        log("EXC", name, M, N, K, repr(e)[:200])
                        row[name] = float("inf")
                # public call, empty database: one call per launch, pipelined loop
                calls = [lambda i=i, xs=xs, Ws=Ws, Cs=Cs: kgen.matmul(xs[i], Ws[i], out=Cs[i]) for i in range(copies)]
                row["public"] = time_batched(torch, calls, 9, max(copies, 40))
                res["speed"].append(row)
                log(f"{order} {M}x{N}x{K}: cuBLAS {row['cublas']:.1f}us " + " ".join(
                    f"{n} {row['cublas'] / row[n]:.2f}x" for n in list(sp[M]) + ["public"]))
            del Ws
    json.dump(res, open(f"{OUT}/" + os.environ.get("NAME", "wg2") + ".json", "w"), indent=1)
    for M in ROWS:
        rr = [r for r in res["speed"] if r["M"] == M]
        g = {n: math.exp(sum(math.log(r["cublas"] / r[n]) for r in rr) / len(rr)) for n in list(sp[M]) + ["public"]}
        log(f"{M:3d} rows geo x cuBLAS: " + " ".join(f"{n} {v:.3f}" for n, v in g.items()) +
            f"  min public {min(r['cublas'] / r['public'] for r in rr):.2f}")


if __name__ == "__main__":
    main()
