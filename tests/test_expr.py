"""The expression language of custom reductions: what it accepts and refuses, and that the
CUDA C it renders means what kgen's reference computes.

The differential test draws random expressions from the grammar (hypothesis), renders each
through the real reduce template, compiles all of them in one host program with nvcc (the
map functions are __host__ __device__), runs it on a batch of inputs and compares every
value with kgen's reference evaluation: exactly for int32, within the expression's own
rounding bound for floats. For int32 and for float expressions that are valid C as typed,
the text as typed is compiled too, so C's own precedence checks kgen's parser.
"""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kgen
from kgen.ops.expr import (ALIASES, FUNCTIONS, MAX_DEPTH, MAX_LENGTH, ExpressionError, canonical_text, evaluate,
                           parse_expression, render_c, rounding_bound, undefined, uses, walk)
from kgen.ops.reduce import Reduce


def custom(map_expr="x", combine="a + b", identity="0", dtype="float32", **kw) -> Reduce:
    return Reduce(op="custom", map_expr=map_expr, combine=combine, identity=identity, dtype=dtype, **kw)


def map_c(map_expr, dtype="float32", **kw) -> str:
    return custom(map_expr, dtype=dtype, **kw).template_context()["map_c"]


# -- what C would read differently --------------------------------------------------------

@pytest.mark.parametrize("text, c, at3", [
    ("- -x", "(-(-x))", 3), ("+ +x", "(+(+x))", 3), ("-(-x)", "(-((-x)))", 3), ("!!x", "(!(!x))", 1),
    ("- - -x", "(-(-(-x)))", -3), ("x - -x", "(x - (-x))", 6), ("- -2 * x", "((-(-2)) * x)", 6),
])
def test_unary_operators_render_in_parentheses(text, c, at3):
    assert map_c(text, dtype="int32") == c
    spec = custom(text, dtype="int32")
    assert spec.reference(np.array([3], np.int32)) == at3


@pytest.mark.parametrize("text", ["--x", "x + ++x", "x--"])
def test_increment_and_decrement_tokens_are_refused(text):
    with pytest.raises(ExpressionError, match="decrement|increment"):
        custom(text)


@pytest.mark.parametrize("text, suggestion", [("x * 010", "'10'"), ("x * 08", "'8'"), ("00 + x", "'0'")])
def test_leading_zeros_are_refused(text, suggestion):
    with pytest.raises(ExpressionError, match="leading zero.*octal") as info:
        custom(text, dtype="int32")
    assert str(info.value).startswith(f"map_expr={text!r}") and suggestion in str(info.value)


@pytest.mark.parametrize("text", ["x * 0", "x * 10", "x * 0.5", "x * 00.5", "x * 1e05", "x * 0e0", "x * 1.5f"])
def test_decimal_numbers_are_accepted(text):
    assert custom(text).reference(np.array([2.0])) == pytest.approx(2.0 * float(text.split("* ")[1].rstrip("f")))


@pytest.mark.parametrize("text", ["x * \u0663", "x * \uff13", "x * 1\u0663", "x +\u00a01", "\uff58 * 2"])
def test_only_ascii_is_accepted(text):
    with pytest.raises(ExpressionError, match="is not allowed") as info:
        custom(text)
    assert "position" in str(info.value)


@pytest.mark.parametrize("text", ["0x10 * x", "x * 1.5.2", "x * 2e", "x * 1f", "x * 7_000", "3x"])
def test_malformed_numbers_are_refused(text):
    with pytest.raises(ExpressionError, match="number .* is not allowed; numbers are decimal"):
        custom(text)


def test_literals_that_do_not_fit_are_refused():
    with pytest.raises(ExpressionError, match="does not fit in int32"):
        custom("x * 99999999999999999999", dtype="int32")
    with pytest.raises(ExpressionError, match="does not fit in int32"):
        custom("x + 2147483648", dtype="int32")
    assert map_c("x + 2147483647", dtype="int32") == "(x + 2147483647)"
    with pytest.raises(ExpressionError, match="does not fit in float32"):
        custom("x * 1e39")
    assert map_c("x * 1e39", dtype="float64") == "(x * 1e39)"
    assert map_c("x * 1e39", accumulate="float64") == "(x * 1e39)"  # computed in double
    with pytest.raises(ExpressionError, match="does not fit in float64"):
        custom("x * 1e309", dtype="float64")
    with pytest.raises(ExpressionError, match="does not fit in float64"):
        custom("x * " + "9" * 400, dtype="float64")
    # In a float kernel an integer literal is a floating one: it means its decimal value.
    assert map_c("x * 99999999999999999999") == "(x * 99999999999999999999.0f)"


