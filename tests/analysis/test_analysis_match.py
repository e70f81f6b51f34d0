"""Drafting tables (seed 000) from match answers, on a study small enough to count by hand."""

from __future__ import annotations

import pytest
from analysis_builders import new_study, span_of

from portalreview import metrics
from portalreview.analysis import match

DRAFT = (
    "Chest pain can have many causes. Please go to the emergency room now. "
    "Call 911 if it gets worse."
)
REFERENCE = "I am sorry to hear that. Please go to the emergency room now. Do not drive yourself."
DRAFT_2 = "I am sorry you are in pain. Please go to the emergency room right away."
OTHER_CLINICIAN = "Please go to the ER now. I will call you later."


def _decisions(ref_ids, spans):
    return [
        {"sentence_id": s, "spans": [x] if x else []} for s, x in zip(ref_ids, spans, strict=True)
    ]


def _themes(ids, labels):
    return [{"sentence_id": s, "theme": t} for s, t in zip(ids, labels, strict=True)]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("match"))
    for name in ("ava", "ben"):
        st.person(name)
    st.person("judge", model=True)
    st.case("c1", "I have had crushing chest pain since this morning. Should I come in?")
    st.response("ref", "c1", REFERENCE, "clinician", "ava")
    st.response("d1", "c1", DRAFT, "model", "m1")
    st.response("d2", "c1", DRAFT_2, "model", "m2")
    st.response("d3", "c1", "", "model", "m3")  # an empty draft
    st.response("ben_ref", "c1", OTHER_CLINICIAN, "clinician", "ben")
    r = [s.id for s in st.sentences("ref")]
    d1 = [s.id for s in st.sentences("d1")]
    d2 = [s.id for s in st.sentences("d2")]
    b = [s.id for s in st.sentences("ben_ref")]
    both = ["ava", "ben", "judge"]
    st.unit(
        "m1",
        "match",
        "c1",
        who=both,
        response_id=st.responses["ref"],
        response_b_id=st.responses["d1"],
    )
    st.unit(
        "m2",
        "match",
        "c1",
        who=["ava", "ben"],
        response_id=st.responses["ref"],
        response_b_id=st.responses["d2"],
    )
    st.unit(
        "m3",
        "match",
        "c1",
        who=["ben"],
        response_id=st.responses["ref"],
        response_b_id=st.responses["d3"],
    )
    st.unit(
        "iap1",
        "match",
        "c1",
        who=["ava"],
        response_id=st.responses["ref"],
        response_b_id=st.responses["ben_ref"],
    )
    st.unit(
        "iap2",
        "match",
        "c1",
        who=["ava"],
        response_id=st.responses["ben_ref"],
        response_b_id=st.responses["ref"],
    )
    full_d1 = span_of(DRAFT, "Please go to the emergency room now.")
    # ava on m1: R0 NO MATCH, R1 = the whole of D1, R2 NO MATCH.
    st.answer(
        "m1",
        "ava",
        {
            "decisions": _decisions(r, [None, full_d1, None]),
            "themes": _themes(
                r + d1,
                ["empathy", "planning", "logistics", "assessment", "planning", "contingency"],
            ),
        },
    )
    # ben on m1: R1 = a narrower piece of D1, R2 = all of D2 (a wrong match, but allowed).
    st.answer(
        "m1",
        "ben",
        {
            "decisions": _decisions(
                r,
                [
                    None,
                    span_of(DRAFT, "go to the emergency room now."),
                    span_of(DRAFT, "Call 911 if it gets worse."),
                ],
            ),
            "themes": _themes(
                r + d1, ["empathy", "planning", "other", "other", "planning", "contingency"]
            ),
        },
    )
    # The model judge agrees with ava exactly.
    st.answer(
        "m1",
        "judge",
        {
            "decisions": _decisions(r, [None, full_d1, None]),
            "themes": _themes(
                r + d1,
                ["empathy", "planning", "logistics", "assessment", "planning", "contingency"],
            ),
        },
    )
    # m2: ava only (ben assigned but never answered); both draft sentences matched.
    st.answer(
        "m2",
        "ava",
        {
            "decisions": _decisions(
                r,
                [
                    span_of(DRAFT_2, "I am sorry you are in pain."),
                    span_of(DRAFT_2, "Please go to the emergency room right away."),
                    None,
                ],
            ),
            "themes": _themes(r + d2, ["empathy", "planning", "logistics", "empathy", "planning"]),
        },
    )
    # m3: the empty draft, ben only: nothing can match.
    st.answer(
        "m3",
        "ben",
        {
            "decisions": _decisions(r, [None, None, None]),
            "themes": _themes(r, ["empathy", "planning", "logistics"]),
        },
    )
    # IAP: ava's reference against ben's response, and the other way round.
    st.answer(
        "iap1",
        "ava",
        {
            "decisions": _decisions(
                r, [None, span_of(OTHER_CLINICIAN, "Please go to the ER now."), None]
            ),
            "themes": _themes(
                r + b, ["empathy", "planning", "logistics", "planning", "coordination"]
            ),
        },
    )
    st.answer(
        "iap2",
        "ava",
        {
            "decisions": _decisions(
                b, [span_of(REFERENCE, "Please go to the emergency room now."), None]
            ),
            "themes": _themes(
                b + r, ["planning", "coordination", "empathy", "planning", "logistics"]
            ),
        },
    )
    frames = st.frames()
    yield st, frames, match.analyse(frames, n_resamples=0)
    st.project.close()


