"""Exact-arithmetic property tests on the GPU: random specs from each family's search space
and fields, random shapes (1, primes, non-multiples of every tile), data on which every
order of summation is exact (each family's make_exact_inputs; for skinny and tensor-core
products, small integers from exact_operands here), results compared by equality. One
dropped, doubled or misplaced term fails, at any length.

Every input lies inside a guard of poison values (NaN, or an integer that changes the
result) and every output inside a guard of NaN; outputs are poisoned before each launch
and everything outside them must come back unchanged.

The harness (cases, triggers, checks) is shared with tests/test_faults_gpu.py, which plants
known bugs and shows these checks catch each one, and with tests/test_faults_cpu.py, which
runs it on a simulated device."""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import math
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.matmul import DEFAULT_F32, SPLIT_F32, Matmul
from kgen.ops.reduce import STRATEGIES, Reduce
from kgen.ops.skinny import AXPY_SHIFT_MAX_LOAD_BYTES, ITEMSIZE, Skinny, phased_dot
from kgen.ops.skinny import _form as skinny_form
from kgen.ops.tensorcore import A_PITCH_BYTES, A_PITCH_MIN_B_BYTES, A_PITCH_MIN_ROWS, TensorMatmul
from test_reduce_gpu import KINDS as ROUNDING_KINDS

pytestmark = pytest.mark.gpu

MATMUL_EXAMPLES = int(os.environ.get("KGEN_EXACT_MATMUL_EXAMPLES", "160"))
REDUCE_EXAMPLES = int(os.environ.get("KGEN_EXACT_REDUCE_EXAMPLES", "300"))
SKINNY_EXAMPLES = int(os.environ.get("KGEN_EXACT_SKINNY_EXAMPLES", "160"))
TENSOR_EXAMPLES = int(os.environ.get("KGEN_EXACT_TENSOR_EXAMPLES", "160"))
H100 = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024, "multiprocessors": 132}


# ---------------------------------------------------------------------------------
# Drawing case fields: from hypothesis (property tests) or a numpy Generator (rates).
# ---------------------------------------------------------------------------------
class Chooser:
    """One interface over hypothesis' data.draw and a numpy Generator."""

    def __init__(self, data=None, rng=None):
        self.data, self.rng = data, rng

    def pick(self, values, label=None):
        values = list(values)
        if self.data is not None:
            return self.data.draw(st.sampled_from(values), label=label)
        return values[int(self.rng.integers(len(values)))]

    def integer(self, lo: int, hi: int, label=None) -> int:
        if self.data is not None:
            return self.data.draw(st.integers(lo, hi), label=label)
        return int(self.rng.integers(lo, hi + 1))


# ---------------------------------------------------------------------------------
# Device memory: pycuda on the GPU; tests/test_faults_cpu.py supplies a simulated one.
# ---------------------------------------------------------------------------------
class CudaMemory:
    def __init__(self):
        from kgen.core import runtime

        self.drv = runtime.driver()

    def put(self, host: np.ndarray):
        """A new device buffer holding host's bytes: (pointer, owner to keep alive)."""
        host = np.ascontiguousarray(host)
        buf = self.drv.mem_alloc(max(host.nbytes, 256))
        if host.nbytes:
            self.drv.memcpy_htod(buf, host)
        return int(buf), buf

    def get(self, ptr: int, like: np.ndarray) -> np.ndarray:
        out = np.empty_like(like)
        if out.nbytes:
            self.drv.memcpy_dtoh(out, ptr)
        return out


class DeviceArray:
    """A device array view by __cuda_array_interface__: any pointer, shape and strides."""

    def __init__(self, ptr: int, shape: tuple, strides: tuple | None, dtype, owner):
        self.ptr, self.shape, self.dtype, self.owner = ptr, tuple(shape), np.dtype(dtype), owner
        self.strides = strides  # in elements

    @property
    def __cuda_array_interface__(self):
        item = self.dtype.itemsize
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None if self.strides is None else tuple(s * item for s in self.strides)}


def _poison(dtype) -> np.ndarray:
    return np.array(np.nan if np.dtype(dtype).kind == "f" else -123456, dtype=dtype)


# ---------------------------------------------------------------------------------
# Reduce
# ---------------------------------------------------------------------------------
def _has_exact_inputs(kind) -> bool:
    fields, dtype, acc = kind
    problem = {"n": 3, "accumulate": acc, **fields}
    try:
        Reduce.make_exact_inputs(problem, dtype, np.random.default_rng(0))
    except ValueError:
        return False
    return True


# (op fields, dtype, accumulate): the kinds the rounding tests reduce, where exact data
# exists, and a few more maps and combines.
REDUCE_KINDS = [k for k in ROUNDING_KINDS if _has_exact_inputs(k)] + [
    (dict(op="custom", map_expr="x * y + 1", combine="a + b", identity="0"), "float32", "native"),
    (dict(op="custom", map_expr="x * x", combine="a + b", identity="0"), "int32", "native"),
    (dict(op="custom", map_expr="x", combine="a * b", identity="1"), "float32", "native"),
]


def reduce_pool() -> list[Reduce]:
    """Every strategy with every kind, with seeded-random block sizes, items, vector loads,
    grid caps and grid_stride; plus small blocks (one warp) and one-block grids."""
    rng = random.Random(20261123)
    pool = []
    for strategy in STRATEGIES:
        for fields, dtype, acc in REDUCE_KINDS:
            if strategy == "atomic" and acc == "kahan":
                continue
            stride = rng.random() < 0.75
            pool.append(Reduce(dtype=dtype, strategy=strategy, accumulate=acc, **fields,
                               block_size=rng.choice([32, 64, 128, 256, 512, 1024]),
                               items_per_thread=rng.choice([1, 2, 3, 4, 8]), vector_loads=rng.random() < 0.7,
                               grid_stride=stride, grid_size=rng.choice([0, 0, 1, 7, 300]) if stride else 0))
    for strategy in STRATEGIES:
        pool.append(Reduce(op="dot", strategy=strategy, block_size=32, items_per_thread=1))
        pool.append(Reduce(op="sum", strategy=strategy, block_size=64, items_per_thread=2, grid_size=1))
    return pool


