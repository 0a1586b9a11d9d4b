"""Try wider thread tiles (8x16, 16x8: 128 accumulators a thread, one 256-thread block per SM)
against cuBLAS at the large square shapes; all specs are compiled in parallel first."""
import concurrent.futures as cf
import json
import sys

import kgen
from kgen.bench import matmul as bench_matmul
from kgen.core import runtime

base = dict(shared_memory=True, vector_loads=True, smem_pad=4)
specs = []
for tile, tt, warps in [((128, 256, 8), (8, 16), [(32, 128), (64, 64), (128, 32)]),
                        ((256, 128, 8), (16, 8), [(64, 64), (128, 32), (32, 128)]),
                        ((128, 256, 16), (8, 16), [(64, 64)])]:
    for wt in warps:
        for async_copy, stages in ((True, 2), (True, 3), (True, 4), (False, 2)):
            try:
                specs.append(kgen.Matmul(tile=tile, thread_tile=tt, warp_tile=wt, stages=stages,
                                         async_copy=async_copy, **base))
            except ValueError as exc:
                print("skip", tile, tt, wt, stages, exc)
runtime.driver()
arch = runtime.device_arch()
with cf.ThreadPoolExecutor(16) as ex:
    list(ex.map(lambda s: kgen.compile(s, arch), specs))
shapes = [tuple(int(v) for v in a.split("x")) for a in sys.argv[2:]] or [(4096, 4096, 4096), (8192, 8192, 8192)]
record = bench_matmul.run(shapes, baselines=False, extra_specs=specs, repeats=15)
with open(sys.argv[1], "w") as fh:
    json.dump(record, fh, indent=1)
