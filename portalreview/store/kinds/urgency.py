"""urgency: which of two patients needs care first (seed 002, PMR-Bench), no ties, with an
optional "ask a second annotator" mark and an optional 1-6 level per case (Table 6).

Payload::

    {"more_urgent_case_id": 12, "ask_second": false, "levels": {"12": 2, "13": 4}}

The answer names a case, never a side of the screen; ``levels`` keys are case ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.store.kinds.base import PayloadError, UnitContext, check_keys, field, plain_rows
from portalreview.store.models import UrgencyAnswer, UrgencyCaseLevel

KIND = "urgency"


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("more_urgent_case_id", "ask_second", "levels"), KIND)
    pair = (ctx.unit.case_id, ctx.unit.case_b_id)
    chosen = field(payload, "more_urgent_case_id", int, KIND, default=None)
    if chosen is not None and chosen not in pair:
        raise PayloadError(f"{KIND}: case {chosen} is not one of the pair {pair}")
    ask_second = field(payload, "ask_second", bool, KIND, default=False)
    session.add(
        UrgencyAnswer(answer_id=answer.id, more_urgent_case_id=chosen, ask_second=ask_second)
    )
    levels = field(payload, "levels", dict, KIND, default={})
    known = {lv.level for lv in ctx.catalogs.urgency_levels}
    for key, level in levels.items():
        try:
            case_id = int(key)
        except (TypeError, ValueError):
            raise PayloadError(f"{KIND}: levels key {key!r} is not a case id") from None
        if case_id not in pair:
            raise PayloadError(f"{KIND}: levels: case {case_id} is not one of the pair")
        if not isinstance(level, int) or isinstance(level, bool) or level not in known:
            raise PayloadError(f"{KIND}: levels: {level!r} is not a level 1-6")
        session.add(UrgencyCaseLevel(answer_id=answer.id, case_id=case_id, level=level))


def clear(session, answer_id: int) -> None:
    session.execute(delete(UrgencyCaseLevel).where(UrgencyCaseLevel.answer_id == answer_id))
    session.execute(delete(UrgencyAnswer).where(UrgencyAnswer.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    rows = {
        a: (chosen, ask)
        for a, chosen, ask in plain_rows(
            session,
            select(
                UrgencyAnswer.answer_id,
                UrgencyAnswer.more_urgent_case_id,
                UrgencyAnswer.ask_second,
            ).where(UrgencyAnswer.answer_id.in_(answer_ids)),
        )
    }
    levels: dict[int, dict[str, int]] = {a: {} for a in answer_ids}
    for a, case_id, level in plain_rows(
        session,
        select(UrgencyCaseLevel.answer_id, UrgencyCaseLevel.case_id, UrgencyCaseLevel.level)
        .where(UrgencyCaseLevel.answer_id.in_(answer_ids))
        .order_by(UrgencyCaseLevel.answer_id, UrgencyCaseLevel.case_id),
    ):
        levels[a][str(case_id)] = level
    out = {}
    for a in answer_ids:
        chosen, ask = rows.get(a, (None, False))
        out[a] = {"more_urgent_case_id": chosen, "ask_second": bool(ask), "levels": levels[a]}
    return out


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    if payload.get("more_urgent_case_id") is None:
        return "choose which patient needs care first"
    return None
