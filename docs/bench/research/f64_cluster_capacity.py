"""Clusters of the float64 mma.sync kernel's split-K merge (split_merge="cluster") that a GPU runs
at once (cuOccupancyMaxActiveClusters), by cluster size (2-8 K slices) and tile class: the float64
tiles kgen.matmul dispatches (64 x 64 three blocks an SM, the few-row tiles of 16-64 rows, the
96-row tiles, the 64 x 128 tiles), both entry points (16-byte copies, element copies). The
merge keeps its gains only where all of a product's clusters run at once (docs/matmul-record.md,
"Float64 K slices merged in a cluster"). PRECOMPILE=1 compiles the specs on the host (a stand-in
sm_90) and stops. Output: $OUT/f64_cluster_capacity.json, a line a spec."""
import json
import os
import sys

import kgen
from kgen.ops.tensorcore import TensorMatmul as T

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tensorcore16_stream_sweep import max_active_clusters  # noqa: E402  (this folder)

# Problems whose float64 default takes each tile class (the class is what is measured).
CLASSES = {"64x64": (206, 7074, 4104), "32x64": (30, 3943, 1983), "16x64": (10, 1841, 1409),
           "48x64": (44, 4512, 3286), "64x64 few": (60, 3073, 10735), "96x64": (88, 9159, 1374)}


def specs():
    out = []
    for name, (M, N, K) in CLASSES.items():
        base = T.default_spec({"M": M, "N": N, "K": K}, "float64").replace(layout_b="col", repack=False,
                                                                          split_merge="workspace", split_k=1)
        out += [(name, s, base.replace(split_k=s, split_merge="cluster")) for s in range(2, 9)]
    wide = T.wide_f64_spec({"M": 200, "N": 20000, "K": 512}).replace(layout_b="col", repack=False)
    return out + [("64x128", s, wide.replace(split_k=s, split_merge="cluster")) for s in range(2, 9)]


def main():
    todo = specs()
    if os.environ.get("PRECOMPILE") == "1":
        import concurrent.futures as cf
        with cf.ThreadPoolExecutor(2) as ex:
            list(ex.map(lambda t: kgen.compile(t[2], "sm_90"), todo))
        return
    import torch
    rows = []
    for name, s, spec in todo:
        k = kgen.build(spec)
        row = {"tile": name, "split": s, "min_blocks": spec.min_blocks, "shared": spec.shared_bytes}
        BM, BN, _ = spec.tile
        for entry in ("kgen_tc_matmul", "kgen_tc_matmul_elem"):
            n = max_active_clusters(k, BM * 8, BN * 40, 4096, entry)
            row[entry] = {"clusters": n, "blocks": n * s}
        rows.append(row)
        print(name, s, spec.min_blocks, row["kgen_tc_matmul"], row["kgen_tc_matmul_elem"], flush=True)
    out = {"device": torch.cuda.get_device_name(), "rows": rows}
    with open(os.path.join(os.environ.get("OUT", "."), "f64_cluster_capacity.json"), "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
