"""Entry points compiled a unit at a time (Spec.entry_units, the skinny family): render(spec,
entries=...) keeps the named large entry points and every small helper kernel, a unit's entry
compiles as it does in the whole module, and a kernel made without its module compiles each
unit once, on the first use of one of its entries."""
from __future__ import annotations

import re

import pytest

import kgen
from kgen.core import launch, runtime
from kgen.core import kernel as kernel_module
from kgen.core.kernel import Kernel
from kgen.core.render import render
from kgen.ops.matmul import Matmul
from kgen.ops.skinny import Skinny

# An entry point's name as the templates write it: after __global__ void, an optional cluster
# size and launch bounds (sometimes ending the line).
ENTRY = re.compile(r'__global__ void (?:__cluster_dims__\([^)]*\) )?(?:__launch_bounds__\([^)]*\)\s*)?(kgen_\w+)\(')
HELPERS = {"kgen_skinny_merge", "kgen_skinny_prescale", "kgen_skinny_wg_image_dot", "kgen_skinny_wg_image_axpy"}


def entries(source: str) -> set[str]:
    return set(ENTRY.findall(source))


def _specs() -> list[Skinny]:
    return [Skinny(rows=2), Skinny(dtype="float64", rows=3),
            Skinny.default_spec({"M": 16, "N": 4096, "K": 4096}, "float32"),
            Skinny(rows=16, tensor_cores=True, instruction="wgmma"),
            Skinny(dtype="bfloat16", rows=8, tensor_cores=True),
            Skinny(dtype="float16", rows=2, tensor_cores=True),
            Skinny(dtype="bfloat16", rows=16, tensor_cores=True, instruction="wgmma"),
            Skinny(rows=12, tensor_cores=True, merge="cluster", k_split=4)]


@pytest.mark.parametrize("spec", _specs(), ids=lambda s: s.key[:10])
def test_a_unit_keeps_its_entries_and_every_helper(spec):
    whole = entries(render(spec))
    helpers = whole & HELPERS
    large = whole - HELPERS
    assert len(large) >= 3 and {"kgen_skinny_merge", "kgen_skinny_prescale"} <= helpers
    for name in sorted(large):
        # A unit holds its one large entry (a wgmma form's imaged and _direct twins apart).
        assert entries(render(spec, entries=(name,))) == {name} | helpers, name
    assert entries(render(spec, entries=())) == helpers
    # Equal arguments, equal text; the whole module's text is unchanged by the option.
    assert render(spec, entries=[sorted(large)[0]]) == render(spec, entries=(sorted(large)[0],))
    assert render(spec, entries=None) == render(spec)


def test_entries_are_refused_where_the_module_compiles_whole_or_standalone():
    assert not Matmul().entry_units() and Skinny().entry_units()
    with pytest.raises(ValueError, match="entry_units"):
        render(Matmul(), entries=["kgen_matmul"])
    with pytest.raises(ValueError, match="standalone"):
        render(Skinny(), standalone=True, entries=["kgen_skinny_dot_v4"])
    with pytest.raises(ValueError, match="arch"):
        Kernel(Skinny(), render(Skinny()), None)


@pytest.mark.nvcc
def test_a_units_entry_compiles_as_it_does_in_the_whole_module():
    # The float32 tensor-core module of 16 rows (the slowest mma.sync one to build whole) and a
    # SIMT module: registers, spills and shared memory of each unit's entry as in the whole.
    for spec, names in ((Skinny.default_spec({"M": 16, "N": 4096, "K": 4096}, "float32"),
                         ("kgen_skinny_tc_dot_v4", "kgen_skinny_tc_axpy_v1", "kgen_skinny_tc_dot_phased_c2")),
                        (Skinny(rows=2), ("kgen_skinny_dot_v4", "kgen_skinny_axpy_v2"))):
        whole = kgen.compile(spec, arch="sm_90")
        for name in names:
            unit = kernel_module._compile_spec(spec, render(spec, entries=(name,)), "sm_90")
            assert set(unit.resources) == {name} | (set(whole.resources) & HELPERS)
            for field in ("registers", "spill_stores", "spill_loads", "shared_bytes"):
                got, want = unit.resources[name].get(field), whole.resources[name].get(field)
                assert got == want, (spec.to_json(), name, field, got, want)


class _FakeModule:
    """Stands in for a loaded cubin (no GPU here): remembers which cubin it holds."""

    loaded: list[bytes] = []

    def __init__(self, cubin: bytes):
        self.cubin = cubin
        _FakeModule.loaded.append(cubin)

    def function(self, name: str, dynamic_shared: int = 0, carveout: int | None = None):
        return (id(self), name)


