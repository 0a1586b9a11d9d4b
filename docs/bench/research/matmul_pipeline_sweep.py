"""Measure the fields added in the third round against the specs they would replace, per
shape, in one run: prefetch_fragments (register fragments double-buffered across the tile
barrier), repack (unaligned operands copied to an aligned buffer for the vector kernel) and
tail_split_k (a partial last wave computed with K split). All specs compile in parallel
first; every spec is checked against float64 before it is timed (kgen.bench.matmul.run).

    python3 docs/bench/research/matmul_pipeline_sweep.py ROUND OUT.json [MxNxK ...]

Round 1 tried the three fields on the specs of the bench table; round 2 (after round 1
showed prefetch_fragments slower everywhere) tries 8x16 thread tiles in 128x128 blocks of
128 threads, two blocks per SM, and the repack and tail launches without the prefetch.
"""
import concurrent.futures as cf
import json
import sys

import kgen
from kgen.bench import matmul as bench_matmul
from kgen.core import runtime
from kgen.bench.matmul import _ASYNC, _F32, _WIDE

PF = dict(prefetch_fragments=True)
_REG2 = dict(tile=(64, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), stages=2, min_blocks=4, **_F32)
_SKINNY = dict(tile=(64, 64, 16), thread_tile=(8, 4), warp_tile=(32, 32), stages=2, min_blocks=4, split_k=8, **_F32)
_WIDE_T = dict(_WIDE, tile=(256, 128, 8), thread_tile=(16, 8), warp_tile=(64, 64))
_BIG = [dict(_WIDE), dict(_WIDE, **PF), dict(_WIDE, stages=3, **PF), dict(_WIDE, tile=(128, 256, 16), stages=3, **PF),
        dict(_WIDE_T, **PF), dict(_ASYNC, min_blocks=2), dict(_ASYNC, min_blocks=2, **PF),
        dict(_WIDE, tail_split_k=4, **PF), dict(_ASYNC, min_blocks=2, tail_split_k=4, **PF)]
ROUND1 = {
    (1024, 1024, 1024): [dict(_ASYNC, min_blocks=2, split_k=4), dict(_ASYNC, min_blocks=2, split_k=4, **PF),
                         dict(_WIDE, split_k=8, **PF), dict(_ASYNC, min_blocks=2, split_k=2, **PF)],
    (2048, 2048, 2048): _BIG + [dict(_ASYNC, min_blocks=2, split_k=2, **PF)],
    (4096, 4096, 4096): _BIG,
    (8192, 8192, 8192): [dict(_WIDE), dict(_WIDE, **PF), dict(_WIDE, stages=3, **PF), dict(_WIDE_T, **PF),
                         dict(_WIDE, tail_split_k=4, **PF)],
    (1000, 1000, 1000): [dict(_ASYNC, min_blocks=2, split_k=4), dict(_ASYNC, min_blocks=2, split_k=4, **PF),
                         dict(_ASYNC, min_blocks=2, split_k=4, repack=True, **PF)],
    (4097, 4097, 4097): [dict(_ASYNC), dict(_WIDE, **PF), dict(_WIDE, repack=True, **PF),
                         dict(_WIDE, repack=True, tail_split_k=4, **PF), dict(_WIDE, repack=True, split_k=2, **PF),
                         dict(_ASYNC, min_blocks=2, repack=True, **PF),
                         dict(_ASYNC, min_blocks=2, repack=True, tail_split_k=4, **PF)],
    (3000, 5000, 700): [dict(_REG2), dict(_REG2, **PF), dict(_REG2, min_blocks=3, **PF), dict(_WIDE, **PF),
                        dict(_ASYNC, min_blocks=2, **PF), dict(_ASYNC, min_blocks=2, tail_split_k=4, **PF),
                        dict(_WIDE, tail_split_k=4, **PF)],
    (127, 4096, 4096): [dict(_ASYNC, min_blocks=2, split_k=8), dict(_ASYNC, min_blocks=2, split_k=8, **PF),
                        dict(_WIDE, split_k=8, **PF), dict(_WIDE, split_k=4, **PF), dict(_WIDE, split_k=16, **PF),
                        dict(_ASYNC, tile=(128, 64, 8), thread_tile=(8, 4), warp_tile=(32, 32), min_blocks=2,
                             split_k=8, **PF)],
    (4096, 64, 4096): [dict(_SKINNY), dict(_SKINNY, **PF), dict(_SKINNY, min_blocks=3, **PF),
                       dict(_SKINNY, async_copy=True, stages=3, **PF)],
}


# 8x16 (16x8) thread tiles in a 128x128 block: 128 threads, two blocks per SM at up to 255
# registers, so one block's barrier wait is covered by the other block's FFMAs.
_DUO = dict(_F32, tile=(128, 128, 8), thread_tile=(8, 16), warp_tile=(32, 128), stages=4, async_copy=True,
            min_blocks=2)
_DUO_T = dict(_DUO, thread_tile=(16, 8), warp_tile=(64, 64))
_BIG2 = [dict(_WIDE), dict(_DUO), dict(_DUO, stages=3), dict(_DUO, warp_tile=(64, 64)), dict(_DUO_T),
         dict(_DUO, tile=(128, 128, 16), stages=3), dict(_DUO, tile=(64, 256, 8))]
