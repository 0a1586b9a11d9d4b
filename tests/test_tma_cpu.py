"""CPU tests of the pieces of the Hopper launch path that need no GPU: the TMA descriptor's
argument checks (kgen.core.tma) and the parameter layout a by-value tensor map forces
(kgen.core.launch._param_layout), against a stand-in for the driver."""
from __future__ import annotations

import ctypes
import struct
import types

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


class _Recorder:
    """cuLaunchKernel as a stand-in that records what it was given, with the packed buffer."""

    def __init__(self):
        self.calls = []

    def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):   # noqa: N802
        words = ctypes.cast(extra.value, ctypes.POINTER(ctypes.c_void_p))
        buf, size = words[1], ctypes.cast(words[3], ctypes.POINTER(ctypes.c_size_t))[0]
        self.calls.append((fn, (gx, gy, gz, bx, by, bz, shared), stream, params, ctypes.string_at(buf, size)))
        return 0


def test_a_launch_passes_pointer_sized_handles_and_the_packed_arguments(monkeypatch):
    # cuLaunchKernel has no argtypes (converting them cost ~2 us a call): a handle passed as
    # a bare Python int would be cut to a C int, so the function and the stream must reach
    # the driver as pointer-sized ctypes objects, with their full 64-bit values.
    driver = _Recorder()
    monkeypatch.setattr(launch, "_libcuda", lambda: driver)
    fn, stream = 0x7F12_3456_789A, 0x7FFF_0000_1230
    go = launch.Launch(fn, "k", (5, 2, 1), (256, 1, 1), 1024, "Pif")
    go(stream, 0x7000_0000_0010, -3, 1.5)
    go(0, 0x10, 7, 0.25)
    (f1, geom, s1, params, packed), (_, _, s0, _, packed0) = driver.calls
    assert isinstance(f1, ctypes.c_void_p) and f1.value == fn
    assert isinstance(s1, ctypes.c_void_p) and s1.value == stream
    assert not s0.value   # the default stream: NULL
    assert geom == (5, 2, 1, 256, 1, 1, 1024) and params is None
    assert packed == struct.pack("@Pif", 0x7000_0000_0010, -3, 1.5)
    assert packed0 == struct.pack("@Pif", 0x10, 7, 0.25)


class _ExRecorder(_Recorder):
    """cuLaunchKernelEx as well: records the launch configuration it was given."""

    def cuLaunchKernelEx(self, config, fn, params, extra):   # noqa: N802
        c = ctypes.cast(config, ctypes.POINTER(launch._LaunchConfig))[0]
        attrs = [(c.attrs[i].id, c.attrs[i].value) for i in range(c.numAttrs)]
        words = ctypes.cast(extra.value, ctypes.POINTER(ctypes.c_void_p))
        buf, size = words[1], ctypes.cast(words[3], ctypes.POINTER(ctypes.c_size_t))[0]
        geom = (c.gridDimX, c.gridDimY, c.gridDimZ, c.blockDimX, c.blockDimY, c.blockDimZ, c.sharedMemBytes)
        self.calls.append((fn, geom, c.hStream, attrs, ctypes.string_at(buf, size)))
        return 0


def test_the_launch_configuration_matches_the_driver_layout():
    # CUlaunchConfig and CUlaunchAttribute as cuda.h lays them out on a 64-bit host.
    assert ctypes.sizeof(launch._LaunchConfig) == 56 and launch._LaunchConfig.hStream.offset == 32
    assert launch._LaunchConfig.attrs.offset == 40 and launch._LaunchConfig.numAttrs.offset == 48
    assert ctypes.sizeof(launch._LaunchAttribute) == 72 and launch._LaunchAttribute.value.offset == 8


def test_a_programmatic_launch_asks_for_programmatic_serialization(monkeypatch):
    driver = _ExRecorder()
    monkeypatch.setattr(launch, "_libcuda", lambda: driver)
    fn, stream = 0x7F12_3456_789A, 0x7FFF_0000_1230
    go = launch.Launch(fn, "k", (5, 2, 3), (384, 1, 1), 200 * 1024, "Pif", programmatic=True)
    go(stream, 0x7000_0000_0010, -3, 1.5)
    go(0, 0x10, 7, 0.25)
    (f1, geom, s1, attrs, packed), (_, _, s0, _, packed0) = driver.calls
    assert isinstance(f1, ctypes.c_void_p) and f1.value == fn
    assert s1 == stream and not s0
    assert geom == (5, 2, 3, 384, 1, 1, 200 * 1024)
    assert attrs == [(launch._CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)]
    assert packed == struct.pack("@Pif", 0x7000_0000_0010, -3, 1.5)
    assert packed0 == struct.pack("@Pif", 0x10, 7, 0.25)
    plain = launch.Launch(fn, "k", (1, 1, 1), (32, 1, 1), 0, "P")
    plain(stream, 0x10)
    assert len(driver.calls[-1][1]) == 7 and not plain.programmatic   # cuLaunchKernel's argument list


def test_a_driver_without_the_extended_launch_launches_plainly(monkeypatch):
    driver = _Recorder()   # cuLaunchKernel only (a driver before CUDA 11.8)
    monkeypatch.setattr(launch, "_libcuda", lambda: driver)
    go = launch.Launch(0x1234, "k", (2, 1, 1), (128, 1, 1), 0, "P", programmatic=True)
    go(0x5678, 0x10)
    assert not go.programmatic and len(driver.calls) == 1 and driver.calls[0][1] == (2, 1, 1, 128, 1, 1, 0)


