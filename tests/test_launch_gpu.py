"""The thin call path on the GPU: the caller's stream, and repeat calls that reuse their plan."""
import numpy as np
import pytest
from conftest import cuda_torch

import kgen
from kgen.tune import dispatch

pytestmark = pytest.mark.gpu


def _torch():
    return cuda_torch()


def test_matmul_and_dot_run_on_the_callers_torch_stream():
    torch = _torch()
    s = torch.cuda.Stream()
    A = torch.randn(1500, 700, device="cuda")
    B = torch.randn(700, 900, device="cuda")
    C = torch.full((1500, 900), float("nan"), device="cuda")
    x = torch.randn(3_000_001, device="cuda")
    out = torch.full((), float("nan"), device="cuda")
    with torch.cuda.stream(s):
        # Work queued on s before the kgen calls: if kgen ran on another stream it would
        # read A, B and x before these writes land (the sleep makes that race certain).
        torch.cuda._sleep(50_000_000)
        A.mul_(2.0)
        x.mul_(3.0)
        kgen.matmul(A, B, out=C)
        kgen.dot(x, x, out=out)
        done = torch.cuda.Event()
        done.record(s)
    done.synchronize()
    ref = (A.double() @ B.double())
    assert float((C.double() - ref).norm() / ref.norm()) < 1e-5
    xd = x.double()
    assert abs(float(out) - float(xd @ xd)) <= 1e-4 * float(xd @ xd)


def test_explicit_stream_argument_is_used():
    torch = _torch()
    s = torch.cuda.Stream()
    x = torch.randn(1 << 20, device="cuda")
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        x.add_(1.0)
    # stream=s: ordered after the add on s although the current stream is the default one.
    got = kgen.reduce(x, op="sum", stream=s)
    s.synchronize()
    assert abs(float(got) - float(x.double().sum())) <= 1e-4 * float(x.double().abs().sum())


def test_repeat_calls_reuse_one_plan_and_stay_correct():
    torch = _torch()
    # A product the tiled family runs (K below what the skinny forms take at 129 columns).
    A = torch.randn(257, 150, device="cuda")
    B = torch.randn(150, 129, device="cuda")
    first = kgen.matmul(A, B)
    assert dispatch.call_family(A, B, "float32").kernel == "matmul"
    k = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
    plans = len(k._torch_calls)
    for _ in range(5):
        A2 = torch.randn(257, 150, device="cuda")
        C = kgen.matmul(A2, B)
        ref = A2.double() @ B.double()
        assert float((C.double() - ref).norm() / ref.norm()) < 1e-5
    assert len(k._torch_calls) == plans, "same shapes, strides and alignment: no new plan"
    assert torch.equal(first, kgen.matmul(A, B))
    # An odd-offset view changes the alignment class: a new plan, and still right.
    A3 = torch.randn(257 * 150 + 1, device="cuda")[1:].view(257, 150)
    C3 = kgen.matmul(A3, B)
    ref = A3.double() @ B.double()
    assert float((C3.double() - ref).norm() / ref.norm()) < 1e-5
    assert np.isfinite(C3.cpu().numpy()).all()


@pytest.mark.parametrize("dtype, M, N, K, order", [
    ("bfloat16", 7, 4608, 2112, "col"),     # the tensor-core streaming kernel (sm_90) or the skinny forms
    ("bfloat16", 2, 3136, 1472, "row"),     # the skinny forms
    ("float32", 257, 129, 150, "row"),      # the tiled family
    ("bfloat16", 100, 1000, 700, "col"),    # a general tensor-core product
])
def test_resolved_repeat_calls_are_right_with_fresh_tensors_and_after_a_release(dtype, M, N, K, order):
    torch = _torch()
    tdt = getattr(torch, dtype)

    def operands():
        A = torch.randn(M, K, device="cuda", dtype=tdt)
        B = torch.randn(N, K, device="cuda", dtype=tdt).t() if order == "col" else torch.randn(K, N, device="cuda",
                                                                                            dtype=tdt)
        return A, B

    tol = 1e-5 if dtype == "float32" else 8e-3
    A, B = operands()
    kgen.matmul(A, B)
    key = (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, 0, 0, A.data_ptr() & 15, B.data_ptr() & 15,
           False)
    assert key in dispatch._repeat, "the first call resolved its repeat call"
    kernel = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
    kept = []
    for i in range(12):
        if i == 6:
            kernel.release()   # the workspaces go: the next call plans afresh
        A, B = operands()      # fresh data each call: a result left from an earlier call fails
        C = kgen.matmul(A, B)
        kept.append((C, A.double() @ B.double()))
    # Every result is right and its own: no later call wrote over an earlier one.
    assert len({C.data_ptr() for C, _ in kept}) == len(kept)
    for C, ref in kept:
        assert C.shape == (M, N) and C.dtype == tdt
        assert float((C.double() - ref).norm() / ref.norm()) < tol


def test_few_rows_of_a_transposed_a_run_right_without_the_transposed_tiles():
    """A few-row product whose A is a transposed view (column-major): A's rows as the wgmma N
    read A K-major, so dispatch gives such calls the row tiles; the result is right either way."""
    torch = _torch()
    from kgen.core import runtime

    for M, N, K in ((7, 4608, 2112), (40, 2048, 1536)):
        A = torch.randn(K, M, device="cuda", dtype=torch.bfloat16).t()
        B = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t()
        C = kgen.matmul(A, B)
        ref = A.double() @ B.double()
        assert float((C.double() - ref).norm() / ref.norm()) < 8e-3
        kernel = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
        if runtime.device_arch() == "sm_90":
            assert kernel.spec.kernel == "tensor_matmul" and not kernel.spec.swap_ab and kernel.spec.layout_a == "col"
        # The same product with a row-major A does run transposed tiles on sm_90.
        A2 = A.contiguous()
        C2 = kgen.matmul(A2, B)
        assert float((C2.double() - ref).norm() / ref.norm()) < 8e-3
        k2 = dispatch._fast[("matmul", A2.shape, A2.stride(), B.shape, B.stride(), A2.dtype, False)]
        if runtime.device_arch() == "sm_90":
            assert k2.spec.swap_ab


def test_tensor_maps_for_new_addresses_equal_the_drivers_own():
    """kgen.core.tma.TiledMap patches the base address into a descriptor it learned the layout
    of (or encodes each address where that layout does not fit): either way its bytes equal
    cuTensorMapEncodeTiled's for real allocations and scattered addresses, over geometries of
    the wgmma kernel's operands."""
    torch = _torch()
    from kgen.core import tma

    rng = np.random.default_rng(7)
    tensors = [torch.empty(n, device="cuda", dtype=torch.bfloat16) for n in (8, 4096, 1 << 20, 12345 * 8)]
    geometries = [("bfloat16", 4096, 7, 4096, (64, 8)), ("float16", 2112, 4608, 2112, (64, 64)),
                  ("bfloat16", 4608, 2112, 4608, (64, 64)), ("float32", 1000, 3000, 1024, (32, 128))]
    for dtype, inner, outer, ld, box in geometries:
        m = tma.TiledMap(dtype, inner, outer, ld, box)
        addresses = [t.data_ptr() for t in tensors] + [int(a) * 16 for a in rng.integers(1, 1 << 44, 64)]
        for p in addresses:
            assert m.at(p) == tma.encode_tiled_2d(dtype, p, inner, outer, ld, box), (dtype, hex(p), m.patches)
