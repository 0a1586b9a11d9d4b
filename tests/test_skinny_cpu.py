"""CPU checks of the skinny-products family: validation, the launch plan (K slabs cover K
once, aligned, enough blocks), the choice of kernel form from strides, default_spec and
suits() on random skinny shapes, the warp reduction plan (simulated), rendering, and
nvcc/ptxas builds for sm_90 of a representative set with no register spills."""
from __future__ import annotations

import concurrent.futures as cf
import json
import random

import numpy as np
import pytest

import kgen
from kgen.core.spec import SpecError, spec_from_json
from kgen.ops.skinny import MODE_ATOMIC, MODE_DIRECT, MODE_PARTIALS, MODE_TICKET, SUITS_ROWS, Skinny, _form, tolerance

DTYPES = ("float32", "float64", "float16", "bfloat16")


@pytest.mark.parametrize("fields, field", [
    (dict(dtype="int32"), "dtype"),
    (dict(rows=0), "rows"),
    (dict(rows=65), "rows"),
    (dict(warp_cols=9), "warp_cols"),
    (dict(lane_vectors=0), "lane_vectors"),
    (dict(threads=100), "threads"),
    (dict(threads=32), "threads"),
    (dict(vector_bytes=12), "vector_bytes"),
    (dict(vector_bytes=4, dtype="float64"), "vector_bytes"),   # narrower than one element
    (dict(loads=0), "loads"),
    (dict(k_split=-1), "k_split"),
    (dict(waves=0), "waves"),
    (dict(merge="tree"), "merge"),
    (dict(merge="atomic", dtype="bfloat16"), "merge"),         # 16-bit atomics would round partials
    (dict(rows=64, warp_cols=4), "warp_cols"),                 # 256 accumulators a thread
    (dict(rows=64, warp_cols=1, lane_vectors=4, dtype="float64"), "lane_vectors"),
    (dict(min_blocks=9), "min_blocks"),
    (dict(min_blocks=0), "min_blocks"),
    (dict(rows=8, warp_cols=8, loads=16, threads=512), "threads"),  # 64 accumulators + 64 in flight > 128
])
def test_invalid_fields_name_the_field(fields, field):
    with pytest.raises(SpecError, match=field):
        Skinny(**fields)


def test_json_round_trip_and_type_checks():
    s = Skinny(dtype="bfloat16", rows=12, warp_cols=2, merge="two_pass", k_split=7)
    assert spec_from_json(s.to_json()) == s and spec_from_json(s.to_json()).key == s.key
    with pytest.raises(SpecError, match="rows"):
        Skinny(rows="8")
    with pytest.raises(SpecError, match="unknown field"):
        spec_from_json(json.dumps({"kernel": "skinny", "tile": [1, 2, 3]}))


