"""Tolerances for real-valued data: one probabilistic bound (kgen/core/rounding.py) must pass
every correct result and fail a lost term, in Python and in the standalone programs alike.

The simulations below add float32 numbers in the kernel's order (numpy rounds every float32
addition correctly, as the GPU does): each thread's sequential run over its grid-stride
loads, the warp-shuffle and cross-warp merge trees, then the last block's fold of the block
partials. They run on fixed seeds, so the ratios they assert are reproducible."""
from __future__ import annotations

import math
import shutil
import subprocess
from fractions import Fraction

import numpy as np
import pytest

import kgen
from kgen.core import rounding

CUSTOM = dict(op="custom", map_expr="x * y + 1", combine="a + b", identity="0")
SMS = 132
LENGTHS = [1, 2, 3, 7, 33, 1000, 4099, 65537, (1 << 20) + 3, (1 << 24) + 1, 1 << 28]


def test_fma_contraction_on_a_cancelling_map_is_allowed():
    # x*y close to -1: the GPU's fused x*y+1 (one rounding) and the reference's two
    # roundings differ by far more than eps relative to the tiny result.
    spec = kgen.Reduce(dtype="float64", strategy="warp_shuffle", accumulate="kahan", **CUSTOM)
    x = np.array([1.0 + 2.0 ** -30])
    y = np.array([-(1.0 - 2.0 ** -29)])
    fused = float(Fraction(x[0]) * Fraction(y[0]) + 1)           # exact, then rounded once
    ref = float(spec.reference(x, y))                             # rounded twice
    problem = {"n": 1, **CUSTOM}
    # Without the map's own rounding the bound is far too tight for this cancellation ...
    no_map = spec.fold_error_bound(1, ref, ref * ref) + spec.reference_error_bound(1, ref, ref * ref)
    assert abs(fused - ref) > no_map
    # ... with it (rounding_bound of x * y + 1), the fused result passes.
    assert abs(fused - ref) / abs(ref) <= spec.tolerance_for(problem, (x, y))


def test_exact_maps_under_min_max_allow_nothing():
    spec = kgen.Reduce(op="custom", map_expr="fabs(x)", combine="fmax(a, b)", identity="0", dtype="float64")
    x = np.random.default_rng(0).standard_normal(1000)
    assert spec.tolerance_for({"n": 1000, "op": "custom", "map_expr": "fabs(x)", "combine": "fmax(a, b)",
                               "identity": "0"}, (x,)) == 0.0


@pytest.mark.parametrize("op,dtype", [("min", "float32"), ("max", "float64"), ("sum", "int32"), ("max", "int32")])
def test_min_max_and_integers_are_exact_everywhere(op, dtype):
    spec = kgen.Reduce(op=op, dtype=dtype)
    x = np.arange(1, 1001).astype(dtype)
    problem = {"n": 1000, "op": op}
    assert spec.tolerance_for(problem) == 0.0
    assert spec.tolerance_for(problem, (x,)) == 0.0
    assert spec.tolerance_abs(1000, float(np.abs(x).sum())) == 0.0


def test_a_cancelling_sum_is_judged_by_its_terms_not_its_result():
    spec = kgen.Reduce(op="sum", dtype="float32")
    x = np.array([1e4, -1e4 + 0.5, 0.25], dtype=np.float32)   # result 0.75 from terms of size 1e4
    tol = spec.tolerance_for({"n": 3, "op": "sum"}, (x,))
    ref = float(spec.reference(x))
    one_ulp_of_terms = float(np.spacing(np.float32(1e4)))
    assert one_ulp_of_terms / abs(ref) <= tol          # a correct float32 fold may be this far off
    assert 0.25 / abs(ref) > tol                       # dropping the last term (0.25) is caught


def test_the_bound_grows_with_the_root_of_the_run_and_not_with_the_sum_of_magnitudes():
    # Random-sign terms: the allowed error scales like sqrt(n * (run + depth)), far below the
    # sum of magnitudes times the run length (the worst case), and positive terms of the
    # same size get a bound that follows their total.
    spec = kgen.Reduce(op="sum")
    n = 1 << 26
    signed = spec.fold_error_bound(n, total=0.0, sumsq=float(n))
    positive = spec.fold_error_bound(n, total=float(n), sumsq=float(n))
    grid = spec.launch_geometry(n, SMS)[0]
    run = n / (grid * spec.block_size)
    assert signed < 1e-3 * (2 * run * 2 ** -24 * n)
    assert signed == pytest.approx(rounding.LAMBDA * 2 ** -24 * math.sqrt(n * (run + 20)), rel=0.5)
    assert positive < 2 ** -24 * n * 20


