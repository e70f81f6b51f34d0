"""A whole-study export of a large study (docs/formats.md, "Export"): the answers' payloads
are read a batch of answers at a time, never one answer at a time (294,800 answers took
about 900,000 queries and 97-201 s); the rows are written as they are read, never all held
at once (1.6 GB); and the files are byte for byte those of reading them one at a time."""

from __future__ import annotations

import io
import json
import re
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from io_support import full_study
from openpyxl.worksheet._write_only import WriteOnlyWorksheet
from sqlalchemy import event, func, select
from sqlalchemy.engine import Engine

from portalreview.cli import main
from portalreview.store import exporters
from portalreview.store.exporters import export_project
from portalreview.store.exports import export_external, preferences
from portalreview.store.exports.snapshot import read_snapshot
from portalreview.store.models import Answer
from portalreview.store.project import Project
from tests.bench_support import bench_report

PAYLOAD_TABLES = (
    "respond_answers",
    "respond_parts",
    "rank_entries",
    "rank_criteria",
    "match_decisions",
    "match_spans",
    "sentence_themes",
    "urgency_answers",
    "urgency_case_levels",
    "eppc_labels",
    "eppc_spans",
    "empathy_answers",
    "facts",
    "fact_checks",
)


def _bench():
    return bench_report()


@pytest.fixture(scope="module")
def synthetic_studies(tmp_path_factory) -> dict[int, Path]:
    """bench_report's synthetic studies of 10 and 20 cases (4 clinicians answer a unit of
    every kind for every case: 430 and 710 answers)."""
    bench = _bench()
    folder = tmp_path_factory.mktemp("synthetic")
    studies = {}
    for cases in (10, 20):
        studies[cases] = folder / f"synthetic-{cases}.prproj"
        bench.build_synthetic_study(studies[cases], cases)
    return studies


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir())}


def _payload_queries(path: Path, out: Path) -> int:
    """How many statements the jsonl export of the study at ``path`` runs on payload tables."""
    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        with Project.open(path, read_only=True) as project:
            export_project(project, "jsonl", out)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    payload_table = re.compile(rf"\bFROM ({'|'.join(PAYLOAD_TABLES)})\b")
    return sum(bool(payload_table.search(s)) for s in statements)


def test_the_payload_queries_do_not_grow_with_the_answers(synthetic_studies, tmp_path):
    small = _payload_queries(synthetic_studies[10], tmp_path / "small")
    large = _payload_queries(synthetic_studies[20], tmp_path / "large")
    assert 0 < small == large <= 14  # one read_many per kind: 14 queries in all


@pytest.mark.parametrize("batch", [1, 3, 100])
def test_the_files_are_the_same_whatever_the_batch(project, tmp_path, monkeypatch, batch):
    """A batch of 1 reads each answer's payload alone, as the export did before batches; a
    batch of 3 ends in the middle of kinds and annotators (the small study has drafts, a
    flagged answer, a gold answer, answers with suggestions)."""
    full_study(project)
    export_project(project, "jsonl", tmp_path / "default")
    monkeypatch.setattr(exporters, "PAYLOAD_BATCH", batch)
    export_project(project, "jsonl", tmp_path / "batched")
    assert _files(tmp_path / "batched") == _files(tmp_path / "default")


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_a_synthetic_study_is_exported_the_same_in_batches(
    synthetic_studies, tmp_path, monkeypatch, fmt
):
    with Project.open(synthetic_studies[20], read_only=True) as project:
        monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 1)
        export_project(project, fmt, tmp_path / "one-by-one")
        monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 64)
        export_project(project, fmt, tmp_path / "batched")
    assert _files(tmp_path / "batched") == _files(tmp_path / "one-by-one")


class _RowsWritten:
    """How many answers rows an export has written so far: into the answers file staged in
    the folder (its size) or the workbook's answers sheet."""

    def __init__(self, monkeypatch, out: Path) -> None:
        self.out, self.sheet_rows = out, 0
        real_append = WriteOnlyWorksheet.append

        def append(sheet, row):
            self.sheet_rows += sheet.title == "answers"
            return real_append(sheet, row)

        monkeypatch.setattr(WriteOnlyWorksheet, "append", append)

    def __call__(self) -> int:
        temporary = list(self.out.glob(".portalreview-export-*/answers.*"))
        below_header = max(0, self.sheet_rows - 1)
        return below_header + sum(path.stat().st_size for path in temporary)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "xlsx"])