def _counted_compiles(monkeypatch) -> list[set[str]]:
    """Units compile with nvcc and load into stand-in modules; the list gets each compiled unit's
    entry points, in order."""
    compiles: list[set[str]] = []
    real = kernel_module._compile_spec

    def counted(spec, source, arch):
        c = real(spec, source, arch)
        compiles.append(set(c.resources))
        return c

    _FakeModule.loaded = []
    monkeypatch.setattr(kernel_module, "_compile_spec", counted)
    monkeypatch.setattr(runtime, "Module", _FakeModule)
    monkeypatch.setattr(launch, "DriverModule", _FakeModule)
    return compiles


class _NamedLaunch:
    """Stands in for kgen.core.launch.Launch without the driver: the entry, its name and grid."""

    def __init__(self, fn, name, grid, *args, **kwargs):
        self.fn, self.name, self.grid = fn, name, grid


def _planning_device(monkeypatch, skinny_module, blocks: int) -> None:
    """A stand-in GPU of 132 SMs that runs `blocks` blocks of any entry at once, and launches
    recorded by name (a plan without the driver)."""
    monkeypatch.setattr(runtime, "device_limits", lambda: {"multiprocessors": 132})
    monkeypatch.setattr(runtime, "device_index", lambda: 0)
    monkeypatch.setattr(runtime, "resident_blocks", lambda fn, threads, shared: blocks)
    monkeypatch.setattr(skinny_module, "Launch", _NamedLaunch)


@pytest.mark.nvcc
def test_a_kernel_without_its_module_compiles_each_unit_once_on_first_use(monkeypatch):
    compiles = _counted_compiles(monkeypatch)
    spec = Skinny(rows=1)
    k = Kernel(spec, render(spec), None, "sm_90")
    assert compiles == [] and k.arch == "sm_90"
    main = k.handle("kgen_skinny_dot_v4")
    assert len(compiles) == 1 and compiles[0] == {"kgen_skinny_dot_v4", "kgen_skinny_merge", "kgen_skinny_prescale"}
    # The helpers come from the unit already loaded; a second ask compiles nothing.
    assert k.handle("kgen_skinny_merge")[0] == main[0]
    assert k.function("kgen_skinny_prescale")[0] == k.function("kgen_skinny_dot_v4")[0]
    assert k.handle("kgen_skinny_dot_v4", 1024) == main and len(compiles) == 1
    other = k.handle("kgen_skinny_axpy_v1")
    assert len(compiles) == 2 and other[0] != main[0] and "kgen_skinny_dot_v4" not in compiles[1]
    with pytest.raises(KeyError, match="kgen_skinny_nope"):
        k.handle("kgen_skinny_nope")
    # The whole module, compiled when asked for, holds every entry point.
    before = len(compiles)
    assert set(k.resources) >= {"kgen_skinny_dot_v4", "kgen_skinny_dot_v1", "kgen_skinny_axpy_v4",
                                "kgen_skinny_dot_phased_c2", "kgen_skinny_merge"}
    assert len(compiles) == before + 1 and k.compiled is k.compiled and len(compiles) == before + 1
    # Made with its module, a kernel compiles nothing and launches from that module.
    eager = Kernel(spec, render(spec), kgen.compile(spec, arch="sm_90"))
    before = len(compiles)
    assert eager.handle("kgen_skinny_dot_v2")[1] == "kgen_skinny_dot_v2" and len(compiles) == before


