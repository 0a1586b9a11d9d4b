"""The shared-memory figure kgen reports is what a launch uses per block: ptxas' static
shared memory plus the dynamic shared memory the launch asks for (matmul stages its tiles
in dynamic shared memory, which ptxas does not count)."""
from __future__ import annotations

import pytest

import kgen
from kgen.core import compiler
from kgen.core.kernel import launch_resources

TILED = ("kgen_matmul", "kgen_matmul_vec", "kgen_matmul_vec_cs")


def test_launch_resources_adds_the_dynamic_size_once():
    spec = kgen.Matmul(tile=(64, 64, 8), thread_tile=(4, 4), shared_memory=True, stages=2)
    ptxas = {"kgen_matmul": {"registers": 90, "shared_bytes": 16, "stack_bytes": 0, "spill_stores": 0,
                             "spill_loads": 0},
             "kgen_matmul_splitk_reduce": {"registers": 20, "shared_bytes": 0, "stack_bytes": 0,
                                           "spill_stores": 0, "spill_loads": 0}}
    got = launch_resources(spec, ptxas)
    dyn = spec.launch_geometry(4096, 4096, 4096)[2]
    assert dyn == spec.shared_bytes > 0
    assert got["kgen_matmul"]["dynamic_shared_bytes"] == dyn
    assert got["kgen_matmul"]["static_shared_bytes"] == 16
    assert got["kgen_matmul"]["shared_bytes"] == dyn + 16
    assert got["kgen_matmul_splitk_reduce"]["shared_bytes"] == 0
    assert launch_resources(spec, got) == got  # idempotent: records read back stay right


def test_families_without_dynamic_shared_memory_report_ptxas_figure():
    spec = kgen.Reduce(op="sum")
    assert spec.dynamic_shared_bytes("kgen_reduce_partials") == 0
    unstaged = kgen.Matmul(shared_memory=False)
    assert unstaged.launch_geometry(64, 64, 64)[2] == 0
    assert all(unstaged.dynamic_shared_bytes(e) == 0 for e in TILED)


@pytest.mark.nvcc
@pytest.mark.parametrize("fields", [
    None,  # the spec kgen picks for 3000x5000x700 when nothing was tuned
    dict(tile=(128, 128, 8), thread_tile=(8, 8), warp_tile=(32, 64), shared_memory=True, vector_loads=True,
         smem_pad=4, stages=3, async_copy=True, split_k=4),
    dict(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True, stages=2),
])
def test_compiled_matmul_reports_the_launch_shared_memory(fields):
    spec = kgen.Matmul.default_spec({"M": 3000, "N": 5000, "K": 700}, "float32") if fields is None \
        else kgen.Matmul(**fields)
    compiled = kgen.compile(spec, "sm_90")
    raw = compiler.compile_cuda(kgen.render(spec), "sm_90", spec.compile_options()).resources
    assert set(compiled.resources) == set(raw)
    grid, block, launch_dynamic = spec.launch_geometry(3000, 5000, 700)
    assert launch_dynamic > 0
    for entry, res in compiled.resources.items():
        expected_dynamic = launch_dynamic if entry in TILED else 0
        assert res["dynamic_shared_bytes"] == expected_dynamic, entry
        assert res["static_shared_bytes"] == raw[entry]["shared_bytes"], entry
        assert res["shared_bytes"] == raw[entry]["shared_bytes"] + expected_dynamic, entry
    assert any(e in compiled.resources for e in TILED)
    assert max(r["shared_bytes"] for r in compiled.resources.values()) >= launch_dynamic


# Skinny's main entry points take their form's shared memory at launch (Skinny.shared_for), the small
# kernels beside them none: the SIMT forms, the mma.sync tensor-core forms and the wgmma ones.
SKINNY_SMALL_KERNELS = {"kgen_skinny_merge", "kgen_skinny_prescale", "kgen_skinny_wg_image_dot",
                        "kgen_skinny_wg_image_axpy"}


@pytest.mark.nvcc
@pytest.mark.parametrize("rows, dtype, forms", [
    (4, "float32", {"dot", "axpy"}),
    (8, "bfloat16", {"tc_dot", "tc_axpy"}),
    (40, "float32", {"wg_dot", "wg_axpy"}),
])
def test_compiled_skinny_reports_the_launch_shared_memory(rows, dtype, forms):
    from kgen.ops.skinny import MAIN_ENTRY

    problem = {"M": rows, "N": 4096, "K": 4096}
    spec = (kgen.Skinny.wgmma_default_spec(problem) if "wg_dot" in forms
            else kgen.Skinny.default_spec(problem, dtype))
    compiled = kgen.compile(spec, "sm_90")
    seen = set()
    for entry, res in compiled.resources.items():
        m = MAIN_ENTRY.fullmatch(entry)
        if m is None:
            assert entry in SKINNY_SMALL_KERNELS, entry  # a new kind of entry point: say what it asks for
            assert res["dynamic_shared_bytes"] == 0, entry
            continue
        seen.add(m.group(1))
        assert res["dynamic_shared_bytes"] == spec.shared_for(m.group(1)) > 0, entry
        assert res["shared_bytes"] == res["static_shared_bytes"] + res["dynamic_shared_bytes"], entry
    assert seen == forms
