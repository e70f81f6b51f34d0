"""The inbox view's data: an inbox's messages sorted by win rate as judged so far, with the
reference level, NDCG@k / T-NDCG@k and the misplaced urgent messages (seed 002, Sections 3.1
and 4.2; the T-NDCG reading of FACTS.md). Sorted and scored with the report's code
(``metrics.urgency.inbox_scores``, ``sort_by_score``), so the PI sees the report's figures for
the same answers; messages without a reference level are listed last, unscored.

No Qt here: :func:`load_inbox` runs on a worker thread. Everything is read through the
signed-in viewer's :class:`StudyService`, so blinding is the service's: a clinician gets only
their own answers and the cases of their own pairs, and no reference level (so no NDCG and no
"misplaced" mark either); the PI gets everyone's answers and the levels.

Judgements "so far" are every saved choice, submitted or not yet (a draft that names a case
is a decision the annotator has made); gold (adjudicated) answers are not judgements.

The loaded model can sort an inbox too (:func:`model_inbox`): it is asked about every pair in
both orders (``llm.urgency.score_inbox``) and the inbox is sorted by its margin-weighted wins
(seed 002, Section 4.2); the result has the same shape, so the view shows it the same way, and
for the PI the same NDCG / T-NDCG against the reference levels.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from portalreview.llm.urgency import InboxScores, Patient
from portalreview.metrics.urgency import (
    DEFAULT_RELEVANCE,
    inbox_scores,
    ndcg_at_k,
    relevance_from_levels,
    sort_by_score,
    t_ndcg_at_k,
)
from portalreview.store.service import AnswerView, CaseView, StudyService

KIND = "urgency"
CUTOFFS = (10, 30)
#: Urgency units whose answers are read in one go (then progress is told, and Cancel heard).
READ_AT_ONCE = 500
#: Reference levels that count as urgent for the safety check: 1 (emergency now) and 2
#: (same-day care). An urgent message sorted into the bottom half of the inbox is "misplaced".
URGENT_LEVELS = frozenset({1, 2})


@dataclass(frozen=True)
class Judge:
    """Whose judgements sort the inbox: the viewer, all people, one person or a model."""

    key: str  # "me", "all", "annotator:<id>"
    label: str
    annotator_ids: tuple[int, ...]


@dataclass(frozen=True)
class InboxRow:
    position: int  # 1 = top of the sorted inbox
    case_id: int
    external_id: str
    message: str
    reference_level: int | None  # None when the viewer may not see it
    wins: int
    comparisons: int
    win_rate: float  # NaN when never compared
    misplaced: bool  # urgent (URGENT_LEVELS) and sorted into the bottom half
    score: float | None = None  # the model's margin-weighted score (model results only)


@dataclass(frozen=True)
class ModelRun:
    """How the loaded model sorted an inbox: the file, the questions asked (each pair in both
    orders), the time taken and the prompt tokens evaluated (the rest came from the cache)."""

    model_file: str
    n_questions: int
    seconds: float
    evaluated_tokens: int
    prompt_tokens: int


@dataclass(frozen=True)
class InboxResult:
    inbox: str
    judge: Judge
    rows: tuple[InboxRow, ...]
    n_pairs: int  # distinct pairs judged at least once
    n_judgements: int
    reference_visible: bool
    #: "ndcg@10", "t_ndcg@10", "ndcg@30", "t_ndcg@30" and "best_t_ndcg@k" (a perfect sort's
    #: T-NDCG, the ceiling); empty when the viewer cannot see levels or nothing is judged.
    scores: dict[str, float] = field(default_factory=dict)
    n_scored: int = 0  # messages with a reference level (what the scores rest on)
    model: ModelRun | None = None  # set when the loaded model sorted the inbox
    adaptive: bool = False  # pairs chosen adaptively: sorted by Bradley-Terry strength


def judges(service: StudyService) -> list[Judge]:
    """The choices of whose judgements to use, for this viewer. A clinician: their own only.
    The PI: all people, themselves, each person and each model pseudo-annotator that has urgency
    pairs assigned."""
    viewer = service.viewer
    me = viewer.annotator_id
    if not viewer.sees_all:
        return [Judge("me", "My judgements", (me,))] if me is not None else []
    people, models = [], []
    with_pairs = service.annotators_with_queue(KIND)
    for person in service.annotators():
        if person.id not in with_pairs:
            continue
        name = person.display_name or person.name
        if person.is_model:
            models.append(Judge(f"annotator:{person.id}", f"Model: {person.name}", (person.id,)))
        elif person.id == me:
            people.insert(0, Judge("me", "My judgements", (person.id,)))
        else:
            people.append(Judge(f"annotator:{person.id}", name, (person.id,)))
    everyone = tuple(j.annotator_ids[0] for j in people)  # people only, never the models
    out = [Judge("all", "All annotators", everyone)] if everyone else []
    return out + people + models


def load_inbox(
    service: StudyService,
    inbox: str,
    judge: Judge,
    progress: Callable[[int, int], None] | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> InboxResult:
    """Read the inbox's cases and the judge's urgency answers, and sort the inbox (worker
    thread: reads only, touches no widget). Only this inbox's pairs are read, their answers
    ``READ_AT_ONCE`` units at a time; ``progress`` counts those pairs."""
    cases = service.inboxes().get(inbox, ())
    queued, adaptive_units = _queued_units(service, inbox, judge)
    pairs = {u: pair for u, pair in service.inbox_pairs(inbox).items() if u in queued}
    ordered = sorted(pairs)
    outcomes: list[tuple[int, int]] = []
    judged: set[int] = set()
    for start in range(0, len(ordered), READ_AT_ONCE):
        if cancelled is not None and cancelled():
            raise InterruptedError("cancelled")
        chunk = ordered[start : start + READ_AT_ONCE]
        answers = service.own_answers_for_units(chunk, judge.annotator_ids)
        for unit_id in chunk:
            won = _outcomes(pairs[unit_id], answers[unit_id])
            outcomes += won
            if won:
                judged.add(unit_id)
        if progress is not None:
            progress(start + len(chunk), len(ordered))
    return sort_inbox(
        inbox,
        judge,
        cases,
        outcomes,
        n_pairs=len(judged),
        reference_visible=_sees_levels(service),
        adaptive=bool(judged & adaptive_units),
    )


def _queued_units(service: StudyService, inbox: str, judge: Judge) -> tuple[set[int], set[int]]:
    """The inbox's pairs in the judge's queues, and those of them in adaptive sets (whose
    queue holds the pairs answered and the one chosen next, not every pair of the set)."""
    units: set[int] = set()
    adaptive_units: set[int] = set()
    for annotator_id in judge.annotator_ids:
        for item in service.queue(KIND, annotator_id=annotator_id, inbox=inbox):
            units.add(item.unit_id)
            if item.adaptive:
                adaptive_units.add(item.unit_id)
    return units, adaptive_units


def _outcomes(pair: tuple[int, int], answers: Sequence[AnswerView]) -> list[tuple[int, int]]:
    """(winner, loser) of each answer that names one of the pair's cases."""
    out = []
    for answer in answers:
        chosen = answer.payload.get("more_urgent_case_id")
        if chosen in pair:
            out.append((chosen, pair[1] if chosen == pair[0] else pair[0]))
    return out


