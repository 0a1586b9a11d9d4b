"""B read by row sets (TensorMatmul.b_phased) against W.t() of an even, unaligned pitch at 17-64
rows: what kgen.matmul runs (one block an SM, the deepest ring, K split in clusters only where
they all run at once) against two blocks an SM (rings half as deep) with K in 1-4 slices merged
in clusters, and one block an SM with K in 2-4 slices. Device time from a CUDA graph over
operands rotated past L2, every result checked against float64 first (outputs NaN-poisoned),
cuBLAS in the same run. Env: SHAPES ("MxNxK,...") or SEED/COUNT (M in ROWS, default 17-64; N and K
log-uniform in 1024-16384, B's pitch moved to 2, 4 or 6 modulo 8, or to any of 1-7 with ORDER=row).
ORDER=row: B stored K x N (the row sets reorder K). RULE=1: instead of the variants, only the spec
TensorMatmul.phased_fill_spec's rule would pick were it applied whatever the storage order and
rows ("rule"). Output: $OUT/phased_split_<ORDER>_<SEED>.json."""
import json
import math
import os
import random

SEED = int(os.environ.get("SEED", "11361"))
COUNT = int(os.environ.get("COUNT", "8"))
ORDER = os.environ.get("ORDER", "col")
LO, HI = (int(v) for v in os.environ.get("ROWS", "17-64").split("-"))
RULE = os.environ.get("RULE") == "1"


def draw():
    if os.environ.get("SHAPES"):
        return [tuple(int(v) for v in s.split("x")) for s in os.environ["SHAPES"].split(",")]
    rng = random.Random(SEED)
    out = []
    for _ in range(COUNT):
        M = int(math.exp(rng.uniform(math.log(LO), math.log(HI + 1))))
        N, K = (int(math.exp(rng.uniform(math.log(1024), math.log(16384)))) for _ in range(2))
        if ORDER == "row":
            N = N - N % 8 + rng.choice((1, 2, 3, 4, 5, 6, 7))
        else:
            K = K - K % 8 + rng.choice((2, 4, 6))
        out.append((M, N, K))
    return out


def main():
    import concurrent.futures as cf

    import torch

    import kgen
    from kgen.bench.skinny import checked_graph_time
    from kgen.ops.tensorcore import PHASED_CLUSTER_BLOCKS, SM_SHARED_BYTES, STREAM_MIN_SLICE_K, WGMMA_MAX_STAGES
    from kgen.tune import dispatch
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size

    def operand_b(N, K, make):
        """B = W.t() (W stored N x K) or, with ORDER=row, stored K x N."""
        if ORDER == "row":
            return make(K, N, device="cuda").bfloat16()
        return make(N, K, device="cuda").bfloat16().t()

    def stages(spec, per_sm):
        per_block = (SM_SHARED_BYTES - 1024 * per_sm) // per_sm
        return min(WGMMA_MAX_STAGES, (per_block - 1024) // spec.stage_bytes)

    plans = []
    for M, N, K in draw():
        a, b = torch.empty(M, K, device="cuda", dtype=torch.bfloat16), operand_b(N, K, torch.empty)
        route = dispatch.call_spec(a, b)
        variants = {}
        if getattr(route, "b_phased", False) and RULE:
            tiles = -(-M // route.tile[0]) * -(-N // route.tile[1])
            split = max(s for s in range(1, 9) if s == 1 or (K >= STREAM_MIN_SLICE_K * s
                                                              and tiles * s <= PHASED_CLUSTER_BLOCKS[s]))
            base = route.replace(split_k=1, split_merge="workspace")
            if tiles <= 132 and split > 1:
                try:
                    variants["rule"] = base.replace(stages=stages(base, 2), split_k=split, split_merge="cluster")
                except ValueError:
                    pass
        elif getattr(route, "b_phased", False):
            base = route.replace(split_k=1, split_merge="workspace")
            two = base.replace(stages=stages(base, 2))
            for s in (1, 2, 3, 4):
                for name, spec in ((f"two/{s}", two), (f"one/{s}", base.replace(stages=stages(base, 1)))):
                    if name == "one/1":
                        continue
                    try:
                        variants[name] = spec if s == 1 else spec.replace(split_k=s, split_merge="cluster")
                    except ValueError:
                        pass
        plans.append(((M, N, K), route, variants))
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s.key: s for _, r, v in plans for s in (r, *v.values())}.values()))
    rows = []
    for (M, N, K), route, variants in plans:
        sets = max(2, min(24, math.ceil(3 * l2 / ((M * K + K * N + M * N) * 2))))
        A = [torch.randn(M, K, device="cuda").bfloat16() for _ in range(sets)]
        B = [operand_b(N, K, torch.randn) for _ in range(sets)]
        C = [torch.empty(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
        ref = A[0].double() @ B[0].double()
        row = {"shape": [M, N, K], "route_spec": route.to_json(), "variants": {n: s.to_json() for n, s in variants.items()}}
        ways = {"cublas": lambda a, b, c: torch.matmul(a, b, out=c), "route": lambda a, b, c: kgen.matmul(a, b, out=c)}
        for n, s in variants.items():
            k = kgen.build(s)
            ways[n] = (lambda a, b, c, k=k: k(a, b, out=c))
        for n, fn in ways.items():
            row[n + "_err"], row[n], _ = checked_graph_time(torch, fn, A, B, C, ref, 15)
        bad = [n for n in ways if not (row[n + "_err"] < 1e-2)]
        print(f"{M}x{N}x{K} tiles {-(-N // route.tile[1])} split {route.split_k} stages {route.stages}: "
              + " ".join(f"{n}:{row[n]:.1f}" for n in ways) + (f" BAD {bad}" if bad else ""), flush=True)
        rows.append(row)
        A = B = C = None
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "."), f"phased_split_{ORDER}_{SEED}.json"), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
