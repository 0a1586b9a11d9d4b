"""CPU tests of catalogue tuning in one process (kgen.tune.catalogue) and `kgen tune --shapes`.

Candidates are verified and timed by a RecordedRunner. The compile tests run the real
compile path (render, compile pool processes, disk cache) against a stand-in nvcc: a
small script that writes an ELF-looking cubin, prints a ptxas report and logs every call,
so the tests can count compiles without the CUDA toolkit's cost.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kgen
from kgen.tune.catalogue import (CatalogueError, CatalogueProgress, parse_problem, read_problems,
                                 tune_catalogue)
from kgen.tune.db import TuneDB
from kgen.tune.runners import RecordedRunner
from stand_ins import SMALL, fake_resources, landscape, stand_in_nvcc

SHAPES = ["4096x4096x4096", "2048x4096x1024", "1024x1024x4096", "3000x2000x1000"]


def tune(problems, db, runner=None, **kw):
    kw.setdefault("restrict", SMALL)
    kw.setdefault("strategy", "exhaustive")
    kw.setdefault("compiler", fake_resources)
    kw.setdefault("progress", False)
    kw.setdefault("summary", False)
    return tune_catalogue("matmul", problems, "float32", db=db, runner=runner or RecordedRunner(landscape), **kw)


@pytest.fixture
def db(tmp_path):
    d = TuneDB(tmp_path / "tune.sqlite3")
    yield d
    d.close()


def result_rows(path) -> list[tuple]:
    with sqlite3.connect(path) as con:
        return con.execute("SELECT problem, device, best FROM results ORDER BY problem").fetchall()


# -- reading a catalogue ------------------------------------------------------------------

def test_a_catalogue_file_has_one_problem_a_line_comments_and_duplicates_skipped(tmp_path):
    path = tmp_path / "shapes.txt"
    path.write_text(textwrap.dedent("""\
        # the model's GEMMs
        4096x4096x4096
        4096x4096x4096      # the same problem again: tuned once

        256*8192*2048
        {"M": 100, "N": 200, "K": 300}
        """))
    assert read_problems(path, "matmul") == [{"M": 4096, "N": 4096, "K": 4096}, {"M": 256, "N": 8192, "K": 2048},
                                             {"M": 100, "N": 200, "K": 300}]
    assert read_problems(["268435456", "1000001 max", '{"n": 64, "op": "sum"}'], "reduce", op="dot") == [
        {"n": 268435456, "op": "dot"}, {"n": 1000001, "op": "max"}, {"n": 64, "op": "sum"}]
    assert parse_problem("100x200x300", kgen.Matmul) == {"M": 100, "N": 200, "K": 300}


@pytest.mark.parametrize("text, needle", [
    ("4096x4096", "line 2: '4096x4096' is not allowed: use MxNxK"),
    ("0x4096x4096", "line 2: matmul problem needs M as a positive integer"),
    ('{"M": 1, "N": 2', "line 2: '{\"M\": 1, \"N\": 2' is not a valid JSON object"),
    ("[1, 2, 3]", "line 2: '[1, 2, 3]' is not allowed"),
])
def test_a_bad_line_is_named_with_its_number(tmp_path, text, needle):
    path = tmp_path / "shapes.txt"
    path.write_text(f"64x64x64\n{text}\n")
    with pytest.raises(CatalogueError) as err:
        read_problems(path, "matmul")
    assert f"{path}, {needle}" in str(err.value)


def test_a_missing_or_empty_catalogue_says_what_is_expected(tmp_path):
    with pytest.raises(CatalogueError, match="does not exist .*one problem a line: MxNxK"):
        read_problems(tmp_path / "nope.txt", "matmul")
    (tmp_path / "empty.txt").write_text("# nothing yet\n\n")
    with pytest.raises(CatalogueError, match="holds no problem"):
        read_problems(tmp_path / "empty.txt", "matmul")
    with pytest.raises(CatalogueError, match="reduce: use LENGTH|not allowed: use LENGTH"):
        read_problems(["sum 1024"], "reduce")


# -- tuning in one process ------------------------------------------------------------------

def test_every_problem_is_tuned_and_stored_then_a_second_run_skips_them_all(db):
    runner = RecordedRunner(landscape)
    first = tune(SHAPES, db, runner)
    assert [e.status for e in first.entries] == ["tuned"] * len(SHAPES)
    assert [e.label for e in first.entries] == SHAPES
    best = min(first.entries[0].result.records, key=lambda r: r.median_ms or 1e9).spec
    assert all(e.result.best == best for e in first.entries)  # same landscape everywhere
    rows = result_rows(db.path)
    assert len(rows) == len(SHAPES) and {r[1] for r in rows} == {"Recorded GPU"}
    launched = len(runner.launched)
    again = tune(SHAPES, db, runner)
    assert [e.status for e in again.entries] == ["in database"] * len(SHAPES)
    assert len(runner.launched) == launched  # nothing verified or timed again
    assert len(result_rows(db.path)) == len(SHAPES)


def test_an_interrupted_catalogue_resumes_where_it_stopped(db):
    class Interrupted(RecordedRunner):
        """Stops the run (as Ctrl-C would) half-way through the third problem."""

        def __init__(self):
            super().__init__(landscape)
            self.problems = 0

        def prepare(self, cls, problem, dtype, seed=None):
            self.problems += 1
            self.verified = 0
            super().prepare(cls, problem, dtype, seed)

        def verify(self, spec):
            self.verified += 1
            if self.problems == 3 and self.verified == 4:
                raise KeyboardInterrupt
            return super().verify(spec)

    with pytest.raises(KeyboardInterrupt):
        tune(SHAPES, db, Interrupted())
    assert len(result_rows(db.path)) == 2
    runner = RecordedRunner(landscape)
    again = tune(SHAPES, db, runner)
    assert [e.status for e in again.entries] == ["in database", "in database", "tuned", "tuned"]
    third = again.entries[2].result
    assert third.counts["resumed"] == 3  # the candidates measured before the interruption
    assert len(result_rows(db.path)) == len(SHAPES)


def test_a_problem_that_fails_is_reported_and_the_rest_go_on(db):
    runner = RecordedRunner(landscape, wrong=lambda s: True)  # every candidate computes a wrong result
    result = tune(SHAPES[:2], db, runner)
    assert [e.status for e in result.entries] == ["failed", "failed"]
    assert "no candidate" in result.entries[0].error
    table = result.table()
    assert "failed: 4096x4096x4096: no candidate" in table and "2 failed" in table


def test_the_summary_table_and_the_bar(db, capsys):
    import io

    out = io.StringIO()
    tune(SHAPES[:2], db, summary=True, out=out, progress=True)
    table = out.getvalue()
    lines = table.splitlines()
    assert lines[0].split()[:6] == ["#", "problem", "status", "best", "ms", "rate"]
    assert lines[1].split()[1:3] == ["4096x4096x4096", "tuned"] and "TFLOP/s" in lines[1]
    assert "tile=128x64x16" in lines[1] and "thread_tile=8x4" in lines[1]
    assert lines[-1].startswith("2 problem(s) in ") and lines[-1].endswith("in this process: 2 tuned")
    # stderr is not a terminal here: one line per finished problem, with the count
    err = capsys.readouterr().err
    assert "catalogue 1/2" in err and "catalogue 2/2" in err and "4096x4096x4096: tuned" in err


def test_the_bar_on_a_terminal_shows_what_runs_where(monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    status = {"gpu0": "4096x4096x4096 12/40, best 1.2345 ms", "gpu1": "512x512x512 starting"}
    for columns, shown in ((200, "gpu0: 4096x4096x4096 12/40, best 1.2345 ms; gpu1: 512x512x512 starting"),
                           (80, "gpu0: 4096x4096x4096 12/4...")):
        monkeypatch.setenv("COLUMNS", str(columns))
        stream = Terminal()
        bar = CatalogueProgress(3, stream)
        bar.show(status)
        bar.close()
        text = stream.getvalue()
        assert "catalogue 0/3" in text and shown in text
        assert max(len(part) for part in text.split("\r")) <= columns


# -- compiles: a spec's cubin does not depend on the shape ---------------------------------------

@pytest.fixture
def fake_nvcc(tmp_path, monkeypatch):
    return stand_in_nvcc(tmp_path, monkeypatch)


def test_a_second_problem_compiles_nothing_the_first_compiled(db, fake_nvcc):
    # Through the compile pool (a fresh process per problem): only the disk cache can
    # spare the second problem its compiles.
    first = tune(SHAPES[:1], db, compiler=None, workers=1)
    compiled = {r.spec.key for r in first.entries[0].result.records if r.status == "ok"}
    assert len(compiled) >= 6 and fake_nvcc() == len(compiled)
    second = tune(SHAPES[1:3], db, compiler=None, workers=1)
    for entry in second.entries:
        assert entry.status == "tuned"
        assert {r.spec.key for r in entry.result.records if r.status == "ok"} == compiled
    assert fake_nvcc() == len(compiled)  # not one nvcc run for the second and third problems


def test_a_dry_run_catalogue_from_the_command_line(tmp_path, fake_nvcc):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("# two shapes\n4096x4096x4096\n2048x4096x1024\n")
    cmd = [sys.executable, "-m", "kgen", "tune", "matmul", "--shapes", str(shapes), "--dry-run", "--arch", "sm_90",
           "--max-configs", "3", "--seed", "1", "--workers", "0", "--where", "stages=2", "--where", "split_k=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    rows = [ln for ln in lines if ln.split()[:1] in (["1"], ["2"]) and "problem(s)" not in ln]
    assert [r.split()[1:3] for r in rows] == [["4096x4096x4096", "compiled"], ["2048x4096x1024", "compiled"]]
    assert all("3 compiled" in r for r in rows)
    assert lines[-1].endswith("2 compiled")
    # The same random sample for both shapes: the second compiled nothing new.
    assert fake_nvcc() == 3


def test_the_command_line_refuses_a_bad_catalogue_in_one_line(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("4096x4096\n")
    proc = subprocess.run([sys.executable, "-m", "kgen", "tune", "matmul", "--shapes", str(shapes), "--dry-run"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"kgen: error: {shapes}, line 1: '4096x4096' is not allowed: use MxNxK "
                                   "(e.g. 4096x4096x4096) or a JSON object")


# -- without Dask ---------------------------------------------------------------------------

def test_without_distributed_a_cluster_run_names_the_extra_and_the_single_process_path_works(db, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    from kgen.tune.cluster import ClusterError

    with pytest.raises(ClusterError, match=r"pip install 'kgen\[cluster\]'"):
        tune(SHAPES[:1], db, cluster="local")
    result = tune(SHAPES[:1], db)
    assert result.entries[0].status == "tuned"


def test_the_command_line_without_distributed_says_how_to_install_it(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text("64x64x64\n")
    code = ("import sys; sys.modules['distributed'] = None; from kgen.cli.main import main; "
            f"sys.exit(main(['tune', 'matmul', '--shapes', {str(shapes)!r}, '--cluster']))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "pip install 'kgen[cluster]'" in proc.stderr and proc.stderr.count("\n") == 1


def test_a_catalogue_result_serialises(db):
    result = tune(SHAPES[:1], db)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["entries"][0]["label"] == "4096x4096x4096" and data["entries"][0]["best"]["kernel"] == "matmul"


def test_docs_describe_the_catalogue_and_cluster_commands():
    text = (Path(__file__).resolve().parents[1] / "docs" / "cluster.md").read_text()
    assert "kgen tune matmul --shapes shapes.txt --cluster local" in text
    assert "SLURMCluster" in text and "tcp://" in text and "pip install 'kgen[cluster]'" in text