@pytest.mark.parametrize("dtype", DTYPES)
def test_geometry_slabs_cover_k_once_aligned(dtype):
    rng = random.Random(1)
    for _ in range(300):
        try:
            s = Skinny(dtype=dtype, rows=rng.choice([1, 4, 8, 16]), warp_cols=rng.choice([1, 2, 4]),
                       threads=rng.choice([64, 128, 256, 512]), k_split=rng.choice([0, 0, 1, 3, 64]),
                       merge=rng.choice(["single_pass", "two_pass"]), loads=rng.choice([2, 8]))
        except SpecError:
            continue  # too many registers for the block size
        form = rng.choice(["dot", "axpy"])
        width = rng.choice(s.widths() if form == "dot" else s.axpy_widths())
        R, NC, K = rng.randint(1, 64), rng.randint(1, 20000), rng.randint(1, 30000)
        slots = rng.choice([132, 264, 1056])
        g = s.geometry(form, width, R, NC, K, slots)
        splits, ks = g["splits"], g["ks"]
        assert splits >= 1 and (splits - 1) * ks < K <= splits * ks      # every k in exactly one slab
        if form == "dot":
            assert ks % (32 * s.vec) == 0                                 # slabs start on whole vectors
        cols = s.dot_cols() if form == "dot" else s.axpy_cols(width)
        assert g["grid"] == (-(-NC // cols), splits, -(-R // s.rows))
        merged = {"single_pass": MODE_TICKET, "two_pass": MODE_PARTIALS}
        assert g["mode"] == (MODE_DIRECT if splits == 1 else merged[s.merge])
        if s.k_split:
            assert splits <= s.k_split
        else:
            # Auto: about `waves` waves of blocks (slabs round to whole steps), unless K is too short.
            least = 2 * (s.dot_step if form == "dot" else s.warps * s.axpy_unroll)
            blocks = g["grid"][0] * g["grid"][1] * g["grid"][2]
            assert 4 * blocks >= 3 * s.waves * slots or splits >= K // least // 2 or splits == 1


def test_auto_split_fills_132_sms_for_decode_shapes():
    s = Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, "float32")
    g = s.geometry("dot", 4, 1, 4096, 4096, 132 * 4)
    assert g["grid"][0] * g["grid"][1] >= 2 * 132 and g["splits"] > 1
    assert Skinny(merge="atomic").geometry("axpy", 4, 8, 4096, 4096, 264)["mode"] == MODE_ATOMIC
    assert Skinny(k_split=1).geometry("dot", 4, 8, 4096, 4096, 264)["mode"] == MODE_DIRECT


def test_form_from_strides():
    assert _form(4096, 4096, 1, 4096) == ("dot", 4096)       # W stored N x K, B = W.T
    assert _form(4096, 4096, 4100, 1) == ("axpy", 4100)      # B row-major with a padded row
    assert _form(4096, 4096, 3, 5) == (None, 0)              # no unit stride
    assert _form(1, 777, 1, 9) == ("dot", 777)               # one column: k-contiguous vector
    assert _form(1, 777, 9, 1) == ("axpy", 9)                # one column, strided
    assert _form(300, 1, 5, 1) == ("axpy", 300)              # K = 1
    assert _form(300, 1, 1, 5) == ("dot", 5)


def test_default_spec_and_suits_on_random_skinny_shapes():
    rng = random.Random(7)
    limits = {"max_threads_per_block": 1024, "max_shared_per_block_optin": 227 * 1024}
    for _ in range(400):
        dtype = rng.choice(DTYPES)
        small, large, K = rng.randint(1, 300), rng.randint(1, 20000), rng.randint(1, 20000)
        M, N = (small, large) if rng.random() < 0.5 else (large, small)
        p = {"M": M, "N": N, "K": K}
        s = Skinny.default_spec(p, dtype)
        assert s.dtype == dtype and s.k_split == 0 and s.merge == "single_pass"
        assert s.prune_reason(p, limits) is None or min(M, N) == 1
        r = min(M, N)
        if r <= 16:
            assert s.rows == r                                   # no idle accumulator rows
        elif r <= 64:
            assert r <= s.rows < r + 8
        else:
            tiles = -(-r // s.rows)
            assert s.rows <= 64 and tiles * s.rows - r < 8 * tiles   # even tiles, little waste
        acc = 2 if dtype == "float64" else 1
        want = 4 if s.rows <= 2 else max(1, min(8, 64 // (s.rows * acc)))  # ~64 accumulator registers
        assert s.warp_cols == want
        assert Skinny.suits(M, N, K, dtype) == (r <= SUITS_ROWS[dtype])
    assert Skinny.suits(1, 4096, 4096, "float32") and Skinny.suits(4096, 8, 4096, "float32")
    assert Skinny.suits(1, 4096, 4096, "bfloat16") and not Skinny.suits(4, 4096, 4096, "bfloat16")
    assert not Skinny.suits(4096, 4096, 4096, "float32") and not Skinny.suits(17, 4096, 4096, "float32")


def test_search_space_is_valid_and_contains_the_default():
    p = {"M": 8, "N": 4096, "K": 4096}
    space = Skinny.search_space(p, "float32")
    assert Skinny.default_spec(p, "float32") in space and len(space) > 20
    assert len({s.key for s in space}) == len(space)
    assert {s.merge for s in space} == {"single_pass", "two_pass", "atomic"}
    assert all(s.merge != "atomic" for s in Skinny.search_space(p, "float16"))


def test_family_interface_reference_and_tolerance():
    p = {"M": 3, "N": 50, "K": 70}
    rng = np.random.default_rng(0)
    A, B = Skinny.make_inputs(p, "float16", rng)
    assert A.dtype == np.float16 and A.shape == (3, 70) and B.shape == (70, 50)
    ref = Skinny.reference_output(p, (A, B))
    assert ref.dtype == np.float64 and np.allclose(ref, A.astype(np.float64) @ B.astype(np.float64))
    assert Skinny.output_shape(p) == (3, 50)
    w = Skinny.work(p, "bfloat16")
    assert w["bytes"] == (3 * 70 + 70 * 50 + 3 * 50) * 2 and w["flops"] == 2 * 3 * 50 * 70
    tol = {d: tolerance(d, 100) for d in ("bfloat16", "float16", "float32", "float64")}
    assert tol["bfloat16"] > tol["float16"] > tol["float32"] > tol["float64"]
    assert Skinny().tolerance_for(p) == tolerance("float32", 70)


def test_warp_reduce_scatter_plan_sums_every_value_once():
    """Simulate the dot form's shuffle reduction plan on 32 lanes: each flat index must end
    on exactly one emitting lane, holding the sum over all lanes."""
    rng = np.random.default_rng(3)
    for rows, wc in [(1, 1), (1, 4), (3, 4), (5, 3), (8, 4), (16, 4), (24, 2), (48, 1), (64, 1), (12, 5)]:
        s = Skinny(rows=rows, warp_cols=wc, loads=4)
        levels, kept, dup = s.scatter_levels()
        vals = rng.standard_normal((32, rows * wc))
        v, base = [list(x) for x in vals], [0] * 32
        for lv in levels:
            o, c, new = lv["offset"], lv["count"], [list(x) for x in v]
            for lane in range(32):
                if lv["halve"]:
                    h, up, p = c // 2, bool(lane & o), lane ^ o
                    for i in range(h):
                        new[lane][i] = (v[lane][i + h] if up else v[lane][i]) + (v[p][i] if p & o else v[p][i + h])
                    base[lane] += h if up else 0
                else:
                    for i in range(c):
                        new[lane][i] = v[lane][i] + v[lane ^ o][i]
            v = new
        got = {}
        for lane in range(32):
            if lane & dup:
                continue
            for i in range(kept):
                assert base[lane] + i not in got
                got[base[lane] + i] = v[lane][i]
        assert sorted(got) == list(range(rows * wc))
        assert np.allclose([got[f] for f in range(rows * wc)], vals.sum(0))


def test_render_is_deterministic_and_lists_every_width():
    for dtype in DTYPES:
        s = Skinny(dtype=dtype, rows=5)
        src = kgen.render(s)
        assert src == kgen.render(Skinny(dtype=dtype, rows=5))
        for w in s.widths():
            assert f"kgen_skinny_dot_v{w}(" in src
        for w in s.axpy_widths():
            assert f"kgen_skinny_axpy_v{w}(" in src
        assert "kgen_skinny_merge(" in src and "kgen_skinny_prescale(" in src
        assert ("atomicAdd(o.O" in src) == (dtype in ("float32", "float64"))
    assert Skinny(dtype="float16").widths() == [8, 4, 2, 1] and Skinny(dtype="float64").widths() == [2, 1]
    assert Skinny(vector_bytes=8).widths() == [2, 1]


# A representative set: every dtype, 1-64 rows (the defaults of decode shapes), and
# non-default fields (narrow loads, wide blocks, many columns per warp).
def _representative():
    shapes = {"float32": (1, 16, 64), "float16": (8,), "bfloat16": (4,), "float64": (16,)}
    specs = [Skinny.default_spec({"M": small, "N": 4096, "K": 4096}, dtype)
             for dtype, smalls in shapes.items() for small in smalls]
    specs += [Skinny(rows=8, warp_cols=8, loads=16, threads=256), Skinny(dtype="float16", rows=3, lane_vectors=4,
              vector_bytes=8, merge="two_pass"), Skinny(dtype="float64", rows=32, warp_cols=2, merge="atomic")]
    return specs


@pytest.mark.nvcc
def test_representative_specs_compile_for_sm90_without_spills():
    specs = _representative()
    with cf.ThreadPoolExecutor(2) as ex:
        built = list(ex.map(lambda s: kgen.compile(s, arch="sm_90"), specs))
    for s, c in zip(specs, built):
        names = set(c.resources)
        want = {f"kgen_skinny_dot_v{w}" for w in s.widths()} | {f"kgen_skinny_axpy_v{w}" for w in s.axpy_widths()}
        assert want | {"kgen_skinny_merge", "kgen_skinny_prescale"} <= names, (s.to_json(), sorted(names))
        spilled = {n: r for n, r in c.resources.items() if r["spill_stores"] or r["spill_loads"]}
        assert not spilled, f"{s.to_json()} spills: {spilled}"
        for n in want:
            assert c.resources[n]["shared_bytes"] <= 64, "the slab is dynamic shared memory, sized per form"
