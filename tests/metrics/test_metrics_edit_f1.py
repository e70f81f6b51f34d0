"""Tests for portalreview.metrics.edit_f1 (seed 000, Edit-F1). Hand-worked arithmetic in
comments; scikit-learn as the independent reference for theme F1."""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import f1_score, precision_score, recall_score
from sklearn.preprocessing import MultiLabelBinarizer

from portalreview.metrics.edit_f1 import (
    EditF1Result,
    content_edit_f1,
    count_expected_deletions,
    edit_f1_from_counts,
    editing_load,
    locate_span,
    micro_edit_f1,
    per_theme_content_recall,
    per_theme_edit_f1,
    theme_edit_f1,
    theme_proportions,
    unmatched_draft_text,
    word_tokens,
)


def simple_split(text: str) -> list[str]:
    """Test-only sentence splitter: break after . ! ? followed by whitespace, and at newlines."""
    parts = re.split(r"(?<=[.!?])\s+|\n+", text.strip())
    return [p for p in parts if p]


DRAFT = "I'm sorry you feel sick. Please rest. Call if worse."


def span(text: str, piece: str) -> tuple[int, int]:
    start = text.index(piece)
    return (start, start + len(piece))


# ------------------------------------------------------------------ content level


def test_worked_example_two_matches_one_addition_one_deletion():
    decisions = [span(DRAFT, "I'm sorry you feel sick."), None, span(DRAFT, "Call if worse.")]
    result = content_edit_f1(DRAFT, decisions, segment=simple_split)
    # EM = 2 matched sentences, EA = 1 NO MATCH; what is left is " Please rest. " -> 1 sentence.
    # P = 2 / (2 + 1) = 2/3, R = 2 / (2 + 1) = 2/3, F1 = 2*2 / (2*2 + 1 + 1) = 2/3.
    assert (result.em, result.ea, result.ed) == (2, 1, 1)
    assert result.precision == pytest.approx(2 / 3)
    assert result.recall == pytest.approx(2 / 3)
    assert result.f1 == pytest.approx(2 / 3)


def test_partial_sentence_match_leaves_the_rest_as_one_deletion():
    draft = "Take ibuprofen and rest today."
    result = content_edit_f1(draft, [span(draft, "Take ibuprofen")], segment=simple_split)
    # left: " and rest today." -> 1 sentence with words -> ED = 1; EM = 1, EA = 0
    # P = 1/2, R = 1/1, F1 = 2 / (2 + 1 + 0) = 2/3
    assert (result.em, result.ea, result.ed) == (1, 0, 1)
    assert result.precision == pytest.approx(0.5)
    assert result.recall == 1.0
    assert result.f1 == pytest.approx(2 / 3)


def test_leftover_punctuation_is_not_a_deletion():
    draft = "Hello there. Bye."
    remaining = unmatched_draft_text(draft, [(0, 11)])  # "Hello there" removed
    assert remaining == " . Bye."
    # pieces: ".", "Bye." -> only "Bye." holds a word character -> ED = 1
    assert count_expected_deletions(remaining, simple_split) == 1


def test_overlapping_spans_are_merged_and_each_sentence_counts_once():
    draft = "Rest and fluids. See you soon."
    decisions = [[(0, 4), (9, 16)], (0, 16), None]
    # union of spans = [0, 16) = "Rest and fluids." ; left " See you soon." -> ED = 1
    # EM = 2 (two matched reference sentences), EA = 1
    result = content_edit_f1(draft, decisions, segment=simple_split)
    assert (result.em, result.ea, result.ed) == (2, 1, 1)
    assert unmatched_draft_text(draft, decisions) == "  See you soon."


def test_removed_span_does_not_glue_words_together():
    assert unmatched_draft_text("ab cd", [(1, 4)]) == "a d"


def test_all_no_match():
    result = content_edit_f1("A b. C d.", [None, "NO MATCH"], segment=simple_split)
    # EM = 0, EA = 2, ED = 2 -> P = 0/2 = 0, R = 0/2 = 0, F1 = 0/(0 + 2 + 2) = 0
    assert (result.em, result.ea, result.ed) == (0, 2, 2)
    assert (result.precision, result.recall, result.f1) == (0.0, 0.0, 0.0)


