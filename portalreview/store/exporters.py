"""Export a whole project: annotators, cases, responses, unit sets, units, assignments,
suggestions, answers and the audit log, in the portable formats of docs/formats.md.

* ``jsonl``: a folder with one ``<table>.jsonl`` per table and ``project.json`` (name and
  catalogs); importing the folder into a new project gives the same study.
* ``csv``: a folder with one ``<table>.csv`` per table (UTF-8 with a byte-order mark, so that
  Excel reads accents; nested values as JSON text) and ``project.json``.
* ``xlsx``: one workbook with a sheet per table (and a ``project`` sheet).

Everything is read in one read transaction, so the files are one consistent snapshot; a
jsonl or csv folder records its files in project.json, written last, so that a folder whose
export was cut short is refused rather than read as a mixture of two exports
(store/export_manifest.py). Each table's rows are written as they are read, a batch at a time,
never all held at once (:func:`stream_tables`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Row as SqlRow
from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from portalreview import __version__
from portalreview.store.adaptive import adaptive_settings
from portalreview.store.catalog_store import read_catalogs
from portalreview.store.csv_cells import safe_row, safe_writer
from portalreview.store.export_manifest import PROJECT_JSON, RECORD_KEY, finished, unfinished
from portalreview.store.importers.cases import CASE_COLUMNS, RESPONSE_COLUMNS
from portalreview.store.importers.ooxml import (
    EXCEL_CELL_LIMIT,
    excel_length,
    fits_excel_cell,
    ooxml_escape,
)
from portalreview.store.importers.portable import (
    UNIT_REFS,
    answer_to_portable,
    params_to_portable,
    presentation_refs,
    sorted_json,
    to_portable,
)
from portalreview.store.importers.study import (
    ANNOTATOR_COLUMNS,
    ANSWER_COLUMNS,
    ASSIGNMENT_COLUMNS,
    AUDIT_COLUMNS,
    SUGGESTION_COLUMNS,
    UNIT_COLUMNS,
    UNIT_SET_COLUMNS,
)
from portalreview.store.kinds import CODECS
from portalreview.store.kinds.base import plain_rows
from portalreview.store.migrations import SCHEMA_VERSION
from portalreview.store.models import (
    Annotator,
    Answer,
    Assignment,
    AuditEntry,
    Case,
    CaseTag,
    ProjectMeta,
    RankMember,
    Response,
    Sentence,
    Suggestion,
    Unit,
    UnitSet,
)
from portalreview.store.output_files import (
    close_sheets,
    move_into_place,
    output_folder,
    save_workbook,
    staging_folder,
    write_staged,
    write_through_temporary,
)
from portalreview.store.project import Project, refuse_project_output
from portalreview.store.service import CHART_SECTIONS, StudyService, chart_text_of

log = logging.getLogger(__name__)
FORMATS = ("jsonl", "csv", "xlsx")
Row = dict[str, Any]
Table = tuple[tuple[str, ...], list[Row]]
Stream = tuple[tuple[str, ...], "Tally"]  # a table's columns, its rows as they are read
#: Rows fetched from the database at a time while a table is written.
STREAM_BATCH = 2000
#: Told as a table's rows are taken: (the table, its rows taken so far, its rows in all).
Progress = Callable[[str, int, int], None]
PROGRESS_EVERY = 1000


class ExportFailed(ValueError):
    """The project cannot be written in the format asked for; the message says why."""


def export_project(
    project: Project, fmt: str, out: Path, progress: Progress | None = None
) -> list[Path]:
    """Write the whole project to ``out`` (a folder for jsonl/csv, a workbook path for xlsx)
    and return the paths written; ``progress`` is told as the tables' rows are written."""
    if fmt not in FORMATS:
        raise ExportFailed(f"unknown export format {fmt!r}; choose {', '.join(FORMATS)}")
    refuse_project_output(project, out)
    out = Path(out)
    if fmt != "xlsx" and out.exists() and not out.is_dir():
        raise ExportFailed(f"{out} is a file; a {fmt} export is written into a folder")
    # a workbook's missing folder is made first, as a jsonl or csv export's own folder is
    # (removed again if nothing comes of it)
    folder = output_folder(out.parent) if fmt == "xlsx" else contextlib.nullcontext()
    with folder, project.read() as session:  # open while the files are written: one snapshot
        meta, tables = stream_tables(session, progress)
        if fmt == "xlsx":
            written = [_write_xlsx(out, meta, tables)]  # one file, replaced at once: always whole
        else:
            written = _write_folder(out, fmt, meta, tables)
    counts = ", ".join(f"{rows.count} {name}" for name, (_, rows) in tables.items())
    log.info("export written: %s (%s; %s)", out, fmt, counts)
    return written


