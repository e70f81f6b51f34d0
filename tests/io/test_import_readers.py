"""What the file readers make of odd but real files: encodings, empty files, Excel cells."""

from __future__ import annotations

from pathlib import Path

import pytest
from io_support import fingerprint

from portalreview.store.importers import ImportFailed, import_files
from portalreview.store.project import Project


@pytest.fixture
def empty_project(tmp_path):
    with Project.create(tmp_path / "s.prproj") as project:
        yield project


def _refused(project: Project, paths: list[Path]) -> str:
    before = fingerprint(project)
    with pytest.raises(ImportFailed) as err:
        import_files(project, paths)
    assert fingerprint(project) == before, "the project changed"
    return str(err.value)


@pytest.mark.parametrize("data", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n\r\n", "\u00a0\n".encode()])
def test_a_file_of_only_a_bom_or_unicode_spaces_is_empty(empty_project, tmp_path, data):
    path = tmp_path / "notes.jsonl"
    path.write_bytes(data)
    assert "notes.jsonl: is empty" in _refused(empty_project, [path])
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "cases.csv").write_text("case_id,message\nc1,Hello there.\n")
    (folder / "notes.jsonl").write_bytes(data)
    report = import_files(empty_project, [folder])
    assert report.added["cases"] == 1
    assert "empty files skipped: notes.jsonl" in report.notes
