"""Tests for portalreview.metrics.agreement. Hand-worked cases in comments; krippendorff,
scikit-learn as independent references."""

from __future__ import annotations

import math
import unicodedata

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.metrics import cohen_kappa_score
from sklearn.metrics.pairwise import cosine_similarity

from portalreview.metrics.agreement import (
    cohen_kappa,
    judge_agreement,
    kappa_per_batch,
    krippendorff_alpha,
    percent_agreement,
    rater_cosine_similarity,
    tfidf_cosine_matrix,
    tfidf_cosine_to_first,
    theme_inclusion_agreement,
)

nan = np.nan

# ------------------------------------------------------------------ theme IAA (Table 3)

RESPONSES = [
    [{"E", "S"}, {"E"}, {"E", "S"}],  # u1
    [{"E"}, {"E"}, {"E"}],  # u2
    [set(), {"S"}, set()],  # u3
    [{"L"}, {"L"}],  # u4: only two clinicians answered
    [{"E"}],  # u5: one answer -> skipped
]


def test_theme_inclusion_agreement_worked_example():
    table = theme_inclusion_agreement(RESPONSES)
    # 4 countable cases (u5 has one answer).
    # E: all include in u1, u2 -> 2/4; none include in u3, u4 -> 2/4; agreement 1.0
    # S: all include nowhere -> 0; none include in u2, u4 -> 2/4; agreement 0.5
    # L: all include in u4 -> 1/4; none include in u1, u2, u3 -> 3/4; agreement 1.0
    assert table.loc["E"].tolist() == [0.5, 0.5, 1.0, 4]
    assert table.loc["S"].tolist() == [0.0, 0.5, 0.5, 4]
    assert table.loc["L"].tolist() == [0.25, 0.75, 1.0, 4]


def test_theme_inclusion_agreement_min_raters_and_theme_list():
    table = theme_inclusion_agreement(RESPONSES, min_raters=3, themes=["E", "S", "L", "Plan"])
    # u1, u2, u3 only: E all-include 2/3; Plan never used -> exclusion 1.0
    assert table.loc["E", "strict_inclusion"] == pytest.approx(2 / 3)
    assert table.loc["Plan"].tolist() == [0.0, 1.0, 1.0, 3]
    with pytest.raises(ValueError, match="not in themes"):
        theme_inclusion_agreement(RESPONSES, themes=["E"])
    with pytest.raises(ValueError, match="at least 2 raters"):
        theme_inclusion_agreement([[{"E"}]])
    with pytest.raises(ValueError, match="min_raters"):
        theme_inclusion_agreement(RESPONSES, min_raters=1)


def test_strict_agreement_is_the_sum_as_in_table_3():
    table = theme_inclusion_agreement(RESPONSES)
    sums = table["strict_inclusion"] + table["strict_exclusion"]
    assert np.allclose(sums, table["strict_agreement"])


# ------------------------------------------------------------------ Krippendorff's alpha

# Krippendorff's classic reliability example: 4 coders x 12 units, NaN = missing
KRIPP = np.array(
    [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ]
).T  # our layout is units x raters


def test_alpha_hand_worked_nominal():
    # units (a,a), (a,b), (b,b): coincidences o_aa = 2, o_ab = o_ba = 1, o_bb = 2; n_a = n_b = 3
    # D_o = 2/6; D_e = 2 * 3 * 3 / (6 * 5) = 0.6; alpha = 1 - (1/3)/0.6 = 4/9
    data = [["a", "a"], ["a", "b"], ["b", "b"]]
    assert krippendorff_alpha(data) == pytest.approx(4 / 9)


@pytest.mark.parametrize(
    ("level", "expected"),
    [("nominal", 0.743), ("ordinal", 0.815), ("interval", 0.849), ("ratio", 0.797)],
)
def test_alpha_classic_example(level, expected):
    import krippendorff

    value = krippendorff_alpha(KRIPP, level=level)
    assert value == pytest.approx(expected, abs=5e-4)
    reference = krippendorff.alpha(reliability_data=KRIPP.T, level_of_measurement=level)
    assert value == pytest.approx(reference)


