"""Loading cubins and launching kernels through pycuda, on the device's primary context.

Using the primary context (not a context of our own) lets kgen share one GPU, and
one set of allocations, with torch, CuPy and Numba in the same process.
"""
from __future__ import annotations

import dataclasses
import os
import sys
import threading
from typing import Any, Callable, Sequence

import numpy as np


class NoGPUError(RuntimeError):
    """pycuda or a CUDA device is missing."""


class ArrayError(ValueError):
    """An argument's shape, dtype, layout or location does not fit the kernel."""


_state: dict[str, Any] = {}
_lock = threading.Lock()


def switch_setting(name: str, on: str, off: str) -> bool:
    """The on/off setting in environment variable `name`: on when unset or 1, true, yes or on
    (any case, spaces around ignored), off for 0, false, no or off; any other value raises
    ValueError saying what each does (`on`, `off`: what the setting does either way)."""
    raw = os.environ.get(name)
    if raw is None:
        return True
    word = raw.strip().lower()
    if word in ("1", "true", "yes", "on"):
        return True
    if word in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r} is not allowed: 0, false, no or off {off}; 1, true, yes, on or unset {on}")


def _probe():
    """(pycuda.driver, the chosen Device), initialised but with no context made current.

    Asking which GPU is present (its arch, limits, name) must not push a context: a
    compile worker thread that did so would leave it on that thread's context stack,
    and pycuda aborts at exit when a stack is not empty.
    """
    if "dev" in _state:
        return _state["drv_module"], _state["dev"]
    with _lock:
        if "dev" in _state:
            return _state["drv_module"], _state["dev"]
        try:
            import pycuda.driver as drv
        except ImportError as exc:
            raise NoGPUError(
                f"pycuda is not importable ({exc}); install it with pip install 'kgen[cuda]' on a machine "
                "with the CUDA toolkit. Rendering, emitting and compiling work without it."
            ) from None
        try:
            drv.init()
            count = drv.Device.count()
        except Exception as exc:  # pycuda raises its own LogicError/RuntimeError types
            raise NoGPUError(f"the CUDA driver could not start: {exc}") from None
        if count == 0:
            raise NoGPUError("no CUDA device is present")
        import os

        try:
            index = int(os.environ.get("KGEN_DEVICE", "0"))
        except ValueError:
            raise NoGPUError(f"KGEN_DEVICE={os.environ['KGEN_DEVICE']!r} is not a device number") from None
        if not 0 <= index < count:
            raise NoGPUError(f"KGEN_DEVICE={index} but only {count} CUDA device(s) exist")
        _state.update(drv_module=drv, dev=drv.Device(index))
        return drv, _state["dev"]


def driver():
    """pycuda.driver with the primary context of device 0 (or $KGEN_DEVICE) current."""
    if "ctx" in _state:
        if _state["drv_module"].Context.get_current() is None:
            _state["ctx"].push()
        return _state["drv_module"]
    drv, dev = _probe()
    with _lock:
        if "ctx" not in _state:
            ctx = dev.retain_primary_context()
            ctx.push()
            import atexit

            atexit.register(_release)
            _state["ctx"] = ctx
    return drv


def _release() -> None:
    ctx = _state.get("ctx")
    if ctx is not None:
        try:
            ctx.pop()
        except Exception:
            pass


def device():
    return _probe()[1]


def device_arch() -> str:
    major, minor = device().compute_capability()
    return f"sm_{major}{minor}"


def device_limits() -> dict[str, int]:
    drv, dev = _probe()
    a = drv.device_attribute
    major, minor = dev.compute_capability()
    return {
        "compute_capability": 10 * major + minor,
        "max_threads_per_block": dev.get_attribute(a.MAX_THREADS_PER_BLOCK),
        "max_shared_per_block_optin": dev.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        "multiprocessors": dev.get_attribute(a.MULTIPROCESSOR_COUNT),
        "l2_bytes": dev.get_attribute(a.L2_CACHE_SIZE),
    }


_sm_limits: dict[str, int] = {}


