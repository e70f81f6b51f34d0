"""PMR-Bench files (seed 002): urgency pairs and inboxes (message pools).

A message becomes one case whatever file or row it comes from: its external id is derived from
a hash of its text (``pmr-`` + 16 hex digits), so the same text in two rows or two files is one
case, and the same text with two different levels is an error.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import select

from portalreview.store.importers.context import ImportContext
from portalreview.store.importers.records import Part, Record
from portalreview.store.models import Case, CaseTag

PAIR_COLUMNS = ("chosen", "chosen_level", "rejected", "rejected_level", "difficulty")
INBOX_COLUMNS = ("text", "level", "relevancy")
SOURCE = "pmr-bench"


def message_id(text: str) -> str:
    """The external id of a PMR-Bench message: stable across files and imports."""
    normal = text.replace("\r\n", "\n").strip()
    return "pmr-" + hashlib.sha256(normal.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class _Message:
    """A message read from a row: its text, its level and the column the level came from."""

    text: str
    level: int
    level_column: str

    @property
    def external_id(self) -> str:
        return message_id(self.text)


def load_pairs(ctx: ImportContext, part: Part) -> None:
    """One urgency unit per row, in a new unit set named after the file; the levels become the
    cases' reference levels.

    Nothing stored says which message of a row is the chosen (more urgent) one, which a
    clinician who reads her offline copy or the server with her own SQL could otherwise take as
    the reference answer: which message is a unit's case A is drawn at random for each row, and
    the file's new messages become cases in a random order once every row is read (numbered in
    the file's order, the cases of a file listing the more urgent message first would mostly
    give it the lower id). The draws come from the operating system's random source, not from
    a seed she could read (the file's name, the order of its rows)."""
    name = part.stem
    set_id = None
    inverted = equal = 0
    sides = secrets.SystemRandom()
    new: dict[str, tuple[Record, _Message]] = {}  # the file's messages new to the project
    pairs: list[tuple[Record, _Message, _Message]] = []
    for rec in part.records:
        with ctx.guard(rec):
            if set_id is None:
                if ctx.unit_set(name) is not None:
                    rec.fail(None, f"a unit set {name!r} already exists; rename the file")
                set_id = ctx.ensure_unit_set(name, "urgency", rec, f"PMR-Bench pairs from {name}")
            chosen = _read_message(ctx, rec, "chosen", "chosen_level")
            rejected = _read_message(ctx, rec, "rejected", "rejected_level")
            if chosen.external_id == rejected.external_id:
                rec.fail("rejected", "chosen and rejected are the same message")
            inverted += chosen.level > rejected.level
            equal += chosen.level == rejected.level
            for message in (chosen, rejected):
                _check_known_level(ctx, rec, message, new)
            pair = [chosen, rejected]
            sides.shuffle(pair)
            pairs.append((rec, *pair))
    _add_cases_in_random_order(ctx, list(new.values()), sides)
    ids = ctx.ids("cases")
    for rec, case_a, case_b in pairs:
        with ctx.guard(rec):
            ctx.svc.add_unit(
                set_id,
                ids[case_a.external_id],
                case_b_id=ids[case_b.external_id],
                batch=rec.label("difficulty"),
                session=ctx.session,
            )
    if inverted:
        ctx.report.note(
            f"{part.label}: in {inverted} row(s) chosen has a less urgent (higher) level "
            "than rejected"
        )
    if equal:  # seed 002's pairs are never tied: the report cannot score these against levels
        ctx.report.note(
            f"{part.label}: in {equal} row(s) chosen and rejected have the same level; the "
            "report leaves them out of accuracy (n_excluded_equal_levels)"
        )


def _check_known_level(
    ctx: ImportContext, rec: Record, message: _Message, new: dict[str, tuple[Record, _Message]]
) -> None:
    """Refuse a level that differs from the one the project, or an earlier row of the file,
    gives the message; a message seen for the first time is added to ``new``."""
    external = message.external_id
    case_id = ctx.ids("cases").get(external)
    if case_id is not None:
        _check_level(ctx, rec, message.level_column, ctx.session.get(Case, case_id), message.level)
    elif external in new:
        had = new[external][1].level
        if had != message.level:
            _refuse_another_level(ctx, rec, message.level_column, external, message.level, had)
    else:
        new[external] = (rec, message)
        ctx.first_seen[("level", external)] = f"{rec.where}, field {message.level_column!r}"


def _add_cases_in_random_order(
    ctx: ImportContext, messages: list[tuple[Record, _Message]], rng: secrets.SystemRandom
) -> None:
    """The cases of ``messages`` (each with the row it was first read from)."""
    rng.shuffle(messages)
    for rec, message in messages:
        with ctx.guard(rec):
            _add_case(ctx, message)


def load_inbox(ctx: ImportContext, part: Part) -> None:
    """One case per distinct message, tagged ``inbox=<file name>`` (and ``relevancy``)."""
    for rec in part.records:
        with ctx.guard(rec):
            case_id, _ = _message(ctx, rec, "text", "level")
            _tag(ctx, case_id, "inbox", part.stem)
            relevancy = rec.label("relevancy")
            if relevancy:
                _check_relevancy(ctx, rec, case_id, relevancy)
                _tag(ctx, case_id, "relevancy", relevancy)


def _read_message(ctx: ImportContext, rec: Record, text_col: str, level_col: str) -> _Message:
    text = rec.text(text_col, required=True)
    levels = sorted(lv.level for lv in ctx.catalogs.urgency_levels)
    level = rec.integer(
        level_col, levels[0], levels[-1], required=True, what=f"a level {levels[0]}-{levels[-1]}"
    )
    return _Message(text, level, level_col)


def _add_case(ctx: ImportContext, message: _Message) -> int:
    external = message.external_id
    case_id = ctx.svc.add_case(
        external,
        message.text,
        urgency_level=message.level,
        source_dataset=SOURCE,
        session=ctx.session,
    )
    ctx.ids("cases")[external] = case_id
    return case_id


def _message(ctx: ImportContext, rec: Record, text_col: str, level_col: str) -> tuple[int, int]:
    """(case id, level) of the message in ``text_col``, adding the case when it is new."""
    message = _read_message(ctx, rec, text_col, level_col)
    case_id = ctx.ids("cases").get(message.external_id)
    if case_id is None:
        ctx.first_seen[("level", message.external_id)] = f"{rec.where}, field {level_col!r}"
        return _add_case(ctx, message), message.level
    _check_level(ctx, rec, level_col, ctx.session.get(Case, case_id), message.level)
    return case_id, message.level


def _check_level(ctx: ImportContext, rec: Record, name: str, case: Case, level: int) -> None:
    """The same message must have the same level everywhere."""
    if case.urgency_level is None and case.urgency_filter is None:
        case.urgency_level = level
        ctx.report.updated["cases"] = ctx.report.updated.get("cases", 0) + 1
        ctx.first_seen[("level", case.external_id)] = f"{rec.where}, field {name!r}"
        return
    if case.urgency_level != level:
        had = case.urgency_level or case.urgency_filter
        _refuse_another_level(ctx, rec, name, case.external_id, level, had)


def _refuse_another_level(
    ctx: ImportContext, rec: Record, name: str, external: str, level: int, had: int | str
) -> None:
    first = ctx.first_seen.get(("level", external), "the project")
    rec.fail(name, f"this message has level {level} here but {had} in {first}")


def _check_relevancy(ctx: ImportContext, rec: Record, case_id: int, relevancy: str) -> None:
    """A message's relevancy follows from its urgency (002 Sec. 4.2: level 1 the most
    relevant), so it is one value everywhere, as its level is; two inbox files that disagree
    kept both tags, without a word."""
    had = ctx.session.scalars(
        select(CaseTag.value).where(CaseTag.case_id == case_id, CaseTag.key == "relevancy")
    ).all()
    external = ctx.session.get(Case, case_id).external_id
    if not had:
        ctx.first_seen[("relevancy", external)] = f"{rec.where}, field 'relevancy'"
    elif relevancy not in had:
        first = ctx.first_seen.get(("relevancy", external), "the project")
        rec.fail(
            "relevancy", f"this message has relevancy {relevancy} here but {had[0]} in {first}"
        )


def _tag(ctx: ImportContext, case_id: int, key: str, value: str) -> None:
    exists = ctx.session.scalar(
        select(CaseTag.case_id).where(
            CaseTag.case_id == case_id, CaseTag.key == key, CaseTag.value == value
        )
    )
    if exists is None:
        ctx.session.add(CaseTag(case_id=case_id, key=key, value=value))
        ctx.session.flush()
