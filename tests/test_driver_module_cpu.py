"""CPU checks of kgen.core.launch.DriverModule.function's attributes (no GPU: the driver library
is a stand-in that records the calls)."""
from __future__ import annotations

import ctypes

from kgen.core import launch


class _Driver:
    def __init__(self, clusters: dict[str, tuple[int, int, int]] | None = None, answers: bool = True):
        self.attributes: list[tuple[int, str, int]] = []   # (function, attribute, value)
        self.clusters = clusters or {}   # kernel name -> its compile-time cluster dimensions
        self.answers = answers           # False: a driver that cannot tell cluster sizes
        self.names: dict[int, str] = {}

    def cuModuleGetFunction(self, out, module, name):
        fn = 0x1000 + 0x10 * len(self.names)
        self.names[fn] = name.decode()
        ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = fn
        return 0

    def cuFuncGetAttribute(self, out, attribute, fn):
        if not self.answers:
            return 1   # CUDA_ERROR_INVALID_VALUE
        dims = self.clusters.get(self.names[fn.value], (0, 0, 0))
        ctypes.cast(out, ctypes.POINTER(ctypes.c_int))[0] = dims[launch._CLUSTER_DIMS.index(attribute)]
        return 0

    def cuFuncSetAttribute(self, fn, attribute, value):
        names = {launch._MAX_DYNAMIC_SHARED: "max dynamic shared", launch._PREFERRED_CARVEOUT: "carveout",
                 launch._NON_PORTABLE_CLUSTER: "non-portable cluster"}
        self.attributes.append((fn.value, names[attribute], value))
        return 0


def _module(driver: _Driver | None = None):
    module = object.__new__(launch.DriverModule)
    module._lib, module._handle = driver or _Driver(), ctypes.c_void_p(1)
    module._functions, module._shared, module._carveouts = {}, {}, {}
    return module


def test_carveout_is_set_when_asked_for_and_changed_only_when_it_differs():
    m = _module()
    fn = m.function("kgen_tc_phase_a")
    assert m._lib.attributes == []                          # nothing asked: the driver's choice
    assert m.function("kgen_tc_phase_a", carveout=100) == fn   # asked after a plain look-up: still set
    assert m._lib.attributes == [(fn, "carveout", 100)]
    m.function("kgen_tc_phase_a", carveout=100)
    m.function("kgen_tc_phase_a")
    assert m._lib.attributes == [(fn, "carveout", 100)]     # set once
    m.function("kgen_tc_phase_a", carveout=50)
    assert m._lib.attributes[-1] == (fn, "carveout", 50)
    big = m.function("kgen_tc_wgmma", 113664)
    assert m._lib.attributes[-1] == (big, "max dynamic shared", 113664)


def test_a_cluster_past_eight_blocks_opts_in_to_the_non_portable_size_once():
    m = _module(_Driver({"kmerge16": (1, 1, 16), "kmerge11": (1, 1, 11), "kmerge8": (1, 1, 8),
                         "pair": (2, 1, 1)}))
    fn16 = m.function("kmerge16")
    assert m._lib.attributes == [(fn16, "non-portable cluster", 1)]
    m.function("kmerge16", carveout=100)
    assert [a for a in m._lib.attributes if a[1] == "non-portable cluster"] == [(fn16, "non-portable cluster", 1)]
    fn11 = m.function("kmerge11")
    assert m._lib.attributes[-1] == (fn11, "non-portable cluster", 1)
    for name in ("kmerge8", "pair", "plain"):   # portable sizes and kernels without a cluster: left alone
        m.function(name)
    assert len([a for a in m._lib.attributes if a[1] == "non-portable cluster"]) == 2


def test_a_driver_that_cannot_tell_cluster_sizes_reads_as_no_cluster():
    driver = _Driver({"kmerge16": (1, 1, 16)}, answers=False)
    assert launch.cluster_blocks(driver, 0) == 1
    _module(driver).function("kmerge16")
    assert driver.attributes == []
    plain = _Driver({"kmerge12": (1, 2, 6)})
    assert launch.cluster_blocks(plain, _module(plain).function("kmerge12")) == 12