class Tally:
    """A table's rows as they are taken: how many so far, and the last one (the audit log's
    last hash goes into project.json); ``progress`` is told every ``PROGRESS_EVERY`` rows."""

    def __init__(
        self, table: str, rows: Iterable[Row], total: int = 0, progress: Progress | None = None
    ) -> None:
        self.table, self.total = table, total
        self._rows, self._progress = rows, progress
        self.count = 0
        self.last: Row | None = None

    def __iter__(self) -> Iterator[Row]:
        self._tell()
        for row in self._rows:
            self.count += 1
            self.last = row
            if self.count % PROGRESS_EVERY == 0:
                self._tell()
            yield row
        self._tell()

    def _tell(self) -> None:
        if self._progress is not None:
            self._progress(self.table, self.count, self.total)


# --- reading ---------------------------------------------------------------------------------


class Names:
    """Internal ids -> portable references (:class:`portable.IdsToRefs`), for one snapshot."""

    def __init__(self, session: Session) -> None:
        self.cases = dict(session.execute(select(Case.id, Case.external_id)).all())
        self.responses = dict(session.execute(select(Response.id, Response.external_id)).all())
        self.annotators = dict(session.execute(select(Annotator.id, Annotator.name)).all())
        self.sentences = {
            sid: (case_id, response_id, position)
            for sid, case_id, response_id, position in session.execute(
                select(Sentence.id, Sentence.case_id, Sentence.response_id, Sentence.position)
            )
        }
        self.units = {
            uid: (name, position)
            for uid, name, position in session.execute(
                select(Unit.id, UnitSet.name, Unit.position).join(
                    UnitSet, UnitSet.id == Unit.unit_set_id
                )
            )
        }

    def case(self, case_id: int) -> str:
        """A case's external id."""
        return self.cases[case_id]

    def response(self, response_id: int) -> str:
        """A response's external id."""
        return self.responses[response_id]

    def sentence(self, sentence_id: int) -> dict:
        """``{"owner", "of", "position"}`` of a sentence."""
        case_id, response_id, position = self.sentences[sentence_id]
        if case_id is not None:
            return {"owner": self.cases[case_id], "of": "case", "position": position}
        return {"owner": self.responses[response_id], "of": "response", "position": position}

    def unit(self, unit_id: int | None) -> dict | None:
        """``{"set", "position"}`` of a unit (None for no unit)."""
        if unit_id not in self.units:
            return None
        name, position = self.units[unit_id]
        return {"set": name, "position": position}


def study_settings(session: Session) -> dict[str, Any]:
    """The study's design settings kept in ``project_meta`` that travel with an export (the
    adaptive sets travel with their unit sets): the own-examples count (0: off)."""
    return {"own_examples": StudyService.own_examples_in(session)}


def read_tables(session: Session) -> tuple[dict, dict[str, Table]]:
    """(project.json content, table name -> (columns, rows)), all from one session, every
    table's rows in a list (the exports for other tools look rows up across tables)."""
    project, streams = stream_tables(session)
    return project, {name: (columns, list(rows)) for name, (columns, rows) in streams.items()}


