"""CPU tests of the autotuner, the tuning database, dispatch and `kgen tune`.

No GPU: candidates are verified and timed by autotune.RecordedRunner (times from a
function of the spec), and compiled either by a stand-in that returns ptxas-like
resources or, in the tests marked nvcc, by the real nvcc. Everything else (pruning,
failure records, leader re-timing, the database, resume, dispatch) runs for real.
"""
from __future__ import annotations

import hashlib
import json
import math
import multiprocessing
import sqlite3
import time

import pytest

import kgen
from kgen.tune.device import ARCH_LIMITS, DeviceInfo, arch_limits, toolchain_version
from kgen.tune.plot import plot_records
from kgen.tune.prune import ptxas_reason
from kgen.tune.records import TuneError, TuneResult
from kgen.tune.runners import RecordedRunner
from kgen.tune.stats import separated
from kgen.tune.tuner import autotune as tune
from kgen.core.compiler import CompileError, clear_memory_cache
from kgen.tune.dispatch import forget, select
from kgen.tune.db import TuneDB, problem_key

P4096 = {"M": 4096, "N": 4096, "K": 4096}
DEVICE = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))


def resources(spec, arch, regs=64, spills=0):
    return {"kgen_matmul": {"registers": regs, "shared_bytes": 0, "stack_bytes": spills,
                            "spill_stores": spills, "spill_loads": spills}}


def landscape(spec) -> float:
    """A made-up but structured time: best near 128x64 tiles, 8x4 thread tiles, 3 stages;
    plus a fixed per-spec jitter of up to 15% so that no model fits it exactly."""
    if spec.kernel == "reduce":
        return 1.0 + abs(math.log2(spec.block_size / 256)) * 0.3 + abs(math.log2(spec.items_per_thread / 4)) * 0.2
    BM, BN, BK = spec.tile
    TM, TN = spec.thread_tile
    base = (1.0 + abs(math.log2(BM / 128)) + 0.7 * abs(math.log2(BN / 64)) + 0.5 * abs(math.log2(TM / 8))
            + 0.3 * abs(math.log2(TN / 4)) + (0 if spec.shared_memory else 2) + 0.2 * abs(math.log2(BK / 16))
            + 0.1 * abs(spec.stages - 3) + 0.2 * math.log2(spec.split_k))
    jitter = int(hashlib.md5(spec.key.encode()).hexdigest()[:8], 16) / 2 ** 32
    return base * (1 + 0.15 * jitter)


_REDUCE_SPACE = kgen.Reduce.search_space


def small_space(cls, problem, dtype):
    """The first 6 candidates of the real reduce space: enough to exercise every path quickly."""
    return _REDUCE_SPACE(problem, dtype)[:6]


@pytest.fixture
def db(tmp_path):
    d = TuneDB(tmp_path / "tune.sqlite3")
    yield d
    d.close()


@pytest.fixture(autouse=True)
def _fresh_dispatch():
    forget()
    yield
    forget()


def run(db, strategy="exhaustive", runner=None, compiler=resources, **kw):
    runner = runner or RecordedRunner(landscape, noise=0.005)
    return tune(kgen.Matmul, P4096, "float32", strategy=strategy, runner=runner, db=db, compiler=compiler, **kw)


# -- pruning ------------------------------------------------------------------------------

def test_pruning_before_compile_names_the_limit(db):
    limits = dict(arch_limits("sm_90"), max_threads_per_block=128, max_shared_per_block_optin=24 * 1024)
    runner = RecordedRunner(landscape, device=DeviceInfo("Small GPU", "sm_90", limits))
    compiled = []
    result = run(db, runner=runner, compiler=lambda s, a: compiled.append(s.key) or resources(s, a))
    pruned = result.by_status("pruned")
    assert result.counts["pruned_before_compile"] == len(pruned) > 0
    reasons = " ".join(r.reason for r in pruned)
    assert "threads per block exceed" in reasons and "shared memory exceed" in reasons
    pruned_keys = {r.spec.key for r in pruned}
    # Nothing pruned before compiling was compiled or launched; everything else was.
    assert not pruned_keys & set(compiled) and not pruned_keys & set(runner.launched)
    assert all(r.spec.threads <= 128 for r in result.records if r.status == "ok")
    assert result.counts["candidates"] == result.counts["space"] - len(pruned)


