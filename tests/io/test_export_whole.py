"""An export folder is one export, or it is refused: a jsonl or csv export written over an
earlier one in the same folder and stopped part-way (the process killed) leaves every file whole
but some from each snapshot. ``verify`` reports such a folder and the import refuses it, from
the record of the export's files in project.json (store/export_manifest.py, docs/formats.md
"Export"); an export written before that record existed still imports and verifies."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from io_support import as_earlier_export, edit_sheet_xml, fingerprint, full_study

from portalreview.cli import main
from portalreview.store import exporters, output_files
from portalreview.store.audit_verify import verify_export
from portalreview.store.exporters import export_project
from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.project import Project

TABLES = (
    "annotators",
    "cases",
    "responses",
    "unit_sets",
    "units",
    "assignments",
    "suggestions",
    "answers",
    "audit",
)
CUT_SHORT = "cut short while it was written over"


class Killed(BaseException):
    """The process stopping where it stands, as a SIGKILL stops it."""


def _kill_after(monkeypatch, fmt: str, table: str) -> None:
    """The export stops right after ``table``'s file was renamed over the earlier one (the
    tables are renamed into place one after the other, the audit log's last)."""
    real = output_files.replace_output

    def replace(temporary, target):
        real(temporary, target)
        if Path(target).name == f"{table}.{fmt}":
            raise Killed

    monkeypatch.setattr(output_files, "replace_output", replace)


def _stop_at_the_second_answer(monkeypatch) -> None:
    """Ctrl+C while the answers are written: after the first answer's row."""
    real, rows = exporters._answer_row, []

    def answer_row(*args):
        if rows:
            raise KeyboardInterrupt
        rows.append(real(*args))
        return rows[0]

    monkeypatch.setattr(exporters, "_answer_row", answer_row)


def _study_moves_on(study) -> None:
    """A clinician changes an answer after the first export."""
    study.service.save_answer(
        study.units["urgency"],
        {"more_urgent_case_id": study.case1},
        annotator_id=study.ben,
        comment="changed my mind",
    )


def _answers_in(folder) -> int:
    return len((folder / "answers.jsonl").read_text(encoding="utf-8").splitlines())


def _refused_import(tmp_path, folder) -> str:
    with Project.create(tmp_path / "copy.prproj", name="Test study") as fresh:
        before = fingerprint(fresh)
        with pytest.raises(ImportFailed) as err:
            import_files(fresh, [folder])
        assert fingerprint(fresh) == before, "the project changed"
    return str(err.value)


