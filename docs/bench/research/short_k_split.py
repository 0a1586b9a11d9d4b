"""float32 products (TF32 off) of a short K against a large output: which form runs them fastest.
Device time of a CUDA graph over operands and outputs rotated past L2, every result first checked
against float64 on a NaN-poisoned output, beside what kgen.matmul runs (`kgen`), the tiled SIMT
kernels' own pick for the product (`simt`: the shipped table or the family rule) and cuBLAS SGEMM
(torch.mm, TF32 off).

  SEED=110001 COUNT=12 python docs/bench/research/short_k_split.py                 # on a GPU
  SEED=110001 COUNT=12 python docs/bench/research/short_k_split.py --compile-only  # host: fill the cache

Shapes: M and N log-uniform in MNMIN-MNMAX (512-8192), K log-uniform in KMIN-KMAX (16-160), B
row-major or W.t() in turn, drawn with random.Random(f"short K split {SEED}"); with TILES_BELOW=T
only products dispatch gives the mma.sync split with fewer than T tiles of 64 x 64 (drawn until
COUNT are found); or SHAPES=MxNxK:row|col,... as given.
Variants (VARIANTS): three TF32 products split in registers on mma.sync in 64 x 64 tiles (stages,
blocks an SM, K depth) and in 64 x 32 or 32 x 64 tiles of two or four warps; the wgmma split as
wgmma_default_spec gives it (`wgsplit`: hi/lo copies, one TF32 product of inner size 3K; at K
17-89, seed 110001, it ran 0.54-0.56x cuBLAS); and the SIMT tiles in 64-row blocks of 128
threads, four an SM.
ONLY=name,...: those variants alone, and the SIMT tiles' pick (`simt`) only if named there.
Output: $OUT/short_k_split_<SEED>.json and a line a product."""
import concurrent.futures
import json
import math
import os
import random
import sys

import kgen
from kgen.ops.tensorcore import TensorMatmul, c_tiles, split_mma_suits, wave_split

SEED = int(os.environ.get("SEED", "110001"))
COUNT = int(os.environ.get("COUNT", "12"))
KMIN = int(os.environ.get("KMIN", "16"))
KMAX = int(os.environ.get("KMAX", "160"))
ONLY = [n for n in os.environ.get("ONLY", "").split(",") if n]
MNMIN = int(os.environ.get("MNMIN", "512"))
MNMAX = int(os.environ.get("MNMAX", "8192"))
TILES_BELOW = int(os.environ.get("TILES_BELOW", "0"))
SMS = 132


def shapes() -> list[tuple[int, int, int, str]]:
    given = [s for s in os.environ.get("SHAPES", "").split(",") if s]
    if given:
        out = []
        for s in given:
            mnk, layout = s.split(":")
            M, N, K = (int(v) for v in mnk.split("x"))
            out.append((M, N, K, layout))
        return out
    rng = random.Random(f"short K split {SEED}")

    def logu(lo, hi):
        return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))

    out = []
    for _ in range(1_000_000):
        if len(out) == COUNT:
            return out
        M, N, K = logu(MNMIN, MNMAX), logu(MNMIN, MNMAX), logu(KMIN, KMAX)
        if not TILES_BELOW or (split_mma_suits(M, N, K) and c_tiles(M, N, 64, 64) < TILES_BELOW):
            out.append((M, N, K, ("row", "col")[len(out) % 2]))
    raise SystemExit(f"only {len(out)} of {COUNT} products in a million draws have the mma.sync split and fewer "
                     f"than TILES_BELOW={TILES_BELOW} tiles in M, N {MNMIN}-{MNMAX}, K {KMIN}-{KMAX}")


def _mma(M, N, K, layout, tile, warp_tile, stages, min_blocks):
    spec = TensorMatmul(dtype="float32", tf32=True, split_tf32=True, smem_layout="pad", repack=False,
                        layout_b=layout, tile=tile, warp_tile=warp_tile, stages=stages, min_blocks=min_blocks)
    return spec.replace(split_k=wave_split(c_tiles(M, N, tile[0], tile[1]), SMS * min_blocks, K))


def _wgmma(M, N, K, layout, **fields):
    p = TensorMatmul.normalize_problem({"M": M, "N": N, "K": K})
    return TensorMatmul.wgmma_default_spec(p, "float32", split_tf32=True).replace(layout_b=layout, **fields)


def _simt(M, N, K, layout, tile, thread_tile, warp_tile, stages, min_blocks):
    from kgen.ops.matmul import Matmul

    return Matmul(dtype="float32", shared_memory=True, vector_loads=True, smem_pad=4, async_copy=True,
                  interior_fast_path=True, repack=False, layout_b=layout, tile=tile, thread_tile=thread_tile,
                  warp_tile=warp_tile, stages=stages, min_blocks=min_blocks)


