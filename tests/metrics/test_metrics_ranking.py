"""Tests for portalreview.metrics.ranking (seed 001, MedAlign). Hand-worked cases in comments;
scipy as the independent reference for Kendall's tau-b and the point-biserial correlation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from portalreview.metrics.ranking import (
    average_win_rate,
    correctness_rank_correlation,
    criteria_counts,
    mean_rank,
    metric_kendall_tau,
    percent_correct,
    rater_kendall_tau,
    win_rate_matrix,
)

nan = np.nan


def long(rankings: dict[tuple[str, str], dict[str, float]], **extra) -> pd.DataFrame:
    rows = [
        {"unit": u, "rater": r, "source": s, "rank": v}
        for (u, r), ranks in rankings.items()
        for s, v in ranks.items()
    ]
    return pd.DataFrame(rows)


# Four rankings (unit, rater): C ties B in u1/r1; r2 did not rank A in u2.
RANKS = long(
    {
        ("u1", "r1"): {"A": 1, "B": 2, "C": 2},
        ("u1", "r2"): {"A": 1, "B": 3, "C": 2},
        ("u2", "r1"): {"A": 1, "B": 3, "C": 2},
        ("u2", "r2"): {"A": nan, "B": 1, "C": 2},
    }
)


def test_win_rate_matrix_all_rankings_denominator():
    w = win_rate_matrix(RANKS)
    # A vs B: both ranked in 3 rankings, A better in all 3 -> 1, B 0
    # A vs C: likewise -> 1, 0
    # B vs C: 4 rankings: tie, C, C, B -> w[B,C] = 1/4, w[C,B] = 2/4 (the tie counts for neither)
    assert w.loc["A", "B"] == 1.0 and w.loc["B", "A"] == 0.0
    assert w.loc["A", "C"] == 1.0 and w.loc["C", "A"] == 0.0
    assert w.loc["B", "C"] == 0.25 and w.loc["C", "B"] == 0.5
    assert np.isnan(np.diag(w)).all()


def test_win_rate_matrix_non_tied_denominator():
    w = win_rate_matrix(RANKS, denominator="non_tied")
    # B vs C: 3 non-tied battles: B 1, C 2
    assert w.loc["B", "C"] == pytest.approx(1 / 3)
    assert w.loc["C", "B"] == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="denominator"):
        win_rate_matrix(RANKS, denominator="pairs")


def test_average_win_rate():
    wr = average_win_rate(win_rate_matrix(RANKS))
    # A: (1 + 1)/2 = 1; B: (0 + 1/4)/2 = 1/8; C: (0 + 1/2)/2 = 1/4
    assert wr.to_dict() == pytest.approx({"A": 1.0, "B": 0.125, "C": 0.25})


def test_average_win_rate_skips_opponents_never_met():
    ranks = long({("u1", "r1"): {"A": 1, "B": 2}, ("u2", "r1"): {"B": 1, "C": 2}})
    w = win_rate_matrix(ranks)
    assert math.isnan(w.loc["A", "C"])
    wr = average_win_rate(w)
    assert wr["A"] == 1.0 and wr["B"] == 0.5 and wr["C"] == 0.0
    with pytest.raises(ValueError, match="square"):
        average_win_rate(w.iloc[:2])


def test_mean_rank_uses_average_ranks_for_ties():
    mr = mean_rank(RANKS)
    # average ranks: u1/r1 A 1, B 2.5, C 2.5; u1/r2 A 1, B 3, C 2; u2/r1 A 1, B 3, C 2;
    # u2/r2 B 1, C 2 -> A 1; B (2.5+3+3+1)/4 = 2.375; C (2.5+2+2+2)/4 = 2.125
    assert mr.to_dict() == pytest.approx({"A": 1.0, "B": 2.375, "C": 2.125})


def test_mean_rank_tie_encodings_agree_and_sum_like_table_3():
    competition = long({("u", "r"): {"A": 1, "B": 1, "C": 3}})
    dense = long({("u", "r"): {"A": 1, "B": 1, "C": 2}})
    assert mean_rank(competition).tolist() == mean_rank(dense).tolist() == [1.5, 1.5, 3.0]
    full = long({("u", "r"): {s: i for i, s in enumerate("ABCDEF", start=1)}})
    assert mean_rank(full).sum() == 21.0  # 6 * 7 / 2, as Table 3's column adds up


def test_rank_input_validation():
    with pytest.raises(ValueError, match="missing column"):
        win_rate_matrix(RANKS.drop(columns="rank"))
    with pytest.raises(ValueError, match="more than one rank"):
        mean_rank(pd.concat([RANKS, RANKS.iloc[:1]]))
    bad = RANKS.copy()
    bad["rank"] = bad["rank"].astype(object)
    bad.loc[0, "rank"] = "first"
    with pytest.raises(ValueError, match="numeric"):
        mean_rank(bad)
    with pytest.raises(ValueError, match="no rows"):
        mean_rank(RANKS.iloc[:0])


def test_percent_correct_and_criteria_counts():
    ratings = pd.DataFrame(
        {
            "source": ["A", "A", "A", "B", "B"],
            "correct": [True, False, nan, 1, 1],
            "c1": [False, True, False, False, False],
            "c2": [False, True, nan, False, False],
            "c3": [False, False, False, False, False],
        }
    )
    pc = percent_correct(ratings)
    # A: 1 correct of 2 judged (NaN left out) -> 50%; B: 2 of 2 -> 100%
    assert pc.to_dict() == {"A": 50.0, "B": 100.0}
    counts = criteria_counts(ratings)
    assert counts.loc["A"].tolist() == [1, 1, 0, 1, 3]  # c1, c2, c3, any, n
    assert counts.loc["B"].tolist() == [0, 0, 0, 0, 2]
    with pytest.raises(ValueError, match="True/False"):
        percent_correct(pd.DataFrame({"source": ["A"], "correct": ["yes"]}))
    with pytest.raises(ValueError, match="missing column"):
        criteria_counts(ratings, criteria=["c4"])


def test_rater_kendall_tau_worked_example():
    summary = rater_kendall_tau(RANKS)
    # u1: r1 (1,2,2) vs r2 (1,3,2): pairs AB, AC concordant, BC tied in r1 only
    #     tau_b = (2 - 0) / sqrt((3 - 1) * (3 - 0)) = 2 / sqrt(6)
    # u2: shared sources B, C: r1 (3,2) vs r2 (1,2) -> discordant -> -1
    u1 = 2 / math.sqrt(6)
    assert summary.values["tau"].tolist() == pytest.approx([u1, -1.0])
    assert summary.mean == pytest.approx((u1 - 1) / 2)
    assert summary.sd == pytest.approx(np.std([u1, -1.0], ddof=1))
    assert summary.n == 2
    assert stats.kendalltau([1, 2, 2], [1, 3, 2]).statistic == pytest.approx(u1)


def test_rater_kendall_tau_skips_undefined_comparisons():
    ranks = long(
        {
            ("u1", "r1"): {"A": 1, "B": 1},  # everything tied -> tau undefined
            ("u1", "r2"): {"A": 1, "B": 2},
            ("u2", "r1"): {"A": 1},  # one shared source only
            ("u2", "r2"): {"A": 2},
        }
    )
    summary = rater_kendall_tau(ranks)
    assert summary.n == 0 and math.isnan(summary.mean) and math.isnan(summary.sd)
    single = long({("u1", "r1"): {"A": 1, "B": 2}})  # a single-annotator unit: no pair
    assert rater_kendall_tau(single).n == 0


def test_metric_kendall_tau_worked_example():
    scores = pd.DataFrame(
        {
            "unit": ["u1"] * 3 + ["u2"] * 3,
            "source": list("ABC") * 2,
            "score": [0.9, 0.1, 0.5, 0.2, 0.8, 0.4],
        }
    )
    summary = metric_kendall_tau(RANKS, scores)
    # u1/r1: metric A>C>B, -rank A > B = C -> 2 concordant, 1 tie in ranks -> 2/sqrt(6)
    # u1/r2: both A>C>B -> 1; u2/r1: metric B>C>A, ranks A>C>B -> all discordant -> -1
    # u2/r2: B>C both -> 1
    expected = [2 / math.sqrt(6), 1.0, -1.0, 1.0]
    assert summary.values["tau"].tolist() == pytest.approx(expected)
    assert summary.mean == pytest.approx(np.mean(expected))
    with pytest.raises(ValueError, match="more than one score"):
        metric_kendall_tau(RANKS, pd.concat([scores, scores.iloc[:1]]))


def test_correctness_rank_correlation_worked_example():
    ratings = RANKS.copy()
    ratings["correct"] = [1, 0, 0, 1, 0, 1, 0, 0, 0, nan, 1, 0]
    summary = correctness_rank_correlation(ratings)
    # u1/r1: correct (1,0,0) vs avg ranks (1,2.5,2.5) -> exactly linear, r = -1
    # u1/r2: correct (1,0,1) vs ranks (1,3,2): cov sum -1, var sums 2/3 and 2 ->
    #        r = -1 / sqrt(4/3) = -0.866
    # u2/r1: nothing correct -> undefined, skipped; u2/r2: B correct rank 1, C wrong rank 2 -> -1
    expected = [-1.0, -1 / math.sqrt(4 / 3), -1.0]
    assert summary.values["r_pb"].tolist() == pytest.approx(expected)
    assert summary.mean == pytest.approx(np.mean(expected))
    assert stats.pointbiserialr([1, 0, 1], [1, 3, 2]).statistic == pytest.approx(expected[1])


def test_correctness_rank_correlation_pooled():
    ratings = RANKS.copy()
    ratings["correct"] = [1, 0, 0, 1, 0, 1, 0, 0, 0, nan, 1, 0]
    pooled = correctness_rank_correlation(ratings, per_ranking=False)
    kept = ratings.dropna()
    avg = [1, 2.5, 2.5, 1, 3, 2, 1, 3, 2, 1, 2]  # average ranks of the kept rows, in order
    assert pooled.n == 1
    assert pooled.mean == pytest.approx(stats.pointbiserialr(kept["correct"], avg).statistic)
    constant = ratings.assign(correct=1)
    with pytest.raises(ValueError, match="constant"):
        correctness_rank_correlation(constant, per_ranking=False)


rank_lists = st.lists(
    st.lists(st.one_of(st.integers(1, 4), st.just(nan)), min_size=4, max_size=4),
    min_size=1,
    max_size=8,
)


@given(rank_lists)
def test_win_matrix_pairs_never_exceed_one(rows):
    frame = long(
        {(f"u{i}", "r"): dict(zip("ABCD", row, strict=True)) for i, row in enumerate(rows)}
    )
    if frame["rank"].isna().all():
        return
    w = win_rate_matrix(frame).to_numpy()
    total = w + w.T
    finite = total[~np.isnan(total)]
    assert (finite <= 1 + 1e-12).all()
    assert ((w[~np.isnan(w)] >= 0) & (w[~np.isnan(w)] <= 1)).all()
    nt = win_rate_matrix(frame, denominator="non_tied").to_numpy()
    s = (nt + nt.T)[~np.isnan(nt + nt.T)]
    assert np.allclose(s, 1.0)


def test_flag_columns_accept_missing_and_reject_words():
    ratings = pd.DataFrame(
        {"source": ["A", "A"], "correct": pd.array([True, pd.NA], dtype="boolean")}
    )
    assert percent_correct(ratings)["A"] == 100.0  # pd.NA is "not judged"
    with pytest.raises(ValueError, match="'c1'"):
        criteria_counts(pd.DataFrame({"source": ["A"], "c1": ["yes"]}), criteria=["c1"])