def test_empty_draft_against_a_reference():
    result = content_edit_f1("", [None, None], segment=simple_split)
    # EM = ED = 0 -> precision undefined -> zero_division (0.0); R = 0/2; F1 = 0/(0+0+2) = 0
    assert (result.em, result.ea, result.ed) == (0, 2, 0)
    assert (result.precision, result.recall, result.f1) == (0.0, 0.0, 0.0)


def test_empty_reference_and_empty_draft_use_zero_division():
    result = content_edit_f1("", [], segment=simple_split)
    assert (result.em, result.ea, result.ed) == (0, 0, 0)
    assert (result.precision, result.recall, result.f1) == (0.0, 0.0, 0.0)
    result = content_edit_f1("", [], segment=simple_split, zero_division=1.0)
    assert (result.precision, result.recall, result.f1) == (1.0, 1.0, 1.0)
    nan = content_edit_f1("", [], segment=simple_split, zero_division=math.nan)
    assert math.isnan(nan.f1)


def test_empty_reference_with_a_draft_is_all_deletions():
    result = content_edit_f1("One. Two.", [], segment=simple_split)
    # EM = 0, EA = 0, ED = 2: P = 0/2 = 0, R undefined -> 0.0, F1 = 0/(0 + 2 + 0) = 0
    assert (result.em, result.ea, result.ed, result.f1) == (0, 0, 2, 0.0)


def test_segment_may_return_objects_with_text():
    class Piece:
        def __init__(self, text: str) -> None:
            self.text = text

    def split_objects(text: str) -> list[Piece]:
        return [Piece(t) for t in simple_split(text)]

    decisions = [span(DRAFT, "Please rest.")]
    a = content_edit_f1(DRAFT, decisions, segment=split_objects)
    b = content_edit_f1(DRAFT, decisions, segment=simple_split)
    assert a == b
    assert a.ed == 2


def test_default_segmenter_is_the_domain_one_once_it_exists():
    decisions = [span(DRAFT, "Please rest.")]
    if importlib.util.find_spec("portalreview.domain.segmenter") is None:
        with pytest.raises(ImportError, match="pass segment="):
            content_edit_f1(DRAFT, decisions)
    else:  # the domain segmenter has landed: the default path must work on plain prose
        result = content_edit_f1(DRAFT, decisions)
        assert (result.em, result.ea, result.ed) == (1, 0, 2)
        # and it knows abbreviations, which the test splitter does not: "Dr. Smith will call
        # you." left over is one deletion with the default, two with simple_split
        draft = "Dr. Smith will call you. Please rest."
        dec = [span(draft, "Please rest.")]
        assert content_edit_f1(draft, dec).ed == 1
        assert content_edit_f1(draft, dec, segment=simple_split).ed == 2


def test_default_segmenter_counts_chinese_sentences_left_over():
    # Chinese puts no space after 。: the two sentences left over are two deletions.
    draft = "请马上去急诊。不要自己开车。如果加重请打911。"
    result = content_edit_f1(draft, [span(draft, "请马上去急诊。")])
    assert (result.em, result.ea, result.ed) == (1, 0, 2)


def test_numpy_integer_spans_are_accepted():
    result = content_edit_f1("Rest well.", [(np.int64(0), np.int64(10))], segment=simple_split)
    assert (result.em, result.ed) == (1, 0)


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        ((0, 99), "draft's length"),
        ((5, 5), "start < end"),
        ((-1, 3), "start < end"),
        ([], "one or more"),
        ("Please rest.", "character spans"),
        ((True, 3), "pair of ints"),
        (float("nan"), "expected None"),
    ],
)
def test_invalid_decisions_are_rejected(decision, message):
    with pytest.raises(ValueError, match=message):
        content_edit_f1(DRAFT, [decision], segment=simple_split)


