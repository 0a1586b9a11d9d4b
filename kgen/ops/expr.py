"""The expression language of custom reductions (map_expr, combine, identity).

A tokenizer and a recursive-descent parser for a small subset of C, so that a bad
expression is refused in Python with its text, before nvcc sees it. The parse tree
renders to CUDA C and evaluates on numpy with C's meaning: the float64 reference of a
custom reduction comes from the very tree the kernel is made from.

C's meaning, concretely:
  * float kernels: IEEE arithmetic; integer literals are written as floating literals
    (`max(0, x)` is `max(0.0f, x)`), so no expression mixes int and float overloads;
    min/max are C's fmin/fmax (a NaN operand yields the other operand).
  * int32 kernels: integer literals only; `/` truncates toward zero and `%` takes the
    dividend's sign, as in C. Overflow, division by zero and `INT_MIN / -1` are
    undefined in C; `undefined()` finds them, the reference wraps (two's complement)
    and uses 0 for a division by zero.
  * `&&`, `||` and `?:` evaluate only the operand C evaluates, as far as undefined
    behaviour is concerned; `!`, comparisons and logic give 0 or 1.

Trees are tuples: ("num", text), ("const", name), ("var", name), ("paren", e),
("un", op, e), ("bin", op, a, b), ("?:", cond, yes, no), ("call", name, [args]).
Every walk over a tree is iterative, so a long flat chain (`x + x + ... + x`) of any
length the limits allow renders and evaluates without deep recursion.
"""
from __future__ import annotations

import math
import re
from typing import Any, Callable, Iterator

import numpy as np

from ..core.spec import SpecError

INT32_MAX, INT32_MIN = 2**31 - 1, -(2**31)
# Longest expression text, and deepest nesting of parentheses, function calls and the
# middle operand of ?: (each level costs the parser a few Python stack frames).
MAX_LENGTH = 10_000
MAX_DEPTH = 40
_FLOAT_MAX = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}


class ExpressionError(SpecError):
    """A map/combine/identity expression is not in the allowed language."""


def _rsqrt(v):
    return 1.0 / np.sqrt(v)


# name: (arguments, numpy implementation in float64)
FUNCTIONS: dict[str, tuple[int, Any]] = {
    "abs": (1, np.abs), "fabs": (1, np.abs), "sqrt": (1, np.sqrt), "rsqrt": (1, _rsqrt),
    "cbrt": (1, np.cbrt), "exp": (1, np.exp), "exp2": (1, np.exp2), "expm1": (1, np.expm1),
    "log": (1, np.log), "log2": (1, np.log2), "log10": (1, np.log10), "log1p": (1, np.log1p),
    "sin": (1, np.sin), "cos": (1, np.cos), "tan": (1, np.tan), "tanh": (1, np.tanh),
    "floor": (1, np.floor), "ceil": (1, np.ceil),
    "pow": (2, np.power), "hypot": (2, np.hypot), "fmin": (2, np.fmin), "fmax": (2, np.fmax),
    # CUDA's min/max on floating values are fminf/fmaxf (and fmin/fmax): NaN-ignoring.
    "min": (2, np.fmin), "max": (2, np.fmax),
}
# The functions an int32 expression may call (fabs is written abs there).
INT_FUNCTIONS = ("abs", "fabs", "min", "max")

# CUDA spellings users type, and the function each one is. A kernel computes in its own
# type (float, double or int), so each renders as the type-generic name: `expf(x)` and
# `__expf(x)` both become `exp(x)`, the accurate function of the kernel's type.
ALIASES: dict[str, str] = {
    **{name + "f": name for name in ("fabs", "sqrt", "rsqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2",
                                     "log10", "log1p", "sin", "cos", "tan", "tanh", "floor", "ceil", "pow",
                                     "hypot", "fmin", "fmax")},
    "__expf": "exp", "__logf": "log", "__log2f": "log2", "__log10f": "log10",
    "__sinf": "sin", "__cosf": "cos", "__tanf": "tan", "__powf": "pow", "__fsqrt_rn": "sqrt",
    "__frsqrt_rn": "rsqrt", "llabs": "abs", "labs": "abs",
}
CONSTANTS = {"inf": math.inf, "INFINITY": math.inf, "nan": math.nan, "NAN": math.nan}

