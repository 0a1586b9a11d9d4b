"""Dispatch: kgen.matmul(A, B), kgen.dot(x, y), kgen.reduce(x, op=...).

Each call picks a spec for its problem:
  1. the result tuned for exactly this problem on this device (same nvcc and kgen);
  2. else a tuned problem near it on the same device (each dimension within about a
     factor of two: the family's bucket() coordinates within NEAR), results from other
     kgen or nvcc versions included;
  3. else the defaults kgen ships (kgen.tune.defaults): a model learned from a measured
     corpus of problems, for this GPU model or its architecture;
  4. else the family's own rule (Spec.default_spec).
A call never tunes unless asked (tune=True). The choice and the loaded kernel are
memoised per (family, dtype, problem, layouts); torch tensors skip even that through a
memo keyed by their shapes, strides and dtype, so a repeat call is one dictionary lookup
before the kernel's own launch. forget() drops the memos (autotune() calls it).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import math
import threading
from typing import Any

import numpy as np

from ..core import runtime
from ..core.launch import PORTABLE_CLUSTER_BLOCKS
from ..core.runtime import ArrayError
from ..core.spec import Spec, spec_from_json


@dataclasses.dataclass(frozen=True)
class Choice:
    """The spec dispatch picked, and why: origin is "exact", "nearest" or "default"."""

    spec: Spec
    origin: str
    tuned_problem: dict[str, Any] | None = None
    tuned_ms: float | None = None
    distance: float | None = None

    def describe(self) -> str:
        if self.origin == "default":
            return f"the family's default rule (nothing tuned, no shipped table for this device): {self.spec.to_json()}"
        if self.origin == "shipped":
            return f"shipped default for this shape and device: {self.spec.to_json()}"
        return (f"{self.origin} tuned entry for {self.tuned_problem} ({self.tuned_ms:.4f} ms there, "
                f"bucket distance {self.distance:.2f}): {self.spec.to_json()}")


# The dtypes kgen.matmul takes, each with the numpy type that stands for its arrays in
# call_spec (bfloat16: float16, of the same size).
STAND_IN_TYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "bfloat16": "float16"}

_lock = threading.Lock()
_kernels: dict[tuple, Any] = {}
_choices: dict[tuple, Choice] = {}
_device: list = []
# The device a stand-in answer is for (call_spec's device=): every rule that asks which GPU
# this is (wgmma or not, its SM count) then answers for it, with or without a GPU here.
_stand_in_device: contextvars.ContextVar = contextvars.ContextVar("kgen_dispatch_device", default=None)


# Tuned entries further than this (in bucket coordinates, log2 of each dimension) from a
# problem are not used for it: a spec tuned for 4096^3 is a poor choice for 1x4096x4096,
# and the shipped model knows better.
NEAR = 1.5

_fast: dict[tuple, Any] = {}
# torch calls with out=None on the current stream: (shapes, strides, dtypes, devices, each
# pointer's 16-byte alignment class, allow_tf32) -> the kernel's RepeatCall.
_repeat: dict[tuple, Any] = {}


def forget() -> None:
    """Drop memoised choices and kernels (e.g. after tuning in another process)."""
    with _lock:
        _kernels.clear()
        _choices.clear()
        _fast.clear()
        _repeat.clear()


def _this_device():
    stand_in = _stand_in_device.get()
    if stand_in is not None:
        return stand_in
    if not _device:
        from .device import cuda_device_info

        _device.append(cuda_device_info())
    return _device[0]


def _sm_count() -> int | None:
    """This GPU's SM count, or None without a device (the rules that need it then stand aside)."""
    try:
        return int(_this_device().limits["multiprocessors"])
    except Exception:  # noqa: BLE001 - no device: no count
        return None


def _numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def select(family: type[Spec] | str, problem: dict[str, Any], dtype: str = "float32", *, device=None,
           db: Any = None) -> Choice:
    """The spec dispatch would use for `problem` (see the module docstring). No GPU is
    needed when `device` (an autotune.DeviceInfo) is given."""
    from ..core.spec import family as _family
    from .device import toolchain_version
    from .db import problem_key

    cls = _family(family)
    problem = cls.normalize_problem(problem)
    dev = device or _this_device()
    # The limits take part: a named GPU may be given with another SM count than its model's.
    memo = (cls.kernel, dtype, tuple(sorted(problem.items())), dev.name, dev.arch,
            tuple(sorted(dev.limits.items())), str(db))
    with _lock:
        hit = _choices.get(memo)
    if hit is not None:
        return hit
    choice = _lookup(cls, problem, dtype, dev, db, toolchain_version(), problem_key)
    with _lock:
        _choices[memo] = choice
    return choice


def _lookup(cls, problem, dtype, dev, db, nvcc, problem_key) -> Choice:
    from .. import __version__
    from .db import open_db

    default = _shipped_or_rule(cls, problem, dtype, dev)
    if db is False:
        return default
    try:
        database = db if hasattr(db, "results_for_device") else open_db(db, read_only=True)
        rows = database.results_for_device(cls.kernel, dtype, dev.name, dev.arch)
    except Exception:  # noqa: BLE001 - an unusable database means "nothing tuned", never a failed call
        return default
    key = problem_key(cls.kernel, dtype, problem, dev.name, dev.arch, nvcc, __version__)
    here = tuple(cls.bucket(problem))
    labels = {k: v for k, v in problem.items() if not _numeric(v)}
    ranked = []
    for row in rows:
        # Non-numeric parts of a problem (a reduction's op, a skinny operand's storage order) must
        # match, on both sides: a dot spec is no sum, and a W.t() entry no row-major one.
        theirs = {k: v for k, v in row["problem"].items() if not _numeric(v)}
        if theirs != labels:
            continue
        there = tuple(row["bucket"])
        if len(there) != len(here):
            continue
        dist = math.dist(here, there)
        if dist > NEAR:
            continue
        stale = row["nvcc"] != nvcc or row["kgen"] != __version__
        ranked.append((dist, row["key"] != key, stale, row["best_ms"], row))
    ranked.sort(key=lambda t: t[:4])
    for dist, inexact, _, _, row in ranked:
        try:
            spec = spec_from_json(row["best"])
        except ValueError:
            continue  # written by a kgen whose spec fields this one does not accept
        if not isinstance(spec, cls) or getattr(spec, "dtype", dtype) != dtype:
            continue
        try:
            if spec.prune_reason(problem, dev.limits):
                continue
        except Exception:  # noqa: BLE001
            continue
        return Choice(spec, "nearest" if inexact else "exact", row["problem"], row["best_ms"], dist)
    return default


