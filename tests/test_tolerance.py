"""Data-aware tolerances: a check must pass every correct GPU result and no wrong one."""
from __future__ import annotations

from fractions import Fraction

import numpy as np

import kgen

CUSTOM = dict(op="custom", map_expr="x * y + 1", combine="a + b", identity="0")


def test_fma_contraction_on_a_cancelling_map_is_allowed():
    # x*y close to -1: the GPU's fused x*y+1 (one rounding) and the reference's two
    # roundings differ by far more than eps relative to the tiny result.
    spec = kgen.Reduce(dtype="float64", strategy="warp_shuffle", accumulate="kahan", **CUSTOM)
    x = np.array([1.0 + 2.0 ** -30])
    y = np.array([-(1.0 - 2.0 ** -29)])
    fused = float(Fraction(x[0]) * Fraction(y[0]) + 1)           # exact, then rounded once
    ref = float(spec.reference(x, y))                             # rounded twice
    problem = {"n": 1, **CUSTOM}
    assert abs(fused - ref) / abs(ref) > spec.tolerance_for(problem), "the data-free bound is too tight here"
    assert abs(fused - ref) / abs(ref) <= spec.tolerance_for(problem, (x, y))


def test_exact_maps_under_min_max_allow_nothing():
    spec = kgen.Reduce(op="custom", map_expr="fabs(x)", combine="fmax(a, b)", identity="0", dtype="float64")
    x = np.random.default_rng(0).standard_normal(1000)
    assert spec.tolerance_for({"n": 1000, "op": "custom", "map_expr": "fabs(x)", "combine": "fmax(a, b)",
                               "identity": "0"}, (x,)) == 0.0


def test_a_cancelling_sum_is_judged_by_its_terms_not_its_result():
    spec = kgen.Reduce(op="sum", dtype="float32")
    x = np.array([1e4, -1e4 + 0.5, 0.25], dtype=np.float32)   # result 0.75 from terms of size 1e4
    tol = spec.tolerance_for({"n": 3, "op": "sum"}, (x,))
    ref = float(spec.reference(x))
    one_ulp_of_terms = float(np.spacing(np.float32(1e4)))
    assert one_ulp_of_terms / abs(ref) <= tol          # a correct float32 fold may be this far off
    assert 0.25 / abs(ref) > tol                       # dropping the last term (0.25) is caught
