"""pycuda's SourceModule takes kgen's rendered source as it is.

    SourceModule(kgen.render(spec), no_extern_c=True, options=sourcemodule_options(spec))

The rendered source declares its entry points extern "C" and includes only the CUDA
toolkit's headers, so it needs no include path; kgen.build(spec, compiler="sourcemodule")
compiles the same way (pycuda's compiler and cache) and launches through the family's
kernel class. On the CPU: nvcc accepts the source on the command line SourceModule runs,
and prints nothing (pycuda turns any nvcc output into a warning). On the GPU: every entry
point loads, and matmul and reduce results match float64 with NaN-poisoned outputs.
"""
from __future__ import annotations

import shutil
import subprocess
import warnings

import numpy as np
import pytest

import kgen
from kgen.core.kernel import sourcemodule_options

MATMULS = [kgen.Matmul(), kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True),
           kgen.Matmul(dtype="float64")]
REDUCES = [kgen.Reduce(op="sum"), kgen.Reduce(op="dot"), kgen.Reduce(op="max", dtype="float64")]


def _nvcc() -> str:
    found = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    return found


def test_unknown_compiler_is_refused_naming_the_allowed_ones():
    with pytest.raises(ValueError, match=r"compiler='nvrtc' is not allowed: one of \['kgen', 'sourcemodule'\]"):
        kgen.build(kgen.Matmul(), compiler="nvrtc")


def test_options_are_kgens_code_generation_flags():
    opts = sourcemodule_options(kgen.Reduce(op="sum"))
    assert opts[:2] == ["-O3", "-std=c++17"]
    assert not any(o.startswith("-I") for o in opts)  # the source is self-contained
    assert "-v" not in opts  # ptxas' report would make pycuda warn on every build


@pytest.mark.nvcc
@pytest.mark.parametrize("spec", MATMULS + REDUCES, ids=lambda s: f"{s.kernel}-{s.key[:8]}")
def test_rendered_source_compiles_silently_as_sourcemodule_compiles_it(tmp_path, spec):
    """pycuda.compiler.compile writes the source to kernel.cu in a fresh folder and runs
    `nvcc --cubin OPTIONS -arch sm_XY kernel.cu` there (no_extern_c=True adds nothing)."""
    (tmp_path / "kernel.cu").write_text(kgen.render(spec))
    cmd = [_nvcc(), "--cubin", *sourcemodule_options(spec), "-arch", "sm_90", "kernel.cu"]
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "" and proc.stderr == "", "pycuda would warn: " + proc.stdout + proc.stderr
    assert (tmp_path / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"


def _sourcemodule(spec):
    from pycuda.compiler import SourceModule

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nvcc said something: pycuda would warn every user
        return SourceModule(kgen.render(spec), no_extern_c=True, options=sourcemodule_options(spec))


@pytest.mark.gpu
@pytest.mark.parametrize("spec", MATMULS + REDUCES, ids=lambda s: f"{s.kernel}-{s.key[:8]}")
def test_sourcemodule_loads_every_entry_point(spec):
    module = _sourcemodule(spec)
    entry_points = kgen.compile(spec).resources  # ptxas' report names each kernel in the cubin
    assert entry_points
    for name in entry_points:
        assert module.get_function(name) is not None


@pytest.mark.gpu
@pytest.mark.parametrize("spec", MATMULS, ids=lambda s: f"{s.kernel}-{s.key[:8]}")
def test_matmul_built_through_sourcemodule_matches_float64(spec):
    from pycuda import gpuarray

    k = kgen.build(spec, compiler="sourcemodule")
    assert k.compiled.origin == "sourcemodule" and k is not kgen.build(spec)
    rng = np.random.default_rng()
    for M, N, K in ((256, 192, 320), (131, 77, 45)):
        problem = {"M": M, "N": N, "K": K}
        A, B = kgen.Matmul.make_inputs(problem, spec.dtype, rng)
        out = gpuarray.empty((M, N), spec.dtype)
        out.fill(np.nan)  # every element must be written
        k(gpuarray.to_gpu(A), gpuarray.to_gpu(B), out=out)
        got = out.get().astype(np.float64)
        ref = kgen.Matmul.reference_output(problem, (A, B))
        assert np.all(np.isfinite(got)), f"{M}x{N}x{K}: output elements left unwritten"
        err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
        assert err <= spec.tolerance_for(problem, (A, B)), (M, N, K, err)


@pytest.mark.gpu
@pytest.mark.parametrize("spec", REDUCES, ids=lambda s: f"{s.kernel}-{s.key[:8]}")
def test_reduce_built_through_sourcemodule_matches_float64(spec):
    from pycuda import gpuarray

    k = kgen.build(spec, compiler="sourcemodule")
    assert k.compiled.origin == "sourcemodule"
    rng = np.random.default_rng()
    for n in (1, 1000, 1_000_003):
        problem = {"n": n, "op": spec.op}
        inputs = kgen.Reduce.make_inputs(problem, spec.dtype, rng)
        out = gpuarray.empty((1,), spec.dtype)
        out.fill(np.nan)
        k(*(gpuarray.to_gpu(a) for a in inputs), out=out)
        got = float(out.get()[0])
        ref = float(kgen.Reduce.reference_output(problem, inputs))
        assert np.isfinite(got), f"n={n}: the result was not written"
        assert abs(got - ref) / (abs(ref) or 1.0) <= spec.tolerance_for(problem, inputs), (n, got, ref)
