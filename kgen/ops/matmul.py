"""Matrix multiplication: C = alpha * A @ B + beta * C.

One spec class, one template (templates/matmul.cu.j2), one kernel class.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from ..core import runtime
from ..core.launch import Launch, LaunchError, ensure_context
from ..core.kernel import Kernel, RepeatCall, TorchPlanMemo
from ..core.runtime import ArrayError
from ..core.spec import Spec, fail, register_family

# Shared memory a block may use on sm_80/sm_90 after opting in (227 KiB on Hopper).
MAX_SHARED_BYTES = 227 * 1024
ITEMSIZE = {"float32": 4, "float64": 8}
# kgen.matmul runs products of at most this many multiply-adds with repack off: operands whose
# rows are not 16-byte aligned are read with element loads in one launch instead of being
# copied first (a launch each). As users call it on an H200 (one call between events, host
# time included; docs/bench/research/matmul_small_repack.py, docs/matmul-record.md): fitted on 40
# drawn products (seed 5151: 1.06x faster), checked on 40 others (seed 6262: 1.04x, lowest
# 0.91x) and on 30 more up to 2.3e8 multiply-adds (seed 7373: 1.07x, lowest 0.97x).
ELEMENT_LOADS_MAX_MACS = 1 << 28

# float32 defaults when nothing was tuned (the bench's per-shape table refines them): a
# 128x256x16 block of 8x16 thread tiles, interior tiles unchecked, unaligned operands
# repacked, a short last wave split in K (0.93x cuBLAS at 4096^3, 0.91x at 4097^3, H200);
# and for few C tiles with a long K, 128x128 blocks, two per SM, split in K.
DEFAULT_F32 = dict(tile=(128, 256, 16), thread_tile=(8, 16), warp_tile=(32, 128), shared_memory=True,
                   vector_loads=True, smem_pad=4, stages=3, async_copy=True, interior_fast_path=True,
                   repack=True, tail_split_k=4)
SPLIT_F32 = dict(tile=(128, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), shared_memory=True,
                 vector_loads=True, smem_pad=4, stages=3, async_copy=True, min_blocks=2, repack=True)


def normalize_mnk(problem: Any, what: str) -> dict[str, int]:
    """{"M", "N", "K"} of a product as positive ints, or a ValueError naming the one that is not
    (every matrix-product family reads its problem this way)."""
    out = {}
    for key in ("M", "N", "K"):
        v = problem.get(key) if isinstance(problem, dict) else None
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{what} problem needs {key} as a positive integer, got {v!r}")
        out[key] = int(v)
    return out


def product_work(problem: dict[str, int], itemsize: int) -> dict[str, float]:
    """Flops and bytes (A, B and C once each) of an M x N x K product."""
    M, N, K = problem["M"], problem["N"], problem["K"]
    return {"flops": 2.0 * M * N * K, "bytes": float(M * K + K * N + M * N) * itemsize}


def product_bucket(problem: dict[str, int]) -> tuple[float, ...]:
    """Where a product sits for "near" lookups: log2 of M, N and K."""
    return tuple(math.log2(problem[k]) for k in ("M", "N", "K"))


def stored_operand(shape, strides, name: str, layout: str) -> tuple[int, int, int]:
    """(rows, cols, leading dimension) of a 2-D operand of element `strides` stored as
    `layout` ("row": unit stride along columns, "col": along rows), or an ArrayError naming
    the layout that would read it."""
    rows, cols = int(shape[0]), int(shape[1])
    rs, cs = int(strides[0]), int(strides[1])
    if layout == "row":
        ok = (cs == 1 or cols <= 1) and (rs >= max(cols, 1) or rows <= 1)
        ld = rs if rows > 1 else max(cols, 1)
    else:
        ok = (rs == 1 or rows <= 1) and (cs >= max(rows, 1) or cols <= 1)
        ld = cs if cols > 1 else max(rows, 1)
    if not ok:
        other = "col" if layout == "row" else "row"
        raise ArrayError(
            f"{name} has shape {tuple(shape)} and element strides {tuple(strides)}, which layout_{name.lower()}="
            f"{layout!r} cannot express (it needs unit stride along {'columns' if layout == 'row' else 'rows'}); "
            f"use a spec with layout_{name.lower()}={other!r} if {name} is a transposed view, "
            "or make it contiguous")
    return rows, cols, ld


def product_inputs(problem: dict[str, int], np_dtype: Any, rng: Any) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal A (M x K) and B (K x N) rounded to `np_dtype`."""
    M, N, K = problem["M"], problem["N"], problem["K"]
    return rng.standard_normal((M, K)).astype(np_dtype), rng.standard_normal((K, N)).astype(np_dtype)


def product_reference(inputs: tuple[Any, Any]) -> np.ndarray:
    """The float64 product of A and B as given (already rounded to their type)."""
    A, B = inputs
    return np.asarray(A).astype(np.float64) @ np.asarray(B).astype(np.float64)


def tile_fit_reason(spec: Any, problem: dict[str, int], idle: str) -> str | None:
    """Why a tiled product spec (`tile`, `split_k`, `split_plan`) wastes itself on `problem`:
    a tile side over 64 that is at least twice the output (most `idle` sit idle), or a split
    of K too short to pay for itself. None when it fits."""
    BM, BN, BK = spec.tile
    if BM > 64 and BM >= 2 * problem["M"] or BN > 64 and BN >= 2 * problem["N"]:
        return f"tile {spec.tile[:2]} is more than twice the {problem['M']}x{problem['N']} output: most {idle} idle"
    if spec.split_k > 1:
        splits, chunk = spec.split_plan(problem["K"])
        if splits < 2:
            return f"K={problem['K']} is too short to split"
        # Slices added in a cluster cost no workspace and no second launch: two k steps pay.
        least = 2 * BK if getattr(spec, "split_merge", "workspace") == "cluster" else 4 * BK
        if chunk < least:
            return f"each of the {splits} K slices is only {chunk} long (at least {least} with split_k={spec.split_k})"
    return None


