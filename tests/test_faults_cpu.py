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
from kgen.ops import skinny as skinny_module
from kgen.ops import tensorcore as tensor_module
from kgen.ops.matmul import Matmul, MatmulKernel
from kgen.ops.reduce import Reduce, ReduceKernel
from kgen.ops.skinny import Skinny, SkinnyKernel
from kgen.ops.tensorcore import TensorMatmul, TensorMatmulKernel
from test_exact_gpu import (HARNESSES, MATMUL_POOL, REDUCE_POOL, SKINNY_POOL, TENSOR_POOL, Chooser, DeviceArray,
                            exact_operands, matmul_case, matmul_parts, reduce_head, reduce_problem, run_case,
                            skinny_case, skinny_kernel_for, skinny_plan, stored_shape, tail_slots, tensor_case,
                            tensor_plan)
from test_faults_gpu import FAULTS, POOLS, STANDALONE_CANDIDATES, selected_specs, standalone_spec, trigger_rates

HOOK = re.compile(r'\{% if fault == "(\w+)"')
WHOLE_LINE_HOOK = re.compile(r'^[ \t]*\{% if fault == "\w+"[^%]*%\}\n.*?^[ \t]*\{% endif %\}\n', re.M | re.S)
INLINE_HOOK = re.compile(r'\{% if fault == "\w+"[^%]*%\}[^\n]*?\{% endif %\}')


def _template_text(family: str) -> str:
    return (rendering.template_dir() / kgen.families()[family].template).read_text()


def test_every_planted_fault_has_a_hook_and_every_hook_a_fault():
    assert {"matmul", "reduce", "skinny", "tensor_matmul"} <= set(faults.families())
    for family, cls in kgen.families().items():
        if not (rendering.template_dir() / cls.template).is_file():
            continue  # a family some test registered without a template
        hooks = set(HOOK.findall(_template_text(family)))
        planted = {f.name for f in faults.faults(family)}
        assert hooks == planted, f"{family}: hooks {sorted(hooks)} but planted {sorted(planted)}"
    assert len(faults.faults("matmul")) >= 4 and len(faults.faults("reduce")) >= 4
    assert len(faults.faults("skinny")) >= 4 and len(faults.faults("tensor_matmul")) >= 4


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
    for family in ("matmul", "reduce", "skinny", "tensor_matmul"):
        stripped = env.loader.get_source(env, kgen.families()[family].template)[0]
        assert "fault" not in stripped, f"a {family} hook is not of the form the test removes"
    specs = REDUCE_POOL + MATMUL_POOL + SKINNY_POOL + TENSOR_POOL
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
    assert not faults.applies(TensorMatmul(), "drop_block_partial")  # no split-K reduction without split_k
    assert faults.applies(TensorMatmul(split_k=2), "drop_block_partial")
    assert not faults.applies(TensorMatmul(repack=False), "read_past_row_end")  # no repack kernel
    assert faults.applies(TensorMatmul(repack=False), "edge_zero_fill_missing")
    with pytest.raises(ValueError, match="no fault 'drop_last_k_slab' is planted in the 'tensor_matmul'"):
        faults.render(TensorMatmul(), "drop_last_k_slab")  # a skinny fault
    for fault in faults.faults("skinny"):
        assert all(faults.applies(s, fault) for s in (Skinny(), Skinny(dtype="float16", rows=1)))
    for fault in FAULTS:
        pool = POOLS[fault.family]
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
    # exercise the fault in a good share of them, and each fault of a family with a
    # standalone self-check has a standalone run (tensor-core specs have no standalone
    # program).
    assert set(POOLS) == set(HARNESSES) and {f.family for f in FAULTS} <= set(HARNESSES)
    assert set(STANDALONE_CANDIDATES) == {"reduce", "matmul", "skinny"}
    for fault in FAULTS:
        rates = dict((s.key, r) for r, s in trigger_rates(fault))
        chosen = selected_specs(fault)
        assert chosen, fault
        assert all(rates[s.key] >= 0.3 for s in chosen), (fault, [rates[s.key] for s in chosen])
        if fault.family in STANDALONE_CANDIDATES:
            assert standalone_spec(fault) is not None, fault
        else:
            assert standalone_spec(fault) is None, fault


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


class _RecordedLaunch:
    """Stands in for kgen.core.launch.Launch where there is no CUDA driver: the plan only."""

    def __init__(self, fn, name, grid, block, shared, fmt, programmatic=False):
        self.name, self.grid, self.shared, self.programmatic = name, grid, shared, programmatic


def _operand_strides(which: str, case: dict, col: bool) -> tuple[int, int]:
    ld = stored_shape(which, case, col)[2]
    return (1, ld) if col else (ld, 1)


def test_skinny_plan_is_the_kernels(monkeypatch):
    monkeypatch.setattr(skinny_module, "Launch", _RecordedLaunch)
    rng = np.random.default_rng(5)
    for spec in SKINNY_POOL:
        item = np.dtype(spec.dtype).itemsize
        for _ in range(25):
            case = skinny_case(spec, Chooser(rng=rng))
            bare = object.__new__(SkinnyKernel)
            bare.spec, bare._plans, bare._sms = spec, {}, 132
            bare._fmt_main = bare._fmt_merge = bare._fmt_prescale = "P"
            bare.handle = lambda name, shared=0, carveout=None: 0
            kernel = skinny_kernel_for(spec, case, lambda s, kernel=bare: kernel)
            M, N, K = case["M"], case["N"], case["K"]
            c_strides = (1, max(M, 1) + case["pad_c"]) if case["c_col"] else (max(N, 1) + case["pad_c"], 1)
            plan = kernel._plan(M, K, _operand_strides("A", case, case["a_col"]), K, N,
                                _operand_strides("B", case, case["b_col"]), (M, N), c_strides,
                                (1 << 20) + case["off_a"] * item, (1 << 20) + case["off_b"] * item)
            want = skinny_plan(spec, case)
            ks = next(fixed[8] for kind, _, fixed in plan.launches if kind == "main")
            assert (plan.swap, plan.form, plan.width, plan.splits, ks, plan.classes) == \
                (want["swap"], want["form"], want["width"], want["splits"], want["ks"], want["classes"]), \
                (spec.to_json(), case)