def resident_blocks(fn, threads: int, dynamic_shared: int = 0) -> int:
    """How many blocks of `fn` (threads each, plus dynamic_shared bytes) one SM holds at
    once: the least of the register, shared-memory, thread and block limits."""
    if not _sm_limits:
        drv, dev = _probe()
        a = drv.device_attribute
        _sm_limits.update(
            regs=dev.get_attribute(a.MAX_REGISTERS_PER_MULTIPROCESSOR),
            shared=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            reserved=dev.get_attribute(a.RESERVED_SHARED_MEMORY_PER_BLOCK),
            threads=dev.get_attribute(a.MAX_THREADS_PER_MULTIPROCESSOR),
            blocks=dev.get_attribute(a.MAX_BLOCKS_PER_MULTIPROCESSOR))
    lim = _sm_limits
    fa = driver().function_attribute
    warps = -(-threads // 32)
    # Registers are handed out per warp in units of 256.
    regs_per_warp = -(-max(fn.get_attribute(fa.NUM_REGS), 1) * 32 // 256) * 256
    shared = fn.get_attribute(fa.SHARED_SIZE_BYTES) + dynamic_shared + lim["reserved"]
    return max(0, min(lim["blocks"], lim["threads"] // (warps * 32), lim["regs"] // (regs_per_warp * warps),
                      lim["shared"] // shared))


def gpu_available() -> tuple[bool, str]:
    """(True, device name) or (False, the reason)."""
    try:
        return True, device().name()
    except NoGPUError as exc:
        return False, str(exc)


class Module:
    """A loaded cubin. Functions are looked up once and kept."""

    def __init__(self, cubin: bytes):
        drv = driver()
        self._module = drv.module_from_buffer(cubin)
        self._functions: dict[str, Any] = {}

    def function(self, name: str, dynamic_shared: int = 0):
        fn = self._functions.get(name)
        if fn is None:
            fn = self._module.get_function(name)
            self._functions[name] = fn
        if dynamic_shared > 48 * 1024:
            # Past 48 KiB a kernel must opt in to dynamic shared memory.
            attr = driver().function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
            if fn.get_attribute(attr) < dynamic_shared:
                fn.set_attribute(attr, dynamic_shared)
        return fn


def launch(fn, grid: Sequence[int], block: Sequence[int], args: Sequence[Any], shared: int = 0,
           stream=None) -> None:
    """Launch and raise a clear error if the launch is refused."""
    drv = driver()
    try:
        fn(*args, grid=tuple(int(g) for g in grid), block=tuple(int(b) for b in block),
           shared=int(shared), stream=stream)
    except drv.Error as exc:
        raise RuntimeError(f"kernel launch failed (grid={tuple(grid)}, block={tuple(block)}, "
                           f"shared={shared} bytes): {exc}") from None


# ---------------------------------------------------------------------------------
# Arrays: numpy on the host; pycuda GPUArray or anything with __cuda_array_interface__
# on the device. Device arrays are used in place; host arrays are copied in and out.
# ---------------------------------------------------------------------------------

@dataclasses.dataclass
class DeviceView:
    """A device buffer as a kernel sees it: pointer, shape, element strides, dtype."""

    ptr: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # in elements
    dtype: np.dtype
    owner: Any  # the user's object (kept alive, and returned for out=)
    on_host: bool = False
    host: np.ndarray | None = None  # for host inputs: where results are copied back


def numpy_dtype(name: str) -> np.dtype | None:
    """The numpy dtype of a kgen dtype name; bfloat16 only where ml_dtypes is importable
    (else None: bfloat16 data then lives on the device, in torch tensors)."""
    try:
        return np.dtype(name)
    except TypeError:
        try:
            import ml_dtypes
        except ImportError:
            return None
        found = getattr(ml_dtypes, name, None)
        return np.dtype(found) if found is not None else None


def is_device_array(x: Any) -> bool:
    return hasattr(x, "__cuda_array_interface__") or _is_gpuarray(x)


def _is_gpuarray(x: Any) -> bool:
    return type(x).__name__ == "GPUArray" and hasattr(x, "gpudata")


def _library(x: Any) -> str:
    mod = type(x).__module__.split(".")[0]
    return mod if mod in ("torch", "cupy", "numba") else "pycuda"


def _dense_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides, counting empty dimensions as 1 long."""
    out, acc = [], 1
    for s in reversed(shape):
        out.append(acc)
        acc *= max(int(s), 1)
    return tuple(reversed(out))


def view(x: Any, name: str) -> DeviceView:
    """Describe a device array without copying it."""
    v = _view(x, name)
    if v.ptr % v.dtype.itemsize:
        # Every kernel reads whole elements; one that straddles its own size faults on the GPU.
        raise ArrayError(f"{name} starts at address {v.ptr:#x}, which is not a multiple of its element size "
                         f"({v.dtype.itemsize} bytes for {v.dtype}); pass an array whose data is element-aligned")
    if 0 in v.shape:
        # An empty array addresses no element, and libraries report its strides as 0 (or
        # anything); row-major strides let the families' layout checks accept it.
        v.strides = _dense_strides(v.shape)
    return v


def _view(x: Any, name: str) -> DeviceView:
    if _is_gpuarray(x):
        itemsize = x.dtype.itemsize
        strides = tuple(s // itemsize for s in x.strides)
        # pycuda leaves gpudata as None for an empty array.
        ptr = 0 if x.gpudata is None else int(x.gpudata)
        return DeviceView(ptr, tuple(x.shape), strides, np.dtype(x.dtype), x)
    if hasattr(x, "__cuda_array_interface__"):
        cai = x.__cuda_array_interface__
        dtype = np.dtype(cai["typestr"])
        shape = tuple(int(s) for s in cai["shape"])
        if cai.get("strides") is None:
            strides = _dense_strides(shape)
        else:
            if any(s % dtype.itemsize for s in cai["strides"]):
                raise ArrayError(f"{name} has strides {cai['strides']} that are not whole elements")
            strides = tuple(int(s) // dtype.itemsize for s in cai["strides"])
        if cai.get("mask") is not None:
            raise ArrayError(f"{name} is a masked array; kgen takes plain device arrays")
        return DeviceView(int(cai["data"][0]), shape, strides, dtype, x)
    raise ArrayError(f"{name} is a {type(x).__name__}; expected a numpy array, a pycuda GPUArray "
                     "or an object with __cuda_array_interface__ (torch, CuPy, Numba)")


def split_host_device(arrays: dict[str, Any]) -> bool:
    """True if every named array is on the host, False if every one is on the device.
    A mix is an error named before anything is launched."""
    kinds = {n: ("device" if is_device_array(a) else "host") for n, a in arrays.items() if a is not None}
    for n, a in arrays.items():
        if a is not None and kinds[n] == "host" and not isinstance(a, np.ndarray):
            raise ArrayError(f"{n} is a {type(a).__name__}; expected a numpy array or a device array")
    if len(set(kinds.values())) > 1:
        listing = ", ".join(f"{n} on the {k}" for n, k in kinds.items())
        raise ArrayError(f"host and device arrays are mixed ({listing}); pass all numpy arrays or all device arrays")
    return set(kinds.values()) != {"device"}


def to_device(a: np.ndarray, name: str) -> DeviceView:
    """Copy a host array to a fresh device buffer (keeping its element strides)."""
    from pycuda import gpuarray

    driver()
    if a.size and not (a.flags.c_contiguous or a.flags.f_contiguous):
        a = np.ascontiguousarray(a)
    g = gpuarray.to_gpu(a) if a.size else gpuarray.empty(a.shape, a.dtype)
    v = view(g, name)
    v.on_host = True
    return v


def empty_like_library(template: Any, shape: tuple[int, ...], dtype: np.dtype):
    """A new device array from the same library as `template` (torch in, torch out)."""
    lib = _library(template)
    if lib == "torch":
        import torch

        tdt = {np.dtype("float32"): torch.float32, np.dtype("float64"): torch.float64,
               np.dtype("int32"): torch.int32, np.dtype("float16"): torch.float16}[np.dtype(dtype)]
        return torch.empty(shape, dtype=tdt, device=template.device)
    if lib == "cupy":
        import cupy

        return cupy.empty(shape, dtype=dtype)
    from pycuda import gpuarray

    driver()
    return gpuarray.empty(shape, dtype)


def new_host_output(shape: tuple[int, ...], dtype: np.dtype) -> DeviceView:
    from pycuda import gpuarray

    driver()
    g = gpuarray.empty(shape, dtype)
    v = view(g, "out")
    v.on_host = True
    return v


def copy_back(v: DeviceView) -> np.ndarray:
    return v.owner.get()


# ---------------------------------------------------------------------------------
# Interop on the hot path: torch tensors through their own accessors, and the stream a
# call runs on (the caller's library's current stream unless stream= names one).
# ---------------------------------------------------------------------------------
_torch: dict[str, Any] = {}


def torch_tensor_type():
    """torch.Tensor if torch is already imported (kgen never imports it for this), else None."""
    t = _torch.get("Tensor")
    if t is None:
        import sys

        mod = sys.modules.get("torch")
        if mod is None:
            return None
        t = _torch["Tensor"] = mod.Tensor
    return t


def torch_device_index(t: Any, name: str) -> int:
    """The CUDA device of a torch tensor; a CPU tensor or another GPU than kgen's is an error."""
    index = t.get_device()
    if index < 0:
        raise ArrayError(f"{name} is a CPU torch tensor; pass a CUDA tensor or a numpy array")
    ours = device_index()
    if index != ours:
        raise ArrayError(f"{name} is on cuda:{index} but kgen runs on device {ours} (set KGEN_DEVICE={index})")
    return index


def device_index() -> int:
    import os

    return int(os.environ.get("KGEN_DEVICE", "0") or 0)


class TorchResults:
    """New torch tensors for the results of repeat calls, made in batches: one allocation and
    one unbind() give up to `most` results of one shape, dtype, device and stream (each
    starting on a 16-byte boundary), so a call pays a list pop instead of new_empty (2-7 µs
    of a 15-30 µs call on H100 and H200 hosts; docs/dispatch.md). Each result is the caller's
    alone, but a batch's memory (at most `batch_bytes`) lives until its last result is freed,
    so only shapes of which at least `least` fit in `batch_bytes` are batched, and a result
    kept alone holds at most `batch_bytes`. The default, 4 MiB, batches results up to 1 MiB
    (a few-row product's: 64 x 8192 bfloat16), which a new_empty a call after each launch
    kept 5 µs longer on the host (docs/dispatch.md, "Results up to 1 MiB in batches"). Larger
    results of at most `spare_bytes` are made one at a time, by `restock` after the call's
    launch: the next call's result waits ready (one spare for each of at most `spares`
    signatures), so new_empty is off the path to the launch. restock makes nothing while the
    stream captures a CUDA graph: memory from the graph's pool is not handed to later calls.
    The stream is part of the key and a batch or spare is allocated while that stream is
    current: torch's caching allocator then reuses the memory only in that stream's order,
    as it does for new_empty. `dtype` (default: like's) is the results' torch dtype."""

    def __init__(self, batch_bytes: int = 4 << 20, most: int = 256, least: int = 4,
                 spare_bytes: int = 4 << 20, spares: int = 16):
        self._pools: dict[tuple, list] = {}
        self._spares: dict[tuple, Any] = {}
        self._unstocked: set[tuple] = set()   # signatures with neither batches nor spares
        self._item_bytes: dict[Any, int] = {}
        self._batch_bytes, self._most, self._least = batch_bytes, most, least
        self._spare_bytes, self._spare_count = spare_bytes, spares

    def new(self, like: Any, shape: tuple, device: int, stream: int, dtype: Any = None) -> Any:
        key = (device, like.dtype if dtype is None else dtype, shape, stream)
        pool = self._pools.get(key)
        if pool:
            return pool.pop()
        spare = self._spares.pop(key, None)
        if spare is not None:
            return spare
        if key not in self._unstocked and self._stock(key, like, shape, False):
            return self._pools[key].pop()
        return like.new_empty(shape, dtype=key[1])

    def restock(self, like: Any, shape: tuple, device: int, stream: int, dtype: Any,
                capturing: Callable[[int], bool]) -> None:
        """Make the next result of this signature now (after a launch, while the kernel runs):
        a new batch when the last one is used up, else a spare where results are not batched;
        nothing while `capturing(stream)` (kgen.core.launch.stream_capturing) says the stream
        captures a graph. `dtype` None: like's."""
        key = (device, like.dtype if dtype is None else dtype, shape, stream)
        if not self._pools.get(key) and key not in self._spares and key not in self._unstocked \
                and not capturing(stream):
            self._stock(key, like, shape, True)

    def _stock(self, key: tuple, like: Any, shape: tuple, spare: bool) -> bool:
        """Put a batch of results of `key` in its pool (True), or with `spare` one result of at
        most spare_bytes among the spares (False); False where neither applies."""
        dtype = key[1]
        item = self._item_bytes.get(dtype)
        if item is None:
            item = self._item_bytes[dtype] = (like.new_empty((), dtype=dtype).element_size() if dtype != like.dtype
                                              else like.element_size())
        n = 1
        for d in shape:
            n *= d
        span = -(-n * item // 16) * 16 // item    # elements from one result's start to the next
        count = min(self._most, self._batch_bytes // (span * item)) if n else 0
        if count < self._least:
            if not n or n * item > self._spare_bytes:
                if len(self._unstocked) >= 256:
                    self._unstocked.clear()
                self._unstocked.add(key)
            elif spare:
                if len(self._spares) >= self._spare_count:
                    self._spares.clear()
                self._spares[key] = like.new_empty(shape, dtype=dtype)
            return False
        strides: list[int] = []
        step = 1
        for d in reversed(shape):
            strides.insert(0, step)
            step *= d
        flat = like.new_empty((count * span,), dtype=dtype)
        if len(self._pools) >= 64:
            self._pools.clear()
        self._pools[key] = list(flat.as_strided((count, *shape), (span, *strides)).unbind(0))
        return True


class TorchBuffer:
    """Device memory held by a torch tensor, with the two things kgen asks of a pycuda
    allocation: int() is its address, free() lets it go."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: Any):
        self.tensor = tensor

    def __int__(self) -> int:
        return int(self.tensor.data_ptr()) if self.tensor is not None else 0

    def free(self) -> None:
        self.tensor = None


def torch_capturing() -> bool:
    """Whether torch's current stream on kgen's device is capturing a CUDA graph. Only
    torch captures are seen; a graph captured through the driver or CuPy is not, and
    there a first call that needs a workspace fails with the driver's message."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return False
    with torch.cuda.device(device_index()):
        return bool(torch.cuda.is_current_stream_capturing())


def device_buffer(nbytes: int, zeroed: bool = False) -> Any:
    """Device memory for a kernel's workspace: cuMemAlloc, or, while torch's current stream
    captures a CUDA graph (where cuMemAlloc is not permitted), a torch allocation, which the
    caching allocator takes from the graph's private pool so that every replay finds it.
    zeroed: its bytes are zero when it is returned (a kernel's flags that each launch leaves
    zero again): zeroed and the device synchronized before the call returns (so that a launch
    on any stream, blocking or not, finds the zeros), or, while a capture runs, by torch's fill
    on the capturing stream, which the graph then repeats at each replay."""
    nbytes = max(nbytes, 16)
    if torch_capturing():
        import torch

        make = torch.zeros if zeroed else torch.empty
        return TorchBuffer(make(nbytes, dtype=torch.uint8, device=f"cuda:{device_index()}"))
    drv = driver()
    held = drv.mem_alloc(nbytes)
    if zeroed:
        drv.memset_d8(held, 0, nbytes)
        drv.Context.synchronize()
    return held


def torch_stream(device: int) -> int:
    """torch's current stream on a device as a raw handle (torch.cuda.current_stream()
    costs microseconds; torch's raw accessor a fraction of one)."""
    raw = _torch.get("stream")
    if raw is None:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if raw is None:
            def raw(index: int) -> int:
                return torch.cuda.current_stream(index).cuda_stream
        _torch["stream"] = raw
    return raw(device)


def stream_handle(stream: Any) -> int:
    """A raw CUstream from what a user passes as stream=: None (the default stream), an
    int, a pycuda Stream (handle), a torch Stream (cuda_stream) or a CuPy Stream (ptr)."""
    if stream is None:
        return 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    for attr in ("handle", "cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    raise ArrayError(f"stream={stream!r} is not a stream: pass a pycuda, torch or CuPy stream, "
                     "or a raw CUstream handle (int)")


def library_stream(x: Any, stream: Any) -> int:
    """The stream a call on array x runs on: stream= if given, else the current stream of
    x's library (torch, CuPy), else the default stream."""
    if stream is not None:
        return stream_handle(stream)
    lib = type(x).__module__.split(".")[0]
    if lib == "torch" and hasattr(x, "get_device"):
        index = x.get_device()
        return torch_stream(index) if index >= 0 else 0
    if lib == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return 0
