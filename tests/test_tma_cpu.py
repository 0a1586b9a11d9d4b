"""CPU tests of the pieces of the Hopper launch path that need no GPU: the TMA descriptor's
argument checks (kgen.core.tma) and the parameter layout a by-value tensor map forces
(kgen.core.launch._param_layout), against a stand-in for the driver."""
from __future__ import annotations

import ctypes
import struct

import pytest

from kgen.core import launch, tma


@pytest.mark.parametrize("kw, words", [
    (dict(ptr=0x1008), "16-byte aligned"),
    (dict(ld=1001), "multiple of 16 bytes"),
    (dict(inner=0), "outside"),
    (dict(box=(64, 257)), "outside 1..256"),
    (dict(box=(128, 64)), "exceeds the 128-byte swizzle"),
])
def test_tiled_descriptor_arguments_are_checked(kw, words):
    args = dict(dtype="bfloat16", ptr=0x10000, inner=4096, outer=4096, ld=4096, box=(64, 128), swizzle_bytes=128)
    assert tma.check_tiled_2d(**args) is None
    args.update(kw)
    why = tma.check_tiled_2d(**args)
    assert why and words in why
    with pytest.raises(ValueError, match="cannot be made"):
        tma.encode_tiled_2d(**args)


class _Driver:
    """cuFuncGetParamInfo as the driver answers it for a kernel whose first two parameters
    are 64-byte-aligned 128-byte maps placed 48 bytes in (then a pointer, two int64, a float)."""

    params = [(48, 128), (176, 128), (304, 8), (312, 8), (320, 8), (328, 4)]

    def cuFuncGetParamInfo(self, fn, i, off, size):   # noqa: N802 - the driver's name
        if i >= len(self.params):
            return 1
        ctypes.cast(off, ctypes.POINTER(ctypes.c_size_t))[0] = self.params[i][0]
        ctypes.cast(size, ctypes.POINTER(ctypes.c_size_t))[0] = self.params[i][1]
        return 0


def test_param_layout_follows_the_driver_offsets(monkeypatch):
    monkeypatch.setattr(launch, "_libcuda", lambda: _Driver())
    fmt = launch._param_layout(0, "128s128sPqqf")
    assert fmt == "=48x128s128sQqqf"
    packed = struct.pack(fmt, b"a" * 128, b"b" * 128, 7, 8, 9, 1.5)
    assert len(packed) == 332 and packed[48:176] == b"a" * 128 and packed[176:304] == b"b" * 128
    assert struct.unpack_from("=Q", packed, 304)[0] == 7


def test_param_layout_refuses_a_format_that_disagrees(monkeypatch):
    monkeypatch.setattr(launch, "_libcuda", lambda: _Driver())
    with pytest.raises(launch.LaunchError, match="parameter 2"):
        launch._param_layout(0, "128s128siqqf")   # an int32 where the kernel has a pointer
