"""Quality gates (``portalreview.llm.gates``): each gate refuses hand-made degenerate payloads
and passes ordinary ones, refuses what SmolLM2-135M-Instruct (Q4_1) actually answered on the
demo study, and never refuses a clinician's answer of the demo study. A refused suggestion is
stored with its reason, never offered to a clinician, never a model annotator's answer, and
counted by ``run_batch`` and ``portalreview suggest``."""

from __future__ import annotations

import json
import re

import pytest
from llm_testkit import PARAMS, SMALL_LIMITS, engine  # noqa: F401 - fixture

from portalreview.domain.catalogs import DEFAULT_CATALOGS as CATALOGS
from portalreview.llm import gates
from portalreview.llm import suggest as sg
from portalreview.llm.gates import UnitTexts, check, coverage, text_loop
from portalreview.resources import resource
from portalreview.store.models import Suggestion
from portalreview.store.service import StoreError
from portalreview.store.templates import (
    latest_suggestion,
    refused_suggestions,
    suggestion_counts,
)


def template(name: str) -> str:
    return resource("prompts", f"{name}.txt").read_text(encoding="utf-8")


RESPOND = template("respond_boxes")
FACTS = template("fact_decompose")
NO_TEXTS = UnitTexts()


def respond(parts: dict, notes: str = "") -> str | None:
    payload = {"mode": "theme_guided", "parts": parts, "notes": notes}
    return check("respond", payload, NO_TEXTS, CATALOGS, RESPOND)


# --- helpers, by hand ----------------------------------------------------------------------------


def test_coverage_counts_non_blank_characters_once():
    text = "ab cd"  # four non-blank characters
    assert coverage([[0, 2]], text) == 0.5
    assert coverage([[0, 3], [1, 2]], text) == 0.5  # the blank and the overlap count nothing
    assert coverage([[0, 5]], text) == 1.0
    assert coverage([], text) == 0.0 and coverage([[0, 1]], "   ") == 0.0


def test_text_loops_and_ordinary_repetition():
    assert "repeated" in text_loop("I am sorry I am sorry I am sorry to hear that")
    assert "repeated" in text_loop("call call call call call call us")
    assert "repeated" in text_loop("Please!!!!!!!!!!")
    assert "written 2 times" in text_loop("Call us today. Rest well. Call us today.")
    for fine in (
        "I am very very sorry.",
        "Please go to the ER now. Do not drive yourself.",
        "Thanks. Thanks.",  # a sentence of fewer than three words may come twice
        "Take 1 tablet, 2 times a day, for 10 days.",
    ):
        assert text_loop(fine) is None, fine


def test_categories_are_read_back_from_reasons():
    assert gates.category("echo: 3 of 4 boxes ...") == "echo"
    assert gates.category("same text: the same draft span") == "same text"
    assert gates.category("whatever") == "other"


# --- respond -------------------------------------------------------------------------------------


def test_respond_refuses_empty_echoes_copies_and_loops():
    assert respond({}) == "empty: every box is empty"
    assert respond({"empathy": "  ", "planning": ""}).startswith("empty")
    assert respond({"empathy": "Empathetic communication"}).startswith("echo: 1 of 1")
    assert respond({"planning": "Plan."}).startswith("echo")  # the theme's short name
    assert respond({"empathy": "I am sorry.", "logistics": "Logistics"}).startswith("echo: 1 of 2")
    assert respond({"empathy": "YES"}).startswith("echo")
    assert respond({"other": "JSON:"}).startswith("echo")
    assert respond({"empathy": "Acknowledging the problem, praising their effort"}).startswith(
        "echo"
    )  # a run of words of the theme's definition
    copied = "leave the other boxes empty"  # from the template's instruction line
    assert respond({"empathy": copied}).startswith("echo")
    assert respond({}, notes="Record any assumptions you made about the case").startswith("echo")
    same = respond({"empathy": "We will call you.", "coordination": "we will call you"})
    assert same.startswith("same text: the same text in every box")
    three = {"empathy": "I am sorry.", "planning": "Rest.", "contingency": "Rest!"}
    assert respond(three).startswith("same text: the same text in 2 of 3 boxes: 'rest'")
    assert respond({**three, "logistics": "Book a visit."}) is None  # two of four
    loop = respond({"empathy": "I am so sorry. " * 4})
    assert loop.startswith("text loop: in the empathy box")


