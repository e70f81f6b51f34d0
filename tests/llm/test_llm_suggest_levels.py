"""The two optional parts of a suggestion (tiny random model, real llama.cpp path): each
patient's urgency level 1-6 and the expert error category of a fact not entailed, each read
from one next-token distribution over one-token labels. Random weights: these tests check
structure and probabilities (against an independent call of the engine), never wording."""

from __future__ import annotations

import contextlib
import re
from dataclasses import replace

import pytest
from llm_testkit import PARAMS, SMALL_LIMITS, engine, tiny_model_file  # noqa: F401 - fixtures

from portalreview.llm import suggest as sg
from portalreview.llm import templates as tpl
from portalreview.llm.errors import LlmError, TemplateError
from portalreview.llm.templates import PromptLibrary, default_template, default_text
from portalreview.store.service import StoreError
from portalreview.store.templates import TemplateService

NEW_KINDS = ("urgency_level", "fact_error_category")


def context(engine, study, kind, templates=None):  # noqa: F811
    if templates is None:
        templates = sg.resolve_templates(PromptLibrary(study.service), kind)
    return sg.SuggestContext(engine, study.service.catalogs, templates, PARAMS, SMALL_LIMITS)


def suggest(engine, study, kind, templates=None):  # noqa: F811
    ctx = context(engine, study, kind, templates)
    return sg.suggest(ctx, study.service.read_unit(study.units[kind]))


def without_optional(engine, study, kind):  # noqa: F811
    """The template set of a context made before the optional templates existed."""
    full = sg.resolve_templates(PromptLibrary(study.service), kind)
    return {k: t for k, t in full.items() if not tpl.TEMPLATE_KINDS[k].optional}


def stored_by_codec(study, answer) -> dict:
    """Save the payload as a pseudo annotator's answer: the kind's codec refuses a bad one."""
    service = study.service
    model = sg.model_annotator(service, "judge")
    with contextlib.suppress(StoreError):
        service.assign(answer.unit_id, model)
    return service.save_answer(answer.unit_id, answer.payload, annotator_id=model).payload


def independent_choice(engine, template, values, labels):  # noqa: F811
    """P(label) for a rendered template, asked of the engine directly."""
    segments, options = sg.one_token_options(engine, template.render(values), labels)
    result = engine.choice_probabilities(segments, list(options.values()))
    return {label: result.probs[option] for label, option in options.items()}, result.mass


# --- the templates ------------------------------------------------------------------------------


def test_the_level_template_renders_the_catalogs_scale(study):
    catalogs = study.service.catalogs
    text = "".join(
        default_template("urgency_level").render(
            {"levels": tpl.urgency_levels_text(catalogs), "chart": "CHART", "message": "MSG"}
        )
    )
    for entry in catalogs.urgency_levels:
        assert f"- {entry.level}: {entry.name}. {entry.definition}" in text
    assert len(catalogs.urgency_levels) == 6  # seed 002, Table 6
    assert text.index("CHART") < text.index("MSG") and text.endswith("Level:")


def test_the_category_template_renders_every_category_with_its_letter(study):
    catalogs = study.service.catalogs
    labels = tpl.error_category_labels(catalogs)
    assert list(labels) == ["A", "B", "C", "D", "E", "F"]  # six categories, catalog order
    assert list(labels.values()) == [c.id for c in catalogs.error_categories]
    values = {
        "categories": tpl.error_categories_text(catalogs),
        "message": "MSG",
        "original": "ORIG",
        "edited": "EDIT",
        "side": "the edited reply",
        "fact": "FACT",
    }
    segments = default_template("fact_error_category").render(values)
    # cut before the message and before the fact: the instructions, then the patient's message
    # and both replies, are prefixes shared by every fact of a unit
    assert len(segments) == 3 and "ORIG" in segments[1] and "FACT" in segments[2]
    # the message as the experts read it, before the replies (seed 004, Section 3.1)
    assert segments[1].index("MSG") < segments[1].index("ORIG")
    text = "".join(segments)
    for letter, category in zip(labels, catalogs.error_categories, strict=True):
        assert f"- {letter}: {category.name}. {category.definition}" in text
    assert text.endswith("Kind:")


def test_the_new_templates_are_optional_and_editable_by_the_pi(study):
    for kind in NEW_KINDS:
        assert tpl.TEMPLATE_KINDS[kind].optional
        assert tpl.TEMPLATE_KINDS[kind].answer == "one_token"
    library = PromptLibrary(study.service.as_viewer("pat"))
    edited = "Scale:\n{{levels}}\nChart: {{chart}}\nMessage: {{message}}\nLevel:"
    assert library.save("urgency_level", "urgency_level", edited).key == "urgency_level@v1"
    assert PromptLibrary(study.service).template("urgency_level").text == edited
    with pytest.raises(TemplateError, match=r"must contain \{\{levels\}\}"):
        library.save("urgency_level", "urgency_level", "{{chart}} {{message}} Level:")


# --- one-token options --------------------------------------------------------------------------


