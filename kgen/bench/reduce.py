"""`kgen bench reduce`: kgen's reductions against torch (and CuPy/CUB) in one run.

For dot and sum of float32 at each length it times every candidate spec (all
strategies x block sizes x items per thread, plus the no-vector and one-tile-per-block
variants), keeps the fastest that is also correct, and sets it beside torch, CuPy's
CUB-backed sum, the articles' shared-memory dot and the device's copy bandwidth,
all measured in the same process on the same GPU.

How things are timed (the same for every contender): CUDA events around a batch of
back-to-back calls on the default stream, median of the batches, divided by the
batch size ("batched"); and, for the latency picture at small sizes, events around
one call after a full synchronisation ("single"). Inputs are rotated through enough
copies that the footprint is at least four L2s, so no contender reads from a warm
L2 (2^28 floats is 1 GiB and needs no rotation).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib
import itertools
import json
import math
import os
import statistics
import sys
import time
from typing import Any, Callable

STRATEGY_ORDER = ("shared_tree", "warp_shuffle", "two_pass", "atomic", "single_pass")


def _parse(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def build_parser(ap: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """The options of `kgen bench reduce`, added to `ap` (the kgen command's subparser) or a new parser."""
    if ap is None:
        ap = argparse.ArgumentParser(prog="kgen bench reduce", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,24,28", help="log2 of the lengths for the table (default 20,24,28)")
    ap.add_argument("--ops", default="dot,sum", help="comma list of dot, sum (default both)")
    ap.add_argument("--sweep-sizes", default="", help="log2 lengths for the per-strategy curve, e.g. 12,14,...,28 "
                    "(default: the table sizes)")
    ap.add_argument("--candidates", choices=("full", "small"), default="full",
                    help="full: every strategy x block x items; small: one spec per strategy")
    ap.add_argument("--repeats", type=int, default=15, help="timed batches per measurement (median taken)")
    ap.add_argument("--json", default="", help="write all results to this JSON file")
    ap.add_argument("--plot", default="", help="write GB/s against length per strategy to this PNG (matplotlib)")
    ap.add_argument("--no-peers", action="store_true", help="skip torch / CuPy")
    return ap


# ---------------------------------------------------------------------------------
# Candidates
# ---------------------------------------------------------------------------------
def candidates(op: str, mode: str):
    from ..ops.reduce import Reduce

    out = []
    if mode == "small":
        for s in STRATEGY_ORDER:
            out.append(Reduce(op=op, strategy=s, block_size=512, items_per_thread=4))
        return out
    for s in STRATEGY_ORDER:
        for bs in (256, 512, 1024):
            for items in (2, 4, 8):
                out.append(Reduce(op=op, strategy=s, block_size=bs, items_per_thread=items))
        out.append(Reduce(op=op, strategy=s, block_size=512, items_per_thread=4, vector_loads=False))
        out.append(Reduce(op=op, strategy=s, block_size=256, items_per_thread=4, grid_stride=False))
    return out


def articles_dot():
    """The articles' dot: 32 blocks of 512 threads, a shared-memory tree, one scalar
    load per step (here the 32 partials are finished by a second kernel)."""
    from ..ops.reduce import Reduce

    return Reduce(op="dot", strategy="shared_tree", block_size=512, grid_size=32, items_per_thread=1,
                  vector_loads=False)


# ---------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------
def _batch_size(nbytes: float, sets: int) -> int:
    est_us = nbytes / 3.0e6 + 4.0  # ~3 TB/s plus launch: only sizes the batch
    return max(sets, 3, min(400, math.ceil(600.0 / est_us)))


def time_batched(calls: list[Callable[..., Any]], nbytes: float, repeats: int) -> float:
    """Median microseconds per call over batches of back-to-back calls (rotating inputs)."""
    from ..core.timing import time_calls

    it = itertools.cycle(calls)
    inner = _batch_size(nbytes, len(calls))
    t = time_calls(lambda: next(it)(), warmup=max(3, len(calls)), repeats=repeats, inner=inner)
    return t.median_ms * 1e3


def time_single(call: Callable[[], Any], repeats: int = 50) -> float:
    """Median microseconds of one call started on an idle GPU (events around it)."""
    from ..core import runtime

    drv = runtime.driver()
    start, stop = drv.Event(), drv.Event()
    samples = []
    for _ in range(3):
        call()
    drv.Context.synchronize()
    for _ in range(repeats):
        start.record()
        call()
        stop.record()
        stop.synchronize()
        samples.append(stop.time_since(start) * 1e3)
    return statistics.median(samples)


def copy_bandwidth(repeats: int) -> float:
    """Device-to-device copy of 1 GiB (cuMemcpyDtoDAsync), counting read + write bytes."""
    from ..core import runtime
    from ..core.timing import time_calls

    drv = runtime.driver()
    nbytes = 1 << 30
    a, b = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
    drv.memset_d32(a, 0x3F800000, nbytes // 4)
    t = time_calls(lambda: drv.memcpy_dtod_async(b, a, nbytes), warmup=3, repeats=repeats, inner=4)
    a.free()
    b.free()
    return 2 * nbytes / (t.median_ms * 1e-3) / 1e9


# ---------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------
class Inputs:
    """Rotated float32 input sets of one length (torch tensors), and their float64 result."""

    def __init__(self, torch, op: str, n: int, l2_bytes: int):
        arity = 2 if op == "dot" else 1
        per_set = n * 4 * arity
        self.sets_count = max(1, min(32, math.ceil(4 * l2_bytes / max(per_set, 1))))
        g = torch.Generator(device="cuda")
        g.manual_seed(n + arity)
        self.sets = [[torch.randn(n, device="cuda", generator=g) for _ in range(arity)]
                     for _ in range(self.sets_count)]
        self.nbytes = float(per_set)
        x = self.sets[0]
        if op == "dot":
            self.ref = float((x[0].double() * x[1].double()).sum())
            self.scale = float((x[0].double() * x[1].double()).abs().sum())
        else:
            self.ref = float(x[0].double().sum())
            self.scale = float(x[0].double().abs().sum())


def _kgen_row(spec, k, inp: Inputs, torch, repeats: int, sms: int) -> dict[str, Any]:
    outs = [torch.full((), float("nan"), device="cuda") for _ in inp.sets]
    calls = [k.bind(*s, out=o) for s, o in zip(inp.sets, outs)]
    us = time_batched(calls, inp.nbytes, repeats)
    calls[0]()
    torch.cuda.synchronize()
    got = float(outs[0].item())
    n = inp.sets[0][0].shape[0]
    ok = math.isfinite(got) and abs(got - inp.ref) <= spec.tolerance_abs(n, inp.scale, sms)
    return {"us": us, "ok": bool(ok), "value": got}


def run(args) -> dict[str, Any]:
    import torch

    from ..core import runtime
    from ..core.kernel import build, compile as kcompile, default_arch
    from ..ops.reduce import Reduce

    runtime.driver()  # a context for what follows
    limits = runtime.device_limits()
    sms, l2 = limits["multiprocessors"], limits["l2_bytes"]
    device = runtime.device().name()
    ops = [o for o in args.ops.split(",") if o]
    sizes = [int(s) for s in args.sizes.split(",") if s]
    sweep_sizes = [int(s) for s in args.sweep_sizes.split(",") if s] or sizes
    all_sizes = sorted(set(sizes) | set(sweep_sizes))
    print(f"device: {device} ({sms} SMs, L2 {l2 / 2**20:.0f} MiB)", flush=True)

    # Compile every candidate in parallel before anything is timed.
    cands = {op: candidates(op, args.candidates) for op in ops}
    extra = [articles_dot()] if "dot" in ops else []
    for op in ops:
        for base in (Reduce(op=op, strategy="single_pass", block_size=512, items_per_thread=4),
                     Reduce(op=op, strategy="two_pass", block_size=512, items_per_thread=4)):
            extra += [base.replace(accumulate="kahan"), base.replace(accumulate="float64")]
    every = [s for op in ops for s in cands[op]] + extra
    t0 = time.perf_counter()
    # The arch is looked up here: worker threads must not touch CUDA (pycuda aborts at
    # exit when a thread ends with a context pushed), they only run nvcc.
    arch = default_arch()
    with concurrent.futures.ThreadPoolExecutor(min(16, os.cpu_count() or 4)) as ex:
        list(ex.map(lambda s: kcompile(s, arch), every))
    kernels: dict[Any, Any] = {s: build(s) for s in every}  # Reduce spec -> ReduceKernel
    print(f"compiled {len(every)} specs in {time.perf_counter() - t0:.1f} s", flush=True)

    copy_gbps = copy_bandwidth(args.repeats)
    print(f"device copy (cuMemcpyDtoD, read+write): {copy_gbps:.0f} GB/s", flush=True)

    cupy: Any = None
    if not args.no_peers:
        os.environ.setdefault("CUPY_ACCELERATORS", "cub")
        try:
            cupy = importlib.import_module("cupy")
        except Exception:  # noqa: BLE001 - CuPy is optional
            cupy = None

    result: dict[str, Any] = {"device": device, "multiprocessors": sms, "l2_bytes": l2, "copy_GBps": copy_gbps,
                              "timing": "CUDA events around batches of back-to-back calls on the default stream, "
                                        "median of batches / batch size ('batched'); events around one call "
                                        "after a synchronize ('single'); inputs rotated to >= 4x L2",
                              "table": [], "sweep": [], "kahan": [], "best_specs": {}}
    for op in ops:
        for lg in all_sizes:
            n = 1 << lg
            inp = Inputs(torch, op, n, l2)
            rows = []
            for spec in cands[op]:
                r = _kgen_row(spec, kernels[spec], inp, torch, args.repeats, sms)
                r.update(op=op, n=n, log2n=lg, strategy=spec.strategy, spec=spec.to_dict(),
                         GBps=inp.nbytes / (r["us"] * 1e-6) / 1e9)
                rows.append(r)
            result["sweep"].extend(rows)
            good = [r for r in rows if r["ok"]]
            bad = [r for r in rows if not r["ok"]]
            for r in bad:
                print(f"  WRONG RESULT: {op} n=2^{lg} {json.dumps(r['spec'])}: {r['value']} vs {inp.ref}", flush=True)
            if lg not in sizes:
                best_gb = max((r["GBps"] for r in good), default=0.0)
                print(f"sweep {op} 2^{lg}: best {best_gb:.0f} GB/s", flush=True)
                continue
            best = min(good, key=lambda r: r["us"])
            best_spec = Reduce(**{k: v for k, v in best["spec"].items() if k != "kernel"})
            result["best_specs"][f"{op}/{lg}"] = best["spec"]
            table: list[dict[str, Any]] = []

            def add(impl, us, single=None, note="", table=table, op=op, n=n, lg=lg, nbytes=inp.nbytes):
                table.append({"op": op, "n": n, "log2n": lg, "impl": impl, "us": us, "single_us": single,
                              "GBps": nbytes / (us * 1e-6) / 1e9, "note": note})

            k = kernels[best_spec]
            out = torch.full((), float("nan"), device="cuda")
            bound = k.bind(*inp.sets[0], out=out)
            add("kgen best (bound launcher)", best["us"], time_single(bound),
                f"{best_spec.strategy}, block {best_spec.block_size}, items {best_spec.items_per_thread}, "
                f"vector {best_spec.vector_loads}, grid_stride {best_spec.grid_stride}")
            api_calls = [(lambda s=s, o=o, k=k: k(*s, out=o)) for s, o in
                         zip(inp.sets, [torch.empty((), device="cuda") for _ in inp.sets])]
            add("kgen best (k(x, y, out=) API)", time_batched(api_calls, inp.nbytes, args.repeats),
                time_single(api_calls[0]), "the public call: argument checks every call")
            if not args.no_peers:
                tcalls = [(lambda s=s: torch.dot(s[0], s[1])) if op == "dot" else (lambda s=s: torch.sum(s[0]))
                          for s in inp.sets]
                add(f"torch.{op}", time_batched(tcalls, inp.nbytes, args.repeats), time_single(tcalls[0]))
                if cupy is not None:
                    try:
                        csets = [[cupy.asarray(t) for t in s] for s in inp.sets]
                        ccalls = [(lambda s=s: cupy.dot(s[0], s[1])) if op == "dot" else (lambda s=s: cupy.sum(s[0]))
                                  for s in csets]
                        add(f"cupy.{op} (CUPY_ACCELERATORS={os.environ.get('CUPY_ACCELERATORS')})",
                            time_batched(ccalls, inp.nbytes, args.repeats), time_single(ccalls[0]))
                    except Exception as exc:  # noqa: BLE001
                        print(f"  cupy skipped: {exc}", flush=True)
            for s in STRATEGY_ORDER:
                srows = [r for r in good if r["strategy"] == s]
                if srows:
                    b = min(srows, key=lambda r: r["us"])
                    sp = b["spec"]
                    add(f"kgen {s} (best of its specs)", b["us"], None,
                        f"block {sp['block_size']}, items {sp['items_per_thread']}, vector {sp['vector_loads']}, "
                        f"grid_stride {sp['grid_stride']}")
            if op == "dot":
                a = articles_dot()
                r = _kgen_row(a, kernels[a], inp, torch, args.repeats, sms)
                add("articles' dot (32x512 shared tree, finished on the device)", r["us"], None,
                    "" if r["ok"] else "WRONG RESULT")
            peer = next((t for t in table if t["impl"] == f"torch.{op}"), None)
            for t in table:
                t["vs_copy"] = t["GBps"] / copy_gbps
                t["vs_peer"] = (peer["us"] / t["us"]) if peer else None
            result["table"].extend(table)
            for t in table:
                vp = f"{t['vs_peer']:.3f}x" if t["vs_peer"] else "-"
                single = f"{t['single_us']:.1f}" if t["single_us"] else "-"
                print(f"{op:3s} 2^{lg}: {t['impl']:58s} {t['us']:9.2f} us  single {single:>7s} us  "
                      f"{t['GBps']:7.0f} GB/s  peer {vp:>7s}  copy {t['vs_copy']:.3f}  {t['note']}", flush=True)
            # Compensated vs native at the largest table size.
            if lg == max(sizes):
                for strategy in ("single_pass", "two_pass"):
                    base = Reduce(op=op, strategy=strategy, block_size=512, items_per_thread=4)
                    times = {}
                    for acc in ("native", "kahan", "float64"):
                        spec = base.replace(accumulate=acc)
                        r = _kgen_row(spec, kernels[spec], inp, torch, args.repeats, sms)
                        times[acc] = r["us"]
                        result["kahan"].append({"op": op, "n": n, "strategy": strategy, "accumulate": acc,
                                                "us": r["us"], "GBps": inp.nbytes / (r["us"] * 1e-6) / 1e9,
                                                "ok": r["ok"], "abs_error": abs(r["value"] - inp.ref)})
                    print(f"{op} 2^{lg} {strategy}: native {times['native']:.1f} us, kahan {times['kahan']:.1f} us "
                          f"({times['kahan'] / times['native']:.3f}x), float64 {times['float64']:.1f} us "
                          f"({times['float64'] / times['native']:.3f}x)", flush=True)
            del inp
            torch.cuda.empty_cache()
    return result


def plot(result: dict[str, Any], path: str) -> None:
    """GB/s (top) and microseconds per call (bottom) against length, per strategy
    (each point: that strategy's fastest correct spec), with the peers and the copy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = sorted({r["op"] for r in result["sweep"]})
    fig, axes = plt.subplots(2, len(ops), figsize=(6.5 * len(ops), 8.4), squeeze=False)
    for col, op in enumerate(ops):
        for row, key in enumerate(("GBps", "us")):
            ax = axes[row][col]
            for s in STRATEGY_ORDER:
                pts: dict[int, float] = {}
                for r in result["sweep"]:
                    if r["op"] == op and r["strategy"] == s and r["ok"]:
                        v = r[key]
                        pts[r["n"]] = max(pts.get(r["n"], 0.0), v) if key == "GBps" else min(pts.get(r["n"], v), v)
                if pts:
                    xs = sorted(pts)
                    ax.plot(xs, [pts[x] for x in xs], marker="o", label=s)
            peers = [t for t in result["table"] if t["op"] == op and
                     (t["impl"].startswith(("torch.", "cupy.")) or t["impl"].startswith("articles"))]
            for name in sorted({t["impl"] for t in peers}):
                pts2 = sorted((t["n"], t[key]) for t in peers if t["impl"] == name)
                ax.plot([p[0] for p in pts2], [p[1] for p in pts2], linestyle="--", marker="x",
                        label=name.split(" (")[0])
            ax.set_xscale("log", base=2)
            ax.set_xlabel("length (float32 elements)")
            if key == "GBps":
                ax.axhline(result["copy_GBps"], color="grey", linestyle=":", label="device copy")
                ax.set_ylabel("GB/s read")
                ax.set_title(f"{op}, float32, {result['device']}: bandwidth")
            else:
                ax.set_yscale("log")
                ax.set_ylabel("microseconds per call (batched)")
                ax.set_title(f"{op}, float32: time per call")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: list[str]) -> int:
    return main_args(_parse(argv))


def main_args(args: argparse.Namespace) -> int:
    """Run the benchmark for parsed options (see build_parser)."""
    try:
        result = run(args)
    except ImportError as exc:
        print(f"kgen bench reduce needs torch and pycuda on a CUDA machine: {exc}", file=sys.stderr)
        return 2
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
        print(f"wrote {args.json}")
    if args.plot:
        try:
            plot(result, args.plot)
            print(f"wrote {args.plot}")
        except ImportError:
            print("matplotlib is missing: no plot (python -m kgen.bench.reduce --replot JSON PNG draws it later)")
    return 0


def replot(json_path: str, png_path: str) -> int:
    with open(json_path) as f:
        plot(json.load(f), png_path)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--replot":
        sys.exit(replot(sys.argv[2], sys.argv[3]))
    sys.exit(main(sys.argv[1:]))
