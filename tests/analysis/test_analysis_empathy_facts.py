"""Empathy comparisons and fact checks (seed 004): outcome shares per pair of sources,
agreement with a model judge, Fact-Recall / Precision with the empty-set rule, fact flow."""

from __future__ import annotations

import pytest
from analysis_builders import new_study

from portalreview import metrics
from portalreview.analysis import empathy, facts

# unit -> annotator -> "edited" / "original" / "equal"
CHOICES = {
    "e1": {"x": "edited", "y": "edited", "judge": "edited"},
    "e2": {"x": "equal", "y": "original", "judge": "original"},
    "e3": {"x": "original"},
}
# unit -> annotator -> [(side, entailed, category)]
FACTS = {
    "f1": {
        "x": [
            ("original", True, None),
            ("original", False, "clinical_inaccuracy"),
            ("edited", True, None),
            ("edited", False, "false_assurance"),
        ],
        "y": [("original", True, None), ("original", True, None)],  # no edited fact
    },
    "f2": {
        "x": [("edited", False, None)],  # no original fact
        "y": [("original", True, None), ("edited", True, None)],
    },
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("empathy"))
    for name in ("x", "y"):
        st.person(name)
    st.person("judge", model=True)
    for unit in [*CHOICES, *FACTS]:
        st.case(unit, "My new inhaler makes my hands shake. Is that normal?")
        st.response(f"{unit}-o", unit, "That is a common side effect.", "clinician", "physician")
        st.response(
            f"{unit}-e", unit, "I am sorry. That is a common side effect.", "model", "model-edit"
        )
        kind = "empathy" if unit in CHOICES else "facts"
        answers = CHOICES.get(unit) or FACTS[unit]
        st.unit(
            unit,
            kind,
            unit,
            who=list(answers),
            response_id=st.responses[f"{unit}-o"],
            response_b_id=st.responses[f"{unit}-e"],
        )
        for name, answer in answers.items():
            if kind == "empathy":
                payload = (
                    {"equal": True}
                    if answer == "equal"
                    else {"more_empathetic_response_id": st.responses[f"{unit}-{answer[0]}"]}
                )
            else:
                payload = {
                    "facts": [
                        {"side": side, "text": f"fact {i}", "entailed": ok, "error_category": cat}
                        for i, (side, ok, cat) in enumerate(answer)
                    ]
                }
            st.answer(unit, name, payload)
    frames = st.frames()
    yield st, frames, empathy.analyse(frames, n_resamples=0), facts.analyse(frames, n_resamples=0)
    st.project.close()


def test_outcome_shares_per_pair_of_sources(study):
    _, _, result, _ = study
    (pair,) = result["by_source_pair"]
    # Sources in name order: "model-edit" first, "physician" second. People's answers:
    # edited x2 (e1), equal (x, e2), original (y, e2; x, e3) -> 2/5, 2/5, 1/5.
    assert (pair["first_source"], pair["second_source"]) == ("model-edit", "physician")
    assert (pair["n_first_more"], pair["n_second_more"], pair["n_equal"]) == (2, 2, 1)
    assert pair["share_first_more"]["value"] == pytest.approx(0.4)
    assert pair["share_equal"]["value"] == pytest.approx(0.2)
    assert (pair["n_units"], pair["n_answers"]) == (3, 5)


def test_agreement_between_people_and_with_the_model(study):
    _, _, result, _ = study
    agreement = result["agreement"]
    # Pairable: e1 (B, B) agree, e2 (equal, A) disagree -> 1/2.
    assert agreement["n_units"] == 2
    assert agreement["percent_agreement"]["value"] == 0.5
    expected = metrics.krippendorff_alpha([["B", "B"], ["equal", "A"]])
    assert agreement["alpha"]["value"] == pytest.approx(expected)
    model = {row["annotator"]: row for row in result["model_agreement"]}
    # judge vs x: e1 agree, e2 (A vs equal) not -> 1/2; judge vs y: both agree -> 1.
    assert model["x"]["percent_agreement"]["value"] == 0.5
    assert model["y"]["percent_agreement"]["value"] == 1.0
    assert result["n_answers"] == 5  # the judge's answers are not people's


