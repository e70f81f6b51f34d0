"""facts: the medical facts of an original and an edited response, and for each whether the
other text entails it (seed 004, MedFactChecking), with the expert error category
(Supplementary Table 3) for a fact that was lost or added.

Payload::

    {"facts": [{"side": "original", "text": "Ride a bike after 6 weeks.", "entailed": true},
               {"side": "edited", "text": "...", "entailed": false,
                "error_category": "false_assurance"}]}

``entailed`` of an original fact: does the edited response entail it (preserved)? Of an edited
fact: does the original entail it (grounded)? ``null`` while not yet judged.

``{"facts": [], "no_facts": true}`` says the annotator found no medical fact in either response
(a two-line "thank you, see you Friday" reply): complete, and scored 1.0 for recall and
precision by seed 004's empty-set rule. Without the flag an empty list means "not done yet".
The flag with a fact listed is an error. ``read`` writes ``no_facts`` only when it is true.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, select

from portalreview.store.kinds.base import PayloadError, UnitContext, check_keys, field, plain_rows
from portalreview.store.models import FACT_SIDES, Fact, FactCheck

KIND = "facts"


def write(session, answer, ctx: UnitContext, payload: dict) -> None:
    check_keys(payload, ("facts", "no_facts"), KIND)
    facts = field(payload, "facts", list, KIND, default=[])
    no_facts = field(payload, "no_facts", bool, KIND, default=False)
    if no_facts and facts:
        raise PayloadError(
            f"{KIND}: 'no_facts' says neither response holds a medical fact, but {len(facts)} "
            "fact(s) are listed; remove the facts or set 'no_facts' to false"
        )
    session.add(FactCheck(answer_id=answer.id, no_facts=no_facts))
    categories = {c.id for c in ctx.catalogs.error_categories}
    positions = dict.fromkeys(FACT_SIDES, 0)
    for i, fact in enumerate(facts):
        where = f"{KIND}: facts[{i}]"
        check_keys(fact, ("side", "text", "entailed", "error_category"), where)
        side = field(fact, "side", str, where)
        if side not in FACT_SIDES:
            raise PayloadError(f"{where}: side must be 'original' or 'edited'")
        text = field(fact, "text", str, where).strip()
        if not text:
            raise PayloadError(f"{where}: the fact is empty")
        entailed = field(fact, "entailed", bool, where, default=None)
        category = field(fact, "error_category", str, where, default=None)
        if category is not None and category not in categories:
            raise PayloadError(f"{where}: unknown error category {category!r}")
        if category is not None and entailed is not False:
            raise PayloadError(f"{where}: an error category is only for a fact not entailed")
        session.add(
            Fact(
                answer_id=answer.id,
                side=side,
                position=positions[side],
                text=text,
                entailed=entailed,
                error_category_id=category,
            )
        )
        positions[side] += 1


def clear(session, answer_id: int) -> None:
    session.execute(delete(Fact).where(Fact.answer_id == answer_id))
    session.execute(delete(FactCheck).where(FactCheck.answer_id == answer_id))


def read(session, answer) -> dict:
    return read_many(session, [answer.id])[answer.id]


def read_many(session, answer_ids: Sequence[int]) -> dict[int, dict]:
    """The payloads of several answers of this kind, in two queries (answer id -> payload)."""
    out: dict[int, dict] = {a: {"facts": []} for a in answer_ids}
    for a, side, text, entailed, category in plain_rows(
        session,
        select(Fact.answer_id, Fact.side, Fact.text, Fact.entailed, Fact.error_category_id)
        .where(Fact.answer_id.in_(answer_ids))
        .order_by(Fact.answer_id, Fact.side.desc(), Fact.position),
    ):
        out[a]["facts"].append(
            {"side": side, "text": text, "entailed": entailed, "error_category": category}
        )
    for a, no_facts in plain_rows(
        session,
        select(FactCheck.answer_id, FactCheck.no_facts).where(FactCheck.answer_id.in_(answer_ids)),
    ):
        if no_facts:
            out[a]["no_facts"] = True
    return out


def incomplete(ctx: UnitContext, payload: dict) -> str | None:
    facts = payload.get("facts", [])
    if not facts:
        if payload.get("no_facts"):
            return None
        return (
            "no facts listed yet (when neither response holds a medical fact, tick "
            "'No medical facts on either side')"
        )
    open_ = sum(1 for f in facts if f.get("entailed") is None)
    return f"{open_} fact(s) not yet judged" if open_ else None
