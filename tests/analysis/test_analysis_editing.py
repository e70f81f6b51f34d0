"""Editing load of drafts clinicians edited in place (respond answers in mode edit_draft): per
answer, pooled, per annotator and per draft source beside the drafts' Edit-F1 estimate from
match answers. Every number is worked by hand in the comments."""

from __future__ import annotations

import numpy as np
import pytest
from analysis_builders import new_study, span_of

from portalreview import metrics
from portalreview.analysis import respond

D1 = "Rest today. Drink water. Call if worse."  # 7 words, source m1
D2 = "Take the tablets with food."  # 5 words, source m2
REFERENCE = "Rest today and drink water. Call us if you feel worse."
FINALS = {
    # (unit, annotator): (draft, final text, active seconds)
    ("e1", "ava"): ("d1", "Rest today. Call if worse. We will phone you tomorrow.", 30.0),
    ("e1", "ben"): ("d1", D1, 10.0),
    ("e2", "ava"): ("d2", "Take two tablets with food.", 50.0),
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("editing"))
    for name in ("ava", "ben"):
        st.person(name)
    st.case("c1", "I feel feverish. What should I do?")
    st.case("c2", "How do I take my new tablets?")
    st.response("d1", "c1", D1, "model", "m1")
    st.response("d2", "c2", D2, "model", "m2")
    st.response("ref", "c1", REFERENCE, "clinician", "ava")
    st.unit("e1", "respond", "c1", who=["ava", "ben"])
    st.unit("e2", "respond", "c2", who=["ava", "ben"])
    for (unit, name), (draft, final, seconds) in FINALS.items():
        payload = {
            "mode": "edit_draft",
            "base_response_id": st.responses[draft],
            "final_text": final,
        }
        st.answer(unit, name, payload, active_seconds=seconds)
    # ben writes his own reply on c2: theme-guided, not part of the editing load.
    st.answer("e2", "ben", {"mode": "theme_guided", "parts": {"planning": "Take one daily."}})
    # ava judges D1 against the reference: R0 matches "Rest today.", R1 NO MATCH.
    st.unit(
        "m1",
        "match",
        "c1",
        who=["ava"],
        response_id=st.responses["ref"],
        response_b_id=st.responses["d1"],
    )
    ref = [s.id for s in st.sentences("ref")]
    d1 = [s.id for s in st.sentences("d1")]
    st.answer(
        "m1",
        "ava",
        {
            "decisions": [
                {"sentence_id": ref[0], "spans": [span_of(D1, "Rest today.")]},
                {"sentence_id": ref[1], "spans": []},
            ],
            "themes": [{"sentence_id": s, "theme": "planning"} for s in ref + d1],
        },
    )
    frames = st.frames()
    yield st, frames, respond.analyse(frames, n_resamples=50)
    st.project.close()


def test_per_answer_rows(study):
    st, _, result = study
    load = result["editing_load"]
    assert load["n_answers"] == 3 and result["n_edit_draft"] == 3
    rows = {(r["unit_id"], r["annotator"]): r for r in load["answers"]}
    ava = rows[(st.units["e1"], "ava")]
    # D1: Rest today Drink water Call if worse (7). Final: Rest today Call if worse We will
    # phone you tomorrow (10). Kept 5, deleted Drink water (2), added 5.
    # P = 5/7, R = 5/10, F1 = 10 / (10 + 2 + 5) = 10/17.
    assert (ava["draft_words"], ava["final_words"]) == (7, 10)
    assert (ava["kept"], ava["deleted"], ava["added"]) == (5, 2, 5)
    assert ava["precision"] == pytest.approx(5 / 7)
    assert ava["f1"] == pytest.approx(10 / 17)
    assert (ava["draft_id"], ava["source"], ava["active_seconds"]) == (
        st.responses["d1"],
        "m1",
        30.0,
    )
    ben = rows[(st.units["e1"], "ben")]  # sent the draft unchanged
    assert (ben["kept"], ben["deleted"], ben["added"], ben["f1"]) == (7, 0, 0, 1.0)
    on_d2 = rows[(st.units["e2"], "ava")]
    # Take the tablets with food -> Take two tablets with food: kept 4, the -> two.
    assert (on_d2["kept"], on_d2["deleted"], on_d2["added"]) == (4, 1, 1)


