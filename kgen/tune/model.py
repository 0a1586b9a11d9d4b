"""The guided strategy's model: specs as numeric features, a quadratic model of log(time)
fitted by ridge regression, a space-filling start, and the choice of each next batch
(half near the current leaders, half the model's best guesses anywhere).

Every function here is pure (numpy in, indices out): the tuner (kgen.tune.tuner) owns the
loop, the records and the budget.
"""
from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Sequence

import numpy as np

from ..core.spec import Spec

# The guided strategy evaluates batches of up to GUIDED_BATCH candidates (compiled in parallel)
# and stops after GUIDED_PATIENCE batches in a row that did not improve the best by 0.5%.
# Replayed on recorded exhaustive tunes of an H200 (docs/bench/research/guided_replay.py), where two
# basins of 3000x5000x700 lie 3% apart, patience 6 settled in the wrong one for 7 seeds of
# 20; patience 24 with spread guesses for none of 60 over three recordings, launching 15-20%
# of the space on average.
GUIDED_BATCH = 16
# With at least this many compile workers a batch is one candidate per worker instead (the
# replay above gives the same picks with batches of 15: no seed of 40 more than 0.01% off on
# 3000x5000x700 or 4096^3).
GUIDED_POOL_BATCH_FROM = 8
GUIDED_PATIENCE = 24
# Where candidates are chosen a few at a time as compile slots free up (8 or more compile
# workers), patience is counted in batches' worth of candidates. Replayed with a simulated
# 15-process pool (docs/bench/research/guided_cost_replay.py) on six recorded exhaustive tunes
# of an H200, 30 seeds each: at 12, 2-4 seeds of 30 on 1400x3300x1200 ended 3.2% behind (a
# basin that takes long to leave); at 18, none of 180 more than 2.1%, compiling 340-500
# candidates (24 compiled 600 on that recording).
GUIDED_ROLLING_PATIENCE = 18
# Where at least this many batches' worth of candidates are compiled already (earlier tunes
# of other shapes left their cubins in the cache), the guided search stays among those until
# it converges ...
GUIDED_CACHED_FIRST_BATCHES = 4
# ... and then goes on over the whole space with this many batches' worth of patience left.
GUIDED_PROBE_BATCHES = 3
# The space-filling start covers GUIDED_START_BATCHES batches (at most a third of the budget);
# later batches give GUIDED_NEAR_SHARE of their places to neighbours of the leaders and the
# rest to the model's best guesses anywhere.
GUIDED_START_BATCHES = 3
GUIDED_NEAR_SHARE = 0.5
# The model's guesses in one batch differ pairwise in more than GUIDED_SPREAD fields.
GUIDED_SPREAD = 2
# Candidates ptxas would likely reject are skipped once it has rejected this many (and four
# times as many were compiled): on recorded exhaustive tunes of 3000x5000x700 and 4096^3
# (15% of the candidates spill or exceed register limits), a model fitted on a random fifth
# of the compiled ones caught 3 in 4 of the rest and wrongly flagged 1-2% of the good ones.
GUIDED_REJECT_MIN = 8

# (row index into the feature matrix, median ms) of each candidate timed so far
Timed = Sequence[tuple[int, float]]


def _leaves(spec: Spec) -> list[tuple[str, Any]]:
    """The spec's fields flattened: tuples become name[i]."""
    out: list[tuple[str, Any]] = []
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        if isinstance(v, tuple):
            out.extend((f"{f.name}[{i}]", x) for i, x in enumerate(v))
        else:
            out.append((f.name, v))
    return out


def feature_matrix(specs: Sequence[Spec]) -> np.ndarray:
    """Standardised numeric features of the specs: log2 of integer fields, 0/1 for
    booleans, one-hot for strings; fields that never vary are dropped."""
    rows = [_leaves(s) for s in specs]
    cols = []
    for j in range(len(rows[0])):
        vals = [r[j][1] for r in rows]
        if all(isinstance(v, bool) for v in vals):
            cols.append([float(v) for v in vals])
        elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            shift = 1.0 if min(vals) <= 0 else 0.0
            cols.append([math.log2(max(v + shift, 1e-9)) for v in vals])
        else:
            for cat in sorted({json.dumps(v) for v in vals}):
                cols.append([1.0 if json.dumps(v) == cat else 0.0 for v in vals])
    X = np.array(cols, dtype=np.float64).T if cols else np.zeros((len(specs), 0))
    keep = X.std(axis=0) > 1e-12
    X = X[:, keep]
    if X.shape[1]:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X


def code_matrix(specs: Sequence[Spec]) -> np.ndarray:
    """The specs' flattened field values as integer codes, one column per field."""
    rows = [[json.dumps(v) for _, v in _leaves(s)] for s in specs]
    cols = list(zip(*rows)) if rows else []
    codes = []
    for col in cols:
        lookup = {v: n for n, v in enumerate(sorted(set(col)))}
        codes.append([lookup[v] for v in col])
    return np.array(codes, dtype=np.int64).T if codes else np.zeros((len(specs), 0), dtype=np.int64)


# The last feature matrix's quadratic expansion: a run fits its model on the same X after
# every few candidates, and the expansion (n x d^2/2) costs more than the fit.
_expanded: tuple[np.ndarray, np.ndarray] | None = None


def _quadratic(X: np.ndarray) -> np.ndarray:
    global _expanded
    if _expanded is not None and _expanded[0] is X:
        return _expanded[1]
    Q = _expand(X)
    _expanded = (X, Q)
    return Q


