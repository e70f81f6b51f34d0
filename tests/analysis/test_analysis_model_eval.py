"""Model quality beside the clinicians (analysis/model_eval.py): a tiny study whose model
pseudo-annotator ("smol") gives answers chosen here, every figure counted by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from analysis_builders import new_study, span_of

from portalreview import metrics
from portalreview.analysis import model_eval
from portalreview.analysis.model_eval import Figure, evaluate, format_figure
from portalreview.store.project import Project
from portalreview.store.service import StudyService

M = "smol"
REFERENCE = "I am sorry to hear that. Please go to the emergency room now. Do not drive yourself."
DRAFT = (
    "Chest pain can have many causes. Please go to the emergency room now. "
    "Call 911 if it gets worse."
)
EPPC_MESSAGE = "I have had chest pain since this morning. Can you call me back today?"
IG, IS = "InfoGive", "InfoSeek"


def _eppc(sentence: str, *labels):
    return {
        "labels": [
            {"code": c, "subcode": sub, "spans": [span_of(sentence, piece)]}
            for c, sub, piece in labels
        ]
    }


def _urgency(st) -> None:
    # inbox "box": A level 1, B 2, C 4, D 6 (relevance 6 - level: 5, 4, 2, 0)
    for key, level in zip("ABCD", (1, 2, 4, 6), strict=True):
        st.case(key, f"Message {key}", level, inbox="box")
    # unit: (a, b) -> the chosen case of smol, ava, ben
    pairs = {
        "u1": ("A", "B", {"smol": "B", "ava": "A", "ben": "B"}),  # hard
        "u2": ("A", "C", {"smol": "A", "ava": "A", "ben": "A"}),  # medium
        "u3": ("B", "D", {"smol": "B", "ava": "B", "ben": "B"}),  # easy
        "u4": ("C", "D", {"smol": "D", "ava": "C", "ben": "C"}),  # medium
    }
    for unit, (a, b, chosen) in pairs.items():
        st.unit(unit, "urgency", a, who=list(chosen), case_b_id=st.cases[b])
        for name, case in chosen.items():
            st.answer(unit, name, {"more_urgent_case_id": st.cases[case]})


def _eppc_units(st) -> None:
    st.case("msg", EPPC_MESSAGE)
    s1, s2 = st.case_sentences("msg")
    st.unit("s1", "eppc", "msg", who=["smol", "ava"], sentence_id=s1.id)
    st.unit("s2", "eppc", "msg", who=["smol"], sentence_id=s2.id)
    t1, t2 = s1.text, s2.text
    st.answer("s1", "pi", _eppc(t1, (IG, "Symptoms", "chest pain")), gold=True)
    st.answer("s2", "pi", _eppc(t2, (IS, "Symptoms", "call me back")), gold=True)
    st.answer("s1", "smol", _eppc(t1, (IG, "Symptoms", "chest pain"), (IS, "Symptoms", "pain")))
    st.answer("s2", "smol", _eppc(t2, (IS, "Drugs", "call me back")))
    st.answer("s1", "ava", _eppc(t1, (IG, "Symptoms", "chest pain")))


def _match(st) -> None:
    st.case("mc", "I have had crushing chest pain since this morning. Should I come in?")
    st.response("ref", "mc", REFERENCE, "clinician", "ava")
    st.response("draft", "mc", DRAFT, "model", "m1")
    ref = [s.id for s in st.sentences("ref")]
    draft = [s.id for s in st.sentences("draft")]
    st.unit(
        "m1",
        "match",
        "mc",
        who=["smol", "ava", "ben"],
        response_id=st.responses["ref"],
        response_b_id=st.responses["draft"],
    )
    spans = {  # per reference sentence: the matched draft piece, None = NO MATCH
        "ava": [None, "Please go to the emergency room now.", None],
        "ben": [None, "go to the emergency room", "Call 911 if it gets worse."],
        "smol": ["Chest pain can have many causes.", "Please go to the emergency room now.", None],
    }
    themes = [{"sentence_id": s, "theme": "other"} for s in ref + draft]
    for name, pieces in spans.items():
        decisions = [
            {"sentence_id": s, "spans": [span_of(DRAFT, p)] if p else []}
            for s, p in zip(ref, pieces, strict=True)
        ]
        st.answer("m1", name, {"decisions": decisions, "themes": themes})


def _rank(st) -> None:
    ranks = {  # case -> annotator -> ranks of the sources s1, s2, s3
        "r1": {"smol": (1, 2, 3), "ava": (1, 2, 3), "ben": (3, 2, 1)},
        "r2": {"smol": (1, 1, 2), "ava": (1, 2, 3), "ben": (1, 2, 3)},
    }
    for case, by_name in ranks.items():
        st.case(case, f"Question {case}")
        ids = [
            st.response(f"{case}-{s}", case, f"Reply {s} to {case}", "model", s)
            for s in ("s1", "s2", "s3")
        ]
        st.unit(case, "rank", case, who=list(by_name), members=ids)
        for name, values in by_name.items():
            entries = [
                {"response_id": r, "rank": v, "correct": True, "criteria": []}
                for r, v in zip(ids, values, strict=True)
            ]
            st.answer(case, name, {"entries": entries})


def _empathy_and_facts(st) -> None:
    verdicts = {  # unit -> annotator -> "o" (original) / "e" (edited) / "=" (equal)
        "e1": {"smol": "e", "ava": "e", "ben": "e"},
        "e2": {"smol": "o", "ava": "o", "ben": "="},
        "e3": {"smol": "=", "ava": "o", "ben": "o"},
    }
    checks = {  # unit -> annotator -> [(side, entailed)]
        "f1": {
            "smol": [("original", True), ("original", False), ("edited", True)],
            "ava": [("original", True), ("original", True), ("edited", True)],
        },
        "f2": {
            "smol": [("original", True), ("edited", False), ("edited", False)],
            "ava": [("original", True), ("edited", True), ("edited", False)],
        },
    }
    for unit, answers in {**verdicts, **checks}.items():
        st.case(unit, "My new inhaler makes my hands shake. Is that normal?")
        o = st.response(f"{unit}-o", unit, "That is a common side effect.", "clinician", "md")
        e = st.response(f"{unit}-e", unit, "I am sorry. That is common.", "model", "edit")
        kind = "empathy" if unit in verdicts else "facts"
        st.unit(unit, kind, unit, who=list(answers), response_id=o, response_b_id=e)
        for name, answer in answers.items():
            if kind == "empathy":
                payload = (
                    {"equal": True}
                    if answer == "="
                    else {"more_empathetic_response_id": o if answer == "o" else e}
                )
            else:
                payload = {
                    "facts": [
                        {"side": side, "text": f"fact {i}", "entailed": ok}
                        for i, (side, ok) in enumerate(answer)
                    ]
                }
            st.answer(unit, name, payload)


def _suggestions(st) -> None:
    """smol's model file made suggestions for u1, u2 (offered; u2's answer started from it), u3
    and s1 (refused); another model's refused one for u1 is not smol's."""

    def add(unit, file, sha, refused=None):
        return st.svc.add_suggestion(
            st.units[unit],
            {"more_urgent_case_id": st.cases["A"]},
            model_file=file,
            model_sha256=sha * 64,
            template_id="t",
            refused_reason=refused,
        )

    linked = add("u2", "SmolLM2-Q4.gguf", "b")  # found through the answer that used it
    st.answer(
        "u2",
        M,
        {"more_urgent_case_id": st.cases["A"]},
        suggestion_id=linked,
        suggestion_use="accepted",
    )
    add("u3", "SmolLM2-Q4.gguf", "b", "echo: the labels")
    add("s1", "smol.gguf", "c", "empty: no label")  # found by its file's name
    add("u1", "smol.gguf", "c")
    add("u1", "other.gguf", "d", "empty: nothing")  # another model's


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    st = new_study(tmp_path_factory.mktemp("model_eval"))
    st.person("ava")
    st.person("ben")
    st.person("pi", role="pi")
    st.person(M, model=True)
    _urgency(st)
    _eppc_units(st)
    _match(st)
    _rank(st)
    _empathy_and_facts(st)
    _suggestions(st)
    frames = st.frames()
    found = model_eval.read_suggestions(st.project)
    yield st, frames, evaluate(frames, n_resamples=200, seed=3, suggestions=found)
    st.project.close()


def _value(result, kind, measure, who, against=""):
    return result.find(M, kind, measure, who, against)


# --- urgency (seed 002) -------------------------------------------------------------------------


def test_urgency_accuracy_by_difficulty(study):
    _, _, result = study
    levels = "reference levels"
    expected = {  # hand-counted: smol wrong on u1 (hard) and u4 (medium)
        M: {"easy": (1.0, 1), "medium": (0.5, 2), "hard": (0.0, 1), "total": (0.5, 4)},
        "ava": {"easy": (1.0, 1), "medium": (1.0, 2), "hard": (1.0, 1), "total": (1.0, 4)},
        "ben": {"easy": (1.0, 1), "medium": (1.0, 2), "hard": (0.0, 1), "total": (0.75, 4)},
    }
    for who, buckets in expected.items():
        for bucket, (value, n) in buckets.items():
            fig = _value(result, "urgency", model_eval.DIFFICULTY[bucket], who, levels)
            assert (fig.value, fig.n) == (pytest.approx(value), n), (who, bucket)


def test_urgency_interval_is_the_bootstrap_over_the_models_pairs(study):
    _, _, result = study
    fig = _value(result, "urgency", model_eval.DIFFICULTY["total"], M, "reference levels")
    hits = np.array([0.0, 1.0, 1.0, 0.0])  # u1..u4, in unit order
    ci = metrics.bootstrap_ci(
        hits, lambda a: a.mean(axis=1), n_resamples=200, seed=3, vectorized=True
    )
    assert fig.ci == pytest.approx(ci)


def _ndcg(relevance: list[int], k: int) -> float:
    ideal = sorted(relevance, reverse=True)

    def dcg(values):
        return sum(v / math.log2(i + 2) for i, v in enumerate(values[:k]))

    return dcg(relevance) / dcg(ideal)


def test_inbox_sorted_by_the_models_answers(study):
    _, _, result = study
    # smol's wins: B beats A, A beats C, B beats D, D beats C -> win rates A .5, B 1, C 0,
    # D .5; sorted B, A, D, C (ties in case order) -> relevance 4, 5, 0, 2
    order = [4, 5, 0, 2]
    ndcg = _ndcg(order, 10)
    t_ndcg = ndcg - _ndcg(order[::-1], 10)
    fig = _value(result, "urgency", "inbox box: NDCG@10 of the sort", M, "reference levels")
    assert fig.value == pytest.approx(ndcg)
    assert fig.n == 4
    assert fig.ci is None and fig.note == model_eval.ONE_JUDGE
    fig = _value(result, "urgency", "inbox box: T-NDCG@10 of the sort", M, "reference levels")
    assert fig.value == pytest.approx(t_ndcg)
    assert ndcg == pytest.approx(0.9404, abs=1e-4) and t_ndcg == pytest.approx(0.2104, abs=1e-4)
    # ava sorts perfectly: A, B, C, D
    fig = _value(result, "urgency", "inbox box: T-NDCG@30 of the sort", "ava", "reference levels")
    assert fig.value == pytest.approx(1.0 - _ndcg([0, 2, 4, 5], 30))


# --- eppc (seed 003) ----------------------------------------------------------------------------


def test_eppc_micro_scores_against_gold(study):
    _, _, result = study
    # codes: s1 {IG, IS} vs {IG}: TP 1 FP 1; s2 {IS} vs {IS}: TP 1 -> P 2/3, R 1, F1 .8
    # pairs: s1 TP 1 FP 1; s2 (IS, Drugs) vs (IS, Symptoms): FP 1 FN 1 -> P 1/3, R 1/2, F1 .4
    expected = {
        "codes: micro precision": 2 / 3,
        "codes: micro recall": 1.0,
        "codes: micro F1": 0.8,
        "code-subcode: micro precision": 1 / 3,
        "code-subcode: micro recall": 0.5,
        "code-subcode: micro F1": 0.4,
    }
    for measure, value in expected.items():
        fig = _value(result, "eppc", measure, M, "gold")
        assert (fig.value, fig.n) == (pytest.approx(value), 2), measure
    ava = _value(result, "eppc", "codes: micro F1", "ava", "gold")
    assert (ava.value, ava.n) == (1.0, 1)  # ava coded s1 only, as the gold does


# --- match (seed 000, Table 8) ------------------------------------------------------------------


def test_content_match_agreement_with_each_clinician(study):
    _, _, result = study
    expected = {
        # (judged, reference): agreement, non-match agreement, match agreement, overlap
        (M, "ava"): (2 / 3, 1 / 2, 1.0, 1.0),
        (M, "ben"): (1 / 3, 0.0, 0.0, 1 / 2),
        ("ben", "ava"): (2 / 3, 1 / 2, 0.0, 1.0),
        ("ava", "ben"): (2 / 3, 1.0, 0.0, 1 / 2),
    }
    for (who, against), values in expected.items():
        for measure, value in zip(model_eval.MATCH_MEASURES.values(), values, strict=True):
            fig = _value(result, "match", measure, who, against)
            assert (fig.value, fig.n) == (pytest.approx(value), 1), (who, against, measure)
    rows = result.rows_of(M, "match")
    assert rows[0].who == M  # the model's own rows come first


# --- rank (seed 001, Table 4) -------------------------------------------------------------------


def test_kendall_tau_against_each_clinician(study):
    _, _, result = study
    tied = 2 / math.sqrt(6)  # (1, 1, 2) vs (1, 2, 3): P 2, Q 0, one tie on the model's side
    measure = "Kendall's tau-b of the rankings"
    assert _value(result, "rank", measure, M, "ava").value == pytest.approx((1 + tied) / 2)
    assert _value(result, "rank", measure, M, "ben").value == pytest.approx((-1 + tied) / 2)
    clinicians = _value(result, "rank", measure, "ava", "ben")
    assert (clinicians.value, clinicians.n) == (pytest.approx(0.0), 2)


# --- empathy and facts (seed 004) ---------------------------------------------------------------


def test_empathy_verdict_agreement(study):
    _, _, result = study
    pa, alpha = "verdict: percent agreement", "verdict: Krippendorff's alpha"
    assert _value(result, "empathy", pa, M, "ava").value == pytest.approx(2 / 3)
    # coincidences: values e e o o = o (6 pairable); D_o = 2/6, D_e = (36 - 4 - 9 - 1)/30
    assert _value(result, "empathy", alpha, M, "ava").value == pytest.approx(
        1 - (2 / 6) / (22 / 30)
    )
    assert _value(result, "empathy", pa, M, "ben").value == pytest.approx(1 / 3)
    assert _value(result, "empathy", pa, "ava", "ben").value == pytest.approx(2 / 3)
    assert _value(result, "empathy", pa, M, "ava").n == 3


def test_fact_recall_and_precision(study):
    _, _, result = study
    expected = {
        # smol: f1 recall 1/2 precision 1/1; f2 recall 1/1 precision 0/2
        M: (2 / 3, 1 / 3, 0.75, 0.5),
        # ava: f1 recall 2/2 precision 1/1; f2 recall 1/1 precision 1/2
        "ava": (1.0, 2 / 3, 1.0, 0.75),
    }
    for who, values in expected.items():
        for measure, value in zip(model_eval.FACT_MEASURES.values(), values, strict=True):
            fig = _value(result, "facts", measure, who)
            assert (fig.value, fig.n) == (pytest.approx(value), 2), (who, measure)


def test_a_facts_check_not_done_yet_takes_no_part(tmp_path):
    """With drafts included, a clinician's facts draft with no fact listed yet is not a pair
    with nothing found: it is left out, as analysis.facts leaves it out (seed 004, eqs. 3-4
    average over the pairs scored)."""
    from portalreview.store.frames import read_frames

    st = new_study(tmp_path)
    st.person("ava")
    st.person(M, model=True)
    st.case("c1", "msg")
    st.response("o0", "c1", "Take 1 pill daily.", "clinician", "ava")
    st.response("e0", "c1", "Sorry. Take 1 pill daily.", "model", "m")
    st.response("o1", "c1", "Rest for a week.", "clinician", "ava")
    st.response("e1", "c1", "Rest.", "model", "m")
    for unit, n in (("f0", 0), ("f1", 1)):
        sides = {"response_id": st.responses[f"o{n}"], "response_b_id": st.responses[f"e{n}"]}
        st.unit(unit, "facts", "c1", who=["ava", M], **sides)
    pill = [{"side": side, "text": "pill", "entailed": True} for side in ("original", "edited")]
    st.answer("f0", "ava", {"facts": pill})
    st.answer("f0", M, {"facts": pill})
    st.answer("f1", M, {"facts": pill})
    st.svc.save_answer(st.units["f1"], {"facts": []}, status="draft", annotator_id=st.people["ava"])
    result = evaluate(read_frames(st.project, include_drafts=True), n_resamples=0)
    for measure in model_eval.FACT_MEASURES.values():
        fig = _value(result, "facts", measure, "ava")
        assert (fig.value, fig.n) == (1.0, 1), measure


# --- suggestions the quality gates refused ------------------------------------------------------


def test_share_of_suggestions_refused(study):
    _, _, result = study
    expected = {"all kinds": (0.5, 4), "urgency": (1 / 3, 3), "eppc": (1.0, 1)}
    for label, (value, n) in expected.items():
        fig = _value(result, "suggestions", f"{model_eval.REFUSED}: {label}", M)
        assert (fig.value, fig.n) == (pytest.approx(value), n), label
    assert len(result.rows_of(M, "suggestions")) == 3
    fig = _value(result, "suggestions", f"{model_eval.REFUSED}: all kinds", M)
    refused = np.array([0.0, 0.0, 1.0, 1.0])  # u1, u2, u3, s1: one suggestion each
    ci = metrics.bootstrap_ci(
        refused, lambda a: a.mean(axis=1), n_resamples=200, seed=3, vectorized=True
    )
    assert fig.ci == pytest.approx(ci)


def test_a_kind_whose_suggestions_were_all_refused_says_so(tmp_path):
    st = new_study(tmp_path)
    st.person("ava")
    st.person(M, model=True)
    st.case("A", "a", 1)
    st.case("B", "b", 3)
    st.unit("u", "urgency", "A", who=["ava", M], case_b_id=st.cases["B"])
    st.answer("u", M, {"more_urgent_case_id": st.cases["A"]})
    st.case("msg", EPPC_MESSAGE)
    (s1, _) = st.case_sentences("msg")
    st.unit("s1", "eppc", "msg", who=[M], sentence_id=s1.id)
    st.svc.add_suggestion(
        st.units["s1"],
        {"labels": []},
        model_file=f"{M}.gguf",
        model_sha256="e" * 64,
        template_id="eppc_extract",
        refused_reason="empty: no label",
    )
    found = model_eval.read_suggestions(st.project)
    result = evaluate(st.frames(), n_resamples=0, suggestions=found)
    st.project.close()
    (row,) = result.rows_of(M, "eppc")
    assert format_figure(row.figure) == (
        "n=0 — not enough data (the model coded no sentence; the quality gates refused its "
        "1 suggestion(s))"
    )
    refused = result.find(M, "suggestions", f"{model_eval.REFUSED}: eppc", M)
    assert (refused.value, refused.n) == (1.0, 1)


def test_where_the_models_answers_were_made_is_counted_and_a_mix_is_said(tmp_path, capsys):
    """A pseudo-annotator whose answers came from a GPU run and a CPU run pools answers that
    can differ for that reason alone: the evaluation counts each place, and the CLI says so."""
    from portalreview.cli import main

    st = new_study(tmp_path)
    st.person("ava")
    st.person(M, model=True)
    st.case("A", "a", 1)
    st.case("B", "b", 3)
    gpu = {"device": "GPU (CUDA)", "gpu_layers": 30, "n_layers": 30, "build": "b9"}
    cpu = {"device": "CPU", "gpu_layers": 0, "n_threads": 8, "build": "b9"}
    for unit, runtime in [("u1", gpu), ("u2", cpu), ("u3", cpu), ("u4", None)]:
        st.unit(unit, "urgency", "A", who=["ava", M], case_b_id=st.cases["B"])
        made = st.svc.add_suggestion(
            st.units[unit],
            {"more_urgent_case_id": st.cases["A"]},
            model_file="smol.gguf",
            model_sha256="a" * 64,
            template_id="t",
            params={"runtime": runtime} if runtime else {},
        )
        st.answer(
            unit,
            M,
            {"more_urgent_case_id": st.cases["A"]},
            suggestion_id=made,
            suggestion_use="accepted",
        )
    found = model_eval.read_suggestions(st.project)
    result = evaluate(st.frames(), n_resamples=0, suggestions=found)
    path = str(st.project.path)
    st.project.close()
    assert result.ran_on[M] == {
        "CPU, 8 threads; b9": 2,
        "GPU (CUDA), 30 of 30 layers; b9": 1,
        "not recorded (a suggestion stored before this was recorded)": 1,
    }
    assert main(["evaluate-model", path, "--resamples", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "Ran on: CPU, 8 threads; b9 (2 answers)" in lines
    assert "Ran on: GPU (CUDA), 30 of 30 layers; b9 (1 answer)" in lines
    assert any(x.startswith("Note: these answers were made on different hardware") for x in lines)


def test_one_place_is_said_without_a_warning(study, capsys):
    from portalreview.cli import main

    st, _, result = study
    assert result.ran_on[M] == {"not recorded (a suggestion stored before this was recorded)": 1}
    assert main(["evaluate-model", str(st.project.path), "--resamples", "0"]) == 0
    out = capsys.readouterr().out
    assert "Ran on: not recorded" in out and "Note: these answers" not in out


def test_no_suggestions_read_says_so(study):
    _, frames, _ = study
    (row,) = evaluate(frames, n_resamples=0, kinds=()).rows_of(M, "suggestions")
    assert row.figure.n == 0 and row.figure.note == "the study's suggestions were not read"


# --- no data, bad input, printing ---------------------------------------------------------------


def test_a_model_without_answers_of_a_kind_says_not_enough_data(tmp_path):
    st = new_study(tmp_path)
    st.person("ava")
    st.person(M, model=True)
    st.case("A", "a", 1)
    st.case("B", "b", 3)
    st.unit("u", "urgency", "A", who=["ava", M], case_b_id=st.cases["B"])
    st.answer("u", M, {"more_urgent_case_id": st.cases["A"]})
    result = evaluate(st.frames(), n_resamples=50)
    st.project.close()
    (row,) = result.rows_of(M, "eppc")
    assert row.figure.value is None and row.figure.n == 0
    assert format_figure(row.figure) == "n=0 — not enough data (the model coded no sentence)"
    total = result.find(M, "urgency", model_eval.DIFFICULTY["total"], M, "reference levels")
    assert (total.value, total.n) == (1.0, 1)


def test_an_unknown_model_name_is_refused(study):
    _, frames, _ = study
    with pytest.raises(ValueError, match="no answers of a model pseudo-annotator named gpt"):
        evaluate(frames, models=["gpt"])


def test_an_undefined_statistic_says_so(tmp_path):
    st = new_study(tmp_path)
    st.person("ava")
    st.person(M, model=True)
    st.case("e", "My hands shake.")
    o = st.response("o", "e", "That is common.", "clinician", "md")
    e = st.response("x", "e", "I am sorry. That is common.", "model", "edit")
    st.unit("e", "empathy", "e", who=["ava", M], response_id=o, response_b_id=e)
    for name in ("ava", M):  # both: the edit; one unit, one value: alpha is undefined
        st.answer("e", name, {"more_empathetic_response_id": e})
    result = evaluate(st.frames(), n_resamples=20)
    st.project.close()
    agree = result.find(M, "empathy", "verdict: percent agreement", M, "ava")
    alpha = result.find(M, "empathy", "verdict: Krippendorff's alpha", M, "ava")
    assert (agree.value, agree.n) == (1.0, 1)
    assert format_figure(alpha) == "n=1 — not enough data (undefined on these units)"
    assert format_figure(Figure.of(None)) == "n=0 — not enough data"


def test_format_figure():
    assert format_figure(Figure(0.5, (0.25, 0.75), 4)) == "0.500 [0.250, 0.750] n=4"
    assert format_figure(Figure(1.0, None, 1, "x")) == "1.000 [no interval] n=1"


def test_units_to_run_prefers_gold_then_answered_units(study):
    st, frames, _ = study
    units = [st.units["s2"], st.units["s1"]]
    # both have gold; s1 has a clinician's answer, s2 none
    assert model_eval.units_to_run(frames, "eppc", units, 1) == [st.units["s1"]]
    with pytest.raises(ValueError, match="positive"):
        model_eval.units_to_run(frames, "eppc", units, 0)


# --- the command line -------------------------------------------------------------------------


def test_cli_prints_every_measure_with_interval_and_n(study, capsys):
    from portalreview.cli import main

    st, _, _ = study
    assert main(["evaluate-model", str(st.project.path), "--resamples", "200", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "== smol (model) beside the clinicians, on the units smol answered ==" in lines
    accuracy = [x for x in lines if x.strip().startswith("pair accuracy, all pairs")]
    low, high = _value(
        study[2], "urgency", model_eval.DIFFICULTY["total"], M, "reference levels"
    ).ci
    assert accuracy[0].endswith(f"0.500 [{low:.3f}, {high:.3f}] n=4")
    assert "smol *" in accuracy[0]
    tau = next(x for x in lines if "Kendall" in x and "smol" in x and " ava " in x)
    assert tau.split("n=")[-1] == "2"
    ndcg = next(x for x in lines if "NDCG@10 of the sort" in x and "smol" in x)
    assert ndcg.endswith("0.940 [no interval] n=4")
    for kind in ("urgency", "eppc", "match", "rank", "empathy", "facts"):
        assert any(x.startswith(f"{kind} (seed") for x in lines), kind
    # every figure line ends with its n
    figures = [x for x in lines if x.startswith("  ") and "measure" not in x]
    assert figures and all(" n=" in x for x in figures)


def test_cli_refuses_bad_input_and_says_when_there_is_no_model(study, tmp_path, capsys):
    from portalreview.cli import main

    st, _, _ = study
    path = str(st.project.path)
    assert main(["evaluate-model", path, "--as-annotator", "gpt"]) == 2
    assert "no answers of a model pseudo-annotator named gpt" in capsys.readouterr().err
    assert main(["evaluate-model", path, "--limit", "3"]) == 2
    assert "--limit needs --model" in capsys.readouterr().err
    with pytest.raises(SystemExit) as refused:  # (by the option's own check)
        main(["evaluate-model", path, "--model", "x.gguf", "--limit", "0"])
    assert refused.value.code == 2
    assert "argument --limit: must be 1 or more, not 0" in capsys.readouterr().err
    empty = new_study(tmp_path)
    empty.person("ava")
    empty.project.close()
    assert main(["evaluate-model", str(empty.project.path)]) == 0
    assert "No model pseudo-annotator has answers" in capsys.readouterr().out
    # a model that does not load leaves no pseudo-annotator behind (one was made first), and
    # a model server's address is refused as such (it was read as the file "http:/...")
    path = str(empty.project.path)
    assert main(["evaluate-model", path, "--model", str(tmp_path / "none.gguf")]) == 2
    assert "There is no model file" in capsys.readouterr().err
    assert main(["evaluate-model", path, "--model", "http://127.0.0.1:9"]) == 2
    assert "runs a model file (.gguf) here" in capsys.readouterr().err
    with Project.open(path, read_only=True) as project:
        assert [a.name for a in StudyService(project).annotators()] == ["ava"]
