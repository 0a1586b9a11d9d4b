"""The float64 tensor-core rules of kgen.matmul on edge shapes: the 64 x 64 default with K split by
wave_split (K not a multiple of the split), the few-row tiles (9-64 rows), the row tiles of 96
and 128 rows at 65-256 rows and their 64 x 128 alternative, weights whose rows are not 16 bytes
apart (W.t() of an odd K, row-major of an odd N) read in place, element by element (the 64 x 64
tiles copying A aligned first and B's elements along its rows: with_b_elements), and outputs
of an odd N from K left whole (stored through shared memory, staged_unaligned_output); operands
at an odd element offset inside NaN-filled buffers of exactly their extent (one element past
either end is outside the allocation with PYTORCH_NO_CUDA_MEMORY_CACHING=1). Each result is
checked against torch's float64 product. Run it under `compute-sanitizer --tool memcheck` as
well as plainly; it prints the spec each product ran and `bad N` (results off their tolerance)
last."""
import torch

import kgen
from kgen.tune import dispatch

# (M, N, K, W.t()?): products of at least 2^28 multiply-adds (dispatch.TENSOR_F64_MIN_MACS); then
# 65-256 rows below it (TensorMatmul.rows_f64_suits), and 65-256 rows past a whole wave of row
# tiles, K split two or three ways (wave_split's whole_waves); then 65-256 rows on the 64 x 128
# tiles (wide_f64_spec), K whole, rows of an odd length read in place; then the 128-row tiles at
# their edges (97 and 256 rows) and M one past a 96-row tile; then the 64 x 64 tiles reading such a
# weight by elements (with_b_elements) at 49-64 rows (few-row tiles) and 97-256, K odd and even.
PRODUCTS = [
    (100, 3001, 1500, True), (130, 2049, 1031, False), (250, 1100, 2049, True), (200, 1500, 4097, False),
    (9, 1031, 28931, True), (33, 4097, 2051, False), (64, 2049, 2049, True),
    (65, 2100, 2001, True), (80, 2049, 2051, True), (96, 1500, 2000, True), (73, 1031, 4097, True),
    (77, 4101, 1001, False), (255, 1031, 1025, False),
    (1000, 1001, 300, False), (2001, 3001, 64, True), (1500, 2049, 97, False),
    (72, 1074, 1183, True), (142, 1545, 1131, False), (250, 1031, 1024, False), (88, 1025, 2221, False),
    (241, 6395, 5505, False), (175, 11305, 5267, True), (196, 8767, 4099, True),
    (186, 11244, 1609, False), (110, 14957, 1093, True), (166, 10893, 1459, False),
    (97, 3001, 2051, True), (256, 2047, 3001, False), (193, 1031, 2047, True),
    (57, 3001, 1027, True), (150, 1027, 2000, False), (211, 2001, 1029, False),
]


def operand(rows, cols, w_t, offset):
    """A rows x cols float64 view: row-major, or the transpose of a cols x rows matrix (W.t()),
    `offset` elements into a buffer that ends with its last element."""
    outer, inner = (cols, rows) if w_t else (rows, cols)
    buf = torch.full((offset + outer * inner,), float("nan"), device="cuda", dtype=torch.float64)
    x = torch.as_strided(buf, (outer, inner), (inner, 1), offset)
    x.copy_(torch.randn(outer, inner, device="cuda", dtype=torch.float64))
    return x.t() if w_t else x


bad = 0
for M, N, K, w_t in PRODUCTS:
    for offset in (0, 1):
        A = operand(M, K, False, offset)
        B = operand(K, N, w_t, offset)
        C = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float64)
        kgen.matmul(A, B, out=C)
        torch.cuda.synchronize()
        spec = dispatch.call_spec(A, B)
        ref = A @ B
        err = float((C - ref).norm() / ref.norm())
        ok = bool(torch.isfinite(C).all()) and err <= 1e-13   # float64 accumulation: ~1e-15 here
        bad += not ok
        print(f"{M}x{N}x{K} {'W.t()' if w_t else 'row'} offset {offset}: {type(spec).__name__} tile "
              f"{getattr(spec, 'tile', None)} split {getattr(spec, 'split_k', None)} repack "
              f"{getattr(spec, 'repack', None)} err {err:.1e} {'ok' if ok else 'BAD'}", flush=True)
print(f"bad {bad}")
