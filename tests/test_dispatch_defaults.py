"""Dispatch on CPU: the shipped defaults (kgen.tune.defaults) and the family choice by shape."""
import math
import random
import numpy as np

import pytest

import kgen
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import ahead, defaults, dispatch
from kgen.tune.device import DeviceInfo, arch_limits
from kgen.tune.dispatch import forget, matmul_family, select

H100 = DeviceInfo("NVIDIA H100 80GB HBM3", "sm_90", arch_limits("sm_90"))
H200 = DeviceInfo("NVIDIA H200", "sm_90", arch_limits("sm_90"))
A100 = DeviceInfo("NVIDIA A100", "sm_80", arch_limits("sm_80"))


@pytest.fixture(autouse=True)
def _fresh():
    forget()
    yield
    forget()


def _shipped(family, op=None, dtype="float32"):
    tables = [t for t in defaults._load() if t["family"] == family and t.get("op") == op and t["dtype"] == dtype]
    if not tables:
        pytest.fail(f"kgen ships no {family} {op or ''} {dtype} table (kgen/tune/data/defaults.json)")
    return tables[0]


@pytest.mark.parametrize("op", ["dot", "sum", "max"])
def test_reductions_use_the_shipped_table_on_its_architecture(op):
    table = _shipped("reduce", op)
    shipped = {kgen.spec_from_dict(d).key for d in table["specs"]}
    rng = random.Random(5)
    for _ in range(10):
        n = int(2 ** rng.uniform(10, 28)) | 1
        for dev in (H100, H200):  # an sm_90 GPU without a table of its own uses the sm_90 one
            choice = select(kgen.Reduce, {"n": n, "op": op}, "float32", device=dev, db=False)
            assert choice.origin == "shipped" and choice.spec.key in shipped and choice.spec.op == op
    other = select(kgen.Reduce, {"n": 1 << 20, "op": op}, "float32", device=A100, db=False)
    assert other.origin == "default"


def test_the_model_picks_the_spec_that_wins_near_the_problem():
    specs = [kgen.Reduce(op="sum", block_size=256).to_dict(), kgen.Reduce(op="sum", block_size=1024).to_dict()]
    problems = [{"n": 2 ** e, "op": "sum"} for e in range(10, 29)]
    # The small-block spec wins below 2^20, the large one above.
    ms = [[1.0, 1.5] if p["n"] < 2 ** 20 else [2.0, 1.0] for p in problems]
    data = {"family": "reduce", "dtype": "float32", "device": "X", "arch": "sm_90", "op": "sum",
            "specs": specs, "problems": problems, "ms": ms}
    table = defaults.Table(data)
    assert table.choose({"n": 3000, "op": "sum"})[0].block_size == 256
    assert table.choose({"n": 3 * 2 ** 25, "op": "sum"})[0].block_size == 1024
    train = [i for i in range(len(problems)) if i % 3]
    test = [i for i in range(len(problems)) if i % 3 == 0]
    s = defaults.score(data, train, test)
    assert s["count"] == len(test) and s["worst"] > 0.6 and math.isclose(s["geomean_of_best"], 1.0, rel_tol=0.2)


def test_unmeasured_or_failed_specs_are_not_preferred():
    specs = [kgen.Reduce(op="sum", block_size=256).to_dict(), kgen.Reduce(op="sum", block_size=1024).to_dict()]
    data = {"family": "reduce", "dtype": "float32", "device": "X", "op": "sum", "specs": specs,
            "problems": [{"n": 2 ** 20, "op": "sum"}], "ms": [[None, 3.0]]}
    assert defaults.Table(data).choose({"n": 2 ** 20, "op": "sum"})[0].block_size == 1024


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_uses_the_shipped_table_when_there_is_one(dtype):
    shipped = {kgen.spec_from_dict(d).key for d in _shipped("matmul", None, dtype)["specs"]}
    choice = select(kgen.Matmul, {"M": 777, "N": 1500, "K": 333}, dtype, device=H200, db=False)
    assert choice.origin == "shipped" and choice.spec.key in shipped


def test_few_row_products_go_to_the_skinny_family_and_16_bit_to_tensor_cores():
    from kgen.ops.skinny import SMALL_SIMT_WIDE_ROWS, SUITS_ROWS

    rng = random.Random(11)
    for _ in range(50):
        big = (rng.randint(1024, 16384), rng.randint(1024, 16384))
        for dtype in ("float32", "float64", "float16", "bfloat16"):
            small = rng.randint(1, SUITS_ROWS[dtype])
            assert matmul_family(small, *big, dtype).kernel == "skinny"
            assert matmul_family(big[0], small, big[1], dtype).kernel == "skinny"
            if dtype == "float64":
                assert matmul_family(SUITS_ROWS[dtype] + 1, *big, dtype).kernel != "skinny"
        # float32 past the SIMT rows: the split-TF32 skinny forms, up to 96 rows whatever the
        # storage, up to 256 against a k-contiguous large operand, then the tiled family.
        mid, wide = rng.randint(SUITS_ROWS["float32"] + 1, 96), rng.randint(97, 256)
        for kc in (False, True):
            assert matmul_family(mid, *big, "float32", large_k_contiguous=kc).kernel == "skinny"
            assert matmul_family(big[0], mid, big[1], "float32", large_k_contiguous=kc).kernel == "skinny"
            assert matmul_family(wide, *big, "float32", large_k_contiguous=kc).kernel == ("skinny" if kc else "matmul")
            assert matmul_family(257, *big, "float32", large_k_contiguous=kc).kernel == "matmul"
            # K below 1024: the SIMT skinny forms up to SMALL_SIMT_WIDE_ROWS rows (the large side
            # here is at least 1024), the tiled family beyond.
            want = "skinny" if mid <= SMALL_SIMT_WIDE_ROWS else "matmul"
            assert matmul_family(mid, big[0], 512, "float32", large_k_contiguous=kc).kernel == want
        # 16-bit past the SIMT rows: the mma.m16n8k16 skinny dot form up to 64 rows against a
        # k-contiguous large operand; against a row-major one the axpy form up to 16 rows (8 where
        # the wgmma kernel reads it in place); more rows, the tiled tensor-core family.
        few = rng.randint(SUITS_ROWS["bfloat16"] + 1, 64)
        for dtype in ("float16", "bfloat16"):
            assert matmul_family(few, *big, dtype, large_k_contiguous=True).kernel == "skinny"
            assert matmul_family(big[0], few, big[1], dtype, large_k_contiguous=True).kernel == "skinny"
            row_major = "skinny" if few <= 16 else "tensor_matmul"
            assert matmul_family(few, *big, dtype, large_k_contiguous=False).kernel == row_major
            # Up to 64 rows against a weight that the wgmma kernel reads in place (aligned rows,
            # sm_90; N and K of 1024 and more): A's rows as its N (TensorMatmul.swap_suits), from
            # one row, in either storage order. Few columns keep the skinny forms' in-place
            # bounds (16 rows of a k-contiguous weight, 8 of an n-contiguous one).
            assert TensorMatmul.swap_suits(few, *big, dtype)
            for kc in (False, True):
                for rows in (1, 2, few):
                    assert matmul_family(rows, *big, dtype, False, kc, wgmma_in_place=True).kernel == "tensor_matmul"
            in_place = "skinny" if few <= 8 else "tensor_matmul"
            assert matmul_family(big[0], few, big[1], dtype, False, False, wgmma_in_place=True).kernel == in_place
            assert matmul_family(65, *big, dtype, large_k_contiguous=True).kernel == "tensor_matmul"
            assert matmul_family(17, *big, dtype, large_k_contiguous=False).kernel == "tensor_matmul"
            mid16 = rng.randint(17, 64)
            assert matmul_family(mid16, *big, dtype, False, True, wgmma_in_place=True).kernel == "tensor_matmul"
            assert matmul_family(mid16, *big, dtype, False, True, wgmma_in_place=False).kernel == "skinny"
            assert matmul_family(big[0], min(few, 16), big[1], dtype, False, True, wgmma_in_place=True).kernel == \
                "skinny"
    assert matmul_family(1000, 1000, 1000, "float32").kernel == "matmul"
    assert matmul_family(1000, 1000, 1000, "bfloat16").kernel == "tensor_matmul"


def test_tf32_only_when_allowed_and_large_float64_on_tensor_cores():
    assert matmul_family(2000, 2000, 2000, "float32").kernel == "matmul"
    assert matmul_family(2000, 2000, 2000, "float32", allow_tf32=True).kernel == "tensor_matmul"
    spec = select(kgen.TensorMatmul if hasattr(kgen, "TensorMatmul") else matmul_family(2000, 2000, 2000, "float32",
                  True), {"M": 2000, "N": 2000, "K": 2000}, "float32", device=H100, db=False).spec
    assert spec.tf32, "a float32 tensor-core spec computes as TF32: only reached with allow_tf32"
    for shape in ((4096, 4096, 4096), (300, 4096, 4096), (1000, 1000, 1000), (64, 2048, 2048), (4096, 4096, 256)):
        assert matmul_family(*shape, "float64").kernel == "tensor_matmul", shape
    for shape in ((512, 512, 512), (200, 200, 200), (1000, 1000, 20)):
        assert matmul_family(*shape, "float64").kernel == "matmul", shape


def test_the_large_operands_storage_order_is_read_from_strides():
    from kgen.tune.dispatch import _large_k_contiguous

    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 300)).astype(np.float32)      # few rows: the large operand is B
    W = rng.standard_normal((500, 300)).astype(np.float32)     # a weight stored N x K
    assert _large_k_contiguous(x, W.T, 20, 500)                # B = W.T: k-contiguous
    assert not _large_k_contiguous(x, np.ascontiguousarray(W.T), 20, 500)
    # few columns: the large operand is A (M x K), k-contiguous when row-major
    assert _large_k_contiguous(W, x.T, 500, 20) and not _large_k_contiguous(np.asfortranarray(W), x.T, 500, 20)


def test_split_tf32_route_can_be_turned_off(monkeypatch):
    big = (4096, 4096)
    monkeypatch.setenv("KGEN_SPLIT_TF32", "0")
    assert matmul_family(40, *big, "float32", large_k_contiguous=True).kernel == "matmul"
    assert matmul_family(8, *big, "float32").kernel == "skinny"          # the SIMT skinny forms stay
    monkeypatch.setenv("KGEN_SPLIT_TF32", "on")
    assert matmul_family(40, *big, "float32", large_k_contiguous=True).kernel == "skinny"
    monkeypatch.setenv("KGEN_SPLIT_TF32", "maybe")
    with pytest.raises(ValueError, match="KGEN_SPLIT_TF32"):
        matmul_family(40, *big, "float32")


def test_large_operand_row_alignment_reads_the_strides():
    from kgen.tune.dispatch import _large_rows_aligned

    x = np.zeros((5, 4096), np.float16)
    assert _large_rows_aligned(x, np.zeros((3000, 4096), np.float16).T, 5, 3000)          # W.T, K = 4096
    assert not _large_rows_aligned(x[:, :4095], np.zeros((3000, 4095), np.float16).T, 5, 3000)
    assert _large_rows_aligned(np.zeros((4096, 8), np.float16), np.zeros((8, 6), np.float16), 4096, 6)
    assert not _large_rows_aligned(np.zeros((4096, 9), np.float16), np.zeros((9, 6), np.float16), 4096, 6)


