"""A project's answers as pandas DataFrames, one long table per kind, for the measures.

Each function reads with a few bulk queries (no query per answer), so a full report on a
study of 10,000 cases stays fast. Only the PI's or the system's view may read these: they hold
every annotator's answers and every draft's source.

By default only submitted answers count; ``include_drafts=True`` adds unsubmitted ones. Gold
(adjudicated) answers carry ``is_gold=True`` and are never mixed into agreement by the callers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

import pandas as pd
from sqlalchemy import Select, and_, select
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


def _frame(session: Session, query: Select, columns: list[str]) -> pd.DataFrame:
    # Plain tuples: building a frame from SQLAlchemy Row objects is several times slower.
    return pd.DataFrame([tuple(r) for r in session.execute(query)], columns=columns)


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
    frame = _frame(
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
    )
    frame["presentation"] = frame["presentation"].map(json.loads)
    return frame


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
    for case_id, key, value in session.execute(select(CaseTag.case_id, CaseTag.key, CaseTag.value)):
        tags.setdefault(case_id, {}).setdefault(key, []).append(value)
    cases["tags"] = cases["case_id"].map(lambda c: tags.get(c, {}))
    return cases


def _grouped_spans(session: Session, query: Select, keys: int) -> dict[tuple, tuple]:
    """{(key columns...): ((start, end), ...)} from rows of key columns then start, end."""
    out: dict[tuple, list[tuple[int, int]]] = {}
    for row in session.execute(query):
        out.setdefault(tuple(row[:keys]), []).append((row[keys], row[keys + 1]))
    return {k: tuple(sorted(v)) for k, v in out.items()}


def read_frames(project: Project, include_drafts: bool = False) -> StudyFrames:
    """Read the whole study into DataFrames (PI / system use)."""
    with project.read() as s:
        criteria: dict[tuple[int, int], list[str]] = {}
        for answer_id, response_id, criterion in s.execute(
            select(RankCriterion.answer_id, RankCriterion.response_id, RankCriterion.criterion_id)
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
            s, select(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start, MatchSpan.end), 2
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
            s, select(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start, EppcSpan.end), 2
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
    return _only_listed_answers(frames)


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


def _only_listed_answers(frames: StudyFrames) -> StudyFrames:
    """Keep detail rows of the answers in ``frames.answers`` only (drafts left out)."""
    keep = set(frames.answers.answer_id)
    trimmed = {
        name: getattr(frames, name)[getattr(frames, name).answer_id.isin(keep)].reset_index(
            drop=True
        )
        for name in _DETAIL_TABLES
    }
    return replace(frames, **trimmed)


__all__ = ["StudyFrames", "read_frames"]
