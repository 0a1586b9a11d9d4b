"""What the experiment benchmarks share: drawing sizes and writing their rows."""

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
