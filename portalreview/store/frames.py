"""A project's answers as pandas DataFrames, one long table per kind, for the measures.

Each function reads with a few bulk queries (no query per answer), so a full report on a
study of 10,000 cases stays fast. Only the PI's or the system's view may read these: they hold
every annotator's answers and every draft's source.

By default only submitted answers count; ``include_drafts=True`` adds unsubmitted ones. Gold
(adjudicated) answers carry ``is_gold=True`` and are never mixed into agreement by the callers.
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from sqlalchemy import Boolean, Select, String, and_, func, select
from sqlalchemy.orm import Session

from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    Case,
    CaseTag,
    EmpathyAnswer,
    EppcLabel,
    EppcSpan,
    Fact,
    MatchDecision,
    MatchSpan,
    RankCriterion,
    RankEntry,
    RespondAnswer,
    RespondPart,
    Response,
    Sentence,
    SentenceTheme,
    Unit,
    UnitSet,
    UrgencyAnswer,
)
from portalreview.store.project import Project


@dataclass(frozen=True)
class StudyFrames:
    """Every table the analysis layer needs, read in one consistent snapshot."""

    answers: pd.DataFrame  # one row per answer: answer_id, unit_id, kind, annotator, ...
    units: pd.DataFrame  # one row per unit: unit_id, kind, unit_set, case_id, ...
    cases: pd.DataFrame  # case_id, external_id, urgency_level, tags (dict)
    responses: pd.DataFrame  # response_id, case_id, external_id, author_kind, author, ...
    sentences: pd.DataFrame  # sentence_id, owner response/case, position, start, end, text
    respond_parts: pd.DataFrame  # answer_id, theme, text
    respond_answers: pd.DataFrame  # answer_id, mode, notes, base_response_id, final_text
    rank_entries: pd.DataFrame  # answer_id, response_id, rank, correct, criteria (tuple)
    match_decisions: pd.DataFrame  # answer_id, sentence_id, spans (tuple of (start, end))
    sentence_themes: pd.DataFrame  # answer_id, sentence_id, theme
    urgency: pd.DataFrame  # answer_id, more_urgent_case_id, ask_second
    eppc_labels: pd.DataFrame  # answer_id, code, subcode, spans (tuple of (start, end))
    empathy: pd.DataFrame  # answer_id, more_empathetic_response_id (NaN = equal)
    facts: pd.DataFrame  # answer_id, side, position, text, entailed, error_category
    #: Values the analyses derive from these frames once and share (e.g. response sources).
    memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)


def _raw_rows(session: Session, query: Select) -> list[tuple]:
    """The rows of ``query`` as plain tuples, fetched through the driver's own cursor.

    The query runs inside the session's transaction (the same snapshot as every other read of
    ``read_frames``) but skips SQLAlchemy's per-row result processing, which costs more than
    the query itself on large studies. Values are SQLite's: a Boolean column comes back as
    0 / 1 (:func:`_column` converts them).
    """
    sql = str(query.compile(dialect=session.get_bind().dialect, compile_kwargs=_LITERAL))
    cursor = session.connection().connection.dbapi_connection.cursor()
    try:
        return cursor.execute(sql).fetchall()
    finally:
        cursor.close()


_LITERAL = {"literal_binds": True}


def _column(values: tuple, sql_type: Any) -> Any:
    """One column of driver values as the array pandas would infer from the same Python
    values (a frame built from row tuples), but built column-wise at C speed.

    Text: pandas' ``str`` dtype (None as NaN); numbers: int64 / float64, float64 with NaN for
    NULLs; a Boolean: ``bool``, or object True / False / None when it holds NULLs. A column
    that is all NULL stays an object column of None, as pandas leaves it. Values are taken to
    be of their column's type (the models write them so).
    """
    n, nulls = len(values), values.count(None)
    if nulls == n:
        return np.array(values, dtype=object)
    if isinstance(sql_type, String):  # Text is a String
        return pd.array(values, dtype="str")
    if isinstance(sql_type, Boolean):
        if nulls:
            return np.array([None if v is None else bool(v) for v in values], dtype=object)
        return np.array(values).astype(bool)
    if nulls:  # numbers with NULLs
        return np.array(values, dtype=float)
    return np.array(values)


def _frame(
    session: Session,
    query: Select,
    columns: list[str],
    convert: Mapping[str, Callable[[tuple], Any]] | None = None,
) -> pd.DataFrame:
    """The rows of ``query`` as a DataFrame with the given column names; ``convert`` maps a
    column name to a function that makes that column from its tuple of driver values."""
    # Plain tuples from the driver, turned into typed columns: building a frame from
    # SQLAlchemy Row objects, or letting pandas infer every column from row tuples, is
    # several times slower on 10,000-case studies.
    rows = _raw_rows(session, query)
    convert = convert or {}
    if not rows:
        frame = pd.DataFrame(rows, columns=columns)
        return frame.assign(**{c: [] for c in convert}).astype({c: object for c in convert})
    types = [c.type for c in query.selected_columns]
    data = {
        name: convert[name](values) if name in convert else _column(values, sql_type)
        for name, values, sql_type in zip(columns, zip(*rows, strict=True), types, strict=True)
    }
    return pd.DataFrame(data)


def _answers(session: Session, include_drafts: bool) -> pd.DataFrame:
    query = (
        select(
            Answer.id,
            Answer.unit_id,
            Answer.kind,
            Annotator.name,
            Annotator.is_model,
            Answer.is_gold,
            Answer.status,
            Answer.active_seconds,
            Answer.flagged,
            Answer.suggestion_use,
            Assignment.presentation_json,
        )
        .join(Annotator, Annotator.id == Answer.annotator_id)
        .join(
            Assignment,
            and_(
                Assignment.unit_id == Answer.unit_id, Assignment.annotator_id == Answer.annotator_id
            ),
        )
        .order_by(Answer.id)
    )
    if not include_drafts:
        query = query.where(Answer.status == "submitted")
    return _frame(
        session,
        query,
        [
            "answer_id",
            "unit_id",
            "kind",
            "annotator",
            "is_model",
            "is_gold",
            "status",
            "active_seconds",
            "flagged",
            "suggestion_use",
            "presentation",
        ],
        convert={"presentation": _parsed_json},
    )


def _parsed_json(texts: tuple[str, ...]) -> np.ndarray:
    """Each JSON text parsed (an object array of dicts), every distinct text once: most
    assignments share a handful of presentations ("{}", a swap flag). Rows with the same text
    share one dict: read it, never change it in place."""
    codes, distinct = pd.factorize(np.array(texts, dtype=object))
    parsed = np.empty(len(distinct), dtype=object)
    for i, text in enumerate(distinct.tolist()):
        parsed[i] = json.loads(text)  # one by one: a JSON list must stay one object
    return parsed[codes]


def _units(session: Session) -> pd.DataFrame:
    return _frame(
        session,
        select(
            Unit.id,
            Unit.kind,
            UnitSet.name,
            Unit.position,
            Unit.batch,
            Unit.case_id,
            Unit.case_b_id,
            Unit.response_id,
            Unit.response_b_id,
            Unit.sentence_id,
        )
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .order_by(Unit.id),
        [
            "unit_id",
            "kind",
            "unit_set",
            "position",
            "batch",
            "case_id",
            "case_b_id",
            "response_id",
            "response_b_id",
            "sentence_id",
        ],
    )


def _cases(session: Session) -> pd.DataFrame:
    cases = _frame(
        session,
        select(
            Case.id,
            Case.external_id,
            Case.urgency_level,
            Case.age_band,
            Case.gender,
            Case.source_dataset,
        ).order_by(Case.id),
        ["case_id", "external_id", "urgency_level", "age_band", "gender", "source_dataset"],
    )
    tags: dict[int, dict[str, list[str]]] = {}
    query = select(CaseTag.case_id, CaseTag.key, CaseTag.value)
    for case_id, key, value in _raw_rows(session, query):
        tags.setdefault(case_id, {}).setdefault(key, []).append(value)
    cases["tags"] = cases["case_id"].map(lambda c: tags.get(c, {}))
    return cases


def _grouped_spans(session: Session, query: Select) -> dict[tuple, tuple]:
    """{(answer_id, key): ((start, end), ...)} from rows (answer_id, key, start, end), each
    group's spans sorted."""
    out: dict[tuple, tuple] = {}
    for answer, key, start, end in _raw_rows(session, query):
        got = out.get((answer, key))
        out[(answer, key)] = ((start, end),) if got is None else (*got, (start, end))
    return {k: v if len(v) == 1 else tuple(sorted(v)) for k, v in out.items()}


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for the block (reference counting still frees
    memory at once), then restore it as it was.

    Reading a large study creates millions of row tuples in a few seconds; each automatic
    collection walks every live container, so with the collector on, reading 10,000 cases
    spends about as long collecting as reading. Nothing read here forms reference cycles.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_frames(project: Project, include_drafts: bool = False) -> StudyFrames:
    """Read the whole study into DataFrames (PI / system use)."""
    with paused_gc():
        return _read(project, include_drafts)


