"""Urgency as pairwise ranking: PMR-Bench's measures (seed 002; reading of T-NDCG from FACTS.md).

Urgency levels run 1 (emergency care now) to 6 (no medical attention needed); lower is more
urgent. Pairs are judged "which of the two is more urgent", never tied. From levels come the
pair difficulty (Section 3.2.2), pairwise accuracy overall and per difficulty (Section 4.1,
Table 2), inbox scores from all pair outcomes - plain win rate or the margin-weighted score
(Section 4.2, "Inference") - and the ranking quality of a sorted inbox: NDCG@k and the
tail-penalised T-NDCG@k (Section 4.2, "Evaluation Metrics"), with its expectation over random
orders of tied messages (Section 4.3 "Multi-Class Baseline", Appendix C.3).

NDCG is hand-written to match the ``ranx`` package's default ``ndcg`` (which the paper used):
gain = relevance, discount = log2(rank + 1), ideal DCG from the ideal order cut at k.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd

from portalreview.metrics.bradley_terry import strengths_from_outcomes

#: Relevance of each urgency level: 6 - level, so level 1 -> 5 and level 6 -> 0 (contributes
#: nothing). The reading consistent with every T-NDCG the paper reports (FACTS.md).
DEFAULT_RELEVANCE: Mapping[int, float] = {1: 5.0, 2: 4.0, 3: 3.0, 4: 2.0, 5: 1.0, 6: 0.0}

Difficulty = Literal["easy", "medium", "hard"]


@dataclass(frozen=True)
class ExpectedScore:
    """Mean and SD of T-NDCG@k over the equally likely orders of tied items."""

    mean: float
    sd: float
    n_orders: int
    exact: bool


# --------------------------------------------------------------------------------------------
# Levels, difficulty, pairwise accuracy
# --------------------------------------------------------------------------------------------


def _check_level(level: Any, where: str) -> int:
    if isinstance(level, bool) or not isinstance(level, (int, np.integer)):
        raise ValueError(f"{where}: an urgency level must be an integer 1-6, got {level!r}")
    if not 1 <= level <= 6:
        raise ValueError(f"{where}: an urgency level must be 1-6, got {level}")
    return int(level)


def relevance_from_levels(
    levels: Sequence[int], *, mapping: Mapping[int, float] = DEFAULT_RELEVANCE
) -> np.ndarray:
    """Relevance of each message from its urgency level (seed 002, Section 4.2).

    The paper maps levels to relevance so that level 1 is most relevant; the exact map is not
    printed. ``mapping`` defaults to :data:`DEFAULT_RELEVANCE` (relevance = 6 - level). A level
    missing from ``mapping`` is a ValueError; relevance must be finite and non-negative.
    """
    out = []
    for i, level in enumerate(levels):
        if level not in mapping:
            raise ValueError(f"levels[{i}] = {level!r} has no relevance in mapping")
        value = float(mapping[level])
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"mapping[{level!r}] must be finite and >= 0, got {value}")
        out.append(value)
    return np.asarray(out, dtype=float)


def difficulty(level_a: int, level_b: int) -> Difficulty:
    """Difficulty of a pair from its level gap (seed 002, Section 3.2.2).

    easy: gap >= 4; medium: gap 2-3; hard: gap 1 (the paper's "less than 2"). A gap of 0 is
    not a valid pair: pairs are never tied, so it is a ValueError.
    """
    gap = abs(_check_level(level_a, "level_a") - _check_level(level_b, "level_b"))
    if gap == 0:
        raise ValueError(f"levels {level_a} and {level_b} are equal: not a valid urgency pair")
    if gap >= 4:
        return "easy"
    return "medium" if gap >= 2 else "hard"


def pairwise_accuracy(
    levels_a: Sequence[int],
    levels_b: Sequence[int],
    predicted_a_more_urgent: Sequence[bool],
) -> pd.DataFrame:
    """Accuracy of pairwise urgency decisions against reference levels (seed 002, Table 2).

    Pair ``i`` shows messages a and b with reference levels ``levels_a[i]`` and
    ``levels_b[i]``; the reference answer is "a" when a's level is lower (more urgent). A
    decision is correct when ``predicted_a_more_urgent[i]`` equals that. Rows easy, medium,
    hard (by :func:`difficulty`) and total; columns n, correct, accuracy (NaN for an empty
    bucket). Equal levels, or a decision that is not a bool, is a ValueError.
    """
    if not len(levels_a) == len(levels_b) == len(predicted_a_more_urgent):
        raise ValueError("levels_a, levels_b and predicted_a_more_urgent must be parallel")
    if len(levels_a) == 0:
        raise ValueError("no pairs given")
    n: Counter[str] = Counter()
    hits: Counter[str] = Counter()
    for i, (la, lb, pred) in enumerate(
        zip(levels_a, levels_b, predicted_a_more_urgent, strict=True)
    ):
        if not isinstance(pred, (bool, np.bool_)):
            raise ValueError(f"predicted_a_more_urgent[{i}] must be True or False, got {pred!r}")
        bucket = difficulty(la, lb)
        correct = bool(pred) == (la < lb)
        for key in (bucket, "total"):
            n[key] += 1
            hits[key] += correct
    index = ["easy", "medium", "hard", "total"]
    return pd.DataFrame(
        {
            "n": [n[k] for k in index],
            "correct": [hits[k] for k in index],
            "accuracy": [hits[k] / n[k] if n[k] else math.nan for k in index],
        },
        index=pd.Index(index, name="difficulty"),
    )


# --------------------------------------------------------------------------------------------
# Inbox scores from pair outcomes
# --------------------------------------------------------------------------------------------


def _check_items(items: Sequence[Hashable]) -> list[Hashable]:
    items = list(items)
    if not items:
        raise ValueError("items is empty")
    if len(set(items)) != len(items):
        raise ValueError("items must be unique")
    return items


def win_rate_scores(
    items: Sequence[Hashable], outcomes: Iterable[tuple[Hashable, Hashable]]
) -> pd.Series:
    """Win rate of each message from pairwise outcomes (seed 002, Sections 3.1 and 4.2).

    ``outcomes`` lists ``(winner, loser)`` for each comparison ("winner" = judged more urgent).
    Win rate = wins / comparisons the message took part in; NaN for a message never compared.
    Sorting by it descending gives the inbox order. Unknown items, or a message compared with
    itself, is a ValueError.
    """
    items = _check_items(items)
    known = set(items)
    wins: Counter[Hashable] = Counter()
    played: Counter[Hashable] = Counter()
    for i, outcome in enumerate(outcomes):
        if not isinstance(outcome, (tuple, list)) or len(outcome) != 2:
            raise ValueError(f"outcomes[{i}] must be a (winner, loser) pair")
        winner, loser = outcome
        if winner not in known or loser not in known:
            raise ValueError(f"outcomes[{i}] names an item not in items: {outcome!r}")
        if winner == loser:
            raise ValueError(f"outcomes[{i}] compares {winner!r} with itself")
        wins[winner] += 1
        played[winner] += 1
        played[loser] += 1
    values = [wins[x] / played[x] if played[x] else math.nan for x in items]
    return pd.Series(values, index=items, name="win_rate")


def inbox_scores(
    items: Sequence[Hashable],
    outcomes: Sequence[tuple[Hashable, Hashable]],
    *,
    adaptive: bool,
) -> pd.Series:
    """The score an inbox is sorted by, from ``(winner, loser)`` outcomes: each message's win
    rate (seed 002, Sections 3.1 and 4.2), or for an adaptive inbox (pairs chosen from the
    answers so far, issue 19) its Bradley-Terry strength, fitted in the one canonical way
    (``bradley_terry.strengths_from_outcomes``); NaN for a message never compared. The inbox
    view and the report both sort by this, with :func:`sort_by_score`."""
    if adaptive:
        return strengths_from_outcomes(items, outcomes)
    return win_rate_scores(items, outcomes)


def _normalized(a: float, b: float, normalize: str) -> tuple[float, float]:
    if normalize == "none":
        return a, b
    if normalize == "softmax":
        qa = 1.0 / (1.0 + math.exp(min(b - a, 700.0)))
        return qa, 1.0 - qa
    if a < 0 or b < 0:
        raise ValueError(f"normalize='sum' needs non-negative scores, got {a} and {b}")
    total = a + b
    return (0.5, 0.5) if total == 0 else (a / total, b / total)


def margin_weighted_scores(
    items: Sequence[Hashable],
    judgments: Iterable[tuple[Hashable, Hashable, float, float]],
    *,
    normalize: Literal["sum", "softmax", "none"] = "sum",
) -> pd.Series:
    """Margin-weighted inbox scores from judge probabilities (seed 002, Section 4.2 "Inference").

    The paper: "each time a sample is deemed more urgent than another, we increment its score by
    (1 + Delta), where Delta is the difference in normalized probabilities / reward scores"; the
    inbox is sorted by total score. Our reading: ``judgments`` lists ``(a, b, s_a, s_b)`` where
    s_a is the judge's score that a is the more urgent of the two (for UrgentSFT, P(YES) from
    the presentation asking about a; for a reward model, a's reward) and s_b the same for b.
    The scores are normalized to q_a + q_b = 1 (``"sum"``: s / (s_a + s_b) for probabilities;
    ``"softmax"``: the Bradley-Terry probability 1 / (1 + exp(s_b - s_a)) for rewards;
    ``"none"``: used as given). Delta = q_a - q_b; if Delta > 0, a's score grows by 1 + Delta,
    if Delta < 0, b's by 1 + |Delta|; Delta = 0 (a tie) adds nothing to either.
    """
    if normalize not in ("sum", "softmax", "none"):
        raise ValueError(f"normalize must be 'sum', 'softmax' or 'none', got {normalize!r}")
    items = _check_items(items)
    known = set(items)
    score = dict.fromkeys(items, 0.0)
    for i, judgment in enumerate(judgments):
        if not isinstance(judgment, (tuple, list)) or len(judgment) != 4:
            raise ValueError(f"judgments[{i}] must be (a, b, score_a, score_b)")
        a, b, sa, sb = judgment
        if a not in known or b not in known or a == b:
            raise ValueError(f"judgments[{i}] must name two different items of items")
        sa, sb = float(sa), float(sb)
        if not (math.isfinite(sa) and math.isfinite(sb)):
            raise ValueError(f"judgments[{i}] has a non-finite score")
        qa, qb = _normalized(sa, sb, normalize)
        delta = qa - qb
        if delta > 0:
            score[a] += 1.0 + delta
        elif delta < 0:
            score[b] += 1.0 - delta
    return pd.Series([score[x] for x in items], index=items, name="score")


#: Scores closer than this (relative; absolute below 1) are ties. Why: a fitted score (a
#: Bradley-Terry strength, a sum of margins) of two messages that are equal in exact arithmetic
#: comes out a few units in the 16th digit apart, and which one is larger depends on the order
#: of the arithmetic; a real difference of judgements is many orders of magnitude larger.
TIE_TOLERANCE = 1e-9


def merge_near_ties(values: np.ndarray, tolerance: float = TIE_TOLERANCE) -> np.ndarray:
    """``values`` (1-D, or 2-D: one row per resample) with every score within ``tolerance``
    of the next higher score of its row replaced by the highest score of that run, so that
    near-equal scores become exactly equal (ties); NaN stays NaN."""
    array = np.asarray(values, dtype=float)
    rows = np.atleast_2d(array)
    if rows.shape[1] < 2:
        return array.copy()
    order = np.argsort(-rows, axis=1, kind="stable")  # highest first, NaN last
    ranked = np.take_along_axis(rows, order, axis=1)
    above, below = ranked[:, :-1], ranked[:, 1:]
    scale = np.maximum(1.0, np.maximum(np.abs(above), np.abs(below)))
    starts = np.ones(ranked.shape, dtype=bool)
    starts[:, 1:] = ~(above - below <= tolerance * scale)  # NaN starts a run of its own
    head = np.maximum.accumulate(np.where(starts, np.arange(rows.shape[1]), 0), axis=1)
    merged = np.empty_like(rows)
    np.put_along_axis(merged, order, np.take_along_axis(ranked, head, axis=1), axis=1)
    return merged.reshape(array.shape)


def sort_by_score(scores: Mapping[Hashable, float] | pd.Series) -> list[Hashable]:
    """Items ordered by score, highest (most urgent) first; ties keep their input order.

    Seed 002, Section 3.1: the inbox is re-sorted by win rate (or margin-weighted score).

    Scores within :data:`TIE_TOLERANCE` are ties (:func:`merge_near_ties`). NaN scores go
    last. The tie rule is arbitrary: use :func:`expected_t_ndcg_at_k` to score an ordering
    with ties without depending on it.
    """
    series = pd.Series(scores, dtype=float) if not isinstance(scores, pd.Series) else scores
    merged = pd.Series(merge_near_ties(series.to_numpy(dtype=float)), index=series.index)
    return list(merged.sort_values(ascending=False, kind="stable", na_position="last").index)


# --------------------------------------------------------------------------------------------
# NDCG and T-NDCG
# --------------------------------------------------------------------------------------------


def _relevance_array(relevance: Sequence[float], name: str = "relevance") -> np.ndarray:
    try:
        arr = np.asarray(relevance, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numbers") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"{name} must be finite and non-negative")
    return arr


def _cutoff(k: int | None, n: int) -> int:
    if k is None:
        return n
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    return min(int(k), n)


def _discounts(k: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(2, k + 2))


def _ndcg_rows(rows: np.ndarray, ideal: np.ndarray, k: int) -> np.ndarray:
    """NDCG@k of each row (an arrangement of relevance values); ``ideal`` sorted descending."""
    disc = _discounts(k)
    idcg = float(ideal[:k] @ disc)
    if idcg == 0:
        return np.zeros(rows.shape[0])
    return (rows[:, :k] @ disc) / idcg


def ndcg_at_k(relevance_in_order: Sequence[float], k: int | None = None) -> float:
    """NDCG@k of a ranked list (seed 002, Section 4.2; ranx-compatible, hand-written).

    ``relevance_in_order[i]`` is the relevance of the item ranked at position i + 1 (see
    :func:`relevance_from_levels`). DCG@k = sum over the first k positions of relevance /
    log2(rank + 1) (linear gain, ranx's default); IDCG@k is the DCG@k of the same relevance
    values sorted descending. ``k=None`` or k beyond the list means the whole list. When IDCG
    is 0 (no relevant item) the score is 0.0, as in ranx.
    """
    rel = _relevance_array(relevance_in_order)
    k = _cutoff(k, rel.size)
    return float(_ndcg_rows(rel[None, :], np.sort(rel)[::-1], k)[0])


def t_ndcg_at_k(relevance_in_order: Sequence[float], k: int | None = None) -> float:
    """Tail-penalised NDCG: NDCG@k(order) - NDCG@k(reversed order) (seed 002, Section 4.2).

    The paper's formula is lost in its text; it describes NDCG of the sorted inbox penalised
    by the NDCG of the reverse order. This reading (FACTS.md) reproduces its numbers: a perfect
    sort of a 30-message inbox with 5 messages per level scores 0.924 @10 and 0.394 @30. It
    ranges over [-1, 1]; urgent messages left at the bottom of the list lower it.
    """
    rel = _relevance_array(relevance_in_order)
    k = _cutoff(k, rel.size)
    rows = np.stack([rel, rel[::-1]])
    forward, backward = _ndcg_rows(rows, np.sort(rel)[::-1], k)
    return float(forward - backward)


def _distinct_permutations(values: Sequence[float]) -> Iterator[tuple[float, ...]]:
    """Each distinct ordering of a multiset once (items of equal value are interchangeable)."""
    counts = Counter(values)
    keys = sorted(counts)
    n = len(values)
    current: list[float] = []

    def walk() -> Iterator[tuple[float, ...]]:
        if len(current) == n:
            yield tuple(current)
            return
        for key in keys:
            if counts[key]:
                counts[key] -= 1
                current.append(key)
                yield from walk()
                current.pop()
                counts[key] += 1

    return walk()


def _n_distinct(values: Sequence[float]) -> int:
    total = math.factorial(len(values))
    for c in Counter(values).values():
        total //= math.factorial(c)
    return total


def expected_t_ndcg_at_k(
    scores: Sequence[float],
    relevance: Sequence[float],
    k: int | None = None,
    *,
    higher_first: bool = True,
    max_exact: int = 20_000,
    n_samples: int = 2_000,
    seed: int = 0,
) -> ExpectedScore:
    """Expected T-NDCG@k when the predicted order has ties (seed 002, Sec. 4.3, App. C.3).

    ``scores[i]`` is message i's predicted score (``higher_first=False`` for predicted levels,
    where lower = more urgent) and ``relevance[i]`` its reference relevance. Messages are sorted
    by score; messages with equal scores (within :data:`TIE_TOLERANCE`, as
    :func:`sort_by_score` sees them) form a tie group whose internal order is random, all
    orders equally likely. The paper averages T-NDCG over "numerous intra-class shuffles"; here
    the expectation is exact when the number of distinct relevance arrangements (the product,
    over tie groups, of the multinomial counts of their relevance values) is at most
    ``max_exact`` - each distinct arrangement is equally likely, so plain enumeration is exact -
    and otherwise estimated from ``n_samples`` within-group shuffles drawn with
    ``numpy.random.default_rng(seed)``. ``sd`` is the population SD (ddof=0) of T-NDCG over the
    enumerated or sampled orders (Appendix C.3 reports such an SD).
    """
    rel = _relevance_array(relevance)
    try:
        pred = np.asarray(scores, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError("scores must be numbers") from exc
    if pred.shape != rel.shape:
        raise ValueError(f"scores and relevance must match in length, got {pred.size}, {rel.size}")
    if not np.all(np.isfinite(pred)):
        raise ValueError("scores must be finite")
    if max_exact < 1 or n_samples < 2:
        raise ValueError("max_exact must be >= 1 and n_samples >= 2")
    k = _cutoff(k, rel.size)
    pred = merge_near_ties(pred)
    order = np.argsort(-pred if higher_first else pred, kind="stable")
    sorted_pred = pred[order]
    groups = [rel[order][sorted_pred == v] for v in pd.unique(sorted_pred)]
    n_orders = 1
    for g in groups:
        n_orders *= _n_distinct(g.tolist())
        if n_orders > max_exact:
            break
    exact = n_orders <= max_exact
    if exact:
        pieces = [list(_distinct_permutations(g.tolist())) for g in groups]
        rows = np.array([np.concatenate(combo) for combo in itertools.product(*pieces)])
    else:
        rng = np.random.default_rng(seed)
        rows = np.concatenate(
            [rng.permuted(np.tile(g, (n_samples, 1)), axis=1) for g in groups], axis=1
        )
    ideal = np.sort(rel)[::-1]
    values = _ndcg_rows(rows, ideal, k) - _ndcg_rows(rows[:, ::-1], ideal, k)
    return ExpectedScore(
        mean=float(values.mean()),
        sd=float(values.std(ddof=0)),
        n_orders=int(rows.shape[0]),
        exact=exact,
    )
