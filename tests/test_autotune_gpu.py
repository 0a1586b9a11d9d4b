"""The autotuner and tuned dispatch on a real GPU: compile pool, verification, CUDA-event
timing, the database and kgen.matmul / kgen.dot / kgen.reduce."""
from __future__ import annotations

import time

import numpy as np
import pytest

import kgen
from conftest import rel_error
from kgen.tune.records import TuneError
from kgen.tune.tuner import autotune as tune
from kgen.tune.dispatch import forget, select

pytestmark = pytest.mark.gpu

ODD = {"M": 300, "N": 200, "K": 100}  # no multiple of any tile: edges everywhere


@pytest.fixture(autouse=True)
def _fresh():
    forget()
    yield
    forget()


def test_real_tune_verifies_times_and_stores(tmp_path):
    db = str(tmp_path / "t.sqlite3")
    r = tune(kgen.Matmul, ODD, "float32", strategy="random", max_configs=12, seed=0, db=db, workers=4)
    assert r.best is not None and r.best_ms > 0 and not r.from_db
    ok = r.by_status("ok")
    assert len(ok) + len(r.by_status("wrong-result")) + len(r.by_status("launch-error")) == r.counts["launched"]
    assert all(x.resources and x.median_ms > 0 and x.samples >= 1 for x in ok)
    assert r.top(1)[0].spec == r.best and r.note
    # The winner is right on fresh data, and a second tune is a database hit.
    rng = np.random.default_rng()
    A = rng.standard_normal((300, 100)).astype(np.float32)
    B = rng.standard_normal((100, 200)).astype(np.float32)
    assert rel_error(kgen.build(r.best)(A, B), A.astype(np.float64) @ B) <= r.best.tolerance_for(ODD)
    t0 = time.perf_counter()
    again = tune(kgen.Matmul, ODD, "float32", strategy="random", max_configs=12, db=db)
    assert again.from_db and time.perf_counter() - t0 < 1.0 and again.best == r.best


def test_wrong_results_are_caught_by_verification(tmp_path, monkeypatch):
    # With a zero tolerance every candidate's (tiny, honest) rounding error is "wrong":
    # each must be recorded as such, with its measured error, and the run must say none passed.
    monkeypatch.setattr(kgen.Matmul, "tolerance_for", lambda self, problem, inputs=None: 0.0)
    with pytest.raises(TuneError, match="no candidate"):
        tune(kgen.Matmul, ODD, strategy="random", max_configs=4, seed=1, db=str(tmp_path / "w.sqlite3"))


def test_verification_on_the_gpu_matches_the_host(tmp_path):
    """Large outputs are compared on the GPU; the error must agree with a host comparison."""
    from kgen.tune.runners import CudaRunner

    p = {"M": 512, "N": 512, "K": 256}
    runner = CudaRunner(seed=0)
    runner.prepare(kgen.Matmul, p, "float32", seed=3)
    assert runner._sumsq is not None  # 512 x 512 outputs take the GPU path
    spec = kgen.Matmul.default_spec(p, "float32")
    err, tol, bad = runner.verify(spec)
    got = runner._out.get().astype(np.float64)
    host = float(np.linalg.norm(got - runner._ref) / np.linalg.norm(runner._ref))
    assert bad == 0 and 0 < err <= tol and err == pytest.approx(host, rel=1e-6)
    times = runner.time([spec, spec], 5)
    assert len(times) == 2 and all(len(t) == 5 and min(t) > 0 for t in times)


def test_tuned_dot_and_reduce_dispatch():
    n = (1 << 22) + 3
    r = tune(kgen.Reduce, {"n": n, "op": "dot"}, strategy="guided", max_configs=16, seed=0)
    assert select(kgen.Reduce, {"n": n, "op": "dot"}).origin == "exact"
    assert select(kgen.Reduce, {"n": n // 2, "op": "dot"}).origin == "nearest"
    # No record for max: the shipped table (or, without one, the family rule) answers.
    assert select(kgen.Reduce, {"n": n, "op": "max"}).origin in ("shipped", "default")
    rng = np.random.default_rng()
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    ref = float(np.dot(x.astype(np.float64), y.astype(np.float64)))
    got = float(kgen.dot(x, y))
    assert abs(got - ref) <= r.best.tolerance_for({"n": n, "op": "dot"}) * max(abs(ref), 1.0)
    assert float(kgen.reduce(x, op="max")) == float(x.max())
    with pytest.raises(kgen.ArrayError, match="takes 2 input"):
        kgen.reduce(x, op="dot")


def test_matmul_dispatch_numpy_and_transposed_device_views():
    rng = np.random.default_rng()
    A = rng.standard_normal((257, 129)).astype(np.float32)
    B = rng.standard_normal((129, 65)).astype(np.float32)
    C = kgen.matmul(A, B)
    assert rel_error(C, A.astype(np.float64) @ B) < 1e-5
    torch = pytest.importorskip("torch")
    At = torch.from_numpy(np.ascontiguousarray(A.T)).cuda().T  # a column-major view of A
    Bd = torch.from_numpy(B).cuda()
    Cd = kgen.matmul(At, Bd)
    assert isinstance(Cd, torch.Tensor) and rel_error(Cd.cpu().numpy(), A.astype(np.float64) @ B) < 1e-5
    with pytest.raises(kgen.ArrayError, match="inner dimensions"):
        kgen.matmul(A, A)


def test_cli_tune_and_database_hit(tmp_path, capsys):
    from kgen.cli import tune as tune_cli

    argv = ["matmul", "--shape", "300x200x100", "--strategy", "guided", "--max-configs", "12",
            "--db", str(tmp_path / "c.sqlite3"), "--quiet"]
    assert tune_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert "best " in out and "TFLOP/s" in out and "median ms" in out
    t0 = time.perf_counter()
    assert tune_cli.main(argv) == 0
    assert time.perf_counter() - t0 < 1.0 and "from the tuning database" in capsys.readouterr().out


def test_a_skinny_wt_problem_is_timed_on_wt_operands_and_runs_for_wt_calls(tmp_path, monkeypatch):
    """The runner hands a skinny candidate B stored column by column when the problem says so (the
    dot forms run, not the axpy ones), and kgen.matmul on x @ W.t() then runs the tuned spec."""
    import torch

    from kgen.tune.dispatch import call_choice
    from kgen.tune.runners import CudaRunner

    p = {"M": 4, "N": 3000, "K": 2048, "layout_b": "col"}
    runner = CudaRunner(seed=0)
    runner.prepare(kgen.Skinny, kgen.Skinny.normalize_problem(p), "float32", seed=1)
    spec = kgen.Skinny.default_spec(p, "float32")
    B = runner._device_inputs(spec)[1]
    assert B.flags.f_contiguous and not B.flags.c_contiguous
    err, tol, bad = runner.verify(spec)
    assert bad == 0 and err <= tol
    db = str(tmp_path / "s.sqlite3")
    r = tune(kgen.Skinny, p, "float32", strategy="random", max_configs=6, seed=0, db=db, workers=4)
    assert r.best is not None and r.best_ms > 0
    monkeypatch.setenv("KGEN_TUNE_DB", db)
    forget()
    W = torch.randn(3000, 2048, device="cuda")
    x = torch.randn(4, 2048, device="cuda")
    choice, _ = call_choice(x, W.t())
    assert choice.origin == "exact" and choice.spec == r.best
    got = kgen.matmul(x, W.t())
    want = x.double() @ W.t().double()
    assert float(torch.linalg.norm(got.double() - want) / torch.linalg.norm(want)) <= r.best.tolerance_for(p)