def test_respond_passes_what_a_clinician_writes():
    parts = {
        "empathy": "Thank you for letting me know, and I am sorry you are in pain.",
        "planning": "Please go to the emergency room now. Do not drive yourself.",
        "contingency": "Call 911 if the pain gets worse.",
    }
    assert respond(parts) is None
    assert respond({"empathy": "Thank you!"}) is None
    assert respond({}, notes="Assumed no prior cardiac history.") is None
    edit = {"mode": "edit_draft", "base_response_id": 3, "final_text": "Please come in today."}
    assert check("respond", edit, NO_TEXTS, CATALOGS, RESPOND) is None


# --- match ---------------------------------------------------------------------------------------

DRAFT = "I am sorry. Please go to the ER now. Call 911 if it gets worse."  # 3 sentences


def match(spans: list[list[list[int]]], themes: list[str] = (), draft: str = DRAFT) -> str | None:
    payload = {
        "decisions": [{"sentence_id": i, "spans": s} for i, s in enumerate(spans)],
        "themes": [{"sentence_id": i, "theme": t} for i, t in enumerate(themes)],
    }
    return check("match", payload, UnitTexts(responses={"Draft": draft}), CATALOGS, "")


def test_match_refuses_spans_over_the_whole_draft_for_most_sentences():
    whole = [[0, len(DRAFT)]]
    nearly = [[0, 58]]  # all but "orse.": 44 of 49 non-blank characters, 89.8 %
    assert coverage(nearly, DRAFT) < gates.WHOLE_SHARE <= coverage([[0, 62]], DRAFT)
    assert match([whole, [[0, 62]], []]).startswith("whole text: the spans of 2 of 3")
    assert match([whole, nearly, []]) is None  # one whole span of three
    assert match([whole, [], [], [[12, 36]]]) is None
    one_sentence = "Please go to the ER now."
    assert match([[[0, 24]], [[0, 24]]], draft=one_sentence) is None  # nothing else to copy


def test_match_refuses_one_span_shared_by_most_sentences():
    a, b, c = [[0, 11]], [[12, 36]], [[37, 63]]
    assert match([a, a, a]).startswith("same text: the same draft span for every sentence")
    assert match([a, a, b, b, c]).startswith("same text: 4 of 5 sentences share")
    assert match([a, a, b, c]) is None  # two of four
    assert match([a, a]) is None  # two sentences may say what one draft sentence says
    assert match([a, b, c]) is None and match([a, [], []]) is None
    assert match([]) == "empty: no decision for any sentence"


def test_match_refuses_one_theme_for_every_sentence():
    spans = [[[0, 11]], [[12, 36]], []]
    assert match(spans, ["empathy"] * 6).startswith("same text: the theme empathy for all 6")
    assert match(spans, ["empathy"] * 5) is None
    assert match(spans, ["empathy"] * 5 + ["planning"]) is None


# --- eppc ----------------------------------------------------------------------------------------

SENTENCE = "I started the iron pills two weeks ago and I have been constipated."


def eppc(*spans: list[list[int]]) -> str | None:
    codes = ["InfoGive", "InfoSeek", "Socioemotional/Empathy", "PartnershipPatient"]
    labels = [{"code": c, "subcode": "x", "spans": s} for c, s in zip(codes, spans, strict=False)]
    return check("eppc", {"labels": labels}, UnitTexts(sentence=SENTENCE), CATALOGS, "")


def test_eppc_refuses_the_whole_sentence_or_one_span_for_every_code():
    whole, part, other = [[0, len(SENTENCE)]], [[0, 18]], [[44, 67]]
    assert eppc(whole, whole, [[1, len(SENTENCE)]]).startswith("whole text: all 3 codes")
    assert eppc(part, part, part).startswith("same text: the same evidence span for every code")
    assert eppc(whole) is None and eppc(whole, whole) is None  # one or two codes may
    assert eppc(part, part) is None and eppc(part, other, part) is None
    assert check("eppc", {"labels": []}, UnitTexts(sentence=SENTENCE), CATALOGS, "") is None