def test_the_issue_case_a_lost_block_of_a_long_dot_fails():
    # The dot of uniform [-100, 100) data at n = 33,554,435: the bound is tens, where one
    # block's share of the terms (63,551 of them) moves the result by tens of thousands.
    spec = kgen.Reduce(op="dot")
    n = 33_554_435
    sigma2 = (200.0 ** 2 / 12) ** 2              # variance of x*y, x and y uniform on [-100, 100)
    bound = spec.fold_error_bound(n, total=math.sqrt(n * sigma2), sumsq=n * sigma2, map_squares=n * sigma2)
    assert bound < 200
    assert math.sqrt(63_551 * sigma2) > 100 * bound    # a lost block: far outside
    assert math.sqrt(128 * sigma2) > 100 * bound       # a lost warp's load (32 lanes x 4): outside


# ---------------------------------------------------------------------------------
# Simulation of the kernel's order of additions in float32.
# ---------------------------------------------------------------------------------
def _tree(values: np.ndarray) -> np.ndarray:
    """Halving merges over the last axis (a power of two): a warp shuffle or a shared tree."""
    v = values.astype(np.float32)
    half = v.shape[-1] // 2
    while half:
        v = (v[..., :half] + v[..., half:2 * half]).astype(np.float32)
        half //= 2
    return v[..., 0]


