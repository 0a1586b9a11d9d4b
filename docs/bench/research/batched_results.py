"""Batched results (kgen.core.runtime.TorchResults) against a new_empty a call, interleaved in
one process: kgen.matmul on few-row products (one call between CUDA events, host time
included, and back to back; weights rotated over 4 copies) and kgen.dot at 2^20 (back to
back), beside torch. Output (H100): docs/bench/batched_results_h100.txt."""
import statistics

import torch

import kgen
from kgen.tune import dispatch


def one_call(fn, reps):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for i in range(reps):
        torch.cuda.synchronize()
        s.record()
        fn(i)
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3)
    return statistics.median(out)


def pipelined(fn, n=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for i in range(n):
        fn(i)
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / n


def compare(k, kgen_call, torch_call, rounds, single, pipe_n):
    """Interleaved rounds of: the batched results, new_empty a call, torch."""
    real = k._torch_results.new
    res = {f"{w}{t}": [] for w in ("batched", "new_empty", "torch") for t in ("", "_pipe")}
    for _ in range(rounds):
        for way in ("batched", "new_empty", "torch"):
            if way == "new_empty":
                k._torch_results.new = lambda like, shape, d, h: like.new_empty(shape)
            else:
                k._torch_results.new = real
            fn = torch_call if way == "torch" else kgen_call
            if single:
                res[way].append(one_call(fn, single))
            res[way + "_pipe"].append(pipelined(fn, pipe_n))
    k._torch_results.new = real
    return ", ".join(f"{n} {statistics.median(v):.1f}" for n, v in res.items() if v) + " us"


def main():
    for M, N, K, dt in ((1, 4096, 4096, torch.float32), (1, 4096, 4096, torch.bfloat16),
                        (2, 11008, 4096, torch.bfloat16), (1, 2778, 2323, torch.float32)):
        Ws = [torch.randn(K, N, device="cuda", dtype=dt) for _ in range(4)]
        x = torch.randn(M, K, device="cuda", dtype=dt)
        kgen.matmul(x, Ws[0])
        torch.cuda.synchronize()
        k = dispatch._fast[("matmul", x.shape, x.stride(), Ws[0].shape, Ws[0].stride(), x.dtype, False)]
        print(f"{M}x{N}x{K} {str(dt)[6:]}: " + compare(k, lambda i: kgen.matmul(x, Ws[i % 4]),
                                                      lambda i: torch.matmul(x, Ws[i % 4]), 7, 60, 200), flush=True)
    x, y = torch.randn(2 ** 20, device="cuda"), torch.randn(2 ** 20, device="cuda")
    kgen.dot(x, y)
    torch.cuda.synchronize()
    k = dispatch._fast[("reduce", "dot", x.shape, x.dtype, False)]
    print("dot 2^20: " + compare(k, lambda i: kgen.dot(x, y), lambda i: torch.dot(x, y), 21, 0, 1000), flush=True)


if __name__ == "__main__":
    main()