def test_the_answers_are_written_as_they_are_read(synthetic_studies, tmp_path, monkeypatch, fmt):
    """By the time the last batch of answers is read, the first ones are in the file."""
    out = tmp_path / ("export.xlsx" if fmt == "xlsx" else "export")
    out.parent.mkdir(exist_ok=True)
    rows_written = _RowsWritten(monkeypatch, out if fmt != "xlsx" else tmp_path)
    written_when_read: list[int] = []
    read_payloads = exporters._payloads

    def payloads(session, answers):
        written_when_read.append(rows_written())
        return read_payloads(session, answers)

    monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 50)
    monkeypatch.setattr(exporters, "_payloads", payloads)
    with Project.open(synthetic_studies[20], read_only=True) as project:
        export_project(project, fmt, out)
    assert len(written_when_read) > 10
    assert written_when_read[0] == 0 < written_when_read[-1]


@pytest.mark.both_backends
@pytest.mark.parametrize("fmt", ["jsonl", "xlsx"])
def test_tables_read_a_few_rows_at_a_time_are_the_same(project, tmp_path, monkeypatch, fmt):
    """Each table fetched 2 rows at a time (a server's cursor kept open between fetches while
    the rows are written) gives the same files."""
    full_study(project)
    name = "export.xlsx" if fmt == "xlsx" else "export"
    for folder in ("whole", "by-two"):
        (tmp_path / folder).mkdir()
    export_project(project, fmt, tmp_path / "whole" / name)
    monkeypatch.setattr(exporters, "STREAM_BATCH", 2)
    monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 2)
    export_project(project, fmt, tmp_path / "by-two" / name)
    assert _parts(tmp_path / "by-two" / name) == _parts(tmp_path / "whole" / name)