def _source(result, name):
    (entry,) = [e for e in result["by_source"] if e["source"] == name]
    return entry


def test_pairs_follow_algorithm_1(study):
    _, _, result = study
    pairs = {(p["unit_id"], p["annotator"]): p for p in result["pairs"]}
    st = study[0]
    # ava on m1: EM 1, EA 2; the leftover draft holds D0 and D2 -> ED 2.
    # P = 1/3, R = 1/3, F1 = 2*1 / (2*1 + 2 + 2) = 1/3.
    ava = pairs[(st.units["m1"], "ava")]
    assert (ava["em"], ava["ea"], ava["ed"]) == (1, 2, 2)
    assert ava["f1"] == pytest.approx(1 / 3)
    # ben on m1: EM 2, EA 1; the leftover "Chest pain can have many causes. Please" is two
    # sentences -> ED 2. P = 2/4, R = 2/3, F1 = 4 / (4 + 2 + 1) = 4/7.
    ben = pairs[(st.units["m1"], "ben")]
    assert (ben["em"], ben["ea"], ben["ed"]) == (2, 1, 2)
    assert (ben["precision"], ben["recall"], ben["f1"]) == pytest.approx((0.5, 2 / 3, 4 / 7))
    # ava on m2: both draft sentences removed -> ED 0; P = 1, R = 2/3, F1 = 4/5.
    m2 = pairs[(st.units["m2"], "ava")]
    assert (m2["em"], m2["ea"], m2["ed"], m2["f1"]) == (2, 1, 0, pytest.approx(0.8))
    # ben on the empty draft: EM 0, EA 3, ED 0; every score 0 (scikit-learn's convention).
    m3 = pairs[(st.units["m3"], "ben")]
    assert (m3["em"], m3["ea"], m3["ed"], m3["f1"]) == (0, 3, 0, 0.0)
    # The model's answer is no pair of the tables.
    assert all(p["annotator"] != "judge" for p in result["pairs"])


def test_pairs_match_metrics_content_edit_f1(study):
    st, _, result = study
    pairs = {(p["unit_id"], p["annotator"]): p for p in result["pairs"]}
    for name in ("ava", "ben"):
        answer = st.svc.get_answer(st.units["m1"], st.people[name])
        decisions = [d["spans"] or None for d in answer.payload["decisions"]]
        expected = metrics.content_edit_f1(DRAFT, decisions)
        got = pairs[(st.units["m1"], name)]
        assert (got["em"], got["ea"], got["ed"]) == (expected.em, expected.ea, expected.ed)


def test_micro_content_edit_f1_per_source(study):
    _, _, result = study
    m1 = _source(result, "m1")
    # EM 1 + 2, EA 2 + 1, ED 2 + 2: P = 3/7, R = 3/6, F1 = 6 / (6 + 4 + 3) = 6/13.
    assert (m1["content"]["em"], m1["content"]["ea"], m1["content"]["ed"]) == (3, 3, 4)
    assert m1["content"]["precision"]["value"] == pytest.approx(3 / 7)
    assert m1["content"]["recall"]["value"] == pytest.approx(0.5)
    assert m1["content"]["f1"]["value"] == pytest.approx(6 / 13)
    assert (m1["n_units"], m1["n_pairs"], m1["n_annotators"]) == (1, 2, 2)
    assert m1["content"]["f1"]["ci"] is None  # n_resamples=0
    m3 = _source(result, "m3")
    assert m3["content"]["f1"]["value"] == 0.0 and m3["n_pairs"] == 1


