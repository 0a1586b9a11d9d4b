"""`kgen which matmul MxNxK`: it answers what kgen.matmul runs (dispatch's own spec, for the GPU named or
this one), says where the spec came from, and refuses bad input with one line."""
from __future__ import annotations

import json

import pytest

import kgen
from kgen.cli import main as cli
from kgen.cli.which import changed_fields
from kgen.tune import ahead, dispatch
from kgen.tune.db import TuneDB, problem_key
from kgen.tune.dispatch import forget
from kgen.tune.tuner import identity

H100 = ["--arch", "sm_90", "--gpu", "NVIDIA H100 80GB HBM3", "--sms", "132"]


def _which(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main(["which", "matmul", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def empty_db(tmp_path):
    forget()
    yield str(tmp_path / "empty.db")
    forget()


@pytest.mark.parametrize("M, N, K, dtype, weight_t", [
    (4, 4096, 4096, "bfloat16", True),
    (4, 4096, 4096, "bfloat16", False),
    (3, 14336, 4096, "float32", True),
    (40, 1023, 4096, "float32", False),
    (300, 1000, 700, "float64", True),
    (2048, 2048, 2048, "float16", False),
    (100, 100, 100, "float32", True),
])
def test_which_answers_with_the_spec_dispatch_runs(capsys, empty_db, M, N, K, dtype, weight_t):
    code, out, err = _which(capsys, f"{M}x{N}x{K}", "--dtype", dtype, *([] if weight_t else ["--row-major"]),
                            *H100, "--db", empty_db, "--json")
    assert code == 0, err
    report = json.loads(out)
    device = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    want = ahead.specs_for([ahead.Product(M, N, K, dtype, weight_t)], device, db=False)[0]
    assert report["key"] == want.key and report["family"] == want.kernel
    assert kgen.spec_from_json(json.dumps(report["spec"])) == want
    assert report["origin"] in ("shipped", "default")
    assert report["device"] == {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "multiprocessors": 132}
    assert report["changed_fields"] == json.loads(json.dumps(changed_fields(want)))


def test_which_names_a_tuned_entry_and_its_time(capsys, tmp_path):
    forget()
    device = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    problem = {"M": 100, "N": 100, "K": 100}
    family = type(ahead.specs_for([ahead.Product(100, 100, 100, "float32", False)], device, db=False)[0])
    assert family is kgen.Matmul  # a product small enough for the tiled family on this GPU
    tuned = kgen.Matmul(tile=(32, 32, 16), thread_tile=(2, 2), shared_memory=True)
    db = TuneDB(tmp_path / "tuned.db")
    ident = identity(kgen.Matmul, kgen.Matmul.normalize_problem(problem), "float32", device)
    key = problem_key("matmul", "float32", ident["problem"], device.name, device.arch, ident["nvcc"], ident["kgen"])
    db.put_result(key, "exhaustive", ident, tuned.to_json(), 0.0123, {"note": "test"})
    try:
        code, out, err = _which(capsys, "100x100x100", "--row-major", *H100, "--db", str(tmp_path / "tuned.db"))
        assert code == 0, err
        assert "from      tuned for this product on this GPU" in out and "0.0123 ms" in out
        assert "family    kgen.Matmul (matmul): Matmul" in out
        code, out, err = _which(capsys, "100x100x100", "--row-major", *H100, "--db", str(tmp_path / "tuned.db"),
                                "--json")
        report = json.loads(out)
        assert report["origin"] == "exact" and report["tuned"]["ms"] == pytest.approx(0.0123)
        assert tuple(report["spec"]["tile"]) == (32, 32, 16)
    finally:
        forget()


@pytest.mark.nvcc
def test_which_prints_what_its_kernels_use_with_compile(capsys, empty_db):
    code, out, err = _which(capsys, "2x4096x4096", "--dtype", "float64", *H100, "--db", empty_db, "--compile")
    assert code == 0, err
    kernels = [line for line in out.splitlines() if line.startswith("kernel    kgen_skinny_")]
    assert kernels and all(" regs, " in line and " B spilled" in line for line in kernels)
    # The main entry points report the shared memory their launch asks for, not ptxas' static figure alone.
    assert any("dynamic)" in line for line in kernels if "_dot_" in line)


@pytest.mark.parametrize("argv, message", [
    (["4x4096"], "is not MxNxK"),
    (["4x4096x4096", "--dtype", "int8", *H100], "--dtype 'int8' is not allowed"),
    (["4x4096x4096", "--gpu", "NVIDIA H200"], "--gpu and --sms describe a GPU that is not here"),
    (["0x4096x4096", *H100], "0x4096x4096"),
])
def test_which_refuses_bad_input_in_one_line(capsys, empty_db, argv, message):
    code, out, err = _which(capsys, *argv, "--db", empty_db)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("call, length, dtype, op", [
    ("reduce", 30000001, "float32", "max"),
    ("reduce", 1 << 20, "int32", "sum"),
    ("dot", 1048573, "float64", "dot"),
    ("reduce", 7, "float64", "min"),
])
def test_which_answers_for_dot_and_reduce_as_dispatch_does(capsys, empty_db, call, length, dtype, op):
    argv = [call, str(length), "--dtype", dtype, *(["--op", op] if call == "reduce" else []), *H100,
            "--db", empty_db, "--json"]
    code = cli.main(["which", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads(out)
    device = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    want = dispatch.resolve_spec(kgen.Reduce, {"n": length, "op": op}, dtype, device=device, db=False)
    assert report["key"] == want.key and report["spec"]["op"] == op and report["family"] == "reduce"
    assert report["form"] == f"Reduce, {want.strategy}"


@pytest.mark.parametrize("argv, message", [
    (["dot", "10", "--dtype", "int32"], "dtype='int32' is not allowed for op='dot'"),
    (["reduce", "0"], "'0' is not a length"),
    (["reduce", "4x4"], "'4x4' is not a length"),
    (["dot", "100", "--op", "max"], "--op goes with 'kgen which reduce'"),
    (["reduce", "100", "--row-major"], "--row-major and --allow-tf32 go with 'kgen which matmul'"),
    (["matmul", "4x4x4", "--op", "max"], "--op goes with 'kgen which reduce', not matmul"),
])
def test_which_refuses_options_of_another_call(capsys, empty_db, argv, message):
    code = cli.main(["which", *argv, *H100, "--db", empty_db])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and message in err and len(err.strip().splitlines()) == 1


def test_changed_fields_lists_only_what_differs_from_the_family_defaults():
    assert changed_fields(kgen.Matmul()) == {}
    spec = kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True)
    assert changed_fields(spec) == {"tile": (64, 64, 16), "thread_tile": (4, 4), "shared_memory": True}


def test_the_glance_grid_in_dispatch_md_is_what_dispatch_runs():
    """docs/dispatch.md's grid (an H100, a 4096 x 4096 weight, no tuning data) against dispatch itself:
    a rule that moves a product to another family or form fails here until the grid is updated."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "dispatch.md").read_text(encoding="utf-8")
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| rows (M) | float32, `W.t()`"))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    columns = []
    for cell in header[1:]:
        dtype, order = (part.strip() for part in cell.split(","))
        columns.append((dtype, order == "`W.t()`"))
    device = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    checked = 0
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        M = int(cells[0])
        for (dtype, weight_t), shown in zip(columns, cells[1:]):
            spec = ahead.specs_for([ahead.Product(M, 4096, 4096, dtype, weight_t)], device, db=False)[0]
            assert spec.form() == shown, (M, dtype, weight_t)
            checked += 1
    assert checked >= 50 and {d for d, _ in columns} == {"float32", "bfloat16", "float64"}
