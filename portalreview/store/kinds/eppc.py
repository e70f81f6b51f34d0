"""eppc: EPPC codes of one sentence (seed 003, EPPCMinerBen): codes as a multi-label set, one
subcode per code (one of that code's own), and evidence span(s) per code-subcode pair.

Payload::

    {"labels": [{"code": "InfoSeek", "subcode": "Symptoms", "spans": [[0, 12], [20, 31]]}]}

Spans are character offsets into the sentence's own text; several spans make a discontinuous
evidence span. An empty list means the sentence carries no EPPC code.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.domain.catalogs import Catalogs
from portalreview.store.kinds.base import (
    PayloadError,
    UnitContext,
    check_keys,
    field,
    plain_rows,
    spans,
)
from portalreview.store.models import EppcLabel, EppcSpan

KIND = "eppc"


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("labels",), KIND)
    seen: set[str] = set()
    for i, label in enumerate(field(payload, "labels", list, KIND, default=[])):
        where = f"{KIND}: labels[{i}]"
        check_keys(label, ("code", "subcode", "spans"), where)
        code = field(label, "code", str, where)
        subcode = field(label, "subcode", str, where, default=None)
        codes = {c.id: c for c in ctx.catalogs.eppc_codes}
        if code not in codes:
            raise PayloadError(f"{where}: {code!r} is not a code of the project's codebook")
        if subcode is not None and subcode not in {s.id for s in codes[code].subcodes}:
            raise PayloadError(f"{where}: {subcode!r} is not a subcode of {code}")
        if code in seen:
            raise PayloadError(f"{where}: code {code} is given twice (one subcode per code)")
        seen.add(code)
        evidence = spans(label.get("spans", []), f"{where}.spans", ctx.sentence_length)
        session.add(EppcLabel(answer_id=answer.id, code_id=code, subcode_id=subcode))
        session.flush()
        session.add_all(
            EppcSpan(answer_id=answer.id, code_id=code, start=s, end=e) for s, e in evidence
        )


def clear(session, answer_id: int) -> None:
    session.execute(delete(EppcSpan).where(EppcSpan.answer_id == answer_id))
    session.execute(delete(EppcLabel).where(EppcLabel.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    evidence: dict[tuple[int, str], list[list[int]]] = {}
    for a, code, start, end in plain_rows(
        session,
        select(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start, EppcSpan.end)
        .where(EppcSpan.answer_id.in_(answer_ids))
        .order_by(EppcSpan.answer_id, EppcSpan.code_id, EppcSpan.start),
    ):
        evidence.setdefault((a, code), []).append([start, end])
    out: dict[int, dict] = {a: {"labels": []} for a in answer_ids}
    for a, code, subcode in plain_rows(
        session,
        select(EppcLabel.answer_id, EppcLabel.code_id, EppcLabel.subcode_id)
        .where(EppcLabel.answer_id.in_(answer_ids))
        .order_by(EppcLabel.answer_id, EppcLabel.code_id),
    ):
        out[a]["labels"].append(
            {"code": code, "subcode": subcode, "spans": evidence.get((a, code), [])}
        )
    return out


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    with_subcodes = codes_with_subcodes(ctx.catalogs)
    names = {c.id: c.name for c in ctx.catalogs.eppc_codes}
    for label in payload.get("labels", []):
        missing = label_missing(label, with_subcodes, names)
        if missing:
            return missing
    return None


def codes_with_subcodes(catalogs: Catalogs) -> set[str]:
    """The codes whose labels need a subcode: a code the PI added with none leaves nothing to
    choose (every code of seed 003's codebook has subcodes; an extension may add one without)."""
    return {c.id for c in catalogs.eppc_codes if c.subcodes}


def label_missing(
    label: dict, with_subcodes: set[str], names: dict[str, str] | None = None
) -> str | None:
    """What a label still lacks before its answer can be submitted (None: nothing), in the
    words of the codebook the clinician sees (``names``: code id -> name)."""
    code = (names or {}).get(label["code"], label["code"])
    if not label.get("subcode") and label["code"] in with_subcodes:
        return f"the code '{code}' has no subcode yet: choose one"
    if not label.get("spans"):
        return (
            f"the code '{code}' has no evidence yet: select the words of the sentence "
            "that show it"
        )
    return None
