"""Planted faults without a GPU: every fault has a template hook and every hook a fault, the
kernels render byte for byte as they would without the hooks, no spec can reach a fault,
every fault variant compiles, and the GPU tests' machinery (cases, triggers, checks) works:
run here on a simulated device with numpy kernels, clean and broken."""
from __future__ import annotations

import concurrent.futures as cf
import re

import jinja2
import numpy as np
import pytest

import kgen
from kgen.core import faults
from kgen.core import render as rendering
from kgen.ops.matmul import Matmul, MatmulKernel
from kgen.ops.reduce import Reduce, ReduceKernel
from test_exact_gpu import (HARNESSES, MATMUL_POOL, REDUCE_POOL, Chooser, DeviceArray, matmul_case, matmul_parts,
                            reduce_head, reduce_problem, run_case, tail_slots)
from test_faults_gpu import FAULTS, selected_specs, standalone_spec, trigger_rates

HOOK = re.compile(r'\{% if fault == "(\w+)"')
WHOLE_LINE_HOOK = re.compile(r'^[ \t]*\{% if fault == "\w+"[^%]*%\}\n.*?^[ \t]*\{% endif %\}\n', re.M | re.S)
INLINE_HOOK = re.compile(r'\{% if fault == "\w+"[^%]*%\}[^\n]*?\{% endif %\}')


def _template_text(family: str) -> str:
    return (rendering.template_dir() / kgen.families()[family].template).read_text()


def test_every_planted_fault_has_a_hook_and_every_hook_a_fault():
    assert {"matmul", "reduce"} <= set(faults.families())
    for family, cls in kgen.families().items():
        if not (rendering.template_dir() / cls.template).is_file():
            continue  # a family some test registered without a template
        hooks = set(HOOK.findall(_template_text(family)))
        planted = {f.name for f in faults.faults(family)}
        assert hooks == planted, f"{family}: hooks {sorted(hooks)} but planted {sorted(planted)}"
    assert len(faults.faults("matmul")) >= 4 and len(faults.faults("reduce")) >= 4


def _hookless_environment() -> jinja2.Environment:
    """The templates with every fault hook cut out, in kgen's Jinja settings."""
    base = rendering.environment()

    class Stripped(jinja2.FileSystemLoader):
        def get_source(self, environment, template):
            text, path, uptodate = super().get_source(environment, template)
            return INLINE_HOOK.sub("", WHOLE_LINE_HOOK.sub("", text)), path, uptodate

    env = jinja2.Environment(loader=Stripped(str(rendering.template_dir())), undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True, autoescape=False)
    env.filters.update(base.filters)
    return env


def test_without_a_fault_every_kernel_renders_as_if_the_hooks_were_not_there(monkeypatch):
    env = _hookless_environment()
    for family in ("matmul", "reduce"):
        stripped = env.loader.get_source(env, kgen.families()[family].template)[0]
        assert "fault" not in stripped, f"a {family} hook is not of the form the test removes"
    specs = REDUCE_POOL + MATMUL_POOL
    normal = [(rendering.render(s), rendering.render(s, standalone=True)) for s in specs]
    monkeypatch.setattr(rendering, "environment", lambda: env)
    hookless = [(rendering.render(s), rendering.render(s, standalone=True)) for s in specs]
    for spec, a, b in zip(specs, normal, hookless):
        assert a == b, f"the hooks change the unmodified kernel of {spec.to_json()}"


def test_no_spec_reaches_a_fault():
    with pytest.raises(kgen.SpecError, match="fault"):
        kgen.spec_from_json('{"kernel": "reduce", "fault": "drop_block_partial"}')
    spec = Reduce()
    assert kgen.render(spec) == rendering.render(spec, _fault=None)
    assert faults.render(spec, "drop_block_partial") != kgen.render(spec)
    with pytest.raises(ValueError, match="planted"):
        faults.render(spec, "skip_last_k_tile")  # a matmul fault
    with pytest.raises(ValueError, match="no fault 'typo'"):
        faults.render(Matmul(), "typo")
    with pytest.raises(ValueError, match="identifier"):
        faults.plant("reduce", "not a name", "x")


def test_faults_change_only_the_code_they_name():
    split, plain = Matmul(**dict(kgen.ops.matmul.SPLIT_F32, split_k=4)), Matmul()
    assert faults.applies(split, "drop_block_partial") and not faults.applies(plain, "drop_block_partial")
    assert not faults.applies(plain, "read_past_row_end")
    assert faults.applies(Matmul(**kgen.ops.matmul.DEFAULT_F32), "read_past_row_end")
    assert not faults.applies(Reduce(strategy="atomic"), "skip_last_warp_final_merge")
    assert not faults.applies(Reduce(vector_loads=False), "count_tail_twice")
    for fault in FAULTS:
        pool = REDUCE_POOL if fault.family == "reduce" else MATMUL_POOL
        assert any(faults.applies(s, fault) for s in pool), fault
        text = faults.render(selected_specs(fault)[0], fault)
        assert text != kgen.render(selected_specs(fault)[0])


