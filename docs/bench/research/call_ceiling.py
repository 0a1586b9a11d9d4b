"""The most any kernel could gain on cuBLAS in a few-row product as users call it.

Each product is timed as `kgen bench calls matmul --fresh-inputs` times it (one call between
CUDA events, host time included, a new A each call from 32, the same weight B) for three
callers, interleaved three times (medians):
  cublas  torch.matmul(A, B)
  kgen    kgen.matmul(A, B)
  read    a launch that only reads B's bytes (16-byte streaming loads summed per block), through
          kgen's own launch path (core.launch.Launch: packed arguments, one cuLaunchKernel), the
          best of 12 grids for that product. A product must read its weight, so no kernel can
          take less as one call; ceiling = cublas / read is the most a kernel could be faster
          than cuBLAS there, host time included (it leaves out A, C and the host's work before
          the launch, so it is generous; the weight's last 0-15 bytes are left unread).
Also an empty kernel through the same launch path (the host and launch floor of one call).

  SEED=115002 COUNT=8 ROWS=1-16 DTYPE=float32 ORDER=col python call_ceiling.py
  PRODUCTS=float32:col:2x5955x1432,bfloat16:row:4x4096x4096 python call_ceiling.py

Output: a line a product, and $OUT/call_ceiling_<TAG>.json (TAG defaults to the seed)."""
import json
import math
import os
import statistics
import subprocess
import tempfile

import torch

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.core.launch import DriverModule, Launch
from kgen.core.timing import time_calls
from read_floor import SOURCE as READ_SOURCE   # this folder

# read_floor.py's reader (LOADS 16-byte loads in flight a thread, summed per block), by loads.
READERS = {f"read{loads}": READ_SOURCE.replace("LOADS", str(loads)).replace("read_sum", f"read{loads}")
           for loads in (4, 8)}
SOURCE = 'extern "C" __global__ void empty_kernel(int) {}\n' + "".join(READERS.values())
DTYPES = {"float32": torch.float32, "float64": torch.float64, "bfloat16": torch.bfloat16, "float16": torch.float16}


def module() -> DriverModule:
    major, minor = torch.cuda.get_device_capability()
    with tempfile.TemporaryDirectory() as tmp:
        src, cubin = os.path.join(tmp, "read.cu"), os.path.join(tmp, "read.cubin")
        open(src, "w").write(SOURCE)
        subprocess.run(["nvcc", "-cubin", "-O3", f"-arch=sm_{major}{minor}", "-o", cubin, src], check=True)
        return DriverModule(open(cubin, "rb").read())


def products() -> list[tuple[str, str, int, int, int]]:
    if os.environ.get("PRODUCTS"):
        out = []
        for item in os.environ["PRODUCTS"].split(","):
            dtype, order, mnk = item.split(":")
            M, N, K = map(int, mnk.split("x"))
            out.append((dtype, order, M, N, K))
        return out
    lo, hi = map(int, os.environ.get("ROWS", "1-16").split("-"))
    shapes = random_matmul_shapes(int(os.environ.get("COUNT", "8")), int(os.environ["SEED"]), (lo, hi),
                                  multiple=int(os.environ.get("MULTIPLE", "1")))
    return [(os.environ.get("DTYPE", "float32"), os.environ.get("ORDER", "col"), M, N, K) for M, N, K in shapes]


def single_us(fn, reps: int) -> float:
    return time_calls(fn, warmup=2, repeats=reps).median_ms * 1e3


