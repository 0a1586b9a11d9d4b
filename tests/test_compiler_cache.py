"""Compiling and caching: memory and disk layers, corrupt entries, errors with context."""
from __future__ import annotations

import pytest

import kgen
from kgen.core import cache, compiler

SRC = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n'


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path))
    compiler.clear_memory_cache()
    yield tmp_path
    compiler.clear_memory_cache()


@pytest.mark.nvcc
def test_memory_then_disk_then_rebuild_after_corruption(fresh):
    first = compiler.compile_cuda(SRC, "sm_90")
    assert first.origin == "nvcc" and first.resources["k"]["registers"] > 0
    assert compiler.compile_cuda(SRC, "sm_90").origin == "memory"
    compiler.clear_memory_cache()
    again = compiler.compile_cuda(SRC, "sm_90")
    assert again.origin == "disk" and again.cubin == first.cubin and again.resources == first.resources
    # Truncate the entry: it is a miss, rebuilt, and rewritten whole.
    entry = cache.DiskCache().path(first.key)
    entry.write_bytes(entry.read_bytes()[:-10])
    compiler.clear_memory_cache()
    assert compiler.compile_cuda(SRC, "sm_90").origin == "nvcc"
    compiler.clear_memory_cache()
    assert compiler.compile_cuda(SRC, "sm_90").origin == "disk"


@pytest.mark.nvcc
def test_key_covers_arch_options_and_source(fresh):
    ver = compiler.nvcc_version()
    keys = {compiler.cache_key(SRC, "sm_90", (), ver), compiler.cache_key(SRC, "sm_80", (), ver),
            compiler.cache_key(SRC, "sm_90", ("-DX",), ver), compiler.cache_key(SRC + " ", "sm_90", (), ver),
            compiler.cache_key(SRC, "sm_90", (), ver + "x")}
    assert len(keys) == 5


@pytest.mark.nvcc
def test_no_cache_env_skips_disk(fresh, monkeypatch):
    monkeypatch.setenv("KGEN_NO_CACHE", "1")
    compiler.compile_cuda(SRC, "sm_90")
    assert not cache.DiskCache().entries()


@pytest.mark.nvcc
def test_compile_error_carries_command_output_and_numbered_source(fresh):
    with pytest.raises(kgen.CompileError) as info:
        compiler.compile_cuda(SRC.replace("2.0f;", "2.0f"), "sm_90")
    err = info.value
    assert "nvcc" in err.command[0] and "-cubin" in err.command
    assert "error" in err.output
    assert "1 | extern" in str(err)


def test_bad_arch_is_a_value_error():
    with pytest.raises(ValueError, match="sm_XY"):
        compiler.check_arch("hopper")


def test_ptxas_report_is_parsed():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kgen_matmul' for 'sm_90'
ptxas info    : Function properties for kgen_matmul
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 16384 bytes smem, 424 bytes cmem[0]
"""
    res = compiler.parse_ptxas(log)["kgen_matmul"]
    assert res == {"registers": 128, "shared_bytes": 16384, "stack_bytes": 16, "spill_stores": 8, "spill_loads": 12}


def test_cache_entries_are_checked(tmp_path):
    store = cache.DiskCache(tmp_path)
    assert store.put("abc", b"\x7fELFpayload", {"arch": "sm_90"})
    assert store.get("abc") == (b"\x7fELFpayload", {"arch": "sm_90"})
    raw = store.path("abc").read_bytes()
    store.path("abc").write_bytes(raw.replace(b"payload", b"pavload"))
    assert store.get("abc") is None
    store.path("abc").write_bytes(b"not a cache file")
    assert store.get("abc") is None
    assert store.get("missing") is None


def test_build_without_pycuda_or_gpu_says_what_is_missing():
    from kgen.core import runtime

    ok, why = runtime.gpu_available()
    if ok:
        pytest.skip("a GPU is present")
    with pytest.raises(kgen.NoGPUError) as info:
        kgen.build(kgen.Matmul())
    assert "pycuda" in str(info.value) or "device" in str(info.value) or "driver" in str(info.value)


@pytest.mark.nvcc
def test_a_compile_that_runs_nvcc_is_logged_and_a_cache_hit_is_not(fresh, caplog):
    """A first call that waits for nvcc says so at INFO (kgen -v), naming the key and the time."""
    import logging

    with caplog.at_level(logging.INFO, logger="kgen.core.compiler"):
        first = compiler.compile_cuda(SRC, "sm_90")
        compiler.clear_memory_cache()
        compiler.compile_cuda(SRC, "sm_90")          # from the disk cache
    runs = [r.getMessage() for r in caplog.records if r.name == "kgen.core.compiler"]
    assert len(runs) == 1 and runs[0].startswith(f"nvcc compiled {first.key[:12]} for sm_90 in ")