def _parts(out: Path) -> dict[str, bytes]:
    """A folder's files, or a workbook's parts but the time it was written."""
    if out.is_dir():
        return _files(out)
    with zipfile.ZipFile(out) as book:
        return {n: book.read(n) for n in book.namelist() if n != "docProps/core.xml"}


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _export_at_the_terminal(study: Path, out: Path, monkeypatch, fmt: str = "jsonl"):
    """``portalreview export`` with standard error a terminal: (status, what it showed)."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    try:
        status = main(["export", str(study), "--format", fmt, "-o", str(out)])
    except KeyboardInterrupt:
        pytest.fail("Ctrl+C went past the command: a traceback at the terminal")
    return status, terminal.getvalue()


@pytest.mark.parametrize("fmt", ["jsonl", "xlsx"])
def test_a_long_export_shows_its_progress_at_the_terminal(
    synthetic_studies, tmp_path, monkeypatch, capsys, fmt
):
    out = tmp_path / ("export.xlsx" if fmt == "xlsx" else "export")
    monkeypatch.setattr(exporters, "PROGRESS_EVERY", 100)
    status, shown = _export_at_the_terminal(synthetic_studies[20], out, monkeypatch, fmt)
    assert status == 0
    with Project.open(synthetic_studies[20], read_only=True) as project, project.read() as s:
        answers = s.scalar(select(func.count()).select_from(Answer))
    for done in (0, 100, 500, answers):
        assert f"\rExporting answers: {done:,} of {answers:,} rows" in shown
    last = "Exporting audit: 0 of 0 rows"
    assert shown.endswith(f"\r{last}\r{' ' * len(last)}\r")  # the line cleared at the end
    assert capsys.readouterr().out.startswith("Wrote ")


def test_an_export_to_a_file_or_a_pipe_shows_no_progress(synthetic_studies, tmp_path, capsys):
    out = tmp_path / "export"
    assert main(["export", str(synthetic_studies[10]), "--format", "csv", "-o", str(out)]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "xlsx", "preferences"])
def test_ctrl_c_stops_an_export_and_leaves_the_earlier_one(
    synthetic_studies, tmp_path, monkeypatch, fmt
):
    out = tmp_path / ("export.xlsx" if fmt == "xlsx" else "export")
    with Project.open(synthetic_studies[10], read_only=True) as project:
        if fmt == "preferences":
            export_external(project, fmt, out)
        else:
            export_project(project, fmt, out)
    earlier = _parts(out)
    read_payloads, batches = exporters._payloads, []

    def payloads(session, answers):
        batches.append(len(answers))
        if len(batches) == 3:
            raise KeyboardInterrupt
        return read_payloads(session, answers)

    monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 50)
    monkeypatch.setattr(exporters, "_payloads", payloads)
    status, shown = _export_at_the_terminal(synthetic_studies[20], out, monkeypatch, fmt)
    assert status == 130
    assert shown.endswith(f"portalreview export: stopped; nothing was written ({out} is as it "
                          "was)\n")  # fmt: skip
    assert _parts(out) == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == [out.name]  # no temporary file


# --- the preferences export --------------------------------------------------------------------


def test_the_preferences_are_the_pairs_of_the_whole_snapshot(synthetic_studies, tmp_path):
    """Read with the answers that make pairs alone, streamed, the files hold the pairs worked
    out from the whole snapshot (every table, every kind, in lists), in the same order."""
    with Project.open(synthetic_studies[20], read_only=True) as project:
        export_external(project, "preferences", tmp_path / "pref")
        whole = read_snapshot(project)
    pairs = list(preferences.preference_records(whole, None, Counter()))
    lines = [json.dumps(pair, ensure_ascii=False) + "\n" for pair in pairs]
    assert len(pairs) > 100
    assert _files(tmp_path / "pref")["preferences-pooled.jsonl"] == "".join(lines).encode()
    mine = [line for line, pair in zip(lines, pairs, strict=True) if pair["annotator"] == "ann_2"]
    assert _files(tmp_path / "pref")["preferences-ann_2.jsonl"] == "".join(mine).encode()


def test_the_preferences_read_only_the_answers_that_make_pairs(synthetic_studies, tmp_path):
    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        with Project.open(synthetic_studies[10], read_only=True) as project:
            export_external(project, "preferences", tmp_path / "pref")
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    read = " ".join(statements)
    for table in ("assignments", "audit_log", "eppc_labels", "match_spans", "facts"):
        assert not re.search(rf"\bFROM {table}\b", read), table
    assert re.search(r"\bFROM rank_entries\b", read)


def test_the_preferences_are_written_as_they_are_made(synthetic_studies, tmp_path, monkeypatch):
    out = tmp_path / "pref"
    written_when_read: list[int] = []
    read_payloads = exporters._payloads

    def payloads(session, answers):
        pooled = list(out.glob(".portalreview-export-*/preferences-pooled.jsonl"))
        written_when_read.append(sum(path.stat().st_size for path in pooled))
        return read_payloads(session, answers)

    monkeypatch.setattr(exporters, "PAYLOAD_BATCH", 20)
    monkeypatch.setattr(exporters, "_payloads", payloads)
    with Project.open(synthetic_studies[20], read_only=True) as project:
        export_external(project, "preferences", out)
    assert len(written_when_read) > 5
    assert written_when_read[0] == 0 < written_when_read[-1]


@pytest.mark.parametrize("fmt", ["jsonl", "preferences"])
def test_ctrl_c_leaves_no_folder_where_there_was_none(
    synthetic_studies, tmp_path, monkeypatch, fmt
):
    def payloads(session, answers):
        raise KeyboardInterrupt

    monkeypatch.setattr(exporters, "_payloads", payloads)
    status, _ = _export_at_the_terminal(synthetic_studies[10], tmp_path / "new", monkeypatch, fmt)
    assert status == 130
    assert list(tmp_path.iterdir()) == []


def test_the_preferences_export_shows_its_progress_at_the_terminal(
    synthetic_studies, tmp_path, monkeypatch
):
    monkeypatch.setattr(exporters, "PROGRESS_EVERY", 100)
    out = tmp_path / "pref"
    status, shown = _export_at_the_terminal(synthetic_studies[20], out, monkeypatch, "preferences")
    assert status == 0
    with Project.open(synthetic_studies[20], read_only=True) as project, project.read() as s:
        kinds = Answer.kind.in_(["rank", "empathy", "respond"])
        answers = s.scalar(select(func.count()).select_from(Answer).where(kinds))
    for done in (0, 100, answers):
        assert f"\rExporting answers: {done:,} of {answers:,} rows" in shown
    assert shown.endswith("\r")
