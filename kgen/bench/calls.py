"""Benchmarks of kgen's public calls the way users make them, beside torch (cuBLAS).

    kgen bench calls matmul --shapes 1x4096x4096,513x513x513 [--dtype float32] [--json FILE]
    kgen bench calls matmul --random 40 --seed 123          # shapes drawn at run time
    kgen bench calls matmul --random 12 --rows 1-16 --weights --fresh-inputs   # a model's loop
    kgen bench calls matmul --random 12 --rows 1-16 --columns   # a large A against 1-16 columns
    kgen bench calls reduce --lengths 1048576,33554433 [--json FILE]
    kgen bench calls reduce --random 8 --seed 5             # lengths drawn at run time

Each problem is timed as a user calls it: torch tensors in, `kgen.matmul(A, B)` (or
kgen.dot / kgen.reduce) with no spec, the tuning database as it is (point KGEN_TUNE_DB
at an empty file to measure the shipped defaults alone). Two figures per call:
  single     one call between two CUDA events, median of many (host time included:
             the events bracket the Python call, so a slow call path shows here);
  pipelined  many calls back to back between two events, divided by their number.
The peer is the same call through torch (torch.matmul with TF32 off: cuBLAS SGEMM/DGEMM;
with --tf32 both sides compute float32 as TF32 (kgen.matmul(allow_tf32=True), cuBLAS's flag);
torch.dot, torch.sum, torch.max), measured in the same process and the same way, and for
float32 matmul a Triton kernel too where Triton is importable (kgen.bench.triton_peer).
The first call (compile or cache load, and the choice) is reported on its own, with the
family and the origin of the spec (tuned, shipped or the family's rule). Each matmul result
is checked against the float64 product within the bound of the spec dispatch chose: one past
it is marked WRONG, listed under the summary's "wrong", and the command exits 1.
--without-shipped ignores the shipped defaults, to see what they are worth.
"""
from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from functools import partial
from typing import Any, Callable, cast

from ..ops.reduce import OPS
from .results import geomean, log_uniform


def _events_ms(fn: Callable[[], Any], reps: int, inner: int = 1) -> float:
    from kgen.core.timing import time_calls

    return time_calls(fn, warmup=0, repeats=reps, inner=inner).median_ms


def _time_pair(kg: Callable[[], Any], peer: Callable[[], Any], budget_ms: float = 150.0) -> dict[str, float]:
    """single and pipelined ms of the kgen call and its peer, interleaved (so drifting
    clocks hit both alike)."""
    probe = max(_events_ms(peer, 3), _events_ms(kg, 3), 1e-3)
    reps = int(max(5, min(50, budget_ms / probe)))
    inner = int(max(1, min(200, 2.0 / probe)))
    out: dict[str, list[float]] = {"kgen_single": [], "peer_single": [], "kgen_pipe": [], "peer_pipe": []}
    for _ in range(3):
        out["kgen_single"].append(_events_ms(kg, reps))
        out["peer_single"].append(_events_ms(peer, reps))
        out["kgen_pipe"].append(_events_ms(kg, 3, inner))
        out["peer_pipe"].append(_events_ms(peer, 3, inner))
    return {k: statistics.median(v) for k, v in out.items()}


