"""The study itself in portable form: project.json, annotators, unit sets, units, assignments,
suggestions and answers (the files :func:`export_project` writes; see docs/formats.md)."""

from __future__ import annotations

import json
import re
from typing import Any

from sqlalchemy import func, select

from portalreview.domain.catalogs import CatalogError, Catalogs
from portalreview.store.adaptive import AdaptiveSetting, meta_key
from portalreview.store.catalog_store import write_catalogs
from portalreview.store.importers.context import ImportContext
from portalreview.store.importers.errors import ImportFailed, json_type
from portalreview.store.importers.portable import (
    UNIT_OPTIONAL,
    UNIT_REFS,
    UNIT_SHAPES,
    answer_to_internal,
    params_refs,
    presentation_refs,
    to_internal,
    translate,
)
from portalreview.store.importers.records import MAX_ID, Part, Record
from portalreview.store.models import (
    KINDS,
    ROLES,
    STATUSES,
    SUGGESTION_USES,
    Annotator,
    Answer,
    Assignment,
    ProjectMeta,
    Suggestion,
    Unit,
    UnitSet,
)
from portalreview.store.own_responses import JUDGED_KINDS, response_authors
from portalreview.store.service import MAX_OWN_EXAMPLES

ANNOTATOR_COLUMNS = ("name", "display_name", "role", "is_model", "created_at")
UNIT_SET_COLUMNS = ("name", "kind", "description", "created_at", "adaptive_judgements")
UNIT_COLUMNS = (
    "set",
    "kind",
    "position",
    "case_id",
    "case_b_id",
    "response_id",
    "response_b_id",
    "sentence_id",
    "members",
    "batch",
)
ASSIGNMENT_COLUMNS = (
    "unit",
    "annotator",
    "position",
    "presentation",
    "assigned_at",
    "gold_holder",
)
ANSWER_COLUMNS = (
    "kind",
    "unit",
    "annotator",
    "gold",
    "status",
    "active_seconds",
    "flagged",
    "flag_note",
    "comment",
    "suggestion",
    "suggestion_use",
    "created_at",
    "updated_at",
    "answer",
)
SUGGESTION_COLUMNS = (
    "unit",
    "kind",
    "number",
    "payload",
    "model_file",
    "model_sha256",
    "template_id",
    "template_text",
    "params",
    "seed",
    "seconds",
    "created_at",
    "refused_reason",
    "for_annotator",
)
AUDIT_COLUMNS = (
    "id",
    "at",
    "actor_id",
    "actor",
    "action",
    "answer_id",
    "unit_id",
    "unit",
    "old_json",
    "new_json",
    "prev_hash",
    "hash",
)
_MAX_POSITION = 10**9
_SHA256 = re.compile(r"[0-9a-f]{64}")


def each(ctx: ImportContext, part: Part, add) -> None:
    """Run ``add(ctx, rec)`` for every record, guarded."""
    for rec in part.records:
        with ctx.guard(rec):
            add(ctx, rec)


# --- project.json --------------------------------------------------------------------------


def load_project(ctx: ImportContext, part: Part) -> None:
    """Check the exported catalogs against the project's (a superset extends them), and take
    the study's settings where the project has not chosen its own."""
    if part.obj is not None:
        data = part.obj
    else:  # a workbook's project sheet: one row
        record = part.records[0]
        data = {"catalogs": record.obj("catalogs"), "settings": record.obj("settings")}
    _load_catalogs(ctx, part, data)
    _load_settings(ctx, part, data.get("settings"))


