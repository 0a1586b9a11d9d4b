"""Planted faults: known-wrong variants of the kernels, for testing the tests.

A check is only as good as the bugs it catches. Each family names a few faults it could
plausibly have (a lost K tile, a dropped block partial, a tail counted twice) and its
template renders them on request, so the test suite can show that its checks fail on
each one and pass on the unmodified kernel. Nothing here is reachable from a spec: a
fault is no spec field, render(spec) never sets one, and a kernel built with a fault is
never memoised by kgen.build nor stored under the spec's key (its source differs, and so
does the cubin cache key).

A family adds a fault with one line in its module,

    faults.plant("matmul", "skip_last_k_tile", "the K loop stops one tile early")

and a hook in its template that tests the `fault` variable (None unless a test asks):

    const int ntiles = (...){% if fault == "skip_last_k_tile" %} - 1{% endif %};

Hooks are `{% if fault == "name" %}...{% endif %}` blocks with no else, so a template
renders byte for byte as before when no fault is set (tests/test_faults_cpu.py checks
that by rendering with every hook removed). docs/testing.md describes the whole scheme.
"""
from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

from .spec import Spec


@dataclasses.dataclass(frozen=True)
class Fault:
    family: str       # the spec's `kernel` ("matmul", "reduce", ...)
    name: str         # what the template's hook tests for
    description: str  # what the planted bug does, in one line


_FAULTS: dict[str, dict[str, Fault]] = {}
_lock = threading.Lock()


def plant(family: str, name: str, description: str) -> Fault:
    """Declare a fault of `family` whose template has a hook for `name`."""
    if not name.isidentifier():
        raise ValueError(f"fault name {name!r} must be an identifier (it is compared in the template)")
    fault = Fault(family, name, description)
    with _lock:
        known = _FAULTS.setdefault(family, {})
        if name in known and known[name] != fault:
            raise ValueError(f"fault {family}/{name} is planted twice with different descriptions")
        known[name] = fault
    return fault


def families() -> list[str]:
    """Families with at least one planted fault (of the family modules imported so far:
    each plants its faults when it is imported)."""
    return sorted(_FAULTS)


def faults(family: str | None = None) -> list[Fault]:
    """The planted faults of `family` (all families when None), in a stable order."""
    if family is None:
        return [f for fam in sorted(_FAULTS) for f in _FAULTS[fam].values()]
    return list(_FAULTS.get(family, {}).values())


def get(family: str, name: str) -> Fault:
    known = _FAULTS.get(family, {})
    if name not in known:
        raise ValueError(f"no fault {name!r} is planted in the {family!r} family; planted: {sorted(known)}")
    return known[name]


def _fault_of(spec: Spec, fault: str | Fault) -> Fault:
    if isinstance(fault, Fault) and fault.family != spec.kernel:
        raise ValueError(f"fault {fault.family}/{fault.name} is planted in the {fault.family!r} family, not in "
                         f"{spec.kernel!r}")
    return get(spec.kernel, fault.name if isinstance(fault, Fault) else fault)


def render(spec: Spec, fault: str | Fault, standalone: bool = False) -> str:
    """The source of `spec` with `fault` planted."""
    from . import render as rendering

    return rendering.render(spec, standalone=standalone, _fault=_fault_of(spec, fault).name)


_applies_memo: dict[tuple[str, str, str], bool] = {}


def applies(spec: Spec, fault: str | Fault) -> bool:
    """Whether `fault` changes the kernel `spec` renders (some faults live in code a spec
    does not use: a split-K reduction, a repack, a cross-warp merge)."""
    f = _fault_of(spec, fault)
    key = (spec.kernel, spec.key, f.name)
    hit = _applies_memo.get(key)
    if hit is None:
        from . import render as rendering

        hit = render(spec, f) != rendering.render(spec)
        _applies_memo[key] = hit
    return hit


def applies_standalone(spec: Spec, fault: str | Fault) -> bool:
    """Whether `fault` changes the standalone program of `spec`."""
    from . import render as rendering

    return render(spec, fault, standalone=True) != rendering.render(spec, standalone=True)


def compile(spec: Spec, fault: str | Fault, arch: str | None = None):  # noqa: A001 - mirrors kgen.compile
    """The cubin of `spec` with `fault` planted (cached by its source, like any build)."""
    from .kernel import _compile_spec, default_arch

    return _compile_spec(spec, render(spec, fault), arch or default_arch())


def build(spec: Spec, fault: str | Fault | None = None):
    """A fresh kernel object for `spec`, with `fault` planted (None: the unmodified
    kernel). Never memoised: kgen.build(spec) keeps returning the unmodified kernel, and
    each call gives a new object (so a test may change its device plan freely)."""
    from . import render as rendering
    from . import runtime
    from .kernel import _compile_spec, default_arch

    runtime.driver()
    source = rendering.render(spec) if fault is None else render(spec, fault)
    compiled = _compile_spec(spec, source, default_arch())
    return spec.kernel_class(spec, source, compiled)


def emit(spec: Spec, fault: str | Fault, path, standalone: bool = True) -> Path:
    """Write the source of `spec` with `fault` planted to `path` (the standalone program
    by default, whose self-check should then fail)."""
    path = Path(path)
    text = render(spec, fault, standalone=standalone)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path