class _Tokenizer:
    """A tokenizer in the manner of byte-level BPE (Llama 3, Qwen): a letter run takes the space
    before it, a digit is a token of its own, and so is a space before a digit."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def tokenize(self, text: str) -> list[int]:
        pieces = re.findall(r" ?[A-Za-z]+|[0-9]| +|[^A-Za-z0-9 ]", text)
        return [self.ids.setdefault(p, len(self.ids)) for p in pieces]


def test_digits_move_the_space_into_the_prompt_where_the_tokenizer_splits_them():
    fake = _Tokenizer()
    segments, options = sg.one_token_options(fake, ["rules ", "Level:"], ["1", "2", "3"])
    # " 3" would be two tokens (space, digit): the prompt takes the space, the option the digit
    assert segments == ["rules ", "Level: "]
    assert options == {"1": "1", "2": "2", "3": "3"}
    segments, options = sg.one_token_options(fake, ["Kind:"], ["A", "B"])
    assert segments == ["Kind:"] and options == {"A": " A", "B": " B"}  # one token each


def test_options_that_are_never_one_token_are_refused_with_a_reason():
    with pytest.raises(LlmError, match="10, 11 are not one token each"):
        sg.one_token_options(_Tokenizer(), ["Level:"], ["10", "11"])
    with pytest.raises(LlmError, match="at least two options"):
        sg.one_token_options(_Tokenizer(), ["Level:"], ["1"])


def test_the_tiny_models_options_are_single_distinct_tokens(engine):  # noqa: F811
    for labels in (list("123456"), list("ABCDEF")):
        segments, options = sg.one_token_options(engine, ["Answer:"], labels)
        base = engine.tokenize(segments[-1])
        added = [engine.tokenize(segments[-1] + o)[len(base) :] for o in options.values()]
        assert all(len(tokens) == 1 for tokens in added)
        assert len({tokens[0] for tokens in added}) == len(labels)


# --- urgency levels -----------------------------------------------------------------------------


def test_urgency_suggests_both_levels_from_one_distribution_each(engine, study):  # noqa: F811
    answer = suggest(engine, study, "urgency")
    unit = study.service.read_unit(study.units["urgency"])
    catalogs = study.service.catalogs
    case_ids = sorted(str(c.id) for c in unit.cases)
    levels, seen = answer.payload["levels"], answer.params["observed"]["levels"]
    assert sorted(levels) == case_ids and sorted(seen) == case_ids
    template = default_template("urgency_level")
    labels = [str(e.level) for e in catalogs.urgency_levels]
    for case in unit.cases:
        observed = seen[str(case.id)]
        assert sum(observed["probs"].values()) == pytest.approx(1.0)
        assert 0.0 < observed["mass"] <= 1.0
        values = {
            "levels": tpl.urgency_levels_text(catalogs),
            "chart": case.chart_text,
            "message": case.message,
        }
        probs, mass = independent_choice(engine, template, values, labels)
        assert observed["probs"] == pytest.approx(probs, abs=1e-5)
        assert observed["mass"] == pytest.approx(mass, rel=1e-4)
        best = max(probs.values())
        assert 1 <= levels[str(case.id)] <= 6
        assert probs[str(levels[str(case.id)])] == pytest.approx(best, abs=1e-5)
    assert answer.template_id == "urgency_pair@default+urgency_level@default"
    assert default_text("urgency_level").strip() in answer.template_text
    stored = stored_by_codec(study, answer)
    assert stored["levels"] == levels  # stored exactly as a clinician's levels are


def test_the_pair_answer_is_unchanged_by_the_levels(engine, study):  # noqa: F811
    full = suggest(engine, study, "urgency")
    bare = suggest(engine, study, "urgency", without_optional(engine, study, "urgency"))
    assert "levels" not in bare.payload and "levels" not in bare.params["observed"]
    assert {k: v for k, v in full.payload.items() if k != "levels"} == bare.payload
    assert bare.template_id == "urgency_pair@default"
    stored_by_codec(study, bare)


# --- error categories of facts ------------------------------------------------------------------


def test_a_fact_not_entailed_gets_a_category_and_an_entailed_one_none(engine, study):  # noqa: F811
    ctx = context(engine, study, "facts")
    unit = study.service.read_unit(study.units["facts"])
    original, edited = (r.text for r in unit.responses)
    facts = [
        {"side": "original", "text": "Go to the ER now.", "entailed": True},
        {"side": "edited", "text": "You will be fine.", "entailed": False},
    ]
    message = unit.cases[0].message
    observed = sg.suggest_error_categories(ctx, original, edited, facts, message=message)
    catalogs = study.service.catalogs
    labels = tpl.error_category_labels(catalogs)
    assert "error_category" not in facts[0] and observed[0] is None
    assert facts[1]["error_category"] in {c.id for c in catalogs.error_categories}
    values = {
        "categories": tpl.error_categories_text(catalogs),
        "message": message,
        "original": original,
        "edited": edited,
        "side": "the edited reply",
        "fact": "You will be fine.",
    }
    probs, mass = independent_choice(
        engine, default_template("fact_error_category"), values, list(labels)
    )
    by_id = {labels[letter]: p for letter, p in probs.items()}
    assert observed[1]["probs"] == pytest.approx(by_id, abs=1e-5)
    assert sum(observed[1]["probs"].values()) == pytest.approx(1.0)
    assert observed[1]["mass"] == pytest.approx(mass, rel=1e-4)
    assert by_id[facts[1]["error_category"]] == pytest.approx(max(by_id.values()), abs=1e-5)


def test_the_facts_suggestion_carries_categories_only_where_not_entailed(
    engine,  # noqa: F811
    study,
):
    answer = suggest(engine, study, "facts")
    facts = answer.payload["facts"]
    observed = answer.params["observed"]
    assert len(observed["error_category"]) == len(facts) == len(observed["p_entailed"])
    known = {c.id for c in study.service.catalogs.error_categories}
    for fact, numbers in zip(facts, observed["error_category"], strict=True):
        if fact["entailed"]:
            assert "error_category" not in fact and numbers is None
        else:
            assert fact["error_category"] in known
            assert sum(numbers["probs"].values()) == pytest.approx(1.0)
    assert answer.template_id.endswith("+fact_error_category@default")
    stored = stored_by_codec(study, answer)
    assert [f.get("error_category") for f in stored["facts"]] == [
        f.get("error_category") for f in facts
    ]


def test_the_category_question_shows_the_model_the_patient_s_message(
    engine,  # noqa: F811
    study,
):
    """Seed 004, Section 3.1: the experts read the patient's message with both replies; "Adds
    Unnecessary Advice" (Supplementary Table 3) is advice unrelated to the patient's query."""
    unit = study.service.read_unit(study.units["facts"])
    recorder = sg.PromptRecorder(engine)
    ctx = replace(context(engine, study, "facts"), engine=recorder)
    facts = [{"side": "edited", "text": "Take two aspirin daily.", "entailed": False}]
    message = unit.cases[0].message
    sg.suggest_error_categories(ctx, "ORIG", "EDIT", facts, message=message)
    (prompt,) = recorder.prompts
    assert message in prompt and prompt.index(message) < prompt.index("ORIG")


