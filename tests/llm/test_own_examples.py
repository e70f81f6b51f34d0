"""A clinician's own earlier replies as the model's examples (``llm/own_examples.py``): the
study's opt-in (PI only, audited), which replies are chosen (TF-IDF over the messages, the
case at hand left out), the prompt and provenance of a suggestion made with them, and that
such a suggestion is its clinician's alone."""

from __future__ import annotations

import json
import re

import pytest
from llm_testkit import PARAMS, SMALL_LIMITS, engine  # noqa: F401 - fixtures
from sqlalchemy import select

from portalreview.cli import main
from portalreview.llm import own_examples as oe
from portalreview.llm import suggest as sg
from portalreview.llm.templates import PromptLibrary
from portalreview.store.models import AuditEntry, Suggestion
from portalreview.store.project import Project
from portalreview.store.service import AccessError, StoreError, StudyService
from portalreview.store.study_setup import (
    assign_units,
    create_unit_set,
    plan_assignment,
    plan_units,
)
from portalreview.store.templates import latest_suggestion

MESSAGES = {
    "chest-1": "My chest hurts when I climb the stairs since this morning.",
    "chest-2": "Chest pain again last night, it hurts when I breathe.",
    "refill": "Please refill my insulin prescription, the pharmacy needs it.",
    "rash": "A red rash appeared on my arm after the new soap.",
    "now": "My chest hurts and I feel short of breath on the stairs.",
}
REPLIES = {
    "chest-1": "Please call 911 now if the pain is strong. Ava, RN.",
    "chest-2": "Chest pain with breathing needs a visit today. Ava, RN.",
    "refill": "Your insulin refill was sent to the pharmacy. Ava, RN.",
}


class Study:
    def __init__(self, path):
        self.project = Project.create(path, name="Own examples")
        self.service = StudyService(self.project)
        self.ava = self.service.add_annotator("ava")
        self.ben = self.service.add_annotator("ben")
        self.pat = self.service.add_annotator("pat", role="pi")
        self.cases = {
            name: self.service.add_case(name, message, chart={"Problems": ["hypertension"]})
            for name, message in MESSAGES.items()
        }
        made = create_unit_set(self.project, plan_units(self.project, "respond"))
        plan = plan_assignment(self.project, made.name, ["ava", "ben"], overlap=len(MESSAGES))
        assign_units(self.project, plan)
        ava = self.service.as_viewer("ava")
        self.units = {}
        for item in ava.queue("respond"):
            unit = ava.read_unit(item.unit_id)
            self.units[unit.cases[0].external_id] = item.unit_id
        for name, reply in REPLIES.items():  # ava's earlier replies (submitted)
            payload = {"mode": "theme_guided", "parts": {"empathy": reply}}
            ava.save_answer(self.units[name], payload, status="submitted")
        ava.save_answer(  # a draft is not an example
            self.units["rash"], {"mode": "theme_guided", "parts": {"empathy": "Draft only."}}
        )


@pytest.fixture
def study(tmp_path):
    made = Study(tmp_path / "study.prproj")
    yield made
    made.project.close()


def test_the_study_opts_in_and_the_audit_log_says_so(study):
    assert study.service.own_examples() == 0  # off unless the PI says
    pi = study.service.as_viewer("pat")
    pi.set_own_examples(3)
    assert study.service.own_examples() == 3
    with pytest.raises(PermissionError):
        study.service.as_viewer("ava").set_own_examples(5)
    with pytest.raises(StoreError, match="between 0 \\(off\\) and 5"):
        pi.set_own_examples(6)
    pi.set_own_examples(0)
    with study.project.read() as s:
        entries = s.scalars(select(AuditEntry).where(AuditEntry.action == "own_examples")).all()
    changes = [(json.loads(e.old_json), json.loads(e.new_json)) for e in entries]
    assert changes == [({"examples": 0}, {"examples": 3}), ({"examples": 3}, {"examples": 0})]
    assert all(e.actor_id == study.pat for e in entries)


def test_the_command_line_sets_and_says(study, capsys):
    path = str(study.project.path)
    study.project.close()
    assert main(["own-examples", path]) == 0
    assert "(off)" in capsys.readouterr().out
    assert main(["own-examples", path, "--examples", "2"]) == 0
    assert "their 2 most similar earlier replies" in capsys.readouterr().out
    assert main(["own-examples", path, "--examples", "9"]) == 2
    assert "between 0 (off) and 5" in capsys.readouterr().err
    study.project = Project.open(path)


