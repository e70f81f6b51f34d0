"""Clinicians' responses (seed 000): theme proportions, theme IAA, TF-IDF cosine between
clinicians, editing load of edited drafts, with single-annotator cases and a tokenless reply."""

from __future__ import annotations

import unicodedata

import pandas as pd
import pytest
from analysis_builders import new_study

from portalreview import metrics
from portalreview.analysis import respond

SORRY = "I am sorry you are in pain."
GO = "Please go to the emergency room now."
BASE = "Please go to the emergency room now. Call 911 if it gets worse."
FINAL = "Please go to the emergency room right now."
# case -> annotator -> boxes (or an edited draft)
ANSWERS = {
    "c1": {
        "ava": {"empathy": SORRY, "planning": GO},
        "ben": {"empathy": SORRY, "assessment": "This could be your heart."},
        "chloe": {"empathy": "I understand.", "planning": GO, "other": "Take care."},
    },
    "c2": {"ava": {"planning": GO}, "ben": "edit"},
    "c3": {"chloe": {"logistics": "Call the front desk to book."}},
    "c4": {"ava": {"empathy": SORRY}, "ben": {"other": "?!"}},
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("respond"))
    for name in ("ava", "ben", "chloe"):
        st.person(name)
    for case, answers in ANSWERS.items():
        st.case(case, "I have chest pain. What should I do?")
        st.response(f"{case}-draft", case, BASE, "model", "m1")
        st.unit(case, "respond", case, who=list(answers))
        for name, boxes in answers.items():
            if boxes == "edit":
                payload = {
                    "mode": "edit_draft",
                    "base_response_id": st.responses[f"{case}-draft"],
                    "final_text": FINAL,
                }
            else:
                payload = {"mode": "theme_guided", "parts": boxes}
            st.answer(case, name, payload, active_seconds=60.0)
    frames = st.frames()
    yield st, frames, respond.analyse(frames, n_resamples=0)
    st.project.close()


def test_theme_proportions(study):
    _, _, result = study
    shares = {row["theme"]: row for row in result["theme_proportions"]}
    # Theme-guided responses: 3 on c1, ava on c2, chloe on c3, 2 on c4 = 7.
    # empathy: c1 x3 + ava on c4 = 4/7; planning: ava, chloe on c1 + ava on c2 = 3/7.
    assert result["n_theme_guided"] == 7 and result["n_edit_draft"] == 1
    assert shares["empathy"]["share"]["value"] == pytest.approx(4 / 7)
    assert shares["planning"]["share"]["value"] == pytest.approx(3 / 7)
    assert shares["other"]["n_responses_including"] == 2
    assert shares["contingency"]["share"]["value"] == 0.0
    # Per annotator: ava has empathy in c1 and c4 of her 3 theme-guided responses.
    assert shares["empathy"]["share_by_annotator"]["ava"] == pytest.approx(2 / 3)
    expected = metrics.theme_proportions(
        [
            ["empathy", "planning"],
            ["empathy", "assessment"],
            ["empathy", "planning", "other"],
            ["planning"],
            ["logistics"],
            ["empathy"],
            ["other"],
        ],
        themes=[row["theme"] for row in result["theme_proportions"]],
    )
    assert shares["planning"]["share"]["value"] == pytest.approx(expected["planning"])


