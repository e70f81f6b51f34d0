"""Check the audit log's hash chain, in a project or in an export of it.

Every change to an answer (and every import, catalog or template change) adds a row to the
``audit_log`` table whose ``hash`` is the SHA-256 of the previous row's hash and this row's
content (:func:`portalreview.store.service.audit_hash`). The database refuses UPDATE and
DELETE on the table; this module detects what the database cannot prevent: a file edited with
another tool, or an exported log (``audit.jsonl``, ``audit.csv`` or the ``audit`` sheet of an
xlsx export) changed afterwards. Editing, deleting, inserting or reordering a row breaks the
chain at that row, unless every later hash is recomputed too; exports also record the last
hash, which a PI can write down (or sign) to pin the whole history.

``verify_project(project)`` also compares every answer of the project with the newest audit
entry naming it (:func:`check_answers`): an answer whose audited state (status, payload, flag,
flag note, comment, suggestion and its use: what :meth:`StudyService._audit_state` records)
is not the one that entry recorded was changed outside PortalReview (a detail row updated or
deleted with psql or an SQLite tool), and so was an answer with no entry at all, or an entry
whose answer is gone. Only the fields an entry recorded are compared (every entry since the
first format records all seven; a field added to the audited state later will not be compared
with entries written before it). A copy made for one clinician holds no audit entries of the
answers it was made with (its log starts at the copy): there, an answer without an entry whose
id is not above the copy's highest answer id when it was made (``copy_max_answer_id``) is
counted, not reported (a copy made before that key was recorded: every answer without one).
On a server, only the PI or the study's owner sees the whole log and every answer: a
clinician's login is refused (row-level security would show them only their own rows). A file
of an older format is verified in an upgraded temporary copy (:func:`verify_file`), the file
itself unchanged. What verification cannot detect: a change made together with a correctly
computed audit entry by someone who may write the log (the owner of the file, the server study's
owner), which is then an ordinary entry in the history, naming whoever it says.

In a project file, ``verify_project`` also compares the file's tables, views, indexes and
triggers with the program's own (:mod:`portalreview.store.own_schema`): one of the program's
own missing, one of its triggers changed (``audit_no_update`` and ``audit_no_delete`` are the
audit log's protection) and any object the program did not make (a trigger of it runs whenever
PortalReview writes its table, and may copy or change what it writes) are problems
(``schema_problems``).

``verify_export(folder)`` also checks an export folder's files against the record its export
wrote last in project.json (:mod:`portalreview.store.export_manifest`): an export stopped
part-way while it wrote over an earlier one leaves files of both, which is reported
(``export_problems``). An export's answers are not compared with its log: they carry portable
references and no answer id, the log internal ids.

``verify_project(project)`` and ``verify_export(path)`` return an :class:`AuditVerification`;
its ``ok`` is False and ``problems`` names the rows when the chain is broken, and
``answer_problems`` the answers that differ from the log.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from portalreview.store.catalog_store import read_catalogs
from portalreview.store.csv_cells import unescape_formula
from portalreview.store.errors import StoreError
from portalreview.store.export_manifest import CUT_SHORT, check_export_folder
from portalreview.store.models import Annotator, Answer, AuditEntry, ProjectMeta
from portalreview.store.own_schema import OBJECTS_SQL, schema_problems
from portalreview.store.project import Project
from portalreview.store.service import GENESIS_HASH, StudyService, audit_hash

_HASHED = ("at", "actor_id", "action", "answer_id", "unit_id", "old_json", "new_json")
_PROBLEMS_LISTED = 20


@dataclass(frozen=True)
class AuditVerification:
    """The result of a check: ``entries`` rows read, ``last_hash`` the chain's end (the value
    to record to pin the history), ``problems`` one line per broken row (the first few)."""

    entries: int
    last_hash: str
    problems: tuple[str, ...] = field(default_factory=tuple)
    more_problems: int = 0
    answers: int | None = None  # answers compared with the log (None: an export, not compared)
    answer_problems: tuple[str, ...] = field(default_factory=tuple)
    more_answer_problems: int = 0
    before_copy: int = 0  # a copy for one clinician: answers older than its log, not compared
    upgraded_from: int | None = None  # a file of this older format: checked in an upgraded copy
    export_files: int | None = None  # an export folder's files matching its record (None: none)
    export_problems: tuple[str, ...] = field(default_factory=tuple)  # a folder not whole
    unrecorded_export: bool = False  # an export folder whose project.json records no files
    schema_problems: tuple[str, ...] = field(default_factory=tuple)  # objects not the program's

    @property
    def ok(self) -> bool:
        return not (
            self.problems or self.answer_problems or self.export_problems or self.schema_problems
        )

    def describe(self) -> str:
        described = self._describe()
        if self.export_problems:
            described = (
                f"export NOT WHOLE: the folder {CUT_SHORT}:\n  "
                + "\n  ".join(self.export_problems)
                + "\n"
                + described
            )
        if self.unrecorded_export:
            described += (
                "\n(project.json records no list of the export's files, as exports by earlier "
                "versions do not: that the files are one export cannot be checked; export "
                "again to record it)"
            )
        if self.upgraded_from is not None:
            described += (
                f"\n(the file is in the older format {self.upgraded_from}: verified in a "
                "temporary copy upgraded to this version's format; the file itself was not "
                "changed)"
            )
        return described

    def _describe(self) -> str:
        answers = ""
        if self.answers is not None:
            compared = self.answers - self.before_copy
            answers = f"; {compared} answers match their last audit entry"
            if self.before_copy:
                answers += (
                    f" ({self.before_copy} made before this copy was, whose entries stay in "
                    "the master's log, not compared)"
                )
        if self.export_files is not None and not self.export_problems:
            answers += f"; the export's {self.export_files} files are the ones it wrote"
        if self.ok:
            return f"audit log intact: {self.entries} entries, last hash {self.last_hash}{answers}"
        lines = []
        if self.problems:
            extra = f" (and {self.more_problems} more)" if self.more_problems else ""
            lines.append(
                f"audit log TAMPERED or damaged: {len(self.problems) + self.more_problems} "
                f"problem(s) in {self.entries} entries{extra}:\n  " + "\n  ".join(self.problems)
            )
        else:
            lines.append(
                f"audit log chain intact: {self.entries} entries, last hash {self.last_hash}"
            )
        if self.answer_problems:
            count = len(self.answer_problems) + self.more_answer_problems
            extra = f" (and {self.more_answer_problems} more)" if self.more_answer_problems else ""
            lines.append(
                f"answers CHANGED outside PortalReview: {count} of {self.answers} answer(s) "
                f"differ from the audit log{extra}:\n  " + "\n  ".join(self.answer_problems)
            )
        if self.schema_problems:
            lines.append(
                "the file's schema is NOT PortalReview's (changed with another tool; a "
                "trigger not its own runs whenever PortalReview writes that table):\n  "
                + "\n  ".join(self.schema_problems)
            )
        return "\n".join(lines)


def _int_or_none(value: Any) -> int | None:
    if value is None or value == "":
        return None
    return int(value)


def _text_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return str(value)


def verify_rows(
    rows: Iterable[Mapping[str, Any]], expected_last: str | None = None
) -> AuditVerification:
    """Check rows in log order (each with ``id``, ``prev_hash``, ``hash`` and the hashed
    fields). ``expected_last``: the last hash recorded elsewhere, which the chain must end on
    (this detects rows cut off the end)."""
    problems: list[str] = []
    previous = GENESIS_HASH
    previous_id = 0
    count = 0
    for row in rows:
        count += 1
        row_id = _int_or_none(row.get("id"))
        where = f"entry {row_id if row_id is not None else f'#{count}'}"
        entry = SimpleNamespace(
            prev_hash=str(row.get("prev_hash") or ""),
            at=_text_or_none(row.get("at")),
            actor_id=_int_or_none(row.get("actor_id")),
            action=_text_or_none(row.get("action")),
            answer_id=_int_or_none(row.get("answer_id")),
            unit_id=_int_or_none(row.get("unit_id")),
            old_json=_text_or_none(row.get("old_json")),
            new_json=_text_or_none(row.get("new_json")),
        )
        if row_id is not None and row_id <= previous_id:
            problems.append(f"{where}: out of order (after entry {previous_id})")
        if entry.prev_hash != previous:
            problems.append(
                f"{where}: does not follow the entry before it (a row removed, "
                "inserted or reordered)"
            )
        if audit_hash(entry) != row.get("hash"):
            problems.append(f"{where}: its content does not match its hash (edited)")
        previous = str(row.get("hash") or "")
        previous_id = row_id if row_id is not None else previous_id
    if expected_last is not None and previous != expected_last:
        problems.append(
            f"the log ends on {previous[:12]}…, not on the recorded last hash "
            f"{expected_last[:12]}… (entries removed from the end, or another log)"
        )
    return AuditVerification(
        count,
        previous,
        tuple(problems[:_PROBLEMS_LISTED]),
        max(0, len(problems) - _PROBLEMS_LISTED),
    )


def verify_project(
    project: Project, expected_last: str | None = None, *, answers: bool = True
) -> AuditVerification:
    """Check the audit log of an open project, and (``answers``) that every answer is what the
    log last recorded of it (:func:`check_answers`)."""
    newest: dict[int, tuple[int, int | None, str | None]] = {}
    columns = [getattr(AuditEntry, name) for name in ("id", "prev_hash", "hash", *_HASHED)]

    def rows(session: Session) -> Iterator[dict[str, Any]]:
        result = session.execute(select(*columns).order_by(AuditEntry.id))
        for values in result:
            row = dict(zip(("id", "prev_hash", "hash", *_HASHED), values, strict=True))
            if row["answer_id"] is not None:
                newest[row["answer_id"]] = (row["id"], row["unit_id"], row["new_json"])
            yield row

    with project.read() as session:
        _check_sees_everything(session)
        read_catalogs(session)  # a file whose making was cut short holds no study: refused
        chain = replace(
            verify_rows(rows(session), expected_last), schema_problems=_schema_problems(session)
        )
        if not answers:
            return chain
        restricted = session.get(ProjectMeta, "copy_only_assigned")
        last = session.get(ProjectMeta, "copy_max_answer_id")
        found = check_answers(
            session,
            newest,
            restricted is not None and restricted.value == "1",
            copy_max_answer_id=int(last.value) if last is not None and last.value else None,
        )
    listed = found.problems[:_PROBLEMS_LISTED]
    return replace(
        chain,
        answers=found.checked,
        answer_problems=tuple(listed),
        more_answer_problems=len(found.problems) - len(listed),
        before_copy=found.before_copy,
    )


def _schema_problems(session: Session) -> tuple[str, ...]:
    """In a file, its objects that are not the program's, and the program's it lacks or
    holds changed (:func:`portalreview.store.own_schema.schema_problems`); a server study:
    none checked here."""
    if session.get_bind().dialect.name != "sqlite":
        return ()
    return tuple(schema_problems(session.execute(text(OBJECTS_SQL)).all()))


def _check_sees_everything(session: Session) -> None:
    """On a server, refuse a login that row-level security shows only some of the log and the
    answers (a clinician's: only their own), whose check would be false."""
    require_whole_view(
        session,
        "verify the whole audit log",
        "a clinician's login sees only their own entries and answers, so its check would be "
        "false",
    )


def require_whole_view(session: Session, what: str, because: str) -> None:
    """Refuse ``what`` (StoreError) to a login that does not see the whole study: on a server
    a clinician's, which row-level security shows her own answers and entries only, so the
    result would be partial (``because`` says how) without saying so."""
    if not sees_everything(session):
        raise StoreError(
            f"only the PI or the study's owner can {what}: {because}; sign in as the PI or "
            "the study's owner"
        )


def sees_everything(session: Session) -> bool:
    """Whether this login reads the whole log and every answer: always in a file; on a server,
    the PI's or the study owner's login (row-level security shows a clinician their own)."""
    if session.get_bind().dialect.name != "postgresql":
        return True
    return bool(session.scalar(text("SELECT portalreview_me() IS NULL OR portalreview_is_pi()")))


def verify_file(path: Path, expected_last: str | None = None) -> AuditVerification:
    """Check a project file (:func:`verify_project`), opened read-only; a file of an older
    format is checked in an upgraded temporary copy (``upgraded_from`` says which format), as
    a merge reads an old copy: the file itself is never changed."""
    from portalreview.store.merge import VERIFY_PREFIX, open_read_only_upgraded

    with open_read_only_upgraded(Path(path), VERIFY_PREFIX) as (project, older):
        return replace(verify_project(project, expected_last), upgraded_from=older)


@dataclass
class AnswerCheck:
    """What :func:`check_answers` found: ``checked`` answers, ``problems`` one line per answer
    that differs from the log, ``before_copy`` answers of a one-clinician copy left out."""

    checked: int = 0
    problems: list[str] = field(default_factory=list)
    before_copy: int = 0


_MISSING = object()
_ANSWERS_READ = 2000  # answers read per query (their payloads in bulk, see _answer_views)


def _named(answer_id: int, unit_id: int, annotator_id: int, is_gold: bool, names) -> str:
    """How a problem names an answer: its id, its unit and whose it is."""
    who = names.get(annotator_id, f"#{annotator_id}")
    return f"answer {answer_id} (unit {unit_id}, {'gold by' if is_gold else 'annotator'} {who})"


def check_answers(
    session: Session,
    newest: Mapping[int, tuple[int, int | None, str | None]],
    restricted_copy: bool = False,
    *,
    copy_max_answer_id: int | None = None,
) -> AnswerCheck:
    """Compare every answer's audited state, built by the service's own code
    (``StudyService._answer_views`` and ``_audit_state``), with what the newest audit entry
    naming it recorded (``newest``: answer id -> (entry id, unit id, new_json)). Only the
    fields the entry recorded are compared. ``restricted_copy``: answers without an entry
    predate this copy's log (:func:`portalreview.store.merge.make_copy`) and are counted: those
    up to ``copy_max_answer_id`` (the copy's highest answer id when it was made; None, a copy
    made before it was recorded: all of them). One above it was made in the copy outside
    PortalReview and is reported."""
    out = AnswerCheck()
    names = dict(session.execute(select(Annotator.id, Annotator.name)).all())
    seen: set[int] = set()
    columns = Answer.__table__.columns  # rows, not ORM objects: a third of the time
    last_id = 0
    while True:
        chunk = session.execute(
            select(*columns).where(Answer.id > last_id).order_by(Answer.id).limit(_ANSWERS_READ)
        ).all()
        if not chunk:
            break
        last_id = chunk[-1].id
        out.checked += len(chunk)
        seen.update(answer.id for answer in chunk)
        logged = []
        for a in chunk:
            if a.id in newest:
                logged.append(a)
            elif restricted_copy and (copy_max_answer_id is None or a.id <= copy_max_answer_id):
                out.before_copy += 1
            else:
                which = _named(a.id, a.unit_id, a.annotator_id, a.is_gold, names)
                out.problems.append(f"{which} has no audit entry: made outside PortalReview")
        for view in StudyService._answer_views(session, logged):
            entry_id, entry_unit, new_json = newest[view.answer_id]
            current_json = json.dumps(StudyService._audit_state(view), sort_keys=True)
            if current_json == new_json and entry_unit == view.unit_id:
                continue  # as the service wrote it (``StudyService._audit``): the same state
            which = _named(view.answer_id, view.unit_id, view.annotator_id, view.is_gold, names)
            current = json.loads(current_json)
            try:
                recorded = json.loads(new_json) if new_json else None
            except ValueError:
                recorded = None
            if not isinstance(recorded, dict):
                out.problems.append(
                    f"{which}: its last audit entry (#{entry_id}) records no answer"
                )
                continue
            fields = sorted(
                name for name, value in recorded.items() if current.get(name, _MISSING) != value
            )
            if entry_unit != view.unit_id:
                fields.insert(0, "unit")
            if fields:
                out.problems.append(
                    f"{which} differs from its last audit entry (#{entry_id}): changed outside "
                    f"PortalReview ({', '.join(fields)})"
                )
    for answer_id, (entry_id, unit_id, _) in sorted(newest.items()):
        if answer_id not in seen:
            out.problems.append(
                f"answer {answer_id} (unit {unit_id}) is in the audit log (entry #{entry_id}) "
                "but not in the project: deleted outside PortalReview"
            )
    return out


def read_exported_log(path: Path) -> list[dict[str, Any]]:
    """The audit rows of an export: a jsonl or csv export folder (or its ``audit.*`` file), or
    an xlsx export (its ``audit`` sheet)."""
    path = Path(path)
    if path.is_dir():
        for name in ("audit.jsonl", "audit.csv"):
            if (path / name).exists():
                return read_exported_log(path / name)
        raise FileNotFoundError(f"{path} holds no audit.jsonl or audit.csv")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            return [json.loads(line) for line in fh if line.strip()]
    if suffix == ".csv":
        csv.field_size_limit(2**31 - 1)
        with path.open(encoding="utf-8-sig", newline="") as fh:  # cells as the export wrote
            return [  # them, less the quote that keeps a spreadsheet from running a formula
                {k: unescape_formula(v) for k, v in row.items()} for row in csv.DictReader(fh)
            ]
    if suffix == ".xlsx":
        from portalreview.store.importers.readers import open_workbook

        book = open_workbook(path, path.name)  # a zip bomb or a damaged file: refused in words
        try:
            if "audit" not in book.sheetnames:
                raise ValueError(f"{path.name} has no 'audit' sheet")
            sheet = book["audit"]
            # read whole whatever used range the file records (WPS Office writes A1): a log
            # read cut short whose chain still holds would verify
            sheet.reset_dimensions()
            rows = sheet.iter_rows(values_only=True)
            header = [str(c) for c in next(rows)]
            return [dict(zip(header, values, strict=False)) for values in rows]
        finally:
            book.close()
    raise ValueError(f"{path.name}: not an export (jsonl or csv folder, or .xlsx)")


def verify_export(path: Path, expected_last: str | None = None) -> AuditVerification:
    """Check the audit log of an export (see :func:`read_exported_log`) and, for a folder,
    that its files are the ones the export recorded in project.json
    (:func:`portalreview.store.export_manifest.check_export_folder`): a folder whose export
    was cut short while it was written over is not taken for a whole one."""
    path = Path(path)
    if not path.is_dir():
        return verify_rows(read_exported_log(path), expected_last)
    folder = check_export_folder(path)
    recorded_log = path / f"audit.{folder.fmt}"
    log = recorded_log if folder.fmt and recorded_log.is_file() else path
    return replace(
        verify_rows(read_exported_log(log), expected_last),
        export_files=len(folder.files) if folder.recorded else None,
        export_problems=tuple(folder.problems),
        unrecorded_export=not folder.recorded,
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m portalreview.store.audit_verify PATH [--last HASH]``: PATH is a project
    file or an export; exit status 0 when the chain is intact (and, for a project, every answer
    is what the log last recorded), 1 when not, 2 on bad input. ``portalreview verify`` does
    the same, for a server study too."""
    import argparse
    import sys

    from portalreview.store.project import SUFFIX, ProjectError

    parser = argparse.ArgumentParser(prog="python -m portalreview.store.audit_verify")
    parser.add_argument("path", type=Path, help="a project file, or an export (folder or xlsx)")
    parser.add_argument("--last", metavar="HASH", help="the last hash recorded earlier")
    args = parser.parse_args(argv)
    try:
        if args.path.suffix == SUFFIX:
            result = verify_file(args.path, args.last)
        else:
            result = verify_export(args.path, args.last)
    except (ProjectError, OSError, ValueError) as exc:
        print(f"audit_verify: {exc}", file=sys.stderr)
        return 2
    print(result.describe())
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
