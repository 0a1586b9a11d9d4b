"""GPU checks of the reduction family: random valid specs x random lengths vs float64
numpy, compensation that survives every merge, 64-bit indexing, interop."""
from __future__ import annotations

import concurrent.futures
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.reduce import STRATEGIES, Reduce

pytestmark = pytest.mark.gpu

GPU_EXAMPLES = 600

# What is reduced: (op fields, dtype, accumulate). Custom map-reduces ride along.
KINDS = [
    (dict(op="dot"), "float32", "native"),
    (dict(op="dot"), "float64", "native"),
    (dict(op="dot"), "float32", "kahan"),
    (dict(op="dot"), "float32", "float64"),
    (dict(op="sum"), "float32", "native"),
    (dict(op="sum"), "float32", "kahan"),
    (dict(op="sum"), "float64", "kahan"),
    (dict(op="sum"), "int32", "native"),
    (dict(op="min"), "float32", "native"),
    (dict(op="max"), "float64", "native"),
    (dict(op="min"), "int32", "native"),
    (dict(op="max"), "int32", "native"),
    (dict(op="custom", map_expr="x * x * x", combine="a + b", identity="0"), "float32", "native"),
    (dict(op="custom", map_expr="fabs(x - y)", combine="fmax(a, b)", identity="-inf"), "float64", "native"),
    (dict(op="custom", map_expr="x > 0.5 ? x : -0.25 * y", combine="a + b", identity="0"), "float32", "kahan"),
    (dict(op="custom", map_expr="x % 7", combine="a > b ? a : b", identity="-inf"), "int32", "native"),
]


def _pool() -> list[Reduce]:
    """Every strategy with every kind, each with deterministic-random launch parameters,
    so the pool covers block sizes, items, vector loads, grid caps and grid_stride."""
    rng = np.random.default_rng(20261121)
    pool = []
    for strategy in STRATEGIES:
        for fields, dtype, acc in KINDS:
            if strategy == "atomic" and acc == "kahan":
                continue
            for _ in range(2 if strategy in ("single_pass", "atomic") else 1):
                stride = bool(rng.random() < 0.75)
                pool.append(Reduce(dtype=dtype, strategy=strategy, accumulate=acc, **fields,
                                   block_size=int(rng.choice([32, 64, 128, 256, 512, 1024])),
                                   items_per_thread=int(rng.choice([1, 2, 3, 4, 8])),
                                   vector_loads=bool(rng.random() < 0.7), grid_stride=stride,
                                   grid_size=int(rng.choice([0, 0, 1, 7, 32, 300])) if stride else 0))
    return pool


POOL = _pool()


@pytest.fixture(scope="module")
def kernels():
    # Compile the whole pool in parallel first (nvcc is the slow part), then load. The
    # arch is found here, in the main thread: worker threads must not touch CUDA (pycuda
    # aborts at exit if a thread ends with a context pushed).
    from kgen.core.kernel import default_arch

    arch = default_arch()
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        list(ex.map(lambda s: kgen.compile(s, arch), POOL))
    return [kgen.build(s) for s in POOL]


PRIMES = [2, 3, 5, 7, 13, 31, 127, 509, 1021, 4093, 65521, 131071, 1048573]
LENGTHS = st.one_of(
    st.sampled_from([0, 1] + PRIMES),
    st.integers(1, 5000),
    st.integers(5000, 400_000),
    st.builds(lambda k, d: max(1, k * 2048 + d), st.integers(1, 200), st.sampled_from([-1, 1, 3])),
)


def _data(spec: Reduce, n: int, rng) -> np.ndarray:
    if spec.dtype == "int32":
        return rng.integers(-1000, 1000, n, dtype=np.int32)
    return (rng.standard_normal(n) * 2.0).astype(spec.dtype)


def _poisoned_out(lib: str, dtype: str):
    if lib == "torch":
        import torch

        tdt = {"float32": torch.float32, "float64": torch.float64, "int32": torch.int32}[dtype]
        return torch.full((), -123456 if dtype == "int32" else float("nan"), dtype=tdt, device="cuda")
    from pycuda import gpuarray

    out = gpuarray.empty((), dtype)
    out.fill(np.int32(-123456) if dtype == "int32" else np.nan)
    return out


