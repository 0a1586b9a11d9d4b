"""Host precompile: the specs kgen.matmul runs for SHAPES files' products on a stand-in H100, and each VARIANTS replacement."""
import os
import sys
import numpy as np
import kgen
from kgen.tune import ahead, dispatch
dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
shapes = []
for f in sys.argv[1:]:
    for s in open(f).read().strip().split(","):
        d, mnk, lay = s.split(":"); M, N, K = map(int, mnk.split("x")); shapes.append((d, M, N, K, lay))
prods = [ahead.Product(M, N, K, d, lay == "col") for d, M, N, K, lay in shapes]
print("defaults", ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
def val(t):
    if "/" in t: return tuple(int(v) for v in t.split("/"))
    if t in ("True", "False"): return t == "True"
    return int(t) if t.isdigit() else t
variants = [{f.split("=")[0]: val(f.split("=")[1]) for f in v.split(":")[1].split(",")} for v in os.environ["VARIANTS"].split(";") if v]
todo = set()
for d, M, N, K, lay in shapes:
    A = np.lib.stride_tricks.as_strided(np.zeros(1), (M, K), (K * 8, 8))
    B = (np.lib.stride_tricks.as_strided(np.zeros(1), (K, N), (8, K * 8)) if lay == "col"
         else np.lib.stride_tricks.as_strided(np.zeros(1), (K, N), (N * 8, 8)))
    spec = dispatch.call_spec(A, B, device=dev, db=False)
    if getattr(spec, "mma_shape", "") == "m16n8k16":
        for v in variants:
            todo.add(spec.replace(**v))
    else:
        print("not m16n8k16:", M, N, K, lay, spec.kernel)
import concurrent.futures as cf
with cf.ThreadPoolExecutor(2) as ex:
    list(ex.map(kgen.compile, todo))
print("variants", len(todo))
