"""The kgen command line, run as a user would."""
from __future__ import annotations

import subprocess
import sys

import pytest

import kgen
from kgen.core import compiler


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kgen", *args], capture_output=True, text=True, **kw)


def test_render_inline_and_file(tmp_path):
    out = run("render", '{"kernel": "reduce", "op": "sum"}')
    assert out.returncode == 0 and "kgen_reduce" in out.stdout
    f = tmp_path / "spec.json"
    f.write_text(kgen.Matmul().to_json())
    out2 = run("render", str(f))
    assert out2.returncode == 0 and out2.stdout == kgen.render(kgen.Matmul())


@pytest.mark.nvcc
def test_emit_writes_a_file_nvcc_compiles(tmp_path):
    out = run("emit", '{"kernel": "matmul"}', "-o", str(tmp_path / "mm.cu"))
    assert out.returncode == 0, out.stderr
    proc = subprocess.run([compiler.find_nvcc(), "-cubin", "-arch=sm_90", "-o", str(tmp_path / "mm.cubin"),
                           str(tmp_path / "mm.cu")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    sa = run("emit", '{"kernel": "matmul"}', "-o", str(tmp_path / "sa.cu"), "--standalone")
    assert sa.returncode == 0 and "int main(" in (tmp_path / "sa.cu").read_text()


@pytest.mark.parametrize("args, needle", [
    (("render", '{"kernel": "matmul", "tile": [3, 3]}'), "tile"),
    (("render", '{"kernel": "nope"}'), "nope"),
    (("render", '{"kernel": '), "not valid JSON"),
    (("render", "missing.json"), "missing.json"),
    (("emit", '{"kernel": "matmul"}', "-o", "/no/such/folder/x.cu"), "/no/such/folder"),
])
def test_bad_input_is_one_line_and_nonzero(args, needle):
    out = run(*args)
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kgen: error:") and needle in lines[0]


def test_info_and_cache_commands(tmp_path):
    env = {**__import__("os").environ, "KGEN_CACHE_DIR": str(tmp_path)}
    info = run("info", env=env)
    assert info.returncode == 0 and "kgen" in info.stdout and "device" in info.stdout
    assert "cache" in info.stdout and str(tmp_path) in info.stdout
    (tmp_path / "cubin").mkdir()
    (tmp_path / "cubin" / "x.bin").write_bytes(b"junk")
    ci = run("cache", "info", env=env)
    assert ci.returncode == 0 and "entries   1" in ci.stdout
    cc = run("cache", "clear", env=env)
    assert cc.returncode == 0 and "removed 1" in cc.stdout
    assert not list((tmp_path / "cubin").glob("*.bin"))


@pytest.mark.nvcc
def test_demo_without_gpu_compiles_and_says_where(tmp_path):
    from kgen.core import runtime

    if runtime.gpu_available()[0]:
        pytest.skip("a GPU is present: the demo runs kernels instead")
    out = run("demo", "--out", str(tmp_path / "demo"))
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "demo") in out.stdout
    assert (tmp_path / "demo" / "matmul.cu").is_file() and (tmp_path / "demo" / "reduce.cu").is_file()


def test_bench_log_uniform_draws_stay_in_range_and_spread_over_octaves():
    import random

    from kgen.bench.results import log_uniform

    rng = random.Random(3)
    draws = [log_uniform(rng, 2048, 14336) for _ in range(2000)]
    assert min(draws) >= 2048 and max(draws) <= 14336
    # Log-uniform: about as many draws in [2048, 5418) as in [5418, 14336) (the geometric middle).
    low = sum(d < 5418 for d in draws)
    assert 800 < low < 1200