def _load_catalogs(ctx: ImportContext, part: Part, data: dict) -> None:
    try:
        theirs = Catalogs.from_dict(data.get("catalogs"))
    except (CatalogError, TypeError, AttributeError) as exc:
        raise ImportFailed(f"the catalogs are not valid: {exc}", file=part.label) from None
    ours = ctx.catalogs
    if theirs == ours:
        return
    our_entries, their_entries = _catalog_entries(ours), _catalog_entries(theirs)
    missing = sorted(set(our_entries) - set(their_entries))
    if missing:
        raise ImportFailed(
            "its catalogs lack entries this project has ("
            + ", ".join(missing[:10])
            + "); import into a project created with these catalogs",
            file=part.label,
        )
    changed = sorted(k for k, entry in our_entries.items() if their_entries[k] != entry)
    if changed:
        raise ImportFailed(
            "its catalogs word entries this project has differently ("
            + ", ".join(changed[:10])
            + "); the annotators of this project answered with its own wording, so it is not "
            "replaced: import into a project created with these catalogs",
            file=part.label,
        )
    extended = _as_extension(ours, theirs, part)
    if extended == ours:
        ctx.report.note(
            f"{part.label}: the same catalogs under another version name "
            f"({theirs.version}); this project's ({ours.version}) is kept"
        )
        return
    write_catalogs(ctx.session, extended)
    ctx.svc.use_catalogs(extended)
    ctx.report.note(f"{part.label}: the project's catalogs were extended to {theirs.version}")


# The parts of the catalogs, as an error message names them.
_CATALOG_PARTS = {
    "themes": "the themes or their order",
    "notes_box": "the notes box",
    "urgency_levels": "the urgency scale",
    "urgency_filter_labels": "the urgency filter labels",
    "eppc_codes": "the EPPC codes or their order",
    "eppc_legacy_spellings": "the EPPC legacy spellings",
    "criteria": "the criteria",
    "empathy_choices": "the empathy choices",
    "error_categories": "the error categories",
}
_EXTENSIBLE = (
    "themes",
    "eppc_codes",
    "eppc_legacy_spellings",
    "criteria",
    "error_categories",
    "urgency_filter_labels",
)


def _as_extension(ours: Catalogs, theirs: Catalogs, part: Part) -> Catalogs:
    """``theirs`` as an extension of ``ours``, made as ``codebook --extend`` makes one (which
    fixes the notes box, the urgency scale and the empathy choices, and keeps every existing
    entry, spelling and order); ours itself when theirs adds nothing. ImportFailed naming the
    parts where theirs is not that extension: taking it whole would reword what the
    annotators answered."""
    wanted = theirs.to_dict()
    extension = {key: wanted[key] for key in _EXTENSIBLE}
    # their Other theme is compared as an entry (_catalog_entries); an extension adds before it
    extension["themes"] = [t for t in wanted["themes"] if not t.get("is_other")]
    try:
        extended = ours.extended(extension)
        if extended != ours:
            extended = ours.extended(extension | {"version": theirs.version})
    except CatalogError as exc:
        message = f"its catalogs do not extend this project's: {exc}"
        raise ImportFailed(message, file=part.label) from None
    made = extended.to_dict()
    differ = [name for key, name in _CATALOG_PARTS.items() if made[key] != wanted[key]]
    if differ:
        raise ImportFailed(
            "its catalogs differ from this project's in "
            + ", ".join(differ)
            + ", beyond what an extension adds; the annotators of this project answered with "
            "its own, so they are not replaced: import into a project created with these "
            "catalogs",
            file=part.label,
        )
    return extended


def _load_settings(ctx: ImportContext, part: Part, settings: Any) -> None:
    """The own-examples count (exporters.study_settings): taken when this project has none;
    a project that chose its own keeps it, and the report says so."""
    if settings is None:  # an export written before settings travelled
        return
    if not isinstance(settings, dict):
        raise ImportFailed(
            f"settings must be a JSON object {{...}}, not {json_type(settings)}", file=part.label
        )
    theirs = settings.get("own_examples", 0)
    if not isinstance(theirs, int) or isinstance(theirs, bool):
        raise ImportFailed(
            f"settings.own_examples must be a whole number, not {theirs!r}", file=part.label
        )
    if not 0 <= theirs <= MAX_OWN_EXAMPLES:
        raise ImportFailed(
            f"settings.own_examples must be between 0 and {MAX_OWN_EXAMPLES}, not {theirs}",
            file=part.label,
        )
    ours = ctx.svc.own_examples_in(ctx.session)
    if ours == theirs or theirs == 0:
        return
    if ours:
        ctx.report.note(
            f"{part.label}: kept this project's own examples ({ours}); the export's study "
            f"used {theirs}"
        )
        return
    ctx.svc.set_own_examples(theirs, session=ctx.session)


