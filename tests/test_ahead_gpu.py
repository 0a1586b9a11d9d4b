"""Compiling ahead on the GPU: after `kgen.tune.ahead.compile_ahead` (what `kgen cache fill` runs)
fills an empty cache folder, first calls of kgen.matmul on those products, in a process that
has built nothing, run no nvcc and give results within their tolerance of float64."""
import random

import pytest
from conftest import cuda_torch

import kgen
import kgen.core.compiler as compiler
import kgen.core.kernel as kernel_mod
from kgen.tune import ahead, dispatch

pytestmark = pytest.mark.gpu


def _rel(got, ref):
    return float((got.double() - ref).norm() / ref.norm())


def test_first_calls_after_a_fill_compile_nothing(tmp_path, monkeypatch):
    torch = cuda_torch()
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KGEN_TUNE_DB", str(tmp_path / "empty.db"))
    rng = random.Random()
    # Sides drawn afresh, so no spec is one an earlier test built: few rows (the skinny forms
    # and the wgmma transposed tiles), row-major and W.t() weights, and a larger product.
    products = [ahead.Product(rng.randint(1, 16), rng.randint(1500, 6000), rng.randint(1500, 6000), "float32"),
                ahead.Product(rng.randint(1, 16), rng.randint(1500, 6000), rng.randint(1500, 6000), "bfloat16"),
                ahead.Product(rng.randint(17, 200), 64 * rng.randint(30, 90), 64 * rng.randint(30, 90), "bfloat16"),
                ahead.Product(rng.randint(2, 12), rng.randint(1500, 6000), rng.randint(1500, 6000), "float16",
                              weight_t=False),
                ahead.Product(rng.randint(300, 900), rng.randint(300, 900), rng.randint(300, 900), "float32",
                              weight_t=False)]
    monkeypatch.setattr(compiler, "_memory", {})
    monkeypatch.setattr(kernel_mod, "_built", {})
    dispatch.forget()
    report = ahead.compile_ahead(products)
    assert report.failed == [] and report.compiled + report.cached == len(report.specs)

    # Now as a new process would be: nothing in memory, the disk cache filled.
    monkeypatch.setattr(compiler, "_memory", {})
    monkeypatch.setattr(kernel_mod, "_built", {})
    dispatch.forget()
    runs = []
    real = compiler._run_nvcc

    def counted(*args, **kwargs):
        runs.append(args[2] if len(args) > 2 else "")
        return real(*args, **kwargs)

    monkeypatch.setattr(compiler, "_run_nvcc", counted)
    for p in products:
        dt = getattr(torch, p.dtype)
        A = torch.randn(p.M, p.K, device="cuda", dtype=dt)
        B = torch.randn(p.N, p.K, device="cuda", dtype=dt).t() if p.weight_t else \
            torch.randn(p.K, p.N, device="cuda", dtype=dt)
        out = torch.full((p.M, p.N), float("nan"), device="cuda", dtype=dt)
        kgen.matmul(A, B, out=out)
        torch.cuda.synchronize()
        tol = 1e-5 if p.dtype == "float32" else 2e-2
        assert _rel(out, A.double() @ B.double()) < tol, p.label()
    assert runs == [], f"first calls ran nvcc {len(runs)} times after the fill: {products}"