@pytest.mark.nvcc
@pytest.mark.parametrize("order", ["col", "row"])
def test_a_wgmma_plan_compiles_only_the_twin_it_launches(monkeypatch, order):
    """The float32 wgmma forms have an imaged entry (S split once per call by an image launch)
    and a _direct twin (each block splits its own chunks of S); the grid's column tiles decide
    which runs, so the plan picks it before asking for its occupancy and compiles that one
    alone: few column tiles the _direct entry, many the imaged one beside its image launch."""
    import kgen.ops.skinny as skinny_module
    from kgen.ops.skinny import wg_direct

    compiles = _counted_compiles(monkeypatch)
    _planning_device(monkeypatch, skinny_module, blocks=2)
    form = "wg_dot" if order == "col" else "wg_axpy"
    for M, N, K, direct in ((40, 224, 1072, True), (40, 9000, 4096, False)):
        spec = Skinny.wgmma_default_spec({"M": M, "N": N, "K": K}, "float32")
        assert wg_direct(spec.column_tiles(form, 4, N), M, K) == direct
        k = spec.kernel_class(spec, render(spec), None, "sm_90a")
        compiles.clear()
        # W.t() (B k-contiguous) for the dot form, B row-major for the axpy form; all 16-byte aligned.
        b_strides = (1, K) if order == "col" else (N, 1)
        plan = k._plan(M, K, (K, 1), K, N, b_strides, (M, N), (N, 1), 1 << 20, 1 << 30)
        names = [launch_.name for _, launch_, _ in plan.launches]
        twin = f"kgen_skinny_{form}_direct_v4" if direct else f"kgen_skinny_{form}_v4"
        assert twin in names and ("image" in [kind for kind, _, _ in plan.launches]) != direct, names
        assert len(compiles) == 1 and twin in compiles[0], compiles
        other = f"kgen_skinny_{form}_v4" if direct else f"kgen_skinny_{form}_direct_v4"
        assert other not in compiles[0] and plan.launches[-1][1].name in compiles[0] | {"kgen_skinny_merge"}


@pytest.mark.nvcc
def test_a_row_major_16bit_weight_off_a_boundary_plans_the_shift_entry(monkeypatch):
    """The SIMT axpy form on a row-major float16/bfloat16 weight whose rows allow only 2- or
    4-byte loads (a pitch of no multiple of 4, or the weight's start 2 or 6 bytes off a
    boundary) launches the _shift entry, with the columns a block of the widest loads, compiled
    alone with at most 8 bytes of spill at 1-2 rows; rows 8 bytes off keep the 8-byte loads,
    aligned rows the widest entry, and float32 keeps its narrower loads."""
    import kgen.ops.skinny as skinny_module

    compiles = _counted_compiles(monkeypatch)
    _planning_device(monkeypatch, skinny_module, blocks=3)
    for dtype, M in (("bfloat16", 1), ("float16", 2)):
        spec = Skinny.simt_default_spec({"M": M, "N": 7001, "K": 3001}, dtype)
        assert spec.axpy_shifts and spec.axpy_vec == 8 and spec.axpy_shift_min_blocks == 3
        assert f"__launch_bounds__(THREADS, {spec.axpy_shift_min_blocks})\nkgen_skinny_axpy_shift(" in render(spec)
        k = spec.kernel_class(spec, render(spec), None, "sm_90a")
        cols = 32 * 8 * spec.axpy_lanes(8)
        for N, pitch, pb, name in ((7001, 7001, 1 << 30, "kgen_skinny_axpy_shift"),
                                   (7000, 7003, 1 << 30, "kgen_skinny_axpy_shift"),
                                   (7000, 7000, (1 << 30) + 6, "kgen_skinny_axpy_shift"),
                                   (7000, 7002, 1 << 30, "kgen_skinny_axpy_shift"),
                                   (7000, 7004, 1 << 30, "kgen_skinny_axpy_v4"),
                                   (7000, 7000, (1 << 30) + 8, "kgen_skinny_axpy_v4"),
                                   (7000, 7000, 1 << 30, "kgen_skinny_axpy_v8")):
            compiles.clear()
            plan = k._plan(M, 3001, (3001, 1), 3001, N, (pitch, 1), (M, N), (N, 1), 1 << 20, pb)
            main = next(launch_ for kind, launch_, _ in plan.launches if kind == "main")
            assert main.name == name, (dtype, N, pitch, pb, main.name)
            assert main.grid[0] == -(-N // cols) or not name.endswith(("shift", "v8")), (name, main.grid)
        shift = kernel_module._compile_spec(spec, render(spec, entries=("kgen_skinny_axpy_shift",)), "sm_90a")
        # (at 2 rows ptxas keeps 8 bytes on the stack at 80 registers; 64 spilled 80-92)
        assert shift.resources["kgen_skinny_axpy_shift"]["spill_stores"] <= (0 if M == 1 else 8), shift.resources
    spec = Skinny.simt_default_spec({"M": 2, "N": 7001, "K": 3001}, "float32")
    assert not spec.axpy_shifts and "kgen_skinny_axpy_shift(" not in render(spec)
    k = spec.kernel_class(spec, render(spec), None, "sm_90a")
    plan = k._plan(2, 3001, (3001, 1), 3001, 7001, (7001, 1), (2, 7001), (7001, 1), 1 << 20, 1 << 30)
    assert [launch_.name for kind, launch_, _ in plan.launches if kind == "main"] == ["kgen_skinny_axpy_v1"]
