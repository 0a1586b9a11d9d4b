"""kgen.matmul on four bfloat16 products whose B rows are not 16-byte aligned and whose transposed
tiles take 128 columns with K in two slices (realign_split_spec), A at an odd offset; checked
against float64. Run under compute-sanitizer --tool memcheck|racecheck."""
import torch, kgen
from kgen.tune import dispatch
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
worst = 0.0
for M, N, K, order in ((82, 4520, 2853, "col"), (19, 4918, 4745, "row"), (116, 4293, 2051, "col"), (33, 8447, 3001, "row")):
    A = torch.randn(M, K + 1, device="cuda", dtype=torch.bfloat16)[:, 1:]   # an odd offset too
    B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if order == "col" else \
        torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    C = kgen.matmul(A, B)
    ref = A.double() @ B.double()
    err = float((C.double() - ref).norm() / ref.norm())
    k = dispatch._fast.get(("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False))
    spec = getattr(k, "spec", None)
    print(M, N, K, order, "err %.1e" % err, spec.tile if spec else None, getattr(spec, "split_k", None), getattr(spec, "b_realign", None))
    worst = max(worst, err)
torch.cuda.synchronize()
assert worst < 1e-2, worst
print("ok")
