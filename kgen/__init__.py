"""kgen: frozen Python specs rendered through Jinja2 into readable CUDA C, compiled, cached, launched.

    import kgen
    C = kgen.matmul(A, B)                      # picks a kernel for the shape and device
    k = kgen.build(kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True))
    C = k(A, B)

This module is the one list of the public API. Names are imported on first use, so
`import kgen` loads neither numpy, jinja2 nor pycuda until something needs them.

Layers (imports flow one way): kgen.cli, kgen.bench -> kgen.tune -> kgen.ops -> kgen.core.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# public name -> module that defines it
_API: dict[str, str] = {
    "Spec": "kgen.core.spec", "SpecError": "kgen.core.spec", "spec_from_json": "kgen.core.spec",
    "spec_from_dict": "kgen.core.spec", "families": "kgen.core.spec",
    "render": "kgen.core.render", "emit": "kgen.core.render",
    "CompileError": "kgen.core.compiler", "ToolchainError": "kgen.core.compiler", "Compiled": "kgen.core.compiler",
    "NoGPUError": "kgen.core.runtime", "ArrayError": "kgen.core.runtime",
    "Kernel": "kgen.core.kernel", "build": "kgen.core.kernel", "compile": "kgen.core.kernel",
    "Matmul": "kgen.ops.matmul", "Reduce": "kgen.ops.reduce", "TensorMatmul": "kgen.ops.tensorcore",
    "Skinny": "kgen.ops.skinny",
    "autotune": "kgen.tune.tuner",
    "matmul": "kgen.tune.dispatch", "dot": "kgen.tune.dispatch", "reduce": "kgen.tune.dispatch",
}

__all__ = ["__version__", *_API]

if TYPE_CHECKING:  # for type checkers and IDEs; at run time __getattr__ imports on demand
    from .core.compiler import CompileError, Compiled, ToolchainError
    from .core.kernel import Kernel, build, compile
    from .core.render import emit, render
    from .core.runtime import ArrayError, NoGPUError
    from .core.spec import Spec, SpecError, families, spec_from_dict, spec_from_json
    from .ops.matmul import Matmul
    from .ops.reduce import Reduce
    from .ops.skinny import Skinny
    from .ops.tensorcore import TensorMatmul
    from .tune.dispatch import dot, matmul, reduce
    from .tune.tuner import autotune


def _load_families() -> None:
    # Specs name their family in JSON; the registry must know every family before a
    # spec is read back, whichever public name was touched first.
    importlib.import_module("kgen.ops.matmul")
    importlib.import_module("kgen.ops.reduce")
    importlib.import_module("kgen.ops.skinny")
    importlib.import_module("kgen.ops.tensorcore")


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'kgen' has no attribute {name!r}")
    _load_families()
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
