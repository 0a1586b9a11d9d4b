"""The rounding-error model behind kgen's checks of real-valued results.

The families' `tolerance_for` and the self-checks of their standalone programs use this
one model (the templates render the same arithmetic in C++, with the constants below
passed through the families' template_context), so the two checks agree.

Model. A floating-point sum is a tree of additions. Addition j rounds its exact result
s_j by a relative error d_j with |d_j| <= u, the unit roundoff (2^-24 for float32,
2^-53 for float64). To first order the error of the result is sum_j d_j s_j. Taken as
independent with mean zero (the probabilistic rounding analysis of Higham and Mary,
2019), Hoeffding's inequality bounds it:

    P(|error| > LAMBDA * u * sqrt(sum_j s_j^2)) <= 2 exp(-LAMBDA^2 / 2)  (3e-8 at LAMBDA = 6)

The sum of squares grows with the number of additions each term passes through (its
depth), so the bound grows with the square root of a thread's run length plus the log
depth of the merge tree, where the worst case grows linearly and with the sum of the
terms' magnitudes.

The partial sums s_j are not known before the kernel runs. For n terms with total S
and sum of squares Q whose order is unrelated to their values, a partial sum over m
of them has E[s^2] = m^2 (S/n)^2 + m (n - m) / (n - 1) v, with v = Q/n - (S/n)^2. The
nodes of one level of the tree (the j-th partial sums of every sequential run, or the
merges of one tree level) hold disjoint terms, at most m_max each, so a level adds at
most n^2 v / (n - 1) + (S^2 / n) m_max. A kernel's summation order is described by its
levels: `levels` counts them and `msum` adds their m_max, and

    sum_j s_j^2 <= levels * n^2 v / (n - 1) + msum * S^2 / n.

Data sorted by value (a thread's run of increasing terms) breaks the order assumption;
the families keep an order-free bound from the terms' magnitudes for such data.
"""
from __future__ import annotations

import math

# Confidence multiplier: a correct result fails with probability below 2 exp(-18) = 3e-8
# per check under the model.
LAMBDA = 6.0
# The failure probability the data-free bounds are held to (see small_result_allowance).
DATA_FREE_CONFIDENCE = 1e-6

# int32 arithmetic rounds nothing (it wraps, which no tolerance excuses).
UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8,
                 "int32": 0.0}


def unit_roundoff(dtype: str) -> float:
    """Half the distance from 1 to the next number of `dtype`: the largest relative error
    of one rounding to nearest."""
    try:
        return UNIT_ROUNDOFF[str(dtype)]
    except KeyError:
        raise ValueError(f"no unit roundoff for dtype {dtype!r}; known: {sorted(UNIT_ROUNDOFF)}") from None


def chain(n: float, length: float, step: float) -> tuple[float, float]:
    """(levels, msum) of a sequential fold of `length` items into the identity, the j-th
    partial sum covering j*step of the n terms (a thread's run: step 1; a fold of
    partials: step = their size). The first addition, to the identity, is exact."""
    length, step = float(length), float(step)
    if length <= 1 or n <= 0:
        return 0.0, 0.0
    full = min(length, math.floor(n / step))  # partial sums below n; the rest are capped at n
    every = step * full * (full + 1) / 2 + (length - full) * n  # partial sums 1..length
    return length - 1, every - min(float(n), step)


def tree(n: float, depth: int, leaf: float, leaves: float) -> tuple[float, float]:
    """(levels, msum) of a binary merge tree of `depth` levels over values of at most leaf
    terms each, `leaves` of them not the identity. Merging with the identity is exact, so
    at most leaves - 1 levels round: counted as the top ones, whose sums are largest."""
    rounding_levels = int(min(int(depth), max(math.ceil(leaves) - 1, 0)))
    msum = 0.0
    for level in range(int(depth) - rounding_levels + 1, int(depth) + 1):
        msum += min(float(n), float(leaf) * 2.0 ** level)
    return float(rounding_levels), msum


def add(*parts: tuple[float, float]) -> tuple[float, float]:
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


def square_sum(n: float, total_sq: float, sumsq: float, levels: float, msum: float) -> float:
    """The bound on sum_j s_j^2 for n terms whose total squared is total_sq and whose
    squares add to sumsq, added in a structure of `levels` levels whose largest partial
    sums add up to `msum` terms. The bound is linear in total_sq and sumsq, so for many
    independent sums of n terms each (the entries of a product) pass the sums of both
    over the sums: the result is the sum of their bounds."""
    if n <= 0:
        return 0.0
    n = float(n)
    spread = max(sumsq / n - total_sq / (n * n), 0.0)
    var_part = levels * n * n * spread / (n - 1) if n > 1 else 0.0
    return var_part + msum * total_sq / n


def bound(u: float, squares: float) -> float:
    """LAMBDA * u * sqrt(squares): the error a sum with this sum of squared partial sums
    stays within, at the model's confidence."""
    return LAMBDA * u * math.sqrt(max(squares, 0.0))


def numpy_sum_levels(n: int) -> tuple[float, float]:
    """(levels, msum) of numpy's pairwise float64 sum: runs of at most 16 (8 accumulators
    over blocks of 128), then halving merges."""
    if n <= 1:
        return 0.0, 0.0
    run = min(n, 16)
    leaves = math.ceil(n / run)
    depth = max(0, math.ceil(math.log2(leaves)))
    return add(chain(n, run, 1), tree(n, depth, run, leaves))


def small_result_allowance(outputs: int, confidence: float = DATA_FREE_CONFIDENCE) -> float:
    """How far below its typical size the norm of `outputs` random results may fall, at
    `confidence`: a bound without the data, relative to the result, must allow it (one
    random-sign sum can cancel almost to zero; the norm of many concentrates).

    The squared norm of d random results behaves as a chi-square with d degrees of
    freedom; Chernoff's bound P(chi2_d <= q d) <= (q e^(1-q))^(d/2) gives q, and the
    allowance is 1/sqrt(q)."""
    d = max(int(outputs), 1)
    target = 2.0 * math.log(confidence) / d  # ln q + 1 - q must fall to this
    lo, hi = 1e-300, 1.0
    for _ in range(200):
        mid = math.sqrt(lo * hi) if lo < 1e-3 else (lo + hi) / 2
        if math.log(mid) + 1 - mid < target:
            lo = mid
        else:
            hi = mid
    return 1.0 / math.sqrt(hi)


def template_constants(dtype: str, acc_dtype: str) -> dict[str, float]:
    """Constants the standalone programs' C++ copy of this model needs."""
    return {"lambda_": LAMBDA, "u_acc": unit_roundoff(acc_dtype), "u_out": unit_roundoff(dtype),
            "u64": UNIT_ROUNDOFF["float64"]}
