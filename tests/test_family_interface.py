"""A kernel family defined outside the kgen package, through the family interface alone.

`Axpy` (out = alpha * x + y) is one spec class, one template string and one kernel class,
all in this file. kgen renders it, nvcc compiles it (in the tuner's worker processes too,
which import this module to find the family), the tuner searches its space with recorded
times (no GPU), and the result lands in the tuning database where dispatch finds it.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
import pytest

import kgen
from kgen.core.kernel import Kernel
from kgen.core.spec import Spec, SpecError, fail, register_family
from kgen.tune.db import TuneDB, problem_key
from kgen.tune.device import toolchain_version
from kgen.tune.dispatch import select
from kgen.tune.runners import RecordedRunner

ALPHA = 2.5  # the kernel's default scale; make_inputs and reference_output use it too

AXPY_TEMPLATE = r"""{% import "common.cuh.j2" as common with context %}
{{ common.header("axpy: out = alpha * x + y, " ~ block_size ~ " threads x " ~ items_per_thread ~ " items") }}
{{ common.prelude() }}
typedef {{ ctype }} real;

// Block b covers {{ block_size * items_per_thread }} consecutive elements; thread t takes t,
// t + {{ block_size }}, ... so that neighbouring threads touch neighbouring addresses.
extern "C" __global__ void __launch_bounds__({{ block_size }})
kgen_axpy(const real* __restrict__ x, const real* __restrict__ y, real* __restrict__ out, real alpha,
          long long n)
{
    const long long base = (long long)blockIdx.x * {{ block_size * items_per_thread }} + threadIdx.x;
#pragma unroll
    for (int k = 0; k < {{ items_per_thread }}; ++k) {
        const long long i = base + (long long)k * {{ block_size }};
        if (i < n) out[i] = alpha * x[i] + y[i];
    }
}
"""

BLOCK_SIZES = (128, 256, 512)
ITEMS = (1, 4)


class AxpyKernel(Kernel):
    """kernel(x, y, out=None, alpha=ALPHA): numpy arrays in, numpy out; pycuda GPUArrays in, GPUArray out."""

    def __call__(self, x: Any, y: Any, out: Any = None, *, alpha: float = ALPHA) -> Any:
        from pycuda import gpuarray

        self._check_dtype(x.dtype, "x")
        self._check_dtype(y.dtype, "y")
        if x.shape != y.shape or len(x.shape) != 1:
            raise kgen.ArrayError(f"x and y must be 1-D of one length, got {x.shape} and {y.shape}")
        on_host = isinstance(x, np.ndarray)
        xg, yg = (gpuarray.to_gpu(np.ascontiguousarray(a)) if on_host else a for a in (x, y))
        og = gpuarray.empty(x.shape, x.dtype) if out is None or on_host else out
        n = x.shape[0]
        spec = self.spec
        grid = max(1, -(-n // (spec.block_size * spec.items_per_thread)))
        self.function("kgen_axpy")(xg, yg, og, self._np_dtype.type(alpha), np.int64(n),
                                   block=(spec.block_size, 1, 1), grid=(grid, 1))
        if not on_host:
            return og
        result = og.get()
        if isinstance(out, np.ndarray):
            out[...] = result
            return out
        return result


@register_family
@dataclasses.dataclass(frozen=True)
class Axpy(Spec):
    """out = alpha * x + y over n elements: the tuning knobs are the block size and how many
    elements each thread handles."""

    kernel: ClassVar[str] = "axpy"
    kernel_class: ClassVar[type] = AxpyKernel

    dtype: str = "float32"
    block_size: int = 256
    items_per_thread: int = 1

    @classmethod
    def template_source(cls) -> str:
        return AXPY_TEMPLATE

    def validate(self) -> None:
        if self.dtype not in ("float32", "float64"):
            fail("dtype", self.dtype, "'float32' or 'float64'")
        if self.block_size not in (32, 64, 128, 256, 512, 1024):
            fail("block_size", self.block_size, "a power of two from 32 to 1024")
        if not 1 <= self.items_per_thread <= 16:
            fail("items_per_thread", self.items_per_thread, "1 to 16")

    @classmethod
    def normalize_problem(cls, problem: dict[str, Any]) -> dict[str, Any]:
        n = problem.get("n")
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"axpy needs n, a positive integer; got {problem!r}")
        return {"n": n}

    @classmethod
    def search_space(cls, problem: dict[str, Any], dtype: str) -> list[Spec]:
        return [cls(dtype=dtype, block_size=b, items_per_thread=i) for b in BLOCK_SIZES for i in ITEMS]

    @classmethod
    def default_spec(cls, problem: dict[str, Any], dtype: str) -> Spec:
        return cls(dtype=dtype)

    def prune_reason(self, problem: dict[str, Any], limits: dict[str, int]) -> str | None:
        if self.block_size > limits.get("max_threads_per_block", 1024):
            return f"block_size={self.block_size} exceeds the device's {limits['max_threads_per_block']} threads"
        return None

    @classmethod
    def make_inputs(cls, problem: dict[str, Any], dtype: str, rng: Any) -> tuple[Any, ...]:
        n = cls.normalize_problem(problem)["n"]
        return rng.uniform(0.5, 1.5, n).astype(dtype), rng.uniform(-1.5, -0.5, n).astype(dtype)

    @classmethod
    def reference_output(cls, problem: dict[str, Any], inputs: tuple[Any, ...]) -> Any:
        x, y = (np.asarray(a, dtype=np.float64) for a in inputs)
        return ALPHA * x + y

    @classmethod
    def output_shape(cls, problem: dict[str, Any]) -> tuple[int, ...]:
        return (cls.normalize_problem(problem)["n"],)

    def tolerance_for(self, problem: dict[str, Any], inputs: tuple[Any, ...] | None = None) -> float:
        # One rounding of the product and one of the sum per element (or one, contracted to an FMA).
        return 4 * float(np.finfo(np.dtype(self.dtype)).eps)

    @classmethod
    def work(cls, problem: dict[str, Any], dtype: str) -> dict[str, float]:
        n = cls.normalize_problem(problem)["n"]
        return {"flops": 2.0 * n, "bytes": 3.0 * n * np.dtype(dtype).itemsize}

    @classmethod
    def bucket(cls, problem: dict[str, Any]) -> tuple[float, ...]:
        return (math.log2(cls.normalize_problem(problem)["n"]),)


PROBLEM = {"n": 1 << 20}


def recorded_ms(spec: Spec) -> float:
    """A made-up landscape: 256 threads with 4 items each is fastest, by a clear margin."""
    assert isinstance(spec, Axpy)
    return 0.05 * (1 + abs(math.log2(spec.block_size / 256)) + 0.5 * abs(math.log2(spec.items_per_thread / 4)))


def test_the_family_registers_renders_and_round_trips():
    spec = Axpy(block_size=512, items_per_thread=4)
    assert kgen.core.spec.family("axpy") is Axpy
    assert kgen.spec_from_json(spec.to_json()) == spec
    src = kgen.render(spec)
    assert "kgen_axpy" in src and "__launch_bounds__(512)" in src and "typedef float real;" in src
    assert spec.to_json() in src  # kgen's shared header macro names the spec
    assert src == kgen.render(Axpy(block_size=512, items_per_thread=4))
    with pytest.raises(SpecError, match="block_size=96 is not allowed"):
        Axpy(block_size=96)


def test_a_family_missing_part_of_the_interface_says_which_part():
    @dataclasses.dataclass(frozen=True)
    class Half(Spec):
        kernel: ClassVar[str] = "half"
        dtype: str = "float32"

    with pytest.raises(NotImplementedError, match=r"half family does not define search_space\(\)"):
        Half.search_space({}, "float32")
    with pytest.raises(NotImplementedError, match=r"tolerance_for\(\)"):
        Half().tolerance_for({})


def test_reference_and_inputs_follow_the_interface():
    rng = np.random.default_rng(1)
    x, y = Axpy.make_inputs(PROBLEM, "float32", rng)
    assert x.dtype == np.float32 and np.count_nonzero(x) == x.size and np.count_nonzero(y) == y.size
    ref = Axpy.reference_output(PROBLEM, (x, y))
    assert ref.dtype == np.float64 and ref.shape == Axpy.output_shape(PROBLEM)
    # float32 arithmetic, as the kernel does it, is within the family's tolerance.
    got = (np.float32(ALPHA) * x + y).astype(np.float64)
    assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= Axpy().tolerance_for(PROBLEM)


@pytest.mark.nvcc
def test_nvcc_compiles_the_rendered_family():
    compiled = kgen.compile(Axpy(block_size=128, items_per_thread=4), "sm_90")
    assert compiled.resources["kgen_axpy"]["registers"] > 0
    assert compiled.resources["kgen_axpy"].get("spill_stores", 0) == 0


@pytest.mark.nvcc
def test_autotune_finds_the_fastest_recorded_spec_and_stores_it(tmp_path):
    """End to end through kgen.autotune: the space, pruning, compiling in worker processes
    with the real nvcc, verification and timing by a RecordedRunner, the leaders' re-timing,
    and the tuning database."""
    db = TuneDB(tmp_path / "tune.sqlite3")
    runner = RecordedRunner(recorded_ms, noise=0.002)
    result = kgen.autotune(Axpy, PROBLEM, "float32", strategy="exhaustive", runner=runner, db=db, workers=2)
    space = Axpy.search_space(PROBLEM, "float32")
    fastest = min(space, key=recorded_ms)
    assert fastest == Axpy(block_size=256, items_per_thread=4)
    assert result.best == fastest and result.decided and not result.from_db
    assert result.counts["candidates"] == len(space) == result.counts["timed"]
    assert sorted(runner.launched) == sorted(s.key for s in space)
    # Every candidate went through nvcc: ptxas' report is on each record.
    assert all(r.resources and r.resources["kgen_axpy"]["registers"] > 0 for r in result.records)

    key = problem_key("axpy", "float32", PROBLEM, runner.device.name, runner.device.arch, toolchain_version(),
                      kgen.__version__)
    stored = db.result(key, "exhaustive")
    assert stored is not None and kgen.spec_from_json(stored["best"]) == fastest
    assert len(db.candidates(key)) == len(space)
    choice = select(Axpy, PROBLEM, "float32", device=runner.device, db=db)
    assert choice.origin == "exact" and choice.spec == fastest
    again = kgen.autotune(Axpy, PROBLEM, "float32", strategy="exhaustive", runner=RecordedRunner(recorded_ms), db=db)
    assert again.from_db and again.best == fastest


@pytest.mark.gpu
def test_the_family_runs_on_the_gpu_against_float64():
    rng = np.random.default_rng()
    for spec in (Axpy(), Axpy(block_size=128, items_per_thread=4), Axpy(dtype="float64", block_size=512)):
        problem = {"n": 100_003}  # not a multiple of any block's share: the tail is guarded
        x, y = Axpy.make_inputs(problem, spec.dtype, rng)
        out = np.full_like(x, np.nan)
        got = kgen.build(spec)(x, y, out=out)
        ref = Axpy.reference_output(problem, (x, y))
        assert got is out and np.all(np.isfinite(got))
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= spec.tolerance_for(problem)
