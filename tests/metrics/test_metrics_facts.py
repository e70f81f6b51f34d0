"""Tests for portalreview.metrics.facts (seed 004, MedFactChecking). Hand-worked cases in
comments; Supplementary Table 4's Gemini row reproduced."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from portalreview.metrics.facts import (
    FactScores,
    fact_flow,
    fact_scores,
    fact_scores_from_counts,
    macro_fact_scores,
    micro_fact_scores,
)


def test_supplementary_table_4_gemini_row():
    # Gemini-2.5-Flash: original 934, preserved 855, edited 1194, grounded 1081
    flow = fact_flow([fact_scores_from_counts(934, 855, 1194, 1081)])
    # new = 1194 - 1081 = 113; loss = (934 - 855) / 934 = 79/934 = 8.46%;
    # hallucination = 113 / 1194 = 9.46%
    assert flow.new_facts == 113
    assert round(100 * flow.loss_rate, 1) == 8.5
    assert round(100 * flow.hallucination_rate, 1) == 9.5
    # and Section 4's micro recall 0.92 / precision 0.91 for the same model
    micro = micro_fact_scores([fact_scores_from_counts(934, 855, 1194, 1081)])
    assert round(micro.recall, 2) == 0.92 and round(micro.precision, 2) == 0.91


def test_fact_scores_one_pair():
    s = fact_scores([True, True, False], [True, False])
    # R = 2/3, P = 1/2, F1 = 2 * (2/3) * (1/2) / (2/3 + 1/2) = (2/3) / (7/6) = 4/7
    assert (s.n_original, s.n_preserved, s.n_edited, s.n_grounded) == (3, 2, 2, 1)
    assert s.recall == pytest.approx(2 / 3)
    assert s.precision == 0.5
    assert s.f1 == pytest.approx(4 / 7)


@pytest.mark.parametrize(
    ("preserved", "grounded", "recall", "precision"),
    [
        ([], [], 1.0, 1.0),  # both sets empty -> 1.0
        ([], [True], 0.0, 1.0),  # C empty but C' not -> recall 0.0
        ([True], [], 1.0, 0.0),  # C' empty but C not -> precision 0.0
        ([False], [], 0.0, 0.0),
    ],
)
def test_empty_set_conventions(preserved, grounded, recall, precision):
    s = fact_scores(preserved, grounded)
    assert (s.recall, s.precision) == (recall, precision)


def test_micro_and_macro():
    pairs = [
        fact_scores_from_counts(3, 2, 2, 1),  # R 2/3, P 1/2
        fact_scores_from_counts(0, 0, 0, 0),  # both empty: R 1, P 1
        fact_scores_from_counts(1, 0, 2, 2),  # R 0, P 1
    ]
    micro = micro_fact_scores(pairs)
    # sums: original 4, preserved 2, edited 4, grounded 3 -> R 0.5, P 0.75, F1 0.6
    assert (micro.recall, micro.precision) == (0.5, 0.75)
    assert micro.f1 == pytest.approx(0.6)
    macro = macro_fact_scores(pairs)
    # R = (2/3 + 1 + 0)/3 = 5/9; P = (1/2 + 1 + 1)/3 = 5/6; F1 = 2 * 5/9 * 5/6 / (25/18) = 2/3
    assert macro.n_pairs == 3
    assert macro.recall == pytest.approx(5 / 9)
    assert macro.precision == pytest.approx(5 / 6)
    assert macro.f1 == pytest.approx(2 / 3)


def test_macro_f1_is_harmonic_of_macro_scores_as_in_the_paper():
    # Section 4: simple-prompt macro recall 0.84, precision 0.92 -> F1 0.88
    pairs = [fact_scores_from_counts(100, 84, 100, 92)]
    assert round(macro_fact_scores(pairs).f1, 2) == 0.88


def test_micro_of_all_empty_pairs_follows_the_empty_rule():
    micro = micro_fact_scores([fact_scores([], []), fact_scores([], [])])
    assert (micro.recall, micro.precision, micro.f1) == (1.0, 1.0, 1.0)


def test_fact_flow_zero_denominators_are_nan():
    flow = fact_flow([fact_scores([], [])])
    assert flow.new_facts == 0
    assert math.isnan(flow.loss_rate) and math.isnan(flow.hallucination_rate)


def test_validation():
    with pytest.raises(ValueError, match="exceeds"):
        fact_scores_from_counts(2, 3, 0, 0)
    with pytest.raises(ValueError, match="exceeds"):
        fact_scores_from_counts(0, 0, 1, 2)
    with pytest.raises(ValueError, match="n_edited"):
        fact_scores_from_counts(1, 1, -1, 0)
    with pytest.raises(ValueError, match="entailment decided"):
        fact_scores([True, None], [])
    with pytest.raises(ValueError, match="no pairs"):
        micro_fact_scores([])
    with pytest.raises(ValueError, match="FactScores"):
        macro_fact_scores([(1, 1, 1, 1)])


@given(st.lists(st.booleans(), max_size=20), st.lists(st.booleans(), max_size=20))
def test_scores_bounded(preserved, grounded):
    s = fact_scores(preserved, grounded)
    assert isinstance(s, FactScores)
    for v in (s.recall, s.precision, s.f1):
        assert 0.0 <= v <= 1.0
    flow = fact_flow([s])
    assert flow.new_facts == len(grounded) - sum(grounded)
