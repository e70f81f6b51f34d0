"""A project file that cannot take a save (the disk full, an I/O error): the save is refused
with a StoreError that says what is wrong in words, nothing of it is kept, and the next save
after the trouble is over goes through."""

from __future__ import annotations

import contextlib
import resource
import signal
from collections.abc import Iterator

import pytest
from sqlalchemy import event, text

from portalreview.store.audit_verify import verify_project
from portalreview.store.service import SaveFailed, StoreError

LONG = "I am sorry you are hurting. " * 800  # needs new pages in the file


@contextlib.contextmanager
def full_disk(project) -> Iterator[None]:
    """The disk holding ``project`` is full: SQLite may not grow the file beyond the pages it
    has (``max_page_count`` on each connection the project hands out; SQLITE_FULL)."""

    def no_more_pages(dbapi_connection, _record, _proxy) -> None:
        pages = dbapi_connection.execute("PRAGMA page_count").fetchone()[0]
        dbapi_connection.execute(f"PRAGMA max_page_count = {pages}")

    engine = project._engine
    event.listen(engine, "checkout", no_more_pages)
    try:
        yield
    finally:
        event.remove(engine, "checkout", no_more_pages)
        engine.dispose()  # connections made from now on have room again


@contextlib.contextmanager
def failing_writes() -> Iterator[None]:
    """Every write to a file fails, as on a disk that reports errors (RLIMIT_FSIZE 0: SQLite
    says "disk I/O error")."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def _respond(text: str) -> dict:
    return {"mode": "theme_guided", "parts": {"empathy": text}}


@pytest.mark.parametrize(
    ("trouble", "words"),
    [(full_disk, "is full"), (lambda _project: failing_writes(), "I/O error")],
    ids=["disk full", "I/O error"],
)
def test_a_save_the_file_cannot_take_is_refused_in_words(study, trouble, words):
    project = study.service.project
    ava = study.service.as_viewer("ava")
    unit = study.units["respond"]
    ava.save_answer(unit, _respond("First part."))
    with trouble(project), pytest.raises(SaveFailed) as refused:
        ava.save_answer(unit, _respond(LONG))
    message = str(refused.value)
    assert isinstance(refused.value, StoreError)
    assert words in message and "Nothing was saved" in message
    assert project.label in message and "sorry" not in message  # never the answer's text
    assert ava.get_answer(unit).payload["parts"]["empathy"] == "First part."
    ava.save_answer(unit, _respond(LONG))  # once there is room again, it saves
    assert ava.get_answer(unit).payload["parts"]["empathy"] == LONG
    assert verify_project(project).ok


def test_an_import_the_file_cannot_take_is_refused_in_words(study, tmp_path):
    """An import on a full disk: ImportFailed in the save's words, without SQLAlchemy's text
    (which quoted the row being written: a patient's message), and nothing imported."""
    from portalreview.store.importers import ImportFailed, import_files

    project = study.service.project
    table = tmp_path / "cases.csv"
    rows = [f"big-{i},My chest has hurt since this morning. {LONG}" for i in range(20)]
    table.write_text("case_id,message\n" + "\n".join(rows) + "\n", encoding="utf-8")
    before = _cases(project)
    with full_disk(project), pytest.raises(ImportFailed) as refused:
        import_files(project, [table])
    message = str(refused.value)
    assert "is full" in message and "Nothing was saved" in message
    assert "chest" not in message and refused.value.__cause__ is None
    assert _cases(project) == before


def _cases(project) -> int:
    with project.read() as s:
        return s.scalar(text("SELECT count(*) FROM cases"))
