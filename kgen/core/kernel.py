"""build(): spec -> rendered source -> cubin -> loaded, callable kernel."""
from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any

import numpy as np

from . import runtime
from .compiler import DEFAULT_ARCH, CompileError, Compiled, check_arch, compile_cuda, is_cached
from .launch import stream_capturing
from .render import render
from .spec import Spec


class Kernel:
    """A compiled, loaded kernel for one spec. Families subclass it and define __call__.

    Attributes: spec, source (the CUDA C), compiled (cubin, arch, ptxas report),
    resources (per entry point: registers, spills, and shared memory per block as the
    launch uses it, static and dynamic; see launch_resources).

    Made with compiled=None (build() does so where spec.entry_units() is true and the whole
    module is not in the cache), the kernel compiles each entry point on its first use, in a
    unit of its own (render(spec, entries=(name,))), and `compiled` compiles the whole module
    only when asked for.
    """

    _dtype_name: str | None = None  # numpy's name of the spec's dtype, for the cheap check

    def __init__(self, spec: Spec, source: str, compiled: Compiled | None, arch: str | None = None):
        if compiled is not None:
            self.arch = build_arch = compiled.arch   # nothing is compiled again: the module is here
        elif arch is not None:
            self.arch, build_arch = spec.target_arch(arch), arch
        else:
            raise ValueError("a kernel made without its compiled module needs the arch to compile its entries for")
        self.spec = spec
        self.source = source
        self._compiled = compiled
        self._build_arch = build_arch   # the device's arch, as _compile_spec takes it
        self._units: dict[str, _Unit] = {}   # entry point -> the loaded unit holding it
        self._whole = _Unit(compiled) if compiled is not None else None
        self._unit_lock = threading.Lock()
        # None for bfloat16 without ml_dtypes: such families check dtypes by name.
        self._np_dtype: Any = runtime.numpy_dtype(getattr(spec, "dtype"))  # noqa: B009 - each family declares dtype
        self._dtype_name = self._np_dtype.name if self._np_dtype is not None else None

    @property
    def compiled(self) -> Compiled:
        """The whole module, compiled (or read from the cache) on first access where the kernel
        compiles its entries one at a time."""
        if self._compiled is None:
            with self._unit_lock:
                if self._compiled is None:
                    self._compiled = _compile_spec(self.spec, self.source, self._build_arch)
        return self._compiled

    @property
    def module(self) -> runtime.Module:
        """The pycuda module of the whole kernel (loads it where entries are built one at a time)."""
        if self._whole is None:
            compiled = self.compiled
            with self._unit_lock:
                if self._whole is None:
                    self._whole = _Unit(compiled)
        return self._whole.module

    def _unit(self, name: str) -> _Unit:
        """The loaded unit holding entry point `name`: the whole module, or the entry's own unit,
        compiled on its first use."""
        if self._whole is not None:
            return self._whole
        unit = self._units.get(name)
        if unit is not None:
            return unit
        with self._unit_lock:
            unit = self._units.get(name)
            if unit is None:
                source = render(self.spec, entries=(name,))
                compiled = _compile_spec(self.spec, source, self._build_arch)
                if name not in compiled.resources:
                    raise KeyError(f"{self.spec.kernel} has no entry point {name!r} "
                                   f"(its units hold {sorted(compiled.resources)})")
                unit = _Unit(compiled)
                # Every entry the unit holds (the family's small helpers besides `name`) is
                # launched from it from now on, so no second unit is compiled for them.
                for entry in compiled.resources:
                    self._units.setdefault(entry, unit)
                unit = self._units[name]
        return unit

    def _check_dtype(self, dtype, name: str) -> None:
        """An argument's dtype (a numpy dtype or its name) must be the spec's. A numpy
        dtype compares equal to its name, so the hot path builds no dtype object; a name is
        compared as a string (numpy would parse it on every comparison)."""
        if dtype == self._dtype_name or dtype is self._np_dtype:
            return
        if dtype != self._np_dtype:
            try:
                got = np.dtype(dtype).name
            except TypeError:  # a library dtype numpy does not know (bfloat16, say)
                got = str(dtype)
            raise runtime.ArrayError(f"{name} has dtype {got} but this kernel was built for {self._np_dtype}; "
                                     f"build a spec with dtype={got!r} or convert {name}")

    @property
    def resources(self) -> dict[str, dict[str, int]]:
        return self.compiled.resources

    def function(self, name: str, dynamic_shared: int = 0):
        """The pycuda Function `name` (for its attributes and pycuda-style calls)."""
        return self._unit(name).module.function(name, dynamic_shared)

    def release(self) -> None:
        """Free device workspaces the kernel keeps between calls (none by default)."""

    def handle(self, name: str, dynamic_shared: int = 0, carveout: int | None = None) -> int:
        """The CUfunction `name` for kgen.core.launch.Launch (the thin launch path); `carveout`:
        its preferred share of the SM's memory as shared memory, in percent."""
        return self._unit(name).driver().function(name, dynamic_shared, carveout)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Launch on the inputs (numpy or device arrays) and return the result. The tuner's
        runner calls kernel(*make_inputs(...), out=device_array)."""
        raise NotImplementedError(f"{type(self).__name__} does not define __call__; "
                                  "a family's kernel class launches its entry points there")

    def __repr__(self) -> str:
        return f"<kgen {type(self).__name__} {self.spec.to_json()}>"


class _Unit:
    """One loaded cubin of a kernel: the pycuda module (function attributes, pycuda-style
    calls) and, on first use, the driver API's copy for launches by handle (pycuda keeps its
    function handles private)."""

    __slots__ = ("compiled", "module", "_driver")

    def __init__(self, compiled: Compiled):
        self.compiled = compiled
        self.module = runtime.Module(compiled.cubin)
        self._driver: Any = None

    def driver(self) -> Any:
        if self._driver is None:
            from .launch import DriverModule

            self._driver = DriverModule(self.compiled.cubin)
        return self._driver


class TorchPlanMemo:
    """A kernel's launch plans for torch calls, one per call signature: the family's
    `torch_key(A, B, pa, pb, out)` (shapes, strides, dtypes, devices, each pointer's alignment,
    the output's), planned by its `_torch_plan(A, B, out, key)` on the signature's first call
    and kept in `_torch_calls`."""

    _torch_calls: dict

    @staticmethod
    def torch_key(A: Any, B: Any, pa: int, pb: int, out: Any) -> tuple:
        raise NotImplementedError

    def _torch_plan(self, A: Any, B: Any, out: Any, key: tuple) -> tuple:
        raise NotImplementedError

    def _torch_hit(self, A: Any, B: Any, pa: int, pb: int, out: Any) -> tuple:
        """The memo of a torch call's signature, planned on its first call."""
        key = self.torch_key(A, B, pa, pb, out)
        hit = self._torch_calls.get(key)
        return hit if hit is not None else self._torch_plan(A, B, out, key)


class RepeatCall:
    """A kernel's call k(A, B) on torch tensors of one signature, resolved once, for any later
    tensors of the same signature: shapes, strides, dtypes, devices and the 16-byte alignment
    class of each pointer (the caller keys it by them; kgen.matmul does). A call is the
    current stream's handle, a result from the kernel's batches (runtime.TorchResults),
    `go(pa, pb, pc, alpha, stream)`, the kernel's launches, and the next call's result made
    after them. `live` is a one-element list the
    kernel clears when it releases what the launches use (workspaces): the call then returns
    None and the caller goes the long way, which plans afresh."""

    __slots__ = ("_go", "_results", "_shape", "_dtype", "_device", "_live", "_stream")

    def __init__(self, go, results: runtime.TorchResults, shape: tuple, dtype: Any, device: int, live: list):
        self._go, self._results, self._shape, self._dtype = go, results, shape, dtype
        self._device, self._live = device, live
        self._stream = runtime.torch_stream

    def reshaped(self, shape: tuple) -> RepeatCall:
        """The same launches making results of `shape` (as many elements, in the same order):
        a batch of rows folded into one product returns them in the batch's shape."""
        return RepeatCall(self._go, self._results, shape, self._dtype, self._device, self._live)

    def __call__(self, A: Any, pa: int, pb: int, alpha: float) -> Any:
        if not self._live[0]:
            return None
        h = self._stream(self._device)
        results = self._results
        out = results.new(A, self._shape, self._device, h, self._dtype)
        self._go(pa, pb, out.data_ptr(), alpha, h)
        # The next call's result, made while this one's kernel runs.
        results.restock(A, self._shape, self._device, h, self._dtype, stream_capturing)
        return out


def default_arch() -> str:
    """The arch to compile for: $KGEN_ARCH, else the GPU's, else sm_90."""
    env = os.environ.get("KGEN_ARCH")
    if env:
        return check_arch(env)
    ok, _ = runtime.gpu_available()
    return runtime.device_arch() if ok else DEFAULT_ARCH


def compile(spec: Spec, arch: str | None = None) -> Compiled:  # noqa: A001 - the verb is the API
    """Render and compile `spec` to a cubin (no GPU needed). Cached in memory and on disk."""
    if not isinstance(spec, Spec):
        raise TypeError(f"compile() takes a kgen spec, got {type(spec).__name__}")
    return _compile_spec(spec, render(spec), arch or default_arch())


def is_compiled(spec: Spec, arch: str | None = None, *, disk_only: bool = False) -> bool:
    """Whether compile(spec, arch) would find its cubin in the memory or disk cache (renders
    the source, runs no nvcc); disk_only: in the disk cache, where another process finds it."""
    arch = arch or default_arch()
    return is_cached(render(spec), spec.target_arch(arch), spec.compile_options(), disk_only=disk_only)


def _compile_spec(spec: Spec, source: str, arch: str) -> Compiled:
    try:
        compiled = compile_cuda(source, spec.target_arch(arch), spec.compile_options())
    except CompileError as exc:
        # A family may know which of the user's inputs (a map expression, say) the
        # failure comes from; its explain_compile_error hook puts that first.
        explain = getattr(spec, "explain_compile_error", None)
        if explain is None:
            raise
        raise explain(exc) from None
    return dataclasses.replace(compiled, resources=launch_resources(spec, compiled.resources))


def launch_resources(spec: Spec, resources: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """ptxas' report per entry point with shared memory as a launch of `spec` uses it:
    static_shared_bytes (what ptxas counts), dynamic_shared_bytes (what the launch asks
    for) and shared_bytes, their sum per block. Applying it twice changes nothing."""
    out = {}
    for name, res in resources.items():
        static = res.get("static_shared_bytes", res.get("shared_bytes", 0))
        dynamic = spec.dynamic_shared_bytes(name)
        out[name] = {**res, "static_shared_bytes": static, "dynamic_shared_bytes": dynamic,
                     "shared_bytes": static + dynamic}
    return out


def sourcemodule_options(spec: Spec) -> list[str]:
    """nvcc options for pycuda.compiler.SourceModule(kgen.render(spec), no_extern_c=True,
    options=...): kgen's own code-generation flags and the spec's compile_options(). The
    rendered source needs no include path (it includes only the CUDA toolkit's headers),
    and ptxas' verbose report is left out (pycuda warns on any nvcc output)."""
    return ["-O3", "-std=c++17", *spec.compile_options()]


def _sourcemodule_compile(spec: Spec, source: str, arch: str) -> Compiled:
    """The cubin pycuda's SourceModule would load, from pycuda.compiler.compile (what
    SourceModule runs), cached by pycuda: no ptxas report and no kgen disk cache."""
    import hashlib

    from pycuda.compiler import compile as pycuda_compile

    options = sourcemodule_options(spec)
    cubin = pycuda_compile(source, options=options, no_extern_c=True, arch=arch)
    key = hashlib.sha256("\0".join([source, arch, *options]).encode()).hexdigest()[:24]
    return Compiled(cubin=cubin, arch=arch, key=key, resources={}, log="", origin="sourcemodule")


COMPILERS = ("kgen", "sourcemodule")
_built: dict[tuple[str, str, str, str], Kernel] = {}
_built_lock = threading.Lock()


def build(spec: Spec, compiler: str = "kgen") -> Kernel:
    """Compile (or fetch from the cache) and load `spec` for the current GPU.

    compiler="kgen" (the default) compiles through kgen.core.compiler: an atomic,
    checked, versioned disk cache and ptxas' report in kernel.resources.
    compiler="sourcemodule" compiles as pycuda's SourceModule does (pycuda's compiler
    and cache; kernel.resources is empty), for code that already relies on pycuda's.
    Needs pycuda and a CUDA device; raises runtime.NoGPUError saying which is missing.
    Equal specs give the same Kernel object within a process.
    """
    if not isinstance(spec, Spec):
        raise TypeError(f"build() takes a kgen spec (kgen.Matmul(...), kgen.Reduce(...)), got {type(spec).__name__}")
    if compiler not in COMPILERS:
        raise ValueError(f"compiler={compiler!r} is not allowed: one of {list(COMPILERS)}")
    runtime.driver()  # fail early, and clearly, without pycuda or a GPU
    arch = default_arch()
    memo = (type(spec).kernel, spec.key, arch, compiler)
    with _built_lock:
        hit = _built.get(memo)
    if hit is not None:
        return hit
    source = render(spec)
    if compiler == "sourcemodule":
        kernel = spec.kernel_class(spec, source, _sourcemodule_compile(spec, source, arch))
    elif spec.entry_units() and not is_cached(source, spec.target_arch(arch), spec.compile_options()):
        # Each entry point compiles on its first launch (Kernel._unit): a first call waits for
        # the one it launches. A whole module already in the cache (the tuner compiles whole
        # modules) is loaded as it is.
        kernel = spec.kernel_class(spec, source, None, arch)
    else:
        kernel = spec.kernel_class(spec, source, _compile_spec(spec, source, arch))
    with _built_lock:
        _built.setdefault(memo, kernel)
        return _built[memo]