def measure(mod: DriverModule, stream: int, sms: int, gen, dtype: str, order: str, M: int, N: int, K: int) -> dict:
    td = DTYPES[dtype]
    W = torch.randn((N, K) if order == "col" else (K, N), device="cuda", generator=gen).to(td)
    B = W.t() if order == "col" else W
    inputs = [torch.randn(M, K, device="cuda", generator=gen).to(td) for _ in range(32)]
    turn = [0]

    def next_a():
        turn[0] = (turn[0] + 1) % len(inputs)
        return inputs[turn[0]]

    got = kgen.matmul(inputs[0], B)
    ref = inputs[0].double() @ B.double()
    err = float((got.double() - ref).norm() / ref.norm())
    nbytes = W.numel() * W.element_size()
    words = W.view(-1).view(torch.uint8)[: nbytes // 4 * 4].view(torch.float32)
    n4 = words.numel() // 4   # the last 0-15 bytes are left unread
    part = torch.empty(8 * sms, device="cuda")
    args = (words.data_ptr(), n4, part.data_ptr())
    want = float(words[: 4 * n4].double().sum())
    grids = {}
    for name in READERS:
        fn = mod.function(name)
        for threads, per_sm in ((256, 2), (256, 4), (256, 8), (512, 1), (512, 2), (512, 4)):
            launch = Launch(fn, name, (sms * per_sm, 1, 1), (threads, 1, 1), 0, "PqP")
            launch(stream, *args)
            torch.cuda.synchronize()
            total = float(part[: sms * per_sm].double().sum())
            assert abs(total - want) <= 1e-3 * math.sqrt(words.numel()) + 1e-4 * abs(want), (name, total, want)
            grids[f"{name}/t{threads}/x{per_sm}"] = launch
    read_key = min(grids, key=lambda k: single_us(lambda: grids[k](stream, *args), 20))
    read_launch = grids[read_key]
    callers = {"cublas": lambda: torch.matmul(next_a(), B), "kgen": lambda: kgen.matmul(next_a(), B),
               "read": lambda: read_launch(stream, *args)}
    probe = max(single_us(f, 3) for f in callers.values())
    reps = int(max(10, min(60, 150e3 / probe)))
    times: dict[str, list[float]] = {k: [] for k in callers}
    for _ in range(3):
        for k, f in callers.items():
            times[k].append(single_us(f, reps))
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"dtype": dtype, "order": order, "shape": [M, N, K], "weight_mb": nbytes / 1e6, "rel_error": err,
            "read_grid": read_key, **{f"{k}_us": v for k, v in t.items()},
            "kgen_x": t["cublas"] / t["kgen"], "ceiling_x": t["cublas"] / t["read"],
            "kgen_of_ceiling": t["read"] / t["kgen"]}


def main() -> None:
    mod = module()
    stream = torch.cuda.current_stream().cuda_stream
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    empty = Launch(mod.function("empty_kernel"), "empty_kernel", (1, 1, 1), (32, 1, 1), 0, "i")
    empty_us = statistics.median(single_us(lambda: empty(stream, 0), 200) for _ in range(3))
    res = {"device": torch.cuda.get_device_name(), "empty_call_us": empty_us, "products": []}
    print(f"{res['device']}: empty kernel, one call through Launch: {empty_us:.1f} us", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    for dtype, order, M, N, K in products():
        row = measure(mod, stream, sms, gen, dtype, order, M, N, K)
        res["products"].append(row)
        print(f"{dtype} {order} {M}x{N}x{K} ({row['weight_mb']:.1f} MB): cublas {row['cublas_us']:.1f} "
              f"kgen {row['kgen_us']:.1f} read {row['read_us']:.1f} us ({row['read_grid']}); kgen "
              f"{row['kgen_x']:.3f}x cuBLAS, ceiling {row['ceiling_x']:.3f}x; err {row['rel_error']:.1e}", flush=True)
        torch.cuda.empty_cache()
    g = lambda key: math.exp(statistics.fmean(math.log(r[key]) for r in res["products"]))  # noqa: E731
    res["summary"] = {"kgen_x": g("kgen_x"), "ceiling_x": g("ceiling_x"), "kgen_of_ceiling": g("kgen_of_ceiling")}
    print(f"geometric means: kgen {g('kgen_x'):.3f}x cuBLAS, ceiling {g('ceiling_x'):.3f}x, "
          f"kgen at {g('kgen_of_ceiling'):.0%} of the ceiling's speed", flush=True)
    tag = os.environ.get("TAG", os.environ.get("SEED", "products"))
    with open(os.path.join(os.environ.get("OUT", "."), f"call_ceiling_{tag}.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