def test_alpha_string_labels_equal_coded_labels_and_accept_none():
    names = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}
    labelled = pd.DataFrame(KRIPP).map(lambda v: None if math.isnan(v) else names[int(v)])
    assert krippendorff_alpha(labelled) == pytest.approx(krippendorff_alpha(KRIPP))


def test_alpha_errors_and_undefined():
    with pytest.raises(ValueError, match="at least 2 raters"):
        krippendorff_alpha([[1], [2]])
    with pytest.raises(ValueError, match="no pairable unit"):
        krippendorff_alpha([[1, nan], [nan, 2]])
    with pytest.raises(ValueError, match="numeric"):
        krippendorff_alpha([["a", "b"], ["a", "a"]], level="ordinal")
    with pytest.raises(ValueError, match="level"):
        krippendorff_alpha([[1, 1]], level="fuzzy")
    with pytest.raises(ValueError, match="2-D"):
        krippendorff_alpha([1, 2, 3])
    # all pairable answers equal: no expected disagreement -> undefined
    assert math.isnan(krippendorff_alpha([[1, 1], [1, 1], [2, nan]]))


@given(st.lists(st.integers(1, 4), min_size=2, max_size=15).filter(lambda v: len(set(v)) > 1))
def test_alpha_of_identical_raters_is_one(values):
    data = np.array([values, values]).T
    assert krippendorff_alpha(data) == pytest.approx(1.0)


# ------------------------------------------------------------------ Cohen's kappa


def test_kappa_hand_worked():
    # p_o = 3/4; p_e = P(a=1)P(b=1) + P(a=0)P(b=0) = .5*.25 + .5*.75 = .5
    # kappa = (.75 - .5) / (1 - .5) = 0.5
    assert cohen_kappa([1, 1, 0, 0], [1, 0, 0, 0]) == pytest.approx(0.5)


def test_kappa_drops_missing_pairs_and_matches_sklearn():
    a = ["x", "y", None, "y", "x", nan, "z"]
    b = ["x", "y", "y", "x", "x", "z", nan]
    # pairs kept: (x,x) (y,y) (y,x) (x,x)
    expected = cohen_kappa_score(["x", "y", "y", "x"], ["x", "y", "x", "x"])
    assert cohen_kappa(a, b) == pytest.approx(expected)
    ordinal_a, ordinal_b = [1, 2, 3, 4, 2], [1, 3, 3, 2, 2]
    assert cohen_kappa(ordinal_a, ordinal_b, weights="quadratic") == pytest.approx(
        cohen_kappa_score(ordinal_a, ordinal_b, weights="quadratic")
    )


def test_kappa_edge_cases():
    assert math.isnan(cohen_kappa(["x", "x"], ["x", "x"]))  # one category: undefined
    assert cohen_kappa([1], [0]) == 0.0  # p_o = 0 and p_e = 0
    with pytest.raises(ValueError, match="no unit"):
        cohen_kappa([None, 1], [1, None])
    with pytest.raises(ValueError, match="same units"):
        cohen_kappa([1, 2], [1])


@given(st.lists(st.sampled_from("abc"), min_size=2, max_size=30).filter(lambda v: len(set(v)) > 1))
def test_kappa_of_a_rater_with_itself_is_one(labels):
    assert cohen_kappa(labels, labels) == pytest.approx(1.0)