def test_theme_level_edit_f1(study):
    _, _, result = study
    m1 = _source(result, "m1")
    # ava: reference {empathy, planning, logistics} vs draft {assessment, planning,
    # contingency}: TP 1, FP 2, FN 2. ben without Other: {empathy, planning} vs {planning,
    # contingency}: TP 1, FP 1, FN 1. Micro: TP 2, FP 3, FN 3 -> F1 = 4 / 10.
    theme = m1["theme"]
    assert (theme["tp"], theme["fp"], theme["fn"]) == (2, 3, 3)
    assert theme["f1"]["value"] == pytest.approx(0.4)
    # With Other, ben has it on both sides: TP 3, FP 3, FN 3 -> F1 = 6 / 12.
    with_other = m1["theme_with_other"]
    assert (with_other["tp"], with_other["fp"], with_other["fn"]) == (3, 3, 3)
    assert with_other["f1"]["value"] == pytest.approx(0.5)
    expected = metrics.theme_edit_f1(
        [["empathy", "planning", "logistics"], ["empathy", "planning", "other"]],
        [["assessment", "planning", "contingency"], ["other", "planning", "contingency"]],
        other_label="other",
    )
    assert theme["f1"]["value"] == pytest.approx(expected.f1)


def test_per_theme_tables(study):
    _, _, result = study
    m1 = _source(result, "m1")
    per = {row["theme"]: row for row in m1["per_theme"]}
    assert (per["planning"]["tp"], per["planning"]["f1"]) == (2, 1.0)
    assert (per["empathy"]["fn"], per["empathy"]["f1"]) == (2, 0.0)
    assert (per["contingency"]["fp"], per["other"]["tp"]) == (2, 1)
    assert per["symptom_questions"]["support"] == 0
    recall = {row["theme"]: row for row in m1["per_theme_content_recall"]}
    # Reference sentences by theme (same annotator's label) and whether they were matched:
    # empathy 0 of 2, planning 2 of 2, logistics 0 of 1 (ava), other 1 of 1 (ben's R2).
    assert (recall["empathy"]["n_sentences"], recall["empathy"]["recall"]) == (2, 0.0)
    assert (recall["planning"]["n_matched"], recall["planning"]["recall"]) == (2, 1.0)
    assert recall["other"]["recall"] == 1.0
    assert recall["assessment"]["recall"] is None  # no reference sentence of that theme
    expected = metrics.per_theme_content_recall(
        [["empathy", "planning", "logistics"], ["empathy", "planning", "other"]],
        [[None, (0, 1), None], [None, (0, 1), (2, 3)]],
        include_other=True,
    )
    assert recall["planning"]["recall"] == expected.loc["planning", "recall"]


def test_iap_over_ordered_clinician_pairs(study):
    _, _, result = study
    iap = result["iap"]
    pairs = {(p["reference_author"], p["draft_author"]): p for p in iap["ordered_pairs"]}
    assert set(pairs) == {("ava", "ben"), ("ben", "ava")}
    # ava -> ben: EM 1, EA 2, leftover "I will call you later." -> ED 1: F1 = 2/5.
    assert pairs[("ava", "ben")]["content"]["f1"]["value"] == pytest.approx(0.4)
    # ben -> ava: EM 1, EA 1, ED 2 (R0 and R2 left): F1 = 2 / (2 + 2 + 1) = 2/5.
    assert pairs[("ben", "ava")]["content"]["f1"]["value"] == pytest.approx(0.4)
    # Themes ava -> ben: {e, p, l} vs {p, coordination}: TP 1, FP 1, FN 2 -> 2/5.
    assert pairs[("ava", "ben")]["theme"]["f1"]["value"] == pytest.approx(0.4)
    assert iap["average"]["content_f1"]["value"] == pytest.approx(0.4)
    assert iap["pooled"]["content"]["em"] == 2 and iap["pooled"]["content"]["ed"] == 3
    # IAP units are not drafts of any source.
    assert {e["source"] for e in result["by_source"]} == {"m1", "m2", "m3"}