def test_only_submitted_replies_of_that_clinician_and_only_for_them(study):
    ava = study.service.as_viewer("ava")
    replies = oe.own_replies(ava, study.ava)
    assert [r.reply for r in replies] == list(REPLIES.values())
    assert {r.case_id for r in replies} == {study.cases[n] for n in REPLIES}
    assert oe.own_replies(study.service.as_viewer("ben"), study.ben) == []
    with pytest.raises(AccessError):
        oe.own_replies(study.service.as_viewer("ben"), study.ava)


def test_the_most_similar_messages_first_the_case_at_hand_left_out(study):
    replies = oe.own_replies(study.service, study.ava)
    chosen = oe.most_similar(MESSAGES["now"], replies, 2)
    assert [e.reply.case_id for e in chosen] == [study.cases["chest-1"], study.cases["chest-2"]]
    assert chosen[0].similarity > chosen[1].similarity > 0
    # an independent cosine of the TF-IDF vectors, fitted on the same four messages
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity

    texts = [MESSAGES["now"], *(r.message for r in replies)]
    expected = cosine_similarity(TfidfVectorizer().fit_transform(texts))[0, 1]
    assert chosen[0].similarity == pytest.approx(expected)
    left_out = oe.most_similar(MESSAGES["chest-1"], replies, 5, study.cases["chest-1"])
    assert study.cases["chest-1"] not in [e.reply.case_id for e in left_out]
    unrelated = oe.most_similar("Zzz qqq.", replies, 3)  # no shared word: no example
    assert unrelated == []
    assert oe.examples_text([]) == oe.NONE_YET
    text = oe.examples_text(chosen)
    assert text.startswith("Example 1\nMessage: My chest hurts when I climb")
    assert REPLIES["chest-2"] in text


def test_a_suggestion_with_own_examples_is_recorded_and_hers_alone(study, engine):  # noqa: F811
    study.service.set_own_examples(2)
    ava = study.service.as_viewer("ava")
    unit = ava.read_unit(study.units["now"])
    examples = oe.examples_for(ava, study.ava, unit.cases[0].message, unit.cases[0].id)
    assert len(examples) == 2
    library = PromptLibrary(study.service)
    ctx = sg.SuggestContext(
        engine,
        study.service.catalogs,
        sg.resolve_templates(library, "respond", own_examples=True),
        PARAMS,
        SMALL_LIMITS,
        for_annotator=study.ava,
        own_examples=tuple(examples),
    )
    answer = sg.suggest(ctx, unit)
    assert answer.template_id == "respond_own_examples@default"
    assert answer.for_annotator == study.ava
    prompt = "\n".join(answer.params["prompts"])
    assert REPLIES["chest-1"] in prompt and REPLIES["chest-2"] in prompt
    assert REPLIES["refill"] not in prompt  # not among the two most similar
    assert answer.params["own_examples"] == [e.provenance() for e in examples]
    suggestion_id = sg.store(study.service, engine, answer)
    with study.project.read() as s:
        assert s.get(Suggestion, suggestion_id).for_annotator_id == study.ava
    found = latest_suggestion(ava, study.units["now"])
    assert found is not None and found.id == suggestion_id
    assert latest_suggestion(study.service.as_viewer("ben"), study.units["now"]) is None
    assert latest_suggestion(study.service.as_viewer("pat"), study.units["now"]) is None


def test_without_the_opt_in_nothing_of_hers_reaches_the_prompt(study, engine):  # noqa: F811
    ava = study.service.as_viewer("ava")
    unit = ava.read_unit(study.units["now"])
    assert oe.examples_for(ava, study.ava, unit.cases[0].message, unit.cases[0].id) == []
    library = PromptLibrary(study.service)
    ctx = sg.SuggestContext(
        engine,
        study.service.catalogs,
        sg.resolve_templates(library, "respond"),
        PARAMS,
        SMALL_LIMITS,
    )
    answer = sg.suggest(ctx, unit)
    prompt = "\n".join(answer.params["prompts"])
    assert all(reply not in prompt for reply in REPLIES.values())
    assert "own_examples" not in answer.params and answer.for_annotator is None