def test_micro_average_sums_counts():
    a = edit_f1_from_counts(2, 1, 1)
    b = edit_f1_from_counts(0, 2, 3)
    micro = micro_edit_f1([a, b])
    # EM = 2, EA = 3, ED = 4 -> P = 2/6, R = 2/5, F1 = 4 / (4 + 4 + 3) = 4/11
    assert (micro.em, micro.ea, micro.ed) == (2, 3, 4)
    assert micro.precision == pytest.approx(1 / 3)
    assert micro.recall == pytest.approx(2 / 5)
    assert micro.f1 == pytest.approx(4 / 11)
    with pytest.raises(ValueError, match="at least one"):
        micro_edit_f1([])


def test_counts_must_be_non_negative_integers():
    with pytest.raises(ValueError, match="em"):
        edit_f1_from_counts(-1, 0, 0)
    with pytest.raises(ValueError, match="ed"):
        edit_f1_from_counts(1, 0, 1.5)


def test_locate_span():
    assert locate_span(DRAFT, "  Please rest. ") == span(DRAFT, "Please rest.")
    assert locate_span(DRAFT, "please rest.") is None  # verbatim only
    with pytest.raises(ValueError, match="empty"):
        locate_span(DRAFT, "   ")


@given(st.integers(0, 50), st.integers(0, 50), st.integers(0, 50))
def test_f1_is_the_harmonic_mean_and_in_unit_interval(em, ea, ed):
    r = edit_f1_from_counts(em, ea, ed)
    assert 0.0 <= r.f1 <= 1.0
    if em + ed and em + ea and r.precision + r.recall:
        expected = 2 * r.precision * r.recall / (r.precision + r.recall)
        assert r.f1 == pytest.approx(expected)


@given(
    st.lists(st.sampled_from(["Rest.", "Drink water.", "Call us!", "Take it daily?"]), max_size=6),
    st.data(),
)
def test_content_f1_in_unit_interval_for_any_valid_decisions(sentences, data):
    draft = " ".join(sentences)
    n_ref = data.draw(st.integers(0, 5))
    decisions = []
    for _ in range(n_ref):
        if draft and data.draw(st.booleans()):
            start = data.draw(st.integers(0, len(draft) - 1))
            end = data.draw(st.integers(start + 1, len(draft)))
            decisions.append((start, end))
        else:
            decisions.append(None)
    r = content_edit_f1(draft, decisions, segment=simple_split)
    assert r.em + r.ea == n_ref
    assert r.ed <= len(sentences) + r.em + 1
    assert 0.0 <= r.f1 <= 1.0 and 0.0 <= r.precision <= 1.0 and 0.0 <= r.recall <= 1.0


# ------------------------------------------------------------------ theme level

REF = [["Empathy", "SymptomQ"], ["Planning", "Other"]]
DRF = [["Empathy", "Assessment", "Assessment"], ["Other", "Planning", "Coordination"]]


def test_theme_edit_f1_set_reading():
    r = theme_edit_f1(REF, DRF)
    # pair 1: Empathy TP, Assessment FP, SymptomQ FN; pair 2 (Other dropped): Planning TP,
    # Coordination FP. TP = 2, FP = 2, FN = 1: P = 2/4, R = 2/3, F1 = 4/(4 + 2 + 1) = 4/7
    assert (r.tp, r.fp, r.fn) == (2, 2, 1)
    assert r.precision == pytest.approx(0.5)
    assert r.recall == pytest.approx(2 / 3)
    assert r.f1 == pytest.approx(4 / 7)


def test_theme_edit_f1_can_include_other():
    r = theme_edit_f1(REF, DRF, include_other=True)
    # Other is in both responses of pair 2 -> one more TP: F1 = 6 / (6 + 2 + 1) = 2/3
    assert (r.tp, r.fp, r.fn) == (3, 2, 1)
    assert r.f1 == pytest.approx(2 / 3)


def test_theme_edit_f1_other_label_is_configurable():
    ref, drf = [["emp", "other"]], [["emp"]]
    assert theme_edit_f1(ref, drf, other_label="other").f1 == 1.0
    assert theme_edit_f1(ref, drf).fn == 1  # "other" is an ordinary theme unless named


