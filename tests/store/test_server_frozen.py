"""A frozen server (docs/deployment.md, "When the server goes away"): its processes stopped
(SIGSTOP here; a paused virtual machine, a machine swapped to death), it keeps the connection
open and never answers, which no server-side limit or TCP setting catches. A clinician's save
ends in words after the save watchdog's bound, nothing of it kept, and the next save goes on
once the server is back; a connection frozen while idle in the pool is replaced; work that
ends in time, and reads and long writes of any length, are never cut. A clinician's read (the
unit, the list of units her window opens) ends in words after the read watchdog's bound, and
reads again once the server is back; the long reads of the PI's dashboard, reports and
adjudication wait for as long as they need."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from sqlalchemy import event, func, select, text

from portalreview.store.audit_verify import verify_project
from portalreview.store.backends import postgres
from portalreview.store.backends.postgres import ServerUnavailable
from portalreview.store.frames import read_frames
from portalreview.store.models import Answer
from portalreview.store.service import StudyService
from tests.store.test_server_waits import _within

BOUND_S = 2  # the watchdog's bound in these tests (30 s in use)
# Longer than any wait these tests expect: before the fix, a save to a frozen server waited
# for as long as it stayed frozen (then the test unfreezes it and fails)
GIVE_UP_S = 12.0


@pytest.fixture
def short_watchdog(monkeypatch):
    # (raising=False: on code without the watchdog the tests run, and fail, rather than error)
    monkeypatch.setattr(postgres, "SAVE_WATCHDOG_S", BOUND_S, raising=False)
    monkeypatch.setattr(postgres, "READ_WATCHDOG_S", BOUND_S, raising=False)


@contextlib.contextmanager
def frozen(pids: list[int]) -> Iterator[Callable[[], None]]:
    """Stop the server processes ``pids`` (SIGSTOP; more may be added, and stopped, in the
    block); the block gets a function that wakes them (SIGCONT), which its end always does."""

    def wake() -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)

    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield wake
    finally:
        wake()


@contextlib.contextmanager
def freezing_the_next_read(
    project, pids: list[int], on_thread: threading.Thread | None = None
) -> Iterator[None]:
    """In the block, the server freezes as the next read (on ``on_thread``, if given) sends
    its first statement: its process is stopped (SIGSTOP) and added to ``pids``, so that
    :func:`frozen`'s end wakes it. Writes go on."""

    def freeze(conn, *_statement) -> None:
        if pids or conn.get_execution_options().get("portalreview_writes"):
            return
        if on_thread is not None and threading.current_thread() is not on_thread:
            return
        pids.append(conn.connection.dbapi_connection.info.backend_pid)
        os.kill(pids[-1], signal.SIGSTOP)

    event.listen(project._engine, "before_cursor_execute", freeze)
    try:
        yield
    finally:
        event.remove(project._engine, "before_cursor_execute", freeze)


def _answers(project) -> int:
    with project.read() as s:
        return s.scalar(select(func.count()).select_from(Answer))


def _pooled(server, database) -> set[int]:
    """The server processes behind the connections of the study's pool (the program's)."""
    with psycopg.connect(server.dsn(database), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'PortalReview'"
        )
        return {pid for (pid,) in rows}


def test_a_save_the_frozen_server_leaves_unanswered_ends_in_words(
    server_study, short_watchdog, monkeypatch
):
    _server, _database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    real_audit = type(ava)._audit
    pids: list[int] = []

    def freeze_then_audit(self, s, *args):
        s.flush()  # the answer's rows are written, in the open transaction, the lock held
        pids.append(s.scalar(text("SELECT pg_backend_pid()")))
        os.kill(pids[-1], signal.SIGSTOP)  # the server freezes in the middle of the save
        return real_audit(self, s, *args)

    def save():
        with pytest.raises(ServerUnavailable) as failure:
            ava.save_answer(study.units["rank"], {"entries": []})
        return failure.value

    monkeypatch.setattr(type(ava), "_audit", freeze_then_audit)
    with frozen(pids) as wake:
        started = time.monotonic()
        failure = _within(GIVE_UP_S, save, wake)
        waited = time.monotonic() - started
        monkeypatch.setattr(type(ava), "_audit", real_audit)
        assert BOUND_S <= waited < BOUND_S + 4  # (slack for a loaded machine)
        assert f"did not answer for {BOUND_S} s" in str(failure)
        assert "Nothing was saved" in str(failure)
    assert _answers(project) == 1  # the server, woken, rolled the cut save back
    # and the same save goes through on a new connection once the old one is gone
    _within(GIVE_UP_S, lambda: ava.save_answer(study.units["rank"], {"entries": []}), wake)
    assert _answers(project) == 2
    assert verify_project(project).ok


def test_a_connection_frozen_while_idle_in_the_pool_is_replaced(server_study, short_watchdog):
    server, database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    with frozen(list(_pooled(server, database))) as wake:  # while she reads a case
        started = time.monotonic()
        _within(GIVE_UP_S, lambda: ava.save_answer(study.units["empathy"], {"equal": True}), wake)
        assert time.monotonic() - started < BOUND_S + 4  # checked, cut, and saved anew
    assert _answers(project) == 2
    assert verify_project(project).ok