def test_ptxas_report_prunes_spills_and_register_hogs(db):
    def report(spec, arch):
        if spec.tile[0] == 64 and spec.stages == 2:
            return resources(spec, arch, spills=48)
        if spec.threads >= 512:
            return resources(spec, arch, regs=255)
        return resources(spec, arch)

    result = run(db, compiler=report)
    why = {r.spec.key: r.reason for r in result.by_status("pruned") if r.reason.startswith("ptxas")}
    assert any("spills 48 bytes" in w for w in why.values())
    assert any("the launch would fail" in w for w in why.values())
    assert result.counts["pruned_by_ptxas"] == len(why) > 0
    assert all(r.resources is not None for r in result.records if r.status == "ok")


def test_ptxas_reason_rules():
    spec = kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 8), shared_memory=True)  # 256 threads
    wide = kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 4), shared_memory=True)  # 512 threads
    lim = ARCH_LIMITS["sm_90"]
    assert ptxas_reason(spec, resources(spec, "sm_90", regs=128), lim) is None
    # 255 registers x 256 threads fill the 64K register file exactly: one block of 8 warps.
    assert ptxas_reason(spec, resources(spec, "sm_90", regs=255), lim) is None
    assert "cap occupancy at 8 warps" in ptxas_reason(spec, resources(spec, "sm_90", regs=255), lim, min_warps=16)
    assert "launch would fail" in ptxas_reason(wide, resources(wide, "sm_90", regs=255), lim)
    assert ptxas_reason(wide, resources(wide, "sm_90", regs=128), lim) is None
    assert "spills 8 bytes" in ptxas_reason(spec, resources(spec, "sm_90", spills=8), lim)


# -- failures are recorded, the run goes on ------------------------------------------------

def test_failures_are_recorded_with_reasons_and_the_run_goes_on(db):
    def compiler(spec, arch):
        if spec.tile[2] == 32:
            raise CompileError("nvcc failed with exit code 1", ["nvcc"],
                               "kernel.cu(12): error: identifier \"x\" is undefined")
        return resources(spec, arch)

    runner = RecordedRunner(landscape, wrong=lambda s: s.thread_tile == (4, 4),
                            launch_error=lambda s: s.thread_tile == (8, 4) and s.stages == 2)
    result = run(db, runner=runner, compiler=compiler)
    by = {st: result.by_status(st) for st in ("compile-error", "wrong-result", "launch-error", "ok")}
    assert all(by.values()), {k: len(v) for k, v in by.items()}
    assert all("identifier" in r.reason for r in by["compile-error"])
    assert all("relative error" in r.reason and "tolerance" in r.reason for r in by["wrong-result"])
    assert all("too many resources" in r.reason for r in by["launch-error"])
    assert result.best is not None and result.best.thread_tile != (4, 4)
    assert result.counts["compile_errors"] == len(by["compile-error"])
    assert result.counts["wrong_results"] == len(by["wrong-result"])
    # Every failure is in the database with its reason, for the next run to skip.
    stored = {row["spec_key"]: row for row in db.candidates(result.key)}
    for status in ("compile-error", "wrong-result", "launch-error"):
        for r in by[status]:
            assert stored[r.spec.key]["status"] == status and stored[r.spec.key]["reason"] == r.reason
    text = result.table()
    assert "compile-error:" in text and "wrong-result:" in text


