"""Urgency as probabilities, and sorting an inbox with them (seed 002, PMR-Bench).

For a pair, the model is asked "does patient A need care before patient B?" and the answer is
read from the next-token distribution: P(YES) renormalized over YES and NO (seed 002, Section
3.3: UrgentSFT's YES probability; nothing is generated). The question is asked in both orders
and the two readings averaged, which cancels a preference for whichever patient is shown
first: ``p(A first) = (P_yes(A, B) + P_no(B, A)) / 2``.

An inbox of n messages is scored from all n(n-1) ordered pairs with the margin-weighted wins of
seed 002, Section 4.2 ("Inference"): for each pair the more likely patient gains
``1 + delta``, delta = p - (1 - p) (:func:`portalreview.metrics.urgency.margin_weighted_scores`),
and the inbox is sorted by total score.

Cost: the prompt is cut into segments (instructions | patient A | patient B and question). The
ordered pairs are visited grouped by patient A, so the instructions are evaluated once, each
patient-A block once per group, and only patient B and the question for each pair; a fresh
evaluation of every pair would pay for the whole prompt 870 times in a 30-message inbox.

The inbox layout (``layout="inbox"``, template ``urgency_inbox``; opt-in) lists every message
once, numbered, and asks each ordered question as a short suffix ("Does patient 7 need care
before patient 12?"), so the inbox is evaluated once and each question costs only the tokens in
which it differs from the previous one. It is a different question: the model judges each pair
with the whole inbox in view, so its probabilities are not the pairwise ones (agreement with
the reference has to be measured, not assumed), and asking both orders cancels a preference for
the patient named first but not one for the patient listed first. The whole inbox must fit the
model's context; :class:`InboxTooLongError` says by how much it does not, before any work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import partial

from portalreview.llm.chat import keep_cue_mark
from portalreview.llm.engine import ChoiceProbabilities, Engine
from portalreview.llm.errors import Cancelled, PromptTooLongError, TemplateError
from portalreview.llm.templates import PLACEHOLDER, PromptTemplate
from portalreview.metrics.urgency import margin_weighted_scores, sort_by_score

YES, NO = " YES", " NO"
#: How an inbox is asked, and the template kind each way needs.
LAYOUT_TEMPLATES = {"pairs": "urgency_pair", "inbox": "urgency_inbox"}


class InboxTooLongError(PromptTooLongError):
    """The inbox layout needs the whole inbox in the model's context, and it does not fit.
    ``needed``: tokens of the longest prompt (inbox and question); ``n_ctx``: the context."""

    def __init__(self, message: str, needed: int, n_ctx: int) -> None:
        super().__init__(message)
        self.needed = needed
        self.n_ctx = n_ctx


@dataclass(frozen=True)
class Patient:
    """One inbox message with its chart text; ``key`` identifies it (a case id)."""

    key: Hashable
    message: str
    chart: str = ""


@dataclass(frozen=True)
class AskedPair:
    """One ordered question: P(YES) that ``first`` needs care before ``second``."""

    first: Hashable
    second: Hashable
    p_yes: float
    mass: float
    evaluated_tokens: int
    prompt_tokens: int


@dataclass(frozen=True)
class PairProbability:
    """Both orders of one pair and their average."""

    a: Hashable
    b: Hashable
    p_yes_ab: float  # asked with A shown first
    p_yes_ba: float  # asked with B shown first
    mass: float  # the smaller YES+NO mass of the two readings

    @property
    def p_a_first(self) -> float:
        """P(A needs care before B), position bias averaged out."""
        return 0.5 * (self.p_yes_ab + (1.0 - self.p_yes_ba))

    @property
    def more_urgent(self) -> Hashable:
        return self.a if self.p_a_first >= 0.5 else self.b


@dataclass(frozen=True)
class InboxScores:
    """An inbox sorted by the model: ``order`` most urgent first, the margin-weighted
    ``scores``, every pair, and what the evaluation cost."""

    order: list[Hashable]
    scores: dict[Hashable, float]
    pairs: list[PairProbability]
    evaluated_tokens: int
    prompt_tokens: int
    seconds: float


def _values(first: Patient, second: Patient) -> dict[str, str]:
    return {
        "chart_a": first.chart,
        "message_a": first.message,
        "chart_b": second.chart,
        "message_b": second.message,
    }


def ask(
    engine: Engine,
    template: PromptTemplate,
    first: Patient,
    second: Patient,
    *,
    reuse_prefix: bool = True,
    cancel: threading.Event | None = None,
) -> AskedPair:
    """One ordered question, answered from the next-token distribution."""
    segments = template.render(_values(first, second))
    result = engine.choice_probabilities(
        segments, (YES, NO), reuse_prefix=reuse_prefix, cancel=cancel
    )
    return _asked(first, second, result)


def _asked(first: Patient, second: Patient, result: ChoiceProbabilities) -> AskedPair:
    return AskedPair(
        first.key,
        second.key,
        result.probs[YES],
        result.mass,
        result.evaluated_tokens,
        result.prompt_tokens,
    )


def pair_probability(
    engine: Engine,
    template: PromptTemplate,
    a: Patient,
    b: Patient,
    *,
    reuse_prefix: bool = True,
    cancel: threading.Event | None = None,
) -> PairProbability:
    """P(A before B) asked in both orders (for one urgency unit)."""
    ab = ask(engine, template, a, b, reuse_prefix=reuse_prefix, cancel=cancel)
    ba = ask(engine, template, b, a, reuse_prefix=reuse_prefix, cancel=cancel)
    return PairProbability(a.key, b.key, ab.p_yes, ba.p_yes, min(ab.mass, ba.mass))


def score_inbox(
    engine: Engine,
    template: PromptTemplate,
    patients: Sequence[Patient],
    *,
    layout: str = "pairs",
    reuse_prefix: bool = True,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> InboxScores:
    """Ask all ordered pairs (grouped by the first patient, for prefix reuse), average both
    orders, and sort by margin-weighted wins. ``layout``: "pairs" (seed 002: each pair shown
    alone, template ``urgency_pair``) or "inbox" (the whole inbox shown once, each question a
    short suffix, template ``urgency_inbox``; raises :class:`InboxTooLongError` before any work
    when the inbox does not fit the context). ``progress(done, total)`` is called after each
    ordered pair; setting ``cancel`` raises :class:`Cancelled` at the next pair."""
    keys = [p.key for p in patients]
    if len(set(keys)) != len(keys):
        raise ValueError("each inbox message needs its own key")
    _check_layout(layout, template)
    started = time.perf_counter()
    asker = (
        _inbox_asker(engine, template, patients, reuse_prefix, cancel)
        if layout == "inbox"
        else partial(ask, engine, template, reuse_prefix=reuse_prefix, cancel=cancel)
    )
    total = len(patients) * (len(patients) - 1)
    asked: dict[tuple[Hashable, Hashable], AskedPair] = {}
    for first in patients:
        for second in patients:
            if first.key == second.key:
                continue
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"inbox scoring cancelled after {len(asked)} of {total} pairs")
            asked[(first.key, second.key)] = asker(first, second)
            if progress is not None:
                progress(len(asked), total)
    return _scored(keys, asked, time.perf_counter() - started)


def _check_layout(layout: str, template: PromptTemplate) -> None:
    wanted = LAYOUT_TEMPLATES.get(layout)
    if wanted is None:
        raise ValueError(f"unknown inbox layout {layout!r}; known: {', '.join(LAYOUT_TEMPLATES)}")
    if template.kind != wanted:
        raise TemplateError(
            f"the {layout} layout asks with a {wanted} template, not {template.kind} "
            f"({template.key})"
        )


def _scored(
    keys: list[Hashable], asked: dict[tuple[Hashable, Hashable], AskedPair], seconds: float
) -> InboxScores:
    """Both orders of each pair averaged, margin-weighted wins, the inbox sorted by them."""
    pairs = [
        PairProbability(
            a,
            b,
            asked[(a, b)].p_yes,
            asked[(b, a)].p_yes,
            min(asked[(a, b)].mass, asked[(b, a)].mass),
        )
        for i, a in enumerate(keys)
        for b in keys[i + 1 :]
    ]
    judgments = [(p.a, p.b, p.p_a_first, 1.0 - p.p_a_first) for p in pairs]
    scores = margin_weighted_scores(keys, judgments, normalize="sum") if len(keys) > 1 else None
    score_map = {k: float(scores[k]) if scores is not None else 0.0 for k in keys}
    return InboxScores(
        order=sort_by_score(score_map),
        scores=score_map,
        pairs=pairs,
        evaluated_tokens=sum(x.evaluated_tokens for x in asked.values()),
        prompt_tokens=sum(x.prompt_tokens for x in asked.values()),
        seconds=seconds,
    )


# --- the inbox layout ---------------------------------------------------------------------------


def inbox_text(patients: Sequence[Patient]) -> str:
    """Every message once, numbered from 1 in inbox order (the numbers the questions use),
    each with its chart summary when there is one."""
    blocks = []
    for number, patient in enumerate(patients, start=1):
        chart = f"{patient.chart}\n" if patient.chart.strip() else ""
        blocks.append(f"Patient {number}\n{chart}Message: {patient.message}")
    return "\n\n".join(blocks)


def inbox_prompt(template: PromptTemplate, listed: str, first: int, second: int) -> list[str]:
    """One question of the inbox layout as two segments: everything up to the line on which
    the question starts (instructions and the listed inbox: the same for every question, so
    the engine keeps it), then that line to the end. Cutting at the line's start keeps the
    question's words in one segment, tokenized as a model saw such text in training."""
    _check_inbox_template(template)
    segments = template.render({"patients": listed, "first": str(first), "second": str(second)})
    head, question = "".join(segments[:-1]), segments[-1]
    cut = head.rfind("\n") + 1
    return [head[:cut], keep_cue_mark(question, head[cut:] + question)]