def test_work_that_ends_in_time_is_never_cut(server_study, short_watchdog, caplog):
    server, database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    pooled = _pooled(server, database)
    time.sleep(BOUND_S + 1)  # past the bound of the save above: its deadline was ended
    ava.save_answer(study.units["empathy"], {"equal": True})
    # reads and long writes may take longer than a save's bound
    with project.read() as s:
        s.execute(text("SELECT pg_sleep(:s)"), {"s": BOUND_S + 0.5})
    with project.write() as s:
        s.execute(text("SELECT pg_sleep(:s)"), {"s": BOUND_S + 0.5})
    assert _pooled(server, database) == pooled  # the same connections: none cut or replaced
    assert _answers(project) == 2
    assert "did not answer" not in caplog.text


def test_a_clinicians_first_save_reads_the_catalogs_within_itself(server_study, short_watchdog):
    """The first save of her window's service reads the study's catalogs in the save's own
    transaction, under the save's bound and words: a second transaction beside it, on a
    frozen server, waited for ever (and, bounded, would say "Nothing was read")."""
    _server, _database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")  # (as her window's, catalogs not yet read)
    pids: list[int] = []
    with frozen(pids) as wake, freezing_the_next_read(project, pids):
        _within(GIVE_UP_S, lambda: ava.save_answer(study.units["empathy"], {"equal": True}), wake)
    assert not pids  # no read beside the save
    assert _answers(project) == 1


CLINICIANS_READS = {
    "unit": lambda ava, study: ava.read_unit(study.units["respond"]),
    "answer": lambda ava, study: ava.get_answer(study.units["urgency"]),
    "list of units": lambda ava, study: ava.queue("respond"),
    "progress": lambda ava, study: ava.progress_by_kind(),
}


@pytest.mark.parametrize("read", list(CLINICIANS_READS))
def test_a_clinicians_read_the_frozen_server_leaves_unanswered_ends_in_words(
    server_study, short_watchdog, read
):
    _server, _database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    what = CLINICIANS_READS[read]
    shown = what(ava, study)
    pids: list[int] = []

    def read_in_vain():
        with pytest.raises(ServerUnavailable) as failure:
            what(ava, study)
        return failure.value

    with frozen(pids) as wake, freezing_the_next_read(project, pids):
        started = time.monotonic()
        failure = _within(GIVE_UP_S, read_in_vain, wake)
        waited = time.monotonic() - started
    assert pids  # (the server froze in the middle of the read)
    assert BOUND_S <= waited < BOUND_S + 4  # (slack for a loaded machine)
    assert f"did not answer for {BOUND_S} s" in str(failure)
    assert "(it may be stopped or overloaded). Nothing was read." in str(failure)
    # the same read, once the server is back, on a new connection
    assert _within(GIVE_UP_S, lambda: what(ava, study), wake) == shown


def _answers_held(server, database, seconds: float) -> threading.Thread:
    """Another session holds the answers table (as a long change would) for ``seconds``: a
    read of it waits that long, its server answering nothing meanwhile."""
    held = threading.Event()

    def hold() -> None:
        with psycopg.connect(server.dsn(database)) as conn:
            conn.execute("LOCK TABLE answers IN ACCESS EXCLUSIVE MODE")
            held.set()
            time.sleep(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    return holder


LONG_READS = {
    "dashboard and reports": lambda project, study: read_frames(project),
    "adjudication": lambda project, study: StudyService(project).answers_for_units(
        list(study.units.values())
    ),
}


@pytest.mark.parametrize("read", list(LONG_READS))
def test_long_reads_wait_past_the_bound_and_are_never_cut(
    server_study, short_watchdog, caplog, read
):
    server, database, project, study = server_study
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    pooled = _pooled(server, database)
    holder = _answers_held(server, database, BOUND_S + 1.5)
    started = time.monotonic()
    try:
        LONG_READS[read](project, study)
        assert time.monotonic() - started > BOUND_S + 0.5  # it did wait past the bound
    finally:
        holder.join()
    assert _pooled(server, database) == pooled  # the same connections: none cut or replaced
    assert "did not answer" not in caplog.text


def test_opening_a_study_on_a_frozen_server_ends_in_words(
    server_study, short_watchdog, monkeypatch
):
    """The server freezes as the study is being opened (its first query): the open gives up
    after the read watchdog's bound, in words; before, it waited for as long as the server
    stayed frozen (the window's "Opening…" cannot be cancelled)."""
    server, database, _project, _study = server_study
    real_make_engine = postgres._make_engine
    pids: list[int] = []

    def freeze_first_query(conn, *_statement) -> None:
        if not pids:
            pids.append(conn.connection.dbapi_connection.info.backend_pid)
            os.kill(pids[-1], signal.SIGSTOP)

    def freezing_engine(url):
        engine = real_make_engine(url)
        event.listen(engine, "before_cursor_execute", freeze_first_query)
        return engine

    def open_in_vain():
        with pytest.raises(ServerUnavailable) as failure:
            postgres.ServerProject.open(server.url(database))
        return failure.value

    monkeypatch.setattr(postgres, "_make_engine", freezing_engine)
    with frozen(pids) as wake:
        started = time.monotonic()
        failure = _within(GIVE_UP_S, open_in_vain, wake)
        waited = time.monotonic() - started
    assert pids and BOUND_S <= waited < BOUND_S + 4
    assert f"did not answer for {BOUND_S} s (it may be stopped or overloaded)" in str(failure)
    monkeypatch.setattr(postgres, "_make_engine", real_make_engine)
    postgres.ServerProject.open(server.url(database)).close()  # and opens once it is back
