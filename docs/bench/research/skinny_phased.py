"""The skinny dot forms on weights whose rows are not all 16-byte aligned: a weight N x K passed
as W.t() with K no multiple of the widest load. Device time (a CUDA graph over operand sets
rotated past L2, replayed; each result first checked against float64 with the output
NaN-poisoned) of Skinny.default_spec's kernel (the SIMT dot form, from 7 float32 rows the
split-TF32 tensor-core dot form, from 2 16-bit rows the mma.sync dot form) with the phased entry
(the default), the same
spec with phased=False (the narrower entry the alignment allows), the same values stored at an
aligned pitch (K rounded up to whole loads: what the widest entry reaches), and cuBLAS through
torch. N and K are drawn at run time, K of every residue modulo the widest load but zero.
STAGE_KB=32,48 also times the phased kernel with S's staged chunk sized for that many KiB
(kgen.ops.skinny.STAGE_BYTES, 16 KiB in the tree) in place of the tree's.

    SEED=1 COUNT=12 ROWS=1-6 DTYPE=float32 [STAGE_KB=32,48] python skinny_phased.py
    # output: $OUT/skinny_phased_<DTYPE>_<SEED>.json"""

import concurrent.futures
import json
import os
import random
import statistics

import kgen
import torch

import kgen.core.kernel as kernel_module
from kgen.core import runtime
import kgen.ops.skinny as skinny_module
from kgen.bench.skinny import checked_graph_time
from kgen.ops.skinny import Skinny

OUT = os.environ.get("OUT", ".")
SEED = int(os.environ.get("SEED", "1"))
COUNT = int(os.environ.get("COUNT", "12"))
LO, HI = (int(v) for v in os.environ.get("ROWS", "1-6").split("-"))
DTYPE = os.environ.get("DTYPE", "float32")
STAGE_KB = [int(v) for v in os.environ.get("STAGE_KB", "").split(",") if v]
TREE_STAGE_BYTES = skinny_module.STAGE_BYTES


def copy_bandwidth() -> float:
    a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(9):
        start.record()
        b.copy_(a)
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return 2 * a.numel() / statistics.median(times)


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    dt = getattr(torch, DTYPE)
    item = torch.tensor([], dtype=dt).element_size()
    V = 16 // item
    bw = copy_bandwidth()
    print(f"{torch.cuda.get_device_name()}: copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rng = random.Random(SEED)
    problems = []
    for i in range(COUNT):
        M = rng.randint(LO, HI)
        N = int(2 ** rng.uniform(10, 14))
        K = int(2 ** rng.uniform(10, 14)) // V * V + 1 + i % (V - 1)   # every nonzero residue in turn
        problems.append((M, N, K))
    # Every spec compiled first, on all cores (the timings below load them from the disk cache).
    specs = set()
    for M, N, K in problems:
        spec = Skinny.default_spec({"M": M, "N": N, "K": K}, DTYPE)
        if spec.tensor_cores and spec.instruction != "mma_sync":
            spec = Skinny.simt_default_spec({"M": M, "N": N, "K": K}, DTYPE)
        specs |= {spec, spec.replace(phased=False)}
    arch = runtime.device_arch()
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 4) as pool:
        list(pool.map(lambda s: kgen.compile(s, arch), specs))
    rows = []
    for M, N, K in problems:
        Kp = -(-K // V) * V
        copies = max(2, -(-240_000_000 // (N * K * item)))
        store = [torch.randn(N, Kp, device="cuda").to(dt) for _ in range(copies)]
        Wu = [torch.empty(N, K, device="cuda", dtype=dt) for _ in range(copies)]
        for w, s in zip(Wu, store):
            w.copy_(s[:, :K])
        Bu = [w.t() for w in Wu]                       # rows K elements apart: not all aligned
        Ba = [s[:, :K].t() for s in store]             # the same values at an aligned pitch
        A = [torch.randn(M, K, device="cuda").to(dt) for _ in range(copies)]
        C = [torch.empty(M, N, device="cuda", dtype=dt) for _ in range(copies)]
        ref = A[0].double() @ Bu[0].double()
        spec = Skinny.default_spec({"M": M, "N": N, "K": K}, DTYPE)
        row = {"M": M, "N": N, "K": K, "dtype": DTYPE, "spec": spec.to_json(),
               "bound_us": (N * K + M * K + M * N) * item / bw * 1e6}
        if spec.tensor_cores and spec.instruction != "mma_sync":
            spec = Skinny.simt_default_spec({"M": M, "N": N, "K": K}, DTYPE)
            row["note"] = "the SIMT spec (default_spec runs a tensor-core form without phased entries here)"
        ways = [("phased", spec, Bu, 0), ("narrow", spec.replace(phased=False), Bu, 0), ("aligned", spec, Ba, 0)]
        ways += [(f"chunk{kb}", spec, Bu, kb) for kb in STAGE_KB]
        for name, s, B, kb in ways:
            # A staged chunk of another size: the module's constant for this kernel's render
            # and plan, and a fresh build (build() memoises by spec).
            skinny_module.STAGE_BYTES = kb * 1024 if kb else TREE_STAGE_BYTES
            kernel_module._built.clear()
            k = kgen.build(s)
            err, t, _ = checked_graph_time(torch, lambda a, b, c, k=k: k(a, b, out=c), A, B, C, ref, 15)
            plan = next(p for key, p in k._plans.items() if key[3] == B[0].stride())
            main = next(launch for kind, launch, _ in plan.launches if kind == "main")
            row[name] = {"us": t, "err": err, "entry": main.name, "grid": list(main.grid)}
            k._plans.clear()
        err, t, _ = checked_graph_time(torch, lambda a, b, c: torch.matmul(a, b, out=c), A, Bu, C, ref, 15)
        row["cublas"] = {"us": t, "err": err}
        rows.append(row)
        print(f"{M:3d}x{N:5d}x{K:5d} (K%{V}={K % V}) bound {row['bound_us']:6.1f}  phased {row['phased']['us']:6.1f} "
              f"[{row['phased']['entry'][12:]}]  narrow {row['narrow']['us']:6.1f} [{row['narrow']['entry'][12:]}]  "
              f"aligned {row['aligned']['us']:6.1f}  cuBLAS {row['cublas']['us']:6.1f}  "
              f"narrow/phased {row['narrow']['us'] / row['phased']['us']:.3f}  errs "
              f"{row['phased']['err']:.1e} {row['narrow']['err']:.1e}"
              + "".join(f"  chunk{kb} {row[f'chunk{kb}']['us']:6.1f}" for kb in STAGE_KB), flush=True)
        del store, Wu, Bu, Ba, A, C
    gm = statistics.geometric_mean
    summary = {"narrow_over_phased": gm([r["narrow"]["us"] / r["phased"]["us"] for r in rows]),
               "aligned_over_phased": gm([r["aligned"]["us"] / r["phased"]["us"] for r in rows]),
               "cublas_over_phased": gm([r["cublas"]["us"] / r["phased"]["us"] for r in rows]),
               "phased_share_of_bound": gm([r["bound_us"] / r["phased"]["us"] for r in rows])}
    for kb in STAGE_KB:
        summary[f"phased_over_chunk{kb}"] = gm([r["phased"]["us"] / r[f"chunk{kb}"]["us"] for r in rows])
    print({k: round(v, 3) for k, v in summary.items()}, flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "bandwidth": bw, "seed": SEED, "rows": rows,
               "summary": summary}, open(f"{OUT}/skinny_phased_{DTYPE}_{SEED}.json", "w"), indent=1)


if __name__ == "__main__":
    main()
