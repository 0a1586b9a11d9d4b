"""bfloat16 products of 65-256 rows, both storage orders of B: the default against
TensorMatmul.stream_spec, general_wgmma_spec and cuBLAS, and per SET:
  narrow  (default) narrow weights (24-66 tiles of 64 columns), where the default may run A's
          rows as the wgmma N; output $OUT/narrow.json;
  half    wide weights on the streaming tiles (several 64-row tiles): the streaming spec with a
          ring half as deep (two blocks an SM) and 1-6 K slices in a workspace; output
          $OUT/tall2.json.
Device time from a CUDA graph with the same operands every call (from L2) and with operands
rotated past L2 (from HBM); each result checked against float64 first."""
import json
import os

import torch
from swap_fill_sweep import sweep  # this folder: the scripts run from it or with it on the path

from kgen.ops.tensorcore import TensorMatmul as T
from kgen.ops.tensorcore import wgmma_ring_stages

SET = os.environ.get("SET", "narrow")
SHAPES = {
    "narrow": [(128, 4096, 4096), (256, 4096, 4096), (96, 4096, 4096), (100, 3072, 4096), (200, 2048, 8192),
               (80, 4096, 11008), (150, 3584, 3584), (70, 2560, 2560), (240, 1536, 6144), (180, 4224, 1536)],
    "half": [(161, 3008, 10560), (126, 6784, 5760), (146, 4672, 7936), (105, 6464, 7936), (141, 2624, 13056),
             (159, 4224, 3712), (97, 8192, 1216), (66, 14144, 2560), (200, 7040, 13312), (88, 4160, 9472)],
}[SET]


def variants(M, N, K, order):
    p = {"M": M, "N": N, "K": K}
    stream = T.stream_spec(p, "bfloat16").replace(layout_b=order)
    out = {"default": T.default_spec(p, "bfloat16").replace(layout_b=order), "stream": stream,
           "general": T.general_wgmma_spec(p, "bfloat16").replace(layout_b=order)}
    if SET == "half":   # two blocks an SM, more K slices in a workspace
        BM, BN, _ = stream.tile
        half = stream.replace(stages=wgmma_ring_stages(BM, BN, 2), split_merge="workspace")
        tiles = -(-M // BM) * -(-N // BN)
        for s in (1, 2, 3, 4, 6):
            if tiles * s <= 264 and K >= 256 * s:
                out[f"half/{s}"] = half.replace(split_k=s)
    return out


def main():
    cases = [((M, N, K), order, variants(M, N, K, order)) for M, N, K in SHAPES for order in ("col", "row")]
    rows = []
    for row, ways in sweep(torch, cases, 15):
        rows.append(row)
        (M, N, K), order = row["shape"], row["order"]
        print(f"{M}x{N}x{K} {order}: " + "  ".join(f"{n} {row[n + '_warm']:.1f}/{row[n + '_cold']:.1f}" for n in ways)
              + f"  err {max(row[n + '_err'] for n in ways):.1e}", flush=True)
    name = "narrow.json" if SET == "narrow" else "tall2.json"
    with open(os.path.join(os.environ["OUT"], name), "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f)


if __name__ == "__main__":
    main()
