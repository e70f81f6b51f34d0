"""Fact checks marked "no medical facts on either side" in the report: scored by seed 004's
empty-set rule (Sec. 3.3), both sets empty -> recall and precision 1.0, per pair in the macro
averages and on the pooled counts in the micro ones. Figures worked by hand below."""

from __future__ import annotations

import pytest
from analysis_builders import new_study

from portalreview.analysis import facts
from portalreview.store.frames import read_frames

NONE = "none"  # the answer says: no medical facts on either side
# unit -> annotator -> facts [(side, entailed)] or NONE
ANSWERS = {
    "g1": {
        "x": [("original", True), ("original", False), ("edited", True)],
        "y": NONE,
    },
    "g2": {"x": NONE, "y": [("edited", False)]},
    "g3": {"x": NONE, "y": NONE},  # its own pair of sources: a group of no-facts pairs only
}


def _payload(answer) -> dict:
    if answer == NONE:
        return {"facts": [], "no_facts": True}
    return {
        "facts": [
            {"side": side, "text": f"fact {i}", "entailed": ok}
            for i, (side, ok) in enumerate(answer)
        ]
    }


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("facts-none"))
    for name in ("x", "y", "z"):
        st.person(name)
    for unit, answers in ANSWERS.items():
        st.case(unit, "Thanks for the refill!")
        edit_source = "short-edit" if unit == "g3" else "model-edit"
        st.response(f"{unit}-o", unit, "You're welcome, see you Friday.", "clinician", "physician")
        st.response(f"{unit}-e", unit, "Glad to help! See you Friday.", "model", edit_source)
        st.unit(
            unit,
            "facts",
            unit,
            who=[*answers, "z"],
            response_id=st.responses[f"{unit}-o"],
            response_b_id=st.responses[f"{unit}-e"],
        )
        for name, answer in answers.items():
            st.answer(unit, name, _payload(answer))
    # z's check of g1 is not done: nothing listed, nothing said (a draft)
    st.svc.save_answer(st.units["g1"], {"facts": []}, annotator_id=st.people["z"])
    yield st
    st.project.close()


@pytest.fixture(scope="module")
def result(study):
    return facts.analyse(study.frames(), n_resamples=0)


def _value(group: dict, kind: str, stat: str) -> float:
    return group[kind][stat]["value"]


def test_overall_micro_and_macro_with_no_facts_pairs(result):
    overall = result["overall"]
    assert overall["n_pairs"] == 6 and overall["n_pairs_without_facts"] == 4
    # Pairs (R, P): x/g1 |C| 2 kept 1, |C'| 1 grounded 1 -> (.5, 1); y/g1 none -> (1, 1);
    # x/g2 none -> (1, 1); y/g2 |C| 0, |C'| 1 grounded 0 -> (0, 0); x/g3, y/g3 none -> (1, 1).
    # Micro: |C| 2 kept 1, |C'| 2 grounded 1 -> R .5, P .5 (the none pairs add nothing).
    assert _value(overall, "micro", "recall") == pytest.approx(0.5)
    assert _value(overall, "micro", "precision") == pytest.approx(0.5)
    assert _value(overall, "micro", "f1") == pytest.approx(0.5)
    # Macro: R (.5 + 1 + 1 + 0 + 1 + 1) / 6 = .75, P (1 + 1 + 1 + 0 + 1 + 1) / 6 = 5/6.
    assert _value(overall, "macro", "recall") == pytest.approx(0.75)
    assert _value(overall, "macro", "precision") == pytest.approx(5 / 6)
    f1 = 2 * 0.75 * (5 / 6) / (0.75 + 5 / 6)
    assert _value(overall, "macro", "f1") == pytest.approx(f1)
    assert result["n_pairs_with_undecided_facts"] == 0


def test_per_annotator(result):
    by = {row["annotator"]: row for row in result["by_annotator"]}
    x, y = by["x"], by["y"]
    # x: (.5, 1), (1, 1), (1, 1); micro |C| 2 kept 1, |C'| 1 grounded 1.
    assert (_value(x, "micro", "recall"), _value(x, "micro", "precision")) == (0.5, 1.0)
    assert _value(x, "macro", "recall") == pytest.approx(2.5 / 3)
    assert _value(x, "macro", "precision") == 1.0
    # y: (1, 1), (0, 0), (1, 1); micro |C| 0 but |C'| 1 -> recall 0 by the rule, P 0 / 1.
    assert (_value(y, "micro", "recall"), _value(y, "micro", "precision")) == (0.0, 0.0)
    assert _value(y, "macro", "recall") == pytest.approx(2 / 3)
    assert _value(y, "macro", "precision") == pytest.approx(2 / 3)
    assert (x["n_pairs_without_facts"], y["n_pairs_without_facts"]) == (2, 2)


def test_a_group_of_no_facts_pairs_only_scores_one(result):
    groups = {(r["original_source"], r["edited_source"]): r for r in result["by_source_pair"]}
    only_none = groups[("physician", "short-edit")]
    assert only_none["n_pairs"] == only_none["n_pairs_without_facts"] == 2
    for kind in ("micro", "macro"):
        for stat in ("recall", "precision", "f1"):
            assert _value(only_none, kind, stat) == 1.0, (kind, stat)
    flow = only_none["flow"]
    assert (flow["n_original"], flow["n_edited"], flow["new_facts"]) == (0, 0, 0)
    assert flow["loss_rate"]["value"] is None  # nothing on that side to lose


def test_a_check_not_done_yet_is_left_out_when_drafts_count(study, result):
    with_drafts = facts.analyse(read_frames(study.project, include_drafts=True), n_resamples=0)
    assert with_drafts["n_answers"] == 7 and with_drafts["n_pairs_not_checked_yet"] == 1
    assert result["n_pairs_not_checked_yet"] == 0
    assert with_drafts["overall"] == result["overall"]  # z's empty draft is not a 1.0 / 1.0 pair
