"""Timing statistics: medians, spreads and when two sets of samples are told apart."""
from __future__ import annotations

import math
import statistics
from typing import Sequence


def median_iqr(samples: Sequence[float]) -> tuple[float, float]:
    """(median, interquartile range) of the samples (the full range for fewer than four)."""
    s = sorted(samples)
    med = statistics.median(s)
    if len(s) >= 4:
        q = statistics.quantiles(s, n=4)
        return med, q[2] - q[0]
    return med, (s[-1] - s[0]) if len(s) > 1 else 0.0


def stderr_of_median(samples: Sequence[float]) -> float:
    """Standard error of a median, from the IQR (robust to the odd slow sample)."""
    _, iqr = median_iqr(samples)
    sigma = iqr / 1.349
    return 1.2533 * sigma / math.sqrt(max(len(samples), 1))


def separated(a: Sequence[float], b: Sequence[float], z: float = 3.0) -> bool:
    """True when the medians of a and b differ by more than z standard errors."""
    ma, mb = statistics.median(a), statistics.median(b)
    se = math.hypot(stderr_of_median(a), stderr_of_median(b))
    return abs(mb - ma) > z * max(se, 1e-6 * max(ma, mb))