@pytest.mark.nvcc
def test_real_nvcc_failure_is_a_record_not_a_crash(db, monkeypatch):
    class BrokenMatmul(kgen.Matmul):
        def compile_options(self):
            return ("-Xptxas", "--no-such-ptxas-flag") if self.tile == (32, 32, 16) else ()

    def space(cls, problem, dtype):
        return [BrokenMatmul(tile=(32, 32, 16)), BrokenMatmul(tile=(16, 16, 16))]

    monkeypatch.setattr(BrokenMatmul, "search_space", classmethod(space))
    monkeypatch.setattr(BrokenMatmul, "default_spec", classmethod(lambda cls, p, d: BrokenMatmul()))
    result = tune(BrokenMatmul, {"M": 64, "N": 64, "K": 64}, strategy="exhaustive",
                  runner=RecordedRunner(lambda s: 1.0), db=db, workers=0)
    bad = result.by_status("compile-error")
    assert len(bad) == 1 and bad[0].spec.tile == (32, 32, 16)
    assert "nvcc failed" in bad[0].reason
    assert result.best.tile == (16, 16, 16)


# -- timing: leaders re-timed until separated, or declared tied -----------------------------

def _two(db, t1, t2, noise, monkeypatch):
    a = kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True)
    b = kgen.Matmul(tile=(64, 64, 8), thread_tile=(4, 4), shared_memory=True)
    other = kgen.Matmul(tile=(32, 32, 16), thread_tile=(2, 2), shared_memory=True)
    times = {a.key: t1, b.key: t2, other.key: 5.0}
    monkeypatch.setattr(kgen.Matmul, "search_space", classmethod(lambda cls, p, d: [a, b, other]))
    return tune(kgen.Matmul, P4096, strategy="exhaustive", runner=RecordedRunner(times, noise=noise, seed=1),
                db=db, compiler=resources)


def test_leaders_separated_beyond_noise(db, monkeypatch):
    r = _two(db, 1.00, 1.05, 0.005, monkeypatch)
    assert r.decided and "ahead of the runner-up" in r.note
    assert r.best.tile == (64, 64, 16) and abs(r.best_ms - 1.0) < 0.01
    assert r.top(1)[0].samples > 10  # the re-timing took more samples than the screening


def test_leaders_within_noise_are_reported_as_tied(db, monkeypatch):
    r = _two(db, 1.00, 1.00, 0.02, monkeypatch)
    assert not r.decided and "within noise" in r.note and "picked the lower median" in r.note


def test_separated_statistic():
    a = [1.0 + 0.001 * (i % 5) for i in range(30)]
    assert separated(a, [x * 1.05 for x in a])
    assert not separated(a, [x * 1.0005 for x in a])


# -- persistence and resume -----------------------------------------------------------------

def test_result_persists_and_second_tune_is_a_database_hit(db, tmp_path):
    first = run(db)
    assert not first.from_db and first.best is not None
    fresh = TuneDB(tmp_path / "tune.sqlite3")  # another handle, as another process would open it
    runner = RecordedRunner(landscape)
    t0 = time.perf_counter()
    again = tune(kgen.Matmul, P4096, strategy="exhaustive", runner=runner, db=fresh, compiler=resources)
    assert time.perf_counter() - t0 < 1.0
    assert again.from_db and runner.launched == []
    assert again.best == first.best and again.best_ms == pytest.approx(first.best_ms)
    assert again.counts == first.counts and len(again.records) == len(first.records) - first.counts[
        "pruned_before_compile"]
    forced = tune(kgen.Matmul, P4096, strategy="exhaustive", runner=RecordedRunner(landscape), db=fresh,
                  compiler=resources, force=True, resume=False)
    assert not forced.from_db


def test_key_covers_device_and_toolchain():
    base = problem_key("matmul", "float32", P4096, "H100", "sm_90", "nvcc 13.0", "0.1.0")
    assert base == problem_key("matmul", "float32", dict(reversed(list(P4096.items()))), "H100", "sm_90",
                               "nvcc 13.0", "0.1.0")
    for changed in (("matmul", "float64", P4096, "H100", "sm_90", "nvcc 13.0", "0.1.0"),
                    ("matmul", "float32", P4096, "H200", "sm_90", "nvcc 13.0", "0.1.0"),
                    ("matmul", "float32", P4096, "H100", "sm_90", "nvcc 12.8", "0.1.0"),
                    ("matmul", "float32", P4096, "H100", "sm_90", "nvcc 13.0", "0.2.0"),
                    ("matmul", "float32", {"M": 4096, "N": 4096, "K": 2048}, "H100", "sm_90", "nvcc 13.0", "0.1.0")):
        assert problem_key(*changed) != base