def test_drafts_with_and_without_examples_are_compared_by_content_edit_f1(
    study,
    engine,  # noqa: F811
):
    from portalreview.domain.segmenter import split_sentences
    from portalreview.metrics.edit_f1 import edit_f1_from_counts

    library = PromptLibrary(study.service)
    seen = []
    comparison = oe.compare_drafts(
        study.service,
        engine,
        library,
        examples=2,
        params=PARAMS,
        limits=SMALL_LIMITS,
        progress=lambda done, total: seen.append((done, total)),
    )
    # each of ava's replies is compared unless no other message of hers shares a word with it
    by_case = {score.case_id: score for score in comparison.scores}
    expected_skips = sum(
        not oe.most_similar(
            MESSAGES[n], oe.own_replies(study.service, study.ava), 2, study.cases[n]
        )
        for n in REPLIES
    )
    assert len(by_case) + expected_skips == len(REPLIES)
    assert comparison.skipped.get("ava", 0) == expected_skips
    assert seen[-1] == (len(by_case), len(by_case))
    for name, reply in REPLIES.items():
        score = by_case.get(study.cases[name])
        if score is None:
            continue
        sentences = len(split_sentences(reply))
        for em, ea, _ed in (score.without, score.with_examples):
            assert em + ea == sentences  # every sentence of her reply matched or not
    figures = comparison.figures(n_resamples=200, seed=1)
    total = [sum(s.without[i] for s in comparison.scores) for i in range(3)]
    assert figures["without"]["f1"] == pytest.approx(edit_f1_from_counts(*total).f1)
    assert figures["difference"]["f1"] == pytest.approx(
        figures["with"]["f1"] - figures["without"]["f1"]
    )
    assert comparison.figures(n_resamples=200, seed=1) == figures  # reproducible


def test_evaluate_model_compares_own_examples_from_the_command_line(
    study, tmp_path_factory, capsys
):
    from llm_testkit import tiny_model_file

    path = str(study.project.path)
    study.project.close()
    model = str(tiny_model_file(tmp_path_factory))
    argv = ["evaluate-model", path, "--model", model, "--own-examples", "2", "--limit", "3"]
    options = ["--resamples", "50", "--threads", "1", "--max-tokens", "400", "--cpu"]
    assert main([*argv, *options]) == 0
    out = capsys.readouterr().out
    assert "content-level Edit-F1 against the held-out reply" in out
    # random weights without the tests' small grammar limits write boxes until the token
    # limit: such a reply is left out and said so (compare_drafts is tested with the limits
    # above); with one that fits, the three figures are printed
    compared = re.search(r"intervals over the (\d) replies", out)
    assert compared, out
    if int(compared.group(1)):
        for label in ("without examples", "with own examples", "difference (with - without)"):
            pattern = rf"^  {re.escape(label)} +-?\d\.\d{{3}} \[.+\] n=\d$"
            assert re.search(pattern, out, re.M), label
    failed = re.search(r"(\d) repl(y|ies) left out: a draft or a judgement did not fit", out)
    assert int(compared.group(1)) + (int(failed.group(1)) if failed else 0) == 3
    assert "no clinician has two replies" not in out
    assert main(["evaluate-model", path, "--own-examples", "2"]) == 2
    assert "--own-examples needs --model" in capsys.readouterr().err
    study.project = Project.open(path)


def test_a_judge_that_finds_no_match_counts_every_sentence_as_an_addition(
    study,
    engine,  # noqa: F811
    monkeypatch,
):
    """NO MATCH for every sentence of her reply (the judge's answer forced): EM = 0, EA = the
    reply's sentences, ED = the draft's sentences (Algorithm 1), so Edit-F1 is 0."""
    from portalreview.domain.segmenter import split_sentences

    real = sg._generate
    drafts = []

    def judge_says_no_match(ctx, name, values, grammar):
        if name == "content_match":
            drafts.append(values["draft"])
            return "NO MATCH"
        return real(ctx, name, values, grammar)

    monkeypatch.setattr(sg, "_generate", judge_says_no_match)
    comparison = oe.compare_drafts(
        study.service,
        engine,
        PromptLibrary(study.service),
        examples=2,
        params=PARAMS,
        limits=SMALL_LIMITS,
    )
    assert comparison.scores and not comparison.failed
    for score in comparison.scores:
        name = next(n for n, c in study.cases.items() if c == score.case_id)
        sentences = len(split_sentences(REPLIES[name]))
        for em, ea, ed in (score.without, score.with_examples):
            assert (em, ea) == (0, sentences) and ed >= 1
    assert comparison.figures(n_resamples=50)["with"]["f1"] == 0.0
    assert len(drafts) == sum(  # the judge was asked once per sentence of each draft's reply
        2 * len(split_sentences(REPLIES[n]))
        for n, c in study.cases.items()
        if c in {score.case_id for score in comparison.scores}
    )