def _check_inbox_template(template: PromptTemplate) -> None:
    first_seen: dict[str, int] = {}
    for match in PLACEHOLDER.finditer(template.text):
        first_seen.setdefault(match.group(1), match.start())
    question = min(first_seen.get("first", 0), first_seen.get("second", 0))
    if first_seen.get("patients", 0) > question:
        raise TemplateError(
            f"the {template.key} template must list {{{{patients}}}} before the question "
            "({{first}}, {{second}}): the inbox is the prefix every question shares"
        )


def inbox_context_tokens(
    engine: Engine, template: PromptTemplate, patients: Sequence[Patient]
) -> int:
    """Tokens of the longest prompt the inbox layout asks (the listed inbox and the longest
    question), counted with the model's tokenizer as the engine counts a prompt."""
    listed = inbox_text(patients)
    n = len(patients)
    prefix = inbox_prompt(template, listed, 1, 2)[0]
    longest = max(
        (
            len(engine.tokenize(inbox_prompt(template, listed, i, j)[1]))
            for i in range(1, n + 1)
            for j in range(1, n + 1)
            if i != j
        ),
        default=0,
    )
    # the chat format's markup, when the model has one (0 for plain completion)
    markup = len(engine.prompt_tokens(["x"])) - len(engine.tokenize("x", bos=True))
    return len(engine.tokenize(prefix, bos=True)) + longest + markup


