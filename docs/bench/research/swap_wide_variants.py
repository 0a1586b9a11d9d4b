"""16-bit few-row products whose transposed tiles (swap_spec: A's rows as the wgmma N) pass the
SMs: N of 8449-16896 gives 133-264 tiles of 64 columns, which swap_spec runs two blocks an SM
(rings half as deep) with K whole. What kgen.matmul runs against neighbours of that spec: one
block an SM with the deepest ring; K in 2 slices (workspace or cluster merge); 128 columns a
block, one block an SM (K split in clusters that all run at once) or two (K in 2 slices,
clusters); and the skinny family's default. Device time from a CUDA graph over operands rotated
past L2, every result checked against float64 first (outputs NaN-poisoned), cuBLAS in the same
run; share of the bound = bytes / the copy bandwidth measured in the run.

Env: SHAPES ("MxNxK,...") or SEED/COUNT (M log-uniform in ROWS, default 1-64; N uniform in
NS, default 8449-16896; K log-uniform in KS, default 1024-8192, rounded down to a multiple of
KMULT, default 1), DTYPE (bfloat16 or float16),
ORDER (col: B = W.t(); row: B stored K x N). Output: $OUT/swap_wide_<ORDER>_<SEED>.json."""
import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "14001"))
COUNT = int(os.environ.get("COUNT", "10"))
ORDER = os.environ.get("ORDER", "col")
DTYPE = os.environ.get("DTYPE", "bfloat16")
KMULT = int(os.environ.get("KMULT", "1"))


def span(name, default):
    lo, hi = (int(v) for v in os.environ.get(name, default).split("-"))
    return lo, hi


def draw():
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng = random.Random(SEED)
    (m0, m1), (n0, n1), (k0, k1) = span("ROWS", "1-64"), span("NS", "8449-16896"), span("KS", "1024-8192")
    out = []
    for _ in range(COUNT):
        M = int(math.exp(rng.uniform(math.log(m0), math.log(m1 + 1))))
        N = rng.randint(n0, n1)
        K = int(math.exp(rng.uniform(math.log(k0), math.log(k1))))
        out.append((min(M, m1), N, max(KMULT, K - K % KMULT)))
    return out