def _record_kernel_requests(monkeypatch) -> list:
    """kgen.matmul with no GPU: no sm_90 routes, and each kernel request (family, problem,
    overrides) recorded instead of built; the calls return nothing."""
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_split_on_hopper", lambda dtype: False)
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    asked: list = []
    monkeypatch.setattr(dispatch, "_kernel", lambda cls, problem, dtype, tune, overrides=None:
                        asked.append((cls, problem, dict(overrides or {}))) or (lambda A, B, **kw: None))
    dispatch.forget()
    return asked


def test_small_tiled_products_run_with_repack_off_unless_tuned_for_the_problem(monkeypatch):
    """kgen.matmul asks the tiled family for repack=False (element loads in one launch) on
    products of at most ELEMENT_LOADS_MAX_MACS multiply-adds, and leaves larger ones as
    selected; an exact tuned entry for the problem keeps its own repack."""
    from kgen.ops.matmul import ELEMENT_LOADS_MAX_MACS, Matmul
    from kgen.tune import dispatch

    asked = _record_kernel_requests(monkeypatch)
    rng = random.Random(3)
    seen = set()
    for _ in range(200):
        M, N, K = (int(2 ** rng.uniform(4, 13)) for _ in range(3))
        A, B = np.zeros((M, K), np.float32), np.zeros((K, N), np.float32)
        if dispatch.call_family(A, B, "float32") is not Matmul:
            continue
        kgen.matmul(A, B)
        cls, problem, overrides = asked[-1]
        small = M * N * K <= ELEMENT_LOADS_MAX_MACS
        assert cls is Matmul and (overrides.get("repack") is False) == small, (M, N, K, overrides)
        seen.add(small)
    assert seen == {True, False}
    dispatch.forget()

    # The override reaches the built spec, except for an exact tuned entry.
    monkeypatch.undo()
    built = []
    monkeypatch.setattr("kgen.core.kernel.build", lambda spec: built.append(spec) or spec)
    p = {"M": 300, "N": 301, "K": 77}
    tuned = Matmul(tile=(64, 64, 16), thread_tile=(4, 4), shared_memory=True, vector_loads=True, smem_pad=4,
                   repack=True)
    for origin, want in (("shipped", False), ("exact", True)):
        monkeypatch.setattr(dispatch, "select",
                            lambda cls, problem, dtype, o=origin: dispatch.Choice(tuned, o, problem))
        dispatch.forget()
        dispatch._kernel(Matmul, p, "float32", False, {"layout_a": "row", "layout_b": "row", "repack": False})
        assert built[-1].repack is want and built[-1].tile == tuned.tile, (origin, built[-1].to_json())
    dispatch.forget()


def test_16bit_few_row_products_of_element_only_rows_run_the_simt_forms(monkeypatch):
    """kgen.matmul asks the skinny family for its SIMT forms (tensor_cores=False) where a
    16-bit product has 2-4 rows and its large operand's rows are an odd number of elements
    apart and it is stored n-contiguous (a W.t() keeps the tensor-core dot form, whose
    granule reads beat the SIMT forms there), and only there; the family answers with its
    SIMT default spec, and an exact tuned entry keeps its own form."""
    from kgen.ops.skinny import SIMT_ELEMENT_ROWS_16, Skinny
    from kgen.tune import dispatch

    asked = _record_kernel_requests(monkeypatch)
    for dtype in ("float16", "float32"):
        for rows in (1, 2, 3, SIMT_ELEMENT_ROWS_16, SIMT_ELEMENT_ROWS_16 + 1, 12):
            for K, N, weights in ((4097, 3000, True), (4096, 3000, True), (2048, 3001, False), (2048, 3000, False)):
                A = np.zeros((rows, K), dtype)
                B = np.zeros((N, K), dtype).T if weights else np.zeros((K, N), dtype)
                kgen.matmul(A, B)
                cls, _, overrides = asked[-1]
                odd = (K if weights else N) % 2 == 1
                want = dtype == "float16" and 2 <= rows <= SIMT_ELEMENT_ROWS_16 and odd and not weights
                assert cls is Skinny and (overrides.get("tensor_cores") is False) == want, (dtype, rows, K, N, weights)
                # the few-columns mirror image (the same storage): A is the large operand
                kgen.matmul(B.T, A.T)
                assert (asked[-1][2].get("tensor_cores") is False) == want, (dtype, rows, K, N, weights, "columns")
    dispatch.forget()

    problem = {"M": 3, "N": 3000, "K": 4097}
    tc = Skinny.default_spec(problem, "bfloat16")
    assert tc.tensor_cores
    simt = tc.for_layouts(problem, tensor_cores=False)
    assert not simt.tensor_cores and simt == Skinny.simt_default_spec(problem, "bfloat16")
    assert simt.for_layouts(problem, tensor_cores=False) == simt
    monkeypatch.undo()
    built = []
    monkeypatch.setattr("kgen.core.kernel.build", lambda spec: built.append(spec) or spec)
    for origin, want_tc in (("shipped", False), ("exact", True)):
        monkeypatch.setattr(dispatch, "select", lambda cls, problem, dtype, o=origin: dispatch.Choice(tc, o, problem))
        dispatch.forget()
        dispatch._kernel(Skinny, problem, "bfloat16", False, {"tensor_cores": False})
        assert built[-1].tensor_cores is want_tc, origin
    dispatch.forget()


def test_16_bit_products_never_ask_for_the_skinny_wgmma_form_on_hopper(monkeypatch):
    """The skinny family's 16-bit wgmma form measured slower than the routes kgen.matmul takes
    (docs/matmul-record.md, "A 16-bit wgmma form, not routed"): on an sm_90 GPU, 16-bit products of
    17-64 rows get no instruction override and the 16-bit defaults stay mma.sync; float32
    products that wgmma_suits takes do get it."""
    from kgen.ops.skinny import Skinny
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    asked: list = []
    monkeypatch.setattr(dispatch, "_kernel", lambda cls, problem, dtype, tune, overrides=None:
                        asked.append((cls, dtype, dict(overrides or {}))) or (lambda A, B, **kw: None))
    dispatch.forget()
    rng = random.Random(9)
    seen = set()
    for _ in range(120):
        M, N, K = rng.randint(17, 64), rng.randint(1024, 8192), rng.randint(1024, 8192)
        dtype = rng.choice(["float16", "float32"])   # (numpy has no bfloat16; the rules read the name)
        W = np.zeros((N, K), dtype)
        kgen.matmul(np.zeros((M, K), dtype), W.T)
        cls, _, overrides = asked[-1]
        if cls is Skinny:
            assert (overrides.get("instruction") == "wgmma") == (dtype == "float32"), (M, N, K, dtype, overrides)
            seen.add(dtype)
        assert Skinny.default_spec({"M": M, "N": N, "K": K}, "float16").instruction == "mma_sync"
    assert "float32" in seen and "float16" in seen
    dispatch.forget()


def test_unaligned_weights_of_17_64_rows_go_to_the_in_place_transposed_tiles_where_they_win(monkeypatch):
    """On an sm_90 GPU, 17-64 rows against W.t() of a 16-bit weight whose rows are not 16-byte
    aligned run the wgmma kernel (whose producer threads read such a B in place: dispatch asks
    for b_realign by the strides) where N and K are both at most REALIGN_SWAP_MAX_SIDE, and the
    skinny forms elsewhere (a larger side, fewer or more rows); without wgmma the skinny forms
    throughout."""
    from kgen.ops.skinny import Skinny
    from kgen.ops.tensorcore import REALIGN_SWAP_MAX_SIDE, REALIGN_SWAP_ROWS, TensorMatmul
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    lo, hi = REALIGN_SWAP_ROWS
    side = REALIGN_SWAP_MAX_SIDE
    rng = random.Random(11)
    for _ in range(60):
        M, N, K = rng.randint(lo, hi), rng.randint(1024, side), rng.randint(1024, side)
        K += 1 - K % 2   # odd: W's rows are 2 K bytes apart, never a multiple of 16
        B = np.zeros((N, K), np.float16).T
        assert dispatch.call_family(np.zeros((M, K), np.float16), B, "float16") is TensorMatmul, (M, N, K)
        assert dispatch._realigns_b(B, M, N, K, "float16")
    for M, N, K in ((lo, side + 1, 2001), (hi, 2000, side + 3), (hi, 2000, side + 1)):
        A, B = np.zeros((M, K), np.float16), np.zeros((N, K), np.float16).T
        assert dispatch.call_family(A, B, "float16") is Skinny, (M, N, K)
        assert TensorMatmul.realign_swap_suits(M, N, K, "float16") is False
    for M in (lo - 1, hi + 1):
        assert TensorMatmul.realign_swap_suits(M, 2000, 2001, "float16") is False
    assert TensorMatmul.realign_swap_suits(40, 2000, 2001, "float32") is False   # 16-bit only
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    assert dispatch.call_family(np.zeros((40, 2001), np.float16), np.zeros((2000, 2001), np.float16).T,
                                "float16") is Skinny


def test_unaligned_row_major_weights_of_5_16_rows_go_to_the_transposed_tiles_by_row_sets(monkeypatch):
    """On an sm_90 GPU, 5-16 rows against a row-major 16-bit B whose rows TMA cannot read as
    they are (a pitch of no multiple of 8 elements: N, or the row stride) run the wgmma kernel
    reading B by row sets (dispatch asks for it by the strides); 2-4 rows keep the skinny SIMT
    forms, aligned pitches the skinny forms, W.t() the skinny forms (or from 9 rows the row sets
    a tile, where classes_suits), short sides the skinny forms; without
    wgmma the skinny forms throughout. REALIGN_ROW_ROWS starts where the SIMT forms for element
    rows stop."""
    from kgen.ops.skinny import SIMT_ELEMENT_ROWS_16, Skinny
    from kgen.ops.tensorcore import REALIGN_ROW_ROWS, TensorMatmul
    from kgen.tune import dispatch

    lo, hi = REALIGN_ROW_ROWS
    assert lo == SIMT_ELEMENT_ROWS_16 + 1
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    rng = random.Random(12)
    for _ in range(60):
        M, N, K = rng.randint(lo, hi), rng.randint(1024, 16384), rng.randint(1024, 16384)
        N += 1 - N % 2
        A, B = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
        assert dispatch.call_family(A, B, "float16") is TensorMatmul, (M, N, K)
        assert dispatch._realigns_b(B, M, N, K, "float16")
        # the same values at an even pitch that is no multiple of 8, an odd stride of an even
        # width; a pitch of a multiple of 8 (TMA reads it: the skinny forms stream it), W.t()
        even = N + 1 if (N + 1) % 8 else N + 3
        assert dispatch.call_family(A, np.zeros((K, even), np.float16)[:, :N], "float16") is TensorMatmul
        assert dispatch.call_family(A, np.zeros((K, N + 2), np.float16)[:, :N + 1], "float16") is TensorMatmul
        aligned = N + (-N) % 8
        Ba = np.zeros((K, aligned), np.float16)[:, :N]
        assert dispatch.call_family(A, Ba, "float16") is TensorMatmul and not dispatch._realigns_b(Ba, M, N, K,
                                                                                                  "float16")
        # W.t() of an odd pitch: the skinny forms, or from 9 rows the row sets a tile (classes_suits)
        wt = TensorMatmul if TensorMatmul.classes_suits(M, N, K, "float16") else Skinny
        assert dispatch.call_family(A, np.zeros((N, K + 1 - K % 2), np.float16).T[:K], "float16") is wt
    for M, N, K in ((lo - 1, 2001, 3000), (2, 2001, 3000), (hi + 1, 2001, 3000)):
        A, B = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
        family = dispatch.call_family(A, B, "float16")
        assert family is (TensorMatmul if M > hi else Skinny), (M, N, K, family)   # past 16: as before
        assert TensorMatmul.realign_row_suits(M, N, K, "float16") is False
    for M, N, K in ((8, 1001, 3000), (8, 2001, 1000)):   # a side below STREAM_MIN_SIDE
        assert TensorMatmul.realign_row_suits(M, N, K, "float16") is False
    assert TensorMatmul.realign_row_suits(8, 2001, 3000, "float32") is False   # 16-bit only
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    assert dispatch.call_family(np.zeros((8, 3000), np.float16), np.zeros((3000, 2001), np.float16),
                                "float16") is Skinny


