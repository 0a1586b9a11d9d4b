"""Compiling ahead (kgen.tune.ahead, `kgen cache fill`) without a GPU: dispatch answers for a
named GPU as it would on that GPU, each distinct spec the products run is compiled once, a
second fill compiles nothing, and bad requests get a clear error.

nvcc is the stand-in of tests/stand_ins.py except in the one test that builds a real cubin."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from kgen.core.kernel import is_compiled
from kgen.core.runtime import ArrayError
from kgen.ops.tensorcore import TensorMatmul
from kgen.tune import ahead, dispatch
from kgen.tune.device import DeviceInfo, arch_limits

from stand_ins import stand_in_nvcc

H200 = DeviceInfo("NVIDIA H200", "sm_90", dict(arch_limits("sm_90"), multiprocessors=132))


@pytest.fixture(autouse=True)
def _fresh():
    dispatch.forget()
    yield
    dispatch.forget()


def _drawn_products(count: int, seed: int) -> list[ahead.Product]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        M = rng.choice([1, 2, 3, 5, 7, 9, 13, 16, 17, 40, 64, 100, 200, 700, 3000])
        out.append(ahead.Product(M, rng.randint(1, 9000), rng.randint(1, 9000),
                                 rng.choice(["float32", "float16", "bfloat16", "float64"]), rng.random() < 0.6))
    return out


def test_call_spec_answers_for_the_named_device_as_on_it(monkeypatch):
    """With device= given, every rule asks that device (wgmma or not, its SM count), not
    this machine, which has no GPU: the answers equal those made with the device stood in
    for the whole process, and afterwards dispatch asks this machine again."""
    if dispatch._runs_wgmma():
        pytest.skip("this machine has an sm_90 GPU: the stand-in would change nothing")
    products = _drawn_products(120, seed=7)
    named = [dispatch.call_spec(*p.stand_ins(), p.allow_tf32, device=H200, db=False, dtype=p.dtype)
             for p in products]
    assert not dispatch._runs_wgmma()
    monkeypatch.setattr(dispatch, "_this_device", lambda: H200)
    dispatch.forget()
    whole = [dispatch.call_spec(*p.stand_ins(), p.allow_tf32, device=H200, db=False, dtype=p.dtype)
             for p in products]
    assert [s.key for s in named] == [s.key for s in whole]
    # The drawn products take the sm_90 routes: wgmma kernels among them.
    assert any(getattr(s, "instruction", None) == "wgmma" for s in named)


def test_call_spec_takes_the_dtype_the_arrays_stand_for():
    A, B = np.zeros((4, 4096), np.float16), np.zeros((4096, 4096), np.float16)
    assert dispatch.call_spec(A, B.T, device=H200, db=False, dtype="bfloat16").dtype == "bfloat16"
    assert dispatch.call_spec(A, B.T, device=H200, db=False).dtype == "float16"
    with pytest.raises(ArrayError, match="another size"):
        dispatch.call_spec(A, B, device=H200, db=False, dtype="float32")
    with pytest.raises(ArrayError, match="int8"):
        dispatch.call_spec(A, B, device=H200, db=False, dtype="int8")


def test_products_stand_in_with_the_calls_strides_and_no_memory():
    p = ahead.Product(3, 11008, 4096, "bfloat16", weight_t=True)
    A, B = p.stand_ins()
    assert A.shape == (3, 4096) and A.strides == (8192, 2)
    assert B.shape == (4096, 11008) and B.strides == (2, 8192)        # W.t() of an 11008 x 4096 W
    assert ahead.Product(3, 11008, 4096, "float32", weight_t=False).stand_ins()[1].strides == (44032, 4)
    # One element behind both: a product of any size allocates nothing.
    assert A.__array_interface__["data"][0] == B.__array_interface__["data"][0]


@pytest.mark.parametrize("bad", [dict(M=0), dict(N=-3), dict(K=2.5), dict(dtype="int8"), dict(M=True)])
def test_a_product_refuses_what_no_call_makes(bad):
    fields = dict(M=4, N=64, K=64, dtype="float32")
    fields.update(bad)
    with pytest.raises(ValueError, match="not allowed"):
        ahead.Product(**fields)


def test_rows_and_sides_parse_as_written():
    assert ahead.parse_rows("1-4,8, 16-17,3") == [1, 2, 3, 4, 8, 16, 17]
    assert ahead.parse_sides("4096x11008", "NK") == (4096, 11008)
    assert ahead.parse_sides("7X4096x5", "MNK") == (7, 4096, 5)
    for text in ("0-3", "5-2", "a", "1-", ""):
        with pytest.raises(ValueError, match="rows"):
            ahead.parse_rows(text)
    for text, names in (("4096", "NK"), ("4096x0", "NK"), ("1x2", "MNK"), ("4x-1x3", "MNK")):
        with pytest.raises(ValueError, match="positive whole numbers"):
            ahead.parse_sides(text, names)


def test_config_weights_are_a_decoders_projections_each_once():
    config = {"hidden_size": 3072, "num_attention_heads": 24, "num_key_value_heads": 8,
              "intermediate_size": 8192, "vocab_size": 50000}
    assert ahead.config_weights(config) == [(3072, 3072), (1024, 3072), (8192, 3072), (3072, 8192), (50000, 3072)]
    assert ahead.config_weights(config, lm_head=False)[-1] == (3072, 8192)
    # head_dim given apart from hidden_size / heads; no key-value heads: as many as the queries'.
    wide = {"hidden_size": 2048, "num_attention_heads": 16, "head_dim": 256, "intermediate_size": 6000}
    assert ahead.config_weights(wide) == [(4096, 2048), (2048, 4096), (6000, 2048), (2048, 6000)]
    with pytest.raises(ValueError, match="'intermediate_size'"):
        ahead.config_weights({"hidden_size": 64, "num_attention_heads": 4})
    with pytest.raises(ValueError, match="'num_attention_heads' is 0"):
        ahead.config_weights({"hidden_size": 64, "num_attention_heads": 0, "intermediate_size": 128})
    with pytest.raises(ValueError, match="'head_dim'"):     # 100 / 3 is no whole head
        ahead.config_weights({"hidden_size": 100, "num_attention_heads": 3, "intermediate_size": 128})


def test_specs_for_are_the_distinct_specs_the_calls_run():
    products = ahead.layer_products([(4096, 4096), (11008, 4096)], range(1, 65), ["bfloat16", "float32"])
    assert len(products) == 256
    specs = ahead.specs_for(products, H200, db=False)
    keys = [s.key for s in specs]
    assert len(set(keys)) == len(keys)
    each = {dispatch.call_spec(*p.stand_ins(), device=H200, db=False, dtype=p.dtype).key for p in products}
    assert set(keys) == each
    assert 8 <= len(specs) < len(products)     # the tiles follow the rows, in steps


def test_specs_for_add_the_specs_a_kernel_builds_at_launch(monkeypatch):
    tail = next(s for s in TensorMatmul.wide_swap_specs({"M": 70, "N": 20000, "K": 2048}, "bfloat16")
                if s.wave_tail > 1)
    assert tail.companion_specs() == (tail.tail_spec(),)
    assert TensorMatmul.default_spec({"M": 512, "N": 512, "K": 512}, "bfloat16").companion_specs() == ()
    monkeypatch.setattr(dispatch, "call_spec", lambda *a, **k: tail)
    specs = ahead.specs_for([ahead.Product(70, 20000, 2048, "bfloat16")], H200, db=False)
    assert [s.key for s in specs] == [tail.key, tail.tail_spec().key]


def test_compile_ahead_compiles_each_missing_spec_once(tmp_path, monkeypatch):
    compiles = stand_in_nvcc(tmp_path, monkeypatch)
    products = ahead.layer_products([(5120, 5120)], [1, 2, 3, 8, 9, 16, 24, 100], ["float32", "bfloat16"])
    specs = ahead.specs_for(products, H200, db=False)
    dry = ahead.compile_ahead(products, device=H200, db=False, workers=0, dry_run=True)
    assert (dry.cached, dry.compiled, compiles()) == (0, 0, 0)
    done = []
    report = ahead.compile_ahead(products, device=H200, db=False, workers=0,
                                 on_done=lambda spec, why: done.append((spec.key, why)))
    assert report.products == len(products) and len(report.specs) == len(specs)
    assert (report.cached, report.compiled, report.failed) == (0, len(specs), [])
    assert sorted(done) == sorted((s.key, None) for s in specs)
    assert compiles() == len(specs)
    assert all(is_compiled(s, "sm_90") for s in specs)
    again = ahead.compile_ahead(products, device=H200, db=False, workers=0)
    assert (again.cached, again.compiled) == (len(specs), 0) and compiles() == len(specs)
    assert f"run {len(specs)} specs: {len(specs)} in the cache already, 0 compiled now" in again.summary()


def test_compile_ahead_in_threads_compiles_each_spec_once_and_reports_in_the_callers_thread(tmp_path, monkeypatch):
    import threading

    compiles = stand_in_nvcc(tmp_path, monkeypatch)
    products = ahead.layer_products([(4096, 4096), (4096, 11008)], [1, 5, 9, 17, 33, 64, 130], ["bfloat16"])
    specs = ahead.specs_for(products, H200, db=False)
    threads = []
    report = ahead.compile_ahead(products, device=H200, db=False, workers=3,
                                 on_done=lambda spec, why: threads.append((threading.current_thread(), why)))
    assert (report.compiled, report.failed) == (len(specs), []) and compiles() == len(specs)
    assert threads == [(threading.main_thread(), None)] * len(specs)
    assert all(is_compiled(s, "sm_90", disk_only=True) for s in specs)


def test_compile_ahead_reports_a_spec_that_fails_and_compiles_the_rest(tmp_path, monkeypatch):
    stand_in_nvcc(tmp_path, monkeypatch)
    import kgen.core.kernel as kernel_mod
    from kgen.core.compiler import CompileError

    products = [ahead.Product(1, 4096, 4096, "float32"), ahead.Product(300, 4096, 4096, "bfloat16")]
    first, second = ahead.specs_for(products, H200, db=False)
    real = kernel_mod.compile

    def failing(spec, arch=None):
        if spec.key == first.key:
            raise CompileError("nvcc failed on this spec (a test)", output="error: injected")
        return real(spec, arch)

    monkeypatch.setattr(kernel_mod, "compile", failing)
    report = ahead.compile_ahead(products, device=H200, db=False, workers=0)
    assert report.compiled == 1 and [s.key for s, _ in report.failed] == [first.key]
    assert "injected" in report.failed[0][1] and "1 failed" in report.summary()
    assert is_compiled(second, "sm_90") and not is_compiled(first, "sm_90")


def test_compile_ahead_says_when_the_cache_limit_removed_what_it_compiled(tmp_path, monkeypatch):
    stand_in_nvcc(tmp_path, monkeypatch)
    # The stand-in's entries are about 200 bytes: a limit of 500 keeps two of them.
    monkeypatch.setenv("KGEN_CACHE_MAX_MB", "0.0005")
    products = ahead.layer_products([(5120, 5120)], [1, 2, 3, 8, 9, 16, 24, 100], ["float32", "bfloat16"])
    report = ahead.compile_ahead(products, device=H200, db=False, workers=0)
    kept = sum(is_compiled(s, "sm_90", disk_only=True) for s in report.specs)
    assert report.compiled == len(report.specs) and 1 <= kept <= 3
    assert report.evicted == len(report.specs) - kept
    assert "raise KGEN_CACHE_MAX_MB" in report.summary()


def test_stand_in_device_names_the_gpu_and_its_sms():
    dev = ahead.stand_in_device("sm_90", "NVIDIA H100 PCIe", 114)
    assert (dev.name, dev.arch, dev.limits["multiprocessors"]) == ("NVIDIA H100 PCIe", "sm_90", 114)
    assert dev.limits["compute_capability"] == 90
    with pytest.raises(ValueError):
        ahead.stand_in_device("sm_xx")
    with pytest.raises(ValueError, match="at least 1"):
        ahead.stand_in_device("sm_90", None, 0)


def _cli(*argv):
    from kgen.cli.main import main

    return main(list(argv))


def test_cli_fill_compiles_then_finds_everything_cached(tmp_path, monkeypatch, capsys):
    compiles = stand_in_nvcc(tmp_path, monkeypatch)
    monkeypatch.setenv("KGEN_TUNE_DB", str(tmp_path / "empty.db"))
    argv = ["cache", "fill", "--weights", "4096x4096,2048x4096", "--rows", "1-3,64", "--shape", "5x300x700",
            "--dtype", "float32,bfloat16", "--arch", "sm_90", "--gpu", "NVIDIA H200", "--sms", "132", "--workers", "0"]
    assert _cli(*argv, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "18 products on NVIDIA H200 (sm_90)" in out and "in the cache already, 0 compiled now" in out
    assert compiles() == 0
    assert _cli(*argv) == 0
    captured = capsys.readouterr()
    made = compiles()
    assert made >= 4 and f"0 in the cache already, {made} compiled now" in captured.out
    assert captured.err.count(" compiled\n") == made
    assert _cli(*argv) == 0
    assert f"{made} in the cache already, 0 compiled now" in capsys.readouterr().out and compiles() == made


@pytest.mark.parametrize("argv, message", [
    (["cache", "fill", "--arch", "sm_90"], "name the products"),
    (["cache", "fill", "--weights", "4096", "--arch", "sm_90"], "NxK"),
    (["cache", "fill", "--weights", "64x64", "--rows", "0-2", "--arch", "sm_90"], "not allowed"),
    (["cache", "fill", "--shape", "4x64x64", "--dtype", "float8", "--arch", "sm_90"], "float8"),
    (["cache", "fill", "--shape", "4x64x64", "--gpu", "NVIDIA H200"], "give its --arch"),
    (["cache", "info", "--rows", "3"], "go with 'kgen cache fill'"),
    (["cache", "clear", "--dry-run"], "go with 'kgen cache fill'"),
])
def test_cli_fill_names_what_is_wrong(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    assert _cli(*argv) == 2
    assert message in capsys.readouterr().err


def test_cli_fill_reads_a_models_config(tmp_path, monkeypatch, capsys):
    import json

    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("KGEN_TUNE_DB", str(tmp_path / "empty.db"))
    text = {"hidden_size": 1536, "num_attention_heads": 12, "num_key_value_heads": 4, "intermediate_size": 4000}
    (tmp_path / "config.json").write_text(json.dumps(text))
    (tmp_path / "vision.json").write_text(json.dumps({"model_type": "vl", "text_config": text}))
    for name in ("config.json", "vision.json"):
        assert _cli("cache", "fill", "--config", str(tmp_path / name), "--weights", "1536x1536", "--rows", "1-3",
                    "--arch", "sm_90", "--dry-run") == 0
        # 1536x1536 (also q and o), 512x1536, 4000x1536, 1536x4000: four weights, three row counts.
        assert "12 products on a sm_90 GPU" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    for name, message in (("bad.json", "is not JSON"), ("list.json", "holds a JSON list"),
                          ("missing.json", "cannot read --config")):
        assert _cli("cache", "fill", "--config", str(tmp_path / name), "--arch", "sm_90") == 2
        assert message in capsys.readouterr().err


def test_cli_fill_without_a_gpu_builds_for_kgen_arch(tmp_path, monkeypatch, capsys):
    compiles = stand_in_nvcc(tmp_path, monkeypatch)
    monkeypatch.setenv("KGEN_ARCH", "sm_80")
    from kgen.core import runtime

    monkeypatch.setattr(runtime, "gpu_available", lambda: (False, "no GPU (a test)"))
    assert _cli("cache", "fill", "--shape", "4x4096x4096", "--dtype", "bfloat16", "--workers", "0") == 0
    out = capsys.readouterr().out
    assert "on a sm_80 GPU (sm_80)" in out and compiles() == 1


def test_cli_fill_refuses_a_disabled_cache(monkeypatch, capsys):
    monkeypatch.setenv("KGEN_NO_CACHE", "1")
    assert _cli("cache", "fill", "--shape", "4x64x64", "--arch", "sm_90") == 2
    assert "KGEN_NO_CACHE" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_a_real_fill_leaves_the_cubin_a_first_call_loads(tmp_path, monkeypatch):
    """nvcc itself: a float64 product's spec (the SIMT tiles, one of the quicker modules)
    is compiled into the cache folder and found there by what a first call asks."""
    monkeypatch.setenv("KGEN_CACHE_DIR", str(tmp_path / "cache"))
    import kgen.core.compiler as compiler

    monkeypatch.setattr(compiler, "_memory", {})
    product = ahead.Product(200, 300, 500, "float64", weight_t=False)
    (spec,) = ahead.specs_for([product], H200, db=False)
    assert spec.kernel == "matmul" and not is_compiled(spec, "sm_90")
    report = ahead.compile_ahead([product], device=H200, db=False, workers=0)
    assert (report.compiled, report.failed) == (1, [])
    monkeypatch.setattr(compiler, "_memory", {})          # a new process: the disk cache only
    assert is_compiled(spec, "sm_90")
    assert len([f for f in (tmp_path / "cache").rglob("*") if f.is_file() and f.stat().st_size > 1000]) == 1


def test_select_remembers_a_choice_per_device_limits(monkeypatch):
    """A named GPU with another SM count than its model's is asked afresh, not answered from
    the memo of the first."""
    looked = []
    real = dispatch._lookup

    def counted(cls, problem, dtype, dev, *rest):
        looked.append(dev.limits["multiprocessors"])
        return real(cls, problem, dtype, dev, *rest)

    monkeypatch.setattr(dispatch, "_lookup", counted)
    problem = {"M": 8, "N": 4096, "K": 4096}
    small = ahead.stand_in_device("sm_90", "NVIDIA H200", 114)
    for dev in (H200, H200, small, small):
        dispatch.select("skinny", problem, "float32", device=dev, db=False)
    assert looked == [132, 114]