ROUND2 = {
    (1024, 1024, 1024): [dict(_DUO, split_k=4), dict(_DUO, split_k=2), dict(_DUO_T, split_k=4)],
    (2048, 2048, 2048): _BIG2,
    (4096, 4096, 4096): _BIG2,
    (8192, 8192, 8192): [dict(_WIDE), dict(_DUO), dict(_DUO_T), dict(_DUO, tile=(128, 128, 16), stages=3)],
    (1000, 1000, 1000): [dict(_DUO, split_k=4), dict(_DUO, split_k=4, repack=True)],
    (4097, 4097, 4097): [dict(_WIDE, repack=True, tail_split_k=4), dict(_ASYNC, min_blocks=2, repack=True,
                                                                      tail_split_k=4),
                         dict(_DUO, repack=True, tail_split_k=4), dict(_DUO_T, repack=True, tail_split_k=4),
                         dict(_DUO, repack=True), dict(_DUO, tail_split_k=4)],
    (3000, 5000, 700): [dict(_DUO), dict(_DUO, tail_split_k=4), dict(_DUO_T), dict(_DUO, stages=3),
                        dict(_WIDE, tail_split_k=4)],
    (127, 4096, 4096): [dict(_WIDE, split_k=8), dict(_WIDE, split_k=6), dict(_DUO, split_k=8),
                        dict(_DUO, split_k=4), dict(_DUO_T, split_k=8), dict(_DUO, split_k=8, stages=3)],
    (4096, 64, 4096): [dict(_SKINNY, split_k=16), dict(_SKINNY, split_k=4), dict(_DUO, tile=(128, 64, 8),
                       thread_tile=(8, 8), warp_tile=(32, 64), split_k=8, min_blocks=3)],
}
# Round 3: interior_fast_path (tiles inside the matrix copied without bounds arithmetic),
# on the best specs of rounds 1-2 and with BK = 16.
FAST = dict(interior_fast_path=True)
_W16 = dict(_WIDE, tile=(128, 256, 16), stages=3)
ROUND3 = {
    (1024, 1024, 1024): [dict(_ASYNC, min_blocks=2, split_k=4, **FAST), dict(_DUO_T, split_k=4, **FAST)],
    (2048, 2048, 2048): [dict(_WIDE, **FAST), dict(_W16, **FAST), dict(_W16, stages=4, **FAST), dict(_WIDE_T, **FAST),
                         dict(_WIDE, stages=3, **FAST)],
    (4096, 4096, 4096): [dict(_WIDE, **FAST), dict(_W16, **FAST), dict(_W16, stages=4, **FAST), dict(_WIDE_T, **FAST),
                         dict(_WIDE, stages=3, **FAST), dict(_ASYNC, min_blocks=2, **FAST)],
    (8192, 8192, 8192): [dict(_WIDE, **FAST), dict(_W16, **FAST), dict(_WIDE_T, **FAST)],
    (1000, 1000, 1000): [dict(_ASYNC, min_blocks=2, split_k=4, **FAST), dict(_DUO_T, split_k=4, **FAST)],
    (4097, 4097, 4097): [dict(_DUO_T, repack=True, tail_split_k=4, **FAST),
                         dict(_WIDE, repack=True, tail_split_k=4, **FAST),
                         dict(_ASYNC, min_blocks=2, repack=True, tail_split_k=4, **FAST),
                         dict(_W16, repack=True, tail_split_k=4, **FAST)],
    (3000, 5000, 700): [dict(_WIDE, tail_split_k=4, **FAST), dict(_W16, tail_split_k=4, **FAST),
                        dict(_REG2, **FAST)],
    (127, 4096, 4096): [dict(_WIDE, split_k=8, **FAST), dict(_W16, split_k=8, **FAST), dict(_WIDE, split_k=8),
                        dict(_WIDE, split_k=10, **FAST)],
    (4096, 64, 4096): [dict(_SKINNY, **FAST), dict(_SKINNY, split_k=6, **FAST)],
}
ROUNDS = {"1": ROUND1, "2": ROUND2, "3": ROUND3}


def main() -> None:
    CANDIDATES = ROUNDS[sys.argv[1]]
    out = sys.argv[2]
    wanted = [tuple(int(v) for v in a.split("x")) for a in sys.argv[3:]] or list(CANDIDATES)
    runtime.driver()
    arch = runtime.device_arch()
    specs = {shape: [kgen.Matmul(**kw) for kw in CANDIDATES[shape]] for shape in wanted}
    every = {s.key: s for ss in specs.values() for s in ss}
    with cf.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda s: kgen.compile(s, arch), every.values()))
    record = None
    for shape in wanted:
        part = bench_matmul.run([shape], baselines=False, extra_specs=specs[shape], repeats=15)
        if record is None:
            record = part
        else:
            record["shapes"] += part["shapes"]
        with open(out, "w") as fh:
            json.dump(record, fh, indent=1)


if __name__ == "__main__":
    main()