def test_a_facts_suggestion_gives_the_category_question_the_unit_s_message(
    engine,  # noqa: F811
    study,
    monkeypatch,
):
    unit = study.service.read_unit(study.units["facts"])
    asked = []
    real = sg.suggest_error_categories
    monkeypatch.setattr(
        sg, "suggest_error_categories", lambda *a, **k: asked.append(k) or real(*a, **k)
    )
    suggest(engine, study, "facts")
    assert [k.get("message") for k in asked] == [unit.cases[0].message]


def test_an_older_category_template_without_the_message_still_works(
    engine,  # noqa: F811
    study,
):
    """A project stored its copy of the category template before {{message}} was offered:
    the text is still accepted, and suggestions still use it."""
    older = default_text("fact_error_category").replace(
        "The patient's message:\n{{message}}\n\n", ""
    )
    assert "{{message}}" not in older
    tpl.validate("fact_error_category", older)
    library = PromptLibrary(study.service.as_viewer("pat"))
    library.save("fact_error_category", "fact_error_category", older)
    ctx = context(engine, study, "facts")
    assert ctx.templates["fact_error_category"].text == older
    unit = study.service.read_unit(study.units["facts"])
    facts = [{"side": "edited", "text": "You will be fine.", "entailed": False}]
    sg.suggest_error_categories(ctx, "ORIG", "EDIT", facts, message=unit.cases[0].message)
    assert facts[0]["error_category"] in {c.id for c in study.service.catalogs.error_categories}


# --- projects made before these templates existed -----------------------------------------------


def test_a_project_without_the_new_templates_uses_and_records_the_bundled_ones(
    engine,  # noqa: F811
    study,
):
    service = study.service
    old = {k: v for k, v in tpl.defaults().items() if k not in NEW_KINDS}
    TemplateService(service).install(old)  # what an older version stored in the project
    answer = suggest(engine, study, "urgency")
    assert answer.template_id == "urgency_pair@v1+urgency_level@default"
    assert "----- urgency_level@default -----" in answer.template_text
    assert sorted(answer.payload["levels"]) == sorted(
        str(c.id) for c in service.read_unit(study.units["urgency"]).cases
    )
    suggestion_id = sg.store(service, engine, answer)
    assert suggestion_id > 0
    # the next `portalreview suggest` run adds just the new ones, and later suggestions
    # record them with their version
    assert sorted(PromptLibrary(service).install_defaults()) == sorted(NEW_KINDS)
    again = suggest(engine, study, "urgency")
    assert again.template_id == "urgency_pair@v1+urgency_level@v1"


def test_a_context_without_the_optional_templates_still_suggests(engine, study):  # noqa: F811
    answer = suggest(engine, study, "facts", without_optional(engine, study, "facts"))
    assert all("error_category" not in f for f in answer.payload["facts"])
    assert "error_category" not in answer.params["observed"]
    assert answer.template_id == "fact_decompose@default+fact_entail@default"
    stored_by_codec(study, answer)