class _Interrupt(Exception):
    pass


def test_interrupted_run_resumes_where_it_stopped(db):
    class Dying(RecordedRunner):
        def verify(self, spec):
            if len(self.launched) >= 7:
                raise _Interrupt()
            return super().verify(spec)

    with pytest.raises(_Interrupt):
        run(db, runner=Dying(landscape))
    key = problem_key("matmul", "float32", P4096, DEVICE.name, DEVICE.arch, toolchain_version(), kgen.__version__)
    done = {row["spec_key"] for row in db.candidates(key)}
    assert len(done) == 7  # each measured candidate was written as soon as it was measured
    runner = RecordedRunner(landscape)
    result = run(db, runner=runner)
    assert result.counts["resumed"] == 7
    assert not set(runner.launched) & done  # nothing measured before is launched again
    assert len(runner.launched) + 7 == result.counts["launched"]
    assert any(r.origin == "db" for r in result.records)


def _writer(path, worker, n):
    d = TuneDB(path)
    for i in range(n):
        d.put_candidates("k", [{"spec_key": f"{worker}-{i}", "spec": "{}", "status": "ok", "median_ms": float(i),
                                "iqr_ms": 0.0, "samples": 1, "resources": None, "reason": None}])
    d.close()


def test_database_is_safe_with_several_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite3")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 40)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = TuneDB(path).candidates("k")
    assert len(rows) == 160 and {r["spec_key"] for r in rows} == {f"{w}-{i}" for w in range(4) for i in range(40)}


def test_unreadable_database_is_moved_aside(tmp_path):
    path = tmp_path / "tune.sqlite3"
    path.write_bytes(b"this is not a database" * 100)
    d = TuneDB(path)
    with pytest.warns(RuntimeWarning, match="unreadable"):
        assert d.candidates("x") == []
    assert list(tmp_path.glob("tune.sqlite3.broken-*"))
    d.put_candidates("x", [{"spec_key": "a", "spec": "{}", "status": "ok"}])
    assert TuneDB(path).candidates("x")[0]["status"] == "ok"


# -- strategies -----------------------------------------------------------------------------

def test_guided_gets_near_exhaustive_timing_a_fraction(db):
    exhaustive = run(False, strategy="exhaustive")
    n = exhaustive.counts["candidates"]
    for seed in range(3):
        guided = run(False, strategy="guided", runner=RecordedRunner(landscape, noise=0.005, seed=seed), seed=seed)
        assert guided.counts["launched"] <= n // 3
        assert guided.best_ms <= 1.03 * exhaustive.best_ms, (seed, guided.best_ms, exhaustive.best_ms)


def test_random_and_max_configs_bound_the_launches(db):
    r = run(False, strategy="random", max_configs=20, seed=3)
    assert r.counts["launched"] == 20
    e = run(False, strategy="exhaustive", max_configs=10)
    assert e.counts["launched"] == 10 and "untried" in e.note


def test_reduce_family_tunes_through_the_same_interface(db):
    r = tune(kgen.Reduce, {"n": 1 << 20, "op": "dot"}, strategy="exhaustive", runner=RecordedRunner(landscape),
             db=db, compiler=lambda s, a: {"k": {"registers": 32}})
    assert r.best.op == "dot" and r.best.block_size == 256 and r.best.items_per_thread == 4


def test_bad_requests_name_what_is_allowed(db):
    with pytest.raises(TuneError, match="strategy='fastest' is not allowed"):
        run(db, strategy="fastest")
    with pytest.raises(TuneError, match="not a known kernel family"):
        tune("conv", {}, runner=RecordedRunner(landscape), db=db)
    with pytest.raises(ValueError, match="needs K"):
        tune(kgen.Matmul, {"M": 4, "N": 4}, runner=RecordedRunner(landscape), db=db)
    with pytest.raises(TuneError, match="max_configs"):
        run(db, max_configs=0)


