"""Reductions: sum, dot, min, max of one or two vectors.

One spec class, one template (templates/reduce.cu.j2), one kernel class.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from .. import runtime
from ..kernel import Kernel
from ..runtime import ArrayError
from ..spec import DTYPES, Spec, fail, register_family

OPS = {
    # op: (inputs, map expression, combine expression, identity per dtype)
    "sum": (1, "x", "a + b", {"float32": "0", "float64": "0", "int32": "0"}),
    "dot": (2, "x * y", "a + b", {"float32": "0", "float64": "0"}),
    "min": (1, "x", "(b < a ? b : a)", {"float32": "INFINITY", "float64": "INFINITY", "int32": "2147483647"}),
    "max": (1, "x", "(b > a ? b : a)", {"float32": "-INFINITY", "float64": "-INFINITY", "int32": "(-2147483647 - 1)"}),
}
STRATEGIES = ("shared_tree",)


@register_family
@dataclasses.dataclass(frozen=True)
class Reduce(Spec):
    """A reduction kernel. See docs/spec.md for every field.

    op            "sum", "dot", "min" or "max".
    strategy      how a block combines its threads' values ("shared_tree").
    block_size    threads per block (a power of two, 32 to 1024).
    items_per_thread  elements each thread folds per grid-stride step.
    grid_size     blocks in pass 1; 0 derives it from the length and the SM count.
    """

    kernel: ClassVar[str] = "reduce"
    template: ClassVar[str] = "reduce.cu.j2"

    op: str = "dot"
    dtype: str = "float32"
    strategy: str = "shared_tree"
    block_size: int = 256
    items_per_thread: int = 4
    grid_size: int = 0

    def validate(self) -> None:
        if self.op not in OPS:
            fail("op", self.op, f"one of {sorted(OPS)}")
        if self.dtype not in OPS[self.op][3]:
            fail("dtype", self.dtype, f"one of {sorted(OPS[self.op][3])} for op={self.op!r}")
        if self.strategy not in STRATEGIES:
            fail("strategy", self.strategy, f"one of {list(STRATEGIES)}")
        bs = self.block_size
        if bs < 32 or bs > 1024 or bs & (bs - 1):
            fail("block_size", bs, "a power of two from 32 to 1024")
        if not 1 <= self.items_per_thread <= 64:
            fail("items_per_thread", self.items_per_thread, "an integer from 1 to 64")
        if not 0 <= self.grid_size <= 65536:
            fail("grid_size", self.grid_size, "0 (derived from the SM count) or 1 to 65536")

    @property
    def arity(self) -> int:
        return OPS[self.op][0]

    @property
    def acc_dtype(self) -> str:
        return self.dtype

    def template_context(self) -> dict[str, Any]:
        _, map_expr, combine, identities = OPS[self.op]
        host_combine = {"sum": "ref + m", "dot": "ref + m", "min": "std::min(ref, m)", "max": "std::max(ref, m)"}
        host_identity = {"sum": "0", "dot": "0", "min": "INFINITY", "max": "-INFINITY"}
        eps = {"float32": 2.0 ** -23, "float64": 2.0 ** -52, "int32": 0.0}[self.dtype]
        return dict(
            arity=self.arity, map_expr=map_expr, combine_expr=combine, identity=identities[self.dtype],
            acc_ctype=DTYPES[self.acc_dtype], default_grid=self.grid_size or 264,
            host_map_expr=map_expr, host_combine_expr=host_combine[self.op], host_identity=host_identity[self.op],
            tolerance_eps=repr(4 * eps),
        )

    def launch_geometry(self, n: int, multiprocessors: int = 132) -> tuple[int, int]:
        """(blocks in pass 1, threads per block) for length n. Pure; unit-tested."""
        per_block = self.block_size * self.items_per_thread
        needed = max(1, -(-n // per_block))
        cap = self.grid_size or 8 * multiprocessors  # enough blocks to fill every SM a few times
        return min(needed, cap), self.block_size

    # -- the family interface (see Spec) ----------------------------------------------
    @classmethod
    def normalize_problem(cls, problem):
        if not isinstance(problem, dict):
            raise ValueError(f"reduce problem must be a dict with n and op, got {problem!r}")
        n, op = problem.get("n"), problem.get("op", "sum")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"reduce problem needs n as a non-negative integer, got {n!r}")
        if op not in OPS:
            raise ValueError(f"reduce problem op={op!r} is not allowed: one of {sorted(OPS)}")
        return {"n": int(n), "op": op}

    @classmethod
    def search_space(cls, problem, dtype):
        p = cls.normalize_problem(problem)
        specs = []
        for strategy in STRATEGIES:
            for bs in (64, 128, 256, 512, 1024):
                for items in (1, 2, 4, 8, 16):
                    for grid in (0, 132, 264, 528, 1056):
                        try:
                            specs.append(cls(op=p["op"], dtype=dtype, strategy=strategy, block_size=bs,
                                             items_per_thread=items, grid_size=grid))
                        except ValueError:
                            continue
        return specs

    @classmethod
    def default_spec(cls, problem, dtype):
        return cls(op=cls.normalize_problem(problem)["op"], dtype=dtype)

    def prune_reason(self, problem, limits):
        if self.block_size > limits.get("max_threads_per_block", 1024):
            return f"block_size {self.block_size} exceeds the device's {limits['max_threads_per_block']} threads"
        return None

    @classmethod
    def make_inputs(cls, problem, dtype, rng):
        p = cls.normalize_problem(problem)
        arity = OPS[p["op"]][0]
        if dtype == "int32":
            return tuple(rng.integers(-1000, 1000, p["n"], dtype=np.int32) for _ in range(arity))
        return tuple(rng.standard_normal(p["n"]).astype(dtype) for _ in range(arity))

    @classmethod
    def reference_output(cls, problem, inputs):
        return np.array(cls.reference_for(problem["op"], *inputs))

    @classmethod
    def output_shape(cls, problem):
        return ()

    def tolerance_for(self, problem):
        # Relative error of a length-n float sum of random-sign terms; min/max are exact.
        if self.op in ("min", "max") or self.dtype == "int32":
            return 0.0
        eps = float(np.finfo(self.dtype).eps)
        return 64 * eps * max(1.0, math.sqrt(problem["n"]))

    @classmethod
    def work(cls, problem, dtype):
        n, arity = problem["n"], OPS[problem["op"]][0]
        return {"flops": float(n * arity), "bytes": float(n * arity * np.dtype(dtype).itemsize)}

    @classmethod
    def bucket(cls, problem):
        return (math.log2(max(problem["n"], 1)),)

    @staticmethod
    def reference_for(op: str, *inputs: np.ndarray) -> float:
        x = inputs[0].astype(np.float64)
        if op == "dot":
            return float(np.dot(x, inputs[1].astype(np.float64)))
        return float({"sum": np.sum, "min": np.min, "max": np.max}[op](x))


class ReduceKernel(Kernel):
    """k(x) or k(x, y) -> scalar (numpy in) or 0-d device array (device in)."""

    spec: Reduce

    def __init__(self, spec, source, compiled):
        super().__init__(spec, source, compiled)
        self._partials_fn = self.function("kgen_reduce_partials")
        self._finish_fn = self.function("kgen_reduce_finish")
        self._np_dtype = np.dtype(spec.dtype)
        self._sms = runtime.device_limits()["multiprocessors"]
        self._scratch = None  # partials buffer, grown on demand

    def __call__(self, *inputs, out=None, stream=None):
        spec = self.spec
        if len(inputs) != spec.arity:
            raise ArrayError(f"op={spec.op!r} takes {spec.arity} input(s), got {len(inputs)}")
        names = ["x", "y"][: spec.arity]
        named = dict(zip(names, inputs))
        on_host = runtime.split_host_device({**named, "out": out})
        views = []
        for name, arr in named.items():
            if on_host:
                if arr.ndim != 1:
                    raise ArrayError(f"{name} must be 1-D, got shape {arr.shape}")
                self._check_dtype(arr.dtype, name)
                views.append(runtime.to_device(arr, name))
            else:
                v = runtime.view(arr, name)
                if len(v.shape) != 1:
                    raise ArrayError(f"{name} must be 1-D, got shape {v.shape}")
                self._check_dtype(v.dtype, name)
                if v.strides[0] != 1 and v.shape[0] > 1:
                    raise ArrayError(f"{name} must be contiguous (element stride 1), got stride {v.strides[0]}")
                views.append(v)
        n = views[0].shape[0]
        if any(v.shape[0] != n for v in views):
            raise ArrayError(f"x and y differ in length: {[v.shape[0] for v in views]}")
        if n == 0 and spec.op in ("min", "max"):
            raise ArrayError(f"op={spec.op!r} of an empty array is undefined")
        if on_host:
            res = runtime.new_host_output((), self._np_dtype)
        elif out is not None:
            res = runtime.view(out, "out")
            if res.shape not in ((), (1,)) or res.dtype != self._np_dtype:
                raise ArrayError(f"out must be a 0-d or 1-element {self._np_dtype} device array")
        else:
            res = runtime.view(runtime.empty_like_library(inputs[0], (), self._np_dtype), "out")
        grid, block = spec.launch_geometry(n, self._sms)
        partials = self._partials(grid)
        ptrs = [np.uintp(v.ptr) for v in views]
        runtime.launch(self._partials_fn, (grid, 1, 1), (block, 1, 1), (*ptrs, np.int64(n), np.uintp(partials)),
                       stream=stream)
        runtime.launch(self._finish_fn, (1, 1, 1), (block, 1, 1), (np.uintp(partials), np.int32(grid),
                                                                    np.uintp(res.ptr)), stream=stream)
        if on_host:
            return runtime.copy_back(res)[()]
        return res.owner

    def _partials(self, count: int) -> int:
        need = count * np.dtype(self.spec.acc_dtype).itemsize
        if self._scratch is None or self._scratch[1] < need:
            self._scratch = (runtime.driver().mem_alloc(need), need)
        return int(self._scratch[0])

    def _check_dtype(self, dtype, name):
        if np.dtype(dtype) != self._np_dtype:
            raise ArrayError(f"{name} has dtype {np.dtype(dtype)} but this kernel was built for {self._np_dtype}; "
                             f"build a spec with dtype={np.dtype(dtype).name!r} or convert {name}")


Reduce.kernel_class = ReduceKernel