def reduce_problem(spec: Reduce, n: int) -> dict:
    problem = {"n": n, "op": spec.op, "accumulate": spec.accumulate}
    if spec.op == "custom":
        problem.update(map_expr=spec.map_expr, combine=spec.combine, identity=spec.identity)
    return problem


PRIMES = [2, 3, 5, 7, 13, 31, 127, 509, 1021, 4093, 65521, 131071, 1048573]


def reduce_case(spec: Reduce, choose: Chooser) -> dict:
    kind = choose.pick(["listed", "small", "medium", "tiles"], "length kind")
    if kind == "listed":
        n = choose.pick([0, 1] + PRIMES, "n")
    elif kind == "small":
        n = choose.integer(1, 5000, "n")
    elif kind == "medium":
        n = choose.integer(5000, 400_000, "n")
    else:
        n = max(1, choose.integer(1, 200, "tiles") * 2048 + choose.pick([-1, 1, 3], "past"))
    if n == 0 and spec.empty_is_undefined:
        n = 1
    return dict(n=n, off_x=choose.pick([0, 0, 1, 2, 3], "x offset"), off_y=choose.pick([0, 1, 2], "y offset"),
                seed=choose.integer(0, 2 ** 32 - 1, "seed"))


def _guard_value(spec: Reduce):
    """What lies around the inputs: a value that changes the result if a kernel reads it."""
    kind = spec.combine_kind
    if spec.dtype == "int32":
        return {"min": -(2 ** 31) + 1, "max": 2 ** 31 - 2}.get(kind, 1_000_003)
    return {"min": -np.inf, "max": np.inf}.get(kind, np.nan)


def reduce_head(spec: Reduce, offsets: list[int], n: int) -> int:
    """ReduceKernel._head for inputs starting `offsets` elements past a 256-byte boundary."""
    if spec.vec == 1:
        return -1
    item = np.dtype(spec.dtype).itemsize
    heads = {((-off * item) % 16) // item for off in offsets}
    return min(heads.pop(), n) if len(heads) == 1 else -1


def reduce_offsets(spec: Reduce, case: dict) -> list[int]:
    return [case["off_x"], case["off_y"]][:spec.arity]


def reduce_triggers(fault: str, spec: Reduce, case: dict, sms: int = 132) -> bool:
    """Whether `fault` must change the result of this case (exact positive sums)."""
    n = case["n"]
    if spec.combine_kind != "sum" or n < 1:
        return False
    head = reduce_head(spec, reduce_offsets(spec, case), n)
    if fault == "drop_block_partial":
        return True
    if fault == "edge_guard_off_by_one":
        return head >= 0
    if fault == "count_tail_twice":
        return head >= 0 and (n - head) % spec.vec > 0
    if fault == "skip_last_warp_final_merge":
        if spec.strategy == "atomic":
            return False
        block, items = spec.block_size, spec.items_per_thread
        grid = spec.launch_geometry(n, sms, vectorized=head >= 0)[0]
        loads = (n - head) // spec.vec if head >= 0 else n
        scalars = max(head, (n - head) % spec.vec) if head >= 0 else 0
        # Thread (b, t) folds something iff its first load exists or it takes a scalar.
        warps = block // 32
        blocks = np.arange(grid)[:, None]
        first = blocks * block * items + np.arange(warps)[None, :] * 32
        busy = (first < loads) | ((blocks == 0) & (np.arange(warps)[None, :] * 32 < scalars))
        partials = busy.reshape(-1) if spec.strategy == "warp_shuffle" else busy.any(axis=1)
        index = np.nonzero(partials)[0]
        # The final block's last warp folds the partials whose index is >= block - 32, mod block.
        return bool(np.any(index % block >= block - 32))
    return True


def check_reduce(kernel, spec: Reduce, case: dict, memory) -> str | None:
    """Run `kernel` on the case's exact data, twice; None if both results are exact."""
    rng = np.random.default_rng(case["seed"])
    n = case["n"]
    inputs = Reduce.make_exact_inputs(reduce_problem(spec, n), spec.dtype, rng)
    expected = np.asarray(spec.reference(*inputs)).astype(spec.dtype)
    guard = _guard_value(spec)
    views, keep = [], []
    for x, off in zip(inputs, reduce_offsets(spec, case)):
        host = np.full(off + n + 16, guard, dtype=spec.dtype)
        host[off:off + n] = x
        ptr, owner = memory.put(host)
        keep.append(owner)
        views.append(DeviceArray(ptr + off * host.itemsize, (n,), (1,), spec.dtype, owner))
    poison = _poison(spec.dtype)
    for attempt in ("first", "second"):
        out_ptr, out_owner = memory.put(poison.reshape(1))
        out = DeviceArray(out_ptr, (), None, spec.dtype, out_owner)
        kernel(*views, out=out)
        got = memory.get(out_ptr, poison.reshape(1))[0]
        if not got == expected:  # NaN compares unequal
            return (f"{spec.to_json()} n={n} offsets={reduce_offsets(spec, case)} ({attempt} call): "
                    f"got {got!r}, exact result {expected!r}")
    return None


# ---------------------------------------------------------------------------------
# Matmul
# ---------------------------------------------------------------------------------
def matmul_pool() -> list[Matmul]:
    """Textbook and tuned specs covering every field that changes the code: both mappings
    of the global-memory kernel, one and two register stages, cp.async pipelines, warp tiles,
    A row-major in shared memory, fragments prefetched, interior fast paths on and off,
    vector loads with and without repack, split-K, tail_split_k; float32 and float64; a
    seeded sample of the search spaces of a square, a skinny, an unaligned and a large
    problem. Layouts are drawn per spec."""
    rng = random.Random(20261123)
    must = [
        Matmul(),
        Matmul(tile=(32, 8, 16), mapping="1d"),
        Matmul(tile=(64, 64, 8), thread_tile=(4, 4)),
        Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True, stages=1),
        Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True, stages=2, smem_a_transposed=False),
        Matmul(**DEFAULT_F32),
        Matmul(**dict(DEFAULT_F32, interior_fast_path=False)),
        Matmul(**dict(SPLIT_F32, split_k=4)),
        Matmul(**dict(SPLIT_F32, split_k=3, repack=False)),
        Matmul(tile=(128, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), shared_memory=True, vector_loads=True,
               smem_pad=4, stages=3, async_copy=True, prefetch_fragments=True, interior_fast_path=True),
        Matmul(tile=(64, 64, 8), thread_tile=(8, 4), warp_tile=(32, 32), shared_memory=True, vector_loads=True,
               stages=2, prefetch_fragments=True, repack=True, tail_split_k=3),
        Matmul.default_spec({"M": 512, "N": 512, "K": 512}, "float64"),
        Matmul(dtype="float64", tile=(64, 64, 8), thread_tile=(4, 4), warp_tile=(16, 32), shared_memory=True,
               vector_loads=True, smem_pad=2, stages=3, async_copy=True, split_k=4),
    ]
    sampled = {}
    for dtype, count in (("float32", 18), ("float64", 5)):
        space = {}
        for problem in ({"M": 512, "N": 512, "K": 512}, {"M": 127, "N": 4096, "K": 4096},
                        {"M": 1000, "N": 1001, "K": 999}, {"M": 4096, "N": 4096, "K": 4096}):
            for s in Matmul.search_space(problem, dtype):
                if s.prune_reason(problem, H100) is None:
                    space[s.key] = s
        for s in rng.sample(sorted(space.values(), key=lambda s: s.key), min(count, len(space))):
            sampled[s.key] = s
    layouts = [("row", "row"), ("col", "row"), ("row", "col"), ("col", "col")]
    pool = []
    for i, s in enumerate(must + list(sampled.values())):
        a, b = layouts[i % 4] if i < 8 else rng.choice(layouts)
        pool.append(s.replace(layout_a=a, layout_b=b))
    return pool


