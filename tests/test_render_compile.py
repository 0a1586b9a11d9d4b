"""Rendering is deterministic and every template variant compiles with nvcc for sm_90."""
from __future__ import annotations

import random
import subprocess
import sys

import jinja2
import pytest

import kgen
from kgen.core import compiler
from kgen.core.render import environment


def test_render_is_byte_identical_in_and_across_processes():
    spec = kgen.Matmul(tile=(64, 64, 8), thread_tile=(4, 4), shared_memory=True)
    a, b = kgen.render(spec), kgen.render(kgen.spec_from_json(spec.to_json()))
    assert a == b
    code = "import kgen, sys; sys.stdout.write(kgen.render(kgen.spec_from_json(%r)))" % spec.to_json()
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert other == a


def test_header_carries_spec_and_version():
    spec = kgen.Reduce(op="sum")
    src = kgen.render(spec)
    assert spec.to_json() in src.splitlines()[2]
    assert f"kgen {kgen.__version__}" in src


def test_undefined_template_variables_are_errors():
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ no_such_value }}").render()


def test_emit_writes_file_and_folder(tmp_path):
    spec = kgen.Matmul()
    p = kgen.emit(spec, tmp_path / "mm.cu")
    assert p.read_text() == kgen.render(spec)
    q = kgen.emit(spec, tmp_path, standalone=True)
    assert q.parent == tmp_path and "int main(" in q.read_text()


def _sample(cls, problem, n, seed=1234):
    space = cls.search_space(problem, "float32") + cls.search_space(problem, "float64")
    rnd = random.Random(seed)
    picked = rnd.sample(space, min(n, len(space)))
    return [cls.default_spec(problem, "float32")] + picked


MATMUL_VARIANTS = _sample(kgen.Matmul, {"M": 1000, "N": 1000, "K": 1000}, 14) + [
    kgen.Matmul(layout_a="col", layout_b="col"), kgen.Matmul(dtype="float64", shared_memory=True,
                                                             tile=(32, 32, 8), thread_tile=(2, 2))]
REDUCE_VARIANTS = _sample(kgen.Reduce, {"n": 1 << 20, "op": "dot"}, 6) + _sample(
    kgen.Reduce, {"n": 1 << 20, "op": "sum"}, 4) + [kgen.Reduce(op="min"), kgen.Reduce(op="max", dtype="float64")]


@pytest.mark.nvcc
@pytest.mark.parametrize("spec", MATMUL_VARIANTS + REDUCE_VARIANTS, ids=lambda s: s.kernel + "-" + s.key[:8])
def test_variant_compiles_for_sm90(spec):
    c = kgen.compile(spec, arch="sm_90")
    assert c.cubin.startswith(b"\x7fELF")
    assert c.resources, "ptxas reported no kernel"
    for name, res in c.resources.items():
        assert res["registers"] > 0, name


@pytest.mark.nvcc
@pytest.mark.parametrize("spec", [kgen.Matmul(), kgen.Reduce()], ids=["matmul", "reduce"])
def test_standalone_builds_an_executable(spec, tmp_path):
    src = kgen.emit(spec, tmp_path / "x.cu", standalone=True)
    proc = subprocess.run([compiler.find_nvcc(), "-arch=sm_90", "-o", str(tmp_path / "x"), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x").is_file()


@pytest.mark.nvcc
@pytest.mark.parametrize("spec", [kgen.Skinny.default_spec({"M": 40, "N": 4096, "K": 4096}, "float32"),
                                  kgen.Skinny.wgmma_default_spec({"M": 40, "N": 4096, "K": 4096}),
                                  kgen.Skinny.wgmma_default_spec({"M": 40, "N": 4096, "K": 4096}, "bfloat16")],
                         ids=["skinny-mma_sync", "skinny-wgmma", "skinny-wgmma-bfloat16"])
def test_skinny_standalone_builds_with_the_command_it_prints(spec, tmp_path):
    src = kgen.emit(spec, tmp_path / "x.cu", standalone=True)
    line = next(ln for ln in src.read_text().splitlines() if "standalone check: nvcc" in ln)
    flags = line.split("nvcc", 1)[1].split("-o")[0].split()
    proc = subprocess.run([compiler.find_nvcc(), *flags, "-o", str(tmp_path / "x"), str(src)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    if spec.instruction == "wgmma":
        assert flags == ["-gencode=arch=compute_90a,code=sm_90a"]
        # Built for plain sm_90 the wgmma code stops at a message that says what it needs.
        plain = subprocess.run([compiler.find_nvcc(), "-arch=sm_90", "-o", str(tmp_path / "y"), str(src)],
                               capture_output=True, text=True)
        assert plain.returncode != 0 and "need sm_90a" in plain.stderr
