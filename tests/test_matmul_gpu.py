"""GPU property tests of the matmul family: random specs from the search space, random
shapes (1, primes, non-multiples of every tile, K=1, skinny and wide), both layouts,
leading dimensions from row slices, alpha/beta, NaN-poisoned outputs; float64 references."""
from __future__ import annotations

import concurrent.futures as cf
import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.bench import matmul as bench_matmul
from kgen.ops.matmul import Matmul
from conftest import rel_error

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_MATMUL_EXAMPLES", "520"))
LIMITS = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024, "multiprocessors": 132}

SIZE = st.one_of(st.sampled_from([1, 2, 3, 5, 7, 31, 127, 129, 131, 257, 263, 509, 1021]), st.integers(1, 300))


def _space(dtype):
    specs, must = {}, set()
    # The union of the spaces of a square, a skinny (split-K) and an unaligned (repack) problem.
    for problem in ({"M": 512, "N": 512, "K": 512}, {"M": 127, "N": 4096, "K": 4096},
                    {"M": 1000, "N": 1001, "K": 999}):
        for s in Matmul.search_space(problem, dtype):
            if s.prune_reason(problem, LIMITS) is None:
                specs[s.key] = s
    extra = [Matmul.default_spec({"M": 4096, "N": 4096, "K": 4096}, dtype),
             Matmul.default_spec({"M": 4096, "N": 64, "K": 4096}, dtype)]
    if dtype == "float32":
        extra += [bench_matmul.best_spec(shape) for shape in bench_matmul.SHAPES]
    must.update(s.key for s in extra)
    specs.update({s.key: s for s in extra})
    # A fixed random subset keeps the compile count bounded (they are built in parallel below);
    # the defaults and every bench spec are always in.
    pool = sorted(specs.values(), key=lambda s: s.key)
    chosen = random.Random(20261121).sample(pool, min(len(pool), SUBSET[dtype]))
    for s in pool:
        if s.key in must and s not in chosen:
            chosen.append(s)
    return chosen


SUBSET = {"float32": 56, "float64": 20}
SPACE = {"float32": _space("float32"), "float64": _space("float64")}


@pytest.fixture(scope="module", autouse=True)
def _prebuild():
    """Compile every spec (in both layouts) up front, in parallel: nvcc dominates otherwise."""
    specs = [s.replace(layout_a=a, layout_b=b) for sp in SPACE.values() for s in sp
             for a in ("row", "col") for b in ("row", "col")]
    from kgen.core import runtime
    from kgen.core.kernel import default_arch

    runtime.driver()  # CUDA starts in this thread, never in a compile worker
    arch = default_arch()
    with cf.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        list(ex.map(lambda s: kgen.compile(s, arch), specs))


def _device(x, layout, dtype, pad):
    """x on the device stored as `layout`, as a slice of a wider array when pad > 0 (ld > cols)."""
    import torch

    r, c = x.shape
    if layout == "row":
        base = np.zeros((r, c + pad), dtype)
        base[:, :c] = x
        return torch.from_numpy(base).cuda()[:, :c]
    # A transposed view: column-major storage with a leading dimension >= rows.
    base = np.zeros((c, r + pad), dtype)
    base[:, :r] = x.T
    return torch.from_numpy(base).cuda()[:, :r].T


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), M=SIZE, N=SIZE, K=st.one_of(st.just(1), SIZE),
       dtype=st.sampled_from(["float32", "float32", "float32", "float64"]),
       layout_a=st.sampled_from(["row", "col"]), layout_b=st.sampled_from(["row", "col"]),
       pad_a=st.sampled_from([0, 0, 1, 4]), pad_b=st.sampled_from([0, 0, 3, 4]),
       beta=st.sampled_from([0.0, 0.0, -0.5]))
def test_matmul_spec_and_shape_property(data, M, N, K, dtype, layout_a, layout_b, pad_a, pad_b, beta):
    torch = pytest.importorskip("torch")
    spec = data.draw(st.sampled_from(SPACE[dtype]), label="spec")
    spec = spec.replace(layout_a=layout_a, layout_b=layout_b)
    k = kgen.build(spec)
    rng = np.random.default_rng()
    A = rng.standard_normal((M, K)).astype(dtype).astype(np.float64)
    B = rng.standard_normal((K, N)).astype(dtype).astype(np.float64)
    tdt = torch.float32 if dtype == "float32" else torch.float64
    dA = _device(A.astype(dtype), layout_a, dtype, pad_a)
    dB = _device(B.astype(dtype), layout_b, dtype, pad_b)
    C0 = rng.standard_normal((M, N))
    out = torch.full((M, N), float("nan"), dtype=tdt, device="cuda")
    if beta != 0.0:
        out.copy_(torch.from_numpy(C0).to(tdt))
    alpha = 1.5
    k(dA, dB, out=out, alpha=alpha, beta=beta)
    ref = alpha * (A @ B) + (beta * C0.astype(dtype).astype(np.float64) if beta != 0.0 else 0.0)
    tol = spec.tolerance(K) * (2.0 if beta != 0.0 else 1.0)
    assert rel_error(out.cpu().numpy(), ref) <= tol, (spec.to_json(), M, N, K)


def test_bench_specs_are_exact_on_their_shapes_scaled_down():
    torch = pytest.importorskip("torch")
    for shape in bench_matmul.SHAPES:
        spec = bench_matmul.best_spec(shape)
        M, N, K = (min(s, 1100) for s in shape)
        k = kgen.build(spec)
        A = torch.randn(M, K, device="cuda")
        B = torch.randn(K, N, device="cuda")
        C = torch.full((M, N), float("nan"), device="cuda")
        k(A, B, out=C)
        ref = (A.double() @ B.double()).cpu().numpy()
        assert rel_error(C.cpu().numpy(), ref) <= spec.tolerance(K), spec.to_json()


def test_numpy_in_numpy_out_fast_spec():
    rng = np.random.default_rng()
    spec = Matmul.default_spec({"M": 300, "N": 200, "K": 150}, "float32").replace(layout_b="col")
    k = kgen.build(spec)
    A = rng.standard_normal((300, 150)).astype(np.float32)
    Bt = rng.standard_normal((200, 150)).astype(np.float32)
    C = k(A, Bt.T)
    assert isinstance(C, np.ndarray) and C.shape == (300, 200)
    assert rel_error(C, A.astype(np.float64) @ Bt.T.astype(np.float64)) <= spec.tolerance(150)


def test_split_k_is_deterministic():
    torch = pytest.importorskip("torch")
    spec = Matmul.default_spec({"M": 4096, "N": 64, "K": 4096}, "float32")
    assert spec.split_k > 1
    k = kgen.build(spec)
    A = torch.randn(1000, 3000, device="cuda")
    B = torch.randn(3000, 64, device="cuda")
    C1 = k(A, B)
    C2 = k(A, B)
    assert torch.equal(C1, C2)
    assert rel_error(C1.cpu().numpy(), (A.double() @ B.double()).cpu().numpy()) <= spec.tolerance(3000)

