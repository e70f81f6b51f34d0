"""Units that show an annotator a response they wrote, for judging.

Seed 001 (MedAlign) Sec. 5, "Clinician Evaluation of LLM Responses": clinicians did not
evaluate their own responses. A rank set can hold clinicians' replies beside the drafts (the
rank recipe's ``--first`` filter), and an empathy or facts pair can hold a clinician's reply;
blinding hides the author's name, not their own text. The set-up keeps such units from their
authors (``study_setup.plan_assignment``) and an imported assignment of one is pointed out.

Match, IAP and respond units are not judged this way: there a clinician matches a draft
against their own reply, or writes one, by design (seed 000), so they are left alone here.

A response's ``author`` is the annotator's name as the importers store it; model drafts (author
kind ``model``) name a model, never a person, and are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from portalreview.store.models import RankMember, Response, Unit

JUDGED_KINDS = ("rank", "empathy", "facts")


def response_authors(s: Session, where: ColumnElement[bool]) -> dict[int, set[str]]:
    """unit id -> the people who wrote a response it shows for judging, for the units of
    :data:`JUDGED_KINDS` that ``where`` (a condition on ``Unit``) selects."""
    by_person = Response.author_kind != "model"
    members = (
        select(Unit.id, Response.author)
        .join(RankMember, RankMember.unit_id == Unit.id)
        .join(Response, Response.id == RankMember.response_id)
        .where(where, Unit.kind == "rank", by_person)
    )
    pairs = (
        select(Unit.id, Response.author)
        .join(Response, or_(Response.id == Unit.response_id, Response.id == Unit.response_b_id))
        .where(where, Unit.kind.in_(("empathy", "facts")), by_person)
    )
    authors: dict[int, set[str]] = {}
    for query in (members, pairs):
        for unit_id, author in s.execute(query):
            if author.strip():
                authors.setdefault(unit_id, set()).add(author.strip())
    return authors


def own_units(authors: Mapping[int, set[str]], names: Iterable[str]) -> dict[str, set[int]]:
    """name -> the units (of ``authors``, from :func:`response_authors`) holding a response
    that person wrote; people with none are left out."""
    own = {name: {u for u, wrote in authors.items() if name in wrote} for name in names}
    return {name: units for name, units in own.items() if units}
