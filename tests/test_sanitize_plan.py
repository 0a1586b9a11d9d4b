"""scripts/sanitize without a GPU: the plan (which specs of each family run) and the cases
(which shapes and placements) cover what the sanitizer runs are meant to reach, and the
plan is reproducible from its seed."""
from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

import kgen

H100 = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024, "multiprocessors": 132}
SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "sanitize"


def _load_script():
    loader = importlib.machinery.SourceFileLoader("kgen_sanitize_script", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


sanitize = _load_script()


def _args(**kw):
    fields = dict(seed=0, quick=False, matmul_sample=6, skinny_sample=28, tensor_sample=24)
    fields.update(kw)
    return argparse.Namespace(**fields)


@pytest.fixture(scope="module")
def plan():
    return sanitize.make_plan(_args(), H100)


def _specs(plan, family):
    return [kgen.spec_from_json(item["spec"]) for item in plan if item["family"] == family]


def test_plan_holds_every_family_and_its_specs_round_trip(plan):
    families = {item["family"] for item in plan}
    assert families == {"reduce", "matmul", "skinny", "tensor_matmul"}
    for item in plan:
        spec = kgen.spec_from_json(item["spec"])
        assert spec.kernel == item["family"] and spec.to_json() == item["spec"]
    assert len(_specs(plan, "matmul")) == 6
    assert len(_specs(plan, "skinny")) == 28 and len(_specs(plan, "tensor_matmul")) == 24


def test_skinny_sample_takes_every_dtype_and_merge(plan):
    specs = _specs(plan, "skinny")
    pairs = {(s.dtype, s.merge) for s in specs}
    want = {(d, m) for d in ("float32", "float64", "float16") for m in ("single_pass", "two_pass", "atomic", "cluster")}
    assert pairs == want - {("float16", "atomic")}  # 16-bit atomics are refused by the spec
    assert len(set(specs)) == len(specs)
    assert {s.instruction for s in specs if s.tensor_cores and s.dtype == "float32"} == {"mma_sync", "wgmma"}
    assert {s.tc_window for s in specs if s.tensor_cores and s.instruction == "mma_sync"} == {32, 64}
    for s in specs:
        assert s.threads <= H100["max_threads_per_block"] and s.shared_bytes <= H100["max_shared_per_block_optin"]


def test_tensor_sample_takes_every_dtype_split_layout_and_load_path(plan):
    specs = _specs(plan, "tensor_matmul")
    assert {(s.dtype, s.split_k > 1) for s in specs} == {(d, split) for d in ("float16", "float32", "float64")
                                                         for split in (False, True)}
    assert {s.layout_a for s in specs} == {"row", "col"} and {s.layout_b for s in specs} == {"row", "col"}
    assert {s.repack for s in specs} == {True, False}  # repacking and the element-load entry point
    assert all(s.tf32 for s in specs if s.dtype == "float32")
    for s in specs:
        assert s.threads <= H100["max_threads_per_block"] and s.shared_bytes <= H100["max_shared_per_block_optin"]


def test_plan_is_reproducible_from_its_seed_and_quick_is_small():
    assert sanitize.make_plan(_args(), H100) == sanitize.make_plan(_args(), H100)
    other = sanitize.make_plan(_args(seed=1), H100)
    assert _specs(other, "skinny") != _specs(sanitize.make_plan(_args(), H100), "skinny")
    quick = sanitize.make_plan(_args(quick=True), H100)
    assert len(_specs(quick, "skinny")) == 3 and len(_specs(quick, "tensor_matmul")) == 3
    assert len(_specs(quick, "matmul")) == 3


@pytest.mark.parametrize("family", ["matmul", "skinny", "tensor_matmul"])
def test_product_shapes_are_odd_and_unaligned(family):
    for tool in ("memcheck", "racecheck", "synccheck", "initcheck"):
        shapes = sanitize.cases_for(family, tool, quick=False)
        assert shapes and all(len(s) == 3 and min(s) >= 1 for s in shapes)
        assert any(K % 8 and K > 1 for _, _, K in shapes), (family, tool)  # K no multiple of a vector
    memcheck = sanitize.cases_for(family, "memcheck", quick=False)
    assert (1, 1, 1) in memcheck
    assert any(M % 16 and N % 16 and M > 1 and N > 1 for M, N, _ in memcheck)  # partial tiles both ways
    assert sanitize.cases_for(family, "memcheck", quick=True)


def test_skinny_shapes_and_placements_reach_both_forms_and_orientations():
    shapes = sanitize.cases_for("skinny", "memcheck", quick=False)
    assert any(M == 1 for M, _, _ in shapes) and any(M > N for M, N, _ in shapes)  # decode and few columns
    assert any(min(M, N) > 64 for M, N, _ in shapes)  # more small rows than a block takes
    assert any(K > 2048 for _, _, K in shapes)  # long enough for several K slabs
    spec = kgen.Skinny()
    runs = sanitize.placements(spec, "memcheck")
    assert {(a, b) for a, b, _, _ in runs} == {(a, b) for a in ("row", "col") for b in ("row", "col")}
    assert any(pad and offset for _, _, pad, offset in runs)  # unaligned pointers and leading dimensions
    racecheck = sanitize.placements(spec, "racecheck")
    assert {(a, b) for a, b, _, _ in racecheck} == {("row", "row"), ("col", "col")}


def test_matmul_like_placements_follow_the_spec_layouts():
    spec = kgen.TensorMatmul(layout_a="col")
    runs = sanitize.placements(spec, "memcheck")
    assert {(a, b) for a, b, _, _ in runs} == {("col", "row")}
    assert any(offset for _, _, _, offset in runs)
    assert sanitize.cases_for("reduce", "memcheck", quick=False) == sanitize.REDUCE_SIZES["memcheck"]


def test_dispatch_sample_takes_the_specs_kgen_matmul_runs():
    """--dispatch-sample: the specs dispatch picks (no tuning database) for products drawn at
    random, on a stand-in H100 here: each is the spec call_spec gives its product, the draw
    reproduces from the seed, and it reaches tiles of the rules that no search-space sample
    holds (the few-column float64 tiles, their K merged in a cluster among them)."""
    import random

    from kgen.tune import ahead

    h100 = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
    specs = sanitize.dispatch_specs(random.Random(0), 45, h100)
    assert [s.to_json() for s in specs] == [s.to_json() for s in sanitize.dispatch_specs(random.Random(0), 45, h100)]
    assert len({s.to_json() for s in specs}) == len(specs)
    assert {s.kernel for s in specs} >= {"skinny", "tensor_matmul"}
    assert {s.dtype for s in specs} == {"float32", "float64", "float16"}
    few_columns = [s for s in specs if s.kernel == "tensor_matmul" and s.dtype == "float64" and s.tile[1] < 64]
    assert any(s.split_merge == "cluster" for s in few_columns), [s.tile for s in few_columns]
    plan = sanitize.make_plan(_args(dispatch_sample=45, matmul_sample=0, skinny_sample=0, tensor_sample=0),
                              H100, h100)
    drawn = sanitize.dispatch_specs(random.Random("dispatch 0"), 45, h100)
    assert [item["spec"] for item in plan if item["family"] != "reduce"] == [s.to_json() for s in drawn]


def test_specs_file_adds_its_specs_and_names_a_bad_line(tmp_path):
    """--specs F: each JSON line of F joins the plan under its family after the samples,
    comments and blank lines skipped; a line that is no spec stops the run naming its line."""
    from kgen.ops.tensorcore import TensorMatmul

    split = TensorMatmul(dtype="float32", tf32=True, split_tf32=True, tile=(64, 64, 32), warp_tile=(32, 32),
                         stages=2, min_blocks=4, repack=False)
    f = tmp_path / "specs.jsonl"
    f.write_text(f"# the split's tiles\n\n{split.to_json()}\n{kgen.Matmul().to_json()}\n")
    bare = dict(reduce=False, dispatch_sample=0, matmul_sample=0, skinny_sample=0, tensor_sample=0)
    plan = sanitize.make_plan(_args(specs=str(f), **bare), H100)
    assert plan == [{"family": "tensor_matmul", "spec": split.to_json()},
                    {"family": "matmul", "spec": kgen.Matmul().to_json()}]
    f.write_text(f"{split.to_json()}\n{{\"kernel\": \"tensor_matmul\", \"tile\": 3}}\n")
    with pytest.raises(SystemExit, match=r"specs.jsonl:2 is no kgen spec"):
        sanitize.make_plan(_args(specs=str(f), **bare), H100)
    with pytest.raises(SystemExit, match=r"--specs .*missing.jsonl: No such file"):
        sanitize.make_plan(_args(specs=str(tmp_path / "missing.jsonl"), **bare), H100)