def _empathy_figures(folder, stored_edit_first: set[str]) -> dict:
    """The empathy figures of CHOICES, the units named stored with the edit as their first
    response."""
    folder.mkdir()
    st = new_study(folder)
    for name in ("x", "y"):
        st.person(name)
    st.person("judge", model=True)
    for unit, answers in CHOICES.items():
        st.case(unit, "My new inhaler makes my hands shake. Is that normal?")
        original = st.response(f"{unit}-o", unit, "A common effect.", "clinician", "physician")
        edited = st.response(f"{unit}-e", unit, "Sorry. A common effect.", "model", "model-edit")
        first, second = (edited, original) if unit in stored_edit_first else (original, edited)
        st.unit(unit, "empathy", unit, who=list(answers), response_id=first, response_b_id=second)
        for name, answer in answers.items():
            chosen = {"edited": edited, "original": original}.get(answer)
            st.answer(unit, name, {"equal": True} if chosen is None else
                      {"more_empathetic_response_id": chosen})  # fmt: skip
    try:
        return empathy.analyse(st.frames(), n_resamples=0)
    finally:
        st.project.close()


def test_the_figures_do_not_depend_on_the_side_a_pair_is_stored_on(tmp_path):
    """A set made now stores each pair's sides at random (study_setup._sides_drawn): the same
    answers give the same agreement whichever response of a pair is stored first (coded by the
    stored side, e1's agreeing answers counted as "second" with e2's "first" or as "first" with
    them, and alpha's expected disagreement differed)."""
    as_made = _empathy_figures(tmp_path / "a", set())
    drawn = _empathy_figures(tmp_path / "b", {"e1"})
    for key in ("agreement", "model_agreement", "by_source_pair", "n_answers"):
        assert drawn[key] == as_made[key], key


def test_empathy_position_bias(study):
    st, _, result, _ = study
    chose_first = n = 0
    for unit, answers in CHOICES.items():
        for name, answer in answers.items():
            if name == "judge" or answer == "equal":
                continue
            swap = st.presentation(unit, name)["swap"]
            first = "edited" if swap else "original"
            chose_first += answer == first
            n += 1
    bias = result["position_bias"]
    assert bias["n_answers"] == n == 4
    assert bias["share_chose_first_shown"]["value"] == pytest.approx(chose_first / n)


def test_fact_recall_and_precision_micro_and_macro(study):
    _, _, _, result = study
    overall = result["overall"]
    # Pairs: x/f1 |C| 2 kept 1, |C'| 2 grounded 1 -> R .5, P .5; y/f1 |C| 2 kept 2, |C'| 0
    # -> R 1, P 0 (C' empty, C not); x/f2 |C| 0, |C'| 1 grounded 0 -> R 0, P 0; y/f2 -> 1, 1.
    # Micro: C 5, kept 4, C' 4, grounded 2 -> R .8, P .5, F1 = .8 / 1.3.
    assert overall["micro"]["recall"]["value"] == pytest.approx(0.8)
    assert overall["micro"]["precision"]["value"] == pytest.approx(0.5)
    assert overall["micro"]["f1"]["value"] == pytest.approx(0.8 / 1.3)
    # Macro: R (.5 + 1 + 0 + 1) / 4 = .625, P (.5 + 0 + 0 + 1) / 4 = .375.
    assert overall["macro"]["recall"]["value"] == pytest.approx(0.625)
    assert overall["macro"]["precision"]["value"] == pytest.approx(0.375)
    pairs = [
        metrics.fact_scores([True, False], [True, False]),
        metrics.fact_scores([True, True], []),
        metrics.fact_scores([], [False]),
        metrics.fact_scores([True], [True]),
    ]
    assert overall["macro"]["f1"]["value"] == pytest.approx(metrics.macro_fact_scores(pairs).f1)
    assert overall["micro"]["f1"]["value"] == pytest.approx(metrics.micro_fact_scores(pairs).f1)


def test_fact_flow_and_error_categories(study):
    _, _, _, result = study
    flow = result["overall"]["flow"]
    # New facts = 4 - 2 = 2; loss rate (5 - 4) / 5; hallucination rate 2 / 4.
    assert (flow["n_original"], flow["n_preserved"], flow["new_facts"]) == (5, 4, 2)
    assert flow["loss_rate"]["value"] == pytest.approx(0.2)
    assert flow["hallucination_rate"]["value"] == pytest.approx(0.5)
    counts = {(r["side"], r["category"]): r["n"] for r in result["error_categories"]}
    assert counts[("original", "clinical_inaccuracy")] == 1
    assert counts[("edited", "false_assurance")] == 1
    assert counts[("edited", None)] == 1  # x on f2: not grounded, no category
    (pair,) = result["by_source_pair"]
    assert (pair["original_source"], pair["edited_source"]) == ("physician", "model-edit")
    by = {row["annotator"]: row for row in result["by_annotator"]}
    # y alone: C 3, kept 3, C' 1, grounded 1 -> micro R 1, P 1.
    assert by["y"]["micro"]["recall"]["value"] == 1.0 and by["y"]["n_pairs"] == 2