def _sees_levels(service: StudyService) -> bool:
    return service.viewer.sees_all


def sort_inbox(
    inbox: str,
    judge: Judge,
    cases: Sequence[CaseView],
    outcomes: Sequence[tuple[int, int]],
    *,
    n_pairs: int,
    reference_visible: bool,
    adaptive: bool = False,
) -> InboxResult:
    """The inbox sorted by win rate (highest first; ties in case-id order; never-compared
    messages last; ``metrics.urgency.sort_by_score``), or for an ``adaptive`` inbox (pairs
    chosen from the answers so far, ``store/adaptive.py``) by Bradley-Terry strength
    (``metrics.urgency.inbox_scores``, the report's score).

    For a viewer who may see levels the inbox is scored as the report scores it (seed 002,
    Section 4.2; docs/report.md "urgency"): the messages with a reference level come first,
    sorted by their comparisons with each other only, and NDCG@k / T-NDCG@k rest on that
    order (relevance = 6 - level, ``DEFAULT_RELEVANCE``); the messages without a level follow,
    sorted by their comparisons with every member, and are not scored. Without levels every
    message is sorted by all its comparisons."""
    cases = sorted(cases, key=lambda c: c.id)
    if not cases:
        return InboxResult(inbox, judge, (), 0, 0, reference_visible)
    ids = [c.id for c in cases]
    scored = [c.id for c in cases if reference_visible and c.reference_level in DEFAULT_RELEVANCE]
    scored_set = set(scored)
    among_scored = [o for o in outcomes if set(o) <= scored_set]
    rest = [i for i in ids if i not in scored_set]
    order, tallies = [], _tallies(rest, outcomes)
    if scored:
        order = sort_by_score(inbox_scores(scored, among_scored, adaptive=adaptive))
        tallies |= _tallies(scored, among_scored)
    if rest:
        order += sort_by_score(inbox_scores(ids, outcomes, adaptive=adaptive).loc[rest])
    result = _result(
        inbox,
        judge,
        cases,
        order,
        tallies,
        n_judgements=len(outcomes),
        n_pairs=n_pairs,
        reference_visible=reference_visible,
        scored=bool(among_scored),
    )
    return replace(result, adaptive=adaptive)


