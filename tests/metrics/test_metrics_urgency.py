"""Tests for portalreview.metrics.urgency (seed 002, PMR-Bench). Hand-worked NDCG table in
comments; ranx (when installed) as the independent NDCG reference."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from portalreview.metrics.urgency import (
    DEFAULT_RELEVANCE,
    difficulty,
    expected_t_ndcg_at_k,
    margin_weighted_scores,
    merge_near_ties,
    ndcg_at_k,
    pairwise_accuracy,
    relevance_from_levels,
    sort_by_score,
    t_ndcg_at_k,
    win_rate_scores,
)

# ------------------------------------------------------------------ levels and pairs


@pytest.mark.parametrize(
    ("a", "b", "bucket"),
    [(1, 5, "easy"), (6, 1, "easy"), (1, 3, "medium"), (2, 5, "medium"), (2, 3, "hard")],
)
def test_difficulty_buckets(a, b, bucket):
    assert difficulty(a, b) == bucket


@pytest.mark.parametrize(
    ("a", "b", "message"), [(3, 3, "not a valid"), (0, 2, "1-6"), (True, 2, "integer")]
)
def test_difficulty_rejects_invalid_pairs(a, b, message):
    with pytest.raises(ValueError, match=message):
        difficulty(a, b)


def test_relevance_from_levels():
    assert relevance_from_levels([1, 6, 3]).tolist() == [5.0, 0.0, 3.0]  # 6 - level
    assert DEFAULT_RELEVANCE[2] == 4.0
    custom = {1: 10, 2: 5}
    assert relevance_from_levels([2, 1], mapping=custom).tolist() == [5.0, 10.0]
    with pytest.raises(ValueError, match="no relevance"):
        relevance_from_levels([3], mapping=custom)
    with pytest.raises(ValueError, match=">= 0"):
        relevance_from_levels([1], mapping={1: -1})


def test_pairwise_accuracy_by_difficulty():
    table = pairwise_accuracy(
        [1, 5, 2, 4, 3],
        [5, 1, 4, 2, 4],
        [True, True, False, False, True],
    )
    # (1,5) a more urgent, said a: right (easy); (5,1) said a: wrong (easy)
    # (2,4) said b: wrong (medium); (4,2) said b: right (medium); (3,4) said a: right (hard)
    assert table.loc["easy"].tolist() == [2, 1, 0.5]
    assert table.loc["medium"].tolist() == [2, 1, 0.5]
    assert table.loc["hard"].tolist() == [1, 1, 1.0]
    assert table.loc["total"].tolist() == [5, 3, 0.6]


def test_pairwise_accuracy_empty_bucket_and_errors():
    table = pairwise_accuracy([1], [6], [True])
    assert math.isnan(table.loc["hard", "accuracy"]) and table.loc["hard", "n"] == 0
    with pytest.raises(ValueError, match="not a valid"):
        pairwise_accuracy([2], [2], [True])
    with pytest.raises(ValueError, match="True or False"):
        pairwise_accuracy([1], [2], [None])
    with pytest.raises(ValueError, match="parallel"):
        pairwise_accuracy([1], [2, 3], [True])
    with pytest.raises(ValueError, match="no pairs"):
        pairwise_accuracy([], [], [])


# ------------------------------------------------------------------ inbox scores


def test_win_rate_scores_and_sort():
    scores = win_rate_scores(["a", "b", "c", "d"], [("a", "b"), ("a", "c"), ("c", "b")])
    # a: 2 wins / 2 games; b: 0/2; c: 1/2; d never compared -> NaN
    assert scores[["a", "b", "c"]].tolist() == [1.0, 0.0, 0.5]
    assert math.isnan(scores["d"])
    assert sort_by_score(scores) == ["a", "c", "b", "d"]
    with pytest.raises(ValueError, match="not in items"):
        win_rate_scores(["a"], [("a", "z")])
    with pytest.raises(ValueError, match="itself"):
        win_rate_scores(["a", "b"], [("a", "a")])
    with pytest.raises(ValueError, match="unique"):
        win_rate_scores(["a", "a"], [])


def test_sort_by_score_keeps_input_order_on_ties():
    assert sort_by_score({"x": 1.0, "y": 2.0, "z": 1.0}) == ["y", "x", "z"]


def test_scores_equal_but_for_float_noise_are_ties_in_item_order():
    # two Bradley-Terry strengths equal in exact arithmetic, as two fits of the same
    # judgements gave them (seed 002 inbox hunt): the later item must not jump ahead
    noisy = {"m00": 1.0134471218831766, "m01": 0.84, "m04": 1.0134471218831769}
    assert sort_by_score(noisy) == ["m00", "m04", "m01"]
    assert sort_by_score({"a": 0.0, "b": 1e-17, "c": -1e-17}) == ["a", "b", "c"]
    assert sort_by_score({"a": 1.0, "b": 1.0 + 1e-6}) == ["b", "a"]  # a real difference


def test_merge_near_ties_per_row_keeps_nan_and_real_differences():
    rows = np.array([[2.0, 2.0 + 4e-16, math.nan, 1.0], [0.5, 0.5 - 1e-12, 0.25, math.nan]])
    merged = merge_near_ties(rows)
    assert merged[0, 0] == merged[0, 1] == 2.0 + 4e-16 and merged[0, 3] == 1.0
    assert merged[1, 0] == merged[1, 1] == 0.5 and merged[1, 2] == 0.25
    assert np.isnan(merged[0, 2]) and np.isnan(merged[1, 3])


def test_margin_weighted_scores_sum_normalization():
    judgments = [("a", "b", 0.9, 0.3), ("b", "c", 0.2, 0.2), ("c", "a", 0.6, 0.4)]
    scores = margin_weighted_scores(["a", "b", "c"], judgments)
    # (a,b): q = .9/1.2 = .75 vs .25 -> delta .5 -> a += 1.5
    # (b,c): equal -> tie, nothing; (c,a): q = .6 vs .4 -> delta .2 -> c += 1.2
    assert scores.to_dict() == pytest.approx({"a": 1.5, "b": 0.0, "c": 1.2})


def test_margin_weighted_scores_other_normalizations():
    soft = margin_weighted_scores(["a", "b"], [("a", "b", 2.0, 0.0)], normalize="softmax")
    # q_a = 1/(1 + e^-2) = 0.8808, q_b = 0.1192 -> delta = tanh(1) = 0.7616
    assert soft["a"] == pytest.approx(1 + math.tanh(1.0))
    raw = margin_weighted_scores(["a", "b"], [("a", "b", 0.0, 1.0)], normalize="none")
    assert raw.to_dict() == {"a": 0.0, "b": 2.0}
    with pytest.raises(ValueError, match="non-negative"):
        margin_weighted_scores(["a", "b"], [("a", "b", -1.0, 1.0)])
    with pytest.raises(ValueError, match="two different"):
        margin_weighted_scores(["a", "b"], [("a", "a", 0.5, 0.5)])
    with pytest.raises(ValueError, match="normalize"):
        margin_weighted_scores(["a", "b"], [], normalize="zscore")


# ------------------------------------------------------------------ NDCG

# Hand-computed table for relevance in ranked order [3, 2, 3, 0, 1, 2]:
# DCG@6 = 3/1 + 2/log2(3) + 3/2 + 0/log2(5) + 1/log2(6) + 2/log2(7)
#       = 3 + 1.2619 + 1.5 + 0 + 0.3869 + 0.7124 = 6.8611
# ideal order [3, 3, 2, 2, 1, 0]: IDCG@6 = 3 + 1.8928 + 1 + 0.8614 + 0.3869 + 0 = 7.1410
# NDCG@6 = 0.9608; @3: DCG 5.7619 / IDCG 5.8928 = 0.9778; @1: 3/3 = 1
HAND = [3, 2, 3, 0, 1, 2]


@pytest.mark.parametrize(("k", "expected"), [(None, 0.9608), (6, 0.9608), (3, 0.9778), (1, 1.0)])
def test_ndcg_hand_table(k, expected):
    assert ndcg_at_k(HAND, k) == pytest.approx(expected, abs=1e-4)


def test_ndcg_edge_cases():
    assert ndcg_at_k([0, 0, 0], 2) == 0.0  # no relevant item: IDCG = 0 -> 0, as ranx
    assert ndcg_at_k([1], 10) == 1.0  # k beyond the list
    for bad, message in [([], "non-empty"), ([-1, 2], "non-negative"), ([np.nan], "finite")]:
        with pytest.raises(ValueError, match=message):
            ndcg_at_k(bad)
    with pytest.raises(ValueError, match="positive integer"):
        ndcg_at_k(HAND, 0)


PERFECT_30 = relevance_from_levels([level for level in range(1, 7) for _ in range(5)])


def test_t_ndcg_perfect_sort_of_30_message_inbox():
    # FACTS.md: a perfect sort of 30 messages, 5 per level, scores 0.924 @10 and 0.394 @30.
    # @10: the reverse order's top 10 hold five 0s and five 1s: DCG = sum_{r=6..10} 1/log2(r+1)
    # = 1.5951; IDCG@10 = 5*2.9485 + 4*1.5951 = 21.123 -> 0.0755; T = 1 - 0.0755 = 0.9245
    assert round(t_ndcg_at_k(PERFECT_30, 10), 3) == 0.924
    assert round(t_ndcg_at_k(PERFECT_30, 30), 3) == 0.394
    assert t_ndcg_at_k(PERFECT_30[::-1], 10) == pytest.approx(-t_ndcg_at_k(PERFECT_30, 10))


def test_t_ndcg_small_hand_case():
    # [2, 1, 0]: forward NDCG = 1; reverse [0, 1, 2]: DCG = 1/log2(3) + 2/2 = 1.6309,
    # IDCG = 2 + 1/log2(3) = 2.6309 -> 0.6199; T = 0.3801
    assert t_ndcg_at_k([2, 1, 0]) == pytest.approx(1 - 1.6309298 / 2.6309298)


@given(st.lists(st.integers(0, 5), min_size=1, max_size=30), st.integers(1, 35))
def test_ndcg_and_t_ndcg_bounds(rel, k):
    assert 0.0 <= ndcg_at_k(rel, k) <= 1.0 + 1e-12
    assert -1.0 - 1e-12 <= t_ndcg_at_k(rel, k) <= 1.0 + 1e-12


@pytest.mark.parametrize("seed", range(8))
def test_ndcg_matches_scikit_learn(seed):
    """An independent implementation that always runs: scikit-learn's ``ndcg_score`` (linear
    gain, log2 discount, 0 without a relevant item: ranx's ``ndcg`` too, which is not
    installed here)."""
    from sklearn.metrics import ndcg_score

    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 31))
    rel = rng.integers(0, 6, size=n)
    if seed == 0:
        rel[:] = 0  # no relevant message: both say 0
    scores = np.arange(n, 0, -1)  # the messages in list order, no ties
    for k in (1, 5, 10, n):
        expected = ndcg_score([rel], [scores], k=k)
        assert ndcg_at_k(rel, k) == pytest.approx(expected, abs=1e-9)


# ------------------------------------------------------------------ expected T-NDCG under ties


def test_expected_t_ndcg_without_ties_is_t_ndcg():
    rel = [5, 3, 4, 0, 1]
    scores = [10, 8, 9, 1, 2]  # sorted order: rel 5, 4, 3, 1, 0
    result = expected_t_ndcg_at_k(scores, rel, 3)
    assert result.exact and result.n_orders == 1 and result.sd == 0.0
    assert result.mean == pytest.approx(t_ndcg_at_k([5, 4, 3, 1, 0], 3))


def test_expected_t_ndcg_two_tied_messages_hand_worked():
    # both messages tied; orders [2, 0] and [0, 2] equally likely.
    # NDCG([0, 2]) = (2/log2(3)) / 2 = 0.6309 -> T([2,0]) = 0.3691, T([0,2]) = -0.3691
    result = expected_t_ndcg_at_k([1, 1], [2, 0])
    assert result.exact and result.n_orders == 2
    assert result.mean == pytest.approx(0.0)
    assert result.sd == pytest.approx(1 - 1 / math.log2(3))


def test_expected_t_ndcg_sees_a_tie_hidden_by_float_noise_hand_worked():
    # a level-1 (relevance 5) and a level-5 (relevance 1) message whose scores differ only by
    # float noise: orders [5, 1] and [1, 5]. IDCG = 5 + 1/log2(3) = 5.6309;
    # NDCG([1, 5]) = (1 + 5/log2(3)) / IDCG = 0.7378 -> T([5, 1]) = +0.2622, T([1, 5]) = -0.2622
    result = expected_t_ndcg_at_k([1.0134471218831766, 1.0134471218831769], [5, 1], 10)
    assert result.exact and result.n_orders == 2
    idcg = 5 + 1 / math.log2(3)
    swing = 1 - (1 + 5 / math.log2(3)) / idcg
    assert swing == pytest.approx(0.2622, abs=1e-4)
    assert result.mean == pytest.approx(0.0, abs=1e-12)
    assert result.sd == pytest.approx(swing)


def test_expected_t_ndcg_equals_brute_force_over_item_permutations():
    scores = [3, 2, 2, 2, 1, 1]
    rel = [1, 4, 0, 4, 2, 5]
    # brute force: every permutation of items inside each tie group, each equally likely
    groups = [[0], [1, 2, 3], [4, 5]]
    values = [
        t_ndcg_at_k([rel[i] for i in itertools.chain(*combo)], 4)
        for combo in itertools.product(*(itertools.permutations(g) for g in groups))
    ]
    result = expected_t_ndcg_at_k(scores, rel, 4)
    # distinct arrangements: group 2 has relevance {4, 0, 4} -> 3!/2! = 3; group 3 -> 2; 6 total
    assert result.exact and result.n_orders == 6
    assert result.mean == pytest.approx(np.mean(values))
    assert result.sd == pytest.approx(np.std(values))


def test_expected_t_ndcg_levels_as_scores_lower_first():
    predicted_levels = [1, 2, 2, 6]
    rel = [5, 4, 3, 0]
    low = expected_t_ndcg_at_k(predicted_levels, rel, higher_first=False)
    high = expected_t_ndcg_at_k([-x for x in predicted_levels], rel)
    assert low == high


def test_expected_t_ndcg_monte_carlo_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(1)
    rel = rng.integers(0, 6, size=12)
    scores = np.repeat([3, 2, 1], 4)
    exact = expected_t_ndcg_at_k(scores, rel, 5)
    assert exact.exact
    mc = expected_t_ndcg_at_k(scores, rel, 5, max_exact=1, n_samples=4000, seed=7)
    again = expected_t_ndcg_at_k(scores, rel, 5, max_exact=1, n_samples=4000, seed=7)
    assert not mc.exact and mc.n_orders == 4000
    assert mc == again
    assert mc.mean == pytest.approx(exact.mean, abs=0.02)
    assert mc.sd == pytest.approx(exact.sd, abs=0.02)


def test_expected_t_ndcg_validation():
    with pytest.raises(ValueError, match="match in length"):
        expected_t_ndcg_at_k([1, 2], [1])
    with pytest.raises(ValueError, match="finite"):
        expected_t_ndcg_at_k([np.nan, 1], [1, 2])
    with pytest.raises(ValueError, match="n_samples"):
        expected_t_ndcg_at_k([1, 1], [1, 2], n_samples=1)
