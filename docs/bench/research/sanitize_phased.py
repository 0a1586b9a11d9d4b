"""Run under compute-sanitizer: b_phased products (B's rows by row sets; row-major B and W.t()) whose B ends exactly at
the end of its allocation (no slack for a map that reached past B's last element), at every
pitch modulo 8 and pointer offsets of 0-7 elements, K below, at and past the eight sets, and a
NaN-poisoned output checked against float64. Prints one line a product and "ok" at the end."""
import torch

import kgen
from kgen.ops.tensorcore import TensorMatmul


def main():
    specs = [TensorMatmul.swap_spec({"M": 34, "N": 10212, "K": 2038}, "bfloat16").with_phased_b(),
             TensorMatmul.swap_spec({"M": 200, "N": 3001, "K": 1500}, "bfloat16").with_phased_b(),
             TensorMatmul(dtype="float16", tile=(16, 128, 64), warp_tile=(16, 64), stages=8, instruction="wgmma",
                          swap_ab=True, split_k=4, split_merge="cluster", b_phased=True),
             TensorMatmul.swap_spec({"M": 78, "N": 2964, "K": 6268}, "bfloat16").replace(layout_b="col").with_phased_b(),
             TensorMatmul(dtype="bfloat16", tile=(8, 64, 64), warp_tile=(8, 64), stages=6, instruction="wgmma",
                          swap_ab=True, layout_b="col", b_phased=True),
             # row sets two blocks an SM, K in clusters (phased_fill_spec): W.t() and row-major
             TensorMatmul.default_spec({"M": 60, "N": 5000, "K": 8006}, "bfloat16").for_layouts(
                 {"M": 60, "N": 5000, "K": 8006}, layout_a="row", layout_b="col", b_phased=True),
             TensorMatmul.default_spec({"M": 6, "N": 2525, "K": 6095}, "bfloat16").for_layouts(
                 {"M": 6, "N": 2525, "K": 6095}, layout_a="row", layout_b="row", b_phased=True)]
    for spec in specs:
        assert spec.b_phased, spec.to_json()
        k = kgen.build(spec)
        dt = getattr(torch, spec.dtype)
        for M, N, K, off in ((34, 1001, 5, 1), (34, 2245, 2038, 3), (7, 3003, 131, 7), (100, 4100, 777, 2),
                             (34, 10212, 2038, 0), (1, 999, 8, 5), (65, 1280, 4099, 6)):
            storage = torch.randn(K * N + off, device="cuda").to(dt)   # B's last element ends the allocation
            # row-major B (K x N), or W.t() of W stored N x K
            B = storage[off:].view(K, N) if spec.layout_b == "row" else storage[off:].view(N, K).t()
            A = torch.randn(M, K, device="cuda").to(dt)
            C = torch.full((M, N), float("nan"), device="cuda", dtype=dt)
            k(A, B, out=C)
            torch.cuda.synchronize()
            ref = A.double() @ B.double()
            err = ((C.double() - ref).norm() / ref.norm()).item()
            assert err < 2e-2, (spec.to_json(), M, N, K, off, err)
            print(f"{spec.tile} {M}x{N}x{K} offset {off}: relative error {err:.2e}", flush=True)
    print("ok")


if __name__ == "__main__":
    main()
