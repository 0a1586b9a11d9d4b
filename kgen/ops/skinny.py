"""Skinny products: C = alpha * A @ B + beta * C where C has few rows (M <= 64 or so: a
batch of tokens times a weight matrix) or few columns (the mirror image, computed as
C^T = B^T A^T through strides). One spec class, one template (templates/skinny.cu.j2),
one kernel class. docs/matmul.md ("kgen.Skinny") explains the fields, docs/matmul-record.md what each did.

Such a product reads its large operand once, so its time is bounded below by the bytes of
A, B and C over the memory bandwidth. Each block streams a slab of K for a group of the
large operand's columns with 16-byte loads, holds the small operand's slab in shared
memory, and K is split across blocks so that every multiprocessor has work; the slabs'
partial sums merge by the strategy the spec names.
"""
from __future__ import annotations

import dataclasses
import math
import re
import threading
from typing import Any, ClassVar

import numpy as np

from ..core import runtime
from ..core.compiler import arch_number
from ..core.kernel import Kernel, RepeatCall
from ..core.launch import Launch, capture_id, ensure_context, programmatic_launches, write_words_async
from ..core.runtime import ArrayError
from ..core.spec import Spec, fail, register_family
from .matmul import (block_limit_reason, normalize_mnk, product_bucket, product_inputs, product_reference, product_work,
                     register_cap)
from .tensorcore import TensorMatmul

ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}
ACC_BYTES = {"float32": 4, "float64": 8, "float16": 4, "bfloat16": 4}
MERGES = ("single_pass", "two_pass", "atomic", "cluster")
# merge="cluster": a tile's K slabs are one thread block cluster, at most the portable
# cluster size.
MAX_CLUSTER_SLABS = 8
# Shared memory one staging round of the small operand may take (several blocks share an SM).
STAGE_BYTES = 16 * 1024
TC_STAGE_BYTES = 64 * 1024
# Windows of the large operand a warp of the float32 tensor-core dot form holds: the one it
# multiplies and the next two in flight. With one in flight, warps of the default (one block
# an SM, which its registers set anyway) waited on loads most of the time and DRAM ran at half
# its bandwidth (Nsight Compute, H200); two ran 1.02-1.08x faster (docs/matmul-record.md).
TC_DOT_RING = 3
# The same with TC_LONG_WINDOW-k windows (Skinny.tc_window): the one multiplied and one in
# flight, the same bytes in flight as three of 32. Dispatch takes them for large operands of
# TC_LONG_WINDOW_MIN_BYTES or more (the measurements are with that constant).
TC_LONG_WINDOW_RING = 2
TC_WINDOW, TC_LONG_WINDOW = 32, 64
# The float32 tensor-core dot form adds its mma accumulators into float32 sums every ring of
# windows and restarts them (tc_dot_flush): the tensor cores truncate as they add, so a block's
# error grew with its slab (13x10672x15379, slabs of 5152 k: 3.6e-5 without the sums, 6.8e-7
# with them; docs/matmul-record.md). The sums take 4 registers a tile pair; they are compiled in where
# the register estimate with them stays this far under the cap (at 32 rows, 23 under, ptxas
# spilled).
TC_FLUSH_MARGIN = 24
DOT_STEP_BYTES = 48 * 1024
MAX_SHARED_BYTES = 227 * 1024
# Accumulator registers a thread may hold (float32 registers; a double takes two).
MAX_ACC_REGS = 128
# Merge modes passed to the kernel.
MODE_DIRECT, MODE_ATOMIC, MODE_PARTIALS, MODE_TICKET, MODE_CLUSTER = 0, 1, 2, 3, 4
STAGE_VECTOR = 16  # flag beside the mode: S's rows are contiguous and 16-byte aligned
# The tensor-core forms' instruction: mma.sync (sm_80 on) or Hopper's wgmma (sm_90 only).
INSTRUCTIONS = ("mma_sync", "wgmma")
# l2_prefetch: the KiB of its slab a block asks L2 for ahead of the wait (0: none).
L2_PREFETCH_KIB = (0, 4, 8, 16, 32, 64)
# The float32 and float64 SIMT forms' default specs launch programmatically and ask L2 for this
# many KiB of each block's slab ahead of the wait. Device time of calls back to back (a CUDA
# graph over operands rotated past L2) on an H200 (docs/bench/research/skinny_pdl.py,
# docs/matmul-record.md "Programmatic launches of the skinny forms"): fitted on 10 float32 products of
# 1-16 rows (seed 17001; 8, 16 and 32 KiB 1.020x, 1.023x, 1.006x the plain launch, 64 KiB and
# a share of the slab lost on some), held out on 12 float32 products of 1-6 rows (seed 17003)
# 1.028x (0.977-1.082x) and 6 float64 ones (17004) 1.012x. The split-TF32 tensor-core forms
# lost 2-4% with the prefetch and stay plain.
SIMT_L2_PREFETCH_KIB = 16
# Rows of S one wgmma block multiplies (the instruction's N goes to 256, but a thread keeps
# WGN / 2 window sums and as many running sums a 64-column tile).
WG_MAX_ROWS = 128
# ... and in float16/bfloat16: the 64 rows the mma.sync forms take, since such a spec runs an
# n-contiguous large operand on the mma.sync axpy form.
WG16_MAX_ROWS = 64
# The mma.sync tensor-core forms' shortest K slab, per warp sharing it (a slab a few windows deep).
TC_MIN_SLAB_K = 128
# ... and the 16-bit axpy form's: shorter slabs give a short-K product more blocks. One call
# between events on an H200 (docs/bench/research/skinny16_short_k.py, bfloat16, 2-16 rows, K
# 1024-4096, row-major B): 1.21x faster at 32 than at 128 over 14 drawn products (seed 31,
# lowest 0.94x), checked on others (docs/matmul-record.md). The dot form gained nothing (1.00x).
TC16_AXPY_MIN_SLAB_K = 32
# Shared memory one staged chunk of S takes in the wgmma forms (two are resident: one in use,
# the next arriving by cp.async).
WG_STAGE_BYTES = 24 * 1024


# Storage orders a skinny problem may name (normalize_problem); absent means row-major.
PROBLEM_LAYOUTS = ("layout_a", "layout_b")

# The main entry points' names, with their form: kgen_skinny_<form>_v<width>, _phased_c<classes>,
# _direct_v<width> (the wgmma forms that split S in each block) and kgen_skinny_axpy_shift.
MAIN_ENTRY = re.compile(r"kgen_skinny_((?:tc_|wg_)?(?:dot|axpy))(?:_direct)?(?:_v\d+|_phased_c\d+|_shift)")

