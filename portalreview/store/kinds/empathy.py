"""empathy: which of two responses is more empathetic, or equally (seed 004, three-way).

Payload: ``{"more_empathetic_response_id": 7}`` or ``{"equal": true}``; ``{}`` while undecided.
The answer names a response, never a side of the screen.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.store.kinds.base import PayloadError, UnitContext, check_keys, field, plain_rows
from portalreview.store.models import EmpathyAnswer

KIND = "empathy"


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("more_empathetic_response_id", "equal"), KIND)
    chosen = field(payload, "more_empathetic_response_id", int, KIND, default=None)
    equal = field(payload, "equal", bool, KIND, default=False)
    if chosen is not None and equal:
        raise PayloadError(f"{KIND}: choose one response or 'equal', not both")
    pair = (ctx.unit.response_id, ctx.unit.response_b_id)
    if chosen is not None and chosen not in pair:
        raise PayloadError(f"{KIND}: response {chosen} is not one of the pair {pair}")
    if chosen is not None or equal:
        session.add(EmpathyAnswer(answer_id=answer.id, more_empathetic_response_id=chosen))


def clear(session, answer_id: int) -> None:
    session.execute(delete(EmpathyAnswer).where(EmpathyAnswer.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in one query (answer id -> payload)."""
    out: dict[int, dict] = {a: {} for a in answer_ids}
    for a, chosen in plain_rows(
        session,
        select(EmpathyAnswer.answer_id, EmpathyAnswer.more_empathetic_response_id).where(
            EmpathyAnswer.answer_id.in_(answer_ids)
        ),
    ):
        out[a] = {"equal": True} if chosen is None else {"more_empathetic_response_id": chosen}
    return out


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    if payload.get("more_empathetic_response_id") is None and not payload.get("equal"):
        return "choose the more empathetic response, or equally empathetic"
    return None
