"""GPU timing with CUDA events: warm-up, repeats, median, optional L2 flush.

Used by the benchmarks and the autotuner, so that every number kgen prints is
taken the same way.
"""
from __future__ import annotations

import dataclasses
import statistics
from typing import Callable

from . import runtime


@dataclasses.dataclass(frozen=True)
class Timing:
    """Milliseconds per call: median and the spread (interquartile range) of the repeats."""

    median_ms: float
    iqr_ms: float
    samples_ms: tuple[float, ...]

    @property
    def spread(self) -> float:
        """Relative spread: IQR over the median."""
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else 0.0


class L2Flusher:
    """Writes a buffer twice the L2's size so that the next launch starts with a cold cache."""

    def __init__(self):
        drv = runtime.driver()
        self.nbytes = 2 * max(runtime.device_limits()["l2_bytes"], 1 << 20)
        self.buf = drv.mem_alloc(self.nbytes)

    def __call__(self) -> None:
        runtime.driver().memset_d8(self.buf, 0, self.nbytes)


def time_calls(fn: Callable[[], object], *, warmup: int = 3, repeats: int = 30, inner: int = 1,
               flush_l2: bool = False, before: Callable[[], object] | None = None) -> Timing:
    """Time `fn` (which only enqueues GPU work) with CUDA events.

    Each sample brackets `inner` back-to-back calls with two events and divides by
    `inner`: with inner > 1 the launch queue stays full, so short kernels are timed
    without the host's launch gaps. `flush_l2` (or `before`, e.g. rotating inputs)
    runs outside the events before each sample.
    """
    drv = runtime.driver()
    flusher = L2Flusher() if flush_l2 else None
    for _ in range(warmup):
        fn()
    drv.Context.synchronize()
    start, stop = drv.Event(), drv.Event()
    samples = []
    for _ in range(repeats):
        if flusher is not None:
            flusher()
        if before is not None:
            before()
        start.record()
        for _ in range(inner):
            fn()
        stop.record()
        stop.synchronize()
        samples.append(stop.time_since(start) / inner)
    samples.sort()
    q = statistics.quantiles(samples, n=4) if len(samples) >= 4 else [samples[0], samples[0], samples[-1]]
    return Timing(statistics.median(samples), q[2] - q[0], tuple(samples))