def _tallies(
    items: Sequence[int], outcomes: Sequence[tuple[int, int]]
) -> dict[int, tuple[int, int, float]]:
    """Each of ``items``' wins, comparisons and win rate (NaN when never compared) in
    ``outcomes`` (against any member)."""
    wins = Counter(winner for winner, _ in outcomes)
    played = Counter(c for outcome in outcomes for c in outcome)
    return {c: (wins[c], played[c], wins[c] / played[c] if played[c] else math.nan) for c in items}


def inbox_patients(cases: Sequence[CaseView]) -> list[Patient]:
    """The inbox's messages as the model reads them, in case-id order (the order ties keep)."""
    return [Patient(c.id, c.message, c.chart_text) for c in sorted(cases, key=lambda c: c.id)]


def model_judge(model_file: str) -> Judge:
    """The loaded model as the inbox's judge (its answers are not stored: no annotator)."""
    return Judge("model", f"the loaded model {model_file}", ())


def model_inbox(
    inbox: str,
    cases: Sequence[CaseView],
    run: InboxScores,
    *,
    model_file: str,
    reference_visible: bool,
) -> InboxResult:
    """The inbox as the model sorted it (``run`` from ``llm.urgency.score_inbox`` over
    :func:`inbox_patients`): its margin-weighted order and scores, each message's pairs won
    (the more likely patient of each pair; a pair at exactly 0.5 goes to the first), and for a
    viewer who may see levels the same NDCG / T-NDCG as a judge's order."""
    cases = sorted(cases, key=lambda c: c.id)
    if {c.id for c in cases} != set(run.order):
        raise ValueError("the model's run is of other messages than this inbox's")
    outcomes = [(p.more_urgent, p.b if p.more_urgent == p.a else p.a) for p in run.pairs]
    return _result(
        inbox,
        model_judge(model_file),
        cases,
        list(run.order),
        _tallies([c.id for c in cases], outcomes),
        n_judgements=len(outcomes),
        n_pairs=len(run.pairs),
        reference_visible=reference_visible,
        scored=bool(outcomes),
        model_scores=run.scores,
        model=ModelRun(
            model_file,
            len(cases) * (len(cases) - 1),
            run.seconds,
            run.evaluated_tokens,
            run.prompt_tokens,
        ),
    )


def _result(
    inbox: str,
    judge: Judge,
    cases: Sequence[CaseView],
    order: Sequence[int],
    tallies: dict[int, tuple[int, int, float]],
    *,
    n_judgements: int,
    n_pairs: int,
    reference_visible: bool,
    scored: bool,
    model_scores: dict | None = None,
    model: ModelRun | None = None,
) -> InboxResult:
    """Rows in ``order`` with each message's wins, comparisons and win rate from ``tallies``,
    and, when the viewer may see levels and ``scored`` (comparisons to score), NDCG@k /
    T-NDCG@k of the messages with a level in that order and the misplaced urgent messages
    (sorted into the bottom half of those)."""
    by_id = {c.id: c for c in cases}
    levels = [by_id[c].reference_level if reference_visible else None for c in order]
    ranked = [c for c, level in zip(order, levels, strict=True) if level in DEFAULT_RELEVANCE]
    place = {c: i for i, c in enumerate(ranked)}
    bottom_half = (len(ranked) + 1) // 2  # places (0-based) from here on are the bottom half
    rows = []
    for index, (case_id, level) in enumerate(zip(order, levels, strict=True)):
        case = by_id[case_id]
        wins, comparisons, rate = tallies[case_id]
        rows.append(
            InboxRow(
                position=index + 1,
                case_id=case_id,
                external_id=case.external_id,
                message=case.message,
                reference_level=level,
                wins=wins,
                comparisons=comparisons,
                win_rate=float(rate),
                misplaced=level in URGENT_LEVELS and place[case_id] >= bottom_half,
                score=None if model_scores is None else float(model_scores[case_id]),
            )
        )
    scores: dict[str, float] = {}
    if reference_visible and scored and ranked:
        relevance = relevance_from_levels([by_id[c].reference_level for c in ranked])
        ideal = sorted(relevance, reverse=True)
        for k in CUTOFFS:
            scores[f"ndcg@{k}"] = ndcg_at_k(relevance, k)
            scores[f"t_ndcg@{k}"] = t_ndcg_at_k(relevance, k)
            scores[f"best_t_ndcg@{k}"] = t_ndcg_at_k(ideal, k)
    return InboxResult(
        inbox=inbox,
        judge=judge,
        rows=tuple(rows),
        n_pairs=n_pairs,
        n_judgements=n_judgements,
        reference_visible=reference_visible,
        scores=scores,
        n_scored=len(ranked) if scores else 0,
        model=model,
    )


def format_rate(rate: float) -> str:
    return "–" if math.isnan(rate) else f"{rate:.0%}"