@pytest.mark.nvcc
def test_every_fault_variant_compiles():
    jobs = [(selected_specs(fault)[0], fault) for fault in FAULTS]
    with cf.ThreadPoolExecutor(2) as ex:
        built = list(ex.map(lambda job: faults.compile(job[0], job[1], "sm_90"), jobs))
    for (spec, fault), compiled in zip(jobs, built):
        assert compiled.cubin.startswith(b"\x7fELF"), (spec.to_json(), fault)
        # Cached under its own source: never the unmodified spec's cubin.
        assert compiled.key != kgen.compile(spec, "sm_90").key


def test_the_gpu_tests_draw_cases_that_exercise_every_fault():
    # The property check of a fault runs ~40 drawn cases on its selected specs; each must
    # exercise the fault in a good share of them, and each fault has a standalone run.
    for fault in FAULTS:
        rates = dict((s.key, r) for r, s in trigger_rates(fault))
        chosen = selected_specs(fault)
        assert chosen, fault
        assert all(rates[s.key] >= 0.3 for s in chosen), (fault, [rates[s.key] for s in chosen])
        assert standalone_spec(fault) is not None, fault


# ---------------------------------------------------------------------------------
# The harness's own logic against the kernels' (pure parts).
# ---------------------------------------------------------------------------------
def test_reduce_head_is_the_kernels():
    for spec in REDUCE_POOL[:30]:
        kernel = object.__new__(ReduceKernel)
        kernel.spec, kernel._itemsize = spec, np.dtype(spec.dtype).itemsize
        for offsets in ([0], [1], [3, 3], [1, 2], [2, 0]):
            offsets = offsets[:spec.arity] + [0] * (spec.arity - len(offsets))
            for n in (0, 1, 2, 5, 1000):
                ptrs = [(1 << 20) + off * kernel._itemsize for off in offsets]
                assert reduce_head(spec, offsets, n) == kernel._head(ptrs, n), (spec.to_json(), offsets, n)


def test_matmul_parts_are_the_kernels_plan():
    rng = np.random.default_rng(2)
    for spec in MATMUL_POOL:
        for _ in range(20):
            case = matmul_case(spec, Chooser(rng=rng))
            kernel = object.__new__(MatmulKernel)
            kernel.spec, kernel._plans = spec, {}
            slots = tail_slots(spec, case["M"], case["N"], case["K"]) if case["tail"] else None
            kernel._slots = {"kgen_matmul": slots or 10 ** 6}
            want = [(m0, rows, splits, chunk) for m0, rows, _, splits, chunk in
                    kernel._plan(case["M"], case["N"], case["K"], "kgen_matmul")]
            assert matmul_parts(spec, case) == want, (spec.to_json(), case)


