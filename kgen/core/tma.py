"""Tensor-memory-accelerator descriptors (CUtensorMap) for Hopper kernels.

A TMA copy names its global source by a 128-byte descriptor that the driver encodes on
the host (cuTensorMapEncodeTiled) and the kernel receives as a `__grid_constant__`
parameter. The descriptor holds the base address, so it is encoded per pointer; this
module encodes 2-D tiled descriptors through ctypes and returns their bytes, ready to be
packed into a kernel's argument buffer ("128s" in kgen.core.launch's formats).
"""
from __future__ import annotations

import ctypes
import threading
from typing import Any

from .launch import LaunchError, _libcuda, error_text

# CUtensorMapDataType values for the element types kgen's kernels copy with TMA.
DATA_TYPE = {"float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
ITEMSIZE = {"float16": 2, "float32": 4, "float64": 8, "bfloat16": 2}
# CUtensorMapSwizzle: shared-memory rows of 32, 64 or 128 bytes, 16-byte chunks XOR-permuted
# by the row index within each group of 8 rows (the layouts wgmma reads).
SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}
_INTERLEAVE_NONE = 0
# CUtensorMapL2promotion by the bytes each request is widened to in L2.
L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}
# The descriptors' promotion: 128 bytes, one swizzled row of a box. 256 ran level with it
# (1.002x over 32 few-row bfloat16 products on an H200, docs/bench/research/tensorcore16_stream_sweep.py
# with PROMOTIONS=128,256).
l2_promotion_bytes = 128
_OOB_FILL_ZEROS = 0

_encode: list[Any] = []
_lock = threading.Lock()


def _encoder():
    if _encode:
        return _encode[0]
    with _lock:
        if not _encode:
            fn = _libcuda().cuTensorMapEncodeTiled
            u32p, u64p = ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint64)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p,
                           u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
            fn.restype = ctypes.c_int
            _encode.append(fn)
    return _encode[0]


def check_tiled_2d(dtype: str, ptr: int, inner: int, outer: int, ld: int, box: tuple[int, int],
                   swizzle_bytes: int) -> str | None:
    """Why a 2-D tiled descriptor cannot be encoded for this operand, or None. The driver's
    rules: the base address 16-byte aligned, the row stride a multiple of 16 bytes below
    2^40, each size from 1 to 2^32, box sides from 1 to 256, and with a swizzle the box's
    inner side at most the swizzle width in bytes."""
    item = ITEMSIZE[dtype]
    if ptr % 16:
        return f"the base address {ptr:#x} is not 16-byte aligned"
    if (ld * item) % 16 or ld * item >= 1 << 40:
        return f"the row stride of {ld} elements ({ld * item} bytes) is not a multiple of 16 bytes below 2^40"
    if not (1 <= inner < 1 << 32 and 1 <= outer < 1 << 32):
        return f"the sizes {inner} x {outer} are outside 1..2^32-1"
    if not all(1 <= b <= 256 for b in box):
        return f"the box {box} has a side outside 1..256"
    if swizzle_bytes and box[0] * item > swizzle_bytes:
        return f"the box's inner side of {box[0] * item} bytes exceeds the {swizzle_bytes}-byte swizzle"
    return None


def encode_tiled_2d(dtype: str, ptr: int, inner: int, outer: int, ld: int, box: tuple[int, int],
                    swizzle_bytes: int = 128) -> bytes:
    """The 128 bytes of a CUtensorMap for a row-major 2-D array at `ptr`: `outer` rows of
    `inner` contiguous elements, `ld` elements from one row to the next; a copy moves a box
    of box[0] (inner) x box[1] (outer) elements, zero-filling what lies outside the array."""
    why = check_tiled_2d(dtype, ptr, inner, outer, ld, box, swizzle_bytes)
    if why:
        raise ValueError(f"a TMA descriptor for this {dtype} operand cannot be made: {why}")
    # CUtensorMap is 128 bytes, 64-byte aligned; ctypes buffers promise less, so the map is
    # encoded at an aligned spot of a larger one.
    raw = ctypes.create_string_buffer(128 + 64)
    base = ctypes.addressof(raw)
    aligned = base + (-base) % 64
    dims = (ctypes.c_uint64 * 2)(inner, outer)
    strides = (ctypes.c_uint64 * 1)(ld * ITEMSIZE[dtype])
    boxd = (ctypes.c_uint32 * 2)(*box)
    elem = (ctypes.c_uint32 * 2)(1, 1)
    code = _encoder()(aligned, DATA_TYPE[dtype], 2, ptr, dims, strides, boxd, elem, _INTERLEAVE_NONE,
                      SWIZZLE[swizzle_bytes], L2_PROMOTION[l2_promotion_bytes], _OOB_FILL_ZEROS)
    if code:
        raise LaunchError(f"cuTensorMapEncodeTiled ({dtype}, {inner} x {outer}, ld {ld}, box {box}) failed: "
                          f"{error_text(code)}")
    return ctypes.string_at(aligned, 128)