def _shipped_or_rule(cls, problem, dtype, dev) -> Choice:
    from . import defaults

    try:
        spec = defaults.choose(cls.kernel, problem, dtype, dev.name, dev.arch, dev.limits)
    except Exception:  # noqa: BLE001 - a damaged shipped table must not break a call
        spec = None
    if spec is not None:
        return Choice(spec, "shipped")
    return Choice(_default(cls, problem, dtype, dev.limits), "default")


def _default(cls, problem, dtype, limits) -> Spec:
    """The family's default, or where this device rules it out, the first candidate of
    the search space that it allows."""
    spec = cls.default_spec(problem, dtype)
    try:
        spec = _summed_without_clusters(spec, problem, limits)
        if not spec.prune_reason(problem, limits):
            return spec
        for other in cls.search_space(problem, dtype):
            if not other.prune_reason(problem, limits):
                return other
    except Exception:  # noqa: BLE001 - the default stands
        pass
    return spec


def _shape_dtype(x: Any, name: str) -> tuple[tuple[int, ...], Any, bool]:
    """(shape, dtype or its name, on the device?) without copying anything."""
    if isinstance(x, np.ndarray):
        return tuple(x.shape), x.dtype, False
    tensor = runtime.torch_tensor_type()
    if tensor is not None and isinstance(x, tensor):
        if not x.is_cuda:
            raise ArrayError(f"{name} is a CPU torch tensor; pass a CUDA tensor or a numpy array")
        # torch's own dtype name: __cuda_array_interface__ has no spelling for bfloat16.
        return tuple(x.shape), str(x.dtype).replace("torch.", ""), True
    if runtime.is_device_array(x):
        v = runtime.view(x, name)
        return v.shape, v.dtype, True
    raise ArrayError(f"{name} is a {type(x).__name__}; expected a numpy array or a device array "
                     "(pycuda GPUArray, torch, CuPy, Numba)")


def family_problem(family: type[Spec], problem: dict[str, int], A: Any, B: Any) -> dict[str, Any]:
    """The problem `family` is tuned and looked up under for the product of A and B: a skinny
    product's names the operands stored column by column too (B = W.t() runs the dot forms, a
    row-major B the axpy ones: other kernels, each tuned for itself); the others' is M, N, K,
    their specs taking the call's storage orders after the choice (for_layouts)."""
    if family.kernel != "skinny":
        return problem
    out: dict[str, Any] = dict(problem)
    for name, x in (("layout_a", A), ("layout_b", B)):
        if _col_major(x):
            out[name] = "col"
    return out


def _col_major(x: Any) -> bool:
    """Whether a 2-D array is stored column by column (e.g. a transposed view)."""
    (rows, cols), strides = x.shape, _element_strides(x)
    return rows > 1 and cols > 1 and strides[0] == 1 and strides[1] != 1


def _kernel(cls, problem: dict[str, Any], dtype: str, tune: bool, overrides: dict[str, Any] | None = None):
    from ..core.kernel import build

    memo = (cls.kernel, dtype, tuple(sorted(problem.items())), tuple(sorted((overrides or {}).items())), tune)
    with _lock:
        k = _kernels.get(memo)
    if k is not None:
        return k
    k = build(resolve_spec(cls, problem, dtype, overrides, tune=tune))
    with _lock:
        _kernels[memo] = k
    return k


# Requests in call_overrides that are not spec fields: the family's for_layouts reads them
# (TensorMatmul.for_layouts: b_realign is both).
LAYOUT_REQUESTS = frozenset({"element_loads", "axpy_sms", "dot_sms", "b_elements"})


def resolve_spec(cls, problem: dict[str, Any], dtype: str, overrides: dict[str, Any] | None = None, *,
                 tune: bool = False, device=None, db: Any = None) -> Spec:
    """The spec a call runs: select()'s choice (after tuning it when `tune` and nothing was
    tuned for exactly this problem) on the call's operands (`overrides`, from call_overrides),
    except that a choice tuned for exactly this problem keeps its instruction, repack and
    kind of form. No GPU is needed when `device` is given."""
    return _resolve(cls, problem, dtype, overrides, tune=tune, device=device, db=db)[1]


def _resolve(cls, problem: dict[str, Any], dtype: str, overrides: dict[str, Any] | None, *,
             tune: bool, device, db: Any) -> tuple[Choice, Spec]:
    """resolve_spec's choice and the spec it becomes on the call's operands."""
    where = {k: v for k, v in (("device", device), ("db", db)) if v is not None}
    try:
        choice = select(cls, problem, dtype, **where)
    except ValueError as exc:
        raise ArrayError(str(exc)) from None
    if tune and choice.origin != "exact":
        from .tuner import autotune

        autotune(cls, problem, dtype)
        choice = select(cls, problem, dtype, **where)
    spec = choice.spec
    fields = {f.name for f in dataclasses.fields(spec)} | LAYOUT_REQUESTS
    changes = {k: v for k, v in (overrides or {}).items() if k in fields}
    if choice.origin == "exact":
        # A tuned entry for this very problem was measured on this device against the other
        # instruction's specs (and repack settings, and both kinds of form) too: its choice stands.
        for name in ("instruction", "repack", "tensor_cores", "element_loads", "axpy_sms", "dot_sms", "b_elements"):
            changes.pop(name, None)
    if changes:
        spec = spec.for_layouts(problem, **changes)
    if getattr(spec, "split_merge", None) == "cluster":
        try:
            limits = (device or _this_device()).limits
        except Exception:  # noqa: BLE001 - no device to ask: the spec as chosen
            return choice, spec
        spec = _summed_without_clusters(spec, problem, limits)
    return choice, spec