def test_tensor_plan_is_the_kernels(monkeypatch):
    monkeypatch.setattr(tensor_module, "Launch", _RecordedLaunch)
    rng = np.random.default_rng(6)
    for spec in TENSOR_POOL:
        item = np.dtype(spec.dtype).itemsize
        kernel = object.__new__(TensorMatmulKernel)
        kernel.spec, kernel._plans, kernel._item, kernel._acc_item = spec, {}, item, 8 if item == 8 else 4
        kernel._sms = 132
        kernel._fmt = kernel._fmt_reduce = "P"
        kernel.handle = lambda name, shared=0, carveout=None: 0
        kernel._buffer = lambda name, nbytes: 1 << 30
        for _ in range(25):
            case = tensor_case(spec, Chooser(rng=rng))
            M, N, K = case["M"], case["N"], case["K"]
            seen = {}
            for which, layout in (("A", spec.layout_a), ("B", spec.layout_b)):
                shape = (M, K) if which == "A" else (K, N)
                rows, cols, ld = kernel._operand(shape, _operand_strides(which, case, layout == "col"), spec.dtype,
                                                 which, layout)
                seen[which] = (ld, kernel._aligned((1 << 20) + case["off_" + which.lower()] * item, ld))
            plan = kernel._plan(M, N, K, seen["A"][0], seen["B"][0], N, seen["A"][1], seen["B"][1], True)
            want = tensor_plan(spec, case)
            for i, which in enumerate("AB"):
                o = want["operands"][which]
                assert (plan[i] is not None) == o["repacked"], (spec.to_json(), case)
                assert seen[which] == (o["ld"], o["ok"])
                if plan[i] is not None:
                    assert plan[i][2] == (o["rows"], o["cols"], o["ld"], o["ldd"])
            assert plan[2].name == want["entry"]
            if spec.split_merge == "cluster":
                # No second kernel: the grid holds whole clusters; slices past K add zeros.
                assert plan[5] is None and plan[2].grid[2] == spec.split_k
                splits = -(-K // plan[3][6]) if K and plan[3][6] else 1
            else:
                splits = plan[6][5] if plan[5] is not None else 1
            assert (splits, plan[3][6]) == (want["splits"], want["chunk"]), (spec.to_json(), case)


def test_exact_operands_keep_every_sum_exact_and_every_edge_term_nonzero():
    rng = np.random.default_rng(8)
    for dtype, out, limit in (("float16", "float16", 2 ** 9 + 16), ("float16", "float32", 2 ** 22),
                              ("float32", "float32", 2 ** 22), ("float64", "float64", 2 ** 50)):
        for K in (1, 2, 7, 512, 513, 2049, 6000):
            A, B = exact_operands(3, 4, K, dtype, out, rng)
            assert A.dtype == dtype and B.dtype == dtype and A.shape == (3, K) and B.shape == (K, 4)
            a, b = A.astype(np.float64), B.astype(np.float64)
            assert (a == np.round(a)).all() and (a >= 0).all() and (b >= 0).all()
            assert (a[:, [0, -1]] > 0).all() and (b[[0, -1]] > 0).all()  # first and last terms count
            if K <= 512 or out != "float16":
                assert (a > 0).all() and (b > 0).all()
            assert (a @ b).max() <= limit if K <= limit else (a @ b).max() <= K


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
        if self.fault == "write_past_row":  # one element past the end of C's last stored line
            column_major = out.strides is not None and out.strides[0] == 1 and out.strides[1] != 1
            self.memory.array(out, **({"rows_past": 1} if column_major else {"columns_past": 1}))[-1, -1] = 0
        return out


PRODUCTS = ("matmul", "skinny", "tensor_matmul")
FAKES = {"reduce": FakeReduce, **{family: FakeMatmul for family in PRODUCTS}}


@pytest.mark.parametrize("family", ["reduce", *PRODUCTS])
def test_unmodified_simulated_kernels_pass_the_exact_checks(family):
    memory, rng = FakeMemory(), np.random.default_rng(3)
    harness = HARNESSES[family]
    for spec in harness.pool():
        for _ in range(3):
            case = harness.case(spec, Chooser(rng=rng))
            case["n" if family == "reduce" else "M"] = min(case["n" if family == "reduce" else "M"], 3000)
            problem = run_case(family, spec, case, memory, lambda s: FAKES[family](memory, s))
            assert problem is None, problem


@pytest.mark.parametrize("family,fault", [("reduce", "drop_first"), ("reduce", "double_last"),
                                          ("reduce", "read_past_end")]
                         + [(family, fault) for family in PRODUCTS
                            for fault in ("skip_last_k", "skip_last_row", "write_past_row")])
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
        else:
            case["M"] = min(case["M"], 3000)
            if fault == "skip_last_k":
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
