"""rank: rank the candidate responses of a case, ties allowed, and mark each correct or not
with the reasons C1-C3 (seed 001, MedAlign).

Payload::

    {"entries": [{"response_id": 3, "rank": 1, "correct": true, "criteria": []},
                 {"response_id": 4, "rank": 1, "correct": false, "criteria": ["C2"]}]}

Rank 1 is best; equal ranks are ties.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.store.kinds.base import PayloadError, UnitContext, check_keys, field, plain_rows
from portalreview.store.models import RankCriterion, RankEntry

KIND = "rank"


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("entries",), KIND)
    entries = field(payload, "entries", list, KIND, default=[])
    known_criteria = {c.id for c in ctx.catalogs.criteria}
    seen: set[int] = set()
    for i, entry in enumerate(entries):
        where = f"{KIND}: entries[{i}]"
        check_keys(entry, ("response_id", "rank", "correct", "criteria"), where)
        response_id = field(entry, "response_id", int, where)
        if response_id in seen:
            raise PayloadError(f"{where}: response {response_id} is listed twice")
        if response_id not in ctx.members:
            raise PayloadError(f"{where}: response {response_id} is not in this rank set")
        seen.add(response_id)
        rank = field(entry, "rank", int, where, default=None)
        if rank is not None and not 1 <= rank <= len(ctx.members):
            raise PayloadError(f"{where}: rank must be between 1 and {len(ctx.members)}")
        correct = field(entry, "correct", bool, where, default=None)
        criteria = field(entry, "criteria", list, where, default=[])
        if criteria and correct is not False:
            raise PayloadError(f"{where}: reasons (C1-C3) are only for a response marked incorrect")
        for c in criteria:
            if not isinstance(c, str) or c not in known_criteria:
                raise PayloadError(f"{where}: unknown criterion {c!r}")
        session.add(
            RankEntry(answer_id=answer.id, response_id=response_id, rank=rank, correct=correct)
        )
        session.flush()
        session.add_all(
            RankCriterion(answer_id=answer.id, response_id=response_id, criterion_id=c)
            for c in dict.fromkeys(criteria)
        )


def clear(session, answer_id: int) -> None:
    session.execute(delete(RankCriterion).where(RankCriterion.answer_id == answer_id))
    session.execute(delete(RankEntry).where(RankEntry.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    reasons: dict[tuple[int, int], list[str]] = {}
    for a, response_id, criterion in plain_rows(
        session,
        select(RankCriterion.answer_id, RankCriterion.response_id, RankCriterion.criterion_id)
        .where(RankCriterion.answer_id.in_(answer_ids))
        .order_by(RankCriterion.answer_id, RankCriterion.criterion_id),
    ):
        reasons.setdefault((a, response_id), []).append(criterion)
    out: dict[int, dict] = {a: {"entries": []} for a in answer_ids}
    for a, response_id, rank, correct in plain_rows(
        session,
        select(RankEntry.answer_id, RankEntry.response_id, RankEntry.rank, RankEntry.correct)
        .where(RankEntry.answer_id.in_(answer_ids))
        .order_by(RankEntry.answer_id, RankEntry.response_id),
    ):
        out[a]["entries"].append(
            {
                "response_id": response_id,
                "rank": rank,
                "correct": correct,
                "criteria": reasons.get((a, response_id), []),
            }
        )
    return out


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    entries = {e["response_id"]: e for e in payload.get("entries", [])}
    unranked = [m for m in ctx.members if entries.get(m, {}).get("rank") is None]
    if unranked:
        return f"{len(unranked)} response(s) have no rank yet"
    unjudged = [m for m in ctx.members if entries[m].get("correct") is None]
    if unjudged:
        return f"{len(unjudged)} response(s) are not marked correct or incorrect"
    return _unexplained(ctx, entries)


def _unexplained(ctx: UnitContext, entries: dict[int, dict]) -> str | None:
    """Responses marked incorrect with no reason: seed 001 Sec. 5 defines "incorrect" as
    meeting at least one of C1-C3 (the editor refuses it too; this catches imports and other
    saves). Named "response <id>", which an import puts in the file's own ids."""
    criteria = ctx.catalogs.criteria
    if not criteria:
        return None
    unexplained = [
        m
        for m in ctx.members
        if entries[m].get("correct") is False and not entries[m].get("criteria")
    ]
    if not unexplained:
        return None
    named = ", ".join(f"response {m}" for m in unexplained)
    return (
        f"{named} marked incorrect with no reason: give at least one of "
        f"{criteria[0].id}-{criteria[-1].id}"
    )