def test_mid_size_16bit_products_of_unaligned_rows_run_mma_sync_reading_them_in_place(monkeypatch):
    """On an sm_90 GPU, a float16/bfloat16 product of SMALL_PRODUCT_MACS to UNALIGNED_ELEMENT_MACS
    multiply-adds whose A or B rows are not 16-byte aligned (K or N no multiple of 8, either
    storage order), and which neither the transposed nor the streaming tiles take, runs the
    mma.sync default with element loads (one launch) instead of the wgmma kernel after copies;
    aligned operands, larger products and other GPUs keep the wgmma kernel's tiles (or the
    portable choice); an exact tuned entry keeps its own."""
    from kgen.ops.tensorcore import SMALL_PRODUCT_MACS, UNALIGNED_ELEMENT_MACS
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    rng = random.Random(21)
    moved = kept = 0
    while moved < 25 or kept < 10:
        M, N, K = (int(2 ** rng.uniform(4, 13)) for _ in range(3))
        dtype = rng.choice(("float16", "bfloat16"))
        nptype = np.float16   # numpy has no bfloat16: the strides and shape are what count
        suits = TensorMatmul.element_loads_suits(M, N, K, dtype)
        assert suits == (SMALL_PRODUCT_MACS < M * N * K <= UNALIGNED_ELEMENT_MACS
                         and not TensorMatmul.swap_suits(M, N, K, dtype)
                         and not TensorMatmul.stream_suits(M, N, K, dtype)), (M, N, K)
        if dispatch.matmul_family(M, N, K, dtype) is not TensorMatmul:
            continue
        A, B = np.zeros((M, K), nptype), np.zeros((K, N), nptype)
        unaligned = K % 8 != 0 or N % 8 != 0
        overrides = dispatch.call_overrides(A, B, TensorMatmul, dtype, stand_in=True)
        assert overrides.get("element_loads", False) == (suits and unaligned), (M, N, K, overrides)
        spec = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype).for_layouts(
            {"M": M, "N": N, "K": K}, **overrides)
        if suits and unaligned:
            moved += 1
            assert spec.instruction == "mma_sync" and spec.repack is False and not spec.b_realign, spec.to_json()
            assert spec == TensorMatmul.element_spec({"M": M, "N": N, "K": K}, dtype).replace(
                layout_a=overrides["layout_a"], layout_b=overrides["layout_b"])
            # B as W.t() of an N x K weight: the same request, the spec reads it column-major
            Bt = np.zeros((N, K), nptype).T
            got = dispatch.call_overrides(A, Bt, TensorMatmul, dtype, stand_in=True)
            # both rows K long; a short K runs the short-K tiles against W.t() (SHORT_K_WEIGHT_T)
            assert got.get("element_loads", False) == (K % 8 != 0 or TensorMatmul.short_k_suits(M, N, K, dtype)), \
                (M, N, K, got)
            if K % 8:
                t = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype).for_layouts(
                    {"M": M, "N": N, "K": K}, **got)
                assert t.instruction == "mma_sync" and t.layout_b == "col" and t.repack is False
            # rows padded to a multiple of 8 (a wider buffer, sliced): nothing to copy, wgmma kept,
            # unless a short K's output rows (N apart) are what the wgmma kernel would store badly
            Ap = np.zeros((M, K + (-K) % 8), nptype)[:, :K]
            Bp = np.zeros((K, N + (-N) % 8), nptype)[:, :N]
            short_unaligned = bool(TensorMatmul.short_k_suits(M, N, K, dtype) and N % 8)
            assert ("element_loads" in dispatch.call_overrides(Ap, Bp, TensorMatmul, dtype, stand_in=True)) \
                is short_unaligned
        elif M * N * K > UNALIGNED_ELEMENT_MACS and not TensorMatmul.short_k_suits(M, N, K, dtype):
            kept += 1
            assert spec.instruction == "wgmma", spec.to_json()
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    A, B = np.zeros((1000, 301), np.float16), np.zeros((301, 777), np.float16)
    assert TensorMatmul.element_loads_suits(1000, 777, 301, "float16")
    assert "element_loads" not in dispatch.call_overrides(A, B, TensorMatmul, "float16", stand_in=True)
    assert TensorMatmul.element_loads_suits(1000, 777, 301, "float32") is False   # 16-bit only

    # The request reaches the spec call_spec resolves, except for an exact tuned entry.
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    p = {"M": 1000, "N": 777, "K": 301}
    tuned = TensorMatmul.wgmma_default_spec(p, "float16")
    for origin, want in (("shipped", "mma_sync"), ("exact", "wgmma")):
        monkeypatch.setattr(dispatch, "select",
                            lambda cls, problem, dtype, o=origin, **kw: dispatch.Choice(tuned, o, problem))
        assert dispatch.call_spec(A, B).instruction == want, origin
    with pytest.raises(kgen.ArrayError, match="inner dimensions"):
        dispatch.call_spec(A, np.zeros((300, 777), np.float16))


