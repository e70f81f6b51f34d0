"""The record in an export folder's ``project.json`` of what the export wrote, so that a folder
whose export was cut short is never taken for a whole one.

A jsonl or csv export writes its tables in a staging folder, then renames them over the
folder's one at a time. When the process is killed during the renames, over an earlier export
in the same folder, every file is whole but some are from the new snapshot and some from the
old: answers that the exported audit log never recorded. So
:func:`portalreview.store.exporters.export_project` writes ``project.json`` saying the export
is unfinished (:func:`unfinished`) before the renames, then ``project.json`` again with each
file's size and SHA-256 and the audit log's last hash (:func:`finished`). ``portalreview
verify`` and the importer check a folder against that record (:func:`check_export_folder`) and
refuse one whose files do not match. A folder whose
``project.json`` has no record (an export written before it existed, or a folder of tables
made by hand) is read as before.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RECORD_KEY = "export"  # the key of the record in project.json
PROJECT_JSON = "project.json"
_CHUNK = 1 << 20
CUT_SHORT = (
    "was cut short while it was written over (or its files were changed or replaced "
    "afterwards): its files are not the one export project.json records; export again"
)


def file_facts(path: Path) -> dict[str, Any]:
    """``{"bytes", "sha256"}`` of a file as it is on disk."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def unfinished(fmt: str) -> dict[str, Any]:
    """The record ``project.json`` holds while the tables are being written."""
    return {"format": fmt, "complete": False}


def finished(
    fmt: str, files: Sequence[Path], audit_entries: int, audit_last_hash: str | None
) -> dict[str, Any]:
    """The record of a whole export: the snapshot it is (the audit log's length and last hash,
    None for no entry) and the size and SHA-256 of every table file written."""
    return {
        "format": fmt,
        "complete": True,
        "audit_entries": audit_entries,
        "audit_last_hash": audit_last_hash,
        "files": {path.name: file_facts(path) for path in files},
    }


@dataclass
class FolderCheck:
    """What :func:`check_export_folder` found: ``recorded`` whether project.json records the
    export's files, ``fmt`` its format, ``files`` the files it records, ``problems`` one line
    per file (or record) that does not match."""

    recorded: bool = False
    fmt: str | None = None
    files: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)

    def refusal(self, folder: Path, advice: str = "") -> str:
        """The message refusing a folder with problems (empty when there are none)."""
        if not self.problems:
            return ""
        return f"{folder} {CUT_SHORT}{advice}:\n  " + "\n  ".join(self.problems)


def check_export_folder(folder: Path) -> FolderCheck:
    """Check the files of an export folder against the record in its ``project.json``. No
    project.json, or one without a record (an earlier version's export): nothing to check."""
    folder = Path(folder)
    record = _read_record(folder)
    if record is None:
        return FolderCheck()
    if not isinstance(record, dict) or record.get("complete") is not True:
        return FolderCheck(
            True,
            problems=[
                "project.json says the export was never finished: the process writing it "
                "stopped part-way (killed, or the computer shut down)"
            ],
        )
    files = record.get("files") if isinstance(record.get("files"), dict) else {}
    check = FolderCheck(True, str(record.get("format") or ""), tuple(files))
    check.problems += [p for name, facts in files.items() if (p := _mismatch(folder, name, facts))]
    check.problems += [
        f"{name} is not one of the export's files (left by an earlier export?): move it out "
        "of the folder"
        for name in _other_files(folder, files)
    ]
    return check


def _read_record(folder: Path) -> Any:
    """The record in the folder's project.json; None when there is none to read."""
    try:
        meta = json.loads((folder / PROJECT_JSON).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None  # missing, or unreadable: the import reports a bad project.json itself
    return meta.get(RECORD_KEY) if isinstance(meta, dict) else None


def _mismatch(folder: Path, name: str, facts: Any) -> str | None:
    """Why a recorded file is not the one the export wrote; None when it is."""
    path = folder / name
    if Path(name).name != name:
        return f"project.json records {name!r}, which is not a file name"
    if not path.is_file():
        return f"{name} is missing"
    if not isinstance(facts, dict):
        return f"project.json records nothing of {name}"
    found = file_facts(path)
    if found == {"bytes": facts.get("bytes"), "sha256": facts.get("sha256")}:
        return None
    return (
        f"{name} is not the file this export wrote ({_shown(found)}; "
        f"the export wrote {_shown(facts)})"
    )


def _shown(facts: dict) -> str:
    """ "1,234 bytes, SHA-256 0123456789ab…" """
    size = facts.get("bytes")
    size_text = f"{size:,} bytes" if isinstance(size, int) else "no size"
    return f"{size_text}, SHA-256 {str(facts.get('sha256'))[:12]}…"


def _other_files(folder: Path, recorded: dict) -> list[str]:
    """Files an import of the folder would read that the export did not write."""
    from portalreview.store.importers.readers import SUFFIXES  # the importers use this module

    return sorted(
        p.name
        for p in folder.iterdir()
        if p.is_file()
        and p.suffix.lower() in SUFFIXES
        and p.name != PROJECT_JSON
        and p.name not in recorded
    )
