"""REDCap: a records export of a theme-guided response survey (seed 000, Appendix G) with its
data dictionary.

Each text field of the survey is mapped onto a theme of the project's catalog, the notes box,
the case id or the annotator; a yes/no field may mark the PI's gold (adjudicated) records.
:func:`propose_redcap_mapping` guesses the mapping from field names and labels for a person to
confirm; :func:`load_records` uses a confirmed mapping, or the proposal when it is complete and
unambiguous.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy import select

from portalreview.domain.catalogs import Catalogs
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.importers.context import ImportContext
from portalreview.store.importers.errors import ImportFailed
from portalreview.store.importers.readers import read_parts
from portalreview.store.importers.records import Part, Record
from portalreview.store.kinds import CODECS
from portalreview.store.models import Answer, Unit, UnitSet
from portalreview.store.project import Project
from portalreview.store.service import AnswerView

DICTIONARY_COLUMNS = (
    "Variable / Field Name",
    "Form Name",
    "Section Header",
    "Field Type",
    "Field Label",
    "Choices, Calculations, OR Slider Labels",
    "Field Note",
    "Text Validation Type OR Show Slider Number",
    "Text Validation Min",
    "Text Validation Max",
    "Identifier?",
    "Branching Logic (Show field only if...)",
    "Required Field?",
    "Custom Alignment",
    "Question Number (surveys only)",
    "Matrix Group Name",
    "Matrix Ranking?",
    "Field Annotation",
)
DICTIONARY_REQUIRED = ("Variable / Field Name", "Form Name", "Field Type", "Field Label")
SURVEY_ID = "redcap_survey_identifier"
_REPEAT_COLUMNS = ("redcap_repeat_instrument", "redcap_repeat_instance")
SPECIAL_TARGETS = ("notes", "case_id", "annotator", "gold")
IGNORE = ("", "ignore")
_TEXT_TYPES = ("text", "notes")
_YES_NO_TYPES = ("yesno", "truefalse")
_TAG = re.compile(r"<[^>]*>")
_NON_WORD = re.compile(r"[^0-9a-z]+")
_EXTRA_TERMS = {
    "notes": ("notes", "note", "assumptions", "assumption", "additional thoughts"),
    "case_id": ("case id", "case", "message id", "case number", "message number"),
    "annotator": ("annotator", "clinician", "rater", "reviewer", "your name", "annotator name"),
}
# the terms of the one target a yes/no field may have: PortalReview's REDCap export marks the
# PI's adjudicated records with one (``gold``), which came back as her ordinary answers
_GOLD_TERMS = ("gold", "gold answer", "gold standard", "adjudicated", "adjudicated answer")


@dataclass(frozen=True)
class RedcapField:
    """A field of the data dictionary."""

    name: str
    form: str
    type: str
    label: str


@dataclass
class RedcapMapping:
    """A proposed (or confirmed) mapping of REDCap fields onto the project.

    ``fields``: field name -> theme id, "notes", "case_id", "annotator" or "gold" (a yes/no
    field marking the PI's adjudicated records): the confident matches; ``ambiguous``: field ->
    the targets it could be; ``unmapped``: text fields that match nothing; ``labels``: field ->
    its label, for showing. To confirm, edit ``fields`` (add the ambiguous and unmapped ones,
    or map them to "ignore") and pass it as ``import_files(..., redcap_mapping=mapping.fields)``.
    """

    form: str
    fields: dict[str, str] = field(default_factory=dict)
    ambiguous: dict[str, list[str]] = field(default_factory=dict)
    unmapped: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every text field mapped, unambiguously, and one of them is the case id."""
        targets = list(self.fields.values())
        return not self.ambiguous and not self.unmapped and targets.count("case_id") == 1

    def describe(self) -> str:
        """The mapping as lines a person can check."""
        lines = [f"REDCap form {self.form!r}:"]
        for name, target in self.fields.items():
            lines.append(f"  {name:<28} -> {target:<20} ({self.labels.get(name, '')})")
        for name, options in self.ambiguous.items():
            lines.append(
                f"  {name:<28} -> ? one of {', '.join(options)} ({self.labels.get(name, '')})"
            )
        for name in self.unmapped:
            lines.append(f"  {name:<28} -> ? no match ({self.labels.get(name, '')})")
        if "case_id" not in self.fields.values():
            lines.append("  (no field holds the case id: map one to 'case_id')")
        return "\n".join(lines)


# --- proposing a mapping -------------------------------------------------------------------


def propose_redcap_mapping(
    project: Project, records_path: Path, dictionary_path: Path
) -> RedcapMapping:
    """Guess which REDCap field is which theme, the notes, the case id and the annotator,
    from field names and labels; show it to a person before importing with it."""
    records = read_parts(Path(records_path))[0]
    dictionary = read_parts(Path(dictionary_path))[0]
    return _proposal(project, records, dictionary)


def _proposal(project: Project, records: Part, dictionary: Part) -> RedcapMapping:
    missing = [c for c in DICTIONARY_REQUIRED if c not in dictionary.columns]
    if missing:
        raise ImportFailed(
            f"is not a REDCap data dictionary (missing {', '.join(missing)})",
            file=dictionary.label,
        )
    with project.read() as session:
        catalogs = read_catalogs(session)
    return propose(catalogs, dictionary_fields(dictionary), records.columns)


def propose_mapping_for_files(
    project: Project, parts: list[Part], dictionary: Path | None = None
) -> RedcapMapping:
    """The mapping proposed for the records among ``parts`` (the tables of an import's
    files), with the data dictionary ``dictionary`` or else the table with a dictionary's
    columns; reads the project and changes nothing."""
    named = dictionary.resolve() if dictionary else None
    dictionaries = [p for p in parts if (p.path.resolve() == named if named else _is_dictionary(p))]
    if not dictionaries:
        raise ImportFailed(
            "none of the files is a REDCap data dictionary (columns "
            + ", ".join(DICTIONARY_REQUIRED)
            + "); give it with --redcap-dictionary"
        )
    names = {rec.raw("Variable / Field Name") for rec in dictionaries[0].records}
    others = [p for p in parts if p not in dictionaries]
    records = max(others, key=lambda p: len(names & set(p.columns)), default=None)
    if records is None or not names & set(records.columns):
        raise ImportFailed(
            "none of the other files is a REDCap records export with the fields of the "
            "data dictionary",
            file=dictionaries[0].label,
        )
    return _proposal(project, records, dictionaries[0])


def _is_dictionary(part: Part) -> bool:
    return all(c in part.columns for c in DICTIONARY_REQUIRED)


def dictionary_fields(part: Part) -> list[RedcapField]:
    """The fields a data dictionary describes."""
    out = []
    for rec in part.records:
        out.append(
            RedcapField(
                name=rec.ident("Variable / Field Name"),
                form=rec.text("Form Name").strip(),
                type=rec.text("Field Type").strip().lower(),
                label=rec.text("Field Label"),
            )
        )
    return out


def propose(catalogs: Catalogs, fields: list[RedcapField], columns: list[str]) -> RedcapMapping:
    """The mapping for the text fields of ``fields`` present in ``columns`` (the record id,
    the first column, left out), and for a yes/no field that names gold (other yes/no fields
    are not proposed)."""
    text_fields = [f for f in fields if f.type in _TEXT_TYPES and f.name in columns[1:]]
    forms = [f.form for f in text_fields]
    mapping = RedcapMapping(form=max(set(forms), key=forms.count) if forms else "")
    terms = _terms(catalogs)
    gold_terms = {"gold": [_norm(x) for x in _GOLD_TERMS]}
    best: dict[str, tuple[int, list[str]]] = {}
    for f in text_fields:
        mapping.labels[f.name] = plain_label(f.label)
        best[f.name] = _best(f, terms)
    for f in fields:
        if f.type in _YES_NO_TYPES and f.name in columns[1:] and _best(f, gold_terms)[0]:
            mapping.labels[f.name] = plain_label(f.label)
            best[f.name] = _best(f, gold_terms)
    for name, (score, targets) in best.items():
        rivals = [
            other
            for other, (s, t) in best.items()
            if other != name and len(t) == 1 and t == targets and s >= score
        ]
        if not targets:
            mapping.unmapped.append(name)
        elif len(targets) > 1 or rivals:
            mapping.ambiguous[name] = targets
        else:
            mapping.fields[name] = targets[0]
    return mapping


def _terms(catalogs: Catalogs) -> dict[str, list[str]]:
    """target -> the normalised words that name it."""
    terms = {t.id: [_norm(t.id), _norm(t.name), _norm(t.short)] for t in catalogs.themes}
    terms["notes"] = [_norm(catalogs.notes_box.id), _norm(catalogs.notes_box.name)]
    for target, extra in _EXTRA_TERMS.items():
        terms.setdefault(target, []).extend(_norm(x) for x in extra)
    return terms


def _best(f: RedcapField, terms: dict[str, list[str]]) -> tuple[int, list[str]]:
    """(score, the targets with the best score) for one field; score 0 = no match."""
    scores = {target: max(_score(f, t) for t in words) for target, words in terms.items()}
    top = max(scores.values())
    return top, [t for t, s in scores.items() if s == top] if top else []


def _score(f: RedcapField, term: str) -> int:
    """3: the name or label is the term; 2: a label/name holds a multi-word term; 1: a word of
    the name or label is a one-word term."""
    name, label = _norm(f.name), _norm(plain_label(f.label))
    if term in (name, label):
        return 3
    if " " in term and (f" {term} " in f" {label} " or f" {term} " in f" {name} "):
        return 2
    if " " not in term and term in (name.split() + label.split()):
        return 1
    return 0


def plain_label(label: str) -> str:
    """A field label as it reads: REDCap's rich-text labels (``<p><strong>Planning</strong>
    </p><p>Please...``, ``Empathetic&nbsp;Communication<br>``) without tags or entities. A tag
    is a space: removed outright it glued "Planning" and "Please" into a word no theme has."""
    return " ".join(html.unescape(_TAG.sub(" ", label)).split())


def _norm(text: str) -> str:
    return _NON_WORD.sub(" ", text.lower().replace("_", " ")).strip()


# --- importing records ----------------------------------------------------------------------


def load_dictionary(ctx: ImportContext, part: Part) -> None:
    """A dictionary is read with its records file (see :func:`load_records`)."""


def load_records(ctx: ImportContext, part: Part) -> None:
    """One respond answer per record, on a unit of its case in set ``redcap-<file name>``."""
    _refuse_repeating_instruments(part)
    fields = dictionary_fields(_dictionary_for(ctx, part))
    mapping = _mapping(ctx, part, fields)
    complete_column = _complete_column(part.columns, _form(fields, mapping))
    if complete_column not in part.columns:
        ctx.report.note(f"{part.label}: no column {complete_column}; every answer is a draft")
    used = {*mapping, complete_column}
    if "annotator" not in mapping.values():
        used.add(SURVEY_ID)  # it names each answer's annotator
    ignored = [c for c in part.columns[1:] if c not in used]
    _refuse_text_the_dictionary_lacks(part, ignored, fields)
    if ignored:
        ctx.report.ignored_columns[part.label] = ignored
    units: dict[int, int] | None = None
    for rec in part.records:
        with ctx.guard(rec):
            set_id = ctx.ensure_unit_set(
                f"redcap-{part.stem}", "respond", rec, f"REDCap records from {part.label}"
            )
            units = units if units is not None else _units_of_set(ctx, set_id)
            _record(ctx, rec, mapping, complete_column, set_id, units)


def _refuse_repeating_instruments(part: Part) -> None:
    """A repeating instrument's or event's export holds a record's base row (the clinician's
    name) and one row per repeat (a case), a longitudinal project's one row per record and
    event: its rows are not one case x clinician each, and the refusal was "row 2, field
    'case_id': is missing" for the base row."""
    fix = (
        "For records already collected, make a copy of this file with one row per case and "
        "clinician, the clinician's name on each row"
    )
    repeats = [c for c in _REPEAT_COLUMNS if c in part.columns]
    if any(rec.text(c).strip() for rec in part.records for c in repeats):
        raise ImportFailed(
            "is an export of a repeating instrument or event (redcap_repeat_instrument, "
            "redcap_repeat_instance), which PortalReview does not read: it reads one row per "
            "case x clinician. Build the survey as an instrument that does not repeat, one "
            f"record per case and clinician. {fix}, without the base rows and the "
            "redcap_repeat_* columns",
            file=part.label,
        )
    if "redcap_event_name" not in part.columns:
        return
    events: dict[str, list[str]] = {}
    for rec in part.records:
        events.setdefault(rec.text(part.columns[0]).strip(), []).append(
            rec.text("redcap_event_name").strip()
        )
    for record, names in events.items():
        if len(names) > 1:
            raise ImportFailed(
                f"record {record} has {len(names)} rows, in events {', '.join(names)}: an "
                "export of a longitudinal project has one row per record and event, which "
                "PortalReview does not read: it reads one row per case x clinician. Export the "
                f"one event that holds the survey (a report of that event). {fix}",
                file=part.label,
            )


def _refuse_text_the_dictionary_lacks(
    part: Part, ignored: list[str], fields: list[RedcapField]
) -> None:
    """A column holding text that the data dictionary does not describe is a field added to the
    survey after the dictionary was downloaded: left out, a clinician's text would be lost
    while the answer was stored as submitted."""
    described = {f.name for f in fields}
    unknown = [
        c
        for c in ignored
        if c not in described
        and not _redcaps_own(c, described)
        and any(rec.text(c).strip() for rec in part.records)
    ]
    if unknown:
        which = (
            f"columns {', '.join(unknown)} hold"
            if len(unknown) > 1
            else f"column {unknown[0]} holds"
        )
        raise ImportFailed(
            f"{which} text, but the data dictionary does not describe "
            f"{'them' if len(unknown) > 1 else 'it'} (fields added after it was downloaded?): "
            "download the current data "
            "dictionary (Project Setup > Data Dictionary) and import it with these records",
            file=part.label,
        )


def _redcaps_own(column: str, described: set[str]) -> bool:
    """A column REDCap writes itself: ``redcap_*``, ``<form>_complete``, ``<form>_timestamp``,
    or a checkbox choice ``<field>___<code>`` of a described field."""
    field, checkbox, _code = column.partition("___")
    return (
        column.startswith("redcap_")
        or column.endswith(("_complete", "_timestamp"))
        or bool(checkbox and field in described)
    )


def _dictionary_for(ctx: ImportContext, part: Part) -> Part:
    """The data dictionary given with the records: the one describing most of its columns."""
    candidates = ctx.parts.get("redcap_dictionary", [])
    if not candidates:
        raise ImportFailed(
            "is a REDCap records export; import it together with its data dictionary CSV "
            "(Project Setup > Data Dictionary > Download)",
            file=part.label,
        )

    def overlap(dictionary: Part) -> int:
        names = {rec.raw("Variable / Field Name") for rec in dictionary.records}
        return len(names & set(part.columns))

    return max(candidates, key=overlap)


def _mapping(ctx: ImportContext, part: Part, fields: list[RedcapField]) -> dict[str, str]:
    """The confirmed mapping (checked), or the proposal when it is complete."""
    given = ctx.redcap_mapping
    if given is None:
        proposal = propose(ctx.catalogs, fields, part.columns)
        if not proposal.complete:
            raise ImportFailed(
                "the REDCap fields cannot all be matched with certainty. Proposed mapping:\n"
                + proposal.describe()
                + "\nConfirm it (fill in the '?' lines, or map them to 'ignore') and give it "
                "to the import: on the command line --redcap-mapping FILE.json, or the JSON "
                '\'{"field": "target", ...}\' itself; in Python redcap_mapping={field: target, '
                "...}.",
                file=part.label,
            )
        ctx.report.note(f"{part.label}: used the proposed mapping {proposal.fields}")
        return proposal.fields
    return _checked(ctx, part, given)


def _checked(ctx: ImportContext, part: Part, given: dict | RedcapMapping) -> dict[str, str]:
    """A confirmed mapping, checked against the file's columns and the project's themes."""
    if isinstance(given, RedcapMapping):
        given = given.fields
    if not isinstance(given, dict):
        raise ImportFailed("the REDCap mapping must be a dict {field: target}", file=part.label)
    targets = {t.id for t in ctx.catalogs.themes} | set(SPECIAL_TARGETS)
    mapping: dict[str, str] = {}
    for name, target in given.items():
        if name not in part.columns:
            raise ImportFailed(
                f"the REDCap mapping names field {name!r}, which the file lacks", file=part.label
            )
        if target is None or str(target).strip().lower() in IGNORE:
            continue
        if not isinstance(target, str) or target not in targets:  # (a list: unhashable)
            raise ImportFailed(
                f"the REDCap mapping maps {name!r} to {target!r}; targets are theme ids "
                f"({', '.join(t.id for t in ctx.catalogs.themes)}), notes, case_id, annotator, "
                "gold (a yes/no field)",
                file=part.label,
            )
        mapping[name] = target
    for special, most in (("case_id", 1), ("annotator", 1), ("gold", 1)):
        if list(mapping.values()).count(special) > most:
            raise ImportFailed(
                f"the REDCap mapping has more than one {special} field", file=part.label
            )
    if "case_id" not in mapping.values():
        raise ImportFailed("the REDCap mapping names no case_id field", file=part.label)
    return mapping


def _form(fields: list[RedcapField], mapping: dict[str, str]) -> str:
    forms = [f.form for f in fields if f.name in mapping]
    return max(set(forms), key=forms.count) if forms else ""


def _complete_column(columns: list[str], form: str) -> str:
    """``<form>_complete``, or the only ``*_complete`` column when the form is unclear."""
    wanted = f"{form}_complete"
    found = [c for c in columns if c.endswith("_complete")]
    return wanted if wanted in columns or len(found) != 1 else found[0]


def _units_of_set(ctx: ImportContext, set_id: int) -> dict[int, int]:
    rows = ctx.session.execute(select(Unit.case_id, Unit.id).where(Unit.unit_set_id == set_id))
    return dict(rows.all())


def _record(
    ctx: ImportContext,
    rec: Record,
    mapping: dict[str, str],
    complete_column: str,
    set_id: int,
    units: dict[int, int],
) -> None:
    by_target: dict[str, list[str]] = {}
    for name, target in mapping.items():
        by_target.setdefault(target, []).append(name)
    case_field = by_target["case_id"][0]
    case_id = ctx.case_ref(rec, case_field, rec.ident(case_field))
    who = by_target.get("annotator", [SURVEY_ID])[0]
    if who not in rec.values:
        rec.fail(who, "no field names the annotator: map one to 'annotator'")
    person = ctx.annotator(rec, who)
    gold = "gold" in by_target and rec.boolean(by_target["gold"][0])
    if case_id not in units:
        units[case_id] = ctx.svc.add_unit(set_id, case_id, session=ctx.session)
    unit_id = units[case_id]
    if ctx.has_answer(unit_id, person, gold):
        what = "a gold response" if gold else "a response"
        rec.fail(who, f"this annotator already has {what} to this case")
    if not gold:  # the PI's gold answer is held by an assignment of its own (made by the save)
        ctx.ensure_assigned(unit_id, person)
    payload = _payload(rec, by_target)
    done = rec.integer(complete_column, 0, 2, what="0, 1 or 2 (2 = Complete)") == 2
    saved = ctx.svc.save_answer(
        unit_id,
        payload,
        status="submitted" if done else "draft",
        annotator_id=person,
        gold=gold,
        session=ctx.session,
    )
    imported_before = _same_answer_in_another_set(ctx, saved, case_id, set_id)
    if imported_before is not None:
        rec.fail(
            who,
            f"this annotator's response to this case is already in unit set "
            f"{imported_before!r}, word for word: this file repeats records imported before "
            "(REDCap names every download of the same records anew). Import only records "
            "not imported yet; nothing of this file was imported",
        )


def _same_answer_in_another_set(
    ctx: ImportContext, saved: AnswerView, case_id: int, set_id: int
) -> str | None:
    """The name of another unit set where the same annotator already gave the same written
    response to the same case (a second download of the same REDCap records, under REDCap's
    new file name, came in as a second set and counted every answer twice), or None. A
    different response to the case in another set is a new round, and is imported."""
    rows = ctx.session.execute(
        select(Answer.id, UnitSet.name)
        .join(Unit, Unit.id == Answer.unit_id)
        .join(UnitSet, UnitSet.id == Unit.unit_set_id)
        .where(
            Unit.case_id == case_id,
            Unit.kind == "respond",
            Unit.response_id.is_(None),  # theme-guided, as a REDCap record is
            Unit.unit_set_id != set_id,
            Answer.annotator_id == saved.annotator_id,
            Answer.is_gold.is_(saved.is_gold),
        )
    ).all()
    if not rows:
        return None
    payloads = CODECS["respond"].read_many(ctx.session, [row.id for row in rows])
    return next((row.name for row in rows if payloads[row.id] == saved.payload), None)


def _payload(rec: Record, by_target: dict[str, list[str]]) -> dict:
    """The respond payload: one part per theme box with text, and the notes."""
    parts = {}
    for target, names in by_target.items():
        if target in SPECIAL_TARGETS:
            continue
        text = "\n\n".join(rec.text(n).strip() for n in names if rec.text(n).strip())
        if text:
            parts[target] = text
    notes = "\n\n".join(
        rec.text(n).strip() for n in by_target.get("notes", []) if rec.text(n).strip()
    )
    return {"mode": "theme_guided", "parts": parts, "notes": notes}