def test_theme_edit_f1_matches_sklearn_micro_on_sets():
    labels = sorted({x for s in REF + DRF for x in s} - {"Other"})
    mlb = MultiLabelBinarizer(classes=labels)
    y_true = mlb.fit_transform([set(s) - {"Other"} for s in REF])
    y_pred = mlb.transform([set(s) - {"Other"} for s in DRF])
    r = theme_edit_f1(REF, DRF)
    assert r.f1 == pytest.approx(f1_score(y_true, y_pred, average="micro"))
    assert r.precision == pytest.approx(precision_score(y_true, y_pred, average="micro"))
    assert r.recall == pytest.approx(recall_score(y_true, y_pred, average="micro"))


def test_theme_edit_f1_multiset_counts_sentences():
    ref = [["Empathy", "Empathy", "SymptomQ"]]
    drf = [["Empathy", "Assessment", "Assessment"]]
    r = theme_edit_f1(ref, drf, mode="multiset")
    # Empathy: min(2, 1) = 1 TP, 1 FN; SymptomQ: 1 FN; Assessment: 2 FP
    # F1 = 2 / (2 + 2 + 2) = 1/3
    assert (r.tp, r.fp, r.fn) == (1, 2, 2)
    assert r.f1 == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="mode"):
        theme_edit_f1(ref, drf, mode="bag")


def test_theme_f1_reading_reproduces_table_15_assessment_arithmetic():
    # drafts always contain Assessment; 33 of 100 references do (Table 15: F1 0.50)
    ref = [["Assessment"]] * 33 + [["Empathy"]] * 67
    drf = [["Assessment", "Empathy"]] * 100
    table = per_theme_edit_f1(ref, drf)
    # F1 = 2*33 / (2*33 + 67 + 0) = 66/133 = 0.496
    assert table.loc["Assessment", "f1"] == pytest.approx(66 / 133)
    assert round(table.loc["Assessment", "f1"], 2) == 0.50


def test_per_theme_edit_f1_table():
    table = per_theme_edit_f1(
        REF,
        DRF,
        themes=["Empathy", "SymptomQ", "Assessment", "Planning", "Coordination", "Logistics"],
    )
    assert list(table.index) == [
        "Empathy", "SymptomQ", "Assessment", "Planning", "Coordination", "Logistics"
    ]  # fmt: skip
    assert table.loc["Empathy", ["tp", "fp", "fn", "f1", "support"]].tolist() == [1, 0, 0, 1.0, 1]
    assert table.loc["SymptomQ", "recall"] == 0.0  # 0 TP of 1
    assert table.loc["Assessment", "precision"] == 0.0  # 0 TP, 1 FP
    assert table.loc["Logistics", "f1"] == 0.0  # never seen -> zero_division
    with pytest.raises(ValueError, match="not in themes"):
        per_theme_edit_f1(REF, DRF, themes=["Empathy"])


def test_theme_inputs_validated():
    with pytest.raises(ValueError, match="one entry per pair"):
        theme_edit_f1([["A"]], [])
    with pytest.raises(ValueError, match="got a string"):
        theme_edit_f1(["Empathy"], [["Empathy"]])


def test_empty_theme_sets_give_zero_division():
    r = theme_edit_f1([[], ["Other"]], [[], []])
    assert (r.tp, r.fp, r.fn, r.f1) == (0, 0, 0, 0.0)


def test_per_theme_content_recall():
    themes = [["Empathy", "SymptomQ", "Empathy"], ["Empathy", "Other"]]
    decisions = [[(0, 5), None, None], [[(0, 3), (5, 8)], (1, 2)]]
    table = per_theme_content_recall(themes, decisions)
    # Empathy: matched 1 of 2 in pair 1 + 1 of 1 in pair 2 -> 2/3; SymptomQ 0/1; Other dropped
    assert table.loc["Empathy", "n_sentences"] == 3
    assert table.loc["Empathy", "recall"] == pytest.approx(2 / 3)
    assert table.loc["SymptomQ", "recall"] == 0.0
    assert "Other" not in table.index
    withother = per_theme_content_recall(themes, decisions, include_other=True)
    assert withother.loc["Other", "recall"] == 1.0
    empty = per_theme_content_recall(themes, decisions, themes=["Empathy", "SymptomQ", "Plan"])
    assert math.isnan(empty.loc["Plan", "recall"])  # no sentence of that theme