def _expand(X: np.ndarray) -> np.ndarray:
    n, d = X.shape
    cols = [np.ones(n)] + [X[:, i] for i in range(d)]
    cols += [X[:, i] * X[:, j] for i in range(d) for j in range(i, d)]
    return np.stack(cols, axis=1)


def fit_predict(X: np.ndarray, known: Sequence[int], y: Sequence[float], ridge: float = 1.0) -> np.ndarray:
    """Ridge regression of y on quadratic features of X[known]; predictions for every row."""
    Q = _quadratic(X)
    A = Q[list(known)]
    reg = ridge * np.eye(Q.shape[1])
    reg[0, 0] = 0.0  # the intercept is not shrunk
    w = np.linalg.solve(A.T @ A + reg, A.T @ np.asarray(y, dtype=np.float64))
    return Q @ w


def maximin(X: np.ndarray, pool: Sequence[int], count: int, start: Sequence[int],
            rng: np.random.Generator) -> list[int]:
    """Pick `count` rows of `pool` far from each other (and from `start`): a space-filling start."""
    chosen: list[int] = []
    pool = list(pool)
    if not pool or count <= 0:
        return chosen
    ref = list(start)
    if not ref:
        first = pool[int(rng.integers(len(pool)))]
        chosen.append(first)
        ref.append(first)
    dist = np.min(np.linalg.norm(X[pool][:, None, :] - X[ref][None, :, :], axis=2), axis=1)
    for c in chosen:
        dist[pool.index(c)] = -1.0
    while len(chosen) < count:
        i = int(np.argmax(dist))
        if dist[i] < 0:
            break
        chosen.append(pool[i])
        dist = np.minimum(dist, np.linalg.norm(X[pool] - X[pool[i]], axis=1))
        dist[i] = -1.0
    return chosen


def near_leaders(X: np.ndarray, ok: Timed, pool: Sequence[int], tops: int, k: int) -> list[int]:
    """Untried rows among the k nearest neighbours of `tops` leaders: the fastest, then
    the good ones (within 10% of it) farthest from the leaders already chosen, so that
    a second basin (say, another tile shape a few % behind) is refined too rather than
    only the neighbourhood of the first."""
    if not pool:
        return []
    ranked = sorted(ok, key=lambda t: t[1])
    good = [i for i, t in ranked if t <= ranked[0][1] * 1.10]
    leaders = [good[0]]
    while len(leaders) < min(tops, len(good)):
        rest = [i for i in good if i not in leaders]
        far = [float(np.min(np.linalg.norm(X[leaders] - X[i], axis=1))) for i in rest]
        leaders.append(rest[int(np.argmax(far))])
    near: list[int] = []
    P = X[pool]
    for i in leaders:
        d = np.linalg.norm(P - X[i], axis=1)
        for j in np.argsort(d, kind="stable")[:k]:
            if pool[j] not in near:
                near.append(pool[j])
    return near


def likely_rejected(X: np.ndarray, ok: Sequence[int], rejected: Sequence[int], pool: Sequence[int]) -> set[int]:
    """Rows of `pool` that a model of ptxas' verdicts so far (a linear probability model on
    the quadratic features, `rejected` = 1, `ok` = 0) expects to be rejected too: spills and
    register limits depend on the spec alone, and such candidates would waste a compile slot
    (the timing model never sees them, so it keeps ranking them high)."""
    if len(rejected) < GUIDED_REJECT_MIN or len(ok) + len(rejected) < 4 * GUIDED_REJECT_MIN:
        return set()
    p = fit_predict(X, list(ok) + list(rejected), [0.0] * len(ok) + [1.0] * len(rejected))
    return {i for i in pool if p[i] > 0.5}


def choose_batch(X: np.ndarray, codes: np.ndarray, ok: Timed, pool: Sequence[int], count: int,
                 rejected: Sequence[int] = ()) -> list[int]:
    """The next batch of `count` rows of `pool`, given the rows timed so far (`ok`) and those
    ptxas rejected after compiling (`rejected`)."""
    idx, times = zip(*ok)
    skip = likely_rejected(X, idx, rejected, pool)
    if skip and len(skip) < len(pool):
        pool = [i for i in pool if i not in skip]
    pred = fit_predict(X, idx, [math.log(t) for t in times])
    by_pred = sorted(pool, key=lambda i: pred[i])
    # Half of the batch near the three leaders (ranked by the model), half the model's
    # best guesses anywhere: local refinement without losing sight of other basins.
    near = sorted(near_leaders(X, ok, pool, 3, 6), key=lambda i: pred[i])
    pick = near[: max(1, round(count * GUIDED_NEAR_SHARE))]
    # The model's guesses are spread out: each differs from the guesses already in the
    # batch in more than GUIDED_SPREAD fields, so one batch probes several basins (say,
    # two tile shapes a few % apart) instead of one basin's close variants.
    guesses: list[int] = []
    for i in by_pred:
        if len(pick) + len(guesses) >= count:
            break
        if i in pick:
            continue
        if GUIDED_SPREAD and guesses and \
                np.min((codes[guesses] != codes[i]).sum(axis=1)) <= GUIDED_SPREAD:
            continue
        guesses.append(i)
    pick += guesses
    for i in by_pred:  # too few distinct guesses: fill up in the model's order
        if len(pick) >= count:
            break
        if i not in pick:
            pick.append(i)
    return pick