def test_int32_arithmetic_is_cs():
    x = np.array([7, -7, 3, -3, 0], np.int32)
    assert custom("x / 2", dtype="int32").mapped(x).tolist() == [3, -3, 1, -1, 0]
    assert custom("x % 3", dtype="int32").mapped(x).tolist() == [1, -1, 0, 0, 0]
    assert custom("x % -3", dtype="int32").mapped(x).tolist() == [1, -1, 0, 0, 0]
    assert custom("x / 2", dtype="int32").reference(np.array([3], np.int32)) == 1.0
    assert custom("x / 2 * 2", dtype="int32").reference(np.array([3, 5], np.int32)) == 2.0 + 4.0
    # A custom combine folds with C's meaning too.
    spec = custom("x", combine="a / 2 + b", identity="0", dtype="int32")
    assert spec.reference(np.array([5, 5, 5], np.int32)) == ((0 // 2 + 5) // 2 + 5) // 2 + 5
    # Overflow wraps, as on the GPU; C leaves it undefined, and undefined() says where.
    big = np.array([2**31 - 1, 5], np.int64)
    tree = parse_expression("x + 1", "e", ("x",))
    assert evaluate(tree, {"x": big}, integer=True).tolist() == [-2**31, 6]
    assert undefined(tree, {"x": big}).tolist() == [True, False]
    guarded = parse_expression("x != 0 && 10 / x > 1", "e", ("x",))
    assert not undefined(guarded, {"x": np.array([0, 3])}).any()  # C never divides by 0 here
    assert undefined(parse_expression("10 / x", "e", ("x",)), {"x": np.array([0, 3])}).tolist() == [True, False]
    assert undefined(parse_expression("x / -1", "e", ("x",)), {"x": np.array([-2**31])}).tolist() == [True]


@pytest.mark.parametrize("identity, message", [("1.5", "integer literals"), ("nan", "no nan"), ("1e3", "integer"),
                                               ("2147483647 + 1", "overflows"), ("1 / 0", "divides by zero"),
                                               ("2147483648", "does not fit")])
def test_int32_identities_take_the_int32_literal_rule(identity, message):
    with pytest.raises(ExpressionError, match=message) as info:
        custom("x", identity=identity, dtype="int32")
    assert str(info.value).startswith(f"identity={identity!r}")


def test_int32_identity_values():
    assert custom("x", combine="min(a, b)", identity="inf", dtype="int32").identity_value() == 2**31 - 1
    assert custom("x", combine="max(a, b)", identity="-inf", dtype="int32").identity_value() == -2**31
    assert custom("x", combine="max(a, b)", identity="-(inf)", dtype="int32").identity_value() == -2**31
    assert custom("x", identity="-2147483647 - 1", dtype="int32").identity_value() == -2**31
    assert custom("x", identity="7 / 2", dtype="int32").identity_value() == 3
    assert custom("x", combine="max(a, b)", identity="-inf", dtype="int32").empty_is_undefined
    assert not custom("x", identity="0", dtype="int32").empty_is_undefined
    src = kgen.render(custom("x", combine="max(a, b)", identity="-inf", dtype="int32"))
    assert "#define IDENTITY ((acc_t)((-2147483647 - 1)))" in src


def test_integer_literals_are_floating_in_float_kernels():
    assert map_c("max(0, x)") == "max(0.0f, x)"
    assert map_c("max(0, x)", dtype="float64") == "max(0.0, x)"
    assert map_c("max(0, x)", dtype="int32") == "max(0, x)"
    assert map_c("x * (1 / 2)") == "(x * ((1.0f / 2.0f)))"
    assert custom("x * (1 / 2)").reference(np.array([4.0], np.float32)) == 2.0
    assert map_c("x * 2.") == "(x * 2.0f)" and map_c("x * .5") == "(x * 0.5f)" and map_c("x * 1e3") == "(x * 1e3f)"


def test_floating_min_and_max_ignore_nan_as_cuda_does():
    x = np.array([np.nan, 1.0])
    assert custom("max(x, 0)", dtype="float64").mapped(x).tolist() == [0.0, 1.0]
    assert custom("fminf(x, 3)", dtype="float64").mapped(x).tolist() == [3.0, 1.0]


# -- limits ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "(" * 98 + "x" + ")" * 98,
    "x ? " * 497 + "x" + " : x" * 497,
    "sqrt(" * 60 + "x" + ")" * 60,
    "x + " * (MAX_LENGTH // 4) + "x",
], ids=["98 parentheses", "497 nested ?:", "60 nested calls", "too long"])
def test_limits_raise_expression_error(text):
    with pytest.raises(ExpressionError) as info:
        custom(text)
    assert isinstance(info.value, ValueError)
    assert "levels deep" in str(info.value) or "characters" in str(info.value)
    assert len(str(info.value)) < 600  # the message quotes the start of the expression, not all of it


def test_nesting_up_to_the_limit_is_accepted():
    deep = "(" * MAX_DEPTH + "x" + ")" * MAX_DEPTH
    assert custom(deep).reference(np.array([2.0])) == 2.0
    with pytest.raises(ExpressionError, match=f"more than {MAX_DEPTH} levels"):
        custom("(" + deep + ")")


def _deep_stack(levels, fn):
    return fn() if levels == 0 else _deep_stack(levels - 1, fn)


def test_a_deep_caller_gets_an_expression_error_not_a_recursion_error():
    text = "(" * MAX_DEPTH + "x" + ")" * MAX_DEPTH
    depth = sys.getrecursionlimit() - 60
    try:
        _deep_stack(depth, lambda: parse_expression(text, "map_expr", ("x",)))
    except ExpressionError as exc:
        assert "too deeply" in str(exc)


@pytest.mark.parametrize("text", [
    " + ".join(["x"] * 991),
    "+".join(["x"] * (MAX_LENGTH // 2)),
    " * ".join(["1.0001"] * 1000) + " * x",
    "x > 0 ? 1 : " * 497 + "x",
    "- " * 2000 + "x",
], ids=["991-term sum", "5000-term sum", "1000-factor product", "497-arm ?: chain", "2000 signs"])
def test_long_flat_chains_render_and_evaluate_without_recursion(text):
    spec = custom(text, dtype="float64")
    x = np.array([1.0, 2.0])
    ctx = spec.template_context()
    assert ctx["map_c"].count("(") == ctx["map_c"].count(")")
    tree = parse_expression(text, "map_expr", ("x",))
    assert uses(tree) == {"x"} and sum(1 for _ in walk(tree)) > 900
    v, bound = rounding_bound(tree, {"x": x})
    assert np.array_equal(v, spec.mapped(x)) and np.all(bound >= 0)
    assert np.isfinite(spec.reference(x))
    assert canonical_text(tree) == render_c(tree, False, False).replace(" ", "")


def test_long_chain_values():
    assert custom(" + ".join(["x"] * 991), dtype="float64").reference(np.array([2.0])) == 1982.0
    assert custom("- " * 2001 + "x", dtype="int32").reference(np.array([5], np.int32)) == -5


def test_deeply_nested_problem_json_is_a_clean_cli_error(capsys):
    from kgen.cli import tune as cli

    for problem in ["[" * 20000 + "]" * 20000, '{"M": ' + "[" * 950 + "]" * 950 + ', "N": 1, "K": 1}',
                    '{"M": ' + '{"a": ' * 3000 + "1" + "}" * 3000 + ', "N": 1, "K": 1}']:
        capsys.readouterr()
        rc = cli.main(["matmul", "--problem", problem, "--dry-run", "--quiet"])
        err = capsys.readouterr().err
        assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err[:300]


# -- CUDA spellings ---------------------------------------------------------------------------

def test_cuda_spellings_are_the_functions_they_name():
    x = np.array([0.25, 0.5, 2.0, 3.0])
    for alias, name in ALIASES.items():
        arity = FUNCTIONS[name][0]
        args = ", ".join(["x", "y"][:arity])
        spelled = custom(f"{alias}({args})", dtype="float64")
        plain = custom(f"{name}({args})", dtype="float64")
        assert spelled.template_context()["map_c"] == plain.template_context()["map_c"] == f"{name}({args})"
        inputs = (x, x[::-1].copy())[:arity]
        assert np.array_equal(spelled.mapped(*inputs), plain.mapped(*inputs), equal_nan=True), alias
    assert custom("x", combine="fmaxf(a, b)", identity="-inf").combine_kind == "max"
    assert custom("x", combine="fminf(b, a)", identity="inf").combine_kind == "min"
    assert map_c("fabsf(x)", dtype="int32") == "abs(x)"
    with pytest.raises(ExpressionError, match="int32 reductions"):
        custom("expf(x)", dtype="int32")
    for name in ("printf", "system", "fabsl", "__nv_expf", "atomicAdd"):
        with pytest.raises(ExpressionError, match=f"function '{name}' is not allowed"):
            custom(f"{name}(x)")


def test_docs_list_every_accepted_name():
    text = (Path(__file__).resolve().parents[1] / "docs" / "reduce.md").read_text()
    for name in [*FUNCTIONS, *ALIASES]:
        assert f"`{name}`" in text or re.search(rf"\b{re.escape(name)}\b", text), name


# -- the differential test: rendered C on the host against the reference ----------------------

INT_INPUTS = [0, 1, -1, 2, -2, 3, -3, 5, -7, 13, 100, -100, 46341, -46341, 2**31 - 1, -2**31]
FLOAT_INPUTS = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.25, 0.001, -1000.0, 123.456, 1e-30, math.inf, -math.inf,
                math.nan, 2.0]
INT_FUNCS = ["abs", "min", "max", "fabsf"]
FLOAT_FUNCS = [*FUNCTIONS, "fabsf", "fmaxf", "fminf", "expf", "logf", "sqrtf", "__expf", "__logf", "rsqrtf",
               "powf", "sinf", "__powf", "tanhf", "hypotf"]
_BINARY = ["+", "-", "*", "/", "<", ">", "<=", ">=", "==", "!=", "&&", "||"]


def _expressions(dtype: str):
    integer = dtype == "int32"
    if integer:
        literal = st.integers(0, 60).map(str) | st.sampled_from(["100", "2147483647", "46341"])
        leaf = st.sampled_from(["x", "y"]) | literal
        funcs = INT_FUNCS
        binary = [*_BINARY, "%"]
    else:
        literal = (st.integers(0, 20).map(str)
                   | st.sampled_from(["0.5", "1.5", ".25", "2.", "1e1", "3e-1", "2.5f", "0.125", "10.0"]))
        leaf = st.sampled_from(["x", "y"]) | literal | st.sampled_from(["inf", "INFINITY", "NAN"])
        funcs = FLOAT_FUNCS
        binary = _BINARY

    def grow(inner):
        def call(name):
            arity = FUNCTIONS[ALIASES.get(name, name)][0]
            return st.lists(inner, min_size=arity, max_size=arity).map(lambda a: f"{name}({', '.join(a)})")

        return st.one_of(
            st.tuples(st.sampled_from(["-", "+", "!"]), st.sampled_from(["", " "]), inner).map(
                lambda t: f"{t[0]} {t[2]}" if t[2][:1] in "-+" else f"{t[0]}{t[1]}{t[2]}"),
            st.tuples(inner, st.sampled_from(binary), inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
            st.tuples(inner, st.sampled_from(binary), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
            st.tuples(inner, inner, inner).map(lambda t: f"{t[0]} ? {t[1]} : {t[2]}"),
            st.tuples(inner, inner, inner).map(lambda t: f"({t[0]}) ? ({t[1]}) : ({t[2]})"),
            inner.map(lambda e: f"({e})"),
            st.sampled_from(funcs).flatmap(call),
        )

    return st.recursive(leaf, grow, max_leaves=16)


def _draw(dtype: str, count: int) -> list[str]:
    """`count` expressions drawn from the grammar (collected, then checked in one compile)."""
    found: list[str] = []

    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
    @given(_expressions(dtype))
    def collect(text):
        found.append(text)

    collect()
    return list(dict.fromkeys(found))


# Found by earlier probing: each meant something else in C than in the reference.
REGRESSIONS = {
    "int32": ["- -x", "+ +x", "- - -x", "x / 2", "x % -3", "-x / 2", "x / -2 * y", "x - -y", "!x + !!y",
              "x - y * 3", "x - y / 2 - 1", "x + y % 5 * 2", "x < y == y < x", "x || y && 0", "x == y > 1",
              "!x == 0", "-x % 3", "x > 0 ? 1 : y > 0 ? 2 : 3", "x ? y ? 1 : 2 : 3", "x ? 1 : 2 + y",
              "x - y - 1 ? x : y", "x != 0 && 10 / x > 1", "y == 0 || x % y == 1",
              "x > y ? x / 3 : y % 5", "x * 2147483647 + 1 - y", "min(x, y) - max(x, -y)", "abs(x) % 7",
              "x == y || x / y > 1", "x && y % 2", "1 - 2 - 3 + x", "100 / 7 / 2"],
    "float32": ["- -x", "max(0, x)", "min(1, x) * 2", "x * (1 / 2)", "x / 2", "fmaxf(x, 0.5f) + __expf(x / 100)",
                "rsqrtf(x * x + 1)", "x > y ? 1 : 2", "!x", "x == y", "powf(x * x + 1, 0.5)", "-x * -y",
                "1 - 2 - 3 + x", "fabsf(x) - fabs(y)", "x ? y : 3", "rsqrt(x < y) + max(x > 0, x)",
                "max((x < y) + (y < x), -(x < y))", "sqrtf(x ? x < y : y < x)", "x - y * 3.0", "expf(x / 8.0)",
                "x > 0.0 ? 1.0 : y > 0.0 ? 2.0 : 3.0", "tanhf(x) * 2.5f", "(x > 0) / ((x > 0) + (y > 0))",
                "!powf(1.5, x)", "__powf((+ x ? x : y), (__powf(y, 4)))"],
    "float64": ["- -x", "max(0, x)", "x * (1 / 2)", "3 / 4 * x", "fmax(x, y) - fmin(x, y)", "x - y - (x - y)",
                "exp(x / 1000) * log1p(fabs(y))", "hypot(x, y)", "x < y && y < 3 || x != x", "cbrt(x) + floor(y)",
                "x - y * 3.0 - 1.0", "x ? 1.0 : 2.0 + y", "pow(fabs(x), y < x)", "min(!x, x)",
                "(0.125 >= x) / (x >= 0.125)"],
}
_CTYPE = {"int32": "int", "float32": "float", "float64": "double"}
_FLOAT_T = {"float32": np.float32, "float64": np.float64}
# How far apart the host's and the reference's values may be, in units of the type's eps
# times the expression's own rounding bound (libm against numpy, float literals, FMA).
_ULPS = {"float32": 16.0, "float64": 64.0}


def _c_literal(value: float, ctype: str) -> str:
    if math.isnan(value):
        return "NAN"
    if math.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    return f"({ctype}){float(value).hex()}"


def _map_function(spec: Reduce, name: str) -> str:
    """The map function exactly as the reduce template writes it, renamed."""
    src = kgen.render(spec)
    m = re.search(r"template <typename T>\n__host__ __device__ __forceinline__ T kgen_map_t\(.*?\n\}\n", src, re.S)
    assert m, "the reduce template no longer writes kgen_map_t as expected"
    return m.group().replace("kgen_map_t(", f"{name}(")


def _as_typed_is_c(text: str, dtype: str, tree) -> bool:
    """Whether the text as typed is C that means what kgen means: no kgen-only names (inf,
    nan), in int32 no fabs (a double in C), in floats no integer literals (C divides them
    as integers), no comparison passed straight to an overloaded function, and CUDA's
    float spellings only where the kernel computes in float."""
    names = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", text))
    if names & {"inf", "nan"}:
        return False
    if dtype == "int32":
        return not names & {"fabs", "fabsf"}
    if names & set(ALIASES) and (dtype != "float32" or any(n.startswith("__") for n in names)):
        return False
    numbers = re.findall(r"(?<![\w.])[0-9.]+(?:[eE][+-]?[0-9]+)?f?", text)
    if not all(re.search(r"[.eE]", n) for n in numbers) or (dtype == "float64" and re.search(r"[0-9.]f\b", text)):
        return False
    for node in walk(tree):
        if node[0] == "call" and any(n[0] == "un" and n[1] == "!" or n[0] == "bin" and n[1] not in "+-*/"
                                     for arg in node[2] for n in walk(arg)):
            return False
        if node[0] == "bin" and node[1] == "/" and _c_int(node[2]) and _c_int(node[3]):
            return False   # C divides two ints as ints
    return True


def _c_int(node) -> bool:
    """Whether C computes this subexpression of a floating expression as an int: a comparison
    or logical operation, or arithmetic and choices between such ints."""
    kind = node[0]
    if kind == "paren":
        return _c_int(node[1])
    if kind == "un":
        return node[1] == "!" or _c_int(node[2])
    if kind == "bin":
        return node[1] not in "+-*/%" or (_c_int(node[2]) and _c_int(node[3]))
    if kind == "?:":
        return _c_int(node[2]) and _c_int(node[3])
    return False


def _cases():
    cases = []
    for dtype in ("int32", "float32", "float64"):
        texts = list(dict.fromkeys(REGRESSIONS[dtype] + _draw(dtype, 200)))
        for text in texts:
            if not re.search(r"\bx\b", text):
                text = re.sub(r"\by\b", "x", text)  # one input is called x
            spec = custom(text, dtype=dtype)  # every drawn expression must be accepted
            cases.append((dtype, text, spec))
    return cases


def _build_harness(cases, folder: Path) -> tuple[Path, list[tuple]]:
    """One .cu file: every case's map function, rendered and (where it is C) as typed,
    called on every input. Returns the program and [(case index, variant)] in print order."""
    inputs = {"int32": INT_INPUTS, "float32": FLOAT_INPUTS, "float64": FLOAT_INPUTS}
    parts = ["#include <cmath>", "#include <cstdio>", "#include <cstdlib>", ""]
    for dtype, values in inputs.items():
        ctype = _CTYPE[dtype]
        if dtype == "int32":
            xs = ", ".join("(-2147483647 - 1)" if v == -2**31 else str(v) for v in values)
        else:
            xs = ", ".join(_c_literal(v, ctype) for v in values)
        parts.append(f"static const {ctype} IN_{dtype}[{len(values)}] = {{{xs}}};")
    body, order = [], []
    for i, (dtype, text, spec) in enumerate(cases):
        ctype = _CTYPE[dtype]
        n = len(inputs[dtype])
        arity = spec.arity
        variants = [("rendered", _map_function(spec, f"map_{i}"))]
        if _as_typed_is_c(text, dtype, spec._parsed()[0]):
            params = "T x" + (", T y" if arity == 2 else "")
            variants.append(("typed", f"template <typename T>\n__host__ __device__ T typed_{i}({params}) "
                                      f"{{\n    return (T)({text});\n}}\n"))
        skip = _undefined_pairs(dtype, text, spec, inputs[dtype])
        parts.append(f"static const unsigned char SKIP_{i}[{n}] = {{{', '.join('1' if s else '0' for s in skip)}}};")
        for variant, fn in variants:
            parts.append(fn)
            name = f"map_{i}" if variant == "rendered" else f"typed_{i}"
            args = "IN_{0}[j], IN_{0}[{1} - 1 - j]".format(dtype, n) if arity == 2 else f"IN_{dtype}[j]"
            if dtype == "int32":
                show = f'printf("%d %d %d\\n", {len(order)}, j, {name}<int>({args}));'
            else:
                show = f'printf("%d %d %a\\n", {len(order)}, j, (double){name}<{ctype}>({args}));'
            body.append(f"    for (int j = 0; j < {n}; ++j) if (!SKIP_{i}[j]) {show}")
            order.append((i, variant))
    parts += ["int main() {", *body, "    return 0;", "}", ""]
    source = folder / "expressions.cu"
    source.write_text("\n".join(parts))
    return source, order


def _undefined_pairs(dtype, text, spec, values) -> list[bool]:
    """Inputs on which C leaves the int32 expression undefined (the host must not run those)."""
    if dtype != "int32":
        return [False] * len(values)
    env = _env(dtype, spec.arity, values)
    tree = spec._parsed()[0]
    return np.broadcast_to(undefined(tree, env), (len(values),)).tolist()


def _env(dtype, arity, values):
    kind = np.int64 if dtype == "int32" else np.float64
    x = np.array(values, dtype=kind)
    if dtype == "float32":
        x = x.astype(np.float32).astype(np.float64)
    env = {"x": x}
    if arity == 2:
        env["y"] = x[::-1].copy()
    return env


def _compare(dtype, spec, got: dict[int, float], values) -> list[str]:
    env = _env(dtype, spec.arity, values)
    tree = spec._parsed()[0]
    problems = []
    if dtype == "int32":
        want = np.broadcast_to(evaluate(tree, env, integer=True), (len(values),))
        for j, v in got.items():
            if int(v) != int(want[j]):
                problems.append(f"x={env['x'][j]} y={env.get('y', [None] * 99)[j]}: C {int(v)}, reference {want[j]}")
        return problems
    with np.errstate(all="ignore"):
        want, bound = (np.broadcast_to(a, (len(values),)) for a in rounding_bound(tree, env))
        largest = np.zeros(len(values))
        float32_differs = np.zeros(len(values), dtype=bool)
        for node in walk(tree):
            # float32 overflows, or float32_differs past its normal range, where float64 does not
            # (1.5 ** -1000 is 0 in float32, and then !x is 1): compare where no step did.
            step = np.abs(np.broadcast_to(evaluate(node, env), (len(values),)))
            largest = np.fmax(largest, step)
            float32_differs |= (step > 0) & (step < np.finfo(np.float32).tiny)
            if node[0] == "call" and node[1] == "pow":
                # A negative base to a power of 2^23 or more: float32 holds that exponent as an
                # integer (it has no fraction bits there), so C's power is finite or infinite
                # where float64, which keeps the fraction, has NaN.
                base, power = (np.broadcast_to(evaluate(a, env), (len(values),)) for a in node[2])
                float32_differs |= (base < 0) & (np.abs(power) >= 2.0 ** 23)
    eps = float(np.finfo(_FLOAT_T[dtype]).eps)
    for j, v in got.items():
        w = float(want[j])
        if dtype == "float32" and (largest[j] > 1e30 or float32_differs[j]):
            continue
        if math.isnan(w) or math.isnan(v):
            ok = math.isnan(w) and math.isnan(v)
        elif math.isinf(w) or math.isinf(v):
            ok = v == w or (dtype == "float32" and not math.isinf(w) and abs(w) > 1e37)
        else:
            tol = _ULPS[dtype] * eps * (float(bound[j]) + abs(w)) + (1e-37 if dtype == "float32" else 1e-300)
            ok = abs(v - w) <= tol
        if not ok:
            problems.append(f"x={env['x'][j]!r} y={env['y'][j] if 'y' in env else None!r}: C {v!r}, reference {w!r}")
    return problems


def _nvcc() -> str:
    path = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)
    if path is None:
        pytest.skip("nvcc is not on PATH")
    return path


@pytest.mark.nvcc
def test_rendered_expressions_compute_the_reference_on_the_host(tmp_path):
    nvcc = _nvcc()
    cases = _cases()
    source, order = _build_harness(cases, tmp_path)
    exe = tmp_path / "expressions"
    proc = subprocess.run([nvcc, "-x", "cu", "-std=c++17", "-O1", "-Wno-deprecated-gpu-targets", "-w", "-o", str(exe),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc failed on the expressions:\n{proc.stderr[-4000:]}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    results: dict[int, dict[int, float]] = {}
    for line in run.stdout.splitlines():
        k, j, value = line.split()
        dtype = cases[order[int(k)][0]][0]
        results.setdefault(int(k), {})[int(j)] = int(value) if dtype == "int32" else _parse_hex(value)
    inputs = {"int32": INT_INPUTS, "float32": FLOAT_INPUTS, "float64": FLOAT_INPUTS}
    failures, checked = [], 0
    for k, (i, variant) in enumerate(order):
        dtype, text, spec = cases[i]
        got = results.get(k, {})
        checked += len(got)
        for problem in _compare(dtype, spec, got, inputs[dtype]):
            failures.append(f"{dtype} {text!r} ({variant}: {spec.template_context()['map_c']}): {problem}")
    assert not failures, f"{len(failures)} mismatches, e.g.:\n" + "\n".join(failures[:25])
    assert checked > 0.8 * sum(len(inputs[d]) for d, _, _ in cases)  # undefined int32 cases are few
    assert {v for _, v in order} == {"rendered", "typed"}


def _parse_hex(text: str) -> float:
    t = text.lower().lstrip("+")
    if t in ("nan", "-nan"):
        return math.nan
    if t in ("inf", "-inf"):
        return math.inf if t == "inf" else -math.inf
    return float.fromhex(t)
