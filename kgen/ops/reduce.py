"""Reductions: sum, dot, min, max and general map-reduce over one or two vectors.

One spec class (Reduce), one template (templates/reduce.cu.j2), one kernel class
(ReduceKernel). docs/reduce.md explains every strategy and when it wins.

Pipeline of one call: every thread folds map(x[i], y[i]) over its share of the
input into a private accumulator (16-byte vector loads, `items_per_thread`
independent loads in flight, a grid-stride loop), then the `strategy` decides how
the per-thread values meet:

  shared_tree   halving tree in shared memory -> one partial per block -> 2nd kernel
  warp_shuffle  __shfl_down_sync inside each warp -> one partial per warp -> 2nd kernel
  two_pass      warp shuffles, then warp 0 merges the warps -> one partial per block -> 2nd kernel
  atomic        as two_pass inside a block, then one atomic per block into one cell
  single_pass   as two_pass inside a block; the last block to finish (ticket counter)
                folds the partials: one launch, no memset

`accumulate` picks the accumulator: the input type ("native"), float64, or a
compensated pair (value, correction) whose correction survives every merge ("kahan").
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from ..core import runtime
from ..core.compiler import CompileError
from ..core.kernel import Kernel
from ..core.launch import Launch, LaunchError, capture_id, ensure_context, write_words_async
from ..core.runtime import ArrayError
from ..core.spec import DTYPES, Spec, fail, register_family
from .expr import (  # noqa: F401 - the expression language; its names stay importable from here
    CONSTANTS, FUNCTIONS, INT32_MAX, INT32_MIN, ExpressionError, canonical_text, check_types, evaluate, fold,
    infinite_constant, parse_expression, render_c, rounding_bound, tokenize, undefined, uses, walk,
)

STRATEGIES = ("shared_tree", "warp_shuffle", "two_pass", "atomic", "single_pass")
ACCUMULATE = ("native", "float64", "kahan")
FLOAT_DTYPES = ("float32", "float64")

# op: (inputs, map expression, combine expression, identity, dtypes)
OPS: dict[str, tuple[int, str, str, str, tuple[str, ...]]] = {
    "sum": (1, "x", "a + b", "0", ("float32", "float64", "int32")),
    "dot": (2, "x * y", "a + b", "0", ("float32", "float64")),
    "min": (1, "x", "b < a ? b : a", "inf", ("float32", "float64", "int32")),
    "max": (1, "x", "b > a ? b : a", "-inf", ("float32", "float64", "int32")),
    "custom": (0, "", "", "", ("float32", "float64", "int32")),
}

# Combine expressions numpy can fold in one call (anything else is folded in a loop).
_KNOWN_COMBINES = {
    "(a+b)": "sum", "(b+a)": "sum", "(a*b)": "prod", "(b*a)": "prod",
    "min(a,b)": "min", "fmin(a,b)": "min", "min(b,a)": "min", "fmin(b,a)": "min",
    "max(a,b)": "max", "fmax(a,b)": "max", "max(b,a)": "max", "fmax(b,a)": "max",
    "((b<a)?b:a)": "min", "((a<b)?a:b)": "min", "((a>b)?b:a)": "min", "((b>a)?a:b)": "min",
    "((b>a)?b:a)": "max", "((a>b)?a:b)": "max", "((a<b)?b:a)": "max", "((b<a)?a:b)": "max",
}


@register_family
@dataclasses.dataclass(frozen=True)
class Reduce(Spec):
    """A reduction kernel. docs/reduce.md explains every field.

    op            "sum", "dot", "min", "max", or "custom" (then map_expr, combine, identity).
    dtype         "float32", "float64" or "int32" (int32: sum, min, max, custom).
    strategy      "shared_tree", "warp_shuffle", "two_pass", "atomic" or "single_pass".
    block_size    threads per block (a power of two, 32 to 1024).
    items_per_thread  independent loads each thread issues per loop step (1 to 16).
    vector_loads  read 16 bytes per load (float4 / double2 / int4) where aligned.
    grid_size     0: blocks derived from the SM count (a full wave); else a fixed cap.
    grid_stride   True: a capped grid strides over the input; False: one tile per block
                  (the grid grows with n).
    accumulate    "native" (the input type), "float64", or "kahan" (compensated sum).
    map_expr      op="custom": the value of one element, in x (and y for two inputs).
    combine       op="custom": how two values a and b merge (associative, commutative).
    identity      op="custom": the value combine leaves unchanged ("0", "inf", "-inf", ...).
    """

    kernel: ClassVar[str] = "reduce"
    template: ClassVar[str] = "reduce.cu.j2"

    op: str = "dot"
    dtype: str = "float32"
    strategy: str = "single_pass"
    block_size: int = 512
    items_per_thread: int = 4
    vector_loads: bool = True
    grid_size: int = 0
    grid_stride: bool = True
    accumulate: str = "native"
    map_expr: str = ""
    combine: str = ""
    identity: str = ""

    def validate(self) -> None:
        if self.op not in OPS:
            fail("op", self.op, f"one of {sorted(OPS)}")
        if self.dtype not in OPS[self.op][4]:
            fail("dtype", self.dtype, f"one of {list(OPS[self.op][4])} for op={self.op!r}")
        if self.strategy not in STRATEGIES:
            fail("strategy", self.strategy, f"one of {list(STRATEGIES)}")
        bs = self.block_size
        if bs < 32 or bs > 1024 or bs & (bs - 1):
            fail("block_size", bs, "a power of two from 32 to 1024")
        if not 1 <= self.items_per_thread <= 16:
            fail("items_per_thread", self.items_per_thread, "an integer from 1 to 16")
        if not 0 <= self.grid_size <= 1 << 20:
            fail("grid_size", self.grid_size, "0 (derived from the SM count) or a cap from 1 to 1048576")
        if not self.grid_stride and self.grid_size:
            fail("grid_size", self.grid_size, "0 when grid_stride is false (the grid then covers the input)")
        if self.accumulate not in ACCUMULATE:
            fail("accumulate", self.accumulate, f"one of {list(ACCUMULATE)}")
        if self.accumulate != "native" and self.dtype not in FLOAT_DTYPES:
            fail("accumulate", self.accumulate, f"'native' for dtype={self.dtype!r}")
        if self.op == "custom":
            self._parsed()  # raises ExpressionError naming the bad expression
        else:
            for name in ("map_expr", "combine", "identity"):
                if getattr(self, name):
                    fail(name, getattr(self, name), f"'' for op={self.op!r} (use op='custom' for a map-reduce)")
        if self.accumulate == "kahan" and self.combine_kind != "sum":
            fail("accumulate", "kahan", "only for additive reductions (sum, dot, or a custom combine 'a + b')")
        if self.accumulate == "kahan" and self.strategy == "atomic":
            fail("accumulate", "kahan", "not with strategy='atomic' (one atomic add would drop the correction); "
                 "use single_pass or two_pass")

    # -- derived values ---------------------------------------------------------------
    def _parsed(self):
        memo = self.__dict__.get("_parsed_memo")
        if memo is not None:
            return memo
        if self.op == "custom":
            names = ("x", "y")
            m = parse_expression(self.map_expr, "map_expr", names)
            c = parse_expression(self.combine, "combine", ("a", "b"))
            i = parse_expression(self.identity, "identity", ())
            if "y" in uses(m) and "x" not in uses(m):
                raise ExpressionError(f"map_expr={self.map_expr!r} uses y but not x; name the single input x")
            if uses(c) != {"a", "b"}:
                raise ExpressionError(f"combine={self.combine!r} must use a and b")
            for tree, what, text in ((m, "map_expr", self.map_expr), (c, "combine", self.combine),
                                     (i, "identity", self.identity)):
                check_types(tree, what, text, self.acc_dtype)
            if self.dtype == "int32" and not infinite_constant(i) and undefined(i, {}).any():
                raise ExpressionError(f"identity={self.identity!r} overflows int32 or divides by zero")
        else:
            _, mt, ct, it, _ = OPS[self.op]
            m = parse_expression(mt, "map_expr", ("x", "y"))
            c = parse_expression(ct, "combine", ("a", "b"))
            i = parse_expression(it, "identity", ())
        memo = (m, c, i)
        object.__setattr__(self, "_parsed_memo", memo)
        return memo

    @property
    def arity(self) -> int:
        if self.op != "custom":
            return OPS[self.op][0]
        return 2 if "y" in uses(self._parsed()[0]) else 1

    @property
    def combine_kind(self) -> str:
        """'sum', 'min', 'max', 'prod' for recognised combines, else 'general'."""
        if self.op in ("sum", "dot"):
            return "sum"
        if self.op in ("min", "max"):
            return self.op
        return _KNOWN_COMBINES.get(canonical_text(self._parsed()[1]), "general")

    @property
    def acc_dtype(self) -> str:
        """The type each accumulator component has (kahan keeps two of them)."""
        return "float64" if self.accumulate == "float64" else self.dtype

    @property
    def vec(self) -> int:
        """Elements per 16-byte load (1 without vector loads)."""
        return 16 // np.dtype(self.dtype).itemsize if self.vector_loads else 1

    @property
    def partial_bytes(self) -> int:
        return np.dtype(self.acc_dtype).itemsize * (2 if self.accumulate == "kahan" else 1)

    @property
    def empty_is_undefined(self) -> bool:
        """min/max (and custom min/max folds whose identity is +-inf) of nothing is an
        error; sums, dots and other custom folds give their identity."""
        return self.op in ("min", "max") or (
            self.combine_kind in ("min", "max") and bool(infinite_constant(self._parsed()[2])
                                                         or math.isinf(float(self.identity_value()))))

    def identity_value(self) -> float | int:
        tree = self._parsed()[2]
        if self.dtype == "int32":
            sign = infinite_constant(tree)
            if sign:  # "inf" / "-inf": the int32 limits, as min and max need
                return INT32_MAX if sign > 0 else INT32_MIN
            return int(evaluate(tree, {}, integer=True))
        return float(evaluate(tree, {}))

    def form(self) -> str:
        return f"Reduce, {self.strategy}"

    def template_context(self) -> dict[str, Any]:
        m, c, i = self._parsed()
        integer = self.dtype == "int32"
        suffix = self.acc_dtype == "float32"
        ident = self.identity_value()
        if integer:
            ident_c = "(-2147483647 - 1)" if ident == INT32_MIN else str(ident)
        elif math.isinf(ident):
            ident_c = "INFINITY" if ident > 0 else "-INFINITY"
        else:
            ident_c = render_c(i, suffix, integer)
        kind = self.combine_kind
        atomic = "cas"
        if kind == "sum":
            atomic = "add"
        elif kind in ("min", "max") and integer:
            atomic = kind
        vector_type = {"float32": "float4", "float64": "double2", "int32": "int4"}[self.dtype]
        return dict(
            arity=self.arity, map_c=render_c(m, suffix, integer), combine_c=render_c(c, suffix, integer),
            identity_c=ident_c, acc_ctype=DTYPES[self.acc_dtype], kahan=self.accumulate == "kahan",
            vec=self.vec, vector_type=vector_type, components="xyzw"[: 16 // np.dtype(self.dtype).itemsize],
            atomic_kind=atomic, warps=self.block_size // 32, expression_text=self.describe(),
            **self._self_check_context(),
        )

    def describe(self) -> str:
        if self.op != "custom":
            return self.op
        return f"map {self.map_expr!r}, combine {self.combine!r}, identity {self.identity!r}"

    def explain_compile_error(self, exc: CompileError) -> Exception:
        """nvcc failed: for a custom reduction, say which expressions were in it first."""
        if self.op != "custom":
            return exc
        err = CompileError(f"nvcc rejected the custom reduction ({self.describe()}); check these expressions: "
                           f"{exc.summary}", exc.command, exc.output, exc.source)
        return err

    # -- launch geometry (pure; CPU-tested) ---------------------------------------------
    def launch_geometry(self, n: int, multiprocessors: int = 132, vectorized: bool | None = None) -> tuple[int, int]:
        """(blocks, threads per block) for length n.

        One block covers block_size * items_per_thread loads per loop step, each load
        `vec` elements when vectorized. grid_stride=False sizes the grid to cover the
        input in one step; otherwise the grid is capped by grid_size, or by one full
        wave (2048 resident threads per SM) so every SM streams without a tail.
        """
        if vectorized is None:
            vectorized = self.vector_loads
        per_block = self.block_size * self.items_per_thread * (self.vec if vectorized else 1)
        needed = max(1, -(-n // per_block))
        if not self.grid_stride:
            return needed, self.block_size
        cap = self.grid_size or multiprocessors * max(1, 2048 // self.block_size)
        return min(needed, cap), self.block_size

    def partial_count(self, grid: int) -> int:
        return grid * (self.block_size // 32 if self.strategy == "warp_shuffle" else 1)

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
        acc = problem.get("accumulate", "native")
        if acc not in ACCUMULATE:
            raise ValueError(f"reduce problem accumulate={acc!r} is not allowed: one of {list(ACCUMULATE)}")
        out = {"n": int(n), "op": op}
        if acc != "native":
            out["accumulate"] = acc
        if op == "custom":
            for key in ("map_expr", "combine", "identity"):
                if not isinstance(problem.get(key), str):
                    raise ValueError(f"reduce problem op='custom' needs {key} as a string")
                out[key] = problem[key]
        return out

    @classmethod
    def _problem_fields(cls, p):
        fields = {"op": p["op"], "accumulate": p.get("accumulate", "native")}
        if p["op"] == "custom":
            fields.update(map_expr=p["map_expr"], combine=p["combine"], identity=p["identity"])
        return fields

    @classmethod
    def search_space(cls, problem, dtype):
        p = cls.normalize_problem(problem)
        base = cls._problem_fields(p)
        specs = []
        for strategy in STRATEGIES:
            for bs in (128, 256, 512, 1024):
                for items in (1, 2, 4, 8):
                    for vector in (True, False):
                        for stride in (True, False):
                            try:
                                specs.append(cls(dtype=dtype, strategy=strategy, block_size=bs,
                                                 items_per_thread=items, vector_loads=vector,
                                                 grid_stride=stride, **base))
                            except ValueError:
                                continue
        return specs

    @classmethod
    def default_spec(cls, problem, dtype):
        """single_pass (one launch, deterministic order; within a few per cent of atomic,
        whose float results vary in the last bits from run to run), 16-byte loads, 4 per
        thread; 256-thread blocks below 2^22 elements, where launch latency dominates
        (measured on an H200: docs/benchmarks-reduce.md)."""
        p = cls.normalize_problem(problem)
        block = 256 if p["n"] <= 1 << 22 else 512
        return cls(dtype=dtype, strategy="single_pass", block_size=block, items_per_thread=4,
                   **cls._problem_fields(p))

    def prune_reason(self, problem, limits):
        if self.block_size > limits.get("max_threads_per_block", 1024):
            return f"block_size {self.block_size} exceeds the device's {limits['max_threads_per_block']} threads"
        n = problem.get("n", 0)
        if not self.grid_stride and n > (1 << 26) * self.block_size:
            return "grid_stride=False would launch more than 2^26 blocks for this length"
        return None

    @classmethod
    def make_inputs(cls, problem, dtype, rng):
        p = cls.normalize_problem(problem)
        arity = cls(dtype=dtype, **cls._problem_fields(p)).arity
        if dtype == "int32":
            return tuple(rng.integers(-1000, 1000, p["n"], dtype=np.int32) for _ in range(arity))
        return tuple(rng.standard_normal(p["n"]).astype(dtype) for _ in range(arity))

    @classmethod
    def make_exact_inputs(cls, problem, dtype, rng):
        """Inputs on which every order of evaluation gives the same, exact result, so a
        kernel's result is checked by equality and one dropped, doubled or misplaced term
        fails. Sums and products get positive terms (a lost or doubled term always changes
        the result); sums of small integers (times a power of two for sum and dot) whose
        magnitudes add to less than 2^24 (float32), 2^53 (float64) or 2^31 (int32), so
        every partial sum is exact; products of +-1 and at most 20 twos; min and max any
        signed integers. A custom map must keep integers exact (+ - * abs min max ?:).
        Longer inputs than the exact range allows get ones on a random subset, zeros
        elsewhere. ValueError when no such data exists (a map with / or exp, a combine
        other than sum, product, min or max)."""
        p = cls.normalize_problem(problem)
        spec = cls(dtype=dtype, **cls._problem_fields(p))
        n, kind, arity = p["n"], spec.combine_kind, spec.arity
        limit = {"float32": 2 ** 24, "float64": 2 ** 53, "int32": 2 ** 31}[dtype]
        if kind == "general":
            raise ValueError(f"no exact inputs for combine {spec.combine!r}: they exist for sum, product, min and "
                             "max combines")
        spec._check_exact_map()
        builtin = spec.op != "custom" and dtype != "int32"
        if kind in ("min", "max"):
            start = 2 ** 20
        elif kind == "prod":
            start = 1
        else:
            per_term = (limit - 1) // max(n, 1)
            start = max(1, min(1024 if arity == 1 else 64, per_term if arity == 1 else math.isqrt(per_term)))
        width = start
        while True:
            data = spec._exact_candidate(n, width, rng)
            trouble = spec._exact_trouble(data, limit)
            if trouble is None:
                break
            if width == 1:
                raise ValueError(f"no exact {dtype} inputs of length {n} for {spec.describe()}: {trouble}")
            width = max(1, width // 4)
        if builtin and kind in ("sum", "min", "max"):
            # A power of two per input keeps every partial sum exact (fractions included).
            data = tuple(a * 2.0 ** int(rng.integers(-4, 5)) for a in data)
        return tuple(np.asarray(a).astype(dtype) for a in data)

    def _check_exact_map(self) -> None:
        stack = [self._parsed()[0]]
        while stack:
            node = stack.pop()
            stack.extend(part for part in node[1:] if isinstance(part, tuple))
            stack.extend(arg for part in node[1:] if isinstance(part, list) for arg in part)
            if node[0] == "call" and node[1] not in ("abs", "fabs", "min", "max", "fmin", "fmax"):
                raise ValueError(f"map_expr={self.map_expr!r} calls {node[1]}(), which rounds integers; exact "
                                 "inputs exist for maps of + - * abs min max and comparisons")
            if node[0] == "bin" and (node[1] == "/" or node[1] == "%" and self.dtype != "int32"):
                raise ValueError(f"map_expr={self.map_expr!r} divides, which rounds integers; exact inputs exist "
                                 "for maps of + - * abs min max and comparisons")

    def _exact_candidate(self, n: int, width: int, rng) -> tuple[np.ndarray, ...]:
        """Integer-valued float64 inputs, width wide, for this combine."""
        kind, arity = self.combine_kind, self.arity
        if kind in ("min", "max"):
            return tuple(rng.integers(-width, width + 1, n).astype(np.float64) for _ in range(arity))
        if kind == "prod":
            out = []
            for _ in range(arity):
                a = rng.choice(np.array([-1.0, 1.0]), n)
                twos = rng.choice(n, min(n, 20 // arity), replace=False) if n else []
                a[twos] *= 2
                out.append(a)
            return tuple(out)
        limit = {"float32": 2 ** 24, "float64": 2 ** 53, "int32": 2 ** 31}[self.dtype]
        if n * width >= limit and width == 1 and self.op in ("sum", "dot"):
            # More terms than the exact range holds ones: ones on a random subset.
            x = np.zeros(n)
            x[rng.choice(n, limit // 2, replace=False)] = 1.0
            return (x,) if self.arity == 1 else (x, np.ones(n))
        return tuple(rng.integers(1, width + 1, n).astype(np.float64) for _ in range(arity))

    def _exact_trouble(self, data, limit: int) -> str | None:
        """Why `data` would not reduce exactly (None if it does): a mapped value that is no
        integer, an intermediate of the map or a partial sum past the exact range."""
        if not data[0].size:
            return None
        m, e = self._mapped_with_bounds(data)
        if not np.all(np.isfinite(m)) or np.any(m != np.round(m)):
            return "the map gives values that are no integers"
        # e adds up the magnitudes of the map's intermediate results: below the range,
        # every one of them is exact.
        if float(np.max(e)) >= limit / 4 or float(np.max(np.abs(m))) >= limit / 4:
            return "the map's values leave the exact range"
        if self.combine_kind == "sum" and float(np.abs(m).sum()) >= limit:
            return f"the terms' magnitudes add up to {float(np.abs(m).sum()):.6g}, past {limit}"
        if self.combine_kind == "prod" and float(np.abs(np.prod(m))) >= limit:
            return "the product leaves the exact range"
        return None

    @classmethod
    def reference_output(cls, problem, inputs):
        p = cls.normalize_problem(problem)
        spec = cls(dtype=np.dtype(inputs[0].dtype).name, **cls._problem_fields(p))
        return np.array(spec.reference(*inputs))

    @classmethod
    def output_shape(cls, problem):
        return ()

    def tolerance_for(self, problem, inputs=None, multiprocessors: int | None = None):
        """Largest relative error against the float64 reference (kgen/core/rounding.py).

        min, max and int32 are exact: 0 (a custom min/max map may round once in the
        accumulator type). With the inputs: the kernel's probabilistic bound for these
        terms (their total, spread and the map's own rounding) plus the reference's own,
        relative to the result. Without them: the same model for random terms of unit
        size, relative to the smallest size a random-sign result takes at the data-free
        confidence, so it is loose: pass the inputs for a tight check."""
        from ..core import rounding

        n = problem["n"]
        if self.dtype == "int32" or n == 0:
            return 0.0
        sms = multiprocessors or _device_multiprocessors()
        kind = self.combine_kind
        if inputs is None:
            if kind in ("min", "max"):
                return 0.0
            # Terms of unit size and random sign: |total| is sqrt(n) typically.
            typical = math.sqrt(n)
            maps = 0.0 if self._map_is_exact_copy() else float(n)
            err = self.fold_error_bound(n, typical, float(n), maps, multiprocessors=sms) \
                + self.reference_error_bound(n, typical, float(n), maps)
            return err * rounding.small_result_allowance(1) / typical
        m, e = self._mapped_with_bounds(inputs)
        ref = abs(float(self.reference(*inputs)))
        if kind in ("min", "max"):
            return 2 * rounding.unit_roundoff(self.acc_dtype) * float(e.max(initial=0.0)) / max(ref, 1e-300)
        if kind == "prod":
            with np.errstate(all="ignore"):
                rel = np.nan_to_num(e / np.abs(m), nan=0.0, posinf=0.0)
            terms = max(n - 1, 0) + float(np.square(rel).sum())
            return rounding.bound(rounding.unit_roundoff(self.acc_dtype), terms) \
                + rounding.bound(rounding.UNIT_ROUNDOFF["float64"], terms)
        if kind != "sum":
            return self.general_error_bound(n, float(np.abs(m).sum()), float(e.sum()), sms) / max(ref, 1e-300)
        total, sumsq, maps = float(m.sum()), float(np.square(m).sum()), float(np.square(e).sum())
        err = self.fold_error_bound(n, total, sumsq, maps, multiprocessors=sms) \
            + self.reference_error_bound(n, total, sumsq, maps)
        return err / max(ref, 1e-300)

    def tolerance_abs(self, n: int, scale: float, multiprocessors: int = 132) -> float:
        """Absolute error allowed for a length-n fold whose terms' magnitudes add to `scale`,
        whatever their order (sorted data included): the partial sums of one level of the
        summation order are disjoint, so their squares add to at most scale^2. Looser than
        tolerance_for with the inputs, which knows the terms' total and spread."""
        from ..core import rounding

        if self.combine_kind in ("min", "max") or self.dtype == "int32" or n <= 0:
            return 0.0
        worst = 0.0
        for vectorized in self._vector_options():
            grid = self.launch_geometry(n, multiprocessors, vectorized=vectorized)[0]
            levels, _ = self.rounding_levels(n, grid, vectorized)
            # The map's own rounding (up to two roundings a term, as in x * y + 1).
            worst = max(worst, self._accumulated_bound(levels * scale * scale, 4 * scale * scale, scale, levels))
        ref_levels, _ = rounding.numpy_sum_levels(n)
        return worst + rounding.bound(rounding.UNIT_ROUNDOFF["float64"], (ref_levels + 1) * scale * scale) + 1e-300

    # -- the rounding model of this family's summation order --------------------------------
    def rounding_levels(self, n: int, grid: int, vectorized: bool) -> tuple[float, float]:
        """(levels, msum) of this kernel's summation order for n terms on `grid` blocks, as
        kgen/core/rounding.py defines them: the sequential run of the busiest thread (block
        0's thread 0: its loads, plus one head and one tail element), the block's merge
        tree, then the fold of the partials (each thread of the final block folds its share
        in sequence, then the block's merge tree; or one chain of atomics). The standalone
        program's kgen_fold_levels is the same function in C++."""
        from ..core import rounding

        block, items = self.block_size, self.items_per_thread
        vec = self.vec if vectorized else 1
        full, rem = divmod(n // vec, grid * block * items)
        loads = full * items + min(items, -(-rem // block))
        run = max(1, min(n, loads * vec + (2 if vec > 1 else 0)))
        depth = 5 if self.strategy == "warp_shuffle" else block.bit_length() - 1
        partial = min(n, run * 2 ** depth)
        # Values that are not the identity: at most one per term.
        partials = min(self.partial_count(grid), n)
        parts = [rounding.chain(n, run, 1), rounding.tree(n, depth, run, min(2 ** depth, n))]
        if self.strategy == "atomic":
            parts.append(rounding.chain(n, partials, partial))
        else:
            per_thread = -(-partials // block)
            parts += [rounding.chain(n, per_thread, partial),
                      rounding.tree(n, block.bit_length() - 1, per_thread * partial, min(block, partials))]
        return rounding.add(*parts)

    def _vector_options(self) -> tuple[bool, ...]:
        # Misaligned inputs take the scalar path, so a spec with vector loads may run either.
        return (True, False) if self.vector_loads else (False,)

    def _accumulated_bound(self, squares: float, map_squares: float, total_abs: float, levels: float) -> float:
        """The kernel's error bound from the sum of squared partial sums, by accumulator:
        native and float64 round every addition (float64 then rounds the result once to
        the output type); kahan carries each addition's error exactly, leaving the map's
        rounding, the result's rounding and second-order terms."""
        from ..core import rounding

        u_acc = rounding.unit_roundoff(self.acc_dtype)
        if self.accumulate == "kahan":
            return u_acc * total_abs + rounding.bound(u_acc, map_squares) \
                + rounding.LAMBDA ** 2 * u_acc * u_acc * math.sqrt(max(levels * squares, 0.0))
        err = rounding.bound(u_acc, squares + map_squares)
        if self.acc_dtype != self.dtype:
            err += rounding.unit_roundoff(self.dtype) * total_abs
        return err

    def fold_error_bound(self, n: int, total: float, sumsq: float, map_squares: float = 0.0,
                         multiprocessors: int = 132, grid: int | None = None,
                         vectorized: bool | None = None) -> float:
        """Absolute error of this kernel's sum of n mapped terms with this total and sum of
        squares, whose map roundings are bounded by values whose squares add to
        map_squares, against the exact sum, at the model's confidence. grid/vectorized:
        one launch (default: the worst of the launches this spec makes for n)."""
        from ..core import rounding

        if n <= 0 or self.dtype == "int32":
            return 0.0
        worst = 0.0
        for vec in (vectorized,) if vectorized is not None else self._vector_options():
            g = grid if grid is not None else self.launch_geometry(n, multiprocessors, vectorized=vec)[0]
            levels, msum = self.rounding_levels(n, g, vec)
            squares = rounding.square_sum(n, total * total, sumsq, levels, msum)
            worst = max(worst, self._accumulated_bound(squares, map_squares, abs(total), levels))
        return worst

    @staticmethod
    def reference_error_bound(n: int, total: float, sumsq: float, map_squares: float = 0.0) -> float:
        """The float64 reference's own error: numpy's pairwise sum of the map evaluated in
        float64."""
        from ..core import rounding

        levels, msum = rounding.numpy_sum_levels(n)
        squares = rounding.square_sum(n, total * total, sumsq, levels, msum)
        return rounding.bound(rounding.UNIT_ROUNDOFF["float64"], squares + map_squares)

    def general_error_bound(self, n: int, scale: float, map_sum: float, multiprocessors: int = 132,
                            grid: int | None = None) -> float:
        """A combine that is neither a sum, a product, a min nor a max has no error model:
        the linear worst case of the busiest thread's run and the log-depth merges, times
        the terms' magnitudes, plus the map's rounding and the reference's."""
        from ..core import rounding

        eps = 2 * rounding.unit_roundoff(self.acc_dtype)
        grid = grid or self.launch_geometry(n, multiprocessors)[0]
        run = max(1, -(-n // (grid * self.block_size)))
        factor = 2.0 * run + 2 * math.log2(n + 2) + 4
        return factor * eps * scale + 2 * eps * map_sum + math.log2(n + 2) * 2.0 ** -52 * scale

    def _map_is_exact_copy(self) -> bool:
        return self.op in ("sum", "min", "max")

    def _mapped_with_bounds(self, inputs) -> tuple[np.ndarray, np.ndarray]:
        """The float64 map over the inputs and each term's rounding bound (magnitudes whose
        multiple by the unit roundoff bounds the map's rounding in the kernel)."""
        env = {"x": np.asarray(inputs[0], dtype=np.float64)}
        if len(inputs) > 1:
            env["y"] = np.asarray(inputs[1], dtype=np.float64)
        value, bound = rounding_bound(self._parsed()[0], env)
        shape = env["x"].shape
        return np.broadcast_to(np.asarray(value, dtype=np.float64), shape), np.broadcast_to(bound, shape)

    def _self_check_context(self) -> dict[str, Any]:
        """What the standalone program's self-check needs: the rounding model's constants
        and the map's rounding bound in C++."""
        from ..core import rounding

        try:
            self._check_exact_map()
            exact_map = True
        except ValueError:
            exact_map = False
        return dict(rounding_constants=rounding.template_constants(self.dtype, self.acc_dtype),
                    map_bound_c=self._map_bound_c(), combine_kind=self.combine_kind,
                    block_log2=self.block_size.bit_length() - 1, acc_rounds_result=self.acc_dtype != self.dtype,
                    exact_check=exact_map and self.combine_kind == "sum" and self.dtype != "int32",
                    exact_bits=53 if self.dtype == "float64" else 24)

    def _map_bound_c(self) -> str:
        """C++ statements computing, in double, rounding_bound's bound for one element
        (x, y): each node's value v<i> and bound e<i>, by the same rules."""
        lines: list[str] = []

        def visit(node, kids: list[int]) -> int:  # kids: the line numbers of the children's values
            kind = node[0]
            if kind == "paren":
                return kids[0]
            if kind in ("num", "const", "var"):
                i = len(lines)
                lines.append(f"const double v{i} = (double)({render_c(node, False, False)}); const double e{i} = 0.0;")
                return i
            if kind == "un":
                a = kids[0]
                i = len(lines)
                if node[1] == "!":
                    lines.append(f"const double v{i} = (double)(!v{a}); const double e{i} = 0.0;")
                else:
                    lines.append(f"const double v{i} = {node[1]}v{a}; const double e{i} = e{a};")
                return i
            args = kids
            i = len(lines)
            if kind == "bin" and node[1] in ("+", "-", "*", "/"):
                a, b = args
                err = {"+": f"e{a} + e{b}", "-": f"e{a} + e{b}",
                       "*": f"std::fabs(v{b}) * e{a} + std::fabs(v{a}) * e{b}",
                       "/": f"e{a} / std::fabs(v{b}) + std::fabs(v{a}) * e{b} / (v{b} * v{b})"}[node[1]]
                lines.append(f"const double v{i} = v{a} {node[1]} v{b}; "
                             f"const double e{i} = kgen_nan_to_inf({err} + std::fabs(v{i}));")
                return i
            if kind == "bin" and node[1] != "%":
                lines.append(f"const double v{i} = (double)(v{args[0]} {node[1]} v{args[1]}); const double e{i} = 0.0;")
                return i
            if kind == "bin":
                value = f"std::fmod(v{args[0]}, v{args[1]})"
            elif kind == "?:":
                value = f"(v{args[0]} != 0 ? v{args[1]} : v{args[2]})"
            else:
                fn = {"abs": "std::fabs", "fabs": "std::fabs", "min": "std::fmin", "max": "std::fmax",
                      "rsqrt": "1.0 / std::sqrt"}.get(node[1], "std::" + node[1])
                value = f"{fn}(" + ", ".join(f"v{a}" for a in args) + ")"
            # Functions, % and ?: : the largest argument bound scaled by the result's size
            # relative to the argument's, plus their own rounding unless exact.
            extra = " ".join(f"x{i} = std::max(x{i}, kgen_nan_to_inf(e{a} * std::max(1.0, std::fabs(v{i}) / "
                             f"std::max(std::fabs(v{a}), 1e-300))));" for a in args)
            exact = kind == "call" and node[1] in ("abs", "fabs", "min", "max", "fmin", "fmax")
            lines.append(f"const double v{i} = {value}; double x{i} = 0.0; {extra} "
                         f"const double e{i} = x{i}{'' if exact else f' + std::fabs(v{i})'};")
            return i

        root = fold(self._parsed()[0], visit)  # iterative: long flat chains need no deep stack
        return "\n".join("    " + line for line in lines) + f"\n    (void)x; (void)y;\n    return e{root};"

    @classmethod
    def work(cls, problem, dtype):
        p = cls.normalize_problem(problem)
        arity = cls(dtype=dtype, **cls._problem_fields(p)).arity
        n = p["n"]
        return {"flops": float(n * arity), "bytes": float(n * arity * np.dtype(dtype).itemsize)}

    @classmethod
    def bucket(cls, problem):
        return (math.log2(max(problem["n"], 1)),)

    # -- references --------------------------------------------------------------------
    def mapped(self, *inputs: np.ndarray) -> np.ndarray:
        """map_expr over the inputs as float64 values: computed in float64, or for int32
        with C's integer arithmetic (truncating division)."""
        integer = self.dtype == "int32"
        kind = np.int64 if integer else np.float64
        env = {"x": np.asarray(inputs[0], dtype=kind)}
        if len(inputs) > 1:
            env["y"] = np.asarray(inputs[1], dtype=kind)
        m = evaluate(self._parsed()[0], env, integer=integer)
        return np.broadcast_to(np.asarray(m, dtype=np.float64), env["x"].shape)

    def reference(self, *inputs: np.ndarray) -> float:
        """The float64 value of this reduction over host inputs."""
        m = self.mapped(*inputs)
        kind = self.combine_kind
        if m.size == 0:
            return float(self.identity_value())
        if kind == "sum":
            return float(m.sum())
        if kind == "prod":
            return float(m.prod())
        if kind == "min":
            return float(min(m.min(), self.identity_value()))
        if kind == "max":
            return float(max(m.max(), self.identity_value()))
        tree = self._parsed()[1]
        if self.dtype == "int32":
            acc_int = int(self.identity_value())
            for v in m.astype(np.int64).tolist():
                acc_int = int(evaluate(tree, {"a": acc_int, "b": v}, integer=True))
            return float(acc_int)
        acc = float(self.identity_value())
        for v in m.tolist():
            acc = float(evaluate(tree, {"a": acc, "b": v}))
        return acc

    @staticmethod
    def reference_for(op: str, *inputs: np.ndarray) -> float:
        return Reduce(op=op, dtype=np.dtype(inputs[0].dtype).name).reference(*inputs)


_SMS: list[int] = []


def _device_multiprocessors() -> int:
    """This GPU's SM count (it sets the grid, so the busiest thread's run), or 132 (an
    H100's or H200's) without one."""
    if not _SMS:
        try:
            _SMS.append(int(runtime.device_limits()["multiprocessors"]))
        except Exception:  # noqa: BLE001 - no pycuda, no driver, no device: the default
            _SMS.append(132)
    return _SMS[0]


# ---------------------------------------------------------------------------------
# The kernel object: argument checks, scratch buffers, launches.
# ---------------------------------------------------------------------------------
def _fast_view(x: Any, name: str):
    """(ptr, length, element stride, dtype) of a 1-D device array; torch tensors are read
    through their own accessors, which cost far less than building the CAI dict."""
    if type(x).__module__.startswith("torch"):
        if x.dim() != 1:
            raise ArrayError(f"{name} must be 1-D, got shape {tuple(x.shape)}")
        if not x.is_cuda:
            raise ArrayError(f"{name} is a CPU torch tensor; pass a CUDA tensor or a numpy array")
        return x.data_ptr(), x.shape[0], x.stride(0), _torch_dtype_name(x.dtype)
    if runtime._is_gpuarray(x) and x.size == 0:  # pycuda allocates nothing for it
        if len(x.shape) != 1:
            raise ArrayError(f"{name} must be 1-D, got shape {x.shape}")
        return 0, 0, 1, np.dtype(x.dtype).name
    v = runtime.view(x, name)
    if len(v.shape) != 1:
        raise ArrayError(f"{name} must be 1-D, got shape {v.shape}")
    return v.ptr, v.shape[0], v.strides[0], v.dtype.name


_TORCH_DTYPES = {"torch.float32": "float32", "torch.float64": "float64", "torch.int32": "int32"}
_torch_dtype_names: dict[Any, str] = {}


def _torch_dtype_name(dtype: Any) -> str:
    """numpy's name for a torch dtype, memoised by the dtype object (str() of a torch dtype
    costs more than the rest of a call's argument checks)."""
    name = _torch_dtype_names.get(dtype)
    if name is None:
        text = str(dtype)
        name = _torch_dtype_names[dtype] = _TORCH_DTYPES.get(text, text)
    return name


class ReduceKernel(Kernel):
    """k(x) or k(x, y) -> numpy scalar (numpy in) or 0-d device array of the input's library.

    out= takes a 0-d (or 1-element) device array to write; stream= a pycuda Stream.
    Scratch (partials, ticket, atomic cell) is allocated once per stream and reused;
    calls on one stream are ordered, so they never share scratch at the same time.
    """

    spec: Reduce

    def __init__(self, spec, source, compiled):
        super().__init__(spec, source, compiled)
        runtime.driver()   # kgen's context current on this thread before the functions below load
        self._itemsize = self._np_dtype.itemsize
        self._sms = runtime.device_limits()["multiprocessors"]
        self._arity = spec.arity
        self._empty_error = spec.empty_is_undefined
        self._scratch: dict[int, dict[str, Any]] = {}
        self._captured: dict[tuple[int, int], dict[str, Any]] = {}   # (stream, capture id) -> scratch
        self._retired: list[Any] = []  # outgrown scratch, kept alive for older bound launchers
        self._memo: dict[tuple, tuple] = {}  # (n, alignment, stream) -> launch steps
        self._torch_plans: dict[tuple, tuple] = {}  # torch call signature -> launch steps
        self._torch_results = runtime.TorchResults()  # 0-d results of repeat torch calls
        self._launchers: dict[tuple, Launch] = {}
        x_args = "P" * self._arity
        s = spec.strategy
        if s == "single_pass":
            self._main = (self.function("kgen_reduce_single"), "kgen_reduce_single", x_args + "qiPPP")
            self._finish = None
        elif s == "atomic":
            self._main = (self.function("kgen_reduce_atomic"), "kgen_reduce_atomic", x_args + "qiPPP")
            self._finish = None
        else:
            self._main = (self.function("kgen_reduce_partials"), "kgen_reduce_partials", x_args + "qiP")
            self._finish = (self.function("kgen_reduce_finish"), "kgen_reduce_finish", "PqP")

    # -- scratch --------------------------------------------------------------------------
    def _scratch_for(self, stream: int, partials: int) -> dict[str, Any]:
        s = self._scratch.get(stream)
        need = max(1, partials) * self.spec.partial_bytes
        if s is None or s["bytes"] < need:
            if runtime.torch_capturing():
                # Calls captured into a CUDA graph share scratch per stream and capture, from
                # the graph's pool and kept for the kernel's life: a replay may run beside
                # eager calls or other graphs, so it shares with none of them; the captured
                # calls on one stream run in order, as eager calls do, each leaving the
                # control words as it found them, so the graph writes them once, not per call.
                key = (stream, capture_id(stream))
                s = self._captured.get(key)
                if s is None or s["bytes"] < need:
                    s = self._captured[key] = {"ctl": self._new_control(stream),
                                               "buf": runtime.device_buffer(max(need, 4096)), "bytes": max(need, 4096)}
                    self._retired.extend((s["ctl"], s["buf"]))
                return s
            buf = runtime.device_buffer(max(need, 4096))
            if s is None:
                s = {"ctl": self._new_control(stream)}
            else:
                self._retired.append(s["buf"])  # a bound launcher may still point at it
            s.update(buf=buf, bytes=max(need, 4096))
            self._scratch[stream] = s
        return s

    def _new_control(self, stream: int) -> Any:
        """The ticket (4 bytes, zero) and the atomic cell (8 bytes at offset 8, the identity),
        written in the stream's order before the launch that reads them."""
        ctl = runtime.device_buffer(16)
        cell = np.array([self.spec.identity_value()], dtype=self.spec.acc_dtype).tobytes()
        write_words_async(int(ctl), (bytes(8) + cell).ljust(16, b"\0"), stream)
        return ctl

    # -- arguments -------------------------------------------------------------------------
    def _check_input(self, name: str, length: int, stride: int, dtype: str, n: int | None) -> None:
        self._check_dtype(dtype, name)
        if stride != 1 and length > 1:
            raise ArrayError(f"{name} must be contiguous (element stride 1), got stride {stride}")
        if n is not None and length != n:
            raise ArrayError(f"x and y differ in length: {n} and {length}")

    def _check_empty(self, n: int) -> None:
        if n == 0 and self._empty_error:
            raise ArrayError(f"{self.spec.describe()} of an empty array is undefined (it has no identity)")

    def _resolve(self, inputs, out):
        """-> (on_host, pointers, n, out pointer, out owner, host result view, kept arrays)."""
        spec = self.spec
        if len(inputs) != self._arity:
            raise ArrayError(f"this reduction ({spec.describe()}) takes {self._arity} input(s), got {len(inputs)}")
        first = inputs[0]
        tfirst = type(first)
        if tfirst.__module__.startswith("torch") and all(type(a) is tfirst for a in inputs) and (
                out is None or type(out) is tfirst):
            # torch fast path: the tensors' own accessors, no __cuda_array_interface__ dict.
            ptrs, n = [], None
            for name, arr in zip(("x", "y"), inputs):
                ptr, length, stride, dt = _fast_view(arr, name)
                self._check_input(name, length, stride, dt, n)
                n = length
                ptrs.append(ptr)
            self._check_empty(n)
            if out is None:
                out = first.new_empty(())
            elif not out.is_cuda or out.numel() != 1 or _torch_dtype_name(out.dtype) != self._np_dtype.name:
                raise ArrayError(f"out must be a 0-d or 1-element {self._np_dtype} CUDA tensor, "
                                 f"got shape {tuple(out.shape)} and dtype {out.dtype}")
            return False, ptrs, n, out.data_ptr(), out, None, ()
        names = ("x", "y")[: self._arity]
        named = dict(zip(names, inputs))
        on_host = runtime.split_host_device({**named, "out": out})
        keep, ptrs, n = [], [], None
        for name, arr in named.items():
            if on_host:
                if arr.ndim != 1:
                    raise ArrayError(f"{name} must be 1-D, got shape {arr.shape}")
                self._check_input(name, arr.shape[0], 1, arr.dtype.name, n)
                if arr.size == 0:
                    ptr, length = 0, 0  # nothing to copy; the kernel reads nothing
                else:
                    v = runtime.to_device(arr, name)
                    keep.append(v)
                    ptr, length = v.ptr, v.shape[0]
            else:
                ptr, length, stride, dt = _fast_view(arr, name)
                self._check_input(name, length, stride, dt, n)
            n = length
            ptrs.append(ptr)
        self._check_empty(n)
        if on_host:
            res = runtime.new_host_output((), self._np_dtype)
            return True, ptrs, n, res.ptr, res.owner, res, keep
        if out is not None:
            res = runtime.view(out, "out")
            if res.shape not in ((), (1,)) or res.dtype != self._np_dtype:
                raise ArrayError(f"out must be a 0-d or 1-element {self._np_dtype} device array, "
                                 f"got shape {res.shape} and dtype {res.dtype}")
        else:
            res = runtime.view(runtime.empty_like_library(first, (), self._np_dtype), "out")
        return False, ptrs, n, res.ptr, res.owner, None, keep

    def _head(self, ptrs: list[int], n: int) -> int:
        """Elements before the first 16-byte boundary (done one by one), or -1 when the
        inputs cannot share vector loads (different misalignment, or none asked for)."""
        if self.spec.vec == 1:
            return -1
        heads = set()
        for p in ptrs:
            if p % self._itemsize:
                return -1
            heads.add(((-p) % 16) // self._itemsize)
        if len(heads) != 1:
            return -1
        return min(heads.pop(), n)

    def _steps(self, n: int, head: int, stream: int) -> tuple:
        """The launches of a reduction of length n, as ((launch, takes the inputs, middle
        arguments, takes the output), ...): a kernel's arguments are the input pointers,
        then the fixed middle, then the output pointer. Decided once per (length,
        alignment, stream), so a loop over fresh arrays of one length reuses it."""
        key = (n, head, stream)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        spec = self.spec
        grid, block = spec.launch_geometry(n, self._sms, vectorized=head >= 0)
        s = self._scratch_for(stream, spec.partial_count(grid))
        ctl, buf = int(s["ctl"]), int(s["buf"])
        main = self._launcher(self._main, grid, block)
        if spec.strategy == "single_pass":
            hit = ((main, True, (n, head, buf, ctl), True),)
        elif spec.strategy == "atomic":
            hit = ((main, True, (n, head, ctl + 8, ctl), True),)
        else:
            finish = self._launcher(self._finish, 1, block)
            hit = ((main, True, (n, head, buf), False), (finish, False, (buf, spec.partial_count(grid)), True))
        if len(self._memo) >= 64:
            self._memo.clear()
        self._memo[key] = hit
        return hit

    def _go(self, steps: tuple, ptrs: list[int], out_ptr: int, handle: int) -> None:
        for go, inputs, middle, output in steps:
            if inputs and output:
                go(handle, *ptrs, *middle, out_ptr)
            elif inputs:
                go(handle, *ptrs, *middle)
            else:
                go(handle, *middle, out_ptr)

    def _launcher(self, entry: tuple, grid: int, block: int) -> Launch:
        key = (entry[1], grid, block)
        go = self._launchers.get(key)
        if go is None:
            _, name, fmt = entry
            go = self._launchers[key] = Launch(self.handle(name), name, (grid, 1, 1), (block, 1, 1), 0, fmt)
        return go

    def __call__(self, *inputs, out=None, stream=None):
        tensor = runtime.torch_tensor_type()
        if (tensor is not None and inputs and type(inputs[0]) is tensor and type(inputs[-1]) is tensor
                and len(inputs) == self._arity and (out is None or type(out) is tensor)):
            return self._call_torch(inputs, out, stream)
        on_host, ptrs, n, out_ptr, owner, host_res, keep = self._resolve(inputs, out)
        handle = runtime.library_stream(inputs[0], stream)
        ensure_context()
        try:
            self._go(self._steps(n, self._head(ptrs, n), handle), ptrs, out_ptr, handle)
        except LaunchError as exc:
            raise LaunchError(f"{exc} ({self.spec.describe()}, n={n})") from None
        if on_host:
            value = runtime.copy_back(host_res)[()]
            if isinstance(out, np.ndarray):
                out.reshape(-1)[0] = value
                return out
            return value
        return owner

    def _call_torch(self, inputs, out, stream):
        """torch tensors: a repeat call with the same shapes, strides, dtypes, alignment
        class, devices and stream is one dictionary lookup and the launches. The first
        call of each combination goes through every check of _resolve; only combinations
        that passed them are remembered."""
        x = inputs[0]
        ptrs = [t.data_ptr() for t in inputs]
        dev = x.get_device()
        h = runtime.torch_stream(dev) if stream is None and dev >= 0 else runtime.library_stream(x, stream)
        key = [h]
        for t, p in zip(inputs, ptrs):
            key += (t.shape, t.stride(), t.dtype, p & 15, t.get_device())
        if out is not None:
            key += (out.shape, out.dtype, out.get_device())
        key = tuple(key)
        steps = self._torch_plans.get(key)
        if steps is None:
            _, _, n, out_ptr, owner, _, _ = self._resolve(inputs, out)
            steps = self._steps(n, self._head(ptrs, n), h)
            if len(self._torch_plans) >= 256:
                self._torch_plans.clear()
            self._torch_plans[key] = steps
            out = owner
        elif out is None:
            # Batched 0-d results on the current stream; a stream= of the caller's gets new_empty.
            out = self._torch_results.new(x, (), dev, h) if stream is None else x.new_empty(())
        ensure_context()
        try:
            self._go(steps, ptrs, out.data_ptr(), h)
        except LaunchError as exc:
            raise LaunchError(f"{exc} ({self.spec.describe()}, n={x.shape[0]})") from None
        return out

    def bind(self, *inputs, out, stream=None):
        """A zero-argument callable that relaunches this reduction on the same device
        arrays: the arguments are checked and the launches decided once, so a call costs
        one (or two) driver launches. For benchmarks and tight loops; `out` is required."""
        on_host, ptrs, n, out_ptr, owner, _, _ = self._resolve(inputs, out)
        if on_host:
            raise ArrayError("bind() takes device arrays (numpy inputs are copied on every call)")
        handle = runtime.library_stream(inputs[0], stream)
        ensure_context()
        steps = self._steps(n, self._head(ptrs, n), handle)

        def launch():
            self._go(steps, ptrs, out_ptr, handle)

        launch.keep = (inputs, out)  # the arrays must outlive the launcher
        return launch


Reduce.kernel_class = ReduceKernel

# Known-wrong variants the template renders for testing the tests (kgen/core/faults.py).
from ..core import faults as _faults  # noqa: E402 - test-only declarations, kept beside the family

_faults.plant("reduce", "drop_block_partial", "the final fold skips block 0's partial (with atomics, block 0 adds "
              "the identity instead of its value)")
_faults.plant("reduce", "count_tail_twice", "the elements after the last whole vector are folded twice")
_faults.plant("reduce", "skip_last_warp_final_merge", "the last warp's values are left out of the final merge")
_faults.plant("reduce", "edge_guard_off_by_one", "the tail's bound check reads t <= n: one element past the end "
              "is folded")
