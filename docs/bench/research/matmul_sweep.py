"""Time many matmul specs on the bench shapes in one device run; writes JSON.

python3 docs/bench/research/matmul_sweep.py OUT.json [round]
Compiles every candidate in parallel first, checks each against float64 on a ragged
shape, then times it on the shapes next to cuBLAS (torch, TF32 off).
"""
from __future__ import annotations

import concurrent.futures as cf
import json
import sys
import time

import kgen
from kgen.bench import matmul as bm
from kgen.core import runtime

F = dict(shared_memory=True, vector_loads=True)


def S(tile, tt, wt, stages=3, async_copy=True, pad=4, vector_loads=True, **kw):
    return kgen.Matmul(tile=tile, thread_tile=tt, warp_tile=wt, stages=stages, async_copy=async_copy,
                       smem_pad=pad, shared_memory=True, vector_loads=vector_loads, **kw)


def candidates(round_: str):
    if round_ == "2":
        return candidates2()
    if round_ == "3":
        return candidates3()
    big = [
        S((128, 128, 8), (8, 8), (32, 64), 3),
        S((128, 128, 8), (8, 8), (32, 64), 4),
        S((128, 128, 8), (8, 8), (32, 64), 2),
        S((128, 128, 8), (8, 8), (32, 64), 2, False),
        S((128, 128, 8), (8, 8), (64, 32), 3),
        S((128, 128, 8), (8, 8), (32, 64), 3, pad=0),
        S((128, 128, 8), (8, 8), (32, 64), 3, min_blocks=2),
        S((128, 128, 8), (8, 8), (32, 64), 2, False, min_blocks=2),
        S((128, 128, 16), (8, 8), (32, 64), 3),
        S((128, 128, 16), (8, 8), (32, 64), 2, False),
        S((128, 256, 8), (8, 8), (32, 64), 3),
        S((256, 128, 8), (8, 8), (64, 32), 3),
        S((128, 64, 8), (8, 4), (32, 32), 3),
        S((64, 128, 8), (4, 8), (16, 64), 3),
        S((128, 64, 16), (8, 8), (32, 64), 4),
        S((64, 64, 8), (4, 4), (16, 32), 3),
        S((128, 128, 8), (8, 8), (32, 64), 3, smem_a_transposed=False),
        kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), shared_memory=True, stages=3,
                    async_copy=True, smem_pad=4),
        S((128, 128, 8), (8, 8), (0, 0), 3),
    ]
    split = []
    for sk in (2, 4, 8, 16):
        split += [S((128, 64, 8), (8, 4), (32, 32), 3, split_k=sk),
                  S((64, 64, 8), (4, 4), (16, 32), 3, split_k=sk),
                  S((128, 128, 8), (8, 8), (32, 64), 3, split_k=sk)]
    return big, split


def candidates2():
    def Y(tile, tt, wt, mb, pad=4, **kw):  # register-staged double buffering
        return S(tile, tt, wt, 2, False, pad=pad, min_blocks=mb, **kw)

    big = [
        Y((128, 128, 8), (8, 8), (32, 64), 2),
        Y((128, 128, 8), (8, 8), (64, 32), 2),
        Y((128, 128, 8), (8, 8), (32, 64), 2, pad=0),
        Y((128, 64, 8), (8, 8), (32, 64), 4),
        Y((64, 128, 8), (8, 8), (32, 64), 4),
        Y((64, 64, 8), (8, 4), (32, 32), 4),
        Y((128, 64, 16), (8, 4), (32, 32), 2),
        Y((64, 64, 16), (8, 4), (32, 32), 4),
        Y((128, 128, 16), (8, 8), (32, 64), 0),
        Y((128, 128, 32), (8, 8), (32, 64), 0),
        Y((128, 256, 8), (8, 8), (32, 64), 1),
        Y((128, 64, 8), (8, 8), (64, 32), 4),
        S((128, 128, 8), (8, 8), (32, 64), 2, True, min_blocks=2),
        Y((128, 128, 8), (8, 8), (32, 64), 2, smem_a_transposed=False),
        Y((128, 64, 8), (8, 4), (32, 32), 2),
        Y((128, 128, 8), (8, 8), (32, 64), 2, vector_loads=False),
    ]
    split = []
    for sk in (2, 3, 4, 6, 8, 16):
        split += [Y((128, 128, 8), (8, 8), (32, 64), 2, split_k=sk),
                  Y((128, 64, 8), (8, 8), (32, 64), 4, split_k=sk),
                  Y((64, 128, 8), (8, 8), (32, 64), 4, split_k=sk),
                  Y((64, 64, 16), (8, 4), (32, 32), 4, split_k=sk),
                  Y((64, 64, 8), (8, 4), (32, 32), 4, split_k=sk)]
    return big, split


