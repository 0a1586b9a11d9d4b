"""Thin kernel launches: cuLaunchKernel through ctypes, with arguments packed into one buffer.

A repeat call of a kgen kernel should cost little more than the driver's launch. pycuda's
prepared calls build a Python tuple of grid and block, wrap the stream and go through
pycuda's argument handling on every call; here a `Launch` fixes the function, the
geometry and the argument format once, and a call is one `struct.pack_into` and one
foreign call. Streams are raw handles (ints), so a torch or CuPy stream is used as it is.

libcuda is opened as a `ctypes.PyDLL`: the call holds the GIL, so packing the shared
argument buffer and launching from it cannot interleave with another thread's launch
of the same `Launch`. cuLaunchKernel is called without argtypes, on ctypes objects made
once (the function, the argument buffer, one per stream): converting eleven arguments
through argtypes on every call cost 1.3 µs of an 8.4 µs launch on an H100 host
(docs/dispatch.md, "The launch API").

A `Launch` made with programmatic=True goes through cuLaunchKernelEx with programmatic stream
serialization: on an sm_90 GPU the kernel may start while the kernel before it on the stream
finishes, so its set-up (barriers, descriptors) overlaps that kernel's last blocks. Only a
kernel that executes `griddepcontrol.wait` before its first global memory access may be
launched so (the wait holds it until the kernels before it are complete and their writes
visible); KGEN_PDL=0 turns these launches back into plain ones (programmatic_launches).
"""
from __future__ import annotations

import ctypes
import re
import struct
import threading
from typing import Any

from . import runtime

_CU_LAUNCH_PARAM_END = 0
_CU_LAUNCH_PARAM_BUFFER_POINTER = 1
_CU_LAUNCH_PARAM_BUFFER_SIZE = 2

_lib: list[Any] = []
_lib_lock = threading.Lock()
_ready = threading.local()
_streams: dict[int, ctypes.c_void_p] = {}


# CUlaunchAttributeID: the kernel may start before the previous one on its stream completes
# (it synchronises with griddepcontrol.wait).
_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


class _LaunchAttribute(ctypes.Structure):
    """CUlaunchAttribute: an id, padding to 8 bytes and a 64-byte value union (of which
    programmaticStreamSerializationAllowed is the first int)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_int),
                ("value_rest", ctypes.c_char * 60)]


class _LaunchConfig(ctypes.Structure):
    """CUlaunchConfig (cuLaunchKernelEx's first argument)."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("numAttrs", ctypes.c_uint)]


def programmatic_launches() -> bool:
    """Whether kernels that wait for their predecessors with griddepcontrol.wait are launched
    with programmatic stream serialization (KGEN_PDL, on unless 0/false/no/off)."""
    return runtime.switch_setting("KGEN_PDL", "let kernels that wait for the kernel before them start while "
                                  "it finishes", "launch every kernel plainly")


def _stream_arg(stream: int) -> ctypes.c_void_p:
    """The CUstream handle `stream` as the ctypes object cuLaunchKernel takes, made once."""
    arg = _streams.get(stream)
    if arg is None:
        if len(_streams) >= 256:
            _streams.clear()
        arg = _streams[stream] = ctypes.c_void_p(stream)
    return arg


class LaunchError(RuntimeError):
    """The driver refused a launch (bad geometry, too much shared memory, a lost context)."""


def _libcuda():
    if _lib:
        return _lib[0]
    with _lib_lock:
        if not _lib:
            try:
                lib = ctypes.PyDLL("libcuda.so.1")
            except OSError as exc:
                raise runtime.NoGPUError(f"the CUDA driver library libcuda.so.1 could not be loaded: {exc}") from None
            lib.cuLaunchKernel.restype = ctypes.c_int   # no argtypes: see the module docstring
            if hasattr(lib, "cuLaunchKernelEx"):   # CUDA 11.8 drivers and newer
                lib.cuLaunchKernelEx.restype = ctypes.c_int
            lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            lib.cuGetErrorString.restype = ctypes.c_int
            lib.cuModuleLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p]
            lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_char_p]
            lib.cuModuleUnload.argtypes = [ctypes.c_void_p]
            lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
            lib.cuFuncGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_void_p]
            lib.cuFuncGetParamInfo.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                               ctypes.POINTER(ctypes.c_size_t)]
            lib.cuFuncGetParamInfo.restype = ctypes.c_int
            lib.cuMemsetD32Async.argtypes = [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t, ctypes.c_void_p]
            lib.cuStreamIsCapturing.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
            for name in ("cuMemsetD32Async", "cuStreamIsCapturing", "cuModuleLoadData", "cuModuleGetFunction",
                         "cuModuleUnload", "cuFuncSetAttribute", "cuFuncGetAttribute"):
                getattr(lib, name).restype = ctypes.c_int
            _lib.append(lib)
    return _lib[0]


