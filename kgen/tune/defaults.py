"""The defaults kgen ships: a spec for any problem, learned from a measured corpus.

A table holds, for one family, dtype and GPU model, a portfolio of specs and the time
of each on every problem of a corpus (kgen.tune.corpus). To choose a spec for a new
problem, the model looks at the corpus problems nearest to it (log2 of each dimension,
plus whether its rows allow 16-byte loads), averages each spec's log slowdown against
the best spec there, weighted by closeness, and takes the spec with the smallest
predicted slowdown that the device allows. Fitting is just storing the measurements;
the held-out score (build_defaults) says how well the choice generalises.

Tables live in kgen/tune/data/defaults.json. A GPU model without a table of its own
uses a table of the same architecture (sm_90 for both the H100 and the H200); a family
or dtype without any table falls back to the family's own rule (Spec.default_spec).
"""
from __future__ import annotations

import json
import math
import os
import random
import threading
from pathlib import Path
from typing import Any, Sequence

from ..core.spec import Spec, spec_from_dict

DATA = Path(__file__).resolve().parent / "data" / "defaults.json"
NEIGHBOURS = 6
MISSING_PENALTY = math.log(20.0)  # a spec that failed or was pruned on a corpus problem

_tables: list[Any] = []
_lock = threading.Lock()