def _block_merge(values: np.ndarray) -> np.ndarray:
    """Warp shuffles, then warp 0 merges the warps (padded to 32 with the identity)."""
    g, block = values.shape
    warps = _tree(values.reshape(g, block // 32, 32))
    padded = np.zeros((g, 32), np.float32)
    padded[:, :warps.shape[1]] = warps
    return _tree(padded)


class _Terms:
    """Standard normal float32 terms (pairs for a dot), dealt out `count` at a time with
    their exact float64 sums per block of `per_block`. Past 2^22 terms they are windows at
    random offsets into one pool, summed through prefix sums: a cheap stand-in for fresh
    data that keeps each thread's terms random."""

    POOL = 1 << 22

    def __init__(self, n: int, rng, dot: bool, window: int):
        self.rng, self.dot = rng, dot
        self.pooled = n > self.POOL and not dot
        if self.pooled:
            self.pool = rng.standard_normal(4 * window, dtype=np.float32)
            wide = self.pool.astype(np.float64)
            self.prefix = np.concatenate([[0.0], np.cumsum(wide)])
            self.prefix_sq = np.concatenate([[0.0], np.cumsum(wide * wide)])

    def take(self, count: int, per_block: int):
        """(terms, exact sums per block of per_block terms, total, sum of squares)."""
        if self.pooled:
            off = int(self.rng.integers(0, len(self.pool) - count + 1))
            edges = off + np.minimum(np.arange(0, count + per_block, per_block), count)
            blocks = np.diff(self.prefix[edges])
            return (self.pool[off:off + count], blocks, float(self.prefix[off + count] - self.prefix[off]),
                    float(self.prefix_sq[off + count] - self.prefix_sq[off]))
        x = self.rng.standard_normal(count, dtype=np.float32)
        if self.dot:
            y = self.rng.standard_normal(count, dtype=np.float32)
            exact = x.astype(np.float64) * y
            t = (x, y)
        else:
            exact = x.astype(np.float64)
            t = x
        pad = -count % per_block
        blocks = np.concatenate([exact, np.zeros(pad)]).reshape(-1, per_block).sum(axis=1)
        return t, blocks, float(exact.sum()), float(np.square(exact).sum())


def simulate_sum(spec, n: int, rng, dot: bool = False):
    """(float32 result, exact float64 sum, the squared rounding errors of the block partials
    and the final merge, total, sum of squares) of spec (single_pass, vector loads, aligned)
    over standard normal data, one grid-stride step at a time."""
    block, items, vec = spec.block_size, spec.items_per_thread, spec.vec
    grid = spec.launch_geometry(n, SMS, vectorized=True)[0]
    loads = n // vec
    tail = n - loads * vec
    step = grid * block * items * vec
    acc = np.zeros((grid, block), np.float32)
    exact_blocks = np.zeros(grid)
    total = sumsq = 0.0
    source = _Terms(n, rng, dot, step)

    def fold(acc_part, t):
        if dot:  # fused multiply-add: the product is exact in float64, one rounding
            return (acc_part.astype(np.float64) + t[0].astype(np.float64) * t[1]).astype(np.float32)
        return (acc_part + t).astype(np.float32)

    if tail:  # block 0's threads fold the elements after the last whole vector first
        t, sums, s1, s2 = source.take(tail, tail)
        acc[0, :tail] = fold(acc[0, :tail], t)
        exact_blocks[0] += sums[0]
        total, sumsq = total + s1, sumsq + s2
    done = 0
    while done < loads * vec:
        count = min(step, loads * vec - done)
        t, sums, s1, s2 = source.take(count, block * items * vec)
        pad = step - count

        def tile(a, pad=pad):
            return np.concatenate([a, np.zeros(pad, a.dtype)]).reshape(grid, items, block, vec)

        tiles = (tile(t[0]), tile(t[1])) if dot else tile(t)
        for i in range(items):
            for c in range(vec):
                acc = fold(acc, (tiles[0][:, i, :, c], tiles[1][:, i, :, c]) if dot else tiles[:, i, :, c])
        exact_blocks[:len(sums)] += sums
        total, sumsq = total + s1, sumsq + s2
        done += count
    partials = _block_merge(acc)
    # The last block: thread t folds partials t, t + block, ... in turn, then merges.
    rows = -(-grid // block)
    padded = np.zeros(rows * block, np.float32)
    padded[:grid] = partials
    mine = np.zeros(block, np.float32)
    for r in range(rows):
        mine = (mine + padded[r * block:(r + 1) * block]).astype(np.float32)
    result = float(_block_merge(mine[None, :])[0])
    errors = np.square(partials.astype(np.float64) - exact_blocks)
    final = (result - float(partials.astype(np.float64).sum())) ** 2
    return result, float(exact_blocks.sum()), float(errors.sum() + final), float(total), float(sumsq)


_SIMULATED: dict[tuple[int, bool, int], tuple] = {}


def simulated(n: int, dot: bool, trial: int):
    """simulate_sum of the default sum (or dot) spec, on a seed of its own, run once per session."""
    key = (n, dot, trial)
    if key not in _SIMULATED:
        rng = np.random.default_rng([20261123, n, int(dot), trial])
        _SIMULATED[key] = simulate_sum(kgen.Reduce(op="dot" if dot else "sum"), n, rng, dot)
    return _SIMULATED[key]


def _trials(n: int) -> int:
    return max(1, min(48, (1 << 21) // max(n, 1)))


@pytest.mark.parametrize("dot", [False, True], ids=["sum", "dot"])
def test_the_bound_holds_and_stays_within_100x_of_the_simulated_error(dot):
    spec = kgen.Reduce(op="dot" if dot else "sum")
    report = []
    for n in LENGTHS if not dot else LENGTHS[:-2]:
        worst, mean_sq, bounds, ulps = 0.0, 0.0, [], []
        for trial in range(_trials(n)):
            got, exact, sq, total, sumsq = simulated(n, dot, trial)
            grid = spec.launch_geometry(n, SMS, vectorized=True)[0]
            maps = sumsq if dot else 0.0
            b = spec.fold_error_bound(n, total, sumsq, maps, grid=grid, vectorized=True)
            err = abs(got - exact)
            worst = max(worst, err / b if b > 0 else (0.0 if err == 0 else math.inf))
            mean_sq += sq / _trials(n)
            bounds.append(b)
            ulps.append(float(np.spacing(np.float32(abs(exact) + 1e-30))))
        bound = float(np.mean(bounds))
        observed = math.sqrt(mean_sq)
        report.append((n, worst, bound / max(observed, 1e-300)))
        assert worst <= 1.0, f"n={n}: a correct result exceeded the bound ({report})"
        if observed > 0:
            assert bound <= 100 * observed, f"n={n}: the bound is loose ({report})"
        else:  # every addition was exact (n = 1): the bound is a few units in the last place
            assert bound <= 100 * float(np.mean(ulps)), f"n={n}: the bound is loose ({report})"
    # Correct results use a good part of the allowance somewhere.
    assert max(w for _, w, _ in report) > 0.02, report


def test_losing_one_warps_work_exceeds_the_bound():
    # One warp's load step is 32 lanes x 4 elements; leaving it out moves the result by its
    # sum. For random-sign data that sum is outside the bound nearly always, at every length.
    spec = kgen.Reduce(op="sum")
    rng = np.random.default_rng(7)
    warp_terms = 32 * spec.vec
    for n in LENGTHS:
        got, exact, _, total, sumsq = simulated(n, False, 0)
        grid = spec.launch_geometry(n, SMS, vectorized=True)[0]
        bound = spec.fold_error_bound(n, total, sumsq, grid=grid, vectorized=True)
        lost = rng.standard_normal((4000, min(warp_terms, n))).sum(axis=1)
        caught = np.mean(np.abs(got - lost - exact) > bound)
        assert caught >= 0.95, (n, caught, bound)
        assert bound < 0.1 * math.sqrt(min(warp_terms, n)), (n, bound)


def test_positive_terms_lose_a_block_outside_the_bound():
    # Same-sign terms: the error follows the total (about u * |S|), so a lost warp of 128
    # terms is caught while it is more than a few units in the last place of the result.
    spec = kgen.Reduce(op="sum")
    for n in (1000, 1 << 20, 1 << 24):
        bound = spec.fold_error_bound(n, total=0.5 * n, sumsq=n / 3.0)  # uniform [0, 1) terms
        assert 0.5 * 128 > bound, (n, bound)


def test_matmul_bound_holds_and_stays_within_100x_of_a_simulated_chain():
    # Each result is one sequential chain of fused multiply-adds over K (no split).
    spec = kgen.Matmul()
    rng = np.random.default_rng(3)
    outputs = 128
    for K in (1, 2, 17, 256, 4099, 1 << 16):
        a = rng.standard_normal((K, outputs)).astype(np.float32)
        b = rng.standard_normal((K, outputs)).astype(np.float32)
        acc = np.zeros(outputs, np.float32)
        for k in range(K):
            acc = (acc.astype(np.float64) + a[k].astype(np.float64) * b[k]).astype(np.float32)
        prod = a.astype(np.float64) * b
        exact = prod.sum(axis=0)
        results_sq, terms_sq = float(np.square(exact).sum()), float(np.square(prod).sum())
        bound = spec.kernel_error_bound(K, results_sq, terms_sq, 1, K)
        err = float(np.linalg.norm(acc - exact))
        assert err <= bound, (K, err, bound)
        if err > 0:
            assert bound <= 100 * err, (K, err, bound)


def test_matmul_tolerance_without_the_data_is_what_it_was_for_random_products():
    # tolerance(K) keeps the size its callers were written against (a few outputs may
    # cancel); with the outputs counted it tightens, with the data tighter still.
    spec = kgen.Matmul()
    for K in (1, 100, 4096):
        legacy = 32 * 2.0 ** -24 * math.sqrt(K)
        assert legacy <= spec.tolerance(K) <= 4 * legacy
        assert spec.tolerance_for({"M": 512, "N": 512, "K": K}) < spec.tolerance(K) / 3
    rng = np.random.default_rng(5)
    A = rng.standard_normal((64, 300)).astype(np.float32)
    B = rng.standard_normal((300, 48)).astype(np.float32)
    problem = {"M": 64, "N": 48, "K": 300}
    assert spec.tolerance_for(problem, (A, B)) < spec.tolerance_for(problem)


def test_matmul_exact_inputs_are_exact_in_float32():
    rng = np.random.default_rng(11)
    for K in (1, 7, 1000, 70000):
        A, B = kgen.Matmul.make_exact_inputs({"M": 5, "N": 6, "K": K}, "float32", rng)
        assert A.dtype == np.float32 and (A > 0).all() and (B > 0).all()
        scale = float(A.min() * B.min())  # every product is a multiple of the smallest one's unit
        assert float((A.astype(np.float64) @ B).max()) * 4 < 2 ** 24 * scale * 2 ** 8


# ---------------------------------------------------------------------------------
# The standalone programs compute the same bounds (compiled here, run host-only).
# ---------------------------------------------------------------------------------
def _host_program(spec, tmp_path, name):
    src = tmp_path / f"{name}.cu"
    kgen.emit(spec, src, standalone=True)
    exe = tmp_path / name
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([nvcc, "-O2", "-std=c++17", "-arch=sm_90", "-o", str(exe), str(src)], check=True,
                   capture_output=True, text=True, timeout=600)
    return exe


def _ask(exe, *args) -> float:
    out = subprocess.run([str(exe), *map(str, args)], check=True, capture_output=True, text=True, timeout=60)
    return float(out.stdout.strip())


REDUCE_SPECS = [
    kgen.Reduce(op="dot"),
    kgen.Reduce(op="sum", strategy="atomic", block_size=128, items_per_thread=2),
    kgen.Reduce(op="sum", strategy="warp_shuffle", vector_loads=False, dtype="float64", accumulate="kahan"),
    kgen.Reduce(op="dot", strategy="two_pass", block_size=1024, accumulate="float64"),
    kgen.Reduce(strategy="shared_tree", block_size=64, **CUSTOM),
    kgen.Reduce(op="custom", map_expr="sqrt(fabs(x)) / (y + 2)", combine="a * b", identity="1", dtype="float64"),
    kgen.Reduce(op="custom", map_expr="x - y", combine="a - b + 0", identity="0", grid_stride=False),
    kgen.Reduce(op="custom", map_expr="fabs(x - y)", combine="fmax(a, b)", identity="-inf"),
]


@pytest.mark.nvcc
def test_standalone_reduce_tolerance_is_the_python_formula(tmp_path):
    u64 = rounding.UNIT_ROUNDOFF["float64"]
    stats = [(1, 1, 0.5, 0.25, 0.0, 0.5, 0.0, 0.0, 0.0), (1000, 3, 12.5, 3000.0, 50.0, 400.0, 30.0, 2.0, 10.0),
             (33_554_435, 528, 3.1e7, 3.7e14, 3.7e14, 8.4e10, 8.4e10, 1e4, 5e6),
             (10_000_019, 1056, -4.0e3, 3.3e10, 0.0, 5.0e8, 0.0, 0.0, 0.0)]
    for i, spec in enumerate(REDUCE_SPECS):
        exe = _host_program(spec, tmp_path, f"reduce{i}")
        for n, grid, total, sumsq, maps, scale, map_sum, max_map, rel_sq in stats:
            got = _ask(exe, "--tolerance", n, grid, total, sumsq, maps, scale, map_sum, max_map, rel_sq)
            kind = spec.combine_kind
            if kind in ("min", "max"):
                want = 2 * rounding.unit_roundoff(spec.acc_dtype) * max_map
            elif kind == "prod":
                terms = max(n - 1, 0) + rel_sq
                want = (rounding.bound(rounding.unit_roundoff(spec.acc_dtype), terms) + rounding.bound(u64, terms)) \
                    * abs(total)
            elif kind == "sum":
                want = spec.fold_error_bound(n, total, sumsq, maps, grid=grid, vectorized=spec.vec > 1) \
                    + 2 * u64 * abs(total) + rounding.bound(u64, maps) + 2 * n * u64 * u64 * math.sqrt(n * sumsq)
            else:
                want = spec.general_error_bound(n, scale, map_sum, grid=grid)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-300), (spec.to_json(), n, grid)
        # The map's rounding bound, node by node as rounding_bound computes it.
        from kgen.ops.reduce import rounding_bound

        for x, y in ((3.0, 4.0), (-1.5, 0.25), (1e6, -7.0)):
            want = float(rounding_bound(spec._parsed()[0], {"x": np.array([x]), "y": np.array([y])})[1][0])
            assert _ask(exe, "--map-bound", x, y) == pytest.approx(want, rel=1e-12, abs=1e-300), (spec.to_json(), x, y)


@pytest.mark.nvcc
def test_standalone_matmul_tolerance_is_the_python_formula(tmp_path):
    specs = [kgen.Matmul(), kgen.Matmul.default_spec({"M": 512, "N": 512, "K": 4096}, "float32"),
             kgen.Matmul.default_spec({"M": 512, "N": 512, "K": 512}, "float64")]
    for i, spec in enumerate(specs):
        exe = _host_program(spec, tmp_path, f"matmul{i}")
        for K, results_sq, terms_sq in ((1, 4.0, 4.0), (1000, 1e6, 1e6), (4097, 3.0e9, 2.0e7)):
            for splits, chunk in spec.k_plans(K):
                want = (spec.kernel_error_bound(K, results_sq, terms_sq, splits, chunk)
                        + spec.reference_error_bound(K, results_sq, terms_sq)) / math.sqrt(results_sq)
                got = _ask(exe, "--tolerance", K, results_sq, terms_sq, splits, chunk)
                assert got == pytest.approx(want, rel=1e-12), (spec.to_json(), K, splits)
