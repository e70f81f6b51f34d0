"""Suggestions for every kind through the real model path (tiny random model): each answer is
grammar-constrained, parses into the kind's payload, is accepted by the kind's codec, and is
stored with its provenance; batch runs resume; a model can answer as a pseudo annotator; the
urgency inbox is scored from YES/NO probabilities with and without prefix reuse alike."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import threading

import pytest
from llm_testkit import (  # noqa: F401 - fixtures
    PARAMS,
    SMALL_LIMITS,
    drafts_end_at_the_limit,
    engine,
    tiny_model_file,
)

from portalreview.llm import suggest as sg
from portalreview.llm import urgency
from portalreview.llm.errors import Cancelled, ModelProcessDied, ModelServerError
from portalreview.llm.templates import PromptLibrary, default_template
from portalreview.store.models import Suggestion
from portalreview.store.service import StoreError
from portalreview.store.templates import response_by_external_id


def context(engine, study, kind):  # noqa: F811
    library = PromptLibrary(study.service)
    return sg.SuggestContext(
        engine, study.service.catalogs, sg.resolve_templates(library, kind), PARAMS, SMALL_LIMITS
    )


def suggest(engine, study, kind):  # noqa: F811
    return sg.suggest(context(engine, study, kind), study.service.read_unit(study.units[kind]))


def accepted_by_codec(study, answer) -> dict:
    """Store the payload as a pseudo annotator's answer: the kind's codec refuses a bad one."""
    service = study.service
    model = sg.model_annotator(service, "judge")
    with contextlib.suppress(StoreError):
        service.assign(answer.unit_id, model)
    return service.save_answer(answer.unit_id, answer.payload, annotator_id=model).payload


def test_respond(engine, study):  # noqa: F811
    answer = suggest(engine, study, "respond")
    parts = answer.payload["parts"]
    assert answer.payload["mode"] == "theme_guided"
    assert parts and set(parts) <= {t.id for t in study.service.catalogs.themes}
    assert all(0 < len(v) <= SMALL_LIMITS.box_chars for v in parts.values())
    accepted_by_codec(study, answer)


def test_rank(engine, study):  # noqa: F811
    answer = suggest(engine, study, "rank")
    entries = answer.payload["entries"]
    assert sorted(e["response_id"] for e in entries) == sorted([study.draft1, study.draft2])
    assert all(1 <= e["rank"] <= 2 for e in entries)
    assert all(not e["criteria"] or e["correct"] is False for e in entries)
    assert answer.params["observed"]["order"] == [
        r.id for r in study.service.read_unit(study.units["rank"]).responses
    ]
    accepted_by_codec(study, answer)


def test_match(engine, study):  # noqa: F811
    answer = suggest(engine, study, "match")
    unit = study.service.read_unit(study.units["match"])
    reference, draft = unit.responses
    decided = [d["sentence_id"] for d in answer.payload["decisions"]]
    assert decided == [s.id for s in reference.sentences]
    for d in answer.payload["decisions"]:
        for start, end in d["spans"]:
            assert draft.text[start:end].strip() == draft.text[start:end]  # whole words
    labelled = {t["sentence_id"] for t in answer.payload["themes"]}
    assert labelled == {s.id for r in unit.responses for s in r.sentences}
    assert answer.template_id == "content_match@default+sentence_theme@default"
    assert "----- sentence_theme@default -----" in answer.template_text
    accepted_by_codec(study, answer)


def test_eppc(engine, study):  # noqa: F811
    answer = suggest(engine, study, "eppc")
    sentence = study.service.read_unit(study.units["eppc"]).sentence
    codes = {c.id: c for c in study.service.catalogs.eppc_codes}
    assert len(answer.payload["labels"]) <= SMALL_LIMITS.eppc_results
    for label in answer.payload["labels"]:
        assert label["subcode"] in {s.id for s in codes[label["code"]].subcodes}
        assert all(0 <= s < e <= len(sentence.text) for s, e in label["spans"])
    accepted_by_codec(study, answer)


def test_empathy(engine, study):  # noqa: F811
    answer = suggest(engine, study, "empathy")
    assert answer.payload in (
        {"equal": True},
        {"more_empathetic_response_id": study.original},
        {"more_empathetic_response_id": study.edited},
    )
    accepted_by_codec(study, answer)


def test_facts(engine, study):  # noqa: F811
    answer = suggest(engine, study, "facts")
    facts = answer.payload["facts"]
    assert {f["side"] for f in facts} <= {"original", "edited"}
    assert all(isinstance(f["entailed"], bool) and f["text"].strip() for f in facts)
    assert len(answer.params["observed"]["p_entailed"]) == len(facts)
    assert all(0 <= p <= 1 for p in answer.params["observed"]["p_entailed"])
    accepted_by_codec(study, answer)


def test_urgency_pair_in_both_orders(engine, study):  # noqa: F811
    answer = suggest(engine, study, "urgency")
    seen = answer.params["observed"]
    for key in ("p_yes_ab", "p_yes_ba", "p_a_first"):
        assert 0.0 <= seen[key] <= 1.0
    assert seen["p_a_first"] == pytest.approx(0.5 * (seen["p_yes_ab"] + 1 - seen["p_yes_ba"]))
    winner = seen["a"] if seen["p_a_first"] >= 0.5 else seen["b"]
    pair_answer = {k: v for k, v in answer.payload.items() if k != "levels"}
    assert pair_answer == {"more_urgent_case_id": winner, "ask_second": False}
    accepted_by_codec(study, answer)


def test_inbox_scoring_with_prefix_reuse_equals_fresh_evaluation(engine):  # noqa: F811
    template = default_template("urgency_pair")
    inbox = [
        urgency.Patient(i, f"Message {i}: " + text, f"###Demographics###\nAge: {30 + i}")
        for i, text in enumerate(
            ["chest pain now", "refill please", "fever and chills", "form for work", "rash on arm"]
        )
    ]
    calls = []
    reused = urgency.score_inbox(
        engine, template, inbox, progress=lambda d, t: calls.append((d, t))
    )
    fresh = urgency.score_inbox(engine, template, inbox, reuse_prefix=False)
    assert calls[-1] == (20, 20) and len(calls) == 20
    assert len(reused.pairs) == 10
    for a, b in zip(reused.pairs, fresh.pairs, strict=True):
        assert (a.a, a.b) == (b.a, b.b)
        assert a.p_a_first == pytest.approx(b.p_a_first, abs=1e-5)
        assert 0.0 <= a.p_a_first <= 1.0
    assert reused.order == fresh.order
    assert sorted(reused.order) == list(range(5))
    scores = [reused.scores[k] for k in reused.order]
    assert scores == sorted(scores, reverse=True)
    assert sum(reused.scores.values()) == pytest.approx(
        sum(1 + abs(2 * p.p_a_first - 1) for p in reused.pairs if p.p_a_first != 0.5)
    )
    assert fresh.evaluated_tokens == fresh.prompt_tokens
    assert reused.evaluated_tokens < 0.7 * fresh.evaluated_tokens


def test_inbox_scoring_can_be_cancelled(engine):  # noqa: F811
    cancel = threading.Event()
    inbox = [urgency.Patient(i, f"message {i}") for i in range(4)]
    with pytest.raises(Cancelled, match="after 3 of 12 pairs"):
        urgency.score_inbox(
            engine,
            default_template("urgency_pair"),
            inbox,
            cancel=cancel,
            progress=lambda d, t: cancel.set() if d == 3 else None,
        )


def test_batch_stores_provenance_resumes_and_answers_as_a_model(engine, study):  # noqa: F811
    service = study.service
    units = [study.units["empathy"], study.units["urgency"]]
    report = sg.run_batch(
        service,
        engine,
        "empathy",
        units[:1],
        params=PARAMS,
        limits=SMALL_LIMITS,
        annotator="tiny-judge",
    )
    assert report.stored == units[:1] and not report.failed
    with service.project.read() as s:
        row = s.query(Suggestion).one()
        assert row.model_file == engine.info.file_name
        assert row.model_sha256 == engine.sha256
        assert row.template_id == "empathy_judge@default"
        assert row.template_text == default_template("empathy_judge").text
        assert json.loads(row.params_json)["max_tokens"] == PARAMS.max_tokens
        # where it ran: the same greedy settings answer otherwise on a GPU (docs/llm.md)
        assert json.loads(row.params_json)["runtime"] == {
            "device": "CPU",
            "gpu_layers": 0,
            "n_layers": engine.info.n_layers,
            "n_threads": engine.info.n_threads,
            "build": f"llama-cpp-python {importlib.metadata.version('llama-cpp-python')}",
        }
        assert row.seed == PARAMS.seed and row.seconds > 0
    judge = next(a for a in service.annotators() if a.name == "tiny-judge")
    assert judge.is_model
    answer = service.get_answer(units[0], annotator_id=judge.id)
    assert answer.status == "submitted" and answer.suggestion_use == "accepted"
    again = sg.run_batch(
        service,
        engine,
        "empathy",
        units[:1],
        params=PARAMS,
        limits=SMALL_LIMITS,
        annotator="tiny-judge",
    )
    assert again.skipped == units[:1] and again.stored == []
    with pytest.raises(StoreError, match="is a person's account"):
        sg.run_batch(service, engine, "empathy", units[:1], annotator="ava")


def test_a_stored_suggestion_is_reused_when_answering_as_a_model(engine, study):  # noqa: F811
    service = study.service
    unit = [study.units["empathy"]]
    sg.run_batch(service, engine, "empathy", unit, params=PARAMS, limits=SMALL_LIMITS)
    report = sg.run_batch(
        service, engine, "empathy", unit, params=PARAMS, limits=SMALL_LIMITS, annotator="late-judge"
    )
    assert report.stored == unit
    with service.project.read() as s:
        assert s.query(Suggestion).count() == 1  # not generated again


def test_batch_stops_when_cancelled(engine, study):  # noqa: F811
    cancel = threading.Event()
    cancel.set()
    report = sg.run_batch(study.service, engine, "empathy", [study.units["empathy"]], cancel=cancel)
    assert report.cancelled and report.done == 0


def test_drafts_are_stored_once_per_case_and_template(engine, study, monkeypatch):  # noqa: F811
    drafts_end_at_the_limit(monkeypatch)
    service = study.service
    cases = [service.read_unit(study.units["urgency"]).cases[0]]
    template = default_template("draft_thematic")
    params = PARAMS.__class__(max_tokens=8)
    report = sg.run_drafts(service, engine, cases, template, params=params)
    assert report.stored == [cases[0].id]
    assert sg.run_drafts(service, engine, cases, template, params=params).skipped == [cases[0].id]
    draft = response_by_external_id(service, sg.draft_external_id(engine, template, cases[0]))
    made = sg.draft_provenance(service, draft)
    assert made is not None and made["runtime"] == engine.info.runtime
    gen = sg.stream_draft(
        engine, template, sg.draft_values(template, cases[0], service.catalogs), params
    )
    assert "".join(gen) == gen.text and len(gen.token_ids) <= 8


@pytest.mark.parametrize("error", [ModelServerError, ModelProcessDied])
def test_drafts_stop_with_the_reason_when_the_model_goes_away(
    engine,  # noqa: F811
    study,
    monkeypatch,
    error,
):
    """The model server going away (or the model process dying) at the 2nd case stops the
    run; the report keeps the draft stored before and says why it stopped."""
    service = study.service
    cases = service.read_unit(study.units["urgency"]).cases  # two cases
    real_stream = sg.stream_draft

    def lost_at_second(engine, template, values, params=None, cancel=None):
        if lost_at_second.calls:
            raise error("the model server went away during the request")
        lost_at_second.calls += 1
        return real_stream(engine, template, values, params, cancel)

    lost_at_second.calls = 0
    monkeypatch.setattr(sg, "stream_draft", lost_at_second)
    drafts_end_at_the_limit(monkeypatch)
    template = default_template("draft_zero_shot")
    report = sg.run_drafts(service, engine, cases, template, params=PARAMS.__class__(max_tokens=8))
    assert report.stored == [cases[0].id]
    assert report.stopped == "the model server went away during the request"
    assert not report.cancelled and report.done == 1


def test_a_draft_cut_off_by_the_token_limit_is_not_stored(engine, study):  # noqa: F811
    """The tiny model never writes its end token: every draft is cut off at the limit, and
    is recorded as failed, with what to change, never stored as a reply clinicians rank."""
    service = study.service
    cases = service.read_unit(study.units["urgency"]).cases
    template = default_template("draft_zero_shot")
    report = sg.run_drafts(service, engine, cases, template, params=PARAMS.__class__(max_tokens=8))
    assert report.stored == [] and sorted(report.failed) == sorted(c.id for c in cases)
    for reason in report.failed.values():
        assert (
            reason == "the draft is unfinished: it was cut off at 8 tokens (raise the token limit)"
        )
    assert not any(sg.has_draft(service, engine, template, c) for c in cases)


def test_the_cli_names_drafts_that_did_not_fit_by_their_case(engine, study, capsys):  # noqa: F811
    """A drafting run keys what did not fit by case, not by unit: the CLI names each case by
    its external id, as the drafts window does while drafting (never "unit <case id>")."""
    from portalreview.llm.cli import _summary

    cases = study.service.read_unit(study.units["urgency"]).cases
    template = default_template("draft_zero_shot")
    report = sg.run_drafts(
        study.service, engine, cases, template, params=PARAMS.__class__(max_tokens=8)
    )
    _summary(report)
    err = capsys.readouterr().err
    for case in cases:
        assert f"  case {case.external_id}: the draft is unfinished" in err
        assert f"unit {case.id}:" not in err


@pytest.fixture
def short_context(tmp_path_factory):
    from portalreview.llm.engine import Engine

    with Engine.load(
        tiny_model_file(tmp_path_factory), gpu=False, hash_cache=False, n_ctx=256
    ) as eng:
        yield eng


def test_a_full_context_is_told_apart_from_the_token_limit(short_context, study):
    """A prompt that leaves little of the context: the answer is cut off by the full context,
    and the words say so (not "raise the token limit"); a suggestion and a draft alike."""
    from portalreview.llm.engine import GenerationParams
    from portalreview.llm.errors import AnswerError

    service = study.service
    template = default_template("draft_zero_shot")
    words = "I have had a headache for days. "
    probe = service.add_case("probe", "x", {})
    chart = next(c for c in sg.cases_for_drafts(service) if c.id == probe).chart_text
    message = words
    while (
        len(short_context.prompt_tokens(template.render({"chart": chart, "message": message})))
        < 240
    ):
        message += words
    case_id = service.add_case("long", message, {})
    case = next(c for c in sg.cases_for_drafts(service) if c.id == case_id)
    values = sg.draft_values(template, case, service.catalogs)
    prompt = len(short_context.prompt_tokens(template.render(values)))
    assert 220 < prompt < 256
    params = GenerationParams(max_tokens=512)
    ctx = sg.SuggestContext(short_context, service.catalogs, {"draft": template}, params)
    with pytest.raises(AnswerError) as info:
        sg._generate(ctx, "draft", values, None)
    reason = str(info.value)
    expected = f"the model's context (256 tokens) is full: the prompt takes {prompt}"
    assert expected in reason and "use a larger context or shorter inputs" in reason
    assert "token limit" not in reason

    report = sg.run_drafts(service, short_context, [case], template, params=params)
    assert report.stored == [] and expected in report.failed[case_id]


def test_a_character_cut_in_two_by_the_limit_is_left_out_not_replaced(engine):  # noqa: F811
    """The limit falls inside the second emoji (4 byte tokens each in the tiny vocabulary):
    the text ends after the first, as the server's does, with no U+FFFD."""
    from portalreview.llm.engine import GenerationParams

    assert len(engine.tokenize("\U0001f44d")) == 5  # a space marker and 4 bytes
    gen = engine.complete("Hello", GenerationParams(max_tokens=5), grammar='root ::= "👍👍"')
    assert gen.finish_reason == "length" and len(gen.token_ids) == 5
    assert gen.text == "\U0001f44d"


def test_an_editor_reads_the_latest_suggestion_of_an_assigned_unit(engine, study):  # noqa: F811
    from portalreview.store.service import AccessError
    from portalreview.store.templates import latest_suggestion

    service = study.service
    unit = study.units["empathy"]
    assert latest_suggestion(service, unit) is None
    sg.run_batch(service, engine, "empathy", [unit], params=PARAMS, limits=SMALL_LIMITS)
    seen = latest_suggestion(service.as_viewer("ava"), unit)
    assert seen.kind == "empathy" and seen.template_id == "empathy_judge@default"
    assert seen.model_file == engine.info.file_name
    service.add_annotator("cy")
    with pytest.raises(AccessError, match="not assigned to you"):
        latest_suggestion(service.as_viewer("cy"), unit)