def test_pooled_and_per_annotator(study):
    _, _, result = study
    pooled = result["editing_load"]["pooled"]
    # Kept 5 + 7 + 4 = 16, deleted 2 + 0 + 1 = 3, added 5 + 0 + 1 = 6.
    # Micro P = 16/19, R = 16/22, F1 = 32 / (32 + 3 + 6) = 32/41.
    assert (pooled["kept"], pooled["deleted"], pooled["added"]) == (16, 3, 6)
    assert (pooled["draft_words"], pooled["final_words"]) == (19, 22)
    assert pooled["precision"]["value"] == pytest.approx(16 / 19)
    assert pooled["recall"]["value"] == pytest.approx(16 / 22)
    assert pooled["f1"]["value"] == pytest.approx(32 / 41)
    assert pooled["mean_kept"] == pytest.approx(16 / 3)
    # Seconds 30, 10, 50: mean 30, median 30.
    assert pooled["mean_active_seconds"]["value"] == pytest.approx(30.0)
    assert pooled["median_active_seconds"] == 30.0
    assert (pooled["n_answers"], pooled["n_units"]) == (3, 2)
    by = {r["annotator"]: r for r in result["editing_load"]["by_annotator"]}
    # ava: kept 5 + 4 = 9, deleted 3, added 6: F1 = 18 / (18 + 3 + 6) = 2/3.
    assert by["ava"]["f1"]["value"] == pytest.approx(2 / 3)
    assert by["ben"]["f1"]["value"] == 1.0


def test_by_source_beside_the_edit_f1_estimate(study):
    _, _, result = study
    rows = {r["source"]: r for r in result["editing_load"]["by_source"]}
    m1 = rows["m1"]
    # m1 (D1 edited by ava and ben): kept 5 + 7 = 12, deleted 2, added 5.
    # P = 12/14, R = 12/17, F1 = 24 / (24 + 2 + 5) = 24/31; means 6, 1, 2.5 words.
    assert (m1["n_answers"], m1["n_drafts"], m1["n_units"]) == (2, 1, 1)
    assert (m1["mean_kept"], m1["mean_deleted"], m1["mean_added"]) == (6.0, 1.0, 2.5)
    assert m1["precision"]["value"] == pytest.approx(12 / 14)
    assert m1["f1"]["value"] == pytest.approx(24 / 31)
    assert m1["mean_active_seconds"]["value"] == 20.0 and m1["median_active_seconds"] == 20.0
    # The CI resamples the kind's answered units (e1, e2; m1's answers are all on e1), as
    # metrics.bootstrap_ci over those two units does; a resample without e1 holds none of
    # m1's answers: its F1 is undefined and dropped (not 0.0, which pulled the bound to 0).
    # Per unit: kept, deleted, added, and whether it is one of m1's units.
    units = np.array([[12.0, 2.0, 5.0, 1.0], [0.0, 0.0, 0.0, 0.0]])

    def micro_f1(draws):
        kept, deleted, added, mine = (draws[..., i].sum(axis=1) for i in range(4))
        den = 2 * kept + deleted + added
        return np.where(mine > 0, 2 * kept / np.where(den > 0, den, 1), np.nan)

    expected = metrics.bootstrap_ci(units, micro_f1, n_resamples=50, seed=0, vectorized=True)
    assert m1["f1"]["ci"] == pytest.approx(list(expected)) == [24 / 31, 24 / 31]
    # (1/2)^2 = a quarter of the 50 resamples draw e2 twice; the rest rest the interval.
    drawn = np.random.default_rng(0).integers(0, 2, size=(50, 2))
    assert m1["f1"]["n_resamples"] == int((drawn == 0).any(axis=1).sum())
    estimate = m1["edit_f1_estimate"]
    # ava's match answer on D1: EM 1 ("Rest today."), EA 1; the leftover
    # " Drink water. Call if worse." is two sentences: ED 2.
    # P = 1/3, R = 1/2, F1 = 2 / (2 + 2 + 1) = 0.4.
    assert (estimate["em"], estimate["ea"], estimate["ed"]) == (1, 1, 2)
    assert (estimate["n_pairs"], estimate["n_units"], estimate["n_drafts"]) == (1, 1, 1)
    assert estimate["precision"]["value"] == pytest.approx(1 / 3)
    assert estimate["f1"]["value"] == pytest.approx(0.4)
    # m2's draft was never judged in a match unit: no estimate.
    assert rows["m2"]["edit_f1_estimate"] is None
    assert rows["m2"]["f1"]["value"] == pytest.approx(0.8)  # 8 / (8 + 1 + 1)


def test_no_edited_draft_gives_the_empty_table(tmp_path):
    st = new_study(tmp_path)
    st.person("ava")
    st.case("c1", "Hello?")
    st.unit("u1", "respond", "c1", who=["ava"])
    st.answer("u1", "ava", {"mode": "theme_guided", "parts": {"empathy": "I hear you."}})
    result = respond.analyse(st.frames(), n_resamples=0)
    assert result["editing_load"] == {
        "n_answers": 0,
        "pooled": None,
        "by_annotator": [],
        "by_source": [],
        "answers": [],
    }
    st.project.close()