def variants(route, M, N, K):
    """{name: spec} around the route's transposed tiles (empty where the route is another kernel)."""
    from kgen.ops.skinny import Skinny
    from kgen.ops.tensorcore import CLUSTER_WAVE_BLOCKS, PHASED_CLUSTER_BLOCKS, STREAM_MIN_SLICE_K, wgmma_ring_stages
    out = {}
    if getattr(route, "swap_ab", False):
        BM = route.tile[0]
        base = route.replace(split_k=1, split_merge="workspace")
        t64, t128 = -(-N // 64), -(-N // 128)
        specs = {
            "one64": lambda: base.replace(tile=(BM, 64, route.tile[2]), stages=wgmma_ring_stages(BM, 64, 1)),
            "two64": lambda: base.replace(tile=(BM, 64, route.tile[2]), stages=wgmma_ring_stages(BM, 64, 2)),
            "two64/2w": lambda: base.replace(tile=(BM, 64, route.tile[2]), stages=wgmma_ring_stages(BM, 64, 2),
                                             split_k=2),
            "two64/2c": lambda: base.replace(tile=(BM, 64, route.tile[2]), stages=wgmma_ring_stages(BM, 64, 2),
                                             split_k=2, split_merge="cluster"),
            "two128/2c": lambda: base.replace(tile=(BM, 128, route.tile[2]), stages=wgmma_ring_stages(BM, 128, 2),
                                              split_k=2, split_merge="cluster"),
        }
        split1 = max(s for s in (1, 2, 4, 8)
                     if s == 1 or (K >= STREAM_MIN_SLICE_K * s and t128 * s <= CLUSTER_WAVE_BLOCKS[s]))
        specs["one128"] = lambda: (base.replace(tile=(BM, 128, route.tile[2]), stages=wgmma_ring_stages(BM, 128, 1))
                                   .replace(**({"split_k": split1, "split_merge": "cluster"} if split1 > 1 else {})))
        split2 = max(s for s in range(1, 9)
                     if s == 1 or (K >= STREAM_MIN_SLICE_K * s and t128 * s <= PHASED_CLUSTER_BLOCKS[s]))
        specs["two128"] = lambda: (base.replace(tile=(BM, 128, route.tile[2]), stages=wgmma_ring_stages(BM, 128, 2))
                                   .replace(**({"split_k": split2, "split_merge": "cluster"} if split2 > 1 else {})))
        del t64
        for name, make in specs.items():
            try:
                spec = make()
            except ValueError as exc:
                print(f"  {name}: {exc}")
                continue
            if spec.key != route.key:
                out[name] = spec
    try:
        out["skinny"] = Skinny.default_spec({"M": M, "N": N, "K": K, "layout_b": "col" if ORDER == "col" else "row"},
                                            DTYPE)
    except (ValueError, TypeError) as exc:
        print(f"  skinny: {exc}")
    return out


def main():
    import concurrent.futures as cf

    import torch

    import kgen
    from kgen.bench.skinny import checked_graph_time, copy_bandwidth
    from kgen.tune import dispatch
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    dt = getattr(torch, DTYPE)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    bw = copy_bandwidth(torch, 20)

    def operand_b(N, K, make):
        return make(K, N, device="cuda").to(dt) if ORDER == "row" else make(N, K, device="cuda").to(dt).t()

    plans = []
    for M, N, K in draw():
        a, b = torch.empty(M, K, device="cuda", dtype=dt), operand_b(N, K, torch.empty)
        route = dispatch.call_spec(a, b)
        plans.append(((M, N, K), route, variants(route, M, N, K)))
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for _, r, v in plans for s in (r, *v.values())}.values()))
    rows = []
    for (M, N, K), route, specs in plans:
        size = (M * K + K * N + M * N) * 2
        sets = max(2, min(24, math.ceil(3 * l2 / size)))
        A = [torch.randn(M, K, device="cuda").to(dt) for _ in range(sets)]
        B = [operand_b(N, K, torch.randn) for _ in range(sets)]
        C = [torch.empty(M, N, device="cuda", dtype=dt) for _ in range(sets)]
        ref = A[0].double() @ B[0].double()
        bound = size / bw * 1e6
        row = {"shape": [M, N, K], "bound_us": bound, "route_spec": route.to_json(),
               "variants": {n: s.to_json() for n, s in specs.items()}}
        ways = {"cublas": lambda a, b, c: torch.matmul(a, b, out=c), "route": lambda a, b, c: kgen.matmul(a, b, out=c)}
        for n, s in specs.items():
            try:
                k = kgen.build(s)
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row[n + "_error"] = str(exc)[:200]
                continue
            ways[n] = (lambda a, b, c, k=k: k(a, b, out=c))
        for n, fn in ways.items():
            try:
                row[n + "_err"], row[n], _ = checked_graph_time(torch, fn, A, B, C, ref, 15)
            except Exception as exc:  # noqa: BLE001 - reported in the row
                row[n + "_error"] = str(exc)[:200]
        bad = [n for n in ways if not (row.get(n + "_err", 1) < 1e-2)]
        timed = [n for n in ways if n in row]
        best = min(timed, key=lambda n: row[n])
        print(f"{M}x{N}x{K} {getattr(route, 'tile', route.kernel)} split {getattr(route, 'split_k', '-')} "
              f"stages {getattr(route, 'stages', '-')} bound {bound:.1f}: "
              + " ".join(f"{n}:{row[n]:.1f}" for n in timed) + f" | route {100 * bound / row['route']:.0f}% best {best}"
              + (f" BAD {bad}" if bad else ""), flush=True)
        rows.append(row)
        A = B = C = None
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"swap_wide_{ORDER}_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "copy_bandwidth": bw, "dtype": DTYPE, "rows": rows}, f,
                  indent=1)


if __name__ == "__main__":
    main()
