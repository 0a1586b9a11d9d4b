"""CPU checks of the reduction family: validation, expressions, geometry, rendering,
the family interface, and (with nvcc) that every strategy compiles."""
from __future__ import annotations

import concurrent.futures
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.reduce import STRATEGIES, ExpressionError, Reduce, parse_expression


def test_default_is_valid_and_round_trips():
    spec = kgen.Reduce()
    assert spec.strategy in STRATEGIES
    assert kgen.spec_from_json(spec.to_json()) == spec
    assert kgen.Reduce(op="sum", block_size=128).key != spec.key


@pytest.mark.parametrize("fields, field", [
    (dict(op="prod"), "op"),
    (dict(strategy="volatile_tree"), "strategy"),
    (dict(block_size=96), "block_size"),
    (dict(block_size=2048), "block_size"),
    (dict(items_per_thread=0), "items_per_thread"),
    (dict(items_per_thread=17), "items_per_thread"),
    (dict(grid_size=-1), "grid_size"),
    (dict(grid_stride=False, grid_size=32), "grid_size"),
    (dict(accumulate="double"), "accumulate"),
    (dict(op="dot", dtype="int32"), "dtype"),
    (dict(op="sum", dtype="int32", accumulate="kahan"), "accumulate"),
    (dict(op="max", accumulate="kahan"), "accumulate"),
    (dict(op="sum", strategy="atomic", accumulate="kahan"), "accumulate"),
    (dict(op="sum", map_expr="x * x"), "map_expr"),
    (dict(vector_loads=1), "vector_loads"),
])
def test_validation_names_the_field(fields, field):
    with pytest.raises(kgen.SpecError) as info:
        kgen.Reduce(**fields)
    assert str(info.value).startswith(field + "=")
    assert "not allowed" in str(info.value)


@pytest.mark.parametrize("map_expr, message", [
    ("x +* y", "unexpected '\\*'"),
    ("x + ", "ends too early"),
    ("(x + y", "expected '\\)'"),
    ("x; system(1)", "character ';'"),
    ("z * 2", "name 'z' is not allowed"),
    ("printf(x)", "function 'printf' is not allowed"),
    ("sqrt(x, y)", "takes 1 argument"),
    ("x ? y", "expected ':'"),
    ("x y", "unexpected 'y'"),
    ("", "empty"),
    ("y * 2", "uses y but not x"),
])
def test_bad_map_expression_is_named(map_expr, message):
    with pytest.raises(ExpressionError, match=message) as info:
        kgen.Reduce(op="custom", map_expr=map_expr, combine="a + b", identity="0")
    assert f"map_expr={map_expr!r}" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_bad_combine_and_identity():
    with pytest.raises(ExpressionError, match="combine='a \\+ x'"):
        kgen.Reduce(op="custom", map_expr="x", combine="a + x", identity="0")
    with pytest.raises(ExpressionError, match="must use a and b"):
        kgen.Reduce(op="custom", map_expr="x", combine="1 + 2", identity="0")
    with pytest.raises(ExpressionError, match="identity='x'"):
        kgen.Reduce(op="custom", map_expr="x", combine="a + b", identity="x")
    with pytest.raises(ExpressionError, match="int32"):
        kgen.Reduce(op="custom", dtype="int32", map_expr="sqrt(x)", combine="a + b", identity="0")
    with pytest.raises(ExpressionError, match="'%' is for int32"):
        kgen.Reduce(op="custom", map_expr="x % 2", combine="a + b", identity="0")


def test_custom_arity_kind_and_reference():
    cubes = kgen.Reduce(op="custom", map_expr="x * x * x", combine="a + b", identity="0")
    assert cubes.arity == 1 and cubes.combine_kind == "sum"
    x = np.array([1.0, 2.0, -3.0], np.float32)
    assert cubes.reference(x) == 1 + 8 - 27
    amax = kgen.Reduce(op="custom", map_expr="fabs(x - y)", combine="a > b ? a : b", identity="-inf")
    assert amax.arity == 2 and amax.combine_kind == "max"
    assert amax.reference(x, np.zeros(3, np.float32)) == 3.0
    odd = kgen.Reduce(op="custom", map_expr="x", combine="a * 0.5 + b", identity="0")
    assert odd.combine_kind == "general"
    assert odd.reference(np.array([1.0, 2.0, 4.0])) == ((0 * 0.5 + 1) * 0.5 + 2) * 0.5 + 4
    src = kgen.render(cubes)
    assert "((x * x) * x)" in src
    assert kgen.Reduce(op="custom", map_expr="x * 1.5", combine="a + b", identity="0") \
        .template_context()["map_c"] == "(x * 1.5f)"
    assert kgen.Reduce(op="custom", dtype="float64", map_expr="x * 1.5", combine="a + b", identity="0") \
        .template_context()["map_c"] == "(x * 1.5)"