def random_matmul_shapes(count: int, seed: int, rows: tuple[int, int] | None = None,
                         multiple: int = 1, columns: bool = False) -> list[tuple[int, int, int]]:
    """Shapes drawn at run time: a third few-row products (M 1..256 against N, K 1024..16384,
    the shapes of model layers), the rest log-uniform from 16 to 8192, a third odd.
    rows=(lo, hi): few-row products only, M log-uniform from lo to hi. multiple > 1: N and K
    rounded up to multiples of it and none made odd (the sides of model layers, whose rows
    are 16-byte aligned); the draw of M and of the rest is the same as with multiple=1.
    columns=True (with rows): the mirror image, few-column products: the same draw with M
    and N swapped (N from lo to hi, M and K the large sides; a third of K odd, since A's rows
    are then the large operand's)."""
    if multiple < 1:
        raise ValueError(f"multiple={multiple!r}: a positive integer (1 leaves N and K as drawn)")
    if columns and rows is None:
        raise ValueError("columns=True draws few-column products: give rows=(lo, hi) for N's range")
    rng = random.Random(seed)
    shapes: list[tuple[int, int, int]] = []
    while len(shapes) < count:
        if rows is not None:
            M = min(rows[1], log_uniform(rng, rows[0], rows[1]))
            N, K = (int(2 ** rng.uniform(10, 14)) for _ in range(2))
        elif len(shapes) % 3 == 0:
            M = int(2 ** rng.uniform(0, 8))
            N, K = (int(2 ** rng.uniform(10, 14)) for _ in range(2))
        else:
            M, N, K = (int(2 ** rng.uniform(4, 13)) for _ in range(3))
        if rng.random() < 1 / 3 and multiple == 1:
            # Rows of the large operand that are not 16-byte aligned: B's (N long) for few
            # rows, A's (K long) for few columns.
            if columns:
                K |= 1
            else:
                N |= 1
        if multiple > 1:
            N, K = -(-N // multiple) * multiple, -(-K // multiple) * multiple
        if 2.0 * M * N * K > 2 ** 40:
            continue
        if columns:
            M, N = N, M
        shapes.append((max(M, 1), max(N, 1), max(K, 1)))
    return shapes


# Lengths `kgen bench calls reduce --random` draws: log-uniform from 1 to this (1 GiB of float32
# a vector), so every octave a user may pass weighs the same.
REDUCE_MAX_LENGTH = 1 << 28
# The dtypes the bench times: those of kgen.dot, which kgen.reduce's sum and max take too.
REDUCE_DTYPES = OPS["dot"][4]


def random_reduce_lengths(count: int, seed: int, hi: int = REDUCE_MAX_LENGTH) -> list[int]:
    """Lengths drawn at run time: log-uniform from 1 to hi, a third made odd (no multiple of any
    vector width, so the kernels' tails run)."""
    if hi < 1:
        raise ValueError(f"hi={hi!r}: the longest length to draw, a positive integer")
    rng = random.Random(seed)
    lengths = []
    for _ in range(count):
        n = log_uniform(rng, 1, hi)
        if rng.random() < 1 / 3:
            n |= 1
        lengths.append(min(n, hi))
    return lengths


# --fresh-inputs: how many A tensors a call rotates over, at most, and their bytes at most.
FRESH_INPUTS = 32
FRESH_INPUT_BYTES = 512 << 20


def bench_matmul(shapes: list[tuple[int, int, int]], dtype: str = "float32", tf32: bool = False,
                 weights: bool = False, fresh: bool = False, batch: int = 1) -> dict[str, Any]:
    """Each M x N x K as users call it; batch > 1: A of shape (batch, M/batch, K), the rows of
    a batch of sequences (M is rounded up to a multiple of batch)."""
    import torch

    import kgen
    from kgen.core import runtime
    from kgen.tune.dispatch import call_choice

    from .triton_peer import make_matmul

    # TF32 on both sides or on neither: kgen.matmul(allow_tf32=) and cuBLAS's flag.
    torch.backends.cuda.matmul.allow_tf32 = tf32
    # 16-bit inputs: cuBLAS accumulates in float32 throughout, as kgen does.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    tdt = getattr(torch, dtype)
    triton_mm = make_matmul() if dtype == "float32" and not tf32 else None
    rows = []
    for M, N, K in shapes:
        M = -(-M // batch) * batch
        a_shape = (batch, M // batch, K) if batch > 1 else (M, K)
        A = torch.randn(*a_shape, device="cuda", dtype=tdt)
        # weights: B is the transposed view of an N x K tensor, as torch.nn.Linear stores W.
        B = torch.randn(N, K, device="cuda", dtype=tdt).t() if weights else torch.randn(K, N, device="cuda", dtype=tdt)
        t0 = time.perf_counter()
        C = kgen.matmul(A, B, allow_tf32=tf32)
        torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        ref = A.double() @ B.double()
        err = float((C.double() - ref).norm() / max(float(ref.norm()), 1e-30))
        inputs = []
        if fresh:
            # A new activation each call, as a model's layers pass them: each call takes the
            # next of several A tensors (kgen and torch alike), so nothing keyed by address repeats.
            count = max(2, min(FRESH_INPUTS, FRESH_INPUT_BYTES // max(1, A.numel() * A.element_size())))
            inputs = [A] + [torch.randn(*a_shape, device="cuda", dtype=tdt) for _ in range(count - 1)]
        kg, peer, next_a = _callers(kgen.matmul, torch.matmul, A, B, tf32, inputs)

        t = _time_pair(kg, peer)
        flops = 2.0 * M * N * K
        # What dispatch chose for these operands (a skinny W.t() call's entry is looked up by its
        # storage order), and its bound: a result past it is wrong, whatever its speed.
        choice, spec = call_choice(A.reshape(M, K), B, tf32)
        family = type(spec)
        tolerance = spec.tolerance_for({"M": M, "N": N, "K": K})
        row = {"shape": [M, N, K], "a_shape": list(a_shape), "flops": flops, "first_call_s": round(first_s, 3),
               "rel_error": err, "tolerance": tolerance, "correct": bool(math.isfinite(err) and err <= tolerance),
               "family": family.kernel, "origin": choice.origin,
               "kgen_ms": t["kgen_single"], "cublas_ms": t["peer_single"],
               "kgen_pipe_ms": t["kgen_pipe"], "cublas_pipe_ms": t["peer_pipe"],
               "speed_x": t["peer_single"] / t["kgen_single"], "speed_pipe_x": t["peer_pipe"] / t["kgen_pipe"],
               "kgen_tflops": flops / t["kgen_single"] / 1e9}
        if triton_mm is not None:
            try:
                triton_mm(A, B)  # autotunes on the first call of a shape class
                torch.cuda.synchronize()
                triton_call: Callable[[], Any] = (partial(triton_mm, A, B) if next_a is None
                                                  else partial(_fresh_call, triton_mm, next_a, B))
                tt = _time_pair(kg, triton_call)
                row.update(triton_ms=tt["peer_single"], triton_speed_x=tt["peer_single"] / tt["kgen_single"])
            except Exception as exc:  # noqa: BLE001 - a peer that fails is reported, not fatal
                row["triton_error"] = f"{type(exc).__name__}: {exc}"[:200]
        rows.append(row)
        print(f"{M:6d}x{N:6d}x{K:6d}  kgen {row['kgen_ms']:9.4f} ms  cuBLAS {row['cublas_ms']:9.4f} ms  "
              f"{row['speed_x']:5.2f}x (pipelined {row['speed_pipe_x']:5.2f}x)  err {err:.1e}  "
              f"first {first_s:.2f}s" + ("" if row["correct"] else f"  WRONG (tolerance {tolerance:.1e})"), flush=True)
        del A, B, C, ref, kg, peer, next_a, inputs
        torch.cuda.empty_cache()
    return {"device": runtime.device().name(), "dtype": dtype, "tf32": tf32, "b_storage": "N x K, transposed view"
            if weights else "K x N, row-major", "inputs": "a new A each call" if fresh else "the same A each call",
            "rows": rows, "summary": summarize(rows)}


def _fresh_call(fn: Callable[[Any, Any], Any], next_a: Callable[[], Any], B: Any) -> Any:
    return fn(next_a(), B)


def _callers(matmul: Callable[..., Any], peer: Callable[..., Any], A: Any, B: Any, tf32: bool,
             inputs: list[Any]) -> tuple[Callable[[], Any], Callable[[], Any], Callable[[], Any] | None]:
    """kgen's call and the peer's on A and B, and with `inputs` (several A tensors) each call
    takes the next of them as A (the third item gives it)."""
    if not inputs:
        return (lambda: matmul(A, B, allow_tf32=tf32)), (lambda: peer(A, B)), None
    turn = [0]

    def next_a() -> Any:
        turn[0] = (turn[0] + 1) % len(inputs)
        return inputs[turn[0]]

    return (lambda: matmul(next_a(), B, allow_tf32=tf32)), (lambda: peer(next_a(), B)), next_a


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    groups = {
        "products >= 2^30 flops": [r for r in rows if r["flops"] >= 2 ** 30 and r["shape"][0] > 256],
        "smaller products": [r for r in rows if r["flops"] < 2 ** 30 and r["shape"][0] > 256],
        "few rows (M <= 256)": [r for r in rows if r["shape"][0] <= 256],
        "all": rows,
    }
    out: dict[str, Any] = {}
    for name, rs in groups.items():
        if rs:
            xs = [r["speed_x"] for r in rs]
            out[name] = {"count": len(rs), "geomean_x": round(geomean(xs), 3), "min_x": round(min(xs), 3)}
    # Products whose result failed its check against float64: their speed counts for nothing.
    out["wrong"] = [r["shape"] for r in rows if not r.get("correct", True)]
    return out


def bench_reduce(lengths: list[int], dtype: str = "float32") -> dict[str, Any]:
    import torch

    import kgen
    from kgen.core import runtime
    from kgen.ops.reduce import Reduce
    from kgen.tune.dispatch import select

    tdt = getattr(torch, dtype)
    sms = runtime.device_limits()["multiprocessors"]
    rows = []
    for n in lengths:
        x = torch.randn(n, device="cuda", dtype=tdt)
        y = torch.randn(n, device="cuda", dtype=tdt)
        calls: dict[str, tuple[Callable[[], Any], Callable[[], Any], Any]] = {
            "dot": (partial(kgen.dot, x, y), partial(torch.dot, x, y), x.double() @ y.double()),
            "sum": (partial(kgen.reduce, x, op="sum"), partial(torch.sum, x), x.double().sum()),
            "max": (partial(kgen.reduce, x, op="max"), partial(torch.max, x), x.double().max()),
        }
        for op, (kg, peer, ref) in calls.items():
            got = float(kg())
            want = float(ref)
            # The magnitudes of the terms the fold adds (x * y for a dot).
            terms = x.double() * y.double() if op == "dot" else x.double()
            scale = float(terms.abs().sum()) if op != "max" else 1.0
            t = _time_pair(kg, peer)
            # The bound of the spec dispatch chose, for terms whose magnitudes add to `scale`.
            spec = cast(Reduce, select(Reduce, {"n": n, "op": op}, dtype).spec)
            bound = spec.tolerance_abs(n, scale, sms) if op != "max" else 0.0
            row = {"op": op, "n": n, "kgen_ms": t["kgen_single"], "torch_ms": t["peer_single"],
                   "kgen_pipe_ms": t["kgen_pipe"], "torch_pipe_ms": t["peer_pipe"],
                   "speed_x": t["peer_single"] / t["kgen_single"], "speed_pipe_x": t["peer_pipe"] / t["kgen_pipe"],
                   "abs_error_over_scale": abs(got - want) / max(scale, 1e-30),
                   "correct": bool(math.isfinite(got) and abs(got - want) <= bound),
                   "kgen_gbs": n * x.element_size() * (2 if op == "dot" else 1) / t["kgen_pipe"] / 1e6}
            rows.append(row)
            print(f"{op:4s} n={n:10d}  kgen {row['kgen_ms']*1e3:8.2f} us  torch {row['torch_ms']*1e3:8.2f} us  "
                  f"{row['speed_x']:5.2f}x (pipelined {row['speed_pipe_x']:5.2f}x)"
                  + ("" if row["correct"] else f"  WRONG (error {abs(got - want):.1e}, bound {bound:.1e})"), flush=True)
        del calls
        torch.cuda.empty_cache()
    summary: dict[str, Any] = {}
    for op in ("dot", "sum", "max"):
        xs = [r["speed_x"] for r in rows if r["op"] == op]
        if xs:
            summary[op] = {"geomean_x": round(geomean(xs), 3), "min_x": round(min(xs), 3)}
    summary["wrong"] = [f"{r['op']} n={r['n']}" for r in rows if not r["correct"]]
    return {"device": runtime.device().name(), "dtype": dtype, "rows": rows, "summary": summary}


def _parse_shapes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"--shapes: {item!r} is not MxNxK with positive integers")
        out.append((int(parts[0]), int(parts[1]), int(parts[2])))
    return out


def _parse_rows(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    parts = text.split("-")
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or not 1 <= int(parts[0]) <= int(parts[1]):
        raise SystemExit(f"--rows: {text!r} is not LO-HI with 1 <= LO <= HI (e.g. 17-256)")
    return int(parts[0]), int(parts[1])


def _seed(given: int | None) -> int:
    """--seed, or one from the clock (printed with the draw, so a run can be repeated)."""
    return given if given is not None else time.time_ns() % 2 ** 31


def _parse_lengths(text: str) -> list[int]:
    out = []
    for item in text.split(","):
        if not item.strip().isdigit() or int(item) < 1:
            raise SystemExit(f"--lengths: {item!r} is not a positive integer")
        out.append(int(item))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="kgen bench calls", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=("matmul", "reduce"))
    ap.add_argument("--shapes", help="matmul: comma-separated MxNxK")
    ap.add_argument("--random", type=int, default=0,
                    help="matmul: this many shapes drawn at run time; reduce: this many lengths, log-uniform "
                         "from 1 to 2^28, a third odd")
    ap.add_argument("--seed", type=int, default=None, help="seed for --random (default: from the clock)")
    ap.add_argument("--rows", help="matmul --random: few-row products only, M from LO to HI (e.g. 17-256), "
                    "N and K 1024-16384")
    ap.add_argument("--columns", action="store_true",
                    help="matmul --random --rows LO-HI: few-column products instead (N from LO to HI, M and K "
                         "1024-16384): a large A against a few columns of B")
    ap.add_argument("--multiple", type=int, default=1,
                    help="matmul --random: N and K rounded up to multiples of this (e.g. 64: the aligned sides "
                         "of model layers); 1 keeps them as drawn, a third of N odd")
    ap.add_argument("--weights", action="store_true",
                    help="matmul: B is the transposed view of an N x K tensor (how torch.nn.Linear stores a "
                         "weight) instead of a K x N row-major one")
    ap.add_argument("--fresh-inputs", action="store_true",
                    help="matmul: each call takes the next of up to 32 A tensors (new activations, as a model's "
                         "layers pass them) instead of the same one; kgen and torch alike")
    ap.add_argument("--batch", type=int, default=1,
                    help="matmul: A of shape (BATCH, M/BATCH, K), the rows of a batch of sequences as a model layer "
                         "passes them (kgen.matmul and torch.matmul fold them into M rows)")
    ap.add_argument("--lengths", help="reduce: comma-separated lengths (with --random: these too)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64", "float16", "bfloat16"))
    ap.add_argument("--tf32", action="store_true",
                    help="matmul, float32: allow TF32 on the tensor cores, for kgen (allow_tf32=True) and cuBLAS alike")
    ap.add_argument("--without-shipped", action="store_true",
                    help="ignore the shipped defaults (dispatch falls back to each family's rule)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.without_shipped:
        import os

        os.environ["KGEN_DEFAULTS"] = os.devnull
    if args.what == "matmul":
        shapes = _parse_shapes(args.shapes) if args.shapes else []
        if args.random:
            seed = _seed(args.seed)
            print(f"random shapes, seed {seed}")
            if args.multiple < 1:
                raise SystemExit(f"--multiple: {args.multiple} is not a positive integer")
            if args.columns and not args.rows:
                raise SystemExit("--columns: give --rows LO-HI for the range of N (e.g. --rows 1-16)")
            shapes += random_matmul_shapes(args.random, seed, _parse_rows(args.rows), args.multiple, args.columns)
        if not shapes:
            raise SystemExit("give --shapes or --random N")
        if args.tf32 and args.dtype != "float32":
            raise SystemExit("--tf32 applies to --dtype float32")
        if args.batch < 1:
            raise SystemExit(f"--batch: {args.batch} is not a positive integer")
        result = bench_matmul(shapes, args.dtype, args.tf32, args.weights, args.fresh_inputs, args.batch)
        if args.random:
            result["seed"] = seed
            result["multiple"] = args.multiple
            result["few"] = "columns" if args.columns else "rows" if args.rows else None
    else:
        lengths = _parse_lengths(args.lengths) if args.lengths else []
        if args.random:
            seed = _seed(args.seed)
            print(f"random lengths, seed {seed}")
            lengths += random_reduce_lengths(args.random, seed)
        if not lengths:
            raise SystemExit("give --lengths or --random N")
        if args.dtype not in REDUCE_DTYPES:
            raise SystemExit(f"--dtype {args.dtype}: kgen.dot and kgen.reduce take {' or '.join(REDUCE_DTYPES)}")
        result = bench_reduce(lengths, args.dtype)
        if args.random:
            result["seed"] = seed
    print(json.dumps(result["summary"], indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    wrong = result["summary"].get("wrong", [])
    if wrong:
        print(f"{len(wrong)} result(s) failed the check against float64: {wrong}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
