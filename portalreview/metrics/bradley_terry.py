"""Bradley-Terry strengths from pairwise "which is more urgent" judgements, and the most
informative next pair to ask (issue 19: adaptive urgency pairs for seed 002's inboxes).

Seed 002 (PMR-Bench, Section 4.2) sorts an inbox by each message's win rate over *all* of its
pairs. When only some pairs are judged, and those chosen by what was learned so far, win rates
are no longer comparable between messages (a message met mostly by close rivals wins about
half of its pairs whatever its place). The Bradley-Terry model, P(i beats j) = sigmoid(theta_i
- theta_j), uses who was met: its strengths ``theta`` are comparable whichever pairs were asked.

The fit maximises the log-likelihood minus a small ridge ``ridge * sum(theta**2)``, which keeps
the strengths finite when a message has won (or lost) every comparison so far and ties the
scale down; ``benchmarks/bench_adaptive_pairs.py`` measured 0.05 as the best of 0.01, 0.05 and
0.2 for 30-message inboxes. The objective is strictly concave, so Newton's method from zero
finds its one maximum; the fit is batched, so that a bootstrap refits a thousand resamples of
outcomes in one call. ``tests/metrics/test_bradley_terry.py`` checks it against scipy's
L-BFGS on the same objective and against the two-message case worked by hand.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
import pandas as pd

#: The ridge of the fit (see the module docstring).
RIDGE = 0.05
_MAX_STEP = 4.0  # the largest change of one strength in one Newton step (a damping guard)


def bradley_terry(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    first_won: np.ndarray,
    ridge: float = RIDGE,
    *,
    tolerance: float = 1e-10,
    max_iterations: int = 100,
) -> np.ndarray:
    """Strengths (log scale, higher = more urgent) of ``n`` items from judgements
    ``first[j]`` against ``second[j]`` (item indices) that ``first_won[j]`` (1 or 0) says
    which of the two won. ``first_won`` may be 2-D, one row of outcomes per resample of the
    same pairs: the result then has one row of strengths per row.

    Maximises sum log sigmoid(+/-(theta_first - theta_second)) - ridge * sum(theta**2) by
    Newton's method; an item never compared gets 0 (the ridge's pull).
    """
    if ridge <= 0:
        raise ValueError("the ridge must be positive (it keeps undefeated items finite)")
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    won = np.asarray(first_won, dtype=float)
    single = won.ndim == 1
    won = np.atleast_2d(won)
    if won.shape[1] != first.size or first.size != second.size:
        raise ValueError("first, second and first_won must have one entry per judgement")
    if np.any(first == second):
        raise ValueError("an item cannot be judged against itself")
    rows = won.shape[0]
    theta = np.zeros((rows, n))
    if first.size == 0:
        return theta[0] if single else theta
    diagonal = np.arange(n)
    for _ in range(max_iterations):
        p = 1.0 / (1.0 + np.exp(-(theta[:, first] - theta[:, second])))
        residual = won - p  # d(log-likelihood) / d(theta_first - theta_second)
        gradient = _scatter(residual, first, n) - _scatter(residual, second, n) - 2 * ridge * theta
        hessian = _laplacian(p * (1 - p), first, second, n)
        hessian[:, diagonal, diagonal] += 2 * ridge
        step = np.linalg.solve(hessian, gradient[..., None])[..., 0]
        largest = np.abs(step).max(axis=1, keepdims=True)
        step *= np.minimum(1.0, _MAX_STEP / np.maximum(largest, 1e-300))
        theta += step
        if largest.max() < tolerance:
            break
    return theta[0] if single else theta


def strengths(
    n: int,
    first: np.ndarray,
    second: np.ndarray,
    first_won: np.ndarray,
    ridge: float = RIDGE,
) -> np.ndarray:
    """:func:`bradley_terry`, with NaN for an item never compared (it sorts last, as a
    never-compared message does by win rate in ``metrics.urgency.sort_by_score``)."""
    theta = bradley_terry(n, first, second, first_won, ridge)
    met = np.zeros(n, dtype=bool)
    met[np.asarray(first, dtype=np.int64)] = True
    met[np.asarray(second, dtype=np.int64)] = True
    return np.where(met, theta, np.nan)


def strengths_from_outcomes(
    items: Sequence[Hashable], outcomes: Sequence[tuple[Hashable, Hashable]]
) -> pd.Series:
    """:func:`strengths` of ``items`` from ``(winner, loser)`` outcomes, fitted in one
    canonical way - each outcome as (winner, loser, 1), the outcomes in (winner, loser) order
    of ``items`` - so that the same judgements give the same strengths to the last bit
    whoever reads them in whatever order (the inbox view and the report); NaN for an item
    never compared."""
    index = {item: i for i, item in enumerate(items)}
    pairs = sorted((index[winner], index[loser]) for winner, loser in outcomes)
    first = np.array([w for w, _ in pairs], dtype=np.int64)
    second = np.array([lo for _, lo in pairs], dtype=np.int64)
    fitted = strengths(len(index), first, second, np.ones(len(pairs)))
    return pd.Series(fitted, index=list(items), dtype=float)


def _scatter(values: np.ndarray, index: np.ndarray, n: int) -> np.ndarray:
    """Per row, the sum of ``values`` falling on each of the ``n`` items."""
    rows = values.shape[0]
    flat = (np.arange(rows)[:, None] * n + index[None, :]).reshape(-1)
    return np.bincount(flat, weights=values.reshape(-1), minlength=rows * n).reshape(rows, n)


def _laplacian(weights: np.ndarray, first: np.ndarray, second: np.ndarray, n: int) -> np.ndarray:
    """Per row, sum_j weights[j] (e_first - e_second)(e_first - e_second)^T: the negated
    Hessian of the log-likelihood."""
    rows = weights.shape[0]
    cells = np.concatenate(
        [first * n + first, second * n + second, first * n + second, second * n + first]
    )
    signed = np.concatenate([weights, weights, -weights, -weights], axis=1)
    flat = (np.arange(rows)[:, None] * n * n + cells[None, :]).reshape(-1)
    total = np.bincount(flat, weights=signed.reshape(-1), minlength=rows * n * n)
    return total.reshape(rows, n, n)


def end_weights(theta: np.ndarray) -> np.ndarray:
    """How much each item's place matters to NDCG@k and T-NDCG@k (seed 002, Section 4.2):
    NDCG looks at the top of the order, T-NDCG at the bottom too, so an item weighs
    ``1 / log2(2 + its distance from the nearer end of the current order)``."""
    n = theta.size
    place = np.empty(n, dtype=int)
    place[np.argsort(-theta, kind="stable")] = np.arange(n)
    return np.maximum(1.0 / np.log2(place + 2.0), 1.0 / np.log2(n - place + 1.0))


def pair_values(theta: np.ndarray) -> np.ndarray:
    """The value of asking each pair next: how unsure the model is of its outcome, p(1 - p),
    times the weight of the two items' places (:func:`end_weights`); an n x n matrix."""
    weight = end_weights(theta)
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
    return p * (1 - p) * (weight[:, None] + weight[None, :])


def most_informative_pair(
    theta: np.ndarray, asked: np.ndarray, rng: np.random.Generator
) -> tuple[int, int] | None:
    """The unasked pair (i < j) of highest :func:`pair_values`, ties broken by ``rng``; None
    when every pair was asked. ``asked`` is a symmetric n x n boolean matrix."""
    n = theta.size
    value = pair_values(theta)
    open_pairs = ~np.asarray(asked, dtype=bool) & np.triu(np.ones((n, n), dtype=bool), k=1)
    if not open_pairs.any():
        return None
    value = np.where(open_pairs, value, -np.inf)
    best = np.flatnonzero(value >= value.max() - 1e-12)
    i, j = np.unravel_index(int(rng.choice(best)), value.shape)
    return int(i), int(j)
