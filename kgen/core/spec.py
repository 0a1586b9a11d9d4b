"""Specs: frozen, validated, canonically serialised descriptions of one kernel.

A spec is pure data. Everything downstream (rendering, compiling, caching,
tuning) is a function of it, so two equal specs must give byte-identical JSON
and the same key in any process.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, ClassVar

# Maps the "kernel" field of a JSON spec to its dataclass; filled by @register_family.
_FAMILIES: dict[str, type["Spec"]] = {}

DTYPES = {"float32": "float", "float64": "double", "int32": "int", "float16": "__half", "bfloat16": "__nv_bfloat16"}


class SpecError(ValueError):
    """A spec field holds a value that is not allowed."""


def fail(field: str, value: Any, allowed: str) -> None:
    raise SpecError(f"{field}={value!r} is not allowed: {allowed}")


def register_family(cls: type["Spec"]) -> type["Spec"]:
    _FAMILIES[cls.kernel] = cls
    return cls


def families() -> dict[str, type["Spec"]]:
    """Every registered family by name ("matmul", "reduce", ...)."""
    return dict(_FAMILIES)


def family(name_or_cls: "str | type[Spec]") -> type["Spec"]:
    """The spec class of a family, given its name ("matmul") or the class itself (kgen.Matmul).

    Raises SpecError naming the registered families. A family registers when its module
    is imported (kgen's own: kgen.ops)."""
    if isinstance(name_or_cls, str):
        if name_or_cls not in _FAMILIES:
            raise SpecError(f"family={name_or_cls!r} is not a known kernel family; allowed: {sorted(_FAMILIES)}")
        return _FAMILIES[name_or_cls]
    if isinstance(name_or_cls, type) and issubclass(name_or_cls, Spec) and name_or_cls.kernel:
        return name_or_cls
    raise SpecError(f"family must be a spec class such as kgen.Matmul or a family name, got {name_or_cls!r}")


def _canonical(value: Any) -> Any:
    """Turn lists into tuples (so specs hash and compare) and leave scalars alone."""
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return value


def _jsonable(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


@dataclasses.dataclass(frozen=True)
class Spec:
    """Base of every kernel family's spec, and the family interface.

    A family is one frozen dataclass subclassing Spec (its fields are the knobs, each with
    a default), decorated with @register_family, plus one Jinja2 template and one
    kgen.core.kernel.Kernel subclass that launches the compiled code. Nothing else in kgen
    names a family: rendering, compiling, tuning and dispatch use only what is below.

    Class attributes:
        kernel        the family's name, the "kernel" field of its JSON ("matmul").
        template      file name of its template in kgen's templates folder; or leave it
                      empty and override template_source() (a family outside kgen).
        kernel_class  the Kernel subclass build() wraps the compiled cubin in; calling
                      it as kernel(*inputs, out=out) launches on device arrays.
    A spec field named `dtype` ("float32", "float64", "int32") gives the template `ctype`.

    Rendering and compiling (kgen.core): validate, template_source, template_context,
    compile_options, and optionally explain_compile_error(CompileError) -> Exception.
    Tuning (kgen.tune.tuner) and dispatch (kgen.tune.dispatch), per "problem" (a plain
    dict of one call's sizes: matmul's M, N, K; reduce's n, op): normalize_problem,
    search_space, default_spec, prune_reason, make_inputs, reference_output,
    output_shape, tolerance_for, work, bucket. The methods that raise
    NotImplementedError here must be defined by a family the tuner or dispatch sees.
    """

    kernel: ClassVar[str] = ""
    template: ClassVar[str] = ""
    kernel_class: ClassVar[type] = object

    def __post_init__(self) -> None:
        hints = {f.name: f for f in dataclasses.fields(self)}
        for name, f in hints.items():
            value = _canonical(getattr(self, name))
            object.__setattr__(self, name, value)
            self._check_type(name, value, f.default)
        self.validate()

    # Types are checked against each field's default, so a spec field of the wrong
    # type (a string tile, a float block size) fails here with the field's name.
    def _check_type(self, name: str, value: Any, default: Any) -> None:
        if default is dataclasses.MISSING:
            return
        if isinstance(default, bool):
            if not isinstance(value, bool):
                fail(name, value, "true or false")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                fail(name, value, "an integer")
        elif isinstance(default, str):
            if not isinstance(value, str):
                fail(name, value, "a string")
        elif isinstance(default, tuple):
            if not isinstance(value, tuple) or len(value) != len(default) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                fail(name, value, f"a list of {len(default)} integers")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                fail(name, value, "a number")

    def validate(self) -> None:
        """Raise SpecError (a ValueError) naming the field, value and what is allowed."""

    # -- serialisation -------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kernel": self.kernel}
        for f in dataclasses.fields(self):
            out[f.name] = _jsonable(getattr(self, f.name))
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @property
    def key(self) -> str:
        """Stable hex digest of the canonical JSON: equal specs, equal keys, any process."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:24]

    def replace(self, **changes: Any) -> "Spec":
        return dataclasses.replace(self, **changes)

    @classmethod
    def template_source(cls) -> str | None:
        """The family's Jinja2 template as text, or None to load the file named by
        `template` from kgen's templates folder. Either way the template may import
        kgen's shared macros ({% import "common.cuh.j2" as common with context %})."""
        return None

    def template_context(self) -> dict[str, Any]:
        """Values the template needs beyond the spec fields (derived sizes, C types)."""
        return {}

    def compile_options(self) -> tuple[str, ...]:
        """Extra nvcc options for this spec (e.g. ("-use_fast_math",)); part of the cache key."""
        return ()

    def target_arch(self, arch: str) -> str:
        """The arch to compile this spec for on a device of `arch`: the same, unless the
        kernels use instructions of an arch-specific target (Hopper's wgmma needs sm_90a),
        or a clear error (ValueError) when the device cannot run them."""
        return arch

    def entry_units(self) -> bool:
        """Whether a kernel built from this spec compiles its entry points on first use, each in
        a unit of its own (render(spec, entries=...) keeps the one entry and the family's small
        helper kernels), rather than the whole module at once. A family whose module holds many
        large entry points of which one call launches one answers True: a first call then waits
        for one of them, not all. kernel.compiled still gives the whole module when asked."""
        return False

    def companion_specs(self) -> tuple["Spec", ...]:
        """Other specs whose kernels a kernel of this spec builds when it launches (a second
        launch of other tiles), so that compiling ahead (kgen.tune.ahead) builds them too."""
        return ()

    def dynamic_shared_bytes(self, entry: str) -> int:
        """Dynamic shared memory (bytes per block) that a launch of the entry point `entry`
        asks for. ptxas reports only static shared memory, so kgen adds this to its figure."""
        return 0

    def form(self) -> str:
        """A short name of the kernel this spec builds, for people (`kgen which`): the family's
        class name, and where the family has several kernels, which one."""
        return type(self).__name__

    @property
    def ctype(self) -> str:
        return DTYPES[getattr(self, "dtype")]  # noqa: B009 - each family declares dtype; the base cannot

    # -- the family interface: what the autotuner, the benchmarks and dispatch see ----------
    @classmethod
    def _missing(cls, method: str) -> NotImplementedError:
        return NotImplementedError(f"the {cls.kernel or cls.__name__} family does not define {method}(); "
                                   "see kgen.core.spec.Spec for the family interface")

    @classmethod
    def normalize_problem(cls, problem: dict[str, Any]) -> dict[str, Any]:
        """Check a problem dict and return it in canonical form (ValueError naming the bad key)."""
        raise cls._missing("normalize_problem")

    @classmethod
    def search_space(cls, problem: dict[str, Any], dtype: str) -> list["Spec"]:
        """Every valid candidate spec for the problem (invalid combinations are left out)."""
        raise cls._missing("search_space")

    @classmethod
    def default_spec(cls, problem: dict[str, Any], dtype: str) -> "Spec":
        """A sound spec for the problem when nothing was tuned (a bad dtype raises SpecError)."""
        raise cls._missing("default_spec")

    def for_layouts(self, problem: dict[str, Any], **layouts: Any) -> "Spec":
        """The spec to run on operands stored as `layouts` says (fields such as
        layout_a="col" that describe a call's arrays, not the tuned choice): this spec with
        those fields replaced, unless a family knows a better spec for that storage."""
        return self.replace(**layouts)

    def prune_reason(self, problem: dict[str, Any], limits: dict[str, int]) -> str | None:
        """Why this spec should not be compiled for the problem on a device with `limits`
        (keys as in kgen.tune.device.DeviceInfo.limits), or None if it should."""
        return None

    @classmethod
    def make_inputs(cls, problem: dict[str, Any], dtype: str, rng: Any) -> tuple[Any, ...]:
        """Fresh random host inputs (numpy arrays, from the numpy Generator `rng`) for the
        problem, in the order the kernel takes them; never zeros."""
        raise cls._missing("make_inputs")

    @classmethod
    def reference_output(cls, problem: dict[str, Any], inputs: tuple[Any, ...]) -> Any:
        """The float64 result for `inputs` (numpy array; a 0-d array for reductions)."""
        raise cls._missing("reference_output")

    @classmethod
    def output_shape(cls, problem: dict[str, Any]) -> tuple[int, ...]:
        """Shape of the output array (() for a scalar result)."""
        raise cls._missing("output_shape")

    def tolerance_for(self, problem: dict[str, Any], inputs: tuple[Any, ...] | None = None) -> float:
        """Largest allowed relative (norm) error against reference_output. Given the
        `inputs` the check runs on, a family may condition the bound on the data (a sum
        whose terms cancel is ill-conditioned: its relative error is no property of n)."""
        raise self._missing("tolerance_for")

    @classmethod
    def work(cls, problem: dict[str, Any], dtype: str) -> dict[str, float]:
        """{"flops": ..., "bytes": ...}: the arithmetic and the fewest bytes moved, for rates."""
        raise cls._missing("work")

    @classmethod
    def bucket(cls, problem: dict[str, Any]) -> tuple[float, ...]:
        """Coordinates of the problem for nearest-tuned-shape lookup (e.g. log2 of sizes)."""
        raise cls._missing("bucket")


def spec_from_dict(data: dict[str, Any]) -> Spec:
    if not isinstance(data, dict):
        raise SpecError(f"a spec must be a JSON object, got {type(data).__name__}")
    if "kernel" not in data:
        raise SpecError(f"the spec has no 'kernel' field; allowed kernels: {sorted(_FAMILIES)}")
    kind = data["kernel"]
    if not isinstance(kind, str) or kind not in _FAMILIES:
        raise SpecError(f"kernel={kind!r} is not a known kernel family; allowed: {sorted(_FAMILIES)}")
    cls = _FAMILIES[kind]
    names = {f.name for f in dataclasses.fields(cls)}
    fields = {k: v for k, v in data.items() if k != "kernel"}
    unknown = sorted(set(fields) - names, key=str)
    if unknown:
        raise SpecError(f"{kind} spec has unknown field(s) {unknown}; allowed: {sorted(names)}")
    return cls(**fields)


def spec_from_json(text: str) -> Spec:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"the spec is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:
        # Not malformed but unreadable: nesting too deep, an integer of thousands of digits.
        raise SpecError(f"the spec is not valid JSON: {type(exc).__name__}: {str(exc)[:120]}") from None
    return spec_from_dict(data)
