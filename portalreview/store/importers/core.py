"""``import_files``: read every file, tell each table's format, then load them all in one
transaction, in dependency order. Any error rolls everything back."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.exc import DBAPIError, IntegrityError

from portalreview.store.export_manifest import check_export_folder
from portalreview.store.importers import study
from portalreview.store.importers.context import ImportContext, count_rows
from portalreview.store.importers.errors import EmptyTable, ImportFailed
from portalreview.store.importers.formats import FORMATS, Format, detect
from portalreview.store.importers.readers import SUFFIXES, read_parts
from portalreview.store.importers.records import Part
from portalreview.store.importers.report import ImportReport
from portalreview.store.project import Project
from portalreview.store.service import StoreError, readable_file_error, readable_integrity

_NAME_THEM = " (to import files you changed on purpose, name them one by one, not the folder)"


def import_files(
    project: Project,
    paths: Sequence[Path | str],
    *,
    kind: str | None = None,
    redcap_mapping: dict | None = None,
    dry_run: bool = False,
) -> ImportReport:
    """Import files (or folders of files) into ``project`` in one transaction.

    The format of each table is told from its columns (``kind`` forces one for every table:
    see ``FORMATS``). Tables are loaded in dependency order whatever the order of ``paths``.
    On any error nothing changes and :class:`ImportFailed` names the file, the row or line
    and the field. ``dry_run`` checks everything and reports what would be added, saving
    nothing. See docs/formats.md.
    """
    if kind is not None and kind not in FORMATS:
        raise ImportFailed(f"unknown kind {kind!r}; the formats are {', '.join(FORMATS)}")
    parts, skipped = read_all(paths)
    report = ImportReport(dry_run=dry_run)
    if skipped:
        report.note(f"empty files skipped: {', '.join(skipped)}")
    plan = _plan(parts, kind, report)
    try:
        # a dry run writes everything, so that the database checks it too, then rolls it back;
        # on a server it takes no write lock: the team's saves go on while it runs
        with project.trial() if dry_run else project.write() as session:
            ctx = ImportContext(project, session, report, _by_format(plan), dry_run)
            ctx.redcap_mapping = redcap_mapping
            _load(ctx, plan)
    except (IntegrityError, StoreError) as exc:  # only at commit: each record flushes itself
        message = readable_integrity(exc) if isinstance(exc, IntegrityError) else str(exc)
        raise ImportFailed(f"not saved: {message}") from exc
    except DBAPIError as exc:  # the file could not be written (a full disk...): in words, and
        # without SQLAlchemy's text, which quotes the row (a patient's message) it was writing
        if not isinstance(exc.orig, sqlite3.Error):
            raise
        raise ImportFailed(readable_file_error(project.label, exc.orig)) from None
    return report


def _load(ctx: ImportContext, plan: list[tuple[Part, Format]]) -> None:
    """Load every table in order, record the import in the audit log, count what was added."""
    before = count_rows(ctx.session)
    for part, fmt in plan:
        fmt.load(ctx, part)
    study.mark_old_holders(ctx)
    study.note_own_responses(ctx)
    ctx.session.flush()
    _audit(ctx, plan, before)
    after = count_rows(ctx.session)
    ctx.report.added = {t: after[t] - before[t] for t in after if after[t] > before[t]}
    if ctx.svc.audit_entries_not_written:  # a dry run's: see ImportService
        ctx.report.added["audit_log"] = ctx.svc.audit_entries_not_written


def read_all(paths: Sequence[Path | str]) -> tuple[list[Part], list[str]]:
    """Every table of every file, and the names of a folder's empty files (skipped)."""
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        raise ImportFailed("no files to import")
    parts: list[Part] = []
    skipped: list[str] = []
    for path in map(Path, paths):
        for file in _files(path):
            try:
                parts.extend(read_parts(file))
            except EmptyTable:
                if file == path:
                    raise
                skipped.append(file.name)
    if not parts:
        raise ImportFailed("there is nothing to import: every file is empty")
    return parts, skipped


def _files(path: Path) -> list[Path]:
    """The files of a folder (an export folder only when it is the whole export its
    project.json records) or the file itself."""
    if not path.is_dir():
        return [path]
    refusal = check_export_folder(path).refusal(path, _NAME_THEM)
    if refusal:
        raise ImportFailed(refusal)
    files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise ImportFailed("holds no .csv, .xlsx, .jsonl or .json files to import", file=str(path))
    return files


def _plan(parts: list[Part], kind: str | None, report: ImportReport) -> list[tuple[Part, Format]]:
    """(table, format) in dependency order; the report learns formats, ignored columns and
    encoding notes."""
    plan = [(part, detect(part, kind)) for part in parts]
    names = {fmt.name for _, fmt in plan}
    if "redcap_dictionary" in names and "redcap_records" not in names:
        label = next(p.label for p, f in plan if f.name == "redcap_dictionary")
        raise ImportFailed(
            "is a REDCap data dictionary; import it together with the records export CSV",
            file=label,
        )
    for part, fmt in plan:
        report.files[part.label] = fmt.name
        ignored = fmt.ignored(part.columns)
        if ignored:
            report.ignored_columns[part.label] = ignored
        if part.note:
            report.note(part.note)
    order = {id(part): i for i, part in enumerate(parts)}
    return sorted(plan, key=lambda pf: (pf[1].order, order[id(pf[0])]))


def _by_format(plan: list[tuple[Part, Format]]) -> dict[str, list[Part]]:
    out: dict[str, list[Part]] = {}
    for part, fmt in plan:
        out.setdefault(fmt.name, []).append(part)
    return out


def _audit(ctx: ImportContext, plan: list[tuple[Part, Format]], before: dict[str, int]) -> None:
    """One audit-log entry naming the files and what they added."""
    after = count_rows(ctx.session)
    ctx.svc.record_import(
        ctx.session,
        {
            "files": {part.label: fmt.name for part, fmt in plan},
            "added": {t: after[t] - before[t] for t in after if after[t] != before[t]},
        },
    )