def _summed_without_clusters(spec: Spec, problem: dict[str, Any], limits: dict[str, int]) -> Spec:
    """`spec`, or where it adds K slices in a thread block cluster (split_merge='cluster') and
    the device of `limits` has none (below sm_90), its family's summed_in_workspace: the rules
    that choose cluster merges do not know the device. A cluster of more than
    PORTABLE_CLUSTER_BLOCKS blocks is kept to sm_90, where it was measured: some later GPUs
    allow no more than the portable size."""
    if getattr(spec, "split_merge", None) != "cluster":
        return spec
    cc = limits.get("compute_capability", 90)
    if cc == 90 or (cc > 90 and getattr(spec, "split_k", 1) <= PORTABLE_CLUSTER_BLOCKS):
        return spec
    return spec.summed_in_workspace(problem)  # type: ignore[attr-defined]


def _product_of(A: Any, B: Any) -> tuple[str, dict[str, int], bool]:
    """(dtype name, the problem {M, N, K}, is A on the device?) of A @ B, or ArrayError naming
    what is wrong with the operands."""
    sa, da, dev_a = _shape_dtype(A, "A")
    sb, db, _ = _shape_dtype(B, "B")
    if len(sa) != 2 or len(sb) != 2:
        raise ArrayError(f"A and B must be 2-D, got shapes {sa} and {sb}")
    (M, K), (K2, N) = sa, sb
    if K != K2:
        raise ArrayError(f"A is {M}x{K} but B is {K2}x{N}: the inner dimensions differ")
    dtype = _dtype_name(da, tuple(STAND_IN_TYPES), "A")
    _same_dtype(dtype, db, "A", "B")
    return dtype, {"M": max(M, 1), "N": max(N, 1), "K": max(K, 1)}, dev_a


