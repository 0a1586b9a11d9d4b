"""Planted faults on the GPU: each known-wrong kernel variant (kgen.core.faults) is caught by
the exact-arithmetic property checks of tests/test_exact_gpu.py and (matmul, reduce, skinny)
by the standalone program's self-check, while the unmodified kernels pass both.
Tensor-core faults are checked by the property checks only: tensor-core specs have no
standalone program.

For each fault the specs are those of the property tests' pool whose code the fault
changes, preferring the ones whose random cases exercise it most (a fault in the split-K
reduction needs a split; one in the tail needs a tail). The property checks then run the
property tests' own case draws on the faulted and the unmodified kernel side by side.

With KGEN_FAULTS_JSON set, the outcome (per family: faults caught N/N, by which check) is
written there; scripts/faults runs this file that way."""
from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import kgen
from kgen.core import faults
from kgen.ops.matmul import DEFAULT_F32, SPLIT_F32, Matmul
from kgen.ops.reduce import Reduce
from kgen.ops.skinny import Skinny
from test_exact_gpu import (HARNESSES, MATMUL_POOL, REDUCE_POOL, SKINNY_POOL, TENSOR_POOL, Chooser, CudaMemory,
                            compile_all, reduce_triggers, run_case)

pytestmark = pytest.mark.gpu

EXAMPLES = int(os.environ.get("KGEN_FAULT_EXAMPLES", "40"))
RATE_DRAWS = 100
POOLS = {"reduce": REDUCE_POOL, "matmul": MATMUL_POOL, "skinny": SKINNY_POOL, "tensor_matmul": TENSOR_POOL}
kgen.families()  # imports every family's module: each plants its faults
FAULTS = faults.faults()
RESULTS: dict[str, dict] = {"property": {}, "standalone": {}}


# ---------------------------------------------------------------------------------
# Which specs, which standalone programs (pure: tests/test_faults_cpu.py checks them).
# ---------------------------------------------------------------------------------
def _variant(spec) -> tuple:
    if spec.kernel == "reduce":
        return (spec.strategy,)
    if spec.kernel == "skinny":
        return (spec.merge, spec.dtype)
    if spec.kernel == "tensor_matmul":
        return (spec.dtype, spec.split_k > 1, spec.repack)
    return (spec.shared_memory, spec.split_k > 1, spec.tail_split_k > 1, spec.repack, spec.dtype)


@functools.lru_cache(maxsize=None)
def trigger_rates(fault) -> list[tuple[float, object]]:
    """(share of drawn cases the fault changes, spec) for each pool spec whose code it
    changes, best first (ties in pool order)."""
    harness = HARNESSES[fault.family]
    rng = np.random.default_rng(20261124)
    scored = []
    for spec in POOLS[fault.family]:
        if not faults.applies(spec, fault):
            continue
        cases = [harness.case(spec, Chooser(rng=rng)) for _ in range(RATE_DRAWS)]
        scored.append((float(np.mean([harness.triggers(fault.name, spec, c) for c in cases])), spec))
    scored.sort(key=lambda t: -t[0])
    return scored


def selected_specs(fault, count: int = 3) -> list:
    """Up to `count` specs for the fault's property check: the highest rates, one per
    variant (strategy; split, tail, repack) first."""
    chosen, seen = [], set()
    scored = [(r, s) for r, s in trigger_rates(fault) if r > 0]
    for _, spec in scored:
        if _variant(spec) not in seen and len(chosen) < count:
            chosen.append(spec)
            seen.add(_variant(spec))
    for _, spec in scored:
        if spec not in chosen and len(chosen) < count:
            chosen.append(spec)
    return chosen


