"""Runners: what verifies and times candidates for the tuner.

A runner has a `device` (a DeviceInfo) and four methods; the tuner calls them in this order:

    prepare(cls, problem, dtype, seed)  once per run: inputs, reference, output buffer
    verify(spec) -> (relative error, tolerance, count of non-finite outputs)   one launch
    time(specs, samples, warmup) -> one list of milliseconds per spec           interleaved
    close()

verify and time raise LaunchFailure for a candidate that cannot run, ContextLost when the
device can run nothing more. CudaRunner runs on the current GPU; RecordedRunner replays
times from a table or a function (tests, replays of recorded tunes). A new runner (say,
one that times on a remote machine) implements the Runner protocol below and is passed
as autotune(..., runner=...).
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..core.spec import Spec
from .device import DeviceInfo, arch_limits, cuda_device_info
from .records import ContextLost, LaunchFailure, first_line

logger = logging.getLogger(__name__)


class Runner(Protocol):
    """The interface the tuner drives (see the module docstring)."""

    device: DeviceInfo

    def prepare(self, cls: type[Spec], problem: dict[str, Any], dtype: str, seed: int | None = None) -> None:
        """Make the run's inputs for `problem` (fresh random data) and whatever verify needs."""

    def verify(self, spec: Spec) -> tuple[float, float, int]:
        """Launch `spec` once on the prepared inputs: (relative error, tolerance, non-finite outputs)."""

    def time(self, specs: Sequence[Spec], samples: int, warmup: int = 1) -> list[list[float]]:
        """`samples` times in milliseconds for each of `specs`, taken interleaved."""

    def close(self) -> None:
        """Free what prepare() allocated."""


def operand_layouts(spec: Spec, problem: dict[str, Any]) -> tuple[str, str]:
    """The storage orders ("row" or "col") a candidate's A and B are given in: a spec with layout
    fields (matmul's layout_a / layout_b) reads its operands so, each combination from its own copy;
    a spec without them (a skinny product, whose strides pick its form at launch) gets them as the
    problem names them (a skinny problem of W.t(): layout_b = "col"), else row-major."""
    return tuple(getattr(spec, f"layout_{c}", None) or problem.get(f"layout_{c}", "row")
                 for c in "ab")


