"""Matrix multiplication: C = alpha * A @ B + beta * C.

One spec class, one template (templates/matmul.cu.j2), one kernel class.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np

from .. import runtime
from ..kernel import Kernel
from ..runtime import ArrayError
from ..spec import Spec, fail, register_family

# Shared memory a block may use on sm_80/sm_90 after opting in (227 KiB on Hopper).
MAX_SHARED_BYTES = 227 * 1024
ITEMSIZE = {"float32": 4, "float64": 8}


@register_family
@dataclasses.dataclass(frozen=True)
class Matmul(Spec):
    """A matmul kernel. See docs/spec.md for every field and its effect.

    tile         (BM, BN, BK): the C block a thread block computes, and the K step.
    thread_tile  (TM, TN): the C patch each thread accumulates in registers.
    shared_memory: stage A and B tiles through shared memory (else read global memory).
    mapping      "2d" or "1d": thread-block shape (only matters without shared memory).
    layout_a/b   "row" or "col": storage of A and B ("col" takes a numpy .T view as is).
    smem_pad     extra elements per shared-memory row, against bank conflicts.
    launch_bounds: emit __launch_bounds__(threads) so ptxas caps registers for full blocks.
    """

    kernel: ClassVar[str] = "matmul"
    template: ClassVar[str] = "matmul.cu.j2"

    dtype: str = "float32"
    tile: tuple[int, int, int] = (16, 16, 16)
    thread_tile: tuple[int, int] = (1, 1)
    shared_memory: bool = False
    mapping: str = "2d"
    layout_a: str = "row"
    layout_b: str = "row"
    smem_pad: int = 0
    launch_bounds: bool = True

    def validate(self) -> None:
        if self.dtype not in ITEMSIZE:
            fail("dtype", self.dtype, f"one of {sorted(ITEMSIZE)}")
        BM, BN, BK = self.tile
        TM, TN = self.thread_tile
        for name, v in (("tile[0] (BM)", BM), ("tile[1] (BN)", BN), ("tile[2] (BK)", BK),
                        ("thread_tile[0] (TM)", TM), ("thread_tile[1] (TN)", TN)):
            if not 1 <= v <= 1024:
                fail(name, v, "an integer from 1 to 1024")
        if BM % TM:
            fail("thread_tile", self.thread_tile, f"TM must divide BM={BM}")
        if BN % TN:
            fail("thread_tile", self.thread_tile, f"TN must divide BN={BN}")
        if TM * TN > 256:
            fail("thread_tile", self.thread_tile, "at most 256 accumulators per thread (TM*TN <= 256)")
        if self.threads > 1024:
            fail("tile", self.tile, f"(BM/TM)*(BN/TN) = {self.threads} threads per block; at most 1024 allowed")
        if self.mapping not in ("1d", "2d"):
            fail("mapping", self.mapping, "'1d' or '2d'")
        for name in ("layout_a", "layout_b"):
            if getattr(self, name) not in ("row", "col"):
                fail(name, getattr(self, name), "'row' or 'col'")
        if not 0 <= self.smem_pad <= 32:
            fail("smem_pad", self.smem_pad, "an integer from 0 to 32")
        if self.shared_bytes > MAX_SHARED_BYTES:
            fail("tile", self.tile, f"needs {self.shared_bytes} bytes of shared memory; "
                 f"the device limit is {MAX_SHARED_BYTES}")
        if self.shared_memory and self.shared_bytes > 48 * 1024:
            fail("tile", self.tile, f"needs {self.shared_bytes} bytes of static shared memory; "
                 "at most 49152 allowed for this kernel")

    # -- derived sizes --------------------------------------------------------------
    @property
    def threads(self) -> int:
        return (self.tile[0] // self.thread_tile[0]) * (self.tile[1] // self.thread_tile[1])

    @property
    def shared_bytes(self) -> int:
        if not self.shared_memory:
            return 0
        BM, BN, BK = self.tile
        return (BK * (BM + self.smem_pad) + BK * (BN + self.smem_pad)) * ITEMSIZE[self.dtype]

    def template_context(self) -> dict[str, Any]:
        BM, BN, BK = self.tile
        TM, TN = self.thread_tile
        return dict(BM=BM, BN=BN, BK=BK, TM=TM, TN=TN, threads=self.threads,
                    tolerance_per_sqrt_k=tolerance_per_sqrt_k(self.dtype))

    def launch_geometry(self, M: int, N: int, K: int) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
        """(grid, block, dynamic shared bytes) for an M x N x K product. Pure; unit-tested."""
        BM, BN, _ = self.tile
        TM, TN = self.thread_tile
        grid = (-(-N // BN), -(-M // BM), 1)
        if self.mapping == "1d":
            block = (self.threads, 1, 1)
        else:
            block = (BN // TN, BM // TM, 1)
        return grid, block, 0

    # -- for tests, tuning and benchmarks ------------------------------------------
    @staticmethod
    def reference(A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return A.astype(np.float64) @ B.astype(np.float64)

    def tolerance(self, K: int) -> float:
        return tolerance_per_sqrt_k(self.dtype) * math.sqrt(max(K, 1))

    # -- the family interface (see Spec) ----------------------------------------------
    @classmethod
    def normalize_problem(cls, problem):
        out = {}
        for key in ("M", "N", "K"):
            v = problem.get(key) if isinstance(problem, dict) else None
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"matmul problem needs {key} as a positive integer, got {v!r}")
            out[key] = int(v)
        return out

    @classmethod
    def search_space(cls, problem, dtype):
        specs = []
        for shared in (False, True):
            for BM in (16, 32, 64, 128):
                for BN in (16, 32, 64, 128):
                    for BK in ((8, 16, 32) if shared else (16,)):
                        for TM in (1, 2, 4, 8):
                            for TN in (1, 2, 4, 8):
                                try:
                                    specs.append(cls(dtype=dtype, tile=(BM, BN, BK), thread_tile=(TM, TN),
                                                     shared_memory=shared))
                                except ValueError:
                                    continue
        return specs

    @classmethod
    def default_spec(cls, problem, dtype):
        return cls(dtype=dtype, tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True)

    def prune_reason(self, problem, limits):
        if self.threads > limits.get("max_threads_per_block", 1024):
            return f"{self.threads} threads per block exceed the device's {limits['max_threads_per_block']}"
        if self.threads < 32:
            return f"{self.threads} threads per block leave most of each warp idle"
        if self.shared_bytes > limits.get("max_shared_per_block_optin", MAX_SHARED_BYTES):
            return f"{self.shared_bytes} bytes of shared memory exceed the device's limit"
        return None

    @classmethod
    def make_inputs(cls, problem, dtype, rng):
        p = cls.normalize_problem(problem)
        A = rng.standard_normal((p["M"], p["K"])).astype(dtype)
        B = rng.standard_normal((p["K"], p["N"])).astype(dtype)
        return A, B

    @classmethod
    def reference_output(cls, problem, inputs):
        return cls.reference(*inputs)

    @classmethod
    def output_shape(cls, problem):
        return (problem["M"], problem["N"])

    def tolerance_for(self, problem):
        return self.tolerance(problem["K"])

    @classmethod
    def work(cls, problem, dtype):
        M, N, K = problem["M"], problem["N"], problem["K"]
        return {"flops": 2.0 * M * N * K, "bytes": float(M * K + K * N + M * N) * ITEMSIZE[dtype]}

    @classmethod
    def bucket(cls, problem):
        return tuple(math.log2(problem[k]) for k in ("M", "N", "K"))


def tolerance_per_sqrt_k(dtype: str) -> float:
    # Rounding error of a length-K dot product grows about like sqrt(K) * eps on random data;
    # 8x headroom over that keeps the check strict but not flaky.
    eps = {"float32": 2.0 ** -24, "float64": 2.0 ** -53}[dtype]
    return 8 * eps * 4


class MatmulKernel(Kernel):
    """k(A, B, out=None, alpha=1.0, beta=0.0) -> C = alpha * A @ B + beta * out."""

    spec: Matmul

    def __init__(self, spec, source, compiled):
        super().__init__(spec, source, compiled)
        self._fn = self.function("kgen_matmul")
        self._np_dtype = np.dtype(spec.dtype)

    def __call__(self, A, B, out=None, *, alpha: float = 1.0, beta: float = 0.0, stream=None):
        spec = self.spec
        on_host = runtime.split_host_device({"A": A, "B": B, "out": out})
        if on_host:
            A = self._host_layout(A, "A", spec.layout_a)
            B = self._host_layout(B, "B", spec.layout_b)
        a = runtime.to_device(A, "A") if on_host else runtime.view(A, "A")
        b = runtime.to_device(B, "B") if on_host else runtime.view(B, "B")
        M, K, lda = self._operand(a, "A", spec.layout_a)
        K2, N, ldb = self._operand(b, "B", spec.layout_b)
        if K != K2:
            raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
        if beta != 0 and out is None:
            raise ArrayError("beta != 0 needs out= (the C that is scaled by beta and added to)")
        if on_host:
            host_out = out
            c = runtime.to_device(np.ascontiguousarray(out), "out") if out is not None else \
                runtime.new_host_output((M, N), self._np_dtype)
        else:
            c = runtime.view(out, "out") if out is not None else \
                runtime.view(runtime.empty_like_library(A, (M, N), self._np_dtype), "out")
        ldc = self._output(c, M, N)
        if M and N:
            grid, block, shared = spec.launch_geometry(M, N, K)
            scalar = self._np_dtype.type
            runtime.launch(self._fn, grid, block,
                           (np.uintp(a.ptr), np.uintp(b.ptr), np.uintp(c.ptr), np.int64(M), np.int64(N),
                            np.int64(K), np.int64(lda), np.int64(ldb), np.int64(ldc), scalar(alpha), scalar(beta)),
                           shared=shared, stream=stream)
        if on_host:
            result = runtime.copy_back(c)
            if host_out is not None:
                host_out[...] = result
                return host_out
            return result
        return c.owner

    def _host_layout(self, x, name, layout):
        if not isinstance(x, np.ndarray) or x.ndim != 2:
            raise ArrayError(f"{name} must be a 2-D array, got {getattr(x, 'shape', type(x).__name__)}")
        self._check_dtype(x.dtype, name)
        # Host data is copied anyway, so copy it in the storage order the spec expects.
        return np.ascontiguousarray(x) if layout == "row" else np.asfortranarray(x)

    def _check_dtype(self, dtype, name):
        if np.dtype(dtype) != self._np_dtype:
            raise ArrayError(f"{name} has dtype {np.dtype(dtype)} but this kernel was built for {self._np_dtype}; "
                             f"build a spec with dtype={np.dtype(dtype).name!r} or convert {name}")

    def _operand(self, v: runtime.DeviceView, name: str, layout: str) -> tuple[int, int, int]:
        """(rows, cols, leading dimension) of a 2-D operand stored as `layout`."""
        if len(v.shape) != 2:
            raise ArrayError(f"{name} must be 2-D, got shape {v.shape}")
        self._check_dtype(v.dtype, name)
        rows, cols = v.shape
        rs, cs = v.strides
        if layout == "row":
            ok = (cs == 1 or cols <= 1) and (rs >= max(cols, 1) or rows <= 1)
            ld = rs if rows > 1 else max(cols, 1)
        else:
            ok = (rs == 1 or rows <= 1) and (cs >= max(rows, 1) or cols <= 1)
            ld = cs if cols > 1 else max(rows, 1)
        if not ok:
            other = "col" if layout == "row" else "row"
            raise ArrayError(
                f"{name} has shape {v.shape} and element strides {v.strides}, which layout_{name.lower()}="
                f"{layout!r} cannot express (it needs unit stride along {'columns' if layout == 'row' else 'rows'}); "
                f"use a spec with layout_{name.lower()}={other!r} if {name} is a transposed view, or make it contiguous")
        return rows, cols, ld

    def _output(self, c: runtime.DeviceView, M: int, N: int) -> int:
        if c.shape != (M, N):
            raise ArrayError(f"out has shape {c.shape} but the product is {M}x{N}")
        self._check_dtype(c.dtype, "out")
        rs, cs = c.strides
        if not ((cs == 1 or N <= 1) and (rs >= max(N, 1) or M <= 1)):
            raise ArrayError(f"out must be row-major with unit column stride; got element strides {c.strides}")
        return rs if M > 1 else max(N, 1)


Matmul.kernel_class = MatmulKernel
