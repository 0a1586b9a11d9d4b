"""Specs are pure data: validated at construction, canonical JSON, stable keys."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kgen

PROBLEMS = {kgen.Matmul: {"M": 1000, "N": 999, "K": 257}, kgen.Reduce: {"n": 12345, "op": "dot"}}


def test_defaults_are_valid_and_named():
    assert json.loads(kgen.Matmul().to_json())["kernel"] == "matmul"
    assert json.loads(kgen.Reduce().to_json())["kernel"] == "reduce"


def _spaces():
    out = []
    for cls, problem in PROBLEMS.items():
        out.extend(cls.search_space(problem, "float32"))
    return out


SPACE = _spaces()


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SPACE))
def test_json_round_trip_is_exact(spec):
    text = spec.to_json()
    back = kgen.spec_from_json(text)
    assert back == spec and back.to_json() == text and back.key == spec.key
    # Canonical: key order and whitespace of the input do not matter.
    shuffled = json.dumps(dict(reversed(list(json.loads(text).items()))), indent=2)
    assert kgen.spec_from_json(shuffled).key == spec.key


def test_keys_differ_when_any_field_differs():
    base = kgen.Matmul()
    assert base.key != base.replace(dtype="float64").key
    assert base.key != base.replace(shared_memory=not base.shared_memory).key
    assert kgen.Reduce().key != kgen.Reduce(op="sum").key


def test_key_is_stable_across_processes():
    spec = kgen.Matmul(tile=(64, 32, 8), thread_tile=(4, 2), shared_memory=True)
    code = ("import kgen; print(kgen.spec_from_json(%r).key)" % spec.to_json())
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", **__import__("os").environ})
    assert out.stdout.strip() == spec.key


def test_specs_are_frozen_and_lists_become_tuples():
    spec = kgen.Matmul(tile=[32, 32, 8], thread_tile=[2, 2], shared_memory=True)
    assert spec.tile == (32, 32, 8) and hash(spec) == hash(kgen.Matmul(tile=(32, 32, 8), thread_tile=(2, 2),
                                                                        shared_memory=True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.tile = (64, 64, 8)


@pytest.mark.parametrize("make, field, allowed", [
    (lambda: kgen.Matmul(tile=(64, 64, 8), thread_tile=(3, 4)), "thread_tile", "divide"),
    (lambda: kgen.Matmul(tile=(128, 128, 8), thread_tile=(1, 2)), "tile", "1024"),
    (lambda: kgen.Matmul(dtype="float16"), "dtype", "float32"),
    (lambda: kgen.Matmul(tile="64"), "tile", "integers"),
    (lambda: kgen.Matmul(shared_memory="yes"), "shared_memory", "true or false"),
    (lambda: kgen.Reduce(strategy="magic"), "strategy", "shared_tree"),
    (lambda: kgen.Reduce(op="median"), "op", "dot"),
    (lambda: kgen.Reduce(block_size=100), "block_size", "power of two"),
    (lambda: kgen.Reduce(block_size=2048), "block_size", "1024"),
    (lambda: kgen.Reduce(block_size=256.0), "block_size", "integer"),
])
def test_invalid_fields_name_field_value_and_what_is_allowed(make, field, allowed):
    with pytest.raises(ValueError) as info:
        make()
    msg = str(info.value)
    assert field in msg and allowed in msg


@pytest.mark.parametrize("text, needle", [
    ('{"kernel": "conv2d"}', "conv2d"),
    ('{"tile": [16, 16, 16]}', "kernel"),
    ('{"kernel": "matmul", "tiles": [1, 1, 1]}', "tiles"),
    ('{"kernel": "matmul"', "not valid JSON"),
    ('[1, 2]', "JSON object"),
])
def test_bad_json_specs(text, needle):
    with pytest.raises(kgen.SpecError) as info:
        kgen.spec_from_json(text)
    assert needle in str(info.value)


@pytest.mark.parametrize("cls", [kgen.Matmul, kgen.Reduce])
def test_family_interface_is_complete(cls):
    problem = cls.normalize_problem(PROBLEMS[cls])
    space = cls.search_space(problem, "float32")
    assert space and all(isinstance(s, cls) for s in space)
    assert len({s.key for s in space}) == len(space), "the search space repeats a spec"
    default = cls.default_spec(problem, "float32")
    assert isinstance(default, cls)
    import numpy as np

    rng = np.random.default_rng(0)
    inputs = cls.make_inputs(problem, "float32", rng)
    assert all(np.count_nonzero(a) > 0.9 * a.size for a in inputs)
    ref = np.asarray(cls.reference_output(problem, inputs))
    assert ref.shape == tuple(cls.output_shape(problem))
    assert default.tolerance_for(problem) > 0
    w = cls.work(problem, "float32")
    assert w["flops"] > 0 and w["bytes"] > 0
    assert len(cls.bucket(problem)) >= 1