class CudaRunner:
    """Verifies and times candidates on the current GPU.

    prepare() makes one set of random inputs for the problem, its float64 reference and
    a NaN-poisoned output buffer; verify() launches a candidate once and measures its
    relative error; time() takes CUDA-event samples of several candidates interleaved.
    """

    def __init__(self, flush_l2: bool = True, seed: int | None = None):
        self.device = cuda_device_info()
        self.flush_l2 = flush_l2
        self._rng = np.random.default_rng(seed)
        self._inputs: dict[tuple, list] = {}
        self._flusher: Callable[[], None] | None = None

    def prepare(self, cls: type[Spec], problem: dict[str, Any], dtype: str, seed: int | None = None) -> None:
        from pycuda import gpuarray

        from ..core import runtime
        from ..core.timing import L2Flusher

        runtime.driver()
        rng = np.random.default_rng(seed)
        self.cls, self.problem, self.dtype = cls, problem, dtype
        self._host = tuple(np.ascontiguousarray(a) for a in cls.make_inputs(problem, dtype, rng))
        ref = np.asarray(cls.reference_output(problem, self._host), dtype=np.float64)
        self._ref = ref
        norm = float(np.linalg.norm(ref.ravel()))
        self._ref_norm = norm if norm > 0 else 1.0
        self._inputs = {}
        shape = tuple(cls.output_shape(problem)) or (1,)  # a 0-d result lives in a 1-element buffer
        self._out = gpuarray.empty(shape, np.dtype(dtype))
        self._poison = np.nan if np.dtype(dtype).kind == "f" else np.iinfo(np.dtype(dtype)).min
        self._sumsq = None
        if ref.size >= (1 << 16) and np.dtype(dtype).kind == "f":
            # Copying a large output back and comparing on the CPU would cost more than the
            # kernel: compare on the GPU, in float64, against the reference uploaded once.
            try:
                from pycuda.reduction import ReductionKernel

                ctype = "float" if np.dtype(dtype) == np.float32 else "double"
                self._sumsq = ReductionKernel(np.float64, neutral="0", reduce_expr="a+b",
                                              map_expr="((double)x[i] - y[i]) * ((double)x[i] - y[i])",
                                              arguments=f"const {ctype} *x, const double *y")
                self._ref_gpu = gpuarray.to_gpu(np.ascontiguousarray(ref.ravel()))
                self._sumsq(self._out.reshape(-1), self._ref_gpu).get()  # compile it now, not in the first check
            except Exception as exc:  # noqa: BLE001 - fall back to comparing on the host
                logger.debug("checking results on the host: the GPU comparison kernel failed (%s)", first_line(exc))
                self._sumsq = None
        if self.flush_l2 and self._flusher is None:
            self._flusher = L2Flusher()

    def _device_inputs(self, spec: Spec) -> list:
        layouts = operand_layouts(spec, self.problem)
        got = self._inputs.get(layouts)
        if got is None:
            from pycuda import gpuarray

            got = []
            for i, a in enumerate(self._host):
                if a.ndim == 2 and i < 2 and layouts[i] == "col":
                    a = np.asfortranarray(a)
                got.append(gpuarray.to_gpu(a))
            self._inputs[layouts] = got
        return got

    def _call(self, spec: Spec) -> Callable[[], object]:
        from ..core.kernel import build

        try:
            k = build(spec)
        except Exception as exc:  # noqa: BLE001 - any load failure is this candidate's failure
            raise LaunchFailure(f"could not load: {first_line(exc)}") from None
        ins, out = self._device_inputs(spec), self._out
        return lambda: k(*ins, out=out)

    def _check_context(self) -> None:
        from ..core import runtime

        try:
            runtime.driver().Context.synchronize()
        except Exception as exc:  # noqa: BLE001
            raise ContextLost(f"the CUDA context is broken: {first_line(exc)}") from None

    def verify(self, spec: Spec) -> tuple[float, float, int]:
        """(relative error, tolerance, count of non-finite outputs) of one launch."""
        from ..core import runtime

        call = self._call(spec)
        self._out.fill(self._poison)
        try:
            call()
            runtime.driver().Context.synchronize()
        except Exception as exc:  # noqa: BLE001
            self._check_context()
            raise LaunchFailure(f"launch failed: {first_line(exc)}") from None
        tol = float(spec.tolerance_for(self.problem, self._host))
        if self._sumsq is not None:
            sq = float(self._sumsq(self._out.reshape(-1), self._ref_gpu).get())
            if math.isfinite(sq):
                return math.sqrt(sq) / self._ref_norm, tol, 0
        got = self._out.get().reshape(self._ref.shape) if self._ref.shape else self._out.get().reshape(())
        got64 = got.astype(np.float64)
        bad = int(np.size(got64) - np.count_nonzero(np.isfinite(got64)))
        err = float(np.linalg.norm((got64 - self._ref).ravel())) / self._ref_norm if not bad else math.inf
        return err, tol, bad

    def time(self, specs: Sequence[Spec], samples: int, warmup: int = 1) -> list[list[float]]:
        """`samples` milliseconds per spec, taken in rounds; each round runs every spec once,
        in a fresh random order, with the L2 flushed before each launch."""
        from ..core import runtime

        drv = runtime.driver()
        calls = [self._call(s) for s in specs]
        try:
            for c in calls:
                for _ in range(warmup):
                    c()
            drv.Context.synchronize()
            events = [(drv.Event(), drv.Event()) for _ in calls]
            out: list[list[float]] = [[] for _ in calls]
            for _ in range(samples):
                order = self._rng.permutation(len(calls))
                for i in order:
                    if self._flusher is not None:
                        self._flusher()
                    start, stop = events[i]
                    start.record()
                    calls[i]()
                    stop.record()
                events[order[-1]][1].synchronize()
                drv.Context.synchronize()
                for i in range(len(calls)):
                    out[i].append(events[i][1].time_since(events[i][0]))
        except Exception as exc:  # noqa: BLE001
            self._check_context()
            raise LaunchFailure(f"timing failed: {first_line(exc)}") from None
        return out

    def close(self) -> None:
        self._inputs = {}


class RecordedRunner:
    """A runner without a GPU, for tests and demonstrations: times come from a table or a
    function of the spec (plus optional multiplicative noise), and chosen specs fail to
    launch or return wrong results. Everything else in the tuner runs for real."""

    def __init__(self, times: Callable[[Spec], float] | dict[str, float], *,
                 device: DeviceInfo | None = None, noise: float = 0.0,
                 wrong: Callable[[Spec], bool] | None = None, launch_error: Callable[[Spec], bool] | None = None,
                 seed: int = 0):
        self.device = device or DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
        self._times = times
        self._noise = noise
        self._wrong = wrong or (lambda s: False)
        self._launch_error = launch_error or (lambda s: False)
        self._rng = np.random.default_rng(seed)
        self.launched: list[str] = []  # spec keys, in the order they were verified

    def prepare(self, cls: type[Spec], problem: dict[str, Any], dtype: str, seed: int | None = None) -> None:
        self.problem = problem

    def _ms(self, spec: Spec) -> float:
        t = self._times(spec) if callable(self._times) else self._times[spec.key]
        return float(t) * (1.0 + self._noise * float(self._rng.standard_normal()))

    def verify(self, spec: Spec) -> tuple[float, float, int]:
        self.launched.append(spec.key)
        if self._launch_error(spec):
            raise LaunchFailure("launch failed: too many resources requested for launch (recorded)")
        if self._wrong(spec):
            return 0.5, 1e-4, 0
        return 1e-7, 1e-4, 0

    def time(self, specs: Sequence[Spec], samples: int, warmup: int = 1) -> list[list[float]]:
        return [[self._ms(s) for _ in range(samples)] for s in specs]

    def close(self) -> None:
        pass