def test_parser_precedence_matches_c():
    tree = parse_expression("1 + 2 * 3 < 4 ? -x : x && y", "e", ("x", "y"))
    from kgen.ops.reduce import evaluate, render_c

    assert render_c(tree, False, True) == "(((1 + (2 * 3)) < 4) ? (-x) : (x && y))"
    assert evaluate(tree, {"x": 2.0, "y": 0.0}) == 0.0


def test_reference_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1001).astype(np.float32)
    y = rng.standard_normal(1001).astype(np.float32)
    assert Reduce(op="dot").reference(x, y) == pytest.approx(float(np.dot(x.astype(float), y.astype(float))))
    assert Reduce(op="min").reference(x) == float(x.min())
    assert Reduce(op="max", dtype="int32").reference(np.array([3, -9, 4], np.int32)) == 4
    assert Reduce.reference_for("sum", x) == pytest.approx(float(x.astype(float).sum()))


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 1 << 34), bs=st.sampled_from([32, 64, 128, 256, 512, 1024]), items=st.integers(1, 16),
       vec=st.booleans(), stride=st.booleans(), cap=st.sampled_from([0, 1, 32, 1000]),
       sms=st.sampled_from([1, 114, 132]), dtype=st.sampled_from(["float32", "float64"]),
       vectorized=st.sampled_from([None, True, False]))