def test_theme_iaa_strict_measures_and_alpha(study):
    _, _, result = study
    iaa = result["theme_agreement"]
    # Cases with 2+ theme-guided responses: c1 (3) and c4 (2). c2 has one theme-guided
    # response and one edited draft; c3 one response.
    assert (iaa["n_units"], iaa["n_responses"]) == (2, 5)
    per = {row["theme"]: row for row in iaa["per_theme"]}
    # empathy: all include on c1, not all on c4 -> inclusion 1/2; exclusion 0.
    assert per["empathy"]["strict_inclusion"]["value"] == 0.5
    assert per["empathy"]["strict_exclusion"]["value"] == 0.0
    # logistics: nobody on c1 or c4 -> exclusion 1, agreement 1.
    assert per["logistics"]["strict_agreement"]["value"] == 1.0
    sets = [
        [{"empathy", "planning"}, {"empathy", "assessment"}, {"empathy", "planning", "other"}],
        [{"empathy"}, {"other"}],
    ]
    table = metrics.theme_inclusion_agreement(sets, themes=list(per))
    for theme, row in per.items():
        assert row["strict_agreement"]["value"] == pytest.approx(
            table.loc[theme, "strict_agreement"]
        )
    # Alpha on presence of "planning": c1 (1, 0, 1), c4 (0, 0).
    expected = metrics.krippendorff_alpha([[1, 0, 1], [0, 0, None]])
    assert per["planning"]["alpha"]["value"] == pytest.approx(expected)
    assert per["logistics"]["alpha"]["value"] is None  # one value only: undefined


def test_tfidf_cosine_between_clinicians(study):
    st, _, result = study
    sim = result["similarity"]
    order = [t.id for t in st.svc.catalogs.themes]
    texts = {
        (case, name): FINAL if boxes == "edit" else " ".join(boxes[t] for t in order if t in boxes)
        for case, answers in ANSWERS.items()
        for name, boxes in answers.items()
    }
    wide = pd.Series(texts).unstack()
    expected = metrics.rater_cosine_similarity(wide)
    rows = {(r["annotator_a"], r["annotator_b"]): r for r in sim["by_pair"]}
    # "?!" has no token: ben and ava share c1 and c2 only (c4 gives no value).
    assert rows[("ava", "ben")]["n_units"] == 2
    assert rows[("ava", "ben")]["mean_cosine"] == pytest.approx(expected.loc["ava", "ben"])
    assert rows[("ben", "chloe")]["mean_cosine"] == pytest.approx(expected.loc["ben", "chloe"])
    assert sim["n_comparisons"] == 4  # c1: 3 pairs, c2: 1 pair, c4: none


def test_a_reply_typed_with_decomposed_accents_is_the_same_words(tmp_path):
    """The same reply, one copy with its accents as separate code points (NFD, as text pasted
    from a macOS file name gives): TF-IDF cosine 1, as Edit-F1 already counts them."""
    reply = "Your naïve café order: résumé the protégé's routine, then rest."
    st = new_study(tmp_path)
    for name in ("ava", "ben"):
        st.person(name)
    st.case("c1", "I have a cough. What should I do?")
    st.unit("c1", "respond", "c1", who=["ava", "ben"])
    for name, text in (("ava", reply), ("ben", unicodedata.normalize("NFD", reply))):
        st.answer("c1", name, {"mode": "theme_guided", "parts": {"planning": text}})
    similarity = respond.analyse(st.frames(), n_resamples=0)["similarity"]
    st.project.close()
    assert similarity["mean"]["value"] == pytest.approx(1.0)


def test_editing_load_of_edited_drafts(study):
    _, _, result = study
    load = result["editing_load"]["pooled"]
    # Draft: 13 words; final: 8 words; kept "Please go to the emergency room" + "now" = 7:
    # deleted 6, added 1; P = 7/13, R = 7/8, F1 = 14 / 21.
    assert (load["draft_words"], load["final_words"], load["kept"]) == (13, 8, 7)
    assert (load["deleted"], load["added"]) == (6, 1)
    assert load["f1"]["value"] == pytest.approx(2 / 3)
    assert load["precision"]["value"] == pytest.approx(metrics.editing_load(BASE, FINAL).precision)
    assert load["mean_active_seconds"]["value"] == 60.0
    assert result["editing_load"]["by_annotator"][0]["annotator"] == "ben"
    modes = {row["mode"]: row for row in result["time_on_task"]}
    assert modes["theme_guided"]["n_answers"] == 7 and modes["edit_draft"]["mean_seconds"] == 60
