"""EPPC annotations in the model-output shape (FACTS.md): one JSON object per sentence.

``{"case_id": "c1", "sentence": "...", "annotator": "ava",
"results": [{"Code": "InfoSeek", "Sub-code": "Symptoms", "Span": "chest pain"}]}``

The sentence is located in the case's message (or the response's text) and must be one of the
sentences PortalReview's segmenter made there; each span is located in its sentence (the first
occurrence when it occurs more than once). Legacy code and subcode spellings are mapped onto the
codebook's own and reported. A sentence has one eppc unit, whichever file codes it, so that
coders who send one file each are compared; a coder codes a sentence once.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from portalreview.domain.catalogs import CatalogError
from portalreview.store.importers.context import ImportContext
from portalreview.store.importers.errors import json_type
from portalreview.store.importers.records import MAX_TEXT, Part, Record, show, text_problem
from portalreview.store.kinds import CODECS
from portalreview.store.kinds.eppc import codes_with_subcodes, label_missing
from portalreview.store.models import STATUSES, Answer, Case, Response, Sentence, Unit, UnitSet

EPPC_COLUMNS = (
    "case_id",
    "message_id",
    "response_id",
    "sentence",
    "annotator",
    "results",
    "status",
)
OWNER_KEYS = ("case_id", "message_id", "response_id")
_RESULT_KEYS = {"code": "Code", "subcode": "Sub-code", "span": "Span"}


def load_eppc(ctx: ImportContext, part: Part) -> None:
    """One answer per record, on the eppc unit that already holds its sentence (in any eppc
    set: coders' files of the same sentences meet on the same units, so they are compared),
    or on a new unit in set ``eppc-<file name>``."""
    own_set = f"eppc-{part.stem}"
    units = _eppc_units(ctx)
    new_set: int | None = None
    joined: set[str] = set()  # the earlier sets this file's codings went into
    for rec in part.records:
        with ctx.guard(rec):
            case_id, sentence_id, sentence = _sentence(ctx, rec)
            if sentence_id in units:
                joined.add(units[sentence_id][0][1])
            else:
                if new_set is None:
                    new_set = ctx.ensure_unit_set(
                        own_set, "eppc", rec, f"EPPC annotations from {part.label}"
                    )
                unit_id = ctx.svc.add_unit(
                    new_set, case_id, sentence_id=sentence_id, session=ctx.session
                )
                units[sentence_id] = [(unit_id, own_set)]
            unit_ids = [unit_id for unit_id, _ in units[sentence_id]]
            _answer(ctx, rec, unit_ids, sentence_id, sentence)
    joined.discard(own_set)
    if joined:  # the PI looks for the file's own set
        ctx.report.note(
            f"{part.label}: codings of sentences that already had an eppc unit were added to "
            f"that unit, in unit set(s) {', '.join(map(repr, sorted(joined)))}"
        )


def _eppc_units(ctx: ImportContext) -> dict[int, list[tuple[int, str]]]:
    """sentence id -> (unit id, unit set name) of its eppc units in the project, the first
    made (lowest id) first: the unit a new coding of the sentence goes onto."""
    rows = ctx.session.execute(
        select(Unit.sentence_id, Unit.id, UnitSet.name)
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .where(Unit.kind == "eppc")
        .order_by(Unit.id)
    )
    units: dict[int, list[tuple[int, str]]] = {}
    for sentence_id, unit_id, set_name in rows:
        units.setdefault(sentence_id, []).append((unit_id, set_name))
    return units


def _answer(
    ctx: ImportContext, rec: Record, unit_ids: list[int], sentence_id: int, sentence: str
) -> None:
    """The coder's answer, on the first of the sentence's units."""
    person = ctx.annotator(rec, "annotator")
    labels = _labels(ctx, rec, sentence)
    # a coder codes a sentence once
    _refuse_twice_in_this_import(ctx, rec, person, sentence_id, sentence)
    _refuse_a_coding_made_before(ctx, rec, person, unit_ids, labels, sentence)
    ctx.ensure_assigned(unit_ids[0], person)
    with_subcodes = codes_with_subcodes(ctx.catalogs)
    complete = not any(label_missing(label, with_subcodes) for label in labels)
    status = rec.choice("status", STATUSES, default="submitted" if complete else "draft")
    ctx.svc.save_answer(
        unit_ids[0], {"labels": labels}, status=status, annotator_id=person, session=ctx.session
    )


# --- a sentence coded twice -----------------------------------------------------------------


def _refuse_twice_in_this_import(
    ctx: ImportContext, rec: Record, person: int, sentence_id: int, sentence: str
) -> None:
    key = ("eppc coding", f"{sentence_id} {person}")
    first = ctx.first_seen.get(key)
    if first:
        rec.fail(
            "annotator",
            f"{rec.ident('annotator')!r} codes the sentence {show(sentence)} a second time in "
            f"this import (first: {first}); a coder codes a sentence once",
        )
    ctx.first_seen[key] = rec.where


def _refuse_a_coding_made_before(
    ctx: ImportContext,
    rec: Record,
    person: int,
    unit_ids: list[int],
    labels: list[dict[str, Any]],
    sentence: str,
) -> None:
    """The coder's own answer to any of the sentence's units (her gold answer, as the PI, is
    not one) is her coding of it. The same coding is a file imported before (a second
    download, renamed), and is said so."""
    earlier = _earlier_codings(ctx, person, unit_ids)
    if not earlier:
        return
    coder = rec.ident("annotator")
    same = [name for name, payload in earlier if _coding(payload["labels"]) == _coding(labels)]
    if same:
        rec.fail(
            "annotator",
            f"this coding of the sentence {show(sentence)} by {coder!r} is already in unit "
            f"set {same[0]!r}, word for word: already imported (this file, or a copy under "
            "another name, was imported before). Import only the codings not imported yet; "
            "nothing was imported",
        )
    rec.fail(
        "annotator",
        f"{coder!r} has already coded the sentence {show(sentence)} (in unit set "
        f"{earlier[0][0]!r}), differently: a coder codes a sentence once. Leave this line "
        "out; nothing was imported",
    )


def _earlier_codings(
    ctx: ImportContext, person: int, unit_ids: list[int]
) -> list[tuple[str, dict[str, Any]]]:
    """(unit set name, payload) of the person's own (not gold) answers to these units."""
    rows = ctx.session.execute(
        select(Answer.id, UnitSet.name)
        .join(Unit, Unit.id == Answer.unit_id)
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .where(
            Answer.unit_id.in_(unit_ids),
            Answer.annotator_id == person,
            Answer.is_gold.is_(False),
        )
        .order_by(Answer.id)
    ).all()
    payloads = CODECS["eppc"].read_many(ctx.session, [row.id for row in rows]) if rows else {}
    return [(row.name, payloads[row.id]) for row in rows]


def _coding(labels: list[dict[str, Any]]) -> dict[str, tuple[str | None, list]]:
    """code -> (subcode, spans in order): labels as stored, whatever order they came in."""
    return {
        label["code"]: (label.get("subcode"), sorted(list(s) for s in label.get("spans", [])))
        for label in labels
    }


# --- the sentence ---------------------------------------------------------------------------


def _sentence(ctx: ImportContext, rec: Record) -> tuple[int, int, str]:
    """(the unit's case id, sentence id, sentence text) of the record's sentence."""
    owner, owner_id, case_id, text = _owner(ctx, rec)
    wanted = rec.text("sentence", required=True).strip()
    column = Sentence.case_id if owner == "case" else Sentence.response_id
    rows = ctx.session.execute(
        select(Sentence.start, Sentence.end, Sentence.id).where(column == owner_id)
    )
    by_start = {start: (end, sid) for start, end, sid in rows}
    at = text.find(wanted)
    if at < 0:
        rec.fail("sentence", f"{show(wanted)} does not occur in the {owner}'s text")
    while at >= 0:
        end, sid = by_start.get(at, (None, None))
        if end == at + len(wanted):
            return case_id, sid, wanted
        at = text.find(wanted, at + 1)
    rec.fail(
        "sentence",
        f"{show(wanted)} occurs in the {owner}'s text but is not one of its sentences as "
        "PortalReview splits it; give one whole sentence",
    )


def _owner(ctx: ImportContext, rec: Record) -> tuple[str, int, int, str]:
    """("case"|"response", its id, its case id, its text) from case_id/message_id/response_id.

    A ``message_id`` is a case's external id, or a response's when no case has it."""
    given = [key for key in OWNER_KEYS if rec.has(key)]
    if len(given) != 1:
        rec.fail(None, "give exactly one of case_id, message_id or response_id")
    key = given[0]
    external = rec.ident(key)
    owner = "response" if key == "response_id" else "case"
    if key == "message_id" and external not in ctx.ids("cases"):
        owner = "response" if external in ctx.ids("responses") else "case"
    elif key == "message_id" and external in ctx.ids("responses"):
        rec.fail(key, f"{external!r} is both a case and a response: use case_id or response_id")
    if owner == "case":
        case_id = ctx.case_ref(rec, key, external)
        return "case", case_id, case_id, ctx.session.get(Case, case_id).message
    response = ctx.session.get(Response, ctx.response_ref(rec, key, external))
    return "response", response.id, response.case_id, response.text


# --- the labels -----------------------------------------------------------------------------


def _labels(ctx: ImportContext, rec: Record, sentence: str) -> list[dict[str, Any]]:
    """The eppc payload's labels: one per code, spans located in the sentence."""
    results = rec.nested("results", required=True)
    if not isinstance(results, list):
        rec.fail(
            "results", f"expected a list of {{Code, Sub-code, Span}}, got {json_type(results)}"
        )
    labels: dict[str, dict[str, Any]] = {}
    for i, item in enumerate(results):
        where = f"results[{i}]"
        code, subcode, span = _result(rec, where, item)
        code, subcode = _canonical(ctx, rec, where, code, subcode)
        spans = _spans(ctx, rec, where, span, sentence)
        label = labels.setdefault(code, {"code": code, "subcode": subcode, "spans": []})
        if label["subcode"] != subcode:
            rec.fail(
                f"{where}.Sub-code",
                f"code {code} has two subcodes ({label['subcode']}, {subcode}); "
                "a code takes one subcode per sentence",
            )
        label["spans"] += [s for s in spans if s not in label["spans"]]
    return list(labels.values())


def _result(rec: Record, where: str, item: Any) -> tuple[Any, Any, Any]:
    """(Code, Sub-code, Span) of one result; key spelling and case are forgiven."""
    if not isinstance(item, dict):
        rec.fail(where, f"expected an object {{Code, Sub-code, Span}}, got {json_type(item)}")
    values: dict[str, Any] = {}
    for key, value in item.items():
        norm = key.lower().replace("-", "").replace("_", "").replace(" ", "")
        if norm not in _RESULT_KEYS:
            rec.fail(f"{where}.{key}", "unknown key; a result has Code, Sub-code and Span")
        values[norm] = value
    if "code" not in values:
        rec.fail(f"{where}.Code", "is missing")
    return values["code"], values.get("subcode"), values.get("span")


def _canonical(
    ctx: ImportContext, rec: Record, where: str, code: Any, subcode: Any
) -> tuple[str, str | None]:
    """Code and subcode ids of the codebook, the mappings applied recorded in the report."""
    if not isinstance(code, str):
        rec.fail(f"{where}.Code", f"expected text, got {json_type(code)}")
    if subcode is not None and not isinstance(subcode, str):
        rec.fail(f"{where}.Sub-code", f"expected text, got {json_type(subcode)}")
    subcode = subcode if subcode and subcode.strip() else None  # blank: no subcode yet
    try:
        code_id, _, applied = ctx.catalogs.canonical_eppc(code, None)
    except CatalogError as exc:
        rec.fail(f"{where}.Code", str(exc))
    try:
        code_id, sub_id, applied = ctx.catalogs.canonical_eppc(code, subcode)
    except CatalogError as exc:
        rec.fail(f"{where}.Sub-code", str(exc))
    ctx.report.map_eppc(applied)
    return code_id, sub_id


def _spans(ctx: ImportContext, rec: Record, where: str, span: Any, sentence: str) -> list:
    """[[start, end], ...] of the span text(s) in the sentence (a list = discontinuous)."""
    texts = span if isinstance(span, list) else [] if span is None else [span]
    out = []
    for j, piece in enumerate(texts):
        name = f"{where}.Span" + (f"[{j}]" if isinstance(span, list) else "")
        if not isinstance(piece, str):
            rec.fail(name, f"expected text, got {json_type(piece)}")
        piece = piece.strip()
        problem = text_problem(piece, MAX_TEXT)
        if problem:
            rec.fail(name, problem)
        if not piece:
            continue
        at = sentence.find(piece)
        if at < 0:
            rec.fail(name, f"the span {show(piece)} is not in its sentence {show(sentence)}")
        if sentence.find(piece, at + 1) >= 0 and ("repeat", rec.file) not in ctx.first_seen:
            ctx.first_seen[("repeat", rec.file)] = rec.place
            ctx.report.note(
                f"{rec.file}: a span occurs more than once in its sentence (first at "
                f"{rec.place}); the first occurrence is used"
            )
        out.append([at, at + len(piece)])
    return out
