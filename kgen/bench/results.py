"""What the experiment benchmarks share: drawing sizes, checking a launch, summarising, writing rows."""

from __future__ import annotations

import json
import math
import os
import random
from typing import Any


def log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    """An integer drawn log-uniformly from [lo, hi] (sizes spread evenly over octaves)."""
    return int(round(2 ** rng.uniform(math.log2(lo), math.log2(hi))))


def write_rows(path: str, rows: list[dict[str, Any]], **extra: Any) -> None:
    """{"device": the GPU's name, **extra, "rows": rows} as JSON at `path`, written whole
    or not at all (a temporary file renamed over it)."""
    import torch

    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump({"device": torch.cuda.get_device_name(), **extra, "rows": rows}, fh, indent=1)
    os.replace(tmp, path)


def poisoned_error(run: Any, out: Any, ref: Any) -> float:
    """Relative norm error of `out` (a torch tensor) against the float64 `ref` after `run()`
    wrote it, with `out` filled with NaN first: an element never written makes it NaN, which
    fails every `err < tolerance` check."""
    import torch

    out.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    return float((out.double() - ref).norm() / ref.norm())


def geomean(xs: list[float]) -> float:
    """The geometric mean (NaN for no values)."""
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")