def features(family: str, problem: dict[str, Any], itemsize: int) -> tuple[float, ...]:
    """Where a problem sits for the nearest-neighbour model."""
    if family == "matmul":
        vec = max(1, 16 // itemsize)
        aligned = all(problem[d] % vec == 0 for d in ("N", "K"))
        return (math.log2(problem["M"]), math.log2(problem["N"]), math.log2(problem["K"]), 0.0 if aligned else 1.5)
    return (math.log2(max(problem["n"], 1)),)


class Table:
    """One family x dtype x device table and its nearest-neighbour model."""

    def __init__(self, data: dict[str, Any], rows: Sequence[int] | None = None):
        self.family: str = data["family"]
        self.dtype: str = data["dtype"]
        self.device: str = data["device"]
        self.arch: str = data.get("arch", "")
        self.op: str | None = data.get("op")
        self.specs: list[Spec] = [spec_from_dict(d) for d in data["specs"]]
        itemsize = {"float32": 4, "float64": 8, "int32": 4, "float16": 2, "bfloat16": 2}.get(self.dtype, 4)
        self._itemsize = itemsize
        keep = range(len(data["problems"])) if rows is None else rows
        self.problems = [data["problems"][i] for i in keep]
        self.points = [features(self.family, p, itemsize) for p in self.problems]
        self.regret: list[list[float]] = []
        for i in keep:
            times = data["ms"][i]
            ok = [t for t in times if t is not None and t > 0]
            best = min(ok) if ok else None
            self.regret.append([math.log(t / best) if best and t is not None and t > 0 else MISSING_PENALTY
                                for t in times])

    def predict(self, problem: dict[str, Any]) -> list[float]:
        """Predicted log slowdown of each spec against the best, for `problem`."""
        here = features(self.family, problem, self._itemsize)
        dists = sorted((math.dist(here, p), i) for i, p in enumerate(self.points))[:NEIGHBOURS]
        weights = [(1.0 / (d * d + 0.05), i) for d, i in dists]
        total = sum(w for w, _ in weights)
        return [sum(w * self.regret[i][j] for w, i in weights) / total for j in range(len(self.specs))]

    def choose(self, problem: dict[str, Any], limits: dict[str, int] | None = None) -> tuple[Spec, float] | None:
        """The spec with the smallest predicted slowdown that `limits` allow, and that
        prediction (a ratio to the best spec of the portfolio)."""
        ranked = sorted(zip(self.predict(problem), range(len(self.specs))))
        for score, j in ranked:
            spec = self.specs[j]
            try:
                if spec.prune_reason(problem, limits or {}):
                    continue
            except Exception:  # noqa: BLE001 - a spec the problem rules out is skipped
                continue
            return spec, math.exp(score)
        return None


def _load() -> list[dict[str, Any]]:
    if _tables:
        return _tables[0]
    with _lock:
        if not _tables:
            path = Path(os.environ.get("KGEN_DEFAULTS", DATA))
            try:
                data = json.loads(path.read_text())
                tables = data["tables"] if isinstance(data, dict) else []
            except (OSError, ValueError, KeyError):
                tables = []
            _tables.append(tables)
    return _tables[0]


_models: dict[tuple, Table | None] = {}


def table_for(family: str, dtype: str, device: str, arch: str, op: str | None = None) -> Table | None:
    """The table for this device, else one of its architecture, else None."""
    key = (family, dtype, device, arch, op)
    if key in _models:
        return _models[key]
    found = None
    candidates = [t for t in _load() if t["family"] == family and t["dtype"] == dtype and t.get("op") == op]
    for t in candidates:
        if t["device"] == device:
            found = t
            break
    else:
        for t in candidates:
            if t.get("arch") == arch:
                found = t
                break
    model = Table(found) if found is not None else None
    _models[key] = model
    return model


def choose(family: str, problem: dict[str, Any], dtype: str, device: str, arch: str,
           limits: dict[str, int] | None = None) -> Spec | None:
    """The shipped choice for `problem`, or None when no table covers it."""
    op = problem.get("op") if family == "reduce" else None
    model = table_for(family, dtype, device, arch, op)
    if model is None:
        return None
    picked = model.choose(problem, limits)
    return picked[0] if picked else None


# ---------------------------------------------------------------------------------
# Building the shipped file from measured corpora (kgen.tune.corpus measure ...)
# ---------------------------------------------------------------------------------
def split(problems: list[dict[str, Any]], held_out: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices of the training and held-out problems (a fixed random split)."""
    idx = list(range(len(problems)))
    random.Random(seed + 1).shuffle(idx)
    cut = int(round(len(idx) * (1 - held_out)))
    return sorted(idx[:cut]), sorted(idx[cut:])


def score(data: dict[str, Any], train: Sequence[int], test: Sequence[int]) -> dict[str, Any]:
    """Fit on `train`, choose on `test`: the chosen spec's time over the best measured."""
    model = Table(data, train)
    ratios = []
    unmeasured = []  # the chosen spec failed or was not run on that problem
    for i in test:
        times = data["ms"][i]
        ok = [t for t in times if t is not None and t > 0]
        if not ok:
            continue
        picked = model.choose(data["problems"][i])
        if picked is None:
            continue
        j = model.specs.index(picked[0])
        t = times[j]
        if t is None:
            unmeasured.append(data["problems"][i])
            continue
        ratios.append(min(ok) / t)
    if not ratios:
        return {"count": 0, "chosen_unmeasured": unmeasured}
    geo = math.exp(sum(math.log(max(r, 1e-9)) for r in ratios) / len(ratios))
    return {"count": len(ratios), "geomean_of_best": round(geo, 4), "worst": round(min(ratios), 4),
            "below_0.9": sum(r < 0.9 for r in ratios), "chosen_unmeasured": unmeasured}


def build_defaults(corpora: Sequence[str], out: str | None = None, held_out: float = 0.25,
                   seed: int = 2026) -> dict[str, Any]:
    """Merge measured corpora into the shipped file, scoring each on its held-out split."""
    path = Path(out) if out else DATA
    try:
        shipped = json.loads(path.read_text())
    except (OSError, ValueError):
        shipped = {"version": 1, "tables": []}
    report = {}
    for c in corpora:
        data = json.loads(Path(c).read_text())
        train, test = split(data["problems"], held_out, seed)
        data["held_out"] = {"train": len(train), "test": len(test), **score(data, train, test)}
        report[c] = data["held_out"]
        ident = (data["family"], data["dtype"], data["device"], data.get("op"))
        shipped["tables"] = [t for t in shipped["tables"]
                             if (t["family"], t["dtype"], t["device"], t.get("op")) != ident] + [data]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(shipped, separators=(",", ":")))
    os.replace(tmp, path)
    return report
