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
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from portalreview.llm.engine import Engine
from portalreview.llm.errors import Cancelled
from portalreview.llm.templates import PromptTemplate
from portalreview.metrics.urgency import margin_weighted_scores, sort_by_score

YES, NO = " YES", " NO"


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
    reuse_prefix: bool = True,
    cancel: threading.Event | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> InboxScores:
    """Ask all ordered pairs (grouped by the first patient, for prefix reuse), average both
    orders, and sort by margin-weighted wins. ``progress(done, total)`` is called after each
    ordered pair; setting ``cancel`` raises :class:`Cancelled` at the next pair."""
    keys = [p.key for p in patients]
    if len(set(keys)) != len(keys):
        raise ValueError("each inbox message needs its own key")
    started = time.perf_counter()
    total = len(patients) * (len(patients) - 1)
    asked: dict[tuple[Hashable, Hashable], AskedPair] = {}
    for first in patients:
        for second in patients:
            if first.key == second.key:
                continue
            if cancel is not None and cancel.is_set():
                raise Cancelled(f"inbox scoring cancelled after {len(asked)} of {total} pairs")
            asked[(first.key, second.key)] = ask(
                engine, template, first, second, reuse_prefix=reuse_prefix, cancel=cancel
            )
            if progress is not None:
                progress(len(asked), total)
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
        seconds=time.perf_counter() - started,
    )
