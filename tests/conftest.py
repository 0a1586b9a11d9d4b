"""Test set-up: GPU tests run when pycuda and a device are present and are skipped,
with the reason, otherwise. nvcc tests are skipped without nvcc, except on CI (CI=true),
where a missing nvcc fails them: the compile tests must have run there."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest


def _gpu_reason() -> str | None:
    try:
        from kgen.core import runtime

        ok, why = runtime.gpu_available()
    except Exception as exc:  # noqa: BLE001 - any failure means "no GPU here"
        return f"no GPU: {exc}"
    return None if ok else f"no GPU: {why}"


_GPU_SKIP = _gpu_reason()


def pytest_collection_modifyitems(config, items):
    ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
    have_nvcc = shutil.which("nvcc") is not None or os.path.isfile("/usr/local/cuda/bin/nvcc")
    for item in items:
        if "gpu" in item.keywords and _GPU_SKIP:
            item.add_marker(pytest.mark.skip(reason=_GPU_SKIP))
        if "nvcc" in item.keywords and not have_nvcc and not ci:
            item.add_marker(pytest.mark.skip(reason="nvcc is not on PATH"))


@pytest.fixture(autouse=True)
def _private_cache(tmp_path_factory, monkeypatch):
    """Each test session gets its own disk cache, so tests never touch the user's."""
    if "KGEN_TEST_SHARED_CACHE" not in os.environ:
        monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "kgen-cache"))


@pytest.fixture
def rng():
    return np.random.default_rng()


def cuda_torch():
    """torch with a CUDA device, or the test is skipped saying which is missing."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA device")
    return torch


def strided_operand(torch, rows, cols, layout, pad, offset, dtype):
    """A rows x cols CUDA matrix of standard normal values (drawn in float64, stored as
    `dtype`) in `layout` ("row" or "col"), with leading dimension (contiguous size + pad +
    offset) and its first element `offset` elements into the storage."""
    if layout == "row":
        base = torch.randn(rows, cols + pad + offset, device="cuda", dtype=torch.float64).to(dtype)
        return base[:, offset:offset + cols]
    base = torch.randn(cols, rows + pad + offset, device="cuda", dtype=torch.float64).to(dtype)
    return base[:, offset:offset + rows].t()


def rel_error(got, ref) -> float:
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return float("inf")
    if not np.all(np.isfinite(got)):
        return float("inf")
    denom = np.linalg.norm(ref)
    return float(np.linalg.norm(got - ref) / (denom if denom > 0 else 1.0))