# --- facts ---------------------------------------------------------------------------------------

REPLIES = UnitTexts(
    responses={
        "Original": "Go to the ER now. Call 911 if it gets worse.",
        "Edited": "I am so sorry. Please go to the ER now. Call 911 if it gets worse.",
    }
)


def facts(original: list[str], edited: list[str], texts: UnitTexts = REPLIES) -> str | None:
    rows = [{"side": "original", "text": f, "entailed": True} for f in original]
    rows += [{"side": "edited", "text": f, "entailed": True} for f in edited]
    return check("facts", {"facts": rows}, texts, CATALOGS, FACTS)


def test_facts_refuses_empty_lists_echoes_and_loops():
    good = ["The patient should go to the ER now.", "Call 911 if the pain gets worse."]
    assert facts([], []).startswith("no facts: none listed for the original reply")
    assert facts(good, []).startswith("no facts: none listed for the edited reply, which has 3")
    assert facts(good, good + good[:1]).startswith("text loop: the edited fact")
    assert facts(good, ["Medical planning and instructions"]).startswith("echo")
    assert facts(good, ["a test result, a diagnosis, a medicine"]).startswith("echo")
    assert facts(good, ["Rest rest rest rest rest rest."]).startswith("text loop")


def test_facts_passes_real_facts_and_replies_without_sentences():
    good = ["The patient should go to the ER now.", "Call 911 if the pain gets worse."]
    assert facts(good, good) is None
    short = UnitTexts(responses={"Original": "Thanks!", "Edited": "Many thanks!"})
    assert facts([], [], short) is None  # no sentence of three words: nothing to list
    stated = {"facts": [], "no_facts": True}  # "no medical fact on either side", said outright
    assert check("facts", stated, REPLIES, CATALOGS, FACTS) is None


# --- choices -------------------------------------------------------------------------------------


def test_choice_kinds_are_refused_only_when_empty():
    assert check("rank", {"entries": []}, NO_TEXTS, CATALOGS).startswith("empty")
    assert check("empathy", {}, NO_TEXTS, CATALOGS).startswith("empty")
    assert check("empathy", {"equal": True}, NO_TEXTS, CATALOGS) is None
    assert check("empathy", {"more_empathetic_response_id": 4}, NO_TEXTS, CATALOGS) is None
    assert check("urgency", {"ask_second": False}, NO_TEXTS, CATALOGS).startswith("empty")
    assert check("urgency", {"more_urgent_case_id": 2}, NO_TEXTS, CATALOGS) is None
    with pytest.raises(ValueError, match="no quality gate"):
        check("poetry", {"x": 1}, NO_TEXTS, CATALOGS)


# --- the probabilities behind an urgency answer ---------------------------------------------------


def urgency(p_yes_ab: float, p_yes_ba: float, mass: float = 0.9) -> str | None:
    """The gates' verdict on an urgency answer read from these probabilities."""
    p_a_first = 0.5 * (p_yes_ab + 1 - p_yes_ba)
    observed = {
        "p_yes_ab": p_yes_ab,
        "p_yes_ba": p_yes_ba,
        "p_a_first": p_a_first,
        "yes_no_mass": mass,
        "a": 1,
        "b": 2,
    }
    payload = {"more_urgent_case_id": 1 if p_a_first >= 0.5 else 2, "ask_second": False}
    return check("urgency", payload, NO_TEXTS, CATALOGS, "", observed)


def test_an_urgency_answer_that_contradicts_itself_is_refused():
    # what SmolLM2-135M-Instruct answered on the demo: YES both ways, 15-17 % on YES/NO
    smol = urgency(0.92, 0.90, mass=0.16)
    assert smol.startswith("could not be used: the model answered YES both to 'A before B'")
    assert "coin flip" in smol and "only 16% of the model's next-token probability" in smol
    assert gates.category(smol) == gates.UNUSABLE
    # a strong preference for the patient shown first: YES both ways, far from 0.5 averaged
    biased = urgency(0.99, 0.6)
    assert "answered YES both" in biased and "coin flip" not in biased
    assert "answered NO both" in urgency(0.05, 0.4)


