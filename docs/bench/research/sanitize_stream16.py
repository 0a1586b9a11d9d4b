"""TensorMatmul's streaming specs of few 16-bit rows (TensorMatmul.stream_spec: 64-row tiles,
TMA rings of 9 and 5 stages, K split with its workspace or merged in a thread block cluster,
the persistent schedule; TensorMatmul.swap_spec: A's rows as the wgmma N, 8-256 rows a tile,
one or two consumer warpgroups, K slices in clusters or a workspace, two blocks an SM) on edge
shapes: 1 row and several row tiles, K of 1, K past a slice and not a multiple of 64, N past
a tile and odd, odd element offsets (the repacking copy), both storage orders of B, alpha and
beta (and beta = 0, C NaN-poisoned); each result checked against float64. Run it under
`compute-sanitizer --tool memcheck` (and racecheck) with PYTORCH_NO_CUDA_MEMORY_CACHING=1 so
that a read past a buffer is a read past an allocation. Env: DTYPE (bfloat16), ONLY=swap (the
swap_spec ones alone), ONLY=band (the last: 128 columns in 3 slices) or ONLY=staged (those
whose block stores its tile from shared memory, TensorMatmul.staged_epilogue), REALIGN=1 (a
row-major B read by the producer threads, b_realign, where the spec takes it), PREFETCH=1 (B's
first k tiles asked of L2 ahead of the wait, with_l2_prefetch, where the spec takes it)."""
import os

import torch

import kgen
from kgen.ops.tensorcore import TensorMatmul

DTYPE = os.environ.get("DTYPE", "bfloat16")
dt = getattr(torch, DTYPE)
specs = [TensorMatmul.stream_spec({"M": 9, "N": 2048, "K": 8192}, DTYPE),
         TensorMatmul.stream_spec({"M": 200, "N": 16384, "K": 2048}, DTYPE),
         TensorMatmul.stream_spec({"M": 3, "N": 1536, "K": 8192}, DTYPE).replace(persistent=True,
                                                                               split_merge="workspace"),
         TensorMatmul.stream_spec({"M": 9, "N": 2048, "K": 8192}, DTYPE).replace(split_merge="cluster"),
         TensorMatmul.stream_spec({"M": 200, "N": 1024, "K": 4096}, DTYPE).replace(split_merge="cluster"),
         TensorMatmul.swap_spec({"M": 1, "N": 4096, "K": 4096}, DTYPE),
         TensorMatmul.swap_spec({"M": 30, "N": 16384, "K": 4096}, DTYPE),
         TensorMatmul.swap_spec({"M": 100, "N": 1344, "K": 5824}, DTYPE),
         TensorMatmul.swap_spec({"M": 38, "N": 1344, "K": 5824}, DTYPE),   # 40 rows, K slices in a cluster
         TensorMatmul.swap_spec({"M": 195, "N": 3840, "K": 15936}, DTYPE),  # 200 rows, 2 slices
         TensorMatmul.swap_spec({"M": 158, "N": 1088, "K": 2816}, DTYPE),   # 160 rows, clusters of 6
         TensorMatmul.swap_spec({"M": 20, "N": 4096, "K": 2048}, DTYPE).replace(tile=(24, 128, 64), warp_tile=(24, 64),
                                                                               stages=8, split_k=3,
                                                                               split_merge="workspace"),
         # just past the SMs: 8 rows, 128 columns, two blocks an SM's ring, 3 slices in clusters
         TensorMatmul.swap_spec({"M": 5, "N": 9319, "K": 11800}, DTYPE)]
if os.environ.get("ONLY") == "swap":
    specs = [s for s in specs if s.swap_ab]
elif os.environ.get("ONLY") == "band":
    specs = specs[-1:]
elif os.environ.get("ONLY") == "staged":
    specs = [s for s in specs if s.staged_epilogue]
shapes = ((1, 1, 1), (1, 130, 1031), (7, 300, 2049), (70, 257, 1100), (129, 67, 700), (16, 1024, 4096))
bad = cases = 0
for spec in specs:
    assert spec.stages >= 5 or spec.swap_ab
    for lb in ("row", "col"):
        ordered = spec.replace(layout_b=lb)
        if os.environ.get("REALIGN") == "1":
            ordered = ordered.with_realigned_b()
        if os.environ.get("PREFETCH") == "1":
            ordered = ordered.with_l2_prefetch()
        k = kgen.build(ordered)
        for M, N, K in shapes:
            for off in (0, 1):
                A = torch.randn(M, K + off + 1, device="cuda").to(dt)[:, off:off + K]
                if lb == "row":
                    B = torch.randn(K, N + off + 1, device="cuda").to(dt)[:, off:off + N]
                else:
                    B = torch.randn(N, K + off + 1, device="cuda").to(dt)[:, off:off + K].t()
                C0 = torch.randn(M, N, device="cuda").to(dt)
                C = C0.clone()
                k(A, B, out=C, alpha=0.5, beta=-1.0)
                ref = 0.5 * (A.double() @ B.double()) - C0.double()
                torch.cuda.synchronize()
                rel = ((C.double() - ref).norm() / ref.norm()).item()
                tol = 2 * spec.tolerance_for({"M": M, "N": N, "K": K})
                # beta = 0 too: C is not read, and whole rows may leave in 16-byte stores.
                D = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
                k(A, B, out=D)
                ref0 = A.double() @ B.double()
                torch.cuda.synchronize()
                rel0 = ((D.double() - ref0).norm() / max(ref0.norm(), 1e-30)).item() if M * N else 0.0
                for beta, err in ((-1.0, rel), (0.0, rel0)):
                    cases += 1
                    if not err <= tol:
                        bad += 1
                        print("wrong:", spec.to_json(), lb, M, N, K, off, "beta", beta, err, tol, flush=True)
print(f"{cases} cases done, wrong: {bad}", flush=True)
raise SystemExit(1 if bad else 0)