STANDALONE_ARGS = {"reduce": ["1000003"], "matmul": ["257", "300", "517"], "skinny": []}
STANDALONE_CANDIDATES = {
    "reduce": [Reduce(op="dot", block_size=256), Reduce(op="dot", strategy="two_pass", block_size=128),
               Reduce(op="sum", strategy="atomic", dtype="float64"), Reduce(op="dot", strategy="warp_shuffle"),
               Reduce(op="sum", strategy="shared_tree", block_size=64, vector_loads=True)],
    "matmul": [Matmul(**DEFAULT_F32), Matmul(**dict(SPLIT_F32, split_k=4)), Matmul(),
               Matmul.default_spec({"M": 512, "N": 512, "K": 512}, "float64")],
    # The skinny program fixes its own shape (R = rows x 3001 x 4099, K in 3 slabs).
    "skinny": [Skinny.default_spec({"M": 4, "N": 4096, "K": 4096}, "float32"),
               Skinny.default_spec({"M": 2, "N": 4096, "K": 4096}, "bfloat16")],
}


def standalone_spec(fault):
    """The first candidate whose standalone program the fault changes and whose fixed run
    (STANDALONE_ARGS) exercises the changed code."""
    for spec in STANDALONE_CANDIDATES.get(fault.family, []):
        if not faults.applies_standalone(spec, fault):
            continue
        if fault.family == "reduce":
            case = {"n": int(STANDALONE_ARGS["reduce"][0]), "off_x": 0, "off_y": 0}
            if not reduce_triggers(fault.name, spec, case):
                continue
        elif (fault.family == "matmul" and fault.name == "drop_block_partial" and spec.split_k == 1
              and spec.tail_split_k == 1):
            continue  # the standalone splits K only as split_k or tail_split_k do
        return spec
    return None


# ---------------------------------------------------------------------------------
# Set-up and the report.
# ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def memory():
    from kgen.core.kernel import default_arch

    arch = default_arch()
    compile_all([s for f in FAULTS if f.family in HARNESSES for s in selected_specs(f)], arch)
    jobs = [(s, f) for f in FAULTS if f.family in HARNESSES for s in selected_specs(f)]
    with cf.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        list(ex.map(lambda job: faults.compile(job[0], job[1], arch), jobs))
    yield CudaMemory()
    _write_report()


def _device_name() -> str:
    try:
        from kgen.core import runtime

        return runtime.device().name()
    except Exception as exc:  # noqa: BLE001 - the report says what went wrong
        return f"unknown ({exc})"


def _write_report() -> None:
    path = os.environ.get("KGEN_FAULTS_JSON")
    if not path:
        return
    summary = {}
    for check in ("property", "standalone"):
        for family in sorted({f.family for f in FAULTS}):
            records = [r for r in RESULTS[check].values() if r["family"] == family]
            if records:
                caught = sum(1 for r in records if r["caught"])
                summary.setdefault(family, {})[check] = f"faults caught {caught}/{len(records)}"
    report = {"device": _device_name(), "time": time.strftime("%Y-%m-%d %H:%M:%S"), "summary": summary,
              "faults": {f"{f.family}/{f.name}": f.description for f in FAULTS}, **RESULTS}
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2, default=str))
    os.replace(tmp, target)


# ---------------------------------------------------------------------------------
# The property checks catch every fault.
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f"{f.family}-{f.name}")
def test_property_checks_catch_the_planted_fault(fault, memory):
    if fault.family not in HARNESSES:
        pytest.skip(f"no exact property harness for the {fault.family!r} family in tests/test_exact_gpu.py")
    from kgen.core import runtime

    sms = runtime.device_limits()["multiprocessors"]
    harness = HARNESSES[fault.family]
    specs = selected_specs(fault)
    assert specs, f"no spec of the property tests' pool exercises {fault}"
    outcomes = []

    def attempt(spec, case, build):
        try:
            return run_case(fault.family, spec, case, memory, build)
        except Exception as exc:  # noqa: BLE001 - a refused or failed launch is a failed check
            return f"{type(exc).__name__}: {exc}"

    @settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def explore(data):
        spec = data.draw(st.sampled_from(specs), label="spec")
        case = harness.case(spec, Chooser(data))
        clean = attempt(spec, case, kgen.build if not harness.needs_fresh_kernel(case) else faults.build)
        wrong = attempt(spec, case, lambda s: faults.build(s, fault))
        outcomes.append(dict(spec=spec.to_json(), case=case, triggered=harness.triggers(fault.name, spec, case, sms),
                             clean=clean, caught=wrong))

    explore()
    clean_failures = [o for o in outcomes if o["clean"] is not None]
    caught = [o for o in outcomes if o["caught"] is not None]
    triggered = [o for o in outcomes if o["triggered"]]
    RESULTS["property"][f"{fault.family}/{fault.name}"] = dict(
        family=fault.family, specs=[s.to_json() for s in specs], examples=len(outcomes), triggered=len(triggered),
        caught=len(caught), caught_when_triggered=sum(1 for o in triggered if o["caught"] is not None),
        first_catch=caught[0]["caught"][:400] if caught else None,
        clean_failures=[o["clean"][:400] for o in clean_failures[:3]])
    assert not clean_failures, f"the unmodified kernel failed: {clean_failures[0]['clean']}"
    assert caught, f"{fault} was never caught in {len(outcomes)} cases ({len(triggered)} exercised it)"


