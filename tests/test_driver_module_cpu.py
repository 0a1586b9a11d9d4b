"""CPU checks of kgen.core.launch.DriverModule.function's attributes (no GPU: the driver library
is a stand-in that records the calls)."""
from __future__ import annotations

import ctypes

from kgen.core import launch


class _Driver:
    def __init__(self):
        self.attributes: list[tuple[int, str, int]] = []   # (function, attribute, value)

    def cuModuleGetFunction(self, out, module, name):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = 0x1000 + len(name)
        return 0

    def cuFuncSetAttribute(self, fn, attribute, value):
        names = {launch._MAX_DYNAMIC_SHARED: "max dynamic shared", launch._PREFERRED_CARVEOUT: "carveout"}
        self.attributes.append((fn.value, names[attribute], value))
        return 0


def _module():
    module = object.__new__(launch.DriverModule)
    module._lib, module._handle = _Driver(), ctypes.c_void_p(1)
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
