"""Another file's bytes written into the open project file (a backup copied over it with
``cp`` or a file manager, the same file at the same name): SQLite goes on from the pages it
holds in memory, and its next saves mixed the two states into a file whose indexes no longer
matched its tables, which the quick check on opening did not see. Now the save is refused in
words, and the file put there is left as it was; a save that finds only the file's time moved
(a network drive's clock, ``touch``) goes on."""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from portalreview.store.errors import SaveFailed
from portalreview.store.project import Project, make_backup
from portalreview.store.service import StudyService
from tests.conftest import build_small_study


def _respond(text: str) -> dict:
    return {"mode": "theme_guided", "parts": {"empathy": text}}


@pytest.fixture
def study(tmp_path: Path) -> tuple[Path, int, Path]:
    """The small study closed, its respond unit, and a backup of it made by hand."""
    path = tmp_path / "study.prproj"
    with Project.create(path, name="Ward 5") as made:
        unit = build_small_study(made).units["respond"]
    return path, unit, make_backup(path, "manual")


def _full_check(path: Path) -> str:
    with Project.open(path, read_only=True) as project:
        return project.integrity_check()


def test_a_backup_copied_over_the_open_file_takes_no_save(study):
    path, unit, backup = study
    with Project.open(path) as project:
        ava = StudyService(project).as_viewer("ava")
        for n in range(5):
            ava.save_answer(unit, _respond(f"draft {n}"), status="draft")
        shutil.copyfile(backup, path)  # into the same file, as `cp` does
        with pytest.raises(SaveFailed, match="was changed by another program") as refused:
            ava.save_answer(unit, _respond("after the copy"), status="draft")
        assert "Nothing was saved" in str(refused.value)
        with pytest.raises(SaveFailed):  # and every later one
            ava.save_answer(unit, _respond("again"), status="draft")
    assert path.read_bytes() == backup.read_bytes()  # the file put there, as it was
    assert _full_check(path) == "ok"


def test_the_file_s_time_moved_alone_is_no_refusal(study):
    path, unit, _backup = study
    with Project.open(path) as project:
        ava = StudyService(project).as_viewer("ava")
        ava.save_answer(unit, _respond("first"), status="draft")
        later = path.stat().st_mtime_ns + 7_000_000_000
        os.utime(path, ns=(later, later))  # e.g. a network drive setting its own time
        ava.save_answer(unit, _respond("second"), status="draft")
        os.utime(path, ns=(later, later))
        ava.save_answer(unit, _respond("third"), status="draft")
        assert ava.get_answer(unit).payload["parts"]["empathy"] == "third"
    assert _full_check(path) == "ok"


def test_saves_from_several_threads_at_once_are_never_taken_for_another_program(study):
    path, unit, _backup = study
    failures: list[BaseException] = []
    with Project.open(path) as project:
        service = StudyService(project)
        people = [service.as_viewer(name) for name in ("ava", "ben")]

        def save_many(person: StudyService) -> None:
            try:
                for n in range(40):
                    person.save_answer(unit, _respond(f"{n}"), status="draft")
            except BaseException as exc:  # reported below
                failures.append(exc)

        threads = [threading.Thread(target=save_many, args=(p,)) for p in people * 2]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert failures == []
    assert _full_check(path) == "ok"


def test_a_copy_is_seen_while_a_reader_keeps_the_last_saves_in_the_wal(study):
    """A reader holding its snapshot keeps the last saves from being merged into the file:
    read afresh, the -wal's pages over the copy's still showed the newest audit entry this
    program saved, and the save went on into the mixture."""
    path, unit, backup = study
    with Project.open(path) as project:
        ava = StudyService(project).as_viewer("ava")
        ava.save_answer(unit, _respond("first"), status="draft")
        reader = sqlite3.connect(path)  # e.g. another thread's read under way
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM audit_log").fetchone()
            for n in range(3):
                ava.save_answer(unit, _respond(f"draft {n}"), status="draft")
            shutil.copyfile(backup, path)
            with pytest.raises(SaveFailed, match="was changed by another program"):
                ava.save_answer(unit, _respond("after the copy"), status="draft")
        finally:
            reader.close()
        with pytest.raises(SaveFailed, match="was changed by another program"):
            ava.save_answer(unit, _respond("once the reader is done"), status="draft")
    # closing merged the -wal's last saves into the file put there: it is set aside instead
    assert path.read_bytes() == backup.read_bytes()
    assert _full_check(path) == "ok"
    assert len(list(path.parent.glob("study.prproj-wal-of-the-file-replaced-*"))) == 1


def test_a_project_closed_after_a_copy_with_its_last_saves_in_the_wal_leaves_the_copy(study):
    path, unit, backup = study
    with Project.open(path) as project:
        ava = StudyService(project).as_viewer("ava")
        ava.save_answer(unit, _respond("merged into the file"), status="draft")
        reader = sqlite3.connect(path)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM audit_log").fetchone()
            ava.save_answer(unit, _respond("kept in the -wal"), status="draft")
        finally:
            reader.close()
        shutil.copyfile(backup, path)  # and closed with no save tried
    assert path.read_bytes() == backup.read_bytes()
    assert _full_check(path) == "ok"


def test_saves_that_wait_on_a_reader_are_no_refusal_when_only_the_time_moved(study):
    path, unit, _backup = study
    with Project.open(path) as project:
        ava = StudyService(project).as_viewer("ava")
        reader = sqlite3.connect(path)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM audit_log").fetchone()
            for n in range(3):
                ava.save_answer(unit, _respond(f"draft {n}"), status="draft")
                later = path.stat().st_mtime_ns + 7_000_000_000
                os.utime(path, ns=(later, later))  # a network drive setting its own time
        finally:
            reader.close()
        ava.save_answer(unit, _respond("last"), status="draft")
        assert ava.get_answer(unit).payload["parts"]["empathy"] == "last"
    assert _full_check(path) == "ok"