def _to_device(lib: str, a: np.ndarray, offset: int):
    """Device copy of a, starting `offset` elements into a bigger buffer: views whose
    start is not 16-byte aligned take the scalar head path (or the no-vector path)."""
    # A guard element after the end too: a kernel reading past n would count it.
    padded = np.concatenate([np.full(offset, 3, a.dtype), a, np.full(1, 3, a.dtype)])
    n = a.shape[0]
    if lib == "torch":
        import torch

        return torch.from_numpy(padded).cuda()[offset:offset + n]
    from pycuda import gpuarray

    g = gpuarray.to_gpu(padded)
    return g[offset:offset + n]


def _check(spec: Reduce, got: float, inputs: list[np.ndarray], sms: int) -> None:
    n = inputs[0].shape[0]
    ref = spec.reference(*inputs)
    if spec.combine_kind in ("min", "max") or spec.dtype == "int32":
        assert got == np.asarray(ref).astype(spec.dtype), (spec.to_json(), n, got, ref)
        return
    scale = float(np.abs(spec.mapped(*inputs)).sum())
    tol = spec.tolerance_abs(n, scale, sms)
    assert math.isfinite(got) and abs(got - ref) <= tol, (spec.to_json(), n, got, ref, tol)


@settings(max_examples=GPU_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(which=st.integers(0, len(POOL) - 1), n=LENGTHS, lib=st.sampled_from(["pycuda", "torch"]),
       off_x=st.sampled_from([0, 0, 1, 2, 3]), off_y=st.sampled_from([0, 1, 2]), seed=st.integers(0, 2**32 - 1))
def test_random_specs_match_float64(kernels, which, n, lib, off_x, off_y, seed):
    if lib == "torch":
        pytest.importorskip("torch")
    from kgen.core import runtime

    spec, k = POOL[which], kernels[which]
    rng = np.random.default_rng(seed)
    inputs = [_data(spec, n, rng) for _ in range(spec.arity)]
    offsets = [off_x, off_y if rng.random() < 0.5 else off_x][: spec.arity]
    dev = [_to_device(lib, a, o) for a, o in zip(inputs, offsets)]
    out = _poisoned_out(lib, spec.dtype)
    if n == 0 and spec.empty_is_undefined:
        with pytest.raises(kgen.ArrayError, match="empty"):
            k(*dev, out=out)
        return
    assert k(*dev, out=out) is out
    got = float(out.item() if lib == "torch" else out.get()[()])
    if n == 0:
        assert got == spec.identity_value()
        return
    _check(spec, got, inputs, runtime.device_limits()["multiprocessors"])
    # Repeat calls reuse the scratch (ticket, atomic cell): the second must agree.
    got2 = k(*inputs)
    _check(spec, float(got2), inputs, runtime.device_limits()["multiprocessors"])


def _mixed_magnitudes(n: int, seed: int = 5) -> np.ndarray:
    """Exactly cancelling large pairs (multiples of 2^17) mixed with small positive
    values below half an ulp of the large partial sums: a float32 running sum drops most
    small values, a compensated one keeps them in its correction term."""
    rng = np.random.default_rng(seed)
    third = n // 3
    big = (rng.integers(1, 5, third) * 131072.0).astype(np.float32)
    small = rng.uniform(0.001, 0.007, n - 2 * third).astype(np.float32)
    x = np.concatenate([big, -big, small])
    rng.shuffle(x)
    return x


@pytest.mark.parametrize("strategy", ["single_pass", "two_pass", "shared_tree", "warp_shuffle"])
def test_kahan_is_ten_times_closer_than_native(strategy):
    n = 1 << 24
    x = _mixed_magnitudes(n)
    exact = math.fsum(x.astype(np.float64).tolist())
    native = float(kgen.build(Reduce(op="sum", strategy=strategy, accumulate="native"))(x))
    kahan = float(kgen.build(Reduce(op="sum", strategy=strategy, accumulate="kahan"))(x))
    wide = float(kgen.build(Reduce(op="sum", strategy=strategy, accumulate="float64"))(x))
    err_native, err_kahan = abs(native - exact), abs(kahan - exact)
    print(f"{strategy}: exact {exact:.6f} native {native:.6f} (err {err_native:.3g}) "
          f"kahan {kahan:.6f} (err {err_kahan:.3g}) float64 {wide:.6f}")
    assert err_kahan * 10 <= err_native
    assert err_kahan <= 4 * np.spacing(np.float32(exact))  # within a few ulps of the exact sum
    assert abs(wide - exact) <= 4 * np.spacing(np.float32(exact))


def test_kahan_dot_survives_merges():
    n = (1 << 22) + 3
    x = _mixed_magnitudes(n, seed=9)
    y = np.ones(n, np.float32) + np.float32(2.0 ** -20)  # products round a little, sums most
    exact = math.fsum((x.astype(np.float64) * y.astype(np.float64)).tolist())
    for strategy in ("single_pass", "two_pass"):
        native = float(kgen.build(Reduce(op="dot", strategy=strategy))(x, y))
        kahan = float(kgen.build(Reduce(op="dot", strategy=strategy, accumulate="kahan"))(x, y))
        assert abs(kahan - exact) * 10 <= abs(native - exact), (strategy, native, kahan, exact)


def test_beyond_2_31_elements():
    torch = pytest.importorskip("torch")
    n = (1 << 31) + 37
    free, _ = torch.cuda.mem_get_info()
    if free < 3 * n * 4:
        pytest.skip(f"needs {3 * n * 4 / 2**30:.1f} GiB of free device memory")
    x = torch.ones(n, dtype=torch.float32, device="cuda")
    x[5] = -3.0
    x[n - 2] = 9.0  # past 2^31: found only with 64-bit indexing
    x[(1 << 31) + 1] = -7.0
    for strategy in ("single_pass", "two_pass", "atomic"):
        assert float(kgen.build(Reduce(op="max", strategy=strategy))(x)) == 9.0
        assert float(kgen.build(Reduce(op="min", strategy=strategy))(x)) == -7.0
        total = kgen.build(Reduce(op="sum", strategy=strategy, accumulate="float64"))(x)
        # float64 inside, float32 out: the exact total, rounded once
        assert float(total) == float(np.float32(n - 3 - 3 + 9 - 7))
    y = torch.full((n,), 0.5, dtype=torch.float32, device="cuda")
    d = kgen.build(Reduce(op="dot", strategy="single_pass", accumulate="float64"))(x, y)
    assert float(d) == float(np.float32((n - 3 - 3 + 9 - 7) * 0.5))
    del x, y


def test_interop_and_errors():
    torch = pytest.importorskip("torch")
    k = kgen.build(Reduce(op="sum"))
    x = torch.randn(100_003, device="cuda")
    s = k(x)
    assert isinstance(s, torch.Tensor) and s.is_cuda and s.dim() == 0
    assert abs(s.item() - x.double().sum().item()) < 1e-2
    # numpy in -> numpy scalar out; empty sum is 0; empty min is an error
    assert k(np.ones(7, np.float32)) == 7.0
    assert k(np.ones(0, np.float32)) == 0.0
    with pytest.raises(kgen.ArrayError, match="empty"):
        kgen.build(Reduce(op="min"))(np.ones(0, np.float32))
    with pytest.raises(kgen.ArrayError, match="dtype"):
        k(np.ones(5, np.float64))
    with pytest.raises(kgen.ArrayError, match="contiguous"):
        k(x[::2])
    cupy = pytest.importorskip("cupy")
    xc = cupy.arange(1, 1001, dtype=cupy.float64)
    r = kgen.build(Reduce(op="custom", dtype="float64", map_expr="x * x * x", combine="a + b", identity="0"))(xc)
    assert isinstance(r, cupy.ndarray) and float(r) == (1000 * 1001 / 2) ** 2


def test_bound_launcher_and_streams():
    torch = pytest.importorskip("torch")
    from pycuda import driver as drv

    x = torch.randn(1 << 20, device="cuda")
    y = torch.randn(1 << 20, device="cuda")
    out = torch.full((), float("nan"), device="cuda")
    k = kgen.build(Reduce(op="dot", strategy="single_pass"))
    go = k.bind(x, y, out=out)
    for _ in range(50):
        go()
    ref = float((x.double() * y.double()).sum())
    assert abs(out.item() - ref) < 1e-2
    s = drv.Stream()
    out2 = torch.full((), float("nan"), device="cuda")
    torch.cuda.synchronize()
    k(x, y, out=out2, stream=s)
    s.synchronize()
    assert abs(out2.item() - ref) < 1e-2