# -- dispatch -------------------------------------------------------------------------------

def _store(db, problem, spec, ms, device=DEVICE, family="matmul", nvcc=None, version=None):
    from kgen.tune.tuner import identity

    cls = kgen.core.spec.families()[family]
    ident = identity(cls, cls.normalize_problem(problem), "float32", device)
    if nvcc:
        ident["nvcc"] = nvcc
    if version:
        ident["kgen"] = version
    key = problem_key(family, "float32", ident["problem"], device.name, device.arch, ident["nvcc"], ident["kgen"])
    db.put_result(key, "exhaustive", ident, spec.to_json(), ms, {"note": "test"})


def test_a_tune_drops_what_dispatch_memoised(db):
    before = select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db)
    assert before.origin != "exact" and select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db) is before
    r = run(db, max_configs=12)
    after = select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db)
    assert after.origin == "exact" and after.spec == r.best


def test_dispatch_exact_then_nearest_then_default(db):
    big = kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 8), shared_memory=True)
    small = kgen.Matmul(tile=(32, 32, 16), thread_tile=(2, 2), shared_memory=True)
    _store(db, P4096, big, 3.0)
    _store(db, {"M": 256, "N": 256, "K": 256}, small, 0.01)
    exact = select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db)
    assert exact.origin == "exact" and exact.spec == big
    near = select(kgen.Matmul, {"M": 3000, "N": 5000, "K": 3000}, "float32", device=DEVICE, db=db)
    assert near.origin == "nearest" and near.spec == big and near.tuned_problem == P4096
    # A tuned problem far away (a few rows against 4096 x 4096) is not used for it.
    far = select(kgen.Matmul, {"M": 3, "N": 4096, "K": 4096}, "float32", device=DEVICE, db=db)
    assert far.origin in ("shipped", "default") and far.spec != big
    tiny = select(kgen.Matmul, {"M": 200, "N": 300, "K": 100}, "float32", device=DEVICE, db=db)
    assert tiny.origin == "nearest" and tiny.spec == small
    other = DeviceInfo("Other GPU", "sm_80", arch_limits("sm_80"))
    fallback = select(kgen.Matmul, P4096, "float32", device=other, db=db)
    assert fallback.origin == "default" and fallback.spec == kgen.Matmul.default_spec(P4096, "float32")
    assert "default" in fallback.describe() and "nearest" in near.describe()


def test_dispatch_prefers_same_versions_and_skips_unusable_entries(db):
    old = kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True)
    cur = kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 8), shared_memory=True)
    _store(db, P4096, old, 2.0, version="0.0.1")
    _store(db, P4096, cur, 3.0)
    assert select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db).spec == cur
    forget()
    # A device whose limits rule the tuned spec out gets the next usable entry, or the default.
    cramped = DeviceInfo("Recorded GPU", "sm_90", dict(arch_limits("sm_90"), max_threads_per_block=128))
    pick = select(kgen.Matmul, P4096, "float32", device=cramped, db=db)
    assert pick.spec.threads <= 128


def test_dispatch_matches_the_reduction_op(db):
    _store(db, {"n": 1 << 24, "op": "sum"}, kgen.Reduce(op="sum", block_size=1024), 0.1, family="reduce")
    assert select(kgen.Reduce, {"n": 1 << 24, "op": "dot"}, "float32", device=DEVICE, db=db).origin in (
        "shipped", "default")
    got = select(kgen.Reduce, {"n": 1 << 23, "op": "sum"}, "float32", device=DEVICE, db=db)
    assert got.origin == "nearest" and got.spec.block_size == 1024


def test_dispatch_memoises_and_forget_refreshes(db):
    first = select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db)
    assert first.origin in ("shipped", "default")
    _store(db, P4096, kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 8), shared_memory=True), 3.0)
    assert select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db) is first  # memoised: no query
    forget()
    assert select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db).origin == "exact"