def test_launch_geometry(n, bs, items, vec, stride, cap, sms, dtype, vectorized):
    spec = Reduce(op="sum", dtype=dtype, block_size=bs, items_per_thread=items, vector_loads=vec,
                  grid_stride=stride, grid_size=cap if stride else 0)
    grid, block = spec.launch_geometry(n, sms, vectorized=vectorized)
    assert block == bs and grid >= 1
    per_block = bs * items * (spec.vec if (vec if vectorized is None else vectorized) else 1)
    needed = max(1, -(-n // per_block))
    assert grid <= needed  # never a block with nothing to do
    if not stride:
        assert grid == needed  # one step covers the input
    elif cap:
        assert grid == min(needed, cap)
    else:
        assert grid == min(needed, sms * max(1, 2048 // bs))  # one full wave
    assert grid < 2**31


def test_family_interface():
    p = Reduce.normalize_problem({"n": 1000, "op": "dot"})
    space = Reduce.search_space(p, "float32")
    assert {s.strategy for s in space} == set(STRATEGIES)
    assert len(space) == len(set(space)) > 100
    assert all(s.op == "dot" for s in space)
    kahan_space = Reduce.search_space({"n": 10, "op": "sum", "accumulate": "kahan"}, "float32")
    assert kahan_space and all(s.accumulate == "kahan" and s.strategy != "atomic" for s in kahan_space)
    custom = {"n": 50, "op": "custom", "map_expr": "x * x", "combine": "a + b", "identity": "0"}
    assert Reduce.default_spec(custom, "float64").map_expr == "x * x"
    rng = np.random.default_rng(1)
    (x,) = Reduce.make_inputs(custom, "float64", rng)
    assert float(Reduce.reference_output(custom, (x,))) == pytest.approx(float((x * x).sum()))
    assert Reduce.output_shape(p) == ()
    assert Reduce.work(p, "float32") == {"flops": 2000.0, "bytes": 8000.0}
    assert Reduce.bucket(p) == (math.log2(1000),)
    assert Reduce.default_spec(p, "float32").prune_reason(p, {"max_threads_per_block": 1024}) is None
    assert Reduce(block_size=1024).prune_reason(p, {"max_threads_per_block": 512})
    assert Reduce(op="min").tolerance_for({"n": 10, "op": "min"}) == 0.0
    with pytest.raises(ValueError, match="n"):
        Reduce.normalize_problem({"n": -1})
    with pytest.raises(ValueError, match="map_expr"):
        Reduce.normalize_problem({"n": 1, "op": "custom"})


def test_render_every_strategy_is_deterministic():
    for strategy in STRATEGIES:
        for acc in ("native", "float64", "kahan"):
            if strategy == "atomic" and acc == "kahan":
                continue
            spec = Reduce(op="dot", strategy=strategy, accumulate=acc)
            a, b = kgen.render(spec), kgen.render(spec)
            assert a == b and spec.to_json() in a
            assert "__shfl_down_sync" in a or strategy == "shared_tree"
            # no warp-synchronous tricks through volatile shared memory
            assert not re.search(r"volatile\s+(acc|real|float|double|int)\b", a)
    assert "atomicCAS" in kgen.render(Reduce(op="max", strategy="atomic"))
    assert "atomicMax" in kgen.render(Reduce(op="max", dtype="int32", strategy="atomic"))
    assert "__threadfence" in kgen.render(Reduce(strategy="single_pass"))


def _compile(spec):
    return kgen.compile(spec, arch="sm_90")


@pytest.mark.nvcc
def test_every_strategy_compiles():
    specs = []
    for strategy in STRATEGIES:
        specs += [Reduce(op="dot", strategy=strategy, accumulate="float64"),
                  Reduce(op="sum", dtype="float64", strategy=strategy, vector_loads=False),
                  Reduce(op="min", dtype="int32", strategy=strategy, block_size=32),
                  Reduce(op="custom", map_expr="x > 0 ? sqrt(x) : -y", combine="fmin(a, b)",
                         identity="inf", strategy=strategy, items_per_thread=3)]
        if strategy != "atomic":
            specs.append(Reduce(op="sum", strategy=strategy, accumulate="kahan"))
    with concurrent.futures.ThreadPoolExecutor(4) as ex:
        compiled = list(ex.map(_compile, specs))
    for spec, c in zip(specs, compiled):
        assert c.cubin.startswith(b"\x7fELF")
        for name, res in c.resources.items():
            # (sqrt's slow path may spill a little; the built-in ops must not)
            assert res["spill_stores"] == 0 or spec.op == "custom", (spec.to_json(), name, res)


@pytest.mark.nvcc
def test_compile_error_of_custom_expression_names_it(monkeypatch):
    """An expression the Python checks accept but nvcc refuses comes back naming it."""
    spec = Reduce(op="custom", map_expr="x * 2", combine="a + b", identity="0")
    # Break the rendered source behind the spec's back to force nvcc to fail.
    import kgen.core.kernel as kk

    real_render = kk.render
    monkeypatch.setattr(kk, "render", lambda s, standalone=False: real_render(s) + "\n#error forced\n")
    with pytest.raises(kgen.CompileError) as info:
        kgen.compile(spec, arch="sm_90")
    assert "map 'x * 2'" in info.value.summary


def test_calls_captured_in_one_graph_share_their_scratch(monkeypatch):
    """Reductions captured on one stream in one capture share scratch and control words
    (written once per graph, not once per call); another capture or stream gets its own."""
    from kgen.core import runtime
    from kgen.ops import reduce as reduce_module
    from kgen.ops.reduce import ReduceKernel

    controls, buffers = [], []

    class Fake:
        spec = Reduce(op="sum", dtype="float32")
        _scratch: dict = {}
        _captured: dict = {}
        _retired: list = []

        @staticmethod
        def _new_control(stream):
            controls.append(stream)
            return len(controls)

    capture = {"id": 3}
    monkeypatch.setattr(runtime, "torch_capturing", lambda: capture["id"] != 0)
    monkeypatch.setattr(reduce_module, "capture_id", lambda stream: capture["id"])
    monkeypatch.setattr(runtime, "device_buffer", lambda n: buffers.append(n) or len(buffers))
    fake = Fake()
    first = ReduceKernel._scratch_for(fake, 5, 10)
    assert ReduceKernel._scratch_for(fake, 5, 10) is first and ReduceKernel._scratch_for(fake, 5, 1) is first
    assert len(controls) == 1
    capture["id"] = 4
    assert ReduceKernel._scratch_for(fake, 5, 10) is not first
    assert ReduceKernel._scratch_for(fake, 6, 10) is not first
    assert len(controls) == 3