_SPACE = re.compile(r"[ \t\r\n]*")
_NUMBER = re.compile(r"(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fF]?|[0-9]+[eE][+-]?[0-9]+[fF]?|[0-9]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
_OP = re.compile(r"<=|>=|==|!=|&&|\|\||[-+*/%<>!?:(),]")
_WORD = re.compile(r"[A-Za-z0-9_.]+")
# binary operator -> precedence level (higher binds tighter), as in C
_LEVEL = {"||": 0, "&&": 1, "==": 2, "!=": 2, "<": 3, ">": 3, "<=": 3, ">=": 3, "+": 4, "-": 4,
          "*": 5, "/": 5, "%": 5}
_ALLOWED_CHARS = "names, decimal numbers, + - * / % < > <= >= == != && || ! ?: ( ) ,"


def _fail(what: str, text: str, msg: str) -> ExpressionError:
    shown = text if len(text) <= 200 else text[:200] + "..."
    return ExpressionError(f"{what}={shown!r}: {msg}")


def tokenize(text: str, what: str) -> list[tuple[str, str]]:
    """[(kind, value)] with kind "num" (the digits, without an f suffix), "name" or "op"."""
    if not isinstance(text, str) or not text.strip():
        raise ExpressionError(f"{what}={text!r} is empty; write an expression such as 'x * x'")
    if len(text) > MAX_LENGTH:
        raise _fail(what, text, f"{len(text)} characters; at most {MAX_LENGTH} are allowed")
    out: list[tuple[str, str]] = []
    pos, end = 0, len(text)
    while True:
        space = _SPACE.match(text, pos)
        pos = space.end() if space else pos
        if pos >= end:
            return out
        m = _NUMBER.match(text, pos)
        if m:
            whole = _WORD.match(text, pos)
            word = whole.group() if whole else m.group()
            if len(word) > len(m.group()):
                raise _fail(what, text, f"number {word!r} at position {pos} is not allowed; numbers are decimal, "
                                        "such as 3, 2.5, .5, 1e-3 or 2.5f")
            num = m.group().rstrip("fF")
            if len(num) > 1 and num[0] == "0" and num.isdigit():
                raise _fail(what, text, f"the integer {num!r} has a leading zero, which C reads as an octal number; "
                                        f"write {num.lstrip('0') or '0'!r}")
            out.append(("num", num))
            pos = m.end()
            continue
        if text.startswith(("--", "++"), pos):
            what_c = "decrement" if text[pos] == "-" else "increment"
            raise _fail(what, text, f"{text[pos:pos + 2]!r} at position {pos} is C's {what_c} operator; for two "
                                    f"signs write them apart: {text[pos]} {text[pos]}x")
        m = _NAME.match(text, pos) or _OP.match(text, pos)
        if not m:
            raise _fail(what, text, f"character {text[pos]!r} at position {pos} is not allowed; allowed: "
                                    f"{_ALLOWED_CHARS}")
        out.append(("name" if m.re is _NAME else "op", m.group()))
        pos = m.end()


class _Parser:
    def __init__(self, text: str, what: str, names: tuple[str, ...]):
        self.text, self.what, self.names = text, what, names
        self.toks = tokenize(text, what)
        self.i = 0
        self.depth = 0

    def error(self, msg: str) -> ExpressionError:
        return _fail(self.what, self.text, msg)

    def peek(self) -> tuple[str, str]:
        return self.toks[self.i] if self.i < len(self.toks) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if value is not None and tok[1] != value:
            found = "the end" if tok[0] == "end" else repr(tok[1])
            raise self.error(f"expected {value!r} but found {found}")
        if tok[0] == "end":
            raise self.error("the expression ends too early")
        self.i += 1
        return tok

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nested more than {MAX_DEPTH} levels deep (parentheses, function calls and the "
                             "middle of ?: count); simplify it")

    def parse(self):
        tree = self.conditional()
        if self.peek()[0] != "end":
            raise self.error(f"unexpected {self.peek()[1]!r} after a complete expression")
        return tree

    def conditional(self):
        # c1 ? y1 : c2 ? y2 : e  groups as  c1 ? y1 : (c2 ? y2 : e); the chain is read in a loop.
        arms = []
        while True:
            cond = self.binary(0)
            if self.peek() != ("op", "?"):
                break
            self.take("?")
            self.enter()
            yes = self.conditional()
            self.depth -= 1
            self.take(":")
            arms.append((cond, yes))
        tree = cond
        for c, y in reversed(arms):
            tree = ("?:", c, y, tree)
        return tree

    def binary(self, min_level: int):
        # Precedence climbing: a run of operators of one level is read in a loop (left
        # to right, as C groups them); recursion only climbs to tighter levels.
        left = self.unary()
        while True:
            kind, op = self.peek()
            level = _LEVEL.get(op) if kind == "op" else None
            if level is None or level < min_level:
                return left
            self.take()
            left = ("bin", op, left, self.binary(level + 1))

    def unary(self):
        ops = []
        while self.peek() in (("op", "-"), ("op", "+"), ("op", "!")):
            ops.append(self.take()[1])
        tree = self.primary()
        for op in reversed(ops):
            tree = ("un", op, tree)
        return tree

    def primary(self):
        kind, value = self.take()
        if kind == "num":
            return ("num", value)
        if kind == "name":
            if self.peek() == ("op", "("):
                name = ALIASES.get(value, value)
                if name not in FUNCTIONS:
                    raise self.error(f"function {value!r} is not allowed; allowed: {sorted(FUNCTIONS)} and their "
                                     f"CUDA spellings {sorted(ALIASES)}")
                self.take("(")
                self.enter()
                args = [self.conditional()]
                while self.peek() == ("op", ","):
                    self.take(",")
                    args.append(self.conditional())
                self.take(")")
                self.depth -= 1
                if len(args) != FUNCTIONS[name][0]:
                    raise self.error(f"{value}() takes {FUNCTIONS[name][0]} argument(s), got {len(args)}")
                return ("call", name, args)
            if value in self.names:
                return ("var", value)
            if value in CONSTANTS:
                return ("const", value)
            raise self.error(f"name {value!r} is not allowed; allowed: {list(self.names)}, {sorted(CONSTANTS)} "
                             f"and the functions {sorted(FUNCTIONS)}")
        if value == "(":
            self.enter()
            inner = self.conditional()
            self.take(")")
            self.depth -= 1
            return ("paren", inner)
        raise self.error(f"unexpected {value!r}")


def parse_expression(text: str, what: str, names: tuple[str, ...]):
    """The parse tree of `text`, or ExpressionError naming `what` and the problem."""
    try:
        return _Parser(text, what, names).parse()
    except RecursionError:  # MAX_DEPTH keeps well below the limit; a caller deep in its stack may not
        raise _fail(what, text, "nested too deeply for this Python stack; simplify it") from None


# -- walking trees, without recursion ------------------------------------------------------
def children(tree) -> tuple:
    kind = tree[0]
    if kind in ("num", "const", "var"):
        return ()
    if kind == "paren":
        return (tree[1],)
    if kind == "un":
        return (tree[2],)
    if kind == "bin":
        return (tree[2], tree[3])
    if kind == "?:":
        return tree[1:]
    return tuple(tree[2])


def walk(tree) -> Iterator[tuple]:
    """Every node, parents before children."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def fold(tree, visit: Callable[[tuple, list], Any]) -> Any:
    """visit(node, [the values of its children]) for every node, children first; the root's value."""
    stack: list[tuple[tuple, bool]] = [(tree, False)]
    values: list[Any] = []
    while stack:
        node, ready = stack.pop()
        kids = children(node)
        if not ready:
            stack.append((node, True))
            stack.extend((k, False) for k in reversed(kids))
            continue
        n = len(kids)
        args = values[len(values) - n:] if n else []
        if n:
            del values[len(values) - n:]
        values.append(visit(node, args))
    return values[0]


def uses(tree) -> set[str]:
    return {t[1] for t in walk(tree) if t[0] == "var"}


# -- rules per kernel type ------------------------------------------------------------------
def _floating(literal: str) -> bool:
    return any(c in literal for c in ".eE")


def check_types(tree, what: str, text: str, dtype: str) -> None:
    """Refuse what the kernel's type cannot hold: for int32, floating literals, nan,
    float functions and integers beyond int32; for floats, literals beyond the type's
    range and `%`. dtype is the type the expression computes in."""
    for node in walk(tree):
        kind = node[0]
        if dtype == "int32":
            if kind == "num" and _floating(node[1]):
                raise _fail(what, text, f"int32 reductions take integer literals; {node[1]!r} is not one")
            if kind == "num" and (len(node[1]) > 10 or int(node[1]) > INT32_MAX):
                raise _fail(what, text, f"the integer {node[1]!r} does not fit in int32 (at most {INT32_MAX}; "
                                        "write -2147483647 - 1 for the smallest)")
            if kind == "const" and node[1] in ("nan", "NAN"):
                raise _fail(what, text, "int32 reductions have no nan; use inf or -inf (the int32 limits) or a "
                                        "number")
            if kind == "call" and node[1] not in INT_FUNCTIONS:
                raise _fail(what, text, f"int32 reductions take integer literals and only the functions abs, min, "
                                        f"max; {node[1]}() is for floats")
        else:
            if kind == "num" and not abs(float(node[1])) <= _FLOAT_MAX[dtype]:
                raise _fail(what, text, f"the number {node[1]!r} does not fit in {dtype} "
                                        f"(at most {_FLOAT_MAX[dtype]:.7g}); use inf for infinity")
            if kind == "bin" and node[1] == "%":
                raise _fail(what, text, "'%' is for int32 only (C has no % on floats)")


def infinite_constant(tree) -> int:
    """+1 or -1 when the tree is (signs and parentheses around) inf, else 0."""
    sign = 1
    while True:
        kind = tree[0]
        if kind == "paren":
            tree = tree[1]
        elif kind == "un" and tree[1] in "+-":
            sign = -sign if tree[1] == "-" else sign
            tree = tree[2]
        elif kind == "const" and tree[1] in ("inf", "INFINITY"):
            return sign
        else:
            return 0


# -- CUDA C ---------------------------------------------------------------------------------
def _c_number(text: str, float_suffix: bool, integer: bool) -> str:
    if integer:
        return text
    if not _floating(text):
        text += ".0"  # a floating literal: max(0, x) must not pit an int against a float
    elif text.endswith("."):
        text += "0"
    elif text.startswith("."):
        text = "0" + text
    return text + ("f" if float_suffix else "")


def render_c(tree, float_suffix: bool, integer: bool) -> str:
    """CUDA C for a parsed expression, every operation in parentheses. float_suffix:
    floating literals get 'f' so float32 kernels stay in float32 arithmetic; integer:
    an int32 kernel (inf becomes INT32_MAX, fabs is abs). In a floating kernel integer
    literals are written as floating ones, and a function argument that C would compute
    as an int (a comparison, a logical operation, sums of those) is cast to the kernel's
    type: overloads such as max(float, float) and rsqrt(float) take no int; so is the
    dividend of two such ints, which C would divide as ints."""
    real = "float" if float_suffix else "double"

    def visit(node, args):  # -> (C text, whether C computes it as an int)
        kind = node[0]
        if kind == "num":
            return _c_number(node[1], float_suffix, integer), integer
        if kind == "const":
            if node[1] in ("inf", "INFINITY"):
                return (str(INT32_MAX), True) if integer else ("INFINITY", False)
            return "NAN", False
        if kind == "var":
            return node[1], integer
        if kind == "paren":
            return "(" + args[0][0] + ")", args[0][1]
        if kind == "un":  # - -x is -(-x), never the decrement --x
            return f"({node[1]}{args[0][0]})", node[1] == "!" or args[0][1]
        if kind == "bin":
            (a, ia), (b, ib) = args
            op = node[1]
            if op == "/" and ia and ib and not integer:
                # C would divide two ints as ints ((x > 0) / ((x > 0) + (y > 0)) is 0 where both
                # hold, and 0 / 0 is undefined): a floating kernel divides in its own type.
                return f"(({real}){a} / {b})", False
            return f"({a} {op} {b})", op not in "+-*/%" or (ia and ib)
        if kind == "?:":
            return f"({args[0][0]} ? {args[1][0]} : {args[2][0]})", args[1][1] and args[2][1]
        name = "abs" if integer and node[1] == "fabs" else node[1]
        texts = [t if integer or not i else f"({real}){t}" for t, i in args]
        return name + "(" + ", ".join(texts) + ")", integer

    return fold(tree, visit)[0]


def canonical_text(tree) -> str:
    """The rendered expression without spaces: equal for expressions that differ only in
    spacing, redundant unary plus aside, and function spellings."""
    return render_c(tree, False, False).replace(" ", "")


# -- numpy evaluation ----------------------------------------------------------------------
_COMPARE = {"<": np.less, ">": np.greater, "<=": np.less_equal, ">=": np.greater_equal, "==": np.equal,
            "!=": np.not_equal}
_ARITH = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}


