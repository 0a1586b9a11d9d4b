"""Run under compute-sanitizer: skinny specs launched programmatically with the L2 prefetch ahead
of griddepcontrol.wait (the float32/float64 SIMT defaults, and the mma.sync forms with the
largest prefetch), on weights that end exactly at the end of their allocation (no slack for a
prefetch or load past the last element), both storage orders, pointer offsets 0-3 elements,
K below, at and past a slab, each product called twice back to back on one stream (the second
launch overlaps the first) into NaN-poisoned outputs checked against float64. Prints one line
a product and "ok" at the end."""
import torch

import kgen
from kgen.ops.skinny import Skinny, tolerance


def main():
    specs = [Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, "float32"),
             Skinny.default_spec({"M": 5, "N": 4096, "K": 4096}, "float32"),
             Skinny.default_spec({"M": 3, "N": 4096, "K": 4096}, "float64"),
             Skinny.default_spec({"M": 12, "N": 4096, "K": 4096}, "float32").replace(programmatic=True, l2_prefetch=64),
             Skinny.default_spec({"M": 6, "N": 4096, "K": 4096}, "bfloat16").replace(programmatic=True, l2_prefetch=64),
             Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, "float16").replace(programmatic=True, l2_prefetch=64)]
    for spec in specs:
        assert spec.programmatic and spec.l2_prefetch, spec.to_json()
        k = kgen.build(spec)
        dt = getattr(torch, spec.dtype)
        for M, N, K, off in ((1, 1001, 5, 1), (3, 2245, 2038, 3), (spec.rows, 3003, 131, 2), (2, 4100, 7777, 0),
                             (spec.rows, 640, 20000, 1)):
            for order in ("col", "row"):
                storage = torch.randn(K * N + off, device="cuda").to(dt)   # B's last element ends the allocation
                B = storage[off:].view(K, N) if order == "row" else storage[off:].view(N, K).t()
                A = torch.randn(M, K, device="cuda").to(dt)
                C = [torch.full((M, N), float("nan"), device="cuda", dtype=dt) for _ in range(2)]
                k(A, B, out=C[0])
                k(A, B, out=C[1])
                torch.cuda.synchronize()
                ref = A.double() @ B.double()
                for c in C:
                    err = ((c.double() - ref).norm() / ref.norm()).item()
                    assert err <= tolerance(spec.dtype, K), (spec.to_json(), M, N, K, off, order, err)
                print(f"{spec.dtype} rows={spec.rows} tc={spec.tensor_cores} {order} {M}x{N}x{K} offset {off}: "
                      f"relative error {err:.2e}", flush=True)
    print("ok")


if __name__ == "__main__":
    main()