def _catalog_entries(c: Catalogs) -> dict[str, dict]:
    """Every entry of the catalogs a project's answers refer to, by a readable name ("code
    InfoSeek", "subcode InfoSeek/Billing"), with its content (a code without its subcodes,
    which count as entries of their own, so that an extension may add some)."""
    d = c.to_dict()
    entries = {f"theme {t['id']}": t for t in d["themes"]}
    entries |= {f"level {lv['level']}": lv for lv in d["urgency_levels"]}
    for code in d["eppc_codes"]:
        entries[f"code {code['id']}"] = {k: v for k, v in code.items() if k != "subcodes"}
        entries |= {f"subcode {code['id']}/{s['id']}": s for s in code["subcodes"]}
    entries |= {f"criterion {x['id']}": x for x in d["criteria"]}
    entries |= {f"error category {e['id']}": e for e in d["error_categories"]}
    return entries


def skip_audit(ctx: ImportContext, part: Part) -> None:
    """An exported audit log is recognised and left out (a note says so)."""
    ctx.report.note(
        f"{part.label}: the audit log is not imported (the new project's own log records "
        "this import)"
    )


# --- annotators and unit sets -----------------------------------------------------------------


def load_annotators(ctx: ImportContext, part: Part) -> None:
    """Add annotators; one already in the project with the same role is kept."""
    each(ctx, part, _add_annotator)


def _add_annotator(ctx: ImportContext, rec: Record) -> None:
    name = rec.ident("name")
    role = rec.choice("role", ROLES, default="clinician")
    ctx.claim("annotator", name, rec, "name", exists=False)
    existing = ctx.annotator_id(name)
    if existing is not None:
        if ctx.session.get(Annotator, existing).role != role:
            rec.fail("role", f"annotator {name!r} is already in the project with another role")
        ctx.report.note(f"{rec.file}: annotator {name!r} was already in the project")
        return
    person = ctx.svc.add_annotator(
        name,
        rec.text("display_name", limit=MAX_ID) or None,
        role=role,
        is_model=rec.boolean("is_model"),
        session=ctx.session,
    )
    ctx.ids("annotators")[name] = person
    ctx.set_times(ctx.session.get(Annotator, person), rec, created_at="created_at")


def load_unit_sets(ctx: ImportContext, part: Part) -> None:
    """Add unit sets (a name already in the project is an error)."""
    each(ctx, part, _add_unit_set)


def _add_unit_set(ctx: ImportContext, rec: Record) -> None:
    name = rec.ident("name")
    kind = rec.choice("kind", KINDS)
    ctx.claim("unit set", name, rec, "name", ctx.unit_set(name) is not None)
    judgements = rec.integer("adaptive_judgements", 1, _MAX_POSITION)
    if judgements is not None and kind != "urgency":
        rec.fail("adaptive_judgements", f"only an urgency set can be adaptive, not a {kind} set")
    set_id = ctx.ensure_unit_set(name, kind, rec, rec.text("description"))
    ctx.set_times(ctx.session.get(UnitSet, set_id), rec, created_at="created_at")
    if judgements is not None:
        setting = AdaptiveSetting(judgements).to_json()
        ctx.session.add(ProjectMeta(key=meta_key(set_id), value=setting))


# --- units -------------------------------------------------------------------------------------


def load_units(ctx: ImportContext, part: Part) -> None:
    """Add units to their sets, in file order (a set named with a kind is created)."""
    each(ctx, part, _add_unit)


def _add_unit(ctx: ImportContext, rec: Record) -> None:
    set_id, kind = _set_of_unit(ctx, rec)
    expected = ctx.session.scalar(
        select(func.count()).select_from(Unit).where(Unit.unit_set_id == set_id)
    )
    position = rec.integer("position", 0, _MAX_POSITION)
    if position is not None and position != expected:
        rec.fail(
            "position",
            f"expected {expected}: the units of a set are numbered from 0, without gaps, "
            "in file order",
        )
    refs = _unit_refs(rec, kind)
    ids = to_internal(refs, UNIT_REFS, ctx.resolver(rec, ""))
    ctx.svc.add_unit(
        set_id,
        ids["case_id"],
        case_b_id=ids.get("case_b_id"),
        response_id=ids.get("response_id"),
        response_b_id=ids.get("response_b_id"),
        sentence_id=ids.get("sentence_id"),
        members=dict.fromkeys(ids.get("members") or ()),
        batch=rec.text("batch", limit=MAX_ID),
        session=ctx.session,
    )


