"""The float32 wgmma skinny forms with and without the image launch (WG_DIRECT_MAX_COLUMN_TILES
forced to 0, then past every grid): each result checked against float64 (output poisoned), then
one call between CUDA events (host time included) of each, beside torch.matmul (cuBLAS, TF32
off), on COUNT shapes drawn in Skinny.wgmma_suits' range (17-512 rows, large side 128-16384, K
128-16384, up to 2^36 flops).

    python skinny_wgmma_direct.py SEED COUNT     # output: $OUT/direct_SEED.json"""

import concurrent.futures as cf, json, os, sys
import torch, kgen
import kgen.ops.skinny as sk
from kgen.bench.calls import _time_pair
from kgen.bench.results import geomean, poisoned_error
from kgen.ops.skinny import Skinny, tolerance
from wgmma_shapes import wgmma_shapes

OUT = os.environ.get("OUT", ".")


def main():
    seed, n = int(sys.argv[1]), int(sys.argv[2])
    SH = wgmma_shapes(seed, n, 2**36)
    torch.backends.cuda.matmul.allow_tf32 = False
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(kgen.compile, {Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}) for M, N, K, _ in SH}))
    rows, bad = [], 0
    for M, N, K, b in SH:
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(N, K, device="cuda").t() if b == "weights" else torch.randn(K, N, device="cuda")
        C = torch.empty(M, N, device="cuda")
        spec = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K})
        k = kgen.build(spec)
        ref = A.double() @ B.double()
        row = {"shape": [M, N, K, b]}
        cb = None
        for mode, thr in (("imaged", 0), ("direct", 10**9)):
            sk.WG_DIRECT_MAX_COLUMN_TILES = thr
            k._plans.clear()
            err = poisoned_error(lambda: k(A, B, out=C), C, ref)
            if not err <= tolerance("float32", K):
                bad += 1
                print("WRONG", mode, M, N, K, b, err, flush=True)
            plan = list(k._plans.values())[-1]
            row[mode + "_launches"] = [kind for kind, _, _ in plan.launches]
            row["col_tiles"] = next(l.grid for kind, l, _ in plan.launches if kind == "main")
            t = _time_pair(lambda: k(A, B, out=C), lambda: torch.matmul(A, B, out=C), 80.0)
            cb = t["peer_single"] if cb is None else min(cb, t["peer_single"])
            row[mode] = t["kgen_single"]
        row["cublas"] = cb
        rows.append(row)
        print(
            f"{M}x{N}x{K} {b} grid {row['col_tiles']}: cuBLAS {cb * 1e3:.1f}us imaged {cb / row['imaged']:.2f} direct {cb / row['direct']:.2f}",
            flush=True,
        )
    json.dump(
        {"device": torch.cuda.get_device_name(), "seed": seed, "rows": rows},
        open(f"{OUT}/direct_{seed}.json", "w"),
        indent=1,
    )
    print("wrong:", bad)


if __name__ == "__main__":
    main()