def _read(project: Project, include_drafts: bool) -> StudyFrames:
    with project.read() as s:
        criteria: dict[tuple[int, int], list[str]] = {}
        for answer_id, response_id, criterion in _raw_rows(
            s,
            select(RankCriterion.answer_id, RankCriterion.response_id, RankCriterion.criterion_id),
        ):
            criteria.setdefault((answer_id, response_id), []).append(criterion)
        rank = _frame(
            s,
            select(RankEntry.answer_id, RankEntry.response_id, RankEntry.rank, RankEntry.correct),
            ["answer_id", "response_id", "rank", "correct"],
        )
        rank["criteria"] = [
            tuple(sorted(criteria.get((a, r), ())))
            for a, r in zip(rank.answer_id, rank.response_id, strict=True)
        ]
        match_spans = _grouped_spans(
            s, select(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start, MatchSpan.end)
        )
        decisions = _frame(
            s,
            select(MatchDecision.answer_id, MatchDecision.sentence_id),
            ["answer_id", "sentence_id"],
        )
        decisions["spans"] = [
            match_spans.get((a, x), ())
            for a, x in zip(decisions.answer_id, decisions.sentence_id, strict=True)
        ]
        eppc_spans = _grouped_spans(
            s, select(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start, EppcSpan.end)
        )
        eppc = _frame(
            s,
            select(EppcLabel.answer_id, EppcLabel.code_id, EppcLabel.subcode_id),
            ["answer_id", "code", "subcode"],
        )
        eppc["spans"] = [
            eppc_spans.get((a, c), ()) for a, c in zip(eppc.answer_id, eppc.code, strict=True)
        ]
        answers = _answers(s, include_drafts)
        n_stored = _raw_rows(s, select(func.count()).select_from(Answer))[0][0]
        frames = StudyFrames(
            answers=answers,
            units=_units(s),
            cases=_cases(s),
            responses=_frame(
                s,
                select(
                    Response.id,
                    Response.case_id,
                    Response.external_id,
                    Response.author_kind,
                    Response.author,
                    Response.source,
                    Response.production,
                    Response.text,
                ),
                [
                    "response_id",
                    "case_id",
                    "external_id",
                    "author_kind",
                    "author",
                    "source",
                    "production",
                    "text",
                ],
            ),
            sentences=_frame(
                s,
                select(
                    Sentence.id,
                    Sentence.case_id,
                    Sentence.response_id,
                    Sentence.position,
                    Sentence.start,
                    Sentence.end,
                    Sentence.text,
                ),
                ["sentence_id", "case_id", "response_id", "position", "start", "end", "text"],
            ),
            respond_parts=_frame(
                s,
                select(RespondPart.answer_id, RespondPart.theme_id, RespondPart.text),
                ["answer_id", "theme", "text"],
            ),
            respond_answers=_frame(
                s,
                select(
                    RespondAnswer.answer_id,
                    RespondAnswer.mode,
                    RespondAnswer.notes,
                    RespondAnswer.base_response_id,
                    RespondAnswer.final_text,
                ),
                ["answer_id", "mode", "notes", "base_response_id", "final_text"],
            ),
            rank_entries=rank,
            match_decisions=decisions,
            sentence_themes=_frame(
                s,
                select(SentenceTheme.answer_id, SentenceTheme.sentence_id, SentenceTheme.theme_id),
                ["answer_id", "sentence_id", "theme"],
            ),
            urgency=_frame(
                s,
                select(
                    UrgencyAnswer.answer_id,
                    UrgencyAnswer.more_urgent_case_id,
                    UrgencyAnswer.ask_second,
                ),
                ["answer_id", "more_urgent_case_id", "ask_second"],
            ),
            eppc_labels=eppc,
            empathy=_frame(
                s,
                select(EmpathyAnswer.answer_id, EmpathyAnswer.more_empathetic_response_id),
                ["answer_id", "more_empathetic_response_id"],
            ),
            facts=_frame(
                s,
                select(
                    Fact.answer_id,
                    Fact.side,
                    Fact.position,
                    Fact.text,
                    Fact.entailed,
                    Fact.error_category_id,
                ).order_by(Fact.answer_id, Fact.side, Fact.position),
                ["answer_id", "side", "position", "text", "entailed", "error_category"],
            ),
        )
    return _only_listed_answers(frames, n_stored)


_DETAIL_TABLES = (
    "respond_parts",
    "respond_answers",
    "rank_entries",
    "match_decisions",
    "sentence_themes",
    "urgency",
    "eppc_labels",
    "empathy",
    "facts",
)


def _only_listed_answers(frames: StudyFrames, n_stored: int) -> StudyFrames:
    """Keep detail rows of the answers in ``frames.answers`` only (drafts left out).

    ``n_stored`` is the number of answers in the project: when every one of them is listed,
    every detail row already belongs to a listed answer (foreign keys) and nothing is cut.
    """
    if len(frames.answers) == n_stored and frames.answers.answer_id.is_unique:
        return frames
    keep = set(frames.answers.answer_id)
    trimmed = {
        name: getattr(frames, name)[getattr(frames, name).answer_id.isin(keep)].reset_index(
            drop=True
        )
        for name in _DETAIL_TABLES
    }
    return replace(frames, **trimmed)


__all__ = ["StudyFrames", "paused_gc", "read_frames"]