def _set_of_unit(ctx: ImportContext, rec: Record) -> tuple[int, str]:
    """(set id, kind) of the unit's set, creating the set when the row gives its kind."""
    name = rec.ident("set")
    kind = rec.choice("kind", KINDS) if rec.has("kind") else None
    found = ctx.unit_set(name)
    if found is None:
        if kind is None:
            rec.fail("set", f"there is no unit set {name!r}; give the unit's kind to create it")
        return ctx.ensure_unit_set(name, kind, rec), kind
    if kind is not None and kind != found[1]:
        rec.fail("kind", f"unit set {name!r} holds {found[1]} units, not {kind}")
    return found


def _unit_refs(rec: Record, kind: str) -> dict[str, Any]:
    """The unit's portable references, checked against the shape of its kind."""
    refs: dict[str, Any] = {"case_id": rec.ident("case_id")}
    for name in ("case_b_id", "response_id", "response_b_id"):
        refs[name] = rec.ident(name, required=False)
    refs["sentence_id"] = rec.obj("sentence_id")
    refs["members"] = rec.items("members")
    shape, optional = UNIT_SHAPES[kind], UNIT_OPTIONAL.get(kind, ())
    for name in ("case_b_id", "response_id", "response_b_id", "sentence_id"):
        if name in shape and refs[name] is None:
            rec.fail(name, f"is missing: a {kind} unit needs {', '.join(shape)}")
        if name not in shape and name not in optional and refs[name] is not None:
            takes = [*shape, *(f"{o} (optional)" for o in optional)]
            rec.fail(name, f"a {kind} unit has no {name} (it takes {', '.join(takes) or 'none'})")
    if refs["members"] and kind != "rank":
        rec.fail("members", f"only rank units have members, not {kind} units")
    return refs


# --- assignments -------------------------------------------------------------------------------


def load_assignments(ctx: ImportContext, part: Part) -> None:
    """Assign units (annotators created as needed), keeping a given presentation."""
    each(ctx, part, _add_assignment)


def _add_assignment(ctx: ImportContext, rec: Record) -> None:
    unit = ctx.unit_ref(rec, "unit", rec.obj("unit", required=True))
    person = ctx.annotator(rec, "annotator")
    if ctx.session.get(Assignment, (unit.id, person)) is not None:
        rec.fail("annotator", "this unit is already assigned to this annotator")
    position = rec.integer("position", -_MAX_POSITION, _MAX_POSITION)
    ctx.svc.assign(unit.id, person, position, session=ctx.session)
    ctx.session.flush()
    row = ctx.session.get(Assignment, (unit.id, person))
    presentation = rec.obj("presentation")
    if presentation is not None:
        shown = to_internal(
            presentation, presentation_refs(unit.kind), ctx.resolver(rec, "presentation")
        )
        _check_presentation(rec, json.loads(row.presentation_json), shown)
        row.presentation_json = json.dumps(shown)
    ctx.set_times(row, rec, assigned_at="assigned_at")
    if rec.has("gold_holder"):
        row.is_gold_holder = rec.boolean("gold_holder")
    else:  # an export older than format 7: told once the answers are in
        ctx.unmarked.add((unit.id, person))
    if unit.kind in JUDGED_KINDS:
        ctx.judged.add((unit.id, person))


def mark_old_holders(ctx: ImportContext) -> None:
    """Mark as gold holders the assignments imported without ``gold_holder`` (an export
    older than format 7) that hold their person's gold answer and no answer of their own: what
    ``migrations.HOLDER_SQL`` does to an old file, the best the old data allows."""
    if not ctx.unmarked:
        return

    def pairs(gold: bool) -> set[tuple[int, int]]:  # (unit, annotator) with such an answer
        rows = select(Answer.unit_id, Answer.annotator_id).where(Answer.is_gold.is_(gold))
        return {tuple(row) for row in ctx.session.execute(rows)}

    for key in (ctx.unmarked & pairs(True)) - pairs(False):  # one query each, not one a row
        ctx.session.get(Assignment, key).is_gold_holder = True