def test_per_theme_content_recall_validates_shapes():
    with pytest.raises(ValueError, match="pair 0"):
        per_theme_content_recall([["Empathy"]], [[None, None]])
    with pytest.raises(ValueError, match="one entry per pair"):
        per_theme_content_recall([["Empathy"]], [])


def test_theme_proportions():
    props = theme_proportions([["Empathy", "Empathy", "Plan"], ["Empathy"], [], ["Other"]])
    # 4 responses: Empathy in 2, Plan in 1, Other in 1
    assert props.to_dict() == {"Empathy": 0.5, "Other": 0.25, "Plan": 0.25}
    ordered = theme_proportions([["Plan"]], themes=["Empathy", "Plan"])
    assert ordered.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="at least one"):
        theme_proportions([])


# ------------------------------------------------------------------ measured editing load


def test_editing_load_worked_example():
    load = editing_load("Please rest and drink fluids.", "Please rest and call us.")
    # draft 5 words, final 5 words, common run "Please rest and" = 3 kept
    # deleted 2, added 2; P = 3/5, R = 3/5, F1 = 6 / (6 + 2 + 2) = 0.6
    assert (load.draft_words, load.final_words, load.kept) == (5, 5, 3)
    assert (load.deleted, load.added) == (2, 2)
    assert load.precision == pytest.approx(0.6)
    assert load.f1 == pytest.approx(0.6)


def test_editing_load_case_and_empty():
    assert editing_load("Rest", "rest").kept == 0
    assert editing_load("Rest", "rest", lowercase=True).kept == 1
    both_empty = editing_load("", "  ")
    assert (both_empty.kept, both_empty.f1) == (0, 0.0)
    assert editing_load("", "", zero_division=1.0).f1 == 1.0
    untouched = editing_load("Call us today.", "Call us today!")
    assert (untouched.precision, untouched.recall, untouched.f1) == (1.0, 1.0, 1.0)


def test_word_tokens_keep_contractions_and_hyphens():
    assert word_tokens("Don't skip the follow-up, ok?") == [
        "Don't",
        "skip",
        "the",
        "follow-up",
        "ok",
    ]


@given(st.text(max_size=60), st.text(max_size=60))
def test_editing_load_bounds(draft, final):
    load = editing_load(draft, final)
    assert load.kept <= min(load.draft_words, load.final_words)
    assert load.deleted + load.kept == load.draft_words
    assert load.added + load.kept == load.final_words
    assert 0.0 <= load.f1 <= 1.0


def test_result_is_frozen():
    r = edit_f1_from_counts(1, 1, 1)
    assert isinstance(r, EditF1Result)
    with pytest.raises(AttributeError):
        r.em = 3  # type: ignore[misc]


theme_sets = st.lists(
    st.lists(st.sampled_from(["Empathy", "SymptomQ", "Other"]), max_size=4), min_size=1, max_size=6
)


@given(theme_sets, st.data())
def test_theme_edit_f1_agrees_with_sklearn_for_any_sets(ref, data):
    drf = data.draw(
        st.lists(
            st.lists(st.sampled_from(["Empathy", "SymptomQ", "Other"]), max_size=4),
            min_size=len(ref),
            max_size=len(ref),
        )
    )
    r = theme_edit_f1(ref, drf)
    mlb = MultiLabelBinarizer(classes=["Empathy", "SymptomQ"])
    y_true = mlb.fit_transform([set(s) - {"Other"} for s in ref])
    y_pred = mlb.transform([set(s) - {"Other"} for s in drf])
    assert r.f1 == pytest.approx(f1_score(y_true, y_pred, average="micro", zero_division=0))
    assert 0.0 <= r.f1 <= 1.0


def test_single_theme_is_not_read_as_a_binary_problem():
    r = theme_edit_f1([[], []], [[], ["Empathy"]])
    # one label only: TP 0, FP 1, FN 0 -> F1 = 0 / (0 + 1 + 0) = 0
    assert (r.tp, r.fp, r.fn, r.f1) == (0, 1, 0, 0.0)
