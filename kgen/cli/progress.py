"""Progress of a tuning run on stderr, from the tuner's progress events.

On a terminal a tqdm bar is redrawn in place (carriage returns, trimmed to the terminal's
width as it is now); elsewhere (a log file, a pipe) one plain line is written every few
seconds and at the end, so logs stay readable.
"""
from __future__ import annotations

import math
import os
import sys
import time
from typing import Any, TextIO


# Count, bar, time so far < time left, then the postfix (tqdm prefixes it with ", ").
BAR_FORMAT = "{desc} {n_fmt}/{total_fmt} |{bar}| {elapsed}<{remaining}{postfix}"


class TuneProgress:
    """A callable for autotune(progress=...). Events are dicts with phase ("compile",
    "evaluate", "leaders"), done, target, compiled, submitted, launched and best_ms."""

    def __init__(self, stream: TextIO | None = None, every_s: float = 10.0, dry_run: bool = False):
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s
        self.dry_run = dry_run
        self.t0 = time.perf_counter()
        self._last_line = -math.inf
        self._bar: Any = None
        self._last: dict[str, Any] | None = None
        self._statuses: dict[str, int] = {}

    def _texts(self, ev: dict[str, Any]) -> tuple[str, list[str]]:
        """(description, postfix parts): the most telling figures first, so that a narrow
        terminal drops the least telling ones."""
        if ev.get("phase") == "leaders":
            desc = f"re-timing {ev.get('leaders', 0)} leaders"
        else:
            desc = "compiling" if self.dry_run else "tuning"
        if self.dry_run:
            parts = [f"{self._statuses.get(s, 0)} {word}" for s, word in
                     (("compiled", "kept"), ("pruned", "pruned"), ("compile-error", "failed"))]
        else:
            best = ev.get("best_ms", math.inf)
            parts = [f"best {best:.4f} ms" if best is not None and best < math.inf else "best -",
                     f"launched {ev.get('launched', 0)}"]
        parts.append(f"compiled {ev.get('compiled', 0)}/{ev.get('submitted', 0)}")
        return desc, parts

    def __call__(self, ev: dict[str, Any]) -> None:
        self._last = ev
        if ev.get("phase") == "evaluate" and ev.get("status"):
            self._statuses[ev["status"]] = self._statuses.get(ev["status"], 0) + 1
        desc, parts = self._texts(ev)
        done, target = int(ev.get("done", 0)), int(ev.get("target", 0))
        if self.tty:
            self._draw(desc, self._fit(desc, parts, target), done, target, force=ev.get("phase") != "evaluate")
        elif time.perf_counter() - self._last_line >= self.every_s:
            self._line(desc, ", ".join(parts), done, target)

    def _fit(self, desc: str, parts: list[str], target: int) -> str:
        """As many postfix parts as leave the bar itself 10 columns in this terminal (its
        width is read at every update, so a resized window is followed)."""
        try:
            columns = os.get_terminal_size(self.stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            columns = 80
        # desc, " n/total |", "| mm:ss<mm:ss"
        used = len(desc) + 2 * len(str(target)) + 4 + 14
        kept: list[str] = []
        for part in parts:
            if used + len(part) + 2 + 10 > columns:
                break
            kept.append(part)
            used += len(part) + 2
        return ", ".join(kept)

    def _draw(self, desc: str, post: str, done: int, target: int, force: bool) -> None:
        from tqdm import tqdm

        if self._bar is None:
            self._bar = tqdm(total=target or None, desc=desc, postfix=post, file=self.stream, dynamic_ncols=True,
                             leave=True, mininterval=0.2, smoothing=0.1, bar_format=BAR_FORMAT)
        bar = self._bar
        if target and bar.total != target:
            bar.total = target
        bar.set_description_str(desc, refresh=False)
        bar.set_postfix_str(post, refresh=False)
        bar.update(done - bar.n)  # redraws at most every mininterval
        if force:
            bar.refresh()

    def _line(self, desc: str, post: str, done: int, target: int) -> None:
        from tqdm import tqdm

        elapsed = time.perf_counter() - self.t0
        text = tqdm.format_meter(done, target or None, elapsed, prefix=desc, postfix=post, bar_format=BAR_FORMAT)
        self.stream.write(text + "\n")
        self.stream.flush()
        self._last_line = time.perf_counter()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif not self.tty and self._last is not None:
            desc, parts = self._texts(self._last)
            self._line(desc, ", ".join(parts), int(self._last.get("done", 0)), int(self._last.get("target", 0)))
