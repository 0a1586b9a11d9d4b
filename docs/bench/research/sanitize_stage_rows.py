"""The 16-bit tensor-core dot form's staging of S (the few-row operand) from rows that are not
16-byte aligned (ROW_GRANULES: two aligned granules an item, picked at the item's own offset),
on buffers of exactly A's size, to run under `compute-sanitizer --tool memcheck` with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, so that a read past A's last element, or before the granule
holding its first, is a read outside an allocation. A (rows x K, K no multiple of 8, or a
pitch wider than K) starting 0-7 elements into its allocation; W (N x K) as W.t() at its own
offset; 2-16 rows, K split or whole, both 16-bit types; each result checked against float64
(output NaN-poisoned). Prints one line a case and exits 1 on a mismatch."""
import sys

import torch

from sanitize_granules import run_case   # run from this folder, as the other scripts here

# rows, N, K, A's offset in its allocation, A's pitch past K, W's offset, k_split (0: the default's)
CASES = [(5, 300, 2489, 3, 0, 0, 0), (8, 45, 77, 1, 0, 3, 3), (2, 130, 1001, 7, 0, 0, 4), (6, 70, 4093, 5, 2, 1, 0),
         (3, 57, 4097, 0, 0, 3, 2), (12, 90, 6001, 6, 0, 0, 0), (16, 33, 1003, 2, 3, 5, 5), (7, 64, 4094, 4, 0, 0, 3),
         (4, 200, 3734, 1, 0, 0, 0), (9, 40, 45, 3, 1, 2, 0)]


def main() -> int:
    bad = 0
    for dtype in ("bfloat16", "float16"):
        for rows, N, K, a_off, pad, w_off, k_split in CASES:
            lda = K + pad
            abuf = torch.randn(a_off + (rows - 1) * lda + K, device="cuda").to(getattr(torch, dtype))  # A ends it
            A = abuf[a_off:].as_strided((rows, K), (lda, 1))
            err, ok, entry = run_case(dtype, rows, N, K, w_off, k_split, A)
            bad += not ok
            print(f"{dtype} {rows}x{N}x{K} A offset {a_off} pitch {lda} W offset {w_off} k_split {k_split} {entry}: "
                  f"error {err:.2e} {'ok' if ok else 'MISMATCH'}", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