def test_dispatch_survives_a_broken_database(tmp_path):
    class Broken:
        def results_for_device(self, *a):
            raise sqlite3.OperationalError("disk I/O error")

    assert select(kgen.Matmul, P4096, "float32", device=DEVICE, db=Broken()).origin in ("shipped", "default")


def test_autotune_result_feeds_dispatch(db):
    result = run(db)
    assert select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db).spec == result.best


# -- command line ---------------------------------------------------------------------------

@pytest.fixture
def recorded_gpu(monkeypatch):
    """autotune() without a runner makes a CudaRunner: here a RecordedRunner instead."""
    import kgen.tune.tuner as tuner

    monkeypatch.setattr(tuner, "CudaRunner", lambda seed=None: RecordedRunner(landscape, noise=0.005))


def test_cli_tunes_prints_table_and_plots_then_hits_the_database(tmp_path, recorded_gpu, capsys, monkeypatch):
    from kgen.cli import tune as tune_cli

    monkeypatch.setattr(kgen.Reduce, "search_space", classmethod(small_space))
    dbp, plot, js = str(tmp_path / "t.sqlite3"), str(tmp_path / "p.svg"), str(tmp_path / "r.json")
    argv = ["reduce", "--op", "dot", "--n", "1048576", "--db", dbp, "--strategy", "exhaustive", "--workers", "0"]
    from kgen.tune import pool

    monkeypatch.setattr(pool, "_compile_worker", None)  # must not be needed with --workers 0
    assert tune_cli.main(argv + ["--plot", plot, "--json", js, "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "best " in out and "median ms" in out and "candidates after pruning" in out
    assert "<svg" in open(plot).read() and "median ms" in open(plot).read()
    data = json.load(open(js))
    assert data["best"]["op"] == "dot" and len(data["records"]) == 6
    t0 = time.perf_counter()
    assert tune_cli.main(argv + ["--quiet"]) == 0
    assert time.perf_counter() - t0 < 1.0
    assert "from the tuning database" in capsys.readouterr().out
    assert tune_cli.main(["list", "--db", dbp]) == 0
    assert "1 tuned problem" in capsys.readouterr().out


def test_cli_errors_are_one_line(capsys):
    from kgen.cli import tune as tune_cli

    assert tune_cli.main(["matmul"]) == 2
    assert "needs --shape" in capsys.readouterr().err
    assert tune_cli.main(["matmul", "--shape", "4096x4096"]) == 2
    assert "MxNxK" in capsys.readouterr().err
    assert tune_cli.main(["conv", "--problem", "{}"]) == 2
    assert "unknown family" in capsys.readouterr().err


@pytest.mark.nvcc
def test_cli_dry_run_compiles_in_a_pool_without_a_gpu(tmp_path, capsys, monkeypatch):
    """--dry-run --arch sm_90: enumerate, prune, compile the survivors in worker processes,
    print counts and ptxas resources; the cubins land in the shared disk cache."""
    from kgen.cli import tune as tune_cli

    assert tune_cli.main(["reduce", "--op", "dot", "--n", "16777216", "--dry-run", "--arch", "sm_90",
                          "--max-configs", "3", "--workers", "2", "--strategy", "exhaustive", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "dry run for sm_90" in out and "candidates after pruning" in out and "3 compiled and kept" in out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("  ") and ln.split()[0].isdigit()]
    assert len(rows) == 3 and all(int(r[0]) > 0 for r in rows)  # registers reported by ptxas
    # The workers' cubins are in the disk cache: this process gets them without nvcc.
    space = kgen.Reduce.search_space({"n": 16777216, "op": "dot"}, "float32")
    clear_memory_cache()
    assert kgen.compile(space[0], "sm_90").origin == "disk"


def test_plot_writes_png_and_svg_through_matplotlib(tmp_path):
    pytest.importorskip("matplotlib", reason="the plot extra (pip install 'kgen[plot]') is not installed")
    r = run(False, max_configs=12)
    plot_records(r.records, str(tmp_path / "x.png"))
    assert (tmp_path / "x.png").read_bytes()[:4] == b"\x89PNG"
    plot_records([rec.to_dict() for rec in r.records], str(tmp_path / "x.svg"), title="a title")
    svg = (tmp_path / "x.svg").read_text()
    assert "<svg" in svg and "a title" in svg and "median ms" in svg
    with pytest.raises(TuneError, match="nothing to plot"):
        plot_records([rec for rec in r.records if rec.status != "ok"], str(tmp_path / "y.png"))


def test_plot_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    import sys

    r = run(False, max_configs=12)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    with pytest.raises(TuneError, match=r"needs matplotlib: pip install 'kgen\[plot\]'"):
        plot_records(r.records, str(tmp_path / "x.png"))
    assert not (tmp_path / "x.png").exists()


def test_result_round_trips_to_json(db):
    r = run(db, max_configs=12)
    data = json.loads(json.dumps(r.to_dict()))
    assert data["best"] == r.best.to_dict() and data["counts"]["launched"] == 12
    assert isinstance(r, TuneResult) and r.top(3)[0].median_ms == r.best_ms


def test_a_little_spilling_in_one_entry_point_is_tolerated():
    spec = kgen.Matmul(tile=(128, 128, 8), thread_tile=(8, 8), shared_memory=True)
    lim = ARCH_LIMITS["sm_90"]
    two = {"kgen_matmul": {"registers": 64, "spill_stores": 16, "spill_loads": 16},
           "kgen_matmul_vec": {"registers": 128, "spill_stores": 0, "spill_loads": 0}}
    assert ptxas_reason(spec, two, lim) is None
    two["kgen_matmul"]["spill_stores"] = 200
    assert "spills 200 bytes" in ptxas_reason(spec, two, lim)


def test_restrict_keeps_part_of_the_space_and_is_stored_apart(db):
    r = run(db, restrict={"stages": [2, 3], "tile": (128, 128, 8)})
    assert r.counts["space"] > 0 and all(x.spec.stages in (2, 3) and x.spec.tile == (128, 128, 8) for x in r.records)
    assert r.strategy.startswith("exhaustive[where ") and "stages=2|3" in r.strategy
    # An unrestricted run is not answered by the restricted result.
    full = run(db, max_configs=5)
    assert not full.from_db and full.strategy == "exhaustive"
    with pytest.raises(TuneError, match="not a matmul field"):
        run(db, restrict={"tiles": [1]})


def test_cli_where_parses_values():
    from kgen.cli.tune import _where

    assert _where(["stages=2,3", "tile=128x128x8", "async_copy=true"]) == {
        "stages": [2, 3], "tile": [(128, 128, 8)], "async_copy": [True]}
    with pytest.raises(TuneError, match="FIELD=V1,V2"):
        _where(["stages"])


def test_time_budget_stops_taking_candidates(db):
    class Slow(RecordedRunner):
        def verify(self, spec):
            time.sleep(0.01)
            return super().verify(spec)

    r = run(db, runner=Slow(landscape), time_budget_s=1.0)
    assert 0 < r.counts["launched"] < r.counts["candidates"]
    assert "time budget" in r.note and r.best is not None and r.counts["complete"] == 0
    # Stored for dispatch, but the next tune resumes instead of answering from the database.
    assert select(kgen.Matmul, P4096, "float32", device=DEVICE, db=db).origin == "exact"
    runner = RecordedRunner(landscape)
    again = run(db, runner=runner)
    assert not again.from_db and again.counts["resumed"] == r.counts["launched"] + r.counts["pruned_by_ptxas"]
    assert again.counts["complete"] == 1 and run(db).from_db


def test_a_broken_context_stops_the_run_and_the_next_run_resumes_past_it(db):
    from kgen.tune.records import ContextLost

    bad = {}

    class Faulting(RecordedRunner):
        def verify(self, spec):
            self.launched.append(spec.key)
            if len(self.launched) == 5:
                bad["key"] = spec.key
                raise ContextLost("the CUDA context is broken: an illegal memory access was encountered")
            return 1e-7, 1e-4, 0

    r = run(db, runner=Faulting(landscape))
    assert "stopped" in r.note and "illegal memory access" in r.note and not r.decided
    assert r.counts["launched"] == 5 and r.best is not None
    again_runner = RecordedRunner(landscape)
    again = run(db, runner=again_runner)
    assert bad["key"] not in again_runner.launched  # its launch-error record is kept
    assert again.counts["resumed"] == 5 and again.counts["launch_errors"] == 1
    assert [x for x in again.records if x.spec.key == bad["key"]][0].status == "launch-error"


@pytest.mark.nvcc
def test_pool_compiles_feed_the_runner_with_real_ptxas_resources(db):
    r = tune(kgen.Reduce, {"n": 1 << 20, "op": "sum"}, strategy="random", max_configs=3, seed=5, workers=2,
             runner=RecordedRunner(lambda s: 1.0 + s.block_size / 1000), db=db)
    assert r.counts["launched"] + r.counts["pruned_by_ptxas"] + r.counts["compile_errors"] == 3
    assert all(x.resources and max(v["registers"] for v in x.resources.values()) > 0 for x in r.by_status("ok"))


@pytest.mark.nvcc
def test_a_compile_pool_that_cannot_start_logs_a_warning_and_compiles_in_process(db, monkeypatch, caplog):
    from kgen.tune import pool

    def no_processes(method):
        raise OSError("process creation is not allowed here")

    monkeypatch.setattr(pool.multiprocessing, "get_context", no_processes)
    with caplog.at_level("WARNING", logger="kgen.tune.pool"):
        r = tune(kgen.Reduce, {"n": 1 << 20, "op": "sum"}, strategy="random", max_configs=2, seed=5, workers=2,
                 runner=RecordedRunner(lambda s: 1.0 + s.block_size / 1000), db=db)
    assert r.counts["compile_errors"] == 0 and r.counts["launched"] + r.counts["pruned_by_ptxas"] == 2
    assert any("compile pool failed (process creation is not allowed here)" in m for m in caplog.messages)


def test_guided_search_starts_from_the_shipped_models_guesses(db, monkeypatch):
    """A warm start: the specs the shipped table predicts fastest are in the first batch."""
    from kgen.tune import defaults

    space = kgen.Matmul.search_space(P4096, "float32")
    best = min(space, key=landscape)
    others = [s for s in space if s.key != best.key][:5]
    data = {"family": "matmul", "dtype": "float32", "device": DEVICE.name, "arch": "sm_90",
            "specs": [s.to_dict() for s in [*others, best]],
            "problems": [{"M": 4000, "N": 4000, "K": 4000}], "ms": [[2.0] * len(others) + [1.0]]}
    monkeypatch.setattr(defaults, "table_for", lambda *a, **k: defaults.Table(data))
    runner = RecordedRunner(landscape, noise=0.0)
    result = run(db, strategy="guided", runner=runner, seed=3)
    from kgen.tune.model import GUIDED_BATCH, GUIDED_START_BATCHES

    # The start batch (compiled in a pool, so timed in any order) holds the top guess.
    assert best.key in runner.launched[:GUIDED_BATCH * GUIDED_START_BATCHES]
    assert result.best.key == best.key


def test_a_script_that_tunes_without_a_main_guard_tunes_once_and_is_told_why(tmp_path, monkeypatch):
    """Spawned compile workers import the caller's script again. A worker that reaches the
    script's top-level tuning call stops with a message naming the fix, and the tuning runs
    once, in the main process (not a second whole search inside the worker)."""
    import subprocess
    import sys

    from stand_ins import stand_in_nvcc

    stand_in_nvcc(tmp_path, monkeypatch)
    script = tmp_path / "tune_at_top_level.py"
    script.write_text(
        "import os, kgen\n"
        "print('top level', flush=True)\n"
        "kgen.autotune(kgen.Reduce, problem={'n': 1 << 20, 'op': 'dot'}, dry_run=True, arch='sm_90',\n"
        "              max_configs=2, workers=1, strategy='exhaustive')\n"
        "print('tuned', flush=True)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("tuned") == 1
    assert 'Put the code that tunes under `if __name__ == "__main__":`' in proc.stderr
