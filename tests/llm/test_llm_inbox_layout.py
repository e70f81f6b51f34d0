"""The inbox layout of urgency scoring (``score_inbox(..., layout="inbox")``) with the tiny
random model: every message listed once, each ordered question a short suffix. The prompts are
rebuilt here by hand from the bundled template text; the token counts are recomputed from the
tokenizer (what the engine must evaluate after the previous prompt), the probabilities from a
fresh evaluation of the same prompt, and the order from ``metrics.urgency``. Random weights:
the tests compare routes and count, never judge the order."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from llm_testkit import engine, tiny_model_file  # noqa: F401 - fixtures

from portalreview.llm import urgency
from portalreview.llm.engine import Engine
from portalreview.llm.errors import Cancelled, PromptTooLongError, TemplateError
from portalreview.llm.templates import PromptLibrary, PromptTemplate, default_template, default_text
from portalreview.metrics.urgency import margin_weighted_scores, sort_by_score
from portalreview.store.project import Project
from portalreview.store.service import StudyService

YES_NO = (" YES", " NO")
CHARTS = ["###Demographics###\nAge: 61", "", "###Problems###\nAsthma", "Age: 30", "Age: 85"]
MESSAGES = ["chest pain now", "refill please", "fever and chills", "form for work", "rash on arm"]
INBOX = [
    urgency.Patient(f"case-{i}", text, chart)
    for i, (text, chart) in enumerate(zip(MESSAGES, CHARTS, strict=True))
]
UNRELATED = "Patient message: where is my letter? Doctor reply:"


def listing(patients) -> str:
    """The numbered inbox as the template's instructions describe it, written out by hand."""
    blocks = []
    for number, p in enumerate(patients, start=1):
        lines = [f"Patient {number}"] + ([p.chart] if p.chart else []) + [f"Message: {p.message}"]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def segments_by_hand(patients, first: int, second: int) -> list[str]:
    """[instructions and inbox, question line]: the bundled text filled with str.replace and
    cut where the question's line starts."""
    text = default_text("urgency_inbox").rstrip()
    full = (
        text.replace("{{patients}}", listing(patients))
        .replace("{{first}}", str(first))
        .replace("{{second}}", str(second))
    )
    cut = full.index("Does patient")
    return [full[:cut], full[cut:]]


def ordered_numbers(n: int) -> list[tuple[int, int]]:
    """The questions in the order the scorer asks them: grouped by the first patient."""
    return [(i, j) for i in range(1, n + 1) for j in range(1, n + 1) if i != j]


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def spy_on(engine, monkeypatch) -> list[tuple[list[str], object]]:  # noqa: F811
    """Record every (segments, result) the engine answers during the test."""
    seen = []
    real = engine.choice_probabilities

    def recording(prompt, choices, **kwargs):
        result = real(prompt, choices, **kwargs)
        seen.append((list(prompt), result))
        return result

    monkeypatch.setattr(engine, "choice_probabilities", recording)
    return seen


def score(engine, patients=INBOX, **kwargs):  # noqa: F811
    return urgency.score_inbox(
        engine, default_template("urgency_inbox"), patients, layout="inbox", **kwargs
    )


def test_the_inbox_is_listed_once_and_each_question_costs_what_differs(engine, monkeypatch):  # noqa: F811
    engine.next_token_logprobs(UNRELATED, reuse_prefix=False)  # a known cache to start from
    seen = spy_on(engine, monkeypatch)
    calls = []
    run = score(engine, progress=lambda done, total: calls.append((done, total)))
    n = len(INBOX)
    questions = ordered_numbers(n)
    assert calls == [(k, n * (n - 1)) for k in range(1, n * (n - 1) + 1)]  # 5 * 4 = 20
    by_hand = [segments_by_hand(INBOX, i, j) for i, j in questions]
    assert [segments for segments, _ in seen] == by_hand

    # what the engine must evaluate: the prompt past what it shares with the cached prompt
    # (the previous one, or the unrelated prompt before the first question)
    previous = engine.prompt_tokens(UNRELATED)
    prefix_tokens = len(engine.prompt_tokens([segments_by_hand(INBOX, 1, 2)[0]]))
    expected = []
    for segments in by_hand:
        tokens = engine.prompt_tokens(segments)
        expected.append(len(tokens) - common_prefix(previous, tokens[:-1]))
        previous = tokens
    evaluated = [result.evaluated_tokens for _, result in seen]
    assert evaluated == expected
    suffix_tokens = [len(engine.tokenize(segments[1])) for segments in by_hand]
    # after the first question, only (part of) the question line: the inbox stays cached
    assert all(1 <= e <= s for e, s in zip(evaluated[1:], suffix_tokens[1:], strict=True))
    # the first question pays for the whole inbox: it shares at most BOS with the unrelated one
    assert common_prefix(engine.prompt_tokens(UNRELATED), engine.prompt_tokens(by_hand[0])) <= 1
    assert evaluated[0] >= prefix_tokens
    assert run.evaluated_tokens == sum(expected) <= prefix_tokens + sum(suffix_tokens)
    assert run.prompt_tokens == sum(
        len(engine.prompt_tokens(segments_by_hand(INBOX, i, j))) for i, j in questions
    )
    assert run.evaluated_tokens < 0.2 * run.prompt_tokens