def test_judge_agreement_between_people_and_model(study):
    _, _, result = study
    rows = {(r["reference_annotator"], r["judged_annotator"]): r for r in result["judge_agreement"]}
    ab = rows[("ava", "ben")]
    # Three reference sentences: R0 both NO MATCH, R1 both match (overlapping, not equal),
    # R2 ava NO MATCH / ben match. Agreement 2/3; ava's NO MATCH R0, R2: ben agrees on 1 of
    # 2; ava's one match R1: exact 0/1, overlap 1/1.
    assert ab["agreement"]["value"] == pytest.approx(2 / 3)
    assert ab["non_match_agreement"]["value"] == pytest.approx(0.5)
    assert (ab["match_agreement"]["value"], ab["match_overlap"]["value"]) == (0.0, 1.0)
    ba = rows[("ben", "ava")]
    # ben's matches R1, R2: ava exact on neither, overlapping on R1 only.
    assert (ba["match_agreement"]["value"], ba["match_overlap"]["value"]) == (0.0, 0.5)
    assert ba["non_match_agreement"]["value"] == 1.0
    judge = rows[("ava", "judge")]
    assert judge["judged_is_model"] and judge["agreement"]["value"] == 1.0
    assert judge["match_agreement"]["value"] == 1.0
    expected = metrics.judge_agreement([None, [(33, 69)], None], [None, [(40, 69)], [(70, 96)]])
    assert ab["match_overlap"]["value"] == expected.match_overlap
    assert ab["agreement"]["value"] == pytest.approx(expected.agreement)


def test_leftover_text_equals_metrics():
    for spans in [(), ((0, 5),), ((0, 5), (3, 9)), ((2, 4), (4, 6)), ((10, 20), (30, 40))]:
        assert match.leftover_text(DRAFT, spans) == metrics.unmatched_draft_text(DRAFT, list(spans))


def test_judge_agreement_leaves_the_pis_gold_answers_out(tmp_path):
    """The PI answers one unit as Ava does and adjudicates another against her: only the
    ordinary answers are the PI's judgement (docs/report.md), so the two agree fully."""
    draft = "Chest pain has many causes. Please go to the emergency room now. Call 911 if worse."
    ref = "I am sorry to hear that. Please go to the emergency room now. Do not drive yourself."
    st = new_study(tmp_path)
    st.person("ava")
    st.person("pat", role="pi")
    st.case("c1", "chest pain")
    st.response("ref", "c1", ref, "clinician", "ava")
    st.response("d1", "c1", draft, "model", "m1")
    st.response("d2", "c1", draft, "model", "m2")
    r = [s.id for s in st.sentences("ref")]
    pair = {"response_id": st.responses["ref"]}
    st.unit("u1", "match", "c1", who=["ava", "pat"], response_b_id=st.responses["d1"], **pair)
    st.unit("u2", "match", "c1", who=["ava"], response_b_id=st.responses["d2"], **pair)
    full = span_of(draft, "Please go to the emergency room now.")

    def answer(spans, draft_key):
        ids = r + [s.id for s in st.sentences(draft_key)]
        return {"decisions": _decisions(r, spans), "themes": _themes(ids, ["planning"] * len(ids))}

    st.answer("u1", "ava", answer([None, full, None], "d1"))
    st.answer("u1", "pat", answer([None, full, None], "d1"))
    st.answer("u2", "ava", answer([None, full, None], "d2"))
    st.answer("u2", "pat", answer([full, None, full], "d2"), gold=True)
    rows = match.analyse(st.frames(), n_resamples=0)["judge_agreement"]
    assert {
        (x["reference_annotator"], x["n_sentences"], x["agreement"]["value"]) for x in rows
    } == {
        ("ava", 3, 1.0),
        ("pat", 3, 1.0),
    }


def test_a_match_draft_with_no_decision_yet_leaves_judge_agreement_to_the_others(tmp_path):
    from portalreview.reports.json_report import build_report

    st = new_study(tmp_path)
    for name in ("ava", "ben", "cy"):
        st.person(name)
    st.case("c", "Should I come in?")
    st.response("ref", "c", "Please come in today.", "clinician", "ava")
    st.response("draft", "c", "Come in.", "model", "m1")
    pair = {"response_id": st.responses["ref"], "response_b_id": st.responses["draft"]}
    st.unit("m", "match", "c", who=["ava", "ben", "cy"], **pair)
    ref, draft = st.sentences("ref"), st.sentences("draft")
    ids = [s.id for s in (*ref, *draft)]
    answer = {"decisions": _decisions([ref[0].id], [[0, 8]]), "themes": _themes(ids, ["other"] * 2)}
    st.answer("m", "ava", answer)
    st.answer("m", "cy", answer)
    empty = {"decisions": [], "themes": []}  # ben opened the unit and saved nothing yet
    st.svc.save_answer(st.units["m"], empty, status="draft", annotator_id=st.people["ben"])
    report = build_report(st.project, n_resamples=0, include_drafts=True)
    pairs = {
        (r["reference_annotator"], r["judged_annotator"])
        for r in report["match"]["judge_agreement"]
    }
    assert pairs == {("ava", "cy"), ("cy", "ava")}
