"""A skinny product is tuned for the storage order it is called with. Its spec has no layout field: the
operands' strides pick the kernel at launch, the dot forms for B = W.t() (the large operand
k-contiguous) and the axpy forms for a row-major B, different kernels with different best fields. So the
problem names a column-major operand ("layout_b": "col"), the tuner's runner hands the candidates operands
stored that way, and dispatch looks a call up only among entries of its own storage order."""
from __future__ import annotations

import numpy as np
import pytest

import kgen
from kgen.tune import ahead, dispatch
from kgen.tune.db import TuneDB, problem_key
from kgen.tune.dispatch import forget
from kgen.tune.runners import RecordedRunner, operand_layouts
from kgen.tune.tuner import autotune, identity

H100 = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
P = {"M": 4, "N": 4096, "K": 4096}


@pytest.fixture
def db(tmp_path):
    forget()
    d = TuneDB(tmp_path / "tune.sqlite3")
    yield d
    d.close()
    forget()


def _store(db, problem, spec, ms, dtype="float32"):
    ident = identity(kgen.Skinny, kgen.Skinny.normalize_problem(problem), dtype, H100)
    key = problem_key("skinny", dtype, ident["problem"], H100.name, H100.arch, ident["nvcc"], ident["kgen"])
    db.put_result(key, "exhaustive", ident, spec.to_json(), ms, {"note": "test"})


def _stand_ins(M, N, K, weight_t):
    return ahead.Product(M, N, K, "float32", weight_t).stand_ins()


def test_the_problem_names_a_column_major_operand_and_leaves_row_major_out():
    assert kgen.Skinny.normalize_problem(dict(P)) == P
    assert kgen.Skinny.normalize_problem(dict(P, layout_b="row", layout_a="row")) == P
    assert kgen.Skinny.normalize_problem(dict(P, layout_b="col")) == dict(P, layout_b="col")
    with pytest.raises(ValueError, match="layout_b='t' is not allowed: 'row' or 'col'"):
        kgen.Skinny.normalize_problem(dict(P, layout_b="t"))
    # The row-major problem's tuning key is the one it had before storage orders were named.
    plain = problem_key("skinny", "float32", P, "g", "sm_90", "13.0", "0.1.0")
    assert problem_key("skinny", "float32", kgen.Skinny.normalize_problem(dict(P, layout_b="row")), "g", "sm_90",
                       "13.0", "0.1.0") == plain
    assert problem_key("skinny", "float32", kgen.Skinny.normalize_problem(dict(P, layout_b="col")), "g", "sm_90",
                       "13.0", "0.1.0") != plain


def test_the_runner_stores_operands_as_the_spec_or_else_the_problem_says():
    skinny = kgen.Skinny.default_spec(P, "float32")
    assert operand_layouts(skinny, kgen.Skinny.normalize_problem(dict(P, layout_b="col"))) == ("row", "col")
    assert operand_layouts(skinny, P) == ("row", "row")
    tiled = kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True, layout_b="col")
    assert operand_layouts(tiled, P) == ("row", "col")  # the spec's own fields win
    assert operand_layouts(tiled.replace(layout_b="row"), dict(P, layout_b="col")) == ("row", "row")


def test_dispatch_gives_a_call_only_entries_of_its_storage_order(db):
    for_wt = kgen.Skinny.default_spec(P, "float32").replace(warp_cols=2, threads=64)
    for_row = kgen.Skinny.default_spec(P, "float32").replace(lane_vectors=2, threads=128)
    _store(db, dict(P, layout_b="col"), for_wt, 0.010)
    choice, _ = dispatch.call_choice(*_stand_ins(4, 4096, 4096, True), device=H100, db=db)
    assert choice.origin == "exact" and choice.spec == for_wt
    # A row-major B does not take the W.t() entry, not even as the nearest one.
    choice, _ = dispatch.call_choice(*_stand_ins(4, 4096, 4096, False), device=H100, db=db)
    assert choice.origin in ("shipped", "default")
    _store(db, P, for_row, 0.012)
    forget()
    choice, _ = dispatch.call_choice(*_stand_ins(4, 4096, 4096, False), device=H100, db=db)
    assert choice.origin == "exact" and choice.spec == for_row
    # Near shapes take the entry of their own storage order.
    choice, _ = dispatch.call_choice(*_stand_ins(5, 4096, 4096, True), device=H100, db=db)
    assert choice.origin == "nearest" and choice.spec == for_wt and choice.tuned_problem.get("layout_b") == "col"
    choice, _ = dispatch.call_choice(*_stand_ins(5, 4096, 4096, False), device=H100, db=db)
    assert choice.origin == "nearest" and choice.spec == for_row and "layout_b" not in choice.tuned_problem


def test_a_tuned_wt_problem_is_what_a_wt_call_then_runs(db):
    """autotune on the W.t() problem (a recorded GPU whose times favour one spec) stores it under that
    storage order; a call on W.t() stand-ins runs it, a row-major call does not."""
    problem = dict(P, layout_b="col")
    space = list(kgen.Skinny.search_space(problem, "float32"))
    assert len(space) > 4
    favourite = space[len(space) // 2]
    runner = RecordedRunner(lambda s: 0.010 if s == favourite else 0.020 + (hash(s.key) % 7) * 1e-3, device=H100)
    prepared = []
    runner.prepare = lambda cls, prob, dtype, seed=None: prepared.append(prob)  # type: ignore[method-assign]

    def resources(spec, arch):
        return {"kgen_skinny_dot_v4": {"registers": 64, "shared_bytes": 0, "stack_bytes": 0, "spill_stores": 0,
                                       "spill_loads": 0}}

    result = autotune(kgen.Skinny, problem, "float32", strategy="exhaustive", runner=runner, db=db,
                      compiler=resources, max_configs=len(space))
    assert prepared and prepared[0].get("layout_b") == "col"  # the runner is told how to store B
    assert result.best == favourite
    forget()
    choice, spec = dispatch.call_choice(*_stand_ins(4, 4096, 4096, True), device=H100, db=db)
    assert choice.origin == "exact" and choice.spec == favourite
    choice, _ = dispatch.call_choice(*_stand_ins(4, 4096, 4096, False), device=H100, db=db)
    assert choice.origin != "exact"


def test_only_the_skinny_family_carries_storage_orders_in_its_problem():
    A, B = _stand_ins(4, 4096, 4096, True)
    assert dispatch.family_problem(kgen.Skinny, dict(P), A, B) == dict(P, layout_b="col")
    assert dispatch.family_problem(kgen.TensorMatmul, dict(P), A, B) == P
    A, B = _stand_ins(4, 4096, 4096, False)
    assert dispatch.family_problem(kgen.Skinny, dict(P), A, B) == P
    # Few columns: the large operand is A; a column-major A is named too.
    At = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (4096, 4096), (4, 4096 * 4))
    Bs = np.zeros((4096, 4), np.float32)
    assert dispatch.family_problem(kgen.Skinny, {"M": 4096, "N": 4, "K": 4096}, At, Bs) == {
        "M": 4096, "N": 4, "K": 4096, "layout_a": "col"}