def test_an_urgency_coin_flip_or_an_answer_off_the_format_is_refused():
    near = urgency(0.58, 0.4)  # YES, then NO: consistent, but P(A first) 0.59
    assert near == (
        "could not be used: P(A first) 0.59 is a coin flip (it must be below 0.4 or above 0.6)"
    )
    off_format = urgency(0.95, 0.05, mass=gates.MIN_YES_NO_MASS - 0.01)
    assert off_format == (
        "could not be used: only 49% of the model's next-token probability was on YES or NO "
        "(at least 50% needed)"
    )


def test_a_clear_urgency_answer_is_offered():
    assert urgency(0.9, 0.1) is None
    assert urgency(0.3, 0.9) is None  # B first, both orders agree
    assert urgency(0.75, 0.45, mass=gates.MIN_YES_NO_MASS) is None  # just clear: P 0.65
    # an answer without the numbers (a stored one of another origin) is judged on its payload
    assert check("urgency", {"more_urgent_case_id": 2}, NO_TEXTS, CATALOGS, "", {}) is None


# --- what SmolLM2-135M-Instruct (Q4_1) answered -----------------------------------------------
# Captured from `portalreview demo --create demo.prproj` then `portalreview suggest demo.prproj
# --model SmolLM2-135M-Instruct.Q4_1.gguf --kind K --limit 4` (greedy, seed 0), with the demo's
# texts of those units.

SMOL_RESPOND = [
    {
        "empathy": "Empathy",
        "symptom_questions": "Spectrum of symptoms",
        "medication_questions": "Medications",
        "assessment": "Medications",
        "planning": "Plan",
        "logistics": "Logistics",
        "coordination": "Coding",
        "contingency": "Contingency",
        "other": "Other",
    },
    {
        "empathy": "empathetic communication",
        "symptom_questions": "symptom-related follow-up questions",
        "medication_questions": "medication-related follow-up questions",
        "assessment": "assessment",
        "planning": "planning",
        "logistics": "logistics",
        "coordination": "cocoanone",
        "contingency": "contingency planning",
        "other": "other",
    },
]
SMOL_MATCH = [
    (
        "Hi Lena, a cough that keeps waking you up is exhausting, even if you feel okay otherwise. "
        "Do you notice heartburn or a sour taste, especially at night? Any wheezing or a feeling "
        "of mucus dripping down your throat? In the meantime, taking your famotidine twice a day "
        "every day and not eating late may help. We're happy to see you for a routine visit, and "
        "the portal has openings next week. If you cough up blood, get a fever or become short "
        "of breath, let us know sooner.",
        [[[97, 103]], [[97, 103]], [[97, 151]], [[97, 151]], [[97, 470]]],
        11,
    ),
    (
        "I'm so sorry you're feeling this sick. Fever, chills and pain in your side can mean the "
        "infection has reached your kidney, so I'd like you to be seen today rather than just "
        "restarting your old antibiotic. Have you been able to keep fluids down since you "
        "vomited? Have you noticed any blood in your urine? Our same-day clinic has openings "
        "this afternoon, or you can go to urgent care. If you can't keep fluids down or you feel "
        "faint, please go to the emergency department.",
        [[[272, 304]]] * 7,
        13,
    ),
]
SMOL_EPPC = (
    "Hello Doctor Nguyen!",
    [
        ("InfoGive", "Symptoms"),
        ("InfoSeek", "Symptoms"),
        ("PartnershipProvider", "Alignment"),
        ("SharedDecisionPatient", "ApprovalofDecision/Reinforcement"),
        ("Socioemotional/Empathy", "Sadness/fear"),
    ],
    [[13, 20]],
)
SMOL_FACTS_TEXTS = UnitTexts(
    responses={
        "Original": "This sounds like a mild COPD flare. I'd like to see you tomorrow, and I will "
        "likely prescribe prednisone and an antibiotic. Keep using your albuterol as needed. If "
        "your oxygen drops below 90 or you get short of breath at rest, go to the emergency room.",
        "Edited": "Thank you for letting us know, Walter, and I'm glad you're still able to manage "
        "your usual activities. What you're describing sounds like a mild COPD flare, and I'd "
        "like to see you tomorrow so we can take a closer look. I will likely prescribe "
        "prednisone and an antibiotic. In the meantime, keep using your albuterol as needed. If "
        "your oxygen drops below 90 or you become short of breath while resting, please go to "
        "the emergency room right away. We're here for you.",
    }
)