# ---------------------------------------------------------------------------------
# A simulated device: host buffers at made-up addresses, numpy kernels reading through the
# same __cuda_array_interface__ views the real kernels get.
# ---------------------------------------------------------------------------------
class FakeMemory:
    def __init__(self):
        self.buffers: dict[int, np.ndarray] = {}
        self.next = 1 << 40

    def put(self, host):
        data = np.frombuffer(np.ascontiguousarray(host).tobytes(), np.uint8).copy()
        base = self.next
        self.next += -(-max(data.size, 1) // 256) * 256 + 256
        self.buffers[base] = data
        return base, data

    def _locate(self, ptr: int) -> tuple[np.ndarray, int]:
        for base, data in self.buffers.items():
            if base <= ptr < base + max(data.size, 1):
                return data, ptr - base
        raise AssertionError(f"pointer {ptr:#x} is in no buffer")

    def get(self, ptr, like):
        data, off = self._locate(ptr)
        return np.frombuffer(data[off:off + like.nbytes].tobytes(), like.dtype).reshape(like.shape).copy()

    def array(self, view: DeviceArray, rows_past: int = 0, columns_past: int = 0) -> np.ndarray:
        cai = view.__cuda_array_interface__
        data, off = self._locate(cai["data"][0])
        dtype = np.dtype(cai["typestr"])
        shape = list(cai["shape"])
        if rows_past:
            shape[0] += rows_past
        if columns_past:
            shape[1] += columns_past
        strides = cai["strides"] or tuple(np.empty(shape, dtype).strides)
        return np.ndarray(tuple(shape), dtype, buffer=data, offset=off, strides=strides)


class FakeReduce:
    def __init__(self, memory, spec, fault=None):
        self.memory, self.spec, self.fault = memory, spec, fault

    def __call__(self, *inputs, out):
        xs = [self.memory.array(v, rows_past=1 if self.fault == "read_past_end" else 0) for v in inputs]
        if self.fault == "drop_first":
            xs = [x[1:] for x in xs]
        if self.fault == "double_last" and xs[0].size:
            xs = [np.concatenate([x, x[-1:]]) for x in xs]
        self.memory.array(out)[()] = np.asarray(self.spec.reference(*xs)).astype(self.spec.dtype)
        return out


class FakeMatmul:
    def __init__(self, memory, spec, fault=None):
        self.memory, self.spec, self.fault = memory, spec, fault

    def __call__(self, A, B, out=None, *, alpha=1.0, beta=0.0):
        a, b = self.memory.array(A).astype(np.float64), self.memory.array(B).astype(np.float64)
        c = self.memory.array(out)
        if self.fault == "skip_last_k" and a.shape[1] > 1:
            a, b = a[:, :-1], b[:-1]
        result = alpha * (a @ b) + (beta * c.astype(np.float64) if beta else 0.0)
        rows = c.shape[0] - 1 if self.fault == "skip_last_row" else c.shape[0]
        c[:rows] = result[:rows].astype(c.dtype)
        if self.fault == "write_past_row":  # one element past the end of the last row
            self.memory.array(out, columns_past=1)[-1, -1] = 0
        return out


FAKES = {"reduce": FakeReduce, "matmul": FakeMatmul}


@pytest.mark.parametrize("family", ["reduce", "matmul"])
def test_unmodified_simulated_kernels_pass_the_exact_checks(family):
    memory, rng = FakeMemory(), np.random.default_rng(3)
    harness = HARNESSES[family]
    for spec in harness.pool():
        for _ in range(3):
            case = harness.case(spec, Chooser(rng=rng))
            case["M" if family == "matmul" else "n"] = min(case["M" if family == "matmul" else "n"], 3000)
            problem = run_case(family, spec, case, memory, lambda s: FAKES[family](memory, s))
            assert problem is None, problem


@pytest.mark.parametrize("family,fault", [("reduce", "drop_first"), ("reduce", "double_last"),
                                          ("reduce", "read_past_end"), ("matmul", "skip_last_k"),
                                          ("matmul", "skip_last_row"), ("matmul", "write_past_row")])
def test_simulated_faults_fail_the_exact_checks(family, fault):
    memory, rng = FakeMemory(), np.random.default_rng(4)
    harness = HARNESSES[family]
    tried = caught = 0
    for spec in harness.pool():
        if family == "reduce" and spec.combine_kind != "sum":
            continue  # a lost term changes a sum of positive terms; a min only sometimes
        case = harness.case(spec, Chooser(rng=rng))
        if family == "reduce":
            case["n"] = max(1, min(case["n"], 3000))
        elif fault == "skip_last_k":
            case["K"] = max(case["K"], 2)
        tried += 1
        caught += run_case(family, spec, case, memory, lambda s: FAKES[family](memory, s, fault)) is not None
    assert tried >= 8 and caught == tried, (caught, tried)


def test_exact_reduce_inputs_cover_every_pool_kind():
    rng = np.random.default_rng(9)
    for spec in REDUCE_POOL:
        for n in (0 if not spec.empty_is_undefined else 1, 1, 7, 100_000):
            inputs = Reduce.make_exact_inputs(reduce_problem(spec, n), spec.dtype, rng)
            assert len(inputs) == spec.arity and all(x.shape == (n,) and x.dtype == spec.dtype for x in inputs)
            if spec.combine_kind == "sum" and n:
                assert (spec.mapped(*inputs) > 0).all()
    with pytest.raises(ValueError, match="rounds integers"):
        Reduce.make_exact_inputs({"n": 5, "op": "custom", "map_expr": "exp(x)", "combine": "a + b", "identity": "0"},
                                 "float32", rng)
    with pytest.raises(ValueError, match="combine"):
        Reduce.make_exact_inputs({"n": 5, "op": "custom", "map_expr": "x", "combine": "a - b + 0", "identity": "0"},
                                 "float32", rng)
    # Past the exact range of float32 ones: ones on a subset, still exact.
    x, = Reduce.make_exact_inputs({"n": (1 << 24) + 5, "op": "sum"}, "float32", rng)
    unit = float(x[x > 0].min())  # every value is a multiple of it
    assert float(x.astype(np.float64).sum()) / unit < 2 ** 24
