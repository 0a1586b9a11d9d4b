"""Run under compute-sanitizer: b_classes products (W.t()'s rows by row sets, a set a tile; A
copied shifted a set) whose weight ends exactly at the end of its allocation and starts 0-7
elements into it (so that a map reaching past W's last element, or a read before the granule
holding its first, is a read outside an allocation), pitches of every phase modulo 8, K below,
at and past one k tile, a NaN-poisoned output checked against float64. Prints one line a
product and exits 1 on a mismatch."""
import sys

import torch

import kgen
from kgen.ops.tensorcore import TensorMatmul

BASE = dict(instruction="wgmma", swap_ab=True, layout_b="col", b_classes=True)
SPECS = [TensorMatmul(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=16, **BASE),
         TensorMatmul(dtype="float16", tile=(16, 64, 64), warp_tile=(16, 64), stages=16, split_k=3,
                      split_merge="cluster", **BASE),
         TensorMatmul(dtype="bfloat16", tile=(16, 128, 64), warp_tile=(16, 64), stages=8, split_k=4, **BASE)]
# M, N, K, W's offset in its allocation, pitch past K
CASES = [(5, 1001, 2489, 3, 0), (16, 67, 77, 1, 2), (1, 300, 4097, 7, 0), (9, 5, 999, 0, 1), (3, 2000, 64, 5, 3),
         (12, 777, 130, 2, 5)]


def main() -> int:
    bad = 0
    for spec in SPECS:
        k = kgen.build(spec)
        dt = getattr(torch, spec.dtype)
        for M, N, K, off, pad in CASES:
            pitch = K + pad
            store = torch.randn(off + (N - 1) * pitch + K, device="cuda").to(dt)   # W's last element ends it
            W = store[off:].as_strided((N, K), (pitch, 1))
            A = torch.randn(M, K, device="cuda").to(dt)
            C = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            k(A, W.t(), out=C)
            torch.cuda.synchronize()
            ref = A.double() @ W.double().t()
            err = float((C.double() - ref).norm() / ref.norm())
            ok = err <= 2e-2 and bool(torch.isfinite(C).all())
            bad += not ok
            print(f"{spec.dtype} {spec.tile} {M}x{N}x{K} offset {off} pitch {pitch}: error {err:.2e} "
                  f"{'ok' if ok else 'MISMATCH'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
