"""What a tuning run produces: one Record per candidate and the TuneResult, plus the tuner's errors."""
from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Sequence

from ..core.spec import Spec, spec_from_json

# A candidate's status: "ok" (verified and timed), "pruned" (ruled out by the device's
# limits or ptxas' report), "compile-error", "launch-error", "wrong-result", or
# "compiled" (a dry run: compiled, never launched).
STATUSES = ("ok", "pruned", "compile-error", "launch-error", "wrong-result", "compiled")


class TuneError(ValueError):
    """The tuning request cannot be carried out (unknown family, strategy, empty space...)."""


class LaunchFailure(RuntimeError):
    """A candidate could not be loaded or launched; the run goes on without it."""


class ContextLost(LaunchFailure):
    """A candidate broke the CUDA context (e.g. an illegal address): nothing more can run."""


@dataclasses.dataclass
class Record:
    """What the tuner learnt about one candidate."""

    spec: Spec
    status: str
    median_ms: float | None = None
    iqr_ms: float | None = None
    samples: int = 0
    resources: dict[str, dict[str, int]] | None = None
    reason: str | None = None
    origin: str = "run"  # "run": measured now; "db": resumed from the tuning database

    @property
    def spread(self) -> float | None:
        """Relative spread of the timings (IQR over median)."""
        if self.median_ms is None or self.iqr_ms is None or self.median_ms <= 0:
            return None
        return self.iqr_ms / self.median_ms

    def to_row(self) -> dict[str, Any]:
        return {"spec_key": self.spec.key, "spec": self.spec.to_json(), "status": self.status,
                "median_ms": self.median_ms, "iqr_ms": self.iqr_ms, "samples": self.samples,
                "resources": self.resources, "reason": self.reason}

    def to_dict(self) -> dict[str, Any]:
        out = self.to_row()
        out["spec"] = self.spec.to_dict()
        out["origin"] = self.origin
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any], origin: str = "db") -> "Record":
        return cls(spec=spec_from_json(row["spec"]), status=row["status"], median_ms=row.get("median_ms"),
                   iqr_ms=row.get("iqr_ms"), samples=row.get("samples") or 0, resources=row.get("resources"),
                   reason=row.get("reason"), origin=origin)


@dataclasses.dataclass
class TuneResult:
    """The outcome of a tuning run (or of a database hit: from_db=True).

    best / best_ms: the winning spec and its median time (None in a dry run).
    decided: True when the winner's lead over the runner-up is larger than the noise.
    note: one line saying how the winner was decided.
    records: one Record per candidate, best first.
    counts: how many candidates were in the space, pruned, compiled, failed, timed.
    """

    family: str
    dtype: str
    problem: dict[str, Any]
    strategy: str
    best: Spec | None
    best_ms: float | None
    best_iqr_ms: float | None
    decided: bool
    note: str
    records: list[Record]
    counts: dict[str, int]
    elapsed_s: float
    device: str
    arch: str
    key: str = ""
    from_db: bool = False

    def top(self, n: int = 10) -> list[Record]:
        return [r for r in self.records if r.status == "ok"][:n]

    def by_status(self, status: str) -> list[Record]:
        return [r for r in self.records if r.status == status]

    def summary(self) -> dict[str, Any]:
        return {"strategy": self.strategy, "best_iqr_ms": self.best_iqr_ms, "decided": self.decided,
                "note": self.note, "counts": self.counts, "elapsed_s": self.elapsed_s}

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "dtype": self.dtype, "problem": self.problem, "device": self.device,
                "arch": self.arch, "key": self.key, "from_db": self.from_db,
                "best": self.best.to_dict() if self.best is not None else None, "best_ms": self.best_ms,
                **self.summary(), "records": [r.to_dict() for r in self.records]}

    def table(self, n: int = 10) -> str:
        """The top `n` candidates, then one line per failure kind, as plain text."""
        varying = _varying_fields([r.spec for r in self.records]) or ["(spec)"]
        head = f"{'#':>3} {'median ms':>10} {'spread':>7} {'n':>3} {'regs':>5} {'smem B':>7}  " + "  ".join(varying)
        lines = [head]
        for i, r in enumerate(self.top(n), 1):
            regs, smem = _resource_summary(r.resources)
            vals = "  ".join(_field_text(r.spec, f) for f in varying)
            spread = f"{100 * r.spread:.1f}%" if r.spread is not None else "-"
            lines.append(f"{i:>3} {r.median_ms:>10.4f} {spread:>7} {r.samples:>3} {regs:>5} {smem:>7}  {vals}")
        for status in ("pruned", "compile-error", "launch-error", "wrong-result"):
            bad = self.by_status(status)
            if bad:
                reasons: dict[str, int] = {}
                for r in bad:
                    reasons[_reason_kind(r.reason)] = reasons.get(_reason_kind(r.reason), 0) + 1
                common = "; ".join(f"{k} ({v})" for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])[:3])
                lines.append(f"{status}: {len(bad)}  e.g. {common}")
        return "\n".join(lines)


def _reason_kind(reason: str | None) -> str:
    """A reason with its numbers blanked, so that similar failures are counted together."""
    if not reason:
        return "no reason given"
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", reason.splitlines()[0])[:90]


def _resource_summary(resources: dict | None) -> tuple[str, str]:
    if not resources:
        return "-", "-"
    regs = max(v.get("registers", 0) for v in resources.values())
    smem = max(v.get("shared_bytes", 0) for v in resources.values())
    return str(regs), str(smem)


def _varying_fields(specs: Sequence[Spec]) -> list[str]:
    if not specs:
        return []
    names = [f.name for f in dataclasses.fields(specs[0])]
    return [n for n in names if len({json.dumps(getattr(s, n, None)) for s in specs}) > 1]


def _field_text(spec: Spec, name: str) -> str:
    v = getattr(spec, name, None)
    if isinstance(v, tuple):
        return f"{name}={'x'.join(str(x) for x in v)}"
    return f"{name}={v}"


_STATUS_ORDER = {"ok": 0, "compiled": 1, "wrong-result": 2, "launch-error": 3, "compile-error": 4, "pruned": 5}


def record_order(r: Record) -> tuple[int, float]:
    """Sort key: timed candidates first, fastest first, then the failures by kind."""
    return (_STATUS_ORDER.get(r.status, 9), r.median_ms if r.median_ms is not None else math.inf)


def first_line(exc: BaseException) -> str:
    """An exception's message cut to its first line (a compiler's or driver's output can run long)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]