@pytest.mark.parametrize("parts", SMOL_RESPOND)
def test_smollm2_respond_boxes_of_theme_names_are_refused(parts):
    reason = respond(parts)
    assert re.match(r"echo: [78] of 9 boxes repeat the prompt's own words", reason), reason


@pytest.mark.parametrize(("draft", "spans", "n_themes"), SMOL_MATCH)
def test_smollm2_match_spans_shared_by_every_sentence_are_refused(draft, spans, n_themes):
    assert match(spans, ["empathy"] * n_themes, draft=draft).startswith("same text")
    assert match(spans, [], draft=draft).startswith("same text")  # the spans alone


def test_smollm2_eppc_evidence_for_every_code_is_refused():
    sentence, codes, span = SMOL_EPPC
    labels = [{"code": c, "subcode": s, "spans": span} for c, s in codes]
    reason = check("eppc", {"labels": labels}, UnitTexts(sentence=sentence), CATALOGS, "")
    assert reason == "same text: the same evidence span for every code (5 codes)"


def test_smollm2_empty_fact_lists_are_refused():
    reason = check("facts", {"facts": []}, SMOL_FACTS_TEXTS, CATALOGS, FACTS)
    assert reason == "no facts: none listed for the original reply, which has 4 sentence(s)"


# --- no clinician answer of the demo study is refused --------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from portalreview.demo import build_demo
    from portalreview.store.project import Project

    path = build_demo(tmp_path_factory.mktemp("demo") / "demo.prproj")
    with Project.open(path, read_only=True) as project:
        yield project


def test_the_demo_clinicians_answers_pass_every_gate(demo):
    from portalreview.store.models import Answer
    from portalreview.store.service import StudyService

    service = StudyService(demo)
    with demo.read() as s:
        rows = s.query(Answer.unit_id, Answer.annotator_id).filter(Answer.is_gold.is_(False))
        rows = [(u, a) for u, a in rows]
    checked = 0
    views = {}
    for unit_id, annotator_id in rows:
        answer = service.get_answer(unit_id, annotator_id=annotator_id)
        if unit_id not in views:
            views[unit_id] = service.read_unit(unit_id)
        texts = gates.unit_texts(views[unit_id])
        assert check(answer.kind, answer.payload, texts, service.catalogs) is None, answer
        checked += 1
    assert checked > 500


# --- a refused suggestion in the store and in batch runs -----------------------------------------


def degenerate(monkeypatch, kind: str, payload: dict) -> None:
    monkeypatch.setitem(sg.SUGGESTERS, kind, lambda ctx, unit: (payload, {}))


def test_run_batch_stores_a_refused_suggestion_for_the_pi_only(engine, study, monkeypatch):  # noqa: F811
    service = study.service
    unit = study.units["respond"]
    degenerate(monkeypatch, "respond", {"mode": "theme_guided", "parts": {"empathy": "Empathy"}})
    report = sg.run_batch(service, engine, "respond", [unit], annotator="smol", limits=SMALL_LIMITS)
    assert report.stored == [] and list(report.refused) == [unit] and report.done == 1
    assert report.refused[unit].startswith("echo: 1 of 1 boxes")
    with service.project.read() as s:
        row = s.query(Suggestion).one()
        assert row.refused_reason == report.refused[unit]
    model = next(a for a in service.annotators() if a.name == "smol")
    assert service.get_answer(unit, annotator_id=model.id) is None  # not the model's answer
    assert latest_suggestion(service.as_viewer("ava"), unit) is None  # never offered
    assert latest_suggestion(service, unit) is None
    assert suggestion_counts(service) == (0, 1)
    (listed,) = refused_suggestions(service)
    assert (listed.unit_id, listed.kind, listed.reason) == (unit, "respond", row.refused_reason)
    with pytest.raises(PermissionError):
        refused_suggestions(service.as_viewer("ava"))
    with pytest.raises(StoreError, match="refused by the quality gates"):
        service.save_answer(unit, {"parts": {}}, annotator_id=study.ava, suggestion_id=row.id)
    again = sg.run_batch(service, engine, "respond", [unit], annotator="smol")
    assert again.refused == report.refused and again.stored == []  # resumed, not asked again
    with service.project.read() as s:
        assert s.query(Suggestion).count() == 1


