"""Which SIMT matmul spec a float32 product of a short K wants: device time (a CUDA graph over
operands and outputs rotated past L2) of kgen.matmul's default (the shipped table's pick) and of
Matmul variants with more, smaller blocks an SM (tiles of 32-128, thread tiles of 4x4-8x8,
min_blocks 2-4, 2-3 stages), operands read in place (repack off), beside cuBLAS (torch.mm, TF32
off). Each result is first checked against float64 with the output NaN-poisoned.
Shapes: M, N log-uniform from 512 to 8192, K from 16 to KMAX (128), N odd half the time, drawn
with SEED (9501); COUNT of them (12). Output: $OUT/short_k_f32_<SEED>.json and a line a product."""
import os

from kgen.ops.matmul import Matmul

SEED = int(os.environ.get("SEED", "9501"))
COUNT = int(os.environ.get("COUNT", "12"))
KMAX = int(os.environ.get("KMAX", "128"))


def shapes():
    from short_k_tiles import short_k_shapes   # this folder: the 16-bit sweep's draw

    return short_k_shapes(SEED, COUNT, KMAX)


def variants():
    base = dict(shared_memory=True, vector_loads=True, smem_pad=4, async_copy=True, interior_fast_path=True)

    def v(tile, thread, warp, stages, mb, repack=False):
        return Matmul(dtype="float32", tile=tile, thread_tile=thread, warp_tile=warp, stages=stages, min_blocks=mb,
                      repack=repack, **base)

    return {"t64x64_4x4_b4": v((64, 64, 16), (4, 4), (16, 32), 2, 4),
            "t64x64_4x4_b4_rp": v((64, 64, 16), (4, 4), (16, 32), 2, 4, True),
            "t64x64_4x4_s3_b3": v((64, 64, 16), (4, 4), (16, 32), 3, 3),
            "t128x64_8x4_b2": v((128, 64, 16), (8, 4), (64, 16), 2, 2),
            "t64x128_4x8_b3": v((64, 128, 16), (4, 8), (16, 64), 2, 3),
            "t128x128_8x8_b2": v((128, 128, 8), (8, 8), (32, 64), 2, 2),
            "t128x128_8x8_b2_rp": v((128, 128, 8), (8, 8), (32, 64), 2, 2, True),
            "t128x128_8x8_k16_b1": v((128, 128, 16), (8, 8), (32, 64), 2, 1),
            "t32x128_4x8_b4": v((32, 128, 16), (4, 8), (16, 64), 2, 4),
            "t64x256_8x8_b1": v((64, 256, 16), (8, 8), (32, 64), 2, 1)}


def main():
    import torch

    from el_tiles import measure   # this folder: the same measurement

    torch.backends.cuda.matmul.allow_tf32 = False
    fixed = variants()
    measure([(shape, fixed) for shape in shapes()], "short_k_f32", SEED, "float32")


if __name__ == "__main__":
    main()