def error_text(code: int) -> str:
    text = ctypes.c_char_p()
    if _libcuda().cuGetErrorString(code, ctypes.byref(text)) == 0 and text.value:
        return f"{text.value.decode()} (CUresult {code})"
    return f"CUresult {code}"


def _check(code: int, what: str) -> None:
    if code:
        raise LaunchError(f"{what} failed: {error_text(code)}")


_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_PREFERRED_CARVEOUT = 9  # CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT (percent of the most)
MOST_SHARED = 100        # that attribute's value for the most shared memory (CU_SHAREDMEM_CARVEOUT_MAX_SHARED)
# CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH/HEIGHT/DEPTH: a kernel's compile-time __cluster_dims__.
_CLUSTER_DIMS = (11, 12, 13)
_NON_PORTABLE_CLUSTER = 14  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
# The most blocks a cluster may hold on every GPU with clusters; sm_90 allows up to 16 once a
# kernel opts in to a non-portable size.
PORTABLE_CLUSTER_BLOCKS = 8


def cluster_blocks(lib, fn: int) -> int:
    """The blocks of the compile-time cluster of CUfunction `fn` (1 for a kernel without one, or
    where the driver cannot say)."""
    blocks = 1
    value = ctypes.c_int()
    for attribute in _CLUSTER_DIMS:
        if lib.cuFuncGetAttribute(ctypes.byref(value), attribute, ctypes.c_void_p(fn)) != 0:
            return 1
        blocks *= max(1, int(value.value))
    return blocks


class DriverModule:
    """A cubin loaded through the driver API, for launches by handle. (pycuda keeps its
    function handles private, so the launch path loads its own copy of the module.)"""

    def __init__(self, cubin: bytes):
        ensure_context()
        lib = _libcuda()
        handle = ctypes.c_void_p()
        _check(lib.cuModuleLoadData(ctypes.byref(handle), cubin), "loading the cubin (cuModuleLoadData)")
        self._lib = lib
        self._handle = handle
        self._functions: dict[str, int] = {}
        self._shared: dict[str, int] = {}
        self._carveouts: dict[str, int] = {}

    def function(self, name: str, dynamic_shared: int = 0, carveout: int | None = None) -> int:
        """The CUfunction `name`, opted in to `dynamic_shared` bytes of shared memory, and with
        `carveout` (0-100: percent of the most shared memory an SM has) as its preferred split
        of the SM's memory between L1 and shared memory where given."""
        fn = self._functions.get(name)
        if fn is None:
            out = ctypes.c_void_p()
            _check(self._lib.cuModuleGetFunction(ctypes.byref(out), self._handle, name.encode()),
                   f"looking up kernel {name}")
            fn = self._functions[name] = int(out.value or 0)
            if cluster_blocks(self._lib, fn) > PORTABLE_CLUSTER_BLOCKS:
                # A cluster past the portable size launches only once the kernel opts in.
                _check(self._lib.cuFuncSetAttribute(ctypes.c_void_p(fn), _NON_PORTABLE_CLUSTER, 1),
                       f"allowing {name} a cluster of more than {PORTABLE_CLUSTER_BLOCKS} blocks")
        if carveout is not None and self._carveouts.get(name) != carveout:
            _check(self._lib.cuFuncSetAttribute(ctypes.c_void_p(fn), _PREFERRED_CARVEOUT, int(carveout)),
                   f"setting the shared memory carveout of {name} to {carveout}%")
            self._carveouts[name] = carveout
        if dynamic_shared > 48 * 1024 and self._shared.get(name, 0) < dynamic_shared:
            # Past 48 KiB a kernel must opt in to dynamic shared memory.
            _check(self._lib.cuFuncSetAttribute(ctypes.c_void_p(fn), _MAX_DYNAMIC_SHARED, int(dynamic_shared)),
                   f"allowing {dynamic_shared} bytes of shared memory for {name}")
            self._shared[name] = dynamic_shared
        return fn

    def __del__(self) -> None:
        try:
            self._lib.cuModuleUnload(self._handle)
        except Exception:  # noqa: BLE001 - at interpreter exit the driver may be gone
            pass


