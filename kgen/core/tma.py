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


# A descriptor word's bits that a base address may take: device addresses lie below 2^57.
_ADDRESS_MASK = (1 << 57) - 1
# Base addresses (16-byte aligned, spread over the bits an address uses) at which a TiledMap
# checks its patched descriptors against the driver's own.
_PROBE_ADDRESSES = (0x1_0000, 0x7FFF_FFF0, 0x1234_5678_9AB0, (1 << 49) - 16)
# Where the descriptors hold the base address, as (byte offset of the word, right shift) or None
# where no word fits, learned from a first map, by encoder (tests stand in for the driver's).
_address_field: dict[Any, tuple[int, int] | None] = {}
_field_lock = threading.Lock()   # not _lock: learning encodes, and the first encode takes _lock


def _find_address_field(encode) -> tuple[int, int] | None:
    """The 8-byte word of a descriptor whose low bits hold the base address (or the address
    shifted right by 4) while every other byte stays put, for the probe addresses."""
    try:
        maps = [encode(p) for p in _PROBE_ADDRESSES]
    except (ValueError, LaunchError):
        return None
    for offset in range(0, 128, 8):
        if any(m[:offset] != maps[0][:offset] or m[offset + 8:] != maps[0][offset + 8:] for m in maps):
            continue
        for shift in (0, 4):
            mask = _ADDRESS_MASK >> shift
            if all(int.from_bytes(m[offset:offset + 8], "little") & mask == p >> shift
                   for m, p in zip(maps, _PROBE_ADDRESSES)):
                return offset, shift
    return None


class TiledMap:
    """One 2-D tiled descriptor geometry (encode_tiled_2d's arguments but the address), for
    any base address. Encoding through the driver costs about 6 µs of host time (H200 host;
    ctypes and four arrays), and a model's loop passes ever new activations. The driver's
    format is opaque, so kgen learns once where a descriptor holds its address (the one
    8-byte word that changes with it) and each map keeps its patched descriptors only if they
    equal the driver's own at the probe addresses; otherwise it encodes each address. The
    last `keep` descriptors are memoised by address."""

    __slots__ = ("geometry", "_field", "_template", "_word", "_memo", "_keep")

    def __init__(self, dtype: str, inner: int, outer: int, ld: int, box: tuple[int, int], swizzle_bytes: int = 128,
                 keep: int = 16):
        self.geometry = (dtype, inner, outer, ld, (box[0], box[1]), swizzle_bytes)
        why = check_tiled_2d(dtype, _PROBE_ADDRESSES[0], inner, outer, ld, box, swizzle_bytes)
        if why:
            raise ValueError(f"a TMA descriptor for this {dtype} operand cannot be made: {why}")
        self._memo: dict[int, bytes] = {}
        self._keep = keep
        self._field: tuple[int, int] | None = None
        self._template = b""
        self._word = 0
        field = self._learned_field()
        if field is not None:
            template = self._encode(_PROBE_ADDRESSES[0])
            offset, shift = field
            word = int.from_bytes(template[offset:offset + 8], "little") & ~(_ADDRESS_MASK >> shift)
            self._field, self._template, self._word = field, template, word
            try:
                same = all(self._patched(p) == self._encode(p) for p in _PROBE_ADDRESSES[1:])
            except (ValueError, LaunchError):
                same = False
            if not same:
                self._field = None

    def _encode(self, ptr: int) -> bytes:
        dtype, inner, outer, ld, box, swizzle = self.geometry
        return encode_tiled_2d(dtype, ptr, inner, outer, ld, box, swizzle)

    def _learned_field(self) -> tuple[int, int] | None:
        encoder = encode_tiled_2d
        if encoder not in _address_field:
            with _field_lock:
                if encoder not in _address_field:
                    _address_field[encoder] = _find_address_field(self._encode)
        return _address_field[encoder]

    def _patched(self, ptr: int) -> bytes:
        offset, shift = self._field  # type: ignore[misc]
        word = self._word | (ptr >> shift)
        t = self._template
        return t[:offset] + word.to_bytes(8, "little") + t[offset + 8:]

    @property
    def patches(self) -> bool:
        """Whether descriptors for new addresses are patched (else encoded by the driver)."""
        return self._field is not None

    def at(self, ptr: int) -> bytes:
        """The 128 bytes of the descriptor for base address `ptr`."""
        hit = self._memo.get(ptr)
        if hit is None:
            if ptr % 16 or not 0 <= ptr <= _ADDRESS_MASK:
                raise ValueError(f"a TMA descriptor for this {self.geometry[0]} operand cannot be made: the base "
                                 f"address {ptr:#x} is not 16-byte aligned (or not a device address)")
            hit = self._patched(ptr) if self._field is not None else self._encode(ptr)
            if len(self._memo) >= self._keep:
                self._memo.clear()
            self._memo[ptr] = hit
        return hit
