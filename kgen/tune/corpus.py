"""Tuning a corpus of problems, and building the defaults kgen ships from it.

Dispatch needs a good spec for a shape nobody tuned. This module measures a fixed
portfolio of specs (each compiled once: a cubin does not depend on the shape) on a
corpus of random problems drawn log-uniformly over the ranges users run, and
kgen.tune.defaults turns the measurements into a model that picks a spec for any
shape. The corpus is split into a training part (what the model sees) and a held-out
part (what the model is scored on), so the figures say how the model does on shapes it
never saw.

    python -m kgen.tune.corpus measure --family matmul --dtype float32 --out corpus.json   # on a GPU
    python -m kgen.tune.corpus build corpus.json ...                                   # anywhere

`measure` writes its JSON after every problem, so an interrupted run keeps what it did
and `--resume` goes on from there.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import statistics
import sys
import time
from typing import Any

from ..core.spec import Spec, spec_from_dict
from ..ops.matmul import Matmul
from ..ops.reduce import Reduce
from .defaults import build_defaults

log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------------
# Problems
# ---------------------------------------------------------------------------------
MAX_FLOPS = 2.0 ** 41       # 16384 x 16384 x 4096: larger products are all alike (big tiles)
MAX_BYTES = 3 * 2 ** 30     # A + B + C on the device


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return max(lo, min(hi, int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))))


def matmul_problems(count: int, seed: int, itemsize: int = 4) -> list[dict[str, int]]:
    """`count` products drawn log-uniformly from 1 to 16384 in each dimension, in five
    kinds users run: any shape, few rows (a batch of tokens against a weight matrix),
    few columns, long K, and squares; a third of the dimensions are made odd so the
    unaligned paths are covered as often as the aligned ones."""
    rng = random.Random(seed)
    out: list[dict[str, int]] = []
    kinds = ("any", "any", "rows", "cols", "longk", "square")
    while len(out) < count:
        kind = kinds[len(out) % len(kinds)]
        if kind == "any":
            M, N, K = (_log_uniform(rng, 1, 16384) for _ in range(3))
        elif kind == "rows":
            M, N, K = _log_uniform(rng, 1, 256), _log_uniform(rng, 1024, 16384), _log_uniform(rng, 1024, 16384)
        elif kind == "cols":
            M, N, K = _log_uniform(rng, 1024, 16384), _log_uniform(rng, 1, 256), _log_uniform(rng, 1024, 16384)
        elif kind == "longk":
            M, N, K = _log_uniform(rng, 64, 4096), _log_uniform(rng, 64, 4096), _log_uniform(rng, 4096, 65536)
        else:
            M = _log_uniform(rng, 16, 16384)
            M, N, K = M, max(1, int(M * rng.uniform(0.7, 1.4))), max(1, int(M * rng.uniform(0.5, 1.5)))
        dims = []
        for d in (M, N, K):
            if d > 8 and rng.random() < 1 / 3:
                d += 1 if d % 2 == 0 else 0  # odd: no 16-byte rows
            elif d > 8 and rng.random() < 0.5:
                d = max(8, d // 8 * 8)
            dims.append(d)
        M, N, K = dims
        if 2.0 * M * N * K > MAX_FLOPS or (M * K + K * N + M * N) * itemsize > MAX_BYTES:
            continue
        out.append({"M": M, "N": N, "K": K})
    return out


def reduce_problems(count: int, seed: int, op: str) -> list[dict[str, Any]]:
    """Lengths log-uniform from 2^10 to 2^28, half of them odd."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        n = _log_uniform(rng, 2 ** 10, 2 ** 28)
        n = n | 1 if i % 2 else max(16, n // 16 * 16)
        out.append({"n": n, "op": op})
    return out


# ---------------------------------------------------------------------------------
# The portfolio: the specs every problem is measured with.
# ---------------------------------------------------------------------------------
_TUNED = dict(shared_memory=True, vector_loads=True, interior_fast_path=True, repack=True)


def matmul_portfolio(dtype: str) -> list[Spec]:
    """Specs spanning the tiled family: large tiles for large products, split-K for few
    C tiles and long K, small tiles for small outputs, each with repack so it runs on
    any alignment. The tuner's search space holds many more; these are the ones that
    win somewhere (from exhaustive tunes of representative shapes)."""
    specs: list[Spec] = []
    seen: set[str] = set()

    def add(**kw: Any) -> None:
        try:
            s = Matmul(dtype=dtype, **kw)
        except ValueError as exc:
            log.debug("portfolio: %s", exc)
            return
        if s.key not in seen:
            seen.add(s.key)
            specs.append(s)

    f32 = dtype == "float32"
    pad = 16 // (4 if f32 else 8)
    tuned = dict(_TUNED, smem_pad=pad)
    if f32:
        big = [((128, 256, 16), (8, 16), (32, 128)), ((128, 128, 8), (8, 8), (32, 64)),
               ((128, 128, 16), (8, 8), (32, 64)), ((64, 128, 8), (8, 8), (32, 64)),
               ((128, 64, 8), (8, 8), (32, 64)), ((64, 64, 8), (8, 4), (32, 32)),
               ((64, 64, 16), (4, 4), (16, 32)), ((32, 64, 16), (4, 4), (16, 32)),
               ((64, 32, 16), (4, 4), (16, 32)), ((32, 32, 16), (4, 4), (16, 32)),
               # Few rows (a batch of tokens against a weight matrix): short, wide tiles read
               # the large operand once and, split along K, still fill the GPU.
               ((32, 128, 16), (4, 8), (16, 64)), ((16, 128, 16), (2, 8), (8, 64))]
    else:
        big = [((64, 64, 8), (4, 4), (16, 32)), ((128, 64, 8), (4, 4), (16, 32)), ((64, 128, 8), (4, 4), (16, 32)),
               ((128, 128, 8), (4, 4), (16, 32)), ((32, 64, 8), (4, 4), (16, 32)), ((32, 32, 16), (2, 4), (8, 32))]
    for tile, tt, wt in big:
        threads = (tile[0] // tt[0]) * (tile[1] // tt[1])
        mb = 512 // threads if f32 and tt[0] * tt[1] <= 64 and threads <= 256 else 0
        add(tile=tile, thread_tile=tt, warp_tile=wt, stages=3, async_copy=True, min_blocks=mb, **tuned)
        if tile[0] * tile[1] >= 128 * 128:
            add(tile=tile, thread_tile=tt, warp_tile=wt, stages=3, async_copy=True, min_blocks=mb, tail_split_k=4,
                **tuned)
    for ways in (2, 4, 8, 16):
        for tile, tt, wt in big[1:]:
            if tile[0] * tile[1] > 128 * 128:
                continue
            threads = (tile[0] // tt[0]) * (tile[1] // tt[1])
            mb = 512 // threads if f32 and tt[0] * tt[1] <= 64 and threads <= 256 else 0
            add(tile=tile, thread_tile=tt, warp_tile=wt, stages=3, async_copy=True, min_blocks=mb, split_k=ways,
                **tuned)
    # Tiny outputs: plain shared-memory tiles and one thread an element.
    add(tile=(32, 32, 32), thread_tile=(1, 1), shared_memory=True)
    add(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True, stages=2)
    add(tile=(16, 16, 16), thread_tile=(1, 1))
    return specs


def reduce_portfolio(dtype: str, op: str) -> list[Spec]:
    specs: list[Spec] = []
    seen: set[str] = set()
    for strategy in ("single_pass", "atomic", "two_pass", "warp_shuffle", "shared_tree"):
        for block in (256, 512, 1024):
            for items in (2, 4, 8):
                try:
                    s = Reduce(op=op, dtype=dtype, strategy=strategy, block_size=block, items_per_thread=items,
                               vector_loads=True, grid_stride=True)
                except ValueError:
                    continue
                if s.key not in seen:
                    seen.add(s.key)
                    specs.append(s)
    return specs


# ---------------------------------------------------------------------------------
# Measuring (GPU)
# ---------------------------------------------------------------------------------
def _time_launch(run, reps: int, events) -> float:
    """Median milliseconds of one launch over `reps` groups."""
    start, stop = events
    times = []
    for _ in range(reps):
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.time_till(stop))
    return statistics.median(times)


def measure(family: str, dtype: str, problems: list[dict[str, Any]], portfolio: list[Spec], out_path: str,
            resume: bool = True, budget_s: float | None = None, slack: float = 3.0) -> dict[str, Any]:
    """Time every portfolio spec on every problem (device time of the bound launch, CUDA
    events, median of a few repeats, after a warm-up), checking each result against the
    float64 reference on its first launch. A spec already slack times slower than the
    problem's best after one launch is not repeated."""
    import numpy as np
    import torch

    from ..core import runtime
    from ..core.kernel import build

    drv = runtime.driver()
    record: dict[str, Any] = {"family": family, "dtype": dtype, "device": runtime.device().name(),
                              "arch": runtime.device_arch(), "op": problems[0].get("op") if problems else None,
                              "specs": [s.to_dict() for s in portfolio], "problems": [], "ms": []}
    if resume and os.path.exists(out_path):
        with open(out_path) as fh:
            old = json.load(fh)
        if old.get("specs") == record["specs"] and old.get("dtype") == dtype:
            record = old
    done = {json.dumps(p, sort_keys=True) for p in record["problems"]}
    kernels: list[Any] = []
    for s in portfolio:
        try:
            kernels.append(build(s))
        except Exception as exc:  # noqa: BLE001 - a spec this device cannot run is left out
            log.warning("portfolio spec %s does not build: %s", s.to_json(), exc)
            kernels.append(None)
    events = (drv.Event(), drv.Event())
    tdt = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(7)
    t_start = time.time()
    for i, prob in enumerate(problems):
        if json.dumps(prob, sort_keys=True) in done:
            continue
        if budget_s is not None and time.time() - t_start > budget_s:
            log.warning("time budget spent after %d problems", len(record["problems"]))
            break
        row = _measure_problem(family, prob, portfolio, kernels, tdt, gen, events, slack, np, torch)
        for k in kernels:
            if k is not None:
                k.release()
        torch.cuda.empty_cache()
        record["problems"].append(prob)
        record["ms"].append(row)
        best = min((t for t in row if t is not None), default=None)
        log.info("%d/%d %s best %.4f ms", i + 1, len(problems), prob, best if best else float("nan"))
        tmp = out_path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(record, fh)
        os.replace(tmp, out_path)
    return record


def _measure_problem(family, prob, portfolio, kernels, tdt, gen, events, slack, np, torch) -> list[float | None]:
    if family == "matmul":
        M, N, K = prob["M"], prob["N"], prob["K"]
        A = torch.randn(M, K, device="cuda", dtype=tdt, generator=gen)
        B = torch.randn(K, N, device="cuda", dtype=tdt, generator=gen)
        C = torch.empty(M, N, device="cuda", dtype=tdt)
        ref = (A.double() @ B.double())
        args: tuple[Any, ...] = (A, B)
        ref_norm = float(ref.norm()) or 1.0
    else:
        n, op = prob["n"], prob["op"]
        x = torch.randn(n, device="cuda", dtype=tdt, generator=gen)
        y = torch.randn(n, device="cuda", dtype=tdt, generator=gen) if op == "dot" else None
        C = torch.empty((), device="cuda", dtype=tdt)
        xd = x.double()
        ref = {"sum": xd.sum(), "dot": (xd * y.double()).sum() if y is not None else None,
               "max": xd.max(), "min": xd.min()}[op]
        args = (x,) if y is None else (x, y)
        ref_norm = max(float(xd.abs().sum()), 1e-30)
    row: list[float | None] = [None] * len(portfolio)
    best = math.inf
    for j, (spec, k) in enumerate(zip(portfolio, kernels)):
        if k is None:
            continue
        try:
            if spec.prune_reason(prob, {}) is not None:
                continue
        except Exception:  # noqa: BLE001
            continue
        C.fill_(float("nan"))
        try:
            if family == "matmul":
                def run(k=k):
                    k(A, B, out=C)
            else:
                run = k.bind(*args, out=C)
            run()
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001
            log.warning("%s on %s: %s", spec.to_json(), prob, exc)
            continue
        err = float((C.double() - ref).norm()) / ref_norm
        tol = 1e-3 if tdt == torch.float32 else 1e-9
        if not err <= tol:
            log.warning("wrong result: %s on %s, error %.3g", spec.to_json(), prob, err)
            continue
        first = _time_launch(run, 1, events)
        if first > slack * best:
            row[j] = first
            continue
        reps = 3 if first > 5 else (5 if first > 0.5 else 9)
        if first < 0.05:
            # Many launches between one pair of events: a single short launch is below the
            # events' resolution.
            inner = max(1, int(0.2 / max(first, 0.002)))

            def many(run=run, inner=inner):
                for _ in range(inner):
                    run()
            t = _time_launch(many, reps, events) / inner
        else:
            t = _time_launch(run, reps, events)
        row[j] = t
        best = min(best, t)
    return row


# ---------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kgen.tune.corpus", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure", help="time the portfolio on the corpus (needs a GPU)")
    m.add_argument("--family", choices=("matmul", "reduce"), required=True)
    m.add_argument("--dtype", default="float32", choices=("float32", "float64", "int32"))
    m.add_argument("--op", default="sum", help="reduce: sum, dot, max or min")
    m.add_argument("--count", type=int, default=300, help="problems in the corpus (default 300)")
    m.add_argument("--seed", type=int, default=2026)
    m.add_argument("--budget", type=float, default=None, help="stop after this many seconds")
    m.add_argument("--out", required=True)
    b = sub.add_parser("build", help="fit the shipped defaults from measured corpora")
    b.add_argument("corpora", nargs="+")
    b.add_argument("--held-out", type=float, default=0.25)
    b.add_argument("--out", default=None, help="default: kgen/tune/data/defaults.json")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.cmd == "measure":
        if args.family == "matmul":
            problems = matmul_problems(args.count, args.seed, 4 if args.dtype == "float32" else 8)
            portfolio = matmul_portfolio(args.dtype)
        else:
            problems = reduce_problems(args.count, args.seed, args.op)
            portfolio = reduce_portfolio(args.dtype, args.op)
        measure(args.family, args.dtype, problems, portfolio, args.out, budget_s=args.budget)
        return 0
    report = build_defaults(args.corpora, args.out, held_out=args.held_out)
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())


def specs_of(record: dict[str, Any]) -> list[Spec]:
    return [spec_from_dict(d) for d in record["specs"]]
