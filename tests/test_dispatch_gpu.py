"""kgen.matmul as users call it, on products drawn at random across every dtype and the shape
classes dispatch tells apart (a few rows against a large weight, a few columns, a short K, any
shape), B row-major or a weight's W.t(), A at an odd pitch: whatever family, tile, K split and
merge dispatch chooses, each result into a NaN-poisoned out= against float64, within the bound
of the spec dispatch chose. The fixed-spec property tests reach the specs they name; this one
reaches the rules' own choices, where the shapes users run take them."""
from __future__ import annotations

import os

import pytest
from conftest import cuda_torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_DISPATCH_EXAMPLES", "40"))


def _side(lo: int, hi: int):
    """Lengths from lo to hi, the small ones as likely as the large (log-uniform), with the
    edges of tiles and vectors among them."""
    return st.one_of(st.floats(0, 1).map(lambda u: int(round(lo * (hi / lo) ** u))),
                     st.sampled_from([n for n in (1, 8, 9, 15, 16, 17, 63, 64, 65, 127, 129, 1023, 1025)
                                      if lo <= n <= hi]))


@st.composite
def products(draw):
    kind = draw(st.sampled_from(["few rows", "few columns", "short K", "any"]))
    if kind == "few rows":
        M, N, K = draw(_side(1, 256)), draw(_side(256, 6000)), draw(_side(256, 6000))
    elif kind == "few columns":
        M, N, K = draw(_side(256, 6000)), draw(_side(1, 64)), draw(_side(256, 6000))
    elif kind == "short K":
        M, N, K = draw(_side(256, 3000)), draw(_side(256, 3000)), draw(_side(1, 128))
    else:
        M, N, K = draw(_side(1, 2048)), draw(_side(1, 2048)), draw(_side(1, 2048))
    return M, N, K


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(shape=products(), dtype=st.sampled_from(["float32", "float64", "float16", "bfloat16"]),
       weights=st.booleans(), a_offset=st.integers(0, 1))
def test_matmul_as_dispatched_is_right_on_random_products(shape, dtype, weights, a_offset):
    torch = cuda_torch()
    from kgen.tune.dispatch import call_family, select

    M, N, K = shape
    tdt = getattr(torch, dtype)
    A = torch.randn(M, K + a_offset, device="cuda", dtype=tdt)[:, a_offset:]
    B = torch.randn(N, K, device="cuda", dtype=tdt).t() if weights else torch.randn(K, N, device="cuda", dtype=tdt)
    C = torch.full((M, N), float("nan"), device="cuda", dtype=tdt)
    kgen.matmul(A, B, out=C)
    torch.cuda.synchronize()
    ref = A.double() @ B.double()
    spec = select(call_family(A, B, dtype), {"M": M, "N": N, "K": K}, dtype).spec
    label = f"{M}x{N}x{K} {dtype} weights={weights} A offset {a_offset}: {spec.to_json()}"
    assert torch.isfinite(C).all(), f"{label}: unwritten (NaN) or non-finite outputs"
    rel = (torch.linalg.norm(C.double() - ref) / torch.linalg.norm(ref)).item()
    assert rel <= spec.tolerance_for({"M": M, "N": N, "K": K}), f"{label}: relative error {rel:.2e}"
