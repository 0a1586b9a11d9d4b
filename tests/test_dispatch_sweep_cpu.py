"""Dispatch on random products, without a GPU: whatever the shape, storage order, pitch or pointer
offset, kgen.matmul's choice is a valid spec that survives its JSON, and the tiled kernels'
launch geometry stays inside what the GPU accepts (grid sides, threads a block, shared memory
a block). Shapes reach past the model sizes (vocabulary heads of 256000 columns), down to one
row, and to every length in between."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.tune import ahead, dispatch
from kgen.tune.dispatch import forget

DEVICES = {"H100": ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132),
           "A100": ahead.stand_in_device("sm_80", "NVIDIA A100-SXM4-80GB", 108)}
STAND_IN = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": np.float16}
# A block's dynamic shared memory may reach 227 KB on sm_90 and 163 KB on sm_80 (opt-in).
MOST_SHARED = {"sm_90": 227 * 1024, "sm_80": 163 * 1024}
SIDE = st.one_of(st.integers(1, 64), st.integers(65, 4096), st.integers(4097, 40000),
                 st.sampled_from([768, 1024, 2048, 4096, 5120, 8192, 11008, 14336, 128256, 256000]))


@pytest.fixture(autouse=True)
def _fresh():
    forget()
    yield
    forget()


def _operands(dtype, M, N, K, weight_t, pad, offset):
    """numpy stand-ins of the call's shapes and strides that own no memory: A row-major, B a
    W.t() view or row-major, its rows `pad` elements longer and its first element `offset`
    elements past a 16-byte boundary."""
    t = STAND_IN[dtype]
    item = np.dtype(t).itemsize
    cell = np.zeros(8, t)[offset:]
    A = np.lib.stride_tricks.as_strided(cell, (M, K), (K * item, item), writeable=False)
    strides = (item, (K + pad) * item) if weight_t else ((N + pad) * item, item)
    return A, np.lib.stride_tricks.as_strided(cell, (K, N), strides, writeable=False)


def _check_geometry(spec, M, N, K, arch, sms):
    """The launch geometry of the tiled families: grid sides, threads and shared memory."""
    family = type(spec).__name__
    if family == "TensorMatmul":
        grid, block, shared = spec.launch_geometry(M, N, K, sms)
    elif family == "Matmul":
        grid, block, shared = spec.launch_geometry(M, N, K)
    else:
        return
    assert 1 <= grid[0] < 2 ** 31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535, (grid, spec.to_json())
    assert 1 <= block[0] * block[1] * block[2] <= 1024, (block, spec.to_json())
    assert 0 <= shared <= MOST_SHARED[arch], (shared, spec.to_json())


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(device=st.sampled_from(sorted(DEVICES)), dtype=st.sampled_from(sorted(STAND_IN)), M=SIDE, N=SIDE, K=SIDE,
       swap=st.booleans(), weight_t=st.booleans(), pad=st.sampled_from([0, 0, 0, 1, 3, 8]),
       offset=st.sampled_from([0, 0, 0, 1, 5]), allow_tf32=st.booleans())
def test_every_product_gets_a_valid_spec_whose_launch_fits_the_gpu(device, dtype, M, N, K, swap, weight_t, pad,
                                                                    offset, allow_tf32):
    if swap:   # as many few-column products as few-row ones
        M, N = N, M
    dev = DEVICES[device]
    A, B = _operands(dtype, M, N, K, weight_t, pad, offset)
    spec = dispatch.call_spec(A, B, allow_tf32 and dtype == "float32", device=dev, db=False, dtype=dtype)
    assert spec.dtype == dtype, spec.to_json()
    for s in (spec, *spec.companion_specs()):
        assert kgen.spec_from_json(s.to_json()) == s
        _check_geometry(s, M, N, K, dev.arch, dev.limits["multiprocessors"])
    if dev.arch == "sm_80":   # no Hopper instruction where there is no Hopper
        assert getattr(spec, "instruction", "mma_sync") != "wgmma", spec.to_json()


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(device=st.sampled_from(sorted(DEVICES)), M=st.integers(1, 600), N=SIDE, K=SIDE, weight_t=st.booleans(),
       pad=st.sampled_from([0, 0, 1, 3]), offset=st.sampled_from([0, 0, 1, 5]))
def test_float64_edge_blocks_are_masked_exactly_in_the_sm90_tiles_of_32_row_warps(device, M, N, K, weight_t, pad,
                                                                                     offset):
    """Dispatch copies the edge blocks of float64's sm_90 tiles whose warps hold 32 rows and 32 or
    more columns (the 64 x 64 default, the 96- and 128-row tiles, the 64 x 128 tiles) by counts
    fixed for the block (F64_EDGE_COPIES) and every other tensor-core spec (the few-row tiles'
    16-row warps, the few-column tiles' 16-column ones, as they were measured, m8n8k4, 16-bit
    and TF32) by clamped pieces; no dispatched spec skips MMAs (edge_mma "inside" was measured
    slower)."""
    dev = DEVICES[device]
    A, B = _operands("float64", M, N, K, weight_t, pad, offset)
    spec = dispatch.call_spec(A, B, False, device=dev, db=False, dtype="float64")
    if type(spec).__name__ != "TensorMatmul":
        return
    masked = spec.mma_shape in ("m16n8k16", "m16n8k8") and min(spec.warp_tile) >= 32
    assert spec.edge_copies == ("masked" if masked else "clamped"), spec.to_json()
    assert spec.edge_mma == "all", spec.to_json()
    assert not (masked and dev.arch == "sm_80"), spec.to_json()


def test_float64_default_on_an_h100_masks_its_edge_blocks():
    """The rows of 65-256 (the products the masked copies were measured on) get them through
    dispatch as users call it, and an A100, which cannot run m16n8k16, does not."""
    for M, N, K, weight_t in ((150, 8192, 8192, False), (185, 11916, 12520, True), (4096, 4096, 4096, False)):
        A, B = _operands("float64", M, N, K, weight_t, 0, 0)
        h100 = dispatch.call_spec(A, B, False, device=DEVICES["H100"], db=False, dtype="float64")
        a100 = dispatch.call_spec(A, B, False, device=DEVICES["A100"], db=False, dtype="float64")
        assert h100.edge_copies == "masked" and h100.mma_shape == "m16n8k16", h100.to_json()
        assert getattr(a100, "edge_copies", "clamped") == "clamped", a100.to_json()