def _truthy(v) -> np.ndarray:
    return np.asarray(v) != 0


def _float_visit(env: dict[str, Any]):
    def visit(node, args):
        kind = node[0]
        if kind == "num":
            return float(node[1])
        if kind == "const":
            return CONSTANTS[node[1]]
        if kind == "var":
            return env[node[1]]
        if kind == "paren":
            return args[0]
        with np.errstate(all="ignore"):
            if kind == "un":
                v = args[0]
                return -v if node[1] == "-" else v if node[1] == "+" else np.logical_not(_truthy(v)).astype(np.float64)
            if kind == "bin":
                a, b = args
                op = node[1]
                if op in _ARITH:
                    return _ARITH[op](a, b)
                if op == "%":
                    return np.fmod(a, b)
                if op in ("&&", "||"):
                    f = np.logical_and if op == "&&" else np.logical_or
                    return f(_truthy(a), _truthy(b)).astype(np.float64)
                return _COMPARE[op](a, b).astype(np.float64)
            if kind == "?:":
                return np.where(_truthy(args[0]), args[1], args[2])
            return FUNCTIONS[node[1]][1](*args)

    return visit


def _wrap(v) -> np.ndarray:
    """int64 values to int32 by two's complement, as the GPU does."""
    return (np.asarray(v, dtype=np.int64) - INT32_MIN) % (1 << 32) + INT32_MIN


