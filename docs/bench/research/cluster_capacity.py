"""Clusters of the swap kernel's split-K merge that run at once (cuOccupancyMaxActiveClusters),
by cluster size, ring (one or two blocks an SM) and tile."""
import json, os, sys
sys.path.insert(0, "docs/bench/research")
import kgen
from kgen.ops.tensorcore import TensorMatmul as T, wgmma_ring_stages
from tensorcore16_stream_sweep import max_active_clusters
out = {}
for BM in (8, 32, 64, 128, 192):
    for BN in (64, 128):
        for per_sm in (1, 2):
            for s in range(2, 9):
                try:
                    spec = T(dtype="bfloat16", tile=(BM, BN, 64), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN, per_sm),
                             instruction="wgmma", swap_ab=True, split_k=s, split_merge="cluster", layout_b="col")
                except ValueError:
                    continue
                k = kgen.build(spec)
                n = max_active_clusters(k, BM, 64 * 40, 64 * 64 * s)
                out[f"{BM}/{BN}/{per_sm}/{s}"] = {"clusters": n, "blocks": n * s, "shared": spec.shared_bytes}
                print(BM, BN, per_sm, s, n, n * s, spec.shared_bytes, flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "capacity.json"), "w"), indent=1)
