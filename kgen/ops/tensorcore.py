"""Tensor-core matrix multiplication: C = alpha * A @ B + beta * C on the MMA units.

One spec class (TensorMatmul), one template (templates/tensorcore.cu.j2), one kernel class.
The kernels use the warp-level `mma.sync` instruction: m16n8k16 for float16 and bfloat16
(float32 accumulation), m16n8k8 TF32 for float32 inputs (only when the spec says tf32=True),
m8n8k4 for float64; operand tiles come through a cp.async pipeline into padded or
XOR-swizzled shared memory, 16-bit fragments through ldmatrix. On sm_90, instruction="wgmma"
selects the Hopper kernel for float16, bfloat16 and TF32: TMA copies into 128-byte swizzled
tiles, a producer warpgroup and one or two consumer warpgroups issuing wgmma.mma_async (the
default there). docs/tensorcore.md explains every field, docs/tensorcore-record.md what each was measured to do.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import struct
from typing import Any, ClassVar, NamedTuple

import numpy as np

from ..core import runtime
from ..core.compiler import arch_number
from ..core.kernel import Kernel, RepeatCall, TorchPlanMemo, build
from ..core.launch import MOST_SHARED, Launch, LaunchError, ensure_context, programmatic_launches
from ..core.runtime import ArrayError
from ..core.spec import Spec, SpecError, fail, register_family
from .matmul import (block_limit_reason, normalize_mnk, product_bucket, product_inputs, product_reference, product_work,
                     register_cap, stored_operand, tile_fit_reason)

# Shared memory a block may use on sm_80/sm_90 after opting in (227 KiB on Hopper).
MAX_SHARED_BYTES = 227 * 1024
ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
# Unit roundoff of each number format (half the gap between 1 and the next number).
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "tf32": 2.0 ** -11, "float32": 2.0 ** -24,
                 "float64": 2.0 ** -53}
# The smallest positive (subnormal) number of each output type.
SMALLEST_SUBNORMAL = {"float16": 2.0 ** -24, "bfloat16": 2.0 ** -133, "float32": 2.0 ** -149, "float64": 2.0 ** -1074}
# C types: (input as stored, the same bits as an unsigned integer).
_C_IN = {"float16": ("__half", "unsigned short"), "bfloat16": ("__nv_bfloat16", "unsigned short"),
         "float32": ("float", "unsigned int"), "float64": ("double", "unsigned long long")}
_C_OUT = {"float16": ("__half", "__half2", "f16"), "bfloat16": ("__nv_bfloat16", "__nv_bfloat162", "bf16"),
          "float32": ("float", "float2", "f32"), "float64": ("double", "double2", "f64")}
# torch's dtype names for the ones kgen knows.
_TORCH_NAMES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32",
                "torch.float64": "float64"}


def _mma_kind(dtype: str) -> str:
    return {"float16": "f16", "bfloat16": "bf16", "float32": "tf32", "float64": "f64"}[dtype]


# (M, N, K) of one MMA instruction per input type.
MMA_SHAPE = {"f16": (16, 8, 16), "bf16": (16, 8, 16), "tf32": (16, 8, 8), "f64": (8, 8, 4)}
# mma_shape values: the dtype's shape (""), and sm_90's 16-row float64 shapes.
F64_SHAPES = {"": MMA_SHAPE["f64"], "m16n8k16": (16, 8, 16), "m16n8k8": (16, 8, 8)}
INSTRUCTIONS = ("mma_sync", "wgmma")
# How the mma.sync kernel's edge blocks copy their k tiles (TensorMatmul.edge_copies), the default first.
EDGE_COPIES = ("clamped", "masked")
# Which MMAs the mma.sync kernel's blocks issue (TensorMatmul.edge_mma), the default first.
EDGE_MMA = ("all", "inside")
# Sizes the L2 may fetch around each of the mma.sync kernel's cp.async reads (PTX's L2 prefetch
# size qualifier, .L2::64B/128B/256B; TensorMatmul.l2_fetch); 0 leaves the qualifier out.
L2_FETCH_BYTES = (0, 64, 128, 256)
# Block tiles the wgmma default chooses among, and the SM count its wave estimate assumes.
_WGMMA_TILES = ((128, 256), (64, 256), (128, 128), (128, 64), (64, 128), (64, 64))
# 16-bit products of 129-192 rows whose tiles general_wgmma_spec's cost model picks as 64x256 or
# 128x256 (N too wide for the transposed and streaming tiles: a fused MLP or an output layer
# against a prefill chunk) take A's rows in one tile of 192 (three consumer warpgroups) where
# waves x TALL_BLOCK_COST[tile] says so: the time of one wave of blocks of each tile relative to
# 192 x 128 (5 stages; 192 x 192 in 4), measured on an H200 at 129-192 rows (bfloat16, 1 block an
# SM; docs/bench/research/wide_general_variants.py SET=rows192|rows192b, docs/tensorcore-record.md,
# "Tiles of 192 rows"). Two row tiles of 128 pad A to 256 rows and three of 64 read B three times
# over; one of 192 does neither. Of 32 products timed for the fit (seeds 20401-20422, model layers),
# on the 26 where its pick was timed it picked the fastest; held out (seed 20451, eight products)
# it ran 1.09-1.54x the cost model's tiles (0.68x to 0.86x cuBLAS).
TALL_ROWS = (129, 192)
TALL_BLOCK_COST = {(64, 256): 0.83, (128, 256): 1.26, (192, 128): 1.0, (192, 192): 1.33}
# A product whose C tiles pass whole waves of the SMs by a few leaves most SMs idle in its last
# wave, each of those few blocks running the whole of K. With wave_tail = s the whole waves run
# as one launch and the tiles past them as a second launch of the same tiles,
# K split s ways merged in clusters: F / 132 + 1 / s + WAVE_TAIL_COST waves of blocks where one
# launch takes ceil(tiles / 132). WAVE_TAIL_COST (what the second launch and its cluster sums
# cost beside a 1/s wave, a fraction of one wave) was fitted on 14 such pairs of 65-192 rows
# against N of 17152-50944, bfloat16, device time on an H200 (0.18-0.81, median 0.46;
# docs/bench/research/tail_wave_variants.py, docs/tensorcore-record.md "The last wave"). s: the most
# slices, up to 8, whose clusters all run at once (CLUSTER_WAVE_BLOCKS), each at least
# STREAM_MIN_SLICE_K deep. Applied to 16-bit products of WAVE_TAIL_ROWS rows in at most as many
# row tiles as WAVE_TAIL_ROW_TILES gives their rows (the kernel splits C's columns for any number):
# one at 65-192 rows, two (128 x 256 tiles) at 193-256, where it ran 1.09-1.38x the tree before on
# eight products (seed 20510) and 1.20x on eight drawn after the rule took it (seed 20516; 0.63x to
# 0.76x cuBLAS); general_wgmma_spec weighs it in its choice among the 192-row tiles.
WAVE_TAIL_ROWS = (65, 256)
WAVE_TAIL_COST = 0.45
WAVE_TAIL_ROW_TILES = ((192, 1), (256, 2))
_SMS = 132
# float16/bfloat16 products of at most STREAM_MAX_ROWS rows against N and K of at least
# STREAM_MIN_SIDE and a B of at least STREAM_MIN_BYTES are bound by reading B once, and the
# wgmma kernel runs them as a streaming kernel (stream_spec): 64-row tiles, as many TMA stages
# as fit (one block an SM), BN = 256 where 64 x 256 tiles fill at least half the SMs (else
# 128), and K split in the most of STREAM_SPLITS ways that keeps the blocks within one wave,
# each slice at least STREAM_MIN_SLICE_K deep. Fitted on 20 bfloat16 products of 1-256 rows
# in both storage orders of B (seed 92, N and K multiples of 64), device time on an H200:
# 0.97x the best of 8 splits x 3 tiles x 2 row tiles per shape; checked on 11 others of 1-64
# rows (seed 91): 0.98x their best. The bound on B, from public calls between events (two
# draws of bfloat16 products, on an H200 and an H100): from 16 MB the stream ran 0.73-0.95x
# cuBLAS where the general tiles ran 0.38-0.95x (20 products of 17-128 rows); on 3-10 MB the
# general tiles were faster on 5 of 8 (0.77-0.86x against 0.66-0.87x). Past 128 rows the two
# ran level (8 products: 0.64-1.02x against 0.65-0.98x), so the fitted 256 stands
# (docs/tensorcore-record.md, "Few rows"). Below 16 MB the stream also runs where the general tiles,
# before a K split, are fewer than half the SMs: with its K slices merged in clusters it ran
# 1.02-1.46x faster than them on the 9 such products of 6-90 rows of a draw of weights under
# 16 MB (device time, both storage orders, H100, seed 401), and 0.74-0.90x their speed on the
# 2 where they were 81 and 105 tiles.
STREAM_MAX_ROWS = 256
STREAM_MIN_SIDE = 1024
STREAM_MIN_BYTES = 16 << 20
STREAM_SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
STREAM_MIN_SLICE_K = 256
# Products of one row tile (at most 64 rows) split K into clusters (split_merge="cluster"):
# 2, 4 or 8 slices, the most whose clusters all run at once. Their sums merge in the same
# launch, which took 1.3-3.8 µs off the workspace's second kernel on 7 products of 2-59 rows
# (device time, H100, seed 312), and more slices of a workspace did not beat fewer in clusters
# (12x1792x6016: 15.0 µs with 8 in a workspace, 13.0 with 4 in clusters). Past one row tile
# the cluster merge ran slower (76 and 218 rows: +1.3 and +4.9 µs), and those keep the workspace.
# The stream runs only where its tiles are at most one a SM (stream_suits); past that (3-4
# row tiles of a wide weight) its second wave of blocks lost to the general tiles' single one
# (217x10496x1088: 25.7 µs against 21.6; as users call it 235x11776x2496, 168x12416x4096 and
# 206x10176x13696 ran 0.61-0.72x cuBLAS on the stream; H100).
STREAM_CLUSTER_SPLITS = (1, 2, 4, 8)
# CLUSTER_WAVE_BLOCKS[s]: blocks of the wgmma kernel, one an SM (198-230 KB of shared memory),
# that an H100 runs at once in clusters of s: cuOccupancyMaxActiveClusters x s, the same for
# every transposed tile measured (8-192 rows, 64 and 128 columns;
# docs/bench/swap16/cluster_capacity_h100.json).
CLUSTER_WAVE_BLOCKS = {2: 132, 3: 117, 4: 120, 5: 110, 6: 102, 7: 105, 8: 120}
# float16/bfloat16 products of at most SWAP_MAX_ROWS rows (A row-major, N and K of at least
# STREAM_MIN_SIDE) run with A's rows as the wgmma N (swap_ab, swap_spec): BM the rows rounded up
# to a multiple of 8 (the instruction's N steps by 8: no row padded past that), 64 columns a
# block (128 past 2 x 132 column tiles), the deepest ring one block an SM holds, or two blocks an
# SM (a ring half as deep) where the tiles pass the SMs, and K split into 2-8 slices merged in
# clusters, the most whose clusters all run at once (CLUSTER_WAVE_BLOCKS), each at least
# STREAM_MIN_SLICE_K deep. Device time on an H100, from L2 / from HBM (docs/tensorcore-record.md, "A's
# rows as the wgmma N"):
# - 1-64 rows, fitted on 16 bfloat16 products of 2-59 rows (seed 701, both storage orders)
#   against 24 variants each: 1.06x / 1.03x the fastest variant's time, 0.90x / 0.93x cuBLAS's
#   speed, where the 64-row streaming tiles and the skinny forms ran 0.64x / 0.78x;
# - rows rounded to 8 rather than to 8/16/32/64: 1.058x / 1.023x as fast over 80 products of
#   17-64 rows (seeds 9001, 9002, 9004, 9005), most where the rows just pass a power of two
#   (36x5568x1280: 6.8 µs against 9.1);
# - 65-256 rows against at most one wave of 64-column tiles (SWAP_WIDE_ROWS), before only against
#   narrow weights (the streaming and general tiles elsewhere): 1.10x / 1.07x as fast over 40
#   products of 65-256 rows (seeds 9006, 9007; the 10 wider ones kept their tiles, against
#   which the transposed tiles ran 0.95-1.03x, 0.90x at 165x11904x2304), 0.90x / 0.92x cuBLAS's speed,
#   0.98x the fastest of the 64/128-column, 1-8 slice variants; lowest 0.91x (254x5952x12032,
#   85.0 µs against the general tiles' 77.5); 195x3840x15936: 59.1 µs against 105.4 on the
#   streaming tiles (cuBLAS 59.6);
# - slices of 3, 5, 6 and 7 (the clusters' measured capacities) beside 2, 4 and 8: 1.00-1.03x
#   over the 1-64 row products above.
SWAP_MAX_ROWS = 256
SWAP_WIDE_ROWS = 64
SWAP_SPLITS = (1, 2, 3, 4, 5, 6, 7, 8)
# Where the transposed tiles of 64 columns pass the SMs (133-264 of them) swap_spec runs two
# blocks an SM with K whole. Where 128 columns a block, two blocks an SM, take K in at least
# SWAP_WIDE_MIN_SLICES slices whose clusters all run at once (PHASED_CLUSTER_BLOCKS: 133-158
# tiles of 64), those run instead. Device time on an H200 (CUDA graphs over operands rotated
# past L2, 16-bit, 1-64 rows; docs/tensorcore-record.md, "Past 132 tiles of 64 columns"): W.t(), 5
# fitted products 1.04-1.10x and 9 held out (seeds 15401/15402) 1.079x (geometric mean;
# 0.99-1.16x); the trees before and after on 12 more of either storage order, row sets
# included, 1.13x (0.90x at 1x8572x1120, 1.37x at 19x8832x7548). With 2 slices (159-176 tiles)
# 1.017x over 18 (0.98-1.09x): those keep K whole.
SWAP_WIDE_MIN_SLICES = 3
# 65-256 rows against at most one wave of 64-column tiles, K of at least SWAP_128_MIN_K: where
# tiles of 128 columns (two consumer warpgroups a block instead of one) with K in the most slices
# whose clusters all run at once make at least SWAP_128_MIN_GAIN times the blocks the 64-column
# ones do (67-78 tiles of 64 with K whole against 34-39 of 128 in three slices; 41-44 in two
# slices against 21-22 in five), swap_spec takes them. Device time on an H200 (16-bit, CUDA graphs
# over operands rotated past L2; docs/bench/research/tail_wave_variants.py SET=multiwave|swap128|
# heldout_swap128, seeds 21001-21062): of those products, the 17 of K 3392 or more ran 1.104x
# the 64-column tiles (0.99-1.50x; 218x4440x3544: 23.7 µs against 35.6, cuBLAS 23.9; the 10
# drawn after the first fit 1.074x), the 10 below 3072 0.98x (0.84-1.31x; the 7 drawn after the
# first fit all slower, 0.90x); held out after the rule was fixed (seeds 21071/21072) 1.089x
# (W.t(), 10 products) and 1.063x (row-major, 6). Where both make as many blocks the 128-column
# tiles ran 0.82-1.20x (23 products; held out where they make three quarters of the blocks or
# more in K slices 4000 deep or more, 1.007x over 15, seeds 21081/21082), at 33-64 rows
# 0.96-1.00x: those keep 64 columns.
SWAP_128_MIN_GAIN = 1.25
SWAP_128_MIN_K = 3072
# 65-256 rows against one wave of 64-column tiles with K whole (the rule above left them there)
# and K of at least SWAP_LONG_K: tiles of 128 columns with K in the most slices whose blocks all
# run at once (merged in clusters where those all run at once, else in a workspace). Each
# column tile re-reads all of A's rows from L2, so halving the column tiles halves that traffic,
# and the slices bring the blocks back to the SMs' number. Device time on an H200 (bfloat16, W.t(),
# docs/bench/research/stream_k_variants.py SPLIT=1, seed 24101; 18 products of 65-240 rows, N
# 4096-8192): at K of 13824-27648 1.04-1.22x the 64-column tiles (163x5120x27648: 117.7 -> 97.4
# µs, cuBLAS 96.3); at K of 2304-8256 they ran 0.88-1.06x (most slower) and keep 64 columns.
SWAP_LONG_K = 12288
# Registers a thread of the transposed tiles beside their BM / 2 float32 sums: ptxas fit BM = 128
# with 256 columns (640 threads, 96 registers) and BM = 200 with 192 (512 threads, 128) and
# failed at 152 and 208 ("insufficient registers").
SWAP_OTHER_REGISTERS = 32
# 16-bit products of WIDE_SWAP_ROWS rows against weights too wide for one wave of the 64-column
# transposed tiles (swap_suits) and K of at least WIDE_SWAP_MIN_K: the general tiles (with their
# wave_tail) or the transposed tiles of WIDE_SWAP_BN columns, one block an SM, the rows in one
# tile (BM the rows rounded up to 8, so no padded rows are multiplied), with wave_tail where
# wave_tail_waves takes it, whichever costs less in wide_swap_cost: waves x BN x (K x (per k +
# per k and row x BM) + per column), the three terms fitted by least squares on device time
# (H200, CUDA graphs over operands rotated past L2; docs/bench/research/tail_wave_variants.py
# SET=swapwide) over 40 products of 65-256 rows, N 8704-61824, K 1088-15296, both orders of B
# (seeds 20601-20606): the pick ran 1.074x the general tiles (geometric mean, the fastest of the
# measured ways 1.093x; lowest 0.996x; left-one-out fits the same), 0.877x -> 0.941x cuBLAS.
# WIDE_SWAP_MIN_K: below the fit's K, on eight products of K 448-768 (seed 20651), the same
# costs' picks ran 1.063x the general tiles (none slower), and held out at K 512-1023 1.093x
# (W.t(), 8) and 1.140x (row-major, 5) (seeds 20652, 20653).
WIDE_SWAP_ROWS = (65, 256)
WIDE_SWAP_MIN_K = 512
WIDE_SWAP_BN = (128, 192, 256)
# (a, b, c) in µs; in the general tiles' fit the per-k cost is all in the per-row term.
WIDE_SWAP_COST = {"general": (-0.80e-6, 0.352e-6, 0.0396), "swap": (29.6e-6, 0.192e-6, 0.0393)}
# Where that choice is the transposed tiles of 128 columns holding SWAP_TWO_ROW_TILES rows in one
# tile, K whole in one wave (N of 8448-16896: 67-132 tiles, a quarter to a half of the SMs idle at
# the low end), and two row tiles of half the rows with 192 columns make at most one wave
# (N up to 12672): those tiles instead (two_row_tiles_spec). Each block holds half the rows
# against 1.5x the columns, so the wave has up to twice the blocks. Device time on an H200
# (docs/bench/research/tail_wave_variants.py SET=swaprows, W.t(); docs/tensorcore-record.md, "Two row
# tiles where one leaves SMs idle"): 1.11-1.16x the 128-column tiles on the seven such products
# of seeds 20641, 20642 and 22051 (195-238 rows; 238x8512x4288 45.3 -> 39.7 µs, cuBLAS 29.7);
# held out (seeds 22061, 22062) 1.075x on ten W.t() products (two 0.95-0.98x) and 1.092x on six
# with a row-major B (none slower).
SWAP_TWO_ROW_TILES = (129, 256)
SWAP_TWO_ROW_BN = 192
# Products of SWAP_OVER_STREAM_ROWS rows that the streaming tiles take (stream_suits: 64-row
# tiles, here two of them, each reading the whole weight) where the wide transposed tiles could
# (wide_swap_suits) and their 128 columns make one wave (N of at most 16896): those, the rows in
# one tile, instead (swap_over_stream_spec). Device time on an H200
# (docs/bench/research/stream_k_variants.py GENERAL_DEFAULT=1 PLAIN=1, seed 23031, W.t()): 1.09x
# the streaming tiles of 64 x 256 on the six such products of 65-127 rows (1.006-1.19x, none
# slower; 71x9664x1536 15.2 -> 13.6 µs, cuBLAS 11.9); on six of 131-163 rows (three row tiles)
# 0.88-1.25x, and 16 more of 129-192 rows (seed 23051) 0.86-1.05x, or 0.91-1.10x as two row tiles of
# 192 columns: left out.
SWAP_OVER_STREAM_ROWS = (65, 128)
# Shared memory of one SM (228 KB on sm_90), of which each resident block takes 1 KB.
SM_SHARED_BYTES = 228 * 1024
# Stages of the wgmma kernel's TMA ring: its barriers, not cp.async groups, count them, so
# only shared memory bounds them (a 64 x 64 tile of 16-bit values takes 16 KB a stage).
WGMMA_MAX_STAGES = 16
# How split_k blocks add their sums (TensorMatmul.split_merge), and the most blocks the cluster
# merge puts in one cluster (8: the portable cluster size).
SPLIT_MERGES = ("workspace", "cluster")
# b_realign: fills of B the producer threads have in flight (cp.async into the staging ring's
# slots), each slot BN x REALIGN_ROW_BYTES (a row's 128 bytes lie in nine 16-byte chunks).
REALIGN_DEPTH = 4
REALIGN_ROW_BYTES = 144
# kgen.matmul reads an unaligned 16-bit B in place (b_realign) for products of at most
# this many rows; from there up B's copy is a small part of the product's time.
REALIGN_MAX_ROWS = 256
# Where the default's tiles are wider than 128 columns (64 x 256 streaming or 128 x 256 general
# tiles: 65-256 rows against more than 132 tiles of 64 columns), b_realign's staging does not fit
# beside their ring, and kgen.matmul runs transposed tiles of this many columns that read B in
# place (realign_swap_spec) instead of copying B. Device time on an H100, 8 products of 69-200
# rows against 8999-16001 columns, both orders of B (docs/bench/research/realign_wide.py): 1.06-1.69x
# faster than the copy (69x9537x9265: 228.6 to 172.2 µs, cuBLAS 157.7); 64 columns two blocks an
# SM won on 2 of 8; the default's rows in 128-column tiles lost on all (1.06-1.67x slower than
# the copy).
REALIGN_SWAP_BN = 128
# With b_realign a block's time follows its k steps (the producer threads' pace, ~1-1.5 µs a
# step on an H100), so transposed tiles of 64 columns whose K stays whole (67-132 of them: two
# slices each would not run at once) leave half the GPU idle for the whole of K. There kgen.matmul
# takes 128-column tiles with K in two slices merged in clusters (realign_split_spec): as many
# blocks, half the k steps each. Device time on an H100 (docs/bench/research/realign_split_sweep.py):
# 88x5607x8323 W.t() 110.2 against 127.0 µs, 21x5198x9437 row-major 85.5 against 103.9, and held
# out 54x7411x2706 row-major 41.9 against 45.4 (cuBLAS 96.9, 87.1, 57.2); eight more held out,
# 1.03-1.33x (docs/tensorcore-record.md). The gain shrinks with K (1.03x at K = 2350), so K of at least
# REALIGN_SPLIT_MIN_K.
REALIGN_SPLIT_SLICES = 2
REALIGN_SPLIT_MIN_K = 2048
# 17-64 rows against W.t() of a 16-bit weight whose rows are not 16-byte aligned (K no multiple
# of 8) ran the skinny tensor-core forms, which read it by element rows, at 0.80-0.91x cuBLAS
# where the weight is small. The transposed tiles reading it in place (b_realign) won where a
# block has few k steps and the columns few tiles: N and K both at most REALIGN_SWAP_MAX_SIDE.
# Device time on an H100, fitted on 24 drawn products (docs/bench/research/realign_pitch.py,
# IN_PLACE=1, seeds 9111-9112): the four such products 1.20-1.40x faster (47x1985x1657 18.6 to
# 13.7 µs, cuBLAS 15.8); elsewhere the skinny forms won (22x4505x4516: 33.2 against 53.2;
# 26x3698x11198: 60.0 against 78.6). Seed 9113 (run with those two): five such products
# 0.92-1.42x, 1.21x geometric mean; seed 9114 with the rule, both trees: three, 1.02-1.50x.
REALIGN_SWAP_ROWS = (17, 64)
REALIGN_SWAP_MAX_SIDE = 3584
# 5-16 rows against a row-major 16-bit B whose rows are an odd number of elements apart ran the
# skinny tensor-core axpy form, which then gathers B element by element (31-47% of the bound).
# The transposed tiles reading B in place (b_realign) ran 1.05-2.02x faster on all nine such
# products of two draws (device time on an H100, docs/bench/research/realign_pitch.py, IN_PLACE=1
# ROWS=3-16 ORDER=row, seeds 9941 float16 and 9942 bfloat16; docs/matmul-record.md, "Odd pitches from
# 5 rows"), while at 3-4 rows the skinny SIMT forms (Skinny.simt_for_element_rows, up to
# SIMT_ELEMENT_ROWS_16 = 4 rows) stayed ahead on two of three, and at pitches of 2, 4 or 6
# modulo 8 (4- and 8-byte loads) the skinny forms won on 6 of 9. Held out (seeds 9944, 9945,
# the rule in the tree): 1.15-2.46x faster on 10 of 12, 0.78x at 7x2705x15022 (118 k steps a
# block at the producer's pace), 0.97x at 7x9889x2472. Read by row sets (b_phased) instead, every
# unaligned pitch takes them: the skinny default took 1.05-2.07x their time on all 20 products
# of two held-out draws, even pitches included (device time on an H200, SKINNY=1 ROWS=5-16
# ORDER=row, seeds 10831 bfloat16 and 10832 float16; docs/tensorcore-record.md, "A row-major B by row
# sets"), while at 1-4 rows the skinny forms stayed ahead on 3 of 4 (seed 10823).
REALIGN_ROW_ROWS = (5, 16)
# W.t() of a 16-bit weight whose rows are 2, 4 or 6 modulo 8 elements apart, read by row sets of
# n (b_phased: two or four sets, each a box of 32 or 16 rows a stage): on an H200 (device time,
# docs/bench/research/realign_pitch.py ORDER=col IN_PLACE=1, nine products, both trees in one
# command) 1.24-1.43x faster than the producer threads on the four of 78-200 rows, and against
# the skinny forms at 25-64 rows 1.12-1.73x on three of five, 0.99x and 0.88x (45x3000x11006) on
# two: PHASED_SWAP_ROWS take the transposed tiles. At an odd pitch (eight sets, boxes of 8 rows)
# the row sets ran 0.90-1.05x the producer threads (four products), which keep it.
PHASED_SWAP_ROWS = (17, 64)
# W.t() of a 16-bit weight whose rows lie off 16-byte boundaries (K no multiple of 8), 9-16 rows,
# where the skinny forms read it by granules (two blocks an SM do not fit them): the transposed
# tiles dispatch gives the aligned twin (K rounded up to 8), reading it by row sets a tile
# (b_classes), over K whole or K in cluster slices fitted to the sets' tiles (class_slices), on
# weights of CLASSES_MIN_B_BYTES or more. On an H200 (device time, CUDA graphs over operands
# rotated past L2; docs/bench/research/misaligned16.py, docs/matmul-record.md) against the skinny
# default, over 19 products of four draws (seeds 30205, 30206, 31101, 31102): 1.17-1.80x on all
# 13 of 33-269 MB, 0.91-1.00x on the six of 18-32 MB, where A's image launch weighs more. Rows and
# the first draws' fit: five products of 4332-14712 columns (seeds 30203, 30204); the slices'
# fit: Nsight Compute (class_slices). Held out with the floor (seeds 31201, 31202): 1.48x and
# 1.39x on the nine products of fourteen it took (1.00-1.67x).
CLASSES_ROWS = (9, 16)
CLASSES_MIN_B_BYTES = 32 * 10**6
# A's rows TMA reads at a pitch that is no multiple of A_PITCH_BYTES straddle two 128-byte lines
# each, and every block of the wgmma kernel re-reads A. On an H200 (device time, operands rotated
# past L2, bfloat16 W.t(); docs/tensorcore-record.md, "A at a 128-byte pitch"), the transposed tiles with
# A at such a pitch, the copy included: 58x12904x7000 75.5 -> 57.4 µs, 58x9000x4680 41.6 -> 33.1.
# On 12 products drawn with K no multiple of 64: 1.07-1.22x faster from 64-row tiles, 0.93-1.07x at
# 48-56 rows and 0.97-1.02x on the general tiles (65+ rows, more than 132 column tiles), where the
# copy's launch costs what it saves; held out, ten products of 57-256 rows on the transposed
# tiles: 1.07-1.37x faster on nine, 0.92x on one. So a wgmma kernel copies any A it copies at that
# pitch, and the transposed tiles of A_PITCH_MIN_ROWS rows or more against a B of
# A_PITCH_MIN_B_BYTES or more copy an A that is aligned but not at that pitch.
A_PITCH_BYTES = 128
A_PITCH_MIN_ROWS = 57
A_PITCH_MIN_B_BYTES = 32 << 20
# b_phased: the consumers load each stage's operand into registers and wait for the previous
# stage's wgmmas first, so one block an SM leaves the tensor cores and the memory idle in turn.
# Where its transposed tiles are at most one an SM, two blocks an SM (rings half as deep) with K in
# the most slices (up to 8, each STREAM_MIN_SLICE_K deep) whose clusters all run at once
# (PHASED_CLUSTER_BLOCKS: cuOccupancyMaxActiveClusters x s with two blocks an SM, measured on an
# H100, docs/bench/swap16/cluster_capacity_h100.json) run the same products faster. Device time on
# an H200 (docs/bench/research/phased_split.py; docs/tensorcore-record.md, "Row sets, two blocks an SM"):
# W.t() at 17-64 rows, 14 products fitted (26x5394x11630 97.7 -> 55.7 µs, cuBLAS 61.0) and 7
# held out 1.01-1.54x; W.t() at 65-160 rows 1.03-1.46x on the six of tiles up to 128 rows, 0.90x
# at 151 rows (3-stage rings of 152 x 128 tiles); a row-major B at 5-64 rows 1.08-1.33x on six of
# eight, 0.94-0.97x on two of 17 tiles and short K. PHASED_FILL_MAX_ROWS: the tile rows it applies
# to, by B's storage order (a row-major B past 64 rows was not measured).
PHASED_CLUSTER_BLOCKS = {2: 264, 3: 237, 4: 248, 5: 235, 6: 234, 7: 224, 8: 240}
PHASED_FILL_MAX_ROWS = {"col": 128, "row": 64}
# b_phased: the most row sets of B a product reads, one TMA map each: 16-bit rows an odd number
# of elements apart come back to one 16-byte phase every 8 rows. The kernel takes them in one
# by-value parameter (phase_maps_t: the maps, each set's first column, the k each set takes).
# A stage's box of B starts up to PHASE_PAD columns early (TMA reads from 16-byte aligned
# addresses only), so it is BN + PHASE_PAD columns wide.
PHASE_MAPS = 8
PHASE_MAPS_BYTES = 1088
PHASE_PAD = 8
MAX_CLUSTER_MERGE = 8
# The mma.sync kernel's cluster merge takes up to 16 K slices: a non-portable cluster size, which
# sm_90 allows once the kernel opts in (kgen.core.launch sets the attribute at look-up). The
# wgmma kernel's blocks take a whole SM's shared memory, so its clusters stay portable.
MAX_CLUSTER_MERGE_MMA = 16
_PART_PAD = 4
# The TF32 wgmma kernel copies an M-major A or N-major B transposed before each product. On
# an H100 that copy of a 4096x4096 B took as long as the 127-row product itself (0.42x cuBLAS
# against 0.65x for mma.sync, which reads either order in place); at 1000 rows and more the
# wgmma kernel won with the copy included. Below this many rows (columns) mma.sync runs.
TF32_TRANSPOSE_MIN = 512
# Products of at most this many multiply-adds run mma.sync with element loads (repack off):
# one launch, where the wgmma kernel adds a copy for each operand it cannot read in place
# (TMA needs 16-byte rows) or must transpose. Measured on an H100 as users call it (host
# time included, row-major operands): 33x43x21, 100^3 and 255x257x129 took 22-33 µs
# against 33-51 µs; from 1923x51x438 (43M multiply-adds) up the wgmma kernel was as fast
# or faster.
SMALL_PRODUCT_MACS = 1 << 24
# The wgmma kernel is launched programmatically (kgen.core.launch: its launch and barrier set-up
# overlap the kernel before it, which it waits for with griddepcontrol.wait) where its grid fills
# the SMs or each block walks at most PROGRAMMATIC_MAX_SLICE_K of K. Device time of back-to-back
# calls on an H200 (docs/tensorcore-record.md, "Programmatic launches"; 1-16 rows against 16-bit
# weights of 16 MB or more, both orders of B): fitted on 80 cases (seeds 10511, 10513), 1.02-1.11x
# as fast on 12 of 13 products with short slices (1x1280x13760 13.2 -> 12.1 µs), 0.99-1.07x where
# the grid filled the SMs, 0.91-1.08x where fewer blocks than SMs walked longer slices
# (6x2816x16256: 27.1 -> 29.8), which keep plain launches; held out (10514, 10515), the cases the
# rule launches programmatically 1.052x as fast, the others 1.005x.
PROGRAMMATIC_MAX_SLICE_K = 3072
# l2_prefetch: KiB of B's first k tiles each block asks L2 for ahead of griddepcontrol.wait.
TMA_PREFETCH_KIB = (0, 8, 16, 32, 64)
# The operand copies that wait for the kernels before them (copy_await_inputs) and so launch
# programmatically, letting the product kernel launch as they start.
PROGRAMMATIC_COPIES = ("kgen_tc_phase_a", "kgen_tc_class_a")
# The flag (kgen_tc_wgmma's flags argument) that tells the kernel its launch is programmatic.
OVERLAPPED = 4
# with_l2_prefetch's size. Not a default: device time of calls back to back on an H200
# (docs/bench/research/wgmma_prefetch.py; docs/tensorcore-record.md "Programmatic launches"), 16-bit
# products of 1-16 rows: fitted (seed 17101) on the 7 launched programmatically 16 KiB ran
# 1.019x and 64 KiB 1.024x the spec without it (the 5 launched plainly, where the prefetch ran
# just ahead of the block's own loads, lost up to 2%: hence OVERLAPPED); held out (17103) 16 KiB
# ran 1.011x (0.978-1.045x) the spec without it; but trees before and after a 16 KiB default,
# alternating on eight products, 0.998x (0.967-1.052x). The tuner searches it for the
# transposed tiles.
WGMMA_L2_PREFETCH_KIB = 16
# kgen.matmul runs 16-bit products of SMALL_PRODUCT_MACS to this many multiply-adds that the
# wgmma kernel would take with its general tiles on mma.sync with element loads too, where an
# operand's rows are not 16-byte aligned (K or N no multiple of 8, as most drawn sides are):
# one launch reading them in place, where the wgmma kernel copies them first (one launch
# each). Measured on an H100 as users call it (one call between CUDA events, host time
# included; docs/bench/research/small16_routes.py, docs/tensorcore-record.md "Unaligned mid-size
# products: element loads"): fitted on 30 bfloat16 products of 2^20-2^29 multiply-adds (seed
# 9981; 2^28 and 2^28.5 did best), then on 50 held out (seeds 9982 bfloat16, 9983 float16) the
# 18 products the rule moves ran 0.887x -> 0.958x cuBLAS (geometric mean over all 50); past
# 2^28 the wgmma kernel won more often (169x3061x912: 1.19x against 0.87x). Refitted with
# element_spec's tiles (SEED=9985 MIN_LOG2=27 MAX_LOG2=31 DEVICE=1 small16_routes.py, 11 products
# the rule's range can take): bounds of 2^28.5 and 2^29 tied, 0.773x -> 0.824x in one call and
# 0.706x -> 0.808x back to back over 2^28; held out (SEED=9986, 6 products) 0.826x -> 0.944x and
# 0.841x -> 0.989x. In device time the wgmma kernel after its copies stayed faster there
# (0.959x -> 0.880x over the 11; 2533x358x363 1.40x against 1.01x): the copies cost launches,
# whose host time a call pays.
UNALIGNED_ELEMENT_MACS = int(2 ** 28.5)
# 16-bit products of a short K (at most SHORT_K_MAX) with both sides of at least SHORT_K_MIN_SIDE
# store far more than they read or compute: a block's loads, k steps and stores come one after
# the other, and what hides them is other blocks on the same SM. Those of at most
# SMALL_PRODUCT_MACS, and on an sm_90 GPU those whose operands the wgmma kernel would copy (the
# element-load rule) or whose output rows it would store a piece at a time (N no multiple of 8;
# dispatch's _element_loads), run mma.sync, operands read in place (repack off), in tiles that
# keep two or three blocks an SM (min_blocks):
#   128x128 blocks of 64x32 warp tiles, 4 stages, two blocks an SM, where the 128x128 tiles make
#   at least SHORT_K_WIDE_TILES (two waves of an H100's SMs) or K is at least SHORT_K_WIDE_K;
#   128x64 blocks of 32x32 warp tiles, 3 stages, three blocks an SM, elsewhere.
# Both hold the block's float sums over their stages, so an output without pair stores goes
# through shared memory (staged_unaligned_output). Fitted on 12 bfloat16 products drawn with M, N
# of 512-8192 and K of 16-128, half of N odd (device time over operands rotated past L2, H100;
# docs/bench/research/short_k_tiles.py SEED=9401, docs/tensorcore-record.md "Short K"): the default
# (the mma.sync default's 4 warps of 255 registers, or the wgmma kernel's tiles) ran 0.59x
# cuBLAS, ten fixed variants 0.41-0.75x; on 10 held out (SEED=9402) the rule's choice was within
# 11% of the fastest variant on every product. Where N is a multiple of 8 and the wgmma kernel
# reads the operands (or copies a short-K A, which is small), it stayed faster from ~2^26 up
# (4541x7147x57: 56.4 µs against 84.0; 1995x7988x31: 31.0 against 37.4; held-out SEED=9302 of
# docs/bench/research/odd_output_ab.py, B row-major), so such a product keeps the wgmma kernel
# where B is row-major. Where B is W.t() (k-contiguous) it runs these tiles too
# (SHORT_K_WEIGHT_T): once the staged store took outputs of pairs, the wgmma kernel on
# N rounded up to a multiple of 8 took 1.23x (0.98-1.41x, 6 products) the time these tiles took
# on the odd N they were drawn at, and at an odd N these tiles were themselves 1.00-1.35x slower
# than at N rounded up (the 17 products both ran on them); row-major B: 0.90x (0.55-1.12x, 7
# products). Device time, H100, seeds 140001 and 140003 (W.t()) and 140002 and 140004 (row-major)
# of odd_output_ab.py, docs/bench/staged_pairs_h100_1207/. Both routes at one N, and as users
# call them, are not measured yet: docs/bench/short_k_route_to_measure/.
SHORT_K_MAX = 128
SHORT_K_MIN_SIDE = 512
SHORT_K_WIDE_TILES = 264
SHORT_K_WIDE_K = 64
SHORT_K_WEIGHT_T = True
# The other 16-bit products that run mma.sync reading their operands in place (at most
# SMALL_PRODUCT_MACS, or the element-load rule's) take 64x64 blocks of four 32x32 warp tiles, 2
# stages, four blocks an SM (element_spec), K split where the tiles are fewer than
# ELEMENT_SPLIT_TILES and K is at least ELEMENT_SPLIT_MIN_K: into slices of at least 128 k, as many
# as make ~2 blocks an SM's worth (264) of work. The mma.sync default's 128x128 blocks (four warps
# of 255 registers, two an SM) left most of the GPU idle there. Device time over operands rotated
# past L2 (H100, docs/bench/research/el_tiles.py, 24 products of seeds 9601-9602 with both sides of
# 128 or more and K past SHORT_K_MAX): the default 0.42x and 0.47x cuBLAS, these tiles with the
# default's split 0.77x and 0.81x, with a split to fill the SMs 0.82x and 0.93x; splitting 105-130
# tiles in two at K of 260-330 lost (238x1881x260 13.1 -> 15.0 µs). A
# split adds a second launch (the workspace's sum), a few µs of host time a call: as users call
# them, products of K below 512 (5-20 µs on the GPU) lost more there than the split saved
# (4079x22x256: 0.85x -> 0.60x cuBLAS back to back), so K is split from ELEMENT_SPLIT_MIN_K, as
# the mma.sync default splits it. From K = 512 the split pays up to 160 tiles (refitted on 12 such
# products of 100-399 tiles, docs/bench/research/el_split.py SEED=9611: unsplit 0.693x cuBLAS,
# the rule with a bound of 100 0.693x, 132 0.827x, 160 0.834x, 200 0.836x; held out, SEED=9612,
# 0.672x -> 0.791x at 160; device time only: those products take 15-30 µs on the GPU, the
# mma.sync default split them too, and their public calls were not timed against the bound).
ELEMENT_SPLIT_TILES = 160
ELEMENT_SPLIT_MIN_K = 512
# On an sm_90 GPU element_spec's K slices add their sums in a thread block cluster (split_merge=
# "cluster": one launch, no workspace, no second kernel) where K is ELEMENT_CLUSTER_MIN_K to
# ELEMENT_CLUSTER_MAX_K and the 64x64 tiles are fewer than ELEMENT_SPLIT_TILES (K of 512 or more)
# or ELEMENT_CLUSTER_SHORT_K_TILES (shorter K, which the workspace split left whole): as many
# slices as make ~ELEMENT_CLUSTER_BLOCKS blocks, at most 8 (MAX_CLUSTER_MERGE), each at least
# ELEMENT_CLUSTER_MIN_SLICE deep. Device time over 24 products a weight order (H100,
# docs/bench/research/el_cluster.py SEED=117001): splits of 2-8 slices merged in a cluster beat K
# whole from K ~130 up where the tiles were fewer than ~100 (339x273x199: 13.0 -> 9.3 µs in 4
# slices of ~50 k), and 105 tiles at K = 132 lost. As users call them (one call between CUDA
# events, host time included, both trees alternating twice, docs/tensorcore-record.md "K slices of the
# element tiles added in a cluster"), the products past K ~2600 that the workspace split 16 ways
# lost 0.69-0.83x with 8 slices (46x23x6436, 73x95x5858), so those keep the workspace; the bound
# was read off the draws SEED=117001 and 117002.
ELEMENT_CLUSTER_MERGE = True
ELEMENT_CLUSTER_MIN_K = 128
ELEMENT_CLUSTER_MAX_K = 2560
ELEMENT_CLUSTER_MIN_SLICE = 64
ELEMENT_CLUSTER_BLOCKS = 2 * _SMS
ELEMENT_CLUSTER_SHORT_K_TILES = 100
# Past ELEMENT_CLUSTER_MAX_K (and below ELEMENT_SPLIT_TILES tiles), where 8 slices lost to the
# workspace's 16, the cluster merge takes the workspace split's slice count, up to 16 blocks a
# cluster (MAX_CLUSTER_MERGE_MMA): one launch, no workspace. H100 (docs/tensorcore-record.md, "Past K =
# 2560"): 1.10-1.15x faster than the workspace split in device time and 1.12-1.23x as one call
# with host time, geometric means of 10-14 products a draw, on seed 117004 and the held-out
# 117005; 16 slices 1.28-1.37x faster than 8 in one cluster.
ELEMENT_CLUSTER_LONG_K = True
# Stages of element_spec's tiles where K (ELEMENT_SPLIT_MIN_K or more) is split. A slice of a long
# K walks its k tiles one after another, two in flight a block; with few tiles an SM holds one or
# two such blocks, so DRAM latency rather than bandwidth may set their pace (542x62x5890 bfloat16
# as users call it: 0.79x cuBLAS, H100, docs/bench/staged_pairs_h100_1207). Deeper rings are not
# measured yet: docs/bench/el_depth_to_measure/ times 3 and 4 against 2.
ELEMENT_SPLIT_STAGES = 2
# float64 products of F64_FEW_MIN_ROWS to F64_FEW_MAX_ROWS rows (M <= N) against N and K of at least
# F64_FEW_MIN_SIDE: m16n8k16 tiles of the rows rounded up to 16 (one row tile for all of them),
# 64 columns, 16 x 32 warp tiles, as many blocks an SM as shared memory and registers allow and
# K split to fill one wave of them (few_rows_f64_spec). Device time on an H200 against the
# 64 x 64 default (docs/bench/research/f64_few_rows.py, seeds 94101 and 94103): on the five
# products of aligned rows 1.25x (13x11985x1928 W.t() 110.4 -> 73.9 µs, cuBLAS 59.1; 28x4464x2471
# row-major 52.2 -> 38.0, cuBLAS 49.0). Held out on an H100 (seeds 94301 and 94303, 16 products,
# unaligned rows read in place): 0.70x -> 0.91x cuBLAS, 1.18x over W.t() and 1.44x over row-major
# weights (docs/matmul-record.md, "Float64 at 9-64 rows").
F64_FEW_MIN_ROWS, F64_FEW_MAX_ROWS, F64_FEW_MIN_SIDE = 9, 64, 1024
# Few-column float64 products (few_columns_f64_suits): F64_FEW_COLUMNS_MIN to F64_FEW_COLUMNS_MAX
# columns, fewer than the rows, at least F64_FEW_COLUMNS_MIN_ROWS rows and F64_FEW_COLUMNS_MIN_K
# of K run on the FP64 tensor cores in few_columns_f64_spec's tiles (the mirror image of the
# few-row tiles: the columns rounded up to 16, 32 x 16 warp tiles over 64 rows, or 128 where a
# tile has 16 columns and A holds F64_FEW_COLUMNS_TALL_A elements or more), whatever their
# multiply-adds; before, they ran the SIMT tiles below 2^28 and the 64 x 64 default above.
# Device time on an H100 (docs/bench/research/mma_whole_tiles.py VARIANTS fewcols=64 and 128,
# CUDA graphs over operands rotated past L2, NaN-poisoned outputs checked against float64; raw
# docs/bench/f64_few_columns/), on products of 9-128 columns drawn for it: the rule 1.75x the spec
# before on the 25 fitted products it takes (one loss, 158x45x707 0.68x) and 1.78x on 13 held
# out (1.03-2.85x); past 64 columns the new tiles were mixed (0.65-1.76x over 12 products), and
# 128-row tiles won only on 16-column tiles of a large A (1.26-1.46x over 64 rows from 2^21
# elements, 0.90-0.94x below). As users call it (held out, kgen bench calls, host time
# included): 1.65x faster on the 13 products the rule takes (docs/matmul-record.md, "Float64 at 9-64
# columns").
F64_FEW_COLUMNS = True
F64_FEW_COLUMNS_MIN, F64_FEW_COLUMNS_MAX = 9, 64
F64_FEW_COLUMNS_MIN_ROWS, F64_FEW_COLUMNS_MIN_K = 128, 256
F64_FEW_COLUMNS_BM, F64_FEW_COLUMNS_TALL_A = 64, 1 << 21
# A weight of the few-column tiles whose rows are not 16 bytes apart (row-major B of odd N) while
# A's are: B read in place by the element-load entry, A's tiles by 16-byte copies (repack_a,
# which copies nothing where A is aligned), rather than B copied aligned by a launch of its own.
# As users call it on an H100 (kgen bench calls, host time included, 16 products drawn with N odd,
# K even; docs/bench/f64_few_columns/b_elements_h100_1206/): 1.18x faster (1.03-1.25x, none slower),
# 0.80x -> 0.95x cuBLAS.
F64_FEW_COLUMNS_B_ELEMENTS = True
# The few-row float64 tiles ask the L2 for whole 128-byte lines around each copy (l2_fetch): a
# W.t() weight's tile is 64 rows of 128 bytes (16 k each), 64 lines a k tile. Device time on an
# H100 (docs/bench/research/mma_whole_tiles.py VARIANTS l2_fetch=128 and 256, CUDA graphs over
# operands rotated past L2; raw docs/bench/f64_l2_fetch/): against W.t() 1.07-1.11x on the four
# few-row products of the fitted draw (29x14706x2298 151.9 -> 141.6 µs; 31x7959x15668 408.7 ->
# 370.0) and 1.00-1.08x on three held out; against row-major weights 0.99-1.01x. 256 bytes was
# mixed (0.96-1.15x), and the 64 x 64 and 96-row tiles gained nothing (0.95-1.03x).
F64_FEW_L2_FETCH = 128
# The K split of float64 tiles fewer than one wave of resident blocks (wave_split): the split s
# that least waves a unit of K (ceil(tiles * s / slots) / s) plus WAVE_SPLIT_COST a slice, so a
# few more slices must buy at least a whole wave back. Fitted on an H100 (docs/bench/research/
# f64_few_rows.py MODE=wave, seeds 95101-95103, device time): at 65-256 rows the default 64 x 64
# tiles had split 1 from 132 tiles up (a wave is 396 blocks) and ran 0.60x/0.64x cuBLAS; split
# this way 0.77x/0.83x on the products it changed (123x9051x3924 W.t() 326 -> 260 µs,
# 194x2336x1560 row-major 87 -> 59). A cost of 0.05 a slice chose fewer slices and lost on two
# of five; at 9-64 rows the few-row tiles' earlier split (slots / tiles, rounded) overshot one wave
# at 52x8660x2204 (2 x 136 blocks in 264 slots: 115.6 µs; 3 or 5 slices 93-95), and a cost of 0.02
# split 10x1863x5345 7 ways instead of 16 (54.5 -> 63.5 µs). From a whole wave of tiles up,
# splitting lost (429x4051x2356: 448 tiles, 258.7 -> 292.3 µs), so those stay whole past 256
# rows (F64_WAVE_MAX_SPLIT below for fewer).
WAVE_SPLIT_COST = 0.005
# From a whole wave of tiles up, the 64 x 64 float64 default at up to F64_TENSOR_MAX_ROWS rows
# splits K too (wave_split with whole_waves): at most F64_WAVE_MAX_SPLIT slices of at least
# F64_WAVE_MIN_SLICE of K, chosen by the same count of waves, so the last, part-empty wave shrinks.
# Device time on an H100 (docs/bench/research/mma_whole_tiles.py, VARIANTS split_k=2 and 3, CUDA
# graphs over operands rotated past L2), 65-256 rows with 396-660 tiles (1.0-1.67 waves), both
# weight orders: fitted on seed 98801 (16 products), where the rule ran 1.074x the whole-K spec
# (0.986-1.234x; 241x6395x5505 row-major 611 -> 506 µs; slices of at least 768 did as well there,
# of 256 or 512 1.071x, and the longer slices were kept); held out (seed 98802, 16 products)
# 1.059x (1.000-1.178x). Splits of a short K (143x12486x1348: 0.89-0.95x) and of the 96-row
# tiles (0.76-0.97x) lost, and past 256 rows a split lost before (429x4051x2356 above), so those
# stay whole. As users call it (kgen bench calls, host time included, seed 98803's ten products
# the rule splits, both weight orders, the trees before and after alternating twice): 1.080x
# against row-major weights (0.847x -> 0.915x cuBLAS) and 1.050x against W.t() (0.791x -> 0.830x).
F64_WAVE_MAX_SPLIT, F64_WAVE_MIN_SLICE = 3, 1024
# Where the 64 x 64 float64 default's tiles are at least F64_BUSY_TILES_PER_SM an SM (198 on an
# H100) at up to F64_TENSOR_MAX_ROWS rows, each SM has work for two blocks without a split, and the
# count of waves above (which takes the slots of a wave to run as fast as one block) split K where
# that only added slices: there K is split by f64_sm_split, a model of the busiest SM's time. It
# counts the blocks that SM runs (ceil(tiles * s / SMs)), three at once, each for K / s + kappa k
# at omega µs a k, slowed where fewer than three share the SM (F64_SPLIT_MODEL's eff), plus, for a
# split, the workspace's bytes (s * M * N doubles) at a cost a MB and the reduce launch. Fitted
# (least squares on log time) on 43 products of 97-256 rows timed at splits 1-8 on an H100
# (docs/bench/research/mma_whole_tiles.py VARIANTS split_k=1..8, CUDA graphs over operands rotated
# past L2; raw docs/bench/f64_split_model/, seeds 105001-105002 and the products of the weights read
# by elements; docs/bench/research/f64_split_model_fit.py), rms 4.1%. Two-fold, each half's model
# picked 1.014x (4 products) and 1.065x (13) the earlier rule's split on the other half's products
# of at least 198 tiles; under 198 tiles it lost up to 0.90x, hence the bound. Held out (14
# products drawn with at least 198 tiles, seeds 105101-105139): the model's split ran 1.068x the
# earlier rule's (1.000-1.315x, 255x4007x1125 W.t() 0.72x -> 0.95x cuBLAS), within 0.5% of the
# fastest split timed. From a whole wave of tiles up it picks among the splits F64_WAVE_MAX_SPLIT
# allows (its one pick past them, 4 at 241x13693x14843, ran 0.97-0.99x).
F64_BUSY_TILES_PER_SM = 1.5


class F64SplitModel(NamedTuple):
    """f64_sm_split's fitted constants: µs a k of one block's tile at full speed, k a block spends
    beyond its slice (the pipeline's fill and the stores), speed of a wave of 1, 2 or 3 blocks on
    an SM against three, µs a MB of split workspace, µs of the reduce launch."""
    omega_us: float
    kappa: float
    eff: tuple[float, float, float]
    us_per_mb: float
    reduce_us: float


F64_SPLIT_MODEL = F64SplitModel(omega_us=0.0243, kappa=23.5, eff=(0.665, 0.932, 1.0), us_per_mb=0.537,
                                reduce_us=4.23)
# float64 products of F64_FEW_MAX_ROWS + 1 to F64_TENSOR_MAX_ROWS rows (M <= N, N and K of at least
# F64_FEW_MIN_SIDE), either weight order, run tiles of one of F64_ROW_TILES rows and 64 columns,
# two blocks an SM (row_tile_f64_spec), where those cover M with fewer rows than the 64 x 64
# default's tiles (f64_row_tile: 96-row tiles at 65-96 rows, where 64-row tiles compute 128);
# where rows tie, the 64 x 64 default stays. Device time on an H100 (docs/bench/research/
# mma_whole_tiles.py VARIANTS, CUDA graphs over operands rotated past L2; raw
# docs/bench/f64_tiles_65_256/): fitted on 32 products of 65-256 rows (seeds 103001-103002 and
# earlier outliers), the 96-row tiles ran 1.13-1.42x the 64 x 64 default at 65-96 rows against
# row-major weights (87x11949x11072 886 -> 623 µs) and 0.99-1.16x the four-stage 96-row tiles
# that then ran against W.t() there; held out (seed 103003, 14 products), 1.35x, 1.10x, 0.88x,
# 1.35x and 1.27x on the five of 65-96 rows. Where rows tie (97-256 rows) they were mixed:
# 128-row tiles ran 1.04-1.24x on 12 of 13 fitted products but 0.84-0.97x on 5 of 6 held out
# (K split more ways, or too few blocks for the SMs) and 0.98x over 18 of a third draw (seeds
# 103006-103007), 96-row tiles at 129-192 rows 1.00-1.11x fitted and 0.85-1.08x held out, so
# those keep the 64 x 64 tiles (the tuner's space holds both).
F64_ROW_TILES = (96, 128)
# float64 products of up to this many rows (no more than their columns, N and K of at least
# F64_FEW_MIN_SIDE) run on the FP64 tensor cores on sm_90 below dispatch.TENSOR_F64_MIN_MACS too
# (rows_f64_suits): there the SIMT tiles read every weight element once a 32-row tile. Device time
# on an H100 (docs/bench/research/f64_small_family.py, 65-256 rows under 2^28 multiply-adds, both
# weight orders, 16 products a seed): the tensor-core spec ran 0.827x cuBLAS against the SIMT
# tiles' 0.563x (seed 97201) and 0.615x (97202), faster on 30 of 32 (72x1074x1183 W.t() lost,
# 26.2 -> 29.9 µs); on seed 97203, drawn after the rule was set, 0.811x against 0.567x, faster on
# all 16. As users call it (kgen bench calls, host time included, the 24 products of those seeds,
# each tree timed twice in one command): 0.739x -> 0.940x cuBLAS against row-major weights and
# 0.700x -> 0.909x against W.t(), slower on one product of each order. At 9-64 rows
# few_rows_f64_suits already took them.
F64_TENSOR_MAX_ROWS = 256
# At up to F64_TENSOR_MAX_ROWS rows, where K stays whole (wave_split gives 1 for both tiles), the
# float64 default runs 64 x 128 tiles instead of 64 x 64 (wide_f64_spec: 32 x 64 warp tiles of
# m16n8k8, two blocks an SM) where they take fewer waves: an SM holds about as much C either way
# (three 64 x 64 blocks, two 64 x 128), so each is modelled as its waves times the C an SM's
# worth of its blocks holds (f64_wave_cost), and the wide tiles run where that is at least
# F64_WIDE_MARGIN below the 64 x 64 tiles' (in effect: 397-792 tiles of 64 x 64, two waves with
# the second part-empty, against at most 264 wide ones, one wave). Device time on an H100
# (docs/bench/research/mma_whole_tiles.py VARIANTS, CUDA graphs over operands rotated past L2; raw
# docs/bench/f64_wide_tiles/): of 43 products of 65-256 rows (seed 1004 and three draws of
# products earlier rules took), the nine this rule takes ran 1.133x (0.959-1.464x; 186x11244x1609
# row-major 245.4 -> 167.6 µs, 0.71x -> 1.03x cuBLAS), while a looser margin of 0.05, which also
# took products whose K the wide tiles split 5-14 ways, ran 0.82-1.25x there (W.t()
# 163x9738x3440 290.0 -> 340.1 µs). Held out (ten products the rule takes, drawn after it was
# set): 1.020x (0.956-1.068x), faster on six.
F64_WIDE_MARGIN = 0.25


# Pipeline stages of the float64 64 x 64 m16n8k16 default on sm_90. Once its whole tiles were
# copied without clamps (load_a_whole), three stages ran as fast as four or faster (device time
# on an H100, docs/bench/research/mma_whole_tiles.py VARIANTS, seeds 99101-99102 and five fixed
# products, 21 in all: 1.00-1.22x, none slower than 0.995x; 8192x8192x1024 against W.t() 3003.5
# -> 2453.0 µs), with 57 KB of shared memory a block instead of 76. Held out (seeds 99103-99104
# and four fixed products, 18 that run this tile): 1.050x, 0.939-1.322x. The few-row tiles keep
# four (14 held-out products with the 96-row tiles of four stages: 1.018x, 0.938-1.186x, too mixed
# to change); the 96-row tiles of row_tile_f64_spec take three, as they were measured
# (F64_ROW_TILES).
F64_STAGES = 3
# How the float64 64 x 64 default copies the tiles of blocks whose C tile passes M or N: by counts
# fixed for the block ("masked", TensorMatmul.edge_copies), not clamped piece by piece. Device time
# on an H100 against the clamped copies (docs/bench/research/mma_whole_tiles.py VARIANTS, CUDA
# graphs over operands rotated past L2): fitted on seeds 99401-99402 and eight fixed products, 20
# that run this tile, 1.028x (0.994-1.125x; 100x8192x8192 row-major 393.7 -> 350.0 µs); held out
# (seeds 99403-99404, 13 products) 1.014x (0.977-1.116x), long K against a row-major weight gaining
# most. The few-row tiles stay clamped (28 products, and 6 of the four-stage 96-row tiles:
# 0.999-1.031x, level; the 96-row tiles of row_tile_f64_spec copy as the default, as they were
# measured held out), and skipping the MMAs past M (edge_mma="inside") lost (0.977x fitted,
# 0.979x held out; timed after the spec, so lower clocks late in a run may account for part of
# it), so it is not used.
F64_EDGE_COPIES = "masked"
# The float64 tiles' 16-byte copies allocate in L1 too (l1_copies, cp.async.ca) where the rows
# they read start 16 bytes into a 32-byte sector (f64_rows_off_sectors): with .cg such a row reads
# the sector it shares with its next k tile twice from the L2. Device time on an H100
# (docs/bench/research/mma_whole_tiles.py VARIANTS l1_copies=True/False, CUDA graphs over
# operands rotated past L2; raw docs/bench/f64_l1_copies/): of 46 products of 65-256 rows, the 13
# whose A rows start off a sector ran 1.05-1.39x (119x6217x7138 W.t() 1.39x), the 7 whose rows all
# start on one 0.95-1.03x (left off), the 26 that read the weight element by element 1.00x
# (their copies are .ca already). Held out (31 products, 10-4096 rows): the four the rule takes
# 1.38x, 1.33x, 1.15x and 1.01x (103x6378x15989, 513x7001x3002, 40x4085x6982, 10x5370x9786),
# the eleven of rows on sectors 0.91-1.08x with it on. As users call it (kgen bench calls, 72 calls
# of 17-256 rows, both trees in one command): 0.978x -> 0.999x cuBLAS, the 13 calls it changes
# 1.121x faster.


# A float64 weight read in place by the element-load entry (dispatch's b_elements request, for a
# weight whose rows are not 16 bytes apart) runs its 64 x 64 tiles (the default's at 97-1024 rows,
# the few-row tiles' at 49-64) with repack_a (A copied aligned first where it is not, so A's tiles
# take 16-byte copies) and spread_elements (B's element copies along its rows). Device time on an
# H100 (docs/bench/research/mma_whole_tiles.py VARIANTS, CUDA graphs over operands rotated past
# L2; raw docs/bench/f64_weight_elements/): both together ran 1.02-1.20x (geometric mean 1.109x)
# over the 9 fitted 64 x 64 products (repack_a alone 1.085x, spread_elements alone 1.044x), 1.04-1.23x
# (1.128x) over the 9 held out, and 1.12-1.20x at 343-839 rows on six of seven (505x10383x13013
# 1.02x). On the 96-row and 16-48-row tiles both ran 0.96-1.04x (left off).
F64_B_ELEMENTS_TILE = (64, 64)


def f64_rows_off_sectors(K: int) -> bool:
    """Whether a float64 product of inner size K, its A stored contiguous and row-major (and a
    W.t() weight, whose rows are K long too), gives the kernel's 16-byte copies rows that start
    16 bytes into a 32-byte sector: K = 2 mod 4 read in place, K = 1 mod 4 copied first at the
    copy's 16-byte pitch (K + 1)."""
    return K % 4 in (1, 2)


def _f64_wide_enough(M: int, N: int, K: int) -> bool:
    """The float64 row-tile rules' shared condition: no more rows than columns, N and K of at
    least F64_FEW_MIN_SIDE."""
    return M <= N and min(N, K) >= F64_FEW_MIN_SIDE


def f64_row_tile(M: int) -> int:
    """Rows a float64 tile at F64_FEW_MAX_ROWS + 1 to F64_TENSOR_MAX_ROWS rows: of 64 (the
    default's) and F64_ROW_TILES, the one whose row tiles cover M with the fewest rows, 64 on a
    tie, else the smaller."""
    return min((64, *F64_ROW_TILES), key=lambda bm: (-(-M // bm) * bm, bm != 64, bm))


def c_tiles(M: int, N: int, BM: int, BN: int) -> int:
    """C tiles of BM x BN that cover an M x N product (the last row and column of tiles may be
    part-empty)."""
    return -(-M // BM) * -(-N // BN)


def f64_wave_cost(spec, M: int, N: int, sms: int = _SMS) -> int:
    """The time model of F64_WIDE_MARGIN for a spec that leaves K whole: the waves its C tiles
    take in `sms` x min_blocks resident blocks, times the C elements those blocks hold."""
    BM, BN, _ = spec.tile
    slots = sms * spec.min_blocks
    return -(-c_tiles(M, N, BM, BN) // slots) * BM * BN * slots


def f64_split_us(M: int, N: int, K: int, tiles: int, s: int, sms: int = _SMS,
                 model: F64SplitModel = F64_SPLIT_MODEL) -> float:
    """The model's time (µs) of the 64 x 64 float64 default's `tiles` with K in `s` slices: the
    busiest SM's blocks, three at a time, and for a split its workspace and reduce launch."""
    blocks = -(-tiles * s // sms)
    full, rest = divmod(blocks, 3)
    units = full * 3 / model.eff[2] + (rest / model.eff[rest - 1] if rest else 0.0)
    time = model.omega_us * units * (-(-K // s) + model.kappa)
    if s > 1:
        time += model.us_per_mb * s * M * N * 8 / 1e6 + model.reduce_us
    return time


def f64_sm_split(M: int, N: int, K: int, tiles: int, sms: int = _SMS, model: F64SplitModel = F64_SPLIT_MODEL) -> int:
    """K slices for the 64 x 64 float64 default (three blocks an SM) by `model` (f64_split_us): the
    split of least predicted time, of 1 to 16 with slices of at least 256 of K, or from a whole
    wave of tiles up of the splits wave_split's whole_waves allows there (at most
    F64_WAVE_MAX_SPLIT slices of at least F64_WAVE_MIN_SLICE)."""
    if tiles >= 3 * sms:
        top, least = F64_WAVE_MAX_SPLIT, F64_WAVE_MIN_SLICE
    else:
        top, least = 16, 256
    return min((s for s in range(1, top + 1) if s == 1 or K // s >= least),
               key=lambda s: (f64_split_us(M, N, K, tiles, s, sms, model), s))


# float64 defaults (mma.sync on sm_90) whose K is split 2 to MAX_CLUSTER_MERGE ways add the slices'
# sums in a thread block cluster (split_merge="cluster") rather than through a workspace and a
# second kernel, where all of the product's clusters run at once and each slice is at most
# F64_CLUSTER_MAX_SLICE deep. F64_CLUSTER_BLOCKS[b][s]: blocks of b a multiprocessor that an H100
# runs at once in clusters of s (cuOccupancyMaxActiveClusters x s, the same for every float64
# tile and both entry points; docs/bench/research/f64_cluster_capacity.py). Device time on an H100
# (docs/matmul-record.md, "Float64 K slices merged in a cluster"): where the rule takes it the merge ran
# 1.08x the workspace's speed over 6 products it was fitted on and 1.08x over 7 held out
# (0.91-1.20x); past the clusters that run at once 0.69-1.06x (0.88x over 21). The slice cap was
# set after the held-out draw: its one large loss (98x6113x13035, 0.81x) had slices of 6517 k,
# where the merge saves a small share of the time.
F64_CLUSTER_MERGE = True
F64_CLUSTER_BLOCKS = {2: {2: 264, 3: 237, 4: 248, 5: 235, 6: 234, 7: 224, 8: 240},
                      3: {2: 396, 3: 372, 4: 368, 5: 345, 6: 372, 7: 329, 8: 360},
                      4: {2: 528, 3: 489, 4: 496, 5: 470, 6: 474, 7: 483, 8: 496}}
F64_CLUSTER_MAX_SLICE = 2048


def f64_cluster_merged(spec, M: int, N: int, K: int):
    """`spec` (a float64 default for an M x N x K product) with split_merge='cluster' where
    F64_CLUSTER_MERGE is on, its K is split 2 to MAX_CLUSTER_MERGE ways on sm_90's mma.sync
    shapes into slices of at most F64_CLUSTER_MAX_SLICE, all its clusters run at once
    (F64_CLUSTER_BLOCKS) and its sums fit its stages; else `spec` as it is."""
    s = spec.split_k
    if not (F64_CLUSTER_MERGE and spec.dtype == "float64" and spec.mma_shape and not spec.wgmma
            and 2 <= s <= MAX_CLUSTER_MERGE and spec.split_merge == "workspace"):
        return spec
    if (c_tiles(M, N, spec.tile[0], spec.tile[1]) * s > F64_CLUSTER_BLOCKS.get(spec.min_blocks, {}).get(s, 0)
            or spec.split_plan(K)[1] > F64_CLUSTER_MAX_SLICE):
        return spec
    try:
        return spec.replace(split_merge="cluster")
    except SpecError:   # the tile's sums do not fit its stages
        return spec


def wave_split(tiles: int, slots: int, K: int, whole_waves: bool = False) -> int:
    """K slices for `tiles` C tiles where `slots` blocks fit on the GPU at once: below K = 512
    1, else the split (at most 16, slices of at least 256 of K) that minimises the waves a unit
    of K takes plus WAVE_SPLIT_COST a slice. From a wave of tiles up 1, or with `whole_waves`
    the same choice among at most F64_WAVE_MAX_SPLIT slices of at least F64_WAVE_MIN_SLICE."""
    if tiles >= slots:
        if not whole_waves:
            return 1
        top = max(1, min(F64_WAVE_MAX_SPLIT, K // F64_WAVE_MIN_SLICE))
    else:
        top = max(1, min(16, K // 256))
    return min(range(1, top + 1), key=lambda s: (-(-tiles * s // slots) / s + WAVE_SPLIT_COST * s, s))


# float32 products (TF32 off) run as three TF32 products on the wgmma kernel (split_tf32) where
# dispatch finds an sm_90 GPU and the product has at least SPLIT_TF32_MIN_MACS multiply-adds, both
# sides of at least SPLIT_TF32_MIN_SIDE and K of at least SPLIT_TF32_MIN_K. Fitted on 37 products
# measured as users call them on an H100 (docs/bench/research/split_tf32.py, raw rows in
# docs/bench/split_tf32_h100.json): there the split ran 1.1-1.8x cuBLAS SGEMM from ~2^30
# multiply-adds up, and lost to the tiled SIMT kernels below ~2^29, on sides of a few hundred
# (288x1775x11967: 0.61x against 0.77x) and on short K (5787x8595x70: 0.58x against 0.79x), where
# its two copies and three times the k steps do not pay.
SPLIT_TF32_MIN_MACS = 1 << 29
SPLIT_TF32_MIN_SIDE = 512
SPLIT_TF32_MIN_K = 128
# ... and from SPLIT_TF32_DEEP_MIN_MACS up where K is at least SPLIT_TF32_DEEP_K (both sides still
# at least SPLIT_TF32_MIN_SIDE): since its copies shrank to two segments in one launch, the wgmma
# split beats the mma.sync split there. Device time on an H100 (docs/tensorcore-record.md, "The wgmma
# split from 2^27 multiply-adds where K is 256 or more"; 24 products the mma.sync split ran):
# 1.016-1.457x on the 9 with K >= 256 and both sides >= 512, 0.83-1.43x below K = 256. As users
# call it, on 24 products drawn after the bound was set: 1.06-1.35x faster, all 24.
SPLIT_TF32_DEEP_MIN_MACS = 1 << 27
SPLIT_TF32_DEEP_K = 256
# ... and, whatever their size, products whose smaller side is from SPLIT_TF32_NARROW_SIDE up to
# SPLIT_TF32_MIN_SIDE and whose K is at most the larger side: there the copies (3K values per
# row or column) stay small beside the product. Measured on an H100 as users call them, one call
# with host time included (docs/bench/research/split_tf32.py, split_tf32_rows.py and
# small_products_families.py): of 13 such products the split ran faster than the tiled SIMT
# kernels on 8 (0.55-0.88x cuBLAS up to 0.66-1.13x), level on 1, slower on 4 by 0.04-0.09x
# (0.65-1.02x down to 0.61-0.94x); where K exceeded the larger side it lost on 4 of 5.
SPLIT_TF32_NARROW_SIDE = 256
# The split kernel's consumers add the tensor cores' sums into float32 registers every this many
# k tiles (128 k of the 3K), so that the accumulators' truncation stays a short chain.
SPLIT_PROMOTE_TILES = 4
# mma.sync's split (in registers) does the same every this many k of K (3 x 128 products).
SPLIT_PROMOTE_K = 128
# Widest block tile per BM that holds both sets of accumulators (BN floats a consumer thread):
# 384 threads (BM = 128) get at most 168 registers each, 256 threads (BM = 64) 255.
SPLIT_MAX_BN = {128: 128, 64: 192}
# The split copies of at most this many values ((M + N) seg) go in one launch of
# kgen_tc_split_copies (B's blocks, then A's), larger ones in two (B's launch, then A's). Device
# time on an H100 (docs/tensorcore-record.md, "One launch for both copies"; 28 float32 products of
# the split): one launch ran 1.00-1.16x on the 16 with copies up to 2^22 values (a launch less:
# host and device time the small calls feel) and 0.97-1.02x on the 12 larger ones, 9 slower.
SPLIT_COPIES_ONE_LAUNCH = 1 << 22
# The hi/lo copies of A and B (2 (M + N) seg float32 values, seg = K rounded up to the k tile,
# 32 for float32 on wgmma) may take at most this many bytes.
SPLIT_TF32_MAX_BYTES = 4 << 30


# float32 products (TF32 off) that split_tf32_suits leaves to the SIMT tiles run as three TF32
# products on mma.sync, each fragment split in registers (split_mma_spec: no copies, one launch),
# from SPLIT_MMA_MIN_MACS multiply-adds up. Device time on an H100 (docs/bench/research/
# split_mma.py, CUDA graphs over operands rotated past L2, 28 float32 products of kgen bench calls'
# draw that the skinny family leaves, seed 109201; raw docs/bench/split_mma_h100_1206/): from 2^25
# up, the 64 x 64 tiles three blocks an SM ran 1.10-1.58x the SIMT tiles (all 9 the SIMT tiles ran;
# 247x2049x104 14.2 -> 9.0 µs, 7197x3352x81 187 -> 152), and at 2^24.7-2^24.8 0.96-1.39x; below
# 2^24 mostly slower (0.63-1.06x, calls of 3-7 µs). 128 x 64 tiles two an SM ran 0.49-1.50x (worse
# than 64 x 64 where rows or columns are few), 128 x 128 tiles 0.33-1.19x. Largest error 9.1e-7
# (SGEMM's on the same products 6.5e-7, the SIMT tiles' 3.6e-7).
# ... and where its 64 x 64 tiles are at least SPLIT_MMA_MIN_TILES (one an SM of an H100). As users
# call it (kgen bench calls, host time included, an H200, 16 products the rule without the bound
# took, drawn for the check (seeds 109402-109403), both weight orders, the tree before in the same
# command; docs/bench/split_mma_h200_1206/): 1.06x (row-major B) and 1.15x (W.t()) faster,
# 0.77-1.41x. The four calls below 0.90x were the products of 35-43 tiles (47x2695x308,
# 393x290x684; the SIMT tiles' shipped specs run them in 32 x 64 tiles with K split up to 8 ways,
# more blocks than 64 x 64 tiles whose K stays whole), so the bound was set after that check: on
# the 12 products it keeps, 1.11x and 1.22x (0.95-1.41x). On a fresh draw (H100, 14 products of
# seed 109501 it takes; docs/bench/split_mma_h100_1207/): 1.07x row-major (0.77-1.42x, the losses
# all of a K below 80), 1.33x W.t() (1.07-1.95x).
SPLIT_MMA_MIN_MACS = 1 << 25
SPLIT_MMA_MIN_TILES = 132
# Up to this K the split runs 64 x 64 x 16 tiles four blocks an SM (117-126 registers, no spills)
# instead of 64 x 64 x 32 three an SM: with one or a few k tiles a block, a fourth block an SM hides
# more of each block's prologue and epilogue than the deeper k tile saves. Device time on an H200
# (docs/bench/research/short_k_split.py, CUDA graphs over operands rotated past L2, M and N
# 512-8192, K 16-160 drawn, both weight orders; raw docs/bench/short_k_split_h200_1207/): chosen
# among seven tile forms on seed 110001 (0.864x cuBLAS SGEMM against 0.778x for the 32-deep
# tiles), then checked on seed 110002: 0.877x against 0.774x, faster on all 12 (1.01-1.40x). The
# drawn K reached 89 on both seeds, so the bound stays near it. Above it (K 96-768, seeds
# 110003-110004, H100; docs/bench/short_k_wide_h100_1207/) these tiles ran 0.72-0.78x the wgmma
# split where that runs, and level with the 32-deep tiles at K 97-152 (1.005x).
SPLIT_MMA_SHORT_K = 96


def split_mma_suits(M: int, N: int, K: int) -> bool:
    """Whether dispatch runs an M x N x K float32 product (TF32 off) as split_mma_spec on sm_90:
    split_tf32_suits does not take it, it has at least SPLIT_MMA_MIN_MACS multiply-adds and at
    least SPLIT_MMA_MIN_TILES tiles of 64 x 64."""
    return (not split_tf32_suits(M, N, K) and M * N * K >= SPLIT_MMA_MIN_MACS
            and c_tiles(M, N, 64, 64) >= SPLIT_MMA_MIN_TILES)


def split_tf32_suits(M: int, N: int, K: int) -> bool:
    """Whether dispatch runs an M x N x K float32 product (TF32 off) as split_tf32 on the
    wgmma kernel (sm_90): large enough (SPLIT_TF32_MIN_MACS, or SPLIT_TF32_DEEP_MIN_MACS where
    K is at least SPLIT_TF32_DEEP_K), or narrow with K at most its larger side, and its copies
    within SPLIT_TF32_MAX_BYTES."""
    small, large = min(M, N), max(M, N)
    if K < SPLIT_TF32_MIN_K or 8 * (M + N) * (-(-K // 32) * 32) > SPLIT_TF32_MAX_BYTES:
        return False
    if small >= SPLIT_TF32_MIN_SIDE:
        return M * N * K >= (SPLIT_TF32_DEEP_MIN_MACS if K >= SPLIT_TF32_DEEP_K else SPLIT_TF32_MIN_MACS)
    return small >= SPLIT_TF32_NARROW_SIDE and K <= large

# Defaults when nothing was tuned: 128x256 (or 128x128) blocks of 64x64 warp tiles for 16-bit
# types, four stages, swizzled; TF32 and float64 read fragments element by element, for which
# padded rows avoid bank conflicts in both operand orders.
_DEFAULTS = {
    "float16": dict(tile=(128, 256, 32), warp_tile=(64, 64), stages=4, smem_layout="swizzle"),
    "bfloat16": dict(tile=(128, 256, 32), warp_tile=(64, 64), stages=4, smem_layout="swizzle"),
    "float32": dict(tile=(128, 128, 32), warp_tile=(64, 64), stages=3, smem_layout="pad", tf32=True),
    "float64": dict(tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad"),
}


def _element_workspace_split(tiles: int, K: int) -> int:
    """K slices of the 16-bit element tiles' workspace split: up to two waves of blocks, each
    slice at least 128 deep, at most 16."""
    return max(1, min(16, -(-2 * _SMS // tiles), K // 128))


@register_family
@dataclasses.dataclass(frozen=True)
class TensorMatmul(Spec):
    """A tensor-core matmul kernel (warp-level mma.sync). docs/tensorcore.md explains each field.

    dtype        input type: float16, bfloat16 (float32 accumulation), float32 (computed as
                 TF32: needs tf32=True), float64 (float64 tensor cores).
    out_dtype    "" (the input type) or "float32" (16-bit inputs only).
    tf32         compute float32 inputs as TF32 (inputs rounded to 10 mantissa bits). Must
                 be true for float32 (kgen.Matmul is the IEEE float32 kernel), false otherwise.
    split_tf32   float32 at float32-level accuracy on the TF32 tensor cores (needs tf32): each
                 value x of both operands becomes hi = x rounded to TF32 and lo = (x - hi)
                 rounded to TF32, and the kernel sums lo_a*hi_b + hi_a*lo_b + hi_a*hi_b. wgmma
                 runs it as one TF32 product of inner size 3K (copies of A as [hi lo] and B as
                 [lo hi] along K, written by kgen_tc_split_copies before each call, read as A's hi lo
                 hi against B's lo hi hi); mma.sync
                 splits each fragment in registers (no copies, one launch) and adds the tensor
                 cores' sums into float32 registers every SPLIT_PROMOTE_K of K.
    tile         (BM, BN, BK): the C block one thread block computes, and the K step.
    warp_tile    (WM, WN): the C block one warp computes; BM/WM x BN/WN warps per block.
    stages       shared-memory buffers in the cp.async pipeline (2-6): stages-1 K steps are
                 in flight while one is multiplied. The wgmma kernel's TMA ring takes 2-16,
                 as many as fit shared memory.
    smem_layout  "swizzle": 16-byte chunks XOR-permuted per row; "pad": spare elements after
                 each row. Both keep fragment reads free of bank conflicts for 16-bit types;
                 for TF32/float64 element reads "pad" is the conflict-free one.
    raster       "row" or "col": blocks walk bands of raster_group tile rows (columns)
                 across the columns (rows), so blocks running together share tiles in L2.
    raster_group tile rows (columns) per band; 1 is plain row-major (column-major) order.
    split_k      split K over up to this many blocks per C tile; split_merge says how the
                 slices' sums are added.
    split_merge  "workspace": each slice's sums go to a float32/float64 workspace and a
                 deterministic reduction kernel adds them and applies alpha and beta (a
                 second launch). "cluster" (sm_90 and newer, split_k 2-8, not persistent,
                 cluster 1; the mma.sync kernel needs its BM x BN sums to fit its stages):
                 the split_k blocks of a C tile run as one thread block cluster along z,
                 keep their sums in shared memory and add them through distributed shared
                 memory, in rank order (the workspace's order: the same sums), in the same
                 launch.
    layout_a/b   "row" or "col": storage of A and B ("col" takes a transposed view as is).
    min_blocks   the second __launch_bounds__ argument (0: leave it out).
    repack       when an operand's pointer or leading dimension rules out 16-byte copies,
                 copy it to an aligned buffer and run the cp.async kernel (else the
                 element-load entry point runs on it as it is).
    mma_shape    "" (the dtype's shape) or, for float64, "m16n8k16" / "m16n8k8": sm_90's 16-row
                 float64 mma.sync, 16 or 8 k an instruction instead of m8n8k4's 4 (needs
                 sm_90; BK a multiple of the k).
    instruction  "mma_sync": warp-level mma.sync fed by cp.async (sm_80 and newer).
                 "wgmma": Hopper's warpgroup wgmma.mma_async reading 128-byte-swizzled
                 shared tiles that the tensor memory accelerator (TMA) fills, one producer
                 warpgroup and BM/64 consumer warpgroups of 64 x BN each (sm_90a;
                 float16/bfloat16 with BK = 64, TF32 with BK = 32; warp_tile = (64, BN);
                 repack on; TF32 operands that are not K-major are copied transposed).
    persistent   wgmma only: one block an SM walks the work units (C tiles x K slices) in
                 turn, its stage ring running on across them, instead of one block a unit.
    cluster      1, or 2 (wgmma only, not persistent): thread block clusters of two blocks
                 computing C tiles (2i, j) and (2i + 1, j), each loading its own A tile and
                 half of the shared B tile for both (TMA multicast).
    swap_ab      wgmma only: each consumer warpgroup computes its 64 columns of C's tile
                 transposed, B's tile as the instruction's 64-row operand and A's BM rows as its
                 N (wgmma.m64nBMk16), so a tile of few rows (BM any multiple of 8 from 8 to
                 256) multiplies no padding; BN/64 consumer warpgroups, warp_tile = (BM, 64).
                 16-bit inputs with A K-major (layout_a "row"); not persistent, cluster 1.
    b_realign    wgmma only, 16-bit, BN of 64 or 128, cluster 1: the producer warpgroup reads B
                 itself, copying the aligned 16-byte windows around each row's stretch (rows
                 of k for a row-major B, of n for a K-major one) into a staging ring
                 (REALIGN_DEPTH fills ahead, cp.async) and shifting them into the swizzled
                 stage, so a B whose rows are not 16-byte aligned (a row pitch that is no
                 multiple of 8 elements, an odd pointer) is read in place instead of copied
                 aligned first. kgen.matmul turns it on for a K-major such B (with_realigned_b).
    b_phased     swap_ab only (16-bit, A row-major, BN of 64 or 128), not b_realign: B's rows
                 are read by TMA as up to PHASE_MAPS row sets, rows r, r + g, r + 2g, ... in
                 set r, where g (1, 2, 4 or 8) is the fewest rows whose pitch spans a multiple
                 of 16 bytes, so that each set is a matrix TMA can name (a 16-byte aligned base,
                 set r's rows starting r pitches in). TMA reads from 16-byte aligned addresses
                 only, so a box starts up to PHASE_PAD values before the tile's and lands
                 unswizzled, and the consumers load their wgmma operand from it into registers
                 at the set's shift (wgmma with A from registers). A row-major B's rows are k:
                 the kernel's K walks set after set, and A is copied with its columns in that
                 order (kgen_tc_phase_a) before each product. W.t()'s rows are n: a tile's 64 n
                 are 64 / g rows of each set, K and A as they are. kgen.matmul turns it on for
                 a B that TMA cannot read as it is, row-major or W.t() of an even pitch
                 (with_phased_b).
    b_classes    W.t() read by the same row sets, one set a C tile (swap_ab, 16-bit, A
                 row-major; not b_realign or b_phased, not persistent, stream_k, wave_tail or
                 cluster 2): a tile's BN columns of C are BN consecutive rows of one set, read
                 by TMA from the set's aligned column into the usual swizzled tile, and A is
                 copied once a call as one shifted image a set (kgen_tc_class_a) so that image
                 column k meets value k - sh of the set's rows (sh: where they start past their
                 aligned column); the consumers zero the sh values before each row's first in
                 its first k tile. So the wgmma kernel reads such a weight in place with no
                 shift of its own, as it reads an aligned one (with_classed_b).
    l2_prefetch  wgmma only, B read by TMA as it is (not b_realign, b_phased or b_classes), cluster 1:
                 KiB of B's tiles (whole k tiles, at least one) of its first unit that each
                 block asks L2 for (cp.async.bulk.prefetch.tensor) before it waits for the
                 kernel before it (griddepcontrol.wait; a programmatic launch overlaps the two).
                 0: none; 8, 16, 32 or 64.
    wave_tail    1, or 2 to 8 (wgmma, 16-bit inputs, the general or the transposed tiles:
                 not persistent, cluster 2, split_k, b_realign or b_phased): where a product's C
                 tiles pass whole waves of the GPU's SMs, the columns whose tiles fill those
                 waves (whole_wave_columns) run as one launch and the tiles past them as a
                 second launch of the same tiles with K split wave_tail ways, merged in clusters
                 (split_merge="cluster"; tail_spec), so that the last wave's few tiles take a
                 fraction of a wave. Elsewhere one launch, as with 1. The kernel's code is the
                 same.
    stream_k     the transposed tiles (swap_ab) with B read by TMA as it is and the epilogue
                 staged: the k steps of all C tiles shared out evenly among one block an SM
                 (stream_k_blocks), each block's range a piece of one tile or the end of one and
                 the start of the next; a piece that does not end its tile goes to a float32
                 workspace slot, and the block whose piece ends the tile adds those, in block
                 order, before it stores the tile (one launch, deterministic). Where the tiles
                 are as many as the SMs or more, one block a tile, as without it.
    edge_copies  mma_sync only: how a block whose C tile passes M or N (an edge block) copies a
                 k tile inside its K range. "clamped": each 16-byte copy clamps its row and
                 column and forms its address in 64 bits, every k tile. "masked": the bytes of
                 each of a thread's copies that lie inside the matrix are fixed for the block, so
                 they are counted once a block and the tile is copied as a whole tile is (each
                 copy at a fixed distance from the thread's first), those outside reading nothing
                 (cp.async zero-fills them). Blocks inside both operands copy whole tiles either
                 way; the last k tile of a ragged K and the element-load entry clamp either way.
    edge_mma     mma_sync only: "all" (every warp issues every MMA of its warp tile) or "inside":
                 a warp skips the MMA row tiles (and their A fragments) whose rows all lie past
                 M. Their A rows are zeros and their sums are never stored, so only the blocks of
                 the last row of tiles change; where M leaves most of that tile empty (65 rows
                 in 64-row tiles, 67 in a 96-row one) that is much of their work.
    fragments_ahead
                 mma_sync only: each warp requests the next k-step's fragments from shared
                 memory before it issues this k-step's MMAs, across k tiles too (at a tile's
                 last k-step it waits for the next tile and refills the stage it has just read
                 first), so the loads' latency hides behind MMAs rather than stalling them. Two
                 fragment sets in registers; all `stages` hold k tiles in flight before the loop.
                 Needs an even number of k-steps a tile (BK / MMA_K).
    l2_fetch     mma_sync only: 0, or 64, 128 or 256: each cp.async of an operand asks the L2
                 to fetch that many bytes around the bytes it reads (PTX's .L2::<n>B prefetch
                 size), so the eight 16-byte pieces of a 128-byte tile row go to DRAM as one
                 request for their line. 0 leaves the hint out.
    l1_copies    mma_sync only: the 16-byte cp.async of the operands allocate in L1 too
                 (cp.async.ca rather than .cg, which reads the L2 alone), so a 32-byte sector
                 that a tile row shares with the same row's next k tile (a row that starts off a
                 sector) can come from L1 the second time.
    repack_a     with repack off: an A whose pointer or leading dimension rules out 16-byte
                 copies is copied to an aligned buffer first (kgen_tc_repack), so that
                 kgen_tc_matmul_elem copies only B element by element and A by 16-byte copies
                 (A aligned as it is needs no copy). For a weight B of an odd pitch beside a
                 small A, which the element loads would otherwise read one element a copy too.
    spread_elements  with repack off, float32/float64, smem_layout "pad": the element-load
                 entry's thread that copies chunk j of a tile row copies the row's elements
                 j, j + CH, ... (CH chunks a row) instead of the chunk's own, so that each
                 element copy of a warp reads a contiguous stretch of a row rather than one
                 element of each 16-byte chunk.
    """

    kernel: ClassVar[str] = "tensor_matmul"
    template: ClassVar[str] = "tensorcore.cu.j2"

    dtype: str = "float16"
    out_dtype: str = ""
    tf32: bool = False
    split_tf32: bool = False
    tile: tuple[int, int, int] = (128, 128, 32)
    warp_tile: tuple[int, int] = (64, 64)
    stages: int = 3
    smem_layout: str = "swizzle"
    raster: str = "row"
    raster_group: int = 8
    split_k: int = 1
    layout_a: str = "row"
    layout_b: str = "row"
    min_blocks: int = 0
    repack: bool = True
    instruction: str = "mma_sync"
    mma_shape: str = ""
    persistent: bool = False
    cluster: int = 1
    split_merge: str = "workspace"
    swap_ab: bool = False
    b_realign: bool = False
    b_phased: bool = False
    b_classes: bool = False
    l2_prefetch: int = 0
    wave_tail: int = 1
    stream_k: bool = False
    edge_copies: str = "clamped"
    edge_mma: str = "all"
    fragments_ahead: bool = False
    l2_fetch: int = 0
    l1_copies: bool = False
    repack_a: bool = False
    spread_elements: bool = False

    def __post_init__(self) -> None:
        # The output type spelled as the input type is the default: one spec, one key.
        if self.out_dtype == self.dtype:
            object.__setattr__(self, "out_dtype", "")
        super().__post_init__()

    def validate(self) -> None:
        if self.dtype not in ITEMSIZE:
            fail("dtype", self.dtype, f"one of {sorted(ITEMSIZE)}")
        if self.dtype == "float32" and not self.tf32:
            fail("tf32", self.tf32, "true for dtype='float32' (the tensor cores read float32 as TF32; "
                 "kgen.Matmul computes in IEEE float32)")
        if self.dtype != "float32" and self.tf32:
            fail("tf32", self.tf32, f"false for dtype={self.dtype!r} (TF32 applies to float32 inputs)")
        if self.split_tf32 and not self.tf32:
            fail("split_tf32", self.split_tf32, "False unless tf32=True (the split runs on the TF32 tensor cores; "
                 "dtype='float32' only)")
        if self.split_tf32 and self.instruction == "mma_sync" and self.fragments_ahead:
            fail("split_tf32", self.split_tf32, "False with fragments_ahead on mma.sync (the split holds each "
                 "fragment as hi and lo already: one register set)")
        if self.split_tf32 and self.wgmma and self.tile[1] > SPLIT_MAX_BN.get(self.tile[0], 0):
            fail("tile[1] (BN)", self.tile[1], f"at most {SPLIT_MAX_BN.get(self.tile[0], 0)} with split_tf32 and "
                 f"BM = {self.tile[0]} (a thread holds twice the accumulators: BN registers)")
        if self.out_dtype not in ("", "float32"):
            fail("out_dtype", self.out_dtype, f"'' (the input type, {self.dtype}) or 'float32'")
        if self.out_dtype == "float32" and self.dtype == "float64":
            fail("out_dtype", self.out_dtype, "'' for float64 inputs (a float64 product is stored as float64)")
        if self.instruction not in INSTRUCTIONS:
            fail("instruction", self.instruction, f"one of {INSTRUCTIONS}")
        if self.swap_ab and self.instruction != "wgmma":
            fail("swap_ab", True, "False with instruction='mma_sync' (the transposed tile is the wgmma kernel's)")
        if self.b_realign and self.instruction != "wgmma":
            fail("b_realign", True, "False with instruction='mma_sync' (the mma.sync kernel reads any B in place "
                 "with repack=False)")
        if self.b_phased:
            self._validate_phased()
        if self.b_classes:
            self._validate_classes()
        if self.l2_prefetch not in TMA_PREFETCH_KIB:
            fail("l2_prefetch", self.l2_prefetch, f"one of {list(TMA_PREFETCH_KIB)} (KiB)")
        if self.l2_prefetch and (self.instruction != "wgmma" or self.b_realign or self.b_phased or self.b_classes
                                 or self.cluster > 1):
            fail("l2_prefetch", self.l2_prefetch, "0 unless instruction='wgmma' reads B by TMA as it is (not "
                 "b_realign, b_phased or b_classes) with cluster=1")
        for name, allowed in (("edge_copies", EDGE_COPIES), ("edge_mma", EDGE_MMA)):   # defaults first
            value = getattr(self, name)
            if value not in allowed:
                fail(name, value, f"one of {allowed}")
            if value != allowed[0] and self.instruction == "wgmma":
                fail(name, value, f"{allowed[0]!r} with instruction='wgmma' (the edge variants are the mma.sync "
                     "kernel's: TMA zero-fills the wgmma kernel's tile edges, and a warpgroup's instruction "
                     "covers all its rows)")
        if self.instruction == "wgmma":
            self._validate_wgmma()
        elif self.persistent:
            fail("persistent", self.persistent, "False with instruction='mma_sync' (the persistent schedule is the "
                 "wgmma kernel's)")
        if self.cluster not in (1, 2):
            fail("cluster", self.cluster, "1 or 2 (blocks a thread block cluster)")
        if self.wave_tail != 1:
            self._validate_wave_tail()
        if self.stream_k:
            self._validate_stream_k()
        if self.cluster > 1 and not self.wgmma:
            fail("cluster", self.cluster, "1 with instruction='mma_sync' (clusters share tiles by TMA multicast, "
                 "the wgmma kernel's)")
        if self.cluster > 1 and self.persistent:
            fail("cluster", self.cluster, "1 with persistent=True (the persistent schedule runs single blocks)")
        if self.split_merge not in SPLIT_MERGES:
            fail("split_merge", self.split_merge, f"one of {SPLIT_MERGES}")
        if self.split_merge == "cluster":
            self._validate_cluster_merge()
        if self.mma_shape not in F64_SHAPES:
            fail("mma_shape", self.mma_shape, "'' (the dtype's shape), 'm16n8k16' or 'm16n8k8' (float64 on sm_90)")
        if self.mma_shape and self.dtype != "float64":
            fail("mma_shape", self.mma_shape, f"'' for dtype={self.dtype!r} (m16n8k16 and m16n8k8 are options "
                 "for float64)")
        mm, mn, mk = self.mma_mnk
        BM, BN, BK = self.tile
        WM, WN = self.warp_tile
        for name, v in (("tile[0] (BM)", BM), ("tile[1] (BN)", BN)):
            if (v < 16 or v > 256 or v % 16) and not (self.swap_ab and name == "tile[0] (BM)"):
                fail(name, v, "a multiple of 16 from 16 to 256")
        item = ITEMSIZE[self.dtype]
        if BK < mk or BK % mk or BK * item > 256:
            fail("tile[2] (BK)", BK, f"a multiple of {mk} (the MMA's K for {self.dtype}) of at most "
                 f"{256 // item} elements (256 bytes)")
        for name, v, block in (("warp_tile[0] (WM)", WM, BM), ("warp_tile[1] (WN)", WN, BN)):
            if (v < 16 or v % 16 or block % v) and not self.swap_ab:   # swap_ab: (BM, 64), checked with wgmma's
                fail(name, v, f"a multiple of 16 that divides the block tile's {block}")
        warps = (BM // WM) * (BN // WN)
        if warps > 16:
            fail("warp_tile", self.warp_tile, f"{warps} warps per block; at most 16 (512 threads) allowed")
        acc_regs = self.accumulator_registers
        if acc_regs > 128:
            fail("warp_tile", self.warp_tile, f"{acc_regs} accumulator registers per thread; at most 128 "
                 f"(the fragments and addresses need the rest of the 255)")
        if self.fragments_ahead and self.instruction == "wgmma":
            fail("fragments_ahead", self.fragments_ahead, "False with instruction='wgmma' (its warpgroups read "
                 "their operands from shared memory by descriptor: there are no fragments to load ahead)")
        if self.fragments_ahead and (BK // mk) % 2:
            fail("fragments_ahead", self.fragments_ahead, f"False unless BK / MMA_K is even (here {BK} / {mk}): "
                 "the two fragment sets alternate within a k tile")
        if self.l2_fetch not in L2_FETCH_BYTES:
            fail("l2_fetch", self.l2_fetch, f"one of {list(L2_FETCH_BYTES)} (bytes)")
        if self.l2_fetch and self.instruction == "wgmma":
            fail("l2_fetch", self.l2_fetch, "0 with instruction='wgmma' (TMA reads its tiles; l2_prefetch is its hint)")
        if self.l1_copies and self.instruction == "wgmma":
            fail("l1_copies", self.l1_copies, "False with instruction='wgmma' (TMA reads its tiles)")
        if self.repack_a and self.repack:
            fail("repack_a", self.repack_a, "False unless repack=False (repack copies every unaligned operand "
                 "already; repack_a copies A alone for mma.sync's element-load entry)")
        if self.spread_elements and (self.repack or self.instruction == "wgmma" or ITEMSIZE[self.dtype] < 4
                                     or self.smem_layout != "pad"):
            fail("spread_elements", self.spread_elements, "False unless repack=False, instruction='mma_sync', "
                 "dtype float32 or float64 and smem_layout='pad' (it orders the element-load entry's 4- and "
                 "8-byte copies along rows that are linear in shared memory)")
        most_stages = WGMMA_MAX_STAGES if self.wgmma else 6
        if not 2 <= self.stages <= most_stages:
            fail("stages", self.stages, f"an integer from 2 to {most_stages}"
                 + (" with instruction='wgmma' (as many as fit shared memory)" if self.wgmma else ""))
        if self.smem_layout not in ("swizzle", "pad"):
            fail("smem_layout", self.smem_layout, "'swizzle' or 'pad'")
        if self.smem_layout == "swizzle":
            for operand, (_, length) in (("A", self._tile_dims("A")), ("B", self._tile_dims("B"))):
                ch = length * item // 16
                if ch not in (1, 2, 4) and ch % 8:
                    fail("smem_layout", "swizzle", f"'pad' here: {operand}'s shared rows are {ch} chunks of 16 bytes; "
                         "the swizzle needs 1, 2, 4 or a multiple of 8")
        if self.raster not in ("row", "col"):
            fail("raster", self.raster, "'row' or 'col'")
        if not 1 <= self.raster_group <= 32:
            fail("raster_group", self.raster_group, "an integer from 1 to 32")
        if not 1 <= self.split_k <= 64:
            fail("split_k", self.split_k, "an integer from 1 to 64")
        for name in ("layout_a", "layout_b"):
            if getattr(self, name) not in ("row", "col"):
                fail(name, getattr(self, name), "'row' or 'col'")
        if not 0 <= self.min_blocks <= 8:
            fail("min_blocks", self.min_blocks, "an integer from 0 (left out) to 8")
        if self.shared_bytes > MAX_SHARED_BYTES:
            fail("tile", self.tile, f"needs {self.shared_bytes} bytes of shared memory ({self.stages} stages); "
                 f"the device limit is {MAX_SHARED_BYTES}")

    def _validate_cluster_merge(self) -> None:
        """split_merge='cluster': the K slices of a C tile are one cluster of split_k blocks."""
        most = MAX_CLUSTER_MERGE if self.wgmma else MAX_CLUSTER_MERGE_MMA
        if not 2 <= self.split_k <= most:
            fail("split_merge", "cluster", f"'workspace' unless split_k is 2 to {most} with instruction="
                 f"{self.instruction!r} (the blocks of one thread block cluster); split_k is {self.split_k}")
        if self.persistent or self.cluster > 1:
            fail("split_merge", "cluster", "'workspace' with persistent=True or cluster=2 (their blocks are not "
                 "the K slices of one tile)")
        BM, BN, _ = self.tile
        if not self.wgmma:
            # The mma.sync kernel keeps the slice's sums (the accumulator type) over its stages.
            need = self.sums_bytes
            if need > self.shared_bytes:
                fail("split_merge", "cluster", f"'workspace' with tile {self.tile} and {self.stages} stages (the "
                     f"{BM} x {BN} sums take {need} bytes of shared memory, the stages {self.shared_bytes})")
            return
        if _partial_tile_bytes(BM, BN) > self.stages * self.stage_bytes:
            fail("stages", self.stages, f"at least {-(-_partial_tile_bytes(BM, BN) // self.stage_bytes)} "
                 f"with split_merge='cluster' and tile {self.tile} (the {BM} x {BN} float32 sums are kept "
                 "over the stage ring)")

    def _validate_wave_tail(self) -> None:
        """wave_tail > 1: the tiles past the whole waves are a second launch (tail_spec)."""
        value = self.wave_tail
        if not 1 <= value <= MAX_CLUSTER_MERGE:
            fail("wave_tail", value, f"an integer from 1 (one launch) to {MAX_CLUSTER_MERGE} (the K slices of the "
                 "last tiles' clusters)")
        if self.instruction != "wgmma" or self.dtype not in ("float16", "bfloat16"):
            fail("wave_tail", value, "1 unless instruction='wgmma' with float16 or bfloat16 inputs")
        if self.persistent or self.cluster > 1 or self.split_k > 1 or self.b_realign or self.b_phased:
            fail("wave_tail", value, "1 with persistent, cluster=2, split_k > 1, b_realign or b_phased (the second "
                 "launch runs the same tiles' blocks, one a C tile, with K split in clusters)")
        try:
            self.tail_spec()
        except ValueError as exc:
            fail("wave_tail", value, f"1 for these tiles: the second launch's spec is not valid ({exc})")

    def _validate_stream_k(self) -> None:
        """stream_k: pieces of the transposed tiles, added by the block that ends each tile."""
        if not (self.instruction == "wgmma" and self.swap_ab):
            fail("stream_k", True, "False unless instruction='wgmma' and swap_ab=True (the pieces are the "
                 "transposed tiles' sums)")
        if (self.split_k > 1 or self.persistent or self.cluster > 1 or self.b_realign or self.b_phased
                or self.l2_prefetch or self.wave_tail > 1):
            fail("stream_k", True, "False with split_k > 1, persistent, cluster=2, b_realign, b_phased, l2_prefetch "
                 "or wave_tail > 1 (stream-K sets each block's k range itself, with B read by TMA as it is)")
        if not self.staged_epilogue:
            BM, BN, _ = self.tile
            fail("stages", self.stages, f"at least {-(-_partial_tile_bytes(BM, BN) // self.stage_bytes)} with "
                 f"stream_k and tile {self.tile} (the block that ends a tile adds the pieces to its {BM} x {BN} "
                 "float32 sums over the stage ring)")

    def stream_k_blocks(self, M: int, N: int, K: int, sms: int) -> int:
        """stream_k: the blocks of an M x N x K product on `sms` SMs: one an SM where the C tiles
        are fewer (at most one a k step), else one a tile. Pure."""
        BM, BN, BK = self.tile
        tiles = c_tiles(M, N, BM, BN)
        steps = max(1, -(-K // BK))
        return max(tiles, min(sms, tiles * steps))

    def companion_specs(self) -> tuple[Spec, ...]:
        """wave_tail's second launch runs the tiles of tail_spec(), a kernel of its own."""
        return (self.tail_spec(),) if self.wave_tail > 1 else ()

    def tail_spec(self) -> "TensorMatmul":
        """The spec of wave_tail's second launch: these tiles with K split wave_tail ways, merged
        in clusters."""
        spec = self.replace(wave_tail=1, split_k=self.wave_tail, split_merge="cluster")
        assert isinstance(spec, TensorMatmul)
        return spec

    def _validate_phased(self) -> None:
        """b_phased: B's row sets by TMA, A copied in their order."""
        if self.instruction != "wgmma":
            fail("b_phased", True, "False with instruction='mma_sync' (the row sets are TMA maps, the wgmma "
                 "kernel's)")
        if self.dtype not in ("float16", "bfloat16"):
            fail("b_phased", True, f"False for dtype={self.dtype!r} (TF32 reads B K-major, after a copy)")
        if self.layout_a != "row":
            fail("b_phased", True, "False unless layout_a is 'row' (the transposed tiles read A K-major; a "
                 "row-major B's sets reorder A's columns)")
        if self.b_realign:
            fail("b_phased", True, "False with b_realign=True (the producer threads read B themselves there)")
        if not self.swap_ab or self.tile[1] not in (64, 128):
            fail("b_phased", True, "False unless swap_ab=True and BN is 64 or 128 (B's tile is the instruction's "
                 "operand from registers, loaded by its consumers)")

    def _validate_classes(self) -> None:
        """b_classes: W.t()'s row sets a C tile, A copied shifted a set."""
        if self.instruction != "wgmma" or not self.swap_ab:
            fail("b_classes", True, "False unless instruction='wgmma' and swap_ab=True (a tile's columns of C "
                 "are one set's rows of W.t(), the instruction's 64-row operand)")
        if self.layout_b != "col":
            fail("b_classes", True, "False unless layout_b='col' (the sets are rows of W.t(), n; a row-major B "
                 "takes b_phased)")
        if self.b_realign or self.b_phased:
            fail("b_classes", True, "False with b_realign or b_phased (each reads B's unaligned rows its own way)")
        if self.persistent or self.stream_k or self.cluster > 1 or self.wave_tail != 1:
            fail("b_classes", True, "False with persistent, stream_k, cluster=2 or wave_tail > 1 (one tile a "
                 "block, its column map fixed by its set)")

    def _validate_swap(self) -> None:
        """swap_ab: A's rows are the wgmma N, B's tile the instruction's 64-row operand."""
        BM = self.tile[0]
        if self.dtype not in ("float16", "bfloat16"):
            fail("swap_ab", True, f"False for dtype={self.dtype!r} (the transposed tile is the 16-bit kernel's)")
        if BM < 8 or BM > 256 or BM % 8:
            fail("tile[0] (BM)", BM, "a multiple of 8 from 8 to 256 with swap_ab (the wgmma N)")
        if self.layout_a != "row":
            fail("swap_ab", True, "False with layout_a='col' (A's tile is the instruction's K-major operand; "
                 "an M-major one needs 64-row boxes)")
        if self.persistent or self.cluster > 1:
            fail("swap_ab", True, "False with persistent=True or cluster=2")
        cap = register_cap(self.threads) // 8 * 8
        if BM // 2 + SWAP_OTHER_REGISTERS > cap:
            fail("tile[0] (BM)", BM, f"at most {2 * (cap - SWAP_OTHER_REGISTERS)} with swap_ab and tile[1] (BN)="
                 f"{self.tile[1]}: {self.threads} threads leave {cap} registers a thread, and the BM / 2 float32 "
                 f"sums need {SWAP_OTHER_REGISTERS} more beside them")

    def _validate_wgmma(self) -> None:
        """The wgmma kernel's own rules (the shared ones are checked after)."""
        if self.dtype not in ("float16", "bfloat16", "float32"):
            fail("instruction", "wgmma", f"'mma_sync' for dtype={self.dtype!r} (the wgmma kernel takes float16, "
                 "bfloat16 and float32 as TF32)")
        BM, BN, BK = self.tile
        if self.swap_ab:
            self._validate_swap()
        elif BM not in (64, 128, 192):
            fail("tile[0] (BM)", BM, "64, 128 or 192 with instruction='wgmma' (one to three consumer warpgroups of "
                 "64 rows)")
        elif BM == 192 and BN > 192:
            fail("tile[1] (BN)", BN, "64, 128 or 192 with tile[0] (BM)=192 (four warpgroups a block leave 128 "
                 "registers a thread: 64 x BN float32 sums per consumer warpgroup must fit in them)")
        if BN not in (64, 128, 192, 256):
            fail("tile[1] (BN)", BN, "64, 128, 192 or 256 with instruction='wgmma' (the wgmma N, in 64-wide TMA boxes)")
        row = 128 // ITEMSIZE[self.dtype]
        if BK != row:
            fail("tile[2] (BK)", BK, f"{row} with instruction='wgmma' and dtype={self.dtype!r} (one 128-byte "
                 "swizzled row of k values)")
        if self.swap_ab and self.warp_tile != (BM, 64):
            fail("warp_tile", self.warp_tile, f"({BM}, 64) with swap_ab: each consumer warpgroup computes the "
                 "block's BM rows of 64 columns")
        if not self.swap_ab and self.warp_tile != (64, BN):
            fail("warp_tile", self.warp_tile, f"(64, {BN}) with instruction='wgmma': each consumer warpgroup "
                 "computes 64 rows of the block's BN columns")
        if self.smem_layout != "swizzle":
            fail("smem_layout", self.smem_layout,
                 "'swizzle' with instruction='wgmma' (TMA writes 128-byte swizzled tiles)")
        if not self.repack:
            fail("repack", self.repack, "True with instruction='wgmma' (TMA needs 16-byte aligned rows; unaligned "
                 "operands are copied to aligned buffers)")
        if self.min_blocks not in (0, 1):
            fail("min_blocks", self.min_blocks,
                 "0 or 1 with instruction='wgmma' (one block an SM holds the accumulators)")
        if self.b_realign and not (self.kind in ("f16", "bf16") and BN in (64, 128) and self.cluster == 1
                                   and (BM <= 128 or self.swap_ab)):
            fail("b_realign", True, "False unless the inputs are 16-bit, BN is 64 or 128, BM at most 128 (one or two "
                 "consumer warpgroups: the tiles measured with it) and cluster=1 (the producer threads shift B's "
                 "rows into boxes of 64)")

    # -- derived sizes --------------------------------------------------------------
    @property
    def kind(self) -> str:
        return _mma_kind(self.dtype)

    @property
    def ctype(self) -> str:
        return _C_IN[self.dtype][0]

    @property
    def output_dtype(self) -> str:
        return self.out_dtype or self.dtype

    @property
    def accumulator(self) -> str:
        return "float64" if self.dtype == "float64" else "float32"

    @property
    def wgmma(self) -> bool:
        return self.instruction == "wgmma"

    @property
    def consumers(self) -> int:
        """wgmma: consumer warpgroups, 64 rows of C each (64 columns with swap_ab)."""
        return self.tile[1] // 64 if self.swap_ab else self.tile[0] // 64

    @property
    def threads(self) -> int:
        if self.wgmma:   # the consumer warpgroups and one producer warpgroup
            return 128 * (self.consumers + 1)
        return 32 * (self.tile[0] // self.warp_tile[0]) * (self.tile[1] // self.warp_tile[1])

    @property
    def vec(self) -> int:
        """Elements in 16 bytes: the unit of every copy."""
        return 16 // ITEMSIZE[self.dtype]

    @property
    def mma_mnk(self) -> tuple[int, int, int]:
        """(M, N, K) of one MMA instruction."""
        return F64_SHAPES[self.mma_shape] if self.mma_shape else MMA_SHAPE[self.kind]

    @property
    def accumulator_registers(self) -> int:
        if self.wgmma:   # a 64 x BN tile over 128 threads (64 x BM with swap_ab)
            return (self.tile[0] if self.swap_ab else self.tile[1]) // 2
        mm, mn, _ = self.mma_mnk
        WM, WN = self.warp_tile
        per_tile = mm * mn // 32  # accumulators a lane holds per MMA tile
        return (WM // mm) * (WN // mn) * per_tile * (2 if self.dtype == "float64" else 1)

    def k_major(self, operand: str) -> bool:
        """Whether the operand's rows in memory run along K (row-major A, column-major B)."""
        return (self.layout_a == "row") if operand == "A" else (self.layout_b == "col")

    def transposes(self, operand: str) -> bool:
        """Whether every call copies the operand, transposed, to a K-major buffer first: wgmma
        reads TF32 tiles K-major only (the transpose bits are for 16-bit types). The split
        copies of split_tf32 write both operands K-major themselves."""
        return self.wgmma and self.kind == "tf32" and not self.k_major(operand) and not self.split_tf32

    @property
    def split_copies(self) -> bool:
        """Whether split_tf32 copies both operands as hi/lo segments along K before each call
        (wgmma, which reads its operands from shared memory itself); mma.sync splits each
        fragment in registers instead."""
        return self.split_tf32 and self.wgmma

    def kernel_k_major(self, operand: str) -> bool:
        """Whether the main kernel reads the operand K-major (after any transposing or split copy)."""
        return self.k_major(operand) or self.transposes(operand) or self.split_copies

    def _tile_dims(self, operand: str) -> tuple[int, int]:
        """(rows, contiguous length) of the operand's shared tile, in its storage order."""
        BM, BN, BK = self.tile
        other = BM if operand == "A" else BN
        return (other, BK) if self.kernel_k_major(operand) else (BK, other)

    def _pad(self, operand: str) -> int:
        """Spare elements after each shared row in the "pad" layout, chosen so that the rows
        a fragment read touches at once fall in distinct banks (16-bit ldmatrix: one 16-byte
        chunk; TF32: one chunk along K, two along M/N; float64: two chunks)."""
        if self.smem_layout != "pad":
            return 0
        if self.kind in ("f16", "bf16"):
            return 8
        if self.kind == "tf32":
            return 4 if self.kernel_k_major(operand) else 8
        return 4

    def _stride(self, operand: str) -> int:
        return self._tile_dims(operand)[1] + self._pad(operand)

    def _tile_elems(self, operand: str) -> int:
        return self._tile_dims(operand)[0] * self._stride(operand)

    @property
    def shared_bytes(self) -> int:
        if self.wgmma:
            staging = REALIGN_DEPTH * self.tile[1] * REALIGN_ROW_BYTES if self.b_realign else 0
            return self.stages * self.stage_bytes + 1024 + staging
        return self.stages * (self._tile_elems("A") + self._tile_elems("B")) * ITEMSIZE[self.dtype]

    def _arch_requirement(self, cc: int) -> tuple[str, str] | None:
        """(what this spec needs, the field value that lifts it) where a GPU of compute
        capability `cc` cannot run it, else None."""
        if self.mma_shape and cc < 90:
            return f"mma_shape={self.mma_shape!r} runs on sm_90 and newer GPUs", "mma_shape=''"
        if self.wgmma and cc != 90:
            return "instruction='wgmma' runs on sm_90 GPUs (H100, H200) only", "instruction='mma_sync'"
        if self.split_merge == "cluster" and cc < 90:
            return "split_merge='cluster' needs thread block clusters (sm_90 and newer)", "split_merge='workspace'"
        return None

    def target_arch(self, arch: str) -> str:
        need = self._arch_requirement(arch_number(arch))
        if need:
            raise ValueError(f"{need[0]}; this target is {arch}: use {need[1]}")
        return "sm_90a" if self.wgmma else arch

    def dynamic_shared_bytes(self, entry: str) -> int:
        return self.shared_bytes if entry in ("kgen_tc_matmul", "kgen_tc_matmul_elem", "kgen_tc_wgmma") else 0

    def form(self) -> str:
        parts = [f"TensorMatmul {'wgmma' if self.instruction == 'wgmma' else 'mma.sync'}"]
        if self.split_tf32:
            parts.append("split TF32")
        elif self.tf32:
            parts.append("TF32")
        if self.swap_ab:
            parts.append("rows as N")
        if self.b_classes or self.b_phased:
            parts.append("B by row sets")
        elif self.b_realign:
            parts.append("B realigned")
        return ", ".join(parts)

    def _swizzle(self, operand: str) -> tuple[int, int]:
        """(DIV, MASK) of the XOR swizzle: chunk c of row r goes to c ^ ((r / DIV) & MASK)."""
        ch = self._tile_dims(operand)[1] // self.vec
        span = min(ch, 8)
        return 8 // span, span - 1

    def template_context(self) -> dict[str, Any]:
        BM, BN, BK = self.tile
        WM, WN = self.warp_tile
        mm, mn, mk = self.mma_mnk
        out_t, out2_t, out_kind = _C_OUT[self.output_dtype]
        a_rows, a_len = self._tile_dims("A")
        b_rows, b_len = self._tile_dims("B")
        a_div, a_mask = self._swizzle("A")
        b_div, b_mask = self._swizzle("B")
        return dict(
            kind=self.kind, ldmatrix=self.kind in ("f16", "bf16"), ptx_in=self.kind,
            mma_shape=f"m{mm}n{mn}k{mk}", MMA_M=mm, MMA_N=mn, MMA_K=mk,
            in_t=_C_IN[self.dtype][0], bits_t=_C_IN[self.dtype][1],
            acc_t="double" if self.dtype == "float64" else "float", out_t=out_t, out2_t=out2_t, out_kind=out_kind,
            out_name=self.output_dtype,
            BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, WARPS_M=BM // WM, WARPS_N=BN // WN, THREADS=self.threads,
            STAGES=self.stages, VEC=self.vec, MI=WM // mm, NI=WN // mn, ACC=mm * mn // 32,
            a_kmajor=self.kernel_k_major("A"), b_kmajor=self.kernel_k_major("B"), swizzle=self.smem_layout == "swizzle",
            split_a_rows=self.k_major("A"), split_b_rows=self.k_major("B"),
            A_ROWS=a_rows, A_CH=a_len // self.vec, A_STRIDE=self._stride("A"), A_PAD=self._pad("A"),
            B_ROWS=b_rows, B_CH=b_len // self.vec, B_STRIDE=self._stride("B"), B_PAD=self._pad("B"),
            A_TILE=self._tile_elems("A"), B_TILE=self._tile_elems("B"),
            A_SW_DIV=a_div, A_SW_MASK=a_mask, B_SW_DIV=b_div, B_SW_MASK=b_mask,
            shared_bytes=self.shared_bytes, wgmma=self.wgmma, CONSUMERS=self.consumers if self.wgmma else 0,
            WG_K=32 // ITEMSIZE[self.dtype], transpose=self.transposes("A") or self.transposes("B"),
            split3=self.split_tf32 and self.wgmma, split_regs=self.split_tf32 and not self.wgmma,
            PROMOTE_TILES=SPLIT_PROMOTE_TILES if self.wgmma else max(1, SPLIT_PROMOTE_K // BK),
            persistent=self.persistent, cluster=self.cluster, kmerge=self.split_merge == "cluster",
            l2_prefetch=self.l2_prefetch,
            PREFETCH_TILES=max(1, self.l2_prefetch * 1024 // (BN * BK * ITEMSIZE[self.dtype])),
            PART_STRIDE=BN + _PART_PAD, swap=self.swap_ab, WG_N=BM if self.swap_ab else BN,
            staged=self.staged_epilogue, stream_k=self.stream_k,
            b_realign=self.b_realign, REALIGN_DEPTH=REALIGN_DEPTH, b_phased=self.b_phased, PHASE_MAPS=PHASE_MAPS,
            b_classes=self.b_classes,
            PHASE_PAD=PHASE_PAD,
            staged_out=self.staged_unaligned_output, masked_edges=self.edge_copies == "masked",
            mma_inside=self.edge_mma == "inside", fragments_ahead=self.fragments_ahead,
            l2_fetch=self.l2_fetch, l1_copies=self.l1_copies, repack_a=self.repack_a,
            spread=self.spread_elements,
            # Element-wise cp.async (4 or 8 bytes) in the element-load entry; 16-bit elements
            # are narrower than any cp.async and go through registers.
            elem_async=not self.wgmma and ITEMSIZE[self.dtype] >= 4, ITEM=ITEMSIZE[self.dtype])

    @property
    def stage_bytes(self) -> int:
        """wgmma: bytes of one stage of the ring (A's and B's tiles; b_phased: B's box PHASE_PAD
        columns wider, unswizzled)."""
        BM, BN, _ = self.tile
        if self.b_phased:
            return _phased_stage_bytes(BM, BN, self.layout_b)
        return _wgmma_stage_bytes(BM, BN)

    @property
    def staged_unaligned_output(self) -> bool:
        """Whether the mma.sync kernel stores an output whose rows allow no pair stores (an odd
        N or pitch; the call passes no OUT_PAIRS flag) through shared memory, consecutive
        threads on consecutive elements of a row, rather than each thread's pairs one element
        at a time from its registers: BN a multiple of 64 and the BM x BN sums (float32, or
        float64 for float64) within the stages' shared memory. On an H100, 7013x891x59 in
        bfloat16 took 44.5 µs stored from the registers against 23.3 at N = 896, where pairs
        are stored (docs/tensorcore-record.md, "Unaligned mid-size products"); float64 products of a
        short K took 1.6-1.9x the time at N + 1 (docs/tensorcore-record.md, "Float64 outputs of an odd
        N through shared memory")."""
        return not self.wgmma and self.tile[1] % 64 == 0 and self.sums_bytes <= self.shared_bytes

    @property
    def sums_bytes(self) -> int:
        """Bytes of the mma.sync kernel's BM x BN sums in its accumulator type, which the staged
        output and the cluster merge keep over the stages."""
        BM, BN, _ = self.tile
        return BM * BN * (8 if self.dtype == "float64" else 4)

    @property
    def staged_epilogue(self) -> bool:
        """Whether the wgmma kernel's consumers put a tile's sums in shared memory (over the
        stage ring, which must hold the BM x BN float32 sums) for the whole block to store as
        rows of C in a short loop, rather than each consumer thread storing its own values
        (docs/tensorcore-record.md, "The epilogue"). 16-bit inputs only: the float32 products on
        TF32 ran 4-8% slower staged (4096³, 3000x5000x700, H100). Not with a persistent
        schedule (the producer fills the ring for the next tile meanwhile), clusters of two (the
        other block writes into the ring), or the cluster merge (which stages its own sums)."""
        BM, BN, _ = self.tile
        return (self.wgmma and self.kind in ("f16", "bf16") and not self.persistent and self.cluster == 1
                and self.split_merge != "cluster" and not self.b_classes
                and _partial_tile_bytes(BM, BN) <= self.stages * self.stage_bytes)

    def pads_a_pitch(self, M: int, N: int, K: int, lda: int) -> bool:
        """Whether a call copies an A (row-major, K-major for the wgmma kernel) that it could
        read in place to a buffer whose rows are A_PITCH_BYTES apart before the product: the
        16-bit transposed tiles (swap_ab), A's rows not that far apart already, at least
        A_PITCH_MIN_ROWS of them and a B of A_PITCH_MIN_B_BYTES or more (the constants say why).
        An A that is copied anyway takes that pitch in every wgmma kernel. Pure."""
        item = ITEMSIZE[self.dtype]
        return (self.wgmma and self.swap_ab and self.kind in ("f16", "bf16") and self.layout_a == "row" and K > 0
                and (lda * item) % A_PITCH_BYTES != 0 and M >= A_PITCH_MIN_ROWS
                and N * K * item >= A_PITCH_MIN_B_BYTES)

    def split_plan(self, K: int, ways: int | None = None) -> tuple[int, int]:
        """(number of K slices, K elements per slice) for inner size K split at most `ways`
        ways (default: split_k). Slices are whole BK steps; none is empty."""
        BK = self.tile[2]
        ways = self.split_k if ways is None else ways
        if ways <= 1 or K <= BK:
            return 1, K
        steps = -(-K // BK)
        per = -(-steps // ways)
        return -(-steps // per), per * BK

    def launches_programmatically(self, M: int, N: int, K: int, sms: int = _SMS) -> bool:
        """Whether an M x N x K product of this spec is launched with programmatic stream
        serialization (PROGRAMMATIC_MAX_SLICE_K says where): the wgmma kernel only, whose
        blocks wait for the kernels before them (griddepcontrol.wait) before touching memory."""
        if not self.wgmma:
            return False
        grid, _, _ = self.launch_geometry(M, N, K, sms)
        return grid[0] * grid[1] * grid[2] >= sms or self.split_plan(K)[1] <= PROGRAMMATIC_MAX_SLICE_K

    def launch_geometry(self, M: int, N: int, K: int, sms: int = _SMS
                        ) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared bytes) for an M x N x K product on a GPU of `sms`
        multiprocessors (which only the persistent schedule and stream_k read). Pure."""
        BM, BN, _ = self.tile
        splits, _ = self.split_plan(K)
        tiles = c_tiles(M, N, BM, BN)
        if self.persistent:
            return (max(1, min(tiles * splits, sms)), 1, 1), (self.threads, 1, 1), self.shared_bytes
        if self.stream_k:
            return (self.stream_k_blocks(M, N, K, sms), 1, 1), (self.threads, 1, 1), self.shared_bytes
        if self.cluster > 1:   # pairs of tile rows: a rank-1 block past M computes nothing it stores
            tile_rows = -(-M // BM)
            tiles = (tile_rows + 1) // 2 * 2 * -(-N // BN)
        if self.split_merge == "cluster":   # whole clusters: a block past the last slice adds zeros
            splits = self.split_k
        return (tiles, 1, splits), (self.threads, 1, 1), self.shared_bytes

    # -- the family interface (see Spec) ----------------------------------------------
    @classmethod
    def normalize_problem(cls, problem):
        return normalize_mnk(problem, "tensor matmul")

    @classmethod
    def _check_dtype_name(cls, dtype: str) -> None:
        if dtype not in ITEMSIZE:
            raise ValueError(f"dtype={dtype!r} is not allowed for tensor-core matmul: one of {sorted(ITEMSIZE)}")

    @classmethod
    def default_spec(cls, problem, dtype):
        """float16/bfloat16 and TF32: the wgmma kernel (wgmma_default_spec), which dispatch
        replaces by mma_default_spec on a GPU other than sm_90 (prune_reason rules it out
        there); products of at most SMALL_PRODUCT_MACS multiply-adds mma.sync with element
        loads (one launch, no copies: element_spec for 16-bit inputs, mma_default_spec with
        repack off for TF32), except few rows that swap_suits takes (larger ones take
        element_spec where dispatch asks for element loads: for_layouts).
        float64: few_rows_f64_spec where few_rows_f64_suits; row_tile_f64_spec where
        rows_f64_suits and f64_row_tile picks a tile of F64_ROW_TILES (65-96 rows); else
        mma_default_spec, with sm_90's m16n8k16 shape and 3 blocks an SM (0.75-0.90x cuBLAS DGEMM
        on an H100 at 2000x3000x1000, 4096³ and 8192³, against 0.47-0.50x with m8n8k4;
        docs/tensorcore-record.md) and K split by wave_split (by f64_sm_split from F64_BUSY_TILES_PER_SM
        tiles an SM up at up to F64_TENSOR_MAX_ROWS rows). At up to F64_TENSOR_MAX_ROWS rows
        wide_f64_spec replaces the row tiles or the 64 x 64 ones where K stays whole and its
        tiles take fewer waves (F64_WIDE_MARGIN). Dispatch replaces these by m8n8k4 below sm_90."""
        if dtype in ("float16", "bfloat16", "float32"):
            p = cls.normalize_problem(problem)
            small = p["M"] * p["N"] * p["K"] <= SMALL_PRODUCT_MACS
            if small and not cls.swap_suits(p["M"], p["N"], p["K"], dtype):
                if dtype in ("float16", "bfloat16"):
                    return cls.element_spec(p, dtype)
                return cls.mma_default_spec(p, dtype).replace(repack=False)
            return cls.wgmma_default_spec(problem, dtype)
        if dtype == "float64":
            p = cls.normalize_problem(problem)
            return f64_cluster_merged(cls._float64_default(p), p["M"], p["N"], p["K"])
        return cls.mma_default_spec(problem, dtype)

    @classmethod
    def _float64_default(cls, p):
        """default_spec's float64 tiles and K split for the normalized problem `p` (how the
        slices merge aside)."""
        if cls.few_rows_f64_suits(p["M"], p["N"], p["K"]):
            return cls.few_rows_f64_spec(p)
        if cls.few_columns_f64_suits(p["M"], p["N"], p["K"]):
            return cls.few_columns_f64_spec(p)
        if cls.rows_f64_suits(p["M"], p["N"], p["K"]) and f64_row_tile(p["M"]) != 64:
            return cls._wide_f64_where_fewer_waves(cls.row_tile_f64_spec(p), p)
        spec = cls.mma_default_spec(p, "float64")
        # Three 128-thread blocks an SM (ptxas then keeps to 170 registers, no spills): 6-18%
        # faster than one at 4096³, 8192³ and 2000x3000x1000 on an H100; F64_STAGES stages,
        # edge blocks copied as F64_EDGE_COPIES says.
        # K split to fill the waves of those blocks (wave_split: K whole below 512), past a
        # whole wave too at up to F64_TENSOR_MAX_ROWS rows, where busy SMs take f64_sm_split's
        # (below, after the wide tiles' test, which compares the waves' counts).
        tiles = c_tiles(p["M"], p["N"], spec.tile[0], spec.tile[1])
        split = wave_split(tiles, _SMS * 3, p["K"], whole_waves=p["M"] <= F64_TENSOR_MAX_ROWS)
        spec = dataclasses.replace(spec, mma_shape="m16n8k16", min_blocks=3, stages=F64_STAGES,
                                   edge_copies=F64_EDGE_COPIES, split_k=split,
                                   l1_copies=f64_rows_off_sectors(p["K"]))
        if spec.tile[:2] == (64, 64) and p["M"] <= F64_TENSOR_MAX_ROWS:
            chosen = cls._wide_f64_where_fewer_waves(spec, p)
            if chosen is spec and tiles >= F64_BUSY_TILES_PER_SM * _SMS:
                # Two blocks' work an SM without a split: K split by the SM model.
                chosen = spec.replace(split_k=f64_sm_split(p["M"], p["N"], p["K"], tiles))
            return chosen
        return spec

    @classmethod
    def _wide_f64_where_fewer_waves(cls, spec, p):
        """wide_f64_spec where it and `spec` (a float64 tile) both leave K whole and the wide
        tiles' waves cost at least F64_WIDE_MARGIN less (f64_wave_cost), else `spec`."""
        wide = cls.wide_f64_spec(p)
        if spec.split_k == 1 and wide.split_k == 1 and (
                f64_wave_cost(wide, p["M"], p["N"]) < (1 - F64_WIDE_MARGIN) * f64_wave_cost(spec, p["M"], p["N"])):
            return wide
        return spec

    @classmethod
    def wide_f64_spec(cls, problem):
        """float64 tiles of 64 x 128 (the constants at F64_WIDE_MARGIN say where they run and
        how that was chosen): 32 x 64 warp tiles of m16n8k8, two blocks an SM, K split by
        wave_split as the 64 x 64 default's is, its stages and edge copies."""
        p = cls.normalize_problem(problem)
        tiles = c_tiles(p["M"], p["N"], 64, 128)
        return cls(dtype="float64", tile=(64, 128, 16), warp_tile=(32, 64), stages=F64_STAGES, smem_layout="pad",
                   mma_shape="m16n8k8", min_blocks=2, edge_copies=F64_EDGE_COPIES,
                   l1_copies=f64_rows_off_sectors(p["K"]),
                   split_k=wave_split(tiles, _SMS * 2, p["K"], whole_waves=p["M"] <= F64_TENSOR_MAX_ROWS))

    @classmethod
    def short_k_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether the default runs M x N x K as a short-K product (short_k_spec): 16-bit inputs,
        K of at most SHORT_K_MAX and M and N of at least SHORT_K_MIN_SIDE."""
        return dtype in ("float16", "bfloat16") and K <= SHORT_K_MAX and min(M, N) >= SHORT_K_MIN_SIDE

    @classmethod
    def short_k_spec(cls, problem, dtype):
        """mma.sync in tiles that keep two or three blocks an SM, operands read in place (the
        constants at SHORT_K_MAX say how each was chosen)."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        tiles = c_tiles(p["M"], p["N"], 128, 128)
        if tiles >= SHORT_K_WIDE_TILES or p["K"] >= SHORT_K_WIDE_K:
            return cls(dtype=dtype, tile=(128, 128, 32), warp_tile=(64, 32), stages=4, min_blocks=2, repack=False)
        return cls(dtype=dtype, tile=(128, 64, 32), warp_tile=(32, 32), stages=3, min_blocks=3, repack=False)

    @classmethod
    def few_rows_f64_suits(cls, M: int, N: int, K: int) -> bool:
        """Whether a float64 M x N x K product runs few_rows_f64_spec: F64_FEW_MIN_ROWS to
        F64_FEW_MAX_ROWS rows, no more than its columns, N and K of at least F64_FEW_MIN_SIDE."""
        return F64_FEW_MIN_ROWS <= M <= F64_FEW_MAX_ROWS and _f64_wide_enough(M, N, K)

    @classmethod
    def few_columns_f64_suits(cls, M: int, N: int, K: int) -> bool:
        """Whether a float64 M x N x K product runs few_columns_f64_spec on the FP64 tensor
        cores however few its multiply-adds: F64_FEW_COLUMNS on, F64_FEW_COLUMNS_MIN to
        F64_FEW_COLUMNS_MAX columns, fewer than its rows, at least F64_FEW_COLUMNS_MIN_ROWS rows
        and F64_FEW_COLUMNS_MIN_K of K."""
        return (F64_FEW_COLUMNS and F64_FEW_COLUMNS_MIN <= N <= F64_FEW_COLUMNS_MAX and N < M
                and M >= F64_FEW_COLUMNS_MIN_ROWS and K >= F64_FEW_COLUMNS_MIN_K)

    @classmethod
    def rows_f64_suits(cls, M: int, N: int, K: int) -> bool:
        """Whether a float64 M x N x K product runs on the FP64 tensor cores however few its
        multiply-adds (dispatch sends smaller float64 products to the SIMT tiles): the few-row
        products of few_rows_f64_suits and those of up to F64_TENSOR_MAX_ROWS rows, no more than
        its columns, N and K of at least F64_FEW_MIN_SIDE."""
        return F64_FEW_MIN_ROWS <= M <= F64_TENSOR_MAX_ROWS and _f64_wide_enough(M, N, K)

    @classmethod
    def row_tile_f64_spec(cls, problem, bm: int = 0):
        """float64 tiles of `bm` rows (one of F64_ROW_TILES; 0: f64_row_tile's for M, which must
        be one) and 64 columns, two blocks an SM (the constants at F64_ROW_TILES say where they
        run and how that was chosen): 32 x 32 warp tiles of m16n8k16 at 96 rows, 64 x 32 at 128,
        F64_STAGES stages, edge blocks copied as F64_EDGE_COPIES says, copies allocating in L1
        where f64_rows_off_sectors, K split by wave_split over those blocks, past a whole wave too."""
        p = cls.normalize_problem(problem)
        warps = {96: (32, 32), 128: (64, 32)}
        if not bm and f64_row_tile(p["M"]) not in warps:
            raise ValueError(f"row_tile_f64_spec: M={p['M']} takes the 64 x 64 default's rows (f64_row_tile); "
                             f"pass bm, one of {F64_ROW_TILES}")
        bm = bm or f64_row_tile(p["M"])
        if bm not in warps:
            raise ValueError(f"row_tile_f64_spec: bm={bm} is not allowed: one of {F64_ROW_TILES} (rows a tile)")
        tiles = c_tiles(p["M"], p["N"], bm, 64)
        return cls(dtype="float64", tile=(bm, 64, 16), warp_tile=warps[bm], stages=F64_STAGES, smem_layout="pad",
                   mma_shape="m16n8k16", min_blocks=2, edge_copies=F64_EDGE_COPIES,
                   l1_copies=f64_rows_off_sectors(p["K"]),
                   split_k=wave_split(tiles, _SMS * 2, p["K"], whole_waves=True))

    @classmethod
    def few_rows_f64_spec(cls, problem, max_rows=F64_FEW_MAX_ROWS):
        """float64 tiles sized to a few rows (the constants at F64_FEW_MAX_ROWS say how this
        was chosen): as few row tiles of at most `max_rows` rows as cover M, each of M's share
        rounded up to 16 (one tile of the rows rounded up to 16 where M fits), 64 columns of
        16 x 32 warp tiles, the most resident blocks an SM that shared memory (in either operand
        order) and 128 registers a thread allow, up to 8, K split by wave_split, and whole L2
        lines fetched around each copy (F64_FEW_L2_FETCH)."""
        p = cls.normalize_problem(problem)
        row_tiles = max(1, -(-p["M"] // max_rows))
        share = -(-p["M"] // row_tiles)
        bm = min(max_rows, -(-share // 16) * 16)
        spec = cls(dtype="float64", tile=(bm, 64, 16), warp_tile=(16, 32), stages=4, smem_layout="pad",
                   mma_shape="m16n8k16", min_blocks=1)
        per_sm = spec.resident_blocks_at_128_registers()
        tiles = c_tiles(p["M"], p["N"], bm, 64)
        return spec.replace(min_blocks=per_sm, split_k=wave_split(tiles, _SMS * per_sm, p["K"]),
                            l2_fetch=F64_FEW_L2_FETCH, l1_copies=f64_rows_off_sectors(p["K"]))

    def resident_blocks_at_128_registers(self) -> int:
        """Blocks of this mma.sync tile an SM holds at once, up to 8, where each thread keeps to
        128 registers: as many as 227 KiB of shared memory (the larger of the tile's needs in
        every operand order) and 65536 registers allow."""
        shared = max(dataclasses.replace(self, layout_a=a, layout_b=b).shared_bytes
                     for a in ("row", "col") for b in ("row", "col"))
        threads = (self.tile[0] // self.warp_tile[0]) * (self.tile[1] // self.warp_tile[1]) * 32
        return max(1, min(8, (227 * 1024) // shared, 65536 // (threads * 128)))

    @classmethod
    def few_columns_f64_spec(cls, problem, rows_tile=None):
        """float64 tiles sized to a few columns, the mirror image of few_rows_f64_spec (the
        constants at F64_FEW_COLUMNS_BM say how this was chosen): as few column tiles of at most
        64 columns as cover N, each of N's share rounded up to 16, `rows_tile` rows (None: 128
        where a tile has 16 columns and A holds F64_FEW_COLUMNS_TALL_A elements or more, else
        F64_FEW_COLUMNS_BM) of 32 x 16 warp tiles, the most resident blocks an SM that shared
        memory (in either operand order) and 128 registers a thread allow, up to 8, K split by
        wave_split, and whole L2 lines fetched around each copy (kgen.matmul reads an unaligned
        A, the large operand, in place: dispatch's float64 overrides)."""
        p = cls.normalize_problem(problem)
        col_tiles = max(1, -(-p["N"] // 64))
        share = -(-p["N"] // col_tiles)
        bn = min(64, -(-share // 16) * 16)
        if rows_tile is None:
            rows_tile = 128 if bn == 16 and p["M"] * p["K"] >= F64_FEW_COLUMNS_TALL_A else F64_FEW_COLUMNS_BM
        spec = cls(dtype="float64", tile=(rows_tile, bn, 16), warp_tile=(32, 16), stages=4, smem_layout="pad",
                   mma_shape="m16n8k16", min_blocks=1)
        per_sm = spec.resident_blocks_at_128_registers()
        tiles = c_tiles(p["M"], p["N"], rows_tile, bn)
        return spec.replace(min_blocks=per_sm, split_k=wave_split(tiles, _SMS * per_sm, p["K"]),
                            l2_fetch=F64_FEW_L2_FETCH, l1_copies=f64_rows_off_sectors(p["K"]))

    @classmethod
    def element_spec(cls, problem, dtype, clusters: bool = True):
        """The mma.sync kernel reading a 16-bit product's operands in place (repack off), for
        the products that default_spec and the element-load rule give it: short_k_spec where
        short_k_suits, else 64x64 blocks four an SM, K split where the tiles are few, the slices
        added in a cluster, or with clusters=False (a GPU without them) through a workspace (the
        constants at ELEMENT_SPLIT_TILES and ELEMENT_CLUSTER_MERGE say how each was chosen)."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        if cls.short_k_suits(p["M"], p["N"], p["K"], dtype):
            return cls.short_k_spec(p, dtype)
        tiles = c_tiles(p["M"], p["N"], 64, 64)
        spec = cls(dtype=dtype, tile=(64, 64, 32), warp_tile=(32, 32), stages=2, min_blocks=4, repack=False)
        K = p["K"]
        workspace = (_element_workspace_split(tiles, K)
                     if tiles < ELEMENT_SPLIT_TILES and K >= ELEMENT_SPLIT_MIN_K else 1)

        def sliced(n: int, merge: str = "workspace") -> "TensorMatmul":
            if n <= 1:
                return spec
            deep = ELEMENT_SPLIT_STAGES if K >= ELEMENT_SPLIT_MIN_K else spec.stages
            split = spec.replace(split_k=n, split_merge=merge, stages=deep)
            assert isinstance(split, TensorMatmul)
            return split
        if not (clusters and ELEMENT_CLUSTER_MERGE):
            return sliced(workspace)
        if ELEMENT_CLUSTER_MIN_K <= K <= ELEMENT_CLUSTER_MAX_K and tiles < (
                ELEMENT_SPLIT_TILES if K >= ELEMENT_SPLIT_MIN_K else ELEMENT_CLUSTER_SHORT_K_TILES):
            # One launch: the slices add their sums in a cluster (no workspace, no second kernel).
            split = min(MAX_CLUSTER_MERGE, -(-ELEMENT_CLUSTER_BLOCKS // tiles), K // ELEMENT_CLUSTER_MIN_SLICE)
        elif ELEMENT_CLUSTER_LONG_K and K > ELEMENT_CLUSTER_MAX_K:
            # Past the K bound: the workspace split's slices, in one cluster of up to 16 blocks.
            split = min(MAX_CLUSTER_MERGE_MMA, workspace)
        else:
            return sliced(workspace)
        # As many slices as whole 32-deep k steps make: a cluster block past the last slice
        # would only add zeros.
        return sliced(spec.split_plan(K, split)[0], "cluster")

    @classmethod
    def stream_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether the default runs M x N x K as a streaming product (stream_spec): 16-bit
        inputs, at most STREAM_MAX_ROWS rows, N and K of at least STREAM_MIN_SIDE, more than
        SMALL_PRODUCT_MACS multiply-adds (default_spec runs fewer as one mma.sync launch), its
        tiles at most one a SM, and a B of at least STREAM_MIN_BYTES or one whose
        general tiles (general_wgmma_spec, before any K split) are fewer than half the SMs."""
        if not (dtype in ("float16", "bfloat16") and 1 <= M <= STREAM_MAX_ROWS and N >= STREAM_MIN_SIDE
                and K >= STREAM_MIN_SIDE and M * N * K > SMALL_PRODUCT_MACS):
            return False
        if _stream_tiles(M, N)[1] > _SMS:
            return False
        if N * K * 2 >= STREAM_MIN_BYTES:
            return True
        tiles = cls.general_wgmma_spec({"M": M, "N": N, "K": K}, dtype).launch_geometry(M, N, K)[0][0]
        return tiles < _SMS // 2

    @classmethod
    def stream_spec(cls, problem, dtype):
        """The wgmma kernel for a product of few rows (constants above STREAM_MAX_ROWS say how
        each field was chosen): every SM streams its share of B through a ring as deep as
        shared memory holds; the rows of A, few and re-read from L2, cost little."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"]
        rows = -(-M // 64)
        BN, tiles = _stream_tiles(M, N)
        spec = cls(dtype=dtype, tile=(64, BN, 128 // ITEMSIZE[dtype]), warp_tile=(64, BN),
                   stages=wgmma_deepest_stages(64, BN), instruction="wgmma")
        if rows == 1:
            split = _most_slices(STREAM_CLUSTER_SPLITS, K, tiles, CLUSTER_WAVE_BLOCKS)
            return spec.replace(split_k=split, split_merge="cluster") if split > 1 else spec
        split = _most_slices(STREAM_SPLITS, K, tiles, _SMS)
        return spec.replace(split_k=split)

    @classmethod
    def swap_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether the default runs M x N x K with A's rows as the wgmma N (swap_spec): 16-bit
        inputs, N and K of at least STREAM_MIN_SIDE, and at most SWAP_WIDE_ROWS rows (however
        few the multiply-adds: 2x1728x1088 ran in 5.2 µs against the skinny forms' 7.7, device
        time on an H100), or at most SWAP_MAX_ROWS against one wave of 64-column tiles."""
        return dtype in ("float16", "bfloat16") and N >= STREAM_MIN_SIDE and K >= STREAM_MIN_SIDE and \
            1 <= M <= SWAP_MAX_ROWS and (M <= SWAP_WIDE_ROWS or -(-N // 64) <= _SMS)

    @classmethod
    def swap_spec(cls, problem, dtype, narrow: bool = False):
        """The wgmma kernel with A's rows as the instruction's N for a product of few rows
        (constants at SWAP_MAX_ROWS say how each field was chosen). Past 256 rows, BM is 256
        (several row tiles). narrow=True leaves out the 128-column tiles of SWAP_128_MIN_GAIN,
        SWAP_128_MIN_K and SWAP_LONG_K (the choice for the layouts those were not measured on)."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"]
        BM = _swap_rows(M)
        BN = 64 if -(-N // 64) <= 2 * _SMS else 128
        tiles = -(-N // BN)
        merge = "cluster"
        two = tiles > _SMS   # two blocks an SM, each with half the ring
        split = _most_slices(SWAP_SPLITS, K, tiles, CLUSTER_WAVE_BLOCKS)
        if not (narrow or two) and BM > SWAP_WIDE_ROWS and K >= SWAP_128_MIN_K:
            wide = -(-N // 128)
            slices = _most_slices(SWAP_SPLITS, K, wide, CLUSTER_WAVE_BLOCKS)
            if wide * slices >= SWAP_128_MIN_GAIN * tiles * split:
                BN, split = 128, slices
            elif split == 1 and K >= SWAP_LONG_K:
                slices = _most_slices(SWAP_SPLITS, K, wide, _SMS)
                if slices > 1:
                    BN, split = 128, slices
                    if wide * slices > CLUSTER_WAVE_BLOCKS[slices]:
                        merge = "workspace"
        spec = cls(dtype=dtype, tile=(BM, BN, 128 // ITEMSIZE[dtype]), warp_tile=(BM, 64),
                   stages=wgmma_ring_stages(BM, BN, 2 if two else 1), instruction="wgmma", swap_ab=True)
        if two:
            wide = -(-N // 128)
            slices = _most_slices(SWAP_SPLITS, K, wide, PHASED_CLUSTER_BLOCKS)
            if slices >= SWAP_WIDE_MIN_SLICES and BM <= SWAP_WIDE_ROWS:
                # Just past the SMs: 128 columns a block, two blocks an SM, K in the slices whose
                # clusters all run at once (SWAP_WIDE_MIN_SLICES says where that won; measured up
                # to 64 rows, and taller tiles' cluster sums need a longer ring than two blocks hold).
                return spec.replace(tile=(BM, 128, spec.tile[2]), stages=wgmma_ring_stages(BM, 128, 2),
                                    split_k=slices, split_merge="cluster")
            return spec
        return spec.replace(split_k=split, split_merge=merge) if split > 1 else spec

    @classmethod
    def split_default_spec(cls, problem):
        """float32 at float32 accuracy on the TF32 tensor cores: split_mma_spec where
        split_mma_suits the product, else the wgmma kernel's (wgmma_default_spec with split_tf32)."""
        p = cls.normalize_problem(problem)
        if split_mma_suits(p["M"], p["N"], p["K"]):
            return cls.split_mma_spec(p)
        return cls.wgmma_default_spec(p, "float32", split_tf32=True)

    @classmethod
    def split_mma_spec(cls, problem):
        """float32 as three TF32 products on mma.sync, split in registers (SPLIT_MMA_MIN_MACS
        says where it runs and how it was chosen): 64 x 64 tiles of 32 x 32 warp tiles, three
        blocks an SM and 32 k a tile (up to SPLIT_MMA_SHORT_K: four blocks and 16 k), three
        stages, operands read in place (one launch), K split by wave_split where the tiles are
        fewer than a wave."""
        p = cls.normalize_problem(problem)
        tiles = c_tiles(p["M"], p["N"], 64, 64)
        bk, blocks = (16, 4) if p["K"] <= SPLIT_MMA_SHORT_K else (32, 3)
        return cls(dtype="float32", tf32=True, split_tf32=True, tile=(64, 64, bk), warp_tile=(32, 32), stages=3,
                   smem_layout="pad", min_blocks=blocks, repack=False,
                   split_k=wave_split(tiles, _SMS * blocks, p["K"]))

    @classmethod
    def wgmma_default_spec(cls, problem, dtype, split_tf32: bool = False):
        """The Hopper kernel for any shape: a 16-bit product of few rows streams (stream_spec);
        otherwise the block tile minimises waves x (BM + BN): the
        waves of blocks over the 132 SMs of an H100/H200, times the operand rows a block
        streams per k. On an H100 this picked the fastest of six tiles for 6 of 7 few-row and
        mid-size bfloat16 products (docs/tensorcore-record.md) and keeps 128x256 on large ones. K is
        split only when even the chosen tiles are fewer than 32 and K >= 2048: split-K's
        workspace and second kernel cost more than idle SMs elsewhere. split_tf32 (float32):
        among the tiles that hold its second set of accumulators (SPLIT_MAX_BN), on 3K."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        if cls.swap_suits(p["M"], p["N"], p["K"], dtype):
            return cls.swap_spec(p, dtype)
        if cls.stream_suits(p["M"], p["N"], p["K"], dtype):
            return cls.swap_over_stream_spec(p, dtype) or cls.stream_spec(p, dtype)
        general = cls.general_wgmma_spec(p, dtype, split_tf32)
        if not split_tf32 and cls.wide_swap_suits(p["M"], p["N"], p["K"], dtype) and general.split_k == 1:
            pick = min((general, *cls.wide_swap_specs(p, dtype)), key=lambda s: s.wide_swap_cost(p))
            return pick.two_row_tiles_spec(p) or pick
        return general

    @classmethod
    def swap_over_stream_spec(cls, problem, dtype) -> "TensorMatmul | None":
        """For a product the streaming tiles take: the wide transposed tiles of 128 columns (the
        rows in one tile, one wave, K whole) where it has SWAP_OVER_STREAM_ROWS rows and
        wide_swap_suits (the constant says why); None elsewhere. Pure."""
        p = cls.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"]
        lo, hi = SWAP_OVER_STREAM_ROWS
        if not (lo <= M <= hi and cls.wide_swap_suits(M, N, K, dtype) and -(-N // 128) <= _SMS):
            return None
        return next((s for s in cls.wide_swap_specs(p, dtype) if s.tile[1] == 128 and s.wave_tail == 1), None)

    @classmethod
    def wide_swap_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether the default weighs the transposed tiles of WIDE_SWAP_BN columns against the
        general tiles (constants at WIDE_SWAP_ROWS): 16-bit inputs, WIDE_SWAP_ROWS rows, K of at
        least WIDE_SWAP_MIN_K, more than one wave of 64-column tiles."""
        return dtype in ("float16", "bfloat16") and WIDE_SWAP_ROWS[0] <= M <= WIDE_SWAP_ROWS[1] and \
            K >= WIDE_SWAP_MIN_K and -(-N // 64) > _SMS

    @classmethod
    def wide_swap_specs(cls, problem, dtype) -> list["TensorMatmul"]:
        """The transposed tiles wide_swap_suits weighs: the rows in one tile, each of
        WIDE_SWAP_BN columns whose sums fit the registers, one block an SM, wave_tail where
        wave_tail_waves takes it."""
        p = cls.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"]
        BM = _swap_rows(M)
        specs = []
        for BN in WIDE_SWAP_BN:
            for tail in dict.fromkeys((wave_tail_waves(M, N, K, BM, BN)[1], 1)):
                try:
                    specs.append(cls(dtype=dtype, tile=(BM, BN, 128 // ITEMSIZE[dtype]), warp_tile=(BM, 64),
                                     stages=wgmma_ring_stages(BM, BN), instruction="wgmma", swap_ab=True,
                                     wave_tail=tail))
                    break
                except ValueError:   # sums past the registers (SWAP_OTHER_REGISTERS), or no valid tail
                    continue
        return specs

    def two_row_tiles_spec(self, problem) -> "TensorMatmul | None":
        """The transposed tiles over two row tiles of half the rows, SWAP_TWO_ROW_BN columns, one
        block an SM, where this spec is wide_swap_specs' 128-column one holding
        SWAP_TWO_ROW_TILES rows in one tile in one wave, K whole, and those tiles make one wave
        too (the constants say why); None elsewhere."""
        p = self.normalize_problem(problem)
        M, N = p["M"], p["N"]
        BM, BN, BK = self.tile
        lo, hi = SWAP_TWO_ROW_TILES
        if not (self.swap_ab and BN == 128 and self.wave_tail == 1 and self.split_k == 1 and lo <= M <= hi
                and BM >= M and -(-N // BN) <= _SMS and 2 * -(-N // SWAP_TWO_ROW_BN) <= _SMS):
            return None
        spec = self.replace(**_two_row_fields(M, BK))
        assert isinstance(spec, TensorMatmul)
        return spec

    def wide_swap_cost(self, problem) -> float:
        """wgmma_default_spec's cost of this spec (the general tiles or the transposed ones) on
        the product: waves (wave_tail_waves, with this spec's wave_tail) x BN x (K x (a + b x
        BM) + c), (a, b, c) = WIDE_SWAP_COST of its kind."""
        p = self.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"]
        BM, BN, _ = self.tile
        waves = wave_tail_waves(M, N, K, BM, BN, self.wave_tail > 1)[0]
        a, b, c = WIDE_SWAP_COST["swap" if self.swap_ab else "general"]
        return waves * BN * (K * (a + b * BM) + c)

    def with_l2_prefetch(self, kib: int = WGMMA_L2_PREFETCH_KIB) -> "TensorMatmul":
        """This spec asking L2 for `kib` KiB of B ahead of the wait where it reads B by TMA as it
        is (not b_realign or b_phased, cluster 1); the spec as it is elsewhere."""
        if not self.wgmma or self.b_realign or self.b_phased or self.cluster > 1:
            return self
        spec = self.replace(l2_prefetch=kib)
        assert isinstance(spec, TensorMatmul)
        return spec

    @classmethod
    def general_wgmma_spec(cls, problem, dtype, split_tf32: bool = False, tall: bool = True):
        """wgmma_default_spec's tiles for a product that does not stream (see there); tall=False
        leaves out the tiles of 192 rows (TALL_ROWS). A 16-bit product of WAVE_TAIL_ROWS rows
        runs the tiles past its whole waves as a second launch where wave_tail_waves says that
        costs less (wave_tail)."""
        p = cls.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"] * (3 if split_tf32 else 1)
        tiles_allowed = [t for t in _WGMMA_TILES if not split_tf32 or t[1] <= SPLIT_MAX_BN[t[0]]]

        def cost(tile: tuple[int, int]) -> tuple[int, int]:
            BM, BN = tile
            tiles = c_tiles(M, N, BM, BN)
            return -(-tiles // _SMS) * (BM + BN), -BM * BN   # ties: the larger tile
        BM, BN = min(tiles_allowed, key=cost)
        sixteen = dtype in ("float16", "bfloat16") and not split_tf32
        row_tiles = next((n for rows, n in WAVE_TAIL_ROW_TILES if M <= rows), 0)
        tail = sixteen and WAVE_TAIL_ROWS[0] <= M <= WAVE_TAIL_ROWS[1]

        def waves(tile: tuple[int, int]) -> tuple[float, int]:   # wave_tail where the rule takes it
            return wave_tail_waves(M, N, K, *tile, tail and -(-M // tile[0]) <= row_tiles)
        if tall and sixteen and TALL_ROWS[0] <= M <= TALL_ROWS[1] and (BM, BN) in TALL_BLOCK_COST:
            # A's rows in one tile of 192 where its waves of blocks cost less (TALL_BLOCK_COST).
            BM, BN = min(((BM, BN), (192, 128), (192, 192)), key=lambda t: waves(t)[0] * TALL_BLOCK_COST[t])
        stages = {(128, 256): 4, (64, 256): 5, (192, 128): 5, (192, 192): 4}.get((BM, BN), 6)
        tiles = c_tiles(M, N, BM, BN)
        split = 1
        if tiles < 32 and K >= 2048:
            split = max(1, min(8, -(-64 // tiles), K // 1024))
        wave_tail = waves((BM, BN))[1] if split == 1 else 1
        return cls(dtype=dtype, tf32=dtype == "float32", tile=(BM, BN, 128 // ITEMSIZE[dtype]), warp_tile=(64, BN),
                   stages=stages, split_k=split, instruction="wgmma", split_tf32=split_tf32, wave_tail=wave_tail)

    @classmethod
    def mma_default_spec(cls, problem, dtype):
        """A sound mma.sync spec for any shape: the dtype's default block (16-bit types: 128x128
        below two waves of 128x256 blocks, a 64-deep K step from 1024 of them up), narrowed
        to 64 along a side of at most 64, and K split when the C tiles alone leave SMs idle
        (fewer than the 132 SMs of an H100/H200) and K is long enough to give each slice
        256 or more."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        kw = dict(_DEFAULTS[dtype])
        BM, BN, BK = kw["tile"]
        WM, WN = kw["warp_tile"]
        big_tiles = c_tiles(p["M"], p["N"], BM, BN)
        if dtype in ("float16", "bfloat16") and big_tiles < 264:
            BN, WN = 128, 64  # fewer, smaller blocks: 128x128 fills the GPU sooner
        elif dtype in ("float16", "bfloat16") and big_tiles >= 1024:
            # Many waves of 128x256 blocks: a 64-deep K step in 3 stages halves the barriers
            # (H100, 8192^3: 336 TFLOP/s against 302 with 32 x 4 stages, fp16 and bf16 alike).
            BK, kw["stages"] = 64, 3
        if p["M"] <= 64 and BM > 64:
            BM, WM = 64, min(WM, 32)
        if p["N"] <= 64 and BN > 64:
            BN, WN = 64, min(WN, 32)
        kw.update(tile=(BM, BN, BK), warp_tile=(WM, WN))
        tiles = c_tiles(p["M"], p["N"], BM, BN)
        if tiles < 132 and p["K"] >= 512:
            split = min(16, -(-264 // tiles), p["K"] // 256)
            if split > 1:
                kw["split_k"] = split
        return cls(dtype=dtype, **kw)

    @classmethod
    def search_space(cls, problem, dtype):
        """Block x warp tiles, BK, pipeline depth, shared layout and raster band, plus split-K
        where the C tiles alone cannot fill the GPU. Invalid combinations are left out."""
        cls._check_dtype_name(dtype)
        p = cls.normalize_problem(problem)
        # The mma.sync default first: dispatch falls back to the first allowed candidate
        # where the device rules the default out (the wgmma kernel off sm_90).
        first = cls.mma_default_spec(p, dtype)
        seen, specs = {first.key}, [first]
        # The family's default next, so that what an untuned call runs is always a candidate (the
        # tuner starts from it and must beat it to replace it).
        default = cls.default_spec(p, dtype)
        if default.key not in seen:
            seen.add(default.key)
            specs.append(default)

        def add(**kw):
            kw.setdefault("tf32", dtype == "float32")
            try:
                s = cls(dtype=dtype, **kw)
            except ValueError:
                return
            if s.key not in seen:
                seen.add(s.key)
                specs.append(s)

        item = ITEMSIZE[dtype]
        bks = [b // item for b in (32, 64, 128)]
        blocks = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
        warps = ((32, 32), (32, 64), (64, 32), (64, 64))
        layouts = ("swizzle", "pad")
        for BM, BN in blocks:
            for WM, WN in warps:
                for BK in bks:
                    for stages in (2, 3, 4, 5):
                        for layout in layouts:
                            add(tile=(BM, BN, BK), warp_tile=(WM, WN), stages=stages, smem_layout=layout)
        for group in (1, 4, 16):
            for raster in ("row", "col"):
                add(**dict(_fields(first), raster=raster, raster_group=group))
        tiles = c_tiles(p["M"], p["N"], 128, 128)
        if tiles < 264 and p["K"] >= 512:
            for split in (2, 3, 4, 6, 8, 12, 16):
                for BM, BN in ((64, 64), (64, 128), (128, 64), (128, 128)):
                    for WM, WN in ((32, 32), (32, 64), (64, 32), (64, 64)):
                        add(tile=(BM, BN, bks[0]), warp_tile=(WM, WN), stages=4, split_k=split,
                            smem_layout=_DEFAULTS[dtype]["smem_layout"])
        if dtype in ("float16", "bfloat16"):
            # Two to four blocks an SM (min_blocks caps each thread's registers): where K is short,
            # one block's loads and stores overlap the others' (short_k_spec).
            for tile, warp, stages, blocks in (((64, 64), (32, 32), 2, 4), ((128, 64), (32, 32), 3, 3),
                                               ((128, 128), (64, 32), 4, 2), ((64, 128), (32, 64), 4, 3)):
                add(tile=(*tile, bks[1]), warp_tile=warp, stages=stages, min_blocks=blocks)
        if dtype == "float64":
            # sm_90's 16-row shapes (pruned on older GPUs): m16n8k16 in 32x32 warp tiles, and
            # m16n8k8, whose smaller fragments leave room for 64x32 and 32x64 ones.
            for BM, BN in ((64, 64), (64, 128), (128, 64), (128, 128)):
                for BK in (16, 32):
                    for stages in (3, 4):
                        add(tile=(BM, BN, BK), warp_tile=(32, 32), stages=stages, smem_layout="pad",
                            mma_shape="m16n8k16")
                        for warp in ((64, 32), (32, 64)):
                            if BK == 16:
                                add(tile=(BM, BN, BK), warp_tile=warp, stages=stages, smem_layout="pad",
                                    mma_shape="m16n8k8")
            if cls.few_rows_f64_suits(p["M"], p["N"], p["K"]):
                # Row tiles sized to a few rows, at three K splits about the default's, and up to
                # 48 rows in m16n8k8 with fragments loaded ahead (1.02x over 24 products on an
                # H100, 0.98-1.07x; docs/tensorcore-record.md, "Fragments loaded ahead"; the 64-row tile's
                # element entry spills with the second fragment set).
                few = cls.few_rows_f64_spec(p)
                for split in sorted({max(1, few.split_k // 2), few.split_k, min(16, few.split_k * 2)}):
                    add(**dict(_fields(few), split_k=split))
                if few.tile[0] <= 48:
                    add(**dict(_fields(few), mma_shape="m16n8k8", fragments_ahead=True))
                for fetch in L2_FETCH_BYTES:   # (add drops the dispatched one by its key)
                    add(**dict(_fields(few), l2_fetch=fetch))
            if cls.rows_f64_suits(p["M"], p["N"], p["K"]) and not cls.few_rows_f64_suits(p["M"], p["N"], p["K"]):
                for bm in F64_ROW_TILES:
                    add(**_fields(cls.row_tile_f64_spec(p, bm)))
            # The default with its copies' L1 allocation the other way (f64_rows_off_sectors picks it
            # from K alone, as if A were contiguous).
            add(**dict(_fields(default), l1_copies=not default.l1_copies))
        if dtype in ("float16", "bfloat16", "float32"):
            # The Hopper kernel: one to three consumer warpgroups, wgmma N from 64 to 256 (at most
            # 192 with three), as many stages as fit, split K where the tiles are few.
            for BM in (64, 128, 192):
                for BN in (64, 128, 192, 256) if BM < 192 else (64, 128, 192):
                    for stages in (2, 3, 4, 5, 6):
                        for split in ((1, 2, 4, 8) if tiles < 264 and p["K"] >= 512 else (1,)):
                            for persistent in (False, True):
                                add(tile=(BM, BN, 128 // item), warp_tile=(64, BN), stages=stages, split_k=split,
                                    instruction="wgmma", persistent=persistent)
                            add(tile=(BM, BN, 128 // item), warp_tile=(64, BN), stages=stages, split_k=split,
                                instruction="wgmma", cluster=2)
                            if split > 1:
                                add(tile=(BM, BN, 128 // item), warp_tile=(64, BN), stages=stages, split_k=split,
                                    instruction="wgmma", split_merge="cluster")
                    slices = wave_tail_slices(-(-p["M"] // BM), -(-p["N"] // BN), p["K"])
                    if dtype != "float32" and slices > 1:
                        # The tiles past the whole waves as a second launch, K split (wave_tail).
                        for stages in (4, 5, 6):
                            add(tile=(BM, BN, 128 // item), warp_tile=(64, BN), stages=stages, instruction="wgmma",
                                wave_tail=slices)
        if dtype in ("float16", "bfloat16") and p["M"] <= 256:
            # A's rows as the wgmma N: the rows rounded up to 8, 64 or 128 columns, the ring of
            # one or two blocks an SM, 1-8 K slices merged in clusters.
            BM = _swap_rows(p["M"])
            for BN in (64, 128):
                for blocks in (1, 2):
                    for split in SWAP_SPLITS if p["K"] >= 512 else (1,):
                        for kib in (0, WGMMA_L2_PREFETCH_KIB, 64):   # B's first tiles asked of L2 ahead of the wait
                            add(tile=(BM, BN, 128 // item), warp_tile=(BM, 64),
                                stages=wgmma_ring_stages(BM, BN, blocks), instruction="wgmma", swap_ab=True,
                                split_k=split, split_merge="cluster" if split > 1 else "workspace", l2_prefetch=kib)
                        if split > 1 and blocks == 1:   # K slices in a workspace (SWAP_LONG_K's, past the clusters)
                            add(tile=(BM, BN, 128 // item), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN),
                                instruction="wgmma", swap_ab=True, split_k=split, split_merge="workspace")
            for BN in WIDE_SWAP_BN:   # one block an SM, K whole, the last wave's tiles split (wave_tail_slices)
                wide = dict(tile=(BM, BN, 128 // item), warp_tile=(BM, 64), stages=wgmma_ring_stages(BM, BN),
                            instruction="wgmma", swap_ab=True)
                for tail in dict.fromkeys((1, wave_tail_slices(1, -(-p["N"] // BN), p["K"]))):
                    add(**wide, wave_tail=tail)
                if c_tiles(p["M"], p["N"], BM, BN) < _SMS:   # fewer tiles than SMs: their k steps shared out
                    add(**wide, stream_k=True)
            if p["M"] > 128:   # two row tiles of half the rows (two_row_tiles_spec's tiles), with stream-K too
                two = dict(_two_row_fields(p["M"], 128 // item), instruction="wgmma", swap_ab=True)
                add(**two)
                if 2 * -(-p["N"] // two["tile"][1]) < _SMS:
                    add(**two, stream_k=True)
        return specs

    @classmethod
    def element_loads_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether an M x N x K product whose operands' rows are not all 16-byte aligned runs
        mma.sync with element loads (for_layouts(element_loads=True)) rather than the wgmma
        kernel's general tiles after copies: 16-bit inputs, more than SMALL_PRODUCT_MACS (below,
        default_spec runs element loads anyway) and at most UNALIGNED_ELEMENT_MACS multiply-adds,
        and neither the transposed tiles (swap_suits) nor the streaming ones (stream_suits), which
        read a large unaligned B in place or stream it."""
        return (dtype in ("float16", "bfloat16") and SMALL_PRODUCT_MACS < M * N * K <= UNALIGNED_ELEMENT_MACS
                and not cls.swap_suits(M, N, K, dtype) and not cls.stream_suits(M, N, K, dtype))

    @classmethod
    def realign_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether kgen.matmul reads an unaligned B in place (with_realigned_b) for an
        M x N x K product: 16-bit inputs and at most REALIGN_MAX_ROWS rows, where B's copy
        (twice its bytes moved) costs as much as the product or more."""
        return dtype in ("float16", "bfloat16") and M <= REALIGN_MAX_ROWS

    @classmethod
    def phased_swap_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether kgen.matmul runs a product of PHASED_SWAP_ROWS rows against W.t() of a 16-bit
        weight whose rows are an even number of elements apart but not 16-byte aligned (the caller
        checks the stride) on the transposed tiles reading it by row sets (b_phased, an sm_90
        GPU) rather than the skinny forms: the transposed tiles' range (swap_suits)."""
        lo, hi = PHASED_SWAP_ROWS
        return cls.realign_suits(M, N, K, dtype) and lo <= M <= hi and cls.swap_suits(M, N, K, dtype)

    @classmethod
    def classes_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether kgen.matmul runs a product of CLASSES_ROWS rows against W.t() of a 16-bit weight
        whose rows are not 16-byte aligned (the caller checks the stride) on the transposed tiles
        reading it by row sets a tile (b_classes, an sm_90 GPU): a weight of CLASSES_MIN_B_BYTES or
        more, and the tiles the aligned twin gets are transposed, over K whole or K in slices
        merged in clusters (with_classed_b)."""
        lo, hi = CLASSES_ROWS
        if dtype not in ("float16", "bfloat16") or not lo <= M <= hi or N * K * ITEMSIZE[dtype] < CLASSES_MIN_B_BYTES:
            return False
        return _twin_classes(M, N, K, dtype)

    def with_classed_b(self, problem) -> "TensorMatmul | None":
        """This spec reading W.t() by row sets a tile (b_classes) for `problem` where it is the
        transposed tiles over K whole or K in slices merged in clusters (no second launch, no
        stream-K), else None. A split is fitted again to the tiles of the sets (each set's
        columns rounded up to whole tiles: up to one tile more a set), so that its clusters all
        run at once (class_slices says why)."""
        if not (self.wgmma and self.swap_ab and self.layout_a == "row" and not self.stream_k
                and (self.split_k == 1 or self.split_merge == "cluster")
                and self.cluster == 1 and not self.persistent and not self.b_realign and not self.b_phased):
            return None
        classed = self.replace(layout_b="col", b_classes=True, l2_prefetch=0, wave_tail=1)
        if self.split_k > 1:
            p = self.normalize_problem(problem)
            split = class_slices(self, p["M"], p["N"], p["K"])
            classed = classed.replace(split_k=split, split_merge="cluster" if split > 1 else "workspace")
        assert isinstance(classed, TensorMatmul)
        return classed

    @classmethod
    def realign_swap_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether kgen.matmul runs a product of REALIGN_SWAP_ROWS rows against a K-major B whose
        rows are not 16-byte aligned (W.t() of a 16-bit weight of K no multiple of 8) on the
        transposed tiles that read B in place (an sm_90 GPU), rather than the skinny forms: N and K
        at most REALIGN_SWAP_MAX_SIDE and the transposed tiles' range (swap_suits)."""
        lo, hi = REALIGN_SWAP_ROWS
        return (cls.realign_suits(M, N, K, dtype) and lo <= M <= hi and N <= REALIGN_SWAP_MAX_SIDE
                and K <= REALIGN_SWAP_MAX_SIDE and cls.swap_suits(M, N, K, dtype))

    @classmethod
    def realign_row_suits(cls, M: int, N: int, K: int, dtype: str) -> bool:
        """Whether kgen.matmul runs a product of REALIGN_ROW_ROWS rows against a row-major B whose
        rows TMA cannot read as they are (a pitch of no multiple of 8 elements; the caller checks
        the stride) on the transposed tiles that read B by row sets (b_phased, an sm_90 GPU)
        rather than the skinny forms: N and K of at least STREAM_MIN_SIDE and the transposed
        tiles' range (swap_suits)."""
        lo, hi = REALIGN_ROW_ROWS
        return (cls.realign_suits(M, N, K, dtype) and lo <= M <= hi and N >= STREAM_MIN_SIDE
                and K >= STREAM_MIN_SIDE and cls.swap_suits(M, N, K, dtype))

    def with_realigned_b(self) -> "TensorMatmul":
        """This spec reading a row-major B in place whatever its alignment (b_realign), its
        ring shorter by the staging's bytes, so that it needs no more shared memory than
        before (as many blocks fit an SM); the spec as it is where b_realign does not apply
        (not the wgmma kernel, not 16-bit, BN of 192 or 256, clusters, tiles of 192 rows: those
        were measured on a B that TMA reads, and dispatch gives such a B the cost model's tiles)."""
        BM, BN, _ = self.tile
        if self.b_realign or not (self.wgmma and self.kind in ("f16", "bf16") and BN in (64, 128)
                                  and self.cluster == 1 and (BM <= 128 or self.swap_ab)):
            return self
        fewer = -(-(REALIGN_DEPTH * BN * REALIGN_ROW_BYTES) // _wgmma_stage_bytes(BM, BN))
        try:
            realigned = self.replace(b_realign=True, stages=max(2, self.stages - fewer), l2_prefetch=0)
        except ValueError:   # a cluster merge's sums need the longer ring
            return self
        assert isinstance(realigned, TensorMatmul)
        return realigned

    def with_phased_b(self) -> "TensorMatmul":
        """This spec (the transposed tiles, with or without b_realign) reading B of any pitch and
        pointer by row sets (b_phased), its ring as deep as the same shared memory holds (as
        many blocks fit an SM); the spec as it is where that does not apply (not the transposed
        tiles of 64 or 128 columns)."""
        BN = self.tile[1]
        if self.b_phased or not (self.swap_ab and self.layout_a == "row" and BN in (64, 128)):
            return self
        stage = _phased_stage_bytes(self.tile[0], BN, self.layout_b)
        stages = min(WGMMA_MAX_STAGES, (self.shared_bytes - 1024) // stage)
        try:
            phased = self.replace(b_realign=False, b_phased=True, stages=max(2, stages), l2_prefetch=0)
        except ValueError:   # a cluster merge's sums need a longer ring
            return self
        assert isinstance(phased, TensorMatmul)
        return phased

    def phased_fill_spec(self, problem) -> "TensorMatmul":
        """A b_phased spec whose transposed tiles, of at most PHASED_FILL_MAX_ROWS rows (by B's
        storage order), are at most one an SM: two blocks an SM with K in the most slices merged
        in clusters that all run at once (PHASED_CLUSTER_BLOCKS says why); the spec as it is
        elsewhere or where one slice is all that fits. Pure."""
        p = self.normalize_problem(problem)
        BM, BN, _ = self.tile
        tiles = c_tiles(p["M"], p["N"], BM, BN)
        if not (self.b_phased and BM <= PHASED_FILL_MAX_ROWS[self.layout_b] and tiles <= _SMS and not self.persistent):
            return self
        split = _most_slices(range(1, MAX_CLUSTER_MERGE + 1), p["K"], tiles, PHASED_CLUSTER_BLOCKS)
        if split == 1:
            return self
        try:
            two = self.replace(stages=ring_stages(self.stage_bytes, 2), split_k=split, split_merge="cluster")
        except ValueError:   # the cluster merge's sums need a longer ring than two blocks an SM hold
            return self
        assert isinstance(two, TensorMatmul)
        return two

    def realign_swap_spec(self, problem) -> "TensorMatmul | None":
        """This spec as transposed tiles that read B in place (b_realign): A's rows (rounded up to
        8) as the wgmma N against REALIGN_SWAP_BN columns a block, the deepest ring of one block
        an SM less the staging, K unsplit; None where they do not apply (more than SWAP_MAX_ROWS
        rows, a column-major A, not 16-bit)."""
        p = self.normalize_problem(problem)
        if not (self.kind in ("f16", "bf16") and self.layout_a == "row" and 1 <= p["M"] <= SWAP_MAX_ROWS):
            return None
        BM = _swap_rows(p["M"])
        swap = self.replace(tile=(BM, REALIGN_SWAP_BN, self.tile[2]), warp_tile=(BM, 64),
                            stages=wgmma_ring_stages(BM, REALIGN_SWAP_BN), swap_ab=True, split_k=1,
                            split_merge="workspace", persistent=False, cluster=1)
        assert isinstance(swap, TensorMatmul)
        spec = swap.with_realigned_b()
        return spec if spec.b_realign else None

    def realign_split_spec(self, problem) -> "TensorMatmul | None":
        """For transposed tiles of 64 columns reading B in place (b_realign) with K unsplit
        and at most one tile an SM: 128-column tiles with K in REALIGN_SPLIT_SLICES slices
        merged in clusters, where those clusters all run at once (CLUSTER_WAVE_BLOCKS) and K
        is at least REALIGN_SPLIT_MIN_K; None elsewhere."""
        p = self.normalize_problem(problem)
        BM, BN, BK = self.tile
        s = REALIGN_SPLIT_SLICES
        if not (self.b_realign and self.swap_ab and BN == 64 and self.split_k == 1 and -(-p["N"] // 64) <= _SMS
                and -(-p["N"] // 128) * s <= CLUSTER_WAVE_BLOCKS[s] and p["K"] >= REALIGN_SPLIT_MIN_K):
            return None
        try:
            wide = self.replace(tile=(BM, 128, BK), stages=wgmma_ring_stages(BM, 128), split_k=s,
                                split_merge="cluster", b_realign=False)
        except ValueError:
            return None
        assert isinstance(wide, TensorMatmul)
        spec = wide.with_realigned_b()
        return spec if spec.b_realign else None

    def for_layouts(self, problem, **layouts):
        """This spec on operands stored as `layouts`; where that makes the TF32 wgmma kernel
        copy an operand transposed while the product's other side is short (fewer than
        TF32_TRANSPOSE_MIN rows of A against a row-major B, or columns of B against a
        column-major A), the mma.sync default instead: the copy, as long as the product
        itself there, costs more than wgmma saves. Asked for split_tf32, a spec without it
        gives way to wgmma_default_spec(split_tf32=True). b_realign=True (B's rows are not
        16-byte aligned): with_realigned_b of the result; where that does not apply to tiles of
        more than 128 columns, the transposed tiles that read B in place (realign_swap_spec),
        else the result as it is (B copied). b_phased=True (the same, for a B that row sets
        suit): phased_fill_spec of with_phased_b of the result where that applies (the
        transposed tiles), else as b_realign=True, the transposed tiles for wide ones by row sets.
        element_loads=True (a request, not a field): where this is the wgmma kernel's general
        tiles and short_k_suits or element_loads_suits the product, element_spec (mma.sync
        reading the operands in place). b_elements=True (a request: B is read in place by the
        element-load entry): with_b_elements of the result."""
        p = self.normalize_problem(problem)
        if layouts.pop("b_elements", False):
            return self.for_layouts(problem, **layouts).with_b_elements()
        if layouts.pop("element_loads", False) and self.wgmma and not self.swap_ab and not self.split_tf32 and (
                self.short_k_suits(p["M"], p["N"], p["K"], self.dtype)
                or self.element_loads_suits(p["M"], p["N"], p["K"], self.dtype)):
            layouts.pop("b_realign", None)
            return self.element_spec(p, self.dtype).replace(**layouts)
        if layouts.pop("b_classes", False):
            # W.t() read by row sets a tile: the aligned twin's tiles where they take it (K whole
            # or in cluster slices), else as b_realign=True.
            classed = self.for_layouts(problem, **layouts).with_classed_b(problem)
            if classed is not None:
                return classed
            layouts["b_realign"] = True
        phased = layouts.pop("b_phased", False)
        if layouts.pop("b_realign", False) or phased:
            if self.swap_ab and self.wide_swap_suits(p["M"], p["N"], p["K"], self.dtype):
                wide = self.wide_swap_specs(p, self.dtype)
                wide += [t for t in (w.two_row_tiles_spec(p) for w in wide) if t is not None]
                if self.replace(layout_a="row", layout_b="row") in wide:
                    # The wide transposed tiles were measured on a B that TMA reads: the tiles the
                    # default took before them here (the streaming ones where those suit, else the general).
                    before = (self.stream_spec(p, self.dtype) if self.stream_suits(p["M"], p["N"], p["K"], self.dtype)
                              else self.general_wgmma_spec(p, self.dtype))
                    return before.for_layouts(problem, b_realign=True, b_phased=phased, **layouts)
            if self.swap_ab and self.swap_suits(p["M"], p["N"], p["K"], self.dtype):
                default, narrow = self.swap_spec(p, self.dtype), self.swap_spec(p, self.dtype, narrow=True)
                if narrow != default == self.replace(layout_a="row", layout_b="row"):
                    # So were the default's 128-column tiles (SWAP_128_MIN_GAIN): the 64-column ones here.
                    return narrow.for_layouts(problem, b_realign=True, b_phased=phased, **layouts)
            # The second launch of wave_tail was measured on a B that TMA reads: one launch here.
            spec = self.for_layouts(problem, **layouts).replace(wave_tail=1)
            if spec.tile[0] == 192 and not spec.swap_ab:
                # The 192-row tiles were measured on a B that TMA reads: for one it cannot, the
                # cost model's own tiles and what the rules below give them.
                spec = self.general_wgmma_spec(p, self.dtype, tall=False).for_layouts(problem, **layouts)
            by_sets = spec.with_phased_b() if phased else spec
            if by_sets.b_phased:
                return by_sets.phased_fill_spec(problem)
            realigned = spec.with_realigned_b()
            if not realigned.b_realign and spec.wgmma and spec.tile[1] > REALIGN_SWAP_BN and not spec.swap_ab:
                wide = spec.realign_swap_spec(problem)
                if wide is not None:
                    return wide.with_phased_b().phased_fill_spec(problem) if phased else wide
            if realigned.b_realign:
                split = realigned.realign_split_spec(problem)
                if split is not None:
                    return split
            return realigned
        if self.swap_ab and layouts.get("layout_a") == "col":
            # The transposed tile reads A K-major: a column-major A takes the 64-row tiles.
            fallback = (self.stream_spec(p, self.dtype) if self.stream_suits(p["M"], p["N"], p["K"], self.dtype)
                        else self.general_wgmma_spec(p, self.dtype))
            return fallback.replace(**layouts)
        if layouts.get("split_tf32") and not self.split_tf32:
            # A TF32 spec (tuned with allow_tf32, or the rule's) may not hold the split's
            # accumulators: the split's own default instead.
            return self.split_default_spec(p).replace(**layouts)
        spec = self.replace(**layouts)
        other = {"A": p["N"], "B": p["M"]}
        if any(spec.transposes(op) and other[op] < TF32_TRANSPOSE_MIN for op in "AB"):
            return self.mma_default_spec(p, self.dtype).replace(**layouts)
        return spec

    def summed_in_workspace(self, problem):
        """This spec with its K slices summed through a workspace rather than in a thread block
        cluster (for a GPU without clusters): element_spec's own workspace split for its tiles,
        else as many slices as leave each four k steps (tile_fit_reason's least there)."""
        if self.split_merge != "cluster":
            return self
        p = self.normalize_problem(problem)
        layouts = {"layout_a": self.layout_a, "layout_b": self.layout_b}
        if self.replace(layout_a="row", layout_b="row") == self.element_spec(p, self.dtype):
            return self.element_spec(p, self.dtype, clusters=False).replace(**layouts)
        ways = min(self.split_k, p["K"] // (4 * self.tile[2]))
        return self.replace(split_merge="workspace", split_k=max(1, ways))

    def with_b_elements(self):
        """This spec where the element-load entry reads B (repack off): a float64 mma.sync tile of
        F64_B_ELEMENTS_TILE in the padded layout copies A aligned first (repack_a) and copies B's
        elements along its rows (spread_elements); any other spec as it is."""
        if (self.dtype == "float64" and not self.wgmma and not self.repack and self.smem_layout == "pad"
                and self.tile[:2] == F64_B_ELEMENTS_TILE):
            return self.replace(repack_a=True, spread_elements=True)
        return self

    def prune_reason(self, problem, limits):
        cc = limits.get("compute_capability", 90)
        need = self._arch_requirement(cc)
        if need:
            return f"{need[0]}; this one is compute capability {cc}"
        over = block_limit_reason(self.threads, self.shared_bytes, limits, MAX_SHARED_BYTES)
        if over:
            return over
        # Fragments and addresses take registers beyond the accumulators (~64 for 64x64 warp tiles,
        # ~48 for 32x32: ptxas kept 128x64 blocks of 32x32 warp tiles in 80, three blocks an SM, no
        # spills); a cap below that (block size x min_blocks) spills.
        cap = register_cap(self.threads, self.min_blocks)
        if self.mma_shape:
            # float64 16-row fragments are large: k/2 doubles of A a row tile, k/4 of B a column tile;
            # addresses and counters take ~24 more (ptxas kept 64 x 32 warp tiles of m16n8k16, 224
            # registers of accumulators and fragments, in 239-250 with no spills, either order of B).
            mi, ni, k = self.warp_tile[0] // 16, self.warp_tile[1] // 8, self.mma_mnk[2]
            need = self.accumulator_registers + k * mi + k // 2 * ni + 24
            if self.accumulator_registers >= 128 and (self.tile[2] > 16 or self.layout_a == "col"):
                # ptxas hoists the fragment loads of later k-steps (BK > 16), or keeps more
                # addresses live (an M-major A), and spills next to 128 accumulator registers.
                return (f"float64 {self.mma_shape} with 128 accumulator registers spills unless BK = 16 and A is "
                        "row-major")
            if need > cap:
                return (f"float64 {self.mma_shape} accumulators and fragments take ~{need} registers a thread, "
                        f"above {cap} (spills)")
        fragments = 32 + 4 * -(-self.warp_tile[0] // 16) + 2 * -(-self.warp_tile[1] // 8)
        need = self.accumulator_registers + fragments
        if self.split_tf32 and not self.wgmma:
            # The split in registers holds the float32 sums beside the accumulators, and each
            # fragment as hi and lo.
            need += self.accumulator_registers + fragments - 32
        if not self.wgmma and cap < need:
            return f"{self.threads} threads x {max(self.min_blocks, 1)} blocks cap registers at {cap}, " \
                   f"below ~{need} needed (spills)"
        return tile_fit_reason(self, self.normalize_problem(problem), "warps")

    @classmethod
    def make_inputs(cls, problem, dtype, rng):
        """Standard normal A and B rounded to dtype (bfloat16 needs the ml_dtypes package)."""
        return product_inputs(cls.normalize_problem(problem), host_dtype(dtype), rng)

    @classmethod
    def reference_output(cls, problem, inputs):
        return product_reference(inputs)

    @classmethod
    def output_shape(cls, problem):
        return (problem["M"], problem["N"])

    @property
    def input_roundoff(self) -> float:
        """The relative error of reading a float32 input as TF32: mma.sync's fragments are
        rounded to nearest (cvt.rna), wgmma reads the top 19 bits of shared memory as they
        are (truncation, twice the error). 0 for the other types (read exactly). With
        split_tf32 what is lost is the rounding of lo (2^-22 of x) and the left-out lo*lo term
        (2^-22 of a product): 2^-21 an operand covers both."""
        if not self.tf32:
            return 0.0
        if self.split_tf32:
            return 2.0 ** -21
        return 2 * UNIT_ROUNDOFF["tf32"] if self.wgmma else UNIT_ROUNDOFF["tf32"]

    def tolerance_for(self, problem, inputs=None):
        """Relative (Frobenius) error bound: the rounding of the inputs to the type the MMA
        reads (TF32 only; 16-bit products are exact in float32), the accumulation (the tensor
        cores truncate partial sums, so the bound grows faster than sqrt(K)), and the
        rounding of the output. split_tf32 accumulates 3K products."""
        K = max(int(problem["K"]), 1) * (3 if self.split_tf32 else 1)
        u_in = self.input_roundoff or (UNIT_ROUNDOFF["float64"] if self.dtype == "float64" else 0.0)
        u_acc = 2 * UNIT_ROUNDOFF[self.accumulator]  # round toward zero: twice round-to-nearest's
        u_out = UNIT_ROUNDOFF[self.output_dtype]
        return 4 * u_in + u_acc * (K / 4 + 16 * math.sqrt(K) + 64) + 2 * u_out

    def elementwise_bound(self, K: int) -> tuple[float, float, float]:
        """(a, b, c): |C - C_ref| <= a * (|A| @ |B|) + b * |C_ref| + c elementwise, with a
        factor 2 of headroom over the rounding bound gamma_K of a dot product (split-K adds
        its slices in the accumulator type, one more rounding per slice), the output's
        rounding, and for results in the output type's subnormal range (a float16 product of
        small numbers, say) its absolute rounding error, half the smallest subnormal."""
        u_in = self.input_roundoff
        u_acc = 2 * UNIT_ROUNDOFF[self.accumulator]
        out = self.output_dtype
        K = max(K, 1) * (3 if self.split_tf32 else 1)
        return (2 * (2 * u_in + (K + 64) * u_acc), 2 * UNIT_ROUNDOFF[out], SMALLEST_SUBNORMAL[out])

    @classmethod
    def work(cls, problem, dtype):
        return product_work(problem, ITEMSIZE[dtype])

    @classmethod
    def bucket(cls, problem):
        return product_bucket(problem)


@functools.lru_cache(maxsize=1024)
def _twin_classes(M: int, N: int, K: int, dtype: str) -> bool:
    """Whether the default spec of an M x N x K product on row-major A and W.t() is tiles that
    TensorMatmul.with_classed_b takes (the transposed wgmma tiles over K whole or K in cluster
    slices). Memoised: dispatch asks it twice for a new call signature (the family, then its
    overrides)."""
    p = {"M": M, "N": N, "K": K}
    spec = TensorMatmul.default_spec(p, dtype).for_layouts(p, layout_a="row", layout_b="col")
    return spec.with_classed_b(p) is not None


def class_sets(K: int, itemsize: int) -> int:
    """The row sets b_classes reads W.t() of a contiguous N x K weight by: rows whose starts lie
    the same distance past a 16-byte boundary, 16 / gcd(16, K x itemsize) of them."""
    return 16 // math.gcd(16, K * itemsize)


def class_columns(N: int, sets: int, BN: int) -> int:
    """The virtual columns b_classes' tiles walk over N columns of C (the template's
    class_columns): each set's columns rounded up to whole tiles of BN."""
    per_set = -(-N // sets)
    return sets * BN * -(-per_set // BN)


def class_slices(spec: "TensorMatmul", M: int, N: int, K: int) -> int:
    """The K slices (merged in clusters) of b_classes with `spec`'s tiles for an M x N x K product
    on a contiguous W.t(): the most of SWAP_SPLITS whose clusters all run at once
    (CLUSTER_WAVE_BLOCKS, or PHASED_CLUSTER_BLOCKS for a ring two blocks an SM hold) over the tiles
    of the sets, each set's columns rounded up to whole tiles, and K + 8 columns of A's images.
    The aligned twin's split counts its own tiles: on an H200 (Nsight Compute, bfloat16
    14x2077x11751, docs/matmul-record.md) the sets' 40 tiles in 3 slices made 40 clusters where 39 run at
    once, and the kernel took 1.75x the twin's time, the same bytes read."""
    BM, BN, _ = spec.tile
    tiles = -(-M // BM) * class_columns(N, class_sets(K, ITEMSIZE[spec.dtype]), BN) // BN
    two = spec.stages <= wgmma_ring_stages(BM, BN, 2)
    return _most_slices(SWAP_SPLITS, K + 8, tiles, PHASED_CLUSTER_BLOCKS if two else CLUSTER_WAVE_BLOCKS)


def _fields(spec: Spec) -> dict[str, Any]:
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name != "dtype"}


def host_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a host array of `dtype` (bfloat16 through ml_dtypes)."""
    if dtype == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise ArrayError("bfloat16 host arrays need the ml_dtypes package (pip install ml_dtypes); "
                             "or pass torch bfloat16 tensors on the GPU") from None
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(dtype)


def _one_device(tensors: dict[str, Any]) -> int:
    """The CUDA device index shared by the named torch tensors (None entries skipped)."""
    devices = {name: runtime.torch_device_index(t, name) for name, t in tensors.items() if t is not None}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on cuda:{d}" for name, d in devices.items())
        raise ArrayError(f"the tensors are on different GPUs ({listing}); pass tensors of one GPU")
    return next(iter(devices.values()))


def _raw(x: np.ndarray) -> np.ndarray:
    """The bytes of a contiguous array, in memory order, as a view: numpy exports no buffer
    for ml_dtypes' bfloat16, and pycuda's copies need one."""
    return x.reshape(-1, order="A").view(np.uint8)


def _dtype_name(dtype: Any) -> str:
    """A dtype's kgen name from a numpy dtype (ml_dtypes' bfloat16 included) or a torch dtype."""
    text = str(dtype)
    if text in _TORCH_NAMES:
        return _TORCH_NAMES[text]
    try:
        return np.dtype(dtype).name
    except TypeError:
        return text


def _wgmma_stage_bytes(BM: int, BN: int) -> int:
    """Shared bytes of one stage of the wgmma kernel's ring: its A and B tiles (1024-byte
    aligned: the 128-byte swizzle repeats every 8 rows) and its two mbarriers. The ring also
    takes 1024 bytes to align the dynamic shared base."""
    return (BM + BN) * 128 + 16


def _most_slices(choices, K: int, tiles: int, capacity: int | dict[int, int]) -> int:
    """The most K slices among `choices` (1 always) with each slice at least
    STREAM_MIN_SLICE_K deep and tiles x slices blocks within the capacity: the blocks that
    run at once (capacity[slices] in clusters of that many, or one count for any)."""
    def fits(s: int) -> bool:
        return tiles * s <= (capacity if isinstance(capacity, int) else capacity[s])
    return max(s for s in choices if s == 1 or (K >= STREAM_MIN_SLICE_K * s and fits(s)))


def _two_row_fields(M: int, BK: int) -> dict[str, Any]:
    """The tile fields of the transposed tiles over two row tiles of half of M rows and
    SWAP_TWO_ROW_BN columns, one block an SM (two_row_tiles_spec, the tuner's space)."""
    half = _swap_rows(-(-M // 2))
    return {"tile": (half, SWAP_TWO_ROW_BN, BK), "warp_tile": (half, 64),
            "stages": wgmma_ring_stages(half, SWAP_TWO_ROW_BN)}


def _swap_rows(M: int) -> int:
    """BM of the transposed tiles (swap_ab) for M rows: the rows rounded up to a multiple of 8
    (the wgmma N steps by 8), at most SWAP_MAX_ROWS."""
    return min(SWAP_MAX_ROWS, -(-M // 8) * 8)


def whole_wave_columns(rows: int, cols: int, sms: int = _SMS) -> int:
    """wave_tail's first launch on a grid of rows x cols C tiles: the most columns of tiles whose
    tiles (every row of them) fit in whole waves of `sms` blocks; 0 where that is none or all."""
    first = rows * cols // sms * sms // rows
    return first if 0 < first < cols else 0


def wave_tail_slices(rows: int, cols: int, K: int, sms: int = _SMS) -> int:
    """K slices of wave_tail's second launch (the tiles past whole_wave_columns): the most, up to
    MAX_CLUSTER_MERGE, whose clusters all run at once (CLUSTER_WAVE_BLOCKS), each at least
    STREAM_MIN_SLICE_K deep; 1 where there is no such launch."""
    first = whole_wave_columns(rows, cols, sms)
    return _tail_slices(rows * (cols - first), K) if first else 1


def _tail_slices(tiles: int, K: int) -> int:
    return max((s for s in range(2, MAX_CLUSTER_MERGE + 1)
                if tiles * s <= CLUSTER_WAVE_BLOCKS[s] and K // s >= STREAM_MIN_SLICE_K), default=1)


def wave_tail_waves(M: int, N: int, K: int, BM: int, BN: int, allowed: bool = True) -> tuple[float, int]:
    """(waves, wave_tail) of BM x BN tiles on M x N x K: ceil(tiles / 132) waves of blocks in one
    launch, or, where wave_tail_slices gives s > 1 (and `allowed`), F / 132 + 1 / s +
    WAVE_TAIL_COST, F the tiles of the first launch (whole_wave_columns), the rest split s ways."""
    rows, cols = -(-M // BM), -(-N // BN)
    plain = -(-(rows * cols) // _SMS)
    first = whole_wave_columns(rows, cols) if allowed else 0
    s = _tail_slices(rows * (cols - first), K) if first else 1
    if s == 1:
        return float(plain), 1
    return min((float(plain), 1), (rows * first / _SMS + 1 / s + WAVE_TAIL_COST, s))


def _stream_tiles(M: int, N: int) -> tuple[int, int]:
    """(BN, C tiles) of stream_spec's 64-row tiles: BN = 256 where 64 x 256 tiles fill half the
    SMs, else 128."""
    rows = -(-M // 64)
    BN = 256 if rows * -(-N // 256) >= _SMS // 2 else 128
    return BN, rows * -(-N // BN)


def _partial_tile_bytes(BM: int, BN: int) -> int:
    """Shared bytes of a block's float32 sums with split_merge='cluster' (rows padded by
    _PART_PAD floats, so that the fragment stores of a warp spread over the banks)."""
    return BM * (BN + _PART_PAD) * 4


def wgmma_deepest_stages(BM: int, BN: int) -> int:
    """The most stages of a BM x BN wgmma ring that fit shared memory (at most WGMMA_MAX_STAGES)."""
    return min(WGMMA_MAX_STAGES, (MAX_SHARED_BYTES - 1024) // _wgmma_stage_bytes(BM, BN))


def wgmma_ring_stages(BM: int, BN: int, blocks_per_sm: int = 1) -> int:
    """The most stages of a BM x BN wgmma ring with which `blocks_per_sm` blocks fit one SM's
    shared memory (at most WGMMA_MAX_STAGES)."""
    return ring_stages(_wgmma_stage_bytes(BM, BN), blocks_per_sm)


def ring_stages(stage_bytes: int, blocks_per_sm: int = 1) -> int:
    """The most stages of `stage_bytes` each with which `blocks_per_sm` blocks of the wgmma
    kernel fit one SM's shared memory (at most WGMMA_MAX_STAGES)."""
    per_block = min(MAX_SHARED_BYTES, (SM_SHARED_BYTES - 1024 * blocks_per_sm) // blocks_per_sm)
    return min(WGMMA_MAX_STAGES, (per_block - 1024) // stage_bytes)


def _phased_stage_bytes(BM: int, BN: int, layout_b: str) -> int:
    """A b_phased stage: A's swizzled tile and B's unswizzled boxes, PHASE_PAD values wider than
    the tile (64 k rows of BN + PHASE_PAD for a row-major B; BN n rows of 64 + PHASE_PAD k for
    W.t())."""
    return BM * 128 + (BN * (64 + PHASE_PAD) if layout_b == "col" else 64 * (BN + PHASE_PAD)) * 2


def realign_shift_rows(base_phase: int, ldb: int) -> list[int]:
    """b_realign's producer slots, as the kernel orders them (realign_row_of): the row of a
    64-row box of B that slot s (warp s // 16) copies and shifts, B at a pointer of this 16-byte
    phase with this leading dimension. The rows by the shift's case for their phase (a row's
    misalignment in bytes over 4: the shift branches on it), then by row: each warp's 16 rows
    take one branch. A warp of rows of four phases took 1.3x the time of one of one phase
    (docs/tensorcore-record.md, "One branch a warp")."""
    return sorted(range(64), key=lambda row: (((base_phase + 2 * row * ldb) % 16) // 4, row))


def phase_sets(K: int, ldb: int, item: int, BK: int) -> tuple[int, int]:
    """b_phased: (g, seg) for a row-major B of K rows `ldb` elements of `item` bytes apart: rows
    k = r, r + g, r + 2g, ... form row set r (g the fewest rows whose pitch spans a multiple of
    16 bytes, at most PHASE_MAPS), and each set takes seg consecutive k of the kernel's K (g seg
    in all): its rows rounded up to whole BK steps."""
    g = 16 // math.gcd(16, ldb * item)
    rows = -(-K // g)
    return g, -(-rows // BK) * BK


def phase_maps(rows: int, cols: int, ld: int, g: int, offset: int) -> list[tuple[int, int, int]]:
    """b_phased: (inner, outer, column) of row set r's TMA map for r < g, for B stored as `rows`
    rows of `cols` values `ld` apart (k rows of N for a row-major B, n rows of K for W.t()), over
    a base `offset` elements below B's pointer (16-byte aligned there) with rows g ld elements
    apart: row j of set r is B's row g j + r, which starts `column` = offset + r ld elements into
    it; `inner` ends the set's rows at their last value (the unit zero-fills past it) and `outer`
    counts the set's rows, so that no map reaches past B's last element."""
    return [(offset + r * ld + cols, (rows - r + g - 1) // g, offset + r * ld) for r in range(g)]


class _PhaseMaps:
    """b_phased: the kernel's phase_maps_t for one plan's B geometry (stored rows of cols values,
    pitch ld, g row sets; seg k each for a row-major B), for any pointer: a TiledMap a set for
    each 16-byte phase of the pointer met, the packed parameter memoised by pointer."""

    __slots__ = ("dtype", "rows", "cols", "ld", "g", "seg", "box", "swizzle", "_by_offset", "_memo")

    def __init__(self, dtype: str, rows: int, cols: int, ld: int, g: int, seg: int, box: tuple[int, int],
                 swizzle: int = 0):
        self.dtype, self.rows, self.cols, self.ld, self.g, self.seg, self.box = dtype, rows, cols, ld, g, seg, box
        self.swizzle = swizzle
        self._by_offset: dict[int, tuple[list[Any], bytes]] = {}
        self._memo: dict[int, bytes] = {}

    def at(self, pb: int) -> bytes:
        hit = self._memo.get(pb)
        if hit is not None:
            return hit
        item = ITEMSIZE[self.dtype]
        phase = pb % 16
        if phase % item:
            raise ArrayError(f"B's pointer {pb:#x} is not a multiple of its {item}-byte elements")
        offset = phase // item
        sets = self._by_offset.get(offset)
        if sets is None:
            from ..core.tma import TiledMap

            geometry = phase_maps(self.rows, self.cols, self.ld, self.g, offset)
            maps = [TiledMap(self.dtype, inner, outer, self.g * self.ld, self.box, swizzle_bytes=self.swizzle)
                    for inner, outer, _ in geometry]
            cols = [col for _, _, col in geometry] + [0] * (PHASE_MAPS - self.g)
            tail = struct.pack(f"<{PHASE_MAPS}iii", *cols, self.seg, self.g)
            sets = self._by_offset[offset] = (maps, tail)
        maps, tail = sets
        base = pb - phase
        packed = b"".join(m.at(base) for m in maps) + bytes(128 * (PHASE_MAPS - self.g)) + tail
        hit = packed + bytes(PHASE_MAPS_BYTES - len(packed))
        if len(self._memo) >= 16:
            self._memo.clear()
        self._memo[pb] = hit
        return hit


# phase_maps_t with no maps and one set (its `sets` word after the maps, their columns and `seg`).
_ONE_SET = bytes(128 * PHASE_MAPS + 4 * PHASE_MAPS + 4) + struct.pack("<i", 1)
_ONE_SET += bytes(PHASE_MAPS_BYTES - len(_ONE_SET))


class _TensorMaps:
    """The TMA descriptors of A and B for one launch plan of the wgmma kernel: geometry fixed
    by the plan, base addresses per call (kgen.core.tma.TiledMap: a model's loop passes one
    weight with ever new activations). Boxes: a K-major operand is read BM (BN) rows of 64 k at
    a time, an M/N-major one as 64 x 64 boxes."""

    __slots__ = ("dtype", "a", "b", "by_sets", "classes", "phased", "zero", "_maps")

    def __init__(self, spec: "TensorMatmul", M: int, N: int, K: int, lda: int, ldb: int,
                 phases: tuple[int, int, int, int] | None = None):
        BM, BN, BK = spec.tile
        self.dtype = spec.dtype
        if spec.split_copies:
            K = K // 3 * 2   # the copies hold two of the product's three segments (split_col_a, _b)
        self.a = (K, M, lda, (BK, BM)) if spec.kernel_k_major("A") else (M, K, lda, (64, BK))
        half = spec.cluster   # clusters: each block loads half of B's box for both (multicast)
        self.b: tuple | None = None   # b_realign: B by pointer (the producer threads read it)
        # b_phased: (B's stored rows and columns, sets, k a set) and B's row sets (phase_maps)
        self.phased: _PhaseMaps | None = None
        self.by_sets = spec.b_phased or spec.b_classes
        self.classes = spec.b_classes
        if spec.b_classes and phases is not None:
            # b_classes: A's images (g sets of rows_pad rows, K + 8 columns) and each set's rows of
            # W.t() in the usual swizzled tiles (boxes of BK k by BN rows).
            rows, cols, g, rows_pad = phases
            self.a = (K, g * rows_pad, lda, (BK, BM))
            self.phased = _PhaseMaps(spec.dtype, rows, cols, ldb, g, 0, (BK, BN), swizzle=128)
        elif spec.b_phased and phases is not None:
            rows, cols, g, seg = phases
            # A stage's box: 64 k rows of BN + PHASE_PAD columns (row-major B), or 64 / g n rows
            # of BK + PHASE_PAD k a set (W.t(), each set's rows of the tile's 64 n).
            box = (BK + PHASE_PAD, 64 // g) if spec.layout_b == "col" else (BN + PHASE_PAD, BK)
            self.phased = _PhaseMaps(spec.dtype, rows, cols, ldb, g, seg, box)
        elif not spec.b_realign and not spec.b_phased:
            self.b = (K, N, ldb, (BK, BN // half)) if spec.kernel_k_major("B") else (N, K, ldb, (64, BK // half))
        self.zero = K == 0   # nothing is read: the maps are never used
        self._maps: tuple[Any, Any] | None = None   # made on the first launch (they ask the driver)

    def encoded(self, pa: int, pb: int) -> tuple[bytes, Any]:
        if self.zero:
            if self.by_sets:   # no maps read; b_classes maps C's columns by one set
                return bytes(128), (_ONE_SET if self.classes else bytes(PHASE_MAPS_BYTES))
            return bytes(128), (pb if self.b is None else bytes(128))
        if self.phased is not None:
            maps = self._maps
            if maps is None:
                from ..core.tma import TiledMap

                maps = self._maps = (TiledMap(self.dtype, *self.a), None)
            return maps[0].at(pa), self.phased.at(pb)
        maps = self._maps
        if maps is None:
            from ..core.tma import TiledMap

            b_map = None if self.b is None else TiledMap(self.dtype, *self.b)
            maps = self._maps = (TiledMap(self.dtype, *self.a), b_map)
        return maps[0].at(pa), (pb if maps[1] is None else maps[1].at(pb))


class _SplitCopies(NamedTuple):
    """split_tf32 on wgmma: the launches that copy A and B as hi/lo segments before the product
    (kgen_tc_split_copies, each with its arguments after the four pointers) and both workspace
    buffers."""
    steps: tuple
    a: int
    b: int


class _WaveTailPlan(NamedTuple):
    """A wave_tail call: the whole waves' plan (this kernel's), the tail spec's kernel and its
    plan for the columns past them, and the byte offsets of those columns in B and C."""
    whole: tuple
    kernel: "TensorMatmulKernel"
    tail: tuple
    b_offset: int
    c_offset: int


def _torch_key(A, B, pa: int, pb: int, out) -> tuple:
    """What a torch call's launch plan depends on: shapes, strides, dtypes and devices, each
    pointer's 16-byte offset, and the output's (or None for a new one)."""
    return (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, A.get_device(), B.get_device(),
            pa % 16, pb % 16,
            None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() % 16))


class TensorMatmulKernel(TorchPlanMemo, Kernel):
    """k(A, B, out=None, alpha=1.0, beta=0.0, stream=None) -> C = alpha * A @ B + beta * out.

    A and B: torch CUDA tensors (float16, bfloat16, float32, float64), CuPy or pycuda
    device arrays, or numpy host arrays (bfloat16 as ml_dtypes.bfloat16), of the spec's
    dtype and layouts. Device inputs give a device result on the caller's stream (torch's
    or CuPy's current one unless stream= names another); host inputs a numpy result.
    Entry points: kgen_tc_matmul (16-byte cp.async; A, B and their leading dimensions must
    be 16-byte aligned) or, with instruction="wgmma", kgen_tc_wgmma (A and B named by TMA
    descriptors, same alignment); with repack kgen_tc_repack, which copies an unaligned
    operand to an aligned buffer for it, else kgen_tc_matmul_elem (element loads, any
    alignment); with split_k kgen_tc_splitk_reduce. Workspaces belong to this kernel
    object: calls on different streams that overlap in time would share them.
    """

    torch_key = staticmethod(_torch_key)

    spec: TensorMatmul

    def __init__(self, spec, source, compiled, arch=None):
        super().__init__(spec, source, compiled, arch)
        self._np_dtype = None   # dtypes are checked by name (numpy has no bfloat16 without ml_dtypes)
        scalar = "d" if spec.dtype == "float64" else "f"
        self._fmt = "PPP" + "q" * 8 + "i" + scalar * 2
        self._fmt_reduce = "PP" + "q" * 5 + "i" + scalar * 2
        self._item = ITEMSIZE[spec.dtype]
        self._sms = runtime.device_limits()["multiprocessors"] if spec.persistent or spec.stream_k else _SMS
        self._out_item = ITEMSIZE[spec.output_dtype]
        self._acc_item = 8 if spec.dtype == "float64" else 4
        self._buffers: dict[str, Any] = {}
        self._retired: list[Any] = []  # outgrown workspaces, still named by older launch plans
        self._plans: dict[tuple, tuple] = {}
        self._torch_calls: dict[tuple, tuple] = {}
        self._torch_results = runtime.TorchResults()   # results of repeat torch calls, in batches
        self._live = [True]   # cleared by release(): the repeat calls made so far plan afresh
        self._wave_sms: int | None = None   # wave_tail: the GPU's SMs, read at the first plan
        self._tail: TensorMatmulKernel | None = None

    def release(self) -> None:
        """Free the workspaces (split-K slices, repacked operands) and forget the plans that use them,
        with those of wave_tail's second kernel (held by this one; equal specs share a kernel
        object, whose plans are rebuilt at their next call)."""
        self._live[0] = False
        self._live = [True]
        self._plans.clear()
        self._torch_calls.clear()
        self._buffers.clear()
        self._retired.clear()
        if self._tail is not None:
            self._tail.release()

    def _check_dtype(self, dtype, name: str, want: str | None = None) -> None:
        want = want or self.spec.dtype
        got = _dtype_name(dtype)
        if got != want:
            raise ArrayError(f"{name} has dtype {got} but this kernel was built for {want}; "
                             f"build a spec with dtype={got!r} or convert {name}")

    # -- launch plans -------------------------------------------------------------------
    def _buffer(self, name: str, nbytes: int, zeroed: bool = False) -> int:
        held = self._buffers.get(name)
        if held is None or held[1] < nbytes:
            if held is not None:
                self._retired.append(held[0])
            held = (runtime.device_buffer(nbytes, zeroed=zeroed), nbytes)
            self._buffers[name] = held
        return int(held[0])

    def _copy_step(self, operand: str, entry: str, grid: tuple, elements: int, fmt: str, args: tuple) -> tuple:
        """(launch, destination buffer, arguments after the two pointers) of a copy of an
        operand into this kernel's workspace before the product (repack, transpose or split).
        The row sets' A copies wait for the kernels before them themselves (copy_await_inputs)
        and launch programmatically; the product kernel's blocks then take SMs beside theirs,
        so they ask for an SM's most shared memory, as the product kernel needs it (with the
        driver's own carveout two products ran 0.83x and 0.89x; docs/tensorcore-record.md)."""
        early = entry in PROGRAMMATIC_COPIES
        go = Launch(self.handle(entry, carveout=MOST_SHARED if early else None), entry, grid, (256, 1, 1), 0, fmt,
                    programmatic=early and programmatic_launches())
        return go, self._buffer(operand, elements * self._item), args

    def _repack_step(self, operand: str, rows: int, cols: int, ld: int, pitch: int = 16) -> tuple[tuple, int]:
        """(copy step, its leading dimension) of `rows` stored rows of `cols` values `ld` apart
        copied to an aligned buffer (kgen_tc_repack, rows padded to `pitch` bytes, a multiple of 16)."""
        vec = self.spec.vec
        per = max(vec, pitch // self._item)
        ldd = -(-cols // per) * per
        grid = (max(1, min(-(-ldd // (256 * vec)), 64)), max(1, min(rows, 65535)), 1)
        return self._copy_step(operand, "kgen_tc_repack", grid, rows * ldd, "PPqqqq", (rows, cols, ld, ldd)), ldd

    def _plan(self, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, a_ok: bool, b_ok: bool,
              c_pairs: bool) -> tuple:
        """Everything a call of this shape, layout and alignment launches, decided once:
        (repack of A or None, repack of B or None, main launch, its arguments after the
        pointers, workspace or 0, reduce launch or None, its arguments). `a_ok`/`b_ok`: the
        operand allows 16-byte copies; `c_pairs`: C allows stores of two elements."""
        key = (M, N, K, lda, ldb, ldc, a_ok, b_ok, c_pairs)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        spec = self.spec
        n0 = self._whole_wave_columns(M, N)
        if n0:
            # wave_tail: C's first n0 columns (whole waves of tiles) in this kernel's launch, the
            # rest by the tail spec's kernel on the same A and B, C and B advanced by n0 columns
            # (16-byte aligned where they were: n0 is a multiple of 64).
            tail = self._tail_kernel()
            plan = _WaveTailPlan(self._plan(M, n0, K, lda, ldb, ldc, a_ok, b_ok, c_pairs), tail,
                                 tail._plan(M, N - n0, K, lda, ldb, ldc, a_ok, b_ok, c_pairs),
                                 n0 * self._item * (ldb if spec.layout_b == "col" else 1), n0 * self._out_item)
            if len(self._plans) >= 256:
                self._plans.clear()
            self._plans[key] = plan
            return plan
        vec = spec.vec
        repacks: list[Any] = [None, None]
        phases = None   # b_phased: (B's rows, row sets, k a set)
        if K == 0:
            a_ok = b_ok = True  # nothing is read: any entry point writes alpha * 0 + beta * C
        if spec.split_copies and K:
            # Both operands copied K-major as two segments of seg >= K each (hi and lo), seg a
            # whole number of k tiles: the main kernel runs one TF32 product of inner size 3 * seg
            # on aligned buffers, each k tile from one segment (split_col_a, _b). Small copies in
            # one launch, larger ones B's then A's (SPLIT_COPIES_ONE_LAUNCH).
            seg = -(-K // spec.tile[2]) * spec.tile[2]
            grids = []
            for operand, rows in (("A", M), ("B", N)):
                if spec.k_major(operand):   # split_rows: k along x, rows along y
                    grids.append((max(1, min(-(-seg // 256), 64)), max(1, min(rows, 65535))))
                else:                       # split_cols: 32-row tiles along x, 32-k tiles along y
                    grids.append((max(1, min(-(-rows // 32), 4096)), max(1, min(-(-seg // 32), 65535))))
            (a_gx, a_gy), (b_gx, b_gy) = grids
            handle = self.handle("kgen_tc_split_copies")

            def copy(blocks: int, args: tuple) -> tuple:
                return Launch(handle, "kgen_tc_split_copies", (blocks, 1, 1), (256, 1, 1), 0, "PPPPqqqqqqiii"), args

            shape = (M, N, K, lda, ldb, seg)
            if (M + N) * seg <= SPLIT_COPIES_ONE_LAUNCH:
                steps: tuple = (copy(a_gx * a_gy + b_gx * b_gy, (*shape, b_gx, b_gy, a_gx)),)
            else:   # a launch with B's blocks alone, then one with A's alone (B's grid empty)
                steps = (copy(b_gx * b_gy, (*shape, b_gx, b_gy, a_gx)), copy(a_gx * a_gy, (*shape, 1, 0, a_gx)))
            repacks[0] = _SplitCopies(steps, self._buffer("A", M * 2 * seg * self._item),
                                      self._buffer("B", N * 2 * seg * self._item))
            K, lda, ldb = 3 * seg, 2 * seg, 2 * seg
            a_ok = b_ok = True
        elif spec.b_phased and K:
            # B's rows by row sets (phase_sets); a B of fewer rows than sets is copied aligned
            # first (one set). Row-major B: its rows are k, the kernel's K walks the sets in turn
            # and A is copied with its columns in that order. W.t(): its rows are n, and a
            # tile's 64 n are 64 / g rows of each set (K and A as they are).
            rows, cols = (N, K) if spec.layout_b == "col" else (K, N)
            g, seg = phase_sets(K, ldb, self._item, spec.tile[2])
            if rows < g:
                repacks[1], ldb = self._repack_step("B", rows, cols, ldb)
                g, seg = phase_sets(K, ldb, self._item, spec.tile[2])
            if spec.layout_b == "col":
                phases = (rows, cols, g, 0)
                if not a_ok or spec.pads_a_pitch(M, N, K, lda):   # copied aligned (A_PITCH_BYTES)
                    repacks[0], lda = self._repack_step("A", M, K, lda, A_PITCH_BYTES)
            else:
                phases = (rows, cols, g, seg)
                grid = (max(1, min(-(-(g * seg) // 256), 64)), max(1, min(M, 65535)), 1)
                repacks[0] = self._copy_step("A", "kgen_tc_phase_a", grid, M * g * seg, "PPqqqqqq",
                                             (M, K, lda, g * seg, g, seg))
                K = lda = g * seg
            a_ok = b_ok = True
        elif spec.b_classes and K:
            # W.t()'s rows (n) by row sets, a set a tile: A copied once a call as one image a set,
            # BM-row blocks of A's rows moved by the set's shift (kgen_tc_class_a, which reads the
            # shift off B's pointer), K_img = K + 8 columns so that every shift fits; the tiles
            # walk class_columns(N, g) virtual columns. A B of fewer rows than sets is copied
            # aligned first (one set).
            BM, BN, BK = spec.tile
            g = class_sets(ldb, self._item)
            if N < g:
                repacks[1], ldb = self._repack_step("B", N, K, ldb)
                g = 1
            rows_pad = -(-M // BM) * BM
            k_img = K + 8
            ldd = -(-k_img // 64) * 64
            grid_a = (max(1, min(-(-ldd // (8 * 256)), 64)), max(1, min(g * rows_pad, 65535)), 1)
            repacks[0] = self._copy_step("A", "kgen_tc_class_a", grid_a, g * rows_pad * ldd, "PPPqqqqqqq",
                                         (M, K, lda, ldd, rows_pad, g, ldb))
            phases = (N, K, g, rows_pad)
            N_tiles = class_columns(N, g, BN)
            K, lda = k_img, ldd
            a_ok = b_ok = True
        elif spec.repack:
            dims = (((M, K) if spec.layout_a == "row" else (K, M), lda, a_ok),
                    ((K, N) if spec.layout_b == "row" else (N, K), ldb, b_ok))
            for i, ((rows, cols), ld, ok) in enumerate(dims):
                if i == 1 and spec.b_realign:
                    continue   # the producer threads read B in place, aligned or not
                if K and spec.transposes("AB"[i]):
                    # Stored rows x cols, copied as cols rows of rows elements (K-major).
                    ldd = -(-rows // vec) * vec
                    grid = (max(1, min(-(-cols // 32), 4096)), max(1, min(-(-rows // 32), 65535)), 1)
                    repacks[i] = self._copy_step("AB"[i], "kgen_tc_transpose", grid, cols * ldd, "PPqqqq",
                                                 (rows, cols, ld, ldd))
                elif ok and not (i == 0 and spec.pads_a_pitch(M, N, K, ld)):
                    continue
                else:
                    repacks[i], ldd = self._repack_step("AB"[i], rows, cols, ld,
                                                        A_PITCH_BYTES if i == 0 and spec.wgmma else 16)
                if i == 0:
                    lda = ldd
                else:
                    ldb = ldd
            a_ok = a_ok or repacks[0] is not None
            b_ok = b_ok or repacks[1] is not None or spec.b_realign
        elif spec.repack_a and not a_ok and K:
            # The element-load entry reads B alone by elements; A is copied aligned for it.
            repacks[0], lda = self._repack_step("A", *((M, K) if spec.layout_a == "row" else (K, M)), lda)
            a_ok = True
        aligned = a_ok and b_ok
        # b_classes: the grid covers the virtual columns (the kernel maps them to C's).
        grid, block, shared = spec.launch_geometry(M, N_tiles if phases and spec.b_classes else N, K, self._sms)
        if grid[0] >= 2 ** 31:
            raise ArrayError(f"a {M}x{N} product needs {grid[0]} blocks; at most 2^31-1 fit in the grid")
        splits, chunk = spec.split_plan(K)
        maps = None
        if spec.wgmma:   # repack is on: both operands are aligned by now (or B read by pointer)
            b_fmt = "P" if spec.b_realign else f"{PHASE_MAPS_BYTES}s" if spec.b_phased or spec.b_classes else "128s"
            # stream_k: the pieces' workspace and flags between the flags and the scalars.
            scalars = self._fmt[-2:]
            name, fmt = "kgen_tc_wgmma", "128s" + b_fmt + self._fmt[2:-2] + ("PP" if spec.stream_k else "") + scalars
            maps = _TensorMaps(spec, M, N, K, lda, ldb, phases)
        else:
            name, fmt = ("kgen_tc_matmul" if aligned else "kgen_tc_matmul_elem"), self._fmt
        main = Launch(self.handle(name, shared), name, grid, block, shared, fmt,
                      programmatic=programmatic_launches() and spec.launches_programmatically(M, N, K, self._sms))
        # OVERLAPPED (4): the L2 prefetch (l2_prefetch) runs only where the launch overlaps the
        # kernel before.
        overlapped = OVERLAPPED if main.programmatic else 0
        flags = (2 if c_pairs else 0) | overlapped
        pieces: tuple[int, ...] = ()
        if spec.stream_k:
            # A float32 slot of BM x BN sums a block and one published flag a block, which every
            # launch leaves zero (tiles as many as the blocks: no pieces, nothing read).
            BM, BN, _ = spec.tile
            pieces = (self._buffer("pieces", grid[0] * BM * BN * 4), self._buffer("published", grid[0] * 4, True))
        if splits == 1 or spec.split_merge == "cluster":   # the cluster merge stores C itself
            plan = (repacks[0], repacks[1], main, (M, N, K, lda, ldb, ldc, chunk, 0, flags, *pieces), 0, None, (), maps)
        else:
            # Slices go to a workspace in the accumulator type; the reduce kernel applies
            # alpha and beta once, summing the slices in a fixed order.
            ldw = N
            stride = M * ldw
            ws = self._buffer("split", splits * stride * self._acc_item)
            rgrid = (max(1, min(-(-(M * N) // 256), 132 * 16)), 1, 1)
            reduce = Launch(self.handle("kgen_tc_splitk_reduce"), "kgen_tc_splitk_reduce", rgrid, (256, 1, 1), 0,
                            self._fmt_reduce)
            plan = (repacks[0], repacks[1], main, (M, N, K, lda, ldb, ldw, chunk, stride, 1 | overlapped), ws, reduce,
                    (M, N, ldw, ldc, stride, splits), maps)
        if len(self._plans) >= 256:
            self._plans.clear()
        self._plans[key] = plan
        return plan

    def _whole_wave_columns(self, M: int, N: int) -> int:
        """wave_tail: the columns of C whose tiles fill whole waves of this GPU's SMs
        (whole_wave_columns) where some tiles pass them; else 0 (one launch)."""
        BM, BN, _ = self.spec.tile
        if self.spec.wave_tail == 1:
            return 0
        if self._wave_sms is None:
            self._wave_sms = int(runtime.device_limits()["multiprocessors"])
        return whole_wave_columns(-(-M // BM), -(-N // BN), self._wave_sms) * BN

    def _tail_kernel(self) -> "TensorMatmulKernel":
        """The kernel of wave_tail's second launch (built once, then held)."""
        if self._tail is None:
            tail = build(self.spec.tail_spec())
            assert isinstance(tail, TensorMatmulKernel)
            self._tail = tail
        return self._tail

    def _run(self, plan: tuple, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        if type(plan) is _WaveTailPlan:
            self._run(plan.whole, pa, pb, pc, alpha, beta, stream)
            plan.kernel._run(plan.tail, pa, pb + plan.b_offset, pc + plan.c_offset, alpha, beta, stream)
            return
        repack_a, repack_b, main, args, ws, reduce, reduce_args, maps = plan
        if type(repack_a) is _SplitCopies:
            steps, dst_a, dst_b = repack_a
            for go, cargs in steps:
                go(stream, pa, dst_a, pb, dst_b, *cargs)
            pa, pb, repack_a = dst_a, dst_b, None
        if repack_b is not None:
            go, dst, rargs = repack_b
            go(stream, pb, dst, *rargs)
            pb = dst
        if repack_a is not None:
            go, dst, rargs = repack_a
            if self.spec.b_classes:   # A's images take each set's shift from B's pointer
                go(stream, pa, dst, pb, *rargs)
            else:
                go(stream, pa, dst, *rargs)
            pa = dst
        if maps is not None:   # the TMA kernel names A and B by tensor maps, not pointers
            pa, pb = maps.encoded(pa, pb)
        if not ws:
            main(stream, pa, pb, pc, *args, alpha, beta)
        else:
            main(stream, pa, pb, ws, *args, 1.0, 0.0)
            reduce(stream, ws, pc, *reduce_args, alpha, beta)

    def _aligned(self, ptr: int, ld: int) -> bool:
        return not (ptr % 16 or ld % self.spec.vec)

    def _pairs(self, ptr: int, ldc: int, N: int) -> bool:
        return not (ptr % (2 * self._out_item) or (ldc % 2 and N > 1))

    # -- calls -------------------------------------------------------------------------
    def __call__(self, A, B, out=None, *, alpha: float = 1.0, beta: float = 0.0, stream=None):
        if beta != 0 and out is None:
            raise ArrayError("beta != 0 needs out= (the C that is scaled by beta and added to)")
        tensor = runtime.torch_tensor_type()
        if tensor is not None and type(A) is tensor and type(B) is tensor and (out is None or type(out) is tensor):
            return self._call_torch(A, B, out, alpha, beta, stream)
        if runtime.split_host_device({"A": A, "B": B, "out": out}):
            return self._call_host(A, B, out, alpha, beta)
        a, b = runtime.view(A, "A"), runtime.view(B, "B")
        M, K, lda = self._operand(a.shape, a.strides, a.dtype, "A", self.spec.layout_a)
        K2, N, ldb = self._operand(b.shape, b.strides, b.dtype, "B", self.spec.layout_b)
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        if out is None:
            out = runtime.empty_like_library(A, (M, N), host_dtype(self.spec.output_dtype))
        c = runtime.view(out, "out")
        ldc = self._output(c.shape, c.strides, c.dtype, M, N)
        if M and N:
            plan = self._plan(M, N, K, lda, ldb, ldc, self._aligned(a.ptr, lda), self._aligned(b.ptr, ldb),
                              self._pairs(c.ptr, ldc, N))
            self._go(plan, a.ptr, b.ptr, c.ptr, alpha, beta, runtime.library_stream(A, stream), M, N, K)
        return out

    def _go(self, plan, pa, pb, pc, alpha, beta, stream, M, N, K) -> None:
        ensure_context()
        try:
            self._run(plan, pa, pb, pc, alpha, beta, stream)
        except LaunchError as exc:
            raise LaunchError(f"{exc} (spec {self.spec.to_json()}, M={M} N={N} K={K})") from None

    def _call_torch(self, A, B, out, alpha, beta, stream):
        """torch tensors through their own accessors (torch's bfloat16 has no
        __cuda_array_interface__), with one memo per shape, strides, dtype and alignment
        class: a repeat call is a dictionary lookup and the launches."""
        pa, pb = A.data_ptr(), B.data_ptr()
        shape, out_dtype, plan, device = self._torch_hit(A, B, pa, pb, out)
        handle = runtime.torch_stream(device) if stream is None else runtime.stream_handle(stream)
        if out is None:
            # Small results come in batches on torch's current stream; stream= gets its own.
            out = (self._torch_results.new(A, shape, device, handle, out_dtype) if stream is None
                   else A.new_empty(shape, dtype=out_dtype))
        if plan is not None:
            self._go(plan, pa, pb, out.data_ptr(), alpha, beta, handle, *shape, A.shape[1])
        return out

    def repeat_call(self, A, B) -> RepeatCall | None:
        """The call k(A, B) (out=None, torch's current stream) resolved for every torch A and B
        of this signature (kgen.core.kernel.RepeatCall); None where it launches nothing."""
        shape, out_dtype, plan, device = self._torch_hit(A, B, A.data_ptr(), B.data_ptr(), None)
        if plan is None:
            return None
        M, N, K = shape[0], shape[1], A.shape[1]
        run = self._go

        def go(pa: int, pb: int, pc: int, alpha: float, stream: int) -> None:
            run(plan, pa, pb, pc, alpha, 0.0, stream, M, N, K)

        return RepeatCall(go, self._torch_results, shape, out_dtype, device, self._live)

    def _torch_plan(self, A, B, out, key) -> tuple:
        import torch

        spec = self.spec
        for name, t in (("A", A), ("B", B)):
            if t.dim() != 2:
                raise ArrayError(f"{name} must be 2-D, got shape {tuple(t.shape)}")
        M, K, lda = self._operand(tuple(A.shape), A.stride(), A.dtype, "A", spec.layout_a)
        K2, N, ldb = self._operand(tuple(B.shape), B.stride(), B.dtype, "B", spec.layout_b)
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        device = _one_device({"A": A, "B": B, "out": out})
        out_dtype = getattr(torch, spec.output_dtype)
        if out is not None:
            ldc = self._output(tuple(out.shape), out.stride(), out.dtype, M, N)
            pc_mod = out.data_ptr() % 16
        else:
            ldc, pc_mod = N, 0  # torch allocations are 16-byte aligned and dense
        plan = None
        if M and N:
            plan = self._plan(M, N, K, lda, ldb, ldc, self._aligned(A.data_ptr(), lda),
                              self._aligned(B.data_ptr(), ldb), self._pairs(pc_mod, ldc, N))
        hit = ((M, N), out_dtype, plan, device)
        if len(self._torch_calls) >= 256:
            self._torch_calls.clear()
        self._torch_calls[key] = hit
        return hit

    def _call_host(self, A, B, out, alpha, beta):
        """numpy inputs: copied to the GPU in the spec's layouts, the result copied back."""
        spec = self.spec
        drv = runtime.driver()
        arrays = []
        for name, x, layout in (("A", A, spec.layout_a), ("B", B, spec.layout_b)):
            if not isinstance(x, np.ndarray) or x.ndim != 2:
                raise ArrayError(f"{name} must be a 2-D array, got {getattr(x, 'shape', type(x).__name__)}")
            self._check_dtype(x.dtype, name)
            arrays.append(np.ascontiguousarray(x) if layout == "row" else np.asfortranarray(x))
        A, B = arrays
        M, K = A.shape
        K2, N = B.shape
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        result = np.empty((M, N), host_dtype(spec.output_dtype))
        if out is not None:
            self._output(out.shape, tuple(s // out.itemsize for s in out.strides), out.dtype, M, N)
            result[...] = out
        if M == 0 or N == 0:
            if out is not None:
                return out
            return result
        lda = K if spec.layout_a == "row" else M
        ldb = N if spec.layout_b == "row" else K
        bufs = [drv.mem_alloc(max(x.nbytes, 16)) for x in (A, B, result)]
        for buf, x in zip(bufs, (A, B, result)):
            if x.nbytes:
                drv.memcpy_htod(buf, _raw(x))
        pa, pb, pc = (int(b) for b in bufs)
        plan = self._plan(M, N, K, lda, ldb, N, self._aligned(pa, lda), self._aligned(pb, ldb), self._pairs(pc, N, N))
        self._go(plan, pa, pb, pc, alpha, beta, 0, M, N, K)
        drv.memcpy_dtoh(_raw(result), bufs[2])
        if out is not None:
            out[...] = result
            return out
        return result

    # -- argument checks ----------------------------------------------------------------
    def _operand(self, shape, strides, dtype, name: str, layout: str) -> tuple[int, int, int]:
        """(rows, cols, leading dimension) of a 2-D operand stored as `layout`."""
        if len(shape) != 2:
            raise ArrayError(f"{name} must be 2-D, got shape {tuple(shape)}")
        self._check_dtype(dtype, name)
        return stored_operand(shape, strides, name, layout)

    def _output(self, shape, strides, dtype, M: int, N: int) -> int:
        if tuple(shape) != (M, N):
            raise ArrayError(f"out has shape {tuple(shape)} but the product is {M}x{N}")
        self._check_dtype(dtype, "out", self.spec.output_dtype)
        rs, cs = int(strides[0]), int(strides[1])
        if not ((cs == 1 or N <= 1) and (rs >= max(N, 1) or M <= 1)):
            raise ArrayError(f"out must be row-major with unit column stride; got element strides {tuple(strides)}")
        return rs if M > 1 else max(N, 1)


TensorMatmul.kernel_class = TensorMatmulKernel

# Known-wrong variants the template renders for testing the tests (kgen/core/faults.py).
from ..core import faults as _faults  # noqa: E402 - test-only declarations, kept beside the family

_faults.plant("tensor_matmul", "skip_last_k_tile", "the cp.async pipeline's refill stops one tile early: a K slice's "
              "last tile is never copied and its stage is multiplied stale")
_faults.plant("tensor_matmul", "edge_zero_fill_missing", "copies of chunks outside the matrix read 16 bytes of its "
              "first chunk instead of zero-filling (src-size 0 is lost)")
_faults.plant("tensor_matmul", "k_tail_step_short", "mma.sync's last k tile stops at its last whole k-step: the k "
              "of a K (or slice) of no multiple of the MMA's k past that step are never multiplied")
_faults.plant("tensor_matmul", "drop_block_partial", "the split-K reduction (the workspace's kernel or the cluster "
              "merge) leaves out the first K slice")
_faults.plant("tensor_matmul", "read_past_row_end", "the repack reads source rows at the packed stride: past the end "
              "of each row when the leading dimension is unaligned")
