"""kgen calls captured into a torch CUDA graph: every family's workspace (split-K partials,
merge tickets, reduction scratch, operand copies) must come from the graph's pool, and each
replay must compute on the inputs as they are then."""
import pytest
from conftest import cuda_torch

import kgen
from kgen.tune import dispatch

pytestmark = pytest.mark.gpu


def _capture(torch, fn):
    """torch's recipe: warm up on a side stream, then capture; returns (graph, output)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()
    return graph, out


def _rel(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


# (M, N, K, dtype, what it exercises)
PRODUCTS = [
    (1, 4096, 4096, "float32", "skinny GEMV, K split with the ticket merge"),
    (12, 3000, 2500, "float32", "skinny split-TF32 mma.sync form, two-pass merge workspace"),
    (150, 3000, 2500, "float32", "skinny wgmma form on sm_90: S's chunk images and partial sums in the workspace"),
    (6, 4096, 3000, "bfloat16", "skinny 16-bit tensor-core form"),
    (6, 8192, 4096, "bfloat16", "16-bit few rows against 64 MB: the streaming wgmma spec, K split (sm_90)"),
    (193, 50, 461, "float32", "tiled SIMT product"),
    (1024, 1024, 1024, "float32", "split-TF32 wgmma: operand copies in a workspace (sm_90)"),
]


@pytest.mark.parametrize("M,N,K,dtype,what", PRODUCTS)
def test_matmul_replays_on_new_inputs(M, N, K, dtype, what):
    torch = cuda_torch()
    dispatch.forget()
    tdt = getattr(torch, dtype)
    A = torch.randn(M, K, device="cuda", dtype=tdt)
    B = torch.randn(K, N, device="cuda", dtype=tdt)
    graph, C = _capture(torch, lambda: kgen.matmul(A, B))
    tol = 1e-5 if dtype == "float32" else 2e-2
    for _ in range(2):
        A.copy_(torch.randn(M, K, device="cuda", dtype=tdt))
        B.copy_(torch.randn(K, N, device="cuda", dtype=tdt))
        C.fill_(float("nan"))
        graph.replay()
        # An eager call of the same shape between replays must neither disturb the graph's
        # workspace nor be disturbed by it.
        eager = kgen.matmul(A, B)
        torch.cuda.synchronize()
        ref = A.double() @ B.double()
        assert _rel(C, ref) < tol, what
        assert _rel(eager, ref) < tol, what


@pytest.mark.parametrize("op", ["dot", "sum", "max"])
def test_reductions_replay_on_new_inputs(op):
    torch = cuda_torch()
    dispatch.forget()
    n = (1 << 22) + 3
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    fn = (lambda: kgen.dot(x, y)) if op == "dot" else (lambda: kgen.reduce(x, op=op))
    graph, r = _capture(torch, fn)
    for _ in range(2):
        x.copy_(torch.randn(n, device="cuda"))
        y.copy_(torch.randn(n, device="cuda"))
        graph.replay()
        torch.cuda.synchronize()
        xd, yd = x.double(), y.double()
        if op == "max":
            assert float(r) == float(x.max())
        elif op == "sum":
            assert abs(float(r) - float(xd.sum())) <= 1e-5 * float(xd.abs().sum())
        else:
            assert abs(float(r) - float(xd @ yd)) <= 1e-5 * float(xd.abs() @ yd.abs())


def test_first_call_inside_a_capture_needs_no_warm_up():
    """A shape whose workspace does not exist yet when the capture starts: the skinny
    merge's partials and tickets are taken from the graph's pool."""
    torch = cuda_torch()
    A = torch.randn(3, 5000, device="cuda")
    B = torch.randn(5000, 4096, device="cuda")
    kgen.matmul(A, B)                      # compiled and loaded, on this stream
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):          # torch's own capture stream: no workspace there yet
        C = kgen.matmul(A, B)
    A.copy_(torch.randn(3, 5000, device="cuda"))
    graph.replay()
    torch.cuda.synchronize()
    assert _rel(C, A.double() @ B.double()) < 1e-5


def test_no_result_is_made_ahead_inside_a_capture():
    """A repeat call makes the next call's result after its launch (a spare, for results too
    large to batch), but not while its stream captures: memory of the graph's pool must not
    become an eager call's result, nor an eager spare the graph's output."""
    torch = cuda_torch()
    dispatch.forget()
    A = torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16)
    # A 1.5 MiB result: past what a batch holds (1 MiB), within a spare's 4 MiB.
    B = torch.randn(2048, 12288, device="cuda", dtype=torch.bfloat16)
    first, second = kgen.matmul(A, B), kgen.matmul(A, B)
    kernel = dispatch._fast[("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, False)]
    results = kernel._torch_results
    eager = torch.cuda.current_stream().cuda_stream
    assert any(key[3] == eager for key in results._spares), "an eager repeat call keeps a spare"
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = torch.cuda.current_stream().cuda_stream
        C = kgen.matmul(A, B)
        kgen.matmul(A, B)
    assert not any(key[3] == captured for key in results._spares)
    A.copy_(torch.randn(64, 2048, device="cuda", dtype=torch.bfloat16))
    C.fill_(float("nan"))
    graph.replay()
    after = kgen.matmul(A, B)
    torch.cuda.synchronize()
    ref = A.double() @ B.double()
    assert _rel(C, ref) < 2e-2 and _rel(after, ref) < 2e-2
    assert len({t.data_ptr() for t in (first, second, C, after)}) == 4


def test_calls_of_one_kernel_in_one_graph_share_a_workspace_and_stay_right():
    """Products and reductions captured back to back in one graph share their kernel's
    workspace (tickets zeroed once per graph, left at zero by each call): every result of
    every replay must still be right, on inputs rewritten between replays, beside a second
    graph of the same kernels and eager calls on the capture's side."""
    torch = cuda_torch()
    torch.manual_seed(5)
    shapes = [(1, 4096, 4096), (3, 2048, 6000), (1, 4096, 4096), (5, 3000, 4100)]
    A = [torch.randn(M, K, device="cuda") for M, _, K in shapes]
    W = [torch.randn(N, K, device="cuda") for _, N, K in shapes]
    x = torch.randn(3_000_001, device="cuda")
    y = torch.randn(3_000_001, device="cuda")

    def calls():
        outs = [kgen.matmul(a, w.t()) for a, w in zip(A, W)]
        return outs + [kgen.dot(x, y), kgen.reduce(x, op="max"), kgen.dot(y, x)]

    graph, outs = _capture(torch, calls)
    other, other_outs = _capture(torch, calls)
    for _ in range(3):
        for t in A + W + [x, y]:
            t.copy_(torch.randn_like(t))
        for o in outs + other_outs:
            o.fill_(float("nan"))
        graph.replay()
        other.replay()
        eager = calls()   # on the current stream, after both replays in its order
        torch.cuda.synchronize()
        refs = [a.double() @ w.double().t() for a, w in zip(A, W)]
        xd, yd = x.double(), y.double()
        scale = float(xd.abs() @ yd.abs())
        for got in (outs, other_outs, eager):
            assert all(_rel(g, r) < 1e-5 for g, r in zip(got, refs)), [_rel(g, r) for g, r in zip(got, refs)]
            assert abs(float(got[4]) - float(xd @ yd)) <= 1e-5 * scale
            assert float(got[5]) == float(x.max())
            assert abs(float(got[6]) - float(xd @ yd)) <= 1e-5 * scale