def test_programmatic_launches_follow_the_environment(monkeypatch):
    monkeypatch.delenv("KGEN_PDL", raising=False)
    assert launch.programmatic_launches()
    for word, want in (("0", False), ("off", False), (" No ", False), ("1", True), ("on", True), ("TRUE", True)):
        monkeypatch.setenv("KGEN_PDL", word)
        assert launch.programmatic_launches() is want, word
    monkeypatch.setenv("KGEN_PDL", "sometimes")
    with pytest.raises(ValueError, match="KGEN_PDL='sometimes' is not allowed"):
        launch.programmatic_launches()


class _Encoder:
    """A stand-in for encode_tiled_2d with a format of its own: `where(ptr)` gives the address
    words; every other byte comes from the geometry. It counts its calls."""

    def __init__(self, where):
        self.where, self.calls = where, 0

    def __call__(self, dtype, ptr, inner, outer, ld, box, swizzle_bytes=128):
        why = tma.check_tiled_2d(dtype, ptr, inner, outer, ld, box, swizzle_bytes)
        if why:
            raise ValueError(f"cannot be made: {why}")
        self.calls += 1
        words = [(inner * 31 + outer * 7 + ld + box[0] * 3 + box[1] + i) % (1 << 64) for i in range(16)]
        for i, value in self.where(ptr).items():
            words[i] = value
        return b"".join(w.to_bytes(8, "little") for w in words)


def _fresh(monkeypatch, encoder):
    monkeypatch.setattr(tma, "encode_tiled_2d", encoder)
    return tma.TiledMap("bfloat16", 4096, 300, 4096, (64, 64))


def test_tiled_map_patches_the_address_word_it_learned(monkeypatch):
    # The address shifted right by 4 in word 2, with flags in the word's top bits.
    encoder = _Encoder(lambda p: {2: (p >> 4) | (0b101 << 60)})
    m = _fresh(monkeypatch, encoder)
    assert m.patches
    made = encoder.calls
    addresses = [0x7F12_3456_7890, 0x10, 0x1_0000_0000, 0x2A0_0000_1230] + [16 * i + 0x9000_0000 for i in range(40)]
    for p in addresses:
        assert m.at(p) == encoder("bfloat16", p, 4096, 300, 4096, (64, 64))
    encoder.calls -= len(addresses)
    assert encoder.calls == made   # no address past creation went to the encoder


def test_tiled_map_encodes_each_address_where_the_format_does_not_fit(monkeypatch):
    # The address in two words (no single word to patch): every new address is encoded.
    encoder = _Encoder(lambda p: {0: p, 5: p ^ 0xFFFF})
    m = _fresh(monkeypatch, encoder)
    assert not m.patches
    made = encoder.calls
    for p in (0x1000, 0x2000, 0x1000, 0x3000):
        assert m.at(p)[:8] == p.to_bytes(8, "little")
    assert encoder.calls == made + 3   # the repeat of 0x1000 came from the memo


def test_tiled_map_encodes_where_patching_disagrees_with_the_driver(monkeypatch):
    # The word looks like the address at the probes but carries a bit of it elsewhere: the
    # check against the driver's own descriptors turns patching off.
    encoder = _Encoder(lambda p: {3: p | ((p >> 45) & 1) << 60})
    m = _fresh(monkeypatch, encoder)
    assert not m.patches
    p = (1 << 45) + 0x100
    assert m.at(p) == encoder("bfloat16", p, 4096, 300, 4096, (64, 64))


def test_tiled_map_refuses_bad_geometry_and_misaligned_addresses(monkeypatch):
    encoder = _Encoder(lambda p: {0: p})
    monkeypatch.setattr(tma, "encode_tiled_2d", encoder)
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        tma.TiledMap("bfloat16", 4096, 300, 1001, (64, 64))
    m = tma.TiledMap("bfloat16", 4096, 300, 4096, (64, 64))
    with pytest.raises(ValueError, match="16-byte aligned"):
        m.at(0x1008)


def test_tiled_map_through_the_driver_call(monkeypatch):
    """The whole path to cuTensorMapEncodeTiled (argument arrays, the encoder's first lookup
    under its lock) with a stand-in driver that writes the address into word 0."""

    def encode(out, dtype, rank, ptr, dims, strides, box, elem, *modes):
        words = [ptr or 0] + [int(dims[0]) + i for i in range(15)]
        ctypes.memmove(out, b"".join(w.to_bytes(8, "little") for w in words), 128)
        return 0

    driver = types.SimpleNamespace(cuTensorMapEncodeTiled=encode)   # the encoder's argtypes are set on it
    monkeypatch.setattr(tma, "_libcuda", lambda: driver)
    monkeypatch.setattr(tma, "_encode", [])
    m = tma.TiledMap("float16", 2112, 4608, 2112, (64, 64))
    assert m.patches
    assert m.at(0x7000_0000_0100)[:8] == (0x7000_0000_0100).to_bytes(8, "little")
    assert m.at(0x7000_0000_0100)[8:16] == (2112).to_bytes(8, "little")
