"""match: content matching of a reference response against a draft (seed 000, Section 3.1,
Algorithm 1, Table 7), with a theme label per sentence on both sides.

Payload::

    {"decisions": [{"sentence_id": 5, "spans": [[10, 42]]},     # matched draft text
                   {"sentence_id": 6, "spans": []}],             # NO MATCH
     "themes": [{"sentence_id": 5, "theme": "empathy"}, ...]}

``sentence_id`` in decisions is a sentence of the reference; spans are character offsets into
the draft's text. Theme labels may be for sentences of either response.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.store.kinds.base import (
    PayloadError,
    UnitContext,
    check_keys,
    field,
    plain_rows,
    spans,
)
from portalreview.store.models import MatchDecision, MatchSpan, SentenceTheme

KIND = "match"


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("decisions", "themes"), KIND)
    seen: set[int] = set()
    for i, decision in enumerate(field(payload, "decisions", list, KIND, default=[])):
        where = f"{KIND}: decisions[{i}]"
        check_keys(decision, ("sentence_id", "spans"), where)
        sentence_id = field(decision, "sentence_id", int, where)
        if sentence_id not in ctx.reference_sentences:
            raise PayloadError(f"{where}: sentence {sentence_id} is not in the reference response")
        if sentence_id in seen:
            raise PayloadError(f"{where}: sentence {sentence_id} is decided twice")
        seen.add(sentence_id)
        matched = spans(decision.get("spans", []), f"{where}.spans", ctx.draft_length)
        session.add(MatchDecision(answer_id=answer.id, sentence_id=sentence_id))
        session.flush()
        session.add_all(
            MatchSpan(answer_id=answer.id, sentence_id=sentence_id, start=s, end=e)
            for s, e in matched
        )
    themes = {t.id for t in ctx.catalogs.themes}
    both_sides = set(ctx.reference_sentences) | set(ctx.draft_sentences)
    labelled: set[int] = set()
    for i, label in enumerate(field(payload, "themes", list, KIND, default=[])):
        where = f"{KIND}: themes[{i}]"
        check_keys(label, ("sentence_id", "theme"), where)
        sentence_id = field(label, "sentence_id", int, where)
        theme = field(label, "theme", str, where)
        if sentence_id not in both_sides:
            raise PayloadError(f"{where}: sentence {sentence_id} is not in either response")
        if sentence_id in labelled:
            raise PayloadError(f"{where}: sentence {sentence_id} has two theme labels")
        if theme not in themes:
            raise PayloadError(f"{where}: unknown theme {theme!r}")
        labelled.add(sentence_id)
        session.add(SentenceTheme(answer_id=answer.id, sentence_id=sentence_id, theme_id=theme))


def clear(session, answer_id: int) -> None:
    session.execute(delete(MatchSpan).where(MatchSpan.answer_id == answer_id))
    session.execute(delete(MatchDecision).where(MatchDecision.answer_id == answer_id))
    session.execute(delete(SentenceTheme).where(SentenceTheme.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in three queries (answer id -> payload)."""
    found: dict[int, dict[int, list[list[int]]]] = {a: {} for a in answer_ids}
    for a, sid in plain_rows(
        session,
        select(MatchDecision.answer_id, MatchDecision.sentence_id)
        .where(MatchDecision.answer_id.in_(answer_ids))
        .order_by(MatchDecision.answer_id, MatchDecision.sentence_id),
    ):
        found[a][sid] = []
    for a, sid, start, end in plain_rows(
        session,
        select(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start, MatchSpan.end)
        .where(MatchSpan.answer_id.in_(answer_ids))
        .order_by(MatchSpan.answer_id, MatchSpan.sentence_id, MatchSpan.start),
    ):
        found[a][sid].append([start, end])
    themes: dict[int, list[dict]] = {a: [] for a in answer_ids}
    for a, sid, theme in plain_rows(
        session,
        select(SentenceTheme.answer_id, SentenceTheme.sentence_id, SentenceTheme.theme_id)
        .where(SentenceTheme.answer_id.in_(answer_ids))
        .order_by(SentenceTheme.answer_id, SentenceTheme.sentence_id),
    ):
        themes[a].append({"sentence_id": sid, "theme": theme})
    return {
        a: {
            "decisions": [{"sentence_id": s, "spans": v} for s, v in found[a].items()],
            "themes": themes[a],
        }
        for a in answer_ids
    }


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    decided = {d["sentence_id"] for d in payload.get("decisions", [])}
    open_ = [s for s in ctx.reference_sentences if s not in decided]
    if open_:
        return f"{len(open_)} reference sentence(s) have no match decision yet"
    labelled = {t["sentence_id"] for t in payload.get("themes", [])}
    unlabelled = [s for s in (*ctx.reference_sentences, *ctx.draft_sentences) if s not in labelled]
    if unlabelled:
        return f"{len(unlabelled)} sentence(s) have no theme label yet"
    return None