def _is_real(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return True


def _same_dtype(want: str, dt: Any, first: str, second: str) -> None:
    """ArrayError unless `second` has dtype `want` (the name of `first`'s). Checked before a
    kernel is sought, so a mixed call says what is wrong on any machine."""
    got = _name_of(dt)
    if got != want:
        fix = (f"pass an out of dtype {want}" if second == "out" else
               f"both must have one dtype; convert {second} (e.g. {second}.astype or {second}.to)")
        raise ArrayError(f"{first} has dtype {want} but {second} {got}: {fix}")


def _name_of(dt: Any) -> str:
    """A dtype's name: torch's names come as strings already (see _shape_dtype)."""
    return dt if isinstance(dt, str) else np.dtype(dt).name


def _dtype_name(dt: Any, allowed: tuple[str, ...], what: str) -> str:
    name = _name_of(dt)
    if name not in allowed:
        raise ArrayError(f"{what} has dtype {name}; kgen's tuned kernels take {', '.join(allowed)}")
    return name


def matmul(A, B, out=None, *, alpha: float = 1.0, beta: float = 0.0, tune: bool = False, stream=None,
           allow_tf32: bool = False):
    """C = alpha * A @ B + beta * out with the tuned matmul for this shape and device.

    numpy in, numpy out; device arrays (pycuda, torch, CuPy) in, the same library out.
    float32, float64, float16 and bfloat16 inputs (16-bit: float32 accumulation).
    Shapes as torch.matmul takes them with one B: A of shape (..., K) (a vector, a matrix,
    or a batch of rows such as (batch, tokens, K), whose leading dimensions are folded into
    rows) times B of shape (K, N) or (K,); the result is (..., N), or (...) for a vector B.
    tune=True tunes this shape first (guided) when the database has no exact entry (not
    for large float32 products on sm_90, which run the split-TF32 kernel's own default).
    allow_tf32=True lets float32 products run on the tensor cores as TF32 (inputs
    rounded to 10 mantissa bits), like torch.backends.cuda.matmul.allow_tf32.
    stream= a pycuda, torch or CuPy stream or a raw handle; by default the current
    stream of the arrays' library (torch's for torch tensors).
    """
    tensor = runtime.torch_tensor_type()
    repeat = None
    if (tensor is not None and type(A) is tensor and type(B) is tensor and not tune and out is None
            and stream is None and beta == 0):
        # The commonest call: one key of everything the launch depends on, then the kernel's
        # resolved launches (kgen.core.kernel.RepeatCall), for matrices and folded batches alike.
        pa, pb = A.data_ptr(), B.data_ptr()
        repeat = (A.shape, A.stride(), B.shape, B.stride(), A.dtype, B.dtype, A.get_device(), B.get_device(),
                  pa & 15, pb & 15, allow_tf32)
        call = _repeat.get(repeat)
        if call is not None:
            result = call(A, pa, pb, alpha)
            if result is not None:
                return result
    sa, sb = getattr(A, "shape", None), getattr(B, "shape", None)
    if sa is not None and sb is not None and (len(sa) != 2 or len(sb) != 2):
        return _folded_product(A, B, out, dict(alpha=alpha, beta=beta, tune=tune, stream=stream,
                                               allow_tf32=allow_tf32), repeat)
    return _product_2d(A, B, out, alpha, beta, tune, stream, allow_tf32, repeat)


def _folded_product(A: Any, B: Any, out: Any, options: dict[str, Any], repeat: tuple | None = None) -> Any:
    """kgen.matmul on operands that are not both matrices: A (..., K) seen as rows x K (a
    view where its strides allow, else a copy, as torch.matmul does), B (K,) as a K x 1
    column, out (..., N) as rows x N (a view, never a copy, so the product lands in it);
    the 2-D product's result is returned in the shape torch.matmul gives. `repeat`: the
    torch call's key (matmul's); where both views read their tensors in place, the 2-D
    call's resolved launches are kept under it, making results of the folded shape, so a
    repeat call reshapes nothing."""
    sa, sb = tuple(A.shape), tuple(B.shape)
    if not sa or not sb:
        raise ArrayError(f"A and B must have at least one dimension, got shapes {sa} and {sb}")
    if len(sb) > 2:
        raise ArrayError(f"B must be 1-D or 2-D (one matrix for every row of A), got shape {sb}; "
                         "kgen.matmul does not batch over B: call it once per matrix")
    K = sa[-1]
    if K != sb[0]:
        raise ArrayError(f"A has shape {sa} and B {sb}: the inner dimensions differ ({K} and {sb[0]})")
    lead = sa[:-1]
    rows = math.prod(lead)
    N = sb[1] if len(sb) == 2 else 1
    shape_c = lead + sb[1:]
    A2 = A if len(sa) == 2 else _reshaped(A, (rows, K), "A", in_place=False)
    B2 = B if len(sb) == 2 else _reshaped(B, (K, 1), "B", in_place=False)
    out2 = None
    if out is not None:
        so = tuple(getattr(out, "shape", ()))
        if so != shape_c:
            raise ArrayError(f"out has shape {so} but A {sa} @ B {sb} has shape {shape_c}")
        out2 = out if len(so) == 2 else _reshaped(out, (rows, N), "out", in_place=True)
    key_2d = None
    if repeat is not None:
        pa, pb = A2.data_ptr(), B2.data_ptr()
        key_2d = (A2.shape, A2.stride(), B2.shape, B2.stride(), A2.dtype, B2.dtype, A2.get_device(),
                  B2.get_device(), pa & 15, pb & 15, options["allow_tf32"])
    C = _product_2d(A2, B2, out2, repeat=key_2d, **options)
    if repeat is not None and key_2d is not None and A2.data_ptr() == A.data_ptr() \
            and B2.data_ptr() == B.data_ptr():
        # Views, not copies (a copy lives elsewhere): the launches read A and B where they are.
        call = _repeat.get(key_2d)
        if call is not None:
            _store_repeat(repeat, call.reshaped(shape_c))
    return out if out is not None else _reshaped(C, shape_c, "C", in_place=False)


def _reshaped(x: Any, shape: tuple[int, ...], name: str, in_place: bool) -> Any:
    """x in `shape`, of its own library. in_place: a view of x's memory or ArrayError (an
    out= that only a copy could reshape would take the result and drop it)."""
    tensor = runtime.torch_tensor_type()
    try:
        if tensor is not None and isinstance(x, tensor):
            return x.view(shape) if in_place else x.reshape(shape)
        if isinstance(x, np.ndarray):
            if not in_place:
                return x.reshape(shape)
            v = x.view()
            v.shape = shape
            return v
        v = x.reshape(shape)
    except (RuntimeError, ValueError, AttributeError, TypeError) as exc:
        raise ArrayError(f"{name} of shape {tuple(x.shape)} cannot be seen as {shape}"
                         + (" without a copy; pass a contiguous out" if in_place else "") + f" ({exc})") from None
    if in_place and 0 not in shape and runtime.view(v, name).ptr != runtime.view(x, name).ptr:
        raise ArrayError(f"{name} of shape {tuple(x.shape)} cannot be seen as {shape} without a copy; "
                         "pass a contiguous out")
    return v


def _product_2d(A, B, out, alpha: float, beta: float, tune: bool, stream, allow_tf32: bool,
                repeat: tuple | None = None):
    """kgen.matmul on two matrices; `repeat`: the torch call's key, under which the kernel's
    resolved launches are kept after the call succeeds (matmul looked it up already)."""
    tensor = runtime.torch_tensor_type()
    fast = None
    if tensor is not None and type(A) is tensor and type(B) is tensor and not tune:
        fast = ("matmul", A.shape, A.stride(), B.shape, B.stride(), A.dtype, allow_tf32)
        k = _fast.get(fast)
        if k is not None:
            result = k(A, B, out=out, alpha=alpha, beta=beta, stream=stream)
            if repeat is not None:
                _remember_repeat(repeat, k, A, B)
            return result
    dtype, problem, dev_a = _product_of(A, B)
    for name, value in (("alpha", alpha), ("beta", beta)):
        if isinstance(value, (str, bytes)) or not _is_real(value):
            raise ArrayError(f"{name} must be a real number, got {value!r}")
    if beta != 0 and out is None:
        raise ArrayError("beta != 0 needs out= (the C that is scaled by beta and added to)")
    if out is not None:
        so, do, _ = _shape_dtype(out, "out")
        if tuple(so) != (A.shape[0], B.shape[1]):
            raise ArrayError(f"out has shape {tuple(so)} but the product is {A.shape[0]}x{B.shape[1]}")
        _same_dtype(dtype, do, "A", "out")
    family = call_family(A, B, dtype, allow_tf32)
    problem = family_problem(family, problem, A, B)
    overrides = call_overrides(A, B, family, dtype, allow_tf32, dev_a)
    if family.kernel == "tensor_matmul" and dtype == "float32":
        # The tuner searches TF32 specs, not the split's tiles, so tune=True does not apply to
        # the split: it runs its own default.
        tune = tune and allow_tf32
    k = _kernel(family, problem, dtype, tune, overrides)
    result = k(A, B, out=out, alpha=alpha, beta=beta, stream=stream)
    if fast is not None:
        _remember(fast, k)
    if repeat is not None:
        _remember_repeat(repeat, k, A, B)
    return result


# float64 products of at least this many multiply-adds (M*N*K) run on the FP64 tensor cores.
# Measured on an H100 (kgen.bench.f64_route, docs/dispatch.md): from 64x2048x2048 and 777x555x999
# up the tensor-core kernels ran at 0.47-0.72x cuBLAS DGEMM where the SIMT tiles ran at
# 0.35-0.61x; at 512^3 the two tied (0.89x / 0.90x) and at 200^3 the SIMT tiles won (1.03x / 0.87x).
# On sm_90, float64 products of up to 256 rows against N and K of 1024 or more run there whatever
# their size (TensorMatmul.rows_f64_suits; F64_TENSOR_MAX_ROWS says how that was measured).
TENSOR_F64_MIN_MACS = 1 << 28
# float64 products of F64_FEW_MAX_ROWS + 1 to F64_IN_PLACE_MAX_ROWS rows on the FP64 tensor cores
# read a weight whose rows are not 16 bytes apart (W.t() of an odd K, row-major of an odd N) in
# place, not copied first: the element entry copies each element by its own cp.async inside the
# pipeline. Device time on an H100 (docs/bench/research/mma_whole_tiles.py, VARIANTS
# inplace/copy, seeds 99701 and 99702 plus five fixed products; docs/matmul-record.md): in place ran
# 1.02-1.60x the copy on 11 of 13 products of 152-877 rows, and lost at 591x3663x4828 (0.92x)
# and 1424x1867x1651 (0.84x), where many row tiles read each weight element and one copy of
# it costs less than their element copies.
F64_IN_PLACE_MAX_ROWS = 1024


def _float64_overrides(A: Any, B: Any, M: int, N: int, K: int) -> dict[str, Any]:
    """call_overrides' float64 part on the FP64 tensor cores: a weight whose rows are not 16 bytes
    apart read in place rather than copied first:
      - by the few-row tiles (copying made them 0.65x as fast on an H100; docs/matmul-record.md, "Float64
        at 9-64 rows");
      - on sm_90, where it was measured, by any tiles at 65-F64_IN_PLACE_MAX_ROWS rows, both
        storage orders of the weight.
    On sm_90 such a call also makes the b_elements request (TensorMatmul.with_b_elements: the
    64 x 64 tiles copy A aligned and spread B's element copies; F64_B_ELEMENTS_TILE says why).
    The few-column tiles on sm_90 (TensorMatmul.few_columns_f64_suits) instead read an A whose
    rows are not 16 bytes apart in place, the large operand there, and such a B by the element
    entry beside A's 16-byte copies (F64_FEW_COLUMNS_B_ELEMENTS; off: B copied first)."""
    from ..ops import tensorcore
    from ..ops.tensorcore import F64_FEW_MAX_ROWS, TensorMatmul

    out: dict[str, Any] = {}
    hopper = _runs_wgmma()
    if hopper and TensorMatmul.few_columns_f64_suits(M, N, K):
        # The large operand is A: read in place where its rows are not 16 bytes apart (a copy
        # would read and write all of it); the small B likewise where only its rows are.
        if max(_element_strides(A)) % 2:
            return {"repack": False}
        if max(_element_strides(B)) % 2 and tensorcore.F64_FEW_COLUMNS_B_ELEMENTS:
            return {"repack": False, "repack_a": True}
        return {}
    if max(_element_strides(B)) % 2 and (
            TensorMatmul.few_rows_f64_suits(M, N, K) or F64_FEW_MAX_ROWS < M <= F64_IN_PLACE_MAX_ROWS and hopper):
        out["repack"] = False
        if hopper:
            out["b_elements"] = True
    return out


def call_overrides(A: Any, B: Any, family: type[Spec], dtype: str, allow_tf32: bool = False,
                   on_device: bool = True, stand_in: bool = False, device=None) -> dict[str, Any]:
    """What kgen.matmul(A, B) asks of `family`'s chosen spec for these operands (their storage
    orders and strides; resolve_spec applies it): the layouts of device arrays, element loads
    where copies cost more than they save, the skinny family's SIMT or wgmma forms, B read in
    place, and float32 on the TF32 tensor cores as one product or three. `on_device`: A is a
    device array; `stand_in`: numpy arrays stand for device arrays of their strides;
    `device` (an autotune.DeviceInfo; None: this GPU) gives the SM count the rules count
    blocks against."""
    (M, K), N = A.shape, B.shape[1]
    problem = {"M": max(M, 1), "N": max(N, 1), "K": max(K, 1)}
    overrides: dict[str, Any] = {}
    if (on_device or stand_in) and family.kernel in ("matmul", "tensor_matmul"):
        # A transposed device view is read in place by a column-major spec of the same tiles.
        b_in_place = stand_in or runtime.is_device_array(B)
        overrides = {"layout_a": "col" if _col_major(A) else "row",
                     "layout_b": "col" if b_in_place and _col_major(B) else "row"}
    from ..ops.matmul import ELEMENT_LOADS_MAX_MACS
    from ..ops.tensorcore import TensorMatmul

    if family.kernel == "matmul" and M * N * K <= ELEMENT_LOADS_MAX_MACS:
        # Small products: unaligned operands read in place (one launch), not repacked first.
        overrides["repack"] = False
    if family.kernel == "tensor_matmul" and dtype == "float64":
        overrides.update(_float64_overrides(A, B, M, N, K))
    if family.kernel == "skinny" and _element_rows_simt(A, B, M, N, dtype):
        # 16-bit, a few rows, a large operand that allows only element loads: the SIMT forms.
        overrides["tensor_cores"] = False
    k_contiguous = family.kernel == "skinny" and _large_k_contiguous(A, B, M, N)
    if family.kernel == "skinny" and _split_on_hopper(dtype) and _wgmma_suits(problem, k_contiguous):
        # Hopper: the wgmma forms (not a device-free default: the rule and tables hold the
        # mma.sync forms, which run on every GPU); below their rows, against wide W.t() too.
        overrides["instruction"] = "wgmma"
    if family.kernel == "skinny" and (dtype == "float32" or k_contiguous and dtype in ("float16", "bfloat16")):
        # A row-major large operand: the float32 tensor-core axpy form counts its blocks
        # against the SMs (Skinny.one_tile_axpy_suits); a k-contiguous one: the SIMT dot form
        # counts its column tiles (Skinny.narrow_dot_suits, one_wave_dot_suits), 16-bit too.
        sms = device.limits.get("multiprocessors") if device is not None else _sm_count()
        if sms:
            overrides["dot_sms" if k_contiguous else "axpy_sms"] = sms
    if family.kernel == "tensor_matmul" and _element_loads(A, B, M, N, K, dtype):
        # Mid-size 16-bit products with rows TMA cannot read: mma.sync reading them in place
        # (one launch) rather than the wgmma kernel after copies.
        overrides["element_loads"] = True
    elif (family.kernel == "tensor_matmul" and overrides.get("layout_b") == "col" and not _rows_aligned(B)
          and TensorMatmul.classes_suits(M, N, K, dtype)):
        # W.t() of such a weight at 9-16 rows: by row sets a tile (b_classes).
        overrides["b_classes"] = True
    elif family.kernel == "tensor_matmul" and "layout_b" in overrides and _realigns_b(B, M, N, K, dtype):
        # A 16-bit B whose rows TMA cannot read (a pitch of no multiple of 16 bytes): the wgmma
        # kernel reads it in place rather than copy it first, by TMA as row sets where they suit
        # (a row-major B; W.t() of an even pitch), else by its producer threads.
        overrides["b_phased" if _phased_b(B) else "b_realign"] = True
    if family.kernel == "tensor_matmul" and dtype == "float32":
        # TF32 allowed: one TF32 product; else float32 accuracy from three (split_tf32), whatever
        # a tuned entry for this problem holds.
        overrides["split_tf32"] = not allow_tf32
    return overrides


def call_spec(A: Any, B: Any, allow_tf32: bool = False, *, device=None, db: Any = None,
              dtype: str | None = None) -> Spec:
    """The spec kgen.matmul(A, B, allow_tf32=...) runs for these operands (numpy arrays stand
    for device arrays of the same shapes and strides), with the tuning database `db` (None:
    the default one, False: none) on `device` (an autotune.DeviceInfo; None: this GPU; given,
    no GPU is needed and every rule answers for it). `dtype`: the element type the arrays
    stand for where numpy has none of that name (float16 arrays for "bfloat16")."""
    return call_choice(A, B, allow_tf32, device=device, db=db, dtype=dtype)[1]


def call_choice(A: Any, B: Any, allow_tf32: bool = False, *, device=None, db: Any = None,
                dtype: str | None = None) -> tuple[Choice, Spec]:
    """call_spec's spec with where it came from: the Choice dispatch made for the product's
    family (a tuned entry, the shipped table or the family's rule; its spec before the call's
    operands adapt it) and the spec the call runs."""
    with _as_device(device):
        name, problem, _ = _product_of(A, B)
        if dtype is not None:
            if dtype not in STAND_IN_TYPES:
                raise ArrayError(f"dtype={dtype!r} is not allowed: one of {', '.join(STAND_IN_TYPES)}")
            if np.dtype(STAND_IN_TYPES[dtype]).itemsize != np.dtype(STAND_IN_TYPES[name]).itemsize:
                raise ArrayError(f"dtype={dtype!r} but the arrays hold {name}, of another size; pass arrays of "
                                 f"{STAND_IN_TYPES[dtype]} for it")
            name = dtype
        family = call_family(A, B, name, allow_tf32)
        problem = family_problem(family, problem, A, B)
        overrides = call_overrides(A, B, family, name, allow_tf32, stand_in=True, device=device)
        return _resolve(family, problem, name, overrides, tune=False, device=device, db=db)



def reduce_choice(n: int, op: str = "sum", dtype: str = "float32", *, device=None,
                  db: Any = None) -> tuple[Choice, Spec]:
    """What kgen.reduce(x, op=op) (kgen.dot for op="dot") runs for a vector of n elements of
    `dtype`: dispatch's Choice and the spec, on `device` (an autotune.DeviceInfo; None: this GPU;
    given, no GPU is needed) with the tuning database `db` (None: the default one, False: none)."""
    from ..ops.reduce import OPS, Reduce

    _check_public_op(op)
    if dtype not in OPS[op][4]:
        raise ArrayError(f"dtype={dtype!r} is not allowed for op={op!r}: one of {list(OPS[op][4])}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArrayError(f"n={n!r} is not allowed: the vector's length, at least 1")
    return _resolve(Reduce, {"n": n, "op": op}, dtype, None, tune=False, device=device, db=db)


def _check_public_op(op: str) -> None:
    """An ArrayError unless kgen.reduce takes `op` by name (a custom reduction is built as a spec)."""
    from ..ops.reduce import OPS

    if op == "custom":
        raise ArrayError("op='custom' needs its expressions: build it with kgen.build(kgen.Reduce(op='custom', "
                         "map_expr=..., combine=..., identity=...)) and call that kernel")
    if op not in OPS:
        raise ArrayError(f"op={op!r} is not allowed: one of {sorted(o for o in OPS if o != 'custom')}")


@contextlib.contextmanager
def _as_device(device):
    """Rules that ask which GPU this is answer for `device` (None: this GPU) inside."""
    if device is None:
        yield
        return
    token = _stand_in_device.set(device)
    try:
        yield
    finally:
        _stand_in_device.reset(token)


def call_family(A: Any, B: Any, dtype: str, allow_tf32: bool = False) -> type[Spec]:
    """The family kgen.matmul(A, B) runs: matmul_family with the storage of the call's
    operands (is the large one k-contiguous, can the wgmma kernel read it in place: rows TMA
    reads, or an unaligned W.t() that TensorMatmul.realign_swap_suits), except that a
    row-major 16-bit B whose rows TMA cannot read as they are (a pitch of no multiple of 8
    elements) at TensorMatmul.realign_row_suits's rows runs the wgmma kernel, which reads it by
    row sets (b_phased)."""
    from ..ops.tensorcore import TensorMatmul

    (M, K), N = A.shape, B.shape[1]
    k_contiguous = _large_k_contiguous(A, B, M, N)
    in_place = dtype in ("float16", "bfloat16") and _runs_wgmma() and (
        _large_rows_aligned(A, B, M, N)
        # W.t() of a weight whose rows TMA cannot read, where the wgmma kernel reads it in place
        # faster than the skinny forms (b_realign, TensorMatmul.realign_swap_suits; by row sets at
        # an even pitch, TensorMatmul.phased_swap_suits)
        or (M <= N and k_contiguous and TensorMatmul.realign_swap_suits(M, N, K, dtype))
        or (M <= N and k_contiguous and _phased_b(B) and TensorMatmul.phased_swap_suits(M, N, K, dtype))
        # ... by row sets a tile, 9-16 rows (TensorMatmul.classes_suits)
        or (M <= N and k_contiguous and not _rows_aligned(B) and TensorMatmul.classes_suits(M, N, K, dtype)))
    if (dtype in ("float16", "bfloat16") and M <= N and not k_contiguous and _runs_wgmma()
            and TensorMatmul.realign_row_suits(M, N, K, dtype) and not _rows_aligned(B)):
        # A row-major B TMA cannot read as it is: the skinny forms past SIMT_ELEMENT_ROWS_16 rows
        # read it with narrow loads, the wgmma kernel by row sets faster (b_phased).
        return TensorMatmul
    split = not allow_tf32 and _split_on_hopper(dtype)
    return matmul_family(M, N, K, dtype, allow_tf32, k_contiguous, in_place, split,
                         dtype == "float64" and _runs_wgmma())


def shape_family(M: int, N: int, K: int, dtype: str, device=None) -> type[Spec]:
    """The family kgen.matmul runs an M x N x K product of row-major operands on with on this
    GPU, or on `device` (an autotune.DeviceInfo) without one (TF32 not allowed): call_family
    without the arrays."""
    with _as_device(device):
        return matmul_family(M, N, K, dtype, False, None, False, _split_on_hopper(dtype),
                             dtype == "float64" and _runs_wgmma())


def matmul_family(M: int, N: int, K: int, dtype: str, allow_tf32: bool = False,
                  large_k_contiguous: bool | None = None, wgmma_in_place: bool = False,
                  split_tf32: bool = False, rows_f64: bool = False) -> type[Spec]:
    """The family that runs an M x N x K product: few rows or columns (the products of
    model layers against a batch of tokens) go to the skinny-product kernels, which stream
    the large operand at memory speed (how many rows count as few depends on the dtype
    and, past the SIMT forms' range, on whether the large operand is stored k-contiguous,
    which the tensor-core skinny forms favour, and for 16-bit inputs on whether the wgmma
    kernel can read it in place: `wgmma_in_place`); 16-bit inputs
    otherwise to the tensor-core family, as do large float64 products and float32 ones
    when TF32 is allowed, and float32 ones as three TF32 products where `split_tf32` (an sm_90
    GPU, KGEN_SPLIT_TF32 not off) and split_tf32_suits (wgmma) or split_mma_suits (mma.sync),
    and float64 ones of up to 256 rows where `rows_f64` (an sm_90 GPU:
    TensorMatmul.rows_f64_suits); everything else to the
    tiled SIMT matmul."""
    from ..ops.matmul import Matmul
    from ..ops.skinny import Skinny
    from ..ops.tensorcore import TensorMatmul, split_mma_suits, split_tf32_suits

    if Skinny.suits(max(M, 1), max(N, 1), max(K, 1), dtype, large_k_contiguous, wgmma_in_place, split_tf32):
        return Skinny
    if dtype in ("float16", "bfloat16") or (dtype == "float32" and allow_tf32):
        return TensorMatmul
    if dtype == "float64" and (M * N * K >= TENSOR_F64_MIN_MACS
                               or rows_f64 and (TensorMatmul.rows_f64_suits(M, N, K)
                                                or TensorMatmul.few_columns_f64_suits(M, N, K))):
        return TensorMatmul
    if dtype == "float32" and split_tf32 and not allow_tf32 and (split_tf32_suits(M, N, K)
                                                                 or split_mma_suits(M, N, K)):
        return TensorMatmul
    return Matmul


def _element_strides(x: Any) -> tuple[int, ...]:
    tensor = runtime.torch_tensor_type()
    if tensor is not None and isinstance(x, tensor):
        return tuple(x.stride())
    if isinstance(x, np.ndarray):
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(runtime.view(x, "operand").strides)


def _large_k_contiguous(A: Any, B: Any, M: int, N: int) -> bool:
    """Whether the large operand of a product with few rows (B) or few columns (A) is
    stored with unit stride along K: B column-major (W.T of a weight W stored N x K), or
    A row-major."""
    if M <= N:
        sk, sn = _element_strides(B)
        return sk == 1 and N > 1
    sm, sk = _element_strides(A)
    return sk == 1 and M > 1


def _large_rows_aligned(A: Any, B: Any, M: int, N: int) -> bool:
    """Whether the large operand's leading dimension spans a multiple of 16 bytes (TMA's
    row alignment; a 16-bit element is 2 bytes). The pointer's own alignment is left to the
    kernel, which copies an unaligned operand."""
    return _rows_aligned(B if M <= N else A)


def _rows_aligned(x: Any) -> bool:
    """Whether a 16-bit array's leading dimension (its largest stride) is a multiple of 8
    elements: 16 bytes, the row alignment TMA reads."""
    return max(_element_strides(x)) % 8 == 0


def _element_rows_simt(A: Any, B: Any, M: int, N: int, dtype: str) -> bool:
    """Whether a skinny product should run the SIMT forms because its large operand's rows
    are an odd number of elements apart (element loads only; Skinny.simt_for_element_rows).
    The strides decide, not the pointer, so that the choice is the same for every call the
    shape-and-strides shortcut serves."""
    from ..ops.skinny import Skinny

    if not Skinny.simt_for_element_rows(min(M, N), dtype, _large_k_contiguous(A, B, M, N)):
        return False
    return max(_element_strides(B if M <= N else A)) % 2 == 1


def _realigns_b(B: Any, M: int, N: int, K: int, dtype: str) -> bool:
    """Whether kgen.matmul runs the wgmma kernel with b_realign for this B: its leading
    dimension (the row stride of a row-major B, the column stride of a transposed view) is no
    multiple of 8 elements (16 bytes), it has more than one row and column, and
    TensorMatmul.realign_suits the product. The strides decide, not the pointer, so that the
    choice is the same for every call the shape-and-strides shortcut serves (an odd pointer
    alone is copied aligned)."""
    from ..ops.tensorcore import TensorMatmul

    return TensorMatmul.realign_suits(M, N, K, dtype) and K > 1 and N > 1 and not _rows_aligned(B)


def _phased_b(B: Any) -> bool:
    """Whether a B whose rows TMA cannot read as they are is read by row sets (b_phased) where
    the transposed tiles run: a row-major B at any pitch, W.t() (a k-contiguous view) at an even
    one (TensorMatmul.PHASED_SWAP_ROWS says why not an odd one). The strides decide."""
    sk, sn = _element_strides(B)
    return sn == 1 or max(sk, sn) % 2 == 0


def _element_loads(A: Any, B: Any, M: int, N: int, K: int, dtype: str) -> bool:
    """Whether kgen.matmul runs this product on mma.sync reading its operands in place
    (TensorMatmul.element_loads_suits, with for_layouts' element_loads request): an sm_90 GPU,
    where the default is the wgmma kernel, and an operand whose leading dimension is no multiple
    of 8 elements (16 bytes), which that kernel would copy first. The strides decide, as in
    _realigns_b. And a product of a short K (TensorMatmul.short_k_suits) whose output rows are
    not 16-byte aligned (N no multiple of 8), which the wgmma kernel would store a piece at a
    time, or whose B is W.t() (k-contiguous; SHORT_K_WEIGHT_T says why): the request then gives
    the short-K tiles, whatever the product's size."""
    from ..ops.tensorcore import SHORT_K_WEIGHT_T, TensorMatmul

    if not _runs_wgmma():
        return False
    if TensorMatmul.short_k_suits(M, N, K, dtype) and (N % 8 or (SHORT_K_WEIGHT_T and _element_strides(B)[0] == 1)):
        return True
    if not TensorMatmul.element_loads_suits(M, N, K, dtype):
        return False
    return not (_rows_aligned(A) and _rows_aligned(B))


def _wgmma_suits(problem: dict[str, int], k_contiguous: bool) -> bool:
    """Whether a float32 skinny product runs the wgmma forms on sm_90: wgmma_suits' rows, or
    fewer against a wide k-contiguous large operand (wgmma_wide_dot_suits)."""
    from ..ops.skinny import Skinny

    M, N, K = problem["M"], problem["N"], problem["K"]
    return Skinny.wgmma_suits(M, N, K) or (k_contiguous and Skinny.wgmma_wide_dot_suits(M, N, K))


def _split_on_hopper(dtype: str) -> bool:
    """Whether float32 products may run as three TF32 products on wgmma here: an sm_90 GPU
    and KGEN_SPLIT_TF32 not off."""
    from ..ops.skinny import split_tf32_enabled

    return dtype == "float32" and _runs_wgmma() and split_tf32_enabled()


def _runs_wgmma() -> bool:
    try:
        return _this_device().limits.get("compute_capability") == 90
    except Exception:  # noqa: BLE001 - no device: the portable choice
        return False


def _remember(key: tuple, kernel: Any) -> None:
    """Keep a torch call's kernel under its shapes, strides and dtype (after the call
    succeeded, so only checked combinations take the shortcut)."""
    with _lock:
        if len(_fast) >= 4096:
            _fast.clear()
        _fast[key] = kernel


def _remember_repeat(key: tuple, kernel: Any, A: Any, B: Any) -> None:
    """Keep the kernel's resolved call for this signature (after a call succeeded), where
    its family makes one (a `repeat_call` method)."""
    bind = getattr(kernel, "repeat_call", None)
    call = bind(A, B) if bind is not None else None
    if call is not None:
        _store_repeat(key, call)


def _store_repeat(key: tuple, call: Any) -> None:
    with _lock:
        if len(_repeat) >= 4096:
            _repeat.clear()
        _repeat[key] = call


def dot(x, y, out=None, *, tune: bool = False, stream=None):
    """sum(x * y) with the tuned dot kernel for this length and device."""
    return reduce(x, y, op="dot", out=out, tune=tune, stream=stream)


def reduce(x, y=None, *, op: str = "sum", out=None, tune: bool = False, stream=None):  # noqa: A001
    """op ("sum", "min", "max"; "dot" with y) of a 1-D array, with the tuned kernel. Without y,
    an array of any other shape is reduced over all its elements, as torch.sum(x) and
    np.sum(x) do (read in place where its strides allow, else copied)."""
    shape = getattr(x, "shape", None)
    if y is None and shape is not None and len(shape) != 1:
        x = _reshaped(x, (math.prod(tuple(shape)),), "x", in_place=False)
    tensor = runtime.torch_tensor_type()
    fast = None
    if tensor is not None and type(x) is tensor and not tune:
        fast = ("reduce", op, x.shape, x.dtype, y is None)
        k = _fast.get(fast)
        if k is not None:
            return k(x, out=out, stream=stream) if y is None else k(x, y, out=out, stream=stream)
    from ..ops.reduce import OPS, Reduce

    _check_public_op(op)
    arity = OPS[op][0]
    if (y is None) != (arity == 1):
        raise ArrayError(f"op={op!r} takes {arity} input(s): " + ("pass y" if arity == 2 else "leave y out"))
    sx, dx, _ = _shape_dtype(x, "x")
    if len(sx) != 1:
        raise ArrayError(f"x must be 1-D, got shape {sx}: {op} takes two vectors (for matrices use kgen.matmul)")
    dtype = _dtype_name(dx, ("float32", "float64") + (("int32",) if op != "dot" else ()), "x")
    sy = tuple(getattr(y, "shape", ()) or ()) if y is not None else ()
    if sy and sy != sx:
        # Checked before a kernel is sought, so a wrong call says what is wrong on any machine
        # (an array without .shape is checked by the kernel).
        raise ArrayError(f"x and y differ in length: {sx[0]} and {sy[0] if len(sy) == 1 else sy}")
    if y is not None:
        _same_dtype(dtype, _shape_dtype(y, "y")[1], "x", "y")
    k = _kernel(Reduce, {"n": sx[0], "op": op}, dtype, tune)
    args = (x,) if y is None else (x, y)
    result = k(*args, out=out, stream=stream)
    if fast is not None:
        _remember(fast, k)
    return result
