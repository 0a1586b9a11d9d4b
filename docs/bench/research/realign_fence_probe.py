"""What paces the producer threads that read an unaligned 16-bit B in place (TensorMatmul
b_realign)? Fills of B in flight (REALIGN_DEPTH 4, 8 or 12) changed nothing (realign_pitch.py,
REALIGN_DEPTH=n). Probe: the kernel kgen.matmul runs for such a product, rendered as it is
("route"), with every producer thread waiting for all its copies before each shift ("wait_all":
one fill in flight), and without the proxy fence after the shift ("no_fence": the tensor cores
may then read stale values, so its error is reported, not required). Were "route" as slow as
"wait_all" and "no_fence" faster, the fence waits for the thread's copies still in flight.
Products: SHAPES "MxNxK,..." (default below) with B row-major (ORDER=row) or W.t() (col),
DTYPE; device time from a CUDA graph over operands rotated past L2; cuBLAS beside. Output on stdout
and $OUT/realign_fence_probe.json."""
import json
import math
import os

import torch

import kgen
from kgen.bench.skinny import checked_graph_time
from kgen.core.kernel import _compile_spec
from kgen.tune import dispatch

SHAPES = [tuple(int(v) for v in s.split("x")) for s in os.environ.get(
    "SHAPES", "34x10212x2038,39x5670x9350,22x1137x8034,20x10237x9910,90x3260x4974").split(",")]
ORDER = os.environ.get("ORDER", "row")
DTYPE = os.environ.get("DTYPE", "bfloat16")
FENCE = ('asm volatile("fence.proxy.async.shared::cta;\\n" ::: "memory");\n'
         '            __syncwarp();\n'
         '            if ((t & 31) == 0) mbar_arrive(full);')
WAIT = "realign_wait<REALIGN_DEPTH - 1>();   // this thread's copies of fill f are in"


def variant(spec, name):
    src = kgen.render(spec)
    assert src.count(FENCE) == 1 and src.count(WAIT) == 1, "the template changed: update the probe"
    if name == "no_fence":
        src = src.replace(FENCE, FENCE.split("\n", 1)[1])
    elif name == "wait_all":
        src = src.replace(WAIT, "realign_wait<0>();")
    return spec.kernel_class(spec, src, _compile_spec(spec, src, "sm_90a"))


def main():
    tdt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    for M, N, K in SHAPES:
        sets = max(2, min(24, math.ceil(3 * l2 / ((M * K + K * N + M * N) * 2))))
        A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
        B = [(torch.randn(N, K, device="cuda").to(tdt).t() if ORDER == "col" else
              torch.randn(K, N, device="cuda").to(tdt)) for _ in range(sets)]
        C = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(sets)]
        spec = dispatch.call_spec(A[0], B[0])
        row = {"shape": [M, N, K], "order": ORDER, "dtype": DTYPE, "spec": spec.to_json()}
        if not getattr(spec, "b_realign", False):
            print(f"{M}x{N}x{K}: kgen.matmul does not read B in place here ({type(spec).__name__}); skipped")
            continue
        ref = A[0].double() @ B[0].double()
        ways = {"cublas": None, **{n: variant(spec, n) for n in ("route", "wait_all", "no_fence")}}
        for name, k in ways.items():
            def fn(a, b, c, k=k):
                return torch.matmul(a, b, out=c) if k is None else k(a, b, out=c)
            row[name + "_err"], row[name], _ = checked_graph_time(torch, fn, A, B, C, ref, 15)
        rows.append(row)
        print(f"{M}x{N}x{K} {ORDER} tile {spec.tile} stages {spec.stages} split {spec.split_k}: "
              + " ".join(f"{n} {row[n]:.1f} (err {row[n + '_err']:.1e})" for n in ways), flush=True)
        A = B = C = None
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), "realign_fence_probe.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
