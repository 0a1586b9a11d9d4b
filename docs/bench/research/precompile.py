"""Compile on the host (no GPU) the cubins a device run will load, into KGEN_CACHE_DIR, for a
stand-in H100 (sm_90, 132 SMs), so the run spends its time timing rather than compiling.

  python docs/bench/research/precompile.py --shapes-file F [F ...]        # dtype:MxNxK:layout lists
  python docs/bench/research/precompile.py --draw 10:17-256:99801 [--draw ...] --dtype float64
      # kgen bench calls' draw (--random 10 --rows 17-256 --seed 99801), both weight orders

For each product: the specs kgen.matmul launches (tune.ahead.compile_ahead), and where the spec
is a float64 sm_90 tile (m16n8k16 or m16n8k8), the same spec with each of env VARIANTS' replacements, as
mma_whole_tiles.py builds them ("name:field=value,...;...", variant_spec); a variant with
fewcols applies whatever spec dispatch gives the product."""
import argparse
import concurrent.futures
import os

import numpy as np

import kgen
from kgen.bench.calls import random_matmul_shapes
from kgen.core.spec import SpecError
from kgen.tune import ahead, dispatch


def field_value(text: str):
    if "/" in text:
        return tuple(int(v) for v in text.split("/"))
    if text in ("True", "False"):
        return text == "True"
    return int(text) if text.isdigit() else text


def variants() -> list[dict]:
    return [{f.split("=")[0]: field_value(f.split("=")[1]) for f in v.split(":")[1].split(",")}
            for v in os.environ.get("VARIANTS", "").split(";") if v]


def variant_applies(spec, fields: dict) -> bool:
    """Whether a VARIANTS entry replaces anything in `spec`: the spec itself (no fields) and
    fewcols apply to any spec, other fields to a float64 sm_90 tile (m16n8k16 or m16n8k8)."""
    return not fields or "fewcols" in fields or getattr(spec, "mma_shape", "") in ("m16n8k16", "m16n8k8")


def variant_spec(spec, fields: dict, M: int, N: int, K: int, sms: int = 132):
    """spec with a VARIANTS entry's fields replaced. Five fields name no spec field: fewrows=R
    starts from few_rows_f64_spec with at most R rows a tile (in spec's operand orders), fewcols=BM
    from few_columns_f64_spec with BM rows a tile (the same), wrows=32
    gives a tile of a multiple of 32 rows 32 x 32 warp tiles, bk sets the tile's K depth alone
    (BM and BN kept), and resplit=1 splits K again for the new tile and blocks an SM as the
    float64 default's rule would (wave_split over sms x min_blocks slots). None where the
    fields do not apply to the spec (its validation refuses them)."""
    from kgen.ops.tensorcore import F64_TENSOR_MAX_ROWS, TensorMatmul, c_tiles, wave_split
    fields = dict(fields)
    if "fewcols" in fields:
        # The few-column float64 tiles of that many rows a tile, in the dispatched spec's orders
        # (which may be the SIMT tiles'); a contiguous A of odd K (the large operand) read in
        # place, as dispatch's float64 overrides ask.
        spec = TensorMatmul.few_columns_f64_spec({"M": M, "N": N, "K": K}, rows_tile=fields.pop("fewcols")).replace(
            layout_a=spec.layout_a, layout_b=spec.layout_b, repack=K % 2 == 0)
    if "fewrows" in fields:
        # The few-row float64 tiles of up to that many rows a tile, in the dispatched spec's orders.
        spec = TensorMatmul.few_rows_f64_spec({"M": M, "N": N, "K": K}, max_rows=fields.pop("fewrows")).replace(
            layout_a=spec.layout_a, layout_b=spec.layout_b, repack=spec.repack)
    if fields.pop("wrows", 0) == 32 and spec.tile[0] % 32 == 0:
        fields["warp_tile"] = (32, 32)
    if "bk" in fields:
        fields["tile"] = (*spec.tile[:2], fields.pop("bk"))
    resplit = fields.pop("resplit", 0)
    try:
        out = spec.replace(**fields)
    except SpecError:   # a field that does not apply to this spec (repack_a with repack on): no variant
        return None
    if resplit:
        tiles = c_tiles(M, N, out.tile[0], out.tile[1])
        out = out.replace(split_k=wave_split(tiles, sms * max(1, out.min_blocks), K,
                                             whole_waves=M <= F64_TENSOR_MAX_ROWS))
    return out


def strided(rows: int, cols: int, row_step: int, col_step: int, item: int):
    """A zero-copy array of the shape and strides a product's operand has (dispatch reads only
    those and the dtype)."""
    one = np.zeros(1, dtype=f"f{item}")
    return np.lib.stride_tricks.as_strided(one, (rows, cols), (row_step * item, col_step * item))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes-file", nargs="*", default=[])
    ap.add_argument("--draw", action="append", default=[], help="COUNT:LO-HI:SEED, kgen bench calls' draw")
    ap.add_argument("--dtype", default="float64")
    args = ap.parse_args()
    shapes = []
    for path in args.shapes_file:
        for s in open(path).read().strip().split(","):
            dtype, mnk, layout = s.split(":")
            M, N, K = map(int, mnk.split("x"))
            shapes.append((dtype, M, N, K, layout))
    for draw in args.draw:
        count, rows, seed = draw.split(":")
        lo, hi = map(int, rows.split("-"))
        for M, N, K in random_matmul_shapes(int(count), int(seed), (lo, hi)):
            shapes += [(args.dtype, M, N, K, "row"), (args.dtype, M, N, K, "col")]
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    prods = [ahead.Product(M, N, K, d, lay == "col") for d, M, N, K, lay in shapes]
    print("dispatched specs compiled:", ahead.compile_ahead(prods, device=dev, workers=2, db=False).compiled)
    todo = set()
    for dtype, M, N, K, layout in shapes:
        item = 8 if dtype == "float64" else 4
        A = strided(M, K, K, 1, item)
        B = strided(K, N, 1, K, item) if layout == "col" else strided(K, N, N, 1, item)
        spec = dispatch.call_spec(A, B, device=dev, db=False)
        for fields in variants():
            if variant_applies(spec, fields):
                todo.add(variant_spec(spec, fields, M, N, K))
    todo.discard(None)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        list(pool.map(kgen.compile, todo))
    print("variants compiled:", len(todo))


if __name__ == "__main__":
    main()