def stream_tables(
    session: Session, progress: Progress | None = None, kinds: Collection[str] | None = None
) -> tuple[dict, dict[str, Stream]]:
    """(project.json content, table name -> (columns, rows)), all from one session, each
    table's rows read ``STREAM_BATCH`` at a time as they are taken: taken in the session's
    transaction, one table after the other. (Held at once, the rows of a study of 294,800
    answers took 1.6 GB.) ``progress`` is told as they are taken, with each table's count;
    ``kinds``: the answers of those kinds alone (all when None)."""
    names = Names(session)
    meta = {row.key: row.value for row in session.scalars(select(ProjectMeta))}
    project = {
        "name": meta.get("name", ""),
        "exported_by": f"PortalReview {__version__}",
        "schema_version": SCHEMA_VERSION,
        "catalogs": read_catalogs(session).to_dict(),
        "settings": study_settings(session),
    }
    tables = {
        "annotators": (ANNOTATOR_COLUMNS, _annotators(session)),
        "cases": (CASE_COLUMNS, _cases(session)),
        "responses": (RESPONSE_COLUMNS, _responses(session)),
        "unit_sets": (UNIT_SET_COLUMNS, _unit_sets(session)),
        "units": (UNIT_COLUMNS, _units(session, names)),
        "assignments": (ASSIGNMENT_COLUMNS, _assignments(session, names)),
        "suggestions": (SUGGESTION_COLUMNS, _suggestions(session, names)),
        "answers": (ANSWER_COLUMNS, _answers(session, names, kinds)),
        "audit": (AUDIT_COLUMNS, _audit(session, names)),
    }
    totals = _row_counts(session, kinds) if progress is not None else {}
    return project, {
        name: (columns, Tally(name, rows, totals.get(name, 0), progress))
        for name, (columns, rows) in tables.items()
    }


#: The table each exported table has a row for each row of.
_COUNTED_BY = {
    "annotators": Annotator,
    "cases": Case,
    "responses": Response,
    "unit_sets": UnitSet,
    "units": Unit,
    "assignments": Assignment,
    "suggestions": Suggestion,
    "answers": Answer,
    "audit": AuditEntry,
}


def _row_counts(session: Session, kinds: Collection[str] | None) -> dict[str, int]:
    """Exported table -> its rows in all (for progress); answers of ``kinds`` alone."""
    counts = {}
    for name, model in _COUNTED_BY.items():
        query = select(func.count()).select_from(model)
        if model is Answer and kinds is not None:
            query = query.where(Answer.kind.in_(kinds))
        counts[name] = session.scalar(query) or 0
    return counts


def _streamed(query: Select) -> Select:
    """``query`` fetched ``STREAM_BATCH`` rows at a time as its result is iterated."""
    return query.execution_options(yield_per=STREAM_BATCH)


def _annotators(session: Session) -> Iterator[Row]:
    for a in session.scalars(select(Annotator).order_by(Annotator.id)):
        yield {
            "name": a.name,
            "display_name": a.display_name,
            "role": a.role,
            "is_model": bool(a.is_model),
            "created_at": a.created_at,
        }


def _tags(session: Session) -> dict[int, dict[str, Any]]:
    """case id -> {key: value, or sorted values when there are several}."""
    found: dict[int, dict[str, list[str]]] = {}
    rows = session.execute(
        select(CaseTag.case_id, CaseTag.key, CaseTag.value).order_by(
            CaseTag.case_id, CaseTag.key, CaseTag.value
        )
    )
    for case_id, key, value in rows:
        found.setdefault(case_id, {}).setdefault(key, []).append(value)
    return {
        case_id: {k: v[0] if len(v) == 1 else v for k, v in tags.items()}
        for case_id, tags in found.items()
    }


def _cases(session: Session) -> Iterator[Row]:
    tags = _tags(session)
    for c in session.scalars(_streamed(select(Case).order_by(Case.id))):
        stored = json.loads(c.chart_json)
        chart = {section: list(stored.get(section, [])) for section in CHART_SECTIONS}
        yield {
            "case_id": c.external_id,
            "message": c.message,
            **chart,
            "chart": None if c.chart_text == chart_text_of(chart) else c.chart_text,
            "age_band": c.age_band,
            "gender": c.gender,
            "source": c.source_dataset,
            "urgency_level": c.urgency_level if c.urgency_level is not None else c.urgency_filter,
            "tags": tags.get(c.id, {}),
            "created_at": c.created_at,
        }


def _responses(session: Session) -> Iterator[Row]:
    cases = dict(session.execute(select(Case.id, Case.external_id)).all())
    for r in session.scalars(_streamed(select(Response).order_by(Response.id))):
        yield {
            "response_id": r.external_id,
            "case_id": cases[r.case_id],
            "text": r.text,
            "author_kind": r.author_kind,
            "author": r.author,
            "source": r.source,
            "production": r.production,
            "created_at": r.created_at,
        }