def test_kappa_per_batch():
    a = [1, 1, 0, 0, 1, 0, 1, 0, 1]
    b = [1, 0, 0, 0, 1, 0, 1, 0, 0]
    table = kappa_per_batch(a, b, 4)
    # batch 1 = the hand-worked 0.5; batch 2 agrees fully -> 1.0; batch 3 = one pair (1, 0)
    # -> p_o = 0, p_e = 0 -> kappa 0
    assert table["kappa"].tolist() == pytest.approx([0.5, 1.0, 0.0])
    assert table["n_pairs"].tolist() == [4, 4, 1]
    assert table[["first_unit", "last_unit"]].values.tolist() == [[0, 3], [4, 7], [8, 8]]
    missing = kappa_per_batch([None, None, 1, 0], [1, 0, 1, 0], 2)
    assert math.isnan(missing["kappa"][0]) and missing["n_pairs"][0] == 0
    with pytest.raises(ValueError, match="batch_size"):
        kappa_per_batch(a, b, 0)


# ------------------------------------------------------------------ percent agreement


def test_percent_agreement():
    data = [[1, 1], [1, 2], [2, 2], [nan, 1]]
    # 3 pairable units, 2 agree -> 2/3; the unit with one answer is skipped
    assert percent_agreement(data) == pytest.approx(2 / 3)
    three = [["a", "a", "b"], ["c", "c", "c"]]
    # unanimous: 1/2. pairwise: unit 1 has 1 agreeing pair of 3, unit 2 3 of 3 -> (1/3 + 1)/2
    assert percent_agreement(three) == 0.5
    assert percent_agreement(three, method="pairwise") == pytest.approx(2 / 3)
    with pytest.raises(ValueError, match="no pairable"):
        percent_agreement([[1, nan]])
    with pytest.raises(ValueError, match="method"):
        percent_agreement(three, method="mean")


# ------------------------------------------------------------------ judge agreement (Table 8)


def test_judge_agreement_worked_example():
    reference = [None, None, (0, 10), (0, 10), (0, 10), [(0, 3), (5, 8)]]
    judged = [None, (0, 5), (0, 10), (5, 15), "NO MATCH", [(5, 8), (0, 3)]]
    r = judge_agreement(reference, judged)
    # same decision in samples 1, 3, 4, 6 -> 4/6; reference non-matches 1, 2: judge agrees on 1
    # -> 1/2; reference matches 3, 4, 5, 6: exact in 3 and 6 -> 2/4; overlap in 3, 4, 6 -> 3/4
    assert r.n == 6 and r.n_reference_matches == 4 and r.n_reference_non_matches == 2
    assert r.agreement == pytest.approx(4 / 6)
    assert r.non_match_agreement == 0.5
    assert r.match_agreement == 0.5
    assert r.match_overlap == 0.75


def test_judge_agreement_with_text_outputs():
    draft = "Thanks for writing. Please rest. Call if worse."
    drafts = [draft] * 3
    reference = ["Please rest.", "Call if worse.", "Call if worse."]
    judged = ["Please rest.", "if worse", "Call us if it gets worse."]  # last is not verbatim
    r = judge_agreement(reference, judged, drafts=drafts)
    # all three are match decisions -> agreement 1; exact: 1 of 3; overlap: 2 of 3
    assert r.agreement == 1.0
    assert r.match_agreement == pytest.approx(1 / 3)
    assert r.match_overlap == pytest.approx(2 / 3)
    assert math.isnan(r.non_match_agreement)  # no reference NO MATCH
    with pytest.raises(ValueError, match="drafts="):
        judge_agreement(reference, judged)


def test_judge_agreement_validation():
    with pytest.raises(ValueError, match="parallel"):
        judge_agreement([None], [])
    with pytest.raises(ValueError, match="no samples"):
        judge_agreement([], [])
    with pytest.raises(ValueError, match="invalid span"):
        judge_agreement([(4, 2)], [None])
    all_no = judge_agreement([None, None], [None, (0, 1)])
    assert math.isnan(all_no.match_agreement) and math.isnan(all_no.match_overlap)


@given(
    st.lists(
        st.one_of(st.none(), st.tuples(st.integers(0, 20), st.integers(1, 10))), min_size=1
    ).map(lambda v: [None if d is None else (d[0], d[0] + d[1]) for d in v])
)
def test_judge_agreement_with_itself_is_perfect(decisions):
    r = judge_agreement(decisions, decisions)
    assert r.agreement == 1.0
    for value in (r.non_match_agreement, r.match_agreement, r.match_overlap):
        assert math.isnan(value) or value == 1.0


