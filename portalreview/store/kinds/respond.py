"""respond: a theme-guided response, one box per theme plus notes (seed 000, Appendix G), or a
clinician's edit of an LLM draft.

Payload::

    {"mode": "theme_guided", "parts": {"empathy": "...", "planning": "..."}, "notes": "..."}
    {"mode": "edit_draft", "base_response_id": 12, "final_text": "...", "notes": ""}

An empty or missing box means the theme is not included. A respond unit that names a response
(``units.response_id``) asks to edit that draft, and takes only edit_draft answers for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.store.kinds.base import PayloadError, UnitContext, check_keys, field, plain_rows
from portalreview.store.models import RespondAnswer, RespondPart

KIND = "respond"
MODES = ("theme_guided", "edit_draft")


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("mode", "parts", "notes", "base_response_id", "final_text"), KIND)
    mode = field(payload, "mode", str, KIND, default="theme_guided")
    if mode not in MODES:
        raise PayloadError(f"{KIND}: mode must be one of {', '.join(MODES)}, not {mode!r}")
    notes = field(payload, "notes", str, KIND, default="")
    parts = field(payload, "parts", dict, KIND, default={})
    known = {t.id for t in ctx.catalogs.themes}
    for theme_id, text in parts.items():
        if theme_id not in known:
            raise PayloadError(f"{KIND}: unknown theme {theme_id!r}")
        if not isinstance(text, str):
            raise PayloadError(f"{KIND}: the box of theme {theme_id!r} must hold text")
    draft_to_edit = ctx.unit.response_id
    if mode == "edit_draft":
        if parts:
            raise PayloadError(f"{KIND}: an edited draft has no theme boxes")
        base = field(payload, "base_response_id", int, KIND)
        final = field(payload, "final_text", str, KIND)
        if draft_to_edit is not None and base != draft_to_edit:
            raise PayloadError(
                f"{KIND}: this unit asks to edit response {draft_to_edit}, not {base}"
            )
    elif draft_to_edit is not None:
        raise PayloadError(f"{KIND}: this unit asks to edit a draft (mode edit_draft)")
    else:
        base = final = None
        if payload.get("base_response_id") is not None or payload.get("final_text") is not None:
            raise PayloadError(f"{KIND}: base_response_id and final_text are for edit_draft")
    session.add(
        RespondAnswer(
            answer_id=answer.id, mode=mode, notes=notes, base_response_id=base, final_text=final
        )
    )
    session.flush()
    session.add_all(
        RespondPart(answer_id=answer.id, theme_id=t, text=x) for t, x in parts.items() if x.strip()
    )


def clear(session, answer_id: int) -> None:
    session.execute(delete(RespondAnswer).where(RespondAnswer.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    parts: dict[int, dict[str, str]] = {}
    for a, theme, text in plain_rows(
        session,
        select(RespondPart.answer_id, RespondPart.theme_id, RespondPart.text)
        .where(RespondPart.answer_id.in_(answer_ids))
        .order_by(RespondPart.answer_id, RespondPart.theme_id),
    ):
        parts.setdefault(a, {})[theme] = text
    out: dict[int, dict] = {a: {} for a in answer_ids}
    for a, mode, base, final_text, notes in plain_rows(
        session,
        select(
            RespondAnswer.answer_id,
            RespondAnswer.mode,
            RespondAnswer.base_response_id,
            RespondAnswer.final_text,
            RespondAnswer.notes,
        ).where(RespondAnswer.answer_id.in_(answer_ids)),
    ):
        if mode == "edit_draft":
            out[a] = {
                "mode": mode,
                "base_response_id": base,
                "final_text": final_text,
                "notes": notes,
            }
        else:
            out[a] = {"mode": mode, "parts": parts.get(a, {}), "notes": notes}
    return out


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    if payload.get("mode") == "edit_draft":
        return None if payload.get("final_text", "").strip() else "the edited text is empty"
    if not any(v.strip() for v in payload.get("parts", {}).values()):
        return "every theme box is empty: write at least one"
    return None


def compose(payload: dict, theme_order: list[str]) -> str:
    """The response a patient would read: the filled boxes in the form's order, or the
    edited text."""
    if payload.get("mode") == "edit_draft":
        return payload.get("final_text", "")
    parts = payload.get("parts", {})
    return " ".join(parts[t].strip() for t in theme_order if parts.get(t, "").strip())
