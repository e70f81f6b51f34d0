"""A project file that cannot be read any more after it was opened (the file and its folder
gone, as when a network drive is lost; the file cut short; another program holding it locked):
every read path raises :class:`ReadFailed`, a StoreError whose message names the file and the
trouble in words, never the driver's error, and the command line says so and exits 2."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from portalreview.store.errors import ReadFailed, StoreError
from portalreview.store.project import Project
from tests.conftest import build_small_study

DRIVER_WORDS = ("sqlalche.me", "OperationalError", "DatabaseError", "sqlite3")


def folder_gone(project: Project) -> Iterator[str]:
    """The network drive holding the study went away: the file and its folder are gone."""
    shutil.rmtree(project.path.parent)
    project._engine.dispose()  # the next read needs a new connection, as on a lost drive
    yield "cannot be read: it was moved or deleted, or the drive it is on"


def cut_short(project: Project) -> Iterator[str]:
    """The file lost its end (a sync tool, a copy cut short)."""
    project._engine.dispose()  # the last connection merges the WAL into the file
    size = project.path.stat().st_size
    with project.path.open("r+b") as fh:
        fh.truncate(size // 2)
    yield "is damaged"


def locked(project: Project) -> Iterator[str]:
    """Another program (a database browser) holds the file locked past the busy timeout (a
    read waits for it 5 s first)."""
    project._engine.dispose()
    other = sqlite3.connect(project.path, isolation_level=None)
    other.execute("PRAGMA locking_mode = EXCLUSIVE")
    other.execute("BEGIN EXCLUSIVE")
    other.execute("INSERT INTO project_meta(key, value) VALUES ('other', 'program')")
    try:
        yield "is busy in another program"
    finally:
        other.close()


TROUBLES = {"folder gone": folder_gone, "cut short": cut_short, "locked": locked}


@pytest.fixture
def on_drive(tmp_path: Path) -> Iterator[tuple[Project, dict[str, int]]]:
    """The small study in a folder of its own (the "drive"), open for writing."""
    path = tmp_path / "drive" / "study.prproj"
    path.parent.mkdir()
    with Project.create(path, name="Study on a drive") as made:
        units = build_small_study(made).units
        made.backup()  # what a damaged file's message can point to
    project = Project.open(path, automatic_backup=False)
    yield project, units
    project.close()


def _read(project: Project, units: dict[str, int], name: str) -> Callable[[], object]:
    """One of what the app and the command line read, by name, ready to call."""
    from portalreview.analysis.filters import FrameFilter
    from portalreview.reports.live_report import LiveReport, stored_report
    from portalreview.store.frames import read_frames
    from portalreview.store.service import StudyService
    from portalreview.ui import dashboard

    ava = StudyService(project).as_viewer("ava")
    pat = StudyService(project).as_viewer("pat")
    unit = units["respond"]
    if name == "workbook":  # the figures shown before the trouble
        shown = dashboard.compute(LiveReport(), project, FrameFilter(), 0, 10)
        out = project.path.parent.parent / "out"
        out.mkdir()
    reads = {
        "unit": lambda: ava.read_unit(unit),
        "answer": lambda: ava.get_answer(unit),
        "queue": lambda: ava.queue("respond"),
        "progress": lambda: pat.progress("respond"),
        "dashboard": lambda: dashboard.compute(LiveReport(), project, FrameFilter(), 0, 10),
        "kept figures": lambda: stored_report(project, n_resamples=10),
        "workbook": lambda: dashboard.export_workbook(project, out / "w.xlsx", shown),
        "frames": lambda: read_frames(project),
    }
    return reads[name]


READS = ("unit", "answer", "queue", "progress", "dashboard", "kept figures", "workbook", "frames")


def assert_worded(message: str, words: str, project: Project) -> None:
    assert words in message, message
    assert project.path.name in message, message
    assert not any(raw in message for raw in DRIVER_WORDS), message


@pytest.mark.parametrize("read", READS)
@pytest.mark.parametrize("trouble", ["folder gone", "cut short"])
def test_a_read_of_a_file_that_went_away_or_was_damaged_says_so(on_drive, trouble, read):
    project, units = on_drive
    call = _read(project, units, read)
    make_trouble = TROUBLES[trouble](project)
    words = next(make_trouble)
    with pytest.raises(ReadFailed) as refused:
        call()
    assert isinstance(refused.value, StoreError)
    assert_worded(str(refused.value), words, project)
    make_trouble.close()


@pytest.mark.parametrize("read", ["unit", "dashboard"])
def test_a_file_another_program_holds_locked_is_said_busy(on_drive, read):
    project, units = on_drive
    call = _read(project, units, read)
    make_trouble = locked(project)
    words = next(make_trouble)
    try:
        with pytest.raises(ReadFailed) as refused:
            call()
    finally:
        make_trouble.close()
    assert_worded(str(refused.value), words, project)
    call()  # the other program let go: it reads again


def test_a_damaged_file_points_to_reopening_for_its_backup(on_drive):
    project, units = on_drive
    make_trouble = cut_short(project)
    next(make_trouble)
    with pytest.raises(ReadFailed, match="latest backup is offered"):
        _read(project, units, "unit")()


def test_a_programming_error_in_a_read_is_not_taken_for_a_lost_file(on_drive):
    """A query the file can answer but that is wrong is a bug, worded as a read that failed
    (never as a lost drive), with the driver's error kept as its cause for the log."""
    from sqlalchemy import text

    project, _units = on_drive
    with pytest.raises(ReadFailed) as refused, project.read() as s:
        s.execute(text("SELECT x FROM no_such_table"))
    message = str(refused.value)
    assert "could not be read (no such table: no_such_table)" in message
    assert "drive" not in message and "damaged" not in message
    assert refused.value.__cause__ is not None


# --- the command line ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{p}", "-o", "{o}/r.json", "--resamples", "10"],
        ["report", "{p}", "--format", "xlsx", "-o", "{o}/r.xlsx", "--resamples", "10"],
        ["export", "{p}", "--format", "jsonl", "-o", "{o}/export"],
    ],
    ids=["report json", "report xlsx", "export"],
)
@pytest.mark.parametrize("trouble", ["folder gone", "cut short"])
def test_the_command_line_says_in_words_when_the_file_goes_during_a_command(
    tmp_path, monkeypatch, capsys, command, trouble
):
    import portalreview.cli as cli

    path = tmp_path / "drive" / "study.prproj"
    path.parent.mkdir()
    with Project.create(path, name="Study on a drive") as made:
        build_small_study(made)
    out = tmp_path / "out"
    out.mkdir()
    opened = cli.open_project
    said = []

    def open_then_lose(target, **kwargs):
        project = opened(target, **kwargs)
        said.append(next(TROUBLES[trouble](project)))
        return project

    monkeypatch.setattr(cli, "open_project", open_then_lose)
    argv = [part.format(p=path, o=out) for part in command]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"portalreview {argv[0]}: The project file study.prproj"), err
    assert len(err.splitlines()) == 1  # words, not a traceback
    assert said[0] in err and not any(raw in err for raw in DRIVER_WORDS)