def _unit_sets(session: Session) -> Iterator[Row]:
    adaptive = adaptive_settings(session)
    for s in session.scalars(select(UnitSet).order_by(UnitSet.id)):
        setting = adaptive.get(s.id)
        yield {
            "name": s.name,
            "kind": s.kind,
            "description": s.description,
            "created_at": s.created_at,
            "adaptive_judgements": None if setting is None else setting.judgements,
        }


def _units(session: Session, names: Names) -> Iterator[Row]:
    members: dict[int, list[int]] = {}
    for unit_id, response_id in session.execute(
        select(RankMember.unit_id, RankMember.response_id).order_by(RankMember.response_id)
    ):
        members.setdefault(unit_id, []).append(response_id)
    query = select(Unit, UnitSet.name).join(UnitSet, UnitSet.id == Unit.unit_set_id)
    for u, set_name in session.execute(_streamed(query.order_by(Unit.unit_set_id, Unit.position))):
        refs = {
            "case_id": u.case_id,
            "case_b_id": u.case_b_id,
            "response_id": u.response_id,
            "response_b_id": u.response_b_id,
            "sentence_id": u.sentence_id,
            "members": members.get(u.id, []) if u.kind == "rank" else None,
        }
        portable = to_portable(refs, UNIT_REFS, names)
        yield {"set": set_name, "kind": u.kind, "position": u.position, **portable,
               "batch": u.batch}  # fmt: skip


_ASSIGNMENT_FIELDS = (
    Assignment.unit_id,
    Assignment.annotator_id,
    Assignment.position,
    Assignment.presentation_json,
    Assignment.assigned_at,
    Assignment.is_gold_holder,
)


def _assignments(session: Session, names: Names) -> Iterator[Row]:
    kinds = dict(session.execute(select(Unit.id, Unit.kind)).all())
    query = (
        select(*_ASSIGNMENT_FIELDS)
        .join(Unit, Unit.id == Assignment.unit_id)
        .order_by(Unit.unit_set_id, Unit.position, Assignment.annotator_id)  # as units are
    )
    for a in session.execute(_streamed(query)):
        shown = json.loads(a.presentation_json)
        yield {
            "unit": names.unit(a.unit_id),
            "annotator": names.annotators[a.annotator_id],
            "position": a.position,
            "presentation": sorted_json(
                to_portable(shown, presentation_refs(kinds[a.unit_id]), names)
            ),
            "assigned_at": a.assigned_at,
            "gold_holder": bool(a.is_gold_holder),
        }


def _suggestion_numbers(session: Session) -> dict[int, int]:
    """suggestion id -> its number among its unit's suggestions (from 1, in id order)."""
    numbers: dict[int, int] = {}
    counts: dict[int, int] = {}
    for sid, unit_id in session.execute(
        select(Suggestion.id, Suggestion.unit_id).order_by(Suggestion.id)
    ):
        counts[unit_id] = counts.get(unit_id, 0) + 1
        numbers[sid] = counts[unit_id]
    return numbers


def _suggestions(session: Session, names: Names) -> Iterator[Row]:
    numbers = _suggestion_numbers(session)
    for s in session.scalars(_streamed(select(Suggestion).order_by(Suggestion.id))):
        payload = json.loads(s.payload_json)
        if isinstance(payload, dict):
            payload = answer_to_portable(s.kind, payload, names)
        yield {
            "unit": names.unit(s.unit_id),
            "kind": s.kind,
            "number": numbers[s.id],
            "payload": sorted_json(payload),
            "model_file": s.model_file,
            "model_sha256": s.model_sha256,
            "template_id": s.template_id,
            "template_text": s.template_text,
            "params": sorted_json(params_to_portable(s.kind, json.loads(s.params_json), names)),
            "seed": s.seed,
            "seconds": s.seconds,
            "created_at": s.created_at,
            "refused_reason": s.refused_reason,
            "for_annotator": names.annotators.get(s.for_annotator_id),
        }


#: Answers read together, their payloads a few queries per kind (the codecs' ``read_many``):
#: read one by one, 294,800 answers took about 900,000 queries.
PAYLOAD_BATCH = 2000