def write_words_async(address: int, data: bytes, stream: int) -> None:
    """Write `data` (a whole number of 32-bit words) to device memory at `address` in the
    order of `stream`, one cuMemsetD32Async per run of equal words: no host buffer, so it
    may be captured into a CUDA graph, where it runs again at every replay."""
    if len(data) % 4:
        raise ValueError(f"write_words_async writes whole 32-bit words, not {len(data)} bytes")
    ensure_context()
    lib = _libcuda()
    words = struct.unpack(f"<{len(data) // 4}I", data)
    start = 0
    while start < len(words):
        end = start + 1
        while end < len(words) and words[end] == words[start]:
            end += 1
        _check(lib.cuMemsetD32Async(address + 4 * start, words[start], end - start, ctypes.c_void_p(stream)),
               "writing a workspace (cuMemsetD32Async)")
        start = end


def stream_capturing(stream: int) -> bool:
    """Whether `stream` (a raw handle) is capturing a CUDA graph, whoever captures it
    (cuStreamIsCapturing: a status other than none, an invalidated capture included)."""
    status = ctypes.c_int(0)
    _check(_libcuda().cuStreamIsCapturing(_stream_arg(stream), ctypes.byref(status)),
           "asking whether a stream captures a graph (cuStreamIsCapturing)")
    return status.value != 0


_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1


def capture_id(stream: int) -> int:
    """The id of the CUDA graph capture that `stream` (a raw handle) takes part in, 0 where it
    captures none (cuStreamGetCaptureInfo; an invalidated capture counts as none). Calls of
    one capture on one stream run in order at every replay, so they may share a workspace
    that no other capture or eager call touches."""
    lib = _libcuda()
    status, cid = ctypes.c_int(0), ctypes.c_uint64(0)
    # The newest entry point the driver has: _v3 and _v2 add optional outputs (NULL here).
    for name, extra in (("cuStreamGetCaptureInfo_v3", 4), ("cuStreamGetCaptureInfo_v2", 3),
                        ("cuStreamGetCaptureInfo", 0)):
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype = ctypes.c_int
            _check(fn(_stream_arg(stream), ctypes.byref(status), ctypes.byref(cid), *([None] * extra)),
                   f"asking which graph capture a stream takes part in ({name})")
            return int(cid.value) if status.value == _CU_STREAM_CAPTURE_STATUS_ACTIVE else 0
    raise LaunchError("the CUDA driver has no cuStreamGetCaptureInfo")


def ensure_context() -> None:
    """Make kgen's context current on this thread once; later launches skip the check."""
    if not getattr(_ready, "ok", False):
        runtime.driver()
        _ready.ok = True