def _out_of_range(v) -> np.ndarray:
    v = np.asarray(v, dtype=np.int64)
    return (v > INT32_MAX) | (v < INT32_MIN)


def _int_visit(env: dict[str, Any]):
    """visit for fold: (int64 value within int32, undefined-behaviour mask)."""

    def visit(node, args):
        kind = node[0]
        if kind in ("num", "const", "var"):
            if kind == "num":
                v = np.int64(int(node[1]))
            elif kind == "var":
                v = np.asarray(env[node[1]], dtype=np.int64)
            elif node[1] in ("inf", "INFINITY"):
                v = np.int64(INT32_MAX)
            else:
                raise ExpressionError("nan has no int32 value")
            return v, _out_of_range(v)
        if kind == "paren":
            return args[0]
        if kind == "un":
            (v, ub), op = args[0], node[1]
            if op == "!":
                return (v == 0).astype(np.int64), ub
            r = -v if op == "-" else v
            return _wrap(r), ub | _out_of_range(r)
        if kind == "?:":
            (c, uc), (y, uy), (n, un) = args
            t = c != 0
            return np.where(t, y, n), uc | np.where(t, uy, un)
        if kind == "call":
            name = node[1]
            if name in ("abs", "fabs"):
                (v, ub), = args
                r = np.abs(v)
                return _wrap(r), ub | _out_of_range(r)
            (a, ua), (b, ub) = args
            return (np.minimum(a, b) if name == "min" else np.maximum(a, b)), ua | ub
        (a, ua), (b, ub) = args
        op = node[1]
        if op == "&&":
            return ((a != 0) & (b != 0)).astype(np.int64), ua | ((a != 0) & ub)
        if op == "||":
            return ((a != 0) | (b != 0)).astype(np.int64), ua | ((a == 0) & ub)
        if op in _COMPARE:
            return _COMPARE[op](a, b).astype(np.int64), ua | ub
        if op in ("+", "-", "*"):
            r = _ARITH[op](a, b)
            return _wrap(r), ua | ub | _out_of_range(r)
        # / and %: C truncates toward zero; x / 0, x % 0 and INT_MIN / -1 are undefined.
        bad = (b == 0) | ((a == INT32_MIN) & (b == -1))
        safe = np.where(b == 0, 1, b)
        q = np.abs(a) // np.abs(safe) * np.sign(a) * np.sign(safe)
        r = q if op == "/" else a - safe * q
        return _wrap(np.where(b == 0, 0, r)), ua | ub | bad

    return visit