def test_probabilities_equal_a_fresh_evaluation_and_the_order_follows_them(engine):  # noqa: F811
    run = score(engine)
    number = {p.key: k for k, p in enumerate(INBOX, start=1)}

    def fresh(a, b):
        return engine.choice_probabilities(
            segments_by_hand(INBOX, number[a], number[b]), YES_NO, reuse_prefix=False
        )

    judgments = []
    assert [(p.a, p.b) for p in run.pairs] == [
        (a.key, b.key) for k, a in enumerate(INBOX) for b in INBOX[k + 1 :]
    ]
    for pair in run.pairs:
        ab, ba = fresh(pair.a, pair.b), fresh(pair.b, pair.a)
        assert pair.p_yes_ab == pytest.approx(ab.probs[" YES"], abs=1e-5)
        assert pair.p_yes_ba == pytest.approx(ba.probs[" YES"], abs=1e-5)
        assert pair.mass == pytest.approx(min(ab.mass, ba.mass), rel=1e-4)
        p_a_first = 0.5 * (ab.probs[" YES"] + ba.probs[" NO"])
        assert pair.p_a_first == pytest.approx(p_a_first, abs=1e-5)
        judgments.append((pair.a, pair.b, p_a_first, 1.0 - p_a_first))
    keys = [p.key for p in INBOX]
    expected = margin_weighted_scores(keys, judgments, normalize="sum")
    for key in keys:
        assert run.scores[key] == pytest.approx(float(expected[key]), abs=1e-4)
    assert run.order == sort_by_score({k: float(expected[k]) for k in keys})
    # each pair gives the winner 1 + |p - (1 - p)| (seed 002's margin-weighted wins)
    won = sum(1 + abs(2 * j[2] - 1) for j in judgments if j[2] != 0.5)
    assert sum(run.scores.values()) == pytest.approx(won, abs=1e-4)


def test_an_inbox_longer_than_the_context_is_refused_before_any_work(engine, tmp_path_factory):  # noqa: F811
    long_inbox = [
        urgency.Patient(k, f"message {k}: " + "my cough is worse at night " * 12, f"Age: {40 + k}")
        for k in range(6)
    ]
    # the longest prompt, counted by the big-context engine with the prompts built by hand
    needed = max(
        len(engine.prompt_tokens(segments_by_hand(long_inbox, i, j)))
        for i, j in ordered_numbers(len(long_inbox))
    )
    small = Engine.load(tiny_model_file(tmp_path_factory), n_ctx=512, gpu=False, hash_cache=False)
    try:
        assert needed >= small.info.n_ctx  # the case under test: it cannot fit
        calls = []
        with pytest.raises(urgency.InboxTooLongError) as refused:
            score(small, long_inbox, progress=lambda d, t: calls.append(d))
        message = str(refused.value)
        assert f"6 messages with the instructions and the longest question take {needed}" in message
        assert f"the context holds {small.info.n_ctx}" in message
        assert "Ask pair by pair instead" in message
        assert (refused.value.needed, refused.value.n_ctx) == (needed, small.info.n_ctx)
        assert isinstance(refused.value, PromptTooLongError)
        assert calls == [] and small.cached_tokens == 0  # nothing was evaluated
        # the fallback the message offers works on the same engine: each pair fits alone
        pairs = urgency.score_inbox(small, default_template("urgency_pair"), long_inbox)
        assert len(pairs.pairs) == 15  # 6 * 5 / 2
    finally:
        small.close()


def test_the_check_agrees_with_the_engines_own_count(engine):  # noqa: F811
    needed = max(
        len(engine.prompt_tokens(segments_by_hand(INBOX, i, j)))
        for i, j in ordered_numbers(len(INBOX))
    )
    template = default_template("urgency_inbox")
    assert urgency.inbox_context_tokens(engine, template, INBOX) == needed
    assert urgency.check_inbox_fits(engine, template, INBOX) == needed < engine.info.n_ctx


def test_cancel_stops_at_the_next_question(engine):  # noqa: F811
    cancel = threading.Event()
    with pytest.raises(Cancelled, match="after 3 of 20 pairs"):
        score(engine, cancel=cancel, progress=lambda d, t: cancel.set() if d == 3 else None)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Cancelled):
        score(engine, cancel=cancel)


def test_a_layout_needs_its_own_template_kind(engine):  # noqa: F811
    with pytest.raises(TemplateError, match="inbox layout asks with a urgency_inbox template"):
        urgency.score_inbox(engine, default_template("urgency_pair"), INBOX, layout="inbox")
    with pytest.raises(TemplateError, match="pairs layout asks with a urgency_pair template"):
        urgency.score_inbox(engine, default_template("urgency_inbox"), INBOX)
    with pytest.raises(ValueError, match="unknown inbox layout 'zigzag'; known: pairs, inbox"):
        urgency.score_inbox(engine, default_template("urgency_pair"), INBOX, layout="zigzag")
    backwards = PromptTemplate(
        "urgency_inbox",
        "backwards",
        "Is {{first}} before {{second}}?\n{{patients}}\nAnswer:",
        "backwards@v1",
    )
    with pytest.raises(TemplateError, match=r"must list \{\{patients\}\} before the question"):
        urgency.score_inbox(engine, backwards, INBOX, layout="inbox")


def test_a_project_made_before_the_inbox_template_uses_the_bundled_one(tmp_path):
    path = tmp_path / "old.prproj"
    shutil.copy(Path(__file__).parents[1] / "store" / "data" / "v1-small.prproj", path)
    with Project.open(path) as project:
        library = PromptLibrary(StudyService(project))
        assert library.template("urgency_inbox").key == "urgency_inbox@default"
        assert "urgency_inbox" in library.install_defaults()
        stored = library.template("urgency_inbox")
        assert stored.key == "urgency_inbox@v1"
        assert stored.text == default_text("urgency_inbox")