_ANSWER_FIELDS = (
    Answer.id,
    Answer.kind,
    Answer.unit_id,
    Answer.annotator_id,
    Answer.is_gold,
    Answer.status,
    Answer.active_seconds,
    Answer.flagged,
    Answer.flag_note,
    Answer.comment,
    Answer.suggestion_id,
    Answer.suggestion_use,
    Answer.created_at,
    Answer.updated_at,
)


def _answer_batches(session: Session, kinds: Collection[str] | None) -> Iterator[Sequence[SqlRow]]:
    """The answers (of ``kinds``, or all) in id order, ``PAYLOAD_BATCH`` at a time, each batch
    one query (by the last id seen: no result is left open while the payloads are read)."""
    last_id = None
    while True:
        query = select(*_ANSWER_FIELDS).order_by(Answer.id).limit(PAYLOAD_BATCH)
        if kinds is not None:
            query = query.where(Answer.kind.in_(kinds))
        if last_id is not None:
            query = query.where(Answer.id > last_id)
        batch = plain_rows(session, query)
        if not batch:
            return
        yield batch
        last_id = batch[-1].id


def _payloads(session: Session, answers: Sequence[SqlRow]) -> dict[int, dict]:
    """Answer id -> payload, each kind's read in one ``read_many``."""
    ids_by_kind: dict[str, list[int]] = {}
    for a in answers:
        ids_by_kind.setdefault(a.kind, []).append(a.id)
    payloads: dict[int, dict] = {}
    for kind, ids in ids_by_kind.items():
        payloads.update(CODECS[kind].read_many(session, ids))
    return payloads


def _answers(session: Session, names: Names, kinds: Collection[str] | None) -> Iterator[Row]:
    numbers = _suggestion_numbers(session)
    for batch in _answer_batches(session, kinds):
        payloads = _payloads(session, batch)
        for a in batch:
            yield _answer_row(a, payloads[a.id], numbers, names)


def _answer_row(a: SqlRow, payload: dict, numbers: dict[int, int], names: Names) -> Row:
    return {
        "kind": a.kind,
        "unit": names.unit(a.unit_id),
        "annotator": names.annotators[a.annotator_id],
        "gold": bool(a.is_gold),
        "status": a.status,
        "active_seconds": a.active_seconds,
        "flagged": bool(a.flagged),
        "flag_note": a.flag_note,
        "comment": a.comment,
        "suggestion": numbers.get(a.suggestion_id),
        "suggestion_use": a.suggestion_use,
        "created_at": a.created_at,
        "updated_at": a.updated_at,
        "answer": sorted_json(answer_to_portable(a.kind, payload, names)),
    }


def _audit(session: Session, names: Names) -> Iterator[Row]:
    for e in session.scalars(_streamed(select(AuditEntry).order_by(AuditEntry.id))):
        yield {
            "id": e.id,
            "at": e.at,
            "actor_id": e.actor_id,
            "actor": names.annotators.get(e.actor_id),
            "action": e.action,
            "answer_id": e.answer_id,
            "unit_id": e.unit_id,
            "unit": names.unit(e.unit_id),
            "old_json": e.old_json,
            "new_json": e.new_json,
            "prev_hash": e.prev_hash,
            "hash": e.hash,
        }


# --- writing -----------------------------------------------------------------------------------


def _replace(path: Path, write) -> Path:
    """Write through a temporary file and rename it, so a failure leaves no half file."""
    return write_through_temporary(path, write)


def _write_folder(out: Path, fmt: str, meta: dict, tables: dict[str, Stream]) -> list[Path]:
    """The tables first, written whole and to disk in a hidden staging folder inside ``out``:
    a failure or a stop (Ctrl+C) while they are written, nearly all of an export's time,
    leaves the folder as it was. Then project.json, saying the export is unfinished; the
    tables renamed over the earlier ones; project.json again, recording each file. A process
    killed during the renames leaves a folder that verify and import refuse, not a mixture of
    the two exports taken for one (store/export_manifest.py)."""
    writer = _jsonl_writer if fmt == "jsonl" else _csv_writer
    files = [f"{name}.{fmt}" for name in tables]
    project_json = out / PROJECT_JSON
    with staging_folder(out) as staging:  # a read-only disk named in words
        for file, (columns, rows) in zip(files, tables.values(), strict=True):
            write_staged(staging / file, out / file, writer(columns, rows))
        audit = tables["audit"][1]
        last_hash = audit.last["hash"] if audit.last else None
        record = finished(fmt, [staging / file for file in files], audit.count, last_hash)
        _write_json(project_json, {**meta, RECORD_KEY: unfinished(fmt)})
        move_into_place(staging, out, files)
    return [_write_json(project_json, {**meta, RECORD_KEY: record}), *(out / f for f in files)]