VARIANTS = {
    "mma64": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 64, 32), (32, 32), 3, 3),
    "mma64s2b4": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 64, 32), (32, 32), 2, 4),
    "mma64s2b3": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 64, 32), (32, 32), 2, 3),
    "mma64k16b4": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 64, 16), (32, 32), 3, 4),
    "mma64k16b3": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 64, 16), (32, 32), 3, 3),
    "mma64k16s4b4": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 64, 16), (32, 32), 4, 4),
    "mma64x32b4": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 32, 32), (32, 32), 3, 4),
    "mma64x32b6": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 32, 32), (32, 32), 3, 6),
    "mma64x32w4": lambda M, N, K, lay: _mma(M, N, K, lay, (64, 32, 32), (32, 16), 3, 4),
    "mma32x64b4": lambda M, N, K, lay: _mma(M, N, K, lay, (32, 64, 32), (32, 32), 3, 4),
    "wgsplit": lambda M, N, K, lay: _wgmma(M, N, K, lay),
    "simt64_8x4": lambda M, N, K, lay: _simt(M, N, K, lay, (64, 64, 8), (8, 4), (64, 16), 3, 4),
    "simt64_8x4w": lambda M, N, K, lay: _simt(M, N, K, lay, (64, 64, 8), (8, 4), (32, 32), 3, 4),
    "simt64k16_8x4": lambda M, N, K, lay: _simt(M, N, K, lay, (64, 64, 16), (8, 4), (64, 16), 3, 4),
    "simt64x128_8x8": lambda M, N, K, lay: _simt(M, N, K, lay, (64, 128, 8), (8, 8), (64, 32), 3, 4),
}


def variant_names() -> list[str]:
    return [n for n in VARIANTS if not ONLY or n in ONLY]


def variant_specs(M, N, K, layout) -> dict:
    return {name: VARIANTS[name](M, N, K, layout) for name in variant_names()}


def compile_only() -> None:
    todo = {s for M, N, K, layout in shapes() for s in variant_specs(M, N, K, layout).values()}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(kgen.compile, todo))
    print("variants compiled:", len(todo))


def simt_spec(A, B):
    """The tiled SIMT family's own pick for this call (what dispatch ran before the split)."""
    from kgen.ops.matmul import Matmul
    from kgen.tune import dispatch

    name, problem, _ = dispatch._product_of(A, B)
    overrides = dispatch.call_overrides(A, B, Matmul, name, False)
    return dispatch.resolve_spec(Matmul, problem, name, overrides, db=False)


def main() -> None:
    import torch

    from kgen.bench.skinny import Operands, checked_graph_time
    from kgen.tune import dispatch

    torch.backends.cuda.matmul.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    out = {"device": torch.cuda.get_device_name(), "seed": SEED, "variants": variant_names(), "rows": []}
    with_simt = not ONLY or "simt" in ONLY
    names = ["kgen", *(["simt"] if with_simt else []), "cublas", *variant_names()]
    for M, N, K, layout in shapes():
        ops = Operands(torch, M, N, K, "float32", layout, l2)
        ref = ops.A[0].double() @ ops.B[0].double()
        row = {"shape": [M, N, K], "layout": layout, "spec": dispatch.call_spec(ops.A[0], ops.B[0]).to_json()}
        ways = [("kgen", lambda a, b, c: kgen.matmul(a, b, out=c)),
                ("cublas", lambda a, b, c: torch.mm(a, b, out=c))]
        if with_simt:
            simt = simt_spec(ops.A[0], ops.B[0])
            row["simt_spec"] = simt.to_json()
            simt_kernel = kgen.build(simt)
            ways.append(("simt", lambda a, b, c, k=simt_kernel: k(a, b, out=c)))
        for name, spec in variant_specs(M, N, K, layout).items():
            try:
                k = kgen.build(spec)
            except Exception as exc:  # noqa: BLE001 - a variant this shape rules out is reported
                row[name + "_error"] = str(exc)[:200]
                continue
            ways.append((name, lambda a, b, c, k=k: k(a, b, out=c)))
        for name, fn in ways:
            err, us, _ = checked_graph_time(torch, fn, ops.A, ops.B, ops.C, ref, 15)
            row[name + "_us"], row[name + "_err"] = us, err
        out["rows"].append(row)
        done = [n for n in names if n + "_us" in row]
        best = min(done, key=lambda n: row[n + "_us"])
        print(f"{M}x{N}x{K} {layout}: " + " ".join(f"{n} {row[n + '_us']:.1f}" for n in done)
              + f"; best {best} ({row['cublas_us'] / row[best + '_us']:.2f}x cuBLAS, err {row[best + '_err']:.1e})",
              flush=True)
        del ops
        torch.cuda.empty_cache()
        with open(os.path.join(os.environ.get("OUT", "."), f"short_k_split_{SEED}.json"), "w") as f:
            json.dump(out, f, indent=1)
    for name in names:
        r = [row["cublas_us"] / row[name + "_us"] for row in out["rows"] if name + "_us" in row]
        if r:
            print(f"{name}: {math.exp(sum(map(math.log, r)) / len(r)):.3f}x cuBLAS over {len(r)} "
                  f"({min(r):.2f}-{max(r):.2f}x); largest error "
                  f"{max(row[name + '_err'] for row in out['rows'] if name + '_err' in row):.1e}")


if __name__ == "__main__":
    compile_only() if "--compile-only" in sys.argv else main()
