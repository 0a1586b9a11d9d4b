"""Exact-arithmetic property tests on the GPU: random specs from each family's search space
and fields, random shapes (1, primes, non-multiples of every tile), data on which every
order of summation is exact (each family's make_exact_inputs), results compared by
equality. One dropped, doubled or misplaced term fails, at any length.

Every input lies inside a guard of poison values (NaN, or an integer that changes the
result) and every output inside a guard of NaN; outputs are poisoned before each launch
and everything outside them must come back unchanged.

The harness (cases, triggers, checks) is shared with tests/test_faults_gpu.py, which plants
known bugs and shows these checks catch each one, and with tests/test_faults_cpu.py, which
runs it on a simulated device."""
from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.matmul import DEFAULT_F32, SPLIT_F32, Matmul
from kgen.ops.reduce import STRATEGIES, Reduce
from test_reduce_gpu import KINDS as ROUNDING_KINDS

pytestmark = pytest.mark.gpu

MATMUL_EXAMPLES = int(os.environ.get("KGEN_EXACT_MATMUL_EXAMPLES", "160"))
REDUCE_EXAMPLES = int(os.environ.get("KGEN_EXACT_REDUCE_EXAMPLES", "300"))
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
    M, N, K = case["M"], case["N"], case["K"]
    col = (spec.layout_a if which == "A" else spec.layout_b) == "col"
    rows, cols = ((K, M) if col else (M, K)) if which == "A" else ((N, K) if col else (K, N))
    ld = cols + case["pad_a" if which == "A" else "pad_b"] if rows > 1 else cols
    return rows, cols, ld, col


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
    M, N, K = case["M"], case["N"], case["K"]
    rng = np.random.default_rng(case["seed"])
    A, B = Matmul.make_exact_inputs({"M": M, "N": N, "K": K}, spec.dtype, rng)
    dtype = np.dtype(spec.dtype)
    item = dtype.itemsize
    views, keep = {}, []
    for which, logical in (("A", A), ("B", B)):
        rows, cols, ld, col = _storage(spec, which, case)
        off = case["off_a" if which == "A" else "off_b"]
        stored = logical.T if col else logical  # storage rows x contiguous columns
        host = np.full(off + rows * ld + rows * spec.vec + 64, np.nan, dtype)
        host[off:off + rows * ld].reshape(rows, ld)[:, :cols] = stored
        ptr, owner = memory.put(host)
        keep.append(owner)
        strides = (1, ld) if col else (ld, 1)
        views[which] = DeviceArray(ptr + off * item, logical.shape, strides, dtype, owner)
    unit = float(A.min()) * float(B.min())  # every product is a multiple of this unit
    C0 = rng.integers(1, 17, (M, N)).astype(np.float64) * unit
    alpha, beta = case["alpha"], case["beta"]
    expected = (alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C0).astype(dtype)
    ldc = N + case["pad_c"] if M > 1 else N
    start = 64 + case["off_c"]
    host = np.full(start + M * ldc + 64, np.nan, dtype)
    region = host[start:start + M * ldc].reshape(M, ldc)
    if beta != 0.0:
        region[:, :N] = C0
    c_ptr, c_owner = memory.put(host)
    out = DeviceArray(c_ptr + start * item, (M, N), (ldc, 1), dtype, c_owner)
    kernel(views["A"], views["B"], out=out, alpha=alpha, beta=beta)
    got = memory.get(c_ptr, host)
    what = f"{spec.to_json()} case={case}"
    result = got[start:start + M * ldc].reshape(M, ldc)[:, :N]
    if not np.array_equal(result, expected):
        bad = np.argwhere(~(result == expected))
        m, n = (int(v) for v in bad[0])
        return f"{what}: {len(bad)} result(s) differ, C[{m},{n}] = {result[m, n]!r}, exact {expected[m, n]!r}"
    outside = np.ones(host.shape, bool)
    outside[start:start + M * ldc].reshape(M, ldc)[:, :N] = False
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
# Families: what the fault tests and the simulated device use.
# ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Harness:
    pool: callable
    case: callable
    triggers: callable
    check: callable
    needs_fresh_kernel: callable  # case -> whether kgen.build's shared kernel must not be used


HARNESSES = {
    "reduce": Harness(reduce_pool, reduce_case, reduce_triggers, check_reduce, lambda case: False),
    "matmul": Harness(matmul_pool, matmul_case, lambda fault, spec, case, sms=132: matmul_triggers(fault, spec, case),
                      check_matmul, lambda case: case["tail"]),
}


def run_case(family: str, spec, case: dict, memory, build) -> str | None:
    """Check one case with the kernel build(spec) gives (a fresh one when the case changes
    the kernel's plan)."""
    if family == "matmul":
        return check_matmul(matmul_kernel_for(spec, case, build), spec, case, memory)
    return HARNESSES[family].check(build(spec), spec, case, memory)


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


@pytest.fixture(scope="module")
def built_pools():
    compile_all(REDUCE_POOL + MATMUL_POOL)
    return CudaMemory()


@settings(max_examples=REDUCE_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_reduce_results_are_exact(built_pools, data):
    spec = data.draw(st.sampled_from(REDUCE_POOL), label="spec")
    case = reduce_case(spec, Chooser(data))
    problem = check_reduce(kgen.build(spec), spec, case, built_pools)
    assert problem is None, problem


@settings(max_examples=MATMUL_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_matmul_results_are_exact(built_pools, data):
    spec = data.draw(st.sampled_from(MATMUL_POOL), label="spec")
    case = matmul_case(spec, Chooser(data))
    build = fresh_build if case["tail"] else kgen.build
    problem = check_matmul(matmul_kernel_for(spec, case, build), spec, case, built_pools)
    assert problem is None, problem


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