SIZES = [1, 2, 3, 5, 7, 31, 127, 129, 131, 257, 263]


def matmul_case(spec: Matmul, choose: Chooser) -> dict:
    BM, BN, BK = spec.tile
    tail = spec.tail_split_k > 1 and choose.pick([True, True, False], "force a tail split")
    if tail:  # shapes whose tail plan engages for some count of resident blocks
        M = choose.integer(2 * BM + 1, 4 * BM, "M")
        N = choose.integer(1, 2 * BN, "N")
        K = choose.integer(6 * BK + 1, 24 * BK, "K")
    else:
        def size(label):
            return choose.pick(SIZES, label) if choose.pick([True, False], label + " listed") else \
                choose.integer(1, 300, label)

        M, N = size("M"), size("N")
        K = choose.pick([1, size("K"), choose.integer(1, 600, "long K")], "K")
    return dict(M=M, N=N, K=K, tail=tail,
                pad_a=choose.pick([0, 0, 1, 3, 4], "A row padding"),
                pad_b=choose.pick([0, 0, 1, 3, 4], "B row padding"),
                off_a=choose.pick([0, 0, 0, 1, 2], "A offset"), off_b=choose.pick([0, 0, 0, 1, 2], "B offset"),
                pad_c=choose.pick([0, 0, 1, 4], "C row padding"), off_c=choose.pick([0, 0, 1], "C offset"),
                alpha=choose.pick([1.0, 1.0, 2.0, 0.5], "alpha"), beta=choose.pick([0.0, 0.0, 1.0, -2.0], "beta"),
                seed=choose.integer(0, 2 ** 32 - 1, "seed"))


