"""The tuning progress bar in a real terminal: run under a pseudo-terminal 80 columns wide,
every update is redrawn in place (carriage returns, not new lines) and no drawn line is
wider than the terminal. Off a terminal, a few plain lines instead."""
from __future__ import annotations

import io
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

pty = pytest.importorskip("pty", reason="pseudo-terminals are POSIX only")
import fcntl  # noqa: E402
import struct  # noqa: E402
import termios  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BAR = re.compile(r"\d+/\d+ \|")

FEED = r"""
import math, sys, time
from kgen.cli.progress import TuneProgress
bar = TuneProgress(dry_run=DRY)
target = 40
bar({"phase": "compile", "done": 0, "target": target, "best_ms": math.inf, "compiled": 0, "submitted": target,
     "launched": 0})
for i in range(1, target + 1):
    bar({"phase": "evaluate", "done": i, "target": target, "best_ms": 12345.678901 / i, "compiled": i,
         "submitted": target, "launched": i, "status": "ok"})
    time.sleep(0.03)
bar({"phase": "leaders", "done": target, "target": target, "best_ms": 1.0, "compiled": target,
     "submitted": target, "launched": target, "leaders": 6})
bar.close()
print("done", flush=True)
"""


def run_in_pty(argv: list[str], columns: int = 80, timeout: float = 240.0, env: dict | None = None) -> str:
    """Run `argv` with stdin, stdout and stderr on a pseudo-terminal `columns` wide; return
    everything it wrote, as the terminal received it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": str(columns), "TERM": "xterm", **(env or {})}
    full_env.pop("LINES", None)
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full_env, close_fds=True)
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
    return b"".join(chunks).decode("utf-8", "replace")


def screen_segments(raw: str) -> tuple[list[str], int]:
    """(every piece of text drawn from the start of a line, by \\r or \\n; the number of
    line feeds). The terminal turns \\n into \\r\\n, so \\r\\n counts as one line feed."""
    text = ANSI.sub("", raw).replace("\r\n", "\n")
    feeds = text.count("\n")
    segments = [seg for line in text.split("\n") for seg in line.split("\r") if seg]
    return segments, feeds


@pytest.mark.parametrize("dry", [False, True])
def test_progress_redraws_in_place_within_80_columns(dry):
    raw = run_in_pty([sys.executable, "-c", FEED.replace("DRY", str(dry))], columns=80)
    segments, feeds = screen_segments(raw)
    bars = [s for s in segments if BAR.search(s)]
    assert len(bars) >= 5, raw  # redrawn many times...
    assert feeds <= 3, raw      # ...in place: the bar's own line ends once, then "done"
    too_wide = [s for s in segments if len(s) > 80]
    assert not too_wide, too_wide
    assert "done" in segments[-1]
    final = [s for s in bars if "re-timing 6 leaders" in s or "40/40" in s]
    assert final, bars[-3:]


def test_progress_follows_a_narrow_terminal():
    raw = run_in_pty([sys.executable, "-c", FEED.replace("DRY", "False")], columns=50)
    segments, _ = screen_segments(raw)
    assert all(len(s) <= 50 for s in segments), [s for s in segments if len(s) > 50]


def test_off_a_terminal_progress_is_a_few_plain_lines():
    from kgen.cli.progress import TuneProgress

    out = io.StringIO()
    bar = TuneProgress(stream=out, every_s=3600)
    for i in range(50):
        bar({"phase": "evaluate", "done": i, "target": 50, "best_ms": 1.5, "compiled": i, "submitted": 50,
             "launched": i})
    bar.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) == 2  # the first event and the summary at the end
    assert "49/50" in lines[-1] and "best 1.5000 ms" in lines[-1]


@pytest.mark.nvcc
def test_cli_dry_run_in_an_80_column_terminal(tmp_path):
    """The real command: a bounded dry run compiles in a pool and draws its bar in place."""
    argv = [sys.executable, "-m", "kgen", "tune", "reduce", "--op", "dot", "--n", "1048576", "--dry-run",
            "--max-configs", "6", "--workers", "1"]
    raw = run_in_pty(argv, columns=80, env={"KGEN_CACHE_DIR": str(tmp_path / "cache")})
    segments, _ = screen_segments(raw)
    bars = [s for s in segments if s.startswith("compiling") and BAR.search(s)]
    assert bars and all(len(s) <= 80 for s in bars), bars
    assert any("6/6" in s for s in bars), bars
    assert "compiled and kept" in raw
    # The plan came before the bar, wrapped to the terminal.
    assert raw.index("candidates after pruning") < raw.index(bars[0])
    assert all(len(s) <= 80 for s in segments[:3]), segments[:3]