def register_cap(threads: int, blocks: int = 1) -> int:
    """Registers a thread may take so that `blocks` blocks of `threads` threads share one SM's
    65536 (at most 255, the instruction set's limit)."""
    return min(255, 65536 // (threads * max(blocks, 1)))


def block_limit_reason(threads: int, shared_bytes: int, limits: dict[str, int], max_shared: int) -> str | None:
    """Why a block of `threads` threads and `shared_bytes` of shared memory cannot launch on
    a device with `limits` (None when it can)."""
    if threads > limits.get("max_threads_per_block", 1024):
        return f"{threads} threads per block exceed the device's {limits['max_threads_per_block']}"
    if shared_bytes > limits.get("max_shared_per_block_optin", max_shared):
        return f"{shared_bytes} bytes of shared memory exceed the device's limit"
    return None


@register_family
@dataclasses.dataclass(frozen=True)
class Matmul(Spec):
    """A matmul kernel. docs/matmul.md explains every field, docs/matmul-record.md its measured effect.

    tile         (BM, BN, BK): the C block a thread block computes, and the K step.
    thread_tile  (TM, TN): the C patch each thread accumulates in registers.
    shared_memory: stage A and B tiles through shared memory (else read global memory).
    mapping      "2d" or "1d": thread-block shape (only matters without shared memory).
    layout_a/b   "row" or "col": storage of A and B ("col" takes a numpy .T view as is).
    smem_pad     extra elements per shared-memory row, against bank conflicts.
    launch_bounds: emit __launch_bounds__(threads[, min_blocks]) so ptxas sizes registers.
    warp_tile    (WM, WN): the C block one warp computes; (0, 0) interleaves threads over
                 the whole block tile instead. With a warp tile each thread tile is split in
                 sub-tiles of 16 bytes per row, read from shared memory as vectors.
    vector_loads: 16-byte global loads/stores (a second entry point; the host falls back to
                 element loads when a pointer or leading dimension is not 16-byte aligned).
    smem_a_transposed: keep A k-major in shared memory (a thread's A values at one k are
                 contiguous) rather than in its row-major order.
    stages       shared-memory buffers: 1 (load, sync, compute), 2 (double buffering), up to 4.
    async_copy   fill the stages with cp.async (sm_80+) instead of through registers.
    split_k      split K over up to this many blocks per C tile (deterministic reduction).
    min_blocks   the second __launch_bounds__ argument (0: leave it out).
    prefetch_fragments: double-buffer the register fragments: read k-slice kk+1 from shared
                 memory while multiplying slice kk, and the next tile's first slice right
                 after its barrier (needs stages >= 2 and an even BK).
    interior_fast_path: copy tiles that lie wholly inside the matrix (most of them) with no
                 bounds checks or zero-fill arithmetic; edge tiles keep the checked copies.
    repack       with vector_loads: copy an operand whose pointer or leading dimension rules
                 out 16-byte loads into an aligned buffer first, then run the vector kernel
                 (instead of the element-load one).
    tail_split_k when the C tiles fill the GPU's block slots a whole number of times plus a
                 partial last wave, compute the last C tile rows in a second launch with K
                 split up to this many ways (1: off), so the last wave is short, not idle.
    """

    kernel: ClassVar[str] = "matmul"
    template: ClassVar[str] = "matmul.cu.j2"

    dtype: str = "float32"
    tile: tuple[int, int, int] = (16, 16, 16)
    thread_tile: tuple[int, int] = (1, 1)
    shared_memory: bool = False
    mapping: str = "2d"
    layout_a: str = "row"
    layout_b: str = "row"
    smem_pad: int = 0
    launch_bounds: bool = True
    warp_tile: tuple[int, int] = (0, 0)
    vector_loads: bool = False
    smem_a_transposed: bool = True
    stages: int = 1
    async_copy: bool = False
    split_k: int = 1
    min_blocks: int = 0
    prefetch_fragments: bool = False
    interior_fast_path: bool = False
    repack: bool = False
    tail_split_k: int = 1

    def validate(self) -> None:
        if self.dtype not in ITEMSIZE:
            fail("dtype", self.dtype, f"one of {sorted(ITEMSIZE)}")
        BM, BN, BK = self.tile
        TM, TN = self.thread_tile
        for name, v in (("tile[0] (BM)", BM), ("tile[1] (BN)", BN), ("tile[2] (BK)", BK),
                        ("thread_tile[0] (TM)", TM), ("thread_tile[1] (TN)", TN)):
            if not 1 <= v <= 1024:
                fail(name, v, "an integer from 1 to 1024")
        if BM % TM:
            fail("thread_tile", self.thread_tile, f"TM must divide BM={BM}")
        if BN % TN:
            fail("thread_tile", self.thread_tile, f"TN must divide BN={BN}")
        if TM * TN > 256:
            fail("thread_tile", self.thread_tile, "at most 256 accumulators per thread (TM*TN <= 256)")
        if self.threads > 1024:
            fail("tile", self.tile, f"(BM/TM)*(BN/TN) = {self.threads} threads per block; at most 1024 allowed")
        if self.mapping not in ("1d", "2d"):
            fail("mapping", self.mapping, "'1d' or '2d'")
        for name in ("layout_a", "layout_b"):
            if getattr(self, name) not in ("row", "col"):
                fail(name, getattr(self, name), "'row' or 'col'")
        if not 0 <= self.smem_pad <= 32:
            fail("smem_pad", self.smem_pad, "an integer from 0 to 32")
        if not 0 <= self.min_blocks <= 32:
            fail("min_blocks", self.min_blocks, "an integer from 0 (left out) to 32")
        if self.min_blocks and not self.launch_bounds:
            fail("min_blocks", self.min_blocks, "0 unless launch_bounds is true")
        if not self.shared_memory:
            # The global-memory kernel is the textbook baseline: the pipeline knobs need tiles.
            for name, off in (("warp_tile", (0, 0)), ("vector_loads", False), ("stages", 1),
                              ("async_copy", False), ("split_k", 1), ("prefetch_fragments", False),
                              ("interior_fast_path", False), ("repack", False), ("tail_split_k", 1)):
                if getattr(self, name) != off:
                    fail(name, getattr(self, name), f"{off!r} without shared memory (set shared_memory=true)")
            return
        WM, WN = self.warp_tile
        if (WM, WN) != (0, 0):
            if WM < 1 or WN < 1 or BM % WM or BN % WN or WM % TM or WN % TN:
                fail("warp_tile", self.warp_tile, f"(0, 0), or (WM, WN) dividing the block tile ({BM}, {BN}) "
                     f"and divisible by the thread tile ({TM}, {TN})")
            if (WM // TM) * (WN // TN) != 32:
                fail("warp_tile", self.warp_tile, f"a tile of 32 thread tiles: (WM/TM)*(WN/TN) = 32, "
                     f"got {(WM // TM) * (WN // TN)}")
        if self.vector_loads:
            vec = self.vec
            for name, v in (("BM", BM), ("BN", BN), ("BK", BK)):
                if v % vec:
                    fail("vector_loads", True, f"false unless {name}={v} is a multiple of {vec} "
                         f"({vec} x {self.dtype} = 16 bytes)")
        if not 1 <= self.stages <= 4:
            fail("stages", self.stages, "1, 2, 3 or 4")
        if self.async_copy and self.stages < 2:
            fail("stages", self.stages, "2, 3 or 4 with async_copy (one stage computes while others load)")
        if not self.async_copy and self.stages > 2:
            fail("stages", self.stages, "1 or 2 without async_copy (more stages need cp.async)")
        if not 1 <= self.split_k <= 64:
            fail("split_k", self.split_k, "an integer from 1 to 64")
        if not 1 <= self.tail_split_k <= 16:
            fail("tail_split_k", self.tail_split_k, "an integer from 1 (off) to 16")
        if self.tail_split_k > 1 and self.split_k > 1:
            fail("tail_split_k", self.tail_split_k, "1 when split_k > 1 (every tile is split already)")
        if self.prefetch_fragments and (self.stages < 2 or BK % 2):
            fail("prefetch_fragments", True, f"false unless stages >= 2 and BK is even "
                 f"(got stages={self.stages}, BK={BK})")
        if self.repack and not self.vector_loads:
            fail("repack", True, "false unless vector_loads is true (repacking feeds the vector kernel)")
        if self.shared_bytes > MAX_SHARED_BYTES:
            fail("tile", self.tile, f"needs {self.shared_bytes} bytes of shared memory "
                 f"({self.stages} stage(s)); the device limit is {MAX_SHARED_BYTES}")

    # -- derived sizes --------------------------------------------------------------
    @property
    def threads(self) -> int:
        return (self.tile[0] // self.thread_tile[0]) * (self.tile[1] // self.thread_tile[1])

    @property
    def vec(self) -> int:
        """Elements in 16 bytes: the width of a vector global load."""
        return 16 // ITEMSIZE[self.dtype]

    @property
    def warp_tiled(self) -> bool:
        return self.shared_memory and tuple(self.warp_tile) != (0, 0)

    def _sub(self, t: int) -> int:
        # Sub-tile side: the largest of vec, 2, 1 dividing the thread tile side.
        if not self.warp_tiled:
            return 1
        for s in (self.vec, 2, 1):
            if s <= self.vec and t % s == 0:
                return s
        return 1

    def _tile_elems(self) -> tuple[int, int]:
        BM, BN, BK = self.tile
        pad, v = self.smem_pad, self.vec
        a = BK * (BM + pad) if self.smem_a_transposed else BM * (BK + pad)
        b = BK * (BN + pad)
        # Rounded up to 16 bytes so each stage and the B tile start aligned.
        return -(-a // v) * v, -(-b // v) * v

    @property
    def shared_bytes(self) -> int:
        if not self.shared_memory:
            return 0
        a, b = self._tile_elems()
        return self.stages * (a + b) * ITEMSIZE[self.dtype]

    def dynamic_shared_bytes(self, entry: str) -> int:
        # The product kernels stage A and B tiles in dynamic shared memory; the split-K
        # reduce and the repack kernels use none.
        return self.shared_bytes if entry in ("kgen_matmul", "kgen_matmul_vec", "kgen_matmul_vec_cs") else 0

    def template_context(self) -> dict[str, Any]:
        BM, BN, BK = self.tile
        TM, TN = self.thread_tile
        WM, WN = self.warp_tile
        sub_m, sub_n = self._sub(TM), self._sub(TN)
        a_elems, b_elems = self._tile_elems()
        pad = self.smem_pad
        as_ld = (BM + pad) if self.smem_a_transposed else (BK + pad)
        return dict(
            BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, threads=self.threads, VEC=self.vec,
            vec_type="float4" if self.dtype == "float32" else "double2",
            warp_tiled=self.warp_tiled, WM=WM, WN=WN,
            WTR=(WM // TM) if self.warp_tiled else 0, WTC=(WN // TN) if self.warp_tiled else 0,
            SUB_M=sub_m, SUB_N=sub_n,
            a_tile_elems=a_elems, b_tile_elems=b_elems,
            # Vector fragment reads need aligned, contiguous sub-tile rows in shared memory.
            frag_vec_a=sub_m > 1 and self.smem_a_transposed and as_ld % sub_m == 0,
            frag_vec_b=sub_n > 1 and (BN + pad) % sub_n == 0,
            c_store_vec=self.vector_loads and sub_n > 1,
            prefetch_fragments=self.prefetch_fragments, interior_fast_path=self.interior_fast_path,
            repack=self.repack, tail_split_k=self.tail_split_k,
            shared_bytes=self.shared_bytes,
            **self._self_check_context())

    def _self_check_context(self) -> dict[str, Any]:
        """What the standalone program's self-check needs: the rounding model's constants."""
        from ..core import rounding

        return dict(rounding_constants=rounding.template_constants(self.dtype, self.dtype),
                    exact_bits=53 if self.dtype == "float64" else 24)

    def split_plan(self, K: int, ways: int | None = None) -> tuple[int, int]:
        """(number of K slices, K elements per slice) for a product with inner size K, split
        at most `ways` ways (default: split_k). Slices are whole BK tiles."""
        BK = self.tile[2]
        ways = self.split_k if ways is None else ways
        if not self.shared_memory or ways <= 1 or K <= BK:
            return 1, K
        tiles = -(-K // BK)
        per = -(-tiles // ways)
        return -(-tiles // per), per * BK

    def tail_plan(self, M: int, N: int, K: int, slots: int) -> tuple[int, int]:
        """(C tile rows computed by the tail launch, its K ways) for tail_split_k, given how
        many blocks the GPU runs at once; (0, 1) when a tail launch would not help. Pure.

        The first launch keeps whole waves: the rows it covers hold at most as many tiles as
        the full waves do. The rest of the rows go to a second launch whose split blocks fit
        in one wave (so it costs a fraction of a wave, where the partial wave cost a whole)."""
        if self.tail_split_k <= 1 or slots < 1:
            return 0, 1
        BM, BN, BK = self.tile
        tiles_n, tiles_m = -(-N // BN), -(-M // BM)
        total = tiles_n * tiles_m
        full_waves = total // slots
        if full_waves == 0 or total % slots == 0:
            return 0, 1
        rows = tiles_m - (full_waves * slots) // tiles_n
        ways = min(self.tail_split_k, slots // (rows * tiles_n)) if rows < tiles_m else 0
        splits, chunk = self.split_plan(K, ways)
        # Worth it when each split slice stays a few tiles deep.
        if ways < 2 or splits < 2 or chunk < 4 * BK:
            return 0, 1
        return rows, splits

    def launch_geometry(self, M: int, N: int, K: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared bytes) for an M x N x K product. Pure; unit-tested."""
        BM, BN, _ = self.tile
        TM, TN = self.thread_tile
        splits, _ = self.split_plan(K)
        grid = (-(-N // BN), -(-M // BM), splits)
        if self.shared_memory or self.mapping == "1d":
            block = (self.threads, 1, 1)
        else:
            block = (BN // TN, BM // TM, 1)
        return grid, block, self.shared_bytes

    # -- for tests, tuning and benchmarks ------------------------------------------
    @staticmethod
    def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return A.astype(np.float64) @ B.astype(np.float64)

    # -- tolerances (the rounding model of kgen/core/rounding.py) ---------------------------
    def tolerance(self, K: int, outputs: int = 8) -> float:
        """Largest relative (Frobenius) error of a product with inner size K on random data,
        without looking at the data: the rounding model's bound for i.i.d. entries (product
        terms of unit size, results of size sqrt(K)), relative to the smallest norm that
        `outputs` random results take at the data-free confidence (about 9x below typical
        for 8). One result may cancel almost to zero: pass outputs=M*N, or use tolerance_for
        with the data for a tight check."""
        from ..core import rounding

        K, outputs = max(int(K), 1), max(int(outputs), 1)
        typical = float(outputs * K)  # sum of squared results = sum of squared terms
        return self.product_error_bound(K, typical, typical) / math.sqrt(typical) \
            * rounding.small_result_allowance(outputs)

    def rounding_levels(self, K: int, splits: int = 1, chunk: int | None = None) -> tuple[float, float]:
        """(levels, msum) of one result's summation order (kgen/core/rounding.py): a
        sequential chain of K fused multiply-adds, or with K split, chains of `chunk` and
        then the reduction's chain over the slices. The standalone program's
        kgen_tolerance builds the same levels."""
        from ..core import rounding

        if splits <= 1 or chunk is None:
            return rounding.chain(K, K, 1)
        return rounding.add(rounding.chain(K, chunk, 1), rounding.chain(K, splits, chunk))

    def k_plans(self, K: int) -> list[tuple[int, int]]:
        """Every (K slices, slice length) this spec may run a product of inner size K with:
        unsplit, split_k's plan and the tail's tail_split_k plan."""
        plans = {(1, K), self.split_plan(K)}
        if self.tail_split_k > 1:
            plans.add(self.split_plan(K, self.tail_split_k))
        return sorted(plans)

    def kernel_error_bound(self, K: int, results_sq: float, terms_sq: float, splits: int = 1,
                           chunk: int | None = None) -> float:
        """Absolute (Frobenius) error of the computed product for results whose squares add
        to results_sq and product terms a_ik b_kj whose squares add to terms_sq, at the
        model's confidence: the additions of each result's order, the products' own
        rounding (when not fused) and the epilogue's."""
        from ..core import rounding

        levels, msum = self.rounding_levels(K, splits, chunk)
        squares = rounding.square_sum(K, results_sq, terms_sq, levels, msum) + terms_sq + results_sq
        return rounding.bound(rounding.unit_roundoff(self.dtype), squares)

    @staticmethod
    def reference_error_bound(K: int, results_sq: float, terms_sq: float) -> float:
        """The float64 reference's own error, taken as a sequential sum over K."""
        from ..core import rounding

        levels, msum = rounding.chain(K, K, 1)
        squares = rounding.square_sum(K, results_sq, terms_sq, levels, msum) + terms_sq
        return rounding.bound(rounding.UNIT_ROUNDOFF["float64"], squares)

    def product_error_bound(self, K: int, results_sq: float, terms_sq: float) -> float:
        """kernel_error_bound for the worst of this spec's K plans, plus the reference's."""
        worst = max(self.kernel_error_bound(K, results_sq, terms_sq, s, c) for s, c in self.k_plans(K))
        return worst + self.reference_error_bound(K, results_sq, terms_sq)

    # -- the family interface (see Spec) ----------------------------------------------
    @classmethod
    def normalize_problem(cls, problem):
        return normalize_mnk(problem, "matmul")

    @classmethod
    def search_space(cls, problem, dtype):
        """Textbook baselines, then the tuned family: block x thread x warp tiles, pipelines,
        padding, A's shared layout, and split-K where the C tiles alone cannot fill the GPU."""
        p = cls.normalize_problem(problem)
        seen, specs = set(), []

        def add(**kw):
            try:
                s = cls(dtype=dtype, **kw)
            except ValueError:
                return
            if s.key not in seen:
                seen.add(s.key)
                specs.append(s)

        for tile in ((16, 16, 16), (32, 32, 16), (32, 8, 16), (8, 32, 16)):
            add(tile=tile, thread_tile=(1, 1))
        for BM, BN, BK, TM, TN in ((32, 32, 32, 1, 1), (64, 64, 16, 4, 4), (128, 128, 8, 8, 8), (64, 64, 8, 8, 4)):
            for stages in (1, 2):
                add(tile=(BM, BN, BK), thread_tile=(TM, TN), shared_memory=True, stages=stages)
        vec = 16 // ITEMSIZE[dtype]
        # Operands whose rows are not whole 16-byte chunks: the tuned family repacks them for
        # the vector kernel (4097^3: 0.91x cuBLAS against 0.75x with element loads, H200).
        unaligned = any(p[d] % vec for d in ("M", "N", "K"))
        tuned = dict(shared_memory=True, vector_loads=True, smem_pad=vec, interior_fast_path=True, repack=unaligned)
        pipes = ((False, 1), (False, 2), (True, 2), (True, 3), (True, 4))
        thread_tiles = ((8, 8), (8, 4), (4, 8), (4, 4)) if dtype == "float32" else ((4, 4), (4, 2), (2, 4))
        # 128 accumulators a thread (one 256-thread block per SM at ~220 registers) beat 8x8
        # by 1-2% at 2048^3-8192^3 on an H200 (docs/bench/research/matmul_wide_sweep.py).
        wide = {(128, 256): ((8, 16),), (256, 128): ((16, 8),)} if dtype == "float32" else {}
        for BM, BN in ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128)):
            for BK in (8, 16, 32):
                for TM, TN in thread_tiles + wide.get((BM, BN), ()):
                    for wtr in (1, 2, 4, 8, 16, 32):
                        WM, WN = wtr * TM, (32 // wtr) * TN
                        if BM % WM or BN % WN:
                            continue
                        threads = (BM // TM) * (BN // TN)
                        # min_blocks: none, or as many blocks as fit at 128 registers a thread
                        # (two 256-thread blocks per SM was worth ~15% on an H200).
                        for mb in sorted({0, 512 // threads if threads <= 256 else 0}):
                            for async_copy, stages in pipes:
                                kw = dict(tile=(BM, BN, BK), thread_tile=(TM, TN), warp_tile=(WM, WN), stages=stages,
                                          async_copy=async_copy, min_blocks=mb, **tuned)
                                add(**kw)
                                # A short last wave of C tiles, split in K (the wide tiles fill
                                # the GPU fewest times, so their last wave costs most).
                                if (TM, TN) in wide.get((BM, BN), ()) and async_copy and stages >= 3:
                                    add(**dict(kw, tail_split_k=4))
        # Contrasts to the measured defaults: unpadded rows, A kept row-major in shared memory,
        # edge checks on every tile, element loads for unaligned operands.
        base = dict(tile=(128, 128, 8), thread_tile=(8, 8) if dtype == "float32" else (4, 4),
                    warp_tile=(32, 64) if dtype == "float32" else (16, 32), **dict(tuned, interior_fast_path=False))
        for async_copy, stages in pipes:
            add(**dict(base, smem_pad=0, stages=stages, async_copy=async_copy))
            add(**dict(base, stages=stages, async_copy=async_copy, smem_a_transposed=False))
            add(**dict(base, stages=stages, async_copy=async_copy, repack=False))
        if dtype == "float32":
            add(tile=(128, 256, 16), thread_tile=(8, 16), warp_tile=(32, 128), stages=3, async_copy=True,
                **dict(tuned, interior_fast_path=False))
        # Split-K when few C tiles exist but K is long.
        tiles_128 = -(-p["M"] // 128) * -(-p["N"] // 128)
        if tiles_128 < 264 and p["K"] >= 512:
            blocks = [(128, 128, 8, 8, 8, 32, 64), (64, 128, 8, 8, 8, 32, 64), (128, 64, 8, 8, 8, 32, 64),
                      (64, 64, 8, 8, 4, 32, 32), (64, 64, 16, 8, 4, 32, 32)]
            if dtype == "float32":
                blocks.append((128, 256, 8, 8, 16, 32, 128))  # 127x4096x4096: 0.875x with split 8
            for split in (2, 3, 4, 6, 8, 16):
                for BM, BN, BK, TM, TN, WM, WN in blocks:
                    if dtype == "float64":
                        TM, TN, WM, WN = 4, 4, 16, 32
                    threads = (BM // TM) * (BN // TN)
                    # Two or more blocks an SM unless the thread tile needs > 128 registers.
                    mb = 512 // threads if dtype == "float32" and TM * TN <= 64 else 0
                    for async_copy, stages in ((False, 2), (True, 3), (True, 4)):
                        add(tile=(BM, BN, BK), thread_tile=(TM, TN), warp_tile=(WM, WN), stages=stages,
                            async_copy=async_copy, split_k=split, min_blocks=mb, **tuned)
        return specs

    @classmethod
    def default_spec(cls, problem, dtype):
        p = cls.normalize_problem(problem)
        if dtype == "float64":
            return cls(dtype=dtype, tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), shared_memory=True,
                       vector_loads=True, smem_pad=2, stages=3, async_copy=True, repack=True)
        # Fewer 128x128 C tiles than SMs and a long K: split K so every SM gets work (about
        # two blocks per SM), keeping each slice at least 256 long. Measured on an H200:
        # split 4 at 1024^3, 8 at 4096x64x4096 (docs/benchmarks-matmul.md).
        tiles = -(-p["M"] // 128) * -(-p["N"] // 128)
        if tiles < 132 and p["K"] >= 512:
            split = min(8, -(-264 // tiles), p["K"] // 256)
            if split > 1:
                return cls(dtype=dtype, **dict(SPLIT_F32, split_k=split))
        return cls(dtype=dtype, **DEFAULT_F32)

    def prune_reason(self, problem, limits):
        if self.threads < 32:
            return f"{self.threads} threads per block leave most of each warp idle"
        over = block_limit_reason(self.threads, self.shared_bytes, limits, MAX_SHARED_BYTES)
        if over:
            return over
        regs = self.thread_tile[0] * self.thread_tile[1] * ITEMSIZE[self.dtype] // 4
        if regs > 128:
            return f"{regs} accumulator registers per thread leave too few for the rest (spills)"
        # ptxas needs about 48 registers beyond the accumulators (fragments, addresses); below
        # that the register cap from the block size and min_blocks forces spills.
        cap = register_cap(self.threads, self.min_blocks)
        if self.shared_memory and cap < regs + 48:
            return f"{self.threads} threads x {max(self.min_blocks, 1)} blocks cap registers at {cap}, " \
                   f"below ~{regs + 48} needed (spills)"
        return tile_fit_reason(self, self.normalize_problem(problem), "threads")

    # The rest of the family interface (kgen.core.spec.Spec), for the tuner and dispatch.
    @classmethod
    def make_inputs(cls, problem, dtype, rng):
        return product_inputs(cls.normalize_problem(problem), dtype, rng)

    @classmethod
    def reference_output(cls, problem, inputs):
        return product_reference(inputs)

    @classmethod
    def output_shape(cls, problem):
        return (problem["M"], problem["N"])

    def tolerance_for(self, problem, inputs=None):
        """Largest relative (Frobenius) error against reference_output. With the inputs
        (and a product small enough to form here, M*N*K <= 2^27): the rounding model's
        bound for these results and terms; else tolerance(K) for M*N random results."""
        p = self.normalize_problem(problem)
        M, N, K = p["M"], p["N"], p["K"]
        if inputs is None or M * N * K > 1 << 27:
            return self.tolerance(K, M * N)
        A = np.asarray(inputs[0], dtype=np.float64)
        B = np.asarray(inputs[1], dtype=np.float64)
        C = A @ B
        results_sq = float(np.square(C).sum())
        if results_sq == 0.0:
            return 0.0
        terms_sq = float(np.square(A).sum(axis=0) @ np.square(B).sum(axis=1))
        return self.product_error_bound(K, results_sq, terms_sq) / math.sqrt(results_sq)

    @classmethod
    def make_exact_inputs(cls, problem, dtype, rng):
        """A and B on which every order of summation is exact, so a product is checked by
        equality and one dropped, doubled or misplaced term fails: positive integers up to
        R, with K * R^2 below 2^(p-2) (p = 24 bits for float32, 53 for float64), so that
        alpha (a power of two) times the product plus beta times a C of small multiples of
        the same unit stays exact; each operand is scaled by its own power of two.
        Positive terms make every lost or doubled term change its result."""
        p = cls.normalize_problem(problem)
        bits = {"float32": 24, "float64": 53}[dtype]
        limit = 2 ** (bits - 2)
        M, N, K = p["M"], p["N"], p["K"]
        if K >= limit:
            raise ValueError(f"no exact {dtype} inputs for K={K}: K must stay below 2^{bits - 2}")
        width = max(1, min(64, math.isqrt((limit - 1) // K)))
        scale_a, scale_b = (2.0 ** int(e) for e in rng.integers(-4, 5, 2))
        A = rng.integers(1, width + 1, (M, K)).astype(np.float64) * scale_a
        B = rng.integers(1, width + 1, (K, N)).astype(np.float64) * scale_b
        return A.astype(dtype), B.astype(dtype)

    @classmethod
    def work(cls, problem, dtype):
        return product_work(problem, ITEMSIZE[dtype])

    @classmethod
    def bucket(cls, problem):
        return product_bucket(problem)


def _torch_key(A, B, pa: int, pb: int, out) -> tuple:
    """What a torch call's launch plan depends on: shapes, strides, dtypes and devices, whether
    each pointer allows 16-byte copies, and the output's (or None for a new one)."""
    return (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, A.get_device(), B.get_device(),
            pa % 16 == 0, pb % 16 == 0,
            None if out is None else (out.shape, out.stride(), out.dtype, out.get_device(), out.data_ptr() % 16 == 0))


class MatmulKernel(TorchPlanMemo, Kernel):
    """k(A, B, out=None, alpha=1.0, beta=0.0) -> C = alpha * A @ B + beta * out.

    Entry points: kgen_matmul (element loads, any alignment; absent with repack),
    kgen_matmul_vec (16-byte loads, chosen when A, B and their leading dimensions allow
    it), kgen_matmul_vec_cs (the same with element stores, for an unaligned C), with split_k or
    tail_split_k kgen_matmul_splitk_reduce, which folds the K slices from a workspace into
    C, and with repack kgen_matmul_repack, which aligns an operand for the vector kernel.
    The workspaces belong to this kernel object: calls on different streams that overlap
    in time would share them, so such kernels serialise through one stream.
    """

    torch_key = staticmethod(_torch_key)

    spec: Matmul

    def __init__(self, spec, source, compiled):
        super().__init__(spec, source, compiled)
        fmt_scalar = "f" if spec.dtype == "float32" else "d"
        self._fmt = "PPP" + "q" * 8 + fmt_scalar * 2
        self._fmt_reduce = "PP" + "q" * 5 + "i" + fmt_scalar * 2
        self._fmt_repack = "PP" + "q" * 4
        shared = spec.shared_bytes
        # With repack every call takes a vector entry point: no element-load kernel exists.
        self._fn = None if spec.repack else self.function("kgen_matmul", shared)
        self._fn_vec = self.function("kgen_matmul_vec", shared) if spec.vector_loads else None
        self._fn_reduce = None
        if spec.split_k > 1 or spec.tail_split_k > 1:
            self._fn_reduce = self.function("kgen_matmul_splitk_reduce")
        self._fn_repack = self._fn_vec_cs = None
        if spec.repack:
            self._fn_repack = self.function("kgen_matmul_repack")
            self._fn_vec_cs = self.function("kgen_matmul_vec_cs", shared)
        self._buffers: dict[str, Any] = {}
        self._retired: list[Any] = []  # workspaces outgrown while a graph was captured: the graph uses them
        self._plans: dict[tuple, tuple] = {}
        self._launch_plans: dict[tuple, tuple] = {}
        self._torch_calls: dict[tuple, tuple] = {}
        self._torch_results = runtime.TorchResults()   # results of repeat torch calls, in batches
        self._live = [True]   # cleared with the plans: the repeat calls made so far plan afresh
        self._slots: dict[str, int] = {}

    def _plan(self, M: int, N: int, K: int, entry: str) -> tuple:
        """The launches of one product, computed once per shape (calls repeat shapes): a
        tuple of (first C row, rows, grid, K slices, K per slice). One part, or two with a
        tail split."""
        key = (M, N, K, entry)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        spec = self.spec
        BM, BN, _ = spec.tile
        tail_rows, tail_ways = 0, 1
        if spec.tail_split_k > 1:
            tail_rows, tail_ways = spec.tail_plan(M, N, K, self._resident_slots(entry))
        head = M if not tail_rows else (-(-M // BM) - tail_rows) * BM
        parts = []
        for m0, rows, ways in ((0, head, None), (head, M - head, tail_ways)):
            if rows <= 0:
                continue
            splits, chunk = spec.split_plan(K, ways)
            grid = (-(-N // BN), -(-rows // BM), splits)
            if grid[1] > 65535:
                raise ArrayError(f"M={M} needs {grid[1]} row blocks; at most 65535 fit in the grid "
                                 f"(use a larger tile[0] or split the product)")
            parts.append((m0, rows, grid, splits, chunk))
        plan = tuple(parts)
        if len(self._plans) < 256:
            self._plans[key] = plan
        return plan

    def _resident_slots(self, entry: str) -> int:
        """Blocks the whole GPU runs at once for the entry point `entry`."""
        slots = self._slots.get(entry)
        if slots is None:
            sms = runtime.device_limits()["multiprocessors"]
            slots = sms * runtime.resident_blocks(self.function(entry), self.spec.threads, self.spec.shared_bytes)
            self._slots[entry] = slots
        return slots

    def _buffer(self, name: str, nbytes: int) -> int:
        """A device workspace of at least nbytes, kept and grown per name. Growing one
        frees the old buffer (cuMemFree waits for the work that uses it) and forgets the
        launch plans that named it; they are made again on their next call."""
        held = self._buffers.get(name)
        if held is None or held[1] < nbytes:
            if held is not None:
                self._forget_plans()
                if runtime.torch_capturing():
                    self._retired.append(held[0])   # no cuMemFree while a graph is captured
                else:
                    held[0].free()
            held = (runtime.device_buffer(nbytes), nbytes)
            self._buffers[name] = held
        return int(held[0])

    def _forget_plans(self) -> None:
        self._live[0] = False
        self._live = [True]
        self._launch_plans.clear()
        self._torch_calls.clear()

    def release(self) -> None:
        """Free the workspaces (split-K slices, repacked operands) this kernel holds; the
        next call allocates what it needs again."""
        self._forget_plans()
        for held in self._buffers.values():
            held[0].free()
        self._buffers.clear()
        self._retired.clear()

    def _launch_plan(self, M: int, N: int, K: int, lda: int, ldb: int, ldc: int, a_ok: bool, b_ok: bool,
                     c_ok: bool) -> tuple:
        """Everything a call of this shape, layout and alignment launches, decided once:
        (repack of A, repack of B, parts). Each part is (launch, A offset, C offset, the
        arguments after the pointers, split-K workspace or 0, the reduce launch and its
        arguments). `a_ok`/`b_ok`/`c_ok`: the operand's pointer and leading dimension allow
        16-byte access."""
        key = (M, N, K, lda, ldb, ldc, a_ok, b_ok, c_ok)
        plan = self._launch_plans.get(key)
        if plan is not None:
            return plan
        spec = self.spec
        vec, item = spec.vec, self._np_dtype.itemsize
        block, shared = spec.launch_geometry(M, N, K)[1:]
        repacks: list[Any] = [None, None]
        vec_loads = False
        if self._fn_vec is not None:
            if self._fn_repack is not None:
                # Storage rows x contiguous columns of each operand, as the kernel reads it.
                for i, (ok, dims, ld) in enumerate(((a_ok, (M, K) if spec.layout_a == "row" else (K, M), lda),
                                                    (b_ok, (K, N) if spec.layout_b == "row" else (N, K), ldb))):
                    if ok:
                        continue
                    rows, cols = dims
                    ldd = -(-cols // vec) * vec
                    dst = self._buffer("AB"[i], rows * ldd * item)
                    grid = (max(1, min(-(-ldd // (256 * vec)), 64)), max(1, min(rows, 65535)), 1)
                    repacks[i] = (Launch(self.handle("kgen_matmul_repack"), "kgen_matmul_repack", grid, (256, 1, 1), 0,
                                         self._fmt_repack), dst, rows, cols, ld, ldd)
                    if i == 0:
                        lda = ldd
                    else:
                        ldb = ldd
                a_ok = b_ok = True
            vec_loads = a_ok and b_ok
        entry = "kgen_matmul_vec" if vec_loads else "kgen_matmul"
        parts: list[tuple[Any, ...]] = []
        for m0, rows, grid, splits, chunk in self._plan(M, N, K, entry):
            name = "kgen_matmul"
            if vec_loads and (splits > 1 or c_ok):
                name = "kgen_matmul_vec"
            elif vec_loads and self._fn_vec_cs is not None:
                name = "kgen_matmul_vec_cs"
            main = Launch(self.handle(name, shared), name, grid, block, shared, self._fmt)
            # C rows m0.. of the product: A's rows m0.. (a column offset when A is stored
            # column-major) times all of B.
            a_off = m0 * (lda if spec.layout_a == "row" else 1) * item
            c_off = m0 * ldc * item
            if splits == 1:
                parts.append((main, a_off, c_off, (rows, N, K, lda, ldb, ldc, chunk, 0), 0, None, ()))
                continue
            # Slices go to a workspace with a 16-byte-aligned row stride; the reduce kernel
            # applies alpha and beta once, summing the slices in a fixed order.
            ldw = -(-N // vec) * vec
            stride = rows * ldw
            ws = self._buffer("split", splits * stride * item)
            total = rows * N
            rgrid = (max(1, min(-(-total // 256), 132 * 16)), 1, 1)
            reduce = Launch(self.handle("kgen_matmul_splitk_reduce"), "kgen_matmul_splitk_reduce", rgrid,
                            (256, 1, 1), 0, self._fmt_reduce)
            parts.append((main, a_off, c_off, (rows, N, K, lda, ldb, ldw, chunk, stride), ws, reduce,
                          (rows, N, ldw, ldc, stride, splits)))
        plan = (repacks[0], repacks[1], tuple(parts))
        if len(self._launch_plans) >= 256:
            self._launch_plans.clear()
        self._launch_plans[key] = plan
        return plan

    def _run(self, plan: tuple, pa: int, pb: int, pc: int, alpha: float, beta: float, stream: int) -> None:
        repack_a, repack_b, parts = plan
        if repack_a is not None:
            go, dst, *args = repack_a
            go(stream, pa, dst, *args)
            pa = dst
        if repack_b is not None:
            go, dst, *args = repack_b
            go(stream, pb, dst, *args)
            pb = dst
        for go, a_off, c_off, args, ws, reduce, reduce_args in parts:
            if not ws:
                go(stream, pa + a_off, pb, pc + c_off, *args, alpha, beta)
            else:
                go(stream, pa + a_off, pb, ws, *args, 1.0, 0.0)
                reduce(stream, ws, pc + c_off, *reduce_args, alpha, beta)

    def _aligned(self, ptr: int, ld: int) -> bool:
        return not (ptr % 16 or ld % self.spec.vec)

    def __call__(self, A, B, out=None, *, alpha: float = 1.0, beta: float = 0.0, stream=None):
        if beta != 0 and out is None:
            raise ArrayError("beta != 0 needs out= (the C that is scaled by beta and added to)")
        tensor = runtime.torch_tensor_type()
        if tensor is not None and type(A) is tensor and type(B) is tensor and (out is None or type(out) is tensor):
            return self._call_torch(A, B, out, alpha, beta, stream)
        spec = self.spec
        on_host = runtime.split_host_device({"A": A, "B": B, "out": out})
        if on_host:
            A = self._host_layout(A, "A", spec.layout_a)
            B = self._host_layout(B, "B", spec.layout_b)
        a = runtime.to_device(A, "A") if on_host else runtime.view(A, "A")
        b = runtime.to_device(B, "B") if on_host else runtime.view(B, "B")
        M, K, lda = self._operand(a, "A", spec.layout_a)
        K2, N, ldb = self._operand(b, "B", spec.layout_b)
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        if on_host:
            host_out = out
            c = runtime.to_device(np.ascontiguousarray(out), "out") if out is not None else \
                runtime.new_host_output((M, N), self._np_dtype)
        else:
            c = runtime.view(out, "out") if out is not None else \
                runtime.view(runtime.empty_like_library(A, (M, N), self._np_dtype), "out")
        ldc = self._output(c, M, N)
        if M and N:
            plan = self._launch_plan(M, N, K, lda, ldb, ldc, self._aligned(a.ptr, lda), self._aligned(b.ptr, ldb),
                                     self._aligned(c.ptr, ldc))
            handle = runtime.library_stream(A, stream)
            ensure_context()
            try:
                self._run(plan, a.ptr, b.ptr, c.ptr, alpha, beta, handle)
            except LaunchError as exc:
                raise LaunchError(f"{exc} (spec {spec.to_json()}, M={M} N={N} K={K})") from None
        if on_host:
            result = runtime.copy_back(c)
            if host_out is not None:
                host_out[...] = result
                return host_out
            return result
        return c.owner

    def _call_torch(self, A, B, out, alpha, beta, stream):
        """torch tensors: their own accessors, and one memo per shape, strides and alignment
        class, so a repeat call is a dictionary lookup and the launches."""
        pa, pb = A.data_ptr(), B.data_ptr()
        shape, plan, device = self._torch_hit(A, B, pa, pb, out)
        handle = runtime.torch_stream(device) if stream is None else runtime.stream_handle(stream)
        if out is None:
            # Small results come in batches on torch's current stream; stream= gets its own.
            out = self._torch_results.new(A, shape, device, handle) if stream is None else A.new_empty(shape)
        if plan is not None:
            ensure_context()
            self._run(plan, pa, pb, out.data_ptr(), alpha, beta, handle)
        return out

    def repeat_call(self, A, B) -> RepeatCall | None:
        """The call k(A, B) (out=None, torch's current stream) resolved for every torch A and B
        of this signature (kgen.core.kernel.RepeatCall); None where it launches nothing."""
        shape, plan, device = self._torch_hit(A, B, A.data_ptr(), B.data_ptr(), None)
        if plan is None:
            return None
        run = self._run

        def go(pa: int, pb: int, pc: int, alpha: float, stream: int) -> None:
            ensure_context()
            run(plan, pa, pb, pc, alpha, 0.0, stream)

        return RepeatCall(go, self._torch_results, shape, None, device, self._live)

    def _torch_plan(self, A, B, out, key) -> tuple:
        """Check a torch call once through the generic views and remember its plan."""
        spec = self.spec
        a, b = runtime.view(A, "A"), runtime.view(B, "B")
        M, K, lda = self._operand(a, "A", spec.layout_a)
        K2, N, ldb = self._operand(b, "B", spec.layout_b)
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        device = runtime.torch_device_index(A, "A")
        for name, t in (("B", B), ("out", out)):
            if t is not None and runtime.torch_device_index(t, name) != device:
                raise ArrayError(f"A is on cuda:{device} but {name} is on {t.device}: pass tensors of one GPU")
        c = runtime.view(out if out is not None else A.new_empty((M, N)), "out")
        ldc = self._output(c, M, N)
        plan = None
        if M and N:
            # A new output is a fresh allocation: 16-byte aligned, row stride N.
            plan = self._launch_plan(M, N, K, lda, ldb, ldc, self._aligned(a.ptr, lda), self._aligned(b.ptr, ldb),
                                     self._aligned(c.ptr, ldc))
        hit = ((M, N), plan, device)
        if len(self._torch_calls) >= 256:
            self._torch_calls.clear()
        self._torch_calls[key] = hit
        return hit

    def _host_layout(self, x, name, layout):
        if not isinstance(x, np.ndarray) or x.ndim != 2:
            raise ArrayError(f"{name} must be a 2-D array, got {getattr(x, 'shape', type(x).__name__)}")
        self._check_dtype(x.dtype, name)
        # Host data is copied anyway, so copy it in the storage order the spec expects.
        return np.ascontiguousarray(x) if layout == "row" else np.asfortranarray(x)

    def _operand(self, v: runtime.DeviceView, name: str, layout: str) -> tuple[int, int, int]:
        """(rows, cols, leading dimension) of a 2-D operand stored as `layout`."""
        if len(v.shape) != 2:
            raise ArrayError(f"{name} must be 2-D, got shape {v.shape}")
        self._check_dtype(v.dtype, name)
        return stored_operand(v.shape, v.strides, name, layout)

    def _output(self, c: runtime.DeviceView, M: int, N: int) -> int:
        if c.shape != (M, N):
            raise ArrayError(f"out has shape {c.shape} but the product is {M}x{N}")
        self._check_dtype(c.dtype, "out")
        rs, cs = c.strides
        if not ((cs == 1 or N <= 1) and (rs >= max(N, 1) or M <= 1)):
            raise ArrayError(f"out must be row-major with unit column stride; got element strides {c.strides}")
        return rs if M > 1 else max(N, 1)


Matmul.kernel_class = MatmulKernel

# Known-wrong variants the template renders for testing the tests (kgen/core/faults.py).
from ..core import faults as _faults  # noqa: E402 - test-only declarations, kept beside the family

_faults.plant("matmul", "skip_last_k_tile", "the K loop stops one tile (BK values of k) early")
_faults.plant("matmul", "edge_guard_off_by_one", "the last row of A inside an edge tile is read as outside the "
              "matrix (zero)")
_faults.plant("matmul", "drop_block_partial", "the split-K reduction leaves out the first K slice's partial")
_faults.plant("matmul", "read_past_row_end", "the repack reads source rows at the packed stride: past the end of "
              "each row when the leading dimension is unaligned")