def tail_slots(spec: Matmul, M: int, N: int, K: int) -> int | None:
    """A count of resident blocks for which the tail plan engages (None if none does)."""
    BM, BN, _ = spec.tile
    total = -(-M // BM) * -(-N // BN)
    for slots in range(1, total + 1):
        if spec.tail_plan(M, N, K, slots)[0] > 0:
            return slots
    return None


def matmul_parts(spec: Matmul, case: dict) -> list[tuple[int, int, int, int]]:
    """(first row, rows, K slices, slice length) of each launch, as MatmulKernel._plan."""
    M, N, K = case["M"], case["N"], case["K"]
    tail_rows, tail_ways = 0, 1
    slots = tail_slots(spec, M, N, K) if case["tail"] else None
    if slots is not None:
        tail_rows, tail_ways = spec.tail_plan(M, N, K, slots)
    head = M if not tail_rows else (-(-M // spec.tile[0]) - tail_rows) * spec.tile[0]
    parts = []
    for m0, rows, ways in ((0, head, None), (head, M - head, tail_ways)):
        if rows > 0:
            parts.append((m0, rows, *spec.split_plan(K, ways)))
    return parts


def _storage(spec: Matmul, which: str, case: dict) -> tuple[int, int, int, bool]:
    """(storage rows, contiguous columns, leading dimension the kernel sees, column-major)."""
    col = (spec.layout_a if which == "A" else spec.layout_b) == "col"
    return (*stored_shape(which, case, col), col)


def stored_shape(which: str, case: dict, col: bool) -> tuple[int, int, int]:
    """(storage rows, contiguous columns, leading dimension) of operand A (M x K) or B
    (K x N), row-major or (col) column-major, with the case's row padding."""
    M, N, K = case["M"], case["N"], case["K"]
    rows, cols = ((K, M) if col else (M, K)) if which == "A" else ((N, K) if col else (K, N))
    ld = cols + case["pad_a" if which == "A" else "pad_b"] if rows > 1 else cols
    return rows, cols, ld


def matmul_triggers(fault: str, spec: Matmul, case: dict) -> bool:
    """Whether `fault` must change the result of this case (exact positive products)."""
    N, K = case["N"], case["K"]
    BM, BN, BK = spec.tile
    parts = matmul_parts(spec, case)
    if fault == "skip_last_k_tile":
        return True
    if fault == "edge_guard_off_by_one":
        if not spec.shared_memory or not spec.interior_fast_path:
            return True
        m0, rows, splits, chunk = parts[-1]
        lengths = [min(chunk, K - z * chunk) for z in range(splits)]
        return rows % BM != 0 or N % BN != 0 or any(length % BK for length in lengths)
    if fault == "drop_block_partial":
        return any(splits > 1 for _, _, splits, _ in parts)
    if fault == "read_past_row_end":
        if not spec.repack:
            return False
        item = np.dtype(spec.dtype).itemsize
        for which in ("A", "B"):
            rows, cols, ld, _ = _storage(spec, which, case)
            off = case["off_a" if which == "A" else "off_b"]
            repacked = (off * item) % 16 != 0 or ld % spec.vec != 0
            if repacked and rows > 1 and ld != -(-cols // spec.vec) * spec.vec:
                return True
        return False
    return True


def check_matmul(kernel, spec: Matmul, case: dict, memory) -> str | None:
    """Run `kernel` on the case's exact data; None if C is exact and nothing around C, A or
    B changed. The kernel's tail plan must be set up by the caller (case["tail"])."""
    rng = np.random.default_rng(case["seed"])
    A, B = Matmul.make_exact_inputs({"M": case["M"], "N": case["N"], "K": case["K"]}, spec.dtype, rng)
    unit = float(A.min()) * float(B.min())  # every product is a multiple of this unit
    return check_product(kernel, memory, f"{spec.to_json()} case={case}", case, (A, B),
                         (spec.layout_a == "col", spec.layout_b == "col", False), spec.dtype, unit, rng,
                         guard_per_row=spec.vec)


def check_product(kernel, memory, what: str, case: dict, operands: tuple, columns: tuple, out_dtype, unit: float, rng,
                  guard_per_row: int) -> str | None:
    """Run kernel(A, B, out=C, alpha=, beta=) on exact operands; None if C is exact and
    nothing around C changed.

    A and B are stored row-major or column-major (columns: A, B, C column-major?) at the
    case's offsets and row paddings, padding and guard poisoned (NaN): guard_per_row
    elements per stored row past the end, for kernels that may read there (repacks).
    C (out_dtype) is stored the same way (pad_c, off_c) inside a guard of NaN; with beta
    it starts as small multiples of `unit` drawn from rng, else as NaN."""
    M, N = case["M"], case["N"]
    views, keep = {}, []
    for which, logical, col in (("A", operands[0], columns[0]), ("B", operands[1], columns[1])):
        dtype = logical.dtype
        rows, cols, ld = stored_shape(which, case, col)
        off = case["off_a" if which == "A" else "off_b"]
        stored = logical.T if col else logical  # storage rows x contiguous columns
        host = np.full(off + rows * ld + rows * guard_per_row + 64, np.nan, dtype)
        host[off:off + rows * ld].reshape(rows, ld)[:, :cols] = stored
        ptr, owner = memory.put(host)
        keep.append(owner)
        strides = (1, ld) if col else (ld, 1)
        views[which] = DeviceArray(ptr + off * dtype.itemsize, logical.shape, strides, dtype, owner)
    dtype = np.dtype(out_dtype)
    item = dtype.itemsize
    C0 = rng.integers(1, 17, (M, N)).astype(np.float64) * unit
    alpha, beta = case["alpha"], case["beta"]
    A, B = operands
    expected = (alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C0).astype(dtype)
    c_col = columns[2]
    lines, length = (N, M) if c_col else (M, N)
    ldc = length + case["pad_c"] if lines > 1 else length
    start = 64 + case["off_c"]
    host = np.full(start + lines * ldc + 64, np.nan, dtype)
    region = host[start:start + lines * ldc].reshape(lines, ldc)[:, :length]
    if beta != 0.0:
        region[...] = C0.T if c_col else C0
    c_ptr, c_owner = memory.put(host)
    out = DeviceArray(c_ptr + start * item, (M, N), (1, ldc) if c_col else (ldc, 1), dtype, c_owner)
    kernel(views["A"], views["B"], out=out, alpha=alpha, beta=beta)
    got = memory.get(c_ptr, host)
    result = got[start:start + lines * ldc].reshape(lines, ldc)[:, :length]
    if c_col:
        result = result.T
    if not np.array_equal(result, expected):
        bad = np.argwhere(~(result == expected))
        m, n = (int(v) for v in bad[0])
        return f"{what}: {len(bad)} result(s) differ, C[{m},{n}] = {result[m, n]!r}, exact {expected[m, n]!r}"
    outside = np.ones(host.shape, bool)
    outside[start:start + lines * ldc].reshape(lines, ldc)[:, :length] = False
    if not np.array_equal(got.view(np.uint8).reshape(host.size, item)[outside],
                          host.view(np.uint8).reshape(host.size, item)[outside]):
        return f"{what}: values outside C were written"
    return None


def matmul_kernel_for(spec: Matmul, case: dict, build):
    """The kernel to run `case` with: build(spec) (a fresh one), its resident-block count
    set so that the tail plan engages when the case asks for a tail split."""
    kernel = build(spec)
    if case["tail"]:
        slots = tail_slots(spec, case["M"], case["N"], case["K"])
        if slots is not None:
            # The plan reads the device's resident blocks per entry point; a fresh kernel
            # object takes another count for this test only.
            kernel._slots = {"kgen_matmul": slots, "kgen_matmul_vec": slots}
    return kernel


# ---------------------------------------------------------------------------------
# Exact operands for the families without make_exact_inputs (skinny, tensor cores)
# ---------------------------------------------------------------------------------
# Largest sum of products kept exact: in the accumulator (float32: 2^24, with room for
# alpha and beta), and for the output type's integers, so that a lost term changes C.
EXACT_SUM = {"float16": 2 ** 9, "float32": 2 ** 22, "float64": 2 ** 50}
EDGE_ONES = 8  # sparse operands: k columns of ones at each end of K


def exact_operands(M: int, N: int, K: int, dtype: str, out_dtype: str, rng) -> tuple[np.ndarray, np.ndarray]:
    """A (M x K) and B (K x N) of small integers whose products' sums stay within what the
    accumulator and the output hold exactly: positive integers up to R where K * R^2 fits,
    else (a float16 output with K past 512) zeros and ones, sparse enough that a sum is
    about half the limit, with ones at both ends of K so that a lost first or last term
    always shows. Any order of summation gives the same, exact result, and the output
    rounds it as numpy does."""
    limit = min(EXACT_SUM[np.dtype(out_dtype).name], EXACT_SUM["float32" if dtype != "float64" else "float64"])
    if K <= limit:
        top = min(2048, max(1, math.isqrt(limit // K)))  # 2048: exact in float16 and TF32
        A, B = rng.integers(1, top + 1, (M, K)), rng.integers(1, top + 1, (K, N))
    else:
        p = math.sqrt((limit - 2 * EDGE_ONES) / (2 * K))
        A, B = (rng.random((M, K)) < p).astype(np.int64), (rng.random((K, N)) < p).astype(np.int64)
        A[:, :EDGE_ONES] = A[:, -EDGE_ONES:] = 1
        B[:EDGE_ONES] = B[-EDGE_ONES:] = 1
    return A.astype(dtype), B.astype(dtype)


def _pad_for(choice, cols: int, vec: int) -> int:
    """Row padding: a number of elements, or "align" (rows start on 16 bytes)."""
    return -(-cols // vec) * vec - cols if choice == "align" else choice


def _operand_placement(case: dict, columns: tuple[bool, bool], vec: int, choose: Chooser) -> None:
    """Offsets and row paddings of A and B in the case (16-byte aligned ones often)."""
    for which, col in zip("AB", columns):
        lower = which.lower()
        case[f"pad_{lower}"] = 0
        _, cols, _ = stored_shape(which, case, col)
        case[f"pad_{lower}"] = _pad_for(choose.pick([0, 0, 1, 3, "align", "align"], f"{which} row padding"), cols, vec)
        case[f"off_{lower}"] = choose.pick([0, 0, 0, 1, 2, vec], f"{which} offset")


def _output_fields(choose: Chooser) -> dict:
    return dict(pad_c=choose.pick([0, 0, 1, 4], "C row padding"), off_c=choose.pick([0, 0, 1], "C offset"),
                alpha=choose.pick([1.0, 1.0, 2.0, 0.5], "alpha"), beta=choose.pick([0.0, 0.0, 1.0, -2.0], "beta"),
                seed=choose.integer(0, 2 ** 32 - 1, "seed"))


# ---------------------------------------------------------------------------------
# Skinny products
# ---------------------------------------------------------------------------------
SKINNY_DTYPES = ("float32", "float64", "float16")  # bfloat16 has no numpy type to place data with


def skinny_pool() -> list[Skinny]:
    """The defaults for 1 to 64 rows and variants of every field that changes the code or
    the plan: each merge, fixed and derived K splits, narrower loads, several vectors per
    lane, odd row counts, small and large blocks; float32, float64 and float16."""
    pool = {}
    for dtype in SKINNY_DTYPES:
        for small in (1, 2, 3, 16, 64):
            s = Skinny.default_spec({"M": small, "N": 4096, "K": 4096}, dtype)
            pool[s.key] = s
        if dtype in ("float16", "bfloat16"):   # the 16-bit tensor-core forms
            for rows, tiles, lv, akw, merge in ((8, 2, 2, 8, "two_pass"), (24, 1, 1, 1, "two_pass"),
                                                (5, 1, 1, 2, "single_pass")):
                s = Skinny(dtype=dtype, rows=rows, warp_cols=1, tensor_cores=True, tc_tiles=tiles, lane_vectors=lv,
                           axpy_k_warps=akw, merge=merge)
                pool[s.key] = s
        base = Skinny.default_spec({"M": 8, "N": 4096, "K": 4096}, dtype)
        variants = [dict(merge="two_pass", k_split=3), dict(merge="two_pass", waves=4),
                    dict(k_split=40, threads=128, warp_cols=2, loads=4), dict(vector_bytes=8, lane_vectors=2, loads=4),
                    dict(rows=5, warp_cols=3, k_split=1), dict(rows=2, threads=512, lane_vectors=4, loads=8),
                    dict(vector_bytes=ITEMSIZE[dtype] * 2 if dtype != "float64" else 16, rows=4, waves=1),
                    dict(phased=False), dict(phased=False, k_split=3, merge="two_pass")]
        if dtype != "float16":
            variants += [dict(merge="atomic"), dict(merge="atomic", k_split=7, rows=3)]
        for fields in variants:
            try:
                s = base.replace(**fields)
            except ValueError:
                continue
            pool[s.key] = s
    return list(pool.values())


SKINNY_SIZES = [1, 2, 3, 5, 31, 33, 127, 129, 255, 257, 1000, 1031, 2049]
SKINNY_K = [1, 2, 3, 7, 9, 31, 33, 127, 255, 257, 1025, 4099]


def skinny_case(spec: Skinny, choose: Chooser) -> dict:
    rows = spec.rows
    if choose.pick([True, False], "small listed"):
        small = choose.pick(sorted({1, 2, 3, max(1, rows - 1), rows, rows + 1, 2 * rows + 1}), "small")
    else:
        small = choose.integer(1, 70, "small")
    large = choose.pick(SKINNY_SIZES, "large") if choose.pick([True, False], "large listed") else \
        choose.integer(1, 3000, "large")
    K = choose.pick(SKINNY_K, "K") if choose.pick([True, False], "K listed") else choose.integer(1, 6000, "K")
    few_cols = choose.pick([False, True], "few columns")
    M, N = (large, small) if few_cols else (small, large)
    case = dict(M=M, N=N, K=K, a_col=choose.pick([False, True], "A column-major"),
                b_col=choose.pick([False, True], "B column-major"),
                c_col=choose.pick([False, False, True], "C column-major"),
                slots=choose.pick([1, 8, 132, 264, 1056], "resident blocks"))
    _operand_placement(case, (case["a_col"], case["b_col"]), 16 // ITEMSIZE[spec.dtype], choose)
    case.update(_output_fields(choose))
    return case


def skinny_plan(spec: Skinny, case: dict, sms: int = 132) -> dict:
    """What SkinnyKernel._plan decides for the case (pointers on 256 bytes plus the case's
    offsets, the case's count of resident blocks): the large operand's form and load
    width, and the K slabs."""
    M, N, K = case["M"], case["N"], case["K"]
    strides = {}
    for which in "AB":
        col = case["a_col" if which == "A" else "b_col"]
        ld = stored_shape(which, case, col)[2]
        strides[which] = (1, ld) if col else (ld, 1)
    swap = M > N
    if not swap:
        R, NC, (l_k, l_n), off = M, N, strides["B"], case["off_b"]
    else:
        R, NC, (l_n, l_k), off = N, M, strides["A"], case["off_a"]
    form, ldl = skinny_form(NC, K, l_k, l_n)
    tc = spec.tensor_cores and (form == "dot" or spec.runs_tc_axpy)
    widths = spec.widths() if form == "dot" or tc else spec.axpy_widths()
    width = next((w for w in widths if off % w == 0 and ldl % w == 0), 1)
    classes, heads = 0, [0]
    # Rows of 2- or 4-byte loads of a 16-bit row-major L: the _shift entry, whose block is the
    # widest loads' columns.
    shift = (form == "axpy" and not tc and spec.axpy_shifts
             and width * ITEMSIZE[spec.dtype] <= AXPY_SHIFT_MAX_LOAD_BYTES)
    if shift:
        width = spec.axpy_vec
    if form == "dot" and phased_dot(spec, width):
        # The phased entry: class g's columns start (off + g ldl) mod vec elements past a
        # boundary, and its slabs start past a head that reaches the next one.
        V = spec.vec
        width, classes = V, V // math.gcd(ldl % V, V)
        heads = [min((V - (off + g * ldl) % V) % V, K) for g in range(min(classes, NC))]
    if tc:
        form = "tc_" + form
    g = spec.geometry(form, width, R, NC, K, case["slots"], sms, max(classes, 1))
    return dict(swap=swap, R=R, NC=NC, form=form, width=width, splits=g["splits"], ks=g["ks"], classes=classes,
                heads=heads, shift=shift)


def skinny_triggers(fault: str, spec: Skinny, case: dict, sms: int = 132) -> bool:
    """Whether `fault` must change the result of this case (exact non-negative products)."""
    plan = skinny_plan(spec, case, sms)
    if fault == "drop_last_k_slab":
        return any(h < case["K"] and (case["K"] - h) % plan["ks"] != 0 for h in plan["heads"])
    if fault == "skip_vector_tail":
        # Tensor-core forms: the dot form's last partial window reads k in groups of 4
        # whatever the load width; the axpy form's lanes read tc_axpy_tiles columns.
        if plan["form"] == "tc_dot" and plan["classes"]:
            return any(h < case["K"] and (case["K"] - h) % 4 != 0 for h in plan["heads"])
        if plan["form"] == "tc_dot":
            return case["K"] % (4 if spec.dtype == "float32" else 8) != 0
        if plan["form"] == "tc_axpy":
            return plan["NC"] % spec.tc_axpy_tiles != 0
        if plan["shift"]:
            # The _shift entry reads its last column tile element by element (whatever NC).
            return True
        width = plan["width"]
        if plan["classes"]:
            return any(h < case["K"] and (case["K"] - h) % width != 0 for h in plan["heads"])
        return width > 1 and (case["K"] if plan["form"] == "dot" else plan["NC"]) % width != 0
    if fault == "drop_block_partial":
        return plan["splits"] > 1
    return True


def check_skinny(kernel, spec: Skinny, case: dict, memory) -> str | None:
    rng = np.random.default_rng(case["seed"])
    operands = exact_operands(case["M"], case["N"], case["K"], spec.dtype, spec.dtype, rng)
    return check_product(kernel, memory, f"{spec.to_json()} case={case}", case, operands,
                         (case["a_col"], case["b_col"], case["c_col"]), spec.dtype, 1.0, rng, guard_per_row=0)


def skinny_kernel_for(spec: Skinny, case: dict, build):
    """build(spec) (a fresh kernel) planning with the case's count of resident blocks."""
    kernel = build(spec)
    kernel._slots = {f"kgen_skinny_{form}_v{w}": case["slots"]
                     for form, widths in (("dot", spec.widths()), ("axpy", spec.axpy_widths()),
                                          ("tc_dot", spec.widths()), ("tc_axpy", spec.widths())) for w in widths}
    kernel._slots.update({f"kgen_skinny_{form}_phased_c{c}": case["slots"] for form in ("dot", "tc_dot")
                          for c in spec.widths()})
    kernel._slots["kgen_skinny_axpy_shift"] = case["slots"]
    return kernel


# ---------------------------------------------------------------------------------
# Tensor-core products
# ---------------------------------------------------------------------------------
def tensor_pool() -> list[TensorMatmul]:
    """float16 (float16 and float32 output), TF32 and float64 specs covering the pipeline
    depths, both shared layouts, both rasters, split-K, repack on and off, every operand
    layout; plus the defaults and a seeded sample of the search spaces."""
    rng = random.Random(20261125)
    must = [
        TensorMatmul(),
        TensorMatmul(out_dtype="float32", tile=(64, 64, 32), warp_tile=(32, 32), stages=4, smem_layout="pad",
                     layout_a="col"),
        TensorMatmul(tile=(64, 128, 64), warp_tile=(32, 64), stages=2, layout_b="col", raster="col", raster_group=4),
        TensorMatmul(tile=(64, 64, 32), warp_tile=(32, 32), stages=4, split_k=4, layout_a="col", layout_b="col"),
        TensorMatmul(tile=(64, 64, 32), warp_tile=(32, 32), stages=3, repack=False, split_k=3),
        TensorMatmul(tile=(32, 64, 16), warp_tile=(16, 32), stages=5, repack=False, layout_b="col", raster_group=1),
        TensorMatmul(dtype="float32", tf32=True, tile=(128, 128, 32), warp_tile=(64, 64), stages=3, smem_layout="pad"),
        TensorMatmul(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                     split_k=4, layout_b="col"),
        TensorMatmul(dtype="float32", tf32=True, tile=(64, 64, 32), warp_tile=(32, 32), stages=2, repack=False,
                     layout_a="col", smem_layout="pad"),
        TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad"),
        TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=3, smem_layout="pad", split_k=4,
                     layout_a="col"),
        TensorMatmul(dtype="float64", tile=(32, 64, 8), warp_tile=(16, 32), stages=5, smem_layout="pad", repack=False,
                     layout_b="col"),
        # K slices merged in a thread block cluster by the mma.sync kernel (sm_90): float64 of
        # either B order, B's elements copied one by one, and float32 sums (TF32)
        TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), stages=3, smem_layout="pad",
                     mma_shape="m16n8k16", min_blocks=3, split_k=3, split_merge="cluster", layout_b="col"),
        TensorMatmul(dtype="float64", tile=(32, 64, 16), warp_tile=(16, 32), stages=4, smem_layout="pad",
                     mma_shape="m16n8k8", split_k=2, split_merge="cluster", repack=False),
        TensorMatmul(dtype="float32", tf32=True, tile=(64, 64, 16), warp_tile=(32, 32), stages=4, smem_layout="pad",
                     split_k=4, split_merge="cluster", layout_b="col"),
        # K slices merged in a thread block cluster (the wgmma kernel; sm_90 only)
        TensorMatmul(tile=(64, 128, 64), warp_tile=(64, 128), stages=4, instruction="wgmma", split_k=4,
                     split_merge="cluster", layout_b="col"),
        # A's rows as the wgmma N: K slices in clusters (K-major B) and in a workspace (N-major B)
        TensorMatmul(tile=(16, 64, 64), warp_tile=(16, 64), stages=4, instruction="wgmma", swap_ab=True, split_k=4,
                     split_merge="cluster", layout_b="col"),
        TensorMatmul(tile=(40, 128, 64), warp_tile=(40, 64), stages=3, instruction="wgmma", swap_ab=True, split_k=3),
        # B row-major read by the producer threads at any alignment, K slices in a cluster
        TensorMatmul(tile=(16, 64, 64), warp_tile=(16, 64), stages=4, instruction="wgmma", swap_ab=True, split_k=2,
                     split_merge="cluster", b_realign=True),
    ]
    pool = {s.key: s for s in must}
    for dtype in ("float16", "float32", "float64"):
        for problem in ({"M": 512, "N": 512, "K": 512}, {"M": 127, "N": 1000, "K": 4096}):
            s = TensorMatmul.default_spec(problem, dtype)
            pool[s.key] = s
        space = sorted((s for s in TensorMatmul.search_space({"M": 1000, "N": 1001, "K": 2048}, dtype)
                        if s.prune_reason({"M": 1000, "N": 1001, "K": 2048}, H100) is None), key=lambda s: s.key)
        for s in rng.sample(space, min(3, len(space))):
            changes = dict(layout_a=rng.choice(["row", "col"]), layout_b=rng.choice(["row", "col"]),
                           repack=rng.random() < 0.6)
            try:
                s = s.replace(**changes)
            except ValueError:
                pass  # a swizzle the other layout's rows do not allow: the sampled spec as it is
            pool[s.key] = s
    return list(pool.values())


TENSOR_K = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 127, 129, 255, 257]


def tensor_case(spec: TensorMatmul, choose: Chooser) -> dict:
    BK = spec.tile[2]

    def size(label):
        return choose.pick(SIZES, label) if choose.pick([True, False], label + " listed") else \
            choose.integer(1, 300, label)

    M, N = size("M"), size("N")
    kind = choose.pick(["listed", "short", "long"], "K kind")
    if kind == "listed":
        K = choose.pick(TENSOR_K, "K")
    elif kind == "short":
        K = choose.integer(1, 300, "K")
    else:  # past the pipeline's depth in every K slice
        K = choose.integer(BK * spec.stages + 1, BK * (spec.stages + 2) * max(spec.split_k, 1) + 3 * BK, "K")
    case = dict(M=M, N=N, K=K)
    _operand_placement(case, (spec.layout_a == "col", spec.layout_b == "col"), spec.vec, choose)
    case.update(_output_fields(choose))
    return case


def tensor_plan(spec: TensorMatmul, case: dict) -> dict:
    """What TensorMatmulKernel._plan decides for the case (pointers on 256 bytes plus the
    case's offsets): per operand (storage rows, columns, leading dimension, 16-byte copies
    allowed, copied first, copied transposed (TF32 wgmma: K-major), packed leading dimension
    of the copy), whether the 16-byte entry points run, which entry point, and the K slices."""
    operands = {}
    for which in "AB":
        col = (spec.layout_a if which == "A" else spec.layout_b) == "col"
        rows, cols, ld = stored_shape(which, case, col)
        ok = case["off_" + which.lower()] % spec.vec == 0 and ld % spec.vec == 0
        transposed = spec.transposes(which) and case["K"] > 0
        in_place = which == "B" and spec.b_realign   # the producer threads read any alignment
        # The wgmma kernel copies A at a 128-byte pitch, and the 16-bit transposed tiles copy an
        # aligned A to it too from A_PITCH_MIN_ROWS rows against a B of A_PITCH_MIN_B_BYTES.
        wide = which == "A" and spec.wgmma and not transposed
        item = ITEMSIZE[spec.dtype]
        widen = (wide and spec.swap_ab and item == 2 and case["K"] > 0 and (ld * item) % A_PITCH_BYTES != 0
                 and case["M"] >= A_PITCH_MIN_ROWS and case["N"] * case["K"] * item >= A_PITCH_MIN_B_BYTES)
        per = max(spec.vec, A_PITCH_BYTES // item) if wide else spec.vec
        operands[which] = dict(rows=rows, cols=cols, ld=ld, ok=ok, transposed=transposed,
                               repacked=transposed or widen or (spec.repack and not ok and not in_place),
                               ldd=-(-(rows if transposed else cols) // per) * per)
    splits, chunk = spec.split_plan(case["K"])
    aligned = all(o["ok"] or o["repacked"] for o in operands.values())
    entry = "kgen_tc_wgmma" if spec.wgmma else ("kgen_tc_matmul" if aligned else "kgen_tc_matmul_elem")
    return dict(operands=operands, aligned=aligned, splits=splits, chunk=chunk, entry=entry)


def tensor_triggers(fault: str, spec: TensorMatmul, case: dict, sms: int = 132) -> bool:
    """Whether `fault` must change the result of this case (exact non-negative products)."""
    plan = tensor_plan(spec, case)
    K, BK = case["K"], spec.tile[2]
    if fault == "skip_last_k_tile":
        # The last tile's stage then holds the tile STAGES before it (of this K slice).
        return -(-min(plan["chunk"], K) // BK) > spec.stages
    if fault == "drop_block_partial":
        return plan["splits"] > 1
    if fault == "k_tail_step_short":
        # mma.sync's plain k loop: a slice whose last tile ends inside a k-step.
        if spec.wgmma or spec.fragments_ahead or spec.edge_mma == "inside":
            return False
        mma_k = spec.mma_mnk[2]
        lengths = [min(plan["chunk"], K - z * plan["chunk"]) for z in range(plan["splits"])]
        return any(length > 0 and length % BK % mma_k for length in lengths)
    if fault == "edge_zero_fill_missing":
        last = (K - (plan["splits"] - 1) * plan["chunk"]) % BK  # k of the last slice's partial tile
        if not plan["aligned"] or last == 0:
            return False
        # From which k of the tile each operand's copies read the matrix's first chunk
        # (a k-major operand zero-fills the partial chunk at the edge correctly); a k with
        # both is multiplied into real outputs (rows and columns 0 of the tile).
        wrong_from = max(-(-last // spec.vec) * spec.vec if spec.k_major(w) else last for w in "AB")
        return wrong_from < BK
    if fault == "read_past_row_end":
        return any(o["repacked"] and not o["transposed"] and o["rows"] > 1 and o["ld"] != o["ldd"]
                   for o in plan["operands"].values())
    return True


def check_tensor(kernel, spec: TensorMatmul, case: dict, memory) -> str | None:
    rng = np.random.default_rng(case["seed"])
    operands = exact_operands(case["M"], case["N"], case["K"], spec.dtype, spec.output_dtype, rng)
    return check_product(kernel, memory, f"{spec.to_json()} case={case}", case, operands,
                         (spec.layout_a == "col", spec.layout_b == "col", False), spec.output_dtype, 1.0, rng,
                         guard_per_row=spec.vec)


# ---------------------------------------------------------------------------------
# Families: what the fault tests and the simulated device use.
# ---------------------------------------------------------------------------------
def _build_plain(spec, case: dict, build):
    return build(spec)


@dataclasses.dataclass(frozen=True)
class Harness:
    pool: callable
    case: callable
    triggers: callable  # (fault name, spec, case, SMs) -> whether the fault must change the result
    check: callable
    needs_fresh_kernel: callable  # case -> whether kgen.build's shared kernel must not be used
    kernel_for: callable = _build_plain  # (spec, case, build) -> the kernel to run the case with


HARNESSES = {
    "reduce": Harness(reduce_pool, reduce_case, reduce_triggers, check_reduce, lambda case: False),
    "matmul": Harness(matmul_pool, matmul_case, lambda fault, spec, case, sms=132: matmul_triggers(fault, spec, case),
                      check_matmul, lambda case: case["tail"], matmul_kernel_for),
    # Every skinny case plans for its own count of resident blocks: a fresh kernel each time.
    "skinny": Harness(skinny_pool, skinny_case, skinny_triggers, check_skinny, lambda case: True, skinny_kernel_for),
    "tensor_matmul": Harness(tensor_pool, tensor_case, tensor_triggers, check_tensor, lambda case: False),
}


def run_case(family: str, spec, case: dict, memory, build) -> str | None:
    """Check one case with the kernel build(spec) gives (a fresh one when the case changes
    the kernel's plan)."""
    harness = HARNESSES[family]
    return harness.check(harness.kernel_for(spec, case, build), spec, case, memory)


def compile_all(specs, arch=None) -> None:
    """Compile specs in parallel (nvcc dominates); CUDA is started first, in this thread."""
    from kgen.core import runtime
    from kgen.core.kernel import default_arch

    runtime.driver()
    arch = arch or default_arch()
    with cf.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        list(ex.map(lambda s: kgen.compile(s, arch), specs))


def fresh_build(spec):
    from kgen.core import faults

    return faults.build(spec)


# ---------------------------------------------------------------------------------
# The property tests.
# ---------------------------------------------------------------------------------
REDUCE_POOL = reduce_pool()
MATMUL_POOL = matmul_pool()
SKINNY_POOL = skinny_pool()
TENSOR_POOL = tensor_pool()


@pytest.fixture(scope="module")
def built_pools():
    compile_all(REDUCE_POOL + MATMUL_POOL + SKINNY_POOL + TENSOR_POOL)
    return CudaMemory()


def _exact_results_test(family: str, pool: list, examples: int):
    """A property test: `examples` cases of the family's harness on specs drawn from `pool`,
    every result exact."""
    harness = HARNESSES[family]

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def test(built_pools, data):
        spec = data.draw(st.sampled_from(pool), label="spec")
        case = harness.case(spec, Chooser(data))
        build = fresh_build if harness.needs_fresh_kernel(case) else kgen.build
        problem = run_case(family, spec, case, built_pools, build)
        assert problem is None, problem

    test.__name__ = f"test_{family}_results_are_exact"
    return test


test_reduce_results_are_exact = _exact_results_test("reduce", REDUCE_POOL, REDUCE_EXAMPLES)
test_matmul_results_are_exact = _exact_results_test("matmul", MATMUL_POOL, MATMUL_EXAMPLES)
test_skinny_results_are_exact = _exact_results_test("skinny", SKINNY_POOL, SKINNY_EXAMPLES)
test_tensor_matmul_results_are_exact = _exact_results_test("tensor_matmul", TENSOR_POOL, TENSOR_EXAMPLES)


def test_every_tail_spec_engages_its_tail_plan_in_some_case(built_pools):
    # The forced tail plans really run two launches, the second split in K.
    rng = np.random.default_rng(1)
    for spec in (s for s in MATMUL_POOL if s.tail_split_k > 1):
        for _ in range(20):
            case = matmul_case(spec, Chooser(rng=rng))
            if case["tail"] and len(matmul_parts(spec, case)) == 2:
                kernel = matmul_kernel_for(spec, case, fresh_build)
                assert check_matmul(kernel, spec, case, built_pools) is None
                entry = "kgen_matmul_vec" if spec.vector_loads else "kgen_matmul"
                plan = kernel._plan(case["M"], case["N"], case["K"], entry)
                assert len(plan) == 2 and plan[1][3] > 1, (spec.to_json(), case, plan)
                break
        else:
            pytest.fail(f"no drawn case engaged the tail plan of {spec.to_json()}")
