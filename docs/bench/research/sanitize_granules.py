"""The 16-bit tensor-core dot form's granule reads (kgen_skinny_tc_dot_v1: rows of an odd
pitch read as whole 16-byte granules) on buffers of exactly the weight's size, to run under
`compute-sanitizer --tool memcheck` (and racecheck) with PYTORCH_NO_CUDA_MEMORY_CACHING=1,
so that a read past the weight, or before the granule holding its first value, is a read
outside an allocation. Weights W (N x K, K odd) passed as W.t(), starting 0-7 elements into
their allocation; 2-64 rows, K split or whole, both 16-bit types; each result checked
against float64 (output NaN-poisoned). Prints one line a case and exits 1 on a mismatch."""
import sys

import torch

import kgen
from kgen.ops.skinny import Skinny, tolerance

CASES = [(6, 67, 4097, 0, 0), (8, 45, 77, 1, 3), (16, 130, 1001, 3, 0), (24, 33, 2049, 7, 2),
         (40, 70, 41, 5, 0), (64, 19, 8191, 2, 0), (5, 300, 16383, 6, 5), (12, 9, 45, 4, 0),
         (2, 100, 999, 1, 0), (3, 57, 4097, 3, 2)]


def run_case(dtype, rows, N, K, offset, k_split, A=None):
    """One product: W (N x K, exactly its allocation, starting `offset` elements in) as W.t(),
    A as given (default: a new rows x K), the default spec for the shape (K split k_split ways
    where that is not 0), the NaN-poisoned output against float64. Returns (relative error,
    whether it is within tolerance, the main kernel's entry point)."""
    tdt = getattr(torch, dtype)
    spec = Skinny.default_spec({"M": rows, "N": N, "K": K}, dtype)
    spec = spec.replace(k_split=k_split) if k_split else spec
    k = kgen.build(spec)
    buf = torch.randn(offset + N * K, device="cuda").to(tdt)   # exactly the weight and its offset
    W = buf[offset:].view(N, K)
    if A is None:
        A = torch.randn(rows, K, device="cuda").to(tdt)
    C = torch.full((rows, N), float("nan"), device="cuda", dtype=tdt)
    k(A, W.t(), out=C)
    torch.cuda.synchronize()
    entry = [x for x in next(iter(k._plans.values())).launches if x[0] == "main"][0][1].name
    ref = A.double() @ W.double().t()
    err = float((C.double() - ref).norm() / ref.norm())
    return err, err <= tolerance(dtype, K), entry


def main() -> int:
    bad = 0
    for dtype in ("bfloat16", "float16"):
        for rows, N, K, offset, k_split in CASES:
            err, ok, entry = run_case(dtype, rows, N, K, offset, k_split)
            bad += not ok
            print(f"{dtype} {rows}x{N}x{K} offset {offset} k_split {k_split} {entry}: error {err:.2e} "
                  f"{'ok' if ok else 'MISMATCH'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
