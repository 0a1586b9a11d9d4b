"""kgen: frozen Python specs rendered through Jinja2 into readable CUDA C, compiled, cached, launched.

    import kgen
    k = kgen.build(kgen.Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True))
    C = k(A, B)
"""
__version__ = "0.1.0"

from .spec import Spec, SpecError, spec_from_json, spec_from_dict, families  # noqa: E402
from .render import render, emit  # noqa: E402
from .compiler import CompileError, ToolchainError, Compiled  # noqa: E402
from .runtime import NoGPUError, ArrayError  # noqa: E402
from .kernel import Kernel, build, compile  # noqa: E402
from .ops.matmul import Matmul  # noqa: E402
from .ops.reduce import Reduce  # noqa: E402
from .autotune import autotune  # noqa: E402
from .dispatch import matmul, dot, reduce  # noqa: E402

__all__ = [
    "__version__", "Spec", "SpecError", "spec_from_json", "spec_from_dict", "families", "render", "emit",
    "CompileError", "ToolchainError", "Compiled", "NoGPUError", "ArrayError", "Kernel", "build", "compile",
    "Matmul", "Reduce", "autotune", "matmul", "dot", "reduce",
]
