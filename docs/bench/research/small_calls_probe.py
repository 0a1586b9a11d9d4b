"""Where the time of a small public call goes: for each shape, kgen.matmul(A, B) and
torch.matmul(A, B) on torch float32 tensors (empty tuning database), the host time per call
(500 calls back to back, then one synchronize), events around 200 back-to-back calls, and the
kernels' own time per call from the CUDA profiler (CUPTI through torch.profiler), with the
kernels each call launches.

    python small_calls_probe.py M,N,K [M,N,K ...]     # output: $OUT/small_calls_probe.json"""

import json
import os
import sys
import time
from collections import defaultdict

import kgen
import torch

OUT = os.environ.get("OUT", ".")


def host_us(fn, calls=500):
    torch.cuda.synchronize()
    best = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        best.append((t1 - t0) / calls * 1e6)
    return sorted(best)[1]


def pipe_us(fn, calls=200):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for _ in range(3):
        torch.cuda.synchronize()
        s.record()
        for _ in range(calls):
            fn()
        e.record()
        e.synchronize()
        out.append(s.elapsed_time(e) * 1e3 / calls)
    return sorted(out)[1]


def kernels(fn, calls=50):
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per = defaultdict(float)
    count = defaultdict(int)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA:
            per[ev.name[:60]] += ev.device_time_total if hasattr(ev, "device_time_total") else ev.cuda_time_total
            count[ev.name[:60]] += 1
    return sum(per.values()) / calls, {k: [round(v / calls, 2), count[k] / calls] for k, v in per.items()}


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for text in sys.argv[1:]:
        M, N, K = (int(v) for v in text.split(","))
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(K, N, device="cuda")
        kgen.matmul(A, B)
        torch.matmul(A, B)
        r = {"shape": [M, N, K]}
        for name, fn in (("kgen", lambda: kgen.matmul(A, B)), ("torch", lambda: torch.matmul(A, B))):
            dev, ks = kernels(fn)
            r[name] = {"host_us": round(host_us(fn), 2), "pipe_us": round(pipe_us(fn), 2), "kernel_us": round(dev, 2),
                       "kernels": ks}
        rows.append(r)
        print(f"{M}x{N}x{K}: kgen host {r['kgen']['host_us']:.1f} pipe {r['kgen']['pipe_us']:.1f} kernels "
              f"{r['kgen']['kernel_us']:.1f} | torch host {r['torch']['host_us']:.1f} pipe {r['torch']['pipe_us']:.1f} "
              f"kernels {r['torch']['kernel_us']:.1f}", flush=True)
        print("    kgen:", r["kgen"]["kernels"], flush=True)
        print("    torch:", r["torch"]["kernels"], flush=True)
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(f"{OUT}/small_calls_probe.json", "w"),
              indent=1)


if __name__ == "__main__":
    main()