# ------------------------------------------------------------------ TF-IDF cosine (Table 11)


def test_tfidf_cosine_matrix_matches_sklearn():
    texts = ["Please rest and drink fluids", "Rest and fluids please", "Call the clinic now"]
    ours = tfidf_cosine_matrix(texts)
    tfidf = TfidfVectorizer().fit_transform(texts)
    assert np.allclose(ours, cosine_similarity(tfidf))
    assert np.allclose(np.diag(ours), 1.0)
    assert ours[0, 2] == pytest.approx(0.0)  # no shared word


def test_tfidf_cosine_matrix_empty_texts():
    sims = tfidf_cosine_matrix(["rest well", "", "rest well"])
    # "rest well" twice -> 1.0; the empty text has no vector -> NaN everywhere
    assert sims[0, 2] == pytest.approx(1.0)
    assert np.isnan(sims[1]).all() and np.isnan(sims[:, 1]).all()
    assert np.isnan(tfidf_cosine_matrix(["", "a"])).all()  # no token of 2+ chars at all
    with pytest.raises(ValueError, match="no texts"):
        tfidf_cosine_matrix([])


def test_tfidf_cosine_reads_decomposed_accents_as_the_same_word():
    composed = "Café naïve résumé, rest"
    decomposed = unicodedata.normalize("NFD", composed)
    assert decomposed != composed
    sims = tfidf_cosine_matrix([composed, decomposed, "call the clinic"])
    assert sims[0, 1] == pytest.approx(1.0)
    assert tfidf_cosine_to_first([decomposed, composed])[1] == pytest.approx(1.0)


def test_tfidf_cosine_to_first_is_row_zero_of_the_matrix_bit_for_bit():
    rng = np.random.default_rng(5)
    words = ["rest", "fluids", "call", "clinic", "pain", "fever", "a", "", "now", "dose"]
    for _ in range(50):
        n = int(rng.integers(1, 12))
        texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 6)))) for _ in range(n)]
        row, matrix_row = tfidf_cosine_to_first(texts), tfidf_cosine_matrix(texts)[0]
        assert np.array_equal(row, matrix_row, equal_nan=True), texts
    assert np.isnan(tfidf_cosine_to_first(["", "rest well"])).all()
    with pytest.raises(ValueError, match="non-empty"):
        tfidf_cosine_to_first([])


def test_rater_cosine_similarity():
    responses = pd.DataFrame(
        {
            "A": ["rest well", "call now"],
            "B": ["rest well", None],
            "C": ["call now", "call now"],
        }
    )
    sims = rater_cosine_similarity(responses)
    # A-B share case 1 only: identical -> 1.0; A-C: case 1 -> 0, case 2 -> 1 -> mean 0.5
    # B-C: case 1 -> 0
    assert sims.loc["A", "B"] == pytest.approx(1.0)
    assert sims.loc["A", "C"] == pytest.approx(0.5)
    assert sims.loc["C", "B"] == pytest.approx(0.0)
    assert (np.diag(sims) == 1.0).all()
    lonely = rater_cosine_similarity(pd.DataFrame({"A": ["x y", None], "B": [None, "x y"]}))
    assert math.isnan(lonely.loc["A", "B"])
    with pytest.raises(ValueError, match="at least 2 raters"):
        rater_cosine_similarity(pd.DataFrame({"A": ["text"]}))
    with pytest.raises(ValueError, match="text"):
        rater_cosine_similarity(pd.DataFrame({"A": [1], "B": ["text"]}))


def test_judge_agreement_rejects_malformed_spans():
    with pytest.raises(ValueError, match="invalid span"):
        judge_agreement([("a", "b")], [None])
    with pytest.raises(ValueError, match="expected None"):
        judge_agreement([[]], [None])
