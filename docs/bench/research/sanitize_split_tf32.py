"""Split-TF32 kernels on edge shapes (K = 1 and 2, odd offsets, every layout pair, split-K, the
persistent schedule, alpha and beta; 40x2000x2100 copies more than SPLIT_COPIES_ONE_LAUNCH values,
so in two launches), each result checked against float64: run it under
`compute-sanitizer --tool memcheck` (with PYTORCH_NO_CUDA_MEMORY_CACHING=1) as well as plainly."""
import torch, kgen
from kgen.ops.tensorcore import TensorMatmul as T
specs = [T.wgmma_default_spec({"M": 4096, "N": 4096, "K": 4096}, "float32", split_tf32=True),
         T(dtype="float32", tf32=True, split_tf32=True, tile=(64, 192, 32), warp_tile=(64, 192), stages=5, instruction="wgmma", split_k=2),
         T(dtype="float32", tf32=True, split_tf32=True, tile=(128, 64, 32), warp_tile=(64, 64), stages=3, instruction="wgmma", persistent=True, split_k=3)]
bad = 0
for spec in specs:
    for la in ("row", "col"):
        for lb in ("row", "col"):
            s = spec.replace(layout_a=la, layout_b=lb)
            k = kgen.build(s)
            for M, N, K, off in ((1, 1, 1, 0), (130, 67, 33, 1), (67, 200, 517, 1), (200, 129, 1030, 0), (5, 3, 2, 1),
                                (40, 2000, 2100, 1)):
                def mk(r, c, lay):
                    if lay == "row":
                        return torch.randn(r, c + off + 1, device="cuda")[:, off:off + c]
                    return torch.randn(c, r + off + 1, device="cuda")[:, off:off + r].t()
                A, B = mk(M, K, la), mk(K, N, lb)
                C0 = torch.randn(M, N, device="cuda")
                C = C0.clone()
                k(A, B, out=C, alpha=0.5, beta=-1.0)
                ref = 0.5 * (A.double() @ B.double()) - C0.double()
                torch.cuda.synchronize()
                rel = ((C.double() - ref).norm() / ref.norm()).item()
                tol = s.tolerance_for({"M": M, "N": N, "K": K})
                if not rel <= tol:
                    bad += 1
                    print("wrong:", s.to_json(), M, N, K, off, rel, tol, flush=True)
print("cases done, wrong:", bad, flush=True)