def test_run_batch_refuses_an_urgency_answer_by_the_numbers_behind_it(engine, study):  # noqa: F811
    # the tiny model's random weights put almost no probability on YES or NO
    service = study.service
    unit = study.units["urgency"]
    report = sg.run_batch(service, engine, "urgency", [unit], annotator="tiny")
    assert report.stored == [] and list(report.refused) == [unit]
    assert report.refused[unit].startswith("could not be used: ")
    assert "of the model's next-token probability was on YES or NO" in report.refused[unit]
    assert latest_suggestion(service.as_viewer("ava"), unit) is None  # never pre-filled
    model = next(a for a in service.annotators() if a.name == "tiny")
    assert service.get_answer(unit, annotator_id=model.id) is None


def test_an_offered_suggestion_is_newer_than_a_refused_one(engine, study, monkeypatch):  # noqa: F811
    service = study.service
    unit = study.units["empathy"]
    degenerate(monkeypatch, "empathy", {})
    assert list(sg.run_batch(service, engine, "empathy", [unit]).refused) == [unit]
    older = service.add_suggestion(
        unit,
        {"equal": True},
        model_file="other.gguf",
        model_sha256="0" * 64,
        template_id="empathy_judge@v1",
    )
    assert latest_suggestion(service.as_viewer("ava"), unit).id == older
    assert suggestion_counts(service) == (1, 1)


def test_the_cli_summary_counts_refusals_by_reason(capsys):
    from portalreview.llm.cli import _summary

    report = sg.BatchReport(4, stored=[1], skipped=[2])
    report.refused = {3: "echo: 9 of 9 boxes", 4: "same text: the same draft span"}
    assert _summary(report) == 1
    err = capsys.readouterr().err
    assert (
        "1 stored, 2 refused by the quality gates (1 echo, 1 same text), 1 already done, "
        "0 did not fit" in err
    )
    assert "unit 3: echo: 9 of 9 boxes" in err and "stored for the PI, not offered" in err
    assert _summary(sg.BatchReport(1, stored=[1])) == 0


# --- the real model ------------------------------------------------------------------------------


@pytest.mark.real_model
def test_smollm2_suggestions_pass_the_gates_or_are_refused(real_model_path, study):
    """SmolLM2-135M-Instruct through run_batch on the small study's units of the kinds with
    free text: every stored suggestion either passes the gates (and is the model annotator's
    answer) or was refused with the gates' own reason (and is not)."""
    from portalreview.llm.engine import Engine, GenerationParams

    service = study.service
    with Engine.load(real_model_path, n_ctx=4096, gpu=False, hash_cache=False) as model:
        for kind in ("respond", "match", "eppc", "facts"):
            report = sg.run_batch(
                service,
                model,
                kind,
                [study.units[kind]],
                annotator="smol",
                params=GenerationParams(max_tokens=512),
            )
            assert report.done == 1 and not report.cancelled, (kind, report)
    smol = next(a for a in service.annotators() if a.name == "smol").id
    with service.project.read() as s:
        rows = s.query(Suggestion).order_by(Suggestion.id).all()
        rows = [
            (r.unit_id, r.kind, json.loads(r.payload_json), r.template_text, r.refused_reason)
            for r in rows
        ]
    assert rows, "SmolLM2 stored no suggestion"
    for unit_id, kind, payload, template_text, refused in rows:
        texts = gates.unit_texts(service.read_unit(unit_id))
        assert check(kind, payload, texts, service.catalogs, template_text) == refused
        answer = service.get_answer(unit_id, annotator_id=smol)
        assert (answer is None) == (refused is not None), (kind, refused)