def test_short_k_16bit_products_run_mma_sync_in_tiles_that_share_an_sm(monkeypatch):
    """A float16/bfloat16 product of K at most SHORT_K_MAX and both sides of at least
    SHORT_K_MIN_SIDE runs mma.sync reading its operands in place, in 128x128 blocks two an SM
    where they make two waves or K is at least SHORT_K_WIDE_K, else 128x64 blocks three an SM
    (the spec compiles within those registers: prune_reason; it stages an output without pair
    stores): by default up to SMALL_PRODUCT_MACS, and on an sm_90 GPU, whatever its size, where
    N is no multiple of 8, B is W.t() (k-contiguous) or the element-load rule takes it; an
    aligned larger one against a row-major B keeps the wgmma kernel. Longer K, narrower products
    and float32 keep their own rules. Via call_spec, as kgen.matmul resolves it with no tuning
    database, both storage orders of B."""
    from kgen.ops.tensorcore import (SHORT_K_MAX, SHORT_K_MIN_SIDE, SHORT_K_WIDE_K, SHORT_K_WIDE_TILES,
                                     SMALL_PRODUCT_MACS)
    from kgen.tune import dispatch
    from kgen.tune.device import DeviceInfo, arch_limits

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    h100 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    rng = random.Random(31)
    seen = {"wide": 0, "narrow": 0, "wgmma": 0, "other": 0}
    while min(seen.values()) < 6:
        M, N = (int(2 ** rng.uniform(8, 13.5)) for _ in range(2))
        K = int(2 ** rng.uniform(3, 9))
        N, K = (N | 1 if rng.random() < 0.4 else N), (K | 1 if rng.random() < 0.4 else K)
        N, K = (-(-N // 8) * 8 if rng.random() < 0.3 else N), (-(-K // 8) * 8 if rng.random() < 0.3 else K)
        dtype = rng.choice(("float16", "bfloat16"))
        if dispatch.matmul_family(M, N, K, dtype) is not TensorMatmul:
            continue
        A = np.zeros((M, K), np.float16)
        B = np.zeros((K, N), np.float16) if rng.random() < 0.5 else np.zeros((N, K), np.float16).T
        spec = dispatch.call_spec(A, B, device=h100, db=False)
        suits = K <= SHORT_K_MAX and min(M, N) >= SHORT_K_MIN_SIDE
        assert TensorMatmul.short_k_suits(M, N, K, dtype) is suits
        if not suits:
            seen["other"] += 1
            assert (spec.tile, spec.min_blocks) not in (((128, 128, 32), 2), ((128, 64, 32), 3)), \
                (M, N, K, spec.to_json())
            continue
        small = M * N * K <= SMALL_PRODUCT_MACS
        element_rule = TensorMatmul.element_loads_suits(M, N, K, dtype) and (K % 8 or N % 8)
        weight_t = B.strides[0] == B.itemsize
        if not (small or N % 8 or element_rule or weight_t):
            seen["wgmma"] += 1
            assert spec.instruction == "wgmma" and spec.min_blocks == 0, (M, N, K, spec.to_json())
            continue
        assert spec.instruction == "mma_sync" and spec.repack is False and spec.split_k == 1, spec.to_json()
        assert spec.layout_b == ("col" if B.strides[0] == 2 and N > 1 else "row")
        wide = -(-M // 128) * -(-N // 128) >= SHORT_K_WIDE_TILES or K >= SHORT_K_WIDE_K
        seen["wide" if wide else "narrow"] += 1
        want = ((128, 128, 32), (64, 32), 2) if wide else ((128, 64, 32), (32, 32), 3)
        assert (spec.tile, spec.warp_tile, spec.min_blocks) == want, (M, N, K, spec.to_json())
        assert spec.staged_unaligned_output
        assert not spec.prune_reason({"M": M, "N": N, "K": K}, h100.limits)
    # Short K but float32 (the SIMT or split-TF32 rules), or a side under the bound: not these.
    assert not TensorMatmul.short_k_suits(4096, 4096, 64, "float32")
    assert not TensorMatmul.short_k_suits(SHORT_K_MIN_SIDE - 1, 4096, 64, "bfloat16")
    assert not TensorMatmul.short_k_suits(4096, 4096, SHORT_K_MAX + 1, "bfloat16")
    # Another GPU: the request is sm_90's (the rule's own default below SMALL_PRODUCT_MACS stands).
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    assert "element_loads" not in dispatch.call_overrides(np.zeros((4000, 33), np.float16),
                                                          np.zeros((33, 4001), np.float16), TensorMatmul,
                                                          "float16", stand_in=True)
    # The tuner's space holds both tiles.
    keys = {s.key for s in TensorMatmul.search_space({"M": 4096, "N": 4096, "K": 64}, "bfloat16")}
    for spec in (TensorMatmul.short_k_spec({"M": 4096, "N": 4096, "K": 64}, "bfloat16"),
                 TensorMatmul.short_k_spec({"M": 1000, "N": 1000, "K": 20}, "bfloat16")):
        assert spec.replace(repack=True).key in keys


def test_row_major_float32_few_row_products_take_one_tile_a_warp_where_blocks_are_few(monkeypatch):
    """The float32 tensor-core axpy form takes one tile a warp where two would leave fewer
    than AXPY_ONE_TILE_SM_SHARE blocks an SM (Skinny.one_tile_axpy_suits). kgen.matmul passes
    the SM count for an n-contiguous large operand only (either side of the product); the
    family applies it to float32 mma.sync specs with the split left to the launch only; an
    exact tuned entry keeps its own tiles."""
    from kgen.ops.skinny import AXPY_ONE_TILE_SM_SHARE, Skinny
    from kgen.tune import dispatch

    # The rule on the products it was fitted on (H200, 132 SMs): few blocks gain, many lose.
    for (M, N, K), want in (((13, 2944, 1600), True), ((16, 6336, 1408), True), ((14, 1280, 3264), True),
                            ((16, 2048, 2048), True), ((8, 1408, 6080), True), ((9, 3904, 1920), True),
                            ((8, 14336, 1152), False), ((7, 3456, 6976), False), ((10, 2752, 13696), False)):
        p = {"M": M, "N": N, "K": K}
        spec = Skinny.default_spec(p, "float32")
        assert spec.tensor_cores and spec.tc_tiles == 2 and spec.runs_tc_axpy
        assert spec.one_tile_axpy_suits(p, 132) is want, (M, N, K)
        assert spec.for_layouts(p, axpy_sms=132).tc_tiles == (1 if want else 2), (M, N, K)
        # the mirror image (few columns) counts the same blocks
        assert spec.one_tile_axpy_suits({"M": N, "N": M, "K": K}, 132) is want
    # The threshold itself: 16x2048x2048 has 4 column tiles of 512 x 16 slabs of 128 = 64 blocks.
    p = {"M": 16, "N": 2048, "K": 2048}
    spec = Skinny.default_spec(p, "float32")
    assert spec.one_tile_axpy_suits(p, math.floor(64 / AXPY_ONE_TILE_SM_SHARE) + 1)
    assert not spec.one_tile_axpy_suits(p, math.floor(64 / AXPY_ONE_TILE_SM_SHARE))
    # Specs it leaves alone: a fixed split, a cluster merge, wgmma, 16-bit, the SIMT forms.
    for other in (spec.replace(k_split=8), spec.replace(merge="cluster", k_split=4),
                  Skinny.wgmma_default_spec(p, "float32"), Skinny.default_spec(p, "bfloat16"),
                  Skinny.default_spec({"M": 3, "N": 2048, "K": 2048}, "float32")):
        assert not other.one_tile_axpy_suits(p, 132)
        # (the SIMT spec takes one wave there, by one_wave_axpy_suits, and keeps its tiles)
        assert other.for_layouts(p, axpy_sms=132).replace(waves=other.waves) == other

    asked = _record_kernel_requests(monkeypatch)
    monkeypatch.setattr(dispatch, "_sm_count", lambda: 132)
    for dtype in ("float32", "float16"):
        for weights in (True, False):
            A = np.zeros((16, 2048), dtype)
            B = np.zeros((2048, 2048), dtype).T if weights else np.zeros((2048, 2048), dtype)
            kgen.matmul(A, B)
            cls, _, overrides = asked[-1]
            want = dtype == "float32" and not weights
            assert cls is Skinny and (overrides.get("axpy_sms") == 132) is want, (dtype, weights)
            kgen.matmul(B.T, A.T)
            assert (asked[-1][2].get("axpy_sms") == 132) is want, (dtype, weights, "columns")
    dispatch.forget()

    # call_spec with a recorded GPU counts against that GPU's SMs (132 on an sm_90 record).
    monkeypatch.undo()
    h100 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    assert h100.limits["multiprocessors"] == 132
    for N, K, weights, tiles in ((2048, 2048, False, 1), (2048, 2048, True, 2), (14336, 1152, False, 2)):
        A = np.zeros((16, K), np.float32)
        B = np.zeros((N, K), np.float32).T if weights else np.zeros((K, N), np.float32)
        got = dispatch.call_spec(A, B, device=h100, db=False)
        assert isinstance(got, Skinny) and got.tc_tiles == tiles, (N, K, weights, got.to_json())
    dispatch.forget()

    built = []
    monkeypatch.setattr("kgen.core.kernel.build", lambda spec: built.append(spec) or spec)
    for origin, tiles in (("shipped", 1), ("exact", 2)):
        monkeypatch.setattr(dispatch, "select", lambda cls, problem, dtype, o=origin: dispatch.Choice(spec, o, problem))
        dispatch.forget()
        dispatch._kernel(Skinny, p, "float32", False, {"axpy_sms": 132})
        assert built[-1].tc_tiles == tiles, origin
    dispatch.forget()


def test_float32_weight_products_with_few_column_tiles_split_k_for_one_wave():
    """The float32 SIMT dot form (B = W.t()) splits K for one wave of blocks where its column
    tiles are fewer than DOT_WHOLE_K_SM_SHARE of the SMs (Skinny.one_wave_dot_suits, dispatch
    passing dot_sms); with more tiles, a row-major weight, 16-bit inputs, a fixed split or the
    tensor-core forms the spec is left as it was."""
    from kgen.ops.skinny import DOT_WHOLE_K_SM_SHARE, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    sms = h200.limits["multiprocessors"]
    # Fitted (seed 16101) and held-out (16102) products the rule changed, and ones past it.
    for (M, N, K), waves in (((5, 3904, 8384), 1), ((3, 1664, 10624), 1), ((1, 1920, 4096), 1),
                             ((1, 2048, 4992), 1), ((6, 1536, 7680), 1),
                             ((3, 11008, 4096), 2), ((1, 5120, 5120), 2), ((5, 13184, 3072), 2)):
        A = np.zeros((M, K), np.float32)
        W = np.zeros((N, K), np.float32)
        got = dispatch.call_spec(A, W.T, device=h200, db=False)
        assert isinstance(got, Skinny) and not got.tensor_cores and got.waves == waves, ((M, N, K), got.to_json())
        # the mirror image (W @ x.t(): few columns) counts the same tiles
        assert dispatch.call_spec(W, A.T, device=h200, db=False).waves == waves, (M, N, K)
        # a row-major weight runs the axpy form: one wave by its own rule up to 4 rows (one_wave_axpy_suits)
        row = dispatch.call_spec(A, np.zeros((K, N), np.float32), device=h200, db=False)
        assert row.waves == (1 if M <= 4 else 2) or row.tensor_cores, ((M, N, K), row.to_json())
    # The threshold: 64 columns a block at 3-6 rows, 32 at 1-2.
    p = {"M": 5, "N": 64 * 65, "K": 8192}
    spec = Skinny.default_spec(p, "float32")
    assert spec.dot_cols() == 64 and 65 < DOT_WHOLE_K_SM_SHARE * sms
    assert spec.one_wave_dot_suits(p, sms) and not spec.one_wave_dot_suits({**p, "N": 64 * 66 + 1}, sms)
    assert spec.for_layouts(p, dot_sms=sms).waves == 1
    two = {"M": 2, "N": 32 * 65, "K": 8192}
    assert Skinny.default_spec(two, "float32").for_layouts(two, dot_sms=sms).waves == 1
    assert Skinny.default_spec(two, "float32").for_layouts({**two, "N": 32 * 66 + 1}, dot_sms=sms).waves == 2
    for other in (spec.replace(k_split=6), spec.replace(merge="cluster", k_split=4),
                  Skinny.default_spec(p, "bfloat16"), Skinny.default_spec({**p, "M": 12}, "float32")):
        assert not other.one_wave_dot_suits(p, sms)
        # (the 12-row tensor-core spec takes 64-k windows at this 136 MB weight: another rule)
        assert other.for_layouts(p, dot_sms=sms).replace(tc_window=other.tc_window) == other
    dispatch.forget()


def test_float32_weight_products_of_3_to_6_rows_with_fewer_tiles_than_sms_take_4_columns_a_warp():
    """The float32 SIMT dot form of 3-6 rows (B = W.t()) streams 4 columns a warp, not 8, where 8
    would leave K whole on fewer column tiles than SMs (Skinny.narrow_dot_suits, dispatch passing
    dot_sms); where 8 split K (fewer tiles, a longer K), with as many tiles as SMs, 1-2 or 7+
    rows, a row-major weight, 16-bit or float64 inputs, a fixed split, a cluster merge or a
    choice tuned for the very problem the spec is left as it was."""
    from kgen.ops.skinny import DOT_NARROW_WARP_COLS, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    sms = h200.limits["multiprocessors"]
    # The products of the measurement (seeds 18003, 18013) the rule changes, and ones it leaves:
    # 42 and 29 tiles of 8 columns (K split for one wave), 82 with K cut in three, 173 and 132 tiles.
    for (M, N, K), cols, waves in (((4, 7040, 3136), 4, 2), ((4, 7552, 2176), 4, 2), ((4, 8192, 1792), 4, 2),
                                   ((3, 5824, 1984), 4, 2), ((3, 6272, 1280), 4, 2),
                                   ((5, 2688, 7744), 8, 1), ((4, 1856, 11904), 8, 1), ((3, 5248, 5824), 8, 2),
                                   ((5, 11072, 1152), 8, 2), ((6, 8448, 1024), 8, 2), ((2, 1536, 5184), 4, 1)):
        A = np.zeros((M, K), np.float32)
        W = np.zeros((N, K), np.float32)
        got = dispatch.call_spec(A, W.T, device=h200, db=False)
        assert isinstance(got, Skinny) and not got.tensor_cores, (M, N, K)
        assert (got.warp_cols, got.waves) == (cols, waves), ((M, N, K), got.to_json())
        assert dispatch.call_spec(W, A.T, device=h200, db=False).warp_cols == cols, (M, N, K)
        # a row-major weight runs the axpy form, whose spec keeps the default columns
        assert dispatch.call_spec(A, np.zeros((K, N), np.float32), device=h200, db=False).warp_cols == 8 or M <= 2
    # The thresholds: 66-131 tiles of 64 columns on 132 SMs narrow, 65 and 132 do not; nor does a K
    # that dot_few_tile_slabs cuts (two slabs from 3840 at 131 tiles, four from 1920 at 66).
    p = {"M": 5, "N": 64 * 131, "K": 1792}
    spec = Skinny.default_spec(p, "float32")
    assert spec.warp_cols == 8 and spec.dot_cols() == 64
    assert spec.narrow_dot_suits(p, sms) and not spec.narrow_dot_suits({**p, "N": 64 * 132}, sms)
    assert spec.narrow_dot_suits({**p, "N": 64 * 66}, sms) and not spec.narrow_dot_suits({**p, "N": 64 * 65}, sms)
    assert spec.narrow_dot_suits({**p, "K": 3776}, sms) and not spec.narrow_dot_suits({**p, "K": 3840}, sms)
    assert not spec.narrow_dot_suits({**p, "N": 64 * 66, "K": 1920}, sms)
    assert spec.for_layouts(p, dot_sms=sms).warp_cols == DOT_NARROW_WARP_COLS == 4
    assert spec.for_layouts({**p, "N": 64 * 132}, dot_sms=sms).warp_cols == 8
    assert spec.for_layouts(p, axpy_sms=sms).warp_cols == 8
    for other in (spec.replace(k_split=6), spec.replace(merge="cluster", k_split=4), spec.replace(rows=7),
                  Skinny.default_spec(p, "bfloat16"), Skinny.default_spec(p, "float64"),
                  Skinny.default_spec({**p, "M": 2}, "float32"), Skinny.default_spec({**p, "M": 12}, "float32")):
        assert not other.narrow_dot_suits(p, sms), other.to_json()
    # A choice tuned for exactly this problem keeps its columns.
    built = []
    import kgen.core.kernel

    saved = kgen.core.kernel.build
    saved_select = dispatch.select
    try:
        kgen.core.kernel.build = lambda s: built.append(s) or s
        for origin, cols in (("shipped", 4), ("exact", 8)):
            dispatch.select = lambda cls, problem, dtype, o=origin, **kw: dispatch.Choice(spec, o, problem)
            dispatch.forget()
            dispatch._kernel(Skinny, p, "float32", False, {"dot_sms": sms})
            assert built[-1].warp_cols == cols, origin
    finally:
        kgen.core.kernel.build, dispatch.select = saved, saved_select
        dispatch.forget()


def test_16bit_one_row_weight_products_with_fewer_tiles_than_sms_take_4_columns_a_warp(monkeypatch):
    """One row of a float16 or bfloat16 W.t() on the SIMT dot form (rows off a 16-byte
    boundary, K of WIDE_DOT_MIN_K_16 or more: 8 columns a warp by default_warp_cols) streams 4
    columns a warp where 8 would leave K whole on fewer column tiles than SMs
    (Skinny.narrow_dot_suits, dispatch passing dot_sms for 16-bit k-contiguous operands too);
    with more tiles, with K split (fewer tiles), at 2 rows, on the tensor-core forms, against a
    row-major weight and with 16-byte rows (the wgmma kernel) the spec is left as it was."""
    from kgen.ops.skinny import DOT_NARROW_WARP_COLS, WIDE_DOT_MIN_K_16, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    sms = h200.limits["multiprocessors"]
    assert sms == 132
    monkeypatch.setattr(dispatch, "_this_device", lambda: h200)
    dispatch.forget()
    # Products of the measurement (seeds 47201, 47202, 47101): 74-127 tiles of 64 columns take 4;
    # 152-192 tiles, and 56 or 20 with K split, keep 8.
    for (M, N, K), cols in (((1, 5792, 14716), 4), ((1, 5198, 12093), 4), ((1, 8109, 6229), 4),
                            ((1, 4718, 13378), 4), ((1, 7766, 8041), 4), ((1, 9710, 6681), 8),
                            ((1, 11833, 10252), 8), ((1, 3354, 15297), 8), ((1, 1248, 7836), 8)):
        A = np.zeros((M, K), np.float16)
        W = np.zeros((N, K), np.float16)
        got = dispatch.call_spec(A, W.T, device=h200, db=False)
        assert isinstance(got, Skinny) and not got.tensor_cores and got.rows == 1, ((M, N, K), got.to_json())
        assert got.warp_cols == cols, ((M, N, K), got.to_json())
        assert dispatch.call_spec(W, A.T, device=h200, db=False).warp_cols == cols, (M, N, K)
        # 16-byte rows: the wgmma kernel, whatever the tiles
        even = np.zeros((N, K - K % 8), np.float16)
        assert not isinstance(dispatch.call_spec(A[:, :K - K % 8], even.T, device=h200, db=False), Skinny)
    # The thresholds: 66-131 tiles of 64 columns narrow; 65 and 132 do not.
    for dtype in ("float16", "bfloat16"):
        p = {"M": 1, "N": 64 * 131, "K": WIDE_DOT_MIN_K_16 + 1}
        spec = Skinny.simt_default_spec(p, dtype)
        assert spec.warp_cols == 8 and spec.dot_cols() == 64
        assert spec.narrow_dot_suits(p, sms) and not spec.narrow_dot_suits({**p, "N": 64 * 132}, sms)
        assert spec.narrow_dot_suits({**p, "N": 64 * 66}, sms) and not spec.narrow_dot_suits({**p, "N": 64 * 65}, sms)
        assert spec.for_layouts(p, dot_sms=sms).warp_cols == DOT_NARROW_WARP_COLS
        assert spec.for_layouts(p, axpy_sms=sms).warp_cols == 8
        for other in (spec.replace(k_split=3), spec.replace(merge="cluster", k_split=2),
                      Skinny.default_spec({**p, "M": 2}, dtype), Skinny.simt_default_spec({**p, "M": 2}, dtype),
                      Skinny.default_spec({**p, "M": 8}, dtype), spec.replace(warp_cols=6)):
            assert not other.narrow_dot_suits(p, sms), other.to_json()
        # a shorter K gives 4 columns already
        assert Skinny.simt_default_spec({**p, "K": WIDE_DOT_MIN_K_16 - 8}, dtype).warp_cols == 4
    # A row-major weight runs the axpy form and gets no dot_sms.
    A, B = np.zeros((1, 7001), np.float16), np.zeros((7001, 5792), np.float16)
    assert "dot_sms" not in dispatch.call_overrides(A, B, Skinny, "float16", stand_in=True, device=h200)
    assert dispatch.call_overrides(A, np.zeros((5792, 7001), np.float16).T, Skinny, "float16", stand_in=True,
                                   device=h200)["dot_sms"] == sms
    dispatch.forget()


def test_float32_tensor_core_dot_form_reads_64_k_windows_from_64_mib_weights():
    """The float32 mma.sync tensor-core dot form (7-16 rows, B = W.t()) reads 64-k windows where
    the weight holds TC_LONG_WINDOW_MIN_BYTES or more (Skinny.long_window_dot_suits, dispatch
    passing dot_sms), 32-k ones below; a row-major weight (the axpy form), 16-bit inputs, more
    than 16 rows, the wgmma forms and a window already set are left as they were."""
    from kgen.ops.skinny import TC_LONG_WINDOW_MIN_BYTES, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    sms = h200.limits["multiprocessors"]
    # Products of the measurement (seeds 29003, 29201) on both sides of the threshold.
    for (M, N, K), window in (((9, 1344, 13760), 64), ((13, 10598, 1616), 64), ((8, 10240, 10816), 64),
                              ((15, 7744, 8704), 64), ((12, 4747, 3244), 32), ((16, 1152, 12480), 32),
                              ((7, 2752, 1984), 32), ((10, 7168, 1792), 32)):
        A = np.zeros((M, K), np.float32)
        W = np.zeros((N, K), np.float32)
        got = dispatch.call_spec(A, W.T, device=h200, db=False)
        assert isinstance(got, Skinny) and got.tensor_cores and got.instruction == "mma_sync", (M, N, K)
        assert got.tc_window == window, ((M, N, K), got.to_json())
        assert dispatch.call_spec(W, A.T, device=h200, db=False).tc_window == window, (M, N, K)
        assert dispatch.call_spec(A, np.zeros((K, N), np.float32), device=h200, db=False).tc_window == 32
    # The threshold counts the large operand's bytes, whichever side it is on.
    K = 4096
    at = {"M": 12, "N": TC_LONG_WINDOW_MIN_BYTES // (4 * K), "K": K}
    spec = Skinny.default_spec(at, "float32")
    assert spec.tc_window == 32 and spec.long_window_dot_suits(at)
    assert not spec.long_window_dot_suits({**at, "N": at["N"] - 1})
    assert spec.long_window_dot_suits({"M": at["N"], "N": 12, "K": K})
    assert spec.for_layouts(at, dot_sms=sms).tc_window == 64
    assert spec.for_layouts(at, axpy_sms=sms).tc_window == 32
    for other in (Skinny.default_spec(at, "bfloat16"), Skinny.default_spec({**at, "M": 24}, "float32"),
                  Skinny.wgmma_default_spec(at, "float32"), spec.replace(tensor_cores=False)):
        assert not other.long_window_dot_suits(at), other.to_json()
        assert other.for_layouts(at, dot_sms=sms).tc_window == 32
    dispatch.forget()


def test_float32_products_of_9_to_16_rows_against_a_narrow_weight_run_the_tensor_core_dot_form(monkeypatch):
    """float32 products of 9-16 rows against W.t() of a weight whose large side is
    TC_DOT_NARROW_MIN_LARGE to TC_MIN_DIM, with K of TC_MIN_DIM or more, run the split-TF32
    tensor-core dot form (Skinny.tc_dot_narrow_suits, dispatch passing dot_sms): 16 rows of mma
    tiles, two tiles a warp, 32-k windows, the two-pass merge, one wave, launched plainly.
    7-8 rows, a shorter K, a wider or very narrow weight, a row-major weight, float64,
    KGEN_SPLIT_TF32=0 and a fixed split keep the SIMT spec."""
    from kgen.ops.skinny import TC_DOT_NARROW_MIN_LARGE, TC_MIN_DIM, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))

    def spec_of(M, N, K, dtype=np.float32, weight_t=True):
        A = np.zeros((M, K), dtype)
        B = np.zeros((N, K), dtype).T if weight_t else np.zeros((K, N), dtype)
        return dispatch.call_spec(A, B, device=h200, db=False)

    # The measured products (seeds 61201, 61301), their edges, and products outside the rule.
    for (M, N, K), tc in (((11, 345, 5784), True), ((13, 210, 2033), True), ((16, 614, 2170), True),
                          ((9, 376, 5839), True), ((15, 961, 15643), True), ((14, 406, 1334), True),
                          ((12, TC_MIN_DIM - 1, TC_MIN_DIM), True), ((10, TC_DOT_NARROW_MIN_LARGE, 3001), True),
                          ((8, 472, 6534), False), ((7, 245, 11085), False),
                          ((16, 500, TC_MIN_DIM - 1), False), ((16, TC_DOT_NARROW_MIN_LARGE - 1, 4096), False)):
        got = spec_of(M, N, K)
        assert isinstance(got, Skinny) and got.tensor_cores == tc, ((M, N, K), got.to_json())
        if tc:
            assert (got.rows, got.tc_tiles, got.tc_window, got.merge, got.waves, got.programmatic,
                    got.l2_prefetch, got.instruction) == (16, 2, 32, "two_pass", 1, False, 0, "mma_sync"), got.to_json()
        # the mirror image: a few columns of a large k-contiguous A
        mirror = dispatch.call_spec(np.zeros((N, K), np.float32), np.zeros((M, K), np.float32).T,
                                    device=h200, db=False)
        assert mirror.tensor_cores == tc, ((M, N, K), mirror.to_json())
    # a row-major weight keeps the SIMT axpy form; float64 has no tensor-core form here
    assert not spec_of(11, 345, 5784, weight_t=False).tensor_cores
    assert not getattr(spec_of(11, 345, 5784, dtype=np.float64), "tensor_cores", False)
    p = {"M": 12, "N": 700, "K": 4096}
    simt = Skinny.simt_default_spec(p, "float32")
    assert simt.tc_dot_narrow_suits(p)
    for other in (simt.replace(k_split=6), simt.replace(merge="cluster", k_split=4),
                  Skinny.simt_default_spec({**p, "M": 8}, "float32"), Skinny.simt_default_spec(p, "float64")):
        assert not other.tc_dot_narrow_suits(p), other.to_json()
    assert simt.for_layouts(p).tensor_cores is False   # no dot_sms: the storage is not known
    assert simt.for_layouts(p, dot_sms=132).tensor_cores is True
    monkeypatch.setenv("KGEN_SPLIT_TF32", "0")
    assert not simt.tc_dot_narrow_suits(p)
    assert not spec_of(11, 345, 5784).tensor_cores


def test_float32_row_major_weight_products_of_5_and_6_rows_run_the_tensor_core_axpy_form():
    """float32 products of 5-6 rows against a row-major weight with K of TC_AXPY_FEW_ROWS_MIN_K
    or more run the split-TF32 tensor-core axpy form (Skinny.tc_axpy_few_rows_suits, dispatch
    passing axpy_sms), with two tiles a warp, the two-pass merge, one wave, launched plainly;
    1-4 rows, a shorter K, W.t(), float64, KGEN_SPLIT_TF32=0, a fixed split or a choice tuned for
    the very problem keep the SIMT spec."""
    import os

    from kgen.ops.skinny import TC_AXPY_FEW_ROWS_MIN_K, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    # The measured products (seeds 18052, 18053), the loss at K = 1024 among them, and others.
    for (M, N, K), tc in (((6, 3520, 4992), True), ((5, 11840, 1472), True), ((5, 11200, 3072), True),
                          ((6, 13376, 13632), True), ((5, 4800, 1024), False), ((4, 5248, 3840), False),
                          ((6, 3001, 1281), True), ((5, 2047, 1279), False)):
        A = np.zeros((M, K), np.float32)
        got = dispatch.call_spec(A, np.zeros((K, N), np.float32), device=h200, db=False)
        assert isinstance(got, Skinny) and got.tensor_cores == tc, ((M, N, K), got.to_json())
        if tc:
            assert (got.tc_tiles, got.merge, got.waves, got.programmatic) == (2, "two_pass", 1, False), got.to_json()
            assert got.runs_tc_axpy
        # the mirror image: few columns of a large n-contiguous operand
        assert dispatch.call_spec(np.zeros((K, N), np.float32).T, A.T, device=h200, db=False).tensor_cores == tc
        # W.t() keeps the SIMT dot form
        assert not dispatch.call_spec(A, np.zeros((N, K), np.float32).T, device=h200, db=False).tensor_cores
        assert not dispatch.call_spec(A.astype(np.float64), np.zeros((K, N), np.float64), device=h200,
                                      db=False).tensor_cores
    p = {"M": 5, "N": 4096, "K": TC_AXPY_FEW_ROWS_MIN_K}
    spec = Skinny.default_spec(p, "float32")
    assert not spec.tensor_cores and spec.axpy_acc_regs == 20 and spec.tc_axpy_few_rows_suits(p)
    assert not spec.tc_axpy_few_rows_suits({**p, "K": TC_AXPY_FEW_ROWS_MIN_K - 1})
    for other in (spec.replace(k_split=6), spec.replace(merge="cluster", k_split=4), spec.replace(rows=4),
                  Skinny.default_spec(p, "float64")):
        assert not other.tc_axpy_few_rows_suits(p), other.to_json()
    assert spec.for_layouts(p).tensor_cores is False   # no axpy_sms: the storage is not known
    saved = os.environ.get("KGEN_SPLIT_TF32")
    os.environ["KGEN_SPLIT_TF32"] = "0"
    try:
        assert not spec.tc_axpy_few_rows_suits(p)
    finally:
        if saved is None:
            del os.environ["KGEN_SPLIT_TF32"]
        else:
            os.environ["KGEN_SPLIT_TF32"] = saved
    built = []
    import kgen.core.kernel

    saved_build, saved_select = kgen.core.kernel.build, dispatch.select
    try:
        kgen.core.kernel.build = lambda s: built.append(s) or s
        for origin, tc in (("shipped", True), ("exact", False)):
            dispatch.select = lambda cls, problem, dtype, o=origin, **kw: dispatch.Choice(spec, o, problem)
            dispatch.forget()
            dispatch._kernel(Skinny, p, "float32", False, {"axpy_sms": 132})
            assert built[-1].tensor_cores is tc, origin
    finally:
        kgen.core.kernel.build, dispatch.select = saved_build, saved_select
        dispatch.forget()


def test_float32_row_major_weight_products_split_k_for_one_wave():
    """The float32 SIMT axpy form (B row-major, 1-4 rows: at most 16 accumulators a thread)
    splits K for one wave of blocks (Skinny.one_wave_axpy_suits, dispatch passing axpy_sms);
    5+ rows, float64 or 16-bit inputs, a fixed split or a cluster merge leave the spec's waves."""
    from kgen.ops.skinny import AXPY_SIMT_WAVES, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    sms = h200.limits["multiprocessors"]
    for (M, N, K), waves in (((1, 6848, 10816), 1), ((2, 2624, 2944), 1), ((4, 3136, 7104), 1),
                             ((1, 16320, 1856), 1), ((3, 7232, 2560), 1), ((5, 4800, 1024), 2), ((6, 2240, 1152), 2)):
        A = np.zeros((M, K), np.float32)
        got = dispatch.call_spec(A, np.zeros((K, N), np.float32), device=h200, db=False)
        assert isinstance(got, Skinny) and not got.tensor_cores and got.waves == waves, ((M, N, K), got.to_json())
        # the mirror image (few columns, the large operand n-contiguous): the same rule
        assert dispatch.call_spec(np.zeros((K, N), np.float32).T, A.T, device=h200, db=False).waves == waves
        f64 = dispatch.call_spec(A.astype(np.float64), np.zeros((K, N), np.float64), device=h200, db=False)
        assert f64.waves == 2, (M, N, K)
    assert AXPY_SIMT_WAVES == 1
    p = {"M": 3, "N": 4096, "K": 4096}
    spec = Skinny.default_spec(p, "float32")
    assert spec.waves == 2 and spec.one_wave_axpy_suits() and spec.axpy_acc_regs == 12
    assert Skinny.default_spec({**p, "M": 4}, "float32").one_wave_axpy_suits()
    assert not Skinny.default_spec({**p, "M": 5}, "float32").one_wave_axpy_suits()
    assert spec.for_layouts(p, axpy_sms=sms).waves == 1
    assert spec.for_layouts(p).waves == 2
    for other in (spec.replace(k_split=6), spec.replace(merge="cluster", k_split=4), spec.replace(rows=7),
                  Skinny.default_spec(p, "bfloat16"), Skinny.default_spec(p, "float64")):
        assert not other.one_wave_axpy_suits(), other.to_json()


def test_float32_and_float64_skinny_products_launch_programmatically_with_the_l2_prefetch():
    """kgen.matmul's few-row float32 (1-6 rows, the SIMT forms) and float64 products run specs
    launched programmatically with SIMT_L2_PREFETCH_KIB of each block's slab asked of L2, in
    either storage order of the weight; the split-TF32 tensor-core forms (float32 from 7 rows),
    which lost with the prefetch, and 16-bit products stay plain."""
    from kgen.ops.skinny import SIMT_L2_PREFETCH_KIB, Skinny
    from kgen.tune import dispatch

    h200 = DeviceInfo("Recorded GPU", "sm_90", arch_limits("sm_90"))
    # Held-out products of the measurement (seeds 17003, 17004) and a few others.
    for dtype, (M, N, K) in (("float32", (4, 13056, 1024)), ("float32", (1, 6144, 2240)),
                             ("float32", (3, 1984, 10112)), ("float64", (6, 3392, 2176)),
                             ("float64", (1, 5248, 2304)), ("float32", (1, 1000, 37))):
        A = np.zeros((M, K), dtype)
        for B in (np.zeros((N, K), dtype).T, np.zeros((K, N), dtype)):
            got = dispatch.call_spec(A, B, device=h200, db=False)
            assert isinstance(got, Skinny) and not got.tensor_cores, (dtype, M, N, K, got.to_json())
            assert got.programmatic and got.l2_prefetch == SIMT_L2_PREFETCH_KIB, (dtype, M, N, K, got.to_json())
    for M, N, K in ((7, 3456, 2240), (12, 4096, 4096), (16, 14336, 4096)):
        got = dispatch.call_spec(np.zeros((M, K), np.float32), np.zeros((N, K), np.float32).T, device=h200, db=False)
        assert not got.programmatic and not got.l2_prefetch, ((M, N, K), got.to_json())
    for dtype in ("float16", "bfloat16"):
        assert not Skinny.default_spec({"M": 1, "N": 4096, "K": 4096}, dtype).programmatic
    dispatch.forget()


def test_float32_7_16_rows_against_wide_w_t_ask_for_the_wgmma_form_on_hopper(monkeypatch):
    """On an sm_90 GPU, float32 products of 7-16 rows (or columns) against a k-contiguous large
    operand of at least WG_WIDE_DOT_MIN_LARGE columns (K >= 1024) get the wgmma form; narrower
    ones, row-major large operands, fewer rows, another GPU and KGEN_SPLIT_TF32=0 keep the forms
    they had (no instruction override)."""
    from kgen.ops.skinny import SIMT_F32_ROWS, WG_MIN_ROWS, WG_WIDE_DOT_MIN_LARGE, Skinny
    from kgen.tune import dispatch

    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: True)
    asked: list = []
    monkeypatch.setattr(dispatch, "_kernel", lambda cls, problem, dtype, tune, overrides=None:
                        asked.append((cls, dict(overrides or {}))) or (lambda A, B, **kw: None))
    dispatch.forget()

    def instruction(M, N, K, w_t=True, columns=False):
        large = np.zeros((N, K), np.float32)
        if columns:   # C of few columns: A (N x K, row-major: k-contiguous) against B = S^T
            kgen.matmul(large if w_t else np.asfortranarray(large), np.zeros((M, K), np.float32).T)
        else:
            kgen.matmul(np.zeros((M, K), np.float32), large.T if w_t else np.zeros((K, N), np.float32))
        cls, overrides = asked[-1]
        assert cls is Skinny, (M, N, K)
        return overrides.get("instruction")

    rng = random.Random(26)
    wide = WG_WIDE_DOT_MIN_LARGE
    for _ in range(30):
        M, N, K = rng.randint(SIMT_F32_ROWS + 1, WG_MIN_ROWS - 1), rng.randint(wide, 4 * wide), rng.randint(1024, 4096)
        assert instruction(M, N, K) == "wgmma", (M, N, K)
        assert instruction(M, N, K, columns=True) == "wgmma", (M, N, K)
        assert instruction(M, N, K, w_t=False) is None, (M, N, K)
        assert instruction(M, rng.randint(1024, wide - 1), K) is None, (M, N, K)
        assert instruction(M, N, rng.randint(64, 1023)) is None, (M, N, K)
        assert instruction(rng.randint(1, SIMT_F32_ROWS), N, K) is None, (M, N, K)
    assert Skinny.wgmma_wide_dot_suits(SIMT_F32_ROWS + 1, wide, 1024)
    assert not Skinny.wgmma_wide_dot_suits(WG_MIN_ROWS, wide, 1024)   # wgmma_suits' own range
    monkeypatch.setenv("KGEN_SPLIT_TF32", "0")
    dispatch.forget()
    assert instruction(12, 2 * wide, 2048) is None
    monkeypatch.delenv("KGEN_SPLIT_TF32")
    monkeypatch.setattr(dispatch, "_runs_wgmma", lambda: False)
    dispatch.forget()
    assert instruction(12, 2 * wide, 2048) is None
    dispatch.forget()


_H100 = ahead.stand_in_device("sm_90", "NVIDIA H100 80GB HBM3", 132)
_A100 = ahead.stand_in_device("sm_80", "NVIDIA A100-SXM4-80GB", 108)


def _float64_spec(M, N, K, w_t, device=None):
    """The spec kgen.matmul runs for a float64 M x N x K product on `device` (None: an H100
    stand-in), B = W.t() when w_t else row-major: numpy views that own one element."""
    one = np.zeros(1)
    A = np.lib.stride_tricks.as_strided(one, (M, K), (K * 8, 8))
    B = np.lib.stride_tricks.as_strided(one, (K, N), (8, K * 8) if w_t else (N * 8, 8))
    return dispatch.call_spec(A, B, device=device or _H100, db=False)


def test_float64_products_of_9_to_64_rows_run_tiles_sized_to_their_rows_on_hopper():
    """On an H100 (stand-in), float64 products of 9-64 rows against N and K of 1024 or more run
    TensorMatmul's m16n8k16 tiles of the rows rounded up to 16, 64 columns, K split to fill the
    waves of resident blocks (wave_split); a weight whose rows are not 16 bytes apart is read in place (repack
    off), an aligned one keeps repack on (a no-op for it). 8 rows, N or K under 1024 and a GPU
    other than sm_90 keep the specs they had. The tuner's space holds the same tiles. They ask
    the L2 for whole 128-byte lines around each copy (l2_fetch)."""
    from kgen.ops.tensorcore import (F64_FEW_L2_FETCH, F64_FEW_MAX_ROWS, F64_FEW_MIN_ROWS, F64_FEW_MIN_SIDE,
                                     TensorMatmul, wave_split)
    from kgen.tune import dispatch

    spec, a100 = _float64_spec, _A100

    rng = random.Random(94)
    for _ in range(40):
        M = rng.randint(F64_FEW_MIN_ROWS, F64_FEW_MAX_ROWS)
        N, K = (rng.randint(F64_FEW_MIN_SIDE, 12000) for _ in range(2))
        w_t = rng.random() < 0.5
        got = spec(M, N, K, w_t)
        bm = -(-M // 16) * 16
        assert got.kernel == "tensor_matmul" and got.tile == (bm, 64, 16), ((M, N, K, w_t), got.to_json())
        assert got.mma_shape == "m16n8k16" and got.warp_tile == (16, 32) and got.layout_b == ("col" if w_t else "row")
        assert got.l2_fetch == F64_FEW_L2_FETCH == 128, got.to_json()
        assert got.repack == ((K if w_t else N) % 2 == 0), ((M, N, K, w_t), got.to_json())
        tiles = -(-N // 64)
        assert got.min_blocks >= 1 and got.split_k == wave_split(tiles, 132 * got.min_blocks, K)
        # (A weight read by elements also sets the b_elements fields, which need repack off.)
        assert got.replace(layout_b="row", repack=True, repack_a=False,
                           spread_elements=False) in TensorMatmul.search_space({"M": M, "N": N, "K": K}, "float64")
        # Too few rows, short sides, another GPU: not these tiles.
        for other in (spec(rng.randint(1, F64_FEW_MIN_ROWS - 1), N, K, w_t), spec(M, N, rng.randint(64, 1023), w_t),
                      spec(M, N, K, w_t, device=a100)):
            assert not (other.kernel == "tensor_matmul" and other.warp_tile == (16, 32)), other.to_json()
    dispatch.forget()


def _row_tile_rows(M):
    """Rows a tile at 65-256 rows: 96 where 96-row tiles cover M with fewer rows than 64-row ones
    (65-96 rows), else the default's 64 (128-row tiles only ever tie with them)."""
    return 96 if M <= 96 else 64


def _rows_split(M, N, K, bm):
    """The K split of a float64 tile of bm rows and 64 columns at 65-256 rows: the SM model's
    (f64_sm_split) for the 64 x 64 default's tiles from F64_BUSY_TILES_PER_SM an SM up, else
    wave_split over the tiles' slots, past a whole wave too."""
    from kgen.ops.tensorcore import F64_BUSY_TILES_PER_SM, f64_sm_split, wave_split

    tiles = -(-M // bm) * -(-N // 64)
    if bm == 64 and tiles >= F64_BUSY_TILES_PER_SM * 132:
        return f64_sm_split(M, N, K, tiles)
    return wave_split(tiles, 264 if bm == 96 else 396, K, whole_waves=True)


def test_float64_products_of_65_to_256_rows_run_96_row_tiles_where_they_cover_fewer_rows_or_64_by_128():
    """On an H100 (stand-in), a float64 product of 65-256 rows (N and K of 1024 or more, either
    weight order) runs 96 x 64 tiles at 65-96 rows (fewer rows than two 64-row tiles), two blocks
    an SM, and the 64 x 64 default (three an SM) past that, K split as _rows_split says (past a whole
    wave too); it takes wide_f64_spec's 64 x 128 tiles instead exactly where both leave K whole and
    f64_wave_cost puts the wide tiles F64_WIDE_MARGIN below the others. Products past 256 rows and
    an A100 take neither new tile; the tuner's space holds the 96- and 128-row tiles."""
    from kgen.ops.tensorcore import F64_WIDE_MARGIN, TensorMatmul, c_tiles, f64_row_tile, wave_split

    spec, a100 = _float64_spec, _A100
    rng = random.Random(1004)
    seen = {96: 0, 64: 0, "wide": 0}
    # 160 draws of 65-256 rows, then 60 of 129-192 rows and K short enough to stay whole, where
    # the wide tiles can take fewer waves.
    for i in range(220):
        if i < 160:
            M, N, K = rng.randint(65, 256), rng.randint(1024, 16000), rng.randint(1024, rng.choice((3000, 16000)))
        else:
            M, N, K = rng.randint(129, 192), rng.randint(1024, 16000), rng.randint(1024, 2047)
        w_t = rng.random() < 0.5
        got = spec(M, N, K, w_t)
        bm = _row_tile_rows(M)
        assert f64_row_tile(M) == bm
        slots = 264 if bm == 96 else 396
        rows, wide = c_tiles(M, N, bm, 64), c_tiles(M, N, 64, 128)
        s_rows = wave_split(rows, slots, K, whole_waves=True)
        s_wide = wave_split(wide, 264, K, whole_waves=True)
        # f64_wave_cost: waves of each tile's blocks (two or three an SM) times the C they hold.
        if s_rows == s_wide == 1 and (-(-wide // 264) * 64 * 128 * 264
                                      < (1 - F64_WIDE_MARGIN) * -(-rows // slots) * bm * 64 * slots):
            seen["wide"] += 1
            assert (got.tile, got.warp_tile, got.mma_shape, got.min_blocks, got.split_k) == (
                (64, 128, 16), (32, 64), "m16n8k8", 2, 1), ((M, N, K, w_t), got.to_json())
            assert spec(M, N, K, w_t, a100).tile[:2] != (64, 128)
        else:
            seen[bm] += 1
            assert (got.tile, got.warp_tile, got.mma_shape, got.min_blocks, got.split_k) == (
                (bm, 64, 16), (32, 32), "m16n8k16", 2 if bm == 96 else 3, _rows_split(M, N, K, bm)), (
                (M, N, K, w_t), got.to_json())
        assert got.edge_copies == "masked" and got.stages == 3 and got.l2_fetch == 0, got.to_json()
        assert got.layout_b == ("col" if w_t else "row")
        assert spec(M, N, K, w_t, a100).tile[:2] in ((64, 64), (64, 128))
    assert min(seen.values()) >= 5, seen
    # 186x11244x1609: 528 64 x 64 tiles are 1.33 waves of 396 and K too short to split; 264 wide
    # tiles are one wave.
    assert spec(186, 11244, 1609, False).tile == (64, 128, 16)
    assert spec(189, 6022, 3409, False).tile == (64, 64, 16)
    assert spec(87, 11949, 11072, False).tile == (96, 64, 16)
    assert spec(241, 6395, 5505, False).tile == (64, 64, 16)   # 64 x 128 tiles would split K 9 ways
    space = TensorMatmul.search_space({"M": 150, "N": 8000, "K": 4000}, "float64")
    for bm in (96, 128):
        assert TensorMatmul.row_tile_f64_spec({"M": 150, "N": 8000, "K": 4000}, bm) in space
    with pytest.raises(ValueError, match=r"M=150 takes the 64 x 64 default's rows .*pass bm, one of \(96, 128\)"):
        TensorMatmul.row_tile_f64_spec({"M": 150, "N": 8000, "K": 4000})
    with pytest.raises(ValueError, match=r"bm=64 is not allowed: one of \(96, 128\)"):
        TensorMatmul.row_tile_f64_spec({"M": 150, "N": 8000, "K": 4000}, 64)
    for M in (257, 400, 1000):
        assert spec(M, 11244, 1609, False).tile == (64, 64, 16)
    dispatch.forget()


def test_float64_tiles_allocate_their_copies_in_l1_where_k_puts_rows_off_32_byte_sectors():
    """On an H100 (stand-in), every float64 product on the FP64 tensor cores (9-4096 rows, either
    weight order) runs with l1_copies exactly where K = 1 or 2 mod 4 (its contiguous A's rows then
    start 16 bytes into a sector, in place or copied at the 16-byte pitch), and the tuner's space
    holds the other choice; 16-bit and TF32 defaults never ask for it."""
    from kgen.ops.tensorcore import TensorMatmul, f64_rows_off_sectors

    spec = _float64_spec
    rng = random.Random(4242)
    seen = set()
    for _ in range(80):
        M = rng.choice((rng.randint(9, 64), rng.randint(65, 256), rng.randint(257, 4096)))
        N, K = rng.randint(1024, 12000), rng.randint(1024, 12000)
        got = spec(M, N, K, rng.random() < 0.5)
        if got.kernel != "tensor_matmul":
            continue
        assert got.l1_copies == (K % 4 in (1, 2)) == f64_rows_off_sectors(K), ((M, N, K), got.to_json())
        seen.add((got.tile[0] if M <= 256 else "big", got.l1_copies))
        if len(seen) < 4:
            default = TensorMatmul.default_spec({"M": M, "N": N, "K": K}, "float64")
            assert default.l1_copies == got.l1_copies
            space = TensorMatmul.search_space({"M": M, "N": N, "K": K}, "float64")
            assert default in space and default.replace(l1_copies=not got.l1_copies) in space
    assert {flag for _, flag in seen} == {True, False} and len(seen) >= 6, seen
    for dtype in ("float16", "bfloat16", "float32"):
        for M, N, K in ((4096, 4096, 4094), (30, 5000, 4001), (2000, 100, 30)):
            assert not TensorMatmul.default_spec({"M": M, "N": N, "K": K}, dtype).l1_copies
    dispatch.forget()


def test_float64_default_tiles_fewer_than_a_wave_split_k_to_fill_the_waves_on_hopper():
    """On an H100 (stand-in), float64 products past the 96-row tiles (97-1024 rows) run the 64 x 64
    m16n8k16 default, three blocks an SM; where its tiles are fewer than a wave (396) and K is 512
    or more, K is split by wave_split (more than once where the tiles leave a third of the wave
    idle), else it stays whole; from a wave up, at 97-256 rows, into slices of at least 1024 that
    shrink the last wave. An A100 keeps m8n8k4."""
    from kgen.ops.tensorcore import wave_split
    from kgen.tune import dispatch

    a100 = _A100

    def spec(M, N, K, device=None):
        return _float64_spec(M, N, K, True, device)

    rng = random.Random(95)
    seen = set()
    for _ in range(40):
        M, N, K = rng.randint(97, 1024), rng.randint(1024, 12000), rng.randint(512, 12000)
        if M * N * K < 1 << 28:
            continue
        got = spec(M, N, K)
        if M <= 256 and got.tile[:2] == (64, 128):
            continue   # wide_f64_spec's waves fill better (the test above says exactly where)
        assert got.kernel == "tensor_matmul" and got.tile[:2] == (64, 64) and got.mma_shape == "m16n8k16"
        assert got.min_blocks == 3, got.to_json()
        tiles = -(-M // 64) * -(-N // 64)
        want = _rows_split(M, N, K, 64) if M <= 256 else wave_split(tiles, 396, K)
        assert got.split_k == want, ((M, N, K), got.to_json())
        if tiles >= 396 and (M > 256 or K < 2048 or tiles % 396 == 0):
            assert got.split_k == 1
        elif tiles < 396 // 2 and K >= 1024:   # under F64_BUSY_TILES_PER_SM an SM: split to fill
            assert got.split_k > 1, ((M, N, K), got.to_json())
        seen.add(got.split_k > 1)
        assert spec(M, N, K, device=a100).mma_shape != "m16n8k16"
    assert seen == {True, False}
    # From a wave of tiles up, 65-256 rows split K into two or three slices of at least 1024 where
    # that shrinks the last wave; past 256 rows, or with a short K, K stays whole.
    for (M, N, K), split in (((241, 6395, 5505), 3), ((175, 11305, 5267), 2), ((196, 8768, 12613), 2),
                             ((143, 12486, 1348), 1), ((429, 4051, 2356), 1), ((300, 9000, 9000), 1)):
        got = spec(M, N, K)
        assert -(-M // 64) * -(-N // 64) >= 396 and got.tile[:2] == (64, 64), got.to_json()
        assert got.split_k == split, ((M, N, K), got.to_json())
    dispatch.forget()


def test_float64_weights_whose_rows_are_not_16_bytes_apart_are_read_in_place_up_to_1024_rows():
    """On an H100 (stand-in), a float64 product of 65-F64_IN_PLACE_MAX_ROWS rows on the FP64
    tensor cores reads a weight whose rows are not 16 bytes apart (a row-major one of an odd N,
    a W.t() of an odd K) in place (repack off); a weight of even rows, products of more rows and
    an A100 keep repack on (copied first)."""
    from kgen.tune import dispatch
    from kgen.tune.dispatch import F64_IN_PLACE_MAX_ROWS

    spec = _float64_spec
    assert F64_IN_PLACE_MAX_ROWS == 1024
    rng = random.Random(96)
    for _ in range(30):
        M = rng.randint(65, F64_IN_PLACE_MAX_ROWS)
        N, K = rng.randint(2048, 12000) | 1, rng.randint(2048, 12000) | 1
        assert spec(M, N, K, False).repack is False, (M, N, K)
        assert spec(M, N, K, True).repack is False, (M, N, K)
        assert spec(M, N + 1, K, False).repack is True, (M, N + 1, K)
        assert spec(M, N, K + 1, True).repack is True, (M, N, K + 1)
        big = rng.randint(F64_IN_PLACE_MAX_ROWS + 1, 4096)
        assert spec(big, N, K, False).repack is True and spec(big, N, K, True).repack is True, (big, N, K)
        assert spec(M, N, K, False, _A100).repack is True   # measured on sm_90 only
    dispatch.forget()


def test_float64_64x64_tiles_reading_a_weight_by_elements_copy_a_aligned_and_spread_the_copies():
    """On an H100 (stand-in), where a float64 weight is read in place by the element-load entry
    (its rows not 16 bytes apart), the 64 x 64 tiles (the few-row tiles at 49-64 rows, the default
    at 97-1024) copy A aligned first and spread B's element copies along its rows (repack_a,
    spread_elements: with_b_elements); the 96-row and 16-48-row tiles, aligned weights and an A100
    never do, and a spec the rule does not fit comes back unchanged."""
    from kgen.ops.tensorcore import F64_B_ELEMENTS_TILE, TensorMatmul

    spec = _float64_spec
    assert F64_B_ELEMENTS_TILE == (64, 64)
    rng = random.Random(104)
    seen = set()
    for _ in range(60):
        M = rng.choice((rng.randint(9, 64), rng.randint(65, 256), rng.randint(257, 1024)))
        N, K = rng.randint(1024, 12000) | 1, rng.randint(1024, 12000) | 1
        for w_t in (False, True):
            got = spec(M, N, K, w_t)
            if got.kernel != "tensor_matmul":
                continue
            on = got.tile[:2] == (64, 64)
            assert got.repack is False and got.repack_a == on and got.spread_elements == on, ((M, N, K, w_t),
                                                                                             got.to_json())
            seen.add((got.tile[0], on))
            # An aligned weight of the same product: copied first where it must be, nothing to spread.
            aligned = spec(M, N + 1, K, False) if not w_t else spec(M, N, K + 1, True)
            assert not aligned.repack_a and not aligned.spread_elements, aligned.to_json()
            a100 = spec(M, N, K, w_t, _A100)
            assert not getattr(a100, "repack_a", False) and not getattr(a100, "spread_elements", False)
    assert {(64, True), (96, False)} <= seen and any(bm < 64 for bm, _ in seen), seen
    swizzled = TensorMatmul(dtype="float64", tile=(64, 64, 16), warp_tile=(32, 32), repack=False)
    assert swizzled.with_b_elements() is swizzled   # the copies need rows linear in shared memory
    copied = TensorMatmul.default_spec({"M": 200, "N": 5001, "K": 3001}, "float64")
    assert copied.repack and copied.with_b_elements() is copied
    dispatch.forget()


def test_float64_products_of_65_to_256_rows_run_on_the_tensor_cores_below_2_28_multiply_adds_on_hopper():
    """On an H100 (stand-in), a float64 product of 65-256 rows against N and K of 1024 or more
    (no more rows than columns) runs TensorMatmul's m16n8k16 tiles however few its multiply-adds:
    the 96-row tiles at 65-96 rows, else the 64 x 64 default, K split as _rows_split says, a weight whose
    rows are not 16 bytes apart read in place. An A100, 257 rows, N or K under 1024
    and more rows than columns keep the SIMT tiles below dispatch.TENSOR_F64_MIN_MACS."""
    from kgen.ops.tensorcore import F64_TENSOR_MAX_ROWS, TensorMatmul

    spec, a100 = _float64_spec, _A100
    rng = random.Random(2028)
    seen = set()
    while len(seen) < 40:
        M, N, K = rng.randint(65, F64_TENSOR_MAX_ROWS), rng.randint(1024, 2600), rng.randint(1024, 2600)
        if M * N * K >= dispatch.TENSOR_F64_MIN_MACS:
            continue
        w_t = rng.random() < 0.5
        got = spec(M, N, K, w_t)
        seen.add((M, N, K, w_t))
        assert got.kernel == "tensor_matmul" and got.mma_shape == "m16n8k16", (M, N, K, w_t, got.to_json())
        bm = _row_tile_rows(M)
        assert got.tile == (bm, 64, 16), got.to_json()   # these few tiles split K
        assert got.l2_fetch == 0, got.to_json()   # the hint is the few-row tiles' alone
        assert got.split_k == _rows_split(M, N, K, bm), got.to_json()
        assert got.repack == ((K if w_t else N) % 2 == 0), got.to_json()   # unaligned rows read in place
        assert TensorMatmul.rows_f64_suits(M, N, K)
        assert spec(M, N, K, w_t, a100).kernel == "matmul"
    for M, N, K in ((257, 1024, 1000), (100, 1023, 2000), (100, 2000, 1023), (300, 256, 3000)):
        assert M * N * K < dispatch.TENSOR_F64_MIN_MACS
        for w_t in (False, True):
            assert spec(M, N, K, w_t).kernel == "matmul", (M, N, K, w_t)
    dispatch.forget()


def test_few_column_float64_products_run_tiles_sized_to_their_columns_on_hopper(monkeypatch):
    """An H100 (stand-in) runs float64 products of F64_FEW_COLUMNS_MIN-F64_FEW_COLUMNS_MAX
    columns (fewer than the rows, enough rows and K) on few_columns_f64_spec's m16n8k16 tiles,
    N rounded up to 16 a column tile, 128 rows a tile where that is 16 and A is large, whatever
    their multiply-adds; an A of odd K (the large operand, rows not 16 bytes apart) is read in place,
    else an unaligned small B is read by the element entry beside A's 16-byte copies (copied
    aligned first with F64_FEW_COLUMNS_B_ELEMENTS off). An A100 keeps them where they went before, and
    so do products outside the rule's sides, and all of them with the rule off."""
    import kgen.ops.tensorcore as tc

    assert tc.F64_FEW_COLUMNS
    rng = random.Random(2029)
    for _ in range(40):
        N = rng.randint(tc.F64_FEW_COLUMNS_MIN, tc.F64_FEW_COLUMNS_MAX)
        M = rng.randint(max(N + 1, tc.F64_FEW_COLUMNS_MIN_ROWS), 12000)
        K = rng.randint(tc.F64_FEW_COLUMNS_MIN_K, 9000)
        w_t = rng.random() < 0.5
        got = _float64_spec(M, N, K, w_t)
        assert got.kernel == "tensor_matmul" and got.mma_shape == "m16n8k16", (M, N, K, w_t, got.to_json())
        col_tiles = -(-N // 64)
        share = -(-N // col_tiles)
        bn = -(-share // 16) * 16
        bm = 128 if bn == 16 and M * K >= tc.F64_FEW_COLUMNS_TALL_A else tc.F64_FEW_COLUMNS_BM
        assert got.tile == (bm, bn, 16), got.to_json()
        assert got.tile[1] * col_tiles >= N and got.tile[1] - share < 16
        assert got.warp_tile == (32, 16)
        # A (the large operand) unaligned: both read in place; else a B of rows not 16 bytes
        # apart (row-major of odd N) read by the element entry beside A's 16-byte copies.
        a_aligned, b_aligned = K % 2 == 0, (K if w_t else N) % 2 == 0
        assert got.repack == (a_aligned and b_aligned), (M, N, K, w_t, got.to_json())
        assert got.repack_a == (a_aligned and not b_aligned), (M, N, K, w_t, got.to_json())
        assert tc.TensorMatmul.few_columns_f64_suits(M, N, K)
        on_a100 = _float64_spec(M, N, K, w_t, _A100)
        assert on_a100.kernel == ("tensor_matmul" if M * N * K >= dispatch.TENSOR_F64_MIN_MACS else "matmul")
        assert getattr(on_a100, "mma_shape", "") != "m16n8k16"   # sm_90's shape only
    for M, N, K in ((5000, 8, 3000), (5000, 65, 3000), (100, 20, 3000), (5000, 20, 200), (40, 40, 5000)):
        assert not tc.TensorMatmul.few_columns_f64_suits(M, N, K), (M, N, K)
    monkeypatch.setattr(tc, "F64_FEW_COLUMNS_B_ELEMENTS", False)
    copied = _float64_spec(3001, 33, 2000, False)
    assert copied.repack and not copied.repack_a, copied.to_json()   # B copied aligned first
    monkeypatch.setattr(tc, "F64_FEW_COLUMNS", False)
    assert _float64_spec(2001, 13, 5551, False).kernel == "matmul"   # 2^27: the SIMT tiles, as before
    dispatch.forget()