@pytest.mark.parametrize("earlier_version", [False, True], ids=["over-new", "over-old"])
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_cut_short_over_an_earlier_one_is_reported_and_refused(
    project, tmp_path, monkeypatch, fmt, earlier_version
):
    study = full_study(project)
    out = tmp_path / "export"
    export_project(project, fmt, out)
    if earlier_version:  # the folder held an export of a version that recorded no files
        as_earlier_export(out)
    old_audit = (out / f"audit.{fmt}").read_bytes()
    _study_moves_on(study)
    _kill_after(monkeypatch, fmt, "answers")
    with pytest.raises(Killed):
        export_project(project, fmt, out)
    monkeypatch.undo()
    assert (out / f"audit.{fmt}").read_bytes() == old_audit  # the finding's mixture

    result = verify_export(out)
    assert not result.ok
    assert CUT_SHORT in result.describe() and "never finished" in result.describe()
    assert main(["verify", str(out)]) == 1
    assert CUT_SHORT in _refused_import(tmp_path, out)

    export_project(project, fmt, out)  # exporting again makes the folder whole
    assert verify_export(out).ok


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_an_export_stopped_while_its_tables_are_written_leaves_the_earlier_one(
    project, tmp_path, monkeypatch, fmt
):
    """The tables are written in a staging folder first: a stop there (nearly all of an
    export's time) leaves the earlier export whole and verified, and no file of the new one."""
    study = full_study(project)
    out = tmp_path / "export"
    export_project(project, fmt, out)
    earlier = {p.name: p.read_bytes() for p in out.iterdir()}
    _study_moves_on(study)
    _stop_at_the_second_answer(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        export_project(project, fmt, out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier
    assert verify_export(out).ok


def test_a_whole_export_records_its_files_verifies_and_round_trips(project, tmp_path):
    full_study(project)
    out = tmp_path / "export"
    export_project(project, "jsonl", out)
    record = json.loads((out / "project.json").read_text(encoding="utf-8"))["export"]
    assert record["complete"] is True and record["format"] == "jsonl"
    assert sorted(record["files"]) == sorted(f"{t}.jsonl" for t in TABLES)
    answers = record["files"]["answers.jsonl"]
    assert answers["bytes"] == (out / "answers.jsonl").stat().st_size
    assert len(answers["sha256"]) == 64
    result = verify_export(out)
    assert result.ok, result.describe()
    assert record["audit_entries"] == result.entries
    assert record["audit_last_hash"] == result.last_hash
    assert "the export's 9 files are the ones it wrote" in result.describe()
    with Project.create(tmp_path / "copy.prproj", name="Test study") as fresh:
        assert import_files(fresh, [out]).added["answers"] == _answers_in(out)


def test_a_file_changed_after_the_export_is_named_and_the_folder_refused(project, tmp_path):
    study = full_study(project)
    out, earlier = tmp_path / "export", tmp_path / "earlier"
    export_project(project, "jsonl", earlier)
    _study_moves_on(study)
    export_project(project, "jsonl", out)
    shutil.copy(earlier / "answers.jsonl", out / "answers.jsonl")  # another export's file

    result = verify_export(out)
    assert not result.ok
    assert len(result.export_problems) == 1
    assert result.export_problems[0].startswith("answers.jsonl is not the file this export wrote")
    message = _refused_import(tmp_path, out)
    assert "answers.jsonl is not the file this export wrote" in message
    assert "name them one by one" in message
    with Project.create(tmp_path / "named.prproj", name="Test study") as fresh:
        named = sorted(out.iterdir())  # files named one by one are taken as they are
        assert import_files(fresh, named).added["answers"] == _answers_in(out)


def test_files_of_another_export_in_the_folder_are_reported(project, tmp_path):
    """A csv export written into a folder that holds a jsonl export: the import would read
    both (verify read the jsonl audit log, which is not this export's)."""
    full_study(project)
    out = tmp_path / "export"
    export_project(project, "jsonl", out)
    export_project(project, "csv", out)
    result = verify_export(out)
    assert not result.ok
    assert "answers.jsonl is not one of the export's files" in "\n".join(result.export_problems)
    assert "answers.jsonl is not one of the export's files" in _refused_import(tmp_path, out)


def test_an_export_without_a_record_of_its_files_still_imports_and_verifies(project, tmp_path):
    full_study(project)
    out = tmp_path / "export"
    export_project(project, "jsonl", out)
    as_earlier_export(out)
    result = verify_export(out)
    assert result.ok, result.describe()
    assert "that the files are one export cannot be checked" in result.describe()
    assert main(["verify", str(out)]) == 0
    with Project.create(tmp_path / "copy.prproj", name="Test study") as fresh:
        assert import_files(fresh, [out]).added["answers"] == _answers_in(out)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names open files by /proc")
@pytest.mark.parametrize("fmt", ["jsonl", "xlsx"])
def test_each_file_is_on_disk_before_it_gets_its_name(project, tmp_path, monkeypatch, fmt):
    """Renamed over the earlier file before its content reached the disk, a power cut could
    leave the name with an empty or half file."""
    full_study(project)
    synced: list[str] = []
    renamed: list[tuple[str, bool]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    def replace(source, target, *args, **kwargs) -> None:
        renamed.append((str(target), os.path.realpath(source) in synced))
        real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    export_project(project, fmt, tmp_path / f"out.{fmt}" if fmt == "xlsx" else tmp_path / "out")
    assert renamed and all(on_disk for _target, on_disk in renamed), renamed


def test_an_audit_workbook_recording_a_stale_used_range_is_read_whole(project, tmp_path):
    """A workbook re-saved by WPS Office records its used range as A1: the audit sheet was
    read cut short (the header alone, or the first rows), and a shortened chain that still
    holds verifies unless its last hash is given."""
    from openpyxl import load_workbook

    from portalreview.store.audit_verify import read_exported_log

    full_study(project)
    out = tmp_path / "study.xlsx"
    export_project(project, "xlsx", out)
    whole = read_exported_log(out)
    assert len(whole) > 3
    sheet = f"sheet{load_workbook(out).sheetnames.index('audit') + 1}"
    # (the export records no used range, openpyxl's default: one as WPS Office writes it)
    edit_sheet_xml(out, sheet, rb"</sheetPr>", b'</sheetPr><dimension ref="A1:B3"/>')
    assert read_exported_log(out) == whole
    assert verify_export(out, expected_last=whole[-1]["hash"]).ok
