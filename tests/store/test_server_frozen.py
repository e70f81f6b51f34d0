"""A frozen server (docs/deployment.md, "When the server goes away"): its processes stopped
(SIGSTOP here; a paused virtual machine, a machine swapped to death), it keeps the connection
open and never answers, which no server-side limit or TCP setting catches. A clinician's save
ends in words after the save watchdog's bound, nothing of it kept, and the next save goes on
once the server is back; a connection frozen while idle in the pool is replaced; work that
ends in time, and reads and long writes of any length, are never cut."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest
from sqlalchemy import func, select, text

from portalreview.store.audit_verify import verify_project
from portalreview.store.backends import postgres
from portalreview.store.backends.postgres import ServerUnavailable
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
