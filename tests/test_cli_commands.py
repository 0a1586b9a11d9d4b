"""The `kgen` subcommands as a newcomer meets them: each --help lists the options it takes,
errors are one line, the dry run says what it will do (and is bounded) before it compiles,
and the figures it prints are the launch's."""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kgen
from kgen.cli import main as cli
from kgen.cli import tune as tune_cli
from kgen.core.compiler import default_workers

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ["render", "emit", "info", "cache", "demo", "bench", "tune", "which"]


def run(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kgen", *args], capture_output=True, text=True, **kw)


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [s for a in parser._actions for s in a.option_strings if s.startswith("--")]


def _help(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main([*argv, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_each_command_help_lists_its_options(command, capsys):
    text = _help(capsys, command)
    parser = _subparsers(cli.build_parser([command]))[command]
    options = _options(parser)
    for opt in options:
        assert opt in text, (command, opt)
    assert "rest" not in text.split()
    if command == "bench":
        # The benchmarks' own options, all of them, in `kgen bench --help`.
        from kgen.cli import bench

        for family, sub in _subparsers(parser).items():
            assert family in text
            if bench.own_parser(family):  # it parses its own options: `kgen bench NAME --help` is its help
                own = _help(capsys, "bench", family)
                options = set(re.findall(r"--[a-z][a-z-]*", own.split("\n\n")[0])) - {"--help"}
                assert options and all(opt in text for opt in options), (family, options)
                continue
            for opt in _options(sub):
                assert opt in text, (family, opt)
                assert opt in _help(capsys, "bench", family)


def test_tune_help_names_the_real_options(capsys):
    text = _help(capsys, "tune")
    for opt in ("--shape", "--n", "--op", "--problem", "--strategy", "--max-configs", "--workers", "--dry-run",
                "--arch", "--where", "--db", "--plot", "--json", "--quiet"):
        assert opt in text
    assert "spread" in text and "interquartile" in text  # the result table's columns are explained


def test_strategies_match_the_tuner():
    from kgen.tune import tuner

    assert set(tune_cli.STRATEGIES) == set(tuner.STRATEGIES)


def test_workers_help_matches_what_is_passed(capsys, monkeypatch):
    assert default_workers() == max(1, (os.cpu_count() or 2) - 1)
    text = " ".join(_help(capsys, "tune").split())
    assert f"one fewer than the CPU count, at least 1: {default_workers()} here" in text
    seen = _capture_autotune(monkeypatch)
    assert tune_cli.main(["reduce", "--n", "4096", "--dry-run", "--quiet"]) == 0
    assert seen[-1]["workers"] == default_workers()
    assert tune_cli.main(["reduce", "--n", "4096", "--dry-run", "--quiet", "--workers", "0"]) == 0
    assert seen[-1]["workers"] == 0


@pytest.mark.parametrize("value", ["-1", "x", "1.5"])
def test_negative_workers_are_refused(value, capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["tune", "matmul", "--shape", "64x64x64", "--workers", value])
    assert done.value.code == 2
    assert f"argument --workers: '{value}' is not allowed" in capsys.readouterr().err


# ---------------------------------------------------------------------------------
# The dry run: planned, stated and bounded before anything compiles
# ---------------------------------------------------------------------------------

def _capture_autotune(monkeypatch, result=None):
    """Replace the tuner with a recorder; it also notes what was printed before it ran."""
    import kgen.tune.tuner as tuner

    seen: list[dict] = []

    def fake(family, problem, dtype, **kw):
        seen.append({"family": family, "problem": problem, **kw})
        if result is not None:
            return result
        return _empty_result(family, problem, dtype, kw.get("arch") or "sm_90")

    monkeypatch.setattr(tuner, "autotune", fake)
    monkeypatch.setattr(tune_cli, "_nvcc_archs", lambda: ["sm_80", "sm_90"])
    return seen


def _empty_result(family, problem, dtype, arch, records=()):
    from kgen.tune.records import TuneResult

    return TuneResult(family=family, dtype=dtype, problem=problem, strategy="guided", best=None, best_ms=None,
                      best_iqr_ms=None, decided=True, note="", records=list(records), counts={},
                      elapsed_s=0.0, device=f"(dry run for {arch})", arch=arch)


def test_dry_run_states_count_bound_and_estimate_before_compiling(monkeypatch, capsys):
    printed_before: list[str] = []
    seen = _capture_autotune(monkeypatch)
    import kgen.tune.tuner as tuner

    inner = tuner.autotune

    def spy(*a, **kw):
        printed_before.append(capsys.readouterr().out)
        return inner(*a, **kw)

    monkeypatch.setattr(tuner, "autotune", spy)
    assert tune_cli.main(["matmul", "--shape", "1024x1024x1024", "--dry-run", "--quiet", "--workers", "1"]) == 0
    plan = " ".join(printed_before[0].split())
    space = kgen.Matmul.search_space({"M": 1024, "N": 1024, "K": 1024}, "float32")
    from kgen.tune.device import arch_limits

    candidates = sum(1 for s in space if not s.prune_reason({"M": 1024, "N": 1024, "K": 1024}, arch_limits("sm_90")))
    assert candidates > 64
    assert f"{len(space)} specs in the space, {candidates} candidates after pruning" in plan
    assert "compiling a random sample of 64 of them" in plan and "--max-configs all" in plan
    assert "in 1 compile process: about 64 s" in plan
    assert seen[0]["max_configs"] == 64 and seen[0]["strategy"] == "random" and seen[0]["dry_run"]


def test_dry_run_bound_can_be_lifted_or_set(monkeypatch, capsys):
    seen = _capture_autotune(monkeypatch)
    argv = ["matmul", "--shape", "1024x1024x1024", "--dry-run", "--quiet"]
    assert tune_cli.main(argv + ["--max-configs", "all"]) == 0
    assert seen[-1]["max_configs"] is None and seen[-1]["strategy"] == "guided"
    assert "compiling all" in capsys.readouterr().out
    assert tune_cli.main(argv + ["--max-configs", "5", "--strategy", "exhaustive"]) == 0
    assert seen[-1]["max_configs"] == 5 and seen[-1]["strategy"] == "exhaustive"
    out = " ".join(capsys.readouterr().out.split())
    assert "compiling 5 of them" in out and "random" not in out
    # A small space needs no bound.
    assert tune_cli.main(["reduce", "--n", "4096", "--dry-run", "--quiet", "--where", "strategy=atomic",
                          "--where", "block_size=256"]) == 0
    assert "compiling all" in capsys.readouterr().out
    assert seen[-1]["max_configs"] == 64 and seen[-1]["strategy"] == "guided"


def test_real_tune_is_not_bounded_by_the_dry_run_default(monkeypatch, capsys):
    seen = _capture_autotune(monkeypatch)
    tune_cli.main(["reduce", "--n", "4096", "--quiet"])
    assert seen[-1]["max_configs"] is None and seen[-1]["strategy"] == "guided" and not seen[-1]["dry_run"]


@pytest.mark.nvcc
def test_dry_run_for_an_arch_nvcc_does_not_know_is_an_error(capsys):
    assert tune_cli.main(["matmul", "--shape", "64x64x64", "--dry-run", "--arch", "sm_999", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--arch sm_999 is not an architecture this nvcc compiles for; allowed: " in err and "sm_90" in err


def test_dry_run_where_nothing_compiles_fails(monkeypatch, capsys):
    from kgen.tune.records import Record

    spec = kgen.Reduce(op="dot")
    bad = [Record(spec, "compile-error", reason="nvcc failed with exit code 1: error: unknown arch")]
    _capture_autotune(monkeypatch, _empty_result("reduce", {"n": 4096, "op": "dot"}, "float32", "sm_80", bad))
    assert tune_cli.main(["reduce", "--n", "4096", "--dry-run", "--arch", "sm_80", "--quiet"]) == 1
    assert "none of the 1 candidates compiled for sm_80; the first error: nvcc failed" in capsys.readouterr().err


def test_tune_without_a_gpu_suggests_the_dry_run(tmp_path):
    code = ("import sys; sys.modules['pycuda'] = None; sys.modules['pycuda.driver'] = None; "
            "from kgen.cli.main import main; sys.exit(main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KGEN_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-c", code, "tune", "matmul", "--shape", "64x64x64"],
                          capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "pycuda" in lines[0] and "Without a GPU, add --dry-run" in lines[0]


@pytest.mark.parametrize("problem, needle", [
    ("[" * 100000, "nested too deeply"), ("[1, 2]", "must be a JSON object"), ("{", "not valid JSON")])
def test_bad_problem_json_is_one_line(problem, needle, capsys):
    assert tune_cli.main(["reduce", "--problem", problem, "--dry-run", "--quiet"]) == 2
    assert needle in capsys.readouterr().err


# ---------------------------------------------------------------------------------
# Shared memory as launched, in the dry-run table and the demo
# ---------------------------------------------------------------------------------

@pytest.mark.nvcc
def test_dry_run_table_shows_the_launch_shared_memory(tmp_path, capsys):
    js = tmp_path / "r.json"
    argv = ["matmul", "--shape", "1024x1024x1024", "--dry-run", "--max-configs", "3", "--workers", "0",
            "--where", "shared_memory=true", "--where", "stages=2", "--seed", "1", "--quiet", "--json", str(js)]
    assert tune_cli.main(argv) == 0
    out = capsys.readouterr().out
    records = [r for r in json.loads(js.read_text())["records"] if r["status"] == "compiled"]
    assert records
    table = [ln.split() for ln in out.splitlines() if ln.startswith("  ") and ln.split()[0].isdigit()]
    assert len(table) == len(records)
    for rec, row in zip(records, table):
        spec = kgen.spec_from_dict(rec["spec"])
        assert spec.shared_bytes > 0
        most = max(v["shared_bytes"] for v in rec["resources"].values())
        assert most >= spec.shared_bytes  # dynamic tiles plus whatever ptxas counts
        assert int(row[1]) == most


@pytest.mark.nvcc
def test_demo_without_gpu_writes_to_a_temporary_folder_and_reports_shared_memory(tmp_path):
    from kgen.core import runtime

    if runtime.gpu_available()[0]:
        pytest.skip("a GPU is present: the demo runs kernels instead")
    (tmp_path / "tmp").mkdir()
    out = run("demo", cwd=tmp_path, env={**os.environ, "TMPDIR": str(tmp_path / "tmp"), "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert not (tmp_path / "kgen-demo").exists()
    folders = list((tmp_path / "tmp").glob("kgen-demo-*"))
    assert len(folders) == 1 and (folders[0] / "matmul.cu").is_file() and str(folders[0]) in out.stdout
    mm = kgen.Matmul.default_spec({"M": 2048, "N": 2048, "K": 2048}, "float32")
    assert f"({mm.shared_bytes} B dynamic)" in out.stdout
    given = run("demo", "-o", str(tmp_path / "mine"))
    assert given.returncode == 0 and (tmp_path / "mine" / "reduce.cu").is_file()


# ---------------------------------------------------------------------------------
# emit's output argument
# ---------------------------------------------------------------------------------

def test_emit_into_a_new_folder_with_a_trailing_slash(tmp_path):
    out = run("emit", '{"kernel": "reduce"}', "-o", str(tmp_path / "newdir") + "/")
    assert out.returncode == 0, out.stderr
    files = list((tmp_path / "newdir").iterdir())
    assert len(files) == 1 and files[0].suffix == ".cu" and files[0].read_text() == kgen.render(kgen.Reduce())
    assert out.stdout.strip() == str(files[0])


@pytest.mark.parametrize("target, needle", [
    ("", "-o/--output is empty"), ("   ", "-o/--output is empty"),
    ("FILE/", "names a folder (trailing slash) but"), ("/no/such/place/new/", "/no/such/place does not exist"),
    ("/dev/null", "/dev/null is a character device; emit replaces only regular files"),
])
def test_emit_output_errors_are_one_line(tmp_path, target, needle):
    (tmp_path / "FILE").write_text("keep")
    out = run("emit", '{"kernel": "reduce"}', "-o", target.replace("FILE", str(tmp_path / "FILE")), cwd=tmp_path)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and needle in lines[0], out.stderr
    assert (tmp_path / "FILE").read_text() == "keep" and sorted(p.name for p in tmp_path.iterdir()) == ["FILE"]


def test_tune_matmul_says_when_kgen_matmul_runs_another_family(monkeypatch):
    """kgen tune matmul tunes the tiled family; where kgen.matmul takes the shape elsewhere on
    this GPU, the command says so and names the command that tunes what runs."""
    from kgen.cli.tune import _dispatch_note
    from kgen.tune import dispatch

    monkeypatch.delenv("KGEN_SPLIT_TF32", raising=False)
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    note = _dispatch_note({"M": 100, "N": 4096, "K": 4096}, "float32")
    assert "skinny family" in note and """kgen tune skinny --problem '{"M":100,"N":4096,"K":4096}'""" in note
    assert 'for x @ W.t(), add "layout_b": "col"' in note
    assert "split_tf32" in _dispatch_note({"M": 4096, "N": 4096, "K": 4096}, "float32")
    assert "kgen tune tensor_matmul" in _dispatch_note({"M": 2048, "N": 2048, "K": 2048}, "bfloat16")
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    assert _dispatch_note({"M": 2000, "N": 2000, "K": 2000}, "float32") is None   # the tiled family runs it


@pytest.mark.nvcc
def test_a_dry_run_says_before_it_compiles_which_family_runs_the_shape(capsys, tmp_path, monkeypatch):
    """Without a GPU, `kgen tune matmul --dry-run --arch sm_90` on a few-row shape names the family that
    kgen.matmul runs there on that architecture, before any candidate is compiled."""
    monkeypatch.delenv("KGEN_SPLIT_TF32", raising=False)
    code = cli.main(["tune", "matmul", "--shape", "4x4096x4096", "--dry-run", "--arch", "sm_90", "--max-configs",
                     "1", "--quiet", "--db", str(tmp_path / "t.sqlite3")])
    out = capsys.readouterr().out
    assert code == 0
    note = out.index("note: kgen.matmul runs 4x4096x4096 float32 on the skinny family on sm_90")
    assert note < out.index("dry run for sm_90: nothing was launched")


def test_a_reader_that_goes_away_ends_the_command_quietly():
    """`kgen which ... | head -3`: the write that meets the closed pipe ends the command with status 141
    (a shell tool's on SIGPIPE) and no message, and nothing raises when stdout is flushed at exit."""
    code = ("import sys\n"
            "from kgen.cli.common import run_command\n"
            "def command(args):\n"
            "    print('a line')\n"
            "    raise BrokenPipeError(32, 'Broken pipe')\n"
            "sys.exit(run_command(command, None))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 141 and done.stderr == ""
