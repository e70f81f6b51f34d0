"""Tests for portalreview.metrics.eppc (seed 003, EPPCMinerBen). Hand-worked cases in comments;
scikit-learn as the independent reference for the multi-label scores."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import f1_score, precision_recall_fscore_support
from sklearn.preprocessing import MultiLabelBinarizer

from portalreview.metrics.eppc import (
    code_subcode_prf,
    micro_prf,
    per_label_prf,
    span_prf,
    span_tokens,
    spans_match,
    token_jaccard,
)

GOLD = [{"InfoGive", "PartnershipPatient"}, {"InfoSeek"}, set()]
PRED = [{"InfoGive"}, {"InfoSeek", "SharedDecisionPatient"}, {"PartnershipPatient"}]


def sklearn_micro(gold, pred, labels):
    mlb = MultiLabelBinarizer(classes=labels)
    return f1_score(mlb.fit_transform(gold), mlb.transform(pred), average="micro")


def test_micro_prf_worked_example():
    r = micro_prf(GOLD, PRED)
    # TP: InfoGive, InfoSeek = 2; FP: SharedDecisionPatient, PartnershipPatient (sentence 3) = 2;
    # FN: PartnershipPatient (sentence 1) = 1. P = 2/4, R = 2/3, F1 = 4 / (4 + 2 + 1) = 4/7
    assert (r.tp, r.fp, r.fn) == (2, 2, 1)
    assert r.precision == 0.5
    assert r.recall == pytest.approx(2 / 3)
    assert r.f1 == pytest.approx(4 / 7)
    labels = sorted(set().union(*GOLD, *PRED))
    assert r.f1 == pytest.approx(sklearn_micro(GOLD, PRED, labels))


def test_code_subcode_pairs_are_tied_to_their_code():
    gold = [{("PartnershipPatient", "salutation"), ("InfoGive", "Drugs")}]
    pred = [{("PartnershipProvider", "salutation"), ("InfoGive", "Drugs")}]
    r = code_subcode_prf(gold, pred)
    # the salutation pair has the wrong code -> FP and FN; Drugs pair TP
    assert (r.tp, r.fp, r.fn) == (1, 1, 1)
    assert r.f1 == pytest.approx(0.5)
    with pytest.raises(ValueError, match="code, subcode"):
        code_subcode_prf([{"InfoGive"}], [{"InfoGive"}])


def test_per_label_prf_matches_sklearn():
    labels = ["InfoGive", "InfoSeek", "PartnershipPatient", "SharedDecisionPatient", "Empathy"]
    table = per_label_prf(GOLD, PRED, labels=labels)
    mlb = MultiLabelBinarizer(classes=labels)
    p, r, f, s = precision_recall_fscore_support(
        mlb.fit_transform(GOLD), mlb.transform(PRED), average=None, zero_division=0
    )
    assert table["precision"].tolist() == pytest.approx(list(p))
    assert table["recall"].tolist() == pytest.approx(list(r))
    assert table["f1"].tolist() == pytest.approx(list(f))
    assert table["support"].tolist() == list(s)
    assert table.loc["PartnershipPatient", ["tp", "fp", "fn"]].tolist() == [0, 1, 1]


def test_label_list_and_input_validation():
    with pytest.raises(ValueError, match="not in the label list"):
        micro_prf(GOLD, PRED, labels=["InfoGive"])
    with pytest.raises(ValueError, match="parallel"):
        micro_prf(GOLD, PRED[:2])
    with pytest.raises(ValueError, match="got a string"):
        micro_prf(["InfoGive"], [{"InfoGive"}])
    with pytest.raises(ValueError, match="no instances"):
        micro_prf([], [])


def test_all_empty_sets_use_zero_division():
    r = micro_prf([set(), set()], [set(), set()])
    assert (r.tp, r.fp, r.fn, r.precision, r.recall, r.f1) == (0, 0, 0, 0.0, 0.0, 0.0)
    assert micro_prf([set()], [set()], zero_division=1.0).f1 == 1.0
    only_gold = micro_prf([{"InfoGive"}], [set()])
    # nothing predicted: precision undefined -> 0.0; recall 0/1; F1 = 0 / (0 + 0 + 1) = 0
    assert (only_gold.precision, only_gold.recall, only_gold.f1) == (0.0, 0.0, 0.0)


label_sets = st.lists(st.frozensets(st.sampled_from("abcde"), max_size=5), min_size=1, max_size=8)


@given(label_sets, st.data())
def test_micro_f1_agrees_with_sklearn_and_is_bounded(gold, data):
    pred = data.draw(
        st.lists(
            st.frozensets(st.sampled_from("abcde"), max_size=5),
            min_size=len(gold),
            max_size=len(gold),
        )
    )
    r = micro_prf(gold, pred)
    assert 0.0 <= r.f1 <= 1.0
    mlb = MultiLabelBinarizer(classes=list("abcde"))
    expected = f1_score(
        mlb.fit_transform(gold), mlb.transform(pred), average="micro", zero_division=0
    )
    assert r.f1 == pytest.approx(expected)


# ------------------------------------------------------------------ relaxed span match


def test_span_tokens_lowercase_words_without_punctuation():
    assert span_tokens("Knee, PAIN!") == {"knee", "pain"}
    assert span_tokens("...") == frozenset()
    assert span_tokens("Naïve KNEE") == span_tokens("Nai\u0308ve knee") == {"naïve", "knee"}


def test_spans_match_rules():
    assert spans_match("left knee pain", "knee pain")  # gold inside prediction
    assert spans_match("pain", "my knee pain")  # prediction inside gold
    # {pain, in, my, left, knee} vs {left, knee, hurts}: 2 / 6 = 0.33, no containment
    assert not spans_match("pain in my left knee", "left knee hurts")
    # 7 tokens each, 6 shared, union 8 -> 0.75 >= 0.6
    assert spans_match("I need a refill of my meds", "need a refill of my meds please")
    assert spans_match("Knee, PAIN!", "knee pain")


def test_spans_match_threshold_boundary():
    # {a, b, c, d} vs {a, b, c, e}: 3 shared / 5 in union = 0.6 exactly
    assert token_jaccard("a b c d", "a b c e") == pytest.approx(0.6)
    assert spans_match("a b c d", "a b c e")
    assert not spans_match("a b c d", "a b c e", threshold=0.61)
    with pytest.raises(ValueError, match="threshold"):
        spans_match("a", "a", threshold=0)


def test_span_without_tokens_never_matches():
    assert not spans_match("...", "knee pain")
    assert not spans_match("", "")
    assert token_jaccard("", "") == 0.0


SPAN_GOLD = [["knee pain", "refill my meds"], ["thank you"], [], ["bye"]]
SPAN_PRED = [["left knee pain", "call me"], ["thank you", "thank you so much"], ["hello"], []]


def test_span_prf_worked_example_paper_recall():
    r = span_prf(SPAN_GOLD, SPAN_PRED)
    # predictions: "left knee pain" TP, "call me" FP, both "thank you" TP, "hello" FP -> TP 3, FP 2
    # gold: "refill my meds" and "bye" unmatched -> FN 2; matched gold 2 of 4
    # P = 3/5; paper R = 3/(3 + 2) = 0.6; F1 = 6 / (6 + 2 + 2) = 0.6
    assert (r.n_predicted, r.n_gold, r.tp, r.fp, r.fn, r.matched_gold) == (5, 4, 3, 2, 2, 2)
    assert (r.precision, r.recall) == pytest.approx((0.6, 0.6))
    assert r.f1 == pytest.approx(0.6)


def test_span_prf_gold_recall():
    r = span_prf(SPAN_GOLD, SPAN_PRED, recall_from="gold")
    # R = matched gold / gold = 2/4; F1 = 2 * 0.6 * 0.5 / 1.1 = 0.5455
    assert r.recall == 0.5
    assert r.f1 == pytest.approx(2 * 0.6 * 0.5 / 1.1)


def test_span_prf_edge_cases():
    empty = span_prf([[], []], [[], []])
    assert (empty.precision, empty.recall, empty.f1) == (0.0, 0.0, 0.0)
    assert span_prf([[]], [[]], zero_division=1.0).f1 == 1.0
    assert math.isnan(span_prf([["a"]], [[]], recall_from="gold", zero_division=math.nan).f1)
    with pytest.raises(ValueError, match="parallel"):
        span_prf([["a"]], [])
    with pytest.raises(ValueError, match="not a single string"):
        span_prf(["knee pain"], [["knee pain"]])
    with pytest.raises(ValueError, match="recall_from"):
        span_prf([["a"]], [["a"]], recall_from="both")


@given(
    st.lists(st.lists(st.text("abc ", max_size=8), max_size=3), min_size=1, max_size=5),
    st.data(),
)
def test_span_scores_bounded(gold, data):
    pred = data.draw(
        st.lists(
            st.lists(st.text("abc ", max_size=8), max_size=3),
            min_size=len(gold),
            max_size=len(gold),
        )
    )
    for mode in ("paper", "gold"):
        r = span_prf(gold, pred, recall_from=mode)
        assert 0.0 <= r.precision <= 1.0 and 0.0 <= r.recall <= 1.0 and 0.0 <= r.f1 <= 1.0
        assert r.tp + r.fp == r.n_predicted and r.matched_gold + r.fn == r.n_gold