@register_family
@dataclasses.dataclass(frozen=True)
class Skinny(Spec):
    """A skinny-product kernel (one spec serves both layouts of the large operand).

    dtype         float32, float64, float16 or bfloat16 (16-bit inputs accumulate in
                  float32; C is written in the input type).
    rows          rows of the small operand per block (1-64); a larger small dimension
                  runs in several row tiles, each reading the large operand again.
    warp_cols     large operand stored k-contiguous (a weight N x K, B = W.T): columns
                  each warp streams at once (its lanes stride along K).
    lane_vectors  large operand stored n-contiguous (B row-major K x N): vectors of
                  neighbouring columns each lane holds. In the 16-bit tensor-core axpy form,
                  vectors of 4 columns (8 bytes) a lane loads per k row, each column feeding
                  its own mma tile: 1 or 2 (4 or 8 tiles, 64 or 128 columns a warp).
    threads       threads per block (a multiple of 32, 64-1024).
    vector_bytes  the widest load of the large operand (16: float4 / 8 halves / double2);
                  the launch narrows it where the pointer or leading dimension is less aligned.
    loads         independent loads each lane issues before it uses the first (memory
                  parallelism): k steps x warp_cols, or k rows x lane_vectors.
    k_split       0: split K so that the blocks fill `waves` times the GPU's resident
                  block slots (from the SM count at launch); else at most this many slabs
                  (with merge="cluster": exactly this many, 2 to 8).
    waves         target waves of blocks for k_split = 0.
    merge         how the K slabs' partial sums meet: "single_pass" (partials to a
                  workspace, the last block of each tile sums them in slab order: one
                  launch, deterministic), "two_pass" (a second kernel sums them:
                  deterministic), "atomic" (atomicAdd into C after a pre-scaling launch;
                  float32/float64 only; the order of additions varies run to run),
                  "cluster" (the k_split slabs of a tile run as one thread block cluster and
                  its blocks share the sums in slab order after a cluster barrier: one
                  launch, deterministic, the same sums as "two_pass"; sm_90 and later).
    min_blocks    blocks per SM that ptxas must fit (the second __launch_bounds__ argument;
                  with 1 it may use up to 255 registers a thread where the kernel needs them).
    tensor_cores  run the product on the tensor cores: float32 as three TF32 products per
                  term (hi*hi + hi*lo + lo*hi, each operand split into a TF32 high part and a
                  TF32 remainder), near float32 accuracy at tensor-core speed; float16 and
                  bfloat16 with mma.m16n8k16 and float32 accumulation. Not for float64.
    tc_tiles      tensor-core forms: 16-column mma tiles per warp (1 or 2) in the dot form;
                  the float32 axpy form takes twice as many (a lane's vector of 2 or 4
                  columns feeds that many tiles), 32 or 64 columns a warp.
    tc_window     float32 mma.sync tensor-core dot form: k values of each column a window
                  reads (32: 128 contiguous bytes a column, three windows held a warp, the
                  one multiplied and two in flight; 64: 256 bytes, two held). The same bytes
                  in flight either way; 64 reads longer runs of each column for 32 more
                  registers a thread at two tiles. 32 in every other form.
    k_warps       16-bit tensor-core dot form: warps of a block that share its columns and
                  split its K slab between them (32-k windows dealt round-robin), their sums
                  added in shared memory at the end in warp order (deterministic). A block
                  then covers warps / k_warps x 16 x tc_tiles columns, so a product has more
                  column tiles and needs fewer K slabs (each slab's partial sums cost R x NC
                  float32 writes and reads).
    axpy_k_warps  the same split in the 16-bit tensor-core axpy form (16-k steps dealt
                  round-robin); a block there covers warps / axpy_k_warps x 16 x 4 x
                  lane_vectors columns.
    instruction   tensor-core forms: "mma_sync" (mma.m16n8k8 or m16n8k16, one instruction
                  per 8 rows of S, any GPU from sm_80) or "wgmma" (Hopper's
                  wgmma.mma_async.m64nNk8 (float32, split) or m64nNk16 (float16/bfloat16)
                  with N = rows rounded up to 8: one instruction for all of a block's rows,
                  L's values from registers; sm_90 only, 128 or 256 threads, rows up to 128
                  (64 in 16-bit types), tc_tiles 64-column tiles a warpgroup). In 16-bit
                  types only the dot form (a k-contiguous large operand) is wgmma's; a
                  row-major one runs the mma.sync axpy form.
    phased        SIMT dot form and the mma.sync tensor-core dot forms (float32 split-TF32;
                  16-bit up to 8 rows), where L's columns lie at several offsets from a
                  16-byte boundary (a weight N x K passed as W.T with K no multiple of the
                  widest load, or L off a boundary): each block takes the columns of one
                  offset and reads them from their first boundary with the widest loads, the
                  elements before it added apart (the _phased_c<classes> entries; phased_dot
                  says where). False: the narrower entry the alignment allows (_v2, _v1).
    programmatic  launch the product's main kernel with programmatic stream serialization on
                  sm_90 and later GPUs (the SIMT and mma.sync forms; not with instruction=
                  "wgmma"): its blocks may start while the kernel before it on the stream
                  finishes, and wait for it (griddepcontrol.wait) before their first access to
                  global memory. KGEN_PDL=0 launches it plainly.
    l2_prefetch   with programmatic=True: before that wait each block asks L2 for the first
                  l2_prefetch KiB of its slab of the large operand, so its read starts while the
                  kernel before finishes (0: no prefetch; 4, 8, 16, 32 or 64).
    """

    kernel: ClassVar[str] = "skinny"
    template: ClassVar[str] = "skinny.cu.j2"

    dtype: str = "float32"
    rows: int = 8
    warp_cols: int = 4
    lane_vectors: int = 1
    threads: int = 256
    vector_bytes: int = 16
    loads: int = 8
    k_split: int = 0
    waves: int = 2
    merge: str = "single_pass"
    min_blocks: int = 1
    tensor_cores: bool = False
    tc_tiles: int = 2
    tc_window: int = TC_WINDOW
    k_warps: int = 1
    axpy_k_warps: int = 1
    instruction: str = "mma_sync"
    phased: bool = True
    programmatic: bool = False
    l2_prefetch: int = 0

    def validate(self) -> None:
        if self.dtype not in ITEMSIZE:
            fail("dtype", self.dtype, f"one of {sorted(ITEMSIZE)}")
        if self.instruction not in INSTRUCTIONS:
            fail("instruction", self.instruction, f"one of {list(INSTRUCTIONS)}")
        wg = self.instruction == "wgmma"
        if wg and not (self.tensor_cores and self.dtype in ("float32", "float16", "bfloat16")):
            fail("instruction", self.instruction, "'mma_sync' unless tensor_cores=True with dtype float32, float16 "
                 "or bfloat16 (the wgmma forms run float32 as three TF32 products, 16-bit inputs as they are)")
        if wg and self.threads not in (128, 256):
            fail("threads", self.threads, "128 or 256 with instruction='wgmma' (one or two warpgroups)")
        most_rows = (WG16_MAX_ROWS if self.dtype in ("float16", "bfloat16") else WG_MAX_ROWS) if wg else 64
        if not 1 <= self.rows <= most_rows:
            fail("rows", self.rows, f"an integer from 1 to {most_rows}" + (" with instruction='wgmma'" if wg else ""))
        if not 1 <= self.warp_cols <= 8:
            fail("warp_cols", self.warp_cols, "an integer from 1 to 8")
        if not 1 <= self.lane_vectors <= 4:
            fail("lane_vectors", self.lane_vectors, "an integer from 1 to 4")
        if self.threads % 32 or not 64 <= self.threads <= 1024:
            fail("threads", self.threads, "a multiple of 32 from 64 to 1024")
        item = ITEMSIZE[self.dtype]
        allowed = [b for b in (2, 4, 8, 16) if b >= item]
        if self.vector_bytes not in allowed:
            fail("vector_bytes", self.vector_bytes, f"one of {allowed} for dtype={self.dtype!r}")
        if not 1 <= self.loads <= 32:
            fail("loads", self.loads, "an integer from 1 to 32")
        if not 0 <= self.k_split <= 4096:
            fail("k_split", self.k_split, "0 (derived from the shape and SM count) or 1 to 4096")
        if not 1 <= self.waves <= 16:
            fail("waves", self.waves, "an integer from 1 to 16")
        if self.merge not in MERGES:
            fail("merge", self.merge, f"one of {list(MERGES)}")
        if self.merge == "cluster" and not 2 <= self.k_split <= MAX_CLUSTER_SLABS:
            fail("k_split", self.k_split, f"2 to {MAX_CLUSTER_SLABS} with merge='cluster' (the slabs of a tile form "
                 "one thread block cluster, whose size is fixed when the kernel is compiled)")
        if self.merge == "atomic" and self.dtype not in ("float32", "float64"):
            fail("merge", self.merge, "'single_pass' or 'two_pass' for 16-bit dtypes (16-bit atomics would "
                 "round every partial sum to the output type)")
        if not 1 <= self.min_blocks <= 8:
            fail("min_blocks", self.min_blocks, "an integer from 1 to 8")
        if self.programmatic and wg:
            fail("programmatic", self.programmatic, "False with instruction='wgmma' (the wgmma forms do not wait "
                 "for the kernel before them)")
        if self.l2_prefetch not in L2_PREFETCH_KIB:
            fail("l2_prefetch", self.l2_prefetch, f"one of {list(L2_PREFETCH_KIB)} (KiB)")
        if self.l2_prefetch and not self.programmatic:
            fail("l2_prefetch", self.l2_prefetch, "0 unless programmatic=True (the prefetch runs ahead of the wait "
                 "for the kernel before, which only a programmatic launch overlaps)")
        if not isinstance(self.tensor_cores, bool):
            fail("tensor_cores", self.tensor_cores, "True or False")
        if self.tensor_cores and self.dtype == "float64":
            fail("tensor_cores", self.tensor_cores, "False for dtype='float64' (the tensor-core forms take "
                 "float32, as split TF32, and float16/bfloat16)")
        if self.tc_tiles not in (1, 2):
            fail("tc_tiles", self.tc_tiles, "1 or 2")
        if self.tc_window not in (TC_WINDOW, TC_LONG_WINDOW):
            fail("tc_window", self.tc_window, f"{TC_WINDOW} or {TC_LONG_WINDOW}")
        if self.tc_window != TC_WINDOW and not (self.tensor_cores and self.dtype == "float32"
                                         and self.instruction == "mma_sync"):
            fail("tc_window", self.tc_window, f"{TC_WINDOW} unless tensor_cores=True with dtype='float32' and "
                 "instruction='mma_sync' (the only form whose window length is a choice)")
        if self.tensor_cores and self.dtype in ("float16", "bfloat16") and self.lane_vectors not in (1, 2):
            fail("lane_vectors", self.lane_vectors, "1 or 2 with tensor_cores=True and a 16-bit dtype (vectors "
                 "of 4 columns a lane loads per k row in the tensor-core axpy form)")
        for name in ("k_warps", "axpy_k_warps"):
            split = getattr(self, name)
            if split not in (1, 2, 4, 8, 16, 32) or self.warps % split:
                fail(name, split, f"a power of two dividing the block's {self.warps} warps")
            if split > 1 and not (self.tensor_cores and self.dtype in ("float16", "bfloat16")):
                fail(name, split, "1 unless tensor_cores=True with float16/bfloat16 (the forms that "
                     "split a block's K slab between its warps)")
        cap = self.register_cap
        if self.tensor_cores and self.tc_register_estimate > cap:
            fail("tc_tiles", self.tc_tiles, f"fewer tiles, rows or min_blocks: the tensor-core forms need about "
                 f"{self.tc_register_estimate} registers a thread for rows={self.rows}, and {self.threads} threads "
                 f"x {self.min_blocks} block(s) allow {cap}")
        regs = self.rows * self.warp_cols * (ACC_BYTES[self.dtype] // 4)
        if regs > MAX_ACC_REGS:
            fail("warp_cols", self.warp_cols, f"at most {MAX_ACC_REGS} accumulator registers a thread: "
                 f"rows x warp_cols = {self.rows * self.warp_cols}{' doubles' if self.dtype == 'float64' else ''}")
        if self.lane_vectors * self._acc_regs_per_column() * self.rows > MAX_ACC_REGS:
            fail("lane_vectors", self.lane_vectors, f"at most {MAX_ACC_REGS} accumulator registers a thread: "
                 f"rows x lane_vectors = {self.rows * self.lane_vectors} (one element wide)")
        if self.register_estimate > cap:
            fail("threads", self.threads, f"at most {65536 // max(self.register_estimate, 1)} threads a block "
                 f"(divided by min_blocks): a thread needs about {self.register_estimate} registers "
                 f"(accumulators and loads in flight) and {self.threads} x {self.min_blocks} "
                 f"block(s) cap it at {cap}")
        if self.shared_bytes > MAX_SHARED_BYTES:
            fail("rows", self.rows,
                 f"needs {self.shared_bytes} bytes of shared memory; the limit is {MAX_SHARED_BYTES}")

    @property
    def register_cap(self) -> int:
        """Registers a thread may take so that min_blocks blocks of `threads` fit an SM."""
        return register_cap(self.threads, self.min_blocks)

    @property
    def register_estimate(self) -> int:
        """Registers a thread needs, roughly: accumulators, the loads in flight, and ~32 for
        addresses and indices (the larger of the two forms)."""
        accr = self._acc_regs_per_column()
        dot = self.rows * self.warp_cols * accr + self.dot_unroll * self.warp_cols * self.vector_bytes // 4
        wa = self.axpy_vec
        axpy = (self.rows + self.axpy_unroll) * self.lane_vectors * wa * accr
        return max(dot, axpy) + 32

    @property
    def dot_min_blocks(self) -> int:
        """Blocks per SM that ptxas must fit for the SIMT dot form: min_blocks, and where a
        thread holds fewer than 64 accumulator registers, at least 512 resident threads (at
        most 128 registers a thread). Left free, ptxas took 126-162 registers at 4-12 float32
        rows, one 256-thread block per SM; capped, the form ran level at 1-4 rows and
        1.4x faster at 12 (H100, docs/matmul-record.md). From 64 accumulators the cap spills."""
        accs = self.rows * self.warp_cols * self._acc_regs_per_column()
        return max(self.min_blocks, min(8, 512 // self.threads)) if accs < 64 else self.min_blocks

    @property
    def axpy_min_blocks(self) -> int:
        """Blocks per SM that ptxas must fit for the SIMT axpy form: min_blocks, and where a
        thread holds at most 16 accumulator registers (float32 up to 4 rows, 16-bit up to 2)
        at least 1024 resident threads (64 registers a thread): the form streams the large
        operand with a few loads in flight per warp, so more resident warps keep more bytes
        in flight (1.07x in bfloat16 on an H100, docs/matmul-record.md). With more accumulators the
        cap made ptxas spill and the form slower."""
        return max(self.min_blocks, min(8, 1024 // self.threads)) if self.axpy_acc_regs <= 16 else self.min_blocks

    @property
    def axpy_acc_regs(self) -> int:
        """Accumulator registers a thread of the SIMT axpy form holds."""
        return self.rows * self.lane_vectors * self.axpy_vec * self._acc_regs_per_column()

    @property
    def tc_granule_min_blocks(self) -> int:
        """Blocks per SM that ptxas must fit for the 16-bit tensor-core dot form's element-load
        entry point (kgen_skinny_tc_dot_v1, which reads granules and keeps a fifth one a lane):
        min_blocks, and two for one mma tile of rows (up to 8) where the windows in flight hold
        at most 64 registers (tc_depth x tc_tiles <= 4, the defaults). Left free, ptxas took
        up to 157 registers at 5-8 rows, one block an SM, and the form ran 0.90-1.15x the
        element loads; held to two blocks 1.11-1.31x (H100, docs/matmul-record.md). From 9 rows the
        bound ran slower than free registers (0.96-1.15x against 1.03-1.23x) or spilled (32
        rows), as it spills with deeper windows; float32 has no such entry."""
        return max(self.min_blocks, 2) if self.tc16_fits_two_blocks else self.min_blocks

    @property
    def tc16_fits_two_blocks(self) -> bool:
        """Whether the 16-bit tensor-core dot form's element-load and phased entries are held to
        two blocks an SM (tc_granule_min_blocks): one mma tile of rows and at most 64 registers
        of windows in flight."""
        half = self.dtype in ("float16", "bfloat16")
        return half and self.tensor_cores and self.tc_ntiles == 1 and self.tc_depth * self.tc_tiles <= 4

    @property
    def tc_ntiles(self) -> int:
        """8-row mma tiles of the small operand in the tensor-core forms."""
        return -(-self.rows // 8)

    @property
    def wg_n(self) -> int:
        """The wgmma forms' instruction N: rows rounded up to 8."""
        return 8 * self.tc_ntiles

    @property
    def wg_value_bytes(self) -> int:
        """Bytes of one staged value of S in the wgmma forms: hi and lo TF32 words (float32),
        the raw 16-bit value (float16/bfloat16)."""
        return 2 if self.dtype in ("float16", "bfloat16") else 8

    @property
    def wg_window(self) -> int:
        """k values of the large operand a lane loads at once in the wgmma forms: 32 (float32,
        two 16-byte loads a row) or 64 (16-bit, two)."""
        return 64 if self.dtype in ("float16", "bfloat16") else 32

    @property
    def wg_chunk(self) -> int:
        """k values of S one staged chunk of the wgmma forms holds: whole windows within
        WG_STAGE_BYTES. K slabs are whole chunks."""
        w = self.wg_window
        return max(w, WG_STAGE_BYTES // (self.wg_value_bytes * self.wg_n) // w * w)

    @property
    def wg_chunk_bytes(self) -> int:
        return self.wg_chunk * self.wg_n * self.wg_value_bytes

    def tc_form(self, form: str) -> str:
        """The tensor-core form that runs `form` ("dot" or "axpy"): the wgmma one, except the
        16-bit axpy form, which is mma.sync's under either instruction."""
        half = self.dtype in ("float16", "bfloat16")
        wg = self.instruction == "wgmma" and (form == "dot" or not half)
        return ("wg_" if wg else "tc_") + form

    @property
    def tc_register_estimate(self) -> int:
        """Registers a thread needs in the larger tensor-core form: 4 accumulators per 16 x 8
        tile, the loads in flight (16 a tile for each of the TC_DOT_RING = 3 windows a warp
        of the dot form holds, the one in use and the next two; 16 a tile in the axpy form),
        the staged S fragments of one k8 step, and ~56 for addresses, indices and the split
        values."""
        nt, tiles = self.tc_ntiles, self.tc_tiles
        if self.instruction == "wgmma" and self.dtype == "float32":
            # window sums and running sums (WGN / 2 a tile each), split A fragments (32 a
            # tile), one window of L values (16 a tile in the dot form, 32 in the axpy form)
            return self.wg_n * tiles + 32 * tiles + max(16 * tiles, 32) + 48
        if self.instruction == "wgmma":
            # 16-bit: window sums and running sums, the window in use and the next (16 words
            # a tile each); the mma.sync axpy form's registers below
            wg = self.wg_n * tiles + 32 * tiles + 48
            ax = self.tc_axpy_tiles
            return max(wg, 4 * nt * ax + 4 * ax * self.tc_depth + 2 * nt + 40)
        if self.dtype != "float32":   # 16-bit: raw words, no split
            ax = self.tc_axpy_tiles
            dot = 4 * nt * tiles + 8 * tiles * self.tc_depth + 4 * nt
            axpy = 4 * nt * ax + 4 * ax * self.tc_depth + 2 * nt
            return max(dot, axpy) + 40
        dot = 4 * nt * tiles + 16 * self.tc_dot_ring * tiles * (self.tc_window // TC_WINDOW)
        axpy = 8 * nt * tiles + 16 * tiles
        return max(dot, axpy) + 4 * nt + 56

    @property
    def tc_dot_ring(self) -> int:
        """Windows a warp of the float32 mma.sync dot form holds: TC_DOT_RING 32-k windows or
        TC_LONG_WINDOW_RING 64-k ones."""
        return TC_DOT_RING if self.tc_window == TC_WINDOW else TC_LONG_WINDOW_RING

    @property
    def tc_dot_flush(self) -> bool:
        """Whether the float32 tensor-core dot form keeps rounded sums beside its mma
        accumulators (TC_FLUSH_MARGIN says where the registers allow it)."""
        sums = 4 * self.tc_ntiles * self.tc_tiles
        return (self.tensor_cores and self.dtype == "float32" and self.instruction == "mma_sync"
                and self.tc_register_estimate + sums + TC_FLUSH_MARGIN <= self.register_cap)

    @property
    def tc_chunk(self) -> int:
        """k values of S staged per round in the tensor-core forms: 64 bytes per k and 8-row
        tile (hi and lo of two values a lane), within TC_STAGE_BYTES, whole windows."""
        win = self.tc_window
        return max(win, TC_STAGE_BYTES // (self.tc_stage_bytes_per_k * self.tc_ntiles) // win * win)

    @property
    def runs_tc_axpy(self) -> bool:
        """Whether an n-contiguous large operand runs the tensor-core axpy form (else the
        SIMT one): with tensor_cores, in float32 always, in 16-bit types from
        TC16_AXPY_MIN_ROWS rows a block."""
        return self.tensor_cores and (self.dtype == "float32" or self.rows >= TC16_AXPY_MIN_ROWS)

    @property
    def tc_axpy_tiles(self) -> int:
        """mma tiles a warp feeds in the tensor-core axpy form (one per column of a lane's
        vector): 2 x tc_tiles in float32, 4 x lane_vectors in 16-bit types."""
        return 4 * self.lane_vectors if self.dtype in ("float16", "bfloat16") else 2 * self.tc_tiles

    @property
    def tc_depth(self) -> int:
        """16-bit tensor-core forms: 32-k windows (dot form) or 16-k steps (axpy form) of the
        large operand a warp keeps loaded ahead, from `loads` (a window is 2 x tc_tiles
        16-byte loads a lane)."""
        return max(2, min(8, self.loads // (2 * self.tc_tiles)))

    def tc_reduce_bytes(self, form: str = "tc_dot") -> int:
        """Shared bytes of the k_warps reduction in `form`: the float32 sums of every warp
        but the first of each column group (4 a 16 x 8 tile and lane)."""
        split = self.axpy_k_warps if form == "tc_axpy" else self.k_warps
        if split == 1:
            return 0
        tiles = self.tc_axpy_tiles if form == "tc_axpy" else self.tc_tiles
        return (self.warps - self.warps // split) * 32 * 4 * self.tc_ntiles * tiles * 4

    @property
    def tc_stage_bytes_per_k(self) -> int:
        """Shared bytes of staged S per k and 8-row tile: float32 holds hi and lo of two
        values in 16 bytes a lane and k8 step (64 a k); 16-bit the raw values (16 a k)."""
        return 16 if self.dtype in ("float16", "bfloat16") else 64

    def _acc_regs_per_column(self) -> int:
        return ACC_BYTES[self.dtype] // 4

    # -- derived sizes (pure; the host plan and the template agree through these) -------
    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def vec(self) -> int:
        """Elements in the widest load."""
        return self.vector_bytes // ITEMSIZE[self.dtype]

    def widths(self) -> list[int]:
        """Load widths in elements, widest first: one entry point per form and width."""
        out, w = [], self.vec
        while w >= 1:
            out.append(w)
            w //= 2
        return out

    @property
    def axpy_vec(self) -> int:
        """Widest load of the n-contiguous form: each lane keeps rows x lane_vectors x width
        accumulators, so the width shrinks for many rows."""
        per = self.rows * self.lane_vectors * self._acc_regs_per_column()
        w = self.vec
        while w > 1 and per * w > MAX_ACC_REGS // 2:
            w //= 2
        return w

    @property
    def axpy_shifts(self) -> bool:
        """Whether the SIMT axpy form has a _shift entry: a float16 or bfloat16 spec whose widest
        load is a whole 16-byte granule, so that rows off a 16-byte boundary are read as aligned
        granules and shifted across lanes (the template's shift_granules) rather than by the
        2- or 4-byte loads the alignment allows. Device time on an H200, row-major weights of 16 MB
        or more off a boundary (docs/matmul-record.md, "Row-major 16-bit weights off a 16-byte boundary"):
        1.02-1.23x the narrow entries on six 16-bit products; float32, whose narrow entries load
        4 or 8 bytes, ran level (0.93-1.10x over nine), so float32 and float64 keep them."""
        return self.dtype in ("float16", "bfloat16") and self.axpy_vec * ITEMSIZE[self.dtype] == 16

    @property
    def axpy_shift_min_blocks(self) -> int:
        """Blocks per SM ptxas must fit for the _shift entry: axpy_min_blocks, but at most
        AXPY_SHIFT_MIN_BLOCKS. Each row in flight holds lane 0's granule past the warp's last
        besides its own, and at the 64 registers of four blocks ptxas spilled them (12-92 bytes
        at 1-2 rows; 8 at 2 rows with three blocks): the entry ran 0.93-1.17x where three
        blocks ran 1.02-1.23x."""
        return min(self.axpy_min_blocks, AXPY_SHIFT_MIN_BLOCKS)

    def axpy_widths(self) -> list[int]:
        return [w for w in self.widths() if w <= self.axpy_vec]

    def _load_regs(self, width: int) -> int:
        return max(1, width * ITEMSIZE[self.dtype] // 4)

    def dot_loads(self, width: int) -> int:
        """k steps a lane of the SIMT dot form has in flight with loads `width` elements wide:
        the same registers of loaded data as the widest loads, so that an entry point that may
        only load elements of an unaligned row keeps as many bytes in flight (its addresses
        are immediate offsets from one pointer a column)."""
        return self.dot_unroll * (self._load_regs(self.vec) // self._load_regs(width))

    def axpy_lanes(self, width: int) -> int:
        """Vectors a lane of the SIMT axpy form holds with loads `width` elements wide: as many
        registers of loaded data as the widest loads take, so that an entry point that may only
        load elements of an unaligned row covers as many columns per block and keeps as many
        bytes in flight (the vectors of a row sit at immediate offsets from one address).
        In 16-bit types an entry point narrower than 16 bytes holds at most 4 elements a lane
        (4 vectors of 2 elements made ptxas spill at 2 rows)."""
        ratio = self._load_regs(self.axpy_vec) // self._load_regs(width)
        if self.dtype in ("float16", "bfloat16"):
            ratio = max(1, min(ratio, 4 // width))
        return self.lane_vectors * ratio

    @property
    def dot_unroll(self) -> int:
        """k steps per unrolled iteration of the dot form; one step's staged slab of S
        (rows x 32 x width) stays within DOT_STEP_BYTES of shared memory."""
        per_step = self.rows * 32 * self.vec * ACC_BYTES[self.dtype]
        return max(1, min(self.loads // self.warp_cols, DOT_STEP_BYTES // per_step))

    @property
    def axpy_unroll(self) -> int:
        return max(1, self.loads // self.lane_vectors)

    @property
    def slice(self) -> int:
        """Accumulators in 16 bytes."""
        return 16 // ACC_BYTES[self.dtype]

    @property
    def rpad(self) -> int:
        return -(-self.rows // self.slice) * self.slice

    @property
    def dot_step(self) -> int:
        """k elements one warp covers per unrolled step at the widest load."""
        return 32 * self.vec * self.dot_unroll

    @property
    def dot_chunk(self) -> int:
        acc = ACC_BYTES[self.dtype]
        step = self.dot_step
        return step * max(1, STAGE_BYTES // (self.rows * acc * step))

    @property
    def axpy_chunk(self) -> int:
        acc = ACC_BYTES[self.dtype]
        unit = self.warps * self.axpy_unroll
        return unit * max(1, STAGE_BYTES // (self.rpad * acc * unit))

    @property
    def red_rows(self) -> int:
        acc = ACC_BYTES[self.dtype]
        per_row = self.warps * self.axpy_cols(self.axpy_vec) * acc
        return max(1, min(self.rows, STAGE_BYTES // per_row))

    def dot_cols(self) -> int:
        """Columns of the large operand one block covers (k-contiguous form)."""
        return self.warps * self.warp_cols

    def axpy_cols(self, width: int) -> int:
        return 32 * width * self.axpy_lanes(width)

    def shared_for(self, form: str) -> int:
        acc = ACC_BYTES[self.dtype]
        if form in ("wg_dot", "wg_axpy"):
            return 2 * self.wg_chunk_bytes   # two chunk buffers: one in use, one arriving
        if form in ("tc_dot", "tc_axpy"):
            stage = self.tc_chunk * self.tc_stage_bytes_per_k * self.tc_ntiles
            return max(stage, self.tc_reduce_bytes(form))
        if form == "dot":
            return self.rows * self.dot_chunk * acc
        red = self.warps * self.red_rows * self.axpy_cols(self.axpy_vec) * acc
        return max(self.axpy_chunk * self.rpad * acc, red)

    def dynamic_shared_bytes(self, entry: str) -> int:
        # A main entry point asks its form's shared memory at launch (shared_for); the merge,
        # prescale and image kernels use static shared memory alone.
        m = MAIN_ENTRY.fullmatch(entry)
        return self.shared_for(m.group(1)) if m else 0

    def form(self) -> str:
        if self.instruction == "wgmma":
            return "Skinny wgmma"
        return "Skinny mma.sync" if self.tensor_cores else "Skinny SIMT"

    @property
    def shared_bytes(self) -> int:
        if self.instruction == "wgmma":
            forms: tuple[str, ...] = (self.tc_form("dot"), self.tc_form("axpy"))
        elif not self.tensor_cores:
            forms = ("dot", "axpy")
        else:
            forms = ("tc_dot", "tc_axpy" if self.runs_tc_axpy else "axpy")
        return max(self.shared_for(f) for f in forms)

    def scatter_levels(self) -> tuple[list[dict[str, int]], int, int]:
        """The dot form's warp reduction: levels (offset, values, halve?), values kept per
        lane, and the mask of lane bits whose lanes hold copies."""
        count, levels, dup = self.rows * self.warp_cols, [], 0
        for offset in (16, 8, 4, 2, 1):
            halve = count >= 2 and count % 2 == 0
            levels.append({"offset": offset, "count": count, "halve": halve})
            if halve:
                count //= 2
            else:
                dup |= offset
        return levels, count, dup

    def entry_units(self) -> bool:
        """A module holds every load width, phase class and form (5-12 large entry points) and a
        call launches one of them (with the small merge, prescale and image kernels, which every
        unit keeps): a kernel compiles each on its first launch. nvcc on this project's two-CPU
        host, -split-compile=0: the float32 module of 16 rows (mma.sync forms) whole 5.5 s, its
        tc_dot_v4 entry alone 1.2 s (docs/matmul-record.md, "First calls")."""
        return True

    def compile_options(self) -> tuple[str, ...]:
        """nvcc optimises the module's entry points in parallel (-split-compile=0: a thread per
        CPU of the host). A module holds every load width, phase class and merge entry (11 in a
        float32 one), built on a product's first call: on a 16-core H100 host the float32
        modules of 1, 8 and 24 rows (wgmma) compiled in 2.0, 3.1 and 6.4 s against 3.9, 8.2 and
        16.9, to cubins of the same size (docs/matmul-record.md, "First calls")."""
        return ("-split-compile=0",)

    def target_arch(self, arch: str) -> str:
        if self.merge == "cluster" and arch_number(arch) < 90:
            raise ValueError(f"merge='cluster' needs thread block clusters (sm_90 and later); this target is "
                             f"{arch}: use merge='two_pass'")
        if self.instruction != "wgmma":
            return arch
        if arch_number(arch) != 90:
            raise ValueError(f"instruction='wgmma' runs on sm_90 GPUs (H100, H200) only; this target is {arch}: "
                             "use instruction='mma_sync'")
        return "sm_90a"

    def template_context(self) -> dict[str, Any]:
        half = self.dtype in ("float16", "bfloat16")
        raw = {"float32": {4: "float4", 2: "float2", 1: "float"}, "float64": {2: "double2", 1: "double"},
               "float16": {8: "uint4", 4: "uint2", 2: "unsigned", 1: "unsigned short"}}
        raw["bfloat16"] = raw["float16"]
        levels, kept, dup = self.scatter_levels()
        return dict(
            acc_ctype="double" if self.dtype == "float64" else "float", half=half,
            raw_types=[{"width": w, "type": t} for w, t in sorted(raw[self.dtype].items())],
            rpad=self.rpad, warps=self.warps, dot_unroll=self.dot_unroll, axpy_unroll=self.axpy_unroll,
            dot_chunk=self.dot_chunk, axpy_chunk=self.axpy_chunk, red_rows=self.red_rows,
            dot_widths=self.widths(), axpy_widths=self.axpy_widths(),
            dot_loads={w: self.dot_loads(w) for w in self.widths()},
            axpy_lanes={w: self.axpy_lanes(w) for w in self.axpy_widths()}, axpy_shift=self.axpy_shifts,
            axpy_shift_min_blocks=self.axpy_shift_min_blocks,
            scatter_levels=levels, scatter_kept=kept, scatter_dup_mask=dup,
            atomic_ok=self.dtype in ("float32", "float64"), stage_vec=16 // ITEMSIZE[self.dtype],
            tc_ntiles=self.tc_ntiles, tc_chunk=self.tc_chunk, tc_dot_ring=self.tc_dot_ring, tc_window=self.tc_window,
            tc_dot_flush=self.tc_dot_flush,
            k_warps=self.k_warps, axpy_k_warps=self.axpy_k_warps,
            tc_depth=self.tc_depth, tc_axpy_tiles=self.tc_axpy_tiles, tc_axpy=self.runs_tc_axpy,
            wgmma=self.instruction == "wgmma", wg_n=self.wg_n, wg_chunk=self.wg_chunk,
            mma16="bf16" if self.dtype == "bfloat16" else "f16",
            dot_min_blocks=self.dot_min_blocks, axpy_min_blocks=self.axpy_min_blocks,
            tc_granule_min_blocks=self.tc_granule_min_blocks,
            cluster_slabs=self.k_split if self.merge == "cluster" else 0,
            cluster_attr=f"__cluster_dims__(1, {self.k_split}, 1) " if self.merge == "cluster" else "",
        )

    # -- the launch plan (pure; CPU-tested) ----------------------------------------------
    def form_steps(self, form: str, width: int) -> tuple[int, int, int]:
        """(columns a block, the K step slabs start on, the shortest slab) of `form` with loads
        `width` elements wide (see geometry)."""
        if form in ("wg_dot", "wg_axpy"):
            return self.warps * 16 * self.tc_tiles, self.wg_chunk, self.wg_chunk
        if form == "tc_dot":
            return (self.warps // self.k_warps * 16 * self.tc_tiles, self.tc_window * self.k_warps,
                    TC_MIN_SLAB_K * self.k_warps)
        if form == "tc_axpy":
            kw = self.axpy_k_warps
            least = TC16_AXPY_MIN_SLAB_K if self.dtype in ("float16", "bfloat16") else TC_MIN_SLAB_K
            return self.warps // kw * 16 * self.tc_axpy_tiles, 16 * kw, least * kw
        if form == "dot":
            return self.dot_cols(), 32 * self.vec, 2 * self.dot_step
        return self.axpy_cols(width), self.warps, 2 * self.warps * self.axpy_unroll

    def column_tiles(self, form: str, width: int, NC: int, classes: int = 1) -> int:
        """Column tiles (the grid's x) of NC large columns in `form` with loads `width` elements
        wide; `classes` > 1: the phased dot form's, each tile of one class of columns. It does not
        depend on the occupancy, so a plan can pick its entry point before asking for that."""
        return classes * _ceil_div(_ceil_div(NC, classes), self.form_steps(form, width)[0])

    def geometry(self, form: str, width: int, R: int, NC: int, K: int, slots: int,
                 sms: int | None = None, classes: int = 1) -> dict[str, Any]:
        """Grid, K slabs and merge mode of one product in `form` ("dot", "axpy", "tc_dot" or
        "tc_axpy") with loads `width` elements wide, R small rows, NC large columns, on a GPU that runs `slots`
        blocks of this kernel at once on `sms` multiprocessors (None: the SIMT dot form's
        whole-K rule, DOT_WHOLE_K_SM_SHARE, is not applied). `classes` > 1: the phased dot
        form, whose column tiles each hold columns of one class (n modulo classes)."""
        cols, unit, least = self.form_steps(form, width)
        col_tiles, row_tiles = self.column_tiles(form, width, NC, classes), -(-R // self.rows)
        tiles = col_tiles * row_tiles
        # Slabs start on whole steps (aligned for any width) and keep each block a few steps deep.
        most = max(1, min(65535, K // least))
        if self.merge == "cluster":
            # The cluster's size is compiled in: always k_split slabs, a slab past K empty
            # (its partials zeros).
            ks = _ceil_div(_ceil_div(K, self.k_split), unit) * unit
            return {"grid": (col_tiles, self.k_split, row_tiles), "splits": self.k_split, "ks": ks,
                    "mode": MODE_CLUSTER, "tiles": tiles, "cols": cols}
        # Enough column tiles of the SIMT dot form keep the memory busy: a split only adds its
        # merge, except where no more tiles than SMs of 3+ float32 rows stream a long K.
        dot_rule = bool(form == "dot" and sms and tiles >= DOT_WHOLE_K_SM_SHARE * sms)
        if self.k_split:
            want = self.k_split
        elif dot_rule:
            want = dot_few_tile_slabs(self.dtype, self.rows, tiles, K, sms or 0)
        else:
            want = -(-self.waves * max(slots, 1) // tiles)
        if form in ("tc_dot", "tc_axpy") and self.dtype in ("float16", "bfloat16"):
            # Each slab past the first writes R x NC float32 partial sums that are read again:
            # keep that within an eighth of the large operand's bytes (NC x K x 2), unless
            # fewer slabs would leave part of one wave of resident blocks empty.
            lean = max(1, K * ITEMSIZE[self.dtype] // (64 * R))
            most = min(most, max(lean, -(-max(slots, 1) // tiles)))
        if self.k_split or dot_rule or want == 1:
            splits = _slabs(K, max(1, min(want, most)), unit)
        else:
            splits = wave_fitted_splits(K, unit, tiles, slots, min(want, most), most)
        ks = _ceil_div(_ceil_div(K, splits), unit) * unit
        if splits == 1:
            mode = MODE_DIRECT
        else:
            mode = {"single_pass": MODE_TICKET, "two_pass": MODE_PARTIALS, "atomic": MODE_ATOMIC}[self.merge]
        return {"grid": (col_tiles, splits, row_tiles), "splits": splits, "ks": ks, "mode": mode,
                "tiles": tiles, "cols": cols}

    # -- the family interface (see Spec) ----------------------------------------------
    @classmethod
    def normalize_problem(cls, problem):
        """{"M", "N", "K"}, and "layout_a" / "layout_b" = "col" where that operand is stored column
        by column: B = W.t() of an N x K weight (the large operand k-contiguous, which runs the dot
        forms, not the axpy ones: another kernel, tuned and looked up apart). "row", the default,
        is left out, so a row-major problem keeps the key it always had."""
        out: dict[str, Any] = dict(normalize_mnk(problem, "skinny"))
        for name in PROBLEM_LAYOUTS:
            layout = problem.get(name, "row")
            if layout not in ("row", "col"):
                raise ValueError(f"skinny problem {name}={layout!r} is not allowed: 'row' or 'col'")
            if layout == "col":
                out[name] = layout
        return out

    @classmethod
    def suits(cls, M: int, N: int, K: int, dtype: str, k_contiguous: bool | None = None,
              wgmma_in_place: bool = False, wgmma: bool = False) -> bool:
        """Whether this family should run M x N x K rather than a tiled (or tensor-core)
        matmul: the small dimension is at most SUITS_ROWS[dtype], where the SIMT forms
        measured at least as fast as cuBLAS; or small products (SMALL_SIMT_ROWS, and in
        float64 a large side below SMALL_SIMT_F64_LARGE and K up to SMALL_SIMT_F64_MAX_K); or, in
        float32 with N and K of at least
        TC_MIN_DIM, at most TC_SUITS_ROWS[k-contiguous large operand or not], where the
        split-TF32 tensor-core forms beat the tiled family (docs/matmul-record.md, "Skinny
        products"); or, in float16/bfloat16 with N and K of at least TC_MIN_DIM: with a
        k-contiguous large operand at most TC16_SUITS_ROWS (the mma.m16n8k16 dot form), or
        TC16_ALIGNED_ROWS when `wgmma_in_place` (the large operand's rows are 16-byte aligned,
        or it is W.t() of an unaligned weight that TensorMatmul.realign_swap_suits, and the GPU
        runs the Hopper wgmma kernel, which wins from there up); with an
        n-contiguous one at most TC16_AXPY_ROWS[wgmma_in_place] (the mma.m16n8k16 axpy form).
        Few rows (M <= N) with `wgmma_in_place` are the exception: where TensorMatmul runs
        them with A's rows as the wgmma N (TensorMatmul.swap_suits: 1-64 rows, N and K of at
        least TC_MIN_DIM) they go there, which beat these forms.
        `k_contiguous`: whether the large operand is stored k-contiguous (a weight N x K
        passed as W.T); None counts as not. KGEN_SPLIT_TF32=0 turns the float32 tensor-core
        part off (split_tf32_enabled). `wgmma`: the GPU runs the Hopper forms (sm_90) and
        the split is on; float32 then takes up to WG_SUITS_ROWS rows in either storage order
        (wgmma_suits)."""
        small, large = min(M, N), max(M, N)
        if small < 1:
            return False
        if dtype in ("float16", "bfloat16") and wgmma_in_place and M <= N and TensorMatmul.swap_suits(M, N, K, dtype):
            # Few rows against an aligned weight on sm_90: the wgmma kernel with A's rows as
            # its N (TensorMatmul.swap_spec) streams it faster than these forms.
            return False
        if small <= SUITS_ROWS.get(dtype, 0):
            return True
        if dtype == "float32" and wgmma and cls.wgmma_suits(M, N, K):
            return True
        if dtype == "float64" and small <= SMALL_SIMT_ROWS and SMALL_SIMT_MIN_K <= K <= SMALL_SIMT_F64_MAX_K \
                and large < SMALL_SIMT_F64_LARGE and not TensorMatmul.few_columns_f64_suits(M, N, K):
            return True
        if large < TC_MIN_DIM or K < TC_MIN_DIM:
            return (dtype == "float32" and small <= SMALL_SIMT_ROWS and K >= SMALL_SIMT_MIN_K
                    and (large < TC_MIN_DIM or small <= SMALL_SIMT_WIDE_ROWS))
        if dtype in ("float16", "bfloat16"):
            if k_contiguous:
                return small <= (TC16_ALIGNED_ROWS if wgmma_in_place else TC16_SUITS_ROWS)
            return small <= TC16_AXPY_ROWS[wgmma_in_place]
        return dtype == "float32" and small <= TC_SUITS_ROWS[bool(k_contiguous)] and split_tf32_enabled()

    @classmethod
    def wgmma_suits(cls, M: int, N: int, K: int) -> bool:
        """Whether a float32 product runs the wgmma forms on an sm_90 GPU (rather than the
        mma.sync or SIMT forms, the tiled family or the split-TF32 tensor-core family). The
        small dimension is WG_MIN_ROWS to WG_SUITS_ROWS, and
          - K of at least TC_MIN_DIM, past WG_WIDE_ROWS rows only with K of WG_WIDE_MIN_K;
          - or K of WG_SHORT_MIN_K to TC_MIN_DIM against a large side of TC_MIN_DIM (of
            WG_SHORT_NARROW_LARGE up to WG_SHORT_NARROW_ROWS rows), at most WG_SHORT_MAX_ROWS rows;
          - or WG_TINY_ROWS (exclusive) to WG_SHORT_MAX_ROWS rows against a large side below
            TC_MIN_DIM, with K of WG_TINY_MIN_K.
        The bounds come from public calls (host time included) on 145 random shapes of 17-512
        rows, large sides 128-16384 and K 32-16384 on an H200 (docs/matmul-record.md, "Where the
        wgmma forms run")."""
        small, large = min(M, N), max(M, N)
        if not WG_MIN_ROWS <= small <= WG_SUITS_ROWS:
            return False
        if K >= TC_MIN_DIM:
            return small <= WG_WIDE_ROWS or K >= WG_WIDE_MIN_K
        short_k = K >= WG_SHORT_MIN_K and small <= WG_SHORT_MAX_ROWS and \
            large >= (TC_MIN_DIM if small > WG_SHORT_NARROW_ROWS else WG_SHORT_NARROW_LARGE)
        tiny_large = WG_TINY_ROWS < small <= WG_SHORT_MAX_ROWS and large < TC_MIN_DIM and K >= WG_TINY_MIN_K
        return short_k or tiny_large

    @classmethod
    def wgmma_wide_dot_suits(cls, M: int, N: int, K: int) -> bool:
        """Whether a float32 product below WG_MIN_ROWS rows (or columns) that the split-TF32
        forms take (more than SIMT_F32_ROWS), its large operand k-contiguous (the caller's
        test), runs the wgmma dot form on an sm_90 GPU: a large side of WG_WIDE_DOT_MIN_LARGE
        or more and K of TC_MIN_DIM or more."""
        small, large = min(M, N), max(M, N)
        return SIMT_F32_ROWS < small < WG_MIN_ROWS and large >= WG_WIDE_DOT_MIN_LARGE and K >= TC_MIN_DIM

    @classmethod
    def wgmma_default_spec(cls, problem, dtype: str = "float32") -> "Skinny":
        """The wgmma form's spec from the shape: row tiles of at most WG_MAX_ROWS rows
        (WG16_MAX_ROWS in float16/bfloat16), as even as whole 8s make them (200 rows: two of
        104); one 64-column tile a warpgroup, two warpgroups a block up to WG_TWO_GROUP_ROWS
        rows and one above, the slabs merged by a second kernel; K split for two waves of
        resident blocks, or one where float32 row tiles of one warpgroup stream at most
        WG_ONE_WAVE_MAX_ELEMENTS of the large operand in all. In 16-bit types a row-major
        large operand runs the mma.sync axpy form: one vector a lane, four warps sharing each
        K slab up to 16 rows (as default_spec has it)."""
        p = cls.normalize_problem(problem)
        small = min(p["M"], p["N"])
        half = dtype in ("float16", "bfloat16")
        most = WG16_MAX_ROWS if half else WG_MAX_ROWS
        tiles = _ceil_div(small, most)
        rows = min(most, _ceil_div(_ceil_div(small, tiles), 8) * 8)
        threads = 256 if rows <= WG_TWO_GROUP_ROWS else 128
        axpy_k_warps = 4 if half and rows <= 16 and threads == 256 else 1
        reads = tiles * max(p["M"], p["N"]) * p["K"]   # elements of the large operand the row tiles read
        one_wave = dtype == "float32" and threads == 128 and reads <= WG_ONE_WAVE_MAX_ELEMENTS
        return cls(dtype=dtype, rows=rows, warp_cols=1, lane_vectors=1, threads=threads, vector_bytes=16, loads=4,
                   k_split=0, waves=1 if one_wave else 2, merge="two_pass", tensor_cores=True, tc_tiles=1,
                   axpy_k_warps=axpy_k_warps, instruction="wgmma")

    def for_layouts(self, problem, **layouts):
        """This spec, or with instruction="wgmma" asked (dispatch on an sm_90 GPU, for the
        products wgmma_suits takes) and this spec not already a wgmma one, the wgmma
        form's default spec; with tensor_cores=False asked (dispatch, for 16-bit products
        whose large operand allows only element loads: simt_for_element_rows) and this spec
        a tensor-core one, the SIMT forms' default spec. `axpy_sms` (not a field: dispatch
        passes the GPU's SM count for a product whose large operand is stored n-contiguous):
        one tile a warp where one_tile_axpy_suits, one wave of blocks where one_wave_axpy_suits,
        the tensor-core axpy form where tc_axpy_few_rows_suits.
        `dot_sms` (not a field either: the SM count, for a float32 product whose large operand is
        k-contiguous): 4 columns a warp where narrow_dot_suits, then one wave of blocks where
        one_wave_dot_suits (counted with those columns), the tensor-core dot form where
        tc_dot_narrow_suits."""
        sms = layouts.pop("axpy_sms", None)
        dot_sms = layouts.pop("dot_sms", None)
        if layouts.get("instruction") == "wgmma" and self.instruction != "wgmma":
            return self.wgmma_default_spec(problem, self.dtype)
        if layouts.get("tensor_cores") is False and self.tensor_cores:
            return self.simt_default_spec(problem, self.dtype)
        spec = self.replace(**layouts) if layouts else self
        if sms and spec.one_tile_axpy_suits(problem, sms):
            spec = spec.replace(tc_tiles=1)
        if sms and spec.one_wave_axpy_suits():
            spec = spec.replace(waves=AXPY_SIMT_WAVES)
        if sms and spec.tc_axpy_few_rows_suits(problem):
            spec = spec.replace(rows=tc_rows_shared(spec.rows), tensor_cores=True, tc_tiles=2, merge="two_pass",
                                waves=1, programmatic=False, l2_prefetch=0)
        if dot_sms and spec.narrow_dot_suits(problem, dot_sms):
            spec = spec.replace(warp_cols=DOT_NARROW_WARP_COLS)
        if dot_sms and spec.one_wave_dot_suits(problem, dot_sms):
            spec = spec.replace(waves=DOT_FEW_TILE_WAVES)
        if dot_sms and spec.long_window_dot_suits(problem):
            spec = spec.replace(tc_window=TC_LONG_WINDOW)
        if dot_sms and spec.tc_dot_narrow_suits(problem):
            rows, K = tc_rows_shared(spec.rows), self.normalize_problem(problem)["K"]
            spec = spec.replace(rows=rows, warp_cols=default_warp_cols(rows, spec.dtype, K),
                                tensor_cores=True, tc_tiles=2, tc_window=TC_WINDOW, merge="two_pass", waves=1,
                                programmatic=False, l2_prefetch=0)
        return spec

    def tc_dot_narrow_suits(self, problem) -> bool:
        """Whether this float32 SIMT spec, run on a k-contiguous large operand (the SIMT dot form,
        B = W.t()) whose large side is TC_DOT_NARROW_MIN_LARGE to TC_MIN_DIM (a narrow weight,
        which default_spec leaves to the SIMT forms), should run the split-TF32 tensor-core dot
        form instead (two tiles a warp, 32-k windows, two-pass merge, one wave, launched
        plainly): its rows and the small dimension more than TC_DOT_NARROW_MIN_ROWS - 1 and at
        most TC_ONE_WAVE_ROWS, its K split left to the launch (k_split=0, not a cluster), K at
        least TC_MIN_DIM, and the split-TF32 forms allowed (split_tf32_enabled)."""
        if not (self.dtype == "float32" and not self.tensor_cores and self.k_split == 0 and self.merge != "cluster"
                and TC_DOT_NARROW_MIN_ROWS <= self.rows <= TC_ONE_WAVE_ROWS):
            return False
        p = self.normalize_problem(problem)
        small, large = min(p["M"], p["N"]), max(p["M"], p["N"])
        return (TC_DOT_NARROW_MIN_ROWS <= small <= TC_ONE_WAVE_ROWS and TC_DOT_NARROW_MIN_LARGE <= large < TC_MIN_DIM
                and p["K"] >= TC_MIN_DIM and split_tf32_enabled())

    def long_window_dot_suits(self, problem) -> bool:
        """Whether this float32 mma.sync tensor-core spec of up to TC_ONE_WAVE_ROWS rows, run on
        a k-contiguous large operand (the tensor-core dot form, B = W.t()), should read windows
        of TC_LONG_WINDOW k rather than 32: its window left at 32 and the large operand
        TC_LONG_WINDOW_MIN_BYTES or more, where slabs are long enough that the longer loads
        outweigh the shorter ring's fill and drain."""
        if not (self.dtype == "float32" and self.tensor_cores and self.instruction == "mma_sync"
                and self.tc_window == TC_WINDOW and self.rows <= TC_ONE_WAVE_ROWS):
            return False
        p = self.normalize_problem(problem)
        return max(p["M"], p["N"]) * p["K"] * ITEMSIZE[self.dtype] >= TC_LONG_WINDOW_MIN_BYTES

    def one_wave_axpy_suits(self) -> bool:
        """Whether this float32 SIMT spec, run on an n-contiguous large operand (the SIMT axpy
        form, B row-major) should split K for AXPY_SIMT_WAVES (one) wave of resident blocks rather
        than `waves`: its K split left to the launch (k_split=0, not a cluster), and at most 16
        accumulator registers a thread (float32 up to 4 rows), where axpy_min_blocks keeps 1024
        threads an SM resident."""
        return (self.dtype == "float32" and not self.tensor_cores and self.k_split == 0
                and self.merge != "cluster" and self.waves > AXPY_SIMT_WAVES and self.axpy_acc_regs <= 16)

    def tc_axpy_few_rows_suits(self, problem) -> bool:
        """Whether this float32 SIMT spec of more than 16 axpy accumulators a thread and at most
        SIMT_F32_ROWS rows (5-6), run on an n-contiguous large operand (B row-major), should run
        the split-TF32 tensor-core axpy form instead (two tiles a warp, two-pass merge, one wave,
        launched plainly): its K split left to the launch (k_split=0, not a cluster), K at least
        TC_AXPY_FEW_ROWS_MIN_K, and the split-TF32 forms allowed (split_tf32_enabled)."""
        if not (self.dtype == "float32" and not self.tensor_cores and self.k_split == 0 and self.merge != "cluster"
                and self.axpy_acc_regs > 16 and self.rows <= SIMT_F32_ROWS):
            return False
        return self.normalize_problem(problem)["K"] >= TC_AXPY_FEW_ROWS_MIN_K and split_tf32_enabled()

    def dot_tiles(self, problem) -> int:
        """Column tiles (times row tiles) of the SIMT dot form on `problem`, counted on its large
        and small sides whichever of M and N each is."""
        p = self.normalize_problem(problem)
        small, large = min(p["M"], p["N"]), max(p["M"], p["N"])
        return _ceil_div(large, self.dot_cols()) * _ceil_div(small, self.rows)

    def narrow_dot_suits(self, problem, sms: int) -> bool:
        """Whether this SIMT spec of 8 columns a warp, a float32 one of DOT_FEW_TILES_MIN_ROWS to
        SIMT_F32_ROWS rows or a float16/bfloat16 one of one row, run on a k-contiguous large
        operand (the dot form, B = W.t()) on a GPU of `sms` SMs, should stream
        DOT_NARROW_WARP_COLS columns a warp instead: its K split left to the launch (k_split=0,
        not a cluster), and its 8-column tiles fewer than the SMs but enough that K stays whole
        (DOT_WHOLE_K_SM_SHARE of the SMs or more, K too short for dot_few_tile_slabs to cut it)."""
        rows_suit = (DOT_FEW_TILES_MIN_ROWS <= self.rows <= SIMT_F32_ROWS if self.dtype == "float32"
                     else self.rows == 1 and self.dtype in ("float16", "bfloat16"))
        if not (rows_suit and not self.tensor_cores and self.k_split == 0 and self.merge != "cluster"
                and self.warp_cols == 8):
            return False
        p = self.normalize_problem(problem)
        tiles = self.dot_tiles(p)
        return (DOT_WHOLE_K_SM_SHARE * sms <= tiles < sms
                and dot_few_tile_slabs(self.dtype, self.rows, tiles, p["K"], sms) == 1)

    def one_wave_dot_suits(self, problem, sms: int) -> bool:
        """Whether this float32 SIMT spec, run on a k-contiguous large operand (the dot form,
        B = W.t()) on a GPU of `sms` SMs, should split K for DOT_FEW_TILE_WAVES (one) wave of
        resident blocks rather than `waves`: its K split left to the launch (k_split=0, not a cluster), and
        its column tiles fewer than DOT_WHOLE_K_SM_SHARE of the SMs, where `waves` sets the
        split (more tiles leave K whole or take dot_few_tile_slabs, whatever `waves` says)."""
        if not (self.dtype == "float32" and not self.tensor_cores and self.k_split == 0 and self.merge != "cluster"
                and self.waves > DOT_FEW_TILE_WAVES):
            return False
        return self.dot_tiles(problem) < DOT_WHOLE_K_SM_SHARE * sms

    def one_tile_axpy_suits(self, problem, sms: int) -> bool:
        """Whether this float32 mma.sync spec, run on an n-contiguous large operand (the
        tensor-core axpy form) on a GPU of `sms` SMs, should take one tile a warp rather than
        two: its K split left to the launch (k_split=0, not a cluster), and its blocks, with K
        cut into the shortest slabs the form allows, fewer than AXPY_ONE_TILE_SM_SHARE per SM."""
        if not (self.dtype == "float32" and self.runs_tc_axpy and self.instruction == "mma_sync"
                and self.tc_tiles == 2 and self.k_split == 0 and self.merge != "cluster"):
            return False
        p = self.normalize_problem(problem)
        small, large = min(p["M"], p["N"]), max(p["M"], p["N"])
        cols, _, least = self.form_steps("tc_axpy", 4)
        blocks = _ceil_div(large, cols) * _ceil_div(small, self.rows) * max(1, p["K"] // least)
        return blocks < AXPY_ONE_TILE_SM_SHARE * sms

    @classmethod
    def simt_for_element_rows(cls, small: int, dtype: str, k_contiguous: bool) -> bool:
        """Whether a product of `small` rows (or columns) whose large operand allows only
        element loads (its rows an odd number of elements apart) runs the SIMT forms rather
        than the tensor-core ones default_spec picks. 16-bit inputs, 2 to
        SIMT_ELEMENT_ROWS_16 rows, a large operand stored n-contiguous (the axpy forms):
        there the mma.m16n8k16 axpy form gathers each fragment with 2-byte loads, and the
        SIMT forms ran 1.01-1.37x faster (geometric mean 1.20x; device time, two weights,
        both storage orders, H200; docs/matmul-record.md, "Rows that are not 16-byte aligned").
        A k-contiguous one (W.t()) keeps the tensor-core dot form, which reads such rows
        as whole granules: 1.01-1.15x the SIMT forms' speed at 2-4 rows on eight drawn
        products, 1.15x (0.91-1.81x) on ten held out (H100, docs/matmul-record.md). In float32 the two kinds of
        form ran level at 7-12 rows, the tensor-core forms ahead from 16."""
        return dtype in ("float16", "bfloat16") and 2 <= small <= SIMT_ELEMENT_ROWS_16 and not k_contiguous

    @classmethod
    def simt_default_spec(cls, problem, dtype):
        """default_spec's fields for the SIMT forms, whatever the shape: rows as default_spec,
        columns a warp (dot form) as ~64 accumulators allow, single-pass merge; 16-bit
        products of 1-2 rows ask for one wave of blocks, others two. float32 and float64 launch
        programmatically with SIMT_L2_PREFETCH_KIB of each block's slab asked of L2 ahead of
        the wait."""
        p = cls.normalize_problem(problem)
        small = min(p["M"], p["N"])
        rows = default_rows(small)
        warp_cols = default_warp_cols(rows, dtype, p["K"])
        half = dtype in ("float16", "bfloat16")
        return cls(dtype=dtype, rows=rows, warp_cols=warp_cols, lane_vectors=1, threads=256, vector_bytes=16,
                   loads=default_loads(rows), k_split=0, waves=1 if half and small <= 2 else 2,
                   merge="single_pass", programmatic=not half, l2_prefetch=0 if half else SIMT_L2_PREFETCH_KIB)

    @classmethod
    def default_spec(cls, problem, dtype):
        """Fields from the shape alone: rows = the small dimension (up to 16), rounded up to
        8s up to 64, and split into even tiles of at most 64 beyond; warp_cols keeps the
        accumulators within ~64 registers; K splits itself at launch from the SM count."""
        p = cls.normalize_problem(problem)
        small = min(p["M"], p["N"])
        rows = default_rows(small)
        warp_cols = default_warp_cols(rows, dtype, p["K"])
        loads = default_loads(rows)
        tc_sized = min(max(p["M"], p["N"]), p["K"]) >= TC_MIN_DIM
        if dtype == "float32" and (small > SMALL_SIMT_ROWS or tc_sized and (
                small > SUITS_ROWS["float32"] or small > SIMT_F32_ROWS and split_tf32_enabled())):
            # Past the SIMT forms' range, and from SIMT_F32_ROWS up where N and K are large: the
            # split-TF32 tensor-core forms, 2 tiles a warp, the slabs merged by a second kernel
            # (the ticket merge's last block was the tail there). Small products of up to
            # SMALL_SIMT_ROWS rows keep the SIMT forms (below). Rows round up to whole 8-row mma
            # tiles: a block's work is its tiles (tc_ntiles), and the rows past the small
            # dimension stay zero whatever `rows` says, so 9 to 16 rows share one spec and one
            # compile (tc_rows_shared).
            rows = tc_rows_shared(rows)
            warp_cols = default_warp_cols(rows, dtype, p["K"])
            return cls(dtype=dtype, rows=rows, warp_cols=warp_cols, lane_vectors=1, threads=256, vector_bytes=16,
                       loads=loads, k_split=0, waves=1 if small <= TC_ONE_WAVE_ROWS else 2, merge="two_pass",
                       tensor_cores=True, tc_tiles=2)
        if dtype in ("float16", "bfloat16"):
            # The mma.m16n8k16 forms from 2 rows: the dot form for a k-contiguous large
            # operand, the axpy form for a row-major one from 3 (runs_tc_axpy; 1-2 rows run
            # the SIMT axpy form). 1 row: the SIMT forms (equal speed, no tensor-core tile of 8
            # rows for one). Two-pass merge from 5 rows: in device time the single pass ran
            # level at 3-4 rows (1.01-1.02x over ten weights, H100) and saves a launch, but
            # 0.95-0.98x at 6-8 rows and 0.80-0.89x at 12-16 (docs/matmul-record.md). Dot form: up
            # to 8 rows, 4 warps share each column
            # group's K slab (k_warps) and 2 tiles a warp; past 32 rows 1 tile a warp (fewer
            # accumulators, more blocks). Axpy form: 4 warps share the slab up to 16 rows
            # (ahead of 1 and 2 by 5-15% at 3-16 rows on an H100), 8-byte vectors (4 tiles).
            # 1-2 rows: one wave of blocks (device time 1.00-1.09x over two waves on five
            # weights, both orders, H100; docs/bench/skinny_sweep_1_2_rows_h100.txt). From 3 rows
            # two: one wave ran 0.70-1.20x on held-out shapes (TC_ONE_WAVE_ROWS).
            tc = small > 1
            return cls(dtype=dtype, rows=rows, warp_cols=warp_cols, lane_vectors=1, threads=256, vector_bytes=16,
                       loads=loads, k_split=0, waves=1 if small <= 2 else 2,
                       merge="two_pass" if small > 4 else "single_pass",
                       tensor_cores=tc, tc_tiles=2 if rows <= 32 else 1, k_warps=4 if tc and small <= 8 else 1,
                       axpy_k_warps=4 if tc and rows >= TC16_AXPY_MIN_ROWS and small <= 16 else 1)
        return cls.simt_default_spec(p, dtype)

    @classmethod
    def search_space(cls, problem, dtype):
        p = cls.normalize_problem(problem)
        small = min(p["M"], p["N"])
        base = cls.default_spec(p, dtype)
        seen, specs = set(), []

        def add(start=None, **kw):
            start = start or base
            if not kw.get("tensor_cores", start.tensor_cores):
                kw.setdefault("k_warps", 1)   # the SIMT forms keep each warp's K to itself
                kw.setdefault("axpy_k_warps", 1)
            try:
                s = start.replace(**kw)
            except ValueError:
                return
            if s.key not in seen:
                seen.add(s.key)
                specs.append(s)

        add()
        row_choices = sorted({base.rows, default_rows(min(small, 16)), min(64, -(-small // 8) * 8)})
        for rows in row_choices:
            for warp_cols in (1, 2, 4, 8):
                for threads in (128, 256, 512):
                    for loads in (4, 8, 16):
                        add(rows=rows, warp_cols=warp_cols, threads=threads, loads=loads)
        for merge in MERGES:
            for waves in (1, 2, 4):
                add(merge=merge, waves=waves)
        for k_split in (2, 4, 8):   # the slabs merged in a thread block cluster (sm_90 on)
            add(merge="cluster", k_split=k_split)
        for lane_vectors in (1, 2, 4):
            add(lane_vectors=lane_vectors)
        for vector_bytes in (4, 8):
            add(vector_bytes=vector_bytes)
        add(programmatic=False, l2_prefetch=0)
        for kib in L2_PREFETCH_KIB:
            add(programmatic=True, l2_prefetch=kib)
        add(tensor_cores=False)   # the SIMT forms with the default fields
        if dtype != "float64":
            tc_rows = sorted({default_rows(small), min(64, -(-small // 8) * 8)})
            for rows in tc_rows:
                for tiles in (1, 2):
                    for merge in MERGES:
                        for waves in (1, 2):
                            for min_blocks in (1, 2):
                                add(rows=rows, warp_cols=1, loads=4, tensor_cores=True, tc_tiles=tiles,
                                    merge=merge, waves=waves, min_blocks=min_blocks)
                    for k_split in (2, 4, 8):
                        add(rows=rows, warp_cols=1, loads=4, tensor_cores=True, tc_tiles=tiles, merge="cluster",
                            k_split=k_split)
                    if dtype == "float32":   # long windows of the dot form
                        for waves in (1, 2):
                            add(rows=rows, warp_cols=1, loads=4, tensor_cores=True, tc_tiles=tiles,
                                tc_window=TC_LONG_WINDOW, merge="two_pass", waves=waves)
            if dtype in ("float16", "bfloat16"):
                # Warps sharing K slabs, and deeper window prefetch.
                for rows in tc_rows:
                    for tiles in (1, 2):
                        for k_warps in (1, 2, 4, 8):
                            for loads in (8, 16):
                                add(rows=rows, warp_cols=1, loads=loads, tensor_cores=True, tc_tiles=tiles,
                                    k_warps=k_warps, merge="two_pass")
                # The axpy form's split and vector width, and smaller blocks.
                for rows in tc_rows:
                    for lane_vectors in (1, 2):
                        for axpy_k_warps in (1, 2, 4, 8):
                            for threads in (128, 256):
                                add(rows=rows, warp_cols=1, tensor_cores=True, lane_vectors=lane_vectors,
                                    axpy_k_warps=axpy_k_warps, threads=threads, merge="two_pass")
        if dtype == "float32" and (cls.wgmma_suits(p["M"], p["N"], p["K"])
                                   or cls.wgmma_wide_dot_suits(p["M"], p["N"], p["K"])):
            # The wgmma forms (sm_90 only: prune_reason drops them elsewhere).
            wg = cls.wgmma_default_spec(p)
            for rows in sorted({wg.rows, min(WG_MAX_ROWS, -(-small // 8) * 8)}):
                for threads in (128, 256):
                    for tiles in (1, 2):
                        for merge in MERGES:
                            for waves in (1, 2):
                                add(wg, rows=rows, threads=threads, tc_tiles=tiles, merge=merge, waves=waves)
        return specs

    def prune_reason(self, problem, limits):
        cc = limits.get("compute_capability", 90)
        if self.instruction == "wgmma" and cc != 90:
            return f"instruction='wgmma' runs on compute capability 90 only; this one is {cc}"
        if self.merge == "cluster" and cc < 90:
            return f"merge='cluster' needs thread block clusters (compute capability 90 on); this one is {cc}"
        over = block_limit_reason(self.threads, self.shared_bytes, limits, MAX_SHARED_BYTES)
        if over:
            return over
        p = self.normalize_problem(problem)
        small = min(p["M"], p["N"])
        if self.rows >= 2 * small and self.rows > 1:
            return f"rows={self.rows} is more than twice the small dimension {small}: most accumulators idle"
        return None

    @classmethod
    def make_inputs(cls, problem, dtype, rng):
        np_dtype = runtime.numpy_dtype(dtype)
        if np_dtype is None:
            raise ValueError(f"dtype={dtype!r} has no numpy type here (install ml_dtypes for bfloat16 on the host)")
        return product_inputs(cls.normalize_problem(problem), np_dtype, rng)

    @classmethod
    def reference_output(cls, problem, inputs):
        return product_reference(inputs)

    @classmethod
    def output_shape(cls, problem):
        return (problem["M"], problem["N"])

    def tolerance_for(self, problem, inputs=None):
        return tolerance(self.dtype, problem["K"])

    @classmethod
    def work(cls, problem, dtype):
        return product_work(problem, ITEMSIZE[dtype])

    @classmethod
    def bucket(cls, problem):
        return product_bucket(problem)


# The largest small dimension for which suits() picks this family. float32: up to 12 rows it
# matched or beat cuBLAS on an H100 and beat the tiled family by 1.5-2.4x; at 16 rows and more
# the shared-memory reads of the small operand (one per FMA and warp column) bound it below
# both (docs/matmul-record.md, "Skinny products"). 16-bit dtypes only at 1-2 rows, where the float32
# FMAs of this kernel still keep up with memory (tensor cores win beyond).
SUITS_ROWS = {"float32": 12, "float64": 8, "float16": 2, "bfloat16": 2}
# float32 products of more than SUITS_ROWS and at most SMALL_SIMT_ROWS rows whose other two sides
# are not both TC_MIN_DIM or more, with K of at least SMALL_SIMT_MIN_K: the SIMT forms with the
# ticket merge, a K split filling the GPU where the tiled family's few blocks each walk all of K.
# Measured on an H100 as users call them, one call with host time included, on the 13 products
# of this range (with the limit below) among shapes drawn at random and from earlier runs
# (docs/bench/research/small_products_families.py): 1.06x cuBLAS (geometric mean) against 0.71x
# for the tiled family, faster on 12 (e.g. 164x30x1714 1.17x against 0.52x, 193x50x461 0.98x
# against 0.63x), slower on 87x55x511 (0.59x against 0.77x); at K of 32-48 the tiled family was
# level or ahead.
SMALL_SIMT_ROWS = 64
SMALL_SIMT_MIN_K = 64
# ... but where the large side is TC_MIN_DIM or more only up to this many rows: there the tiled
# family has blocks enough, and the SIMT forms' shared-memory reads of the small operand bound
# them (a later draw, same method: 7152x63x262 0.31x, 50x7143x180 0.45x, 62x1828x397 0.57x;
# 32x2833x270 0.66-0.84x against the tiled family's 0.57x).
SMALL_SIMT_WIDE_ROWS = 32
# float64 takes the same forms for small products whose large side is below this (the float64
# few-column tiles keep theirs, TensorMatmul.few_columns_f64_suits): up to SMALL_SIMT_ROWS rows or
# columns, K of at least SMALL_SIMT_MIN_K. The tiled family's few blocks walk all of K there. As
# users call them on an H100 (docs/matmul-record.md, "Small float64 products on the skinny forms"; both
# weight orders, the tree before in the same command): on the 32 calls the bound was set on
# (large side 10-999), 1.42x faster below 512 and 0.50x on the two of 773; on 32 of a second draw
# read after it, 1.23x (0.89-2.50x) below 512 and 0.90x on the four from 512 it leaves out; on 32
# drawn after it (all below 512), 1.29x row-major and 1.44x W.t() (0.72-2.94x).
SMALL_SIMT_F64_LARGE = 512
# ... and K of at most this, the longest measured there. It also keeps those products below the
# 2^28 multiply-adds from which dispatch runs float64 on the tensor cores (64 x 511 x 8192 < 2^28).
SMALL_SIMT_F64_MAX_K = 8192
# float32 beyond SUITS_ROWS: the split-TF32 tensor-core forms, where the small dimension is at
# most TC_SUITS_ROWS[large operand k-contiguous?] and N, K >= TC_MIN_DIM. Measured on an H100
# (kgen.bench.skinny_tc, docs/matmul-record.md): with a k-contiguous large operand (W.T) they beat
# the tiled family at every row count from 13 to 256; with a row-major one up to ~90 rows,
# and the tiled family's wide tiles won from 128 rows.
TC_SUITS_ROWS = {True: 256, False: 96}
TC_MIN_DIM = 1024
# float32 products with this many rows or columns, against N and K of at least TC_MIN_DIM, run
# the wgmma forms on an sm_90 GPU (either storage order of the large operand; docs/matmul-record.md,
# "The wgmma forms").
WG_MIN_ROWS = 17
WG_SUITS_ROWS = 512
WG_WIDE_ROWS, WG_WIDE_MIN_K = 384, 3072
WG_SHORT_MIN_K, WG_SHORT_MAX_ROWS = 400, 256
WG_SHORT_NARROW_ROWS, WG_SHORT_NARROW_LARGE = 32, 2048
WG_TINY_ROWS, WG_TINY_MIN_K = 64, 160
# Below WG_MIN_ROWS, float32 products whose large operand is k-contiguous (W.t()) and has at least
# this many columns (K >= TC_MIN_DIM) run the wgmma dot form too, where the mma.sync dot form's
# 256-column blocks leave few tiles. Device time on an H200, 7-16 rows, N 4096-131072 and K
# 1024-16384 (docs/bench/research/simt_f32_variants.py VARIANTS=WG_DEFAULT, seed 26201, with the
# TMA-ring run's eight products): against N of 13248-98432 the wgmma form ran 1.05-1.34x, against
# 7488-9024 level (1.007-1.014x), against 2496-5440 0.63-1.06x; against a row-major weight it lost
# everywhere (0.79-0.96x, seed 26202). Held out: docs/matmul-record.md, "Wide weights at 7-16 rows".
WG_WIDE_DOT_MIN_LARGE = 12288
# Row tiles of up to this many rows run two warpgroups a block in the wgmma default, larger
# ones one: device time on an H200 over six weights, both orders (docs/matmul-record.md, "The wgmma
# forms"): at 17-24 rows two warpgroups ran 1.47x cuBLAS to one's 1.37x (geometric means), at
# 32-48 the two were within 2%, from 64 rows one warpgroup won by 1.15-1.21x.
WG_TWO_GROUP_ROWS = 48
# float32 wgmma specs of one warpgroup a block (row tiles of more than WG_TWO_GROUP_ROWS rows)
# whose row tiles read at most this many elements of the large operand in all (row tiles x
# large side x K) split K for one wave of resident blocks, not two: half the K slabs, so half
# the partial sums written and merged, which weigh most where K is short against the rows.
# Device time on an H200, 49-256 rows, N and K 1024-16384, both storage orders
# (docs/bench/research/f32_row_routes.py, seeds 22001 and 22002; docs/matmul-record.md, "One wave for
# small products of the wgmma forms"): at most 20M elements, 46 products 1.09x (0.98-1.35x;
# 51x5725x1037 37.0 -> 27.9 µs, cuBLAS 27.4); beyond, one wave lost up to 0.70x (195x10050x5959,
# 316 row and column tiles past the resident blocks); at 17-48 rows (two warpgroups) it ran level.
# Held out (seed 22006): 1.092x on the 26 products of 48 it changes (0.99-1.34x); on an H100
# (seed 22041) 1.086x on 20 of 32.
WG_ONE_WAVE_MAX_ELEMENTS = 20_000_000
# Grids of at most this many column tiles run the wgmma forms without the image launch, each
# block splitting its own chunks of S: one call between events on an H200 ran 1.13x faster on
# the 11 such products of 60 drawn ones (none slower); a bound of 8 lost up to 0.71x there
# (docs/matmul-record.md, "The wgmma forms").
WG_DIRECT_MAX_COLUMN_TILES = 4
# ... and so do small products whose blocks split few elements of S again in all: at most this
# many over the grid's column tiles (column tiles x rows x K). There the image launch costs the
# call more than the splitting: on products of at most 2^30 flops, one call between events on an
# H200, fitted on 40 drawn shapes (seed 2024: 1.14x faster on the 12 affected, none slower) and
# checked on 40 others (seed 9090: 1.06x on the 15 affected, lowest 0.91x; docs/matmul-record.md).
WG_DIRECT_MAX_SPLIT_ELEMENTS = 1_200_000
# Within SUITS_ROWS, float32 products of more than this many rows (N and K >= TC_MIN_DIM) take
# the split-TF32 tensor-core forms too. Device time on an H100 over seven weights, both orders
# (docs/bench/research/skinny_f32_rows.py, docs/matmul-record.md): at 8-12 rows they ran 1.01-1.17x
# the SIMT forms' speed; at 4-6 rows the SIMT forms won against W.t() (1.22-1.26x cuBLAS
# against 1.10-1.11x) and tied at 4 rows against a row-major weight.
SIMT_F32_ROWS = 6
# float16/bfloat16 beyond SUITS_ROWS with a k-contiguous large operand: the mma.m16n8k16 dot
# form up to this many rows. Measured on an H100 (docs/matmul-record.md): 1.0-2.1x cuBLAS from 3 to 32
# rows on most shapes, level with the tiled tensor-core family at 50-64, behind it from 100.
TC16_SUITS_ROWS = 64
# ... and up to this many where the large operand's rows are 16-byte aligned and the GPU runs
# the wgmma kernel (sm_90), which then reads it in place. Measured on an H100, bfloat16 x @ W.t()
# with aligned weights of 21-117 MB (device time, docs/matmul-record.md): this form 0.85-0.93x cuBLAS
# at 2-16 rows, the wgmma default 0.72-0.79x; at 24 rows level (0.76x / 0.79x); from 32 rows
# the wgmma default 0.81-0.83x, this form 0.72x falling to 0.47x at 64.
TC16_ALIGNED_ROWS = 16
# ... except that few rows (M <= N, 1-64) against an aligned weight with N and K of 1024 or more
# run TensorMatmul with A's rows as the wgmma N (TensorMatmul.swap_suits): on an H100 it ran
# 0.90x / 0.93x cuBLAS in device time (from L2 / from HBM) over 16 products of 2-59 rows where
# these forms and the 64-row streaming tiles ran 0.64x / 0.78x (docs/tensorcore-record.md, "A's rows as
# the wgmma N").
# float16/bfloat16 beyond SUITS_ROWS with an n-contiguous large operand (B row-major K x N): the
# mma.m16n8k16 axpy form up to TC16_AXPY_ROWS[the wgmma kernel reads that operand in place?] rows.
# Measured on an H100 (bfloat16, device time, docs/matmul-record.md): where wgmma must first copy the
# operand (rows not 16-byte aligned), this form was 1.1-2.4x faster than it at 3-16 rows on 2 of 3
# weights; on seven aligned weights, with the wave-fitted K split, it ran 0.85-0.90x cuBLAS at 3-8
# rows against wgmma's 0.78-0.81x (lowest 0.89x of wgmma, 14336x4096), and behind it from 12.
TC16_AXPY_ROWS = {True: 8, False: 16}
# ... and the smallest row tile that runs it: at 2 rows the SIMT axpy form ran 0.91-0.97x cuBLAS
# and the tensor-core one 0.77-0.78x on an H100 (bfloat16; the dot forms there: tensor cores
# 0.95-1.29x against 0.83-0.90x), so a 16-bit spec of 1-2 rows keeps the SIMT axpy form.
TC16_AXPY_MIN_ROWS = 3
# 16-bit products of one row whose K is at least this long stream 8 columns a warp in the dot
# form, not 4 (default_warp_cols): each lane keeps twice the loads in flight along a K long
# enough to fill the GPU without a fine split. Device time on an H200 (`kgen bench decode
# --sweep`, x @ W.t() with W N x K; docs/matmul-record.md, "One row of a 16-bit weight"): 1.03-1.18x
# on the nine bfloat16 and float16 products with K of 6592-9088, 0.83-1.07x (level on the
# whole) on the twelve with K of 1152-4032.
WIDE_DOT_MIN_K_16 = 6144
# The SIMT dot form (a k-contiguous large operand, B = W.t()) leaves K whole, whatever `waves`
# asks, where its column tiles are at least this share of the SMs: each block keeps 4-8 columns
# a warp x `loads` vectors in flight, so half the SMs already keep the memory busy, and the
# K slabs' merge and their blocks' fixed costs only add time. Device time on an H100, float32,
# 1-6 rows (docs/bench/research/skinny_f32_splits.py and `kgen bench decode --sweep`;
# docs/matmul-record.md, "The SIMT dot form: K whole from half the SMs"): 1.03-1.26x on all 8 products
# with 94-420 column tiles; below 66 the split stays (2x1984x9088, 62 tiles: 37.0 against
# 32.8 µs whole; 6x1728x2112, 27 tiles: 21.0 against 13.2). Held out (12 float32 products, seed
# 7702, docs/bench/research/decode_bound.py): the 8 it changed ran 1.01-1.24x faster.
DOT_WHOLE_K_SM_SHARE = 0.5
# ... except float32 products of at least DOT_FEW_TILES_MIN_ROWS rows (64 columns a block) whose
# column tiles are no more than the SMs, with a long enough K (DOT_FEW_TILES_MIN_K for two slabs,
# DOT_FEWER_TILES_MIN_K for three or more): there K whole gives an SM one block or none, and
# dot_few_tile_slabs cuts it into about two blocks an SM.
# Device time on an H100 (docs/bench/research/skinny_f32_splits.py; docs/matmul-record.md, "Few tiles
# of 3+ rows"): fitted on eight products of 3-6 rows, 79-132 tiles and K of 3904-13248 (1.02-1.20x
# over K whole; with K of 1152-1920 K whole stayed the fastest on three of four, and at 1-2 rows,
# 32 columns a block, on five of 82-118 tiles it was the fastest or within 1%); on twelve held-out
# products of 68-128 tiles it ran 1.14x faster (1.02-1.27x), within 2% of the best split on all.
# Three or more slabs (no more than 88 tiles on 132 SMs) pay from a shorter K: on 13 products
# of 3-6 rows with K of 2064-3889 (seed 9805) they ran 1.06-1.15x faster than K whole where two
# slabs (89-126 tiles) ran 0.98-1.04x; at K = 1152 three slabs ran 0.90x (4x4757x1152). Held
# out (ten products of 67-86 tiles, K 2187-3816, seed 9806): 1.073x (1.005-1.122x).
DOT_FEW_TILES_MIN_ROWS = 3
DOT_FEW_TILES_MIN_K = 3840
DOT_FEWER_TILES_MIN_K = 1920
# Below DOT_WHOLE_K_SM_SHARE, where `waves` sets the split, float32 specs ask for one wave of resident
# blocks, not two (Skinny.one_wave_dot_suits; dispatch passes dot_sms): fewer, longer slabs,
# each block's S staging and merge paid fewer times. Device time on an H200, 1-6 rows against
# W.t() of 16 MB or more with 17-64 column tiles (docs/bench/research/dot_waves.py; docs/matmul-record.md,
# "One wave where the dot form's tiles are few"): the 8 of 16 fitted products whose split it
# changes 1.089x (1.020-1.128x; 5x3904x8384 45.0 -> 39.9 µs), the others level; held out (seed
# 16102) the 3 of 12 it changes 1.069x (1.037-1.085x), all 12 1.015x (lowest 0.980x, an unchanged split).
DOT_FEW_TILE_WAVES = 1
# float32 SIMT dot form of 3-6 rows (DOT_FEW_TILES_MIN_ROWS to SIMT_F32_ROWS): 4 columns a warp
# (32 a block) rather than the 8 that default_warp_cols gives, where 8 would leave K whole on
# fewer column tiles than SMs (at least DOT_WHOLE_K_SM_SHARE of them, K too short for
# dot_few_tile_slabs): one block on most SMs and none on the rest, where 4 give twice the blocks
# without a merge (Skinny.narrow_dot_suits; dispatch passes dot_sms). Device time on an H200, W.t()
# of 16 MB or more (docs/bench/research/simt_f32_variants.py; docs/matmul-record.md, "Float32 few-row rules by
# storage order"): fitted, 1.11-1.16x on all five such products of two draws (seeds
# 18003, 18013; 91-128 tiles, K 1280-3136), where 8 columns split K instead (fewer tiles, or a
# longer K) 4 ran 0.92-1.10x, so those keep 8; held out (seed 18033, eight products of 3-6 rows
# drawn where the rule applies) 1.138x (1.12-1.19x).
# The same holds for one row of a float16 or bfloat16 weight, which default_warp_cols gives 8
# columns a warp from K of WIDE_DOT_MIN_K_16 (they reach the SIMT dot form where the wgmma kernel
# does not take them: rows off a 16-byte boundary). Device time on an H200, W.t() with K of
# 6144-16384, N and K of any length (docs/bench/research/decode_variants.py VARIANTS=warp_cols=4;
# docs/matmul-record.md, "One row of a 16-bit weight: 8 columns a warp from K of 6144"): seen first on
# four products of 104-128 tiles (seeds 47002, 47101, 47102: 1.14-1.23x), where the eight of 8
# columns with more tiles than SMs, or with K split, ran 0.71-0.94x with 4; held out (seeds 47201,
# 47202: eleven products drawn where the rule applies) bfloat16 1.258x (1.15-1.33x), float16
# 1.231x (1.18-1.39x).
DOT_NARROW_WARP_COLS = 4
# Blocks per SM the SIMT axpy form's _shift entry asks ptxas to fit at most (80 registers a thread):
# Skinny.axpy_shift_min_blocks.
AXPY_SHIFT_MIN_BLOCKS = 3
# The widest loads (bytes) a row-major 16-bit L may allow for the _shift entry to take it. Device
# time on an H200 (docs/matmul-record.md, "Row-major 16-bit weights off a 16-byte boundary"): against 2-
# and 4-byte loads 1.02-1.23x (six fitted) and 1.03-1.46x (ten held out); against 8-byte loads
# (N = 4 mod 8) 0.86-1.19x over five, slower on the smallest weight. Reading the last column
# tile as whole granules too did not change that (1.019x over six more such rows, 0.96-1.13x).
AXPY_SHIFT_MAX_LOAD_BYTES = 4
# float32 SIMT axpy form (a row-major large operand) of up to 16 accumulator registers a thread
# (1-4 rows): K split for one wave of resident blocks rather than two (Skinny.one_wave_axpy_suits;
# dispatch passes axpy_sms). Device time on an H200 (simt_f32_variants.py; docs/matmul-record.md, the
# same section): 1.047x on six products of 1-4 rows (seed 18002, 0.998-1.165x), 1.044x on seven
# of 1-4 rows of a second draw (18012, 0.980-1.131x), where a 5-row product ran 0.908x (at 20
# accumulators fewer blocks are resident, and one wave of them leaves a long tail); held out
# (18032, eight products of 1-4 rows) 1.006x (0.966-1.060x): small, but not a loss.
AXPY_SIMT_WAVES = 1
# float32 products of 5-6 rows against a row-major large operand (where the SIMT axpy form holds
# more than 16 accumulators a thread, so fewer of its blocks are resident): the split-TF32
# tensor-core axpy form, as from 7 rows, where K is at least this (Skinny.tc_axpy_few_rows_suits;
# dispatch passes axpy_sms). Device time on an H200 (docs/bench/research/simt_f32_variants.py;
# docs/matmul-record.md, "Float32 few-row rules by storage order"): 1.198x (0.981-1.398x) and
# 1.100x on two draws of five (seeds 18052, 18053), the one loss at K = 1024 (5x4800x1024: 0.820x;
# the smallest K that gained was 1472); held out (18072, five products) 1.188x (1.12-1.32x).
# Against W.t() the SIMT dot form keeps 5-6 rows, where it leads.
TC_AXPY_FEW_ROWS_MIN_K = 1280

# Up to this many rows the float32 mma.sync tensor-core forms split K for one wave of blocks, not
# two. Device time on an H200 (docs/bench/research/skinny_tc_sweep.py; docs/matmul-record.md, "K splits
# fitted to the last wave"): 1.00-1.13x on the 5 float32 shapes of 8-16 rows it was fitted on, and
# 1.00-1.14x on 8 held-out ones. The 16-bit forms gained 1.06-1.09x on the 7 fitted shapes but ran
# 0.70-1.20x on 8 held-out ones (0.70x at 14x6525x8764 row-major, rows of odd length): they keep two.
TC_ONE_WAVE_ROWS = 16
# The float32 mma.sync dot form of up to TC_ONE_WAVE_ROWS rows reads TC_LONG_WINDOW-k windows
# (Skinny.tc_window; two held a warp, TC_LONG_WINDOW_RING) where the large operand is at least
# TC_LONG_WINDOW_MIN_BYTES (Skinny.long_window_dot_suits, dispatch passing dot_sms). Device time
# on an H200 against 32-k windows, W.t() of 7-16 rows (docs/matmul-record.md, "64-k windows"): on the
# twelve products of seed 29003 every one of 64 MiB or more gained (1.012-1.075x, five) and the
# seven below ran 0.948-1.020x; held out (seed 29201, fourteen): the six of 64 MiB or more
# 1.005-1.070x, the eight below 0.930-1.027x.
TC_LONG_WINDOW_MIN_BYTES = 64 * 2**20
# float32 products of TC_DOT_NARROW_MIN_ROWS to TC_ONE_WAVE_ROWS rows against W.t() of a narrow
# weight (large side TC_DOT_NARROW_MIN_LARGE to TC_MIN_DIM, K of TC_MIN_DIM or more) run the
# split-TF32 tensor-core dot form rather than the SIMT dot form (Skinny.tc_dot_narrow_suits,
# dispatch passing dot_sms). Device time on an H100 (docs/bench/research/decode_variants.py; N
# 128-1023, K 1024-16384; docs/matmul-record.md, "Narrow weights at 9-16 rows"): 9-16 rows 1.06-1.39x over the four
# products of seed 61201 and 1.11-1.40x over the four held out (seed 61301); 7-8 rows ran
# 0.91-0.99x (seeds 61202, 61302), where the SIMT form stays.
TC_DOT_NARROW_MIN_ROWS = 9
TC_DOT_NARROW_MIN_LARGE = 128
# The float32 tensor-core axpy form (a row-major large operand) feeds one 16-column tile pair a
# warp (8-byte loads, 256 columns a block) instead of two (16-byte loads, 512) where the two-tile
# blocks, K cut into its shortest slabs, would number fewer than this many per SM: there most
# SMs idle, and halving a block's columns doubles the blocks. Device time on an H200
# (docs/bench/research/skinny_f32_splits.py VARIANTS=tc|tiles, 7-16 rows; docs/matmul-record.md, "One
# tile a warp where blocks are few"): one tile ran 1.03-1.39x on the 6 fitted products with 64-143
# such blocks and 0.78-0.88x on the 12 with 252 or more; held out, 1.01-1.22x on the 9 the rule
# changes. A weight called again and again, which L2 can hold, runs level either way.
AXPY_ONE_TILE_SM_SHARE = 1.5
# 16-bit products of 2 to this many rows whose large operand allows only element loads and is
# stored n-contiguous run the SIMT forms (Skinny.simt_for_element_rows): 1.01-1.37x the
# mma.m16n8k16 forms' speed at 2-4 rows, 0.85-1.01x at 6, 0.28-0.95x from 8 (H200,
# docs/bench/skinny_unaligned_forms_h200.json).
SIMT_ELEMENT_ROWS_16 = 4


def split_tf32_enabled() -> bool:
    """Whether dispatch may run float32 products on the split-TF32 tensor-core forms:
    KGEN_SPLIT_TF32 unset or 1/true/yes/on, not 0/false/no/off (which keeps every float32
    product on float32 FMAs, as cuBLAS with TF32 off does)."""
    return runtime.switch_setting("KGEN_SPLIT_TF32", "allow the split-TF32 forms (skinny and large products)",
                                  "keep float32 products off the tensor cores")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def dot_few_tile_slabs(dtype: str, rows: int, tiles: int, K: int, sms: int) -> int:
    """K slabs of the SIMT dot form where its column tiles are at least DOT_WHOLE_K_SM_SHARE of
    the `sms` SMs: 1 (K whole), or for float32 blocks of DOT_FEW_TILES_MIN_ROWS rows or more with
    no more tiles than SMs, floor(2 x sms / tiles) (at least 2: about two blocks an SM) where K
    is at least DOT_FEW_TILES_MIN_K for two slabs, DOT_FEWER_TILES_MIN_K for more."""
    if dtype != "float32" or rows < DOT_FEW_TILES_MIN_ROWS or tiles > sms:
        return 1
    slabs = max(2, 2 * sms // tiles)
    return slabs if K >= (DOT_FEW_TILES_MIN_K if slabs == 2 else DOT_FEWER_TILES_MIN_K) else 1


def _slabs(K: int, splits: int, unit: int) -> int:
    """Slabs that K falls into when asked for `splits`: slab lengths are whole units."""
    ks = _ceil_div(_ceil_div(K, max(1, splits)), unit) * unit
    return max(1, _ceil_div(K, ks))


def wave_fitted_splits(K: int, unit: int, tiles: int, slots: int, want: int, most: int) -> int:
    """The K split near `want` (from half to twice it, at most `most`) whose grid of tiles x
    splits blocks fills its last wave of `slots` resident blocks best: a grid of 2.1 waves
    takes as long as one of 3, so 7 slabs can beat 5. Ties go to the count nearest `want`."""
    slots = max(1, slots)
    best_key, best = None, _slabs(K, want, unit)
    for asked in range(max(1, (want + 1) // 2), max(1, min(most, 2 * want)) + 1):
        n = _slabs(K, asked, unit)
        waves = tiles * n / slots
        key = (round(waves / math.ceil(waves), 2), -abs(n - want))
        if best_key is None or key > best_key:
            best_key, best = key, n
    return best


def default_warp_cols(rows: int, dtype: str, K: int = 0) -> int:
    """Columns a warp of the dot form streams by default. 1-2 rows: 4 (8 was 13% slower in
    bfloat16 at 1x4096x4096 on an H100), except 16-bit products of one row with K of at least
    WIDE_DOT_MIN_K_16: 8 (dispatch takes it back to 4 where 8 would leave K whole on fewer
    tiles than SMs: Skinny.narrow_dot_suits); more rows: as many as ~64 accumulator registers
    allow, up to 8, so that the small operand staged per block serves more of the large one."""
    if rows == 1 and dtype in ("float16", "bfloat16") and K >= WIDE_DOT_MIN_K_16:
        return 8
    return 4 if rows <= 2 else max(1, min(8, 64 // (rows * (ACC_BYTES[dtype] // 4))))


def default_loads(rows: int) -> int:
    return 8 if rows <= 16 else 4


def tc_rows_shared(rows: int) -> int:
    """Rows of a float32 split-TF32 spec: `rows` rounded up to whole 8-row mma tiles. The
    tensor-core forms stage, multiply and merge whole tiles (tc_ntiles) and guard the rows of
    S past R at run time, so a spec of 16 rows runs 9 rows with the work of a spec of 9: one
    module serves every row count of a tile count, and a loop over token counts compiles one
    spec a tile count, not one a row count."""
    return -(-rows // 8) * 8


def default_rows(small: int) -> int:
    if small <= 16:
        return max(1, small)
    if small <= 64:
        return -(-small // 8) * 8
    tiles = -(-small // 64)
    return min(64, _ceil_div(_ceil_div(small, tiles), 8) * 8)


def launches_programmatically(spec: Skinny, arch: str) -> bool:
    """Whether the main kernel of `spec` compiled for `arch` may be launched with programmatic
    stream serialization: the spec asks for it and the target is sm_90 or later, where the
    kernel's blocks wait for the kernel before them (griddepcontrol.wait; the template leaves
    the wait out for earlier targets, whose kernels are launched plainly)."""
    return spec.programmatic and arch_number(arch) >= 90


def tolerance(dtype: str, K: int) -> float:
    """Relative (Frobenius) error allowed against the float64 product of the rounded
    inputs: accumulation error growing like sqrt(K) (8x headroom), plus the rounding of C
    to the output type."""
    acc_eps = 2.0 ** -53 if dtype == "float64" else 2.0 ** -24
    out_eps = {"float32": 2.0 ** -24, "float64": 2.0 ** -53, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}[dtype]
    return 8 * 4 * acc_eps * math.sqrt(max(K, 1)) + 2 * out_eps


# ---------------------------------------------------------------------------------
# The kernel object: a plan per (shapes, strides, pointer alignment, dtype), thin launches.
# ---------------------------------------------------------------------------------
@dataclasses.dataclass
class _Plan:
    """What a call with one set of shapes, strides, pointer alignment and dtype launches:
    [(kind, Launch, fixed arguments)] with kind "prescale", "main" or "merge"."""

    swap: bool           # C has few columns: S = B^T, L = A^T, O = C^T
    out_shape: tuple[int, int]
    launches: list
    workspace: tuple[int, int]   # (partial bytes, tickets) needed, (0, 0) for none
    form: str
    width: int
    splits: int
    mode: int
    image_offset: int = -1   # wgmma forms: where S's split chunk images start in the partials buffer
    classes: int = 0         # phased dot form: classes of columns by offset from a 16-byte boundary (0: not phased)


_TORCH_DTYPE_NAMES = {"torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16",
                      "torch.bfloat16": "bfloat16"}


def _torch_key(A, B, pa: int, pb: int, dev: int, out) -> tuple:
    """What a torch call's launch plan depends on: shapes, strides, dtypes and devices, each
    pointer's 16-byte offset, and the output's shape, strides, dtype and device where given."""
    if out is None:
        return A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, pa & 15, pb & 15, dev, B.get_device()
    return (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, pa & 15, pb & 15, dev, B.get_device(),
            out.shape, out.stride(), out.dtype, out.get_device())


class SkinnyKernel(Kernel):
    """k(A, B, out=None, alpha=1.0, beta=0.0, stream=None) -> C = alpha * A @ B + beta * out.

    numpy in, numpy out; device arrays (torch, CuPy, pycuda) in, the same library out.
    A and B may be transposed views or row slices; the large operand needs one unit stride.
    Torch tensors are read through data_ptr()/shape/stride() and launched on torch's
    current stream (or on stream=). Each (shapes, strides, pointer alignment, dtype) is
    planned once, so a repeat call costs a lookup and one driver launch per kernel.
    The split-K workspace and tickets are kept per stream.
    """

    spec: Skinny
    _programmatic = False   # launches_programmatically(spec, the compiled arch), set per kernel

    def __init__(self, spec, source, compiled, arch=None):
        super().__init__(spec, source, compiled, arch)
        self._slots: dict[str, int] = {}
        self._plans: dict[tuple, _Plan] = {}
        self._torch_results = runtime.TorchResults()   # results of repeat torch calls, in batches
        self._workspaces: dict[int, dict[str, Any]] = {}
        self._captured: dict[tuple[int, int], dict[str, Any]] = {}   # (stream, capture id) -> workspace
        self._retired: list[Any] = []  # outgrown workspaces: launches still queued may use them
        self._lock = threading.Lock()
        self._sms = runtime.device_limits()["multiprocessors"]
        self._device_index = runtime.device_index()
        scalar = "d" if spec.dtype == "float64" else "f"
        self._fmt_main = "PqqPqPqqiiqq" + scalar * 2 + "PPi"
        self._fmt_merge = "PPqqiii" + scalar * 2
        self._fmt_prescale = "Pqqii" + scalar
        self._fmt_image = "PqqiqiP"
        self._programmatic = launches_programmatically(spec, self.arch)

    def _resident_slots(self, name: str, shared: int) -> int:
        """Blocks of entry `name` the whole GPU runs at once."""
        slots = self._slots.get(name)
        if slots is None:
            per_sm = runtime.resident_blocks(self.function(name, shared), self.spec.threads, shared)
            slots = self._slots[name] = max(1, per_sm) * self._sms
        return slots

    # -- workspaces (per stream: calls on one stream never overlap) ----------------------------
    def _workspace(self, stream: int, pbytes: int, tickets: int) -> tuple[int, int]:
        ws = self._workspaces.get(stream)
        if ws is None or ws["pbytes"] < pbytes or ws["tickets"] < tickets:
            if runtime.torch_capturing():
                # Calls captured into a CUDA graph share a workspace per stream and capture,
                # from the graph's pool and kept for the kernel's life: a replay may run
                # beside eager calls or other graphs, so it shares with none of them; the
                # captured calls on one stream run in order, as eager calls do, and each
                # leaves the tickets at zero, so the graph zeroes them once, not per call.
                key = (stream, capture_id(stream))
                ws = self._captured.get(key)
                if ws is None or ws["pbytes"] < pbytes or ws["tickets"] < tickets:
                    ws = self._captured[key] = self._new_workspace(stream, pbytes, tickets)
                    self._retired.extend((ws["part"], ws["tick"]))
                return ws["ptrs"]
            old = ws or {"pbytes": 0, "tickets": 0}
            if ws is not None:
                self._retired.extend((ws["part"], ws["tick"]))
            ws = self._new_workspace(stream, max(pbytes, old["pbytes"], 4096), max(tickets, old["tickets"], 1024))
            self._workspaces[stream] = ws
        return ws["ptrs"]

    @staticmethod
    def _new_workspace(stream: int, pbytes: int, tickets: int) -> dict[str, Any]:
        part = runtime.device_buffer(pbytes)
        tick = runtime.device_buffer(4 * tickets)
        # In the stream's order, before the launch that needs them; the kernels leave every
        # ticket at zero again.
        write_words_async(int(tick), bytes(4 * tickets), stream)
        return {"part": part, "tick": tick, "pbytes": pbytes, "tickets": tickets, "ptrs": (int(part), int(tick))}

    # -- the call ------------------------------------------------------------------------------
    def __call__(self, A, B, out=None, *, alpha: float = 1.0, beta: float = 0.0, stream=None):
        if beta != 0 and out is None:
            raise ArrayError("beta != 0 needs out= (the C that is scaled by beta and added to)")
        torch_tensor = runtime.torch_tensor_type()
        if torch_tensor is not None and isinstance(A, torch_tensor):
            return self._call_torch(A, B, out, alpha, beta, stream)
        return self._call_arrays(A, B, out, alpha, beta, stream)

    def _call_torch(self, A, B, out, alpha, beta, stream):
        torch_tensor = runtime.torch_tensor_type()
        if not isinstance(B, torch_tensor) or (out is not None and not isinstance(out, torch_tensor)):
            raise ArrayError("A is a torch tensor, so B (and out) must be torch tensors too")
        pa, pb = A.data_ptr(), B.data_ptr()
        dev = A.get_device()
        key = _torch_key(A, B, pa, pb, dev, out)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._torch_plan(key, A, B, out)
        if stream is None:
            h = runtime.torch_stream(dev)
            if out is None:   # row-major, as the plan assumed; small results come in batches
                out = self._torch_results.new(A, plan.out_shape, dev, h)
        else:
            h = runtime.stream_handle(stream)
            if out is None:
                out = A.new_empty(plan.out_shape)
        self._go(plan, pa, pb, out.data_ptr(), alpha, beta, h)
        return out

    def repeat_call(self, A, B) -> RepeatCall | None:
        """The call k(A, B) (out=None, torch's current stream) resolved for every torch A and B
        of this signature (kgen.core.kernel.RepeatCall); None where it launches nothing."""
        dev = A.get_device()
        key = _torch_key(A, B, A.data_ptr(), B.data_ptr(), dev, None)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._torch_plan(key, A, B, None)
        if not plan.launches:
            return None
        run = self._go

        def go(pa: int, pb: int, pc: int, alpha: float, stream: int) -> None:
            run(plan, pa, pb, pc, alpha, 0.0, stream)

        return RepeatCall(go, self._torch_results, plan.out_shape, None, dev, [True])

    def _torch_plan(self, key, A, B, out) -> _Plan:
        if A.dim() != 2 or B.dim() != 2:
            raise ArrayError(f"A and B must be 2-D, got shapes {tuple(A.shape)} and {tuple(B.shape)}")
        named = (("A", A), ("B", B)) + ((("out", out),) if out is not None else ())
        for name, t in named:
            self._check_dtype_name(_TORCH_DTYPE_NAMES.get(str(t.dtype), str(t.dtype)), name)
            runtime.torch_device_index(t, name)
        M, K = A.shape
        K2, N = B.shape
        if out is not None:
            c_shape, c_strides = tuple(out.shape), tuple(out.stride())
        else:
            c_shape, c_strides = (M, N), (max(N, 1), 1)
        plan = self._plan(int(M), int(K), tuple(A.stride()), int(K2), int(N), tuple(B.stride()), c_shape, c_strides,
                          A.data_ptr(), B.data_ptr())
        self._remember(key, plan)
        return plan

    def _remember(self, key, plan) -> None:
        with self._lock:
            if len(self._plans) >= 256:
                self._plans.clear()
            self._plans[key] = plan

    def _check_dtype_name(self, got: str, name: str) -> None:
        if got != self.spec.dtype:
            raise ArrayError(f"{name} has dtype {got} but this kernel was built for {self.spec.dtype}; "
                             f"build a spec with dtype={got!r} or convert {name}")

    def _call_arrays(self, A, B, out, alpha, beta, stream):
        on_host = runtime.split_host_device({"A": A, "B": B, "out": out})
        host_out = None
        if on_host:
            for name, x in (("A", A), ("B", B)):
                if not isinstance(x, np.ndarray) or x.ndim != 2:
                    raise ArrayError(f"{name} must be a 2-D array, got {getattr(x, 'shape', type(x).__name__)}")
                self._check_dtype_name(x.dtype.name, name)
            a, b = runtime.to_device(A, "A"), runtime.to_device(B, "B")
            M, N = A.shape[0], B.shape[1]
            if out is not None:
                host_out = out
                c = runtime.to_device(np.ascontiguousarray(out), "out")
            else:
                c = runtime.new_host_output((M, N), A.dtype)
        else:
            a, b = runtime.view(A, "A"), runtime.view(B, "B")
            for name, v in (("A", a), ("B", b)):
                if len(v.shape) != 2:
                    raise ArrayError(f"{name} must be 2-D, got shape {v.shape}")
                self._check_dtype_name(v.dtype.name, name)
            M, N = a.shape[0], b.shape[1]
            c = runtime.view(out if out is not None else runtime.empty_like_library(A, (M, N), a.dtype), "out")
        if len(c.shape) == 2:
            self._check_dtype_name(c.dtype.name, "out")
        key = ("arrays", a.shape, a.strides, b.shape, b.strides, a.dtype.name, a.ptr & 15, b.ptr & 15,
               c.shape, c.strides)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(a.shape[0], a.shape[1], a.strides, b.shape[0], b.shape[1], b.strides,
                              c.shape, c.strides, a.ptr, b.ptr)
            self._remember(key, plan)
        self._go(plan, a.ptr, b.ptr, c.ptr, alpha, beta, 0 if on_host else runtime.library_stream(A, stream))
        if on_host:
            result = runtime.copy_back(c)
            if host_out is not None:
                host_out[...] = result
                return host_out
            return result
        return c.owner

    # -- planning --------------------------------------------------------------------------------
    def _plan(self, M, K, a_strides, K2, N, b_strides, c_shape, c_strides, pa, pb) -> _Plan:
        spec = self.spec
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        if tuple(c_shape) != (M, N):
            raise ArrayError(f"out has shape {tuple(c_shape)} but the product is {M}x{N}")
        for name, st in (("A", a_strides), ("B", b_strides), ("out", c_strides)):
            if len(st) != 2 or any(s < 0 for s in st):
                raise ArrayError(f"{name} has element strides {tuple(st)}; kgen takes non-negative strides")
        c_rs, c_cs = c_strides
        if M > 1 and N > 1 and not ((c_cs == 1 and c_rs >= N) or (c_rs == 1 and c_cs >= M)):
            raise ArrayError(f"out has element strides {tuple(c_strides)}: it needs a unit stride along one axis "
                             f"and rows (or columns) that do not overlap")
        swap = M > N
        if not swap:   # S = A (R x K), L = B (K x NC), O = C
            R, NC, pl = M, N, pb
            (s_rs, s_ks), (l_k, l_n), (o_rs, o_cs) = a_strides, b_strides, (c_rs, c_cs)
        else:          # S = B^T, L = A^T, O = C^T
            R, NC, pl = N, M, pa
            (s_ks, s_rs), (l_n, l_k), (o_cs, o_rs) = b_strides, a_strides, (c_rs, c_cs)
        form, ldl = _form(NC, K, l_k, l_n)
        if form is None:
            large = "A" if swap else "B"
            raise ArrayError(f"{large} has element strides {tuple(a_strides if swap else b_strides)}: the large "
                             f"operand needs a unit stride along one axis (row-major, a transposed view, or a slice)")
        item = ITEMSIZE[spec.dtype]
        width = 1
        tc = spec.tensor_cores and (form == "dot" or spec.runs_tc_axpy)
        for w in (spec.widths() if form == "dot" or tc else spec.axpy_widths()):
            if pl % (w * item) == 0 and ldl % w == 0:
                width = w
                break
        # A row-major L whose rows allow only 2- or 4-byte loads (the pitch, or L's start): the
        # SIMT axpy form reads whole granules and shifts them (the _shift entry). Rows 8 bytes
        # off a boundary keep their 8-byte loads (AXPY_SHIFT_MAX_LOAD_BYTES).
        shift = (form == "axpy" and not tc and spec.axpy_shifts and width * item <= AXPY_SHIFT_MAX_LOAD_BYTES
                 and pl % item == 0)
        if shift:
            width = spec.axpy_vec
        classes = 0
        if form == "dot" and phased_dot(spec, width) and pl % item == 0:
            # The phased entry: columns grouped by their offset from a 16-byte boundary (one
            # class where only L's own start is off one).
            width, classes = spec.vec, spec.vec // math.gcd(ldl % spec.vec, spec.vec)
        plan = _Plan(swap=swap, out_shape=(M, N), launches=[], workspace=(0, 0), form=form, width=width,
                     splits=1, mode=MODE_DIRECT, classes=classes)
        if R == 0 or NC == 0:
            return plan
        out_args = (o_rs, o_cs, R, NC)
        small_grid = (max(1, min(-(-R * NC // 256), self._sms * 8)), 1, 1)

        def prescale() -> tuple:
            # Looked up after the main entry where there is one: a kernel that compiles its entries
            # on first use (Skinny.entry_units) then finds it in the main entry's unit.
            return ("prescale", Launch(self.handle("kgen_skinny_prescale"), "kgen_skinny_prescale", small_grid,
                                       (256, 1, 1), 0, self._fmt_prescale), out_args)

        if K == 0:
            plan.launches.append(prescale())
            return plan
        if tc:
            form = spec.tc_form(form)
        name = (f"kgen_skinny_{form}_phased_c{classes}" if classes else "kgen_skinny_axpy_shift" if shift
                else f"kgen_skinny_{form}_v{width}")
        plan.form = form
        shared = spec.shared_for(form)
        # The wgmma forms split S once per call into chunk images (a launch of its own) unless the
        # grid has few column tiles: then each block splits its own chunks of S (the _direct
        # entry). The column tiles decide, not the occupancy, so the entry that runs is known
        # before its occupancy is asked for, and only that entry is compiled.
        direct = form.startswith("wg_") and wg_direct(spec.column_tiles(form, width, NC), R, K)
        if direct:
            name = f"kgen_skinny_{form}_direct_v{width}"
        g = spec.geometry(form, width, R, NC, K, self._resident_slots(name, shared), self._sms, max(classes, 1))
        for dim, v in zip("xyz", g["grid"]):
            if v > (2**31 - 1 if dim == "x" else 65535):
                raise ArrayError(f"the product {M}x{N}x{K} needs {v} blocks along grid {dim}; too many for one launch")
        plan.splits, plan.mode = g["splits"], g["mode"]
        if g["mode"] == MODE_ATOMIC:
            plan.launches.append(prescale())
        # The opt-in covers static shared memory too (the tile's ticket flag): ask for a little more.
        fn = self.handle(name, shared + 1024)
        # S is staged with 16-byte loads where its rows are contiguous and 16-byte aligned.
        ps = pb if swap else pa
        vec_s = 16 // item
        s_vec = s_ks == 1 and ps % 16 == 0 and (s_rs % vec_s == 0 or R == 1)
        mode = g["mode"] | (STAGE_VECTOR if s_vec else 0)
        plan.launches.append(("main", Launch(fn, name, g["grid"], (spec.threads, 1, 1), shared, self._fmt_main,
                                             programmatic=self._programmatic and programmatic_launches()),
                              (s_rs, s_ks, ldl, o_rs, o_cs, R, NC, K, g["ks"], mode)))
        if g["mode"] == MODE_PARTIALS:
            plan.launches.append(("merge", Launch(self.handle("kgen_skinny_merge"), "kgen_skinny_merge", small_grid,
                                                  (256, 1, 1), 0, self._fmt_merge), out_args + (g["splits"],)))
        if g["mode"] in (MODE_PARTIALS, MODE_TICKET, MODE_CLUSTER):
            plan.workspace = (g["splits"] * R * NC * ACC_BYTES[spec.dtype], g["grid"][0] * g["grid"][2])
        if form.startswith("wg_") and not direct:
            # S split once into chunk images (wgmma layout) behind the partial sums; the main
            # kernel copies them to shared memory instead of splitting S in every block.
            chunks, row_tiles = _ceil_div(K, spec.wg_chunk), g["grid"][2]
            entry = f"kgen_skinny_wg_image_{form[3:]}"
            image = ("image", Launch(self.handle(entry), entry, (chunks, 1, row_tiles), (spec.threads, 1, 1), 0,
                                     self._fmt_image), (s_rs, s_ks, R, K, mode))
            plan.launches.insert(len(plan.launches) - (2 if g["mode"] == MODE_PARTIALS else 1), image)
            plan.image_offset = _ceil_div(plan.workspace[0], 256) * 256
            plan.workspace = (plan.image_offset + row_tiles * chunks * spec.wg_chunk_bytes, max(plan.workspace[1], 1))
        return plan

    def _arguments(self, plan: _Plan, pa: int, pb: int, pc: int, alpha, beta, stream: int) -> list:
        """[(Launch, argument tuple)] of one call."""
        ps, pl = (pb, pa) if plan.swap else (pa, pb)
        part = tick = 0
        if plan.workspace[0]:
            part, tick = self._workspace(stream, *plan.workspace)
        out = []
        image = part + plan.image_offset if plan.image_offset >= 0 else 0
        for kind, launch, fixed in plan.launches:
            if kind == "image":
                out.append((launch, (ps, *fixed, image)))
            elif kind == "main":
                s_rs, s_ks, ldl, o_rs, o_cs, R, NC, K, ks, mode = fixed
                if image:
                    ps = image   # the wgmma forms read S's split chunk images
                # With atomics the prescale launch has applied beta already.
                out.append((launch, (ps, s_rs, s_ks, pl, ldl, pc, o_rs, o_cs, R, NC, K, ks, alpha,
                                     0.0 if plan.mode == MODE_ATOMIC else beta, part, tick, mode)))
            elif kind == "merge":
                out.append((launch, (part, pc, *fixed, alpha, beta)))
            else:
                out.append((launch, (pc, *fixed, beta)))
        return out

    def _go(self, plan: _Plan, pa: int, pb: int, pc: int, alpha, beta, stream: int) -> None:
        if not plan.launches:
            return
        ensure_context()
        for launch, args in self._arguments(plan, pa, pb, pc, alpha, beta, stream):
            launch(stream, *args)

    def bind(self, A, B, out, *, alpha: float = 1.0, beta: float = 0.0, stream=None):
        """A zero-argument callable that relaunches this product on the same torch tensors
        (A, B, out) with the arguments resolved once: each call is one driver launch per
        kernel. For benchmarks and tight loops."""
        torch_tensor = runtime.torch_tensor_type()
        if torch_tensor is None or not all(isinstance(x, torch_tensor) for x in (A, B, out)):
            raise ArrayError("bind() takes torch CUDA tensors A, B and out")
        dev = A.get_device()
        self(A, B, out, alpha=alpha, beta=beta, stream=stream)   # checks everything, makes the plan
        plan = self._plans[_torch_key(A, B, A.data_ptr(), B.data_ptr(), dev, out)]
        h = runtime.torch_stream(dev) if stream is None else runtime.stream_handle(stream)
        launches = self._arguments(plan, A.data_ptr(), B.data_ptr(), out.data_ptr(), alpha, beta, h)

        return BoundLaunch(launches, h, keep=(A, B, out), plan=plan)


def phased_dot(spec: Skinny, width: int) -> bool:
    """Whether the dot form (SIMT, or the mma.sync tensor-core one) reads a k-contiguous large
    operand whose alignment allows loads `width` elements wide through the phased entry (the
    widest loads from each class of columns' first 16-byte boundary) rather than the
    _v<width> entry. In 16-bit types only where the rows allow single elements: in the SIMT
    form rows 4 or 8 bytes off a boundary ran 0.96x and 1.00x as fast phased as on their 4- and
    8-byte loads, rows 2 bytes off 1.02-1.34x (one row, H100 device time, docs/matmul-record.md)."""
    if not spec.phased or width >= spec.vec:
        return False
    if spec.tensor_cores:   # the mma.sync dot forms have phased entries too (not wgmma)
        if spec.instruction != "mma_sync":
            return False
        # 16-bit: rows 2 bytes off a 4-byte boundary, in place of the granules, up to 8 rows
        # (two blocks an SM): 1.02-1.09x the granules there; rows 4 or 8 bytes off ran 0.96-1.02x
        # their 4- and 8-byte loads, and 12-56 rows 0.67-1.18x (H100, docs/matmul-record.md).
        return spec.dtype == "float32" or (width == 1 and spec.tc16_fits_two_blocks)
    return ITEMSIZE[spec.dtype] >= 4 or width == 1


def wg_direct(column_tiles: int, R: int, K: int) -> bool:
    """Whether a wgmma plan of `column_tiles` column tiles, R small rows and K runs the _direct
    entries (each block splits its chunks of S) rather than an image launch before the main
    kernel: few column tiles, or few elements of S split again over all of them."""
    return column_tiles <= WG_DIRECT_MAX_COLUMN_TILES or column_tiles * R * K <= WG_DIRECT_MAX_SPLIT_ELEMENTS


def _form(NC: int, K: int, l_k: int, l_n: int) -> tuple[str | None, int]:
    """("dot", ld) when L (K x NC, element strides l_k, l_n) is k-contiguous, ("axpy", ld)
    when n-contiguous, (None, 0) when neither. A dimension of one element has no stride
    that matters."""
    if NC == 1:
        return ("dot", max(K, 1)) if (l_k == 1 or K == 1) else ("axpy", l_k)
    if K == 1:
        return ("axpy", NC) if l_n == 1 else ("dot", l_n)
    if l_n == 1:
        return "axpy", l_k
    if l_k == 1:
        return "dot", l_n
    return None, 0


Skinny.kernel_class = SkinnyKernel


class BoundLaunch:
    """A zero-argument launcher (SkinnyKernel.bind): the launches with their arguments
    resolved once. `keep` holds the tensors, which must outlive it; `plan` is the plan."""

    def __init__(self, launches: list, stream: int, keep: tuple, plan: Any):
        self.launches, self.stream, self.keep, self.plan = launches, stream, keep, plan

    def __call__(self) -> None:
        for go, args in self.launches:
            go(self.stream, *args)

# Known-wrong variants the template renders for testing the tests (kgen/core/faults.py).
from ..core import faults as _faults  # noqa: E402 - test-only declarations, kept beside the family

_faults.plant("skinny", "drop_last_k_slab", "the slab count rounds K / ks down: a last K slab shorter than the "
              "others adds nothing")
_faults.plant("skinny", "skip_vector_tail", "the elements after the last whole vector (of K in the dot form, of the "
              "columns in the axpy form) are read as zero")
_faults.plant("skinny", "drop_block_partial", "the merge of the K slabs leaves out slab 0's partial (ticket and "
              "two-pass merges; with atomics slab 0 adds zero)")
_faults.plant("skinny", "edge_guard_off_by_one", "the small operand's row guard is off by one: its last row is "
              "staged as zeros")
