"""The transposed (swap_ab) wgmma tiles of 16-bit few-row products, one block a C tile and K
slice (what kgen.matmul runs) against the persistent schedule: one block an SM walking the
units (C tile x K slice) with K split so that the units fill whole waves of the SMs, the slices'
sums added by the workspace reduction. Device time from a CUDA graph over operands rotated past
L2, every result first checked against float64 (outputs NaN-poisoned), cuBLAS in the same run.

Env: SHAPES ("MxNxK,..."), or a draw of COUNT products (SEED; M log-uniform in ROWS "LO-HI", N and
K log-uniform in 1024-16384, multiples of MULTIPLE); DTYPE; ORDER (col: B = W.t(); row: B stored
K x N). Each product also times the persistent schedule at the splits s whose units (tiles x s)
fill at least FILL of their last wave (default 0.9), up to 4 of them, slices at least 4 k steps
deep. Output: $OUT/swap_persistent_<ORDER>_<SEED>.json."""
import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "11101"))
COUNT = int(os.environ.get("COUNT", "12"))
LO, HI = (int(v) for v in os.environ.get("ROWS", "1-16").split("-"))
MULTIPLE = int(os.environ.get("MULTIPLE", "1"))
DTYPE = os.environ.get("DTYPE", "bfloat16")
ORDER = os.environ.get("ORDER", "col")
FILL = float(os.environ.get("FILL", "0.9"))


def draw():
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng = random.Random(f"{SEED}-{DTYPE}-{LO}-{HI}")
    out = []
    for _ in range(COUNT):
        M = min(HI, int(math.exp(rng.uniform(math.log(LO), math.log(HI + 1)))))
        N, K = (-(-int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) // MULTIPLE) * MULTIPLE
                for _ in range(2))
        out.append((M, N, K))
    return out


def splits_for(spec, M, N, K, sms):
    """Splits s (1-32) whose units fill at least FILL of their last wave of `sms`, slices of at
    least 4 BK steps, the fewest first (at most 4)."""
    BM, BN, BK = spec.tile
    tiles = -(-M // BM) * -(-N // BN)
    out = []
    for s in range(1, 33):
        n, per = spec.replace(split_k=s, persistent=True).split_plan(K)
        if s > 1 and per < 4 * BK:
            break
        units = tiles * n
        if units / (math.ceil(units / sms) * sms) >= FILL and n not in out:
            out.append(n)
        if len(out) == 4:
            break
    return out


def main():
    import concurrent.futures as cf

    import torch

    import kgen
    from kgen.bench.skinny import checked_graph_time
    from kgen.ops.tensorcore import wgmma_ring_stages
    from kgen.tune import dispatch
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    tdt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    def operand_b(N, K):
        return torch.randn(N, K, device="cuda").to(tdt).t() if ORDER == "col" else \
            torch.randn(K, N, device="cuda").to(tdt)

    plans = []
    for M, N, K in draw():
        a, b = torch.empty(M, K, device="cuda", dtype=tdt), operand_b(N, K)
        route = dispatch.call_spec(a, b)
        variants = {}
        if type(route).__name__ == "TensorMatmul" and route.swap_ab:
            base = route.replace(split_k=1, split_merge="workspace", persistent=False)
            deep = base.replace(stages=wgmma_ring_stages(base.tile[0], base.tile[1], 1))
            for s in splits_for(deep, M, N, K, sms):
                variants[f"persistent_s{s}"] = deep.replace(persistent=True, split_k=s)
        plans.append(((M, N, K), route, variants))
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for _, r, v in plans for s in (r, *v.values())}.values()))

    rows = []
    for (M, N, K), route, variants in plans:
        per_set = (M * K + K * N + M * N) * 2
        sets = max(2, min(24, math.ceil(3 * l2 / per_set)))
        A = [torch.randn(M, K, device="cuda").to(tdt) for _ in range(sets)]
        B = [operand_b(N, K) for _ in range(sets)]
        C = [torch.empty(M, N, device="cuda", dtype=tdt) for _ in range(sets)]
        ref = A[0].double() @ B[0].double()
        ways = {"cublas": None, "route": None, **{n: kgen.build(s) for n, s in variants.items()}}
        row = {"shape": [M, N, K], "dtype": DTYPE, "order": ORDER, "route_spec": route.to_json(),
               "variants": {n: s.to_json() for n, s in variants.items()}}
        for name, k in ways.items():
            if name == "cublas":
                def fn(a, b, c):
                    return torch.matmul(a, b, out=c)
            elif name == "route":
                def fn(a, b, c):
                    return kgen.matmul(a, b, out=c)
            else:
                def fn(a, b, c, k=k):
                    return k(a, b, out=c)
            row[name + "_err"], row[name], _ = checked_graph_time(torch, fn, A, B, C, ref, 15)
        bad = [n for n in ways if not (math.isfinite(row[n + "_err"]) and row[n + "_err"] < 1e-2)]
        best = min((n for n in variants), key=lambda n: row[n], default=None)
        tiles = -(-M // route.tile[0]) * -(-N // route.tile[1]) if type(route).__name__ == "TensorMatmul" else 0
        print(f"{M}x{N}x{K} {ORDER} {type(route).__name__} tiles {tiles} split {getattr(route, 'split_k', '-')}: "
              f"cublas {row['cublas']:.1f} route {row['route']:.1f}"
              + "".join(f" {n[11:]}:{row[n]:.1f}" for n in variants)
              + (f" | best {row['route'] / row[best]:.2f}x route" if best else "")
              + (f" BAD {bad}" if bad else ""), flush=True)
        rows.append(row)
        A = B = C = None
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"swap_persistent_{ORDER}_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
