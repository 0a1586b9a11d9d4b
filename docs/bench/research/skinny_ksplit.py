"""float32 skinny products of 1-6 rows (the SIMT forms) against weights of 16 MB or more: device
time of bound launches over rotated weights (median of 7 batches) with the K split fixed
(k_split 1-24) and with the default's wave-fitted split, both storage orders, cuBLAS beside.

    python skinny_ksplit.py SEED COUNT      # output: $OUT/ksplit_SEED.json"""

import concurrent.futures as cf, json, math, os, random, sys
import torch, kgen
from kgen.bench.skinny import time_batched
from kgen.ops.skinny import Skinny

OUT = os.environ.get("OUT", ".")
KS = [1, 2, 3, 4, 6, 8, 12, 16, 24]


def main():
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    shapes = []
    while len(shapes) < n:
        M = rng.randint(1, 6)
        N, K = (int(2 ** rng.uniform(10, 14)) for _ in range(2))
        if N * K * 4 < 16e6:
            continue
        shapes.append((M, N, K))
    torch.backends.cuda.matmul.allow_tf32 = False
    specs = {}
    for M, N, K in shapes:
        d = Skinny.default_spec({"M": M, "N": N, "K": K}, "float32")
        specs[(M, N, K)] = [d] + [d.replace(k_split=k) for k in KS]
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {s for v in specs.values() for s in v}))
    rows = []
    for M, N, K in shapes:
        copies = max(2, -(-200_000_000 // (N * K * 4)))
        for order in ("col", "row"):
            Ws = [
                torch.randn(N, K, device="cuda").t() if order == "col" else torch.randn(K, N, device="cuda")
                for _ in range(copies)
            ]
            xs = [torch.randn(M, K, device="cuda") for _ in range(copies)]
            Cs = [torch.empty(M, N, device="cuda") for _ in range(copies)]
            row = {"M": M, "N": N, "K": K, "order": order}
            row["cublas"] = time_batched(
                torch, [lambda i=i: torch.matmul(xs[i], Ws[i], out=Cs[i]) for i in range(copies)], 7, max(copies, 30)
            )
            for s in specs[(M, N, K)]:
                k = kgen.build(s)
                bound = [k.bind(xs[i], Ws[i], Cs[i]) for i in range(copies)]
                t = time_batched(torch, bound, 7, max(copies, 30))
                name = f"ks{s.k_split}"
                row[name] = t
                if s.k_split == 0:
                    row["default_splits"] = list(k._plans.values())[-1].splits
            rows.append(row)
            best = min(KS, key=lambda q: row[f"ks{q}"])
            print(
                f"{order} {M}x{N}x{K}: cuBLAS {row['cublas']:.1f} default {row['ks0']:.1f} (splits {row['default_splits']}) "
                f"best ks{best} {row[f'ks{best}']:.1f} | " + " ".join(f"{q}:{row[f'ks{q}']:.0f}" for q in KS),
                flush=True,
            )
            del Ws, xs, Cs
    json.dump(
        {"device": torch.cuda.get_device_name(), "seed": seed, "rows": rows},
        open(f"{OUT}/ksplit_{seed}.json", "w"),
        indent=1,
    )


if __name__ == "__main__":
    main()