def check_inbox_fits(engine: Engine, template: PromptTemplate, patients: Sequence[Patient]) -> int:
    """Raise :class:`InboxTooLongError` (naming both sizes) when the inbox layout's longest
    prompt does not fit the model's context; return its token count otherwise."""
    needed = inbox_context_tokens(engine, template, patients)
    n_ctx = engine.info.n_ctx
    if needed >= n_ctx:
        raise InboxTooLongError(
            f"the whole inbox does not fit the model's context: {len(patients)} messages with "
            f"the instructions and the longest question take {needed} tokens, and the context "
            f"holds {n_ctx} (a prompt must be shorter than it). Ask pair by pair instead, "
            "split the inbox, or load the model with a larger context.",
            needed,
            n_ctx,
        )
    return needed


def _inbox_asker(
    engine: Engine,
    template: PromptTemplate,
    patients: Sequence[Patient],
    reuse_prefix: bool,
    cancel: threading.Event | None,
) -> Callable[[Patient, Patient], AskedPair]:
    """Check that the inbox fits, then answer ordered questions by the patients' numbers."""
    check_inbox_fits(engine, template, patients)
    listed = inbox_text(patients)
    number = {p.key: i for i, p in enumerate(patients, start=1)}

    def asker(first: Patient, second: Patient) -> AskedPair:
        segments = inbox_prompt(template, listed, number[first.key], number[second.key])
        result = engine.choice_probabilities(
            segments, (YES, NO), reuse_prefix=reuse_prefix, cancel=cancel
        )
        return _asked(first, second, result)

    return asker