def note_own_responses(ctx: ImportContext) -> None:
    """A note naming the imported assignments that give a person a unit holding a response
    they wrote (seed 001 Sec. 5: clinicians did not evaluate their own responses). They are
    imported as the file says, so that a study exported that way comes back whole."""
    if not ctx.judged:
        return
    s = ctx.session
    sets = {s.get(Unit, u).unit_set_id for u, _ in ctx.judged}
    authors = response_authors(s, Unit.unit_set_id.in_(sets))
    names = dict(s.execute(select(Annotator.id, Annotator.name)).all())
    own: dict[str, list[str]] = {}
    for unit_id, person in sorted(ctx.judged):
        holder = s.get(Assignment, (unit_id, person)).is_gold_holder  # the PI's gold: no work
        if names[person] in authors.get(unit_id, ()) and not holder:
            unit = s.get(Unit, unit_id)
            where = f"{s.get(UnitSet, unit.unit_set_id).name!r} position {unit.position}"
            own.setdefault(names[person], []).append(where)
    if own:
        ctx.report.note(_own_responses_note(own))


def _own_responses_note(own: dict[str, list[str]]) -> str:
    listed = "; ".join(
        f"{name}: {', '.join(units[:3])}" + (f" and {len(units) - 3} more" if units[3:] else "")
        for name, units in own.items()
    )
    return (
        f"{sum(map(len, own.values()))} assignment(s) give a person a unit holding a response "
        f"they wrote ({listed}); no one should judge their own response (seed 001 Sec. 5). "
        "They were imported as the file says: if that was not meant, leave those rows out of "
        "the file (an import can be tried first with --dry-run)."
    )


def _check_presentation(rec: Record, made: dict, given: dict) -> None:
    """A given presentation must have the shape of the one the unit's kind makes, or be
    empty: the assignment that holds a PI's gold answer, or one a merge had to make, records
    no particular way of showing the unit."""
    if not given:
        return
    if set(given) != set(made):
        keys = ", ".join(sorted(made)) or "no keys"
        rec.fail("presentation", f"expected an object with {keys} for this kind of unit, or {{}}")
    if "swap" in made and not isinstance(given["swap"], bool):
        rec.fail("presentation.swap", "expected true or false")
    if "order" in made and (
        not isinstance(given["order"], list) or sorted(given["order"]) != sorted(made["order"])
    ):
        rec.fail("presentation.order", "expected every member of the rank unit, once each")


# --- suggestions -------------------------------------------------------------------------------


def load_suggestions(ctx: ImportContext, part: Part) -> None:
    """Add LLM suggestions with their provenance, numbered per unit."""
    untranslated: list[str] = []
    each(ctx, part, lambda c, rec: _add_suggestion(c, rec, untranslated))
    if untranslated:
        ctx.report.note(
            f"{part.label}: the parameters of {len(untranslated)} suggestion(s) name cases or "
            "responses by the exporting project's internal ids (an export of an older "
            "PortalReview), which do not name anything in this project; their 'observed' "
            f"numbers were left out (first: {untranslated[0]})"
        )


class _InternalId(Exception):
    """A reference in a suggestion's parameters given as a number: an internal id of the
    project that wrote the file, not a portable reference."""


def _suggestion_params(ctx: ImportContext, rec: Record, kind: str, untranslated: list[str]):
    """The parameters with their references resolved. Older exports wrote the internal ids
    of their project there (numbers, where references are text): meaningless here, so the
    ``observed`` numbers that hold them are left out and the report says so."""
    params = rec.obj("params") or {}
    resolve = ctx.resolver(rec, "params")

    def convert(ref: str, value: Any, trail: str) -> int:
        if isinstance(value, int | float) and not isinstance(value, bool):
            raise _InternalId
        return getattr(resolve, ref)(value, trail)

    try:  # urgency: "a" and "b" come before the "levels" keys (text even in older files)
        return translate(params, params_refs(kind), convert)
    except _InternalId:
        untranslated.append(rec.where)
        return {k: v for k, v in params.items() if k != "observed"}


