"""Check the audit log's hash chain, in a project or in an export of it.

Every change to an answer (and every import, catalog or template change) adds a row to the
``audit_log`` table whose ``hash`` is the SHA-256 of the previous row's hash and this row's
content (:func:`portalreview.store.service.audit_hash`). The database refuses UPDATE and
DELETE on the table; this module detects what the database cannot prevent: a file edited with
another tool, or an exported log (``audit.jsonl``, ``audit.csv`` or the ``audit`` sheet of an
xlsx export) changed afterwards. Editing, deleting, inserting or reordering a row breaks the
chain at that row, unless every later hash is recomputed too; exports also record the last
hash, which a PI can write down (or sign) to pin the whole history.

``verify_project(project)`` and ``verify_export(path)`` return an :class:`AuditVerification`;
its ``ok`` is False and ``problems`` names the rows when the chain is broken.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from sqlalchemy import select

from portalreview.store.csv_cells import unescape_formula
from portalreview.store.models import AuditEntry
from portalreview.store.project import Project
from portalreview.store.service import GENESIS_HASH, audit_hash

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

    @property
    def ok(self) -> bool:
        return not self.problems

    def describe(self) -> str:
        if self.ok:
            return f"audit log intact: {self.entries} entries, last hash {self.last_hash}"
        extra = f" (and {self.more_problems} more)" if self.more_problems else ""
        return (
            f"audit log TAMPERED or damaged: {len(self.problems) + self.more_problems} "
            f"problem(s) in {self.entries} entries{extra}:\n  " + "\n  ".join(self.problems)
        )


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


def verify_project(project: Project, expected_last: str | None = None) -> AuditVerification:
    """Check the audit log of an open project."""
    with project.read() as session:
        rows = (
            {"id": e.id, "prev_hash": e.prev_hash, "hash": e.hash}
            | {name: getattr(e, name) for name in _HASHED}
            for e in session.scalars(select(AuditEntry).order_by(AuditEntry.id))
        )
        return verify_rows(list(rows), expected_last)


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
        from openpyxl import load_workbook

        book = load_workbook(path, read_only=True)
        try:
            if "audit" not in book.sheetnames:
                raise ValueError(f"{path.name} has no 'audit' sheet")
            rows = book["audit"].iter_rows(values_only=True)
            header = [str(c) for c in next(rows)]
            return [dict(zip(header, values, strict=False)) for values in rows]
        finally:
            book.close()
    raise ValueError(f"{path.name}: not an export (jsonl or csv folder, or .xlsx)")


def verify_export(path: Path, expected_last: str | None = None) -> AuditVerification:
    """Check the audit log of an export (see :func:`read_exported_log`)."""
    return verify_rows(read_exported_log(path), expected_last)


def main(argv: list[str] | None = None) -> int:
    """``python -m portalreview.store.audit_verify PATH [--last HASH]``: PATH is a project
    file or an export; exit status 0 when the chain is intact, 1 when not, 2 on bad input."""
    import argparse
    import sys

    from portalreview.store.project import SUFFIX, ProjectError

    parser = argparse.ArgumentParser(prog="python -m portalreview.store.audit_verify")
    parser.add_argument("path", type=Path, help="a project file, or an export (folder or xlsx)")
    parser.add_argument("--last", metavar="HASH", help="the last hash recorded earlier")
    args = parser.parse_args(argv)
    try:
        if args.path.suffix == SUFFIX:
            with Project.open(args.path, read_only=True) as project:
                result = verify_project(project, args.last)
        else:
            result = verify_export(args.path, args.last)
    except (ProjectError, OSError, ValueError) as exc:
        print(f"audit_verify: {exc}", file=sys.stderr)
        return 2
    print(result.describe())
    return 0 if result.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