def _param_layout(fn: int, fmt: str) -> str:
    """A struct format for `fmt`'s parameters at the offsets the driver reports for the
    kernel `fn`: explicit pad bytes, no implicit alignment."""
    codes = re.findall(r"(\d*)([a-zA-Z?])", fmt)
    lib = _libcuda()
    out, pos = ["="], 0
    for i, (count, code) in enumerate(codes):
        code = "Q" if code == "P" else code   # "=" formats have no native pointer
        off, size = ctypes.c_size_t(), ctypes.c_size_t()
        _check(lib.cuFuncGetParamInfo(fn, i, ctypes.byref(off), ctypes.byref(size)), f"cuFuncGetParamInfo({i})")
        want = struct.calcsize("=" + count + code)
        if size.value != want or off.value < pos:
            raise LaunchError(f"parameter {i} of the kernel is {size.value} bytes at offset {off.value}; the launch "
                              f"format {fmt!r} gives {want} bytes after offset {pos}")
        out.append(f"{off.value - pos}x" if off.value > pos else "")
        out.append(count + code)
        pos = off.value + size.value
    return "".join(out)


class Launch:
    """One kernel (a CUfunction handle, from DriverModule.function) with its grid, block,
    dynamic shared memory and argument format fixed.

    `fmt` is a struct format in native alignment ("P" pointer, "q" int64, "i" int32,
    "f"/"d" float/double), which is how the CUDA ABI lays out scalar kernel parameters.
    A by-value block of bytes ("128s": a CUtensorMap) may need more alignment than struct
    gives it (the compiler aligns such a parameter's address in the constant bank, not
    its offset in the list), so formats with one take their offsets from the driver
    (cuFuncGetParamInfo). Calling it with (stream handle, *arguments) launches once.
    """

    __slots__ = ("name", "grid", "block", "shared", "_pack", "_buf", "_size", "_extra", "_go", "_geom", "_fn_arg",
                 "_extra_arg", "programmatic", "_config", "_attr", "_config_arg")

    def __init__(self, fn: int, name: str, grid: tuple[int, int, int], block: tuple[int, int, int], shared: int,
                 fmt: str, programmatic: bool = False):
        self.name = name
        self.grid = tuple(int(g) for g in grid)
        self.block = tuple(int(b) for b in block)
        self.shared = int(shared)
        packer = struct.Struct(_param_layout(fn, fmt) if "s" in fmt else "@" + fmt)
        self._pack = packer.pack_into
        self._buf = (ctypes.c_char * max(packer.size, 8))()
        self._size = ctypes.c_size_t(packer.size)
        self._extra = (ctypes.c_void_p * 5)(_CU_LAUNCH_PARAM_BUFFER_POINTER, ctypes.addressof(self._buf),
                                            _CU_LAUNCH_PARAM_BUFFER_SIZE, ctypes.addressof(self._size),
                                            _CU_LAUNCH_PARAM_END)
        self._go = _libcuda().cuLaunchKernel
        if not isinstance(fn, int):
            raise TypeError(f"Launch takes a CUfunction handle (Kernel.handle(name, shared)), got {type(fn).__name__}")
        self._geom = (*self.grid, *self.block, self.shared)
        self._fn_arg = ctypes.c_void_p(fn)
        self._extra_arg = ctypes.c_void_p(ctypes.addressof(self._extra))
        # programmatic: the kernel waits for its predecessors itself (griddepcontrol.wait). A driver
        # without cuLaunchKernelEx launches it plainly, which the wait does not mind.
        launch_ex = getattr(_libcuda(), "cuLaunchKernelEx", None) if programmatic else None
        self.programmatic = launch_ex is not None
        self._config = self._attr = self._config_arg = None
        if self.programmatic:
            self._attr = _LaunchAttribute(id=_CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, value=1)
            self._config = _LaunchConfig(*self.grid, *self.block, self.shared, None, ctypes.pointer(self._attr), 1)
            self._config_arg = ctypes.byref(self._config)
            self._go = launch_ex

    def __call__(self, stream: int, *args: Any) -> None:
        self._pack(self._buf, 0, *args)
        s = _streams.get(stream)
        if s is None:
            s = _stream_arg(stream)
        if self._config is None:
            code = self._go(self._fn_arg, *self._geom, s, None, self._extra_arg)
        else:
            self._config.hStream = s.value
            code = self._go(self._config_arg, self._fn_arg, None, self._extra_arg)
        if code:
            raise LaunchError(f"launch of {self.name} (grid={self.grid}, block={self.block}, shared={self.shared} "
                              f"bytes) failed: {error_text(code)}")
