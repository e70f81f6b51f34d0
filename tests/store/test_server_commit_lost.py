"""A save whose connection is lost while its COMMIT is under way (docs/deployment.md, "When
the server goes away"): the server may have kept it without saying so. The program asks the
server on a new connection (``pg_xact_status``) and tells the clinician what it learnt: kept
(no error), rolled back ("Nothing was saved"), or not known (it may or may not have been
saved; saving again replaces it). Before, every such save was reported as not saved."""

from __future__ import annotations

import os
import signal
import socket
import time

import psycopg
import pytest
from sqlalchemy import event

from portalreview.store.audit_verify import verify_project
from portalreview.store.backends.postgres import ServerSaveOutcomeUnknown, ServerUnavailable
from portalreview.store.service import StudyService
from tests.store.test_server_frozen import (
    BOUND_S,
    GIVE_UP_S,
    _answers,
    _pooled,
    frozen,
    short_watchdog,  # noqa: F401 (a fixture)
)
from tests.store.test_server_waits import _within


def _first_answer(project, study):
    ava = StudyService(project).as_viewer("ava")
    ava.save_answer(study.units["urgency"], {"more_urgent_case_id": study.case1})
    return ava


def _at_the_next_commit(project, action) -> None:
    """Run ``action(dbapi_connection)`` once, as the next transaction's COMMIT is about to
    be sent."""

    done: list[bool] = []

    def before_commit(conn) -> None:
        if not done:  # (a listener cannot remove itself while the event runs)
            done.append(True)
            action(conn.connection.dbapi_connection)

    event.listen(project._engine, "commit", before_commit)


def _failing_save(ava, study):
    """Her save of the empathy unit, which must fail: its ServerUnavailable."""

    def save() -> ServerUnavailable:
        with pytest.raises(ServerUnavailable) as failure:
            ava.save_answer(study.units["empathy"], {"equal": True})
        return failure.value

    return save


def _wait_for(condition, seconds: float = GIVE_UP_S) -> bool:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_save_the_server_kept_but_did_not_confirm_is_saved(server_study, monkeypatch):
    _server, _database, project, study = server_study
    ava = _first_answer(project, study)
    dialect = project._engine.dialect
    real_commit = dialect.do_commit

    def commit_then_lose_the_answer(dbapi_connection) -> None:
        monkeypatch.setattr(dialect, "do_commit", real_commit)  # this save only
        real_commit(dbapi_connection)  # the server keeps the save...
        link = socket.fromfd(dbapi_connection.pgconn.socket, socket.AF_INET, socket.SOCK_STREAM)
        link.shutdown(socket.SHUT_RDWR)  # ...and its answer is lost on the way back
        link.close()
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(dialect, "do_commit", commit_then_lose_the_answer)
    view = ava.save_answer(study.units["empathy"], {"equal": True})  # no error: it was kept
    assert view.payload == {"equal": True}
    assert _answers(project) == 2
    assert ava.get_answer(study.units["empathy"]).payload == {"equal": True}
    assert verify_project(project).ok


def test_a_save_the_server_rolled_back_says_nothing_was_saved(server_study):
    server, database, project, study = server_study
    ava = _first_answer(project, study)

    def end_the_server_process(dbapi_connection) -> None:
        pid = dbapi_connection.info.backend_pid
        with psycopg.connect(server.dsn(database), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))

    _at_the_next_commit(project, end_the_server_process)
    with pytest.raises(ServerUnavailable) as failure:
        ava.save_answer(study.units["empathy"], {"equal": True})
    assert "Nothing was saved." in str(failure.value)
    assert "may or may not" not in str(failure.value)
    assert not isinstance(failure.value, ServerSaveOutcomeUnknown)
    assert _answers(project) == 1
    ava.save_answer(study.units["empathy"], {"equal": True})  # and saving again works
    assert _answers(project) == 2


def test_a_save_frozen_at_its_commit_may_or_may_not_have_been_saved(
    server_study,
    short_watchdog,  # noqa: F811
):
    """The server froze with the COMMIT in hand: when the watchdog cuts the connection it
    has not kept the save, and once awake it does. "Nothing was saved" would be wrong."""
    _server, _database, project, study = server_study
    ava = _first_answer(project, study)
    pids: list[int] = []

    def freeze(dbapi_connection) -> None:
        pids.append(dbapi_connection.info.backend_pid)
        os.kill(pids[-1], signal.SIGSTOP)

    _at_the_next_commit(project, freeze)
    with frozen(pids) as wake:
        failure = _within(GIVE_UP_S, _failing_save(ava, study), wake)
        assert _answers(project) == 1  # (not kept while the server is frozen)
        assert isinstance(failure, ServerSaveOutcomeUnknown) and failure.kept() is None
    words = str(failure)
    assert f"did not answer for {BOUND_S} s" in words
    assert "It may or may not have been saved (the server had not finished it" in words
    assert "Saving it again replaces it." in words
    assert "Nothing was saved" not in words
    # woken, the server goes on with the COMMIT it had received
    assert _wait_for(lambda: _answers(project) == 2)
    assert failure.kept() is True  # asked again: the session saves again over it (ui/session.py)
    ava.save_answer(study.units["empathy"], {"equal": True})  # saved again: replaced
    assert _answers(project) == 2
    assert verify_project(project).ok
    project.close()
    assert failure.kept() is None  # (closed: not asked)


def test_a_save_whose_fate_cannot_be_asked_says_so(server_study, short_watchdog):  # noqa: F811
    """The connection is lost at the COMMIT and no new one can be made to ask."""
    server, database, project, study = server_study
    ava = _first_answer(project, study)
    pids: list[int] = []

    def refuse(*_args) -> None:
        raise psycopg.OperationalError("connection refused")

    def freeze_everything(dbapi_connection) -> None:
        pids.extend({dbapi_connection.info.backend_pid} | _pooled(server, database))
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        event.listen(project._engine, "do_connect", refuse)

    _at_the_next_commit(project, freeze_everything)
    with frozen(pids) as wake:
        failure = _within(GIVE_UP_S + BOUND_S, _failing_save(ava, study), wake)
    event.remove(project._engine, "do_connect", refuse)
    words = str(failure)
    assert "It may or may not have been saved (the server could not be asked" in words
    assert "Nothing was saved" not in words