def evaluate(tree, env: dict[str, Any], integer: bool = False):
    """numpy evaluation with C's meaning: float64 (arrays or scalars in env), or with
    integer=True int32 arithmetic (wrapping where C leaves overflow undefined)."""
    if integer:
        return fold(tree, _int_visit(env))[0]
    return fold(tree, _float_visit(env))


def undefined(tree, env: dict[str, Any]) -> np.ndarray:
    """Where an int32 evaluation is undefined in C: signed overflow, division or remainder
    by zero, INT_MIN / -1, abs(INT_MIN); only in the operands C evaluates."""
    return np.asarray(fold(tree, _int_visit(env))[1], dtype=bool)


def rounding_bound(tree, env: dict[str, Any]):
    """(value, bound): the expression's float64 value and a first-order bound on its
    rounding error in units of eps. Leaves are exact; each arithmetic step adds its own
    result's magnitude and propagates its operands' bounds. The GPU may contract a*b+c
    into one FMA where the reference rounds twice, so a check must allow this much."""
    value_of = _float_visit(env)

    def visit(node, args):
        kind = node[0]
        if kind in ("num", "const", "var"):
            v = np.asarray(value_of(node, []), dtype=np.float64)
            return v, np.zeros_like(v)
        if kind == "paren":
            return args[0]
        with np.errstate(all="ignore"):
            v = np.asarray(value_of(node, [a for a, _ in args]), dtype=np.float64)
            if kind == "un":
                return (v, np.zeros_like(v)) if node[1] == "!" else (v, args[0][1])
            if kind == "bin" and node[1] in _ARITH:
                (a, ea), (b, eb) = args
                if node[1] in ("+", "-"):
                    e = ea + eb
                elif node[1] == "*":
                    e = np.abs(b) * ea + np.abs(a) * eb
                else:
                    e = ea / np.abs(b) + np.abs(a) * eb / (b * b)
                return v, np.nan_to_num(e + np.abs(v), nan=np.inf)
            if kind == "bin" and node[1] != "%":
                return v, np.zeros_like(v)  # comparisons and logic: exact away from ties
            # Functions, %, ?: : their own rounding plus, as a crude but safe propagation, the
            # largest argument bound scaled by the result's size relative to the argument's.
            extra = np.zeros_like(v)
            for av, ae in args:
                scale = np.maximum(1.0, np.abs(v) / np.maximum(np.abs(av), 1e-300))
                extra = np.maximum(extra, np.nan_to_num(ae * scale, nan=np.inf))
            exact = kind == "call" and node[1] in ("abs", "fabs", "min", "max", "fmin", "fmax")
            return v, extra if exact else extra + np.abs(v)

    return fold(tree, visit)