def _write_json(path: Path, data: dict) -> Path:
    text = json.dumps(data, ensure_ascii=False, indent=2) + "\n"
    return _replace(path, lambda p: p.write_bytes(text.encode("utf-8")))


def _jsonl_writer(columns: tuple[str, ...], rows: Iterable[Row]) -> Callable[[Path], None]:
    def write(target: Path) -> None:
        with target.open("w", encoding="utf-8", newline="\n") as fh:
            for row in rows:
                fh.write(json.dumps({c: row[c] for c in columns}, ensure_ascii=False) + "\n")

    return write


def cell_text(value: Any) -> str:
    """A value as CSV cell text: nested values as JSON, true/false, empty for null."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _csv_writer(columns: tuple[str, ...], rows: Iterable[Row]) -> Callable[[Path], None]:
    """Texts quoted, and escaped so that a spreadsheet cannot run them as formulas (the
    reader undoes it: store/csv_cells.py); numbers bare."""

    def write(target: Path) -> None:
        with target.open("w", encoding="utf-8-sig", newline="") as fh:
            writer = safe_writer(fh)
            writer.writerow(columns)
            writer.writerows(safe_row(_csv_value(row[c]) for c in columns) for row in rows)

    return write


def _csv_value(value: Any) -> Any:
    return cell_text(value) if isinstance(value, dict | list) else value


def _write_xlsx(path: Path, meta: dict, tables: dict[str, Stream]) -> Path:
    """One sheet per table, each cell checked as it is added (the sheets are streamed to
    temporary files); a refused cell or a stop leaves no workbook and no sheet's file."""
    from openpyxl import Workbook

    sheets = {"project": (("name", "catalogs", "settings"), [meta]), **tables}
    book = Workbook(write_only=True)
    try:
        for name, (columns, rows) in sheets.items():
            _fill_sheet(book.create_sheet(name), name, columns, rows)
    except BaseException:
        close_sheets(book)
        raise
    return _replace(
        path if path.suffix else path.with_suffix(".xlsx"), lambda p: save_workbook(book, p)
    )


def _fill_sheet(sheet: Any, name: str, columns: tuple[str, ...], rows: Iterable[Row]) -> None:
    from openpyxl.cell import WriteOnlyCell

    sheet.append(list(columns))
    for number, row in enumerate(rows, start=2):
        values = [_excel_value(name, number, c, row[c]) for c in columns]
        sheet.append([_text_cell(WriteOnlyCell, sheet, v) for v in values])


def _excel_value(table: str, number: int, column: str, value: Any) -> Any:
    """``value`` as a cell value (nested values as JSON text); refuses what Excel cannot hold."""
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE

    if isinstance(value, float) and float(f"{value:.16g}") != value:
        return repr(value)  # openpyxl writes 16 digits: as text, the number comes back exactly
    if value is None or isinstance(value, bool | int | float):
        return value
    text = cell_text(value)
    where = f"{table}, row {number}, field {column!r}"
    if not fits_excel_cell(text):
        raise ExportFailed(
            f"{where}: {excel_length(text):,} characters as Excel counts them (an emoji "
            f"counts 2) do not fit an Excel cell ({EXCEL_CELL_LIMIT:,} at most); "
            "export as jsonl or csv instead"
        )
    if ILLEGAL_CHARACTERS_RE.search(text):
        raise ExportFailed(
            f"{where}: the text holds control characters Excel cannot store; "
            "export as jsonl or csv instead"
        )
    return ooxml_escape(text)


def _text_cell(make: Any, sheet: Any, value: Any) -> Any:
    """Text as a text cell, never a formula or an error code ("=SUM(...)", "#N/A")."""
    if not isinstance(value, str):
        return value
    cell = make(sheet, value=value)
    cell.data_type = "s"
    return cell