# ---------------------------------------------------------------------------------
# The standalone self-checks catch every fault.
# ---------------------------------------------------------------------------------
_EXES: dict[tuple[str, str | None], Path] = {}


@pytest.fixture(scope="module")
def standalone_programs(tmp_path_factory):
    """Every standalone program the tests run, unmodified and faulted, built in parallel."""
    from kgen.core.compiler import find_nvcc
    from kgen.core.kernel import default_arch

    arch, nvcc = default_arch(), find_nvcc()
    folder = Path(os.environ.get("KGEN_FAULTS_LOG_DIR") or tmp_path_factory.mktemp("standalone"))
    folder.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for fault in FAULTS:
        spec = standalone_spec(fault)
        if spec is None:
            continue
        jobs[(spec.key, None)] = (spec, None)
        jobs[(spec.key, fault.name)] = (spec, fault)

    def build(job):
        (key, name), (spec, fault) = job
        stem = f"{spec.kernel}_{key[:10]}_{name or 'unmodified'}"
        src = folder / f"{stem}.cu"
        if fault is None:
            kgen.emit(spec, src, standalone=True)
        else:
            faults.emit(spec, fault, src, standalone=True)
        exe = folder / stem
        subprocess.run([nvcc, "-O3", "-std=c++17", f"-arch={arch}", "-o", str(exe), str(src)], check=True,
                       capture_output=True, text=True, timeout=900)
        return (key, name), exe

    with cf.ThreadPoolExecutor(max(2, os.cpu_count() or 2)) as ex:
        _EXES.update(ex.map(build, jobs.items()))
    return folder


def _run(exe: Path, args: list[str]) -> tuple[int, str]:
    out = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)
    text = out.stdout + out.stderr
    Path(str(exe) + ".log").write_text(f"$ {exe.name} {' '.join(args)}\n{text}exit status {out.returncode}\n")
    return out.returncode, text


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f"{f.family}-{f.name}")
def test_standalone_self_check_catches_the_planted_fault(fault, standalone_programs, memory):
    spec = standalone_spec(fault)
    if spec is None:
        pytest.skip(f"no standalone candidate for {fault.family}/{fault.name} in STANDALONE_CANDIDATES")
    args = STANDALONE_ARGS[fault.family]
    clean_rc, clean_out = _run(_EXES[(spec.key, None)], args)
    rc, out = _run(_EXES[(spec.key, fault.name)], args)
    RESULTS["standalone"][f"{fault.family}/{fault.name}"] = dict(
        family=fault.family, spec=spec.to_json(), args=args, unmodified_status=clean_rc, unmodified_output=clean_out,
        status=rc, output=out, caught=rc != 0)
    assert clean_rc == 0 and "CHECK FAILED" not in clean_out, clean_out
    assert rc != 0, f"the self-check passed with {fault.name} planted:\n{out}"
    assert "CHECK FAILED" in out, f"the faulted program failed otherwise than by its check:\n{out}"