def _add_suggestion(ctx: ImportContext, rec: Record, untranslated: list[str]) -> None:
    unit = ctx.unit_ref(rec, "unit", rec.obj("unit", required=True))
    kind = rec.choice("kind", KINDS, default=unit.kind)
    if kind != unit.kind:
        rec.fail("kind", f"the unit is of kind {unit.kind}, not {kind}")
    expected = 1 + ctx.session.scalar(
        select(func.count()).select_from(Suggestion).where(Suggestion.unit_id == unit.id)
    )
    number = rec.integer("number", 1, _MAX_POSITION)
    if number is not None and number != expected:
        rec.fail("number", f"expected {expected}: a unit's suggestions are numbered from 1")
    payload = rec.nested("payload", required=True)
    if isinstance(payload, dict):
        payload = answer_to_internal(kind, payload, ctx.resolver(rec, "payload"))
    sha = rec.text("model_sha256", required=True, limit=64).strip().lower()
    if not _SHA256.fullmatch(sha):
        rec.fail("model_sha256", "expected 64 hexadecimal digits (SHA-256)")
    suggestion_id = ctx.svc.add_suggestion(
        unit.id,
        payload,
        model_file=rec.text("model_file", required=True, limit=MAX_ID),
        model_sha256=sha,
        template_id=rec.text("template_id", required=True, limit=MAX_ID),
        template_text=rec.text("template_text"),
        params=_suggestion_params(ctx, rec, kind, untranslated),
        seed=rec.integer("seed", -(2**62), 2**62),
        seconds=rec.number("seconds") or 0.0,
        refused_reason=rec.text("refused_reason").strip() or None,
        for_annotator_id=_for_annotator(ctx, rec),
        session=ctx.session,
    )
    row = ctx.session.get(Suggestion, suggestion_id)
    ctx.set_times(row, rec, created_at="created_at")


def _for_annotator(ctx: ImportContext, rec: Record) -> int | None:
    """The clinician a suggestion was made for alone (from their own replies), or None."""
    if not rec.text("for_annotator").strip():
        return None
    return ctx.annotator(rec, "for_annotator")


# --- answers ----------------------------------------------------------------------------------


def load_answers(ctx: ImportContext, part: Part) -> None:
    """Save answers through the kinds' codecs (annotators and assignments made as needed)."""
    each(ctx, part, _add_answer)


def _add_answer(ctx: ImportContext, rec: Record) -> None:
    kind = rec.choice("kind", KINDS)
    unit = ctx.unit_ref(rec, "unit", rec.obj("unit", required=True))
    if unit.kind != kind:
        rec.fail("kind", f"the unit is of kind {unit.kind}, not {kind}")
    person = ctx.annotator(rec, "annotator")
    gold = rec.boolean("gold")
    if ctx.has_answer(unit.id, person, gold):
        rec.fail("annotator", f"already has {'a gold' if gold else 'an'} answer to this unit")
    if not gold:
        ctx.ensure_assigned(unit.id, person)
    payload = rec.obj("answer", required=True)
    internal = answer_to_internal(kind, payload, ctx.resolver(rec, "answer"))
    suggestion_id = _suggestion_of(ctx, rec, unit.id)
    use = rec.choice("suggestion_use", ("", *SUGGESTION_USES), default="") or None
    view = ctx.svc.save_answer(
        unit.id,
        internal,
        status=rec.choice("status", STATUSES, default="draft"),
        active_seconds=rec.number("active_seconds"),
        flagged=rec.boolean("flagged"),
        flag_note=rec.text("flag_note"),
        comment=rec.text("comment"),
        suggestion_id=suggestion_id,
        suggestion_use=use,
        annotator_id=person,
        gold=gold,
        session=ctx.session,
    )
    row = ctx.session.get(Answer, view.answer_id)
    ctx.set_times(row, rec, created_at="created_at", updated_at="updated_at")


def _suggestion_of(ctx: ImportContext, rec: Record, unit_id: int) -> int | None:
    """The id of the unit's n-th suggestion (field ``suggestion`` = n, from 1)."""
    number = rec.integer("suggestion", 1, _MAX_POSITION)
    if number is None:
        return None
    ids = ctx.session.scalars(
        select(Suggestion.id).where(Suggestion.unit_id == unit_id).order_by(Suggestion.id)
    ).all()
    if number > len(ids):
        rec.fail("suggestion", f"the unit has {len(ids)} suggestion(s), not {number}")
    return ids[number - 1]