def candidates3():
    def Y(tile, tt, wt, mb, pad=4, **kw):  # register-staged double buffering
        return S(tile, tt, wt, 2, False, pad=pad, min_blocks=mb, **kw)

    def A(tile, tt, wt, stages, mb, pad=4, **kw):  # cp.async stages (A via registers)
        return S(tile, tt, wt, stages, True, pad=pad, min_blocks=mb, **kw)

    big = [
        Y((128, 128, 8), (8, 8), (32, 64), 2),
        Y((128, 128, 8), (8, 8), (64, 32), 2),
        A((128, 128, 8), (8, 8), (32, 64), 3, 2),
        A((128, 128, 8), (8, 8), (32, 64), 4, 2),
        A((128, 128, 8), (8, 8), (64, 32), 3, 2),
        A((128, 128, 8), (8, 8), (64, 32), 4, 2),
        A((128, 128, 8), (8, 8), (32, 64), 2, 2),
        Y((64, 128, 8), (8, 8), (32, 64), 4),
        A((64, 128, 8), (8, 8), (32, 64), 3, 4),
        A((128, 64, 8), (8, 8), (32, 64), 3, 4),
        A((64, 64, 16), (8, 4), (32, 32), 3, 4),
        Y((128, 128, 32), (8, 8), (32, 64), 0),
        A((128, 128, 16), (8, 8), (32, 64), 3, 0),
        A((128, 128, 32), (8, 8), (32, 64), 3, 0),
        A((128, 128, 8), (8, 8), (32, 64), 3, 2, pad=0),
        A((128, 128, 8), (8, 8), (32, 64), 3, 0),
        A((128, 128, 16), (8, 8), (32, 64), 4, 0),
    ]
    split = []
    for sk in (2, 4, 8, 16):
        split += [A((128, 128, 8), (8, 8), (32, 64), 3, 2, split_k=sk),
                  A((64, 64, 16), (8, 4), (32, 32), 3, 4, split_k=sk),
                  Y((64, 64, 16), (8, 4), (32, 32), 4, split_k=sk),
                  Y((64, 128, 8), (8, 8), (32, 64), 4, split_k=sk),
                  Y((128, 128, 8), (8, 8), (32, 64), 2, split_k=sk),
                  A((64, 128, 8), (8, 8), (32, 64), 3, 4, split_k=sk)]
    return big, split


def main():
    out = sys.argv[1]
    round_ = sys.argv[2] if len(sys.argv) > 2 else "1"
    big, split = candidates(round_)
    t0 = time.time()
    # Start CUDA here, in the main thread: worker threads must never be the first to touch
    # pycuda (they would push the context on their own stack).
    runtime.driver()
    arch = kgen.core.kernel.default_arch()
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda s: kgen.compile(s, arch), big + split + [bm._spec(f, "float32") for f in bm.BASELINES.values()]))
    print(f"compiled {len(big) + len(split)} specs in {time.time() - t0:.1f} s", flush=True)
    lib, mod = bm._peer()
    limits = runtime.device_limits()
    record = {"device": runtime.device().name(), "peak": bm.measure_fp32_peak(), "rows": []}
    print("peak", record["peak"], flush=True)
    # Correctness on a ragged shape (both entry points via an offset view).
    import torch
    for i, s in enumerate(big + split):
        k = bm._build(s)
        errs = []
        for (M, N, K) in ((517, 389, 1263), (64, 200, 40)):
            A = torch.randn(M, K + 1, device="cuda")[:, 1:]  # misaligned -> element path
            B = torch.randn(K, N, device="cuda")
            C = torch.full((M, N), float("nan"), device="cuda")
            k(A, B, out=C)
            ref = A.double() @ B.double()
            errs.append(float((C.double() - ref).norm() / ref.norm()))
            A2 = A.contiguous()
            k(A2, B, out=C)
            errs.append(float((C.double() - ref).norm() / ref.norm()))
        ok = all(e <= s.tolerance(1263) for e in errs)
        print(i, "ok" if ok else "BAD", ["%.1e" % e for e in errs], {n: (r["registers"], r["spill_stores"])
              for n, r in k.resources.items()}, flush=True)
        record["rows"].append({"i": i, "spec": s.to_dict(), "errors": errs, "resources": k.resources})
    shapes_big = [(4096, 4096, 4096), (8192, 8192, 8192), (1024, 1024, 1024), (2048, 2048, 2048), (1000, 1000, 1000),
                  (4097, 4097, 4097), (3000, 5000, 700)]
    shapes_skinny = [(127, 4096, 4096), (4096, 64, 4096)]
    timings = {}
    for shape in shapes_big + shapes_skinny:
        inputs = bm.Inputs(*shape, "float32", lib, mod, limits["l2_bytes"])
        peer = bm.time_op(bm.peer_call(lib, mod), inputs, repeats=15)
        line = {"cublas": bm.tflops(shape, peer)}
        specs = big + split if shape in shapes_skinny or shape[0] <= 1024 else big
        if shape == (8192, 8192, 8192):
            specs = big[:15]
        for s in specs:
            idx = (big + split).index(s)
            try:
                ms = bm.time_op(bm.kgen_call(s), inputs, repeats=15)
                line[idx] = bm.tflops(shape, ms)
            except Exception as exc:  # noqa: BLE001
                line[idx] = str(exc)[:200]
        timings[bm.shape_key(shape)] = line
        ranked = sorted(((v, k) for k, v in line.items() if k != "cublas" and isinstance(v, float)), reverse=True)
        print(bm.shape_key(shape), "cublas %.1f" % line["cublas"],
              " ".join(f"#{k}:{v:.1f}({v / line['cublas']:.2f})" for v, k in ranked[:8]), flush=True)
        del inputs
        torch.cuda.empty_cache()
    record["timings"] = timings
    with open(out, "w") as fh:
        json.dump(record, fh, indent=1)


if __name__ == "__main__":
    main()
