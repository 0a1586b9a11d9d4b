"""A float32 Triton matmul, the peer `kgen bench calls matmul` times beside cuBLAS when Triton
is importable. Triton's own tutorial design (a tiled `tl.dot` loop with a grouped tile order),
autotuned over a handful of configurations on first use per shape class, with TF32 off
(`input_precision="ieee"`), so it computes what kgen and cuBLAS SGEMM compute."""
from __future__ import annotations

from typing import Any, Callable


def make_matmul() -> Callable[[Any, Any], Any] | None:
    """A callable (A, B) -> A @ B through Triton, or None when Triton is not importable."""
    try:
        import torch
        import triton
        import triton.language as tl
    except ImportError:
        return None

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": bk, "GROUP": 8}, num_stages=s, num_warps=w)
               for bm, bn, bk, s, w in ((128, 128, 32, 3, 8), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4),
                                        (64, 64, 32, 4, 4), (128, 256, 32, 3, 8), (32, 64, 32, 5, 2),
                                        (64, 32, 32, 5, 2))]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(a, b, c, M, N, K, sam, sak, sbk, sbn, scm, scn,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
        pid = tl.program_id(0)
        tiles_m, tiles_n = tl.cdiv(M, BM), tl.cdiv(N, BN)
        group = pid // (GROUP * tiles_n)
        first_m = group * GROUP
        rows_in_group = tl.minimum(tiles_m - first_m, GROUP)
        pm = first_m + (pid % (GROUP * tiles_n)) % rows_in_group
        pn = (pid % (GROUP * tiles_n)) // rows_in_group
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, tl.cdiv(K, BK)):
            kk = k0 * BK + rk
            x = tl.load(a + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K),
                        other=0.0)
            y = tl.load(b + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N),
                        other=0.0)
            acc += tl.dot(x, y, input_precision="ieee")
        tl.store(c + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

    def matmul(A: Any, B: Any) -> Any:
        M, K = A.shape
        N = B.shape[1]
        C = torch.empty((M, N), device=A.device, dtype=A.dtype)

        def grid(meta: dict[str, int]) -> tuple[int]:
            return (triton.cdiv(M, meta["BM"]) * triton.cdiv(N, meta["BN"]),)

        kernel[grid](A, B, C, M, N, K, A.stride(0), A.stride(1), B.stride(0), B.stride(1), C.stride(0), C.stride(1))
        return C

    return matmul
